/*
 * test_minimize_greedy.c -- the incremental minimiser removes exactly what
 * the plain greedy removes.
 *
 * The plain greedy, written here the slow way: for each candidate in
 * submission order (a wait, sync or await; a barrier generation -- each
 * queue's k-th arrival at one barrier -- all its participants at once),
 * mark it removed on top of the removals kept so
 * far, re-check the whole trace from scratch (a fresh engine, every flag's
 * signal count known, as the minimiser checks), and keep the removal when
 * the findings are a subset of the findings without it. The incremental
 * minimiser (check/minimize.c) copies a live run at each candidate, replays
 * a window with and without it and stops where the two meet; the test
 * compares the removals -- which statements, and the order and groups in
 * which the minimiser lists them -- on hundreds of seeded random traces:
 * events that rebind and waits that repeat, host syncs of every scope,
 * flags signalled before and after their awaits, value semaphores, barrier
 * generations across hosts, allocs and frees, sub-range accesses, races
 * and hangs (findings allowed), and snapshots every 1, 4 and 256
 * statements (the live run is not always quiescent at a candidate). And on
 * the property test's own traces (property_gen.h, from its seeds): every
 * kind it generates, and each of its deletions of a sync.
 *
 * (test_minimize.c compares with deleting the lines instead, on traces
 * without flags: with flags, check_trace's streaming pass can report other
 * pairs than a run that knows the signal counts, see keys_of.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check/internal.h"
#include "check_keys.h"
#include "check_test_util.h"
#include "property_gen.h"

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* A semaphore statement (rule 6b): `signal S set=V` or `await S >=V`. */
static void sem_stmt(trace *t, const char *q, trace_kind kind, const char *sem, uint64_t v)
{
    trace_stmt s;
    trace_stmt_init(&s);
    s.queue = tb_q(t, q);
    s.kind = kind;
    s.object = trace_intern_cstr(t, sem);
    s.sem = true;
    s.count = v;
    s.line = (uint32_t)t->n_stmts + 1;
    trace_append(t, &s);
}

static trace *random_trace(int n)
{
    static const char *hs[] = { "h0", "h1", "h2" }, *ss[] = { "s0", "s1", "s2", "s3" };
    static const char *acc[] = { "w:A",        "r:A",        "rw:B[0:32]", "r:B",
                                 "w:C[16:48]", "r:C w:A",    "r:A[0:8]",   "w:D",
                                 "r:D r:B",    "w:B[32:64]", "r:C[0:16]" };
    static const char *ev[] = { "e0", "e1", "e2", "e3" }, *fl[] = { "f0", "f1", "f2" };
    trace *t = tb_new();
    int hosts = 1 + (int)rnd(3), streams = 2 + (int)rnd(3);
    for (int h = 0; h < hosts; h++)
        tb_host(t, hs[h]);
    for (int q = 0; q < streams; q++)
        tb_stream(t, ss[q], q < 2 ? "0" : "1");
    tb_buf(t, "A", 64);
    tb_buf(t, "B", 64);
    tb_buf(t, "C", 64);
    tb_buf(t, "D", 64);
    static const char *tg[] = { "s0", "s1", "all", "device=0", "device=1", "s2" };
    char label[32];
    int barriers = 0;
    uint64_t sem_v = 0;
    /* each flag raised once up front: by ruling 1 an await none of whose
     * signals can run before it hangs, and a trace that hangs early lets
     * almost every removal go */
    for (int k = 0; k < 3; k++)
        tb_signal(t, hs[rnd((uint32_t)hosts)], fl[k]);
    for (int i = 0; i < n; i++) {
        int what = (int)rnd(40);
        const char *h = hs[rnd((uint32_t)hosts)];
        const char *s = ss[rnd((uint32_t)streams)];
        tb_by_host = hosts > 1 ? trace_find_queue(t, h, 2) : TRACE_NONE;
        snprintf(label, sizeof label, "op%d", i);
        if (what < 14)
            tb_op(t, rnd(3) ? s : h, label, acc[rnd(11)]);
        else if (what < 19)
            tb_record(t, s, ev[rnd(4)]);
        else if (what < 25) {
            const char *e = ev[rnd(4)];
            const char *q = rnd(4) ? s : h;
            tb_wait(t, q, e);
            if (rnd(3) == 0)
                tb_wait(t, q, e);       /* a second wait on the same record */
        } else if (what < 31) {
            const char *x = tg[rnd(6)];
            if (strcmp(x, "s2") == 0 && streams < 3)
                x = "s0";
            tb_sync(t, h, x);
        } else if (what < 34)
            tb_signal(t, rnd(4) ? h : s, fl[rnd(3)]);
        else if (what < 36)
            tb_await(t, rnd(4) ? h : s, fl[rnd(3)]);
        else if (what < 37) {
            if (rnd(2))
                sem_stmt(t, h, TRACE_SIGNAL, "S", ++sem_v);
            else
                sem_stmt(t, hs[rnd((uint32_t)hosts)], TRACE_AWAIT, "S", sem_v ? 1 + rnd((uint32_t)sem_v) : 1);
        } else if (what < 38)
            tb_alloc_free(t, rnd(2) ? s : h, rnd(2) ? TRACE_ALLOC : TRACE_FREE, rnd(2) ? "C" : "D");
        else if (hosts > 1 && barriers < 12) {
            for (int k = 0; k < hosts; k++)
                tb_barrier(t, hs[k], "b", (uint64_t)hosts);
            barriers++;
        }
    }
    tb_by_host = TRACE_NONE;
    return t;
}

/* Random traces whose buffers are views of arenas, as allocators hand them
 * out: the minimiser cuts an arena into islands where no access crosses
 * (check/reach.c). Arena P holds five views (v2 and v3 overlap, v1 and v2
 * touch), accessed whole and in sub-ranges; arena Q's views are freed and
 * allocated again (so Q stays one island); root R is accessed itself. */
static trace *random_arena_trace(int n)
{
    static const char *hs[] = { "h0", "h1" }, *ss[] = { "s0", "s1", "s2" };
    static const char *acc[] = { "w:v0",          "r:v0",           "r:v1 w:v2",  "w:v3[8:40]",
                                 "r:v2[0:16]",    "rw:v4",          "r:v3",       "w:q0",
                                 "r:q0 w:q1",     "r:q1[4:12]",     "w:R[0:32]",  "r:R[16:64]",
                                 "r:v1[32:64]",   "w:v1[0:8] r:v0", "rw:v2[40:]", "r:v4 r:v3" };
    static const char *ev[] = { "e0", "e1", "e2" };
    trace *t = tb_new();
    int hosts = 1 + (int)rnd(2), streams = 2 + (int)rnd(2);
    for (int h = 0; h < hosts; h++)
        tb_host(t, hs[h]);
    for (int q = 0; q < streams; q++)
        tb_stream(t, ss[q], q < 2 ? "0" : "1");
    tb_buf(t, "P", 320);
    tb_view(t, "v0", "P", 0, 64);
    tb_view(t, "v1", "P", 64, 64);
    tb_view(t, "v2", "P", 128, 64);
    tb_view(t, "v3", "P", 160, 64);
    tb_view(t, "v4", "P", 256, 64);
    tb_buf(t, "Q", 128);
    tb_view(t, "q0", "Q", 0, 64);
    tb_view(t, "q1", "Q", 64, 64);
    tb_buf(t, "R", 64);
    static const char *tg[] = { "s0", "s1", "all", "device=0", "device=1" };
    char label[32];
    for (int i = 0; i < n; i++) {
        int what = (int)rnd(32);
        const char *h = hs[rnd((uint32_t)hosts)];
        const char *s = ss[rnd((uint32_t)streams)];
        tb_by_host = hosts > 1 ? trace_find_queue(t, h, 2) : TRACE_NONE;
        snprintf(label, sizeof label, "op%d", i);
        if (what < 16)
            tb_op(t, rnd(4) ? s : h, label, acc[rnd(16)]);
        else if (what < 20)
            tb_record(t, s, ev[rnd(3)]);
        else if (what < 25)
            tb_wait(t, rnd(4) ? s : h, ev[rnd(3)]);
        else if (what < 30)
            tb_sync(t, h, tg[rnd(5)]);
        else
            tb_alloc_free(t, rnd(2) ? s : h, rnd(2) ? TRACE_ALLOC : TRACE_FREE,
                          rnd(2) ? "q0" : "q1");
    }
    tb_by_host = TRACE_NONE;
    return t;
}

/* Random traces shaped like captured iterations (bench/shapes.h, small):
 * each host runs iterations on its own streams -- a write of its slot's
 * input, a kernel on stream a, a record, a wait on stream b, kernels that
 * read random sub-ranges of what a wrote (so some waits can go and some
 * cannot) -- with a `sync all` every few iterations, and slots reused a few
 * iterations later. Clean or nearly, so that removals are kept and windows
 * must meet the reference: after a removal, clocks that only the stream's
 * next submission makes equal (checkpoint.c, stream_alike) and reads that
 * no later access can race with (cells_alike) are what the windows meet
 * on. */
static trace *random_iter_trace(int iters)
{
    static const char *hs[] = { "h0", "h1" };
    static const char *ss[] = { "s0", "s1", "s2", "s3", "s4", "s5" };
    trace *t = tb_new();
    int hosts = 1 + (int)rnd(2), per = 2 + (int)rnd(2), slots = 2 + (int)rnd(3);
    int every = 2 + (int)rnd(3);
    for (int h = 0; h < hosts; h++)
        tb_host(t, hs[h]);
    for (int q = 0; q < hosts * per; q++)
        tb_stream(t, ss[q], q < per ? "0" : "1");
    tb_buf(t, "A", 64u * 8 * 4);
    char name[32], spec[96], label[32];
    for (int h = 0; h < hosts; h++)
        for (int k = 0; k < slots; k++) {
            for (int x = 0; x < 3; x++) {
                snprintf(name, sizeof name, "d%d.%d.%d", x, h, k);
                tb_view(t, name, "A", (uint64_t)((h * 4 + k) * 3 + x) * 64 % (64u * 8 * 4), 64);
            }
        }
    int it[2] = { 0, 0 };
    for (int i = 0; i < iters * hosts; i++) {
        int h = hosts > 1 ? (int)rnd(2) : 0;
        int k = it[h] % slots;
        const char *a = ss[h * per + it[h] % per], *b = ss[h * per + (it[h] + 1) % per];
        tb_by_host = hosts > 1 ? (uint32_t)h : TRACE_NONE;
        snprintf(label, sizeof label, "w%d", i);
        snprintf(spec, sizeof spec, "w:d0.%d.%d[0:%u]", h, k, 8 + rnd(56));
        tb_op(t, a, label, spec);
        snprintf(label, sizeof label, "k%d", i);
        unsigned lo = rnd(48);
        snprintf(spec, sizeof spec, "r:d0.%d.%d[%u:%u] w:d1.%d.%d[%u:64]", h, k, lo, lo + 8 + rnd(8),
                 h, k, rnd(32));
        tb_op(t, a, label, spec);
        snprintf(name, sizeof name, "e%d", h * per + it[h] % per);
        tb_record(t, a, name);
        tb_wait(t, b, name);
        snprintf(label, sizeof label, "m%d", i);
        lo = rnd(48);
        snprintf(spec, sizeof spec, "r:d1.%d.%d[%u:%u] w:d2.%d.%d", h, k, lo, lo + 1 + rnd(16), h, k);
        tb_op(t, b, label, spec);
        if (rnd(3) == 0) {
            snprintf(label, sizeof label, "n%d", i);
            lo = rnd(48);
            snprintf(spec, sizeof spec, "r:d0.%d.%d[%u:%u]", h, k, lo, lo + 8);
            tb_op(t, b, label, spec);
        }
        if (++it[h] % every == 0)
            tb_sync(t, hs[h], "all");
        else if (rnd(6) == 0)
            tb_sync(t, hs[h], b);
    }
    tb_by_host = TRACE_NONE;
    return t;
}

/* A send or recv of rank `rank` to or from `peer` on queue q (rule 9:
 * the k-th send and the k-th recv of a channel pair up), accessing buf. */
static void p2p(trace *t, const char *q, trace_kind kind, uint32_t rank, uint32_t peer,
                const char *acc)
{
    trace_stmt s;
    trace_access a[8];
    trace_stmt_init(&s);
    s.queue = tb_q(t, q);
    s.kind = kind;
    s.object = trace_intern_cstr(t, "comm");
    s.rank = rank;
    s.peer = peer;
    s.n_access = tb_parse_access(t, acc, a);
    s.access = a;
    s.line = (uint32_t)t->n_stmts + 1;
    if (t->queues[s.queue].kind == TRACE_QUEUE_STREAM)
        s.by = tb_by_host;
    trace_append(t, &s);
}

/* Random traces of two ranks (queues named rN., as `syncsim merge` names
 * them): each a host and two streams, iterations of kernels on its own
 * buffers with events between its streams, messages between the ranks'
 * hosts (send, then the peer's recv), and a `sync all` that covers its own
 * rank's streams only (ruling 4). */
static trace *random_rank_trace(int iters)
{
    static const char *hq[] = { "r0.h", "r1.h" };
    static const char *sq[2][2] = { { "r0.s0", "r0.s1" }, { "r1.s0", "r1.s1" } };
    static const char *acc[] = { "w:P0[0:32]", "r:P0[16:48]", "rw:P1", "r:P1[8:24]",
                                 "w:Q0", "r:Q0[0:8]", "rw:Q1[4:60]", "r:Q1" };
    trace *t = tb_new();
    for (int r = 0; r < 2; r++) {
        tb_host(t, hq[r]);
        tb_stream(t, sq[r][0], r ? "1" : "0");
        tb_stream(t, sq[r][1], r ? "1" : "0");
    }
    tb_buf(t, "P0", 64);
    tb_buf(t, "P1", 64);
    tb_buf(t, "Q0", 64);
    tb_buf(t, "Q1", 64);
    tb_buf(t, "M", 64);
    char label[32], ev[16];
    for (int i = 0; i < iters * 2; i++) {
        int r = (int)rnd(2), a = (int)rnd(2);
        tb_by_host = tb_q(t, hq[r]);
        const char *own = acc[4 * r + rnd(4)];
        snprintf(label, sizeof label, "k%d", i);
        tb_op(t, sq[r][a], label, own);
        snprintf(ev, sizeof ev, "e%d", r);
        tb_record(t, sq[r][a], ev);
        tb_wait(t, sq[r][1 - a], ev);
        snprintf(label, sizeof label, "m%d", i);
        tb_op(t, sq[r][1 - a], label, acc[4 * r + rnd(4)]);
        switch (rnd(5)) {
        case 0:
            tb_sync(t, hq[r], "all");
            break;
        case 1:
            tb_sync(t, hq[r], sq[r][rnd(2)]);
            break;
        case 2:
            p2p(t, hq[r], TRACE_SEND, (uint32_t)r, (uint32_t)(1 - r), "r:M[0:16]");
            tb_by_host = tb_q(t, hq[1 - r]);
            p2p(t, hq[1 - r], TRACE_RECV, (uint32_t)(1 - r), (uint32_t)r, "w:M[32:48]");
            break;
        default:
            break;
        }
    }
    tb_by_host = TRACE_NONE;
    return t;
}

/* The findings of a whole run of t, re-checked from scratch the way the
 * minimiser checks (every flag's signal count known from the start). The
 * streaming first pass of check_trace can report other pairs when an await
 * is followed on its own queue by a signal of its flag (ruling 1): it
 * releases the await early where this run releases it when the input ends,
 * and FastTrack reports each access against the latest conflicting ones. */
static keyset keys_of(trace *t, const bool *remove)
{
    trace_u64map totals = { 0 };
    assert_int_equal(check_flag_totals(t, &totals), 0);
    check_report *rep = check_report_new(t, 0);
    check_engine *e = check_engine_new(t, rep, remove);
    assert_non_null(e);
    check_engine_set_flag_totals(e, &totals);
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        assert_int_equal(check_engine_feed(e, &s), 0);
    }
    assert_int_equal(check_engine_finish(e, false), 0);
    keyset s = keyset_of(rep);
    check_engine_free(e);
    check_report_free(rep);
    trace_u64map_free(&totals);
    return s;
}

/* The plain greedy's answer: keep[] per seq, and the removals in the order
 * the minimiser lists them (candidate by candidate, in submission order; a
 * barrier generation's participants in file order, grouped by the first). */
typedef struct plain_result {
    bool *keep;
    uint64_t *seq, *group;
    size_t n_removed, n_candidates;
} plain_result;

static void plain_result_free(plain_result *p)
{
    free(p->keep);
    free(p->seq);
    free(p->group);
}

/* Barrier generations as the spec defines them: generation k of barrier B
 * is each queue's k-th arrival at B. gen[i] = k for a barrier, 0 else. */
static uint64_t *barrier_generations(trace *t)
{
    uint64_t n = t->n_stmts;
    uint64_t *gen = calloc(n + 1, sizeof *gen);
    for (uint64_t i = 0; i < n; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.kind != TRACE_BARRIER)
            continue;
        gen[i] = 1;
        for (uint64_t j = 0; j < i; j++) {
            trace_stmt x;
            trace_stmt_at(t, j, &x);
            gen[i] += x.kind == TRACE_BARRIER && x.object == s.object && x.queue == s.queue;
        }
    }
    return gen;
}

/* Statement j belongs to the candidate that starts at i (a barrier
 * generation: the same barrier, the same generation). */
static bool same_candidate(trace *t, const uint64_t *gen, uint64_t i, uint64_t j)
{
    if (j == i)
        return true;
    if (!gen[i] || gen[j] != gen[i])
        return false;
    trace_stmt a, b;
    trace_stmt_at(t, i, &a);
    trace_stmt_at(t, j, &b);
    return b.kind == TRACE_BARRIER && b.object == a.object;
}

/* The plain greedy, from scratch per candidate. */
static void plain_greedy(trace *t, plain_result *out)
{
    uint64_t n = t->n_stmts;
    out->keep = calloc(n + 1, sizeof *out->keep);
    out->seq = calloc(n + 1, sizeof *out->seq);
    out->group = calloc(n + 1, sizeof *out->group);
    out->n_removed = out->n_candidates = 0;
    for (uint64_t i = 0; i < n; i++)
        out->keep[i] = true;
    uint64_t *gen = barrier_generations(t);
    keyset base = keys_of(t, NULL);
    bool *remove = calloc(n + 1, sizeof *remove);
    for (uint64_t i = 0; i < n; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        bool barrier = s.kind == TRACE_BARRIER;
        if (s.kind != TRACE_WAIT && s.kind != TRACE_SYNC && s.kind != TRACE_AWAIT && !barrier)
            continue;
        bool later = false;     /* a later participant of a generation tried already */
        for (uint64_t j = 0; j < i && barrier && !later; j++)
            later = same_candidate(t, gen, j, i);
        if (later)
            continue;
        out->n_candidates++;
        for (uint64_t j = i; j < n; j++)
            if (same_candidate(t, gen, i, j))
                out->keep[j] = false;
        for (uint64_t j = 0; j < n; j++)
            remove[j] = !out->keep[j];
        keyset k = keys_of(t, remove);
        bool kept = keyset_subset(&k, &base);
        if (kept) {
            free(base.k);
            base = k;
        } else {
            free(k.k);
        }
        for (uint64_t j = i; j < n; j++) {
            if (!same_candidate(t, gen, i, j))
                continue;
            out->keep[j] = !kept;
            if (kept) {
                out->seq[out->n_removed] = j;
                out->group[out->n_removed++] = i;
            }
        }
    }
    free(base.k);
    free(remove);
    free(gen);
}

/* Whether the minimiser's answer res on t is the plain greedy's: the same
 * statements removed, listed in the same order with the same groups, of
 * the same number of candidates. Says where they part first, naming
 * `what`. */
static bool same_as_plain(trace *t, const check_min_result *res, const char *what)
{
    plain_result plain;
    plain_greedy(t, &plain);
    bool same = true;
    for (uint64_t i = 0; i < t->n_stmts && same; i++)
        if (plain.keep[i] != res->keep[i]) {
            fprintf(stderr, "%s: statement %llu (line %llu): plain keep=%d incremental keep=%d\n",
                    what, (unsigned long long)i, (unsigned long long)i + 1, plain.keep[i],
                    res->keep[i]);
            same = false;
        }
    for (size_t i = 0; i < plain.n_removed && same; i++)
        if (plain.seq[i] != res->removed[i].seq || plain.group[i] != res->removed[i].group) {
            fprintf(stderr, "%s: removal %zu: plain seq %llu group %llu, incremental seq %llu "
                            "group %llu\n",
                    what, i, (unsigned long long)plain.seq[i], (unsigned long long)plain.group[i],
                    (unsigned long long)res->removed[i].seq,
                    (unsigned long long)res->removed[i].group);
            same = false;
        }
    if (same && (plain.n_removed != res->n_removed || plain.n_candidates != res->n_candidates)) {
        fprintf(stderr, "%s: plain %zu removed of %zu candidates, incremental %zu of %zu\n", what,
                plain.n_removed, plain.n_candidates, res->n_removed, res->n_candidates);
        same = false;
    }
    plain_result_free(&plain);
    return same;
}

enum { SHAPE_MIXED, SHAPE_ARENAS, SHAPE_ITERATIONS, SHAPE_RANKS };

/* Minimises `traces` random traces of a shape both ways with snapshots
 * every `every` statements (0: the default); counts the removals and the
 * candidates kept. */
static void compare_shape_with_plain(int shape, uint64_t seed, int traces, uint32_t every,
                                     size_t *removed, size_t *kept)
{
    rng = seed;
    for (int k = 0; k < traces; k++) {
        trace *t = shape == SHAPE_ARENAS       ? random_arena_trace(40 + (int)rnd(120))
                   : shape == SHAPE_ITERATIONS ? random_iter_trace(20 + (int)rnd(30))
                   : shape == SHAPE_RANKS      ? random_rank_trace(10 + (int)rnd(30))
                                               : random_trace(40 + (int)rnd(120));
        check_options opt = { .checkpoint_every = every, .allow_findings = true };
        check_min_result res;
        trace_error err;
        assert_int_equal(check_minimize(t, &opt, &res, &err), 0);
        char what[96];
        snprintf(what, sizeof what, "seed %llx trace %d (every %u)", (unsigned long long)seed, k,
                 every);
        assert_true(same_as_plain(t, &res, what));
        *removed += res.n_removed;
        *kept += res.n_candidates;
        check_min_result_free(&res);
        trace_free(t);
    }
}

static void compare_with_plain(uint64_t seed, int traces, uint32_t every, size_t *removed,
                               size_t *kept)
{
    compare_shape_with_plain(SHAPE_MIXED, seed, traces, every, removed, kept);
}

static void test_minimize_greedy_same_as_plain(void **state)
{
    (void)state;
    size_t removed = 0, candidates = 0;
    compare_with_plain(0x5eed0001ULL, 300, 0, &removed, &candidates);
    fprintf(stderr, "greedy: %zu of %zu candidates removed\n", removed, candidates);
    /* both verdicts are exercised, many times */
    assert_true(removed > 500);
    assert_true(candidates > removed + 500);
}

static void test_minimize_greedy_same_with_close_snapshots(void **state)
{
    (void)state;
    size_t removed = 0, candidates = 0;
    compare_with_plain(0x5eed0002ULL, 150, 1, &removed, &candidates);
    compare_with_plain(0x5eed0003ULL, 150, 4, &removed, &candidates);
    assert_true(removed > 500);
    assert_true(candidates > removed + 500);
}

/* Views of arenas: the islands the minimiser cuts them into (check/reach.c)
 * change no verdict. */
static void test_minimize_greedy_same_on_arenas(void **state)
{
    (void)state;
    size_t removed = 0, candidates = 0;
    compare_shape_with_plain(SHAPE_ARENAS, 0x5eed0a01ULL, 200, 0, &removed, &candidates);
    compare_shape_with_plain(SHAPE_ARENAS, 0x5eed0a02ULL, 60, 1, &removed, &candidates);
    assert_true(removed > 300);
    assert_true(candidates > removed + 300);
}

/* Iterations that reuse their slots: windows meet on clocks and reads that
 * differ but cannot be told apart (check/checkpoint.c), and the answer is
 * the plain greedy's. */
static void test_minimize_greedy_same_on_iterations(void **state)
{
    (void)state;
    size_t removed = 0, candidates = 0;
    compare_shape_with_plain(SHAPE_ITERATIONS, 0x5eed1001ULL, 150, 0, &removed, &candidates);
    compare_shape_with_plain(SHAPE_ITERATIONS, 0x5eed1002ULL, 40, 4, &removed, &candidates);
    assert_true(removed > 300);
    assert_true(candidates > removed + 300);
}

/* Two ranks with messages and rank-scoped syncs: the streams' submitters
 * and the syncs that may read a stream's clock are a rank's own. */
static void test_minimize_greedy_same_on_ranks(void **state)
{
    (void)state;
    size_t removed = 0, candidates = 0;
    compare_shape_with_plain(SHAPE_RANKS, 0x5eed2001ULL, 150, 0, &removed, &candidates);
    compare_shape_with_plain(SHAPE_RANKS, 0x5eed2002ULL, 40, 4, &removed, &candidates);
    assert_true(removed > 300);
    assert_true(candidates > removed + 300);
}

/* ------------------------------------------------------------------ */
/* The property test's traces (property_gen.h), from its seeds.        */

enum { GEN_CLEAN, GEN_DELETED, GEN_HOSTS, GEN_WIDE, GEN_WIDE_DELETED, GEN_RICH, GEN_KINDS };

/* The kinds of trace test_property.c generates, each from its seed, and
 * how many of each: as many as it generates, except where it deletes each
 * sync in turn -- a trace's deletions are some 17 traces, a wide trace's
 * some 130, and under the sanitizers they took 19 s of the test's 42 --:
 * there a third of its traces and a thirtieth of its wide ones. The long
 * mode, ten times as many, covers them all. */
static const struct gen_kind {
    const char *name;
    uint64_t seed;
    int min_hosts;
    bool wide, rich;
    bool deletions;     /* each of the property test's deletions of each trace */
    int traces;
} gen_kinds[GEN_KINDS] = {
    [GEN_CLEAN] = { "well synchronised", PROP_SEED_CLEAN, 1, false, false, false, 300 },
    [GEN_DELETED] = { "a sync deleted", PROP_SEED_DELETE, 1, false, false, true, 100 },
    [GEN_HOSTS] = { "multi-host", PROP_SEED_HOSTS, 2, false, false, false, 400 },
    [GEN_WIDE] = { "wide", PROP_SEED_WIDE, 1, true, false, false, 60 },
    [GEN_WIDE_DELETED] = { "wide, a sync deleted", PROP_SEED_WIDE, 1, true, false, true, 2 },
    [GEN_RICH] = { "rich", PROP_SEED_RICH, 1, false, true, false, 1500 },
};

typedef struct gen_tally {
    long traces, with_findings, close_snapshots, candidates, removals, removed_stmts;
} gen_tally;

/* One trace of a kind: g without drop[], minimised both ways. */
typedef struct gen_case {
    const struct gen_kind *kind;
    long index;         /* of g in the kind's sequence */
    gen_tally *tally;
} gen_case;

static void compare_gen_trace(const prop_trace *g, const bool *drop, void *ctx)
{
    gen_case *c = ctx;
    gen_tally *tl = c->tally;
    uint32_t every = rnd(4) == 0 ? 1 + rnd(4) : 0;
    trace *t = prop_materialise(g, drop);
    check_options opt = { .checkpoint_every = every, .allow_findings = true };
    check_min_result res;
    trace_error err;
    assert_int_equal(check_minimize(t, &opt, &res, &err), 0);
    char what[128];
    int deleted = 0;
    for (int i = 0; i < g->n; i++)
        deleted += drop[i];
    snprintf(what, sizeof what, "%s trace %ld (seed %llx, every %u, %d statements deleted)",
             c->kind->name, c->index, (unsigned long long)c->kind->seed, every, deleted);
    if (!same_as_plain(t, &res, what)) {
        prop_dump(g, drop);
        fail();
    }
    tl->traces++;
    tl->with_findings += res.n_findings > 0;
    tl->close_snapshots += every > 0;
    tl->candidates += (long)res.n_candidates;
    tl->removed_stmts += (long)res.n_removed;
    for (size_t i = 0; i < res.n_removed; i++)
        tl->removals += i == 0 || res.removed[i].group != res.removed[i - 1].group;
    check_min_result_free(&res);
    trace_free(t);
}

/* Minimises the traces of one kind both ways: the property test's
 * generator fed from the kind's seed (so its sequence is the property
 * test's) for `traces` traces -- for a kind with deletions, each of the
 * property test's deletions of each (prop_each_deletion) --, a quarter of
 * them with snapshots every 1 to 4 statements. */
static void compare_gen_kind(int kind, long traces, gen_tally *tl)
{
    const struct gen_kind *pk = &gen_kinds[kind];
    prop_gen pg = { .rng = pk->seed, .wide = pk->wide, .rich = pk->rich };
    static prop_trace g;
    static const bool none[PROP_MAXS];
    rng = pk->seed ^ 0x6a09e667f3bcc908ULL;     /* this test's own choices */
    for (long k = 0; k < traces; k++) {
        prop_generate(&pg, &g, pk->min_hosts);
        gen_case c = { pk, k, tl };
        if (pk->deletions)
            prop_each_deletion(&g, compare_gen_trace, &c);
        else
            compare_gen_trace(&g, none, &c);
    }
}

/* How many times the default number of traces to compare: 10 in the
 * suite's long mode (SYNCSIM_TEST_LONG=1), SYNCSIM_GREEDY_TIMES=N to say. */
static long gen_times(void)
{
    const char *times = getenv("SYNCSIM_GREEDY_TIMES"), *long_mode = getenv("SYNCSIM_TEST_LONG");
    if (times && atol(times) > 0)
        return atol(times);
    return long_mode && strcmp(long_mode, "1") == 0 ? 10 : 1;
}

/* Every kind of the property test's traces: the minimiser removes what the
 * plain greedy removes, in its order. Clean traces (well synchronised,
 * multi-host with hand-overs through a submission edge, wide) and traces
 * with findings (a sync deleted: races and hangs; rich: ranks, messages,
 * allocator loops, flags behind awaits). */
static void test_minimize_greedy_same_on_property_traces(void **state)
{
    (void)state;
    long times = gen_times();
    gen_tally tl[GEN_KINDS] = { { 0 } }, all = { 0 };
    for (int kind = 0; kind < GEN_KINDS; kind++) {
        compare_gen_kind(kind, gen_kinds[kind].traces * times, &tl[kind]);
        fprintf(stderr, "greedy on property traces, %s: %ld traces (%ld with findings, %ld "
                        "with close snapshots), %ld of %ld candidates removed (%ld statements), "
                        "all as the plain greedy\n",
                gen_kinds[kind].name, tl[kind].traces, tl[kind].with_findings,
                tl[kind].close_snapshots, tl[kind].removals, tl[kind].candidates,
                tl[kind].removed_stmts);
        all.traces += tl[kind].traces;
        all.removals += tl[kind].removals;
        all.candidates += tl[kind].candidates;
    }
    fprintf(stderr, "greedy on property traces: %ld traces, %ld of %ld candidates removed\n",
            all.traces, all.removals, all.candidates);
    assert_true(all.traces >= 1000);
    /* both answers, many times, on every kind */
    for (int kind = 0; kind < GEN_KINDS; kind++) {
        assert_true(tl[kind].removals > tl[kind].traces);
        assert_true(tl[kind].candidates - tl[kind].removals > tl[kind].traces);
    }
    /* the generated traces are clean; many with a sync deleted or rich are not */
    for (int kind = 0; kind < GEN_KINDS; kind++) {
        if (gen_kinds[kind].deletions || gen_kinds[kind].rich)
            assert_true(tl[kind].with_findings > tl[kind].traces / 3);
        else
            assert_int_equal(tl[kind].with_findings, 0);
    }
}

/* minimize's keep[] for t, checked against the plain greedy. */
static bool *minimized(trace *t)
{
    check_min_result res;
    trace_error err;
    check_options opt = { .allow_findings = true };
    assert_int_equal(check_minimize(t, &opt, &res, &err), 0);
    assert_true(same_as_plain(t, &res, "minimized"));
    bool *keep = calloc(t->n_stmts, sizeof *keep);
    for (uint64_t i = 0; i < t->n_stmts; i++)
        keep[i] = res.keep[i];
    check_min_result_free(&res);
    return keep;
}

/* A wait its stream repeats goes without a replay; the repeat stays. */
static void test_minimize_greedy_repeated_wait_goes(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    tb_buf(t, "A", 64);
    tb_op(t, "s0", "produce", "w:A");
    tb_record(t, "s0", "e");
    uint64_t w = tb_wait(t, "s1", "e");
    uint64_t w2 = tb_wait(t, "s1", "e");
    tb_op(t, "s1", "consume", "r:A");
    bool *keep = minimized(t);
    assert_false(keep[w]);
    assert_true(keep[w2]);
    free(keep);
    trace_free(t);
}

/* Not when a host sync between them reads the stream's clock: there the
 * first wait is what orders the host's read after the producer. */
static void test_minimize_greedy_repeated_wait_after_sync_stays(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    tb_buf(t, "A", 64);
    tb_op(t, "s0", "produce", "w:A");
    tb_record(t, "s0", "e");
    uint64_t w = tb_wait(t, "s1", "e");
    uint64_t sync = tb_sync(t, "h0", "s1");
    tb_op(t, "h0", "read", "r:A");
    uint64_t w2 = tb_wait(t, "s1", "e");
    bool *keep = minimized(t);
    assert_true(keep[w]);
    assert_true(keep[sync]);
    assert_false(keep[w2]);
    free(keep);
    trace_free(t);
}

/* Nor when another host submits the repeat: the first wait's submission
 * is what orders the stream after its host's write. */
static void test_minimize_greedy_repeated_wait_of_another_host_stays(void **state)
{
    (void)state;
    trace *t = tb_new();
    uint32_t h0 = tb_host(t, "h0"), h1 = tb_host(t, "h1");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    tb_buf(t, "A", 64);
    tb_by_host = h1;
    tb_record(t, "s1", "e");
    tb_op(t, "h1", "write", "w:A");
    uint64_t w = tb_wait(t, "s0", "e");
    tb_by_host = h0;
    uint64_t w2 = tb_wait(t, "s0", "e");
    tb_op(t, "s0", "read", "r:A");
    tb_by_host = TRACE_NONE;
    bool *keep = minimized(t);
    assert_true(keep[w]);
    assert_false(keep[w2]);
    free(keep);
    trace_free(t);
}

/* Hosts h and h2, streams s0 to s(n - 1) on device 0, buffers X, Y and Z;
 * the next stream statements submitted by h. */
static trace *two_hosts(int streams)
{
    static const char *ss[] = { "s0", "s1", "s2" };
    trace *t = tb_new();
    uint32_t h = tb_host(t, "h");
    tb_host(t, "h2");
    for (int q = 0; q < streams; q++)
        tb_stream(t, ss[q], "0");
    tb_buf(t, "X", 64);
    tb_buf(t, "Y", 64);
    tb_buf(t, "Z", 64);
    tb_by_host = h;
    return t;
}

/* The wait at seq w stays, as the plain greedy says. */
static void wait_stays(trace *t, uint64_t w)
{
    tb_by_host = TRACE_NONE;
    bool *keep = minimized(t);
    assert_true(keep[w]);
    free(keep);
    trace_free(t);
}

/* A read that a removal leaves unordered with a later one counts until
 * every queue that accesses its buffer knows it. Without s1's wait, ra and
 * rb are concurrent reads of X (rb is after the write wr either way);
 * after `sync all` the host knows both, but s2 also runs a write of X that
 * its host did not submit (no by= with two hosts), which knows neither: a
 * WAR race with ra that the trace with the wait lacks (there rb, after ra,
 * is the read it races with). The windows must not meet at the sync. */
static void test_minimize_greedy_read_left_for_an_unsubmitted_write(void **state)
{
    (void)state;
    trace *t = two_hosts(3);
    tb_op(t, "s2", "pad", "r:Z");
    tb_op(t, "s0", "wr", "w:X");
    tb_record(t, "s0", "e1");
    tb_op(t, "s0", "ra", "r:X");
    tb_record(t, "s0", "e");
    uint64_t w = tb_wait(t, "s1", "e");
    tb_wait(t, "s1", "e1");         /* rb is after wr with or without the first wait */
    tb_op(t, "s1", "rb", "r:X");
    tb_sync(t, "h", "all");
    tb_op(t, "h", "hx", "r:Z");
    tb_by_host = TRACE_NONE;
    tb_op(t, "s2", "late", "w:X");
    wait_stays(t, w);
}

/* A stream whose clock a removal changed may be taken as equal once its
 * host knows all it knows -- but not when another host syncs it first and
 * so learns the difference. Without s1's wait, h2's `sync s1` no longer
 * orders h2's write of Y after s0's: a new WAW race. `pad` host statements
 * stand before h2's sync. The wait stays. */
static void read_by_another_host_sync(int pad)
{
    trace *t = two_hosts(2);
    tb_op(t, "s0", "wy", "w:Y");
    tb_record(t, "s0", "e");
    uint64_t w = tb_wait(t, "s1", "e");
    tb_op(t, "s1", "k", "r:Z");
    tb_sync(t, "h", "s0");
    tb_sync(t, "h", "s1");
    char label[16];
    for (int i = 0; i < 1 + pad; i++) {
        snprintf(label, sizeof label, "hx%d", i);
        tb_op(t, "h", label, "r:Z");
    }
    tb_sync(t, "h2", "s1");
    tb_op(t, "h2", "w2", "w:Y");
    wait_stays(t, w);
}

static void test_minimize_greedy_stream_read_by_another_host_sync(void **state)
{
    (void)state;
    read_by_another_host_sync(0);
}

/* The same with h2's sync past the look-ahead of checkpoint.c
 * (SYNC_LOOKAHEAD, 512 statements): a sync it cannot see is taken as one
 * that reads s1's clock. */
static void test_minimize_greedy_stream_read_past_the_lookahead(void **state)
{
    (void)state;
    read_by_another_host_sync(600);
}

/* What a stream hands on in the window is part of what the windows
 * compare. s0 writes A and records e0 and e2; s1 waits for e0 (the
 * candidate), hands on what it knows -- records e1, or signals f -- and
 * waits for e2, after which its clock is the same with the wait and
 * without; s2 takes what s1 handed on and reads A. Without the wait, e1
 * (or f) no longer holds s0's write, and s2's read races with it: the wait
 * stays. */
static void handed_on_in_window(bool flag)
{
    trace *t = tb_new();
    tb_host(t, "h");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    tb_stream(t, "s2", "0");
    tb_buf(t, "A", 64);
    tb_op(t, "s0", "write", "w:A");
    tb_record(t, "s0", "e0");
    tb_record(t, "s0", "e2");
    uint64_t w = tb_wait(t, "s1", "e0");
    if (flag)
        tb_signal(t, "s1", "f");
    else
        tb_record(t, "s1", "e1");
    tb_wait(t, "s1", "e2");
    if (flag)
        tb_await(t, "s2", "f");
    else
        tb_wait(t, "s2", "e1");
    tb_op(t, "s2", "read", "r:A");
    tb_sync(t, "h", "all");
    wait_stays(t, w);
}

static void test_minimize_greedy_event_recorded_in_window_stays(void **state)
{
    (void)state;
    handed_on_in_window(false);
}

static void test_minimize_greedy_flag_signalled_in_window_stays(void **state)
{
    (void)state;
    handed_on_in_window(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimize_greedy_same_as_plain),
        cmocka_unit_test(test_minimize_greedy_same_with_close_snapshots),
        cmocka_unit_test(test_minimize_greedy_same_on_arenas),
        cmocka_unit_test(test_minimize_greedy_same_on_iterations),
        cmocka_unit_test(test_minimize_greedy_same_on_ranks),
        cmocka_unit_test(test_minimize_greedy_same_on_property_traces),
        cmocka_unit_test(test_minimize_greedy_read_left_for_an_unsubmitted_write),
        cmocka_unit_test(test_minimize_greedy_stream_read_by_another_host_sync),
        cmocka_unit_test(test_minimize_greedy_stream_read_past_the_lookahead),
        cmocka_unit_test(test_minimize_greedy_event_recorded_in_window_stays),
        cmocka_unit_test(test_minimize_greedy_flag_signalled_in_window_stays),
        cmocka_unit_test(test_minimize_greedy_repeated_wait_goes),
        cmocka_unit_test(test_minimize_greedy_repeated_wait_after_sync_stays),
        cmocka_unit_test(test_minimize_greedy_repeated_wait_of_another_host_stays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
