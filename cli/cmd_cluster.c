/*
 * cmd_cluster.c -- `syncsim cluster --network SPEC --workload W`: simulate a
 * cluster of GPUs (sim/cluster.c) over a network engine (sim/net.h).
 */
#include "cli.h"
#include "sim/cluster.h"
#include "sim/sim.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_cluster_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim cluster --network SPEC --workload W [--device MODEL] [-o DB]\n"
            "                       [--seed-bug BUG] [--json]\n"
            "\n"
            "Simulates a cluster of GPUs, each with a compute stream and a communication\n"
            "stream. Kernels are priced by the device model; every byte between GPUs moves\n"
            "through the network engine, where transfers that share a link share its\n"
            "bandwidth: collectives run as their algorithm's point-to-point transfers (a\n"
            "ring all-reduce is 2(n-1) steps of n chunk transfers between ring neighbours).\n"
            "\n"
            "Networks (--network):\n"
            "  builtin:NxG[,nvlink_gbps=450,nvlink_ns=1000,nic_gbps=50,nic_ns=3000]\n"
            "      N nodes of G GPUs: NVLink through a switch inside a node (GB/s per\n"
            "      direction per GPU), one NIC per GPU into a non-blocking fabric (50 GB/s =\n"
            "      400 Gb/s InfiniBand NDR); latency (ns) before the bytes move.\n"
            "  simgrid:PLATFORM.xml\n"
            "      SimGrid's flow-level model on a platform file (builds with SimGrid only).\n"
            "  Engines in this build: %s.\n"
            "\n"
            "Workloads (--workload):\n"
            "  allreduce:bytes=B[,group=all|node|rail][,channels=C]\n"
            "      one ring all-reduce of B bytes (K, M, G suffixes) per GPU: over every GPU,\n"
            "      inside each node, or across nodes among the GPUs of one local index (a\n"
            "      rail); prints time, algbw = B / time and busbw = algbw x 2(n-1)/n, the\n"
            "      figures of nccl-tests. The bytes are split over C rings, NCCL's channels\n"
            "      (default: one per GPU of a node for group=all over several nodes, each\n"
            "      leaving a node through another GPU's NIC; else 1).\n"
            "  step:tp=T,pp=P,dp=D,microbatches=M,seq=S[,mbs=1][,schedule=1f1b|gpipe]\n"
            "       [,model=llama:n_layer=80,n_embd=8192,n_ff=28672,n_head=64,n_kv_head=8]\n"
            "      one training step of a llama: T-way tensor parallel inside a node (an\n"
            "      all-reduce after attention and after the MLP, forward and backward), P\n"
            "      pipeline stages across nodes (activations and gradients sent point to\n"
            "      point), D data-parallel replicas whose gradients are all-reduced along\n"
            "      rails at the end. T x P x D must be the number of GPUs. Prints the step\n"
            "      time, compute and communication time per GPU, the pipeline bubble (the\n"
            "      compute streams' idle fraction until the last kernel; ideal\n"
            "      (P-1)/(M+P-1)) and the busiest link.\n"
            "\n"
            "Options:\n"
            "  -n, --network SPEC   the network (required)\n"
            "  -w, --workload W     the workload (required)\n"
            "  -d, --device MODEL   device model for kernels and collective overheads\n",
            sim_net_engines());
    /* the models shipped with this build or install, from the family's table */
    char names[512] = "";
    if (sim_family.iface->list)
        sim_family.iface->list(&sim_family, names, sizeof names);
    char text[768];
    snprintf(text, sizeof text, "(default h100-sxm): %s", names[0] ? names : "a .dev file");
    fprintf(out, "%23s", "");
    cli_wrapped(out, text, 23);
    fprintf(out,
            "  -o, --output DB      also write the run as a multi-rank trace (a new run of DB:\n"
            "                       queues r<g>.compute and r<g>.comm, collectives, send/recv,\n"
            "                       timed) that `syncsim check DB` checks\n"
            "  -b, --seed-bug BUG   write a known bug into the run: " SIM_CLUSTER_BUGS "\n"
            "                       (GPU 0 sends its first activation without waiting for\n"
            "                       the kernel that writes it; check finds the race)\n"
            "  -j, --json           one JSON object on standard output\n"
            "\n"
            "Exit status: 0 done, 2 bad input.\n"
            "\n"
            "Examples:\n"
            "  syncsim cluster --network builtin:1x8 --workload allreduce:bytes=1G\n"
            "  syncsim cluster --network builtin:4x8 --workload allreduce:bytes=256M,group=rail\n"
            "  syncsim cluster --network builtin:4x8 --workload "
            "step:tp=8,pp=4,dp=1,microbatches=8,seq=4096\n"
            "  syncsim cluster --network builtin:2x8 --workload "
            "step:tp=8,pp=2,dp=1,microbatches=4,seq=2048,model=llama:n_layer=8 \\\n"
            "          -o job.db --seed-bug send-before-compute && syncsim check job.db   # exit 1\n");
}

static void print_text(const sim_net *net, const char *workload, const sim_cluster_result *r)
{
    printf("network:  %s\n", net->describe);
    printf("workload: %s\n", workload);
    if (strcmp(r->workload, "allreduce") == 0) {
        printf("all-reduce of %llu bytes, %d group%s of %d GPUs (group=%s), %d ring%s\n",
               (unsigned long long)r->bytes, r->n_groups, r->n_groups == 1 ? "" : "s",
               r->group_size, r->group, r->channels, r->channels == 1 ? "" : "s");
        printf("time      %.3f us\n", (double)r->time_ns / 1e3);
        printf("algbw     %.2f GB/s\n", r->algbw_gbps);
        printf("busbw     %.2f GB/s   (algbw x 2(n-1)/n)\n", r->busbw_gbps);
    } else {
        printf("step of tp=%d pp=%d dp=%d, %d microbatches of %d x %d tokens, %s; llama of "
               "%d layers, n_embd %d\n", r->tp, r->pp, r->dp, r->microbatches, r->mbs, r->seq,
               r->schedule, r->n_layer, r->n_embd);
        printf("step time       %.3f ms\n", (double)r->time_ns / 1e6);
        printf("pipeline        %.3f ms (until the last kernel%s)\n",
               (double)r->pipeline_ns / 1e6, r->dp > 1 ? "; the dp all-reduce follows" : "");
        printf("compute         %.3f ms per GPU (kernels)\n", r->compute_ns / 1e6);
        printf("communication   %.3f ms per GPU (comm stream moving bytes: collectives once all arrived, sends)\n",
               r->comm_ns / 1e6);
        printf("bubble          %.1f %% of the compute streams idle until the last kernel "
               "(ideal pipeline: (P-1)/(M+P-1) = %.1f %%)\n", 100 * r->bubble,
               100 * r->ideal_bubble);
    }
    if (r->busiest[0])
        printf("busiest link    %s: %.3f GB\n", r->busiest, (double)r->busiest_bytes / 1e9);
    printf("simulated       %llu ops, %llu events, %llu transfers\n", (unsigned long long)r->ops,
           (unsigned long long)r->events, (unsigned long long)r->transfers);
}

static void print_json(const sim_net *net, const char *workload, const sim_cluster_result *r,
                       const char *db)
{
    printf("{\"network\":");
    trace_json_str(stdout, net->describe);
    printf(",\"workload\":");
    trace_json_str(stdout, workload);
    printf(",\"kind\":\"%s\",\"gpus\":%d,\"time_ns\":%lld", r->workload, net->n_gpus,
           (long long)r->time_ns);
    if (strcmp(r->workload, "allreduce") == 0)
        printf(",\"bytes\":%llu,\"group\":\"%s\",\"group_size\":%d,\"groups\":%d,"
               "\"channels\":%d,\"algbw_gbps\":%.6g,\"busbw_gbps\":%.6g",
               (unsigned long long)r->bytes, r->group, r->group_size, r->n_groups, r->channels,
               r->algbw_gbps, r->busbw_gbps);
    else
        printf(",\"tp\":%d,\"pp\":%d,\"dp\":%d,\"microbatches\":%d,\"seq\":%d,\"mbs\":%d,"
               "\"schedule\":\"%s\",\"pipeline_ns\":%lld,\"compute_ns\":%.0f,\"comm_ns\":%.0f,"
               "\"bubble\":%.6g,\"ideal_bubble\":%.6g", r->tp, r->pp, r->dp, r->microbatches,
               r->seq, r->mbs, r->schedule, (long long)r->pipeline_ns, r->compute_ns, r->comm_ns,
               r->bubble, r->ideal_bubble);
    printf(",\"busiest_link\":");
    trace_json_str(stdout, r->busiest);
    printf(",\"busiest_bytes\":%llu,\"ops\":%llu,\"events\":%llu,\"transfers\":%llu",
           (unsigned long long)r->busiest_bytes, (unsigned long long)r->ops,
           (unsigned long long)r->events, (unsigned long long)r->transfers);
    if (db) {
        printf(",\"output\":");
        trace_json_str(stdout, db);
        printf(",\"run\":%lld,\"statements\":%llu", (long long)r->run,
               (unsigned long long)r->stmts_written);
    }
    printf("}\n");
}

int cmd_cluster(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "network", required_argument, NULL, 'n' }, { "workload", required_argument, NULL, 'w' },
        { "device", required_argument, NULL, 'd' },  { "output", required_argument, NULL, 'o' },
        { "seed-bug", required_argument, NULL, 'b' }, { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
    };
    const char *network = NULL, *workload = NULL, *device = "h100-sxm", *db = NULL,
               *bug = NULL;
    bool json = false;
    int c;
    optind = 1;
    while ((c = cli_getopt("cluster", argc, argv, ":n:w:d:o:b:jh", longopts)) != -1) {
        switch (c) {
        case 'n': network = optarg; break;
        case 'w': workload = optarg; break;
        case 'd': device = optarg; break;
        case 'o': db = optarg; break;
        case 'b': bug = optarg; break;
        case 'j': json = true; break;
        case 'h': cmd_cluster_help(stdout); return 0;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    if (optind < argc)
        return cli_usage_error("cluster", "unexpected argument '%s'", argv[optind]);
    if (!network)
        return cli_usage_error("cluster", "--network is required (e.g. --network builtin:4x8; "
                               "engines here: %s)", sim_net_engines());
    if (!workload)
        return cli_usage_error("cluster", "--workload is required (e.g. --workload "
                               "allreduce:bytes=1G)");
    if (db && (!*db || strcmp(db, "-") == 0))
        return cli_usage_error("cluster", "-o names a database file (a new run is added to it)");
    sim_model m;
    trace_error terr = { 0 };
    if (sim_model_load(device, &m, &terr) != 0)
        return cli_error("cluster", "%s", terr.msg);
    sim_net net;
    char err[512];
    if (sim_net_open(&net, network, err, sizeof err) != 0)
        return cli_error("cluster", "%s", err);
    cli_progress *prog = cli_progress_start("cluster", "steps");
    sim_cluster_opts o = { .workload = workload, .model = &m, .trace_path = db, .seed_bug = bug,
                           .progress = cli_progress_callback, .progress_ctx = prog };
    sim_cluster_result r;
    int rc = sim_cluster_run(&net, &o, &r, err, sizeof err);
    cli_progress_end(prog);
    if (rc != 0) {
        sim_net_close(&net);
        return cli_error("cluster", "%s", err);
    }
    if (json) {
        print_json(&net, workload, &r, db);
    } else {
        print_text(&net, workload, &r);
        if (db)
            printf("wrote run %lld of %s: %llu statements (syncsim check %s)\n",
                   (long long)r.run, db, (unsigned long long)r.stmts_written, db);
    }
    sim_net_close(&net);
    return 0;
}
