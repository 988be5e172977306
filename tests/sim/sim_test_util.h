/*
 * sim_test_util.h -- running the `run` driver on a simulated machine into
 * an in-memory trace, for the simulator's tests. Header-only (static).
 */
#ifndef SYNCSIM_TEST_SIM_UTIL_H
#define SYNCSIM_TEST_SIM_UTIL_H

#include "sim/sim.h"

static const sched_family *const sim_test_families[] = { &sim_family, NULL };

/* Runs o into t (not owned); fails the test on any error. Returns the run
 * (its machine holds the world's stats): free with sched_run_free. */
static inline sched_run *sim_test_run(const sched_run_opts *o, trace *t, sched_run_result *res)
{
    sched_run *r = NULL;
    trace_error err = { 0 };
    if (sched_run_prepare(o, sim_test_families, &r, &err) != 0)
        fail_msg("prepare %s on %s: %s", o->model ? o->model : "llama", o->devices, err.msg);
    if (sched_run_exec(r, sched_sink_memory(t), res, &err) != 0)
        fail_msg("run %s on %s: %s", o->model ? o->model : "llama", o->devices, err.msg);
    return r;
}

#endif
