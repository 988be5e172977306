/*
 * test_split_graph.c -- the split graph picture: its DOT text (clusters, colours,
 * copies, edges), the one-node-per-split summary, rendering through
 * Graphviz, and `syncsim graph` on a recorded run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "viz/viz.h"
#include "viz_test_util.h"

typedef struct fixture {
    char *dir;
    char db[512];
    trace_graph g;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = vt_tmpdir();
    if (!f->dir)
        return -1;
    snprintf(f->db, sizeof f->db, "%s/run.db", f->dir);
    if (vt_record_trace(f->db, PIPELINE_TRACE, true, NULL, 0) != 1)
        return -1;
    trace_error err = { 0 };
    trace_store *st = trace_store_open(f->db, false, &err);
    if (!st || trace_store_graph(st, 1, &f->g, &err) != 0)
        return -1;
    trace_store_close(st);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    trace_graph_free(&f->g);
    vt_rmdir(f->dir);
    free(f);
    return 0;
}

static char *dot_of(const trace_graph *g, const viz_graph_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_non_null(mem);
    assert_int_equal(viz_graph_dot(mem, g, o), 0);
    fclose(mem);
    return buf;
}

static void test_split_graph_dot_has_one_cluster_per_split(void **state)
{
    fixture *f = *state;
    char *dot = dot_of(&f->g, NULL);
    assert_int_equal(vt_count(dot, "subgraph cluster_"), 3);
    /* each title is a node of its cluster, above the copies that dashed
     * edges enter, so that no edge strikes it through */
    assert_non_null(strstr(dot, "t0 [shape=plaintext, style=\"\", fontsize=11, "
                                "label=\"split 0 · GPU0\\ninputs: inp\"]"));
    assert_non_null(strstr(dot, "label=\"split 1 · GPU1\\ninputs: layers_a\""));
    assert_non_null(strstr(dot, "label=\"split 2 · CPU\\ninputs: layers_b\""));
    assert_int_equal(vt_count(dot, "[style=invis]"), 3); /* one per copy entered */
    assert_non_null(strstr(dot, "t0 -> n3 [style=invis]"));
    free(dot);
}

static void test_split_graph_dot_colours_nodes_by_backend(void **state)
{
    fixture *f = *state;
    char *dot = dot_of(&f->g, NULL);
    /* first GPU blue, second orange, CPU grey */
    assert_non_null(strstr(dot, "n5 [label=\"layers_a\\nmul_mat 512 f32\", fillcolor=\"#9ecae9\""));
    assert_non_null(strstr(dot, "n7 [label=\"layers_b\\nmul_mat 512 f32\", fillcolor=\"#ffbf79\""));
    assert_non_null(strstr(dot, "n8 [peripheries=2, label=\"out\\nadd 512 f32\", fillcolor=\"#d9d9d9\""));
    free(dot);
}

static void test_split_graph_dot_shows_copies_slots_and_causes(void **state)
{
    fixture *f = *state;
    char *dot = dot_of(&f->g, NULL);
    assert_int_equal(vt_count(dot, "shape=cds"), 3);
    assert_non_null(strstr(dot, "inp#GPU0#0\\ncopy slot 0"));
    assert_non_null(strstr(dot, "inp#GPU0#1\\ncopy slot 1"));
    assert_non_null(strstr(dot, "tooltip=\"layers_b: mul_mat on GPU1\\nassigned by pass 2: "
                                "expanded down from the previous node\""));
    free(dot);
}

static void test_split_graph_dot_styles_edges_by_kind(void **state)
{
    fixture *f = *state;
    char *dot = dot_of(&f->g, NULL);
    assert_int_equal(vt_count(dot, " -> ") - vt_count(dot, "[style=invis]"), 7);
    assert_int_equal(vt_count(dot, "color=\"#d62728\", penwidth=2.2, tooltip=\"split input\""), 3);
    assert_int_equal(vt_count(dot, "color=\"#ff7f0e\", style=dashed"), 3);
    assert_non_null(strstr(dot, "n1 -> n3 [color=\"#ff7f0e\""));
    free(dot);
}

static void test_split_graph_dot_summarises_above_the_limit(void **state)
{
    fixture *f = *state;
    viz_graph_opts o = { .node_limit = 4 };
    assert_true(viz_graph_summarised(&f->g, &o));
    char *dot = dot_of(&f->g, &o);
    assert_int_equal(vt_count(dot, "subgraph cluster_"), 0);
    assert_non_null(strstr(dot, "g0 [label=\"split 0 · GPU0\\n4 nodes: cpy x2, leaf x1, mul_mat x1\""));
    assert_non_null(strstr(dot, "g0 -> g1 [label=\"1\", color=\"#d62728\""));
    assert_non_null(strstr(dot, "g3 [shape=invhouse, label=\"graph inputs\\n1: input x1\""));
    free(dot);
    o.full = true;
    assert_false(viz_graph_summarised(&f->g, &o));
}

/* A llama-shaped graph of n_layer layers, all in split 0 on GPU0: per
 * layer K, "d:lK.norm" (reads the previous layer's out and the weight
 * "blk.K.w"), "d:lK.attn" (reads norm and the graph input "d:kq_mask"),
 * "d:lK.out". Layer `odd` (if >= 0) has one extra node, "d:lK.extra". */
typedef struct layered {
    trace_graph g;
    char (*names)[32];
} layered;

static void layered_make(layered *l, int n_layer, int odd)
{
    size_t cap = (size_t)n_layer * 5 + 2;
    memset(l, 0, sizeof *l);
    l->names = calloc(cap, sizeof *l->names);
    l->g.nodes = calloc(cap, sizeof *l->g.nodes);
    l->g.edges = calloc(cap * 3, sizeof *l->g.edges);
    l->g.splits = calloc(1, sizeof *l->g.splits);
    assert_non_null(l->names);
    assert_non_null(l->g.nodes);
    assert_non_null(l->g.edges);
    assert_non_null(l->g.splits);
    trace_graph *g = &l->g;
    int64_t id = 0, prev = -1;
#define NODE(split_, op_, flags_, ...)                                                       \
    (snprintf(l->names[g->n_nodes], sizeof l->names[0], __VA_ARGS__),                     \
     g->nodes[g->n_nodes] = (trace_graph_node){ id, l->names[g->n_nodes], op_, "64 f32",  \
                                               "GPU0", split_, "pass 1", -1, flags_ },    \
     g->n_nodes++, id++)
#define EDGE(a, b) (g->edges[g->n_edges++] = (trace_graph_edge){ a, b, "data" })
    int64_t mask = NODE(-1, "input", TRACE_NODE_INPUT, "d:kq_mask");
    for (int k = 0; k < n_layer; k++) {
        int64_t w = NODE(-1, "leaf", TRACE_NODE_WEIGHT, "blk.%d.w", k);
        int64_t norm = NODE(0, "rms_norm", 0, "d:l%d.norm", k);
        int64_t attn = NODE(0, "softmax", 0, "d:l%d.attn", k);
        int64_t out = NODE(0, "add", 0, "d:l%d.out", k);
        EDGE(w, norm);
        if (prev >= 0)
            EDGE(prev, norm);
        EDGE(norm, attn);
        EDGE(mask, attn);
        EDGE(attn, out);
        if (k == odd)
            EDGE(out, NODE(0, "scale", 0, "d:l%d.extra", k));
        prev = out;
    }
#undef NODE
#undef EDGE
    g->splits[0] = (trace_graph_split){ 0, "GPU0", 1, (int64_t)g->n_nodes - 1, NULL };
    g->n_splits = 1;
}

static void layered_free(layered *l)
{
    free(l->names);
    free(l->g.nodes);
    free(l->g.edges);
    free(l->g.splits);
}

static bool has_node(const char *dot, const char *name)
{
    char want[64], first[64]; /* label= after other attributes, or first */
    snprintf(want, sizeof want, " label=\"%s\\n", name);
    snprintf(first, sizeof first, "[label=\"%s\\n", name);
    return strstr(dot, want) || strstr(dot, first);
}

static void test_split_graph_collapses_repeated_layers(void **state)
{
    (void)state;
    layered l;
    layered_make(&l, 12, -1);
    viz_graph_drawing d;
    assert_int_equal(viz_graph_describe(&l.g, NULL, &d), 0);
    assert_int_equal(d.view, VIZ_GRAPH_COLLAPSED);
    assert_int_equal(d.layers_collapsed, 10);
    assert_int_equal(d.placeholders, 1);
    /* 3 nodes of each of layers 1..10, and their weights, read only there */
    assert_int_equal(d.nodes_collapsed, 10 * 3 + 10);
    assert_int_equal(d.nodes, l.g.n_nodes - d.nodes_collapsed);
    char *dot = dot_of(&l.g, NULL);
    assert_true(has_node(dot, "d:l0.norm"));
    assert_true(has_node(dot, "d:l11.out"));
    assert_false(has_node(dot, "d:l5.attn"));
    assert_false(has_node(dot, "blk.5.w"));
    assert_true(has_node(dot, "blk.0.w"));
    assert_non_null(strstr(dot, "label=\"layers d:l1 to d:l10: 10 more like d:l0\\n40 nodes"));
    /* the placeholder sits between the layers it replaces */
    assert_int_equal(vt_count(dot, "n4 -> c0"), 1);          /* d:l0.out */
    assert_int_equal(vt_count(dot, " -> n46"), 2);           /* d:l11.norm: placeholder, weight */
    assert_non_null(strstr(dot, "c0 -> n46"));
    /* the legend says what was collapsed and how to see it */
    assert_non_null(strstr(dot, "collapsed, one node per split: d:l1 to d:l10 (10 layers like "
                                "d:l0); graph --full draws every node"));
    free(dot);
    layered_free(&l);
}

static void test_split_graph_full_draws_every_node_and_edge_once(void **state)
{
    (void)state;
    layered l;
    layered_make(&l, 12, -1);
    viz_graph_opts o = { .full = true };
    viz_graph_drawing d;
    assert_int_equal(viz_graph_describe(&l.g, &o, &d), 0);
    assert_int_equal(d.view, VIZ_GRAPH_EVERY_NODE);
    assert_int_equal(d.nodes, l.g.n_nodes);
    assert_int_equal(d.layers_collapsed, 0);
    char *dot = dot_of(&l.g, &o);
    for (int k = 0; k < 12; k++) {
        char name[32];
        snprintf(name, sizeof name, "d:l%d.attn", k);
        assert_true(has_node(dot, name));
    }
    assert_null(strstr(dot, "collapsed"));
    /* every stored edge once: directly, or from a stand-in of its source */
    assert_int_equal(vt_count(dot, " -> ") - vt_count(dot, "[style=invis]"), (int)l.g.n_edges);
    free(dot);
    layered_free(&l);
}

static void test_split_graph_much_read_tensor_gets_stand_ins(void **state)
{
    (void)state;
    layered l;
    layered_make(&l, 12, -1);
    viz_graph_opts o = { .full = true };
    viz_graph_drawing d;
    assert_int_equal(viz_graph_describe(&l.g, &o, &d), 0);
    char *dot = dot_of(&l.g, &o);
    /* d:kq_mask (node 0) is read by 12 layers, 5 nodes apart (PROXY_NEAR
     * 32): drawn once, with direct edges to the readers within 32 nodes of
     * the first; the later ones read stand-ins, one per group */
    assert_true(has_node(dot, "d:kq_mask"));
    assert_true(d.proxies >= 1);
    assert_int_equal(vt_count(dot, "label=\"↳ d:kq_mask\""), (int)d.proxies);
    assert_non_null(strstr(dot, "n0_p1 [shape=plaintext"));
    assert_non_null(strstr(dot, "tooltip=\"d:kq_mask is drawn once, outside the splits, beside "
                                "its first reader d:l0.attn; it is read 12 times"));
    /* no edge from the tensor itself spans far: its direct readers are the
     * first ones */
    assert_non_null(strstr(dot, "n0 -> n3;"));               /* d:l0.attn */
    assert_null(strstr(dot, "n0 -> n47;"));                  /* d:l11.attn */
    assert_int_equal(vt_count(dot, "n0 -> ") + vt_count(dot, "n0_p"), 12 + (int)d.proxies);
    /* a tensor read 3 times or less keeps its edges */
    assert_null(strstr(dot, "↳ d:l0.norm"));
    free(dot);
    layered_free(&l);
}

static void test_split_graph_a_layer_that_differs_is_drawn(void **state)
{
    (void)state;
    layered l;
    layered_make(&l, 12, 6);
    viz_graph_drawing d;
    assert_int_equal(viz_graph_describe(&l.g, NULL, &d), 0);
    assert_int_equal(d.view, VIZ_GRAPH_COLLAPSED);
    char *dot = dot_of(&l.g, NULL);
    /* layers 0..5 keep 0 and 5; 6 differs and is drawn; 7..11 keep 7 and 11 */
    assert_true(has_node(dot, "d:l6.extra"));
    assert_true(has_node(dot, "d:l5.out"));
    assert_true(has_node(dot, "d:l7.out"));
    assert_false(has_node(dot, "d:l3.out"));
    assert_false(has_node(dot, "d:l9.out"));
    assert_non_null(strstr(dot, "layers d:l1 to d:l4"));
    assert_non_null(strstr(dot, "layers d:l8 to d:l10"));
    assert_int_equal(d.layers_collapsed, 4 + 3);
    free(dot);
    layered_free(&l);
    /* fewer than VIZ_GRAPH_COLLAPSE_MIN alike layers: nothing collapsed */
    layered_make(&l, VIZ_GRAPH_COLLAPSE_MIN - 1, -1);
    assert_int_equal(viz_graph_describe(&l.g, NULL, &d), 0);
    assert_int_equal(d.view, VIZ_GRAPH_EVERY_NODE);
    layered_free(&l);
}

static void test_split_graph_legend_says_what_it_draws(void **state)
{
    fixture *f = *state;
    char *dot = dot_of(&f->g, NULL);
    /* red edges are reads of a split's copy of an input, inside the split */
    assert_null(strstr(dot, "cross splits"));
    assert_non_null(strstr(dot, "thick red, a node reading its split's copy of an input"));
    assert_non_null(strstr(dot, "dashed orange, a tensor copied into a split"));
    assert_null(strstr(dot, "names: "));   /* no d:/p: names in this graph */
    free(dot);
    layered l;
    layered_make(&l, 2, -1);
    dot = dot_of(&l.g, NULL);
    assert_non_null(strstr(dot, "names: d: the decode graph's nodes\\l"));
    free(dot);
    layered_free(&l);
}

static void test_split_graph_render_svg_in_memory(void **state)
{
    fixture *f = *state;
    char *svg = NULL;
    size_t len = 0;
    trace_error err = { 0 };
    assert_int_equal(viz_graph_render(&f->g, NULL, "svg", NULL, &svg, &len, &err), 0);
    assert_true(len > 1000);
    assert_non_null(strstr(svg, "<svg"));
    assert_int_equal(vt_count(svg, "class=\"cluster\""), 3);
    assert_int_equal(vt_count(svg, "class=\"node\""), 8 + 3);   /* and the titles */
    assert_int_equal(vt_count(svg, "class=\"edge\""), 7);       /* the invisible ones are not drawn */
    free(svg);
}

static void test_split_graph_cli_writes_dot_and_svg(void **state)
{
    fixture *f = *state;
    char cmd[2048], out[600];
    snprintf(out, sizeof out, "%s/splits.dot", f->dir);
    snprintf(cmd, sizeof cmd, "'%s' graph '%s' -o '%s' >/dev/null", SYNCSIM_BINARY, f->db, out);
    assert_int_equal(vt_sh(cmd), 0);
    char *dot = vt_slurp(out);
    assert_non_null(dot);
    assert_int_equal(vt_count(dot, "subgraph cluster_"), 3);
    free(dot);
    snprintf(out, sizeof out, "%s/splits.svg", f->dir);
    snprintf(cmd, sizeof cmd, "'%s' graph '%s' --run 1 -o '%s' >/dev/null", SYNCSIM_BINARY, f->db, out);
    assert_int_equal(vt_sh(cmd), 0);
    char *svg = vt_slurp(out);
    assert_non_null(svg);
    assert_non_null(strstr(svg, "</svg>"));
    free(svg);
}

static void test_split_graph_cli_refuses_run_without_graph(void **state)
{
    fixture *f = *state;
    char db[600], cmd[2048], err_path[600], out[600];
    snprintf(db, sizeof db, "%s/nograph.db", f->dir);
    snprintf(err_path, sizeof err_path, "%s/err.txt", f->dir);
    snprintf(out, sizeof out, "%s/none.svg", f->dir);
    assert_int_equal(vt_record_trace(db, PIPELINE_TRACE, false, NULL, 0), 1);
    snprintf(cmd, sizeof cmd, "'%s' graph '%s' -o '%s' 2>'%s'", SYNCSIM_BINARY, db, out, err_path);
    assert_int_equal(vt_sh(cmd), 2);
    char *msg = vt_slurp(err_path);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "syncsim graph: "));
    assert_non_null(strstr(msg, "has no split graph"));
    assert_int_equal(vt_count(msg, "\n"), 1);
    free(msg);
    assert_int_equal(access(out, F_OK), -1); /* nothing left behind */
    /* a text trace is not a database */
    snprintf(cmd, sizeof cmd, "'%s' graph '%s' 2>/dev/null", SYNCSIM_BINARY, PIPELINE_TRACE);
    assert_int_equal(vt_sh(cmd), 2);
    snprintf(cmd, sizeof cmd, "'%s' graph '%s' -o x.txt 2>/dev/null", SYNCSIM_BINARY, f->db);
    assert_int_equal(vt_sh(cmd), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_graph_dot_has_one_cluster_per_split),
        cmocka_unit_test(test_split_graph_dot_colours_nodes_by_backend),
        cmocka_unit_test(test_split_graph_dot_shows_copies_slots_and_causes),
        cmocka_unit_test(test_split_graph_dot_styles_edges_by_kind),
        cmocka_unit_test(test_split_graph_dot_summarises_above_the_limit),
        cmocka_unit_test(test_split_graph_collapses_repeated_layers),
        cmocka_unit_test(test_split_graph_full_draws_every_node_and_edge_once),
        cmocka_unit_test(test_split_graph_much_read_tensor_gets_stand_ins),
        cmocka_unit_test(test_split_graph_a_layer_that_differs_is_drawn),
        cmocka_unit_test(test_split_graph_legend_says_what_it_draws),
        cmocka_unit_test(test_split_graph_render_svg_in_memory),
        cmocka_unit_test(test_split_graph_cli_writes_dot_and_svg),
        cmocka_unit_test(test_split_graph_cli_refuses_run_without_graph),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
