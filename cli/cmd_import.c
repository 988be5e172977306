/*
 * cmd_import.c -- `syncsim import FILE [--et ET [--force-et]] [-o DB]
 * [--name NAME] [--strict]`: a trace (text, a run of another database, or a
 * capture syncsim reads: an Nsight Systems export, a PyTorch profiler trace
 * with its execution trace) becomes a new run of a database. What the
 * importer did not import, and every order it assumed where the capture is
 * silent (its ledger, trace_ledger), is said first, one warning line per
 * reason; --strict refuses any of it.
 */
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cmd_import_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim import FILE [--et ET [--force-et]] [-o DB] [--name NAME] [--strict]\n"
            "\n"
            "Reads a trace in any format syncsim reads and stores it as a new run of DB,\n"
            "which is created when missing. Prints the run id and the statement count.\n"
            "On bad input nothing is written. The format is told by the content:\n");
    for (const trace_format *const *f = trace_formats(); *f; f++)
        fprintf(out, "  %-14s %s\n", (*f)->name, (*f)->summary);
    fprintf(out,
            "Captures map onto the trace model as docs/importers.md says; one without byte\n"
            "ranges is ordering-only (run metadata accesses=none).\n"
            "\n"
            "Every event of a capture is imported or counted: a warning line per reason\n"
            "says what was not imported, or where an order was assumed because the capture\n"
            "does not say it (run metadata dropped.REASON; `info` shows it). Either makes a\n"
            "check's coverage partial: a run with an assumed order never checks clean.\n"
            "The reasons (* an ordering assumption):\n");
    const char *meaning, *word;
    for (size_t i = 0; (word = trace_ledger_reason(i, &meaning)); i++)
        fprintf(out, "  %-22s%s %s\n", word, trace_ledger_assumed(word) ? "*" : " ", meaning);
    fprintf(out,
            "\n"
            "Options:\n"
            "  -o, --output DB   the database (default ./" CLI_DEFAULT_DB ")\n"
            "  -n, --name NAME   the run's name (default: the file name)\n"
            "  -e, --et ET       a PyTorch execution trace to join to a Kineto trace (by\n"
            "                    rf_id and name): its kernels and copies get byte ranges.\n"
            "                    An ET of another process, or one that gives byte ranges to\n"
            "                    fewer than half of the ops that launched GPU work, is\n"
            "                    refused (exit 2)\n"
            "  -F, --force-et    join the ET anyway; the run says so (run metadata forced=,\n"
            "                    ledger reason forced), and its check is never clean\n"
            "  -s, --strict      refuse a capture the importer dropped anything of, or\n"
            "                    assumed an order in (exit 2, nothing written)\n"
            "\n"
            "Examples:\n"
            "  syncsim import examples/event-chain-clean.trace -o traces.db\n"
            "  syncsim import examples/event-missing-wait.trace -o traces.db --name baseline\n"
            "  syncsim import examples/kineto-missing-wait.json --et examples/et.json -o traces.db\n");
}

typedef struct ledger_out {
    const char *path;
} ledger_out;

/* One warning line per reason of the ledger. */
static void warn_dropped(void *ctx, const char *reason, uint64_t n)
{
    const ledger_out *o = ctx;
    const char *meaning = trace_ledger_meaning(reason);
    fprintf(stderr, "%s: warning: %llu %s%s%s: %s%s%s%s\n", o->path, (unsigned long long)n,
            trace_ledger_assumed(reason) ? "ordering assumption" : "event", n == 1 ? "" : "s",
            trace_ledger_assumed(reason) ? "" : " dropped", reason, meaning ? " (" : "",
            meaning ? meaning : "", meaning ? ")" : "");
}

int cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "name", required_argument, NULL, 'n' },
        { "et", required_argument, NULL, 'e' },
        { "force-et", no_argument, NULL, 'F' },
        { "strict", no_argument, NULL, 's' },
        { NULL, 0, NULL, 0 },
    };
    const char *db = CLI_DEFAULT_DB, *name = NULL, *et = NULL;
    bool strict = false, force_et = false;
    int c;
    while ((c = cli_getopt("import", argc, argv, ":o:n:e:Fs", longopts)) != -1) {
        switch (c) {
        case 'o':
            db = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case 'e':
            et = optarg;
            break;
        case 'F':
            force_et = true;
            break;
        case 's':
            strict = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    if (optind >= argc)
        return cli_usage_error("import", "missing trace file");
    const char *path = cli_trace_arg("import", argc, argv, optind);
    if (!path)
        return 2;
    if (strcmp(path, "-") != 0 && access(db, F_OK) == 0) {
        struct stat a, b;
        if (stat(path, &a) == 0 && stat(db, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return cli_error("import", "%s: is the input; import into another database (-o)", db);
    }
    trace_error err = { 0 };
    trace_source src;
    /* labels are copied as text, never interned */
    if (force_et && !et)
        return cli_usage_error("import", "--force-et needs --et ET");
    trace_source_opts so = { .companion = et, .lazy_labels = true, .force_companion = force_et,
                             .as_recorded = true };
    if (cli_open("import", path, &so, &src) != 0)
        return 2;
    ledger_out lo = { path };
    uint64_t dropped = trace_ledger(src.reader.trace, warn_dropped, &lo);
    if (strict && dropped) {
        trace_source_close(&src);
        return cli_error("import", "%s: %llu event%s not imported as captured, or placed by "
                                   "assumption (--strict): nothing written",
                         path, (unsigned long long)dropped, dropped == 1 ? "" : "s");
    }
    uint64_t n_stmts = 0;
    cli_progress *prog = cli_progress_start("import", "statements");
    cli_progress_source(prog, &src);
    int64_t run = trace_store_import(db, &src.reader, name ? name : path, &n_stmts, &err);
    trace_source_close(&src);   /* closes the counting reader: then the bar goes */
    cli_progress_end(prog);
    if (run < 0)
        return cli_error("import", "%s", err.msg);
    printf("imported %s as run %lld: %llu statements in %s\n", path, (long long)run,
           (unsigned long long)n_stmts, db);
    return 0;
}
