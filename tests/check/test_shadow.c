/* test_shadow.c -- the byte-range shadow map: splitting, merging, gaps,
 * overlap queries, copy-on-write; and the sparse vector clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "check/internal.h"

/* Visitor that records the pieces it sees and writes site `w`. */
typedef struct visit_log {
    uint64_t lo[16], hi[16];
    uint64_t old_w[16];
    int n;
    uint64_t w;
} visit_log;

static void write_visit(void *ctx, uint64_t lo, uint64_t hi, check_cell *c)
{
    visit_log *v = ctx;
    if (v->n < 16) {
        v->lo[v->n] = lo;
        v->hi[v->n] = hi;
        v->old_w[v->n] = c->w.seq;
        v->n++;
    }
    check_cell_release(c);
    c->w = (check_site){ .seq = v->w, .queue = 0, .time = (uint32_t)v->w };
}

static void do_write(check_shadow **s, uint64_t lo, uint64_t hi, uint64_t w, visit_log *log)
{
    memset(log, 0, sizeof *log);
    log->w = w;
    assert_int_equal(check_shadow_update(s, lo, hi, write_visit, log), 0);
}

static void test_shadow_whole_buffer_stays_one_segment(void **state)
{
    (void)state;
    check_shadow *s = check_shadow_new();
    visit_log log;
    for (uint64_t i = 0; i < 100; i++)
        do_write(&s, 0, 4096, 7, &log);
    assert_int_equal(check_shadow_segments(s), 1);
    check_shadow_unref(s);
}

static void test_shadow_split_in_the_middle(void **state)
{
    (void)state;
    check_shadow *s = check_shadow_new();
    visit_log log;
    do_write(&s, 0, 100, 1, &log);
    do_write(&s, 40, 60, 2, &log);
    assert_int_equal(check_shadow_segments(s), 3);
    assert_int_equal(log.n, 1);
    assert_int_equal(log.lo[0], 40);
    assert_int_equal(log.hi[0], 60);
    assert_int_equal(log.old_w[0], 1);
    assert_int_equal(s->segs[0].hi, 40);
    assert_int_equal(s->segs[1].c.w.seq, 2);
    assert_int_equal(s->segs[2].lo, 60);
    check_shadow_unref(s);
}

static void test_shadow_equal_neighbours_merge(void **state)
{
    (void)state;
    check_shadow *s = check_shadow_new();
    visit_log log;
    do_write(&s, 0, 10, 1, &log);
    do_write(&s, 20, 30, 1, &log);
    assert_int_equal(check_shadow_segments(s), 2);
    do_write(&s, 10, 20, 1, &log);     /* fills the gap with the same state */
    assert_int_equal(check_shadow_segments(s), 1);
    assert_int_equal(s->segs[0].lo, 0);
    assert_int_equal(s->segs[0].hi, 30);
    check_shadow_unref(s);
}

static void test_shadow_overlap_visits_pieces_and_gaps(void **state)
{
    (void)state;
    check_shadow *s = check_shadow_new();
    visit_log log;
    do_write(&s, 10, 20, 1, &log);
    do_write(&s, 30, 40, 2, &log);
    do_write(&s, 5, 35, 3, &log);
    /* pieces: gap [5,10), [10,20) w1, gap [20,30), [30,35) w2 */
    assert_int_equal(log.n, 4);
    uint64_t lo[] = { 5, 10, 20, 30 }, hi[] = { 10, 20, 30, 35 };
    uint64_t w[] = { TRACE_NO_SEQ, 1, TRACE_NO_SEQ, 2 };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(log.lo[i], lo[i]);
        assert_int_equal(log.hi[i], hi[i]);
        assert_int_equal(log.old_w[i], w[i]);
    }
    /* [5,35) w3 merged into one, [35,40) w2 */
    assert_int_equal(check_shadow_segments(s), 2);
    assert_int_equal(s->segs[0].lo, 5);
    assert_int_equal(s->segs[0].hi, 35);
    assert_int_equal(s->segs[1].lo, 35);
    check_shadow_unref(s);
}

static void test_shadow_copy_on_write_keeps_snapshot(void **state)
{
    (void)state;
    check_shadow *s = check_shadow_new();
    visit_log log;
    do_write(&s, 0, 100, 1, &log);
    check_shadow *snap = check_shadow_ref(s);
    do_write(&s, 0, 50, 2, &log);
    assert_ptr_not_equal(s, snap);
    assert_int_equal(check_shadow_segments(snap), 1);
    assert_int_equal(snap->segs[0].c.w.seq, 1);
    assert_false(check_shadow_equal(s, snap));
    check_shadow_unref(snap);
    check_shadow_unref(s);
}

static void test_shadow_reads_per_queue(void **state)
{
    (void)state;
    check_cell c;
    check_cell_clear(&c);
    check_site a = { .seq = 1, .queue = 0, .time = 1 }, b = { .seq = 2, .queue = 1, .time = 1 },
               a2 = { .seq = 3, .queue = 0, .time = 2 };
    assert_int_equal(check_cell_add_read(&c, &a), 0);
    assert_int_equal(c.n_reads, 1);
    assert_int_equal(check_cell_add_read(&c, &b), 0);
    assert_int_equal(c.n_reads, 2);
    assert_int_equal(check_cell_add_read(&c, &a2), 0);   /* replaces queue 0's read */
    assert_int_equal(c.n_reads, 2);
    assert_int_equal(check_cell_read(&c, 0)->seq, 3);
    check_cell_release(&c);
}

static void test_shadow_vclock_sparse_join_and_cow(void **state)
{
    (void)state;
    check_vc *a = NULL, *b = NULL;
    assert_int_equal(check_vc_raise(&a, 5, 3), 0);
    assert_int_equal(check_vc_raise(&a, 1000, 7), 0);
    assert_int_equal(check_vc_raise(&b, 5, 9), 0);
    assert_int_equal(check_vc_raise(&b, 2, 1), 0);
    check_vc *shared = check_vc_ref(a);
    assert_int_equal(check_vc_join(&a, b), 0);
    assert_ptr_not_equal(a, shared);              /* copied, not changed in place */
    assert_int_equal(check_vc_get(shared, 5), 3);
    assert_int_equal(check_vc_get(a, 5), 9);
    assert_int_equal(check_vc_get(a, 2), 1);
    assert_int_equal(check_vc_get(a, 1000), 7);
    assert_int_equal(check_vc_get(a, 999), 0);
    assert_int_equal(check_vc_count(a), 3);
    assert_true(check_vc_leq(b, a));
    assert_false(check_vc_leq(a, b));
    check_vc *before = a;
    assert_int_equal(check_vc_join(&a, b), 0);     /* already below: no copy */
    assert_ptr_equal(a, before);
    check_vc_unref(shared);
    check_vc_unref(a);
    check_vc_unref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shadow_whole_buffer_stays_one_segment),
        cmocka_unit_test(test_shadow_split_in_the_middle),
        cmocka_unit_test(test_shadow_equal_neighbours_merge),
        cmocka_unit_test(test_shadow_overlap_visits_pieces_and_gaps),
        cmocka_unit_test(test_shadow_copy_on_write_keeps_snapshot),
        cmocka_unit_test(test_shadow_reads_per_queue),
        cmocka_unit_test(test_shadow_vclock_sparse_join_and_cow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
