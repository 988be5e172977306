/* test_cli_sql.c -- `syncsim sql`: the statements of a database's runs as
 * the table stmts (one row each, names resolved, the text as the text
 * format writes it), read-only, in three output forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

static const char *trace_a =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s stream device=0\n"
    "buffer X size=64\n"
    "buffer P size=16\n"
    "s op fill w:X[0:32] t=100 dur=50\n"
    "s record e0\n"
    "h wait e0\n"
    "h sync s\n"
    "h sync device=0\n"
    "h sync all\n"
    "h free P\n"
    "h op use r:X\n";

static const char *trace_b =
    "syncsim-trace 1\n"
    "queue h host\n"
    "buffer Y size=8\n"
    "h op only w:Y\n";

static void two_runs(const fixture *f)
{
    assert_int_equal(tmpdir_write(f, "a.trace", trace_a), 0);
    assert_int_equal(tmpdir_write(f, "b.trace", trace_b), 0);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "%s import a.trace -o r.db && %s import b.trace -o r.db",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
}

/* Every statement, in order, its object as its kind reads it, its text as
 * written. */
static void test_cli_sql_stmts_rows(void **state)
{
    fixture *f = *state;
    char out[8192];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s sql r.db \"SELECT seq, queue, kind, label, object, t, dur, text"
                               " FROM stmts WHERE run = 1\"",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "seq|queue|kind|label|object|t|dur|text\n"
                             "0|s|op|fill||100|50|s op fill w:X[0:32] t=100 dur=50\n"
                             "1|s|record||e0|||s record e0\n"
                             "2|h|wait||e0|||h wait e0\n"
                             "3|h|sync||s|||h sync s\n"
                             "4|h|sync||0|||h sync device=0\n"
                             "5|h|sync||all|||h sync all\n"
                             "6|h|free||P|||h free P\n"
                             "7|h|op|use||||h op use r:X\n");
    /* Without a run: every run, in order. */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s sql r.db \"SELECT run, count(*), max(seq) FROM stmts GROUP BY run\"",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "run|count(*)|max(seq)\n1|8|7\n2|1|0\n");
    /* A run that does not exist has no rows. */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s sql r.db \"SELECT count(*) FROM stmts WHERE run = 9\"",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "count(*)\n0\n");
}

/* --json and --csv, queries from standard input, several in one text. */
static void test_cli_sql_formats(void **state)
{
    fixture *f = *state;
    char out[8192];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s sql r.db --json \"SELECT run, label, t FROM stmts WHERE run = 2\"",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "[\n {\"run\": 2, \"label\": \"only\", \"t\": null}\n]\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "echo \"SELECT 'a,b', 1; SELECT text FROM stmts WHERE run = 1"
                               " AND kind = 'op' AND label = 'fill'\" | %s sql r.db --csv",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "\"'a,b'\",1\n\"a,b\",1\ntext\ns op fill w:X[0:32] t=100 dur=50\n");
}

/* Read-only; a bad query or a file that is not a trace database is exit 2
 * with one line. */
static void test_cli_sql_refuses(void **state)
{
    fixture *f = *state;
    char out[8192];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s sql r.db \"DELETE FROM runs\"",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "syncsim sql: "));
    assert_non_null(strstr(out, "readonly"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s sql r.db \"SELECT count(*) FROM runs\"",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "count(*)\n2\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s sql r.db \"SELEC 1\"", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "syntax error"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s sql a.trace \"SELECT 1\"", SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "not a SQLite database"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s sql", SYNCSIM_BINARY), 2);
}

/* Given no database, ./syncsim.db, every argument then a query (it took
 * the query for a file); without one, one line saying so. */
static void test_cli_sql_default_database(void **state)
{
    fixture *f = *state;
    char out[8192];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s sql \"SELECT count(*) FROM runs\"",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "syncsim sql: no database: name it first"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cp r.db syncsim.db && %s sql \"SELECT count(*) "
                               "FROM runs\" \"SELECT 7\"", SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "count(*)\n2\n7\n7\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "echo 'SELECT 8' | %s sql", SYNCSIM_BINARY), 0);
    assert_string_equal(out, "8\n8\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s sql nosuch.db \"SELECT 1\"",
                               SYNCSIM_BINARY),
                     2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_sql_stmts_rows, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sql_formats, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sql_refuses, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sql_default_database, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
