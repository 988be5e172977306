/*
 * cmd_run.c -- `syncsim run`: schedule a model or graph on simulated
 * devices, record the run, print what it cost.
 */
#include "cli.h"
#include "sim/sim.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cmd_run_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim run [--model SPEC | --graph FILE] [--devices MODEL] [--policy NAME]\n"
            "                   [--copies N] [--tokens N] [--prompt N] [--allreduce ring|butterfly|bf16]\n"
            "                   [--bf16-min ELEMENTS] [-o DB]\n"
            "\n"
            "Schedules a graph the way ggml's backend scheduler does (assignment passes, splits,\n"
            "split-input copies in N pipeline slots, a sync policy) on a simulated machine, records\n"
            "every call and completion as a new run of DB, and prints the simulated time per token\n"
            "and for the prompt, syncs per token and the pattern of host calls, bytes per link and\n"
            "the utilisation of each device.\n"
            "\n"
            "  --model SPEC     KIND[:key=value,...]; KIND llama (layer split), tp (tensor split,\n"
            "                   all-reduces) or mlp; keys n_layer n_embd n_head n_head_kv n_ff\n"
            "                   n_vocab n_ctx ubatch dtype (default: llama, a small 8-layer model)\n"
            "  --graph FILE     a graph file (docs/graph-format.md) instead of a model\n"
            "  --devices MODEL  a device model: h100-pcie (default), h100-sxm, rtx4090-pcie4,\n"
            "                   rtx4090-windows, cpu-2core, or a .dev file; append :gpus=N\n"
            "  --policy NAME    full, relaxed, events (default), async-user-inputs, no-split-wait\n"
            "  --copies N       pipeline copy slots (default 2)\n"
            "  --tokens N       decode tokens (default 16)\n"
            "  --prompt N       prompt tokens, evaluated in ubatches (default 64)\n"
            "  --allreduce S    all-reduce of tensor-split models (default ring)\n"
            "  --bf16-min N     elements from which bf16 compresses (default 32768)\n"
            "  -o DB            the database (default ./" CLI_DEFAULT_DB ")\n"
            "\n"
            "Pattern letters: s sync, e host waits for an event, w stream waits for an event,\n"
            "r record, a async copy, c blocking copy, g graph launch; '|' separates splits.\n"
            "\n"
            "Examples:\n"
            "  syncsim run\n"
            "  syncsim run --model llama:n_layer=32,n_embd=4096 --policy relaxed --devices rtx4090-windows\n"
            "  syncsim run --model tp --devices h100-sxm --allreduce bf16\n");
}

static void human_bytes(uint64_t b, char *buf, size_t cap)
{
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, cap, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= 1024)
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024);
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "model", required_argument, NULL, 'm' },  { "graph", required_argument, NULL, 'g' },
        { "devices", required_argument, NULL, 'd' }, { "policy", required_argument, NULL, 'p' },
        { "copies", required_argument, NULL, 'c' }, { "tokens", required_argument, NULL, 't' },
        { "prompt", required_argument, NULL, 'P' }, { "allreduce", required_argument, NULL, 'a' },
        { "bf16-min", required_argument, NULL, 'b' }, { "output", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    sim_run_opts o = { .tokens = -1, .prompt = -1 };
    const char *db = CLI_DEFAULT_DB;
    unsigned long long v;
    int c;
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'g': o.graph_file = optarg; break;
        case 'd': o.devices = optarg; break;
        case 'p': o.policy = optarg; break;
        case 'a': o.allreduce = optarg; break;
        case 'o': db = optarg; break;
        case 'c':
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 8)
                return cli_usage_error("run", "--copies expects 1 to 8, got '%s'", optarg);
            o.n_copies = (int)v;
            break;
        case 't':
        case 'P':
            if (cli_parse_u64(optarg, &v) || v > 1000000)
                return cli_usage_error("run", "--%s expects a count, got '%s'",
                                       c == 't' ? "tokens" : "prompt", optarg);
            if (c == 't')
                o.tokens = (int)v;
            else
                o.prompt = (int)v;
            break;
        case 'b':
            if (cli_parse_u64(optarg, &v) || v < 1)
                return cli_usage_error("run", "--bf16-min expects a positive count, got '%s'", optarg);
            o.bf16_min = (int64_t)v;
            break;
        default:
            return cli_usage_error("run", "unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
    if (o.model && o.graph_file)
        return cli_usage_error("run", "give --model or --graph, not both");

    /* Check the inputs before a run is created in the database. */
    trace_error err = { 0 };
    sim_model m;
    if (sim_model_load(o.devices ? o.devices : "h100-pcie", &m, &err) != 0)
        return cli_error("run", "%s", err.msg);
    if (o.policy && !sched_policy_find(o.policy))
        return cli_usage_error("run", "unknown policy '%s' (expected full, relaxed, events, "
                               "async-user-inputs or no-split-wait)", o.policy);
    sched_model_params p;
    char perr[512];
    if (!o.graph_file && sched_model_parse(o.model ? o.model : "llama", &p, perr, sizeof perr) != 0)
        return cli_error("run", "%s", perr);
    if (o.graph_file) {
        sched_graph *g = sched_graph_parse_file(o.graph_file, &err);
        if (!g)
            return cli_error("run", "%s", err.msg);
        sched_graph_free(g);
    }

    trace_recorder_opts ro = { .run_name = o.model ? o.model : (o.graph_file ? o.graph_file : "llama"),
                               .source = "sim" };
    trace_recorder *rec = trace_recorder_open(db, &ro, &err);
    if (!rec)
        return cli_error("run", "%s", err.msg);
    o.sink = sched_sink_recorder(rec);
    o.progress = isatty(2);
    sim_run_result r;
    int rc = sim_run(&o, &r, &err);
    int64_t run_id = trace_recorder_run(rec);
    trace_error cerr = { 0 };
    if (trace_recorder_close(rec, &cerr) != 0 && rc == 0) {
        cli_error("run", "%s", cerr.msg);
        return 2;
    }
    if (rc != 0) {
        cli_error("run", "%s", err.msg);
        if (rc == 2)
            return 2;
        fprintf(stderr, "syncsim run: the partial run is run %lld of %s\n", (long long)run_id, db);
        return 1;
    }
    const sim_stats *st = &r.stats;
    printf("%s\n", r.desc);
    printf("policy %s, %d copies: %d splits, %d split inputs; run %lld in %s (%llu statements)\n",
           o.policy ? o.policy : "events", r.n_copies, r.n_splits, r.n_inputs, (long long)run_id, db,
           (unsigned long long)st->n_stmts);
    if (r.prompt_tokens > 0)
        printf("prompt: %d tokens in %d ubatches: %.3f ms simulated\n", r.prompt_tokens,
               r.n_ubatches, (double)r.prompt_ns / 1e6);
    printf("decode: %.3f ms/token simulated (%.1f tokens/s), %llu syncs/token\n",
           r.ns_per_token / 1e6, r.ns_per_token > 0 ? 1e9 / r.ns_per_token : 0.0,
           (unsigned long long)r.syncs_per_token);
    printf("pattern (decode): %s\n", r.pattern);
    if (r.prompt_pattern[0])
        printf("pattern (prompt): %s\n", r.prompt_pattern);
    printf("bytes per link:");
    int shown = 0;
    for (int l = 0; l < st->n_links; l++) {
        if (!st->link_bytes[l])
            continue;
        char hb[32];
        human_bytes(st->link_bytes[l], hb, sizeof hb);
        printf("%s %s %s", shown++ ? "," : "", r.link_names[l], hb);
    }
    printf("%s\n", shown ? "" : " none");
    double span = st->end_ns > 0 ? (double)st->end_ns : 1;
    printf("utilisation over %.3f ms: host %.1f%%", span / 1e6, 100.0 * (double)st->host_busy_ns / span);
    for (int d = 0; d < r.n_gpus && d < 16; d++)
        printf(", gpu%d %.1f%% (compute %.1f%%)", d, 100.0 * (double)st->gpu_busy_ns[d] / span,
               100.0 * (double)st->gpu_compute_ns[d] / span);
    printf("\n");
    return 0;
}
