/*
 * inject.c -- libsyncsim_inject.so, the CUPTI injection library of
 * `syncsim capture` (CUDA_INJECTION64_PATH: the CUDA driver loads it into
 * an unmodified program and calls InitializeInjection). It writes the event
 * log that traces/formats/cuda_log.c reads (its header comment is the format),
 * and decides nothing: which call synchronises, allocates or frees is the
 * capture mapping's (traces/formats/capture.c). What it does:
 *
 *   - runtime API callbacks (exit): allocations and frees with pointer and
 *     size, copies with source, destination and bytes, memsets, records,
 *     waits and successful event queries with stream and event,
 *     synchronisations, launches with their stream, streams as they are
 *     first used (legacy, per-thread, blocking or non-blocking). Driver API
 *     calls made outside a runtime call (programs and libraries using the
 *     driver API) are logged the same way, the rest by name.
 *   - launches where the driver sees them, inside a runtime call or not
 *     (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel,
 *     cuGraphLaunch): the CUfunction the driver got and its parameters
 *     (layout from cuFuncGetParamInfo, cached per function; the kernel's
 *     demangled name in its activity record says which pointees are
 *     const). Every runtime reaches the driver, the program's own (static
 *     or shipped, as PyTorch's) included, so this library links none: only
 *     libcuda and CUPTI. A graph launch gives the kernel nodes of the graph
 *     its exec was instantiated from (cuGraphInstantiate*), under the ids
 *     of their clones in the exec (CUPTI's resource callback).
 *   - call sites (site=, py=; below): where in the program each call was
 *     made, symbolised after the run.
 *   - activity records (kernels, copies, peer copies, memsets): GPU start
 *     and end on the CUPTI clock, which the API times use too;
 *   - NVTX (NVTX_INJECTION64_PATH, set by `syncsim capture`): push/pop
 *     ranges (nvtxRangePushA), and marks "syncsim:r PTR SIZE [LABEL]" (w,
 *     rw; PTR in hex) that tell the log about a host access CUPTI cannot
 *     see. Start/end ranges and the wide-character calls are not recorded.
 *
 * The log is opened O_APPEND and written in batches of whole lines (one
 * write(2) each: when full, at each synchronise, every 100 ms with the
 * activity buffers, at exit and on a fatal signal), so what the program did
 * survives a crash; a program killed outright (SIGKILL) loses at most the
 * last batch. SYNCSIM_CAPTURE_LOG names the file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1           /* dl_iterate_phdr, RTLD_DEFAULT */
#endif
#include <cuda.h>
#include <cuda_runtime_api.h>   /* types of the runtime callbacks' parameters only */
#include <cupti.h>

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
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
static __thread long outer_corr;       /* the open runtime call's correlation id */

#define LINE_MAX_BYTES 8192
#define BATCH_BYTES (64u << 10)

/* Lines are batched (one write(2) per batch, not per line: the cost of a
 * launch-bound program is mostly these calls). A batch is written when it
 * is full, at each synchronising call, at each activity flush (every 100
 * ms), at exit, and on a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT: the program's own handler then runs). A program killed outright
 * loses at most its last batch; every batch holds whole lines and the file
 * is opened O_APPEND, so the shim's lines never interleave inside ours. */
static char batch[BATCH_BYTES];
static size_t batch_len;
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;

static void flush_locked(void)
{
    size_t at = 0;
    while (at < batch_len) {
        ssize_t w = write(log_fd, batch + at, batch_len - at);
        if (w <= 0)
            break;
        at += (size_t)w;
    }
    batch_len = 0;
}

static void flush_log(void)
{
    if (log_fd < 0)
        return;
    pthread_mutex_lock(&batch_lock);
    flush_locked();
    pthread_mutex_unlock(&batch_lock);
}

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
    pthread_mutex_lock(&batch_lock);
    if (batch_len + (size_t)n > sizeof batch)
        flush_locked();
    memcpy(batch + batch_len, buf, (size_t)n);
    batch_len += (size_t)n;
    pthread_mutex_unlock(&batch_lock);
}

/* A fatal signal: the batch as it is (no lock: the thread that holds it
 * may be the one that faulted), then the program's own handling. */
static struct sigaction old_action[32];
static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

static void on_fatal(int sig, siginfo_t *info, void *uc)
{
    if (log_fd >= 0 && batch_len <= sizeof batch) {
        ssize_t w = write(log_fd, batch, batch_len);
        (void)w;
        batch_len = 0;
    }
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

/* A forked child starts with no lines of its parent's to write. */
static void forget_batch(void)
{
    batch_len = 0;
}

static void catch_fatal_signals(void)
{
    pthread_atfork(NULL, NULL, forget_batch);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_signals[i], &sa, &old_action[fatal_signals[i]]);
    }
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
/* Call sites: where in the program a CUDA call was made.             */
/*                                                                    */
/* At the entry of the call the program made (the outermost runtime or  */
/* driver call of a thread), the return addresses of the stack outside  */
/* the CUDA driver, CUPTI, the CUDA runtime and syncsim's libraries are */
/* kept (at most SITE_FRAMES, written as site=ADDR,ADDR,...). Nothing is */
/* symbolised while the program runs: at exit a `module` record gives   */
/* each loaded object's load address and path, and `syncsim capture`    */
/* turns addresses into file:line after the run (addr2line). In a      */
/* Python process whose thread holds the GIL, the innermost Python     */
/* frame outside torch/ is written too (py=FILE:LINE): a few reads of  */
/* the interpreter's frame, no hook on every Python call.              */
/* SYNCSIM_CAPTURE_SITES=0 turns both off.                             */

#define SITE_FRAMES 4
#define SKIP_RANGES 32
static struct { uintptr_t lo, hi; } skip[SKIP_RANGES];
static int n_skip;
static int sites_on = 1;
static __thread char site_words[256];  /* " site=... py=..." of the open call */

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

/* " py=FILE:LINE" of the calling thread's Python code, into out. */
static void python_site(char *out, size_t cap)
{
    out[0] = '\0';
    if (!py.initialized || !py.gil || !py.frame || !py.back || !py.code || !py.line ||
        !py.attr || !py.utf8 || !py.decref || !py.initialized() || !py.gil())
        return;
    void *f = py.frame();       /* borrowed */
    int owned = 0;
    char first[200] = "";
    for (int depth = 0; f && depth < 12; depth++) {
        void *code = py.code(f);
        void *fn = code ? py.attr(code, "co_filename") : NULL;
        const char *file = fn ? py.utf8(fn) : NULL;
        int line = py.line(f);
        int library = !file || file[0] == '<' || strstr(file, "/torch/") ||
                      strstr(file, "/site-packages/") || strstr(file, "/dist-packages/");
        char here[200];
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
    if (first[0]) {
        for (char *c = first; *c; c++)
            if (*c == ' ' || *c == '\n')
                *c = '_';
        snprintf(out, cap, " py=%s", first);
    }
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

/* Fills site_words for call `name`, which the program is entering. */
static void take_site(const char *name)
{
    site_words[0] = '\0';
    if (!sites_on || !site_wanted(name))
        return;
    void *pc[24];                /* CUPTI's, the driver's and a runtime's frames first */
    int n = backtrace(pc, 24), kept = 0;
    size_t at = 0;
    for (int i = 1; i < n && kept < SITE_FRAMES; i++) {
        uintptr_t a = (uintptr_t)pc[i];
        if (skipped(a))
            continue;
        int w = snprintf(site_words + at, sizeof site_words - at, "%s0x%llx",
                         kept ? "," : " site=", (unsigned long long)a);
        if (w < 0 || (size_t)w >= sizeof site_words - at)
            break;
        at += (size_t)w;
        kept++;
    }
    python_site(site_words + at, sizeof site_words - at);
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
        say("module pid=%d base=0x%llx lo=0x%llx hi=0x%llx name=%s", getpid(),
            (unsigned long long)info->dlpi_addr, (unsigned long long)lo,
            (unsigned long long)hi, path);
    return 0;
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
    if (fresh) {                /* its kind: asked once per stream */
        const char *kind = per_thread ? "per-thread" : legacy ? "legacy" : "blocking";
        unsigned int flags = 0;
        in_glue++;
        if (!per_thread && !legacy && cuStreamGetFlags(cs, &flags) == CUDA_SUCCESS &&
            (flags & CU_STREAM_NON_BLOCKING))
            kind = "nonblocking";
        in_glue--;
        say("stream pid=%d dev=%d stream=%u kind=%s", getpid(), dev, id, kind);
    }
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
/* Kernel parameters, taken where the driver sees the launch.          */

/* A kernel's parameter layout (cuFuncGetParamInfo), kept per CUfunction so
 * that a launch costs one table look-up, not one driver call a parameter. */
#define FUNCS 4096
#define FUNC_PARAMS 64
typedef struct func_layout {
    CUfunction f;
    uint16_t n;                         /* parameters */
    uint16_t off[FUNC_PARAMS], size[FUNC_PARAMS];
} func_layout;
static func_layout funcs[FUNCS];
static pthread_mutex_t func_lock = PTHREAD_MUTEX_INITIALIZER;

static void layout_of(CUfunction f, func_layout *out)
{
    size_t i = ((uintptr_t)f >> 4) % FUNCS;
    pthread_mutex_lock(&func_lock);
    func_layout *l = &funcs[i];
    if (l->f != f) {
        l->f = f;
        l->n = 0;
        in_glue++;
        for (size_t k = 0; k < FUNC_PARAMS; k++) {
            size_t off = 0, size = 0;
            if (cuFuncGetParamInfo(f, k, &off, &size) != CUDA_SUCCESS)
                break;
            l->off[k] = (uint16_t)off;
            l->size[k] = (uint16_t)size;
            l->n = (uint16_t)(k + 1);
        }
        in_glue--;
    }
    *out = *l;      /* copied: another function may take the slot later */
    pthread_mutex_unlock(&func_lock);
}

/* The packed argument buffer of a launch made with `extra`
 * (CU_LAUNCH_PARAM_BUFFER_POINTER), or NULL. */
static const unsigned char *packed_args(void **extra)
{
    for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END && i < 16; i += 2)
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            return extra[i + 1];
    return NULL;
}

#define AGGREGATE_WORDS 64         /* words of a by-value structure looked at */
#define MIN_ADDRESS 0x100000ull    /* below: a count or a stride, not an address */

/* One `param` line per pointer-sized parameter of the launch of f (a
 * pointer or not: the log's reader keeps the values that point into
 * allocations, and reads const-ness off the kernel's demangled name).
 * corr is the call the program made (the runtime call around a driver
 * launch, when there is one); dcorr the driver call's own id when it
 * differs, so that activity records carrying either find the launch. */
static void write_params(CUfunction f, void **args, void **extra, long corr, long dcorr,
                         long long node)
{
    if (!f)
        return;
    func_layout l;
    layout_of(f, &l);
    const unsigned char *packed = args ? NULL : packed_args(extra);
    char nodebuf[32] = "", dbuf[32] = "";
    if (node >= 0)
        snprintf(nodebuf, sizeof nodebuf, " node=%lld", node);
    if (dcorr >= 0 && dcorr != corr)
        snprintf(dbuf, sizeof dbuf, " dcorr=%ld", dcorr);
    for (size_t i = 0; i < l.n; i++) {
        const unsigned char *at = args && args[i] ? args[i] : packed ? packed + l.off[i] : NULL;
        if (!at || l.size[i] < sizeof(void *))
            continue;
        uint64_t v;
        if (l.size[i] == sizeof(void *)) {
            memcpy(&v, at, sizeof v);
            if (v)
                say("param pid=%d corr=%ld%s%s idx=%zu ptr=0x%llx", getpid(), corr, dbuf,
                    nodebuf, i, (unsigned long long)v);
            continue;
        }
        /* a structure passed by value (PyTorch's TensorIterator kernels pass
         * their operands' pointers in at::detail::Array<char*, N>): each
         * aligned word that could be an address; the reader keeps those
         * that point into allocations */
        size_t words = l.size[i] / sizeof v;
        for (size_t w = 0; w < words && w < AGGREGATE_WORDS; w++) {
            memcpy(&v, at + w * sizeof v, sizeof v);
            if (v < MIN_ADDRESS || v >> 57)
                continue;
            say("param pid=%d corr=%ld%s%s idx=%zu word=%zu ptr=0x%llx", getpid(), corr, dbuf,
                nodebuf, i, w, (unsigned long long)v);
        }
    }
}

/* A graph launch: the kernel nodes of the graph its exec was instantiated
 * from (cuGraphInstantiate*, seen at the driver whoever called it). */
#define GRAPHS 1024
static struct { CUgraphExec exec; CUgraph graph; } graphs[GRAPHS];
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;

static void graph_instantiated(CUgraphExec exec, CUgraph graph)
{
    pthread_mutex_lock(&graph_lock);
    size_t i = ((uintptr_t)exec >> 4) % GRAPHS;
    graphs[i].exec = exec;
    graphs[i].graph = graph;
    pthread_mutex_unlock(&graph_lock);
}

/* Kernel nodes cloned into an executable graph get ids of their own, and
 * the activity of a graph launch names those: the latest clone of each
 * node of an original graph (CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED). */
#define CLONES 8192
static struct { uint64_t orig, clone; } clones[CLONES];

static void graph_node_cloned(const CUpti_GraphData *gd)
{
    uint64_t orig = 0, clone = 0;
    if (!gd || gd->nodeType != CU_GRAPH_NODE_TYPE_KERNEL ||
        cuptiGetGraphNodeId(gd->originalNode, &orig) != CUPTI_SUCCESS ||
        cuptiGetGraphNodeId(gd->node, &clone) != CUPTI_SUCCESS)
        return;
    pthread_mutex_lock(&graph_lock);
    size_t i = orig % CLONES;
    clones[i].orig = orig;
    clones[i].clone = clone;
    pthread_mutex_unlock(&graph_lock);
}

static uint64_t clone_of(uint64_t orig)
{
    pthread_mutex_lock(&graph_lock);
    size_t i = orig % CLONES;
    uint64_t c = clones[i].orig == orig ? clones[i].clone : 0;
    pthread_mutex_unlock(&graph_lock);
    return c;
}

static void graph_params(CUgraphExec exec, long corr, long dcorr)
{
    pthread_mutex_lock(&graph_lock);
    size_t i = ((uintptr_t)exec >> 4) % GRAPHS;
    CUgraph g = graphs[i].exec == exec ? graphs[i].graph : NULL;
    pthread_mutex_unlock(&graph_lock);
    if (!g)
        return;
    in_glue++;
    size_t n = 0;
    if (cuGraphGetNodes(g, NULL, &n) == CUDA_SUCCESS && n) {
        CUgraphNode *nodes = calloc(n, sizeof *nodes);
        if (nodes && cuGraphGetNodes(g, nodes, &n) == CUDA_SUCCESS) {
            for (size_t k = 0; k < n; k++) {
                CUgraphNodeType type;
                CUDA_KERNEL_NODE_PARAMS kp;
                uint64_t id = 0;
                memset(&kp, 0, sizeof kp);
                if (cuGraphNodeGetType(nodes[k], &type) != CUDA_SUCCESS ||
                    type != CU_GRAPH_NODE_TYPE_KERNEL ||
                    cuGraphKernelNodeGetParams(nodes[k], &kp) != CUDA_SUCCESS ||
                    cuptiGetGraphNodeId(nodes[k], &id) != CUPTI_SUCCESS)
                    continue;
                CUfunction f = kp.func;
                if (!f && kp.kern && cuKernelGetFunction(&f, kp.kern) != CUDA_SUCCESS)
                    continue;
                write_params(f, kp.kernelParams, kp.extra, corr, dcorr, (long long)id);
                uint64_t clone = clone_of(id);
                if (clone && clone != id)
                    write_params(f, kp.kernelParams, kp.extra, corr, dcorr, (long long)clone);
            }
        }
        free(nodes);
    }
    in_glue--;
}

/* The launches of a driver call (nested in a runtime call or not): its
 * parameters, written once, under the id of the call the program made. */
static void driver_launch(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, long corr)
{
    const void *p = cb->functionParams;
    long dcorr = (long)cb->correlationId;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const cuLaunchKernel_params *a = p;
        write_params(a->f, a->kernelParams, a->extra, corr, dcorr, -1);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_params *a = p;
        write_params(a->f, a->kernelParams, a->extra, corr, dcorr, -1);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
        const cuLaunchCooperativeKernel_params *a = p;
        write_params(a->f, a->kernelParams, NULL, corr, dcorr, -1);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags: {
        const cuGraphInstantiateWithFlags_params *a = p;
        graph_instantiated(*a->phGraphExec, a->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: {
        const cuGraphInstantiateWithParams_params *a = p;
        graph_instantiated(*a->phGraphExec, a->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2: {
        const cuGraphInstantiate_v2_params *a = p;  /* the same first two */
        graph_instantiated(*a->phGraphExec, a->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
        const cuGraphLaunch_params *a = p;
        graph_params(a->hGraph, corr, dcorr);
        break;
    }
    default:
        break;
    }
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
    /* launches: the parameters are taken where the driver sees them
     * (driver_launch): the runtime's own symbol table would not know the
     * kernels of a program that carries its own runtime */
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
        const cudaLaunchKernel_v7000_params *a = p;
        X(" stream=%ld", stream_id(a->stream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
        const cudaLaunchKernelExC_v11060_params *a = p;
        X(" stream=%ld", stream_id(a->config ? a->config->stream : 0, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000: {
        const cudaGraphLaunch_v10000_params *a = p;
        X(" stream=%ld", stream_id(a->stream, ptsz));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020: {
        const cudaEventQuery_v3020_params *a = p;
        X(" event=%llu", event_id(a->event));
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
    say("api pid=%d tid=%ld t0=%llu t1=%llu corr=%ld dev=%d%s%s name=%s", pid, tid(),
        (unsigned long long)t0, (unsigned long long)t1, corr, dev, extra, site_words,
        one_line(name, nm, sizeof nm));
    if (strstr(name, "Synchronize"))
        flush_log();            /* what happened before a synchronise is on disk */
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
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_params *a = p;
        X(" stream=%ld", stream_id((cudaStream_t)(a->config ? a->config->hStream : NULL), ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
        const cuGraphLaunch_params *a = p;
        X(" stream=%ld", stream_id((cudaStream_t)a->hStream, ptsz));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventQuery: {
        const cuEventQuery_params *a = p;
        X(" event=%llu", event_id((cudaEvent_t)a->hEvent));
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
    say("api pid=%d tid=%ld t0=%llu t1=%llu corr=%ld dev=%d%s%s name=%s", getpid(), tid(),
        (unsigned long long)t0, (unsigned long long)t1, corr, cur_device(), extra, site_words,
        one_line(name, nm, sizeof nm));
    if (strstr(name, "Synchronize"))
        flush_log();
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
            if (in_runtime == 0) {
                outer_corr = (long)cb->correlationId;
                take_site(cb->functionName);
            }
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
        static __thread uint64_t drv_t0;
        if (cb->callbackSite == CUPTI_API_ENTER) {
            if (!in_runtime) {
                take_site(cb->functionName);
                drv_t0 = now();
            }
            return;
        }
        CUresult ret = cb->functionReturnValue ? *(const CUresult *)cb->functionReturnValue
                                               : CUDA_SUCCESS;
        /* a launch is taken here, inside a runtime call or not: once */
        if (ret == CUDA_SUCCESS)
            driver_launch(cbid, cb, in_runtime ? outer_corr : (long)cb->correlationId);
        if (!in_runtime)
            driver_exit(cbid, cb, drv_t0);
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        const CUpti_ResourceData *rd = data;
        if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED)
            graph_node_cloned(rd->resourceDescriptor);
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
    flush_log();                /* every 100 ms (cuptiActivityFlushPeriod) */
}

static void at_exit(void)
{
    cuptiActivityFlushAll(1);
    if (sites_on)
        dl_iterate_phdr(write_module, NULL);
    flush_log();
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
    /* the log's clock (CUPTI's) against the wall clock, for records timed
     * by others (PyTorch's allocator history, in microseconds of the epoch) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t_cupti = now();
    say("clock pid=%d t0=%llu unix=%llu", getpid(), (unsigned long long)t_cupti,
        (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    const char *sites = getenv("SYNCSIM_CAPTURE_SITES");
    sites_on = !(sites && strcmp(sites, "0") == 0);
    if (sites_on) {
        void *warm[4];
        backtrace(warm, 4);     /* loads the unwinder now, not inside a callback */
        dl_iterate_phdr(add_skip, NULL);
        python_api();
    }
    if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
        fprintf(stderr, "syncsim capture: CUPTI refused the subscription (another profiler "
                        "attached?)\n");
        return 0;
    }
    cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_NVTX);
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                        CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
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
