/*
 * inject_params.c -- the parameters of the kernels a program launches, as
 * libsyncsim_inject.so sees them at the driver (cuLaunchKernel and its
 * kin, cuGraphLaunch). It writes values; which of them point into memory,
 * and how a kernel uses them, the log's reader decides
 * (traces/formats/cuda_log.c).
 *
 *   Layouts. A kernel's parameters (offset, size) come from
 *   cuFuncGetParamInfo, asked once per function and kept in a table (a
 *   launch costs a look-up in its thread's own cache, no lock). The driver
 *   may be handed a CUkernel cast to CUfunction (the runtime of CUDA 12+
 *   does): when cuFuncGetParamInfo refuses the handle, cuKernelGetParamInfo
 *   and cuKernelGetFunction are tried. Both are CUDA 12.4 and resolved with
 *   cuGetProcAddress, so that an older driver still loads the library. A
 *   layout no route gives is a refusal: each launch of the function says so
 *   (param ... refused=CURESULT), and the ledger counts it. A module
 *   unloaded (Triton, torch.compile) empties the table: a new function may
 *   get an old handle.
 *
 *   Values. A pointer-sized parameter is written as it is. A structure
 *   passed by value (PyTorch's closures and std::array operands: 648 bytes
 *   for a broadcasting elementwise kernel, about 1 KB for a reduction) is
 *   read whole, 8 bytes at a time, and a word is written only when it
 *   falls in memory the library has seen allocated, mapped or registered
 *   (iparam_known: 2 MiB granules in a table read without a lock), so a
 *   closure of 80 words costs a few lines, not 80. Until the library has
 *   seen memory, and with SYNCSIM_CAPTURE_WORDS=all, every address-like
 *   word is written (the reader keeps those that point into allocations).
 *
 *   Graphs. PyTorch's CUDAGraph::capture_end destroys the graph right after
 *   instantiating it, so nothing may ask the graph at a launch: its kernel
 *   nodes and their parameter values are kept when the exec is
 *   instantiated (cuGraphInstantiate*, with the ids of their clones in the
 *   exec, from CUPTI's resource callbacks during the instantiation) and
 *   written from that snapshot at each cuGraphLaunch. Parameters changed in
 *   the exec afterwards (cuGraphExecKernelNodeSetParams) are not seen.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "inject.h"

#include <cupti.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread int inject_glue;

#define MIN_ADDRESS 0x100000ull   /* below: a count or a stride, not an address */
#define MAX_PARAMS 4096           /* CUDA allows 32 KB of parameters */

/* ------------------------------------------------------------------ */
/* Memory the program has: 2 MiB granules.                             */

#define GRANULE_SHIFT 21
#define KNOWN_SLOTS (1u << 18)    /* 512 GiB of granules at half load */

static _Atomic uint64_t known[KNOWN_SLOTS];   /* granule + 1; 0: empty */
static _Atomic uint64_t known_lo = UINT64_MAX, known_hi;
static _Atomic int known_full;  /* too many: every address-like word is kept */
static uint32_t n_known;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ */
/* The driver functions newer than CUDA 12.0.                           */

static CUresult(CUDAAPI *func_param_info)(CUfunction, size_t, size_t *, size_t *);
static CUresult(CUDAAPI *kernel_param_info)(CUkernel, size_t, size_t *, size_t *);

void iparam_init(void)
{
    const char *words = getenv("SYNCSIM_CAPTURE_WORDS");
    if (words && strcmp(words, "all") == 0)
        atomic_store(&known_full, 1);
    CUdriverProcAddressQueryResult found;
    inject_glue++;
    if (cuGetProcAddress("cuFuncGetParamInfo", (void **)&func_param_info, 12040,
                         CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        found != CU_GET_PROC_ADDRESS_SUCCESS)
        func_param_info = NULL;
    if (cuGetProcAddress("cuKernelGetParamInfo", (void **)&kernel_param_info, 12040,
                         CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        found != CU_GET_PROC_ADDRESS_SUCCESS)
        kernel_param_info = NULL;
    int version = 0;
    if (!func_param_info && cuDriverGetVersion(&version) == CUDA_SUCCESS)
        fprintf(stderr, "syncsim capture: the CUDA driver (%d.%d) has no cuFuncGetParamInfo "
                        "(CUDA 12.4): kernels carry no accesses (param-layout in the ledger)\n",
                version / 1000, version % 1000 / 10);
    inject_glue--;
}

/* ------------------------------------------------------------------ */
/* Layouts.                                                             */

typedef struct layout {
    struct layout *next_all;    /* every layout made: kept to the end (a thread may hold one) */
    CUfunction f;
    uint32_t gen;               /* the module generation it was asked in */
    int status;                 /* 0, or the CUresult of the refusal */
    uint32_t max_words;         /* words a launch may write */
    uint16_t n;
    struct { uint16_t off, size; } p[];
} layout;

#define LAYOUTS 16384             /* slots of the table (a power of two) */
#define THREAD_LAYOUTS 64         /* a thread's own cache */

static _Atomic(layout *) layouts[LAYOUTS];
static layout *all_layouts;
static _Atomic uint32_t module_gen;
static _Atomic uint64_t n_refused;
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread struct { CUfunction f; uint32_t gen; layout *l; } thread_layouts[THREAD_LAYOUTS];

static size_t func_hash(CUfunction f)
{
    uint64_t h = (uint64_t)(uintptr_t)f * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(h >> 40);
}

/* Parameter k's offset and size by route (0: the function, 1: the handle as
 * a CUkernel, 2: the CUkernel's function fn). */
static CUresult param_info(int route, CUfunction f, CUfunction fn, size_t k, size_t *off,
                           size_t *size)
{
    if (route == 0)
        return func_param_info ? func_param_info(f, k, off, size) : CUDA_ERROR_NOT_FOUND;
    if (route == 1)
        return kernel_param_info ? kernel_param_info((CUkernel)f, k, off, size)
                                 : CUDA_ERROR_NOT_FOUND;
    return func_param_info ? func_param_info(fn, k, off, size) : CUDA_ERROR_NOT_FOUND;
}

/* Asks the driver for f's layout. NULL: out of memory. */
static layout *ask_layout(CUfunction f, uint32_t gen)
{
    size_t off, size, n = 0;
    struct { uint16_t off, size; } *p = malloc(MAX_PARAMS * sizeof *p);
    if (!p)
        return NULL;
    inject_glue++;
    CUfunction fn = NULL;
    CUresult first = CUDA_ERROR_NOT_FOUND;
    int route = -1;
    for (int r = 0; r < 3 && route < 0; r++) {
        if (r == 2 && (cuKernelGetFunction(&fn, (CUkernel)f) != CUDA_SUCCESS || fn == f))
            break;
        CUresult st = param_info(r, f, fn, 0, &off, &size);
        if (st == CUDA_SUCCESS)
            route = r;
        else if (r == 0)
            first = st;
    }
    for (; route >= 0 && n < MAX_PARAMS; n++) {
        if (n && param_info(route, f, fn, n, &off, &size) != CUDA_SUCCESS)
            break;          /* past the last parameter */
        p[n].off = (uint16_t)off;
        p[n].size = (uint16_t)size;
    }
    inject_glue--;
    layout *l = calloc(1, sizeof *l + n * sizeof l->p[0]);
    if (l) {
        l->f = f;
        l->gen = gen;
        l->status = route < 0 ? (int)first : 0;
        l->n = (uint16_t)n;
        for (size_t k = 0; k < n; k++) {
            l->p[k].off = p[k].off;
            l->p[k].size = p[k].size;
            l->max_words += p[k].size > 8 ? p[k].size / 8u : 1u;
        }
    }
    free(p);
    return l;
}

/* f's layout: the thread's cache, else the table, else the driver. */
static layout *layout_of(CUfunction f)
{
    uint32_t gen = atomic_load_explicit(&module_gen, memory_order_acquire);
    size_t h = func_hash(f);
    __typeof__(thread_layouts[0]) *tc = &thread_layouts[h % THREAD_LAYOUTS];
    if (tc->f == f && tc->gen == gen && tc->l)
        return tc->l;
    layout *l = NULL;
    for (size_t i = 0; i < LAYOUTS; i++) {
        layout *s = atomic_load_explicit(&layouts[(h + i) % LAYOUTS], memory_order_acquire);
        if (!s)
            break;
        if (s->f == f && s->gen == gen) {
            l = s;
            break;
        }
    }
    if (!l) {               /* first launch of f since its module loaded */
        pthread_mutex_lock(&layout_lock);
        l = ask_layout(f, gen);
        if (l) {
            l->next_all = all_layouts;
            all_layouts = l;
            if (l->status)
                atomic_fetch_add(&n_refused, 1);
            for (size_t i = 0; i < LAYOUTS; i++) {   /* a free slot, or f's, or a stale one */
                _Atomic(layout *) *slot = &layouts[(h + i) % LAYOUTS];
                layout *s = atomic_load_explicit(slot, memory_order_relaxed);
                if (!s || s->f == f || s->gen != gen) {
                    atomic_store_explicit(slot, l, memory_order_release);
                    break;
                }
            }
        }
        pthread_mutex_unlock(&layout_lock);
        if (!l)
            return NULL;
    }
    tc->f = f;
    tc->gen = gen;
    tc->l = l;
    return l;
}

void iparam_modules_changed(void)
{
    atomic_fetch_add_explicit(&module_gen, 1, memory_order_release);
}

uint64_t iparam_refused(void)
{
    return atomic_load(&n_refused);
}

static size_t granule_slot(uint64_t g)
{
    return (size_t)((g * UINT64_C(0x9e3779b97f4a7c15)) >> 46) & (KNOWN_SLOTS - 1);
}

void iparam_known(uint64_t ptr, uint64_t size)
{
    if (!size)
        return;
    uint64_t g0 = ptr >> GRANULE_SHIFT, g1 = (ptr + size - 1) >> GRANULE_SHIFT;
    pthread_mutex_lock(&known_lock);
    if (g1 - g0 >= KNOWN_SLOTS / 2 - n_known)
        atomic_store(&known_full, 1);
    for (uint64_t g = g0; g <= g1 && !atomic_load_explicit(&known_full, memory_order_relaxed); g++) {
        for (size_t i = granule_slot(g);; i = (i + 1) & (KNOWN_SLOTS - 1)) {
            uint64_t s = atomic_load_explicit(&known[i], memory_order_relaxed);
            if (s == g + 1)
                break;
            if (!s) {
                atomic_store_explicit(&known[i], g + 1, memory_order_release);
                n_known++;
                break;
            }
        }
    }
    if (ptr < atomic_load_explicit(&known_lo, memory_order_relaxed))
        atomic_store_explicit(&known_lo, ptr, memory_order_release);
    if (ptr + size > atomic_load_explicit(&known_hi, memory_order_relaxed))
        atomic_store_explicit(&known_hi, ptr + size, memory_order_release);
    pthread_mutex_unlock(&known_lock);
}

/* Whether v may point into memory the program has (a granule of it); any
 * value before the library has seen memory. */
static int is_known(uint64_t v)
{
    if (atomic_load_explicit(&known_full, memory_order_relaxed) ||
        !atomic_load_explicit(&known_hi, memory_order_acquire))
        return 1;
    if (v < atomic_load_explicit(&known_lo, memory_order_acquire) ||
        v >= atomic_load_explicit(&known_hi, memory_order_acquire))
        return 0;
    uint64_t g = v >> GRANULE_SHIFT;
    for (size_t i = granule_slot(g);; i = (i + 1) & (KNOWN_SLOTS - 1)) {
        uint64_t s = atomic_load_explicit(&known[i], memory_order_acquire);
        if (s == g + 1)
            return 1;
        if (!s)
            return 0;
    }
}

/* ------------------------------------------------------------------ */
/* A launch's words.                                                    */

/* The packed argument buffer of a launch made with `extra`
 * (CU_LAUNCH_PARAM_BUFFER_POINTER) and its size, or NULL. */
static const unsigned char *packed_args(void **extra, size_t *size)
{
    const unsigned char *p = NULL;
    *size = SIZE_MAX;
    for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END && i < 16; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            p = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
            *size = *(const size_t *)extra[i + 1];
    }
    return p;
}

/* The words of l's parameters into w (room for l->max_words): each
 * pointer-sized parameter that is not 0, and each address-like word of a
 * structure (filtered: only those is_known() keeps). Returns how many. */
static size_t words_of(const layout *l, void *const *args, void **extra, int filtered,
                       ilog_word *w)
{
    size_t psize;
    const unsigned char *packed = args ? NULL : packed_args(extra, &psize);
    size_t n = 0;
    for (uint16_t i = 0; i < l->n; i++) {
        uint16_t size = l->p[i].size;
        const unsigned char *at = args                                              ? args[i]
                                  : packed && (size_t)l->p[i].off + size <= psize ? packed + l->p[i].off
                                                                                    : NULL;
        if (!at || size < 8)
            continue;
        uint64_t v;
        if (size == 8) {
            memcpy(&v, at, sizeof v);
            if (v)
                w[n++] = (ilog_word){ i, 0, 0, v };
            continue;
        }
        for (uint16_t k = 0; k < size / 8; k++) {
            memcpy(&v, at + 8u * k, sizeof v);
            if (v < MIN_ADDRESS || v >> 57 || (filtered && !is_known(v)))
                continue;
            w[n++] = (ilog_word){ i, (uint16_t)(k + 1), 0, v };
        }
    }
    return n;
}

void iparam_launch(CUfunction f, void **args, void **extra, int64_t corr, int64_t dcorr)
{
    if (!f || !ilog_on())
        return;
    layout *l = layout_of(f);
    if (!l)
        return;
    if (l->status) {
        ilog_params_refused(corr, dcorr, -1, l->status);
        return;
    }
    ilog_word *w = ilog_params_begin(corr, dcorr, -1, l->max_words);
    if (w)
        ilog_params_end(words_of(l, args, extra, 1, w));
}

/* ------------------------------------------------------------------ */
/* Graphs.                                                              */

typedef struct gnode {
    uint64_t id, clone;         /* CUPTI's node id in the graph, and of its clone in the exec */
    int status;                 /* the layout's refusal, or 0 */
    uint32_t n;
    ilog_word w[];              /* address-like values, filtered at each launch */
} gnode;

typedef struct gsnap {
    struct gsnap *next;         /* in its bucket */
    CUgraphExec exec;
    size_t n;
    gnode **nodes;
} gsnap;

#define GRAPH_BUCKETS 1024
static gsnap *graphs[GRAPH_BUCKETS];
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;

/* The clones CUPTI announced on this thread since its last instantiation. */
static __thread struct { uint64_t orig, clone; } *clones;
static __thread size_t n_clones, cap_clones;

void iparam_node_cloned(uint64_t orig_id, uint64_t clone_id)
{
    if (n_clones == cap_clones) {
        size_t cap = cap_clones ? 2 * cap_clones : 64;
        __typeof__(clones) c = realloc(clones, cap * sizeof *c);
        if (!c)
            return;
        clones = c;
        cap_clones = cap;
    }
    clones[n_clones].orig = orig_id;
    clones[n_clones++].clone = clone_id;
}

static void snap_free(gsnap *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->nodes[i]);
    free(s->nodes);
    free(s);
}

static size_t exec_bucket(CUgraphExec e)
{
    return ((uintptr_t)e >> 4) % GRAPH_BUCKETS;
}

/* Removes exec's snapshot from the table; returns it (the caller frees). */
static gsnap *unlink_snap(CUgraphExec exec)
{
    for (gsnap **p = &graphs[exec_bucket(exec)]; *p; p = &(*p)->next)
        if ((*p)->exec == exec) {
            gsnap *s = *p;
            *p = s->next;
            return s;
        }
    return NULL;
}

/* Kernel node `node` as kept in a snapshot, or NULL (not a kernel). */
static gnode *snap_node(CUgraphNode node)
{
    CUgraphNodeType type;
    CUDA_KERNEL_NODE_PARAMS kp;
    uint64_t id = 0;
    memset(&kp, 0, sizeof kp);
    if (cuGraphNodeGetType(node, &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL ||
        cuGraphKernelNodeGetParams(node, &kp) != CUDA_SUCCESS ||
        cuptiGetGraphNodeId(node, &id) != CUPTI_SUCCESS)
        return NULL;
    CUfunction f = kp.func ? kp.func : (CUfunction)kp.kern;
    layout *l = f ? layout_of(f) : NULL;
    gnode *g = l ? calloc(1, sizeof *g + (l->status ? 0 : l->max_words) * sizeof(ilog_word))
                 : NULL;
    if (!g)
        return NULL;
    g->id = id;
    for (size_t k = n_clones; k-- > 0;)
        if (clones[k].orig == id) {
            g->clone = clones[k].clone;
            break;
        }
    g->status = l->status;
    if (!l->status)
        g->n = (uint32_t)words_of(l, kp.kernelParams, kp.extra, 0, g->w);
    return g;
}

void iparam_graph_instantiated(CUgraphExec exec, CUgraph graph)
{
    gsnap *s = calloc(1, sizeof *s);
    size_t n = 0;
    inject_glue++;
    if (s && cuGraphGetNodes(graph, NULL, &n) == CUDA_SUCCESS && n) {
        CUgraphNode *nodes = calloc(n, sizeof *nodes);
        s->nodes = calloc(n, sizeof *s->nodes);
        if (nodes && s->nodes && cuGraphGetNodes(graph, nodes, &n) == CUDA_SUCCESS)
            for (size_t k = 0; k < n; k++)
                if ((s->nodes[s->n] = snap_node(nodes[k])))
                    s->n++;
        free(nodes);
    }
    inject_glue--;
    n_clones = 0;
    if (!s)
        return;
    s->exec = exec;
    pthread_mutex_lock(&graph_lock);
    gsnap *old = unlink_snap(exec);     /* a handle reused after a destroy we missed */
    s->next = graphs[exec_bucket(exec)];
    graphs[exec_bucket(exec)] = s;
    pthread_mutex_unlock(&graph_lock);
    if (old)
        snap_free(old);
}

void iparam_graph_destroyed(CUgraphExec exec)
{
    pthread_mutex_lock(&graph_lock);
    gsnap *s = unlink_snap(exec);
    pthread_mutex_unlock(&graph_lock);
    if (s)
        snap_free(s);
}

/* Node g's param record under node id `id`. */
static void node_params(const gnode *g, uint64_t id, int64_t corr, int64_t dcorr)
{
    if (g->status) {
        ilog_params_refused(corr, dcorr, (int64_t)id, g->status);
        return;
    }
    ilog_word *w = ilog_params_begin(corr, dcorr, (int64_t)id, g->n);
    if (!w)
        return;
    size_t n = 0;
    for (uint32_t k = 0; k < g->n; k++)
        if (!g->w[k].word || is_known(g->w[k].v))
            w[n++] = g->w[k];
    ilog_params_end(n);
}

void iparam_graph_launch(CUgraphExec exec, int64_t corr, int64_t dcorr)
{
    if (!ilog_on())
        return;
    pthread_mutex_lock(&graph_lock);
    gsnap *s = graphs[exec_bucket(exec)];
    while (s && s->exec != exec)
        s = s->next;
    for (size_t i = 0; s && i < s->n; i++) {
        const gnode *g = s->nodes[i];
        node_params(g, g->id, corr, dcorr);
        if (g->clone && g->clone != g->id)
            node_params(g, g->clone, corr, dcorr);
    }
    pthread_mutex_unlock(&graph_lock);
}
