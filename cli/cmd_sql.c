/*
 * cmd_sql.c -- `syncsim sql [DB] [QUERY...] [--csv | --json]`: SQL over a
 * trace database, read-only, with the statements of every run as the table
 * `stmts` (traces/store_sql.c) beside the tables and views of
 * docs/trace-schema.md. Statements are packed into blocks since schema 3,
 * so this is how people query them by hand.
 */
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cmd_sql_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim sql [DB] [QUERY...] [--csv | --json]\n"
            "\n"
            "Runs SQL queries on a trace database, read-only; with no QUERY, reads them\n"
            "from standard input. DB is the first argument when it names a file, else\n"
            "./syncsim.db (then every argument is a query). Besides the tables and views\n"
            "of docs/trace-schema.md,\n"
            "every statement of every run is a row of the table\n"
            "\n"
            "  stmts(run, seq, queue, kind, label, object, t, dur, line, text)\n"
            "\n"
            "queue, label and object as names (object as the kind reads it: the event,\n"
            "flag, barrier or communicator; the queue of `sync S`; 'all'; the buffer of\n"
            "alloc and free), t and dur in nanoseconds (NULL when not observed), line the\n"
            "source line, text the statement in the text format, accesses included.\n"
            "`WHERE run = N` reads one run; rows come in run and seq order.\n"
            "\n"
            "Options:\n"
            "  -c, --csv    comma-separated values, a header line first (RFC 4180)\n"
            "  -j, --json   one JSON array of objects per query\n"
            "The default is one line per row, values separated by '|', a header first.\n"
            "\n"
            "Exit status: 0 done, 2 bad input or usage (not a trace database, a bad query).\n"
            "\n"
            "Examples:\n"
            "  syncsim run --tokens 2 -o r.db\n"
            "  syncsim sql r.db \"SELECT kind, count(*) FROM stmts WHERE run = 1 GROUP BY kind\"\n"
            "  syncsim sql r.db \"SELECT queue, label, dur FROM stmts WHERE kind = 'op' ORDER BY dur DESC LIMIT 5\"\n"
            "  syncsim sql r.db --csv \"SELECT seq, text FROM stmts WHERE run = 1 AND kind = 'wait'\"\n"
            "  echo 'SELECT id, name, n_stmts FROM runs' | syncsim sql r.db --json\n");
}

typedef enum { OUT_LIST, OUT_CSV, OUT_JSON } out_mode;

typedef struct printer {
    FILE *out;
    out_mode mode;
    long rows;              /* of the query being printed */
} printer;

static void put_csv(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    putc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            putc('"', out);
        putc(*s, out);
    }
    putc('"', out);
}

static void put_text(const printer *p, const char *s)
{
    if (p->mode == OUT_JSON)
        trace_json_str(p->out, s);
    else if (p->mode == OUT_CSV)
        put_csv(p->out, s);
    else
        fputs(s, p->out);
}

static void put_value(const printer *p, const trace_val *v)
{
    switch (v->type) {
    case TRACE_VAL_NULL:
        if (p->mode == OUT_JSON)
            fputs("null", p->out);
        break;
    case TRACE_VAL_INT:
        fprintf(p->out, "%lld", (long long)v->i);
        break;
    case TRACE_VAL_REAL:
        fprintf(p->out, "%.17g", v->r);
        break;
    case TRACE_VAL_TEXT:
        put_text(p, v->s);
        break;
    }
}

/* trace_store_query's callback: a header line and a line per row (list,
 * CSV), or a JSON array of objects per query. */
static int print_part(void *ctx, trace_query_part part, int n, const char *const *names,
                      const trace_val *row)
{
    printer *p = ctx;
    const char *sep = p->mode == OUT_JSON ? ", " : p->mode == OUT_CSV ? "," : "|";
    if (n == 0)
        return 0;               /* a statement without result columns */
    switch (part) {
    case TRACE_QUERY_BEGIN:
        p->rows = 0;
        if (p->mode == OUT_JSON) {
            fputs("[", p->out);
            break;
        }
        for (int c = 0; c < n; c++) {
            fputs(c ? sep : "", p->out);
            put_text(p, names[c]);
        }
        putc('\n', p->out);
        break;
    case TRACE_QUERY_ROW:
        if (p->mode == OUT_JSON)
            fputs(p->rows ? ",\n {" : "\n {", p->out);
        for (int c = 0; c < n; c++) {
            fputs(c ? sep : "", p->out);
            if (p->mode == OUT_JSON) {
                trace_json_str(p->out, names[c]);
                fputs(": ", p->out);
            }
            put_value(p, &row[c]);
        }
        fputs(p->mode == OUT_JSON ? "}" : "\n", p->out);
        p->rows++;
        break;
    case TRACE_QUERY_END:
        if (p->mode == OUT_JSON)
            fputs(p->rows ? "\n]\n" : "]\n", p->out);
        break;
    }
    return 0;
}

/* Standard input, whole (NULL when out of memory). */
static char *read_stdin(void)
{
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, stdin);
        n += got;
        if (got == 0)
            break;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

int cmd_sql(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "csv", no_argument, NULL, 'c' },
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    out_mode mode = OUT_LIST;
    int c;
    while ((c = cli_getopt("sql", argc, argv, "cj", longopts)) != -1) {
        switch (c) {
        case 'c':
            mode = OUT_CSV;
            break;
        case 'j':
            mode = OUT_JSON;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    /* the database: the first argument when it is a file, else ./syncsim.db
     * (the first argument is then a query, as it is when it has a space) */
    const char *path;
    if (optind < argc && access(argv[optind], F_OK) == 0)
        path = argv[optind++];
    else if (access(CLI_DEFAULT_DB, F_OK) == 0)
        path = CLI_DEFAULT_DB;
    else if (optind < argc && !strpbrk(argv[optind], " \t\n"))
        return cli_error("sql", "%s: no such file", argv[optind]);
    else
        return cli_usage_error("sql", "no database: name it first (syncsim sql DB [QUERY...]), "
                               "or run where ./" CLI_DEFAULT_DB " is");
    trace_error err = { 0 };
    trace_store *st = trace_store_open_mode(path, TRACE_STORE_READ, &err);
    if (!st)
        return cli_error("sql", "%s", err.msg);
    printer p = { .out = stdout, .mode = mode };
    int status = 0;
    char *in = optind == argc ? read_stdin() : NULL;
    if (optind == argc && !in)
        status = cli_error("sql", "out of memory");
    else if (in && trace_store_query(st, in, print_part, &p, &err) != 0)
        status = cli_error("sql", "%s", err.msg);
    for (int i = optind; i < argc && status == 0; i++)
        if (trace_store_query(st, argv[i], print_part, &p, &err) != 0)
            status = cli_error("sql", "%s", err.msg);
    free(in);
    trace_store_close(st);
    if (fflush(stdout) != 0 && status == 0)
        status = cli_error("sql", "cannot write the output");
    return status;
}
