/* test_minimize.c -- the greedy minimiser: what it removes, that its
 * incremental re-checking decides exactly as re-checking the whole trace
 * does, the sync patterns it prints, and redundant-sync findings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check/internal.h"
#include "check_keys.h"
#include "check_test_util.h"

/* One token of the "sassassasg" schedule, `tokens` times. */
static trace *sync_pattern_full(int tokens)
{
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "gpu", "0");
    tb_buf(t, "in", 64);
    tb_buf(t, "d_in", 64);
    tb_buf(t, "logits", 64);
    tb_buf(t, "h_logits", 64);
    uint32_t k_token = trace_intern_cstr(t, "token");
    char v[16];
    for (int k = 0; k < tokens; k++) {
        snprintf(v, sizeof v, "%d", k);
        trace_attr a = { k_token, trace_intern_cstr(t, v) };
        uint64_t first = tb_op(t, "host", "set_inputs", "w:in");
        /* attach token= to the first statement of the iteration */
        trace_stmt s;
        trace_stmt_at(t, first, &s);
        (void)s;
        trace_stmt x;
        trace_stmt_init(&x);
        x.queue = tb_q(t, "host");
        x.kind = TRACE_SYNC;
        x.sync_scope = TRACE_SYNC_QUEUE;
        x.object = tb_q(t, "gpu");
        x.n_attr = 1;
        x.attr = &a;
        x.line = (uint32_t)t->n_stmts + 1;
        trace_append(t, &x);                      /* s (token=k) */
        tb_stmt(t, "gpu", TRACE_COPY, "cp_in", NULL, "r:in w:d_in"); /* a */
        tb_sync(t, "host", "gpu");                /* s */
        tb_sync(t, "host", "gpu");                /* s */
        tb_op(t, "gpu", "graph", "r:d_in w:logits"); /* g */
        tb_stmt(t, "gpu", TRACE_COPY, "get", NULL, "r:logits w:h_logits"); /* a */
        tb_sync(t, "host", "gpu");                /* s: needed */
        tb_op(t, "host", "sample", "r:h_logits");
    }
    return t;
}

static void test_minimize_keeps_only_needed_syncs(void **state)
{
    (void)state;
    trace *t = sync_pattern_full(3);
    check_min_result res;
    trace_error err;
    assert_int_equal(check_minimize(t, NULL, &res, &err), 0);
    /* per token: 4 syncs, of which the one before sample is needed...
     * except that set_inputs of the next token writes `in`, which cp_in of
     * the previous token read: the sync before sample covers that too. */
    assert_int_equal(res.n_candidates, 12);
    assert_int_equal(res.n_removed, 9);
    for (size_t i = 0; i < res.n_removed; i++) {
        trace_stmt s;
        trace_stmt_at(t, res.removed[i].seq, &s);
        assert_int_equal(s.kind, TRACE_SYNC);
        /* the kept ones are the last sync of each token */
        trace_stmt next;
        trace_stmt_at(t, res.removed[i].seq + 1, &next);
        assert_true(next.label == TRACE_NONE || strcmp(trace_str(t, next.label), "sample") != 0);
    }
    /* the minimised trace is still clean */
    trace *m = check_trace_filter(t, res.keep);
    assert_non_null(m);
    assert_int_equal(m->n_stmts, t->n_stmts - 9);
    check_report *rep = tb_check(m);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    /* the pattern per token */
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    check_print_sync_patterns(out, t, res.keep);
    fclose(out);
    assert_non_null(strstr(buf, "host iteration 0: sassgas -> agas"));
    assert_non_null(strstr(buf, "and 2 more iterations alike"));
    free(buf);
    trace_free(m);
    check_min_result_free(&res);
    trace_free(t);
}

/* A graph launch is many kernels on one stream: they print as one 'g'.
 * Kernels on another stream, or after a copy, start another launch. */
static void test_minimize_pattern_counts_graph_launches(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "gpu0", "0");
    tb_stream(t, "gpu1", "1");
    tb_buf(t, "a", 64);
    tb_buf(t, "b", 64);
    uint32_t k_token = trace_intern_cstr(t, "token");
    trace_attr tok = { k_token, trace_intern_cstr(t, "0") };
    trace_stmt x;
    trace_stmt_init(&x);
    x.queue = tb_q(t, "host");
    x.kind = TRACE_SYNC;
    x.sync_scope = TRACE_SYNC_ALL;
    x.n_attr = 1;
    x.attr = &tok;
    trace_append(t, &x);                                    /* s */
    tb_op(t, "gpu0", "k1", "w:a");                          /* g: launch 1 */
    tb_op(t, "gpu0", "k2", "w:a");
    tb_op(t, "gpu0", "k3", "w:a");
    tb_stmt(t, "gpu0", TRACE_COPY, "cp", NULL, "r:a w:b");  /* a */
    tb_op(t, "gpu0", "k4", "w:a");                          /* g: launch 2 */
    tb_op(t, "gpu1", "k5", "w:b");                          /* g: launch 3, another stream */
    tb_op(t, "gpu1", "k6", "w:b");
    tb_sync(t, "host", "gpu1");                             /* s */
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    check_print_sync_patterns(out, t, NULL);
    fclose(out);
    assert_non_null(strstr(buf, "host iteration 0: sgaggs -> sgaggs"));
    free(buf);
    trace_free(t);
}

static void test_minimize_redundant_sync_findings(void **state)
{
    (void)state;
    trace *t = sync_pattern_full(1);
    check_options opt = { .redundant = true };
    check_report *rep = tb_check_opt(t, &opt);
    assert_int_equal(check_report_count_kind(rep, TRACE_FINDING_REDUNDANT_SYNC), 3);
    assert_int_equal(check_report_count(rep), 3);
    check_report_free(rep);
    trace_free(t);
}

/* ------------------------------------------------------------------ */
/* Incremental == from scratch, on random traces with races and hangs.  */

static uint64_t rng = 0x1234567ULL;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static trace *random_trace(int n)
{
    trace *t = tb_new();
    int hosts = 1 + rnd(2);
    tb_host(t, "h0");
    if (hosts == 2)
        tb_host(t, "h1");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    tb_stream(t, "s2", "1");
    tb_buf(t, "A", 64);
    tb_buf(t, "B", 64);
    tb_buf(t, "C", 64);
    static const char *hs[] = { "h0", "h1" }, *ss[] = { "s0", "s1", "s2" };
    static const char *acc[] = { "w:A", "r:A", "rw:B[0:32]", "r:B", "w:C[16:48]", "r:C w:A" };
    static const char *ev[] = { "e0", "e1", "e2" }, *tg[] = { "s0", "s1", "s2", "all", "device=0" };
    char label[32];
    int barriers = 0;
    for (int i = 0; i < n; i++) {
        int what = rnd(20);
        const char *h = hs[rnd(hosts)];
        tb_by_host = hosts == 2 ? trace_find_queue(t, h, 2) : TRACE_NONE;
        snprintf(label, sizeof label, "op%d", i);
        if (what < 9) {
            const char *q = rnd(3) ? ss[rnd(3)] : h;
            tb_op(t, q, label, acc[rnd(6)]);
        } else if (what < 12)
            tb_record(t, ss[rnd(3)], ev[rnd(3)]);
        else if (what < 15)
            tb_wait(t, rnd(4) ? ss[rnd(3)] : h, ev[rnd(3)]);
        else if (what < 19)
            tb_sync(t, h, tg[rnd(5)]);
        else if (hosts == 2 && barriers < 40) {
            tb_barrier(t, "h0", "b", 2);
            tb_barrier(t, "h1", "b", 2);
            barriers++;
        }
    }
    tb_by_host = TRACE_NONE;
    return t;
}

static keyset keys_of(trace *t)
{
    check_report *rep = tb_check(t);
    keyset s = keyset_of(rep);
    check_report_free(rep);
    return s;
}

/* The greedy minimiser written the slow way: filter, check everything. */
static void naive_minimize(trace *t, bool *keep)
{
    uint64_t n = t->n_stmts;
    for (uint64_t i = 0; i < n; i++)
        keep[i] = true;
    /* barrier generations as groups */
    uint64_t *gen = calloc(n, sizeof *gen);
    uint64_t arr[2] = { 0, 0 };
    for (uint64_t i = 0; i < n; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.kind == TRACE_BARRIER)
            gen[i] = ++arr[s.queue];
    }
    /* findings keys survive filtering only if seqs are the original ones:
     * compare with the removal flags instead of a filtered copy */
    trace *cur = check_trace_filter(t, keep);
    keyset base = keys_of(cur);
    trace_free(cur);
    bool *seen_gen = calloc(n + 1, sizeof *seen_gen);
    for (uint64_t i = 0; i < n; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.kind != TRACE_WAIT && s.kind != TRACE_SYNC && s.kind != TRACE_AWAIT &&
            s.kind != TRACE_BARRIER)
            continue;
        if (s.kind == TRACE_BARRIER) {
            if (seen_gen[gen[i]])
                continue;
            seen_gen[gen[i]] = true;
            for (uint64_t j = 0; j < n; j++) {
                trace_stmt x;
                trace_stmt_at(t, j, &x);
                if (x.kind == TRACE_BARRIER && gen[j] == gen[i])
                    keep[j] = false;
            }
        } else
            keep[i] = false;
        /* keep the original seqs: a removed statement becomes a no-op op */
        trace *m = trace_new();
        *m = *t;                /* shallow: declarations shared, statements rebuilt */
        m->stmts = NULL;
        m->n_stmts = m->cap_stmts = 0;
        m->access_pool = NULL;
        m->n_access_pool = m->cap_access_pool = 0;
        m->attr_pool = NULL;
        m->n_attr_pool = m->cap_attr_pool = 0;
        for (uint64_t j = 0; j < n; j++) {
            trace_stmt x;
            trace_stmt_at(t, j, &x);
            if (!keep[j]) {
                /* a deleted line: a no-op that nobody submitted (with one
                 * host the default submitter adds nothing, since every
                 * later statement of its stream comes after it anyway) */
                x.kind = TRACE_OP;
                x.n_access = 0;
                x.label = TRACE_NONE;
                if (t->n_host_queues > 1)
                    x.by = TRACE_NONE;
            }
            trace_append(m, &x);
        }
        keyset k = keys_of(m);
        free(m->stmts);
        free(m->access_pool);
        free(m->attr_pool);
        free(m);
        if (keyset_subset(&k, &base)) {
            free(base.k);
            base = k;
        } else {
            free(k.k);
            for (uint64_t j = 0; j < n; j++)
                if (!keep[j] && (j == i || (s.kind == TRACE_BARRIER && gen[j] == gen[i])))
                    keep[j] = true;
        }
    }
    free(base.k);
    free(seen_gen);
    free(gen);
}

static void test_minimize_incremental_equals_from_scratch(void **state)
{
    (void)state;
    rng = 0xabcdef12345ULL;
    uint64_t replayed = 0, total = 0;
    for (int k = 0; k < 40; k++) {
        trace *t = random_trace(300);
        check_options opt = { .checkpoint_every = 8, .allow_findings = true };
        check_min_result res;
        trace_error err;
        assert_int_equal(check_minimize(t, &opt, &res, &err), 0);
        bool *keep = calloc(t->n_stmts, sizeof *keep);
        naive_minimize(t, keep);
        for (uint64_t i = 0; i < t->n_stmts; i++) {
            if (keep[i] != res.keep[i])
                fprintf(stderr, "trace %d: statement %llu: naive keep=%d incremental keep=%d\n", k,
                        (unsigned long long)i, keep[i], res.keep[i]);
            assert_int_equal(keep[i], res.keep[i]);
        }
        replayed += res.replayed;
        total += res.n_candidates * t->n_stmts;
        free(keep);
        check_min_result_free(&res);
        trace_free(t);
    }
    /* the incremental replays are a fraction of re-checking everything */
    assert_true(replayed * 4 < total);
}

/* The trace of the minimiser's promise (docs/checker.md): h0's await of f
 * has two signals, h1's and h2's; h2's follows the await only through h2's
 * sync of s0, whose k h0 submits after the await (ruling 1), so the await
 * does not wait for it. The sync (seq 6) can go; without it the await
 * waits for h2's signal, which follows W, and then h0's await of g (seq 8)
 * can go too. drop: NULL, or drop[i] deletes statement i. */
static trace *removal_needs_earlier(const bool *drop)
{
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_host(t, "h1");
    tb_host(t, "h2");
    tb_stream(t, "s0", "0");
    tb_buf(t, "X", 64);
    tb_buf(t, "Y", 64);
    int i = 0;
#define STEP(x)                                                                                    \
    do {                                                                                           \
        if (!drop || !drop[i])                                                                     \
            x;                                                                                     \
        i++;                                                                                       \
    } while (0)
    STEP(tb_op(t, "h1", "P", "w:Y"));       /* 0 */
    STEP(tb_signal(t, "h1", "f"));          /* 1 */
    STEP(tb_op(t, "h2", "W", "w:X"));       /* 2 */
    STEP(tb_signal(t, "h2", "g"));          /* 3 */
    STEP(tb_await(t, "h0", "f"));           /* 4 */
    tb_by_host = tb_q(t, "h0");
    STEP(tb_op(t, "s0", "k", NULL));        /* 5 */
    tb_by_host = TRACE_NONE;
    STEP(tb_sync(t, "h2", "s0"));           /* 6 */
    STEP(tb_signal(t, "h2", "f"));          /* 7 */
    STEP(tb_await(t, "h0", "g"));           /* 8 */
    STEP(tb_op(t, "h0", "U", "r:X r:Y"));   /* 9 */
#undef STEP
    return t;
}

/* What minimize promises is the removals together, and those up to each
 * one in its order -- not each alone: here the second removal is safe only
 * once the first is made. */
static void test_minimize_removal_needs_the_earlier_one(void **state)
{
    (void)state;
    trace *t = removal_needs_earlier(NULL);
    check_min_result res;
    trace_error err;
    assert_int_equal(check_minimize(t, NULL, &res, &err), 0);
    assert_int_equal(res.n_removed, 2);
    assert_int_equal(res.removed[0].seq, 6);
    assert_int_equal(res.removed[1].seq, 8);
    check_min_result_free(&res);
    trace_free(t);
    static const int drops[3][2] = { { 6, -1 }, { 6, 8 }, { 8, -1 } };
    for (int k = 0; k < 3; k++) {
        bool drop[10] = { false };
        for (int j = 0; j < 2; j++)
            if (drops[k][j] >= 0)
                drop[drops[k][j]] = true;
        trace *d = removal_needs_earlier(drop);
        check_report *rep = tb_check(d);
        /* the first alone, both: clean; the second alone: W races with U */
        assert_int_equal(check_report_count_kind(rep, TRACE_FINDING_RACE), k == 2 ? 1 : 0);
        assert_int_equal(check_report_count(rep), k == 2 ? 1 : 0);
        check_report_free(rep);
        trace_free(d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimize_keeps_only_needed_syncs),
        cmocka_unit_test(test_minimize_pattern_counts_graph_launches),
        cmocka_unit_test(test_minimize_redundant_sync_findings),
        cmocka_unit_test(test_minimize_incremental_equals_from_scratch),
        cmocka_unit_test(test_minimize_removal_needs_the_earlier_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
