/*
 * graph.c -- the split graph as DOT, laid out and rendered in-process by
 * Graphviz (libgvc).
 *
 * The picture. The scheduler stores its split graph beside the run
 * (graph_nodes, graph_edges, graph_splits; docs/trace-schema.md). We draw:
 *
 *   - one cluster per split, labelled "split K · BACKEND" and the names of
 *     its inputs; the cluster is tinted with its backend's colour;
 *   - nodes filled with their backend's colour, labelled with the tensor's
 *     name, op and shape; the tooltip says why the node went to its backend
 *     (the scheduler's assignment pass and reason);
 *   - copies the scheduler made of split inputs as "cds" shapes (an arrow
 *     box) labelled with their pipeline copy slot ("copy slot 1");
 *   - graph inputs as inverted houses, weights as notes, outputs with a
 *     double border; they stand outside the clusters unless a split holds
 *     them;
 *   - edges by kind: "data" grey, "input" (into a split from another one)
 *     thick red, "copy" (a source to its copy) dashed orange.
 *
 * Backends get colours in the order they first appear; a backend named
 * like a CPU is always grey so that "offloaded" reads as colour.
 *
 * Above a node limit (VIZ_GRAPH_NODE_LIMIT) dot's layout gets slow and the
 * picture unreadable, so unless asked for the full graph we draw one node
 * per split (its op counts in the label) and one edge per pair of splits
 * that exchange inputs, labelled with the number of tensors crossing.
 *
 * We write the DOT text ourselves (it is also what `-o x.dot` writes and
 * what the tests read) and hand it to Graphviz with agmemread; the text is
 * deterministic for a given graph.
 */
#include "viz/viz.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#define MAX_BACKENDS 16

static const char *const backend_fill[] = {
    "#9ecae9", "#ffbf79", "#8cd17d", "#ff9d9a", "#d4a6c8", "#f1ce63", "#86bcb6", "#b6992d",
};
#define CPU_FILL "#d9d9d9"

typedef struct palette {
    const char *names[MAX_BACKENDS];
    size_t n;
} palette;

static bool is_cpu_name(const char *b)
{
    return b && strncasecmp(b, "cpu", 3) == 0;
}

static const char *backend_colour(palette *p, const char *b)
{
    if (!b || !*b)
        return "#ffffff";
    if (is_cpu_name(b))
        return CPU_FILL;
    size_t i = 0, gpu = 0;
    for (; i < p->n; i++) {
        if (strcmp(p->names[i], b) == 0)
            break;
        if (!is_cpu_name(p->names[i]))
            gpu++;
    }
    if (i == p->n && p->n < MAX_BACKENDS)
        p->names[p->n++] = b;
    return backend_fill[gpu % (sizeof backend_fill / sizeof backend_fill[0])];
}

/* ------------------------------------------------------------------ */
/* Node lookup by id.                                                  */

typedef struct id_index {
    int64_t id;
    size_t idx;
} id_index;

static int id_cmp(const void *a, const void *b)
{
    int64_t x = ((const id_index *)a)->id, y = ((const id_index *)b)->id;
    return x < y ? -1 : x > y;
}

static id_index *index_nodes(const trace_graph *g)
{
    id_index *ix = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *ix);
    if (!ix)
        return NULL;
    for (size_t i = 0; i < g->n_nodes; i++)
        ix[i] = (id_index){ g->nodes[i].id, i };
    qsort(ix, g->n_nodes, sizeof *ix, id_cmp);
    return ix;
}

static const trace_graph_node *find_node(const trace_graph *g, const id_index *ix, int64_t id)
{
    id_index key = { id, 0 };
    const id_index *hit = bsearch(&key, ix, g->n_nodes, sizeof *ix, id_cmp);
    return hit ? &g->nodes[hit->idx] : NULL;
}

bool viz_graph_summarised(const trace_graph *g, const viz_graph_opts *o)
{
    size_t limit = o && o->node_limit ? o->node_limit : VIZ_GRAPH_NODE_LIMIT;
    return !(o && o->full) && g->n_nodes > limit && g->n_splits > 0;
}

static const char *split_backend(const trace_graph *g, int64_t split)
{
    for (size_t i = 0; i < g->n_splits; i++)
        if (g->splits[i].id == split)
            return g->splits[i].backend;
    return NULL;
}

static void write_header(FILE *out, const viz_graph_opts *o, bool summary)
{
    fputs("digraph splits {\n"
          "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, newrank=true, "
          "nodesep=0.25, ranksep=0.35, labelloc=t, labeljust=l",
          out);
    fputs(", label=\"", out);
    if (o && o->title) {
        viz_quote_escape(out, o->title);
        fputs("\\n", out);
    }
    if (summary)
        fputs("one node per split (run with --full for every node); red edges: tensors "
              "copied into a split from another one",
              out);
    else
        fputs("boxes: clusters are splits; fill = backend; arrow shapes = copies of split "
              "inputs (one per pipeline slot); red edges cross splits; dashed orange: copies",
              out);
    fputs("\"];\n"
          "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\", "
          "margin=\"0.08,0.03\", height=0.3];\n"
          "  edge [color=\"#555555\", arrowsize=0.6];\n",
          out);
}

/* ------------------------------------------------------------------ */
/* The full graph.                                                     */

static void write_node(FILE *out, const trace_graph_node *n, palette *pal)
{
    bool copy = n->flags & TRACE_NODE_COPY;
    fprintf(out, "    n%lld [", (long long)n->id);
    if (copy)
        fputs("shape=cds, style=\"filled\", ", out);
    else if (n->flags & TRACE_NODE_INPUT)
        fputs("shape=invhouse, style=\"filled\", ", out);
    else if (n->flags & TRACE_NODE_WEIGHT) /* many, and not what the eye should follow */
        fprintf(out, "shape=note, style=\"filled\", fontcolor=\"#555555\", color=\"%s\", "
                     "penwidth=1.5, ", backend_colour(pal, n->backend));
    if (n->flags & TRACE_NODE_OUTPUT)
        fputs("peripheries=2, ", out);
    fputs("label=\"", out);
    viz_quote_escape(out, n->name);
    fputs("\\n", out);
    if (copy && n->copy_slot >= 0)
        fprintf(out, "copy slot %lld", (long long)n->copy_slot);
    else
        viz_quote_escape(out, n->op);
    if (n->shape && *n->shape) {
        fputs(copy ? "\\n" : " ", out);
        viz_quote_escape(out, n->shape);
    }
    fprintf(out, "\", fillcolor=\"%s\", tooltip=\"",
            (n->flags & TRACE_NODE_WEIGHT) && !copy ? "#ffffff" : backend_colour(pal, n->backend));
    viz_quote_escape(out, n->name);
    fputs(": ", out);
    viz_quote_escape(out, n->op);
    fputs(" on ", out);
    viz_quote_escape(out, n->backend && *n->backend ? n->backend : "(no backend)");
    if (n->cause && *n->cause) {
        fputs("\\nassigned by ", out);
        viz_quote_escape(out, n->cause);
    }
    fputs("\"];\n", out);
}

/* The inputs of a split as node names ("x, y"), from its comma-separated ids. */
static void write_split_inputs(FILE *out, const trace_graph *g, const id_index *ix,
                               const char *inputs)
{
    const char *p = inputs;
    int shown = 0;
    while (p && *p) {
        char *end;
        long long id = strtoll(p, &end, 10);
        if (end == p)
            break;
        const trace_graph_node *n = find_node(g, ix, id);
        if (shown == 6) {
            fputs(", ...", out);
            break;
        }
        fputs(shown++ ? ", " : "\\ninputs: ", out);
        if (n)
            viz_quote_escape(out, n->name);
        else
            fprintf(out, "#%lld", id);
        p = *end == ',' ? end + 1 : end;
    }
}

static void write_full(FILE *out, const trace_graph *g, const id_index *ix, palette *pal)
{
    for (size_t s = 0; s < g->n_splits; s++) {
        const trace_graph_split *sp = &g->splits[s];
        fprintf(out, "  subgraph cluster_s%lld {\n    label=\"split %lld · ", (long long)sp->id,
                (long long)sp->id);
        viz_quote_escape(out, sp->backend);
        write_split_inputs(out, g, ix, sp->inputs);
        fprintf(out, "\";\n    style=\"rounded,filled\"; color=\"#888888\"; "
                     "fillcolor=\"%s40\"; fontsize=11;\n    tooltip=\"split %lld on ",
                backend_colour(pal, sp->backend), (long long)sp->id);
        viz_quote_escape(out, sp->backend);
        fprintf(out, ", %lld nodes\";\n", (long long)sp->n_nodes);
        for (size_t i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].split == sp->id)
                write_node(out, &g->nodes[i], pal);
        fputs("  }\n", out);
    }
    /* Nodes in no split (inputs, weights) and in splits the graph does not list. */
    for (size_t i = 0; i < g->n_nodes; i++) {
        const trace_graph_node *n = &g->nodes[i];
        if (n->split < 0 || !split_backend(g, n->split))
            write_node(out, n, pal);
    }
    for (size_t i = 0; i < g->n_edges; i++) {
        const trace_graph_edge *e = &g->edges[i];
        if (!find_node(g, ix, e->src) || !find_node(g, ix, e->dst))
            continue;
        fprintf(out, "  n%lld -> n%lld", (long long)e->src, (long long)e->dst);
        if (e->kind && strcmp(e->kind, "input") == 0)
            fputs(" [color=\"#d62728\", penwidth=2.2, tooltip=\"split input\"]", out);
        else if (e->kind && strcmp(e->kind, "copy") == 0)
            fputs(" [color=\"#ff7f0e\", style=dashed, penwidth=1.5, tooltip=\"copy\"]", out);
        fputs(";\n", out);
    }
}

/* ------------------------------------------------------------------ */
/* One node per split.                                                 */

/* Groups of the summary: splits by index, then "graph inputs" and
 * "weights" for nodes in no split. */
static long group_of(const trace_graph *g, const trace_graph_node *n)
{
    if (n->split >= 0)
        for (size_t s = 0; s < g->n_splits; s++)
            if (g->splits[s].id == n->split)
                return (long)s;
    return (long)g->n_splits + ((n->flags & TRACE_NODE_WEIGHT) ? 1 : 0);
}

typedef struct op_count {
    const char *op;
    size_t n;
} op_count;

static int op_count_cmp(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? 1 : -1;
    return strcmp(x->op, y->op);
}

typedef struct group_edge {
    long src, dst;
} group_edge;

static int group_edge_cmp(const void *a, const void *b)
{
    const group_edge *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return (x->dst > y->dst) - (x->dst < y->dst);
}

static int write_summary(FILE *out, const trace_graph *g, const id_index *ix, palette *pal)
{
    size_t n_groups = g->n_splits + 2;
    long *group = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *group);
    size_t *count = calloc(n_groups, sizeof *count);
    op_count *ops = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *ops);
    group_edge *ge = malloc((g->n_edges ? g->n_edges : 1) * sizeof *ge);
    int rc = -1;
    if (!group || !count || !ops || !ge)
        goto out;
    for (size_t i = 0; i < g->n_nodes; i++) {
        group[i] = group_of(g, &g->nodes[i]);
        count[group[i]]++;
    }
    for (size_t s = 0; s < n_groups; s++) {
        if (!count[s])
            continue;
        /* Op counts of the group, most frequent first. */
        size_t n_ops = 0;
        for (size_t i = 0; i < g->n_nodes; i++) {
            if (group[i] != (long)s)
                continue;
            const char *op = g->nodes[i].op ? g->nodes[i].op : "?";
            size_t k = 0;
            while (k < n_ops && strcmp(ops[k].op, op) != 0)
                k++;
            if (k == n_ops)
                ops[n_ops++] = (op_count){ op, 0 };
            ops[k].n++;
        }
        qsort(ops, n_ops, sizeof *ops, op_count_cmp);
        if (s < g->n_splits) {
            const trace_graph_split *sp = &g->splits[s];
            fprintf(out, "  g%zu [label=\"split %lld · ", s, (long long)sp->id);
            viz_quote_escape(out, sp->backend);
            fprintf(out, "\\n%zu nodes: ", count[s]);
        } else {
            fprintf(out, "  g%zu [shape=%s, label=\"%s\\n%zu: ", s,
                    s == g->n_splits ? "invhouse" : "note",
                    s == g->n_splits ? "graph inputs" : "weights", count[s]);
        }
        for (size_t k = 0; k < n_ops && k < 4; k++) {
            fputs(k ? ", " : "", out);
            viz_quote_escape(out, ops[k].op);
            fprintf(out, " x%zu", ops[k].n);
        }
        if (n_ops > 4)
            fputs(", ...", out);
        fprintf(out, "\", fillcolor=\"%s\", tooltip=\"",
                s < g->n_splits ? backend_colour(pal, g->splits[s].backend) : "#ffffff");
        if (s < g->n_splits) {
            fprintf(out, "split %lld on ", (long long)g->splits[s].id);
            viz_quote_escape(out, g->splits[s].backend);
        } else {
            fputs("nodes in no split", out);
        }
        fputs("\"];\n", out);
    }
    /* One edge per pair of groups, labelled with the tensors crossing. */
    size_t n_ge = 0;
    for (size_t i = 0; i < g->n_edges; i++) {
        const trace_graph_node *a = find_node(g, ix, g->edges[i].src);
        const trace_graph_node *b = find_node(g, ix, g->edges[i].dst);
        if (!a || !b)
            continue;
        long ga = group[a - g->nodes], gb = group[b - g->nodes];
        if (ga != gb)
            ge[n_ge++] = (group_edge){ ga, gb };
    }
    qsort(ge, n_ge, sizeof *ge, group_edge_cmp);
    for (size_t i = 0; i < n_ge;) {
        size_t j = i;
        while (j < n_ge && ge[j].src == ge[i].src && ge[j].dst == ge[i].dst)
            j++;
        bool into_split = ge[i].dst < (long)g->n_splits && ge[i].src < (long)g->n_splits;
        fprintf(out, "  g%ld -> g%ld [label=\"%zu\"%s];\n", ge[i].src, ge[i].dst, j - i,
                into_split ? ", color=\"#d62728\", penwidth=2.2" : "");
        i = j;
    }
    rc = 0;
out:
    free(group);
    free(count);
    free(ops);
    free(ge);
    return rc;
}

int viz_graph_dot(FILE *out, const trace_graph *g, const viz_graph_opts *o)
{
    id_index *ix = index_nodes(g);
    if (!ix)
        return -1;
    palette pal = { { 0 }, 0 };
    /* Colours follow the order of the splits, so the first GPU is blue. */
    for (size_t s = 0; s < g->n_splits; s++)
        backend_colour(&pal, g->splits[s].backend);
    bool summary = viz_graph_summarised(g, o);
    write_header(out, o, summary);
    int rc = 0;
    if (summary)
        rc = write_summary(out, g, ix, &pal);
    else
        write_full(out, g, ix, &pal);
    fputs("}\n", out);
    free(ix);
    if (rc == 0 && ferror(out))
        rc = -1;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Rendering.                                                          */

const char *viz_graph_format_of(const char *path)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot)
        return NULL;
    static const char *const known[][2] = {
        { ".svg", "svg" }, { ".png", "png" }, { ".pdf", "pdf" }, { ".dot", "dot" }, { ".gv", "dot" },
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcasecmp(dot, known[i][0]) == 0)
            return known[i][1];
    return NULL;
}

int viz_graph_render(const trace_graph *g, const viz_graph_opts *o, const char *format,
                     const char *path, char **data, size_t *len, trace_error *err)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *mem = open_memstream(&text, &text_len);
    if (!mem)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    int rc = viz_graph_dot(mem, g, o);
    if (fclose(mem) != 0 || rc != 0) {
        free(text);
        return trace_error_set(err, TRACE_ENOMEM, "out of memory writing the DOT text"), -1;
    }
    if (strcmp(format, "dot") == 0) {
        if (path) {
            rc = trace_out_write(path, text, text_len, err);
            free(text);
            return rc;
        }
        *data = text;
        *len = text_len;
        return 0;
    }

    GVC_t *gvc = gvContext();
    if (!gvc) {
        free(text);
        return trace_error_set(err, TRACE_ENOMEM, "Graphviz: cannot create a context"), -1;
    }
    agseterr(AGMAX); /* our DOT is well-formed; keep Graphviz's warnings off stderr */
    Agraph_t *ag = agmemread(text);
    free(text);
    char *out = NULL;
    unsigned int out_len = 0;
    rc = -1;
    if (!ag) {
        trace_error_set(err, TRACE_EUSAGE, "Graphviz could not read the split graph's DOT text");
        goto done;
    }
    if (gvLayout(gvc, ag, "dot") != 0) {
        trace_error_set(err, TRACE_EUSAGE, "Graphviz: the dot layout failed (is the graphviz "
                        "package with its plugins installed?)");
        goto done;
    }
    if (gvRenderData(gvc, ag, format, &out, &out_len) != 0 || !out) {
        trace_error_set(err, TRACE_EUSAGE, "Graphviz cannot render format '%s'", format);
        gvFreeLayout(gvc, ag);
        goto done;
    }
    gvFreeLayout(gvc, ag);
    if (path) {
        rc = trace_out_write(path, out, out_len, err);
    } else {
        *data = malloc((size_t)out_len + 1);
        if (!*data) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
        } else {
            memcpy(*data, out, out_len);
            (*data)[out_len] = '\0';
            *len = out_len;
            rc = 0;
        }
    }
    gvFreeRenderData(out);
done:
    if (ag)
        agclose(ag);
    gvFreeContext(gvc);
    return rc;
}
