/* test_cli_runs.c -- `syncsim runs`: a database's runs listed, named and
 * deleted, and --run taking a name wherever it takes an id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

static const char *racy =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s stream device=0\n"
    "buffer X size=8\n"
    "s op w w:X\n"
    "h op r r:X\n";

static const char *clean =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s stream device=0\n"
    "buffer X size=8\n"
    "s op w w:X\n"
    "h sync s\n"
    "h op r r:X\n";

/* Two runs of one database, checked (so that checks and findings exist). */
static void two_runs(const fixture *f)
{
    assert_int_equal(tmpdir_write(f, "racy.trace", racy), 0);
    assert_int_equal(tmpdir_write(f, "clean.trace", clean), 0);
    assert_int_equal(tmpdir_sh(f, NULL, 0,
                               "%s import racy.trace -o r.db && %s import clean.trace -o r.db && "
                               "%s check r.db --run 1; %s check r.db --run 2",
                               SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
}

/* The list: one line per run, the latest last, with kind, status,
 * statements, creation time and name. */
static void test_cli_runs_lists(void **state)
{
    fixture *f = *state;
    char out[4096];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "r.db: 2 runs\n"));
    assert_non_null(strstr(out, "created (UTC)"));
    const char *one = strstr(out, "\n     1  import    complete             2  20");
    const char *two = strstr(out, "\n     2  import    complete             3  20");
    assert_non_null(one);
    assert_non_null(two);
    assert_true(one < two);
    assert_non_null(strstr(out, "racy.trace\n"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --json", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "{\"id\": 2, \"kind\": \"import\", \"status\": \"complete\", "
                                "\"statements\": 3, \"name\": \"clean.trace\", \"created\": \"20"));
}

/* A name given with --name is what --run takes; names are unique and never
 * a number. */
static void test_cli_runs_names_and_run_by_name(void **state)
{
    fixture *f = *state;
    char out[4096];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --name 1 before --name 2 after",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "run 1: named 'before'"));
    /* --run NAME: the racy run by its name, though run 2 is the latest */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check r.db --run before", SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "race"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export r.db --run after", SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "h sync s"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check r.db --run nosuch", SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "r.db: no run named 'nosuch'"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --name 2 before", SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "run 1 is already named 'before'"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --name 2 7", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "cannot name a run"));
    /* a name may start with a digit: only a number is an id */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --name 2 2nd-try && "
                               "%s export r.db --run 2nd-try", SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "h sync s"));
}

/* Deleting a run leaves no row of it in any table; the other run is whole. */
static void test_cli_runs_delete_leaves_nothing(void **state)
{
    fixture *f = *state;
    char out[4096];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --delete 1", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "run 1: deleted"));
    assert_non_null(strstr(out, "r.db: 1 run\n"));
    assert_int_equal(
        tmpdir_sh(f, out, sizeof out,
                  "for t in run_meta strings queues buffers checks findings; do "
                  "sqlite3 r.db \"select '$t', count(*) from $t where run = 1\"; done; "
                  "sqlite3 r.db \"select 'statements', count(*) from stmt_blocks where id < (2 << 40)\"; "
                  "sqlite3 r.db \"select 'times', count(*) from stmt_times where id < (2 << 40)\"; "
                  "sqlite3 r.db \"select 'runs', count(*) from runs where id = 1\"; "
                  "sqlite3 r.db \"select 'kept', sum(n) from stmt_blocks\""),
        0);
    assert_non_null(strstr(out, "run_meta|0"));
    assert_non_null(strstr(out, "queues|0"));
    assert_non_null(strstr(out, "checks|0"));
    assert_non_null(strstr(out, "findings|0"));
    assert_non_null(strstr(out, "statements|0"));
    assert_non_null(strstr(out, "times|0"));
    assert_non_null(strstr(out, "runs|0"));
    assert_non_null(strstr(out, "kept|3"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check r.db", SYNCSIM_BINARY), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --delete 1", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "no run 1"));
}

/* A run left recording by a producer that is gone (no process holds its
 * lock) is "died", and is deleted only with --force. */
static void test_cli_runs_delete_recording_needs_force(void **state)
{
    fixture *f = *state;
    char out[4096];
    two_runs(f);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "sqlite3 r.db \"update runs set status = 'recording' "
                                           "where id = 2\""),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, " died "));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --delete 2", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "run 2 is unfinished (status 'recording') and its producer is gone"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --delete 2 --force",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "r.db: 1 run\n"));
}

/* A run that is not there is worded one way, by every command, naming the
 * runs there are (no internal table); an empty database says it has none. */
static void test_cli_runs_missing_run_one_wording(void **state)
{
    fixture *f = *state;
    char out[4096];
    two_runs(f);
    static const char *const cmds[] = { "check r.db --run 9", "export r.db --run 9",
                                        "info r.db --run 9", "replay r.db --run 9",
                                        "timeline r.db --run 9 -o t.svg", "runs r.db --delete 9",
                                        "graph r.db --run 9 -o g.svg" };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char want[128];
        snprintf(want, sizeof want, "syncsim %.*s: r.db: no run 9 (its runs: 1, 2)\n",
                 (int)strcspn(cmds[i], " "), cmds[i]);
        assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s %s", SYNCSIM_BINARY, cmds[i]), 2);
        if (!strstr(out, want))
            fail_msg("%s says '%s', not '%s'", cmds[i], out, want);
    }
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check r.db --run nosuch", SYNCSIM_BINARY),
                     2);
    assert_string_equal(out, "syncsim check: r.db: no run named 'nosuch' (its runs: 1, 2)\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs r.db --delete 1 --delete 2 >/dev/null "
                               "&& %s check r.db", SYNCSIM_BINARY, SYNCSIM_BINARY),
                     2);
    assert_string_equal(out, "syncsim check: r.db: no run to read (it holds none)\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_runs_lists, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_runs_names_and_run_by_name, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_runs_delete_leaves_nothing, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_runs_delete_recording_needs_force, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_runs_missing_run_one_wording, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
