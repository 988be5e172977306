/*
 * capture.c -- what a captured GPU program did, mapped onto the trace model.
 *
 * Profilers (Nsight Systems, the PyTorch profiler) record the same things in
 * different files: API calls on host threads (with a correlation id), the
 * GPU work those calls launched (kernels, copies, memsets on streams, with
 * the same id), synchronisation rows (what a sync call waited for), event
 * records, and ranges (framework ops, annotations, NVTX). The importers
 * parse their files into a `capture` and capture_build() writes the trace,
 * so that every mapping rule lives here, once (docs/importers.md says them
 * for users):
 *
 *   queues      one host queue per (process, thread) that issued anything,
 *               "host.PID.TID"; one stream queue per (process, device,
 *               stream), "gpuD.sS", on device "gpuD" ("pP." in front of
 *               both when several processes launched GPU work).
 *   submission  a GPU activity is submitted by= the host thread of the API
 *               call with its correlation id, at the call's start; its t=
 *               and dur= are the observed GPU start and duration. Work
 *               whose call is missing sits at its start time, submitted by
 *               "host.unlaunched", a host queue that does nothing else (no
 *               submission edge; its text export says by= and reads back).
 *   order       statements are sorted by submission time, then correlation
 *               id (CUPTI hands them out in call order), then their place
 *               within one call. So a stream's statements keep their launch
 *               order and a sync covers exactly what was launched before it.
 *   host time   between two calls that made statements, a host thread ran
 *               code the capture does not describe: it becomes a host `op`
 *               named after the innermost range around it ("host" when
 *               none), so that replay keeps the host's own time. Every
 *               host op (this one, or a call's own time) has overhead_ns=
 *               its observed duration, which `replay --durations model`
 *               and calibrate keep as it is: it is the program's, not the
 *               device's.
 *   copies      a memcpy is a `copy`; without byte ranges its accesses are
 *               empty ranges of one placeholder buffer per memory space
 *               (mem.host, mem.pinned, mem.gpuD), which order nothing and
 *               race with nothing. A synchronous copy call (no "Async" in
 *               its name) or any copy from or to pageable memory blocks the
 *               host: the copy, then `sync` on its stream.
 *   syncs       stream and device synchronize calls are `sync STREAM` and
 *               `sync device=D` (the API name decides, not CUPTI's sync
 *               type, which some versions report wrongly); an event
 *               synchronize is a host `wait` on the event; a stream wait is a
 *               stream `wait` submitted by the caller. Queries (event or
 *               stream) block nothing and are not statements. cudaFree
 *               synchronises the device implicitly: `sync device=D`
 *               with implicit=cudaFree.
 *   events      an event is "evID"; its record is placed on the stream
 *               and at the call where the capture says it was recorded
 *               (an nsys CUDA_EVENT row, a Kineto sync row's record
 *               correlation); one made before the capture began stands
 *               before everything. Where only the recording stream is
 *               known, the record is assumed at the last cudaEventRecord
 *               call before the wait, else right before the wait
 *               (assumed=record), and counted (assumed-record). Where the
 *               wait row names the recording stream but no event, the
 *               record is placed so too, as "ev.wCORR". A wait whose record
 *               is unknown is left out and counted (unbound-wait).
 *   legacy stream  where the capture says which streams are blocking and
 *               which is the legacy default stream (nsys), the implicit
 *               synchronisation between them is written out as record/wait
 *               pairs (implicit=legacy-stream).
 *   iterations  ProfilerStep#N ranges give iter=N; without them, the
 *               outermost range whose name repeats on its thread gives
 *               iter=NAME#K to the statements inside its K-th occurrence.
 *   accesses    with an execution trace, a kernel, copy or memset gets the
 *               byte ranges of the innermost op around its launch call
 *               that has tensors (one root buffer per storage, one view per
 *               tensor range): run metadata accesses=execution-trace. A
 *               framework op that ran on the host (launched nothing) and
 *               has host tensors is a host op accessing them, at its end.
 *               A capture that knows pointers (the CUDA injection log) gives
 *               its activities accesses of allocations: accesses=pointers.
 *               Otherwise accesses=none: the trace is ordering-only.
 *   memory      allocations are root buffers named after their space
 *               (gpuD.bN, pinned.bN, managed.bN, host.bN); the same address,
 *               size and space again is the same buffer (allocator reuse).
 *               cudaMalloc and friends are a host `alloc`, cudaFree a host
 *               `free` after its implicit device sync, cudaMallocAsync and
 *               cudaFreeAsync an `alloc`/`free` on their stream.
 *   collectives a library collective (NCCL) is a `collective` on its stream,
 *               communicator and KIND as the capture says.
 *   ledger      what the capture held and the trace does not, and every
 *               order the model had to assume, is counted by reason, one
 *               reason per event, here, for every importer (formats.h says
 *               how an importer cannot lose an event uncounted): GPU work
 *               whose call is missing and calls whose work is missing,
 *               duplicates, sync rows without a call, unbound waits, widened
 *               stream syncs, assumed records, idle-stream waits, NCCL kernels
 *               left as kernels, async copies no host access can race with,
 *               clamped durations, and what the importers' field readers
 *               refuse. It becomes run metadata dropped.REASON
 *               (trace_ledger); any of it makes a check's coverage partial.
 */
#include "formats.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* A map from three integers to an index.                              */

typedef struct key3 {
    int64_t a, b, c;
} key3;

typedef struct map3 {
    key3 *keys;
    uint32_t *vals;             /* value + 1; 0 = empty */
    uint32_t cap, count;
} map3;

static uint64_t key3_hash(key3 k)
{
    uint64_t h = (uint64_t)k.a * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)k.b + 0x7f4a7c159e3779b9ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)k.c * 0xbf58476d1ce4e5b9ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    return h * 0x94d049bb133111ebull;
}

static uint32_t map3_get(const map3 *m, key3 k)
{
    if (!m->cap)
        return TRACE_NONE;
    uint32_t i = (uint32_t)(key3_hash(k) & (m->cap - 1));
    while (m->vals[i]) {
        const key3 *e = &m->keys[i];
        if (e->a == k.a && e->b == k.b && e->c == k.c)
            return m->vals[i] - 1;
        i = (i + 1) & (m->cap - 1);
    }
    return TRACE_NONE;
}

static int map3_put(map3 *m, key3 k, uint32_t v);

static int map3_grow(map3 *m)
{
    uint32_t ncap = m->cap ? m->cap * 2 : 1024;
    if (ncap < m->cap)
        return -1;
    map3 n = { calloc(ncap, sizeof *n.keys), calloc(ncap, sizeof *n.vals), ncap, 0 };
    if (!n.keys || !n.vals) {
        free(n.keys);
        free(n.vals);
        return -1;
    }
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->vals[i])
            map3_put(&n, m->keys[i], m->vals[i] - 1);
    free(m->keys);
    free(m->vals);
    *m = n;
    return 0;
}

static int map3_put(map3 *m, key3 k, uint32_t v)
{
    if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3 && map3_grow(m) != 0)
        return -1;
    uint32_t i = (uint32_t)(key3_hash(k) & (m->cap - 1));
    while (m->vals[i]) {
        const key3 *e = &m->keys[i];
        if (e->a == k.a && e->b == k.b && e->c == k.c) {
            m->vals[i] = v + 1;
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = k;
    m->vals[i] = v + 1;
    m->count++;
    return 0;
}

static void map3_free(map3 *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* Correlation id -> call: CUPTI hands out correlation ids densely from 1 in
 * each process, so a vector per process indexed by id is the map; ids past
 * CORR_DENSE (or below 0) go to a hash map. */
#define CORR_DENSE (UINT64_C(1) << 26)

typedef struct corr_vec {
    int64_t proc;
    uint32_t *slots;            /* call + 1; 0 = none */
    uint64_t cap;
} corr_vec;

typedef struct corr_index {
    corr_vec *procs;
    uint32_t n_procs;
    map3 sparse;
} corr_index;

static uint32_t corr_get(const corr_index *x, int64_t proc, int64_t corr)
{
    if (corr >= 0 && (uint64_t)corr < CORR_DENSE) {
        for (uint32_t i = 0; i < x->n_procs; i++)
            if (x->procs[i].proc == proc)
                return (uint64_t)corr < x->procs[i].cap ? x->procs[i].slots[corr] - 1 : TRACE_NONE;
        return TRACE_NONE;
    }
    return map3_get(&x->sparse, (key3){ proc, corr, 0 });
}

static int corr_put(corr_index *x, int64_t proc, int64_t corr, uint32_t v)
{
    if (corr < 0 || (uint64_t)corr >= CORR_DENSE)
        return map3_put(&x->sparse, (key3){ proc, corr, 0 }, v);
    corr_vec *cv = NULL;
    for (uint32_t i = 0; i < x->n_procs && !cv; i++)
        if (x->procs[i].proc == proc)
            cv = &x->procs[i];
    if (!cv) {
        corr_vec *n = realloc(x->procs, (x->n_procs + 1) * sizeof *n);
        if (!n)
            return -1;
        x->procs = n;
        cv = &x->procs[x->n_procs++];
        *cv = (corr_vec){ proc, NULL, 0 };
    }
    if ((uint64_t)corr >= cv->cap) {
        uint64_t cap = cv->cap ? cv->cap : 1024;
        while (cap <= (uint64_t)corr)
            cap *= 2;
        uint32_t *n = realloc(cv->slots, cap * sizeof *n);
        if (!n)
            return -1;
        memset(n + cv->cap, 0, (cap - cv->cap) * sizeof *n);
        cv->slots = n;
        cv->cap = cap;
    }
    cv->slots[corr] = v + 1;
    return 0;
}

static void corr_free(corr_index *x)
{
    for (uint32_t i = 0; i < x->n_procs; i++)
        free(x->procs[i].slots);
    free(x->procs);
    map3_free(&x->sparse);
    memset(x, 0, sizeof *x);
}

int64_t capture_push(void **arr, uint64_t *n, uint64_t *cap, size_t elem)
{
    if (trace_grow64(arr, cap, *n + 1, elem) != 0)
        return -1;
    return (int64_t)(*n)++;
}
#define PUSH(arr, n, cap) capture_push((void **)&(arr), &(n), &(cap), sizeof *(arr))

/* ------------------------------------------------------------------ */
/* API roles: the one table of what a call's name means.               */

typedef enum {
    ROLE_OTHER = 0,
    ROLE_COPY_SYNC,             /* a synchronous copy call */
    ROLE_STREAM_SYNC,
    ROLE_DEVICE_SYNC,
    ROLE_EVENT_SYNC,
    ROLE_QUERY,                 /* event or stream query: blocks nothing */
    ROLE_RECORD,
    ROLE_STREAM_WAIT,
    ROLE_FREE,                  /* frees that synchronise the device */
} api_role;

static const struct {
    const char *name;
    api_role role;
} api_roles[] = {
    { "cudaStreamSynchronize", ROLE_STREAM_SYNC }, { "cuStreamSynchronize", ROLE_STREAM_SYNC },
    { "hipStreamSynchronize", ROLE_STREAM_SYNC },  { "cudaDeviceSynchronize", ROLE_DEVICE_SYNC },
    { "cudaThreadSynchronize", ROLE_DEVICE_SYNC }, { "cuCtxSynchronize", ROLE_DEVICE_SYNC },
    { "hipDeviceSynchronize", ROLE_DEVICE_SYNC },  { "cudaEventSynchronize", ROLE_EVENT_SYNC },
    { "cuEventSynchronize", ROLE_EVENT_SYNC },     { "hipEventSynchronize", ROLE_EVENT_SYNC },
    { "cudaEventQuery", ROLE_QUERY },              { "cuEventQuery", ROLE_QUERY },
    { "hipEventQuery", ROLE_QUERY },               { "cudaStreamQuery", ROLE_QUERY },
    { "cuStreamQuery", ROLE_QUERY },               { "hipStreamQuery", ROLE_QUERY },
    { "cudaEventRecord", ROLE_RECORD },            { "cudaEventRecordWithFlags", ROLE_RECORD },
    { "cuEventRecord", ROLE_RECORD },              { "cuEventRecordWithFlags", ROLE_RECORD },
    { "hipEventRecord", ROLE_RECORD },             { "hipEventRecordWithFlags", ROLE_RECORD },
    { "cudaStreamWaitEvent", ROLE_STREAM_WAIT },   { "cuStreamWaitEvent", ROLE_STREAM_WAIT },
    { "hipStreamWaitEvent", ROLE_STREAM_WAIT },    { "cudaFree", ROLE_FREE },
    { "cudaFreeHost", ROLE_FREE },                 { "cuMemFree", ROLE_FREE },
    { "cuMemFreeHost", ROLE_FREE },                { "hipFree", ROLE_FREE },
    { "hipHostFree", ROLE_FREE },                  { "hipFreeHost", ROLE_FREE },
};

const char *capture_api_base(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", name);
    for (;;) {
        size_t n = strlen(buf);
        size_t d = n;
        while (d > 0 && buf[d - 1] >= '0' && buf[d - 1] <= '9')
            d--;
        if (d < n && d >= 2 && buf[d - 1] == 'v' && buf[d - 2] == '_') {
            buf[d - 2] = '\0';  /* _v7000 */
            continue;
        }
        if (n > 5 && (strcmp(buf + n - 5, "_ptsz") == 0 || strcmp(buf + n - 5, "_ptds") == 0)) {
            buf[n - 5] = '\0';
            continue;
        }
        return buf;
    }
}

static api_role role_of(const char *name)
{
    char base[128];
    capture_api_base(name, base, sizeof base);
    for (size_t i = 0; i < sizeof api_roles / sizeof api_roles[0]; i++)
        if (strcmp(api_roles[i].name, base) == 0)
            return api_roles[i].role;
    if ((strncmp(base, "cudaMemcpy", 10) == 0 || strncmp(base, "cuMemcpy", 8) == 0 ||
         strncmp(base, "hipMemcpy", 9) == 0) &&
        !strstr(base, "Async"))
        return ROLE_COPY_SYNC;
    return ROLE_OTHER;
}

/* Calls that launch GPU work, by prefix of the base name. */
static const struct {
    const char *prefix;
    cap_launch launch;
} launch_calls[] = {
    { "cudaLaunch", CAP_LAUNCH_KERNEL },     { "cuLaunch", CAP_LAUNCH_KERNEL },
    { "hipLaunch", CAP_LAUNCH_KERNEL },      { "hipExtLaunch", CAP_LAUNCH_KERNEL },
    { "hipModuleLaunch", CAP_LAUNCH_KERNEL }, { "cudaGraphLaunch", CAP_LAUNCH_GRAPH },
    { "cuGraphLaunch", CAP_LAUNCH_GRAPH },   { "hipGraphLaunch", CAP_LAUNCH_GRAPH },
    { "cudaMemcpy", CAP_LAUNCH_COPY },       { "cuMemcpy", CAP_LAUNCH_COPY },
    { "hipMemcpy", CAP_LAUNCH_COPY },        { "cudaMemset", CAP_LAUNCH_MEMSET },
    { "cuMemset", CAP_LAUNCH_MEMSET },       { "hipMemset", CAP_LAUNCH_MEMSET },
};

cap_launch capture_launch(const char *name)
{
    char base[128];
    capture_api_base(name, base, sizeof base);
    if (strstr(base, "HostFunc"))   /* cudaLaunchHostFunc runs on the host */
        return CAP_LAUNCH_NONE;
    for (size_t i = 0; i < sizeof launch_calls / sizeof launch_calls[0]; i++) {
        size_t l = strlen(launch_calls[i].prefix);
        if (strncmp(base, launch_calls[i].prefix, l) == 0)
            return launch_calls[i].launch;
    }
    return CAP_LAUNCH_NONE;
}

cap_call capture_call(const char *name)
{
    switch (role_of(name)) {
    case ROLE_RECORD: return CAP_CALL_RECORD;
    case ROLE_STREAM_WAIT: return CAP_CALL_STREAM_WAIT;
    case ROLE_EVENT_SYNC: return CAP_CALL_EVENT_SYNC;
    case ROLE_STREAM_SYNC: return CAP_CALL_STREAM_SYNC;
    case ROLE_DEVICE_SYNC: return CAP_CALL_DEVICE_SYNC;
    case ROLE_COPY_SYNC: return CAP_CALL_COPY_SYNC;
    case ROLE_QUERY: return CAP_CALL_QUERY;
    default: return CAP_CALL_OTHER;
    }
}

const char *capture_param_text(const char *sig, unsigned index, size_t *len)
{
    size_t n = sig ? strlen(sig) : 0;
    if (!n || sig[n - 1] != ')')
        return NULL;
    /* the '(' that opens the list the final ')' closes: a template argument
     * may hold parentheses of its own ("f(int)::{lambda(float)#1}",
     * "(anonymous namespace)"), so the first '(' is not it */
    const char *open = NULL;
    int depth = 0;
    for (size_t i = n; i-- > 0;) {
        char ch = sig[i];
        depth += ch == ')' || ch == '>' || ch == ']' || ch == '}'   ? 1
                 : ch == '(' || ch == '<' || ch == '[' || ch == '{' ? -1
                                                                    : 0;
        if (depth == 0) {
            open = &sig[i];
            break;
        }
    }
    if (!open || *open != '(')
        return NULL;
    const char *start = open + 1, *end = sig + n - 1;
    unsigned at = 0;
    depth = 0;
    for (const char *p = start; p <= end; p++) {
        if (*p == '<' || *p == '(' || *p == '[' || *p == '{')
            depth++;
        else if ((*p == '>' || *p == ')' || *p == ']' || *p == '}') && depth > 0 && p < end)
            depth--;
        else if ((*p == ',' && depth == 0) || p == end) {
            if (at == index) {
                while (start < p && *start == ' ')
                    start++;
                if (start == p)
                    return NULL;        /* "()": no parameters */
                *len = (size_t)(p - start);
                return start;
            }
            at++;
            start = p + 1;
        }
    }
    return NULL;
}

bool capture_param_const(const char *sig, unsigned index)
{
    size_t len;
    const char *start = capture_param_text(sig, index, &len), *end = start ? start + len : NULL;
    if (!start)
        return false;
    /* the pointee is const when "const" comes before the last '*' (both
     * outside template arguments: Pair<int const*, int> is no pointer) */
    const char *star = NULL;
    int d = 0;
    for (const char *q = start; q < end; q++) {
        d += *q == '<' ? 1 : *q == '>' ? -1 : 0;
        if (*q == '*' && d == 0)
            star = q;
    }
    d = 0;
    for (const char *q = start; star && q + 5 <= star; q++) {
        d += *q == '<' ? 1 : *q == '>' ? -1 : 0;
        if (d == 0 && strncmp(q, "const", 5) == 0 &&
            (q == start || q[-1] == ' ' || q[-1] == '(' || q[-1] == '>') &&
            (q[5] == ' ' || q[5] == '*'))
            return true;
    }
    return false;
}

/* NCCL collectives: KIND, and which side is count x ranks elements. */
static const struct {
    const char *call, *kind;
    bool send_all, recv_all;
} nccl_calls[] = {
    { "ncclAllReduce", "allreduce", false, false },
    { "ncclBroadcast", "broadcast", false, false },
    { "ncclReduce", "reduce", false, false },
    { "ncclAllGather", "allgather", false, true },
    { "ncclReduceScatter", "reducescatter", true, false },
};

const char *capture_nccl_spans(const char *call, uint64_t send, uint64_t recv, uint64_t count,
                               unsigned elem, uint64_t ranks, cap_span out[2], unsigned *n)
{
    for (size_t i = 0; i < sizeof nccl_calls / sizeof nccl_calls[0]; i++) {
        if (strcmp(call, nccl_calls[i].call) != 0)
            continue;
        uint64_t r = ranks ? ranks : 1;
        uint64_t sl = count * elem * (nccl_calls[i].send_all ? r : 1);
        uint64_t rl = count * elem * (nccl_calls[i].recv_all ? r : 1);
        if (send == recv) {
            out[0] = (cap_span){ recv, sl > rl ? sl : rl, TRACE_RW };
            *n = 1;
        } else {
            out[0] = (cap_span){ send, sl, TRACE_R };
            out[1] = (cap_span){ recv, rl, TRACE_W };
            *n = 2;
        }
        return nccl_calls[i].kind;
    }
    *n = 0;
    return NULL;
}

/* What a collective's name says its KIND is. Three spellings reach the
 * importers: an NCCL kernel ("ncclKernel_AllReduce_RING_LL_Sum_float",
 * "ncclDevKernel_AllGather_RING_LL"), PyTorch's annotation around the call
 * ("nccl:all_reduce", "nccl:_all_gather_base") and Kineto's "Collective
 * name" argument ("allreduce", "all_gather_into_tensor_coalesced"). Each is
 * lower-cased without underscores and matched by prefix; reducescatter comes
 * before reduce. Point to point (send, recv, SendRecv) and kernels that say
 * nothing (ncclDevKernel_Generic) give NULL. */
static const char *const nccl_kinds[] = {
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "barrier",
};

static const char *nccl_kind(const char *name)
{
    static const char *const prefixes[] = { "ncclKernel_", "ncclDevKernel_", "nccl:" };
    bool kernel = false;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t l = strlen(prefixes[i]);
        if (strncmp(name, prefixes[i], l) == 0) {
            kernel = i < 2;
            name += l;
            break;
        }
    }
    char word[48];
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < sizeof word; p++) {
        if (*p == '_') {
            if (kernel && n)    /* a kernel's kind is its first word */
                break;
            continue;
        }
        word[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    }
    word[n] = 0;
    for (size_t i = 0; i < sizeof nccl_kinds / sizeof nccl_kinds[0]; i++)
        if (strncmp(word, nccl_kinds[i], strlen(nccl_kinds[i])) == 0)
            return nccl_kinds[i];
    return NULL;
}

static bool nccl_kernel(const char *name)
{
    return strncmp(name, "ncclKernel_", 11) == 0 || strncmp(name, "ncclDevKernel_", 14) == 0;
}

bool capture_gemm_spans(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                        int64_t lda, int64_t ldb, int64_t ldc, unsigned elem, bool beta_nonzero,
                        uint64_t a, uint64_t b, uint64_t c, cap_span out[3])
{
    int64_t ar = trans_a ? k : m, ac = trans_a ? m : k;
    int64_t br = trans_b ? n : k, bc = trans_b ? k : n;
    if (m < 1 || n < 1 || k < 1 || lda < ar || ldb < br || ldc < m || elem == 0)
        return false;
    out[0] = (cap_span){ a, ((uint64_t)lda * (uint64_t)(ac - 1) + (uint64_t)ar) * elem, TRACE_R };
    out[1] = (cap_span){ b, ((uint64_t)ldb * (uint64_t)(bc - 1) + (uint64_t)br) * elem, TRACE_R };
    out[2] = (cap_span){ c, ((uint64_t)ldc * (uint64_t)(n - 1) + (uint64_t)m) * elem,
                         (uint8_t)(beta_nonzero ? TRACE_RW : TRACE_W) };
    return true;
}

/* Allocation calls: what each does with memory, and in which space. */
static const struct {
    const char *name;
    cap_memcall call;
    cap_mem mem;
} mem_calls[] = {
    { "cudaMalloc", CAP_MEMCALL_ALLOC, CAP_MEM_DEVICE },
    { "cudaMallocPitch", CAP_MEMCALL_ALLOC, CAP_MEM_DEVICE },
    { "cuMemAlloc", CAP_MEMCALL_ALLOC, CAP_MEM_DEVICE },
    { "cuMemAllocPitch", CAP_MEMCALL_ALLOC, CAP_MEM_DEVICE },
    { "cudaMallocHost", CAP_MEMCALL_ALLOC, CAP_MEM_PINNED },
    { "cudaHostAlloc", CAP_MEMCALL_ALLOC, CAP_MEM_PINNED },
    { "cuMemAllocHost", CAP_MEMCALL_ALLOC, CAP_MEM_PINNED },
    { "cuMemHostAlloc", CAP_MEMCALL_ALLOC, CAP_MEM_PINNED },
    { "cudaHostRegister", CAP_MEMCALL_ALLOC, CAP_MEM_PINNED },
    { "cuMemHostRegister", CAP_MEMCALL_ALLOC, CAP_MEM_PINNED },
    { "cudaMallocManaged", CAP_MEMCALL_ALLOC, CAP_MEM_MANAGED },
    { "cuMemAllocManaged", CAP_MEMCALL_ALLOC, CAP_MEM_MANAGED },
    { "cudaMallocAsync", CAP_MEMCALL_ALLOC_ASYNC, CAP_MEM_DEVICE },
    { "cudaMallocFromPoolAsync", CAP_MEMCALL_ALLOC_ASYNC, CAP_MEM_DEVICE },
    { "cuMemAllocAsync", CAP_MEMCALL_ALLOC_ASYNC, CAP_MEM_DEVICE },
    { "cuMemAllocFromPoolAsync", CAP_MEMCALL_ALLOC_ASYNC, CAP_MEM_DEVICE },
    { "cudaFree", CAP_MEMCALL_FREE, CAP_MEM_UNKNOWN },
    { "cudaFreeHost", CAP_MEMCALL_FREE, CAP_MEM_UNKNOWN },
    { "cuMemFree", CAP_MEMCALL_FREE, CAP_MEM_UNKNOWN },
    { "cuMemFreeHost", CAP_MEMCALL_FREE, CAP_MEM_UNKNOWN },
    { "cudaHostUnregister", CAP_MEMCALL_FREE_NOSYNC, CAP_MEM_UNKNOWN },
    { "cuMemHostUnregister", CAP_MEMCALL_FREE_NOSYNC, CAP_MEM_UNKNOWN },
    { "cudaFreeAsync", CAP_MEMCALL_FREE_ASYNC, CAP_MEM_UNKNOWN },
    { "cuMemFreeAsync", CAP_MEMCALL_FREE_ASYNC, CAP_MEM_UNKNOWN },
};

cap_memcall capture_memcall(const char *name, cap_mem *mem)
{
    char base[128];
    capture_api_base(name, base, sizeof base);
    for (size_t i = 0; i < sizeof mem_calls / sizeof mem_calls[0]; i++)
        if (strcmp(mem_calls[i].name, base) == 0) {
            if (mem)
                *mem = mem_calls[i].mem;
            return mem_calls[i].call;
        }
    if (mem)
        *mem = CAP_MEM_UNKNOWN;
    return CAP_MEMCALL_NONE;
}

/* ------------------------------------------------------------------ */
/* The capture.                                                        */

typedef struct cap_host {
    int64_t pid, tid;
    uint32_t queue;             /* trace queue, TRACE_NONE until declared */
    int64_t device;             /* the device it launched on; -2: several */
} cap_host;

typedef struct cap_stream {
    int64_t proc, device, stream;
    cap_stream_kind kind;
    uint32_t queue;
} cap_stream;

typedef struct cap_api {
    uint32_t host;
    int64_t proc, t0, t1, corr;
    uint32_t name;
    uint8_t role;
    uint8_t launch;             /* cap_launch */
    bool has_sync;              /* a sync row refers to it */
    bool has_work;              /* GPU work of its correlation is in the capture */
    bool counted;               /* its event is counted in the ledger */
} cap_api;

typedef struct cap_range {
    uint32_t host;
    int64_t t0, t1;
    uint32_t name;
    int64_t rf;
    bool op;
    bool counted;               /* its event is counted in the ledger */
} cap_range;

typedef struct cap_rec {
    int64_t proc, corr, device, stream, event;
    bool counted;
} cap_rec;

typedef struct cap_count {
    char *key;
    uint64_t n;
} cap_count;

/* Memory known by address. */
typedef struct cap_buf {
    int64_t proc, device;
    cap_mem mem;
    uint64_t addr, size;
    uint32_t tbuf;              /* trace buffer, TRACE_NONE until declared */
} cap_buf;

typedef struct cap_life {
    uint32_t buf, host, stream;
    bool alloc;
    int64_t proc, t0, t1, corr;
} cap_life;

typedef struct cap_acc {
    uint32_t owner;             /* gpu activity (gaccs) or host (haccs) */
    uint32_t buf, name;
    uint8_t mode;
    uint64_t lo, hi;
    int64_t t0, t1;
} cap_acc;

struct capture {
    trace *t;
    char *path;
    cap_host *hosts;
    uint64_t n_hosts, cap_hosts;
    map3 host_ids;
    cap_stream *streams;
    uint64_t n_streams, cap_streams;
    map3 stream_ids;
    cap_api *apis;
    uint64_t n_apis, cap_apis;
    corr_index api_ids;         /* (proc, corr) -> api */
    cap_gpu *gpus;
    uint64_t n_gpus, cap_gpus;
    cap_sync *syncs;
    uint64_t n_syncs, cap_syncs;
    cap_rec *recs;
    uint64_t n_recs, cap_recs;
    cap_range *ranges;
    uint64_t n_ranges, cap_ranges;
    cap_count *counts;
    uint64_t n_counts, cap_counts;
    cap_buf *bufs;
    uint64_t n_bufs, cap_bufs;
    map3 buf_ids;               /* (proc, addr, size * 8 + mem) -> buf */
    map3 buf_at;                /* (proc, addr, 0) -> the latest buf there */
    cap_life *lives;
    uint64_t n_lives, cap_lives;
    cap_acc *gaccs;             /* in activity order */
    uint64_t n_gaccs, cap_gaccs;
    cap_acc *haccs;
    uint64_t n_haccs, cap_haccs;
    /* the import ledger (formats.h) */
    uint64_t drops[CAP_DROP_COUNT];
    uint64_t n_read, n_ignored;
    bool event_open;            /* an event was read (capture_read) ... */
    bool event_done;            /* ... and accounted */
    bool event_counted;         /* ... and counted under a reason */
    bool waits_filtered, et_force, forced;
    bool gpu_kept;              /* the last capture_gpu() kept its activity */
    map3 gpu_seen;              /* (stream, corr, t0) -> gpu: duplicates */
    map3 sync_seen;             /* (proc, corr, t0) -> sync row */
    map3 range_seen;            /* (host, t0, name) -> range */
    map3 work_seen;             /* (proc, corr): GPU work read (capture_work_seen) */
};

static void taken(capture *c);

/* Times beyond 2^62 ns (146 years) are not times, nor durations beyond
 * 2^61: a time plus a duration cannot overflow. */
#define CAP_TIME_MAX (INT64_C(1) << 62)
#define CAP_DUR_MAX (INT64_C(1) << 61)

/* Whether t0 (and t1, unless CAP_NONE) are times the model can hold. */
static bool times_ok(int64_t t0, int64_t t1)
{
    return t0 >= -CAP_TIME_MAX && t0 <= CAP_TIME_MAX &&
           (t1 == CAP_NONE || (t1 >= -CAP_TIME_MAX && t1 <= CAP_TIME_MAX));
}

capture *capture_new(trace *t, const char *path)
{
    capture *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->t = t;
    c->path = strdup(path ? path : "capture");
    if (!c->path) {
        free(c);
        return NULL;
    }
    return c;
}

void capture_free(capture *c)
{
    if (!c)
        return;
    free(c->hosts);
    map3_free(&c->host_ids);
    free(c->streams);
    map3_free(&c->stream_ids);
    free(c->apis);
    corr_free(&c->api_ids);
    free(c->gpus);
    free(c->syncs);
    free(c->recs);
    free(c->ranges);
    for (uint64_t i = 0; i < c->n_counts; i++)
        free(c->counts[i].key);
    free(c->counts);
    free(c->bufs);
    map3_free(&c->buf_ids);
    map3_free(&c->buf_at);
    map3_free(&c->gpu_seen);
    map3_free(&c->sync_seen);
    map3_free(&c->range_seen);
    map3_free(&c->work_seen);
    free(c->lives);
    free(c->gaccs);
    free(c->haccs);
    free(c->path);
    free(c);
}

trace *capture_trace(capture *c)
{
    return c->t;
}

uint32_t capture_host(capture *c, int64_t pid, int64_t tid)
{
    key3 k = { pid, tid, 0 };
    uint32_t h = map3_get(&c->host_ids, k);
    if (h != TRACE_NONE)
        return h;
    if (c->n_hosts >= UINT32_MAX - 1)
        return TRACE_NONE;
    int64_t i = PUSH(c->hosts, c->n_hosts, c->cap_hosts);
    if (i < 0)
        return TRACE_NONE;
    c->hosts[i] = (cap_host){ pid, tid, TRACE_NONE, -1 };
    if (map3_put(&c->host_ids, k, (uint32_t)i) != 0)
        return TRACE_NONE;
    return (uint32_t)i;
}

uint32_t capture_stream(capture *c, int64_t proc, int64_t device, int64_t stream)
{
    key3 k = { proc, device, stream };
    uint32_t s = map3_get(&c->stream_ids, k);
    if (s != TRACE_NONE)
        return s;
    if (c->n_streams >= UINT32_MAX - 1)
        return TRACE_NONE;
    int64_t i = PUSH(c->streams, c->n_streams, c->cap_streams);
    if (i < 0)
        return TRACE_NONE;
    c->streams[i] = (cap_stream){ proc, device, stream, CAP_STREAM_UNKNOWN, TRACE_NONE };
    if (map3_put(&c->stream_ids, k, (uint32_t)i) != 0)
        return TRACE_NONE;
    return (uint32_t)i;
}

int capture_stream_kind(capture *c, int64_t proc, int64_t device, int64_t stream,
                        cap_stream_kind kind)
{
    taken(c);
    if (device == CAP_NONE) {   /* every device's stream of that id seen so far */
        for (uint64_t i = 0; i < c->n_streams; i++)
            if (c->streams[i].proc == proc && c->streams[i].stream == stream)
                c->streams[i].kind = kind;
        return 0;
    }
    uint32_t s = capture_stream(c, proc, device, stream);
    if (s == TRACE_NONE)
        return -1;
    c->streams[s].kind = kind;
    return 0;
}

int capture_api(capture *c, uint32_t host, int64_t proc, int64_t t0, int64_t t1, int64_t corr,
                uint32_t name)
{
    taken(c);
    if (t0 == CAP_NONE)
        return capture_drop(c, CAP_DROP_NO_TS, 1);
    if (!times_ok(t0, t1))
        return capture_drop(c, CAP_DROP_BAD_TS, 1);
    if (t1 == CAP_NONE) {
        capture_drop(c, CAP_DROP_NO_DUR, 1);
        t1 = t0;
    }
    if (t1 < t0) {
        capture_drop(c, CAP_DROP_NEGATIVE_DUR, 1);
        t1 = t0;
    }
    if (corr != CAP_NONE) {
        uint32_t old = corr_get(&c->api_ids, proc, corr);
        if (old != TRACE_NONE) {
            cap_api *a = &c->apis[old];
            /* the same row twice is a duplicate; nsys 2.x's outer and nested
             * rows of one call (other names, other times) are one call */
            if (t0 == a->t0 && t1 == a->t1 && name == a->name && host == a->host)
                return capture_drop(c, CAP_DROP_DUPLICATE, 1);
            if (t0 <= a->t0 && t1 >= a->t1) {   /* the enclosing row of the two */
                a->t0 = t0;
                a->t1 = t1;
                a->host = host;
            }
            return 0;
        }
    }
    int64_t i = PUSH(c->apis, c->n_apis, c->cap_apis);
    if (i < 0)
        return -1;
    c->apis[i] = (cap_api){ .host = host, .proc = proc, .t0 = t0, .t1 = t1, .corr = corr,
                            .name = name, .role = ROLE_OTHER, .counted = c->event_counted };
    if (corr != CAP_NONE && corr_put(&c->api_ids, proc, corr, (uint32_t)i) != 0)
        return -1;
    return 0;
}

/* Whether an element seen before under key is the same event again: its
 * index in the map, checked by same(). Remembers key -> i otherwise. */
static int seen_before(map3 *m, key3 key, uint64_t i, bool (*same)(const capture *, uint32_t,
                                                                     uint64_t),
                       const capture *c, bool *dup)
{
    uint32_t old = map3_get(m, key);
    *dup = old != TRACE_NONE && same(c, old, i);
    if (*dup || i >= UINT32_MAX - 1)
        return 0;
    return map3_put(m, key, (uint32_t)i);
}

static bool same_gpu(const capture *c, uint32_t a, uint64_t b)
{
    const cap_gpu *x = &c->gpus[a], *y = &c->gpus[b];
    return x->kind == y->kind && x->t1 == y->t1 && x->name == y->name && x->bytes == y->bytes;
}

int capture_work_seen(capture *c, int64_t proc, int64_t corr)
{
    if (corr == CAP_NONE)
        return 0;
    return map3_put(&c->work_seen, (key3){ proc, corr, 0 }, 0);
}

int capture_gpu(capture *c, const cap_gpu *g)
{
    taken(c);
    c->gpu_kept = false;
    if (g->stream < c->n_streams && capture_work_seen(c, c->streams[g->stream].proc, g->corr) != 0)
        return -1;
    if (g->t0 == CAP_NONE)
        return capture_drop(c, CAP_DROP_NO_TS, 1);
    if (!times_ok(g->t0, g->t1))
        return capture_drop(c, CAP_DROP_BAD_TS, 1);
    int64_t i = PUSH(c->gpus, c->n_gpus, c->cap_gpus);
    if (i < 0)
        return -1;
    c->gpus[i] = *g;
    if (c->gpus[i].t1 == CAP_NONE) {
        capture_drop(c, CAP_DROP_NO_DUR, 1);
        c->gpus[i].t1 = c->gpus[i].t0;
    }
    if (c->gpus[i].t1 < c->gpus[i].t0) {
        capture_drop(c, CAP_DROP_NEGATIVE_DUR, 1);
        c->gpus[i].t1 = c->gpus[i].t0;
    }
    /* Every GPU event twice would double the device's work: the second of
     * two alike (stream, correlation, times, name, bytes) is a duplicate. */
    bool dup;
    if (seen_before(&c->gpu_seen, (key3){ g->stream, g->corr, g->t0 }, (uint64_t)i, same_gpu, c,
                    &dup) != 0)
        return -1;
    if (dup) {
        c->n_gpus--;
        return g->counted ? 0 : capture_drop(c, CAP_DROP_DUPLICATE, 1);  /* one reason */
    }
    c->gpus[i].counted |= c->event_open && c->event_counted;
    c->gpu_kept = true;
    return 0;
}

static bool same_sync(const capture *c, uint32_t a, uint64_t b)
{
    const cap_sync *x = &c->syncs[a], *y = &c->syncs[b];
    return x->kind == y->kind && x->t1 == y->t1 && x->stream == y->stream &&
           x->event == y->event && x->record_corr == y->record_corr;
}

int capture_sync(capture *c, const cap_sync *s)
{
    taken(c);
    int64_t i = PUSH(c->syncs, c->n_syncs, c->cap_syncs);
    if (i < 0)
        return -1;
    c->syncs[i] = *s;
    bool dup;
    if (seen_before(&c->sync_seen, (key3){ s->proc, s->corr, s->t0 }, (uint64_t)i, same_sync, c,
                    &dup) != 0)
        return -1;
    if (dup) {
        c->n_syncs--;
        return capture_drop(c, CAP_DROP_DUPLICATE, 1);
    }
    c->syncs[i].counted = s->counted || (c->event_open && c->event_counted);
    return 0;
}

int capture_record(capture *c, int64_t proc, int64_t corr, int64_t device, int64_t stream,
                   int64_t event)
{
    taken(c);
    int64_t i = PUSH(c->recs, c->n_recs, c->cap_recs);
    if (i < 0)
        return -1;
    c->recs[i] = (cap_rec){ proc, corr, device, stream, event, c->event_open && c->event_counted };
    return 0;
}

static bool same_range(const capture *c, uint32_t a, uint64_t b)
{
    const cap_range *x = &c->ranges[a], *y = &c->ranges[b];
    return x->t1 == y->t1 && x->rf == y->rf && x->op == y->op;
}

int capture_range(capture *c, uint32_t host, int64_t t0, int64_t t1, uint32_t name,
                  int64_t rf_id, bool op)
{
    taken(c);
    if (t0 == CAP_NONE)
        return capture_drop(c, CAP_DROP_NO_TS, 1);
    if (!times_ok(t0, t1))
        return capture_drop(c, CAP_DROP_BAD_TS, 1);
    if (t1 == CAP_NONE || t1 < t0) {
        capture_drop(c, t1 == CAP_NONE ? CAP_DROP_NO_DUR : CAP_DROP_NEGATIVE_DUR, 1);
        t1 = t0;
    }
    int64_t i = PUSH(c->ranges, c->n_ranges, c->cap_ranges);
    if (i < 0)
        return -1;
    c->ranges[i] = (cap_range){ host, t0, t1, name, rf_id, op, c->event_open && c->event_counted };
    bool dup;
    if (seen_before(&c->range_seen, (key3){ host, t0, name }, (uint64_t)i, same_range, c,
                    &dup) != 0)
        return -1;
    if (dup) {
        c->n_ranges--;
        return capture_drop(c, CAP_DROP_DUPLICATE, 1);
    }
    return 0;
}

uint32_t capture_buffer(capture *c, int64_t proc, cap_mem mem, int64_t device, uint64_t addr,
                        uint64_t size)
{
    if (size == 0)
        size = 1;
    key3 k = { proc, (int64_t)addr, (int64_t)(size * 8 + (uint64_t)mem) };
    uint32_t b = map3_get(&c->buf_ids, k);
    if (b == TRACE_NONE) {
        if (c->n_bufs >= UINT32_MAX - 1)
            return TRACE_NONE;
        int64_t i = PUSH(c->bufs, c->n_bufs, c->cap_bufs);
        if (i < 0)
            return TRACE_NONE;
        c->bufs[i] = (cap_buf){ proc, device, mem, addr, size, TRACE_NONE };
        b = (uint32_t)i;
        if (map3_put(&c->buf_ids, k, b) != 0)
            return TRACE_NONE;
    }
    if (map3_put(&c->buf_at, (key3){ proc, (int64_t)addr, 0 }, b) != 0)
        return TRACE_NONE;
    return b;
}

uint32_t capture_buffer_at(const capture *c, int64_t proc, uint64_t addr, uint64_t *base)
{
    uint32_t b = map3_get(&c->buf_at, (key3){ proc, (int64_t)addr, 0 });
    if (b == TRACE_NONE) {      /* inside an allocation: the latest that holds it */
        for (uint64_t i = c->n_bufs; i-- > 0;) {
            const cap_buf *cb = &c->bufs[i];
            if (cb->proc == proc && addr >= cb->addr && addr - cb->addr < cb->size &&
                map3_get(&c->buf_at, (key3){ proc, (int64_t)cb->addr, 0 }) == i) {
                b = (uint32_t)i;
                break;
            }
        }
    }
    if (b != TRACE_NONE && base)
        *base = c->bufs[b].addr;
    return b;
}

cap_mem capture_buffer_mem(const capture *c, uint32_t buf)
{
    return buf < c->n_bufs ? c->bufs[buf].mem : CAP_MEM_UNKNOWN;
}

int capture_lifetime(capture *c, uint32_t buf, bool alloc, uint32_t host, int64_t proc,
                     int64_t t0, int64_t t1, int64_t corr, uint32_t stream)
{
    taken(c);
    if (buf >= c->n_bufs)
        return -1;
    int64_t i = PUSH(c->lives, c->n_lives, c->cap_lives);
    if (i < 0)
        return -1;
    c->lives[i] = (cap_life){ buf, host, stream, alloc, proc, t0, t1 < t0 ? t0 : t1, corr };
    return 0;
}

int capture_gpu_access(capture *c, uint32_t buf, uint64_t lo, uint64_t hi, uint8_t mode)
{
    taken(c);
    if (!c->gpu_kept)
        return 0;           /* the activity was not kept (counted): nor are its accesses */
    if (!c->n_gpus || buf >= c->n_bufs || hi < lo)
        return -1;
    int64_t i = PUSH(c->gaccs, c->n_gaccs, c->cap_gaccs);
    if (i < 0)
        return -1;
    c->gaccs[i] = (cap_acc){ (uint32_t)(c->n_gpus - 1), buf, TRACE_NONE, mode, lo, hi, 0, 0 };
    return 0;
}

int capture_host_access(capture *c, uint32_t host, int64_t t0, int64_t t1, uint32_t name,
                        uint32_t buf, uint64_t lo, uint64_t hi, uint8_t mode)
{
    taken(c);
    if (buf >= c->n_bufs || hi < lo)
        return -1;
    int64_t i = PUSH(c->haccs, c->n_haccs, c->cap_haccs);
    if (i < 0)
        return -1;
    c->haccs[i] = (cap_acc){ host, buf, name, mode, lo, hi, t0, t1 < t0 ? t0 : t1 };
    return 0;
}

int capture_count(capture *c, const char *key, uint64_t n)
{
    for (uint64_t i = 0; i < c->n_counts; i++)
        if (strcmp(c->counts[i].key, key) == 0) {
            c->counts[i].n += n;
            return 0;
        }
    int64_t i = PUSH(c->counts, c->n_counts, c->cap_counts);
    if (i < 0)
        return -1;
    c->counts[i].key = strdup(key);
    c->counts[i].n = n;
    return c->counts[i].key ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* The import ledger.                                                  */

#define LEDGER_DROP false
#define LEDGER_ASSUME true
static const struct {
    const char *word, *meaning;
    bool assumed;               /* an ordering assumption, not data dropped */
} drop_reasons[] = {
#define CAPTURE_DROP_ROW(e, word, kind, meaning) { word, meaning, LEDGER_##kind },
    CAPTURE_DROP_MAP(CAPTURE_DROP_ROW)
#undef CAPTURE_DROP_ROW
};

const char *capture_drop_word(cap_drop why)
{
    return (unsigned)why < CAP_DROP_COUNT ? drop_reasons[why].word : "?";
}

const char *trace_ledger_meaning(const char *reason)
{
    for (size_t i = 0; i < CAP_DROP_COUNT; i++)
        if (strcmp(drop_reasons[i].word, reason) == 0)
            return drop_reasons[i].meaning;
    return NULL;
}

bool trace_ledger_assumed(const char *reason)
{
    for (size_t i = 0; i < CAP_DROP_COUNT; i++)
        if (strcmp(drop_reasons[i].word, reason) == 0)
            return drop_reasons[i].assumed;
    return false;
}

const char *trace_ledger_reason(size_t i, const char **meaning)
{
    if (i >= CAP_DROP_COUNT)
        return NULL;
    if (meaning)
        *meaning = drop_reasons[i].meaning;
    return drop_reasons[i].word;
}

/* The event read last is accounted: handed to the model, counted, used or
 * ignored. */
static void taken(capture *c)
{
    c->event_done = true;
}

/* Closes the event read last: one that nothing accounted is counted. */
static void close_event(capture *c)
{
    if (c->event_open && !c->event_done && !c->event_counted)
        c->drops[CAP_DROP_UNACCOUNTED]++;
    c->event_open = false;
}

void capture_read(capture *c)
{
    close_event(c);
    c->n_read++;
    c->event_open = true;
    c->event_done = false;
    c->event_counted = false;
}

void capture_read_done(capture *c)
{
    close_event(c);
}

int capture_drop(capture *c, cap_drop why, uint64_t n)
{
    if ((unsigned)why < CAP_DROP_COUNT) {
        if (!c->event_open) {
            c->drops[why] += n;
        } else if (n && !c->event_counted) {  /* one reason per event: the first */
            c->drops[why]++;
            c->event_counted = true;
        }
    }
    taken(c);
    return 0;
}

bool capture_event_counted(const capture *c)
{
    return c->event_open && c->event_counted;
}

/* Counts, once, an object the build finds wanting (a call without its work,
 * a widened sync, ...) whose event was not counted at read. */
static void count_once(capture *c, bool *counted, cap_drop why)
{
    if (*counted)
        return;
    *counted = true;
    c->drops[why]++;
}

void capture_ignore(capture *c)
{
    if (!(c->event_open && c->event_counted))   /* one fate per event */
        c->n_ignored++;
    taken(c);
}

void capture_use(capture *c)
{
    taken(c);
}

uint64_t capture_dropped(const capture *c, cap_drop why)
{
    return (unsigned)why < CAP_DROP_COUNT ? c->drops[why] : 0;
}

void capture_waits_filtered(capture *c)
{
    c->waits_filtered = true;
}

void capture_et_force(capture *c, bool force)
{
    c->et_force = force;
}

int capture_forced(capture *c, const char *option, const char *why)
{
    char text[768];
    const char *had = trace_get_meta(c->t, "forced");
    snprintf(text, sizeof text, "%s%s%s (%s)", had ? had : "", had ? "; " : "", option, why);
    if (trace_set_meta(c->t, "forced", text) != 0)
        return -1;
    if (!c->forced) {           /* one refusal overridden: one count, whatever the reasons */
        c->forced = true;
        c->drops[CAP_DROP_FORCED]++;
    }
    return 0;
}


bool capture_json_ts(capture *c, const json_val *v, int64_t *out)
{
    if (!v)
        return capture_drop(c, CAP_DROP_NO_TS, 1), false;
    if (v->type != JSON_NUMBER && v->type != JSON_STRING)
        return capture_drop(c, CAP_DROP_BAD_TYPE, 1), false;
    if (!json_us_to_ns(v, out) || *out > CAP_TIME_MAX || *out < -CAP_TIME_MAX)
        return capture_drop(c, CAP_DROP_BAD_TS, 1), false;
    return true;
}

bool capture_json_dur(capture *c, const json_val *v, int64_t *out)
{
    *out = 0;
    if (!v)
        return capture_drop(c, CAP_DROP_NO_DUR, 1), true;
    if (v->type != JSON_NUMBER && v->type != JSON_STRING)
        return capture_drop(c, CAP_DROP_BAD_TYPE, 1), false;
    int64_t d;
    if (!json_us_to_ns(v, &d) || d > CAP_DUR_MAX || d < -CAP_DUR_MAX)
        return capture_drop(c, CAP_DROP_BAD_NUMBER, 1), false;
    if (d < 0)
        return capture_drop(c, CAP_DROP_NEGATIVE_DUR, 1), true;
    *out = d;
    return true;
}

bool capture_json_id(capture *c, const json_val *v, int64_t *out)
{
    *out = CAP_NONE;
    if (!v)
        return true;
    if (v->type != JSON_NUMBER && v->type != JSON_STRING)
        return capture_drop(c, CAP_DROP_BAD_TYPE, 1), false;
    if (json_int(v, out))
        return true;
    /* "stream 7": the older profilers' spelling of an id */
    size_t d = v->len;
    while (d > 0 && v->s[d - 1] >= '0' && v->s[d - 1] <= '9')
        d--;
    if (v->type == JSON_STRING && d < v->len && d > 0 && v->s[d - 1] == ' ' &&
        v->len - d < 19) {
        *out = strtoll(v->s + d, NULL, 10);
        return true;
    }
    *out = CAP_NONE;
    return capture_drop(c, CAP_DROP_BAD_NUMBER, 1), false;
}

/* ------------------------------------------------------------------ */
/* Building: items are the statements to be, sorted at the end.       */

enum {
    ITEM_ON_HOST = 1, ITEM_ASSUMED = 2, ITEM_IMPLICIT_FREE = 4, ITEM_IMPLICIT_LEGACY = 8,
    ITEM_HOST_ACCESS = 16,      /* a host op whose accesses are haccs[object] */
    ITEM_ET_HOST = 32,          /* a host op whose accesses are the host tensors of ET op object */
};

/* Places within one call: the host time before it, an assumed record, the
 * call's statement, the host sync of a blocking copy, a free after it. */
enum { SUB_GAP = 0, SUB_ASSUMED = 1, SUB_MAIN = 2, SUB_BLOCK = 3, SUB_AFTER = 4 };

typedef struct item {
    int64_t key_t, key_corr;
    uint32_t key_sub;
    uint32_t host;              /* executing (on host) or submitting host; TRACE_NONE */
    uint32_t stream;            /* stream index (stream items; sync QUEUE target) */
    uint8_t kind;               /* trace_kind */
    uint8_t flags;
    uint8_t scope;              /* trace_sync_scope */
    uint32_t label;             /* string id */
    int64_t object;             /* event: string id; sync DEVICE: device index */
    int64_t t, dur;
    int64_t api_t0, api_t1;     /* the call it came from (host time); CAP_NONE */
    uint32_t gpu;               /* gpu activity (accesses); TRACE_NONE */
    uint32_t iter;              /* iter= value string id; TRACE_NONE */
} item;

/* Host time before the call of an item (see sweep_hosts). */
typedef struct gap {
    uint32_t host, label, iter;
    int64_t t, dur;
} gap;

typedef struct builder {
    capture *c;
    trace *t;
    cap_accesses *et;
    item *items;
    uint64_t n, cap;
    map3 waited;                /* (proc, event name id) of emitted waits */
    map3 recorded;              /* (proc, record corr) of emitted records */
    map3 launch_ops;            /* rf_ids of the ops that launched GPU work (with an ET) */
    uint32_t *records;          /* the cudaEventRecord calls, by (proc, corr) */
    uint64_t n_records;
    struct { int64_t proc, corr; } *firsts; /* the first correlation of each process */
    uint32_t n_firsts;
    uint32_t unlaunched;        /* the host that "submits" work whose call is missing */
    uint64_t queries;
    uint64_t et_launch_ops, et_launch_joined; /* ops that launched GPU work; joined to the ET */
    bool multi_proc;
    /* host time: gaps[gap_at[i] - 1] goes right before items[i] */
    struct gap *gaps;
    uint64_t n_gaps, cap_gaps;
    uint32_t *gap_at;
    int64_t *op_rf;             /* per GPU activity: the ET op giving its accesses */
    uint32_t *nccl_range;       /* per GPU activity: the "nccl:" range around its launch */
    map3 size_of;               /* storage -> index in sizes */
    uint64_t *sizes, n_sizes;   /* root size per storage */
    trace_access acc[256];      /* the statement handed out last */
    trace_attr attrs[6];
    uint32_t s_host, s_iter, s_bytes, s_implicit, s_assumed, s_record, s_cudafree, s_legacy, s_overhead;
    trace_error *err;
} builder;

static int oom(builder *b)
{
    trace_error_set(b->err, TRACE_ENOMEM, "%s: out of memory", b->c->path);
    return -1;
}

static item *new_item(builder *b)
{
    int64_t i = PUSH(b->items, b->n, b->cap);
    if (i < 0)
        return NULL;
    item *it = &b->items[i];
    memset(it, 0, sizeof *it);
    it->host = it->stream = it->gpu = it->iter = it->label = TRACE_NONE;
    it->object = CAP_NONE;
    it->t = it->dur = TRACE_TIME_NONE;
    it->api_t0 = it->api_t1 = CAP_NONE;
    return it;
}

static bool valid_id(int64_t v)
{
    /* -1 and unsigned -1 (4294967295) mean "unknown" in the captures */
    return v != CAP_NONE && v >= 0 && v != 4294967295LL && v != (int64_t)UINT64_MAX;
}

static cap_api *api_of(const capture *c, int64_t proc, int64_t corr)
{
    if (!valid_id(corr))
        return NULL;
    uint32_t i = corr_get(&c->api_ids, proc, corr);
    return i == TRACE_NONE ? NULL : &c->apis[i];
}

/* The event's name: "evID", "ev.cCORR" when only the record's correlation
 * is known; with a process prefix when several processes. */
static uint32_t event_name(builder *b, int64_t proc, int64_t event, int64_t record_corr)
{
    char buf[96];
    char pre[32] = "";
    if (b->multi_proc)
        snprintf(pre, sizeof pre, "p%lld.", (long long)proc);
    if (valid_id(event))
        snprintf(buf, sizeof buf, "%sev%lld", pre, (long long)event);
    else
        snprintf(buf, sizeof buf, "%sev.c%lld", pre, (long long)record_corr);
    return trace_intern_cstr(b->t, buf);
}

/* The name of an event known only by the wait on it: "ev.wCORR". */
static uint32_t wait_event_name(builder *b, int64_t proc, int64_t wait_corr)
{
    char buf[96];
    if (b->multi_proc)
        snprintf(buf, sizeof buf, "p%lld.ev.w%lld", (long long)proc, (long long)wait_corr);
    else
        snprintf(buf, sizeof buf, "ev.w%lld", (long long)wait_corr);
    return trace_intern_cstr(b->t, buf);
}

/* The device a host's device-wide call refers to: the one it launched on;
 * CAP_NONE when it launched on several or none. */
static int64_t host_device(const builder *b, uint32_t host)
{
    int64_t d = b->c->hosts[host].device;
    return d >= 0 ? d : CAP_NONE;
}

/* Pass 1: the GPU activities and the host syncs of blocking copies. */
static int add_gpu_items(builder *b)
{
    capture *c = b->c;
    for (uint64_t i = 0; i < c->n_gpus; i++) {
        cap_gpu *g = &c->gpus[i];
        const cap_stream *s = &c->streams[g->stream];
        cap_api *a = api_of(c, s->proc, g->corr);
        item *it = new_item(b);
        if (!it)
            return oom(b);
        it->kind = g->kind == CAP_MEMCPY       ? TRACE_COPY
                   : g->kind == CAP_COLLECTIVE ? TRACE_COLLECTIVE
                                               : TRACE_OP;
        it->stream = g->stream;
        it->label = g->name;
        if (!g->untimed) {
            it->t = g->t0;
            it->dur = g->t1 - g->t0;
        }
        it->gpu = (uint32_t)i;
        it->key_t = a ? a->t0 : g->t0;
        it->key_corr = g->corr;
        it->key_sub = SUB_MAIN;
        if (!a) {
            /* Kept, at its GPU start, submitted by a host queue that does
             * nothing else ("host.unlaunched"): no submission edge, and a
             * text export says so in by= (a trace with several hosts needs
             * one on every stream statement). */
            count_once(c, &g->counted, CAP_DROP_UNMATCHED_CORRELATION);
            if (b->unlaunched == TRACE_NONE &&
                (b->unlaunched = capture_host(c, CAP_NONE, CAP_NONE)) == TRACE_NONE)
                return oom(b);
            it->host = b->unlaunched;
            continue;
        }
        a->has_work = true;
        it->host = a->host;
        it->api_t0 = a->t0;
        it->api_t1 = a->t1;
        cap_host *h = &c->hosts[a->host];
        h->device = h->device == -1 || h->device == s->device ? s->device : -2;
        bool pageable = g->kind == CAP_MEMCPY &&
                        (g->src == CAP_MEM_PAGEABLE || g->dst == CAP_MEM_PAGEABLE);
        if (g->kind == CAP_MEMCPY && (a->role == ROLE_COPY_SYNC || pageable)) {
            item *sy = new_item(b);
            if (!sy)
                return oom(b);
            *sy = (item){ .key_t = a->t0, .key_corr = g->corr, .key_sub = SUB_BLOCK,
                          .host = a->host, .stream = g->stream, .kind = TRACE_SYNC,
                          .flags = ITEM_ON_HOST, .scope = TRACE_SYNC_QUEUE,
                          .label = TRACE_NONE, .object = CAP_NONE, .t = a->t0,
                          .dur = a->t1 - a->t0, .api_t0 = a->t0, .api_t1 = a->t1,
                          .gpu = TRACE_NONE, .iter = TRACE_NONE };
        }
    }
    return 0;
}

/* A host sync statement for call a. */
static int add_host_sync(builder *b, const cap_api *a, int64_t corr, trace_sync_scope scope,
                         uint32_t stream, int64_t device, uint8_t flags)
{
    item *it = new_item(b);
    if (!it)
        return oom(b);
    it->kind = TRACE_SYNC;
    it->flags = ITEM_ON_HOST | flags;
    it->host = a->host;
    it->scope = (uint8_t)scope;
    it->stream = stream;
    it->object = device;
    it->key_t = a->t0;
    it->key_corr = corr;
    it->key_sub = SUB_MAIN;
    it->t = a->t0;
    it->dur = a->t1 - a->t0;
    it->api_t0 = a->t0;
    it->api_t1 = a->t1;
    return 0;
}

/* The cudaEventRecord call of proc with the largest correlation below
 * corr (the last one made before the call corr), or NULL. */
static const cap_api *last_record_before(const builder *b, int64_t proc, int64_t corr)
{
    const capture *c = b->c;
    uint64_t lo = 0, hi = b->n_records;     /* the first record at or past (proc, corr) */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const cap_api *r = &c->apis[b->records[mid]];
        if (r->proc < proc || (r->proc == proc && r->corr < corr))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || !valid_id(corr))
        return NULL;
    const cap_api *r = &c->apis[b->records[lo - 1]];
    return r->proc == proc ? r : NULL;
}

/* Whether correlation corr of proc lies before every call of the capture
 * (a record made before the profiler started). */
static bool before_window(const builder *b, int64_t proc, int64_t corr)
{
    for (uint32_t i = 0; i < b->n_firsts; i++)
        if (b->firsts[i].proc == proc)
            return corr < b->firsts[i].corr;
    return true;
}

/* The record that wait row s binds to, where the capture says where it was:
 * at the cudaEventRecord call the row names. A record made before the
 * capture began stands before everything (nothing the trace holds was
 * recorded by it). Where the row names the recording stream but no call the
 * capture holds, the record is assumed at the last cudaEventRecord call
 * before the wait (the latest the real one can be), else right before the
 * wait, and counted (assumed-record). */
static int add_record_for(builder *b, cap_sync *s, const cap_api *wait_call, uint32_t name)
{
    capture *c = b->c;
    if (!valid_id(s->record_stream))
        return 0;               /* nsys: records come from its CUDA_EVENT rows */
    uint32_t stream = capture_stream(c, s->proc, s->device, s->record_stream);
    if (stream == TRACE_NONE)
        return oom(b);
    const cap_api *rec = api_of(c, s->proc, s->record_corr);
    bool earlier = !rec && valid_id(s->record_corr) && s->record_corr < wait_call->corr &&
                   before_window(b, s->proc, s->record_corr);
    if (!rec && !earlier) {
        count_once(c, &s->counted, CAP_DROP_ASSUMED_RECORD);
        rec = last_record_before(b, s->proc, wait_call->corr);
    }
    item *it;
    if (rec) {
        key3 k = { s->proc, rec->corr, name };
        if (map3_get(&b->recorded, k) != TRACE_NONE)
            return 0;
        if (map3_put(&b->recorded, k, 0) != 0 || !(it = new_item(b)))
            return oom(b);
        it->host = rec->host;
        it->key_t = rec->t0;
        it->key_corr = rec->corr;
        it->key_sub = SUB_MAIN;
        it->api_t0 = rec->t0;
        it->api_t1 = rec->t1;
        it->flags = valid_id(s->record_corr) && rec->corr == s->record_corr ? 0 : ITEM_ASSUMED;
    } else {
        if (!(it = new_item(b)))
            return oom(b);
        it->host = wait_call->host;
        it->key_t = earlier ? INT64_MIN : wait_call->t0;
        it->key_corr = earlier ? s->record_corr : wait_call->corr;
        it->key_sub = SUB_ASSUMED;
        it->flags = earlier ? 0 : ITEM_ASSUMED;
    }
    it->kind = TRACE_RECORD;
    it->stream = stream;
    it->object = name;
    return 0;
}

/* Pass 2: synchronisation rows, joined to their calls. */
static int add_sync_items(builder *b)
{
    capture *c = b->c;
    for (uint64_t i = 0; i < c->n_syncs; i++) {
        cap_sync *s = &c->syncs[i];
        cap_api *a = api_of(c, s->proc, s->corr);
        if (!a) {
            count_once(c, &s->counted, CAP_DROP_SYNC_WITHOUT_CALL);
            continue;
        }
        a->has_sync = true;
        api_role role = (api_role)a->role;
        if (role == ROLE_OTHER || role == ROLE_FREE) {
            static const api_role by_kind[] = { ROLE_OTHER, ROLE_EVENT_SYNC, ROLE_STREAM_WAIT,
                                                ROLE_STREAM_SYNC, ROLE_DEVICE_SYNC };
            role = (unsigned)s->kind < 5 ? by_kind[s->kind] : ROLE_OTHER;
        }
        int64_t device = valid_id(s->device) ? s->device : host_device(b, a->host);
        switch (role) {
        case ROLE_STREAM_SYNC:
            if (valid_id(s->stream) && valid_id(s->device)) {
                uint32_t st = capture_stream(c, s->proc, s->device, s->stream);
                if (st == TRACE_NONE || add_host_sync(b, a, s->corr, TRACE_SYNC_QUEUE, st,
                                                      CAP_NONE, 0) != 0)
                    return oom(b);
                break;
            }
            /* the stream is unknown, the device is not: widened */
            count_once(c, &s->counted, CAP_DROP_WIDENED_SYNC);
            __attribute__((fallthrough));
        case ROLE_DEVICE_SYNC:
            if (add_host_sync(b, a, s->corr,
                              device != CAP_NONE ? TRACE_SYNC_DEVICE : TRACE_SYNC_ALL,
                              TRACE_NONE, device, 0) != 0)
                return -1;
            break;
        case ROLE_QUERY:
            b->queries++;
            break;
        case ROLE_EVENT_SYNC:
        case ROLE_STREAM_WAIT: {
            if (role == ROLE_STREAM_WAIT && !(valid_id(s->stream) && valid_id(s->device))) {
                count_once(c, &s->counted, CAP_DROP_UNBOUND_WAIT);
                break;
            }
            /* Neither the event nor its record's call is said, but the stream
             * that recorded it is: the record is assumed right before the
             * wait, under a name of the wait's own (ev.wCORR). */
            bool by_wait = !valid_id(s->event) && !valid_id(s->record_corr);
            if (by_wait && !valid_id(s->record_stream)) {
                count_once(c, &s->counted, CAP_DROP_UNBOUND_WAIT);
                break;
            }
            uint32_t name = by_wait ? wait_event_name(b, s->proc, s->corr)
                                    : event_name(b, s->proc, s->event, s->record_corr);
            if (name == TRACE_NONE)
                return oom(b);
            if (add_record_for(b, s, a, name) != 0)
                return -1;
            item *it = new_item(b);
            if (!it || map3_put(&b->waited, (key3){ s->proc, name, 0 }, 0) != 0)
                return oom(b);
            it->kind = TRACE_WAIT;
            it->object = name;
            it->host = a->host;
            it->key_t = a->t0;
            it->key_corr = s->corr;
            it->key_sub = SUB_MAIN;
            it->api_t0 = a->t0;
            it->api_t1 = a->t1;
            if (role == ROLE_EVENT_SYNC) {
                it->flags = ITEM_ON_HOST;
                it->t = a->t0;
                it->dur = a->t1 - a->t0;
            } else {
                it->stream = capture_stream(c, s->proc, s->device, s->stream);
                if (it->stream == TRACE_NONE)
                    return oom(b);
            }
            break;
        }
        default:
            break;
        }
    }
    return 0;
}

/* Pass 3: sync calls without a sync row (captures without them, ROCm). */
static int add_call_items(builder *b)
{
    capture *c = b->c;
    for (uint64_t i = 0; i < c->n_apis; i++) {
        cap_api *a = &c->apis[i];
        /* a launch whose work the profiler lost: what it ran is missing */
        if (a->launch != CAP_LAUNCH_NONE && valid_id(a->corr) && !a->has_work &&
            map3_get(&c->work_seen, (key3){ a->proc, a->corr, 0 }) == TRACE_NONE)
            count_once(c, &a->counted, CAP_DROP_LAUNCH_WITHOUT_WORK);
        if (a->has_sync)
            continue;
        switch (a->role) {
        case ROLE_FREE: {
            /* The free's own time is host work (driver work that can take
             * seconds): an op as long as the call, then the implicit sync. */
            item *op = new_item(b);
            if (!op)
                return oom(b);
            op->kind = TRACE_OP;
            op->flags = ITEM_ON_HOST;
            op->host = a->host;
            op->label = a->name;
            op->key_t = a->t0;
            op->key_corr = a->corr;
            op->key_sub = SUB_MAIN;
            op->t = a->t0;
            op->dur = a->t1 - a->t0;
            op->api_t0 = a->t0;
            op->api_t1 = a->t1;
            int64_t d = host_device(b, a->host);
            if (add_host_sync(b, a, a->corr, d != CAP_NONE ? TRACE_SYNC_DEVICE : TRACE_SYNC_ALL,
                              TRACE_NONE, d, ITEM_IMPLICIT_FREE) != 0)
                return -1;
            item *sy = &b->items[b->n - 1];
            sy->key_sub = SUB_BLOCK;
            sy->t = a->t1;
            sy->dur = 0;
            break;
        }
        case ROLE_STREAM_SYNC:  /* which stream is not said: the whole device */
            count_once(c, &a->counted, CAP_DROP_WIDENED_SYNC);
            __attribute__((fallthrough));
        case ROLE_DEVICE_SYNC: {
            int64_t d = host_device(b, a->host);
            if (add_host_sync(b, a, a->corr, d != CAP_NONE ? TRACE_SYNC_DEVICE : TRACE_SYNC_ALL,
                              TRACE_NONE, d, 0) != 0)
                return -1;
            break;
        }
        case ROLE_STREAM_WAIT:
            if (c->waits_filtered) {  /* taken as on a stream without GPU work: orders nothing */
                count_once(c, &a->counted, CAP_DROP_IDLE_STREAM_WAIT);
                break;
            }
            __attribute__((fallthrough));
        case ROLE_EVENT_SYNC:
            count_once(c, &a->counted, CAP_DROP_UNBOUND_WAIT);
            break;
        case ROLE_QUERY:
            b->queries++;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* Pass 4b: allocations, frees and host accesses of memory known by address. */
static int add_mem_items(builder *b)
{
    capture *c = b->c;
    for (uint64_t i = 0; i < c->n_lives; i++) {
        const cap_life *l = &c->lives[i];
        item *it = new_item(b);
        if (!it)
            return oom(b);
        it->kind = l->alloc ? TRACE_ALLOC : TRACE_FREE;
        it->object = l->buf;
        it->host = l->host;
        it->stream = l->stream;
        it->key_t = l->t0;
        it->key_corr = l->corr;
        /* a host free stands after the call's implicit device sync */
        it->key_sub = !l->alloc && l->stream == TRACE_NONE ? SUB_AFTER : SUB_MAIN;
        it->api_t0 = l->t0;
        it->api_t1 = l->t1;
        if (l->stream == TRACE_NONE) {
            it->flags = ITEM_ON_HOST;
            it->t = l->alloc ? l->t0 : l->t1;
            it->dur = l->alloc ? l->t1 - l->t0 : 0;
        }
    }
    for (uint64_t i = 0; i < c->n_haccs; i++) {
        const cap_acc *a = &c->haccs[i];
        item *it = new_item(b);
        if (!it)
            return oom(b);
        it->kind = TRACE_OP;
        it->flags = ITEM_ON_HOST | ITEM_HOST_ACCESS;
        it->host = a->owner;
        it->object = (int64_t)i;
        it->label = a->name;
        it->key_t = a->t0;
        it->key_corr = INT64_MAX;
        it->key_sub = SUB_MAIN;
        it->t = a->t0;
        it->dur = a->t1 - a->t0;
    }
    return 0;
}

static int range_cmp(const void *pa, const void *pb);
static bool profiler_step(const char *name, const char **num);

/* A launch call's host and start, for add_et_host_items. */
typedef struct launch_at {
    int64_t host, t;
} launch_at;

static int launch_cmp(const void *pa, const void *pb)
{
    const launch_at *a = pa, *b = pb;
    if (a->host != b->host)
        return a->host < b->host ? -1 : 1;
    return (a->t > b->t) - (a->t < b->t);
}

/* Whether the ET op rf has a tensor in host memory. */
static bool has_host_tensor(const builder *b, int64_t rf)
{
    uint32_t nt;
    const cap_tensor *ts = cap_accesses_of(b->et, rf, &nt);
    for (uint32_t k = 0; ts && k < nt; k++)
        if (ts[k].device < 0)
            return true;
    return false;
}

/* Pass 4c (with an execution trace): a framework op that ran on the host
 * (it launched no GPU work, nor did any op inside it) and has tensors in host
 * memory reads and writes them itself: a host op with those byte ranges,
 * standing at the op's end (whatever it synchronised on inside it came first),
 * with no duration of its own (the host time around it is kept already). So
 * a host read of a non_blocking device-to-host copy's destination races with
 * the copy unless a sync orders them. An op that launched GPU work gives its
 * tensors to that work instead (its copy reads and writes the host bytes).
 * A framework op that no ET op joins is counted (unjoined-op): its bytes,
 * on the host or on the GPU, are unknown. */
static int add_et_host_items(builder *b)
{
    capture *c = b->c;
    if (!b->et || !c->n_ranges)
        return 0;
    uint64_t n = 0;
    for (uint64_t i = 0; i < c->n_apis; i++)
        n += c->apis[i].has_work;
    launch_at *launch = malloc((n + 1) * sizeof *launch);
    if (!launch)
        return oom(b);
    n = 0;
    for (uint64_t i = 0; i < c->n_apis; i++)
        if (c->apis[i].has_work)
            launch[n++] = (launch_at){ c->apis[i].host, c->apis[i].t0 };
    qsort(launch, n, sizeof *launch, launch_cmp);
    int rc = 0;
    for (uint64_t r = 0; r < c->n_ranges && rc == 0; r++) {
        cap_range *rg = &c->ranges[r];
        uint32_t nt;
        /* an op the execution trace does not describe: what it touched, on the
         * host or through the GPU work it launched, is unknown (a
         * ProfilerStep#N range, which older profiles call an op, marks an
         * iteration and touches nothing) */
        const char *num;
        if (rg->op && rg->rf != CAP_NONE && !cap_accesses_of(b->et, rg->rf, &nt) &&
            !profiler_step(trace_str(b->t, rg->name), &num))
            count_once(c, &rg->counted, CAP_DROP_UNJOINED_OP);
        if (!rg->op || rg->rf == CAP_NONE || !has_host_tensor(b, rg->rf))
            continue;
        launch_at key = { rg->host, rg->t0 };
        uint64_t lo = 0, hi = n;    /* the first launch of its host at or after its start */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (launch_cmp(&launch[mid], &key) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && launch[lo].host == rg->host && launch[lo].t <= rg->t1)
            continue;               /* it launched GPU work: its tensors are that work's */
        item *it = new_item(b);
        if (!it) {
            rc = oom(b);
            break;
        }
        it->kind = TRACE_OP;
        it->flags = ITEM_ON_HOST | ITEM_ET_HOST;
        it->host = rg->host;
        it->label = rg->name;
        it->object = rg->rf;
        it->key_t = rg->t1;
        it->key_corr = INT64_MIN;
        it->key_sub = SUB_GAP;
        it->t = rg->t1;
        it->dur = 0;
    }
    free(launch);
    return rc;
}

/* Pass 4d: a capture that records no host access at all (no ET host op, no
 * host access of the CUDA log) cannot show a host read or write racing with
 * a copy that does not block the host (an async copy from or to pinned
 * memory): each such copy is counted (host-unrecorded), so that the check
 * says what it could not see. Copies that block the host are ordered with
 * its accesses by their own sync. */
static int count_unrecorded_host(builder *b)
{
    capture *c = b->c;
    if (c->n_haccs)
        return 0;
    for (uint64_t i = 0; i < b->n; i++)
        if (b->items[i].flags & ITEM_ET_HOST)
            return 0;
    for (uint64_t i = 0; i < c->n_gpus; i++) {
        cap_gpu *g = &c->gpus[i];
        bool host_side = g->src == CAP_MEM_PINNED || g->src == CAP_MEM_HOST ||
                         g->src == CAP_MEM_PAGEABLE || g->dst == CAP_MEM_PINNED ||
                         g->dst == CAP_MEM_HOST || g->dst == CAP_MEM_PAGEABLE;
        if (g->kind != CAP_MEMCPY || !host_side)
            continue;
        const cap_api *a = api_of(c, c->streams[g->stream].proc, g->corr);
        bool pageable = g->src == CAP_MEM_PAGEABLE || g->dst == CAP_MEM_PAGEABLE;
        if (a && a->role != ROLE_COPY_SYNC && !pageable)
            count_once(c, &g->counted, CAP_DROP_HOST_UNRECORDED);
    }
    return 0;
}

/* Pass 4: records the device side reported (nsys), of events waited on. */
static int add_record_items(builder *b)
{
    capture *c = b->c;
    for (uint64_t i = 0; i < c->n_recs; i++) {
        cap_rec *r = &c->recs[i];
        if (!valid_id(r->event) || !valid_id(r->stream))
            continue;
        uint32_t name = event_name(b, r->proc, r->event, CAP_NONE);
        if (name == TRACE_NONE)
            return oom(b);
        if (map3_get(&b->waited, (key3){ r->proc, name, 0 }) == TRACE_NONE)
            continue;
        const cap_api *a = api_of(c, r->proc, r->corr);
        if (!a) {               /* a record waited on, whose call is missing */
            count_once(c, &r->counted, CAP_DROP_UNMATCHED_CORRELATION);
            continue;
        }
        item *it = new_item(b);
        uint32_t st = capture_stream(c, r->proc, r->device, r->stream);
        if (!it || st == TRACE_NONE)
            return oom(b);
        it->kind = TRACE_RECORD;
        it->stream = st;
        it->object = name;
        it->host = a->host;
        it->key_t = a->t0;
        it->key_corr = r->corr;
        it->key_sub = SUB_MAIN;
        it->api_t0 = a->t0;
        it->api_t1 = a->t1;
    }
    return 0;
}


/* Sorts the items into submission order: small keys are sorted, then the
 * items moved in place along the permutation's cycles (an item is three
 * times a key, and no second array of items is touched). */
typedef struct sort_key {
    int64_t t, corr, start;
    uint32_t sub, idx;
} sort_key;

static int key_cmp(const void *pa, const void *pb)
{
    const sort_key *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    if (a->corr != b->corr)
        return a->corr < b->corr ? -1 : 1;
    if (a->sub != b->sub)
        return a->sub < b->sub ? -1 : 1;
    if (a->start != b->start)   /* several activities of one call: by start */
        return a->start < b->start ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int sort_items(builder *b)
{
    if (b->n < 2)
        return 0;
    if (b->n >= UINT32_MAX)
        return oom(b);
    sort_key *keys = malloc(b->n * sizeof *keys);
    if (!keys)
        return oom(b);
    for (uint64_t i = 0; i < b->n; i++) {
        const item *it = &b->items[i];
        keys[i] = (sort_key){ it->key_t, it->key_corr, it->t, it->key_sub, (uint32_t)i };
    }
    qsort(keys, b->n, sizeof *keys, key_cmp);
    /* apply the permutation in place, cycle by cycle: items[i] becomes
     * items[keys[i].idx]; a visited position gets idx = UINT32_MAX */
    for (uint64_t i = 0; i < b->n; i++) {
        if (keys[i].idx == UINT32_MAX || keys[i].idx == i)
            continue;
        item first = b->items[i];
        uint64_t at = i;
        for (;;) {
            uint64_t from = keys[at].idx;
            keys[at].idx = UINT32_MAX;
            if (from == i) {
                b->items[at] = first;
                break;
            }
            b->items[at] = b->items[from];
            at = from;
        }
    }
    free(keys);
    return 0;
}

/* Pass 5 (after sorting): the legacy default stream's implicit
 * synchronisation with the blocking streams of its device, as record/wait
 * pairs before each statement that needs one. Only where the capture says
 * how streams were created. */
static int add_legacy_syncs(builder *b)
{
    capture *c = b->c;
    bool any_legacy = false, any_blocking = false;
    for (uint64_t s = 0; s < c->n_streams; s++) {
        any_legacy |= c->streams[s].kind == CAP_STREAM_LEGACY;
        any_blocking |= c->streams[s].kind == CAP_STREAM_BLOCKING;
    }
    if (!any_legacy || !any_blocking)
        return 0;
    /* dirty[s]: work submitted to s since its last implicit record */
    uint8_t *dirty = calloc(c->n_streams + 1, 1);
    item *out = NULL;
    uint64_t n_out = 0, cap_out = 0, serial = 0;
    if (!dirty)
        return oom(b);
    for (uint64_t i = 0; i < b->n; i++) {
        const item *it = &b->items[i];
        if (!(it->flags & ITEM_ON_HOST) && it->stream != TRACE_NONE &&
            (it->kind == TRACE_OP || it->kind == TRACE_COPY)) {
            const cap_stream *s = &c->streams[it->stream];
            if (s->kind == CAP_STREAM_LEGACY || s->kind == CAP_STREAM_BLOCKING) {
                for (uint64_t o = 0; o < c->n_streams; o++) {
                    const cap_stream *os = &c->streams[o];
                    bool pair = (s->kind == CAP_STREAM_LEGACY ? os->kind == CAP_STREAM_BLOCKING
                                                              : os->kind == CAP_STREAM_LEGACY);
                    if (!pair || !dirty[o] || os->proc != s->proc || os->device != s->device)
                        continue;
                    char name[64];
                    snprintf(name, sizeof name, "legacy.%llu", (unsigned long long)serial++);
                    uint32_t ev = trace_intern_cstr(b->t, name);
                    int64_t r = PUSH(out, n_out, cap_out), w = PUSH(out, n_out, cap_out);
                    if (ev == TRACE_NONE || r < 0 || w < 0)
                        goto fail;
                    item base = { .key_t = it->key_t, .key_corr = it->key_corr,
                                  .key_sub = it->key_sub, .host = it->host,
                                  .flags = ITEM_IMPLICIT_LEGACY, .label = TRACE_NONE,
                                  .object = ev, .t = TRACE_TIME_NONE, .dur = TRACE_TIME_NONE,
                                  .api_t0 = it->api_t0, .api_t1 = it->api_t1, .gpu = TRACE_NONE,
                                  .iter = TRACE_NONE };
                    out[r] = base;
                    out[r].kind = TRACE_RECORD;
                    out[r].stream = (uint32_t)o;
                    out[w] = base;
                    out[w].kind = TRACE_WAIT;
                    out[w].stream = it->stream;
                    dirty[o] = 0;
                }
                dirty[it->stream] = 1;
            }
        }
        int64_t k = PUSH(out, n_out, cap_out);
        if (k < 0)
            goto fail;
        out[k] = *it;
    }
    free(dirty);
    free(b->items);
    b->items = out;
    b->n = n_out;
    b->cap = cap_out;
    return 0;
fail:
    free(dirty);
    free(out);
    return oom(b);
}

/* ------------------------------------------------------------------ */
/* Per host: host time, iterations and accesses (a sweep over ranges). */

static int range_cmp(const void *pa, const void *pb)
{
    const cap_range *a = pa, *b = pb;
    if (a->host != b->host)
        return a->host < b->host ? -1 : 1;
    if (a->t0 != b->t0)
        return a->t0 < b->t0 ? -1 : 1;
    if (a->t1 != b->t1)
        return a->t1 > b->t1 ? -1 : 1;  /* the enclosing one first */
    return 0;
}

/* ProfilerStep#N -> N. */
static bool profiler_step(const char *name, const char **num)
{
    if (strncmp(name, "ProfilerStep#", 13) != 0 || !name[13])
        return false;
    *num = name + 13;
    return true;
}

/* The iteration ranges of one host's ranges [r0, r1): ProfilerStep ranges
 * when the capture has any, else ranges whose name repeats on the thread;
 * the outermost of these. Marks them in sel[] and sets their iter value. */
static int select_iterations(builder *b, const cap_range *r, uint64_t n, bool steps,
                             uint32_t *iter_of)
{
    map3 seen = { 0 };
    int rc = 0;
    for (uint64_t i = 0; i < n; i++)
        iter_of[i] = TRACE_NONE;
    if (!steps) {
        for (uint64_t i = 0; i < n; i++) {
            if (r[i].op)
                continue;
            key3 k = { r[i].name, 0, 0 };
            uint32_t v = map3_get(&seen, k);
            if (map3_put(&seen, k, v == TRACE_NONE ? 1 : v + 1) != 0)
                goto fail;
        }
    }
    map3 occ = { 0 };
    int64_t open_end = INT64_MIN;
    for (uint64_t i = 0; i < n; i++) {
        const char *name = trace_str(b->t, r[i].name), *num;
        bool is_step = profiler_step(name, &num);
        uint32_t times = steps ? 0 : map3_get(&seen, (key3){ r[i].name, 0, 0 });
        if (steps ? !is_step : (r[i].op || times == TRACE_NONE || times < 2))
            continue;           /* annotations mark iterations, framework ops do not */
        if (r[i].t0 <= open_end)
            continue;           /* inside a selected one: the outermost wins */
        char buf[600];
        if (is_step) {
            snprintf(buf, sizeof buf, "%s", num);
        } else {
            key3 k = { r[i].name, 1, 0 };
            uint32_t v = map3_get(&occ, k);
            v = v == TRACE_NONE ? 1 : v + 1;
            if (map3_put(&occ, k, v) != 0) {
                map3_free(&occ);
                goto fail;
            }
            snprintf(buf, sizeof buf, "%.500s#%u", name, v);
        }
        iter_of[i] = trace_intern_cstr(b->t, buf);
        if (iter_of[i] == TRACE_NONE) {
            map3_free(&occ);
            goto fail;
        }
        open_end = r[i].t1;
    }
    map3_free(&occ);
    map3_free(&seen);
    return rc;
fail:
    map3_free(&seen);
    return oom(b);
}

/* Adds the host-time ops, iter= values and ET accesses (through it->gpu's
 * op: stored in gpu_op[]). ops_rf[i]: the rf_id of the op around item i's
 * launch that has tensors, or CAP_NONE. */
static int sweep_hosts(builder *b, int64_t *op_rf)
{
    capture *c = b->c;
    bool steps = false;
    for (uint64_t i = 0; i < c->n_ranges && !steps; i++) {
        const char *num;
        steps = profiler_step(trace_str(b->t, c->ranges[i].name), &num);
    }
    if (c->n_ranges)
        qsort(c->ranges, c->n_ranges, sizeof *c->ranges, range_cmp);
    /* items of each host, in order: counting sort by host */
    uint64_t nh = c->n_hosts;
    uint64_t *start = calloc(nh + 1, sizeof *start), *order = malloc((b->n + 1) * sizeof *order);
    uint32_t *iter_of = malloc((c->n_ranges + 1) * sizeof *iter_of);
    const cap_range **stack = malloc((c->n_ranges + 1) * sizeof *stack);
    uint32_t *stack_iter = malloc((c->n_ranges + 1) * sizeof *stack_iter);
    int rc = -1;
    b->gap_at = calloc(b->n + 1, sizeof *b->gap_at);
    if (!start || !order || !iter_of || !stack || !stack_iter || !b->gap_at) {
        oom(b);
        goto done;
    }
    for (uint64_t i = 0; i < b->n; i++)
        if (b->items[i].host != TRACE_NONE)
            start[b->items[i].host + 1]++;
    for (uint64_t h = 0; h < nh; h++)
        start[h + 1] += start[h];
    {
        uint64_t *fill = calloc(nh + 1, sizeof *fill);
        if (!fill) {
            oom(b);
            goto done;
        }
        for (uint64_t i = 0; i < b->n; i++) {
            uint32_t h = b->items[i].host;
            if (h != TRACE_NONE)
                order[start[h] + fill[h]++] = i;
        }
        free(fill);
    }
    uint64_t r_at = 0, n_items = b->n;
    for (uint64_t h = 0; h < nh; h++) {
        while (r_at < c->n_ranges && c->ranges[r_at].host < h)
            r_at++;
        uint64_t r_end = r_at;
        while (r_end < c->n_ranges && c->ranges[r_end].host == h)
            r_end++;
        const cap_range *rs = c->ranges + r_at;
        uint64_t nr = r_end - r_at;
        if (select_iterations(b, rs, nr, steps, iter_of) != 0)
            goto done;
        uint64_t depth = 0, next_r = 0;
        int64_t prev_end = CAP_NONE, prev_call = CAP_NONE;
        uint32_t cur_iter = TRACE_NONE;
        for (uint64_t k = start[h]; k < start[h + 1]; k++) {
            uint64_t idx = order[k];
            int64_t at = b->items[idx].api_t0 != CAP_NONE ? b->items[idx].api_t0
                                                          : b->items[idx].key_t;
            /* ranges that started by `at` are open; closed ones leave */
            while (next_r < nr && rs[next_r].t0 <= at) {
                while (depth && stack[depth - 1]->t1 < rs[next_r].t0)
                    depth--;
                stack_iter[depth] = iter_of[next_r];
                stack[depth++] = &rs[next_r++];
            }
            while (depth && stack[depth - 1]->t1 < at)
                depth--;
            cur_iter = TRACE_NONE;
            for (uint64_t d = 0; d < depth && cur_iter == TRACE_NONE; d++)
                cur_iter = stack_iter[d];
            b->items[idx].iter = cur_iter;
            /* an NCCL kernel's collective, as the annotation around it says */
            uint32_t ga = b->items[idx].gpu;
            if (ga != TRACE_NONE && b->items[idx].kind == TRACE_OP &&
                nccl_kernel(trace_str(b->t, c->gpus[ga].name))) {
                for (uint64_t d = depth; d-- > 0;)
                    if (strncmp(trace_str(b->t, stack[d]->name), "nccl:", 5) == 0) {
                        b->nccl_range[ga] = stack[d]->name;
                        break;
                    }
            }
            /* the op that launched it (the innermost framework op), for the
             * ET's join check; then the op around the launch that has tensors */
            if (b->et && b->items[idx].gpu != TRACE_NONE) {
                for (uint64_t d = depth; d-- > 0;) {
                    if (!stack[d]->op || stack[d]->rf == CAP_NONE)
                        continue;
                    key3 op_key = { stack[d]->rf, 0, 0 };
                    if (map3_get(&b->launch_ops, op_key) == TRACE_NONE) {
                        uint32_t nt;
                        if (map3_put(&b->launch_ops, op_key, 0) != 0) {
                            oom(b);
                            goto done;
                        }
                        b->et_launch_ops++;
                        b->et_launch_joined +=
                            cap_accesses_of(b->et, stack[d]->rf, &nt) != NULL && nt > 0;
                    }
                    break;
                }
                for (uint64_t d = depth; d-- > 0;) {
                    uint32_t nt;
                    if (stack[d]->op && cap_accesses_of(b->et, stack[d]->rf, &nt) && nt) {
                        op_rf[b->items[idx].gpu] = stack[d]->rf;
                        break;
                    }
                }
            }
            /* host time since the previous call that made a statement (the
             * items array may move below: copy what is needed) */
            int64_t call_t0 = b->items[idx].api_t0, call_t1 = b->items[idx].api_t1;
            int64_t call_corr = b->items[idx].key_corr;
            if (call_t0 == CAP_NONE || call_t0 == prev_call)
                continue;
            /* A call that only submits (a launch) costs the host its whole
             * duration (lazy module loading can take seconds): the host time
             * runs to its end. A blocking call's own time is the wait, which
             * its statement stands for: the host time stops at its start. */
            bool blocks = false;
            for (uint64_t k2 = k; k2 < start[h + 1] && !blocks; k2++) {
                const item *o = &b->items[order[k2]];
                if (o->api_t0 != call_t0 || o->key_corr != call_corr)
                    break;
                blocks = o->flags & ITEM_ON_HOST;
            }
            int64_t gap_end = blocks ? call_t0 : call_t1;
            if (prev_end != CAP_NONE && gap_end > prev_end) {
                uint32_t label = b->s_host;
                for (uint64_t d = depth; d-- > 0;)
                    if (stack[d]->t1 >= call_t0) {
                        label = stack[d]->name;
                        break;
                    }
                int64_t gi = PUSH(b->gaps, b->n_gaps, b->cap_gaps);
                if (gi < 0 || b->n_gaps >= UINT32_MAX) {
                    oom(b);
                    goto done;
                }
                b->gaps[gi] = (gap){ (uint32_t)h, label, cur_iter, prev_end, gap_end - prev_end };
                b->gap_at[idx] = (uint32_t)gi + 1;
            }
            prev_call = call_t0;
            if (prev_end == CAP_NONE || call_t1 > prev_end)
                prev_end = call_t1;
        }
        r_at = r_end;
    }
    (void)n_items;
    rc = 0;
done:
    free(start);
    free(order);
    free(iter_of);
    free(stack);
    free(stack_iter);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Declarations and statements.                                        */

static uint32_t intern_fmt(trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint32_t intern_fmt(trace *t, const char *fmt, ...)
{
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return trace_intern_cstr(t, buf);
}

static uint32_t device_name(builder *b, int64_t proc, int64_t device)
{
    return b->multi_proc ? intern_fmt(b->t, "p%lld.gpu%lld", (long long)proc, (long long)device)
                         : intern_fmt(b->t, "gpu%lld", (long long)device);
}

/* Pass: the NCCL kernels of a profile (Kineto, nsys) that say which
 * collective they are become `collective` statements, so that a merged job
 * matches them across ranks. KIND: the importer's "Collective name", else the
 * kernel's name, else the "nccl:" annotation around its launch (nccl_kind).
 * Communicator: the process group's name when the importer has it, else
 * "nccl-stream<S>": PyTorch gives each process group its own NCCL stream,
 * created in the same order on every rank. size=: the group's size when
 * given, else the world size of the capture's run metadata. A kernel whose
 * KIND or size is unknown stays an op, counted in capture.nccl_unmatched. */
static int name_collectives(builder *b)
{
    capture *c = b->c;
    const char *ws = trace_get_meta(b->t, "world_size");
    uint64_t world = ws ? strtoull(ws, NULL, 10) : 0, matched = 0;
    for (uint64_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->gpu == TRACE_NONE || it->kind != TRACE_OP)
            continue;
        cap_gpu *g = &c->gpus[it->gpu];
        if (g->kind != CAP_KERNEL || !nccl_kernel(trace_str(b->t, g->name)))
            continue;
        const char *kind = g->coll != TRACE_NONE ? nccl_kind(trace_str(b->t, g->coll)) : NULL;
        if (!kind)
            kind = nccl_kind(trace_str(b->t, g->name));
        if (!kind && b->nccl_range[it->gpu] != TRACE_NONE)
            kind = nccl_kind(trace_str(b->t, b->nccl_range[it->gpu]));
        uint64_t ranks = g->ranks ? g->ranks : world;
        if (!kind || !ranks) {
            count_once(c, &g->counted, CAP_DROP_NCCL_UNMATCHED);
            continue;
        }
        uint32_t comm = g->comm;
        if (comm == TRACE_NONE)
            comm = intern_fmt(b->t, "nccl-stream%lld", (long long)c->streams[g->stream].stream);
        uint32_t k = trace_intern_cstr(b->t, kind);
        if (comm == TRACE_NONE || k == TRACE_NONE)
            return oom(b);
        g->kind = CAP_COLLECTIVE;
        g->comm = comm;
        g->coll = k;
        g->ranks = ranks;
        it->kind = TRACE_COLLECTIVE;
        matched++;
    }
    if (matched && capture_count(c, "capture.nccl_collectives", matched) != 0)
        return oom(b);
    return 0;
}

static int declare_queues(builder *b)
{
    capture *c = b->c;
    bool *used_h = calloc(c->n_hosts + 1, 1), *used_s = calloc(c->n_streams + 1, 1);
    if (!used_h || !used_s) {
        free(used_h);
        free(used_s);
        return oom(b);
    }
    for (uint64_t i = 0; i < b->n; i++) {
        const item *it = &b->items[i];
        if (it->host != TRACE_NONE)
            used_h[it->host] = true;
        if (it->stream != TRACE_NONE)
            used_s[it->stream] = true;
    }
    int rc = 0;
    for (uint64_t h = 0; h < c->n_hosts && rc == 0; h++) {
        if (!used_h[h])
            continue;
        uint32_t name = h == b->unlaunched
                            ? trace_intern_cstr(b->t, "host.unlaunched")
                            : intern_fmt(b->t, "host.%lld.%lld", (long long)c->hosts[h].pid,
                                         (long long)c->hosts[h].tid);
        c->hosts[h].queue = name == TRACE_NONE ? TRACE_NONE
                                               : trace_add_queue(b->t, name, TRACE_QUEUE_HOST,
                                                                 TRACE_NONE);
        if (c->hosts[h].queue == TRACE_NONE)
            rc = -1;
    }
    for (uint64_t s = 0; s < c->n_streams && rc == 0; s++) {
        if (!used_s[s])
            continue;
        const cap_stream *st = &c->streams[s];
        uint32_t dev = device_name(b, st->proc, st->device);
        uint32_t name = b->multi_proc
                            ? intern_fmt(b->t, "p%lld.gpu%lld.s%lld", (long long)st->proc,
                                         (long long)st->device, (long long)st->stream)
                            : intern_fmt(b->t, "gpu%lld.s%lld", (long long)st->device,
                                         (long long)st->stream);
        c->streams[s].queue = dev == TRACE_NONE || name == TRACE_NONE
                                  ? TRACE_NONE
                                  : trace_add_queue(b->t, name, TRACE_QUEUE_STREAM, dev);
        if (c->streams[s].queue == TRACE_NONE)
            rc = -1;
    }
    free(used_h);
    free(used_s);
    if (rc != 0)
        trace_error_set(b->err, TRACE_ENOMEM, "%s: out of memory, or a queue named twice",
                        c->path);
    return rc;
}

/* The placeholder buffer of a memory space. */
static uint32_t space_buffer(builder *b, cap_mem mem, int64_t proc, int64_t device)
{
    char name[96];
    if (mem == CAP_MEM_DEVICE && device >= 0) {
        if (b->multi_proc)
            snprintf(name, sizeof name, "mem.p%lld.gpu%lld", (long long)proc, (long long)device);
        else
            snprintf(name, sizeof name, "mem.gpu%lld", (long long)device);
    } else {
        snprintf(name, sizeof name, "%s", mem == CAP_MEM_PINNED ? "mem.pinned" : "mem.host");
        mem = mem == CAP_MEM_PINNED ? CAP_MEM_PINNED : CAP_MEM_PAGEABLE;
    }
    uint32_t buf = trace_find_buffer(b->t, name, strlen(name));
    if (buf != TRACE_NONE)
        return buf;
    uint32_t id = trace_intern_cstr(b->t, name);
    if (id == TRACE_NONE)
        return TRACE_NONE;
    if (mem == CAP_MEM_DEVICE && device >= 0) {
        uint32_t dev = device_name(b, proc, device);
        return dev == TRACE_NONE ? TRACE_NONE
                                 : trace_add_root_buffer(b->t, id, 1, TRACE_LOC_DEVICE, dev, false);
    }
    return trace_add_root_buffer(b->t, id, 1, TRACE_LOC_HOST, TRACE_NONE, mem == CAP_MEM_PINNED);
}

/* The root buffer of an allocation known by address (declared on first use). */
static uint32_t mem_buffer(builder *b, uint32_t id)
{
    cap_buf *cb = &b->c->bufs[id];
    if (cb->tbuf != TRACE_NONE)
        return cb->tbuf;
    char pre[32] = "";
    if (b->multi_proc)
        snprintf(pre, sizeof pre, "p%lld.", (long long)cb->proc);
    bool on_device = (cb->mem == CAP_MEM_DEVICE || cb->mem == CAP_MEM_MANAGED) && cb->device >= 0;
    uint32_t name;
    if (cb->mem == CAP_MEM_DEVICE && cb->device >= 0)
        name = intern_fmt(b->t, "%sgpu%lld.b%u", pre, (long long)cb->device, id);
    else
        name = intern_fmt(b->t, "%s%s.b%u", pre,
                          cb->mem == CAP_MEM_PINNED    ? "pinned"
                          : cb->mem == CAP_MEM_MANAGED ? "managed"
                                                       : "host",
                          id);
    if (name == TRACE_NONE)
        return TRACE_NONE;
    if (on_device) {
        uint32_t dev = device_name(b, cb->proc, cb->device);
        cb->tbuf = dev == TRACE_NONE ? TRACE_NONE
                                     : trace_add_root_buffer(b->t, name, cb->size,
                                                             TRACE_LOC_DEVICE, dev, false);
    } else {
        cb->tbuf = trace_add_root_buffer(b->t, name, cb->size, TRACE_LOC_HOST, TRACE_NONE,
                                         cb->mem == CAP_MEM_PINNED);
    }
    return cb->tbuf;
}

/* The first of the accesses of GPU activity g in gaccs (appended in
 * activity order), and how many. */
static uint64_t gpu_acc_range(const capture *c, uint32_t g, uint64_t *n)
{
    uint64_t lo = 0, hi = c->n_gaccs;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (c->gaccs[mid].owner < g)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t e = lo;
    while (e < c->n_gaccs && c->gaccs[e].owner == g)
        e++;
    *n = e - lo;
    return lo;
}

static int acc_of(builder *b, const cap_acc *a, trace_access *out)
{
    uint32_t v = mem_buffer(b, a->buf);
    if (v == TRACE_NONE)
        return oom(b);
    uint64_t size = b->c->bufs[a->buf].size;
    uint64_t hi = a->hi > size ? size : a->hi, lo = a->lo > hi ? hi : a->lo;
    *out = (trace_access){ v, a->mode, lo == 0 && hi == size ? TRACE_REF_WHOLE : TRACE_REF_RANGE,
                           lo, hi };
    return 0;
}

/* The view of an ET tensor: one root per storage, one view per tensor
 * range. Sizes: roots span every range seen (et_root_size). */
static uint32_t tensor_view(builder *b, const cap_tensor *ten, uint64_t root_size)
{
    char root[64], view[128];
    snprintf(root, sizeof root, "st%lld", (long long)ten->storage);
    uint32_t r = trace_find_buffer(b->t, root, strlen(root));
    if (r == TRACE_NONE) {
        uint32_t id = trace_intern_cstr(b->t, root);
        if (id == TRACE_NONE)
            return TRACE_NONE;
        if (ten->device >= 0) {
            uint32_t dev = device_name(b, 0, ten->device);
            r = dev == TRACE_NONE ? TRACE_NONE
                                  : trace_add_root_buffer(b->t, id, root_size, TRACE_LOC_DEVICE,
                                                          dev, false);
        } else {
            r = trace_add_root_buffer(b->t, id, root_size, TRACE_LOC_HOST, TRACE_NONE, false);
        }
        if (r == TRACE_NONE)
            return TRACE_NONE;
    }
    snprintf(view, sizeof view, "t%lld.s%lld", (long long)ten->tensor, (long long)ten->storage);
    uint32_t v = trace_find_buffer(b->t, view, strlen(view));
    if (v != TRACE_NONE && b->t->buffers[v].offset == ten->lo &&
        b->t->buffers[v].size == ten->hi - ten->lo)
        return v;
    if (v != TRACE_NONE)    /* the same tensor id over another range */
        snprintf(view, sizeof view, "t%lld.s%lld.b%llu-%llu", (long long)ten->tensor,
                 (long long)ten->storage, (unsigned long long)ten->lo,
                 (unsigned long long)ten->hi);
    v = trace_find_buffer(b->t, view, strlen(view));
    if (v != TRACE_NONE)
        return v;
    uint32_t id = trace_intern_cstr(b->t, view);
    if (id == TRACE_NONE || ten->hi <= ten->lo)
        return TRACE_NONE;
    return trace_add_view(b->t, id, r, ten->lo, ten->hi - ten->lo);
}

/* Root sizes: the end of the furthest range of each storage over the
 * accesses the trace will use (the GPU work's ops and the host ops). */
static int storage_sizes(builder *b, const int64_t *op_rf, map3 *size_of, uint64_t **sizes,
                         uint64_t *n_sizes)
{
    uint64_t cap = 0;
    for (uint64_t g = 0; g < b->c->n_gpus + b->n; g++) {
        int64_t rf = g < b->c->n_gpus ? op_rf[g] : CAP_NONE;
        if (g >= b->c->n_gpus && (b->items[g - b->c->n_gpus].flags & ITEM_ET_HOST))
            rf = b->items[g - b->c->n_gpus].object;
        if (rf == CAP_NONE)
            continue;
        uint32_t nt;
        const cap_tensor *ts = cap_accesses_of(b->et, rf, &nt);
        for (uint32_t k = 0; k < nt; k++) {
            key3 key = { ts[k].storage, 0, 0 };
            uint32_t i = map3_get(size_of, key);
            if (i == TRACE_NONE) {
                int64_t j = capture_push((void **)sizes, n_sizes, &cap, sizeof **sizes);
                if (j < 0 || map3_put(size_of, key, (uint32_t)j) != 0)
                    return oom(b);
                (*sizes)[j] = 0;
                i = (uint32_t)j;
            }
            if (ts[k].hi > (*sizes)[i])
                (*sizes)[i] = ts[k].hi;
        }
    }
    return 0;
}

static uint64_t root_size(const map3 *size_of, const uint64_t *sizes, const cap_tensor *t)
{
    return sizes[map3_get(size_of, (key3){ t->storage, 0, 0 })];
}

/* The accesses of a GPU activity: its op's tensors (a kernel or memset:
 * those on its device; a copy: the first read and the first write, cut to
 * one length), else placeholders for a copy. n is set; returns 0 or -1. */
static int gpu_accesses(builder *b, const item *it, int64_t rf, const map3 *size_of,
                        const uint64_t *sizes, trace_access *acc, uint32_t cap, uint32_t *n)
{
    const cap_gpu *g = &b->c->gpus[it->gpu];
    const cap_stream *st = &b->c->streams[g->stream];
    *n = 0;
    uint32_t nt = 0;
    const cap_tensor *ts = rf != CAP_NONE ? cap_accesses_of(b->et, rf, &nt) : NULL;
    uint64_t n_ex;
    uint64_t ex = gpu_acc_range(b->c, it->gpu, &n_ex);
    if (n_ex && g->kind != CAP_MEMCPY) {
        for (uint64_t k = 0; k < n_ex && *n < cap; k++)
            if (acc_of(b, &b->c->gaccs[ex + k], &acc[(*n)++]) != 0)
                return -1;
        return 1;
    }
    if (n_ex) {     /* a copy: its source and destination, where known */
        const cap_acc *src = NULL, *dst = NULL;
        for (uint64_t k = 0; k < n_ex; k++) {
            const cap_acc *a = &b->c->gaccs[ex + k];
            if (a->mode == TRACE_R && !src)
                src = a;
            else if ((a->mode & TRACE_W) && !dst)
                dst = a;
        }
        int64_t sd = g->src_device != CAP_NONE ? g->src_device : st->device;
        int64_t dd = g->dst_device != CAP_NONE ? g->dst_device : st->device;
        if (src ? acc_of(b, src, &acc[0]) != 0 : 0)
            return -1;
        if (dst ? acc_of(b, dst, &acc[1]) != 0 : 0)
            return -1;
        if (!src) {
            uint32_t bs = space_buffer(b, g->src == CAP_MEM_UNKNOWN ? CAP_MEM_DEVICE : g->src,
                                       st->proc, sd);
            if (bs == TRACE_NONE)
                return oom(b);
            acc[0] = (trace_access){ bs, TRACE_R, TRACE_REF_RANGE, 0, 0 };
        }
        if (!dst) {
            uint32_t bd = space_buffer(b, g->dst == CAP_MEM_UNKNOWN ? CAP_MEM_DEVICE : g->dst,
                                       st->proc, dd);
            if (bd == TRACE_NONE)
                return oom(b);
            acc[1] = (trace_access){ bd, TRACE_W, TRACE_REF_RANGE, 0, 0 };
        }
        acc[1].mode = TRACE_W;
        *n = 2;
        return 1;
    }
    if (g->kind == CAP_MEMCPY) {
        const cap_tensor *src = NULL, *dst = NULL;
        for (uint32_t k = 0; k < nt; k++) {
            if ((ts[k].mode & TRACE_W) && !dst)
                dst = &ts[k];
            else if (ts[k].mode == TRACE_R && !src)
                src = &ts[k];
        }
        if (src && dst) {
            uint64_t len = src->hi - src->lo;
            if (dst->hi - dst->lo < len)
                len = dst->hi - dst->lo;
            if (g->bytes && g->bytes < len)
                len = g->bytes;
            uint32_t vs = tensor_view(b, src, root_size(size_of, sizes, src));
            uint32_t vd = tensor_view(b, dst, root_size(size_of, sizes, dst));
            if (vs == TRACE_NONE || vd == TRACE_NONE)
                return oom(b);
            acc[0] = (trace_access){ vs, TRACE_R, TRACE_REF_RANGE, 0, len };
            acc[1] = (trace_access){ vd, TRACE_W, TRACE_REF_RANGE, 0, len };
            *n = 2;
            return 1;
        }
        int64_t sd = g->src_device != CAP_NONE ? g->src_device : st->device;
        int64_t dd = g->dst_device != CAP_NONE ? g->dst_device : st->device;
        cap_mem ms = g->src == CAP_MEM_UNKNOWN ? CAP_MEM_DEVICE : g->src;
        cap_mem md = g->dst == CAP_MEM_UNKNOWN ? CAP_MEM_DEVICE : g->dst;
        uint32_t bs = space_buffer(b, ms, st->proc, sd), bd = space_buffer(b, md, st->proc, dd);
        if (bs == TRACE_NONE || bd == TRACE_NONE)
            return oom(b);
        acc[0] = (trace_access){ bs, TRACE_R, TRACE_REF_RANGE, 0, 0 };
        acc[1] = (trace_access){ bd, TRACE_W, TRACE_REF_RANGE, 0, 0 };
        *n = 2;
        return 0;
    }
    for (uint32_t k = 0; k < nt && *n < cap; k++) {
        if (ts[k].device != st->device)
            continue;           /* a kernel touches its own device's memory */
        if (g->kind == CAP_MEMSET && !(ts[k].mode & TRACE_W))
            continue;
        uint32_t v = tensor_view(b, &ts[k], root_size(size_of, sizes, &ts[k]));
        if (v == TRACE_NONE)
            return oom(b);
        acc[(*n)++] = (trace_access){ v, ts[k].mode, TRACE_REF_WHOLE, 0,
                                      ts[k].hi - ts[k].lo };
    }
    return *n ? 1 : 0;
}

/* Fills *s with item it (accesses and attributes in b's buffers, valid
 * until the next call). Declares the buffers it uses first. 0 or -1. */
static int emit_one(builder *b, const item *it, trace_stmt *s)
{
    capture *c = b->c;
    trace_stmt_init(s);
    s->kind = (trace_kind)it->kind;
    s->queue = (it->flags & ITEM_ON_HOST) ? c->hosts[it->host].queue
                                          : c->streams[it->stream].queue;
    if (!(it->flags & ITEM_ON_HOST) && it->host != TRACE_NONE)
        s->by = c->hosts[it->host].queue;
    s->label = it->label;
    s->t = it->t;
    s->dur = it->dur;
    uint32_t na = 0;
    trace_attr *attrs = b->attrs;
    switch (it->kind) {
    case TRACE_RECORD:
    case TRACE_WAIT:
        s->object = (uint32_t)it->object;
        break;
    case TRACE_ALLOC:
    case TRACE_FREE:
        s->object = mem_buffer(b, (uint32_t)it->object);
        if (s->object == TRACE_NONE)
            return oom(b);
        break;
    case TRACE_SYNC:
        s->sync_scope = (trace_sync_scope)it->scope;
        if (it->scope == TRACE_SYNC_QUEUE) {
            s->object = c->streams[it->stream].queue;
        } else if (it->scope == TRACE_SYNC_DEVICE) {
            s->object = device_name(b, c->hosts[it->host].pid, it->object);
            if (s->object == TRACE_NONE)
                return oom(b);
        }
        break;
    default:
        break;
    }
    if (it->gpu != TRACE_NONE) {
        uint32_t n;
        if (gpu_accesses(b, it, b->op_rf[it->gpu], &b->size_of, b->sizes, b->acc,
                         sizeof b->acc / sizeof b->acc[0], &n) < 0)
            return -1;
        s->access = b->acc;
        s->n_access = n;
        const cap_gpu *g = &c->gpus[it->gpu];
        if (g->kind == CAP_COLLECTIVE) {
            s->object = g->comm;
            s->coll_kind = g->coll;
            s->count = g->ranks;
        }
        if (g->bytes && g->kind != CAP_KERNEL) {
            attrs[na].key = b->s_bytes;
            attrs[na++].value = intern_fmt(b->t, "%llu", (unsigned long long)g->bytes);
        }
    }
    if (it->flags & ITEM_HOST_ACCESS) {
        if (acc_of(b, &c->haccs[it->object], &b->acc[0]) != 0)
            return -1;
        s->access = b->acc;
        s->n_access = 1;
    }
    if (it->flags & ITEM_ET_HOST) {
        uint32_t nt, n = 0;
        const cap_tensor *ts = cap_accesses_of(b->et, it->object, &nt);
        for (uint32_t k = 0; k < nt && n < sizeof b->acc / sizeof b->acc[0]; k++) {
            if (ts[k].device >= 0)
                continue;       /* the host touches host memory */
            uint32_t v = tensor_view(b, &ts[k], root_size(&b->size_of, b->sizes, &ts[k]));
            if (v == TRACE_NONE)
                return oom(b);
            b->acc[n++] = (trace_access){ v, ts[k].mode, TRACE_REF_WHOLE, 0, ts[k].hi - ts[k].lo };
        }
        s->access = b->acc;
        s->n_access = n;
    }
    if (it->flags & ITEM_ASSUMED)
        attrs[na++] = (trace_attr){ b->s_assumed, b->s_record };
    if (it->flags & ITEM_IMPLICIT_FREE)
        attrs[na++] = (trace_attr){ b->s_implicit, b->s_cudafree };
    if (it->flags & ITEM_IMPLICIT_LEGACY)
        attrs[na++] = (trace_attr){ b->s_implicit, b->s_legacy };
    if (it->iter != TRACE_NONE)
        attrs[na++] = (trace_attr){ b->s_iter, it->iter };
    /* A host op is the program's own time (its code, or a call's time on
     * the host): the device model cannot price it, so it names its cost. */
    if ((it->flags & ITEM_ON_HOST) && it->kind == TRACE_OP && it->dur != TRACE_TIME_NONE)
        attrs[na++] = (trace_attr){ b->s_overhead,
                                    intern_fmt(b->t, "%lld", (long long)it->dur) };
    for (uint32_t k = 0; k < na; k++)
        if (attrs[k].value == TRACE_NONE)
            return oom(b);
    s->attr = attrs;
    s->n_attr = na;
    return 0;
}

/* Before the statements: root sizes of the ET storages, and whether any
 * access will come from the ET (run metadata accesses=). */
static int prepare_accesses(builder *b)
{
    bool any = false;
    for (uint64_t g = 0; g < b->c->n_gpus && !any; g++)
        any = b->op_rf[g] != CAP_NONE;
    bool pointers = b->c->n_gaccs || b->c->n_haccs;
    if (trace_set_meta(b->t, "accesses",
                       pointers ? "pointers" : any ? "execution-trace" : "none") != 0)
        return oom(b);
    if (b->et && storage_sizes(b, b->op_rf, &b->size_of, &b->sizes, &b->n_sizes) != 0)
        return -1;
    return 0;
}

static int set_counts(builder *b)
{
    capture *c = b->c;
    uint64_t k = 0, m = 0, s = 0;
    for (uint64_t i = 0; i < c->n_gpus; i++) {
        k += c->gpus[i].kind == CAP_KERNEL;
        m += c->gpus[i].kind == CAP_MEMCPY;
        s += c->gpus[i].kind == CAP_MEMSET;
    }
    struct { const char *key; uint64_t n; } fixed[] = {
        { "capture.kernels", k }, { "capture.memcpy", m }, { "capture.memset", s },
        { "capture.api_calls", c->n_apis }, { "capture.sync_rows", c->n_syncs },
        { "capture.queries", b->queries },
    };
    char v[32];
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)fixed[i].n);
        if (trace_set_meta(b->t, fixed[i].key, v) != 0)
            return oom(b);
    }
    /* the ledger: what was read, ignored by design, and dropped by reason */
    struct { const char *key; uint64_t n; bool say; } ledger[] = {
        { "import.read", c->n_read, c->n_read > 0 },
        { "import.ignored", c->n_ignored, c->n_read > 0 },
        { "et.launch_ops", b->et_launch_ops, b->et != NULL },
        { "et.launch_ops_joined", b->et_launch_joined, b->et != NULL },
    };
    for (size_t i = 0; i < sizeof ledger / sizeof ledger[0]; i++) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)ledger[i].n);
        if (ledger[i].say && trace_set_meta(b->t, ledger[i].key, v) != 0)
            return oom(b);
    }
    for (size_t r = 0; r < CAP_DROP_COUNT; r++) {
        if (!c->drops[r])
            continue;
        char key[64];
        snprintf(key, sizeof key, TRACE_LEDGER_PREFIX "%s", drop_reasons[r].word);
        snprintf(v, sizeof v, "%llu", (unsigned long long)c->drops[r]);
        if (trace_set_meta(b->t, key, v) != 0)
            return oom(b);
    }
    for (uint64_t i = 0; i < c->n_counts; i++) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)c->counts[i].n);
        if (trace_set_meta(b->t, c->counts[i].key, v) != 0)
            return oom(b);
    }
    return 0;
}

static void builder_free(builder *b)
{
    free(b->op_rf);
    free(b->nccl_range);
    free(b->items);
    free(b->gaps);
    free(b->gap_at);
    free(b->sizes);
    map3_free(&b->size_of);
    map3_free(&b->waited);
    map3_free(&b->recorded);
    map3_free(&b->launch_ops);
    free(b->records);
    free(b->firsts);
}

static const capture *sort_calls;

static int record_cmp(const void *pa, const void *pb)
{
    const cap_api *a = &sort_calls->apis[*(const uint32_t *)pa];
    const cap_api *b = &sort_calls->apis[*(const uint32_t *)pb];
    if (a->proc != b->proc)
        return a->proc < b->proc ? -1 : 1;
    return (a->corr > b->corr) - (a->corr < b->corr);
}

/* The cudaEventRecord calls by (process, correlation), and each process's
 * first correlation: where an assumed record may stand (add_record_for). */
static int index_calls(builder *b)
{
    const capture *c = b->c;
    b->records = malloc((b->n_records + 1) * sizeof *b->records);
    if (!b->records)
        return oom(b);
    uint64_t n = 0;
    for (uint64_t i = 0; i < c->n_apis; i++) {
        const cap_api *a = &c->apis[i];
        if (a->role == ROLE_RECORD && valid_id(a->corr))
            b->records[n++] = (uint32_t)i;
        if (!valid_id(a->corr))
            continue;
        uint32_t k = 0;
        while (k < b->n_firsts && b->firsts[k].proc != a->proc)
            k++;
        if (k == b->n_firsts) {
            void *g = realloc(b->firsts, (k + 1) * sizeof *b->firsts);
            if (!g)
                return oom(b);
            b->firsts = g;
            b->firsts[k].proc = a->proc;
            b->firsts[k].corr = a->corr;
            b->n_firsts++;
        } else if (a->corr < b->firsts[k].corr) {
            b->firsts[k].corr = a->corr;
        }
    }
    sort_calls = c;     /* qsort has no context argument */
    if (n > 1)
        qsort(b->records, n, sizeof *b->records, record_cmp);
    return 0;
}

/* Builds the items; returns 0 or -1 with b->err. */
static int build(builder *b)
{
    capture *c = b->c;
    b->s_host = trace_intern_cstr(b->t, "host");
    b->s_iter = trace_intern_cstr(b->t, "iter");
    b->s_bytes = trace_intern_cstr(b->t, "bytes");
    b->s_overhead = trace_intern_cstr(b->t, "overhead_ns");
    b->s_implicit = trace_intern_cstr(b->t, "implicit");
    b->s_assumed = trace_intern_cstr(b->t, "assumed");
    b->s_record = trace_intern_cstr(b->t, "record");
    b->s_cudafree = trace_intern_cstr(b->t, "cudaFree");
    b->s_legacy = trace_intern_cstr(b->t, "legacy-stream");
    if (b->s_host == TRACE_NONE || b->s_iter == TRACE_NONE || b->s_bytes == TRACE_NONE ||
        b->s_overhead == TRACE_NONE || b->s_implicit == TRACE_NONE || b->s_assumed == TRACE_NONE || b->s_record == TRACE_NONE ||
        b->s_cudafree == TRACE_NONE || b->s_legacy == TRACE_NONE)
        return oom(b);
    for (uint64_t i = 0; i < c->n_streams && !b->multi_proc; i++)
        b->multi_proc = c->streams[i].proc != c->streams[0].proc;
    /* roles by name: a capture has few distinct call names */
    uint8_t *role_by_name = malloc((size_t)b->t->n_strs + 1);
    if (!role_by_name)
        return oom(b);
    memset(role_by_name, 0xff, (size_t)b->t->n_strs + 1);
    for (uint64_t i = 0; i < c->n_apis; i++) {
        cap_api *a = &c->apis[i];
        uint32_t nm = a->name;
        if (nm < b->t->n_strs && role_by_name[nm] == 0xff) {
            const char *name = trace_str(c->t, nm);
            role_by_name[nm] = (uint8_t)(role_of(name) | capture_launch(name) << 4);
        }
        uint8_t r = nm < b->t->n_strs ? role_by_name[nm] : ROLE_OTHER;
        a->role = r & 15;
        a->launch = r >> 4;
        b->n_records += a->role == ROLE_RECORD && valid_id(a->corr);
    }
    free(role_by_name);
    if (index_calls(b) != 0)
        return -1;
    b->op_rf = malloc((c->n_gpus + 1) * sizeof *b->op_rf);
    b->nccl_range = malloc((c->n_gpus + 1) * sizeof *b->nccl_range);
    if (!b->op_rf || !b->nccl_range)
        return oom(b);
    for (uint64_t i = 0; i < c->n_gpus; i++) {
        b->op_rf[i] = CAP_NONE;
        b->nccl_range[i] = TRACE_NONE;
    }
    if (add_gpu_items(b) != 0 || add_sync_items(b) != 0 || add_call_items(b) != 0 ||
        add_record_items(b) != 0 || add_mem_items(b) != 0 || add_et_host_items(b) != 0 ||
        count_unrecorded_host(b) != 0 || sort_items(b) != 0 || add_legacy_syncs(b) != 0 ||
        sweep_hosts(b, b->op_rf) != 0 || name_collectives(b) != 0 ||
        declare_queues(b) != 0 || prepare_accesses(b) != 0)
        return -1;
    /* An ET of this capture gives byte ranges to most ops that launched GPU
     * work; one of another run joins few, by rf_id coincidence. */
    if (b->et && b->et_launch_joined * 2 < b->et_launch_ops + (b->et_launch_ops == 0)) {
        const char *et = trace_get_meta(b->t, "capture.execution_trace");
        char why[512];
        snprintf(why, sizeof why, "%s: gives byte ranges to %llu of the %llu ops of %s that "
                 "launched GPU work (joined on rf_id and name)",
                 et ? et : "the execution trace", (unsigned long long)b->et_launch_joined,
                 (unsigned long long)b->et_launch_ops, c->path);
        if (!c->et_force) {
            trace_error_set(b->err, TRACE_EUSAGE, "%s: not this capture's execution trace "
                            "(--force-et takes it anyway)", why);
            return -1;
        }
        if (capture_forced(c, "import --force-et", why) != 0)
            return oom(b);
    }
    if (set_counts(b) != 0)
        return -1;
    /* what only the build needed */
    map3_free(&b->waited);
    map3_free(&b->recorded);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The reader: statements made one at a time from the sorted items, so  */
/* that no second copy of the trace is held.                           */

typedef struct capture_rd {
    builder b;
    uint64_t i;                 /* next item */
    uint64_t seq;
    bool gap_done;              /* the host time before items[i] was handed out */
} capture_rd;

static int capture_next(void *ctx, trace_stmt *out, trace_error *err)
{
    capture_rd *r = ctx;
    builder *b = &r->b;
    b->err = err;
    if (r->i >= b->n)
        return 0;
    if (!r->gap_done && b->gap_at && b->gap_at[r->i]) {
        const gap *g = &b->gaps[b->gap_at[r->i] - 1];
        item host_time = { .host = g->host, .stream = TRACE_NONE, .kind = TRACE_OP,
                           .flags = ITEM_ON_HOST, .label = g->label, .object = CAP_NONE,
                           .t = g->t, .dur = g->dur, .api_t0 = CAP_NONE, .api_t1 = CAP_NONE,
                           .gpu = TRACE_NONE, .iter = g->iter };
        r->gap_done = true;
        if (emit_one(b, &host_time, out) != 0)
            return -1;
    } else {
        if (emit_one(b, &b->items[r->i], out) != 0)
            return -1;
        r->i++;
        r->gap_done = false;
    }
    out->seq = r->seq++;
    return 1;
}

static void capture_close(void *ctx)
{
    capture_rd *r = ctx;
    if (!r)
        return;
    builder_free(&r->b);
    et_free(r->b.et);
    capture_free(r->b.c);
    free(r);
}

static int capture_rewind(void *ctx, trace_error *err)
{
    (void)err;
    capture_rd *r = ctx;
    r->i = 0;
    r->seq = 0;
    r->gap_done = false;
    return 0;
}

static const trace_reader_iface capture_iface = { capture_next, capture_close, capture_rewind };

int capture_open_reader(capture *c, cap_accesses *et, trace_reader *r, const char *path,
                        trace_error *err)
{
    capture_rd *rd = calloc(1, sizeof *rd);
    if (!rd)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", c->path), -1;
    rd->b = (builder){ .c = c, .t = c->t, .et = et, .err = err, .unlaunched = TRACE_NONE };
    close_event(c);
    if (build(&rd->b) != 0) {
        builder_free(&rd->b);
        free(rd);
        return -1;
    }
    /* the calls were joined: only what statements need stays */
    free(c->apis);
    c->apis = NULL;
    c->n_apis = c->cap_apis = 0;
    corr_free(&c->api_ids);
    memset(r, 0, sizeof *r);
    r->iface = &capture_iface;
    r->ctx = rd;
    r->trace = c->t;
    r->owns_trace = true;
    r->source = path ? strdup(path) : NULL;
    return 0;
}

/* ------------------------------------------------------------------ */
/* A reader over a trace's statements held in memory in a second trace   */
/* (chrome_import.c): owns both.                                       */

typedef struct body_rd {
    trace *body;
    uint64_t next;
} body_rd;

static int body_next(void *ctx, trace_stmt *out, trace_error *err)
{
    (void)err;
    body_rd *r = ctx;
    if (r->next >= r->body->n_stmts)
        return 0;
    trace_stmt_at(r->body, r->next++, out);
    return 1;
}

static void body_close(void *ctx)
{
    body_rd *r = ctx;
    if (!r)
        return;
    trace_free(r->body);
    free(r);
}

static int body_rewind(void *ctx, trace_error *err)
{
    (void)err;
    ((body_rd *)ctx)->next = 0;
    return 0;
}

static const trace_reader_iface body_iface = { body_next, body_close, body_rewind };

int capture_body_reader(trace_reader *r, trace *t, trace *body, const char *path)
{
    memset(r, 0, sizeof *r);
    body_rd *rd = calloc(1, sizeof *rd);
    if (!rd)
        return -1;
    rd->body = body;
    r->iface = &body_iface;
    r->ctx = rd;
    r->trace = t;
    r->owns_trace = true;
    r->source = path ? strdup(path) : NULL;
    return 0;
}
