/*
 * record_wrap.c -- a backend call becomes its trace statements.
 *
 * The wrapper sched_rec_wrap makes has exactly the members of the backend
 * it wraps (a NULL member keeps its meaning for the scheduler); each
 * forwards the call and makes its statements in the recording (record.c):
 *
 *   set_async, get_async, copy_async   a `copy` on the backend's stream
 *                                      (labelled by its destination);
 *   copy_sync          a `copy` the host performs;
 *   synchronize        the host's `sync STREAM`;
 *   event_record, event_wait           a `record` / `wait` on the stream;
 *   event_synchronize  the host's `wait`;
 *   graph_compute      one `op` per node on the stream (or the host, for a
 *                      synchronous backend) with split=, token= and its
 *                      cost attributes; an opaque all_reduce (ring, bf16,
 *                      nccl: sched/allreduce.c) a `collective tp
 *                      allreduce size=N` (bf16: an `allreduce_bf16` on the
 *                      wire buffer between the ops NODE.to_bf16 and
 *                      NODE.from_bf16); at worker level the backend
 *                      reports per-thread chunks instead (sched_rec_chunk);
 *   buffer_alloc       a root buffer; event_new names the event.
 *
 * The statements of an asynchronous call get their ticket (the backend
 * reads it with sched_rec_ticket and reports the times with it); those of
 * a graph_compute go in x->tickets. A node's label, cost attributes and
 * accesses are made once per graph and pipeline slot (a cache keyed by the
 * graph, its scheduler and its tensors), so a statement costs copies, not
 * string work.
 */
#include "record_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Tensors, nodes and graphs.                                          */

static uint32_t view_of(sched_rec *r, sched_tensor *t) { return sched_tensor_view(&r->self, t); }

void rec_cache_free(graph_cache *gc)
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
    rec_cache_free(gc);
    gc->info = calloc((size_t)g->n_tensors + 1, sizeof *gc->info);
    gc->g = gc->info ? g : NULL;
    gc->sched = x->sched;
    gc->tensors = g->tensors;
    gc->n = gc->info ? g->n_tensors : 0;
    return gc->info ? gc : NULL;
}

/* A read of source tensor `orig` as node reads it through `act` (its copy
 * when it is a split input; a view's copy is the view, split.c): the
 * whole of act, or the leading bytes orig names when they are fewer. */
static trace_access read_of(sched_rec *r, const sched_graph *g, int32_t orig, int32_t act)
{
    sched_tensor *ot = &g->tensors[orig], *at = &g->tensors[act];
    uint64_t whole = sched_tensor_nbytes(at), hi = sched_tensor_nbytes(ot);
    if (hi > whole)
        hi = whole;
    bool full = hi == whole;
    return (trace_access){ view_of(r, at), TRACE_R, full ? TRACE_REF_WHOLE : TRACE_REF_RANGE, 0,
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
        ni->label = rec_intern(r, t->name) + 1;
    uint64_t flops = sched_node_flops(g, t), bytes = sched_node_bytes(g, t), accessed = 0;
    for (uint32_t i = 0; i < n_acc; i++)
        accessed += acc[i].hi - acc[i].lo;
    ni->cost[ni->n_cost++] = (trace_attr){ r->k_op, rec_intern(r, sched_op_str(t->op)) };
    if (flops > 0)
        ni->cost[ni->n_cost++] = (trace_attr){ sched_node_half(g, t) ? r->k_flops_f16 : r->k_flops,
                                               rec_num(r, flops) };
    if (bytes != accessed)
        ni->cost[ni->n_cost++] = (trace_attr){ r->k_bytes, rec_num(r, bytes) };
    if (t->op == SCHED_OP_ALL_REDUCE) {
        char label[SCHED_NAME_MAX + 16];
        snprintf(label, sizeof label, "%s.to_bf16", t->name);
        ni->label_to = rec_intern(r, label);
        snprintf(label, sizeof label, "%s.from_bf16", t->name);
        ni->label_from = rec_intern(r, label);
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
    rec_lock(r);
    buf->trace_id = rec_declare_root(r, name, buf->size ? buf->size : 1,
                                 buf->host ? TRACE_LOC_HOST : TRACE_LOC_DEVICE,
                                 buf->host ? NULL : w->dev, buf->pinned);
    rec_unlock(r);
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
    rec_slot *slot = rec_stmt(r, queue, stream, TRACE_COPY, pos);
    if (!slot)
        return NULL;
    uint64_t ns = sched_tensor_nbytes(src), nd = sched_tensor_nbytes(dst), n = ns < nd ? ns : nd;
    slot->s.label = rec_intern(r, dst->name);
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
    rec_lock(r);
    uint64_t pos;
    rec_slot *slot = copy_stmt(r, w->queue, w->stream, src, dst, &pos);
    if (slot)
        rec_add_place(r, slot);
    if (slot && kind != ASYNC_COPY)
        rec_observe(r, slot);
    r->cur = slot ? pos : SCHED_NO_TICKET;
    rec_unlock(r);
    int rc;
    if (kind == ASYNC_SET)
        rc = w->inner->iface->set_async(w->inner, src, dst);
    else if (kind == ASYNC_GET)
        rc = w->inner->iface->get_async(w->inner, src, dst);
    else
        rc = w->inner->iface->copy_async(w->inner, other ? other : b, src, dst);
    rec_lock(r);
    r->cur = SCHED_NO_TICKET;
    if (slot && kind == ASYNC_COPY) {
        if (rc == 1)
            rec_observe(r, rec_slot_at(r, pos));
        else
            rec_unreserve(r, pos);
    }
    rec_call_end(r);
    rec_unlock(r);
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
        rec_add_place(r, slot);
        rec_observe(r, slot);
    }
    return (host_call){ slot ? pos : SCHED_NO_TICKET, r->o.now(r->o.now_ctx) };
}

static void host_end(sched_rec *r, host_call c)
{
    int64_t t1 = r->o.now(r->o.now_ctx);
    rec_lock(r);
    if (c.pos != SCHED_NO_TICKET)
        rec_done_at(r, c.pos, c.t0, t1 - c.t0);
    rec_call_end(r);
    rec_unlock(r);
}

int sched_rec_host_read(sched_rec *r, const char *label, const sched_tensor *t)
{
    trace_access acc = { t->trace_view, TRACE_R, TRACE_REF_WHOLE, 0, sched_tensor_nbytes(t) };
    int64_t t0 = r->o.now(r->o.now_ctx);
    return sched_rec_host_op(r, label, &acc, 1, -1, -1, t0, r->o.now(r->o.now_ctx) - t0);
}

static int w_copy_sync(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    rec_lock(r);
    uint64_t pos;
    rec_slot *slot = copy_stmt(r, r->host, false, src, dst, &pos);
    host_call c = host_begin(r, slot, pos);
    rec_unlock(r);
    int rc = w->inner->iface->copy_sync(w->inner, src, dst);
    host_end(r, c);
    return rc;
}

static int w_synchronize(sched_backend *b)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    rec_lock(r);
    uint64_t pos;
    rec_slot *slot = rec_stmt(r, r->host, false, TRACE_SYNC, &pos);
    if (slot) {
        slot->s.sync_scope = TRACE_SYNC_QUEUE;
        slot->s.object = w->queue;
    }
    host_call c = host_begin(r, slot, pos);
    rec_unlock(r);
    int rc = w->inner->iface->synchronize(w->inner);
    host_end(r, c);
    return rc;
}

static sched_event *w_event_new(sched_backend *b, const char *name)
{
    wrapped *w = wr(b);
    sched_event *ev = w->inner->iface->event_new(w->inner, name);
    if (ev) {
        rec_lock(w->rec);
        ev->name = rec_intern(w->rec, name);
        rec_unlock(w->rec);
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
    rec_lock(r);
    uint64_t pos;
    rec_slot *slot = rec_stmt(r, w->queue, w->stream, kind, &pos);
    if (slot) {
        slot->s.object = ev->name;
        rec_add_place(r, slot);
        rec_observe(r, slot);
    }
    r->cur = slot ? pos : SCHED_NO_TICKET;
    rec_unlock(r);
    int rc = kind == TRACE_RECORD ? w->inner->iface->event_record(w->inner, ev)
                                  : w->inner->iface->event_wait(w->inner, ev);
    rec_lock(r);
    r->cur = SCHED_NO_TICKET;
    rec_call_end(r);
    rec_unlock(r);
    return rc;
}

static int w_event_record(sched_backend *b, sched_event *ev) { return event_call(b, ev, TRACE_RECORD); }
static int w_event_wait(sched_backend *b, sched_event *ev) { return event_call(b, ev, TRACE_WAIT); }

static int w_event_synchronize(sched_backend *b, sched_event *ev)
{
    wrapped *w = wr(b);
    sched_rec *r = w->rec;
    rec_lock(r);
    uint64_t pos;
    rec_slot *slot = rec_stmt(r, r->host, false, TRACE_WAIT, &pos);
    if (slot)
        slot->s.object = ev->name;
    host_call c = host_begin(r, slot, pos);
    rec_unlock(r);
    int rc = w->inner->iface->event_synchronize(w->inner, ev);
    host_end(r, c);
    return rc;
}

void rec_set_eval(sched_rec *r, uint64_t eval)
{
    if (eval != r->eval || !r->token_ok) {
        r->eval = eval;
        r->token_ok = false;
    }
}

static void w_split_begin(sched_backend *b, int split, uint64_t eval)
{
    sched_rec *r = wr(b)->rec;
    rec_lock(r);
    rec_set_eval(r, eval);
    r->split = split;
    rec_unlock(r);
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
    uint32_t split = rec_num(r, (uint64_t)x->split);
    if (bf16 && (slot = rec_stmt(r, w->queue, w->stream, TRACE_OP, &pos))) {
        slot->s.label = ni->label_to;
        slot->acc[0] = acc[0];
        slot->acc[1] = on_wire;
        slot->acc[1].mode = TRACE_W;
        slot->s.n_access = 2;
        rec_add_attr(slot, r->k_split, split);
        rec_add_token(r, slot);
        rec_observe(r, slot);
        tk[1] = pos;
    }
    if ((slot = rec_stmt(r, w->queue, w->stream, TRACE_COLLECTIVE, &pos))) {
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
        rec_add_attr(slot, r->k_split, split);
        rec_add_token(r, slot);
        /* A butterfly is never one collective (allreduce.c expands it):
         * replay prices this one as the ring, its default. */
        rec_observe(r, slot);
        tk[0] = pos;
    }
    if (bf16 && (slot = rec_stmt(r, w->queue, w->stream, TRACE_OP, &pos))) {
        slot->s.label = ni->label_from;
        slot->acc[0] = on_wire;
        slot->acc[0].mode = TRACE_R;
        slot->acc[1] = acc[n_acc - 1];
        slot->s.n_access = 2;
        rec_add_attr(slot, r->k_split, split);
        rec_add_token(r, slot);
        rec_observe(r, slot);
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
    rec_lock(r);
    rec_set_eval(r, x->eval);
    graph_cache *gc = cache_of(r, x);
    if (!gc || grow_exec(w, x->n_nodes) != 0) {
        rec_unlock(r);
        return -1;
    }
    uint32_t split = rec_num(r, (uint64_t)x->split);
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
        rec_slot *slot = rec_stmt(r, w->queue, w->stream, TRACE_OP, &pos);
        if (!slot)
            continue;
        slot->s.label = ni->label - 1;
        memcpy(slot->acc, acc, n * sizeof *acc);
        slot->s.n_access = n;
        rec_add_attr(slot, r->k_split, split);
        rec_add_token(r, slot);
        for (int c = 0; c < ni->n_cost; c++)
            rec_add_attr(slot, ni->cost[c].key, ni->cost[c].value);
        rec_observe(r, slot);
        tk[0] = pos;
    }
    w->x = x;
    rec_unlock(r);
    sched_exec rx = *x;
    rx.tickets = w->tickets;
    int rc = w->inner->iface->graph_compute(w->inner, &rx);
    rec_lock(r);
    w->x = NULL;
    rec_call_end(r);
    rec_unlock(r);
    return rc;
}

void rec_wrapped_free(wrapped *w)
{
    if (!w)
        return;
    free(w->worker_q);
    free(w->tickets);
    free(w->x_acc);
    free(w->x_nacc);
    free(w);
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
    rec_lock(r);
    w->queue = w->stream ? rec_declare_queue(r, w->dev, TRACE_QUEUE_STREAM, w->dev) : r->host;
    w->n_workers = in->workers ? in->workers(inner) : 0;
    if (w->n_workers > 0) {
        w->worker_q = calloc((size_t)w->n_workers + 1, sizeof *w->worker_q);
        if (w->worker_q) {
            w->worker_q[0] = r->host;
            for (int i = 1; i <= w->n_workers; i++) {
                char qn[48];
                snprintf(qn, sizeof qn, "%s.t%d", w->dev, i);
                w->worker_q[i] = rec_declare_queue(r, qn, TRACE_QUEUE_HOST, NULL);
            }
            char pn[48];
            snprintf(pn, sizeof pn, "%s.pool", w->dev);
            w->pool = rec_intern(r, pn);
        }
    }
    bool ok = w->queue != TRACE_NONE && (w->n_workers == 0 || w->worker_q);
    if (ok)
        r->w[r->n_w++] = w;
    rec_unlock(r);
    if (!ok) {
        rec_wrapped_free(w);
        return NULL;
    }
    inner->rec = r;
    return &w->outer;
}

