/*
 * sched.h -- the graph model, the backend interface and the scheduler.
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
 * real device. Backends record what they do through a sched_sink, which
 * writes either an in-memory trace or the SQLite recorder.
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
    X(ESYNTAX, "malformed graph")                              \
    X(EUSAGE, "invalid argument")                              \
    X(EUNSUPPORTED, "no backend supports the op")              \
    X(EBACKEND, "backend call failed")                         \
    X(EHANG, "the schedule can never complete")                \
    X(EIO, "input/output error")

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
 * compute, shares its first source's memory). */
#define SCHED_OP_MAP(X)                   \
    X(NONE, "leaf", 0, 0)                 \
    X(MUL_MAT, "mul_mat", 2, 0)           \
    X(ADD, "add", 2, 0)                   \
    X(MUL, "mul", 2, 0)                   \
    X(SCALE, "scale", 1, 0)               \
    X(RMS_NORM, "rms_norm", 1, 0)         \
    X(SOFTMAX, "softmax", -1, 0)          \
    X(SILU, "silu", 1, 0)                 \
    X(ROPE, "rope", 2, 0)                 \
    X(GET_ROWS, "get_rows", 2, 0)         \
    X(CPY, "cpy", 2, 0)                   \
    X(CONVERT, "convert", 1, 0)           \
    X(VIEW, "view", 1, 1)                 \
    X(RESHAPE, "reshape", 1, 1)           \
    X(PERMUTE, "permute", 1, 1)           \
    X(CONCAT, "concat", 2, 0)             \
    X(ALL_REDUCE, "all_reduce", 1, 0)

typedef enum {
#define SCHED_OP_ENUM(name, word, nsrc, view) SCHED_OP_##name,
    SCHED_OP_MAP(SCHED_OP_ENUM)
#undef SCHED_OP_ENUM
    SCHED_OP_COUNT
} sched_op;

const char *sched_op_str(sched_op op);
int sched_op_parse(const char *word);     /* -1 when unknown */
bool sched_op_is_view(sched_op op);
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
    X(COPY, 0, "copy of a split input")

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
/* "4096x32 f16" */
void sched_tensor_shape_str(const sched_tensor *t, char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* Generators: "mlp:...", "llama:n_layer=32,...", "tp:...".            */

typedef enum { SCHED_SPLIT_LAYER = 0, SCHED_SPLIT_TENSOR = 1 } sched_split_mode;

typedef struct sched_model_params {
    char kind[16];                  /* "mlp", "llama", "tp" */
    int n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    int batch, ubatch;              /* tokens per evaluation of the prompt */
    sched_dtype dtype;              /* weights */
    int n_devices;                  /* devices the weights are placed on */
    sched_split_mode split_mode;    /* layer (llama) or tensor (tp) */
} sched_model_params;

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
/* The trace sink: where backends record.                              */

typedef struct sched_sink_iface {
    /* Declarations and statements, as trace_recorder_*: return the index or
     * seq, TRACE_NONE on failure. Required. */
    uint32_t (*queue)(void *ctx, const char *name, trace_queue_kind kind, const char *device);
    uint32_t (*buffer)(void *ctx, const char *name, uint64_t size, trace_loc loc,
                       const char *device, bool pinned);
    uint32_t (*view)(void *ctx, const char *name, uint32_t parent, uint64_t offset, uint64_t size);
    uint32_t (*intern)(void *ctx, const char *s);
    uint64_t (*append)(void *ctx, const trace_stmt *s);
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

/* A sink into an in-memory trace (not owned); the split graph is dropped. */
sched_sink sched_sink_memory(trace *t);
/* A sink into the SQLite recorder (not owned). */
sched_sink sched_sink_recorder(trace_recorder *rec);
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

struct sched_buffer {
    sched_backend *backend;         /* the backend that allocated it */
    uint64_t size;
    sched_buffer_usage usage;
    bool host;                      /* host memory (CPU backend, user inputs) */
    uint32_t trace_id;              /* root buffer index in the trace */
    char name[SCHED_NAME_MAX];
    void *ctx;                      /* backend data */
};

typedef struct sched_event {
    sched_backend *backend;         /* the backend whose queue records it */
    uint32_t name;                  /* interned event name */
    uint64_t n_records;             /* how often it was recorded */
    void *ctx;
} sched_event;

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
    const void *sched;              /* for src_of */
    /* All-reduce: strategy name ("ring", "butterfly", "bf16") and the BF16 threshold. */
    const char *allreduce;
    int64_t allreduce_bf16_min;
    int n_ranks;                    /* devices taking part in each all_reduce */
} sched_exec;

typedef struct sched_backend_iface {
    /* Short name ("GPU0", "CPU"). Required. */
    const char *(*get_name)(sched_backend *b);
    /* Device kind. Required. */
    sched_device_kind (*device_kind)(sched_backend *b);
    /* Whether the backend can run node t. NULL: it supports every op. */
    bool (*supports_op)(sched_backend *b, const sched_graph *g, const sched_tensor *t);
    /* Whether the backend computes on buf directly (a buffer of another backend).
     * NULL: only its own buffers. */
    bool (*supports_buffer)(sched_backend *b, const sched_buffer *buf);
    /* Allocates a buffer of size bytes (declared in the trace as a root buffer
     * named name). Returns NULL when out of memory. Required. */
    sched_buffer *(*buffer_alloc)(sched_backend *b, const char *name, uint64_t size,
                                  sched_buffer_usage usage);
    /* Frees a buffer from buffer_alloc. NULL: buffers live until the backend is freed. */
    void (*buffer_free)(sched_backend *b, sched_buffer *buf);
    /* Host memory src -> dst on this backend, queued asynchronously. NULL: the
     * scheduler uses copy_sync. */
    int (*set_async)(sched_backend *b, sched_tensor *src, sched_tensor *dst);
    /* dst (host memory) <- src on this backend, queued asynchronously. NULL:
     * the scheduler synchronises and uses copy_sync. */
    int (*get_async)(sched_backend *b, sched_tensor *src, sched_tensor *dst);
    /* Copies src (on backend src_b) into dst (on b) asynchronously such that
     * work later queued on b sees it. Returns 1 when done, 0 when declined
     * (the scheduler then synchronises and uses copy_sync), -1 on error.
     * NULL: always declines. */
    int (*copy_async)(sched_backend *b, sched_backend *src_b, sched_tensor *src, sched_tensor *dst);
    /* A blocking copy performed by the host: returns when dst holds src. Required. */
    int (*copy_sync)(sched_backend *b, sched_tensor *src, sched_tensor *dst);
    /* Blocks the host until everything queued on the backend is done. NULL:
     * the backend is synchronous (graph_compute returns when done). */
    int (*synchronize)(sched_backend *b);
    /* Queues the nodes of one split (asynchronous where the backend can be).
     * Required. */
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
} sched_backend_iface;

struct sched_backend {
    const sched_backend_iface *iface;
    void *ctx;
};

/* ------------------------------------------------------------------ */
/* Sync policies: data, not branches.                                  */

typedef enum {
    SCHED_GUARD_NONE = 0,
    SCHED_GUARD_SYNC = 1,           /* synchronize the split's backend */
    SCHED_GUARD_EVENT = 2,          /* wait for the slot's event (else synchronize) */
} sched_guard;

typedef enum {
    SCHED_COPY_ASYNC = 0,           /* set_async / copy_async, blocking when declined */
    SCHED_COPY_BLOCKING = 1,        /* copy_sync: the host copies and returns when done */
} sched_copy_mode;

typedef struct sched_policy {
    const char *name;
    const char *summary;
    bool sync_before_inputs;        /* once per split, before its first input copy */
    bool sync_after_inputs;         /* once per split, after its last input copy */
    sched_guard before_copy;        /* before each input copy */
    sched_guard after_copy;         /* after each input copy (NONE or SYNC) */
    sched_copy_mode user_copy;      /* copies of user inputs */
    sched_copy_mode input_copy;     /* copies of other split inputs */
    bool record_after_split;        /* record the (backend, slot) event after each split */
    /* A split without inputs waits for the previous split when its backend's
     * memory is read by other backends (allocator reuse). */
    bool wait_if_no_inputs;
} sched_policy;

/* The named policies, NULL-terminated. */
extern const sched_policy *const sched_policies[];
const sched_policy *sched_policy_find(const char *name);
/* The policy names for a message: "full, relaxed, ... or no-split-wait". */
const char *sched_policy_names(void);

/* The all-reduce strategies of tensor-split models, NULL-terminated:
 * ring, butterfly, bf16. */
extern const char *const sched_allreduces[];
bool sched_allreduce_known(const char *name);
/* Their names for a message: "ring, butterfly or bf16". */
#define SCHED_ALLREDUCE_NAMES "ring, butterfly or bf16"

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
} sched_split;

typedef struct sched sched;

typedef struct sched_options {
    const char *name;               /* prefix of the trace names it declares; NULL: "g" */
    const sched_policy *policy;     /* NULL: events */
    int n_copies;                   /* 0: 1 */
    const char *allreduce;          /* NULL: ring */
    int64_t allreduce_bf16_min;     /* 0: 32768 elements */
    int n_ranks;                    /* devices in each all_reduce (tp); 0: 1 */
} sched_options;

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

/* Runs one evaluation (eval: the token or ubatch number put in the trace):
 * every split in order under the policy, then rotates cur_copy. The host
 * calls of the evaluation make its pattern string (s sync, e event sync,
 * w event wait, r record, a async copy, c blocking copy, g graph, '|'
 * between splits). */
sched_status sched_graph_compute(sched *s, uint64_t eval);
/* Waits for every backend (llama_synchronize). */
sched_status sched_synchronize(sched *s);
/* Copies the output tensor t into the host tensor dst (get_async where the
 * backend has it, then a synchronize of that backend). */
sched_status sched_get_output(sched *s, int32_t t, sched_tensor *dst);
/* The pattern of the last evaluation; counts of each pattern letter over
 * all calls (outputs and synchronize included). */
const char *sched_last_pattern(const sched *s);
uint64_t sched_count(const sched *s, char what);

/* Stores the split graph (nodes with backend and cause, edges, splits) in
 * the sink; node ids are id_base + tensor index. Returns 0 or -1. */
int sched_record_graph(const sched *s, sched_sink *sink, int64_t id_base);

/* Checks that no two tensors that are live at the same time overlap in an
 * arena; returns the number of overlapping pairs (tests). */
int sched_alloc_overlaps(const sched *s);

#endif
