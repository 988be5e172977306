/*
 * ring.c -- nvFuser's host-IR ring pipeline as a trace: a ring all-gather
 * overlapped with a matmul per chunk across R ranks, K streams per rank,
 * N calls (iterations) that reuse the slices and the IPC semaphores, and the
 * CUDA-IPC handle exchange in front of it (`syncsim generate nvfuser-ring`).
 *
 * What it follows (NVIDIA/Fuser: tests/cpp/test_multidevice_host_ir*.cpp,
 * csrc/multidevice/cuda_p2p.cpp, csrc/multidevice/ipc_handle.cpp):
 *
 *  - Each rank is a host process (`rankR`) with K streams on its device
 *    (`rR.sK`); the work of loop index streamIdx = step * C + chunk runs on
 *    stream streamIdx % K. The main stream (s0) records an event each
 *    iteration that the other streams wait for before their work, and waits
 *    for an event of each of them at the end (fork and join, as host IR's
 *    stream synchronisation does).
 *  - Buffer agR holds R slots (slot s: rank s's slice), each C chunks. In
 *    step 0 rank r writes its own slot (its input of this call: the slice is
 *    reused across calls) and multiplies it; in step j = 1..R-1 it gets slot
 *    (r - j) mod R from its left neighbour l by IPC (a copy on r's stream
 *    that reads ag_l) and multiplies that. Matmuls write outR.
 *  - The get protocol (get_zcopy): every (sender, receiver, step, chunk)
 *    has two semaphores, the sender's (`...tx`) and the receiver's
 *    (`...rx`). sendPost: the sender sets both to in-use. recvPost: the
 *    receiver waits for in-use on its own, copies, sets both to ready.
 *    sendWait: before the sender overwrites the slot (next call), it waits
 *    for ready on its own. nvFuser writes kInUse/kReady and waits with EQ;
 *    reused across calls that is a counter that grows by one per write, so
 *    call i writes in-use = 2i+1 and ready = 2i+2 and waits with >= (value
 *    semaphores, docs/trace-format.md, rule 6b).
 *  - The handle exchange, per call: a rank whose handle cache misses puts
 *    its handle into the key-value store (a write of its slot, then the
 *    key's version is published: `signal keyR set=G`), gets the handles it
 *    has not cached (a blocking get: `await keyP >=G`, then a read of P's
 *    slot, then a write of its cache), meets the others at the barrier and
 *    deletes its key (a write of its slot). A rank that hits its cache reads
 *    the cache. Where the barrier is taken is the variant.
 */
#include "sched.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *word, *about;
} variants[] = {
#define SCHED_RING_ROW(name, word, about) { word, about },
    SCHED_RING_VARIANT_MAP(SCHED_RING_ROW)
#undef SCHED_RING_ROW
};

const char *sched_ring_variant_str(sched_ring_variant v)
{
    return (unsigned)v < SCHED_RING_VARIANT_COUNT ? variants[v].word : NULL;
}

const char *sched_ring_variant_about(sched_ring_variant v)
{
    return (unsigned)v < SCHED_RING_VARIANT_COUNT ? variants[v].about : NULL;
}

int sched_ring_variant_parse(const char *word)
{
    for (int v = 0; v < SCHED_RING_VARIANT_COUNT; v++)
        if (strcmp(variants[v].word, word) == 0)
            return v;
    return -1;
}

#define HANDLE_BYTES 64u    /* one IPC handle in the store and in a cache */

typedef struct gen {
    trace *t;
    const sched_ring_opts *o;
    uint32_t *host, *stream;        /* queue index of rank r; of stream (r, k) */
    uint32_t store, *ag, *w, *out, *cache;
    trace_access acc[3];
    bool oom;
} gen;

static uint32_t str(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint32_t str(gen *g, const char *fmt, ...)
{
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    uint32_t id = trace_intern_cstr(g->t, buf);
    if (id == TRACE_NONE)
        g->oom = true;
    return id;
}

static void emit(gen *g, trace_stmt *s)
{
    if (!g->oom && trace_append(g->t, s) != 0)
        g->oom = true;
}

static trace_stmt stmt(gen *g, uint32_t queue, trace_kind kind)
{
    trace_stmt s;
    trace_stmt_init(&s);
    (void)g;
    s.queue = queue;
    s.kind = kind;
    return s;
}

/* A stream statement of rank r. */
static trace_stmt on_stream(gen *g, uint32_t r, uint32_t k, trace_kind kind)
{
    trace_stmt s = stmt(g, g->stream[r * g->o->streams + k], kind);
    s.by = g->host[r];
    return s;
}

static trace_access range(uint32_t buffer, trace_mode mode, uint64_t lo, uint64_t n)
{
    return (trace_access){ .buffer = buffer, .mode = (uint8_t)mode, .form = TRACE_REF_RANGE,
                           .lo = lo, .hi = lo + n };
}

/* Bytes of slot s, chunk c in an ag or out buffer. */
static uint64_t chunk_at(const gen *g, uint32_t s, uint32_t c)
{
    return ((uint64_t)s * g->o->chunks + c) * g->o->chunk_bytes;
}

static void op(gen *g, trace_stmt *s, uint32_t label, const trace_access *a, uint32_t n)
{
    s->kind = TRACE_OP;
    s->label = label;
    s->n_access = n;
    s->access = a;
    emit(g, s);
}

static void sem(gen *g, trace_stmt s, trace_kind kind, uint32_t name, uint64_t value)
{
    s.kind = kind;
    s.object = name;
    s.sem = true;
    s.count = value;
    emit(g, &s);
}

/* The two semaphores of the transfer into rank r at step j, chunk c. */
static uint32_t sem_name(gen *g, uint32_t r, uint32_t j, uint32_t c, bool tx)
{
    uint32_t l = (r + g->o->ranks - 1) % g->o->ranks;
    return str(g, "ipc%u_%u.j%uc%u.%s", l, r, j, c, tx ? "tx" : "rx");
}

/* Call i's handle exchange, every rank. */
static void exchange(gen *g, uint32_t i, uint64_t *version)
{
    const sched_ring_opts *o = g->o;
    uint32_t R = o->ranks;
    bool miss[64 + 1], any_miss = false;
    bool *m = R <= 64 ? miss : calloc(R, sizeof *m);
    if (!m) {
        g->oom = true;
        return;
    }
    for (uint32_t r = 0; r < R; r++) {
        m[r] = i == 0 || (o->variant == SCHED_RING_UNEVEN_HITS && i == 1 && r == 0);
        any_miss |= m[r];
    }
    /* put: the rank's handle into its slot, then its key's new version */
    for (uint32_t r = 0; r < R && any_miss; r++) {
        if (!m[r])
            continue;
        trace_stmt s = stmt(g, g->host[r], TRACE_OP);
        g->acc[0] = range(g->store, TRACE_W, (uint64_t)r * HANDLE_BYTES, HANDLE_BYTES);
        op(g, &s, str(g, "put_handle_%u.i%u", r, i), g->acc, 1);
        sem(g, stmt(g, g->host[r], TRACE_SIGNAL), TRACE_SIGNAL, str(g, "key%u", r), ++version[r]);
    }
    /* get: the neighbours' handles a rank has not cached (on the first
     * call every rank needs its left (source) and right (consumer) ones) */
    for (uint32_t r = 0; r < R && i == 0; r++) {
        uint32_t peers[2] = { (r + R - 1) % R, (r + 1) % R };
        for (uint32_t k = 0; k < (peers[0] == peers[1] ? 1u : 2u); k++) {
            uint32_t p = peers[k];
            sem(g, stmt(g, g->host[r], TRACE_AWAIT), TRACE_AWAIT, str(g, "key%u", p), version[p]);
            trace_stmt s = stmt(g, g->host[r], TRACE_OP);
            g->acc[0] = range(g->store, TRACE_R, (uint64_t)p * HANDLE_BYTES, HANDLE_BYTES);
            g->acc[1] = range(g->cache[r], TRACE_W, (uint64_t)p * HANDLE_BYTES, HANDLE_BYTES);
            op(g, &s, str(g, "get_handle_%u.by%u.i%u", p, r, i), g->acc, 2);
        }
    }
    /* the barrier: every call (correct, early-rearm), on a miss only, or never */
    for (uint32_t r = 0; r < R; r++) {
        bool take = o->variant == SCHED_RING_CORRECT || o->variant == SCHED_RING_EARLY_REARM ||
                    ((o->variant == SCHED_RING_UNIFORM_HITS || o->variant == SCHED_RING_UNEVEN_HITS) &&
                     m[r]);
        if (!take)
            continue;
        trace_stmt s = stmt(g, g->host[r], TRACE_BARRIER);
        s.object = str(g, "ipc_exchange");
        s.count = R;
        emit(g, &s);
    }
    /* delete the key after the exchange (a write of the slot); a hit reads its cache */
    for (uint32_t r = 0; r < R; r++) {
        trace_stmt s = stmt(g, g->host[r], TRACE_OP);
        if (m[r]) {
            g->acc[0] = range(g->store, TRACE_W, (uint64_t)r * HANDLE_BYTES, HANDLE_BYTES);
            op(g, &s, str(g, "delete_key_%u.i%u", r, i), g->acc, 1);
        } else {
            g->acc[0] = range(g->cache[r], TRACE_R, 0, (uint64_t)R * HANDLE_BYTES);
            op(g, &s, str(g, "cache_hit_%u.i%u", r, i), g->acc, 1);
        }
    }
    if (m != miss)
        free(m);
}

/* Call i's ring: steps, chunks, streams. */
static void ring(gen *g, uint32_t i)
{
    const sched_ring_opts *o = g->o;
    uint32_t R = o->ranks, K = o->streams, C = o->chunks;
    uint64_t cb = o->chunk_bytes;
    uint64_t in_use = 2 * (uint64_t)i + 1, ready = 2 * (uint64_t)i + 2;
    bool early = o->variant == SCHED_RING_EARLY_REARM;
    uint32_t used = R * C < K ? R * C : K;     /* streams this call uses */
    /* fork: the workers wait for the main stream */
    for (uint32_t r = 0; r < R; r++) {
        if (used < 2)
            break;
        trace_stmt s = on_stream(g, r, 0, TRACE_RECORD);
        s.object = str(g, "fork_%u.i%u", r, i);
        emit(g, &s);
        for (uint32_t k = 1; k < used; k++) {
            trace_stmt w = on_stream(g, r, k, TRACE_WAIT);
            w.object = s.object;
            emit(g, &w);
        }
    }
    for (uint32_t j = 0; j < R; j++) {
        for (uint32_t r = 0; r < R; r++) {
            uint32_t l = (r + R - 1) % R, slot = (r + R - j) % R, right = (r + 1) % R;
            for (uint32_t c = 0; c < C; c++) {
                uint32_t k = (j * C + c) % K;
                uint64_t at = chunk_at(g, slot, c);
                /* sendWait: the slot is about to be overwritten; the right
                 * neighbour read it (step j + 1) in the previous call */
                if (i > 0 && j + 1 < R)
                    sem(g, on_stream(g, r, k, TRACE_AWAIT), TRACE_AWAIT,
                        sem_name(g, right, j + 1, c, true), 2 * (uint64_t)i);
                if (j == 0) {
                    trace_stmt s = on_stream(g, r, k, TRACE_OP);
                    g->acc[0] = range(g->ag[r], TRACE_W, at, cb);
                    op(g, &s, str(g, "input_%u.i%u.c%u", r, i, c), g->acc, 1);
                } else {
                    uint32_t rx = sem_name(g, r, j, c, false), tx = sem_name(g, r, j, c, true);
                    /* recvPost: wait for in-use, copy, set ready on both sides */
                    sem(g, on_stream(g, r, k, TRACE_AWAIT), TRACE_AWAIT, rx, in_use);
                    if (early) {
                        sem(g, on_stream(g, r, k, TRACE_SIGNAL), TRACE_SIGNAL, rx, ready);
                        sem(g, on_stream(g, r, k, TRACE_SIGNAL), TRACE_SIGNAL, tx, ready);
                    }
                    trace_stmt s = on_stream(g, r, k, TRACE_COPY);
                    g->acc[0] = range(g->ag[l], TRACE_R, at, cb);
                    g->acc[1] = range(g->ag[r], TRACE_W, at, cb);
                    s.label = str(g, "get_%u.from%u.i%u.j%u.c%u", r, l, i, j, c);
                    s.n_access = 2;
                    s.access = g->acc;
                    emit(g, &s);
                    if (!early) {
                        sem(g, on_stream(g, r, k, TRACE_SIGNAL), TRACE_SIGNAL, rx, ready);
                        sem(g, on_stream(g, r, k, TRACE_SIGNAL), TRACE_SIGNAL, tx, ready);
                    }
                }
                /* sendPost: the slot is here; the right neighbour may get it */
                if (j + 1 < R) {
                    sem(g, on_stream(g, r, k, TRACE_SIGNAL), TRACE_SIGNAL,
                        sem_name(g, right, j + 1, c, true), in_use);
                    sem(g, on_stream(g, r, k, TRACE_SIGNAL), TRACE_SIGNAL,
                        sem_name(g, right, j + 1, c, false), in_use);
                }
                trace_stmt s = on_stream(g, r, k, TRACE_OP);
                g->acc[0] = range(g->ag[r], TRACE_R, at, cb);
                g->acc[1] = range(g->w[r], TRACE_R, (uint64_t)c * cb, cb);
                g->acc[2] = range(g->out[r], TRACE_W, at, cb);
                op(g, &s, str(g, "matmul_%u.i%u.j%u.c%u", r, i, j, c), g->acc, 3);
            }
        }
    }
    /* join: the main stream waits for the workers */
    for (uint32_t r = 0; r < R; r++) {
        for (uint32_t k = 1; k < used; k++) {
            trace_stmt s = on_stream(g, r, k, TRACE_RECORD);
            s.object = str(g, "join_%u.i%u.s%u", r, i, k);
            emit(g, &s);
            trace_stmt w = on_stream(g, r, 0, TRACE_WAIT);
            w.object = s.object;
            emit(g, &w);
        }
    }
}

static uint32_t add_buffer(gen *g, const char *name, uint64_t size, trace_loc loc, uint32_t dev)
{
    uint32_t b = trace_add_root_buffer(g->t, trace_intern_cstr(g->t, name), size, loc,
                                       dev, false);
    if (b == TRACE_NONE)
        g->oom = true;
    return b;
}

int sched_ring_generate(const sched_ring_opts *o, trace **out, trace_error *err)
{
    *out = NULL;
    if (o->ranks < 2 || o->ranks > 1024)
        return trace_error_set(err, TRACE_EUSAGE, "--ranks must be 2 to 1024, not %u", o->ranks), -1;
    if (o->streams < 1 || o->streams > 256)
        return trace_error_set(err, TRACE_EUSAGE, "--streams must be 1 to 256, not %u", o->streams), -1;
    if (o->iters < 1 || o->iters > 100000)
        return trace_error_set(err, TRACE_EUSAGE, "--iters must be 1 to 100000, not %u", o->iters), -1;
    if (o->chunks < 1 || o->chunks > 1024)
        return trace_error_set(err, TRACE_EUSAGE, "--chunks must be 1 to 1024, not %u", o->chunks), -1;
    if (o->chunk_bytes < 1 || o->chunk_bytes > (1ull << 40))
        return trace_error_set(err, TRACE_EUSAGE, "the chunk size must be 1 byte to 1 TiB"), -1;
    if ((unsigned)o->variant >= SCHED_RING_VARIANT_COUNT)
        return trace_error_set(err, TRACE_EUSAGE, "unknown variant"), -1;
    if ((o->variant == SCHED_RING_UNEVEN_HITS || o->variant == SCHED_RING_EARLY_REARM) && o->iters < 2)
        return trace_error_set(err, TRACE_EUSAGE,
                               "--variant %s shows on the second call: give --iters 2 or more",
                               sched_ring_variant_str(o->variant)), -1;
    uint32_t R = o->ranks, K = o->streams;
    gen g = { .o = o };
    g.t = trace_new();
    g.host = calloc(R, sizeof *g.host);
    g.stream = calloc((size_t)R * K, sizeof *g.stream);
    g.ag = calloc(R, sizeof *g.ag);
    g.w = calloc(R, sizeof *g.w);
    g.out = calloc(R, sizeof *g.out);
    g.cache = calloc(R, sizeof *g.cache);
    uint64_t *version = calloc(R, sizeof *version);
    if (!g.t || !g.host || !g.stream || !g.ag || !g.w || !g.out || !g.cache || !version)
        g.oom = true;
    char name[64], dev[16];
    for (uint32_t r = 0; r < R && !g.oom; r++) {
        snprintf(name, sizeof name, "rank%u", r);
        if ((g.host[r] = trace_add_queue(g.t, trace_intern_cstr(g.t, name), TRACE_QUEUE_HOST,
                                         TRACE_NONE)) == TRACE_NONE)
            g.oom = true;
    }
    uint64_t slice = (uint64_t)o->chunks * o->chunk_bytes;
    for (uint32_t r = 0; r < R && !g.oom; r++) {
        snprintf(dev, sizeof dev, "%u", r);
        uint32_t d = trace_intern_cstr(g.t, dev);
        for (uint32_t k = 0; k < K && !g.oom; k++) {
            snprintf(name, sizeof name, "r%u.s%u", r, k);
            if ((g.stream[r * K + k] = trace_add_queue(g.t, trace_intern_cstr(g.t, name),
                                                       TRACE_QUEUE_STREAM, d)) == TRACE_NONE)
                g.oom = true;
        }
        snprintf(name, sizeof name, "ag%u", r);
        g.ag[r] = add_buffer(&g, name, slice * R, TRACE_LOC_DEVICE, d);
        snprintf(name, sizeof name, "w%u", r);
        g.w[r] = add_buffer(&g, name, slice, TRACE_LOC_DEVICE, d);
        snprintf(name, sizeof name, "out%u", r);
        g.out[r] = add_buffer(&g, name, slice * R, TRACE_LOC_DEVICE, d);
        snprintf(name, sizeof name, "handle_cache%u", r);
        g.cache[r] = add_buffer(&g, name, (uint64_t)R * HANDLE_BYTES, TRACE_LOC_HOST, TRACE_NONE);
    }
    if (!g.oom)
        g.store = add_buffer(&g, "kv_store", (uint64_t)R * HANDLE_BYTES, TRACE_LOC_HOST, TRACE_NONE);
    for (uint32_t i = 0; i < o->iters && !g.oom; i++) {
        exchange(&g, i, version);
        ring(&g, i);
    }
    for (uint32_t r = 0; r < R && !g.oom; r++) {
        trace_stmt s = stmt(&g, g.host[r], TRACE_SYNC);
        s.sync_scope = TRACE_SYNC_DEVICE;
        snprintf(dev, sizeof dev, "%u", r);
        s.object = trace_intern_cstr(g.t, dev);
        emit(&g, &s);
    }
    if (!g.oom) {
        char v[32];
        snprintf(v, sizeof v, "%u", R);
        int rc = trace_set_meta(g.t, "generator", "nvfuser-ring");
        rc |= trace_set_meta(g.t, "variant", sched_ring_variant_str(o->variant));
        rc |= trace_set_meta(g.t, "ranks", v);
        snprintf(v, sizeof v, "%u", K);
        rc |= trace_set_meta(g.t, "streams", v);
        snprintf(v, sizeof v, "%u", o->iters);
        rc |= trace_set_meta(g.t, "iters", v);
        snprintf(v, sizeof v, "%u", o->chunks);
        rc |= trace_set_meta(g.t, "chunks", v);
        if (rc)
            g.oom = true;
    }
    free(g.host);
    free(g.stream);
    free(g.ag);
    free(g.w);
    free(g.out);
    free(g.cache);
    free(version);
    if (g.oom) {
        trace_free(g.t);
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    }
    *out = g.t;
    return 0;
}
