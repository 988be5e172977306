/*
 * cmd_run.c -- `syncsim run`: schedule a model or graph on simulated
 * devices, record the run, print what it cost.
 */
#include "cli.h"
#include "real/real.h"
#include "sim/sim.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cmd_run_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim run [--model SPEC | --graph FILE] [--devices MODEL|SPEC] [--policy NAME]\n"
            "                   [--copies N] [--tokens N] [--prompt N] [--allreduce ring|butterfly|bf16]\n"
            "                   [--bf16-min ELEMENTS] [--barrier NAME] [--threads N]\n"
            "                   [--trace-level stream|thread] [--seed N] [-o DB]\n"
            "\n"
            "Schedules a graph the way ggml's backend scheduler does (assignment passes, splits,\n"
            "split-input copies in N pipeline slots, a sync policy) on a simulated machine, records\n"
            "every call and completion as a new run of DB, and prints the simulated time per token\n"
            "and for the prompt, syncs per token and the pattern of host calls, bytes per link and\n"
            "the utilisation of each device.\n"
            "\n"
            "With a real device spec (cpu, cpustream, docs/real-backends.md) the schedule runs for\n"
            "real on the CPU, on real data: it prints the wall time per token and for the prompt,\n"
            "syncs per token and the pattern, and the max absolute and relative error of the output\n"
            "of every evaluation against a reference (the same graphs on one cpu thread,\n"
            "sequentially). Outputs are read asynchronously, one host tensor per evaluation, with a\n"
            "synchronize every 64 evaluations and at the end of the prompt and of the decode (a sync\n"
            "after every token would hide the broken policies' races). 'outputs match' means a max\n"
            "relative error of at most %g (a correct schedule matches exactly); 'outputs DIFFER\n"
            "from the reference' means more, or a NaN on one side: a synchronisation bug manifested\n"
            "(exit status 1). Run `syncsim check DB` on the run either way: it finds races whether\n"
            "or not they changed the numbers. A malformed spec is one line naming the spec and the\n"
            "item at fault (exit status 2; nothing is recorded).\n"
            "\n"
            "  --model SPEC     KIND[:key=value,...]; KIND llama (layer split), tp (tensor split,\n"
            "                   all-reduces; on real devices every rank a cpustream) or mlp; keys\n"
            "                   n_layer n_embd n_head n_head_kv n_ff n_vocab n_ctx ubatch dtype\n"
            "                   (default: llama, a small 8-layer model)\n"
            "  --graph FILE     a graph file (docs/graph-format.md) instead of a model\n"
            "  --devices MODEL  a device model: h100-pcie (default), h100-sxm, rtx4090-pcie4,\n"
            "                   rtx4090-windows, cpu-2core, or a .dev file; append :gpus=N\n"
            "  --devices SPEC   real backends: cpustream[:N] devices then cpu, with key=value\n"
            "                   options after a device (jitter=DUR seed=N threads=N mem=SIZE), e.g.\n"
            "                   cpu, cpustream:2,cpu, cpustream:2,jitter=200us,seed=7,cpu\n"
            "  --policy NAME    full, relaxed, events (default), async-user-inputs, no-split-wait\n"
            "  --copies N       pipeline copy slots (default 2)\n"
            "  --tokens N       decode tokens (default 16)\n"
            "  --prompt N       prompt tokens, evaluated in ubatches (default 64)\n"
            "  --allreduce S    all-reduce of tensor-split models (default ring); on real devices\n"
            "                   ring and butterfly compute the same sum, bf16 rounds it through bf16\n"
            "                   (the reference too); a rank waiting 10 s for the others fails the\n"
            "                   run: the schedule hangs\n"
            "  --bf16-min N     elements from which bf16 compresses (default 32768)\n"
            "  --barrier NAME   real: the cpu pool's barrier: spin, futex, hybrid (default), pthread\n"
            "  --threads N      real: cpu pool threads (default: the CPUs this process may use)\n"
            "  --trace-level L  real: stream (default) or thread (each pool thread a host queue with\n"
            "                   its node chunks and the pool's barriers, so check verifies them;\n"
            "                   split is another name for stream)\n"
            "  --seed N         real: weights, inputs and the default jitter seed (default 1)\n"
            "  -o DB            the database (default ./" CLI_DEFAULT_DB ")\n"
            "\n"
            "Pattern letters: s sync, e host waits for an event, w stream waits for an event,\n"
            "r record, a async copy, c blocking copy, g graph launch; '|' separates splits.\n"
            "\n"
            "Examples:\n"
            "  syncsim run\n"
            "  syncsim run --model llama:n_layer=32,n_embd=4096 --policy relaxed --devices rtx4090-windows\n"
            "  syncsim run --model tp --devices h100-sxm --allreduce bf16\n"
            "  syncsim run --model llama:n_layer=2,n_embd=128 --devices cpustream:2,jitter=200us,seed=7,cpu \\\n"
            "              --policy async-user-inputs --tokens 8 --prompt 16 -o real.db; syncsim check real.db\n",
            REAL_RUN_TOLERANCE);
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

/* The real-backend path: check the inputs, record, print the summary. */
/* Checks the names a run is given before a run is created in the database.
 * Returns 0, or the usage error's exit status. */
static int check_names(const char *policy, const char *allreduce)
{
    if (policy && !sched_policy_find(policy))
        return cli_usage_error("run", "unknown policy '%s' (expected %s)", policy,
                               sched_policy_names());
    if (allreduce && !sched_allreduce_known(allreduce))
        return cli_usage_error("run", "unknown all-reduce '%s' (expected " SCHED_ALLREDUCE_NAMES ")",
                               allreduce);
    return 0;
}

/* Closes the run's recorder after the simulated or real run returned rc
 * (err its error). Returns -1 when the run succeeded and was closed, else
 * the exit status, having printed why: 2 for bad input or a failed close,
 * 1 for a run that failed part-way (its partial run stays). */
static int close_run(trace_recorder *rec, int rc, const trace_error *err, const char *db,
                     int64_t *run_id)
{
    *run_id = trace_recorder_run(rec);
    trace_error cerr = { 0 };
    if (trace_recorder_close(rec, &cerr) != 0 && rc == 0)
        return cli_error("run", "%s", cerr.msg);
    if (rc == 0)
        return -1;
    cli_error("run", "%s", err->msg);
    if (rc == 2)
        return 2;
    fprintf(stderr, "syncsim run: the partial run is run %lld of %s\n", (long long)*run_id, db);
    return 1;
}

/* A run's name says what ran where: "MODEL POLICY on DEVICES". */
static const char *run_name(char *buf, size_t cap, const char *model, const char *graph_file,
                            const char *policy, const char *devices, const char *default_devices)
{
    snprintf(buf, cap, "%s %s on %s", graph_file ? graph_file : model ? model : "llama",
             policy ? policy : "events", devices ? devices : default_devices);
    return buf;
}

static int run_real(real_run_opts *o, const char *db)
{
    /* Check the inputs before a run is created in the database. */
    char ebuf[512];
    if (real_spec_check(o->devices, NULL, ebuf, sizeof ebuf) != 0)
        return cli_error("run", "%s", ebuf);
    int bad = check_names(o->policy, o->allreduce);
    if (bad)
        return bad;
    trace_error err = { 0 };
    if (o->graph_file) {
        sched_graph *g = sched_graph_parse_file(o->graph_file, &err);
        if (!g)
            return cli_error("run", "%s", err.msg);
        sched_graph_free(g);
    } else {
        sched_model_params p;
        if (sched_model_parse(o->model ? o->model : "llama", &p, ebuf, sizeof ebuf) != 0)
            return cli_error("run", "%s", ebuf);
    }

    char name[512];
    trace_recorder_opts rop = { .run_name = run_name(name, sizeof name, o->model, o->graph_file,
                                                     o->policy, o->devices, "cpu"),
                                .source = "real" };
    trace_recorder *rec = trace_recorder_open(db, &rop, &err);
    if (!rec)
        return cli_error("run", "%s", err.msg);
    o->rec = rec;
    o->progress = isatty(2);
    real_run_result r;
    int rc = real_run(o, &r, &err);
    int64_t run_id;
    int status = close_run(rec, rc, &err, db, &run_id);
    if (status >= 0)
        return status;
    printf("%s\n", r.desc);
    printf("policy %s, %d copies: %d splits, %d split inputs; run %lld in %s\n",
           o->policy ? o->policy : "events", r.n_copies, r.n_splits, r.n_inputs,
           (long long)run_id, db);
    if (r.prompt_tokens > 0)
        printf("prompt: %d tokens in %d ubatches: %.3f ms wall (%.1f tokens/s)\n", r.prompt_tokens,
               r.n_ubatches, (double)r.prompt_ns / 1e6,
               r.prompt_ns > 0 ? r.prompt_tokens * 1e9 / (double)r.prompt_ns : 0.0);
    printf("decode: %d tokens: %.3f ms/token wall (%.1f tokens/s), %.2f syncs/token\n", r.tokens,
           r.ns_per_token / 1e6, r.ns_per_token > 0 ? 1e9 / r.ns_per_token : 0.0,
           r.syncs_per_token);
    printf("pattern (decode): %s\n", r.pattern);
    if (r.prompt_pattern[0])
        printf("pattern (prompt): %s\n", r.prompt_pattern);
    printf("max abs error %.3g, max rel error %.3g against the reference (cpu, sequential): "
           "%llu values of %llu evaluations\n",
           r.err.max_abs, r.err.max_rel, (unsigned long long)r.err.n,
           (unsigned long long)r.n_evals);
    if (r.err.n_nan)
        printf("%llu values are NaN on one side only\n", (unsigned long long)r.err.n_nan);
    if (r.differ) {
        printf("outputs DIFFER from the reference (max rel error above %g): a synchronisation "
               "bug manifested; see `syncsim check %s`\n", REAL_RUN_TOLERANCE, db);
        return 1;
    }
    printf("outputs match%s (tolerance %g relative)\n", r.err.max_abs == 0 ? " exactly" : "",
           REAL_RUN_TOLERANCE);
    return 0;
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "model", required_argument, NULL, 'm' },  { "graph", required_argument, NULL, 'g' },
        { "devices", required_argument, NULL, 'd' }, { "policy", required_argument, NULL, 'p' },
        { "copies", required_argument, NULL, 'c' }, { "tokens", required_argument, NULL, 't' },
        { "prompt", required_argument, NULL, 'P' }, { "allreduce", required_argument, NULL, 'a' },
        { "bf16-min", required_argument, NULL, 'b' }, { "output", required_argument, NULL, 'o' },
        { "barrier", required_argument, NULL, 'B' }, { "threads", required_argument, NULL, 'T' },
        { "trace-level", required_argument, NULL, 'L' }, { "seed", required_argument, NULL, 'S' },
        { NULL, 0, NULL, 0 },
    };
    const char *barrier = NULL, *real_only = NULL;
    int threads = 0;
    real_trace_level level = REAL_TRACE_STREAM;
    uint64_t seed = 1;
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
        case 'B':
            if (real_barrier_parse(optarg) < 0)
                return cli_usage_error("run", "unknown barrier '%s' (expected spin, futex, hybrid "
                                       "or pthread)", optarg);
            barrier = optarg;
            real_only = "--barrier";
            break;
        case 'T':
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 256)
                return cli_usage_error("run", "--threads expects 1 to 256, got '%s'", optarg);
            threads = (int)v;
            real_only = "--threads";
            break;
        case 'L':
            if (strcmp(optarg, "stream") == 0 || strcmp(optarg, "split") == 0)
                level = REAL_TRACE_STREAM;
            else if (strcmp(optarg, "thread") == 0)
                level = REAL_TRACE_THREAD;
            else
                return cli_usage_error("run", "--trace-level expects stream or thread, got '%s'",
                                       optarg);
            real_only = "--trace-level";
            break;
        case 'S':
            if (cli_parse_u64(optarg, &v))
                return cli_usage_error("run", "--seed expects a non-negative integer, got '%s'",
                                       optarg);
            seed = (uint64_t)v;
            real_only = "--seed";
            break;
        default:
            return cli_usage_error("run", "unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
    if (o.model && o.graph_file)
        return cli_usage_error("run", "give --model or --graph, not both");
    if (real_spec_is_real(o.devices)) {
        real_run_opts ro = { .model = o.model, .graph_file = o.graph_file, .devices = o.devices,
                             .policy = o.policy, .n_copies = o.n_copies, .tokens = o.tokens,
                             .prompt = o.prompt, .barrier = barrier, .threads = threads,
                             .trace_level = level, .seed = seed, .allreduce = o.allreduce,
                             .allreduce_bf16_min = o.bf16_min };
        return run_real(&ro, db);
    }
    if (real_only)
        return cli_usage_error("run", "%s applies to real devices only (--devices cpu, "
                               "cpustream:N,cpu, ...)", real_only);

    /* Check the inputs before a run is created in the database. */
    trace_error err = { 0 };
    sim_model m;
    if (sim_model_load(o.devices ? o.devices : "h100-pcie", &m, &err) != 0)
        return cli_error("run", "%s", err.msg);
    int bad = check_names(o.policy, o.allreduce);
    if (bad)
        return bad;
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

    char name[512];
    trace_recorder_opts ro = { .run_name = run_name(name, sizeof name, o.model, o.graph_file,
                                                    o.policy, o.devices, "h100-pcie"),
                               .source = "sim" };
    trace_recorder *rec = trace_recorder_open(db, &ro, &err);
    if (!rec)
        return cli_error("run", "%s", err.msg);
    o.sink = sched_sink_recorder(rec);
    o.progress = isatty(2);
    sim_run_result r;
    int rc = sim_run(&o, &r, &err);
    int64_t run_id;
    int status = close_run(rec, rc, &err, db, &run_id);
    if (status >= 0)
        return status;
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
