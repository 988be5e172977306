/*
 * checkpoint.c -- the minimiser's view of an engine: copies that share
 * clocks and shadow segments copy-on-write (check_engine_clone), the test
 * that two quiescent engines will behave alike from here on
 * (check_engine_same), the tracking of what changed since a checkpoint, and
 * pruning: the minimiser knows the whole trace, so it tells the engine when
 * each record and flag is last used, and dead ones go before a checkpoint
 * is taken (docs/checker.md, "The minimiser").
 */
#include "engine.h"

void check_engine_set_lifetimes(check_engine *e, const trace_u64map *record_last,
                                const trace_u64map *flag_last)
{
    e->record_last = record_last;
    e->flag_last = flag_last;
}

/* Last use of a record or flag at or after the read position? */
static bool still_used(const trace_u64map *last, uint64_t key, uint64_t fed)
{
    const uint64_t *v = trace_u64map_get(last, key);
    return v && *v >= fed;
}

static bool record_dead(void *ctx, uint64_t record_seq)
{
    const check_engine *e = ctx;
    return !still_used(e->record_last, record_seq, e->fed);
}

void check_engine_prune(check_engine *e)
{
    if (!e->record_last || !e->flag_last)
        return;
    trace_binder_forget(e->bind, record_dead, e);
    for (uint32_t i = 0; i < e->events.cap;) {
        if (e->events.used[i] && e->events.vals[i]) {
            ev_node *n = (ev_node *)(uintptr_t)e->events.vals[i];
            if (!still_used(e->record_last, n->seq, e->fed)) {
                /* deletion shifts a later key into slot i: look at it again */
                trace_u64map_del(&e->events, e->events.keys[i]);
                check_ev_unref(n);
                continue;
            }
        }
        i++;
    }
    for (uint32_t i = 0; i < e->flags.cap;) {
        if (e->flags.used[i] && e->flags.vals[i]) {
            flag_node *f = (flag_node *)(uintptr_t)e->flags.vals[i];
            /* a message's node (name TRACE_NONE) goes when its recv passes */
            if (f->name != TRACE_NONE && !still_used(e->flag_last, f->name, e->fed)) {
                trace_u64map_del(&e->flags, e->flags.keys[i]);
                flag_node_free(f);
                continue;
            }
        }
        i++;
    }
}

void check_engine_track(check_engine *e, bool on)
{
    e->track = on;
    if (e->dirty_root)
        memset(e->dirty_root, 0, e->n_shadow);
    trace_u64map_free(&e->dirty_events);
    trace_u64map_free(&e->dirty_flags);
}

check_engine *check_engine_clone(const check_engine *e, check_report *rep)
{
    check_engine *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->t = e->t;
    c->rep = rep;
    c->remove = e->remove;
    c->fed = e->fed;
    c->only_host = e->only_host;
    c->q = malloc((e->cap_q ? e->cap_q : 1) * sizeof *c->q);
    c->shadow = calloc(e->n_shadow ? e->n_shadow : 1, sizeof *c->shadow);
    c->dirty_root = calloc(e->n_shadow ? e->n_shadow : 1, 1);
    if (!c->q || !c->shadow || !c->dirty_root)
        goto fail;
    c->cap_q = e->cap_q ? e->cap_q : 1;
    c->n_q = e->n_q;
    for (uint32_t q = 0; q < e->n_q; q++) {
        c->q[q] = e->q[q];
        c->q[q].vc = check_vc_ref(e->q[q].vc);
        c->q[q].sub_vc = check_vc_ref(e->q[q].sub_vc);
        c->q[q].head = c->q[q].tail = NULL;
        c->q[q].req_head = c->q[q].req_tail = NULL;
        c->q[q].in_work = false;
    }
    c->n_shadow = e->n_shadow;
    for (uint32_t i = 0; i < e->n_shadow; i++)
        c->shadow[i] = check_shadow_ref(e->shadow[i]);
    if (trace_u64map_copy(&c->events, &e->events) != 0 ||
        trace_u64map_copy(&c->flags, &e->flags) != 0 || !(c->bind = trace_binder_clone(e->bind)) ||
        trace_u64map_copy(&c->mismatched, &e->mismatched) != 0)
        goto fail;
    for (uint32_t i = 0; i < c->events.cap; i++)
        if (c->events.used[i] && c->events.vals[i])
            ((ev_node *)(uintptr_t)c->events.vals[i])->refs++;
    for (uint32_t i = 0; i < c->flags.cap; i++) {
        if (!c->flags.used[i] || !c->flags.vals[i])
            continue;
        const flag_node *f = (const flag_node *)(uintptr_t)c->flags.vals[i];
        flag_node *n = calloc(1, sizeof *n);
        if (!n) {
            c->flags.vals[i] = 0;
            goto fail;
        }
        *n = *f;
        n->waiters = (qlist){ 0 };  /* quiescent: nobody waits */
        n->vc = check_vc_ref(f->vc);
        n->values = NULL;
        n->snaps = NULL;
        n->n_sets = n->cap_sets = 0;
        c->flags.vals[i] = (uint64_t)(uintptr_t)n;
        if (f->n_sets) {
            n->values = malloc(f->n_sets * sizeof *n->values);
            n->snaps = malloc(f->n_sets * sizeof *n->snaps);
            if (!n->values || !n->snaps)
                goto fail;
            memcpy(n->values, f->values, f->n_sets * sizeof *n->values);
            for (uint64_t k = 0; k < f->n_sets; k++) {
                n->snaps[k] = f->snaps[k];
                n->snaps[k].vc = check_vc_ref(f->snaps[k].vc);
            }
            n->n_sets = n->cap_sets = f->n_sets;
        }
    }
    c->flag_totals = e->flag_totals;
    c->record_last = e->record_last;
    c->flag_last = e->flag_last;
    c->inexact = e->inexact;
    return c;
fail:
    check_engine_free(c);
    return NULL;
}

static bool snap_equal(const check_snap *a, const check_snap *b)
{
    return a->queue == b->queue && a->own == b->own && check_vc_equal(a->vc, b->vc);
}

bool check_engine_same(const check_engine *a, const check_engine *b)
{
    if (a->n_q != b->n_q || a->fed != b->fed || !trace_binder_same(a->bind, b->bind))
        return false;
    for (uint32_t q = 0; q < a->n_q; q++) {
        if (a->q[q].own != b->q[q].own || a->q[q].head || b->q[q].head ||
            !check_vc_equal(a->q[q].vc, b->q[q].vc))
            return false;
    }
    for (uint32_t i = 0; i < a->dirty_events.cap; i++) {
        if (!a->dirty_events.used[i])
            continue;
        uint64_t *x = trace_u64map_get(&a->events, a->dirty_events.keys[i]);
        uint64_t *y = trace_u64map_get(&b->events, a->dirty_events.keys[i]);
        if (!x && !y)
            continue;           /* pruned in both: no later wait reads it */
        if (!x || !y)
            return false;
        const ev_node *n = (const ev_node *)(uintptr_t)*x, *m = (const ev_node *)(uintptr_t)*y;
        if (n->seq != m->seq || n->executed != m->executed || !snap_equal(&n->snap, &m->snap))
            return false;
    }
    for (uint32_t i = 0; i < a->dirty_flags.cap; i++) {
        if (!a->dirty_flags.used[i])
            continue;
        uint64_t *x = trace_u64map_get(&a->flags, a->dirty_flags.keys[i]);
        uint64_t *y = trace_u64map_get(&b->flags, a->dirty_flags.keys[i]);
        if (!x && !y)
            continue;
        if (!x || !y)
            return false;
        const flag_node *n = (const flag_node *)(uintptr_t)*x, *m = (const flag_node *)(uintptr_t)*y;
        if (n->ran != m->ran || n->passed != m->passed ||
            (n->passed && n->passed_q != m->passed_q) || !check_vc_equal(n->vc, m->vc) ||
            n->n_sets != m->n_sets)
            return false;
        for (uint64_t k = 0; k < n->n_sets; k++)
            if (n->values[k] != m->values[k] || !snap_equal(&n->snaps[k], &m->snaps[k]))
                return false;
    }
    uint32_t ns = a->n_shadow > b->n_shadow ? a->n_shadow : b->n_shadow;
    for (uint32_t i = 0; i < ns; i++) {
        if (i < a->n_shadow && !a->dirty_root[i])
            continue;
        const check_shadow *x = i < a->n_shadow ? a->shadow[i] : NULL;
        const check_shadow *y = i < b->n_shadow ? b->shadow[i] : NULL;
        if (!check_shadow_equal(x, y))
            return false;
    }
    return true;
}
