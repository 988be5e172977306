/*
 * barrier.c -- reusable barriers for the thread pool.
 *
 * All but `pthread` share one algorithm: a count of arrivals and a
 * generation word. A thread reads the generation, then adds itself to the
 * count; the last to arrive resets the count and bumps the generation
 * (release), the others wait until the generation changes (acquire). The
 * policies differ only in how they wait:
 *
 *   spin     pause in a loop. ~0.1 us when every thread has a CPU; when
 *            the pool has more threads than CPUs, a spinning thread burns
 *            the time slice the thread that would release it needs, and a
 *            barrier costs a scheduler quantum (milliseconds).
 *   futex    sleep in the kernel at once (FUTEX_WAIT on the generation);
 *            the releaser wakes the sleepers when there are any. A few
 *            microseconds per barrier, whatever the load.
 *   hybrid   spin for a budget of pause iterations, then sleep on the
 *            futex. The budget adapts per barrier: it grows (x2) when a
 *            spin succeeded, shrinks (/2) when it did not. When the pool is
 *            oversubscribed (more threads than sched_getaffinity allows)
 *            the budget starts at its floor and is capped low, and a
 *            waiter yields its CPU between short spins, so that the
 *            thread holding progress runs.
 *   pthread  pthread_barrier_wait, the baseline.
 *
 * Sleepers are counted so that the releaser makes the wake syscall only
 * when someone sleeps. The count and the generation form a Dekker pair
 * (waiter: count++, then the kernel re-reads the generation; releaser:
 * generation++, then reads the count), so both are seq_cst. Every ordering
 * a thread relies on goes through C11 atomics, which ThreadSanitizer
 * understands; the futex calls only sleep and wake.
 */
#include "real.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HYBRID_BUDGET_INIT 4096u
#define HYBRID_BUDGET_MAX 65536u
#define HYBRID_BUDGET_MIN 64u
#define HYBRID_BUDGET_OVERSUB_MAX 256u

struct real_barrier {
    real_barrier_kind kind;
    int n;
    bool oversubscribed;
    _Atomic uint32_t arrived;
    _Atomic uint32_t gen;           /* the futex word */
    _Atomic uint32_t sleepers;
    _Atomic uint32_t budget;        /* hybrid: pause iterations before sleeping */
    pthread_barrier_t pb;
};

static const struct { const char *word, *text; } barrier_info[] = {
#define REAL_BARRIER_INFO(name, word, text) { word, text },
    REAL_BARRIER_MAP(REAL_BARRIER_INFO)
#undef REAL_BARRIER_INFO
};

const char *real_barrier_str(real_barrier_kind k)
{
    return (unsigned)k < REAL_BARRIER_COUNT ? barrier_info[k].word : "?";
}

int real_barrier_parse(const char *word)
{
    for (int i = 0; i < REAL_BARRIER_COUNT; i++)
        if (strcmp(word, barrier_info[i].word) == 0)
            return i;
    return -1;
}

const char *real_barrier_names(void)
{
    static char names[128];
    if (!names[0]) {
        size_t used = 0;
        for (int i = 0; i < REAL_BARRIER_COUNT && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                     i == 0 ? "" : i + 1 < REAL_BARRIER_COUNT ? ", " : " or ",
                                     barrier_info[i].word);
    }
    return names;
}

const char *real_barrier_help(real_barrier_kind k)
{
    return (unsigned)k < REAL_BARRIER_COUNT ? barrier_info[k].text : "?";
}

int real_cpus_allowed(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    /* Returns on a wake, a signal or when *addr != val (EAGAIN); the
     * caller re-reads the word either way. */
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

real_barrier *real_barrier_new(real_barrier_kind kind, int n)
{
    if (n < 1 || (unsigned)kind >= REAL_BARRIER_COUNT)
        return NULL;
    real_barrier *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->kind = kind;
    b->n = n;
    b->oversubscribed = n > real_cpus_allowed();
    atomic_init(&b->arrived, 0);
    atomic_init(&b->gen, 0);
    atomic_init(&b->sleepers, 0);
    atomic_init(&b->budget, b->oversubscribed ? HYBRID_BUDGET_MIN : HYBRID_BUDGET_INIT);
    if (kind == REAL_BARRIER_PTHREAD && pthread_barrier_init(&b->pb, NULL, (unsigned)n) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

void real_barrier_free(real_barrier *b)
{
    if (!b)
        return;
    if (b->kind == REAL_BARRIER_PTHREAD)
        pthread_barrier_destroy(&b->pb);
    free(b);
}

real_barrier_kind real_barrier_kind_of(const real_barrier *b) { return b->kind; }
bool real_barrier_oversubscribed(const real_barrier *b) { return b->oversubscribed; }

uint32_t real_barrier_spin_budget(const real_barrier *b)
{
    return b->kind == REAL_BARRIER_HYBRID ? atomic_load_explicit(&b->budget, memory_order_relaxed)
                                          : 0;
}

static void sleep_until_changed(real_barrier *b, uint32_t g)
{
    while (atomic_load_explicit(&b->gen, memory_order_acquire) == g) {
        atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&b->gen, memory_order_seq_cst) == g)
            futex_wait(&b->gen, g);
        atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
    }
}

/* Hybrid: spin up to the budget; adapt it from whether that sufficed. */
static void hybrid_wait(real_barrier *b, uint32_t g)
{
    uint32_t budget = atomic_load_explicit(&b->budget, memory_order_relaxed);
    uint32_t cap = b->oversubscribed ? HYBRID_BUDGET_OVERSUB_MAX : HYBRID_BUDGET_MAX;
    for (uint32_t i = 0; i < budget; i++) {
        if (atomic_load_explicit(&b->gen, memory_order_acquire) != g) {
            /* Spinning paid off: let the next wait spin longer. */
            if (budget < cap)
                atomic_store_explicit(&b->budget, budget * 2 < cap ? budget * 2 : cap,
                                      memory_order_relaxed);
            return;
        }
        /* Oversubscribed: give the CPU away now and then, since the thread
         * that releases us may be waiting for it. */
        if (b->oversubscribed && (i & 31) == 31)
            sched_yield();
        else
            cpu_relax();
    }
    if (budget > HYBRID_BUDGET_MIN)
        atomic_store_explicit(&b->budget, budget / 2, memory_order_relaxed);
    sleep_until_changed(b, g);
}

bool real_barrier_wait(real_barrier *b)
{
    if (b->n == 1)
        return true;
    if (b->kind == REAL_BARRIER_PTHREAD)
        return pthread_barrier_wait(&b->pb) == PTHREAD_BARRIER_SERIAL_THREAD;
    uint32_t g = atomic_load_explicit(&b->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == (uint32_t)b->n - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->gen, 1, memory_order_seq_cst);
        if (b->kind != REAL_BARRIER_SPIN &&
            atomic_load_explicit(&b->sleepers, memory_order_seq_cst) > 0)
            futex_wake_all(&b->gen);
        return true;
    }
    switch (b->kind) {
    case REAL_BARRIER_SPIN:
        while (atomic_load_explicit(&b->gen, memory_order_acquire) == g)
            cpu_relax();
        break;
    case REAL_BARRIER_FUTEX:
        sleep_until_changed(b, g);
        break;
    default:
        hybrid_wait(b, g);
        break;
    }
    return false;
}
