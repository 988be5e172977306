/*
 * merge.c -- one trace of a multi-rank job from one trace per rank
 * (`syncsim merge`, docs/multi-rank.md).
 *
 * Each input is one process: its queues, buffers, devices, events, flags,
 * semaphores and barriers are its own, so their names are namespaced by
 * rank ("host" of rank 1 becomes "r1.host", device 0 of rank 1 "r1.0").
 * Communicators are what ranks share: their names (collectives, send and
 * recv) stay as written, and so do labels, collective kinds and
 * attributes.
 *
 * The rank of an input is its run metadata `rank=` when every input has
 * one, else its place in the list. Ranks must be distinct; `world_size=`,
 * where given, must agree and equal the number of inputs. A send's from=
 * (a recv's to=) must be the rank of the file it is in.
 *
 * Order. The merged trace is a reader (trace_merge_open) that pulls from
 * the inputs as it is read, so a million-statement job never sits in
 * memory: statements are interleaved by observed time when every input's
 * first statement has a time (a k-way merge on t, ties by rank; a
 * statement without t counts as its rank's previous time), else rank by
 * rank. Each rank's own order is kept either way, and that is all the
 * binder's matching depends on: collectives pair by each queue's k-th
 * arrival on a communicator, send/recv by each rank's k-th message on a
 * channel (traces/bind.c, rule 9). What does depend on the interleaving is
 * which arrival is the extra one when more queues than size= arrive
 * (the file's order decides, as for one process), and the checker's
 * memory: rank by rank, a rank blocked at a collective keeps everything it
 * does after it pending until the others arrive.
 *
 * A partial job (trace_merge_open_partial, `merge --partial`): some ranks of
 * a larger world, as profilers sample them (a PyTorch job of 128 ranks
 * profiled on ranks 0 and 1). Ranks keep their numbers (they may exceed the
 * inputs), and what needs an absent rank cannot be matched: a collective
 * whose size= exceeds the ranks given, and a send or recv whose peer is not
 * given, becomes an `op` of its queue with the same accesses and times,
 * labelled "KIND COMM (partial)" or "send to r5 (partial)", so the checker
 * neither hangs on the absent ranks nor orders anything through them. A
 * communicator no larger than the ranks given is assumed to be among them.
 * Run metadata `partial=GIVEN/WORLD` says so, and `check` repeats it.
 *
 * Declarations are translated lazily: a text input declares as it goes, so
 * before each statement the merge copies what its input declared since.
 *
 * Attributes asked for after reading (attr_text: a reported statement's
 * site=) come from the input that gave the statement, read again there. To
 * know which, the merge keeps one stretch {merged seq, input, its seq} per
 * run of consecutive statements from one input, when an input can look
 * back at all: one per input rank by rank, by time one per switch between
 * ranks (at worst one per statement, 24 bytes).
 */
#include "trace.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct merge_in {
    trace_reader *r;
    uint32_t rank;
    char prefix[24];            /* "r<rank>." */
    uint32_t *str_map;          /* input string id -> output id (TRACE_NONE: not yet) */
    uint32_t *pstr_map;         /* the same, prefixed */
    uint32_t cap_str, cap_pstr;
    uint32_t *queue_map, *buffer_map;
    uint32_t n_queues, n_buffers, cap_queues, cap_buffers;
    trace_stmt next;            /* the statement read ahead (has_next) */
    bool has_next, done;
    int64_t last_t;
} merge_in;

/* Statements [seq, next stretch's seq) of the merge are input's, from its
 * seq in_seq on. */
typedef struct merge_stretch {
    uint64_t seq;
    uint64_t in_seq;
    uint32_t input;
} merge_stretch;

typedef struct merge_ctx {
    trace *out;
    merge_in *in;
    uint32_t n;
    bool partial;               /* some ranks of a larger world */
    bool owns_inputs;           /* close and free the input readers with the merge */
    uint8_t *present;           /* partial: rank -> given (ranks < world) */
    uint32_t world;
    bool by_time;
    bool started, expects_done;
    uint32_t cur;               /* rank by rank: the input being read */
    uint32_t *heap;             /* by time: inputs with a statement ahead */
    uint32_t n_heap;
    uint64_t seq;
    trace_access *acc;
    uint32_t cap_acc;
    trace_attr *attr;
    uint32_t cap_attr;
    bool track;                 /* an input can look back (attr_text): keep stretches */
    merge_stretch *stretch;
    uint64_t n_stretch, cap_stretch;
} merge_ctx;

static int nomem(trace_error *err)
{
    trace_error_set(err, TRACE_ENOMEM, "merge: out of memory");
    return -1;
}

/* Output id of input string id (prefixed: with the rank's prefix). */
static uint32_t map_str(merge_ctx *m, merge_in *in, uint32_t id, bool prefixed)
{
    if (id == TRACE_NONE)
        return TRACE_NONE;
    uint32_t **map = prefixed ? &in->pstr_map : &in->str_map;
    uint32_t *cap = prefixed ? &in->cap_pstr : &in->cap_str;
    if (id >= *cap) {
        uint32_t c = *cap ? *cap : 64;
        while (c <= id)
            c *= 2;
        uint32_t *p = realloc(*map, (size_t)c * sizeof *p);
        if (!p)
            return TRACE_NONE;
        for (uint32_t i = *cap; i < c; i++)
            p[i] = TRACE_NONE;
        *map = p;
        *cap = c;
    }
    if ((*map)[id] != TRACE_NONE)
        return (*map)[id];
    const trace *t = in->r->trace;
    uint32_t v;
    if (prefixed) {
        size_t pl = strlen(in->prefix), l = t->str_len[id];
        char local[256], *buf = pl + l <= sizeof local ? local : malloc(pl + l);
        if (!buf)
            return TRACE_NONE;
        memcpy(buf, in->prefix, pl);
        memcpy(buf + pl, t->strs[id], l);
        v = trace_intern(m->out, buf, pl + l);
        if (buf != local)
            free(buf);
    } else {
        v = trace_intern(m->out, t->strs[id], t->str_len[id]);
    }
    (*map)[id] = v;
    return v;
}

static int grow_map(uint32_t **map, uint32_t *cap, uint32_t need)
{
    return trace_grow32((void **)map, cap, need, sizeof **map);
}

/* Copies what input `in` declared since the last call into the output. */
static int sync_decls(merge_ctx *m, merge_in *in, trace_error *err)
{
    const trace *t = in->r->trace;
    if (grow_map(&in->queue_map, &in->cap_queues, t->n_queues) != 0 ||
        grow_map(&in->buffer_map, &in->cap_buffers, t->n_buffers) != 0)
        return nomem(err);
    for (; in->n_queues < t->n_queues; in->n_queues++) {
        const trace_queue *q = &t->queues[in->n_queues];
        uint32_t name = map_str(m, in, q->name, true);
        uint32_t dev = q->device == TRACE_NONE ? TRACE_NONE : map_str(m, in, q->device, true);
        if (name == TRACE_NONE || (q->device != TRACE_NONE && dev == TRACE_NONE))
            return nomem(err);
        if (trace_find_queue(m->out, trace_str(m->out, name), strlen(trace_str(m->out, name))) !=
            TRACE_NONE)
            return trace_error_set(err, TRACE_EUSAGE,
                                   "%s: queue '%s' of rank %u clashes with a queue of another rank "
                                   "after namespacing",
                                   in->r->source, trace_str(t, q->name), in->rank), -1;
        uint32_t idx = trace_add_queue(m->out, name, q->kind, dev);
        if (idx == TRACE_NONE)
            return nomem(err);
        in->queue_map[in->n_queues] = idx;
    }
    for (; in->n_buffers < t->n_buffers; in->n_buffers++) {
        const trace_buffer *b = &t->buffers[in->n_buffers];
        uint32_t name = map_str(m, in, b->name, true), idx;
        if (name == TRACE_NONE)
            return nomem(err);
        if (trace_find_buffer(m->out, trace_str(m->out, name), strlen(trace_str(m->out, name))) !=
            TRACE_NONE)
            return trace_error_set(err, TRACE_EUSAGE,
                                   "%s: buffer '%s' of rank %u clashes with a buffer of another "
                                   "rank after namespacing",
                                   in->r->source, trace_str(t, b->name), in->rank), -1;
        if (b->parent == TRACE_NONE) {
            uint32_t dev = b->device == TRACE_NONE ? TRACE_NONE : map_str(m, in, b->device, true);
            idx = trace_add_root_buffer(m->out, name, b->size, b->loc, dev, b->pinned);
        } else {
            idx = trace_add_view(m->out, name, in->buffer_map[b->parent], b->offset, b->size);
        }
        if (idx == TRACE_NONE)
            return nomem(err);
        in->buffer_map[in->n_buffers] = idx;
    }
    return 0;
}

/* Reads input i's next statement into in->next. 0, or -1 with err. */
static int read_ahead(merge_ctx *m, uint32_t i, trace_error *err)
{
    merge_in *in = &m->in[i];
    in->has_next = false;
    if (in->done)
        return 0;
    int rc = trace_reader_next(in->r, &in->next, err);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        in->done = true;
        return 0;
    }
    if (in->next.t != TRACE_TIME_NONE)
        in->last_t = in->next.t;
    const trace_stmt *s = &in->next;
    if ((s->kind == TRACE_SEND || s->kind == TRACE_RECV) && s->rank != in->rank)
        return trace_error_set(err, TRACE_EUSAGE,
                               "%s:%u: a %s %s rank %u in the trace of rank %u; each file holds "
                               "one rank's statements (its rank from run metadata rank=, else "
                               "its place among the inputs)",
                               in->r->source, s->line, trace_kind_str(s->kind),
                               s->kind == TRACE_SEND ? "from" : "to", s->rank, in->rank), -1;
    in->has_next = true;
    return 0;
}

/* Heap order: earlier time first, then lower rank. */
static bool before(const merge_ctx *m, uint32_t a, uint32_t b)
{
    const merge_in *x = &m->in[a], *y = &m->in[b];
    if (x->last_t != y->last_t)
        return x->last_t < y->last_t;
    return x->rank < y->rank;
}

static void heap_push(merge_ctx *m, uint32_t i)
{
    uint32_t k = m->n_heap++;
    m->heap[k] = i;
    while (k && before(m, m->heap[k], m->heap[(k - 1) / 2])) {
        uint32_t p = (k - 1) / 2, tmp = m->heap[p];
        m->heap[p] = m->heap[k];
        m->heap[k] = tmp;
        k = p;
    }
}

static uint32_t heap_pop(merge_ctx *m)
{
    uint32_t top = m->heap[0];
    m->heap[0] = m->heap[--m->n_heap];
    for (uint32_t k = 0;;) {
        uint32_t l = 2 * k + 1, r = l + 1, best = k;
        if (l < m->n_heap && before(m, m->heap[l], m->heap[best]))
            best = l;
        if (r < m->n_heap && before(m, m->heap[r], m->heap[best]))
            best = r;
        if (best == k)
            break;
        uint32_t tmp = m->heap[k];
        m->heap[k] = m->heap[best];
        m->heap[best] = tmp;
        k = best;
    }
    return top;
}

static int start(merge_ctx *m, trace_error *err)
{
    m->started = true;
    m->cur = 0;
    m->n_heap = 0;
    m->seq = 0;
    m->n_stretch = 0;
    bool all_timed = true;
    for (uint32_t i = 0; i < m->n; i++) {
        m->in[i].done = false;
        m->in[i].last_t = INT64_MIN;
        if (read_ahead(m, i, err) != 0)
            return -1;
        if (m->in[i].has_next && m->in[i].next.t == TRACE_TIME_NONE)
            all_timed = false;
    }
    m->by_time = all_timed;
    if (m->by_time)
        for (uint32_t i = 0; i < m->n; i++)
            if (m->in[i].has_next)
                heap_push(m, i);
    return 0;
}

/* Partial jobs: whether s needs a rank that was not given. */
static bool needs_absent(const merge_ctx *m, const trace_stmt *s)
{
    if (s->kind == TRACE_COLLECTIVE)
        return s->count > m->n;
    return s->peer >= m->world || !m->present[s->peer];
}

static int translate_accesses(merge_ctx *m, merge_in *in, const trace_stmt *s, trace_stmt *out,
                              trace_error *err);

/* Partial jobs: s as an op of its queue, labelled with what it was. */
static int local_op(merge_ctx *m, merge_in *in, const trace_stmt *s, trace_stmt *out,
                    trace_error *err)
{
    const trace *t = in->r->trace;
    char buf[256];
    if (s->kind == TRACE_COLLECTIVE)
        snprintf(buf, sizeof buf, "%s %s (partial)",
                 s->coll_kind != TRACE_NONE ? trace_str(t, s->coll_kind) : "collective",
                 trace_str(t, s->object));
    else
        snprintf(buf, sizeof buf, "%s r%u on %s (partial)",
                 s->kind == TRACE_SEND ? "send to" : "recv from", s->peer,
                 trace_str(t, s->object));
    out->kind = TRACE_OP;
    out->object = TRACE_NONE;
    out->coll_kind = TRACE_NONE;
    out->count = 0;
    out->rank = out->peer = TRACE_NONE;
    if ((out->label = trace_intern_cstr(m->out, buf)) == TRACE_NONE)
        return nomem(err);
    return translate_accesses(m, in, s, out, err);
}

/* Translates input in's statement into *out (pointers into m's pools). */
static int translate(merge_ctx *m, merge_in *in, trace_stmt *out, trace_error *err)
{
    const trace_stmt *s = &in->next;
    if (sync_decls(m, in, err) != 0)
        return -1;
    *out = *s;
    out->seq = m->seq++;
    out->queue = in->queue_map[s->queue];
    /* by= made explicit: the job has a host per rank at least */
    uint32_t by = trace_submitter(in->r->trace, s);
    out->by = by == TRACE_NONE ? TRACE_NONE : in->queue_map[by];
    bool fail = false;
    if (s->label != TRACE_NONE) {
        if (s->label == TRACE_LABEL_LAZY)
            return trace_error_set(err, TRACE_EUSAGE, "merge: an input gave a lazy label"), -1;
        fail |= (out->label = map_str(m, in, s->label, false)) == TRACE_NONE;
    }
    switch (s->kind) {
    case TRACE_ALLOC:
    case TRACE_FREE:
        out->object = in->buffer_map[s->object];
        break;
    case TRACE_SYNC:
        if (s->sync_scope == TRACE_SYNC_QUEUE)
            out->object = in->queue_map[s->object];
        else if (s->sync_scope == TRACE_SYNC_DEVICE)
            fail |= (out->object = map_str(m, in, s->object, true)) == TRACE_NONE;
        break;
    case TRACE_COLLECTIVE:
    case TRACE_SEND:
    case TRACE_RECV:
        if (m->partial && needs_absent(m, s))
            return local_op(m, in, s, out, err);
        /* communicators are shared between ranks */
        fail |= (out->object = map_str(m, in, s->object, false)) == TRACE_NONE;
        if (s->coll_kind != TRACE_NONE)
            fail |= (out->coll_kind = map_str(m, in, s->coll_kind, false)) == TRACE_NONE;
        break;
    default:
        /* events, flags, semaphores, barriers: the process's own */
        if (s->object != TRACE_NONE)
            fail |= (out->object = map_str(m, in, s->object, true)) == TRACE_NONE;
        break;
    }
    if (fail)
        return nomem(err);
    return translate_accesses(m, in, s, out, err);
}

/* The accesses and attributes of s into *out (m's pools). */
static int translate_accesses(merge_ctx *m, merge_in *in, const trace_stmt *s, trace_stmt *out,
                              trace_error *err)
{
    bool fail = false;
    if (trace_grow32((void **)&m->acc, &m->cap_acc, s->n_access, sizeof *m->acc) != 0 ||
        trace_grow32((void **)&m->attr, &m->cap_attr, s->n_attr, sizeof *m->attr) != 0)
        return nomem(err);
    for (uint32_t i = 0; i < s->n_access; i++) {
        m->acc[i] = s->access[i];
        m->acc[i].buffer = in->buffer_map[s->access[i].buffer];
    }
    for (uint32_t i = 0; i < s->n_attr; i++) {
        m->attr[i].key = map_str(m, in, s->attr[i].key, false);
        m->attr[i].value = map_str(m, in, s->attr[i].value, false);
        fail |= m->attr[i].key == TRACE_NONE || m->attr[i].value == TRACE_NONE;
    }
    if (fail)
        return nomem(err);
    out->access = s->n_access ? m->acc : NULL;
    out->attr = s->n_attr ? m->attr : NULL;
    return 0;
}

static int carry_expects(merge_ctx *m, merge_in *in, trace_error *err);

/* At the end: the inputs' expectations (a text input has read them only
 * now) and their declarations that no statement used. */
static int finish(merge_ctx *m, trace_error *err)
{
    if (m->expects_done)
        return 0;
    m->expects_done = true;
    for (uint32_t i = 0; i < m->n; i++)
        if (sync_decls(m, &m->in[i], err) != 0 || carry_expects(m, &m->in[i], err) != 0)
            return -1;
    return 0;
}

/* Merged statement seq is input i's next: extends the last stretch or
 * starts one. */
static int note_stretch(merge_ctx *m, uint32_t i, uint64_t seq, trace_error *err)
{
    uint64_t in_seq = m->in[i].next.seq;
    if (m->n_stretch) {
        const merge_stretch *last = &m->stretch[m->n_stretch - 1];
        if (last->input == i && last->in_seq + (seq - last->seq) == in_seq)
            return 0;
    }
    if (trace_grow64((void **)&m->stretch, &m->cap_stretch, m->n_stretch + 1,
                     sizeof *m->stretch) != 0)
        return nomem(err);
    m->stretch[m->n_stretch++] = (merge_stretch){ seq, in_seq, i };
    return 0;
}

/* Attribute key of merged statement seq: its input's, asked of the input. */
static int merge_attr_text(void *ctx, uint64_t seq, const char *key, const char **text,
                           size_t *len, trace_error *err)
{
    merge_ctx *m = ctx;
    *text = NULL;
    *len = 0;
    if (!m->n_stretch || seq >= m->seq)
        return 0;
    uint64_t lo = 0, hi = m->n_stretch;     /* the last stretch that starts at or before seq */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (m->stretch[mid].seq <= seq)
            lo = mid;
        else
            hi = mid;
    }
    const merge_stretch *st = &m->stretch[lo];
    trace_reader *r = m->in[st->input].r;
    if (!r->iface->attr_text)
        return 0;
    return r->iface->attr_text(r->ctx, st->in_seq + (seq - st->seq), key, text, len, err);
}

static int merge_next(void *ctx, trace_stmt *out, trace_error *err)
{
    merge_ctx *m = ctx;
    if (!m->started && start(m, err) != 0)
        return -1;
    uint32_t i;
    if (m->by_time) {
        if (!m->n_heap)
            return finish(m, err);
        i = heap_pop(m);
    } else {
        while (m->cur < m->n && !m->in[m->cur].has_next)
            m->cur++;
        if (m->cur == m->n)
            return finish(m, err);
        i = m->cur;
    }
    merge_in *in = &m->in[i];
    if (translate(m, in, out, err) != 0 || (m->track && note_stretch(m, i, out->seq, err) != 0))
        return -1;
    /* The statement's pointers are m's; the input may read on. */
    if (read_ahead(m, i, err) != 0)
        return -1;
    if (m->by_time && in->has_next)
        heap_push(m, i);
    return 1;
}

static int merge_rewind(void *ctx, trace_error *err)
{
    merge_ctx *m = ctx;
    for (uint32_t i = 0; i < m->n; i++)
        if (trace_reader_rewind(m->in[i].r, err) != 0)
            return -1;
    m->started = false;
    return 0;
}

static void merge_close(void *ctx)
{
    merge_ctx *m = ctx;
    for (uint32_t i = 0; i < m->n; i++) {
        merge_in *in = &m->in[i];
        if (m->owns_inputs && in->r) {
            trace_reader_close(in->r);
            free(in->r);
        }
        free(in->str_map);
        free(in->pstr_map);
        free(in->queue_map);
        free(in->buffer_map);
    }
    free(m->in);
    free(m->present);
    free(m->heap);
    free(m->acc);
    free(m->attr);
    free(m->stretch);
    free(m);
}

static const trace_reader_iface merge_iface = {
    .next = merge_next,
    .close = merge_close,
    .rewind = merge_rewind,
    .attr_text = merge_attr_text,
};

/* A number from run metadata: 1 and *v when present and valid, 0 when
 * absent, -1 (err) when malformed. */
static int meta_number(const trace_reader *r, const char *key, uint32_t *v, trace_error *err)
{
    const char *s = trace_get_meta(r->trace, key);
    if (!s)
        return 0;
    char *end;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || x >= TRACE_NONE - 1 || s[0] == '-')
        return trace_error_set(err, TRACE_EUSAGE, "%s: run metadata %s=%s is not a rank number",
                               r->source, key, s), -1;
    *v = (uint32_t)x;
    return 1;
}

/* Adds in's expect lines to the output, names as written (a multi-rank
 * trace's expectations name merged queues: r1.host). Duplicates of an
 * earlier input's line are left out. */
static int carry_expects(merge_ctx *m, merge_in *in, trace_error *err)
{
    const trace *t = in->r->trace;
    for (uint32_t i = 0; i < t->n_expects; i++) {
        const trace_expect *x = &t->expects[i];
        trace_attr kv[32];
        if (x->n_kv > 32)
            return trace_error_set(err, TRACE_EUSAGE, "%s: an expect line with more than 32 keys",
                                   in->r->source), -1;
        for (uint32_t k = 0; k < x->n_kv; k++) {
            kv[k].key = map_str(m, in, x->kv[k].key, false);
            kv[k].value = map_str(m, in, x->kv[k].value, false);
            if (kv[k].key == TRACE_NONE || kv[k].value == TRACE_NONE)
                return nomem(err);
        }
        bool dup = false;
        for (uint32_t j = 0; j < m->out->n_expects && !dup; j++) {
            const trace_expect *y = &m->out->expects[j];
            dup = y->kind == x->kind && y->n_kv == x->n_kv &&
                  memcmp(y->kv, kv, x->n_kv * sizeof *kv) == 0;
        }
        if (!dup && trace_add_expect(m->out, x->kind, x->line, kv, x->n_kv) != 0)
            return nomem(err);
    }
    return 0;
}

/* Run metadata that names the job a rank belongs to: ranks whose values
 * disagree are of different jobs (a PyTorch profile's distributed backend,
 * process-group config, NCCL version and job id; a syncsim run's
 * parallelism, model and policy). A key that some inputs have and others
 * lack cannot show that they are one job either: the merge refuses it too,
 * naming the key (two jobs' ranks, one profiled with more metadata, would
 * otherwise pair collectives that never met). */
static const char *const job_keys[] = {
    "job.id", "dist.backend", "dist.pg_count", "dist.pg_config", "dist.nccl_version",
    "parallel", "model", "policy",
};

/* 0 when the inputs agree on every job key (each present on all inputs or
 * on none, with one value), else 1 with why: the key, both values (or
 * "no KEY") and both files. */
static int job_mismatch(trace_reader *const *inputs, uint32_t n, char *why, size_t cap)
{
    for (size_t k = 0; k < sizeof job_keys / sizeof job_keys[0]; k++) {
        uint32_t with = TRACE_NONE, without = TRACE_NONE;
        for (uint32_t i = 0; i < n; i++) {
            const char *v = trace_get_meta(inputs[i]->trace, job_keys[k]);
            if (!v) {
                if (without == TRACE_NONE)
                    without = i;
                continue;
            }
            if (with == TRACE_NONE) {
                with = i;
            } else if (strcmp(trace_get_meta(inputs[with]->trace, job_keys[k]), v) != 0) {
                snprintf(why, cap, "%s says %s=%s but %s says %s=%s: the ranks are of different "
                         "jobs",
                         inputs[with]->source ? inputs[with]->source : "an input", job_keys[k],
                         trace_get_meta(inputs[with]->trace, job_keys[k]),
                         inputs[i]->source ? inputs[i]->source : "an input", job_keys[k], v);
                return 1;
            }
        }
        if (with != TRACE_NONE && without != TRACE_NONE) {
            snprintf(why, cap, "%s says %s=%s but %s has no %s: nothing shows the ranks are of "
                     "one job",
                     inputs[with]->source ? inputs[with]->source : "an input", job_keys[k],
                     trace_get_meta(inputs[with]->trace, job_keys[k]),
                     inputs[without]->source ? inputs[without]->source : "an input",
                     job_keys[k]);
            return 1;
        }
    }
    return 0;
}

/* Whether key is one of the import ledger's, summed over the inputs: the
 * reasons, and the events read and ignored (so that the job's ledger adds
 * up as each rank's does). */
static bool summed_key(const char *key)
{
    return !strncmp(key, TRACE_LEDGER_PREFIX, strlen(TRACE_LEDGER_PREFIX)) ||
           !strcmp(key, "import.read") || !strcmp(key, "import.ignored");
}

/* The inputs' forced= (refusals their importers were told to override),
 * each with its rank, and the merge's own (forced: why the merge would
 * have refused, or NULL): run metadata forced=, and one more `forced` in
 * the ledger for the merge's. */
static int carry_forced(merge_ctx *m, const char *forced, trace_error *err)
{
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    if (!s)
        return nomem(err);
    s[0] = '\0';
    for (uint32_t i = 0; i <= m->n; i++) {
        const char *f = i < m->n ? trace_get_meta(m->in[i].r->trace, "forced") : forced;
        if (!f)
            continue;
        size_t need = len + strlen(f) + 64;
        if (need > cap) {
            char *g = realloc(s, cap = need * 2);
            if (!g) {
                free(s);
                return nomem(err);
            }
            s = g;
        }
        if (i < m->n)
            len += (size_t)snprintf(s + len, cap - len, "%sr%u: %s", len ? "; " : "",
                                    m->in[i].rank, f);
        else
            len += (size_t)snprintf(s + len, cap - len, "%smerge --force (%s)", len ? "; " : "",
                                    f);
    }
    int rc = 0;
    if (len && trace_set_meta(m->out, "forced", s) != 0)
        rc = nomem(err);
    free(s);
    if (rc == 0 && forced) {
        const char *had = trace_get_meta(m->out, TRACE_LEDGER_PREFIX "forced");
        char v[32];
        snprintf(v, sizeof v, "%llu", (had ? strtoull(had, NULL, 10) : 0) + 1);
        if (trace_set_meta(m->out, TRACE_LEDGER_PREFIX "forced", v) != 0)
            rc = nomem(err);
    }
    return rc;
}

/* What the job's checker must know of its inputs: the ledgers summed (an
 * event a rank's importer dropped is missing from the job; so are its
 * events read and ignored), and whether accesses came from a capture (none
 * wins: one rank without byte ranges makes the job's races unchecked
 * there); and every other key on which all inputs agree. */
static int carry_coverage_meta(merge_ctx *m, trace_error *err)
{
    const char *acc = NULL;
    for (uint32_t i = 0; i < m->n; i++) {
        const trace *t = m->in[i].r->trace;
        const char *a = trace_get_meta(t, "accesses");
        if (a && (!acc || strcmp(a, "none") == 0))
            acc = a;
        for (uint32_t j = 0; j < t->n_meta; j++) {
            const char *key = trace_str(t, t->meta[j].key);
            if (!summed_key(key))
                continue;
            unsigned long long sum = strtoull(trace_str(t, t->meta[j].value), NULL, 10);
            const char *have = trace_get_meta(m->out, key);
            if (have)
                sum += strtoull(have, NULL, 10);
            char v[32];
            snprintf(v, sizeof v, "%llu", sum);
            if (trace_set_meta(m->out, key, v) != 0)
                return nomem(err);
        }
    }
    if (acc && trace_set_meta(m->out, "accesses", acc) != 0)
        return nomem(err);
    /* what every rank says alike is the job's (its backend, format, model) */
    const trace *first = m->in[0].r->trace;
    for (uint32_t j = 0; j < first->n_meta; j++) {
        const char *key = trace_str(first, first->meta[j].key);
        const char *value = trace_str(first, first->meta[j].value);
        if (summed_key(key) || !strcmp(key, "accesses") || !strcmp(key, "forced") ||
            !strcmp(key, "rank") || !strcmp(key, "world_size") || !strcmp(key, "source") ||
            !strcmp(key, "partial") || !strncmp(key, "rank.", 5) || trace_get_meta(m->out, key))
            continue;
        bool alike = true;
        for (uint32_t i = 1; i < m->n && alike; i++) {
            const char *v = trace_get_meta(m->in[i].r->trace, key);
            alike = v && strcmp(v, value) == 0;
        }
        if (alike && trace_set_meta(m->out, key, value) != 0)
            return nomem(err);
    }
    return 0;
}

/* "1, 3" or "2-127": the ranks of the world not given, for check's coverage. */
static int set_absent_ranks(merge_ctx *m, trace_error *err)
{
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    if (!s)
        return nomem(err);
    s[0] = '\0';
    for (uint32_t r = 0; r < m->world;) {
        if (m->present[r]) {
            r++;
            continue;
        }
        uint32_t end = r;
        while (end + 1 < m->world && !m->present[end + 1])
            end++;
        if (cap - len < 32) {
            char *g = realloc(s, cap *= 2);
            if (!g) {
                free(s);
                return nomem(err);
            }
            s = g;
        }
        len += (size_t)snprintf(s + len, cap - len, end > r ? "%s%u-%u" : "%s%u", len ? ", " : "",
                                r, end);
        r = end + 1;
    }
    int rc = trace_set_meta(m->out, "ranks.absent", s);
    free(s);
    return rc == 0 ? 0 : nomem(err);
}

int trace_merge_open(trace_reader *const *inputs, uint32_t n, trace_reader *out, trace_error *err)
{
    return trace_merge_open_partial(inputs, n, false, out, err);
}

int trace_merge_open_partial(trace_reader *const *inputs, uint32_t n, bool partial,
                             trace_reader *out, trace_error *err)
{
    trace_merge_opts o = { .partial = partial };
    return trace_merge_open_opts(inputs, n, &o, out, err);
}

int trace_merge_open_opts(trace_reader *const *inputs, uint32_t n, const trace_merge_opts *o,
                          trace_reader *out, trace_error *err)
{
    bool partial = o && o->partial;
    memset(out, 0, sizeof *out);
    if (n == 0)
        return trace_error_set(err, TRACE_EUSAGE, "merge: no input traces"), -1;
    merge_ctx *m = calloc(1, sizeof *m);
    if (!m)
        return nomem(err);
    m->n = n;
    m->partial = partial;
    m->owns_inputs = o && o->owns_inputs;
    if (!(m->in = calloc(n, sizeof *m->in)) || !(m->heap = calloc(n, sizeof *m->heap)) ||
        !(m->out = trace_new())) {
        nomem(err);
        goto fail;
    }
    char why[1024];
    bool mismatch = job_mismatch(inputs, n, why, sizeof why) != 0;
    if (mismatch && !(o && o->force)) {
        trace_error_set(err, TRACE_EUSAGE,
                        "merge: %s (--force merges them all the same; the job's check is then "
                        "never clean)",
                        why);
        goto fail;
    }
    /* 1. Ranks: run metadata rank= for all inputs, else the list order. */
    uint32_t with_rank = 0, world = TRACE_NONE;
    const char *world_src = NULL;
    for (uint32_t i = 0; i < n; i++) {
        merge_in *in = &m->in[i];
        in->r = inputs[i];
        uint32_t v;
        int has = meta_number(in->r, "rank", &v, err);
        if (has < 0)
            goto fail;
        with_rank += has == 1;
        in->rank = has == 1 ? v : i;
        int ws = meta_number(in->r, "world_size", &v, err);
        if (ws < 0)
            goto fail;
        if (ws == 1 && world != TRACE_NONE && v != world) {
            trace_error_set(err, TRACE_EUSAGE,
                            "%s: world_size=%u, but %s says world_size=%u; the inputs are not "
                            "one job", in->r->source, v, world_src, world);
            goto fail;
        }
        if (ws == 1) {
            world = v;
            world_src = in->r->source;
        }
    }
    if (with_rank != 0 && with_rank != n) {
        trace_error_set(err, TRACE_EUSAGE,
                        "merge: %u of %u inputs give their rank in run metadata (rank=); give it "
                        "in all of them or in none (then the order of the files is the rank)",
                        with_rank, n);
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < i; j++)
            if (m->in[i].rank == m->in[j].rank) {
                trace_error_set(err, TRACE_EUSAGE, "merge: %s and %s are both rank %u",
                                m->in[j].r->source, m->in[i].r->source, m->in[i].rank);
                goto fail;
            }
    if (partial && (world == TRACE_NONE || world <= n)) {
        trace_error_set(err, TRACE_EUSAGE,
                        "merge --partial: the inputs %s; merge them without --partial",
                        world == TRACE_NONE ? "give no world_size= in their run metadata, so "
                                              "they are taken as the whole job"
                                            : "are the whole job (world_size= equals their number)");
        goto fail;
    }
    if (!partial && world != TRACE_NONE && world != n) {
        trace_error_set(err, TRACE_EUSAGE,
                        "merge: world_size=%u (%s) but %u traces given: give one trace per rank, "
                        "or --partial for some ranks of the job (what needs an absent rank is "
                        "then left unmatched)",
                        world, world_src, n);
        goto fail;
    }
    uint32_t limit = partial ? world : n;
    if (partial) {
        m->world = world;
        if (!(m->present = calloc(world, 1))) {
            nomem(err);
            goto fail;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        merge_in *in = &m->in[i];
        if (partial && in->rank < limit)
            m->present[in->rank] = 1;
        if (partial && in->rank >= limit) {
            trace_error_set(err, TRACE_EUSAGE, "%s: rank %u, but world_size=%u (ranks 0 to %u)",
                            in->r->source, in->rank, world, world - 1);
            goto fail;
        }
        if (!partial && in->rank >= n) {
            trace_error_set(err, TRACE_EUSAGE,
                            "%s: rank %u, but there are %u traces (ranks 0 to %u)",
                            in->r->source, in->rank, n, n - 1);
            goto fail;
        }
        snprintf(in->prefix, sizeof in->prefix, "r%u.", in->rank);
    }
    /* 2. The job's metadata and expectations. */
    char buf[64];
    snprintf(buf, sizeof buf, "%u", partial ? world : n);
    char given[32];
    snprintf(given, sizeof given, "%u/%u", n, partial ? world : n);
    if (trace_set_meta(m->out, "world_size", buf) != 0 ||
        (partial && trace_set_meta(m->out, "partial", given) != 0) ||
        trace_set_meta(m->out, "source", "merge") != 0) {
        nomem(err);
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        merge_in *in = &m->in[i];
        char key[48];
        snprintf(key, sizeof key, "rank.%u", in->rank);
        if (trace_set_meta(m->out, key, in->r->source ? in->r->source : "") != 0) {
            nomem(err);
            goto fail;
        }
    }
    if (carry_coverage_meta(m, err) != 0 || carry_forced(m, mismatch ? why : NULL, err) != 0 ||
        (partial && set_absent_ranks(m, err) != 0))
        goto fail;
    for (uint32_t i = 0; i < n; i++)
        m->track |= m->in[i].r->iface->attr_text != NULL;
    out->iface = &merge_iface;
    out->ctx = m;
    out->trace = m->out;
    out->owns_trace = true;
    out->source = strdup("merged trace");
    if (!out->source) {
        trace_reader_close(out);
        return nomem(err);
    }
    return 0;
fail:
    if (m) {
        trace_free(m->out);
        m->n = m->in ? n : 0;
        m->owns_inputs = false;     /* a failed open leaves the inputs the caller's */
        merge_close(m);
    }
    return -1;
}
