/*
 * kineto.c -- PyTorch profiler (Kineto) traces: Chrome trace-event
 * JSON, plain or gzipped, optionally joined to an execution trace.
 *
 * The file is one object: {"schemaVersion": 1, "deviceProperties": [...],
 * "traceEvents": [...]}. The events are streamed one at a time
 * (json.c); the ones that matter are complete events ("ph": "X"):
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

typedef struct kineto {
    capture *c;
    trace *t;
    const char *path;
    const cap_accesses *et;
    bool saw_events;
    int64_t schema;
    uint64_t n_events, n_flows, n_ops, n_annotations, n_et_joined;
    pending_gpu *pending;
    size_t n_pending, cap_pending;
    flow_end *flows;            /* ph "f" ends, for pending activities */
    size_t n_flow_ends, cap_flow_ends;
} kineto;

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
        /* the job: merge takes a rank's place and the world's size from
         * these, and NCCL kernels their size= (capture.c) */
        static const char *const keys[] = { "rank", "world_size" };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            int64_t x;
            if (!json_int(json_get(v, keys[i]), &x) || x < 0)
                continue;
            char buf[32];
            snprintf(buf, sizeof buf, "%lld", (long long)x);
            if (trace_set_meta(k->t, keys[i], buf) != 0)
                return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", k->path), -1;
        }
    }
    return 0;
}

static const json_val *arg(const json_val *args, const char *key)
{
    return json_get(args, key);
}

/* An integer argument, CAP_NONE when absent. */
static int64_t arg_int(const json_val *args, const char *key)
{
    int64_t v;
    return json_int(arg(args, key), &v) ? v : CAP_NONE;
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

static bool is_cat(const json_val *cat, const char *s)
{
    return json_is(cat, s);
}

static bool ends_with(const json_val *v, const char *suffix)
{
    size_t n = strlen(suffix);
    return v && v->type == JSON_STRING && v->len >= n && memcmp(v->s + v->len - n, suffix, n) == 0;
}

static int kineto_event(void *ctx, const json_val *e, trace_error *err)
{
    kineto *k = ctx;
    if (e->type != JSON_OBJECT)
        return 0;
    k->saw_events = true;
    k->n_events++;
    const json_val *ph = json_get(e, "ph"), *cat = json_get(e, "cat");
    int64_t pid, tid, ts, dur = 0;
    bool has_pid = json_int(json_get(e, "pid"), &pid), has_tid = json_int(json_get(e, "tid"), &tid);
    bool has_ts = json_us_to_ns(json_get(e, "ts"), &ts);
    if (is_cat(cat, "ac2g")) {
        k->n_flows++;
        int64_t id;
        if (json_is(ph, "f") && has_pid && has_tid && has_ts && json_int(json_get(e, "id"), &id)) {
            if (trace_grow((void **)&k->flows, &k->cap_flow_ends, k->n_flow_ends + 1,
                           sizeof *k->flows) != 0)
                goto oom;
            k->flows[k->n_flow_ends++] = (flow_end){ pid, tid, ts, id };
        }
        return 0;
    }
    if (!json_is(ph, "X") || !has_ts)
        return 0;
    if (json_get(e, "dur") && !json_us_to_ns(json_get(e, "dur"), &dur))
        dur = 0;
    if (dur < 0)
        dur = 0;
    const json_val *args = json_get(e, "args"), *name = json_get(e, "name");
    int64_t corr = arg_int(args, "correlation");
    capture *c = k->c;
    if (ends_with(cat, "_runtime") || ends_with(cat, "_driver")) {
        if (!has_pid || !has_tid)
            return 0;
        uint32_t host = capture_host(c, pid, tid), nm = intern_val(k->t, name);
        if (host == TRACE_NONE || nm == TRACE_NONE ||
            capture_api(c, host, 0, ts, ts + dur, corr, nm) != 0)
            goto oom;
        return 0;
    }
    if (is_cat(cat, "kernel") || is_cat(cat, "gpu_memcpy") || is_cat(cat, "gpu_memset")) {
        int64_t device = arg_int(args, "device"), stream = arg_int(args, "stream");
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
        int64_t group = arg_int(args, "Group size");
        if (pg && pg->type == JSON_STRING) {
            char buf[160];
            snprintf(buf, sizeof buf, "pg.%.*s", (int)(pg->len > 150 ? 150 : pg->len), pg->s);
            g.comm = trace_intern_cstr(k->t, buf);
        }
        if (cn && cn->type == JSON_STRING)
            g.coll = intern_val(k->t, cn);
        if (group > 0)
            g.ranks = (uint64_t)group;
        g.kind = is_cat(cat, "kernel") ? CAP_KERNEL : is_cat(cat, "gpu_memcpy") ? CAP_MEMCPY
                                                                                : CAP_MEMSET;
        int64_t bytes = arg_int(args, "bytes");
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
            k->pending[k->n_pending++] = (pending_gpu){ g, pid, tid, ts };
            return 0;
        }
        if (capture_gpu(c, &g) != 0)
            goto oom;
        return 0;
    }
    if (is_cat(cat, "cuda_sync")) {
        const json_val *kind = arg(args, "cuda_sync_kind");
        cap_sync s = { .proc = 0, .corr = corr, .kind = sync_kind(kind ? kind : name),
                       .device = arg_int(args, "device"), .stream = arg_int(args, "stream"),
                       .event = arg_int(args, "wait_on_cuda_event_id"),
                       .record_stream = arg_int(args, "wait_on_stream"),
                       .record_corr = arg_int(args, "wait_on_cuda_event_record_corr_id"),
                       .t0 = ts, .t1 = ts + dur };
        if (s.device == CAP_NONE && has_pid)
            s.device = pid;
        if (capture_sync(c, &s) != 0)
            goto oom;
        return 0;
    }
    bool op = is_cat(cat, "cpu_op");
    if (op || is_cat(cat, "user_annotation")) {
        if (!has_pid || !has_tid)
            return 0;
        int64_t rf = CAP_NONE;
        if (op) {
            k->n_ops++;
            rf = arg_int(args, "Record function id");
            if (rf == CAP_NONE)
                rf = arg_int(args, "External id");
            if (k->et && rf != CAP_NONE) {
                uint32_t nt;
                k->n_et_joined += cap_accesses_of(k->et, rf, &nt) != NULL;
            }
        } else {
            k->n_annotations++;
        }
        uint32_t host = capture_host(c, pid, tid), nm = intern_val(k->t, name);
        if (host == TRACE_NONE || nm == TRACE_NONE ||
            capture_range(c, host, ts, ts + dur, nm, rf, op) != 0)
            goto oom;
    }
    return 0;
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

/* Kineto, or any Chrome trace of GPU work: JSON whose first member is
 * traceEvents or schemaVersion, or a Kineto-only key near the top. Our own
 * Chrome export says "syncsim" first and is not claimed here. */
static bool kineto_sniff(const char *path, const unsigned char *head, size_t n)
{
    (void)path;
    char text[TRACE_SNIFF_BYTES + 1];
    size_t len = json_sniff_text(head, n, text, sizeof text);
    if (len < 2 || text[0] != '{' || trace_format_chrome.sniff(path, head, n))
        return false;
    return strstr(text, "\"traceEvents\"") || strstr(text, "\"schemaVersion\"") ||
           strstr(text, "\"deviceProperties\"");
}

static int kineto_open(trace_source *src, const char *path, const trace_source_opts *o,
                       trace_error *err)
{
    trace *t = trace_new();
    capture *c = t ? capture_new(t, path) : NULL;
    cap_accesses *et = NULL;
    kineto k = { .c = c, .t = t, .path = path, .schema = CAP_NONE };
    if (!t || !c) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (o->companion && !(et = et_load(o->companion, err)))
        goto fail;
    k.et = et;
    json_handler h = { "traceEvents", kineto_member, kineto_event, &k };
    if (json_stream(path, &h, err) != 0)
        goto fail;
    if (!k.saw_events) {
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: JSON without trace events (no traceEvents array): not a Kineto "
                        "trace", path);
        goto fail;
    }
    if (resolve_pending(&k) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (et && k.n_et_joined == 0) {
        trace_error_set(err, TRACE_EUSAGE,
                        "%s: none of the %llu ops of this execution trace matches an op of %s "
                        "(rf_id against Record function id / External id): not its trace",
                        o->companion, (unsigned long long)cap_accesses_ops(et), path);
        goto fail;
    }
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(k.schema == CAP_NONE ? 0 : k.schema));
    if (trace_set_meta(t, "capture.format", "kineto") != 0 ||
        trace_set_meta(t, "capture.schema", k.schema == CAP_NONE ? "none" : v) != 0 ||
        (o->companion && trace_set_meta(t, "capture.execution_trace", o->companion) != 0) ||
        capture_count(c, "capture.events", k.n_events) != 0 ||
        capture_count(c, "capture.flows", k.n_flows) != 0 ||
        capture_count(c, "capture.cpu_ops", k.n_ops) != 0 ||
        capture_count(c, "capture.annotations", k.n_annotations) != 0 ||
        (et && capture_count(c, "capture.et_ops_joined", k.n_et_joined) != 0)) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (capture_open_reader(c, et, &src->reader, path, err) != 0)
        goto fail;
    free(k.pending);
    free(k.flows);
    return 0;
fail:
    capture_free(c);
    et_free(et);
    free(k.pending);
    free(k.flows);
    trace_free(t);
    return -1;
}

const trace_format trace_format_kineto = {
    "kineto", "a PyTorch profiler (Kineto) trace, JSON or gzipped JSON; --et FILE joins its "
              "execution trace for byte ranges",
    true, kineto_sniff, kineto_open,
};
