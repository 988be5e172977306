/*
 * shim.c -- libsyncsim_shim.so, preloaded by `syncsim capture`
 * (LD_PRELOAD): cuBLAS and NCCL calls recorded at the library call, with
 * their documented read/write sets, as `lib` records of the event log
 * (traces/formats/cuda_log.c). The translation puts each in place of the
 * kernels the thread launched inside it, instead of guessing accesses from
 * kernels whose parameters say nothing about what they touch.
 *
 * The shim links nothing but libdl (no CUDA runtime, cuBLAS or NCCL: a
 * program that brings its own, as PyTorch does, keeps using its own): the
 * real functions are found with dlsym(RTLD_NEXT), else in whichever object
 * the program loaded them with (next()), and CUPTI's clock and stream ids
 * with dlsym (RTLD_DEFAULT, else through the injection library, which the
 * driver loads RTLD_LOCAL) once the injection library is loaded, so a
 * preloaded process that never touches CUDA (a shell script around the
 * program) loads it harmlessly. A function it cannot find fails its call
 * with the library's own error code; it never aborts the program.
 *
 *   cublasSgemm_v2    its arguments (transposes, m, n, k, leading
 *                     dimensions, A, B, C, whether beta is zero): the
 *                     read/write set is capture_gemm_spans's (capture.c).
 *   ncclAllReduce     their arguments (buffers, count, element size) and
 *   ncclBroadcast     the communicator: its id is the hash of the
 *   ncclReduceScatter ncclUniqueId every rank passed to ncclCommInitRank or
 *   ncclAllGather     ncclCommInitRankConfig (PyTorch's), of the parent's id
 *                     and the color for ncclCommSplit, of all the ids for
 *                     ncclCommInitRankScalable (ncclCommInitAll: one id per
 *                     call), and its number of ranks (ncclCommCount); the
 *                     read/write set and KIND are capture_nccl_spans's
 *                     (traces/formats/capture.c). A communicator in
 *                     non-blocking mode answers ncclInProgress for calls it
 *                     has taken: those are recorded too.
 */
#include <cublas_v2.h>
#include <cuda.h>
#include <nccl.h>

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int log_fd = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void open_log(void)
{
    const char *path = getenv("SYNCSIM_CAPTURE_LOG");
    if (path && *path)
        log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    pthread_once(&once, open_log);
    if (log_fd < 0)
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf - 1)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(log_fd, buf, (size_t)n);
    (void)w;
}

/* Finds symbol `name` in a loaded object other than this shim: the
 * dl_iterate_phdr walk behind next(). */
typedef struct lookup {
    const char *name;
    void *found;
} lookup;

static int look_in(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    lookup *l = data;
    const char *path = info->dlpi_name;
    if (l->found || !path || !*path || strstr(path, "libsyncsim_shim"))
        return l->found != NULL;
    /* RTLD_NOLOAD: a handle on what is loaded (RTLD_LOCAL included), never a new load */
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    void *f = dlsym(h, l->name);
    Dl_info where;
    /* a definition, not this shim's own symbol seen through a dependency */
    if (f && dladdr(f, &where) && where.dli_fname && !strstr(where.dli_fname, "libsyncsim_shim"))
        l->found = f;
    dlclose(h);
    return l->found != NULL;
}

/* The real function `name`: the next definition after the shim in the
 * global scope, else one in any object the program loaded, also with
 * RTLD_LOCAL (PyTorch loads cuBLAS and NCCL as dependencies of extension
 * modules that Python dlopen()s locally, out of RTLD_NEXT's sight). NULL
 * when none: the caller then fails the call the way the library would
 * (one line on stderr), never aborts the program. */
static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        lookup l = { name, NULL };
        dl_iterate_phdr(look_in, &l);
        f = l.found;
    }
    if (!f)
        fprintf(stderr, "syncsim capture: %s: no definition in the program's libraries; "
                        "the call fails\n", name);
    return f;
}

/* Symbol `name` of CUPTI or the driver: in the global scope, else through
 * the injection library (the driver loads it, and with it CUPTI, with
 * RTLD_LOCAL: out of RTLD_DEFAULT's sight). NULL before it is loaded. */
static void *inject_sym(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (!f && path && *path) {
        void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            f = dlsym(h, name);
            dlclose(h);
        }
    }
    return f;
}

/* CUPTI's clock (the log's), or 0 before the injection is loaded. */
static uint64_t now(void)
{
    static int (*ts)(uint64_t *);
    if (!ts)
        ts = (int (*)(uint64_t *))inject_sym("cuptiGetTimestamp");
    uint64_t t = 0;
    if (ts)
        ts(&t);
    return t;
}

/* The device and CUPTI stream id of stream s on the current context. */
static void where(cudaStream_t s, int *dev, long *stream)
{
    static CUresult (*get_ctx)(CUcontext *);
    static CUresult (*get_dev)(CUdevice *);
    static int (*sid)(CUcontext, CUstream, uint8_t, uint32_t *);
    if (!get_ctx || !sid) {
        get_ctx = (CUresult(*)(CUcontext *))inject_sym("cuCtxGetCurrent");
        get_dev = (CUresult(*)(CUdevice *))inject_sym("cuCtxGetDevice");
        sid = (int (*)(CUcontext, CUstream, uint8_t, uint32_t *))inject_sym(
                                                                        "cuptiGetStreamIdEx");
    }
    CUcontext ctx = NULL;
    CUdevice d = 0;
    uint32_t id = 0;
    if (get_ctx)
        get_ctx(&ctx);
    if (get_dev)
        get_dev(&d);
    uintptr_t h = (uintptr_t)s;
    int per_thread = h == (uintptr_t)cudaStreamPerThread;
    if (sid)
        sid(ctx, per_thread || h == (uintptr_t)cudaStreamLegacy ? NULL : (CUstream)s,
            (uint8_t)per_thread, &id);
    *dev = (int)d;
    *stream = (long)id;
}

#define PTR(p) (unsigned long long)(uintptr_t)(p)

/* ------------------------------------------------------------------ */
/* cuBLAS.                                                             */

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    static cublasStatus_t (*real)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const float *, const float *, int, const float *, int,
                                  const float *, float *, int);
    static cublasStatus_t (*get_stream)(cublasHandle_t, cudaStream_t *);
    if (!real) {
        get_stream = next("cublasGetStream_v2");
        real = next("cublasSgemm_v2");
    }
    if (!real || !get_stream)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    uint64_t t0 = now();
    cublasStatus_t st = real(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    uint64_t t1 = now();
    if (st != CUBLAS_STATUS_SUCCESS || m <= 0 || n <= 0 || k <= 0)
        return st;
    cudaStream_t s = NULL;
    get_stream(handle, &s);
    int dev;
    long stream;
    where(s, &dev, &stream);
    /* the arguments; the read/write set is the capture's rule
     * (capture_gemm_spans in traces/formats/capture.c). beta is read on the host in
     * the default pointer mode: in device mode it counts as not zero. */
    cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
    static cublasStatus_t (*get_pm)(cublasHandle_t, cublasPointerMode_t *);
    if (!get_pm)
        get_pm = next("cublasGetPointerMode_v2");
    if (get_pm)
        get_pm(handle, &pm);
    int beta_nonzero = pm != CUBLAS_POINTER_MODE_HOST || !beta || *beta != 0.0f;
    say("lib pid=%d tid=%ld t0=%llu t1=%llu dev=%d stream=%ld gemm=%d,%d,%d,%d,%d,%d,%d,%d,4,%d "
        "a=0x%llx b=0x%llx c=0x%llx name=cublasSgemm_v2",
        getpid(), (long)syscall(SYS_gettid), (unsigned long long)t0, (unsigned long long)t1, dev,
        stream, transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, lda, ldb, ldc,
        beta_nonzero, PTR(A), PTR(B), PTR(C));
    return st;
}

/* ------------------------------------------------------------------ */
/* NCCL.                                                               */

#define COMMS 256
static struct { ncclComm_t comm; unsigned long long id; } comms[COMMS];
static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;

static void comm_remember(ncclComm_t c, unsigned long long id)
{
    pthread_mutex_lock(&comm_lock);
    size_t i = ((uintptr_t)c >> 4) % COMMS;
    comms[i].comm = c;
    comms[i].id = id;
    pthread_mutex_unlock(&comm_lock);
}

static unsigned long long comm_id(ncclComm_t c)
{
    pthread_mutex_lock(&comm_lock);
    size_t i = ((uintptr_t)c >> 4) % COMMS;
    unsigned long long id = comms[i].comm == c ? comms[i].id : (unsigned long long)(uintptr_t)c;
    pthread_mutex_unlock(&comm_lock);
    return id;
}

static unsigned long long fnv_more(unsigned long long h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

static unsigned long long fnv(const void *p, size_t n)
{
    return fnv_more(1469598103934665603ull, p, n);
}

/* Whether NCCL took the call: done, or started on a non-blocking
 * communicator (its handle is valid, its work is queued). */
static int taken(ncclResult_t r)
{
#if NCCL_VERSION_CODE >= 21400
    return r == ncclSuccess || r == ncclInProgress;
#else
    return r == ncclSuccess;
#endif
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    static ncclResult_t (*real)(ncclComm_t *, int, ncclUniqueId, int);
    if (!real)
        real = next("ncclCommInitRank");
    if (!real)
        return ncclInternalError;
    ncclResult_t r = real(comm, nranks, id, rank);
    if (taken(r))
        comm_remember(*comm, fnv(&id, sizeof id));
    return r;
}

#if NCCL_VERSION_CODE >= 21400
/* PyTorch's ProcessGroupNCCL creates its communicators with a config. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    static ncclResult_t (*real)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    if (!real)
        real = next("ncclCommInitRankConfig");
    if (!real)
        return ncclInternalError;
    ncclResult_t r = real(comm, nranks, id, rank, config);
    if (taken(r))
        comm_remember(*comm, fnv(&id, sizeof id));
    return r;
}
#endif

#if NCCL_VERSION_CODE >= 21800
/* The ranks of comm that pass the same color make one communicator: its id
 * is the parent's and the color's, which they all compute alike. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    static ncclResult_t (*real)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
    if (!real)
        real = next("ncclCommSplit");
    if (!real)
        return ncclInternalError;
    ncclResult_t r = real(comm, color, key, newcomm, config);
    if (taken(r) && *newcomm) {
        unsigned long long parent = comm_id(comm);
        comm_remember(*newcomm, fnv_more(fnv(&parent, sizeof parent), &color, sizeof color));
    }
    return r;
}
#endif

#if NCCL_VERSION_CODE >= 22300
ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int n_ids,
                                      ncclUniqueId *ids, ncclConfig_t *config)
{
    static ncclResult_t (*real)(ncclComm_t *, int, int, int, ncclUniqueId *, ncclConfig_t *);
    if (!real)
        real = next("ncclCommInitRankScalable");
    if (!real)
        return ncclInternalError;
    ncclResult_t r = real(comm, nranks, rank, n_ids, ids, config);
    if (taken(r) && n_ids > 0)
        comm_remember(*comm, fnv(ids, (size_t)n_ids * sizeof *ids));
    return r;
}
#endif

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    static ncclResult_t (*real)(ncclComm_t *, int, const int *);
    if (!real)
        real = next("ncclCommInitAll");
    if (!real)
        return ncclInternalError;
    ncclResult_t r = real(comm, ndev, devlist);
    if (taken(r))
        for (int i = 0; i < ndev; i++)
            comm_remember(comm[i], (unsigned long long)(uintptr_t)comm);
    return r;
}

static size_t dtype_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

/* One `lib` record of an NCCL call: its arguments; the read/write set and
 * KIND are capture_nccl_spans's (traces/formats/capture.c). */
static void coll(const char *name, const void *send, void *recv, size_t count, ncclDataType_t t,
                 ncclComm_t comm, cudaStream_t s, uint64_t t0)
{
    uint64_t t1 = now();
    static ncclResult_t (*ranks_of)(const ncclComm_t, int *);
    if (!ranks_of)
        ranks_of = next("ncclCommCount");
    int ranks = 0, dev;
    long stream;
    if (ranks_of)
        ranks_of(comm, &ranks);
    where(s, &dev, &stream);
    say("lib pid=%d tid=%ld t0=%llu t1=%llu dev=%d stream=%ld nccl=%zu,%zu send=0x%llx "
        "recv=0x%llx comm=nccl.%llx ranks=%d name=%s",
        getpid(), (long)syscall(SYS_gettid), (unsigned long long)t0, (unsigned long long)t1, dev,
        stream, count, dtype_size(t), PTR(send), PTR(recv), comm_id(comm), ranks, name);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t s)
{
    static ncclResult_t (*real)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                ncclComm_t, cudaStream_t);
    if (!real)
        real = next("ncclAllReduce");
    if (!real)
        return ncclInternalError;
    uint64_t t0 = now();
    ncclResult_t r = real(send, recv, count, t, op, comm, s);
    if (taken(r))
        coll("ncclAllReduce", send, recv, count, t, comm, s, t0);
    return r;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t s)
{
    static ncclResult_t (*real)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                                cudaStream_t);
    if (!real)
        real = next("ncclBroadcast");
    if (!real)
        return ncclInternalError;
    uint64_t t0 = now();
    ncclResult_t r = real(send, recv, count, t, root, comm, s);
    if (taken(r))
        coll("ncclBroadcast", send, recv, count, t, comm, s, t0);
    return r;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t s)
{
    static ncclResult_t (*real)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                                cudaStream_t);
    if (!real)
        real = next("ncclAllGather");
    if (!real)
        return ncclInternalError;
    uint64_t t0 = now();
    ncclResult_t r = real(send, recv, count, t, comm, s);
    if (taken(r))
        coll("ncclAllGather", send, recv, count, t, comm, s, t0);
    return r;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t s)
{
    static ncclResult_t (*real)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                ncclComm_t, cudaStream_t);
    if (!real)
        real = next("ncclReduceScatter");
    if (!real)
        return ncclInternalError;
    uint64_t t0 = now();
    ncclResult_t r = real(send, recv, count, t, op, comm, s);
    if (taken(r))
        coll("ncclReduceScatter", send, recv, count, t, comm, s, t0);
    return r;
}
