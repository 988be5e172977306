/*
 * sim.h -- the simulated device model: a discrete-event engine, device
 * model files, the cost model, the simulated backend and machine, and
 * replay.
 *
 * A sim_world is one simulated machine: a host thread that pays a cost for
 * every API call and blocks on syncs, and GPUs, each with one in-order
 * stream, a compute engine, a copy engine per direction and PCIe links
 * (plus NVLink where the model has it) whose bandwidth is shared fairly
 * between concurrent transfers. Time is integer nanoseconds. Its backends
 * implement sched_backend_iface; wrapped by a recording (sched_rec) they
 * report when each statement ran, in simulated time. sim_family is the
 * backend family of `run --devices MODEL` (family.c).
 */
#ifndef SYNCSIM_SIM_H
#define SYNCSIM_SIM_H

#include "sched/sched.h"
#include "traces/trace.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Device model files (sim/devices/NAME.dev, docs/device-model.md).    */

#define SIM_MAX_KERNELS 64
#define SIM_FAMILY_MAX 48

/* One line of a model's [kernels] section: the measured price of one
 * kernel family (sim_op_family): fixed_ns + flops / gflops + flops_f16 /
 * gflops_f16 + bytes / gbps, a rate of 0 leaving its amount out (f16 FLOPs
 * go at gflops when gflops_f16 is 0). */
typedef struct sim_kernel_rate {
    char family[SIM_FAMILY_MAX];    /* "mul_mat", "gemm"; "host.mul_mat" on a host queue */
    int64_t fixed_ns;
    double gflops;                  /* flops= per ns (GFLOP/s) */
    double gflops_f16;              /* flops_f16= per ns */
    double gbps;                    /* bytes moved (bytes=, else accessed) per ns (GB/s) */
} sim_kernel_rate;

typedef struct sim_model {
    char name[64];
    char path[4352];
    int gpus;                       /* [machine] */
    /* [host] */
    int64_t launch_ns, api_call_ns, sync_ns, event_record_ns, event_sync_ns, host_copy_ns;
    int cpu_cores, cpu_threads;
    double cpu_gflops, cpu_mem_gbps;
    int64_t pause_ns, syscall_ns, yield_ns, futex_wake_ns, spin_barrier_ns, oversub_barrier_ns;
    /* Not a key: the pool's barrier (sched_barrier_kind, `--barrier`; spin). */
    int pool_barrier;
    /* [gpu] */
    double gpu_tflops_f16, gpu_tflops_f32, gpu_mem_gbps;
    int64_t kernel_overhead_ns, event_wait_device_ns;
    /* [link] */
    double h2d_gbps, d2h_gbps, p2p_gbps;
    int nvlink;
    int64_t copy_latency_ns;
    /* [collective] */
    int64_t allreduce_base_ns, allreduce_step_ns;
    int64_t ipc_barrier_ns, kv_store_ns;
    /* [kernels] (optional): measured prices per kernel family, which replace
     * the roofline of [gpu] / [host] for the ops of those families. */
    sim_kernel_rate kernels[SIM_MAX_KERNELS];
    int n_kernels;
} sim_model;

/* Loads a device model: SPEC is a name from sim/devices ("h100-pcie"), or
 * a file path, optionally followed by ":gpus=N". Errors name the file, the
 * line and the column, or the missing key and its section. */
int sim_model_load(const char *spec, sim_model *out, trace_error *err);
/* Parses model text (name is used in messages). */
int sim_model_parse(const char *name, const char *text, sim_model *out, trace_error *err);
/* The folder of the shipped models: $SYNCSIM_DATA_DIR/devices, else
 * share/syncsim/devices next to the binary (installed, or the build tree),
 * else the source tree's sim/devices. */
const char *sim_devices_dir(void);
/* The shipped models' names and folder, "a, b in DIR, or a .dev file". */
void sim_models_list(char *buf, size_t cap);
/* Whether name is a shipped model, or names a file (has '/' or ends .dev). */
bool sim_model_exists(const char *name);
/* Writes m as a device model file that sim_model_parse reads back to m
 * (numbers to 6 significant digits):
 * the header comment (lines, each written after "# "), every key of
 * every section in table order with its value and, as its comment,
 * note(ctx, key) when that gives one, else the key's meaning; then the
 * [kernels] lines, commented by note(ctx, family). note may be NULL. */
void sim_model_write(FILE *out, const sim_model *m, const char *header,
                     const char *(*note)(void *ctx, const char *key), void *ctx);
/* Whether name can be a kernel family (letters, digits, _ . -; short
 * enough for "host." in front). */
bool sim_family_name_ok(const char *name);
/* The [kernels] line of family on a host queue or a stream, or NULL. */
const sim_kernel_rate *sim_model_kernel(const sim_model *m, const char *family, bool host);

/* ------------------------------------------------------------------ */
/* The cost model (cost.c): the simulated backend and replay price      */
/* statements with these, so a replay of a simulated run matches it.    */

/* Where a copy's bytes travel. */
typedef enum {
    SIM_PATH_NONE = 0,              /* no link: host to host, or within one device */
    SIM_PATH_H2D = 1,               /* host memory to a device */
    SIM_PATH_D2H = 2,               /* a device to host memory */
    SIM_PATH_P2P = 3,               /* one device to another */
} sim_path;

/* Host time of submitting a statement of kind to a stream. */
int64_t sim_cost_submit(const sim_model *m, trace_kind kind);
/* Fixed cost of a blocking statement after what it waits for ended: sync,
 * wait (on the host or a stream), a blocking copy by the host; 0 else. */
int64_t sim_cost_unblock(const sim_model *m, trace_kind kind, bool host);
/* The thread pool's barrier after a host op, as pool_barrier prices it
 * (cost.c's head comment). */
int64_t sim_cost_host_barrier(const sim_model *m);
/* An op: overhead + max(compute, memory); host: on the CPU backend's pool,
 * else on a stream. flops_half run at the half-precision peak. overhead_ns
 * < 0: the model's (kernel overhead, or the pool's barrier). */
int64_t sim_cost_op(const sim_model *m, bool host, uint64_t flops, uint64_t flops_half,
                    uint64_t bytes, int64_t overhead_ns);
/* The kernel family of an op statement of t, the one naming rule (cost.c):
 * its op= attribute (the op kind `syncsim run` records: mul_mat, add,
 * rms_norm, ...) when it can name a family (sim_family_name_ok), else a
 * family derived from its label, a captured
 * kernel's name (sim_kernel_family). Never NULL. */
const char *sim_op_family(const trace *t, const trace_stmt *s);
/* The family of a kernel name: gemm, conv, attention, softmax, norm,
 * reduce, elementwise, copy, memset or other (cost.c has the rules). */
const char *sim_kernel_family(const char *kernel_name);
/* An op of a family: its [kernels] line when the model has one and the op
 * names no fixed cost (overhead_ns < 0), else sim_cost_op. */
int64_t sim_cost_kernel(const sim_model *m, const char *family, bool host, uint64_t flops,
                        uint64_t flops_half, uint64_t bytes, int64_t overhead_ns);
/* The bandwidth of a path when nothing else uses its links (GB/s = B/ns). */
double sim_cost_link_gbps(const sim_model *m, sim_path path);
/* Nanoseconds to move bytes at gbps, rounded up to when the last byte lands. */
int64_t sim_cost_transfer_ns(uint64_t bytes, double gbps);
/* A copy alone on its links: latency + transfer, + host_copy_ns when the
 * host performs it; a copy over no link: latency on a stream, its bytes at
 * cpu_mem_gbps + host_copy_ns on the host. */
int64_t sim_cost_copy(const sim_model *m, bool host, sim_path path, uint64_t bytes);
/* An all-reduce of wire_bytes per rank over n ranks (ring, or butterfly). */
int64_t sim_cost_allreduce(const sim_model *m, uint64_t n, uint64_t wire_bytes, bool butterfly);

/* ------------------------------------------------------------------ */
/* The engine and the world.                                           */

typedef struct sim_world sim_world;

typedef struct sim_stats {
    int64_t end_ns;                 /* when the last queue went idle */
    int64_t host_busy_ns;           /* host time not blocked */
    int64_t gpu_busy_ns[16];        /* per GPU: compute and copies on its stream */
    int64_t gpu_compute_ns[16];
    uint64_t link_bytes[64];        /* per link (sim_world_link_name) */
    int n_links;
    uint64_t host_syncs;            /* host-blocking calls */
} sim_stats;

/* A world of model m. NULL when out of memory. */
sim_world *sim_world_new(const sim_model *m);
void sim_world_free(sim_world *w);
/* Backends: GPUs in order, the CPU last. Owned by the world. */
int sim_world_backends(sim_world *w, sched_backend ***out);
/* The host's current time. */
int64_t sim_world_now(const sim_world *w);
/* The host runs code of the program (not a backend's): a fixed cost plus
 * bytes through memory, priced by the cost model (sim_cost_op on the host
 * with overhead_ns). */
void sim_world_host_work(sim_world *w, int64_t overhead_ns, uint64_t bytes);
/* Runs every queue to completion. Returns 0, or -1 when a queue can never
 * complete (a hang). */
int sim_world_finish(sim_world *w);
/* Set when a host wait could never complete (the schedule hangs). */
bool sim_world_hung(const sim_world *w);
const sim_stats *sim_world_stats(const sim_world *w);
const char *sim_world_link_name(const sim_world *w, int link);

/* The raw engine, for tests: queue a transfer of bytes over link `link`
 * at the engine's current time; returns when both have been simulated. */
typedef struct sim_engine sim_engine;
sim_engine *sim_engine_new(void);
void sim_engine_free(sim_engine *e);
/* Adds a link of gbps GB/s; returns its id. */
int sim_engine_link(sim_engine *e, double gbps);
/* Starts a transfer at time at over the given links; returns its id. */
int sim_engine_transfer(sim_engine *e, int64_t at, const int *links, int n_links, uint64_t bytes);
/* Adds a timer at time at with a tag; timers and transfers complete in time order. */
int sim_engine_timer(sim_engine *e, int64_t at, int tag);
/* Runs until nothing is left; done_at[id] gets each transfer's end time and
 * order[] the ids of completed timers/transfers ((kind << 24) | id) in
 * completion order. Returns the number of completions. */
int sim_engine_drain(sim_engine *e, int64_t *xfer_done_at, int max_xfer, int *order, int max_order);

/* ------------------------------------------------------------------ */
/* The backend family of device models (family.c).                     */

/* `--devices MODEL[:gpus=N]`: a simulated machine from a device model of
 * the shipped data (sim_devices_dir) or a .dev file. */
extern const sched_family sim_family;
/* The world of a machine sim_family opened (its stats, link names); NULL
 * for any other machine. */
const sim_world *sim_machine_world(const sched_machine *m);

/* ------------------------------------------------------------------ */
/* Replay.                                                             */

typedef struct sim_replay_opts {
    const sim_model *model;         /* durations and costs from here */
    bool durations_recorded;        /* use dur= where present */
    const uint64_t *drop_seq;       /* syncs to drop (statements by seq) */
    int n_drop;
    /* Per seq, NULL for none: drop the wait, sync, await or barrier
     * statements marked (a barrier generation goes whole when every
     * participant is marked; the caller marks them so). */
    const bool *drop;
    sched_sink *out;                /* NULL: no output trace */
    /* Per seq, filled when not NULL (the caller's arrays of the trace's
     * statement count): start and end of each statement, from the replay's
     * first start (TRACE_TIME_NONE for a dropped one), and whether it is on
     * the critical path -- the chain back from the statement that ends
     * last through what decided each end (the queue's previous statement,
     * the submission, or what it waited for). */
    int64_t *start, *end;
    bool *critical;
} sim_replay_opts;

typedef struct sim_replay_result {
    int64_t makespan_ns;
    int64_t recorded_makespan_ns;   /* from t= + dur= of the input, -1 when absent */
    /* The median over statements with a recorded t= of |replayed start -
     * recorded start|, both from their trace's first start; -1 when no
     * statement has t=. */
    int64_t median_start_error_ns;
    uint64_t n_start_compared;      /* statements in that median */
    uint32_t n_queues;
    int64_t busy_ns[256];
    char queue_names[256][32];
    uint64_t n_stmts, n_dropped;
} sim_replay_result;

/* What the cost model prices a statement by, as the trace says it (the
 * attributes of docs/device-model.md), for replay and calibrate alike. */
typedef struct sim_stmt_cost {
    const char *family;             /* op: sim_op_family; else NULL */
    uint64_t flops, flops_half;     /* op: flops=, flops_f16= (0 when absent) */
    uint64_t bytes;                 /* op: bytes= else the bytes it accesses; copy: bytes= else
                                     * the bytes it reads */
    int64_t overhead_ns;            /* op: overhead_ns=; -1: the model's */
    sim_path path;                  /* copy: between the places of its source and destination */
} sim_stmt_cost;
void sim_stmt_cost_of(const trace *t, const trace_stmt *s, sim_stmt_cost *out);

/* Re-times every statement of r honouring happens-before. Returns 0 or -1
 * with err filled (a hang, bad input). */
int sim_replay(trace_reader *r, const sim_replay_opts *o, sim_replay_result *res, trace_error *err);

/* ------------------------------------------------------------------ */
/* Calibration (calibrate.c): a device model fitted to a recorded run.  */

/* One number calibrate reports: a key of the model, or a [kernels] family. */
typedef struct sim_calib_param {
    char key[SIM_FAMILY_MAX + 8];   /* "launch_ns", "h2d_gbps", a family ("mul_mat") */
    char unit[16];                  /* "ns", "GB/s", "GFLOP/s", "ns/op" */
    bool family;                    /* a [kernels] line: rate; value is its fixed_ns */
    bool fitted;                    /* false: kept from the base model (note says why) */
    bool info;                      /* measured and reported, not a key of the model */
    double value;                   /* in unit */
    sim_kernel_rate rate;           /* family: the line */
    uint64_t samples;
    double r2;                      /* R^2 of a fitted line; NAN when none was fitted */
    double rms_ns;                  /* RMS residual of the fit (ns); NAN when not fitted */
    char note[224];                 /* where the number came from, for people and the file */
} sim_calib_param;

typedef struct sim_calib {
    sim_model model;                /* the base with every fitted number in place */
    sim_calib_param *params;        /* in the order of the table calibrate prints */
    uint32_t n_params, cap_params;
    /* Host time between timed host statements that the fitted submission
     * costs do not explain (replay, which knows only statements and
     * submissions, leaves it out), and the gaps left out of the fit. */
    double host_unpriced_ns;
    uint64_t gaps_left_out;
} sim_calib;

/* Fits out->model to the observed times of t (in-memory statements),
 * keeping base's other numbers. Returns 0, or -1 with err (a trace
 * without observed times, out of memory). Free with sim_calib_free. */
int sim_calibrate(const trace *t, const sim_model *base, sim_calib *out, trace_error *err);
void sim_calib_free(sim_calib *c);
/* The host time of t between its timed host statements that submissions
 * priced by m do not explain (ns): what replay cannot show, as
 * sim_calib.host_unpriced_ns is for the calibrated trace. -1 with err. */
double sim_calib_host_unpriced(const trace *t, const sim_model *m, trace_error *err);
/* The parameter of key, or NULL. */
const sim_calib_param *sim_calib_find(const sim_calib *c, const char *key);

#endif
