/*
 * record.c -- recording wraps the backend interface.
 *
 * sched_rec_wrap gives the scheduler, for each backend, a wrapper that
 * forwards every call and turns it into trace statements. It is the one
 * place that knows the trace conventions of a run (docs/trace-format.md):
 *
 *   queues      `host` (the thread that drives the scheduler); one stream
 *               queue per asynchronous backend, named after its device
 *               (`gpu0`, `cs0`), submitted by=host; a backend's worker
 *               threads, when it has them, are host queues `cpu.t1`, ...
 *   buffers     each buffer_alloc is a root buffer (host, or device= its
 *               device; pinned as the backend says); each tensor is a view
 *               of its buffer (sched_tensor_view), so allocator reuse shows
 *               as overlapping views;
 *   statements  set_async, get_async, copy_async: a `copy` on the
 *               backend's stream; copy_sync: a `copy` on the host;
 *               synchronize: `sync STREAM`; event_record / event_wait: a
 *               `record` / `wait` on the stream; event_synchronize: the
 *               host's `wait`; graph_compute: one `op` per node on the
 *               stream (or the host, for a synchronous backend), an
 *               all_reduce a `collective tp allreduce size=N` (bf16: an
 *               `allreduce_bf16` on the wire buffer between the ops
 *               NODE.to_bf16 and NODE.from_bf16);
 *   attributes  token= on every statement (the evaluation), split= on ops
 *               and collectives, and what a device model prices an op by
 *               and the trace cannot show (flops= or flops_f16=, bytes=
 *               when it moves other bytes than it accesses, algorithm=
 *               butterfly, overhead_ns= of the program's own host code).
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
 * statements pass unchanged; when they do not (the null sink), each id is
 * translated through a map at commit.
 *
 * Cost per statement: no allocation and no string work on the hot path.
 * An op's label, cost attributes and the like are made once per node of a
 * graph (a per-graph cache), token= once per evaluation, small numbers
 * once per run.
 */
#include "sched.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define REC_MAX_BACKENDS 16
#define REC_ACC (SCHED_MAX_SRC + 1)     /* accesses kept inline in a slot */
#define REC_ATTR 6
#define REC_SMALL 4096                  /* numbers interned once, by value */
#define REC_GRAPHS 8
#define REC_SLOTS 8                     /* pipeline slots (sched_options.n_copies <= 8) */

/* A statement in flight: ids of the recording's own trace. */
typedef struct rec_slot {
    trace_stmt s;
    trace_access acc[REC_ACC];
    trace_attr attr[REC_ATTR];
    trace_access *more;             /* more than REC_ACC accesses (owned) */
    bool timed;
} rec_slot;

/* What a node's statements need, made on first use. */
typedef struct node_info {
    bool ready;
    uint8_t n_cost;
    uint32_t label, label_to, label_from;
    trace_attr cost[2];             /* flops= / flops_f16=, bytes= */
} node_info;

typedef struct graph_cache {
    const sched_graph *g;
    const void *sched;              /* the scheduler that runs it */
    const sched_tensor *tensors;
    int32_t n;
    node_info *info;
    /* Per pipeline slot, each node's accesses (REC_ACC a node) and their
     * number (0: not made yet): they depend on the slot alone. */
    trace_access *acc[REC_SLOTS];
    uint8_t *n_acc[REC_SLOTS];
} graph_cache;

typedef struct wrapped {
    sched_backend outer;            /* what the scheduler drives; outer.ctx = this */
    sched_backend_iface iface;      /* inner's members, wrapped where inner has them */
    sched_backend *inner;
    struct sched_rec *rec;
    bool stream;                    /* an asynchronous device with a stream queue */
    uint32_t queue;                 /* its stream queue, or the host's */
    char dev[32];                   /* its device's trace name */
    int n_workers;
    uint32_t *worker_q;             /* [0] the host, [1..n_workers] its threads */
    uint32_t pool;                  /* the barrier name of its threads */
    sched_ticket *tickets;          /* 3 per node entry of the exec in progress */
    int cap_tickets;
    /* Worker level: the exec in progress and each node entry's accesses. */
    const sched_exec *x;
    trace_access *x_acc;            /* REC_ACC per entry */
    uint8_t *x_nacc;
    int cap_x;
} wrapped;

struct sched_rec {
    sched_rec_opts o;
    trace *t;                       /* declarations and strings, our ids */
    sched_sink self;
    pthread_mutex_t lock;           /* recursive; taken only when threaded */
    /* Our ids -> the sink's. */
    uint32_t *str_map, *buf_map, *q_map;
    uint32_t cap_str, cap_buf, cap_q;
    bool identity;
    /* Statements in flight: positions [head, tail) of a ring. */
    rec_slot *ring;
    uint64_t head, tail, cap;
    uint64_t seq0;                  /* the sink's seq of position 0 */
    bool have_seq0;
    uint32_t host;
    uint64_t eval;
    uint32_t token;                 /* the value of token= for eval */
    bool token_ok;
    int split;                      /* the split the scheduler is in, -1 */
    uint32_t k_token, k_split, k_flops, k_flops_f16, k_bytes, k_overhead, k_algorithm;
    uint32_t v_butterfly, o_tp, v_allreduce, v_allreduce_bf16;
    uint32_t small[REC_SMALL];      /* id + 1 of small numbers */
    wrapped *w[REC_MAX_BACKENDS];
    int n_w;
    graph_cache gc[REC_GRAPHS];
    int n_gc;
    sched_ticket cur;               /* the ticket of the call in progress */
    trace_pattern *observer;
    trace_stmt blank;               /* trace_stmt_init's, copied into new statements */
};

static void lock(sched_rec *r)
{
    if (r->o.threaded)
        pthread_mutex_lock(&r->lock);
}

static void unlock(sched_rec *r)
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

static uint32_t intern(sched_rec *r, const char *s)
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

static uint32_t declare_queue(sched_rec *r, const char *name, trace_queue_kind kind,
                              const char *device)
{
    uint32_t n = intern(r, name), d = device ? intern(r, device) : TRACE_NONE;
    if (n == TRACE_NONE || (device && d == TRACE_NONE))
        return TRACE_NONE;
    uint32_t q = trace_add_queue(r->t, n, kind, d);
    if (q == TRACE_NONE)
        return TRACE_NONE;
    uint32_t sq = r->o.sink.iface->queue(r->o.sink.ctx, name, kind, device);
    return map_set(&r->q_map, &r->cap_q, q, sq, &r->identity) == 0 ? q : TRACE_NONE;
}

static uint32_t declare_root(sched_rec *r, const char *name, uint64_t size, trace_loc loc,
                             const char *device, bool pinned)
{
    uint32_t n = intern(r, name), d = device ? intern(r, device) : TRACE_NONE;
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
    uint32_t n = intern(r, name);
    if (n == TRACE_NONE)
        return TRACE_NONE;
    uint32_t b = trace_add_view(r->t, n, parent, offset, size);
    if (b == TRACE_NONE)
        return TRACE_NONE;
    uint32_t sb = r->o.sink.iface->view(r->o.sink.ctx, name, r->buf_map[parent], offset, size);
    return map_set(&r->buf_map, &r->cap_buf, b, sb, &r->identity) == 0 ? b : TRACE_NONE;
}

static uint32_t num(sched_rec *r, uint64_t v)
{
    if (v < REC_SMALL && r->small[v])
        return r->small[v] - 1;
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    uint32_t id = intern(r, buf);
    if (v < REC_SMALL && id != TRACE_NONE)
        r->small[v] = id + 1;
    return id;
}

/* ------------------------------------------------------------------ */
/* The sink rec offers (sched_rec_sink): declarations through us.      */

static uint32_t self_queue(void *ctx, const char *name, trace_queue_kind kind, const char *device)
{
    sched_rec *r = ctx;
    lock(r);
    uint32_t q = declare_queue(r, name, kind, device);
    unlock(r);
    return q;
}

static uint32_t self_buffer(void *ctx, const char *name, uint64_t size, trace_loc loc,
                            const char *device, bool pinned)
{
    sched_rec *r = ctx;
    lock(r);
    uint32_t b = declare_root(r, name, size, loc, device, pinned);
    unlock(r);
    return b;
}

static uint32_t self_view(void *ctx, const char *name, uint32_t parent, uint64_t offset,
                          uint64_t size)
{
    sched_rec *r = ctx;
    lock(r);
    uint32_t b = declare_view(r, name, parent, offset, size);
    unlock(r);
    return b;
}

static uint32_t self_intern(void *ctx, const char *s)
{
    sched_rec *r = ctx;
    lock(r);
    uint32_t id = intern(r, s);
    unlock(r);
    return id;
}

static uint64_t reserve(sched_rec *r, rec_slot **slot);
static void done_at(sched_rec *r, uint64_t pos, int64_t t, int64_t dur);
static void observe(sched_rec *r, rec_slot *slot);

/* A statement in our ids, with its times (or none). */
static uint64_t self_append(void *ctx, const trace_stmt *s)
{
    sched_rec *r = ctx;
    lock(r);
    rec_slot *slot;
    uint64_t pos = reserve(r, &slot);
    if (pos == SCHED_NO_TICKET) {
        unlock(r);
        return TRACE_NONE;
    }
    slot->s = *s;
    slot->s.n_access = s->n_access < REC_ACC ? s->n_access : REC_ACC;
    slot->s.n_attr = s->n_attr < REC_ATTR ? s->n_attr : REC_ATTR;
    if (slot->s.n_access)
        memcpy(slot->acc, s->access, slot->s.n_access * sizeof *slot->acc);
    if (slot->s.n_attr)
        memcpy(slot->attr, s->attr, slot->s.n_attr * sizeof *slot->attr);
    observe(r, slot);
    done_at(r, pos, s->t, s->dur);
    unlock(r);
    return pos;
}

static int self_meta(void *ctx, const char *key, const char *value)
{
    sched_rec *r = ctx;
    lock(r);
    int rc = -1;
    if (intern(r, key) != TRACE_NONE && intern(r, value) != TRACE_NONE &&
        trace_set_meta(r->t, key, value) == 0)
        rc = r->o.sink.iface->meta ? r->o.sink.iface->meta(r->o.sink.ctx, key, value) : 0;
    unlock(r);
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

static rec_slot *slot_at(sched_rec *r, uint64_t pos) { return &r->ring[pos & (r->cap - 1)]; }

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
    rec_slot *s = slot_at(r, pos);
    s->more = NULL;
    s->timed = false;
    *slot = s;
    return pos;
}

/* Drops the last reservation (a call that made no statement after all). */
static void unreserve(sched_rec *r, uint64_t pos)
{
    if (pos != SCHED_NO_TICKET && pos + 1 == r->tail && pos >= r->head) {
        free(slot_at(r, pos)->more);
        r->tail--;
    }
}

static void point(rec_slot *slot)
{
    slot->s.access = slot->s.n_access ? (slot->more ? slot->more : slot->acc) : NULL;
    slot->s.attr = slot->s.n_attr ? slot->attr : NULL;
}

static void observe(sched_rec *r, rec_slot *slot)
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
        rec_slot *slot = slot_at(r, r->head);
        if (!slot->timed && !force)
            break;
        emit(r, r->head, slot);
        r->head++;
    }
}

/* Times of the statement at pos (TRACE_TIME_NONE: none). */
static void done_at(sched_rec *r, uint64_t pos, int64_t t, int64_t dur)
{
    if (pos >= r->head && pos < r->tail) {
        rec_slot *slot = slot_at(r, pos);
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
static void call_end(sched_rec *r)
{
    if (!r->o.hold)
        commit(r, true);
}

/* A new statement of kind on queue (a stream's is submitted by the host). */
static rec_slot *stmt(sched_rec *r, uint32_t queue, bool stream, trace_kind kind, uint64_t *pos)
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

static void add_attr(rec_slot *slot, uint32_t key, uint32_t value)
{
    if (slot->s.n_attr < REC_ATTR && key != TRACE_NONE && value != TRACE_NONE)
        slot->attr[slot->s.n_attr++] = (trace_attr){ key, value };
}

static void add_token(sched_rec *r, rec_slot *slot)
{
    if (!r->token_ok) {
        r->token = num(r, r->eval);
        r->token_ok = true;
    }
    add_attr(slot, r->k_token, r->token);
}

/* split= of the split the scheduler is in (when it is in one), token=. */
static void add_place(sched_rec *r, rec_slot *slot)
{
    if (r->split >= 0)
        add_attr(slot, r->k_split, num(r, (uint64_t)r->split));
    add_token(r, slot);
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
/* Tensors, nodes and graphs.                                          */

static uint32_t view_of(sched_rec *r, sched_tensor *t) { return sched_tensor_view(&r->self, t); }

static void cache_free(graph_cache *gc)
{
    free(gc->info);
    gc->info = NULL;
    for (int c = 0; c < REC_SLOTS; c++) {
        free(gc->acc[c]);
        free(gc->n_acc[c]);
        gc->acc[c] = NULL;
        gc->n_acc[c] = NULL;
    }
}

/* The cache of the graph x runs; NULL when out of memory. Keyed by the
 * graph, its scheduler and its tensor array, which outlive the runs. */
static graph_cache *cache_of(sched_rec *r, const sched_exec *x)
{
    const sched_graph *g = x->graph;
    for (int i = 0; i < r->n_gc; i++)
        if (r->gc[i].g == g && r->gc[i].sched == x->sched && r->gc[i].tensors == g->tensors &&
            r->gc[i].n == g->n_tensors)
            return &r->gc[i];
    int slot = r->n_gc < REC_GRAPHS ? r->n_gc++ : 0;
    graph_cache *gc = &r->gc[slot];
    cache_free(gc);
    gc->info = calloc((size_t)g->n_tensors + 1, sizeof *gc->info);
    gc->g = gc->info ? g : NULL;
    gc->sched = x->sched;
    gc->tensors = g->tensors;
    gc->n = gc->info ? g->n_tensors : 0;
    return gc->info ? gc : NULL;
}

/* A read of source tensor `orig` as node reads it through `act` (its copy
 * when it is a split input): a view read through the copy of its base
 * reads the view's bytes of the copy. */
static trace_access read_of(sched_rec *r, const sched_graph *g, int32_t orig, int32_t act)
{
    sched_tensor *ot = &g->tensors[orig], *at = &g->tensors[act];
    uint64_t extra = (act != orig && ot->view_src >= 0) ? ot->view_offs : 0;
    uint64_t whole = sched_tensor_nbytes(at), lo = extra, hi = extra + sched_tensor_nbytes(ot);
    if (hi > whole)
        hi = whole;
    bool full = lo == 0 && hi == whole;
    return (trace_access){ view_of(r, at), TRACE_R, full ? TRACE_REF_WHOLE : TRACE_REF_RANGE, lo,
                           hi };
}

/* The accesses of node: a read of each source (a cpy's second source is
 * its destination: written, not read), then the write of its bytes. */
static uint32_t node_accesses(sched_rec *r, const sched_exec *x, int32_t node, trace_access *acc)
{
    sched_tensor *t = &x->graph->tensors[node];
    uint32_t n = 0;
    for (int i = 0; i < SCHED_MAX_SRC; i++) {
        if (t->src[i] < 0 || (t->op == SCHED_OP_CPY && i == 1))
            continue;
        int32_t act = x->src_of ? x->src_of(x, node, i) : t->src[i];
        acc[n++] = read_of(r, x->graph, t->src[i], act);
    }
    acc[n++] = (trace_access){ view_of(r, t), TRACE_W, TRACE_REF_WHOLE, 0, sched_tensor_nbytes(t) };
    return n;
}

/* The accesses of node in x's slot: from the graph's cache (made on first
 * use), else made into tmp. */
static uint32_t accesses_of(sched_rec *r, graph_cache *gc, const sched_exec *x, int32_t node,
                            trace_access *tmp, const trace_access **out)
{
    int c = x->cur_copy;
    if (c >= 0 && c < REC_SLOTS && !gc->acc[c]) {
        gc->acc[c] = malloc(((size_t)gc->n + 1) * REC_ACC * sizeof *gc->acc[c]);
        gc->n_acc[c] = calloc((size_t)gc->n + 1, sizeof *gc->n_acc[c]);
        if (!gc->acc[c] || !gc->n_acc[c]) {
            free(gc->acc[c]);
            free(gc->n_acc[c]);
            gc->acc[c] = NULL;
            gc->n_acc[c] = NULL;
        }
    }
    if (c < 0 || c >= REC_SLOTS || !gc->acc[c]) {
        *out = tmp;
        return node_accesses(r, x, node, tmp);
    }
    trace_access *a = &gc->acc[c][(size_t)node * REC_ACC];
    if (!gc->n_acc[c][node])
        gc->n_acc[c][node] = (uint8_t)node_accesses(r, x, node, a);
    *out = a;
    return gc->n_acc[c][node];
}

static node_info *info_of(sched_rec *r, graph_cache *gc, const sched_graph *g, int32_t node,
                          const trace_access *acc, uint32_t n_acc)
{
    node_info *ni = &gc->info[node];
    if (ni->ready)
        return ni;
    const sched_tensor *t = &g->tensors[node];
    if (!ni->label)
        ni->label = intern(r, t->name) + 1;
    uint64_t flops = sched_node_flops(g, t), bytes = sched_node_bytes(g, t), accessed = 0;
    for (uint32_t i = 0; i < n_acc; i++)
        accessed += acc[i].hi - acc[i].lo;
    if (flops > 0)
        ni->cost[ni->n_cost++] = (trace_attr){ sched_node_half(g, t) ? r->k_flops_f16 : r->k_flops,
                                               num(r, flops) };
    if (bytes != accessed)
        ni->cost[ni->n_cost++] = (trace_attr){ r->k_bytes, num(r, bytes) };
    if (t->op == SCHED_OP_ALL_REDUCE) {
        char label[SCHED_NAME_MAX + 16];
        snprintf(label, sizeof label, "%s.to_bf16", t->name);
        ni->label_to = intern(r, label);
        snprintf(label, sizeof label, "%s.from_bf16", t->name);
        ni->label_from = intern(r, label);
    }
    ni->ready = true;
    return ni;
}

/* ------------------------------------------------------------------ */
/* The wrapped calls.                                                  */

static wrapped *wr(sched_backend *b) { return b->ctx; }

static const char *w_get_name(sched_backend *b) { return wr(b)->inner->iface->get_name(wr(b)->inner); }

static sched_device_kind w_device_kind(sched_backend *b)
{
    return wr(b)->inner->iface->device_kind(wr(b)->inner);
}

static const char *w_trace_name(sched_backend *b) { return wr(b)->dev; }

static bool w_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    return wr(b)->inner->iface->supports_op(wr(b)->inner, g, t);
}

static bool w_supports_buffer(sched_backend *b, const sched_buffer *buf)
{
    return wr(b)->inner->iface->supports_buffer(wr(b)->inner, buf);
}

static sched_buffer *w_buffer_alloc(sched_backend *b, const char *name, uint64_t size,
                                    sched_buffer_usage usage)
{
    wrapped *w = wr(b);
    sched_buffer *buf = w->inner->iface->buffer_alloc(w->inner, name, size, usage);
    if (!buf)
        return NULL;
    sched_rec *r = w->rec;
    lock(r);
    buf->trace_id = declare_root(r, name, buf->size ? buf->size : 1,
                                 buf->host ? TRACE_LOC_HOST : TRACE_LOC_DEVICE,
                                 buf->host ? NULL : w->dev, buf->pinned);
    unlock(r);
    buf->backend = b;
    return buf;
}

static void w_buffer_free(sched_backend *b, sched_buffer *buf)
{
    wr(b)->inner->iface->buffer_free(wr(b)->inner, buf);
}

/* A copy src -> dst executed by queue (the host's, or a stream's). */
static rec_slot *copy_stmt(sched_rec *r, uint32_t queue, bool stream, sched_tensor *src,
                           sched_tensor *dst, uint64_t *pos)
{
    rec_slot *slot = stmt(r, queue, stream, TRACE_COPY, pos);
    if (!slot)
        return NULL;
    uint64_t ns = sched_tensor_nbytes(src), nd = sched_tensor_nbytes(dst), n = ns < nd ? ns : nd;
    slot->s.label = intern(r, dst->name);
    slot->acc[0] = (trace_access){ view_of(r, src), TRACE_R,
                                   n == ns ? TRACE_REF_WHOLE : TRACE_REF_RANGE, 0, n };
    slot->acc[1] = (trace_access){ view_of(r, dst), TRACE_W,
                                   n == nd ? TRACE_REF_WHOLE : TRACE_REF_RANGE, 0, n };
    slot->s.n_access = 2;
    return slot;
}

typedef enum { ASYNC_SET, ASYNC_GET, ASYNC_COPY } async_kind;

static int async_copy(sched_backend *b, sched_backend *other, sched_tensor *src, sched_tensor *dst,
                      async_kind kind)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    lock(r);
    uint64_t pos;
    rec_slot *slot = copy_stmt(r, w->queue, w->stream, src, dst, &pos);
    if (slot)
        add_place(r, slot);
    if (slot && kind != ASYNC_COPY)
        observe(r, slot);
    r->cur = slot ? pos : SCHED_NO_TICKET;
    unlock(r);
    int rc;
    if (kind == ASYNC_SET)
        rc = w->inner->iface->set_async(w->inner, src, dst);
    else if (kind == ASYNC_GET)
        rc = w->inner->iface->get_async(w->inner, src, dst);
    else
        rc = w->inner->iface->copy_async(w->inner, other ? other : b, src, dst);
    lock(r);
    r->cur = SCHED_NO_TICKET;
    if (slot && kind == ASYNC_COPY) {
        if (rc == 1)
            observe(r, slot_at(r, pos));
        else
            unreserve(r, pos);
    }
    call_end(r);
    unlock(r);
    return rc;
}

static int w_set_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return async_copy(b, NULL, src, dst, ASYNC_SET);
}

static int w_get_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    return async_copy(b, NULL, src, dst, ASYNC_GET);
}

/* The backend a wrapped other wraps (the one its peer knows). */
static sched_backend *inner_of(sched_backend *b)
{
    return b && b->iface->get_name == w_get_name ? wr(b)->inner : b;
}

static int w_copy_async(sched_backend *b, sched_backend *other, sched_tensor *src,
                        sched_tensor *dst)
{
    return async_copy(b, inner_of(other), src, dst, ASYNC_COPY);
}

/* A host statement around a blocking call: the host's clock before and after. */
typedef struct host_call {
    uint64_t pos;
    int64_t t0;
} host_call;

static host_call host_begin(sched_rec *r, rec_slot *slot, uint64_t pos)
{
    if (slot) {
        add_place(r, slot);
        observe(r, slot);
    }
    return (host_call){ slot ? pos : SCHED_NO_TICKET, r->o.now(r->o.now_ctx) };
}

static void host_end(sched_rec *r, host_call c)
{
    int64_t t1 = r->o.now(r->o.now_ctx);
    lock(r);
    if (c.pos != SCHED_NO_TICKET)
        done_at(r, c.pos, c.t0, t1 - c.t0);
    call_end(r);
    unlock(r);
}

static int w_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    lock(r);
    uint64_t pos;
    rec_slot *slot = copy_stmt(r, r->host, false, src, dst, &pos);
    host_call c = host_begin(r, slot, pos);
    unlock(r);
    int rc = w->inner->iface->copy_sync(w->inner, src, dst);
    host_end(r, c);
    return rc;
}

static int w_synchronize(sched_backend *b)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    lock(r);
    uint64_t pos;
    rec_slot *slot = stmt(r, r->host, false, TRACE_SYNC, &pos);
    if (slot) {
        slot->s.sync_scope = TRACE_SYNC_QUEUE;
        slot->s.object = w->queue;
    }
    host_call c = host_begin(r, slot, pos);
    unlock(r);
    int rc = w->inner->iface->synchronize(w->inner);
    host_end(r, c);
    return rc;
}

static sched_event *w_event_new(sched_backend *b, const char *name)
{
    wrapped *w = wr(b);
    sched_event *ev = w->inner->iface->event_new(w->inner, name);
    if (ev) {
        lock(w->rec);
        ev->name = intern(w->rec, name);
        unlock(w->rec);
    }
    return ev;
}

static void w_event_free(sched_backend *b, sched_event *ev)
{
    wr(b)->inner->iface->event_free(wr(b)->inner, ev);
}

/* A record or wait of ev on b's stream. */
static int event_call(sched_backend *b, sched_event *ev, trace_kind kind)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    lock(r);
    uint64_t pos;
    rec_slot *slot = stmt(r, w->queue, w->stream, kind, &pos);
    if (slot) {
        slot->s.object = ev->name;
        add_place(r, slot);
        observe(r, slot);
    }
    r->cur = slot ? pos : SCHED_NO_TICKET;
    unlock(r);
    int rc = kind == TRACE_RECORD ? w->inner->iface->event_record(w->inner, ev)
                                  : w->inner->iface->event_wait(w->inner, ev);
    lock(r);
    r->cur = SCHED_NO_TICKET;
    call_end(r);
    unlock(r);
    return rc;
}

static int w_event_record(sched_backend *b, sched_event *ev) { return event_call(b, ev, TRACE_RECORD); }
static int w_event_wait(sched_backend *b, sched_event *ev) { return event_call(b, ev, TRACE_WAIT); }

static int w_event_synchronize(sched_backend *b, sched_event *ev)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    lock(r);
    uint64_t pos;
    rec_slot *slot = stmt(r, r->host, false, TRACE_WAIT, &pos);
    if (slot)
        slot->s.object = ev->name;
    host_call c = host_begin(r, slot, pos);
    unlock(r);
    int rc = w->inner->iface->event_synchronize(w->inner, ev);
    host_end(r, c);
    return rc;
}

static void set_eval(sched_rec *r, uint64_t eval)
{
    if (eval != r->eval || !r->token_ok) {
        r->eval = eval;
        r->token_ok = false;
    }
}

static void w_split_begin(sched_backend *b, int split, uint64_t eval)
{
    sched_rec *r = wr(b)->rec;
    lock(r);
    set_eval(r, eval);
    r->split = split;
    unlock(r);
    if (wr(b)->inner->iface->split_begin)
        wr(b)->inner->iface->split_begin(wr(b)->inner, split, eval);
}

/* The statements of all_reduce node entry k: [to_bf16,] the collective
 * [, from_bf16]; acc: the node's (r:SRC, w:DST). */
static void allreduce_stmts(sched_rec *r, wrapped *w, const sched_exec *x, node_info *ni,
                            int32_t node, const trace_access *acc, uint32_t n_acc,
                            sched_ticket *tk)
{
    bool bf16 = sched_exec_bf16(x, node) && x->wire;
    int rank, n;
    sched_exec_group(x, node, &rank, &n);
    const sched_tensor *t = &x->graph->tensors[node];
    uint64_t wire = (uint64_t)sched_tensor_nelements(&x->graph->tensors[t->src[0]]) *
                    sched_dtype_size(SCHED_BF16);
    trace_access on_wire = { bf16 ? x->wire->trace_id : TRACE_NONE, TRACE_RW, TRACE_REF_RANGE, 0,
                             wire };
    uint64_t pos;
    rec_slot *slot;
    uint32_t split = num(r, (uint64_t)x->split);
    if (bf16 && (slot = stmt(r, w->queue, w->stream, TRACE_OP, &pos))) {
        slot->s.label = ni->label_to;
        slot->acc[0] = acc[0];
        slot->acc[1] = on_wire;
        slot->acc[1].mode = TRACE_W;
        slot->s.n_access = 2;
        add_attr(slot, r->k_split, split);
        add_token(r, slot);
        observe(r, slot);
        tk[1] = pos;
    }
    if ((slot = stmt(r, w->queue, w->stream, TRACE_COLLECTIVE, &pos))) {
        slot->s.object = r->o_tp;
        slot->s.coll_kind = bf16 ? r->v_allreduce_bf16 : r->v_allreduce;
        slot->s.count = (uint64_t)(n > 0 ? n : 1);     /* size=N: the participants */
        slot->s.label = ni->label - 1;
        if (bf16) {
            slot->acc[0] = on_wire;
            slot->s.n_access = 1;
        } else {
            slot->acc[0] = acc[0];
            slot->acc[1] = acc[n_acc - 1];
            slot->s.n_access = 2;
        }
        add_attr(slot, r->k_split, split);
        add_token(r, slot);
        /* The ring is replay's default; the trace names any other algorithm. */
        if (x->allreduce == SCHED_ALLREDUCE_BUTTERFLY && n > 1)
            add_attr(slot, r->k_algorithm, r->v_butterfly);
        observe(r, slot);
        tk[0] = pos;
    }
    if (bf16 && (slot = stmt(r, w->queue, w->stream, TRACE_OP, &pos))) {
        slot->s.label = ni->label_from;
        slot->acc[0] = on_wire;
        slot->acc[0].mode = TRACE_R;
        slot->acc[1] = acc[n_acc - 1];
        slot->s.n_access = 2;
        add_attr(slot, r->k_split, split);
        add_token(r, slot);
        observe(r, slot);
        tk[2] = pos;
    }
}

static int grow_exec(wrapped *w, int n_nodes)
{
    if (3 * n_nodes > w->cap_tickets) {
        int cap = 3 * n_nodes + 48;
        sched_ticket *t = realloc(w->tickets, (size_t)cap * sizeof *t);
        if (!t)
            return -1;
        w->tickets = t;
        w->cap_tickets = cap;
    }
    if (w->n_workers > 0 && n_nodes > w->cap_x) {
        int cap = n_nodes + 16;
        trace_access *a = realloc(w->x_acc, (size_t)cap * REC_ACC * sizeof *a);
        if (a)
            w->x_acc = a;
        uint8_t *na = realloc(w->x_nacc, (size_t)cap * sizeof *na);
        if (na)
            w->x_nacc = na;
        if (!a || !na)
            return -1;
        w->cap_x = cap;
    }
    return 0;
}

static int w_graph_compute(sched_backend *b, const sched_exec *x)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    lock(r);
    set_eval(r, x->eval);
    graph_cache *gc = cache_of(r, x);
    if (!gc || grow_exec(w, x->n_nodes) != 0) {
        unlock(r);
        return -1;
    }
    uint32_t split = num(r, (uint64_t)x->split);
    for (int k = 0; k < x->n_nodes; k++) {
        sched_ticket *tk = &w->tickets[3 * k];
        tk[0] = tk[1] = tk[2] = SCHED_NO_TICKET;
        int32_t node = x->nodes[k];
        const sched_tensor *t = &x->graph->tensors[node];
        if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
            continue;
        trace_access tmp[REC_ACC];
        const trace_access *acc;
        uint32_t n = accesses_of(r, gc, x, node, tmp, &acc);
        if (w->n_workers > 0) {
            memcpy(&w->x_acc[k * REC_ACC], acc, n * sizeof *acc);
            w->x_nacc[k] = (uint8_t)n;
            continue;
        }
        node_info *ni = info_of(r, gc, x->graph, node, acc, n);
        if (t->op == SCHED_OP_ALL_REDUCE) {
            allreduce_stmts(r, w, x, ni, node, acc, n, tk);
            continue;
        }
        uint64_t pos;
        rec_slot *slot = stmt(r, w->queue, w->stream, TRACE_OP, &pos);
        if (!slot)
            continue;
        slot->s.label = ni->label - 1;
        memcpy(slot->acc, acc, n * sizeof *acc);
        slot->s.n_access = n;
        add_attr(slot, r->k_split, split);
        add_token(r, slot);
        for (int c = 0; c < ni->n_cost; c++)
            add_attr(slot, ni->cost[c].key, ni->cost[c].value);
        observe(r, slot);
        tk[0] = pos;
    }
    w->x = x;
    unlock(r);
    sched_exec rx = *x;
    rx.tickets = w->tickets;
    int rc = w->inner->iface->graph_compute(w->inner, &rx);
    lock(r);
    w->x = NULL;
    call_end(r);
    unlock(r);
    return rc;
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
    r->host = declare_queue(r, "host", TRACE_QUEUE_HOST, NULL);
    r->k_token = intern(r, "token");
    r->k_split = intern(r, "split");
    r->k_flops = intern(r, "flops");
    r->k_flops_f16 = intern(r, "flops_f16");
    r->k_bytes = intern(r, "bytes");
    r->k_overhead = intern(r, "overhead_ns");
    r->k_algorithm = intern(r, "algorithm");
    r->v_butterfly = intern(r, "butterfly");
    r->o_tp = intern(r, "tp");
    r->v_allreduce = intern(r, "allreduce");
    r->v_allreduce_bf16 = intern(r, "allreduce_bf16");
    if (r->host == TRACE_NONE || r->v_allreduce_bf16 == TRACE_NONE)
        goto fail;
    return r;
fail:
    sched_rec_free(r);
    return NULL;
}

static void wrapped_free(wrapped *w)
{
    if (!w)
        return;
    free(w->worker_q);
    free(w->tickets);
    free(w->x_acc);
    free(w->x_nacc);
    free(w);
}

void sched_rec_free(sched_rec *r)
{
    if (!r)
        return;
    lock(r);
    if (r->t)
        commit(r, true);
    unlock(r);
    for (int i = 0; i < r->n_w; i++)
        wrapped_free(r->w[i]);
    for (int i = 0; i < r->n_gc; i++)
        cache_free(&r->gc[i]);
    free(r->ring);
    free(r->str_map);
    free(r->buf_map);
    free(r->q_map);
    trace_free(r->t);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

sched_backend *sched_rec_wrap(sched_rec *r, sched_backend *inner)
{
    if (r->n_w == REC_MAX_BACKENDS)
        return NULL;
    wrapped *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    const sched_backend_iface *in = inner->iface;
    w->inner = inner;
    w->rec = r;
    w->stream = in->synchronize != NULL;
    const char *name = in->trace_name ? in->trace_name(inner) : NULL;
    if (!name) {
        const char *n = in->get_name(inner);
        size_t i = 0;
        for (; n[i] && i + 1 < sizeof w->dev; i++)
            w->dev[i] = (char)tolower((unsigned char)n[i]);
        w->dev[i] = '\0';
    } else {
        snprintf(w->dev, sizeof w->dev, "%s", name);
    }
    /* Wrap exactly what inner has: NULL members keep their meaning. */
    sched_backend_iface *o = &w->iface;
    o->get_name = w_get_name;
    o->device_kind = w_device_kind;
    o->trace_name = w_trace_name;
    o->supports_op = in->supports_op ? w_supports_op : NULL;
    o->supports_buffer = in->supports_buffer ? w_supports_buffer : NULL;
    o->buffer_alloc = w_buffer_alloc;
    o->buffer_free = in->buffer_free ? w_buffer_free : NULL;
    o->set_async = in->set_async ? w_set_async : NULL;
    o->get_async = in->get_async ? w_get_async : NULL;
    o->copy_async = in->copy_async ? w_copy_async : NULL;
    o->copy_sync = w_copy_sync;
    o->synchronize = in->synchronize ? w_synchronize : NULL;
    o->graph_compute = w_graph_compute;
    o->event_new = in->event_new ? w_event_new : NULL;
    o->event_free = in->event_free ? w_event_free : NULL;
    o->event_record = in->event_record ? w_event_record : NULL;
    o->event_wait = in->event_wait ? w_event_wait : NULL;
    o->event_synchronize = in->event_synchronize ? w_event_synchronize : NULL;
    o->split_begin = w_split_begin;
    w->outer.iface = o;
    w->outer.ctx = w;
    lock(r);
    w->queue = w->stream ? declare_queue(r, w->dev, TRACE_QUEUE_STREAM, w->dev) : r->host;
    w->n_workers = in->workers ? in->workers(inner) : 0;
    if (w->n_workers > 0) {
        w->worker_q = calloc((size_t)w->n_workers + 1, sizeof *w->worker_q);
        if (w->worker_q) {
            w->worker_q[0] = r->host;
            for (int i = 1; i <= w->n_workers; i++) {
                char qn[48];
                snprintf(qn, sizeof qn, "%s.t%d", w->dev, i);
                w->worker_q[i] = declare_queue(r, qn, TRACE_QUEUE_HOST, NULL);
            }
            char pn[48];
            snprintf(pn, sizeof pn, "%s.pool", w->dev);
            w->pool = intern(r, pn);
        }
    }
    bool ok = w->queue != TRACE_NONE && (w->n_workers == 0 || w->worker_q);
    if (ok)
        r->w[r->n_w++] = w;
    unlock(r);
    if (!ok) {
        wrapped_free(w);
        return NULL;
    }
    inner->rec = r;
    return &w->outer;
}

sched_sink *sched_rec_sink(sched_rec *r) { return &r->self; }

void sched_rec_set_eval(sched_rec *r, uint64_t eval)
{
    lock(r);
    set_eval(r, eval);
    r->split = -1;
    unlock(r);
}

int sched_rec_host_op(sched_rec *r, const char *label, const trace_access *acc, uint32_t n_acc,
                      int64_t overhead_ns, int64_t bytes, int64_t t, int64_t dur)
{
    lock(r);
    uint64_t pos;
    rec_slot *slot = stmt(r, r->host, false, TRACE_OP, &pos);
    if (slot) {
        slot->s.label = intern(r, label);
        set_access(slot, acc, n_acc);
        add_token(r, slot);
        uint64_t accessed = 0;
        for (uint32_t i = 0; i < n_acc; i++)
            accessed += acc[i].hi - acc[i].lo;
        if (bytes >= 0 && (uint64_t)bytes != accessed)
            add_attr(slot, r->k_bytes, num(r, (uint64_t)bytes));
        if (overhead_ns >= 0)
            add_attr(slot, r->k_overhead, num(r, (uint64_t)overhead_ns));
        observe(r, slot);
        done_at(r, pos, t, dur);
    }
    unlock(r);
    return slot ? 0 : -1;
}

void sched_rec_observe(sched_rec *r, trace_pattern *p)
{
    lock(r);
    r->observer = p;
    unlock(r);
}

const trace *sched_rec_trace(const sched_rec *r) { return r->t; }
uint32_t sched_rec_host(const sched_rec *r) { return r->host; }
uint64_t sched_rec_count(const sched_rec *r) { return r->tail; }

void sched_rec_flush(sched_rec *r)
{
    lock(r);
    commit(r, true);
    unlock(r);
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
    lock(r);
    done_at(r, tk, t, dur);
    unlock(r);
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
    lock(r);
    wrapped *w = wrapper_of(r, b);
    if (w && w->x && thread >= 0 && thread <= w->n_workers && k >= 0 && k < w->x->n_nodes) {
        const sched_tensor *node = &w->x->graph->tensors[w->x->nodes[k]];
        uint64_t pos;
        rec_slot *slot = stmt(r, w->worker_q[thread], false, TRACE_OP, &pos);
        if (slot) {
            char label[SCHED_NAME_MAX + 16];
            snprintf(label, sizeof label, "%s#%d", node->name, thread);
            slot->s.label = intern(r, label);
            uint32_t n = w->x_nacc[k];
            memcpy(slot->acc, &w->x_acc[k * REC_ACC], n * sizeof *slot->acc);
            /* The write is the last access: narrowed to this chunk. */
            if (n > 0 && slot->acc[n - 1].mode == TRACE_W) {
                slot->acc[n - 1].form = TRACE_REF_RANGE;
                slot->acc[n - 1].lo = lo;
                slot->acc[n - 1].hi = hi;
            }
            slot->s.n_access = n;
            add_attr(slot, r->k_split, num(r, (uint64_t)w->x->split));
            add_token(r, slot);
            observe(r, slot);
            done_at(r, pos, t, dur);
        }
    }
    unlock(r);
}

void sched_rec_barrier(const sched_backend *b, int thread, int64_t t, int64_t dur)
{
    sched_rec *r = b->rec;
    if (!r)
        return;
    lock(r);
    wrapped *w = wrapper_of(r, b);
    if (w && thread >= 0 && thread <= w->n_workers) {
        uint64_t pos;
        rec_slot *slot = stmt(r, w->worker_q[thread], false, TRACE_BARRIER, &pos);
        if (slot) {
            slot->s.object = w->pool;
            slot->s.count = (uint64_t)w->n_workers + 1;
            add_token(r, slot);
            observe(r, slot);
            done_at(r, pos, t, dur);
        }
    }
    unlock(r);
}
