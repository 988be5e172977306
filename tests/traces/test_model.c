/* test_model.c -- the in-memory trace model: interning, declarations,
 * statements, views resolved to roots, submitters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "traces/trace.h"

static void test_model_intern_gives_same_id(void **state)
{
    (void)state;
    trace *t = trace_new();
    uint32_t a = trace_intern_cstr(t, "mm0");
    uint32_t b = trace_intern(t, "mm0xyz", 3);
    assert_int_equal(a, b);
    assert_int_not_equal(a, trace_intern_cstr(t, "mm1"));
    assert_string_equal(trace_str(t, a), "mm0");
    assert_int_equal(trace_str_find(t, "nope", 4), TRACE_NONE);
    trace_free(t);
}

static void test_model_many_strings_survive_rehash(void **state)
{
    (void)state;
    trace *t = trace_new();
    char buf[32];
    for (int i = 0; i < 10000; i++) {
        snprintf(buf, sizeof buf, "s%d", i);
        assert_int_equal(trace_intern_cstr(t, buf), (uint32_t)i);
    }
    for (int i = 0; i < 10000; i += 997) {
        snprintf(buf, sizeof buf, "s%d", i);
        assert_int_equal(trace_str_find(t, buf, strlen(buf)), (uint32_t)i);
    }
    trace_free(t);
}

static void test_model_duplicate_declaration_refused(void **state)
{
    (void)state;
    trace *t = trace_new();
    uint32_t host = trace_add_queue(t, trace_intern_cstr(t, "host"), TRACE_QUEUE_HOST, TRACE_NONE);
    assert_int_equal(host, 0);
    assert_int_equal(trace_add_queue(t, trace_intern_cstr(t, "host"), TRACE_QUEUE_HOST, TRACE_NONE),
                     TRACE_NONE);
    assert_int_equal(trace_find_queue(t, "host", 4), 0);
    trace_free(t);
}

static void test_model_view_of_view_resolves_to_root(void **state)
{
    (void)state;
    trace *t = trace_new();
    uint32_t arena = trace_add_root_buffer(t, trace_intern_cstr(t, "arena"), 65536, TRACE_LOC_HOST,
                                           TRACE_NONE, false);
    uint32_t v = trace_add_view(t, trace_intern_cstr(t, "v"), arena, 1024, 4096);
    uint32_t w = trace_add_view(t, trace_intern_cstr(t, "w"), v, 100, 200);
    trace_access a = { .buffer = w, .mode = TRACE_W, .form = TRACE_REF_RANGE, .lo = 10, .hi = 20 };
    uint32_t root;
    uint64_t lo, hi;
    trace_access_root(t, &a, &root, &lo, &hi);
    assert_int_equal(root, arena);
    assert_int_equal(lo, 1024 + 100 + 10);
    assert_int_equal(hi, 1024 + 100 + 20);
    assert_int_equal(t->buffers[w].loc, TRACE_LOC_HOST);
    trace_free(t);
}

static void test_model_submitter_defaults_to_only_host(void **state)
{
    (void)state;
    trace *t = trace_new();
    uint32_t h = trace_add_queue(t, trace_intern_cstr(t, "h"), TRACE_QUEUE_HOST, TRACE_NONE);
    uint32_t s0 = trace_add_queue(t, trace_intern_cstr(t, "s0"), TRACE_QUEUE_STREAM,
                                  trace_intern_cstr(t, "0"));
    trace_stmt s;
    trace_stmt_init(&s);
    s.queue = s0;
    s.kind = TRACE_RECORD;
    assert_int_equal(trace_submitter(t, &s), h);
    trace_add_queue(t, trace_intern_cstr(t, "h2"), TRACE_QUEUE_HOST, TRACE_NONE);
    assert_int_equal(trace_submitter(t, &s), TRACE_NONE);
    s.queue = h;
    assert_int_equal(trace_submitter(t, &s), TRACE_NONE);
    trace_free(t);
}

static void test_model_append_and_read_back(void **state)
{
    (void)state;
    trace *t = trace_new();
    uint32_t q = trace_add_queue(t, trace_intern_cstr(t, "h"), TRACE_QUEUE_HOST, TRACE_NONE);
    uint32_t b = trace_add_root_buffer(t, trace_intern_cstr(t, "X"), 64, TRACE_LOC_HOST, TRACE_NONE, true);
    for (int i = 0; i < 1000; i++) {
        trace_access acc[2] = { { b, TRACE_R, TRACE_REF_WHOLE, 0, 64 },
                                { b, TRACE_W, TRACE_REF_RANGE, (uint64_t)i % 32, 40 } };
        trace_attr at = { trace_intern_cstr(t, "token"), trace_intern_cstr(t, "7") };
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = q;
        s.kind = TRACE_OP;
        s.label = trace_intern_cstr(t, "fill");
        s.access = acc;
        s.n_access = 2;
        s.attr = &at;
        s.n_attr = 1;
        assert_int_equal(trace_append(t, &s), 0);
    }
    trace_reader r;
    trace_reader_memory(&r, t);
    trace_stmt s;
    uint64_t n = 0;
    while (trace_reader_next(&r, &s, NULL) == 1) {
        assert_int_equal(s.seq, n);
        assert_int_equal(s.n_access, 2);
        assert_int_equal(s.access[1].lo, n % 32);
        assert_string_equal(trace_str(t, s.attr[0].value), "7");
        n++;
    }
    assert_int_equal(n, 1000);
    trace_reader_close(&r);
    trace_free(t);
}

/* Loading a reader over a trace that it owns gives that trace: its
 * statements are already there (appending them again never ended). */
static void test_model_load_of_a_memory_reader_is_its_trace(void **state)
{
    (void)state;
    trace *t = trace_new();
    uint32_t h = trace_add_queue(t, trace_intern_cstr(t, "h"), TRACE_QUEUE_HOST, TRACE_NONE);
    for (int i = 0; i < 3; i++) {
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = h;
        s.kind = TRACE_OP;
        assert_int_equal(trace_append(t, &s), 0);
    }
    trace_reader r;
    trace_reader_memory(&r, t);
    r.owns_trace = true;
    trace *loaded = NULL;
    trace_error err;
    assert_int_equal(trace_reader_load(&r, &loaded, &err), 0);
    assert_ptr_equal(loaded, t);
    assert_int_equal(loaded->n_stmts, 3);
    trace_free(loaded);
}

/* A barrier arrival past a full generation names no first arrival: every
 * field of that part of the binding is set (mismatch.c prints the first
 * arrival's line when it has one). */
static void test_model_binder_extra_arrival_has_no_first(void **state)
{
    (void)state;
    trace_binder *b = trace_binder_new(0);
    assert_non_null(b);
    trace_stmt s;
    trace_bind out;
    for (uint32_t q = 0; q < 3; q++) {
        trace_stmt_init(&s);
        s.seq = q;
        s.queue = q;
        s.kind = TRACE_BARRIER;
        s.object = 7;
        s.count = 2;
        s.line = 10 + q;
        memset(&out, 0xab, sizeof out);
        assert_int_equal(trace_binder_feed(b, &s, &out), 0);
    }
    assert_int_equal(out.gen_role, TRACE_GEN_EXTRA);
    assert_int_equal(out.gen_first, TRACE_NO_SEQ);
    assert_int_equal(out.gen_first_queue, TRACE_NONE);
    assert_int_equal(out.gen_first_kind, TRACE_NONE);
    assert_int_equal(out.gen_first_line, 0);
    trace_binder_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_intern_gives_same_id),
        cmocka_unit_test(test_model_many_strings_survive_rehash),
        cmocka_unit_test(test_model_duplicate_declaration_refused),
        cmocka_unit_test(test_model_view_of_view_resolves_to_root),
        cmocka_unit_test(test_model_submitter_defaults_to_only_host),
        cmocka_unit_test(test_model_append_and_read_back),
        cmocka_unit_test(test_model_load_of_a_memory_reader_is_its_trace),
        cmocka_unit_test(test_model_binder_extra_arrival_has_no_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
