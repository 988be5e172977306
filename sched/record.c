/*
 * record.c -- the recording: where trace statements are made and go.
 *
 * sched_rec_wrap (record_wrap.c) gives the scheduler, for each backend, a
 * wrapper that forwards every call and turns it into trace statements:
 * recording wraps the backend interface, and a backend records nothing by
 * hand. This file is the recording itself, the one place that knows the
 * trace conventions of a run (docs/trace-format.md):
 *
 *   queues      `host` (the thread that drives the scheduler); one stream
 *               queue per asynchronous backend, named after its device
 *               (`gpu0`, `cs0`), submitted by=host; a backend's worker
 *               threads, when it has them, are host queues `cpu.t1`, ...
 *   buffers     each buffer_alloc is a root buffer (host, or device= its
 *               device; pinned as the backend says); each tensor is a view
 *               of its buffer (sched_tensor_view), so allocator reuse shows
 *               as overlapping views;
 *   attributes  token= on every statement (the evaluation), split= on what
 *               the scheduler does inside a split, and what a device model
 *               prices an op by and the trace cannot show (flops= or
 *               flops_f16=, op= its kind (the family a calibrated model
 *               prices it by), bytes= when it moves other bytes than it
 *               accesses, algorithm=butterfly, overhead_ns= of the
 *               program's own host code).
 *
 * Times. A statement the host executes (copy_sync, synchronize,
 * event_synchronize, the program's host ops) gets the host's clock around
 * the call. Work a backend runs later, or on its own threads, gets the
 * times the backend reports with the statement's ticket (sched_rec_done):
 * simulated ones when the engine completes it, observed ones when a
 * device's worker finishes it. With opts.hold, statements wait in
 * submission order until they have their times (a reorder buffer), so
 * the sink gets each complete, once; without, they go to the sink when
 * the call that made them returns, and late times follow through
 * sink.set_time (a run that hangs or is killed keeps what was submitted).
 *
 * Identifiers. The recording keeps its own trace of declarations and
 * strings (sched_rec_trace), which is what an observer such as the sync
 * pattern (traces/pattern.c) reads the statements with. The sink interns
 * the same strings in the same order, so its ids usually equal ours and
 * statements pass unchanged; when they do not, each id is translated
 * through a map at commit.
 *
 * Cost per statement: no allocation and no string work on the hot path
 * (what record_wrap.c makes per node of a graph, it makes once).
 */
#include "record_int.h"

#include <stdlib.h>
#include <string.h>

void rec_lock(sched_rec *r)
{
    if (r->o.threaded)
        pthread_mutex_lock(&r->lock);
}

void rec_unlock(sched_rec *r)
{
    if (r->o.threaded)
        pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------------ */
/* Declarations: ours, then the sink's, and the map between them.      */

static int map_set(uint32_t **map, uint32_t *cap, uint32_t id, uint32_t to, bool *identity)
{
    if (id >= *cap) {
        uint32_t n = *cap ? *cap : 256;
        while (n <= id)
            n *= 2;
        uint32_t *m = realloc(*map, (size_t)n * sizeof *m);
        if (!m)
            return -1;
        *map = m;
        *cap = n;
    }
    (*map)[id] = to;
    if (to != id)
        *identity = false;
    return 0;
}

uint32_t rec_intern(sched_rec *r, const char *s)
{
    uint32_t before = r->t->n_strs;
    uint32_t id = trace_intern_cstr(r->t, s);
    if (id == TRACE_NONE || id < before)
        return id;
    uint32_t sid = r->o.sink.iface->intern(r->o.sink.ctx, s);
    if (map_set(&r->str_map, &r->cap_str, id, sid, &r->identity) != 0)
        return TRACE_NONE;
    return id;
}

uint32_t rec_declare_queue(sched_rec *r, const char *name, trace_queue_kind kind,
                              const char *device)
{
    uint32_t n = rec_intern(r, name), d = device ? rec_intern(r, device) : TRACE_NONE;
    if (n == TRACE_NONE || (device && d == TRACE_NONE))
        return TRACE_NONE;
    uint32_t q = trace_add_queue(r->t, n, kind, d);
    if (q == TRACE_NONE)
        return TRACE_NONE;
    uint32_t sq = r->o.sink.iface->queue(r->o.sink.ctx, name, kind, device);
    return map_set(&r->q_map, &r->cap_q, q, sq, &r->identity) == 0 ? q : TRACE_NONE;
}

uint32_t rec_declare_root(sched_rec *r, const char *name, uint64_t size, trace_loc loc,
                             const char *device, bool pinned)
{
    uint32_t n = rec_intern(r, name), d = device ? rec_intern(r, device) : TRACE_NONE;
    if (n == TRACE_NONE || (device && d == TRACE_NONE) || size == 0)
        return TRACE_NONE;
    uint32_t b = trace_add_root_buffer(r->t, n, size, loc, d, pinned);
    if (b == TRACE_NONE)
        return TRACE_NONE;
    uint32_t sb = r->o.sink.iface->buffer(r->o.sink.ctx, name, size, loc, device, pinned);
    return map_set(&r->buf_map, &r->cap_buf, b, sb, &r->identity) == 0 ? b : TRACE_NONE;
}

static uint32_t declare_view(sched_rec *r, const char *name, uint32_t parent, uint64_t offset,
                             uint64_t size)
{
    if (parent >= r->t->n_buffers || size == 0 || offset > r->t->buffers[parent].size ||
        size > r->t->buffers[parent].size - offset)
        return TRACE_NONE;
    uint32_t n = rec_intern(r, name);
    if (n == TRACE_NONE)
        return TRACE_NONE;
    uint32_t b = trace_add_view(r->t, n, parent, offset, size);
    if (b == TRACE_NONE)
        return TRACE_NONE;
    uint32_t sb = r->o.sink.iface->view(r->o.sink.ctx, name, r->buf_map[parent], offset, size);
    return map_set(&r->buf_map, &r->cap_buf, b, sb, &r->identity) == 0 ? b : TRACE_NONE;
}

uint32_t rec_num(sched_rec *r, uint64_t v)
{
    if (v < REC_SMALL && r->small[v])
        return r->small[v] - 1;
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    uint32_t id = rec_intern(r, buf);
    if (v < REC_SMALL && id != TRACE_NONE)
        r->small[v] = id + 1;
    return id;
}

/* ------------------------------------------------------------------ */
/* The sink rec offers (sched_rec_sink): declarations through us.      */

static uint32_t self_queue(void *ctx, const char *name, trace_queue_kind kind, const char *device)
{
    sched_rec *r = ctx;
    rec_lock(r);
    uint32_t q = rec_declare_queue(r, name, kind, device);
    rec_unlock(r);
    return q;
}

static uint32_t self_buffer(void *ctx, const char *name, uint64_t size, trace_loc loc,
                            const char *device, bool pinned)
{
    sched_rec *r = ctx;
    rec_lock(r);
    uint32_t b = rec_declare_root(r, name, size, loc, device, pinned);
    rec_unlock(r);
    return b;
}

static uint32_t self_view(void *ctx, const char *name, uint32_t parent, uint64_t offset,
                          uint64_t size)
{
    sched_rec *r = ctx;
    rec_lock(r);
    uint32_t b = declare_view(r, name, parent, offset, size);
    rec_unlock(r);
    return b;
}

static uint32_t self_intern(void *ctx, const char *s)
{
    sched_rec *r = ctx;
    rec_lock(r);
    uint32_t id = rec_intern(r, s);
    rec_unlock(r);
    return id;
}


static uint64_t reserve(sched_rec *r, rec_slot **slot);

/* A statement in our ids, with its times (or none). */
static uint64_t self_append(void *ctx, const trace_stmt *s)
{
    sched_rec *r = ctx;
    rec_lock(r);
    rec_slot *slot;
    uint64_t pos = reserve(r, &slot);
    if (pos == SCHED_NO_TICKET) {
        rec_unlock(r);
        return TRACE_NONE;
    }
    slot->s = *s;
    slot->s.n_access = s->n_access < REC_ACC ? s->n_access : REC_ACC;
    slot->s.n_attr = s->n_attr < REC_ATTR ? s->n_attr : REC_ATTR;
    if (slot->s.n_access)
        memcpy(slot->acc, s->access, slot->s.n_access * sizeof *slot->acc);
    if (slot->s.n_attr)
        memcpy(slot->attr, s->attr, slot->s.n_attr * sizeof *slot->attr);
    rec_observe(r, slot);
    rec_done_at(r, pos, s->t, s->dur);
    rec_unlock(r);
    return pos;
}

static int self_meta(void *ctx, const char *key, const char *value)
{
    sched_rec *r = ctx;
    rec_lock(r);
    int rc = -1;
    if (rec_intern(r, key) != TRACE_NONE && rec_intern(r, value) != TRACE_NONE &&
        trace_set_meta(r->t, key, value) == 0)
        rc = r->o.sink.iface->meta ? r->o.sink.iface->meta(r->o.sink.ctx, key, value) : 0;
    rec_unlock(r);
    return rc;
}

static int self_node(void *ctx, const trace_graph_node *n)
{
    sched_rec *r = ctx;
    return r->o.sink.iface->graph_node ? r->o.sink.iface->graph_node(r->o.sink.ctx, n) : 0;
}

static int self_edge(void *ctx, const trace_graph_edge *e)
{
    sched_rec *r = ctx;
    return r->o.sink.iface->graph_edge ? r->o.sink.iface->graph_edge(r->o.sink.ctx, e) : 0;
}

static int self_split(void *ctx, const trace_graph_split *s)
{
    sched_rec *r = ctx;
    return r->o.sink.iface->graph_split ? r->o.sink.iface->graph_split(r->o.sink.ctx, s) : 0;
}

static const sched_sink_iface self_iface = {
    .queue = self_queue, .buffer = self_buffer, .view = self_view, .intern = self_intern,
    .append = self_append, .meta = self_meta, .graph_node = self_node, .graph_edge = self_edge,
    .graph_split = self_split,
};

/* ------------------------------------------------------------------ */
/* Statements in flight.                                               */

rec_slot *rec_slot_at(sched_rec *r, uint64_t pos) { return &r->ring[pos & (r->cap - 1)]; }

/* Reserves the next position; SCHED_NO_TICKET when out of memory. */
static uint64_t reserve(sched_rec *r, rec_slot **slot)
{
    if (r->tail - r->head == r->cap) {
        uint64_t cap = r->cap ? r->cap * 2 : 1024;
        rec_slot *n = malloc(cap * sizeof *n);
        if (!n)
            return SCHED_NO_TICKET;
        for (uint64_t i = r->head; i < r->tail; i++)
            n[i & (cap - 1)] = r->ring[i & (r->cap - 1)];
        free(r->ring);
        r->ring = n;
        r->cap = cap;
    }
    uint64_t pos = r->tail++;
    rec_slot *s = rec_slot_at(r, pos);
    s->more = NULL;
    s->timed = false;
    *slot = s;
    return pos;
}

/* Drops the last reservation (a call that made no statement after all). */
void rec_unreserve(sched_rec *r, uint64_t pos)
{
    if (pos != SCHED_NO_TICKET && pos + 1 == r->tail && pos >= r->head) {
        free(rec_slot_at(r, pos)->more);
        r->tail--;
    }
}

static void point(rec_slot *slot)
{
    slot->s.access = slot->s.n_access ? (slot->more ? slot->more : slot->acc) : NULL;
    slot->s.attr = slot->s.n_attr ? slot->attr : NULL;
}

void rec_observe(sched_rec *r, rec_slot *slot)
{
    if (!r->observer)
        return;
    point(slot);
    trace_pattern_feed(r->observer, r->t, &slot->s, true);
}

static uint32_t map_str(const sched_rec *r, uint32_t id)
{
    return id == TRACE_NONE ? TRACE_NONE : r->str_map[id];
}

/* Hands one statement to the sink, translated when the sink's ids differ. */
static void emit(sched_rec *r, uint64_t pos, rec_slot *slot)
{
    point(slot);
    const trace_stmt *out = &slot->s;
    trace_stmt tr;
    trace_access acc[64];
    trace_attr attr[REC_ATTR];
    if (!r->identity) {
        tr = slot->s;
        tr.queue = r->q_map[tr.queue];
        tr.by = tr.by == TRACE_NONE ? TRACE_NONE : r->q_map[tr.by];
        tr.label = map_str(r, tr.label);
        tr.coll_kind = map_str(r, tr.coll_kind);
        switch (tr.kind) {
        case TRACE_SYNC:
            tr.object = tr.sync_scope == TRACE_SYNC_QUEUE ? r->q_map[tr.object]
                        : tr.sync_scope == TRACE_SYNC_DEVICE ? map_str(r, tr.object)
                                                              : TRACE_NONE;
            break;
        case TRACE_ALLOC:
        case TRACE_FREE:
            tr.object = tr.object == TRACE_NONE ? TRACE_NONE : r->buf_map[tr.object];
            break;
        default:
            tr.object = map_str(r, tr.object);
            break;
        }
        if (tr.n_access > 64)
            tr.n_access = 64;
        for (uint32_t i = 0; i < tr.n_access; i++) {
            acc[i] = slot->s.access[i];
            acc[i].buffer = r->buf_map[acc[i].buffer];
        }
        for (uint32_t i = 0; i < tr.n_attr; i++)
            attr[i] = (trace_attr){ map_str(r, slot->attr[i].key), map_str(r, slot->attr[i].value) };
        tr.access = tr.n_access ? acc : NULL;
        tr.attr = tr.n_attr ? attr : NULL;
        out = &tr;
    }
    uint64_t seq = r->o.sink.iface->append(r->o.sink.ctx, out);
    if (!r->have_seq0 && seq != (uint64_t)TRACE_NONE) {
        r->seq0 = seq - pos;
        r->have_seq0 = true;
    }
    free(slot->more);
    slot->more = NULL;
}

/* Passes on the statements at the head that have their times; all of
 * them with force. */
static void commit(sched_rec *r, bool force)
{
    while (r->head < r->tail) {
        rec_slot *slot = rec_slot_at(r, r->head);
        if (!slot->timed && !force)
            break;
        emit(r, r->head, slot);
        r->head++;
    }
}

/* Times of the statement at pos (TRACE_TIME_NONE: none). */
void rec_done_at(sched_rec *r, uint64_t pos, int64_t t, int64_t dur)
{
    if (pos >= r->head && pos < r->tail) {
        rec_slot *slot = rec_slot_at(r, pos);
        slot->s.t = t;
        slot->s.dur = dur;
        slot->timed = true;
        if (pos == r->head)
            commit(r, false);
    } else if (pos < r->head && r->o.sink.iface->set_time && r->have_seq0) {
        r->o.sink.iface->set_time(r->o.sink.ctx, r->seq0 + pos, t, dur);
    }
}

/* The end of a call: without hold, what it made goes to the sink now. */
void rec_call_end(sched_rec *r)
{
    if (!r->o.hold)
        commit(r, true);
}

/* A new statement of kind on queue (a stream's is submitted by the host). */
rec_slot *rec_stmt(sched_rec *r, uint32_t queue, bool stream, trace_kind kind, uint64_t *pos)
{
    rec_slot *slot;
    *pos = reserve(r, &slot);
    if (*pos == SCHED_NO_TICKET)
        return NULL;
    slot->s = r->blank;
    slot->s.queue = queue;
    slot->s.kind = kind;
    if (stream)
        slot->s.by = r->host;
    return slot;
}

void rec_add_attr(rec_slot *slot, uint32_t key, uint32_t value)
{
    if (slot->s.n_attr < REC_ATTR && key != TRACE_NONE && value != TRACE_NONE)
        slot->attr[slot->s.n_attr++] = (trace_attr){ key, value };
}

void rec_add_token(sched_rec *r, rec_slot *slot)
{
    if (!r->token_ok) {
        r->token = rec_num(r, r->eval);
        r->token_ok = true;
    }
    rec_add_attr(slot, r->k_token, r->token);
}

/* split= of the split the scheduler is in (when it is in one), token=. */
void rec_add_place(sched_rec *r, rec_slot *slot)
{
    if (r->split >= 0)
        rec_add_attr(slot, r->k_split, rec_num(r, (uint64_t)r->split));
    rec_add_token(r, slot);
}

static void set_access(rec_slot *slot, const trace_access *acc, uint32_t n)
{
    slot->s.n_access = n;
    if (n > REC_ACC) {
        slot->more = malloc(n * sizeof *acc);
        if (!slot->more) {
            slot->s.n_access = n = REC_ACC;
        } else {
            memcpy(slot->more, acc, n * sizeof *acc);
            return;
        }
    }
    if (n)
        memcpy(slot->acc, acc, n * sizeof *acc);
}

/* ------------------------------------------------------------------ */
/* The recording.                                                      */

sched_rec *sched_rec_new(const sched_rec_opts *o)
{
    sched_rec *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->o = *o;
    r->identity = true;
    r->cur = SCHED_NO_TICKET;
    r->split = -1;
    r->self = (sched_sink){ &self_iface, r };
    trace_stmt_init(&r->blank);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&r->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    r->t = trace_new();
    if (!r->t)
        goto fail;
    r->host = rec_declare_queue(r, "host", TRACE_QUEUE_HOST, NULL);
    r->k_token = rec_intern(r, "token");
    r->k_split = rec_intern(r, "split");
    r->k_flops = rec_intern(r, "flops");
    r->k_flops_f16 = rec_intern(r, "flops_f16");
    r->k_bytes = rec_intern(r, "bytes");
    r->k_overhead = rec_intern(r, "overhead_ns");
    r->k_op = rec_intern(r, "op");
    r->k_algorithm = rec_intern(r, "algorithm");
    r->v_butterfly = rec_intern(r, "butterfly");
    r->o_tp = rec_intern(r, "tp");
    r->v_allreduce = rec_intern(r, "allreduce");
    r->v_allreduce_bf16 = rec_intern(r, "allreduce_bf16");
    if (r->host == TRACE_NONE || r->v_allreduce_bf16 == TRACE_NONE)
        goto fail;
    return r;
fail:
    sched_rec_free(r);
    return NULL;
}

void sched_rec_free(sched_rec *r)
{
    if (!r)
        return;
    rec_lock(r);
    if (r->t)
        commit(r, true);
    rec_unlock(r);
    for (int i = 0; i < r->n_w; i++)
        rec_wrapped_free(r->w[i]);
    for (int i = 0; i < r->n_gc; i++)
        rec_cache_free(&r->gc[i]);
    free(r->ring);
    free(r->str_map);
    free(r->buf_map);
    free(r->q_map);
    trace_free(r->t);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

sched_sink *sched_rec_sink(sched_rec *r) { return &r->self; }

void sched_rec_set_eval(sched_rec *r, uint64_t eval)
{
    rec_lock(r);
    rec_set_eval(r, eval);
    r->split = -1;
    rec_unlock(r);
}

int sched_rec_host_op(sched_rec *r, const char *label, const trace_access *acc, uint32_t n_acc,
                      int64_t overhead_ns, int64_t bytes, int64_t t, int64_t dur)
{
    rec_lock(r);
    uint64_t pos;
    rec_slot *slot = rec_stmt(r, r->host, false, TRACE_OP, &pos);
    if (slot) {
        slot->s.label = rec_intern(r, label);
        set_access(slot, acc, n_acc);
        rec_add_token(r, slot);
        uint64_t accessed = 0;
        for (uint32_t i = 0; i < n_acc; i++)
            accessed += acc[i].hi - acc[i].lo;
        if (bytes >= 0 && (uint64_t)bytes != accessed)
            rec_add_attr(slot, r->k_bytes, rec_num(r, (uint64_t)bytes));
        if (overhead_ns >= 0)
            rec_add_attr(slot, r->k_overhead, rec_num(r, (uint64_t)overhead_ns));
        rec_observe(r, slot);
        rec_done_at(r, pos, t, dur);
    }
    rec_unlock(r);
    return slot ? 0 : -1;
}

uint32_t sched_rec_queue(sched_rec *r, const char *name, bool stream, const char *device)
{
    rec_lock(r);
    uint32_t q = rec_declare_queue(r, name, stream ? TRACE_QUEUE_STREAM : TRACE_QUEUE_HOST,
                                   stream ? device : NULL);
    rec_unlock(r);
    return q;
}

uint32_t sched_rec_buffer(sched_rec *r, const char *name, uint64_t size)
{
    rec_lock(r);
    uint32_t b = rec_declare_root(r, name, size, TRACE_LOC_HOST, NULL, false);
    rec_unlock(r);
    return b;
}

int sched_rec_add(sched_rec *r, const sched_rec_stmt *s)
{
    rec_lock(r);
    uint64_t pos;
    rec_slot *slot = rec_stmt(r, s->queue, s->stream, s->kind, &pos);
    if (slot) {
        if (s->object)
            slot->s.object = rec_intern(r, s->object);
        if (s->label)
            slot->s.label = rec_intern(r, s->label);
        if (s->kind == TRACE_SEND || s->kind == TRACE_RECV) {
            slot->s.rank = s->rank;
            slot->s.peer = s->peer;
            slot->s.count = s->tag;
        }
        set_access(slot, s->acc, s->n_acc);
        rec_add_token(r, slot);
        rec_observe(r, slot);
        if (s->t >= 0)
            rec_done_at(r, pos, s->t, s->dur);
        rec_call_end(r);
    }
    rec_unlock(r);
    return slot ? 0 : -1;
}

void sched_rec_observe(sched_rec *r, trace_pattern *p)
{
    rec_lock(r);
    r->observer = p;
    rec_unlock(r);
}

const trace *sched_rec_trace(const sched_rec *r) { return r->t; }
uint32_t sched_rec_host(const sched_rec *r) { return r->host; }
uint64_t sched_rec_count(const sched_rec *r) { return r->tail; }

void sched_rec_flush(sched_rec *r)
{
    rec_lock(r);
    commit(r, true);
    rec_unlock(r);
}

/* ------------------------------------------------------------------ */
/* What backends report.                                               */

sched_ticket sched_rec_ticket(const sched_backend *b)
{
    return b->rec ? b->rec->cur : SCHED_NO_TICKET;
}

void sched_rec_done(const sched_backend *b, sched_ticket tk, int64_t t, int64_t dur)
{
    sched_rec *r = b->rec;
    if (!r || tk == SCHED_NO_TICKET)
        return;
    rec_lock(r);
    rec_done_at(r, tk, t, dur);
    rec_unlock(r);
}

static wrapped *wrapper_of(sched_rec *r, const sched_backend *inner)
{
    for (int i = 0; i < r->n_w; i++)
        if (r->w[i]->inner == inner)
            return r->w[i];
    return NULL;
}

void sched_rec_chunk(const sched_backend *b, int k, int thread, uint64_t lo, uint64_t hi,
                     int64_t t, int64_t dur)
{
    sched_rec *r = b->rec;
    if (!r)
        return;
    rec_lock(r);
    wrapped *w = wrapper_of(r, b);
    if (w && w->x && thread >= 0 && thread <= w->n_workers && k >= 0 && k < w->x->n_nodes) {
        const sched_tensor *node = &w->x->graph->tensors[w->x->nodes[k]];
        uint64_t pos;
        rec_slot *slot = rec_stmt(r, w->worker_q[thread], false, TRACE_OP, &pos);
        if (slot) {
            char label[SCHED_NAME_MAX + 16];
            snprintf(label, sizeof label, "%s#%d", node->name, thread);
            slot->s.label = rec_intern(r, label);
            uint32_t n = w->x_nacc[k];
            memcpy(slot->acc, &w->x_acc[k * REC_ACC], n * sizeof *slot->acc);
            /* The write is the last access: narrowed to this chunk. */
            if (n > 0 && slot->acc[n - 1].mode == TRACE_W) {
                slot->acc[n - 1].form = TRACE_REF_RANGE;
                slot->acc[n - 1].lo = lo;
                slot->acc[n - 1].hi = hi;
            }
            slot->s.n_access = n;
            rec_add_attr(slot, r->k_split, rec_num(r, (uint64_t)w->x->split));
            rec_add_token(r, slot);
            rec_observe(r, slot);
            rec_done_at(r, pos, t, dur);
        }
    }
    rec_unlock(r);
}

void sched_rec_barrier(const sched_backend *b, int thread, int64_t t, int64_t dur)
{
    sched_rec *r = b->rec;
    if (!r)
        return;
    rec_lock(r);
    wrapped *w = wrapper_of(r, b);
    if (w && thread >= 0 && thread <= w->n_workers) {
        uint64_t pos;
        rec_slot *slot = rec_stmt(r, w->worker_q[thread], false, TRACE_BARRIER, &pos);
        if (slot) {
            slot->s.object = w->pool;
            slot->s.count = (uint64_t)w->n_workers + 1;
            rec_add_token(r, slot);
            rec_observe(r, slot);
            rec_done_at(r, pos, t, dur);
        }
    }
    rec_unlock(r);
}
