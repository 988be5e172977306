/*
 * backend_cpustream.c -- `cpustream`: an emulated asynchronous device.
 *
 * Each instance is a device: its own memory (buffers counted against a
 * capacity, `mem=`), one in-order command queue, and a worker thread that
 * serves it, computing on a small pool of its own (the worker is the
 * pool's thread 0). The host's calls only enqueue and return:
 *
 *   graph_compute   one COMPUTE command with the kernel arguments of the
 *                   split's nodes, resolved at submission (the scheduler
 *                   has fixed every tensor's place);
 *   set/get_async   a COPY command between host memory and the device;
 *   copy_async      from another cpustream: a COPY on the *source* queue
 *                   (after the work that produced it), then an internal
 *                   event recorded there and waited for here; from host
 *                   memory (the cpu backend): a COPY on this queue;
 *   event_record    a RECORD command: the event completes when the worker
 *                   reaches it;
 *   event_wait      a WAIT command: the worker blocks until the event's
 *                   most recent record (at submission) has completed;
 *   synchronize, event_synchronize: the host blocks.
 *
 * Jitter (`jitter=200us,seed=7`): before each command the worker sleeps a
 * random time in [0, jitter), drawn from a per-device xorshift generator
 * seeded with seed + device index. Commands still run in order, and in
 * order with respect to the events they wait for; but whatever the host
 * does without synchronising now happens at a random point of the queue's
 * progress, so a missing sync produces wrong numbers, not just a finding.
 *
 * A recording (sched/record.c) makes each call's statements on this
 * device's stream queue (`csN`) when the host submits it; the worker
 * reports each one's observed time with its ticket when it finishes it.
 *
 * All-reduce: a COMPUTE command's all_reduce node joins the rendezvous of
 * its group (collective.c) on the worker, which blocks this queue until
 * every rank's device reached it, as a collective blocks a CUDA stream.
 * With the bf16 strategy above the threshold it goes through the wire
 * buffer the scheduler gave the split: SRC converted into it, the sum of
 * every rank's wire rounded to bf16 back into it, then converted into DST
 * (the recording's NODE.to_bf16, `collective tp allreduce_bf16` and
 * NODE.from_bf16). After a failure of the set (a rendezvous timed out)
 * the worker skips its remaining kernels, and synchronize,
 * event_synchronize and graph_compute return -1.
 */
#include "real_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { CMD_COMPUTE, CMD_COPY, CMD_RECORD, CMD_WAIT } cmd_kind;

typedef struct cs_cmd {
    cmd_kind kind;
    struct cs_cmd *next;
    /* COMPUTE */
    real_kernel_args *args;
    sched_ticket *tickets;          /* per node: its statement */
    real_allreduce **ar;            /* per node: NULL, or the all_reduce it is */
    int n_nodes;
    /* COPY */
    void *dst;
    const void *src;
    uint64_t bytes;
    sched_ticket stmt;              /* COPY, RECORD, WAIT: its statement */
    /* RECORD / WAIT */
    real_event *ev;
    uint64_t ticket;                /* the record number */
} cs_cmd;

typedef struct cs_dev {
    sched_backend base;
    real_ctx *rc;
    int index;
    char name[16], qname[16];
    pthread_t worker;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cv_work, cv_idle;
    cs_cmd *head, *tail;
    uint64_t submitted, completed;
    bool stop;
    real_pool *pool;
    int64_t jitter_ns;
    uint64_t rng;
    uint64_t mem_cap, mem_used;
    /* The job the worker runs on its pool. */
    cs_cmd *job;
    /* The all-reduce in progress: set by pool thread 0, read by the others
     * after a pool barrier. */
    int64_t ar_gen;
    real_tensor ar_ranks[REAL_MAX_BACKENDS];
} cs_dev;

static const sched_backend_iface cs_iface;

bool real_is_cs(const sched_backend *b) { return b && b->iface == &cs_iface; }

static const char *cs_get_name(sched_backend *b) { return ((cs_dev *)b->ctx)->name; }
static sched_device_kind cs_kind(sched_backend *b) { (void)b; return SCHED_DEVICE_GPU; }

static bool cs_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    (void)b;
    return real_kernel_supports(g, t);
}

static const char *cs_trace_name(sched_backend *b) { return ((cs_dev *)b->ctx)->qname; }

static sched_buffer *cs_buffer_alloc(sched_backend *b, const char *name, uint64_t size,
                                     sched_buffer_usage usage)
{
    cs_dev *d = b->ctx;
    if (d->mem_used + size > d->mem_cap)
        return NULL;
    sched_buffer *buf = real_buffer_new(b, name, size, usage, false);
    if (buf)
        d->mem_used += size;
    return buf;
}

static void cs_buffer_free(sched_backend *b, sched_buffer *buf)
{
    cs_dev *d = b->ctx;
    d->mem_used -= buf->size;
    real_buffer_free(buf);
}

/* ------------------------------------------------------------------ */
/* The worker.                                                         */

static uint64_t next_rand(cs_dev *d)
{
    uint64_t x = d->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    d->rng = x;
    return x;
}

static void jitter(cs_dev *d)
{
    if (d->jitter_ns <= 0)
        return;
    int64_t ns = (int64_t)(next_rand(d) % (uint64_t)d->jitter_ns);
    struct timespec ts = { ns / 1000000000, ns % 1000000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void pool_sync(cs_dev *d, int nth)
{
    if (nth > 1)
        real_pool_barrier(d->pool);
}

/* Chunk ith of nth of `to` <- `from` converted (same shape). */
static void convert_chunk(const real_tensor *from, const real_tensor *to, int ith, int nth)
{
    int64_t n = 1;
    for (int i = 0; i < SCHED_MAX_DIMS; i++)
        n *= to->ne[i];
    int64_t lo = n * ith / nth, hi = n * (ith + 1) / nth;
    for (int64_t e = lo; e < hi; e++)
        real_store_f32(to, e, real_load_f32(from, e));
}

/* One rank's all-reduce on the pool: [to_bf16,] rendezvous, the sum of
 * every rank's tensor in rank order (chunked), departure [, from_bf16].
 * Thread 0 does the rendezvous; the barriers around it hand its result to
 * the others. Ends with a pool barrier crossed. */
static void run_allreduce(cs_dev *d, real_allreduce *ar, int ith, int nth)
{
    real_ctx *c = d->rc;
    int64_t t0 = real_now_ns();
    if (ar->bf16) {
        if (!real_failed(c))
            convert_chunk(&ar->src, &ar->wire, ith, nth);
        pool_sync(d, nth);
        if (ith == 0)
            sched_rec_done(&d->base, ar->to_wire, t0, real_now_ns() - t0);
    }
    int64_t t1 = real_now_ns();
    const real_tensor *mine = ar->bf16 ? &ar->wire : &ar->src;
    if (ith == 0)
        d->ar_gen = real_failed(c) ? -1 : real_coll_arrive(c, ar, mine, d->ar_ranks);
    pool_sync(d, nth);
    bool ok = d->ar_gen >= 0;
    if (ok) {
        real_kernel_args a = { .op = SCHED_OP_ALL_REDUCE, .ranks = d->ar_ranks,
                               .n_ranks = ar->n_ranks, .n_src = 1 };
        a.src[0] = *mine;
        a.dst = ar->dst;
        if (ar->bf16) {
            a.dst = ar->wire;
            a.dst.data = ar->sum;
        }
        real_kernel_run(&a, ith, nth);
    }
    pool_sync(d, nth);
    if (ith == 0 && ok) {
        if (real_coll_depart(c, ar, d->ar_gen) == 0 && ar->bf16)
            memcpy(ar->wire.data, ar->sum, (size_t)sched_dtype_size(SCHED_BF16) *
                   (size_t)(ar->wire.ne[0] * ar->wire.ne[1] * ar->wire.ne[2] * ar->wire.ne[3]));
        sched_rec_done(&d->base, ar->coll, t1, real_now_ns() - t1);
    }
    if (ar->bf16) {
        pool_sync(d, nth);
        int64_t t2 = real_now_ns();
        if (!real_failed(c))
            convert_chunk(&ar->wire, &ar->dst, ith, nth);
        pool_sync(d, nth);
        if (ith == 0)
            sched_rec_done(&d->base, ar->from_wire, t2, real_now_ns() - t2);
    }
}

static void compute_job(void *arg, int ith, int nth)
{
    cs_dev *d = arg;
    cs_cmd *cmd = d->job;
    for (int k = 0; k < cmd->n_nodes; k++) {
        if (cmd->ar[k]) {
            run_allreduce(d, cmd->ar[k], ith, nth);
            pool_sync(d, nth);
            continue;
        }
        int64_t t0 = real_now_ns();
        if (!real_failed(d->rc))
            real_kernel_run(&cmd->args[k], ith, nth);
        pool_sync(d, nth);
        if (ith == 0)
            sched_rec_done(&d->base, cmd->tickets[k], t0, real_now_ns() - t0);
    }
}

static void run_cmd(cs_dev *d, cs_cmd *cmd)
{
    real_ctx *c = d->rc;
    int64_t t0 = real_now_ns();
    switch (cmd->kind) {
    case CMD_COMPUTE:
        d->job = cmd;
        real_pool_run(d->pool, compute_job, d);
        break;
    case CMD_COPY:
        memcpy(cmd->dst, cmd->src, cmd->bytes);
        sched_rec_done(&d->base, cmd->stmt, t0, real_now_ns() - t0);
        break;
    case CMD_RECORD:
        pthread_mutex_lock(&c->ev_lock);
        if (cmd->ev->completed < cmd->ticket)
            cmd->ev->completed = cmd->ticket;
        pthread_cond_broadcast(&c->ev_cond);
        pthread_mutex_unlock(&c->ev_lock);
        sched_rec_done(&d->base, cmd->stmt, t0, 0);
        break;
    case CMD_WAIT:
        pthread_mutex_lock(&c->ev_lock);
        while (cmd->ev->completed < cmd->ticket)
            pthread_cond_wait(&c->ev_cond, &c->ev_lock);
        pthread_mutex_unlock(&c->ev_lock);
        sched_rec_done(&d->base, cmd->stmt, t0, real_now_ns() - t0);
        break;
    }
}

static void free_cmd(cs_cmd *cmd)
{
    for (int k = 0; cmd->ar && k < cmd->n_nodes + 1; k++) {
        if (cmd->ar[k])
            free(cmd->ar[k]->sum);
        free(cmd->ar[k]);
    }
    free(cmd->ar);
    free(cmd->args);
    free(cmd->tickets);
    free(cmd);
}

static void *cs_worker(void *p)
{
    cs_dev *d = p;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->head && !d->stop)
            pthread_cond_wait(&d->cv_work, &d->lock);
        if (!d->head)
            break;
        cs_cmd *cmd = d->head;
        pthread_mutex_unlock(&d->lock);
        jitter(d);
        run_cmd(d, cmd);
        pthread_mutex_lock(&d->lock);
        d->head = cmd->next;
        if (!d->head)
            d->tail = NULL;
        d->completed++;
        pthread_cond_broadcast(&d->cv_idle);
        free_cmd(cmd);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static void enqueue(cs_dev *d, cs_cmd *cmd)
{
    pthread_mutex_lock(&d->lock);
    cmd->next = NULL;
    if (d->tail)
        d->tail->next = cmd;
    else
        d->head = cmd;
    d->tail = cmd;
    d->submitted++;
    pthread_cond_signal(&d->cv_work);
    pthread_mutex_unlock(&d->lock);
}

static void drain(cs_dev *d)
{
    pthread_mutex_lock(&d->lock);
    uint64_t target = d->submitted;
    while (d->completed < target)
        pthread_cond_wait(&d->cv_idle, &d->lock);
    pthread_mutex_unlock(&d->lock);
}

/* A COPY of src into dst queued on device q (which performs it). */
static int enqueue_copy(cs_dev *q, sched_tensor *src, sched_tensor *dst)
{
    void *s = real_tensor_data(src), *dd = real_tensor_data(dst);
    if (!s || !dd)
        return -1;
    cs_cmd *cmd = calloc(1, sizeof *cmd);
    if (!cmd)
        return -1;
    uint64_t n = sched_tensor_nbytes(src) < sched_tensor_nbytes(dst) ? sched_tensor_nbytes(src)
                                                                      : sched_tensor_nbytes(dst);
    cmd->kind = CMD_COPY;
    cmd->src = s;
    cmd->dst = dd;
    cmd->bytes = n;
    cmd->stmt = sched_rec_ticket(&q->base);
    enqueue(q, cmd);
    return 0;
}

static int enqueue_event(cs_dev *d, real_event *ev, cmd_kind kind)
{
    cs_cmd *cmd = calloc(1, sizeof *cmd);
    if (!cmd)
        return -1;
    if (kind == CMD_RECORD) {
        ev->issued++;
        ev->base.n_records++;
    }
    cmd->kind = kind;
    cmd->ev = ev;
    cmd->ticket = ev->issued;   /* a wait: the most recent record; 0: none, no wait */
    cmd->stmt = sched_rec_ticket(&d->base);
    enqueue(d, cmd);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The interface.                                                      */

static int cs_set_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return enqueue_copy(b->ctx, src, dst);
}

static int cs_get_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return enqueue_copy(b->ctx, src, dst);
}

/* A copy on this queue from or to host memory (the cpu's) or another
 * device's: all of it is host-addressable. */
static int cs_copy_async(sched_backend *b, sched_backend *other, sched_tensor *src,
                         sched_tensor *dst)
{
    if (!real_is_cpu(other) && !real_is_cs(other))
        return 0;
    return enqueue_copy(b->ctx, src, dst) == 0 ? 1 : -1;
}

static int cs_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    /* The host copies; the scheduler made sure src is complete. Same as the
     * cpu backend's: both sides are host-addressable memory. */
    real_ctx *c = ((cs_dev *)b->ctx)->rc;
    sched_backend *cpu = c->backends[c->n_backends - 1];
    return cpu->iface->copy_sync(cpu, src, dst);
}

static int cs_synchronize(sched_backend *b)
{
    cs_dev *d = b->ctx;
    drain(d);
    return real_failed(d->rc) ? -1 : 0;
}

/* Resolves all_reduce node entry k of x (kernel arguments a) as *out
 * (owned by the command). */
static int prepare_allreduce(const sched_exec *x, int k, const real_kernel_args *a,
                             real_allreduce **out)
{
    int32_t node = x->nodes[k];
    const sched_tensor *t = &x->graph->tensors[node];
    real_allreduce *ar = calloc(1, sizeof *ar);
    if (!ar)
        return -1;
    *out = ar;
    ar->group = t->param;
    sched_exec_group(x, node, &ar->rank, &ar->n_ranks);
    ar->src = a->src[0];
    ar->dst = a->dst;
    ar->bf16 = sched_exec_bf16(x, node) && x->wire;
    const sched_ticket *tk = x->tickets ? &x->tickets[3 * k] : NULL;
    ar->coll = tk ? tk[0] : SCHED_NO_TICKET;
    ar->to_wire = tk ? tk[1] : SCHED_NO_TICKET;
    ar->from_wire = tk ? tk[2] : SCHED_NO_TICKET;
    if (ar->bf16) {
        int64_t ne = sched_tensor_nelements(&x->graph->tensors[t->src[0]]);
        uint64_t wire = (uint64_t)ne * sched_dtype_size(SCHED_BF16);
        ar->sum = malloc(wire ? wire : 1);
        if (!ar->sum || !x->wire->ctx || x->wire->size < wire)
            return -1;
        ar->wire = ar->src;
        ar->wire.type = SCHED_BF16;
        ar->wire.data = x->wire->ctx;
    }
    return 0;
}

static int cs_graph_compute(sched_backend *b, const sched_exec *x)
{
    cs_dev *d = b->ctx;
    if (real_failed(d->rc))
        return -1;
    cs_cmd *cmd = calloc(1, sizeof *cmd);
    if (!cmd)
        return -1;
    cmd->kind = CMD_COMPUTE;
    cmd->args = calloc((size_t)x->n_nodes + 1, sizeof *cmd->args);
    cmd->tickets = calloc((size_t)x->n_nodes + 1, sizeof *cmd->tickets);
    cmd->ar = calloc((size_t)x->n_nodes + 1, sizeof *cmd->ar);
    if (!cmd->args || !cmd->tickets || !cmd->ar)
        goto fail;
    for (int i = 0; i < x->n_nodes; i++) {
        int32_t node = x->nodes[i];
        const sched_tensor *t = &x->graph->tensors[node];
        if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
            continue;
        int k = cmd->n_nodes++;
        if (real_node_args(x, node, &cmd->args[k]) != 0)
            goto fail;
        cmd->tickets[k] = x->tickets ? x->tickets[3 * i] : SCHED_NO_TICKET;
        if (t->op == SCHED_OP_ALL_REDUCE && prepare_allreduce(x, i, &cmd->args[k], &cmd->ar[k]) != 0)
            goto fail;
    }
    enqueue(d, cmd);
    return 0;
fail:
    free_cmd(cmd);
    return -1;
}

static sched_event *cs_event_new(sched_backend *b, const char *name)
{
    (void)name;
    real_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->base.backend = b;
    ev->base.ctx = ev;
    ev->base.name = TRACE_NONE;
    return &ev->base;
}

static void cs_event_free(sched_backend *b, sched_event *ev)
{
    (void)b;
    free(ev ? ev->ctx : NULL);
}

static int cs_event_record(sched_backend *b, sched_event *ev)
{
    return enqueue_event(b->ctx, ev->ctx, CMD_RECORD);
}

static int cs_event_wait(sched_backend *b, sched_event *ev)
{
    return enqueue_event(b->ctx, ev->ctx, CMD_WAIT);
}

static int cs_event_synchronize(sched_backend *b, sched_event *sev)
{
    cs_dev *d = b->ctx;
    real_ctx *c = d->rc;
    real_event *ev = sev->ctx;
    uint64_t ticket = ev->issued;
    pthread_mutex_lock(&c->ev_lock);
    while (ev->completed < ticket)
        pthread_cond_wait(&c->ev_cond, &c->ev_lock);
    pthread_mutex_unlock(&c->ev_lock);
    return real_failed(c) ? -1 : 0;
}

static const sched_backend_iface cs_iface = {
    .get_name = cs_get_name,
    .device_kind = cs_kind,
    .trace_name = cs_trace_name,
    .supports_op = cs_supports_op,
    .buffer_alloc = cs_buffer_alloc,
    .buffer_free = cs_buffer_free,
    .set_async = cs_set_async,
    .get_async = cs_get_async,
    .copy_async = cs_copy_async,
    .copy_sync = cs_copy_sync,
    .synchronize = cs_synchronize,
    .graph_compute = cs_graph_compute,
    .event_new = cs_event_new,
    .event_free = cs_event_free,
    .event_record = cs_event_record,
    .event_wait = cs_event_wait,
    .event_synchronize = cs_event_synchronize,
};

sched_backend *real_cs_new(real_ctx *c, const real_cs_params *p, char *err, size_t errlen)
{
    cs_dev *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->base.iface = &cs_iface;
    d->base.ctx = d;
    d->rc = c;
    d->index = p->index;
    snprintf(d->name, sizeof d->name, "CS%d", p->index);
    snprintf(d->qname, sizeof d->qname, "cs%d", p->index);
    d->jitter_ns = p->jitter_ns;
    d->rng = (p->seed + (uint64_t)p->index) * 0x9e3779b97f4a7c15ull + 1;
    d->mem_cap = p->mem;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cv_work, NULL);
    pthread_cond_init(&d->cv_idle, NULL);
    /* Barrier of its pool: hybrid (it shares the CPUs with everything else). */
    d->pool = real_pool_new(p->threads > 0 ? p->threads : 1, REAL_BARRIER_HYBRID);
    if (!d->pool)
        goto fail;
    if (pthread_create(&d->worker, NULL, cs_worker, d) != 0)
        goto fail;
    d->started = true;
    return &d->base;
fail:
    snprintf(err, errlen, "%s: cannot start the device", d->qname);
    real_cs_free(&d->base);
    return NULL;
}

void real_cs_free(sched_backend *b)
{
    if (!b)
        return;
    cs_dev *d = b->ctx;
    if (d->started) {
        pthread_mutex_lock(&d->lock);
        d->stop = true;
        pthread_cond_signal(&d->cv_work);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->worker, NULL);
    }
    real_pool_free(d->pool);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cv_work);
    pthread_cond_destroy(&d->cv_idle);
    free(d);
}
