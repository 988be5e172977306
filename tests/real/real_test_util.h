/*
 * real_test_util.h -- the real backends' tests: runs through the `run`
 * driver, and recordings of hand-driven backends. Header-only (static).
 */
#ifndef SYNCSIM_TEST_REAL_UTIL_H
#define SYNCSIM_TEST_REAL_UTIL_H

#include "real/real.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const sched_family *const real_test_families[] = { &real_cpustream_family,
                                                          &real_cpu_family, NULL };

/* What a run through the driver gave. */
typedef struct real_test_outcome {
    int rc;                         /* sched_run_exec's: 0, or 1 (msg) */
    int verdict;                    /* 1: outputs differ from the reference */
    sched_run_result res;
    real_error err;
    uint64_t n_evals;
    char msg[768];
} real_test_outcome;

/* Runs o on real devices, recorded into sink; a bad o fails the test. */
static inline void real_test_run(const sched_run_opts *o, sched_sink sink, real_test_outcome *out)
{
    memset(out, 0, sizeof *out);
    sched_run *r = NULL;
    trace_error err = { 0 };
    if (sched_run_prepare(o, real_test_families, &r, &err) != 0)
        fail_msg("prepare on %s: %s", o->devices, err.msg);
    out->rc = sched_run_exec(r, sink, &out->res, &err);
    snprintf(out->msg, sizeof out->msg, "%s", err.msg);
    const real_error *e = real_machine_error(sched_run_machine(r), &out->n_evals);
    if (e)
        out->err = *e;
    out->verdict = e && (e->n_nan > 0 || e->max_rel > REAL_RUN_TOLERANCE);
    sched_run_free(r);
}

static inline int64_t real_test_clock(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A recording into sink of real backends driven by hand (the real clock). */
static inline sched_rec *real_test_rec(sched_sink sink)
{
    sched_rec_opts ro = { .sink = sink, .threaded = true, .now = real_test_clock };
    return sched_rec_new(&ro);
}

#endif
