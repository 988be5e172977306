/*
 * bench_merge.c -- merging and checking a multi-rank job at scale (issue 14,
 * item 4: check a merged 1024-rank trace of 10 M statements in <= 30 s and
 * <= 4 GB peak RSS on the 2-core machine).
 *
 *   bench_merge [--ranks N] [--steps S] [--db PATH]
 *
 * Each rank is a generator (a trace_reader that makes its statements on the
 * fly, so the inputs take no memory): a host and two streams, and per step
 * ten timed statements: a forward op, an event from s0 to s1, a send to the
 * next rank and a recv from the previous one on s1 (a ring pipeline), an
 * event back, a backward op, an allreduce of the gradients over all ranks on
 * s0 and a host sync. N x S x 10 statements in all (default 1024 x 1000:
 * 10.24 M); the schedule is clean, so any finding is a checker error.
 *
 *  1. merge + check: the ranks merged on the fly (trace_merge_open) and
 *     checked as they stream, in a child process: wall time and the
 *     child's peak RSS.
 *  2. with --db: the merge written to a database (what `syncsim merge -o`
 *     does), then `check` of that database in a child: the check figures of
 *     the issue (wall time, peak RSS), and the merge's own.
 * Every figure is measured by this run; nothing is hard-coded.
 */
#include "check/check.h"
#include "traces/trace.h"
#include "bench/child.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4
#define PER_STEP 10


typedef struct rank_gen {
    trace *t;
    uint32_t rank, n_ranks;
    uint64_t steps, i;
    uint32_t host, s0, s1;
    uint32_t in[SLOTS], act[SLOTS], grad;
    uint32_t fwd, bwd, ev, ev2, pp, world, allreduce;
    trace_access acc[2];
} rank_gen;

static trace_access whole(uint32_t b, uint8_t mode, uint64_t size)
{
    return (trace_access){ .buffer = b, .mode = mode, .form = TRACE_REF_WHOLE, .lo = 0, .hi = size };
}

/* Statement i of rank g (step i / PER_STEP). */
static int gen_next(void *ctx, trace_stmt *s, trace_error *err)
{
    (void)err;
    rank_gen *g = ctx;
    if (g->i == g->steps * PER_STEP)
        return 0;
    uint64_t step = g->i / PER_STEP, k = g->i % PER_STEP, slot = step % SLOTS;
    trace_stmt_init(s);
    s->seq = g->i++;
    s->t = (int64_t)(step * 10000 + k * 10);
    s->dur = 5;
    uint32_t next = (g->rank + 1) % g->n_ranks, prev = (g->rank + g->n_ranks - 1) % g->n_ranks;
    switch (k) {
    case 0:
        s->queue = g->s0;
        s->kind = TRACE_OP;
        s->label = g->fwd;
        g->acc[0] = whole(g->in[slot], TRACE_R, 4096);
        g->acc[1] = whole(g->act[slot], TRACE_W, 4096);
        s->n_access = 2;
        break;
    case 1:
        s->queue = g->s0;
        s->kind = TRACE_RECORD;
        s->object = g->ev;
        break;
    case 2:
        s->queue = g->s1;
        s->kind = TRACE_WAIT;
        s->object = g->ev;
        break;
    case 3:
        s->queue = g->s1;
        s->kind = TRACE_SEND;
        s->object = g->pp;
        s->rank = g->rank;
        s->peer = next;
        s->count = 0;
        g->acc[0] = whole(g->act[slot], TRACE_R, 4096);
        s->n_access = 1;
        break;
    case 4:
        s->queue = g->s1;
        s->kind = TRACE_RECV;
        s->object = g->pp;
        s->rank = g->rank;
        s->peer = prev;
        s->count = 0;
        g->acc[0] = whole(g->in[(step + 1) % SLOTS], TRACE_W, 4096);
        s->n_access = 1;
        break;
    case 5:
        s->queue = g->s1;
        s->kind = TRACE_RECORD;
        s->object = g->ev2;
        break;
    case 6:
        s->queue = g->s0;
        s->kind = TRACE_WAIT;
        s->object = g->ev2;
        break;
    case 7:
        s->queue = g->s0;
        s->kind = TRACE_OP;
        s->label = g->bwd;
        g->acc[0] = whole(g->act[slot], TRACE_R, 4096);
        g->acc[1] = whole(g->grad, TRACE_W, 4096);
        s->n_access = 2;
        break;
    case 8:
        s->queue = g->s0;
        s->kind = TRACE_COLLECTIVE;
        s->object = g->world;
        s->coll_kind = g->allreduce;
        s->count = g->n_ranks;
        g->acc[0] = whole(g->grad, TRACE_RW, 4096);
        s->n_access = 1;
        break;
    default:
        s->queue = g->host;
        s->kind = TRACE_SYNC;
        s->sync_scope = TRACE_SYNC_QUEUE;
        s->object = g->s0;
        break;
    }
    if (s->queue != g->host)
        s->by = g->host;
    s->access = s->n_access ? g->acc : NULL;
    return 1;
}

static int gen_rewind(void *ctx, trace_error *err)
{
    (void)err;
    ((rank_gen *)ctx)->i = 0;
    return 0;
}

static void gen_close(void *ctx)
{
    free(ctx);
}

static const trace_reader_iface gen_iface = { .next = gen_next, .close = gen_close,
                                              .rewind = gen_rewind };

static int gen_open(trace_reader *r, uint32_t rank, uint32_t n_ranks, uint64_t steps)
{
    memset(r, 0, sizeof *r);
    rank_gen *g = calloc(1, sizeof *g);
    trace *t = trace_new();
    if (!g || !t) {
        free(g);
        trace_free(t);
        return -1;
    }
    g->t = t;
    g->rank = rank;
    g->n_ranks = n_ranks;
    g->steps = steps;
    uint32_t dev = trace_intern_cstr(t, "0");
    g->host = trace_add_queue(t, trace_intern_cstr(t, "host"), TRACE_QUEUE_HOST, TRACE_NONE);
    g->s0 = trace_add_queue(t, trace_intern_cstr(t, "s0"), TRACE_QUEUE_STREAM, dev);
    g->s1 = trace_add_queue(t, trace_intern_cstr(t, "s1"), TRACE_QUEUE_STREAM, dev);
    for (uint32_t k = 0; k < SLOTS; k++) {
        char name[16];
        snprintf(name, sizeof name, "in%u", k);
        g->in[k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 4096, TRACE_LOC_DEVICE,
                                         dev, false);
        snprintf(name, sizeof name, "act%u", k);
        g->act[k] = trace_add_root_buffer(t, trace_intern_cstr(t, name), 4096, TRACE_LOC_DEVICE,
                                          dev, false);
    }
    g->grad = trace_add_root_buffer(t, trace_intern_cstr(t, "grad"), 4096, TRACE_LOC_DEVICE, dev,
                                    false);
    g->fwd = trace_intern_cstr(t, "fwd");
    g->bwd = trace_intern_cstr(t, "bwd");
    g->ev = trace_intern_cstr(t, "ev");
    g->ev2 = trace_intern_cstr(t, "ev2");
    g->pp = trace_intern_cstr(t, "pp");
    g->world = trace_intern_cstr(t, "world");
    g->allreduce = trace_intern_cstr(t, "allreduce");
    char buf[32];
    snprintf(buf, sizeof buf, "%u", rank);
    trace_set_meta(t, "rank", buf);
    snprintf(buf, sizeof buf, "%u", n_ranks);
    trace_set_meta(t, "world_size", buf);
    r->iface = &gen_iface;
    r->ctx = g;
    r->trace = t;
    r->owns_trace = true;
    snprintf(buf, sizeof buf, "rank%u", rank);
    r->source = strdup(buf);
    return 0;
}

typedef struct job {
    trace_reader *ranks, **ptrs;
    uint32_t n;
} job;

static int job_open(job *j, uint32_t n, uint64_t steps)
{
    j->n = n;
    j->ranks = calloc(n, sizeof *j->ranks);
    j->ptrs = calloc(n, sizeof *j->ptrs);
    if (!j->ranks || !j->ptrs)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        if (gen_open(&j->ranks[i], i, n, steps) != 0)
            return -1;
        j->ptrs[i] = &j->ranks[i];
    }
    return 0;
}

static void job_close(job *j)
{
    for (uint32_t i = 0; i < j->n; i++)
        trace_reader_close(&j->ranks[i]);
    free(j->ranks);
    free(j->ptrs);
}

typedef struct args {
    uint32_t ranks;
    uint64_t steps;
    const char *db;
} args;

static int report(check_report *rep)
{
    size_t n = check_report_count(rep);
    printf("    %llu statements checked, %zu findings (expected 0)\n",
           (unsigned long long)check_report_ops(rep), n);
    if (n)
        check_report_print(stdout, rep, false);
    check_report_free(rep);
    return n ? -1 : 0;
}

static int merge_and_check(void *p)
{
    const args *a = p;
    job j = { 0 };
    trace_error err = { 0 };
    trace_reader r;
    if (job_open(&j, a->ranks, a->steps) != 0 || trace_merge_open(j.ptrs, j.n, &r, &err) != 0) {
        fprintf(stderr, "bench_merge: %s\n", err.msg[0] ? err.msg : "out of memory");
        return -1;
    }
    check_options opt = { .max_findings = 100 };
    check_report *rep;
    int rc = check_trace(&r, &opt, &rep, &err);
    trace_reader_close(&r);
    job_close(&j);
    if (rc != 0) {
        fprintf(stderr, "bench_merge: %s\n", err.msg);
        return -1;
    }
    return report(rep);
}

static int merge_to_db(void *p)
{
    const args *a = p;
    job j = { 0 };
    trace_error err = { 0 };
    trace_reader r;
    unlink(a->db);
    if (job_open(&j, a->ranks, a->steps) != 0 || trace_merge_open(j.ptrs, j.n, &r, &err) != 0) {
        fprintf(stderr, "bench_merge: %s\n", err.msg[0] ? err.msg : "out of memory");
        return -1;
    }
    uint64_t n = 0;
    int64_t run = trace_store_import(a->db, &r, "job", &n, &err);
    trace_reader_close(&r);
    job_close(&j);
    if (run < 0) {
        fprintf(stderr, "bench_merge: %s\n", err.msg);
        return -1;
    }
    printf("    %llu statements in %s\n", (unsigned long long)n, a->db);
    return 0;
}

static int check_db(void *p)
{
    const args *a = p;
    trace_error err = { 0 };
    trace_source src;
    trace_source_opts so = { .lazy_labels = true };
    if (trace_source_open(&src, a->db, &so, &err) != 0) {
        fprintf(stderr, "bench_merge: %s\n", err.msg);
        return -1;
    }
    check_options opt = { .max_findings = 100 };
    check_report *rep;
    int rc = check_trace(&src.reader, &opt, &rep, &err);
    trace_source_close(&src);
    if (rc != 0) {
        fprintf(stderr, "bench_merge: %s\n", err.msg);
        return -1;
    }
    return report(rep);
}

int main(int argc, char **argv)
{
    args a = { .ranks = 1024, .steps = 1000, .db = NULL };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            a.ranks = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            a.steps = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            a.db = argv[++i];
        else {
            fprintf(stderr, "usage: bench_merge [--ranks N] [--steps S] [--db PATH]\n");
            return 2;
        }
    }
    if (a.ranks < 2 || a.steps < 1) {
        fprintf(stderr, "bench_merge: --ranks must be at least 2 and --steps at least 1\n");
        return 2;
    }
    printf("bench_merge: %u ranks x %llu steps x %d statements = %llu statements "
           "(3 queues a rank, an allreduce over all ranks and a ring send/recv every step)\n",
           a.ranks, (unsigned long long)a.steps, PER_STEP,
           (unsigned long long)a.ranks * a.steps * PER_STEP);
    int rc = bench_in_child("merge + check, streamed", merge_and_check, &a);
    if (a.db) {
        rc |= bench_in_child("merge into a database", merge_to_db, &a);
        rc |= bench_in_child("check of the merged database", check_db, &a);
    }
    return rc ? 1 : 0;
}
