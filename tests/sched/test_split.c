/* test_split.c -- splits, split inputs, copies per slot, cur_copy rotation,
 * the no-input wait, and the liveness allocator (with ggml's transient
 * one-slot copies). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_backend.h"

static int64_t v64[1] = { 64 };

static int32_t mm(sched_graph *g, const char *name, int32_t w, int32_t x)
{
    int32_t src[2] = { w, x };
    return sched_graph_op(g, name, SCHED_OP_MUL_MAT, src, 2);
}

static int32_t unary(sched_graph *g, const char *name, sched_op op, int32_t a)
{
    int32_t src[1] = { a };
    return sched_graph_op(g, name, op, src, 1);
}

static void plan_policy(fixture *fx, int n_copies, const char *policy)
{
    sched_sink sink = fake_sink();
    fx->w = sched_weights_new(fx->f.ptr, fx->f.n, fx->g, &sink);
    assert_int_equal(sched_weights_bind(fx->w, fx->g), 0);
    sched_options o = { .n_copies = n_copies, .policy = policy ? sched_policy_find(policy) : NULL };
    fx->s = sched_new(fx->f.ptr, fx->f.n, &o);
    char err[256];
    assert_int_equal(sched_plan(fx->s, fx->g, err, sizeof err), SCHED_OK);
}

static void plan(fixture *fx, int n_copies)
{
    plan_policy(fx, n_copies, NULL);
}

/* x (user input) -> mm0 on GPU0 -> mm1 on GPU1 -> mm2 on GPU0, then mm3 on
 * GPU0 reads x again. */
static void three_splits(fixture *fx, int32_t *x, int32_t *m0, int32_t *m1, int32_t *m2)
{
    *x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    *m0 = mm(fx->g, "mm0", fake_weight(fx->g, "w0", 0), *x);
    *m1 = mm(fx->g, "mm1", fake_weight(fx->g, "w1", 1), *m0);
    *m2 = mm(fx->g, "mm2", fake_weight(fx->g, "w2", 0), *m1);
    mm(fx->g, "mm3", fake_weight(fx->g, "w3", 0), *x);
}

static void test_split_inputs_and_copy_counts(void **state)
{
    fixture *fx = *state;
    int32_t x, m0, m1, m2;
    three_splits(fx, &x, &m0, &m1, &m2);
    plan(fx, 3);
    assert_int_equal(sched_n_splits(fx->s), 3);
    const sched_split *s0 = sched_get_split(fx->s, 0), *s1 = sched_get_split(fx->s, 1),
                      *s2 = sched_get_split(fx->s, 2);
    assert_int_equal(s0->backend, 0);
    assert_int_equal(s0->n_inputs, 1);
    assert_int_equal(s0->inputs[0], x);
    assert_int_equal(s1->backend, 1);
    assert_int_equal(s1->n_inputs, 1);
    assert_int_equal(s1->inputs[0], m0);
    /* Split 2 on GPU0 needs mm1 from GPU1; x was copied to GPU0 already. */
    assert_int_equal(s2->backend, 0);
    assert_int_equal(s2->n_inputs, 1);
    assert_int_equal(s2->inputs[0], m1);
    /* One copy per input per slot. */
    assert_int_equal(sched_n_copy_tensors(fx->s), 3 * 3);
    const sched_tensor *c = &fx->g->tensors[s1->input_copy[0] + 2];
    assert_int_equal(c->copy_of, m0);
    assert_int_equal(c->copy_slot, 2);
    assert_int_equal(c->backend, 1);
}

static void test_split_slots_rotate_per_evaluation(void **state)
{
    fixture *fx = *state;
    int32_t x, m0, m1, m2;
    three_splits(fx, &x, &m0, &m1, &m2);
    plan(fx, 2);
    const sched_split *s1 = sched_get_split(fx->s, 1);
    for (int eval = 0; eval < 5; eval++) {
        assert_int_equal(sched_cur_copy(fx->s), eval % 2);
        assert_int_equal(sched_graph_compute(fx->s, (uint64_t)eval), SCHED_OK);
        /* GPU1's node read the copy of this evaluation's slot. */
        int32_t read = fx->f.ctx[1].last_src[1];
        assert_int_equal(read, s1->input_copy[0] + eval % 2);
        assert_int_equal(fx->g->tensors[read].copy_slot, eval % 2);
    }
}

static void test_split_no_inputs_waits_when_memory_is_read_elsewhere(void **state)
{
    fixture *fx = *state;
    /* A CPU split without inputs whose result GPU0 copies: it must wait. */
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t pre = unary(fx->g, "pre", SCHED_OP_SILU, x);
    fx->g->tensors[pre].user_backend = 2;
    int32_t m0 = mm(fx->g, "mm0", fake_weight(fx->g, "w0", 0), pre);
    (void)m0;
    plan(fx, 1);
    assert_int_equal(sched_n_splits(fx->s), 2);
    assert_int_equal(sched_get_split(fx->s, 0)->n_inputs, 0);
    assert_true(sched_get_split(fx->s, 0)->wait_prev);
    assert_false(sched_get_split(fx->s, 1)->wait_prev);
}

static void test_alloc_never_overlaps_live_tensors(void **state)
{
    fixture *fx = *state;
    sched_model_params p;
    char err[256];
    assert_int_equal(sched_model_parse("llama:n_layer=4,n_embd=256,n_head=4,n_head_kv=2,n_ff=512,"
                                       "n_vocab=1000,n_ctx=64", &p, err, sizeof err), 0);
    sched_graph_free(fx->g);
    fx->g = sched_model_build(&p, 8);
    assert_non_null(fx->g);
    plan(fx, 2);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
    /* Reuse happened: an arena is smaller than the sum of what it holds. */
    uint64_t held[4] = { 0 };
    for (int32_t i = 0; i < fx->g->n_tensors; i++) {
        const sched_tensor *t = &fx->g->tensors[i];
        if (t->op != SCHED_OP_NONE && !sched_op_is_view(t->op) && t->view_src < 0)
            held[t->backend] += sched_tensor_nbytes(t);
    }
    assert_true(sched_arena_size(fx->s, 0) < held[0]);
}

static void test_alloc_reuses_memory_of_dead_tensors(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t w0 = fake_weight(fx->g, "w0", 0);
    int32_t a = mm(fx->g, "a", w0, x);
    int32_t b = unary(fx->g, "b", SCHED_OP_SILU, a);
    int32_t c = unary(fx->g, "c", SCHED_OP_SILU, b);
    int32_t d = unary(fx->g, "d", SCHED_OP_SILU, c);
    fx->g->tensors[d].flags |= SCHED_FLAG_OUTPUT;
    plan(fx, 1);
    /* c may take a's bytes (a died when b was computed); b and c never share. */
    assert_int_equal(fx->g->tensors[c].offset, fx->g->tensors[a].offset);
    assert_int_not_equal(fx->g->tensors[b].offset, fx->g->tensors[c].offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}

/* Two GPU0 splits, each copying a CPU result of the same size. */
static void two_copies_graph(fixture *fx, int32_t *ca, int32_t *cb)
{
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t a = unary(fx->g, "a", SCHED_OP_SILU, x);
    fx->g->tensors[a].user_backend = 2;
    int32_t m0 = mm(fx->g, "m0", fake_weight(fx->g, "w0", 0), a);
    int32_t b = unary(fx->g, "b", SCHED_OP_SILU, x);
    fx->g->tensors[b].user_backend = 2;
    int32_t m1 = mm(fx->g, "m1", fake_weight(fx->g, "w1", 0), b);
    int32_t s[2] = { m0, m1 };
    int32_t out = sched_graph_op(fx->g, "out", SCHED_OP_ADD, s, 2);
    fx->g->tensors[out].flags |= SCHED_FLAG_OUTPUT;
    *ca = a;
    *cb = b;
}

/* The copy of a CPU tensor on GPU0 (its only copy: one slot). */
static const sched_tensor *copy_on_gpu0(const fixture *fx, int32_t src)
{
    for (int32_t i = 0; i < fx->g->n_tensors; i++)
        if ((fx->g->tensors[i].flags & SCHED_FLAG_COPY) && fx->g->tensors[i].copy_of == src &&
            fx->g->tensors[i].backend == 0)
            return &fx->g->tensors[i];
    fail_msg("no copy of tensor %d on GPU0", src);
    return NULL;
}

/* ggml with one slot allocates a split's copies when it starts and frees
 * them after their last reader: the second copy takes the first's bytes.
 * syncsim's own policies keep every copy for the whole graph. */
static void test_alloc_ggml_one_slot_copies_are_transient(void **state)
{
    fixture *fx = *state;
    int32_t a, b;
    two_copies_graph(fx, &a, &b);
    plan_policy(fx, 1, "ggml-head");
    assert_int_equal(sched_n_splits(fx->s), 4);       /* CPU, GPU0, CPU, GPU0 */
    assert_int_equal(copy_on_gpu0(fx, a)->offset, copy_on_gpu0(fx, b)->offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}

static void test_alloc_copies_kept_with_slots(void **state)
{
    fixture *fx = *state;
    int32_t a, b;
    two_copies_graph(fx, &a, &b);
    plan_policy(fx, 2, "ggml-head");                  /* two slots: kept */
    assert_int_not_equal(copy_on_gpu0(fx, a)->offset, copy_on_gpu0(fx, b)->offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}

static void test_alloc_copies_kept_by_syncsims_policies(void **state)
{
    fixture *fx = *state;
    int32_t a, b;
    two_copies_graph(fx, &a, &b);
    plan_policy(fx, 1, "events");
    assert_int_not_equal(copy_on_gpu0(fx, a)->offset, copy_on_gpu0(fx, b)->offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}

/* ggml's op_offload: an op whose weight is in host memory (the CPU's)
 * runs on the first device when its batch is at least 32 tokens; the
 * split that then reads the host weight ends before a second such op
 * (ggml's new split for a weight the split's backend cannot use). */
static void test_split_op_offload_and_new_split_for_host_weight(void **state)
{
    fixture *fx = *state;
    int64_t ne[2] = { 64, 32 };
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 2, ne, SCHED_FLAG_INPUT);
    int32_t m0 = mm(fx->g, "m0", fake_weight(fx->g, "w0", 0), x);
    int32_t m1 = mm(fx->g, "m1", fake_weight(fx->g, "wc1", -1), m0);
    int32_t m2 = mm(fx->g, "m2", fake_weight(fx->g, "wc2", -1), m1);
    plan(fx, 1);
    const sched_graph *g = sched_get_graph(fx->s);
    assert_int_equal(g->tensors[m1].backend, 0);
    assert_int_equal(g->tensors[m1].cause, SCHED_CAUSE_OFFLOAD);
    assert_int_equal(g->tensors[m2].cause, SCHED_CAUSE_OFFLOAD);
    /* m0 (input x), m1 (host weight wc1: a new split), m2 (wc2: another). */
    assert_int_equal(sched_n_splits(fx->s), 3);
    for (int i = 0; i < 3; i++) {
        const sched_split *sp = sched_get_split(fx->s, i);
        assert_int_equal(sp->backend, 0);
        assert_true(sp->n_inputs >= 1);
    }
    assert_int_equal(sched_get_split(fx->s, 1)->nodes[0], m1);
    assert_int_equal(sched_get_split(fx->s, 2)->nodes[0], m2);
}

/* A batch under 32 stays with its host weight; so does any batch without
 * op_offload. */
static void test_split_no_offload_below_32_or_when_off(void **state)
{
    fixture *fx = *state;
    int64_t ne[2] = { 64, 31 };
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 2, ne, SCHED_FLAG_INPUT);
    int32_t m = mm(fx->g, "m", fake_weight(fx->g, "wc", -1), x);
    plan(fx, 1);
    assert_int_equal(sched_get_graph(fx->s)->tensors[m].backend, 2);
    assert_int_equal(sched_get_graph(fx->s)->tensors[m].cause, SCHED_CAUSE_WEIGHT);

    sched_graph *g2 = sched_graph_new("t2");
    int64_t ne2[2] = { 64, 64 };
    int32_t x2 = sched_graph_leaf(g2, "x", SCHED_F32, 2, ne2, SCHED_FLAG_INPUT);
    int32_t m2 = mm(g2, "m", fake_weight(g2, "wc", -1), x2);
    sched_sink sink = fake_sink();
    sched_weights *w = sched_weights_new(fx->f.ptr, fx->f.n, g2, &sink);
    assert_int_equal(sched_weights_bind(w, g2), 0);
    sched_options o = { .n_copies = 1, .no_op_offload = true };
    sched *s = sched_new(fx->f.ptr, fx->f.n, &o);
    char err[256];
    assert_int_equal(sched_plan(s, g2, err, sizeof err), SCHED_OK);
    assert_int_equal(sched_get_graph(s)->tensors[m2].backend, 2);
    sched_free(s);
    sched_weights_free(w);
    sched_graph_free(g2);
}

/* Pass 3: a node no neighbour's backend runs (GPU1 has no add) goes to
 * the backend that can use the most of its sources: the CPU, which holds
 * c, rather than GPU0, the first that supports it, which holds neither. */
static void test_assign_most_supported_inputs(void **state)
{
    fixture *fx = *state;
    fx->f.ctx[1].unsupported_ops = 1u << SCHED_OP_ADD;
    int64_t ne[2] = { 64, 4 };
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 2, ne, SCHED_FLAG_INPUT);
    int32_t c = mm(fx->g, "c", fake_weight(fx->g, "wc", -1), x);
    int32_t m = mm(fx->g, "m", fake_weight(fx->g, "w1", 1), x);
    int32_t src[2] = { m, c };
    int32_t n = sched_graph_op(fx->g, "n", SCHED_OP_ADD, src, 2);
    plan(fx, 1);
    const sched_graph *g = sched_get_graph(fx->s);
    assert_int_equal(g->tensors[n].backend, 2);
    assert_int_equal(g->tensors[n].cause, SCHED_CAUSE_MOST_SUPPORTED);
}

/* ggml's GGML_SCHED_MAX_SPLIT_INPUTS: a GPU0 split that reads 31 CPU
 * tensors (inputs x0..x30, one add each) ends after its 30th input and
 * the 31st starts a new split on the same backend. */
static void test_split_input_capacity(void **state)
{
    fixture *fx = *state;
    int32_t acc = mm(fx->g, "m", fake_weight(fx->g, "w0", 0),
                     sched_graph_leaf(fx->g, "xin", SCHED_F32, 1, v64, SCHED_FLAG_INPUT));
    int32_t last = -1;
    for (int i = 0; i < SCHED_MAX_SPLIT_INPUTS; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        int32_t x = sched_graph_leaf(fx->g, name, SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
        snprintf(name, sizeof name, "a%d", i);
        int32_t src[2] = { acc, x };
        acc = last = sched_graph_op(fx->g, name, SCHED_OP_ADD, src, 2);
        fx->g->tensors[acc].user_backend = 0;
    }
    plan(fx, 1);
    assert_int_equal(sched_n_splits(fx->s), 2);
    const sched_split *s0 = sched_get_split(fx->s, 0), *s1 = sched_get_split(fx->s, 1);
    assert_int_equal(s0->backend, 0);
    assert_int_equal(s1->backend, 0);
    assert_int_equal(s0->n_inputs, SCHED_MAX_SPLIT_INPUTS);
    assert_int_equal(s1->n_inputs, 1);
    assert_int_equal(s1->nodes[0], last);
}

/* A split input that is a view is copied as the view (ggml's
 * ggml_dup_tensor_layout of the source the node names): the copy has the
 * view's bytes, taken from the view's offset in its source, and a node on
 * the other backend reads the copy itself. Two views of one tensor are two
 * inputs. */
static void test_split_view_input_copied_as_the_view(void **state)
{
    fixture *fx = *state;
    int64_t ne[1] = { 128 }, half[1] = { 64 };
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, ne, SCHED_FLAG_INPUT);
    int32_t a = unary(fx->g, "a", SCHED_OP_SILU, x);
    fx->g->tensors[a].user_backend = 0;                         /* GPU0 */
    int32_t lo = sched_graph_view(fx->g, "lo", SCHED_OP_VIEW, a, SCHED_F32, 1, half, 0);
    int32_t hi = sched_graph_view(fx->g, "hi", SCHED_OP_VIEW, a, SCHED_F32, 1, half, 256);
    int32_t m = mm(fx->g, "m", fake_weight(fx->g, "w1", 1), hi);  /* GPU1 */
    mm(fx->g, "n", fake_weight(fx->g, "w1b", 1), lo);
    plan(fx, 2);
    const sched_graph *g = sched_get_graph(fx->s);
    assert_int_equal(g->tensors[m].backend, 1);
    const sched_split *sp = NULL;
    for (int i = 0; i < sched_n_splits(fx->s); i++)
        if (sched_get_split(fx->s, i)->backend == 1)
            sp = sched_get_split(fx->s, i);
    assert_non_null(sp);
    assert_int_equal(sp->n_inputs, 2);
    assert_int_equal(sp->inputs[0], hi);
    assert_int_equal(sp->inputs[1], lo);
    const sched_tensor *c = &g->tensors[sp->input_copy[0]];
    assert_int_equal(c->copy_of, hi);
    assert_int_equal(sched_tensor_nbytes(c), 256);
    /* The bytes copied: the view's range of a's allocation. */
    const sched_tensor *vh = &g->tensors[hi];
    assert_ptr_equal(vh->buffer, g->tensors[a].buffer);
    assert_int_equal(vh->offset, g->tensors[a].offset + 256);
    /* The node reads the copy of the view, of this evaluation's slot. */
    assert_int_equal(sched_graph_compute(fx->s, 0), SCHED_OK);
    assert_int_equal(fx->f.ctx[1].last_src[1], sp->input_copy[0]);
}

/* ggml-alloc's in-place reuse (ggml_alloc): silu, the last reader of m0,
 * takes m0's block; add, which reads m1 while a later node still does,
 * does not; mul_mat never works in place. syncsim's own allocator never
 * reuses in place. */
static void inplace_graph(fixture *fx, int32_t *m0, int32_t *a, int32_t *m1, int32_t *b)
{
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    *m0 = mm(fx->g, "m0", fake_weight(fx->g, "w0", 0), x);
    *a = unary(fx->g, "a", SCHED_OP_SILU, *m0);
    *m1 = mm(fx->g, "m1", fake_weight(fx->g, "w1", 0), *a);
    int32_t s2[2] = { *m1, *a };
    *b = sched_graph_op(fx->g, "b", SCHED_OP_ADD, s2, 2);
    mm(fx->g, "m2", fake_weight(fx->g, "w2", 0), *m1);
    mm(fx->g, "m3", fake_weight(fx->g, "w3", 0), *b);
}

static void test_alloc_ggml_inplace_reuse(void **state)
{
    fixture *fx = *state;
    int32_t m0, a, m1, b;
    inplace_graph(fx, &m0, &a, &m1, &b);
    plan_policy(fx, 1, "ggml-head");
    const sched_graph *g = sched_get_graph(fx->s);
    assert_int_equal(g->tensors[a].offset, g->tensors[m0].offset);  /* in place */
    assert_int_not_equal(g->tensors[b].offset, g->tensors[m1].offset);
    /* b takes a's block instead: a's last reader, second source. */
    assert_int_equal(g->tensors[b].offset, g->tensors[a].offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}

static void test_alloc_syncsim_never_inplace(void **state)
{
    fixture *fx = *state;
    int32_t m0, a, m1, b;
    inplace_graph(fx, &m0, &a, &m1, &b);
    plan_policy(fx, 1, "events");
    const sched_graph *g = sched_get_graph(fx->s);
    assert_int_not_equal(g->tensors[a].offset, g->tensors[m0].offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}

/* A source copied to another backend is kept until the split that copies
 * it starts (ggml's input_dep), even when its last reader on its own
 * backend came before: nothing in place over it. */
static void test_alloc_ggml_split_input_kept_until_copied(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t m0 = mm(fx->g, "m0", fake_weight(fx->g, "w0", 0), x);
    int32_t a = unary(fx->g, "a", SCHED_OP_SILU, m0);       /* GPU0, reads m0 */
    int32_t m1 = mm(fx->g, "m1", fake_weight(fx->g, "w1", 1), m0);   /* GPU1 copies m0 */
    mm(fx->g, "m2", fake_weight(fx->g, "w2", 0), a);
    (void)m1;
    plan_policy(fx, 1, "ggml-head");
    const sched_graph *g = sched_get_graph(fx->s);
    assert_int_equal(g->tensors[a].backend, 0);
    assert_int_not_equal(g->tensors[a].offset, g->tensors[m0].offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}


/* A graph whose first node is a view: the view belongs to the first real
 * split, as ggml's split pass has it (split->backend_id is the first
 * non-view node's), not to a split of its own. */
static void test_split_leading_view_joins_the_first_split(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t xv = sched_graph_view(fx->g, "xv", SCHED_OP_RESHAPE, x, SCHED_F32, 1, v64, 0);
    mm(fx->g, "m0", fake_weight(fx->g, "w0", 0), xv);
    plan_policy(fx, 1, "ggml-head");
    assert_int_equal(sched_n_splits(fx->s), 1);
    const sched_split *sp = sched_get_split(fx->s, 0);
    assert_int_equal(sp->backend, 0);
    assert_int_equal(sp->n_nodes, 2);          /* the view and m0 */
}

/* With one slot ggml-alloc places a user input as its own tensor in the
 * CPU's arena (first, as a leaf), frees it after its last reader, and a
 * node that is that reader takes its bytes in place. */
static void test_alloc_ggml_user_input_taken_in_place(void **state)
{
    fixture *fx = *state;
    int32_t x = sched_graph_leaf(fx->g, "x", SCHED_F32, 1, v64, SCHED_FLAG_INPUT);
    int32_t a = unary(fx->g, "a", SCHED_OP_SCALE, x);
    fx->g->tensors[a].user_backend = fx->f.n - 1;           /* the CPU */
    mm(fx->g, "m0", fake_weight(fx->g, "w0", 0), a);
    plan_policy(fx, 1, "ggml-head");
    const sched_graph *g = sched_get_graph(fx->s);
    assert_int_equal(g->tensors[x].buffer->usage, SCHED_BUFFER_COMPUTE);
    assert_ptr_equal(g->tensors[a].buffer, g->tensors[x].buffer);
    assert_int_equal(g->tensors[a].offset, g->tensors[x].offset);
    assert_int_equal(sched_alloc_overlaps(fx->s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FAKE_TEST(test_alloc_ggml_one_slot_copies_are_transient),
        FAKE_TEST(test_alloc_copies_kept_with_slots),
        FAKE_TEST(test_alloc_copies_kept_by_syncsims_policies),
        FAKE_TEST(test_split_inputs_and_copy_counts),
        FAKE_TEST(test_split_slots_rotate_per_evaluation),
        FAKE_TEST(test_split_no_inputs_waits_when_memory_is_read_elsewhere),
        FAKE_TEST(test_alloc_never_overlaps_live_tensors),
        FAKE_TEST(test_alloc_reuses_memory_of_dead_tensors),
        FAKE_TEST(test_split_op_offload_and_new_split_for_host_weight),
        FAKE_TEST(test_split_no_offload_below_32_or_when_off),
        FAKE_TEST(test_assign_most_supported_inputs),
        FAKE_TEST(test_split_input_capacity),
        FAKE_TEST(test_split_view_input_copied_as_the_view),
        FAKE_TEST(test_alloc_ggml_inplace_reuse),
        FAKE_TEST(test_alloc_syncsim_never_inplace),
        FAKE_TEST(test_alloc_ggml_split_input_kept_until_copied),
        FAKE_TEST(test_split_leading_view_joins_the_first_split),
        FAKE_TEST(test_alloc_ggml_user_input_taken_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
