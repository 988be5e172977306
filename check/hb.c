/*
 * hb.c -- the happens-before engine: advances the queues of a trace the way
 * a scheduler would, computes happens-before (HB) with vector clocks, and
 * checks every access against the shadow memory of its root buffer.
 *
 * THE RULES (docs/trace-format.md, "Order and happens-before"). The file's
 * statement order is the submission order. HB is the smallest transitive
 * relation with:
 *
 *  1. Queue order: on one queue each statement HB the next.
 *  2. Submission: a stream statement submitted by host H (by=H, or the only
 *     host) comes after everything H did before submitting it.
 *  3. Events: `wait E` binds to the most recent `record E` earlier in the
 *     file; the recorder's statements up to the record HB what follows the
 *     wait. A later re-record does not change the binding. A wait with no
 *     record before it orders nothing and is a `wait-unrecorded` finding.
 *  4. Host syncs: `sync S` (device=D: each stream of D; all: every stream):
 *     what was submitted to S before the sync HB the host's next statement.
 *  5. Barriers: in generation k (each queue's k-th arrival at the barrier),
 *     every participant's earlier statements HB every participant's later
 *     ones.
 *  6. Flags: `signal F` HB what follows any `await F`, wherever the signal
 *     stands in the file, unless the signal is ordered after that await
 *     (ruling 1): an await is released once every signal not ordered after
 *     it has run, and one exists. Such signals are pending when the input
 *     ends; release_awaits asks after.c which ones follow the await.
 *  6b. Value semaphores: the sets of S happen one after another (else a
 *     semaphore-race); `await S >=V` is released by the first set, from the
 *     last set that HB the await on, whose value reaches V
 *     (trace_sem_release; sem_await and sem_set below).
 *  7. Collectives: the k-th collective of each queue on a communicator is
 *     generation k, a barrier whose own accesses happen inside it.
 *  8. Host copies and ops complete before the host's next statement.
 *  9. Point to point: a send HB what follows the recv it is paired with
 *     (trace_binder: the k-th send and the k-th recv of a channel). A send
 *     reads its buffer when it runs and does not wait for its recv (an
 *     eager send); a recv blocks until its send ran and writes its buffer
 *     after that. A flag_node with exactly one signal carries the edge
 *     (keyed P2P_KEY(message), apart from flag names). A send never
 *     matched is an unmatched-send at the end; a recv never matched hangs.
 *  A blocking statement (host wait/sync/await, any barrier, collective or
 *  await) completes only when released: what its queue does or submits
 *  afterwards comes after the release.
 *
 * HOW. Statements are fed in file order. Each queue has a list of pending
 * statements: those that cannot run yet. A statement runs when its queue has
 * nothing pending before it and its condition holds: its bound record has
 * run (wait), every stream it syncs on has run the statements submitted
 * before the sync (sync), its flag is set (await), its generation is
 * complete (barrier, collective). A stream statement is submitted when its
 * host reaches it: while the host is blocked, the statement takes its place
 * in its stream's list (queue order is file order) but cannot run, and a
 * "submit marker" in the host's list releases it, with the host's clock of
 * that moment, when the host gets there.
 * When something is released (a record runs, a flag is set, a stream
 * advances past a sync point, a generation completes) the queues waiting
 * for it are put on a worklist and advanced. At the end of the input, the
 * queues that still hold pending statements can never advance: the hang.
 *
 * Clocks. Each queue has a shared sparse clock (vclock.c) and its own
 * counter `own` (statements it has run) kept outside the clock, so running
 * a statement never copies a clock. A statement's epoch is (queue, own).
 * Snapshots (records, sync points, submissions, barrier arrivals) take a
 * reference to the clock. Joining a clock already below the destination is
 * free, and a stream remembers the last host clock it joined, so the common
 * case (a host submitting many statements between two syncs) is one
 * integer raise per statement. Nothing is O(queues) per statement: a
 * `sync all` visits the streams, each in O(1) unless it has news. A
 * generation's joined clock is built in one sorted pass (check_vc_acc) and
 * made flat; its participants share it, and what they learn afterwards is
 * a small delta over it, so that even after a collective over thousands of
 * queues a join or a comparison costs O(delta log queues) (vclock.c).
 *
 * Races. Each access becomes a site (its statement's epoch and name) and
 * updates the shadow of its root buffer (shadow.c), FastTrack style: a read
 * is checked against the last write, a write against the last write and
 * the reads since it; the reads since the last write are one site, or a
 * per-queue set when reads were concurrent. alloc and free are writes of
 * the whole buffer; each free and each alloc after a free is also kept in
 * the bytes' lifetime marks, an alloc with the frees it is ordered after.
 * Ruling 2: an access ordered after some free F and after no alloc A with
 * F HB A is a use-after-free (uaf_free), whatever order the engine met them
 * in; an alloc or free it is not ordered after races with it instead.
 */
#include "engine.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Small helpers.                                                      */

/* The flags map key of point-to-point message m: above every flag name. */
#define P2P_KEY(m) (1ull << 63 | (m))

void check_snap_release(check_snap *s)
{
    check_vc_unref(s->vc);
    s->vc = NULL;
}

static check_snap snap_of(check_engine *e, uint32_t q)
{
    check_snap s = { check_vc_ref(e->q[q].vc), q, e->q[q].own };
    return s;
}

/* Queue q learns snapshot s. */
static void learn(check_engine *e, uint32_t q, const check_snap *s)
{
    qstate *Q = &e->q[q];
    if (check_vc_join(&Q->vc, s->vc) != 0)
        e->oom = true;
    if (s->queue != q && s->queue != TRACE_NONE && check_vc_raise(&Q->vc, s->queue, s->own) != 0)
        e->oom = true;
}

static void push_work(check_engine *e, uint32_t q)
{
    if (e->q[q].in_work)
        return;
    if (e->n_work == e->cap_work) {
        /* compact the consumed head first */
        if (e->work_head) {
            memmove(e->work, e->work + e->work_head, (e->n_work - e->work_head) * sizeof *e->work);
            e->n_work -= e->work_head;
            e->work_head = 0;
        }
        if (e->n_work == e->cap_work) {
            uint32_t cap = e->cap_work ? e->cap_work * 2 : 64;
            uint32_t *p = realloc(e->work, cap * sizeof *p);
            if (!p) {
                e->oom = true;
                return;
            }
            e->work = p;
            e->cap_work = cap;
        }
    }
    e->work[e->n_work++] = q;
    e->q[q].in_work = true;
}

static void wake_all(check_engine *e, qlist *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        push_work(e, l->q[i]);
    l->n = 0;
}

void check_ev_unref(ev_node *n)
{
    if (n && --n->refs == 0) {
        check_snap_release(&n->snap);
        free(n->waiters.q);
        free(n);
    }
}

static void req_unref(sync_req *r)
{
    if (r && --r->refs == 0) {
        check_snap_release(&r->snap);
        free(r);
    }
}

static void gen_unref(gen_state *g)
{
    if (!g || --g->refs > 0)
        return;
    for (uint32_t i = 0; i < g->n_arrived; i++)
        check_snap_release(&g->arr[i].snap);
    free(g->arr);
    free(g);
}

static void pend_release(check_pend *p)
{
    check_snap_release(&p->sub);
    check_ev_unref(p->bind);
    check_ev_unref(p->rec);
    gen_unref(p->gen);
    p->bind = p->rec = NULL;
    p->gen = NULL;
    for (uint32_t i = 0; i < p->n_items; i++) {
        req_unref(p->items[i].req);
        check_snap_release(&p->items[i].snap);
    }
    if (p->items != p->item_local)
        free(p->items);
    p->items = NULL;
    p->n_items = 0;
    if (p->waited) {
        free(p->waited);
        p->waited = NULL;
    }
    if (p->heap) {
        free((void *)p->s.access);
        free(p);
    }
}

/* A heap copy of a stack pending statement (which is emptied). */
static check_pend *pend_persist(check_engine *e, check_pend *p)
{
    if (p->heap)
        return p;
    check_pend *h = malloc(sizeof *h);
    trace_access *acc = p->s.n_access ? malloc(p->s.n_access * sizeof *acc) : NULL;
    if (!h || (p->s.n_access && !acc)) {
        free(h);
        free(acc);
        e->oom = true;
        return NULL;
    }
    *h = *p;
    h->heap = true;
    h->next = NULL;
    if (acc)
        memcpy(acc, p->s.access, p->s.n_access * sizeof *acc);
    h->s.access = acc;
    h->s.attr = NULL;           /* the checker never looks at attributes */
    h->s.n_attr = 0;
    if (p->items == p->item_local)
        h->items = h->item_local;
    /* the stack copy gives its references away */
    p->items = NULL;
    p->n_items = 0;
    p->bind = p->rec = NULL;
    p->gen = NULL;
    p->sub.vc = NULL;
    p->waited = NULL;
    /* generation arrivals point at the pending statement */
    if (h->gen && h->arrived)
        for (uint32_t i = 0; i < h->gen->n_arrived; i++)
            if (h->gen->arr[i].pend == p)
                h->gen->arr[i].pend = h;
    return h;
}

static void pend_append(check_engine *e, uint32_t q, check_pend *p)
{
    qstate *Q = &e->q[q];
    p->next = NULL;
    if (Q->tail)
        Q->tail->next = p;
    else
        Q->head = p;
    Q->tail = p;
    Q->n_pend++;
    if (p->marker)
        Q->n_markers++;
}

static check_pend *pend_pop(check_engine *e, uint32_t q)
{
    qstate *Q = &e->q[q];
    check_pend *p = Q->head;
    Q->head = p->next;
    if (!Q->head)
        Q->tail = NULL;
    Q->n_pend--;
    if (p->marker)
        Q->n_markers--;
    p->next = NULL;
    return p;
}

/* ------------------------------------------------------------------ */
/* Accesses.                                                           */

/* What the access being checked knows of queue q (check_life_knows): the
 * pieces of one access mostly ask about the same queue (their writes and
 * reads came from a few statements), so cur_vc's entry for the last queue
 * asked is kept. */
static inline uint32_t cur_knows(void *ctx, uint32_t q)
{
    check_engine *e = ctx;
    if (q == e->cur_q)
        return UINT32_MAX;
    if (q != e->memo_q) {
        e->memo_q = q;
        e->memo_t = check_vc_get(e->cur_vc, q);
    }
    return e->memo_t;
}

/* Site s happens before the access being checked. */
static inline bool site_hb(check_engine *e, const check_site *s)
{
    return cur_knows(e, s->queue) >= s->time;
}

static void visit_cell(void *ctx, uint64_t lo, uint64_t hi, check_cell *c)
{
    check_engine *e = ctx;
    const check_site *x = &e->cur_site;
    bool writes = e->cur_mode & TRACE_W;
    /* Use after free (ruling 2): ordered after a free, and after no alloc
     * that follows that free (an alloc or free the access is not ordered
     * after races with it instead). */
    const check_life *life = c->life;
    bool unjudged = false;
    const check_site *freed = life && e->cur_kind != TRACE_ALLOC
                                  ? check_life_uaf(life, cur_knows, e, &unjudged)
                                  : NULL;
    if (unjudged && !e->cur_unjudged) {
        e->cur_unjudged = true;     /* counted once per statement */
        e->rep->cov.uaf_unjudged++;
    }
    if (freed)
        check_report_conflict(e->rep, TRACE_FINDING_USE_AFTER_FREE, freed, x, e->cur_root, lo, hi);
    if (c->w.seq != TRACE_NO_SEQ && !site_hb(e, &c->w))
        check_report_conflict(e->rep, TRACE_FINDING_RACE, &c->w, x, e->cur_root, lo, hi);
    if (writes) {
        for (uint32_t i = 0; i < c->n_reads; i++) {
            const check_site *r = check_cell_read(c, i);
            if (r->seq != x->seq && !site_hb(e, r))
                check_report_conflict(e->rep, TRACE_FINDING_RACE, r, x, e->cur_root, lo, hi);
        }
        check_cell_drop_reads(c);
        c->w = *x;
        int rc = 0;
        if (e->cur_kind == TRACE_ALLOC && life)
            rc = check_cell_mark_alloc(c, x, check_life_covers(life, cur_knows, e));
        else if (e->cur_kind == TRACE_FREE)
            rc = check_cell_mark_free(c, x);
        if (rc != 0)
            e->oom = true;
        return;
    }
    /* A read: FastTrack keeps one site while the reads are ordered. */
    bool all_before = true;
    for (uint32_t i = 0; i < c->n_reads && all_before; i++)
        all_before = site_hb(e, check_cell_read(c, i));
    if (all_before)
        check_cell_drop_reads(c);
    if (check_cell_add_read(c, x) != 0)
        e->oom = true;
}

static int shadow_grow(check_engine *e, uint32_t root)
{
    if (root >= e->n_shadow) {
        uint32_t n = e->t->n_buffers > root + 1 ? e->t->n_buffers : root + 1;
        check_shadow **p = realloc(e->shadow, n * sizeof *p);
        uint8_t *d = realloc(e->dirty_root, n);
        if (!p || !d) {
            if (p)
                e->shadow = p;
            if (d)
                e->dirty_root = d;
            return -1;
        }
        memset(p + e->n_shadow, 0, (n - e->n_shadow) * sizeof *p);
        memset(d + e->n_shadow, 0, n - e->n_shadow);
        e->shadow = p;
        e->dirty_root = d;
        e->n_shadow = n;
    }
    if (!e->shadow[root] && !(e->shadow[root] = check_shadow_new()))
        return -1;
    return 0;
}

/* Root's shadow exists: 0, or -1 (OOM). The common case inline. */
static inline int ensure_shadow(check_engine *e, uint32_t root)
{
    return root < e->n_shadow && e->shadow[root] ? 0 : shadow_grow(e, root);
}

/* Inlined: the statement's accesses call it from three places, and the
 * call was 1 % of `check` on bench_capture's worst shape. */
static inline __attribute__((always_inline)) void
access_range(check_engine *e, uint32_t root, uint64_t lo, uint64_t hi, uint8_t mode,
             uint32_t buffer)
{
    if (ensure_shadow(e, root) != 0) {
        e->oom = true;
        return;
    }
    if (e->track)
        e->dirty_root[root] = 1;
    e->cur_mode = mode;
    e->cur_root = root;
    e->cur_site.buffer = buffer;
    e->cur_site.mode = mode;
    if (check_shadow_update(&e->shadow[root], lo, hi, visit_cell, e) != 0)
        e->oom = true;
}

/* trace_submitter() without its scan for the only host (O(queues)). */
static uint32_t submitter(check_engine *e, const trace_stmt *s)
{
    const trace *t = e->t;
    if (s->queue >= e->n_q || !e->q[s->queue].is_stream)
        return TRACE_NONE;
    uint32_t h = s->by;
    if (h == TRACE_NONE) {
        if (t->n_host_queues != 1)
            return TRACE_NONE;
        if (e->only_host == TRACE_NONE || e->only_host >= t->n_queues ||
            t->queues[e->only_host].kind != TRACE_QUEUE_HOST)
            e->only_host = trace_submitter(t, s);
        h = e->only_host;
    }
    if (h >= e->n_q || e->q[h].is_stream)
        return TRACE_NONE;
    return h;
}

/* One access of a statement, resolved to its root. */
typedef struct root_access {
    uint32_t root, buffer;
    uint64_t lo, hi;
    uint8_t mode;
} root_access;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Accesses ra[0..n) of one statement, two of which overlap: each root's
 * bytes are cut where an access starts or ends, and each piece is checked
 * once with every mode the statement has on it (a race's type is what the
 * statement does to the bytes: `r:A[0:16] w:A` reads and writes A[0:16]),
 * named by the first access that covers it. */
static void access_joined(check_engine *e, const root_access *ra, uint32_t n)
{
    uint64_t local[32], *cut = 2 * n <= 32 ? local : malloc(2 * n * sizeof *cut);
    if (!cut) {
        e->oom = true;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        bool first = true;      /* the first access of its root does the root */
        for (uint32_t j = 0; j < i && first; j++)
            first = ra[j].root != ra[i].root;
        if (!first)
            continue;
        uint32_t m = 0;
        for (uint32_t j = i; j < n; j++)
            if (ra[j].root == ra[i].root) {
                cut[m++] = ra[j].lo;
                cut[m++] = ra[j].hi;
            }
        qsort(cut, m, sizeof *cut, cmp_u64);
        uint64_t lo = 0, hi = 0;
        uint8_t mode = 0;
        uint32_t buffer = TRACE_NONE;
        for (uint32_t k = 0; k + 1 < m; k++) {
            uint64_t a = cut[k], b = cut[k + 1];
            if (a == b)
                continue;
            uint8_t md = 0;
            uint32_t bf = TRACE_NONE;
            for (uint32_t j = i; j < n; j++)
                if (ra[j].root == ra[i].root && ra[j].lo <= a && b <= ra[j].hi) {
                    md |= ra[j].mode;
                    if (bf == TRACE_NONE)
                        bf = ra[j].buffer;
                }
            if (md == mode && bf == buffer && a == hi) {
                hi = b;         /* the same piece goes on */
                continue;
            }
            if (mode)
                access_range(e, ra[i].root, lo, hi, mode, buffer);
            lo = a;
            hi = b;
            mode = md;
            buffer = bf;
        }
        if (mode)
            access_range(e, ra[i].root, lo, hi, mode, buffer);
    }
    if (cut != local)
        free(cut);
}

/* Performs the accesses of statement s, run by queue q as its own-th. */
static void do_accesses(check_engine *e, uint32_t q, const trace_stmt *s)
{
    const trace *t = e->t;
    e->cur_q = q;
    e->cur_vc = e->q[q].vc;
    e->memo_q = TRACE_NONE;
    e->cur_kind = s->kind;
    e->cur_site = (check_site){ .seq = s->seq, .queue = q, .time = e->q[q].own,
                                .label = s->label, .line = s->line, .buffer = TRACE_NONE,
                                .by = submitter(e, s), .kind = (uint8_t)s->kind };
    e->cur_unjudged = false;
    if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE) {
        if (s->object < t->n_buffers) {
            const trace_buffer *b = &t->buffers[s->object];
            access_range(e, b->root, b->root_offset, b->root_offset + b->size, TRACE_W, s->object);
        }
    } else if (s->n_access == 1) {
        uint32_t root;
        uint64_t lo, hi;
        trace_access_root(t, &s->access[0], &root, &lo, &hi);
        access_range(e, root, lo, hi, s->access[0].mode, s->access[0].buffer);
    } else if (s->n_access == 2) {
        /* the common case of several, without the array */
        root_access a, b;
        trace_access_root(t, &s->access[0], &a.root, &a.lo, &a.hi);
        trace_access_root(t, &s->access[1], &b.root, &b.lo, &b.hi);
        a.mode = s->access[0].mode;
        b.mode = s->access[1].mode;
        if (a.root == b.root && a.lo < b.hi && b.lo < a.hi) {
            a.buffer = s->access[0].buffer;
            b.buffer = s->access[1].buffer;
            root_access ra[2] = { a, b };
            access_joined(e, ra, 2);
        } else {
            access_range(e, a.root, a.lo, a.hi, a.mode, s->access[0].buffer);
            access_range(e, b.root, b.lo, b.hi, b.mode, s->access[1].buffer);
        }
    } else if (s->n_access > 2) {
        root_access local[8];
        root_access *ra = s->n_access <= 8 ? local : malloc(s->n_access * sizeof *ra);
        if (!ra) {
            e->oom = true;
            return;
        }
        bool overlap = false;
        for (uint32_t i = 0; i < s->n_access; i++) {
            root_access *a = &ra[i];
            trace_access_root(t, &s->access[i], &a->root, &a->lo, &a->hi);
            a->mode = s->access[i].mode;
            a->buffer = s->access[i].buffer;
            for (uint32_t j = 0; j < i && !overlap; j++)
                overlap = ra[j].root == a->root && ra[j].lo < a->hi && a->lo < ra[j].hi;
        }
        if (overlap) {
            access_joined(e, ra, s->n_access);
        } else {
            for (uint32_t i = 0; i < s->n_access; i++)
                access_range(e, ra[i].root, ra[i].lo, ra[i].hi, ra[i].mode, ra[i].buffer);
        }
        if (ra != local)
            free(ra);
    }
}

/* ------------------------------------------------------------------ */
/* Running statements.                                                 */

/* Fills the sync requests that stream q has now satisfied. */
static void stream_advanced(check_engine *e, uint32_t q)
{
    qstate *Q = &e->q[q];
    while (Q->req_head && Q->req_head->n <= Q->own) {
        sync_req *r = Q->req_head;
        Q->req_head = r->next;
        if (!Q->req_head)
            Q->req_tail = NULL;
        r->filled = true;
        r->snap = snap_of(e, q);
        if (r->waiter != TRACE_NONE)
            push_work(e, r->waiter);
        req_unref(r);           /* the stream's reference */
    }
}

/* Completes a generation: everyone learns everyone's arrival; collective
 * accesses happen inside, with the joined clock. */
static void release_gen(check_engine *e, gen_state *g)
{
    check_vc *joined;
    check_vc_acc acc;
    check_vc_acc_init(&acc, NULL);
    for (uint32_t i = 0; i < g->n_arrived; i++) {
        check_vc_acc_join(&acc, g->arr[i].snap.vc);
        check_vc_acc_raise(&acc, g->arr[i].snap.queue, g->arr[i].snap.own);
    }
    if (check_vc_acc_finish(&acc, &joined) != 0)
        e->oom = true;
    check_report_begin_stmt(e->rep);
    for (uint32_t i = 0; i < g->n_arrived; i++) {
        uint32_t q = g->arr[i].queue;
        qstate *Q = &e->q[q];
        check_vc_unref(Q->vc);
        Q->vc = check_vc_ref(joined);
        Q->own++;
        if (g->collective && g->arr[i].pend)
            do_accesses(e, q, &g->arr[i].pend->s);
    }
    check_vc_acc_init(&acc, joined);
    for (uint32_t i = 0; i < g->n_arrived; i++)
        check_vc_acc_raise(&acc, g->arr[i].queue, e->q[g->arr[i].queue].own);
    check_vc_unref(joined);
    if (check_vc_acc_finish(&acc, &joined) != 0)
        e->oom = true;
    /* every participant shares it, and whoever learns one of them joins
     * it: a flat clock, so their deltas over it stay small */
    if (check_vc_compact(&joined) != 0)
        e->oom = true;
    for (uint32_t i = 0; i < g->n_arrived; i++) {
        uint32_t q = g->arr[i].queue;
        check_vc_unref(e->q[q].vc);
        e->q[q].vc = check_vc_ref(joined);
        if (g->arr[i].pend)
            g->arr[i].pend->done = true;
        if (e->q[q].is_stream)
            stream_advanced(e, q);
        push_work(e, q);
    }
    check_vc_unref(joined);
    g->released = true;
}

/* A generation that every participant read so far has passed leaves the
 * table (so memory does not grow with the number of generations). */
static void gen_retire(check_engine *e, gen_state *g)
{
    if (g->released && g->n_arrived == g->n_read) {
        uint64_t *v = trace_u64map_get(&e->gens, g->key);
        if (v && *v == (uint64_t)(uintptr_t)g) {
            trace_u64map_del(&e->gens, g->key);
            gen_unref(g);
        }
    }
}

static int arrive(check_engine *e, uint32_t q, check_pend *p)
{
    gen_state *g = p->gen;
    if (g->n_arrived == g->cap_arr) {
        uint32_t cap = g->cap_arr ? g->cap_arr * 2 : 4;
        arrival *a = realloc(g->arr, cap * sizeof *a);
        if (!a)
            return -1;
        g->arr = a;
        g->cap_arr = cap;
    }
    g->arr[g->n_arrived++] = (arrival){ q, snap_of(e, q), p };
    p->arrived = true;
    /* bind_gen binds at most count arrivals, so the last one releases */
    if (g->n_arrived >= g->count)
        release_gen(e, g);
    gen_retire(e, g);
    return 0;
}

enum { RUN_DONE = 0, RUN_BLOCKED = 1 };


/* ------------------------------------------------------------------ */
/* Value semaphores (rule 6b; the release rule is trace_sem_release).  */

/* Queue q (as it stands now) is ordered after snapshot x. */
static bool covers(const check_engine *e, uint32_t q, const check_snap *x)
{
    if (x->queue == q)
        return x->own <= e->q[q].own;
    return x->queue != TRACE_NONE && check_vc_get(e->q[q].vc, x->queue) >= x->own;
}

/* `await S >=want` on queue q: true when released (q learns the set that
 * released it), false while no set so far reaches the value. */
static bool sem_await(check_engine *e, uint32_t q, flag_node *f, uint64_t want)
{
    uint64_t last = TRACE_NO_SEQ;
    for (uint64_t i = f->n_sets; i-- > 0;)
        if (covers(e, q, &f->snaps[i])) {
            last = i;           /* sets are ordered: every earlier one is covered too */
            break;
        }
    uint64_t rel = trace_sem_release(f->values, f->n_sets, last, want);
    if (rel == TRACE_SEM_PENDING)
        return false;
    if (rel != TRACE_SEM_PASSED)
        learn(e, q, &f->snaps[rel]);
    return true;
}

/* `signal S set=V` ran on queue q (its own already counted). */
static void sem_set(check_engine *e, uint32_t q, flag_node *f, const trace_stmt *s)
{
    if (f->n_sets && !covers(e, q, &f->snaps[f->n_sets - 1])) {
        /* two sets not ordered: the value left depends on timing */
        trace_finding x = { 0 };
        const trace *t = e->t;
        char a[128], b[128];
        x.kind = TRACE_FINDING_SEMAPHORE_RACE;
        x.object = s->object;
        x.first = f->last_set;
        x.second = check_ref_of_stmt(s);
        x.buffer = x.root = TRACE_NONE;
        check_ref_name(t, &x.first, a, sizeof a);
        check_ref_name(t, &x.second, b, sizeof b);
        x.text = check_strf("%s sets semaphore %s to %llu while %s, which set it to %llu, may "
                            "not have run: the value its awaits see depends on timing",
                            b, trace_str(t, s->object), (unsigned long long)s->count, a,
                            (unsigned long long)f->values[f->n_sets - 1]);
        x.fix = check_strf("order %s before %s (await the value %s set, or an event), so the "
                           "sets of %s happen one after another",
                           a, b, a, trace_str(t, s->object));
        check_report_add(e->rep, &x);
    }
    if (trace_grow64((void **)&f->values, &f->cap_sets, f->n_sets + 1, sizeof *f->values) != 0) {
        e->oom = true;
        return;
    }
    check_snap *ns = realloc(f->snaps, f->cap_sets * sizeof *ns);
    if (!ns) {
        e->oom = true;
        return;
    }
    f->snaps = ns;
    f->values[f->n_sets] = s->count;
    f->snaps[f->n_sets] = snap_of(e, q);
    f->n_sets++;
    f->last_set = check_ref_of_stmt(s);
    wake_all(e, &f->waiters);
    if (e->track)
        trace_u64map_put(&e->dirty_flags, f->name, 1);
}

/* A signal of flag f (or the send of its message) ran on queue q: f
 * carries q's clock to its awaits; key names f among the dirty flags. */
static void flag_signal(check_engine *e, uint32_t q, flag_node *f, uint64_t key)
{
    qstate *Q = &e->q[q];
    if (check_vc_join(&f->vc, Q->vc) != 0 || check_vc_raise(&f->vc, q, Q->own) != 0)
        e->oom = true;
    f->ran++;
    if (flag_ready(f))
        wake_all(e, &f->waiters);
    if (e->track)
        trace_u64map_put(&e->dirty_flags, key, 1);
}

/* An await of flag f (or a recv of its message) on queue q: false, with q
 * among f's waiters, while f is not ready; else q learns f's clock. */
static bool flag_pass(check_engine *e, uint32_t q, flag_node *f)
{
    if (!flag_ready(f)) {
        if (qlist_add(&f->waiters, q) != 0)
            e->oom = true;
        return false;
    }
    if (check_vc_join(&e->q[q].vc, f->vc) != 0)
        e->oom = true;
    return true;
}

/* Runs p on queue q if it can; RUN_BLOCKED leaves it for later. */
static int run_stmt(check_engine *e, uint32_t q, check_pend *p)
{
    qstate *Q = &e->q[q];
    const trace_stmt *s = &p->s;
    if (p->unsubmitted)
        return RUN_BLOCKED;
    if (p->has_sub && !p->sub_joined) {
        /* Rule 2: the submitting host's clock at submission. */
        if (p->sub.vc != Q->sub_vc) {
            if (check_vc_join(&Q->vc, p->sub.vc) != 0)
                e->oom = true;
            check_vc_unref(Q->sub_vc);
            Q->sub_vc = check_vc_ref(p->sub.vc);
        }
        if (p->sub.queue != q && check_vc_raise(&Q->vc, p->sub.queue, p->sub.own) != 0)
            e->oom = true;
        p->sub_joined = true;
    }
    if (p->done)
        return RUN_DONE;
    if (!p->removed) {
        switch (s->kind) {
        case TRACE_WAIT:
            if (p->bind) {
                if (!p->bind->executed) {
                    if (qlist_add(&p->bind->waiters, q) != 0)
                        e->oom = true;
                    return RUN_BLOCKED;
                }
                learn(e, q, &p->bind->snap);
            }
            break;
        case TRACE_SYNC:
            for (uint32_t i = 0; i < p->n_items; i++)
                if (p->items[i].req && !p->items[i].req->filled) {
                    p->items[i].req->waiter = q;
                    return RUN_BLOCKED;
                }
            for (uint32_t i = 0; i < p->n_items; i++)
                learn(e, q, p->items[i].req ? &p->items[i].req->snap : &p->items[i].snap);
            break;
        case TRACE_AWAIT:
            if (p->flag && s->sem) {
                if (!sem_await(e, q, p->flag, s->count)) {
                    if (qlist_add(&p->flag->waiters, q) != 0)
                        e->oom = true;
                    return RUN_BLOCKED;
                }
            } else if (p->flag) {
                flag_node *f = p->flag;
                if (p->forced) {
                    /* ruling 1: the signals left all come after this await */
                    if (check_vc_join(&Q->vc, f->vc) != 0)
                        e->oom = true;
                } else if (!flag_pass(e, q, f)) {
                    return RUN_BLOCKED;
                }
                if (!f->passed)
                    f->passed_q = q;
                else if (f->passed_q != q)
                    f->passed_q = TRACE_NONE;
                f->passed = true;
            }
            break;
        case TRACE_RECV:
            if (!flag_pass(e, q, p->flag))
                return RUN_BLOCKED;
            /* one send, one recv: the message is done with (its clock
             * reference would otherwise pin an old clock per message) */
            trace_u64map_del(&e->flags, P2P_KEY(p->match));
            flag_node_free(p->flag);
            p->flag = NULL;
            if (e->track)
                trace_u64map_put(&e->dirty_flags, P2P_KEY(p->match), 1);
            break;
        case TRACE_BARRIER:
        case TRACE_COLLECTIVE:
            if (p->gen) {
                /* release_gen runs every participant's statement itself */
                if (!p->arrived && arrive(e, q, p) != 0)
                    e->oom = true;
                return p->done ? RUN_DONE : RUN_BLOCKED;
            }
            break;
        default:
            break;
        }
    }
    Q->own++;
    switch (s->kind) {
    case TRACE_OP:
    case TRACE_COPY:
    case TRACE_COLLECTIVE:      /* a collective without generation (removed) */
    case TRACE_ALLOC:
    case TRACE_FREE:
    case TRACE_RECV:
        if (s->kind != TRACE_COLLECTIVE || !p->removed) {
            check_report_begin_stmt(e->rep);
            do_accesses(e, q, s);
        }
        break;
    case TRACE_SEND:
        check_report_begin_stmt(e->rep);
        do_accesses(e, q, s);
        if (p->flag)
            flag_signal(e, q, p->flag, P2P_KEY(p->match));
        break;
    case TRACE_RECORD:
        if (p->rec) {
            p->rec->executed = true;
            p->rec->snap = snap_of(e, q);
            wake_all(e, &p->rec->waiters);
        }
        break;
    case TRACE_SIGNAL:
        if (p->flag && s->sem) {
            sem_set(e, q, p->flag, s);
        } else if (p->flag) {
            flag_signal(e, q, p->flag, p->flag->name);
        }
        break;
    default:
        break;
    }
    if (Q->is_stream)
        stream_advanced(e, q);
    return RUN_DONE;
}

/* Delivers statement p (submitted now) to queue q. */
static void deliver(check_engine *e, uint32_t q, check_pend *p)
{
    qstate *Q = &e->q[q];
    if (!Q->head && run_stmt(e, q, p) == RUN_DONE) {
        pend_release(p);
        return;
    }
    check_pend *h = pend_persist(e, p);
    if (!h)
        return;
    pend_append(e, q, h);
}

/* Advances queue q as far as it goes. */
static void run_queue(check_engine *e, uint32_t q)
{
    qstate *Q = &e->q[q];
    while (Q->head) {
        check_pend *p = Q->head;
        if (p->marker) {
            pend_pop(e, q);
            /* Rule 2: submitted now, with the host's clock of this moment. */
            check_pend *x = p->target;
            x->unsubmitted = false;
            x->has_sub = true;
            check_snap_release(&x->sub);
            x->sub = snap_of(e, q);
            push_work(e, x->s.queue);
            free(p);
            continue;
        }
        if (run_stmt(e, q, p) != RUN_DONE)
            break;
        pend_pop(e, q);
        pend_release(p);
    }
}

static void drain(check_engine *e)
{
    while (e->work_head < e->n_work) {
        uint32_t q = e->work[e->work_head++];
        e->q[q].in_work = false;
        run_queue(e, q);
    }
    e->n_work = e->work_head = 0;
}

/* ------------------------------------------------------------------ */
/* Feeding statements.                                                 */

static int ensure_queues(check_engine *e)
{
    const trace *t = e->t;
    if (t->n_queues <= e->n_q)
        return 0;
    if (t->n_queues > e->cap_q) {
        uint32_t cap = e->cap_q ? e->cap_q : 8;
        while (cap < t->n_queues)
            cap *= 2;
        qstate *p = realloc(e->q, cap * sizeof *p);
        if (!p)
            return -1;
        e->q = p;
        e->cap_q = cap;
    }
    for (uint32_t i = e->n_q; i < t->n_queues; i++) {
        memset(&e->q[i], 0, sizeof e->q[i]);
        e->q[i].is_stream = t->queues[i].kind == TRACE_QUEUE_STREAM;
        e->q[i].device = t->queues[i].device;
    }
    e->n_q = t->n_queues;
    return 0;
}

static uint64_t gen_key(uint32_t name, bool coll, uint64_t x)
{
    return ((uint64_t)name << 33) | ((uint64_t)coll << 32) | (x & 0xffffffffu);
}

/* Read-time part of a host sync: what each stream in scope must reach. */
static int bind_sync(check_engine *e, uint32_t h, check_pend *p)
{
    const trace_stmt *s = &p->s;
    p->items = p->item_local;
    uint32_t cap = 2;
    /* rule 4's scope is the binder's; a stream sync needs no scan */
    bool one = s->sync_scope == TRACE_SYNC_QUEUE;
    for (uint32_t q = one ? s->object : 0; q < e->n_q && (!one || q == s->object); q++) {
        qstate *S = &e->q[q];
        if (!trace_sync_covers(e->t, s, q) || S->n_read == 0)
            continue;
        sync_item it = { NULL, { NULL, TRACE_NONE, 0 } };
        if (S->own >= S->n_read) {
            /* Already ran everything: nothing to learn if the host knows it. */
            if (q == h || check_vc_get(e->q[h].vc, q) >= S->own)
                continue;
            it.snap = snap_of(e, q);
        } else {
            sync_req *r = calloc(1, sizeof *r);
            if (!r)
                return -1;
            r->refs = 2;        /* the stream's FIFO and the sync */
            r->stream = q;
            r->n = S->n_read;
            r->waiter = TRACE_NONE;
            if (S->req_tail)
                S->req_tail->next = r;
            else
                S->req_head = r;
            S->req_tail = r;
            it.req = r;
        }
        if (p->n_items == cap) {
            cap *= 2;
            sync_item *n = malloc(cap * sizeof *n);
            if (!n) {
                check_snap_release(&it.snap);
                req_unref(it.req);
                return -1;
            }
            memcpy(n, p->items, p->n_items * sizeof *n);
            if (p->items != p->item_local)
                free(p->items);
            p->items = n;
        }
        p->items[p->n_items++] = it;
    }
    return 0;
}

static flag_node *flag_get(check_engine *e, uint32_t name)
{
    uint64_t *v = trace_u64map_put(&e->flags, name, 0);
    if (!v)
        return NULL;
    if (!*v) {
        flag_node *f = calloc(1, sizeof *f);
        if (!f)
            return NULL;
        f->name = name;
        f->total = FLAG_UNKNOWN;
        if (e->flag_totals) {
            const uint64_t *n = trace_u64map_get(e->flag_totals, name);
            f->total = n ? *n : 0;
        }
        *v = (uint64_t)(uintptr_t)f;
    }
    return (flag_node *)(uintptr_t)*v;
}

/* Binds p, an arrival at a barrier or communicator, to the generation the
 * binder put it in (rules 5 and 7: the first count= such arrivals in
 * submission order). An extra arrival is reported as a mismatch and passes
 * without synchronising (p->gen stays NULL), so the verdict does not depend
 * on the order in which the engine happens to run the queues. */
static int bind_gen(check_engine *e, check_pend *p, const trace_bind *bd)
{
    const trace_stmt *s = &p->s;
    bool coll = s->kind == TRACE_COLLECTIVE;
    if (bd->gen_role == TRACE_GEN_EXTRA) {
        check_engine_report_mismatch(e, bd, s, MISMATCH_EXTRA);
        return 0;
    }
    if (bd->gen_role == TRACE_GEN_DISAGREES)
        check_engine_report_mismatch(e, bd, s, coll ? MISMATCH_KIND : MISMATCH_COUNT);
    uint64_t key = gen_key(s->object, coll, bd->gen);
    uint64_t *v = trace_u64map_put(&e->gens, key, 0);
    if (!v)
        return -1;
    gen_state *g = (gen_state *)(uintptr_t)*v;
    if (!g) {
        g = calloc(1, sizeof *g);
        if (!g)
            return -1;
        g->refs = 1;
        g->key = key;
        g->name = s->object;
        g->collective = coll;
        g->gen = bd->gen;
        g->count = bd->gen_count;
        *v = (uint64_t)(uintptr_t)g;
    }
    g->n_read++;
    g->refs++;
    p->gen = g;
    return 0;
}

check_engine *check_engine_new(const trace *t, check_report *rep, const bool *remove)
{
    check_engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->t = t;
    e->rep = rep;
    e->remove = remove;
    e->only_host = TRACE_NONE;
    if (!(e->bind = trace_binder_new(0)) || ensure_queues(e) != 0) {
        trace_binder_free(e->bind);
        free(e);
        return NULL;
    }
    return e;
}

void check_engine_set_remove(check_engine *e, const bool *remove)
{
    e->remove = remove;
}

uint64_t check_engine_fed(const check_engine *e)
{
    return e->fed;
}

void check_engine_set_flag_totals(check_engine *e, const trace_u64map *totals)
{
    e->flag_totals = totals;
}

bool check_engine_inexact(const check_engine *e)
{
    return e->inexact;
}

int check_engine_signal_counts(const check_engine *e, trace_u64map *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < e->flags.cap; i++) {
        if (!e->flags.used[i] || !e->flags.vals[i])
            continue;
        const flag_node *f = (const flag_node *)(uintptr_t)e->flags.vals[i];
        uint64_t *v = trace_u64map_put(out, f->name, 0);
        if (!v)
            return -1;
        *v = f->fed;
    }
    return 0;
}

/* A fresh pending statement for s, field by field. A memset of the whole
 * struct (632 bytes, item_local included, which only bind_sync uses and
 * sets before use) compiles to `rep stos`, and was 7 % of the checker's
 * own time on the whole-buffer capture shape. Every other field of
 * check_pend is set here. */
static void pend_init(check_pend *p, const trace_stmt *s)
{
    p->next = NULL;
    p->s = *s;
    p->heap = p->removed = p->marker = p->unsubmitted = false;
    p->target = NULL;
    p->has_sub = p->sub_joined = false;
    p->sub = (check_snap){ NULL, TRACE_NONE, 0 };
    p->bind = p->rec = NULL;
    p->flag = NULL;
    p->match = 0;
    p->gen = NULL;
    p->arrived = p->done = p->forced = p->after_mark = p->decided = false;
    p->waited = NULL;
    p->n_waited = 0;
    p->after_idx = 0;
    p->after_pos = 0;
    p->items = NULL;
    p->n_items = 0;
}

int check_engine_feed(check_engine *e, const trace_stmt *s)
{
    if (ensure_queues(e) != 0)
        return -1;
    uint32_t q = s->queue;
    check_pend p;
    pend_init(&p, s);
    p.removed = e->remove && e->remove[s->seq];
    e->fed++;
    e->rep->ops++;
    /* Every statement is bound, removed ones too: what a binding is depends
     * on the statements before it only (records and generation numbers stay
     * those of the trace without the removals, which remove whole
     * generations). */
    trace_bind bd;
    if (trace_binder_feed(e->bind, s, &bd) != 0)
        return -1;
    switch (s->kind) {
    case TRACE_WAIT:
        if (!p.removed) {
            uint64_t *v = bd.record != TRACE_NO_SEQ ? trace_u64map_get(&e->events, bd.record) : NULL;
            if (v && *v) {
                p.bind = (ev_node *)(uintptr_t)*v;
                p.bind->refs++;
            } else {
                trace_finding f = { 0 };
                f.kind = TRACE_FINDING_WAIT_UNRECORDED;
                f.object = s->object;
                f.first.seq = TRACE_NO_SEQ;
                f.second = check_ref_of_stmt(s);
                f.buffer = f.root = TRACE_NONE;
                check_report_add(e->rep, &f);
            }
        }
        break;
    case TRACE_RECORD: {
        ev_node *n = calloc(1, sizeof *n);
        uint64_t *v = n ? trace_u64map_put(&e->events, s->seq, 0) : NULL;
        if (!v) {
            free(n);
            return -1;
        }
        n->refs = 2;            /* the table and the record */
        n->name = s->object;
        n->queue = q;
        n->line = s->line;
        n->seq = s->seq;
        n->snap.queue = TRACE_NONE;
        *v = (uint64_t)(uintptr_t)n;
        /* the record it supersedes binds no later wait: only pending waits
         * (which hold references) still need it */
        uint64_t *old = bd.superseded != TRACE_NO_SEQ ? trace_u64map_get(&e->events, bd.superseded)
                                                      : NULL;
        if (old) {
            check_ev_unref((ev_node *)(uintptr_t)*old);
            trace_u64map_del(&e->events, bd.superseded);
        }
        p.rec = n;
        if (e->track)
            trace_u64map_put(&e->dirty_events, s->seq, 1);
        break;
    }
    case TRACE_SYNC:
        if (!p.removed && bind_sync(e, q, &p) != 0)
            return -1;
        break;
    case TRACE_SIGNAL:
    case TRACE_AWAIT:
        if (!p.removed && !(p.flag = flag_get(e, s->object)))
            return -1;
        if (p.flag && s->kind == TRACE_SIGNAL && !s->sem) {
            p.flag->fed++;
            /* an await that passed without this signal should have
             * waited for it, unless the signal follows it in its queue */
            if (p.flag->total == FLAG_UNKNOWN && p.flag->passed && p.flag->passed_q != q)
                e->inexact = true;
        }
        break;
    case TRACE_BARRIER:
    case TRACE_COLLECTIVE:
        if (!p.removed && bind_gen(e, &p, &bd) != 0)
            return -1;
        break;
    case TRACE_SEND:
    case TRACE_RECV:
        /* A removed send is a deleted line: its recv then waits for nothing
         * that can come, as the deleted send's would. */
        if (!p.removed || s->kind == TRACE_RECV) {
            uint64_t *v = trace_u64map_put(&e->flags, P2P_KEY(bd.match), 0);
            if (!v)
                return -1;
            if (!*v) {
                flag_node *f = calloc(1, sizeof *f);
                if (!f)
                    return -1;
                f->name = TRACE_NONE;
                f->total = 1;   /* one send per message */
                *v = (uint64_t)(uintptr_t)f;
            }
            if (!p.removed)
                p.flag = (flag_node *)(uintptr_t)*v;
            p.match = bd.match;
            if (p.flag && s->kind == TRACE_SEND)
                p.flag->fed++;
        }
        break;
    default:
        break;
    }
    e->q[q].n_read++;

    /* A removed statement is a deleted line: it keeps its place in its
     * queue (a no-op, so epochs do not shift) but was never submitted, so it
     * carries no submission edge and waits for no host. */
    uint32_t h = p.removed ? TRACE_NONE : submitter(e, s);
    if (h != TRACE_NONE && e->q[h].head) {
        /* The host is blocked: it submits this when it gets there. The
         * statement takes its place in its stream now (queue order is file
         * order), unable to run until the host's marker releases it. */
        check_pend *x = pend_persist(e, &p);
        check_pend *m = calloc(1, sizeof *m);
        if (!x || !m) {
            free(m);
            return -1;
        }
        x->unsubmitted = true;
        x->sub.queue = h;       /* who will submit it (for explanations) */
        pend_append(e, q, x);
        m->marker = true;
        m->heap = false;        /* freed by run_queue or pend_free_marker */
        m->target = x;
        m->s.queue = q;
        m->s.seq = s->seq;
        pend_append(e, h, m);
    } else {
        if (h != TRACE_NONE) {
            p.has_sub = true;
            p.sub = snap_of(e, h);
        }
        deliver(e, q, &p);
    }
    drain(e);
    return e->oom ? -1 : 0;
}

bool check_engine_quiescent(const check_engine *e)
{
    for (uint32_t q = 0; q < e->n_q; q++)
        if (e->q[q].head)
            return false;
    return true;
}

/* Rule 9 at the end: every send that no recv matched, named by its ranks. */
static void report_unmatched(check_engine *e)
{
    trace_p2p_end *ends;
    uint64_t n;
    if (trace_binder_unmatched(e->bind, &ends, &n) != 0) {
        e->oom = true;
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        const trace_p2p_end *x = &ends[i];
        if (!x->send || (e->remove && e->remove[x->seq]))
            continue;
        trace_finding f = { 0 };
        f.kind = TRACE_FINDING_UNMATCHED_SEND;
        f.object = x->comm;
        f.first.seq = TRACE_NO_SEQ;
        f.second = (trace_stmt_ref){ .seq = x->seq, .queue = x->queue, .label = TRACE_NONE,
                                     .line = x->line, .kind = TRACE_SEND, .by = TRACE_NONE };
        const char *comm = trace_str(e->t, x->comm);
        const char *qn = check_queue_name(e->t, x->queue);
        f.text = check_strf("rank %u sends to rank %u (tag %llu on %s, %s line %u) but rank %u "
                            "posts no matching recv",
                            x->src, x->dst, (unsigned long long)x->tag, comm, qn, x->line, x->dst);
        f.fix = check_strf("post `recv %s from=%u to=%u tag=%llu` on rank %u (messages of a "
                           "channel pair up in order), or remove the send",
                           comm, x->src, x->dst, (unsigned long long)x->tag, x->dst);
        f.buffer = f.root = TRACE_NONE;
        if (!check_report_add(e->rep, &f)) {
            free(f.text);
            free(f.fix);
        }
    }
    free(ends);
}

/* Ruling 1 at the end of the input: the awaits that after.c finds
 * released (a signal of the flag ran, and every one that has not is
 * ordered after the await) pass with the signals that ran; then the queues
 * run on, and what is still blocked is asked again. True when one was
 * released. */
static bool release_awaits(check_engine *e)
{
    int n = check_after_release(e);
    if (n < 0) {
        e->oom = true;
        return false;
    }
    for (uint32_t q = 0; q < e->n_q && n; q++) {
        const check_pend *p = e->q[q].head;
        if (p && !p->marker && p->forced)
            push_work(e, q);
    }
    drain(e);
    return n > 0;
}

int check_engine_finish(check_engine *e, bool ignore_hangs)
{
    drain(e);
    while (!e->oom && release_awaits(e))
        ;
    report_unmatched(e);
    if (!ignore_hangs && !check_engine_quiescent(e))
        check_engine_report_hang(e);
    return e->oom ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Lifetime, checkpoints.                                              */

static void free_nodes(trace_u64map *events, trace_u64map *flags)
{
    for (uint32_t i = 0; i < events->cap; i++)
        if (events->used[i] && events->vals[i])
            check_ev_unref((ev_node *)(uintptr_t)events->vals[i]);
    for (uint32_t i = 0; i < flags->cap; i++)
        if (flags->used[i] && flags->vals[i])
            flag_node_free((flag_node *)(uintptr_t)flags->vals[i]);
}

void check_engine_free(check_engine *e)
{
    if (!e)
        return;
    /* pending statements first: they hold references to nodes */
    for (uint32_t q = 0; q < e->n_q; q++) {
        while (e->q[q].head) {
            check_pend *p = pend_pop(e, q);
            if (p->marker)
                free(p);
            else
                pend_release(p);
        }
    }
    for (uint32_t q = 0; q < e->n_q; q++) {
        check_vc_unref(e->q[q].vc);
        check_vc_unref(e->q[q].sub_vc);
        sync_req *r = e->q[q].req_head;
        while (r) {
            sync_req *n = r->next;
            req_unref(r);
            r = n;
        }
    }
    free(e->q);
    for (uint32_t i = 0; i < e->n_shadow; i++)
        check_shadow_unref(e->shadow[i]);
    free(e->shadow);
    free(e->dirty_root);
    free_nodes(&e->events, &e->flags);
    for (uint32_t i = 0; i < e->gens.cap; i++)
        if (e->gens.used[i] && e->gens.vals[i])
            gen_unref((gen_state *)(uintptr_t)e->gens.vals[i]);
    trace_u64map_free(&e->events);
    trace_u64map_free(&e->flags);
    trace_binder_free(e->bind);
    trace_u64map_free(&e->gens);
    trace_u64map_free(&e->mismatched);
    trace_u64map_free(&e->dirty_events);
    trace_u64map_free(&e->dirty_flags);
    free(e->work);
    free(e);
}
