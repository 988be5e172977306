/*
 * sched.h -- the graph model, the backend interface, the scheduler, the
 * recording of backends and the `run` driver.
 *
 * A graph is a list of tensors in execution order: leafs (weights, the KV
 * cache, user inputs) and nodes (ops over earlier tensors). The scheduler
 * follows ggml's backend scheduler (ggml-backend.cpp):
 *
 *   1. assign every tensor to a backend in four passes (docs/scheduler.md):
 *      buffers and weights pin ops, graph inputs go to the CPU; expansion
 *      down then up; upgrade to a higher-priority backend that can use the
 *      same buffers; leftovers (views follow their source, the rest take
 *      the first backend that supports them). A user's assignment stays.
 *   2. cut the node list into splits where the backend changes; a source
 *      that lives on another backend becomes a split input, copied into
 *      one copy per pipeline slot (n_copies) on the split's backend;
 *   3. allocate every intermediate tensor in its backend's arena by
 *      liveness (the slots are views of the arena in the trace);
 *   4. run the splits under a sync policy -- a table that says where syncs,
 *      event waits and records go -- rotating cur_copy per evaluation.
 *
 * Backends plug in through sched_backend_iface (one struct of function
 * pointers); the scheduler never knows whether it drives a simulated or a
 * real device. Three layers around it, each in one file:
 *
 *   record.c  sched_rec wraps backends (record_wrap.c): the scheduler
 *             drives the wrapped ones, and every call becomes trace
 *             statements in one place (a backend only reports when its
 *             work ran: sched_rec_done);
 *   run.c     the `run` driver: a model or graph file, prompt ubatches and
 *             decode tokens the way llama.cpp drives ggml, on any machine;
 *   family.c  backend families (sim device models, cpu, cpustream, ...):
 *             how a --devices spec names devices and opens their machine.
 *
 * Allowed dependencies: sched -> traces only. sim/ and real/ implement
 * backends, machines and families; cli/run_families.c lists the families.
 */
#ifndef SYNCSIM_SCHED_H
#define SYNCSIM_SCHED_H

#include "traces/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------ */
/* Status codes: one list gives the enum and the messages.             */

#define SCHED_STATUS_MAP(X)                                    \
    X(OK, "ok")                                                \
    X(ENOMEM, "out of memory")                                 \
    X(EUSAGE, "invalid argument")                              \
    X(EUNSUPPORTED, "no backend supports the op")              \
    X(EBACKEND, "backend call failed")

typedef enum {
#define SCHED_STATUS_ENUM(name, msg) SCHED_##name,
    SCHED_STATUS_MAP(SCHED_STATUS_ENUM)
#undef SCHED_STATUS_ENUM
} sched_status;

const char *sched_status_str(sched_status st);

/* ------------------------------------------------------------------ */
/* Tensors and ops.                                                    */

#define SCHED_DTYPE_MAP(X) \
    X(F32, "f32", 4)       \
    X(F16, "f16", 2)       \
    X(BF16, "bf16", 2)     \
    X(I32, "i32", 4)

typedef enum {
#define SCHED_DTYPE_ENUM(name, word, size) SCHED_##name,
    SCHED_DTYPE_MAP(SCHED_DTYPE_ENUM)
#undef SCHED_DTYPE_ENUM
    SCHED_DTYPE_COUNT
} sched_dtype;

const char *sched_dtype_str(sched_dtype t);
int sched_dtype_parse(const char *word);  /* -1 when unknown */
size_t sched_dtype_size(sched_dtype t);

/* Ops: name, number of sources (-1: variable), whether it is a view (no
 * compute, shares its first source's memory), whether ggml-alloc may put
 * its result in a source's memory (ggml_op_can_inplace at the pinned
 * commit: add, mul, scale, rms_norm, soft_max, unary, rope, ...). */
#define SCHED_OP_MAP(X)                   \
    X(NONE, "leaf", 0, 0, 0)              \
    X(MUL_MAT, "mul_mat", 2, 0, 0)        \
    X(ADD, "add", 2, 0, 1)                \
    X(MUL, "mul", 2, 0, 1)                \
    X(SCALE, "scale", 1, 0, 1)            \
    X(RMS_NORM, "rms_norm", 1, 0, 1)      \
    X(SOFTMAX, "softmax", -1, 0, 1)       \
    X(SILU, "silu", 1, 0, 1)              \
    X(ROPE, "rope", 2, 0, 1)              \
    X(GET_ROWS, "get_rows", 2, 0, 0)      \
    X(CPY, "cpy", 2, 0, 0)                \
    X(CONVERT, "convert", 1, 0, 0)        \
    X(VIEW, "view", 1, 1, 0)              \
    X(RESHAPE, "reshape", 1, 1, 0)        \
    X(PERMUTE, "permute", 1, 1, 0)        \
    X(CONCAT, "concat", 2, 0, 0)          \
    X(ALL_REDUCE, "all_reduce", 1, 0, 0)  \
    X(MUL_MAT_ID, "mul_mat_id", 3, 0, 0)

typedef enum {
#define SCHED_OP_ENUM(name, word, nsrc, view, inplace) SCHED_OP_##name,
    SCHED_OP_MAP(SCHED_OP_ENUM)
#undef SCHED_OP_ENUM
    SCHED_OP_COUNT
} sched_op;

const char *sched_op_str(sched_op op);
int sched_op_parse(const char *word);     /* -1 when unknown */
bool sched_op_is_view(sched_op op);
/* Whether ggml-alloc may write the op's result over a source (in place). */
bool sched_op_can_inplace(sched_op op);
/* Sources the op takes: 1..SCHED_MAX_SRC, or -1 for "1 or 2" (softmax mask). */
int sched_op_n_src(sched_op op);

#define SCHED_MAX_SRC 4
#define SCHED_MAX_DIMS 4
#define SCHED_NAME_MAX 64

#define SCHED_FLAG_INPUT 1u     /* written by the user before each evaluation */
#define SCHED_FLAG_OUTPUT 2u    /* read by the user after an evaluation; never reused */
#define SCHED_FLAG_WEIGHT 4u    /* lives in a weights buffer from the start */
#define SCHED_FLAG_CACHE 8u     /* lives in a buffer (KV cache) from the start */
#define SCHED_FLAG_COPY 16u     /* a split input copy made by the scheduler */

/* How a tensor got its backend (the "cause" of the split graph). */
#define SCHED_CAUSE_MAP(X)                                                   \
    X(NONE, 0, "unassigned")                                                 \
    X(USER, 0, "assigned by the user")                                       \
    X(BUFFER, 1, "lives in a buffer of the backend")                         \
    X(WEIGHT, 1, "op follows its weight")                                    \
    X(INPUT, 1, "graph input goes to the CPU")                               \
    X(EXPAND_DOWN, 2, "expanded down from the previous node")                \
    X(EXPAND_UP, 2, "expanded up from the next node")                        \
    X(EXPAND_REST_DOWN, 2, "expanded down (any backend)")                    \
    X(EXPAND_REST_UP, 2, "expanded up (any backend)")                        \
    X(UPGRADE, 3, "upgraded to a higher-priority backend with the same buffers") \
    X(VIEW, 4, "view follows its source")                                    \
    X(FIRST_SUPPORTED, 4, "first backend that supports the op")              \
    X(CONSUMER, 4, "leaf follows its consumer")                              \
    X(COPY, 0, "copy of a split input")                                     \
    X(OFFLOAD, 1, "offloaded from its host weight (op_offload, batch >= 32)") \
    X(MOST_SUPPORTED, 3, "backend that can use the most of its sources")

typedef enum {
#define SCHED_CAUSE_ENUM(name, pass, text) SCHED_CAUSE_##name,
    SCHED_CAUSE_MAP(SCHED_CAUSE_ENUM)
#undef SCHED_CAUSE_ENUM
    SCHED_CAUSE_COUNT
} sched_cause;

const char *sched_cause_str(sched_cause c);
int sched_cause_pass(sched_cause c);

typedef struct sched_buffer sched_buffer;
typedef struct sched_backend sched_backend;

typedef struct sched_tensor {
    char name[SCHED_NAME_MAX];
    sched_dtype type;
    int n_dims;
    int64_t ne[SCHED_MAX_DIMS];     /* ne[0] is the row length, unused dims 1 */
    sched_op op;
    int32_t src[SCHED_MAX_SRC];     /* tensor indices, -1 when absent */
    int32_t view_src;               /* views: the tensor whose bytes they name; else -1 */
    uint64_t view_offs;             /* views: byte offset in view_src */
    uint32_t flags;                 /* SCHED_FLAG_* */
    int32_t param;                  /* op parameter (all_reduce: group id) */
    int home;                       /* placement of weights/caches: device index, -1 = CPU */
    int user_backend;               /* the user's assignment, -1 = none */

    /* Filled by the scheduler. */
    int backend;                    /* assigned backend, -1 before assignment */
    sched_cause cause;
    int32_t copy_of, copy_slot;     /* SCHED_FLAG_COPY: source tensor and pipeline slot */
    sched_buffer *buffer;           /* where its bytes live (NULL: not allocated) */
    uint64_t offset;
    uint32_t trace_view;            /* buffer index in the trace once declared */
} sched_tensor;

typedef struct sched_graph {
    sched_tensor *tensors;          /* in execution order */
    int32_t n_tensors, cap_tensors;
    char name[SCHED_NAME_MAX];
    /* A part of a multi-process job (MPI, docs/multi-rank.md): world > 0
     * makes each all_reduce node rank `rank` of `world` ranks, the other
     * ranks being other processes; 0: every rank of a group is in this
     * graph (sched_allreduce_group). */
    int rank, world;
} sched_graph;

sched_graph *sched_graph_new(const char *name);
void sched_graph_free(sched_graph *g);
/* Adds a tensor; returns its index or -1 (out of memory). ne has n_dims entries. */
int32_t sched_graph_leaf(sched_graph *g, const char *name, sched_dtype type, int n_dims,
                         const int64_t *ne, uint32_t flags);
/* Adds an op over srcs (-1 padded); the shape is inferred from the op
 * (see graph.c). Returns its index or -1 (bad shapes, out of memory). */
int32_t sched_graph_op(sched_graph *g, const char *name, sched_op op, const int32_t *srcs,
                       int n_src);
/* A view of src with an explicit shape and byte offset (VIEW/RESHAPE/PERMUTE). */
int32_t sched_graph_view(sched_graph *g, const char *name, sched_op op, int32_t src,
                         sched_dtype type, int n_dims, const int64_t *ne, uint64_t offs);
int32_t sched_graph_find(const sched_graph *g, const char *name);
/* Prefixes the names of every tensor but weights and caches (so that the
 * graphs of one run declare distinct trace names). */
void sched_graph_prefix_names(sched_graph *g, const char *prefix);

int64_t sched_tensor_nelements(const sched_tensor *t);
uint64_t sched_tensor_nbytes(const sched_tensor *t);
/* FLOPs and bytes moved to and from memory by a node (0 for leafs and views). */
uint64_t sched_node_flops(const sched_graph *g, const sched_tensor *t);
uint64_t sched_node_bytes(const sched_graph *g, const sched_tensor *t);
/* Whether a node computes at half precision (a mul_mat of f16 or bf16
 * weights): device models price its FLOPs at their f16 peak. */
bool sched_node_half(const sched_graph *g, const sched_tensor *t);
/* The all_reduce group of node (its param): *rank, its position among the
 * group's nodes in graph order, and *n, their number. O(tensors). */
void sched_allreduce_group(const sched_graph *g, int32_t node, int *rank, int *n);
/* A deep copy of g (a fresh graph to evaluate elsewhere: the reference of
 * a real run), before any planning. NULL when out of memory. */
sched_graph *sched_graph_copy(const sched_graph *g);
/* "4096x32 f16" */
void sched_tensor_shape_str(const sched_tensor *t, char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* Generators: "mlp:...", "llama:n_layer=32,...", "tp:...".            */

typedef enum { SCHED_SPLIT_LAYER = 0, SCHED_SPLIT_TENSOR = 1 } sched_split_mode;

typedef struct sched_model_params {
    char kind[16];                  /* "mlp", "llama", "tp", "moe" */
    int n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    int n_expert, n_expert_used;    /* moe: experts per layer, used per token (top-k) */
    int batch, ubatch;              /* tokens per evaluation of the prompt */
    sched_dtype dtype;              /* weights */
    int n_devices;                  /* devices the weights are placed on */
    sched_split_mode split_mode;    /* layer (llama) or tensor (tp) */
    /* Tensor split over processes: build only rank `rank`'s shard of the
     * n_devices ranks, on device 0, and its own output head (the graph's
     * world is n_devices). false: every shard, rank d on device d. */
    bool one_rank;
    int rank;
    /* The same under a layer split (a pipeline over processes, run --pp):
     * rank `rank`'s stage only -- the layers l with l * n_devices / n_layer
     * == rank, the split a single process makes over n_devices devices --
     * on device 0. Rank 0 starts from the token embedding, a later rank
     * from the input `inp_act` [n_embd, T] (the previous stage's output);
     * the last rank ends with the output head, an earlier one with its last
     * layer's output (flagged output). sched_model_stage says which layers. */
    /* A seeded bug of such a rank (run --break rank-skips-allreduce): its
     * first all_reduce is left out (the partial sum is used as it is). */
    bool skip_first_allreduce;
} sched_model_params;

/* The layers [*lo, *hi) of pipeline stage `rank` of n_stages under a
 * layer split (empty when there are more stages than layers). */
void sched_model_stage(const sched_model_params *p, int rank, int n_stages, int *lo, int *hi);

/* Defaults for a kind (a small llama unless told otherwise). */
void sched_model_defaults(sched_model_params *p, const char *kind);
/* Parses "KIND[:key=value,...]" into p (defaults first). On error fills
 * err with what was expected and returns -1. */
int sched_model_parse(const char *spec, sched_model_params *p, char *err, size_t err_cap);
/* Builds the graph of one evaluation of n_tokens tokens. Weights get
 * home = device (layer split: by layer; tensor split: by shard); the token
 * embedding stays on the CPU (home -1), as llama.cpp keeps its input layer. */
sched_graph *sched_model_build(const sched_model_params *p, int n_tokens);

/* ------------------------------------------------------------------ */
/* The graph file format (docs/graph-format.md).                       */

/* Parses a graph file; on error returns NULL with err = "file:line:col: ...". */
sched_graph *sched_graph_parse_file(const char *path, trace_error *err);
sched_graph *sched_graph_parse_string(const char *name, const char *text, trace_error *err);
/* Writes g in the graph format. Returns 0 or -1. */
int sched_graph_write(FILE *out, const sched_graph *g);

/* ------------------------------------------------------------------ */
/* The trace sink: where a recording goes.                              */

typedef struct sched_sink_iface {
    /* Declarations and statements, as trace_recorder_*: return the index or
     * seq, TRACE_NONE on failure. Required. */
    uint32_t (*queue)(void *ctx, const char *name, trace_queue_kind kind, const char *device);
    uint32_t (*buffer)(void *ctx, const char *name, uint64_t size, trace_loc loc,
                       const char *device, bool pinned);
    uint32_t (*view)(void *ctx, const char *name, uint32_t parent, uint64_t offset, uint64_t size);
    uint32_t (*intern)(void *ctx, const char *s);
    uint64_t (*append)(void *ctx, const trace_stmt *s);
    /* The times of a statement appended without them (a real device's work
     * completes after the host submitted it). NULL: such times are lost. */
    void (*set_time)(void *ctx, uint64_t seq, int64_t t, int64_t dur);
    /* Run metadata. NULL: metadata is dropped. */
    int (*meta)(void *ctx, const char *key, const char *value);
    /* The split graph. NULL: it is not stored. */
    int (*graph_node)(void *ctx, const trace_graph_node *n);
    int (*graph_edge)(void *ctx, const trace_graph_edge *e);
    int (*graph_split)(void *ctx, const trace_graph_split *s);
} sched_sink_iface;

typedef struct sched_sink {
    const sched_sink_iface *iface;
    void *ctx;
} sched_sink;

/* A sink into an in-memory trace (not owned); the split graph is dropped,
 * and so are times learnt after a statement was appended. */
sched_sink sched_sink_memory(trace *t);
/* A sink into the SQLite recorder (not owned). */
sched_sink sched_sink_recorder(trace_recorder *rec);
/* A sink that keeps nothing but counts, numbering what it is given as a
 * fresh trace would (benchmarks: what producing a trace costs). */
typedef struct sched_null_sink {
    uint32_t strings, queues, buffers;
    uint64_t stmts;
} sched_null_sink;
sched_sink sched_sink_null(sched_null_sink *counts);
/* Declares the trace view of a tensor on first use and returns it. */
uint32_t sched_tensor_view(sched_sink *sink, sched_tensor *t);

/* ------------------------------------------------------------------ */
/* The backend interface.                                              */

typedef enum {
    SCHED_DEVICE_CPU = 0,
    SCHED_DEVICE_GPU = 1,
} sched_device_kind;

typedef enum {
    SCHED_BUFFER_WEIGHTS = 0,       /* weights and caches: placed once */
    SCHED_BUFFER_COMPUTE = 1,       /* the allocator's arena */
    SCHED_BUFFER_HOST = 2,          /* user inputs and outputs (host memory) */
} sched_buffer_usage;

/* convert's param: 0 rounds to nearest even; this truncates to bf16 (the
 * wire of ggml-sycl's all-reduce). */
#define SCHED_CONVERT_TRUNCATE 1

/* The all-reduce strategies of tensor-split models: one table gives the
 * enum, the word and the help text (sched/allreduce.c says what each one's
 * statements are). RING stays first: a zeroed sched_options means ring. */
#define SCHED_ALLREDUCE_MAP(X)                                                       \
    X(RING, "ring", "one opaque collective per rank, priced as a ring")             \
    X(BUTTERFLY, "butterfly", "ggml's meta-backend fallback as statements: log2(n) rounds of peer " \
      "copies into inboxes and adds; an inbox is refilled once its owner added it")  \
    X(BF16, "bf16", "one opaque collective on bf16 data from --bf16-min elements (32768)") \
    X(AUTO, "auto", "as ggml picks: nccl on CUDA devices (simulated GPUs), sycl on 2 SYCL " \
      "devices, else butterfly (the default of `run`)")                              \
    X(NCCL, "nccl", "ggml-cuda: one NCCL collective per rank; bf16 (round to nearest) from " \
      "32768, 131072, 262144 elements for 2, 3, >= 4 devices")                       \
    X(SYCL, "sycl", "ggml-sycl, 2 devices, as statements: f32 peer copy + add; from 32768 " \
      "elements the peer's half goes as bf16 (truncated)")                           \
    X(BUTTERFLY_GGML, "butterfly-ggml", "broken on purpose: the butterfly exactly as ggml's " \
      "fallback, which refills a peer's inbox without waiting for its add (WAR race)")

typedef enum {
#define SCHED_ALLREDUCE_ENUM(name, word, text) SCHED_ALLREDUCE_##name,
    SCHED_ALLREDUCE_MAP(SCHED_ALLREDUCE_ENUM)
#undef SCHED_ALLREDUCE_ENUM
    SCHED_ALLREDUCE_COUNT
} sched_allreduce;

const char *sched_allreduce_str(sched_allreduce a);
const char *sched_allreduce_help(sched_allreduce a);
/* -1 when the word names no strategy. */
int sched_allreduce_parse(const char *word);
/* Their words for a message, from the table: "ring, butterfly, ... or butterfly-ggml". */
const char *sched_allreduce_names(void);

/* What `auto` is for a group of n ranks on devices of family ("cuda",
 * "sycl"; NULL: any other, whose backend has no all-reduce of its own), as
 * ggml's meta backend picks: the backend's own all-reduce where it has one
 * and it applies (f32 and contiguous: type), else the butterfly. Any
 * other strategy is returned as given, except sycl for n != 2 (ggml-sycl
 * declines: the butterfly). */
sched_allreduce sched_allreduce_pick(sched_allreduce a, const char *family, int n,
                                     sched_dtype type);
/* The number of elements from which strategy a (as picked) sends bf16 for
 * a group of n ranks; bf16_min > 0 overrides (--bf16-min). INT64_MAX: never. */
int64_t sched_allreduce_bf16_from(sched_allreduce a, int n, int64_t bf16_min);
/* Whether a (as picked) is expanded into copies, adds and events. */
bool sched_allreduce_expanded(sched_allreduce a);

/* The statements of an expanded all-reduce of one group, as data: the
 * scheduler runs them on the ranks' backends (sched/allreduce.c) and the
 * reference (real/reference.c) computes them in this order on one thread. */
typedef enum {
    SCHED_AR_LOCAL = 0,             /* rank: acc <- its source (a copy on its queue) */
    SCHED_AR_SEND = 1,              /* rank's acc (bf16: its wire) -> peer's inbox, on rank's queue;
                                     * the peer's queue waits for the hand-over event */
    SCHED_AR_ADD = 2,               /* rank: acc += inbox (bf16 inbox: widened to f32) */
    SCHED_AR_PUT = 3,               /* rank's acc -> peer's acc, on rank's queue, handed over */
    SCHED_AR_TO_BF16 = 4,           /* rank: wire <- acc as bf16, truncated (ggml-sycl) */
    SCHED_AR_WAIT_FREE = 5,         /* rank's queue waits until peer added its inbox's last contents */
    SCHED_AR_FREE = 6,              /* rank records that its inbox was consumed */
    SCHED_AR_SYNC = 7,              /* the host waits until rank's queue is idle */
    SCHED_AR_SEND_BLOCKING = 8,     /* as SEND, but a blocking copy by the host, no hand-over */
} sched_ar_kind;

typedef struct sched_ar_step {
    uint8_t kind, rank, peer;
} sched_ar_step;

#define SCHED_AR_MAX_STEPS 256
/* The steps of strategy a (as picked, expanded) for n ranks (1..16), bf16
 * when the group sends bf16; returns their number, 0 when a is not
 * expanded. */
int sched_allreduce_program(sched_allreduce a, int n, bool bf16, sched_ar_step *out);

struct sched_buffer {
    sched_backend *backend;         /* the backend the scheduler allocated it from */
    uint64_t size;
    sched_buffer_usage usage;
    bool host;                      /* host memory (CPU backend, user inputs) */
    bool pinned;                    /* page-locked host memory */
    uint32_t trace_id;              /* root buffer index in the trace */
    char name[SCHED_NAME_MAX];
    void *ctx;                      /* backend data */
};

typedef struct sched_event {
    sched_backend *backend;         /* the backend whose queue records it */
    uint32_t name;                  /* interned event name (set by sched_rec) */
    uint64_t n_records;             /* how often it was recorded (the backend counts) */
    void *ctx;
} sched_event;

/* A statement sched_rec made for a backend call, whose times the backend
 * reports (sched_rec_done). */
typedef uint64_t sched_ticket;
#define SCHED_NO_TICKET UINT64_MAX

/* What graph_compute runs: nodes of one split, with sources redirected to
 * the split-input copies of slot cur_copy. */
typedef struct sched_exec {
    sched_graph *graph;
    const int32_t *nodes;
    int n_nodes;
    int split;                      /* split index */
    int cur_copy;                   /* pipeline slot of this evaluation */
    uint64_t eval;                  /* evaluation counter (token / ubatch) */
    /* Source i of node n as the split reads it (its copy when it is a split input). */
    int32_t (*src_of)(const struct sched_exec *x, int32_t node, int i);
    const void *sched;              /* for src_of and sched_exec_group */
    /* All-reduce: the strategy, the BF16 threshold (elements), and the
     * split's backend's wire buffer for bf16 (NULL when none runs bf16). */
    sched_allreduce allreduce;
    int64_t allreduce_bf16_min;
    sched_buffer *wire;
    /* Recording (sched_rec): per entry k of nodes[], tickets[3k] is the
     * node's op or collective, tickets[3k+1] and [3k+2] the bf16
     * conversions into and out of the wire; SCHED_NO_TICKET where none.
     * NULL when the backend is not recorded. */
    const sched_ticket *tickets;
} sched_exec;

/* All_reduce node of x: its rank and the size of its group. O(1). */
void sched_exec_group(const sched_exec *x, int32_t node, int *rank, int *n);
/* Whether all_reduce node of x goes through the bf16 wire (its group's
 * strategy, as picked, sends bf16 at its size: sched_allreduce_bf16_from). */
bool sched_exec_bf16(const sched_exec *x, int32_t node);

typedef struct sched_backend_iface {
    /* Short name ("GPU0", "CPU"). Required. */
    const char *(*get_name)(sched_backend *b);
    /* Device kind. Required. */
    sched_device_kind (*device_kind)(sched_backend *b);
    /* The name of its device in the trace: its stream queue and device
     * memory ("gpu0", "cs0"), or for a backend that runs on the host, the
     * prefix of its worker queues. NULL: the lower-cased get_name. */
    const char *(*trace_name)(sched_backend *b);
    /* Whether the backend can run node t. NULL: it supports every op. */
    bool (*supports_op)(sched_backend *b, const sched_graph *g, const sched_tensor *t);
    /* Whether the backend computes on buf directly (a buffer of another backend).
     * NULL: only its own buffers. */
    bool (*supports_buffer)(sched_backend *b, const sched_buffer *buf);
    /* Allocates a buffer of size bytes named name; sets host and pinned.
     * Returns NULL when out of memory. Required. */
    sched_buffer *(*buffer_alloc)(sched_backend *b, const char *name, uint64_t size,
                                  sched_buffer_usage usage);
    /* Frees a buffer from buffer_alloc. NULL: buffers live until the backend is freed. */
    void (*buffer_free)(sched_backend *b, sched_buffer *buf);
    /* Host memory src -> dst on this backend, queued on its stream. NULL: the
     * scheduler uses copy_sync. */
    int (*set_async)(sched_backend *b, sched_tensor *src, sched_tensor *dst);
    /* dst (host memory) <- src on this backend, queued on its stream. NULL:
     * the scheduler synchronises and uses copy_sync. */
    int (*get_async)(sched_backend *b, sched_tensor *src, sched_tensor *dst);
    /* Queues on b's stream, after the work queued there so far, a copy of
     * src into dst, one of which lives on `other` (host memory, or another
     * device). Returns 1 when queued, 0 when declined (the scheduler then
     * synchronises and uses copy_sync), -1 on error. The scheduler makes
     * src ready for b's stream first: a copy between two devices runs on
     * the source's stream and hands over with an event (ggml-cuda's
     * cpy_tensor_async). NULL: always declines. */
    int (*copy_async)(sched_backend *b, sched_backend *other, sched_tensor *src, sched_tensor *dst);
    /* A blocking copy performed by the host: returns when dst holds src. Required. */
    int (*copy_sync)(sched_backend *b, sched_tensor *src, sched_tensor *dst);
    /* Blocks the host until everything queued on the backend is done. NULL:
     * the backend is synchronous (graph_compute returns when done; its work
     * runs on the host thread and has no stream). */
    int (*synchronize)(sched_backend *b);
    /* Queues the nodes of one split (asynchronous where the backend can be).
     * Reports each node's times (x->tickets) when it knows them. Required. */
    int (*graph_compute)(sched_backend *b, const sched_exec *x);
    /* Events, all or none. NULL: the scheduler falls back to synchronize. */
    sched_event *(*event_new)(sched_backend *b, const char *name);
    void (*event_free)(sched_backend *b, sched_event *ev);
    /* The event captures everything queued on b so far. */
    int (*event_record)(sched_backend *b, sched_event *ev);
    /* Work queued on b later waits for ev (which may belong to another backend). */
    int (*event_wait)(sched_backend *b, sched_event *ev);
    /* The host blocks until ev completes. */
    int (*event_synchronize)(sched_backend *b, sched_event *ev);
    /* What the scheduler does next belongs to split `split` of evaluation
     * `eval` (its input copies, its graph, its record; -1: to no split,
     * after the last). Called on the split's backend. NULL: nothing to do
     * (a recording marks the statements split= and token=). */
    void (*split_begin)(sched_backend *b, int split, uint64_t eval);
    /* Recording at a finer grain than the scheduler sees: the threads
     * besides the host that run this (host) backend's nodes, each a host
     * queue of the trace ("cpu.t1", ...). When > 0 the backend reports each
     * node as per-thread chunks and the pool's barrier crossings
     * (sched_rec_chunk, sched_rec_barrier) instead of one op per node.
     * NULL: 0. */
    int (*workers)(sched_backend *b);
} sched_backend_iface;

struct sched_backend {
    const sched_backend_iface *iface;
    void *ctx;
    /* The recording this backend reports to (set by sched_rec_wrap on the
     * backend it wraps); NULL when not recorded. */
    struct sched_rec *rec;
};

/* ------------------------------------------------------------------ */
/* Sync policies: data, not branches.                                  */

typedef enum {
    SCHED_GUARD_NONE = 0,
    SCHED_GUARD_SYNC = 1,           /* synchronize the split's backend */
    SCHED_GUARD_EVENT = 2,          /* wait for the slot's event (else synchronize) */
    SCHED_GUARD_EVENT_ONLY = 3,     /* wait for the slot's event (else nothing: ggml #17795) */
    /* wait for the slot's event, else synchronize a split's backend whose
     * family has no cpy_tensor_async (ggml #20793: SYCL, CPU) */
    SCHED_GUARD_EVENT_ELSE_SYNC_NO_ASYNC = 4,
} sched_guard;

typedef enum {
    SCHED_COPY_ASYNC = 0,           /* set_async / copy_async, blocking when declined */
    SCHED_COPY_BLOCKING = 1,        /* copy_sync: the host copies and returns when done */
} sched_copy_mode;

/* What a split without inputs waits for before it runs. */
typedef enum {
    SCHED_NOINPUT_NONE = 0,         /* nothing */
    /* syncsim's rule: when other backends read its backend's memory
     * (split.wait_prev), its stream waits for the previous split's event
     * (the host when it has no stream); the previous split is remembered
     * across evaluations. */
    SCHED_NOINPUT_READERS = 1,
    /* ggml #26040: after any change of backend, the host blocks on the
     * previous backend's slot event (or synchronizes it when there are no
     * events); the previous backend is forgotten at each evaluation. */
    SCHED_NOINPUT_ANY_CHANGE = 2,
} sched_noinput_wait;

/* Who waits for the slot's event (SCHED_GUARD_EVENT*) before an input is
 * copied into the slot. */
typedef enum {
    /* syncsim's rule: the host before a blocking copy; before an
     * asynchronous one the queue that runs it (the source's for a non-user
     * input when it has events: a device-to-device copy runs on the
     * source's stream) */
    SCHED_WAITER_COPIER = 0,
    /* ggml's: the host for a user input, whatever the copy mode; the
     * split's (destination) backend's stream for the others, whichever
     * queue copies; a declined asynchronous copy blocks the host on the
     * slot event before it copies */
    SCHED_WAITER_GGML = 1,
    /* ggml's, and the fix of its slot-reuse race (docs/ggml-slot-race.md):
     * for a non-user input from another backend that has events, that
     * backend's stream waits for the slot too -- a copy between devices
     * may run on it (ggml-cuda's cpy_tensor_async: the source's stream),
     * and nothing else holds it back from the slot */
    SCHED_WAITER_GGML_SOURCE = 2,
} sched_waiter;

typedef struct sched_policy {
    const char *name;
    const char *summary;
    bool sync_before_inputs;        /* once per split, before its first input copy */
    bool sync_after_inputs;         /* once per split, after its last input copy */
    /* The two syncs above also for splits without inputs (ggml #17795 and
     * #20793 synchronize around every split). */
    bool sync_every_split;
    /* The two syncs above only when the backend has no slot events (#17795). */
    bool sync_only_without_events;
    sched_guard before_copy;        /* before each input copy */
    sched_guard after_copy;         /* after each input copy (NONE or SYNC) */
    sched_copy_mode user_copy;      /* copies of user inputs */
    sched_copy_mode input_copy;     /* copies of other split inputs */
    sched_waiter slot_waiter;       /* who waits for the slot event (async non-user copies) */
    bool record_after_split;        /* record the (backend, slot) event after each split */
    /* ... only after splits with inputs (ggml before #26040). */
    bool record_needs_inputs;
    sched_noinput_wait no_input_wait;
    /* ggml's copy slots: events exist only when n_copies > 1; with more
     * than one slot every graph input has one host copy per slot (the
     * user writes the current one); cur_copy is chosen when the graph is
     * allocated (sched_alloc_graph) and the next one is 0 again after a
     * sched_synchronize; reading an output synchronizes every backend
     * (llama_synchronize). false: events always, one host buffer per
     * input, cur_copy rotates after every evaluation. */
    bool ggml_slots;
    /* ggml-alloc's rules (sched/alloc.c): a node whose op can work in
     * place takes the memory of a source it is the last reader of (same
     * layout, no live views, not an output), a view's source too when the
     * view is its only one and starts at its first byte; a tensor is freed
     * when its last reader and last view are done, as ggml counts them
     * (n_children, n_views). And, in `run`, one compute buffer per
     * backend and one set of slot events for the prompt and the decode
     * graphs (options.share), as llama.cpp's one ggml_backend_sched.
     * false: best fit, never in place; arenas and events per phase. */
    bool ggml_alloc;
    /* The CUDA backend of this ggml version queues copies from host memory
     * (copy_from_host, #17795 and #20793; families with
     * host_needs_copy_from_host). */
    bool copy_from_host;
    /* The default number of copy slots (--copies) when the run pipelines
     * (more than one device, layer split) and when it does not; 0: 2. */
    int copies_pipelined, copies_single;
    /* MoE: after reading a mul_mat_id's ids back (to copy only the used
     * experts), do NOT synchronize the backend the ids came from (broken:
     * the host reads ids still being copied). ggml synchronizes. */
    bool moe_no_ids_sync;
} sched_policy;

/* The expert ids a machine without values (simulated) reads back: element
 * i of evaluation eval, in [0, n_expert). */
int32_t sched_moe_ids(uint64_t eval, int64_t i, int64_t n_expert);

/* How a ggml backend family copies a split input into its memory (its
 * cpy_tensor_async; ggml asks the destination's backend). The family
 * decides placement and blocking, the scheduler only reads the row. */
typedef enum {
    SCHED_XFER_BLOCKING = 0,        /* declined: the host copies, blocking */
    SCHED_XFER_SOURCE = 1,          /* on the source's stream, handed over with an event */
    SCHED_XFER_DEST = 2,            /* on the destination's stream (it pulls) */
} sched_xfer;

typedef struct sched_copy_traits {
    const char *family;             /* "cuda", "vulkan", "sycl", "metal", "cpu" */
    sched_xfer device_to_device;    /* from another device (SOURCE or BLOCKING) */
    sched_xfer host_to_device;      /* from host memory (DEST or BLOCKING) */
    /* host_to_device only where the scheduler's ggml version has CUDA's
     * copy_from_host (policy.copy_from_host: #17795, #20793); else blocking. */
    bool host_needs_copy_from_host;
    const char *summary;            /* one line: what ggml's backend does */
    /* ggml's backend has no cpy_tensor_async (its iface member is NULL):
     * what #20793's guard before a copy tests. */
    bool no_cpy_tensor_async;
    /* ggml's event_wait blocks the host (ggml-sycl: sycl::event::wait())
     * instead of making the backend's stream wait: the scheduler's waits
     * for this backend are host waits (event_synchronize). */
    bool event_wait_blocks_host;
} sched_copy_traits;

/* The families, {NULL}-terminated (sched/family.c). */
extern const sched_copy_traits sched_copy_families[];
/* NULL when name is none of them. */
const sched_copy_traits *sched_copy_family(const char *name);
/* Their names for a message: "cuda, vulkan, sycl, metal or cpu". */
const char *sched_copy_family_names(void);

/* The CPU pool's barriers: real/barrier.c runs them on this computer,
 * sim/cost.c prices them on a device model (`--barrier NAME`). */
#define SCHED_BARRIER_MAP(X)                                                   \
    X(SPIN, "spin", "busy-wait on the generation counter")                    \
    X(FUTEX, "futex", "sleep on the generation counter (Linux futex)")        \
    X(HYBRID, "hybrid", "spin for an adaptive budget, then sleep on a futex") \
    X(PTHREAD, "pthread", "pthread_barrier_wait (baseline)")

typedef enum {
#define SCHED_BARRIER_ENUM(name, word, text) SCHED_BARRIER_##name,
    SCHED_BARRIER_MAP(SCHED_BARRIER_ENUM)
#undef SCHED_BARRIER_ENUM
    SCHED_BARRIER_COUNT
} sched_barrier_kind;

const char *sched_barrier_str(sched_barrier_kind k);
/* -1 when the word names no barrier. */
int sched_barrier_parse(const char *word);
/* "spin, futex, hybrid or pthread", from the table. */
const char *sched_barrier_names(void);

/* The named policies, NULL-terminated. */
extern const sched_policy *const sched_policies[];
const sched_policy *sched_policy_find(const char *name);
/* "a, b or c": word(0), word(1), ... up to the first NULL, into buf (cap
 * bytes, cut short when it does not fit); returns buf. The one way a list
 * the user sees is written from its table. */
const char *sched_words(const char *(*word)(int i), char *buf, size_t cap);
/* The policy names for a message: "full, relaxed, ... or no-split-wait". */
const char *sched_policy_names(void);


/* ------------------------------------------------------------------ */
/* The scheduler.                                                      */

typedef struct sched_split {
    int backend;
    int32_t first, end;             /* node range [first, end) of the graph's node order */
    int32_t *nodes;                 /* node indices (views included) */
    int n_nodes;
    int32_t *inputs;                /* source tensors copied into this split */
    int32_t *input_copy;            /* copy tensor of slot 0; slot c is input_copy[j] + c */
    int n_inputs;
    bool wait_prev;                 /* no inputs, and its backend's memory is read elsewhere */
    /* It holds all_reduce nodes: a rank of a tensor-parallel group, which
     * ggml runs inside one (meta) backend with the other ranks. */
    bool tp_rank;
} sched_split;

typedef struct sched sched;

typedef struct sched_options {
    const char *name;               /* prefix of the trace names it declares; NULL: "g" */
    const sched_policy *policy;     /* NULL: events */
    int n_copies;                   /* 0: 1 */
    sched_allreduce allreduce;      /* 0: ring */
    int64_t allreduce_bf16_min;     /* 0: the strategy's threshold (sched_allreduce_bf16_from) */
    const char *allreduce_family;   /* for auto: "cuda", "sycl", NULL: another family */
    /* Per backend (n_backends entries), how its family copies split inputs;
     * NULL (or a NULL entry): syncsim's own placement (device copies on the
     * source's stream, host copies pulled by the destination). */
    const sched_copy_traits *const *copy_traits;
    /* Where the scheduler declares the trace views it makes itself: with
     * ggml's copy slots, each slot's copy of a user input and of a view of
     * one ("NAME#c"; under ggml_alloc views of the CPU's arena). NULL: such
     * views are not declared (their accesses name no buffer) -- give one
     * whenever a ggml_slots policy has more than one slot. */
    sched_sink *sink;
    /* ggml's op_offload (llama.cpp's default; --no-op-offload turns it off):
     * an op whose weight is in host memory runs on the first device that
     * takes its batch (SCHED_OFFLOAD_MIN_BATCH tokens or more). */
    bool no_op_offload;
    /* MoE (mul_mat_id over host expert weights): the values of a host copy
     * of an ids tensor the scheduler read back (n i32s into out). NULL, or
     * a return of -1: the machine keeps no values (simulated), and the
     * scheduler uses sched_moe_ids, the values a real machine's inputs
     * get from the seed below. */
    int (*read_ids)(void *ctx, const sched_tensor *host, int32_t *out, int64_t n);
    void *read_ids_ctx;
    /* The recording the backends report to, for the host's own reads the
     * scheduler makes (the MoE ids). NULL: not recorded. */
    struct sched_rec *rec;
    /* A scheduler of the same run, over the same backends, planned before
     * this one for another graph (the prompt's, the decode's): as ggml's
     * one scheduler, this one uses its slot events and its arenas -- one
     * compute buffer per backend, grown when this graph needs more (the
     * first one's tensors move to the grown buffer). The first one owns
     * them and must be freed last... or first: the other never frees them.
     * NULL: events and arenas of its own. */
    struct sched *share;
} sched_options;

/* ggml's GGML_SCHED_MAX_SPLIT_INPUTS: a split with this many inputs ends
 * before a node that needs another. */
#define SCHED_MAX_SPLIT_INPUTS 30

/* ggml-cuda's op_offload_min_batch_size default. */
#define SCHED_OFFLOAD_MIN_BATCH 32

/* backends in priority order, the CPU last (it must support every op).
 * The sched does not own the backends. NULL when out of memory or more
 * than 16 backends. */
sched *sched_new(sched_backend **backends, int n_backends, const sched_options *opts);
void sched_free(sched *s);

/* Weights and caches, shared by the graphs of one model (the prompt and the
 * decode graph): one weights buffer per backend; a tensor with home = d
 * goes to backend d, home = -1 (or out of range) to the CPU (the last).
 * Their trace views are declared through sink at once. */
typedef struct sched_weights sched_weights;
sched_weights *sched_weights_new(sched_backend **backends, int n_backends, const sched_graph *g,
                                 sched_sink *sink);
/* Gives g's weights and caches their buffers (by name). Returns 0, or -1
 * when g has a weight the set does not know. */
int sched_weights_bind(const sched_weights *w, sched_graph *g);
void sched_weights_free(sched_weights *w);
uint64_t sched_weights_bytes(const sched_weights *w, int backend);

/* The four passes alone (used by tests); splits are not made. The sched
 * keeps g (the caller frees it after the sched). */
sched_status sched_assign(sched *s, sched_graph *g, char *err, size_t err_cap);
/* Assigns, splits and allocates g (passes 1-4, splits, copies, arenas,
 * user-input host buffers). Weights and caches must have buffers already
 * (sched_weights_bind). The sched keeps g. */
sched_status sched_plan(sched *s, sched_graph *g, char *err, size_t err_cap);

int sched_n_splits(const sched *s);
const sched_split *sched_get_split(const sched *s, int i);
int sched_n_copies(const sched *s);
int sched_cur_copy(const sched *s);
/* Number of copy tensors made (split inputs x n_copies). */
int sched_n_copy_tensors(const sched *s);
/* Bytes of backend i's arena (the allocator's high-water mark). */
uint64_t sched_arena_size(const sched *s, int backend);
sched_backend *sched_backend_at(const sched *s, int i);
int sched_n_backends(const sched *s);
const sched_policy *sched_get_policy(const sched *s);
sched_graph *sched_get_graph(const sched *s);

/* Chooses the copy slot of the next evaluation (ggml_backend_sched_alloc_graph:
 * with a ggml_slots policy the slot after the last one allocated -- every
 * call moves on, allocated or not -- 0 after a sched_synchronize of an
 * unallocated graph; otherwise cur_copy, once per evaluation) and points
 * every user input at its host copy for that slot, so that the user writes
 * it there. Called by sched_graph_compute when the graph is not allocated. */
sched_status sched_alloc_graph(sched *s);
/* Whether the last sched_alloc_graph laid the graph out anew (ggml_alloc:
 * ggml-alloc reserved for it, after a synchronize of every backend);
 * false when the graph took the layout reserved before (ggml keeps it for
 * any graph that fits it: the offsets are then another graph's). */
bool sched_alloc_reserved(const sched *s);
/* Under ggml_alloc with more than one slot: the offset in the CPU's arena
 * of user input t's copy for slot c (ggml's graph-input copies); UINT64_MAX
 * when t has none (no input, or an input ggml-alloc places once). */
uint64_t sched_input_slot_offset(const sched *s, int32_t t, int c);
/* Runs one evaluation (eval: the token or ubatch number put in the trace):
 * every split in order under the policy. With a ggml_slots policy the graph
 * stays allocated, as ggml's is_alloc: the next compute without a
 * sched_reset or sched_alloc_graph reuses the slot (graph reuse). Without
 * ggml_slots the next evaluation allocates again and cur_copy rotates. */
sched_status sched_graph_compute(sched *s, uint64_t eval);
/* Forgets the allocation (ggml_backend_sched_reset: is_alloc = false), as
 * llama.cpp does before it builds a ubatch's graph and at the end of each
 * llama_decode; the next sched_synchronize then sends the slot back to 0. */
void sched_reset(sched *s);
/* The run goes on from scheduler `from` to `to` (sharing it, options.share):
 * the next slot, the previous split's backend and the last events, as one
 * ggml scheduler would carry them from one graph to the next. */
void sched_handover(sched *to, const sched *from);
/* Waits for every backend (llama_synchronize); with a ggml_slots policy and
 * no graph allocated (after a sched_reset), the next slot is 0 again. */
sched_status sched_synchronize(sched *s);
/* Copies the output tensor t into the host tensor dst (get_async where the
 * backend has it, then a synchronize of that backend). */
sched_status sched_get_output(sched *s, int32_t t, sched_tensor *dst);
/* Queues the copy of output t into the host tensor dst without waiting
 * (get_async); a backend without get_async copies at once, as
 * sched_get_output. dst may be read after the next sched_synchronize. */
sched_status sched_get_output_async(sched *s, int32_t t, sched_tensor *dst);

/* Stores the split graph (nodes with backend and cause, edges, splits) in
 * the sink; node ids are id_base + tensor index. Returns 0 or -1. */
int sched_record_graph(const sched *s, sched_sink *sink, int64_t id_base);

/* Checks that no two tensors that are live at the same time overlap in an
 * arena; returns the number of overlapping pairs (tests). */
int sched_alloc_overlaps(const sched *s);

/* ------------------------------------------------------------------ */
/* Recording: sched_rec wraps backends (record.c, record_wrap.c).      */

/*
 * The scheduler drives wrapped backends; each call becomes its trace
 * statements here and nowhere else (queues, buffers, tensor views, labels,
 * split=, token=, cost attributes, the bf16 all-reduce's conversions, the
 * statements' order and times). A backend only reports what only it
 * knows: when its work ran (sched_rec_done with the ticket of the call)
 * and, at a finer grain, its worker threads' chunks (sched_rec_chunk).
 */
typedef struct sched_rec sched_rec;

typedef struct sched_rec_opts {
    sched_sink sink;                /* where the statements go (not owned) */
    /* true: statements wait, in submission order, until they have their
     * times, so the sink gets each one once and complete (a simulated clock
     * knows every time before the run ends). false: they go to the sink
     * when the call that made them returns and get their times later
     * through sink.set_time (real devices, whose work may never end). */
    bool hold;
    /* Backends report from threads other than the host's: take a lock. */
    bool threaded;
    /* The host's clock in ns (simulated or CLOCK_MONOTONIC): the times of
     * the statements the host executes. Required. */
    int64_t (*now)(void *ctx);
    void *now_ctx;
} sched_rec_opts;

/* A recording into o->sink; declares the `host` queue. NULL when out of memory. */
sched_rec *sched_rec_new(const sched_rec_opts *o);
/* Passes every statement still held on (without times where it has none)
 * and frees rec and its wrappers (not the backends they wrap, which must
 * have no work in flight and report nothing more). */
void sched_rec_free(sched_rec *rec);
/* The backend the scheduler drives in place of inner (not owned; its
 * stream queue, and worker queues, are declared now). Owned by rec. NULL
 * when out of memory or more than 16 backends. */
sched_backend *sched_rec_wrap(sched_rec *rec, sched_backend *inner);
/* A sink that declares through rec: for sched_weights_new,
 * sched_record_graph, sched_tensor_view and metadata. Owned by rec. */
sched_sink *sched_rec_sink(sched_rec *rec);
/* The evaluation (token=) of the statements that follow. */
void sched_rec_set_eval(sched_rec *rec, uint64_t eval);
/* A host op of the program itself (set_inputs, sample): label, what it
 * accesses, what a device model prices it by -- a fixed cost (overhead_ns=;
 * < 0: none) and the bytes it moves (bytes= when they are not the bytes it
 * accesses; < 0: those) -- and when it ran. Returns 0 or -1. */
int sched_rec_host_op(sched_rec *rec, const char *label, const trace_access *acc, uint32_t n_acc,
                      int64_t overhead_ns, int64_t bytes, int64_t t, int64_t dur);
/* A host op `label` of the scheduler itself that reads host tensor t
 * (whole, through its trace view), timed by the host's clock. 0 or -1. */
int sched_rec_host_read(sched_rec *rec, const char *label, const sched_tensor *t);
/* Feeds every statement from now on, in submission order, to p (the sync
 * pattern of traces/pattern.c); NULL stops. p is not owned. */
void sched_rec_observe(sched_rec *rec, trace_pattern *p);
/* The declarations and strings of the statements rec made (what an
 * observer reads them with), and the `host` queue. */
const trace *sched_rec_trace(const sched_rec *rec);
uint32_t sched_rec_host(const sched_rec *rec);
/* Statements made so far. */
uint64_t sched_rec_count(const sched_rec *rec);
/* Passes every held statement on (without times where it has none). */
void sched_rec_flush(sched_rec *rec);

/* Statements of the program itself beside the scheduler's: a rank's MPI
 * messages (real/family.c; docs/multi-rank.md). A queue (a host, or a
 * stream the host submits to: an MPI request queue) and a host buffer,
 * declared once; TRACE_NONE when out of memory. Ids are the recording's
 * own, as sched_tensor_view(sched_rec_sink(rec), t) gives for tensors. */
uint32_t sched_rec_queue(sched_rec *rec, const char *name, bool stream, const char *device);
uint32_t sched_rec_buffer(sched_rec *rec, const char *name, uint64_t size);
typedef struct sched_rec_stmt {
    trace_kind kind;                /* TRACE_OP, _SEND, _RECV, _RECORD, _WAIT */
    uint32_t queue;                 /* sched_rec_host, or a sched_rec_queue */
    bool stream;                    /* queue is a stream (submitted by the host) */
    const char *object;             /* communicator (send/recv), event; NULL: none */
    const char *label;              /* NULL: none */
    uint32_t rank, peer;            /* send/recv: own rank and the other end's */
    uint64_t tag;                   /* send/recv: tag= */
    const trace_access *acc;
    uint32_t n_acc;
    int64_t t, dur;                 /* when it ran; t < 0: not observed */
} sched_rec_stmt;
/* Adds s (token= the current evaluation). 0, or -1 when out of memory. */
int sched_rec_add(sched_rec *rec, const sched_rec_stmt *s);

/* Backend side. The ticket of the statement rec made for the call of b in
 * progress (set_async, get_async, copy_async, event_record, event_wait):
 * report its times with sched_rec_done once known. SCHED_NO_TICKET when b
 * is not recorded. */
sched_ticket sched_rec_ticket(const sched_backend *b);
/* The times of a ticket's statement on the run's clock (ns). Thread-safe;
 * nothing for SCHED_NO_TICKET or an unrecorded backend. */
void sched_rec_done(const sched_backend *b, sched_ticket tk, int64_t t, int64_t dur);
/* Worker level (iface.workers > 0), during graph_compute: thread `thread`
 * (0 is the host) computed bytes [lo, hi) of the output of node entry k of
 * the exec in progress; and crossed the pool's barrier. Thread-safe. */
void sched_rec_chunk(const sched_backend *b, int k, int thread, uint64_t lo, uint64_t hi,
                     int64_t t, int64_t dur);
void sched_rec_barrier(const sched_backend *b, int thread, int64_t t, int64_t dur);

/* ------------------------------------------------------------------ */
/* Machines and backend families (family.c).                           */

/*
 * A machine is a host and its devices under one clock: a simulated one
 * (sim/: a device model on the discrete-event engine) or this computer
 * (real/: cpu, cpustream, and CUDA where built). The `run` driver (run.c)
 * asks it for backends and lets it do the host's own work of the program
 * (fill weights and inputs, or spend their simulated time; check outputs).
 *
 * A backend family is one kind of device a --devices spec names: `cpu`,
 * `cpustream[:N]`, a device model file. Families register in one table
 * (cli/run_families.c) that `run --help`, its errors and the driver read.
 * Families of one machine share a spec ("cpustream:2,jitter=200us,cpu");
 * the first item's family checks and opens the machine for all of them.
 */

/* A run option a machine takes beyond the common ones (--barrier NAME). */
typedef struct sched_option {
    const char *name;               /* "barrier": the option --barrier */
    const char *arg;                /* "NAME", for the usage line */
    /* Writes the help text (values from their own table) into buf. */
    void (*help)(char *buf, size_t cap);
} sched_option;

/* A given run option. */
typedef struct sched_option_value {
    const char *name, *value;
} sched_option_value;

#define SCHED_SPEC_MAX_ITEMS 16
#define SCHED_SPEC_MAX_OPTS 8

typedef struct sched_family sched_family;

/* One item of a spec: WORD[:ARG] and the KEY=VALUE words after it. */
typedef struct sched_spec_item {
    const sched_family *family;
    char word[128], arg[64];
    struct { char key[32], value[64]; } opt[SCHED_SPEC_MAX_OPTS];
    int n_opt;
} sched_spec_item;

typedef struct sched_spec {
    char text[256];                 /* as given, for messages */
    sched_spec_item item[SCHED_SPEC_MAX_ITEMS];
    int n_items;
} sched_spec;

typedef enum {
    SCHED_PROGRESS_NONE = 0,
    SCHED_PROGRESS_BAR = 1,         /* a terminal: a bar redrawn in place, long runs only */
    SCHED_PROGRESS_LINES = 2,       /* a log: a line every progress_ms (once one has passed) */
} sched_progress;

/* What the run asks of its machine (every field defaulted by the driver). */
typedef struct sched_run_opts {
    const char *model;              /* "KIND[:key=value,...]" (NULL: llama) */
    const char *graph_file;         /* a graph file instead of a model */
    const char *devices;            /* a --devices spec (NULL: the table's default) */
    const char *policy;             /* NULL: events */
    const char *allreduce;          /* NULL: auto */
    int n_copies;                   /* 0: the policy's default (sched_policy) */
    int tokens;                     /* decode tokens (-1: 16) */
    int prompt;                     /* prompt tokens (-1: 64) */
    int64_t bf16_min;               /* bf16 all-reduce from this many elements (0: the strategy's) */
    const sched_option_value *options;  /* machine options (--barrier ...) */
    int n_options;
    sched_progress progress;        /* on stderr (default: none) */
    int progress_ms;                /* SCHED_PROGRESS_LINES: between lines (0: 5000) */
    /* Told the evaluations done and in all after each one (and once before
     * the first), from the thread that runs the schedule; the caller shows
     * them (cli/progress.c). Set, progress is ignored. NULL: none. */
    void (*progress_fn)(void *ctx, int done, int total);
    void *progress_ctx;
    /* One rank of a tensor-parallel job over processes (MPI: --tp N): this
     * process builds and runs rank `rank`'s part of a tp model split over
     * `world` ranks; the machine's all-reduce joins the other processes.
     * world 0: a single-process run. */
    int rank, world;
    /* The job is a pipeline (run --pp N) rather than a tensor split: rank
     * `rank` runs its stage of the layers of a llama model split over
     * `world` ranks (sched_model_stage), receives its input activation from
     * rank - 1 and sends its output to rank + 1 over MPI; the last rank's
     * outputs are the logits. */
    bool pipeline;
    /* Seeded bugs of such a job (run --break): the last rank's part leaves
     * out its first all_reduce (rank-skips-allreduce); a rank writes its
     * send buffer before MPI_Wait of the MPI_Isend that reads it
     * (isend-buffer-reused); of a pipeline: a stage writes the next
     * activation into its send buffer before MPI_Wait of the MPI_Isend of
     * the previous one (activation-buffer-reused: isend_reuse too). */
    bool skip_allreduce, isend_reuse;
} sched_run_opts;

/* A machine: { iface; ctx }. */
typedef struct sched_machine_iface {
    const char *clock;              /* the word for its times: "simulated", "wall" */
    bool hold, threaded;            /* recording, see sched_rec_opts */
    /* The host's clock (ns). Required. */
    int64_t (*now)(void *ctx);
    /* Its backends in priority order, the CPU last; owned by the machine.
     * Required. */
    int (*backends)(void *ctx, sched_backend ***out);
    /* The run's graphs (prompt may be NULL), before they are planned. NULL:
     * nothing to do (a real machine copies them for its reference). */
    int (*adopt)(void *ctx, const sched_graph *prompt, const sched_graph *decode,
                 trace_error *err);
    /* The run's recording, before the first evaluation, for a machine that
     * records statements of its own (a rank's messages: sched_rec_add).
     * NULL: none. */
    void (*recording)(void *ctx, sched_rec *rec);
    /* Gives weight (or cache) t its values. NULL: weights have none. */
    int (*fill_weight)(void *ctx, sched_tensor *t);
    /* Writes the user inputs of g for evaluation eval. NULL: inputs have none. */
    int (*fill_inputs)(void *ctx, sched_graph *g, uint64_t eval);
    /* The n i32 values of host tensor t (MoE ids the scheduler read back:
     * sched_options.read_ids). NULL: tensors have no values. */
    int (*read_i32)(void *ctx, const sched_tensor *t, int32_t *out, int64_t n);
    /* The host spends the simulated time of the program's own code: a fixed
     * cost and bytes through memory (cost.c prices it). NULL: the host's
     * own work takes the time it takes. */
    void (*host_work)(void *ctx, int64_t overhead_ns, uint64_t bytes);
    /* Checks output out of evaluation eval of phase (0 prompt, 1 decode).
     * Set: every evaluation's output is read asynchronously into a window
     * of host tensors and checked after each synchronize, the time it takes
     * left out of the run's times. NULL: outputs are read as llama.cpp does
     * (the last prompt ubatch's, then every token's, each with a sync) and
     * the host samples. Returns 0, or -1 with err. */
    int (*check_output)(void *ctx, int phase, uint64_t eval, const sched_tensor *out,
                        trace_error *err);
    /* Runs every device to the end. Returns 0, or -1 when one never gets
     * there (a hang). NULL: nothing is left once synchronized. */
    int (*finish)(void *ctx);
    /* Why a backend call failed, one line; NULL when it does not know. NULL:
     * never knows. */
    const char *(*error)(void *ctx);
    /* How backend i's family copies split inputs. NULL (or NULL returned):
     * syncsim's own placement. */
    const sched_copy_traits *(*copy_traits)(void *ctx, int backend);
    /* Adds its run metadata (devices, threads, seed, ...). NULL: none. */
    void (*meta)(void *ctx, sched_sink *sink);
    /* The machine in words: "h100-pcie (2 GPUs + CPU)". Required. */
    void (*describe)(void *ctx, char *buf, size_t cap);
    /* Prints its lines of the result (bytes per link, errors against the
     * reference) and returns 0, or 1 when the run's outputs are wrong.
     * NULL: none. */
    int (*report)(void *ctx, FILE *out, const char *db);
    void (*free)(void *ctx);
} sched_machine_iface;

typedef struct sched_machine {
    const sched_machine_iface *iface;
    void *ctx;
} sched_machine;

/* What a spec's machine is, found before anything is created. */
typedef struct sched_machine_info {
    int n_devices;                  /* accelerators (GPUs, cpustream devices); 0: the CPU alone */
} sched_machine_info;

typedef struct sched_family_iface {
    const char *name;               /* "cpustream": how a spec names it */
    const char *syntax;             /* "cpustream[:N]", for help and errors */
    const char *summary;            /* one line, for help */
    const char *machine;            /* its machine ("real", "simulated"): families of one machine share a spec */
    const char *source;             /* what made a run, in the database: "sim", "real" */
    const char *default_spec;       /* the spec of a run given none; NULL */
    const sched_option *options;    /* run options its machine takes, {NULL}-terminated; NULL: none */
    /* Whether spec word names this family's devices. NULL: word == name. */
    bool (*claims)(const sched_family *f, const char *word);
    /* The words it takes beyond its name (shipped device models), comma
     * separated, into buf. NULL: none. */
    void (*list)(const sched_family *f, char *buf, size_t cap);
    /* Checks the spec (every item is of this machine) and the run options
     * without creating anything; fills info. Returns 0, or -1 with one line
     * naming the spec and what is wrong. Required. */
    int (*check)(const sched_family *f, const sched_spec *spec, const sched_run_opts *o,
                 sched_machine_info *info, trace_error *err);
    /* Opens the machine of a checked spec. Returns 0, or -1 with err. Required. */
    int (*open)(const sched_family *f, const sched_spec *spec, const sched_run_opts *o,
                sched_machine *out, trace_error *err);
} sched_family_iface;

struct sched_family {
    const sched_family_iface *iface;
    const void *ctx;
};

/* The family of spec word (families: NULL-terminated); NULL when none. */
const sched_family *sched_family_find(const sched_family *const *families, const char *word);
/* Parses a spec: items "WORD[:ARG]" and their "KEY=VALUE" words, each
 * word's family found. Returns 0, or -1 with one line naming the spec and
 * listing what it takes. */
int sched_spec_parse(const char *text, const sched_family *const *families, sched_spec *out,
                     trace_error *err);

/* ------------------------------------------------------------------ */
/* The `run` driver (run.c).                                           */

typedef struct sched_run sched_run;

typedef struct sched_run_result {
    char desc[384];                 /* model and machine, one line */
    const char *policy;
    int n_copies, n_splits, n_inputs;
    int prompt_tokens, n_ubatches, tokens;
    int64_t prompt_ns, decode_ns;   /* machine clock; checking outputs left out */
    int64_t wall_ns;                /* the whole run on the wall clock */
    int64_t check_ns;               /* of which checking outputs */
    double ns_per_token;
    double syncs_per_token;         /* host-blocking statements per decode token */
    char pattern[512];              /* the last decode token's sync pattern */
    char prompt_pattern[512];       /* the last prompt ubatch's */
    uint64_t n_stmts;
} sched_run_result;

/* Checks everything a run is given (names from their tables, the spec, the
 * options, the model or graph file, read once) and builds its graphs;
 * nothing is recorded. Returns 0, or 2 with one line in err. */
int sched_run_prepare(const sched_run_opts *o, const sched_family *const *families,
                      sched_run **out, trace_error *err);
/* "MODEL POLICY on DEVICES" and the machine's source, for the database. */
const char *sched_run_name(const sched_run *r);
const char *sched_run_source(const sched_run *r);
/* Runs it, recording into sink. Returns 0, or 1 when the run failed
 * part-way (err: one line). */
int sched_run_exec(sched_run *r, sched_sink sink, sched_run_result *res, trace_error *err);
/* Prints the result (db and run_id name where it was recorded). Returns
 * the run's verdict: 0, or 1 when its outputs are wrong. */
int sched_run_print(const sched_run *r, const sched_run_result *res, FILE *out, const char *db,
                    int64_t run_id);
/* The machine the run opened (its iface is NULL before sched_run_exec), for
 * what only its kind knows (sim_machine_world). */
const sched_machine *sched_run_machine(const sched_run *r);
void sched_run_free(sched_run *r);

/* ------------------------------------------------------------------ */
/* nvFuser's host-IR ring pipeline (sched/ring.c): a trace generator.   */

/* The variants: X(enum name, word, one line for help). */
#define SCHED_RING_VARIANT_MAP(X)                                                              \
    X(CORRECT, "correct", "the handle exchange takes its barrier on every call: clean")          \
    X(UNIFORM_HITS, "uniform-cache-hits",                                                      \
      "barrier only on a cache miss; every rank misses on the first call and hits after: "     \
      "clean")                                                                                 \
    X(UNEVEN_HITS, "uneven-cache-hits",                                                        \
      "barrier only on a cache miss; on the second call rank 0 misses (it re-registered its "  \
      "buffer) while the others hit: rank 0 waits at the barrier alone, every rank hangs "     \
      "(nvFuser's disabled test)")                                                             \
    X(NO_BARRIER, "no-barrier",                                                                \
      "the barrier removed entirely: a rank deletes its key while a peer may still read it "   \
      "(WAR race on the store)")                                                               \
    X(EARLY_REARM, "early-rearm",                                                              \
      "the receiver re-arms the sender's semaphore before its copy: the sender overwrites "    \
      "its slice in the next iteration while the copy may still read it (WAR race)")

typedef enum {
#define SCHED_RING_ENUM(name, word, about) SCHED_RING_##name,
    SCHED_RING_VARIANT_MAP(SCHED_RING_ENUM)
#undef SCHED_RING_ENUM
    SCHED_RING_VARIANT_COUNT
} sched_ring_variant;

typedef struct sched_ring_opts {
    uint32_t ranks;         /* R >= 2: one host process and one device each */
    uint32_t streams;       /* K >= 1 streams per rank; step work goes to streamIdx % K */
    uint32_t iters;         /* N >= 1 calls of the pipeline, reusing slices and semaphores */
    uint32_t chunks;        /* C >= 1 chunks per slice, each its own streamIdx */
    uint64_t chunk_bytes;   /* bytes of a chunk (>= 1) */
    sched_ring_variant variant;
} sched_ring_opts;

/* The word and help line of a variant (NULL out of range). */
const char *sched_ring_variant_str(sched_ring_variant v);
const char *sched_ring_variant_about(sched_ring_variant v);
/* -1 when word names no variant. */
int sched_ring_variant_parse(const char *word);
/* Builds the trace of o (an in-memory trace with its statements); returns
 * 0, or -1 with err (TRACE_EUSAGE: options out of range, one line saying
 * which; TRACE_ENOMEM). */
int sched_ring_generate(const sched_ring_opts *o, trace **out, trace_error *err);

/* Where syncsim's plugin library `name` is (the cuda backend family, the
 * CUDA injection library, the SimGrid network engine): $ENV_DIR/name when
 * the environment variable env_dir is set, else lib/name beside the binary
 * (a build tree), else ../lib/syncsim/name (an install), else ../lib/name
 * (a build tree's tests/). Writes the first readable path into out, or the
 * last one tried when none is (the caller's dlopen then says why).
 * sched/family.c. */
void sched_plugin_path(const char *name, const char *env_dir, char *out, size_t cap);
/* Where syncsim's data `rel` is (a file or folder of share/syncsim: the
 * device models "devices", the ggml harness "ggml/syncsim_ggml.c"):
 * $SYNCSIM_DATA_DIR/rel when that variable is set, else the first that
 * exists of BINDIR/../share/syncsim/rel (an install) and
 * BINDIR/share/syncsim/rel (a build tree), else fallback (the source
 * tree's). Writes it into out. sched/family.c. */
void sched_data_path(const char *rel, const char *fallback, char *out, size_t cap);

#endif
