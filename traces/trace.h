/*
 * trace.h -- the trace model: the spine every part of syncsim shares.
 *
 * A trace is what a multi-queue program did, in the vocabulary of
 * docs/trace-format.md (the text format, version 1):
 *
 *   - declarations: queues (host threads, in-order device streams),
 *     buffers (roots and views: byte ranges of a parent), and
 *     expectations (`expect` lines of a self-checking trace);
 *   - statements in submission order (seq 0, 1, 2, ...), each executed by
 *     one queue: compute and copies with byte-range accesses, and the
 *     synchronisation verbs (record/wait, sync, barrier, signal/await,
 *     collective, alloc/free), with optional attributes, observed times
 *     and the host that submitted them.
 *
 * Every string (names, labels, attribute keys and values, device names) is
 * interned in the trace's string table and referred to by a uint32_t id;
 * queues and buffers are referred to by their index in the declaration
 * tables. TRACE_NONE marks "absent" for any id or index.
 *
 * Declarations live in a `trace` and are small (thousands of queues and
 * buffers at most). Statements can be many millions, so they flow through a
 * `trace_reader`: a pull interface that yields one statement at a time in
 * submission order. The text parser, the SQLite store and an in-memory
 * trace are readers; the checker, the exporters and replay consume readers
 * and never need a whole trace in memory. A reader may declare new queues
 * and buffers in its trace as it goes (the text format allows declarations
 * anywhere before first use); a statement only refers to declarations that
 * already exist when it is returned.
 *
 * Producers that run programs (the scheduler's backends, simulated or real)
 * write through the recorder (traces/recorder.c, see trace_recorder_*),
 * which is thread-safe and flushes to SQLite in batches.
 */
#ifndef SYNCSIM_TRACE_H
#define SYNCSIM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TRACE_NONE UINT32_MAX
/* A statement's label that a lazy reader has not resolved yet (see
 * trace_reader_label): it has one, but building it costs what a checker
 * need not pay unless it reports the statement. */
#define TRACE_LABEL_LAZY (UINT32_MAX - 1)
#define TRACE_TEXT_VERSION 1

/* ------------------------------------------------------------------ */
/* Status codes: one list gives the enum and the messages.             */

#define TRACE_STATUS_MAP(X)                                              \
    X(OK, "ok")                                                          \
    X(ESYNTAX, "malformed trace")                                        \
    X(EIO, "input/output error")                                         \
    X(ENOMEM, "out of memory")                                           \
    X(ENOTTRACE, "not a syncsim trace database")                         \
    X(EVERSION, "unsupported version")                                   \
    X(ECORRUPT, "corrupt or truncated database")                         \
    X(ENORUN, "no such run")                                             \
    X(EUSAGE, "invalid argument")                                        \
    X(EDB, "database error")                                             \
    X(EBUSY, "run being written")

typedef enum {
#define TRACE_STATUS_ENUM(name, msg) TRACE_##name,
    TRACE_STATUS_MAP(TRACE_STATUS_ENUM)
#undef TRACE_STATUS_ENUM
} trace_status;

/* The fixed message of a status code (never NULL). */
const char *trace_status_str(trace_status st);

/* An error for the user: the status and one line that names the file and
 * place (file:line:column, or database and table) and what was expected. */
typedef struct trace_error {
    trace_status status;
    char msg[768];
} trace_error;

/* Sets err (if non-NULL) to st with a printf-style message; returns st. */
trace_status trace_error_set(trace_error *err, trace_status st,
                             const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------ */
/* Vocabulary.                                                         */

typedef enum {
    TRACE_QUEUE_HOST = 0,   /* a host thread: program order */
    TRACE_QUEUE_STREAM = 1, /* an in-order device queue */
} trace_queue_kind;

typedef struct trace_queue {
    uint32_t name;          /* string id */
    trace_queue_kind kind;
    uint32_t device;        /* string id of D in device=D; TRACE_NONE for hosts */
} trace_queue;

/* Where a root buffer lives. Views inherit their root's place. */
typedef enum {
    TRACE_LOC_UNSPECIFIED = 0,  /* neither device= nor host given */
    TRACE_LOC_HOST = 1,
    TRACE_LOC_DEVICE = 2,
} trace_loc;

typedef struct trace_buffer {
    uint32_t name;          /* string id */
    uint64_t size;          /* bytes, >= 1 */
    uint32_t parent;        /* buffer index of the parent; TRACE_NONE for a root */
    uint64_t offset;        /* byte offset in the parent (views only) */
    trace_loc loc;          /* roots only */
    uint32_t device;        /* string id of D (loc == DEVICE); else TRACE_NONE */
    bool pinned;            /* roots only */
    /* Derived when declared: the root buffer and this buffer's offset in it. */
    uint32_t root;
    uint64_t root_offset;
} trace_buffer;

#define TRACE_KIND_MAP(X)        \
    X(OP, "op")                  \
    X(COPY, "copy")              \
    X(RECORD, "record")          \
    X(WAIT, "wait")              \
    X(SYNC, "sync")              \
    X(BARRIER, "barrier")        \
    X(SIGNAL, "signal")          \
    X(AWAIT, "await")            \
    X(COLLECTIVE, "collective")  \
    X(ALLOC, "alloc")            \
    X(FREE, "free")              \
    X(SEND, "send")              \
    X(RECV, "recv")

typedef enum {
#define TRACE_KIND_ENUM(name, word) TRACE_##name,
    TRACE_KIND_MAP(TRACE_KIND_ENUM)
#undef TRACE_KIND_ENUM
    TRACE_KIND_COUNT
} trace_kind;

/* The verb of a statement kind ("op", "copy", ...). */
const char *trace_kind_str(trace_kind k);
/* The kind of a verb; returns -1 when the word is not a verb. */
int trace_kind_parse(const char *word, size_t len);

typedef enum {
    TRACE_R = 1,
    TRACE_W = 2,
    TRACE_RW = 3,
} trace_mode;

/* How a REF was written, kept so that text round-trips. */
typedef enum {
    TRACE_REF_WHOLE = 0,    /* NAME        (lo = 0, hi = size) */
    TRACE_REF_RANGE = 1,    /* NAME[LO:HI] */
    TRACE_REF_FROM = 2,     /* NAME[LO:]   (hi = size) */
} trace_ref_form;

typedef struct trace_access {
    uint32_t buffer;        /* buffer index as named (a view or a root) */
    uint8_t mode;           /* trace_mode */
    uint8_t form;           /* trace_ref_form */
    uint64_t lo, hi;        /* [lo, hi) relative to the named buffer */
} trace_access;

typedef struct trace_attr {
    uint32_t key;           /* string id */
    uint32_t value;         /* string id */
} trace_attr;

/* The attribute of a statement's call site: where the program made the
 * call (FILE:LINE, a Python FILE:LINE, or OBJECT+0xOFF), as `syncsim
 * capture` writes it; findings show it for each side (trace_stmt_ref.site). */
#define TRACE_ATTR_SITE "site"

/* Target of `H sync TARGET`. */
typedef enum {
    TRACE_SYNC_QUEUE = 0,   /* sync S: object = queue index of stream S */
    TRACE_SYNC_DEVICE = 1,  /* sync device=D: object = string id of D */
    TRACE_SYNC_ALL = 2,     /* sync all: object = TRACE_NONE */
} trace_sync_scope;

#define TRACE_TIME_NONE INT64_MIN

/*
 * One statement. Which fields mean something depends on the kind:
 *
 *   op         label, accesses
 *   copy       label, accesses = { r:SRC, w:DST } (exactly these two)
 *   record     object = event name (string id)
 *   wait       object = event name
 *   sync       sync_scope, object (see trace_sync_scope)
 *   barrier    object = barrier name, count = N
 *   signal     object = flag or semaphore name; sem: a value semaphore's
 *              `set=V` (count = V)
 *   await      object = flag or semaphore name; sem: a value semaphore's
 *              `>=V` (count = V)
 *   collective object = communicator name, coll_kind = KIND (string id),
 *              count = size=N, label (TRACE_NONE: none), accesses
 *   alloc/free object = buffer index (a root)
 *   send/recv  point to point: object = communicator name, rank = the
 *              rank that executes it (send: from=, recv: to=), peer = the
 *              other end (send: to=, recv: from=), count = tag=T, label,
 *              accesses (send: what it reads; recv: what it writes)
 *
 * `by` is the host queue named by by=, TRACE_NONE when not written; see
 * trace_submitter() for the default. `t` and `dur` are TRACE_TIME_NONE when
 * not observed. `line` is the source line (0 when the trace did not come from
 * text). Accesses and attributes belong to whoever filled the statement: a
 * reader's stay valid until its next call.
 */
typedef struct trace_stmt {
    uint64_t seq;           /* submission index, from 0 */
    uint32_t queue;         /* queue index */
    trace_kind kind;
    uint32_t label;
    uint32_t object;
    trace_sync_scope sync_scope;
    uint32_t coll_kind;
    uint64_t count;
    bool sem;               /* signal/await of a value semaphore (count = the value) */
    uint32_t rank, peer;    /* send/recv: own rank and the peer's; else TRACE_NONE */
    uint32_t by;
    int64_t t, dur;
    uint32_t line;
    uint32_t n_access;
    const trace_access *access;
    uint32_t n_attr;
    const trace_attr *attr;
} trace_stmt;

/* Sets every field to its "absent" value (TRACE_NONE, TRACE_TIME_NONE, 0). */
void trace_stmt_init(trace_stmt *s);

/*
 * Finding kinds: the one table. Each entry gives the kind's word (expect
 * lines, JSON, the store), the key naming its object in JSON and expect
 * lines (NULL: none), what its expect line takes after the word, as the
 * parser reads it and its messages print it (KEY=WHAT words; [KEY=WHAT]
 * optional; a key given twice may repeat; "..." says so), and one line
 * for help texts. Adding a kind is an entry here, its detection code and
 * its litmus traces (docs/extending.md).
 */
#define TRACE_FINDING_MAP(X)                                                                  \
    X(CLEAN, "clean", NULL, "", "no finding")                                                 \
    X(RACE, "race", NULL, "type=RAW|WAR|WAW first=LABEL second=LABEL [buffer=NAME]",           \
      "two accesses to overlapping bytes, at least one a write, not ordered")                 \
    X(WAIT_UNRECORDED, "wait-unrecorded", "event", "event=E",                                 \
      "a wait whose event has no earlier record (it orders nothing)")                         \
    X(HANG, "hang", NULL, "queue=Q [queue=Q2 ...]",                                           \
      "queues that can never advance, and what each waits for")                              \
    X(COLLECTIVE_MISMATCH, "collective-mismatch", "comm", "comm=COMM",                        \
      "participants of a collective generation disagree on KIND or size=, or too many arrive") \
    X(BARRIER_MISMATCH, "barrier-mismatch", "barrier", "barrier=B",                           \
      "more queues than count= arrive at a barrier generation, or they disagree on count=")   \
    X(SEMAPHORE_RACE, "semaphore-race", "semaphore", "semaphore=S",                           \
      "two sets of a value semaphore not ordered: what its awaits see depends on timing")     \
    X(UNMATCHED_SEND, "unmatched-send", "comm", "comm=COMM",                                   \
      "a send that no rank receives (its peer posts no matching recv)")                     \
    X(USE_AFTER_FREE, "use-after-free", NULL, "buffer=B second=LABEL",                        \
      "an access ordered after a free of its buffer, with no alloc between")                  \
    X(REDUNDANT_SYNC, "redundant-sync", NULL, "line=N",                                       \
      "(when asked) a sync whose removal adds no finding")

typedef enum {
#define TRACE_FINDING_ENUM(name, word, object, expect, summary) TRACE_FINDING_##name,
    TRACE_FINDING_MAP(TRACE_FINDING_ENUM)
#undef TRACE_FINDING_ENUM
    TRACE_FINDING_COUNT
} trace_finding_kind;

/* A kind's row of the table. */
typedef struct trace_finding_info {
    const char *word;
    const char *object;     /* JSON/expect key of its object, or NULL */
    const char *expect;     /* what its expect line takes (see the table) */
    const char *summary;
} trace_finding_info;

const trace_finding_info *trace_finding_about(trace_finding_kind k);
const char *trace_finding_str(trace_finding_kind k);
/* Every finding word, as "clean, race, ... or redundant-sync" (for messages). */
const char *trace_finding_list(void);
/* Returns -1 when the word names no finding kind. */
int trace_finding_parse(const char *word, size_t len);

#define TRACE_NO_SEQ UINT64_MAX

/* A statement a finding names. String ids are the trace's. */
typedef struct trace_stmt_ref {
    uint64_t seq;           /* TRACE_NO_SEQ: absent */
    uint32_t queue;
    uint32_t label;         /* string id, TRACE_NONE: none */
    uint32_t line;          /* 0: not from text */
    trace_kind kind;
    uint32_t by;            /* the submitting host of a stream statement, or TRACE_NONE */
    uint32_t site;          /* string id of the statement's site= (where the program made
                             * the call: FILE:LINE or OBJECT+0xOFF), TRACE_NONE: none.
                             * Resolved after the check (check_trace, from the reader:
                             * trace_reader_attr) and kept with stored findings */
} trace_stmt_ref;

/* What a part of a finding is. */
typedef enum {
    TRACE_PART_BLOCKED = 0,     /* hang: a blocked queue, the statement it is stuck at, and
                                 * what it waits for (text) */
    TRACE_PART_CYCLE = 1,       /* hang: a queue of the deadlock cycle, in cycle order */
    TRACE_PART_PARTICIPANT = 2, /* mismatch: a queue of the generation, with what it said */
} trace_part_role;

typedef struct trace_finding_part {
    uint8_t role;           /* trace_part_role */
    bool extra;             /* participant: one arrival too many */
    uint32_t queue;
    uint64_t seq;           /* TRACE_NO_SEQ: not known */
    uint32_t line;
    uint32_t kind;          /* participant: collective KIND (string id), else TRACE_NONE */
    uint64_t count;         /* participant: its count= / size=; 0: not known */
    char *text;             /* blocked: what it waits for; else NULL. Owned */
    uint32_t site;          /* string id of its statement's site=, TRACE_NONE: none (as
                             * trace_stmt_ref.site) */
} trace_finding_part;

#define TRACE_RACE_RAW 1u
#define TRACE_RACE_WAR 2u
#define TRACE_RACE_WAW 4u

/* One finding, typed: what the checker makes, the store keeps and the
 * pictures, JSON and reports show. Which fields mean something depends on
 * the kind (docs/trace-format.md, "Every field, by kind"). */
typedef struct trace_finding {
    trace_finding_kind kind;
    uint8_t race_type;      /* race: the reported TRACE_RACE_* */
    uint8_t race_types;     /* race: every TRACE_RACE_* seen between the two */
    trace_stmt_ref first;   /* race: earlier in the file; use-after-free: the free */
    trace_stmt_ref second;  /* race, use-after-free: the later access; others: the statement */
    uint32_t buffer;        /* buffer as named by the second access (race, uaf), or TRACE_NONE */
    uint32_t root;          /* its root buffer */
    uint64_t lo, hi;        /* root bytes */
    uint32_t object;        /* string id: event, communicator or barrier; else TRACE_NONE */
    uint64_t generation;    /* mismatch: the generation, from 1 */
    char *text;             /* one line for people: what happened. Owned */
    char *fix;              /* the concrete fix. Owned */
    trace_finding_part *parts;
    uint32_t n_parts;
} trace_finding;

/* Frees what f[0..n) own, and f. */
void trace_findings_free(trace_finding *f, size_t n);
/* Frees what one finding owns (not f itself). */
void trace_finding_release(trace_finding *f);

/* One `expect` line: its kind and its key=value words in written order
 * (hang repeats queue=). Values are kept as written: `Q@LINE` refers to a
 * statement by queue and source line. */
typedef struct trace_expect {
    trace_finding_kind kind;
    uint32_t line;
    uint32_t n_kv;
    trace_attr *kv;
} trace_expect;

/* ------------------------------------------------------------------ */
/* A u64 -> u64 hash map (traces/u64map.c), for tables keyed by names,  */
/* seqs and generations.                                                */

typedef struct trace_u64map {
    uint64_t *keys, *vals;
    uint8_t *used;
    uint32_t cap, count;
} trace_u64map;

void trace_u64map_free(trace_u64map *m);
/* Pointer to the value of key, or NULL. */
uint64_t *trace_u64map_get(const trace_u64map *m, uint64_t key);
/* Pointer to the value of key, inserted as def when absent; NULL on OOM. */
uint64_t *trace_u64map_put(trace_u64map *m, uint64_t key, uint64_t def);
/* A copy of src (dst is overwritten). 0, or -1 when out of memory. */
int trace_u64map_copy(trace_u64map *dst, const trace_u64map *src);
void trace_u64map_del(trace_u64map *m, uint64_t key);

/* ------------------------------------------------------------------ */
/* Interned strings and a string -> index map.                         */

/* Open-addressing hash map from a byte string to a uint32_t value. The keys
 * are not copied: the caller keeps them alive (the trace keeps them in its
 * string table). */
typedef struct trace_strmap {
    uint64_t *slots;        /* key hash << 32 | value + 1; 0 = empty */
    const char **keys;
    uint32_t *key_len;
    uint32_t cap, count;
} trace_strmap;

void trace_strmap_init(trace_strmap *m);
void trace_strmap_free(trace_strmap *m);
/* Returns the value for key, or TRACE_NONE. */
uint32_t trace_strmap_get(const trace_strmap *m, const char *key, size_t len);
/* Inserts or replaces; returns 0, or -1 when out of memory. */
int trace_strmap_put(trace_strmap *m, const char *key, size_t len, uint32_t value);
/* The offset of the first byte of s[0..n) that is not valid UTF-8, or n. */
size_t trace_utf8_check(const char *s, size_t n);
/* Writes s as a JSON string literal: quoted, escaped, and any byte that is
 * not UTF-8 written as U+FFFD, so the output is always valid JSON. */
void trace_json_str(FILE *out, const char *s);

/* FNV-1a, used by the map and available to others. */
uint64_t trace_hash(const void *data, size_t len);

/* Growing arrays, the one rule: ensures *arr has room for `need` elements
 * of `elem` bytes, doubling its capacity from 16. Returns 0, or -1 when
 * memory runs out or the capacity would not fit its type (*arr and *cap
 * then unchanged). */
int trace_grow(void **arr, size_t *cap, size_t need, size_t elem);
int trace_grow32(void **arr, uint32_t *cap, uint64_t need, size_t elem);
int trace_grow64(void **arr, uint64_t *cap, uint64_t need, size_t elem);

/* ------------------------------------------------------------------ */
/* The trace: declarations (and, for in-memory traces, statements).    */

typedef struct trace {
    /* String table: strs[id] is NUL-terminated, str_len[id] its length. The
     * bytes live in arena chunks (never moved, freed with the trace). */
    char **strs;
    uint32_t *str_len;
    uint32_t n_strs, cap_strs;
    trace_strmap str_ids;
    char **arena_chunks;
    uint32_t n_arena_chunks;
    size_t arena_used, arena_cap;

    trace_queue *queues;
    uint32_t n_queues, cap_queues;
    trace_strmap queue_ids;         /* name -> queue index */
    uint32_t n_host_queues;

    trace_buffer *buffers;
    uint32_t n_buffers, cap_buffers;
    trace_strmap buffer_ids;        /* name -> buffer index */

    trace_expect *expects;
    uint32_t n_expects, cap_expects;

    /* Run-level metadata (source file, producer, policy, ...). */
    trace_attr *meta;
    uint32_t n_meta, cap_meta;

    /* In-memory statements (trace_append); empty for streaming readers.
     * Accesses and attributes are kept in pools, statements refer to them
     * by offset so that the pools may grow. Use trace_stmt_at(). */
    struct trace_stmt_rec *stmts;
    uint64_t n_stmts, cap_stmts;
    trace_access *access_pool;
    uint64_t n_access_pool, cap_access_pool;
    trace_attr *attr_pool;
    uint64_t n_attr_pool, cap_attr_pool;
} trace;

/* Creates an empty trace; NULL when out of memory. */
trace *trace_new(void);
void trace_free(trace *t);

/* Interns s (len bytes, need not be NUL-terminated); returns its id, or
 * TRACE_NONE when out of memory. The same bytes always give the same id. */
uint32_t trace_intern(trace *t, const char *s, size_t len);
uint32_t trace_intern_cstr(trace *t, const char *s);
/* The string of an id ("" for TRACE_NONE). */
const char *trace_str(const trace *t, uint32_t id);
/* The id of s if interned, else TRACE_NONE. */
uint32_t trace_str_find(const trace *t, const char *s, size_t len);

/* Declarations. Each returns the new index, or TRACE_NONE when the name is
 * already declared or memory runs out (callers that parse user input check
 * trace_find_* first to report the right error). device is a string id. */
uint32_t trace_add_queue(trace *t, uint32_t name, trace_queue_kind kind, uint32_t device);
uint32_t trace_add_root_buffer(trace *t, uint32_t name, uint64_t size, trace_loc loc,
                               uint32_t device, bool pinned);
/* A view of parent at [offset, offset + size); the caller checks the bounds. */
uint32_t trace_add_view(trace *t, uint32_t name, uint32_t parent, uint64_t offset,
                        uint64_t size);
uint32_t trace_find_queue(const trace *t, const char *name, size_t len);
uint32_t trace_find_buffer(const trace *t, const char *name, size_t len);
/* Appends an expectation; kv is copied. Returns 0 or -1 (out of memory). */
int trace_add_expect(trace *t, trace_finding_kind kind, uint32_t line,
                     const trace_attr *kv, uint32_t n_kv);
/* Sets (or replaces) a run-level metadata entry. Returns 0 or -1. */
int trace_set_meta(trace *t, const char *key, const char *value);
/* The value of a metadata key, or NULL. */
const char *trace_get_meta(const trace *t, const char *key);

/* The import ledger: what an importer read and did not import, counted by
 * reason, kept as run metadata "dropped.REASON" = a decimal count (the
 * formats' shared capture model writes it: traces/formats/capture.c; a
 * clamped or guessed value counts as dropped too). Calls fn (when not NULL)
 * for each reason with a non-zero count, in metadata order, and returns the
 * total. Costs one pass over the run metadata. */
#define TRACE_LEDGER_PREFIX "dropped."
uint64_t trace_ledger(const trace *t, void (*fn)(void *ctx, const char *reason, uint64_t n),
                      void *ctx);
/* The ledger as one JSON object, {"REASON": N, ...} ({} when nothing was
 * dropped): the one writer `info --json` and `check --json` share. */
void trace_ledger_print_json(FILE *out, const trace *t);
/* What a ledger reason means ("events without a timestamp"), from the one
 * table of reasons (traces/formats/formats.h, CAPTURE_DROP_MAP); NULL for a
 * word it does not hold. trace_ledger_reason(i, &meaning) walks the table:
 * the i-th reason's word, NULL past the end. */
const char *trace_ledger_meaning(const char *reason);
const char *trace_ledger_reason(size_t i, const char **meaning);
/* Whether a reason is an ordering assumption (an event imported where the
 * capture does not say it stood: a widened sync, an assumed record, ...)
 * rather than data not imported. Both make coverage partial. */
bool trace_ledger_assumed(const char *reason);

/* The host queue that submitted s: its by=, else the only host queue when
 * the trace declares exactly one, else TRACE_NONE. Host statements return
 * TRACE_NONE (they are not submitted by anyone). */
uint32_t trace_submitter(const trace *t, const trace_stmt *s);

/* Resolves an access to its root buffer: *root and [*lo, *hi) in root
 * bytes. */
void trace_access_root(const trace *t, const trace_access *a, uint32_t *root,
                       uint64_t *lo, uint64_t *hi);

/* Appends a copy of s (accesses and attributes copied) as the next in-memory
 * statement; s->seq is ignored and set to the statement's index. Returns 0
 * or -1 when out of memory. */
int trace_append(trace *t, const trace_stmt *s);
/* Sets the observed time of statement i (known only when it ended: a
 * real device's work). Out-of-range i is ignored. */
void trace_set_time(trace *t, uint64_t i, int64_t start, int64_t dur);
/* Fills *out with in-memory statement i; pointers stay valid until the next
 * trace_append. */
void trace_stmt_at(const trace *t, uint64_t i, trace_stmt *out);

/* A short human name for a statement: its label, else "Q@LINE" (the spec's
 * form), else "Q#SEQ". Writes into buf (NUL-terminated, truncated to cap). */
const char *trace_stmt_name(const trace *t, const trace_stmt *s, char *buf, size_t cap);

/* True when two statements are equal in everything but seq and line
 * (strings compared by content, so the traces may differ). */
bool trace_stmt_equal(const trace *ta, const trace_stmt *a, const trace *tb,
                      const trace_stmt *b);

/* ------------------------------------------------------------------ */
/* Readers: statements in submission order, one at a time.             */

typedef struct trace_reader_iface {
    /* Fetches the next statement into *out. Returns 1 when one was read, 0 at
     * the end, -1 on error (err filled). Pointers in *out stay valid until
     * the next call. Declarations it refers to exist in the reader's trace. */
    int (*next)(void *ctx, trace_stmt *out, trace_error *err);
    /* Releases the reader's context (not the trace unless it owns it).
     * NULL: nothing to release. */
    void (*close)(void *ctx);
    /* Starts again at the first statement; the declarations stay as read.
     * Returns 0, or -1 with err filled. NULL: the input can be read only
     * once (a pipe). */
    int (*rewind)(void *ctx, trace_error *err);
    /* The text of statement seq's label, for a statement next() gave as
     * TRACE_LABEL_LAZY: *text (NUL-terminated) and *len, valid until the
     * next call on the reader. Any statement read so far may be asked for,
     * in any order. May reuse the buffers of the statement next() gave last:
     * call it for that statement or after you are done with it. Returns 0
     * or -1 with err. NULL: the reader never gives lazy labels. */
    int (*label_text)(void *ctx, uint64_t seq, const char **text, size_t *len,
                      trace_error *err);
    /* The value of attribute `key` of statement seq, for what is reported
     * about a statement after it was read (its site=): *text
     * (NUL-terminated) and *len, valid until the next call on the reader;
     * *text NULL when the statement has no such attribute, or when this
     * reader cannot read that statement again (a pipe). Any statement read
     * so far may be asked for, in any order; it is read again (a database
     * row, a text line), so nothing per statement is kept for it. Same
     * buffer rule as label_text. Returns 0 or -1 with err. NULL: the
     * reader cannot look back; trace_reader_attr then gives nothing. */
    int (*attr_text)(void *ctx, uint64_t seq, const char *key, const char **text, size_t *len,
                     trace_error *err);
} trace_reader_iface;

typedef struct trace_reader {
    const trace_reader_iface *iface;
    void *ctx;
    trace *trace;           /* declarations; grows while reading text */
    bool owns_trace;        /* close frees the trace too */
    char *source;           /* file or database path, for messages; owned */
} trace_reader;

/* Returns 1/0/-1 as iface->next. */
int trace_reader_next(trace_reader *r, trace_stmt *out, trace_error *err);
/* Starts r again at its first statement (see the iface). Returns 0, or -1
 * with err filled (also when r cannot be read twice). */
int trace_reader_rewind(trace_reader *r, trace_error *err);
/* Resolves *label when it is TRACE_LABEL_LAZY (statement seq of r),
 * interning it into r's trace; leaves any other value alone. Returns 0 or
 * -1 with err. */
int trace_reader_label(trace_reader *r, uint64_t seq, uint32_t *label, trace_error *err);
/* The text of s's label without interning it (what a writer that copies
 * statements needs): *text NULL and *len 0 when s has none. A lazy label's
 * text is valid until the next call on r. Returns 0 or -1 with err. */
int trace_reader_label_text(trace_reader *r, const trace_stmt *s, const char **text, size_t *len,
                            trace_error *err);
/* The value of attribute `key` of statement seq of r (see attr_text),
 * interned into r's trace: *value, TRACE_NONE when the statement has none
 * or r cannot look back (attr_text NULL) or seq is TRACE_NO_SEQ. Returns 0
 * or -1 with err. */
int trace_reader_attr(trace_reader *r, uint64_t seq, const char *key, uint32_t *value,
                      trace_error *err);
/* Closes the context and frees what the reader owns. Safe on a zeroed reader. */
void trace_reader_close(trace_reader *r);

/* A reader over t's in-memory statements; does not own t. */
void trace_reader_memory(trace_reader *r, trace *t);

/* Reads every statement of r into a fresh in-memory trace that takes over
 * r's declarations. On success returns 0 and *out (the caller frees it);
 * on error -1 with err filled. r is closed either way. */
int trace_reader_load(trace_reader *r, trace **out, trace_error *err);


/* ------------------------------------------------------------------ */
/* The binder (traces/bind.c): what a statement depends on, by the      */
/* format's rules, decided once for the checker, replay and pictures.   */

/* Rule 4: whether host sync s covers stream queue q (its scope; in a merged
 * job, `sync all` only the streams of the host's rank: ruling 4). */
bool trace_sync_covers(const trace *t, const trace_stmt *s, uint32_t q);

/* How an arrival at a barrier or collective takes part in its generation. */
typedef enum {
    TRACE_GEN_NONE = 0,     /* not an arrival */
    TRACE_GEN_MEMBER,       /* one of the generation's count= (size=) arrivals */
    TRACE_GEN_DISAGREES,    /* a member whose count= (collective: KIND or size=) differs
                             * from the generation's first arrival */
    TRACE_GEN_EXTRA,        /* one arrival too many: it synchronises nothing */
} trace_gen_role;

/* What trace_binder_feed decides for one statement. */
typedef struct trace_bind {
    uint64_t record;        /* wait: the record it binds to; TRACE_NO_SEQ: none */
    uint64_t superseded;    /* record: the previous record of its event, which no
                             * later wait can bind to; TRACE_NO_SEQ: none */
    uint64_t gen;           /* barrier, collective: generation k (its queue's k-th arrival) */
    uint8_t gen_role;       /* trace_gen_role */
    uint64_t gen_count;     /* the generation's count= / size= (0: not known) */
    uint64_t gen_first;     /* the seq of its first arrival (TRACE_NO_SEQ: not known) */
    uint32_t gen_first_queue, gen_first_line, gen_first_kind;
    uint64_t match;         /* send, recv: the id of its message (one per matched pair,
                             * from 0 in the order the first of each pair is fed) */
    uint64_t match_other;   /* the seq of the other end when it was fed before;
                             * TRACE_NO_SEQ: not yet */
} trace_bind;

/* One end of a point-to-point message that found no other end (rule 9). */
typedef struct trace_p2p_end {
    bool send;
    uint32_t comm, src, dst;    /* communicator string id, ranks */
    uint64_t tag, seq, match;
    uint32_t queue, line;
} trace_p2p_end;

/* A queue arriving at a barrier or communicator, and its latest arrival. */
typedef struct trace_member {
    uint32_t queue;
    uint64_t arrivals;
    uint64_t last_seq;
    uint32_t last_line;
    uint64_t last_count;
    uint32_t last_kind;     /* collective KIND string id, else TRACE_NONE */
} trace_member;

#define TRACE_BIND_FLAGS 1u /* keep every flag's signals and awaits (trace_binder_flag) */

typedef struct trace_binder trace_binder;

/* A binder fed statements in submission order. NULL when out of memory. */
trace_binder *trace_binder_new(unsigned options);
void trace_binder_free(trace_binder *b);
/* Binds statement s (rules 3, 5, 7; 6 with TRACE_BIND_FLAGS). 0, or -1 when
 * out of memory. */
int trace_binder_feed(trace_binder *b, const trace_stmt *s, trace_bind *out);
/* The queues that arrive at a barrier (coll: a communicator) so far. */
uint32_t trace_binder_members(const trace_binder *b, uint32_t object, bool coll,
                              const trace_member **out);
/* The sends and recvs fed so far that no other end matched, in the order
 * they were fed per channel; *out is the caller's (free). 0 or -1 (memory). */
int trace_binder_unmatched(const trace_binder *b, trace_p2p_end **out, uint64_t *n);
/* With TRACE_BIND_FLAGS: the signals and awaits of a flag fed so far. */
void trace_binder_flag(const trace_binder *b, uint32_t flag, const uint64_t **signals,
                       uint32_t *n_signals, const uint64_t **awaits, uint32_t *n_awaits);
/* Rule 6b, value semaphores: which set releases `await S >=want`, given the
 * values of S's sets in the order they ran (values[0..n)) and the index of
 * the last of them that happens before the await (TRACE_NO_SEQ: none). The
 * index of the releasing set; TRACE_SEM_PASSED when the value the await
 * already sees is enough (no new edge); TRACE_SEM_PENDING when no set so far
 * reaches it (the await blocks until one does). */
#define TRACE_SEM_PASSED (UINT64_MAX - 1)
#define TRACE_SEM_PENDING UINT64_MAX
uint64_t trace_sem_release(const uint64_t *values, uint64_t n, uint64_t last_before, uint64_t want);
/* A copy (without flag lists), for checkpoints. NULL when out of memory. */
trace_binder *trace_binder_clone(const trace_binder *b);
/* Forgets the records for which dead(ctx, record seq) holds (no later wait
 * binds to them: the minimiser knows); trace_binder_same then compares what
 * is left. */
void trace_binder_forget(trace_binder *b, bool (*dead)(void *ctx, uint64_t record_seq),
                         void *ctx);
bool trace_binder_same(const trace_binder *a, const trace_binder *b);

/* ------------------------------------------------------------------ */
/* Sync patterns (traces/pattern.c): one alphabet for every command.    */

/* s host blocks, c blocking copy, a async copy, g graph launch, r record,
 * w device-side wait, | next split: see traces/pattern.c. */
extern const char trace_pattern_legend[];

typedef struct trace_pattern trace_pattern;

/* One host iteration's pattern: before = every statement fed, after = the
 * statements fed with keep. Strings owned by the pattern. */
typedef struct trace_pattern_iter {
    uint32_t host;          /* host queue index */
    const char *iter;       /* the token= / iter= value */
    const char *before, *after;
} trace_pattern_iter;

trace_pattern *trace_pattern_new(void);
void trace_pattern_free(trace_pattern *p);
/* Feeds statement s of t, in submission order; keep = false: s is removed
 * (it shows in `before` only). Returns 0 or -1 (out of memory). */
int trace_pattern_feed(trace_pattern *p, const trace *t, const trace_stmt *s, bool keep);
size_t trace_pattern_count(const trace_pattern *p);
trace_pattern_iter trace_pattern_at(const trace_pattern *p, size_t i);
/* The latest iteration of host; -1 when it has none. */
int trace_pattern_last(const trace_pattern *p, uint32_t host, trace_pattern_iter *out);
/* One line per distinct pattern (with_after: "before -> after") with the
 * iterations alike counted, under a line with the legend. Nothing when
 * no statement carries token= or iter=. */
void trace_pattern_print(FILE *out, const trace *t, const trace_pattern *p, bool with_after);

/* ------------------------------------------------------------------ */
/* The text format (traces/text_parse.c, traces/text_write.c).         */

/* Opens a text trace for streaming; the reader owns a fresh trace. name is
 * the file name used in messages; path "-" reads standard input. Errors
 * (file:line:col: expected ...) come from trace_reader_next. */
int trace_text_open(const char *path, trace_reader *r, trace_error *err);
/* The same; with lazy, labels come as TRACE_LABEL_LAZY and cost nothing
 * until trace_reader_label(_text) asks for one (read again from its line).
 * Standard input and other files that cannot seek give interned labels. */
int trace_text_open_lazy(const char *path, bool lazy, trace_reader *r, trace_error *err);
/* Same over a string in memory (copied); name is used in messages. */
int trace_text_open_string(const char *name, const char *text, size_t len,
                           trace_reader *r, trace_error *err);
/* Parses a whole text trace into memory. */
int trace_text_parse_file(const char *path, trace **out, trace_error *err);
int trace_text_parse_string(const char *name, const char *text, size_t len,
                            trace **out, trace_error *err);

/* Writes r as text: the header, each declaration before its first use,
 * the statements, then the expectations (Q@LINE references renumbered to
 * the written lines). Returns 0 or -1 with err filled. Does not close r. */
int trace_text_write(FILE *out, trace_reader *r, trace_error *err);
/* Writes statement s of t as the text format writes it, on one line without
 * its newline (and without the declarations it needs). 0 or -1 with err. */
int trace_text_stmt(FILE *out, const trace *t, const trace_stmt *s, trace_error *err);

/* ------------------------------------------------------------------ */
/* Multi-rank jobs (traces/merge.c, docs/multi-rank.md).               */

/* A reader over the statements of inputs[0..n), one trace per rank, as
 * one job: names namespaced by rank ("r1.host"), communicators shared,
 * interleaved by time when every input is timed, else rank by rank. The
 * rank of each input is its run metadata rank= (all or none), else its
 * place. The inputs stay the caller's: close them after *out. Returns 0,
 * or -1 with err (duplicate ranks, world_size= that disagrees, a rank
 * beyond the inputs); a send or recv in the wrong rank's file is an error
 * of the read. Rewinds when every input does. */
int trace_merge_open(trace_reader *const *inputs, uint32_t n, trace_reader *out, trace_error *err);
/* The same for some ranks of a larger job (`merge --partial`): the inputs'
 * world_size= must exceed their number; ranks keep their numbers; a
 * collective larger than the ranks given, and a send or recv whose peer is
 * absent, become ops (traces/merge.c). Run metadata partial=GIVEN/WORLD. */
int trace_merge_open_partial(trace_reader *const *inputs, uint32_t n, bool partial,
                             trace_reader *out, trace_error *err);
/* How to merge. */
typedef struct trace_merge_opts {
    bool partial;           /* some ranks of a larger world (above) */
    bool force;             /* merge inputs whose run metadata names different jobs
                             * (dist.backend, dist.pg_config, job.id, parallel,
                             * model, policy disagree); refused otherwise */
    bool owns_inputs;       /* *out closes and frees the input readers (heap-allocated) */
} trace_merge_opts;
/* Either of the above, with options. The merged run carries what a check's
 * coverage needs: the inputs' ledgers summed, accesses=, and for a partial
 * job ranks.absent= ("1, 3", "2-127"). */
int trace_merge_open_opts(trace_reader *const *inputs, uint32_t n, const trace_merge_opts *o,
                          trace_reader *out, trace_error *err);

/* ------------------------------------------------------------------ */
/* Output files (traces/outfile.c): written whole or not at all.       */

/* Opens a temporary file beside path to write (*tmp its name, the
 * caller's until trace_out_close). NULL with err on failure. */
FILE *trace_out_open(const char *path, char **tmp, trace_error *err);
/* Closes f and, when ok and the close succeeded, renames tmp over path;
 * otherwise removes tmp. Frees tmp. Returns 0, or -1 with err (not
 * touched when ok was false on entry: the caller's error stands). */
int trace_out_close(FILE *f, const char *path, char *tmp, bool ok, trace_error *err);
/* Writes data[0..len) to path that way. Returns 0 or -1 with err. */
int trace_out_write(const char *path, const void *data, size_t len, trace_error *err);

/* ------------------------------------------------------------------ */
/* The SQLite store (traces/store.c) and the recorder (traces/recorder.c). */

#define TRACE_SCHEMA_VERSION 3

typedef struct trace_run_info {
    int64_t id;
    char *name;             /* owned */
    char *source;           /* what produced it: "import", "sim", "cpu", ... */
    char *status;           /* "recording", "complete" */
    uint64_t n_stmts;
    uint32_t n_queues, n_buffers;
    int64_t created;        /* unix seconds */
    bool live;              /* "recording" and its producer is alive: it holds the run's
                             * lock (traces/store_owner.c), so the run is being written */
} trace_run_info;

typedef struct trace_store trace_store;

/* How a database is opened (see store.c for how each is done). */
typedef enum {
    TRACE_STORE_READ = 0,   /* read only; never leaves -wal/-shm files behind, and reads
                             * read-only files and mounts */
    TRACE_STORE_RESULTS = 1,/* read, and store results (findings, checks) where the file
                             * can be written; elsewhere as READ (trace_store_writable) */
    TRACE_STORE_WRITE = 2,  /* read and write; created when missing */
} trace_store_mode;

/* Opens a trace database in mode. Checks that it is a syncsim database of a
 * schema this build reads. */
trace_store *trace_store_open_mode(const char *path, trace_store_mode mode, trace_error *err);
/* trace_store_open_mode with WRITE (create) or RESULTS. */
trace_store *trace_store_open(const char *path, bool create, trace_error *err);
/* False when results cannot be stored (opened READ, or a read-only file). */
bool trace_store_writable(const trace_store *st);
void trace_store_close(trace_store *st);
/* The underlying sqlite3 handle, for modules that add their own tables. */
struct sqlite3 *trace_store_db(trace_store *st);
/* SQL over a database (store_sql.c): the tables and views of
 * docs/trace-schema.md, and `stmts(run, seq, queue, kind, label, object, t,
 * dur, line, text)`, every statement of the database, one row each, names
 * resolved. Each statement of sql in turn: fn is called with
 * TRACE_QUERY_BEGIN (its column names), TRACE_QUERY_ROW for each row (its
 * values), TRACE_QUERY_END. A nonzero return from fn stops. Returns 0, or
 * -1 with err (a bad query: its message; st opened READ refuses writes). */
typedef enum { TRACE_VAL_NULL, TRACE_VAL_INT, TRACE_VAL_REAL, TRACE_VAL_TEXT } trace_val_type;
typedef struct trace_val {
    trace_val_type type;
    int64_t i;
    double r;
    const char *s;          /* TRACE_VAL_TEXT: valid during the call */
} trace_val;
typedef enum { TRACE_QUERY_BEGIN, TRACE_QUERY_ROW, TRACE_QUERY_END } trace_query_part;
typedef int (*trace_query_fn)(void *ctx, trace_query_part part, int n, const char *const *names,
                              const trace_val *row);
int trace_store_query(trace_store *st, const char *sql, trace_query_fn fn, void *ctx,
                      trace_error *err);

/* Lists runs (ascending id); *out is owned by the caller, free with
 * trace_run_info_free. Returns 0 or -1. */
int trace_store_runs(trace_store *st, trace_run_info **out, size_t *n, trace_error *err);
void trace_run_info_free(trace_run_info *runs, size_t n);
/* Renames run `run` (st opened for writing). 0, or -1 with err (no such
 * run: TRACE_ENORUN). */
int trace_store_rename_run(trace_store *st, int64_t run, const char *name, trace_error *err);
/* Deletes run `run` and everything of it (statements, metadata, checks,
 * findings, its graph: every table with a `run` column), in one
 * transaction. A run being written (live: its producer holds its lock) is
 * not deleted: -1 with TRACE_EBUSY. Its id is never given to another run.
 * 0, or -1 with err. */
int trace_store_delete_run(trace_store *st, int64_t run, trace_error *err);
/* The id of the latest run, or -1 when the database has none. */
int64_t trace_store_latest_run(trace_store *st);
/* The runs made from run `run`: those whose metadata names it under
 * source_run= or replay_of= (replays, what-ifs), in id order, with that key.
 * *out is the caller's (free). Returns 0 or -1 with err. */
typedef struct trace_derived_run {
    int64_t id;
    char key[32];
} trace_derived_run;
int trace_store_derived(trace_store *st, int64_t run, trace_derived_run **out, size_t *n,
                        trace_error *err);
/* The one wording of a run that is not there, in err (ENORUN): "DB: no run
 * WHAT (its runs: 1, 2, 3)", or "(it holds none)"; WHAT is "7", "named
 * 'x'", ... Returns -1. */
int trace_store_no_run(trace_store *st, const char *what, trace_error *err);
/* One run's row, as a one-element array (free with trace_run_info_free(*out,
 * 1)). Returns 0, or -1 with err (ENORUN when there is no such run). */
int trace_store_run(trace_store *st, int64_t run, trace_run_info **out, trace_error *err);

/* A streaming reader over run `run` (0: the latest). The reader loads the
 * run's declarations and streams its statements in seq order; it keeps st
 * open (the caller closes st after the reader). */
int trace_store_reader(trace_store *st, int64_t run, trace_reader *r, trace_error *err);
/* The same for consumers that need order and accesses only: labels built
 * from templates come as TRACE_LABEL_LAZY, times are not read, and rows are
 * read and decoded ahead on a second thread. */
int trace_store_reader_lazy(trace_store *st, int64_t run, trace_reader *r, trace_error *err);
/* Opens the database at path read-only and a reader over run `run` (0: the
 * latest) that owns the store: closing the reader closes the database. */
int trace_store_open_reader(const char *path, int64_t run, trace_reader *r,
                            trace_error *err);

/* Imports everything r yields as a new run of the database at path
 * (created if missing). Returns the new run id (and its statement count in
 * *n_stmts when non-NULL), or -1 with err filled; on error the partial run
 * is removed. */
int64_t trace_store_import(const char *path, trace_reader *r, const char *run_name,
                           uint64_t *n_stmts, trace_error *err);

/*
 * The recorder: how producers write traces. Thread-safe: any thread may
 * declare, intern and append; appends go to an in-memory batch which one
 * writer thread flushes to SQLite in a transaction (when the batch is full,
 * every flush_ms milliseconds, on trace_recorder_flush and on close). A
 * crash or kill of the process loses at most the batch not yet flushed and
 * leaves the database readable; the run then stays in status "recording".
 */
typedef struct trace_recorder trace_recorder;

typedef struct trace_recorder_opts {
    const char *run_name;       /* NULL: "run" */
    const char *source;         /* NULL: "recorder" */
    uint32_t batch_stmts;       /* 0: 65536 */
    uint32_t flush_ms;          /* 0: 200 */
} trace_recorder_opts;

trace_recorder *trace_recorder_open(const char *path, const trace_recorder_opts *opts,
                                    trace_error *err);
/* The run id the recorder writes. */
int64_t trace_recorder_run(const trace_recorder *rec);
/* Declarations, as trace_add_*; strings passed as C strings. Return the
 * index, or TRACE_NONE on a duplicate name or out of memory. */
uint32_t trace_recorder_queue(trace_recorder *rec, const char *name, trace_queue_kind kind,
                              const char *device);
uint32_t trace_recorder_buffer(trace_recorder *rec, const char *name, uint64_t size,
                               trace_loc loc, const char *device, bool pinned);
uint32_t trace_recorder_view(trace_recorder *rec, const char *name, uint32_t parent,
                             uint64_t offset, uint64_t size);
/* Interns a string for statement fields and attributes. */
uint32_t trace_recorder_intern(trace_recorder *rec, const char *s);
/* Appends a statement (copied); returns its seq, assigned in append order. */
uint64_t trace_recorder_append(trace_recorder *rec, const trace_stmt *s);
/* Sets the observed times of an appended statement (real backends learn
 * them at completion). */
void trace_recorder_set_time(trace_recorder *rec, uint64_t seq, int64_t t, int64_t dur);
int trace_recorder_expect(trace_recorder *rec, trace_finding_kind kind,
                          const trace_attr *kv, uint32_t n_kv);
int trace_recorder_meta(trace_recorder *rec, const char *key, const char *value);
/* Writes everything appended so far; returns 0 or -1 with err filled. */
int trace_recorder_flush(trace_recorder *rec, trace_error *err);
/* Flushes, marks the run complete and closes. Returns 0 or -1. Frees rec
 * either way. */
int trace_recorder_close(trace_recorder *rec, trace_error *err);

/* ------------------------------------------------------------------ */
/* Trace sources (traces/source.c): the one door every command and viz/  */
/* goes through to read a trace, whatever its format.                   */

#define TRACE_SNIFF_BYTES 4096

typedef struct trace_source trace_source;

/* How far the opening of a source has read its file, for a progress bar: a
 * capture in a foreign format is parsed whole while it is opened (a Kineto
 * JSON, gzipped or not, a Chrome trace, an Nsight Systems export, a CUDA
 * log), before any statement can be counted. The shared readers call it --
 * json.c once a chunk of 256 KiB is parsed, nsys.c every 4096 rows,
 * cuda_log.c every MiB of lines -- never per event, so that the hot path
 * pays one branch; once with done 0 before the first byte and once with
 * done == total at the end of each pass. A pass is a file read (an
 * execution trace read beside its Kineto trace is a file of its own: done
 * starts again at 0) or a long step after the reading, in a unit of its
 * own (the CUDA log's "records", matched to their GPU work). Only on the
 * opening thread, only while trace_source_open runs. */
typedef struct trace_progress {
    /* done of total units: unit "bytes" (of the file; for gzip, the
     * compressed bytes consumed, of the file's size), "rows" (of an
     * Nsight Systems export, of the rows its tables hold, counted first)
     * or a later step's own ("records"). NULL: no progress, and nothing is
     * counted for it. */
    void (*fn)(void *ctx, const char *unit, uint64_t done, uint64_t total);
    void *ctx;
} trace_progress;

/* Calls p->fn when there is one (p may be NULL). */
void trace_progress_say(const trace_progress *p, const char *unit, uint64_t done,
                        uint64_t total);

/* How the caller will use a source. */
typedef struct trace_source_opts {
    int64_t run;            /* a syncsim database's run; 0: the latest. Refused for
                             * formats that hold one trace */
    bool write_results;     /* a syncsim database is opened so that results (findings,
                             * checks) can be stored, where the file can be written */
    bool lazy_labels;       /* statements may carry TRACE_LABEL_LAZY (trace_reader_label)
                             * and, from a database, no times: for consumers that need
                             * order and accesses only (the checker) */
    const char *companion;  /* a second input that some formats take (a PyTorch
                             * execution trace beside its Kineto trace); NULL */
    bool as_recorded;       /* one rank's trace of a larger job (run metadata rank=,
                             * world_size= > 1) is read as recorded (import, merge,
                             * export). Otherwise it is read as a partial job of that
                             * one rank (trace_merge_open_opts): collectives and
                             * messages that need an absent rank are local, queues
                             * are named by rank, and a check says which ranks are
                             * absent, instead of a hang on them */
    bool force_companion;   /* take the companion even where it does not look like
                             * the input's own (import --force-et) */
    trace_progress progress; /* how far a foreign capture is read (above); fn NULL: none */
} trace_source_opts;

/* A format syncsim reads. source.c lists them in one table, one line each. */
typedef struct trace_format {
    const char *name;       /* "syncsim-db", "syncsim-text", ... */
    const char *summary;    /* one line for help texts */
    bool companion;         /* takes trace_source_opts.companion */
    /* Whether path is in this format; head holds its first n bytes (n <
     * TRACE_SNIFF_BYTES only for a shorter file). By content, never by name.
     * Required. */
    bool (*sniff)(const char *path, const unsigned char *head, size_t n);
    /* Opens path: fills src->reader (and src->store, src->run, src->incomplete
     * for a database). Returns 0, or -1 with err filled with one line naming the
     * file and what is wrong; nothing is left open. Required. */
    int (*open)(trace_source *src, const char *path, const trace_source_opts *o,
                trace_error *err);
} trace_format;

struct trace_source {
    trace_reader reader;    /* the statements; declarations in reader.trace */
    const trace_format *format;
    trace_store *store;     /* a syncsim database: opened once, for anything else the
                             * command needs from it; NULL for other formats */
    int64_t run;            /* its run id; 0 for other formats */
    bool incomplete;        /* the run is still recording, or its producer died */
    char *path;
};

/* The formats, NULL-terminated, in sniffing order. */
const trace_format *const *trace_formats(void);
extern const trace_format trace_format_syncsim_db, trace_format_text;

/* Opens path ("-": a text trace on standard input) as whatever its content
 * says it is. Returns 0, or -1 with err filled (one line naming the file and
 * what is wrong; exit status 2 material); src is then closed. */
int trace_source_open(trace_source *src, const char *path, const trace_source_opts *o,
                      trace_error *err);
/* Closes the reader and the database. Safe on a zeroed or closed source. */
void trace_source_close(trace_source *src);
/* Whether src's run is incomplete: its database says it is still recording
 * or its producer died, or its run metadata says status= other than
 * complete (an exported incomplete run). A text trace's metadata is read as
 * the statements are: ask after reading them. */
bool trace_source_incomplete(const trace_source *src);
/* trace_source_open for callers that want only the statements: r owns what
 * it opened (the database too). */
int trace_open_any(const char *path, int64_t run, trace_reader *r, trace_error *err);
/* Reads every statement into a fresh in-memory trace (*out, which the caller
 * frees after closing src) and makes src->reader a reader over it. */
int trace_source_load(trace_source *src, trace **out, trace_error *err);

/* 1 when the SQLite database at path has table `table`, 0 when it has not,
 * -1 when it cannot be read as SQLite. Opens it read-only and creates no file. */
int trace_sqlite_has_table(const char *path, const char *table);

/* ------------------------------------------------------------------ */
/* The split graph a scheduler made (stored beside the run so that tools */
/* can draw it without the graph file) and the checker's findings.      */

typedef struct trace_graph_node {
    int64_t id;             /* node id, unique in the run */
    const char *name;       /* tensor name */
    const char *op;         /* op name ("mul_mat", "cpy", ...) */
    const char *shape;      /* e.g. "4096x32 f16"; may be NULL */
    const char *backend;    /* backend it was assigned to */
    int64_t split;          /* split index; -1 when not in a split (weights, inputs) */
    const char *cause;      /* why it went to its backend: pass and reason */
    int64_t copy_slot;      /* copy nodes: the pipeline copy slot; else -1 */
    uint32_t flags;         /* TRACE_NODE_* */
} trace_graph_node;

#define TRACE_NODE_INPUT 1u   /* a graph input (user input) */
#define TRACE_NODE_OUTPUT 2u  /* a graph output */
#define TRACE_NODE_WEIGHT 4u  /* a weight (lives in a buffer from the start) */
#define TRACE_NODE_COPY 8u    /* a copy of a split input made by the scheduler */
#define TRACE_NODE_VIEW 16u   /* a view (no compute) */

typedef struct trace_graph_edge {
    int64_t src, dst;       /* node ids: src is a source of dst */
    const char *kind;       /* "data" (same split), "input" (crosses splits), "copy" */
} trace_graph_edge;

typedef struct trace_graph_split {
    int64_t id;             /* split index */
    const char *backend;
    int64_t first_node, n_nodes; /* node ids [first_node, first_node + n_nodes) in graph order */
    const char *inputs;     /* comma-separated node ids of the split's inputs; may be NULL */
} trace_graph_split;

/* A split graph read back from the store; every string is owned by it. */
typedef struct trace_graph {
    trace_graph_node *nodes;
    size_t n_nodes;
    trace_graph_edge *edges;
    size_t n_edges;
    trace_graph_split *splits;
    size_t n_splits;
} trace_graph;

/* Recorder side: store one node, edge or split of the run's split graph
 * (strings copied; thread-safe). Return 0 or -1. */
int trace_recorder_graph_node(trace_recorder *rec, const trace_graph_node *n);
int trace_recorder_graph_edge(trace_recorder *rec, const trace_graph_edge *e);
int trace_recorder_graph_split(trace_recorder *rec, const trace_graph_split *s);

/* Reads the split graph of run `run` (0: latest). A run without one gives an
 * empty graph. Returns 0 or -1 with err filled. */
int trace_store_graph(trace_store *st, int64_t run, trace_graph *out, trace_error *err);
void trace_graph_free(trace_graph *g);

/* A check of a run, as `check` stores it (traces/store_findings.c). */
typedef struct trace_check_info {
    int64_t id;             /* 0: the run was never checked */
    char version[32];       /* the syncsim that checked it */
    int64_t created;        /* unix seconds */
    bool incomplete;        /* the run was recording, or interrupted, when checked */
    uint64_t statements;    /* statements checked */
    uint64_t findings;      /* findings found */
    uint64_t stored;        /* of which stored (fewer with --max-findings) */
    /* What the check could judge (check/check.h: check_coverage), stored
     * beside it in table check_coverage; has_coverage is false for a check
     * stored before coverage was. */
    bool has_coverage, captured;
    uint64_t device, device_ranged, host_accesses, dropped;
    uint32_t ranks_given, ranks_world;
    uint64_t uaf_unjudged;  /* accesses not judged for use after free (0 for a
                             * check stored before they were counted) */
} trace_check_info;

/* Records a check of run `run` (t: the trace the findings' ids refer to) and
 * replaces its stored findings with f[0..n), in one transaction. info's
 * incomplete, statements and findings are stored; `stored` is n. Returns 0,
 * or -1 with err (also when the database was opened read-only). */
int trace_store_save_check(trace_store *st, int64_t run, const trace *t,
                           const trace_check_info *info, const trace_finding *f, size_t n,
                           trace_error *err);
/* The latest check of run `run` (info->id 0: never checked) and its stored
 * findings, whose names are interned into t (the run's reader's trace).
 * *out is the caller's (trace_findings_free). Returns 0 or -1 with err. */
int trace_store_load_check(trace_store *st, int64_t run, trace *t, trace_check_info *info,
                           trace_finding **out, size_t *n, trace_error *err);

/* ------------------------------------------------------------------ */
/* Captured traces: the formats folder, traces/formats/ (importers of  */
/* profiler captures, the Chrome exporter, the shared capture model);  */
/* docs/importers.md says how each maps onto the trace model.          */

/* Nsight Systems SQLite exports (schemas 2.x and 3.x). */
extern const trace_format trace_format_nsys;
/* PyTorch profiler (Kineto) JSON, plain or gzipped; companion: an
 * execution trace whose byte ranges the kernels and copies get. */
extern const trace_format trace_format_kineto;
/* syncsim's own Chrome trace export, read back exactly. */
extern const trace_format trace_format_chrome;
/* The event log of `syncsim capture` (traces/formats/cuda_log.c). */
extern const trace_format trace_format_cuda_log;

/* Writes r as Chrome Trace Event JSON (Perfetto, chrome://tracing): one
 * track per queue, grouped by device and host; statements as complete
 * events (label, kind and attributes in args); flows for record -> wait and
 * submission -> stream statement. The file reads back as format "chrome"
 * with every queue, buffer, statement, attribute and time. Returns 0 or -1
 * with err. Does not close r. The caller may add findings with
 * trace_chrome_findings() before trace_chrome_end(). */
typedef struct trace_chrome trace_chrome;
trace_chrome *trace_chrome_begin(FILE *out, trace_reader *r, trace_error *err);
/* Findings f[0..n) as instant events on the queue of their second side (a
 * race's later access) at its time, args.finding written by json (check's
 * one JSON writer of a finding; traces/ does not word findings). Their
 * seqs refer to the statements written, their ids to r's trace
 * (trace_store_load_check interns them there). Returns 0 or -1. */
typedef void (*trace_finding_json_fn)(FILE *out, const trace *t, const trace_finding *f);
int trace_chrome_findings(trace_chrome *w, const trace_finding *f, size_t n,
                          trace_finding_json_fn json, trace_error *err);
/* Closes the JSON document and frees w (also on error). Returns 0 or -1. */
int trace_chrome_end(trace_chrome *w, trace_error *err);
/* trace_chrome_begin + trace_chrome_end: the statements without findings. */
int trace_chrome_write(FILE *out, trace_reader *r, trace_error *err);

#endif
