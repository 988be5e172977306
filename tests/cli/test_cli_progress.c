/* test_cli_progress.c -- progress of long work (cli/progress.c): lines on
 * a pipe, a bar when asked, nothing when off; on a terminal (a pseudo-
 * terminal of 80 columns, then 40) the bar fits the width and shows an
 * ETA, and the results start on a line of their own; every long command
 * counts against a total; a capture in a foreign format (Kineto JSON, plain
 * and gzipped, an Nsight Systems export, a CUDA log) counts its bytes or
 * rows as it is parsed, with an ETA, to the end; bad settings are refused
 * in one line. With an
 * interval of 1 ms the work below takes many intervals, so lines must
 * appear; what is asserted is that they do and what they say, never how
 * long anything took. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/big_captures.h"
#include "tests/tmpdir.h"

/* Launches of the captures the setup writes: long enough to parse for many
 * intervals of 1 ms, short enough for a test (15 MB of JSON). */
#define CAPTURE_LAUNCHES 50000
static uint64_t nsys_rows;

/* Two ranks of a generated job, as databases that give their rank. */
static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    char path[256];
    int rc = 0;
    snprintf(path, sizeof path, "%s/k.json", f->dir);
    rc |= big_kineto(path, CAPTURE_LAUNCHES, false);
    snprintf(path, sizeof path, "%s/k.json.gz", f->dir);
    rc |= big_kineto(path, CAPTURE_LAUNCHES, true);
    snprintf(path, sizeof path, "%s/n.sqlite", f->dir);
    rc |= big_nsys(path, CAPTURE_LAUNCHES, &nsys_rows);
    snprintf(path, sizeof path, "%s/c.log", f->dir);
    rc |= big_cuda_log(path, CAPTURE_LAUNCHES);
    if (rc != 0)
        return -1;
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
 * import), a simulation's steps (cluster: ops and ring steps), the minimiser's candidates
 * (and advise's groups after them), a report's statements; and its last line says the total. */
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
        { "advise m.db", "pass 2: done, " },         /* candidates, then the groups priced */
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

/* The size of file name of the fixture's directory. */
static uint64_t size_of(const fixture *f, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_size;
}

/* What the lines of cmd say of reading a capture of `total` bytes (unit
 * "bytes": "12.3 of 26.0 MB") or rows: a line with an ETA on the way, and
 * the reading's last line, "syncsim CMD: done, T of T MB (100%), ...", T
 * the total. A CUDA log (records: its launches) goes on with a second
 * pass, "pass 2: N of R records", whose last line is then the reading's. */
static void read_to_the_end(const char *out, const char *cmd, uint64_t total, const char *unit,
                            uint64_t records)
{
    char head[64];
    snprintf(head, sizeof head, "syncsim %s: ", cmd);
    bool eta = false, end = false;
    for (const char *p = out; (p = strstr(p, head)); p++) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        const char *line = p + strlen(head);
        unsigned pass = 1;
        int skip = 0;
        if (sscanf(line, "pass %u: %n", &pass, &skip) == 1)
            line += skip;
        bool last = strncmp(line, "done, ", 6) == 0;
        line += last ? 6 : 0;
        double done, of;
        char scale[16];
        if (sscanf(line, "%lf of %lf %15[a-zA-Z] (", &done, &of, scale) != 3 ||
            strcmp(scale, "statements") == 0 || strcmp(scale, "lines") == 0)
            continue;           /* the statements read after the open */
        if (pass == 2) {
            assert_true(records > 0);
            assert_string_equal(scale, "records");
            assert_true(of == (double)records);
        } else if (strcmp(unit, "rows") == 0) {
            assert_int_equal(pass, 1);
            assert_string_equal(scale, "rows");
            assert_true(of == (double)total);
        } else {
            /* the total in the scale it is shown in, to its one decimal */
            double k = strcmp(scale, "GB") == 0   ? 1e9
                       : strcmp(scale, "MB") == 0 ? 1e6
                       : strcmp(scale, "kB") == 0 ? 1e3
                                                  : 0;
            if (pass != 1 || k == 0 || fabs(of * k - (double)total) > 0.05 * k)
                fail_msg("'%.*s' does not say %llu bytes", (int)(nl - p), p,
                         (unsigned long long)total);
        }
        eta |= !last && memmem(p, (size_t)(nl - p), ", ETA ", 6) != NULL;
        end = last;             /* the last line of the reading says it is done */
        if (last) {
            assert_int_equal(pass, records ? 2 : 1);
            assert_true(done == of);
            assert_non_null(memmem(p, (size_t)(nl - p), " (100%), ", 9));
        }
    }
    if (!eta || !end)
        fail_msg("%s: %s an ETA, %s a last line of the reading:\n%.3000s", cmd,
                 eta ? "with" : "without", end ? "with" : "without", out);
    assert_null(strchr(out, '\r'));
}

/* A capture in a foreign format is parsed while it is opened: lines count
 * its bytes (a gzip file's compressed bytes) or rows against the total,
 * with an ETA, up to the total (a CUDA log's records matched after); then
 * the statements go on being counted, and standard output has the result
 * alone. */
static void test_cli_progress_capture_lines(void **state)
{
    fixture *f = *state;
    static char out[1 << 18];
    static const struct {
        const char *file, *unit;
    } inputs[] = {
        { "k.json.gz", "bytes" }, { "k.json", "bytes" }, { "n.sqlite", "rows" },
        { "c.log", "bytes" },
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        const char *file = inputs[i].file;
        uint64_t total = strcmp(inputs[i].unit, "rows") == 0 ? nsys_rows : size_of(f, file);
        int rc = tmpdir_sh(f, out, sizeof out, "rm -f i.db; { SYNCSIM_PROGRESS_MS=1 %s import %s "
                                               "-o i.db 2>&1 >/dev/null; }",
                           SYNCSIM_BINARY, file);
        if (rc != 0)
            fail_msg("import %s: exit %d:\n%.2000s", file, rc, out);
        read_to_the_end(out, "import", total, inputs[i].unit,
                        strcmp(file, "c.log") == 0 ? CAPTURE_LAUNCHES : 0);
        assert_non_null(strstr(out, "syncsim import: done, "));
    }
    /* check too; its verdict alone on standard output */
    int rc = tmpdir_sh(f, out, sizeof out, "{ SYNCSIM_PROGRESS_MS=1 %s check k.json.gz 2>&1 "
                                           ">/dev/null; }",
                       SYNCSIM_BINARY);
    assert_true(rc != 2);
    read_to_the_end(out, "check", size_of(f, "k.json.gz"), "bytes", 0);
    tmpdir_sh(f, out, sizeof out, "{ SYNCSIM_PROGRESS_MS=1 %s check k.json.gz 2>/dev/null; }",
              SYNCSIM_BINARY);
    assert_int_equal(strncmp(out, "k.json.gz: ", 11), 0);
    assert_null(strstr(out, "syncsim check:"));
    /* a capture that fails half way: no last line says the reading is done,
     * the error line ends the output */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "head -c 600000 k.json.gz >cut.json.gz; rm -f "
                                                   "i.db; { SYNCSIM_PROGRESS_MS=1 %s import "
                                                   "cut.json.gz -o i.db 2>&1 >/dev/null; }",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "syncsim import: "));
    assert_null(strstr(out, "syncsim import: done, "));
    const char *error = strstr(out, "syncsim import: cut.json.gz: truncated gzip data");
    if (!error || strchr(error, '\n') != out + strlen(out) - 1)
        fail_msg("not the error alone at the end:\n%.3000s", out);
    /* off: nothing */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "rm -f i.db; { SYNCSIM_PROGRESS=off "
                                                   "SYNCSIM_PROGRESS_MS=1 %s import k.json.gz -o "
                                                   "i.db 2>&1 >/dev/null; }",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "");
}

/* On a terminal, the bar of a capture's reading fits 80 columns (and 40)
 * and shows an ETA; the result starts a line of its own. */
static void test_cli_progress_capture_bar(void **state)
{
    fixture *f = *state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -f i.db; SYNCSIM_PROGRESS_MS=1 %s import k.json.gz -o i.db",
             SYNCSIM_BINARY);
    bar_fits(f, 80, cmd, "imported k.json.gz as run 1: ");
    bar_fits(f, 40, cmd, "imported k.json.gz as run 1: ");
    snprintf(cmd, sizeof cmd, "rm -f i.db; SYNCSIM_PROGRESS_MS=1 %s import n.sqlite -o i.db",
             SYNCSIM_BINARY);
    bar_fits(f, 80, cmd, "imported n.sqlite as run 1: ");
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
        cmocka_unit_test(test_cli_progress_capture_lines),
        cmocka_unit_test(test_cli_progress_capture_bar),
        cmocka_unit_test(test_cli_progress_bad_settings),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
