/*
 * test_rank_graph.c -- what one rank of `run --tp N` builds (sched/
 * generators.c one_rank; docs/multi-rank.md, "Real ranks over MPI"), without
 * MPI: each rank's part of a tp model is its shard on its device 0, its
 * all_reduce nodes are rank r of N, its weights are the whole graph's of
 * that shard (same names and shapes: the reference fills both by name),
 * the ranks' parts cover the whole graph's weights, and the seeded bug
 * leaves out exactly one all_reduce. And auto is one collective (ring)
 * when the ranks are processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sched/sched.h"

#define MODEL "tp:n_layer=3,n_embd=128,n_head=4,n_head_kv=4,n_ff=256,n_vocab=100,n_ctx=32"

static sched_graph *build(int world, int rank, bool skip, sched_model_params *p)
{
    char err[256];
    assert_int_equal(sched_model_parse(MODEL, p, err, sizeof err), 0);
    p->n_devices = world;
    p->one_rank = rank >= 0;
    p->rank = rank;
    p->skip_first_allreduce = skip;
    sched_graph *g = sched_model_build(p, 4);
    assert_non_null(g);
    return g;
}

static int count_op(const sched_graph *g, sched_op op)
{
    int n = 0;
    for (int32_t i = 0; i < g->n_tensors; i++)
        n += g->tensors[i].op == op;
    return n;
}

static void test_rank_part_is_its_shard_on_device_0(void **state)
{
    (void)state;
    sched_model_params p;
    sched_graph *whole = build(4, -1, false, &p);
    assert_int_equal(whole->world, 0);
    int weights_whole = 0, weights_parts = 0;
    for (int32_t i = 0; i < whole->n_tensors; i++)
        weights_whole += (whole->tensors[i].flags & SCHED_FLAG_WEIGHT) != 0;
    for (int r = 0; r < 4; r++) {
        sched_graph *g = build(4, r, false, &p);
        assert_int_equal(g->rank, r);
        assert_int_equal(g->world, 4);
        assert_int_equal(count_op(g, SCHED_OP_ALL_REDUCE), 2 * 3);   /* layers x 2 */
        char mine[16];
        snprintf(mine, sizeof mine, "@%d", r);
        for (int32_t i = 0; i < g->n_tensors; i++) {
            const sched_tensor *t = &g->tensors[i];
            const char *at = strchr(t->name, '@');
            if (at)
                assert_string_equal(at, mine);        /* no other rank's shard */
            if (t->op == SCHED_OP_ALL_REDUCE) {
                int rank, n;
                sched_allreduce_group(g, i, &rank, &n);
                assert_int_equal(rank, r);
                assert_int_equal(n, 4);
            }
            if (t->flags & SCHED_FLAG_WEIGHT) {
                weights_parts += at != NULL || r == 0;  /* shared weights counted once */
                int32_t w = sched_graph_find(whole, t->name);
                assert_true(w >= 0);
                assert_memory_equal(whole->tensors[w].ne, t->ne, sizeof t->ne);
                assert_int_equal(whole->tensors[w].type, t->type);
                if (at)
                    assert_int_equal(t->home, 0);     /* on the rank's one device */
            } else if (at && t->op != SCHED_OP_NONE && !sched_op_is_view(t->op) &&
                       t->user_backend >= 0) {
                assert_int_equal(t->user_backend, 0);
            }
        }
        int32_t out = sched_graph_find(g, "result_output");
        assert_true(out >= 0 && (g->tensors[out].flags & SCHED_FLAG_OUTPUT));
        sched_graph *c = sched_graph_copy(g);
        assert_non_null(c);
        assert_int_equal(c->rank, r);
        assert_int_equal(c->world, 4);
        sched_graph_free(c);
        sched_graph_free(g);
    }
    assert_int_equal(weights_parts, weights_whole);     /* the parts cover the whole */
    sched_graph_free(whole);
}

static void test_rank_skips_allreduce_leaves_out_one(void **state)
{
    (void)state;
    sched_model_params p;
    sched_graph *g = build(2, 1, true, &p);
    assert_int_equal(count_op(g, SCHED_OP_ALL_REDUCE), 2 * 3 - 1);
    assert_int_equal(sched_graph_find(g, "l0.attn_ar@1"), -1);
    assert_true(sched_graph_find(g, "l0.ffn_ar@1") >= 0);
    sched_graph_free(g);
    g = build(2, 1, false, &p);
    assert_true(sched_graph_find(g, "l0.attn_ar@1") >= 0);
    sched_graph_free(g);
}

static void test_rank_out_of_range_builds_nothing(void **state)
{
    (void)state;
    sched_model_params p;
    char err[256];
    assert_int_equal(sched_model_parse(MODEL, &p, err, sizeof err), 0);
    p.n_devices = 2;
    p.one_rank = true;
    p.rank = 2;
    assert_null(sched_model_build(&p, 4));
}

static void test_auto_is_one_collective_across_processes(void **state)
{
    (void)state;
    assert_int_equal(sched_allreduce_pick(SCHED_ALLREDUCE_AUTO, "mpi", 4, SCHED_F32),
                     SCHED_ALLREDUCE_RING);
    /* In one process the CPU devices' auto stays the butterfly. */
    assert_int_equal(sched_allreduce_pick(SCHED_ALLREDUCE_AUTO, NULL, 4, SCHED_F32),
                     SCHED_ALLREDUCE_BUTTERFLY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_part_is_its_shard_on_device_0),
        cmocka_unit_test(test_rank_skips_allreduce_leaves_out_one),
        cmocka_unit_test(test_rank_out_of_range_builds_nothing),
        cmocka_unit_test(test_auto_is_one_collective_across_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
