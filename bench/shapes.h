/*
 * shapes.h -- trace shapes the benchmarks share, generated on the fly as a
 * trace_reader (nothing is held in memory but the declarations).
 *
 * The capture shape is what traces captured from real programs look like
 * (issue 9): 8 streams on 4 devices, 2 host threads, 4096 buffers, about
 * 1.5 accesses per statement, observed times, and a distinct label on
 * every statement (captured kernel names carry layer and op indices:
 * "L17.qkv.k40213"). Iteration i of host h (slot = i % 256, streams
 * a = 4h + i % 4, b = 4h + (i + 1) % 4; six device buffers per slot, of
 * which mlp, act and down use d2 or d4 in turn):
 *
 *   h  op    prep     w:in[slot]
 *   a  copy  up       in[slot] -> d0[slot]
 *   a  op    qkv      r:d0 w:d1
 *   a  op    norm     r:d1 w:d3
 *   a  record e_a
 *   b  wait   e_a
 *   b  op    mlp      r:d1 w:d2|d4
 *   b  op    act      rw:d2|d4
 *   b  copy  down     d2|d4 -> out[slot]
 *   and every 8 iterations `h sync all`.
 *
 * Slots are reused after 256 iterations of a host, long after a sync: the
 * trace is clean. With repeat_labels, every statement of a kind carries the
 * same label instead (the kind shape earlier benchmarks used).
 *
 * capture_shape varies it the ways real captures vary (issue 25: accesses
 * that always cover whole buffers measure 1.5-2x too fast):
 *   arenas   the buffers are views of arenas, as ggml's graph allocator and
 *            PyTorch's caching allocator hand them out: per host one pinned
 *            host arena (in, out) and one arena per device (d0, d2, d4 on
 *            the first, d1, d3, d5 on the second), 64 KiB per view, d4 at
 *            d2's offset (the allocator reuses d2's bytes in the epochs that
 *            use d4). 6 roots and 4096 views; the shadow of an arena holds
 *            the segments of 768 views.
 *   ranges   0: every access covers its whole buffer; 1 (tokens): every
 *            access of an iteration covers the prefix [0, 1 KiB * t) of its
 *            view, t = 1..64 tokens varying per iteration; 2 (ragged): each
 *            access its own sub-range [lo, hi) at 512-byte granularity,
 *            reads not aligned with the writes (the most segments).
 *   scatter  the slot of iteration i is a fixed permutation of i % 256, so
 *            consecutive iterations touch views far apart in their arena.
 * Every variant stays clean: each host's iterations use disjoint views, and
 * a view's bytes are reused only 256 iterations (and 32 syncs) later.
 */
#ifndef SYNCSIM_BENCH_SHAPES_H
#define SYNCSIM_BENCH_SHAPES_H

#include "traces/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP_HOSTS 2
#define CAP_STREAMS 8
#define CAP_SLOTS 256   /* per host and slot: in, out and 6 device buffers: 4096 roots */
#define CAP_DEV 6

/* How the capture shape varies (see above); all false/0: whole buffers. */
typedef struct capture_shape {
    bool repeat_labels;     /* one label per kind of statement */
    bool arenas;            /* buffers are views of per-device arenas */
    int ranges;             /* 0 whole, 1 token prefixes, 2 ragged sub-ranges */
    bool scatter;           /* slots in a permuted order */
} capture_shape;

/* A shape by name: "whole", "labels" (whole, repeated labels), "arenas"
 * (views, whole), "tokens" (views, prefixes), "ragged", "scatter" (views,
 * tokens, permuted slots), "worst" (views, ragged, permuted). 0, or -1 for
 * an unknown name. */
static inline int capture_shape_parse(const char *name, capture_shape *sh)
{
    static const struct {
        const char *name;
        capture_shape sh;
    } shapes[] = {
        { "whole", { false, false, 0, false } },  { "labels", { true, false, 0, false } },
        { "arenas", { false, true, 0, false } },  { "tokens", { false, true, 1, false } },
        { "ragged", { false, true, 2, false } },  { "scatter", { false, true, 1, true } },
        { "worst", { false, true, 2, true } },
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (strcmp(name, shapes[i].name) == 0) {
            *sh = shapes[i].sh;
            return 0;
        }
    return -1;
}

typedef struct capture_gen {
    trace *t;
    uint64_t n, emitted;
    bool repeat_labels;
    capture_shape shape;
    uint64_t iter[CAP_HOSTS];
    int step[CAP_HOSTS];
    int host;
    int64_t clock[CAP_HOSTS + CAP_STREAMS]; /* ns, per queue */
    uint32_t q_host[CAP_HOSTS], q_stream[CAP_STREAMS];
    uint32_t in[CAP_HOSTS][CAP_SLOTS], out[CAP_HOSTS][CAP_SLOTS];
    uint32_t d[CAP_HOSTS][CAP_DEV][CAP_SLOTS];
    uint32_t ev[CAP_STREAMS];
    uint32_t fixed[9];      /* repeat_labels: one label per step */
    trace_access acc[2];
} capture_gen;

static const char *const capture_step_names[] = { "prep", "up",  "qkv", "norm", "record",
                                                  "wait", "mlp", "act", "down" };

#define CAP_VIEW 65536    /* bytes per buffer (view or root) */

/* The views of the arenas shape (see above). */
static inline void capture_init_arenas(capture_gen *g)
{
    trace *t = g->t;
    char name[64], dev[16];
    for (int h = 0; h < CAP_HOSTS; h++) {
        snprintf(name, sizeof name, "pinned%d", h);
        uint32_t pin = trace_add_root_buffer(t, trace_intern_cstr(t, name),
                                             2ull * CAP_SLOTS * CAP_VIEW, TRACE_LOC_HOST,
                                             TRACE_NONE, true);
        uint32_t arena[2];
        for (int x = 0; x < 2; x++) {
            snprintf(name, sizeof name, "arena%d.%d", h, x);
            snprintf(dev, sizeof dev, "cuda:%d", 2 * h + x);
            arena[x] = trace_add_root_buffer(t, trace_intern_cstr(t, name),
                                             3ull * CAP_SLOTS * CAP_VIEW, TRACE_LOC_DEVICE,
                                             trace_intern_cstr(t, dev), false);
        }
        for (int k = 0; k < CAP_SLOTS; k++) {
            uint64_t off = (uint64_t)k * 2 * CAP_VIEW;
            snprintf(name, sizeof name, "in%d.%d", h, k);
            g->in[h][k] = trace_add_view(t, trace_intern_cstr(t, name), pin, off, CAP_VIEW);
            snprintf(name, sizeof name, "out%d.%d", h, k);
            g->out[h][k] = trace_add_view(t, trace_intern_cstr(t, name), pin, off + CAP_VIEW,
                                          CAP_VIEW);
            /* per device arena and slot, three views' room: d0 d2 d4 in
             * the first arena (d4 on d2's bytes), d1 d3 d5 in the second */
            static const int room[CAP_DEV] = { 0, 0, 1, 1, 1, 2 };
            for (int x = 0; x < CAP_DEV; x++) {
                snprintf(name, sizeof name, "d%d.%d.%d", x, h, k);
                g->d[h][x][k] = trace_add_view(t, trace_intern_cstr(t, name), arena[x & 1],
                                               (uint64_t)(3 * k + room[x]) * CAP_VIEW, CAP_VIEW);
            }
        }
    }
}

static inline void capture_init_shape(capture_gen *g, trace *t, uint64_t n,
                                      const capture_shape *shape)
{
    memset(g, 0, sizeof *g);
    g->t = t;
    g->n = n;
    g->shape = *shape;
    g->repeat_labels = shape->repeat_labels;
    char name[64], dev[16];
    for (int h = 0; h < CAP_HOSTS; h++) {
        snprintf(name, sizeof name, "host%d", h);
        g->q_host[h] = trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_HOST, TRACE_NONE);
    }
    for (int s = 0; s < CAP_STREAMS; s++) {
        snprintf(name, sizeof name, "stream%d", s);
        snprintf(dev, sizeof dev, "cuda:%d", s / 2);
        g->q_stream[s] = trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_STREAM,
                                         trace_intern_cstr(t, dev));
        snprintf(name, sizeof name, "ev%d", s);
        g->ev[s] = trace_intern_cstr(t, name);
    }
    for (int k = 0; k < 9; k++)
        g->fixed[k] = trace_intern_cstr(t, capture_step_names[k]);
    if (shape->arenas) {
        capture_init_arenas(g);
        return;
    }
    for (int h = 0; h < CAP_HOSTS; h++)
        for (int k = 0; k < CAP_SLOTS; k++) {
            snprintf(name, sizeof name, "in%d.%d", h, k);
            g->in[h][k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 65536,
                                                TRACE_LOC_HOST, TRACE_NONE, true);
            snprintf(name, sizeof name, "out%d.%d", h, k);
            g->out[h][k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 65536,
                                                 TRACE_LOC_HOST, TRACE_NONE, true);
            for (int x = 0; x < CAP_DEV; x++) {
                snprintf(name, sizeof name, "d%d.%d.%d", x, h, k);
                snprintf(dev, sizeof dev, "cuda:%d", 2 * h + (x & 1));
                g->d[h][x][k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 65536,
                                                      TRACE_LOC_DEVICE,
                                                      trace_intern_cstr(t, dev), false);
            }
        }
}

static inline void capture_init(capture_gen *g, trace *t, uint64_t n, bool repeat_labels)
{
    capture_shape sh = { .repeat_labels = repeat_labels };
    capture_init_shape(g, t, n, &sh);
}

static inline uint64_t capture_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;    /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Adds access number s->n_access of statement s (step `step` of iteration
 * i) to buffer b, over the range the shape gives it. A copy's two accesses
 * get ranges of the same size. */
static inline void capture_acc(capture_gen *g, trace_stmt *s, uint32_t b, uint8_t mode, int step,
                               uint64_t i)
{
    uint64_t size = g->t->buffers[b].size, lo = 0, hi = size;
    uint8_t form = TRACE_REF_WHOLE;
    if (g->shape.ranges == 1) {
        hi = (1 + capture_mix(i) % 64) * 1024;
        form = TRACE_REF_RANGE;
    } else if (g->shape.ranges == 2) {
        bool copy = s->kind == TRACE_COPY;
        uint64_t m = capture_mix(i * 32 + (uint64_t)step * 2 + (copy ? 0 : s->n_access));
        lo = (m % 96) * 512;
        hi = lo + (1 + (m >> 16) % 64) * 512;
        if (hi > size)
            hi = size;
        form = TRACE_REF_RANGE;
    }
    if (lo == 0 && hi == size)
        form = TRACE_REF_WHOLE;
    g->acc[s->n_access] = (trace_access){ .buffer = b, .mode = mode, .form = form,
                                          .lo = lo, .hi = hi };
    s->n_access++;
    s->access = g->acc;
}

/* The label of step `step` of iteration i: distinct ("L17.qkv.k40213"), or
 * the step's name. Interning a fresh string per statement is what a
 * capture's importer or recorder does. */
static inline uint32_t capture_label(capture_gen *g, int step, uint64_t i)
{
    if (g->repeat_labels)
        return g->fixed[step];
    char l[48];
    int n = snprintf(l, sizeof l, "L%u.%s.k%llu", (unsigned)(i % 32), capture_step_names[step],
                     (unsigned long long)(i * CAP_HOSTS + (uint64_t)g->host));
    return trace_intern(g->t, l, (size_t)n);
}

/* Fills *s with the next statement; false at the end. */
static inline bool capture_next(capture_gen *g, trace_stmt *s)
{
    if (g->emitted >= g->n)
        return false;
    int h = g->host;
    uint64_t i = g->iter[h];
    uint32_t slot = (uint32_t)(i % CAP_SLOTS);
    if (g->shape.scatter)
        slot = (slot * 167 + 89) % CAP_SLOTS;  /* 167 is odd: a permutation */
    int y = 2 + 2 * (int)((i / CAP_SLOTS) % 2);    /* d2 or d4 */
    int a = 4 * h + (int)(i % 4), b = 4 * h + (int)((i + 1) % 4);
    trace_stmt_init(s);
    s->seq = g->emitted++;
    s->by = g->q_host[h];
    int step = g->step[h]++;
    bool end = false;
    uint32_t q;
    switch (step) {
    case 0:
        q = g->q_host[h], s->kind = TRACE_OP, s->by = TRACE_NONE;
        capture_acc(g, s, g->in[h][slot], TRACE_W, step, i);
        break;
    case 1:
        q = g->q_stream[a], s->kind = TRACE_COPY;
        capture_acc(g, s, g->in[h][slot], TRACE_R, step, i);
        capture_acc(g, s, g->d[h][0][slot], TRACE_W, step, i);
        break;
    case 2:
        q = g->q_stream[a], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][0][slot], TRACE_R, step, i);
        capture_acc(g, s, g->d[h][1][slot], TRACE_W, step, i);
        break;
    case 3:
        q = g->q_stream[a], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][1][slot], TRACE_R, step, i);
        capture_acc(g, s, g->d[h][3][slot], TRACE_W, step, i);
        break;
    case 4:
        q = g->q_stream[a], s->kind = TRACE_RECORD, s->object = g->ev[a];
        break;
    case 5:
        q = g->q_stream[b], s->kind = TRACE_WAIT, s->object = g->ev[a];
        break;
    case 6:
        q = g->q_stream[b], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][1][slot], TRACE_R, step, i);
        capture_acc(g, s, g->d[h][y][slot], TRACE_W, step, i);
        break;
    case 7:
        q = g->q_stream[b], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][y][slot], TRACE_RW, step, i);
        break;
    case 8:
        q = g->q_stream[b], s->kind = TRACE_COPY;
        capture_acc(g, s, g->d[h][y][slot], TRACE_R, step, i);
        capture_acc(g, s, g->out[h][slot], TRACE_W, step, i);
        end = i % 8 != 7;
        break;
    default:
        q = g->q_host[h], s->kind = TRACE_SYNC, s->sync_scope = TRACE_SYNC_ALL;
        s->by = TRACE_NONE;
        end = true;
    }
    s->queue = q;
    if (s->kind == TRACE_OP || s->kind == TRACE_COPY)
        s->label = capture_label(g, step, i);
    /* observed times: each queue's clock moves on; streams start no earlier
     * than their host submitted */
    int64_t *c = &g->clock[q];      /* queues: the hosts, then the streams */
    int64_t hc = g->clock[h];
    if (*c < hc)
        *c = hc;
    s->t = *c;
    s->dur = s->kind == TRACE_OP ? 5000 + (int64_t)(i % 7) * 300 : s->kind == TRACE_COPY ? 2500 : 200;
    *c += s->dur + 100;
    if (q >= CAP_HOSTS)
        g->clock[h] += 800;     /* the launch's API cost on the host */
    if (end) {
        g->step[h] = 0;
        g->iter[h]++;
        g->host = (g->host + 1) % CAP_HOSTS;
    }
    return true;
}

typedef struct capture_reader {
    capture_gen g;
} capture_reader;

static inline int capture_reader_next(void *ctx, trace_stmt *out, trace_error *err)
{
    (void)err;
    return capture_next(&((capture_reader *)ctx)->g, out) ? 1 : 0;
}

static inline void capture_reader_close(void *ctx)
{
    free(ctx);
}

/* A reader of n statements of the capture shape varied by *shape (it owns
 * its trace). */
static inline int capture_open_shape(trace_reader *r, uint64_t n, const capture_shape *shape)
{
    static const trace_reader_iface iface = { capture_reader_next, capture_reader_close, NULL };
    memset(r, 0, sizeof *r);
    capture_reader *c = calloc(1, sizeof *c);
    r->trace = trace_new();
    if (!c || !r->trace) {
        free(c);
        trace_free(r->trace);
        return -1;
    }
    r->owns_trace = true;
    r->iface = &iface;
    r->ctx = c;
    r->source = strdup(shape->repeat_labels ? "capture shape (repeated labels)" : "capture shape");
    capture_init_shape(&c->g, r->trace, n, shape);
    return 0;
}

/* The same with whole-buffer accesses (the first shape of issue 9). */
static inline int capture_open(trace_reader *r, uint64_t n, bool repeat_labels)
{
    capture_shape sh = { .repeat_labels = repeat_labels };
    return capture_open_shape(r, n, &sh);
}

#endif
