/* test_pipeline.c -- statements on a second thread (traces/pipe.c).
 *
 * The lazy store reader: statements read ahead arrive exactly as the plain
 * reader gives them (labels aside, which come lazily and resolve to the
 * same text), across batch boundaries, after a rewind in the middle, and
 * when closed early.
 *
 * Import: a text trace that declares queues and buffers between its
 * statements, parsed on one thread while the other writes, reads back
 * statement for statement as the text says; an error in the middle leaves
 * no database. Lazy text labels resolve to the same text in any order.
 *
 * Run under ThreadSanitizer too (the "threads" label). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "traces/trace.h"

#define N_STMTS 10000   /* more than two batches of the pipeline */

/* A run of N_STMTS ops with numbered labels and accesses, imported. */
static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    trace *t = trace_new();
    uint32_t h = trace_add_queue(t, trace_intern_cstr(t, "h"), TRACE_QUEUE_HOST, TRACE_NONE);
    uint32_t b = trace_add_root_buffer(t, trace_intern_cstr(t, "B"), 1 << 20, TRACE_LOC_HOST,
                                       TRACE_NONE, false);
    for (uint64_t i = 0; i < N_STMTS; i++) {
        char label[32];
        snprintf(label, sizeof label, "k%llu.op", (unsigned long long)i);
        trace_access a = { .buffer = b, .mode = TRACE_RW, .form = TRACE_REF_RANGE,
                           .lo = i % 1000, .hi = i % 1000 + 8 };
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = h;
        s.kind = TRACE_OP;
        s.label = trace_intern_cstr(t, label);
        s.n_access = 1;
        s.access = &a;
        s.t = (int64_t)i * 10;
        trace_append(t, &s);
    }
    trace_reader r;
    trace_reader_memory(&r, t);
    trace_error err;
    int64_t run = trace_store_import(f->db, &r, "pipeline", NULL, &err);
    trace_reader_close(&r);
    trace_free(t);
    return run == 1 ? 0 : -1;
}

static void open_lazy(const fixture *f, trace_source *src)
{
    trace_error err;
    trace_source_opts o = { .lazy_labels = true };
    assert_int_equal(trace_source_open(src, f->db, &o, &err), 0);
}

static void test_pipeline_gives_what_the_plain_reader_gives(void **state)
{
    fixture *f = *state;
    trace_source lazy, plain;
    trace_error err;
    open_lazy(f, &lazy);
    assert_int_equal(trace_source_open(&plain, f->db, NULL, &err), 0);
    trace_stmt a, b;
    uint64_t n = 0, lazy_labels = 0;
    while (trace_reader_next(&lazy.reader, &a, &err) == 1) {
        assert_int_equal(trace_reader_next(&plain.reader, &b, &err), 1);
        assert_int_equal(a.seq, b.seq);
        assert_int_equal(a.kind, b.kind);
        assert_int_equal(a.n_access, 1);
        assert_int_equal(a.access[0].lo, b.access[0].lo);
        assert_int_equal(a.access[0].hi, b.access[0].hi);
        assert_int_equal(a.t, TRACE_TIME_NONE);     /* the checker's reads skip times */
        lazy_labels += a.label == TRACE_LABEL_LAZY;
        n++;
    }
    assert_int_equal(n, N_STMTS);
    assert_int_equal(lazy_labels, N_STMTS);
    assert_int_equal(trace_reader_next(&plain.reader, &b, &err), 0);
    /* after the pass, lazy labels resolve to the text */
    uint32_t label = TRACE_LABEL_LAZY;
    assert_int_equal(trace_reader_label(&lazy.reader, 4097, &label, &err), 0);
    assert_string_equal(trace_str(lazy.reader.trace, label), "k4097.op");
    trace_source_close(&lazy);
    trace_source_close(&plain);
}

static void test_pipeline_rewinds_midway_and_closes_early(void **state)
{
    fixture *f = *state;
    trace_source src;
    trace_error err;
    trace_stmt s;
    open_lazy(f, &src);
    for (int i = 0; i < 5000; i++)
        assert_int_equal(trace_reader_next(&src.reader, &s, &err), 1);
    assert_int_equal(s.seq, 4999);
    assert_int_equal(trace_reader_rewind(&src.reader, &err), 0);
    uint64_t n = 0;
    while (trace_reader_next(&src.reader, &s, &err) == 1)
        n++;
    /* a rewound store reader reads what its first pass saw */
    assert_int_equal(n, 5000);
    trace_source_close(&src);
    /* closed while the producer still reads ahead */
    open_lazy(f, &src);
    assert_int_equal(trace_reader_next(&src.reader, &s, &err), 1);
    trace_source_close(&src);
}

/* ------------------------------------------------------------------ */
/* Text, imported on two threads.                                      */

#define N_TEXT 20000    /* about five batches */

/* A text trace of N_TEXT statements that declares a buffer every 1500
 * statements and a second host and a stream on the way; labels distinct,
 * some quoted with blanks, a collective with label=. bad_line: a line
 * number to break (0: none). Returns the number of lines written. */
static uint32_t write_text(const char *path, uint32_t bad_line)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint32_t line = 0;
#define LINE(...) (fprintf(f, __VA_ARGS__), ++line)
    LINE("syncsim-trace 1\n");
    LINE("queue h0 host\n");
    LINE("buffer b0 size=4096 host\n");
    uint32_t n_buf = 1;
    for (uint32_t i = 0; i < N_TEXT; i++) {
        if (i % 1500 == 1499)
            LINE("buffer b%u size=4096 host\n", n_buf++);
        if (i == 7000) {
            LINE("queue h1 host\n");
            LINE("queue s0 stream device=cuda:0\n");
        }
        if (line + 1 == bad_line) {
            LINE("h0 op k%u r:nosuchbuffer\n", i);
            continue;
        }
        uint32_t b = i % n_buf;
        if (i > 7000 && i % 7 == 0)
            LINE("s0 op \"L%u kernel %u\" rw:b%u[0:%u] by=h%u t=%u\n", i % 40, i, b,
                 1 + i % 4096, i % 2, i * 10);
        else if (i % 1000 == 999)
            LINE("h0 collective \"world 0\" allreduce size=1 rw:b0 label=\"ar %u\"\n", i);
        else
            LINE("h0 op L%u.qkv.k%u r:b%u w:b%u[8:16]\n", i % 40, i, b, (b + 1) % n_buf);
    }
#undef LINE
    fclose(f);
    return line;
}

static void test_text_import_on_two_threads(void **state)
{
    fixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/t.trace", f->dir);
    write_text(path, 0);
    trace_error err;
    trace_source src;
    trace_source_opts o = { .lazy_labels = true };
    assert_int_equal(trace_source_open(&src, path, &o, &err), 0);
    uint64_t n = 0;
    assert_int_equal(trace_store_import(f->db, &src.reader, "text", &n, &err), 1);
    trace_source_close(&src);
    assert_int_equal(n, N_TEXT);
    /* statement for statement what the text says */
    trace *want;
    if (trace_text_parse_file(path, &want, &err) != 0)
        fail_msg("%s", err.msg);
    trace_reader got;
    assert_int_equal(trace_open_any(f->db, 0, &got, &err), 0);
    trace_stmt a, b;
    for (uint64_t i = 0; i < want->n_stmts; i++) {
        assert_int_equal(trace_reader_next(&got, &b, &err), 1);
        trace_stmt_at(want, i, &a);
        if (!trace_stmt_equal(want, &a, got.trace, &b))
            fail_msg("statement %llu differs", (unsigned long long)i);
    }
    assert_int_equal(trace_reader_next(&got, &b, &err), 0);
    assert_int_equal(got.trace->n_buffers, want->n_buffers);
    assert_int_equal(got.trace->n_queues, want->n_queues);
    trace_reader_close(&got);
    trace_free(want);
}

static void test_text_import_error_leaves_nothing(void **state)
{
    fixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/bad.trace", f->dir);
    write_text(path, 15000);
    trace_error err = { 0 };
    trace_source src;
    trace_source_opts o = { .lazy_labels = true };
    assert_int_equal(trace_source_open(&src, path, &o, &err), 0);
    assert_int_equal(trace_store_import(f->db, &src.reader, "bad", NULL, &err), -1);
    trace_source_close(&src);
    assert_non_null(strstr(err.msg, "bad.trace:15000:"));
    assert_non_null(strstr(err.msg, "nosuchbuffer"));
    assert_int_not_equal(access(f->db, F_OK), 0);
}

static void test_text_lazy_labels_resolve_in_any_order(void **state)
{
    fixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/t.trace", f->dir);
    write_text(path, 0);
    trace_error err;
    trace *want;
    if (trace_text_parse_file(path, &want, &err) != 0)
        fail_msg("%s", err.msg);
    trace_reader r;
    assert_int_equal(trace_text_open_lazy(path, true, &r, &err), 0);
    trace_stmt s;
    uint64_t n = 0, lazy = 0;
    while (trace_reader_next(&r, &s, &err) == 1) {
        lazy += s.label == TRACE_LABEL_LAZY;
        n++;
    }
    assert_int_equal(n, N_TEXT);
    assert_true(lazy > N_TEXT - 10);    /* every statement has a label */
    /* backwards, across marks, quoted ones, the collective's label= */
    static const uint64_t seqs[] = { 19999, 15001, 7007, 7000, 1024, 1023, 999, 1025, 0, 1 };
    for (size_t i = 0; i < sizeof seqs / sizeof *seqs; i++) {
        trace_stmt w;
        trace_stmt_at(want, seqs[i], &w);
        trace_stmt ls = { .seq = seqs[i], .label = TRACE_LABEL_LAZY };
        const char *text;
        size_t len;
        assert_int_equal(trace_reader_label_text(&r, &ls, &text, &len, &err), 0);
        assert_string_equal(text, trace_str(want, w.label));
        assert_int_equal(len, strlen(text));
    }
    /* after a rewind, any statement of the first pass */
    assert_int_equal(trace_reader_rewind(&r, &err), 0);
    assert_int_equal(trace_reader_next(&r, &s, &err), 1);
    uint32_t label = TRACE_LABEL_LAZY;
    assert_int_equal(trace_reader_label(&r, 12345, &label, &err), 0);
    trace_stmt w;
    trace_stmt_at(want, 12345, &w);
    assert_string_equal(trace_str(r.trace, label), trace_str(want, w.label));
    /* the reader carries on where it was */
    assert_int_equal(trace_reader_next(&r, &s, &err), 1);
    assert_int_equal(s.seq, 1);
    label = TRACE_LABEL_LAZY;
    assert_int_equal(trace_reader_label(&r, N_TEXT, &label, &err), -1);
    assert_non_null(strstr(err.msg, "not read yet"));
    trace_reader_close(&r);
    trace_free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pipeline_gives_what_the_plain_reader_gives, setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_pipeline_rewinds_midway_and_closes_early, setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_text_import_on_two_threads, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_text_import_error_leaves_nothing, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_text_lazy_labels_resolve_in_any_order, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
