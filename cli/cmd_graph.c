/*
 * cmd_graph.c -- `syncsim graph DB [--run N] [-o FILE] [--full]`: draws the
 * split graph a run stored, through Graphviz in-process (viz/graph.c).
 */
#include "cli.h"
#include "viz/viz.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_graph_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim graph DB [--run N] [-o FILE.svg|FILE.png|FILE.dot] [--full]\n"
            "\n"
            "Draws the split graph that the scheduler stored with run N of DB (default: the\n"
            "latest run; for a replay, the run it replays): one cluster per split, titled\n"
            "with its backend and inputs; nodes filled with their backend's colour and\n"
            "labelled with op and shape; copies of split inputs as arrow shapes with their\n"
            "pipeline slot, reached by dashed orange edges; thick red edges where a node\n"
            "reads its split's copy of an input. Hover a node in the SVG for why it went to\n"
            "its backend. Names starting d: are the decode graph's, p: the prompt graph's.\n"
            "\n"
            "Unless --full, runs of %d or more alike layers (names like d:l17.q, the number\n"
            "taken out) keep their first and last layer and draw the others as one box per\n"
            "split, and above %d nodes drawn the graph is drawn one node per split. A tensor\n"
            "read all over the graph (kq_mask, inp_pos) is drawn once, with '↳ name'\n"
            "stand-ins near its far readers. The legend and the output line say what was\n"
            "collapsed. Laid out by Graphviz's dot, in-process; 80 layers --full in ~3 s.\n"
            "\n"
            "Options:\n"
            "  -r, --run N        the run to draw (default: the latest)\n"
            "  -o, --output FILE  the picture: .svg (default splits.svg), .png, .pdf, or .dot\n"
            "                     (the DOT text, not laid out)\n"
            "      --full         draw every node, however many; collapse no layer\n"
            "\n"
            "Examples:\n"
            "  syncsim run -o run.db && syncsim graph run.db -o splits.svg\n"
            "  syncsim graph run.db --run 1 -o splits.dot\n"
            "  syncsim run --model llama:n_layer=32 -o big.db && syncsim graph big.db --full -o all.svg\n",
            VIZ_GRAPH_COLLAPSE_MIN, VIZ_GRAPH_NODE_LIMIT);
}

int cmd_graph(int argc, char **argv)
{
    enum { OPT_FULL = 256 };
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "output", required_argument, NULL, 'o' },
        { "full", no_argument, NULL, OPT_FULL },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0;
    const char *output = "splits.svg";
    viz_graph_opts opts = { 0 };
    int c;
    while ((c = cli_getopt("graph", argc, argv, ":r:o:", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("graph", optarg, &run) != 0)
                return 2;
            break;
        case 'o':
            output = optarg;
            break;
        case OPT_FULL:
            opts.full = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *db = cli_trace_arg("graph", argc, argv, optind);
    if (!db)
        return 2;
    const char *format = viz_graph_format_of(output);
    if (!format)
        return cli_usage_error("graph", "%s: the picture's name must end in .svg, .png, .pdf or "
                               ".dot", output);
    if (cli_output_check("graph", output, db) != 0)
        return 2;
    trace_error err = { 0 };
    trace_source src;
    trace_source_opts so = { .run = (int64_t)run, .as_recorded = true };
    if (cli_open("graph", db, &so, &src) != 0)
        return 2;
    if (!src.store) {
        cli_error("graph", "%s: a %s has no split graph (a run's split graph is stored by "
                  "'syncsim run')", db, src.format->name);
        trace_source_close(&src);
        return 2;
    }
    int64_t run_id = src.run;
    trace_graph g = { 0 };
    int grc = trace_store_graph(src.store, run_id, &g, &err);
    /* A replay has no graph of its own: draw the run it replays. */
    const char *from = trace_get_meta(src.reader.trace, "source_run");
    if (grc == 0 && g.n_nodes == 0 && from) {
        char *end;
        long long r0 = strtoll(from, &end, 10);
        if (!*end && r0 > 0 && r0 != run_id) {
            run_id = r0;
            grc = trace_store_graph(src.store, run_id, &g, &err);
        }
    }
    trace_source_close(&src);
    if (grc != 0)
        return cli_error("graph", "%s", err.msg);
    if (g.n_nodes == 0) {
        trace_graph_free(&g);
        return cli_error("graph", "%s: run %lld has no split graph (tables graph_nodes, "
                         "graph_splits are empty for it)", db, (long long)run_id);
    }
    char title[512];
    snprintf(title, sizeof title, "%s, run %lld: %zu nodes in %zu splits", db, (long long)run_id,
             g.n_nodes, g.n_splits);
    opts.title = title;
    int rc = viz_graph_render(&g, &opts, format, output, NULL, NULL, &err);
    viz_graph_drawing d = { 0 };
    if (rc == 0 && viz_graph_describe(&g, &opts, &d) != 0)
        d.view = VIZ_GRAPH_EVERY_NODE; /* out of memory: say no more than the counts */
    size_t n_nodes = g.n_nodes, n_splits = g.n_splits;
    trace_graph_free(&g);
    if (rc != 0)
        return cli_error("graph", "%s", err.msg);
    printf("%s: %zu nodes in %zu splits", output, n_nodes, n_splits);
    if (d.view == VIZ_GRAPH_PER_SPLIT)
        printf(", drawn one node per split (--full for every node)");
    else if (d.view == VIZ_GRAPH_COLLAPSED)
        printf(", %zu drawn; %zu repeated layers (%zu nodes) collapsed into %zu placeholder%s "
               "(--full for every node)",
               d.nodes, d.layers_collapsed, d.nodes_collapsed, d.placeholders,
               d.placeholders == 1 ? "" : "s");
    if (d.proxies)
        printf("; %zu \"↳ name\" stand-in%s for tensors read far from where they are drawn",
               d.proxies, d.proxies == 1 ? "" : "s");
    putchar('\n');
    return 0;
}
