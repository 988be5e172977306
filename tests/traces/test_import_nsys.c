/*
 * test_import_nsys.c -- Nsight Systems exports: the public 2024 capture
 * imports with the counts SOURCES.md gives; a synthetic export in the 2022
 * schema (2.9: duplicated runtime rows, empty name columns, no ENUM tables)
 * with two processes, two devices, an event record and wait, the legacy
 * default stream and NVTX ranges maps as docs/importers.md says; exports
 * that are not captures of CUDA work are refused in one line; text in a
 * number column, an unknown copy kind and a row without a start are counted
 * in the import ledger.
 */
#include "../tmpdir.h"
#include "import_test_util.h"

#include <sqlite3.h>

#define GTID(pid, tid) ((1LL << 56) | ((long long)(pid) << 24) | (tid))
#define GPID(pid) ((1LL << 56) | ((long long)(pid) << 24))

static void exec_sql(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

static const char schema_29[] =
    "CREATE TABLE EXPORT_META_DATA(name TEXT, value TEXT);"
    "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,"
    " nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER, name TEXT);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,"
    " correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,"
    " shortName INTEGER NOT NULL);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,"
    " correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,"
    " copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,"
    " srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,"
    " migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER, name TEXT);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION(start INTEGER NOT NULL,"
    " end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,"
    " streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,"
    " syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT(deviceId INTEGER NOT NULL,"
    " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,"
    " globalPid INTEGER, eventId INTEGER NOT NULL);"
    "CREATE TABLE TARGET_INFO_CUDA_STREAM(streamId INTEGER NOT NULL, hwId INTEGER NOT NULL,"
    " vmId INTEGER NOT NULL, processId INTEGER NOT NULL, contextId INTEGER NOT NULL,"
    " priority INTEGER NOT NULL, flag INTEGER NOT NULL);"
    "CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,"
    " rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,"
    " endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);";

/* Writes the synthetic 2.9 export (see the head comment) to path. */
static void write_export_29(const char *path, const char *version)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, schema_29);
    char sql[8192];
    snprintf(sql, sizeof sql,
             "INSERT INTO EXPORT_META_DATA VALUES('EXPORT_SCHEMA_VERSION', '%s');"
             "INSERT INTO StringIds VALUES(1, 'cudaMalloc'), (2, 'cudaMalloc_v3020'),"
             " (3, 'cudaLaunchKernel'), (4, 'cudaLaunchKernel_v7000'), (5, 'cudaEventRecord'),"
             " (6, 'cudaStreamWaitEvent'), (7, 'cudaMemcpy_v3020'),"
             " (8, 'cudaDeviceSynchronize_v3020'), (9, 'cudaStreamSynchronize_v3020'),"
             " (10, 'producer'), (11, 'consumer'), (12, 'tail'), (13, 'other'), (14, 'step');"
             /* process 10: every runtime row once outer (67) and once nested (0) */
             "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES"
             " (100, 200, 67, %lld, 1, 1, 0, NULL, NULL), (110, 190, 0, %lld, 1, 2, 0, NULL, NULL),"
             " (300, 340, 67, %lld, 2, 3, 0, NULL, NULL), (305, 335, 0, %lld, 2, 4, 0, NULL, NULL),"
             " (400, 410, 0, %lld, 3, 5, 0, NULL, NULL),"
             " (500, 510, 0, %lld, 4, 6, 0, NULL, NULL),"
             " (600, 640, 0, %lld, 5, 4, 0, NULL, NULL),"
             " (700, 740, 0, %lld, 6, 4, 0, NULL, NULL),"
             " (800, 1900, 0, %lld, 7, 7, 0, NULL, NULL),"
             " (2000, 2500, 0, %lld, 8, 8, 0, NULL, NULL),"
             /* process 20 reuses correlation ids */
             " (300, 330, 0, %lld, 2, 4, 0, NULL, NULL),"
             " (400, 900, 0, %lld, 3, 9, 0, NULL, NULL);"
             "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES"
             " (350, 450, 0, 1, 13, 2, %lld, 10, 10),"
             " (650, 700, 0, 1, 14, 5, %lld, 11, 11),"
             " (750, 780, 0, 1, 7, 6, %lld, 12, 12),"
             " (340, 800, 1, 1, 7, 2, %lld, 13, 13);"
             "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES"
             " (1000, 1800, 0, 1, 7, 7, %lld, 4096, 2, NULL, 2, 0, 0, 1, 0, 1, NULL, NULL, NULL,"
             "  NULL);"
             "INSERT INTO CUPTI_ACTIVITY_KIND_CUDA_EVENT VALUES (0, 1, 13, 3, %lld, 42);"
             "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES"
             " (505, 506, 0, 1, 14, 4, %lld, 2, 42),"
             /* CUPTI's quirk: a device sync reported as an event sync */
             " (2010, 2490, 0, 1, 4294967295, 8, %lld, 1, 4294967295),"
             " (410, 890, 1, 1, 7, 3, %lld, 3, 4294967295);"
             "INSERT INTO TARGET_INFO_CUDA_STREAM VALUES (13, 0, 1, 10, 1, 0, 1),"
             " (14, 0, 1, 10, 1, 0, 2), (7, 0, 1, 10, 1, 0, 3);"
             "INSERT INTO NVTX_EVENTS VALUES (250, 520, 59, NULL, NULL, NULL, NULL, %lld, NULL,"
             " 14, 0), (550, 2600, 59, NULL, NULL, NULL, NULL, %lld, NULL, 14, 0);",
             version, GTID(10, 11), GTID(10, 11), GTID(10, 11), GTID(10, 11), GTID(10, 11),
             GTID(10, 11), GTID(10, 11), GTID(10, 11), GTID(10, 11), GTID(10, 11),
             GTID(20, 21), GTID(20, 21), GPID(10), GPID(10), GPID(10), GPID(20), GPID(10),
             GPID(10), GPID(10), GPID(10), GPID(20), GTID(10, 11), GTID(10, 11));
    exec_sql(db, sql);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static trace *load_29(const fixture *f)
{
    char path[256];
    snprintf(path, sizeof path, "%s/export29.sqlite", f->dir);
    write_export_29(path, "2.9.1");
    return load_capture(path, NULL);
}

static const char *qname(const trace *t, uint32_t q)
{
    return trace_str(t, t->queues[q].name);
}

static void test_import_nsys_cloverleaf_counts(void **state)
{
    (void)state;
    trace *t = load_capture(SHARED_CAPTURE("pipit-cloverleaf-nsys.sqlite"), NULL);
    assert_meta(t, "capture.format", "nsys");
    assert_meta(t, "capture.schema", "3.13.2");
    assert_meta(t, "capture.kernels", "1312");
    assert_meta(t, "capture.memcpy", "279");
    assert_meta(t, "capture.memset", "0");
    assert_meta(t, "capture.sync_rows", "1312");
    assert_meta(t, "capture.api_calls", "3048");
    assert_meta(t, "accesses", "none");
    assert_int_equal(count_queues(t, TRACE_QUEUE_HOST), 1);
    assert_int_equal(count_queues(t, TRACE_QUEUE_STREAM), 1);
    assert_int_equal(count_kind(t, TRACE_COPY), 279);
    /* 1312 cudaDeviceSynchronize (their rows say "event sync"), 279 blocking
     * cudaMemcpy, 68 cudaFree */
    assert_int_equal(count_kind(t, TRACE_SYNC), 1312 + 279 + 68);
    uint64_t device_syncs = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        device_syncs += s.kind == TRACE_SYNC && s.sync_scope == TRACE_SYNC_DEVICE &&
                        !stmt_attr(t, &s, "implicit");
    }
    assert_int_equal(device_syncs, 1312);
    trace_free(t);
}

static void test_import_nsys_2022_schema_keeps_one_row_per_call(void **state)
{
    trace *t = load_29(*state);
    assert_meta(t, "capture.schema", "2.9.1");
    /* 12 runtime rows, 2 of them the nested copies of an outer row */
    assert_meta(t, "capture.api_calls", "10");
    assert_meta(t, "capture.kernels", "4");
    trace_free(t);
}

static void test_import_nsys_processes_and_devices_get_their_queues(void **state)
{
    trace *t = load_29(*state);
    assert_int_equal(count_queues(t, TRACE_QUEUE_HOST), 2);
    const char *streams[] = { "p10.gpu0.s13", "p10.gpu0.s14", "p10.gpu0.s7", "p20.gpu1.s7" };
    for (size_t i = 0; i < 4; i++)
        assert_int_not_equal(trace_find_queue(t, streams[i], strlen(streams[i])), TRACE_NONE);
    /* correlation 2 in process 20 is its own launch */
    trace_stmt k = find_label(t, "other");
    assert_string_equal(qname(t, k.queue), "p20.gpu1.s7");
    assert_string_equal(qname(t, k.by), "host.20.21");
    assert_int_equal(k.t, 340);
    assert_int_equal(k.dur, 460);
    trace_free(t);
}

static void test_import_nsys_event_wait_binds_to_its_record(void **state)
{
    trace *t = load_29(*state);
    int64_t rec = -1, wait = -1, consumer = -1;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.kind == TRACE_RECORD && !stmt_attr(t, &s, "implicit")) {
            assert_string_equal(qname(t, s.queue), "p10.gpu0.s13");
            assert_string_equal(trace_str(t, s.object), "p10.ev42");
            rec = (int64_t)i;
        } else if (s.kind == TRACE_WAIT && !stmt_attr(t, &s, "implicit")) {
            assert_string_equal(qname(t, s.queue), "p10.gpu0.s14");
            assert_string_equal(trace_str(t, s.object), "p10.ev42");
            wait = (int64_t)i;
        } else if (s.label != TRACE_NONE && strcmp(trace_str(t, s.label), "consumer") == 0) {
            consumer = (int64_t)i;
        }
    }
    assert_true(rec >= 0 && rec < wait && wait < consumer);
    trace_free(t);
}

static void test_import_nsys_legacy_stream_waits_for_blocking_streams(void **state)
{
    trace *t = load_29(*state);
    /* before "tail" on the legacy stream: a record on blocking stream 13 and
     * a wait for it on stream 7; non-blocking stream 14 is not joined */
    trace_stmt tail = find_label(t, "tail"), r, w;
    trace_stmt_at(t, tail.seq - 2, &r);
    trace_stmt_at(t, tail.seq - 1, &w);
    assert_int_equal(r.kind, TRACE_RECORD);
    assert_string_equal(qname(t, r.queue), "p10.gpu0.s13");
    assert_int_equal(w.kind, TRACE_WAIT);
    assert_string_equal(qname(t, w.queue), "p10.gpu0.s7");
    assert_int_equal(r.object, w.object);
    assert_string_equal(stmt_attr(t, &w, "implicit"), "legacy-stream");
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (stmt_attr(t, &s, "implicit") && s.kind == TRACE_RECORD)
            assert_string_not_equal(qname(t, s.queue), "p10.gpu0.s14");
    }
    trace_free(t);
}

static void test_import_nsys_blocking_copy_and_sync_quirk(void **state)
{
    trace *t = load_29(*state);
    trace_stmt c, s, d;
    uint64_t i = 0;
    for (; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &c);
        if (c.kind == TRACE_COPY)
            break;
    }
    assert_true(i < t->n_stmts);
    assert_string_equal(trace_str(t, c.label), "Memcpy DtoH");
    assert_string_equal(stmt_attr(t, &c, "bytes"), "4096");
    trace_stmt_at(t, i + 1, &s);
    assert_int_equal(s.kind, TRACE_SYNC);
    assert_int_equal(s.sync_scope, TRACE_SYNC_QUEUE);
    assert_int_equal(s.object, c.queue);
    /* the cudaDeviceSynchronize whose row says syncType 1 */
    trace_stmt_at(t, t->n_stmts - 1, &d);
    assert_int_equal(d.kind, TRACE_SYNC);
    assert_int_equal(d.sync_scope, TRACE_SYNC_DEVICE);
    assert_string_equal(trace_str(t, d.object), "p10.gpu0");
    /* process 20's cudaStreamSynchronize row names its stream */
    bool stream_sync = false;
    for (uint64_t k = 0; k < t->n_stmts; k++) {
        trace_stmt_at(t, k, &s);
        stream_sync |= s.kind == TRACE_SYNC && s.sync_scope == TRACE_SYNC_QUEUE &&
                       strcmp(qname(t, s.object), "p20.gpu1.s7") == 0;
    }
    assert_true(stream_sync);
    trace_free(t);
}

static void test_import_nsys_nvtx_ranges_mark_iterations(void **state)
{
    trace *t = load_29(*state);
    trace_stmt producer = find_label(t, "producer"), tail = find_label(t, "tail");
    assert_string_equal(stmt_attr(t, &producer, "iter"), "step#1");
    assert_string_equal(stmt_attr(t, &tail, "iter"), "step#2");
    trace_free(t);
}

static void test_import_nsys_missing_tables_are_one_line(void **state)
{
    fixture *f = *state;
    char path[256], out[4096];
    snprintf(path, sizeof path, "%s/partial.sqlite", f->dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
                 "INSERT INTO META_DATA_EXPORT VALUES('EXPORT_SCHEMA_VERSION', '3.13.2');"
                 "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);");
    sqlite3_close(db);
    trace_error err = open_error(path, NULL);
    assert_non_null(strstr(err.msg, "partial.sqlite: an Nsight Systems export without table "
                                    "CUPTI_ACTIVITY_KIND_RUNTIME"));
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import partial.sqlite -o k.db",
                               SYNCSIM_BINARY), 2);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "test ! -e k.db"), 0);
}

static void test_import_nsys_unknown_schema_version_is_refused(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/v9.sqlite", f->dir);
    write_export_29(path, "9.0.0");
    trace_error err = open_error(path, NULL);
    assert_int_equal(err.status, TRACE_EVERSION);
    assert_non_null(strstr(err.msg, "schema 9.0.0"));
}

static void test_import_nsys_other_sqlite_is_not_claimed(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/other.sqlite", f->dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
    sqlite3_close(db);
    trace_error err = open_error(path, NULL);
    assert_non_null(strstr(err.msg, "a SQLite database, but not one syncsim reads"));
}

/* The export, with one cell changed by sql: what the ledger then says. */
static trace *load_29_changed(const fixture *f, const char *sql, char *path, size_t cap)
{
    snprintf(path, cap, "%s/changed.sqlite", f->dir);
    write_export_29(path, "2.9.1");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, sql);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    return load_capture(path, NULL);
}

/* Text in a number column is no number: SQLite would read 'banana' as 0, so
 * the kernel would start at t=0. It is counted and left out. */
static void test_import_nsys_text_in_a_number_column_is_counted(void **state)
{
    fixture *f = *state;
    char path[256], out[4096];
    trace *t = load_29_changed(f, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'banana' "
                                  "WHERE correlationId = 5", path, sizeof path);
    assert_meta(t, "dropped.bad-number", "1");
    assert_int_equal(trace_ledger(t, NULL, NULL), 1);
    assert_meta(t, "capture.kernels", "3");
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        assert_true(s.t != 0);
        assert_true(s.label == TRACE_NONE || strcmp(trace_str(t, s.label), "consumer") != 0);
    }
    trace_free(t);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s info --json changed.sqlite",
                               SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "\"dropped\": {\"bad-number\": 1}"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import --strict changed.sqlite -o s.db",
                               SYNCSIM_BINARY), 2);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test ! -e s.db"), 0);
}

/* A copy whose direction CUPTI's enum does not hold: guessed, so counted. */
static void test_import_nsys_unknown_copy_kind_is_counted(void **state)
{
    fixture *f = *state;
    char path[256], out[4096];
    trace *t = load_29_changed(f, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 99", path,
                               sizeof path);
    assert_meta(t, "dropped.unknown-kind", "1");
    assert_int_equal(count_kind(t, TRACE_COPY), 1);
    trace_free(t);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import --strict changed.sqlite -o s.db",
                               SYNCSIM_BINARY), 2);
}

/* A row without a start: no time to place it at. */
static void test_import_nsys_row_without_start_is_counted(void **state)
{
    fixture *f = *state;
    char path[256];
    trace *t = load_29_changed(f, "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL;"
                                  "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;"
                                  "ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL;"
                                  "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL "
                                  "WHERE correlationId = 6", path, sizeof path);
    assert_meta(t, "dropped.no-ts", "1");
    assert_meta(t, "capture.kernels", "3");
    trace_free(t);
}

/* Every row read is counted; the clean export drops nothing. */
static void test_import_nsys_clean_export_drops_nothing(void **state)
{
    trace *t = load_29(*state);
    assert_int_equal(trace_ledger(t, NULL, NULL), 0);
    assert_meta(t, "import.read", trace_get_meta(t, "capture.rows"));
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_nsys_cloverleaf_counts),
#define T(name) cmocka_unit_test_setup_teardown(name, tmpdir_setup, tmpdir_teardown)
        T(test_import_nsys_2022_schema_keeps_one_row_per_call),
        T(test_import_nsys_processes_and_devices_get_their_queues),
        T(test_import_nsys_event_wait_binds_to_its_record),
        T(test_import_nsys_legacy_stream_waits_for_blocking_streams),
        T(test_import_nsys_blocking_copy_and_sync_quirk),
        T(test_import_nsys_nvtx_ranges_mark_iterations),
        T(test_import_nsys_missing_tables_are_one_line),
        T(test_import_nsys_unknown_schema_version_is_refused),
        T(test_import_nsys_other_sqlite_is_not_claimed),
        T(test_import_nsys_text_in_a_number_column_is_counted),
        T(test_import_nsys_unknown_copy_kind_is_counted),
        T(test_import_nsys_row_without_start_is_counted),
        T(test_import_nsys_clean_export_drops_nothing),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
