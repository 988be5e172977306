/*
 * engine.c -- the discrete-event engine: a binary heap of timed events
 * (integer nanoseconds, ties in insertion order) and fluid transfers over
 * links shared fairly.
 *
 * A transfer's rate is the minimum, over the links of its path, of the
 * link's bandwidth divided by the number of transfers active on it. When a
 * transfer starts or finishes, every active transfer is brought up to date
 * (bytes left -= rate * elapsed), given its new rate, and its finish event
 * rescheduled; events of an older version are ignored when popped. Two
 * transfers on one link thus each get half its bandwidth while both run.
 */
#include "sim_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sim_engine_init(sim_engine *e) { memset(e, 0, sizeof *e); }

void sim_engine_release(sim_engine *e)
{
    free(e->heap);
    free(e->links);
    free(e->xfers);
    free(e->free_xfers);
    free(e->active);
    memset(e, 0, sizeof *e);
}

static bool ev_less(const sim_heap_ev *a, const sim_heap_ev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int sim_engine_push(sim_engine *e, int64_t t, uint32_t kind, uint32_t a, uint32_t b)
{
    if (e->n_heap == e->cap_heap) {
        size_t cap = e->cap_heap ? e->cap_heap * 2 : 256;
        sim_heap_ev *n = realloc(e->heap, cap * sizeof *n);
        if (!n)
            return -1;
        e->heap = n;
        e->cap_heap = cap;
    }
    if (t < e->now)
        t = e->now;
    sim_heap_ev ev = { t, e->seq++, kind, a, b };
    size_t i = e->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!ev_less(&ev, &e->heap[parent]))
            break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = ev;
    return 0;
}

bool sim_engine_pop(sim_engine *e, sim_heap_ev *out)
{
    if (e->n_heap == 0)
        return false;
    *out = e->heap[0];
    sim_heap_ev last = e->heap[--e->n_heap];
    size_t i = 0, n = e->n_heap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const sim_heap_ev *best = &last;
        if (l < n && ev_less(&e->heap[l], best)) {
            m = l;
            best = &e->heap[l];
        }
        if (r < n && ev_less(&e->heap[r], best))
            m = r;
        if (m == i)
            break;
        e->heap[i] = e->heap[m];
        i = m;
    }
    if (n)
        e->heap[i] = last;
    if (out->t > e->now)
        e->now = out->t;
    return true;
}

/* Brings every active transfer up to now, recomputes rates, reschedules. */
static int rebalance(sim_engine *e)
{
    for (int k = 0; k < e->n_active; k++) {
        sim_xfer *x = &e->xfers[e->active[k]];
        x->left -= x->rate * (double)(e->now - x->last);
        if (x->left < 0)
            x->left = 0;
        x->last = e->now;
    }
    for (int k = 0; k < e->n_active; k++) {
        sim_xfer *x = &e->xfers[e->active[k]];
        double rate = INFINITY;
        for (int l = 0; l < x->n_links; l++) {
            const sim_link *lk = &e->links[x->links[l]];
            double share = lk->bytes_per_ns / (double)lk->n_active;
            if (share < rate)
                rate = share;
        }
        if (rate != x->rate || x->version == 0) {
            x->rate = rate;
            x->version++;
            int64_t dt = (int64_t)ceil(x->left / rate - 1e-9);
            if (sim_engine_push(e, e->now + (dt > 0 ? dt : 0), SIM_EV_XFER,
                                (uint32_t)e->active[k], x->version) != 0)
                return -1;
        }
    }
    return 0;
}

int sim_engine_xfer_start(sim_engine *e, const int *links, int n_links, uint64_t bytes, int owner)
{
    if (e->n_free == 0 && e->n_xfers == e->cap_xfers) {
        int cap = e->cap_xfers ? e->cap_xfers * 2 : 64;
        sim_xfer *n = realloc(e->xfers, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        e->xfers = n;
        e->cap_xfers = cap;
    }
    if (e->n_active == e->cap_active) {
        int cap = e->cap_active ? e->cap_active * 2 : 16;
        int *n = realloc(e->active, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        e->active = n;
        e->cap_active = cap;
    }
    /* A finished transfer's slot is reused: its version keeps counting, so
     * the events still queued for the old transfer are ignored. */
    int id = e->n_free ? e->free_xfers[--e->n_free] : e->n_xfers++;
    sim_xfer *x = &e->xfers[id];
    uint32_t version = x->version;
    memset(x, 0, sizeof *x);
    x->version = version;
    x->left = (double)bytes;
    x->last = e->now;
    x->n_links = n_links > 3 ? 3 : n_links;
    for (int l = 0; l < x->n_links; l++) {
        x->links[l] = links[l];
        e->links[links[l]].n_active++;
        e->links[links[l]].bytes += bytes;
    }
    x->active = true;
    x->owner = owner;
    x->done_at = -1;
    e->active[e->n_active++] = id;
    if (x->n_links == 0) {
        /* No link: done at once. */
        x->rate = INFINITY;
        x->version++;
        return sim_engine_push(e, e->now, SIM_EV_XFER, (uint32_t)id, x->version) == 0 ? id : -1;
    }
    x->rate = 0;                    /* rebalance gives it its first rate and event */
    return rebalance(e) == 0 ? id : -1;
}

bool sim_engine_xfer_event(sim_engine *e, const sim_heap_ev *ev)
{
    sim_xfer *x = &e->xfers[ev->a];
    if (!x->active || x->version != ev->b)
        return false;
    x->active = false;
    x->left = 0;
    x->done_at = e->now;
    for (int l = 0; l < x->n_links; l++)
        e->links[x->links[l]].n_active--;
    if (e->n_free == e->cap_free) {
        int cap = e->cap_free ? e->cap_free * 2 : 16;
        int *f = realloc(e->free_xfers, (size_t)cap * sizeof *f);
        if (f) {
            e->free_xfers = f;
            e->cap_free = cap;
        }
    }
    if (e->n_free < e->cap_free)
        e->free_xfers[e->n_free++] = (int)ev->a;
    for (int k = 0; k < e->n_active; k++)
        if (e->active[k] == (int)ev->a) {
            e->active[k] = e->active[--e->n_active];
            break;
        }
    rebalance(e);
    return true;
}

/* ------------------------------------------------------------------ */
/* The raw engine for tests.                                           */

sim_engine *sim_engine_new(void)
{
    sim_engine *e = malloc(sizeof *e);
    if (e)
        sim_engine_init(e);
    return e;
}

void sim_engine_free(sim_engine *e)
{
    if (!e)
        return;
    sim_engine_release(e);
    free(e);
}

int sim_engine_link(sim_engine *e, double gbps)
{
    if (e->n_links == e->cap_links) {
        int cap = e->cap_links ? e->cap_links * 2 : 8;
        sim_link *n = realloc(e->links, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        e->links = n;
        e->cap_links = cap;
    }
    e->links[e->n_links] = (sim_link){ gbps, 0, 0 }; /* GB/s == bytes/ns */
    return e->n_links++;
}

int sim_engine_transfer(sim_engine *e, int64_t at, const int *links, int n_links, uint64_t bytes)
{
    if (at <= e->now)
        return sim_engine_xfer_start(e, links, n_links, bytes, 0);
    /* Start later: drain events up to at first (tests add in time order). */
    sim_heap_ev ev;
    while (e->n_heap && e->heap[0].t <= at) {
        sim_engine_pop(e, &ev);
        if (ev.kind == SIM_EV_XFER)
            sim_engine_xfer_event(e, &ev);
    }
    e->now = at;
    return sim_engine_xfer_start(e, links, n_links, bytes, 0);
}

int sim_engine_timer(sim_engine *e, int64_t at, int tag)
{
    return sim_engine_push(e, at, SIM_EV_TIMER, (uint32_t)tag, 0);
}

int sim_engine_drain(sim_engine *e, int64_t *xfer_done_at, int max_xfer, int *order, int max_order)
{
    int n = 0;
    sim_heap_ev ev;
    while (sim_engine_pop(e, &ev)) {
        if (ev.kind == SIM_EV_XFER) {
            if (!sim_engine_xfer_event(e, &ev))
                continue;
            if ((int)ev.a < max_xfer)
                xfer_done_at[ev.a] = e->now;
            if (n < max_order)
                order[n] = (int)((SIM_EV_XFER << 24) | ev.a);
            n++;
        } else if (ev.kind == SIM_EV_TIMER) {
            if (n < max_order)
                order[n] = (int)((SIM_EV_TIMER << 24) | ev.a);
            n++;
        }
    }
    return n;
}
