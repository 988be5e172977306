/*
 * kineto.c -- PyTorch profiler (Kineto) traces: Chrome trace-event
 * JSON, plain or gzipped, optionally joined to an execution trace.
 *
 * The file is one object: {"schemaVersion": 1, "deviceProperties": [...],
 * "traceEvents": [...]}, or the Chrome trace format's other form, a bare
 * array of events. The events are streamed one at a time (json.c); the ones
 * that matter are complete events ("ph": "X"):
 *
 *   cat cuda_runtime, cuda_driver  an API call on host thread (pid, tid),
 *                      args.correlation; ROCm traces use the same
 *                      categories with HIP names (hipLaunchKernel).
 *   cat kernel, gpu_memcpy, gpu_memset  GPU work on args.device /
 *                      args.stream (else pid / tid), args.correlation,
 *                      args.bytes; a copy's name says its direction and
 *                      memory ("Memcpy HtoD (Pageable -> Device)",
 *                      ROCm's "CopyHostToDevice").
 *   cat cuda_sync      what a sync call waited for: args.cuda_sync_kind
 *                      ("Stream Sync", "Event Sync", "Context Sync",
 *                      "Stream Wait Event"), args.stream (the stream synced
 *                      or waiting), args.wait_on_stream (where the event was
 *                      recorded), args.wait_on_cuda_event_record_corr_id
 *                      (the cudaEventRecord), args.wait_on_cuda_event_id.
 *                      -1 and 4294967295 mean unknown.
 *   cat cpu_op, user_annotation  ranges on a host thread: framework ops
 *                      (args["Record function id"], or args["External
 *                      id"] in older traces, is what an execution trace's
 *                      rf_id refers to) and annotations, ProfilerStep#N
 *                      among them.
 *   cat ac2g, ph s/f   flows from a call to its GPU work: their id is the
 *                      correlation, used when an activity lacks
 *                      args.correlation.
 *
 *   cat cuda_profiler_range  a kernel measured by the CUPTI range profiler:
 *                      no stream, no correlation, times Kineto spreads evenly
 *                      over the window; the k-th range is the kernel of the
 *                      k-th launch call (as HTA pairs them).
 *
 * One table (categories[]) says what each category is: Kineto's
 * ActivityType names, and PyTorch 1.8-1.10's (Kernel, Runtime, Memcpy,
 * Memset, Operator, "async" flows; thread ids as strings, GPU work on tid
 * "stream 7"), which map like the modern ones. Categories of other
 * accelerators (mtia_*, xpu_runtime, hpu_op, ...) are not modelled: a
 * profile with no CUDA or ROCm call or GPU work at all, or whose calls are
 * all another accelerator's (XPU puts its kernels under "kernel"), is
 * refused in one line naming what it holds; within a CUDA profile they are
 * dropped (unknown-category). A profile holding the CUDA calls of two
 * processes is refused: correlation and stream ids are per process.
 * Metadata, instant and counter events, Python stacks and the profiler's
 * own spans are ignored by design, unless they carry what only GPU work
 * carries (an args.correlation and args.stream: ignored-gpu-work); every
 * other event is imported or counted in the ledger (formats.h): its fields
 * are read through capture_json_ts/dur/id, which count what they refuse. An
 * event that names a member twice is counted (duplicate-key), not read.
 *
 * distributedInfo is kept whole as run metadata: rank, world_size,
 * dist.backend, dist.pg_count, dist.nccl_version, dist.pg_config (a digest
 * of the process-group config) and job.id (the top-level group_trace_id),
 * which merge compares. Without a valid world_size, the job's size comes
 * from the default process group, else the NCCL kernels' "Group size"
 * (world_size.from=); a rank whose number is not said is rank.unknown.
 *
 * Timestamps are microseconds, integers or with nanosecond decimals, read
 * exactly (json_us_to_ns). Events may come in any order. A Kineto file holds
 * one process, so correlation ids are unique in it. capture.c maps the rest
 * (docs/importers.md).
 */
#include "formats.h"

#include <stdlib.h>
#include <string.h>

/* A GPU activity that arrived without args.correlation: resolved from the
 * flows at the end. */
typedef struct pending_gpu {
    cap_gpu g;
    int64_t pid, tid, ts;
} pending_gpu;

typedef struct flow_end {
    int64_t pid, tid, ts, id;
} flow_end;

/* A CUPTI profiler range (a kernel without stream, correlation or real
 * times), or a kernel launch call, matched in order at the end. */
typedef struct ordered {
    int64_t ts, corr, device;
    uint32_t name;
} ordered;

/* What kind of event a category is: the one table of Kineto categories. */
typedef enum {
    CAT_UNKNOWN = 0,
    CAT_CALL,           /* a CUDA/HIP runtime or driver call */
    CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET,
    CAT_PROFILER_RANGE, /* a kernel measured by the CUPTI range profiler */
    CAT_SYNC,           /* what a sync call waited for */
    CAT_OP, CAT_ANNOTATION,
    CAT_FLOW,           /* a call -> GPU work flow */
    CAT_FOREIGN,        /* another accelerator's work (MTIA, XPU, HPU, ...): not modelled */
    CAT_IGNORED,        /* holds nothing the trace model keeps */
} cat_kind;

static const struct {
    const char *cat;
    cat_kind kind;
} categories[] = {
    /* Kineto's ActivityType names (libkineto/src/ActivityType.cpp) */
    { "cuda_runtime", CAT_CALL },           { "cuda_driver", CAT_CALL },
    { "kernel", CAT_KERNEL },               { "gpu_memcpy", CAT_MEMCPY },
    { "gpu_memset", CAT_MEMSET },           { "cuda_profiler_range", CAT_PROFILER_RANGE },
    { "cuda_sync", CAT_SYNC },              { "cpu_op", CAT_OP },
    { "user_annotation", CAT_ANNOTATION },  { "ac2g", CAT_FLOW },
    { "gpu_user_annotation", CAT_IGNORED }, /* a range on a stream: marks nothing */
    { "python_function", CAT_IGNORED },     { "cpu_instant_event", CAT_IGNORED },
    { "overhead", CAT_IGNORED },            { "Trace", CAT_IGNORED },
    { "external_correlation", CAT_IGNORED },{ "fwdbwd", CAT_IGNORED },
    { "mtia_runtime", CAT_FOREIGN },        { "mtia_ccp_events", CAT_FOREIGN },
    { "mtia_insight", CAT_FOREIGN },        { "glow_runtime", CAT_FOREIGN },
    { "hpu_op", CAT_FOREIGN },              { "xpu_runtime", CAT_FOREIGN },
    { "xpu_driver", CAT_FOREIGN },          { "collective_comm", CAT_FOREIGN },
    { "privateuse1_runtime", CAT_FOREIGN }, { "privateuse1_driver", CAT_FOREIGN },
    /* PyTorch 1.8-1.10 (the TensorBoard plugin's samples): the same events */
    { "Runtime", CAT_CALL },                { "Kernel", CAT_KERNEL },
    { "Memcpy", CAT_MEMCPY },               { "Memset", CAT_MEMSET },
    { "Operator", CAT_OP },                 { "async", CAT_FLOW },
    { "Python", CAT_IGNORED },
};

static cat_kind cat_of(const json_val *cat)
{
    if (!cat || cat->type != JSON_STRING)
        return CAT_UNKNOWN;
    for (size_t i = 0; i < sizeof categories / sizeof categories[0]; i++)
        if (json_is(cat, categories[i].cat))
            return categories[i].kind;
    return CAT_UNKNOWN;
}

/* Complete events by category, for the message refusing a profile without
 * CUDA or ROCm work: the most frequent few. */
#define KINETO_SEEN 16
typedef struct cat_seen {
    char name[32];
    uint64_t n;
} cat_seen;

typedef struct kineto {
    capture *c;
    trace *t;
    const char *path;
    cap_accesses *et;
    bool saw_events;
    int64_t schema;
    uint64_t n_events, n_flows, n_ops, n_annotations, n_et_joined, n_gpu_events;
    int64_t op_pid;             /* a process of the cpu_ops; CAP_NONE */
    int64_t call_pid, other_pid; /* the process of the CUDA calls, and another; CAP_NONE */
    uint64_t n_foreign;         /* complete events of other accelerators */
    uint64_t n_calls;           /* CUDA or HIP calls */
    uint64_t group_size;        /* the largest "Group size" of an NCCL kernel */
    uint64_t pg_world;          /* the default process group's size (pg_config) */
    bool et_pid_seen;           /* a cpu_op ran in the ET's process */
    pending_gpu *pending;
    size_t n_pending, cap_pending;
    flow_end *flows;            /* ph "f" ends, for pending activities */
    size_t n_flow_ends, cap_flow_ends;
    ordered *ranges, *launches; /* profiler ranges and kernel launch calls */
    uint64_t n_ranges, cap_ranges, n_launches, cap_launches;
    cat_seen seen[KINETO_SEEN];
} kineto;

static void count_category(kineto *k, const json_val *cat)
{
    if (!cat || cat->type != JSON_STRING)
        return;
    for (int i = 0; i < KINETO_SEEN; i++) {
        cat_seen *s = &k->seen[i];
        if (!s->n) {
            snprintf(s->name, sizeof s->name, "%.*s", (int)(cat->len < 31 ? cat->len : 31), cat->s);
            s->n = 1;
            return;
        }
        if (strlen(s->name) == cat->len && memcmp(s->name, cat->s, cat->len) == 0) {
            s->n++;
            return;
        }
    }
}

/* A stable digest of a JSON tree (FNV-1a over its types, keys and values in
 * document order): two ranks of one job write the same process-group
 * config. */
static uint64_t tree_digest(const json_val *v, uint64_t h)
{
    h = (h ^ (uint64_t)v->type) * 0x100000001b3ull;
    for (size_t i = 0; v->key && i < v->key_len; i++)   /* array elements have no key */
        h = (h ^ (unsigned char)v->key[i]) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
    for (size_t i = 0; v->s && i < v->len; i++)
        h = (h ^ (unsigned char)v->s[i]) * 0x100000001b3ull;
    for (const json_val *c = v->child; c; c = c->next)
        h = tree_digest(c, h);
    return (h ^ 0xfe) * 0x100000001b3ull;
}

/* The size of the default process group in distributedInfo.pg_config (an
 * array of groups, or an object keyed by group name): the group named "0"
 * or described as "default_pg", by its pg_size or its list of ranks; 0 when
 * not said. */
static uint64_t default_group_size(const json_val *pg)
{
    for (const json_val *g = pg && (pg->type == JSON_ARRAY || pg->type == JSON_OBJECT)
                                 ? pg->child
                                 : NULL;
         g; g = g->next) {
        bool named = (g->key && g->key_len == 1 && g->key[0] == '0') ||
                     json_is(json_get(g, "pg_name"), "0") ||
                     json_is(json_get(g, "pg_desc"), "default_pg") ||
                     json_is(json_get(g, "desc"), "default_pg");
        if (!named)
            continue;
        int64_t size;
        if (json_int(json_get(g, "pg_size"), &size) && size > 0)
            return (uint64_t)size;
        const json_val *ranks = json_get(g, "ranks");
        if (ranks && ranks->type == JSON_ARRAY && ranks->n_child)
            return ranks->n_child;
    }
    return 0;
}

/* A job's size where distributedInfo does not give world_size (or gives no
 * valid one): its default process group's size, else the largest NCCL
 * kernel's "Group size" (the world is at least that). Run metadata
 * world_size.from= says which, so that a single rank is read as part of a
 * job (a partial job) instead of hanging at its first collective. */
static int infer_world(kineto *k)
{
    uint64_t world = k->pg_world ? k->pg_world : k->group_size;
    if (!trace_get_meta(k->t, "world_size") && world >= 2) {
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)world);
        if (trace_set_meta(k->t, "world_size", buf) != 0 ||
            trace_set_meta(k->t, "world_size.from",
                           k->pg_world ? "pg_config" : "nccl-group-size") != 0)
            return -1;
    }
    /* a rank of a job whose number is not said (absent, or -1): one rank of
     * the job all the same, read as a partial job */
    const char *ws = trace_get_meta(k->t, "world_size");
    if (ws && strtoull(ws, NULL, 10) > 1 && !trace_get_meta(k->t, "rank") &&
        trace_set_meta(k->t, "rank.unknown", "not said by distributedInfo") != 0)
        return -1;
    return 0;
}

/* distributedInfo: every field as run metadata. merge takes a rank's place
 * and the world's size from rank and world_size (NCCL kernels their size=,
 * capture.c), and refuses ranks of different jobs by the dist.* fields. */
static int dist_info(kineto *k, const json_val *v)
{
    char buf[64];
    static const char *const ints[][2] = { { "rank", "rank" }, { "world_size", "world_size" },
                                           { "pg_count", "dist.pg_count" } };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t x;
        if (!json_int(json_get(v, ints[i][0]), &x) || x < 0)
            continue;
        snprintf(buf, sizeof buf, "%lld", (long long)x);
        if (trace_set_meta(k->t, ints[i][1], buf) != 0)
            return -1;
    }
    static const char *const strs[][2] = { { "backend", "dist.backend" },
                                           { "nccl_version", "dist.nccl_version" },
                                           { "job_id", "job.id" } };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        const json_val *x = json_get(v, strs[i][0]);
        if (!x || (x->type != JSON_STRING && x->type != JSON_NUMBER))
            continue;
        char val[256];
        snprintf(val, sizeof val, "%.*s", (int)(x->len > 200 ? 200 : x->len), x->s);
        if (trace_set_meta(k->t, strs[i][1], val) != 0)
            return -1;
    }
    const json_val *pg = json_get(v, "pg_config");
    k->pg_world = default_group_size(pg);
    if (pg) {
        snprintf(buf, sizeof buf, "%016llx", (unsigned long long)tree_digest(pg, 0xcbf29ce484222325ull));
        if (trace_set_meta(k->t, "dist.pg_config", buf) != 0)
            return -1;
    }
    return 0;
}

static int kineto_member(void *ctx, const json_val *v, trace_error *err)
{
    kineto *k = ctx;
    if (v->key_len == 13 && memcmp(v->key, "schemaVersion", 13) == 0) {
        if (!json_int(v, &k->schema) || k->schema != 1)
            return trace_error_set(err, TRACE_EVERSION,
                                   "%s: Kineto schemaVersion %.*s, this build reads version 1",
                                   k->path, (int)(v->len > 40 ? 40 : v->len),
                                   v->s ? v->s : "(not a number)"),
                   -1;
    } else if (v->key_len == 15 && memcmp(v->key, "distributedInfo", 15) == 0) {
        if (dist_info(k, v) != 0)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", k->path), -1;
    } else if (v->key_len == 14 && memcmp(v->key, "group_trace_id", 14) == 0 &&
               (v->type == JSON_STRING || v->type == JSON_NUMBER)) {
        /* the job's id (one per job, where trace_id is one per rank) */
        char val[256];
        snprintf(val, sizeof val, "%.*s", (int)(v->len > 200 ? 200 : v->len), v->s);
        if (trace_set_meta(k->t, "job.id", val) != 0)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", k->path), -1;
    }
    return 0;
}

static const json_val *arg(const json_val *args, const char *key)
{
    return json_get(args, key);
}

static uint32_t intern_val(trace *t, const json_val *v)
{
    if (!v || v->type != JSON_STRING)
        return trace_intern_cstr(t, "?");
    return trace_intern(t, v->s, v->len);
}

/* Direction and memory of a copy from its name. */
static void copy_kind(const char *name, cap_gpu *g)
{
    g->src = g->dst = CAP_MEM_DEVICE;
    bool h2d = strstr(name, "HtoD") || strstr(name, "HostToDevice");
    bool d2h = strstr(name, "DtoH") || strstr(name, "DeviceToHost");
    bool h2h = strstr(name, "HtoH") || strstr(name, "HostToHost");
    if (h2d || h2h)
        g->src = CAP_MEM_HOST;
    if (d2h || h2h)
        g->dst = CAP_MEM_HOST;
    /* "(Pageable -> Device)": the memory kinds, when said */
    const char *paren = strchr(name, '(');
    if (paren) {
        const char *arrow = strstr(paren, "->");
        if (arrow) {
            if (strncmp(paren + 1, "Pageable", 8) == 0)
                g->src = CAP_MEM_PAGEABLE;
            else if (strncmp(paren + 1, "Pinned", 6) == 0)
                g->src = CAP_MEM_PINNED;
            const char *d = arrow + 2;
            while (*d == ' ')
                d++;
            if (strncmp(d, "Pageable", 8) == 0)
                g->dst = CAP_MEM_PAGEABLE;
            else if (strncmp(d, "Pinned", 6) == 0)
                g->dst = CAP_MEM_PINNED;
        }
    }
}

static cap_sync_kind sync_kind(const json_val *kind)
{
    if (json_is(kind, "Stream Sync"))
        return CAP_SYNC_STREAM;
    if (json_is(kind, "Event Sync"))
        return CAP_SYNC_EVENT;
    if (json_is(kind, "Context Sync"))
        return CAP_SYNC_CONTEXT;
    if (json_is(kind, "Stream Wait Event"))
        return CAP_SYNC_STREAM_WAIT;
    return CAP_SYNC_UNKNOWN;
}

/* An integer argument (CAP_NONE when absent or unreadable: counted). */
static int64_t arg_id(kineto *k, const json_val *args, const char *key)
{
    int64_t v;
    capture_json_id(k->c, arg(args, key), &v);
    return v;
}

/* Device indices past this are no device (a garbled id, not a GPU). */
#define KINETO_MAX_DEVICE 4096

/* Whether an event carries what only GPU work carries: an integer
 * args.correlation and args.stream (Kineto's annotations, on the CPU or a
 * GPU stream, carry an "External id", Python events their ids, flows an
 * "id"). *corr gets the correlation. */
static bool gpu_work_shape(const json_val *e, int64_t *corr)
{
    const json_val *args = json_get(e, "args");
    int64_t stream;
    return json_int(json_get(args, "correlation"), corr) &&
           json_int(json_get(args, "stream"), &stream);
}

static int push_ordered(ordered **arr, uint64_t *n, uint64_t *cap, ordered o)
{
    int64_t i = capture_push((void **)arr, n, cap, sizeof **arr);
    if (i < 0)
        return -1;
    (*arr)[i] = o;
    return 0;
}

static int kineto_event(void *ctx, const json_val *e, trace_error *err)
{
    kineto *k = ctx;
    capture *c = k->c;
    capture_read(c);
    k->n_events++;
    if (e->type != JSON_OBJECT)
        return capture_drop(c, CAP_DROP_BAD_TYPE, 1);
    k->saw_events = true;
    const json_val *ph = json_get(e, "ph"), *cat = json_get(e, "cat");
    if (!ph)
        return capture_drop(c, CAP_DROP_MISSING_FIELD, 1);
    if (ph->type != JSON_STRING)
        return capture_drop(c, CAP_DROP_BAD_TYPE, 1);
    cat_kind kind = cat_of(cat);
    int64_t pid, tid, ts, dur = 0;
    if (kind == CAT_FLOW && (json_is(ph, "s") || json_is(ph, "f") || json_is(ph, "t"))) {
        k->n_flows++;
        int64_t id;
        capture_use(c);
        if (!json_is(ph, "f"))
            return 0;           /* the start, on the call: its id is the correlation */
        if (!capture_json_id(c, json_get(e, "pid"), &pid) || pid == CAP_NONE ||
            !capture_json_id(c, json_get(e, "tid"), &tid) || tid == CAP_NONE ||
            !capture_json_ts(c, json_get(e, "ts"), &ts) ||
            !capture_json_id(c, json_get(e, "id"), &id) || id == CAP_NONE)
            return 0;           /* counted by the readers, or no flow end to match */
        if (trace_grow((void **)&k->flows, &k->cap_flow_ends, k->n_flow_ends + 1,
                       sizeof *k->flows) != 0)
            goto oom;
        k->flows[k->n_flow_ends++] = (flow_end){ pid, tid, ts, id };
        return 0;
    }
    /* GPU work: a correlation and a stream in its args, whatever its shape.
     * Where it is read as something else, it is counted, not ignored. */
    int64_t work_corr = CAP_NONE;
    bool gpu_shaped = gpu_work_shape(e, &work_corr);
    if (gpu_shaped && capture_work_seen(c, 0, work_corr) != 0)
        goto oom;
    if (e->dup_key)     /* {"ts": 1, "ts": 2}: neither value can be trusted */
        return capture_drop(c, CAP_DROP_DUPLICATE_KEY, 1);
    if (!json_is(ph, "X")) {
        /* metadata, instant events, counters, flows of other kinds: nothing the
         * trace model keeps; a begin/end pair Kineto never writes: unknown */
        if (gpu_shaped)
            return capture_drop(c, CAP_DROP_IGNORED_GPU_WORK, 1);
        if (json_is(ph, "B") || json_is(ph, "E") || json_is(ph, "b") || json_is(ph, "e"))
            return capture_drop(c, CAP_DROP_UNKNOWN_CATEGORY, 1);
        capture_ignore(c);
        return 0;
    }
    count_category(k, cat);
    if (kind == CAT_IGNORED) {
        if (gpu_shaped)     /* a kernel under an annotation's category */
            return capture_drop(c, CAP_DROP_IGNORED_GPU_WORK, 1);
        capture_ignore(c);
        return 0;
    }
    if (kind == CAT_FOREIGN)
        k->n_foreign++;
    if (kind == CAT_UNKNOWN || kind == CAT_FOREIGN)
        return capture_drop(c, cat && cat->type != JSON_STRING ? CAP_DROP_BAD_TYPE
                                                               : CAP_DROP_UNKNOWN_CATEGORY, 1);
    /* counted before its time is read: a profile whose every timestamp is
     * beyond reading is still a profile of GPU work (its ledger says why) */
    if (kind == CAT_CALL || kind == CAT_KERNEL || kind == CAT_MEMCPY || kind == CAT_MEMSET ||
        kind == CAT_PROFILER_RANGE || kind == CAT_SYNC)
        k->n_gpu_events++;
    if (!capture_json_ts(c, json_get(e, "ts"), &ts) ||
        !capture_json_dur(c, json_get(e, "dur"), &dur))
        return 0;               /* counted */
    bool has_pid = capture_json_id(c, json_get(e, "pid"), &pid) && pid != CAP_NONE;
    bool has_tid = capture_json_id(c, json_get(e, "tid"), &tid) && tid != CAP_NONE;
    const json_val *args = json_get(e, "args"), *name = json_get(e, "name");
    if (args && args->type != JSON_OBJECT) {
        capture_drop(c, CAP_DROP_BAD_TYPE, 1);
        args = NULL;
    }
    int64_t corr = arg_id(k, args, "correlation");
    switch (kind) {
    case CAT_CALL: {
        if (!has_pid || !has_tid)
            return capture_drop(c, CAP_DROP_MISSING_FIELD, 1);
        /* correlation ids are per process: one file, one process */
        k->n_calls++;
        if (k->call_pid == CAP_NONE)
            k->call_pid = pid;
        else if (pid != k->call_pid)
            k->other_pid = pid;
        uint32_t host = capture_host(c, pid, tid), nm = intern_val(k->t, name);
        if (host == TRACE_NONE || nm == TRACE_NONE ||
            capture_api(c, host, 0, ts, ts + dur, corr, nm) != 0)
            goto oom;
        if (capture_launch(trace_str(k->t, nm)) == CAP_LAUNCH_KERNEL &&
            push_ordered(&k->launches, &k->n_launches, &k->cap_launches,
                         (ordered){ ts, corr, CAP_NONE, nm }) != 0)
            goto oom;
        return 0;
    }
    case CAT_PROFILER_RANGE: {
        /* pid is the device; the times are the profiler's, spread evenly */
        uint32_t nm = intern_val(k->t, name);
        capture_use(c);
        if (nm == TRACE_NONE || push_ordered(&k->ranges, &k->n_ranges, &k->cap_ranges,
                                             (ordered){ ts, CAP_NONE, has_pid ? pid : 0, nm }) != 0)
            goto oom;
        return 0;
    }
    case CAT_KERNEL:
    case CAT_MEMCPY:
    case CAT_MEMSET: {
        int64_t device = arg_id(k, args, "device"), stream = arg_id(k, args, "stream");
        if (device != CAP_NONE && (device < 0 || device > KINETO_MAX_DEVICE))
            return capture_drop(c, CAP_DROP_BAD_NUMBER, 1);   /* no device */
        if (device == CAP_NONE)
            device = has_pid ? pid : 0;
        if (stream == CAP_NONE)
            stream = has_tid ? tid : 0;
        uint32_t st = capture_stream(c, 0, device, stream), nm = intern_val(k->t, name);
        if (st == TRACE_NONE || nm == TRACE_NONE)
            goto oom;
        cap_gpu g = { .stream = st, .t0 = ts, .t1 = ts + dur, .corr = corr, .name = nm,
                      .src_device = CAP_NONE, .dst_device = CAP_NONE, .comm = TRACE_NONE,
                      .coll = TRACE_NONE };
        /* newer Kineto copies the collective's description onto its kernel */
        const json_val *pg = arg(args, "Process Group Name"), *cn = arg(args, "Collective name");
        int64_t group = arg_id(k, args, "Group size");
        if (pg && pg->type == JSON_STRING) {
            char buf[160];
            snprintf(buf, sizeof buf, "pg.%.*s", (int)(pg->len > 150 ? 150 : pg->len), pg->s);
            g.comm = trace_intern_cstr(k->t, buf);
        }
        if (cn && cn->type == JSON_STRING)
            g.coll = intern_val(k->t, cn);
        if (group > 0) {
            g.ranks = (uint64_t)group;
            if ((uint64_t)group > k->group_size)
                k->group_size = (uint64_t)group;
        }
        g.kind = kind == CAT_KERNEL ? CAP_KERNEL : kind == CAT_MEMCPY ? CAP_MEMCPY : CAP_MEMSET;
        int64_t bytes = arg_id(k, args, "bytes");
        g.bytes = bytes > 0 ? (uint64_t)bytes : 0;
        if (g.kind == CAP_MEMCPY)
            copy_kind(trace_str(k->t, nm), &g);
        if (corr == CAP_NONE && has_pid && has_tid) {
            if (k->n_pending == k->cap_pending) {
                size_t cap = k->cap_pending ? k->cap_pending * 2 : 64;
                pending_gpu *n = realloc(k->pending, cap * sizeof *n);
                if (!n)
                    goto oom;
                k->pending = n;
                k->cap_pending = cap;
            }
            g.counted = capture_event_counted(c);
            k->pending[k->n_pending++] = (pending_gpu){ g, pid, tid, ts };
            capture_use(c);     /* handed over once the flows are read */
            return 0;
        }
        if (capture_gpu(c, &g) != 0)
            goto oom;
        return 0;
    }
    case CAT_SYNC: {
        const json_val *sk = arg(args, "cuda_sync_kind");
        cap_sync s = { .proc = 0, .corr = corr, .kind = sync_kind(sk ? sk : name),
                       .device = arg_id(k, args, "device"), .stream = arg_id(k, args, "stream"),
                       .event = arg_id(k, args, "wait_on_cuda_event_id"),
                       .record_stream = arg_id(k, args, "wait_on_stream"),
                       .record_corr = arg_id(k, args, "wait_on_cuda_event_record_corr_id"),
                       .t0 = ts, .t1 = ts + dur };
        if (s.device == CAP_NONE && has_pid)
            s.device = pid;
        if (s.kind == CAP_SYNC_STREAM_WAIT)
            capture_waits_filtered(c);
        if (capture_sync(c, &s) != 0)
            goto oom;
        return 0;
    }
    case CAT_OP:
    case CAT_ANNOTATION: {
        bool op = kind == CAT_OP;
        if (!has_pid || !has_tid)
            return capture_drop(c, CAP_DROP_MISSING_FIELD, 1);
        int64_t rf = CAP_NONE;
        if (op) {
            k->n_ops++;
            rf = arg_id(k, args, "Record function id");
            if (rf == CAP_NONE)
                rf = arg_id(k, args, "External id");
            if (k->op_pid == CAP_NONE)
                k->op_pid = pid;
            if (k->et && pid == cap_accesses_pid(k->et))
                k->et_pid_seen = true;
            if (k->et && rf != CAP_NONE && name && name->type == JSON_STRING)
                k->n_et_joined += cap_accesses_join(k->et, rf, name->s, name->len);
        } else {
            k->n_annotations++;
        }
        uint32_t host = capture_host(c, pid, tid), nm = intern_val(k->t, name);
        if (host == TRACE_NONE || nm == TRACE_NONE ||
            capture_range(c, host, ts, ts + dur, nm, rf, op) != 0)
            goto oom;
        return 0;
    }
    default:
        return capture_drop(c, CAP_DROP_UNKNOWN_CATEGORY, 1);
    }
oom:
    return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", k->path), -1;
}

static int flow_cmp(const void *pa, const void *pb)
{
    const flow_end *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return 0;
}

/* Activities without args.correlation take the id of the flow that ends on
 * them (same pid, tid and ts). */
static int resolve_pending(kineto *k)
{
    if (k->n_flow_ends)
        qsort(k->flows, k->n_flow_ends, sizeof *k->flows, flow_cmp);
    for (size_t i = 0; i < k->n_pending; i++) {
        pending_gpu *p = &k->pending[i];
        flow_end key = { p->pid, p->tid, p->ts, 0 };
        flow_end *f = k->n_flow_ends ? bsearch(&key, k->flows, k->n_flow_ends, sizeof *k->flows,
                                               flow_cmp)
                                     : NULL;
        if (f)
            p->g.corr = f->id;
        if (capture_gpu(k->c, &p->g) != 0)
            return -1;
    }
    return 0;
}

static int ordered_cmp(const void *pa, const void *pb)
{
    const ordered *a = pa, *b = pb;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return (a->corr > b->corr) - (a->corr < b->corr);
}

/* CUPTI profiler ranges are kernels run one at a time under the range
 * profiler, in launch order, with times Kineto spreads evenly over the
 * window (HTA matches them the same way): the k-th range is the kernel of
 * the k-th launch call. Its stream and times are not said: each is a kernel
 * on stream 0 of its device, untimed, counted as guessed-stream. When the
 * counts disagree, no range can be placed: all are unmatched. */
static int resolve_ranges(kineto *k)
{
    if (!k->n_ranges)
        return 0;
    qsort(k->ranges, k->n_ranges, sizeof *k->ranges, ordered_cmp);
    if (k->n_launches)
        qsort(k->launches, k->n_launches, sizeof *k->launches, ordered_cmp);
    if (k->n_ranges != k->n_launches)
        return capture_drop(k->c, CAP_DROP_UNMATCHED_CORRELATION, k->n_ranges);
    for (uint64_t i = 0; i < k->n_ranges; i++) {
        const ordered *r = &k->ranges[i], *l = &k->launches[i];
        uint32_t st = capture_stream(k->c, 0, r->device, 0);
        if (st == TRACE_NONE)
            return -1;
        cap_gpu g = { .stream = st, .kind = CAP_KERNEL, .t0 = l->ts, .t1 = l->ts,
                      .corr = l->corr, .name = r->name, .src_device = CAP_NONE,
                      .dst_device = CAP_NONE, .comm = TRACE_NONE, .coll = TRACE_NONE,
                      .untimed = true };
        if (capture_gpu(k->c, &g) != 0)
            return -1;
    }
    return capture_drop(k->c, CAP_DROP_GUESSED_STREAM, k->n_ranges);
}

/* A profile without CUDA or ROCm work (MTIA, XPU, CPU only) is refused, with
 * what it holds: its most frequent categories. */
static void refuse_no_gpu(const kineto *k, trace_error *err)
{
    char held[200] = "";
    size_t at = 0;
    bool used[KINETO_SEEN] = { false };
    for (int shown = 0; shown < 3; shown++) {
        int best = -1;
        for (int i = 0; i < KINETO_SEEN; i++)
            if (k->seen[i].n && !used[i] && strcmp(k->seen[i].name, "Trace") != 0 &&
                (best < 0 || k->seen[i].n > k->seen[best].n))
                best = i;
        if (best < 0)
            break;
        used[best] = true;
        int w = snprintf(held + at, sizeof held - at, "%s%llu %s", shown ? ", " : "",
                         (unsigned long long)k->seen[best].n, k->seen[best].name);
        if (w < 0 || (size_t)w >= sizeof held - at)
            break;
        at += (size_t)w;
    }
    trace_error_set(err, TRACE_ENOTTRACE,
                    "%s: a profile without CUDA or ROCm activity (it holds %s): syncsim reads "
                    "the GPU work of CUDA and ROCm programs",
                    k->path, at ? held : "no complete events");
}

/* Kineto, or any Chrome trace of GPU work: JSON whose first member is
 * traceEvents or schemaVersion, or a Kineto-only key near the top; or the
 * Chrome trace format's other form, a bare array of events
 * ([{"ph": ...}, ...], which Perfetto and chrome://tracing read too). A UTF-8
 * byte order mark before it is fine. Our own Chrome export says "syncsim"
 * first and is not claimed here. */
static bool kineto_sniff(const char *path, const unsigned char *head, size_t n)
{
    (void)path;
    char text[TRACE_SNIFF_BYTES + 1];
    size_t len = json_sniff_text(head, n, text, sizeof text);
    if (len < 2 || trace_format_chrome.sniff(path, head, n))
        return false;
    if (text[0] == '[') {
        size_t i = 1;
        while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
            i++;
        return i < len && text[i] == '{' && strstr(text, "\"ph\"");
    }
    if (text[0] != '{')
        return false;
    return strstr(text, "\"traceEvents\"") || strstr(text, "\"schemaVersion\"") ||
           strstr(text, "\"deviceProperties\"");
}

/* The execution trace joins only its own capture: its process, and ops of
 * the same rf_id and name (capture.c then checks that it gives byte ranges to
 * most ops that launched GPU work). Returns 0, or -1 with err. */
static int check_et(const kineto *k, const trace_source_opts *o, trace_error *err)
{
    const cap_accesses *et = k->et;
    char why[512];
    if (k->n_et_joined == 0)
        snprintf(why, sizeof why, "%s: none of the %llu ops of this execution trace matches an "
                 "op of %s (rf_id and name against Record function id / External id)",
                 o->companion, (unsigned long long)cap_accesses_ops(et), k->path);
    else if (cap_accesses_pid(et) != CAP_NONE && k->op_pid != CAP_NONE && !k->et_pid_seen)
        snprintf(why, sizeof why, "%s: recorded in process %lld, but the ops of %s ran in "
                 "process %lld", o->companion, (long long)cap_accesses_pid(et), k->path,
                 (long long)k->op_pid);
    else
        return 0;
    if (o->force_companion)
        return capture_forced(k->c, "import --force-et", why) != 0
                   ? (trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", k->path), -1)
                   : 0;
    return trace_error_set(err, TRACE_EUSAGE, "%s: not its trace (--force-et takes it anyway)",
                           why), -1;
}

static int kineto_open(trace_source *src, const char *path, const trace_source_opts *o,
                       trace_error *err)
{
    trace *t = trace_new();
    capture *c = t ? capture_new(t, path) : NULL;
    kineto k = { .c = c, .t = t, .path = path, .schema = CAP_NONE, .op_pid = CAP_NONE,
                 .call_pid = CAP_NONE, .other_pid = CAP_NONE };
    if (!t || !c) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (o->companion && !(k.et = et_load(o->companion, c, &o->progress, err)))
        goto fail;
    capture_et_force(c, o->force_companion);
    json_handler h = { "traceEvents", kineto_member, kineto_event, &k, &o->progress };
    if (json_stream(path, &h, err) != 0)
        goto fail;
    capture_read_done(c);
    if (!k.saw_events) {
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: JSON without trace events (no traceEvents array): not a Kineto "
                        "trace", path);
        goto fail;
    }
    /* another accelerator's profile (XPU, MTIA, HPU) holds its kernels under
     * Kineto's own categories but no CUDA or HIP call */
    if (!k.n_gpu_events || (!k.n_calls && k.n_foreign)) {
        refuse_no_gpu(&k, err);
        goto fail;
    }
    if (k.other_pid != CAP_NONE) {
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: CUDA calls of two processes (pid %lld and %lld) in one profile: "
                        "correlation ids and stream ids are per process, so their GPU work "
                        "cannot be told apart; profile each process to its own file and "
                        "`syncsim merge` them",
                        path, (long long)k.call_pid, (long long)k.other_pid);
        goto fail;
    }
    if (infer_world(&k) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (resolve_pending(&k) != 0 || resolve_ranges(&k) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (k.et && check_et(&k, o, err) != 0)
        goto fail;
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(k.schema == CAP_NONE ? 0 : k.schema));
    uint64_t et_ops = cap_accesses_ops(k.et), et_joined = cap_accesses_joined(k.et);
    if (k.et)
        cap_accesses_count_unjoined(k.et, c);
    if (trace_set_meta(t, "capture.format", "kineto") != 0 ||
        trace_set_meta(t, "capture.schema", k.schema == CAP_NONE ? "none" : v) != 0 ||
        (o->companion && trace_set_meta(t, "capture.execution_trace", o->companion) != 0) ||
        capture_count(c, "capture.events", k.n_events) != 0 ||
        capture_count(c, "capture.flows", k.n_flows) != 0 ||
        capture_count(c, "capture.cpu_ops", k.n_ops) != 0 ||
        capture_count(c, "capture.annotations", k.n_annotations) != 0 ||
        (k.et && capture_count(c, "et.ops_joined", et_joined) != 0) ||
        (k.et && capture_count(c, "et.ops_unjoined", et_ops - et_joined) != 0)) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (capture_open_reader(c, k.et, &src->reader, path, err) != 0)
        goto fail;
    free(k.pending);
    free(k.flows);
    free(k.ranges);
    free(k.launches);
    return 0;
fail:
    capture_free(c);
    et_free(k.et);
    free(k.pending);
    free(k.flows);
    free(k.ranges);
    free(k.launches);
    trace_free(t);
    return -1;
}

const trace_format trace_format_kineto = {
    "kineto", "a PyTorch profiler (Kineto) trace, JSON or gzipped JSON; --et FILE joins its "
              "execution trace for byte ranges",
    true, kineto_sniff, kineto_open,
};
