/*
 * internal.h -- what the checker's files share (not a public header: users
 * include check/check.h).
 *
 *   vclock.c      sparse, reference-counted vector clocks (check_vc_*)
 *   shadow.c      byte-range shadow memory per root buffer (check_shadow_*)
 *   hb.c          the engine: advances queues, computes happens-before,
 *                 checks accesses (check_engine_*); with hang.c,
 *                 mismatch.c and checkpoint.c, which share engine.h
 *   findings.c    finding records and their fixes
 *   output.c      text and JSON output, expectations
 *   check.c       check_trace: validation, passes, ordering
 *   minimize.c    the incremental greedy minimiser
 *   reach.c       the minimiser's map of a trace: islands, who accesses what
 */
#ifndef SYNCSIM_CHECK_INTERNAL_H
#define SYNCSIM_CHECK_INTERNAL_H

#include "check.h"

/* ------------------------------------------------------------------ */
/* Vector clocks (vclock.c).                                           */

/*
 * A sparse vector clock: entries (queue, time) sorted by queue, only for
 * queues actually joined; a missing entry is 0. NULL is the empty clock.
 * A clock is flat (base NULL: e[] is all of it) or a delta over a flat
 * `base` (its value is the base with e[]'s entries raised; each is above
 * the base's), so that clocks that all know one large generation share it
 * and differ in a few entries (vclock.c's head). Clocks are shared by
 * reference count: a clock with refs > 1 is immutable, and the mutators
 * below copy it first (copy-on-write). A queue's own entry is kept outside
 * its clock (see check_qstate), so running a statement does not touch the
 * clock at all.
 */
typedef struct check_vc_entry {
    uint32_t queue, time;
} check_vc_entry;

typedef struct check_vc {
    uint32_t refs;
    uint32_t n, cap;            /* entries in e[] */
    struct check_vc *base;      /* NULL: flat; else a reference to a flat clock */
    uint64_t line;              /* flat: its line (vclock.c: "Lines") */
    uint32_t depth;             /* flat: its place on the line */
    bool extended;              /* flat: a later clock continues its line */
    check_vc_entry e[];
} check_vc;

check_vc *check_vc_ref(check_vc *v);
void check_vc_unref(check_vc *v);
/* The entry of queue q (0 when absent). O(log n). */
uint32_t check_vc_get(const check_vc *v, uint32_t q);
/* *dst := *dst joined with src (copying *dst first if shared; *dst may
 * become a reference to src). O(delta log n) when the bases of the two are
 * ordered, O(n) otherwise. Returns 0 or -1 when out of memory. */
int check_vc_join(check_vc **dst, const check_vc *src);
/* *dst := *dst with entry q raised to at least t. A large shared clock gets
 * a one-entry delta, not a copy. */
int check_vc_raise(check_vc **dst, uint32_t q, uint32_t t);
/* Folds the delta of *v into a new flat clock unless it is tiny (a clock
 * about to be shared by many queues, such as a generation's). Same value. */
int check_vc_compact(check_vc **v);
/* Joins many clocks at once (a generation's arrivals): the deltas and
 * raised entries are collected, then sorted and merged in one pass, so n
 * clocks that each add entries cost O(total log total + queues), not a
 * merge into a growing clock per clock. */
typedef struct check_vc_acc {
    check_vc *vc;               /* the join so far, less the pending entries */
    check_vc_entry *pend;       /* entries still to raise, unsorted */
    uint32_t n, cap;
    bool oom;
} check_vc_acc;
/* Starts from clock start (a reference is taken; NULL: empty). */
void check_vc_acc_init(check_vc_acc *a, check_vc *start);
void check_vc_acc_join(check_vc_acc *a, const check_vc *v);
void check_vc_acc_raise(check_vc_acc *a, uint32_t q, uint32_t t);
/* *out := the join (a reference); frees what a holds. 0 or -1 (OOM). */
int check_vc_acc_finish(check_vc_acc *a, check_vc **out);
/* True when every entry of a is <= the same entry of b. */
bool check_vc_leq(const check_vc *a, const check_vc *b);
bool check_vc_equal(const check_vc *a, const check_vc *b);
/* Number of non-zero entries of the value (tests, statistics). O(n). */
uint32_t check_vc_count(const check_vc *v);

/* A queue's clock at one moment: its shared clock plus its own entry. */
typedef struct check_snap {
    check_vc *vc;           /* a reference */
    uint32_t queue, own;
} check_snap;

/* ------------------------------------------------------------------ */
/* Shadow memory (shadow.c).                                           */

/* One access as the shadow remembers it: the statement's epoch (queue and
 * the queue's time when it ran) and how to name it in a finding. */
typedef struct check_site {
    uint64_t seq;           /* UINT64_MAX: no site */
    uint32_t queue, time;
    uint32_t label, line;
    uint32_t buffer;        /* buffer as named by the access */
    uint32_t by;            /* submitter (streams), TRACE_NONE otherwise */
    uint8_t kind;           /* trace_kind */
    uint8_t mode;           /* TRACE_R and/or TRACE_W: what the access did */
} check_site;


/* The reads since the last write when more than one queue read: at most one
 * per queue (the latest; earlier reads of a queue happen before it). */
typedef struct check_reads {
    uint32_t refs;
    uint32_t n, cap;
    check_site s[];
} check_reads;

/* Lifetime marks of a byte range (ruling 2: an access is a use after free
 * when it happens after some free F of its bytes and no alloc A has F HB A
 * HB the access): the frees and allocs of the bytes in the order the engine
 * ran them. covers[i] holds the frees ev[j] (bit j) for which an alloc A
 * with ev[j] HB A HB ev[i] is known: ev[i] itself when it is an alloc, or
 * an alloc forgotten before ev[i] on its queue. So an access is a use after
 * free when it is ordered after a free ev[j] and after no ev[i] whose
 * covers hold bit j (shadow.c's head: why that is exact). An alloc run
 * before any free covers nothing and is not kept. Rare, so kept out of line
 * and shared (reference counted) by the segments a split makes.
 *
 * At most CHECK_LIFE_MAX events. Past that the oldest event that has a
 * later one on its own queue is forgotten (or, when every queue holds one
 * event, the oldest), and gaps[] remembers for its queue the times an
 * access may know of that queue (from the forgotten event, inclusive, to
 * the queue's next kept event, exclusive; UINT32_MAX: no next) for which
 * the verdict needed it: an access whose clock falls in a gap gets no
 * use-after-free verdict on these bytes, and the check's coverage counts
 * it (never a false finding). `blind` is set when more queues needed a gap
 * than gaps[] holds: every later access is then unjudged. */
#define CHECK_LIFE_MAX 16
typedef uint16_t check_life_mask;
typedef struct check_life_gap {
    uint32_t queue, lo, hi;
} check_life_gap;
typedef struct check_life {
    uint32_t refs;
    uint32_t n, n_gaps;
    bool blind;
    check_site ev[CHECK_LIFE_MAX];      /* kind TRACE_FREE or TRACE_ALLOC */
    check_life_mask covers[CHECK_LIFE_MAX];
    check_life_gap gaps[CHECK_LIFE_MAX];
} check_life;

/* The state of a byte range. */
typedef struct check_cell {
    check_site w;           /* last write (alloc and free are writes) */
    check_life *life;       /* NULL until the bytes are freed */
    check_site read;        /* the only read since w (n_reads == 1) */
    check_reads *reads;     /* n_reads > 1 */
    uint32_t n_reads;
} check_cell;

typedef struct check_seg {
    uint64_t lo, hi;
    check_cell c;
} check_seg;

/* A run of consecutive segments of a shadow (shadow.c's head): at most
 * CHECK_CHUNK_MAX after every update. */
#define CHECK_CHUNK_MAX 32
typedef struct check_chunk {
    uint64_t hi;            /* segs[n - 1].hi: the chunks are searched by it */
    uint32_t n, cap;
    check_seg *segs;
} check_chunk;

/*
 * One root buffer's shadow: disjoint segments sorted by lo; bytes in no
 * segment have the empty state. Adjacent segments with equal states are
 * merged after every update, so a buffer accessed whole stays one segment
 * however often it is touched. The sequence is cut into chunks of at most
 * CHECK_CHUNK_MAX segments, so that an update of an arena of thousands of
 * segments moves one chunk, not the whole array. Reference counted: a
 * shadow with refs > 1 (held by a minimiser checkpoint) is copied before
 * it changes.
 */
typedef struct check_shadow {
    uint32_t refs;
    uint32_t n;             /* segments in all */
    uint32_t n_chunks, cap_chunks;
    uint32_t finger;        /* the chunk the last update found (a hint) */
    check_chunk *chunks;    /* in order; none empty; &one while there is one */
    check_chunk one;        /* most shadows: no array of chunks to allocate */
    /* The segment array of the last chunk a join emptied (room for at least
     * CHECK_CHUNK_MAX), for the next split: on a busy arena they alternate. */
    check_seg *spare;
    uint32_t spare_cap;
} check_shadow;

/* Called for each piece [lo, hi) of an updated range with the piece's
 * state, which it may change. */
typedef void (*check_cell_fn)(void *ctx, uint64_t lo, uint64_t hi, check_cell *c);

void check_cell_clear(check_cell *c);
/* Releases what c holds (not c itself). */
void check_cell_release(check_cell *c);
/* Forgets the reads since the last write (a write replaces them). */
void check_cell_drop_reads(check_cell *c);
/* A free of the bytes, appended to their lifetime marks. 0 or -1 (OOM). */
int check_cell_mark_free(check_cell *c, const check_site *s);
/* An alloc of the bytes that the frees ev[i] with bit i of covers (in the
 * indexing of c's marks as they are now) happen before; not kept when the
 * bytes were never freed. 0 or -1 (OOM). */
int check_cell_mark_alloc(check_cell *c, const check_site *s, check_life_mask covers);
/* What an access knows of queue q: how many of q's statements happen
 * before it (UINT32_MAX for its own queue: all of them). */
typedef uint32_t (*check_life_knows)(void *ctx, uint32_t q);
/* Ruling 2 for an access that knows `knows`: the free that makes it a use
 * after free (the latest in the file of those that do), or NULL; *unjudged
 * when it knows a queue at a time of one of l's gaps (no verdict: NULL). */
const check_site *check_life_uaf(const check_life *l, check_life_knows knows, void *ctx,
                                 bool *unjudged);
/* The frees of l that an alloc knowing `knows` is ordered after. */
check_life_mask check_life_covers(const check_life *l, check_life_knows knows, void *ctx);
bool check_cell_equal(const check_cell *a, const check_cell *b);
/* Appends s to c's reads (replacing the read of the same queue). */
int check_cell_add_read(check_cell *c, const check_site *s);
/* The i-th read since the last write. */
const check_site *check_cell_read(const check_cell *c, uint32_t i);

check_shadow *check_shadow_new(void);
check_shadow *check_shadow_ref(check_shadow *s);
void check_shadow_unref(check_shadow *s);
/* Visits [lo, hi) of *sh piece by piece (gaps included, with the empty
 * state), splitting segments at lo and hi, then merges equal neighbours.
 * Copies *sh first when shared. Returns 0 or -1 (out of memory). */
int check_shadow_update(check_shadow **sh, uint64_t lo, uint64_t hi, check_cell_fn fn,
                        void *ctx);
bool check_shadow_equal(const check_shadow *a, const check_shadow *b);
/* Number of segments (tests, statistics). */
uint32_t check_shadow_segments(const check_shadow *s);
/* The i-th segment in order (i < check_shadow_segments(s)); O(chunks). */
const check_seg *check_shadow_seg(const check_shadow *s, uint32_t i);

/* ------------------------------------------------------------------ */
/* Reports (findings.c).                                               */

typedef struct check_fkey {
    uint64_t a, b, c;
} check_fkey;

struct check_report {
    const trace *t;
    trace_finding *f;
    size_t n, cap;
    uint64_t dropped;
    uint64_t ops;
    check_coverage cov;     /* what the check could judge (coverage.c) */
    size_t taken;           /* findings moved out by check_report_take */
    uint32_t max_findings;
    size_t dedupe_from;     /* findings of the statement being checked start here */
    /* Findings of that statement left out by max_findings: each is counted
     * once in `dropped`, however many ranges or accesses repeat it. */
    check_fkey *dropped_now;
    size_t n_dropped_now, cap_dropped_now;
};

check_report *check_report_new(const trace *t, uint32_t max_findings);
/* Starts the findings of a new statement (the merge window of
 * check_report_conflict). */
void check_report_begin_stmt(check_report *rep);
/* Appends a finding (takes over its strings); returns it, or NULL when the
 * report is full (counted as dropped) or memory ran out. */
trace_finding *check_report_add(check_report *rep, const trace_finding *f);
/* Adds a race or use-after-free between sites a and b (ordered by seq),
 * merging with a finding of the same pair made for the same statement. A
 * race's types come from what the two accesses do (their modes), the one
 * earlier in the file first: RAW when it writes and the later one reads,
 * WAR the reverse, WAW when both write -- never from the order in which
 * the engine ran them. */
void check_report_conflict(check_report *rep, trace_finding_kind kind, const check_site *a,
                           const check_site *b, uint32_t root, uint64_t lo, uint64_t hi);
/* The missing edge from statement x to statement y (a race's fix): what
 * orders them, and on which queues. The one rule both the fix's words
 * (findings.c) and the statements SARIF inserts (sarif.c) come from. */
typedef struct check_edge {
    enum {
        CHECK_EDGE_EVENT,       /* `FROM record E` after x, `TO wait E` before y (two streams) */
        CHECK_EDGE_SYNC,        /* `TO sync FROM` before y (a stream, then a host) */
        CHECK_EDGE_FLAG,        /* `FROM signal F` after x, `TO await F` before y (from a host) */
    } kind;
    uint32_t from, to;          /* queues */
    bool by_submitter;          /* FLAG: TO is the host that submits y, not y's queue */
} check_edge;
check_edge check_edge_of(const trace *t, const trace_stmt_ref *x, const trace_stmt_ref *y);
/* Fills a finding's text and fix (races, use-after-free). */
void check_report_finish(check_report *rep);
/* A queue's name ("?" when out of range). */
const char *check_queue_name(const trace *t, uint32_t q);
/* Writes the name of a statement ("mm0", "s1@12", "s1#7") into buf. */
const char *check_ref_name(const trace *t, const trace_stmt_ref *r, char *buf, size_t cap);
trace_stmt_ref check_ref_of_stmt(const trace_stmt *s);

/* Key of a finding, for the minimiser's "nothing new" test. */
check_fkey check_finding_key(const trace_finding *f);

/* ------------------------------------------------------------------ */
/* The engine (hb.c).                                                  */

typedef struct check_engine check_engine;

/* A new engine over trace t (declarations may grow while statements are
 * fed). remove: NULL, or per seq true when the statement is removed (the
 * minimiser): a removed statement still takes its place in its queue but
 * synchronises nothing. */
check_engine *check_engine_new(const trace *t, check_report *rep, const bool *remove);
void check_engine_free(check_engine *e);
/* Feeds the next statement in submission order. Returns 0 or -1 (OOM). */
int check_engine_feed(check_engine *e, const trace_stmt *s);
/* Ends the input: reports hangs (unless ignore_hangs). */
int check_engine_finish(check_engine *e, bool ignore_hangs);
/* True when nothing is pending anywhere (a checkpoint may be taken). */
bool check_engine_quiescent(const check_engine *e);
/* A deep copy of a quiescent engine sharing clocks and shadows (copy on
 * write); its report is rep. NULL on OOM. */
check_engine *check_engine_clone(const check_engine *e, check_report *rep);
/* Makes dst (an engine from check_engine_clone, or assigned before) a copy
 * of quiescent e as check_engine_clone would, reusing dst's arrays: only the
 * shadows that differ change hands, so a copy costs O(queues + records and
 * flags alive) plus a pointer scan of the roots: of all of them, or of
 * roots[0..n_roots) when the caller knows that dst's other roots are e's
 * (dst was last copied from e, and neither touched them since). dst must
 * satisfy check_engine_reusable. 0, or -1 (OOM: dst must then be freed). */
int check_engine_assign(check_engine *dst, const check_engine *e, check_report *rep,
                        const uint32_t *roots, size_t n_roots);
/* c, a copy of e that will be assigned over before it is fed again, lets go
 * of e's shadow of root if it shares it: e can then change it in place
 * instead of copying it. c's shadow of root is then wrong: the caller
 * names root to the next check_engine_assign. */
void check_engine_let_go(check_engine *c, const check_engine *e, uint32_t root);
/* dst may be assigned over: quiescent, no generation open, not out of memory. */
bool check_engine_reusable(const check_engine *e);
/* True when two quiescent engines will behave the same from here on. Only
 * the roots and names that either touched since both left their common
 * copy are compared when dirty tracking is on (see check_engine_track);
 * roots: NULL, or a list of roots that holds every root either touched.
 * hint: NULL, or the queue to compare first, set to one that differed. */
bool check_engine_same(const check_engine *a, const check_engine *b, const uint32_t *roots,
                       size_t n_roots, uint32_t *hint);
/* What the minimiser knows of who can touch what (reach.c): for each root
 * the queues that access it anywhere in the trace (root_q[root_at[r] ..
 * root_at[r + 1])), for each stream the hosts that submit to it (sub_h[
 * sub_at[q] .. sub_at[q + 1])) and whether some statement of it has none. */
typedef struct check_reach {
    uint32_t n_roots, n_queues;
    uint32_t *root_at, *root_q;
    uint32_t *sub_at, *sub_h;
    bool *no_submitter;
} check_reach;
/* check_engine_same, but a read that no later access can race with (every
 * queue that reach says accesses its root knows it: by its clock, or, for
 * a stream, through every host that submits to it) counts as absent from
 * the shadows: two engines that differ only in such reads find the same
 * from here on (checkpoint.c, cells_alike, says why). */
bool check_engine_alike(const check_engine *a, const check_engine *b, const uint32_t *roots,
                        size_t n_roots, const check_reach *reach, uint32_t *hint);
/* check_engine_clocks_same, but a stream's clocks may differ where nothing
 * can tell them apart before the stream runs again (checkpoint.c,
 * stream_alike): its submitters know all it knows in both engines, and no
 * host sync that could read it comes first. */
bool check_engine_clocks_alike(const check_engine *a, const check_engine *b,
                               const check_reach *reach, uint32_t *hint);

/* A trace's roots cut into islands (reach.c's head): `view` is the trace
 * with a buffer table in which every island of a root is a root of its own
 * (ids n_orig and up); it shares the trace's statements and strings, and
 * lives as long as both. reach is of the view. */
typedef struct check_islands {
    trace view;
    trace_buffer *buffers;
    uint32_t n_orig, n_islands;
    uint32_t *orig_root;    /* per island: the trace's root it is part of */
    check_reach reach;
} check_islands;
/* 0, or -1 (OOM; *is freed). */
int check_islands_new(check_islands *is, const trace *t);
void check_islands_free(check_islands *is);
/* The trace's root that root (of the view) is part of. */
uint32_t check_island_root(const check_islands *is, uint32_t root);
/* The first part of check_engine_same: every queue's counter and clock
 * equal, nothing pending. O(queues) at most, often O(1) with a hint. */
bool check_engine_clocks_same(const check_engine *a, const check_engine *b, uint32_t *hint);
/* Starts recording which roots, events and flags change. */
void check_engine_track(check_engine *e, bool on);
void check_engine_set_remove(check_engine *e, const bool *remove);
/* Statements fed (the read position). */
uint64_t check_engine_fed(const check_engine *e);
/* Rule 6 needs every signal of a flag before an await passes. totals (flag
 * name string id -> number of signals in the whole trace; borrowed, kept
 * alive by the caller) makes that exact; without it the engine waits for
 * the signals fed so far and says so through check_engine_inexact() when a
 * signal comes after an await of its flag has passed. Set before feeding. */
void check_engine_set_flag_totals(check_engine *e, const trace_u64map *totals);
bool check_engine_inexact(const check_engine *e);
/* The minimiser knows the whole trace: record_last (seq of a record -> seq
 * of the last wait bound to it) and flag_last (flag name -> seq of its last
 * signal or await) let check_engine_prune() drop the records and flags no
 * later statement reads, so that checkpoints stay small and replays can meet
 * the baseline again even when every iteration names a new event. Both
 * borrowed. */
void check_engine_set_lifetimes(check_engine *e, const trace_u64map *record_last,
                                const trace_u64map *flag_last);
/* Drops records and flags whose last use has been read. Quiescent only. */
void check_engine_prune(check_engine *e);
/* The signals fed per flag (for a second, exact pass). 0 or -1 (OOM). */
int check_engine_signal_counts(const check_engine *e, trace_u64map *out);
/* The signals per flag of an in-memory trace. 0 or -1 (OOM). */
int check_flag_totals(const trace *t, trace_u64map *out);

/* ------------------------------------------------------------------ */
/* Where a place is, for editors and code-scanning tools (output.c).   */

/* The line of a call site FILE:LINE (LINE a decimal from 1; *file_len the
 * length of FILE), or 0 when it is something else (OBJECT+0xOFF, ??:0). */
uint32_t check_site_line(const char *site, size_t *file_len);

/* What check_place_locate found. */
typedef enum {
    CHECK_LOC_TEXT,     /* the statement's own line in a text trace */
    CHECK_LOC_SITE,     /* its call site FILE:LINE, in the program's source */
    CHECK_LOC_WHOLE,    /* line 1 of the trace, standing for all of it: name the seq */
} check_loc;
/* The file and line an editor opens for place s (NULL: the finding names no
 * statement) of trace t read from path (in_db: a database):
 *   1. the statement's line in the text trace: path itself, or for a
 *      database the file its run was imported from (run metadata
 *      source_file, when that file is readable here), relative to the
 *      working directory when under it;
 *   2. its call site when that is FILE:LINE (first, before 1, when
 *      prefer_site: SARIF locates in the program's source);
 *   3. else line 1 of path, standing for the whole trace.
 * *file is malloc'd (the caller frees it; NULL when out of memory). The one
 * rule of where a statement is. */
check_loc check_place_locate(const trace *t, const char *path, bool in_db, const check_place *s,
                             bool prefer_site, char **file, uint32_t *line);

/* A malloc'd formatted string (NULL when out of memory); check/findings.c. */
char *check_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
