/*
 * test_cli_safety.c -- what a new user could lose or be misled by (issue
 * 10), through the command line:
 *
 *   10.1  no command writes over its own input or over a trace database;
 *   10.2  a database the reader cannot write is still read (findings "not
 *         stored"), and reading leaves no -wal/-shm files behind;
 *   10.3  a run whose recorder died is never called clean;
 *   10.5  fewer findings kept than found: every output says so;
 *   10.7  ./syncsim.db is the trace a command given none reads;
 *   and no option is silently ignored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "traces/trace.h"

/* Two races, one per buffer: a and b, c and d are not ordered. */
static const char *two_races =
    "syncsim-trace 1\n"
    "queue h0 host\n"
    "queue s0 stream device=0\n"
    "queue s1 stream device=1\n"
    "buffer X size=64\n"
    "buffer Y size=64\n"
    "s0 op a w:X\n"
    "s1 op b r:X\n"
    "s0 op c w:Y\n"
    "s1 op d r:Y\n";

#define SH(out, ...) tmpdir_sh(f, out, sizeof out, __VA_ARGS__)

/* The fixture with two_races imported into v.db. */
static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    char out[1024];
    if (tmpdir_write(f, "race.trace", two_races) != 0 ||
        SH(out, "%s import race.trace -o v.db", SYNCSIM_BINARY) != 0)
        return -1;
    return 0;
}

/* v.db is still the database import made: one run, two findings. */
static void assert_database_intact(const fixture *f, const char *db)
{
    char out[4096];
    int rc = SH(out, "%s check %s", SYNCSIM_BINARY, db);
    if (rc != 1 || !strstr(out, "2 findings in 4 statements"))
        fail_msg("%s is no longer the database (check: exit %d):\n%s", db, rc, out);
}

static void refused(const fixture *f, const char *cmd, const char *want)
{
    char out[4096];
    int rc = SH(out, "%s %s", SYNCSIM_BINARY, cmd);
    if (rc != 2 || !strstr(out, want))
        fail_msg("syncsim %s: exit %d, wanted 2 and \"%s\":\n%s", cmd, rc, want, out);
}

static void test_cli_no_command_writes_over_its_input(void **state)
{
    fixture *f = *state;
    refused(f, "export v.db -o v.db", "v.db: is the input; refusing to write over it");
    refused(f, "export v.db --format chrome -o v.db", "is the input; refusing");
    refused(f, "minimize v.db --allow-findings -o v.db", "is the input; refusing");
    refused(f, "report v.db -o v.db", "is the input; refusing");
    refused(f, "import race.trace -o race.trace", "is the input");
    /* a picture's name may be a database's: still refused */
    char out[1024];
    assert_int_equal(SH(out, "cp v.db pic.svg"), 0);
    refused(f, "timeline pic.svg -o pic.svg", "is the input; refusing");
    /* nor any other trace database it was not asked to append to */
    assert_int_equal(SH(out, "cp v.db other.db"), 0);
    refused(f, "export v.db -o other.db", "other.db: is a trace database; refusing to replace it");
    refused(f, "report v.db -o other.db", "is a trace database; refusing");
    refused(f, "minimize v.db --allow-findings -o other.db", "is a trace database; refusing");
    /* what is written is written as the umask says, like any file */
    assert_int_equal(SH(out, "umask 022 && %s report v.db -o r.html >/dev/null && "
                             "%s export v.db -o x.trace && stat -c %%a r.html x.trace",
                        SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "644\n644\n");
    assert_database_intact(f, "v.db");
    assert_database_intact(f, "other.db");
    assert_database_intact(f, "pic.svg");
    /* and nothing half-written was left beside them */
    assert_int_equal(SH(out, "! ls | grep tmp"), 0);
}

static void test_cli_graph_will_not_replace_a_run(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(SH(out, "%s run --tokens 1 --prompt 4 -o g.db", SYNCSIM_BINARY), 0);
    assert_int_equal(SH(out, "cp g.db g.svg"), 0);
    refused(f, "graph g.svg -o g.svg", "is the input; refusing");
    refused(f, "graph g.db -o g.svg", "is a trace database; refusing");
    assert_int_equal(SH(out, "rm g.svg"), 0);
    assert_int_equal(SH(out, "%s graph g.db -o g.svg", SYNCSIM_BINARY), 0);
    assert_int_equal(SH(out, "%s info g.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "trace database, 1 run"));
}

/* A prefix that runs a command as a user who cannot write the fixture:
 * nobody when we are root, else ourselves. NULL when root cannot drop. */
static const char *as_other_user(void)
{
    if (geteuid() != 0)
        return "";
    if (access("/usr/bin/setpriv", X_OK) == 0)
        return "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups -- ";
    return NULL;
}

static void test_cli_reads_a_database_it_cannot_write(void **state)
{
    fixture *f = *state;
    const char *as = as_other_user();
    if (!as) {
        fprintf(stderr, "skipped: running as root without /usr/bin/setpriv to drop to an "
                        "unprivileged user\n");
        skip();
    }
    char out[4096];
    assert_int_equal(SH(out, "mkdir ro out && mv v.db ro/ && chmod 0444 ro/v.db && chmod 0555 ro "
                             "&& chmod 0777 out && chmod 0755 ."),
                     0);
    int rc = SH(out, "%s%s info ro/v.db", as, SYNCSIM_BINARY);
    if (rc != 0 || !strstr(out, "ro/v.db: trace database, 1 run"))
        fail_msg("info: exit %d\n%s", rc, out);
    rc = SH(out, "%s%s check ro/v.db", as, SYNCSIM_BINARY);
    if (rc != 1 || !strstr(out, "2 findings in 4 statements") || !strstr(out, "not stored"))
        fail_msg("check: exit %d\n%s", rc, out);
    rc = SH(out, "%s%s export ro/v.db", as, SYNCSIM_BINARY);
    if (rc != 0 || !strstr(out, "syncsim-trace 1"))
        fail_msg("export: exit %d\n%s", rc, out);
    rc = SH(out, "%s%s timeline ro/v.db -o out/t.svg", as, SYNCSIM_BINARY);
    if (rc != 0 || !strstr(out, "2 races drawn"))
        fail_msg("timeline: exit %d\n%s", rc, out);
    rc = SH(out, "%s%s report ro/v.db -o out/r.html", as, SYNCSIM_BINARY);
    if (rc != 0)
        fail_msg("report: exit %d\n%s", rc, out);
    /* the readers left nothing beside the database */
    assert_int_equal(SH(out, "ls ro"), 0);
    assert_string_equal(out, "v.db\n");
    assert_int_equal(SH(out, "chmod 0755 ro"), 0);     /* so that teardown may remove it */
}

static void test_cli_reading_leaves_no_side_files(void **state)
{
    fixture *f = *state;
    char out[4096];
    /* as root too: a reader never creates -wal or -shm files */
    assert_int_equal(SH(out, "%s info v.db && %s export v.db -o x.trace && %s timeline v.db "
                             "-o t.svg --no-races",
                        SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(SH(out, "ls v.db*"), 0);
    assert_string_equal(out, "v.db\n");
}

static void test_cli_incomplete_run_is_never_clean(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/k.db", f->dir);
    /* a recorder that flushes three statements, then dies */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        trace_error err;
        trace_recorder *rec = trace_recorder_open(path, NULL, &err);
        if (!rec)
            _exit(1);
        uint32_t h = trace_recorder_queue(rec, "h", TRACE_QUEUE_HOST, NULL);
        uint32_t x = trace_recorder_buffer(rec, "X", 64, TRACE_LOC_HOST, NULL, false);
        for (int i = 0; i < 3; i++) {
            trace_access a = { .buffer = x, .mode = TRACE_RW, .form = TRACE_REF_WHOLE, .hi = 64 };
            trace_stmt s;
            trace_stmt_init(&s);
            s.queue = h;
            s.kind = TRACE_OP;
            s.n_access = 1;
            s.access = &a;
            trace_recorder_append(rec, &s);
        }
        _exit(trace_recorder_flush(rec, &err) == 0 ? 0 : 1);      /* never closed */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char out[8192];
    assert_int_equal(SH(out, "%s info k.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "recording"));
    assert_int_equal(SH(out, "%s check k.db", SYNCSIM_BINARY), 3);
    assert_null(strstr(out, "clean:"));
    assert_non_null(strstr(out, "incomplete: 3 statements checked, no findings among them"));
    assert_int_equal(SH(out, "%s check k.db --json", SYNCSIM_BINARY), 3);
    assert_non_null(strstr(out, "\"status\": \"incomplete\", \"exit\": 3, \"complete\": false"));
    assert_int_equal(SH(out, "%s report k.db -o r.html && grep -c 'class=\"incomplete\">incomplete:' "
                             "r.html && ! grep -q 'class=\"clean\"' r.html",
                        SYNCSIM_BINARY),
                     0);
    /* exported (text and Chrome JSON) and read back, it stays incomplete:
     * directly, and imported into another database */
    assert_int_equal(SH(out, "%s export k.db -o k.trace && grep -c '^meta status=incomplete$' "
                             "k.trace",
                        SYNCSIM_BINARY),
                     0);
    assert_int_equal(SH(out, "%s check k.trace", SYNCSIM_BINARY), 3);
    assert_non_null(strstr(out, "incomplete: 3 statements checked"));
    assert_int_equal(SH(out, "%s import k.trace -o back.db && %s check back.db", SYNCSIM_BINARY,
                        SYNCSIM_BINARY),
                     3);
    assert_int_equal(SH(out, "%s info back.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "incomplete"));
    assert_int_equal(SH(out, "%s export k.db --format chrome -o k.json && %s check k.json",
                        SYNCSIM_BINARY, SYNCSIM_BINARY),
                     3);
    assert_int_equal(SH(out, "%s import k.json -o back2.db && %s check back2.db", SYNCSIM_BINARY,
                        SYNCSIM_BINARY),
                     3);
}

static void test_cli_fewer_findings_kept_than_found_say_so(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(SH(out, "%s check v.db --max-findings 1", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "2 findings in 4 statements; 1 of 2 shown (--max-findings)"));
    /* what the check stored is read back as what it is */
    assert_int_equal(SH(out, "%s timeline v.db -o t.svg", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "1 race drawn"));
    assert_non_null(strstr(out, "1 of 2 shown (--max-findings)"));
    assert_int_equal(SH(out, "grep -c '1 of 2 shown' t.svg"), 0);
    assert_int_equal(SH(out, "%s report v.db -o r.html && grep -c '1 of 2 shown' r.html",
                        SYNCSIM_BINARY),
                     0);
    assert_int_equal(SH(out, "%s check v.db --max-findings 1 --json", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "\"dropped\": 1"));
}

static void test_cli_default_database_is_read(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(SH(out, "%s check", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "missing trace, and there is no ./syncsim.db"));
    assert_int_equal(SH(out, "mv v.db syncsim.db"), 0);
    assert_int_equal(SH(out, "%s check", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "2 findings in 4 statements"));
    assert_int_equal(SH(out, "%s info", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "syncsim.db: trace database, 1 run"));
    assert_int_equal(SH(out, "%s export", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "syncsim-trace 1"));
    assert_int_equal(SH(out, "%s timeline -o t.svg", SYNCSIM_BINARY), 0);
}

/* An option a command cannot honour is refused, never ignored. */
static void test_cli_no_option_is_ignored(void **state)
{
    fixture *f = *state;
    char out[8192];
    refused(f, "check race.trace --run 2", "--run picks a run of a syncsim database");
    refused(f, "report v.db -o r.txt", "r.txt: the page is HTML; its name must end in .html");
    assert_int_equal(SH(out, "test ! -e r.txt"), 0); /* nothing written */
    /* --quiet: the summary line, nothing else */
    assert_int_equal(SH(out, "%s run --tokens 1 --prompt 4 -o m.db", SYNCSIM_BINARY), 0);
    assert_int_equal(SH(out, "%s minimize m.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "sync pattern"));
    assert_int_equal(SH(out, "%s minimize -q m.db", SYNCSIM_BINARY), 0);
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
    assert_null(strstr(out, "sync pattern"));
    /* the note that findings limit what minimize proves is no summary: stderr */
    assert_int_equal(SH(out, "(%s minimize -q v.db --allow-findings 2>/dev/null)", SYNCSIM_BINARY), 0);
    assert_null(strstr(out, "note:"));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, tmpdir_teardown)
    const struct CMUnitTest tests[] = {
        T(test_cli_no_command_writes_over_its_input),
        T(test_cli_graph_will_not_replace_a_run),
        T(test_cli_reads_a_database_it_cannot_write),
        T(test_cli_reading_leaves_no_side_files),
        T(test_cli_incomplete_run_is_never_clean),
        T(test_cli_fewer_findings_kept_than_found_say_so),
        T(test_cli_default_database_is_read),
        T(test_cli_no_option_is_ignored),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
