/*
 * test_vclock.c -- the vector clocks' base-and-delta form (check/vclock.c):
 * a raise of a large shared clock is a one-entry delta, joins of clocks
 * over one base or over bases on one line stay deltas, a flat clock changed
 * in place after its line was continued is no longer taken to be below its
 * successor; and random sequences of raises, joins, shares, compactions and
 * generation-like joins of many clocks against a dense reference, with
 * every clock checked after every step (copy-on-write included), and
 * generations joined through check_vc_acc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "check/internal.h"

/* A flat clock with entries q = 0..n-1, time t + q. */
static check_vc *make_flat(uint32_t n, uint32_t t)
{
    check_vc *v = NULL;
    for (uint32_t q = 0; q < n; q++)
        assert_int_equal(check_vc_raise(&v, q, t + q), 0);
    assert_null(v->base);
    return v;
}

static void test_vclock_raise_of_large_shared_clock_is_a_delta(void **state)
{
    (void)state;
    check_vc *g = make_flat(100, 1);
    check_vc *a = check_vc_ref(g);
    assert_int_equal(check_vc_raise(&a, 7, 500), 0);
    assert_ptr_equal(a->base, g);           /* no copy of the 100 entries */
    assert_int_equal(a->n, 1);
    assert_int_equal(check_vc_get(a, 7), 500);
    assert_int_equal(check_vc_get(a, 8), 9);
    assert_int_equal(check_vc_get(g, 7), 8);   /* the shared clock is unchanged */
    assert_int_equal(check_vc_raise(&a, 9, 3), 0);  /* below the base's: nothing */
    assert_int_equal(a->n, 1);
    assert_true(check_vc_leq(g, a));
    assert_false(check_vc_leq(a, g));
    assert_int_equal(check_vc_count(a), 100);
    check_vc_unref(a);
    check_vc_unref(g);
}

static void test_vclock_join_of_deltas_over_one_base_stays_a_delta(void **state)
{
    (void)state;
    check_vc *g = make_flat(200, 1);
    check_vc *a = check_vc_ref(g), *b = check_vc_ref(g);
    assert_int_equal(check_vc_raise(&a, 3, 1000), 0);
    assert_int_equal(check_vc_raise(&b, 150, 2000), 0);
    assert_int_equal(check_vc_raise(&b, 3, 900), 0);
    check_vc *a0 = check_vc_ref(a);
    assert_int_equal(check_vc_join(&a, b), 0);
    assert_ptr_equal(a->base, g);
    assert_int_equal(a->n, 2);
    assert_int_equal(check_vc_get(a, 3), 1000);
    assert_int_equal(check_vc_get(a, 150), 2000);
    assert_int_equal(check_vc_get(a0, 150), 151);  /* copy on write */
    assert_true(check_vc_leq(b, a));
    assert_true(check_vc_leq(a0, a));
    assert_false(check_vc_leq(a, b));
    /* the base joined into a delta over it: nothing to do */
    check_vc *before = a;
    assert_int_equal(check_vc_join(&a, g), 0);
    assert_ptr_equal(a, before);
    /* joining into nothing shares */
    check_vc *c = NULL;
    assert_int_equal(check_vc_join(&c, b), 0);
    assert_ptr_equal(c, b);
    check_vc_unref(c);
    check_vc_unref(a0);
    check_vc_unref(a);
    check_vc_unref(b);
    check_vc_unref(g);
}

/* A delta over generation k meets generation k + 1 (folded from deltas over
 * k): its base becomes k + 1 without a walk of either, and a delta whose
 * entries the new generation covers becomes the generation itself. */
static void test_vclock_generations_on_one_line(void **state)
{
    (void)state;
    check_vc *g1 = make_flat(64, 1);
    check_vc *next = check_vc_ref(g1);
    for (uint32_t q = 0; q < 64; q++)
        assert_int_equal(check_vc_raise(&next, q, 100 + q), 0);
    assert_int_equal(check_vc_compact(&next), 0);
    assert_null(next->base);                    /* folded: flat */
    assert_int_equal(next->line, g1->line);     /* on g1's line, one deeper */
    assert_int_equal(next->depth, g1->depth + 1);
    check_vc *h = check_vc_ref(g1);
    assert_int_equal(check_vc_raise(&h, 5, 50), 0);
    assert_true(check_vc_leq(h, next));
    assert_int_equal(check_vc_join(&h, next), 0);
    assert_ptr_equal(h, next);                  /* everything h knew, next knows */
    check_vc *k = check_vc_ref(g1);
    assert_int_equal(check_vc_raise(&k, 70, 3), 0);  /* a queue next does not know */
    assert_int_equal(check_vc_join(&k, next), 0);
    assert_ptr_equal(k->base, next);
    assert_int_equal(k->n, 1);
    assert_int_equal(check_vc_get(k, 70), 3);
    assert_int_equal(check_vc_get(k, 5), 105);
    /* a second fold of g1 cannot continue the line: it is not above next */
    check_vc *other = check_vc_ref(g1);
    for (uint32_t q = 100; q < 140; q++)
        assert_int_equal(check_vc_raise(&other, q, 1), 0);
    assert_int_equal(check_vc_compact(&other), 0);
    assert_null(other->base);
    assert_true(other->line != next->line);
    assert_false(check_vc_leq(other, next));
    assert_false(check_vc_leq(next, other));
    check_vc_unref(other);
    check_vc_unref(k);
    check_vc_unref(h);
    check_vc_unref(next);
    check_vc_unref(g1);
}

/* A flat clock raised in place (its only reference) after a later clock
 * continued its line is above that clock now: the line must not say it is
 * below. */
static void test_vclock_raise_in_place_leaves_the_line(void **state)
{
    (void)state;
    check_vc *g = make_flat(64, 1);
    check_vc *d = check_vc_ref(g);
    for (uint32_t q = 0; q < 40; q++)
        assert_int_equal(check_vc_raise(&d, q, 1000), 0);
    assert_int_equal(check_vc_compact(&d), 0);
    assert_int_equal(d->line, g->line);
    assert_int_equal(g->refs, 1);               /* d no longer holds it */
    assert_int_equal(check_vc_raise(&g, 63, 5000), 0);   /* in place */
    assert_false(check_vc_leq(g, d));
    assert_true(check_vc_get(d, 63) < 5000);
    check_vc *j = check_vc_ref(d);
    assert_int_equal(check_vc_join(&j, g), 0);
    assert_int_equal(check_vc_get(j, 63), 5000);
    assert_int_equal(check_vc_get(j, 0), 1000);
    check_vc_unref(j);
    check_vc_unref(d);
    check_vc_unref(g);
}

/* ------------------------------------------------------------------ */
/* Random sequences against a dense reference.                        */

#define NQ 160
#define POOL 24

typedef struct slot {
    check_vc *vc;
    uint32_t t[NQ];
} slot;

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static void expect(const slot *s)
{
    uint32_t nz = 0;
    for (uint32_t q = 0; q < NQ; q++) {
        if (check_vc_get(s->vc, q) != s->t[q])
            fail_msg("queue %u: clock says %u, reference %u", q, check_vc_get(s->vc, q), s->t[q]);
        nz += s->t[q] != 0;
    }
    assert_int_equal(check_vc_count(s->vc), nz);
    if (s->vc && s->vc->base) {
        assert_null(s->vc->base->base);        /* a base is flat */
        for (uint32_t i = 0; i < s->vc->n; i++) {
            if (i)
                assert_true(s->vc->e[i - 1].queue < s->vc->e[i].queue);
            /* a delta entry is above the base's */
            assert_true(s->vc->e[i].time > check_vc_get(s->vc->base, s->vc->e[i].queue));
        }
    }
}

static bool ref_leq(const slot *a, const slot *b)
{
    for (uint32_t q = 0; q < NQ; q++)
        if (a->t[q] > b->t[q])
            return false;
    return true;
}

static void set(slot *dst, const slot *src)
{
    check_vc *v = check_vc_ref(src->vc);
    check_vc_unref(dst->vc);
    dst->vc = v;
    memcpy(dst->t, src->t, sizeof dst->t);
}

/* A queue: mostly from a small set, sometimes any. */
static uint32_t pick_q(void)
{
    return rnd(4) ? rnd(NQ) : rnd(8);
}

static void test_vclock_random_against_dense_reference(void **state)
{
    (void)state;
    static slot pool[POOL];
    memset(pool, 0, sizeof pool);
    rng = 0x7c10c4ULL;
    uint32_t clock = 1, deltas = 0, ordered_joins = 0, gens = 0, on_line = 0, accs = 0;
    for (int step = 0; step < 40000; step++) {
        slot *a = &pool[rnd(POOL)], *b = &pool[rnd(POOL)];
        int op = rnd(100);
        if (op < 35) {
            uint32_t q = pick_q(), t = clock += rnd(3);
            if (rnd(3) == 0)
                t = rnd(clock + 1);     /* often below what is there */
            assert_int_equal(check_vc_raise(&a->vc, q, t), 0);
            if (t > a->t[q])
                a->t[q] = t;
        } else if (op < 65) {
            bool ordered = a->vc && b->vc && a->vc->base && b->vc->base &&
                           a->vc->base->line == b->vc->base->line;
            assert_int_equal(check_vc_join(&a->vc, b->vc), 0);
            for (uint32_t q = 0; q < NQ; q++)
                if (b->t[q] > a->t[q])
                    a->t[q] = b->t[q];
            ordered_joins += ordered;
        } else if (op < 80) {
            set(a, b);
        } else if (op < 84) {
            assert_int_equal(check_vc_compact(&a->vc), 0);
        } else if (op < 88) {
            check_vc_unref(a->vc);
            a->vc = NULL;
            memset(a->t, 0, sizeof a->t);
        } else if (op < 92) {
            /* a generation: several clocks joined, each member raised, the
             * result compacted and shared by every member */
            static slot joined;
            int members[POOL], n = 2 + rnd(POOL - 2);
            bool many = rnd(2);     /* through check_vc_acc, or one by one */
            check_vc_acc acc;
            memset(&joined, 0, sizeof joined);
            if (many) {
                /* sometimes from a start clock, as after a collective's accesses */
                slot *s0 = &pool[rnd(POOL)];
                if (rnd(2))
                    set(&joined, s0);
                check_vc_acc_init(&acc, joined.vc);
            }
            for (int i = 0; i < n; i++) {
                members[i] = rnd(POOL);
                slot *m = &pool[members[i]];
                uint32_t q = (uint32_t)members[i] * 5 % NQ, t = clock++;
                if (many) {
                    check_vc_acc_join(&acc, m->vc);
                    check_vc_acc_raise(&acc, q, t);
                    uint32_t q2 = pick_q(), t2 = rnd(clock + 1);    /* often below */
                    check_vc_acc_raise(&acc, q2, t2);
                    if (t2 > joined.t[q2])
                        joined.t[q2] = t2;
                } else {
                    assert_int_equal(check_vc_join(&joined.vc, m->vc), 0);
                    assert_int_equal(check_vc_raise(&joined.vc, q, t), 0);
                }
                for (uint32_t k = 0; k < NQ; k++)
                    if (m->t[k] > joined.t[k])
                        joined.t[k] = m->t[k];
                if (t > joined.t[q])
                    joined.t[q] = t;
            }
            if (many) {
                check_vc_unref(joined.vc);
                assert_int_equal(check_vc_acc_finish(&acc, &joined.vc), 0);
                accs++;
            }
            expect(&joined);
            assert_int_equal(check_vc_compact(&joined.vc), 0);
            expect(&joined);
            for (int i = 0; i < n; i++)
                set(&pool[members[i]], &joined);
            check_vc_unref(joined.vc);
            gens++;
        } else {
            assert_int_equal(check_vc_leq(a->vc, b->vc), ref_leq(a, b));
            assert_int_equal(check_vc_equal(a->vc, b->vc), ref_leq(a, b) && ref_leq(b, a));
        }
        expect(a);
        deltas += a->vc && a->vc->base;
        /* on a flat clock that continues another's line, or a delta over one */
        on_line += a->vc && (a->vc->base ? a->vc->base : a->vc)->depth > 0;
        if (step % 64 == 0)
            for (int i = 0; i < POOL; i++)
                expect(&pool[i]);   /* shared clocks did not change */
    }
    for (int i = 0; i < POOL; i++)
        check_vc_unref(pool[i].vc);
    fprintf(stderr, "vclock: %u steps on a delta, %u joins of deltas on one line, %u generations, "
                    "%u steps on a continued line, %u joins of many\n",
            deltas, ordered_joins, gens, on_line, accs);
    /* the fast paths were exercised, not only the flat ones */
    assert_true(deltas > 5000);
    assert_true(ordered_joins > 1000);
    assert_true(gens > 1000);
    assert_true(on_line > 1000);
    assert_true(accs > 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vclock_raise_of_large_shared_clock_is_a_delta),
        cmocka_unit_test(test_vclock_join_of_deltas_over_one_base_stays_a_delta),
        cmocka_unit_test(test_vclock_generations_on_one_line),
        cmocka_unit_test(test_vclock_raise_in_place_leaves_the_line),
        cmocka_unit_test(test_vclock_random_against_dense_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
