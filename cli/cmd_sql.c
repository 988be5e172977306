/*
 * cmd_sql.c -- `syncsim sql DB [QUERY...] [--csv | --json]`: SQL over a
 * trace database, read-only, with the statements of every run as the table
 * `stmts` (traces/store_sql.c) beside the tables and views of
 * docs/trace-schema.md. Statements are packed into blocks since schema 3,
 * so this is how people query them by hand.
 */
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cmd_sql_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim sql DB [QUERY...] [--csv | --json]\n"
            "\n"
            "Runs SQL queries on a trace database, read-only; with no QUERY, reads them\n"
            "from standard input. Besides the tables and views of docs/trace-schema.md,\n"
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

/* One value of the current row. */
static void put_value(FILE *out, sqlite3_stmt *q, int col, out_mode mode)
{
    int type = sqlite3_column_type(q, col);
    if (type == SQLITE_NULL) {
        if (mode == OUT_JSON)
            fputs("null", out);
        return;
    }
    if (mode == OUT_JSON && type == SQLITE_INTEGER) {
        fprintf(out, "%lld", (long long)sqlite3_column_int64(q, col));
        return;
    }
    if (mode == OUT_JSON && type == SQLITE_FLOAT) {
        fprintf(out, "%.17g", sqlite3_column_double(q, col));
        return;
    }
    const char *s = (const char *)sqlite3_column_text(q, col);
    if (mode == OUT_JSON)
        trace_json_str(out, s ? s : "");
    else if (mode == OUT_CSV)
        put_csv(out, s ? s : "");
    else
        fputs(s ? s : "", out);
}

/* Steps one prepared query to its end, printing its rows. 0 or -1. */
static int print_query(FILE *out, sqlite3 *db, sqlite3_stmt *q, out_mode mode)
{
    int n = sqlite3_column_count(q);
    if (n > 0 && mode != OUT_JSON)
        for (int c = 0; c < n; c++) {
            if (c)
                putc(mode == OUT_CSV ? ',' : '|', out);
            if (mode == OUT_CSV)
                put_csv(out, sqlite3_column_name(q, c));
            else
                fputs(sqlite3_column_name(q, c), out);
            if (c == n - 1)
                putc('\n', out);
        }
    if (n > 0 && mode == OUT_JSON)
        fputs("[", out);
    int rc;
    long rows = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (mode == OUT_JSON)
            fputs(rows ? ",\n {" : "\n {", out);
        for (int c = 0; c < n; c++) {
            if (c)
                fputs(mode == OUT_JSON ? ", " : mode == OUT_CSV ? "," : "|", out);
            if (mode == OUT_JSON) {
                trace_json_str(out, sqlite3_column_name(q, c));
                fputs(": ", out);
            }
            put_value(out, q, c, mode);
        }
        fputs(mode == OUT_JSON ? "}" : "\n", out);
        rows++;
    }
    if (n > 0 && mode == OUT_JSON)
        fputs(rows ? "\n]\n" : "]\n", out);
    if (rc != SQLITE_DONE) {
        cli_error("sql", "%s", sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

/* Runs every statement of sql in turn. 0 or -1. */
static int run_sql(FILE *out, sqlite3 *db, const char *sql, out_mode mode)
{
    while (sql && *sql) {
        sqlite3_stmt *q = NULL;
        const char *tail = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &q, &tail) != SQLITE_OK) {
            cli_error("sql", "%s", sqlite3_errmsg(db));
            return -1;
        }
        int rc = q ? print_query(out, db, q, mode) : 0;
        sqlite3_finalize(q);
        if (rc != 0)
            return -1;
        sql = tail;
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
    if (optind >= argc)
        return cli_usage_error("sql", "which database? (syncsim sql DB [QUERY...])");
    const char *path = argv[optind++];
    if (access(path, F_OK) != 0)
        return cli_error("sql", "%s: no such file", path);
    trace_error err = { 0 };
    trace_store *st = trace_store_open_mode(path, TRACE_STORE_READ, &err);
    if (!st || trace_store_sql_register(st, &err) != 0) {
        trace_store_close(st);
        return cli_error("sql", "%s", err.msg);
    }
    int status = 0;
    if (optind == argc) {
        char *sql = read_stdin();
        if (!sql)
            status = cli_error("sql", "out of memory");
        else if (run_sql(stdout, trace_store_db(st), sql, mode) != 0)
            status = 2;
        free(sql);
    }
    for (int i = optind; i < argc && status == 0; i++)
        if (run_sql(stdout, trace_store_db(st), argv[i], mode) != 0)
            status = 2;
    trace_store_close(st);
    if (fflush(stdout) != 0 && status == 0)
        status = cli_error("sql", "cannot write the output");
    return status;
}
