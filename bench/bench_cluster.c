/*
 * bench_cluster.c -- the cluster simulator at scale (issue 14, item 4:
 * simulate a 1024-GPU pipeline + tensor-parallel step in <= 60 s on the
 * 2-core machine).
 *
 *   bench_cluster [--network SPEC] [--workload W] [--device MODEL] [--db PATH]
 *
 * Default: builtin:128x8 and one step of a llama-70B-like model (80 layers,
 * n_embd 8192) with tp=8 inside each node, pp=16 stages across nodes, dp=8
 * replicas, 8 microbatches of 4096 tokens, 1f1b: 1024 GPUs.
 *
 *  1. the simulation alone, in a child process: wall time, CPU time (user
 *     + system) and peak RSS of the child, and what it simulated (ops,
 *     events, network transfers) with the step's figures;
 *  2. with --db: the same with the run written as a multi-rank trace (a new
 *     run of PATH): the statements written, wall, CPU, peak RSS; then
 *     `syncsim check PATH` in a child: its verdict, wall, CPU, peak RSS.
 * Every figure is measured by this run; nothing is hard-coded.
 */
#include "bench/child.h"
#include "sim/cluster.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SYNCSIM_BINARY
#define SYNCSIM_BINARY "syncsim"
#endif

typedef struct sim_args {
    const char *network, *workload, *device, *db;
} sim_args;

/* The simulation (in a child: bench_in_child). */
static int simulate(void *p)
{
    const sim_args *a = p;
    sim_model m;
    trace_error terr = { 0 };
    if (sim_model_load(a->device, &m, &terr) != 0) {
        fprintf(stderr, "bench_cluster: %s\n", terr.msg);
        return -1;
    }
    sim_net net;
    char err[512];
    if (sim_net_open(&net, a->network, err, sizeof err) != 0) {
        fprintf(stderr, "bench_cluster: %s\n", err);
        return -1;
    }
    sim_cluster_opts o = { .workload = a->workload, .model = &m, .trace_path = a->db };
    sim_cluster_result r;
    if (sim_cluster_run(&net, &o, &r, err, sizeof err) != 0) {
        fprintf(stderr, "bench_cluster: %s\n", err);
        return -1;
    }
    printf("  simulated: %d GPUs, %llu ops, %llu events, %llu transfers\n", net.n_gpus,
           (unsigned long long)r.ops, (unsigned long long)r.events,
           (unsigned long long)r.transfers);
    if (strcmp(r.workload, "step") == 0)
        printf("  step %.3f ms (pipeline %.3f ms), compute %.3f ms, communication %.3f ms "
               "per GPU, bubble %.1f %% (ideal %.1f %%), busiest link %s %.2f GB\n",
               (double)r.time_ns / 1e6, (double)r.pipeline_ns / 1e6, r.compute_ns / 1e6,
               r.comm_ns / 1e6, 100 * r.bubble, 100 * r.ideal_bubble, r.busiest,
               (double)r.busiest_bytes / 1e9);
    else
        printf("  all-reduce %.3f us, algbw %.2f GB/s, busbw %.2f GB/s\n",
               (double)r.time_ns / 1e3, r.algbw_gbps, r.busbw_gbps);
    if (a->db)
        printf("  wrote run %lld of %s: %llu statements\n", (long long)r.run, a->db,
               (unsigned long long)r.stmts_written);
    sim_net_close(&net);
    return 0;
}

/* `syncsim check DB` (in a child: bench_in_child). */
static int check_db(void *db)
{
    execl(SYNCSIM_BINARY, SYNCSIM_BINARY, "check", (const char *)db, (char *)NULL);
    return -1;
}

int main(int argc, char **argv)
{
    const char *network = "builtin:128x8", *device = "h100-sxm", *db = NULL;
    const char *workload = "step:tp=8,pp=16,dp=8,microbatches=8,seq=4096,schedule=1f1b,"
                           "model=llama:n_layer=80,n_embd=8192,n_ff=28672,n_head=64,n_kv_head=8";
    static const struct option longopts[] = {
        { "network", required_argument, NULL, 'n' }, { "workload", required_argument, NULL, 'w' },
        { "device", required_argument, NULL, 'd' },  { "db", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "n:w:d:o:", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': network = optarg; break;
        case 'w': workload = optarg; break;
        case 'd': device = optarg; break;
        case 'o': db = optarg; break;
        default:
            fprintf(stderr, "usage: bench_cluster [--network SPEC] [--workload W] [--device MODEL] "
                            "[--db PATH]\n");
            return 2;
        }
    }
    printf("bench_cluster: %s on %s (device %s)\n", workload, network, device);
    sim_args a = { network, workload, device, NULL };
    if (bench_in_child("simulation", simulate, &a) != 0) {
        fprintf(stderr, "bench_cluster: the simulation failed\n");
        return 1;
    }
    if (db) {
        unlink(db);
        a.db = db;
        if (bench_in_child("simulation + trace", simulate, &a) != 0) {
            fprintf(stderr, "bench_cluster: the simulation with -o failed\n");
            return 1;
        }
        if (bench_in_child("syncsim check of the trace", check_db, (void *)db) != 0) {
            fprintf(stderr, "bench_cluster: the check of %s failed or found something\n", db);
            return 1;
        }
    }
    return 0;
}
