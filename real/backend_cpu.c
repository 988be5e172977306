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
 * Recording: at trace level `stream` one host op per node, with the time
 * from its start to the barrier after it. At level `thread` each pool
 * thread is a host queue (thread 0 is `host`): per node, one op per
 * non-empty chunk (label NODE#i, writing only that chunk's bytes), and a
 * `barrier cpu.pool count=N` for each barrier crossing, the start and end
 * of the job included (the pool's idle and final barriers order the
 * workers after the host's earlier statements and the host's later ones
 * after the workers). The checker then verifies the pool's own barrier
 * placement; the test-only option skip_barrier_after drops one barrier
 * and its statements, and the chunks race.
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
    uint32_t *thread_q;             /* queue per pool thread; [0] = host */
    uint32_t barrier_name;
    /* The job being run (set by the host before real_pool_run). */
    const sched_exec *x;
    real_kernel_args *args;
    int32_t *nodes;                 /* compute nodes of the job */
    int n_nodes;
    trace_access *acc;              /* per node: SCHED_MAX_SRC + 1 accesses */
    int *n_acc;
    int64_t *t_start, *t_end;       /* per node, thread 0's view */
    int cap_nodes;
    bool thread_level;
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
    cpu_backend *cb = b->ctx;
    return real_buffer_new(b, cb->rc, name, size, usage, true, NULL);
}

static void cpu_buffer_free(sched_backend *b, sched_buffer *buf)
{
    (void)b;
    real_buffer_free(buf);
}

/* A blocking copy by the host: src must be complete (the scheduler
 * synchronised its backend). */
static int cpu_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    cpu_backend *cb = b->ctx;
    real_ctx *c = cb->rc;
    void *s = real_tensor_data(src), *d = real_tensor_data(dst);
    if (!s || !d)
        return -1;
    uint64_t n = sched_tensor_nbytes(src) < sched_tensor_nbytes(dst) ? sched_tensor_nbytes(src)
                                                                      : sched_tensor_nbytes(dst);
    int64_t t0 = real_now_ns();
    memcpy(d, s, n);
    int64_t t1 = real_now_ns();
    if (c->recording) {
        trace_stmt st;
        trace_stmt_init(&st);
        trace_access acc[2];
        uint32_t vs = real_rec_tensor(c, src), vd = real_rec_tensor(c, dst);
        if (vs == TRACE_NONE || vd == TRACE_NONE)
            return 0;
        acc[0] = (trace_access){ vs, TRACE_R, n == sched_tensor_nbytes(src) ? TRACE_REF_WHOLE : TRACE_REF_RANGE, 0, n };
        acc[1] = (trace_access){ vd, TRACE_W, n == sched_tensor_nbytes(dst) ? TRACE_REF_WHOLE : TRACE_REF_RANGE, 0, n };
        char label[SCHED_NAME_MAX + 8];
        snprintf(label, sizeof label, "cpy:%s", dst->name);
        trace_attr attrs[2];
        st.queue = c->host_q;
        st.kind = TRACE_COPY;
        st.label = real_rec_intern(c, label);
        st.access = acc;
        st.n_access = 2;
        st.attr = attrs;
        st.n_attr = real_rec_attrs(c, attrs, -1);
        st.t = t0;
        st.dur = t1 - t0;
        real_rec_append(c, &st);
    }
    return 0;
}

static void record_barrier(cpu_backend *cb, int ith, int64_t t0, int64_t t1)
{
    trace_stmt st;
    trace_stmt_init(&st);
    st.queue = cb->thread_q[ith];
    st.kind = TRACE_BARRIER;
    st.object = cb->barrier_name;
    st.count = (uint64_t)cb->n_threads;
    st.t = t0;
    st.dur = t1 - t0;
    real_rec_append(cb->rc, &st);
}

static void record_chunk(cpu_backend *cb, int k, int ith, int nth, int64_t t0, int64_t t1)
{
    real_ctx *c = cb->rc;
    uint64_t lo, hi;
    real_kernel_chunk(&cb->args[k], ith, nth, &lo, &hi);
    if (lo >= hi)
        return;
    trace_access acc[SCHED_MAX_SRC + 1];
    int n = cb->n_acc[k];
    memcpy(acc, &cb->acc[k * (SCHED_MAX_SRC + 1)], (size_t)n * sizeof *acc);
    /* The write is the last access: narrow it to this chunk. */
    if (n > 0 && acc[n - 1].mode == TRACE_W) {
        acc[n - 1].form = TRACE_REF_RANGE;
        acc[n - 1].lo = lo;
        acc[n - 1].hi = hi;
    }
    char label[SCHED_NAME_MAX + 16];
    snprintf(label, sizeof label, "%s#%d", cb->x->graph->tensors[cb->nodes[k]].name, ith);
    trace_stmt st;
    trace_stmt_init(&st);
    st.queue = cb->thread_q[ith];
    st.kind = TRACE_OP;
    st.label = real_rec_intern(c, label);
    st.access = acc;
    st.n_access = (uint32_t)n;
    st.t = t0;
    st.dur = t1 - t0;
    real_rec_append(c, &st);
}

static void cpu_job(void *arg, int ith, int nth)
{
    cpu_backend *cb = arg;
    bool tl = cb->thread_level;
    if (tl)
        record_barrier(cb, ith, real_now_ns(), real_now_ns());   /* the start crossing */
    for (int k = 0; k < cb->n_nodes; k++) {
        int64_t t0 = real_now_ns();
        if (ith == 0)
            cb->t_start[k] = t0;
        if (real_kernel_run(&cb->args[k], ith, nth) != REAL_OK && ith == 0)
            cb->status = REAL_EUNSUPPORTED;
        int64_t t1 = real_now_ns();
        if (tl)
            record_chunk(cb, k, ith, nth, t0, t1);
        if (k + 1 < cb->n_nodes) {
            if (k != cb->rc->opt.skip_barrier_after) {
                real_pool_barrier(cb->pool);
                if (tl)
                    record_barrier(cb, ith, t1, real_now_ns());
            }
        }
        if (ith == 0)
            cb->t_end[k] = real_now_ns();
    }
    if (tl)
        record_barrier(cb, ith, real_now_ns(), real_now_ns());   /* the end crossing */
}

static int ensure_nodes(cpu_backend *cb, int n)
{
    if (n <= cb->cap_nodes)
        return 0;
    int cap = n + 16;
    real_kernel_args *a = realloc(cb->args, (size_t)cap * sizeof *a);
    if (a)
        cb->args = a;
    int32_t *nd = realloc(cb->nodes, (size_t)cap * sizeof *nd);
    if (nd)
        cb->nodes = nd;
    trace_access *acc = realloc(cb->acc, (size_t)cap * (SCHED_MAX_SRC + 1) * sizeof *acc);
    if (acc)
        cb->acc = acc;
    int *na = realloc(cb->n_acc, (size_t)cap * sizeof *na);
    if (na)
        cb->n_acc = na;
    int64_t *ts = realloc(cb->t_start, (size_t)cap * sizeof *ts);
    if (ts)
        cb->t_start = ts;
    int64_t *te = realloc(cb->t_end, (size_t)cap * sizeof *te);
    if (te)
        cb->t_end = te;
    if (!a || !nd || !acc || !na || !ts || !te)
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
    real_coll_group_of(x->graph, node, &rank, &n);
    const sched_tensor *t = &x->graph->tensors[node];
    if (n > 1) {
        char msg[256];
        snprintf(msg, sizeof msg, "all_reduce group %d: rank %d (%s) is on the cpu backend, which "
                 "cannot join a cross-device all_reduce: give every rank a cpustream device",
                 (int)t->param, rank, t->name);
        real_fail(c, msg);
        return -1;
    }
    a->bf16_wire = x->allreduce && strcmp(x->allreduce, "bf16") == 0 &&
                   sched_tensor_nelements(&x->graph->tensors[t->src[0]]) >= x->allreduce_bf16_min;
    return 0;
}

static int cpu_graph_compute(sched_backend *b, const sched_exec *x)
{
    cpu_backend *cb = b->ctx;
    real_ctx *c = cb->rc;
    c->cur_eval = x->eval;
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
        int n = real_node_args(c, x, node, &cb->args[k], &cb->acc[k * (SCHED_MAX_SRC + 1)], true);
        if (n < 0)
            return -1;
        if (t->op == SCHED_OP_ALL_REDUCE && allreduce_args(c, x, node, &cb->args[k]) != 0)
            return -1;
        cb->n_acc[k] = n;
        cb->nodes[k] = node;
        cb->n_nodes++;
    }
    cb->thread_level = c->recording && c->opt.trace_level == REAL_TRACE_THREAD;
    if (cb->n_nodes > 0)
        real_pool_run(cb->pool, cpu_job, cb);
    if (c->recording && !cb->thread_level) {
        trace_attr attrs[2];
        uint32_t n_attr = real_rec_attrs(c, attrs, x->split);
        for (int k = 0; k < cb->n_nodes; k++) {
            trace_stmt st;
            trace_stmt_init(&st);
            st.queue = c->host_q;
            st.kind = TRACE_OP;
            st.label = real_rec_intern(c, x->graph->tensors[cb->nodes[k]].name);
            st.access = &cb->acc[k * (SCHED_MAX_SRC + 1)];
            st.n_access = (uint32_t)cb->n_acc[k];
            st.attr = attrs;
            st.n_attr = n_attr;
            st.t = cb->t_start[k];
            st.dur = cb->t_end[k] - cb->t_start[k];
            real_rec_append(c, &st);
        }
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
    cb->pool = real_pool_new(cb->n_threads, barrier);
    cb->thread_q = calloc((size_t)cb->n_threads, sizeof *cb->thread_q);
    if (!cb->pool || !cb->thread_q) {
        snprintf(err, errlen, "cpu: cannot start a pool of %d threads", cb->n_threads);
        goto fail;
    }
    cb->thread_q[0] = c->host_q;
    if (c->recording && c->opt.trace_level == REAL_TRACE_THREAD) {
        for (int i = 1; i < cb->n_threads; i++) {
            char name[32];
            snprintf(name, sizeof name, "cpu.t%d", i);
            cb->thread_q[i] = real_rec_queue(c, name, TRACE_QUEUE_HOST, NULL);
        }
        cb->barrier_name = real_rec_intern(c, "cpu.pool");
    }
    return &cb->base;
fail:
    real_cpu_free(&cb->base);
    return NULL;
}

void real_cpu_free(sched_backend *b)
{
    if (!b)
        return;
    cpu_backend *cb = b->ctx;
    real_pool_free(cb->pool);
    free(cb->thread_q);
    free(cb->args);
    free(cb->nodes);
    free(cb->acc);
    free(cb->n_acc);
    free(cb->t_start);
    free(cb->t_end);
    free(cb);
}
