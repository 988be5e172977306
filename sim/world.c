/*
 * world.c -- a simulated machine: the host timeline, GPU streams, copy
 * engines, events and collectives on top of the engine.
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
 * An item reports the times of its statement (its ticket, from the
 * recording that wraps the backends: sched_rec_done) when it completes:
 * the stream reached it at t0 and it ended now. The recording holds
 * statements in submission order until they have their times, so the
 * trace is in submission order with simulated times, as a recorder would
 * have them from a device.
 */
#include "sim_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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
            sched_rec_done(&w->backends[si], it->ticket, w->e.now, 0);
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
    sched_rec_done(&w->backends[si], it->ticket, it->t0, w->e.now - it->t0);
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
    if (trace_grow32((void **)&w->events, &w->cap_events, w->n_events + 1, sizeof *w->events) != 0)
        return TRACE_NONE;
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

sim_world *sim_world_new(const sim_model *m)
{
    sim_world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->m = *m;
    w->n_gpus = m->gpus < SIM_MAX_GPUS ? m->gpus : SIM_MAX_GPUS;
    sim_engine_init(&w->e);
    for (int d = 0; d < w->n_gpus; d++) {
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
    sim_backends_init(w);
    return w;
}

void sim_world_free(sim_world *w)
{
    if (!w)
        return;
    for (int d = 0; d < SIM_MAX_GPUS; d++)
        free(w->streams[d].items);
    for (int k = 0; k < SIM_MAX_GPUS * 3; k++)
        free(w->copy_waiters[k]);
    for (uint32_t i = 0; i < w->n_events; i++)
        free(w->events[i].waiters);
    free(w->events);
    free(w->colls);
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

void sim_host_spend(sim_world *w, int64_t dt)
{
    w->host_t += dt;
    w->host_busy += dt;
}

void sim_world_host_work(sim_world *w, int64_t overhead_ns, uint64_t bytes)
{
    sim_host_spend(w, sim_cost_op(&w->m, true, 0, 0, bytes, overhead_ns));
}

int sim_world_finish(sim_world *w)
{
    int rc = 0;
    for (int d = 0; d < w->n_gpus; d++)
        if (sim_block_stream(w, d) != 0)
            rc = -1;
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
