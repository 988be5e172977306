/*
 * bench_check.c -- the checker's speed and memory.
 *
 *   bench_check [--stmts N] [--db-stmts M] [--db PATH] [--min-stmts K] [--shape capture]
 *               [--capture-shape NAME] [--min-shape sync-heavy [--write PATH]]
 *
 * 1. In memory: a synthetic trace of N statements (default 10 M; 8 streams,
 *    2 host threads, 4096 buffers) generated on the fly by a custom
 *    trace_reader, so the trace itself takes no memory; checked as it is
 *    generated. Prints statements/s and the peak RSS after 1 M and after N
 *    statements (it must not grow with the length). With --shape capture,
 *    the capture shape of shapes.h instead (8 streams on 4 devices, 2 hosts,
 *    a distinct label on every statement, `sync all` every 8 iterations),
 *    varied by --capture-shape NAME (shapes.h: whole, labels, arenas, tokens,
 *    ragged, scatter, worst; default whole). It also prints the CPU time
 *    of the N-statement check and, apart, the generator's share of it (it
 *    interns a label per statement): the rest is the checker's own.
 * 2. From SQLite: M statements (default 2 M) of the same trace written
 *    through the recorder, then checked end to end (open, stream, check).
 * 3. The minimiser on a K-statement trace (default 100 k) with about K/20
 *    syncs (--min-shape kind), or on the shape of issue 15 (--min-shape
 *    sync-heavy): 3 hosts and 6 streams, about 30 % of the statements
 *    syncs (events, duplicate waits, host syncs, flags between hosts,
 *    barriers), and a fresh event and flag name every iteration, as in
 *    captured traces. Run it alone (--stmts 0 --db-stmts 0) for its peak RSS.
 *    With --write PATH, writes that trace as text to PATH instead (for
 *    timing `syncsim minimize PATH` end to end). It prints a digest of the
 *    removed set, to compare minimisers by, and wall and CPU time.
 * Every figure is measured by this run; nothing is hard-coded.
 */
#include "check/check.h"
#include "traces/trace.h"
#include "shapes.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define N_HOSTS 2
#define N_STREAMS 8
#define N_BUFFERS 4096
#define SLOTS 512   /* per host: SLOTS input buffers + 3 * SLOTS device buffers */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of this process (user + system), seconds. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* ------------------------------------------------------------------ */
/* The generator: two hosts, each driving four streams.                 */

/*
 * Iteration i of host h (slot = i % SLOTS, streams a = 4h + i%4 and
 * b = 4h + (i+1)%4):
 *   h  op    prep      w:in[slot]
 *   a  copy  upload    in[slot] -> d0[slot]
 *   a  op    layer_a   r:d0[slot] w:d1[slot]
 *   a  record e_a
 *   b  wait   e_a
 *   b  op    layer_b   r:d1[slot] w:d2[slot]
 * and every 8 iterations `h sync all`. Slots are reused after SLOTS
 * iterations, long after a sync: the trace is clean.
 */
typedef struct gen {
    trace *t;
    uint64_t n, emitted;
    uint64_t iter[N_HOSTS];
    int step[N_HOSTS];
    int host;               /* whose turn */
    uint32_t q_host[N_HOSTS], q_stream[N_STREAMS];
    uint32_t buf_in[N_HOSTS][SLOTS], buf_d[N_HOSTS][3][SLOTS];
    uint32_t ev[N_STREAMS];
    uint32_t l_prep, l_upload, l_a, l_b;
    trace_access acc[2];
    bool with_events;       /* false: the minimiser's variant (see below) */
} gen;

static void gen_init(gen *g, trace *t, uint64_t n, bool with_events)
{
    memset(g, 0, sizeof *g);
    g->t = t;
    g->n = n;
    g->with_events = with_events;
    char name[64];
    for (int h = 0; h < N_HOSTS; h++) {
        snprintf(name, sizeof name, "host%d", h);
        g->q_host[h] = trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_HOST, TRACE_NONE);
    }
    for (int s = 0; s < N_STREAMS; s++) {
        snprintf(name, sizeof name, "s%d", s);
        snprintf(name + 32, 32, "%d", s / 4);
        g->q_stream[s] = trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_STREAM,
                                         trace_intern_cstr(t, name + 32));
        snprintf(name, sizeof name, "e%d", s);
        g->ev[s] = trace_intern_cstr(t, name);
    }
    for (int h = 0; h < N_HOSTS; h++)
        for (int k = 0; k < SLOTS; k++) {
            snprintf(name, sizeof name, "in%d_%d", h, k);
            g->buf_in[h][k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 4096,
                                                    TRACE_LOC_HOST, TRACE_NONE, true);
            for (int d = 0; d < 3; d++) {
                snprintf(name, sizeof name, "d%d_%d_%d", d, h, k);
                g->buf_d[h][d][k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 1 << 20,
                                                          TRACE_LOC_DEVICE,
                                                          trace_intern_cstr(t, h ? "1" : "0"), false);
            }
        }
    g->l_prep = trace_intern_cstr(t, "prep");
    g->l_upload = trace_intern_cstr(t, "upload");
    g->l_a = trace_intern_cstr(t, "layer_a");
    g->l_b = trace_intern_cstr(t, "layer_b");
}

static void acc1(gen *g, trace_stmt *s, uint32_t b, uint8_t mode)
{
    g->acc[s->n_access] = (trace_access){ .buffer = b, .mode = mode, .form = TRACE_REF_WHOLE,
                                          .lo = 0, .hi = g->t->buffers[b].size };
    s->n_access++;
    s->access = g->acc;
}

/* Fills *s with the next statement; false at the end. */
static bool gen_next(gen *g, trace_stmt *s)
{
    if (g->emitted >= g->n)
        return false;
    int h = g->host;
    uint64_t i = g->iter[h];
    uint32_t slot = (uint32_t)(i % SLOTS);
    uint32_t a = g->q_stream[4 * h + i % 4], b = g->q_stream[4 * h + (i + 1) % 4];
    trace_stmt_init(s);
    s->seq = g->emitted++;
    s->by = g->q_host[h];
    int step = g->step[h]++;
    bool end = false;
    if (g->with_events) {
        switch (step) {
        case 0:
            s->queue = g->q_host[h], s->kind = TRACE_OP, s->label = g->l_prep;
            s->by = TRACE_NONE;
            acc1(g, s, g->buf_in[h][slot], TRACE_W);
            break;
        case 1:
            s->queue = a, s->kind = TRACE_COPY, s->label = g->l_upload;
            acc1(g, s, g->buf_in[h][slot], TRACE_R);
            acc1(g, s, g->buf_d[h][0][slot], TRACE_W);
            /* copy sizes must match: read the first 4096 bytes */
            g->acc[1].hi = 4096, g->acc[1].form = TRACE_REF_RANGE;
            break;
        case 2:
            s->queue = a, s->kind = TRACE_OP, s->label = g->l_a;
            acc1(g, s, g->buf_d[h][0][slot], TRACE_R);
            acc1(g, s, g->buf_d[h][1][slot], TRACE_W);
            break;
        case 3:
            s->queue = a, s->kind = TRACE_RECORD, s->object = g->ev[a - g->q_stream[0]];
            break;
        case 4:
            s->queue = b, s->kind = TRACE_WAIT, s->object = g->ev[a - g->q_stream[0]];
            break;
        case 5:
            s->queue = b, s->kind = TRACE_OP, s->label = g->l_b;
            acc1(g, s, g->buf_d[h][1][slot], TRACE_R);
            acc1(g, s, g->buf_d[h][2][slot], TRACE_W);
            end = i % 8 != 7;
            break;
        default:
            s->queue = g->q_host[h], s->kind = TRACE_SYNC, s->sync_scope = TRACE_SYNC_ALL;
            s->by = TRACE_NONE;
            end = true;
        }
    } else {
        /*
         * The minimiser's variant: one stream per iteration, no events,
         *   h prep w:in; a upload in->d0; a layer_a d0->d1; a layer_b d1->d2;
         *   a copy d2 -> in (download)
         * every 8 iterations a redundant `h sync a` before the upload and
         * the needed `h sync all` + `h op` reading the downloads: about one
         * sync per 20 statements.
         */
        switch (step) {
        case 0:
            if (i % 8 == 3) {
                s->queue = g->q_host[h], s->kind = TRACE_SYNC, s->sync_scope = TRACE_SYNC_QUEUE;
                s->object = a, s->by = TRACE_NONE;
                break;
            }
            g->step[h]++;
            step++;
            /* fall through */
        case 1:
            s->queue = g->q_host[h], s->kind = TRACE_OP, s->label = g->l_prep, s->by = TRACE_NONE;
            acc1(g, s, g->buf_in[h][slot], TRACE_W);
            break;
        case 2:
            s->queue = a, s->kind = TRACE_COPY, s->label = g->l_upload;
            acc1(g, s, g->buf_in[h][slot], TRACE_R);
            acc1(g, s, g->buf_d[h][0][slot], TRACE_W);
            g->acc[1].hi = 4096, g->acc[1].form = TRACE_REF_RANGE;
            break;
        case 3:
            s->queue = a, s->kind = TRACE_OP, s->label = g->l_a;
            acc1(g, s, g->buf_d[h][0][slot], TRACE_R);
            acc1(g, s, g->buf_d[h][1][slot], TRACE_W);
            break;
        case 4:
            s->queue = a, s->kind = TRACE_OP, s->label = g->l_b;
            acc1(g, s, g->buf_d[h][1][slot], TRACE_R);
            acc1(g, s, g->buf_d[h][2][slot], TRACE_W);
            break;
        case 5:
            s->queue = a, s->kind = TRACE_COPY, s->label = g->l_upload;
            acc1(g, s, g->buf_d[h][2][slot], TRACE_R);
            g->acc[0].hi = 4096, g->acc[0].form = TRACE_REF_RANGE;
            acc1(g, s, g->buf_in[h][slot], TRACE_W);
            end = i % 8 != 7;
            break;
        case 6:
            s->queue = g->q_host[h], s->kind = TRACE_SYNC, s->sync_scope = TRACE_SYNC_ALL;
            s->by = TRACE_NONE;
            break;
        default:
            s->queue = g->q_host[h], s->kind = TRACE_OP, s->label = g->l_prep, s->by = TRACE_NONE;
            acc1(g, s, g->buf_in[h][slot], TRACE_R);
            end = true;
        }
    }
    if (end) {
        g->step[h] = 0;
        g->iter[h]++;
        g->host = (g->host + 1) % N_HOSTS;
    }
    return true;
}

typedef struct gen_reader {
    gen g;
} gen_reader;

static int gen_reader_next(void *ctx, trace_stmt *out, trace_error *err)
{
    (void)err;
    gen_reader *r = ctx;
    return gen_next(&r->g, out) ? 1 : 0;
}

static void gen_reader_close(void *ctx)
{
    free(ctx);
}

static const trace_reader_iface gen_iface = { gen_reader_next, gen_reader_close };

static void open_gen_reader(trace_reader *r, uint64_t n)
{
    memset(r, 0, sizeof *r);
    gen_reader *g = calloc(1, sizeof *g);
    r->trace = trace_new();
    r->owns_trace = true;
    r->iface = &gen_iface;
    r->ctx = g;
    gen_init(&g->g, r->trace, n, true);
}

/* ------------------------------------------------------------------ */

static bool capture_shaped;
static capture_shape capture_variant;       /* --capture-shape; whole by default */

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * A reader that generates its inner reader's statements BATCH at a time
 * and times that, so that the generator's CPU (it interns a fresh label per
 * statement, as an importer does) can be told from the checker's. Handing
 * out a batched statement is a copy; it counts as the checker's.
 */
#define BATCH 256
typedef struct batch_reader {
    trace_reader inner;
    trace_stmt s[BATCH];
    trace_access acc[BATCH][2];
    uint32_t n, next;
    bool end;
    double gen_cpu;             /* seconds spent generating */
} batch_reader;

static int batch_next(void *ctx, trace_stmt *out, trace_error *err)
{
    batch_reader *b = ctx;
    if (b->next == b->n) {
        if (b->end)
            return 0;
        double c0 = cpu_now();
        b->n = b->next = 0;
        int rc;
        while (b->n < BATCH && (rc = trace_reader_next(&b->inner, &b->s[b->n], err)) == 1) {
            trace_stmt *x = &b->s[b->n];
            if (x->n_access > 2)
                return -1;      /* neither generator makes more */
            memcpy(b->acc[b->n], x->access, x->n_access * sizeof *x->access);
            x->access = b->acc[b->n];
            b->n++;
        }
        b->end = b->n < BATCH;
        b->gen_cpu += cpu_now() - c0;
        if (rc < 0)
            return -1;
        if (b->n == 0)
            return 0;
    }
    *out = b->s[b->next++];
    return 1;
}

static void batch_close(void *ctx)
{
    batch_reader *b = ctx;
    trace_reader_close(&b->inner);
    free(b);
}

/* Wraps *r (taken over) in a batch_reader; its trace stays r's. */
static batch_reader *batch_wrap(trace_reader *r)
{
    static const trace_reader_iface iface = { batch_next, batch_close, NULL };
    batch_reader *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->inner = *r;
    memset(r, 0, sizeof *r);
    r->trace = b->inner.trace;
    r->iface = &iface;
    r->ctx = b;
    return b;
}

static int check_in_memory(uint64_t n, double *rate, double *cpu, double *gen_cpu, long *rss,
                           size_t *findings)
{
    trace_reader r;
    if (!capture_shaped)
        open_gen_reader(&r, n);
    else if (capture_open_shape(&r, n, &capture_variant) != 0) {
        fprintf(stderr, "bench_check: out of memory\n");
        return -1;
    }
    batch_reader *b = batch_wrap(&r);
    if (!b) {
        trace_reader_close(&r);
        fprintf(stderr, "bench_check: out of memory\n");
        return -1;
    }
    check_options opt = { .max_findings = 1000 };
    check_report *rep;
    trace_error err;
    double t0 = now(), c0 = cpu_now();
    if (check_trace(&r, &opt, &rep, &err) != 0) {
        fprintf(stderr, "bench_check: %s\n", err.msg);
        return -1;
    }
    double dt = now() - t0;
    *cpu = cpu_now() - c0;
    *gen_cpu = b->gen_cpu;
    *rate = (double)n / dt;
    *rss = peak_rss_kb();
    *findings = check_report_count(rep);
    check_report_free(rep);
    trace_reader_close(&r);
    return 0;
}

static int check_from_db(const char *path, uint64_t n)
{
    unlink(path);
    trace_error err;
    trace_recorder_opts ro = { .run_name = "bench_check", .source = "bench" };
    trace_recorder *rec = trace_recorder_open(path, &ro, &err);
    if (!rec) {
        fprintf(stderr, "bench_check: %s\n", err.msg);
        return -1;
    }
    /* declare through the recorder, generating with a scratch trace whose
     * ids match (same declaration order) */
    trace *scratch = trace_new();
    gen g;
    gen_init(&g, scratch, n, true);
    for (uint32_t q = 0; q < scratch->n_queues; q++)
        trace_recorder_queue(rec, trace_str(scratch, scratch->queues[q].name), scratch->queues[q].kind,
                             scratch->queues[q].device == TRACE_NONE
                                 ? NULL
                                 : trace_str(scratch, scratch->queues[q].device));
    for (uint32_t b = 0; b < scratch->n_buffers; b++) {
        const trace_buffer *x = &scratch->buffers[b];
        trace_recorder_buffer(rec, trace_str(scratch, x->name), x->size, x->loc,
                              x->device == TRACE_NONE ? NULL : trace_str(scratch, x->device),
                              x->pinned);
    }
    /* statement strings: intern through the recorder and map ids */
    uint32_t *map = malloc(scratch->n_strs * sizeof *map);
    for (uint32_t i = 0; i < scratch->n_strs; i++)
        map[i] = trace_recorder_intern(rec, scratch->strs[i]);
    double t0 = now();
    trace_stmt s;
    while (gen_next(&g, &s)) {
        if (s.label != TRACE_NONE)
            s.label = map[s.label];
        if (s.kind == TRACE_RECORD || s.kind == TRACE_WAIT)
            s.object = map[s.object];
        trace_recorder_append(rec, &s);
    }
    if (trace_recorder_close(rec, &err) != 0) {
        fprintf(stderr, "bench_check: %s\n", err.msg);
        return -1;
    }
    double t_rec = now() - t0;
    free(map);
    trace_free(scratch);

    t0 = now();
    trace_reader r;
    if (trace_open_any(path, 0, &r, &err) != 0) {
        fprintf(stderr, "bench_check: %s\n", err.msg);
        return -1;
    }
    check_options opt = { .max_findings = 1000 };
    check_report *rep;
    if (check_trace(&r, &opt, &rep, &err) != 0) {
        fprintf(stderr, "bench_check: %s\n", err.msg);
        return -1;
    }
    double dt = now() - t0;
    printf("from SQLite:  %llu statements written through the recorder in %.2f s; checked end to "
           "end (open, read, check) in %.2f s = %.2f M statements/s, %zu findings\n",
           (unsigned long long)n, t_rec, dt, (double)n / dt / 1e6, check_report_count(rep));
    check_report_free(rep);
    trace_reader_close(&r);
    unlink(path);
    return 0;
}

static int minimise(uint64_t n)
{
    trace *t = trace_new();
    gen g;
    gen_init(&g, t, n, false);
    trace_stmt s;
    uint64_t syncs = 0;
    while (gen_next(&g, &s)) {
        syncs += s.kind == TRACE_SYNC || s.kind == TRACE_WAIT;
        trace_append(t, &s);
    }
    check_min_result res;
    trace_error err;
    double t0 = now();
    if (check_minimize(t, NULL, &res, &err) != 0) {
        fprintf(stderr, "bench_check: %s\n", err.msg);
        return -1;
    }
    double dt = now() - t0;
    printf("minimiser:    %llu statements, %llu syncs (%zu candidates): %zu removed in %.2f s "
           "(%llu statements re-checked, %.1f per candidate)\n",
           (unsigned long long)n, (unsigned long long)syncs, res.n_candidates, res.n_removed, dt,
           (unsigned long long)res.replayed,
           res.n_candidates ? (double)res.replayed / (double)res.n_candidates : 0.0);
    check_min_result_free(&res);
    trace_free(t);
    return 0;
}

/* The sync-heavy shape: iteration i of host h (slot = (i / 3) % 256, streams
 * a = (2h + i) % 6 and b = a + 1):
 *   h prep w:in[slot]; a upload in -> d0; a layer_a d0 -> d1; a record e_i;
 *   b wait e_i (and, half the time, again); b layer_b d1 -> d2;
 *   40 %: h sync a; 30 %: h signal f_j, h+1 await f_j;
 *   every 8th: h sync all; every 24th: the three hosts at a barrier.
 * Clean by construction; seeded, so every run is the same trace. */
static trace *sync_heavy(uint64_t n, uint64_t *syncs)
{
    enum { H = 3, S = 6, SL = 256 };
    trace *t = trace_new();
    char name[64];
    uint32_t qh[H], qs[S], in[H][SL], d[H][3][SL];
    for (int h = 0; h < H; h++) {
        snprintf(name, sizeof name, "h%d", h);
        qh[h] = trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_HOST, TRACE_NONE);
    }
    for (int q = 0; q < S; q++) {
        char dev[8];
        snprintf(name, sizeof name, "s%d", q);
        snprintf(dev, sizeof dev, "%d", q / 2);
        qs[q] = trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_STREAM,
                                trace_intern_cstr(t, dev));
    }
    for (int h = 0; h < H; h++)
        for (int k = 0; k < SL; k++) {
            snprintf(name, sizeof name, "in%d_%d", h, k);
            in[h][k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 4096, TRACE_LOC_HOST,
                                             TRACE_NONE, true);
            for (int x = 0; x < 3; x++) {
                snprintf(name, sizeof name, "d%d_%d_%d", x, h, k);
                d[h][x][k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 4096,
                                                   TRACE_LOC_DEVICE, trace_intern_cstr(t, "0"),
                                                   false);
            }
        }
    uint32_t l_prep = trace_intern_cstr(t, "prep"), l_up = trace_intern_cstr(t, "upload");
    uint32_t l_a = trace_intern_cstr(t, "layer_a"), l_b = trace_intern_cstr(t, "layer_b");
    uint32_t bar = trace_intern_cstr(t, "hb");
    uint64_t rng = 0x15a11dULL, ev = 0, fl = 0;
    *syncs = 0;
    trace_access acc[2];
    trace_stmt s;
#define RND(k) (rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17, rng % (k))
#define ACC(i, b, m) (acc[i] = (trace_access){ .buffer = (b), .mode = (m), .lo = 0, .hi = 4096 })
#define EMIT(q, k, by_)                                                                    \
    do {                                                                                   \
        s.queue = (q), s.kind = (k), s.by = (by_);                                         \
        *syncs += (k) == TRACE_WAIT || (k) == TRACE_SYNC || (k) == TRACE_AWAIT ||          \
                  (k) == TRACE_BARRIER;                                                    \
        trace_append(t, &s);                                                               \
        trace_stmt_init(&s);                                                               \
    } while (0)
    trace_stmt_init(&s);
    for (uint64_t i = 0; t->n_stmts < n; i++) {
        int h = (int)(i % H), slot = (int)((i / H) % SL), a = (int)((2 * h + i) % S),
            b = (a + 1) % S;
        snprintf(name, sizeof name, "e%llu", (unsigned long long)ev++);
        uint32_t e = trace_intern_cstr(t, name);
        s.label = l_prep, s.n_access = 1, s.access = acc, ACC(0, in[h][slot], TRACE_W);
        EMIT(qh[h], TRACE_OP, TRACE_NONE);
        s.label = l_up, s.n_access = 2, s.access = acc, ACC(0, in[h][slot], TRACE_R);
        ACC(1, d[h][0][slot], TRACE_W);
        EMIT(qs[a], TRACE_COPY, qh[h]);
        s.label = l_a, s.n_access = 2, s.access = acc, ACC(0, d[h][0][slot], TRACE_R);
        ACC(1, d[h][1][slot], TRACE_W);
        EMIT(qs[a], TRACE_OP, qh[h]);
        s.object = e;
        EMIT(qs[a], TRACE_RECORD, qh[h]);
        s.object = e;
        EMIT(qs[b], TRACE_WAIT, qh[h]);
        if (RND(2)) {
            s.object = e;
            EMIT(qs[b], TRACE_WAIT, qh[h]);
        }
        s.label = l_b, s.n_access = 2, s.access = acc, ACC(0, d[h][1][slot], TRACE_R);
        ACC(1, d[h][2][slot], TRACE_W);
        EMIT(qs[b], TRACE_OP, qh[h]);
        if (RND(10) < 4) {
            s.sync_scope = TRACE_SYNC_QUEUE, s.object = qs[a];
            EMIT(qh[h], TRACE_SYNC, TRACE_NONE);
        }
        if (RND(10) < 3) {
            snprintf(name, sizeof name, "f%llu", (unsigned long long)fl++);
            uint32_t f = trace_intern_cstr(t, name);
            s.object = f;
            EMIT(qh[h], TRACE_SIGNAL, TRACE_NONE);
            s.object = f;
            EMIT(qh[(h + 1) % H], TRACE_AWAIT, TRACE_NONE);
        }
        if (i % 8 == 7) {
            s.sync_scope = TRACE_SYNC_ALL;
            EMIT(qh[h], TRACE_SYNC, TRACE_NONE);
        }
        if (i % (8 * H) == 8 * H - 1)
            for (int x = 0; x < H; x++) {
                s.object = bar, s.count = H;
                EMIT(qh[x], TRACE_BARRIER, TRACE_NONE);
            }
    }
    for (int h = 0; h < H; h++) {
        s.sync_scope = TRACE_SYNC_ALL;
        EMIT(qh[h], TRACE_SYNC, TRACE_NONE);
    }
#undef EMIT
#undef ACC
#undef RND
    return t;
}

/* Writes t as a text trace to path (for `syncsim minimize PATH`). */
static int write_text(const trace *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    trace_reader r;
    trace_error err;
    trace_reader_memory(&r, (trace *)t);
    int rc = trace_text_write(f, &r, &err);
    trace_reader_close(&r);
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "bench_check: %s: %s\n", path, rc ? err.msg : "write failed");
        return -1;
    }
    return 0;
}

static int minimise_sync_heavy(uint64_t n, const char *write)
{
    uint64_t syncs;
    trace *t = sync_heavy(n, &syncs);
    if (write) {
        int rc = write_text(t, write);
        if (rc == 0)
            printf("wrote the sync-heavy shape, %llu statements, to %s\n",
                   (unsigned long long)t->n_stmts, write);
        trace_free(t);
        return rc;
    }
    long rss0 = peak_rss_kb();
    check_min_result res;
    trace_error err;
    double t0 = now(), c0 = cpu_s();
    if (check_minimize(t, NULL, &res, &err) != 0) {
        fprintf(stderr, "bench_check: %s\n", err.msg);
        return -1;
    }
    double dt = now() - t0, cpu = cpu_s() - c0;
    /* a digest of the removed set, to compare minimisers by */
    uint64_t digest = 1469598103934665603ULL;
    for (size_t i = 0; i < res.n_removed; i++)
        digest = (digest ^ res.removed[i].seq) * 1099511628211ULL;
    printf("minimiser:    sync-heavy shape, %llu statements, %llu syncs (%zu candidates, %zu "
           "findings before): %zu removed (digest %016llx) in %.2f s wall, %.2f s CPU (%llu "
           "statements re-checked); peak RSS %ld KiB (%ld KiB with the trace loaded, before "
           "minimising)\n",
           (unsigned long long)t->n_stmts, (unsigned long long)syncs, res.n_candidates,
           res.n_findings, res.n_removed, (unsigned long long)digest, dt, cpu,
           (unsigned long long)res.replayed, peak_rss_kb(), rss0);
    check_min_result_free(&res);
    trace_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t n = 10000000, n_db = 2000000, n_min = 100000;
    const char *db = "/tmp/bench_check.db", *write = NULL;
    bool sync_heavy_shape = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--stmts") == 0)
            n = strtoull(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--db-stmts") == 0)
            n_db = strtoull(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--db") == 0)
            db = argv[i + 1];
        else if (strcmp(argv[i], "--min-stmts") == 0)
            n_min = strtoull(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--min-shape") == 0)
            sync_heavy_shape = strcmp(argv[i + 1], "sync-heavy") == 0;
        else if (strcmp(argv[i], "--shape") == 0)
            capture_shaped = strcmp(argv[i + 1], "capture") == 0;
        else if (strcmp(argv[i], "--capture-shape") == 0 &&
                 capture_shape_parse(argv[i + 1], &capture_variant) != 0) {
            fprintf(stderr, "bench_check: unknown capture shape '%s' (whole, labels, arenas, "
                            "tokens, ragged, scatter, worst)\n", argv[i + 1]);
            return 2;
        } else if (strcmp(argv[i], "--write") == 0)
            write = argv[i + 1];
    }
    double r1, rn, c1, cn, g1, gn;
    long rss1, rssn;
    size_t f1, fn;
    if (n == 0) {               /* the minimiser alone */
        if (sync_heavy_shape)
            return n_min && minimise_sync_heavy(n_min, write) != 0;
        return n_min && minimise(n_min) != 0;
    }
    if (check_in_memory(n < 1000000 ? n : 1000000, &r1, &c1, &g1, &rss1, &f1) != 0 ||
        check_in_memory(n, &rn, &cn, &gn, &rssn, &fn) != 0)
        return 1;
    printf("in memory:    %s%d streams, %d hosts, %d buffers; 1 M statements: %.2f M statements/s, "
           "peak RSS %ld KiB; %llu statements: %.2f M statements/s, %.3f s CPU = %.0f ns per "
           "statement, peak RSS %ld KiB (findings: %zu, %zu)\n",
           capture_shaped ? "capture shape, " : "", capture_shaped ? CAP_STREAMS : N_STREAMS,
           capture_shaped ? CAP_HOSTS : N_HOSTS, capture_shaped ? CAP_HOSTS * CAP_SLOTS * (CAP_DEV + 2) : N_BUFFERS,
           r1 / 1e6, rss1, (unsigned long long)n, rn / 1e6, cn, cn / (double)n * 1e9, rssn,
           f1, fn);
    printf("checker:      of the %.3f s CPU, %.3f s generating; the checker's own %.3f s = "
           "%.0f ns per statement\n",
           cn, gn, cn - gn, (cn - gn) / (double)n * 1e9);
    if (n_db && check_from_db(db, n_db) != 0)
        return 1;
    if (n_min && minimise(n_min) != 0)
        return 1;
    return 0;
}
