/*
 * backend_sim.c -- the simulated backend: sched_backend_iface on a world.
 *
 * GPU backends queue kernels, copies, records and waits on their stream;
 * the CPU backend runs its kernels on the host thread, as ggml's CPU
 * backend does. Every call costs the host its API cost, and every item is
 * priced by the cost model (cost.c) from the graph: an op by its FLOPs
 * (at the f16 peak when it computes at half precision), the bytes it moves
 * and the model's overhead; a copy by its path; an all-reduce by the
 * alpha-beta model over its group. The recording that wraps these
 * backends (sched/record.c) writes the statements and the very attributes
 * those prices come from, so `replay --durations model` prices them alike;
 * this file only reports when each one ran (sched_rec_done).
 *
 * copy_async queues the copy on this backend's stream whatever the other
 * side (the scheduler runs a copy between GPUs on the source's stream and
 * hands it over with an event); the CPU has none.
 */
#include "sim_int.h"

#include <stdlib.h>
#include <string.h>

static sim_backend_ctx *ctx_of(sched_backend *b) { return b->ctx; }

static const char *sim_name(sched_backend *b) { return ctx_of(b)->name; }
static const char *sim_trace_name(sched_backend *b) { return ctx_of(b)->trace_name; }

static sched_device_kind gpu_kind(sched_backend *b)
{
    (void)b;
    return SCHED_DEVICE_GPU;
}

static sched_device_kind cpu_kind(sched_backend *b)
{
    (void)b;
    return SCHED_DEVICE_CPU;
}

static bool cpu_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    (void)b;
    (void)g;
    return t->op != SCHED_OP_ALL_REDUCE;
}

static sched_buffer *sim_buffer_alloc(sched_backend *b, const char *name, uint64_t size,
                                      sched_buffer_usage usage)
{
    sim_backend_ctx *c = ctx_of(b);
    sim_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return NULL;
    buf->base.backend = b;
    buf->base.size = size ? size : 1;
    buf->base.usage = usage;
    buf->base.host = c->device < 0;
    buf->base.pinned = c->device < 0;
    buf->base.trace_id = TRACE_NONE;
    snprintf(buf->base.name, sizeof buf->base.name, "%s", name);
    buf->device = c->device;
    return &buf->base;
}

static void sim_buffer_free(sched_backend *b, sched_buffer *buf)
{
    (void)b;
    free(buf);
}

/* Where a tensor's bytes are: a GPU index, or -1 for host memory. */
static int place_of(const sched_tensor *t)
{
    return t->buffer ? ((const sim_buffer *)t->buffer)->device : -1;
}

/* The links and copy engine of a copy between places; returns the links. */
static int path(sim_world *w, int from, int to, int *links, int *engine)
{
    if (from < 0 && to >= 0) {
        links[0] = w->link_down[to];
        *engine = to * 3 + 0;
        return 1;
    }
    if (from >= 0 && to < 0) {
        links[0] = w->link_up[from];
        *engine = from * 3 + 1;
        return 1;
    }
    if (from >= 0 && to >= 0 && from != to) {
        *engine = from * 3 + 2;
        if (w->m.nvlink) {
            links[0] = w->link_p2p[from][to];
            return 1;
        }
        links[0] = w->link_up[from];
        links[1] = w->link_down[to];
        links[2] = w->link_p2p[from][to];
        return 3;
    }
    *engine = from >= 0 ? from * 3 + 2 : 0;
    return 0;
}

/* The host submits an item of kind to GPU d's stream. */
static int submit(sim_world *w, int d, trace_kind kind, sim_item *it)
{
    sim_host_spend(w, sim_cost_submit(&w->m, kind));
    return sim_submit(w, d, it);
}

/* Queues a copy src -> dst on GPU d's stream. */
static int queue_copy(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    sim_world *w = ctx_of(b)->w;
    sim_item it = { .kind = SIM_IT_COPY, .dur = w->m.copy_latency_ns,
                    .bytes = sched_tensor_nbytes(dst), .ticket = sched_rec_ticket(b) };
    int engine;
    it.n_links = (int8_t)path(w, place_of(src), place_of(dst), it.links, &engine);
    it.engine = (int16_t)engine;
    return submit(w, ctx_of(b)->device, TRACE_COPY, &it);
}

static int gpu_set_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return queue_copy(b, src, dst);
}

static int gpu_get_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return queue_copy(b, src, dst);
}

static int gpu_copy_async(sched_backend *b, sched_backend *other, sched_tensor *src,
                          sched_tensor *dst)
{
    (void)other;
    return queue_copy(b, src, dst) == 0 ? 1 : -1;
}

/* The host copies; returns when done. */
static int sim_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    sim_world *w = ctx_of(b)->w;
    int links[3], engine;
    int n = path(w, place_of(src), place_of(dst), links, &engine);
    uint64_t bytes = sched_tensor_nbytes(dst);
    int rc = 0;
    w->stats.host_syncs++;
    if (n == 0) {
        sim_host_spend(w, sim_cost_copy(&w->m, true, SIM_PATH_NONE, bytes));
        return 0;
    }
    /* ggml's blocking set/get: a copy on a per-thread stream and a sync of
     * that stream only; the scheduler made the source ready before. */
    rc = sim_host_transfer(w, links, n, bytes);
    sim_host_spend(w, sim_cost_unblock(&w->m, TRACE_COPY, true));
    return rc;
}

static int gpu_synchronize(sched_backend *b)
{
    sim_world *w = ctx_of(b)->w;
    int rc = sim_block_stream(w, ctx_of(b)->device);
    sim_host_spend(w, sim_cost_unblock(&w->m, TRACE_SYNC, true));
    w->stats.host_syncs++;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Events.                                                             */

static sched_event *gpu_event_new(sched_backend *b, const char *name)
{
    (void)name;
    sim_world *w = ctx_of(b)->w;
    sched_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->backend = b;
    ev->name = TRACE_NONE;
    uint32_t id = sim_event_alloc(w);
    if (id == TRACE_NONE) {
        free(ev);
        return NULL;
    }
    ev->ctx = (void *)(uintptr_t)id;
    return ev;
}

static void gpu_event_free(sched_backend *b, sched_event *ev)
{
    (void)b;
    free(ev);
}

static int gpu_event_record(sched_backend *b, sched_event *ev)
{
    ev->n_records++;
    sim_item it = { .kind = SIM_IT_RECORD, .event = (uint32_t)(uintptr_t)ev->ctx,
                    .gen = ev->n_records, .ticket = sched_rec_ticket(b) };
    return submit(ctx_of(b)->w, ctx_of(b)->device, TRACE_RECORD, &it);
}

static int gpu_event_wait(sched_backend *b, sched_event *ev)
{
    sim_item it = { .kind = SIM_IT_WAIT, .event = (uint32_t)(uintptr_t)ev->ctx,
                    .gen = ev->n_records, .ticket = sched_rec_ticket(b) };
    return submit(ctx_of(b)->w, ctx_of(b)->device, TRACE_WAIT, &it);
}

static int gpu_event_synchronize(sched_backend *b, sched_event *ev)
{
    sim_world *w = ctx_of(b)->w;
    int rc = sim_block_event(w, (uint32_t)(uintptr_t)ev->ctx, ev->n_records);
    sim_host_spend(w, sim_cost_unblock(&w->m, TRACE_WAIT, true));
    w->stats.host_syncs++;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Compute.                                                            */

/* An op of the graph on a stream (host: false) or the host's pool. */
static int64_t node_ns(const sim_model *m, bool host, const sched_graph *g, const sched_tensor *t)
{
    uint64_t flops = sched_node_flops(g, t);
    bool half = sched_node_half(g, t);
    return sim_cost_kernel(m, sched_op_str(t->op), host, half ? 0 : flops, half ? flops : 0,
                           sched_node_bytes(g, t), -1);
}

static int queue_kernel(sched_backend *b, int64_t dur, sched_ticket ticket)
{
    sim_item it = { .kind = SIM_IT_KERNEL, .dur = dur, .ticket = ticket };
    return submit(ctx_of(b)->w, ctx_of(b)->device, TRACE_OP, &it);
}

/* One rank's part of an all-reduce (node entry k of x): the collective,
 * timed by the alpha-beta model, with bf16 conversion kernels around it
 * when it goes through the wire. */
static int gpu_all_reduce(sched_backend *b, const sched_exec *x, int k)
{
    sim_world *w = ctx_of(b)->w;
    int d = ctx_of(b)->device;
    int32_t node = x->nodes[k];
    const sched_tensor *src = &x->graph->tensors[x->src_of(x, node, 0)];
    int rank, n;
    sched_exec_group(x, node, &rank, &n);
    if (n < 1)
        n = 1;
    uint64_t bytes = sched_tensor_nbytes(src);
    bool bf16 = sched_exec_bf16(x, node) && x->wire;
    bool butterfly = x->allreduce == SCHED_ALLREDUCE_BUTTERFLY;
    uint64_t wire = bf16 ? (uint64_t)sched_tensor_nelements(src) * sched_dtype_size(SCHED_BF16)
                         : bytes;
    const sched_ticket *tk = x->tickets ? &x->tickets[3 * k] : NULL;
    int64_t convert = sim_cost_op(&w->m, false, 0, 0, bytes + wire, -1);
    if (bf16 && queue_kernel(b, convert, tk ? tk[1] : SCHED_NO_TICKET) != 0)
        return -1;
    /* Bytes this rank sends, for the per-link summary. */
    if (n > 1) {
        if (butterfly) {
            for (int r = 0; (1 << r) < n; r++) {
                int peer = d ^ (1 << r);
                if (peer < w->n_gpus)
                    w->e.links[w->link_p2p[d][peer]].bytes += wire;
            }
        } else {
            w->e.links[w->link_p2p[d][(d + 1) % n]].bytes += (uint64_t)(2.0 * (n - 1) / n * (double)wire);
        }
    }
    uint32_t gen = w->streams[d].coll_gen++;
    sim_item it = { .kind = SIM_IT_COLL, .ticket = tk ? tk[0] : SCHED_NO_TICKET };
    it.coll = sim_coll_instance(w, gen, n, sim_cost_allreduce(&w->m, (uint64_t)n, wire, butterfly));
    if (it.coll == TRACE_NONE || submit(w, d, TRACE_COLLECTIVE, &it) != 0)
        return -1;
    if (bf16 && queue_kernel(b, convert, tk ? tk[2] : SCHED_NO_TICKET) != 0)
        return -1;
    return 0;
}

static int gpu_graph_compute(sched_backend *b, const sched_exec *x)
{
    sim_world *w = ctx_of(b)->w;
    for (int k = 0; k < x->n_nodes; k++) {
        const sched_tensor *t = &x->graph->tensors[x->nodes[k]];
        if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
            continue;
        if (t->op == SCHED_OP_ALL_REDUCE) {
            if (gpu_all_reduce(b, x, k) != 0)
                return -1;
            continue;
        }
        if (queue_kernel(b, node_ns(&w->m, false, x->graph, t),
                         x->tickets ? x->tickets[3 * k] : SCHED_NO_TICKET) != 0)
            return -1;
    }
    return 0;
}

static int cpu_graph_compute(sched_backend *b, const sched_exec *x)
{
    sim_world *w = ctx_of(b)->w;
    for (int k = 0; k < x->n_nodes; k++) {
        const sched_tensor *t = &x->graph->tensors[x->nodes[k]];
        if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
            continue;
        int64_t dur = node_ns(&w->m, true, x->graph, t);
        if (x->tickets)
            sched_rec_done(b, x->tickets[3 * k], w->host_t, dur);
        sim_host_spend(w, dur);
    }
    return 0;
}

static const sched_backend_iface gpu_iface = {
    .get_name = sim_name,
    .device_kind = gpu_kind,
    .trace_name = sim_trace_name,
    .buffer_alloc = sim_buffer_alloc,
    .buffer_free = sim_buffer_free,
    .set_async = gpu_set_async,
    .get_async = gpu_get_async,
    .copy_async = gpu_copy_async,
    .copy_sync = sim_copy_sync,
    .synchronize = gpu_synchronize,
    .graph_compute = gpu_graph_compute,
    .event_new = gpu_event_new,
    .event_free = gpu_event_free,
    .event_record = gpu_event_record,
    .event_wait = gpu_event_wait,
    .event_synchronize = gpu_event_synchronize,
};

/* The CPU runs on the host: synchronous, no events, no async copies. */
static const sched_backend_iface cpu_iface = {
    .get_name = sim_name,
    .device_kind = cpu_kind,
    .trace_name = sim_trace_name,
    .supports_op = cpu_supports_op,
    .buffer_alloc = sim_buffer_alloc,
    .buffer_free = sim_buffer_free,
    .copy_sync = sim_copy_sync,
    .graph_compute = cpu_graph_compute,
};

void sim_backends_init(sim_world *w)
{
    for (int d = 0; d <= w->n_gpus; d++) {
        sim_backend_ctx *c = &w->ctxs[d];
        c->w = w;
        c->device = d < w->n_gpus ? d : -1;
        if (d < w->n_gpus) {
            snprintf(c->name, sizeof c->name, "GPU%d", d);
            snprintf(c->trace_name, sizeof c->trace_name, "gpu%d", d);
        } else {
            snprintf(c->name, sizeof c->name, "CPU");
            snprintf(c->trace_name, sizeof c->trace_name, "cpu");
        }
        w->backends[d].iface = d < w->n_gpus ? &gpu_iface : &cpu_iface;
        w->backends[d].ctx = c;
        w->backends[d].rec = NULL;
        w->backend_ptrs[d] = &w->backends[d];
    }
}
