/*
 * inject.c -- libsyncsim_inject.so, the CUPTI injection library of
 * `syncsim capture` (CUDA_INJECTION64_PATH: the CUDA driver loads it into
 * an unmodified program and calls InitializeInjection). It writes the event
 * log that traces/formats/cuda_log.c reads (its header comment is the format),
 * and decides nothing: which call synchronises, allocates or frees is the
 * capture mapping's (traces/formats/capture.c). This file holds the
 * callbacks; inject.h says how the library's files stand in layers and what
 * a launch costs. What it records:
 *
 *   - runtime API callbacks (exit): allocations and frees with pointer and
 *     size, copies with source, destination and bytes, memsets, records,
 *     waits and successful event queries with stream and event,
 *     synchronisations, launches with their stream, streams as they are
 *     first used (legacy, per-thread, blocking or non-blocking). Driver API
 *     calls made outside a runtime call (programs and libraries using the
 *     driver API) are logged the same way, the rest by name. A runtime call
 *     whose entry was missed (the one inside which cuInit loaded this
 *     library) is not logged; its driver calls are.
 *   - launches where the driver sees them, inside a runtime call or not
 *     (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel,
 *     cuGraphLaunch): their parameters (inject_params.c). Every runtime
 *     reaches the driver, the program's own (static or shipped, as
 *     PyTorch's) included, so this library links none: only libcuda and
 *     CUPTI. Allocations, mappings and registrations seen at the driver
 *     tell inject_params.c which words of a structure may be addresses.
 *   - call sites (site=, py=; below): where in the program each call was
 *     made, symbolised after the run.
 *   - activity records (kernels, copies, peer copies, memsets): GPU start
 *     and end on the CUPTI clock, which the API times use too; kernel names
 *     demangled, never cut;
 *   - NVTX (NVTX_INJECTION64_PATH names this library, set by `syncsim
 *     capture`; InitializeInjectionNvtx2 below hands NVTX to the CUPTI this
 *     library subscribed on, so that a PyTorch process, which loads a CUPTI
 *     of its own, still sends its marks here): push/pop ranges
 *     (nvtxRangePushA), and marks "syncsim:r PTR SIZE [LABEL]" (w, rw; PTR
 *     in hex) that tell the log about a host access CUPTI cannot see; a
 *     mark starting "syncsim:" that does not read so is counted (a `note`
 *     at exit, and one line on stderr). Start/end ranges and the
 *     wide-character calls are not recorded.
 *
 * SYNCSIM_CAPTURE_LOG names the log; inject_log.c writes it (when, and what
 * a crash or a kill loses).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1           /* dl_iterate_phdr, RTLD_DEFAULT */
#endif
#include "inject.h"

#include <cuda.h>
#include <cuda_runtime_api.h>   /* types of the runtime callbacks' parameters only */
#include <cupti.h>

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>
#include <unistd.h>

/* libstdc++'s demangler (linked with -lstdc++). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

static CUpti_SubscriberHandle subscriber;
static __thread int in_runtime;        /* depth of runtime calls on this thread */
static __thread uint64_t t_enter[64];  /* runtime call start, by depth */
static __thread long outer_corr;       /* the open runtime call's correlation id */

static uint64_t now(void)
{
    uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return t;
}

/* A fatal signal: what the rings hold, then the program's own handling. */
static struct sigaction old_action[32];
static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

static void on_fatal(int sig, siginfo_t *info, void *uc)
{
    ilog_on_fatal();
    struct sigaction *old = sig < 32 ? &old_action[sig] : NULL;
    if (old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, info, uc);
        return;
    }
    if (old && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN && old->sa_handler) {
        old->sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);       /* the default action, as without syncsim */
    raise(sig);
}

static void catch_fatal_signals(void)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_signals[i], &sa, &old_action[fatal_signals[i]]);
    }
}

/* ------------------------------------------------------------------ */
/* Call sites: where in the program a CUDA call was made.             */
/*                                                                    */
/* At the entry of the call the program made (the outermost runtime or  */
/* driver call of a thread), the first ILOG_SITE_FRAMES return addresses */
/* of the stack outside the CUDA driver, CUPTI, the CUDA runtime and    */
/* syncsim's libraries (the unwinder stops there: a few frames, not the */
/* whole stack). Nothing is symbolised while the program runs: at exit  */
/* a `module` record gives each loaded object's load address and path,  */
/* and `syncsim capture` turns addresses into file:line after the run   */
/* (addr2line). In a Python thread that holds the GIL, the innermost    */
/* Python frame outside torch is written too (py=FILE:LINE): a few reads */
/* of the interpreter's frame, no hook on every Python call. PyTorch    */
/* releases the GIL around its ops: their line comes from the          */
/* allocator's history instead (docs/cuda.md).                          */
/* SYNCSIM_CAPTURE_SITES=0 turns both off.                             */

#define SKIP_RANGES 32
static struct { uintptr_t lo, hi; } skip[SKIP_RANGES];
static int n_skip;
static int sites_on = 1;
static __thread uint64_t site_pc[ILOG_SITE_FRAMES];
static __thread int n_site_pc;
static __thread char site_py[ILOG_PY_MAX];

static int skip_object(const char *path)
{
    static const char *const names[] = { "libcuda.so", "libcupti", "libcudart", "libnvrtc",
                                         "libsyncsim_inject", "libsyncsim_shim", "libcublas" };
    for (size_t i = 0; path && i < sizeof names / sizeof names[0]; i++)
        if (strstr(path, names[i]))
            return 1;
    return 0;
}

static int add_skip(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (!skip_object(info->dlpi_name))
        return 0;
    for (int i = 0; i < info->dlpi_phnum && n_skip < SKIP_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        skip[n_skip].lo = info->dlpi_addr + ph->p_vaddr;
        skip[n_skip].hi = skip[n_skip].lo + ph->p_memsz;
        n_skip++;
    }
    return 0;
}

static int skipped(uintptr_t a)
{
    for (int i = 0; i < n_skip; i++)
        if (a >= skip[i].lo && a < skip[i].hi)
            return 1;
    return 0;
}

/* The Python interpreter's C API, when the process has one (dlsym in the
 * program's own objects: nothing is linked). */
static struct {
    int (*initialized)(void);
    int (*gil)(void);
    void *(*frame)(void);
    void *(*back)(void *);
    void *(*code)(void *);
    int (*line)(void *);
    void *(*attr)(void *, const char *);
    const char *(*utf8)(void *);
    void (*decref)(void *);
} py;

static void python_api(void)
{
#define PYSYM(field, name) *(void **)&py.field = dlsym(RTLD_DEFAULT, name)
    PYSYM(initialized, "Py_IsInitialized");
    PYSYM(gil, "PyGILState_Check");
    PYSYM(frame, "PyEval_GetFrame");
    PYSYM(back, "PyFrame_GetBack");
    PYSYM(code, "PyFrame_GetCode");
    PYSYM(line, "PyFrame_GetLineNumber");
    PYSYM(attr, "PyObject_GetAttrString");
    PYSYM(utf8, "PyUnicode_AsUTF8");
    PYSYM(decref, "Py_DecRef");
#undef PYSYM
}

/* "FILE:LINE" of the calling thread's Python code into out ("" when the
 * thread does not hold the GIL or runs no Python). */
static void python_site(char *out, size_t cap)
{
    out[0] = '\0';
    if (!py.initialized || !py.gil || !py.frame || !py.back || !py.code || !py.line ||
        !py.attr || !py.utf8 || !py.decref || !py.initialized() || !py.gil())
        return;
    void *f = py.frame();       /* borrowed */
    int owned = 0;
    char first[ILOG_PY_MAX] = "";
    for (int depth = 0; f && depth < 12; depth++) {
        void *code = py.code(f);
        void *fn = code ? py.attr(code, "co_filename") : NULL;
        const char *file = fn ? py.utf8(fn) : NULL;
        int line = py.line(f);
        int library = !file || file[0] == '<' || strstr(file, "/torch/") ||
                      strstr(file, "/site-packages/") || strstr(file, "/dist-packages/");
        char here[ILOG_PY_MAX];
        here[0] = '\0';
        if (file)
            snprintf(here, sizeof here, "%s:%d", file, line);
        if (fn)
            py.decref(fn);
        if (code)
            py.decref(code);
        if (!first[0])
            memcpy(first, here, sizeof first);
        if (!library && here[0]) {
            memcpy(first, here, sizeof first);
            break;
        }
        void *up = py.back(f);  /* a new reference */
        if (owned)
            py.decref(f);
        f = up;
        owned = 1;
    }
    if (owned && f)
        py.decref(f);
    for (char *c = first; *c; c++)
        if (*c == ' ' || *c == '\n')
            *c = '_';
    snprintf(out, cap, "%s", first);
}

/* Whether call `name` is one whose site a finding may show (work,
 * memory, synchronisation): the others are not worth a stack walk. */
static int site_wanted(const char *name)
{
    static const char *const prefixes[] = {
        "cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaEvent", "cudaStream", "cudaDeviceSynchronize",
        "cudaMalloc", "cudaFree", "cudaHost", "cudaGraphLaunch", "cuLaunch", "cuMemcpy", "cuMemset",
        "cuEvent", "cuStream", "cuCtxSynchronize", "cuMemAlloc", "cuMemFree", "cuMemHost",
        "cuGraphLaunch",
    };
    for (size_t i = 0; name && i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

typedef struct site_walk {
    int depth;
} site_walk;

/* One frame of the unwinder: kept when outside the skipped objects; the
 * walk stops at ILOG_SITE_FRAMES kept or 32 seen. */
static _Unwind_Reason_Code site_frame(struct _Unwind_Context *ctx, void *arg)
{
    site_walk *w = arg;
    uintptr_t ip = _Unwind_GetIP(ctx);
    if (!ip || ++w->depth > 32)
        return _URC_END_OF_STACK;
    if (w->depth > 1 && !skipped(ip)) {     /* the first is this library's */
        site_pc[n_site_pc++] = ip;
        if (n_site_pc == ILOG_SITE_FRAMES)
            return _URC_END_OF_STACK;
    }
    return _URC_NO_REASON;
}

/* What a call id says about its call, asked of its name once: whether it
 * takes the per-thread default stream for 0 (_ptsz, _ptds) and whether its
 * site is wanted. */
enum { CALL_KNOWN = 1, CALL_PTSZ = 2, CALL_SITE = 4 };
static _Atomic uint8_t call_facts[2][1024];     /* [driver?][cbid] */

static unsigned facts_of(int driver, CUpti_CallbackId cbid, const char *name)
{
    _Atomic uint8_t *f = cbid < 1024 ? &call_facts[driver][cbid] : NULL;
    unsigned v = f ? atomic_load_explicit(f, memory_order_relaxed) : 0;
    if (!v) {
        v = CALL_KNOWN | (name && (strstr(name, "_ptsz") || strstr(name, "_ptds")) ? CALL_PTSZ : 0) |
            (site_wanted(name) ? CALL_SITE : 0);
        if (f)
            atomic_store_explicit(f, (uint8_t)v, memory_order_relaxed);
    }
    return v;
}

/* Takes the site of the call the program is entering (facts: facts_of). */
static void take_site(unsigned facts)
{
    n_site_pc = 0;
    site_py[0] = '\0';
    if (!sites_on || !(facts & CALL_SITE))
        return;
    site_walk w = { 0 };
    _Unwind_Backtrace(site_frame, &w);
    python_site(site_py, sizeof site_py);
}

/* The call ending now: its api record, with the site taken at its entry. */
static void api_record(const ilog_api *a)
{
    ilog_api_call(a, site_pc, n_site_pc, site_py[0] ? site_py : NULL);
}

/* One `module` record per loaded object (at exit: what the addresses of
 * site= resolve against after the run). */
static int write_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *path = info->dlpi_name;
    char self[4096];
    if (!path || !*path) {      /* the program itself */
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            return 0;
        self[n] = '\0';
        path = self;
    }
    if (path[0] != '/')
        return 0;               /* the vDSO and the like */
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        lo = a < lo ? a : lo;
        hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
    }
    if (lo < hi)
        ilog_line("module pid=%d base=0x%llx lo=0x%llx hi=0x%llx name=%s", ilog_pid(),
                  (unsigned long long)info->dlpi_addr, (unsigned long long)lo,
                  (unsigned long long)hi, path);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Devices, streams, events: each thread keeps what it asked, so that a */
/* call costs a look-up; a stream or context destroyed empties them.    */

static _Atomic uint32_t handle_gen;   /* bumped when a stream or a context goes */

/* The device of context ctx (0 without one). */
static int ctx_device(CUcontext ctx)
{
    static __thread struct { CUcontext ctx; uint32_t gen; int dev; } seen;
    uint32_t gen = atomic_load_explicit(&handle_gen, memory_order_acquire);
    if (!ctx)
        return 0;
    if (seen.ctx == ctx && seen.gen == gen)
        return seen.dev;
    uint32_t d = 0;
    if (cuptiGetDeviceId(ctx, &d) != CUPTI_SUCCESS)
        d = 0;
    seen.ctx = ctx;
    seen.gen = gen;
    seen.dev = (int)d;
    return (int)d;
}

#define SEEN_STREAMS 4096
#define THREAD_STREAMS 16
static uint64_t seen_stream[SEEN_STREAMS];
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread struct {
    CUcontext ctx;
    uintptr_t h;
    uint32_t gen;
    uint8_t per_thread, used;
    long id;
} thread_streams[THREAD_STREAMS];

/* The CUPTI stream id of handle s on context ctx as the calling API saw it
 * (per_thread_api: a _ptsz/_ptds call, whose 0 is the per-thread default
 * stream). Writes its kind once. */
static long stream_id(CUcontext ctx, cudaStream_t s, int per_thread_api)
{
    uintptr_t h = (uintptr_t)s;
    int per_thread = h == (uintptr_t)cudaStreamPerThread || (h == 0 && per_thread_api);
    int legacy = !per_thread && (h == 0 || h == (uintptr_t)cudaStreamLegacy);
    uint32_t gen = atomic_load_explicit(&handle_gen, memory_order_acquire);
    if (!ctx) {
        inject_glue++;
        cuCtxGetCurrent(&ctx);
        inject_glue--;
    }
    __typeof__(thread_streams[0]) *tc =
        &thread_streams[((h >> 4) ^ ((uintptr_t)ctx >> 6) ^ (uintptr_t)per_thread) % THREAD_STREAMS];
    if (tc->used && tc->ctx == ctx && tc->h == h && tc->per_thread == per_thread && tc->gen == gen)
        return tc->id;
    CUstream cs = per_thread || legacy ? NULL : (CUstream)s;
    uint32_t id = 0;
    if (cuptiGetStreamIdEx(ctx, cs, (uint8_t)per_thread, &id) != CUPTI_SUCCESS)
        id = 0;
    int dev = ctx_device(ctx);
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
    if (fresh) {                /* its kind: asked once per stream */
        const char *kind = per_thread ? "per-thread" : legacy ? "legacy" : "blocking";
        unsigned int flags = 0;
        inject_glue++;
        if (!per_thread && !legacy && cuStreamGetFlags(cs, &flags) == CUDA_SUCCESS &&
            (flags & CU_STREAM_NON_BLOCKING))
            kind = "nonblocking";
        inject_glue--;
        ilog_line("stream pid=%d dev=%d stream=%u kind=%s", ilog_pid(), dev, id, kind);
    }
    *tc = (__typeof__(*tc)){ ctx, h, gen, (uint8_t)per_thread, 1, (long)id };
    return (long)id;
}

/* Events are numbered in the order the program first uses them (ev1,
 * ev2, ...), so that a log names them the same way on every run. */
#define EVENTS 8192
#define THREAD_EVENTS 32
static struct { uintptr_t h; unsigned long long id; } events[EVENTS];
static unsigned long long n_events;
static __thread struct { uintptr_t h; unsigned long long id; } thread_events[THREAD_EVENTS];

static unsigned long long event_id(cudaEvent_t e)
{
    uintptr_t h = (uintptr_t)e;
    __typeof__(thread_events[0]) *tc = &thread_events[(h >> 4) % THREAD_EVENTS];
    if (tc->h == h && tc->id)
        return tc->id;
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
    if (!id)
        return (unsigned long long)h;
    tc->h = h;
    tc->id = id;
    return id;
}

/* ------------------------------------------------------------------ */
/* What the driver sees, inside a runtime call or not.                 */

#define PTR(p) ((uint64_t)(uintptr_t)(p))

/* The driver call cbid succeeded: its launches' parameters (written once,
 * under corr, the call the program made), the memory it allocated, mapped
 * or registered, the graphs it instantiated or destroyed, the modules it
 * unloaded. */
static void driver_seen(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, long corr)
{
    const void *p = cb->functionParams;
    long dcorr = (long)cb->correlationId;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const cuLaunchKernel_params *a = p;
        iparam_launch(a->f, a->kernelParams, a->extra, corr, dcorr);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_params *a = p;
        iparam_launch(a->f, a->kernelParams, a->extra, corr, dcorr);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
        const cuLaunchCooperativeKernel_params *a = p;
        iparam_launch(a->f, a->kernelParams, NULL, corr, dcorr);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags: {
        const cuGraphInstantiateWithFlags_params *a = p;
        iparam_graph_instantiated(*a->phGraphExec, a->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: {
        const cuGraphInstantiateWithParams_params *a = p;
        iparam_graph_instantiated(*a->phGraphExec, a->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2: {
        const cuGraphInstantiate_v2_params *a = p;  /* the same first two */
        iparam_graph_instantiated(*a->phGraphExec, a->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy: {
        const cuGraphExecDestroy_params *a = p;
        iparam_graph_destroyed(a->hGraphExec);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
        const cuGraphLaunch_params *a = p;
        iparam_graph_launch(a->hGraph, corr, dcorr);     /* an exec, named so by CUPTI */
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *a = p;
        iparam_known(*a->dptr, a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const cuMemAllocPitch_v2_params *a = p;
        iparam_known(*a->dptr, (uint64_t)*a->pPitch * a->Height);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
        const cuMemAllocManaged_params *a = p;
        iparam_known(*a->dptr, a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
        const cuMemAllocHost_v2_params *a = p;
        iparam_known(PTR(*a->pp), a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
        const cuMemHostAlloc_params *a = p;
        iparam_known(PTR(*a->pp), a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
        const cuMemHostRegister_v2_params *a = p;
        iparam_known(PTR(a->p), a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *a = p;
        iparam_known(*a->dptr, a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
        const cuMemAllocFromPoolAsync_params *a = p;
        iparam_known(*a->dptr, a->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {    /* expandable segments, NCCL's buffers */
        const cuMemMap_params *a = p;
        iparam_known(a->ptr, a->size);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle:
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2: {   /* another process's memory */
        const cuIpcOpenMemHandle_v2_params *a = p;
        CUdeviceptr base = 0;
        size_t size = 0;
        inject_glue++;
        if (cuMemGetAddressRange(&base, &size, *a->pdptr) == CUDA_SUCCESS)
            iparam_known(base, size);
        inject_glue--;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuModuleUnload:
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload:
        iparam_modules_changed();
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------------ */
/* Runtime calls.                                                      */

static void runtime_exit(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, uint64_t t0)
{
    const void *p = cb->functionParams;
    const char *name = cb->functionName;
    int ptsz = (facts_of(0, cbid, name) & CALL_PTSZ) != 0;
    cudaError_t ret = cb->functionReturnValue ? *(const cudaError_t *)cb->functionReturnValue
                                              : cudaSuccess;
    if (ret != cudaSuccess)
        return;                 /* a failed call did nothing */
    CUcontext ctx = cb->context;
    ilog_api a = { .t0 = t0, .t1 = now(), .corr = (long)cb->correlationId,
                   .dev = ctx_device(ctx), .name = name };
#define STREAM(s) (a.stream = stream_id(ctx, (s), ptsz), a.has |= ILOG_STREAM)
#define EVENT(e) (a.event = event_id(e), a.has |= ILOG_EVENT)
#define PTRSIZE(pt, sz) (a.ptr = PTR(pt), a.size = (sz), a.has |= ILOG_PTR | ILOG_SIZE)
/* an allocation, told to the parameter filter at the runtime too (the
 * driver call under it tells it as well, if CUPTI shows it) */
#define ALLOC(pt, sz) (PTRSIZE(pt, sz), iparam_known(a.ptr, a.size))
#define COPY(s, d, n) (a.src = PTR(s), a.dst = PTR(d), a.bytes = (n), \
                       a.has |= ILOG_SRC | ILOG_DST | ILOG_BYTES)
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
        const cudaMalloc_v3020_params *x = p;
        ALLOC(*x->devPtr, x->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020: {
        const cudaMallocHost_v3020_params *x = p;
        ALLOC(*x->ptr, x->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: {
        const cudaHostAlloc_v3020_params *x = p;
        ALLOC(*x->pHost, x->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
        const cudaMallocManaged_v6000_params *x = p;
        ALLOC(*x->devPtr, x->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000: {
        const cudaHostRegister_v4000_params *x = p;
        ALLOC(x->ptr, x->size);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
        const cudaMallocAsync_v11020_params *x = p;
        ALLOC(*x->devPtr, x->size);
        STREAM(x->hStream);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostUnregister_v4000: {
        void *const *x = p;     /* the first parameter of each: the pointer */
        a.ptr = PTR(*x);
        a.has |= ILOG_PTR;
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
        const cudaFreeAsync_v11020_params *x = p;
        a.ptr = PTR(x->devPtr);
        a.has |= ILOG_PTR;
        STREAM(x->hStream);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000: {
        const cudaMemcpy_v3020_params *x = p;
        COPY(x->src, x->dst, x->count);
        STREAM(0);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000: {
        const cudaMemcpyAsync_v3020_params *x = p;
        COPY(x->src, x->dst, x->count);
        STREAM(x->stream);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000: {
        const cudaMemcpyPeer_v4000_params *x = p;
        COPY(x->src, x->dst, x->count);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000: {
        const cudaMemcpyPeerAsync_v4000_params *x = p;
        COPY(x->src, x->dst, x->count);
        STREAM(x->stream);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000: {
        const cudaMemset_v3020_params *x = p;
        a.ptr = PTR(x->devPtr);
        a.bytes = x->count;
        a.has |= ILOG_PTR | ILOG_BYTES;
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000: {
        const cudaMemsetAsync_v3020_params *x = p;
        a.ptr = PTR(x->devPtr);
        a.bytes = x->count;
        a.has |= ILOG_PTR | ILOG_BYTES;
        STREAM(x->stream);
        break;
    }
    /* launches: the parameters are taken where the driver sees them
     * (driver_seen): the runtime's own symbol table would not know the
     * kernels of a program that carries its own runtime */
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
        const cudaLaunchKernel_v7000_params *x = p;
        STREAM(x->stream);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
        const cudaLaunchKernelExC_v11060_params *x = p;
        STREAM(x->config ? x->config->stream : 0);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000: {
        const cudaGraphLaunch_v10000_params *x = p;
        STREAM(x->stream);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020: {
        const cudaEventQuery_v3020_params *x = p;
        EVENT(x->event);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010: {
        const cudaEventRecord_v3020_params *x = p;   /* event, stream first */
        STREAM(x->stream);
        EVENT(x->event);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000: {
        const cudaStreamWaitEvent_v3020_params *x = p;
        STREAM(x->stream);
        EVENT(x->event);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020: {
        const cudaEventSynchronize_v3020_params *x = p;
        EVENT(x->event);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000: {
        const cudaStreamSynchronize_v3020_params *x = p;
        STREAM(x->stream);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithPriority_v5050: {
        cudaStream_t *const *x = p;  /* pStream first */
        stream_id(ctx, **x, 0);
        return;                 /* the stream record says it all */
    }
    default:
        break;
    }
    api_record(&a);
}

/* A driver API call made outside any runtime call (programs and libraries
 * that use the driver API: cuLaunchKernel, cuMemcpy*, ...), with the same
 * arguments as their runtime twins. */
static void driver_exit(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, uint64_t t0)
{
    const void *p = cb->functionParams;
    const char *name = cb->functionName;
    int ptsz = (facts_of(1, cbid, name) & CALL_PTSZ) != 0;
    CUcontext ctx = cb->context;
    ilog_api a = { .t0 = t0, .t1 = now(), .corr = (long)cb->correlationId,
                   .dev = ctx_device(ctx), .name = name };
#define CUSTREAM(s) STREAM((cudaStream_t)(s))
#define CUEVENT(e) EVENT((cudaEvent_t)(e))
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const cuLaunchKernel_params *x = p;
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_params *x = p;
        CUSTREAM(x->config ? x->config->hStream : NULL);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
        const cuGraphLaunch_params *x = p;
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventQuery: {
        const cuEventQuery_params *x = p;
        CUEVENT(x->hEvent);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *x = p;
        PTRSIZE(*x->dptr, x->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
        const cuMemAllocHost_v2_params *x = p;
        PTRSIZE(*x->pp, x->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
        const cuMemHostAlloc_params *x = p;
        PTRSIZE(*x->pp, x->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *x = p;
        PTRSIZE(*x->dptr, x->bytesize);
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
        const cuMemFree_v2_params *x = p;
        a.ptr = x->dptr;
        a.has |= ILOG_PTR;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
        const cuMemFreeHost_params *x = p;
        a.ptr = PTR(x->p);
        a.has |= ILOG_PTR;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        const cuMemFreeAsync_params *x = p;
        a.ptr = x->dptr;
        a.has |= ILOG_PTR;
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2: {
        const cuMemcpyHtoD_v2_params *x = p;
        COPY(x->srcHost, x->dstDevice, x->ByteCount);
        STREAM(0);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2: {
        const cuMemcpyDtoH_v2_params *x = p;
        COPY(x->srcDevice, x->dstHost, x->ByteCount);
        STREAM(0);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz: {
        const cuMemcpyHtoDAsync_v2_params *x = p;
        COPY(x->srcHost, x->dstDevice, x->ByteCount);
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz: {
        const cuMemcpyDtoHAsync_v2_params *x = p;
        COPY(x->srcDevice, x->dstHost, x->ByteCount);
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz: {
        const cuMemcpyDtoDAsync_v2_params *x = p;
        COPY(x->srcDevice, x->dstDevice, x->ByteCount);
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
        const cuMemcpyAsync_params *x = p;
        COPY(x->src, x->dst, x->ByteCount);
        CUSTREAM(x->hStream);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecord:
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz: {
        const cuEventRecord_params *x = p;
        CUSTREAM(x->hStream);
        CUEVENT(x->hEvent);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz: {
        const cuStreamWaitEvent_params *x = p;
        CUSTREAM(x->hStream);
        CUEVENT(x->hEvent);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize: {
        const cuEventSynchronize_params *x = p;
        CUEVENT(x->hEvent);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz: {
        const cuStreamSynchronize_params *x = p;
        CUSTREAM(x->hStream);
        break;
    }
    default:
        break;
    }
#undef CUSTREAM
#undef CUEVENT
#undef STREAM
#undef EVENT
#undef PTRSIZE
#undef ALLOC
#undef COPY
    api_record(&a);
}

/* ------------------------------------------------------------------ */
/* NVTX.                                                               */

static _Atomic uint64_t malformed_marks;
static char first_malformed[ILOG_PY_MAX];
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reads mark msg "syncsim:MODE PTR SIZE [LABEL]" (MODE r, w or rw; PTR hex,
 * SIZE decimal). 1: a host access; 0: not one of syncsim's marks; -1: one
 * that does not read so. */
static int read_mark(const char *msg, const char **mode, unsigned long long *ptr,
                     unsigned long long *size, const char **label)
{
    if (!msg || strncmp(msg, "syncsim:", 8) != 0)
        return 0;
    const char *m = msg + 8;
    size_t ml = strcspn(m, " ");
    *mode = ml == 2 && m[0] == 'r' && m[1] == 'w' ? "rw"
            : ml == 1 && m[0] == 'r'             ? "r"
            : ml == 1 && m[0] == 'w'             ? "w"
                                                 : NULL;
    if (!*mode || m[ml] != ' ')
        return -1;
    const char *q = m + ml + 1;
    char *end;
    if (!((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F')))
        return -1;
    *ptr = strtoull(q, &end, 16);
    if (end == q || *end != ' ')
        return -1;
    q = end + 1;
    if (*q < '0' || *q > '9')
        return -1;
    *size = strtoull(q, &end, 10);
    if (*end != '\0' && *end != ' ')
        return -1;
    *label = *end == ' ' && end[1] ? end + 1 : msg;
    return 1;
}

static void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData *nv)
{
    static __thread struct { uint64_t t0; char name[200]; } stack[64];
    static __thread int depth;
    switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA: {
        /* nvtxRangePushA_params and nvtxMarkA_params: { const char *message } */
        const char *const *msg = nv->functionParams;
        if (depth < 64) {
            stack[depth].t0 = now();
            snprintf(stack[depth].name, sizeof stack[depth].name, "%s", *msg ? *msg : "");
        }
        depth++;
        break;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
        if (depth > 0 && --depth < 64)
            ilog_line("range pid=%d tid=%ld t0=%llu t1=%llu name=%s", ilog_pid(), ilog_tid(),
                      (unsigned long long)stack[depth].t0, (unsigned long long)now(),
                      stack[depth].name);
        break;
    case CUPTI_CBID_NVTX_nvtxMarkA: {
        const char *const *msg = nv->functionParams;
        const char *mode, *label;
        unsigned long long ptr, size;
        int got = read_mark(*msg, &mode, &ptr, &size, &label);
        if (got > 0) {
            uint64_t t = now();
            ilog_line("host pid=%d tid=%ld t0=%llu t1=%llu mode=%s ptr=0x%llx size=%llu name=%s",
                      ilog_pid(), ilog_tid(), (unsigned long long)t, (unsigned long long)t, mode,
                      ptr, size, label);
        } else if (got < 0 && atomic_fetch_add(&malformed_marks, 1) == 0) {
            pthread_mutex_lock(&mark_lock);
            snprintf(first_malformed, sizeof first_malformed, "%s", *msg);
            for (char *c = first_malformed; *c; c++)
                if (*c == '\n' || *c == '\r')
                    *c = ' ';
            pthread_mutex_unlock(&mark_lock);
        }
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------------------ */
/* The callback.                                                       */

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)ud;
    if (inject_glue)
        return;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        const CUpti_CallbackData *cb = data;
        if (cb->callbackSite == CUPTI_API_ENTER) {
            if (in_runtime == 0) {
                outer_corr = (long)cb->correlationId;
                take_site(facts_of(0, cbid, cb->functionName));
            }
            t_enter[in_runtime < 64 ? in_runtime : 63] = now();
            in_runtime++;
        } else if (in_runtime > 0) {   /* an exit without its entry: not ours to close */
            in_runtime--;
            if (in_runtime == 0)
                runtime_exit(cbid, cb, t_enter[0]);
        }
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        const CUpti_CallbackData *cb = data;
        static __thread uint64_t drv_t0;
        if (cb->callbackSite == CUPTI_API_ENTER) {
            if (!in_runtime) {
                take_site(facts_of(1, cbid, cb->functionName));
                drv_t0 = now();
            }
            return;
        }
        CUresult ret = cb->functionReturnValue ? *(const CUresult *)cb->functionReturnValue
                                               : CUDA_SUCCESS;
        if (ret != CUDA_SUCCESS)
            return;
        /* a launch is taken here, inside a runtime call or not: once */
        driver_seen(cbid, cb, in_runtime ? outer_corr : (long)cb->correlationId);
        if (!in_runtime)
            driver_exit(cbid, cb, drv_t0);
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        const CUpti_ResourceData *rd = data;
        switch (cbid) {
        case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: {
            const CUpti_GraphData *gd = rd->resourceDescriptor;
            uint64_t orig = 0, clone = 0;
            if (gd && gd->nodeType == CU_GRAPH_NODE_TYPE_KERNEL &&
                cuptiGetGraphNodeId(gd->originalNode, &orig) == CUPTI_SUCCESS &&
                cuptiGetGraphNodeId(gd->node, &clone) == CUPTI_SUCCESS)
                iparam_node_cloned(orig, clone);
            break;
        }
        case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING: {
            const CUpti_GraphData *gd = rd->resourceDescriptor;
            if (gd)
                iparam_graph_destroyed(gd->graphExec);
            break;
        }
        case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING:
            iparam_modules_changed();
            break;
        case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING:
        case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
            atomic_fetch_add_explicit(&handle_gen, 1, memory_order_release);
            break;
        default:
            break;
        }
    } else if (domain == CUPTI_CB_DOMAIN_NVTX) {
        on_nvtx(cbid, data);
    }
}

/* ------------------------------------------------------------------ */
/* Activity: when the work ran (CUPTI's thread, off the program's).    */

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

/* A kernel's name as people write it, demangled ("scale(float const*,
 * int)"), whole (PyTorch's run to kilobytes). CUPTI shares one name string
 * among the records of a kernel, so the demangled text is kept by that
 * pointer: a kernel is demangled once. */
#define NAMES 4096
static struct { const char *mangled; char *text; } names[NAMES];
static pthread_mutex_t name_lock = PTHREAD_MUTEX_INITIALIZER;

static char *demangle(const char *mangled)
{
    int st = -1;
    char *d = mangled && mangled[0] == '_' && mangled[1] == 'Z'
                  ? __cxa_demangle(mangled, NULL, NULL, &st) : NULL;
    if (d && st == 0)
        return d;
    free(d);
    return strdup(mangled ? mangled : "?");
}

/* The demangled name of mangled; *tmp: a copy the caller frees (the table
 * was full), else NULL. */
static const char *kernel_name(const char *mangled, char **tmp)
{
    size_t h = ((uintptr_t)mangled >> 4) % NAMES;
    *tmp = NULL;
    pthread_mutex_lock(&name_lock);
    for (size_t n = 0; n < NAMES; n++, h = (h + 1) % NAMES) {
        if (names[h].mangled == mangled) {
            pthread_mutex_unlock(&name_lock);
            return names[h].text;
        }
        if (!names[h].mangled) {
            char *d = demangle(mangled);
            if (d) {
                names[h].mangled = mangled;
                names[h].text = d;
            }
            pthread_mutex_unlock(&name_lock);
            return d ? d : "?";
        }
    }
    pthread_mutex_unlock(&name_lock);
    *tmp = demangle(mangled);
    return *tmp ? *tmp : "?";
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
    int pid = ilog_pid();
    char node[40];
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const void *)r;
            char *tmp;
            const char *name = kernel_name(k->name, &tmp);
            node_word(k->graphNodeId, node, sizeof node);
            ilog_line("gpu pid=%d corr=%u kind=kernel dev=%u stream=%u t0=%llu t1=%llu%s name=%s",
                      pid, k->correlationId, k->deviceId, k->streamId,
                      (unsigned long long)k->start, (unsigned long long)k->end, node, name);
            free(tmp);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const void *)r;
            node_word(m->graphNodeId, node, sizeof node);
            ilog_line("gpu pid=%d corr=%u kind=memcpy dev=%u stream=%u t0=%llu t1=%llu bytes=%llu "
                      "srcmem=%s dstmem=%s%s name=Memcpy %s", pid, m->correlationId, m->deviceId,
                      m->streamId, (unsigned long long)m->start, (unsigned long long)m->end,
                      (unsigned long long)m->bytes, mem_kind(m->srcKind), mem_kind(m->dstKind),
                      node,
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
            ilog_line("gpu pid=%d corr=%u kind=memcpy dev=%u stream=%u t0=%llu t1=%llu bytes=%llu "
                      "srcmem=%s dstmem=%s srcdev=%u dstdev=%u%s name=Memcpy PtoP", pid,
                      m->correlationId, m->deviceId, m->streamId, (unsigned long long)m->start,
                      (unsigned long long)m->end, (unsigned long long)m->bytes,
                      mem_kind(m->srcKind), mem_kind(m->dstKind), m->srcDeviceId, m->dstDeviceId,
                      node);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const void *)r;
            node_word(m->graphNodeId, node, sizeof node);
            ilog_line("gpu pid=%d corr=%u kind=memset dev=%u stream=%u t0=%llu t1=%llu bytes=%llu%s "
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

/* ------------------------------------------------------------------ */
/* Start and end.                                                      */

static void at_exit(void)
{
    cuptiActivityFlushAll(1);
    if (sites_on)
        dl_iterate_phdr(write_module, NULL);
    uint64_t bad = atomic_load(&malformed_marks), refused = iparam_refused();
    if (bad) {
        pthread_mutex_lock(&mark_lock);
        ilog_line("note pid=%d what=malformed-mark n=%llu name=%s", ilog_pid(),
                  (unsigned long long)bad, first_malformed);
        fprintf(stderr, "syncsim capture: %llu NVTX marks start \"syncsim:\" but do not read "
                        "\"syncsim:r|w|rw PTR SIZE [LABEL]\" (first: \"%s\"): not recorded\n",
                (unsigned long long)bad, first_malformed);
        pthread_mutex_unlock(&mark_lock);
    }
    if (refused)
        fprintf(stderr, "syncsim capture: the driver refused the parameter layout of %llu "
                        "kernels: their launches carry no accesses (param-layout)\n",
                (unsigned long long)refused);
    ilog_close();
}

/* The entry point the CUDA driver calls (CUDA_INJECTION64_PATH). */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    const char *path = getenv("SYNCSIM_CAPTURE_LOG");
    if (!path || !*path)
        return 0;
    if (ilog_open(path, now) != 0) {
        perror("syncsim capture: the event log");
        return 0;
    }
    const char *sites = getenv("SYNCSIM_CAPTURE_SITES");
    sites_on = !(sites && strcmp(sites, "0") == 0);
    if (sites_on) {
        site_walk w = { 0 };
        _Unwind_Backtrace(site_frame, &w);  /* loads the unwinder now, not in a callback */
        dl_iterate_phdr(add_skip, NULL);
        python_api();
    }
    iparam_init();
    if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
        fprintf(stderr, "syncsim capture: CUPTI refused the subscription (another profiler "
                        "attached?)\n");
        ilog_close();
        return 0;
    }
    cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_NVTX);
    static const CUpti_CallbackId resources[] = {
        CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
        CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING,
        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    };
    for (size_t i = 0; i < sizeof resources / sizeof resources[0]; i++)
        cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, resources[i]);
    cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    cuptiActivityFlushPeriod(100);
    catch_fatal_signals();
    atexit(at_exit);
    return 1;
}

/* NVTX's injection entry (NVTX_INJECTION64_PATH names this library): NVTX
 * is handed to the CUPTI this library is linked with and subscribed on. A
 * PyTorch process loads a CUPTI of its own from its wheel; had NVTX been
 * given the path of another (the one `syncsim capture` resolved), a second
 * CUPTI would get the marks, with no subscriber. The one linked is found
 * through one of its functions. */
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void *get_export_table)
{
    Dl_info where;
    if (!dladdr((void *)cuptiGetTimestamp, &where) || !where.dli_fname)
        return 0;
    void *cupti = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    int (*init)(const void *) = cupti ? (int (*)(const void *))dlsym(cupti,
                                                                     "InitializeInjectionNvtx2")
                                      : NULL;
    /* the handle stays open: CUPTI stays loaded as long as this library */
    return init && (void *)init != (void *)InitializeInjectionNvtx2 ? init(get_export_table) : 0;
}
