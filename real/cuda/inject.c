/*
 * inject.c -- libsyncsim_inject.so, the CUPTI injection library of
 * `syncsim capture` (CUDA_INJECTION64_PATH: the CUDA driver loads it into
 * an unmodified program and calls InitializeInjection). It writes the event
 * log that traces/formats/cuda_log.c reads (its header comment is the format),
 * and decides nothing: which call synchronises, allocates or frees is the
 * capture mapping's (traces/formats/capture.c). What it does:
 *
 *   - runtime API callbacks (exit): allocations and frees with pointer and
 *     size, copies with source, destination and bytes, memsets, records and
 *     waits with stream and event, synchronisations, kernel launches with
 *     their pointer-sized parameters (layout from cuFuncGetParamInfo; the
 *     kernel's demangled name in its activity record says which pointees
 *     are const), graph launches with each kernel
 *     node's parameters, streams as they are first used (legacy,
 *     per-thread, blocking or non-blocking). Driver API calls made outside
 *     a runtime call (programs and libraries using the driver API) are
 *     logged the same way: launches with parameters, allocations, copies,
 *     records, waits and synchronisations with their arguments, the rest
 *     by name.
 *   - activity records (kernels, copies, peer copies, memsets): GPU start
 *     and end on the CUPTI clock, which the API times use too;
 *   - NVTX (NVTX_INJECTION64_PATH, set by `syncsim capture`): push/pop
 *     ranges (nvtxRangePushA), and marks "syncsim:r PTR SIZE [LABEL]" (w,
 *     rw; PTR in hex) that tell the log about a host access CUPTI cannot
 *     see. Start/end ranges and the wide-character calls are not recorded.
 *
 * The log is opened O_APPEND and every record is one write(2) of a whole
 * line, so what was written survives a crash; activity buffers are flushed
 * every 100 ms and at exit. SYNCSIM_CAPTURE_LOG names the file.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* libstdc++'s demangler (linked with -lstdc++). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

static int log_fd = -1;
static CUpti_SubscriberHandle subscriber;
static __thread int in_runtime;        /* depth of runtime calls on this thread */
static __thread int in_glue;           /* our own CUDA calls: not logged */
static __thread uint64_t t_enter[64];  /* runtime call start, by depth */

#define LINE_MAX_BYTES 8192

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    if (log_fd < 0)
        return;
    char buf[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf - 1) {   /* a huge name: cut, keep the line whole */
        n = (int)sizeof buf - 2;
    }
    buf[n++] = '\n';
    ssize_t w = write(log_fd, buf, (size_t)n);
    (void)w;
}

static uint64_t now(void)
{
    uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return t;
}

static long tid(void)
{
    return (long)syscall(SYS_gettid);
}

/* A name with its newlines cut (name= takes the rest of the line). */
static const char *one_line(const char *s, char *buf, size_t cap)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < cap; i++)
        buf[i] = s[i] == '\n' || s[i] == '\r' ? ' ' : s[i];
    buf[i] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ */
/* Streams: CUPTI's id of a handle, and a `stream` record on first use. */

#define SEEN_STREAMS 4096
static uint64_t seen_stream[SEEN_STREAMS];
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static int cur_device(void)
{
    CUdevice d = 0;
    in_glue++;
    if (cuCtxGetDevice(&d) != CUDA_SUCCESS)
        d = 0;
    in_glue--;
    return (int)d;
}

/* The CUPTI stream id of handle s as the calling API saw it (ptsz: the
 * per-thread default stream for 0). Writes its kind once. */
static long stream_id(cudaStream_t s, int per_thread_api)
{
    CUcontext ctx = NULL;
    uint32_t id = 0;
    uintptr_t h = (uintptr_t)s;
    int per_thread = h == (uintptr_t)cudaStreamPerThread || (h == 0 && per_thread_api);
    int legacy = !per_thread && (h == 0 || h == (uintptr_t)cudaStreamLegacy);
    in_glue++;
    cuCtxGetCurrent(&ctx);
    CUstream cs = per_thread || legacy ? NULL : (CUstream)s;
    if (cuptiGetStreamIdEx(ctx, cs, (uint8_t)per_thread, &id) != CUPTI_SUCCESS)
        id = 0;
    const char *kind = per_thread ? "per-thread" : legacy ? "legacy" : "blocking";
    if (!per_thread && !legacy) {
        unsigned int flags = 0;
        if (cuStreamGetFlags(cs, &flags) == CUDA_SUCCESS && (flags & CU_STREAM_NON_BLOCKING))
            kind = "nonblocking";
    }
    in_glue--;
    int dev = cur_device();
    uint64_t key = ((uint64_t)(unsigned)dev << 32) | id;
    pthread_mutex_lock(&seen_lock);
    int fresh = 1;
    for (size_t i = key % SEEN_STREAMS, n = 0; n < SEEN_STREAMS; i = (i + 1) % SEEN_STREAMS, n++) {
        if (seen_stream[i] == key + 1) {
            fresh = 0;
            break;
        }
        if (!seen_stream[i]) {
            seen_stream[i] = key + 1;
            break;
        }
    }
    pthread_mutex_unlock(&seen_lock);
    if (fresh)
        say("stream pid=%d dev=%d stream=%u kind=%s", getpid(), dev, id, kind);
    return (long)id;
}

/* Events are numbered in the order the program first uses them (ev1,
 * ev2, ...), so that a log names them the same way on every run. */
#define EVENTS 8192
static struct { uintptr_t h; unsigned long long id; } events[EVENTS];
static unsigned long long n_events;

static unsigned long long event_id(cudaEvent_t e)
{
    uintptr_t h = (uintptr_t)e;
    unsigned long long id = 0;
    pthread_mutex_lock(&seen_lock);
    for (size_t i = (h >> 4) % EVENTS, n = 0; n < EVENTS; i = (i + 1) % EVENTS, n++) {
        if (events[i].h == h) {
            id = events[i].id;
            break;
        }
        if (!events[i].h) {
            events[i].h = h;
            id = events[i].id = ++n_events;
            break;
        }
    }
    pthread_mutex_unlock(&seen_lock);
    return id ? id : (unsigned long long)h;
}

/* ------------------------------------------------------------------ */
/* Kernel parameters.                                                  */

/* One `param` line per 8-byte parameter of f (a pointer or not: the log's
 * reader keeps the values that point into allocations, and reads
 * const-ness off the kernel's demangled name). */
static void write_params(CUfunction f, void **args, long corr, long long node)
{
    in_glue++;
    for (size_t i = 0;; i++) {
        size_t off = 0, size = 0;
        if (cuFuncGetParamInfo(f, i, &off, &size) != CUDA_SUCCESS)
            break;
        if (size != sizeof(void *) || !args || !args[i])
            continue;
        uint64_t v;
        memcpy(&v, args[i], sizeof v);
        if (!v)
            continue;
        char nodebuf[32] = "";
        if (node >= 0)
            snprintf(nodebuf, sizeof nodebuf, " node=%lld", node);
        say("param pid=%d corr=%ld%s idx=%zu ptr=0x%llx", getpid(), corr, nodebuf, i,
            (unsigned long long)v);
    }
    in_glue--;
}

static void launch_params(const void *func, void **args, long corr)
{
    cudaFunction_t f = NULL;
    in_glue++;
    cudaError_t e = cudaGetFuncBySymbol(&f, func);
    in_glue--;
    if (e == cudaSuccess && f)
        write_params((CUfunction)f, args, corr, -1);
}

/* A graph launch: the kernel nodes of the graph its exec came from. */
#define GRAPHS 1024
static struct { cudaGraphExec_t exec; cudaGraph_t graph; } graphs[GRAPHS];
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;

static void graph_instantiated(cudaGraphExec_t exec, cudaGraph_t graph)
{
    pthread_mutex_lock(&graph_lock);
    size_t i = ((uintptr_t)exec >> 4) % GRAPHS;
    graphs[i].exec = exec;
    graphs[i].graph = graph;
    pthread_mutex_unlock(&graph_lock);
}

static void graph_params(cudaGraphExec_t exec, long corr)
{
    pthread_mutex_lock(&graph_lock);
    size_t i = ((uintptr_t)exec >> 4) % GRAPHS;
    cudaGraph_t g = graphs[i].exec == exec ? graphs[i].graph : NULL;
    pthread_mutex_unlock(&graph_lock);
    if (!g)
        return;
    in_glue++;
    size_t n = 0;
    if (cudaGraphGetNodes(g, NULL, &n) == cudaSuccess && n) {
        cudaGraphNode_t *nodes = calloc(n, sizeof *nodes);
        if (nodes && cudaGraphGetNodes(g, nodes, &n) == cudaSuccess) {
            for (size_t k = 0; k < n; k++) {
                enum cudaGraphNodeType type;
                struct cudaKernelNodeParams kp;
                uint64_t id = 0;
                if (cudaGraphNodeGetType(nodes[k], &type) != cudaSuccess ||
                    type != cudaGraphNodeTypeKernel ||
                    cudaGraphKernelNodeGetParams(nodes[k], &kp) != cudaSuccess ||
                    cuptiGetGraphNodeId((CUgraphNode)nodes[k], &id) != CUPTI_SUCCESS)
                    continue;
                cudaFunction_t f = NULL;
                if (cudaGetFuncBySymbol(&f, kp.func) == cudaSuccess && f)
                    write_params((CUfunction)f, kp.kernelParams, corr, (long long)id);
            }
        }
        free(nodes);
    }
    in_glue--;
}

/* ------------------------------------------------------------------ */
/* Runtime calls.                                                      */

#define PTR(p) (unsigned long long)(uintptr_t)(p)

static void runtime_exit(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, uint64_t t0)
{
    uint64_t t1 = now();
    const void *p = cb->functionParams;
    const char *name = cb->functionName;
    int ptsz = strstr(name, "_ptsz") || strstr(name, "_ptds");
    int pid = getpid(), dev = cur_device();
    long corr = (long)cb->correlationId;
    char extra[256] = "";
    int ok = 1;
    cudaError_t ret = cb->functionReturnValue ? *(const cudaError_t *)cb->functionReturnValue
                                              : cudaSuccess;
#define X(...) snprintf(extra, sizeof extra, __VA_ARGS__)
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
        const cudaMalloc_v3020_params *a = p;
        X(" ptr=0x%llx size=%zu", PTR(*a->devPtr), a->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020: {
        const cudaMallocHost_v3020_params *a = p;
        X(" ptr=0x%llx size=%zu", PTR(*a->ptr), a->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: {
        const cudaHostAlloc_v3020_params *a = p;
        X(" ptr=0x%llx size=%zu", PTR(*a->pHost), a->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
        const cudaMallocManaged_v6000_params *a = p;
        X(" ptr=0x%llx size=%zu", PTR(*a->devPtr), a->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000: {
        const cudaHostRegister_v4000_params *a = p;
        X(" ptr=0x%llx size=%zu", PTR(a->ptr), a->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
        const cudaMallocAsync_v11020_params *a = p;
        X(" ptr=0x%llx size=%zu stream=%ld", PTR(*a->devPtr), a->size,
          stream_id(a->hStream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostUnregister_v4000: {
        void *const *a = p;     /* the first parameter of each: the pointer */
        X(" ptr=0x%llx", PTR(*a));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
        const cudaFreeAsync_v11020_params *a = p;
        X(" ptr=0x%llx stream=%ld", PTR(a->devPtr), stream_id(a->hStream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000: {
        const cudaMemcpy_v3020_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", PTR(a->src), PTR(a->dst), a->count,
          stream_id(0, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000: {
        const cudaMemcpyAsync_v3020_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", PTR(a->src), PTR(a->dst), a->count,
          stream_id(a->stream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000: {
        const cudaMemcpyPeer_v4000_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu", PTR(a->src), PTR(a->dst), a->count);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000: {
        const cudaMemcpyPeerAsync_v4000_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", PTR(a->src), PTR(a->dst), a->count,
          stream_id(a->stream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000: {
        const cudaMemset_v3020_params *a = p;
        X(" ptr=0x%llx bytes=%zu", PTR(a->devPtr), a->count);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000: {
        const cudaMemsetAsync_v3020_params *a = p;
        X(" ptr=0x%llx bytes=%zu stream=%ld", PTR(a->devPtr), a->count,
          stream_id(a->stream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
        const cudaLaunchKernel_v7000_params *a = p;
        X(" stream=%ld", stream_id(a->stream, ptsz));
        if (ret == cudaSuccess)
            launch_params(a->func, a->args, corr);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040: {
        const cudaGraphInstantiateWithFlags_v11040_params *a = p; /* same first two */
        if (ret == cudaSuccess)
            graph_instantiated(*a->pGraphExec, a->graph);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000: {
        const cudaGraphLaunch_v10000_params *a = p;
        X(" stream=%ld", stream_id(a->stream, ptsz));
        graph_params(a->graphExec, corr);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010: {
        const cudaEventRecord_v3020_params *a = p;   /* event, stream first */
        X(" stream=%ld event=%llu", stream_id(a->stream, ptsz), event_id(a->event));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000: {
        const cudaStreamWaitEvent_v3020_params *a = p;
        X(" stream=%ld event=%llu", stream_id(a->stream, ptsz), event_id(a->event));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020: {
        const cudaEventSynchronize_v3020_params *a = p;
        X(" event=%llu", event_id(a->event));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000: {
        const cudaStreamSynchronize_v3020_params *a = p;
        X(" stream=%ld", stream_id(a->stream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithPriority_v5050: {
        cudaStream_t *const *a = p;  /* pStream first */
        if (ret == cudaSuccess)
            stream_id(**a, 0);
        ok = 0;                 /* the stream record says it all */
        break;
    }
    default:
        break;
    }
#undef X
    if (!ok || ret != cudaSuccess)
        return;                 /* a failed call did nothing */
    char nm[256];
    say("api pid=%d tid=%ld t0=%llu t1=%llu corr=%ld dev=%d%s name=%s", pid, tid(),
        (unsigned long long)t0, (unsigned long long)t1, corr, dev, extra,
        one_line(name, nm, sizeof nm));
}

/* A driver API call made outside any runtime call (programs and libraries
 * that use the driver API: cuLaunchKernel, cuMemcpy*, ...), with the same
 * arguments as their runtime twins. */
static void driver_exit(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, uint64_t t0)
{
    uint64_t t1 = now();
    const void *p = cb->functionParams;
    const char *name = cb->functionName;
    int ptsz = strstr(name, "_ptsz") || strstr(name, "_ptds");
    long corr = (long)cb->correlationId;
    char extra[256] = "";
    CUresult ret = cb->functionReturnValue ? *(const CUresult *)cb->functionReturnValue
                                           : CUDA_SUCCESS;
    if (ret != CUDA_SUCCESS)
        return;
#define X(...) snprintf(extra, sizeof extra, __VA_ARGS__)
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const cuLaunchKernel_params *a = p;
        X(" stream=%ld", stream_id((cudaStream_t)a->hStream, ptsz));
        write_params(a->f, a->kernelParams, corr, -1);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *a = p;
        X(" ptr=0x%llx size=%zu", (unsigned long long)*a->dptr, a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
        const cuMemAllocHost_v2_params *a = p;
        X(" ptr=0x%llx size=%zu", PTR(*a->pp), a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
        const cuMemHostAlloc_params *a = p;
        X(" ptr=0x%llx size=%zu", PTR(*a->pp), a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *a = p;
        X(" ptr=0x%llx size=%zu stream=%ld", (unsigned long long)*a->dptr, a->bytesize,
          stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
        const cuMemFree_v2_params *a = p;
        X(" ptr=0x%llx", (unsigned long long)a->dptr);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
        const cuMemFreeHost_params *a = p;
        X(" ptr=0x%llx", PTR(a->p));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        const cuMemFreeAsync_params *a = p;
        X(" ptr=0x%llx stream=%ld", (unsigned long long)a->dptr,
          stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2: {
        const cuMemcpyHtoD_v2_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", PTR(a->srcHost),
          (unsigned long long)a->dstDevice, a->ByteCount, stream_id(0, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2: {
        const cuMemcpyDtoH_v2_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", (unsigned long long)a->srcDevice,
          PTR(a->dstHost), a->ByteCount, stream_id(0, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz: {
        const cuMemcpyHtoDAsync_v2_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", PTR(a->srcHost),
          (unsigned long long)a->dstDevice, a->ByteCount,
          stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz: {
        const cuMemcpyDtoHAsync_v2_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", (unsigned long long)a->srcDevice,
          PTR(a->dstHost), a->ByteCount, stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz: {
        const cuMemcpyDtoDAsync_v2_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", (unsigned long long)a->srcDevice,
          (unsigned long long)a->dstDevice, a->ByteCount,
          stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
        const cuMemcpyAsync_params *a = p;
        X(" src=0x%llx dst=0x%llx bytes=%zu stream=%ld", (unsigned long long)a->src,
          (unsigned long long)a->dst, a->ByteCount, stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecord:
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz: {
        const cuEventRecord_params *a = p;
        X(" stream=%ld event=%llu", stream_id((cudaStream_t)a->hStream, ptsz),
          event_id((cudaEvent_t)a->hEvent));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz: {
        const cuStreamWaitEvent_params *a = p;
        X(" stream=%ld event=%llu", stream_id((cudaStream_t)a->hStream, ptsz),
          event_id((cudaEvent_t)a->hEvent));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize: {
        const cuEventSynchronize_params *a = p;
        X(" event=%llu", event_id((cudaEvent_t)a->hEvent));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz: {
        const cuStreamSynchronize_params *a = p;
        X(" stream=%ld", stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    default:
        break;
    }
#undef X
    char nm[256];
    say("api pid=%d tid=%ld t0=%llu t1=%llu corr=%ld dev=%d%s name=%s", getpid(), tid(),
        (unsigned long long)t0, (unsigned long long)t1, corr, cur_device(), extra,
        one_line(name, nm, sizeof nm));
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)ud;
    if (in_glue)
        return;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        const CUpti_CallbackData *cb = data;
        if (cb->callbackSite == CUPTI_API_ENTER) {
            if (in_runtime < 64)
                t_enter[in_runtime] = now();
            in_runtime++;
        } else {
            in_runtime--;
            if (in_runtime == 0)
                runtime_exit(cbid, cb, t_enter[0]);
        }
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        const CUpti_CallbackData *cb = data;
        if (in_runtime)
            return;             /* part of a runtime call */
        static __thread uint64_t drv_t0;
        if (cb->callbackSite == CUPTI_API_ENTER)
            drv_t0 = now();
        else
            driver_exit(cbid, cb, drv_t0);
    } else if (domain == CUPTI_CB_DOMAIN_NVTX) {
        const CUpti_NvtxData *nv = data;
        static __thread struct { uint64_t t0; char name[200]; } stack[64];
        static __thread int depth;
        char nm[256];
        switch (cbid) {
        case CUPTI_CBID_NVTX_nvtxRangePushA: {
            /* nvtxRangePushA_params and nvtxMarkA_params: { const char *message } */
            const char *const *msg = nv->functionParams;
            if (depth < 64) {
                stack[depth].t0 = now();
                one_line(*msg, stack[depth].name, sizeof stack[depth].name);
            }
            depth++;
            break;
        }
        case CUPTI_CBID_NVTX_nvtxRangePop:
            if (depth > 0 && --depth < 64)
                say("range pid=%d tid=%ld t0=%llu t1=%llu name=%s", getpid(), tid(),
                    (unsigned long long)stack[depth].t0, (unsigned long long)now(),
                    stack[depth].name);
            break;
        case CUPTI_CBID_NVTX_nvtxMarkA: {
            const char *const *msg = nv->functionParams;
            char mode[4] = "";
            unsigned long long ptr = 0, size = 0;
            int end = 0;
            if (*msg && sscanf(*msg, "syncsim:%3s %llx %llu%n", mode, &ptr, &size, &end) == 3) {
                uint64_t t = now();
                const char *label = (*msg)[end] == ' ' && (*msg)[end + 1] ? *msg + end + 1 : *msg;
                say("host pid=%d tid=%ld t0=%llu t1=%llu mode=%s ptr=0x%llx size=%llu name=%s",
                    getpid(), tid(), (unsigned long long)t, (unsigned long long)t, mode, ptr,
                    size, one_line(label, nm, sizeof nm));
            }
            break;
        }
        default:
            break;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Activity: when the work ran.                                        */

#define ACT_BUF (8u << 20)

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max)
{
    *buf = aligned_alloc(8, ACT_BUF);
    *size = *buf ? ACT_BUF : 0;
    *max = 0;
}

static const char *mem_kind(uint8_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "managed";
    default: return "unknown";
    }
}

/* A kernel's name as people write it: demangled ("scale(float const*, int)"). */
static const char *kernel_name(const char *mangled, char *buf, size_t cap)
{
    int st = -1;
    char *d = mangled && mangled[0] == '_' && mangled[1] == 'Z'
                  ? __cxa_demangle(mangled, NULL, NULL, &st) : NULL;
    one_line(d && st == 0 ? d : mangled, buf, cap);
    free(d);
    return buf;
}

static void node_word(uint64_t node, char *buf, size_t cap)
{
    if (node)
        snprintf(buf, cap, " node=%llu", (unsigned long long)node);
    else
        buf[0] = '\0';
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *r = NULL;
    int pid = getpid();
    char nm[1024], node[40];
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const void *)r;
            node_word(k->graphNodeId, node, sizeof node);
            say("gpu pid=%d corr=%u kind=kernel dev=%u stream=%u t0=%llu t1=%llu%s name=%s", pid,
                k->correlationId, k->deviceId, k->streamId, (unsigned long long)k->start,
                (unsigned long long)k->end, node, kernel_name(k->name, nm, sizeof nm));
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const void *)r;
            node_word(m->graphNodeId, node, sizeof node);
            say("gpu pid=%d corr=%u kind=memcpy dev=%u stream=%u t0=%llu t1=%llu bytes=%llu "
                "srcmem=%s dstmem=%s%s name=Memcpy %s", pid, m->correlationId, m->deviceId,
                m->streamId, (unsigned long long)m->start, (unsigned long long)m->end,
                (unsigned long long)m->bytes, mem_kind(m->srcKind), mem_kind(m->dstKind), node,
                m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "HtoD"
                : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "DtoH"
                : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "DtoD"
                : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOH ? "HtoH"
                                                                  : "other");
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
            const CUpti_ActivityMemcpyPtoP4 *m = (const void *)r;
            node_word(m->graphNodeId, node, sizeof node);
            say("gpu pid=%d corr=%u kind=memcpy dev=%u stream=%u t0=%llu t1=%llu bytes=%llu "
                "srcmem=%s dstmem=%s srcdev=%u dstdev=%u%s name=Memcpy PtoP", pid,
                m->correlationId, m->deviceId, m->streamId, (unsigned long long)m->start,
                (unsigned long long)m->end, (unsigned long long)m->bytes, mem_kind(m->srcKind),
                mem_kind(m->dstKind), m->srcDeviceId, m->dstDeviceId, node);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const void *)r;
            node_word(m->graphNodeId, node, sizeof node);
            say("gpu pid=%d corr=%u kind=memset dev=%u stream=%u t0=%llu t1=%llu bytes=%llu%s "
                "name=Memset", pid, m->correlationId, m->deviceId, m->streamId,
                (unsigned long long)m->start, (unsigned long long)m->end,
                (unsigned long long)m->bytes, node);
            break;
        }
        default:
            break;
        }
    }
    free(buf);
}

static void at_exit(void)
{
    cuptiActivityFlushAll(1);
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
}

/* The entry point the CUDA driver calls (CUDA_INJECTION64_PATH). */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    const char *path = getenv("SYNCSIM_CAPTURE_LOG");
    if (!path || !*path)
        return 0;
    log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "syncsim capture: %s: %s\n", path, strerror(errno));
        return 0;
    }
    off_t at = lseek(log_fd, 0, SEEK_END);
    if (at == 0)
        say("syncsim-cuda-log 1");
    if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
        fprintf(stderr, "syncsim capture: CUPTI refused the subscription (another profiler "
                        "attached?)\n");
        return 0;
    }
    cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_NVTX);
    cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    cuptiActivityFlushPeriod(100);
    atexit(at_exit);
    return 1;
}
