/*
 * bench_viz.c -- how long the pictures take: a split graph of N nodes laid
 * out and rendered as SVG by Graphviz (every node drawn, --full), and a
 * timeline of M statements collected and drawn by gnuplot (the default
 * format: PNG with sub-pixel boxes merged beyond 50 k boxes). Targets on a
 * 2-core machine: 1000 nodes <= 3 s, 100 k statements <= 5 s.
 *
 * usage: bench_viz [--nodes N] [--stmts M]
 */
#include "viz/viz.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A llama-like split graph: splits alternating over two GPUs and the CPU,
 * each a chain with a weight per matmul, split inputs copied in 2 slots. */
static void make_graph(size_t n, trace_graph *g, char ***names)
{
    static const char *const backends[] = { "GPU0", "GPU1", "CPU" };
    static const char *const ops[] = { "mul_mat", "add", "rms_norm", "mul", "rope", "softmax" };
    size_t per_split = 100, n_splits = (n + per_split - 1) / per_split;
    g->nodes = calloc(n, sizeof *g->nodes);
    g->edges = calloc(3 * n, sizeof *g->edges);
    g->splits = calloc(n_splits, sizeof *g->splits);
    *names = calloc(n, sizeof **names);
    for (size_t i = 0; i < n; i++) {
        size_t s = i / per_split, k = i % per_split;
        char buf[64];
        bool weight = k % 5 == 1, copy = k == 0 || k == 1;
        snprintf(buf, sizeof buf, copy ? "in%zu#%zu" : weight ? "blk.%zu.w%zu" : "l%zu.t%zu", s, k);
        (*names)[i] = strdup(buf);
        g->nodes[i] = (trace_graph_node){
            .id = (int64_t)i, .name = (*names)[i], .op = copy ? "cpy" : weight ? "leaf" : ops[k % 6],
            .shape = "4096 f32", .backend = backends[s % 3], .split = (int64_t)s,
            .cause = "pass 1: op follows its weight", .copy_slot = copy ? (int64_t)k : -1,
            .flags = copy ? TRACE_NODE_COPY : weight ? TRACE_NODE_WEIGHT : 0,
        };
        if (k >= 3 && !weight)
            g->edges[g->n_edges++] = (trace_graph_edge){ (int64_t)i - (k % 5 == 2 ? 2 : 1), (int64_t)i, "data" };
        if (k % 5 == 2)
            g->edges[g->n_edges++] = (trace_graph_edge){ (int64_t)i - 1, (int64_t)i, "data" };
        if (copy && s > 0)
            g->edges[g->n_edges++] = (trace_graph_edge){ (int64_t)(i - k - 1), (int64_t)i, "copy" };
        if (k == 3 && s > 0)
            g->edges[g->n_edges++] = (trace_graph_edge){ (int64_t)(i - 3), (int64_t)i, "input" };
    }
    for (size_t s = 0; s < n_splits; s++)
        g->splits[g->n_splits++] = (trace_graph_split){ (int64_t)s, backends[s % 3],
                                                        (int64_t)(s * per_split), (int64_t)per_split, NULL };
    g->n_nodes = n;
}

/* M statements: a host submitting copies and kernels to 4 streams on 2
 * devices, with an event record/wait pair and a host sync now and then. */
static trace *make_trace(uint64_t m)
{
    trace *t = trace_new();
    trace_add_queue(t, trace_intern_cstr(t, "host"), TRACE_QUEUE_HOST, TRACE_NONE);
    for (int q = 0; q < 4; q++) {
        char name[16], dev[8];
        snprintf(name, sizeof name, "s%d", q);
        snprintf(dev, sizeof dev, "%d", q / 2);
        trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_STREAM, trace_intern_cstr(t, dev));
    }
    uint32_t k = trace_intern_cstr(t, "kernel"), c = trace_intern_cstr(t, "copy_in"),
             ev = trace_intern_cstr(t, "e");
    int64_t clock[5] = { 0 };
    for (uint64_t i = 0; i < m; i++) {
        trace_stmt s;
        trace_stmt_init(&s);
        uint32_t q = 1 + (uint32_t)(i % 4);
        s.queue = q;
        s.kind = i % 7 == 0 ? TRACE_COPY : TRACE_OP;
        s.label = s.kind == TRACE_COPY ? c : k;
        if (i % 997 == 5) {
            s.kind = TRACE_RECORD;
            s.object = ev;
            s.label = TRACE_NONE;
        } else if (i % 997 == 6) {
            s.kind = TRACE_WAIT;
            s.object = ev;
            s.label = TRACE_NONE;
        } else if (i % 5003 == 0) {
            s.queue = 0;
            s.kind = TRACE_SYNC;
            s.sync_scope = TRACE_SYNC_ALL;
            s.label = TRACE_NONE;
        }
        s.dur = s.kind == TRACE_OP ? 4000 + (int64_t)(i % 13) * 300 : 1500;
        s.t = clock[s.queue];
        clock[s.queue] += s.dur + 200;
        trace_append(t, &s);
    }
    return t;
}

int main(int argc, char **argv)
{
    size_t nodes = 1000;
    uint64_t stmts = 100000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nodes") == 0)
            nodes = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--stmts") == 0)
            stmts = strtoull(argv[i + 1], NULL, 10);
    }
    trace_error err = { 0 };

    trace_graph g = { 0 };
    char **names = NULL;
    make_graph(nodes, &g, &names);
    viz_graph_opts full = { .full = true };
    char *svg = NULL;
    size_t len = 0;
    double t0 = now();
    if (viz_graph_render(&g, &full, "svg", NULL, &svg, &len, &err) != 0) {
        fprintf(stderr, "bench_viz: %s\n", err.msg);
        return 1;
    }
    double t_full = now() - t0;
    free(svg);
    t0 = now();
    if (viz_graph_render(&g, NULL, "svg", NULL, &svg, &len, &err) != 0) {
        fprintf(stderr, "bench_viz: %s\n", err.msg);
        return 1;
    }
    double t_sum = now() - t0;
    free(svg);
    printf("split graph, %zu nodes, %zu edges, %zu splits: SVG every node %.2f s, one node per "
           "split %.3f s\n", g.n_nodes, g.n_edges, g.n_splits, t_full, t_sum);
    for (size_t i = 0; i < nodes; i++)
        free(names[i]);
    free(names);
    free(g.nodes);
    free(g.edges);
    free(g.splits);

    if (!viz_gnuplot_available()) {
        printf("timeline: skipped (gnuplot is not installed)\n");
        return 0;
    }
    trace *t = make_trace(stmts);
    t0 = now();
    trace_reader r;
    trace_reader_memory(&r, t);
    viz_timeline_opts o = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE, .no_findings = true };
    viz_timeline *tl = NULL;
    if (viz_timeline_collect(&r, &o, &tl, &err) != 0) {
        fprintf(stderr, "bench_viz: %s\n", err.msg);
        return 1;
    }
    trace_reader_close(&r);
    double t_collect = now() - t0;
    char *pic = NULL;
    const char *format = viz_timeline_default_format(tl);
    if (viz_timeline_render(tl, format, NULL, &pic, &len, &err) != 0) {
        fprintf(stderr, "bench_viz: %s\n", err.msg);
        return 1;
    }
    double t_total = now() - t0;
    printf("timeline, %llu statements: %zu boxes drawn (%s), collect %.3f s, total with gnuplot "
           "%.2f s, %s %zu bytes\n", (unsigned long long)stmts, viz_timeline_boxes(tl),
           viz_timeline_merged(tl) ? "sub-pixel boxes merged" : "not merged", t_collect, t_total,
           format, len);
    free(pic);
    viz_timeline_free(tl);
    trace_free(t);
    return 0;
}
