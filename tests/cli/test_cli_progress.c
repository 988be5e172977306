/* test_cli_progress.c -- progress of long work (cli/progress.c): lines on
 * a pipe, a bar when asked, nothing when off; on a terminal (a pseudo-
 * terminal of 80 columns, then 40) the bar fits the width and shows an
 * ETA, and the results start on a line of their own; every long command
 * counts against a total; bad settings are refused in one line. With an
 * interval of 1 ms the work below takes many intervals, so lines must
 * appear; what is asserted is that they do and what they say, never how
 * long anything took. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tmpdir.h"

/* Two ranks of a generated job, as databases that give their rank. */
static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    /* a0, a1: small ranks, whose lines on a pipe fit the output read; b0,
     * b1 and big.trace: long enough for many redraws of a bar */
    return tmpdir_sh(f, NULL, 0,
                     "%s generate nvfuser-ring --ranks 8 --streams 4 --iters 10 -o small.trace "
                     "2>/dev/null && %s generate nvfuser-ring --ranks 8 --streams 4 --iters 200 "
                     "-o big.trace 2>/dev/null && "
                     "for x in a:small b:big; do for r in 0 1; do db=${x%%%%:*}$r.db && "
                     "%s import ${x#*:}.trace -o $db >/dev/null && sqlite3 $db \"insert into "
                     "run_meta(run, key, value, pos) values(1, 'rank', '$r', 99)\" || exit 1; "
                     "done; done",
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

/* Every long command counts against a total: a text trace's lines (check,
 * import), a simulation's steps (cluster: ops and ring steps), the minimiser's candidates, a
 * report's statements; and its last line says the total. */
static void test_cli_progress_every_command_has_a_total(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    static const struct {
        const char *cmd, *done;
    } cases[] = {
        { "check big.trace", "syncsim check: done, 112200 of 112200 lines (100%), " },
        { "import big.trace -o i.db", "syncsim import: done, 112200 of 112200 lines (100%), " },
        { "cluster --network builtin:4x8 --workload step:tp=8,pp=4,dp=1,microbatches=8,seq=4096",
          "syncsim cluster: done, " },
        { "minimize m.db", " candidates (100%), " },
        { "report m.db -o r.html --no-timeline", " statements (100%), " },
    };
    assert_int_equal(tmpdir_sh(f, NULL, 0, "%s run --policy full --copies 1 -o m.db",
                               SYNCSIM_BINARY),
                     0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = tmpdir_sh(f, out, sizeof out, "rm -f i.db; { SYNCSIM_PROGRESS_MS=1 %s %s 2>&1 "
                                               ">/dev/null; }",
                           SYNCSIM_BINARY, cases[i].cmd);
        if (rc > 1 || !strstr(out, cases[i].done))
            fail_msg("%s: exit %d, no '%s' in:\n%.2000s", cases[i].cmd, rc, cases[i].done, out);
    }
}

/* Runs cmd (sh -c, in the fixture's directory) on a pseudo-terminal `cols`
 * columns wide, standard output and error both the terminal; what the
 * terminal got, raw, in out. Returns the exit status. */
static int on_terminal(const fixture *f, int cols, const char *cmd, char *out, size_t cap)
{
    struct winsize ws = { .ws_row = 24, .ws_col = (unsigned short)cols };
    int master;
    fflush(NULL);
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (chdir(f->dir) != 0)
            _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    size_t n = 0;
    for (;;) {
        ssize_t got = read(master, out + n, cap - 1 - n);
        if (got > 0 && n + (size_t)got < cap - 1) {
            n += (size_t)got;
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        break;          /* EIO: the child's side closed; or out is full */
    }
    out[n] = '\0';
    close(master);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* On a terminal of `cols` columns: every redraw of the bar is shorter than
 * the width (a line that wrapped would leave a stale line at each redraw),
 * at least one shows the ETA, and `result` starts a line of its own. */
static void bar_fits(const fixture *f, int cols, const char *cmd, const char *result)
{
    static char out[1 << 20];
    int rc = on_terminal(f, cols, cmd, out, sizeof out);
    if (rc != 0)
        fail_msg("%s: exit %d:\n%.2000s", cmd, rc, out);
    int redraws = 0, with_eta = 0, with_bar = 0;
    for (const char *p = out; (p = strstr(p, "\rsyncsim ")); p++) {
        const char *end = strstr(p, "\033[K");
        assert_non_null(end);
        int width = (int)(end - p - 1);
        if (width >= cols)
            fail_msg("%d columns, a redraw of %d: '%.*s'", cols, width, width, p + 1);
        redraws++;
        with_eta += memmem(p, (size_t)(end - p), ", ETA ", 6) != NULL;
        with_bar += memmem(p, (size_t)(end - p), "[#", 2) != NULL;
    }
    if (!redraws || !with_eta)
        fail_msg("%s on %d columns: %d redraws, %d with an ETA:\n%.2000s", cmd, cols, redraws,
                 with_eta, out);
    if (cols >= 80 && !with_bar)
        fail_msg("%d columns and no bar:\n%.2000s", cols, out);
    /* the result: after the bar was erased ("\r\033[K"), or after a newline */
    const char *r = strstr(out, result);
    assert_non_null(r);
    assert_true(r == out || r[-1] == '\n' || (r - out >= 4 && memcmp(r - 4, "\r\033[K", 4) == 0));
}

static void test_cli_progress_bar_fits_the_terminal(void **state)
{
    fixture *f = *state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "SYNCSIM_PROGRESS_MS=1 %s check big.trace", SYNCSIM_BINARY);
    bar_fits(f, 80, cmd, "big.trace: clean: ");
    bar_fits(f, 40, cmd, "big.trace: clean: ");
    /* merge printed its result onto the bar */
    snprintf(cmd, sizeof cmd, "rm -f j.db; SYNCSIM_PROGRESS_MS=1 %s merge b0.db b1.db -o j.db",
             SYNCSIM_BINARY);
    bar_fits(f, 80, cmd, "merged 2 ranks as run 1: ");
}

/* A setting that means nothing is refused, in one line, before any work. */
static void test_cli_progress_bad_settings(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "SYNCSIM_PROGRESS=bogus %s check big.trace",
                               SYNCSIM_BINARY),
                     2);
    assert_string_equal(out, "syncsim: $SYNCSIM_PROGRESS is 'bogus'; expected bar, lines or off\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "SYNCSIM_PROGRESS_MS=soon %s check big.trace",
                               SYNCSIM_BINARY),
                     2);
    assert_string_equal(out, "syncsim: $SYNCSIM_PROGRESS_MS is 'soon'; expected milliseconds from "
                             "1 to 86400000\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_progress_lines_on_a_pipe),
        cmocka_unit_test(test_cli_progress_bar_and_off),
        cmocka_unit_test(test_cli_progress_check),
        cmocka_unit_test(test_cli_progress_every_command_has_a_total),
        cmocka_unit_test(test_cli_progress_bar_fits_the_terminal),
        cmocka_unit_test(test_cli_progress_bad_settings),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
