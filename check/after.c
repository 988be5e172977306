/*
 * after.c -- which pending statements can only run after a given pending
 * one: the "ordered after the await" of ruling 1 (docs/semantics.md, "A
 * flag with several signals").
 *
 * An `await F` is released once every signal of F that is not ordered after
 * the await has run, and at least one signal exists. A signal ordered after
 * the await cannot have run while the await has not, so when the input ends
 * it is among the pending statements, and so is every statement on the way
 * from the await to it. The engine therefore asks this file, for a blocked
 * await, which pending statements follow it through the edges that do not
 * depend on how flags are released:
 *
 *   queue order    the statements behind it in its queue (a host's submit
 *                  markers included: what the host submits later follows)
 *   events         a wait bound to a record that follows it
 *   host syncs     a sync on a stream whose statements before the sync
 *                  include one that follows it
 *   generations    every arrival of a barrier or collective generation one
 *                  of whose arrivals follows it
 *   messages       the recv of a send that follows it
 *
 * Flags and value semaphores are left out on purpose: whether another await
 * waits for a signal is what ruling 1 decides, so counting its release as an
 * edge would make two awaits that each wait for a signal behind the other (a
 * deadlock) release each other.
 *
 * Cost: one marking is O(pending statements), indexes built once per call;
 * the engine calls it only for queues blocked at an await when the input has
 * ended, and again after each release.
 */
#include "engine.h"

typedef struct after_index {
    check_pend **p;             /* pending statements and markers */
    uint32_t *next;             /* chain of p[i]'s index (UINT32_MAX: end) */
    uint32_t n, cap;
    trace_u64map waits;         /* ev_node* -> 1 + first wait bound to it */
    trace_u64map members;       /* gen_state* -> 1 + first arrival of it */
    trace_u64map recvs;         /* message id -> 1 + its recv */
    trace_u64map syncs;         /* stream -> 1 + first sync item on it (in sync_at) */
    uint32_t *sync_at, *sync_next;
    uint64_t *sync_n;           /* the item's request: the stream's first n statements */
    uint32_t n_sync, cap_sync;
    uint64_t *min_pos;          /* per stream: lowest position marked */
    uint32_t *work;
    uint32_t n_work;
    bool oom;
} after_index;

static uint32_t add_pend(after_index *x, check_pend *p)
{
    if (x->n == x->cap) {
        uint32_t cap = x->cap ? x->cap * 2 : 64;
        check_pend **np = realloc(x->p, cap * sizeof *np);
        if (np)
            x->p = np;
        uint32_t *nn = np ? realloc(x->next, cap * sizeof *nn) : NULL;
        if (nn)
            x->next = nn;
        if (!np || !nn) {
            x->oom = true;
            return UINT32_MAX;
        }
        x->cap = cap;
    }
    x->p[x->n] = p;
    x->next[x->n] = UINT32_MAX;
    return x->n++;
}

/* Puts index i at the head of the chain of key in map m. */
static void chain(after_index *x, trace_u64map *m, uint64_t key, uint32_t i, uint32_t *next)
{
    uint64_t *v = trace_u64map_put(m, key, 0);
    if (!v) {
        x->oom = true;
        return;
    }
    next[i] = *v ? (uint32_t)(*v - 1) : UINT32_MAX;
    *v = (uint64_t)i + 1;
}

static void add_sync(after_index *x, uint32_t pend, uint32_t stream, uint64_t n)
{
    if (x->n_sync == x->cap_sync) {
        uint32_t cap = x->cap_sync ? x->cap_sync * 2 : 16;
        uint32_t *a = realloc(x->sync_at, cap * sizeof *a);
        if (a)
            x->sync_at = a;
        uint32_t *b = a ? realloc(x->sync_next, cap * sizeof *b) : NULL;
        if (b)
            x->sync_next = b;
        uint64_t *c = b ? realloc(x->sync_n, cap * sizeof *c) : NULL;
        if (c)
            x->sync_n = c;
        if (!a || !b || !c) {
            x->oom = true;
            return;
        }
        x->cap_sync = cap;
    }
    uint32_t i = x->n_sync++;
    x->sync_at[i] = pend;
    x->sync_n[i] = n;
    chain(x, &x->syncs, stream, i, x->sync_next);
}

static void index_build(check_engine *e, after_index *x)
{
    memset(x, 0, sizeof *x);
    x->min_pos = malloc((e->n_q ? e->n_q : 1) * sizeof *x->min_pos);
    if (!x->min_pos) {
        x->oom = true;
        return;
    }
    for (uint32_t q = 0; q < e->n_q; q++) {
        x->min_pos[q] = UINT64_MAX;
        uint64_t pos = e->q[q].own;
        for (check_pend *p = e->q[q].head; p; p = p->next) {
            uint32_t i = add_pend(x, p);
            if (i == UINT32_MAX)
                return;
            p->after_idx = i;
            p->after_mark = false;
            if (p->marker)
                continue;
            p->after_pos = pos++;
            if (p->removed)
                continue;
            if (p->s.kind == TRACE_WAIT && p->bind)
                chain(x, &x->waits, (uint64_t)(uintptr_t)p->bind, i, x->next);
            else if (p->gen)
                chain(x, &x->members, (uint64_t)(uintptr_t)p->gen, i, x->next);
            else if (p->s.kind == TRACE_RECV) {
                uint64_t *v = trace_u64map_put(&x->recvs, p->match, 0);
                if (!v)
                    x->oom = true;
                else
                    *v = (uint64_t)i + 1;
            } else if (p->s.kind == TRACE_SYNC) {
                for (uint32_t k = 0; k < p->n_items; k++)
                    if (p->items[k].req && !p->items[k].req->filled)
                        add_sync(x, i, p->items[k].req->stream, p->items[k].req->n);
            }
        }
    }
    x->work = malloc((x->n ? x->n : 1) * sizeof *x->work);
    if (!x->work)
        x->oom = true;
}

static void index_free(after_index *x)
{
    free(x->p);
    free(x->next);
    free(x->sync_at);
    free(x->sync_next);
    free(x->sync_n);
    free(x->min_pos);
    free(x->work);
    trace_u64map_free(&x->waits);
    trace_u64map_free(&x->members);
    trace_u64map_free(&x->recvs);
    trace_u64map_free(&x->syncs);
}

static void mark(after_index *x, check_pend *p)
{
    if (!p || p->after_mark)
        return;
    p->after_mark = true;
    x->work[x->n_work++] = p->after_idx;
}

static void mark_chain(after_index *x, const trace_u64map *m, uint64_t key)
{
    const uint64_t *v = trace_u64map_get(m, key);
    for (uint32_t i = v ? (uint32_t)(*v - 1) : UINT32_MAX; i != UINT32_MAX; i = x->next[i])
        mark(x, x->p[i]);
}

/* Follows the edges out of p (see the head comment). */
static void follow(check_engine *e, after_index *x, check_pend *p)
{
    mark(x, p->next);
    if (p->marker) {
        mark(x, p->target);
        return;
    }
    /* a removed statement (the minimiser's) keeps its place in its queue,
     * so a sync still waits for it, and a removed record still runs */
    uint32_t q = p->s.queue;
    if (q < e->n_q && e->q[q].is_stream && p->after_pos < x->min_pos[q]) {
        x->min_pos[q] = p->after_pos;
        const uint64_t *v = trace_u64map_get(&x->syncs, q);
        for (uint32_t i = v ? (uint32_t)(*v - 1) : UINT32_MAX; i != UINT32_MAX;
             i = x->sync_next[i])
            if (x->sync_n[i] > p->after_pos)
                mark(x, x->p[x->sync_at[i]]);
    }
    if (p->s.kind == TRACE_RECORD && p->rec)
        mark_chain(x, &x->waits, (uint64_t)(uintptr_t)p->rec);
    if (p->removed)
        return;
    if (p->gen)
        mark_chain(x, &x->members, (uint64_t)(uintptr_t)p->gen);
    if (p->s.kind == TRACE_SEND) {
        const uint64_t *v = trace_u64map_get(&x->recvs, p->match);
        if (v)
            mark(x, x->p[*v - 1]);
    }
}

int check_after_mark(check_engine *e, const check_pend *from)
{
    after_index x;
    index_build(e, &x);
    if (!x.oom) {
        check_pend *f = x.p[from->after_idx];
        f->after_mark = true;
        follow(e, &x, f);
        while (x.n_work)
            follow(e, &x, x.p[x.work[--x.n_work]]);
    }
    bool oom = x.oom;
    index_free(&x);
    return oom ? -1 : 0;
}
