/* test_cli_check_expect.c -- `syncsim check --expect` and standard input
 * (issue 30): `expect clean` holds only for a check that is clean -- a
 * complete run, full coverage -- and `check /dev/stdin` reads a pipe as
 * `check -` does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/* One host writes and reads: nothing to find. */
static const char *quiet =
    "syncsim-trace 1\n"
    "queue h host\n"
    "buffer X size=8\n"
    "h op w w:X\n"
    "h op r r:X\n"
    "expect clean\n";

/* The same with a metadata line (before the statements) added. */
static int write_with_meta(const fixture *f, const char *name, const char *meta)
{
    char text[1024];
    snprintf(text, sizeof text, "syncsim-trace 1\n%s\n%s", meta, quiet + strlen("syncsim-trace 1\n"));
    return tmpdir_write(f, name, text);
}

/* Clean and complete: --expect agrees. */
static void test_cli_check_expect_clean_complete_passes(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "q.trace", quiet), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --expect q.trace", SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "ok, 0 findings as expected"));
}

/* A run still recording (or whose producer died) found nothing among the
 * statements it has: that is not clean, so `expect clean` fails. */
static void test_cli_check_expect_clean_fails_on_incomplete_run(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(write_with_meta(f, "inc.trace", "meta status=recording"), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --expect inc.trace", SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "FAILED: the trace expects clean, but the check is not"));
    assert_non_null(strstr(out, "incomplete"));
}

/* A capture whose device statement has no byte ranges: no findings, but
 * partial coverage, so `expect clean` fails. */
static void test_cli_check_expect_clean_fails_on_partial_coverage(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "part.trace",
                                  "syncsim-trace 1\n"
                                  "meta accesses=none\n"
                                  "queue h host\n"
                                  "queue s stream device=0\n"
                                  "s op k\n"
                                  "h sync s\n"
                                  "expect clean\n"),
                     0);
    assert_int_equal(
        tmpdir_sh(f, out, sizeof out, "%s check --expect part.trace", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "FAILED: the trace expects clean, but the check is not"));
    assert_non_null(strstr(out, "partial coverage"));
}

/* Expected findings in an incomplete run are still found: those pass. */
static void test_cli_check_expect_findings_in_incomplete_run_pass(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "racy.trace",
                                  "syncsim-trace 1\n"
                                  "meta status=recording\n"
                                  "queue h host\n"
                                  "queue s stream device=0\n"
                                  "buffer X size=8\n"
                                  "s op w w:X\n"
                                  "h op r r:X\n"
                                  "expect race type=RAW first=w second=r\n"),
                     0);
    assert_int_equal(
        tmpdir_sh(f, out, sizeof out, "%s check --expect racy.trace", SYNCSIM_BINARY), 0);
}

/* `check /dev/stdin` from a pipe reads the trace as `check -` does (the
 * format was sniffed by reading the pipe, which left nothing to parse). */
static void test_cli_check_dev_stdin_pipe(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "q.trace", quiet), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cat q.trace | %s check -", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "clean"));
    assert_int_equal(
        tmpdir_sh(f, out, sizeof out, "cat q.trace | %s check /dev/stdin", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "clean: 2 statements"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cat q.trace | %s check --expect /dev/stdin",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "ok, 0 findings as expected"));
    /* a file behind standard input is a file: read as such */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check /dev/stdin < q.trace", SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "clean: 2 statements"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_check_expect_clean_complete_passes, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_check_expect_clean_fails_on_incomplete_run,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_check_expect_clean_fails_on_partial_coverage,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_check_expect_findings_in_incomplete_run_pass,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_check_dev_stdin_pipe, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
