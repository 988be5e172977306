/* test_store.c -- the SQLite trace store: round trips, several runs, run
 * selection, foreign/newer/corrupt/truncated databases, failed imports,
 * findings, and the litmus corpus through import/export. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "traces/trace.h"

/* A trace that uses every kind, views, ranges, attributes, times, lines,
 * expectations and metadata. `salt` varies labels so traces differ. */
static trace *make_trace(int salt, int n_ops)
{
    trace *t = trace_new();
    char buf[64];
    uint32_t h = trace_add_queue(t, trace_intern_cstr(t, "host"), TRACE_QUEUE_HOST, TRACE_NONE);
    uint32_t s0 = trace_add_queue(t, trace_intern_cstr(t, "s0"), TRACE_QUEUE_STREAM,
                                  trace_intern_cstr(t, "0"));
    uint32_t s1 = trace_add_queue(t, trace_intern_cstr(t, "s1"), TRACE_QUEUE_STREAM,
                                  trace_intern_cstr(t, "1"));
    uint32_t x = trace_add_root_buffer(t, trace_intern_cstr(t, "X"), 4096, TRACE_LOC_HOST,
                                       TRACE_NONE, true);
    uint32_t arena = trace_add_root_buffer(t, trace_intern_cstr(t, "arena"), 1 << 20,
                                           TRACE_LOC_DEVICE, trace_intern_cstr(t, "0"), false);
    uint32_t a = trace_add_view(t, trace_intern_cstr(t, "A"), arena, 0, 4096);
    uint32_t b = trace_add_view(t, trace_intern_cstr(t, "B"), arena, 8192, 4096);
    uint32_t u = trace_add_root_buffer(t, trace_intern_cstr(t, "U"), 100, TRACE_LOC_UNSPECIFIED,
                                       TRACE_NONE, false);
    trace_stmt s;
    trace_access acc[3];
    trace_attr at[2];
#define STMT(Q, K) (trace_stmt_init(&s), s.queue = (Q), s.kind = (K))
    STMT(h, TRACE_ALLOC);
    s.object = u;
    trace_append(t, &s);
    for (int i = 0; i < n_ops; i++) {
        STMT(i % 2 ? s0 : s1, TRACE_OP);
        snprintf(buf, sizeof buf, "mm%d_%d", salt, i % 7);
        s.label = trace_intern_cstr(t, buf);
        acc[0] = (trace_access){ a, TRACE_R, TRACE_REF_WHOLE, 0, 4096 };
        acc[1] = (trace_access){ b, TRACE_W, TRACE_REF_RANGE, (uint64_t)i % 100, 4000 };
        acc[2] = (trace_access){ arena, TRACE_RW, TRACE_REF_FROM, 1 << 19, 1 << 20 };
        s.access = acc;
        s.n_access = 1 + (uint32_t)(i % 3);
        at[0] = (trace_attr){ trace_intern_cstr(t, "split"), trace_intern_cstr(t, "3") };
        s.attr = at;
        s.n_attr = (uint32_t)(i % 2);
        s.by = i % 5 == 0 ? h : TRACE_NONE;
        s.t = i % 4 ? (int64_t)i * 1000 : TRACE_TIME_NONE;
        s.dur = i % 4 ? 500 : TRACE_TIME_NONE;
        s.line = (uint32_t)(10 + i);
        trace_append(t, &s);
    }
    STMT(h, TRACE_COPY);
    s.label = trace_intern_cstr(t, "upload");
    acc[0] = (trace_access){ x, TRACE_R, TRACE_REF_WHOLE, 0, 4096 };
    acc[1] = (trace_access){ a, TRACE_W, TRACE_REF_WHOLE, 0, 4096 };
    s.access = acc;
    s.n_access = 2;
    trace_append(t, &s);
    STMT(s0, TRACE_RECORD);
    s.object = trace_intern_cstr(t, "e0");
    trace_append(t, &s);
    STMT(s1, TRACE_WAIT);
    s.object = trace_intern_cstr(t, "e0");
    trace_append(t, &s);
    STMT(h, TRACE_SYNC);
    s.sync_scope = TRACE_SYNC_QUEUE;
    s.object = s1;
    trace_append(t, &s);
    STMT(h, TRACE_SYNC);
    s.sync_scope = TRACE_SYNC_DEVICE;
    s.object = trace_intern_cstr(t, "0");
    trace_append(t, &s);
    STMT(h, TRACE_SYNC);
    s.sync_scope = TRACE_SYNC_ALL;
    trace_append(t, &s);
    STMT(s0, TRACE_BARRIER);
    s.object = trace_intern_cstr(t, "bar");
    s.count = 2;
    trace_append(t, &s);
    STMT(s0, TRACE_SIGNAL);
    s.object = trace_intern_cstr(t, "f0");
    trace_append(t, &s);
    STMT(s1, TRACE_AWAIT);
    s.object = trace_intern_cstr(t, "f0");
    trace_append(t, &s);
    STMT(s1, TRACE_COLLECTIVE);
    s.object = trace_intern_cstr(t, "world");
    s.coll_kind = trace_intern_cstr(t, "allreduce");
    s.count = 4096;
    acc[0] = (trace_access){ b, TRACE_RW, TRACE_REF_WHOLE, 0, 4096 };
    s.access = acc;
    s.n_access = 1;
    trace_append(t, &s);
    STMT(h, TRACE_FREE);
    s.object = u;
    trace_append(t, &s);
#undef STMT
    at[0] = (trace_attr){ trace_intern_cstr(t, "type"), trace_intern_cstr(t, "RAW") };
    at[1] = (trace_attr){ trace_intern_cstr(t, "first"), trace_intern_cstr(t, "mm0_1") };
    trace_add_expect(t, TRACE_FINDING_RACE, 99, at, 2);
    trace_add_expect(t, TRACE_FINDING_CLEAN, 100, NULL, 0);
    trace_set_meta(t, "policy", "relaxed");
    trace_set_meta(t, "producer", salt ? "salted" : "plain");
    return t;
}

static int64_t import_memory(const char *db, trace *t, const char *name, trace_error *err)
{
    trace_reader r;
    trace_reader_memory(&r, t);
    int64_t run = trace_store_import(db, &r, name, NULL, err);
    trace_reader_close(&r);
    return run;
}

/* Asserts that reader r yields exactly t: declarations, statements, expectations, meta. */
static void assert_same_trace(trace *t, trace_reader *r)
{
    trace *u = r->trace;
    assert_int_equal(u->n_queues, t->n_queues);
    for (uint32_t q = 0; q < t->n_queues; q++) {
        assert_string_equal(trace_str(u, u->queues[q].name), trace_str(t, t->queues[q].name));
        assert_int_equal(u->queues[q].kind, t->queues[q].kind);
        assert_string_equal(trace_str(u, u->queues[q].device), trace_str(t, t->queues[q].device));
    }
    assert_int_equal(u->n_buffers, t->n_buffers);
    for (uint32_t i = 0; i < t->n_buffers; i++) {
        const trace_buffer *x = &t->buffers[i], *y = &u->buffers[i];
        assert_string_equal(trace_str(u, y->name), trace_str(t, x->name));
        assert_int_equal(y->size, x->size);
        assert_int_equal(y->parent, x->parent);
        assert_int_equal(y->offset, x->offset);
        assert_int_equal(y->loc, x->loc);
        assert_string_equal(trace_str(u, y->device), trace_str(t, x->device));
        assert_int_equal(y->pinned, x->pinned);
        assert_int_equal(y->root_offset, x->root_offset);
    }
    trace_stmt a, b;
    trace_error err = { 0 };
    uint64_t n = 0;
    int rc;
    while ((rc = trace_reader_next(r, &b, &err)) == 1) {
        assert_true(n < t->n_stmts);
        trace_stmt_at(t, n, &a);
        assert_int_equal(b.seq, n);
        assert_int_equal(b.line, a.line);
        assert_true(trace_stmt_equal(t, &a, u, &b));
        n++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(n, t->n_stmts);
    assert_int_equal(u->n_expects, t->n_expects);
    for (uint32_t i = 0; i < t->n_expects; i++) {
        assert_int_equal(u->expects[i].kind, t->expects[i].kind);
        assert_int_equal(u->expects[i].line, t->expects[i].line);
        assert_int_equal(u->expects[i].n_kv, t->expects[i].n_kv);
        for (uint32_t k = 0; k < t->expects[i].n_kv; k++) {
            assert_string_equal(trace_str(u, u->expects[i].kv[k].key),
                                trace_str(t, t->expects[i].kv[k].key));
            assert_string_equal(trace_str(u, u->expects[i].kv[k].value),
                                trace_str(t, t->expects[i].kv[k].value));
        }
    }
    assert_int_equal(u->n_meta, t->n_meta);
    for (uint32_t i = 0; i < t->n_meta; i++)
        assert_string_equal(trace_get_meta(u, trace_str(t, t->meta[i].key)),
                            trace_str(t, t->meta[i].value));
}

static void test_store_round_trip_memory(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 300);
    int64_t run = import_memory(f->db, t, "mem", &err);
    assert_int_equal(run, 1);
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 0, &r, &err), 0);
    assert_same_trace(t, &r);
    trace_reader_close(&r);
    trace_free(t);
}

/* Value semaphores keep their values (0 included) and flags stay flags,
 * also a flag's signal that carries set= as metadata. */
static void test_store_value_semaphores_round_trip(void **state)
{
    fixture *f = *state;
    static const char text[] = "syncsim-trace 1\n"
                               "queue h host\n"
                               "queue s stream device=0\n"
                               "semaphore S\n"
                               "s signal S set=0\n"
                               "s signal S set=7\n"
                               "h await S >=0\n"
                               "h await S >=7\n"
                               "h signal f set=7\n"
                               "s await f\n";
    trace *t = NULL;
    trace_error err = { 0 };
    assert_int_equal(trace_text_parse_string("sem.trace", text, strlen(text), &t, &err), 0);
    int64_t run = import_memory(f->db, t, "sem", &err);
    assert_true(run > 0);
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, run, &r, &err), 0);
    assert_same_trace(t, &r);
    trace_reader_close(&r);
    assert_int_equal(trace_store_open_reader(f->db, run, &r, &err), 0);
    trace_stmt x;
    bool sem[6] = { true, true, true, true, false, false };
    uint64_t count[6] = { 0, 7, 0, 7, 0, 0 };
    for (int i = 0; i < 6; i++) {
        assert_int_equal(trace_reader_next(&r, &x, &err), 1);
        assert_int_equal(x.sem, sem[i]);
        assert_int_equal(x.count, count[i]);
    }
    trace_reader_close(&r);
    trace_free(t);
}

static void test_store_several_runs_and_selection(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t1 = make_trace(1, 50), *t2 = make_trace(2, 70);
    assert_int_equal(import_memory(f->db, t1, "one", &err), 1);
    assert_int_equal(import_memory(f->db, t2, "two", &err), 2);
    trace_store *st = trace_store_open(f->db, false, &err);
    assert_non_null(st);
    trace_run_info *runs;
    size_t n;
    assert_int_equal(trace_store_runs(st, &runs, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(runs[0].name, "one");
    assert_string_equal(runs[1].name, "two");
    assert_string_equal(runs[1].status, "complete");
    assert_string_equal(runs[1].source, "import");
    assert_int_equal(runs[0].n_stmts, t1->n_stmts);
    assert_int_equal(runs[1].n_queues, 3);
    trace_run_info_free(runs, n);
    assert_int_equal(trace_store_latest_run(st), 2);
    trace_reader r;
    assert_int_equal(trace_store_reader(st, 1, &r, &err), 0);
    assert_same_trace(t1, &r);
    trace_reader_close(&r);
    assert_int_equal(trace_store_reader(st, 0, &r, &err), 0); /* latest */
    assert_same_trace(t2, &r);
    trace_reader_close(&r);
    assert_int_equal(trace_store_reader(st, 7, &r, &err), -1);
    assert_int_equal(err.status, TRACE_ENORUN);
    assert_non_null(strstr(err.msg, f->db));
    trace_store_close(st);
    trace_free(t1);
    trace_free(t2);
}

static void test_store_new_database_is_marked(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace_store *st = trace_store_open(f->db, true, &err);
    assert_non_null(st);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(trace_store_db(st),
                                        "SELECT value FROM meta WHERE key = 'schema_version'", -1,
                                        &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "3");
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_prepare_v2(trace_store_db(st), "PRAGMA journal_mode", -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    assert_int_equal(trace_store_latest_run(st), -1);
    trace_store_close(st);
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 0, &r, &err), -1);
    assert_int_equal(err.status, TRACE_ENORUN);
}

/* Runs sql on the database with the plain sqlite3 API. */
static void raw_sql(const char *db, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

static void test_store_newer_schema_is_eversion(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 5);
    assert_int_equal(import_memory(f->db, t, NULL, &err), 1);
    trace_free(t);
    raw_sql(f->db, "UPDATE meta SET value = '4' WHERE key = 'schema_version'");
    assert_null(trace_store_open(f->db, false, &err));
    assert_int_equal(err.status, TRACE_EVERSION);
    assert_non_null(strstr(err.msg, f->db));
    assert_non_null(strstr(err.msg, "meta"));
    assert_null(strchr(err.msg, '\n'));
    trace_reader r;
    assert_int_equal(trace_open_any(f->db, 0, &r, &err), -1);
    assert_int_equal(err.status, TRACE_EVERSION);
}

static void test_store_foreign_sqlite_is_enottrace(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    raw_sql(f->db, "CREATE TABLE recipes(name TEXT); INSERT INTO recipes VALUES('soup')");
    assert_null(trace_store_open(f->db, false, &err));
    assert_int_equal(err.status, TRACE_ENOTTRACE);
    assert_non_null(strstr(err.msg, f->db));
    /* Importing into it is refused and leaves it as it was. */
    trace *t = make_trace(0, 5);
    assert_int_equal(import_memory(f->db, t, NULL, &err), -1);
    assert_int_equal(err.status, TRACE_ENOTTRACE);
    trace_free(t);
    sqlite3 *h;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(f->db, &h), SQLITE_OK);
    sqlite3_prepare_v2(h, "SELECT count(*) FROM sqlite_master", -1, &q, NULL);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);
    sqlite3_close(h);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

static void test_store_text_file_is_enottrace(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    const char text[] = "syncsim-trace 1\nqueue host host\n";
    write_file(f->db, text, sizeof text - 1);
    assert_null(trace_store_open(f->db, false, &err));
    assert_int_equal(err.status, TRACE_ENOTTRACE);
    assert_non_null(strstr(err.msg, f->db));
    assert_null(trace_store_open(f->db, true, &err)); /* never overwritten */
    assert_int_equal(err.status, TRACE_ENOTTRACE);
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 0, &r, &err), -1);
    assert_int_equal(err.status, TRACE_ENOTTRACE);
}

static void test_store_missing_file_is_eio(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    assert_null(trace_store_open(f->db, false, &err));
    assert_int_equal(err.status, TRACE_EIO);
    assert_int_equal(access(f->db, F_OK), -1); /* not created */
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

/* Opens and reads the whole latest run; returns 0 or the error status. */
static int read_all(const char *db, trace_error *err)
{
    trace_reader r;
    trace_stmt s;
    int rc;
    if (trace_store_open_reader(db, 0, &r, err) != 0)
        return err->status;
    while ((rc = trace_reader_next(&r, &s, err)) == 1) {
    }
    trace_reader_close(&r);
    return rc == 0 ? 0 : (int)err->status;
}

static void test_store_corrupt_middle_is_ecorrupt(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 20000);
    assert_int_equal(import_memory(f->db, t, NULL, &err), 1);
    trace_free(t);
    long size = file_size(f->db);
    assert_true(size > 100000);
    char orig[160], bad[160];
    snprintf(orig, sizeof orig, "%s/orig.db", f->dir);
    copy_file(f->db, orig);
    int n_corrupt = 0;
    /* Overwrite 200 bytes at several places: whatever they hit, the reader
     * reports a clean error or reads; it never crashes. */
    for (int i = 1; i < 16; i++) {
        snprintf(bad, sizeof bad, "%s/bad%d.db", f->dir, i);
        copy_file(orig, bad);
        FILE *fp = fopen(bad, "r+b");
        assert_non_null(fp);
        fseek(fp, size * i / 16, SEEK_SET);
        unsigned char junk[200];
        for (size_t k = 0; k < sizeof junk; k++)
            junk[k] = (unsigned char)(k * 37 + (size_t)i);
        fwrite(junk, 1, sizeof junk, fp);
        fclose(fp);
        int st = read_all(bad, &err);
        if (st != 0) {
            assert_int_equal(st, TRACE_ECORRUPT);
            assert_non_null(strstr(err.msg, bad));
            assert_null(strchr(err.msg, '\n'));
            n_corrupt++;
        }
    }
    assert_true(n_corrupt > 0);
}

static void test_store_truncated_is_ecorrupt(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 5000);
    assert_int_equal(import_memory(f->db, t, NULL, &err), 1);
    trace_free(t);
    long size = file_size(f->db);
    assert_int_equal(truncate(f->db, size / 2), 0);
    assert_int_equal(read_all(f->db, &err), TRACE_ECORRUPT);
    assert_non_null(strstr(err.msg, f->db));
    assert_non_null(strstr(err.msg, "truncated"));
    assert_int_equal(truncate(f->db, 50), 0);
    assert_int_equal(read_all(f->db, &err), TRACE_ECORRUPT);
}

/* A reader that fails after `left` statements, as a parse error would. */
typedef struct failing {
    trace_reader inner;
    int left;
} failing;

static int failing_next(void *ctx, trace_stmt *out, trace_error *err)
{
    failing *fr = ctx;
    if (fr->left-- == 0) {
        trace_error_set(err, TRACE_ESYNTAX, "bad.trace:12:3: expected a verb");
        return -1;
    }
    return trace_reader_next(&fr->inner, out, err);
}

static const trace_reader_iface failing_iface = { failing_next, NULL };

static int64_t import_failing(const char *db, trace *t, int left, trace_error *err)
{
    failing fr = { .left = left };
    trace_reader_memory(&fr.inner, t);
    trace_reader r = { .iface = &failing_iface, .ctx = &fr, .trace = t };
    int64_t run = trace_store_import(db, &r, "bad", NULL, err);
    trace_reader_close(&fr.inner);
    return run;
}

static void test_store_failed_import_leaves_nothing(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 100);
    /* A new database: no file is left behind. */
    assert_int_equal(import_failing(f->db, t, 50, &err), -1);
    assert_int_equal(err.status, TRACE_ESYNTAX);
    assert_string_equal(err.msg, "bad.trace:12:3: expected a verb");
    assert_int_equal(access(f->db, F_OK), -1);
    /* An existing database: no run, no row of it. */
    assert_int_equal(import_memory(f->db, t, "good", &err), 1);
    assert_int_equal(import_failing(f->db, t, 50, &err), -1);
    assert_int_equal(access(f->db, F_OK), 0);
    trace_store *st = trace_store_open(f->db, false, &err);
    assert_non_null(st);
    assert_int_equal(trace_store_latest_run(st), 1);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(trace_store_db(st), "SELECT sum(n) FROM stmt_blocks", -1, &q, NULL);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(q, 0), (int64_t)t->n_stmts);
    sqlite3_finalize(q);
    trace_store_close(st);
    trace_free(t);
}

/* Labels come back byte for byte through their templates: numbers, leading
 * zeros (kept as text), numbers too long for a u64, more numbers than a body
 * takes, and the template mark itself. Labels that differ only by numbers
 * share one string in the database. */
static void test_store_label_templates_round_trip(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    static const char *const labels[] = {
        "L17.qkv.k40213", "L18.qkv.k40214", "L007.x.0", "0", "00", "k1234567890123456789",
        "a1b2c3d4e5f6g7h8i9j10k11l12m13n14o15p16q17r18s19t20u21v22w23x24y25z26a27b28c29d30"
        "e31f32g33h34i35j36k37l38m39n40o41p42q43r44s45t46u47v48w49x50y51z52a53b54c55d56e57"
        "f58g59h60i61j62k63l64m65n66",
        "mark\x01here7", "no digits", "999999999999999999",
    };
    size_t n = sizeof labels / sizeof labels[0];
    trace *t = trace_new();
    uint32_t q = trace_add_queue(t, trace_intern_cstr(t, "h"), TRACE_QUEUE_HOST, TRACE_NONE);
    for (size_t i = 0; i < n; i++) {
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = q;
        s.kind = TRACE_OP;
        s.label = trace_intern_cstr(t, labels[i]);
        trace_append(t, &s);
    }
    assert_int_equal(import_memory(f->db, t, NULL, &err), 1);
    trace_reader r;
    assert_int_equal(trace_open_any(f->db, 0, &r, &err), 0);
    trace_stmt s;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(trace_reader_next(&r, &s, &err), 1);
        assert_string_equal(trace_str(r.trace, s.label), labels[i]);
    }
    assert_int_equal(trace_reader_next(&r, &s, &err), 0);
    trace_reader_close(&r);
    /* the two L1x.qkv labels are one template row: "L\x01.qkv.k\x01" */
    trace_store *st = trace_store_open(f->db, false, &err);
    sqlite3_stmt *c;
    sqlite3_prepare_v2(trace_store_db(st),
                       "SELECT count(*) FROM strings WHERE text = 'L' || char(1) || '.qkv.k' || "
                       "char(1)",
                       -1, &c, NULL);
    assert_int_equal(sqlite3_step(c), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(c, 0), 1);
    sqlite3_finalize(c);
    trace_store_close(st);
    trace_free(t);
}

/* A check is stored typed, read back with the names of the run's reader,
 * replaced by the next check; a run never checked says so. */
static void test_store_findings_round_trip_and_replace(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 10);
    assert_int_equal(import_memory(f->db, t, NULL, &err), 1);
    assert_int_equal(import_memory(f->db, t, NULL, &err), 2);
    trace_store *st = trace_store_open(f->db, false, &err);
    trace_check_info info = { 0 }, back;
    trace_finding *out = NULL;
    size_t n = 99;
    assert_int_equal(trace_store_load_check(st, 1, t, &back, &out, &n, &err), 0);
    assert_int_equal(back.id, 0);           /* never checked */
    assert_int_equal(n, 0);
    trace_finding_part part = { TRACE_PART_BLOCKED, false, 1, 5, 0, TRACE_NONE, 0,
                                (char *)"flag f" };
    trace_finding found[2] = {
        { .kind = TRACE_FINDING_RACE, .race_type = TRACE_RACE_RAW, .race_types = TRACE_RACE_RAW,
          .first = { 3, 0, trace_intern_cstr(t, "k3"), 0, TRACE_OP, TRACE_NONE },
          .second = { 7, 1, TRACE_NONE, 12, TRACE_OP, TRACE_NONE },
          .buffer = 0, .root = 0, .lo = 8, .hi = 16, .object = TRACE_NONE,
          .text = (char *)"RAW race", .fix = (char *)"record an event" },
        { .kind = TRACE_FINDING_HANG, .first = { TRACE_NO_SEQ, 0, 0, 0, 0, 0 },
          .second = { TRACE_NO_SEQ, 0, 0, 0, 0, 0 }, .buffer = TRACE_NONE, .root = TRACE_NONE,
          .object = TRACE_NONE, .parts = &part, .n_parts = 1 },
    };
    info.statements = 10;
    info.findings = 3;              /* one more than stored: --max-findings */
    assert_int_equal(trace_store_save_check(st, 1, t, &info, found, 2, &err), 0);
    info.findings = 1;
    assert_int_equal(trace_store_save_check(st, 2, t, &info, found + 1, 1, &err), 0);
    assert_int_equal(trace_store_load_check(st, 1, t, &back, &out, &n, &err), 0);
    assert_int_equal(back.id, 1);
    assert_false(back.incomplete);
    assert_int_equal(back.statements, 10);
    assert_int_equal(back.findings, 3);
    assert_int_equal(back.stored, 2);
    assert_string_equal(back.version, SYNCSIM_VERSION);
    assert_int_equal(n, 2);
    assert_int_equal(out[0].kind, TRACE_FINDING_RACE);
    assert_int_equal(out[0].race_type, TRACE_RACE_RAW);
    assert_int_equal(out[0].first.seq, 3);
    assert_string_equal(trace_str(t, out[0].first.label), "k3");
    assert_int_equal(out[0].second.seq, 7);
    assert_int_equal(out[0].second.line, 12);
    assert_int_equal(out[0].second.queue, 1);
    assert_int_equal(out[0].lo, 8);
    assert_int_equal(out[0].hi, 16);
    assert_string_equal(out[0].fix, "record an event");
    assert_int_equal(out[1].kind, TRACE_FINDING_HANG);
    assert_int_equal(out[1].n_parts, 1);
    assert_int_equal(out[1].parts[0].seq, 5);
    assert_string_equal(out[1].parts[0].text, "flag f");
    trace_findings_free(out, n);
    /* Checking again replaces the findings, and adds a check. */
    info.findings = 0;
    info.incomplete = true;
    assert_int_equal(trace_store_save_check(st, 1, t, &info, NULL, 0, &err), 0);
    assert_int_equal(trace_store_load_check(st, 1, t, &back, &out, &n, &err), 0);
    assert_int_equal(back.id, 2);
    assert_true(back.incomplete);
    assert_int_equal(n, 0);
    trace_findings_free(out, n);
    assert_int_equal(trace_store_save_check(st, 9, t, &info, NULL, 0, &err), -1);
    assert_int_equal(err.status, TRACE_ENORUN);
    trace_store_close(st);
    trace_free(t);
}

/* A check's coverage keeps the accesses not judged for use after free. A
 * check_coverage table made before they were counted reads them as 0 and
 * gains the column when a check is next stored. */
static void test_store_check_coverage_gains_uaf_unjudged(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 10);
    assert_int_equal(import_memory(f->db, t, NULL, &err), 1);
    trace_store *st = trace_store_open(f->db, false, &err);
    assert_int_equal(sqlite3_exec(trace_store_db(st),
                                  "CREATE TABLE check_coverage(run INTEGER, check_id INTEGER,"
                                  " captured INTEGER, device INTEGER, device_ranged INTEGER,"
                                  " host_accesses INTEGER, dropped INTEGER, ranks_given INTEGER,"
                                  " ranks_world INTEGER, PRIMARY KEY(run, check_id)) WITHOUT ROWID;"
                                  "INSERT INTO checks VALUES(1, 1, 'old', 0, 'complete', 10, 0, 0);"
                                  "INSERT INTO check_coverage VALUES(1, 1, 0, 0, 0, 2, 0, 0, 0);",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    trace_check_info info = { .statements = 10, .has_coverage = true, .host_accesses = 2 }, back;
    trace_finding *out = NULL;
    size_t n = 0;
    assert_int_equal(trace_store_load_check(st, 1, t, &back, &out, &n, &err), 0);
    assert_true(back.has_coverage);
    assert_int_equal(back.host_accesses, 2);
    assert_int_equal(back.uaf_unjudged, 0);
    info.uaf_unjudged = 3;
    assert_int_equal(trace_store_save_check(st, 1, t, &info, NULL, 0, &err), 0);
    assert_int_equal(trace_store_load_check(st, 1, t, &back, &out, &n, &err), 0);
    assert_int_equal(back.id, 2);
    assert_int_equal(back.uaf_unjudged, 3);
    trace_store_close(st);
    trace_free(t);
}

static void test_store_graph_empty_for_imported_run(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 10);
    assert_int_equal(import_memory(f->db, t, NULL, &err), 1);
    trace_free(t);
    trace_store *st = trace_store_open(f->db, false, &err);
    trace_graph g;
    assert_int_equal(trace_store_graph(st, 0, &g, &err), 0);
    assert_int_equal(g.n_nodes + g.n_edges + g.n_splits, 0);
    trace_graph_free(&g);
    trace_store_close(st);
}

/* A database of schema 2 (a row of `statements` per statement), made by
 * hand from a run of schema 3: its run is read as it is, through the views
 * too; opened to be written it gains the blocks, keeps reading its old run
 * and puts new runs into blocks. */
static void test_store_schema2_reads_and_migrates(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    static const char text[] = "syncsim-trace 1\n"
                               "queue h host\n"
                               "queue s stream device=0\n"
                               "buffer A size=64\n"
                               "s op kern w:A\n"
                               "h sync s\n";
    trace *t = NULL;
    assert_int_equal(trace_text_parse_string("v2.trace", text, sizeof text - 1, &t, &err), 0);
    assert_int_equal(import_memory(f->db, t, "old", &err), 1);
    /* The run's rows as schema 2 wrote them (docs/trace-schema.md): kern's
     * body is its line 5 and one whole write of buffer 0 (header 0x28: one
     * access, a line; 05; buffer 00, flags 02); `sync s` names queue 1 and
     * has its line 6 (header 0x08). */
    raw_sql(f->db,
            "DROP VIEW blocks_v; DROP TABLE stmt_blocks; DROP TABLE stmt_times;"
            "UPDATE meta SET value = '2' WHERE key = 'schema_version'; PRAGMA user_version = 2;"
            "UPDATE runs SET body_version = 2;"
            "INSERT INTO statements VALUES(1 << 40, 1, 0,"
            " (SELECT id FROM strings WHERE run = 1 AND text = 'kern'), NULL, NULL, NULL, X'28050002');"
            "INSERT INTO statements VALUES((1 << 40) + 1, 0, 4, NULL, 1, NULL, NULL, X'0806');");
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 1, &r, &err), 0);   /* read-only: stays 2 */
    assert_same_trace(t, &r);
    trace_reader_close(&r);
    sqlite3 *h;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(f->db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT queue, kind, label, object FROM statements_v"
                                        " WHERE run = 1 ORDER BY seq",
                                        -1, &q, NULL),
                     SQLITE_OK);
    const char *want[][4] = { { "s", "op", "kern", NULL }, { "h", "sync", NULL, "s" } };
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        for (int c = 0; c < 4; c++) {
            const char *got = (const char *)sqlite3_column_text(q, c);
            if (want[i][c])
                assert_string_equal(got, want[i][c]);
            else
                assert_null(got);
        }
    }
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT value FROM meta WHERE key = 'schema_version'",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "2");
    sqlite3_finalize(q);
    /* Written into: version 3, the old run as it was, the new one in blocks. */
    assert_int_equal(import_memory(f->db, t, "new", &err), 2);
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT (SELECT value FROM meta WHERE key = 'schema_version'),"
                                        " (SELECT group_concat(body_version) FROM runs),"
                                        " (SELECT sum(n) FROM blocks_v WHERE run = 2),"
                                        " (SELECT count(*) FROM stmt_blocks WHERE id < 2 << 40)",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "3");
    assert_string_equal((const char *)sqlite3_column_text(q, 1), "2,3");
    assert_int_equal(sqlite3_column_int(q, 2), 2);
    assert_int_equal(sqlite3_column_int(q, 3), 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    for (int64_t run = 1; run <= 2; run++) {
        assert_int_equal(trace_store_open_reader(f->db, run, &r, &err), 0);
        assert_same_trace(t, &r);
        trace_reader_close(&r);
    }
    trace_free(t);
}

/* ------------------------------------------------------------------ */
/* Through the text format, once the parser exists.                    */

/* Exports run `run` of db as text into a malloc'd string. */
static char *export_text(const char *db, int64_t run, size_t *len)
{
    trace_reader r;
    trace_error err = { 0 };
    char *buf = NULL;
    assert_int_equal(trace_store_open_reader(db, run, &r, &err), 0);
    FILE *mem = open_memstream(&buf, len);
    assert_int_equal(trace_text_write(mem, &r, &err), 0);
    fclose(mem);
    trace_reader_close(&r);
    return buf;
}

/* Imports, exports and re-imports every trace of dir; both runs must hold
 * the original statement list. Returns the number of traces. */
static int round_trip_dir(const fixture *f, const char *dir, DIR *d)
{
    struct dirent *e;
    int n_files = 0;
    while ((e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 6, ".trace") != 0)
            continue;
        char path[512];
        trace_error err = { 0 };
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        trace *orig = NULL;
        if (trace_text_parse_file(path, &orig, &err) != 0)
            fail_msg("%s", err.msg);
        trace_reader r;
        assert_int_equal(trace_text_open(path, &r, &err), 0);
        int64_t run1 = trace_store_import(f->db, &r, e->d_name, NULL, &err);
        trace_reader_close(&r);
        if (run1 < 0)
            fail_msg("%s", err.msg);
        size_t len;
        char *text = export_text(f->db, run1, &len);
        assert_int_equal(trace_text_open_string("exported", text, len, &r, &err), 0);
        int64_t run2 = trace_store_import(f->db, &r, "again", NULL, &err);
        trace_reader_close(&r);
        if (run2 < 0)
            fail_msg("%s: re-import: %s\n%s", e->d_name, err.msg, text);
        free(text);
        /* Both runs hold the original statement list. */
        for (int64_t run = run1; run <= run2; run++) {
            assert_int_equal(trace_store_open_reader(f->db, run, &r, &err), 0);
            trace_stmt a, b;
            uint64_t n = 0;
            while (trace_reader_next(&r, &b, &err) == 1) {
                assert_true(n < orig->n_stmts);
                trace_stmt_at(orig, n++, &a);
                if (!trace_stmt_equal(orig, &a, r.trace, &b))
                    fail_msg("%s: run %lld: statement %llu differs", e->d_name, (long long)run,
                             (unsigned long long)n - 1);
            }
            assert_int_equal(n, orig->n_stmts);
            assert_int_equal(r.trace->n_expects, orig->n_expects);
            trace_reader_close(&r);
        }
        trace_free(orig);
        n_files++;
    }
    closedir(d);
    return n_files;
}

static void test_store_litmus_import_export_reimport(void **state)
{
    fixture *f = *state;
    /* Our corpus is part of the tree: it must be there. */
    DIR *ours = opendir(SYNCSIM_SOURCE_DIR "/tests/litmus");
    assert_non_null(ours);
    assert_true(round_trip_dir(f, SYNCSIM_SOURCE_DIR "/tests/litmus", ours) >= 40);
    /* The shared examples sit beside a checkout (as in CI), not in a plain clone. */
    DIR *shared = opendir(SYNCSIM_SHARED_DIR "/litmus");
    if (!shared) {
        print_message("note: %s is missing; only tests/litmus was round-tripped\n",
                      SYNCSIM_SHARED_DIR "/litmus");
        return;
    }
    assert_true(round_trip_dir(f, SYNCSIM_SHARED_DIR "/litmus", shared) > 0);
}

/* ------------------------------------------------------------------ */
/* The CLI: import, info, export.                                      */

/* Runs the syncsim binary with args (a shell fragment); returns its exit
 * status, stdout+stderr in out. */
static int run_cli(const char *args, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", SYNCSIM_BINARY, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_store_cli_bad_input_leaves_no_database(void **state)
{
    fixture *f = *state;
    char path[160], args[512], out[4096];
    snprintf(path, sizeof path, "%s/garbage.trace", f->dir);
    write_file(path, "this is not a trace\n", 20);
    snprintf(args, sizeof args, "import '%s' -o '%s'", path, f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "garbage.trace:1:1: error: "));
    assert_non_null(strstr(out, " (syncsim import)\n"));
    assert_int_equal(access(f->db, F_OK), -1);
    snprintf(args, sizeof args, "import --bogus '%s'", path);
    assert_int_equal(run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "usage: syncsim import"));
    /* info and export on a non-database name it and exit 2. */
    write_file(f->db, "SQLite format 3\0garbage garbage", 32);
    snprintf(args, sizeof args, "info '%s'", f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, f->db));
    snprintf(args, sizeof args, "export '%s'", f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 2);
}

static void test_store_cli_info_lists_runs(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = make_trace(0, 40);
    assert_int_equal(import_memory(f->db, t, "first", &err), 1);
    assert_int_equal(import_memory(f->db, t, "second", &err), 2);
    char args[512], out[8192];
    snprintf(args, sizeof args, "info '%s' --run 1", f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "first"));
    assert_non_null(strstr(out, "second"));
    assert_non_null(strstr(out, "complete"));
    char want[64];
    snprintf(want, sizeof want, "statements: %llu", (unsigned long long)t->n_stmts);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "wait 1"));
    snprintf(args, sizeof args, "info '%s' --json", f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"run\": 2"));
    assert_non_null(strstr(out, "\"sync\": 3"));
    snprintf(args, sizeof args, "info '%s' --run 5", f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "no run 5"));
    trace_free(t);
}

static void test_store_cli_import_export_litmus(void **state)
{
    fixture *f = *state;
    /* In the tree, so the test never depends on ../shared. */
    const char *src = SYNCSIM_SOURCE_DIR "/tests/litmus/rule3-event-most-recent-record.trace";
    char args[768], out[8192], exported[160];
    snprintf(args, sizeof args, "import '%s' -o '%s' --name chain", src, f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "run 1"));
    snprintf(exported, sizeof exported, "%s/out.trace", f->dir);
    snprintf(args, sizeof args, "export '%s' --format trace -o '%s'", f->db, exported);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "import '%s' -o '%s'", exported, f->db);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "run 2"));
    snprintf(args, sizeof args, "export '%s' --run 9 -o '%s/none.trace'", f->db, f->dir);
    assert_int_equal(run_cli(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "%s/none.trace", f->dir);
    assert_int_equal(access(args, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_round_trip_memory, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_several_runs_and_selection, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_new_database_is_marked, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_newer_schema_is_eversion, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_foreign_sqlite_is_enottrace, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_text_file_is_enottrace, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_missing_file_is_eio, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_corrupt_middle_is_ecorrupt, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_truncated_is_ecorrupt, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_failed_import_leaves_nothing, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_value_semaphores_round_trip, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_label_templates_round_trip, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_findings_round_trip_and_replace, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_check_coverage_gains_uaf_unjudged, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_graph_empty_for_imported_run, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_schema2_reads_and_migrates, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_litmus_import_export_reimport, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_cli_bad_input_leaves_no_database, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_cli_info_lists_runs, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_store_cli_import_export_litmus, tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
