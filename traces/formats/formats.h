/*
 * formats.h -- the formats folder: one file per format that syncsim reads
 * or writes besides its own text and database (the spine: the files of
 * traces/ itself), and the capture model they share. Nothing outside traces/ includes it; the
 * spine opens a format by content (traces/source.c).
 *
 *   nsys.c           Nsight Systems SQLite exports
 *   kineto.c         PyTorch profiler (Kineto) JSON traces
 *   et.c             the PyTorch execution trace (byte ranges per op)
 *   cuda_log.c       the event log of `syncsim capture` (CUPTI injection)
 *   chrome_import.c  syncsim's own Chrome trace, read back
 *   chrome_export.c  syncsim's Chrome trace (Perfetto), written
 *   json.c           streaming JSON, plain or gzipped, for the JSON formats
 *   capture.c        the capture model every importer fills, its one
 *                    mapping onto the trace model, and the import ledger
 *                    (what was read and not imported, by reason)
 *
 * In more detail:
 *
 *   - json.c: a streaming JSON reader over plain or gzipped files
 *     (zlib's gzread, yajl's callbacks) that hands over one element of a
 *     large array at a time as a small tree, so that memory follows the
 *     biggest element, never the document;
 *   - capture.c: the capture model (API calls on host threads, GPU work on
 *     streams, synchronisation rows, event records, ranges) and the one
 *     mapping of it onto the trace model (docs/importers.md). Every
 *     importer fills a capture and lets capture_build() write statements,
 *     so that a rule ("a blocking copy is a copy and a host sync") has one
 *     home;
 *   - et.c: the PyTorch execution trace (byte ranges per op), read
 *     beside a Kineto trace.
 */
#ifndef SYNCSIM_TRACES_FORMATS_H
#define SYNCSIM_TRACES_FORMATS_H

#include "traces/trace.h"

/* ------------------------------------------------------------------ */
/* JSON (json.c).                                               */

typedef enum {
    JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT,
} json_type;

/* A value of an element tree. Strings and numbers point into the tree's
 * arena (numbers are kept as written, so that "1712867402348289.123" loses
 * no digit). Children are linked in document order. */
typedef struct json_val {
    json_type type;
    const char *key;        /* member name in an object, else NULL */
    size_t key_len;
    const char *s;          /* string bytes or number text */
    size_t len;
    struct json_val *child, *last, *next;
    size_t n_child;
    bool dup_key;               /* on a tree's root: an object in it names a member twice */
} json_val;

/* What json_stream calls. The tree and its strings live until the callback
 * returns. A callback returns 0 to go on, -1 to stop (err filled). */
typedef struct json_handler {
    /* The member of the top-level object whose array is streamed element by
     * element ("traceEvents", "nodes"); a top-level array is streamed too. */
    const char *array_key;
    /* Each other top-level member, as one tree (keep them small). NULL: skipped. */
    int (*on_member)(void *ctx, const json_val *v, trace_error *err);
    /* Each element of the streamed array. */
    int (*on_element)(void *ctx, const json_val *v, trace_error *err);
    void *ctx;
    /* Told the bytes of the file consumed once each chunk is parsed (the
     * opener's trace_source_opts.progress). NULL: none. */
    const trace_progress *progress;
} json_handler;

/* Streams the JSON document in path (gzip or plain, by content). Returns 0,
 * or -1 with err: one line naming the file and what is wrong (a truncated or
 * corrupt gzip stream, invalid JSON at a byte offset, a callback's error).
 * Says its progress to h->progress: "bytes" of the file's size (for gzip,
 * the compressed bytes consumed). */
int json_stream(const char *path, const json_handler *h, trace_error *err);

/* Lookups on a tree: the member called key (NULL when absent). */
const json_val *json_get(const json_val *obj, const char *key);
/* The value as an integer: numbers and strings holding one ("7", "7.0"). False
 * when absent, not a number, or with a fraction ("7.5" is no id). */
bool json_int(const json_val *v, int64_t *out);
/* A time in microseconds (number or string, with up to three decimals of
 * nanoseconds kept exactly) as nanoseconds. */
bool json_us_to_ns(const json_val *v, int64_t *out);
/* True when v is a string equal to s. */
bool json_is(const json_val *v, const char *s);

/* Inflates the first bytes of a gzip file's head into out (for sniffing);
 * returns the bytes produced, 0 when head is not gzip. */
size_t json_gunzip_head(const unsigned char *head, size_t n, unsigned char *out, size_t cap);
/* The first non-blank byte of a (possibly gzipped) head and the text
 * around it, for the JSON formats' sniffs: fills text (NUL-terminated). */
size_t json_sniff_text(const unsigned char *head, size_t n, char *text, size_t cap);

/* ------------------------------------------------------------------ */
/* The capture model (capture.c).                                      */

typedef struct capture capture;

/* What a GPU activity is. */
typedef enum { CAP_KERNEL = 0, CAP_MEMCPY = 1, CAP_MEMSET = 2, CAP_COLLECTIVE = 3 } cap_gpu_kind;

/* Where the bytes of a copy live. */
typedef enum {
    CAP_MEM_UNKNOWN = 0,
    CAP_MEM_PAGEABLE = 1,   /* host memory, not page-locked */
    CAP_MEM_PINNED = 2,     /* page-locked host memory */
    CAP_MEM_DEVICE = 3,     /* device memory (of src_device / dst_device) */
    CAP_MEM_HOST = 4,       /* host memory, page-locked or not: not said */
    CAP_MEM_MANAGED = 5,    /* managed (unified) memory */
} cap_mem;

/* What a synchronisation row says happened (CUPTI's types). */
typedef enum {
    CAP_SYNC_UNKNOWN = 0,
    CAP_SYNC_EVENT = 1,         /* cudaEventSynchronize (or a query) */
    CAP_SYNC_STREAM_WAIT = 2,   /* cudaStreamWaitEvent */
    CAP_SYNC_STREAM = 3,        /* cudaStreamSynchronize */
    CAP_SYNC_CONTEXT = 4,       /* cudaDeviceSynchronize */
} cap_sync_kind;

/* How a stream was created (nsys knows; Kineto does not). */
typedef enum {
    CAP_STREAM_UNKNOWN = 0,
    CAP_STREAM_BLOCKING = 1,    /* created without cudaStreamNonBlocking */
    CAP_STREAM_NONBLOCKING = 2,
    CAP_STREAM_LEGACY = 3,      /* the legacy default (NULL) stream */
} cap_stream_kind;

#define CAP_NONE INT64_MIN     /* an absent integer field */

typedef struct cap_gpu {
    uint32_t stream;            /* capture_stream() index */
    cap_gpu_kind kind;
    int64_t t0, t1;             /* ns */
    int64_t corr;
    uint32_t name;              /* string id (kernel name, "Memcpy HtoD", ...) */
    uint64_t bytes;             /* copies and memsets; 0 unknown */
    cap_mem src, dst;           /* copies */
    int64_t src_device, dst_device; /* copies between devices; CAP_NONE: the stream's */
    uint32_t comm, coll;        /* CAP_COLLECTIVE: communicator and KIND (string ids), */
    uint64_t ranks;             /* and how many take part (size=) */
    bool untimed;               /* t0, t1 are not when it ran (CUPTI profiler ranges): the
                                 * statement gets no t=, dur= */
    bool counted;               /* its event is counted in the ledger already (the model
                                 * also sets it when the current event is) */
} cap_gpu;

typedef struct cap_sync {
    int64_t proc;               /* process key of the correlation */
    int64_t corr;
    cap_sync_kind kind;
    int64_t device;
    int64_t stream;             /* the stream synchronised or the waiting stream; CAP_NONE */
    int64_t event;              /* event id; CAP_NONE */
    int64_t record_stream;      /* where the event was recorded, when said; CAP_NONE */
    int64_t record_corr;        /* the cudaEventRecord's correlation, when said; CAP_NONE */
    int64_t t0, t1;
    bool counted;               /* its event is counted in the ledger (set by the model) */
} cap_sync;

/* Creates a capture whose declarations and strings go into t (the trace the
 * reader will own). NULL when out of memory. */
capture *capture_new(trace *t, const char *path);
void capture_free(capture *c);
/* Appends one element to a growing array of the capture's kind (n used,
 * cap allocated; trace_grow64's rule); returns its index or -1. */
int64_t capture_push(void **arr, uint64_t *n, uint64_t *cap, size_t elem);
trace *capture_trace(capture *c);

/* The host thread (pid, tid), created on first use; TRACE_NONE: out of memory. */
uint32_t capture_host(capture *c, int64_t pid, int64_t tid);
/* The stream (proc, device, stream); TRACE_NONE: out of memory. proc is the
 * process key that correlation ids are unique in. */
uint32_t capture_stream(capture *c, int64_t proc, int64_t device, int64_t stream);
/* Says how stream (proc, device, stream) was created (nsys). device
 * CAP_NONE: the streams of that id on every device seen so far. 0 or -1. */
int capture_stream_kind(capture *c, int64_t proc, int64_t device, int64_t stream,
                        cap_stream_kind kind);

/* A runtime or driver API call on host `host`, in process key proc. name is
 * a string id; versioned names (cudaLaunchKernel_v7000) are fine. A second
 * call with the same (proc, corr) is the same call seen twice (nsys 2.x
 * lists an outer and a nested row): the enclosing one is kept. corr may be
 * CAP_NONE (a call that launched nothing). Returns 0 or -1 (out of memory). */
int capture_api(capture *c, uint32_t host, int64_t proc, int64_t t0, int64_t t1, int64_t corr,
                uint32_t name);
int capture_gpu(capture *c, const cap_gpu *g);
/* GPU work of correlation corr of process key proc was read, whatever
 * becomes of it (imported, or counted under its own reason): its launch
 * call is not counted as launch-without-work. capture_gpu() says it itself. */
int capture_work_seen(capture *c, int64_t proc, int64_t corr);
int capture_sync(capture *c, const cap_sync *s);
/* An event record seen on the device side (nsys CUDA_EVENT rows). */
int capture_record(capture *c, int64_t proc, int64_t corr, int64_t device, int64_t stream,
                   int64_t event);

/* A range on a host thread: a Kineto cpu_op or user annotation, an NVTX
 * range. rf_id: the op's record-function id (CAP_NONE for annotations), which
 * an execution trace is joined on. op: a framework op (else an annotation). */
int capture_range(capture *c, uint32_t host, int64_t t0, int64_t t1, uint32_t name,
                  int64_t rf_id, bool op);

/* Byte ranges per op, from an execution trace (et.c). */
typedef struct cap_tensor {
    int64_t storage;            /* storage id: one root buffer per storage */
    int64_t tensor;             /* tensor id: one view per tensor range */
    uint64_t lo, hi;            /* bytes in the storage */
    int64_t device;             /* -1: host memory, else the device index */
    uint8_t mode;               /* trace_mode */
} cap_tensor;

typedef struct cap_accesses cap_accesses;
/* The tensors of the op whose rf_id is rf, once joined (cap_accesses_join):
 * NULL when the execution trace has no such op or it joined no op of the
 * capture; an op without tensors gives a non-NULL pointer, *n = 0. */
const cap_tensor *cap_accesses_of(const cap_accesses *a, int64_t rf, uint32_t *n);
/* Joins the capture's op rf named name (len bytes) to the ET's op of that
 * rf_id when their names agree (an ET node and a profiler op of one run
 * carry the same name; an ET of another program matches rf_ids by
 * coincidence, not names). True when joined. */
bool cap_accesses_join(cap_accesses *a, int64_t rf, const char *name, size_t len);
/* The number of ops (rf_ids) in the execution trace; of them, joined; and
 * those with tensors that joined nothing (their byte ranges are lost). */
uint64_t cap_accesses_ops(const cap_accesses *a);
uint64_t cap_accesses_joined(const cap_accesses *a);
/* Counts, once each, the ops with tensors that joined nothing in c's ledger
 * (unjoined-et-op; after the capture was read). Returns how many there are. */
uint64_t cap_accesses_count_unjoined(cap_accesses *a, capture *c);
/* The process the ET was recorded in (its top-level "pid"); CAP_NONE. */
int64_t cap_accesses_pid(const cap_accesses *a);

/* Memory known by address (captures that record allocations and pointers:
 * the CUDA injection log, traces/formats/cuda_log.c). A buffer is one
 * allocation: a root buffer of its size, named after its memory space
 * ("gpu0.b3", "pinned.b4", "managed.b5", "host.b6"). An allocation at the
 * same address, of the same size and space as an earlier one, is the same
 * buffer again (memory reused by an allocator aliases), so a use of the
 * old pointer races with, or comes after, the new owner's work. Pageable
 * host memory CUDA never allocated becomes a buffer of the range a call
 * used. Returns the buffer id, or TRACE_NONE (out of memory). */
uint32_t capture_buffer(capture *c, int64_t proc, cap_mem mem, int64_t device, uint64_t addr,
                        uint64_t size);
/* The latest buffer of proc whose bytes contain addr, freed or not (so that
 * a use after free resolves); *base gets its address. TRACE_NONE: none. */
uint32_t capture_buffer_at(const capture *c, int64_t proc, uint64_t addr, uint64_t *base);
/* The memory space a buffer was declared with. */
cap_mem capture_buffer_mem(const capture *c, uint32_t buf);
/* Where a buffer's life starts (alloc) or ends (free): the call (host, t0,
 * t1, corr) of proc, on stream `stream` (a capture_stream() index:
 * stream-ordered cudaMallocAsync/cudaFreeAsync) or on the host (stream
 * TRACE_NONE). A host free comes after the call's own implicit
 * synchronisation (cudaFree). 0 or -1. */
int capture_lifetime(capture *c, uint32_t buf, bool alloc, uint32_t host, int64_t proc,
                     int64_t t0, int64_t t1, int64_t corr, uint32_t stream);
/* An access of the GPU activity capture_gpu() added last: bytes [lo, hi)
 * of buf, mode a trace_mode. A copy takes its source (read) then its
 * destination (write); a capture whose activities have accesses is checked
 * for races (run metadata accesses=pointers). When capture_gpu() did not
 * keep the activity (a duplicate, no time: counted), its accesses are left
 * out with it. 0 or -1. */
int capture_gpu_access(capture *c, uint32_t buf, uint64_t lo, uint64_t hi, uint8_t mode);
/* A host thread's own access of bytes [lo, hi) of buf at [t0, t1]: a host
 * op labelled name (string id). 0 or -1. */
int capture_host_access(capture *c, uint32_t host, int64_t t0, int64_t t1, uint32_t name,
                        uint32_t buf, uint64_t lo, uint64_t hi, uint8_t mode);

/* What a CUDA call does with memory (the one table of allocation calls,
 * next to the call roles in capture.c): its space when it allocates, and
 * whether it is stream-ordered. */
typedef enum {
    CAP_MEMCALL_NONE = 0,
    CAP_MEMCALL_ALLOC = 1,          /* cudaMalloc, cudaMallocHost, cudaHostRegister, ... */
    CAP_MEMCALL_ALLOC_ASYNC = 2,    /* cudaMallocAsync, cudaMallocFromPoolAsync */
    CAP_MEMCALL_FREE = 3,           /* cudaFree, cudaFreeHost (synchronise the device) */
    CAP_MEMCALL_FREE_NOSYNC = 4,    /* cudaHostUnregister */
    CAP_MEMCALL_FREE_ASYNC = 5,     /* cudaFreeAsync */
} cap_memcall;
cap_memcall capture_memcall(const char *name, cap_mem *mem);

/* What a call's name says it synchronises (the role table of capture.c),
 * for captures that hand over calls with their arguments instead of
 * CUPTI's sync rows: a record, a stream wait, an event / stream / device
 * synchronise, a synchronous copy, or none of these. */
typedef enum {
    CAP_CALL_OTHER = 0, CAP_CALL_RECORD, CAP_CALL_STREAM_WAIT, CAP_CALL_EVENT_SYNC,
    CAP_CALL_STREAM_SYNC, CAP_CALL_DEVICE_SYNC, CAP_CALL_COPY_SYNC, CAP_CALL_QUERY,
} cap_call;
cap_call capture_call(const char *name);

/* What GPU work a call's name says it launches (cudaLaunchKernel,
 * cuLaunchKernelEx, hipModuleLaunchKernel; a graph launch; cudaMemcpy*,
 * cuMemcpy*; cudaMemset*, cuMemset*; not cudaLaunchHostFunc), for the
 * ledger's launch-without-work and the profiler ranges' launches. */
typedef enum {
    CAP_LAUNCH_NONE = 0, CAP_LAUNCH_KERNEL, CAP_LAUNCH_GRAPH, CAP_LAUNCH_COPY, CAP_LAUNCH_MEMSET,
} cap_launch;
cap_launch capture_launch(const char *name);

/* Whether parameter `index` (from 0) of a demangled kernel signature
 * ("scale(float const*, float*, int)") is a pointer to const: the kernel
 * only reads through it. False when the signature does not say (no
 * parameter list, fewer parameters, not a pointer, a const pointer to
 * mutable data "float* const"). */
bool capture_param_const(const char *signature, unsigned index);
/* The text of parameter `index` (from 0) of a demangled kernel signature,
 * *len bytes from the pointer returned: the parameter list is the one the
 * final ')' closes (template arguments may hold parentheses: a lambda's
 * "f(int)::{lambda(float)#1}"), split at the commas outside brackets. NULL
 * when the signature has no parameter list or fewer parameters. */
const char *capture_param_text(const char *signature, unsigned index, size_t *len);

/* The documented read/write set of a BLAS GEMM C = alpha op(A) op(B) + beta
 * C (cuBLAS, column-major): op(A) is m x k (A is k x m when transposed),
 * op(B) k x n, C m x n; an r x c operand with leading dimension ld spans
 * ld * (c - 1) + r elements of elem bytes. A and B are read, C written,
 * and read too when beta is not zero. Fills out[3] (A, B, C); returns
 * false for arguments cuBLAS would refuse (a size below 1, ld < rows). */
/* A byte span a library call reads or writes. */
typedef struct cap_span {
    uint64_t ptr, len;
    uint8_t mode;               /* trace_mode */
} cap_span;

/* The documented read/write set of an NCCL collective call (ncclAllReduce,
 * ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter) of count
 * elements of elem bytes over ranks ranks: reads the send buffer, writes the
 * receive buffer (allgather receives count x ranks, reducescatter sends count
 * x ranks); one rw span when they are the same buffer. Fills out (1 or 2
 * spans, *n) and returns the collective's KIND ("allreduce", ...), or NULL
 * for another call. */
const char *capture_nccl_spans(const char *call, uint64_t send, uint64_t recv, uint64_t count,
                               unsigned elem, uint64_t ranks, cap_span out[2], unsigned *n);
bool capture_gemm_spans(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                        int64_t lda, int64_t ldb, int64_t ldc, unsigned elem, bool beta_nonzero,
                        uint64_t a, uint64_t b, uint64_t c, cap_span out[3]);

/* Counts the importer reports as run metadata ("capture.kernels", ...):
 * statistics of what was read. Data the importer could not import is not a
 * statistic: it goes to the ledger below. */
int capture_count(capture *c, const char *key, uint64_t n);

/* ------------------------------------------------------------------ */
/* The import ledger (capture.c): every event an importer reads is      */
/* imported, ignored by design, or counted here by one reason.          */
/*
 * The capture model keeps the ledger, once, for every importer, and
 * capture_open_reader() writes it as run metadata "dropped.REASON" = count
 * (TRACE_LEDGER_PREFIX: trace_ledger() reads it back), beside "import.read"
 * (events read) and "import.ignored" (events of kinds that hold nothing the
 * trace model keeps: metadata, instant events, counters, Python stacks, the
 * profiler's own spans). So read = imported + ignored + counted, and an event
 * is counted under one reason only: the first found, at read or at build.
 *
 * A reason is of one of two kinds. DROP: data the trace does not hold as the
 * capture had it (an event not imported, a value clamped). ASSUME: an
 * ordering the capture does not say and the model had to choose (a stream
 * sync widened to the device, a record placed before its wait, a wait taken
 * as one on an idle stream, a kernel put on stream 0, a refusal overridden).
 * Either makes a check's coverage partial (check/coverage.c): an ordering
 * assumption can add or move a happens-before edge and so hide a race, and a
 * run with one can never check "clean". Where the capture holds the answer
 * (a sync row's stream, the cudaEventRecord call before a wait) it is used,
 * and nothing is counted.
 *
 * How an importer cannot drop data without counting it: it calls
 * capture_read() for each event (a JSON element, an SQL row, an execution
 * trace's node); the event is then accounted by whatever it becomes --
 * handed to the model (capture_api, capture_gpu, capture_sync,
 * capture_record, capture_range, ...), counted (capture_drop), used by the
 * importer itself (capture_use: a flow that links a call to its work) or
 * ignored by design (capture_ignore). An event read and left with none of
 * these is counted as `unaccounted`. The shared field readers
 * (capture_json_ts, capture_json_dur, capture_json_id) and the model's own
 * doors (a negative duration, GPU work whose call is missing, a launch whose
 * work is missing, a wait whose record is unknown) count what they refuse or
 * guess. What the model counts at build time it counts per object (a call,
 * an activity, a sync row), so an event already counted at read is not
 * counted again.
 *
 * The reasons: X(ENUM, word, kind, meaning). The word is what metadata,
 * `import`'s warnings and `check --json` say; the meaning is printed beside it
 * (trace_ledger_meaning) and in `import --help`. `forced` counts refusals a
 * user overrode (import --force-et, merge --force), not events.
 */
#define CAPTURE_DROP_MAP(X)                                                                    \
    X(NO_TS, "no-ts", DROP, "events without a timestamp")                                      \
    X(BAD_TS, "bad-ts", DROP, "timestamps that are not a finite number within 2^62 ns")        \
    X(NO_DUR, "no-dur", DROP, "complete events without a duration, taken as 0")                \
    X(NEGATIVE_DUR, "negative-dur-clamped", DROP, "negative durations, clamped to 0")          \
    X(BAD_NUMBER, "bad-number", DROP,                                                          \
      "number fields holding text, a fraction, or a value out of range")                       \
    X(BAD_TYPE, "bad-type", DROP, "events or fields of the wrong JSON type")                   \
    X(DUPLICATE_KEY, "duplicate-key", DROP,                                                    \
      "events with a member named twice (which value holds is not said), not imported")        \
    X(MISSING_FIELD, "missing-field", DROP,                                                    \
      "events without a field the mapping needs: a thread, a stream, a name")                  \
    X(UNKNOWN_CATEGORY, "unknown-category", DROP,                                              \
      "events of a category or phase syncsim does not model")                                  \
    X(IGNORED_GPU_WORK, "ignored-gpu-work", DROP,                                              \
      "events of a phase or category read as annotations that carry GPU work's correlation "   \
      "and stream: GPU work not imported")                                                     \
    X(UNKNOWN_KIND, "unknown-kind", DROP,                                                      \
      "a copy direction or stream kind syncsim does not know, guessed")                        \
    X(DUPLICATE, "duplicate", DROP,                                                            \
      "events seen twice (same kind, correlation, stream and times): the copy is not imported") \
    X(UNMATCHED_CORRELATION, "unmatched-correlation", DROP,                                    \
      "GPU work or event records whose launching call is not in the capture")                  \
    X(LAUNCH_WITHOUT_WORK, "launch-without-work", DROP,                                        \
      "kernel launch, copy and memset calls whose GPU work is not in the capture (the "        \
      "profiler lost it)")                                                                     \
    X(SYNC_WITHOUT_CALL, "sync-without-call", DROP,                                            \
      "synchronisation rows whose call is not in the capture")                                 \
    X(UNBOUND_WAIT, "unbound-wait", DROP, "waits whose event record is unknown")               \
    X(NCCL_UNMATCHED, "nccl-unmatched", DROP,                                                  \
      "NCCL kernels whose collective or size is unknown, kept as kernels")                     \
    X(HOST_UNRECORDED, "host-unrecorded", DROP,                                                \
      "copies that do not block the host, in a capture that records no host access: a host "   \
      "read or write racing with one goes unseen")                                             \
    X(UNJOINED_ET_OP, "unjoined-et-op", DROP,                                                  \
      "execution-trace ops with tensors that join no op of the capture")                       \
    X(UNJOINED_OP, "unjoined-op", DROP,                                                        \
      "framework ops of the capture that no execution-trace op joins: their byte ranges are "  \
      "unknown")                                                                               \
    X(UNRESOLVED_PARAM, "unresolved-param", DROP,                                              \
      "kernel parameters that point into no known allocation")                                 \
    X(PARAM_LAYOUT, "param-layout", DROP,                                                      \
      "kernel launches whose parameter layout the driver refused: no accesses")                \
    X(MALFORMED_MARK, "malformed-mark", DROP,                                                  \
      "NVTX marks starting syncsim: that do not read MODE PTR SIZE [LABEL]")                    \
    X(TRUNCATED_LINE, "truncated-line", DROP,                                                  \
      "a last line cut short: the program died writing it")                                    \
    X(WIDENED_SYNC, "widened-sync", ASSUME,                                                    \
      "stream synchronisations whose stream the capture does not say, widened to the device")  \
    X(ASSUMED_RECORD, "assumed-record", ASSUME,                                                \
      "event records the capture places on a stream but at no call: put at the last "          \
      "cudaEventRecord call before the wait, else right before it")                            \
    X(IDLE_STREAM_WAIT, "idle-stream-wait", ASSUME,                                            \
      "stream waits without a sync row, taken as waits of a stream with no GPU work, "         \
      "ordering nothing")                                                                      \
    X(GUESSED_STREAM, "guessed-stream", ASSUME,                                                \
      "kernels whose stream and times the capture does not say: CUPTI profiler ranges")        \
    X(FORCED, "forced", ASSUME,                                                                \
      "refusals overridden: an execution trace of another run (--force-et), ranks of "         \
      "different jobs (merge --force)")                                                        \
    X(UNACCOUNTED, "unaccounted", DROP,                                                        \
      "events an importer read but neither imported nor counted")

typedef enum {
#define CAPTURE_DROP_ENUM(e, word, kind, meaning) CAP_DROP_##e,
    CAPTURE_DROP_MAP(CAPTURE_DROP_ENUM)
#undef CAPTURE_DROP_ENUM
    CAP_DROP_COUNT
} cap_drop;

/* The word of a reason ("no-ts"). */
const char *capture_drop_word(cap_drop why);

/* One more event read from the capture file (import.read). The event read
 * before it must have been accounted (above), else it counts as
 * `unaccounted`. */
void capture_read(capture *c);
/* The last event was read: closes it (an importer calls it before counting
 * what is not one event, and before capture_open_reader). */
void capture_read_done(capture *c);
/* The current event is not imported (or imported with a guess) for reason
 * why: counted once, under the first reason given for it. With no event open
 * (after capture_read_done, or an importer that reads no events one by one),
 * n things are counted. 0 or -1 (out of memory: never, the ledger is a fixed
 * table). */
int capture_drop(capture *c, cap_drop why, uint64_t n);
/* Whether the current event was counted already (an importer that hands it
 * to the model later, as Kineto's activities without a correlation, says so
 * in cap_gpu.counted). */
bool capture_event_counted(const capture *c);
/* The current event holds nothing the trace model keeps, by design. */
void capture_ignore(capture *c);
/* The current event was used by the importer itself (a flow). */
void capture_use(capture *c);
/* What the model did not import, by reason: the ledger so far. */
uint64_t capture_dropped(const capture *c, cap_drop why);

/* Field readers that count what is wrong with a field of the current event
 * (each returns false when the event cannot be imported as it is):
 *   capture_json_ts   a timestamp in microseconds (number or numeric string)
 *                     as nanoseconds: absent -> no-ts; not a number or a
 *                     string -> bad-type; text, non-finite, beyond 2^62 ns ->
 *                     bad-ts;
 *   capture_json_dur  a duration: absent -> 0 (no-dur); wrong type ->
 *                     bad-type, text -> bad-number (false); negative -> 0
 *                     (negative-dur-clamped, true);
 *   capture_json_id   an integer id (stream, device, correlation, pid, tid):
 *                     absent -> CAP_NONE, true; a number, a numeric string or
 *                     a string ending in one ("stream 7") -> its value; else
 *                     bad-number or bad-type, CAP_NONE, false. */
bool capture_json_ts(capture *c, const json_val *v, int64_t *out);
bool capture_json_dur(capture *c, const json_val *v, int64_t *out);
bool capture_json_id(capture *c, const json_val *v, int64_t *out);

/* Captures whose profiler leaves out the wait rows of streams that ran no
 * GPU work in the window (Kineto: its "Stream Wait Event" rows are logged
 * only for streams with a kernel, copy or memset): a stream-wait call without
 * a row then waited on such a stream and orders nothing the capture holds.
 * That is an assumption (a row removed from the file reads the same): it is
 * counted as idle-stream-wait, not as an unbound wait. */
void capture_waits_filtered(capture *c);

/* The execution trace's join (kineto.c): whether a wrong ET is refused
 * (false: `import --force-et`). capture_open_reader() refuses, with one
 * line, an ET that gives byte ranges to fewer than half of the ops that
 * launched GPU work. */
void capture_et_force(capture *c, bool force);
/* A refusal was overridden (option, e.g. "import --force-et"; why: what the
 * refusal would have said): run metadata forced= says so and the ledger
 * counts `forced` once, so the check's verdict names it and is never
 * "clean". 0 or -1 (out of memory). */
int capture_forced(capture *c, const char *option, const char *why);

/* Builds the trace and makes r a reader over it that owns the capture, et
 * (may be NULL) and the capture's trace: statements are made as r is read,
 * so no second copy of the trace is held. Sets the run metadata. Returns 0,
 * or -1 with err (then nothing is taken over). */
int capture_open_reader(capture *c, cap_accesses *et, trace_reader *r, const char *path,
                        trace_error *err);

/* A reader over the statements of body with the declarations of t: owns both
 * (closing it frees them). Returns 0, or -1 when out of memory (nothing
 * taken over). */
int capture_body_reader(trace_reader *r, trace *t, trace *body, const char *path);

/* The CUDA/HIP API name without its version or default-stream suffix
 * (cudaLaunchKernel_v7000 -> cudaLaunchKernel, ..._ptsz -> ...), into buf. */
const char *capture_api_base(const char *name, char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* The execution trace (et.c).                                  */

/* Reads the ET at path, saying how far to progress (NULL: to nobody). A
 * tensor argument that is not one (a value typed Tensor whose fields have
 * the wrong types) is counted in c's ledger (bad-type). Returns the
 * accesses, or NULL with err (bad JSON, an unknown schema version, out of
 * memory). */
cap_accesses *et_load(const char *path, capture *c, const trace_progress *progress,
                      trace_error *err);
void et_free(cap_accesses *a);

#endif
