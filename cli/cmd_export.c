/*
 * cmd_export.c -- `syncsim export DB [--run N] --format trace [-o FILE]`:
 * writes a run back out as a text trace, streaming.
 */
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_export_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim export [TRACE|DB] [--run N] [--format trace] [-o FILE]\n"
            "\n"
            "Writes run N of DB (default: the latest run) as a text trace, to standard\n"
            "output or to FILE. FILE is written to a temporary file and renamed, so a\n"
            "failure leaves nothing behind.\n"
            "\n"
            "Options:\n"
            "  -r, --run N        the run to export (default: the latest)\n"
            "  -f, --format FMT   output format; 'trace' (the text format) is the only one\n"
            "  -o, --output FILE  write to FILE instead of standard output\n"
            "\n"
            "Examples:\n"
            "  syncsim export syncsim.db --format trace\n"
            "  syncsim export traces.db --run 3 --format trace -o run3.trace\n");
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
    opterr = 0; /* one error line: ours */
    while ((c = getopt_long(argc, argv, ":r:f:o:", longopts, NULL)) != -1) {
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
        case ':':
            return cli_usage_error("export", "option '%s' needs a value", argv[optind - 1]);
        default:
            return cli_usage_error("export", "unknown option '%s'", argv[optind - 1]);
        }
    }
    const char *db = cli_trace_arg("export", argc, argv, optind);
    if (!db)
        return 2;
    if (strcmp(format, "trace") != 0)
        return cli_usage_error("export", "unknown format '%s' (expected: trace)", format);
    if (output && cli_output_check("export", output, db) != 0)
        return 2;
    trace_error err = { 0 };
    trace_source src;
    trace_source_opts so = { .run = (int64_t)run };
    if (cli_open("export", db, &so, &src) != 0)
        return 2;
    char *tmp;
    FILE *out = cli_output_open("export", output, &tmp);
    if (!out) {
        trace_source_close(&src);
        return 2;
    }
    int rc = trace_text_write(out, &src.reader, &err);
    trace_source_close(&src);
    if (rc != 0)
        cli_error("export", "%s", err.msg);
    return cli_output_close("export", out, output, tmp, rc == 0);
}
