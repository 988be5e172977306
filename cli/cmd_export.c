/*
 * cmd_export.c -- `syncsim export DB [--run N] --format trace [-o FILE]`:
 * writes a run back out as a text trace, streaming.
 */
#include "cli.h"
#include "traces/trace.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cmd_export_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim export DB [--run N] [--format trace] [-o FILE]\n"
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
    if (optind != argc - 1)
        return cli_usage_error("export", optind >= argc ? "missing database" : "too many arguments");
    if (strcmp(format, "trace") != 0)
        return cli_usage_error("export", "unknown format '%s' (expected: trace)", format);
    const char *db = argv[optind];
    trace_error err = { 0 };
    trace_reader r;
    if (trace_open_any(db, (int64_t)run, &r, &err) != 0)
        return cli_error("export", "%s", err.msg);
    FILE *out = stdout;
    char *tmp = NULL;
    if (output) {
        size_t len = strlen(output) + 16;
        tmp = malloc(len);
        if (!tmp) {
            trace_reader_close(&r);
            return cli_error("export", "out of memory");
        }
        snprintf(tmp, len, "%s.tmpXXXXXX", output);
        int fd = mkstemp(tmp);
        if (fd < 0 || !(out = fdopen(fd, "w"))) {
            int e = errno;
            if (fd >= 0) {
                close(fd);
                unlink(tmp);
            }
            free(tmp);
            trace_reader_close(&r);
            return cli_error("export", "%s: %s", output, strerror(e));
        }
    }
    int rc = trace_text_write(out, &r, &err);
    trace_reader_close(&r);
    if (rc == 0 && fflush(out) != 0)
        rc = -1, trace_error_set(&err, TRACE_EIO, "%s: %s", output ? output : "stdout",
                                 strerror(errno));
    if (output) {
        if (fclose(out) != 0 && rc == 0)
            rc = -1, trace_error_set(&err, TRACE_EIO, "%s: %s", output, strerror(errno));
        if (rc == 0 && rename(tmp, output) != 0)
            rc = -1, trace_error_set(&err, TRACE_EIO, "%s: %s", output, strerror(errno));
        if (rc != 0)
            unlink(tmp);
        free(tmp);
    }
    if (rc != 0)
        return cli_error("export", "%s", err.msg);
    return 0;
}
