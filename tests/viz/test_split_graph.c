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
    assert_non_null(strstr(dot, "label=\"split 0 · GPU0\\ninputs: inp\""));
    assert_non_null(strstr(dot, "label=\"split 1 · GPU1\\ninputs: layers_a\""));
    assert_non_null(strstr(dot, "label=\"split 2 · CPU\\ninputs: layers_b\""));
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
    assert_int_equal(vt_count(dot, " -> "), 7);
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
    assert_int_equal(vt_count(svg, "class=\"node\""), 8);
    assert_int_equal(vt_count(svg, "class=\"edge\""), 7);
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
        cmocka_unit_test(test_split_graph_render_svg_in_memory),
        cmocka_unit_test(test_split_graph_cli_writes_dot_and_svg),
        cmocka_unit_test(test_split_graph_cli_refuses_run_without_graph),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
