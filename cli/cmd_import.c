/*
 * cmd_import.c -- `syncsim import FILE [-o DB] [--name NAME]`: a trace (text,
 * or a run of another database) becomes a new run of a database.
 */
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_import_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim import FILE.trace [-o DB] [--name NAME]\n"
            "\n"
            "Reads a text trace (or the latest run of another trace database) and stores\n"
            "it as a new run of DB, which is created when missing. Prints the run id and\n"
            "the statement count. On bad input nothing is written.\n"
            "\n"
            "Options:\n"
            "  -o, --output DB   the database (default ./" CLI_DEFAULT_DB ")\n"
            "  -n, --name NAME   the run's name (default: the file name)\n"
            "\n"
            "Examples:\n"
            "  syncsim import litmus/event-chain-clean.trace\n"
            "  syncsim import run.trace -o traces.db --name baseline\n");
}

int cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "name", required_argument, NULL, 'n' },
        { NULL, 0, NULL, 0 },
    };
    const char *db = CLI_DEFAULT_DB, *name = NULL;
    int c;
    opterr = 0; /* one error line: ours */
    while ((c = getopt_long(argc, argv, ":o:n:", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            db = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case ':':
            return cli_usage_error("import", "option '%s' needs a value", argv[optind - 1]);
        default:
            return cli_usage_error("import", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("import", optind >= argc ? "missing trace file" : "too many arguments");
    const char *path = argv[optind];
    trace_error err = { 0 };
    trace_reader r;
    if (trace_open_any(path, 0, &r, &err) != 0)
        return cli_error("import", "%s", err.msg);
    int64_t run = trace_store_import(db, &r, name ? name : path, &err);
    trace_reader_close(&r);
    if (run < 0)
        return cli_error("import", "%s", err.msg);
    unsigned long long n_stmts = 0;
    trace_store *st = trace_store_open(db, false, &err);
    if (st) {
        trace_run_info *runs;
        size_t n;
        if (trace_store_runs(st, &runs, &n, &err) == 0) {
            for (size_t i = 0; i < n; i++)
                if (runs[i].id == run)
                    n_stmts = runs[i].n_stmts;
            trace_run_info_free(runs, n);
        }
        trace_store_close(st);
    }
    printf("imported %s as run %lld: %llu statements in %s\n", path, (long long)run, n_stmts, db);
    return 0;
}
