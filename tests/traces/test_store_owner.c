/* test_store_owner.c -- a run being written cannot be deleted or reused
 * (issue 34): a producer process records a run and waits; `syncsim runs
 * --delete` (with and without --force) is refused while it lives and the
 * database stays readable; once it is killed (-9) the run is "died", is
 * deleted with --force only, leaves no row in any table, and its id is not
 * given again; a run deleted under a live producer (by hand, as a syncsim
 * without run locks did) gets no rows written after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "traces/trace.h"

/* A producer: a child process that records into db, flushes, says 'r' on
 * ready, then waits for a byte on go (or for its end, when go is -1) and
 * records and flushes again. Its exit status: 0, 3 when the second flush
 * failed because its run was deleted, 1 otherwise. */
typedef struct producer {
    pid_t pid;
    int ready, go;          /* the parent's ends of the two pipes */
} producer;

static void record_some(trace_recorder *rec, uint32_t q, uint32_t b, int n, int from)
{
    for (int i = 0; i < n; i++) {
        char label[32];
        snprintf(label, sizeof label, "op%d", from + i);   /* a string per statement */
        trace_access acc = { b, TRACE_W, TRACE_REF_WHOLE, 0, 64 };
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = q;
        s.kind = TRACE_OP;
        s.label = trace_recorder_intern(rec, label);
        s.access = &acc;
        s.n_access = 1;
        trace_recorder_append(rec, &s);
    }
}

static void producer_main(const char *db, int ready, int go)
{
    trace_error err = { 0 };
    trace_recorder *rec = trace_recorder_open(db, NULL, &err);
    if (!rec)
        _exit(1);
    uint32_t q = trace_recorder_queue(rec, "host", TRACE_QUEUE_HOST, NULL);
    uint32_t b = trace_recorder_buffer(rec, "X", 64, TRACE_LOC_HOST, NULL, false);
    record_some(rec, q, b, 100, 0);
    if (trace_recorder_flush(rec, &err) != 0 || write(ready, "r", 1) != 1)
        _exit(1);
    char c;
    if (read(go, &c, 1) != 1)
        _exit(1);
    record_some(rec, q, b, 100, 100);
    int rc = trace_recorder_flush(rec, &err);
    bool deleted = rc != 0 && strstr(err.msg, "was deleted while it was being written");
    trace_recorder_close(rec, &err);
    _exit(rc == 0 ? 0 : deleted ? 3 : 1);
}

static void producer_start(const fixture *f, producer *p)
{
    int r[2], g[2];
    assert_int_equal(pipe(r), 0);
    assert_int_equal(pipe(g), 0);
    fflush(NULL);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        close(r[0]);
        close(g[1]);
        producer_main(f->db, r[1], g[0]);
    }
    close(r[1]);
    close(g[0]);
    p->ready = r[0];
    p->go = g[1];
    char c = 0;
    assert_int_equal(read(p->ready, &c, 1), 1);  /* run 1 is in the file, its lock held */
    assert_int_equal(c, 'r');
}

/* Lets the producer go on; its exit status. */
static int producer_finish(producer *p)
{
    assert_int_equal(write(p->go, "g", 1), 1);
    int st = 0;
    assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
    close(p->ready);
    close(p->go);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* How many rows of run `run` the file holds, over every table: those with
 * a `run` column, and the statement tables keyed by run << 40 | seq. */
static long long rows_of_run(const char *db, int64_t run)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *tables = NULL, *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c"
                                        " WHERE m.type = 'table' AND c.name = 'run'",
                                        -1, &tables, NULL),
                     SQLITE_OK);
    long long n = 0;
    int n_tables = 0;
    while (sqlite3_step(tables) == SQLITE_ROW) {
        char *sql = sqlite3_mprintf("SELECT count(*) FROM \"%w\" WHERE run = %lld",
                                    (const char *)sqlite3_column_text(tables, 0), (long long)run);
        assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &q, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        n += sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
        sqlite3_free(sql);
        n_tables++;
    }
    sqlite3_finalize(tables);
    assert_true(n_tables >= 10);    /* strings, queues, buffers, run_meta, findings, ... */
    static const char *const by_id[] = { "statements", "stmt_blocks", "stmt_times", "runs" };
    for (size_t i = 0; i < 4; i++) {
        char sql[160];
        if (i < 3)
            snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE id >= %lld AND id < %lld",
                     by_id[i], (long long)run << 40, (long long)(run + 1) << 40);
        else
            snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %lld", (long long)run);
        assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &q, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        n += sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
    }
    sqlite3_close(h);
    return n;
}

/* Alive: refused with and without --force; the database reads; the run
 * completes untouched once the producer goes on. */
static void test_store_owner_live_run_survives_delete(void **state)
{
    fixture *f = *state;
    char out[4096];
    producer p;
    producer_start(f, &p);
    assert_true(rows_of_run(f->db, 1) >= 5);  /* run, block, strings, queue, buffer */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs t.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "recording"));
    for (int force = 0; force < 2; force++) {
        assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs t.db --delete 1%s",
                                   SYNCSIM_BINARY, force ? " --force" : ""),
                         2);
        assert_non_null(strstr(out, "run 1 is being written"));
    }
    /* still readable, still incomplete: exit 3 */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check t.db", SYNCSIM_BINARY), 3);
    assert_non_null(strstr(out, "100 statements"));
    assert_int_equal(producer_finish(&p), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check t.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "clean: 200 statements"));
}

/* Killed: "died", deleted only with --force, nothing of it is left, and the
 * next run is run 2, not run 1 again. */
static void test_store_owner_dead_run_is_deleted_whole(void **state)
{
    fixture *f = *state;
    char out[4096];
    producer p;
    producer_start(f, &p);
    assert_int_equal(kill(p.pid, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(p.pid, &st, 0), p.pid);
    close(p.ready);
    close(p.go);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs t.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "died"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs t.db --delete 1", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "its producer is gone"));
    assert_non_null(strstr(out, "--force deletes it"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs t.db --delete 1 --force",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(rows_of_run(f->db, 1), 0);
    /* the id is not reused, and what the file holds reads */
    assert_int_equal(tmpdir_write(f, "a.trace", "syncsim-trace 1\nqueue h host\nbuffer X size=64\n"
                                                "h op a w:X\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import a.trace -o t.db", SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "as run 2"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check t.db && %s export t.db --run 2",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s runs t.db --delete 2 && %s import a.trace "
                                                   "-o t.db",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "as run 3"));
}

/* A run deleted under its live producer by hand: the producer's next
 * flush fails and writes nothing, so no row outlives the run. */
static void test_store_owner_producer_stops_when_its_run_is_deleted(void **state)
{
    fixture *f = *state;
    producer p;
    producer_start(f, &p);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(f->db, &h), SQLITE_OK);
    sqlite3_busy_timeout(h, 10000);
    assert_int_equal(sqlite3_exec(h,
                                  "BEGIN IMMEDIATE; DELETE FROM runs WHERE id = 1;"
                                  " DELETE FROM strings WHERE run = 1; DELETE FROM queues WHERE run = 1;"
                                  " DELETE FROM buffers WHERE run = 1; DELETE FROM run_meta WHERE run = 1;"
                                  " DELETE FROM stmt_blocks; DELETE FROM stmt_times; COMMIT",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    assert_int_equal(rows_of_run(f->db, 1), 0);
    assert_int_equal(producer_finish(&p), 3);
    assert_int_equal(rows_of_run(f->db, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_owner_live_run_survives_delete, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_owner_dead_run_is_deleted_whole, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_owner_producer_stops_when_its_run_is_deleted,
                                        tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
