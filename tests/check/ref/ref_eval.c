/*
 * ref_eval.c -- the contract's verdict on a small trace, by brute force.
 *
 * Written from shared/spec/trace-text-format.md ("the contract"; its
 * rulings win), docs/trace-format.md and docs/semantics.md for syncsim's
 * additions, and nothing else. Quotations below are the contract's words.
 *
 * THE GRAPH. Every statement is a node; a node has the set of nodes it must
 * wait for (its prerequisites, a bit set). A node "runs" once all of them
 * have run; the statements that never run are those of a hang. Edges:
 *
 *   queue order    "On one queue, each statement HB the next one." The
 *                  previous statement of the queue is a prerequisite.
 *   submission     "A stream statement submitted by host H: everything H did
 *                  before submitting it HB it." The host's last statement
 *                  before it in the file is a prerequisite. `by=`, else the
 *                  only host queue, else none ("with none there are no
 *                  submission edges").
 *   events         "`wait E` binds to the most recent `record E` that
 *                  precedes it in the file." That record is a prerequisite
 *                  of the wait (stream or host: the host blocks). "A wait
 *                  with no preceding record binds to nothing: it orders
 *                  nothing" and is `wait-unrecorded`; it does not block
 *                  (docs/trace-format.md: "A host `wait` on an event that was
 *                  never recorded does not block").
 *   host syncs     "everything submitted to stream S before the sync HB the
 *                  host's next statement": for each stream in scope, its last
 *                  statement before the sync in the file is a prerequisite
 *                  (file order is submission order). `device=D`: streams
 *                  whose device is D. `all`: every stream; ruling 4: on a
 *                  host named `rN.`, the streams named `rN.` and those with
 *                  no `rN.` prefix ("every rank's `sync all` covers it").
 *   generations    Barrier B (collective COMM): "generation k = each queue's
 *                  k-th arrival"; ruling 3: "the first `count=` arrivals of a
 *                  generation, in file order, form it; an extra arrival
 *                  passes without synchronising". The generation's count is
 *                  its first arrival's (docs/trace-format.md: "the generation
 *                  takes its first arrival's count"). A complete generation
 *                  has, per member, an arrival node (its queue and submission
 *                  prerequisites), the member's own node after every arrival
 *                  (a collective's accesses "happen inside it (after all
 *                  participants arrived, before any continues)") and one
 *                  release node after every member's node: what follows a
 *                  member on its queue, or is submitted by it, waits for the
 *                  release ("A blocking statement ... completes only when it
 *                  is released"). A generation with fewer arrivals than its
 *                  count never completes: its members never run.
 *   flags          Ruling 1, below: an await waits for a set of signals.
 *   semaphores     Rule 6b (docs/trace-format.md), below.
 *   messages       Rule 9 (docs/trace-format.md): the k-th send of a channel
 *                  (communicator, from, to, tag) pairs with its k-th recv,
 *                  "each side counted in submission order"; the send is a
 *                  prerequisite of the recv. A recv without its send never
 *                  runs ("A `recv` that no send is paired with is a `hang`");
 *                  a send without its recv is `unmatched-send` and runs.
 *
 * Every edge leaves a statement's "out" node: the statement itself, or the
 * release node of its generation. Statements never depend on statements that
 * stand after them except through flags, semaphores and messages.
 *
 * RULING 1 (flags). "An `await F` is released once every signal of F that is
 * not ordered after the await itself has run, and at least one such signal
 * ... exists and has run. A signal is ordered after the await when it can
 * only run after the await: ... or its queue first waits (an event, a sync,
 * a barrier or collective generation, a message, or another await or
 * semaphore wait) for something that itself can only happen after this
 * await. Releases are decided as a fixpoint: what an await's release orders
 * counts for the awaits decided after it." With the decisions made so far,
 * after(W) is the least set of nodes holding W and closed under:
 *   (a) a node with a prerequisite in after(W);
 *   (b) a flag await whose waited set is decided, when it waits for a signal
 *       in after(W);
 *   (c) a flag await not decided yet whose flag has signals not after it by
 *       fixed edges, all of them in after(W): it needs one of them, so it can
 *       only be released after W;
 *   (d) an await S2 >=V (V > 0) not released whose sets of value >= V not
 *       after it by fixed edges exist and are all in after(W): neither
 *       passing at once (that needs such a set before it) nor a release (by
 *       such a set) can happen before W.
 * ("Fixed edges": every kind but flags and semaphores; a signal or set that
 * follows an await by them can never be what releases it.)
 * W waits for the signals of F outside after(W); it is released (and its
 * waited set decided) once they have all run, and there is one. With none,
 * it is never released ("An await all of whose signals are ordered after it
 * is never released"; "A deadlock is never clean"). A signal that can never
 * run for another reason is still waited for (docs/semantics.md: "An await
 * therefore also waits for a signal that can never run"). A released await
 * never puts anything in after(W) of a blocked W: its signals ran first.
 *   Where this stops with flag awaits blocked whose waited sets are not
 * decided, each may wait for a signal behind another that waits for one
 * behind it (`s0 await f / s1 await f / s0 signal f / s1 signal f` with a
 * third signal of f free): whether a signal is "ordered after" depends on
 * which await is decided first, and the ruling's "decided as a fixpoint"
 * leaves that order open. The reference takes the order syncsim documents
 * (docs/semantics.md, rule 6): "When nothing more can run or be released
 * and awaits that their queues have reached are still neither released nor
 * decided, they are all decided, one after another in file order: each
 * waits for the signals of its flag not ordered after it given the
 * decisions made before it, those of this round included. Nothing is
 * released between two decisions of a round. Then everything runs on".
 * Deciding fixes the await's waited set as above (rule (b) then applies to
 * it). That outcome is the verdict, compared in full. To count how often
 * the order matters, every other order of each round is tried too (up to
 * MAX_OUTCOMES outcomes): order_matters when one gives another HB,
 * order_matters_run when it runs other statements.
 *
 * RULE 6b (semaphores, docs/trace-format.md): "The sets ... of a semaphore
 * must happen one after another; their values, in that order, are the
 * semaphore's history (it starts at 0). `await S >=V` is released by the
 * first set, counting from the last set of S that happens before the await,
 * whose value is at least V; when the value of that last set (or 0 ...) is
 * already V or more, the await passes at once and adds no edge. That set HB
 * the statements after the await." The history is the order in which sets
 * run in the fixpoint below; when the sets are ordered by HB it is their HB
 * order, unique. Sets not ordered are a `semaphore-race` and "The checker
 * goes on with the sets in the order they ran": the history is then not
 * fixed by the contract, and such traces are `ambiguous_sem` (the issue's
 * "documented semaphore-order ambiguity"): only the semaphore-race finding
 * itself is compared.
 *
 * WHICH STATEMENTS RUN: the least fixpoint of "all prerequisites ran (and
 * the await's condition holds)", found by repeated passes. A queue with a
 * statement that never runs is blocked; `hang` names every blocked queue
 * ("One finding names every blocked queue -- also a queue blocked only
 * because it syncs on, or was submitted work behind, a blocked queue").
 * "Statements that never run access nothing, so they take part in no race"
 * (docs/semantics.md): they take part in no race and no use after free.
 *
 * HAPPENS-BEFORE is reachability in the graph of what ran (ancestor sets
 * built as each node runs). Then, over every pair of statements that ran:
 *   race   "two accesses to overlapping bytes of the same memory (views
 *          resolved to their root), at least one a write, not ordered by HB"
 *          (either way: an await may stand before its signal in the file).
 *          "`alloc` and `free` count as writes of the whole buffer." First is
 *          the statement earlier in the file; the type is RAW if the first
 *          wrote and the second read, WAW if both wrote, WAR if the first
 *          read; a finding names "the most telling conflict between the two;
 *          RAW, then WAW, then WAR" (docs/trace-format.md).
 *   race type  Which conflicts of a pair the checker must see is bounded by
 *          the contract's latitude: it "reports each racing access against
 *          the most recent conflicting accesses it could be compared with
 *          (the last write, and for a write the reads since that write), as
 *          FastTrack and ThreadSanitizer do; it need not list every older
 *          pair." "Most recent" is in the order the statements run, which
 *          the contract does not fix: file order is the submission order,
 *          not an order of execution (an await may stand before its signal,
 *          and a checker runs what follows it later). So on a byte x the
 *          contract obliges a checker to compare the pair only where, in
 *          every order of execution HB allows, each is still the most recent
 *          access of its kind to x when the other runs: no other statement
 *          that ran can run between them (it is neither HB-before both nor
 *          HB-after both) and (1) writes x (the last write before the later
 *          of the two is then that statement, and a read of the earlier is
 *          not "since that write"), or (2) reads x after one of the pair
 *          that only reads x (HB): FastTrack keeps the later of two ordered
 *          reads, and the earlier is an "older pair". The type of a reported
 *          pair on a root is then fixed this far (ref_race_type_ok): a type
 *          the pair has on some byte (a finding never names a conflict that
 *          is not there), at least as telling, RAW > WAW > WAR, as the
 *          pair's most telling type on the obliged bytes. A checker that
 *          compared them on more bytes (it ran them in an order where nothing
 *          came between) may name a more telling type of those. File order
 *          alone would not do: in `s0 await f / s0 op k4 w:A[0:32] / s2 op k5
 *          w:A / s0 op k6 r:A[0:16] w:A[48:64] / h signal f` nothing stands
 *          between k5 and k6 in the file, but k4 runs between them in any
 *          execution where it runs after k5 (a checker that holds s0 until
 *          the signal does), and k6 then reads k4's bytes, not k5's: WAW (on
 *          48:64) is what the checker must say, RAW is allowed. The example, `s1 op k3
 *          r:A[1:45] rw:A[58:63] / s2 op k4 rw:A[48:64] / s2 op k5 r:A[42:45]
 *          rw:A`: k4 can run between k3 and k5 and writes 58:63, so WAR (on
 *          1:45) is the least, RAW and WAW (on 58:63) are allowed.
 *   uaf    Ruling 2: "An access is a use after free when it happens after
 *          some `free` F of its buffer and no `alloc` A of the buffer has F HB
 *          A HB the access." A free is an access here too ("A second free
 *          ordered after the first is a use-after-free (a double free)");
 *          an alloc is not (it is what ends the freed state). Empty ranges
 *          touch no byte and are no access.
 * Static findings, by file position alone: `wait-unrecorded`;
 * `barrier-mismatch` ("more queues than `count=` arrive at one generation of
 * a barrier, or arrivals disagree on `count=`"); `collective-mismatch`
 * ("participants of one generation disagree on KIND or size, or more queues
 * than `size=` arrive"); `unmatched-send` (per communicator).
 *
 * Cost: a trace of n statements has at most 3n nodes; each node's sets are
 * bit sets; after(W) is a fixpoint of O(nodes) passes of O(nodes) set
 * operations per await, the run fixpoint likewise; pairs are n^2 times
 * accesses^2. Microseconds for the generators' traces.
 */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

#define NODES (3 * REF_MAX_STMTS)
#define NW ((NODES + 63) / 64)

typedef struct nset {
    uint64_t w[NW];
} nset;

static inline void ns_set(nset *s, unsigned i) { s->w[i / 64] |= 1ull << (i % 64); }
static inline bool ns_has(const nset *s, unsigned i) { return s->w[i / 64] >> (i % 64) & 1; }

static inline bool ns_subset(const nset *a, const nset *b, unsigned nw)
{
    for (unsigned k = 0; k < nw; k++)
        if (a->w[k] & ~b->w[k])
            return false;
    return true;
}

static inline bool ns_meets(const nset *a, const nset *b, unsigned nw)
{
    for (unsigned k = 0; k < nw; k++)
        if (a->w[k] & b->w[k])
            return true;
    return false;
}

static inline bool ns_empty(const nset *a, unsigned nw)
{
    for (unsigned k = 0; k < nw; k++)
        if (a->w[k])
            return false;
    return true;
}

static inline void ns_or(nset *a, const nset *b, unsigned nw)
{
    for (unsigned k = 0; k < nw; k++)
        a->w[k] |= b->w[k];
}

static inline bool ns_equal(const nset *a, const nset *b, unsigned nw)
{
    for (unsigned k = 0; k < nw; k++)
        if (a->w[k] != b->w[k])
            return false;
    return true;
}

/* A barrier or collective generation. */
typedef struct gen {
    uint8_t kind;           /* REF_BARRIER or REF_COLLECTIVE */
    uint16_t obj;
    uint32_t k;
    uint16_t arrivals[REF_MAX_QUEUES];
    uint16_t n_arr;
} gen;

/* One way the releases were decided: what ran, what each await waits for. */
typedef struct runstate {
    bool ran[NODES];
    nset ranset;
    nset dyn[NODES];        /* the signals a released await waited for, or its set */
    nset anc[NODES];        /* ancestors, built when the node runs */
    bool decided[REF_MAX_STMTS];  /* flag await: its waited set is fixed */
    nset waited[REF_MAX_STMTS];   /* ... and that set */
    uint16_t hist[16][REF_MAX_STMTS];   /* each semaphore's sets, in the order they ran */
    uint16_t n_hist[16];
    unsigned version;       /* names the decisions made so far (for the after() cache) */
} runstate;

typedef struct graph {
    const ref_trace *t;
    unsigned n, n_nodes, nw;
    nset pre[NODES];        /* fixed prerequisites */
    nset sigs[REF_MAX_STMTS];     /* flag await: every signal of its flag */
    nset reach[REF_MAX_STMTS];    /* semaphore await: its sets of value >= V */
    nset fixed_after[REF_MAX_STMTS];  /* await: what follows it by fixed edges alone */
    bool never[NODES];
    uint16_t out[REF_MAX_STMTS];
    uint16_t entry[REF_MAX_STMTS];  /* the node that gets the queue/submission edges */
    gen gens[REF_MAX_STMTS];
    unsigned n_gens;
    runstate rs;
    unsigned epoch;
    nset after_set[REF_MAX_STMTS];  /* cache of after(W), valid for after_ver */
    unsigned after_ver[REF_MAX_STMTS];
} graph;

static graph G;

static int sem_index(const ref_trace *t, uint16_t name)
{
    for (uint16_t i = 0; i < t->n_sems; i++)
        if (t->sems[i] == name)
            return i;
    return -1;
}

static bool is_flag_await(const ref_trace *t, uint16_t i)
{
    return t->s[i].kind == REF_AWAIT && !ref_is_sem(t, t->s[i].obj);
}

static bool is_sem_await(const ref_trace *t, uint16_t i)
{
    return t->s[i].kind == REF_AWAIT && ref_is_sem(t, t->s[i].obj);
}

static void names_add(ref_names *s, uint16_t id)
{
    if (id < REF_MAX_NAMES)
        s->w[id / 64] |= 1ull << (id % 64);
}

bool ref_names_has(const ref_names *s, uint16_t id)
{
    return id < REF_MAX_NAMES && (s->w[id / 64] >> (id % 64) & 1);
}

/* ------------------------------------------------------------------ */
/* Byte interval sets.                                                 */

void ref_iv_clear(ref_ivset *s)
{
    s->n = 0;
    s->overflow = false;
}

void ref_iv_add(ref_ivset *s, uint32_t lo, uint32_t hi)
{
    if (lo >= hi)
        return;
    /* Merge every piece that overlaps or touches [lo, hi). */
    uint16_t j = 0;
    uint32_t nlo = lo, nhi = hi;
    uint32_t keep_lo[REF_MAX_IV + 1], keep_hi[REF_MAX_IV + 1];
    uint16_t nk = 0;
    for (; j < s->n; j++) {
        if (s->hi[j] < nlo || s->lo[j] > nhi) {
            keep_lo[nk] = s->lo[j];
            keep_hi[nk++] = s->hi[j];
        } else {
            nlo = s->lo[j] < nlo ? s->lo[j] : nlo;
            nhi = s->hi[j] > nhi ? s->hi[j] : nhi;
        }
    }
    /* Insert sorted. */
    uint16_t at = 0;
    while (at < nk && keep_lo[at] < nlo)
        at++;
    if (nk + 1 > REF_MAX_IV) {
        s->overflow = true;
        return;
    }
    memmove(&keep_lo[at + 1], &keep_lo[at], (size_t)(nk - at) * sizeof keep_lo[0]);
    memmove(&keep_hi[at + 1], &keep_hi[at], (size_t)(nk - at) * sizeof keep_hi[0]);
    keep_lo[at] = nlo;
    keep_hi[at] = nhi;
    nk++;
    memcpy(s->lo, keep_lo, nk * sizeof keep_lo[0]);
    memcpy(s->hi, keep_hi, nk * sizeof keep_hi[0]);
    s->n = nk;
}

void ref_iv_union(ref_ivset *dst, const ref_ivset *src)
{
    for (uint16_t i = 0; i < src->n; i++)
        ref_iv_add(dst, src->lo[i], src->hi[i]);
    dst->overflow |= src->overflow;
}

void ref_iv_intersect(ref_ivset *dst, const ref_ivset *src)
{
    ref_ivset out;
    ref_iv_clear(&out);
    for (uint16_t i = 0; i < dst->n; i++)
        for (uint16_t j = 0; j < src->n; j++) {
            uint32_t lo = dst->lo[i] > src->lo[j] ? dst->lo[i] : src->lo[j];
            uint32_t hi = dst->hi[i] < src->hi[j] ? dst->hi[i] : src->hi[j];
            ref_iv_add(&out, lo, hi);
        }
    out.overflow |= dst->overflow || src->overflow;
    *dst = out;
}

bool ref_iv_minus_first(const ref_ivset *a, const ref_ivset *b, uint32_t *lo, uint32_t *hi)
{
    for (uint16_t i = 0; i < a->n; i++) {
        uint32_t x = a->lo[i];
        while (x < a->hi[i]) {
            uint16_t j = 0;
            while (j < b->n && !(b->lo[j] <= x && x < b->hi[j]))
                j++;
            if (j == b->n) {
                /* x is not covered: the gap runs to the next piece of b. */
                uint32_t end = a->hi[i];
                for (uint16_t k = 0; k < b->n; k++)
                    if (b->lo[k] > x && b->lo[k] < end)
                        end = b->lo[k];
                *lo = x;
                *hi = end;
                return true;
            }
            x = b->hi[j];
        }
    }
    return false;
}

/* ------------------------------------------------------------------ */
/* Accesses in root bytes.                                             */

typedef struct racc {
    uint16_t root;
    uint8_t mode;
    uint32_t lo, hi;
} racc;

/* The accesses of statement i in root bytes; alloc and free write the
 * whole buffer. Empty ranges are left out. */
static unsigned root_accesses(const ref_trace *t, uint16_t i, racc *out)
{
    const ref_stmt *s = &t->s[i];
    unsigned n = 0;
    if (s->kind == REF_ALLOC || s->kind == REF_FREE) {
        out[0] = (racc){ s->obj, REF_W, 0, t->b[s->obj].size };
        return 1;
    }
    for (uint8_t k = 0; k < s->n_acc; k++) {
        const ref_access *a = &s->acc[k];
        const ref_buffer *b = &t->b[a->buf];
        if (a->lo == a->hi)
            continue;
        out[n++] = (racc){ b->root, a->mode, b->root_off + a->lo, b->root_off + a->hi };
    }
    return n;
}

uint16_t ref_conflict(const ref_trace *t, uint16_t a, uint16_t b, uint16_t root_only,
                      const ref_ivset *except, ref_ivset *bytes, uint8_t *types)
{
    racc x[REF_MAX_ACC], y[REF_MAX_ACC];
    unsigned nx = root_accesses(t, a, x), ny = root_accesses(t, b, y);
    uint16_t root = REF_NONE;
    if (bytes)
        ref_iv_clear(bytes);
    *types = 0;
    for (unsigned i = 0; i < nx; i++)
        for (unsigned j = 0; j < ny; j++) {
            if (x[i].root != y[j].root || (root_only != REF_NONE && x[i].root != root_only))
                continue;
            uint32_t lo = x[i].lo > y[j].lo ? x[i].lo : y[j].lo;
            uint32_t hi = x[i].hi < y[j].hi ? x[i].hi : y[j].hi;
            if (lo >= hi)
                continue;
            if (except) {
                ref_ivset piece;
                uint32_t out_lo, out_hi;
                ref_iv_clear(&piece);
                ref_iv_add(&piece, lo, hi);
                if (!ref_iv_minus_first(&piece, except, &out_lo, &out_hi))
                    continue;
            }
            uint8_t ty = 0;
            if ((x[i].mode & REF_W) && (y[j].mode & REF_R))
                ty |= 1;    /* RAW */
            if ((x[i].mode & REF_R) && (y[j].mode & REF_W))
                ty |= 2;    /* WAR */
            if ((x[i].mode & REF_W) && (y[j].mode & REF_W))
                ty |= 4;    /* WAW */
            if (!ty)
                continue;
            if (root == REF_NONE)
                root = x[i].root;
            if (root_only == REF_NONE && x[i].root != root)
                continue;   /* report the first root; the caller asks per root */
            *types |= ty;
            if (bytes)
                ref_iv_add(bytes, lo, hi);
        }
    return root;
}

uint8_t ref_race_type(uint8_t types)
{
    return types & 1 ? 1 : types & 4 ? 4 : types & 2 ? 2 : 0;
}

/* How telling a type is: RAW 3, WAW 2, WAR 1, none 0. */
static int telling(uint8_t type)
{
    return type == 1 ? 3 : type == 4 ? 2 : type == 2 ? 1 : 0;
}

/* The bytes of root that statement i reads (mode REF_R) or writes (REF_W). */
static void bytes_of(const ref_trace *t, uint16_t i, uint16_t root, uint8_t mode, ref_ivset *out)
{
    racc acc[REF_MAX_ACC];
    unsigned n = root_accesses(t, i, acc);
    ref_iv_clear(out);
    for (unsigned k = 0; k < n; k++)
        if (acc[k].root == root && (acc[k].mode & mode))
            ref_iv_add(out, acc[k].lo, acc[k].hi);
}

/* a becomes the bytes of a not in b. */
static void iv_minus(ref_ivset *a, const ref_ivset *b)
{
    ref_ivset out;
    ref_iv_clear(&out);
    out.overflow = a->overflow || b->overflow;
    for (uint16_t i = 0; i < a->n; i++) {
        uint32_t lo = a->lo[i];
        for (uint16_t j = 0; j < b->n && lo < a->hi[i]; j++) {
            if (b->hi[j] <= lo || b->lo[j] >= a->hi[i])
                continue;
            ref_iv_add(&out, lo, b->lo[j] > lo ? b->lo[j] : lo);
            lo = b->hi[j];
        }
        ref_iv_add(&out, lo, a->hi[i]);
    }
    *a = out;
}

bool ref_hb(const ref_verdict *v, uint16_t a, uint16_t b)
{
    return v->hb[b].w[a / 64] >> (a % 64) & 1;
}

bool ref_race_type_ok(const ref_trace *t, const ref_verdict *v, uint16_t a, uint16_t b,
                      uint16_t root, uint8_t type, uint8_t *need)
{
    uint8_t all, obliged = 0;
    if (ref_conflict(t, a, b, root, NULL, NULL, &all) == REF_NONE)
        return false;
    /* The bytes each of the pair only reads (a read FastTrack may drop). */
    ref_ivset only_reads[2], writes;
    const uint16_t pair[2] = { a, b };
    for (int k = 0; k < 2; k++) {
        bytes_of(t, pair[k], root, REF_R, &only_reads[k]);
        bytes_of(t, pair[k], root, REF_W, &writes);
        iv_minus(&only_reads[k], &writes);
    }
    /* Bytes on which another statement that ran may come between them. */
    ref_ivset between, piece;
    ref_iv_clear(&between);
    for (uint16_t c = 0; c < t->n; c++) {
        if (!v->ran[c] || c == a || c == b || (ref_hb(v, c, a) && ref_hb(v, c, b)) ||
            (ref_hb(v, a, c) && ref_hb(v, b, c)))
            continue;
        bytes_of(t, c, root, REF_W, &piece);
        ref_iv_union(&between, &piece);
        for (int k = 0; k < 2; k++) {
            if (!ref_hb(v, pair[k], c))
                continue;
            bytes_of(t, c, root, REF_R, &piece);
            ref_iv_intersect(&piece, &only_reads[k]);
            ref_iv_union(&between, &piece);
        }
    }
    /* more pieces than an interval set holds: no bound (never seen) */
    if (!between.overflow)
        ref_conflict(t, a, b, root, &between, NULL, &obliged);
    *need = ref_race_type(obliged);
    return (all & type) && telling(type) >= telling(*need);
}

/* ------------------------------------------------------------------ */
/* Pass 1: generations.                                                */

static void find_generations(graph *g)
{
    const ref_trace *t = g->t;
    g->n_gens = 0;
    for (uint16_t i = 0; i < t->n; i++) {
        const ref_stmt *s = &t->s[i];
        if (s->kind != REF_BARRIER && s->kind != REF_COLLECTIVE)
            continue;
        uint32_t k = 1;
        for (uint16_t j = 0; j < i; j++)
            if (t->s[j].kind == s->kind && t->s[j].obj == s->obj && t->s[j].queue == s->queue)
                k++;
        unsigned gi = 0;
        while (gi < g->n_gens && !(g->gens[gi].kind == s->kind && g->gens[gi].obj == s->obj &&
                                   g->gens[gi].k == k))
            gi++;
        if (gi == g->n_gens) {
            g->gens[gi] = (gen){ .kind = s->kind, .obj = s->obj, .k = k, .n_arr = 0 };
            g->n_gens++;
        }
        if (g->gens[gi].n_arr < REF_MAX_QUEUES)
            g->gens[gi].arrivals[g->gens[gi].n_arr++] = i;
    }
}

/* ------------------------------------------------------------------ */
/* Pass 2: nodes and fixed edges.                                      */

static bool sync_covers(const ref_trace *t, const ref_stmt *s, uint16_t q)
{
    const ref_queue *sq = &t->q[q];
    if (sq->host)
        return false;
    switch (s->scope) {
    case REF_SYNC_QUEUE:
        return s->obj == q;
    case REF_SYNC_DEVICE:
        return sq->device == s->obj;
    default: {
        int16_t rank = t->q[s->queue].rank;
        return rank < 0 || sq->rank < 0 || sq->rank == rank;
    }
    }
}

/* The last statement of queue q before statement i, or REF_NONE. */
static uint16_t last_before(const ref_trace *t, uint16_t q, uint16_t i)
{
    for (uint16_t j = i; j-- > 0;)
        if (t->s[j].queue == q)
            return j;
    return REF_NONE;
}

static void build(graph *g, ref_verdict *v)
{
    const ref_trace *t = g->t;
    unsigned n = t->n;
    g->n = n;
    /* Nodes: statements [0, n), arrivals [n, 2n), releases [2n, 2n + gens). */
    find_generations(g);
    g->n_nodes = 2 * n + g->n_gens;
    g->nw = (g->n_nodes + 63) / 64;
    memset(g->pre, 0, g->n_nodes * sizeof g->pre[0]);
    memset(g->never, 0, g->n_nodes * sizeof g->never[0]);
    for (unsigned i = 0; i < n; i++) {
        g->out[i] = (uint16_t)i;
        g->entry[i] = (uint16_t)i;
    }
    /* Arrival nodes of statements that are no member never run (unused). */
    for (unsigned i = 0; i < n; i++)
        g->never[n + i] = true;

    for (unsigned gi = 0; gi < g->n_gens; gi++) {
        gen *ge = &g->gens[gi];
        const ref_stmt *first = &t->s[ge->arrivals[0]];
        uint32_t count = first->count;
        bool mismatch = ge->n_arr > count;
        for (uint16_t a = 0; a < ge->n_arr; a++) {
            const ref_stmt *s = &t->s[ge->arrivals[a]];
            if (s->count != count ||
                (ge->kind == REF_COLLECTIVE && s->coll_kind != first->coll_kind))
                mismatch = true;
        }
        if (mismatch)
            names_add(ge->kind == REF_BARRIER ? &v->barrier_mismatch : &v->coll_mismatch,
                      ge->obj);
        unsigned members = ge->n_arr < count ? ge->n_arr : count;
        unsigned rel = 2 * n + gi;
        if (ge->n_arr < count) {
            /* Never complete: its members and release never run. They keep
             * their edges: what follows a generation that needs an arrival
             * after W is "ordered after" W (ruling 1 names generations). */
            for (unsigned a = 0; a < members; a++)
                g->never[ge->arrivals[a]] = true;
            g->never[rel] = true;
        }
        for (unsigned a = 0; a < members; a++) {
            uint16_t m = ge->arrivals[a];
            g->entry[m] = (uint16_t)(n + m);
            g->never[n + m] = false;
            g->out[m] = (uint16_t)rel;
            ns_set(&g->pre[rel], m);
            for (unsigned b = 0; b < members; b++)
                ns_set(&g->pre[m], n + g->gens[gi].arrivals[b]);
        }
        /* Extra arrivals keep out = themselves: they synchronise nothing. */
    }

    for (uint16_t i = 0; i < n; i++) {
        const ref_stmt *s = &t->s[i];
        nset *pre = &g->pre[g->entry[i]];
        uint16_t p = last_before(t, s->queue, i);
        if (p != REF_NONE)
            ns_set(pre, g->out[p]);
        if (!t->q[s->queue].host && s->by != REF_NONE) {
            uint16_t h = last_before(t, s->by, i);
            if (h != REF_NONE)
                ns_set(pre, g->out[h]);
        }
        switch (s->kind) {
        case REF_WAIT: {
            uint16_t rec = REF_NONE;
            for (uint16_t j = i; j-- > 0;)
                if (t->s[j].kind == REF_RECORD && t->s[j].obj == s->obj) {
                    rec = j;
                    break;
                }
            if (rec == REF_NONE)
                v->wait_unrecorded[i] = true;
            else
                ns_set(&g->pre[i], g->out[rec]);
            break;
        }
        case REF_SYNC:
            for (uint16_t q = 0; q < t->n_queues; q++)
                if (sync_covers(t, s, q)) {
                    uint16_t l = last_before(t, q, i);
                    if (l != REF_NONE)
                        ns_set(&g->pre[i], g->out[l]);
                }
            break;
        case REF_RECV: {
            uint32_t k = 0;
            for (uint16_t j = 0; j < i; j++)
                if (t->s[j].kind == REF_RECV && t->s[j].obj == s->obj &&
                    t->s[j].from == s->from && t->s[j].to == s->to && t->s[j].count == s->count)
                    k++;
            uint16_t send = REF_NONE;
            for (uint16_t j = 0; j < t->n && send == REF_NONE; j++) {
                const ref_stmt *o = &t->s[j];
                if (o->kind == REF_SEND && o->obj == s->obj && o->from == s->from &&
                    o->to == s->to && o->count == s->count && k-- == 0)
                    send = j;
            }
            if (send == REF_NONE)
                g->never[i] = true;
            else
                ns_set(&g->pre[i], g->out[send]);
            break;
        }
        case REF_SEND: {
            uint32_t k = 0, recvs = 0;
            for (uint16_t j = 0; j < t->n; j++) {
                const ref_stmt *o = &t->s[j];
                if (o->obj != s->obj || o->from != s->from || o->to != s->to ||
                    o->count != s->count)
                    continue;
                if (o->kind == REF_SEND && j < i)
                    k++;
                if (o->kind == REF_RECV)
                    recvs++;
            }
            if (k >= recvs)
                names_add(&v->unmatched_send, s->obj);
            break;
        }
        default:
            break;
        }
    }

    /* What each await could wait for. */
    for (uint16_t i = 0; i < n; i++) {
        if (t->s[i].kind != REF_AWAIT)
            continue;
        memset(&g->sigs[i], 0, sizeof g->sigs[i]);
        memset(&g->reach[i], 0, sizeof g->reach[i]);
        bool sem = ref_is_sem(t, t->s[i].obj);
        for (uint16_t j = 0; j < n; j++) {
            const ref_stmt *o = &t->s[j];
            if (o->kind != REF_SIGNAL || o->obj != t->s[i].obj)
                continue;
            if (!sem)
                ns_set(&g->sigs[i], j);
            else if (o->count >= t->s[i].count)
                ns_set(&g->reach[i], j);
        }
        /* What follows the await by fixed edges: never what releases it. */
        nset *fa = &g->fixed_after[i];
        memset(fa, 0, sizeof *fa);
        ns_set(fa, i);
        for (bool changed = true; changed;) {
            changed = false;
            for (unsigned x = 0; x < g->n_nodes; x++)
                if (!ns_has(fa, x) && ns_meets(&g->pre[x], fa, g->nw)) {
                    ns_set(fa, x);
                    changed = true;
                }
        }
    }
}

/* ------------------------------------------------------------------ */
/* Pass 3: ruling 1's "ordered after".                                 */

/* Rules (c) and (d): whether await x, which needs one of cand (its signals
 * or its sets that reach its value), can only be released after the nodes
 * of a: cand has members that do not follow x by fixed edges, all in a. */
static bool needs_only(const graph *g, uint16_t x, const nset *cand, const nset *a)
{
    nset need;
    for (unsigned k = 0; k < NW; k++)
        need.w[k] = cand->w[k] & ~g->fixed_after[x].w[k];
    return !ns_empty(&need, g->nw) && ns_subset(&need, a, g->nw);
}

/* after(W) as the head comment defines it, given the decisions of rs: a
 * flag await whose waited set is fixed is after W when it waits for a
 * signal in the set; one not decided yet when all its signals are. */
static const nset *after(graph *g, uint16_t w)
{
    const ref_trace *t = g->t;
    const runstate *rs = &g->rs;
    nset *a = &g->after_set[w];
    if (g->after_ver[w] == rs->version)
        return a;
    memset(a, 0, sizeof *a);
    ns_set(a, w);
    bool changed = true;
    while (changed) {
        changed = false;
        for (unsigned x = 0; x < g->n_nodes; x++) {
            if (ns_has(a, x))
                continue;
            bool in = ns_meets(&g->pre[x], a, g->nw);
            if (!in && x < g->n && is_flag_await(t, (uint16_t)x))
                in = rs->decided[x] ? ns_meets(&rs->waited[x], a, g->nw)
                                    : needs_only(g, (uint16_t)x, &g->sigs[x], a);
            else if (!in && x < g->n && is_sem_await(t, (uint16_t)x))
                in = rs->ran[x] ? ns_meets(&rs->dyn[x], a, g->nw)
                                : t->s[x].count > 0 && needs_only(g, (uint16_t)x, &g->reach[x], a);
            if (in) {
                ns_set(a, x);
                changed = true;
            }
        }
    }
    g->after_ver[w] = rs->version;
    return a;
}

/* Fixes flag await w's waited set: the signals of its flag not after it. */
static void commit(graph *g, uint16_t w)
{
    const nset *a = after(g, w);
    runstate *rs = &g->rs;
    for (unsigned k = 0; k < NW; k++)
        rs->waited[w].w[k] = g->sigs[w].w[k] & ~a->w[k];
    rs->decided[w] = true;
    rs->version = ++g->epoch;
}

/* ------------------------------------------------------------------ */
/* Pass 4: which nodes run, and their ancestors.                       */

/* Runs every node that can run with the decisions of rs (the least
 * fixpoint): a flag await not yet decided is released, and decided, when
 * the signals outside after(W) have all run and there is one. */
static void advance(graph *g)
{
    const ref_trace *t = g->t;
    runstate *rs = &g->rs;
    bool changed = true;
    while (changed) {
        changed = false;
        for (unsigned x = 0; x < g->n_nodes; x++) {
            if (rs->ran[x] || g->never[x] || !ns_subset(&g->pre[x], &rs->ranset, g->nw))
                continue;
            nset dyn;
            memset(&dyn, 0, sizeof dyn);
            if (x < g->n && is_flag_await(t, (uint16_t)x)) {
                nset w;
                if (rs->decided[x]) {
                    w = rs->waited[x];
                } else {
                    const nset *a = after(g, (uint16_t)x);
                    for (unsigned k = 0; k < NW; k++)
                        w.w[k] = g->sigs[x].w[k] & ~a->w[k];
                }
                if (ns_empty(&w, g->nw) || !ns_subset(&w, &rs->ranset, g->nw))
                    continue;
                rs->decided[x] = true;
                rs->waited[x] = w;
                dyn = w;
            } else if (x < g->n && is_sem_await(t, (uint16_t)x)) {
                int si = sem_index(t, t->s[x].obj);
                nset before = g->pre[x];
                for (unsigned p = 0; p < g->n_nodes; p++)
                    if (ns_has(&g->pre[x], p))
                        ns_or(&before, &rs->anc[p], g->nw);
                int last = -1;
                for (int h = 0; h < rs->n_hist[si]; h++)
                    if (ns_has(&before, rs->hist[si][h]))
                        last = h;
                uint32_t value = last < 0 ? 0 : t->s[rs->hist[si][last]].count;
                if (value < t->s[x].count) {
                    int rel = -1;
                    for (int h = last + 1; h < rs->n_hist[si] && rel < 0; h++)
                        if (t->s[rs->hist[si][h]].count >= t->s[x].count)
                            rel = h;
                    if (rel < 0)
                        continue;
                    ns_set(&dyn, rs->hist[si][rel]);
                }
            }
            rs->ran[x] = true;
            ns_set(&rs->ranset, x);
            rs->dyn[x] = dyn;
            nset anc = g->pre[x];
            ns_or(&anc, &dyn, g->nw);
            nset direct = anc;
            for (unsigned p = 0; p < g->n_nodes; p++)
                if (ns_has(&direct, p))
                    ns_or(&anc, &rs->anc[p], g->nw);
            rs->anc[x] = anc;
            if (x < g->n && t->s[x].kind == REF_SIGNAL && ref_is_sem(t, t->s[x].obj)) {
                int si = sem_index(t, t->s[x].obj);
                rs->hist[si][rs->n_hist[si]++] = (uint16_t)x;
            }
            changed = true;
        }
    }
}

/* Every order of deciding, from where advance() stops with flag awaits
 * blocked at the head of their queues and not decided: all of them are
 * decided (commit), one after another, then the rest runs on. The orders
 * are tried in file order first, so the first outcome is the documented
 * order's (docs/semantics.md: the blocked awaits are decided in file
 * order): its findings go into the verdict and it is kept in *first; the
 * others are only compared with it, to count the traces where the order
 * matters. */
#define MAX_OUTCOMES 64

typedef struct explore_ctx {
    runstate *first;
    ref_verdict *v;
    unsigned outcomes;
    bool overflow, run_differs, hb_differs;
} explore_ctx;

static void races_and_uses(graph *g, ref_verdict *v);

static void outcome(graph *g, explore_ctx *cx)
{
    const runstate *rs = &g->rs;
    if (cx->outcomes++ == 0) {
        races_and_uses(g, cx->v);
        *cx->first = *rs;
        return;
    }
    for (unsigned i = 0; i < g->n; i++) {
        if (rs->ran[i] != cx->first->ran[i])
            cx->run_differs = true;
        else if (rs->ran[i] && !ns_equal(&rs->anc[i], &cx->first->anc[i], g->nw))
            cx->hb_differs = true;
    }
}

static void explore(graph *g, explore_ctx *cx);

/* Decides the n awaits of open[] in every order (file order first), each
 * order then running on (explore). */
static void decide_all(graph *g, explore_ctx *cx, uint16_t *open, uint16_t n)
{
    if (n == 0) {
        explore(g, cx);
        return;
    }
    if (cx->outcomes >= MAX_OUTCOMES) {
        cx->overflow = true;
        return;
    }
    runstate *saved = n > 1 ? malloc(sizeof *saved) : NULL;
    if (n > 1 && !saved) {
        cx->overflow = true;
        return;
    }
    if (saved)
        *saved = g->rs;
    for (uint16_t i = 0; i < n; i++) {
        if (i)
            g->rs = *saved;
        uint16_t rest[REF_MAX_STMTS], m = 0;
        for (uint16_t j = 0; j < n; j++)
            if (j != i)
                rest[m++] = open[j];
        commit(g, open[i]);
        decide_all(g, cx, rest, m);
    }
    free(saved);
}

static void explore(graph *g, explore_ctx *cx)
{
    advance(g);
    uint16_t open[REF_MAX_STMTS], n = 0;
    for (uint16_t x = 0; x < g->n; x++)
        if (is_flag_await(g->t, x) && !g->rs.ran[x] && !g->never[x] && !g->rs.decided[x] &&
            ns_subset(&g->pre[x], &g->rs.ranset, g->nw))
            open[n++] = x;
    if (n == 0)
        outcome(g, cx);
    else
        decide_all(g, cx, open, n);
}

/* ------------------------------------------------------------------ */
/* Pass 5: findings.                                                   */

static bool hb(const graph *g, uint16_t a, uint16_t b)
{
    return ns_has(&g->rs.anc[b], a);
}

static bool has_uaf(const ref_uaf *list, uint16_t n, uint16_t stmt, uint16_t root)
{
    for (uint16_t i = 0; i < n; i++)
        if (list[i].stmt == stmt && list[i].root == root)
            return true;
    return false;
}

/* Races, uses after free and semaphore races of the outcome in g->rs,
 * into v. */
static void races_and_uses(graph *g, ref_verdict *v)
{
    const ref_trace *t = g->t;
    ref_ivset *racy = v->racy;
    ref_uaf *uaf = v->uaf;
    uint16_t n_uaf = 0;
    uint32_t pairs = 0;
    for (uint16_t r = 0; r < t->n_bufs; r++)
        ref_iv_clear(&racy[r]);
    /* Races: every pair that ran, in file order, unordered either way. */
    for (uint16_t b = 0; b < t->n; b++) {
        if (!g->rs.ran[b])
            continue;
        for (uint16_t a = 0; a < b; a++) {
            if (!g->rs.ran[a] || hb(g, a, b) || hb(g, b, a))
                continue;
            uint8_t types;
            if (ref_conflict(t, a, b, REF_NONE, NULL, NULL, &types) == REF_NONE)
                continue;
            pairs++;
            v->unordered[b].w[a / 64] |= 1ull << (a % 64);
            for (uint16_t r = 0; r < t->n_bufs; r++) {
                if (t->b[r].parent != REF_NONE)
                    continue;
                ref_ivset bytes;
                if (ref_conflict(t, a, b, r, NULL, &bytes, &types) != REF_NONE)
                    ref_iv_union(&racy[r], &bytes);
            }
        }
    }
    /* Ruling 2. */
    for (uint16_t b = 0; b < t->n; b++) {
        if (!g->rs.ran[b] || t->s[b].kind == REF_ALLOC)
            continue;
        racc acc[REF_MAX_ACC];
        unsigned na = root_accesses(t, b, acc);
        for (unsigned k = 0; k < na; k++) {
            uint16_t root = acc[k].root;
            bool used = false;
            for (uint16_t f = 0; f < t->n && !used; f++) {
                if (f == b || t->s[f].kind != REF_FREE || t->s[f].obj != root ||
                    !g->rs.ran[f] || !hb(g, f, b))
                    continue;
                bool realloc = false;
                for (uint16_t a = 0; a < t->n && !realloc; a++)
                    realloc = t->s[a].kind == REF_ALLOC && t->s[a].obj == root &&
                              g->rs.ran[a] && hb(g, f, a) && hb(g, a, b);
                used = !realloc;
            }
            if (!used || has_uaf(uaf, n_uaf, b, root))
                continue;
            if (n_uaf >= REF_MAX_UAF) {
                v->uaf_overflow = true;
                continue;
            }
            uaf[n_uaf++] = (ref_uaf){ b, root };
        }
    }
    v->n_uaf = n_uaf;
    v->n_race_pairs = pairs;
    /* Semaphore sets that ran, pairwise ordered or not. */
    for (uint16_t a = 0; a < t->n; a++) {
        if (!g->rs.ran[a] || t->s[a].kind != REF_SIGNAL || !ref_is_sem(t, t->s[a].obj))
            continue;
        for (uint16_t b = a + 1; b < t->n; b++)
            if (g->rs.ran[b] && t->s[b].kind == REF_SIGNAL && t->s[b].obj == t->s[a].obj &&
                !hb(g, a, b) && !hb(g, b, a)) {
                names_add(&v->sem_race, t->s[a].obj);
                v->ambiguous_sem = true;
            }
    }
}

/* What ran and HB, of the outcome in g->rs. */
static void findings(graph *g, ref_verdict *v)
{
    const ref_trace *t = g->t;
    for (uint16_t i = 0; i < t->n; i++) {
        v->ran[i] = g->rs.ran[i];
        if (!g->rs.ran[i])
            v->blocked |= 1u << t->s[i].queue;
        memset(&v->hb[i], 0, sizeof v->hb[i]);
        if (g->rs.ran[i])
            for (uint16_t a = 0; a < t->n; a++)
                if (hb(g, a, i))
                    v->hb[i].w[a / 64] |= 1ull << (a % 64);
    }
}

void ref_eval(const ref_trace *t, ref_verdict *v)
{
    graph *g = &G;
    static runstate first;
    memset(v, 0, sizeof *v);
    for (uint16_t r = 0; r < REF_MAX_BUFS; r++)
        ref_iv_clear(&v->racy[r]);
    g->t = t;
    build(g, v);
    memset(&g->rs, 0, sizeof g->rs);
    g->rs.version = ++g->epoch;
    explore_ctx cx = { &first, v, 0, false, false, false };
    explore(g, &cx);
    g->rs = first;
    v->order_matters = cx.overflow || cx.run_differs || cx.hb_differs;
    v->order_matters_run = cx.overflow || cx.run_differs;
    v->outcomes = cx.outcomes;
    findings(g, v);
}
