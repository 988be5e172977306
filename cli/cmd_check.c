/*
 * cmd_check.c -- `syncsim check TRACE|DB [--run N] [--json] [--expect]
 * [--max-findings K] [--redundant] [--ignore-hangs]`: finds missing
 * synchronisation, streaming the trace through the checker.
 */
#include "check/check.h"
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_check_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim check TRACE|DB [--run N] [--json] [--expect] [--max-findings K]\n"
            "                     [--redundant] [--ignore-hangs]\n"
            "\n"
            "Checks a text trace or run N of a trace database (default: the latest run) for\n"
            "missing synchronisation, by the happens-before rules of docs/trace-format.md:\n"
            "  race                two accesses to overlapping bytes, one a write, unordered\n"
            "  wait-unrecorded     a wait whose event has no earlier record (orders nothing)\n"
            "  hang                queues that can never advance, and why (deadlock cycles)\n"
            "  collective-mismatch participants of one collective generation disagree\n"
            "  barrier-mismatch    more queues than count= arrive at a barrier generation,\n"
            "                      or they disagree on count=\n"
            "  use-after-free      an access ordered after a free of its buffer\n"
            "  redundant-sync      (with --redundant) a sync whose removal adds no finding\n"
            "Every finding comes with a concrete fix. Races are grouped by the queue pair\n"
            "(the missing edge): the first of each group is shown with a count.\n"
            "Checking a database stores the findings in it (table findings).\n"
            "\n"
            "Options:\n"
            "  -r, --run N           the run of DB to check (default: the latest)\n"
            "  -j, --json            one JSON object (format syncsim-findings, version 1)\n"
            "  -e, --expect          compare with the trace's expect lines: exit 0 when the\n"
            "                        findings are exactly the expected ones, else print the\n"
            "                        difference and exit 1\n"
            "  -m, --max-findings K  keep at most K findings (the summary counts the rest)\n"
            "      --redundant       also list the syncs the minimiser can remove (loads the\n"
            "                        trace into memory)\n"
            "      --ignore-hangs    do not report hangs (e.g. a recording cut short)\n"
            "\n"
            "Exit status: 0 no findings (or --expect agrees), 1 findings (or --expect\n"
            "disagrees), 2 bad input or usage.\n"
            "\n"
            "Examples:\n"
            "  syncsim check litmus/event-missing-wait.trace\n"
            "  syncsim check --expect tests/litmus/rule3-event-most-recent-record.trace\n"
            "  syncsim check syncsim.db --run 2 --json > findings.json\n");
}

static bool has_redundant_expect(const trace *t)
{
    for (uint32_t i = 0; i < t->n_expects; i++)
        if (t->expects[i].kind == TRACE_FINDING_REDUNDANT_SYNC)
            return true;
    return false;
}

/* Opens path and loads it whole (for the minimiser). */
static int load_whole(const char *path, int64_t run, trace **out, trace_error *err)
{
    trace_reader r;
    if (trace_open_any(path, run, &r, err) != 0)
        return -1;
    return trace_reader_load(&r, out, err);
}

int cmd_check(int argc, char **argv)
{
    enum { OPT_REDUNDANT = 256, OPT_IGNORE_HANGS };
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "json", no_argument, NULL, 'j' },
        { "expect", no_argument, NULL, 'e' },
        { "max-findings", required_argument, NULL, 'm' },
        { "redundant", no_argument, NULL, OPT_REDUNDANT },
        { "ignore-hangs", no_argument, NULL, OPT_IGNORE_HANGS },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0, max = 0;
    bool json = false, expect = false;
    check_options opt = { 0 };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":r:jem:", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("check", optarg, &run) != 0)
                return 2;
            break;
        case 'j':
            json = true;
            break;
        case 'e':
            expect = true;
            break;
        case 'm':
            if (cli_parse_u64(optarg, &max) != 0 || max > UINT32_MAX)
                return cli_usage_error("check", "--max-findings expects a count, got '%s'",
                                       optarg);
            break;
        case OPT_REDUNDANT:
            opt.redundant = true;
            break;
        case OPT_IGNORE_HANGS:
            opt.ignore_hangs = true;
            break;
        case ':':
            return cli_usage_error("check", "option '%s' needs a value", argv[optind - 1]);
        default:
            return cli_usage_error("check", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("check", optind >= argc ? "missing trace" : "too many arguments");
    opt.max_findings = expect ? 0 : (uint32_t)max;
    const char *path = argv[optind];
    trace_error err = { 0 };
    bool is_db = strcmp(path, "-") != 0 && trace_path_is_sqlite(path);
    trace_store *st = NULL;
    int64_t run_id = (int64_t)run;
    trace_reader r;
    memset(&r, 0, sizeof r);
    trace *whole = NULL;
    check_report *rep = NULL;
    int status = 2;

    if (is_db) {
        st = trace_store_open(path, false, &err);
        if (!st)
            return cli_error("check", "%s", err.msg);
        if (run_id == 0)
            run_id = trace_store_latest_run(st);
        if (run_id <= 0) {
            trace_store_close(st);
            return cli_error("check", "%s: the database holds no run", path);
        }
        if (trace_store_reader(st, run_id, &r, &err) != 0)
            goto fail;
    } else if (trace_open_any(path, run_id, &r, &err) != 0) {
        return cli_error("check", "%s", err.msg);
    }

    bool want_redundant = opt.redundant;
    opt.redundant = false;
    if (want_redundant) {
        /* the minimiser needs the statements in memory */
        if (trace_reader_load(&r, &whole, &err) != 0)
            goto fail;
        trace_reader_memory(&r, whole);
    }
    if (check_trace(&r, &opt, &rep, &err) != 0)
        goto fail;
    if (expect && !want_redundant && has_redundant_expect(whole ? whole : r.trace)) {
        /* `expect redundant-sync` lines: check again with the minimiser */
        check_report_free(rep);
        rep = NULL;
        trace_reader_close(&r);
        if (st) {
            if (trace_store_reader(st, run_id, &r, &err) != 0 || trace_reader_load(&r, &whole, &err) != 0)
                goto fail;
        } else if (load_whole(path, run_id, &whole, &err) != 0)
            goto fail;
        trace_reader_memory(&r, whole);
        opt.redundant = true;
        if (check_trace(&r, &opt, &rep, &err) != 0)
            goto fail;
    } else if (want_redundant) {
        check_report_free(rep);
        rep = NULL;
        trace_reader_close(&r);
        trace_reader_memory(&r, whole);
        opt.redundant = true;
        if (check_trace(&r, &opt, &rep, &err) != 0)
            goto fail;
    }

    if (st) {
        trace_finding_row *rows = NULL;
        size_t n_rows = 0;
        if (check_report_rows(rep, &rows, &n_rows) != 0) {
            trace_error_set(&err, TRACE_ENOMEM, "out of memory");
            goto fail;
        }
        trace_error serr = { 0 };
        /* The reader holds the database read-only; a second handle writes. */
        trace_store *w = trace_store_open(path, false, &serr);
        if (!w || trace_store_save_findings(w, run_id, rows, n_rows, &serr) != 0)
            fprintf(stderr, "syncsim check: warning: findings not stored: %s\n", serr.msg);
        trace_store_close(w);
        check_report_rows_free(rows, n_rows);
    }

    const trace *t = whole ? whole : r.trace;
    if (expect) {
        bool ok = check_report_expect(stdout, rep);
        if (json)
            check_report_print_json(stdout, rep, path);
        if (ok)
            printf("%s: ok, %zu finding%s as expected (%u expect line%s)\n", path,
                   check_report_count(rep), check_report_count(rep) == 1 ? "" : "s",
                   t->n_expects, t->n_expects == 1 ? "" : "s");
        else
            printf("%s: FAILED: the findings differ from the expect lines\n", path);
        status = ok ? 0 : 1;
    } else {
        if (json)
            check_report_print_json(stdout, rep, path);
        else
            check_report_print(stdout, rep);
        status = check_report_count(rep) || check_report_dropped(rep) ? 1 : 0;
    }
    check_report_free(rep);
    trace_reader_close(&r);
    trace_free(whole);
    trace_store_close(st);
    return status;
fail:
    check_report_free(rep);
    trace_reader_close(&r);
    trace_free(whole);
    trace_store_close(st);
    return cli_error("check", "%s", err.msg);
}
