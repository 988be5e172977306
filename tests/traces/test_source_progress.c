/*
 * test_source_progress.c -- trace_source_opts.progress (trace.h): a
 * capture in a foreign format, parsed while it is opened, says how far
 * its reading has got through the one hook of the shared readers. For a
 * Kineto trace (plain and gzipped), an Nsight Systems export and a CUDA
 * log written at test time: the first call says 0 of the total, the last
 * the total of the total, done never goes back, calls come in between and
 * at a bounded rate (per chunk, rows or MiB, never per event); the total is
 * the file's size (of a gzip file, its compressed size) or the export's
 * rows. The CUDA log then says a second pass, the records it matches to
 * their GPU work, the same way. A syncsim database or a text trace, read
 * after the open, says nothing; an open without a hook reads the same
 * statements.
 */
#include "../big_captures.h"
#include "../tmpdir.h"
#include "import_test_util.h"

#include <sys/stat.h>

#define LAUNCHES 20000

/* What the hook was told in one unit. */
typedef struct pass_heard {
    char unit[16];
    uint64_t calls, first_done, first_total, last_done, last_total;
    uint64_t between;           /* calls with 0 < done < total */
    bool went_back, total_changed;
} pass_heard;

/* What the hook was told: a pass per unit, in order. */
typedef struct heard {
    pass_heard pass[4];
    unsigned passes;
    uint64_t calls;
} heard;

static void hear(void *ctx, const char *unit, uint64_t done, uint64_t total)
{
    heard *h = ctx;
    h->calls++;
    pass_heard *p = h->passes ? &h->pass[h->passes - 1] : NULL;
    if (!p || strcmp(p->unit, unit) != 0) {
        if (h->passes == sizeof h->pass / sizeof h->pass[0])
            return;             /* fails below: too many passes */
        p = &h->pass[h->passes++];
        snprintf(p->unit, sizeof p->unit, "%s", unit);
        p->first_done = done;
        p->first_total = total;
    } else {
        p->went_back |= done < p->last_done;
        p->total_changed |= total != p->last_total;
    }
    p->between += done > 0 && done < total;
    p->last_done = done;
    p->last_total = total;
    p->calls++;
}

/* Opens path with the hook and reads it whole: what the hook heard; the
 * statements in *n. */
static heard open_heard(const char *path, uint64_t *n)
{
    heard h = { 0 };
    trace_source src;
    trace_source_opts o = { .as_recorded = true, .progress = { hear, &h } };
    trace_error err = { 0 };
    if (trace_source_open(&src, path, &o, &err) != 0)
        fail_msg("%s", err.msg);
    uint64_t calls = h.calls;
    trace_stmt s;
    int rc;
    *n = 0;
    while ((rc = trace_reader_next(&src.reader, &s, &err)) == 1)
        (*n)++;
    assert_int_equal(rc, 0);
    trace_source_close(&src);
    assert_int_equal(h.calls, calls);   /* only while the source is opened */
    return h;
}

/* The statements of path opened without a hook. */
static uint64_t statements(const char *path)
{
    trace_source src;
    trace_source_opts o = { .as_recorded = true };
    trace_error err = { 0 };
    if (trace_source_open(&src, path, &o, &err) != 0)
        fail_msg("%s", err.msg);
    trace_stmt s;
    uint64_t n = 0;
    while (trace_reader_next(&src.reader, &s, &err) == 1)
        n++;
    trace_source_close(&src);
    return n;
}

/* f's file called name, in path (256 bytes). */
static const char *in_dir(const fixture *f, const char *name, char *path)
{
    snprintf(path, 256, "%s/%s", f->dir, name);
    return path;
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_size;
}

/* The contract for one pass: from 0 to total, in `unit`, never back, at
 * most max_calls calls and at least one in between. */
static void assert_pass(const char *path, const pass_heard *p, const char *unit, uint64_t total,
                        uint64_t max_calls)
{
    assert_string_equal(p->unit, unit);
    assert_int_equal(p->first_done, 0);
    assert_int_equal(p->first_total, total);
    assert_false(p->total_changed);
    assert_int_equal(p->last_done, total);
    assert_false(p->went_back);
    if (p->between == 0 || p->calls > max_calls)
        fail_msg("%s, %s: %llu calls, %llu in between (at most %llu calls)", path, unit,
                 (unsigned long long)p->calls, (unsigned long long)p->between,
                 (unsigned long long)max_calls);
}

/* Opens path: its reading is one pass (then `more` other passes) of the
 * contract; the statements are those of an open without the hook. */
static heard assert_said(const char *path, const char *unit, uint64_t total, uint64_t max_calls,
                         unsigned more)
{
    uint64_t n;
    heard h = open_heard(path, &n);
    assert_int_equal(h.passes, 1 + more);
    assert_pass(path, &h.pass[0], unit, total, max_calls);
    assert_int_equal(n, statements(path));
    return h;
}

static void test_source_progress_kineto(void **state)
{
    char path[256];
    assert_int_equal(big_kineto(in_dir(*state, "k.json", path), LAUNCHES, false), 0);
    /* a call per chunk of 256 KiB parsed, and the first and the last */
    assert_said(path, "bytes", file_size(path), file_size(path) / (256 * 1024) + 3, 0);
}

static void test_source_progress_kineto_gzip(void **state)
{
    char plain[256], path[256];
    assert_int_equal(big_kineto(in_dir(*state, "k.json", plain), LAUNCHES, false), 0);
    assert_int_equal(big_kineto(in_dir(*state, "k.json.gz", path), LAUNCHES, true), 0);
    /* of the file's compressed bytes; a call per 256 KiB inflated */
    assert_said(path, "bytes", file_size(path), file_size(plain) / (256 * 1024) + 3, 0);
}

static void test_source_progress_nsys(void **state)
{
    char path[256];
    uint64_t rows;
    assert_int_equal(big_nsys(in_dir(*state, "n.sqlite", path), LAUNCHES, &rows), 0);
    /* a call per 4096 rows */
    assert_said(path, "rows", rows, rows / 4096 + 3, 0);
}

static void test_source_progress_cuda_log(void **state)
{
    char path[256];
    assert_int_equal(big_cuda_log(in_dir(*state, "c.log", path), LAUNCHES), 0);
    /* a call per MiB of lines; then per 4096 records matched (every launch
     * is a record of a call) */
    heard h = assert_said(path, "bytes", file_size(path), file_size(path) / (1024 * 1024) + 3, 1);
    assert_pass(path, &h.pass[1], "records", LAUNCHES, LAUNCHES / 4096 + 3);
}

/* Read after the open, a text trace or a database says nothing. */
static void test_source_progress_not_for_syncsim_formats(void **state)
{
    fixture *f = *state;
    char text[256], db[256];
    in_dir(f, "s.trace", text);
    in_dir(f, "s.db", db);
    assert_int_equal(tmpdir_write(f, "s.trace", "syncsim-trace 1\nqueue h host\n"
                                                 "buffer b size=64 host\nh op fill w:b\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "%s import s.trace -o s.db", SYNCSIM_BINARY), 0);
    uint64_t n;
    assert_int_equal(open_heard(text, &n).calls, 0);
    assert_int_equal(n, 1);
    assert_int_equal(open_heard(db, &n).calls, 0);
    assert_int_equal(n, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_source_progress_kineto, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_source_progress_kineto_gzip, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_source_progress_nsys, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_source_progress_cuda_log, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_source_progress_not_for_syncsim_formats,
                                        tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
