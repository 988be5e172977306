/*
 * cmd_check.c -- `syncsim check [TRACE|DB]... [--run N] [--format
 * text|json|sarif] [--expect] [--max-findings K] [--redundant]
 * [--ignore-hangs] [--baseline FILE] [--write-baseline FILE]`: finds
 * missing synchronisation, streaming each trace through the checker.
 *
 * Several traces are checked one after the other into one output: the
 * compiler-style lines of each, one JSON object each, or one SARIF log.
 * The exit status is the worst of theirs, in the order 2 (bad input) > 1
 * (findings) > 3 (incomplete run) > 4 (partial coverage) > 0 (clean):
 * what needs a person's attention first.
 */
#include "check/check.h"
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cmd_check_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim check [TRACE|DB]... [--run N] [--format text|json|sarif] [--expect]\n"
            "                     [--max-findings K] [--redundant] [--ignore-hangs]\n"
            "                     [--baseline FILE] [--write-baseline FILE]\n"
            "\n"
            "Checks text traces, or run N of trace databases (default: the latest run), for\n"
            "missing synchronisation, by the happens-before rules of docs/trace-format.md.\n"
            "It finds:\n");
    for (int k = 1; k < TRACE_FINDING_COUNT; k++) {
        const trace_finding_info *f = trace_finding_about((trace_finding_kind)k);
        fprintf(out, "  %-19s %s\n", f->word, f->summary);
    }
    fprintf(out,
            "Every finding comes with a concrete fix. A finding is printed as compilers do:\n"
            "  FILE:LINE:COL: error: KIND: what happened\n"
            "  FILE:LINE:COL: note: fix: the fix\n"
            "  FILE:LINE:COL: note: the other access (QUEUE)\n"
            "(a database at the lines of the text trace it was imported from, else at the\n"
            "call site FILE:LINE, else at DB:1:1 naming the seq; redundant-sync is a\n"
            "warning), then one\n"
            "verdict line per trace: 'FILE: clean: ...' or 'FILE: 3 findings in ...'. Races\n"
            "are grouped by the queue pair (the missing edge): the first of each group is\n"
            "shown, with a note counting the others.\n"
            "Checking a database stores the check and its findings in it (tables checks,\n"
            "findings), where the database can be written; `report` and `timeline` show them.\n"
            "\n"
            "Options:\n"
            "  -r, --run N           the run of each DB to check (an id or a run's name;\n"
            "                        default: the latest)\n"
            "  -f, --format F        text (default), json: one JSON object per trace (format\n"
            "                        syncsim-findings, version 1), sarif: one SARIF 2.1.0 log\n"
            "                        for all of them (a result per finding, both statements\n"
            "                        as locations, the fix as a fix object)\n"
            "  -j, --json            --format json\n"
            "  -e, --expect          compare with each trace's expect lines: exit 0 when the\n"
            "                        findings are exactly the expected ones, else print the\n"
            "                        difference and exit 1 (`expect clean` also needs a\n"
            "                        complete run and full coverage)\n"
            "  -m, --max-findings K  keep at most K findings (the summary counts the rest)\n"
            "      --redundant       also list the syncs the minimiser can remove (loads the\n"
            "                        trace into memory)\n"
            "      --ignore-hangs    do not report hangs (e.g. a recording cut short)\n"
            "  -b, --baseline FILE   do not report the findings FILE lists (known ones); the\n"
            "                        verdict counts them apart and they do not make exit 1\n"
            "  -w, --write-baseline FILE  write every finding found to FILE, as --baseline\n"
            "                        reads it: one line 'KIND FINGERPRINT TRACE: text' each,\n"
            "                        after the header 'syncsim-baseline 1'. A fingerprint is\n"
            "                        the kind and the names involved, never lines: editing\n"
            "                        the trace elsewhere keeps a finding known\n"
            "\n"
            "A run that is still recording, or whose producer died (`syncsim info` shows it\n"
            "'recording'), is never called clean: without findings the verdict is\n"
            "'incomplete', in the text, the JSON status and the stored check.\n"
            "\n"
            "Coverage: the verdict says what could be judged: how many device statements\n"
            "of a capture carry byte ranges (without them, races and uses after free cannot\n"
            "be seen), events an importer dropped (its ledger: `syncsim info`), ranks absent\n"
            "from a job. 'clean' is said only with full coverage.\n"
            "\n"
            "Exit status: 0 clean, with full coverage (or --expect agrees; warnings alone,\n"
            "the redundant syncs of --redundant, leave it clean); 1 findings that are errors\n"
            "(or --expect disagrees); 2 bad input or usage; 3 no findings in an incomplete run;\n"
            "4 no findings, but partial coverage (see above: not known to be clean). With\n"
            "several traces, the worst of theirs: 2, then 1, 3, 4, 0.\n"
            "\n"
            "Examples:\n"
            "  syncsim examples && syncsim check examples/event-missing-wait.trace   # exit 1: two races\n"
            "  syncsim check --expect examples/event-missing-wait.trace\n"
            "  syncsim check examples/event-chain-clean.trace examples/flag-deadlock.trace  # exit 1\n"
            "  syncsim check examples/event-missing-wait.trace --format sarif > findings.sarif  # exit 1\n"
            "  syncsim check examples/event-missing-wait.trace --write-baseline known.txt  # exit 1\n"
            "  syncsim check examples/event-missing-wait.trace --baseline known.txt\n"
            "  syncsim run && syncsim check syncsim.db --run 1 --json > findings.json\n");
}

typedef enum { FORMAT_TEXT, FORMAT_JSON, FORMAT_SARIF } check_format;

/* What every trace of one `check` shares. */
typedef struct check_job {
    check_options opt;
    int64_t run;
    check_format format;
    bool expect;
    const cli_baseline *baseline;
    cli_baseline_writer *write_baseline;
    check_sarif *sarif;
} check_job;

/* Whether one of t's expect lines is of kind k. */
static bool has_expect(const trace *t, trace_finding_kind k)
{
    for (uint32_t i = 0; i < t->n_expects; i++)
        if (t->expects[i].kind == k)
            return true;
    return false;
}

/* How bad an exit status is: 2 > 1 > 3 > 4 > 0 (see the head comment). */
static int severity(int status)
{
    static const int rank[] = { 0, 3, 4, 2, 1 };
    return status >= 0 && status <= 4 ? rank[status] : 4;
}

/* The findings of a check, known ones taken out: prints them in the job's
 * format and returns the exit status of this trace. */
static int report_findings(check_job *job, const char *path, trace_source *src, const trace *t,
                           check_report *rep)
{
    trace_finding *f = NULL;
    size_t n = check_report_take(rep, &f);
    if (job->write_baseline)
        cli_baseline_writer_add(job->write_baseline, t, path, f, n);
    size_t kept = cli_baseline_filter(job->baseline, t, f, n);
    uint64_t dropped = check_report_dropped(rep), known = n - kept;
    const check_coverage *cov = check_report_coverage(rep);
    bool in_db = src->store != NULL;
    if (job->format == FORMAT_JSON) {
        check_print_json(stdout, t, path, check_report_ops(rep), trace_source_incomplete(src), cov, f, kept,
                         dropped);
    } else if (job->format == FORMAT_SARIF) {
        check_sarif_add(job->sarif, t, path, in_db, f, kept);
    } else {
        check_print_diagnostics(stdout, t, path, in_db, f, kept);
        char verdict[2048];
        check_verdict(verdict, sizeof verdict, t, check_report_ops(rep), kept + dropped,
                      trace_source_incomplete(src), cov, f, kept);
        if (in_db)
            printf("%s (run %lld): %s", path, (long long)src->run, verdict);
        else
            printf("%s: %s", path, verdict);
        if (known)
            printf("; %llu known finding%s not reported (--baseline)", (unsigned long long)known,
                   known == 1 ? "" : "s");
        putchar('\n');
    }
    uint64_t errors = check_errors_of(f, kept, dropped);
    check_status st = check_status_of(errors, trace_source_incomplete(src), cov);
    if (job->sarif && (st == CHECK_INCOMPLETE || st == CHECK_PARTIAL)) {
        /* a log without results must not look clean: say why */
        char verdict[2048];
        check_verdict(verdict, sizeof verdict, t, check_report_ops(rep), kept + dropped,
                      trace_source_incomplete(src), cov, f, kept);
        char *text = NULL;
        if (asprintf(&text, "%s: %s", path, verdict) >= 0) {
            check_sarif_notify(job->sarif, path,
                               st == CHECK_INCOMPLETE ? CHECK_SARIF_INCOMPLETE : CHECK_SARIF_PARTIAL,
                               text);
            free(text);
        }
    }
    trace_findings_free(f, kept);
    return check_exit_status(st);
}

/* Checks one trace; returns its exit status (2 after printing the error). */
/* "-" for a name of standard input that is not a regular file (a pipe):
 * the format is found by reading the start of a file, which would consume
 * what a pipe holds, so it is read as `-` is (a text trace). */
static const char *stdin_name(const char *path)
{
    struct stat sb;
    bool names_stdin = strcmp(path, "/dev/stdin") == 0 || strcmp(path, "/dev/fd/0") == 0 ||
                       strcmp(path, "/proc/self/fd/0") == 0;
    return names_stdin && fstat(STDIN_FILENO, &sb) == 0 && !S_ISREG(sb.st_mode) ? "-" : path;
}

static int check_one(check_job *job, const char *path)
{
    path = stdin_name(path);
    check_options opt = job->opt;
    trace_error err = { 0 };
    trace_source src;
    /* labels are built only for what is reported, except for the minimiser */
    trace_source_opts so = { .run = job->run, .write_results = true,
                             .lazy_labels = !opt.redundant };
    if (cli_open("check", path, &so, &src) != 0)
        return 2;
    cli_progress *prog = cli_progress_start("check", "statements");
    cli_progress_source(prog, &src);
    trace *whole = NULL;
    check_report *rep = NULL;
    int status = 2;

    bool want_redundant = opt.redundant;
    opt.redundant = false;
    /* the minimiser needs the statements in memory */
    if (want_redundant && trace_source_load(&src, &whole, &err) != 0)
        goto fail;
    if (check_trace(&src.reader, &opt, &rep, &err) != 0)
        goto fail;
    if (!want_redundant && job->expect && has_expect(src.reader.trace, TRACE_FINDING_REDUNDANT_SYNC)) {
        /* `expect redundant-sync` lines: check again, with the minimiser */
        check_report_free(rep);
        rep = NULL;
        want_redundant = true;
        if (trace_reader_rewind(&src.reader, &err) != 0 ||
            trace_source_load(&src, &whole, &err) != 0)
            goto fail;
    }
    if (want_redundant) {
        check_report_free(rep);
        rep = NULL;
        trace_reader_rewind(&src.reader, &err);
        opt.redundant = true;
        if (check_trace(&src.reader, &opt, &rep, &err) != 0)
            goto fail;
    }
    cli_progress_unwrap(prog, &src.reader);
    cli_progress_end(prog);     /* gone before the output */
    prog = NULL;

    trace_error serr = { 0 };
    int stored = check_store_report(&src, rep, &serr);
    if (stored == 1 && src.store)
        fprintf(stderr, "syncsim check: note: findings not stored: %s cannot be written here\n",
                path);
    else if (stored < 0)
        fprintf(stderr, "syncsim check: warning: findings not stored: %s\n", serr.msg);

    const trace *t = whole ? whole : src.reader.trace;
    if (job->expect) {
        /* with --json, standard output stays JSON: the verdict and any
         * difference go to standard error */
        FILE *say = job->format != FORMAT_TEXT ? stderr : stdout;
        bool ok = check_report_expect(say, rep);
        bool incomplete = trace_source_incomplete(&src);
        const check_coverage *cov = check_report_coverage(rep);
        /* no findings is not clean when the run is incomplete or the check
         * could not look everywhere */
        bool unclean = ok && has_expect(t, TRACE_FINDING_CLEAN) &&
                       check_status_of(check_report_count(rep), incomplete, cov) != CHECK_CLEAN;
        if (job->format == FORMAT_JSON)
            check_report_print_json(stdout, rep, path, trace_source_incomplete(&src));
        else if (job->format == FORMAT_SARIF)
            check_sarif_add(job->sarif, t, path, src.store != NULL, check_report_findings(rep),
                            check_report_count(rep));
        if (unclean) {
            char verdict[2048];
            check_verdict(verdict, sizeof verdict, t, check_report_ops(rep),
                          check_report_count(rep), incomplete, cov, NULL, 0);
            fprintf(say, "%s: FAILED: the trace expects clean, but the check is not: %s\n", path,
                    verdict);
        } else if (ok) {
            fprintf(say, "%s: ok, %zu finding%s as expected (%u expect line%s)\n", path,
                    check_report_count(rep), check_report_count(rep) == 1 ? "" : "s",
                    t->n_expects, t->n_expects == 1 ? "" : "s");
        } else {
            fprintf(say, "%s: FAILED: the findings differ from the expect lines\n", path);
        }
        status = ok && !unclean ? 0 : 1;
    } else {
        /* standard input as compilers name it */
        status = report_findings(job, strcmp(path, "-") == 0 ? "<stdin>" : path, &src, t, rep);
    }
    check_report_free(rep);
    trace_source_close(&src);
    trace_free(whole);
    return status;
fail:
    cli_progress_unwrap(prog, &src.reader);
    cli_progress_end(prog);
    check_report_free(rep);
    trace_source_close(&src);
    trace_free(whole);
    return cli_error("check", "%s", err.msg);
}

int cmd_check(int argc, char **argv)
{
    enum { OPT_REDUNDANT = 256, OPT_IGNORE_HANGS };
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "format", required_argument, NULL, 'f' },
        { "json", no_argument, NULL, 'j' },
        { "expect", no_argument, NULL, 'e' },
        { "max-findings", required_argument, NULL, 'm' },
        { "redundant", no_argument, NULL, OPT_REDUNDANT },
        { "ignore-hangs", no_argument, NULL, OPT_IGNORE_HANGS },
        { "baseline", required_argument, NULL, 'b' },
        { "write-baseline", required_argument, NULL, 'w' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0, max = 0;
    check_job job = { .format = FORMAT_TEXT };
    const char *baseline = NULL, *write_baseline = NULL;
    int c;
    while ((c = cli_getopt("check", argc, argv, "r:f:jem:b:w:", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("check", optarg, &run) != 0)
                return 2;
            break;
        case 'f':
            if (strcmp(optarg, "text") == 0)
                job.format = FORMAT_TEXT;
            else if (strcmp(optarg, "json") == 0)
                job.format = FORMAT_JSON;
            else if (strcmp(optarg, "sarif") == 0)
                job.format = FORMAT_SARIF;
            else
                return cli_usage_error("check", "--format expects text, json or sarif, got '%s'",
                                       optarg);
            break;
        case 'j':
            job.format = FORMAT_JSON;
            break;
        case 'e':
            job.expect = true;
            break;
        case 'm':
            if (cli_parse_u64(optarg, &max) != 0 || max > UINT32_MAX)
                return cli_usage_error("check", "--max-findings expects a count from 0 to %u, "
                                       "got '%s'", UINT32_MAX, optarg);
            break;
        case OPT_REDUNDANT:
            job.opt.redundant = true;
            break;
        case OPT_IGNORE_HANGS:
            job.opt.ignore_hangs = true;
            break;
        case 'b':
            baseline = optarg;
            break;
        case 'w':
            write_baseline = optarg;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    /* the traces: those given, else ./syncsim.db */
    const char *fallback = NULL;
    if (optind == argc && !(fallback = cli_trace_arg("check", argc, argv, optind)))
        return 2;
    if (job.expect && (baseline || write_baseline))
        return cli_usage_error("check", "--expect compares with the expect lines; it takes no "
                               "--baseline or --write-baseline");
    for (int i = optind; write_baseline && i < argc; i++)
        if (cli_output_check("check", write_baseline, argv[i]) != 0)
            return 2;
    job.run = (int64_t)run;
    job.opt.max_findings = job.expect ? 0 : (uint32_t)max;
    cli_baseline *known = NULL;
    if (baseline && cli_baseline_read("check", baseline, &known) != 0)
        return 2;
    job.baseline = known;
    if (write_baseline && !(job.write_baseline = cli_baseline_writer_new())) {
        cli_baseline_free(known);
        return cli_error("check", "out of memory");
    }
    if (job.format == FORMAT_SARIF && !(job.sarif = check_sarif_begin(stdout))) {
        cli_baseline_free(known);
        cli_baseline_writer_free(job.write_baseline);
        return cli_error("check", "out of memory");
    }

    int status = 0;
    const char *const *paths = fallback ? &fallback : (const char *const *)argv + optind;
    int n_paths = fallback ? 1 : argc - optind;
    for (int i = 0; i < n_paths; i++) {
        int st = check_one(&job, paths[i]);
        if (st == 2 && job.sarif)
            check_sarif_notify(job.sarif, paths[i], CHECK_SARIF_UNREADABLE, cli_last_error());
        if (severity(st) > severity(status))
            status = st;
    }
    if (job.sarif)
        check_sarif_end(job.sarif, status);
    if (job.write_baseline &&
        cli_baseline_writer_finish(job.write_baseline, "check", write_baseline) != 0)
        status = 2;
    cli_baseline_free(known);
    return status;
}
