/*
 * test_ggml_diff.c -- the twin against ggml itself (issue 23).
 *
 * Built only with -DSYNCSIM_GGML_DIR=PATH, a ggml source tree at the commit
 * docs/scheduler.md pins (never part of this repository, never fetched):
 * this program links ggml's real ggml_backend_sched (ggml-backend.cpp,
 * ggml-alloc.c, ggml.c) compiled with GGML_SCHED_MAX_COPIES = DIFF_COPIES,
 * and runs the same graphs through it and through the twin (sched/, policy
 * ggml-head), each driven as llama.cpp drives ggml: per evaluation a reset,
 * an allocation and a compute; at the end of each llama_decode (the
 * prompt's last ubatch, each decode token) a reset and a synchronize.
 *
 * Both sides run on recording test backends of the same machine: GPUs of
 * the cuda family at the pinned commit (a copy between two GPUs is
 * cpy_tensor_async, on the source's stream; one from host memory is
 * declined, so the host copies) or of the sycl family (no
 * cpy_tensor_async), per-slot events, and a synchronous CPU without
 * events. Every call a scheduler makes on them becomes one line of
 * one vocabulary:
 *
 *   sync B                      a backend synchronize
 *   record B c | wait B B2.c | evsync B2.c   the (backend, slot) events
 *   copy async|sync ROOT[lo:hi] -> B.c       a split input's copy: the bytes
 *                               of ROOT (the tensor a view names) it reads,
 *                               into backend B's copy of slot c
 *   setasync ROOT[lo:hi] -> B.c   an expert range of a MoE weight
 *   getasync B ROOT             a read-back (the MoE ids)
 *   compute B FIRST n=K         a split's launch: its first op, K ops
 *
 * and the two sequences of each evaluation must be equal. The first
 * difference fails the test with both sequences printed. What cannot be
 * made identical (the tensor-parallel meta backend) is not compared; the
 * test says so.
 *
 * Cases (argv: none): the llama and moe generators on 1 and 2 GPUs, a
 * prompt of ubatches then decode tokens, and the graph files of tests/sched; the copy
 * count is the build's (ctest runs one binary per count, 1 to 4).
 */
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include "sched/sched.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DIFF_COPIES
#define DIFF_COPIES 1
#endif

/* ------------------------------------------------------------------ */
/* The logs.                                                           */

#define LOG_MAX 8192
#define LINE_MAX_ 192

typedef struct call_log {
    char (*line)[LINE_MAX_];
    int n;
} call_log;

static call_log logs[2];            /* 0: ggml, 1: the twin */

static void logf_(int side, const char *fmt, ...)
{
    call_log *l = &logs[side];
    if (!l->line)
        l->line = calloc(LOG_MAX, LINE_MAX_);
    if (l->n >= LOG_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->line[l->n++], LINE_MAX_, fmt, ap);
    va_end(ap);
}

static long long n_compared, n_evals, n_graphs;

/* 0 when the two logs are equal; else prints both and returns 1. */
static int compare(const char *what)
{
    call_log *a = &logs[0], *b = &logs[1];
    int n = a->n > b->n ? a->n : b->n, first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (i >= a->n || i >= b->n || strcmp(a->line[i], b->line[i]) != 0)
            first = i;
    n_compared += a->n;
    n_evals++;
    if (first >= 0) {
        fprintf(stderr, "DIFFERENCE in %s at call %d\n%-60s | %s\n", what, first, "ggml", "twin");
        for (int i = 0; i < n; i++)
            fprintf(stderr, "%c %-58s | %s\n", i == first ? '>' : ' ', i < a->n ? a->line[i] : "",
                    i < b->n ? b->line[i] : "");
    }
    a->n = b->n = 0;
    return first >= 0;
}

/* ------------------------------------------------------------------ */
/* ggml's side: recording test devices, backends, buffers.             */

#define MAX_DEV 8
#define BE_MAX 80

typedef struct gdev {
    char name[16];
    bool cpu;
    int n_events;
    struct ggml_backend_device dev;
    struct ggml_backend_buffer_type buft;
    ggml_backend_t backend;
} gdev;

static gdev gdevs[MAX_DEV];
static int n_gdevs;
static struct ggml_context *g_names;    /* the current graph's tensors, by name */
static struct ggml_context *g_wnames;   /* the weights', by name */

typedef struct gevent { int dev, slot; } gevent;

/* Named difference: ggml waits for (and synchronizes on) slot events that
 * were never recorded -- the first evaluations' -- which CUDA treats as
 * complete; the twin leaves those calls out (the checker would report a
 * wait on an unrecorded event). They are counted here, not compared. */
static bool g_recorded[MAX_DEV][16];
static long long n_unrecorded_waits;

static gdev *gdev_of(ggml_backend_dev_t d) { return (gdev *)d->context; }

static bool is_view_op(enum ggml_op op)
{
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

/* "B#NAME#c" (ggml's copy names): NAME and c; 0 when t is no copy. */
static int parse_copy_name(const char *name, char *src, size_t cap, char *backend, int *slot)
{
    const char *a = strchr(name, '#'), *b = a ? strrchr(name, '#') : NULL;
    if (!a || b == a)
        return 0;
    snprintf(backend, BE_MAX, "%.*s", (int)(a - name), name);
    snprintf(src, cap, "%.*s", (int)(b - a - 1), a + 1);
    *slot = atoi(b + 1);
    return 1;
}

/* ROOT[lo:hi] of the bytes t names, off and size inside t (size 0: all);
 * a copy is named NAME@B.c on both sides. */
static void g_range(const struct ggml_tensor *t, size_t off, size_t size, char *buf, size_t cap)
{
    const struct ggml_tensor *root = t->view_src ? t->view_src : t;
    size_t lo = (t->view_src ? t->view_offs : 0) + off;
    size_t n = size ? size : ggml_nbytes(t);
    char src[GGML_MAX_NAME], be[BE_MAX], name[GGML_MAX_NAME + BE_MAX + 16];
    int slot;
    if (parse_copy_name(root->name, src, sizeof src, be, &slot))
        snprintf(name, sizeof name, "%s@%s.%d", src, be, slot);
    else
        snprintf(name, sizeof name, "%s", root->name);
    snprintf(buf, cap, "%.100s[%zu:%zu]", name, lo, lo + n);
}

/* The graph tensor a copy named NAME was made from. */
static const struct ggml_tensor *g_source_of(const struct ggml_tensor *copy, char *backend, int *slot)
{
    char src[GGML_MAX_NAME];
    if (!parse_copy_name(copy->name, src, sizeof src, backend, slot))
        return NULL;
    struct ggml_tensor *t = ggml_get_tensor(g_names, src);
    return t ? t : ggml_get_tensor(g_wnames, src);
}

/* Copies registered by data pointer (the destination of a get_tensor). */
static const struct ggml_tensor *g_copies[65536];
static int n_g_copies;

static enum ggml_status gbuf_init_tensor(ggml_backend_buffer_t buf, struct ggml_tensor *t)
{
    (void)buf;
    if (strchr(t->name, '#') && n_g_copies < (int)(sizeof g_copies / sizeof g_copies[0])) {
        for (int i = 0; i < n_g_copies; i++)
            if (g_copies[i] == t)
                return GGML_STATUS_SUCCESS;
        g_copies[n_g_copies++] = t;
    }
    return GGML_STATUS_SUCCESS;
}

static void gbuf_free(ggml_backend_buffer_t buf) { free(buf->context); }
static void *gbuf_base(ggml_backend_buffer_t buf) { return buf->context; }
static void gbuf_memset(ggml_backend_buffer_t b, struct ggml_tensor *t, uint8_t v, size_t o, size_t n)
{
    (void)b, (void)t, (void)v, (void)o, (void)n;
}

static void log_copy(const char *mode, const struct ggml_tensor *src, const struct ggml_tensor *dst)
{
    char be[BE_MAX], range[160];
    int slot = 0;
    if (!g_source_of(dst, be, &slot))
        snprintf(be, sizeof be, "?%.70s", dst->name);
    g_range(src, 0, 0, range, sizeof range);
    logf_(0, "copy %s %s -> %s.%d", mode, range, be, slot);
}

/* A blocking copy from host memory (ggml_backend_tensor_copy): the
 * destination names its source. */
static void gbuf_set(ggml_backend_buffer_t b, struct ggml_tensor *t, const void *data, size_t o,
                     size_t n)
{
    (void)b, (void)data;
    char be[BE_MAX], range[160];
    int slot = 0;
    const struct ggml_tensor *src = g_source_of(t, be, &slot);
    if (!src) {
        logf_(0, "set %s", t->name);
        return;
    }
    g_range(src, o, n == ggml_nbytes(t) && o == 0 ? 0 : n, range, sizeof range);
    logf_(0, "copy sync %s -> %s.%d", range, be, slot);
}

/* A blocking copy into host memory: the copy is found by its bytes. */
static void gbuf_get(ggml_backend_buffer_t b, const struct ggml_tensor *t, void *data, size_t o,
                     size_t n)
{
    (void)b, (void)o, (void)n;
    for (int i = n_g_copies - 1; i >= 0; i--)
        if (g_copies[i]->data == data && g_copies[i]->buffer &&
            ggml_backend_buffer_is_host(g_copies[i]->buffer)) {
            log_copy("sync", t, g_copies[i]);
            return;
        }
    char range[160];
    g_range(t, o, n, range, sizeof range);
    logf_(0, "get %s", range);
}

static bool gbuf_cpy(ggml_backend_buffer_t b, const struct ggml_tensor *src, struct ggml_tensor *dst)
{
    (void)b;
    log_copy("sync", src, dst);
    return true;
}

static void gbuf_clear(ggml_backend_buffer_t b, uint8_t v) { (void)b, (void)v; }

static const struct ggml_backend_buffer_i gbuf_iface = {
    .free_buffer = gbuf_free, .get_base = gbuf_base, .init_tensor = gbuf_init_tensor,
    .memset_tensor = gbuf_memset, .set_tensor = gbuf_set, .get_tensor = gbuf_get,
    .cpy_tensor = gbuf_cpy, .clear = gbuf_clear,
};

static const char *gbuft_name(ggml_backend_buffer_type_t t) { return gdev_of(t->device)->name; }
static ggml_backend_buffer_t gbuft_alloc(ggml_backend_buffer_type_t t, size_t size)
{
    void *mem = calloc(1, size ? size : 1);
    return ggml_backend_buffer_init(t, gbuf_iface, mem, size);
}
static size_t gbuft_align(ggml_backend_buffer_type_t t) { (void)t; return 256; }
static bool gbuft_is_host(ggml_backend_buffer_type_t t) { return gdev_of(t->device)->cpu; }

static const struct ggml_backend_buffer_type_i gbuft_iface = {
    .get_name = gbuft_name, .alloc_buffer = gbuft_alloc, .get_alignment = gbuft_align,
    .is_host = gbuft_is_host,
};

static const char *gbe_name(ggml_backend_t b) { return gdev_of(b->device)->name; }
static void gbe_free(ggml_backend_t b) { (void)b; }

static void gbe_set_async(ggml_backend_t b, struct ggml_tensor *t, const void *data, size_t o, size_t n)
{
    (void)data;
    char be[BE_MAX], range[160];
    int slot = 0;
    const struct ggml_tensor *src = g_source_of(t, be, &slot);
    if (!src) {
        logf_(0, "setasync %s %s", gbe_name(b), t->name);
        return;
    }
    g_range(src, o, n, range, sizeof range);
    logf_(0, "setasync %s -> %s.%d", range, be, slot);
}

static void gbe_get_async(ggml_backend_t b, const struct ggml_tensor *t, void *data, size_t o, size_t n)
{
    (void)data, (void)o, (void)n;
    char range[160];
    g_range(t, 0, 0, range, sizeof range);
    logf_(0, "getasync %s %s", gbe_name(b), range);
}

/* ggml-cuda's copy_from_host (#17795, #20793): set (GGML_DIFF_COPY_FROM_HOST=1)
 * to compare with a ggml tree of those commits. */
static bool copy_from_host;

/* ggml-cuda at the pinned commit: between two devices' own buffers only;
 * with copy_from_host, from host memory into a device too. */
static bool gbe_cpy_async(ggml_backend_t bs, ggml_backend_t bd, const struct ggml_tensor *src,
                          struct ggml_tensor *dst)
{
    const struct ggml_tensor *sr = src->view_src ? src->view_src : src;
    bool from_host = sr->buffer && ggml_backend_buffer_is_host(sr->buffer);
    if (gdev_of(bd->device)->cpu || !sr->buffer || !dst->buffer ||
        ggml_backend_buffer_is_host(dst->buffer) ||
        (from_host ? !copy_from_host : gdev_of(bs->device)->cpu))
        return false;
    log_copy("async", src, dst);
    return true;
}

static void gbe_sync(ggml_backend_t b) { logf_(0, "sync %s", gbe_name(b)); }

static enum ggml_status gbe_compute(ggml_backend_t b, struct ggml_cgraph *g)
{
    int k = 0;
    const char *first = "-";
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ggml_tensor *t = g->nodes[i];
        if (is_view_op(t->op) || t->op == GGML_OP_NONE)
            continue;
        if (k++ == 0)
            first = t->name;
    }
    logf_(0, "compute %s %s n=%d", gbe_name(b), first, k);
    return GGML_STATUS_SUCCESS;
}

static void gbe_record(ggml_backend_t b, ggml_backend_event_t e)
{
    gevent *ev = e->context;
    g_recorded[ev->dev][ev->slot] = true;
    logf_(0, "record %s %s.%d", gbe_name(b), gdevs[ev->dev].name, ev->slot);
}

static void gbe_wait(ggml_backend_t b, ggml_backend_event_t e)
{
    gevent *ev = e->context;
    if (!g_recorded[ev->dev][ev->slot]) {
        n_unrecorded_waits++;
        return;
    }
    logf_(0, "wait %s %s.%d", gbe_name(b), gdevs[ev->dev].name, ev->slot);
}

static const struct ggml_backend_i gpu_iface = {
    .get_name = gbe_name, .free = gbe_free, .set_tensor_async = gbe_set_async,
    .get_tensor_async = gbe_get_async, .cpy_tensor_async = gbe_cpy_async,
    .synchronize = gbe_sync, .graph_compute = gbe_compute, .event_record = gbe_record,
    .event_wait = gbe_wait,
};

/* ggml-sycl: no cpy_tensor_async (every copy into it is the host's). */
static const struct ggml_backend_i sycl_iface = {
    .get_name = gbe_name, .free = gbe_free, .set_tensor_async = gbe_set_async,
    .get_tensor_async = gbe_get_async, .synchronize = gbe_sync, .graph_compute = gbe_compute,
    .event_record = gbe_record, .event_wait = gbe_wait,
};

static const struct ggml_backend_i cpu_iface = {
    .get_name = gbe_name, .free = gbe_free, .graph_compute = gbe_compute,
};

static const char *gdev_name(ggml_backend_dev_t d) { return gdev_of(d)->name; }
static const char *gdev_desc(ggml_backend_dev_t d) { return gdev_of(d)->name; }
static void gdev_memory(ggml_backend_dev_t d, size_t *f, size_t *t) { (void)d; *f = *t = (size_t)1 << 40; }
static enum ggml_backend_dev_type gdev_type(ggml_backend_dev_t d)
{
    return gdev_of(d)->cpu ? GGML_BACKEND_DEVICE_TYPE_CPU : GGML_BACKEND_DEVICE_TYPE_GPU;
}
static void gdev_props(ggml_backend_dev_t d, struct ggml_backend_dev_props *p)
{
    memset(p, 0, sizeof *p);
    p->name = gdev_name(d);
    p->description = gdev_desc(d);
    p->type = gdev_type(d);
    p->caps.async = !gdev_of(d)->cpu;
    p->caps.events = !gdev_of(d)->cpu;
}
static ggml_backend_buffer_type_t gdev_buft(ggml_backend_dev_t d) { return &gdev_of(d)->buft; }
static bool gdev_supports_op(ggml_backend_dev_t d, const struct ggml_tensor *op) { (void)d, (void)op; return true; }
static bool gdev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t t) { return t == &gdev_of(d)->buft; }

/* ggml-cuda's offload_op: a batch of 32 or more (get_op_batch_size). */
static bool gdev_offload_op(ggml_backend_dev_t d, const struct ggml_tensor *op)
{
    if (gdev_of(d)->cpu)
        return false;
    int64_t batch;
    switch (op->op) {
    case GGML_OP_GET_ROWS: batch = 0; break;
    case GGML_OP_MUL_MAT: batch = op->ne[1]; break;
    case GGML_OP_MUL_MAT_ID:
    case GGML_OP_ROPE: batch = op->ne[2]; break;
    default: batch = ggml_nrows(op); break;
    }
    return batch >= SCHED_OFFLOAD_MIN_BATCH;
}

static ggml_backend_event_t gdev_event_new(ggml_backend_dev_t d)
{
    gdev *g = gdev_of(d);
    struct ggml_backend_event *e = calloc(1, sizeof *e);
    gevent *ev = calloc(1, sizeof *ev);
    ev->dev = (int)(g - gdevs);
    ev->slot = g->n_events++;
    e->device = d;
    e->context = ev;
    return e;
}
static void gdev_event_free(ggml_backend_dev_t d, ggml_backend_event_t e)
{
    (void)d;
    free(e->context);
    free(e);
}
static void gdev_event_sync(ggml_backend_dev_t d, ggml_backend_event_t e)
{
    (void)d;
    gevent *ev = e->context;
    if (!g_recorded[ev->dev][ev->slot]) {
        n_unrecorded_waits++;
        return;
    }
    logf_(0, "evsync %s.%d", gdevs[ev->dev].name, ev->slot);
}

static const struct ggml_backend_device_i gpu_dev_iface = {
    .get_name = gdev_name, .get_description = gdev_desc, .get_memory = gdev_memory,
    .get_type = gdev_type, .get_props = gdev_props, .get_buffer_type = gdev_buft,
    .supports_op = gdev_supports_op, .supports_buft = gdev_supports_buft,
    .offload_op = gdev_offload_op, .event_new = gdev_event_new, .event_free = gdev_event_free,
    .event_synchronize = gdev_event_sync,
};

static const struct ggml_backend_device_i cpu_dev_iface = {
    .get_name = gdev_name, .get_description = gdev_desc, .get_memory = gdev_memory,
    .get_type = gdev_type, .get_props = gdev_props, .get_buffer_type = gdev_buft,
    .supports_op = gdev_supports_op, .supports_buft = gdev_supports_buft,
    .offload_op = gdev_offload_op,
};

static void gdevs_init(int n_gpus, const char *family)
{
    bool sycl = strcmp(family, "sycl") == 0;
    memset(gdevs, 0, sizeof gdevs);
    n_gdevs = n_gpus + 1;
    for (int i = 0; i < n_gdevs; i++) {
        gdev *g = &gdevs[i];
        g->cpu = i == n_gpus;
        snprintf(g->name, sizeof g->name, g->cpu ? "CPU" : "GPU%d", i);
        g->dev.iface = g->cpu ? cpu_dev_iface : gpu_dev_iface;
        g->dev.context = g;
        g->buft.iface = gbuft_iface;
        g->buft.device = &g->dev;
        g->backend = calloc(1, sizeof *g->backend);
        g->backend->iface = g->cpu ? cpu_iface : sycl ? sycl_iface : gpu_iface;
        g->backend->device = &g->dev;
        g->backend->context = g;
    }
}

/* ------------------------------------------------------------------ */
/* The twin's side: recording backends of the same machine.            */

typedef struct tctx {
    char name[16];
    bool cpu;
} tctx;

typedef struct tevent { char backend[16]; int slot; bool internal; } tevent;

static tctx tctxs[MAX_DEV];
static sched_backend tbes[MAX_DEV];
static sched_backend *tptr[MAX_DEV];
static const sched_graph *t_graph;

static const char *t_name(sched_backend *b) { return ((tctx *)b->ctx)->name; }
static sched_device_kind t_kind(sched_backend *b)
{
    return ((tctx *)b->ctx)->cpu ? SCHED_DEVICE_CPU : SCHED_DEVICE_GPU;
}
static bool t_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    (void)b, (void)g, (void)t;
    return true;
}
static bool t_supports_buffer(sched_backend *b, const sched_buffer *buf) { return buf->backend == b; }
static sched_buffer *t_alloc(sched_backend *b, const char *name, uint64_t size, sched_buffer_usage u)
{
    sched_buffer *buf = calloc(1, sizeof *buf);
    buf->backend = b;
    buf->size = size;
    buf->usage = u;
    buf->host = ((tctx *)b->ctx)->cpu;
    snprintf(buf->name, sizeof buf->name, "%s", name);
    return buf;
}
static void t_free(sched_backend *b, sched_buffer *buf) { (void)b, free(buf); }

/* NAME@B.c for a twin copy "NAME#B#c" (the name ggml's copies get here). */
static void t_norm(char *buf, size_t cap)
{
    char *a = strchr(buf, '#'), *b = a ? strchr(a + 1, '#') : NULL, *br = strchr(buf, '[');
    if (!a || !b || (br && br < b))
        return;
    char out[256];
    snprintf(out, sizeof out, "%.*s@%.*s.%s", (int)(a - buf), buf, (int)(b - a - 1), a + 1, b + 1);
    snprintf(buf, cap, "%.150s", out);
}

/* ROOT[lo:hi] of a twin tensor: a graph tensor (a view names its root),
 * or a MoE range "W[off]". */
static void t_range(const sched_tensor *t, char *buf, size_t cap)
{
    const sched_graph *g = t_graph;
    uint64_t n = sched_tensor_nbytes(t);
    if (t >= g->tensors && t < g->tensors + g->n_tensors) {
        const sched_tensor *root = t->view_src >= 0 ? &g->tensors[t->view_src] : t;
        uint64_t lo = t->view_src >= 0 ? t->view_offs : 0;
        snprintf(buf, cap, "%s[%llu:%llu]", root->name, (unsigned long long)lo,
                 (unsigned long long)(lo + n));
        t_norm(buf, cap);
        return;
    }
    const char *br = strrchr(t->name, '[');
    unsigned long long off = br ? strtoull(br + 1, NULL, 10) : 0;
    snprintf(buf, cap, "%.*s[%llu:%llu]", br ? (int)(br - t->name) : (int)strlen(t->name), t->name,
             off, off + (unsigned long long)n);
    t_norm(buf, cap);
}


/* B.c of a twin copy tensor (or of a MoE range of one: "W#B#c[off]"). */
static void t_dest(const sched_tensor *t, char *buf, size_t cap)
{
    const sched_graph *g = t_graph;
    if (t >= g->tensors && t < g->tensors + g->n_tensors && (t->flags & SCHED_FLAG_COPY)) {
        snprintf(buf, cap, "%s.%d", t_name(tptr[t->backend]), t->copy_slot);
        return;
    }
    const char *a = strchr(t->name, '#'), *b = a ? strchr(a + 1, '#') : NULL;
    if (a && b)
        snprintf(buf, cap, "%.*s.%d", (int)(b - a - 1), a + 1, atoi(b + 1));
    else
        snprintf(buf, cap, "?%.40s", t->name);
}

static int t_copy(const char *mode, sched_tensor *src, sched_tensor *dst)
{
    char range[160], dest[BE_MAX];
    t_range(src, range, sizeof range);
    if (!(dst->flags & SCHED_FLAG_COPY) && !strchr(dst->name, '#')) {
        logf_(1, "get %s", range);      /* a read-back into the host (the MoE ids) */
        return 0;
    }
    t_dest(dst, dest, sizeof dest);
    logf_(1, "copy %s %s -> %s", mode, range, dest);
    return 0;
}

static int t_set_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    (void)b;
    /* A graph tensor (a user input) is a copy, as ggml's cpy_tensor_async. */
    if (src >= t_graph->tensors && src < t_graph->tensors + t_graph->n_tensors)
        return t_copy("async", src, dst);
    char range[160], dest[BE_MAX];
    t_range(src, range, sizeof range);
    t_dest(dst, dest, sizeof dest);
    logf_(1, "setasync %s -> %s", range, dest);
    return 0;
}
static int t_get_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    (void)dst;
    char range[160];
    t_range(src, range, sizeof range);
    logf_(1, "getasync %s %s", t_name(b), range);
    return 0;
}
static int t_copy_async(sched_backend *b, sched_backend *o, sched_tensor *s, sched_tensor *d)
{
    (void)b, (void)o;
    t_copy("async", s, d);
    return 1;
}
static int t_copy_sync(sched_backend *b, sched_tensor *s, sched_tensor *d)
{
    (void)b;
    return t_copy("sync", s, d);
}
static int t_sync(sched_backend *b)
{
    logf_(1, "sync %s", t_name(b));
    return 0;
}
static int t_compute(sched_backend *b, const sched_exec *x)
{
    int k = 0;
    const char *first = "-";
    for (int i = 0; i < x->n_nodes; i++) {
        const sched_tensor *t = &x->graph->tensors[x->nodes[i]];
        if (sched_op_is_view(t->op) || t->op == SCHED_OP_NONE)
            continue;
        if (k++ == 0)
            first = t->name;
    }
    logf_(1, "compute %s %s n=%d", t_name(b), first, k);
    return 0;
}
/* Slot events are "NAME.ev.B.c"; the hand-over events of a copy between
 * devices ("NAME.xfer.A>B") are inside ggml-cuda's cpy_tensor_async. */
static sched_event *t_event_new(sched_backend *b, const char *name)
{
    sched_event *ev = calloc(1, sizeof *ev);
    tevent *te = calloc(1, sizeof *te);
    ev->backend = b;
    ev->ctx = te;
    snprintf(te->backend, sizeof te->backend, "%s", t_name(b));
    const char *dot = strrchr(name, '.');
    te->internal = strstr(name, ".xfer.") != NULL;
    te->slot = dot ? atoi(dot + 1) : 0;
    return ev;
}
static void t_event_free(sched_backend *b, sched_event *ev)
{
    (void)b;
    free(ev->ctx);
    free(ev);
}
static int t_record(sched_backend *b, sched_event *ev)
{
    tevent *te = ev->ctx;
    ev->n_records++;
    if (!te->internal)
        logf_(1, "record %s %s.%d", t_name(b), te->backend, te->slot);
    return 0;
}
static int t_wait(sched_backend *b, sched_event *ev)
{
    tevent *te = ev->ctx;
    if (!te->internal)
        logf_(1, "wait %s %s.%d", t_name(b), te->backend, te->slot);
    return 0;
}
static int t_evsync(sched_backend *b, sched_event *ev)
{
    (void)b;
    tevent *te = ev->ctx;
    logf_(1, "evsync %s.%d", te->backend, te->slot);
    return 0;
}

static const sched_backend_iface t_gpu_iface = {
    .get_name = t_name, .device_kind = t_kind, .supports_op = t_supports_op,
    .supports_buffer = t_supports_buffer, .buffer_alloc = t_alloc, .buffer_free = t_free,
    .set_async = t_set_async, .get_async = t_get_async, .copy_async = t_copy_async,
    .copy_sync = t_copy_sync, .synchronize = t_sync, .graph_compute = t_compute,
    .event_new = t_event_new, .event_free = t_event_free, .event_record = t_record,
    .event_wait = t_wait, .event_synchronize = t_evsync,
};

static const sched_backend_iface t_cpu_iface = {
    .get_name = t_name, .device_kind = t_kind, .supports_op = t_supports_op,
    .supports_buffer = t_supports_buffer, .buffer_alloc = t_alloc, .buffer_free = t_free,
    .copy_sync = t_copy_sync, .graph_compute = t_compute,
};

static void tbes_init(int n_gpus)
{
    for (int i = 0; i <= n_gpus; i++) {
        tctxs[i].cpu = i == n_gpus;
        snprintf(tctxs[i].name, sizeof tctxs[i].name, tctxs[i].cpu ? "CPU" : "GPU%d", i);
        tbes[i] = (sched_backend){ tctxs[i].cpu ? &t_cpu_iface : &t_gpu_iface, &tctxs[i], NULL };
        tptr[i] = &tbes[i];
    }
}

/* The ids the host reads back: ggml's test buffers are zeroed, and so are these. */
static int t_read_ids(void *ctx, const sched_tensor *t, int32_t *out, int64_t n)
{
    (void)ctx, (void)t;
    memset(out, 0, (size_t)n * sizeof *out);
    return 0;
}

static uint32_t null_view(void *c, const char *n, uint32_t p, uint64_t o, uint64_t s)
{
    (void)c, (void)n, (void)p, (void)o, (void)s;
    return 0;
}
static const sched_sink_iface null_sink_iface = { .view = null_view };

/* ------------------------------------------------------------------ */
/* One twin graph as a ggml graph.                                     */

static enum ggml_type g_type(sched_dtype t)
{
    switch (t) {
    case SCHED_F16: return GGML_TYPE_F16;
    case SCHED_BF16: return GGML_TYPE_BF16;
    case SCHED_I32: return GGML_TYPE_I32;
    default: return GGML_TYPE_F32;
    }
}

static int g_op(sched_op op, enum ggml_op *out, int *unary)
{
    *unary = -1;
    switch (op) {
    case SCHED_OP_NONE: *out = GGML_OP_NONE; return 0;
    case SCHED_OP_MUL_MAT: *out = GGML_OP_MUL_MAT; return 0;
    case SCHED_OP_ADD: *out = GGML_OP_ADD; return 0;
    case SCHED_OP_MUL: *out = GGML_OP_MUL; return 0;
    case SCHED_OP_SCALE: *out = GGML_OP_SCALE; return 0;
    case SCHED_OP_RMS_NORM: *out = GGML_OP_RMS_NORM; return 0;
    case SCHED_OP_SOFTMAX: *out = GGML_OP_SOFT_MAX; return 0;
    case SCHED_OP_SILU: *out = GGML_OP_UNARY; *unary = GGML_UNARY_OP_SILU; return 0;
    case SCHED_OP_ROPE: *out = GGML_OP_ROPE; return 0;
    case SCHED_OP_GET_ROWS: *out = GGML_OP_GET_ROWS; return 0;
    case SCHED_OP_CPY: *out = GGML_OP_CPY; return 0;
    case SCHED_OP_VIEW: *out = GGML_OP_VIEW; return 0;
    case SCHED_OP_RESHAPE: *out = GGML_OP_RESHAPE; return 0;
    case SCHED_OP_PERMUTE: *out = GGML_OP_PERMUTE; return 0;
    case SCHED_OP_CONCAT: *out = GGML_OP_CONCAT; return 0;
    case SCHED_OP_MUL_MAT_ID: *out = GGML_OP_MUL_MAT_ID; return 0;
    default: return -1;             /* all_reduce, convert: the meta backend's */
    }
}

typedef struct gweights {
    struct ggml_context *ctx;
    ggml_backend_buffer_t buf[MAX_DEV];
} gweights;

/* Weights and caches once, on their home backend, in WEIGHTS buffers. */
static int g_weights(const sched_graph *g, gweights *w)
{
    struct ggml_init_params ip = { (size_t)(g->n_tensors + 16) * ggml_tensor_overhead(), NULL, true };
    w->ctx = ggml_init(ip);
    size_t need[MAX_DEV] = { 0 };
    struct ggml_tensor **made = calloc((size_t)g->n_tensors, sizeof *made);
    int *home = calloc((size_t)g->n_tensors, sizeof *home);
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (!(t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) || t->op != SCHED_OP_NONE)
            continue;
        made[i] = ggml_new_tensor(w->ctx, g_type(t->type), SCHED_MAX_DIMS, t->ne);
        ggml_set_name(made[i], t->name);
        home[i] = t->home >= 0 && t->home < n_gdevs - 1 ? t->home : n_gdevs - 1;
        need[home[i]] += GGML_PAD(ggml_nbytes(made[i]), 256);
    }
    size_t at[MAX_DEV] = { 0 };
    for (int b = 0; b < n_gdevs; b++) {
        w->buf[b] = ggml_backend_buft_alloc_buffer(&gdevs[b].buft, need[b] ? need[b] : 256);
        ggml_backend_buffer_set_usage(w->buf[b], GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        if (!made[i])
            continue;
        char *base = ggml_backend_buffer_get_base(w->buf[home[i]]);
        ggml_backend_tensor_alloc(w->buf[home[i]], made[i], base + at[home[i]]);
        at[home[i]] += GGML_PAD(ggml_nbytes(made[i]), 256);
    }
    free(made);
    free(home);
    return 0;
}

/* g as a ggml graph in the twin's order; NULL (with why) when it has an op
 * the comparison leaves out. */
static struct ggml_cgraph *g_graph(const sched_graph *g, int32_t n, const gweights *w,
                                   struct ggml_context **ctxp, const char **why)
{
    struct ggml_init_params ip = {
        (size_t)(g->n_tensors + 16) * ggml_tensor_overhead() +
            ggml_graph_overhead_custom((size_t)g->n_tensors + 16, false),
        NULL, true };
    struct ggml_context *ctx = ggml_init(ip);
    *ctxp = ctx;
    struct ggml_tensor **m = calloc((size_t)g->n_tensors, sizeof *m);
    struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, (size_t)g->n_tensors + 16, false);
    for (int32_t i = 0; i < n; i++) {
        const sched_tensor *t = &g->tensors[i];
        enum ggml_op op;
        int unary;
        if (g_op(t->op, &op, &unary) != 0) {
            *why = sched_op_str(t->op);
            free(m);
            return NULL;
        }
        if ((t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) && t->op == SCHED_OP_NONE) {
            m[i] = ggml_get_tensor(w->ctx, t->name);
        } else {
            m[i] = ggml_new_tensor(ctx, g_type(t->type), SCHED_MAX_DIMS, t->ne);
            ggml_set_name(m[i], t->name);
            m[i]->op = op;
            if (unary >= 0)
                ggml_set_op_params_i32(m[i], 0, unary);
            for (int k = 0; k < SCHED_MAX_SRC; k++)
                m[i]->src[k] = t->src[k] >= 0 ? m[t->src[k]] : NULL;
            if (t->view_src >= 0) {
                m[i]->view_src = m[t->view_src];
                m[i]->view_offs = t->view_offs;
            }
            if (t->flags & SCHED_FLAG_INPUT)
                ggml_set_input(m[i]);
            if (t->flags & SCHED_FLAG_OUTPUT)
                ggml_set_output(m[i]);
        }
        if (t->op == SCHED_OP_NONE)
            gf->leafs[gf->n_leafs++] = m[i];
        else
            ggml_graph_add_node(gf, m[i]);
    }
    free(m);
    return gf;
}

/* ------------------------------------------------------------------ */
/* Running both.                                                       */

typedef struct cas {
    const char *name;
    const char *model;              /* generator spec, or NULL */
    const char *graph_file;         /* or a graph file (decode only) */
    int n_gpus;
    int prompt, tokens;
    const char *family;             /* the GPUs' backend family: cuda (NULL) or sycl */
} cas;

static int failures;
/* The twin's policy: ggml-head, the pinned ggml; GGML_DIFF_POLICY names
 * another to see where it departs from the pinned ggml. */
static const char *twin_policy = "ggml-head";

static int run_case(const cas *c)
{
    char err[512];
    sched_graph *tg[2] = { NULL, NULL };
    int n_eval[2] = { 0, c->tokens };
    if (c->model) {
        sched_model_params p;
        if (sched_model_parse(c->model, &p, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", c->name, err);
            return 1;
        }
        p.n_devices = c->n_gpus;
        int ub = p.ubatch < c->prompt ? p.ubatch : c->prompt;
        if (c->prompt > 0) {
            tg[0] = sched_model_build(&p, ub);
            n_eval[0] = (c->prompt + ub - 1) / ub;
        }
        tg[1] = sched_model_build(&p, 1);
    } else {
        trace_error terr = { 0 };
        tg[1] = sched_graph_parse_file(c->graph_file, &terr);
        if (!tg[1]) {
            fprintf(stderr, "%s: %s\n", c->name, terr.msg);
            return 1;
        }
    }
    const char *family = c->family ? c->family : "cuda";
    gdevs_init(c->n_gpus, family);
    memset(g_recorded, 0, sizeof g_recorded);
    tbes_init(c->n_gpus);
    int nb = c->n_gpus + 1;

    /* ggml: one scheduler for both graphs, as llama.cpp. */
    gweights gw;
    g_weights(tg[1], &gw);
    ggml_backend_t gb[MAX_DEV];
    for (int i = 0; i < nb; i++)
        gb[i] = gdevs[i].backend;
    ggml_backend_sched_t gs = ggml_backend_sched_new(gb, NULL, nb, 8192, DIFF_COPIES > 1, true);

    /* The tensors of each graph before the twin's planning adds its copies:
     * ggml gets a new graph of them per evaluation, as llama.cpp builds
     * one per ubatch (ggml's split rewrites the sources it is given). */
    int32_t n_orig[2] = { tg[0] ? tg[0]->n_tensors : 0, tg[1]->n_tensors };

    /* The twin: ggml-head, the same slots, one scheduler's state. */
    sched_sink sink = { &null_sink_iface, NULL };
    sched_weights *tw = sched_weights_new(tptr, nb, tg[1], &sink);
    const sched_copy_traits *traits[MAX_DEV + 1] = { 0 };
    for (int i = 0; i < nb; i++)
        traits[i] = sched_copy_family(i + 1 < nb ? family : "cpu");
    sched *ts[2] = { NULL, NULL };
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (!tg[k])
            continue;
        if (sched_weights_bind(tw, tg[k]) != 0) {
            fprintf(stderr, "%s: cannot bind the weights\n", c->name);
            return 1;
        }
        sched_options so = { .policy = sched_policy_find(twin_policy), .n_copies = DIFF_COPIES,
                             .copy_traits = traits, .sink = &sink, .name = k ? "d" : "p",
                             .read_ids = t_read_ids,
                             .share = k == 1 ? ts[0] : NULL };
        ts[k] = sched_new(tptr, nb, &so);
        if (!ts[k] || sched_plan(ts[k], tg[k], err, sizeof err) != SCHED_OK) {
            fprintf(stderr, "%s: twin plan: %s\n", c->name, err);
            return 1;
        }
    }
    uint64_t eval = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (!tg[k] || !n_eval[k])
            continue;
        n_graphs++;
        g_wnames = gw.ctx;
        t_graph = tg[k];
        if (k == 1 && ts[0])
            sched_handover(ts[1], ts[0]);
        for (int e = 0; e < n_eval[k] && rc == 0; e++, eval++) {
            struct ggml_context *gctx = NULL;
            const char *why = NULL;
            struct ggml_cgraph *gf = g_graph(tg[k], n_orig[k], &gw, &gctx, &why);
            if (!gf) {
                printf("%s: not compared (ggml runs %s in its meta backend)\n", c->name, why);
                if (gctx)
                    ggml_free(gctx);
                n_graphs--;
                goto done;
            }
            g_names = gctx;
            ggml_backend_sched_reset(gs);
            /* The user's assignments (a graph file's backend=), after the reset. */
            for (int i = 0; i < gf->n_nodes; i++) {
                int32_t ti = sched_graph_find(tg[k], ggml_get_name(gf->nodes[i]));
                if (ti >= 0 && tg[k]->tensors[ti].user_backend >= 0)
                    ggml_backend_sched_set_tensor_backend(gs, gf->nodes[i],
                                                          gb[tg[k]->tensors[ti].user_backend]);
            }
            if (!ggml_backend_sched_alloc_graph(gs, gf)) {
                fprintf(stderr, "%s: ggml cannot allocate\n", c->name);
                rc = 1;
                break;
            }
            ggml_backend_sched_graph_compute_async(gs, gf);
            sched_reset(ts[k]);
            sched_alloc_graph(ts[k]);
            sched_graph_compute(ts[k], eval);
            bool end = k == 1 || e + 1 == n_eval[k];   /* the end of a llama_decode */
            if (end) {
                ggml_backend_sched_reset(gs);
                ggml_backend_sched_synchronize(gs);
                sched_reset(ts[k]);
                sched_synchronize(ts[k]);
            }
            char what[256];
            snprintf(what, sizeof what, "%.100s, %s evaluation %d (%d copies)", c->name,
                     k ? "decode" : "prompt", e, DIFF_COPIES);
            rc = compare(what);
            ggml_free(gctx);
        }
    }
done:
    ggml_backend_sched_free(gs);
    for (int b = 0; b < nb; b++)
        if (gw.buf[b])
            ggml_backend_buffer_free(gw.buf[b]);
    ggml_free(gw.ctx);
    sched_free(ts[1]);
    sched_free(ts[0]);
    sched_weights_free(tw);
    sched_graph_free(tg[0]);
    sched_graph_free(tg[1]);
    n_g_copies = 0;
    return rc;
}

#define LLAMA "llama:n_layer=2,n_embd=64,n_head=4,n_head_kv=2,n_ff=128,n_vocab=100,n_ctx=128,ubatch=32"
#define MOE "moe:n_layer=2,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=64,ubatch=32,n_expert=16"
#define TP "tp:n_layer=2,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=64,ubatch=32"

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    const char *cfh = getenv("GGML_DIFF_COPY_FROM_HOST");
    copy_from_host = cfh && strcmp(cfh, "1") == 0;
    const char *pol = getenv("GGML_DIFF_POLICY");
    if (pol && *pol) {
        if (!sched_policy_find(pol)) {
            fprintf(stderr, "GGML_DIFF_POLICY: unknown policy '%s' (expected %s)\n", pol,
                    sched_policy_names());
            return 2;
        }
        twin_policy = pol;
    }
    const cas cases[] = {
        { "llama, 1 GPU", LLAMA, NULL, 1, 64, 3 },
        { "llama, 2 GPUs", LLAMA, NULL, 2, 128, 3 },
        { "llama, 2 GPUs, small ubatches", LLAMA ",ubatch=8", NULL, 2, 32, 2 },
        { "llama, 3 GPUs", LLAMA ",n_layer=3", NULL, 3, 96, 2 },
        { "llama, 4 GPUs, 6 ubatches", LLAMA ",n_layer=4", NULL, 4, 192, 2 },
        { "llama, 2 GPUs of the sycl family", LLAMA, NULL, 2, 128, 3, "sycl" },
        { "moe, 1 GPU", MOE, NULL, 1, 32, 2 },
        { "moe, 2 GPUs", MOE, NULL, 2, 64, 2 },
        { "tp, 2 GPUs", TP, NULL, 2, 32, 2 },
        { "ggml-26040.graph", NULL, SYNCSIM_SOURCE_DIR "/tests/sched/ggml-26040.graph", 1, 0, 3 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (run_case(&cases[i]) != 0)
            failures++;
    printf("ggml-diff, %d copies: %lld graphs, %lld evaluations, %lld calls compared, %d cases "
           "differ; not compared: %lld waits on never-recorded events (named difference)\n",
           DIFF_COPIES, n_graphs, n_evals, n_compared, failures, n_unrecorded_waits);
    return failures ? 1 : 0;
}
