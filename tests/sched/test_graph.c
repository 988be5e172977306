/* test_graph.c -- the graph model, generators and the graph file format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sched/sched.h"

static void test_graph_mul_mat_costs(void **state)
{
    (void)state;
    sched_graph *g = sched_graph_new("g");
    int64_t wne[2] = { 4096, 1024 }, xne[2] = { 4096, 8 };
    int32_t w = sched_graph_leaf(g, "w", SCHED_F16, 2, wne, SCHED_FLAG_WEIGHT);
    int32_t x = sched_graph_leaf(g, "x", SCHED_F32, 2, xne, SCHED_FLAG_INPUT);
    int32_t src[2] = { w, x };
    int32_t mm = sched_graph_op(g, "mm", SCHED_OP_MUL_MAT, src, 2);
    const sched_tensor *t = &g->tensors[mm];
    assert_int_equal(t->ne[0], 1024);
    assert_int_equal(t->ne[1], 8);
    assert_int_equal(sched_node_flops(g, t), 2ull * 4096 * 1024 * 8);
    assert_int_equal(sched_node_bytes(g, t), 4096ull * 1024 * 2 + 4096 * 8 * 4 + 1024 * 8 * 4);
    /* Mismatched inner dimensions are refused. */
    int64_t yne[2] = { 100, 8 };
    src[1] = sched_graph_leaf(g, "y", SCHED_F32, 2, yne, 0);
    assert_int_equal(sched_graph_op(g, "bad", SCHED_OP_MUL_MAT, src, 2), -1);
    sched_graph_free(g);
}

/* ggml's MUL_MAT_ID: experts [K, M, E], input [K, 1, T], ids [U, T] ->
 * [M, U, T], priced for the used experts only. */
static void test_graph_mul_mat_id_shape_and_cost(void **state)
{
    (void)state;
    sched_graph *g = sched_graph_new("t");
    int64_t we[3] = { 16, 8, 10 }, xe[3] = { 16, 1, 5 }, ie[2] = { 2, 5 }, bad[2] = { 3, 5 };
    int32_t w = sched_graph_leaf(g, "w", SCHED_F16, 3, we, SCHED_FLAG_WEIGHT);
    int32_t x = sched_graph_leaf(g, "x", SCHED_F32, 3, xe, 0);
    int32_t ids = sched_graph_leaf(g, "ids", SCHED_I32, 2, ie, SCHED_FLAG_INPUT);
    int32_t badids = sched_graph_leaf(g, "bad", SCHED_F32, 2, bad, 0);
    int32_t src[3] = { w, x, ids };
    int32_t o = sched_graph_op(g, "o", SCHED_OP_MUL_MAT_ID, src, 3);
    assert_true(o >= 0);
    assert_int_equal(g->tensors[o].ne[0], 8);
    assert_int_equal(g->tensors[o].ne[1], 2);
    assert_int_equal(g->tensors[o].ne[2], 5);
    assert_int_equal(sched_node_flops(g, &g->tensors[o]), 2ull * 16 * 8 * 2 * 5);
    assert_true(sched_node_half(g, &g->tensors[o]));
    /* 10 experts of 256 bytes, at most 2 x 5 = 10 used: all of them. */
    assert_int_equal(sched_node_bytes(g, &g->tensors[o]), 10 * 256 + 16 * 5 * 4 + 2 * 5 * 4 + 8 * 2 * 5 * 4);
    src[2] = badids;                    /* ids must be i32 */
    assert_int_equal(sched_graph_op(g, "o2", SCHED_OP_MUL_MAT_ID, src, 3), -1);
    assert_int_equal(sched_graph_op(g, "o3", SCHED_OP_MUL_MAT_ID, src, 2), -1);
    sched_graph_free(g);
}

static void test_graph_llama_has_every_layer(void **state)
{
    (void)state;
    sched_model_params p;
    char err[256];
    assert_int_equal(sched_model_parse("llama:n_layer=3,n_embd=128,n_head=4,n_head_kv=2,n_ff=256,"
                                       "n_vocab=100,n_ctx=32", &p, err, sizeof err), 0);
    sched_graph *g = sched_model_build(&p, 4);
    assert_non_null(g);
    assert_true(sched_graph_find(g, "l2.ffn_out") >= 0);
    assert_true(sched_graph_find(g, "cache_k.2") >= 0);
    int32_t out = sched_graph_find(g, "result_output");
    assert_true(g->tensors[out].flags & SCHED_FLAG_OUTPUT);
    assert_int_equal(g->tensors[out].ne[0], 100);
    assert_int_equal(g->tensors[sched_graph_find(g, "blk.0.wq")].home, 0);
    assert_int_equal(g->tensors[sched_graph_find(g, "blk.2.wq")].home, 1);
    assert_int_equal(g->tensors[sched_graph_find(g, "tok_embd")].home, -1);
    sched_graph_free(g);
}

static void test_graph_tp_shards_and_all_reduces(void **state)
{
    (void)state;
    sched_model_params p;
    char err[256];
    assert_int_equal(sched_model_parse("tp:n_layer=2,n_embd=128,n_head=4,n_head_kv=2,n_ff=256,"
                                       "n_vocab=100,n_ctx=32", &p, err, sizeof err), 0);
    sched_graph *g = sched_model_build(&p, 4);
    assert_non_null(g);
    int n_ar = 0;
    for (int32_t i = 0; i < g->n_tensors; i++)
        n_ar += g->tensors[i].op == SCHED_OP_ALL_REDUCE;
    assert_int_equal(n_ar, 2 * 2 * 2);     /* layers x (attention, ffn) x devices */
    int32_t wq1 = sched_graph_find(g, "blk.0.wq@1");
    assert_int_equal(g->tensors[wq1].home, 1);
    assert_int_equal(g->tensors[wq1].ne[1], 64);  /* half the heads */
    sched_graph_free(g);
}

static void test_graph_model_spec_errors_say_what_was_expected(void **state)
{
    (void)state;
    sched_model_params p;
    char err[256];
    assert_int_equal(sched_model_parse("gpt:n_layer=2", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown kind 'gpt'"));
    assert_int_equal(sched_model_parse("llama:n_layers=2", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown key 'n_layers'"));
    assert_int_equal(sched_model_parse("llama:n_layer=zero", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "n_layer takes a whole number from 1 to 16777216, got 'zero'"));
    /* a number past the limit: the limit named (it said "not a positive integer") */
    assert_int_equal(sched_model_parse("llama:n_layer=99999999", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "n_layer takes a whole number from 1 to 16777216, got '99999999'"));
}

static const char *small_graph =
    "syncsim-graph 1\n"
    "# a two-layer perceptron\n"
    "leaf x f32 64x4 input\n"
    "leaf w0 f16 64x64 weight home=0\n"
    "leaf w1 f16 64x64 weight home=1\n"
    "op h mul_mat w0 x\n"
    "op a silu h\n"
    "view a2 reshape a f32 256\n"
    "op y mul_mat w1 a output backend=1\n";

static void test_graph_file_parses(void **state)
{
    (void)state;
    trace_error err = { 0 };
    sched_graph *g = sched_graph_parse_string("small.graph", small_graph, &err);
    assert_non_null(g);
    assert_int_equal(g->n_tensors, 7);
    int32_t y = sched_graph_find(g, "y");
    assert_int_equal(g->tensors[y].user_backend, 1);
    assert_true(g->tensors[y].flags & SCHED_FLAG_OUTPUT);
    assert_int_equal(g->tensors[sched_graph_find(g, "w1")].home, 1);
    assert_int_equal(g->tensors[sched_graph_find(g, "a2")].view_src, sched_graph_find(g, "a"));
    sched_graph_free(g);
}

static void expect_error(const char *text, const char *want)
{
    trace_error err = { 0 };
    sched_graph *g = sched_graph_parse_string("bad.graph", text, &err);
    assert_null(g);
    if (!strstr(err.msg, want))
        fail_msg("got '%s', want '%s'", err.msg, want);
}

static void test_graph_file_errors_name_line_and_column(void **state)
{
    (void)state;
    expect_error("syncsim-graph 1\nleaf x f32 4\nop y frobnicate x\n",
                 "bad.graph:3:6: unknown op 'frobnicate'");
    expect_error("syncsim-graph 1\nleaf x f32 4\nop y silu z\n",
                 "bad.graph:3:11: unknown source 'z'");
    expect_error("syncsim-graph 1\nleaf x f32 4xq\n", "bad.graph:2:12: expected a shape");
    expect_error("syncsim-graph 2\n", "bad.graph:1:15: graph format version 2");
    expect_error("leaf x f32 4\n", "bad.graph:1:1: expected the header");
    expect_error("syncsim-graph 1\nleaf x f32 4\nleaf x f32 4\n", "bad.graph:3:6: 'x' is already defined");
    expect_error("syncsim-graph 1\nleaf x f64 4\n", "bad.graph:2:8: unknown dtype 'f64'");
}

static void round_trip(const char *spec)
{
    sched_model_params p;
    char errbuf[256];
    assert_int_equal(sched_model_parse(spec, &p, errbuf, sizeof errbuf), 0);
    sched_graph *g = sched_model_build(&p, 4);
    assert_non_null(g);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(sched_graph_write(f, g), 0);
    fclose(f);
    trace_error err = { 0 };
    sched_graph *h = sched_graph_parse_string("rt.graph", text, &err);
    if (!h)
        fail_msg("%s", err.msg);
    assert_int_equal(h->n_tensors, g->n_tensors);
    for (int32_t i = 0; i < g->n_tensors; i++) {
        assert_string_equal(h->tensors[i].name, g->tensors[i].name);
        assert_memory_equal(h->tensors[i].ne, g->tensors[i].ne, sizeof g->tensors[i].ne);
        assert_int_equal(h->tensors[i].view_offs, g->tensors[i].view_offs);
        assert_int_equal(h->tensors[i].flags, g->tensors[i].flags);
        assert_int_equal(h->tensors[i].op, g->tensors[i].op);
        assert_memory_equal(h->tensors[i].src, g->tensors[i].src, sizeof g->tensors[i].src);
    }
    free(text);
    sched_graph_free(g);
    sched_graph_free(h);
}

static void test_graph_file_round_trips_llama(void **state)
{
    (void)state;
    round_trip("llama:n_layer=2,n_embd=128,n_head=4,n_head_kv=2,n_ff=256,n_vocab=100,n_ctx=32");
}

/* The moe model: mul_mat_id with its three sources, i32 ids inputs, 3-d
 * expert weights in host memory; its spec errors say what was expected. */
static void test_graph_moe_round_trips_and_checks_its_spec(void **state)
{
    (void)state;
    round_trip("moe:n_layer=2,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=32,"
               "n_expert=8,n_expert_used=2");
    sched_model_params p;
    char err[256];
    assert_int_equal(sched_model_parse("moe:n_layer=1,n_embd=64,n_head=4,n_head_kv=4,n_expert=4", &p,
                                       err, sizeof err), 0);
    sched_graph *g = sched_model_build(&p, 3);
    int32_t gate = sched_graph_find(g, "l0.ffn_gate_exps");
    int32_t w = sched_graph_find(g, "blk.0.ffn_gate_exps");
    assert_true(gate >= 0 && w >= 0);
    assert_int_equal(g->tensors[gate].op, SCHED_OP_MUL_MAT_ID);
    assert_int_equal(g->tensors[w].home, -1);          /* the experts stay on the host */
    assert_int_equal(g->tensors[w].ne[2], 4);
    assert_int_equal(g->tensors[gate].ne[1], 2);       /* n_expert_used */
    sched_graph_free(g);
    assert_int_equal(sched_model_parse("moe:n_expert=2,n_expert_used=3", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "n_expert_used (3) must be at most n_expert (2)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_mul_mat_id_shape_and_cost),
        cmocka_unit_test(test_graph_mul_mat_costs),
        cmocka_unit_test(test_graph_llama_has_every_layer),
        cmocka_unit_test(test_graph_tp_shards_and_all_reduces),
        cmocka_unit_test(test_graph_model_spec_errors_say_what_was_expected),
        cmocka_unit_test(test_graph_file_parses),
        cmocka_unit_test(test_graph_file_errors_name_line_and_column),
        cmocka_unit_test(test_graph_file_round_trips_llama),
        cmocka_unit_test(test_graph_moe_round_trips_and_checks_its_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
