/*
 * test_pool.c -- the thread pool: every thread runs each job once with its
 * index, the phase barrier orders a job's phases, jobs run back to back,
 * and a pool of one runs on the caller. Runs under ThreadSanitizer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "real/real.h"

#include <stdatomic.h>
#include <stdlib.h>

#define N 64

typedef struct job {
    real_pool *pool;
    int job_no;
    int values[N];              /* plain: each thread writes its chunk */
    int sums[16];
    _Atomic int calls;
    _Atomic int seen[16];
} job;

/* Phase 1: each thread writes its chunk; barrier; phase 2: each thread sums
 * every chunk (reads the others' writes). */
static void two_phase(void *arg, int ith, int nth)
{
    job *j = arg;
    atomic_fetch_add(&j->calls, 1);
    atomic_fetch_add(&j->seen[ith], 1);
    for (int i = N * ith / nth; i < N * (ith + 1) / nth; i++)
        j->values[i] = i + j->job_no;
    real_pool_barrier(j->pool);
    int sum = 0;
    for (int i = 0; i < N; i++)
        sum += j->values[i];
    j->sums[ith] = sum;
}

static void run_pool(real_barrier_kind kind, int n)
{
    job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->pool = real_pool_new(n, kind);
    assert_non_null(j->pool);
    assert_int_equal(real_pool_threads(j->pool), n);
    for (int k = 0; k < 50; k++) {
        j->job_no = k;
        atomic_store(&j->calls, 0);
        real_pool_run(j->pool, two_phase, j);
        assert_int_equal(atomic_load(&j->calls), n);
        for (int t = 0; t < n; t++)
            assert_int_equal(j->sums[t], N * (N - 1) / 2 + N * k);
    }
    for (int t = 0; t < n; t++)
        assert_int_equal(atomic_load(&j->seen[t]), 50);
    real_pool_free(j->pool);
    free(j);
}

static void test_pool_runs_every_thread_once_per_job(void **state)
{
    (void)state;
    run_pool(REAL_BARRIER_HYBRID, 3);
}

static void test_pool_barrier_orders_phases_for_every_policy(void **state)
{
    (void)state;
    for (int k = 0; k < REAL_BARRIER_COUNT; k++)
        run_pool((real_barrier_kind)k, 2);
    run_pool(REAL_BARRIER_FUTEX, 4);
    run_pool(REAL_BARRIER_PTHREAD, 3);
}

static void test_pool_of_one_runs_on_caller(void **state)
{
    (void)state;
    run_pool(REAL_BARRIER_SPIN, 1);
    assert_null(real_pool_new(0, REAL_BARRIER_SPIN));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_runs_every_thread_once_per_job),
        cmocka_unit_test(test_pool_barrier_orders_phases_for_every_policy),
        cmocka_unit_test(test_pool_of_one_runs_on_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
