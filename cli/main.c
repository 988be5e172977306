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
#include <sys/stat.h>

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
            "Exit status: 0 success (check: clean, with full coverage), 1 findings (check,\n"
            "minimize), an unsafe what-if (replay) or outputs that differ from the reference\n"
            "(run on real devices), 2 bad input or usage, 3 no findings in an incomplete\n"
            "run, 4 no findings but partial coverage (not known to be clean: see 'syncsim\n"
            "help check'). Errors are one line: 'FILE:LINE:COL: error: message (syncsim\n"
            "COMMAND)' for a place in a file, else 'syncsim COMMAND: message'.\n"
            "Long work (run, import, merge, check, minimize, cluster, report, and reading a\n"
            "capture in a foreign format: its bytes, or an Nsight Systems export's rows)\n"
            "shows progress on standard error: a bar with an ETA on a terminal, as wide as\n"
            "it is, else a line every 5 s ($SYNCSIM_PROGRESS_MS: another interval, 1 to\n"
            "86400000 ms; $SYNCSIM_PROGRESS=bar|lines|off; another value is refused).\n"
            "Run 'syncsim help COMMAND' for a command's options and examples.\n");
}

/* The place a message starts with, "FILE:LINE:COL: " or "FILE:LINE: ",
 * where FILE names a file (or standard input): the length of FILE, with
 * *line, *col (0 when absent) and *rest the message after the place; 0
 * when msg starts with no place. The first ":LINE" after a file's name is
 * taken, so a file name may hold colons. */
static size_t place_of(const char *msg, unsigned long *line, unsigned long *col,
                       const char **rest)
{
    for (const char *c = strchr(msg, ':'); c; c = strchr(c + 1, ':')) {
        if (c == msg || c[1] < '0' || c[1] > '9')
            continue;
        char *end;
        *line = strtoul(c + 1, &end, 10);
        *col = 0;
        if (end[0] == ':' && end[1] >= '0' && end[1] <= '9')
            *col = strtoul(end + 1, &end, 10);
        if (end[0] != ':' || end[1] != ' ')
            continue;
        char file[4096];
        size_t n = (size_t)(c - msg);
        struct stat sb;
        if (n >= sizeof file)
            return 0;
        memcpy(file, msg, n);
        file[n] = '\0';
        if (strcmp(file, "<stdin>") != 0 && (stat(file, &sb) != 0 || S_ISDIR(sb.st_mode)))
            return 0;
        *rest = end + 2;
        return n;
    }
    return 0;
}

/* Prints the error line from fmt and ap: "syncsim CMD: message", or, for a
 * message about a place in a file (a syntax error), that place first, as
 * compilers print it, so that editors and compilation modes jump there:
 * "FILE:LINE:COL: error: message (syncsim CMD)" (column 1 when the message
 * names none). A message that already starts with "CMD: " (a library's
 * error that names its operation the way the command is named, e.g.
 * "merge: ...") is not prefixed twice. */
static char last_error[4600];

const char *cli_last_error(void)
{
    return last_error;
}

static void error_line(const char *cmd, const char *fmt, va_list ap)
{
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(cmd);
    const char *m = strncmp(msg, cmd, n) == 0 && msg[n] == ':' && msg[n + 1] == ' '
                        ? msg + n + 2
                        : msg;
    unsigned long line, col;
    const char *rest;
    size_t file_len = place_of(m, &line, &col, &rest);
    if (file_len)
        snprintf(last_error, sizeof last_error, "%.*s:%lu:%lu: error: %s (syncsim %s)",
                 (int)file_len, m, line, col ? col : 1, rest, cmd);
    else
        snprintf(last_error, sizeof last_error, "syncsim %s: %s", cmd, m);
    fprintf(stderr, "%s\n", last_error);
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_line(cmd, fmt, ap);
    va_end(ap);
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
    va_start(ap, fmt);
    error_line(cmd, fmt, ap);
    va_end(ap);
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

int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts)
{
    /* getopt prints nothing when opterr is 0 and the short options start
     * with ':' (after a leading '+'), which also tells a missing value
     * (':') from an unknown option ('?') */
    char spec[128];
    bool plus = shortopts[0] == '+';
    const char *rest = shortopts + plus + (shortopts[plus] == ':');
    snprintf(spec, sizeof spec, "%s:%s", plus ? "+" : "", rest);
    opterr = 0;
    int c = getopt_long(argc, argv, spec, longopts, NULL);
    if (c != '?' && c != ':')
        return c;
    /* optopt: the short option at fault, or a long option's value (0 for
     * an unknown long option), whose text is then argv[optind - 1] */
    char name[64];
    bool is_long = optopt == 0 || (optind > 0 && optind <= argc && argv[optind - 1][0] == '-' &&
                                   argv[optind - 1][1] == '-');
    if (is_long) {
        const char *a = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        snprintf(name, sizeof name, "%.*s", (int)strcspn(a, "="), a);
    } else {
        snprintf(name, sizeof name, "-%c", optopt);
    }
    bool known = false;
    for (const struct option *o = longopts; is_long && o && o->name; o++)
        known |= strcmp(o->name, name + 2) == 0;
    if (c == ':')
        cli_usage_error(cmd, "option '%s' needs a value", name);
    else if (known)
        cli_usage_error(cmd, "option '%s' takes no value", name);
    else
        cli_usage_error(cmd, "unknown option '%s'", name);
    return CLI_OPT_ERROR;
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

/* The run names given to --run so far, until cli_run_resolve reads them:
 * a name is known only once the database is. */
static const char *run_names[64];
static unsigned n_run_names;

int cli_parse_run(const char *cmd, const char *arg, unsigned long long *run)
{
    if (*arg && strspn(arg, "0123456789") == strlen(arg)) {
        if (cli_parse_u64(arg, run) != 0 || *run == 0 || *run >= CLI_RUN_NAMED(0))
            return cli_usage_error(cmd, "--run expects a run id (1, 2, ...) or a run's name, "
                                   "got '%s'", arg);
        return 0;
    }
    if (!*arg)
        return cli_usage_error(cmd, "--run expects a run id (1, 2, ...) or a run's name, got "
                               "an empty one");
    if (n_run_names == sizeof run_names / sizeof run_names[0])
        return cli_usage_error(cmd, "--run: at most %zu run names in one command",
                               sizeof run_names / sizeof run_names[0]);
    run_names[n_run_names] = arg;
    *run = CLI_RUN_NAMED(n_run_names++);
    return 0;
}

int cli_run_resolve(const char *cmd, const char *path, int64_t *run)
{
    if ((unsigned long long)*run < CLI_RUN_NAMED(0))
        return 0;
    const char *name = run_names[(unsigned long long)*run - CLI_RUN_NAMED(0)];
    trace_error err = { 0 };
    trace_store *st = strcmp(path, "-") != 0 && trace_sqlite_has_table(path, "runs") == 1
                          ? trace_store_open_mode(path, TRACE_STORE_READ, &err)
                          : NULL;
    if (!st)
        return err.msg[0] ? cli_error(cmd, "%s", err.msg)
                          : cli_usage_error(cmd, "--run %s: %s is no trace database, whose "
                                            "runs have names", name, path);
    int rc = cli_resolve_run_in(cmd, st, path, name, run);
    trace_store_close(st);
    return rc;
}

/* A command's help, and where the documents it names (docs/X.md) are for
 * this copy: an installed one has them under PREFIX/share/doc/syncsim. */
static void print_help(const command *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        c->help(stdout);
        return;
    }
    c->help(mem);
    fclose(mem);
    fputs(buf, stdout);
    if (strstr(buf, "docs/"))
        printf("\nThe docs/ named above are in %s\n", cli_doc(""));
    free(buf);
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
        print_help(c);
        return 0;
    }
    const command *c = find_command(name);
    if (!c)
        return unknown_command("syncsim", name);
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help(c);
            return 0;
        }
    if (cli_progress_env_check() != 0)
        return 2;
    optind = 0; /* glibc: fully reinitialise getopt for the subcommand */
    return c->run(argc - 1, argv + 1);
}
