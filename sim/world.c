/*
 * world.c -- a simulated machine: the host timeline, GPU streams, copy
 * engines, events and collectives on top of the engine, and the reorder
 * buffer that hands statements to the sink in submission order.
 *
 * The host is the program that runs the scheduler: each backend call
 * advances host time by its API cost and queues items on streams with
 * ready = the host's time. The engine only runs when the host blocks
 * (a sync, an event wait, a blocking copy) or at the end: it processes
 * events in time order until what the host waits for happened, and the
 * host resumes at max(its time, that time). Since the host never runs
 * ahead of an event it waits for, the engine's clock never passes the
 * host's at a submission.
 *
 * Statements are reserved in submission order; a stream statement gets
 * its t= and dur= when it completes. The reorder buffer passes statements
 * to the sink once every earlier one has its times, so the sink sees
 * submission order with times, as a recorder would.
 */
#include "sim_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Reorder buffer.                                                     */

static void rob_commit(sim_world *w)
{
    while (w->rob_head < w->rob_tail) {
        sim_pending *p = &w->rob[w->rob_head & (w->rob_cap - 1)];
        if (!p->done)
            break;
        p->s.access = p->s.n_access ? p->acc : NULL;
        p->s.attr = p->s.n_attr ? p->attr : NULL;
        w->sink.iface->append(w->sink.ctx, &p->s);
        w->stats.n_stmts++;
        w->rob_head++;
    }
}

uint64_t sim_rob_reserve(sim_world *w, const trace_stmt *s)
{
    if (w->rob_tail - w->rob_head == w->rob_cap) {
        uint64_t cap = w->rob_cap ? w->rob_cap * 2 : 1024;
        sim_pending *n = malloc(cap * sizeof *n);
        if (!n)
            abort();                /* out of memory mid-simulation: nothing sane to do */
        for (uint64_t i = w->rob_head; i < w->rob_tail; i++)
            n[i & (cap - 1)] = w->rob[i & (w->rob_cap - 1)];
        free(w->rob);
        w->rob = n;
        w->rob_cap = cap;
    }
    uint64_t pos = w->rob_tail++;
    sim_pending *p = &w->rob[pos & (w->rob_cap - 1)];
    p->s = *s;
    p->s.n_access = s->n_access > SIM_MAX_ACC ? SIM_MAX_ACC : s->n_access;
    p->s.n_attr = s->n_attr > SIM_MAX_ATTR ? SIM_MAX_ATTR : s->n_attr;
    if (p->s.n_access)
        memcpy(p->acc, s->access, p->s.n_access * sizeof *p->acc);
    if (p->s.n_attr)
        memcpy(p->attr, s->attr, p->s.n_attr * sizeof *p->attr);
    p->done = false;
    return pos;
}

sim_pending *sim_rob_at(sim_world *w, uint64_t pos) { return &w->rob[pos & (w->rob_cap - 1)]; }

void sim_rob_done(sim_world *w, uint64_t pos, int64_t t, int64_t dur)
{
    sim_pending *p = sim_rob_at(w, pos);
    p->s.t = t;
    p->s.dur = dur;
    p->done = true;
    if (pos == w->rob_head)
        rob_commit(w);
}

uint32_t sim_num(sim_world *w, uint64_t v)
{
    if (v < 4096 && w->num_ids[v])
        return w->num_ids[v] - 1;
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    uint32_t id = w->sink.iface->intern(w->sink.ctx, buf);
    if (v < 4096)
        w->num_ids[v] = id + 1;
    return id;
}

/* ------------------------------------------------------------------ */
/* Streams.                                                            */

static int add_waiter(int **arr, int *n, int *cap, int s)
{
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 4;
        int *a = realloc(*arr, (size_t)c * sizeof *a);
        if (!a)
            return -1;
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = s;
    return 0;
}

static void stream_try_start(sim_world *w, int si);

static void kick(sim_world *w, int si, int64_t at)
{
    sim_stream *s = &w->streams[si];
    if (s->kick_at >= 0 && s->kick_at <= at && s->kick_at >= w->e.now)
        return;                     /* an earlier kick is pending */
    s->kick_at = at;
    sim_engine_push(&w->e, at, SIM_EV_KICK, (uint32_t)si, 0);
}

static void run_item(sim_world *w, int si, int64_t dur)
{
    sim_stream *s = &w->streams[si];
    s->busy = true;
    sim_engine_push(&w->e, w->e.now + dur, SIM_EV_ITEM_DONE, (uint32_t)si, 0);
}

static void stream_try_start(sim_world *w, int si)
{
    sim_stream *s = &w->streams[si];
    while (!s->busy && s->head < s->tail) {
        sim_item *it = &s->items[s->head & (s->cap - 1)];
        if (it->ready > w->e.now) {
            kick(w, si, it->ready);
            return;
        }
        if (it->t0 < 0)
            it->t0 = w->e.now;
        switch (it->kind) {
        case SIM_IT_RECORD: {
            sim_event_state *ev = &w->events[it->event];
            if (it->gen > ev->completed)
                ev->completed = it->gen;
            sim_rob_done(w, it->rob, w->e.now, 0);
            s->head++;
            for (int k = 0; k < ev->n_waiters; k++) {
                w->streams[ev->waiters[k]].blocked = false;
                kick(w, ev->waiters[k], w->e.now);
            }
            ev->n_waiters = 0;
            continue;
        }
        case SIM_IT_WAIT: {
            sim_event_state *ev = &w->events[it->event];
            if (ev->completed >= it->gen) {
                s->blocked = false;
                run_item(w, si, sim_cost_unblock(&w->m, TRACE_WAIT, false));
                return;
            }
            if (!s->blocked) {
                s->blocked = true;
                add_waiter(&ev->waiters, &ev->n_waiters, &ev->cap_waiters, si);
            }
            return;
        }
        case SIM_IT_KERNEL:
            run_item(w, si, it->dur);
            s->compute_ns += it->dur;
            return;
        case SIM_IT_COPY: {
            int e = it->engine;
            if (w->copy_busy[e] >= 0 && w->copy_busy[e] != si) {
                if (!s->blocked) {
                    s->blocked = true;
                    add_waiter(&w->copy_waiters[e], &w->n_copy_waiters[e], &w->cap_copy_waiters[e],
                               si);
                }
                return;
            }
            s->blocked = false;
            w->copy_busy[e] = si;
            s->busy = true;
            sim_engine_xfer_start(&w->e, it->links, it->n_links, it->bytes, si);
            return;
        }
        case SIM_IT_COLL: {
            sim_coll *c = &w->colls[it->coll];
            if (!s->blocked) {
                s->blocked = true;
                c->streams[c->arrived++] = si;
            }
            if (c->arrived < c->n_ranks)
                return;
            for (int k = 0; k < c->n_ranks; k++) {
                int o = c->streams[k];
                w->streams[o].blocked = false;
                w->streams[o].compute_ns += c->cost;
                run_item(w, o, c->cost);
            }
            return;
        }
        }
    }
}

static void item_done(sim_world *w, int si)
{
    sim_stream *s = &w->streams[si];
    sim_item *it = &s->items[s->head & (s->cap - 1)];
    s->busy = false;
    s->busy_ns += w->e.now - it->t0;
    sim_rob_done(w, it->rob, it->t0, w->e.now - it->t0);
    if (it->kind == SIM_IT_COPY) {
        int e = it->engine;
        w->copy_busy[e] = -1;
        for (int k = 0; k < w->n_copy_waiters[e]; k++) {
            w->streams[w->copy_waiters[e][k]].blocked = false;
            kick(w, w->copy_waiters[e][k], w->e.now);
        }
        w->n_copy_waiters[e] = 0;
    }
    s->head++;
    if (w->e.now > w->stats.end_ns)
        w->stats.end_ns = w->e.now;
    stream_try_start(w, si);
}

/* Processes one engine event; false when there is none. */
static bool step(sim_world *w)
{
    sim_heap_ev ev;
    if (!sim_engine_pop(&w->e, &ev))
        return false;
    switch (ev.kind) {
    case SIM_EV_KICK:
        if (w->streams[ev.a].kick_at == ev.t)
            w->streams[ev.a].kick_at = -1;
        stream_try_start(w, (int)ev.a);
        break;
    case SIM_EV_ITEM_DONE:
        item_done(w, (int)ev.a);
        break;
    case SIM_EV_XFER:
        if (sim_engine_xfer_event(&w->e, &ev)) {
            int owner = w->e.xfers[ev.a].owner;
            if (owner >= 0) {
                sim_stream *s = &w->streams[owner];
                sim_item *it = &s->items[s->head & (s->cap - 1)];
                sim_engine_push(&w->e, w->e.now + it->dur, SIM_EV_ITEM_DONE, (uint32_t)owner, 0);
            } else {
                sim_engine_push(&w->e, w->e.now + w->m.copy_latency_ns, SIM_EV_TIMER, 1, 0);
            }
        }
        break;
    case SIM_EV_TIMER:
        w->host_xfer_done = true;
        break;
    }
    return true;
}

int sim_submit(sim_world *w, int d, sim_item *it)
{
    sim_stream *s = &w->streams[d];
    if (s->tail - s->head == s->cap) {
        uint64_t cap = s->cap ? s->cap * 2 : 256;
        sim_item *n = malloc(cap * sizeof *n);
        if (!n)
            return -1;
        for (uint64_t i = s->head; i < s->tail; i++)
            n[i & (cap - 1)] = s->items[i & (s->cap - 1)];
        free(s->items);
        s->items = n;
        s->cap = cap;
    }
    it->ready = w->host_t;
    it->t0 = -1;
    s->items[s->tail++ & (s->cap - 1)] = *it;
    if (!s->busy && !s->blocked && s->tail - s->head == 1)
        kick(w, d, it->ready);
    return 0;
}

static int block_until(sim_world *w, bool (*done)(sim_world *, const void *), const void *arg)
{
    while (!done(w, arg)) {
        if (!step(w)) {
            w->hung = true;
            return -1;
        }
    }
    if (w->e.now > w->host_t)
        w->host_t = w->e.now;
    return 0;
}

static bool stream_drained(sim_world *w, const void *arg)
{
    const sim_stream *s = &w->streams[*(const int *)arg];
    return s->head == s->tail && !s->busy;
}

int sim_block_stream(sim_world *w, int d) { return block_until(w, stream_drained, &d); }

typedef struct ev_target { uint32_t ev; uint64_t gen; } ev_target;

static bool event_done(sim_world *w, const void *arg)
{
    const ev_target *t = arg;
    return w->events[t->ev].completed >= t->gen;
}

int sim_block_event(sim_world *w, uint32_t ev, uint64_t gen)
{
    ev_target t = { ev, gen };
    return block_until(w, event_done, &t);
}

static bool host_xfer_done(sim_world *w, const void *arg)
{
    (void)arg;
    return w->host_xfer_done;
}

int sim_host_transfer(sim_world *w, const int *links, int n_links, uint64_t bytes)
{
    /* Bring the engine to the host's time so the transfer starts now. */
    while (w->e.n_heap && w->e.heap[0].t <= w->host_t)
        step(w);
    if (w->e.now < w->host_t)
        w->e.now = w->host_t;
    w->host_xfer_done = false;
    if (sim_engine_xfer_start(&w->e, links, n_links, bytes, -1) < 0)
        return -1;
    return block_until(w, host_xfer_done, NULL);
}

uint32_t sim_event_alloc(sim_world *w)
{
    if (w->n_events == w->cap_events) {
        uint32_t cap = w->cap_events ? w->cap_events * 2 : 16;
        sim_event_state *n = realloc(w->events, cap * sizeof *n);
        if (!n)
            return TRACE_NONE;
        w->events = n;
        w->cap_events = cap;
    }
    memset(&w->events[w->n_events], 0, sizeof *w->events);
    return w->n_events++;
}

uint32_t sim_coll_instance(sim_world *w, uint32_t gen, int n_ranks, int64_t cost)
{
    while (w->n_colls <= gen) {
        if (w->n_colls == w->cap_colls) {
            uint32_t cap = w->cap_colls ? w->cap_colls * 2 : 64;
            sim_coll *n = realloc(w->colls, cap * sizeof *n);
            if (!n)
                return TRACE_NONE;
            w->colls = n;
            w->cap_colls = cap;
        }
        memset(&w->colls[w->n_colls], 0, sizeof *w->colls);
        w->colls[w->n_colls].cost = -1;
        w->n_colls++;
    }
    sim_coll *c = &w->colls[gen];
    c->n_ranks = n_ranks;
    if (cost > c->cost)
        c->cost = cost;
    return gen;
}

/* ------------------------------------------------------------------ */
/* The world.                                                          */

static int add_link(sim_world *w, double gbps, const char *fmt, int a, int b)
{
    int id = sim_engine_link(&w->e, gbps);
    if (id >= 0 && id < 64)
        snprintf(w->link_names[id], sizeof w->link_names[id], fmt, a, b);
    return id;
}

sim_world *sim_world_new(const sim_model *m, sched_sink sink)
{
    sim_world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->m = *m;
    w->sink = sink;
    w->n_gpus = m->gpus < SIM_MAX_GPUS ? m->gpus : SIM_MAX_GPUS;
    sim_engine_init(&w->e);
    w->host_q = sink.iface->queue(sink.ctx, "host", TRACE_QUEUE_HOST, NULL);
    for (int d = 0; d < w->n_gpus; d++) {
        char name[16];
        snprintf(name, sizeof name, "gpu%d", d);
        w->streams[d].queue = sink.iface->queue(sink.ctx, name, TRACE_QUEUE_STREAM, name);
        w->streams[d].kick_at = -1;
        w->link_down[d] = add_link(w, m->h2d_gbps, "gpu%d.h2d", d, 0);
        w->link_up[d] = add_link(w, m->d2h_gbps, "gpu%d.d2h", d, 0);
    }
    for (int d = 0; d < w->n_gpus; d++)
        for (int e = 0; e < w->n_gpus; e++)
            w->link_p2p[d][e] = d == e ? -1 : add_link(w, m->p2p_gbps, m->nvlink ? "nvlink%d>%d" : "p2p%d>%d", d, e);
    for (int k = 0; k < SIM_MAX_GPUS * 3; k++)
        w->copy_busy[k] = -1;
    w->host_xfer = -1;
    w->id_split = sink.iface->intern(sink.ctx, "split");
    w->id_token = sink.iface->intern(sink.ctx, "token");
    w->id_tp = sink.iface->intern(sink.ctx, "tp");
    w->id_allreduce = sink.iface->intern(sink.ctx, "allreduce");
    w->id_allreduce_bf16 = sink.iface->intern(sink.ctx, "allreduce_bf16");
    w->id_flops = sink.iface->intern(sink.ctx, "flops");
    w->id_flops_f16 = sink.iface->intern(sink.ctx, "flops_f16");
    w->id_bytes = sink.iface->intern(sink.ctx, "bytes");
    w->id_overhead_ns = sink.iface->intern(sink.ctx, "overhead_ns");
    w->id_algorithm = sink.iface->intern(sink.ctx, "algorithm");
    w->id_butterfly = sink.iface->intern(sink.ctx, "butterfly");
    sim_backends_init(w);
    return w;
}

void sim_world_free(sim_world *w)
{
    if (!w)
        return;
    for (int d = 0; d < SIM_MAX_GPUS; d++) {
        free(w->streams[d].items);
        free(w->scratch[d]);
    }
    for (int k = 0; k < SIM_MAX_GPUS * 3; k++)
        free(w->copy_waiters[k]);
    for (uint32_t i = 0; i < w->n_events; i++)
        free(w->events[i].waiters);
    free(w->events);
    free(w->colls);
    free(w->rob);
    sim_engine_release(&w->e);
    free(w);
}

int sim_world_backends(sim_world *w, sched_backend ***out)
{
    *out = w->backend_ptrs;
    return w->n_gpus + 1;
}

int64_t sim_world_now(const sim_world *w) { return w->host_t; }
bool sim_world_hung(const sim_world *w) { return w->hung; }

const char *sim_world_link_name(const sim_world *w, int link)
{
    return link >= 0 && link < 64 ? w->link_names[link] : "";
}

int sim_world_host_op(sim_world *w, const char *label, const trace_access *acc, uint32_t n_acc,
                      int64_t overhead_ns, uint64_t bytes)
{
    int64_t dur_ns = sim_cost_op(&w->m, true, 0, 0, bytes, overhead_ns);
    trace_attr attr[SIM_MAX_ATTR];
    trace_stmt s;
    trace_stmt_init(&s);
    s.queue = w->host_q;
    s.kind = TRACE_OP;
    s.label = w->sink.iface->intern(w->sink.ctx, label);
    s.access = acc;
    s.n_access = n_acc;
    s.attr = attr;
    s.n_attr = sim_cost_attrs(w, attr, 0, 0, false, bytes, acc, n_acc, overhead_ns);
    uint64_t pos = sim_rob_reserve(w, &s);
    sim_rob_done(w, pos, w->host_t, dur_ns);
    w->host_t += dur_ns;
    w->host_busy += dur_ns;
    return 0;
}

int sim_world_finish(sim_world *w)
{
    int rc = 0;
    for (int d = 0; d < w->n_gpus; d++)
        if (sim_block_stream(w, d) != 0)
            rc = -1;
    if (rc != 0) {
        /* A hang: commit what ran, with no times for what never did. */
        for (uint64_t i = w->rob_head; i < w->rob_tail; i++) {
            sim_pending *p = sim_rob_at(w, i);
            if (!p->done) {
                p->s.t = TRACE_TIME_NONE;
                p->s.dur = TRACE_TIME_NONE;
                p->done = true;
            }
        }
    }
    rob_commit(w);
    if (w->host_t > w->stats.end_ns)
        w->stats.end_ns = w->host_t;
    return rc;
}

const sim_stats *sim_world_stats(const sim_world *w)
{
    sim_stats *st = (sim_stats *)&w->stats;
    st->host_busy_ns = w->host_busy;
    for (int d = 0; d < w->n_gpus; d++) {
        st->gpu_busy_ns[d] = w->streams[d].busy_ns;
        st->gpu_compute_ns[d] = w->streams[d].compute_ns;
    }
    st->n_links = w->e.n_links < 64 ? w->e.n_links : 64;
    for (int l = 0; l < st->n_links; l++)
        st->link_bytes[l] = w->e.links[l].bytes;
    return st;
}
