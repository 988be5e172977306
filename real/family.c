/*
 * family.c -- `run --devices cpustream[:N],...,cpu`: this computer.
 *
 * Three backend families, one machine. `cpustream[:N]` or `cuda[:GPU]`
 * items (real GPUs through the plugin of real/cuda/) and one `cpu`
 * (appended when missing) make a set of real backends (spec.c); the
 * machine runs on the wall clock (CLOCK_MONOTONIC), its devices report
 * from their own threads, and what they submitted goes to the trace at
 * once (a run that hangs for real or is killed keeps it), with observed
 * times when the work finishes.
 *
 * A run computes for real on deterministic weights and inputs
 * (values.c), and checks every evaluation's output against the reference
 * (reference.c: the same graphs, copied before planning, node by node,
 * each node chunked over a pool of as many threads as the cpu backend has
 * (the devices are synchronised while it checks, so the cores are free);
 * the prompt's and the decode's share their KV cache as the run's do).
 * The driver reads the outputs pipelined and leaves the checking time out
 * of the run's times (each check is a host op of the trace); the verdict
 * is "outputs match" or, when a synchronisation bug manifested, "outputs
 * DIFFER" (1).
 */
#include "real_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t real_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Run options of the machine.                                         */

static void help_barrier(char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "real: the cpu pool's barrier,");
    for (int k = 0; k < REAL_BARRIER_COUNT && used < cap; k++)
        used += (size_t)snprintf(buf + used, cap - used, "%s %s%s: %s", k ? ";" : "",
                                 real_barrier_str((real_barrier_kind)k),
                                 k == REAL_BARRIER_HYBRID ? " (default)" : "",
                                 real_barrier_help((real_barrier_kind)k));
}

static void help_threads(char *buf, size_t cap)
{
    snprintf(buf, cap, "real: cpu pool threads, 1 to 256 (default: the CPUs this process may use)");
}

static void help_trace_level(char *buf, size_t cap)
{
    snprintf(buf, cap, "real: stream (default) or thread (each pool thread a host queue with "
             "its node chunks and the pool's barriers, so check verifies them; split is another "
             "name for stream)");
}

static void help_seed(char *buf, size_t cap)
{
    snprintf(buf, cap, "real: weights, inputs and the default jitter seed (default 1)");
}

static void help_timeout(char *buf, size_t cap)
{
    snprintf(buf, cap, "real: how long a rank waits at an all-reduce (with --tp: at any MPI "
             "wait) before the run fails as hung (default 10000)");
}

static const sched_option real_options_list[] = {
    { "barrier", "NAME", help_barrier },
    { "threads", "N", help_threads },
    { "trace-level", "L", help_trace_level },
    { "seed", "N", help_seed },
    { "allreduce-timeout", "MS", help_timeout },
    { NULL, NULL, NULL },
};

static int parse_u64(const char *s, unsigned long long *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno || *end ? -1 : 0;
}

/* The run's options into o (and the seed); 0, or -1 with err. */
static int options_of(const sched_run_opts *ro, real_options *o, uint64_t *seed, trace_error *err)
{
    real_options_default(o);
    *seed = 1;
    for (int i = 0; i < ro->n_options; i++) {
        const char *name = ro->options[i].name, *v = ro->options[i].value;
        unsigned long long n;
        if (strcmp(name, "barrier") == 0) {
            int k = real_barrier_parse(v);
            if (k < 0)
                return trace_error_set(err, TRACE_EUSAGE, "unknown barrier '%s' (expected %s)", v,
                                       real_barrier_names()), -1;
            o->barrier = (real_barrier_kind)k;
        } else if (strcmp(name, "threads") == 0) {
            if (parse_u64(v, &n) || n < 1 || n > 256)
                return trace_error_set(err, TRACE_EUSAGE, "--threads expects 1 to 256, got '%s'",
                                       v), -1;
            o->threads = (int)n;
        } else if (strcmp(name, "trace-level") == 0) {
            if (strcmp(v, "stream") == 0 || strcmp(v, "split") == 0)
                o->trace_level = REAL_TRACE_STREAM;
            else if (strcmp(v, "thread") == 0)
                o->trace_level = REAL_TRACE_THREAD;
            else
                return trace_error_set(err, TRACE_EUSAGE, "--trace-level expects stream or thread, "
                                       "got '%s'", v), -1;
        } else if (strcmp(name, "seed") == 0) {
            if (parse_u64(v, &n))
                return trace_error_set(err, TRACE_EUSAGE, "--seed expects a non-negative integer, "
                                       "got '%s'", v), -1;
            *seed = n;
        } else if (strcmp(name, "allreduce-timeout") == 0) {
            if (parse_u64(v, &n) || n < 1 || n > 86400000)
                return trace_error_set(err, TRACE_EUSAGE, "--allreduce-timeout expects "
                                       "milliseconds from 1, got '%s'", v), -1;
            o->allreduce_timeout_ns = (int64_t)n * 1000000;
        }
    }
    o->seed = *seed;
    o->rank = ro->world > 0 ? ro->rank : 0;
    o->world = ro->world;
    return 0;
}

static int real_check(const sched_family *f, const sched_spec *spec, const sched_run_opts *ro,
                      sched_machine_info *info, trace_error *err)
{
    (void)f;
    real_options o;
    uint64_t seed;
    if (options_of(ro, &o, &seed, err) != 0)
        return -1;
    real_spec_item items[REAL_MAX_BACKENDS];
    char msg[512];
    int n = real_spec_items(spec, &o, items, msg, sizeof msg);
    if (n < 0)
        return trace_error_set(err, TRACE_EUSAGE, "%s", msg), -1;
    info->n_devices = 0;
    for (int i = 0; i < n; i++)
        info->n_devices += items[i].cpu ? 0 : items[i].count;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The machine.                                                        */

typedef struct real_machine {
    real_options o;
    uint64_t seed;
    char spec[256];
    sched_backend **be;
    size_t nb;
    int n_cs, n_cuda;
    sched_allreduce allreduce;
    int64_t bf16_min;
    sched_graph *rg[2];             /* the reference's copies of the run's graphs */
    int32_t out[2];
    real_ref *ref[2];
    real_pool *ref_pool;            /* the references' threads; NULL: one */
    float *got;
    size_t cap_got;
    real_error err;
    uint64_t n_evals;
    /* A rank of a job over processes (o.world > 0): each evaluation's output
     * goes to rank 0, which checks that every rank has the same bits. */
    bool isend_reuse;               /* the seeded bug: stage before MPI_Wait */
    /* A stage of a pipeline over processes (run --pp): the output goes to
     * rank + 1 instead, and the input activation comes from rank - 1. */
    bool pipeline;
    uint64_t n_recvd;               /* activations received */
    sched_rec *rec;                 /* the recording, when MPI statements go in it */
    sched_rec *checks;              /* the recording, for the output checks' host time */
    uint32_t q_mpi, b_send, b_recv; /* the request queue, the buffers */
    uint64_t msg_bytes;             /* the largest output */
    void *sendbuf, *recvbuf;
    void *req;                      /* the MPI_Isend in flight */
    uint64_t n_msgs, n_agree, n_disagree;
    bool finished;
    bool pending;                   /* a failed MPI request may still use the buffers */
} real_machine;

static int64_t m_now(void *ctx)
{
    (void)ctx;
    return real_now_ns();
}

static int m_backends(void *ctx, sched_backend ***out)
{
    real_machine *rm = ctx;
    *out = rm->be;
    return (int)rm->nb;
}

static int32_t output_of(const sched_graph *g)
{
    for (int32_t i = g->n_tensors - 1; i >= 0; i--)
        if (g->tensors[i].flags & SCHED_FLAG_OUTPUT)
            return i;
    return -1;
}

static int cpu_threads(const real_machine *rm);

static int m_adopt(void *ctx, const sched_graph *prompt, const sched_graph *decode, trace_error *err)
{
    real_machine *rm = ctx;
    const sched_graph *g[2] = { prompt, decode };
    int threads = cpu_threads(rm);
    if (threads > 1 && !(rm->ref_pool = real_pool_new(threads, REAL_BARRIER_HYBRID)))
        return trace_error_set(err, TRACE_ENOMEM, "cannot start the reference's threads"), -1;
    for (int k = 0; k < 2; k++) {
        if (!g[k])
            continue;
        if (!(rm->rg[k] = sched_graph_copy(g[k])))
            return trace_error_set(err, TRACE_ENOMEM, "out of memory for the reference"), -1;
        rm->out[k] = output_of(rm->rg[k]);
        rm->ref[k] = k == 0 ? real_ref_new(rm->rg[k], rm->seed)
                            : real_ref_new_shared(rm->rg[k], rm->seed, rm->ref[0]);
        if (!rm->ref[k])
            return trace_error_set(err, TRACE_ENOMEM, "out of memory for the reference"), -1;
        real_ref_set_allreduce(rm->ref[k], sched_allreduce_str(rm->allreduce), rm->bf16_min);
        real_ref_set_pool(rm->ref[k], rm->ref_pool);
        /* The host tensors the outputs are read into are f32. */
        uint64_t bytes = (uint64_t)sched_tensor_nelements(&g[k]->tensors[output_of(g[k])]) * 4;
        if (bytes > rm->msg_bytes)
            rm->msg_bytes = bytes;
    }
    if (rm->o.world > 1 && rm->msg_bytes) {
        rm->sendbuf = malloc(rm->msg_bytes);
        rm->recvbuf = malloc(rm->msg_bytes);
        if (!rm->sendbuf || !rm->recvbuf)
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    }
    return 0;
}

/* A weight or cache in a GPU's memory (a cuda device's buffers are device
 * memory, never the host's) is filled in host memory and copied. */
static int m_fill_weight(void *ctx, sched_tensor *t)
{
    real_machine *rm = ctx;
    void *d = real_tensor_data(t);
    if (!d)
        return -1;
    if (rm->n_cuda > 0 && !t->buffer->host) {
        uint64_t n = sched_tensor_nbytes(t);
        void *staged = malloc(n ? n : 1);
        if (!staged)
            return -1;
        real_fill_weight(t, staged, rm->seed);
        int rc = real_copy_bytes(d, staged, n);
        free(staged);
        return rc;
    }
    real_fill_weight(t, d, rm->seed);
    return 0;
}

static int recv_activation(real_machine *rm, sched_graph *g);

static int m_fill_inputs(void *ctx, sched_graph *g, uint64_t eval)
{
    real_machine *rm = ctx;
    if (real_set_inputs(rm->be, rm->nb, g, eval, rm->seed) != 0)
        return -1;
    return rm->pipeline && rm->o.rank > 0 ? recv_activation(rm, g) : 0;
}

/* ------------------------------------------------------------------ */
/* A rank's outputs over MPI.                                          */

static void m_recording(void *ctx, sched_rec *rec)
{
    real_machine *rm = ctx;
    rm->checks = rec;
    if (rm->o.world < 2 || !rm->msg_bytes)
        return;
    rm->rec = rec;
    if (rm->pipeline) {             /* a stage sends to the next one */
        if (rm->o.rank < rm->o.world - 1) {
            rm->q_mpi = sched_rec_queue(rec, "mpi", true, "nic");
            rm->b_send = sched_rec_buffer(rec, "sendbuf", rm->msg_bytes);
        }
        if (rm->o.rank > 0)
            rm->b_recv = sched_rec_buffer(rec, "recvbuf", rm->msg_bytes);
    } else if (rm->o.rank > 0) {
        rm->q_mpi = sched_rec_queue(rec, "mpi", true, "nic");
        rm->b_send = sched_rec_buffer(rec, "sendbuf", rm->msg_bytes);
    } else {
        rm->b_recv = sched_rec_buffer(rec, "recvbuf", rm->msg_bytes);
    }
}

static int msg_fail(real_machine *rm, const char *msg, trace_error *err)
{
    rm->pending = true;
    real_ctx *c = rm->nb ? real_ctx_of(rm->be[rm->nb - 1]) : NULL;
    if (c)
        real_fail(c, msg);
    return trace_error_set(err, TRACE_EUSAGE, "%s", msg), -1;
}

/* MPI_Wait of the send in flight: the host's wait of the event recorded
 * after it. */
static int wait_send(real_machine *rm, trace_error *err)
{
    if (!rm->req)
        return 0;
    char msg[512];
    int64_t t = real_now_ns();
    char what[96];
    snprintf(what, sizeof what, "MPI_Wait of its MPI_Isend of %s to rank %d",
             rm->pipeline ? "activations" : "outputs", rm->pipeline ? rm->o.rank + 1 : 0);
    int rc = real_mpi_wait(&rm->req, rm->o.allreduce_timeout_ns, what, msg, sizeof msg);
    sched_rec_stmt w = { .kind = TRACE_WAIT, .queue = sched_rec_host(rm->rec), .object = "isend",
                         .t = t, .dur = real_now_ns() - t };
    sched_rec_add(rm->rec, &w);
    return rc == 0 ? 0 : msg_fail(rm, msg, err);
}

/* Rank r > 0 sends output out to rank 0 (tag: the message's number):
 * staged into the send buffer, then MPI_Isend from it; the seeded bug
 * stages before waiting for the previous send. Rank 0 receives every
 * other rank's and compares the bits with its own. */
static int exchange_output(real_machine *rm, const sched_tensor *out, trace_error *err)
{
    uint64_t bytes = sched_tensor_nbytes(out);
    const void *mine = real_tensor_data(out);
    if (!rm->rec || bytes > rm->msg_bytes || !mine)
        return 0;
    int tag = (int)(rm->n_msgs++ % 32768);
    uint32_t host = sched_rec_host(rm->rec);
    trace_access whole = { sched_tensor_view(sched_rec_sink(rm->rec), (sched_tensor *)out),
                           TRACE_R, TRACE_REF_WHOLE, 0, bytes };
    /* One label per role (which output it is, is token=). */
    char label[32], msg[512];
    /* A pipeline: every stage but the last sends its activation on. */
    int peer = rm->pipeline ? rm->o.rank + 1 : 0;
    const char *what = rm->pipeline ? "activation" : "output";
    if (rm->pipeline ? peer < rm->o.world : rm->o.rank > 0) {
        if (!rm->isend_reuse && wait_send(rm, err) != 0)
            return -1;
        int64_t t = real_now_ns();
        memcpy(rm->sendbuf, mine, bytes);
        trace_access stage[2] = { whole, { rm->b_send, TRACE_W, TRACE_REF_RANGE, 0, bytes } };
        snprintf(label, sizeof label, "stage_%s", what);
        sched_rec_stmt st = { .kind = TRACE_OP, .queue = host, .label = label, .acc = stage,
                              .n_acc = 2, .t = t, .dur = real_now_ns() - t };
        sched_rec_add(rm->rec, &st);
        if (rm->isend_reuse && wait_send(rm, err) != 0)
            return -1;
        t = real_now_ns();
        if (real_mpi_isend(rm->sendbuf, bytes, peer, tag, &rm->req, msg, sizeof msg) != 0)
            return msg_fail(rm, msg, err);
        trace_access sent = { rm->b_send, TRACE_R, TRACE_REF_RANGE, 0, bytes };
        snprintf(label, sizeof label, "isend_%s", what);
        sched_rec_stmt send = { .kind = TRACE_SEND, .queue = rm->q_mpi, .stream = true,
                                .object = "world", .label = label, .rank = (uint32_t)rm->o.rank,
                                .peer = (uint32_t)peer, .tag = (uint64_t)tag, .acc = &sent, .n_acc = 1,
                                .t = t, .dur = 0 };
        sched_rec_add(rm->rec, &send);
        sched_rec_stmt rec = { .kind = TRACE_RECORD, .queue = rm->q_mpi, .stream = true,
                               .object = "isend", .t = real_now_ns(), .dur = 0 };
        sched_rec_add(rm->rec, &rec);
        return 0;
    }
    if (rm->pipeline)               /* the last stage: its outputs are the logits */
        return 0;
    for (int p = 1; p < rm->o.world; p++) {
        int64_t t = real_now_ns();
        if (real_mpi_recv(rm->recvbuf, bytes, p, tag, rm->o.allreduce_timeout_ns, msg,
                          sizeof msg) != 0)
            return msg_fail(rm, msg, err);
        trace_access got = { rm->b_recv, TRACE_W, TRACE_REF_RANGE, 0, bytes };
        snprintf(label, sizeof label, "recv_output");
        sched_rec_stmt recv = { .kind = TRACE_RECV, .queue = host, .object = "world",
                                .label = label, .rank = 0, .peer = (uint32_t)p,
                                .tag = (uint64_t)tag, .acc = &got, .n_acc = 1, .t = t,
                                .dur = real_now_ns() - t };
        sched_rec_add(rm->rec, &recv);
        t = real_now_ns();
        bool same = memcmp(rm->recvbuf, mine, bytes) == 0;
        rm->n_agree += same;
        rm->n_disagree += !same;
        trace_access cmp[2] = { { rm->b_recv, TRACE_R, TRACE_REF_RANGE, 0, bytes }, whole };
        snprintf(label, sizeof label, "compare_output");
        sched_rec_stmt op = { .kind = TRACE_OP, .queue = host, .label = label, .acc = cmp,
                              .n_acc = 2, .t = t, .dur = real_now_ns() - t };
        sched_rec_add(rm->rec, &op);
    }
    return 0;
}

/* A later stage of a pipeline: the input activation inp_act of g (its
 * set_inputs values replaced) is what rank - 1 sent: MPI_Recv into the
 * receive buffer (tag: the message's number, as the sender counts them),
 * then copied into the input. The buffer, not the tensor, is the request's:
 * a request that fails stays pending and keeps its buffer (m_free). */
static int recv_activation(real_machine *rm, sched_graph *g)
{
    sched_tensor *t = NULL;
    for (int32_t i = 0; i < g->n_tensors && !t; i++) {
        const char *nm = g->tensors[i].name;
        size_t len = strlen(nm);
        if ((g->tensors[i].flags & SCHED_FLAG_INPUT) && len >= 7 &&
            strcmp(nm + len - 7, "inp_act") == 0)
            t = &g->tensors[i];
    }
    void *d = t ? real_tensor_data(t) : NULL;
    uint64_t bytes = t ? sched_tensor_nbytes(t) : 0;
    if (!d || !rm->rec || !rm->recvbuf || bytes > rm->msg_bytes)
        return -1;
    int peer = rm->o.rank - 1, tag = (int)(rm->n_recvd++ % 32768);
    char msg[512];
    trace_error err = { 0 };
    int64_t t0 = real_now_ns();
    if (real_mpi_recv(rm->recvbuf, bytes, peer, tag, rm->o.allreduce_timeout_ns, msg,
                      sizeof msg) != 0)
        return msg_fail(rm, msg, &err);
    uint32_t host = sched_rec_host(rm->rec);
    trace_access got = { rm->b_recv, TRACE_W, TRACE_REF_RANGE, 0, bytes };
    sched_rec_stmt recv = { .kind = TRACE_RECV, .queue = host, .object = "world",
                            .label = "recv_activation", .rank = (uint32_t)rm->o.rank,
                            .peer = (uint32_t)peer, .tag = (uint64_t)tag, .acc = &got,
                            .n_acc = 1, .t = t0, .dur = real_now_ns() - t0 };
    if (sched_rec_add(rm->rec, &recv) != 0)
        return -1;
    t0 = real_now_ns();
    memcpy(d, rm->recvbuf, bytes);
    trace_access cp[2] = { { rm->b_recv, TRACE_R, TRACE_REF_RANGE, 0, bytes },
                           { sched_tensor_view(sched_rec_sink(rm->rec), t), TRACE_W,
                             TRACE_REF_WHOLE, 0, bytes } };
    sched_rec_stmt op = { .kind = TRACE_OP, .queue = host, .label = "unstage_activation",
                          .acc = cp, .n_acc = 2, .t = t0, .dur = real_now_ns() - t0 };
    return sched_rec_add(rm->rec, &op);
}

static int m_finish(void *ctx)
{
    real_machine *rm = ctx;
    if (rm->finished)
        return 0;
    rm->finished = true;
    /* A failed run does not wait for its last send: rank 0 may never take
     * it (the request stays pending; MPI_Finalize does not wait for it). */
    real_ctx *c = rm->nb ? real_ctx_of(rm->be[rm->nb - 1]) : NULL;
    if (c && real_failed(c)) {
        rm->pending = rm->pending || rm->req;
        return 0;
    }
    trace_error err = { 0 };
    return wait_send(rm, &err);
}

static int check_output(real_machine *rm, int phase, uint64_t eval, const sched_tensor *out,
                        trace_error *err);

/* The check of an output (the reference's evaluation, the comparison, the
 * exchange with rank 0) is host time like any other: it goes in the trace
 * as a host op `check:OUTPUT` with its duration, priced by itself
 * (overhead_ns= its duration), so that the trace's makespan and a replay of
 * it both hold it, and a calibration leaves it out of its fits. sched/run.c
 * leaves the same time out of ms/token. */
static int m_check_output(void *ctx, int phase, uint64_t eval, const sched_tensor *out,
                          trace_error *err)
{
    real_machine *rm = ctx;
    int64_t t0 = real_now_ns();
    int rc = check_output(rm, phase, eval, out, err);
    int64_t dur = real_now_ns() - t0;
    if (rc == 0 && rm->checks) {
        char label[SCHED_NAME_MAX + 8];
        snprintf(label, sizeof label, "check:%s", out->name);
        if (sched_rec_host_op(rm->checks, label, NULL, 0, dur, 0, t0, dur) != 0)
            return trace_error_set(err, TRACE_ENOMEM, "cannot record the check of %s",
                                   out->name), -1;
    }
    return rc;
}

static int check_output(real_machine *rm, int phase, uint64_t eval, const sched_tensor *out,
                        trace_error *err)
{
    real_ref *ref = rm->ref[phase];
    if (!ref || real_ref_eval(ref, eval) != 0)
        return trace_error_set(err, TRACE_EUSAGE, "the reference cannot evaluate the graph"), -1;
    size_t n = 0;
    const float *want = real_ref_tensor(ref, rm->rg[phase]->tensors[rm->out[phase]].name, &n);
    if (n > rm->cap_got) {
        float *g = realloc(rm->got, n * sizeof *g);
        if (!g)
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
        rm->got = g;
        rm->cap_got = n;
    }
    if (!want || n != (size_t)sched_tensor_nelements(out) || real_read_output(out, rm->got) != 0)
        return trace_error_set(err, TRACE_EUSAGE, "cannot read output %s", out->name), -1;
    real_compare_outputs(rm->got, want, n, &rm->err);
    rm->n_evals++;
    return exchange_output(rm, out, err);
}

static const char *m_error(void *ctx)
{
    real_machine *rm = ctx;
    return real_backends_error(rm->be, rm->nb);
}

static int cpu_threads(const real_machine *rm)
{
    return rm->nb ? real_cpu_threads(rm->be[rm->nb - 1]) : 0;
}

static void m_meta(void *ctx, sched_sink *sink)
{
    real_machine *rm = ctx;
    if (!sink->iface->meta)
        return;
    char buf[32];
    sink->iface->meta(sink->ctx, "devices", rm->spec);
    sink->iface->meta(sink->ctx, "barrier", real_barrier_str(rm->o.barrier));
    snprintf(buf, sizeof buf, "%d", cpu_threads(rm));
    sink->iface->meta(sink->ctx, "threads", buf);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)rm->seed);
    sink->iface->meta(sink->ctx, "seed", buf);
    sink->iface->meta(sink->ctx, "trace_level",
                      rm->o.trace_level == REAL_TRACE_THREAD ? "thread" : "stream");
    if (rm->o.world > 1)        /* a job's identity, for merge: tp and pp ranks differ */
        sink->iface->meta(sink->ctx, "parallel", rm->pipeline ? "pp" : "tp");
}

/* Copy placement: a cpustream device copies as ggml's CUDA backend does
 * (peer copies on the source's queue and an event, host copies pulled by
 * the destination where copy_from_host is on, else blocking); the cpu
 * backend is synchronous. */
static const sched_copy_traits *m_copy_traits(void *ctx, int backend)
{
    real_machine *rm = ctx;
    bool dev = (size_t)backend < rm->nb && (real_is_cs(rm->be[backend]) ||
                                            real_is_cuda(rm->be[backend]));
    return sched_copy_family(dev ? "cuda" : "cpu");
}

static void m_describe(void *ctx, char *buf, size_t cap)
{
    real_machine *rm = ctx;
    char devices[64] = "";
    if (rm->n_cs)
        snprintf(devices, sizeof devices, "%d cpustream %s + ", rm->n_cs,
                 rm->n_cs == 1 ? "device" : "devices");
    else if (rm->n_cuda)
        snprintf(devices, sizeof devices, "%d CUDA %s + ", rm->n_cuda,
                 rm->n_cuda == 1 ? "device" : "devices");
    int threads = cpu_threads(rm);
    char rank[64] = "";
    if (rm->o.world > 0)
        snprintf(rank, sizeof rank, "; %s %d of %d over MPI", rm->pipeline ? "stage" : "rank",
                 rm->o.rank, rm->o.world);
    snprintf(buf, cap, "%s (%sCPU, %d %s, %s barrier%s)", rm->spec, devices, threads,
             threads == 1 ? "thread" : "threads", real_barrier_str(rm->o.barrier), rank);
}

static int m_report(void *ctx, FILE *out, const char *db)
{
    real_machine *rm = ctx;
    const real_error *e = &rm->err;
    fprintf(out, "max abs error %.3g, max rel error %.3g against the reference (cpu, sequential): "
            "%llu values of %llu %s\n", e->max_abs, e->max_rel, (unsigned long long)e->n,
            (unsigned long long)rm->n_evals, rm->n_evals == 1 ? "evaluation" : "evaluations");
    if (e->n_nan)
        fprintf(out, "%llu %s NaN on one side only\n", (unsigned long long)e->n_nan,
                e->n_nan == 1 ? "value is" : "values are");
    if (rm->pipeline && rm->o.world > 1) {
        if (rm->o.rank > 0)
            fprintf(out, "pipeline: stage %d of %d, %llu activations received from rank %d over "
                    "MPI\n", rm->o.rank, rm->o.world, (unsigned long long)rm->n_recvd,
                    rm->o.rank - 1);
        if (rm->o.rank < rm->o.world - 1)
            fprintf(out, "pipeline: stage %d of %d, %llu activations sent to rank %d over MPI\n",
                    rm->o.rank, rm->o.world, (unsigned long long)rm->n_msgs, rm->o.rank + 1);
    } else if (rm->o.world > 1 && rm->o.rank == 0)
        fprintf(out, "ranks: %llu outputs of the other %d %s received over MPI, %llu "
                "bit-identical to rank 0's\n", (unsigned long long)(rm->n_agree + rm->n_disagree),
                rm->o.world - 1, rm->o.world == 2 ? "rank" : "ranks",
                (unsigned long long)rm->n_agree);
    else if (rm->o.world > 1)
        fprintf(out, "ranks: %llu outputs sent to rank 0 over MPI\n", (unsigned long long)rm->n_msgs);
    if (rm->n_disagree) {
        fprintf(out, "ranks DISAGREE: %llu outputs differ from rank 0's; see `syncsim check` of "
                "the merged job\n", (unsigned long long)rm->n_disagree);
        return 1;
    }
    if (e->n_nan > 0 || e->max_rel > REAL_RUN_TOLERANCE) {
        fprintf(out, "outputs DIFFER from the reference (max rel error above %g): a "
                "synchronisation bug manifested; see `syncsim check %s`\n", REAL_RUN_TOLERANCE, db);
        return 1;
    }
    fprintf(out, "outputs match%s (tolerance %g relative)\n", e->max_abs == 0 ? " exactly" : "",
            REAL_RUN_TOLERANCE);
    return 0;
}

static void m_free(void *ctx)
{
    real_machine *rm = ctx;
    if (rm->pending) {              /* MPI may still read or write them */
        real_mpi_abandon(rm->req);  /* a send never waited for */
        real_mpi_abandon(rm->sendbuf);
        real_mpi_abandon(rm->recvbuf);
    } else {
        free(rm->sendbuf);
        free(rm->recvbuf);
    }
    real_ref_free(rm->ref[1]);
    real_ref_free(rm->ref[0]);
    real_pool_free(rm->ref_pool);
    sched_graph_free(rm->rg[0]);
    sched_graph_free(rm->rg[1]);
    real_backends_free(rm->be, rm->nb);
    free(rm->got);
    free(rm);
}

static int m_read_i32(void *ctx, const sched_tensor *t, int32_t *out, int64_t n)
{
    (void)ctx;
    const void *d = real_tensor_data(t);
    if (!d || t->type != SCHED_I32 || sched_tensor_nelements(t) < n)
        return -1;
    memcpy(out, d, (size_t)n * sizeof *out);
    return 0;
}

static const sched_machine_iface machine_iface = {
    .clock = "wall",
    .hold = false,
    .threaded = true,
    .now = m_now,
    .backends = m_backends,
    .adopt = m_adopt,
    .recording = m_recording,
    .finish = m_finish,
    .fill_weight = m_fill_weight,
    .fill_inputs = m_fill_inputs,
    .read_i32 = m_read_i32,
    .check_output = m_check_output,
    .error = m_error,
    .copy_traits = m_copy_traits,
    .meta = m_meta,
    .describe = m_describe,
    .report = m_report,
    .free = m_free,
};

static int real_open(const sched_family *f, const sched_spec *spec, const sched_run_opts *ro,
                     sched_machine *out, trace_error *err)
{
    (void)f;
    real_machine *rm = calloc(1, sizeof *rm);
    if (!rm)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    if (options_of(ro, &rm->o, &rm->seed, err) != 0) {
        free(rm);
        return -1;
    }
    snprintf(rm->spec, sizeof rm->spec, "%s", spec->text);
    int ar = sched_allreduce_parse(ro->allreduce ? ro->allreduce : "auto");
    rm->allreduce = ar < 0 ? SCHED_ALLREDUCE_RING : (sched_allreduce)ar;
    /* Ranks in other processes: auto is one collective (sched/run.c), the
     * reference sums as it does. */
    if (ro->world > 0 && rm->allreduce == SCHED_ALLREDUCE_AUTO)
        rm->allreduce = SCHED_ALLREDUCE_RING;
    rm->bf16_min = ro->bf16_min > 0 ? ro->bf16_min : 0;      /* 0: the strategy's */
    rm->isend_reuse = ro->isend_reuse;
    rm->pipeline = ro->pipeline && ro->world > 0;
    char msg[512];
    if (real_set_create(spec, &rm->o, &rm->be, &rm->nb, msg, sizeof msg) != 0) {
        free(rm);
        return trace_error_set(err, TRACE_EUSAGE, "%s", msg), -1;
    }
    for (size_t i = 0; i < rm->nb; i++)
        rm->n_cs += real_is_cs(rm->be[i]), rm->n_cuda += real_is_cuda(rm->be[i]);
    *out = (sched_machine){ &machine_iface, rm };
    return 0;
}

/* ------------------------------------------------------------------ */
/* The families.                                                       */

static const sched_family_iface cpustream_iface = {
    .name = "cpustream",
    .syntax = "cpustream[:N]",
    .summary = "N emulated asynchronous devices (a queue and a worker thread each); options "
               "after it: jitter=DUR seed=N threads=N mem=SIZE",
    .machine = "real",
    .source = "real",
    .options = real_options_list,
    .check = real_check,
    .open = real_open,
};

static const sched_family_iface cpu_iface = {
    .name = "cpu",
    .syntax = "cpu",
    .summary = "the CPU's thread pool, synchronous, last (appended when missing); option "
               "threads=N",
    .machine = "real",
    .source = "real",
    .options = real_options_list,
    .check = real_check,
    .open = real_open,
};

static const sched_family_iface cuda_iface = {
    .name = "cuda",
    .syntax = "cuda[:GPU]",
    .summary = "a logical device on CUDA GPU number GPU (default 0), its own stream and "
               "buffers; name a GPU twice for two (cuda:0,cuda:0); needs syncsim built with "
               "the CUDA toolkit, and NCCL for all_reduce across devices",
    .machine = "real",
    .source = "real",
    .options = real_options_list,
    .check = real_check,
    .open = real_open,
};

const sched_family real_cpustream_family = { &cpustream_iface, NULL };
const sched_family real_cpu_family = { &cpu_iface, NULL };
const sched_family real_cuda_family = { &cuda_iface, NULL };

const sched_family *const real_families[] = { &real_cpustream_family, &real_cuda_family,
                                              &real_cpu_family, NULL };

const real_error *real_machine_error(const sched_machine *m, uint64_t *n_evals)
{
    if (!m || m->iface != &machine_iface)
        return NULL;
    const real_machine *rm = m->ctx;
    if (n_evals)
        *n_evals = rm->n_evals;
    return &rm->err;
}
