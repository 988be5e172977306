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
            "usage: syncsim check [TRACE|DB] [--run N] [--json] [--expect] [--max-findings K]\n"
            "                     [--redundant] [--ignore-hangs]\n"
            "\n"
            "Checks a text trace or run N of a trace database (default: the latest run) for\n"
            "missing synchronisation, by the happens-before rules of docs/trace-format.md.\n"
            "It finds:\n");
    for (int k = 1; k < TRACE_FINDING_COUNT; k++) {
        const trace_finding_info *f = trace_finding_about((trace_finding_kind)k);
        fprintf(out, "  %-19s %s\n", f->word, f->summary);
    }
    fprintf(out,
            "Every finding comes with a concrete fix. Races are grouped by the queue pair\n"
            "(the missing edge): the first of each group is shown with a count.\n"
            "Checking a database stores the check and its findings in it (tables checks,\n"
            "findings), where the database can be written; `report` and `timeline` show them.\n"
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
            "A run that is still recording, or whose producer died (`syncsim info` shows it\n"
            "'recording'), is never called clean: without findings the verdict is\n"
            "'incomplete', in the text, the JSON status and the stored check.\n"
            "\n"
            "Coverage: the verdict says what could be judged: how many device statements\n"
            "of a capture carry byte ranges (without them, races and uses after free cannot\n"
            "be seen), events an importer dropped (its ledger: `syncsim info`), ranks absent\n"
            "from a job. 'clean' is said only with full coverage.\n"
            "\n"
            "Exit status: 0 clean, with full coverage (or --expect agrees); 1 findings (or\n"
            "--expect disagrees); 2 bad input or usage; 3 no findings in an incomplete run;\n"
            "4 no findings, but partial coverage (see above: not known to be clean).\n"
            "\n"
            "Examples:\n"
            "  syncsim examples && syncsim check examples/event-missing-wait.trace   # exit 1: two races\n"
            "  syncsim check --expect examples/event-missing-wait.trace\n"
            "  syncsim run && syncsim check syncsim.db --run 1 --json > findings.json\n");
}

static bool has_redundant_expect(const trace *t)
{
    for (uint32_t i = 0; i < t->n_expects; i++)
        if (t->expects[i].kind == TRACE_FINDING_REDUNDANT_SYNC)
            return true;
    return false;
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
    const char *path = cli_trace_arg("check", argc, argv, optind);
    if (!path)
        return 2;
    opt.max_findings = expect ? 0 : (uint32_t)max;
    trace_error err = { 0 };
    trace_source src;
    /* labels are built only for what is reported, except for the minimiser */
    trace_source_opts so = { .run = (int64_t)run, .write_results = true,
                             .lazy_labels = !opt.redundant };
    if (cli_open("check", path, &so, &src) != 0)
        return 2;
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
    if (!want_redundant && expect && has_redundant_expect(src.reader.trace)) {
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

    trace_error serr = { 0 };
    int stored = check_store_report(&src, rep, &serr);
    if (stored == 1 && src.store)
        fprintf(stderr, "syncsim check: note: findings not stored: %s cannot be written here\n",
                path);
    else if (stored < 0)
        fprintf(stderr, "syncsim check: warning: findings not stored: %s\n", serr.msg);

    const trace *t = whole ? whole : src.reader.trace;
    if (expect) {
        /* with --json, standard output stays one JSON object: the verdict
         * and any difference go to standard error */
        FILE *say = json ? stderr : stdout;
        bool ok = check_report_expect(say, rep);
        if (json)
            check_report_print_json(stdout, rep, path, src.incomplete);
        if (ok)
            fprintf(say, "%s: ok, %zu finding%s as expected (%u expect line%s)\n", path,
                    check_report_count(rep), check_report_count(rep) == 1 ? "" : "s",
                    t->n_expects, t->n_expects == 1 ? "" : "s");
        else
            fprintf(say, "%s: FAILED: the findings differ from the expect lines\n", path);
        status = ok ? 0 : 1;
    } else {
        if (json)
            check_report_print_json(stdout, rep, path, src.incomplete);
        else
            check_report_print(stdout, rep, src.incomplete);
        check_status cs = check_status_of(check_report_count(rep) + check_report_dropped(rep),
                                          src.incomplete, check_report_coverage(rep));
        status = check_exit_status(cs);
    }
    check_report_free(rep);
    trace_source_close(&src);
    trace_free(whole);
    return status;
fail:
    check_report_free(rep);
    trace_source_close(&src);
    trace_free(whole);
    return cli_error("check", "%s", err.msg);
}
