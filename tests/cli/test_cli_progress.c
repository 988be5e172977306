/* test_cli_progress.c -- progress of long work (cli/progress.c): lines on
 * a pipe, a bar when asked, nothing when off. With an interval of 1 ms the
 * work below takes many intervals, so lines must appear; what is asserted
 * is that they do and what they say, never how long anything took. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/* Two ranks of a generated job, as databases that give their rank. */
static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    return tmpdir_sh(f, NULL, 0,
                     "%s generate nvfuser-ring --ranks 8 --streams 4 --iters 10 -o big.trace && "
                     "%s import big.trace -o a0.db && %s import big.trace -o a1.db && "
                     "sqlite3 a0.db \"insert into run_meta(run, key, value, pos) "
                     "values(1, 'rank', '0', 99)\" && "
                     "sqlite3 a1.db \"insert into run_meta(run, key, value, pos) "
                     "values(1, 'rank', '1', 99)\" >/dev/null",
                     SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY);
}

/* Not a terminal: lines "syncsim CMD: N of TOTAL UNIT (P%), T s", the last
 * one "done, ...", on standard error only. */
static void test_cli_progress_lines_on_a_pipe(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "rm -f j.db; { SYNCSIM_PROGRESS_MS=1 %s merge a0.db a1.db -o j.db "
                               "2>&1 >/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "syncsim merge: "));
    assert_non_null(strstr(out, " statements ("));
    const char *last = strstr(out, "syncsim merge: done, ");
    assert_non_null(last);
    assert_non_null(strstr(last, " of "));
    assert_non_null(strstr(last, " statements (100%), "));
    assert_null(strchr(out, '\r'));
    /* standard output has the result and nothing else */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "rm -f j.db; { SYNCSIM_PROGRESS_MS=1 %s merge a0.db a1.db -o j.db "
                               "2>/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(strncmp(out, "merged 2 ranks as run 1: ", 25), 0);
    assert_null(strstr(out, "syncsim merge:"));
}

/* SYNCSIM_PROGRESS=bar: redrawn in place and erased at the end; off: nothing. */
static void test_cli_progress_bar_and_off(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "rm -f j.db; { SYNCSIM_PROGRESS=off SYNCSIM_PROGRESS_MS=1 %s merge "
                               "a0.db a1.db -o j.db 2>&1 >/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "");
    /* the bar starts one interval in when the interval is set */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "rm -f j.db; { SYNCSIM_PROGRESS=bar SYNCSIM_PROGRESS_MS=1 %s merge "
                               "a0.db a1.db -o j.db 2>&1 >/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    if (!strstr(out, "\rsyncsim merge: "))
        fail_msg("no bar in '%.300s'", out);
    assert_non_null(strstr(out, " statements, "));
    assert_null(strstr(out, "done, "));
    size_t n = strlen(out);
    assert_true(n >= 4);
    assert_string_equal(out + n - 4, "\r\033[K");       /* erased */
}

/* check counts the statements it checks, of the run's total for a
 * database; standard output keeps the findings and the verdict alone. */
static void test_cli_progress_check(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ SYNCSIM_PROGRESS_MS=1 %s check a0.db 2>&1 >/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "syncsim check: "));
    const char *last = strstr(out, "syncsim check: done, ");
    assert_non_null(last);
    assert_non_null(strstr(last, " statements (100%), "));
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ SYNCSIM_PROGRESS_MS=1 %s check big.trace 2>/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(strncmp(out, "big.trace: clean: ", 18), 0);
}

/* Work that is not counted (a cluster simulation) still says it goes on,
 * and when it is done. */
static void test_cli_progress_uncounted_work(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ SYNCSIM_PROGRESS_MS=1 %s cluster --network builtin:4x8 "
                               "--workload step:tp=8,pp=4,dp=1,microbatches=8,seq=4096 "
                               "2>&1 >/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "syncsim cluster: working, "));
    assert_non_null(strstr(out, "syncsim cluster: done, "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_progress_lines_on_a_pipe),
        cmocka_unit_test(test_cli_progress_bar_and_off),
        cmocka_unit_test(test_cli_progress_check),
        cmocka_unit_test(test_cli_progress_uncounted_work),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
