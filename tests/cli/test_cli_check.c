/* test_cli_check.c -- `syncsim check` and `syncsim minimize` through the
 * command line: what they promise and refuse, and output a program parses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/* The issue-15 trace: the wait carries the only order between two hosts. */
static const char *handoff =
    "syncsim-trace 1\n"
    "queue h0 host\n"
    "queue h1 host\n"
    "queue s0 stream device=0\n"
    "queue s1 stream device=1\n"
    "buffer X size=64\n"
    "s0 record e by=h0\n"
    "h0 op fill w:X\n"
    "s1 wait e by=h0\n"
    "s1 op use r:X by=h1\n";

/* Deleting what minimize lists, with -o, leaves a clean trace. */
static void test_cli_minimize_output_checks_clean(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "h.trace", handoff), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s minimize h.trace -o min.trace",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "0 of 1 candidate"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check min.trace", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "clean"));
}

/* A trace with findings is not minimised unless asked; exit 1 says why. */
static void test_cli_minimize_refuses_a_racy_trace(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "racy.trace",
                                  "syncsim-trace 1\n"
                                  "queue h host\n"
                                  "queue s stream device=0\n"
                                  "buffer X size=8\n"
                                  "s op w w:X\n"
                                  "h op r r:X\n"
                                  "h sync s\n"
                                  "h sync s\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s minimize racy.trace", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "1 finding"));
    assert_non_null(strstr(out, "--allow-findings"));
    assert_int_equal(
        tmpdir_sh(f, out, sizeof out, "%s minimize --allow-findings racy.trace", SYNCSIM_BINARY),
        0);
    assert_non_null(strstr(out, "note: the trace has 1 finding"));
    assert_non_null(strstr(out, "2 of 2 candidate"));   /* nothing follows them */
}

/* A flag signalled after an await of it passed needs a second pass: from a
 * file that works (clean); from a pipe it is one error line, exit 2. */
static void test_cli_check_late_signal_needs_a_file(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "late.trace",
                                  "syncsim-trace 1\n"
                                  "queue h0 host\n"
                                  "queue h1 host\n"
                                  "queue h2 host\n"
                                  "buffer B size=64\n"
                                  "h0 signal f\n"
                                  "h2 await f\n"
                                  "h2 op use r:B\n"
                                  "h1 op pb w:B\n"
                                  "h1 signal f\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check late.trace", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "clean"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cat late.trace | %s check -", SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "cannot be read twice"));
    assert_null(strchr(strchr(out, '\n') + 1, '\n'));      /* one line */
}

/* Invalid UTF-8 is a parse error naming the line and column. */
static void test_cli_check_rejects_invalid_utf8(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "bad.trace",
                                  "syncsim-trace 1\n"
                                  "queue h host\n"
                                  "buffer X size=4\n"
                                  "h op \"caf\xe9\" w:X\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --json bad.trace", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "bad.trace:4:10: error: invalid UTF-8 (byte 0xe9)"));
}

/* Two queues that arrived at a generation a third never reaches wait for
 * the third only: their later arrivals, behind the first, are no cycle
 * between them (the checker once called this a deadlock). */
static void test_cli_check_absent_participant_is_no_deadlock(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "absent.trace",
                                  "syncsim-trace 1\n"
                                  "queue a stream device=d0\n"
                                  "queue b stream device=d1\n"
                                  "queue c stream device=d2\n"
                                  "a collective w allreduce size=3\n"
                                  "b collective w allreduce size=3\n"
                                  "c collective w allreduce size=3\n"
                                  "a collective w allreduce size=3\n"
                                  "b collective w allreduce size=3\n"
                                  "a collective w allreduce size=3\n"
                                  "b collective w allreduce size=3\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check absent.trace", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "a waits for collective w generation 2 (2 of 3 arrived)"));
    assert_non_null(strstr(out, "c arrived at an earlier generation but not at this one"));
    assert_null(strstr(out, "deadlock"));
    assert_null(strstr(out, "cycle"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_minimize_output_checks_clean, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_minimize_refuses_a_racy_trace, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_check_late_signal_needs_a_file, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_check_absent_participant_is_no_deadlock,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_check_rejects_invalid_utf8, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
