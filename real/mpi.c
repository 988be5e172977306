/*
 * mpi.c -- the all-reduce of a set that is one rank of a job over processes.
 *
 * `mpirun -np N syncsim run --model tp --devices cpustream:1 --tp N` runs
 * rank r of a tensor split over N processes: each builds its own shard of
 * the graph (sched/generators.c, one_rank) on its one cpustream device, and
 * its all_reduce nodes are rank r of N. The device's worker reaches them as
 * it does in one process (backend_cpustream.c: real_coll_arrive, the sum,
 * real_coll_depart); the set's transport, chosen once in real_set_create,
 * is this one instead of collective.c's rendezvous:
 *
 *   arrive   MPI_Iallgather of the rank's tensor (its source, or its bf16
 *            wire) on the set's communicator (a duplicate of
 *            MPI_COMM_WORLD: the trace's `tp`), then every rank has every
 *            rank's tensor in rank order and sums them exactly as the
 *            rendezvous's callers do (f32, rank order), so outputs match
 *            the reference bit for bit.
 *   depart   nothing to wait for: the gathered copies are this process's.
 *
 * MPI matches collectives by their order on a communicator, as the checker
 * does (generation k of `tp` is each rank's k-th collective on it), so a
 * rank that skips one pairs its later all-reduces with the others' earlier
 * ones, and the last rank to arrive at a collective that the skipper never
 * joins waits. Every wait is an MPI_Test loop bounded by
 * real_options.allreduce_timeout_ns: past it the set fails with one line
 * naming the group, the rank and what it waited for, the devices skip
 * their remaining work and `run` ends with its partial database (the
 * request stays pending; MPI_Finalize does not wait for it).
 *
 * Point to point (real_mpi_isend, real_mpi_wait, real_mpi_recv, each wait
 * the same bounded MPI_Test loop): the outputs of --tp's ranks to rank 0,
 * and the activations between the stages of a pipeline (`run --pp N`:
 * rank r to r + 1), both made and recorded by real/family.c.
 *
 * Threads: MPI_THREAD_SERIALIZED. The host thread calls MPI only to
 * initialise, to make the communicator (before any device runs) and to
 * finalise (after every device stopped); the device worker's thread 0 makes
 * the collective calls. They never overlap, and one lock here makes sure of
 * it; MPI_THREAD_MULTIPLE would cost every call a lock inside MPI for
 * nothing.
 */
#include "real_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SYNCSIM_MPI_BACKEND
#include <mpi.h>
#include <sched.h>
#include <time.h>

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static bool mpi_up;
static int mpi_rank = -1, mpi_world;
static MPI_Comm msg_comm = MPI_COMM_NULL;   /* point to point: the trace's `world` */

bool real_mpi_built(void) { return true; }

/* Whether mpirun (or another process manager) started this process. */
static bool launched(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                        "PMI_RANK", NULL };
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i]))
            return true;
    return false;
}

int real_mpi_init(int *rank, int *world, char *err, size_t errlen)
{
    pthread_mutex_lock(&mpi_lock);
    int rc = 0;
    if (!mpi_up) {
        int provided = 0;
        if (!launched()) {
            snprintf(err, errlen, "no MPI job: start one process per rank with mpirun (mpirun "
                     "-np N syncsim run ... --tp N, or --pp N)");
            rc = -1;
        } else if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            snprintf(err, errlen, "MPI_Init_thread failed");
            rc = -1;
        } else if (provided < MPI_THREAD_SERIALIZED) {
            snprintf(err, errlen, "this MPI gives thread level %d, below MPI_THREAD_SERIALIZED",
                     provided);
            MPI_Finalize();
            rc = -1;
        } else {
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
            MPI_Comm_size(MPI_COMM_WORLD, &mpi_world);
            MPI_Comm_dup(MPI_COMM_WORLD, &msg_comm);
            MPI_Comm_set_errhandler(msg_comm, MPI_ERRORS_RETURN);
            mpi_up = true;
        }
    }
    if (rc == 0) {
        *rank = mpi_rank;
        *world = mpi_world;
    }
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

void real_mpi_finalize(void)
{
    pthread_mutex_lock(&mpi_lock);
    if (mpi_up) {
        if (msg_comm != MPI_COMM_NULL)
            MPI_Comm_free(&msg_comm);
        MPI_Finalize();
        mpi_up = false;
    }
    pthread_mutex_unlock(&mpi_lock);
}

/* The transport's state: one all-reduce in flight at a time (the set has
 * one device, whose queue runs its commands in order). */
typedef struct mpi_coll {
    MPI_Comm comm;
    int64_t gen;                    /* collectives joined on comm */
    void *buf;                      /* every rank's tensor, rank order */
    size_t cap;
} mpi_coll;

static void sleep_ns(long ns)
{
    struct timespec ts = { 0, ns };
    nanosleep(&ts, NULL);
}

/* Polls req until it completes (true) or the set's timeout passes, the
 * set fails or MPI reports an error (*mpi_err, else MPI_SUCCESS) (false).
 * Under mpi_lock; released while sleeping so that nothing else waits. */
static bool poll_until(real_ctx *c, MPI_Request *req, int *mpi_err)
{
    *mpi_err = MPI_SUCCESS;
    int64_t limit = c->opt.allreduce_timeout_ns > 0 ? c->opt.allreduce_timeout_ns : 10000000000ll;
    int64_t deadline = real_now_ns() + limit;
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_Status st;
        int rc = MPI_Test(req, &done, &st);
        if (rc != MPI_SUCCESS) {
            *mpi_err = rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : rc;
            return false;
        }
        if (done)
            return true;
        if (real_failed(c) || real_now_ns() > deadline)
            return false;
        /* Spin a little (a partner a few microseconds behind), then sleep:
         * an oversubscribed machine needs the CPU for the other ranks. */
        if (spins < 64) {
            sched_yield();
        } else {
            pthread_mutex_unlock(&mpi_lock);
            sleep_ns(spins < 1024 ? 20000 : 200000);
            pthread_mutex_lock(&mpi_lock);
        }
    }
}

static int64_t timeout_of(int64_t ns) { return ns > 0 ? ns : 10000000000ll; }

/* Buffers of requests that failed but may still be pending: kept here,
 * reachable, until the process ends (MPI may still read or write them). */
static void *abandoned[16];
static int n_abandoned;

void real_mpi_abandon(void *buf)
{
    pthread_mutex_lock(&mpi_lock);
    if (buf && n_abandoned < (int)(sizeof abandoned / sizeof *abandoned))
        abandoned[n_abandoned++] = buf;
    pthread_mutex_unlock(&mpi_lock);
}

int real_mpi_isend(const void *buf, size_t bytes, int peer, int tag, void **req, char *err,
                   size_t errlen)
{
    MPI_Request *r = malloc(sizeof *r);
    if (!r || bytes > (size_t)INT32_MAX) {
        free(r);
        snprintf(err, errlen, "MPI_Isend to rank %d: %s", peer, r ? "too many bytes" :
                 "out of memory");
        return -1;
    }
    pthread_mutex_lock(&mpi_lock);
    int rc = mpi_up ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, msg_comm, r) : MPI_ERR_OTHER;
    pthread_mutex_unlock(&mpi_lock);
    if (rc != MPI_SUCCESS) {
        free(r);
        snprintf(err, errlen, "MPI_Isend to rank %d (tag %d) failed", peer, tag);
        return -1;
    }
    *req = r;
    return 0;
}

/* Polls r until done or the deadline: 0, 1 (timed out) or an MPI error. */
static int wait_req(MPI_Request *r, int64_t timeout_ns)
{
    int64_t deadline = real_now_ns() + timeout_of(timeout_ns);
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_Status st;
        pthread_mutex_lock(&mpi_lock);
        int rc = MPI_Test(r, &done, &st);
        pthread_mutex_unlock(&mpi_lock);
        if (rc != MPI_SUCCESS)
            return rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : rc;
        if (done)
            return 0;
        if (real_now_ns() > deadline)
            return 1;
        if (spins < 64)
            sched_yield();
        else
            sleep_ns(spins < 1024 ? 20000 : 200000);
    }
}

static void wait_error(int rc, int64_t timeout_ns, const char *what, char *err, size_t errlen)
{
    if (rc == 1) {
        snprintf(err, errlen, "rank %d waited %gs for %s; the ranks' messages do not match "
                 "\xe2\x80\x94 `syncsim merge` the ranks' databases and `syncsim check` the job",
                 mpi_rank, (double)timeout_of(timeout_ns) / 1e9, what);
    } else {
        char why[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, why, &len);
        snprintf(err, errlen, "rank %d: %s failed (%s)", mpi_rank, what, why);
    }
}

int real_mpi_wait(void **req, int64_t timeout_ns, const char *what, char *err, size_t errlen)
{
    MPI_Request *r = *req;
    if (!r)
        return 0;
    int rc = wait_req(r, timeout_ns);
    if (rc != 0) {
        wait_error(rc, timeout_ns, what, err, errlen);
        return -1;                  /* the request stays pending: MPI_Finalize does not wait */
    }
    free(r);
    *req = NULL;
    return 0;
}

int real_mpi_recv(void *buf, size_t bytes, int peer, int tag, int64_t timeout_ns, char *err,
                  size_t errlen)
{
    MPI_Request r;
    char what[96];
    snprintf(what, sizeof what, "MPI_Recv from rank %d (tag %d)", peer, tag);
    if (bytes > (size_t)INT32_MAX) {
        snprintf(err, errlen, "%s: too many bytes", what);
        return -1;
    }
    pthread_mutex_lock(&mpi_lock);
    int rc = mpi_up ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, msg_comm, &r) : MPI_ERR_OTHER;
    pthread_mutex_unlock(&mpi_lock);
    if (rc == MPI_SUCCESS)
        rc = wait_req(&r, timeout_ns);
    if (rc != 0) {
        wait_error(rc, timeout_ns, what, err, errlen);
        return -1;                  /* pending (timed out): buf is the request's now */
    }
    return 0;
}

static int64_t mpi_arrive(real_ctx *c, const real_allreduce *ar, const real_tensor *t,
                          real_tensor *ranks)
{
    mpi_coll *m = c->coll_ctx;
    int n = ar->n_ranks;
    char msg[512];
    if (n != c->opt.world || ar->rank != c->opt.rank) {
        snprintf(msg, sizeof msg, "all_reduce group %d: rank %d of %d, but this process is rank "
                 "%d of %d", (int)ar->group, ar->rank, n, c->opt.rank, c->opt.world);
        real_fail(c, msg);
        return -1;
    }
    int64_t elements = 1;
    for (int i = 0; i < SCHED_MAX_DIMS; i++)
        elements *= t->ne[i];
    size_t bytes = (size_t)elements * sched_dtype_size(t->type);
    if (bytes > (size_t)INT32_MAX) {
        snprintf(msg, sizeof msg, "all_reduce group %d: %zu bytes, more than one MPI call moves",
                 (int)ar->group, bytes);
        real_fail(c, msg);
        return -1;
    }
    if ((size_t)n * bytes > m->cap) {
        void *b = realloc(m->buf, (size_t)n * bytes);
        if (!b) {
            real_fail(c, "out of memory for an all-reduce over MPI");
            return -1;
        }
        m->buf = b;
        m->cap = (size_t)n * bytes;
    }
    pthread_mutex_lock(&mpi_lock);
    int64_t g = m->gen++;
    MPI_Request req;
    int rc = MPI_Iallgather(t->data, (int)bytes, MPI_BYTE, m->buf, (int)bytes, MPI_BYTE, m->comm,
                            &req);
    bool ok = rc == MPI_SUCCESS && poll_until(c, &req, &rc);
    if (!ok && rc == MPI_SUCCESS) {
        /* The request stays pending (MPI cannot cancel a collective): a
         * late rank could still write the buffer, so it is left to it. */
        if (n_abandoned < (int)(sizeof abandoned / sizeof *abandoned))
            abandoned[n_abandoned++] = m->buf;
        m->buf = NULL;
        m->cap = 0;
    }
    pthread_mutex_unlock(&mpi_lock);
    if (!ok && rc != MPI_SUCCESS) {
        char why[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, why, &len);
        snprintf(msg, sizeof msg, "all_reduce group %d (collective %lld on tp): rank %d: "
                 "MPI_Iallgather failed (%s): the ranks' collectives differ in size, a rank "
                 "skipped or reordered one \xe2\x80\x94 `syncsim merge` the ranks' databases and "
                 "`syncsim check` the job", (int)ar->group, (long long)g, ar->rank, why);
        real_fail(c, msg);
        return -1;
    }
    if (!ok) {
        if (!real_failed(c)) {
            snprintf(msg, sizeof msg, "all_reduce group %d (collective %lld on tp): rank %d "
                     "waited %gs in MPI_Iallgather for the other %d %s; a rank skipped or "
                     "reordered a collective, or stopped \xe2\x80\x94 `syncsim merge` the ranks' "
                     "databases and `syncsim check` the job", (int)ar->group, (long long)g,
                     ar->rank, (double)(c->opt.allreduce_timeout_ns > 0 ?
                                        c->opt.allreduce_timeout_ns : 10000000000ll) / 1e9,
                     n - 1, n == 2 ? "rank" : "ranks");
            real_fail(c, msg);
        }
        return -1;
    }
    for (int k = 0; k < n; k++) {
        ranks[k] = *t;
        ranks[k].data = (char *)m->buf + (size_t)k * bytes;
    }
    return g;
}

static int mpi_depart(real_ctx *c, const real_allreduce *ar, int64_t gen)
{
    (void)ar;
    mpi_coll *m = c->coll_ctx;
    return !real_failed(c) && gen == m->gen - 1 ? 0 : -1;
}

static void mpi_free(real_ctx *c)
{
    mpi_coll *m = c->coll_ctx;
    if (!m)
        return;
    pthread_mutex_lock(&mpi_lock);
    if (mpi_up && m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    pthread_mutex_unlock(&mpi_lock);
    free(m->buf);
    free(m);
    c->coll_ctx = NULL;
}

static const real_coll_transport mpi_transport = {
    .name = "mpi",
    .arrive = mpi_arrive,
    .depart = mpi_depart,
    .free = mpi_free,
};

int real_mpi_attach(real_ctx *c, char *err, size_t errlen)
{
    pthread_mutex_lock(&mpi_lock);
    bool up = mpi_up;
    int rank = mpi_rank, world = mpi_world;
    pthread_mutex_unlock(&mpi_lock);
    if (!up) {
        snprintf(err, errlen, "MPI is not initialised (real_mpi_init)");
        return -1;
    }
    if (c->opt.world != world || c->opt.rank != rank) {
        snprintf(err, errlen, "this process is rank %d of %d, not %d of %d", rank, world,
                 c->opt.rank, c->opt.world);
        return -1;
    }
    mpi_coll *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_lock(&mpi_lock);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    pthread_mutex_unlock(&mpi_lock);
    if (rc != MPI_SUCCESS) {
        free(m);
        snprintf(err, errlen, "MPI_Comm_dup failed");
        return -1;
    }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    c->coll_ctx = m;
    c->coll = &mpi_transport;
    return 0;
}

#else /* no MPI */

void real_mpi_abandon(void *buf) { free(buf); }

#define NO_MPI "this syncsim was built without MPI (no MPI was found, or -DSYNCSIM_MPI=OFF; " \
               "scripts/setup installs OpenMPI)"

bool real_mpi_built(void) { return false; }

int real_mpi_init(int *rank, int *world, char *err, size_t errlen)
{
    *rank = -1;
    *world = 0;
    snprintf(err, errlen, NO_MPI);
    return -1;
}

void real_mpi_finalize(void) {}

int real_mpi_attach(real_ctx *c, char *err, size_t errlen)
{
    (void)c;
    snprintf(err, errlen, NO_MPI);
    return -1;
}

int real_mpi_isend(const void *buf, size_t bytes, int peer, int tag, void **req, char *err,
                   size_t errlen)
{
    (void)buf, (void)bytes, (void)peer, (void)tag, (void)req;
    snprintf(err, errlen, NO_MPI);
    return -1;
}

int real_mpi_wait(void **req, int64_t timeout_ns, const char *what, char *err, size_t errlen)
{
    (void)timeout_ns, (void)what, (void)err, (void)errlen;
    return *req ? -1 : 0;
}

int real_mpi_recv(void *buf, size_t bytes, int peer, int tag, int64_t timeout_ns, char *err,
                  size_t errlen)
{
    (void)buf, (void)bytes, (void)peer, (void)tag, (void)timeout_ns;
    snprintf(err, errlen, NO_MPI);
    return -1;
}

#endif
