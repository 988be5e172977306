/*
 * real_int.h -- what the files of real/ share (not public).
 */
#ifndef SYNCSIM_REAL_INT_H
#define SYNCSIM_REAL_INT_H

#include "real.h"

#include <pthread.h>
#include <stdatomic.h>

#define REAL_MAX_BACKENDS 16

struct real_ctx;
struct real_allreduce;

/* How a set's all-reduces reach the other ranks: the in-process rendezvous
 * (collective.c, every rank a device of this set) or MPI (mpi.c, every
 * rank a process). real_set_create picks one (spec.c); real_coll_arrive and
 * real_coll_depart go through it. */
typedef struct real_coll_transport {
    const char *name;
    int64_t (*arrive)(struct real_ctx *c, const struct real_allreduce *ar, const real_tensor *t,
                      real_tensor *ranks);
    int (*depart)(struct real_ctx *c, const struct real_allreduce *ar, int64_t gen);
    void (*free)(struct real_ctx *c);       /* NULL: nothing to free */
} real_coll_transport;

extern const real_coll_transport real_coll_local;

/* One set of backends made by real_backends_create: they share the events'
 * lock and the all-reduce rendezvous. */
typedef struct real_ctx {
    real_options opt;
    /* Events: one lock and condition for every event of the set. */
    pthread_mutex_t ev_lock;
    pthread_cond_t ev_cond;
    sched_backend *backends[REAL_MAX_BACKENDS];
    int n_backends;
    /* All-reduce rendezvous (collective.c): one lock and condition (on
     * CLOCK_MONOTONIC) for every group of the set. */
    pthread_mutex_t coll_lock;
    pthread_cond_t coll_cond;
    struct real_coll_slot **slots;
    int n_slots, cap_slots;
    /* The all-reduce's transport (real_coll_local unless an MPI rank) and
     * its state. */
    const real_coll_transport *coll;
    void *coll_ctx;
    /* The set's first failure; set once, under coll_lock. */
    atomic_bool failed;
    char fail_msg[512];
} real_ctx;

/* Both backends' contexts start with this (a common initial sequence), so
 * that any of them leads back to the set. */
typedef struct real_backend_hdr {
    sched_backend base;
    real_ctx *rc;
} real_backend_hdr;

/* An event of a cpustream device. (Buffers: sched_buffer.ctx is their bytes.) */
typedef struct real_event {
    sched_event base;
    uint64_t issued;                /* records queued (host side) */
    uint64_t completed;             /* records executed (under ev_lock) */
} real_event;

int64_t real_now_ns(void);

/* Kernel arguments of node `node` of x, sources through x->src_of (node.c).
 * Returns 0, or -1 when a tensor has no memory. */
int real_node_args(const sched_exec *x, int32_t node, real_kernel_args *a);

/* All-reduce (collective.c). One rank's all_reduce node, resolved when the
 * host submits it (the rank is the node's position among the nodes of its
 * group in graph order, n_ranks their number). */
typedef struct real_allreduce {
    int32_t group;
    int rank, n_ranks;
    bool bf16;                      /* through the bf16 wire */
    real_tensor src, dst;           /* this rank's partial sum and result */
    real_tensor wire;               /* bf16: this rank's wire (shape of src) */
    void *sum;                      /* bf16: the sum before it lands in wire (owned) */
    sched_ticket to_wire, coll, from_wire;  /* statements to report */
} real_allreduce;

/* Every rank a process (mpi.c): makes MPI the set's transport. 0, or -1
 * with one line in err (this build has no MPI, MPI is not initialised,
 * or the set is no rank of the job). */
int real_mpi_attach(real_ctx *c, char *err, size_t errlen);

/* Point to point between the ranks of the job (mpi.c), on the job's message
 * communicator (the trace's `world`): what `run --tp` sends of its outputs
 * (family.c). An MPI_Isend of bytes to rank peer with tag: 0 and *req, or
 * -1 with one line in err. */
int real_mpi_isend(const void *buf, size_t bytes, int peer, int tag, void **req, char *err,
                   size_t errlen);
/* MPI_Wait of *req as an MPI_Test loop bounded by timeout_ns; frees it. 0,
 * or -1 with one line naming `what` it waited for. */
int real_mpi_wait(void **req, int64_t timeout_ns, const char *what, char *err, size_t errlen);
/* A blocking receive of bytes from peer with tag (MPI_Irecv and the same
 * bounded wait). 0, or -1 with one line. After -1 (and after real_mpi_wait
 * timed out) the request may still be pending: its buffer must not be
 * freed. */
int real_mpi_recv(void *buf, size_t bytes, int peer, int tag, int64_t timeout_ns, char *err,
                  size_t errlen);
/* Keeps buf (of a request that may be pending) until the process ends. */
void real_mpi_abandon(void *buf);

void real_coll_init(real_ctx *c);
void real_coll_destroy(real_ctx *c);
/* Rank ar->rank joins its next generation of ar->group, publishing t (its
 * source, or its bf16 wire), and blocks until all ar->n_ranks ranks have:
 * then ranks[0..n) are every rank's t, in rank order, and it returns the
 * generation. -1 on timeout (c->opt.allreduce_timeout_ns; the set fails
 * with a message naming the ranks waited for), a mismatch between the
 * ranks, or a set that failed already. */
int64_t real_coll_arrive(real_ctx *c, const real_allreduce *ar, const real_tensor *t,
                         real_tensor *ranks);
/* After reading the others' tensors: blocks until every rank has read
 * them (so none overwrites its source early). 0, or -1 as above. */
int real_coll_depart(real_ctx *c, const real_allreduce *ar, int64_t gen);
/* Marks the set failed with msg (the first failure wins) and wakes every
 * rank waiting at a rendezvous. */
void real_fail(real_ctx *c, const char *msg);
bool real_failed(real_ctx *c);

/* Backends. */
sched_backend *real_cpu_new(real_ctx *c, int threads, real_barrier_kind barrier, char *err,
                            size_t errlen);
void real_cpu_free(sched_backend *b);
typedef struct real_cs_params {
    int index;
    int threads;
    int64_t jitter_ns;
    uint64_t seed;
    uint64_t mem;
} real_cs_params;
sched_backend *real_cs_new(real_ctx *c, const real_cs_params *p, char *err, size_t errlen);
void real_cs_free(sched_backend *b);
bool real_is_cs(const sched_backend *b);
bool real_is_cpu(const sched_backend *b);
/* A logical device of the cuda family (spec.c loads its plugin). */
bool real_is_cuda(const sched_backend *b);
/* The pool threads of a cpu backend; 0 for any other. */
int real_cpu_threads(const sched_backend *b);
real_ctx *real_ctx_of(const sched_backend *b);

/* Host memory while CUDA devices are open (spec.c, through the plugin):
 * pinned and zeroed, or NULL (no CUDA device open, or CUDA refused);
 * freed with real_host_free. real_copy_bytes: the host's blocking copy,
 * which reaches device memory too when CUDA devices are open. */
void *real_host_alloc(size_t size);
void real_host_free(void *p);
int real_copy_bytes(void *dst, const void *src, size_t n);

/* Buffers shared by both backends (buffer.c). */
sched_buffer *real_buffer_new(sched_backend *b, const char *name, uint64_t size,
                              sched_buffer_usage usage, bool host);
void real_buffer_free(sched_buffer *buf);

/* The device spec (spec.c): the devices a checked spec makes. */
typedef struct real_spec_item {
    bool cpu;
    int gpu;                        /* cuda: the physical GPU (the N of cuda:N); else -1 */
    int count;
    real_cs_params cs;
    int threads;
} real_spec_item;

/* The items of spec (of the cpu and cpustream families), options applied,
 * a cpu appended when missing. Returns the number of items, or -1 with
 * one line naming the spec in err. */
int real_spec_items(const sched_spec *spec, const real_options *o, real_spec_item *items,
                    char *err, size_t errlen);
/* The backends of a parsed spec: as real_backends_create. */
int real_set_create(const sched_spec *spec, const real_options *opt, sched_backend ***out,
                    size_t *n, char *errbuf, size_t errlen);
/* The cpu and cpustream families, NULL-terminated (a spec given as text). */
extern const sched_family *const real_families[];

#endif
