/*
 * chrome_export.c -- syncsim's Chrome trace: Trace Event JSON that
 * Perfetto (ui.perfetto.dev) and chrome://tracing open, and that syncsim
 * reads back exactly (chrome_import.c).
 *
 * The document, written in one pass over a reader:
 *
 *   {"syncsim": "chrome-trace 1",          first, so that the format is told
 *                                           by its first bytes
 *    "displayTimeUnit": "ns",
 *    "traceEvents": [
 *      process_name / process_sort_index   one track group per device
 *                                           ("device gpu0") and one for the
 *                                           host threads ("host")
 *      thread_name / thread_sort_index      one track per queue; args.syncsim
 *                                           holds the declaration {kind, device}
 *      syncsim_buffer (ph M)                a buffer declaration, before its
 *                                           first use: {name, size, parent,
 *                                           offset, loc, device, pinned}
 *      one event per statement              "X" (complete) when the statement
 *                                           has t= and dur=, else an instant
 *                                           "i" where its queue stood; args:
 *                                           {seq, kind, queue, label, object |
 *                                           target, count, coll, sem (a value
 *                                           semaphore's signal/await: count is
 *                                           its value), by, t, dur,
 *                                           access: [[mode, buffer, lo, hi,
 *                                           form]], attr: [[key, value]]}
 *      flows (ph s/f, cat "sync", "launch") record -> each wait bound to it
 *                                           (one s and one f per id);
 *                                           the submitting host -> the stream
 *                                           statement it submitted
 *      findings (ph i, cat "finding")       trace_chrome_findings(): the
 *                                           finding's JSON and its fix
 *    ],
 *    "syncsimMeta": {...}, "syncsimExpects": [...]}   known only at the end
 *
 * Times: ts and dur are microseconds as Chrome wants, written with their
 * nanoseconds as three exact decimals; args.t and args.dur keep the
 * nanoseconds as integers, and those are what is read back.
 */
#include "traces/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct trace_chrome {
    FILE *out;
    trace_reader *r;
    trace *t;
    bool first;                 /* no event written yet */
    uint32_t queues_done, buffers_done;
    uint32_t *group_of;         /* queue -> pid of its track group */
    uint32_t cap_group;
    uint32_t n_groups;
    uint32_t *group_device;     /* group pid - 2 -> device string id */
    int64_t *queue_end;         /* per queue: end of its last event, ns */
    int64_t *host_last;         /* per queue (hosts): end of its last statement */
    int64_t *rec_ts;            /* per event name: ts of its last record, or INT64_MIN */
    uint32_t *rec_queue;        /* per event name: queue of that record */
    uint32_t cap_names;
    uint64_t next_flow;
    /* per statement: its queue and ts, for findings */
    uint32_t *stmt_queue;
    int64_t *stmt_ts;
    uint64_t n_stmts, cap_stmts;
    bool failed;
};

/* ns as microseconds with three exact decimals. */
static void put_us(FILE *out, int64_t ns)
{
    if (ns < 0) {
        fputc('-', out);
        ns = ns == INT64_MIN ? INT64_MAX : -ns;
    }
    fprintf(out, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static void sep(trace_chrome *w)
{
    fputs(w->first ? "\n" : ",\n", w->out);
    w->first = false;
}

static int grow_u32(uint32_t **a, uint32_t *cap, uint32_t need, uint32_t fill)
{
    if (need <= *cap)
        return 0;
    uint32_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    uint32_t *n = realloc(*a, (size_t)ncap * sizeof *n);
    if (!n)
        return -1;
    for (uint32_t i = *cap; i < ncap; i++)
        n[i] = fill;
    *a = n;
    *cap = ncap;
    return 0;
}

/* Per-queue and per-name arrays follow the trace's tables. */
static int ensure_tables(trace_chrome *w)
{
    trace *t = w->t;
    if (t->n_queues > w->cap_group) {
        uint32_t old = w->cap_group, cap = old;
        if (grow_u32(&w->group_of, &cap, t->n_queues, 0) != 0)
            return -1;
        int64_t *e = realloc(w->queue_end, (size_t)cap * sizeof *e);
        if (!e)
            return -1;
        w->queue_end = e;
        int64_t *h = realloc(w->host_last, (size_t)cap * sizeof *h);
        if (!h)
            return -1;
        w->host_last = h;
        for (uint32_t i = old; i < cap; i++)
            w->queue_end[i] = w->host_last[i] = INT64_MIN;
        w->cap_group = cap;
    }
    if (t->n_strs > w->cap_names) {
        uint32_t old = w->cap_names, cap = old, cap2 = old;
        if (grow_u32(&w->rec_queue, &cap, t->n_strs, TRACE_NONE) != 0)
            return -1;
        int64_t *ts = realloc(w->rec_ts, (size_t)cap * sizeof *ts);
        if (!ts)
            return -1;
        w->rec_ts = ts;
        for (uint32_t i = old; i < cap; i++)
            w->rec_ts[i] = INT64_MIN;
        (void)cap2;
        w->cap_names = cap;
    }
    return 0;
}

/* The track group (pid) of a queue: 1 for hosts, one per device after. */
static uint32_t group_for(trace_chrome *w, const trace_queue *q)
{
    if (q->kind == TRACE_QUEUE_HOST) {
        if (!(w->n_groups & 1)) {   /* bit 0: the host group was announced */
            sep(w);
            fputs("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"tid\": 0, "
                  "\"args\": {\"name\": \"host\"}}", w->out);
            sep(w);
            fputs("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 1, \"tid\": 0, "
                  "\"args\": {\"sort_index\": 0}}", w->out);
            w->n_groups |= 1;
        }
        return 1;
    }
    uint32_t n_dev = w->n_groups >> 1;
    for (uint32_t d = 0; d < n_dev; d++)
        if (w->group_device[d] == q->device)
            return d + 2;
    uint32_t cap = n_dev;
    if (grow_u32(&w->group_device, &cap, n_dev + 1, TRACE_NONE) != 0)
        return 0;
    w->group_device[n_dev] = q->device;
    w->n_groups += 2;
    sep(w);
    fprintf(w->out, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %u, \"tid\": 0, "
                    "\"args\": {\"name\": ", n_dev + 2);
    char name[300];
    snprintf(name, sizeof name, "device %s", trace_str(w->t, q->device));
    trace_json_str(w->out, name);
    fputs("}}", w->out);
    sep(w);
    fprintf(w->out, "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": %u, \"tid\": 0, "
                    "\"args\": {\"sort_index\": %u}}", n_dev + 2, n_dev + 1);
    return n_dev + 2;
}

/* Declarations the reader made since the last statement. */
static int write_decls(trace_chrome *w)
{
    trace *t = w->t;
    if (ensure_tables(w) != 0)
        return -1;
    for (; w->queues_done < t->n_queues; w->queues_done++) {
        uint32_t qi = w->queues_done;
        const trace_queue *q = &t->queues[qi];
        uint32_t pid = group_for(w, q);
        if (!pid)
            return -1;
        w->group_of[qi] = pid;
        sep(w);
        fprintf(w->out, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %u, \"tid\": %u, "
                        "\"args\": {\"name\": ", pid, qi + 1);
        trace_json_str(w->out, trace_str(t, q->name));
        fprintf(w->out, ", \"syncsim\": {\"kind\": \"%s\"",
                q->kind == TRACE_QUEUE_HOST ? "host" : "stream");
        if (q->kind != TRACE_QUEUE_HOST) {
            fputs(", \"device\": ", w->out);
            trace_json_str(w->out, trace_str(t, q->device));
        }
        fputs("}}}", w->out);
        sep(w);
        fprintf(w->out, "{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": %u, "
                        "\"tid\": %u, \"args\": {\"sort_index\": %u}}", pid, qi + 1, qi);
    }
    for (; w->buffers_done < t->n_buffers; w->buffers_done++) {
        const trace_buffer *b = &t->buffers[w->buffers_done];
        sep(w);
        fputs("{\"ph\": \"M\", \"name\": \"syncsim_buffer\", \"pid\": 0, \"tid\": 0, "
              "\"args\": {\"name\": ", w->out);
        trace_json_str(w->out, trace_str(t, b->name));
        fprintf(w->out, ", \"size\": %llu", (unsigned long long)b->size);
        if (b->parent != TRACE_NONE) {
            fputs(", \"parent\": ", w->out);
            trace_json_str(w->out, trace_str(t, t->buffers[b->parent].name));
            fprintf(w->out, ", \"offset\": %llu", (unsigned long long)b->offset);
        } else {
            fprintf(w->out, ", \"loc\": \"%s\"", b->loc == TRACE_LOC_HOST     ? "host"
                                                 : b->loc == TRACE_LOC_DEVICE ? "device"
                                                                              : "unspecified");
            if (b->loc == TRACE_LOC_DEVICE) {
                fputs(", \"device\": ", w->out);
                trace_json_str(w->out, trace_str(t, b->device));
            }
            if (b->pinned)
                fputs(", \"pinned\": true", w->out);
        }
        fputs("}}", w->out);
    }
    return 0;
}

static const char *mode_str(uint8_t m)
{
    return m == TRACE_R ? "r" : m == TRACE_W ? "w" : "rw";
}

/* The event's name: the label, else the verb and its object. */
static void event_name(const trace *t, const trace_stmt *s, char *buf, size_t cap)
{
    const char *verb = trace_kind_str(s->kind);
    if (s->label != TRACE_NONE) {
        snprintf(buf, cap, "%s", trace_str(t, s->label));
    } else if (s->kind == TRACE_SYNC) {
        snprintf(buf, cap, "sync %s%s",
                 s->sync_scope == TRACE_SYNC_DEVICE ? "device=" : "",
                 s->sync_scope == TRACE_SYNC_ALL      ? "all"
                 : s->sync_scope == TRACE_SYNC_QUEUE ? trace_str(t, t->queues[s->object].name)
                                                     : trace_str(t, s->object));
    } else if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE) {
        snprintf(buf, cap, "%s %s", verb, trace_str(t, t->buffers[s->object].name));
    } else if (s->sem) {
        snprintf(buf, cap, "%s %s %s%llu", verb, trace_str(t, s->object),
                 s->kind == TRACE_SIGNAL ? "set=" : ">=", (unsigned long long)s->count);
    } else {
        snprintf(buf, cap, "%s %s", verb, trace_str(t, s->object));
    }
}


/* Key-value pairs as [[KEY, VALUE], ...]: statement attributes, expect keys. */
static void json_pairs(FILE *out, const trace *t, const trace_attr *kv, uint32_t n)
{
    fputc('[', out);
    for (uint32_t k = 0; k < n; k++) {
        fputs(k ? ", [" : "[", out);
        trace_json_str(out, trace_str(t, kv[k].key));
        fputs(", ", out);
        trace_json_str(out, trace_str(t, kv[k].value));
        fputc(']', out);
    }
    fputc(']', out);
}

static void write_args(trace_chrome *w, const trace_stmt *s)
{
    trace *t = w->t;
    FILE *out = w->out;
    fprintf(out, "{\"seq\": %llu, \"kind\": \"%s\", \"queue\": ", (unsigned long long)s->seq,
            trace_kind_str(s->kind));
    trace_json_str(out, trace_str(t, t->queues[s->queue].name));
    if (s->label != TRACE_NONE) {
        fputs(", \"label\": ", out);
        trace_json_str(out, trace_str(t, s->label));
    }
    switch (s->kind) {
    case TRACE_SYNC:
        fputs(", \"target\": ", out);
        if (s->sync_scope == TRACE_SYNC_QUEUE) {
            trace_json_str(out, trace_str(t, t->queues[s->object].name));
        } else if (s->sync_scope == TRACE_SYNC_DEVICE) {
            char d[600];
            snprintf(d, sizeof d, "device=%s", trace_str(t, s->object));
            trace_json_str(out, d);
        } else {
            fputs("\"all\"", out);
        }
        break;
    case TRACE_ALLOC:
    case TRACE_FREE:
        fputs(", \"object\": ", out);
        trace_json_str(out, trace_str(t, t->buffers[s->object].name));
        break;
    case TRACE_OP:
    case TRACE_COPY:
        break;
    default:
        fputs(", \"object\": ", out);
        trace_json_str(out, trace_str(t, s->object));
    }
    if (s->kind == TRACE_BARRIER || s->kind == TRACE_COLLECTIVE || s->sem ||
        s->kind == TRACE_SEND || s->kind == TRACE_RECV)
        fprintf(out, ", \"count\": %llu", (unsigned long long)s->count);
    if (s->kind == TRACE_SEND || s->kind == TRACE_RECV)     /* count is the tag */
        fprintf(out, ", \"rank\": %u, \"peer\": %u", s->rank, s->peer);
    if (s->sem)
        fputs(", \"sem\": true", out);
    if (s->kind == TRACE_COLLECTIVE && s->coll_kind != TRACE_NONE) {
        fputs(", \"coll\": ", out);
        trace_json_str(out, trace_str(t, s->coll_kind));
    }
    if (s->by != TRACE_NONE) {
        fputs(", \"by\": ", out);
        trace_json_str(out, trace_str(t, t->queues[s->by].name));
    }
    if (s->t != TRACE_TIME_NONE)
        fprintf(out, ", \"t\": %lld", (long long)s->t);
    if (s->dur != TRACE_TIME_NONE)
        fprintf(out, ", \"dur\": %lld", (long long)s->dur);
    if (s->n_access) {
        fputs(", \"access\": [", out);
        for (uint32_t a = 0; a < s->n_access; a++) {
            const trace_access *ac = &s->access[a];
            fprintf(out, "%s[\"%s\", ", a ? ", " : "", mode_str(ac->mode));
            trace_json_str(out, trace_str(t, t->buffers[ac->buffer].name));
            fprintf(out, ", %llu, %llu, %u]", (unsigned long long)ac->lo,
                    (unsigned long long)ac->hi, (unsigned)ac->form);
        }
        fputc(']', out);
    }
    if (s->n_attr) {
        fputs(", \"attr\": ", out);
        json_pairs(out, t, s->attr, s->n_attr);
    }
    fputc('}', out);
}

static void flow(trace_chrome *w, char ph, const char *cat, uint64_t id, uint32_t queue,
                 int64_t ts)
{
    sep(w);
    fprintf(w->out, "{\"ph\": \"%c\", \"cat\": \"%s\", \"name\": \"%s\", \"id\": %llu, "
                    "\"pid\": %u, \"tid\": %u, \"ts\": ", ph, cat, cat,
            (unsigned long long)id, w->group_of[queue], queue + 1);
    put_us(w->out, ts);
    fputs(ph == 'f' ? ", \"bp\": \"e\"}" : "}", w->out);
}

static int write_stmt(trace_chrome *w, const trace_stmt *s)
{
    trace *t = w->t;
    uint32_t q = s->queue;
    bool timed = s->t != TRACE_TIME_NONE;
    /* Untimed statements stand where their queue (or their submitter) is. */
    int64_t ts = timed ? s->t : w->queue_end[q];
    if (!timed && s->by != TRACE_NONE && w->host_last[s->by] > ts)
        ts = w->host_last[s->by];
    if (ts == INT64_MIN)
        ts = 0;
    int64_t dur = timed && s->dur != TRACE_TIME_NONE && s->dur > 0 ? s->dur : 0;
    /* launch flow: from the submitting host's last statement to this one */
    uint32_t host = trace_submitter(t, s);
    if (host != TRACE_NONE && w->host_last[host] != INT64_MIN &&
        (s->kind == TRACE_OP || s->kind == TRACE_COPY || s->kind == TRACE_COLLECTIVE)) {
        uint64_t id = ++w->next_flow;
        flow(w, 's', "launch", id, host, w->host_last[host]);
        flow(w, 'f', "launch", id, q, ts);
    }
    char name[512];
    event_name(t, s, name, sizeof name);
    sep(w);
    fprintf(w->out, "{\"ph\": \"%s\", \"cat\": \"%s\", \"name\": ", timed ? "X" : "i",
            trace_kind_str(s->kind));
    trace_json_str(w->out, name);
    fprintf(w->out, ", \"pid\": %u, \"tid\": %u, \"ts\": ", w->group_of[q], q + 1);
    put_us(w->out, ts);
    if (timed) {
        fputs(", \"dur\": ", w->out);
        put_us(w->out, dur);
    } else {
        fputs(", \"s\": \"t\"", w->out);
    }
    fputs(", \"args\": ", w->out);
    write_args(w, s);
    fputc('}', w->out);
    /* record -> wait flows: one pair (one start, one end) per wait, since
     * a flow id with several ends is no flow to Chrome or Perfetto; a
     * record no wait binds to draws none */
    if (s->kind == TRACE_RECORD && s->object < w->cap_names) {
        w->rec_ts[s->object] = ts + dur;
        w->rec_queue[s->object] = q;
    } else if (s->kind == TRACE_WAIT && s->object < w->cap_names &&
               w->rec_ts[s->object] != INT64_MIN) {
        uint64_t id = ++w->next_flow;
        flow(w, 's', "sync", id, w->rec_queue[s->object], w->rec_ts[s->object]);
        flow(w, 'f', "sync", id, q, ts);
    }
    w->queue_end[q] = ts + dur;
    if (t->queues[q].kind == TRACE_QUEUE_HOST)
        w->host_last[q] = ts + dur;
    if (w->n_stmts == w->cap_stmts) {
        uint64_t cap = w->cap_stmts ? w->cap_stmts * 2 : 1024;
        uint32_t *nq = realloc(w->stmt_queue, cap * sizeof *nq);
        if (!nq)
            return -1;
        w->stmt_queue = nq;
        int64_t *nt = realloc(w->stmt_ts, cap * sizeof *nt);
        if (!nt)
            return -1;
        w->stmt_ts = nt;
        w->cap_stmts = cap;
    }
    w->stmt_queue[w->n_stmts] = q;
    w->stmt_ts[w->n_stmts++] = ts;
    return 0;
}

static void chrome_free(trace_chrome *w)
{
    free(w->group_of);
    free(w->group_device);
    free(w->queue_end);
    free(w->host_last);
    free(w->rec_ts);
    free(w->rec_queue);
    free(w->stmt_queue);
    free(w->stmt_ts);
    free(w);
}

trace_chrome *trace_chrome_begin(FILE *out, trace_reader *r, trace_error *err)
{
    trace_chrome *w = calloc(1, sizeof *w);
    if (!w) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        return NULL;
    }
    w->out = out;
    w->r = r;
    w->t = r->trace;
    w->first = true;
    fputs("{\"syncsim\": \"chrome-trace 1\", \"displayTimeUnit\": \"ns\", \"traceEvents\": [",
          out);
    trace_stmt s;
    int rc;
    while ((rc = trace_reader_next(r, &s, err)) == 1) {
        if (write_decls(w) != 0 || write_stmt(w, &s) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            rc = -1;
            break;
        }
    }
    if (rc == 0 && write_decls(w) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        rc = -1;
    }
    if (rc < 0) {
        chrome_free(w);
        return NULL;
    }
    return w;
}

int trace_chrome_findings(trace_chrome *w, const trace_finding *f, size_t n,
                          trace_finding_json_fn json, trace_error *err)
{
    (void)err;
    for (size_t i = 0; i < n; i++) {
        uint64_t seq = f[i].second.seq != TRACE_NO_SEQ ? f[i].second.seq : f[i].first.seq;
        uint32_t q = 0;
        int64_t ts = 0;
        if (seq != TRACE_NO_SEQ && seq < w->n_stmts) {
            q = w->stmt_queue[seq];
            ts = w->stmt_ts[seq];
        }
        sep(w);
        fputs("{\"ph\": \"i\", \"s\": \"t\", \"cat\": \"finding\", \"name\": ", w->out);
        trace_json_str(w->out, trace_finding_str(f[i].kind));
        fprintf(w->out, ", \"pid\": %u, \"tid\": %u, \"ts\": ",
                q < w->t->n_queues ? w->group_of[q] : 0, q + 1);
        put_us(w->out, ts);
        fputs(", \"args\": {\"finding\": ", w->out);
        json(w->out, w->t, &f[i]);
        fputs("}}", w->out);
    }
    return 0;
}

int trace_chrome_end(trace_chrome *w, trace_error *err)
{
    trace *t = w->t;
    FILE *out = w->out;
    fputs("\n], \"syncsimMeta\": {", out);
    for (uint32_t i = 0; i < t->n_meta; i++) {
        fputs(i ? ", " : "", out);
        trace_json_str(out, trace_str(t, t->meta[i].key));
        fputs(": ", out);
        trace_json_str(out, trace_str(t, t->meta[i].value));
    }
    fputs("}, \"syncsimExpects\": [", out);
    for (uint32_t i = 0; i < t->n_expects; i++) {
        const trace_expect *e = &t->expects[i];
        fprintf(out, "%s{\"kind\": \"%s\", \"line\": %u, \"kv\": ", i ? ", " : "",
                trace_finding_str(e->kind), e->line);
        json_pairs(out, t, e->kv, e->n_kv);
        fputc('}', out);
    }
    fputs("]}\n", out);
    chrome_free(w);
    if (ferror(out))
        return trace_error_set(err, TRACE_EIO, "write error: %s", strerror(errno)), -1;
    return 0;
}

int trace_chrome_write(FILE *out, trace_reader *r, trace_error *err)
{
    trace_chrome *w = trace_chrome_begin(out, r, err);
    return w ? trace_chrome_end(w, err) : -1;
}
