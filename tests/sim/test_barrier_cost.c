/* test_barrier_cost.c -- the simulated pool barrier priced by its kind
 * (issue 23, item 7): spin, futex, hybrid and pthread from the device
 * model's spin_barrier_ns, oversub_barrier_ns and futex_wake_ns, and
 * `--barrier` accepted on a simulated machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sim/sim.h"

static void load(sim_model *m, int threads, int barrier)
{
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("cpu-2core", m, &err), 0);
    m->cpu_threads = threads;
    m->pool_barrier = barrier;
    /* Distinct prices, so that a wrong branch cannot pass. */
    m->spin_barrier_ns = 100;
    m->oversub_barrier_ns = 2000000;
    m->futex_wake_ns = 8000;
}

static void test_barrier_cost_by_kind_and_oversubscription(void **state)
{
    (void)state;
    static const struct { int kind, threads; int64_t ns; } want[] = {
        { SCHED_BARRIER_SPIN, 2, 100 },     { SCHED_BARRIER_SPIN, 3, 2000000 },
        { SCHED_BARRIER_FUTEX, 2, 8000 },   { SCHED_BARRIER_FUTEX, 3, 8000 },
        { SCHED_BARRIER_HYBRID, 2, 100 },   { SCHED_BARRIER_HYBRID, 3, 8000 },
        { SCHED_BARRIER_PTHREAD, 3, 8000 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        sim_model m;
        load(&m, want[i].threads, want[i].kind);
        if (sim_cost_host_barrier(&m) != want[i].ns)
            fail_msg("%s with %d threads on 2 cores: %lld ns, want %lld",
                     sched_barrier_str((sched_barrier_kind)want[i].kind), want[i].threads,
                     (long long)sim_cost_host_barrier(&m), (long long)want[i].ns);
        /* A host op pays it (no overhead of its own given). */
        assert_int_equal(sim_cost_op(&m, true, 0, 0, 0, -1), want[i].ns);
    }
}

static void test_barrier_names_from_the_table(void **state)
{
    (void)state;
    assert_string_equal(sched_barrier_names(), "spin, futex, hybrid or pthread");
    assert_int_equal(sched_barrier_parse("hybrid"), SCHED_BARRIER_HYBRID);
    assert_int_equal(sched_barrier_parse("ticket"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_cost_by_kind_and_oversubscription),
        cmocka_unit_test(test_barrier_names_from_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
