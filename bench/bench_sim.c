/*
 * bench_sim.c -- how fast the simulator records.
 *
 * A 32-layer llama on two simulated H100s (events, 2 copies), through the
 * `run` driver (sched/run.c) exactly as `syncsim run` drives it:
 *
 *   1. statements per second of wall time, decode only (TOKENS tokens, at
 *      least 1 M statements), into the null sink: the simulator, the
 *      recording and the sync pattern, without a store -- REPEAT times,
 *      worst and median;
 *   2. the same into an in-memory trace (the trace model's appends);
 *   3. the same into SQLite through the recorder, to a closed database --
 *      REPEAT times, worst and median;
 *   4. the recorder alone: the statements of 2 appended into a fresh
 *      database and closed, no simulator: the ceiling of 3 (the store's
 *      writer thread) on this machine;
 *   5. the wall time of the 32-layer, 1000-token run with a 512-token
 *      prompt recorded into SQLite, database closed.
 *
 * usage: bench_sim [TOKENS] [DB] [REPEAT]   (defaults 1500, a temp file, 5)
 * With BENCH_CLOCK=cpu in the environment, every rate is per CPU second.
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LLAMA32 "llama:n_layer=32,n_embd=4096,n_head=32,n_head_kv=8,n_ff=11008,n_vocab=32000,n_ctx=2048,ubatch=256"
#define MAX_REPEAT 32

/* BENCH_CLOCK=cpu: rates per second of this process's CPU time (all its
 * threads: the recorder's writer too), the figure to compare on a shared
 * machine. */
static bool use_cpu;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(use_cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const sched_family *const families[] = { &sim_family, NULL };

static void remove_db(const char *db)
{
    char side[300];
    unlink(db);
    snprintf(side, sizeof side, "%s-wal", db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db);
    unlink(side);
}

/* One run into sink; its statements, and the seconds the run took. */
static int run(sched_sink sink, int tokens, int prompt, uint64_t *n_stmts, double *secs)
{
    sched_run_opts o = { .model = LLAMA32, .devices = "h100-pcie", .policy = "events",
                         .n_copies = 2, .tokens = tokens, .prompt = prompt };
    sched_run *r = NULL;
    sched_run_result res;
    trace_error err = { 0 };
    if (sched_run_prepare(&o, families, &r, &err) != 0) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    double t0 = now_s();
    int rc = sched_run_exec(r, sink, &res, &err);
    *secs = now_s() - t0;
    *n_stmts = res.n_stmts;
    sched_run_free(r);
    if (rc != 0)
        fprintf(stderr, "bench_sim: %s\n", err.msg);
    return rc;
}

/* One run into a fresh database, closed; the seconds from open to closed. */
static int run_sqlite(const char *db, int tokens, int prompt, uint64_t *n_stmts, double *secs)
{
    remove_db(db);
    trace_error err = { 0 };
    trace_recorder_opts ro = { .run_name = "bench", .source = "sim" };
    double t0 = now_s();
    trace_recorder *rec = trace_recorder_open(db, &ro, &err);
    double ignored;
    if (!rec || run(sched_sink_recorder(rec), tokens, prompt, n_stmts, &ignored) != 0 ||
        trace_recorder_close(rec, &err) != 0) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    *secs = now_s() - t0;
    return 0;
}

/* The statements of t appended into a fresh database, closed: seconds. */
static int recorder_alone(const trace *t, const char *db, double *secs)
{
    remove_db(db);
    trace_error err = { 0 };
    trace_recorder_opts ro = { .run_name = "bench", .source = "sim" };
    double t0 = now_s();
    trace_recorder *rec = trace_recorder_open(db, &ro, &err);
    if (!rec) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    /* Strings first, in order, so that every id of t is the recorder's. */
    for (uint32_t i = 0; i < t->n_strs; i++)
        trace_recorder_intern(rec, t->strs[i]);
    for (uint32_t q = 0; q < t->n_queues; q++)
        trace_recorder_queue(rec, trace_str(t, t->queues[q].name), t->queues[q].kind,
                             t->queues[q].device == TRACE_NONE ? NULL
                                                               : trace_str(t, t->queues[q].device));
    for (uint32_t b = 0; b < t->n_buffers; b++) {
        const trace_buffer *tb = &t->buffers[b];
        if (tb->parent == TRACE_NONE)
            trace_recorder_buffer(rec, trace_str(t, tb->name), tb->size, tb->loc,
                                  tb->device == TRACE_NONE ? NULL : trace_str(t, tb->device),
                                  tb->pinned);
        else
            trace_recorder_view(rec, trace_str(t, tb->name), tb->parent, tb->offset, tb->size);
    }
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        trace_recorder_append(rec, &s);
    }
    if (trace_recorder_close(rec, &err) != 0) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    *secs = now_s() - t0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Prints REPEAT rates (M statements/s), then the worst and the median. */
static void summary(const char *what, double *rate, int n)
{
    printf("%-40s", what);
    for (int i = 0; i < n; i++)
        printf(" %.2f", rate[i]);
    qsort(rate, (size_t)n, sizeof *rate, cmp_double);
    printf("  -> worst %.2f, median %.2f M statements/s\n", rate[0], rate[n / 2]);
}

int main(int argc, char **argv)
{
    int tokens = argc > 1 ? atoi(argv[1]) : 1500;
    int repeat = argc > 3 ? atoi(argv[3]) : 5;
    if (repeat < 1 || repeat > MAX_REPEAT)
        repeat = 5;
    char db[256];
    if (argc > 2)
        snprintf(db, sizeof db, "%s", argv[2]);
    else
        snprintf(db, sizeof db, "/tmp/bench_sim_%d.db", (int)getpid());

    const char *clock = getenv("BENCH_CLOCK");
    use_cpu = clock && strcmp(clock, "cpu") == 0;
    printf("model %s on h100-pcie (2 GPUs), policy events, 2 copies, %d decode tokens (rates per "
           "%s second)\n",
           LLAMA32, tokens, use_cpu ? "CPU" : "wall");
    double rate[MAX_REPEAT], secs;
    uint64_t n = 0;
    for (int i = 0; i < repeat; i++) {
        sched_null_sink nulls;
        if (run(sched_sink_null(&nulls), tokens, 0, &n, &secs) != 0)
            return 1;
        rate[i] = (double)n / secs / 1e6;
    }
    printf("%llu statements a run\n", (unsigned long long)n);
    summary("simulator, null sink:", rate, repeat);

    trace *t = trace_new();
    if (run(sched_sink_memory(t), tokens, 0, &n, &secs) != 0)
        return 1;
    printf("%-40s %.2f M statements/s\n", "simulator, in-memory trace:", (double)n / secs / 1e6);

    for (int i = 0; i < repeat; i++) {
        if (run_sqlite(db, tokens, 0, &n, &secs) != 0)
            return 1;
        rate[i] = (double)n / secs / 1e6;
    }
    summary("simulator -> SQLite, database closed:", rate, repeat);

    for (int i = 0; i < repeat; i++) {
        if (recorder_alone(t, db, &secs) != 0)
            return 1;
        rate[i] = (double)t->n_stmts / secs / 1e6;
    }
    summary("recorder alone (no simulator):", rate, repeat);
    trace_free(t);

    if (run_sqlite(db, 1000, 512, &n, &secs) != 0)
        return 1;
    printf("32 layers, 1000 tokens, 512-token prompt -> SQLite: %llu statements, %.3f s with "
           "the database closed\n", (unsigned long long)n, secs);
    if (argc <= 2)
        remove_db(db);
    return 0;
}
