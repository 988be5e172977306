/*
 * bench_store.c -- the trace store's speed and size: a synthetic trace
 * written through the recorder by two host threads, then read back through
 * the streaming reader.
 *
 * The trace: 2 host threads, 8 streams (4 per host), 64 arenas with 63
 * views each (4096 buffers), statements mostly ops and copies with some
 * record/wait/sync, labels from a small set, times on every statement, about
 * 1.5 accesses per statement. Prints statements, ingest and read rates, the
 * file size after a WAL checkpoint and per statement, and peak RSS.
 *
 * usage: bench_store [--stmts N] [--db PATH] [--keep]
 */
#include "traces/trace.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define N_HOSTS 2
#define STREAMS_PER_HOST 4
#define N_ARENAS 64
#define VIEWS_PER_ARENA 63
#define VIEW_BYTES 65536

static const char *const labels[] = { "mul_mat", "add", "rms_norm", "rope", "softmax", "silu",
                                      "get_rows", "cpy", "scale", "mul", "flash_attn", "cont" };
#define N_LABELS (sizeof labels / sizeof labels[0])

typedef struct producer {
    trace_recorder *rec;
    int host;
    uint64_t n;
    uint32_t host_q, streams[STREAMS_PER_HOST];
    uint32_t label_ids[N_LABELS], event_ids[STREAMS_PER_HOST];
    uint32_t first_view;
    uint64_t n_access;
} producer;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* xorshift64*: a fixed stream of pseudo-random numbers per producer. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static uint32_t pick_view(producer *p, uint64_t r)
{
    (void)p;
    return (uint32_t)(N_ARENAS + r % (N_ARENAS * VIEWS_PER_ARENA));
}

static void *produce(void *arg)
{
    producer *p = arg;
    uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(p->host + 1);
    int64_t clock[STREAMS_PER_HOST] = { 0 }, host_t = 0;
    for (uint64_t i = 0; i < p->n; i++) {
        uint64_t r = next_rand(&rng);
        int si = (int)(i % STREAMS_PER_HOST);
        unsigned pct = (unsigned)(r % 100);
        trace_access acc[3];
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = p->streams[si];
        s.by = p->host_q;
        if (pct < 62) {
            s.kind = TRACE_OP;
            s.label = p->label_ids[(r >> 8) % N_LABELS];
            /* Binary ops read two tensors, unary ones one; few write in place. */
            acc[0] = (trace_access){ pick_view(p, r >> 16), TRACE_R, TRACE_REF_WHOLE, 0,
                                     VIEW_BYTES };
            acc[1] = (trace_access){ pick_view(p, r >> 28), TRACE_R, TRACE_REF_WHOLE, 0,
                                     VIEW_BYTES };
            acc[2] = (trace_access){ pick_view(p, r >> 40), TRACE_W, TRACE_REF_WHOLE, 0,
                                     VIEW_BYTES };
            if ((r >> 52) % 8 == 0) { /* a partial write */
                acc[2].form = TRACE_REF_RANGE;
                acc[2].lo = 4096;
                acc[2].hi = 8192;
            }
            unsigned shape = (unsigned)(r >> 56) % 8;
            s.n_access = shape < 2 ? 3 : shape < 7 ? 2 : 1;
            s.access = acc + (3 - s.n_access);
        } else if (pct < 70) {
            s.kind = TRACE_COPY;
            s.label = p->label_ids[7];
            acc[0] = (trace_access){ pick_view(p, r >> 16), TRACE_R, TRACE_REF_WHOLE, 0,
                                     VIEW_BYTES };
            acc[1] = (trace_access){ pick_view(p, r >> 32), TRACE_W, TRACE_REF_WHOLE, 0,
                                     VIEW_BYTES };
            s.n_access = 2;
            s.access = acc;
        } else if (pct < 80) {
            s.kind = TRACE_RECORD;
            s.object = p->event_ids[si];
        } else if (pct < 90) {
            s.kind = TRACE_WAIT;
            s.object = p->event_ids[(si + 1) % STREAMS_PER_HOST];
        } else if (pct < 95) {
            s.kind = TRACE_OP; /* host-side work */
            s.queue = p->host_q;
            s.by = TRACE_NONE;
            s.label = p->label_ids[(r >> 8) % N_LABELS];
            acc[0] = (trace_access){ pick_view(p, r >> 16), TRACE_RW, TRACE_REF_WHOLE, 0,
                                     VIEW_BYTES };
            s.n_access = 1;
            s.access = acc;
        } else {
            s.kind = TRACE_SYNC;
            s.queue = p->host_q;
            s.by = TRACE_NONE;
            s.sync_scope = TRACE_SYNC_QUEUE;
            s.object = p->streams[si];
        }
        int64_t *c = s.queue == p->host_q ? &host_t : &clock[si];
        s.dur = s.kind == TRACE_OP || s.kind == TRACE_COPY ? 2000 + (int64_t)(r % 50000) : 1000;
        s.t = *c;
        *c += s.dur + 500;
        p->n_access += s.n_access;
        trace_recorder_append(p->rec, &s);
    }
    return NULL;
}

static long file_bytes(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

int main(int argc, char **argv)
{
    uint64_t n_stmts = 5000000;
    const char *db = "bench_store.db";
    bool keep = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--stmts") == 0 && i + 1 < argc)
            n_stmts = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            db = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0)
            keep = true;
        else {
            fprintf(stderr, "usage: bench_store [--stmts N] [--db PATH] [--keep]\n");
            return 2;
        }
    }
    char side[1024];
    unlink(db);
    snprintf(side, sizeof side, "%s-wal", db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db);
    unlink(side);

    trace_error err = { 0 };
    trace_recorder_opts o = { .run_name = "bench", .source = "bench" };
    trace_recorder *rec = trace_recorder_open(db, &o, &err);
    if (!rec) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return 2;
    }
    producer p[N_HOSTS];
    char name[64];
    for (int a = 0; a < N_ARENAS; a++) {
        snprintf(name, sizeof name, "arena%d", a);
        trace_recorder_buffer(rec, name, (uint64_t)VIEW_BYTES * (VIEWS_PER_ARENA + 1),
                              TRACE_LOC_DEVICE, a % 2 ? "1" : "0", false);
    }
    for (int a = 0; a < N_ARENAS; a++)
        for (int v = 0; v < VIEWS_PER_ARENA; v++) {
            snprintf(name, sizeof name, "t%d_%d", a, v);
            trace_recorder_view(rec, name, (uint32_t)a, (uint64_t)v * VIEW_BYTES, VIEW_BYTES);
        }
    for (int h = 0; h < N_HOSTS; h++) {
        memset(&p[h], 0, sizeof p[h]);
        p[h].rec = rec;
        p[h].host = h;
        p[h].n = n_stmts / N_HOSTS + (h == 0 ? n_stmts % N_HOSTS : 0);
        snprintf(name, sizeof name, "host%d", h);
        p[h].host_q = trace_recorder_queue(rec, name, TRACE_QUEUE_HOST, NULL);
        for (int s = 0; s < STREAMS_PER_HOST; s++) {
            snprintf(name, sizeof name, "s%d", h * STREAMS_PER_HOST + s);
            p[h].streams[s] = trace_recorder_queue(rec, name, TRACE_QUEUE_STREAM, h ? "1" : "0");
            snprintf(name, sizeof name, "ev%d", h * STREAMS_PER_HOST + s);
            p[h].event_ids[s] = trace_recorder_intern(rec, name);
        }
        for (size_t l = 0; l < N_LABELS; l++)
            p[h].label_ids[l] = trace_recorder_intern(rec, labels[l]);
    }
    pthread_t th[N_HOSTS];
    double t0 = now();
    for (int h = 0; h < N_HOSTS; h++)
        pthread_create(&th[h], NULL, produce, &p[h]);
    for (int h = 0; h < N_HOSTS; h++)
        pthread_join(th[h], NULL);
    if (trace_recorder_close(rec, &err) != 0) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return 2;
    }
    double t_ingest = now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long rss_ingest = ru.ru_maxrss;
    uint64_t n_access = 0;
    for (int h = 0; h < N_HOSTS; h++)
        n_access += p[h].n_access;

    /* Make sure nothing is left in the WAL before measuring the file. */
    sqlite3 *h;
    if (sqlite3_open(db, &h) == SQLITE_OK) {
        sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        sqlite3_close(h);
    }
    long bytes = file_bytes(db);

    trace_reader r;
    trace_stmt s;
    uint64_t n_read = 0, n_read_access = 0;
    int rc;
    t0 = now();
    if (trace_store_open_reader(db, 0, &r, &err) != 0) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return 2;
    }
    while ((rc = trace_reader_next(&r, &s, &err)) == 1) {
        n_read++;
        n_read_access += s.n_access;
    }
    trace_reader_close(&r);
    double t_read = now() - t0;
    if (rc != 0 || n_read != n_stmts || n_read_access != n_access) {
        fprintf(stderr, "bench_store: read back %llu statements, %llu accesses: %s\n",
                (unsigned long long)n_read, (unsigned long long)n_read_access,
                rc ? err.msg : "count mismatch");
        return 1;
    }
    getrusage(RUSAGE_SELF, &ru);
    printf("bench_store: %llu statements, %.2f accesses/statement, 4096 buffers, 8 streams, 2 hosts\n",
           (unsigned long long)n_stmts, (double)n_access / (double)n_stmts);
    printf("  ingest (recorder, 2 threads): %.2f s, %.0f statements/s\n", t_ingest,
           (double)n_stmts / t_ingest);
    printf("  read (streaming reader):      %.2f s, %.0f statements/s\n", t_read,
           (double)n_read / t_read);
    printf("  file: %ld bytes, %.1f bytes/statement (after WAL checkpoint)\n", bytes,
           (double)bytes / (double)n_stmts);
    printf("  peak RSS: %.1f MiB after ingest, %.1f MiB after reading (the reader maps the\n"
           "            file with mmap: its pages count, the trace is never loaded)\n",
           rss_ingest / 1024.0, ru.ru_maxrss / 1024.0);
    if (!keep)
        unlink(db);
    return 0;
}
