/*
 * cmd_run.c -- `syncsim run`: options, then the driver (sched/run.c).
 *
 * Everything a run is given is checked by the driver against the tables
 * that define it (policies, all-reduces, the backend families of
 * cli/run_families.c and their options) before a run is created in the
 * database; the help lists them from those tables too.
 */
#include "cli.h"
#include "real/real.h"
#include "run_families.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most tokens --tokens and --prompt take (the messages name it). */
#define RUN_MAX_TOKENS 1000000

/* The machine options of every family (--barrier, ...), each once. */
static int family_options(const sched_option **out, int cap)
{
    int n = 0;
    for (int f = 0; cli_run_families[f]; f++) {
        const sched_option *opt = cli_run_families[f]->iface->options;
        for (int j = 0; opt && opt[j].name; j++) {
            bool seen = false;
            for (int k = 0; k < n && !seen; k++)
                seen = strcmp(out[k]->name, opt[j].name) == 0;
            if (!seen && n < cap)
                out[n++] = &opt[j];
        }
    }
    return n;
}

void cmd_run_help(FILE *out)
{
    const sched_option *fopt[32];
    int n_fopt = family_options(fopt, 32);
    fprintf(out, "usage: syncsim run [--model SPEC | --graph FILE] [--devices SPEC] [--policy NAME]\n"
                 "                   [--copies N] [--tokens N] [--prompt N] [--allreduce NAME]\n"
                 "                   [--bf16-min ELEMENTS] [--tp N | --pp N [--break BUG]]");
    for (int i = 0; i < n_fopt; i++)
        fprintf(out, "%s[--%s %s]", i % 3 == 0 ? "\n                   " : " ", fopt[i]->name,
                fopt[i]->arg);
    fprintf(out, " [-o DB]\n\n");
    fprintf(out,
            "Schedules a graph the way ggml's backend scheduler does (assignment passes, splits,\n"
            "split-input copies in N pipeline slots, a sync policy) and records every call and\n"
            "completion as a new run of DB. The prompt is evaluated in ubatches back to back, then\n"
            "each decode token. It prints the time per token and of the prompt, host syncs per\n"
            "token and the sync pattern of the last evaluation, as the recorded trace says.\n"
            "\n"
            "On a simulated machine (a device model) the times are simulated, and it adds the\n"
            "bytes each link moved and each device's utilisation. On real devices (cpu,\n"
            "cpustream, docs/real-backends.md) the schedule runs for real on real data, timed on\n"
            "the wall clock: every evaluation's output is read asynchronously (a synchronize every\n"
            "64 evaluations and at the end of the prompt and of the decode; a sync after every\n"
            "token would hide the broken policies' races) and compared with a reference (the same\n"
            "graphs node by node on the cpu's threads), which is left out of the times and said.\n"
            "'outputs match' means a max relative error of at most %g (a correct schedule matches\n"
            "exactly); 'outputs DIFFER from the reference' means more, or a NaN on one side: a\n"
            "synchronisation bug manifested (exit status 1). Run `syncsim check DB` on the run\n"
            "either way: it finds races whether or not they changed the numbers. Bad input is one\n"
            "line naming what is wrong (exit status 2; nothing is recorded). Progress goes to\n"
            "stderr: a bar on a terminal, for long runs; else a line every 5 s (every\n"
            "$SYNCSIM_PROGRESS_MS milliseconds when set).\n"
            "\n"
            "  --model SPEC     KIND[:key=value,...]; KIND llama (layer split), tp (tensor split,\n"
            "                   all-reduces; on real devices every rank a cpustream), moe (llama\n"
            "                   with host-memory experts, mul_mat_id; keys n_expert n_expert_used)\n"
            "                   or mlp; keys n_layer n_embd n_head n_head_kv n_ff n_vocab n_ctx\n"
            "                   ubatch dtype\n"
            "                   (default: llama, a small 8-layer model)\n"
            "  --graph FILE     a graph file (docs/graph-format.md) instead of a model\n"
            "  --devices SPEC   what runs it: comma-separated items of one machine, each one of\n",
            REAL_RUN_TOLERANCE);
    for (int f = 0; cli_run_families[f]; f++) {
        const sched_family_iface *fi = cli_run_families[f]->iface;
        char text[1024];
        size_t used = (size_t)snprintf(text, sizeof text, "%s", fi->summary);
        if (fi->default_spec && used < sizeof text)
            used += (size_t)snprintf(text + used, sizeof text - used, " (default %s)",
                                     fi->default_spec);
        if (fi->list && used < sizeof text) {
            char names[512];
            fi->list(cli_run_families[f], names, sizeof names);
            if (names[0])
                snprintf(text + used, sizeof text - used, ": %s", names);
        }
        fprintf(out, "                   %-18s ", fi->syntax);
        cli_wrapped(out, text, 38);
    }
    fprintf(out, "  --policy NAME    the sync policy (default events):\n");
    for (int i = 0; sched_policies[i]; i++) {
        fprintf(out, "                   %-18s ", sched_policies[i]->name);
        cli_wrapped(out, sched_policies[i]->summary, 38);
    }
    fprintf(out, "  --copies N       pipeline copy slots, 1 to 8 (default 2; the ggml-* policies as ggml:\n"
                 "                   4 when pipelining -- more than one device, layer split -- else 1)\n"
                 "  --tokens N       decode tokens (default 16; 0: the prompt only)\n"
                 "  --prompt N       prompt tokens, evaluated in ubatches (default 64)\n"
                 "  --allreduce NAME the all-reduce of tensor-split models (default auto; on real\n"
                 "                   devices the reference runs the same algorithm, roundings too):\n");
    for (int i = 0; i < SCHED_ALLREDUCE_COUNT; i++) {
        fprintf(out, "                   %-18s ", sched_allreduce_str((sched_allreduce)i));
        cli_wrapped(out, sched_allreduce_help((sched_allreduce)i), 38);
    }
    fprintf(out, "  --bf16-min N     elements from which bf16 compresses (default: the strategy's)\n"
                 "  --tp N           one rank per process: under `mpirun -np N`, each process runs\n"
                 "                   its rank's shard of --model tp on --devices cpustream:1 and its\n"
                 "                   all-reduces go through MPI (an allgather, summed in rank order:\n"
                 "                   outputs match the reference exactly); auto is ring, and the\n"
                 "                   copy strategies (butterfly, sycl) are refused. Each rank records\n"
                 "                   its own database, with rank= and world_size=: -o with %%d for the\n"
                 "                   rank (default syncsim.r%%d.db); then `syncsim merge` them and\n"
                 "                   `syncsim check` the job (docs/multi-rank.md). A wait longer than\n"
                 "                   --allreduce-timeout ends the rank with one line, database kept.\n"
                 "  --pp N           one pipeline stage per process: under `mpirun -np N`, rank\n"
                 "                   r runs the layers of --model llama (or moe) that one process\n"
                 "                   gives device r of N (layer l on l*N/n_layer; n_layer >= N)\n"
                 "                   on --devices cpustream:1; each stage's output activation\n"
                 "                   goes to rank r+1 by MPI_Isend (MPI_Wait before its buffer is\n"
                 "                   written again), which takes it as its input by MPI_Recv.\n"
                 "                   Every stage's output is checked against the whole model's\n"
                 "                   reference (the last stage's, the logits, bit for bit).\n"
                 "                   Databases, merge and timeouts as for --tp.\n"
                 "  --break BUG      a seeded cross-rank bug of a --tp or --pp job, for the checker:\n"
                 "                   rank-skips-allreduce  the last rank leaves out its first\n"
                 "                                         all-reduce (the others then wait at\n"
                 "                                         one it never joins: a hang)\n"
                 "                   isend-buffer-reused   each rank but 0 writes its send buffer\n"
                 "                                         of outputs before MPI_Wait of its\n"
                 "                                         MPI_Isend (a WAR race with the send)\n"
                 "                   activation-buffer-reused  (--pp) each stage but the last\n"
                 "                                         stages the next activation into its\n"
                 "                                         send buffer before MPI_Wait of the\n"
                 "                                         previous one's MPI_Isend (a WAR race)\n");
    for (int i = 0; i < n_fopt; i++) {
        char head[64], help[768];
        snprintf(head, sizeof head, "--%s %s", fopt[i]->name, fopt[i]->arg);
        fopt[i]->help(help, sizeof help);
        if (strlen(head) > 16)
            fprintf(out, "  %s\n%19s", head, "");
        else
            fprintf(out, "  %-16s ", head);
        cli_wrapped(out, help, 19);
    }
    fprintf(out, "  -o DB            the database (default ./" CLI_DEFAULT_DB ")\n\n"
                 "Pattern letters (traces/pattern.c):\n  ");
    cli_wrapped(out, trace_pattern_legend, 2);
    fprintf(out,
            "\nExamples:\n"
            "  syncsim run\n"
            "  syncsim run --model llama:n_layer=32,n_embd=4096 --policy relaxed --devices rtx4090-windows\n"
            "  syncsim run --model tp --devices h100-sxm --allreduce bf16\n"
            "  syncsim run --model llama:n_layer=2,n_embd=128 --devices cpustream:2,jitter=200us,seed=7,cpu \\\n"
            "              --tokens 8 --prompt 16 -o real.db\n"
            "  syncsim run --policy async-user-inputs -o racy.db\n"
            "  syncsim check racy.db               # exit 1: the races that policy lets in\n"
            "\nA tensor-parallel job over MPI, 2 ranks (syncsim-mpirun, installed beside syncsim --\n"
            "scripts/mpirun in a source tree -- runs mpirun with the flags it needs):\n"
            "    syncsim-mpirun 2 syncsim run --model tp:n_layer=2,n_embd=128,n_ff=256,n_vocab=256 \\\n"
            "        --devices cpustream:1 --tp 2 --tokens 4 --prompt 16 -o 'job.r%%d.db'\n"
            "    syncsim merge job.r0.db job.r1.db -o job.db && syncsim check job.db\n"
            "A pipeline over MPI, 2 stages of 2 layers each:\n"
            "    syncsim-mpirun 2 syncsim run --model llama:n_layer=4,n_embd=128,n_ff=256,n_vocab=256 \\\n"
            "        --devices cpustream:1 --pp 2 --tokens 4 --prompt 16 -o 'pp.r%%d.db'\n"
            "    syncsim merge pp.r0.db pp.r1.db -o pp.db && syncsim check pp.db\n");
}

/* Where the database goes: a path whose directory exists. Returns 0, or
 * prints what is wrong and returns 2. */
static int check_db_path(const char *db)
{
    if (!*db)
        return cli_error("run", "-o: an empty path (expected a database file)");
    struct stat st;
    if (stat(db, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_error("run", "-o %s: is a directory, not a database file", db);
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", db);
    const char *dir = dirname(copy);
    if (stat(dir, &st) != 0)
        return cli_error("run", "-o %s: cannot create it: no directory %s", db, dir);
    if (!S_ISDIR(st.st_mode))
        return cli_error("run", "-o %s: cannot create it: %s is not a directory", db, dir);
    if (access(db, F_OK) != 0 && access(dir, W_OK) != 0)
        return cli_error("run", "-o %s: cannot create it in %s: %s", db, dir, strerror(errno));
    return 0;
}

/* Removes database db and the files SQLite keeps beside it (a database
 * that a failed run created, and nothing else wrote). */
static void remove_db(const char *db)
{
    static const char *const sides[] = { "", "-wal", "-shm", "-journal" };
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s%s", db, sides[i]) < sizeof path)
            unlink(path);
    }
}

/* Closes the run's recorder after the run returned rc (err its error).
 * Returns -1 when the run succeeded and was closed, else the exit status,
 * having printed why: 2 for a failed close, 1 for a run that failed
 * part-way (its partial run stays). */
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
    fprintf(stderr, "syncsim run: the partial run is run %lld of %s\n", (long long)*run_id, db);
    return 1;
}

enum { OPT_FAMILY = 1000, OPT_TP = 900, OPT_BREAK, OPT_PP };

/* The database of rank `rank`: pattern with %d replaced by the rank (the
 * default syncsim.r%d.db). Returns 0, or prints what is wrong and returns 2. */
static int rank_db(const char *pattern, bool given, int rank, int world, char *out, size_t cap)
{
    const char *pct = strchr(pattern, '%');
    if (!pct) {
        if (given && world > 1)
            return cli_usage_error("run", "-o %s: every rank of --tp or --pp records its own database: put "
                                   "%%d where the rank goes (-o 'job.r%%d.db')", pattern);
        snprintf(out, cap, "%s", pattern);
        return 0;
    }
    if (pct[1] != 'd' || strchr(pct + 1, '%'))
        return cli_usage_error("run", "-o %s: expected one %%d (the rank) and no other %%",
                               pattern);
    snprintf(out, cap, "%.*s%d%s", (int)(pct - pattern), pattern, rank, pct + 2);
    return 0;
}

static int run_main(sched_run_opts *o, const char *db);
static void run_progress(void *ctx, int done, int total);

int cmd_run(int argc, char **argv)
{
    static const struct option common[] = {
        { "model", required_argument, NULL, 'm' },  { "graph", required_argument, NULL, 'g' },
        { "devices", required_argument, NULL, 'd' }, { "policy", required_argument, NULL, 'p' },
        { "copies", required_argument, NULL, 'c' }, { "tokens", required_argument, NULL, 't' },
        { "prompt", required_argument, NULL, 'P' }, { "allreduce", required_argument, NULL, 'a' },
        { "bf16-min", required_argument, NULL, 'b' }, { "output", required_argument, NULL, 'o' },
        { "tp", required_argument, NULL, OPT_TP }, { "break", required_argument, NULL, OPT_BREAK },
        { "pp", required_argument, NULL, OPT_PP },
    };
    enum { N_COMMON = sizeof common / sizeof common[0] };
    const sched_option *fopt[32];
    int n_fopt = family_options(fopt, 32);
    struct option longopts[N_COMMON + 32 + 1];
    memcpy(longopts, common, sizeof common);
    for (int i = 0; i < n_fopt; i++)
        longopts[N_COMMON + i] = (struct option){ fopt[i]->name, required_argument, NULL,
                                                  OPT_FAMILY + i };
    longopts[N_COMMON + n_fopt] = (struct option){ NULL, 0, NULL, 0 };

    sched_run_opts o = { .tokens = -1, .prompt = -1 };
    sched_option_value values[32];
    const char *db = NULL;
    const char *bug = NULL;
    int tp = 0, pp = 0;
    unsigned long long v;
    int c;
    while ((c = cli_getopt("run", argc, argv, "o:", longopts)) != -1) {
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
            if (cli_parse_u64(optarg, &v) || v > RUN_MAX_TOKENS)
                return cli_usage_error("run", "--%s expects a count from 0 to %d, got '%s'",
                                       c == 't' ? "tokens" : "prompt", RUN_MAX_TOKENS, optarg);
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
        case OPT_TP:
        case OPT_PP:
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 16)
                return cli_usage_error("run", "--%s expects a rank count from 1 to 16, got '%s'",
                                       c == OPT_TP ? "tp" : "pp", optarg);
            if (c == OPT_TP)
                tp = (int)v;
            else
                pp = (int)v;
            break;
        case OPT_BREAK:
            if (strcmp(optarg, "rank-skips-allreduce") == 0)
                o.skip_allreduce = true;
            else if (strcmp(optarg, "isend-buffer-reused") == 0 ||
                     strcmp(optarg, "activation-buffer-reused") == 0)
                o.isend_reuse = true;
            else
                return cli_usage_error("run", "unknown --break '%s' (expected rank-skips-allreduce "
                                       "or isend-buffer-reused with --tp, "
                                       "activation-buffer-reused with --pp)", optarg);
            bug = optarg;
            break;
        default:
            if (c >= OPT_FAMILY && c < OPT_FAMILY + n_fopt) {
                values[o.n_options++] = (sched_option_value){ fopt[c - OPT_FAMILY]->name, optarg };
                break;
            }
            return 2;           /* CLI_OPT_ERROR: said */
        }
    }
    if (optind < argc)
        return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
    if (tp && pp)
        return cli_usage_error("run", "give --tp N or --pp N, not both");
    bool pp_bug = bug && strcmp(bug, "activation-buffer-reused") == 0;
    if (bug && !(pp_bug ? pp : tp))
        return cli_usage_error("run", "--break %s seeds a bug between ranks: give --%s N (under "
                               "mpirun)", bug, pp_bug ? "pp" : "tp");
    o.options = values;
    o.progress_fn = run_progress;   /* cli/progress.c shows it: started in run_main */

    if (!tp && !pp)
        return run_main(&o, db ? db : CLI_DEFAULT_DB);
    const char *flag = tp ? "tp" : "pp";
    int ranks = tp ? tp : pp;
    o.pipeline = pp > 0;
    /* One rank of a job over processes: MPI from here to the end, every
     * rank's exit (MPI_Finalize waits for the others, so no rank is killed
     * while another still writes its database). */
    char why[256], path[4096];
    if (real_mpi_init(&o.rank, &o.world, why, sizeof why) != 0)
        return cli_error("run", "--%s %d: %s", flag, ranks, why);
    int status;
    if (o.world != ranks)
        status = cli_usage_error("run", "--%s %d: mpirun started %d %s (mpirun -np %d)", flag,
                                 ranks, o.world, o.world == 1 ? "process" : "processes", ranks);
    else if ((status = rank_db(db ? db : "syncsim.r%d.db", db != NULL, o.rank, o.world, path,
                               sizeof path)) == 0)
        status = run_main(&o, path);
    fflush(stdout);
    fflush(stderr);
    real_mpi_finalize();
    return status;
}

/* sched's progress_fn: what cli/progress.c shows. */
static void run_progress(void *ctx, int done, int total)
{
    cli_progress_total(ctx, (uint64_t)total);
    cli_progress_set(ctx, (uint64_t)done);
}

/* The run itself, into db. */
static int run_main(sched_run_opts *po, const char *db)
{
    sched_run_opts o = *po;
    /* the ticker of cli/progress.c, told by sched through run_progress */
    o.progress_ctx = cli_progress_start("run", "evaluations");
    /* Everything is checked before a run is created in the database. */
    trace_error err = { 0 };
    sched_run *run = NULL;
    if (sched_run_prepare(&o, cli_run_families, &run, &err) != 0) {
        cli_progress_end(o.progress_ctx);
        return cli_error("run", "%s", err.msg);
    }
    int bad = check_db_path(db);
    if (bad) {
        cli_progress_end(o.progress_ctx);
        sched_run_free(run);
        return bad;
    }
    trace_recorder_opts ro = { .run_name = sched_run_name(run), .source = sched_run_source(run) };
    bool existed = access(db, F_OK) == 0;
    trace_recorder *rec = trace_recorder_open(db, &ro, &err);
    if (!rec) {
        cli_progress_end(o.progress_ctx);
        sched_run_free(run);
        /* a database this run created and could not even set up (a full
         * disk) is no database: nothing is left behind */
        if (!existed)
            remove_db(db);
        return cli_error("run", "%s", err.msg);
    }
    sched_run_result res;
    int rc = sched_run_exec(run, sched_sink_recorder(rec), &res, &err);
    /* before the results, so that a bar is gone when they are printed */
    cli_progress_end(o.progress_ctx);
    o.progress_ctx = NULL;
    int64_t run_id;
    int status = close_run(rec, rc, &err, db, &run_id);
    if (status < 0)
        status = sched_run_print(run, &res, stdout, db, run_id);
    sched_run_free(run);
    return status;
}
