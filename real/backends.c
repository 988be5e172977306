/*
 * backends.c -- device specs, buffers, deterministic data, the reference.
 *
 * A run on real backends must be comparable with a reference, so every
 * value a run starts from is a pure function of (tensor name, element,
 * seed) for weights and caches, and of (input kind, evaluation, element,
 * seed) for user inputs: real_init_weights and real_set_inputs write them
 * into the backends' buffers, real_ref_* into its own. The reference runs
 * every node of the whole graph in order on one thread with the same
 * kernels; since a kernel's result does not depend on how it is chunked,
 * a correctly synchronised run matches it exactly, and any difference
 * comes from an ordering bug (or a kernel bug: the kernel tests rule that
 * out).
 */
#include "real_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *real_status_str(real_status st)
{
    switch (st) {
#define REAL_STATUS_CASE(name, msg) case REAL_##name: return msg;
        REAL_STATUS_MAP(REAL_STATUS_CASE)
#undef REAL_STATUS_CASE
    }
    return "unknown status";
}

void real_options_default(real_options *o)
{
    memset(o, 0, sizeof *o);
    o->barrier = REAL_BARRIER_HYBRID;
    o->trace_level = REAL_TRACE_STREAM;
    o->skip_barrier_after = -1;
    o->allreduce_timeout_ns = 10000000000ll;
}

/* ------------------------------------------------------------------ */
/* Buffers.                                                            */

sched_buffer *real_buffer_new(sched_backend *b, real_ctx *c, const char *name, uint64_t size,
                              sched_buffer_usage usage, bool host, const char *device)
{
    sched_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return NULL;
    uint64_t alloc = (size + 63) & ~(uint64_t)63;
    buf->ctx = aligned_alloc(64, alloc ? alloc : 64);
    if (!buf->ctx) {
        free(buf);
        return NULL;
    }
    memset(buf->ctx, 0, alloc ? alloc : 64);
    buf->backend = b;
    buf->size = size;
    buf->usage = usage;
    buf->host = host;
    snprintf(buf->name, sizeof buf->name, "%s", name);
    buf->trace_id = real_rec_root(c, name, size, host, device);
    return buf;
}

void real_buffer_free(sched_buffer *buf)
{
    if (!buf)
        return;
    free(buf->ctx);
    free(buf);
}

void *real_tensor_data(const sched_tensor *t)
{
    if (!t->buffer || !t->buffer->ctx)
        return NULL;
    return (char *)t->buffer->ctx + t->offset;
}

/* ------------------------------------------------------------------ */
/* Device specs.                                                       */

real_ctx *real_ctx_of(const sched_backend *b)
{
    if (real_is_cpu(b) || real_is_cs(b))
        return ((const real_backend_hdr *)b->ctx)->rc;
    return NULL;
}

bool real_backend_is_real(const sched_backend *b) { return real_is_cpu(b) || real_is_cs(b); }

static int parse_duration(const char *v, int64_t *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || x < 0)
        return -1;
    double mul = 1;
    if (strcmp(end, "ns") == 0 || *end == '\0')
        mul = 1;
    else if (strcmp(end, "us") == 0)
        mul = 1e3;
    else if (strcmp(end, "ms") == 0)
        mul = 1e6;
    else if (strcmp(end, "s") == 0)
        mul = 1e9;
    else
        return -1;
    *out = (int64_t)(x * mul);
    return 0;
}

static int parse_size(const char *v, uint64_t *out)
{
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v)
        return -1;
    uint64_t mul = 1;
    switch (tolower((unsigned char)*end)) {
    case '\0': break;
    case 'k': mul = 1ull << 10; break;
    case 'm': mul = 1ull << 20; break;
    case 'g': mul = 1ull << 30; break;
    default: return -1;
    }
    if (*end && end[1] && !(tolower((unsigned char)end[1]) == 'b' && !end[2]) &&
        !(tolower((unsigned char)end[1]) == 'i' && end[2] == 'B' && !end[3]))
        return -1;
    *out = x * mul;
    return 0;
}

typedef struct spec_item {
    bool cpu;
    int count;
    real_cs_params cs;
    int threads;
} spec_item;

static int parse_spec(const char *spec, const real_options *o, spec_item *items, int *n_items,
                      char *err, size_t errlen)
{
    char *copy = strdup(spec ? spec : "cpu");
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int n = 0, rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            char *colon = strchr(tok, ':');
            int count = 1;
            if (colon) {
                *colon = '\0';
                char *end;
                long v = strtol(colon + 1, &end, 10);
                if (*end || v < 1 || v > 8) {
                    snprintf(err, errlen, "devices '%s': '%s:%s': expected a count from 1 to 8",
                             spec, tok, colon + 1);
                    rc = -1;
                    break;
                }
                count = (int)v;
            }
            bool cpu = strcmp(tok, "cpu") == 0;
            if (!cpu && strcmp(tok, "cpustream") != 0) {
                snprintf(err, errlen, "devices '%s': unknown device '%s' (expected cpustream[:N] "
                         "or cpu, then key=value options)", spec, tok);
                rc = -1;
                break;
            }
            if (n == REAL_MAX_BACKENDS - 1 || (cpu && count != 1)) {
                snprintf(err, errlen, "devices '%s': %s", spec,
                         cpu ? "cpu takes no count" : "too many devices");
                rc = -1;
                break;
            }
            items[n] = (spec_item){ .cpu = cpu, .count = count, .threads = cpu ? o->threads : 1 };
            items[n].cs.jitter_ns = o->jitter_ns;
            items[n].cs.seed = o->seed;
            items[n].cs.mem = 1ull << 30;
            n++;
            continue;
        }
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        if (n == 0) {
            snprintf(err, errlen, "devices '%s': option '%s' before any device", spec, key);
            rc = -1;
            break;
        }
        spec_item *it = &items[n - 1];
        int bad = 0;
        if (strcmp(key, "jitter") == 0 && !it->cpu)
            bad = parse_duration(val, &it->cs.jitter_ns);
        else if (strcmp(key, "seed") == 0 && !it->cpu) {
            char *end;
            it->cs.seed = strtoull(val, &end, 10);
            bad = (*val == '\0' || *end) ? -1 : 0;
        } else if (strcmp(key, "threads") == 0) {
            char *end;
            long v = strtol(val, &end, 10);
            bad = (*val == '\0' || *end || v < 1 || v > 256) ? -1 : 0;
            it->threads = (int)v;
        } else if (strcmp(key, "mem") == 0 && !it->cpu)
            bad = parse_size(val, &it->cs.mem);
        else {
            snprintf(err, errlen, "devices '%s': unknown option '%s' for %s (expected %s)", spec,
                     key, it->cpu ? "cpu" : "cpustream",
                     it->cpu ? "threads" : "jitter, seed, threads or mem");
            rc = -1;
            break;
        }
        if (bad) {
            snprintf(err, errlen, "devices '%s': bad value '%s' for %s", spec, val, key);
            rc = -1;
            break;
        }
    }
    free(copy);
    if (rc != 0)
        return -1;
    int n_cpu = 0;
    for (int i = 0; i < n; i++)
        n_cpu += items[i].cpu;
    if (n_cpu > 1 || (n_cpu == 1 && !items[n - 1].cpu)) {
        snprintf(err, errlen, "devices '%s': cpu must come once, last", spec);
        return -1;
    }
    if (n_cpu == 0)
        items[n++] = (spec_item){ .cpu = true, .count = 1, .threads = o->threads };
    *n_items = n;
    return 0;
}

int real_spec_check(const char *spec, int *n_devices, char *errbuf, size_t errlen)
{
    real_options o;
    real_options_default(&o);
    spec_item items[REAL_MAX_BACKENDS];
    int n_items = 0;
    if (parse_spec(spec, &o, items, &n_items, errbuf, errlen) != 0)
        return -1;
    int total = 0, cs = 0;
    for (int i = 0; i < n_items; i++) {
        total += items[i].count;
        cs += items[i].cpu ? 0 : items[i].count;
    }
    if (total > REAL_MAX_BACKENDS) {
        snprintf(errbuf, errlen, "devices '%s': at most %d devices", spec, REAL_MAX_BACKENDS);
        return -1;
    }
    if (n_devices)
        *n_devices = cs;
    return 0;
}

int real_backends_create(const char *spec, const real_options *opt, trace_recorder *rec,
                         sched_backend ***out, size_t *n_out, char *errbuf, size_t errlen)
{
    real_options defaults;
    real_options_default(&defaults);
    if (!opt)
        opt = &defaults;
    spec_item items[REAL_MAX_BACKENDS];
    int n_items = 0;
    if (parse_spec(spec, opt, items, &n_items, errbuf, errlen) != 0)
        return -1;
    int total = 0;
    for (int i = 0; i < n_items; i++)
        total += items[i].count;
    if (total > REAL_MAX_BACKENDS) {
        snprintf(errbuf, errlen, "devices '%s': at most %d devices", spec, REAL_MAX_BACKENDS);
        return -1;
    }
    real_ctx *c = calloc(1, sizeof *c);
    sched_backend **arr = calloc((size_t)total, sizeof *arr);
    if (!c || !arr) {
        free(c);
        free(arr);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    c->opt = *opt;
    c->rec = rec;
    if (opt->sink) {
        c->sink = *opt->sink;
        c->recording = true;
    } else if (rec) {
        c->sink = sched_sink_recorder(rec);
        c->recording = true;
    }
    pthread_mutex_init(&c->rec_lock, NULL);
    pthread_mutex_init(&c->ev_lock, NULL);
    pthread_cond_init(&c->ev_cond, NULL);
    real_coll_init(c);
    c->host_q = real_rec_queue(c, "host", TRACE_QUEUE_HOST, NULL);
    if (c->recording) {
        if (c->sink.iface->meta) {
            c->sink.iface->meta(c->sink.ctx, "devices", spec ? spec : "cpu");
            c->sink.iface->meta(c->sink.ctx, "barrier", real_barrier_str(opt->barrier));
        }
    }
    int cs_index = 0;
    for (int i = 0; i < n_items; i++) {
        for (int k = 0; k < items[i].count; k++) {
            sched_backend *b;
            if (items[i].cpu) {
                b = real_cpu_new(c, items[i].threads, opt->barrier, errbuf, errlen);
            } else {
                real_cs_params p = items[i].cs;
                p.index = cs_index++;
                p.threads = items[i].threads;
                b = real_cs_new(c, &p, errbuf, errlen);
            }
            if (!b)
                goto fail;
            arr[c->n_backends] = b;
            c->backends[c->n_backends++] = b;
        }
    }
    *out = arr;
    *n_out = (size_t)c->n_backends;
    return 0;
fail:
    real_backends_free(arr, (size_t)c->n_backends);
    if (c->n_backends == 0) {
        /* real_backends_free finds the context through a backend. */
        pthread_mutex_destroy(&c->rec_lock);
        pthread_mutex_destroy(&c->ev_lock);
        pthread_cond_destroy(&c->ev_cond);
        real_coll_destroy(c);
        free(c);
    }
    return -1;
}

void real_backends_free(sched_backend **backends, size_t n)
{
    if (!backends)
        return;
    real_ctx *c = n > 0 ? real_ctx_of(backends[n - 1]) : NULL;
    if (!c && n > 0)
        c = real_ctx_of(backends[0]);
    /* Devices first: their queues may still copy into host memory. */
    sched_backend *cpus[REAL_MAX_BACKENDS];
    size_t n_cpus = 0;
    for (size_t i = 0; i < n; i++) {
        if (real_is_cs(backends[i]))
            real_cs_free(backends[i]);
        else if (real_is_cpu(backends[i]) && n_cpus < REAL_MAX_BACKENDS)
            cpus[n_cpus++] = backends[i];
    }
    for (size_t i = 0; i < n_cpus; i++)
        real_cpu_free(cpus[i]);
    free(backends);
    if (c) {
        pthread_mutex_destroy(&c->rec_lock);
        pthread_mutex_destroy(&c->ev_lock);
        pthread_cond_destroy(&c->ev_cond);
        real_coll_destroy(c);
        free(c);
    }
}

static real_ctx *ctx_of_set(sched_backend **backends, size_t n)
{
    return n > 0 ? real_ctx_of(backends[n - 1]) : NULL;
}

/* ------------------------------------------------------------------ */
/* Deterministic values.                                               */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in [-1, 1). */
static float unit(uint64_t h) { return (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void real_fill_weight(const sched_tensor *t, void *data, uint64_t seed)
{
    uint64_t h = trace_hash(t->name, strlen(t->name)) ^ mix64(seed);
    real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, data };
    int64_t n = sched_tensor_nelements(t);
    bool norm = t->n_dims == 1 && strstr(t->name, "norm");
    float scale = (t->flags & SCHED_FLAG_CACHE) ? 0.5f : 2.0f / sqrtf((float)t->ne[0]);
    for (int64_t i = 0; i < n; i++) {
        float u = unit(mix64(h + (uint64_t)i));
        real_store_f32(&rt, i, norm ? 1.0f + 0.1f * u : (t->type == SCHED_I32 ? 0 : u * scale));
    }
}

/* Rows of the table a get_rows reads through input t; 0 when none. */
static int64_t index_range(const sched_graph *g, const sched_tensor *t)
{
    int32_t ti = (int32_t)(t - g->tensors);
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].op == SCHED_OP_GET_ROWS && g->tensors[i].src[1] == ti) {
            const sched_tensor *a = &g->tensors[g->tensors[i].src[0]];
            return a->ne[1] * a->ne[2] * a->ne[3];
        }
    return 0;
}

void real_fill_input(const sched_graph *g, const sched_tensor *t, void *data, uint64_t eval,
                     uint64_t seed)
{
    real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, data };
    int64_t n = sched_tensor_nelements(t);
    uint64_t h = mix64(seed ^ mix64(eval + 1));
    if (t->type == SCHED_I32) {
        int32_t *v = data;
        int64_t range = index_range(g, t);
        bool pos = ends_with(t->name, "pos");
        for (int64_t i = 0; i < n; i++) {
            if (pos)
                v[i] = (int32_t)((int64_t)eval * n + i);
            else
                v[i] = (int32_t)(mix64(h + (uint64_t)i) % (uint64_t)(range > 0 ? range : 16));
        }
        return;
    }
    if (ends_with(t->name, "kq_mask")) {
        /* Causal over a window that moves with the evaluation; cell 0 is
         * always visible so that no row is fully masked. */
        int64_t C = t->ne[0];
        for (int64_t i = 0; i < n; i++) {
            int64_t c = i % C, row = i / C;
            int64_t last = (row + (int64_t)eval) % C;
            real_store_f32(&rt, i, c <= last ? 0.0f : -INFINITY);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++)
        real_store_f32(&rt, i, unit(mix64(h + (uint64_t)i)));
}

static void host_op(real_ctx *c, const char *label, sched_tensor *t, trace_mode mode)
{
    if (!c->recording)
        return;
    uint32_t v = real_rec_tensor(c, t);
    if (v == TRACE_NONE)
        return;
    trace_access acc = { v, (uint8_t)mode, TRACE_REF_WHOLE, 0, sched_tensor_nbytes(t) };
    trace_attr attrs[2];
    trace_stmt st;
    trace_stmt_init(&st);
    st.queue = c->host_q;
    st.kind = TRACE_OP;
    st.label = real_rec_intern(c, label);
    st.access = &acc;
    st.n_access = 1;
    st.attr = attrs;
    st.n_attr = real_rec_attrs(c, attrs, -1);
    st.t = real_now_ns();
    st.dur = 0;
    real_rec_append(c, &st);
}

int real_init_weights(sched_backend **backends, size_t n, sched_graph *g, uint64_t seed)
{
    real_ctx *c = ctx_of_set(backends, n);
    if (!c)
        return -1;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) || t->op != SCHED_OP_NONE)
            continue;
        void *d = real_tensor_data(t);
        if (!d)
            return -1;
        real_fill_weight(t, d, seed);
        char label[SCHED_NAME_MAX + 8];
        snprintf(label, sizeof label, "init:%s", t->name);
        host_op(c, label, t, TRACE_W);
    }
    return 0;
}

int real_set_inputs(sched_backend **backends, size_t n, sched_graph *g, uint64_t eval,
                    uint64_t seed)
{
    real_ctx *c = ctx_of_set(backends, n);
    if (!c)
        return -1;
    c->cur_eval = eval;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & SCHED_FLAG_INPUT) || t->op != SCHED_OP_NONE)
            continue;
        void *d = real_tensor_data(t);
        if (!d)
            return -1;
        real_fill_input(g, t, d, eval, seed);
        char label[SCHED_NAME_MAX + 8];
        snprintf(label, sizeof label, "set:%s", t->name);
        host_op(c, label, t, TRACE_W);
    }
    return 0;
}

sched_tensor *real_host_tensor_new(sched_backend **backends, size_t n, const sched_tensor *like,
                                   const char *name)
{
    if (n == 0 || !real_is_cpu(backends[n - 1]))
        return NULL;
    sched_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    *t = *like;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->op = SCHED_OP_NONE;
    for (int i = 0; i < SCHED_MAX_SRC; i++)
        t->src[i] = -1;
    t->view_src = -1;
    t->flags = 0;
    t->buffer = backends[n - 1]->iface->buffer_alloc(backends[n - 1], name, sched_tensor_nbytes(like),
                                                     SCHED_BUFFER_HOST);
    t->offset = 0;
    t->trace_view = t->buffer ? t->buffer->trace_id : TRACE_NONE;
    if (!t->buffer) {
        free(t);
        return NULL;
    }
    return t;
}

void real_host_tensor_free(sched_backend **backends, size_t n, sched_tensor *t)
{
    (void)backends;
    (void)n;
    if (!t)
        return;
    real_buffer_free(t->buffer);
    free(t);
}

int real_read_output(sched_backend **backends, size_t n, const sched_tensor *t, float *out)
{
    real_ctx *c = ctx_of_set(backends, n);
    void *d = real_tensor_data(t);
    if (!c || !d)
        return -1;
    real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, d };
    int64_t ne = sched_tensor_nelements(t);
    for (int64_t i = 0; i < ne; i++)
        out[i] = real_load_f32(&rt, i);
    char label[SCHED_NAME_MAX + 8];
    snprintf(label, sizeof label, "read:%s", t->name);
    host_op(c, label, (sched_tensor *)t, TRACE_R);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The reference.                                                      */

struct real_ref {
    sched_graph *g;
    uint64_t seed;
    void **data;            /* per tensor: its bytes (views point into their source) */
    void **owned;
    float **f32;            /* per tensor: f32 copy made on request */
    bool bf16;              /* all_reduce strategy bf16 */
    int64_t bf16_min;
    /* Scratch of real_ref_eval, per tensor. */
    bool *done;
    uint8_t *pend;          /* of a base tensor: PEND_R / PEND_W by a deferred node */
};

#define PEND_R 1u
#define PEND_W 2u

real_ref *real_ref_new(sched_graph *g, uint64_t seed)
{
    return real_ref_new_shared(g, seed, NULL);
}

real_ref *real_ref_new_shared(sched_graph *g, uint64_t seed, real_ref *share)
{
    real_ref *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->g = g;
    r->seed = seed;
    size_t nt = (size_t)g->n_tensors;
    r->data = calloc(nt, sizeof *r->data);
    r->owned = calloc(nt, sizeof *r->owned);
    r->f32 = calloc(nt, sizeof *r->f32);
    r->done = calloc(nt ? nt : 1, sizeof *r->done);
    r->pend = calloc(nt ? nt : 1, sizeof *r->pend);
    if (!r->data || !r->owned || !r->f32 || !r->done || !r->pend)
        goto fail;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (t->view_src >= 0)
            continue;
        if (share && (t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE))) {
            int32_t j = sched_graph_find(share->g, t->name);
            if (j >= 0 && share->data[j] &&
                sched_tensor_nbytes(&share->g->tensors[j]) == sched_tensor_nbytes(t)) {
                r->data[i] = share->data[j];
                continue;
            }
        }
        r->owned[i] = calloc(1, sched_tensor_nbytes(t) + 64);
        if (!r->owned[i])
            goto fail;
        r->data[i] = r->owned[i];
        if (t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE))
            real_fill_weight(t, r->data[i], seed);
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (t->view_src >= 0)
            r->data[i] = (char *)r->data[t->view_src] + t->view_offs;
    }
    return r;
fail:
    real_ref_free(r);
    return NULL;
}

void real_ref_free(real_ref *r)
{
    if (!r)
        return;
    for (int32_t i = 0; r->owned && i < r->g->n_tensors; i++)
        free(r->owned[i]);
    for (int32_t i = 0; r->f32 && i < r->g->n_tensors; i++)
        free(r->f32[i]);
    free(r->owned);
    free(r->f32);
    free(r->data);
    free(r->done);
    free(r->pend);
    free(r);
}

void real_ref_set_allreduce(real_ref *r, const char *strategy, int64_t bf16_min)
{
    r->bf16 = strategy && strcmp(strategy, "bf16") == 0;
    r->bf16_min = bf16_min > 0 ? bf16_min : 32768;
}

static real_tensor ref_tensor(const real_ref *r, int32_t i)
{
    const sched_tensor *t = &r->g->tensors[i];
    return (real_tensor){ t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, r->data[i] };
}

/* The tensor whose bytes t names (itself unless a view). */
static int32_t base_of(const sched_graph *g, int32_t i)
{
    while (g->tensors[i].view_src >= 0)
        i = g->tensors[i].view_src;
    return i;
}

/* Runs node i (not an all_reduce of more than one rank). */
static int ref_node(real_ref *r, int32_t i)
{
    const sched_tensor *t = &r->g->tensors[i];
    real_kernel_args a = { .op = t->op, .param = t->param };
    a.dst = ref_tensor(r, i);
    for (int k = 0; k < SCHED_MAX_SRC; k++) {
        if (t->src[k] < 0)
            continue;
        a.src[k] = ref_tensor(r, t->src[k]);
        a.n_src = k + 1;
    }
    if (t->op == SCHED_OP_ALL_REDUCE)
        a.bf16_wire = r->bf16 && sched_tensor_nelements(&r->g->tensors[t->src[0]]) >= r->bf16_min;
    return real_kernel_run(&a, 0, 1) == REAL_OK ? 0 : -1;
}

/* Whether every member of node i's all_reduce group has its source; if so,
 * runs them all (each the sum of every member's source in rank order, i.e.
 * graph order) and marks them done. 1 ran, 0 not ready, -1 error. */
static int ref_group(real_ref *r, int32_t i)
{
    const sched_graph *g = r->g;
    int32_t group = g->tensors[i].param;
    int32_t members[REAL_MAX_BACKENDS];
    real_tensor srcs[REAL_MAX_BACKENDS];
    int n = 0;
    for (int32_t k = 0; k < g->n_tensors; k++) {
        const sched_tensor *t = &g->tensors[k];
        if (t->op != SCHED_OP_ALL_REDUCE || t->param != group)
            continue;
        if (n == REAL_MAX_BACKENDS)
            return -1;
        int32_t src = base_of(g, t->src[0]);
        if (!r->done[src] || (r->pend[src] & PEND_W))
            return 0;
        members[n] = k;
        srcs[n++] = ref_tensor(r, t->src[0]);
    }
    for (int m = 0; m < n; m++) {
        const sched_tensor *t = &g->tensors[members[m]];
        real_kernel_args a = { .op = t->op, .param = t->param, .ranks = srcs, .n_ranks = n };
        a.dst = ref_tensor(r, members[m]);
        a.src[0] = srcs[m];
        a.n_src = 1;
        a.bf16_wire = r->bf16 && sched_tensor_nelements(&g->tensors[t->src[0]]) >= r->bf16_min;
        if (real_kernel_run(&a, 0, 1) != REAL_OK)
            return -1;
        r->done[members[m]] = true;
    }
    return 1;
}

/*
 * Evaluation order. Nodes run in graph order, except that an all_reduce
 * runs only once every rank of its group has its source, and then all of
 * the group's ranks run at once (in a tensor-split graph rank 0's
 * all_reduce and the nodes after it come before rank 1's part). A node
 * that cannot run yet is deferred, and so is every later node that reads
 * bytes a deferred node writes, or writes bytes a deferred node reads or
 * writes (a cpy into the KV cache); passes repeat until all nodes ran.
 * A graph without all_reduce runs in one pass, in graph order.
 */
int real_ref_eval(real_ref *r, uint64_t eval)
{
    sched_graph *g = r->g;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if ((t->flags & SCHED_FLAG_INPUT) && t->op == SCHED_OP_NONE)
            real_fill_input(g, t, r->data[i], eval, r->seed);
        r->done[i] = t->op == SCHED_OP_NONE || sched_op_is_view(t->op);
    }
    for (int32_t left = g->n_tensors;;) {
        memset(r->pend, 0, (size_t)g->n_tensors * sizeof *r->pend);
        int32_t ran = 0, remaining = 0;
        for (int32_t i = 0; i < g->n_tensors; i++) {
            if (r->done[i])
                continue;
            const sched_tensor *t = &g->tensors[i];
            int32_t wb[2] = { base_of(g, i), -1 };
            if (t->op == SCHED_OP_CPY && t->src[1] >= 0)
                wb[1] = base_of(g, t->src[1]);
            bool ready = true;
            for (int k = 0; k < SCHED_MAX_SRC; k++) {
                if (t->src[k] < 0)
                    continue;
                int32_t b = base_of(g, t->src[k]);
                if (!r->done[b] || (r->pend[b] & PEND_W))
                    ready = false;
            }
            for (int k = 0; k < 2; k++)
                if (wb[k] >= 0 && r->pend[wb[k]])
                    ready = false;
            int rc = 0;
            if (ready && t->op == SCHED_OP_ALL_REDUCE)
                rc = ref_group(r, i);
            else if (ready)
                rc = ref_node(r, i) == 0 ? 1 : -1;
            if (rc < 0)
                return -1;
            if (rc > 0) {
                r->done[i] = true;
                ran++;
                continue;
            }
            remaining++;
            for (int k = 0; k < SCHED_MAX_SRC; k++)
                if (t->src[k] >= 0)
                    r->pend[base_of(g, t->src[k])] |= PEND_R;
            for (int k = 0; k < 2; k++)
                if (wb[k] >= 0)
                    r->pend[wb[k]] |= PEND_W;
        }
        if (remaining == 0)
            break;
        if (ran == 0 || --left < 0)
            return -1;              /* a group that can never complete */
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        free(r->f32[i]);
        r->f32[i] = NULL;
    }
    return 0;
}

const float *real_ref_tensor(const real_ref *r, const char *name, size_t *n)
{
    int32_t i = sched_graph_find(r->g, name);
    if (i < 0)
        return NULL;
    const sched_tensor *t = &r->g->tensors[i];
    int64_t ne = sched_tensor_nelements(t);
    if (!r->f32[i]) {
        r->f32[i] = malloc((size_t)ne * sizeof(float));
        if (!r->f32[i])
            return NULL;
        real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, r->data[i] };
        for (int64_t e = 0; e < ne; e++)
            r->f32[i][e] = real_load_f32(&rt, e);
    }
    if (n)
        *n = (size_t)ne;
    return r->f32[i];
}

void real_compare_outputs(const float *out, const float *ref, size_t n, real_error *e)
{
    for (size_t i = 0; i < n; i++) {
        bool na = isnan(out[i]), nb = isnan(ref[i]);
        e->n++;
        if (na != nb) {
            e->n_nan++;
            continue;
        }
        if (na)
            continue;
        double d = fabs((double)out[i] - (double)ref[i]);
        if (isinf(out[i]) && out[i] == ref[i])
            d = 0;
        if (d > e->max_abs)
            e->max_abs = d;
        if (fabs((double)ref[i]) > e->max_ref && !isinf(ref[i]))
            e->max_ref = fabs((double)ref[i]);
    }
    e->max_rel = e->max_ref > 0 ? e->max_abs / e->max_ref : e->max_abs;
}
