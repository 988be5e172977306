/*
 * after.c -- ruling 1 when the input has ended: which pending statements
 * can only run after a given pending one ("ordered after the await"), and
 * which blocked awaits that releases (docs/semantics.md, "A flag with
 * several signals").
 *
 * The rule. An `await F` is released once every signal of F that is not
 * ordered after the await has run, and at least one such signal has run.
 * The engine releases an await whose signals have all run as it goes; the
 * others are still blocked when the input ends, and so is every signal
 * ordered after them. So when nothing can run any more, the engine asks
 * this file about each queue blocked at an await a signal of whose flag has
 * run: if every signal of the flag that has not run is ordered after the
 * await, the await is released (check_after_release), its queue runs on,
 * and the question is asked again of what is still blocked. An await with
 * no signal that has run stays blocked: a hang, whatever its signals wait
 * for (`h await f` followed by `s signal f` that h submits: a deadlock).
 *
 * "Ordered after." D(A), the pending statements that can only run after
 * pending statement A, is the least set that holds A and is closed under
 * these edges (x is in D(A) when what x waits for is):
 *
 *   queue order    the statements behind x in its queue (a host's submit
 *                  markers included: what the host submits later follows)
 *   submission     the statement a marker submits
 *   events         a wait bound to a record
 *   host syncs     a sync on a stream whose statements before the sync
 *                  include x
 *   generations    every arrival of a barrier or collective generation one
 *                  of whose arrivals is x
 *   messages       the recv of the send x
 *   awaits         a pending `await G` none of whose signals has run, when
 *                  at least one pending signal of G is in D(A) and every
 *                  other one is in D(A) or in D(await): each signal that
 *                  could release it can only come after A (or after the
 *                  await itself, so it does not count). Likewise an `await
 *                  S >=V` of a value semaphore that no set that ran can
 *                  release (the engine tried it at the head of its queue,
 *                  or no set that ran reaches V), with the pending sets of
 *                  S whose value reaches V.
 *
 * D(await) is needed inside D(A), and D(A) inside D(await): both only
 * grow with each other, so the least solution is found by rounds. Each
 * round computes D of the statements asked about and of every await met
 * (its "own" signals, those in its D, are kept as S(await)), until no S
 * grows. Starting from empty S, an await's own later signal counts as
 * one that could release it until its S holds it; from then on it does
 * not. The solution is unique (every step only adds), so the answer does
 * not depend on the order in which queues or awaits are visited, and
 * releasing one await never changes another's answer: a statement in D(A)
 * cannot run while A is blocked.
 *
 * An await one of whose flag's signals has run is not ordered after
 * anything by the "awaits" edge: whether it is released then depends on
 * which of its other signals it waits for, which is what this rule
 * decides. Counting it would let two awaits, each holding back a signal
 * of the other's flag while a third queue signalled both flags, release
 * each other; they are left blocked (a hang: each waits for a signal only
 * the other's release can run), and the semantics page says how to fix
 * such a trace. Two awaits that each hold back the only signal of the
 * other's flag are a plain deadlock.
 *
 * Cost. One marking is O(pending statements), indexes built once per
 * question; a question takes a round per level of awaits nested in each
 * other's signals (one or two in the traces we know). The engine asks only
 * when nothing can run, and first tries the common case without an index:
 * every signal the blocked await's flag still has is behind it on its own
 * queue (a flag signalled again by the queue that awaits it).
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
    trace_u64map signals;       /* flag_node* -> 1 + first pending signal or set */
    trace_u64map awaits;        /* flag_node* -> 1 + first pending await */
    uint32_t *sync_at, *sync_next;
    uint64_t *sync_n;           /* the item's request: the stream's first n statements */
    uint32_t n_sync, cap_sync;
    /* the pending awaits: aw[k] is the index of the k-th; aw_of[i] its k */
    uint32_t *aw, *aw_of;
    uint32_t n_aw;
    uint32_t *n_rel;            /* per await: pending signals (sets) that could release it */
    bool *blocked;              /* per await: nothing that ran can release it */
    uint32_t **own;             /* per await: S, those in its D, sorted (NULL: none) */
    uint32_t *n_own;
    bool *asked;                /* per await: its D is computed each round */
    uint32_t *interest;         /* the awaits whose D is asked */
    uint32_t n_interest;
    bool grew;                  /* this round added an await or an own signal */
    bool through_awaits;        /* follow the "awaits" edge (else the others only) */
    /* one marking */
    uint32_t epoch;
    uint32_t *stamp;            /* per statement: epoch when marked */
    uint32_t *aw_stamp, *need;  /* per await: epoch of need, signals still to mark */
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

/* The first index of key's chain in m (UINT32_MAX: none). */
static uint32_t chain_head(const trace_u64map *m, uint64_t key)
{
    const uint64_t *v = trace_u64map_get(m, key);
    return v ? (uint32_t)(*v - 1) : UINT32_MAX;
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

/* A signal (or a set of a value semaphore) that takes part in ruling 1. */
static bool is_signal(const check_pend *p)
{
    return !p->marker && !p->removed && p->flag && p->s.kind == TRACE_SIGNAL;
}

static bool is_await(const check_pend *p)
{
    return !p->marker && !p->removed && p->flag && p->s.kind == TRACE_AWAIT;
}

/* Pending set i can release pending semaphore await a. */
static bool releases(const after_index *x, uint32_t i, uint32_t a)
{
    return x->p[i]->s.count >= x->p[a]->s.count;
}

/* Nothing that has run can release pending await p: no signal of its flag
 * has run; for a value semaphore, the engine found no set that releases it
 * (it heads its queue), or no set that ran reaches its value. Else p may
 * pass without anything still pending: it takes no "awaits" edge. */
static bool await_blocked(const check_engine *e, const check_pend *p)
{
    const flag_node *f = p->flag;
    if (!p->s.sem)
        return f->ran == 0;
    if (p == e->q[p->s.queue].head && !p->unsubmitted)
        return true;
    for (uint64_t i = 0; i < f->n_sets; i++)
        if (f->values[i] >= p->s.count)
            return false;
    return true;
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
            else if (is_signal(p))
                chain(x, &x->signals, (uint64_t)(uintptr_t)p->flag, i, x->next);
            else if (is_await(p)) {
                chain(x, &x->awaits, (uint64_t)(uintptr_t)p->flag, i, x->next);
                x->n_aw++;
            } else if (p->s.kind == TRACE_RECV) {
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
    uint32_t n = x->n ? x->n : 1, na = x->n_aw ? x->n_aw : 1;
    x->work = malloc(n * sizeof *x->work);
    x->stamp = calloc(n, sizeof *x->stamp);
    x->aw_of = malloc(n * sizeof *x->aw_of);
    x->aw = malloc(na * sizeof *x->aw);
    x->n_rel = calloc(na, sizeof *x->n_rel);
    x->own = calloc(na, sizeof *x->own);
    x->n_own = calloc(na, sizeof *x->n_own);
    x->asked = calloc(na, sizeof *x->asked);
    x->interest = malloc(na * sizeof *x->interest);
    x->aw_stamp = calloc(na, sizeof *x->aw_stamp);
    x->need = calloc(na, sizeof *x->need);
    x->blocked = calloc(na, sizeof *x->blocked);
    if (!x->work || !x->stamp || !x->aw_of || !x->aw || !x->n_rel || !x->own || !x->n_own ||
        !x->asked || !x->interest || !x->aw_stamp || !x->need || !x->blocked) {
        x->oom = true;
        return;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < x->n; i++) {
        x->aw_of[i] = UINT32_MAX;
        if (!is_await(x->p[i]))
            continue;
        x->aw_of[i] = k;
        x->aw[k] = i;
        x->blocked[k] = await_blocked(e, x->p[i]);
        /* what could release it: every pending signal of its flag, or the
         * pending sets of its semaphore that reach its value */
        for (uint32_t j = chain_head(&x->signals, (uint64_t)(uintptr_t)x->p[i]->flag);
             j != UINT32_MAX; j = x->next[j])
            x->n_rel[k] += !x->p[i]->s.sem || releases(x, j, i);
        k++;
    }
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
    free(x->stamp);
    free(x->aw_of);
    free(x->aw);
    free(x->n_rel);
    free(x->blocked);
    if (x->own)
        for (uint32_t k = 0; k < x->n_aw; k++)
            free(x->own[k]);
    free(x->own);
    free(x->n_own);
    free(x->asked);
    free(x->interest);
    free(x->aw_stamp);
    free(x->need);
    trace_u64map_free(&x->waits);
    trace_u64map_free(&x->members);
    trace_u64map_free(&x->recvs);
    trace_u64map_free(&x->syncs);
    trace_u64map_free(&x->signals);
    trace_u64map_free(&x->awaits);
}

static bool marked(const after_index *x, uint32_t i)
{
    return x->stamp[i] == x->epoch;
}

static void mark(after_index *x, uint32_t i)
{
    if (i == UINT32_MAX || marked(x, i))
        return;
    x->stamp[i] = x->epoch;
    x->work[x->n_work++] = i;
}

static void mark_pend(after_index *x, const check_pend *p)
{
    if (p)
        mark(x, p->after_idx);
}

static void mark_chain(after_index *x, const trace_u64map *m, uint64_t key)
{
    for (uint32_t i = chain_head(m, key); i != UINT32_MAX; i = x->next[i])
        mark(x, i);
}

/* Signal i of await a's flag is one of a's own (in D(a)). */
static bool own_signal(const after_index *x, uint32_t a, uint32_t i)
{
    const uint32_t *s = x->own[a];
    uint32_t lo = 0, hi = x->n_own[a];
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (s[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < x->n_own[a] && s[lo] == i;
}

/* Signal (or set) i was marked: the awaits it is one of the last hopes of
 * (the "awaits" edge of the head comment). */
static void signal_marked(after_index *x, uint32_t i)
{
    const check_pend *s = x->p[i];
    const flag_node *f = s->flag;
    for (uint32_t j = chain_head(&x->awaits, (uint64_t)(uintptr_t)f); j != UINT32_MAX;
         j = x->next[j]) {
        uint32_t a = x->aw_of[j];
        if (marked(x, j) || !x->blocked[a] || (s->s.sem && !releases(x, i, j)))
            continue;
        if (!x->asked[a]) {
            /* met: its own signals are needed from the next round on */
            x->asked[a] = true;
            x->interest[x->n_interest++] = a;
            x->grew = true;
        }
        if (x->aw_stamp[a] != x->epoch) {
            x->aw_stamp[a] = x->epoch;
            x->need[a] = x->n_rel[a] - x->n_own[a];
        }
        if (!own_signal(x, a, i))
            x->need[a]--;
        if (x->need[a] == 0)
            mark(x, j);
    }
}

/* Follows the edges out of statement i (see the head comment). */
static void follow(check_engine *e, after_index *x, uint32_t i)
{
    const check_pend *p = x->p[i];
    mark_pend(x, p->next);
    if (p->marker) {
        mark_pend(x, p->target);
        return;
    }
    /* a removed statement (the minimiser's) keeps its place in its queue,
     * so a sync still waits for it, and a removed record still runs */
    uint32_t q = p->s.queue;
    if (q < e->n_q && e->q[q].is_stream && p->after_pos < x->min_pos[q]) {
        x->min_pos[q] = p->after_pos;
        for (uint32_t k = chain_head(&x->syncs, q); k != UINT32_MAX; k = x->sync_next[k])
            if (x->sync_n[k] > p->after_pos)
                mark(x, x->sync_at[k]);
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
            mark(x, (uint32_t)(*v - 1));
    }
    if (is_signal(p) && x->through_awaits)
        signal_marked(x, i);
}

/* Marks D(statement i) with the own signals known so far. */
static void trav(check_engine *e, after_index *x, uint32_t i)
{
    x->epoch++;
    for (uint32_t q = 0; q < e->n_q; q++)
        x->min_pos[q] = UINT64_MAX;
    x->n_work = 0;
    mark(x, i);
    while (x->n_work)
        follow(e, x, x->work[--x->n_work]);
}

/* Await a's own signals: those of what could release it that D(a), just
 * marked, holds. Sets x->grew when there are more than before. */
static void take_own(after_index *x, uint32_t a)
{
    uint32_t j = x->aw[a];
    uint32_t n = 0;
    for (uint32_t i = chain_head(&x->signals, (uint64_t)(uintptr_t)x->p[j]->flag);
         i != UINT32_MAX; i = x->next[i])
        n += marked(x, i) && (!x->p[j]->s.sem || releases(x, i, j));
    if (n <= x->n_own[a])
        return;                 /* D only grows: the same set */
    uint32_t *s = realloc(x->own[a], n * sizeof *s);
    if (!s) {
        x->oom = true;
        return;
    }
    n = 0;
    for (uint32_t i = chain_head(&x->signals, (uint64_t)(uintptr_t)x->p[j]->flag);
         i != UINT32_MAX; i = x->next[i])
        if (marked(x, i) && (!x->p[j]->s.sem || releases(x, i, j)))
            s[n++] = i;
    /* the chain runs from the last statement indexed to the first */
    for (uint32_t lo = 0, hi = n; lo + 1 < hi; lo++, hi--) {
        uint32_t t = s[lo];
        s[lo] = s[hi - 1];
        s[hi - 1] = t;
    }
    x->own[a] = s;
    x->n_own[a] = n;
    x->grew = true;
}

/* Rounds until every await met knows its own signals (the head comment);
 * then the last marking of each of roots[0..n) is its D. done() is called
 * with each root right after each of its markings: each is a part of its D
 * (an await met later can only add to it), the last one all of it. */
typedef void (*after_done_fn)(check_engine *e, after_index *x, uint32_t root, void *ctx);
static void solve(check_engine *e, after_index *x, const uint32_t *roots, uint32_t n,
                  after_done_fn done, void *ctx)
{
    do {
        x->grew = false;
        for (uint32_t k = 0; k < x->n_interest && !x->oom; k++) {
            trav(e, x, x->aw[x->interest[k]]);
            take_own(x, x->interest[k]);
        }
        for (uint32_t k = 0; k < n && !x->oom; k++) {
            trav(e, x, roots[k]);
            if (done)
                done(e, x, roots[k], ctx);
        }
    } while (x->grew && !x->oom);
}

int check_after_mark(check_engine *e, const check_pend *from, bool through_awaits)
{
    after_index x;
    index_build(e, &x);
    x.through_awaits = through_awaits;
    if (!x.oom) {
        uint32_t root = from->after_idx;
        solve(e, &x, &root, 1, NULL, NULL);
        for (uint32_t i = 0; i < x.n && !x.oom; i++)
            x.p[i]->after_mark = marked(&x, i);
    }
    bool oom = x.oom;
    index_free(&x);
    return oom ? -1 : 0;
}

/* A queue blocked at `await F` that ruling 1 may release now: F is a flag
 * and one of its signals has run. */
static bool candidate(const check_pend *p)
{
    return p && !p->marker && !p->unsubmitted && !p->removed && p->s.kind == TRACE_AWAIT &&
           !p->s.sem && p->flag && p->flag->ran > 0;
}

/* Whether every signal of p's flag that has not run is behind p on its own
 * queue (p heads the queue). Stops as soon as it has seen them all. */
static bool signals_behind(const check_pend *p)
{
    const flag_node *f = p->flag;
    uint64_t need = (f->total != FLAG_UNKNOWN ? f->total : f->fed) - f->ran, seen = 0;
    for (const check_pend *x = p->next; x && seen < need; x = x->next)
        seen += is_signal(x) && x->flag == f;
    return seen >= need;
}

/* done(): the root, a candidate, is released when D holds every pending
 * signal of its flag. */
static void release_if_after(check_engine *e, after_index *x, uint32_t root, void *ctx)
{
    (void)e;
    check_pend *p = x->p[root];
    if (p->forced)
        return;
    for (uint32_t i = chain_head(&x->signals, (uint64_t)(uintptr_t)p->flag); i != UINT32_MAX;
         i = x->next[i])
        if (!marked(x, i))
            return;
    p->forced = true;
    ++*(uint32_t *)ctx;
}

int check_after_release(check_engine *e)
{
    uint32_t released = 0, n_roots = 0;
    check_pend **roots = NULL;
    for (uint32_t q = 0; q < e->n_q; q++) {
        check_pend *p = e->q[q].head;
        if (!candidate(p) || p->forced)
            continue;
        if (signals_behind(p)) {
            p->forced = true;
            released++;
            continue;
        }
        check_pend **r = realloc(roots, (n_roots + 1) * sizeof *r);
        if (!r) {
            free(roots);
            return -1;
        }
        roots = r;
        roots[n_roots++] = p;
    }
    if (!n_roots)
        return (int)released;
    after_index x;
    index_build(e, &x);
    x.through_awaits = true;
    uint32_t *idx = x.oom ? NULL : malloc(n_roots * sizeof *idx);
    if (idx) {
        for (uint32_t k = 0; k < n_roots; k++)
            idx[k] = roots[k]->after_idx;
        solve(e, &x, idx, n_roots, release_if_after, &released);
    }
    bool oom = x.oom || !idx;
    free(idx);
    free(roots);
    index_free(&x);
    return oom ? -1 : (int)released;
}
