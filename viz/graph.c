/*
 * graph.c -- the split graph as DOT, laid out and rendered in-process by
 * Graphviz (libgvc).
 *
 * The picture. The scheduler stores its split graph beside the run
 * (graph_nodes, graph_edges, graph_splits; docs/trace-schema.md). We draw:
 *
 *   - one cluster per split, titled "split K · BACKEND" and the names of
 *     its inputs; the cluster is tinted with its backend's colour;
 *   - nodes filled with their backend's colour, labelled with the tensor's
 *     name, op and shape; the tooltip says why the node went to its backend
 *     (the scheduler's assignment pass and reason);
 *   - copies the scheduler made of split inputs as "cds" shapes (an arrow
 *     box) labelled with their pipeline copy slot ("copy slot 1"); the
 *     copies of one tensor in one split side by side (rank=same), so that
 *     the slots nobody reads yet do not float to the top of the cluster;
 *   - graph inputs as inverted houses, weights as notes, outputs with a
 *     double border; they stand outside the clusters unless a split holds
 *     them;
 *   - edges by kind: "data" grey, "input" thick red (a node reading a
 *     split input: in a run, from the copy the scheduler made of it),
 *     "copy" dashed orange (a tensor to its copy).
 *
 * The label is the legend: what the shapes and colours mean, what the
 * "d:"/"p:" prefixes of names mean when there are such names (sched/run.c
 * names the decode graph's nodes d:, the prompt graph's p:), and what was
 * collapsed. Lines end in "\l" (left-justified).
 *
 * The plan. Before any DOT is written, plan_build decides what is drawn,
 * in numbered passes over the stored graph:
 *
 *   1. items: one per node; stored edges resolved to node indices;
 *   2. layers: unless --full, repeated layers are found and collapsed;
 *   3. folding: nodes without a layer read only inside collapsed layers
 *      (a layer's weights and caches) go into the same placeholder;
 *   4. edges: stored edges rewired to what draws their ends;
 *   5. proxies: far readers of a much-read tensor get a proxy node.
 *
 * Three views follow (viz_graph_view): every node; collapsed (some layers
 * as placeholders); or, when even the collapsed graph has more than the
 * node limit (VIZ_GRAPH_NODE_LIMIT) nodes, one node per split (its op
 * counts in the label) and one edge per pair of splits that exchange
 * tensors, labelled with how many.
 *
 * Layers. A node's layer is read from its name: the first token "l<digits>"
 * at the start of the name or after a separator (any character that is not
 * a letter or a digit) and followed by a separator or the end, so
 * "d:l17.attn_norm" and "d:l4.attn_norm#GPU1#0" are in layer 17 and 4 of
 * stem "d:", "blk.17.wq" and "all17" in none. A layer is the set of nodes
 * with one stem and number; two layers are alike when their names, the
 * number taken out, are the same multiset. A run of at least
 * VIZ_GRAPH_COLLAPSE_MIN consecutive alike layers of one stem keeps its
 * first and last layer and draws the layers between as one placeholder
 * per split ("layers d:l1 to d:l37: 37 more like d:l0"). Edges into and out
 * of collapsed nodes go to the placeholder, once per (source, target,
 * kind); edges between nodes of one placeholder are dropped. A layer where
 * something differs (the one a split boundary cuts, whose copies carry its
 * number) ends a run, so a picture keeps every place where the schedule
 * changes.
 *
 * Far readers. dot ranks the graph top to bottom and routes every edge
 * through one virtual node per rank it spans; mincross and position are
 * super-linear in those. An 80-layer llama is about 966 ranks deep, and a
 * few tensors -- graph inputs such as kq_mask and inp_pos, and the
 * scheduler's copies of them -- are read in every layer: their edges alone
 * took dot over 100 s. So a much-read tensor is drawn once, with edges to
 * the readers near its first reader, and every other group of near
 * readers gets a proxy node in its own cluster: "↳ name", its tooltip
 * saying where the tensor is drawn and how often it is used, with the
 * edges the readers had (same kind, same style). The rule is at
 * PROXY_FANOUT below. Every stored edge is drawn once, directly or from a
 * proxy (or, collapsed, folded into a placeholder's edge).
 *
 * Titles. Graphviz routes edges around nodes but not around cluster
 * labels, and the dashed copy edges into a split enter at its top, where
 * the label is. So a split's title is a plaintext node of its cluster,
 * kept just above the copies that those edges enter by invisible edges
 * (of the usual weight, which pulls the title down to them: with weight 0
 * it floats to the top of the graph and stretches its cluster up there);
 * edges go round it. Only the copies: they sit at the top of the split,
 * and an invisible edge to a node further down costs dot as much as a
 * visible one (one title edge per node entered from outside took an
 * 80-layer graph from seconds to minutes).
 *
 * We write the DOT text ourselves (it is also what `-o x.dot` writes and
 * what the tests read) and hand it to Graphviz with agmemread; the text is
 * deterministic for a given graph.
 */
#include "viz/viz.h"

#include <ctype.h>
#include <limits.h>
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

/* ------------------------------------------------------------------ */
/* The plan: what is drawn.                                            */

/* Far readers, the rule. A tensor read by more than PROXY_FANOUT nodes
 * keeps direct edges to the readers near its first reader in graph order:
 * in the same split and at most PROXY_NEAR nodes after it. Every other
 * group of near readers (one split, within PROXY_NEAR of the group's first
 * reader) is fed by one proxy in that split's cluster.
 *
 * Why these. An edge costs dot one virtual node per rank it spans, and
 * nodes PROXY_NEAR apart in graph order (a topological order) are at most
 * that many ranks apart, so no kept edge spans more. 32 is a little under
 * one layer of syncsim's llama (42 nodes): there, "near" means "in the same
 * layer" without reading names, and the rule works the same for graphs
 * whose names carry no layer number. A reader in another split is always
 * far: it is drawn in another cluster, often hundreds of ranks down. A
 * tensor read at most PROXY_FANOUT times is left alone: a line reads better
 * than a jump, and the cost comes from the few tensors every layer reads
 * (issue 10's experiment, proxies for the readers of tensors with more
 * than 3 readers: dot on 80 layers from over 100 s to 2.3 s). */
#define PROXY_FANOUT 3
#define PROXY_NEAR 32

/* How an edge is drawn, from its stored kind; other kinds are drawn as data. */
typedef enum edge_style { EDGE_DATA, EDGE_INPUT, EDGE_COPY } edge_style;

static edge_style style_of(const char *kind)
{
    if (kind && strcmp(kind, "input") == 0)
        return EDGE_INPUT;
    if (kind && strcmp(kind, "copy") == 0)
        return EDGE_COPY;
    return EDGE_DATA;
}

typedef enum item_kind { ITEM_NODE, ITEM_PLACEHOLDER, ITEM_PROXY } item_kind;

/* One node of the picture. Items [0, g->n_nodes) are g's nodes, in g's
 * order; placeholders and proxies follow. */
typedef struct item {
    item_kind kind;
    long split;         /* index in g->splits of the cluster holding it; -1: none */
    int64_t order;      /* place in graph order: a node's id, a placeholder's first
                         * node's, a proxy's first reader's */
    size_t into;        /* NODE: the item drawing it (itself, or a placeholder) */
    size_t of;          /* PLACEHOLDER: its run; PROXY: the item it stands for */
    size_t nth;         /* PROXY: 1, 2, ... among the proxies of one item */
    long first, last;   /* PLACEHOLDER: the layers it holds */
    size_t members;     /* PLACEHOLDER: nodes of those layers in its split */
    size_t folded;      /* PLACEHOLDER: nodes without a layer read only there */
    size_t uses;        /* PROXY: stored edges leaving the tensor */
    size_t first_reader;/* PROXY: the item reading the tensor first (drawn beside it) */
} item;

typedef struct drawn_edge {
    size_t src, dst;    /* items */
    edge_style style;
    size_t count;       /* stored edges it stands for; 0: merged into another */
} drawn_edge;

/* Consecutive alike layers of one stem: first and last drawn, the layers
 * between collapsed. */
typedef struct layer_run {
    const char *name;   /* a node of the first layer; the stem is name[0, stem_len) */
    size_t stem_len;
    long first, last;
} layer_run;

typedef struct plan {
    viz_graph_view view;
    item *items;
    size_t n_items, cap_items;
    size_t *src, *dst;  /* per stored edge: node indices; SIZE_MAX: an unknown id */
    long *layer;        /* per node: its layer number; -1: none */
    drawn_edge *edges;
    size_t n_edges;
    layer_run *runs;
    size_t n_runs;
    size_t n_drawn, n_placeholders, n_proxies, n_collapsed, n_layers_collapsed;
} plan;

static void plan_free(plan *p)
{
    free(p->items);
    free(p->src);
    free(p->dst);
    free(p->layer);
    free(p->edges);
    free(p->runs);
    memset(p, 0, sizeof *p);
}


/* Appends an item; returns its index, or SIZE_MAX when out of memory. */
static size_t add_item(plan *p, item it)
{
    if (trace_grow((void **)&p->items, &p->cap_items, p->n_items + 1, sizeof *p->items) != 0)
        return SIZE_MAX;
    p->items[p->n_items] = it;
    return p->n_items++;
}

static bool is_drawn(const plan *p, size_t i)
{
    return p->items[i].kind != ITEM_NODE || p->items[i].into == i;
}

/* Pass 1: one item per node, in its split's cluster (-1 when the node is in
 * no split or in one the graph does not list); stored edges resolved. */
static int plan_items(const trace_graph *g, const id_index *ix, plan *p)
{
    size_t n = g->n_nodes ? g->n_nodes : 1, m = g->n_edges ? g->n_edges : 1;
    id_index *splits = malloc((g->n_splits ? g->n_splits : 1) * sizeof *splits);
    p->src = malloc(m * sizeof *p->src);
    p->dst = malloc(m * sizeof *p->dst);
    p->layer = malloc(n * sizeof *p->layer);
    if (!splits || !p->src || !p->dst || !p->layer ||
        trace_grow((void **)&p->items, &p->cap_items, g->n_nodes, sizeof *p->items) != 0) {
        free(splits);
        return -1;
    }
    for (size_t s = 0; s < g->n_splits; s++)
        splits[s] = (id_index){ g->splits[s].id, s };
    qsort(splits, g->n_splits, sizeof *splits, id_cmp);
    for (size_t i = 0; i < g->n_nodes; i++) {
        id_index key = { g->nodes[i].split, 0 };
        const id_index *hit = g->nodes[i].split >= 0
                                  ? bsearch(&key, splits, g->n_splits, sizeof *splits, id_cmp)
                                  : NULL;
        p->items[i] = (item){ .kind = ITEM_NODE, .split = hit ? (long)hit->idx : -1,
                              .order = g->nodes[i].id, .into = i };
        p->layer[i] = -1;
    }
    p->n_items = g->n_nodes;
    for (size_t k = 0; k < g->n_edges; k++) {
        const trace_graph_node *a = find_node(g, ix, g->edges[k].src);
        const trace_graph_node *b = find_node(g, ix, g->edges[k].dst);
        p->src[k] = a && b ? (size_t)(a - g->nodes) : SIZE_MAX;
        p->dst[k] = a && b ? (size_t)(b - g->nodes) : SIZE_MAX;
    }
    free(splits);
    return 0;
}

/* A node's layer as its name gives it (see the head comment): the stem
 * before the token, the number, and the rest of the name after it. */
typedef struct layer_name {
    const char *name;
    size_t stem_len;
    long number;
    const char *rest;
    size_t node;
} layer_name;

static bool layer_of(const char *name, layer_name *out)
{
    for (const char *t = name; t && *t; t++) {
        if (*t != 'l' || (t > name && isalnum((unsigned char)t[-1])))
            continue;
        const char *d = t + 1, *end = d;
        while (isdigit((unsigned char)*end) && end - d < 9) /* 9 digits cannot overflow */
            end++;
        if (end == d || isalnum((unsigned char)*end))
            continue;
        *out = (layer_name){ name, (size_t)(t - name), strtol(d, NULL, 10), end, 0 };
        return true;
    }
    return false;
}

static bool same_stem(const layer_name *x, const layer_name *y)
{
    return x->stem_len == y->stem_len && memcmp(x->name, y->name, x->stem_len) == 0;
}

/* By stem, layer, rest of the name, node: each layer's names together, sorted. */
static int layer_name_cmp(const void *a, const void *b)
{
    const layer_name *x = a, *y = b;
    if (x->stem_len != y->stem_len)
        return x->stem_len < y->stem_len ? -1 : 1;
    int c = memcmp(x->name, y->name, x->stem_len);
    if (c)
        return c;
    if (x->number != y->number)
        return x->number < y->number ? -1 : 1;
    c = strcmp(x->rest, y->rest);
    if (c)
        return c;
    return (x->node > y->node) - (x->node < y->node);
}

/* Layers a and b (runs of ln: [a, a + na), [b, b + nb)) have the same names
 * once their numbers are taken out. */
static bool layers_alike(const layer_name *ln, size_t a, size_t na, size_t b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t k = 0; k < na; k++)
        if (strcmp(ln[a + k].rest, ln[b + k].rest) != 0)
            return false;
    return true;
}

static int size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The placeholder of run r in split `split`, made when missing. */
static size_t placeholder_of(plan *p, size_t r, long split)
{
    for (size_t i = p->n_items; i-- > 0 && p->items[i].kind == ITEM_PLACEHOLDER;)
        if (p->items[i].of == r && p->items[i].split == split)
            return i;
    size_t i = add_item(p, (item){ .kind = ITEM_PLACEHOLDER, .split = split, .order = INT64_MAX,
                                   .of = r, .first = LONG_MAX, .last = -1 });
    if (i != SIZE_MAX)
        p->n_placeholders++;
    return i;
}

/* Collapses the layers between the first and the last of run r (names
 * ln[start, end) sorted by layer_name_cmp): each node goes into the
 * placeholder of its split. Placeholders are made in graph order. */
static int collapse_run(const trace_graph *g, plan *p, const layer_name *ln, size_t start,
                        size_t end, size_t r)
{
    const layer_run *run = &p->runs[r];
    size_t n = 0;
    size_t *nodes = malloc((end - start) * sizeof *nodes);
    if (!nodes)
        return -1;
    for (size_t k = start; k < end; k++)
        if (ln[k].number > run->first && ln[k].number < run->last)
            nodes[n++] = ln[k].node;
    qsort(nodes, n, sizeof *nodes, size_cmp); /* deterministic placeholder order */
    for (size_t k = 0; k < n; k++) {
        size_t i = nodes[k];
        size_t ph = placeholder_of(p, r, p->items[i].split);
        if (ph == SIZE_MAX) {
            free(nodes);
            return -1;
        }
        item *it = &p->items[ph];
        it->members++;
        it->first = p->layer[i] < it->first ? p->layer[i] : it->first;
        it->last = p->layer[i] > it->last ? p->layer[i] : it->last;
        it->order = g->nodes[i].id < it->order ? g->nodes[i].id : it->order;
        p->items[i].into = ph;
    }
    p->n_collapsed += n;
    p->n_layers_collapsed += (size_t)(run->last - run->first - 1);
    free(nodes);
    return 0;
}

/* Pass 2: every run of at least VIZ_GRAPH_COLLAPSE_MIN consecutive alike
 * layers of one stem is recorded and its inner layers collapsed. */
static int plan_layers(const trace_graph *g, plan *p)
{
    layer_name *ln = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *ln);
    size_t n = 0, cap_runs = 0;
    if (!ln)
        return -1;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (layer_of(g->nodes[i].name, &ln[n])) {
            ln[n].node = i;
            p->layer[i] = ln[n].number;
            n++;
        }
    qsort(ln, n, sizeof *ln, layer_name_cmp);
    /* Walk the layers in order; [run_start, k) holds the names of the run so
     * far, [prev, k) its last layer. */
    size_t run_start = 0, prev = 0, run_layers = 0;
    for (size_t k = 0; k <= n;) {
        size_t e = k;
        while (e < n && same_stem(&ln[e], &ln[k]) && ln[e].number == ln[k].number)
            e++;
        bool extends = k < n && run_layers > 0 && same_stem(&ln[prev], &ln[k]) &&
                       ln[k].number == ln[prev].number + 1 &&
                       layers_alike(ln, prev, k - prev, k, e - k);
        if (!extends) {
            if (run_layers >= VIZ_GRAPH_COLLAPSE_MIN) {
                if (trace_grow((void **)&p->runs, &cap_runs, p->n_runs + 1, sizeof *p->runs) != 0)
                    goto fail;
                p->runs[p->n_runs] = (layer_run){ ln[run_start].name, ln[run_start].stem_len,
                                                  ln[run_start].number, ln[prev].number };
                if (collapse_run(g, p, ln, run_start, k, p->n_runs++) != 0)
                    goto fail;
            }
            if (k == n)
                break;
            run_start = k;
            run_layers = 0;
        }
        run_layers++;
        prev = k;
        k = e;
    }
    free(ln);
    return 0;
fail:
    free(ln);
    return -1;
}

/* Pass 3: a node without a layer whose every reader is collapsed into
 * placeholders of one run goes into the placeholder of its first reader:
 * the weights and caches of collapsed layers ("blk.17.wq" reads as no
 * layer). Nodes are taken readers first (descending graph order), so a
 * chain of such nodes folds whole. */
static int plan_fold(const trace_graph *g, const id_index *ix, plan *p)
{
    size_t *off = calloc(g->n_nodes + 1, sizeof *off);
    size_t *readers = malloc((g->n_edges ? g->n_edges : 1) * sizeof *readers);
    if (!off || !readers) {
        free(off);
        free(readers);
        return -1;
    }
    for (size_t k = 0; k < g->n_edges; k++)
        if (p->src[k] != SIZE_MAX)
            off[p->src[k] + 1]++;
    for (size_t i = 0; i < g->n_nodes; i++)
        off[i + 1] += off[i];
    size_t *fill = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *fill);
    if (!fill) {
        free(off);
        free(readers);
        return -1;
    }
    memcpy(fill, off, g->n_nodes * sizeof *fill);
    for (size_t k = 0; k < g->n_edges; k++)
        if (p->src[k] != SIZE_MAX)
            readers[fill[p->src[k]]++] = p->dst[k];
    free(fill);
    for (size_t x = g->n_nodes; x-- > 0;) {
        size_t i = ix[x].idx;
        if (p->layer[i] >= 0 || p->items[i].into != i || off[i] == off[i + 1])
            continue;
        size_t into = p->items[readers[off[i]]].into;
        bool fold = p->items[into].kind == ITEM_PLACEHOLDER;
        for (size_t k = off[i]; k < off[i + 1] && fold; k++) {
            const item *r = &p->items[p->items[readers[k]].into];
            fold = r->kind == ITEM_PLACEHOLDER && r->of == p->items[into].of;
        }
        if (fold) {
            p->items[i].into = into;
            p->items[into].folded++;
            p->n_collapsed++;
        }
    }
    free(off);
    free(readers);
    return 0;
}

static int drawn_edge_cmp(const void *a, const void *b)
{
    const drawn_edge *x = *(const drawn_edge *const *)a, *y = *(const drawn_edge *const *)b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    if (x->style != y->style)
        return x->style < y->style ? -1 : 1;
    return (x > y) - (x < y); /* the first stored stays */
}

/* Pass 4: every stored edge whose ends are known, from what draws its
 * source to what draws its target. An edge with a placeholder at an end is
 * kept once per (source, target, style), counting the edges it stands for;
 * one inside a placeholder is dropped. Other edges are kept as stored,
 * duplicates too: every stored edge is drawn once. */
static int plan_edges(const trace_graph *g, plan *p)
{
    p->edges = malloc((g->n_edges ? g->n_edges : 1) * sizeof *p->edges);
    drawn_edge **merge = malloc((g->n_edges ? g->n_edges : 1) * sizeof *merge);
    if (!p->edges || !merge) {
        free(merge);
        return -1;
    }
    size_t n_merge = 0;
    for (size_t k = 0; k < g->n_edges; k++) {
        if (p->src[k] == SIZE_MAX)
            continue;
        size_t s = p->items[p->src[k]].into, d = p->items[p->dst[k]].into;
        bool at_placeholder = p->items[s].kind == ITEM_PLACEHOLDER ||
                              p->items[d].kind == ITEM_PLACEHOLDER;
        if (s == d && at_placeholder)
            continue;
        p->edges[p->n_edges] = (drawn_edge){ s, d, style_of(g->edges[k].kind), 1 };
        if (at_placeholder)
            merge[n_merge++] = &p->edges[p->n_edges];
        p->n_edges++;
    }
    qsort(merge, n_merge, sizeof *merge, drawn_edge_cmp);
    for (size_t a = 0; a < n_merge;) {
        size_t b = a + 1;
        while (b < n_merge && merge[b]->src == merge[a]->src && merge[b]->dst == merge[a]->dst &&
               merge[b]->style == merge[a]->style) {
            merge[a]->count++;
            merge[b++]->count = 0;
        }
        a = b;
    }
    free(merge);
    size_t kept = 0;
    for (size_t k = 0; k < p->n_edges; k++)
        if (p->edges[k].count)
            p->edges[kept++] = p->edges[k];
    p->n_edges = kept;
    return 0;
}

typedef struct reader_ref {
    size_t src;         /* the item read */
    int64_t order;      /* the reader's place in graph order */
    size_t edge;        /* index in p->edges */
} reader_ref;

static int reader_ref_cmp(const void *a, const void *b)
{
    const reader_ref *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return (x->edge > y->edge) - (x->edge < y->edge);
}

/* Gives the readers r[0, n) of one item (sorted by graph order) their
 * proxies: the first reader and those near it keep their edges, every other
 * group of near readers gets one proxy (the rule at PROXY_FANOUT). */
static int proxy_readers(plan *p, const reader_ref *r, size_t n)
{
    size_t t = r[0].src, uses = 0;
    for (size_t k = 0; k < n; k++)
        uses += p->edges[r[k].edge].count;
    const item *first = &p->items[p->edges[r[0].edge].dst];
    long first_split = first->split;
    int64_t first_order = first->order;
    size_t proxies_from = p->n_items, nth = 0;
    for (size_t k = 1; k < n; k++) {
        drawn_edge *e = &p->edges[r[k].edge];
        long split = p->items[e->dst].split;
        if (split == first_split && r[k].order - first_order <= PROXY_NEAR)
            continue;
        /* The open proxy of this split, if this reader is near its first. */
        size_t px = SIZE_MAX;
        for (size_t i = p->n_items; i-- > proxies_from;)
            if (p->items[i].split == split) {
                if (r[k].order - p->items[i].order <= PROXY_NEAR)
                    px = i;
                break;
            }
        if (px == SIZE_MAX) {
            px = add_item(p, (item){ .kind = ITEM_PROXY, .split = split, .order = r[k].order,
                                     .of = t, .nth = ++nth, .uses = uses,
                                     .first_reader = p->edges[r[0].edge].dst });
            if (px == SIZE_MAX)
                return -1;
            p->n_proxies++;
        }
        e->src = px;
    }
    return 0;
}

/* Pass 5: proxies for the far readers of every item read more than
 * PROXY_FANOUT times. */
static int plan_proxies(plan *p)
{
    reader_ref *r = malloc((p->n_edges ? p->n_edges : 1) * sizeof *r);
    if (!r)
        return -1;
    for (size_t k = 0; k < p->n_edges; k++)
        r[k] = (reader_ref){ p->edges[k].src, p->items[p->edges[k].dst].order, k };
    qsort(r, p->n_edges, sizeof *r, reader_ref_cmp);
    int rc = 0;
    for (size_t a = 0; a < p->n_edges && rc == 0;) {
        size_t b = a;
        while (b < p->n_edges && r[b].src == r[a].src)
            b++;
        if (b - a > PROXY_FANOUT)
            rc = proxy_readers(p, r + a, b - a);
        a = b;
    }
    free(r);
    return rc;
}

/* Decides what is drawn (the passes of the head comment). On success the
 * plan is the caller's (plan_free); -1: out of memory, nothing to free. */
static int plan_build(const trace_graph *g, const id_index *ix, const viz_graph_opts *o,
                      plan *p)
{
    memset(p, 0, sizeof *p);
    bool full = o && o->full;
    if (plan_items(g, ix, p) != 0)
        goto fail;
    if (!full && (plan_layers(g, p) != 0 || (p->n_runs && plan_fold(g, ix, p) != 0)))
        goto fail;
    p->n_drawn = g->n_nodes - p->n_collapsed;
    size_t limit = o && o->node_limit ? o->node_limit : VIZ_GRAPH_NODE_LIMIT;
    if (!full && p->n_drawn + p->n_placeholders > limit && g->n_splits > 0) {
        p->view = VIZ_GRAPH_PER_SPLIT;
        return 0;
    }
    p->view = p->n_runs ? VIZ_GRAPH_COLLAPSED : VIZ_GRAPH_EVERY_NODE;
    if (plan_edges(g, p) != 0 || plan_proxies(p) != 0)
        goto fail;
    return 0;
fail:
    plan_free(p);
    return -1;
}

int viz_graph_describe(const trace_graph *g, const viz_graph_opts *o, viz_graph_drawing *out)
{
    id_index *ix = index_nodes(g);
    plan p;
    if (!ix || plan_build(g, ix, o, &p) != 0) {
        free(ix);
        return -1;
    }
    *out = (viz_graph_drawing){ .view = p.view };
    if (p.view != VIZ_GRAPH_PER_SPLIT) {
        out->nodes = p.n_drawn;
        out->layers_collapsed = p.n_layers_collapsed;
        out->nodes_collapsed = p.n_collapsed;
        out->placeholders = p.n_placeholders;
        out->proxies = p.n_proxies;
    }
    plan_free(&p);
    free(ix);
    return 0;
}

bool viz_graph_summarised(const trace_graph *g, const viz_graph_opts *o)
{
    viz_graph_drawing d;
    return viz_graph_describe(g, o, &d) == 0 && d.view == VIZ_GRAPH_PER_SPLIT;
}

/* ------------------------------------------------------------------ */
/* Writing the plan.                                                   */

/* Writes s[0, n) escaped like viz_quote_escape. */
static void quote_n(FILE *out, const char *s, size_t n)
{
    for (size_t k = 0; k < n && s[k]; k++) {
        if (s[k] == '"' || s[k] == '\\')
            fputc('\\', out);
        fputc(s[k], out);
    }
}

/* "d:l17": layer `number` of run r's stem. */
static void write_layer(FILE *out, const layer_run *r, long number)
{
    quote_n(out, r->name, r->stem_len);
    fprintf(out, "l%ld", number);
}

/* The DOT id of item i: n<id> for a node, c<k> for a placeholder, and the
 * id of the tensor with _p<nth> for a proxy. */
static void put_id(FILE *out, const trace_graph *g, const plan *p, size_t i)
{
    const item *it = &p->items[i];
    if (it->kind == ITEM_NODE) {
        fprintf(out, "n%lld", (long long)g->nodes[i].id);
    } else if (it->kind == ITEM_PLACEHOLDER) {
        fprintf(out, "c%zu", i - g->n_nodes);
    } else {
        put_id(out, g, p, it->of);
        fprintf(out, "_p%zu", it->nth);
    }
}

/* What item i stands for, in words: a node's name, a placeholder's layers. */
static void put_name(FILE *out, const trace_graph *g, const plan *p, size_t i)
{
    const item *it = &p->items[i];
    if (it->kind == ITEM_NODE) {
        viz_quote_escape(out, g->nodes[i].name);
    } else if (it->kind == ITEM_PLACEHOLDER) {
        fputs("layers ", out);
        write_layer(out, &p->runs[it->of], it->first);
        fputs(" to ", out);
        write_layer(out, &p->runs[it->of], it->last);
    } else {
        put_name(out, g, p, it->of);
    }
}

/* "split 1 · GPU0", or "outside the splits". */
static void put_split(FILE *out, const trace_graph *g, long split)
{
    if (split < 0) {
        fputs("outside the splits", out);
        return;
    }
    fprintf(out, "split %lld · ", (long long)g->splits[split].id);
    viz_quote_escape(out, g->splits[split].backend);
}

static bool has_prefix(const trace_graph *g, const char *prefix)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].name && strncmp(g->nodes[i].name, prefix, strlen(prefix)) == 0)
            return true;
    return false;
}

/* The label: the title, then the legend of the view, one left-justified
 * line ("\l") each. */
static void write_legend(FILE *out, const trace_graph *g, const viz_graph_opts *o, const plan *p)
{
    if (o && o->title) {
        viz_quote_escape(out, o->title);
        fputs("\\l", out);
    }
    if (p->view == VIZ_GRAPH_PER_SPLIT) {
        fputs("one node per split, with its op counts (graph --full draws every node); an edge: "
              "the tensors a split reads from another one, red when both are splits\\l",
              out);
        return;
    }
    fputs("boxes: the splits, tinted with their backend's colour, which fills their nodes; "
          "arrow shapes: the copies the scheduler makes of a split's inputs, one per pipeline "
          "slot\\l"
          "edges: grey, data; dashed orange, a tensor copied into a split; thick red, a node "
          "reading its split's copy of an input\\l",
          out);
    if (p->n_proxies)
        fputs("↳ name: a tensor read in many places, drawn once beside its first reader and "
              "standing in for it near the others (hover for where)\\l",
              out);
    bool d = has_prefix(g, "d:"), pr = has_prefix(g, "p:");
    if (d || pr)
        fprintf(out, "names: %s%s%s\\l", d ? "d: the decode graph's nodes" : "",
                d && pr ? ", " : "", pr ? "p: the prompt graph's" : "");
    if (p->n_runs) {
        fputs("collapsed, one node per split: ", out);
        for (size_t r = 0; r < p->n_runs; r++) {
            const layer_run *run = &p->runs[r];
            if (r == 4) {
                fprintf(out, " and %zu more runs", p->n_runs - r);
                break;
            }
            fputs(r ? "; " : "", out);
            write_layer(out, run, run->first + 1);
            fputs(" to ", out);
            write_layer(out, run, run->last - 1);
            fprintf(out, " (%ld layers like ", run->last - run->first - 1);
            write_layer(out, run, run->first);
            fputs(")", out);
        }
        fputs("; graph --full draws every node\\l", out);
    }
}

static void write_header(FILE *out, const trace_graph *g, const viz_graph_opts *o, const plan *p)
{
    fputs("digraph splits {\n"
          "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, newrank=true, "
          "nodesep=0.25, ranksep=0.35, labelloc=t, labeljust=l, label=\"",
          out);
    write_legend(out, g, o, p);
    fputs("\"];\n"
          "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\", "
          "margin=\"0.08,0.03\", height=0.3];\n"
          "  edge [color=\"#555555\", arrowsize=0.6];\n",
          out);
}

static void write_node(FILE *out, const trace_graph_node *n, palette *pal)
{
    bool copy = n->flags & TRACE_NODE_COPY;
    fprintf(out, "    n%lld [", (long long)n->id);
    if (copy) /* the arrow takes the right of the box: room for it */
        fputs("shape=cds, style=\"filled\", margin=\"0.3,0.04\", ", out);
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

static void write_placeholder(FILE *out, const trace_graph *g, const plan *p, size_t i,
                              palette *pal)
{
    const item *it = &p->items[i];
    const layer_run *run = &p->runs[it->of];
    fputs("    ", out);
    put_id(out, g, p, i);
    fprintf(out, " [shape=box3d, style=\"filled,dashed\", fillcolor=\"%s\", label=\"",
            it->split >= 0 ? backend_colour(pal, g->splits[it->split].backend) : "#ffffff");
    put_name(out, g, p, i);
    fprintf(out, ": %ld more like ", it->last - it->first + 1);
    write_layer(out, run, run->first);
    fprintf(out, "\\n%zu nodes (graph --full draws them)\", tooltip=\"", it->members + it->folded);
    put_name(out, g, p, i);
    fputs(", ", out);
    put_split(out, g, it->split);
    fprintf(out, ": %zu nodes of these layers", it->members);
    if (it->folded)
        fprintf(out, " and %zu read only by them (weights, caches)", it->folded);
    fputs(", drawn as one; their names are those of ", out);
    write_layer(out, run, run->first);
    fputs(" and ", out);
    write_layer(out, run, run->last);
    fputs(", drawn in full\"];\n", out);
}

static void write_proxy(FILE *out, const trace_graph *g, const plan *p, size_t i)
{
    const item *it = &p->items[i];
    fputs("    ", out);
    put_id(out, g, p, i);
    fputs(" [shape=plaintext, style=\"\", label=\"↳ ", out);
    put_name(out, g, p, i);
    fputs("\", tooltip=\"", out);
    put_name(out, g, p, i);
    fputs(" is drawn once, ", out);
    put_split(out, g, p->items[it->of].split);
    fputs(", beside its first reader ", out);
    put_name(out, g, p, it->first_reader);
    fprintf(out, "; it is read %zu times; this stands in for it here\"];\n", it->uses);
}

static void write_item(FILE *out, const trace_graph *g, const plan *p, size_t i, palette *pal)
{
    if (p->items[i].kind == ITEM_NODE)
        write_node(out, &g->nodes[i], pal);
    else if (p->items[i].kind == ITEM_PLACEHOLDER)
        write_placeholder(out, g, p, i, pal);
    else
        write_proxy(out, g, p, i);
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

typedef struct copy_pair {
    size_t source, copy;    /* node indices */
} copy_pair;

static int copy_pair_cmp(const void *a, const void *b)
{
    const copy_pair *x = a, *y = b;
    if (x->source != y->source)
        return x->source < y->source ? -1 : 1;
    return (x->copy > y->copy) - (x->copy < y->copy);
}

/* The copies of one tensor in split s on one rank: a slot no node reads
 * yet would otherwise sit right under its source, far above the split,
 * and stretch the cluster up to it. Returns 0 or -1 (memory). */
static int write_copy_ranks(FILE *out, const trace_graph *g, const plan *p, long s)
{
    copy_pair *cp = malloc((g->n_edges ? g->n_edges : 1) * sizeof *cp);
    if (!cp)
        return -1;
    size_t n = 0;
    for (size_t k = 0; k < g->n_edges; k++) {
        size_t d = p->dst[k];
        if (d != SIZE_MAX && style_of(g->edges[k].kind) == EDGE_COPY &&
            (g->nodes[d].flags & TRACE_NODE_COPY) && p->items[d].split == s && is_drawn(p, d))
            cp[n++] = (copy_pair){ p->src[k], d };
    }
    qsort(cp, n, sizeof *cp, copy_pair_cmp);
    for (size_t a = 0; a < n;) {
        size_t b = a + 1;
        while (b < n && cp[b].source == cp[a].source)
            b++;
        if (b - a > 1) {
            fputs("    { rank=same;", out);
            for (size_t k = a; k < b; k++)
                fprintf(out, " n%lld;", (long long)g->nodes[cp[k].copy].id);
            fputs(" }\n", out);
        }
        a = b;
    }
    free(cp);
    return 0;
}

static void write_edge(FILE *out, const trace_graph *g, const plan *p, const drawn_edge *e)
{
    fputs("  ", out);
    put_id(out, g, p, e->src);
    fputs(" -> ", out);
    put_id(out, g, p, e->dst);
    char many[48] = "";
    if (e->count > 1)
        snprintf(many, sizeof many, " (%zu edges)", e->count);
    if (e->style == EDGE_INPUT)
        fprintf(out, " [color=\"#d62728\", penwidth=2.2, tooltip=\"split input%s\"]", many);
    else if (e->style == EDGE_COPY)
        fprintf(out, " [color=\"#ff7f0e\", style=dashed, penwidth=1.5, tooltip=\"copy%s\"]",
                many);
    else if (e->count > 1)
        fprintf(out, " [tooltip=\"%zu edges\"]", e->count);
    fputs(";\n", out);
}

/* Every node, or the collapsed graph: clusters with their items, the items
 * in no cluster, the edges. Returns 0 or -1 (memory). */
static int write_plan(FILE *out, const trace_graph *g, const id_index *ix, const plan *p,
                      palette *pal)
{
    for (size_t s = 0; s < g->n_splits; s++) {
        const trace_graph_split *sp = &g->splits[s];
        /* The title is a node (see Titles in the head comment). */
        fprintf(out, "  subgraph cluster_s%lld {\n    label=\"\";\n"
                     "    t%lld [shape=plaintext, style=\"\", fontsize=11, label=\"split %lld · ",
                (long long)sp->id, (long long)sp->id, (long long)sp->id);
        viz_quote_escape(out, sp->backend);
        write_split_inputs(out, g, ix, sp->inputs);
        fprintf(out, "\"];\n    style=\"rounded,filled\"; color=\"#888888\"; "
                     "fillcolor=\"%s40\"; fontsize=11;\n    tooltip=\"split %lld on ",
                backend_colour(pal, sp->backend), (long long)sp->id);
        viz_quote_escape(out, sp->backend);
        fprintf(out, ", %lld nodes\";\n", (long long)sp->n_nodes);
        for (size_t i = 0; i < p->n_items; i++)
            if (p->items[i].split == (long)s && is_drawn(p, i))
                write_item(out, g, p, i, pal);
        if (write_copy_ranks(out, g, p, (long)s) != 0)
            return -1;
        fputs("  }\n", out);
    }
    for (size_t i = 0; i < p->n_items; i++)
        if (p->items[i].split < 0 && is_drawn(p, i))
            write_item(out, g, p, i, pal);
    for (size_t k = 0; k < p->n_edges; k++)
        write_edge(out, g, p, &p->edges[k]);
    /* Each split's title above its copies, which the dashed copy edges
     * enter from outside; only those: they sit at the top of the split, and
     * an edge to a node further down would cost dot one virtual node per
     * rank it spans (an 80-layer graph took minutes). */
    for (size_t k = 0; k < p->n_edges; k++) {
        const drawn_edge *e = &p->edges[k];
        long s = p->items[e->dst].split;
        if (s < 0 || p->items[e->src].split == s || e->style != EDGE_COPY)
            continue;
        fprintf(out, "  t%lld -> ", (long long)g->splits[s].id);
        put_id(out, g, p, e->dst);
        fputs(" [style=invis];\n", out);
    }
    return 0;
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
    plan p;
    if (!ix || plan_build(g, ix, o, &p) != 0) {
        free(ix);
        return -1;
    }
    palette pal = { { 0 }, 0 };
    /* Colours follow the order of the splits, so the first GPU is blue. */
    for (size_t s = 0; s < g->n_splits; s++)
        backend_colour(&pal, g->splits[s].backend);
    write_header(out, g, o, &p);
    int rc = p.view == VIZ_GRAPH_PER_SPLIT ? write_summary(out, g, ix, &pal)
                                           : write_plan(out, g, ix, &p, &pal);
    fputs("}\n", out);
    plan_free(&p);
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
