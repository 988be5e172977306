/*
 * test_advise.c -- the advice (check/advise.c) with a pricer of its own: a
 * host sync, wait or await costs 100, anything else 10, one after the
 * other, so what a group buys is 100 per statement it drops (less what a
 * replacement puts back) and every statement is on the critical path.
 * The replay itself is sim/'s (tests/cli/test_cli_advise.c runs it); here
 * the grouping, the safety, the findings and the replacements are what is
 * checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check/internal.h"
#include "check_test_util.h"

static int64_t cost_of(trace_kind k)
{
    return k == TRACE_WAIT || k == TRACE_SYNC || k == TRACE_AWAIT || k == TRACE_BARRIER ? 100 : 10;
}

static int fake_replay(void *ctx, const trace *t, const bool *drop, int64_t *makespan,
                       int64_t *start, int64_t *end, bool *critical, trace_error *err)
{
    (void)ctx;
    (void)err;
    int64_t now = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        bool gone = drop && drop[i];
        if (start)
            start[i] = gone ? TRACE_TIME_NONE : now;
        if (!gone)
            now += cost_of(s.kind);
        if (end)
            end[i] = gone ? TRACE_TIME_NONE : now;
        if (critical)
            critical[i] = !gone;
    }
    *makespan = now;
    return 0;
}

static const check_pricer pricer = { fake_replay, NULL, "one after the other" };

static check_advice advise(trace *t)
{
    check_advise_opts o = { .pricer = &pricer };
    check_advice a;
    trace_error err = { 0 };
    if (check_advise(t, &o, &a, &err) != 0)
        fail_msg("check_advise: %s", err.msg);
    return a;
}

/* The group whose description starts with what (NULL: none). */
static const check_advice_item *item(const check_advice *a, const char *what)
{
    for (size_t i = 0; i < a->n; i++)
        if (strncmp(a->items[i].what, what, strlen(what)) == 0)
            return &a->items[i];
    return NULL;
}

/* Appends an op with token=K. */
static uint64_t op_tok(trace *t, const char *q, const char *label, const char *acc, int token)
{
    trace_stmt s;
    trace_access a[8];
    trace_stmt_init(&s);
    s.queue = tb_q(t, q);
    s.kind = TRACE_OP;
    s.label = trace_intern_cstr(t, label);
    s.n_access = tb_parse_access(t, acc, a);
    s.access = a;
    char v[16];
    snprintf(v, sizeof v, "%d", token);
    trace_attr at = { trace_intern_cstr(t, "token"), trace_intern_cstr(t, v) };
    s.attr = &at;
    s.n_attr = 1;
    s.line = (uint32_t)t->n_stmts + 1;
    if (t->queues[s.queue].kind == TRACE_QUEUE_STREAM)
        s.by = tb_by_host;
    trace_append(t, &s);
    return t->n_stmts - 1;
}

/* Three iterations of `s ... s ...`: the first and the second host sync
 * of an iteration are two groups of three, told apart by their letter in
 * the iteration's pattern, and only the second is needed. */
static void test_advise_groups_by_the_letter_of_the_pattern(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "gpu", "0");
    tb_buf(t, "X", 64);
    tb_buf(t, "Y", 64);
    for (int k = 0; k < 3; k++) {
        op_tok(t, "host", "fill", "w:X", k);
        tb_sync(t, "host", "gpu");
        tb_op(t, "gpu", "kern", "r:X w:Y");
        tb_sync(t, "host", "gpu");
        tb_op(t, "host", "read", "r:Y");
    }
    check_advice a = advise(t);
    assert_int_equal(a.n, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(a.items[i].count, 3);
        assert_int_equal(a.items[i].kind, TRACE_SYNC);
        assert_non_null(strchr(a.items[i].where, '['));
    }
    /* the first sync of each iteration can go; the second orders read */
    const check_advice_item *first = strncmp(a.items[0].where, "[s]", 3) == 0 ? &a.items[0]
                                                                              : &a.items[1];
    const check_advice_item *second = first == &a.items[0] ? &a.items[1] : &a.items[0];
    assert_int_equal(first->safety, CHECK_SAFE_ALL);
    assert_int_equal(second->safety, CHECK_SAFE_NONE);
    assert_int_equal(first->without.makespan_ns, a.base.makespan_ns - 300);
    assert_int_equal(first->buys_ns, 300);
    assert_true(second->n_new > 0);
    assert_non_null(strstr(second->finding, "RAW race"));
    assert_int_equal(a.n_removable, 3);
    assert_int_equal(a.all_safe.makespan_ns, a.base.makespan_ns - 300);
    /* sorted by what the advice buys */
    assert_true(a.items[0].buys_ns >= a.items[1].buys_ns);
    /* the marks: the first syncs go, the second are replaced */
    assert_int_equal(a.mark[first->seqs[0]], CHECK_MARK_GOES);
    assert_int_equal(a.mark[second->seqs[0]], second->replacement ? CHECK_MARK_REPLACE
                                                                  : CHECK_MARK_STAYS);
    check_advice_free(&a);
    trace_free(t);
}

/* A host sync that orders a stream's write before the host's read is
 * replaced by an event recorded after the write and waited for by the
 * host before the read; the replacement checks clean and costs less
 * (200 for the record and the wait against 100 for each of four syncs). */
static void test_advise_replaces_a_host_sync_by_an_event(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "gpu", "0");
    tb_buf(t, "X", 64);
    tb_buf(t, "Z", 64);
    tb_op(t, "gpu", "produce", "w:X");
    tb_op(t, "gpu", "other", "w:Z");
    for (int k = 0; k < 4; k++)
        tb_sync(t, "host", "gpu");
    tb_op(t, "host", "consume", "r:X");
    check_advice a = advise(t);
    assert_int_equal(a.n, 1);
    const check_advice_item *it = &a.items[0];
    assert_int_equal(it->count, 4);
    assert_int_equal(it->safety, CHECK_SAFE_SOME);
    assert_int_equal(it->n_safe, 3);
    assert_int_equal(it->without_safe.makespan_ns, a.base.makespan_ns - 300);
    assert_non_null(it->replacement);
    assert_non_null(strstr(it->replacement, "event"));
    /* four syncs out, one record and one host wait in */
    assert_int_equal(it->with_replacement.makespan_ns, a.base.makespan_ns - 400 + 110);
    assert_int_equal(it->buys_ns, 300);
    assert_non_null(it->fix);
    check_advice_free(&a);
    trace_free(t);
}

/* A `sync all` that one stream's work needs is narrowed to that stream:
 * one sync (100) costs less than a record and a wait (110). */
static void test_advise_narrows_sync_all_to_the_stream_it_needs(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    tb_buf(t, "X", 64);
    tb_buf(t, "Y", 64);
    tb_op(t, "s0", "a", "w:X");
    tb_op(t, "s1", "b", "w:Y");
    tb_sync(t, "host", "all");
    tb_op(t, "host", "use", "r:X");
    check_advice a = advise(t);
    const check_advice_item *it = item(&a, "host sync all");
    assert_non_null(it);
    assert_int_equal(it->safety, CHECK_SAFE_NONE);
    assert_non_null(it->replacement);
    assert_non_null(strstr(it->replacement, "sync only s0"));
    assert_int_equal(it->with_replacement.makespan_ns, a.base.makespan_ns);
    check_advice_free(&a);
    trace_free(t);
}

/* A blocking copy from host memory: made asynchronous on the device's
 * stream, the host's next write of its source races with it (WAR, what
 * raced in llama.cpp #20463); with a host sync before that write it is
 * safe. */
static void test_advise_blocking_copy_made_asynchronous(void **state)
{
    (void)state;
    for (int synced = 0; synced < 2; synced++) {
        trace *t = tb_new();
        tb_host(t, "host");
        tb_stream(t, "gpu", "0");
        trace_add_root_buffer(t, trace_intern_cstr(t, "in"), 64, TRACE_LOC_HOST, TRACE_NONE,
                              true);
        trace_add_root_buffer(t, trace_intern_cstr(t, "d_in"), 64, TRACE_LOC_DEVICE,
                              trace_intern_cstr(t, "0"), false);
        tb_op(t, "host", "set", "w:in");
        tb_stmt(t, "host", TRACE_COPY, "upload", NULL, "r:in w:d_in");
        tb_op(t, "gpu", "kern", "r:d_in");
        if (synced)
            tb_sync(t, "host", "gpu");
        tb_op(t, "host", "set_again", "w:in");
        check_advice a = advise(t);
        const check_advice_item *it = item(&a, "host copy upload");
        assert_non_null(it);
        assert_int_equal(it->kind, TRACE_COPY);
        assert_non_null(strstr(it->what, "async on gpu"));
        if (synced) {
            assert_int_equal(it->safety, CHECK_SAFE_ALL);
            assert_int_equal(it->n_new, 0);
        } else {
            assert_int_equal(it->safety, CHECK_SAFE_NONE);
            assert_non_null(strstr(it->finding, "WAR race"));
            assert_non_null(it->replacement);
        }
        check_advice_free(&a);
        trace_free(t);
    }
}

/* A barrier's generations are its occurrences; a capture that records
 * ordering only gets no "safe". */
static void test_advise_barrier_generations_and_ordering_only(void **state)
{
    (void)state;
    for (int ordering_only = 0; ordering_only < 2; ordering_only++) {
        trace *t = tb_new();
        tb_host(t, "h0");
        tb_host(t, "h1");
        tb_buf(t, "X", 64);
        if (ordering_only)
            trace_set_meta(t, "accesses", "none");
        for (int k = 0; k < 3; k++) {
            tb_op(t, "h0", "w", "w:X");
            tb_barrier(t, "h0", "b", 2);
            tb_barrier(t, "h1", "b", 2);
            tb_op(t, "h1", "r", "r:X");
            tb_barrier(t, "h1", "b", 2);
            tb_barrier(t, "h0", "b", 2);
        }
        check_advice a = advise(t);
        const check_advice_item *it = item(&a, "barrier b");
        assert_non_null(it);
        assert_int_equal(it->count, 6);
        assert_int_equal(it->n_seqs, 12);
        if (ordering_only) {
            assert_true(a.ordering_only);
            assert_int_equal(it->safety, CHECK_SAFE_UNJUDGED);
        } else {
            assert_false(a.ordering_only);
            assert_int_equal(it->safety, CHECK_SAFE_SOME);
        }
        check_advice_free(&a);
        trace_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_advise_groups_by_the_letter_of_the_pattern),
        cmocka_unit_test(test_advise_replaces_a_host_sync_by_an_event),
        cmocka_unit_test(test_advise_narrows_sync_all_to_the_stream_it_needs),
        cmocka_unit_test(test_advise_blocking_copy_made_asynchronous),
        cmocka_unit_test(test_advise_barrier_generations_and_ordering_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
