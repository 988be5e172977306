/*
 * test_rank_graph.c -- what one rank of `run --tp N` builds (sched/
 * generators.c one_rank; docs/multi-rank.md, "Real ranks over MPI"), without
 * MPI: each rank's part of a tp model is its shard on its device 0, its
 * all_reduce nodes are rank r of N, its weights are the whole graph's of
 * that shard (same names and shapes: the reference fills both by name),
 * the ranks' parts cover the whole graph's weights, and the seeded bug
 * leaves out exactly one all_reduce. And auto is one collective (ring)
 * when the ranks are processes. A stage of `run --pp N` (a layer split
 * over processes) is the layers a single process gives device r, on device
 * 0, from the token embedding (rank 0) or the input inp_act, to the output
 * head (the last rank) or its last layer's output.
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

static int find(const sched_graph *g, const char *name)
{
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return i;
    return -1;
}

static int32_t output(const sched_graph *g)
{
    int32_t out = -1, n = 0;
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].flags & SCHED_FLAG_OUTPUT)
            out = i, n++;
    assert_int_equal(n, 1);
    return out;
}

static void test_pipeline_stage_is_its_layers(void **state)
{
    (void)state;
    char err[256];
    sched_model_params p;
    assert_int_equal(sched_model_parse("llama:n_layer=5,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,"
                                       "n_vocab=100,n_ctx=32", &p, err, sizeof err), 0);
    p.n_devices = 2;
    /* A single process's layer split over 2 devices: l * 2 / 5. */
    sched_graph *whole = sched_model_build(&p, 4);
    assert_non_null(whole);
    int lo[2], hi[2];
    sched_model_stage(&p, 0, 2, &lo[0], &hi[0]);
    sched_model_stage(&p, 1, 2, &lo[1], &hi[1]);
    assert_int_equal(lo[0], 0);
    assert_int_equal(hi[0], 3);
    assert_int_equal(lo[1], 3);
    assert_int_equal(hi[1], 5);
    for (int l = 0; l < 5; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "blk.%d.wq", l);
        int32_t w = find(whole, nm);
        assert_true(w >= 0);
        assert_int_equal(whole->tensors[w].home, l < hi[0] ? 0 : 1);
    }
    p.one_rank = true;
    for (int r = 0; r < 2; r++) {
        p.rank = r;
        sched_graph *g = sched_model_build(&p, 4);
        assert_non_null(g);
        assert_int_equal(g->rank, r);
        assert_int_equal(g->world, 2);
        assert_int_equal(count_op(g, SCHED_OP_ALL_REDUCE), 0);
        for (int l = 0; l < 5; l++) {
            char nm[32];
            snprintf(nm, sizeof nm, "blk.%d.wq", l);
            int32_t w = find(g, nm);
            assert_int_equal(w >= 0, l >= lo[r] && l < hi[r]);
            if (w >= 0) {       /* on its one device, same shape as the whole graph's */
                assert_int_equal(g->tensors[w].home, 0);
                assert_memory_equal(g->tensors[w].ne, whole->tensors[find(whole, nm)].ne,
                                    sizeof g->tensors[w].ne);
            }
        }
        assert_int_equal(find(g, "inp_tokens") >= 0, r == 0);
        assert_int_equal(find(g, "tok_embd") >= 0, r == 0);
        int32_t act = find(g, "inp_act");
        assert_int_equal(act >= 0, r == 1);
        if (act >= 0) {
            assert_true(g->tensors[act].flags & SCHED_FLAG_INPUT);
            assert_int_equal(g->tensors[act].ne[0], 64);
            assert_int_equal(g->tensors[act].ne[1], 4);
        }
        /* Stage 0 ends with its last layer's output, stage 1 with the head. */
        assert_string_equal(g->tensors[output(g)].name, r == 0 ? "l2.out" : "result_output");
        sched_graph_free(g);
    }
    p.rank = 2;
    assert_null(sched_model_build(&p, 4));
    sched_graph_free(whole);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_part_is_its_shard_on_device_0),
        cmocka_unit_test(test_rank_skips_allreduce_leaves_out_one),
        cmocka_unit_test(test_rank_out_of_range_builds_nothing),
        cmocka_unit_test(test_auto_is_one_collective_across_processes),
        cmocka_unit_test(test_pipeline_stage_is_its_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
