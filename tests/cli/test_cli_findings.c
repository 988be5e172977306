/* test_cli_findings.c -- findings where users look for them: compiler-style
 * lines (file, line, column, severity, kind; the fix as a note), several
 * traces in one check with the worst exit status, and baselines of known
 * findings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/* The write on s0 (line 5) and the host's read (line 6) are not ordered. */
static const char *racy =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s stream device=0\n"
    "buffer X size=8\n"
    "s op fill w:X\n"
    "h op use r:X\n";

static const char *clean =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s stream device=0\n"
    "buffer X size=8\n"
    "s op fill w:X\n"
    "h sync s\n"
    "h op use r:X\n";

/* FILE:LINE:COL: error: KIND: message, the fix on the next line as a
 * note, the other side as a note at its own line; the verdict names the
 * file. */
static void test_cli_findings_compiler_style_lines(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "racy.trace", racy), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check racy.trace", SYNCSIM_BINARY), 1);
    const char *e = strstr(out, "racy.trace:6:1: error: race: RAW race on X[0:8]: fill (s) and "
                                "use (h) are not ordered\n");
    assert_non_null(e);
    assert_ptr_equal(e, out);                   /* the first line */
    e = strchr(e, '\n') + 1;
    assert_int_equal(strncmp(e, "racy.trace:6:1: note: fix: add \"h sync s\" before use\n", 51),
                     0);
    assert_non_null(strstr(out, "racy.trace:5:1: note: the other access (s)\n"));
    assert_non_null(strstr(out, "racy.trace: 1 finding in 2 statements (race 1)\n"));
}

/* A database shows its findings at the lines of the text trace it was
 * imported from, as the text itself does; with that file gone, at line 1
 * of the database, each statement named by its seq. */
static void test_cli_findings_database_at_its_source(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_write(f, "racy.trace", racy), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import racy.trace -o r.db && %s check r.db",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "racy.trace:6:1: error: race: RAW race on X[0:8]: fill (s) and "
                                "use (h) are not ordered\n"));
    assert_non_null(strstr(out, "racy.trace:6:1: note: fix: add \"h sync s\" before use\n"));
    assert_non_null(strstr(out, "racy.trace:5:1: note: the other access (s)\n"));
    assert_non_null(strstr(out, "r.db (run 1): 1 finding in 2 statements (race 1)\n"));
    /* from another directory: the path from there */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "mkdir -p sub && cd sub && %s check ../r.db",
                               SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "/racy.trace:6:1: error: race:"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "mv racy.trace gone.trace && %s check r.db",
                               SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "r.db:1:1: error: race: RAW race on X[0:8]: fill (s) and use (h) "
                                "are not ordered (seq 1)\n"));
    assert_non_null(strstr(out, "r.db:1:1: note: fix: add \"h sync s\" before use\n"));
    assert_non_null(strstr(out, "r.db:1:1: note: the other access (s, seq 0)\n"));
}

/* Several traces: each checked and reported, the exit status the worst
 * of theirs: 2 > 1 > 3 > 4 > 0. */
static void test_cli_findings_several_traces_worst_status(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_write(f, "racy.trace", racy), 0);
    assert_int_equal(tmpdir_write(f, "clean.trace", clean), 0);
    assert_int_equal(tmpdir_write(f, "incomplete.trace",
                                  "syncsim-trace 1\nqueue h host\nh op a\n"),
                     0);
    /* a capture without byte ranges (partial coverage: 4), a run still
     * recording (incomplete: 3) */
    assert_int_equal(tmpdir_sh(f, NULL, 0,
                               "%s examples >/dev/null && "
                               "%s import examples/kineto-missing-wait.json -o cap.db && "
                               "%s import incomplete.trace -o inc.db && "
                               "sqlite3 inc.db \"update runs set status = 'recording'\"",
                               SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check clean.trace", SYNCSIM_BINARY), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check cap.db clean.trace",
                               SYNCSIM_BINARY),
                     4);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check cap.db inc.db clean.trace",
                               SYNCSIM_BINARY),
                     3);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check inc.db clean.trace racy.trace cap.db",
                               SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "clean.trace: clean: 3 statements, no findings\n"));
    assert_non_null(strstr(out, "racy.trace:6:1: error: race: "));
    assert_non_null(strstr(out, "racy.trace: 1 finding in 2 statements (race 1)\n"));
    assert_non_null(strstr(out, "cap.db (run 1): no findings, partial coverage"));
    assert_non_null(strstr(out, "inc.db (run 1): incomplete"));
    /* a trace that cannot be read: its error, the others still checked */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check racy.trace missing.trace clean.trace",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "syncsim check: missing.trace: no such file"));
    assert_non_null(strstr(out, "clean.trace: clean"));
    /* --json: one object per trace */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check racy.trace clean.trace --json",
                               SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "\"trace\": \"racy.trace\""));
    assert_non_null(strstr(out, "\"trace\": \"clean.trace\""));
}

/* --write-baseline writes the findings; --baseline does not report them,
 * also after the trace is edited elsewhere (lines move); a new finding is
 * reported; a bad file is one error line naming its line. */
static void test_cli_findings_baseline(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_write(f, "racy.trace", racy), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s check racy.trace --write-baseline known.txt", SYNCSIM_BINARY),
                     1);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cat known.txt"), 0);
    assert_int_equal(strncmp(out, "syncsim-baseline 1\n", 19), 0);
    assert_non_null(strstr(out, "\nrace "));
    assert_non_null(strstr(out, " racy.trace: RAW race on X[0:8]"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check racy.trace --baseline known.txt",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "racy.trace: clean: 2 statements, no findings; 1 known finding "
                                "not reported (--baseline)"));
    assert_null(strstr(out, "error:"));
    /* edited: a comment and a new race on another buffer; the known race
     * moved two lines down */
    assert_int_equal(tmpdir_write(f, "racy.trace",
                                  "syncsim-trace 1\n"
                                  "# edited\n"
                                  "queue h host\n"
                                  "queue s stream device=0\n"
                                  "buffer X size=8\n"
                                  "buffer Y size=8\n"
                                  "s op fill w:X\n"
                                  "h op use r:X\n"
                                  "s op fill2 w:Y\n"
                                  "h op use2 r:Y\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check racy.trace --baseline known.txt",
                               SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "racy.trace:10:1: error: race: RAW race on Y[0:8]"));
    assert_null(strstr(out, "race on X"));
    assert_non_null(strstr(out, "1 known finding not reported"));
    /* a damaged baseline */
    assert_int_equal(tmpdir_write(f, "bad.txt", "syncsim-baseline 1\nrace 12zz\n"), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check racy.trace --baseline bad.txt",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "bad.txt:2:1: error: expected KIND FINGERPRINT"));
    assert_int_equal(tmpdir_write(f, "bad.txt", "race 0123456789abcdef\n"), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check racy.trace --baseline bad.txt",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "bad.txt:1:1: error: expected 'syncsim-baseline 1'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_findings_compiler_style_lines, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_findings_database_at_its_source, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_findings_several_traces_worst_status,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_findings_baseline, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
