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

/* The GPUs' ggml backend family of the next start (NULL: syncsim's
 * placement, which copies between devices as cuda does). */
static const char *gpu_family;

static void start_with(run *r, const char *policy, void (*build)(sched_graph *), int n_gpus,
                       int n_copies)
{
    memset(r, 0, sizeof *r);
    fake_set_init(&r->f, n_gpus);
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
    static const sched_copy_traits *traits[8];
    for (int i = 0; gpu_family && i < r->f.n && i < 8; i++)
        traits[i] = sched_copy_family(i + 1 < r->f.n ? gpu_family : "cpu");
    sched_options o = { .n_copies = n_copies, .policy = sched_policy_find(policy),
                        .sink = sched_rec_sink(r->rec), .copy_traits = gpu_family ? traits : NULL };
    assert_non_null(o.policy);
    r->s = sched_new(r->be, r->f.n, &o);
    char err[256];
    assert_int_equal(sched_plan(r->s, r->g, err, sizeof err), SCHED_OK);
}

static void start(run *r, const char *policy, void (*build)(sched_graph *))
{
    start_with(r, policy, build, 2, 2);
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
    /* Driven as llama.cpp drives ggml: a reset and an allocation before
     * each evaluation (a policy without ggml_slots ignores both). */
    for (int i = 0; i <= n; i++) {
        sched_reset(r->s);
        assert_int_equal(sched_alloc_graph(r->s), SCHED_OK);
        assert_int_equal(sched_graph_compute(r->s, (uint64_t)i), SCHED_OK);
    }
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

/* Split 0 of two_split_graph alone: one GPU, three user inputs. */
static void one_gpu_graph(sched_graph *g)
{
    int32_t i0 = sched_graph_leaf(g, "i0", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t i1 = sched_graph_leaf(g, "i1", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t i2 = sched_graph_leaf(g, "i2", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t w0 = fake_weight(g, "w0", 0);
    int32_t s[2] = { i0, i1 };
    int32_t a = sched_graph_op(g, "a", SCHED_OP_ADD, s, 2);
    s[0] = a;
    s[1] = i2;
    int32_t b = sched_graph_op(g, "b", SCHED_OP_ADD, s, 2);
    s[0] = w0;
    s[1] = b;
    sched_graph_op(g, "m0", SCHED_OP_MUL_MAT, s, 2);
}

/* Single GPU, one copy slot (ggml does not pipeline one device): the
 * patterns the issue names; no events exist, so nothing is recorded. */
static void test_policy_single_gpu_patterns(void **state)
{
    (void)state;
    static const struct { const char *policy, *pattern; } want[] = {
        { "full", "sassassasg" },
        { "ggml-20793", "saaasg" },
        { "ggml-17795", "saaasg" },       /* no events: syncs around the split */
        { "ggml-head", "scscscg" },       /* no events: a sync before each blocking copy */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        run r;
        start_with(&r, want[i].policy, one_gpu_graph, 1, 1);
        assert_int_equal(sched_n_splits(r.s), 1);
        assert_string_equal(pattern_of(&r, 2), want[i].pattern);
        stop(&r);
    }
}

/* With two slots the ggml policies have events: #17795 drops the syncs and
 * copies user inputs asynchronously after the host waited for the slot;
 * #20793 keeps the syncs; head copies user inputs blocking. Events are
 * recorded after splits with inputs (both splits here). */
static void test_policy_ggml_pipelined_patterns(void **state)
{
    (void)state;
    static const struct { const char *policy, *pattern; } want[] = {
        { "ggml-17795", "sasasagr|warwgr" },
        { "ggml-20793", "ssasasasgr|swarwsgr" },
        { "ggml-head", "scscscgr|warwgr" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        run r;
        start(&r, want[i].policy, two_split_graph);
        assert_string_equal(pattern_of(&r, 2), want[i].pattern);
        stop(&r);
    }
}

/* The streams that wait for slot events (".ev."; the host's event
 * synchronizes left out), in order, comma separated, into buf. */
static const char *slot_waiters(run *r, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = 0;
    for (uint64_t i = 0; i < r->t->n_stmts; i++) {
        trace_stmt st;
        trace_stmt_at(r->t, i, &st);
        if (st.kind != TRACE_WAIT || st.queue == sched_rec_host(r->rec) ||
            !strstr(trace_str(r->t, st.object), ".ev."))
            continue;
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "," : "",
                                 trace_str(r->t, r->t->queues[st.queue].name));
    }
    return buf;
}

/* GPU1's input is copied on GPU0's stream: syncsim's events policy makes
 * that (copying) stream wait for GPU1's slot; ggml makes GPU1's stream wait,
 * which does not hold back the copy (difference 2 of issue 12). */
static void test_policy_ggml_waits_on_the_destination(void **state)
{
    (void)state;
    char buf[256];
    run r;
    start(&r, "events", two_split_graph);
    pattern_of(&r, 2);
    assert_string_equal(slot_waiters(&r, buf, sizeof buf), "gpu0");
    stop(&r);
    start(&r, "ggml-head", two_split_graph);
    pattern_of(&r, 2);
    assert_string_equal(slot_waiters(&r, buf, sizeof buf), "gpu1");
    stop(&r);
    /* The slot-reuse race's fix: the copying (source's) stream waits too. */
    start(&r, "ggml-source-wait", two_split_graph);
    pattern_of(&r, 2);
    assert_string_equal(slot_waiters(&r, buf, sizeof buf), "gpu1,gpu0");
    stop(&r);
}

/* ggml-sycl's event_wait is sycl::event::wait(): the host blocks where a
 * cuda backend's stream would wait for the slot; so no stream waits. */
static void test_policy_sycl_event_wait_blocks_the_host(void **state)
{
    (void)state;
    char buf[256];
    run r;
    gpu_family = "sycl";
    start(&r, "ggml-head", two_split_graph);
    const char *p = pattern_of(&r, 2);
    assert_string_equal(slot_waiters(&r, buf, sizeof buf), "");
    assert_null(strchr(p, 'w'));
    stop(&r);
    gpu_family = "noasync";                 /* the same copies, waits on the stream */
    start(&r, "ggml-head", two_split_graph);
    pattern_of(&r, 2);
    assert_string_equal(slot_waiters(&r, buf, sizeof buf), "gpu1");
    stop(&r);
    gpu_family = NULL;
}

/* A split on GPU0 from a weight, then a CPU split without inputs. */
static void gpu_then_cpu_graph(sched_graph *g)
{
    int32_t x = sched_graph_leaf(g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t s[2] = { fake_weight(g, "w0", 0), -1 };
    sched_graph_op(g, "q", SCHED_OP_SILU, s, 1);
    s[0] = x;
    int32_t post = sched_graph_op(g, "post", SCHED_OP_SILU, s, 1);
    g->tensors[post].user_backend = 2;
}

/* #26040: a split without inputs after a change of backend blocks the host
 * on the previous backend's slot event (s), whoever reads its memory;
 * before #26040 nothing waits; syncsim's readers rule waits only when
 * another backend reads the split's memory (nobody here). The previous
 * backend is forgotten at each evaluation: GPU0's split, first, never
 * waits for the CPU split of the evaluation before. */
static void test_policy_ggml_head_waits_after_a_backend_change(void **state)
{
    (void)state;
    run r;
    start(&r, "ggml-head", gpu_then_cpu_graph);
    assert_int_equal(sched_n_splits(r.s), 2);
    assert_int_equal(sched_get_split(r.s, 1)->n_inputs, 0);
    assert_string_equal(pattern_of(&r, 2), "gr|s");
    stop(&r);
    start(&r, "ggml-20793", gpu_then_cpu_graph);
    assert_string_equal(pattern_of(&r, 2), "ssg");   /* no events: syncs around GPU0's split */
    stop(&r);
    start(&r, "events", gpu_then_cpu_graph);
    assert_string_equal(pattern_of(&r, 2), "gr");
    stop(&r);
}

/* ggml's slots: cur_copy is chosen when the graph is allocated and is 0
 * again after a synchronize of a graph no longer allocated (after a
 * reset); every user input has a copy per slot, in the CPU's arena (ggml's
 * graph-input copies, as ggml-alloc places them). syncsim's own policies
 * rotate cur_copy after every evaluation. */
static void test_policy_ggml_slots(void **state)
{
    (void)state;
    run r;
    start_with(&r, "ggml-head", two_split_graph, 2, 4);
    int32_t i0 = sched_graph_find(r.g, "i0");
    uint64_t seen[4];
    for (int e = 0; e < 3; e++) {
        sched_reset(r.s);
        assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
        assert_int_equal(sched_cur_copy(r.s), e);
        assert_int_equal(r.g->tensors[i0].buffer->usage, SCHED_BUFFER_COMPUTE);
        seen[e] = r.g->tensors[i0].offset;
        for (int k = 0; k < e; k++)
            assert_int_not_equal(seen[k], seen[e]);
        assert_int_equal(sched_graph_compute(r.s, (uint64_t)e), SCHED_OK);
    }
    sched_reset(r.s);                                   /* llama_decode's end */
    assert_int_equal(sched_synchronize(r.s), SCHED_OK);
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(sched_cur_copy(r.s), 0);
    assert_int_equal(r.g->tensors[i0].offset, seen[0]);
    stop(&r);

    start_with(&r, "events", two_split_graph, 2, 4);
    i0 = sched_graph_find(r.g, "i0");
    const sched_buffer *one = r.g->tensors[i0].buffer;
    for (int e = 0; e < 3; e++)
        assert_int_equal(sched_graph_compute(r.s, (uint64_t)e), SCHED_OK);
    assert_int_equal(sched_synchronize(r.s), SCHED_OK);
    assert_int_equal(sched_cur_copy(r.s), 3);
    assert_ptr_equal(r.g->tensors[i0].buffer, one);
    stop(&r);
}

/* ggml never clears is_alloc after a compute: a compute without a reset
 * reuses the slot (graph reuse), and a synchronize while the graph is
 * still allocated leaves next_copy alone -- the slot after a sync is 0 only
 * once the scheduler was reset (ggml-backend.cpp, _graph_compute_async and
 * _synchronize). */
static void test_policy_ggml_slots_is_alloc_kept(void **state)
{
    (void)state;
    run r;
    start_with(&r, "ggml-head", two_split_graph, 2, 4);
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(sched_cur_copy(r.s), 0);
    assert_int_equal(sched_graph_compute(r.s, 0), SCHED_OK);
    assert_int_equal(sched_graph_compute(r.s, 1), SCHED_OK);   /* still allocated */
    assert_int_equal(sched_cur_copy(r.s), 0);
    assert_int_equal(sched_synchronize(r.s), SCHED_OK);        /* allocated: no reset */
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(sched_cur_copy(r.s), 1);
    assert_int_equal(sched_graph_compute(r.s, 2), SCHED_OK);
    sched_reset(r.s);
    assert_int_equal(sched_graph_compute(r.s, 3), SCHED_OK);   /* reset: allocates */
    assert_int_equal(sched_cur_copy(r.s), 2);
    sched_reset(r.s);
    assert_int_equal(sched_synchronize(r.s), SCHED_OK);
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(sched_cur_copy(r.s), 0);
    stop(&r);
}

/* ggml synchronizes every backend before ggml-alloc reserves again: the
 * first allocation of a graph, not the next ones of the same graph
 * (ggml_backend_sched_alloc_splits); syncsim's own policies never do. */
static void test_policy_ggml_sync_before_first_allocation(void **state)
{
    (void)state;
    run r;
    start_with(&r, "ggml-head", two_split_graph, 2, 2);
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(r.f.ctx[0].n_sync, 1);
    assert_int_equal(r.f.ctx[1].n_sync, 1);
    assert_int_equal(sched_graph_compute(r.s, 0), SCHED_OK);
    int after = r.f.ctx[0].n_sync;
    sched_reset(r.s);
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(r.f.ctx[0].n_sync, after);             /* fits: no sync */
    stop(&r);
    start_with(&r, "events", two_split_graph, 2, 2);
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(r.f.ctx[0].n_sync, 0);
    stop(&r);
}

/* An input read through a view by the CPU, then GPU0; and directly, so
 * that ggml's split pass makes it a graph input with copies per slot (an
 * input read through views alone is not one: ggml-alloc places it once). */
static void input_view_graph(sched_graph *g)
{
    int32_t x = sched_graph_leaf(g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int64_t half[1] = { 32 };
    int32_t xv = sched_graph_view(g, "xv", SCHED_OP_VIEW, x, SCHED_F32, 1, half, 128);
    int32_t s[2] = { xv, -1 };
    int32_t c = sched_graph_op(g, "c", SCHED_OP_SILU, s, 1);
    g->tensors[c].user_backend = 1;                    /* the CPU (one GPU) */
    s[0] = x;
    int32_t d = sched_graph_op(g, "d", SCHED_OP_SILU, s, 1);
    g->tensors[d].user_backend = 1;
    s[0] = fake_weight(g, "w0", 0);
    s[1] = c;
    sched_graph_op(g, "m0", SCHED_OP_MUL_MAT, s, 2);
}

/* A view of a per-slot input names that slot's copy ("xv#c", a view of
 * the CPU's arena declared through the sink the scheduler is given), once
 * per slot, and again when the slot comes back. */
static void test_policy_ggml_slots_views_of_inputs(void **state)
{
    (void)state;
    run r;
    start_with(&r, "ggml-head", input_view_graph, 1, 2);
    int32_t x = sched_graph_find(r.g, "x"), xv = sched_graph_find(r.g, "xv");
    uint32_t views[2];
    for (int e = 0; e < 2; e++) {
        sched_reset(r.s);
        assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
        assert_int_equal(sched_graph_compute(r.s, (uint64_t)e), SCHED_OK);
        const sched_tensor *v = &r.g->tensors[xv];
        views[e] = v->trace_view;
        assert_int_not_equal(views[e], TRACE_NONE);
        assert_int_equal(r.t->buffers[views[e]].parent, r.g->tensors[x].buffer->trace_id);
        assert_int_equal(r.t->buffers[views[e]].offset, r.g->tensors[x].offset + 128);
        char want[16];
        snprintf(want, sizeof want, "xv#%d", e);
        assert_string_equal(trace_str(r.t, r.t->buffers[views[e]].name), want);
    }
    assert_int_not_equal(views[0], views[1]);
    uint32_t n_buffers = r.t->n_buffers;
    sched_reset(r.s);
    assert_int_equal(sched_synchronize(r.s), SCHED_OK);
    assert_int_equal(sched_alloc_graph(r.s), SCHED_OK);
    assert_int_equal(sched_graph_compute(r.s, 2), SCHED_OK);
    assert_int_equal(r.g->tensors[xv].trace_view, views[0]);
    assert_int_equal(r.t->n_buffers, n_buffers);        /* nothing declared again */
    stop(&r);
}

static void test_policy_names_are_unique_and_found(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; sched_policies[i]; i++, n++)
        assert_ptr_equal(sched_policy_find(sched_policies[i]->name), sched_policies[i]);
    assert_int_equal(n, 12);
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
        cmocka_unit_test(test_policy_single_gpu_patterns),
        cmocka_unit_test(test_policy_ggml_pipelined_patterns),
        cmocka_unit_test(test_policy_ggml_waits_on_the_destination),
        cmocka_unit_test(test_policy_sycl_event_wait_blocks_the_host),
        cmocka_unit_test(test_policy_ggml_head_waits_after_a_backend_change),
        cmocka_unit_test(test_policy_ggml_slots),
        cmocka_unit_test(test_policy_ggml_slots_is_alloc_kept),
        cmocka_unit_test(test_policy_ggml_sync_before_first_allocation),
        cmocka_unit_test(test_policy_ggml_slots_views_of_inputs),
        cmocka_unit_test(test_policy_names_are_unique_and_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
