/*
 * bench_barrier.c -- barrier latency of the cpu pool's policies, and the
 * tokens/s of a small llama on the `cpu` backend under each policy.
 *
 * Latency: N threads (the main one included) cross one barrier in a loop
 * with no work in between. The main thread times rounds of R crossings;
 * the figure is the median over rounds of (round time / R). A control
 * barrier after each round (not timed) lets the main thread stop everyone
 * when the time cap of a configuration is spent: spin barriers with more
 * threads than CPUs cost a scheduler quantum each, so those runs are capped
 * at a few hundred crossings.
 *
 * Tokens/s: the llama generator's graph (decode, one token per evaluation)
 * planned by the scheduler on one cpu backend with 2 and 4 threads, run for
 * a fixed number of tokens under the events policy.
 *
 * usage: bench_barrier [--quick] [--no-llama] [--threads LIST]
 */
#include "real/real.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct bench_cfg {
    real_barrier *b;
    real_barrier *control;
    int round_len;
    int max_rounds;
    int64_t cap_ns;
    _Atomic int stop;
    double *per_round;  /* ns per crossing, filled by thread 0 */
    int n_rounds;
} bench_cfg;

static void run_rounds(bench_cfg *c, int ith)
{
    int64_t start = now_ns();
    for (int r = 0;; r++) {
        int64_t t0 = now_ns();
        for (int i = 0; i < c->round_len; i++)
            real_barrier_wait(c->b);
        if (ith == 0) {
            int64_t t1 = now_ns();
            c->per_round[r] = (double)(t1 - t0) / c->round_len;
            c->n_rounds = r + 1;
            if (r + 1 >= c->max_rounds || t1 - start > c->cap_ns)
                atomic_store(&c->stop, 1);
        }
        real_barrier_wait(c->control);
        if (atomic_load(&c->stop))
            break;
    }
}

typedef struct thread_arg { bench_cfg *c; int ith; } thread_arg;

static void *bench_thread(void *p)
{
    thread_arg *a = p;
    run_rounds(a->c, a->ith);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median ns per crossing, or -1 on failure. *crossings gets how many were timed. */
static double bench_one(real_barrier_kind kind, int n, bool quick, long *crossings)
{
    bool oversub = n > real_cpus_allowed();
    bench_cfg c = { 0 };
    c.b = real_barrier_new(kind, n);
    c.control = real_barrier_new(REAL_BARRIER_FUTEX, n);
    /* Oversubscribed spin: a few hundred crossings at most. */
    if (oversub && kind == REAL_BARRIER_SPIN) {
        c.round_len = 20;
        c.max_rounds = quick ? 5 : 15;
        c.cap_ns = quick ? 1000000000LL : 4000000000LL;
    } else {
        c.round_len = 1000;
        c.max_rounds = quick ? 15 : 41;
        c.cap_ns = quick ? 500000000LL : 2000000000LL;
    }
    c.per_round = calloc((size_t)c.max_rounds, sizeof *c.per_round);
    atomic_init(&c.stop, 0);
    pthread_t th[64];
    thread_arg args[64];
    double med = -1;
    if (!c.b || !c.control || !c.per_round || n > 64)
        goto done;
    int started = 1;
    for (int i = 1; i < n; i++) {
        args[i] = (thread_arg){ &c, i };
        if (pthread_create(&th[i], NULL, bench_thread, &args[i]) != 0) {
            fprintf(stderr, "bench_barrier: cannot start a thread\n");
            exit(1);
        }
        started++;
    }
    run_rounds(&c, 0);
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    qsort(c.per_round, (size_t)c.n_rounds, sizeof *c.per_round, cmp_double);
    med = c.per_round[c.n_rounds / 2];
    *crossings = (long)c.n_rounds * c.round_len;
done:
    real_barrier_free(c.b);
    real_barrier_free(c.control);
    free(c.per_round);
    return med;
}

/* ------------------------------------------------------------------ */
/* Tokens/s of a small llama on the cpu backend.                       */

static double llama_tokens_per_s(real_barrier_kind kind, int threads, int tokens)
{
    sched_model_params p;
    char err[256];
    if (sched_model_parse("llama:n_layer=4,n_embd=256,n_head=8,n_head_kv=4,n_ff=688,"
                          "n_vocab=2048,n_ctx=64,dtype=f16,devices=1", &p, err, sizeof err) != 0) {
        fprintf(stderr, "bench_barrier: %s\n", err);
        return -1;
    }
    real_options o;
    real_options_default(&o);
    o.barrier = kind;
    o.threads = threads;
    sched_backend **be = NULL;
    size_t nb = 0;
    if (real_backends_create("cpu", &o, &be, &nb, err, sizeof err) != 0) {
        fprintf(stderr, "bench_barrier: %s\n", err);
        return -1;
    }
    double tps = -1;
    sched_graph *g = sched_model_build(&p, 1);
    trace *tr = trace_new();
    sched_sink sink = sched_sink_memory(tr);
    sched_weights *w = g ? sched_weights_new(be, (int)nb, g, &sink) : NULL;
    sched *s = sched_new(be, (int)nb, &(sched_options){ .n_copies = 1 });
    if (!g || !w || !s || sched_weights_bind(w, g) != 0 ||
        sched_plan(s, g, err, sizeof err) != SCHED_OK)
        goto done;
    real_init_weights(be, nb, g, 1);
    for (int t = 0; t < 3; t++) {           /* warm up */
        real_set_inputs(be, nb, g, (uint64_t)t, 1);
        sched_graph_compute(s, (uint64_t)t);
    }
    int64_t t0 = now_ns();
    for (int t = 0; t < tokens; t++) {
        real_set_inputs(be, nb, g, (uint64_t)t, 1);
        if (sched_graph_compute(s, (uint64_t)t) != SCHED_OK)
            goto done;
    }
    sched_synchronize(s);
    tps = tokens / ((double)(now_ns() - t0) / 1e9);
done:
    sched_free(s);
    sched_weights_free(w);
    sched_graph_free(g);
    real_backends_free(be, nb);
    trace_free(tr);
    return tps;
}

int main(int argc, char **argv)
{
    bool quick = false, llama = true;
    int threads[8] = { 1, 2, 3, 4, 8 };
    int n_threads = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--no-llama") == 0)
            llama = false;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            n_threads = 0;
            for (char *tok = strtok(argv[++i], ","); tok && n_threads < 8; tok = strtok(NULL, ","))
                threads[n_threads++] = atoi(tok);
        } else {
            fprintf(stderr, "usage: bench_barrier [--quick] [--no-llama] [--threads 1,2,4]\n");
            return 2;
        }
    }
    int cpus = real_cpus_allowed();
    printf("barrier latency, median ns per crossing (%d CPUs allowed; threads > %d are "
           "oversubscribed)\n", cpus, cpus);
    printf("%-8s", "threads");
    for (int k = 0; k < REAL_BARRIER_COUNT; k++)
        printf(" %12s", real_barrier_str((real_barrier_kind)k));
    printf("   hybrid/spin hybrid/futex\n");
    for (int i = 0; i < n_threads; i++) {
        double med[REAL_BARRIER_COUNT];
        long crossings[REAL_BARRIER_COUNT] = { 0 };
        printf("%-8d", threads[i]);
        fflush(stdout);
        for (int k = 0; k < REAL_BARRIER_COUNT; k++) {
            med[k] = bench_one((real_barrier_kind)k, threads[i], quick, &crossings[k]);
            printf(" %12.1f", med[k]);
            fflush(stdout);
        }
        printf("   %10.3gx %11.3gx%s\n", med[REAL_BARRIER_HYBRID] / med[REAL_BARRIER_SPIN],
               med[REAL_BARRIER_HYBRID] / med[REAL_BARRIER_FUTEX],
               threads[i] > cpus ? "  (oversubscribed)" : "");
    }
    if (!llama)
        return 0;
    int tokens = quick ? 8 : 32;
    printf("\nsmall llama (4 layers, n_embd 256, f16) decode on cpu, tokens/s over %d tokens\n",
           tokens);
    printf("%-8s", "threads");
    for (int k = 0; k < REAL_BARRIER_COUNT; k++)
        printf(" %12s", real_barrier_str((real_barrier_kind)k));
    printf("\n");
    int llama_threads[2] = { 2, 4 };
    for (int i = 0; i < 2; i++) {
        printf("%-8d", llama_threads[i]);
        fflush(stdout);
        for (int k = 0; k < REAL_BARRIER_COUNT; k++) {
            int toks = tokens;
            /* Spin with more threads than CPUs: milliseconds per barrier. */
            if (k == REAL_BARRIER_SPIN && llama_threads[i] > cpus)
                toks = 2;
            printf(" %12.1f", llama_tokens_per_s((real_barrier_kind)k, llama_threads[i], toks));
            fflush(stdout);
        }
        printf("\n");
    }
    return 0;
}
