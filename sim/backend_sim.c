/*
 * backend_sim.c -- the simulated backend: sched_backend_iface on a world.
 *
 * GPU backends queue kernels, copies, records and waits on their stream
 * (`gpuN`); the CPU backend runs its kernels on the host thread (`host`
 * ops), as ggml's CPU backend does. Every call becomes a statement: the
 * host's own (sync, wait, blocking copy, CPU op) with the host's times,
 * a stream's with the times the engine gives it. Accesses name the views
 * of tensors (allocator slots) so that the checker sees reuse.
 *
 * copy_async follows ggml-cuda: a GPU -> GPU copy runs on the source's
 * stream, which records an event the destination's stream waits for; a
 * host -> GPU copy (from the CPU backend's arena) runs on the
 * destination's stream (it pulls), like Vulkan's. The CPU declines.
 *
 * Ops and collectives also carry what the device model priced them by and
 * the trace cannot show (sim_cost_attrs): their FLOPs, the bytes they move
 * when these are not the bytes they access (get_rows reads a few rows of
 * the table it names), the all-reduce algorithm. `replay --durations
 * model` reads them back (sim/replay.c, docs/device-model.md).
 */
#include "sim_int.h"

#include <stdlib.h>
#include <string.h>

static sim_backend_ctx *ctx_of(sched_backend *b) { return b->ctx; }

static const char *sim_name(sched_backend *b) { return ctx_of(b)->name; }

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
    sim_world *w = c->w;
    sched_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return NULL;
    buf->backend = b;
    buf->size = size ? size : 1;
    buf->usage = usage;
    buf->host = c->device < 0;
    snprintf(buf->name, sizeof buf->name, "%s", name);
    char dev[16];
    snprintf(dev, sizeof dev, "gpu%d", c->device);
    buf->trace_id = w->sink.iface->buffer(w->sink.ctx, name, buf->size,
                                          buf->host ? TRACE_LOC_HOST : TRACE_LOC_DEVICE,
                                          buf->host ? NULL : dev, buf->host);
    if (buf->trace_id == TRACE_NONE) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void sim_buffer_free(sched_backend *b, sched_buffer *buf)
{
    (void)b;
    free(buf);
}

/* ------------------------------------------------------------------ */
/* Statements.                                                         */

uint32_t sim_cost_attrs(sim_world *w, trace_attr *attr, uint32_t n, uint64_t flops, bool f16,
                        uint64_t bytes, const trace_access *acc, uint32_t n_acc,
                        int64_t overhead_ns)
{
    uint64_t accessed = 0;
    for (uint32_t i = 0; i < n_acc && i < SIM_MAX_ACC; i++)
        accessed += acc[i].hi - acc[i].lo;
    if (flops > 0 && n < SIM_MAX_ATTR)
        attr[n++] = (trace_attr){ f16 ? w->id_flops_f16 : w->id_flops, sim_num(w, flops) };
    if (bytes != accessed && n < SIM_MAX_ATTR)
        attr[n++] = (trace_attr){ w->id_bytes, sim_num(w, bytes) };
    if (overhead_ns >= 0 && n < SIM_MAX_ATTR)
        attr[n++] = (trace_attr){ w->id_overhead_ns, sim_num(w, (uint64_t)overhead_ns) };
    return n;
}

static trace_access acc_of(sim_world *w, sched_tensor *t, uint8_t mode)
{
    trace_access a = { .buffer = sched_tensor_view(&w->sink, t), .mode = mode,
                       .form = TRACE_REF_WHOLE, .lo = 0, .hi = sched_tensor_nbytes(t) };
    return a;
}

static trace_stmt stmt(sim_world *w, uint32_t queue, trace_kind kind)
{
    trace_stmt s;
    trace_stmt_init(&s);
    (void)w;
    s.queue = queue;
    s.kind = kind;
    return s;
}

/* Where a tensor's bytes are: a GPU index, or -1 for host memory. */
static int place_of(const sched_tensor *t)
{
    if (!t->buffer || t->buffer->host)
        return -1;
    return ((sim_backend_ctx *)t->buffer->backend->ctx)->device;
}

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

/* Queues a copy src -> dst on GPU d's stream. */
static int queue_copy(sim_world *w, int d, sched_tensor *src, sched_tensor *dst)
{
    trace_access acc[2] = { acc_of(w, src, TRACE_R), acc_of(w, dst, TRACE_W) };
    trace_stmt s = stmt(w, w->streams[d].queue, TRACE_COPY);
    s.label = w->sink.iface->intern(w->sink.ctx, dst->name);
    s.access = acc;
    s.n_access = 2;
    sim_item it = { .kind = SIM_IT_COPY, .dur = w->m.copy_latency_ns,
                    .bytes = sched_tensor_nbytes(dst) };
    int engine;
    it.n_links = (int8_t)path(w, place_of(src), place_of(dst), it.links, &engine);
    it.engine = (int16_t)engine;
    w->host_t += sim_cost_submit(&w->m, TRACE_COPY);
    w->host_busy += sim_cost_submit(&w->m, TRACE_COPY);
    it.rob = sim_rob_reserve(w, &s);
    return sim_submit(w, d, &it);
}

static int gpu_set_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return queue_copy(ctx_of(b)->w, ctx_of(b)->device, src, dst);
}

static int gpu_get_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return queue_copy(ctx_of(b)->w, ctx_of(b)->device, src, dst);
}

static int record_on(sim_world *w, int d, uint32_t ev, uint32_t name, uint64_t gen)
{
    trace_stmt s = stmt(w, w->streams[d].queue, TRACE_RECORD);
    s.object = name;
    sim_item it = { .kind = SIM_IT_RECORD, .event = ev, .gen = gen };
    w->host_t += sim_cost_submit(&w->m, TRACE_RECORD);
    w->host_busy += sim_cost_submit(&w->m, TRACE_RECORD);
    it.rob = sim_rob_reserve(w, &s);
    return sim_submit(w, d, &it);
}

static int wait_on(sim_world *w, int d, uint32_t ev, uint32_t name, uint64_t gen)
{
    trace_stmt s = stmt(w, w->streams[d].queue, TRACE_WAIT);
    s.object = name;
    sim_item it = { .kind = SIM_IT_WAIT, .event = ev, .gen = gen };
    w->host_t += sim_cost_submit(&w->m, TRACE_WAIT);
    w->host_busy += sim_cost_submit(&w->m, TRACE_WAIT);
    it.rob = sim_rob_reserve(w, &s);
    return sim_submit(w, d, &it);
}

/* The event of GPU s -> GPU d copies, made on first use. */
static struct sim_xfer_event *xfer_event(sim_world *w, int s, int d)
{
    if (!w->xfer_ev_ready) {
        w->xfer_ev_ready = true;
        for (int a = 0; a < w->n_gpus; a++)
            for (int c = 0; c < w->n_gpus; c++) {
                char name[48];
                snprintf(name, sizeof name, "xfer.gpu%d>gpu%d", a, c);
                w->xfer_ev[a][c].ev = sim_event_alloc(w);
                w->xfer_ev[a][c].name = w->sink.iface->intern(w->sink.ctx, name);
            }
    }
    return &w->xfer_ev[s][d];
}

static int gpu_copy_async(sched_backend *b, sched_backend *src_b, sched_tensor *src,
                          sched_tensor *dst)
{
    sim_world *w = ctx_of(b)->w;
    int d = ctx_of(b)->device, s = ctx_of(src_b)->device;
    if (s < 0 || place_of(src) < 0)
        return queue_copy(w, d, src, dst) == 0 ? 1 : -1;   /* pull from host memory */
    if (s == d)
        return queue_copy(w, d, src, dst) == 0 ? 1 : -1;
    struct sim_xfer_event *xe = xfer_event(w, s, d);
    if (queue_copy(w, s, src, dst) != 0)
        return -1;
    xe->n++;
    if (record_on(w, s, xe->ev, xe->name, xe->n) != 0 || wait_on(w, d, xe->ev, xe->name, xe->n) != 0)
        return -1;
    return 1;
}

/* The host copies; returns when done. */
static int sim_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    sim_world *w = ctx_of(b)->w;
    trace_access acc[2] = { acc_of(w, src, TRACE_R), acc_of(w, dst, TRACE_W) };
    trace_stmt s = stmt(w, w->host_q, TRACE_COPY);
    s.label = w->sink.iface->intern(w->sink.ctx, dst->name);
    s.access = acc;
    s.n_access = 2;
    int64_t t0 = w->host_t;
    uint64_t pos = sim_rob_reserve(w, &s);
    int links[3], engine;
    int from = place_of(src), to = place_of(dst);
    int n = path(w, from, to, links, &engine);
    uint64_t bytes = sched_tensor_nbytes(dst);
    int rc = 0;
    if (n == 0) {
        int64_t dt = sim_cost_copy(&w->m, true, SIM_PATH_NONE, bytes);
        w->host_t += dt;
        w->host_busy += dt;
    } else {
        /* ggml's blocking set/get: a copy on a per-thread stream and a sync of
         * that stream only; the scheduler made the source ready before. */
        rc = sim_host_transfer(w, links, n, bytes);
        w->host_t += sim_cost_unblock(&w->m, TRACE_COPY, true);
        w->host_busy += sim_cost_unblock(&w->m, TRACE_COPY, true);
    }
    sim_rob_done(w, pos, t0, w->host_t - t0);
    w->stats.host_syncs++;
    return rc;
}

static int gpu_synchronize(sched_backend *b)
{
    sim_world *w = ctx_of(b)->w;
    int d = ctx_of(b)->device;
    trace_stmt s = stmt(w, w->host_q, TRACE_SYNC);
    s.sync_scope = TRACE_SYNC_QUEUE;
    s.object = w->streams[d].queue;
    int64_t t0 = w->host_t;
    uint64_t pos = sim_rob_reserve(w, &s);
    int rc = sim_block_stream(w, d);
    w->host_t += sim_cost_unblock(&w->m, TRACE_SYNC, true);
    w->host_busy += sim_cost_unblock(&w->m, TRACE_SYNC, true);
    sim_rob_done(w, pos, t0, w->host_t - t0);
    w->stats.host_syncs++;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Events.                                                             */

static sched_event *gpu_event_new(sched_backend *b, const char *name)
{
    sim_world *w = ctx_of(b)->w;
    sched_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->backend = b;
    ev->name = w->sink.iface->intern(w->sink.ctx, name);
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
    sim_world *w = ctx_of(b)->w;
    ev->n_records++;
    return record_on(w, ctx_of(b)->device, (uint32_t)(uintptr_t)ev->ctx, ev->name, ev->n_records);
}

static int gpu_event_wait(sched_backend *b, sched_event *ev)
{
    sim_world *w = ctx_of(b)->w;
    return wait_on(w, ctx_of(b)->device, (uint32_t)(uintptr_t)ev->ctx, ev->name, ev->n_records);
}

static int gpu_event_synchronize(sched_backend *b, sched_event *ev)
{
    sim_world *w = ctx_of(b)->w;
    trace_stmt s = stmt(w, w->host_q, TRACE_WAIT);
    s.object = ev->name;
    int64_t t0 = w->host_t;
    uint64_t pos = sim_rob_reserve(w, &s);
    int rc = sim_block_event(w, (uint32_t)(uintptr_t)ev->ctx, ev->n_records);
    w->host_t += sim_cost_unblock(&w->m, TRACE_WAIT, true);
    w->host_busy += sim_cost_unblock(&w->m, TRACE_WAIT, true);
    sim_rob_done(w, pos, t0, w->host_t - t0);
    w->stats.host_syncs++;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Compute.                                                            */

/* Whether an op runs at the f16 peak: a mul_mat of f16/bf16 weights. */
static bool node_f16(const sched_graph *g, const sched_tensor *t)
{
    return t->op == SCHED_OP_MUL_MAT && g->tensors[t->src[0]].type != SCHED_F32;
}

/* An op of the graph on a stream (host: false) or the host's pool. */
static int64_t node_ns(const sim_model *m, bool host, const sched_graph *g, const sched_tensor *t)
{
    uint64_t flops = sched_node_flops(g, t);
    bool half = node_f16(g, t);
    return sim_cost_op(m, host, half ? 0 : flops, half ? flops : 0, sched_node_bytes(g, t), -1);
}

static uint32_t node_accesses(sim_world *w, const sched_exec *x, int32_t ni, trace_access *acc)
{
    sched_tensor *t = &x->graph->tensors[ni];
    uint32_t n = 0;
    int n_src = t->op == SCHED_OP_CPY ? 1 : SCHED_MAX_SRC;
    for (int i = 0; i < n_src; i++) {
        int32_t si = x->src_of(x, ni, i);
        if (si < 0)
            continue;
        acc[n++] = acc_of(w, &x->graph->tensors[si], TRACE_R);
    }
    acc[n++] = acc_of(w, t, TRACE_W);
    return n;
}

/* split= and token=; returns their count. */
static uint32_t node_attrs(sim_world *w, const sched_exec *x, trace_attr *attr)
{
    attr[0] = (trace_attr){ w->id_split, sim_num(w, (uint64_t)x->split) };
    attr[1] = (trace_attr){ w->id_token, sim_num(w, x->eval) };
    return 2;
}

/* split=, token= and the cost attributes of node ni; returns their count. */
static uint32_t node_cost_attrs(sim_world *w, const sched_exec *x, int32_t ni,
                                const trace_access *acc, uint32_t n_acc, trace_attr *attr)
{
    const sched_tensor *t = &x->graph->tensors[ni];
    uint32_t n = node_attrs(w, x, attr);
    return sim_cost_attrs(w, attr, n, sched_node_flops(x->graph, t), node_f16(x->graph, t),
                          sched_node_bytes(x->graph, t), acc, n_acc, -1);
}

static int queue_kernel(sim_world *w, int d, uint32_t label, const trace_access *acc, uint32_t n,
                        const trace_attr *attr, uint32_t n_attr, int64_t dur)
{
    trace_stmt s = stmt(w, w->streams[d].queue, TRACE_OP);
    s.label = label;
    s.access = acc;
    s.n_access = n;
    s.attr = attr;
    s.n_attr = n_attr;
    sim_item it = { .kind = SIM_IT_KERNEL, .dur = dur };
    w->host_t += sim_cost_submit(&w->m, TRACE_OP);
    w->host_busy += sim_cost_submit(&w->m, TRACE_OP);
    it.rob = sim_rob_reserve(w, &s);
    return sim_submit(w, d, &it);
}

static sched_buffer *scratch_for(sim_world *w, sched_backend *b, int d, uint64_t bytes)
{
    if (w->scratch[d] && w->scratch[d]->size >= bytes)
        return w->scratch[d];
    char name[48];
    snprintf(name, sizeof name, "allreduce_bf16.gpu%d.%d", d, w->scratch_serial++);
    sched_buffer *buf = sim_buffer_alloc(b, name, bytes, SCHED_BUFFER_COMPUTE);
    if (buf) {
        free(w->scratch[d]);
        w->scratch[d] = buf;
    }
    return buf;
}

/* One rank's part of an all-reduce: a `collective` statement timed by the
 * alpha-beta model, with BF16 conversion kernels around it above the
 * threshold. */
static int gpu_all_reduce(sched_backend *b, const sched_exec *x, int32_t ni)
{
    sim_world *w = ctx_of(b)->w;
    int d = ctx_of(b)->device;
    sched_tensor *t = &x->graph->tensors[ni];
    sched_tensor *src = &x->graph->tensors[x->src_of(x, ni, 0)];
    int n = x->n_ranks > 1 ? x->n_ranks : 1;
    uint64_t bytes = sched_tensor_nbytes(src);
    bool bf16 = strcmp(x->allreduce, "bf16") == 0 && sched_tensor_nelements(src) >= x->allreduce_bf16_min;
    bool butterfly = strcmp(x->allreduce, "butterfly") == 0;
    uint64_t wire = bf16 ? bytes / 2 : bytes;
    trace_attr attr[SIM_MAX_ATTR];
    uint32_t n_attr = node_attrs(w, x, attr);
    trace_access acc[2];
    sched_buffer *scratch = NULL;
    char label[96];
    if (bf16) {
        scratch = scratch_for(w, b, d, wire);
        if (!scratch)
            return -1;
        acc[0] = acc_of(w, src, TRACE_R);
        acc[1] = (trace_access){ scratch->trace_id, TRACE_W, TRACE_REF_RANGE, 0, wire };
        snprintf(label, sizeof label, "%s.to_bf16", t->name);
        int64_t dur = sim_cost_op(&w->m, false, 0, 0, bytes + wire, -1);
        if (queue_kernel(w, d, w->sink.iface->intern(w->sink.ctx, label), acc, 2, attr, n_attr,
                         dur) != 0)
            return -1;
    }
    int rounds = 0;
    while ((1 << rounds) < n)
        rounds++;
    int64_t cost = sim_cost_allreduce(&w->m, (uint64_t)n, wire, butterfly);
    /* Bytes this rank sends, for the per-link summary. */
    if (n > 1) {
        if (butterfly) {
            for (int r = 0; r < rounds; r++) {
                int peer = d ^ (1 << r);
                if (peer < w->n_gpus)
                    w->e.links[w->link_p2p[d][peer]].bytes += wire;
            }
        } else {
            w->e.links[w->link_p2p[d][(d + 1) % n]].bytes += (uint64_t)(2.0 * (n - 1) / n * (double)wire);
        }
    }
    trace_stmt s = stmt(w, w->streams[d].queue, TRACE_COLLECTIVE);
    s.object = w->id_tp;
    s.coll_kind = bf16 ? w->id_allreduce_bf16 : w->id_allreduce;
    s.count = (uint64_t)n;          /* size=N: the communicator's participants */
    s.label = w->sink.iface->intern(w->sink.ctx, t->name);
    if (bf16) {
        acc[0] = (trace_access){ scratch->trace_id, TRACE_RW, TRACE_REF_RANGE, 0, wire };
        s.n_access = 1;
    } else {
        acc[0] = acc_of(w, src, TRACE_R);
        acc[1] = acc_of(w, t, TRACE_W);
        s.n_access = 2;
    }
    s.access = acc;
    s.attr = attr;
    s.n_attr = n_attr;
    /* The ring is replay's default; the trace names any other algorithm. */
    if (butterfly && n > 1)
        attr[s.n_attr++] = (trace_attr){ w->id_algorithm, w->id_butterfly };
    uint32_t gen = w->streams[d].coll_gen++;
    sim_item it = { .kind = SIM_IT_COLL };
    it.coll = sim_coll_instance(w, gen, n, cost);
    if (it.coll == TRACE_NONE)
        return -1;
    w->host_t += sim_cost_submit(&w->m, TRACE_COLLECTIVE);
    w->host_busy += sim_cost_submit(&w->m, TRACE_COLLECTIVE);
    it.rob = sim_rob_reserve(w, &s);
    if (sim_submit(w, d, &it) != 0)
        return -1;
    if (bf16) {
        acc[0] = (trace_access){ scratch->trace_id, TRACE_R, TRACE_REF_RANGE, 0, wire };
        acc[1] = acc_of(w, t, TRACE_W);
        snprintf(label, sizeof label, "%s.from_bf16", t->name);
        int64_t dur = sim_cost_op(&w->m, false, 0, 0, bytes + wire, -1);
        if (queue_kernel(w, d, w->sink.iface->intern(w->sink.ctx, label), acc, 2, attr, n_attr,
                         dur) != 0)
            return -1;
    }
    return 0;
}

static int gpu_graph_compute(sched_backend *b, const sched_exec *x)
{
    sim_world *w = ctx_of(b)->w;
    int d = ctx_of(b)->device;
    for (int k = 0; k < x->n_nodes; k++) {
        int32_t ni = x->nodes[k];
        sched_tensor *t = &x->graph->tensors[ni];
        if (sched_op_is_view(t->op))
            continue;
        if (t->op == SCHED_OP_ALL_REDUCE) {
            if (gpu_all_reduce(b, x, ni) != 0)
                return -1;
            continue;
        }
        trace_access acc[SCHED_MAX_SRC + 1];
        trace_attr attr[SIM_MAX_ATTR];
        uint32_t n = node_accesses(w, x, ni, acc);
        uint32_t n_attr = node_cost_attrs(w, x, ni, acc, n, attr);
        if (queue_kernel(w, d, w->sink.iface->intern(w->sink.ctx, t->name), acc, n, attr, n_attr,
                         node_ns(&w->m, false, x->graph, t)) != 0)
            return -1;
    }
    return 0;
}

static int cpu_graph_compute(sched_backend *b, const sched_exec *x)
{
    sim_world *w = ctx_of(b)->w;
    for (int k = 0; k < x->n_nodes; k++) {
        int32_t ni = x->nodes[k];
        sched_tensor *t = &x->graph->tensors[ni];
        if (sched_op_is_view(t->op))
            continue;
        trace_access acc[SCHED_MAX_SRC + 1];
        trace_attr attr[SIM_MAX_ATTR];
        uint32_t n = node_accesses(w, x, ni, acc);
        trace_stmt s = stmt(w, w->host_q, TRACE_OP);
        s.label = w->sink.iface->intern(w->sink.ctx, t->name);
        s.access = acc;
        s.n_access = n;
        s.attr = attr;
        s.n_attr = node_cost_attrs(w, x, ni, acc, n, attr);
        int64_t dur = node_ns(&w->m, true, x->graph, t);
        uint64_t pos = sim_rob_reserve(w, &s);
        sim_rob_done(w, pos, w->host_t, dur);
        w->host_t += dur;
        w->host_busy += dur;
    }
    return 0;
}

static const sched_backend_iface gpu_iface = {
    .get_name = sim_name,
    .device_kind = gpu_kind,
    .supports_op = NULL,
    .supports_buffer = NULL,
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
        if (d < w->n_gpus)
            snprintf(c->name, sizeof c->name, "GPU%d", d);
        else
            snprintf(c->name, sizeof c->name, "CPU");
        w->backends[d].iface = d < w->n_gpus ? &gpu_iface : &cpu_iface;
        w->backends[d].ctx = c;
        w->backend_ptrs[d] = &w->backends[d];
    }
}
