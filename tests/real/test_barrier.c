/*
 * test_barrier.c -- the pool's barrier policies: every policy orders each
 * thread's writes before a generation against every thread's reads after
 * it, elects one serial thread per generation, and the hybrid budget
 * adapts (shrinks when spinning fails, starts and stays low when the pool
 * is oversubscribed). Runs under ThreadSanitizer (label `threads`).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "real/real.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 300
#define MAX_T 8

typedef struct shared {
    real_barrier *b;
    int n;
    int slots[MAX_T];           /* plain ints: the barrier must order them */
    _Atomic int serial[ROUNDS];
    _Atomic int errors;
} shared;

typedef struct targ { shared *s; int ith; } targ;

static void *phase_thread(void *p)
{
    targ *a = p;
    shared *s = a->s;
    for (int r = 0; r < ROUNDS; r++) {
        s->slots[a->ith] = r;
        if (real_barrier_wait(s->b))
            atomic_fetch_add(&s->serial[r], 1);
        for (int i = 0; i < s->n; i++)
            if (s->slots[i] != r)
                atomic_fetch_add(&s->errors, 1);
        real_barrier_wait(s->b);    /* nobody writes round r+1 before all read round r */
    }
    return NULL;
}

static void run_phases(real_barrier_kind kind, int n)
{
    shared *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->b = real_barrier_new(kind, n);
    assert_non_null(s->b);
    s->n = n;
    pthread_t th[MAX_T];
    targ args[MAX_T];
    for (int i = 1; i < n; i++) {
        args[i] = (targ){ s, i };
        assert_int_equal(pthread_create(&th[i], NULL, phase_thread, &args[i]), 0);
    }
    args[0] = (targ){ s, 0 };
    phase_thread(&args[0]);
    for (int i = 1; i < n; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&s->errors), 0);
    for (int r = 0; r < ROUNDS; r++)
        assert_int_equal(atomic_load(&s->serial[r]), 1);
    real_barrier_free(s->b);
    free(s);
}

static void test_barrier_spin_orders_phases(void **state)
{
    (void)state;
    /* Oversubscribed spin costs a scheduler quantum per crossing: stay within the CPUs. */
    for (int n = 1; n <= real_cpus_allowed() && n <= 4; n++)
        run_phases(REAL_BARRIER_SPIN, n);
}

static void test_barrier_futex_orders_phases(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n++)
        run_phases(REAL_BARRIER_FUTEX, n);
}

static void test_barrier_hybrid_orders_phases(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n++)
        run_phases(REAL_BARRIER_HYBRID, n);
    run_phases(REAL_BARRIER_HYBRID, MAX_T);     /* oversubscribed on small machines */
}

static void test_barrier_pthread_orders_phases(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n++)
        run_phases(REAL_BARRIER_PTHREAD, n);
}

static void test_barrier_parse_names(void **state)
{
    (void)state;
    for (int k = 0; k < REAL_BARRIER_COUNT; k++)
        assert_int_equal(real_barrier_parse(real_barrier_str((real_barrier_kind)k)), k);
    assert_int_equal(real_barrier_parse("hybrid"), REAL_BARRIER_HYBRID);
    assert_int_equal(real_barrier_parse("sleepy"), -1);
    assert_null(real_barrier_new(REAL_BARRIER_SPIN, 0));
}

typedef struct late_arg { real_barrier *b; int rounds; } late_arg;

static void *early_thread(void *p)
{
    late_arg *a = p;
    for (int r = 0; r < a->rounds; r++)
        real_barrier_wait(a->b);
    return NULL;
}

/* The other thread arrives 5 ms late each time: far longer than the
 * budget's spin, so every spin fails and the budget halves. */
static void test_barrier_hybrid_budget_shrinks_when_spin_fails(void **state)
{
    (void)state;
    real_barrier *b = real_barrier_new(REAL_BARRIER_HYBRID, 2);
    assert_non_null(b);
    uint32_t before = real_barrier_spin_budget(b);
    late_arg a = { b, 4 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, early_thread, &a), 0);
    for (int r = 0; r < 4; r++) {
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
        real_barrier_wait(b);
    }
    pthread_join(th, NULL);
    assert_true(real_barrier_spin_budget(b) < before);
    real_barrier_free(b);
}

static void test_barrier_hybrid_oversubscribed_budget_is_low(void **state)
{
    (void)state;
    int n = real_cpus_allowed() + 1;
    real_barrier *b = real_barrier_new(REAL_BARRIER_HYBRID, n);
    real_barrier *c = real_barrier_new(REAL_BARRIER_HYBRID, 1);
    assert_non_null(b);
    assert_true(real_barrier_oversubscribed(b));
    assert_false(real_barrier_oversubscribed(c));
    assert_true(real_barrier_spin_budget(b) < real_barrier_spin_budget(c));
    assert_true(real_barrier_spin_budget(b) <= 256);
    real_barrier_free(b);
    real_barrier_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_spin_orders_phases),
        cmocka_unit_test(test_barrier_futex_orders_phases),
        cmocka_unit_test(test_barrier_hybrid_orders_phases),
        cmocka_unit_test(test_barrier_pthread_orders_phases),
        cmocka_unit_test(test_barrier_parse_names),
        cmocka_unit_test(test_barrier_hybrid_budget_shrinks_when_spin_fails),
        cmocka_unit_test(test_barrier_hybrid_oversubscribed_budget_is_low),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
