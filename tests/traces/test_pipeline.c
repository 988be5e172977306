/* test_pipeline.c -- the lazy store reader: statements read ahead on a
 * second thread arrive exactly as the plain reader gives them (labels
 * aside, which come lazily and resolve to the same text), across batch
 * boundaries, after a rewind in the middle, and when closed early. Run under
 * ThreadSanitizer too (the "threads" label). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pipeline_gives_what_the_plain_reader_gives, setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_pipeline_rewinds_midway_and_closes_early, setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
