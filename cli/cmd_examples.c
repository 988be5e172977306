/*
 * cmd_examples.c -- `syncsim examples [DIR]`: writes the example traces
 * and captures (cli/examples.h) that the help texts and the docs use, so
 * that every example there runs as written from any directory.
 */
#include "cli.h"
#include "cli/examples.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cmd_examples_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim examples [DIR]\n"
            "\n"
            "Writes the example traces, captures and graph files the help texts and docs\n"
            "use into DIR (default ./examples), one line each about what it holds, so that\n"
            "every example runs as written from any directory. A file already there is\n"
            "left as it is. The traces are small, commented and self-checking: their\n"
            "expect lines say what `syncsim check` finds.\n"
            "\n"
            "Examples:\n"
            "  syncsim examples\n"
            "  syncsim check examples/event-missing-wait.trace        # exit 1: two races\n"
            "  syncsim check --expect examples/flag-deadlock.trace\n");
}

/* What an example holds: a trace's first comment line; the captures say
 * it here, JSON having no comments. */
static void about(const char *name, const char *text, char *buf, size_t cap)
{
    static const char *const captures[][2] = {
        { "kineto-missing-wait.json", "A PyTorch profiler capture: two streams, no wait "
                                      "(races with et.json: import --et)" },
        { "et.json", "Its execution trace: the byte ranges each op touches" },
        { "kineto-rank0-nccl.json", "A PyTorch profiler capture of rank 0 of a 2-rank NCCL job "
                                    "(merge it with rank 1's)" },
        { "kineto-rank1-nccl.json", "Rank 1 of that job" },
        { "kineto-rank0-of-4.json", "Rank 0 of a 4-rank job, alone (merge --partial)" },
    };
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof captures / sizeof *captures; i++)
        if (strcmp(name, captures[i][0]) == 0)
            snprintf(buf, cap, "%s", captures[i][1]);
    if (strncmp(text, "syncsim-", 8) == 0 && strchr(text, '\n'))
        text = strchr(text, '\n') + 1;     /* a header first (a graph file) */
    if (text[0] != '#')
        return;
    const char *s = text + 1 + (text[1] == ' ');
    size_t n = strcspn(s, "\n");
    snprintf(buf, cap, "%.*s", (int)n, s);
}

int cmd_examples(int argc, char **argv)
{
    if (argc > 2)
        return cli_usage_error("examples", "too many arguments ('%s')", argv[2]);
    if (argc == 2 && argv[1][0] == '-')
        return cli_usage_error("examples", "unknown option '%s'", argv[1]);
    const char *dir = argc == 2 ? argv[1] : "examples";
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cli_error("examples", "%s: cannot make the directory: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return cli_error("examples", "%s: is not a directory", dir);
    int written = 0, kept = 0;
    for (const cli_example *e = cli_examples; e->name; e++) {
        char path[4096], what[160];
        snprintf(path, sizeof path, "%s/%s", dir, e->name);
        about(e->name, e->text, what, sizeof what);
        if (access(path, F_OK) == 0) {
            printf("  %-42s (already there, left as it is)\n", path);
            kept++;
            continue;
        }
        trace_error err = { 0 };
        if (trace_out_write(path, e->text, strlen(e->text), &err) != 0)
            return cli_error("examples", "%s", err.msg);
        printf("  %-42s %s\n", path, what);
        written++;
    }
    printf("%d example%s written to %s%s\n", written, written == 1 ? "" : "s", dir,
           kept ? " (the others were there)" : "");
    return 0;
}
