/* test_ring.c -- nvFuser's host-IR ring pipeline (sched/ring.c) under the
 * checker: the reproductions of issue 12, item 3, at several sizes. The
 * correct exchange and the one that skips its barrier on uniform cache hits
 * are clean; uneven cache hits hang every rank; no barrier at all races on
 * the key-value store; a semaphore re-armed before the copy races on the
 * slices. Minimising the clean traces removes nothing that makes a race. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_test_util.h"
#include "sched/sched.h"

/* Shapes: ranks, streams, iterations, chunks. */
static const uint32_t shapes[][4] = {
    { 2, 1, 2, 1 }, { 2, 2, 3, 2 }, { 3, 2, 3, 1 }, { 4, 3, 2, 2 }, { 5, 8, 2, 1 },
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static trace *ring(const uint32_t *shape, sched_ring_variant v)
{
    sched_ring_opts o = { .ranks = shape[0], .streams = shape[1], .iters = shape[2],
                          .chunks = shape[3], .chunk_bytes = 256, .variant = v };
    trace *t = NULL;
    trace_error err = { 0 };
    if (sched_ring_generate(&o, &t, &err) != 0)
        fail_msg("generate: %s", err.msg);
    return t;
}

static const char *label_of(const trace *t, const trace_stmt_ref *r)
{
    return r->label != TRACE_NONE ? trace_str(t, r->label) : "";
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_ring_correct_and_uniform_hits_are_clean(void **state)
{
    (void)state;
    sched_ring_variant clean[] = { SCHED_RING_CORRECT, SCHED_RING_UNIFORM_HITS };
    for (size_t i = 0; i < N_SHAPES; i++)
        for (size_t v = 0; v < 2; v++) {
            trace *t = ring(shapes[i], clean[v]);
            check_report *rep = tb_check(t);
            if (check_report_count(rep) != 0)
                fail_msg("%s at shape %zu: %zu findings", sched_ring_variant_str(clean[v]), i,
                         check_report_count(rep));
            check_report_free(rep);
            trace_free(t);
        }
}

/* The barrier taken only on a miss, and rank 0 misses alone: one hang that
 * names every rank (rank 0 at the barrier, the others behind it). */
static void test_ring_uneven_hits_hang_every_rank(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_SHAPES; i++) {
        trace *t = ring(shapes[i], SCHED_RING_UNEVEN_HITS);
        check_report *rep = tb_check(t);
        assert_int_equal(check_report_count(rep), 1);
        const trace_finding *f = check_report_finding(rep, 0);
        assert_int_equal(f->kind, TRACE_FINDING_HANG);
        for (uint32_t r = 0; r < shapes[i][0]; r++) {
            char name[16];
            snprintf(name, sizeof name, "rank%u", r);
            uint32_t q = tb_q(t, name);
            bool named = false;
            for (uint32_t p = 0; p < f->n_parts; p++)
                if (f->parts[p].role == TRACE_PART_BLOCKED && f->parts[p].queue == q) {
                    named = true;
                    if (r == 0)
                        assert_non_null(strstr(f->parts[p].text, "barrier ipc_exchange"));
                }
            if (!named)
                fail_msg("shape %zu: the hang does not name %s", i, name);
        }
        check_report_free(rep);
        trace_free(t);
    }
}

/* No barrier: each rank deletes its key while its neighbours may still be
 * reading it (WAR on the store), and nothing else. */
static void test_ring_no_barrier_races_on_the_store(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_SHAPES; i++) {
        trace *t = ring(shapes[i], SCHED_RING_NO_BARRIER);
        check_report *rep = tb_check(t);
        size_t n = check_report_count(rep);
        assert_true(n >= shapes[i][0]);     /* every rank's key at least once */
        uint32_t store = trace_find_buffer(t, "kv_store", 8);
        for (size_t k = 0; k < n; k++) {
            const trace_finding *f = check_report_finding(rep, k);
            assert_int_equal(f->kind, TRACE_FINDING_RACE);
            assert_int_equal(f->race_type, TRACE_RACE_WAR);
            assert_int_equal(f->root, store);
            assert_true(starts(label_of(t, &f->first), "get_handle_"));
            assert_true(starts(label_of(t, &f->second), "delete_key_"));
        }
        check_report_free(rep);
        trace_free(t);
    }
}

/* The receiver sets ready before its copy: the sender's next write of the
 * slice races with that copy (WAR on an ag buffer), and nothing else. */
static void test_ring_early_rearm_races_on_the_slices(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_SHAPES; i++) {
        trace *t = ring(shapes[i], SCHED_RING_EARLY_REARM);
        check_report *rep = tb_check(t);
        size_t n = check_report_count(rep);
        assert_true(n > 0);
        for (size_t k = 0; k < n; k++) {
            const trace_finding *f = check_report_finding(rep, k);
            assert_int_equal(f->kind, TRACE_FINDING_RACE);
            assert_int_equal(f->race_type, TRACE_RACE_WAR);
            assert_true(starts(trace_str(t, t->buffers[f->root].name), "ag"));
            assert_true(starts(label_of(t, &f->first), "get_"));
            const char *second = label_of(t, &f->second);
            assert_true(starts(second, "input_") || starts(second, "get_"));
        }
        check_report_free(rep);
        trace_free(t);
    }
}

/* Minimising the clean traces: whatever it removes, the trace without it
 * still checks clean, and no recvPost wait (await of an rx semaphore) goes:
 * every copy needs its sender's in-use. */
static void test_ring_minimize_removes_nothing_that_races(void **state)
{
    (void)state;
    sched_ring_variant clean[] = { SCHED_RING_CORRECT, SCHED_RING_UNIFORM_HITS };
    for (size_t v = 0; v < 2; v++) {
        trace *t = ring(shapes[2], clean[v]);
        check_min_result res;
        trace_error err = { 0 };
        assert_int_equal(check_minimize(t, NULL, &res, &err), 0);
        for (size_t k = 0; k < res.n_removed; k++) {
            trace_stmt s;
            trace_stmt_at(t, res.removed[k].seq, &s);
            if (s.kind == TRACE_AWAIT && s.sem) {
                const char *name = trace_str(t, s.object);
                assert_null(strstr(name, ".rx"));
            }
        }
        trace *m = check_trace_filter(t, res.keep);
        assert_non_null(m);
        check_report *rep = tb_check(m);
        assert_int_equal(check_report_count(rep), 0);
        check_report_free(rep);
        trace_free(m);
        check_min_result_free(&res);
        trace_free(t);
    }
}

static void test_ring_options_out_of_range(void **state)
{
    (void)state;
    sched_ring_opts o = { .ranks = 1, .streams = 1, .iters = 1, .chunks = 1, .chunk_bytes = 8 };
    trace *t = NULL;
    trace_error err = { 0 };
    assert_int_equal(sched_ring_generate(&o, &t, &err), -1);
    assert_int_equal(err.status, TRACE_EUSAGE);
    assert_non_null(strstr(err.msg, "--ranks"));
    o.ranks = 2;
    o.variant = SCHED_RING_UNEVEN_HITS;
    assert_int_equal(sched_ring_generate(&o, &t, &err), -1);
    assert_non_null(strstr(err.msg, "--iters 2 or more"));
    assert_null(t);
    for (int v = 0; v < SCHED_RING_VARIANT_COUNT; v++)
        assert_int_equal(sched_ring_variant_parse(sched_ring_variant_str((sched_ring_variant)v)), v);
    assert_int_equal(sched_ring_variant_parse("nope"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_correct_and_uniform_hits_are_clean),
        cmocka_unit_test(test_ring_uneven_hits_hang_every_rank),
        cmocka_unit_test(test_ring_no_barrier_races_on_the_store),
        cmocka_unit_test(test_ring_early_rearm_races_on_the_slices),
        cmocka_unit_test(test_ring_minimize_removes_nothing_that_races),
        cmocka_unit_test(test_ring_options_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
