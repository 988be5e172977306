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

typedef struct capture_gen {
    trace *t;
    uint64_t n, emitted;
    bool repeat_labels;
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

static inline void capture_init(capture_gen *g, trace *t, uint64_t n, bool repeat_labels)
{
    memset(g, 0, sizeof *g);
    g->t = t;
    g->n = n;
    g->repeat_labels = repeat_labels;
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
    for (int k = 0; k < 9; k++)
        g->fixed[k] = trace_intern_cstr(t, capture_step_names[k]);
}

static inline void capture_acc(capture_gen *g, trace_stmt *s, uint32_t b, uint8_t mode)
{
    g->acc[s->n_access] = (trace_access){ .buffer = b, .mode = mode, .form = TRACE_REF_WHOLE,
                                          .lo = 0, .hi = g->t->buffers[b].size };
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
        capture_acc(g, s, g->in[h][slot], TRACE_W);
        break;
    case 1:
        q = g->q_stream[a], s->kind = TRACE_COPY;
        capture_acc(g, s, g->in[h][slot], TRACE_R);
        capture_acc(g, s, g->d[h][0][slot], TRACE_W);
        break;
    case 2:
        q = g->q_stream[a], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][0][slot], TRACE_R);
        capture_acc(g, s, g->d[h][1][slot], TRACE_W);
        break;
    case 3:
        q = g->q_stream[a], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][1][slot], TRACE_R);
        capture_acc(g, s, g->d[h][3][slot], TRACE_W);
        break;
    case 4:
        q = g->q_stream[a], s->kind = TRACE_RECORD, s->object = g->ev[a];
        break;
    case 5:
        q = g->q_stream[b], s->kind = TRACE_WAIT, s->object = g->ev[a];
        break;
    case 6:
        q = g->q_stream[b], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][1][slot], TRACE_R);
        capture_acc(g, s, g->d[h][y][slot], TRACE_W);
        break;
    case 7:
        q = g->q_stream[b], s->kind = TRACE_OP;
        capture_acc(g, s, g->d[h][y][slot], TRACE_RW);
        break;
    case 8:
        q = g->q_stream[b], s->kind = TRACE_COPY;
        capture_acc(g, s, g->d[h][y][slot], TRACE_R);
        capture_acc(g, s, g->out[h][slot], TRACE_W);
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

/* A reader of n statements of the capture shape (it owns its trace). */
static inline int capture_open(trace_reader *r, uint64_t n, bool repeat_labels)
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
    r->source = strdup(repeat_labels ? "capture shape (repeated labels)" : "capture shape");
    capture_init(&c->g, r->trace, n, repeat_labels);
    return 0;
}

#endif
