/*
 * main.c -- the syncsim command: dispatch to the subcommands of
 * cli/commands.def, `help`, and `--version`.
 */
#include "cli.h"
#include "traces/trace.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *out);
} command;

static const command commands[] = {
#define X(name, summary) { #name, summary, cmd_##name, cmd_##name##_help },
#include "commands.def"
#undef X
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* Edit distance of a and b (both short), capped at 9. */
static int distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 30 || lb > 30)
        return 9;
    int d[31][31];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb] < 9 ? d[la][lb] : 9;
}

/* One line for a command that does not exist, with the nearest one. */
static int unknown_command(const char *who, const char *name)
{
    const command *best = NULL;
    int best_d = 3;             /* farther than two edits is no guess */
    for (size_t i = 0; i < N_COMMANDS; i++) {
        int d = strncmp(commands[i].name, name, strlen(name)) == 0 && strlen(name) >= 2
                    ? 1
                    : distance(commands[i].name, name);
        if (d < best_d) {
            best_d = d;
            best = &commands[i];
        }
    }
    if (best)
        fprintf(stderr, "%s: unknown command '%s'; did you mean '%s'? ('syncsim help' lists "
                        "them)\n", who, name, best->name);
    else
        fprintf(stderr, "%s: unknown command '%s' ('syncsim help' lists the commands)\n", who,
                name);
    return 2;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: syncsim COMMAND [ARGS...]\n"
            "       syncsim help [COMMAND]\n"
            "       syncsim --version\n"
            "\n"
            "syncsim schedules graphs across devices, records what every queue did as a\n"
            "trace (SQLite), finds missing or superfluous synchronisation in traces, and\n"
            "replays and draws them.\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "A command that takes a database and is given none uses ./" CLI_DEFAULT_DB ".\n"
            "Exit status: 0 success (check: clean, with full coverage), 1 findings (check)\n"
            "or outputs that differ from the reference (run on real devices), 2 bad input\n"
            "or usage, 3 no findings in an incomplete run, 4 no findings but partial\n"
            "coverage (not known to be clean: see 'syncsim help check').\n"
            "Run 'syncsim help COMMAND' for a command's options and examples.\n");
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "syncsim %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

/* Prints text wrapped at 95 columns, every line after the first indented. */
void cli_wrapped(FILE *out, const char *text, int indent)
{
    int col = indent;
    const char *p = text;
    while (*p) {
        const char *e = p;
        while (*e && *e != ' ')
            e++;
        int len = (int)(e - p);
        if (col > indent && col + 1 + len > 95) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", len, p);
        col += len;
        p = *e ? e + 1 : e;
    }
    fputc('\n', out);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "syncsim %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    const command *c = find_command(cmd);
    if (c) {
        /* The first line of the help is the usage line. */
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        if (mem) {
            c->help(mem);
            fclose(mem);
            char *nl = strchr(buf, '\n');
            if (nl)
                *nl = '\0';
            fprintf(stderr, "%s\n", buf);
            free(buf);
        }
    }
    fprintf(stderr, "Run 'syncsim help %s' for more.\n", cmd);
    return 2;
}

int cli_parse_u64(const char *s, unsigned long long *out)
{
    char *end;
    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_run(const char *cmd, const char *arg, unsigned long long *run)
{
    if (cli_parse_u64(arg, run) != 0 || *run == 0 || *run > INT64_MAX)
        return cli_usage_error(cmd, "--run expects a run id (1, 2, ...), got '%s'", arg);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("syncsim %s (trace text format %d, schema %d)\n", SYNCSIM_VERSION, TRACE_TEXT_VERSION,
               TRACE_SCHEMA_VERSION);
        return 0;
    }
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc < 3) {
            usage(stdout);
            return 0;
        }
        const command *c = find_command(argv[2]);
        if (!c)
            return unknown_command("syncsim help", argv[2]);
        c->help(stdout);
        return 0;
    }
    const command *c = find_command(name);
    if (!c)
        return unknown_command("syncsim", name);
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            c->help(stdout);
            return 0;
        }
    optind = 0; /* glibc: fully reinitialise getopt for the subcommand */
    return c->run(argc - 1, argv + 1);
}
