/*
 * cmd_minimize.c -- `syncsim minimize TRACE|DB [--run N] [-o OUT]`: finds
 * the synchronisations a trace can do without (greedy, incremental; see
 * docs/checker.md) and optionally writes the trace without them.
 */
#include "check/check.h"
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Removable synchronisations listed without --all: enough to read, and a
 * scheduler run can have thousands. */
#define MIN_LIST 20

void cmd_minimize_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim minimize [TRACE|DB] [--run N] [-o OUT] [--quiet] [--all]\n"
            "                        [--allow-findings] [--ordering-only]\n"
            "\n"
            "Tries removing each wait, sync and await statement and each barrier\n"
            "generation, in submission order, and keeps a removal when checking the trace\n"
            "without it finds nothing new (no finding the trace did not already have).\n"
            "Prints what can go (line or seq, queue, kind) and, when statements carry\n"
            "token= or iter= attributes, the sync pattern of each host iteration before\n"
            "and after, in the letters 'syncsim run' prints:\n");
    fputs("  ", out);
    cli_wrapped(out, trace_pattern_legend, 2);
    fprintf(out,
            "e.g. sassassasg -> saaasg. Re-checking is incremental: each candidate is\n"
            "replayed from a checkpoint only until the engine state meets the original\n"
            "run again. Removing a statement means deleting its line: with several host\n"
            "threads a stream wait can carry the only order between two hosts through\n"
            "the host that submitted it, and then it stays.\n"
            "\n"
            "The promise: on a trace without findings, deleting what is listed (any of it,\n"
            "or all of it) leaves a trace without findings. A trace that already has\n"
            "findings is not minimised unless --allow-findings: there a removal can only\n"
            "promise no new *reported* finding, since the checker reports each access\n"
            "against the latest conflicting ones and a new race can hide behind a\n"
            "reported one until that one is fixed.\n"
            "\n"
            "A sync is called removable only where every access it could order is known:\n"
            "a trace whose coverage is partial (a capture whose device statements lack\n"
            "byte ranges, events an importer dropped, absent ranks: `syncsim check` says\n"
            "which) is refused with one line naming what is missing (exit 2), unless\n"
            "--ordering-only asks for the weaker promise: the removals add no hang,\n"
            "unrecorded wait or mismatch, and say nothing of races.\n"
            "\n"
            "Options:\n"
            "  -r, --run N         the run of DB (default: the latest)\n"
            "  -o, --output OUT    write the minimised trace (text format) to OUT\n"
            "  -q, --quiet         print the summary line only (no list, no sync patterns)\n"
            "      --all           list every removable synchronisation (default: the first %d)\n"
            "      --allow-findings  minimise a trace that has findings (the weaker promise)\n"
            "      --ordering-only   minimise a trace whose coverage is partial, promising\n"
            "                        only what ordering can show (no races are judged)\n"
            "\n"
            "Exit status: 0 done (whether or not something can go), 1 the trace has\n"
            "findings and --allow-findings was not given, 2 bad input or usage, or\n"
            "partial coverage without --ordering-only.\n"
            "\n"
            "Examples:\n"
            "  syncsim minimize examples/sync-pattern-full.trace\n"
            "  syncsim minimize syncsim.db --run 1 -o minimal.trace\n",
            MIN_LIST);
}

int cmd_minimize(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "output", required_argument, NULL, 'o' },
        { "quiet", no_argument, NULL, 'q' },
        { "all", no_argument, NULL, 'A' },
        { "allow-findings", no_argument, NULL, 'F' },
        { "ordering-only", no_argument, NULL, 'O' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0;
    const char *output = NULL;
    bool quiet = false, all = false, allow_findings = false, ordering_only = false;
    int c;
    while ((c = cli_getopt("minimize", argc, argv, ":r:o:q", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("minimize", optarg, &run) != 0)
                return 2;
            break;
        case 'o':
            output = optarg;
            break;
        case 'q':
            quiet = true;
            break;
        case 'A':
            all = true;
            break;
        case 'F':
            allow_findings = true;
            break;
        case 'O':
            ordering_only = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *path = cli_trace_arg("minimize", argc, argv, optind);
    if (!path)
        return 2;
    if (output && cli_output_check("minimize", output, path) != 0)
        return 2;
    trace_error err = { 0 };
    trace_source src;
    trace_source_opts so = { .run = (int64_t)run };
    trace *t = NULL;
    if (cli_open("minimize", path, &so, &src) != 0)
        return 2;
    int lrc = trace_source_load(&src, &t, &err);
    trace_source_close(&src);
    if (lrc != 0)
        return cli_error("minimize", "%s", err.msg);
    check_coverage cov;
    check_coverage_of(&cov, t);
    bool partial = !check_coverage_full(&cov);
    if (partial && !ordering_only) {
        char missing[1024];
        check_coverage_missing(missing, sizeof missing, &cov, t);
        trace_free(t);
        return cli_error("minimize",
                         "%s: coverage is partial, so no sync can be called removable: %s "
                         "(--ordering-only for the weaker promise)",
                         path, missing);
    }
    cli_progress *prog = cli_progress_start("minimize", "candidates");
    check_options opt = { .allow_findings = allow_findings, .progress = cli_progress_callback,
                          .progress_ctx = prog };
    check_min_result res;
    int mrc = check_minimize(t, &opt, &res, &err);
    cli_progress_end(prog);
    if (mrc != 0) {
        trace_free(t);
        return cli_error("minimize", "%s", err.msg);
    }
    if (res.n_findings && !allow_findings) {
        printf("%s: the trace has %zu finding%s (syncsim check %s lists them); not minimised.\n"
               "A removal could then only promise no new *reported* finding: a race can hide\n"
               "behind a reported one until that one is fixed. Fix them first, or pass\n"
               "--allow-findings for the weaker promise.\n",
               path, res.n_findings, res.n_findings == 1 ? "" : "s", path);
        check_min_result_free(&res);
        trace_free(t);
        return 1;
    }
    if (res.n_findings)
        fprintf(stderr, "note: the trace has %zu finding%s: the removals add no new reported "
               "finding, but a race hidden behind a reported one can appear once those are "
               "fixed\n",
               res.n_findings, res.n_findings == 1 ? "" : "s");
    /* a barrier generation is one candidate but several statements */
    size_t groups = 0;
    for (size_t i = 0; i < res.n_removed; i++)
        groups += i == 0 || res.removed[i].group != res.removed[i - 1].group;
    printf("%s: %zu of %zu candidate synchronisation%s can go (%zu statement%s; %llu "
           "statements re-checked for a trace of %llu)\n",
           path, groups, res.n_candidates, res.n_candidates == 1 ? "" : "s", res.n_removed,
           res.n_removed == 1 ? "" : "s", (unsigned long long)res.replayed,
           (unsigned long long)res.n_stmts);
    if (partial)
        printf("ordering only (--ordering-only): coverage is partial, so these removals add no "
               "hang, unrecorded wait or mismatch, and nothing is known of races\n");
    size_t listed = res.n_removed;
    if (quiet)
        listed = 0;
    else if (!all && listed > MIN_LIST)
        listed = MIN_LIST;
    for (size_t i = 0; i < listed; i++) {
        const check_removal *x = &res.removed[i];
        if (x->line)
            printf("  line %u", x->line);
        else
            printf("  seq %llu", (unsigned long long)x->seq);
        printf("  %s %s", trace_str(t, t->queues[x->queue].name), trace_kind_str(x->kind));
        trace_stmt s;
        trace_stmt_at(t, x->seq, &s);
        if (s.kind == TRACE_SYNC)
            printf(" %s", s.sync_scope == TRACE_SYNC_QUEUE ? trace_str(t, t->queues[s.object].name)
                          : s.sync_scope == TRACE_SYNC_ALL ? "all"
                                                           : trace_str(t, s.object));
        else
            printf(" %s", trace_str(t, s.object));
        if (x->group != x->seq)
            printf("  (barrier generation with seq %llu)", (unsigned long long)x->group);
        putchar('\n');
    }
    if (listed < res.n_removed && !quiet)
        printf("  ... and %zu more (--all lists them, -o writes the minimised trace)\n",
               res.n_removed - listed);
    if (!quiet)
        check_print_sync_patterns(stdout, t, res.keep);
    int status = 0;
    if (output) {
        trace *m = check_trace_filter(t, res.keep);
        char *tmp;
        FILE *out = m ? cli_output_open("minimize", output, &tmp) : NULL;
        if (!m)
            status = cli_error("minimize", "out of memory");
        else if (out) {
            trace_reader r;
            trace_reader_memory(&r, m);
            int rc = trace_text_write(out, &r, &err);
            trace_reader_close(&r);
            if (rc != 0)
                cli_error("minimize", "%s", err.msg);
            status = cli_output_close("minimize", out, output, tmp, rc == 0);
        } else
            status = 2;
        trace_free(m);
        if (status == 0 && !quiet)
            printf("wrote %s\n", output);
    }
    check_min_result_free(&res);
    trace_free(t);
    return status;
}
