/*
 * bench_sim.c -- how fast the simulator runs.
 *
 *   1. simulated statements per second of wall time on a run of at least
 *      1 M statements, with a sink that drops them (the simulator alone)
 *      and with an in-memory trace (simulator + trace model);
 *   2. the wall time of a 32-layer llama on 2 simulated GPUs for 1000
 *      decode tokens recorded into a SQLite database, as `syncsim run`.
 *
 * usage: bench_sim [TOKENS_FOR_1] [DB]   (defaults 1500, a temp file)
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LLAMA32 "llama:n_layer=32,n_embd=4096,n_head=32,n_head_kv=8,n_ff=11008,n_vocab=32000,n_ctx=2048,ubatch=256"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const sched_family *const families[] = { &sim_family, NULL };

static int run(const char *what, sched_sink sink, int tokens, int prompt)
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
    double dt = now_s() - t0;
    sched_run_free(r);
    if (rc != 0) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    printf("%-34s %9llu statements in %7.3f s: %6.2f M statements/s (%.3f ms/token simulated)\n",
           what, (unsigned long long)res.n_stmts, dt, (double)res.n_stmts / dt / 1e6,
           res.ns_per_token / 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    int tokens = argc > 1 ? atoi(argv[1]) : 1500;
    char db[256];
    if (argc > 2)
        snprintf(db, sizeof db, "%s", argv[2]);
    else
        snprintf(db, sizeof db, "/tmp/bench_sim_%d.db", (int)getpid());

    printf("model %s on h100-pcie (2 GPUs), policy events, 2 copies\n", LLAMA32);
    if (run("simulator only (null sink)", sched_sink_null(), tokens, 0) != 0)
        return 1;
    trace *t = trace_new();
    if (run("simulator + in-memory trace", sched_sink_memory(t), tokens, 0) != 0)
        return 1;
    trace_free(t);

    trace_error err = { 0 };
    unlink(db);
    trace_recorder_opts ro = { .run_name = "bench", .source = "sim" };
    double t0 = now_s();
    trace_recorder *rec = trace_recorder_open(db, &ro, &err);
    if (!rec) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    if (run("32 layers, 1000 tokens -> SQLite", sched_sink_recorder(rec), 1000, 512) != 0)
        return 1;
    if (trace_recorder_close(rec, &err) != 0) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    printf("wall time of the 32-layer, 2-device, 1000-token run with its database closed: %.3f s\n",
           now_s() - t0);
    if (argc <= 2)
        unlink(db);
    return 0;
}
