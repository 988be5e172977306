/*
 * record.c -- how the real backends write the trace.
 *
 * The conventions are the simulated backend's (docs/trace-format.md):
 *
 *   queues    `host` (the thread that drives the scheduler), one stream
 *             queue per cpustream device (`cs0` device=cs0, ...), and at
 *             trace level `thread` one host queue per worker of the cpu pool
 *             (`cpu.t1` ...; the pool's thread 0 is the host itself);
 *   buffers   each buffer_alloc is a root buffer (device=csN, or host), each
 *             tensor a view of it (sched_tensor_view), so that allocator
 *             reuse shows as overlapping views;
 *   ops       one `op` per graph node (label = tensor name) reading its
 *             sources and writing its bytes; at trace level `thread` one op
 *             per node chunk (label NODE#i) writing only its chunk, and a
 *             `barrier cpu.pool count=N` per pool barrier crossing;
 *   copies    `copy` on the queue that performs it (the host for blocking
 *             copies, the device queue for asynchronous ones, by=host);
 *   syncs     `record`/`wait` for events (a device queue's wait, or the
 *             host's event synchronize), `sync csN` for synchronize.
 *
 * Statements are appended when the host submits them (the file order is
 * the submission order the checker needs); asynchronous ones get their
 * observed times (CLOCK_MONOTONIC ns) through trace_recorder_set_time when
 * they complete. Sinks are not all thread-safe (the in-memory one is not),
 * so every call goes through one lock.
 */
#include "real_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t real_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t real_rec_append(real_ctx *c, trace_stmt *s)
{
    if (!c->recording)
        return UINT64_MAX;
    pthread_mutex_lock(&c->rec_lock);
    uint64_t seq = c->sink.iface->append(c->sink.ctx, s);
    pthread_mutex_unlock(&c->rec_lock);
    return seq == (uint64_t)TRACE_NONE ? UINT64_MAX : seq;
}

void real_rec_set_time(real_ctx *c, uint64_t seq, int64_t t, int64_t dur)
{
    if (!c->recording || !c->rec || seq == UINT64_MAX)
        return;
    trace_recorder_set_time(c->rec, seq, t, dur);
}

uint32_t real_rec_intern(real_ctx *c, const char *s)
{
    if (!c->recording)
        return TRACE_NONE;
    pthread_mutex_lock(&c->rec_lock);
    uint32_t id = c->sink.iface->intern(c->sink.ctx, s);
    pthread_mutex_unlock(&c->rec_lock);
    return id;
}

uint32_t real_rec_queue(real_ctx *c, const char *name, trace_queue_kind kind, const char *device)
{
    if (!c->recording)
        return TRACE_NONE;
    pthread_mutex_lock(&c->rec_lock);
    uint32_t id = c->sink.iface->queue(c->sink.ctx, name, kind, device);
    pthread_mutex_unlock(&c->rec_lock);
    return id;
}

uint32_t real_rec_root(real_ctx *c, const char *name, uint64_t size, bool host, const char *device)
{
    if (!c->recording)
        return TRACE_NONE;
    pthread_mutex_lock(&c->rec_lock);
    uint32_t id = c->sink.iface->buffer(c->sink.ctx, name, size ? size : 1,
                                        host ? TRACE_LOC_HOST : TRACE_LOC_DEVICE,
                                        host ? NULL : device, false);
    pthread_mutex_unlock(&c->rec_lock);
    return id;
}

uint32_t real_rec_view_of(real_ctx *c, uint32_t parent, const char *name, uint64_t off, uint64_t size)
{
    if (!c->recording || parent == TRACE_NONE)
        return TRACE_NONE;
    pthread_mutex_lock(&c->rec_lock);
    uint32_t id = c->sink.iface->view(c->sink.ctx, name, parent, off, size);
    pthread_mutex_unlock(&c->rec_lock);
    return id;
}

uint32_t real_rec_tensor(real_ctx *c, sched_tensor *t)
{
    if (!c->recording || !t->buffer)
        return TRACE_NONE;
    pthread_mutex_lock(&c->rec_lock);
    uint32_t id = sched_tensor_view(&c->sink, t);
    pthread_mutex_unlock(&c->rec_lock);
    return id;
}

uint32_t real_rec_attrs(real_ctx *c, trace_attr *attrs, int split)
{
    if (!c->recording)
        return 0;
    char v[32];
    uint32_t n = 0;
    snprintf(v, sizeof v, "%llu", (unsigned long long)c->cur_eval);
    attrs[n++] = (trace_attr){ real_rec_intern(c, "token"), real_rec_intern(c, v) };
    if (split >= 0) {
        snprintf(v, sizeof v, "%d", split);
        attrs[n++] = (trace_attr){ real_rec_intern(c, "split"), real_rec_intern(c, v) };
    }
    return n;
}

/* ------------------------------------------------------------------ */

static void tensor_of(const sched_tensor *t, void *data, real_tensor *out)
{
    out->type = t->type;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->data = data;
}

int real_node_args(real_ctx *c, const sched_exec *x, int32_t node, real_kernel_args *a,
                   trace_access *acc, bool record)
{
    sched_graph *g = x->graph;
    sched_tensor *t = &g->tensors[node];
    memset(a, 0, sizeof *a);
    a->op = t->op;
    a->param = t->param;
    void *dd = real_tensor_data(t);
    if (!dd)
        return -1;
    tensor_of(t, dd, &a->dst);
    int n_acc = 0;
    for (int i = 0; i < SCHED_MAX_SRC; i++) {
        if (t->src[i] < 0)
            continue;
        int32_t orig = t->src[i];
        int32_t act = x->src_of ? x->src_of(x, node, i) : orig;
        sched_tensor *ot = &g->tensors[orig], *at = &g->tensors[act];
        uint64_t extra = (act != orig && ot->view_src >= 0) ? ot->view_offs : 0;
        char *base = real_tensor_data(at);
        if (!base)
            return -1;
        tensor_of(ot, base + extra, &a->src[i]);
        a->n_src = i + 1;
        /* A cpy's second source is its destination: written, not read (as
         * the simulated backend records it); a read of the whole of it
         * would race with the other pool threads' chunks. */
        if (record && c->recording && !(t->op == SCHED_OP_CPY && i == 1)) {
            uint32_t v = real_rec_tensor(c, at);
            if (v != TRACE_NONE) {
                uint64_t lo = extra, hi = extra + sched_tensor_nbytes(ot);
                uint64_t whole = sched_tensor_nbytes(at);
                bool full = lo == 0 && hi == whole;
                acc[n_acc++] = (trace_access){ v, TRACE_R, full ? TRACE_REF_WHOLE : TRACE_REF_RANGE,
                                               lo, hi > whole ? whole : hi };
            }
        }
    }
    if (record && c->recording) {
        uint32_t v = real_rec_tensor(c, t);
        if (v != TRACE_NONE)
            acc[n_acc++] = (trace_access){ v, TRACE_W, TRACE_REF_WHOLE, 0, sched_tensor_nbytes(t) };
    }
    return n_acc;
}
