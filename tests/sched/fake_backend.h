/*
 * fake_backend.h -- a backend for the scheduler's tests: it does nothing
 * but count, and says yes or no to ops and buffers as a test tells it.
 * Header-only (static), shared by tests/sched/test_*.c.
 */
#ifndef SYNCSIM_TEST_FAKE_BACKEND_H
#define SYNCSIM_TEST_FAKE_BACKEND_H

#include "sched/sched.h"

#include <stdlib.h>
#include <string.h>

typedef struct fake_ctx {
    char name[16];
    sched_device_kind kind;
    uint32_t unsupported_ops;       /* bit per sched_op */
    bool uses_host_buffers;         /* supports_buffer(host buffer) */
    int n_compute;
    int32_t last_src[8];            /* src_of(first node, i) of the last graph_compute */
    int n_sync, n_copy_async, n_copy_sync;
} fake_ctx;

static const char *fake_name(sched_backend *b) { return ((fake_ctx *)b->ctx)->name; }
static sched_device_kind fake_kind(sched_backend *b) { return ((fake_ctx *)b->ctx)->kind; }

static bool fake_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    (void)g;
    return !(((fake_ctx *)b->ctx)->unsupported_ops & (1u << t->op));
}

static bool fake_supports_buffer(sched_backend *b, const sched_buffer *buf)
{
    return ((fake_ctx *)b->ctx)->uses_host_buffers && buf->host;
}

static sched_buffer *fake_alloc(sched_backend *b, const char *name, uint64_t size,
                                sched_buffer_usage usage)
{
    sched_buffer *buf = calloc(1, sizeof *buf);
    buf->backend = b;
    buf->size = size;
    buf->usage = usage;
    buf->host = ((fake_ctx *)b->ctx)->kind == SCHED_DEVICE_CPU;
    snprintf(buf->name, sizeof buf->name, "%s", name);
    return buf;
}

static void fake_free(sched_backend *b, sched_buffer *buf)
{
    (void)b;
    free(buf);
}

static int fake_set_async(sched_backend *b, sched_tensor *s, sched_tensor *d)
{
    (void)s, (void)d;
    ((fake_ctx *)b->ctx)->n_copy_async++;
    return 0;
}

static int fake_copy_async(sched_backend *b, sched_backend *sb, sched_tensor *s, sched_tensor *d)
{
    (void)sb, (void)s, (void)d;
    ((fake_ctx *)b->ctx)->n_copy_async++;
    return 1;
}

static int fake_copy_sync(sched_backend *b, sched_tensor *s, sched_tensor *d)
{
    (void)s, (void)d;
    ((fake_ctx *)b->ctx)->n_copy_sync++;
    return 0;
}

static int fake_sync(sched_backend *b)
{
    ((fake_ctx *)b->ctx)->n_sync++;
    return 0;
}

static int fake_compute(sched_backend *b, const sched_exec *x)
{
    fake_ctx *c = b->ctx;
    c->n_compute++;
    for (int i = 0; i < SCHED_MAX_SRC; i++)
        c->last_src[i] = x->src_of(x, x->nodes[0], i);
    return 0;
}

static sched_event *fake_event_new(sched_backend *b, const char *name)
{
    (void)name;
    sched_event *ev = calloc(1, sizeof *ev);
    ev->backend = b;
    return ev;
}

static void fake_event_free(sched_backend *b, sched_event *ev)
{
    (void)b;
    free(ev);
}

static int fake_event_record(sched_backend *b, sched_event *ev)
{
    (void)b;
    ev->n_records++;
    return 0;
}

static int fake_event_wait(sched_backend *b, sched_event *ev)
{
    (void)b, (void)ev;
    return 0;
}

static const sched_backend_iface fake_gpu_iface = {
    .get_name = fake_name, .device_kind = fake_kind, .supports_op = fake_supports_op,
    .supports_buffer = fake_supports_buffer, .buffer_alloc = fake_alloc, .buffer_free = fake_free,
    .set_async = fake_set_async, .copy_async = fake_copy_async, .copy_sync = fake_copy_sync,
    .synchronize = fake_sync, .graph_compute = fake_compute, .event_new = fake_event_new,
    .event_free = fake_event_free, .event_record = fake_event_record,
    .event_wait = fake_event_wait, .event_synchronize = fake_event_wait,
};

/* A synchronous CPU: no events, no async copies. */
static const sched_backend_iface fake_cpu_iface = {
    .get_name = fake_name, .device_kind = fake_kind, .buffer_alloc = fake_alloc,
    .buffer_free = fake_free, .copy_sync = fake_copy_sync, .graph_compute = fake_compute,
};

typedef struct fake_set {
    fake_ctx ctx[4];
    sched_backend be[4];
    sched_backend *ptr[4];
    int n;
} fake_set;

/* n_gpus GPU-like backends GPU0.., then the CPU. */
static void fake_set_init(fake_set *f, int n_gpus)
{
    memset(f, 0, sizeof *f);
    f->n = n_gpus + 1;
    for (int i = 0; i < f->n; i++) {
        bool cpu = i == n_gpus;
        snprintf(f->ctx[i].name, sizeof f->ctx[i].name, cpu ? "CPU" : "GPU%d", i);
        f->ctx[i].kind = cpu ? SCHED_DEVICE_CPU : SCHED_DEVICE_GPU;
        f->be[i].iface = cpu ? &fake_cpu_iface : &fake_gpu_iface;
        f->be[i].ctx = &f->ctx[i];
        f->ptr[i] = &f->be[i];
    }
}

static uint32_t null_view(void *c, const char *n, uint32_t p, uint64_t o, uint64_t s)
{
    (void)c, (void)n, (void)p, (void)o, (void)s;
    return 0;
}

/* A sink that only answers declarations (the fake backends record nothing). */
static inline sched_sink fake_sink(void)
{
    static const sched_sink_iface iface = { .view = null_view };
    return (sched_sink){ &iface, NULL };
}

/* The fixture of the scheduler tests: two fake GPUs and the CPU, an empty
 * graph, and what a test plans from it (freed by fake_fixture_teardown). */
typedef struct fixture {
    fake_set f;
    sched_graph *g;
    sched_weights *w;
    sched *s;
} fixture;

static inline int fake_fixture_setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    fake_set_init(&fx->f, 2);
    fx->g = sched_graph_new("t");
    *state = fx;
    return 0;
}

static inline int fake_fixture_teardown(void **state)
{
    fixture *fx = *state;
    sched_free(fx->s);
    sched_weights_free(fx->w);
    sched_graph_free(fx->g);
    free(fx);
    return 0;
}

/* Registers a cmocka test that runs with the fixture above. */
#define FAKE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fake_fixture_setup, fake_fixture_teardown)

/* A 64x64 f32 weight that lives on backend `home` from the start. */
static inline int32_t fake_weight(sched_graph *g, const char *name, int home)
{
    int64_t dims[2] = { 64, 64 };
    int32_t t = sched_graph_leaf(g, name, SCHED_F32, 2, dims, SCHED_FLAG_WEIGHT);
    g->tensors[t].home = home;
    return t;
}

#endif
