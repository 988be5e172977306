/*
 * cmd_export.c -- `syncsim export DB [--run N] --format trace|chrome [-o FILE]`:
 * writes a run back out as a text trace or as Chrome Trace Event JSON
 * (Perfetto, chrome://tracing), streaming.
 */
#include "check/check.h"
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_export_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim export [TRACE|DB] [--run N] [--format trace|chrome] [-o FILE]\n"
            "\n"
            "Writes run N of DB (default: the latest run), or any trace syncsim reads, as a\n"
            "text trace or as Chrome Trace Event JSON, to standard output or to FILE. FILE\n"
            "is written to a temporary file and renamed, so a failure leaves nothing behind.\n"
            "\n"
            "Options:\n"
            "  -r, --run N        the run to export (default: the latest)\n"
            "  -f, --format FMT   trace: the text format (default); chrome: JSON for Perfetto\n"
            "                     and chrome://tracing, one track per queue grouped by device\n"
            "                     and host, flows for record -> wait and launch -> stream\n"
            "                     work, and the findings `check` stored as instant events\n"
            "                     with their fix; syncsim reads it back exactly\n"
            "  -o, --output FILE  write to FILE instead of standard output\n"
            "\n"
            "Examples:\n"
            "  syncsim export syncsim.db --format trace -o run.trace\n"
            "  syncsim export syncsim.db --run 1 --format trace -o run1.trace\n"
            "  syncsim export syncsim.db --format chrome -o run.json    # open in ui.perfetto.dev\n");
}

/* The statements as Chrome JSON, and the findings the run's latest check
 * stored (a database's) as instant events beside them. */
static int write_chrome(FILE *out, trace_source *src, trace_error *err)
{
    trace_chrome *w = trace_chrome_begin(out, &src->reader, err);
    if (!w)
        return -1;
    trace_check_info info;
    trace_finding *f = NULL;
    size_t n = 0;
    if (src->store &&
        (trace_store_load_check(src->store, src->run, src->reader.trace, &info, &f, &n, err) != 0 ||
         trace_chrome_findings(w, f, n, check_finding_print_json, err) != 0)) {
        trace_findings_free(f, n);
        trace_chrome_end(w, NULL);
        return -1;
    }
    trace_findings_free(f, n);
    return trace_chrome_end(w, err);
}

int cmd_export(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "format", required_argument, NULL, 'f' },
        { "output", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    const char *format = "trace", *output = NULL;
    unsigned long long run = 0;
    int c;
    while ((c = cli_getopt("export", argc, argv, ":r:f:o:", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("export", optarg, &run) != 0)
                return 2;
            break;
        case 'f':
            format = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *db = cli_trace_arg("export", argc, argv, optind);
    if (!db)
        return 2;
    bool chrome = strcmp(format, "chrome") == 0;
    if (!chrome && strcmp(format, "trace") != 0)
        return cli_usage_error("export", "unknown format '%s' (expected: trace or chrome)",
                               format);
    if (output && cli_output_check("export", output, db) != 0)
        return 2;
    trace_error err = { 0 };
    trace_source src;
    trace_source_opts so = { .run = (int64_t)run, .as_recorded = true };
    if (cli_open("export", db, &so, &src) != 0)
        return 2;
    /* a run still recording or interrupted stays so once exported: read
     * back, it is never checked clean (run metadata status=) */
    if (src.incomplete && trace_set_meta(src.reader.trace, "status", "incomplete") != 0) {
        trace_source_close(&src);
        return cli_error("export", "out of memory");
    }
    char *tmp;
    FILE *out = cli_output_open("export", output, &tmp);
    if (!out) {
        trace_source_close(&src);
        return 2;
    }
    int rc = chrome ? write_chrome(out, &src, &err) : trace_text_write(out, &src.reader, &err);
    trace_source_close(&src);
    if (rc != 0 && out != stdout && ferror(out))    /* the output failed: name it */
        cli_error("export", "%s: %s", output, err.msg);
    else if (rc != 0)
        cli_error("export", "%s", err.msg);
    return cli_output_close("export", out, output, tmp, rc == 0);
}
