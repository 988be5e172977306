/*
 * sink.c -- where a recording goes: an in-memory trace, the recorder, or
 * nowhere.
 *
 * All speak the recorder's vocabulary (traces/trace.h), so the recording
 * (record.c) is written once: unit tests record into memory and check the
 * trace at once; `syncsim run` records into the SQLite database; the
 * benchmarks measure what producing a trace costs with the null sink.
 */
#include "sched.h"

#include <string.h>

static uint32_t mem_queue(void *ctx, const char *name, trace_queue_kind kind, const char *device)
{
    trace *t = ctx;
    return trace_add_queue(t, trace_intern_cstr(t, name), kind,
                           device ? trace_intern_cstr(t, device) : TRACE_NONE);
}

static uint32_t mem_buffer(void *ctx, const char *name, uint64_t size, trace_loc loc,
                           const char *device, bool pinned)
{
    trace *t = ctx;
    return trace_add_root_buffer(t, trace_intern_cstr(t, name), size, loc,
                                 device ? trace_intern_cstr(t, device) : TRACE_NONE, pinned);
}

static uint32_t mem_view(void *ctx, const char *name, uint32_t parent, uint64_t offset, uint64_t size)
{
    trace *t = ctx;
    return trace_add_view(t, trace_intern_cstr(t, name), parent, offset, size);
}

static uint32_t mem_intern(void *ctx, const char *s) { return trace_intern_cstr(ctx, s); }

static uint64_t mem_append(void *ctx, const trace_stmt *s)
{
    trace *t = ctx;
    if (trace_append(t, s) != 0)
        return TRACE_NONE;
    return t->n_stmts - 1;
}

static void mem_set_time(void *ctx, uint64_t seq, int64_t t, int64_t dur)
{
    trace_set_time(ctx, seq, t, dur);
}

static int mem_meta(void *ctx, const char *key, const char *value)
{
    return trace_set_meta(ctx, key, value);
}

static const sched_sink_iface memory_iface = {
    .queue = mem_queue, .buffer = mem_buffer, .view = mem_view, .intern = mem_intern,
    .append = mem_append, .set_time = mem_set_time, .meta = mem_meta,
};

sched_sink sched_sink_memory(trace *t) { return (sched_sink){ &memory_iface, t }; }

static uint32_t rec_queue(void *ctx, const char *name, trace_queue_kind kind, const char *device)
{
    return trace_recorder_queue(ctx, name, kind, device);
}

static uint32_t rec_buffer(void *ctx, const char *name, uint64_t size, trace_loc loc,
                           const char *device, bool pinned)
{
    return trace_recorder_buffer(ctx, name, size, loc, device, pinned);
}

static uint32_t rec_view(void *ctx, const char *name, uint32_t parent, uint64_t offset, uint64_t size)
{
    return trace_recorder_view(ctx, name, parent, offset, size);
}

static uint32_t rec_intern(void *ctx, const char *s) { return trace_recorder_intern(ctx, s); }
static uint64_t rec_append(void *ctx, const trace_stmt *s) { return trace_recorder_append(ctx, s); }
static void rec_set_time(void *ctx, uint64_t seq, int64_t t, int64_t dur)
{
    trace_recorder_set_time(ctx, seq, t, dur);
}
static int rec_meta(void *ctx, const char *k, const char *v) { return trace_recorder_meta(ctx, k, v); }
static int rec_node(void *ctx, const trace_graph_node *n) { return trace_recorder_graph_node(ctx, n); }
static int rec_edge(void *ctx, const trace_graph_edge *e) { return trace_recorder_graph_edge(ctx, e); }
static int rec_split(void *ctx, const trace_graph_split *s) { return trace_recorder_graph_split(ctx, s); }

static const sched_sink_iface recorder_iface = {
    .queue = rec_queue, .buffer = rec_buffer, .view = rec_view, .intern = rec_intern,
    .append = rec_append, .set_time = rec_set_time, .meta = rec_meta, .graph_node = rec_node,
    .graph_edge = rec_edge, .graph_split = rec_split,
};

sched_sink sched_sink_recorder(trace_recorder *rec) { return (sched_sink){ &recorder_iface, rec }; }

/* The null sink: it keeps nothing, but numbers what it is given as a
 * fresh trace would (strings, queues, buffers, statements in order), so a
 * recording's ids need no translation and the benchmark measures what
 * producing the trace costs. */
static uint32_t null_queue(void *c, const char *n, trace_queue_kind k, const char *d)
{
    (void)n, (void)k, (void)d;
    return ((sched_null_sink *)c)->queues++;
}
static uint32_t null_buffer(void *c, const char *n, uint64_t s, trace_loc l, const char *d, bool p)
{
    (void)n, (void)s, (void)l, (void)d, (void)p;
    return ((sched_null_sink *)c)->buffers++;
}
static uint32_t null_view(void *c, const char *n, uint32_t p, uint64_t o, uint64_t s)
{
    (void)n, (void)p, (void)o, (void)s;
    return ((sched_null_sink *)c)->buffers++;
}
static uint32_t null_intern(void *c, const char *s)
{
    (void)s;
    return ((sched_null_sink *)c)->strings++;
}
static uint64_t null_append(void *c, const trace_stmt *s)
{
    (void)s;
    return ((sched_null_sink *)c)->stmts++;
}

static const sched_sink_iface null_iface = {
    .queue = null_queue, .buffer = null_buffer, .view = null_view, .intern = null_intern,
    .append = null_append,
};

sched_sink sched_sink_null(sched_null_sink *counts)
{
    *counts = (sched_null_sink){ 0 };
    return (sched_sink){ &null_iface, counts };
}

uint32_t sched_tensor_view(sched_sink *sink, sched_tensor *t)
{
    if (t->trace_view != TRACE_NONE || !t->buffer)
        return t->trace_view;
    uint64_t size = sched_tensor_nbytes(t);
    if (t->offset == 0 && size == t->buffer->size)
        t->trace_view = t->buffer->trace_id;
    else
        t->trace_view = sink->iface->view(sink->ctx, t->name, t->buffer->trace_id, t->offset, size);
    return t->trace_view;
}
