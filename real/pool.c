/*
 * pool.c -- a thread pool that runs one job at a time on N threads.
 *
 * The caller of real_pool_run is thread 0; N-1 workers are started once.
 * A job runs in three steps, each a barrier crossing for all N threads:
 *
 *   1. start: the caller publishes the job (fn, arg) and crosses the idle
 *      barrier, releasing the workers that wait there between jobs;
 *   2. every thread runs fn(arg, ith, N); fn may cross the phase barrier
 *      (real_pool_barrier) between its phases -- the cpu backend does so
 *      between graph nodes;
 *   3. end: every thread crosses the phase barrier once more, so that the
 *      caller returns only when every thread is done.
 *
 * The phase barrier is the policy under test (spin, futex, hybrid,
 * pthread). The idle barrier has the same kind except for spin, where it
 * is hybrid: an idle pool that spins between jobs would starve whatever
 * else runs (the other devices' threads, the host), which no pool does
 * (ggml's polls, then sleeps on a condition variable).
 *
 * The job is published through plain fields written before the start
 * barrier and read after it; the barrier orders them. Stopping is a job
 * too: fn == NULL tells the workers to exit.
 */
#include "real.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct pool_worker {
    real_pool *pool;
    int ith;
    pthread_t thread;
} pool_worker;

struct real_pool {
    int n;
    real_barrier *phase, *idle;
    real_job_fn fn;
    void *arg;
    pool_worker *workers;
    int n_started;
};

static void *worker_main(void *p)
{
    pool_worker *w = p;
    real_pool *pool = w->pool;
    for (;;) {
        real_barrier_wait(pool->idle);
        real_job_fn fn = pool->fn;
        if (!fn)
            break;
        fn(pool->arg, w->ith, pool->n);
        real_barrier_wait(pool->phase);
    }
    return NULL;
}

real_pool *real_pool_new(int n_threads, real_barrier_kind kind)
{
    if (n_threads < 1)
        return NULL;
    real_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = n_threads;
    p->phase = real_barrier_new(kind, n_threads);
    p->idle = real_barrier_new(kind == REAL_BARRIER_SPIN ? REAL_BARRIER_HYBRID : kind, n_threads);
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p->phase || !p->idle || !p->workers)
        goto fail;
    for (int i = 1; i < n_threads; i++) {
        p->workers[i] = (pool_worker){ .pool = p, .ith = i };
        if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0)
            goto fail;
        p->n_started++;
    }
    return p;
fail:
    real_pool_free(p);
    return NULL;
}

void real_pool_free(real_pool *p)
{
    if (!p)
        return;
    if (p->n_started == p->n - 1 && p->n > 1) {
        p->fn = NULL;
        real_barrier_wait(p->idle);
        for (int i = 1; i < p->n; i++)
            pthread_join(p->workers[i].thread, NULL);
    } else if (p->n_started > 0) {
        /* A partial start: the idle barrier can never fill. Workers are
         * parked in it forever; this only happens when pthread_create
         * fails, and the process is about to report it and exit. */
        for (int i = 1; i <= p->n_started; i++)
            pthread_detach(p->workers[i].thread);
        free(p->workers);
        free(p);
        return;
    }
    real_barrier_free(p->phase);
    real_barrier_free(p->idle);
    free(p->workers);
    free(p);
}

int real_pool_threads(const real_pool *p) { return p->n; }
real_barrier *real_pool_get_barrier(real_pool *p) { return p->phase; }
bool real_pool_barrier(real_pool *p) { return real_barrier_wait(p->phase); }

void real_pool_run(real_pool *p, real_job_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    real_barrier_wait(p->idle);
    fn(arg, 0, p->n);
    real_barrier_wait(p->phase);
}
