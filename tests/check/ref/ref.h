/*
 * ref.h -- an independent reference for the checker (issue 30, item 3).
 *
 * The contract (shared/spec/trace-text-format.md with its rulings, plus the
 * documented extensions of docs/trace-format.md and docs/semantics.md) is
 * computed here by brute force over small traces: an explicit node graph of
 * what each statement must wait for, a fixpoint for which statements can
 * ever run, ancestor sets for happens-before, and every pair of accesses
 * compared. It shares nothing with check/: it has its own model of a trace
 * (ref_trace, statements as data), its own text writer and a small parser
 * of its own (for the litmus traces), and decides event binding,
 * generations, message pairing and releases itself. The checker is run only
 * through its public API, on the text this library prints (ref_diff.c).
 *
 * Files: ref_text.c (model, writer, parser), ref_eval.c (the semantics:
 * its head comment states the rules with their citations and the readings
 * taken where the contract is open), ref_gen.c (random generators),
 * ref_diff.c (checker side, comparison, shrinking).
 *
 * Limits: the model holds at most REF_MAX_STMTS statements, REF_MAX_QUEUES
 * queues, REF_MAX_BUFS buffers and REF_MAX_NAMES names; the parser refuses
 * bigger inputs (returns -1 with a message), the generators stay below.
 * The evaluator, the diff and the generators keep their working state in
 * static memory (a trace's graph is ~100 KB): not reentrant, so ref_diff
 * runs jobs as forked processes.
 */
#ifndef SYNCSIM_TESTS_REF_H
#define SYNCSIM_TESTS_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define REF_MAX_STMTS 128
#define REF_MAX_QUEUES 32
#define REF_MAX_BUFS 24
#define REF_MAX_NAMES 192
#define REF_NAME_LEN 40
#define REF_MAX_ACC 6
#define REF_MAX_EXPECT 24
#define REF_MAX_KV 8
#define REF_MAX_IV 48
#define REF_MAX_UAF 256
#define REF_NONE 0xffffu

/* Statement kinds (copy is an op with r:SRC w:DST, as the contract says). */
typedef enum {
    REF_OP = 0,
    REF_RECORD,
    REF_WAIT,
    REF_SYNC,
    REF_BARRIER,
    REF_SIGNAL,
    REF_AWAIT,
    REF_COLLECTIVE,
    REF_ALLOC,
    REF_FREE,
    REF_SEND,
    REF_RECV,
    REF_KIND_COUNT
} ref_kind;

enum { REF_SYNC_QUEUE = 0, REF_SYNC_DEVICE = 1, REF_SYNC_ALL = 2 };
enum { REF_R = 1, REF_W = 2, REF_RW = 3 };

typedef struct ref_access {
    uint16_t buf;           /* buffer index as named (root or view) */
    uint8_t mode;           /* REF_R, REF_W, REF_RW */
    uint32_t lo, hi;        /* [lo, hi) relative to the named buffer */
} ref_access;

typedef struct ref_stmt {
    uint8_t kind;           /* ref_kind */
    uint8_t n_acc;
    uint8_t scope;          /* sync: REF_SYNC_* */
    uint16_t queue;
    uint16_t by;            /* submitting host queue (stream statements), REF_NONE */
    uint16_t label;         /* name id, REF_NONE */
    uint16_t obj;           /* name id of the event, flag, semaphore, barrier or
                             * communicator; sync: the queue (QUEUE) or the device
                             * name id (DEVICE); alloc/free: the buffer index */
    uint16_t coll_kind;     /* collective KIND (name id) */
    uint32_t count;         /* barrier count=, collective size=, semaphore value, tag= */
    uint32_t from, to;      /* send/recv ranks */
    uint32_t line;          /* source line (parsed) or printed line */
    ref_access acc[REF_MAX_ACC];
} ref_stmt;

typedef struct ref_queue {
    uint16_t name;
    bool host;
    uint16_t device;        /* name id (streams), REF_NONE for hosts */
    int16_t rank;           /* N of an `rN.` name prefix, -1 when none (ruling 4) */
} ref_queue;

typedef struct ref_buffer {
    uint16_t name;
    uint32_t size;
    uint16_t parent;        /* REF_NONE: a root */
    uint32_t offset;        /* in the parent */
    uint16_t root;
    uint32_t root_off;
} ref_buffer;

/* An expect line as written (litmus traces): its finding word and keys. */
typedef struct ref_expect {
    char kind[24];
    uint8_t n_kv;
    char key[REF_MAX_KV][12];
    char val[REF_MAX_KV][REF_NAME_LEN];
} ref_expect;

typedef struct ref_trace {
    char names[REF_MAX_NAMES][REF_NAME_LEN];
    uint16_t n_names;
    ref_queue q[REF_MAX_QUEUES];
    uint16_t n_queues;
    ref_buffer b[REF_MAX_BUFS];
    uint16_t n_bufs;
    uint16_t sems[16];      /* name ids declared `semaphore` */
    uint16_t n_sems;
    ref_stmt s[REF_MAX_STMTS];
    uint16_t n;
    ref_expect e[REF_MAX_EXPECT];
    uint16_t n_expect;
} ref_trace;

/* ---- ref_text.c: building, printing and parsing the model ---------- */

/* Text appended to a buffer of cap bytes, always NUL-terminated; len counts
 * what was asked for, so len >= cap means it did not fit. */
typedef struct ref_buf {
    char *buf;
    size_t cap, len;
} ref_buf;
void ref_bprintf(ref_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void ref_init(ref_trace *t);
/* Interns a name; REF_NONE when the table is full. */
uint16_t ref_name(ref_trace *t, const char *s);
uint16_t ref_find_name(const ref_trace *t, const char *s);
/* Declarations; each returns the index (REF_NONE when full). */
uint16_t ref_add_host(ref_trace *t, const char *name);
uint16_t ref_add_stream(ref_trace *t, const char *name, const char *device);
uint16_t ref_add_buffer(ref_trace *t, const char *name, uint32_t size);
uint16_t ref_add_view(ref_trace *t, const char *name, uint16_t parent, uint32_t offset,
                      uint32_t size);
void ref_add_sem(ref_trace *t, uint16_t name);
bool ref_is_sem(const ref_trace *t, uint16_t name);
uint16_t ref_find_queue(const ref_trace *t, const char *name);
uint16_t ref_find_buffer(const ref_trace *t, const char *name);
/* Appends a statement (copied); its line is set when printed. NULL when full. */
ref_stmt *ref_push(ref_trace *t, const ref_stmt *s);
/* A statement with every optional field absent. */
ref_stmt ref_stmt_new(uint16_t queue, ref_kind kind);
/* Deletes statement i (the others keep their order). */
void ref_delete(ref_trace *t, uint16_t i);

/* Writes t as a text trace (header, the declarations its statements use,
 * the statements with explicit by=, then its expect lines), setting each
 * statement's line to where it is written. Returns the length written into
 * buf (at most cap - 1 bytes, NUL-terminated); >= cap when it did not fit. */
size_t ref_print(ref_trace *t, char *buf, size_t cap);
/* The name a finding uses for statement i: its label, else Q@LINE. */
const char *ref_stmt_name(const ref_trace *t, uint16_t i, char *buf, size_t cap);

/* Parses a text trace (the subset of the format the litmus traces use:
 * no quoted names). Stream statements without by= get the only host, when
 * the trace declares exactly one. Returns 0, or -1 with a one-line message
 * in err (FILE:LINE: what). */
int ref_parse(ref_trace *t, const char *name, const char *text, char *err, size_t cap);
int ref_parse_file(ref_trace *t, const char *path, char *err, size_t cap);

/* ---- ref_eval.c: the contract's verdict ----------------------------- */

#define REF_WORDS ((REF_MAX_STMTS + 63) / 64)
typedef struct ref_bits { uint64_t w[REF_WORDS]; } ref_bits;

/* A set of byte intervals [lo, hi), sorted and merged. */
typedef struct ref_ivset {
    uint16_t n;
    bool overflow;          /* more than REF_MAX_IV pieces: compare not trusted */
    uint32_t lo[REF_MAX_IV], hi[REF_MAX_IV];
} ref_ivset;

void ref_iv_clear(ref_ivset *s);
void ref_iv_add(ref_ivset *s, uint32_t lo, uint32_t hi);
void ref_iv_union(ref_ivset *dst, const ref_ivset *src);
/* dst becomes the bytes in both. */
void ref_iv_intersect(ref_ivset *dst, const ref_ivset *src);
/* The bytes of a not in b (the first piece), false when a is inside b. */
bool ref_iv_minus_first(const ref_ivset *a, const ref_ivset *b, uint32_t *lo, uint32_t *hi);

#define REF_NAME_WORDS ((REF_MAX_NAMES + 63) / 64)
typedef struct ref_names { uint64_t w[REF_NAME_WORDS]; } ref_names;

typedef struct ref_uaf { uint16_t stmt, root; } ref_uaf;

/*
 * The contract's verdict on a trace. Where ruling 1 lets the order in which
 * blocked awaits are decided change the outcome, it is the outcome of the
 * order docs/semantics.md documents (the blocked awaits decided in file
 * order: ref_eval.c); order_matters says that another order gives another
 * HB (order_matters_run: other statements run), for the counts only.
 */
typedef struct ref_verdict {
    bool ran[REF_MAX_STMTS];        /* the statement can run (ruling 1: a deadlock never runs) */
    uint32_t blocked;               /* bit q: queue q has a statement that never runs */
    ref_bits hb[REF_MAX_STMTS];     /* bit a of hb[b]: statement a HB statement b */
    ref_bits unordered[REF_MAX_STMTS];  /* bit a of unordered[b] (a < b): a and b ran, conflict
                                     * and are not ordered */
    ref_ivset racy[REF_MAX_BUFS];   /* per root: bytes with an unordered conflicting pair */
    uint32_t n_race_pairs;
    ref_uaf uaf[REF_MAX_UAF];       /* (access statement, root) */
    uint16_t n_uaf;
    bool uaf_overflow;
    bool wait_unrecorded[REF_MAX_STMTS];
    ref_names barrier_mismatch, coll_mismatch, unmatched_send, sem_race;
    /* Where the contract leaves the verdict open (counted apart; only the
     * semaphore-race finding is compared): two sets of one semaphore that HB
     * does not order (docs/semantics.md: "the checker goes on with the sets
     * in the order they ran"). */
    bool ambiguous_sem;
    bool order_matters;     /* another order of deciding ruling 1 gives another HB */
    bool order_matters_run; /* ... and other statements run */
    unsigned outcomes;      /* orders of deciding ruling 1's releases tried (up to 64) */
} ref_verdict;

bool ref_names_has(const ref_names *s, uint16_t id);
/* Statement a happens before statement b in v. */
bool ref_hb(const ref_verdict *v, uint16_t a, uint16_t b);

/* The verdict of the contract on t. */
void ref_eval(const ref_trace *t, ref_verdict *v);

/* Conflict between statements a and b (file order a < b) as the contract
 * defines a race: the root of their overlapping bytes with at least one
 * write (the first root found, REF_NONE when none), those bytes, and the
 * race types seen (TRACE_RACE_* bits: RAW 1, WAR 2, WAW 4, first = a).
 * except (may be NULL): bytes left out of the types (not of bytes). */
uint16_t ref_conflict(const ref_trace *t, uint16_t a, uint16_t b, uint16_t root_only,
                      const ref_ivset *except, ref_ivset *bytes, uint8_t *types);
/* The type the contract's findings name for a type set: RAW, then WAW, then WAR. */
uint8_t ref_race_type(uint8_t types);
/* Whether a checker may name `type` (one bit) for the race of statements
 * a < b on root (ref_eval.c, "race type"): a type they have on some byte,
 * at least as telling as their type on the bytes where no other statement
 * can come between them (in an order of execution HB allows) and make one
 * of them not "most recent"; *need gets that least type (0: none). */
bool ref_race_type_ok(const ref_trace *t, const ref_verdict *v, uint16_t a, uint16_t b,
                      uint16_t root, uint8_t type, uint8_t *need);

/* Compares v with t's expect lines; writes what differs into why (one line
 * per difference) and returns true when they agree. Races: every expected
 * pair is an unordered conflict of the type given, no other kind is found,
 * and every racy byte is covered by an expected pair (FastTrack's latitude:
 * the contract fixes which bytes race, not which pairs are named). */
bool ref_expect_agrees(const ref_trace *t, const ref_verdict *v, char *why, size_t cap);

/* ---- ref_diff.c: the checker side ---------------------------------- */

/* Disagreement classes, one bit each. */
#define REF_CLASS_MAP(X)                                                                   \
    X(HANG_MISSED, "hang-missed", "the reference hangs, the checker reports no hang")      \
    X(HANG_FALSE, "hang-false", "the checker reports a hang, every queue runs")            \
    X(HANG_QUEUES, "hang-queues", "both hang, naming different queues")                   \
    X(RACE_MISSED, "race-missed", "bytes that race are covered by no reported race")      \
    X(RACE_FALSE, "race-false", "a reported race is ordered, not a conflict, or never runs") \
    X(RACE_TYPE, "race-type", "a reported race names another type")                       \
    X(UAF_MISSED, "uaf-missed", "a use after free is not reported")                       \
    X(UAF_FALSE, "uaf-false", "a reported use after free is not one")                     \
    X(WAIT_UNRECORDED, "wait-unrecorded", "wait-unrecorded findings differ")              \
    X(BARRIER_MISMATCH, "barrier-mismatch", "barrier-mismatch findings differ")           \
    X(COLL_MISMATCH, "collective-mismatch", "collective-mismatch findings differ")        \
    X(UNMATCHED_SEND, "unmatched-send", "unmatched-send findings differ")                 \
    X(SEM_RACE, "semaphore-race", "semaphore-race findings differ")                       \
    X(CHECKER_ERROR, "checker-error", "the checker refused the trace or failed")

typedef enum {
#define REF_CLASS_ENUM(name, word, what) REF_CLASS_##name,
    REF_CLASS_MAP(REF_CLASS_ENUM)
#undef REF_CLASS_ENUM
    REF_CLASS_COUNT
} ref_class;

const char *ref_class_word(int c);
const char *ref_class_what(int c);

/* Finding kinds the reference found, one bit each, for coverage counts. */
#define REF_FOUND_MAP(X)                     \
    X(CLEAN, "clean")                        \
    X(RACE, "race")                          \
    X(HANG, "hang")                          \
    X(UAF, "use-after-free")                 \
    X(WAIT_UNRECORDED, "wait-unrecorded")    \
    X(BARRIER_MISMATCH, "barrier-mismatch")  \
    X(COLL_MISMATCH, "collective-mismatch")  \
    X(UNMATCHED_SEND, "unmatched-send")      \
    X(SEM_RACE, "semaphore-race")            \
    X(AMBIGUOUS_SEM, "sem-order")            \
    X(ORDER_HB, "order-hb")                  \
    X(ORDER_RUN, "order-run")

typedef enum {
#define REF_FOUND_ENUM(name, word) REF_FOUND_##name,
    REF_FOUND_MAP(REF_FOUND_ENUM)
#undef REF_FOUND_ENUM
    REF_FOUND_COUNT
} ref_found;

const char *ref_found_word(int k);
/* The kinds v holds, one bit per ref_found. */
uint32_t ref_found_mask(const ref_trace *t, const ref_verdict *v);

/* Set with the classes when the checker left a use after free unjudged and
 * its coverage says so: no disagreement. */
#define REF_DIFF_UNJUDGED (1u << 31)

/* Runs the checker (check_trace, public API) on t's text and compares its
 * findings with v, the reference's verdict on t. Returns the disagreement
 * classes (bits of ref_class; 0: they agree) and writes one line per
 * difference into why (may be NULL). Ambiguous verdicts compare only what
 * the ambiguity leaves fixed. */
uint32_t ref_diff(ref_trace *t, const ref_verdict *v, char *why, size_t cap);

/* Deletes statements of t one at a time, keeping each deletion while
 * ref_diff still reports a class of want, until no deletion keeps it.
 * Returns the classes of the shrunk trace (0 when t did not disagree). */
uint32_t ref_shrink(ref_trace *t, uint32_t want);

/* ---- ref_gen.c: random traces -------------------------------------- */

/* The generators, each aiming at some rulings (names in ref_gen.c). */
int ref_gen_count(void);
const char *ref_gen_name(int g);
/* Fills t with a random trace from seed; returns the generator used. */
int ref_generate(ref_trace *t, uint64_t seed);
/* The seed of trace i of a run with seed s: distinct for every (s, i). */
uint64_t ref_trace_seed(uint64_t s, uint64_t i);

/* ---- one differential run, for the test and the driver -------------- */

typedef struct ref_run_stats {
    uint64_t traces;
    uint64_t unjudged;      /* traces with a use after free the checker did not judge */
    uint64_t by_gen[16];
    uint64_t found[REF_FOUND_COUNT];            /* traces with each kind */
    uint64_t found_by_gen[16][REF_FOUND_COUNT];
    uint64_t disagree;                          /* traces with any class */
    uint64_t order_disagree;    /* of the traces where ruling 1's decision order matters */
    uint64_t classes[REF_CLASS_COUNT];          /* traces with each class */
    uint64_t class_by_gen[16][REF_CLASS_COUNT];
    uint64_t first_index[REF_CLASS_COUNT];      /* first trace index per class, UINT64_MAX */
} ref_run_stats;

void ref_stats_init(ref_run_stats *st);
void ref_stats_add(ref_run_stats *dst, const ref_run_stats *src);
/* Checks trace index i of seed s: generates, evaluates, diffs; adds to st.
 * Returns the disagreement classes (without REF_DIFF_UNJUDGED). */
uint32_t ref_run_one(uint64_t seed, uint64_t i, ref_run_stats *st);
/* Prints the counts per generator and per finding kind, then the classes. */
void ref_stats_print(FILE *out, const ref_run_stats *st);

#endif
