/* test_cli_replay.c -- `syncsim replay` through the command line: where the
 * re-timed run goes, which run it reads, --drop-sync on a non-sync, and a
 * what-if checked as it is made (issue 10.4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "traces/trace.h"

/* A fresh directory holding one simulated run in its database. */
static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    return tmpdir_sh(*state, NULL, 0, "%s run --tokens 4 --prompt 16 -o " TMPDIR_DB_NAME,
              SYNCSIM_BINARY) == 0 ? 0 : -1;
}

/* The statement count of each run of the database, in run order. */
static size_t run_counts(const char *db, uint64_t *counts, size_t cap)
{
    trace_error err;
    trace_store *st = trace_store_open(db, false, &err);
    assert_non_null(st);
    trace_run_info *runs;
    size_t n;
    assert_int_equal(trace_store_runs(st, &runs, &n, &err), 0);
    for (size_t i = 0; i < n && i < cap; i++)
        counts[i] = runs[i].n_stmts;
    trace_run_info_free(runs, n);
    trace_store_close(st);
    return n;
}

/* Runs stay put: without -o a replay writes nothing, so the input's latest
 * run is still the one it was (a later `calibrate DB` fits the run, not a
 * replay of it); with -o it is a new run there, of the run read. */
static void test_cli_replay_writes_only_where_told(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay " TMPDIR_DB_NAME, SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "not recorded (-o DB records the replay as a run)"));
    assert_non_null(strstr(out, "check of the replay: clean:"));
    uint64_t counts[4];
    assert_int_equal(run_counts(f->db, counts, 4), 1);
    /* nothing went to the default database either */
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test -e syncsim.db"), 1);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay " TMPDIR_DB_NAME " -o r.db",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "written as run 1 of r.db"));
    assert_int_equal(run_counts(f->db, counts, 4), 1);
    char rdb[256];
    snprintf(rdb, sizeof rdb, "%s/r.db", f->dir);
    assert_int_equal(run_counts(rdb, counts + 1, 3), 1);
    assert_int_equal(counts[1], counts[0]);     /* the replay of run 1, whole */
    /* naming the input is asking for it: a new run there, of run 1 */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay " TMPDIR_DB_NAME " -o " TMPDIR_DB_NAME,
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "written as run 2 of " TMPDIR_DB_NAME));
    assert_int_equal(run_counts(f->db, counts, 4), 2);
    assert_int_equal(counts[1], counts[0]);
}

static void test_cli_replay_refuses_dropping_a_statement_that_is_no_sync(void **state)
{
    fixture *f = *state;
    char out[4096];
    /* seq 0 of a run is the host's first op */
    assert_int_equal(
        tmpdir_sh(f, out, sizeof out, "%s replay " TMPDIR_DB_NAME " --drop-sync 0", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "name no wait, sync or await statement"));
    uint64_t counts[4];
    assert_int_equal(run_counts(f->db, counts, 4), 1);
    /* a seq that is no number is named as given (it was read after free) */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay " TMPDIR_DB_NAME " --drop-sync 3,abc",
                               SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "--drop-sync expects statement seqs, got 'abc'"));
}

/* The seq of the run's first host sync or wait. */
static uint64_t first_sync_seq(const char *db)
{
    trace_reader r;
    trace_error err;
    assert_int_equal(trace_store_open_reader(db, 1, &r, &err), 0);
    trace_stmt s;
    uint64_t seq = UINT64_MAX;
    while (seq == UINT64_MAX && trace_reader_next(&r, &s, &err) == 1)
        if (s.kind == TRACE_SYNC || s.kind == TRACE_WAIT)
            seq = s.seq;
    trace_reader_close(&r);
    assert_true(seq != UINT64_MAX);
    return seq;
}

static void test_cli_replay_records_what_the_what_if_changed(void **state)
{
    fixture *f = *state;
    uint64_t seq = first_sync_seq(f->db);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "%s replay " TMPDIR_DB_NAME " --drop-sync %llu --durations model -o " TMPDIR_DB_NAME,
                        SYNCSIM_BINARY, (unsigned long long)seq), 0);
    trace_reader r;
    trace_error err;
    assert_int_equal(trace_store_open_reader(f->db, 2, &r, &err), 0);
    char want[32];
    snprintf(want, sizeof want, "%llu", (unsigned long long)seq);
    assert_string_equal(trace_get_meta(r.trace, "dropped_syncs"), want);
    assert_string_equal(trace_get_meta(r.trace, "durations"), "model");
    assert_string_equal(trace_get_meta(r.trace, "source_run"), "1");
    trace_reader_close(&r);
}

/* The wait is all that orders the write and the read: a what-if without
 * it looks faster, and is unsafe. It says so, exits 1, and its findings are
 * stored with it, so that the report of the run it came from and the
 * timeline of the what-if show them. */
static void test_cli_replay_checks_a_what_if_as_it_is_made(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_write(f, "w.trace",
                                  "syncsim-trace 1\n"
                                  "queue h host\n"
                                  "queue s0 stream device=0\n"
                                  "queue s1 stream device=1\n"
                                  "buffer X size=4096 device=0\n"
                                  "s0 op fill w:X t=0 dur=5000\n"
                                  "s0 record e t=5000 dur=0\n"
                                  "s1 wait e t=100 dur=4900\n"
                                  "s1 op use r:X t=5000 dur=5000\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "%s import w.trace -o w.db", SYNCSIM_BINARY), 0);
    /* seq 2 is the wait */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay w.db --drop-sync 2 -o w.db",
                               SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "dropped 1 sync: "));    /* one, not "1 syncs" */
    assert_non_null(strstr(out, "check of run 2: 1 finding in 3 statements (race 1)"));
    assert_non_null(strstr(out, "unsafe: dropping those syncs lets 1 finding in"));
    /* stored: check, report and timeline read it back */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s report w.db --run 1 -o r.html && "
                                                   "grep -c '>1 finding<' r.html",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s timeline w.db --run 2 -o t.svg",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "1 race drawn"));
    /* the same replay keeping the wait is clean, and exits 0 */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay w.db --run 1 -o w.db", SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "check of run 3: clean: 4 statements, no findings"));
    assert_null(strstr(out, "unsafe"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_replay_writes_only_where_told,
                                        setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_replay_refuses_dropping_a_statement_that_is_no_sync,
                                        setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_replay_records_what_the_what_if_changed,
                                        setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_replay_checks_a_what_if_as_it_is_made,
                                        tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
