/* test_shadow.c -- the byte-range shadow map: splitting, merging, gaps,
 * overlap queries, copy-on-write; and the sparse vector clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
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

/* ------------------------------------------------------------------ */
/* Lifetime marks (ruling 2) against a dense reference.                */

#define LQ 4                    /* queues */
#define LEV 200                 /* events at most */

typedef struct life_model {
    uint32_t vc[LQ][LQ];        /* dense clocks: vc[q][r] = r's statements q knows */
    struct {
        check_site s;
        uint32_t vc[LQ];        /* the event's clock when it ran */
    } ev[LEV];
    int n;
    const uint32_t *knows;      /* the clock of the access being judged */
    uint32_t self;
} life_model;

static uint32_t model_knows(void *ctx, uint32_t q)
{
    life_model *m = ctx;
    return q == m->self ? UINT32_MAX : m->knows[q];
}

/* Queue q runs a free or alloc of the cell's bytes. */
static void model_event(life_model *m, check_cell *c, uint32_t q, trace_kind k)
{
    m->vc[q][q]++;
    check_site s = { .seq = (uint64_t)m->n, .queue = q, .time = m->vc[q][q],
                     .kind = (uint8_t)k };
    m->knows = m->vc[q];
    m->self = q;
    if (k == TRACE_FREE)
        assert_int_equal(check_cell_mark_free(c, &s), 0);
    else
        assert_int_equal(check_cell_mark_alloc(c, &s,
                                               c->life ? check_life_covers(c->life, model_knows, m)
                                                       : 0),
                         0);
    m->ev[m->n].s = s;
    memcpy(m->ev[m->n].vc, m->vc[q], sizeof m->vc[q]);
    m->n++;
}

/* Event i happens before (or is) a statement whose clock is vc. */
static bool model_hb(const life_model *m, int i, const uint32_t *vc)
{
    const check_site *s = &m->ev[i].s;
    return vc[s->queue] >= s->time;
}

/* Ruling 2 by brute force for an access of queue q: the latest free (in
 * the file) it is ordered after with no alloc A between (F HB A HB it). */
static int model_uaf(const life_model *m, uint32_t q)
{
    int best = -1;
    for (int f = 0; f < m->n; f++) {
        if (m->ev[f].s.kind != TRACE_FREE || !model_hb(m, f, m->vc[q]))
            continue;
        bool covered = false;
        for (int a = 0; a < m->n && !covered; a++)
            covered = m->ev[a].s.kind == TRACE_ALLOC && model_hb(m, a, m->vc[q]) &&
                      model_hb(m, f, m->ev[a].vc);
        if (!covered)
            best = f;
    }
    return best;
}

static uint64_t life_rng;
static uint32_t life_rnd(uint32_t n)
{
    life_rng ^= life_rng << 13;
    life_rng ^= life_rng >> 7;
    life_rng ^= life_rng << 17;
    return (uint32_t)(life_rng % n);
}

/* Judges an access of queue q both ways: the same verdict and the same
 * free named, unless the marks say they cannot judge it. Returns whether
 * they could. */
static bool model_judge(life_model *m, const check_cell *c, uint32_t q)
{
    int want = model_uaf(m, q);
    if (!c->life) {
        assert_int_equal(want, -1);
        return true;
    }
    m->knows = m->vc[q];
    m->self = q;
    bool unjudged = false;
    const check_site *got = check_life_uaf(c->life, model_knows, m, &unjudged);
    if (unjudged) {
        assert_null(got);
        return false;
    }
    if (want < 0)
        assert_null(got);
    else {
        assert_non_null(got);
        assert_int_equal(got->seq, (uint64_t)want);
    }
    return true;
}

/* Any number of frees and allocs on any queues, with random syncs between
 * the queues: where the marks judge, they judge as the dense reference
 * does; where they do not, they say so. */
static void test_shadow_life_matches_dense_reference(void **state)
{
    (void)state;
    life_rng = 0x11fe5eedULL;
    static life_model m;
    int judged = 0, unjudged = 0, uaf = 0;
    for (int round = 0; round < 400; round++) {
        memset(&m, 0, sizeof m);
        check_cell c;
        check_cell_clear(&c);
        int steps = 20 + (int)life_rnd(LEV - 20);
        for (int k = 0; k < steps && m.n < LEV; k++) {
            uint32_t q = life_rnd(LQ), r = life_rnd(LQ);
            switch (life_rnd(4)) {
            case 0:             /* q learns r's clock */
                for (int i = 0; i < LQ; i++)
                    if (m.vc[r][i] > m.vc[q][i])
                        m.vc[q][i] = m.vc[r][i];
                break;
            case 1:
                model_event(&m, &c, q, life_rnd(2) ? TRACE_FREE : TRACE_ALLOC);
                break;
            default:
                if (model_judge(&m, &c, q)) {
                    judged++;
                    uaf += model_uaf(&m, q) >= 0;
                } else {
                    unjudged++;
                }
                break;
            }
        }
        check_cell_release(&c);
    }
    fprintf(stderr, "life: %d accesses judged (%d uses after free), %d not judged\n", judged, uaf,
            unjudged);
    assert_true(judged > 10000 && uaf > 1000);
}

/* The users' shapes: one queue frees and allocs in a loop (a host thread,
 * or a stream-ordered allocator), others use the bytes after syncing with
 * it. Every access is judged, however long the loop, and the shift of a
 * full set of marks keeps each alloc's frees (issue 30: nine pairs and a
 * read were a use after free). */
static void test_shadow_life_loop_always_judged(void **state)
{
    (void)state;
    life_rng = 0x100b5ULL;
    static life_model m;
    memset(&m, 0, sizeof m);
    check_cell c;
    check_cell_clear(&c);
    for (int i = 0; i < LEV / 2 - 1; i++) {
        model_event(&m, &c, 0, TRACE_FREE);
        model_event(&m, &c, 0, TRACE_ALLOC);
        assert_true(model_judge(&m, &c, 0));        /* the allocating queue */
        assert_int_equal(model_uaf(&m, 0), -1);
        uint32_t q = 1 + life_rnd(LQ - 1);          /* a user, after a sync */
        memcpy(m.vc[q], m.vc[0], sizeof m.vc[0]);
        assert_true(model_judge(&m, &c, q));
        assert_int_equal(model_uaf(&m, q), -1);
    }
    assert_int_equal(c.life->n, CHECK_LIFE_MAX);
    /* a free, then a use on the same queue: a use after free, judged */
    model_event(&m, &c, 0, TRACE_FREE);
    assert_true(model_judge(&m, &c, 0));
    assert_int_equal(model_uaf(&m, 0), m.n - 1);
    check_cell_release(&c);
}

/* A queue that last synced with the allocating one many pairs ago knows it
 * at a time whose marks are forgotten: not judged, never a false finding. */
static void test_shadow_life_stale_clock_not_judged(void **state)
{
    (void)state;
    static life_model m;
    memset(&m, 0, sizeof m);
    check_cell c;
    check_cell_clear(&c);
    model_event(&m, &c, 0, TRACE_FREE);
    memcpy(m.vc[1], m.vc[0], sizeof m.vc[0]);       /* q1 sees the first free */
    for (int i = 0; i < CHECK_LIFE_MAX; i++) {
        model_event(&m, &c, 0, TRACE_ALLOC);
        model_event(&m, &c, 0, TRACE_FREE);
    }
    bool unjudged = false;
    m.knows = m.vc[1];
    m.self = 1;
    assert_null(check_life_uaf(c.life, model_knows, &m, &unjudged));
    assert_true(unjudged);
    assert_true(model_uaf(&m, 1) == 0);             /* it was one: counted, not missed */
    check_cell_release(&c);
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
        cmocka_unit_test(test_shadow_life_matches_dense_reference),
        cmocka_unit_test(test_shadow_life_loop_always_judged),
        cmocka_unit_test(test_shadow_life_stale_clock_not_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
