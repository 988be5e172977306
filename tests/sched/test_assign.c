/* test_assign.c -- the four assignment passes on small graphs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_backend.h"

static int64_t v64[1] = { 64 };

static int32_t unary(sched_graph *g, const char *name, sched_op op, int32_t a)
{
    int32_t src[1] = { a };
    return sched_graph_op(g, name, op, src, 1);
}

static int32_t binary(sched_graph *g, const char *name, sched_op op, int32_t a, int32_t b)
{
    int32_t src[2] = { a, b };
    return sched_graph_op(g, name, op, src, 2);
}

static void assign(fixture *fx)
{
    sched_sink sink = fake_sink();
    fx->w = sched_weights_new(fx->f.ptr, fx->f.n, fx->g, &sink);
    assert_non_null(fx->w);
    assert_int_equal(sched_weights_bind(fx->w, fx->g), 0);
    fx->s = sched_new(fx->f.ptr, fx->f.n, NULL);
    char err[256];
    assert_int_equal(sched_assign(fx->s, fx->g, err, sizeof err), SCHED_OK);
}

static void test_assign_weights_pin_ops_inputs_go_to_cpu(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t w1 = fake_weight(fx->g, "w1", 1);
    int32_t mm = binary(fx->g, "mm", SCHED_OP_MUL_MAT, w1, x);
    assign(fx);
    assert_int_equal(fx->g->tensors[mm].backend, 1);
    assert_int_equal(fx->g->tensors[mm].cause, SCHED_CAUSE_WEIGHT);
    assert_int_equal(fx->g->tensors[x].backend, 2);
    assert_int_equal(fx->g->tensors[x].cause, SCHED_CAUSE_INPUT);
    assert_int_equal(fx->g->tensors[w1].cause, SCHED_CAUSE_BUFFER);
}

/* ggml's pass 1 does not let a rope follow a weight among its sources (the
 * rope frequencies are too small to choose a backend by). */
static void test_assign_rope_does_not_follow_its_weight(void **state)
{
    fixture *fx = *state;
    int64_t xd[3] = { 64, 1, 4 }, pd[1] = { 4 };
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 3, xd, SCHED_FLAG_INPUT);
    int32_t freqs = sched_graph_leaf(fx->g, "freqs", SCHED_I32, 1, pd, SCHED_FLAG_WEIGHT);
    fx->g->tensors[freqs].home = 1;
    int32_t r = binary(fx->g, "r", SCHED_OP_ROPE, x, freqs);
    assert_true(r >= 0);
    assign(fx);
    assert_int_equal(fx->g->tensors[freqs].backend, 1);
    assert_int_not_equal(fx->g->tensors[r].cause, SCHED_CAUSE_WEIGHT);
    /* Nothing places it in pass 1 or 2; pass 3 then picks, as ggml's
     * "3.best", the backend that can use most of its sources. */
    assert_int_equal(fx->g->tensors[r].cause, SCHED_CAUSE_MOST_SUPPORTED);
}

static void test_assign_expansion_down_then_up(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t pre = unary(fx->g, "pre", SCHED_OP_SCALE, x);   /* before the weighted op */
    int32_t w0 = fake_weight(fx->g, "w0", 0);
    int32_t mm = binary(fx->g, "mm", SCHED_OP_MUL_MAT, w0, pre);
    int32_t post = unary(fx->g, "post", SCHED_OP_SILU, mm); /* after it */
    assign(fx);
    assert_int_equal(fx->g->tensors[post].backend, 0);
    assert_int_equal(fx->g->tensors[post].cause, SCHED_CAUSE_EXPAND_DOWN);
    assert_int_equal(fx->g->tensors[pre].backend, 0);
    assert_int_equal(fx->g->tensors[pre].cause, SCHED_CAUSE_EXPAND_UP);
}

static void test_assign_cpu_is_not_expanded_first(void **state)
{
    fixture *fx = *state;
    /* cpu_op follows a CPU weight; the next node must not inherit the CPU in
     * the first expansion: it expands up from the GPU node after it. */
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t wc = fake_weight(fx->g, "wc", -1);
    int32_t cpu_op = binary(fx->g, "cpu_op", SCHED_OP_MUL_MAT, wc, x);
    int32_t mid = unary(fx->g, "mid", SCHED_OP_SILU, cpu_op);
    int32_t w1 = fake_weight(fx->g, "w1", 1);
    int32_t mm = binary(fx->g, "mm", SCHED_OP_MUL_MAT, w1, mid);
    assign(fx);
    assert_int_equal(fx->g->tensors[cpu_op].backend, 2);
    assert_int_equal(fx->g->tensors[mm].backend, 1);
    assert_int_equal(fx->g->tensors[mid].backend, 1);
    assert_int_equal(fx->g->tensors[mid].cause, SCHED_CAUSE_EXPAND_UP);
}

static void test_assign_upgrade_to_backend_sharing_buffers(void **state)
{
    fixture *fx = *state;
    /* GPU0 plays a BLAS backend: it computes on host buffers but only mul_mat. */
    fx->f.ctx[0].uses_host_buffers = true;
    fx->f.ctx[0].unsupported_ops = ~(1u << SCHED_OP_MUL_MAT);
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t wc = fake_weight(fx->g, "wc", -1);
    int32_t bias = sched_graph_leaf(fx->g, "bias", SCHED_F32, 1, v64, SCHED_FLAG_WEIGHT);
    int32_t mm = binary(fx->g, "mm", SCHED_OP_MUL_MAT, wc, x);
    int32_t c = binary(fx->g, "c", SCHED_OP_ADD, mm, bias);
    int32_t mm2 = binary(fx->g, "mm2", SCHED_OP_MUL_MAT, c, x);
    assign(fx);
    /* ggml's backend_from_buffer: the highest-priority backend that can
     * use the weight's (host) buffer and runs the op -- BLAS for the
     * mul_mat, the CPU for the add, in pass 1. */
    assert_int_equal(fx->g->tensors[wc].backend, 2);    /* BLAS runs no leaf */
    assert_int_equal(fx->g->tensors[mm].backend, 0);
    assert_int_equal(fx->g->tensors[mm].cause, SCHED_CAUSE_WEIGHT);
    assert_int_equal(fx->g->tensors[c].backend, 2);     /* BLAS cannot add */
    assert_int_equal(fx->g->tensors[c].cause, SCHED_CAUSE_WEIGHT);
    /* mm2 (no weight) is expanded onto the CPU, then upgraded to BLAS. */
    assert_int_equal(fx->g->tensors[mm2].backend, 0);
    assert_int_equal(fx->g->tensors[mm2].cause, SCHED_CAUSE_UPGRADE);
}

static void test_assign_user_assignment_kept(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t w0 = fake_weight(fx->g, "w0", 0);
    int32_t mm = binary(fx->g, "mm", SCHED_OP_MUL_MAT, w0, x);
    fx->g->tensors[mm].user_backend = 2;
    int32_t post = unary(fx->g, "post", SCHED_OP_SILU, mm);
    fx->g->tensors[post].user_backend = 1;
    assign(fx);
    assert_int_equal(fx->g->tensors[mm].backend, 2);
    assert_int_equal(fx->g->tensors[mm].cause, SCHED_CAUSE_USER);
    assert_int_equal(fx->g->tensors[post].backend, 1);
}

static void test_assign_cpu_fallback_for_unsupported_op(void **state)
{
    fixture *fx = *state;
    fx->f.ctx[0].unsupported_ops = 1u << SCHED_OP_SOFTMAX;
    fx->f.ctx[1].unsupported_ops = 1u << SCHED_OP_SOFTMAX;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t w0 = fake_weight(fx->g, "w0", 0);
    int32_t mm = binary(fx->g, "mm", SCHED_OP_MUL_MAT, w0, x);
    int32_t sm = unary(fx->g, "sm", SCHED_OP_SOFTMAX, mm);
    assign(fx);
    assert_int_equal(fx->g->tensors[sm].backend, 2);
    assert_int_equal(fx->g->tensors[sm].cause, SCHED_CAUSE_MOST_SUPPORTED);
}

static void test_assign_view_follows_source(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t w1 = fake_weight(fx->g, "w1", 1);
    int32_t mm = binary(fx->g, "mm", SCHED_OP_MUL_MAT, w1, x);
    int64_t ne[2] = { 8, 8 };
    int32_t v = sched_graph_view(fx->g, "mm_view", SCHED_OP_RESHAPE, mm, SCHED_F32, 2, ne, 0);
    assign(fx);
    assert_int_equal(fx->g->tensors[v].backend, 1);
    assert_int_equal(fx->g->tensors[v].cause, SCHED_CAUSE_VIEW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FAKE_TEST(test_assign_weights_pin_ops_inputs_go_to_cpu),
        FAKE_TEST(test_assign_rope_does_not_follow_its_weight),
        FAKE_TEST(test_assign_expansion_down_then_up),
        FAKE_TEST(test_assign_cpu_is_not_expanded_first),
        FAKE_TEST(test_assign_upgrade_to_backend_sharing_buffers),
        FAKE_TEST(test_assign_user_assignment_kept),
        FAKE_TEST(test_assign_cpu_fallback_for_unsupported_op),
        FAKE_TEST(test_assign_view_follows_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
