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
    assert_int_equal(check_shadow_seg(s, 0)->hi, 40);
    assert_int_equal(check_shadow_seg(s, 1)->c.w.seq, 2);
    assert_int_equal(check_shadow_seg(s, 2)->lo, 60);
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
    assert_int_equal(check_shadow_seg(s, 0)->lo, 0);
    assert_int_equal(check_shadow_seg(s, 0)->hi, 30);
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
    assert_int_equal(check_shadow_seg(s, 0)->lo, 5);
    assert_int_equal(check_shadow_seg(s, 0)->hi, 35);
    assert_int_equal(check_shadow_seg(s, 1)->lo, 35);
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
    assert_int_equal(check_shadow_seg(snap, 0)->c.w.seq, 1);
    assert_false(check_shadow_equal(s, snap));
    check_shadow_unref(snap);
    check_shadow_unref(s);
}

/* The dense reference: one write site per byte (0: empty). */
#define DENSE_SIZE 6000

typedef struct dense_ref {
    uint64_t w[DENSE_SIZE];
    uint64_t set;               /* what the visitor writes; 0 clears */
    uint64_t next_lo;           /* where the next piece must start */
} dense_ref;

/* Checks that each piece starts where the last ended and that its old
 * state is the reference's for every byte, then writes (or clears) it. */
static void dense_visit(void *ctx, uint64_t lo, uint64_t hi, check_cell *c)
{
    dense_ref *d = ctx;
    assert_int_equal(lo, d->next_lo);
    d->next_lo = hi;
    uint64_t old = c->w.seq == TRACE_NO_SEQ ? 0 : c->w.seq;
    for (uint64_t b = lo; b < hi; b++)
        assert_int_equal(d->w[b], old);
    check_cell_release(c);
    check_cell_clear(c);
    if (d->set)
        c->w = (check_site){ .seq = d->set, .queue = 0, .time = (uint32_t)d->set };
}

/* s is sorted, merged, chunked within bounds and equal to w[] byte by byte. */
static void assert_matches(const check_shadow *s, const uint64_t *w)
{
    uint64_t at = 0;
    uint32_t n = 0;
    for (uint32_t k = 0; k < s->n_chunks; k++) {
        assert_true(s->chunks[k].n >= 1);
        assert_true(s->chunks[k].n <= CHECK_CHUNK_MAX);
        assert_int_equal(s->chunks[k].hi, s->chunks[k].segs[s->chunks[k].n - 1].hi);
        n += s->chunks[k].n;
    }
    assert_int_equal(n, check_shadow_segments(s));
    const check_seg *prev = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const check_seg *g = check_shadow_seg(s, i);
        assert_true(g->lo < g->hi);
        assert_true(g->lo >= at);
        assert_true(g->c.w.seq != TRACE_NO_SEQ);
        if (prev && prev->hi == g->lo)
            assert_true(prev->c.w.seq != g->c.w.seq);   /* equal neighbours merge */
        for (; at < g->lo; at++)
            assert_int_equal(w[at], 0);
        for (; at < g->hi; at++)
            assert_int_equal(w[at], g->c.w.seq);
        prev = g;
    }
    for (; at < DENSE_SIZE; at++)
        assert_int_equal(w[at], 0);
}

/* Thousands of random writes and clears of small and large ranges (so that
 * chunks fill, split, join and empty) against the dense reference; a
 * snapshot taken half way keeps its own state. */
static void test_shadow_chunks_match_dense_reference(void **state)
{
    (void)state;
    static dense_ref d, snap_ref;
    memset(&d, 0, sizeof d);
    check_shadow *s = check_shadow_new(), *snap = NULL;
    uint64_t x = 12345;
    uint32_t most = 0;
    for (int step = 0; step < 6000; step++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = x >> 33;
        /* on an 8-byte grid, so that ranges often meet end to end */
        uint64_t len = 8 * (r % 16 == 0 ? 1 + (r >> 4) % 400 : 1 + (r >> 4) % 5);
        uint64_t lo = 8 * ((r >> 12) % (DENSE_SIZE / 8));
        uint64_t hi = lo + len > DENSE_SIZE ? DENSE_SIZE : lo + len;
        d.set = (r >> 24) % 11 == 0 ? 0 : 1 + (r >> 28) % 3;
        d.next_lo = lo;
        assert_int_equal(check_shadow_update(&s, lo, hi, dense_visit, &d), 0);
        assert_int_equal(d.next_lo, hi);
        for (uint64_t b = lo; b < hi; b++)
            d.w[b] = d.set;
        assert_matches(s, d.w);
        if (check_shadow_segments(s) > most)
            most = check_shadow_segments(s);
        if (step == 3000) {
            snap = check_shadow_ref(s);
            snap_ref = d;
        }
    }
    assert_true(most > 4 * CHECK_CHUNK_MAX);      /* many chunks were exercised */
    assert_matches(snap, snap_ref.w);
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
        cmocka_unit_test(test_shadow_chunks_match_dense_reference),
        cmocka_unit_test(test_shadow_reads_per_queue),
        cmocka_unit_test(test_shadow_vclock_sparse_join_and_cow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
