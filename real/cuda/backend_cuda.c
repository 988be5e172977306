/*
 * backend_cuda.c -- `cuda`: a logical device on a real GPU (libsyncsim_cuda.so).
 *
 * Run on an H200 once (issue 24: correct, 24 ms per token); what issue 24
 * changed since, for speed, was written and compiled without a GPU
 * (docs/cuda.md, "The cuda backend family", says what remains to check).
 *
 * Each `cuda:N` item of a spec is one logical device on physical GPU N
 * with its own stream (non-blocking), its own buffers and its own events;
 * `cuda:0,cuda:0` is two of them on one GPU. The host's calls only queue:
 *
 *   graph_compute   one kernel per node (backend_kernels.cu); 2-D mul_mat
 *                   on cuBLAS: f32 by f32 with cublasSgemm, f16 weights by
 *                   f32 activations with cublasGemmEx (from RCU_GEMM_MIN_N
 *                   columns on; below, matrix-vector products, the warp
 *                   kernel); all_reduce with NCCL;
 *   set/get_async   cudaMemcpyAsync between host memory and the device;
 *   copy_async      to or from host memory or another logical device:
 *                   cudaMemcpyAsync on this stream, cudaMemcpyPeerAsync
 *                   between two physical GPUs;
 *   event_record, event_wait, event_synchronize: cudaEventRecord,
 *                   cudaStreamWaitEvent, cudaEventSynchronize;
 *   synchronize     cudaStreamSynchronize.
 *
 * Memory: a device's buffers, the scheduler's arena and the weights and
 * caches alike, are device memory (cudaMalloc); host buffers
 * (SCHED_BUFFER_HOST) are pinned (cudaMallocHost). Only kernels and CUDA
 * copies touch device memory: the host fills the weights in host memory
 * and copies them (real/family.c, m_fill_weight), and a blocking copy by
 * the host (the cpu backend's copy_sync of a copy the devices declined)
 * goes through copy_bytes. While CUDA devices are open the cpu backend's
 * buffers are pinned too (host_alloc, real_host_alloc): the run's inputs,
 * its outputs' host copies and the cpu's arena, as ggml's CUDA host
 * buffers, so that copies from and to them are DMA.
 *
 * Times: a recorded call (a ticket) gets one timing event after its work
 * on the stream, none before: its end is the event's time, its start the
 * later of the previous end on this stream and the moment the call that
 * queued it returned (the stream runs its work in order; an event wait is
 * a recorded call of its own, so the work after it starts no earlier than
 * the wait ended; the host's time inside the call is the host's). What
 * this misses: the launch latency of work queued on an idle stream
 * (microseconds) is counted as its duration. A reporter thread per device
 * takes what is queued, waits for the last event only (the earlier ones
 * are complete when it is: one stream), and reports each call's start and
 * duration on the run's clock (CLOCK_MONOTONIC) with sched_rec_done. Each
 * time is read against the previous event read (the first against an
 * anchor event recorded and waited for at open, when the host clock was
 * read), so that cudaEventElapsedTime's float of milliseconds is always a
 * short interval (about 0.5 us of resolution) and never drifts. Events
 * come from a per-device pool: none is created on the per-token path.
 *
 * All-reduce: NCCL, one communicator per logical device of the set,
 * created (ncclCommInitAll over their physical GPUs) at the set's first
 * all_reduce and warmed by one grouped all-reduce so that later,
 * ungrouped calls from the one host thread do not block it. NCCL does not
 * put two ranks on one GPU ("Duplicate GPU detected"): under
 * --allreduce nccl, `cuda:0,cuda:0` with a tensor-split model is refused
 * with one line, as is any all_reduce when the plugin was built without
 * NCCL. The default all-reduce of the real devices (auto: ggml's
 * butterfly, copies and adds) needs no NCCL and runs there.
 */
#include "backend_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef SYNCSIM_CUDA_NCCL
#include <nccl.h>
#endif

#define MAX_DEVS 16

/* 2-D mul_mat of f16 weights goes to cuBLAS from this many columns (tokens)
 * on; below, the warp kernel, which reads the weights once per column. A
 * guess, not a measurement: decode (1 column) is the warp kernel either
 * way. */
#define RCU_GEMM_MIN_N 4

/* A timing event after a piece of work on the stream, and the call it
 * times. */
typedef struct pending {
    sched_ticket tk;
    cudaEvent_t end;
    int64_t queued;                 /* host clock when the call that queued it returned */
    struct pending *next;
} pending;

typedef struct cu_dev {
    sched_backend base;             /* first, then the set: real_backend_hdr's layout */
    void *set;
    const real_cuda_host *h;
    int index, device;
    char name[16], qname[16];
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaEvent_t anchor;
    int64_t anchor_ns;
    void *scratch;                  /* gemm_f16's split activations (device memory) */
    size_t scratch_size;
    /* The reporter. */
    pthread_t reporter;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    pending *head, *tail;           /* queued, in stream order */
    pending *spare;                 /* read: their events to record again */
    bool stop;
#ifdef SYNCSIM_CUDA_NCCL
    ncclComm_t comm;
#endif
    bool comm_ready;
} cu_dev;

static const sched_backend_iface cu_iface;

/* The open devices (NCCL makes communicators across those of one set). */
static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static cu_dev *devs[MAX_DEVS];

static bool cu_is_device(const sched_backend *b) { return b && b->iface == &cu_iface; }

static void fail(cu_dev *d, const char *what, cudaError_t e)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s: %s", d->qname, what, cudaGetErrorString(e));
    d->h->fail(d->set, msg);
}

/* Runs a CUDA call on d's device; on error the set fails and this returns -1. */
#define CU(d, call)                              \
    do {                                         \
        cudaError_t e_ = (call);                 \
        if (e_ != cudaSuccess) {                 \
            fail((d), #call, e_);                \
            return -1;                           \
        }                                        \
    } while (0)

static int use(cu_dev *d)
{
    CU(d, cudaSetDevice(d->device));
    return 0;
}

/* ------------------------------------------------------------------ */
/* Times.                                                              */

/* Queues the timing event after the work of tk, just queued, and hands it
 * to the reporter with the host clock now: the work cannot have started
 * much before the call that queued it returned (the host's own time in
 * the call is the host's, not the device's). Without an event to spare
 * and none to create, the call goes untimed. */
static void timed_end(cu_dev *d, sched_ticket tk)
{
    if (tk == SCHED_NO_TICKET)
        return;
    int64_t queued = d->h->now_ns();
    pthread_mutex_lock(&d->lock);
    pending *q = d->spare;
    if (q)
        d->spare = q->next;
    pthread_mutex_unlock(&d->lock);
    if (!q) {
        q = calloc(1, sizeof *q);
        /* The reporter sleeps on the event rather than spin on a CPU. */
        if (!q || cudaEventCreateWithFlags(&q->end, cudaEventBlockingSync) != cudaSuccess) {
            free(q);
            return;
        }
    }
    q->tk = tk;
    q->queued = queued;
    q->next = NULL;
    if (cudaEventRecord(q->end, d->stream) != cudaSuccess) {
        cudaEventDestroy(q->end);
        free(q);
        return;
    }
    pthread_mutex_lock(&d->lock);
    if (d->tail)
        d->tail->next = q;
    else
        d->head = q;
    d->tail = q;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->lock);
}

static void *reporter(void *arg)
{
    cu_dev *d = arg;
    cudaSetDevice(d->device);
    cudaEvent_t ref = d->anchor;    /* the last event read, and its time */
    pending *ref_p = NULL;          /* its pending (none: the anchor) */
    int64_t ref_ns = d->anchor_ns, last_end = d->anchor_ns;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->head && !d->stop)
            pthread_cond_wait(&d->cv, &d->lock);
        if (!d->head)
            break;
        pending *batch = d->head, *last = d->tail;
        d->head = d->tail = NULL;
        pthread_mutex_unlock(&d->lock);
        bool ok = cudaEventSynchronize(last->end) == cudaSuccess;
        pending *done = NULL;
        for (pending *q = batch, *next; q; q = next) {
            next = q->next;
            float ms = 0;
            if (ok && cudaEventElapsedTime(&ms, ref, q->end) == cudaSuccess) {
                int64_t end = ref_ns + (int64_t)((double)ms * 1e6);
                if (end < last_end)
                    end = last_end;
                int64_t start = q->queued > last_end ? q->queued : last_end;
                if (start > end)
                    start = end;
                d->h->rec_done(&d->base, q->tk, start, end - start);
                last_end = end;
                ref_ns = end;
                ref = q->end;
                if (ref_p) {        /* the old reference is free again */
                    ref_p->next = done;
                    done = ref_p;
                }
                ref_p = q;
            } else {
                q->next = done;
                done = q;
            }
        }
        pthread_mutex_lock(&d->lock);
        while (done) {
            pending *q = done;
            done = q->next;
            q->next = d->spare;
            d->spare = q;
        }
    }
    if (ref_p) {
        ref_p->next = d->spare;
        d->spare = ref_p;
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Buffers and copies.                                                 */

static const char *cu_get_name(sched_backend *b) { return ((cu_dev *)b->ctx)->name; }
static const char *cu_trace_name(sched_backend *b) { return ((cu_dev *)b->ctx)->qname; }
static sched_device_kind cu_kind(sched_backend *b) { (void)b; return SCHED_DEVICE_GPU; }

static bool cu_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    cu_dev *d = b->ctx;
    return d->h->kernel_supports(g, t);
}

/* Device memory (cudaMalloc), or pinned host memory for host buffers;
 * zeroed. */
static sched_buffer *cu_buffer_alloc(sched_backend *b, const char *name, uint64_t size,
                                     sched_buffer_usage usage)
{
    cu_dev *d = b->ctx;
    if (cudaSetDevice(d->device) != cudaSuccess)
        return NULL;
    sched_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return NULL;
    size_t alloc = (size_t)((size + 255) & ~(uint64_t)255);
    if (alloc == 0)
        alloc = 256;
    bool host = usage == SCHED_BUFFER_HOST;
    cudaError_t e = host ? cudaMallocHost(&buf->ctx, alloc) : cudaMalloc(&buf->ctx, alloc);
    if (e != cudaSuccess) {
        free(buf);
        return NULL;
    }
    if (host) {
        memset(buf->ctx, 0, alloc);
    } else if (cudaMemsetAsync(buf->ctx, 0, alloc, d->stream) != cudaSuccess ||
               cudaStreamSynchronize(d->stream) != cudaSuccess) {
        /* Set-up time, not per token: the host may copy into it next. */
        cudaFree(buf->ctx);
        free(buf);
        return NULL;
    }
    buf->backend = b;
    buf->size = size;
    buf->usage = usage;
    buf->host = host;
    buf->pinned = host;
    buf->trace_id = TRACE_NONE;
    snprintf(buf->name, sizeof buf->name, "%s", name);
    return buf;
}

static void cu_buffer_free(sched_backend *b, sched_buffer *buf)
{
    cu_dev *d = b->ctx;
    cudaSetDevice(d->device);
    if (buf->host)
        cudaFreeHost(buf->ctx);
    else
        cudaFree(buf->ctx);
    free(buf);
}

static void *data_of(const sched_tensor *t)
{
    if (!t->buffer || !t->buffer->ctx)
        return NULL;
    return (char *)t->buffer->ctx + t->offset;
}

/* The physical GPU whose memory p is in; -1 for host memory. (A buffer's
 * backend may be a recording's wrapper: the pointer says it.) */
static int gpu_of(const void *p)
{
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged ? at.device : -1;
}

static uint64_t copy_bytes(cu_dev *d, const sched_tensor *src, const sched_tensor *dst)
{
    uint64_t a = d->h->tensor_nbytes(src), c = d->h->tensor_nbytes(dst);
    return a < c ? a : c;
}

/* A copy of src into dst queued on d's stream, timed when recorded. */
static int queue_copy(cu_dev *d, sched_tensor *src, sched_tensor *dst)
{
    void *s = data_of(src), *t = data_of(dst);
    if (!s || !t || use(d) != 0)
        return -1;
    uint64_t n = copy_bytes(d, src, dst);
    sched_ticket tk = d->h->rec_ticket(&d->base);
    /* Host memory on either side: no need to ask CUDA whose memory it is. */
    bool host = (src->buffer && src->buffer->host) || (dst->buffer && dst->buffer->host);
    int from = host ? -1 : gpu_of(s), to = host ? -1 : gpu_of(t);
    bool peer = from >= 0 && to >= 0 && from != to;
    cudaError_t e = peer ? cudaMemcpyPeerAsync(t, to, s, from, n, d->stream)
                         : cudaMemcpyAsync(t, s, n, cudaMemcpyDefault, d->stream);
    timed_end(d, tk);
    if (e != cudaSuccess) {
        fail(d, peer ? "cudaMemcpyPeerAsync" : "cudaMemcpyAsync", e);
        return -1;
    }
    return 0;
}

static int cu_set_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return queue_copy(b->ctx, src, dst);
}

static int cu_get_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return queue_copy(b->ctx, src, dst);
}

/* Host memory (the cpu backend's, pinned or not) or another logical device's. */
static int cu_copy_async(sched_backend *b, sched_backend *other, sched_tensor *src,
                         sched_tensor *dst)
{
    if (!cu_is_device(other) && other->iface->synchronize)
        return 0;                   /* another kind of device (not host memory): declined */
    return queue_copy(b->ctx, src, dst) == 0 ? 1 : -1;
}

/* The host copies, blocking: the scheduler made src complete. */
static int cu_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    cu_dev *d = b->ctx;
    void *s = data_of(src), *t = data_of(dst);
    if (!s || !t || use(d) != 0)
        return -1;
    CU(d, cudaMemcpy(t, s, copy_bytes(d, src, dst), cudaMemcpyDefault));
    return 0;
}

static int cu_synchronize(sched_backend *b)
{
    cu_dev *d = b->ctx;
    if (use(d) != 0)
        return -1;
    CU(d, cudaStreamSynchronize(d->stream));
    return d->h->failed(d->set) ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Kernels.                                                            */

static int rcu_type_of(sched_dtype t)
{
    switch (t) {
    case SCHED_F32: return RCU_F32;
    case SCHED_F16: return RCU_F16;
    case SCHED_BF16: return RCU_BF16;
    case SCHED_I32: return RCU_I32;
    default: return -1;
    }
}

static int rcu_op_of(sched_op op)
{
    switch (op) {
    case SCHED_OP_MUL_MAT: return RCU_MUL_MAT;
    case SCHED_OP_ADD: return RCU_ADD;
    case SCHED_OP_MUL: return RCU_MUL;
    case SCHED_OP_SCALE: return RCU_SCALE;
    case SCHED_OP_RMS_NORM: return RCU_RMS_NORM;
    case SCHED_OP_SOFTMAX: return RCU_SOFTMAX;
    case SCHED_OP_SILU: return RCU_SILU;
    case SCHED_OP_ROPE: return RCU_ROPE;
    case SCHED_OP_GET_ROWS: return RCU_GET_ROWS;
    case SCHED_OP_CPY: return RCU_CPY;
    case SCHED_OP_CONVERT: return RCU_CONVERT;
    case SCHED_OP_CONCAT: return RCU_CONCAT;
    case SCHED_OP_ALL_REDUCE: return RCU_ALL_REDUCE_LOCAL;
    default: return -1;             /* an op this backend has no kernel for */
    }
}

static int to_rcu(const real_tensor *t, rcu_tensor *out)
{
    out->type = rcu_type_of(t->type);
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->data = t->data;
    return out->type < 0 ? -1 : 0;
}

static bool is_2d(const real_tensor *t, sched_dtype type)
{
    return t->type == type && t->ne[2] == 1 && t->ne[3] == 1;
}

static int blas_fail(cu_dev *d, const char *what, cublasStatus_t st)
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s: %s: %s", d->qname, what, cublasGetStatusString(st));
    d->h->fail(d->set, msg);
    return -1;
}

/* dst[n][m] = sum_k a[m][k] b[n][k], row-major (ne[0] contiguous): in
 * cuBLAS's column-major terms D (M x N) = A^T (A: K x M) times B (K x N). */
static int gemm(cu_dev *d, const real_kernel_args *a)
{
    int K = (int)a->src[0].ne[0], M = (int)a->dst.ne[0], N = (int)a->dst.ne[1];
    const float one = 1, zero = 0;
    cublasStatus_t st = cublasSgemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one,
                                    a->src[0].data, K, a->src[1].data, K, &zero, a->dst.data, M);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(d, "cublasSgemm", st);
}

/* The same with f16 weights a->src[0] and f32 activations: cublasGemmEx
 * takes both operands f16 (tensor cores, f32 sums), so the activations are
 * split into two f16 halves, hi + lo (rcu_split_f16), and D = A hi + A lo:
 * two products whose sum keeps 22 bits of each activation where one f16
 * copy would keep 11 and miss REAL_RUN_TOLERANCE. An activation beyond
 * f16's range (65504) becomes inf and the outputs DIFFER: said, not hidden.
 * The halves live in d->scratch, grown (the device synchronised first) to
 * the largest product seen. */
static int gemm_f16(cu_dev *d, const real_kernel_args *a)
{
    int K = (int)a->src[0].ne[0], M = (int)a->dst.ne[0], N = (int)a->dst.ne[1];
    size_t half = (size_t)K * (size_t)N * 2, need = 2 * ((half + 255) & ~(size_t)255);
    if (need > d->scratch_size) {
        if (d->scratch) {
            CU(d, cudaStreamSynchronize(d->stream));
            cudaFree(d->scratch);
            d->scratch = NULL;
            d->scratch_size = 0;
        }
        CU(d, cudaMalloc(&d->scratch, need));
        d->scratch_size = need;
    }
    void *hi = d->scratch, *lo = (char *)d->scratch + need / 2;
    int e = rcu_split_f16(a->src[1].data, hi, lo, (int64_t)K * N, d->stream);
    if (e != 0)
        return fail(d, "the split of mul_mat's activations", (cudaError_t)e), -1;
    const float one = 1, zero = 0;
    cublasStatus_t st = cublasGemmEx(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one,
                                     a->src[0].data, CUDA_R_16F, K, hi, CUDA_R_16F, K, &zero,
                                     a->dst.data, CUDA_R_32F, M, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasGemmEx(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, a->src[0].data,
                          CUDA_R_16F, K, lo, CUDA_R_16F, K, &one, a->dst.data, CUDA_R_32F, M,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(d, "cublasGemmEx", st);
}

static int run_node(cu_dev *d, const sched_graph *g, int32_t node, const real_kernel_args *a)
{
    if (a->op == SCHED_OP_MUL_MAT && is_2d(&a->src[1], SCHED_F32) && is_2d(&a->dst, SCHED_F32)) {
        if (is_2d(&a->src[0], SCHED_F32))
            return gemm(d, a);
        if (is_2d(&a->src[0], SCHED_F16) && a->dst.ne[1] >= RCU_GEMM_MIN_N)
            return gemm_f16(d, a);
    }
    rcu_args r;
    memset(&r, 0, sizeof r);
    r.op = rcu_op_of(a->op);
    r.n_src = a->n_src;
    r.param = a->param;
    r.convert_truncate = a->op == SCHED_OP_CONVERT && a->param == SCHED_CONVERT_TRUNCATE;
    bool bad = r.op < 0 || to_rcu(&a->dst, &r.dst) != 0;
    for (int i = 0; i < a->n_src && !bad; i++)
        bad = to_rcu(&a->src[i], &r.src[i]) != 0;
    if (bad) {
        char msg[192];
        snprintf(msg, sizeof msg, "%s: no CUDA kernel for %s (%s)", d->qname,
                 g->tensors[node].name, d->h->op_str(a->op));
        d->h->fail(d->set, msg);
        return -1;
    }
    int e = rcu_launch(&r, d->stream);
    if (e != 0) {
        fail(d, d->h->op_str(a->op), (cudaError_t)e);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* All-reduce.                                                         */

#ifdef SYNCSIM_CUDA_NCCL
/* The communicators of the set of d: one per logical device, in device
 * order, over their physical GPUs. 0, or -1 (the set failed). */
static int comms_init(cu_dev *d)
{
    if (d->comm_ready)
        return 0;
    cu_dev *mine[MAX_DEVS];
    int n = 0, gpus[MAX_DEVS];
    pthread_mutex_lock(&devs_lock);
    for (int i = 0; i < MAX_DEVS; i++)
        if (devs[i] && devs[i]->set == d->set)
            mine[n++] = devs[i];
    pthread_mutex_unlock(&devs_lock);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (mine[i]->device == mine[j]->device) {
                char msg[192];
                snprintf(msg, sizeof msg, "all_reduce on %s and %s: NCCL needs a GPU per rank, "
                         "both are cuda:%d", mine[j]->qname, mine[i]->qname, mine[i]->device);
                d->h->fail(d->set, msg);
                return -1;
            }
    ncclComm_t comms[MAX_DEVS];
    for (int i = 0; i < n; i++)
        gpus[i] = mine[i]->device;
    ncclResult_t r = ncclCommInitAll(comms, n, gpus);
    if (r != ncclSuccess) {
        char msg[192];
        snprintf(msg, sizeof msg, "ncclCommInitAll: %s", ncclGetErrorString(r));
        d->h->fail(d->set, msg);
        return -1;
    }
    /* One grouped all-reduce: NCCL connects its ranks on the first
     * collective, which from one thread needs them all at once. */
    float *tmp[MAX_DEVS] = { 0 };
    ncclGroupStart();
    for (int i = 0; i < n; i++) {
        cudaSetDevice(mine[i]->device);
        if (cudaMalloc((void **)&tmp[i], sizeof(float)) == cudaSuccess)
            ncclAllReduce(tmp[i], tmp[i], 1, ncclFloat, ncclSum, comms[i], mine[i]->stream);
    }
    r = ncclGroupEnd();
    for (int i = 0; i < n; i++) {
        cudaSetDevice(mine[i]->device);
        cudaStreamSynchronize(mine[i]->stream);
        cudaFree(tmp[i]);
        mine[i]->comm = comms[i];
        mine[i]->comm_ready = true;
    }
    if (r != ncclSuccess) {
        char msg[192];
        snprintf(msg, sizeof msg, "ncclAllReduce (the first): %s", ncclGetErrorString(r));
        d->h->fail(d->set, msg);
        return -1;
    }
    cudaSetDevice(d->device);
    return 0;
}
#endif

/* Entry k of x, an all_reduce node: its partial sum a->src[0] into
 * a->dst across every rank's device, through the bf16 wire when the
 * group sends bf16. Reports its three tickets. */
static int run_allreduce(cu_dev *d, const sched_exec *x, int k, const real_kernel_args *a)
{
    int32_t node = x->nodes[k];
    int rank, n_ranks;
    d->h->exec_group(x, node, &rank, &n_ranks);
    const sched_ticket *tk = x->tickets ? &x->tickets[3 * k] : NULL;
    bool bf16 = d->h->exec_bf16(x, node) && x->wire;
    sched_ticket t_;
    if (n_ranks <= 1) {             /* one rank: a copy, rounded as the wire would */
        real_kernel_args one = *a;
        one.bf16_wire = bf16;
        rcu_args r;
        memset(&r, 0, sizeof r);
        r.op = RCU_ALL_REDUCE_LOCAL;
        r.bf16_wire = bf16;
        if (to_rcu(&one.src[0], &r.src[0]) != 0 || to_rcu(&one.dst, &r.dst) != 0)
            return -1;
        t_ = tk ? tk[0] : SCHED_NO_TICKET;
        int e = rcu_launch(&r, d->stream);
        timed_end(d, t_);
        return e ? (fail(d, "all_reduce", (cudaError_t)e), -1) : 0;
    }
#ifndef SYNCSIM_CUDA_NCCL
    (void)tk;
    (void)t_;
    char msg[192];
    snprintf(msg, sizeof msg, "%s: all_reduce across %d devices needs NCCL: this "
             "libsyncsim_cuda.so was built without it", d->qname, n_ranks);
    d->h->fail(d->set, msg);
    return -1;
#else
    if (comms_init(d) != 0)
        return -1;
    int n_comm = 0;
    ncclCommCount(d->comm, &n_comm);
    if (n_comm != n_ranks) {
        char msg[192];
        snprintf(msg, sizeof msg, "%s: an all_reduce of %d ranks on a set of %d CUDA devices: "
                 "NCCL's communicator spans them all", d->qname, n_ranks, n_comm);
        d->h->fail(d->set, msg);
        return -1;
    }
    size_t count = (size_t)d->h->tensor_nelements(&x->graph->tensors[node]);
    rcu_args conv;
    memset(&conv, 0, sizeof conv);
    conv.op = RCU_CONVERT;
    if (bf16) {                     /* src -> the bf16 wire */
        if (!x->wire->ctx || x->wire->size < count * 2)
            return -1;
        if (to_rcu(&a->src[0], &conv.src[0]) != 0)
            return -1;
        conv.dst = conv.src[0];
        conv.dst.type = RCU_BF16;
        conv.dst.data = x->wire->ctx;
        t_ = tk ? tk[1] : SCHED_NO_TICKET;
        int e = rcu_launch(&conv, d->stream);
        timed_end(d, t_);
        if (e)
            return fail(d, "all_reduce to bf16", (cudaError_t)e), -1;
    }
    t_ = tk ? tk[0] : SCHED_NO_TICKET;
    ncclResult_t r = bf16 ? ncclAllReduce(x->wire->ctx, x->wire->ctx, count, ncclBfloat16, ncclSum,
                                          d->comm, d->stream)
                          : ncclAllReduce(a->src[0].data, a->dst.data, count, ncclFloat, ncclSum,
                                          d->comm, d->stream);
    timed_end(d, t_);
    if (r != ncclSuccess) {
        char msg[192];
        snprintf(msg, sizeof msg, "%s: ncclAllReduce: %s", d->qname, ncclGetErrorString(r));
        d->h->fail(d->set, msg);
        return -1;
    }
    if (bf16) {                     /* the wire -> dst */
        conv.src[0] = conv.dst;
        if (to_rcu(&a->dst, &conv.dst) != 0)
            return -1;
        t_ = tk ? tk[2] : SCHED_NO_TICKET;
        int e = rcu_launch(&conv, d->stream);
        timed_end(d, t_);
        if (e)
            return fail(d, "all_reduce from bf16", (cudaError_t)e), -1;
    }
    return 0;
#endif
}

static int cu_graph_compute(sched_backend *b, const sched_exec *x)
{
    cu_dev *d = b->ctx;
    if (d->h->failed(d->set) || use(d) != 0)
        return -1;
    for (int i = 0; i < x->n_nodes; i++) {
        int32_t node = x->nodes[i];
        const sched_tensor *t = &x->graph->tensors[node];
        if (t->op == SCHED_OP_NONE || t->op == SCHED_OP_VIEW || t->op == SCHED_OP_RESHAPE ||
            t->op == SCHED_OP_PERMUTE)
            continue;
        real_kernel_args a;
        if (d->h->node_args(x, node, &a) != 0)
            return -1;
        if (t->op == SCHED_OP_ALL_REDUCE) {
            if (run_allreduce(d, x, i, &a) != 0)
                return -1;
            continue;
        }
        sched_ticket t_ = x->tickets ? x->tickets[3 * i] : SCHED_NO_TICKET;
        int rc = run_node(d, x->graph, node, &a);
        timed_end(d, t_);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Events.                                                             */

static sched_event *cu_event_new(sched_backend *b, const char *name)
{
    (void)name;
    cu_dev *d = b->ctx;
    sched_event *ev = calloc(1, sizeof *ev);
    cudaEvent_t e;
    if (!ev || cudaSetDevice(d->device) != cudaSuccess ||
        cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
        free(ev);
        return NULL;
    }
    ev->backend = b;
    ev->ctx = e;
    ev->name = TRACE_NONE;
    return ev;
}

static void cu_event_free(sched_backend *b, sched_event *ev)
{
    (void)b;
    if (!ev)
        return;
    cudaEventDestroy((cudaEvent_t)ev->ctx);
    free(ev);
}

static int cu_event_record(sched_backend *b, sched_event *ev)
{
    cu_dev *d = b->ctx;
    if (use(d) != 0)
        return -1;
    sched_ticket t_ = d->h->rec_ticket(b);
    cudaError_t e = cudaEventRecord((cudaEvent_t)ev->ctx, d->stream);
    timed_end(d, t_);
    if (e != cudaSuccess)
        return fail(d, "cudaEventRecord", e), -1;
    ev->n_records++;
    return 0;
}

static int cu_event_wait(sched_backend *b, sched_event *ev)
{
    cu_dev *d = b->ctx;
    if (!cu_is_device(ev->backend)) {
        d->h->fail(d->set, "a cuda stream cannot wait for an event of another kind of device");
        return -1;
    }
    if (use(d) != 0)
        return -1;
    sched_ticket t_ = d->h->rec_ticket(b);
    cudaError_t e = ev->n_records ? cudaStreamWaitEvent(d->stream, (cudaEvent_t)ev->ctx, 0)
                                  : cudaSuccess;
    timed_end(d, t_);
    if (e != cudaSuccess)
        return fail(d, "cudaStreamWaitEvent", e), -1;
    return 0;
}

static int cu_event_synchronize(sched_backend *b, sched_event *ev)
{
    cu_dev *d = b->ctx;
    CU(d, cudaEventSynchronize((cudaEvent_t)ev->ctx));
    return d->h->failed(d->set) ? -1 : 0;
}

static const sched_backend_iface cu_iface = {
    .get_name = cu_get_name,
    .device_kind = cu_kind,
    .trace_name = cu_trace_name,
    .supports_op = cu_supports_op,
    .buffer_alloc = cu_buffer_alloc,
    .buffer_free = cu_buffer_free,
    .set_async = cu_set_async,
    .get_async = cu_get_async,
    .copy_async = cu_copy_async,
    .copy_sync = cu_copy_sync,
    .synchronize = cu_synchronize,
    .graph_compute = cu_graph_compute,
    .event_new = cu_event_new,
    .event_free = cu_event_free,
    .event_record = cu_event_record,
    .event_wait = cu_event_wait,
    .event_synchronize = cu_event_synchronize,
};

/* ------------------------------------------------------------------ */
/* Opening and closing.                                                */

static int cu_device_count(char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        return -1;
    }
    if (n == 0) {
        snprintf(err, errlen, "cudaGetDeviceCount: 0 devices");
        return -1;
    }
    return n;
}

static void cu_close(sched_backend *b)
{
    if (!b)
        return;
    cu_dev *d = b->ctx;
    cudaSetDevice(d->device);
    if (d->stream)
        cudaStreamSynchronize(d->stream);
    if (d->started) {
        pthread_mutex_lock(&d->lock);
        d->stop = true;
        pthread_cond_signal(&d->cv);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->reporter, NULL);
    }
    pthread_mutex_lock(&devs_lock);
    for (int i = 0; i < MAX_DEVS; i++)
        if (devs[i] == d)
            devs[i] = NULL;
    pthread_mutex_unlock(&devs_lock);
#ifdef SYNCSIM_CUDA_NCCL
    if (d->comm_ready)
        ncclCommDestroy(d->comm);
#endif
    if (d->blas)
        cublasDestroy(d->blas);
    while (d->spare) {
        pending *q = d->spare;
        d->spare = q->next;
        cudaEventDestroy(q->end);
        free(q);
    }
    if (d->scratch)
        cudaFree(d->scratch);
    if (d->anchor)
        cudaEventDestroy(d->anchor);
    if (d->stream)
        cudaStreamDestroy(d->stream);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cv);
    free(d);
}

static sched_backend *cu_open(const real_cuda_host *h, const real_cuda_params *p, char *err,
                              size_t errlen)
{
    if (!h || h->abi != REAL_CUDA_ABI) {
        snprintf(err, errlen, "%s: built for another syncsim (ABI %d)", REAL_CUDA_LIB,
                 REAL_CUDA_ABI);
        return NULL;
    }
    cu_dev *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->base.iface = &cu_iface;
    d->base.ctx = d;
    d->set = p->set;
    d->h = h;
    d->index = p->index;
    d->device = p->device;
    snprintf(d->name, sizeof d->name, "CUDA%d", p->index);
    snprintf(d->qname, sizeof d->qname, "cuda%d", p->index);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cv, NULL);
    const char *what = "cudaSetDevice";
    cudaError_t e = cudaSetDevice(p->device);
    if (e == cudaSuccess)
        what = "cudaStreamCreateWithFlags",
        e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        what = "cudaEventCreate", e = cudaEventCreate(&d->anchor);
    if (e == cudaSuccess)
        what = "cudaEventRecord", e = cudaEventRecord(d->anchor, d->stream);
    if (e == cudaSuccess)
        what = "cudaEventSynchronize", e = cudaEventSynchronize(d->anchor);
    d->anchor_ns = h->now_ns();
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda:%d: %s: %s", p->device, what, cudaGetErrorString(e));
        cu_close(&d->base);
        return NULL;
    }
    if (cublasCreate(&d->blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(d->blas, d->stream) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cuda:%d: cublasCreate failed", p->device);
        cu_close(&d->base);
        return NULL;
    }
    /* Peer access to every other GPU that allows it (peer copies without
     * staging through the host); refusals are no error. */
    int n = 0;
    cudaGetDeviceCount(&n);
    for (int o = 0; o < n; o++) {
        int can = 0;
        if (o != p->device && cudaDeviceCanAccessPeer(&can, p->device, o) == cudaSuccess && can)
            cudaDeviceEnablePeerAccess(o, 0);
    }
    cudaGetLastError();             /* cudaErrorPeerAccessAlreadyEnabled */
    if (pthread_create(&d->reporter, NULL, reporter, d) != 0) {
        snprintf(err, errlen, "cuda:%d: cannot start the reporter thread", p->device);
        cu_close(&d->base);
        return NULL;
    }
    d->started = true;
    pthread_mutex_lock(&devs_lock);
    for (int i = 0; i < MAX_DEVS; i++)
        if (!devs[i]) {
            devs[i] = d;
            break;
        }
    pthread_mutex_unlock(&devs_lock);
    return &d->base;
}

static void *cu_host_alloc(size_t size)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, size, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    memset(p, 0, size);
    return p;
}

static void cu_host_free(void *p) { cudaFreeHost(p); }

static int cu_copy_bytes(void *dst, const void *src, size_t n)
{
    if (gpu_of(dst) < 0 && gpu_of(src) < 0) {
        memcpy(dst, src, n);
        return 0;
    }
    return cudaMemcpy(dst, src, n, cudaMemcpyDefault) == cudaSuccess ? 0 : -1;
}

static const real_cuda_plugin plugin = {
    .abi = REAL_CUDA_ABI,
    .device_count = cu_device_count,
#ifdef SYNCSIM_CUDA_NCCL
    .nccl = true,
#else
    .nccl = false,
#endif
    .open = cu_open,
    .close = cu_close,
    .is_device = cu_is_device,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .copy_bytes = cu_copy_bytes,
};

__attribute__((visibility("default"))) const real_cuda_plugin *syncsim_cuda_plugin(void)
{
    return &plugin;
}
