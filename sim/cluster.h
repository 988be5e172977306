/*
 * cluster.h -- the cluster simulator (cluster.c): thousands of GPUs, each
 * with a compute stream and a communication stream, running a workload
 * whose collectives and pipeline messages move through a sim_net (net.h).
 * docs/cluster.md describes the model and how to read its output.
 */
#ifndef SYNCSIM_SIM_CLUSTER_H
#define SYNCSIM_SIM_CLUSTER_H

#include "net.h"
#include "sim.h"

#include <stdbool.h>
#include <stdint.h>

/* Seeded bugs (-o writes them into the trace for `syncsim check` to find). */
#define SIM_CLUSTER_BUGS "send-before-compute"

typedef struct sim_cluster_opts {
    /* allreduce:bytes=B[,group=all|node|rail][,channels=C]
     * step:tp=T,pp=P,dp=D[,model=llama:n_layer=..,n_embd=..,n_ff=..,n_head=..,n_kv_head=..]
     *      ,microbatches=M,seq=S[,mbs=B][,schedule=1f1b|gpipe] */
    const char *workload;
    const sim_model *model;         /* kernel prices and collective overheads (cost.c) */
    const char *trace_path;         /* NULL: no trace; else a database to add a run to */
    const char *seed_bug;           /* NULL, or one of SIM_CLUSTER_BUGS */
    /* Called now and then while the programs run, with the work done and
     * all of it -- every op of every program, and every step of every ring
     * position of a collective -- for a progress bar. NULL: none. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} sim_cluster_opts;

typedef struct sim_cluster_result {
    char workload[16];              /* "allreduce" or "step" */
    int64_t time_ns;                /* when the last stream went idle */
    /* allreduce */
    uint64_t bytes;
    char group[8];                  /* all, node, rail */
    int group_size, n_groups;
    int channels;                   /* rings, each carrying bytes / channels */
    double algbw_gbps, busbw_gbps;  /* bytes / time; algbw x 2(n-1)/n (nccl-tests) */
    /* step */
    int tp, pp, dp, microbatches, seq, mbs, n_layer, n_embd;
    char schedule[8];
    double compute_ns;              /* per GPU, mean: kernel time */
    double comm_ns;                 /* per GPU, mean: time its comm stream moved bytes (its
                                     * collectives from the last arrival on, its sends) */
    double bubble;                  /* pipeline phase idle fraction of the compute streams */
    double ideal_bubble;            /* (P-1)/(M+P-1) */
    int64_t pipeline_ns;            /* end of the last kernel (before the dp all-reduce) */
    /* both */
    char busiest[96];               /* the network's most loaded link, "" when it does not say */
    uint64_t busiest_bytes;
    uint64_t events, transfers, ops;
    uint64_t stmts_written;         /* with trace_path */
    int64_t run;                    /* the run written, -1 */
} sim_cluster_result;

/* Simulates o->workload on net. Returns 0, or -1 with one line in err (a
 * bad workload, one that does not fit the network, a write error). */
int sim_cluster_run(sim_net *net, const sim_cluster_opts *o, sim_cluster_result *res, char *err,
                    size_t errlen);

#endif
