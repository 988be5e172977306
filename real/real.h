/*
 * real.h -- real backends on the CPU: f32 kernels, a thread pool with
 * selectable barriers, and an emulated asynchronous device (cpustream).
 *
 * One concept a file (docs/real-backends.md):
 *
 *   barrier.c   spin, futex, hybrid (spin for an adaptive budget, then
 *               sleep on a futex) and pthread barriers;
 *   pool.c      a pool of N threads (the caller is thread 0) that runs one
 *               job at a time, with a barrier between a job's phases;
 *   kernels.c   one f32 kernel per op of sched/ (f16/bf16 storage
 *               converted on load and store), each computing the chunk
 *               ith of nth of its destination;
 *   node.c      a node of a split as kernel arguments;
 *   buffer.c    host-addressable buffers shared by both backends;
 *   backend_cpu.c        `cpu`: a synchronous backend running each split on
 *                        the pool, one barrier between nodes;
 *   backend_cpustream.c  `cpustream`: an emulated device with its own
 *                        memory, an in-order queue served by a worker
 *                        thread, real events and optional seeded jitter;
 *   collective.c  the all-reduce rendezvous of the ranks of a
 *               tensor-split graph, with a timeout for schedules that hang;
 *   mpi.c       the same all-reduce where every rank is a process (`run
 *               --tp N` under mpirun): an allgather, polled with a timeout;
 *   spec.c      device specs, and the set of backends they make;
 *   values.c    deterministic weights and inputs;
 *   reference.c the reference run (the whole graph node by node) and the
 *               error of outputs against it;
 *   family.c    the `cpu`, `cpustream` and `cuda` backend families of `run`
 *               and their machine: this computer, on the wall clock;
 *   cuda/       the `cuda` backend, a plugin (libsyncsim_cuda.so) that
 *               spec.c loads: only where a CUDA toolkit was found.
 *
 * Backends implement sched_backend_iface and record nothing themselves:
 * wrapped by a recording (sched/record.c), they report the observed
 * CLOCK_MONOTONIC times of what they ran (sched_rec_done), and at trace
 * level `thread` the pool's chunks and barriers, so the checker verifies
 * real runs too.
 */
#ifndef SYNCSIM_REAL_H
#define SYNCSIM_REAL_H

#include "sched/sched.h"
#include "traces/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Status codes.                                                       */

#define REAL_STATUS_MAP(X)                                   \
    X(OK, "ok")                                              \
    X(EUNSUPPORTED, "unsupported op or type")

typedef enum {
#define REAL_STATUS_ENUM(name, msg) REAL_##name,
    REAL_STATUS_MAP(REAL_STATUS_ENUM)
#undef REAL_STATUS_ENUM
} real_status;

const char *real_status_str(real_status st);

/* ------------------------------------------------------------------ */
/* Barriers (barrier.c).                                               */

/* The one table of barriers is the scheduler's (sched/sched.h), which the
 * simulator prices too: the real ones run its rows. */
#define REAL_BARRIER_MAP(X) SCHED_BARRIER_MAP(X)

typedef enum {
#define REAL_BARRIER_ENUM(name, word, text) REAL_BARRIER_##name,
    REAL_BARRIER_MAP(REAL_BARRIER_ENUM)
#undef REAL_BARRIER_ENUM
    REAL_BARRIER_COUNT
} real_barrier_kind;

const char *real_barrier_str(real_barrier_kind k);
/* -1 when the word names no barrier. */
int real_barrier_parse(const char *word);
/* Their words for a message, from the table: "spin, futex, hybrid or pthread". */
const char *real_barrier_names(void);
/* What a barrier does, one line (help). */
const char *real_barrier_help(real_barrier_kind k);

typedef struct real_barrier real_barrier;

/* A reusable barrier for n threads. NULL when out of memory or n < 1. */
real_barrier *real_barrier_new(real_barrier_kind kind, int n);
void real_barrier_free(real_barrier *b);
/* Blocks until n threads have called it; returns true in exactly one
 * thread per generation (the last to arrive). Memory: everything a thread
 * did before its call happens before everything any thread does after. */
bool real_barrier_wait(real_barrier *b);
real_barrier_kind real_barrier_kind_of(const real_barrier *b);
/* Hybrid: the current spin budget (pause iterations); 0 for the others. */
uint32_t real_barrier_spin_budget(const real_barrier *b);
/* Whether n threads exceed the CPUs sched_getaffinity allows. */
bool real_barrier_oversubscribed(const real_barrier *b);
/* CPUs this process may run on (sched_getaffinity). */
int real_cpus_allowed(void);

/* ------------------------------------------------------------------ */
/* Thread pool (pool.c).                                               */

typedef struct real_pool real_pool;

/* A job: called once per thread with its index ith in [0, nth). */
typedef void (*real_job_fn)(void *arg, int ith, int nth);

/* n_threads in total: the caller of real_pool_run is thread 0, n_threads-1
 * workers are started. kind is the barrier between phases of a job (the
 * idle workers wait for the next job spin-then-sleep whatever the kind, so
 * an idle spin pool does not burn its CPUs). NULL on failure. */
real_pool *real_pool_new(int n_threads, real_barrier_kind kind);
void real_pool_free(real_pool *p);
int real_pool_threads(const real_pool *p);
/* Runs fn on every thread and returns when all returned. Not reentrant. */
void real_pool_run(real_pool *p, real_job_fn fn, void *arg);
/* Inside a job: the phase barrier; every thread of the pool must call it. */
bool real_pool_barrier(real_pool *p);
real_barrier *real_pool_get_barrier(real_pool *p);

/* ------------------------------------------------------------------ */
/* Kernels (kernels.c).                                                */

/* Half-precision storage. */
float real_f16_to_f32(uint16_t h);
uint16_t real_f32_to_f16(float f);
float real_bf16_to_f32(uint16_t h);
uint16_t real_f32_to_bf16(float f);

/* One source or destination of a kernel: its shape and type (from the
 * graph) and where its bytes are. Every tensor of sched/ is contiguous in
 * its shape: views, reshapes and permutes name bytes, they move none. */
typedef struct real_tensor {
    sched_dtype type;
    int64_t ne[SCHED_MAX_DIMS];
    void *data;
} real_tensor;

typedef struct real_kernel_args {
    sched_op op;
    real_tensor dst;
    real_tensor src[SCHED_MAX_SRC];
    int n_src;
    int32_t param;
    /* ALL_REDUCE: the other ranks' partial sums (src of every participant,
     * this one included); n_ranks 1 is a copy. */
    const real_tensor *ranks;
    int n_ranks;
    /* ALL_REDUCE: the bf16 wire format: each rank's contribution is rounded
     * to bf16 before the (f32, rank-order) sum, and the sum to bf16 after
     * it, as an all-reduce that moves bf16 data computes. */
    bool bf16_wire;
} real_kernel_args;

/* The chunk of the destination thread ith of nth writes, in bytes of dst:
 * [*lo, *hi). Chunks are contiguous and disjoint; a chunk may be empty. */
void real_kernel_chunk(const real_kernel_args *a, int ith, int nth, uint64_t *lo, uint64_t *hi);
/* Computes chunk ith of nth. Returns REAL_OK or REAL_EUNSUPPORTED. Views
 * (VIEW, RESHAPE, PERMUTE) and NONE do nothing. */
real_status real_kernel_run(const real_kernel_args *a, int ith, int nth);
/* Whether the kernels support t (op and types). */
bool real_kernel_supports(const sched_graph *g, const sched_tensor *t);
/* Element e of t as f32 / stores v as element e of t's type. */
float real_load_f32(const real_tensor *t, int64_t e);
void real_store_f32(const real_tensor *t, int64_t e, float v);

/* ------------------------------------------------------------------ */
/* Backends (backend_cpu.c, backend_cpustream.c, spec.c, values.c).    */

typedef enum {
    REAL_TRACE_STREAM = 0,  /* host and stream queues, one op per node */
    REAL_TRACE_THREAD = 1,  /* also: each pool thread a host queue, its chunks and barriers */
} real_trace_level;

typedef struct real_options {
    real_barrier_kind barrier;  /* the cpu pool's barrier; default HYBRID (0 is SPIN:
                                 * use real_options_default) */
    int threads;                /* cpu pool threads; 0: the CPUs allowed */
    real_trace_level trace_level;
    int64_t jitter_ns;          /* cpustream default jitter (a spec's jitter= wins) */
    uint64_t seed;              /* cpustream default seed (a spec's seed= wins) */
    /* Test only: the cpu pool skips the barrier after the node at this
     * position of a split (0 = first node); -1: never. Its chunks race. */
    int skip_barrier_after;
    /* How long a rank waits at an all_reduce rendezvous before the run fails
     * as hung (default 10 s). */
    int64_t allreduce_timeout_ns;
    /* One rank of a job over processes (`run --tp N` under mpirun): the set's
     * all-reduces go through MPI (real/mpi.c; real_mpi_init first) to the
     * other world - 1 ranks. world 0: every rank is a device of the set. */
    int rank, world;
} real_options;

void real_options_default(real_options *o);

/*
 * Creates the backends of a device spec, in priority order, the cpu last:
 *
 *   SPEC   := ITEM ("," ITEM)*
 *   ITEM   := "cpustream" [":" N] | "cpu" | KEY "=" VALUE
 *   KEY    := jitter (DURATION: 200us, 1ms, 500ns, 0) | seed (N) |
 *             threads (N) | mem (bytes, k/m/g suffix)
 *
 * A KEY=VALUE applies to the devices of the ITEM before it
 * ("cpustream:2,jitter=200us,seed=7,cpu,threads=2"). A spec without "cpu"
 * gets one appended. The backends record nothing unless wrapped by a
 * recording (sched_rec_wrap). On success returns 0 and *out (n backends;
 * free with real_backends_free); on error -1 with a one-line message in
 * errbuf.
 */
int real_backends_create(const char *spec, const real_options *opt, sched_backend ***out,
                         size_t *n, char *errbuf, size_t errlen);
/* Waits for every device, stops their threads and frees backends, their
 * buffers and the array. */
void real_backends_free(sched_backend **backends, size_t n);
/* Whether b is one of ours; its device index (cpustream N) or -1 (cpu). */
bool real_backend_is_real(const sched_backend *b);
/* The first failure of the set (an all_reduce that timed out: the schedule
 * hangs), one line; NULL while none. Once a set has failed, its devices
 * skip their remaining work and synchronize/graph_compute return -1. */
const char *real_backends_error(sched_backend **backends, size_t n);

/* Where a tensor's bytes are (its buffer must be ours); NULL when it has none. */
void *real_tensor_data(const sched_tensor *t);

/* Fills every weight and cache of a bound graph (sched_weights_bind) with
 * deterministic values from their names and seed. Returns 0 or -1. */
int real_init_weights(sched_backend **backends, size_t n, sched_graph *g, uint64_t seed);
/* Writes every user input of the planned graph g for evaluation eval:
 * token ids, positions eval*T+t, a causal mask, other inputs uniform in
 * [-1, 1]. Same values as the reference's. */
int real_set_inputs(sched_backend **backends, size_t n, sched_graph *g, uint64_t eval,
                    uint64_t seed);
/* A host tensor shaped like `like` (buffer from the cpu backend, the last),
 * for sched_get_output or get_async. Free with real_host_tensor_free. NULL
 * when out of memory. */
sched_tensor *real_host_tensor_new(sched_backend **backends, size_t n, const sched_tensor *like,
                                   const char *name);
void real_host_tensor_free(sched_backend **backends, size_t n, sched_tensor *t);
/* The host reads t (a host tensor) as f32 into out (nelements floats). */
int real_read_output(const sched_tensor *t, float *out);
/* Deterministic values (values.c), shared with the reference. */
void real_fill_weight(const sched_tensor *t, void *data, uint64_t seed);
void real_fill_input(const sched_graph *g, const sched_tensor *t, void *data, uint64_t eval,
                     uint64_t seed);

/* ------------------------------------------------------------------ */
/* Ranks over MPI (mpi.c).                                             */

/* Whether this syncsim was built with MPI (CMake SYNCSIM_MPI). */
bool real_mpi_built(void);
/* Initialises MPI once for this process (MPI_THREAD_SERIALIZED: the device
 * worker that runs an all-reduce and the host never call MPI at the same
 * time, and mpi.c serialises its calls under one lock) and gives its rank
 * and the world size. 0, or -1 with one line in err: this build has no
 * MPI, or the process was not started by mpirun (a singleton would wait
 * for no one), or MPI_Init_thread failed. */
int real_mpi_init(int *rank, int *world, char *err, size_t errlen);
/* MPI_Finalize when real_mpi_init succeeded (every rank must call it: it
 * waits for the others, so a rank ends only once every rank is done with
 * its database). Safe to call more than once. */
void real_mpi_finalize(void);

/* ------------------------------------------------------------------ */
/* The reference: the whole graph node by node, on one cpu thread or  */
/* chunked over a pool's threads (the same numbers either way).        */

typedef struct real_ref real_ref;

/* Takes a fresh (unplanned) graph of the same model; g is kept, not owned.
 * Weights, caches and inputs get the values real_init_weights and
 * real_set_inputs give for seed: call those with the same seed. */
real_ref *real_ref_new(sched_graph *g, uint64_t seed);
/* The same, but the weights and caches that share (an evaluated or fresh
 * reference of the same model, e.g. the prompt graph's) has under the same
 * name and size are share's memory: the two graphs see one KV cache, as the
 * prompt and decode graphs of a run do. Free r before share. */
real_ref *real_ref_new_shared(sched_graph *g, uint64_t seed, real_ref *share);
void real_ref_free(real_ref *r);
/* How the reference computes all_reduce groups: strategy "bf16" rounds
 * groups of at least bf16_min elements through bf16 (bf16_wire), as the
 * backends do; anything else ("ring", "butterfly", NULL) sums exactly.
 * Default: NULL. */
void real_ref_set_allreduce(real_ref *r, const char *strategy, int64_t bf16_min);
/* Runs every node of r chunked over pool's threads (real_pool_run), as the
 * cpu backend does: the same results as one thread, sooner. NULL: one
 * thread (the default). pool is not owned and must outlive r's use. */
void real_ref_set_pool(real_ref *r, real_pool *pool);
/* One evaluation with real_set_inputs' inputs for eval. Caches persist
 * between evaluations, as in the real run. Returns 0 or -1. */
int real_ref_eval(real_ref *r, uint64_t eval);
/* The f32 values of tensor `name` after the last evaluation (NULL: unknown
 * name); *n gets the number of elements. */
const float *real_ref_tensor(const real_ref *r, const char *name, size_t *n);

typedef struct real_error {
    double max_abs;         /* max |out - ref| */
    double max_rel;         /* max_abs / max |ref| (0 when ref is all zero) */
    double max_ref;         /* max |ref| */
    uint64_t n;             /* elements compared */
    uint64_t n_nan;         /* elements where exactly one side is NaN */
} real_error;

/* Accumulates the error of out against ref (n floats) into e (zero it first). */
void real_compare_outputs(const float *out, const float *ref, size_t n, real_error *e);

/* ------------------------------------------------------------------ */
/* The backend families of `run` (family.c).                           */

/* Outputs whose max relative error against the reference exceeds this (or
 * with a NaN on one side only) DIFFER from it. A correctly synchronised run
 * matches exactly; the tolerance only keeps the verdict robust. */
#define REAL_RUN_TOLERANCE 1e-4

/* `cpustream[:N]` and `cpu`: devices of this computer. A run on them
 * computes for real, times on the wall clock, reads every evaluation's
 * output asynchronously and compares it with the reference (the same
 * graphs node by node on the cpu's threads, same weights, caches and
 * inputs); outputs that differ make the run's verdict 1. */
extern const sched_family real_cpustream_family;
extern const sched_family real_cpu_family;
/* `cuda[:GPU]`: a logical device on a real GPU, beside `cpu` on the same
 * machine. Always listed: where the plugin (libsyncsim_cuda.so, real/cuda/)
 * was not built, or no GPU is usable, a spec naming it is refused in one
 * line (real_cuda_devices). */
extern const sched_family real_cuda_family;
/* The CUDA devices `cuda:N` may name; -1 with one line in err when none:
 * "this syncsim was built without CUDA (...)", "no CUDA device:
 * cudaGetDeviceCount: WHY", or "cannot load the CUDA backend: WHY". Loads
 * the plugin on first use. */
int real_cuda_devices(char *err, size_t errlen);
/* Whether the loaded plugin has NCCL (all_reduce across cuda devices). */
bool real_cuda_nccl(void);
/* What a machine these families opened found against the reference: the
 * error of every output checked, and *n_evals the evaluations; NULL for
 * any other machine. */
const real_error *real_machine_error(const sched_machine *m, uint64_t *n_evals);

#endif
