/*
 * cmd_replay.c -- `syncsim replay`: re-time a recorded or hand-written
 * trace through a device model, optionally without some syncs.
 */
#include "check/check.h"
#include "cli.h"
#include "sim/sim.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_replay_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim replay TRACE|DB [--run N] [--devices MODEL] [--durations recorded|model]\n"
            "                      [--drop-sync SEQ[,SEQ...]]... [--ordering-only] [-o DB]\n"
            "\n"
            "Re-times every statement of a trace through a device model, honouring every\n"
            "happens-before edge (queue order, submission, events, syncs, collectives, barriers,\n"
            "flags). Prints the makespan and the busy time of each queue; with --drop-sync, the\n"
            "statements named by seq (waits, syncs, awaits) are removed and the gain is printed.\n"
            "The re-timed trace is checked as it is made: a what-if that lets in findings\n"
            "its source does not have is called unsafe (exit status 1). It is recorded only\n"
            "where -o says: a new run of DB (which may be the input database, when named),\n"
            "with metadata replay_of=PATH and, when the input is a database,\n"
            "source_run=N, and its check stored, so that reports and timelines show its\n"
            "findings. Without -o nothing is written, and the input's latest run stays\n"
            "what it was.\n"
            "\n"
            "Exit status: 0 done, 1 the replay hangs or the what-if is unsafe, 2 bad input.\n"
            "\n"
            "  --run N          run of a database (default: the latest)\n"
            "  --devices MODEL  device model (default: the run's, else h100-pcie)\n"
            "  --durations D    recorded: keep dur= of ops, copies, collectives (default);\n"
            "                   model: price every statement with the device model, from\n"
            "                   its accesses and the flops=, bytes=, overhead_ns= and\n"
            "                   algorithm= attributes `syncsim run` records\n"
            "  --drop-sync SEQ  remove the sync statement with this seq (repeatable, or a list)\n"
            "                   refused (exit 2) where the trace's coverage is partial\n"
            "                   (`syncsim check` says why): safety cannot be judged there\n"
            "  --ordering-only  drop syncs of a trace whose coverage is partial all the\n"
            "                   same, judging only ordering (hangs), never races\n"
            "  -o DB            record the re-timed trace as a new run of DB\n"
            "\n"
            "Examples:\n"
            "  syncsim replay syncsim.db --run 1\n"
            "  syncsim replay syncsim.db --run 1 --drop-sync 101,304 --durations model -o what-if.db\n"
            "  syncsim replay syncsim.db --run 1 --drop-sync 106    # exit 1: unsafe, a race\n");
}

/* How many findings a check of r finds (kept or not); -1 with err. With
 * src, the check is stored with src's run, and *verdict says it. */
static int64_t count_findings(trace_reader *r, trace_source *src, char *verdict, size_t cap,
                              trace_error *err)
{
    check_options opt = { .max_findings = 100 };
    check_report *rep = NULL;
    if (check_trace(r, &opt, &rep, err) != 0)
        return -1;
    int64_t found = (int64_t)(check_report_count(rep) + check_report_dropped(rep));
    if (src) {
        trace_error serr = { 0 };
        if (check_store_report(src, rep, &serr) < 0)
            fprintf(stderr, "syncsim replay: warning: the check of the replay is not stored: "
                            "%s\n", serr.msg);
    }
    if (verdict)
        check_verdict(verdict, cap, r->trace, check_report_ops(rep), (uint64_t)found,
                      src && trace_source_incomplete(src), check_report_coverage(rep),
                      check_report_findings(rep), check_report_count(rep));
    check_report_free(rep);
    return found;
}

/* A what-if is checked as it is made, against the trace t it came from:
 * the run just written to db (its check is stored with it, so that reports
 * and timelines show it), or, with no db, the replayed trace in memory
 * (replayed). Prints the verdict; returns the exit status: 1 when the
 * replay has findings its source does not, 0 otherwise, 2 on error. */
static int check_what_if(trace *t, trace *replayed, const char *db, int64_t out_run,
                         int n_drop)
{
    trace_error err = { 0 };
    trace_reader r;
    trace_reader_memory(&r, t);
    int64_t before = count_findings(&r, NULL, NULL, 0, &err);
    trace_reader_close(&r);
    char verdict[1024];
    int64_t after = -1;
    if (before >= 0 && db) {
        trace_source src;
        trace_source_opts so = { .run = out_run, .write_results = true, .lazy_labels = true };
        if (trace_source_open(&src, db, &so, &err) == 0) {
            after = count_findings(&src.reader, &src, verdict, sizeof verdict, &err);
            trace_source_close(&src);
        }
    } else if (before >= 0) {
        trace_reader_memory(&r, replayed);
        after = count_findings(&r, NULL, verdict, sizeof verdict, &err);
        trace_reader_close(&r);
    }
    if (before < 0 || after < 0)
        return cli_error("replay", "checking the replay: %s", err.msg);
    if (db)
        printf("check of run %lld: %s\n", (long long)out_run, verdict);
    else
        printf("check of the replay: %s\n", verdict);
    if (after > before) {
        char where[4200];
        if (db)
            snprintf(where, sizeof where, "syncsim check %s --run %lld lists them", db,
                     (long long)out_run);
        else
            snprintf(where, sizeof where, "-o DB records the replay, which syncsim check DB "
                                          "then lists");
        printf("unsafe: %s lets %lld finding%s in that the trace it came from does not have "
               "(%s); its gain is not one to take\n",
               n_drop ? "dropping those syncs" : "this replay", (long long)(after - before),
               after - before == 1 ? "" : "s", where);
        return 1;
    }
    return 0;
}

/* Run metadata the check of a replay needs from its source, so that its
 * coverage says what the source's would: the replay knows no more accesses
 * than its source, and assumed no fewer orders. */
static bool coverage_key(const char *key)
{
    return !strncmp(key, TRACE_LEDGER_PREFIX, strlen(TRACE_LEDGER_PREFIX)) ||
           !strcmp(key, "accesses") || !strcmp(key, "partial") || !strcmp(key, "ranks.absent") ||
           !strcmp(key, "forced");
}

/* Replays the loaded trace t (a reader over it does not own it). */
static int replay_once(trace *t, const sim_replay_opts *o, sim_replay_result *res,
                       trace_error *err)
{
    trace_reader r;
    trace_reader_memory(&r, t);
    return sim_replay(&r, o, res, err);
}

static int replay_and_record(trace *t, const char *path, const char *db, bool from_db,
                             int64_t run, const sim_model *mp, bool recorded,
                             const uint64_t *drops, int n_drop);

int cmd_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },       { "devices", required_argument, NULL, 'd' },
        { "durations", required_argument, NULL, 'D' }, { "drop-sync", required_argument, NULL, 'x' },
        { "output", required_argument, NULL, 'o' },    { "ordering-only", no_argument, NULL, 'O' },
        { NULL, 0, NULL, 0 },
    };
    bool ordering_only = false;
    const char *devices = NULL, *db = NULL;
    int64_t run = 0;
    bool recorded = true;
    uint64_t drops[256];
    int n_drop = 0;
    unsigned long long v;
    int c;
    while ((c = cli_getopt("replay", argc, argv, "o:", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("replay", optarg, &v) != 0)
                return 2;
            run = (int64_t)v;
            break;
        case 'd': devices = optarg; break;
        case 'o': db = optarg; break;
        case 'D':
            if (strcmp(optarg, "recorded") == 0)
                recorded = true;
            else if (strcmp(optarg, "model") == 0)
                recorded = false;
            else
                return cli_usage_error("replay", "--durations expects recorded or model, got '%s'", optarg);
            break;
        case 'x': {
            char *copy = strdup(optarg), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (cli_parse_u64(tok, &v) || n_drop == 256) {
                    if (n_drop == 256)
                        cli_usage_error("replay", "--drop-sync takes at most 256 seqs");
                    else
                        cli_usage_error("replay", "--drop-sync expects statement seqs, got '%s'", tok);
                    free(copy); /* after the message: tok points into it */
                    return 2;
                }
                drops[n_drop++] = v;
            }
            free(copy);
            break;
        }
        case 'O':
            ordering_only = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *path = cli_trace_arg("replay", argc, argv, optind);
    if (!path)
        return 2;
    trace_error err = { 0 };
    /* Read once, pinning "the latest run" now: the run this command records
     * becomes the latest of the database, and the replays must not read it. */
    trace_source src;
    trace_source_opts so = { .run = run };
    if (cli_open("replay", path, &so, &src) != 0)
        return 2;
    bool from_db = src.store != NULL;
    run = src.run;
    trace *t = NULL;
    int lrc = trace_source_load(&src, &t, &err);
    trace_source_close(&src);
    if (lrc != 0)
        return cli_error("replay", "%s", err.msg);
    if (n_drop && !ordering_only) {
        /* whether a what-if is safe is a check: it needs every access */
        check_coverage cov;
        check_coverage_of(&cov, t);
        if (!check_coverage_full(&cov)) {
            char missing[1024];
            check_coverage_missing(missing, sizeof missing, &cov, t);
            trace_free(t);
            return cli_error("replay",
                             "--drop-sync: %s: coverage is partial, so whether dropping a sync "
                             "is safe cannot be judged: %s (--ordering-only to drop it all the "
                             "same, judging ordering only)",
                             path, missing);
        }
    }

    /* The run's own device model by default. */
    char spec[256] = "h100-pcie";
    if (devices)
        snprintf(spec, sizeof spec, "%s", devices);
    else if (trace_get_meta(t, "devices"))
        snprintf(spec, sizeof spec, "%s", trace_get_meta(t, "devices"));
    sim_model m;
    if (sim_model_load(spec, &m, &err) != 0) {
        trace_free(t);
        if (!devices) {
            /* A real run: its devices are no model until one is calibrated. */
            char run_arg[32] = "";
            if (from_db)
                snprintf(run_arg, sizeof run_arg, " --run %lld", (long long)run);
            return cli_error("replay", "%s%s was recorded on devices '%s', which are no device "
                             "model: fit one to it (syncsim calibrate %s%s -o my.dev) and "
                             "replay with --devices ./my.dev, or name a model with --devices "
                             "MODEL", path, run_arg, spec, path, run_arg);
        }
        return cli_error("replay", "%s", err.msg);
    }
    int status = replay_and_record(t, path, db, from_db, run, &m, recorded, drops, n_drop);
    trace_free(t);
    return status;
}

/* What a replay found: makespan, accuracy, the gain of the dropped syncs,
 * busy time per queue. */
static void print_summary(const char *path, const sim_model *m, bool recorded,
                          const sim_replay_result *before, const sim_replay_result *after,
                          int n_drop)
{
    printf("replay of %s on %s (durations %s): %llu statements\n", path, m->name,
           recorded ? "recorded" : "model", (unsigned long long)after->n_stmts);
    printf("makespan: %.3f ms", (double)after->makespan_ns / 1e6);
    if (after->recorded_makespan_ns > 0)
        printf(" (recorded %.3f ms, %+.2f%%)", (double)after->recorded_makespan_ns / 1e6,
               100.0 * ((double)after->makespan_ns - (double)after->recorded_makespan_ns) /
                   (double)after->recorded_makespan_ns);
    printf("\n");
    if (after->median_start_error_ns >= 0)
        printf("start times against the recording: median error %.3f ms over %llu statements\n",
               (double)after->median_start_error_ns / 1e6,
               (unsigned long long)after->n_start_compared);
    if (n_drop && after->n_dropped < (uint64_t)n_drop)
        printf("note: %llu of the %d seqs given are not wait, sync or await statements\n",
               (unsigned long long)((uint64_t)n_drop - after->n_dropped), n_drop);
    if (n_drop)
        printf("dropped %llu sync%s: %.3f ms -> %.3f ms, gain %.3f ms (%.2f%%)\n",
               (unsigned long long)after->n_dropped, after->n_dropped == 1 ? "" : "s",
               (double)before->makespan_ns / 1e6,
               (double)after->makespan_ns / 1e6,
               (double)(before->makespan_ns - after->makespan_ns) / 1e6,
               before->makespan_ns ? 100.0 * (double)(before->makespan_ns - after->makespan_ns) /
                                        (double)before->makespan_ns : 0.0);
    printf("busy per queue:");
    for (uint32_t q = 0; q < after->n_queues; q++)
        printf("%s %s %.3f ms (%.1f%%)", q ? "," : "", after->queue_names[q],
               (double)after->busy_ns[q] / 1e6,
               after->makespan_ns ? 100.0 * (double)after->busy_ns[q] / (double)after->makespan_ns : 0.0);
    printf("\n");
}

/* The dry runs, the recorded replay and the summary; returns the exit status. */
static int replay_and_record(trace *t, const char *path, const char *db, bool from_db,
                             int64_t run, const sim_model *mp, bool recorded,
                             const uint64_t *drops, int n_drop)
{
    sim_model m = *mp;
    trace_error err = { 0 };

    sim_replay_opts base = { .model = &m, .durations_recorded = recorded };
    sim_replay_result before, after;
    /* A dry run first: a trace that cannot be replayed leaves no run behind. */
    sim_replay_opts dry = base;
    dry.drop_seq = drops;
    dry.n_drop = n_drop;
    if (replay_once(t, &dry, &after, &err) != 0) {
        cli_error("replay", "%s", err.msg);
        return strstr(err.msg, "hangs") ? 1 : 2;
    }
    if ((uint64_t)n_drop > after.n_dropped) {
        /* the latest run of a database is often the previous what-if */
        const char *src_run = trace_get_meta(t, "source_run");
        char hint[128] = "";
        if (from_db && src_run)
            snprintf(hint, sizeof hint, "; run %lld read here is itself a replay of run %s: "
                     "--run %s replays that one", (long long)run, src_run, src_run);
        return cli_error("replay",
                         "--drop-sync: %llu of the %d seqs given name no wait, sync or await "
                         "statement of %s (only those can be dropped; `syncsim minimize` and "
                         "`syncsim check --json` print seqs)%s",
                         (unsigned long long)(n_drop - after.n_dropped), n_drop, path, hint);
    }
    if (n_drop && replay_once(t, &base, &before, &err) != 0) {
        cli_error("replay", "%s (without the dropped syncs)", err.msg);
        return strstr(err.msg, "hangs") ? 1 : 2;
    }

    char name[512];
    if (from_db)
        snprintf(name, sizeof name, "replay of run %lld%s", (long long)run,
                 n_drop ? " without some syncs" : "");
    else
        snprintf(name, sizeof name, "replay of %s%s", path, n_drop ? " without some syncs" : "");
    /* Recorded where -o says, else kept in memory for the check only. */
    trace_recorder_opts ro = { .run_name = name, .source = "replay" };
    trace_recorder *rec = NULL;
    trace *replayed = NULL;
    sched_sink sink;
    if (db) {
        if (!(rec = trace_recorder_open(db, &ro, &err)))
            return cli_error("replay", "%s", err.msg);
        sink = sched_sink_recorder(rec);
    } else {
        if (!(replayed = trace_new()))
            return cli_error("replay", "out of memory");
        for (uint32_t i = 0; i < t->n_meta; i++) {
            const char *key = trace_str(t, t->meta[i].key);
            if (coverage_key(key) &&
                trace_set_meta(replayed, key, trace_str(t, t->meta[i].value)) != 0) {
                trace_free(replayed);
                return cli_error("replay", "out of memory");
            }
        }
        sink = sched_sink_memory(replayed);
    }
    sim_replay_opts o = base;
    o.drop_seq = drops;
    o.n_drop = n_drop;
    o.out = &sink;
    int rc = replay_once(t, &o, &after, &err);
    if (!db) {
        if (rc != 0) {
            trace_free(replayed);
            return cli_error("replay", "%s", err.msg);
        }
        print_summary(path, &m, recorded, &before, &after, n_drop);
        printf("not recorded (-o DB records the replay as a run)\n");
        int status = check_what_if(t, replayed, NULL, 0, n_drop);
        trace_free(replayed);
        return status;
    }
    trace_recorder_meta(rec, "producer", "syncsim replay");
    trace_recorder_meta(rec, "devices", m.name);
    trace_recorder_meta(rec, "replay_of", path);
    /* What this what-if changed, for reports and for whoever reads the run later. */
    trace_recorder_meta(rec, "durations", recorded ? "recorded" : "model");
    /* The replay knows no more accesses than its source: its check's
     * coverage must say what the source's would. */
    for (uint32_t i = 0; i < t->n_meta; i++) {
        const char *key = trace_str(t, t->meta[i].key);
        if (coverage_key(key))
            trace_recorder_meta(rec, key, trace_str(t, t->meta[i].value));
    }
    if (n_drop) {
        char list[256 * 21] = "";
        size_t used = 0;
        for (int i = 0; i < n_drop && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%llu", i ? "," : "",
                                     (unsigned long long)drops[i]);
        trace_recorder_meta(rec, "dropped_syncs", list);
    }
    if (from_db) {
        /* The run read (pinned above), so that a report can list a run's replays. */
        char id[24];
        snprintf(id, sizeof id, "%lld", (long long)run);
        trace_recorder_meta(rec, "source_run", id);
    }
    int64_t out_run = trace_recorder_run(rec);
    trace_error cerr = { 0 };
    int crc = trace_recorder_close(rec, &cerr);
    if (rc != 0)
        return cli_error("replay", "%s", err.msg);
    if (crc != 0)
        return cli_error("replay", "%s", cerr.msg);

    print_summary(path, &m, recorded, &before, &after, n_drop);
    printf("written as run %lld of %s\n", (long long)out_run, db);
    return check_what_if(t, NULL, db, out_run, n_drop);
}
