/*
 * collective.c -- the all-reduce rendezvous of the real backends.
 *
 * A tensor-parallel graph has, per all_reduce group G (the node's param),
 * one all_reduce node per rank, each on its own device. Whatever thread
 * executes a rank's node (a cpustream worker) joins the group's slot:
 *
 *   1. arrive   under the set's coll_lock: take the rank's next generation
 *               number g of G (ranks count their own joins, so the prompt
 *               and decode graphs, which reuse group ids, and successive
 *               evaluations line up), wait until the slot serves g (the
 *               previous generation fully departed), publish the tensor to
 *               read, count the arrival, and wait until all n ranks have
 *               arrived. Every rank then sees all n tensors.
 *   2. (outside the lock) the caller sums the n tensors IN RANK ORDER into
 *      its own destination: every rank computes the same f32 additions in
 *      the same order, so all ranks get bit-identical results, equal to the
 *      reference's k_all_reduce over the group.
 *   3. depart   count the departure and wait until all n ranks have
 *               departed, i.e. finished reading the others' tensors; the
 *               last one to depart advances the slot to g + 1. Only then
 *               may a rank's queue go on and overwrite its source.
 *
 * This is the collective the trace format describes: a barrier across the
 * participants whose accesses happen inside it. On shared memory the ring
 * and butterfly algorithms move no data, so both do this straightforward
 * sum (their difference is cost, which the simulated devices model).
 *
 * Every wait is bounded by real_options.allreduce_timeout_ns: a rank that
 * waits longer means the schedule hangs for real (a rank's queue waits for
 * something behind another rank's collective, or a rank is never
 * submitted). The waiter marks the whole set failed with one line naming
 * the group, itself and the ranks it waited for, and wakes every other
 * waiter; from then on every rendezvous fails at once, the devices skip
 * their remaining work, and the host's synchronize returns -1, so the run
 * ends with that error instead of deadlocking the process.
 *
 * One mutex and one condition variable for all groups: rendezvous are rare
 * (two per layer and evaluation) next to the kernels between them.
 *
 * That is the set's local transport. A set that is one rank of a job over
 * processes (`run --tp N` under mpirun) has MPI's instead (mpi.c): the
 * arrival is an allgather of every rank's tensor, in rank order, and the
 * caller sums them exactly as here. real_set_create picks the transport.
 */
#include "real_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct real_coll_slot {
    int32_t group;
    int n;                          /* ranks of the generation being served */
    int64_t gen;                    /* the generation being served */
    int arrived, departed;
    int64_t elements;               /* of the first arrival's tensor */
    int64_t next_gen[REAL_MAX_BACKENDS];   /* per rank: its next join */
    bool present[REAL_MAX_BACKENDS];
    real_tensor t[REAL_MAX_BACKENDS];
} real_coll_slot;

void real_coll_init(real_ctx *c)
{
    pthread_mutex_init(&c->coll_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->coll_cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&c->failed, false);
    c->coll = &real_coll_local;
}

void real_coll_destroy(real_ctx *c)
{
    if (c->coll && c->coll->free)
        c->coll->free(c);
    for (int i = 0; i < c->n_slots; i++)
        free(c->slots[i]);
    free(c->slots);
    pthread_mutex_destroy(&c->coll_lock);
    pthread_cond_destroy(&c->coll_cond);
}

static void fail_locked(real_ctx *c, const char *msg)
{
    if (!atomic_load(&c->failed)) {
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s", msg);
        atomic_store(&c->failed, true);
    }
    pthread_cond_broadcast(&c->coll_cond);
}

void real_fail(real_ctx *c, const char *msg)
{
    pthread_mutex_lock(&c->coll_lock);
    fail_locked(c, msg);
    pthread_mutex_unlock(&c->coll_lock);
}

bool real_failed(real_ctx *c) { return atomic_load(&c->failed); }

const char *real_backends_error(sched_backend **backends, size_t n)
{
    real_ctx *c = n > 0 ? real_ctx_of(backends[n - 1]) : NULL;
    /* fail_msg is written once, before failed is set (seq_cst). */
    return c && atomic_load(&c->failed) ? c->fail_msg : NULL;
}

/* The slot of group; NULL when out of memory. Under coll_lock. */
static real_coll_slot *slot_of(real_ctx *c, int32_t group)
{
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i]->group == group)
            return c->slots[i];
    if (c->n_slots == c->cap_slots) {
        int cap = c->cap_slots ? 2 * c->cap_slots : 16;
        real_coll_slot **s = realloc(c->slots, (size_t)cap * sizeof *s);
        if (!s)
            return NULL;
        c->slots = s;
        c->cap_slots = cap;
    }
    real_coll_slot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->group = group;
    c->slots[c->n_slots++] = s;
    return s;
}

static int64_t timeout_ns(const real_ctx *c)
{
    return c->opt.allreduce_timeout_ns > 0 ? c->opt.allreduce_timeout_ns : 10000000000ll;
}

static struct timespec deadline_of(const real_ctx *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + timeout_ns(c);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

/* Fails the set: rank of group waited the timeout for the ranks `missing`
 * marks (doing `what`). Under coll_lock. */
static void fail_timeout(real_ctx *c, const real_allreduce *ar, const bool *missing,
                         const char *what)
{
    char ranks[128] = "";
    size_t len = 0;
    for (int r = 0; r < ar->n_ranks && len < sizeof ranks; r++)
        if (missing[r])
            len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", len ? ", " : "", r);
    char msg[512];
    snprintf(msg, sizeof msg, "all_reduce group %d: rank %d waited %gs for ranks %s%s; the "
             "schedule hangs \xe2\x80\x94 `syncsim run` it on simulated devices and `syncsim "
             "check` it", (int)ar->group, ar->rank, (double)timeout_ns(c) / 1e9,
             ranks, what);
    fail_locked(c, msg);
}

/* Waits on coll_cond until the deadline; false when it passed. */
static bool wait_until(real_ctx *c, const struct timespec *deadline)
{
    int rc = pthread_cond_timedwait(&c->coll_cond, &c->coll_lock, deadline);
    return rc != ETIMEDOUT;
}

static int64_t local_arrive(real_ctx *c, const real_allreduce *ar, const real_tensor *t,
                            real_tensor *ranks)
{
    int r = ar->rank, n = ar->n_ranks;
    if (n < 1 || n > REAL_MAX_BACKENDS || r < 0 || r >= n) {
        char msg[128];
        snprintf(msg, sizeof msg, "all_reduce group %d: %d ranks (at most %d)", (int)ar->group, n,
                 REAL_MAX_BACKENDS);
        real_fail(c, msg);
        return -1;
    }
    int64_t elements = 1;
    for (int i = 0; i < SCHED_MAX_DIMS; i++)
        elements *= t->ne[i];
    struct timespec deadline = deadline_of(c);
    pthread_mutex_lock(&c->coll_lock);
    real_coll_slot *s = slot_of(c, ar->group);
    if (!s) {
        fail_locked(c, "out of memory for an all_reduce rendezvous");
        goto fail;
    }
    int64_t g = s->next_gen[r]++;
    /* The previous generation must have departed before this one starts. */
    while (s->gen < g && !atomic_load(&c->failed)) {
        if (!wait_until(c, &deadline) && s->gen < g) {
            bool missing[REAL_MAX_BACKENDS] = { false };
            for (int k = 0; k < n; k++)
                missing[k] = s->next_gen[k] <= g;
            fail_timeout(c, ar, missing, " to finish the previous generation");
        }
    }
    if (atomic_load(&c->failed))
        goto fail;
    if (s->arrived == 0) {
        s->n = n;
        s->elements = elements;
    } else if (s->n != n || s->elements != elements) {
        char msg[256];
        snprintf(msg, sizeof msg, "all_reduce group %d: rank %d has %d ranks and %lld elements, "
                 "the others %d and %lld", (int)ar->group, r, n, (long long)elements, s->n,
                 (long long)s->elements);
        fail_locked(c, msg);
        goto fail;
    }
    s->t[r] = *t;
    s->present[r] = true;
    if (++s->arrived == n)
        pthread_cond_broadcast(&c->coll_cond);
    while (s->arrived < n && !atomic_load(&c->failed)) {
        if (!wait_until(c, &deadline) && s->arrived < n) {
            bool missing[REAL_MAX_BACKENDS];
            for (int k = 0; k < n; k++)
                missing[k] = !s->present[k];
            fail_timeout(c, ar, missing, "");
        }
    }
    if (atomic_load(&c->failed))
        goto fail;
    memcpy(ranks, s->t, (size_t)n * sizeof *ranks);
    pthread_mutex_unlock(&c->coll_lock);
    return g;
fail:
    pthread_mutex_unlock(&c->coll_lock);
    return -1;
}

static int local_depart(real_ctx *c, const real_allreduce *ar, int64_t g)
{
    struct timespec deadline = deadline_of(c);
    pthread_mutex_lock(&c->coll_lock);
    real_coll_slot *s = slot_of(c, ar->group);
    if (!s || s->gen != g) {            /* arrive returned g, so the slot serves it */
        pthread_mutex_unlock(&c->coll_lock);
        return -1;
    }
    if (++s->departed == s->n) {
        s->gen++;
        s->arrived = s->departed = 0;
        memset(s->present, 0, sizeof s->present);
        pthread_cond_broadcast(&c->coll_cond);
    }
    bool left[REAL_MAX_BACKENDS] = { false };
    while (s->gen == g && !atomic_load(&c->failed)) {
        if (!wait_until(c, &deadline) && s->gen == g) {
            /* The ranks still reading cannot be told apart from those that
             * left; name every other rank. */
            for (int k = 0; k < ar->n_ranks; k++)
                left[k] = k != ar->rank;
            fail_timeout(c, ar, left, " to finish reading");
        }
    }
    bool ok = !atomic_load(&c->failed) || s->gen > g;
    pthread_mutex_unlock(&c->coll_lock);
    return ok ? 0 : -1;
}

const real_coll_transport real_coll_local = {
    .name = "local",
    .arrive = local_arrive,
    .depart = local_depart,
};

int64_t real_coll_arrive(real_ctx *c, const real_allreduce *ar, const real_tensor *t,
                         real_tensor *ranks)
{
    return c->coll->arrive(c, ar, t, ranks);
}

int real_coll_depart(real_ctx *c, const real_allreduce *ar, int64_t g)
{
    return c->coll->depart(c, ar, g);
}
