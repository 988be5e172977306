/* test_cli_errors.c -- one error style for every command: "syncsim CMD:
 * message" (or "syncsim CMD: FILE:LINE: message"), then the usage line and
 * a hint; never getopt's own lines, never the command named twice, and the
 * limits named in the messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"
#include "traces/store_int.h"

#include <sqlite3.h>

/* getopt's own wording, which must never reach the user. */
static void assert_no_getopt_lines(const char *out)
{
    assert_null(strstr(out, "unrecognized option"));
    assert_null(strstr(out, "invalid option"));
    assert_null(strstr(out, "requires an argument"));
    assert_null(strstr(out, "doesn't allow an argument"));
}

/* Every command `syncsim help` lists: an unknown option is one line in the
 * house style, exit 2, followed by the usage and the hint. */
static void test_cli_errors_unknown_option_every_command(void **state)
{
    fixture *f = *state;
    static char list[8192], out[8192];
    assert_int_equal(tmpdir_sh(f, list, sizeof list, "%s help", SYNCSIM_BINARY), 0);
    char *p = strstr(list, "Commands:\n");
    assert_non_null(p);
    int n = 0;
    for (p = strchr(p, '\n') + 1; strncmp(p, "  ", 2) == 0; p = strchr(p, '\n') + 1) {
        char cmd[32];
        assert_int_equal(sscanf(p, " %31s", cmd), 1);
        int rc = tmpdir_sh(f, out, sizeof out, "%s %s --no-such-option", SYNCSIM_BINARY, cmd);
        char want[128];
        snprintf(want, sizeof want, "syncsim %s: unknown option '--no-such-option'\n", cmd);
        if (rc != 2 || strncmp(out, want, strlen(want)) != 0)
            fail_msg("%s: exit %d:\n%s", cmd, rc, out);
        assert_no_getopt_lines(out);
        snprintf(want, sizeof want, "Run 'syncsim help %s' for more.", cmd);
        assert_non_null(strstr(out, want));
        n++;
    }
    assert_true(n >= 16);
}

/* A missing value and a value given to a flag: named, once. */
static void test_cli_errors_missing_and_extra_values(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s run --tokens", SYNCSIM_BINARY), 2);
    assert_int_equal(strncmp(out, "syncsim run: option '--tokens' needs a value\n", 45), 0);
    assert_no_getopt_lines(out);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay -o", SYNCSIM_BINARY), 2);
    assert_int_equal(strncmp(out, "syncsim replay: option '-o' needs a value\n", 42), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s info --json=yes x.db", SYNCSIM_BINARY), 2);
    assert_int_equal(strncmp(out, "syncsim info: option '--json' takes no value\n", 45), 0);
    assert_no_getopt_lines(out);
}

/* A value past a limit says the limit. */
static void test_cli_errors_name_the_limit(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s run --prompt 1000000000000",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "syncsim run: --prompt expects a count from 0 to 1000000, got "
                                "'1000000000000'"));
    /* a model key past its limit: the limit, not "not a positive integer" */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s run --model llama:n_layer=99999999",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "n_layer takes a whole number from 1 to 16777216, got "
                                "'99999999'"));
}

/* A library error that names its operation as the command is named
 * ("merge: ...") is not prefixed twice. */
static void test_cli_errors_no_doubled_command(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "r.trace", "syncsim-trace 1\nqueue h host\nh op a\n"), 0);
    assert_int_equal(
        tmpdir_sh(f, out, sizeof out,
                  "%s import r.trace -o a.db && %s import r.trace -o b.db && "
                  "sqlite3 a.db \"insert into run_meta(run, key, value, pos) values(1, 'rank', "
                  "'0', 99)\" && sqlite3 b.db \"insert into run_meta(run, key, value, pos) "
                  "values(1, 'rank', '0', 99)\"",
                  SYNCSIM_BINARY, SYNCSIM_BINARY),
        0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge a.db b.db -o j.db", SYNCSIM_BINARY),
                     2);
    assert_string_equal(out, "syncsim merge: a.db (run 1) and b.db (run 1) are both rank 0\n");
}

/* A database error names the file and the table once ("table meta: :
 * attempt to write a readonly database" had neither the colon right nor a
 * hint), and a read-only one says what is wrong. Running as root, a
 * read-only file cannot be made here, so the message is built directly. */
static void test_cli_errors_database_errors_name_the_file(void **state)
{
    (void)state;
    char path[] = "/data/run.db";
    trace_store st = { .db = NULL, .path = path };
    trace_error err = { 0 };
    assert_int_equal(store_fail(&st, SQLITE_READONLY, "meta", NULL, &err), -1);
    assert_string_equal(err.msg, "/data/run.db: table meta: attempt to write a readonly database "
                                 "(the file, or the folder it is in, cannot be written here)");
    assert_int_equal(store_fail(&st, SQLITE_FULL, "statements", "appending", &err), -1);
    assert_string_equal(err.msg, "/data/run.db: table statements: appending: database or disk "
                                 "is full (no space left where it is written)");
    assert_int_equal(store_fail(&st, SQLITE_IOERR, NULL, NULL, &err), -1);
    assert_string_equal(err.msg, "/data/run.db: disk I/O error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_errors_unknown_option_every_command),
        cmocka_unit_test(test_cli_errors_missing_and_extra_values),
        cmocka_unit_test(test_cli_errors_name_the_limit),
        cmocka_unit_test(test_cli_errors_no_doubled_command),
        cmocka_unit_test(test_cli_errors_database_errors_name_the_file),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
