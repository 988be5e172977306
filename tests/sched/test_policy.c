/* test_policy.c -- each sync policy's pattern string on a two-split graph:
 * split 0 on GPU0 with three user inputs, split 1 on GPU1 with one input
 * from GPU0; and the no-input wait that no-split-wait drops. The pattern
 * is read from the statements a recording (sched_rec) makes of the
 * scheduler's calls, in the alphabet of traces/pattern.c: s the host
 * blocks (a sync or an event synchronize), c a blocking copy, a an async
 * copy, g a graph launch, r a record, w a stream's wait. A copy from GPU0
 * to GPU1 runs on GPU0's stream and hands over with an event (a r w). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fake_backend.h"

static int64_t v64[1] = { 64 };

typedef struct run {
    fake_set f;
    sched_backend *be[4];           /* the recorded ones */
    sched_rec *rec;
    trace *t;
    trace_pattern *p;
    char pattern[256];
    sched_graph *g;
    sched_weights *w;
    sched *s;
} run;

static int64_t no_clock(void *ctx)
{
    (void)ctx;
    return 0;
}

static void two_split_graph(sched_graph *g)
{
    int32_t i0 = sched_graph_leaf(g, "i0", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t i1 = sched_graph_leaf(g, "i1", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t i2 = sched_graph_leaf(g, "i2", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t w0 = fake_weight(g, "w0", 0), w1 = fake_weight(g, "w1", 1);
    int32_t s[2] = { i0, i1 };
    int32_t a = sched_graph_op(g, "a", SCHED_OP_ADD, s, 2);
    s[0] = a;
    s[1] = i2;
    int32_t b = sched_graph_op(g, "b", SCHED_OP_ADD, s, 2);
    s[0] = w0;
    s[1] = b;
    int32_t m0 = sched_graph_op(g, "m0", SCHED_OP_MUL_MAT, s, 2);
    s[0] = w1;
    s[1] = m0;
    sched_graph_op(g, "m1", SCHED_OP_MUL_MAT, s, 2);
}

static void start(run *r, const char *policy, void (*build)(sched_graph *))
{
    memset(r, 0, sizeof *r);
    fake_set_init(&r->f, 2);
    r->t = trace_new();
    sched_rec_opts ro = { .sink = sched_sink_memory(r->t), .now = no_clock };
    r->rec = sched_rec_new(&ro);
    assert_non_null(r->rec);
    for (int i = 0; i < r->f.n; i++)
        assert_non_null(r->be[i] = sched_rec_wrap(r->rec, r->f.ptr[i]));
    r->p = trace_pattern_new();
    sched_rec_observe(r->rec, r->p);
    r->g = sched_graph_new("t");
    build(r->g);
    r->w = sched_weights_new(r->be, r->f.n, r->g, sched_rec_sink(r->rec));
    assert_int_equal(sched_weights_bind(r->w, r->g), 0);
    sched_options o = { .n_copies = 2, .policy = sched_policy_find(policy) };
    assert_non_null(o.policy);
    r->s = sched_new(r->be, r->f.n, &o);
    char err[256];
    assert_int_equal(sched_plan(r->s, r->g, err, sizeof err), SCHED_OK);
}

static void stop(run *r)
{
    sched_free(r->s);
    sched_weights_free(r->w);
    sched_graph_free(r->g);
    sched_rec_free(r->rec);
    trace_pattern_free(r->p);
    trace_free(r->t);
}

/* The pattern of evaluation n (0-based) after running n + 1 evaluations. */
static const char *pattern_of(run *r, int n)
{
    for (int i = 0; i <= n; i++)
        assert_int_equal(sched_graph_compute(r->s, (uint64_t)i), SCHED_OK);
    trace_pattern_iter it;
    assert_int_equal(trace_pattern_last(r->p, sched_rec_host(r->rec), &it), 0);
    assert_string_equal(it.iter, n == 0 ? "0" : n == 1 ? "1" : "2");
    snprintf(r->pattern, sizeof r->pattern, "%s", it.before);
    return r->pattern;
}

static void test_policy_full_is_sassassasg(void **state)
{
    (void)state;
    run r;
    start(&r, "full", two_split_graph);
    assert_int_equal(sched_n_splits(r.s), 2);
    assert_string_equal(pattern_of(&r, 0), "sassassasg|sarwsg");
    stop(&r);
}

static void test_policy_relaxed_is_saaasg(void **state)
{
    (void)state;
    run r;
    start(&r, "relaxed", two_split_graph);
    assert_string_equal(pattern_of(&r, 0), "saaasg|sarwsg");
    stop(&r);
}

static void test_policy_events_waits_for_slot_events(void **state)
{
    (void)state;
    run r;
    start(&r, "events", two_split_graph);
    /* Slots are fresh for the first two evaluations: nothing to wait for.
     * GPU1's input runs on GPU0's stream and hands over (a r w). */
    assert_string_equal(pattern_of(&r, 0), "cccgr|arwgr");
    stop(&r);
    start(&r, "events", two_split_graph);
    assert_string_equal(pattern_of(&r, 2), "scscscgr|warwgr");
    stop(&r);
}

static void test_policy_async_user_inputs_drops_the_host_wait(void **state)
{
    (void)state;
    run r;
    start(&r, "async-user-inputs", two_split_graph);
    assert_string_equal(pattern_of(&r, 2), "wawawagr|warwgr");
    stop(&r);
}

/* A CPU split without inputs whose result GPU0 reads, then GPU0. */
static void cpu_first_graph(sched_graph *g)
{
    int32_t x = sched_graph_leaf(g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t s[2] = { x, -1 };
    int32_t pre = sched_graph_op(g, "pre", SCHED_OP_SILU, s, 1);
    g->tensors[pre].user_backend = 2;
    s[0] = fake_weight(g, "w0", 0);
    s[1] = pre;
    sched_graph_op(g, "m0", SCHED_OP_MUL_MAT, s, 2);
}

static void test_policy_no_split_wait_drops_the_previous_split_wait(void **state)
{
    (void)state;
    run r;
    start(&r, "events", cpu_first_graph);
    assert_string_equal(pattern_of(&r, 1), "s|agr");
    stop(&r);
    start(&r, "no-split-wait", cpu_first_graph);
    assert_string_equal(pattern_of(&r, 1), "agr");
    stop(&r);
    start(&r, "full", cpu_first_graph);
    assert_string_equal(pattern_of(&r, 1), "s|sasg");
    stop(&r);
}

static void test_policy_names_are_unique_and_found(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; sched_policies[i]; i++, n++)
        assert_ptr_equal(sched_policy_find(sched_policies[i]->name), sched_policies[i]);
    assert_int_equal(n, 5);
    assert_null(sched_policy_find("nope"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_full_is_sassassasg),
        cmocka_unit_test(test_policy_relaxed_is_saaasg),
        cmocka_unit_test(test_policy_events_waits_for_slot_events),
        cmocka_unit_test(test_policy_async_user_inputs_drops_the_host_wait),
        cmocka_unit_test(test_policy_no_split_wait_drops_the_previous_split_wait),
        cmocka_unit_test(test_policy_names_are_unique_and_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
