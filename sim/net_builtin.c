/*
 * net_builtin.c -- syncsim's own cluster network: `builtin:NxG[,key=value...]`.
 *
 * N nodes of G GPUs. Every GPU has four links:
 *   nvlink up / down  into and out of the node's NVSwitch, nvlink_gbps each
 *                     way (default 450 GB/s: H100 SXM, NVLink 4, 18 links);
 *   nic up / down     its own NIC into the fabric between nodes, nic_gbps
 *                     each way (default 50 GB/s: one 400 Gb/s NDR port).
 * The switch and the fabric are non-blocking (a rail-optimised or full fat
 * tree): no link shared by all, so a transfer's path is its source's up
 * link and its destination's down link:
 *   same node   [nvlink up src, nvlink down dst], latency nvlink_ns (1 us);
 *   other node  [nic up src, nic down dst],       latency nic_ns (3 us).
 * A transfer waits its latency, then moves its bytes as a fluid transfer of
 * engine.c: its rate is the minimum over its two links of the link's
 * bandwidth / the transfers on it, recomputed whenever one starts or ends.
 *
 * Since a rate depends only on the links of the transfer, transfers that
 * share no link never affect each other: each node's NVLinks are one
 * sim_engine, the NICs of every GPU another. The same sharing as one engine
 * over all links, but a transfer's start or end rebalances only its own
 * node (the tensor-parallel all-reduces of a 1024-GPU step stay within their
 * node). next() takes the earliest event over the engines, the lowest
 * engine first on a tie, from a tournament tree of the engines' next events
 * (O(log engines) per event, not a scan of 129 engines).
 */
#include "net.h"
#include "sim_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The defaults, documented in docs/cluster.md and shared with the SimGrid
 * platform files (sim/platforms/): keep them equal. */
#define NVLINK_GBPS 450.0
#define NVLINK_NS 1000
#define NIC_GBPS 50.0
#define NIC_NS 3000

/* A transfer: its engine, and while it waits its latency, its ends and bytes. */
typedef struct builtin_xfer {
    int engine;
    int links[2];
    uint64_t bytes;
    int next_free;          /* free list */
} builtin_xfer;

typedef struct builtin_net {
    int nodes, gpus;        /* N, G */
    double nvlink_gbps, nic_gbps;
    int64_t nvlink_ns, nic_ns;
    sim_engine *engines;    /* nodes NVLink engines, then the fabric */
    int n_engines;
    /* A tournament tree over the engines' next events: leaf P + k is engine
     * k, every inner node the engine with the earlier next event of its two
     * children (the lower on a tie), -1 for none; tree[1] is the earliest. */
    int *tree, tree_leaves;
    builtin_xfer *xfers;
    int n_xfers, cap_xfers, free_head;
} builtin_net;

static int parse_num(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi))
        return -1;
    *out = d;
    return 0;
}

static int builtin_open(sim_net *n, const char *arg, char *err, size_t errlen)
{
    builtin_net *b = calloc(1, sizeof *b);
    if (!b)
        return snprintf(err, errlen, "out of memory"), -1;
    b->nvlink_gbps = NVLINK_GBPS;
    b->nic_gbps = NIC_GBPS;
    b->nvlink_ns = NVLINK_NS;
    b->nic_ns = NIC_NS;
    b->free_head = -1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    char *save = NULL, *tok = strtok_r(buf, ",", &save);
    long nodes = 0, gpus = 0;
    char *x = tok ? strchr(tok, 'x') : NULL;
    char *e1 = NULL, *e2 = NULL;
    if (x) {
        nodes = strtol(tok, &e1, 10);
        gpus = strtol(x + 1, &e2, 10);
    }
    if (!x || e1 != x || e1 == tok || *e2 || e2 == x + 1 || nodes < 1 || gpus < 1 ||
        nodes > 65536 || gpus > 64 || nodes * gpus > 1 << 20) {
        snprintf(err, errlen, "network 'builtin:%s': expected NODESxGPUS (1-65536 nodes of 1-64 "
                 "GPUs, e.g. builtin:4x8) then optional ,nvlink_gbps=,nvlink_ns=,nic_gbps=,nic_ns=",
                 arg);
        goto fail;
    }
    b->nodes = (int)nodes;
    b->gpus = (int)gpus;
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        double v;
        if (eq)
            *eq = '\0';
        const char *val = eq ? eq + 1 : "";
        int bad = !eq;
        if (!bad && strcmp(tok, "nvlink_gbps") == 0)
            bad = parse_num(val, 1e-6, 1e9, &b->nvlink_gbps);
        else if (!bad && strcmp(tok, "nic_gbps") == 0)
            bad = parse_num(val, 1e-6, 1e9, &b->nic_gbps);
        else if (!bad && strcmp(tok, "nvlink_ns") == 0)
            bad = parse_num(val, 0, 1e12, &v) || (b->nvlink_ns = (int64_t)v, 0);
        else if (!bad && strcmp(tok, "nic_ns") == 0)
            bad = parse_num(val, 0, 1e12, &v) || (b->nic_ns = (int64_t)v, 0);
        else if (!bad) {
            snprintf(err, errlen, "network 'builtin:%s': unknown key '%s' (expected nvlink_gbps, "
                     "nvlink_ns, nic_gbps, nic_ns)", arg, tok);
            goto fail;
        }
        if (bad) {
            snprintf(err, errlen, "network 'builtin:%s': '%s' needs a positive number (KEY=VALUE: "
                     "GB/s for _gbps, nanoseconds for _ns)", arg, tok);
            goto fail;
        }
    }
    b->n_engines = b->nodes + 1;
    b->engines = calloc((size_t)b->n_engines, sizeof *b->engines);
    for (b->tree_leaves = 1; b->tree_leaves < b->n_engines; b->tree_leaves *= 2)
        ;
    b->tree = malloc(2 * (size_t)b->tree_leaves * sizeof *b->tree);
    if (!b->engines || !b->tree)
        goto oom;
    for (int i = 0; i < 2 * b->tree_leaves; i++)
        b->tree[i] = -1;
    for (int k = 0; k < b->n_engines; k++)
        sim_engine_init(&b->engines[k]);
    /* Node k: links 2i (up) and 2i+1 (down) of its GPU i; the fabric: 2g, 2g+1 of GPU g. */
    for (int k = 0; k < b->nodes; k++)
        for (int i = 0; i < 2 * b->gpus; i++)
            if (sim_engine_link(&b->engines[k], b->nvlink_gbps) < 0)
                goto oom;
    for (int g = 0; g < 2 * b->nodes * b->gpus; g++)
        if (sim_engine_link(&b->engines[b->nodes], b->nic_gbps) < 0)
            goto oom;
    n->ctx = b;
    n->n_gpus = b->nodes * b->gpus;
    n->gpus_per_node = b->gpus;
    snprintf(n->describe, sizeof n->describe,
             "builtin: %d node%s x %d GPUs, NVLink %g GB/s + %lld ns, NIC %g GB/s + %lld ns, "
             "non-blocking fabric", b->nodes, b->nodes == 1 ? "" : "s", b->gpus, b->nvlink_gbps,
             (long long)b->nvlink_ns, b->nic_gbps, (long long)b->nic_ns);
    return 0;
oom:
    snprintf(err, errlen, "network 'builtin:%s': out of memory", arg);
fail:
    if (b->engines)
        for (int k = 0; k < b->n_engines; k++)
            sim_engine_release(&b->engines[k]);
    free(b->engines);
    free(b->tree);
    free(b);
    return -1;
}

static int64_t head(const builtin_net *b, int k)
{
    return k < 0 || !b->engines[k].n_heap ? INT64_MAX : b->engines[k].heap[0].t;
}

/* Engine k's next event changed: the tree's path to the root follows. */
static void tree_update(builtin_net *b, int k)
{
    int i = b->tree_leaves + k;
    b->tree[i] = b->engines[k].n_heap ? k : -1;
    for (i /= 2; i >= 1; i /= 2) {
        int l = b->tree[2 * i], r = b->tree[2 * i + 1];
        b->tree[i] = l < 0 ? r : r < 0 ? l : head(b, r) < head(b, l) ? r : l;
    }
}

/* The engine and links of a transfer from src to dst. */
static int route(const builtin_net *b, int src, int dst, int links[2], int64_t *latency)
{
    int ns = src / b->gpus, nd = dst / b->gpus;
    if (ns == nd) {
        links[0] = 2 * (src % b->gpus);
        links[1] = 2 * (dst % b->gpus) + 1;
        *latency = b->nvlink_ns;
        return ns;
    }
    links[0] = 2 * src;
    links[1] = 2 * dst + 1;
    *latency = b->nic_ns;
    return b->nodes;
}

static int64_t builtin_start(sim_net *n, int64_t now, int src, int dst, uint64_t bytes)
{
    builtin_net *b = n->ctx;
    if (src < 0 || dst < 0 || src >= n->n_gpus || dst >= n->n_gpus || src == dst)
        return -1;
    int id;
    if (b->free_head >= 0) {
        id = b->free_head;
        b->free_head = b->xfers[id].next_free;
    } else {
        if (b->n_xfers == b->cap_xfers) {
            int cap = b->cap_xfers ? 2 * b->cap_xfers : 256;
            builtin_xfer *nx = realloc(b->xfers, (size_t)cap * sizeof *nx);
            if (!nx)
                return -1;
            b->xfers = nx;
            b->cap_xfers = cap;
        }
        id = b->n_xfers++;
    }
    builtin_xfer *x = &b->xfers[id];
    int64_t latency;
    int k = route(b, src, dst, x->links, &latency);
    sim_engine *e = &b->engines[k];
    x->engine = k;
    x->bytes = bytes;
    /* The engine's clock catches up with the network's: next() has taken
     * every event it held up to now. */
    if (e->now < now)
        e->now = now;
    /* Latency first: a timer tagged with the transfer, which next() turns
     * into the fluid transfer. */
    if (sim_engine_push(e, now + latency, SIM_EV_TIMER, (uint32_t)id, 0) != 0) {
        x->next_free = b->free_head;
        b->free_head = id;
        return -1;
    }
    tree_update(b, k);
    return id;
}

static bool builtin_next(sim_net *n, int64_t until, int64_t *at, int64_t *id)
{
    builtin_net *b = n->ctx;
    for (;;) {
        int best = b->tree[1];
        if (best < 0 || head(b, best) > until)
            return false;
        sim_engine *e = &b->engines[best];
        sim_heap_ev ev;
        sim_engine_pop(e, &ev);
        if (ev.kind == SIM_EV_TIMER) {
            builtin_xfer *x = &b->xfers[ev.a];
            int rc = sim_engine_xfer_start(e, x->links, 2, x->bytes, (int)ev.a);
            tree_update(b, best);
            if (rc < 0)
                return false;   /* out of memory: the transfer never completes */
            continue;
        }
        bool done = ev.kind == SIM_EV_XFER && sim_engine_xfer_event(e, &ev);
        tree_update(b, best);
        if (!done)
            continue;
        int xid = e->xfers[ev.a].owner;
        b->xfers[xid].next_free = b->free_head;
        b->free_head = xid;
        *at = e->now;
        *id = xid;
        return true;
    }
}

static uint64_t builtin_busiest(const sim_net *n, char *name, size_t len)
{
    const builtin_net *b = n->ctx;
    uint64_t most = 0;
    int where = -1, link = -1;
    for (int k = 0; k < b->n_engines; k++)
        for (int l = 0; l < b->engines[k].n_links; l++)
            if (b->engines[k].links[l].bytes > most) {
                most = b->engines[k].links[l].bytes;
                where = k;
                link = l;
            }
    if (where < 0)
        snprintf(name, len, "none");
    else if (where < b->nodes)
        snprintf(name, len, "gpu%d.nvlink.%s (node %d)", where * b->gpus + link / 2,
                 link % 2 ? "down" : "up", where);
    else
        snprintf(name, len, "gpu%d.nic.%s (node %d)", link / 2, link % 2 ? "down" : "up",
                 link / 2 / b->gpus);
    return most;
}
static void builtin_close(sim_net *n)
{
    builtin_net *b = n->ctx;
    if (!b)
        return;
    for (int k = 0; k < b->n_engines; k++)
        sim_engine_release(&b->engines[k]);
    free(b->engines);
    free(b->tree);
    free(b->xfers);
    free(b);
    n->ctx = NULL;
}

const sim_net_iface sim_net_builtin = {
    .name = "builtin",
    .open = builtin_open,
    .run = NULL,
    .start = builtin_start,
    .next = builtin_next,
    .busiest = builtin_busiest,
    .close = builtin_close,
};
