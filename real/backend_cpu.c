/*
 * backend_cpu.c -- the `cpu` backend: synchronous, every op, a thread pool.
 *
 * graph_compute runs the split's nodes in order on the pool: every thread
 * computes its chunk of a node (real_kernel_chunk), then the pool crosses
 * its barrier before the next node, since a node may read any byte its
 * predecessor wrote. It returns when the split is done, so the backend
 * needs no synchronize and no events (as ggml's CPU backend); copies are
 * the host's (copy_sync).
 *
 * What it reports to a recording (sched/record.c): at trace level
 * `stream` each node's time, from its start to the barrier after it
 * (thread 0's view). At level `thread` its pool threads are worker queues
 * (thread 0 is `host`): per node, each non-empty chunk of each thread
 * (sched_rec_chunk: the recording narrows the node's write to it), and
 * every barrier crossing, the start and end of the job included (the
 * pool's idle and final barriers order the workers after the host's
 * earlier statements and the host's later ones after the workers). The
 * checker then verifies the pool's own barrier placement; the test-only
 * option skip_barrier_after drops one barrier and its statement, and the
 * chunks race.
 */
#include "real_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cpu_backend {
    sched_backend base;
    real_ctx *rc;
    real_pool *pool;
    int n_threads;
    bool thread_level;              /* trace level thread: chunks and barriers */
    /* The job being run (set by the host before real_pool_run). */
    const sched_exec *x;
    real_kernel_args *args;
    int *entry;                     /* compute node k is entry entry[k] of x->nodes */
    int n_nodes;
    int64_t *t_start, *t_end;       /* per node, thread 0's view */
    int cap_nodes;
    real_status status;
} cpu_backend;

static const sched_backend_iface cpu_iface;

bool real_is_cpu(const sched_backend *b) { return b && b->iface == &cpu_iface; }

int real_cpu_threads(const sched_backend *b)
{
    return real_is_cpu(b) ? ((const cpu_backend *)b->ctx)->n_threads : 0;
}

static const char *cpu_name(sched_backend *b) { (void)b; return "CPU"; }
static sched_device_kind cpu_kind(sched_backend *b) { (void)b; return SCHED_DEVICE_CPU; }

static bool cpu_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    (void)b;
    return real_kernel_supports(g, t);
}

static sched_buffer *cpu_buffer_alloc(sched_backend *b, const char *name, uint64_t size,
                                      sched_buffer_usage usage)
{
    return real_buffer_new(b, name, size, usage, true);
}

static void cpu_buffer_free(sched_backend *b, sched_buffer *buf)
{
    (void)b;
    real_buffer_free(buf);
}

/* A blocking copy by the host: src must be complete (the scheduler
 * synchronised its backend). Either side may be a GPU's memory (a copy
 * the devices declined): real_copy_bytes reaches it. */
static int cpu_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    (void)b;
    void *s = real_tensor_data(src), *d = real_tensor_data(dst);
    if (!s || !d)
        return -1;
    uint64_t n = sched_tensor_nbytes(src) < sched_tensor_nbytes(dst) ? sched_tensor_nbytes(src)
                                                                      : sched_tensor_nbytes(dst);
    return real_copy_bytes(d, s, n);
}

static int cpu_workers(sched_backend *b)
{
    cpu_backend *cb = b->ctx;
    return cb->thread_level ? cb->n_threads - 1 : 0;
}

static void cpu_job(void *arg, int ith, int nth)
{
    cpu_backend *cb = arg;
    bool tl = cb->thread_level;
    if (tl) {
        int64_t t = real_now_ns();
        sched_rec_barrier(&cb->base, ith, t, 0);        /* the start crossing */
    }
    for (int k = 0; k < cb->n_nodes; k++) {
        int64_t t0 = real_now_ns();
        if (ith == 0)
            cb->t_start[k] = t0;
        if (real_kernel_run(&cb->args[k], ith, nth) != REAL_OK && ith == 0)
            cb->status = REAL_EUNSUPPORTED;
        int64_t t1 = real_now_ns();
        if (tl) {
            uint64_t lo, hi;
            real_kernel_chunk(&cb->args[k], ith, nth, &lo, &hi);
            if (lo < hi)
                sched_rec_chunk(&cb->base, cb->entry[k], ith, lo, hi, t0, t1 - t0);
        }
        if (k + 1 < cb->n_nodes && k != cb->rc->opt.skip_barrier_after) {
            real_pool_barrier(cb->pool);
            if (tl)
                sched_rec_barrier(&cb->base, ith, t1, real_now_ns() - t1);
        }
        if (ith == 0)
            cb->t_end[k] = real_now_ns();
    }
    if (tl) {
        int64_t t = real_now_ns();
        sched_rec_barrier(&cb->base, ith, t, 0);        /* the end crossing */
    }
}

static int ensure_nodes(cpu_backend *cb, int n)
{
    if (n <= cb->cap_nodes)
        return 0;
    int cap = n + 16;
    real_kernel_args *a = realloc(cb->args, (size_t)cap * sizeof *a);
    if (a)
        cb->args = a;
    int *e = realloc(cb->entry, (size_t)cap * sizeof *e);
    if (e)
        cb->entry = e;
    int64_t *ts = realloc(cb->t_start, (size_t)cap * sizeof *ts);
    if (ts)
        cb->t_start = ts;
    int64_t *te = realloc(cb->t_end, (size_t)cap * sizeof *te);
    if (te)
        cb->t_end = te;
    if (!a || !e || !ts || !te)
        return -1;
    cb->cap_nodes = cap;
    return 0;
}

/* An all_reduce on the cpu: a group of one rank (a tp model on one
 * device) is its source, through bf16 when the strategy says so, exactly
 * as the reference computes it. A rank of a larger group would block the
 * host, which drives the other ranks' devices: refused (the set fails). */
static int allreduce_args(real_ctx *c, const sched_exec *x, int32_t node, real_kernel_args *a)
{
    int rank, n;
    sched_exec_group(x, node, &rank, &n);
    const sched_tensor *t = &x->graph->tensors[node];
    if (n > 1) {
        char msg[256];
        snprintf(msg, sizeof msg, "all_reduce group %d: rank %d (%s) is on the cpu backend, which "
                 "cannot join a cross-device all_reduce: give every rank a cpustream device",
                 (int)t->param, rank, t->name);
        real_fail(c, msg);
        return -1;
    }
    a->bf16_wire = sched_exec_bf16(x, node);
    return 0;
}

static int cpu_graph_compute(sched_backend *b, const sched_exec *x)
{
    cpu_backend *cb = b->ctx;
    real_ctx *c = cb->rc;
    if (ensure_nodes(cb, x->n_nodes) != 0)
        return -1;
    cb->x = x;
    cb->n_nodes = 0;
    cb->status = REAL_OK;
    for (int i = 0; i < x->n_nodes; i++) {
        int32_t node = x->nodes[i];
        const sched_tensor *t = &x->graph->tensors[node];
        if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
            continue;
        int k = cb->n_nodes;
        if (real_node_args(x, node, &cb->args[k]) != 0)
            return -1;
        if (t->op == SCHED_OP_ALL_REDUCE && allreduce_args(c, x, node, &cb->args[k]) != 0)
            return -1;
        cb->entry[k] = i;
        cb->n_nodes++;
    }
    if (cb->n_nodes > 0)
        real_pool_run(cb->pool, cpu_job, cb);
    for (int k = 0; x->tickets && !cb->thread_level && k < cb->n_nodes; k++) {
        /* An all_reduce of one rank stands for its conversions too. */
        const sched_ticket *tk = &x->tickets[3 * cb->entry[k]];
        for (int part = 0; part < 3; part++)
            sched_rec_done(b, tk[part], cb->t_start[k], cb->t_end[k] - cb->t_start[k]);
    }
    return cb->status == REAL_OK ? 0 : -1;
}

static const sched_backend_iface cpu_iface = {
    .get_name = cpu_name,
    .device_kind = cpu_kind,
    .supports_op = cpu_supports_op,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .copy_sync = cpu_copy_sync,
    .graph_compute = cpu_graph_compute,
    .workers = cpu_workers,
};

sched_backend *real_cpu_new(real_ctx *c, int threads, real_barrier_kind barrier, char *err,
                            size_t errlen)
{
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    cb->base.iface = &cpu_iface;
    cb->base.ctx = cb;
    cb->rc = c;
    cb->n_threads = threads > 0 ? threads : real_cpus_allowed();
    cb->thread_level = c->opt.trace_level == REAL_TRACE_THREAD;
    cb->pool = real_pool_new(cb->n_threads, barrier);
    if (!cb->pool) {
        snprintf(err, errlen, "cpu: cannot start a pool of %d threads", cb->n_threads);
        real_cpu_free(&cb->base);
        return NULL;
    }
    return &cb->base;
}

void real_cpu_free(sched_backend *b)
{
    if (!b)
        return;
    cpu_backend *cb = b->ctx;
    real_pool_free(cb->pool);
    free(cb->args);
    free(cb->entry);
    free(cb->t_start);
    free(cb->t_end);
    free(cb);
}
