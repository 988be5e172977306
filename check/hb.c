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
 *     stands in the file.
 *  7. Collectives: the k-th collective of each queue on a communicator is
 *     generation k, a barrier whose own accesses happen inside it.
 *  8. Host copies and ops complete before the host's next statement.
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
 * `sync all` visits the streams, each in O(1) unless it has news.
 *
 * Races. Each access becomes a site (its statement's epoch and name) and
 * updates the shadow of its root buffer (shadow.c), FastTrack style: a read
 * is checked against the last write, a write against the last write and
 * the reads since it; the reads since the last write are one site, or a
 * per-queue set when reads were concurrent. alloc and free are writes of
 * the whole buffer; a free also marks the bytes freed (and an alloc after it
 * is remembered beside the free): an access ordered after the free but not
 * after that alloc is a use-after-free, whatever order the engine met them in.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* u64 -> u64 map.                                                     */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

void check_map_free(check_map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

uint64_t *check_map_get(const check_map *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    uint32_t mask = m->cap - 1, i = (uint32_t)mix64(key) & mask;
    while (m->used[i]) {
        if (m->keys[i] == key)
            return &m->vals[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

static int map_grow(check_map *m)
{
    check_map n = { 0 };
    n.cap = m->cap ? m->cap * 2 : 64;
    n.keys = malloc(n.cap * sizeof *n.keys);
    n.vals = malloc(n.cap * sizeof *n.vals);
    n.used = calloc(n.cap, 1);
    if (!n.keys || !n.vals || !n.used) {
        check_map_free(&n);
        return -1;
    }
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        uint32_t j = (uint32_t)mix64(m->keys[i]) & (n.cap - 1);
        while (n.used[j])
            j = (j + 1) & (n.cap - 1);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
    }
    n.count = m->count;
    check_map_free(m);
    *m = n;
    return 0;
}

uint64_t *check_map_put(check_map *m, uint64_t key, uint64_t def)
{
    uint64_t *v = check_map_get(m, key);
    if (v)
        return v;
    if ((m->count + 1) * 4 > m->cap * 3 && map_grow(m) != 0)
        return NULL;
    uint32_t mask = m->cap - 1, i = (uint32_t)mix64(key) & mask;
    while (m->used[i])
        i = (i + 1) & mask;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = def;
    m->count++;
    return &m->vals[i];
}

void check_map_del(check_map *m, uint64_t key)
{
    if (!m->cap)
        return;
    uint32_t mask = m->cap - 1, i = (uint32_t)mix64(key) & mask;
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    if (!m->used[i])
        return;
    /* backward-shift deletion keeps every probe chain unbroken */
    uint32_t j = i;
    for (;;) {
        m->used[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!m->used[j]) {
                m->count--;
                return;
            }
            uint32_t home = (uint32_t)mix64(m->keys[j]) & mask;
            if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
                continue;
            break;
        }
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->used[i] = 1;
        i = j;
    }
}

int check_map_copy(check_map *dst, const check_map *src)
{
    memset(dst, 0, sizeof *dst);
    if (!src->cap)
        return 0;
    dst->keys = malloc(src->cap * sizeof *dst->keys);
    dst->vals = malloc(src->cap * sizeof *dst->vals);
    dst->used = malloc(src->cap);
    if (!dst->keys || !dst->vals || !dst->used) {
        check_map_free(dst);
        return -1;
    }
    memcpy(dst->keys, src->keys, src->cap * sizeof *dst->keys);
    memcpy(dst->vals, src->vals, src->cap * sizeof *dst->vals);
    memcpy(dst->used, src->used, src->cap);
    dst->cap = src->cap;
    dst->count = src->count;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Engine state.                                                       */

/* A small growable list of queue ids (who waits for something). */
typedef struct qlist {
    uint32_t *q;
    uint32_t n, cap;
} qlist;

static int qlist_add(qlist *l, uint32_t q)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (l->q[i] == q)
            return 0;
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 4;
        uint32_t *p = realloc(l->q, cap * sizeof *p);
        if (!p)
            return -1;
        l->q = p;
        l->cap = cap;
    }
    l->q[l->n++] = q;
    return 0;
}

/* A `record E` as bound by waits: its snapshot once it has run. */
typedef struct ev_node {
    uint32_t refs;
    bool executed;
    check_snap snap;
    uint32_t name, queue, line;
    uint64_t seq;
    qlist waiters;
} ev_node;

#define FLAG_UNKNOWN UINT64_MAX

/* A flag. Rule 6 puts every signal of a flag before what follows any await
 * of it, so an await passes once every signal has run: all `total` of them
 * when the trace's signal counts are known (check_engine_set_flag_totals),
 * else every signal fed so far. Streaming that way is exact unless a signal
 * is fed after an await already passed; that sets the engine's `inexact`,
 * and check_trace runs a second pass with the counts of the first. */
typedef struct flag_node {
    uint64_t fed, ran;              /* signals read, signals run */
    uint64_t total;                 /* signals in the whole trace, or FLAG_UNKNOWN */
    bool passed;                    /* an await has passed */
    check_vc *vc;                   /* the signals that ran, joined */
    uint32_t name;
    qlist waiters;
} flag_node;

static bool flag_ready(const flag_node *f)
{
    uint64_t need = f->total != FLAG_UNKNOWN ? f->total : f->fed;
    return need > 0 && f->ran >= need;
}


/* A host sync's need: stream `stream` has run its first `n` statements. */
typedef struct sync_req {
    uint32_t refs;
    uint32_t stream;
    uint64_t n;
    bool filled;
    check_snap snap;
    uint32_t waiter;                /* the host, TRACE_NONE until it blocks */
    struct sync_req *next;          /* the stream's FIFO */
} sync_req;

struct check_pend;

typedef struct arrival {
    uint32_t queue;
    check_snap snap;
    struct check_pend *pend;
} arrival;

/* One generation of a barrier or collective. */
typedef struct gen_state {
    uint32_t refs;                  /* the generation table and each bound statement */
    uint64_t key;
    uint32_t name;
    bool collective;
    uint64_t gen;
    uint64_t count;                 /* participants expected (first arrival's) */
    uint32_t n_read, n_arrived;
    bool released;
    arrival *arr;
    uint32_t cap_arr;
} gen_state;

/* One synchronisation target of a host sync: a request or a snapshot taken
 * when the sync was read (the stream had already run everything). */
typedef struct sync_item {
    sync_req *req;
    check_snap snap;
} sync_item;

typedef struct check_pend {
    struct check_pend *next;
    trace_stmt s;
    bool heap;                      /* allocated; s.access owned */
    bool removed;
    bool marker;                    /* in a host's list: submits `target` when reached */
    bool unsubmitted;               /* in a stream's list: its host has not submitted it */
    struct check_pend *target;      /* marker: the statement it submits */
    bool has_sub, sub_joined;
    check_snap sub;
    ev_node *bind;                  /* wait: the record it binds to */
    ev_node *rec;                   /* record: its node */
    flag_node *flag;                /* signal/await */
    gen_state *gen;                 /* barrier/collective */
    bool arrived, done;
    sync_item *items;               /* sync */
    uint32_t n_items;
    sync_item item_local[2];
} check_pend;

typedef struct qstate {
    check_vc *vc;
    uint32_t own;
    check_pend *head, *tail;
    uint32_t n_pend;
    uint64_t n_read;                /* statements of this queue fed so far */
    check_vc *sub_vc;               /* last submission clock joined (a reference) */
    sync_req *req_head, *req_tail;
    uint32_t n_markers;             /* host: submit markers in its list */
    bool in_work;
    bool is_stream;
    uint32_t device;
} qstate;

struct check_engine {
    const trace *t;
    check_report *rep;
    const bool *remove;
    qstate *q;
    uint32_t n_q, cap_q;
    check_shadow **shadow;          /* per buffer index (roots only used) */
    uint32_t n_shadow;
    trace_binder *bind;             /* rules 3, 5, 7: which record, which generation */
    check_map events;               /* record seq -> ev_node* (records a wait may still bind to) */
    check_map flags;                /* flag name -> flag_node* */
    const check_map *flag_totals;   /* flag name -> signals in the trace; NULL: unknown */
    const check_map *record_last;   /* record seq -> seq of the last wait bound to it */
    const check_map *flag_last;     /* flag name -> seq of its last signal or await */
    bool inexact;                   /* a signal came after an await of its flag passed */
    check_map gens;                 /* (name, coll, gen) -> gen_state* */
    check_map mismatched;           /* (name, coll) -> 1 once reported */
    uint32_t *work;
    uint32_t n_work, cap_work, work_head;
    uint64_t fed;
    uint32_t only_host;             /* cache of the only host queue */
    bool oom;
    /* dirty tracking for the minimiser */
    bool track;
    uint8_t *dirty_root;
    check_map dirty_events, dirty_flags;
    /* the access being checked */
    uint32_t cur_q;
    check_vc *cur_vc;
    check_site cur_site;
    uint8_t cur_mode;
    trace_kind cur_kind;
    uint32_t cur_root;
};

/* ------------------------------------------------------------------ */
/* Small helpers.                                                      */

static void snap_release(check_snap *s)
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

static void ev_unref(ev_node *n)
{
    if (n && --n->refs == 0) {
        snap_release(&n->snap);
        free(n->waiters.q);
        free(n);
    }
}

static void req_unref(sync_req *r)
{
    if (r && --r->refs == 0) {
        snap_release(&r->snap);
        free(r);
    }
}

static void gen_unref(gen_state *g)
{
    if (!g || --g->refs > 0)
        return;
    for (uint32_t i = 0; i < g->n_arrived; i++)
        snap_release(&g->arr[i].snap);
    free(g->arr);
    free(g);
}

static void pend_release(check_pend *p)
{
    snap_release(&p->sub);
    ev_unref(p->bind);
    ev_unref(p->rec);
    gen_unref(p->gen);
    p->bind = p->rec = NULL;
    p->gen = NULL;
    for (uint32_t i = 0; i < p->n_items; i++) {
        req_unref(p->items[i].req);
        snap_release(&p->items[i].snap);
    }
    if (p->items != p->item_local)
        free(p->items);
    p->items = NULL;
    p->n_items = 0;
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

static inline bool site_hb(const check_engine *e, const check_site *s)
{
    return s->queue == e->cur_q || check_vc_get(e->cur_vc, s->queue) >= s->time;
}

static void visit_cell(void *ctx, uint64_t lo, uint64_t hi, check_cell *c)
{
    check_engine *e = ctx;
    const check_site *x = &e->cur_site;
    bool reads = e->cur_mode & TRACE_R, writes = e->cur_mode & TRACE_W;
    /* Use after free: ordered after the free, and not after an alloc that
     * followed it (an alloc the access is not ordered after is a race). */
    const check_life *life = c->life;
    if (life && e->cur_kind != TRACE_ALLOC && site_hb(e, &life->freed) &&
        !(life->alloc.seq != TRACE_NO_SEQ && site_hb(e, &life->alloc)))
        check_report_conflict(e->rep, TRACE_FINDING_USE_AFTER_FREE, &life->freed, x, 0,
                              e->cur_root, lo, hi);
    if (c->w.seq != TRACE_NO_SEQ && !site_hb(e, &c->w)) {
        uint8_t type = (reads ? TRACE_RACE_RAW : 0) | (writes ? TRACE_RACE_WAW : 0);
        check_report_conflict(e->rep, TRACE_FINDING_RACE, &c->w, x, type, e->cur_root, lo, hi);
    }
    if (writes) {
        for (uint32_t i = 0; i < c->n_reads; i++) {
            const check_site *r = check_cell_read(c, i);
            if (r->seq != x->seq && !site_hb(e, r))
                check_report_conflict(e->rep, TRACE_FINDING_RACE, r, x, TRACE_RACE_WAR, e->cur_root,
                                      lo, hi);
        }
        check_cell_drop_reads(c);
        c->w = *x;
        int rc = 0;
        if (e->cur_kind == TRACE_ALLOC)
            rc = check_cell_mark_alloc(c, x);
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

static int ensure_shadow(check_engine *e, uint32_t root)
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

static void access_range(check_engine *e, uint32_t root, uint64_t lo, uint64_t hi, uint8_t mode,
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

/* Performs the accesses of statement s, run by queue q as its own-th. */
static void do_accesses(check_engine *e, uint32_t q, const trace_stmt *s)
{
    const trace *t = e->t;
    e->cur_q = q;
    e->cur_vc = e->q[q].vc;
    e->cur_kind = s->kind;
    e->cur_site = (check_site){ .seq = s->seq, .queue = q, .time = e->q[q].own,
                                .label = s->label, .line = s->line, .buffer = TRACE_NONE,
                                .by = submitter(e, s), .kind = (uint8_t)s->kind };
    if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE) {
        if (s->object < t->n_buffers) {
            const trace_buffer *b = &t->buffers[s->object];
            access_range(e, b->root, b->root_offset, b->root_offset + b->size, TRACE_W, s->object);
        }
        return;
    }
    for (uint32_t i = 0; i < s->n_access; i++) {
        uint32_t root;
        uint64_t lo, hi;
        trace_access_root(t, &s->access[i], &root, &lo, &hi);
        access_range(e, root, lo, hi, s->access[i].mode, s->access[i].buffer);
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
    check_vc *joined = NULL;
    for (uint32_t i = 0; i < g->n_arrived; i++) {
        if (check_vc_join(&joined, g->arr[i].snap.vc) != 0 ||
            check_vc_raise(&joined, g->arr[i].snap.queue, g->arr[i].snap.own) != 0)
            e->oom = true;
    }
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
    for (uint32_t i = 0; i < g->n_arrived; i++)
        if (check_vc_raise(&joined, g->arr[i].queue, e->q[g->arr[i].queue].own) != 0)
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
        uint64_t *v = check_map_get(&e->gens, g->key);
        if (v && *v == (uint64_t)(uintptr_t)g) {
            check_map_del(&e->gens, g->key);
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
            if (p->flag) {
                if (!flag_ready(p->flag)) {
                    if (qlist_add(&p->flag->waiters, q) != 0)
                        e->oom = true;
                    return RUN_BLOCKED;
                }
                if (check_vc_join(&Q->vc, p->flag->vc) != 0)
                    e->oom = true;
                p->flag->passed = true;
            }
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
        if (s->kind != TRACE_COLLECTIVE || !p->removed) {
            check_report_begin_stmt(e->rep);
            do_accesses(e, q, s);
        }
        break;
    case TRACE_RECORD:
        if (p->rec) {
            p->rec->executed = true;
            p->rec->snap = snap_of(e, q);
            wake_all(e, &p->rec->waiters);
        }
        break;
    case TRACE_SIGNAL:
        if (p->flag) {
            flag_node *f = p->flag;
            if (check_vc_join(&f->vc, Q->vc) != 0 || check_vc_raise(&f->vc, q, Q->own) != 0)
                e->oom = true;
            f->ran++;
            if (flag_ready(f))
                wake_all(e, &f->waiters);
            if (e->track)
                check_map_put(&e->dirty_flags, f->name, 1);
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
            snap_release(&x->sub);
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
                snap_release(&it.snap);
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
    uint64_t *v = check_map_put(&e->flags, name, 0);
    if (!v)
        return NULL;
    if (!*v) {
        flag_node *f = calloc(1, sizeof *f);
        if (!f)
            return NULL;
        f->name = name;
        f->total = FLAG_UNKNOWN;
        if (e->flag_totals) {
            const uint64_t *n = check_map_get(e->flag_totals, name);
            f->total = n ? *n : 0;
        }
        *v = (uint64_t)(uintptr_t)f;
    }
    return (flag_node *)(uintptr_t)*v;
}

/* Why a generation's participants disagree. */
typedef enum {
    MISMATCH_KIND,      /* collectives: another KIND or size= */
    MISMATCH_COUNT,     /* barriers: another count= */
    MISMATCH_EXTRA,     /* more arrivals than count= (size= for collectives) */
} mismatch_why;

/* The queues whose k-th arrival at a barrier or communicator has been
 * read, as "q0, q1". */
static char *gen_members(const check_engine *e, uint32_t name, bool coll, uint64_t k)
{
    const trace_member *m;
    uint32_t n = trace_binder_members(e->bind, name, coll, &m);
    char *who = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (m[i].arrivals < k)
            continue;
        const char *q = trace_str(e->t, e->t->queues[m[i].queue].name);
        char *w = who ? check_strf("%s, %s", who, q) : check_strf("%s", q);
        free(who);
        who = w;
    }
    return who;
}

/* Reports, once per barrier or communicator, that generation k's
 * participants disagree: s is the arrival that does not fit, bd what the
 * binder said of it (the generation's first arrival, when known). */
static void report_mismatch(check_engine *e, const trace_bind *bd, const trace_stmt *s,
                            mismatch_why why)
{
    bool coll = s->kind == TRACE_COLLECTIVE;
    uint64_t k = bd->gen;
    uint64_t *done = check_map_put(&e->mismatched, gen_key(s->object, coll, 0), 0);
    if (!done || *done)
        return;
    *done = 1;
    const trace *t = e->t;
    bool first_known = bd->gen_first != TRACE_NO_SEQ;
    const char *name = trace_str(t, s->object);
    const char *q2 = trace_str(t, t->queues[s->queue].name);
    const char *q1 = first_known ? trace_str(t, t->queues[bd->gen_first_queue].name) : "?";
    trace_finding f = { 0 };
    f.kind = coll ? TRACE_FINDING_COLLECTIVE_MISMATCH : TRACE_FINDING_BARRIER_MISMATCH;
    f.object = s->object;
    f.generation = k;
    f.first.seq = TRACE_NO_SEQ;
    if (first_known)
        f.first = (trace_stmt_ref){ bd->gen_first, bd->gen_first_queue, TRACE_NONE,
                                    bd->gen_first_line, s->kind, TRACE_NONE };
    f.second = check_ref_of_stmt(s);
    f.buffer = f.root = TRACE_NONE;
    const char *what = coll ? "size" : "count";
    uint64_t expected = bd->gen_count;
    char *members = gen_members(e, s->object, coll, k);
    char *at = s->line ? check_strf(" (line %u)", s->line) : check_strf("%s", "");
    char *text = NULL, *fix = NULL;
    if (why == MISMATCH_EXTRA) {
        text = check_strf("%s %s generation %llu has %s=%llu but more queues arrive (%s): "
                          "%s%s is one too many and passes without synchronising",
                          coll ? "communicator" : "barrier", name, (unsigned long long)k, what,
                          (unsigned long long)expected, members ? members : "", q2,
                          at ? at : "");
        fix = check_strf("make exactly %llu queues arrive at every generation of %s: remove "
                         "%s's arrival%s, or set %s= to the number of participants on every "
                         "arrival",
                         (unsigned long long)expected, name, q2, at ? at : "", what);
    } else if (!coll) {
        text = check_strf("barrier %s generation %llu: %s arrives with count=%llu (line %u) but "
                          "%s with count=%llu%s",
                          name, (unsigned long long)k, q1, (unsigned long long)expected,
                          bd->gen_first_line, q2, (unsigned long long)s->count, at ? at : "");
        fix = check_strf("give every arrival at %s the same count=: the number of queues that "
                         "arrive at each generation",
                         name);
    } else {
        text = check_strf("generation %llu of communicator %s: %s issues %s size=%llu (line %u) "
                          "but %s issues %s size=%llu (line %u)",
                          (unsigned long long)k, name, q1, trace_str(t, bd->gen_first_kind),
                          (unsigned long long)expected, bd->gen_first_line, q2,
                          trace_str(t, s->coll_kind), (unsigned long long)s->count, s->line);
        fix = check_strf("make every participant of %s issue the same collectives in the same "
                         "order: generation %llu pairs %s's %s with %s's %s",
                         name, (unsigned long long)k, q1, trace_str(t, bd->gen_first_kind), q2,
                         trace_str(t, s->coll_kind));
    }
    /* parts: the participants, each with what it said (the misfit last) */
    const trace_member *m;
    uint32_t n_m = trace_binder_members(e->bind, s->object, coll, &m);
    trace_finding_part *parts = calloc(n_m + 2, sizeof *parts);
    uint32_t np = 0;
    if (parts && why == MISMATCH_EXTRA) {
        /* generation k's queues in arrival order; a queue already past its
         * k-th arrival is named without its statement */
        for (uint32_t pass = 0; pass < 2; pass++)
            for (uint32_t i = 0; i < n_m; i++) {
                bool self = m[i].queue == s->queue;
                if (m[i].arrivals < k || self != (pass == 1))
                    continue;
                trace_finding_part *p = &parts[np++];
                *p = (trace_finding_part){ TRACE_PART_PARTICIPANT, self, m[i].queue,
                                           TRACE_NO_SEQ, 0, TRACE_NONE, 0, NULL };
                if (m[i].arrivals == k) {
                    p->seq = m[i].last_seq;
                    p->line = m[i].last_line;
                    p->count = m[i].last_count;
                    p->kind = m[i].last_kind;
                }
            }
    } else if (parts) {
        if (first_known)
            parts[np++] = (trace_finding_part){ TRACE_PART_PARTICIPANT, false,
                                                bd->gen_first_queue, bd->gen_first,
                                                bd->gen_first_line, bd->gen_first_kind,
                                                expected, NULL };
        parts[np++] = (trace_finding_part){ TRACE_PART_PARTICIPANT, false, s->queue, s->seq,
                                            s->line, coll ? s->coll_kind : TRACE_NONE, s->count,
                                            NULL };
    }
    if (!parts)
        e->oom = true;
    free(members);
    free(at);
    f.text = text;
    f.fix = fix;
    f.parts = parts;
    f.n_parts = np;
    if (!check_report_add(e->rep, &f))
        trace_finding_release(&f);
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
        report_mismatch(e, bd, s, MISMATCH_EXTRA);
        return 0;
    }
    if (bd->gen_role == TRACE_GEN_DISAGREES)
        report_mismatch(e, bd, s, coll ? MISMATCH_KIND : MISMATCH_COUNT);
    uint64_t key = gen_key(s->object, coll, bd->gen);
    uint64_t *v = check_map_put(&e->gens, key, 0);
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

void check_engine_set_flag_totals(check_engine *e, const check_map *totals)
{
    e->flag_totals = totals;
}

bool check_engine_inexact(const check_engine *e)
{
    return e->inexact;
}

void check_engine_set_lifetimes(check_engine *e, const check_map *record_last,
                                const check_map *flag_last)
{
    e->record_last = record_last;
    e->flag_last = flag_last;
}

/* Last use of a record or flag at or after the read position? */
static bool still_used(const check_map *last, uint64_t key, uint64_t fed)
{
    const uint64_t *v = check_map_get(last, key);
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
                check_map_del(&e->events, e->events.keys[i]);
                ev_unref(n);
                continue;
            }
        }
        i++;
    }
    for (uint32_t i = 0; i < e->flags.cap;) {
        if (e->flags.used[i] && e->flags.vals[i]) {
            flag_node *f = (flag_node *)(uintptr_t)e->flags.vals[i];
            if (!still_used(e->flag_last, f->name, e->fed)) {
                check_map_del(&e->flags, e->flags.keys[i]);
                check_vc_unref(f->vc);
                free(f->waiters.q);
                free(f);
                continue;
            }
        }
        i++;
    }
}

int check_engine_signal_counts(const check_engine *e, check_map *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < e->flags.cap; i++) {
        if (!e->flags.used[i] || !e->flags.vals[i])
            continue;
        const flag_node *f = (const flag_node *)(uintptr_t)e->flags.vals[i];
        uint64_t *v = check_map_put(out, f->name, 0);
        if (!v)
            return -1;
        *v = f->fed;
    }
    return 0;
}

int check_engine_feed(check_engine *e, const trace_stmt *s)
{
    if (ensure_queues(e) != 0)
        return -1;
    uint32_t q = s->queue;
    check_pend p;
    memset(&p, 0, sizeof p);
    p.s = *s;
    p.sub.queue = TRACE_NONE;
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
            uint64_t *v = bd.record != TRACE_NO_SEQ ? check_map_get(&e->events, bd.record) : NULL;
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
        uint64_t *v = n ? check_map_put(&e->events, s->seq, 0) : NULL;
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
        uint64_t *old = bd.superseded != TRACE_NO_SEQ ? check_map_get(&e->events, bd.superseded)
                                                      : NULL;
        if (old) {
            ev_unref((ev_node *)(uintptr_t)*old);
            check_map_del(&e->events, bd.superseded);
        }
        p.rec = n;
        if (e->track)
            check_map_put(&e->dirty_events, s->seq, 1);
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
        if (p.flag && s->kind == TRACE_SIGNAL) {
            p.flag->fed++;
            if (p.flag->total == FLAG_UNKNOWN && p.flag->passed)
                e->inexact = true;
        }
        break;
    case TRACE_BARRIER:
    case TRACE_COLLECTIVE:
        if (!p.removed && bind_gen(e, &p, &bd) != 0)
            return -1;
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

/* ------------------------------------------------------------------ */
/* Hangs.                                                              */

typedef struct blocked_info {
    char *waits_for;
    bool waits_for_given;       /* owned by the finding's part now */
    const check_pend *at;       /* the statement it is stuck at (NULL: never submitted) */
    uint32_t *to;               /* queues it waits for */
    uint32_t n_to, cap_to;
} blocked_info;

static void add_edge(blocked_info *b, uint32_t q)
{
    for (uint32_t i = 0; i < b->n_to; i++)
        if (b->to[i] == q)
            return;
    if (b->n_to == b->cap_to) {
        uint32_t cap = b->cap_to ? b->cap_to * 2 : 4;
        uint32_t *p = realloc(b->to, cap * sizeof *p);
        if (!p)
            return;
        b->to = p;
        b->cap_to = cap;
    }
    b->to[b->n_to++] = q;
}

/* Queues whose pending list holds a statement of kind k on object obj
 * (signals of a flag, records of an event, arrivals at a barrier). */
static void edges_to_pending(const check_engine *e, blocked_info *b, uint32_t self, trace_kind k,
                             uint32_t obj)
{
    for (uint32_t q = 0; q < e->n_q; q++) {
        for (const check_pend *p = e->q[q].head; p; p = p->next) {
            if (!p->marker && p->s.kind == k && p->s.object == obj && !p->removed &&
                !p->arrived) {
                if (q != self)
                    add_edge(b, q);
                break;
            }
        }
    }
}

/* Appends "; "+piece to *acc (both owned; piece freed). */
static void str_cat(char **acc, char *piece)
{
    if (!piece)
        return;
    if (!*acc) {
        *acc = piece;
        return;
    }
    char *n = check_strf("%s; %s", *acc, piece);
    free(piece);
    if (n) {
        free(*acc);
        *acc = n;
    }
}

static const char *qname(const check_engine *e, uint32_t q)
{
    return trace_str(e->t, e->t->queues[q].name);
}

/* What queue q, stuck at p, waits for. */
static void explain(const check_engine *e, uint32_t q, const check_pend *p, blocked_info *b)
{
    const trace *t = e->t;
    const trace_stmt *s = &p->s;
    if (p->unsubmitted) {
        b->waits_for = check_strf("submission by %s, which is blocked", qname(e, p->sub.queue));
        add_edge(b, p->sub.queue);
        return;
    }
    switch (s->kind) {
    case TRACE_WAIT: {
        const ev_node *n = p->bind;
        b->waits_for = check_strf("event %s (recorded on %s at line %u, which has not run)",
                                  trace_str(t, s->object), qname(e, n->queue), n->line);
        add_edge(b, n->queue);
        break;
    }
    case TRACE_SYNC: {
        char *acc = NULL;
        for (uint32_t i = 0; i < p->n_items; i++) {
            const sync_req *r = p->items[i].req;
            if (r && !r->filled) {
                char *n = acc ? check_strf("%s, %s", acc, qname(e, r->stream))
                              : check_strf("stream %s", qname(e, r->stream));
                free(acc);
                acc = n;
                add_edge(b, r->stream);
            }
        }
        b->waits_for = acc;
        break;
    }
    case TRACE_AWAIT:
        b->waits_for = check_strf("flag %s", trace_str(t, s->object));
        edges_to_pending(e, b, q, TRACE_SIGNAL, s->object);
        break;
    case TRACE_BARRIER:
    case TRACE_COLLECTIVE: {
        const gen_state *g = p->gen;
        b->waits_for = check_strf("%s %s generation %llu (%u of %llu arrived)",
                                  s->kind == TRACE_BARRIER ? "barrier" : "collective",
                                  trace_str(t, s->object), (unsigned long long)g->gen,
                                  g->n_arrived, (unsigned long long)g->count);
        edges_to_pending(e, b, q, s->kind, s->object);
        break;
    }
    default:
        b->waits_for = check_strf("%s", trace_kind_str(s->kind));
        break;
    }
}

/* The cycle through `start`, if the wait-for graph has one: fills cyc. */
static uint32_t find_cycle(const blocked_info *info, uint32_t n_q, uint32_t *cyc)
{
    /* colour: 0 unvisited, 1 on stack, 2 done; iterative DFS */
    uint8_t *col = calloc(n_q, 1);
    uint32_t *stack = malloc(n_q * sizeof *stack), *edge = calloc(n_q, sizeof *edge);
    uint32_t len = 0;
    if (!col || !stack || !edge)
        goto out;
    for (uint32_t s0 = 0; s0 < n_q && !len; s0++) {
        if (col[s0] || !info[s0].waits_for)
            continue;
        uint32_t sp = 0;
        stack[sp++] = s0;
        col[s0] = 1;
        edge[s0] = 0;
        while (sp && !len) {
            uint32_t u = stack[sp - 1];
            if (edge[u] < info[u].n_to) {
                uint32_t v = info[u].to[edge[u]++];
                if (!info[v].waits_for)
                    continue;
                if (col[v] == 1) {
                    uint32_t i = sp;
                    while (stack[i - 1] != v)
                        i--;
                    for (uint32_t k = i - 1; k < sp; k++)
                        cyc[len++] = stack[k];
                } else if (!col[v]) {
                    col[v] = 1;
                    edge[v] = 0;
                    stack[sp++] = v;
                }
            } else {
                col[u] = 2;
                sp--;
            }
        }
    }
out:
    free(col);
    free(stack);
    free(edge);
    return len;
}

/* A statement of q's pending list after its head that would release one of
 * the queues in cyc: a signal someone awaits, a record someone waits on. */
static const check_pend *cycle_breaker(const check_engine *e, uint32_t q, const blocked_info *info,
                                       const uint32_t *cyc, uint32_t n)
{
    for (const check_pend *p = e->q[q].head ? e->q[q].head->next : NULL; p; p = p->next) {
        for (uint32_t i = 0; i < n; i++) {
            const check_pend *h = info[cyc[i]].at;
            if (!h || cyc[i] == q)
                continue;
            if (p->s.kind == TRACE_SIGNAL && h->s.kind == TRACE_AWAIT && h->s.object == p->s.object)
                return p;
            if (p->s.kind == TRACE_RECORD && h->s.kind == TRACE_WAIT && h->bind == p->rec)
                return p;
        }
    }
    return NULL;
}

static void report_hang(check_engine *e)
{
    const trace *t = e->t;
    uint32_t n_q = e->n_q;
    blocked_info *info = calloc(n_q, sizeof *info);
    uint32_t *cyc = malloc((n_q + 1) * sizeof *cyc);
    if (!info || !cyc) {
        free(info);
        free(cyc);
        e->oom = true;
        return;
    }
    for (uint32_t q = 0; q < n_q; q++) {
        const check_pend *p = e->q[q].head;
        if (!p)
            continue;
        info[q].at = p;
        explain(e, q, p, &info[q]);
    }
    uint32_t n_blocked = 0;
    for (uint32_t q = 0; q < n_q; q++)
        n_blocked += info[q].waits_for != NULL;
    if (n_blocked == 0)
        goto out;

    trace_finding f = { 0 };
    f.kind = TRACE_FINDING_HANG;
    f.first.seq = TRACE_NO_SEQ;
    f.second.seq = TRACE_NO_SEQ;
    f.buffer = f.root = TRACE_NONE;
    f.object = TRACE_NONE;
    uint32_t n_cyc = find_cycle(info, n_q, cyc);
    f.parts = calloc(n_blocked + n_cyc + 1, sizeof *f.parts);
    char *names = NULL;
    if (!f.parts) {
        e->oom = true;
        goto out;
    }
    for (uint32_t q = 0; q < n_q; q++) {
        if (!info[q].waits_for)
            continue;
        /* the statement it is stuck at (unsubmitted ones included) */
        const trace_stmt *s = info[q].at ? &info[q].at->s : NULL;
        f.parts[f.n_parts++] = (trace_finding_part){
            TRACE_PART_BLOCKED, false, q, s ? s->seq : TRACE_NO_SEQ, s ? s->line : 0, TRACE_NONE,
            0, info[q].waits_for };
        info[q].waits_for_given = true;     /* the part owns the text now */
        str_cat(&names, check_strf("%s waits for %s", qname(e, q), info[q].waits_for));
    }

    char *fix = NULL;
    if (n_cyc) {
        char *chain = NULL;
        for (uint32_t i = 0; i <= n_cyc; i++) {
            uint32_t q = cyc[i % n_cyc];
            if (i < n_cyc)
                f.parts[f.n_parts++] = (trace_finding_part){ TRACE_PART_CYCLE, false, q,
                                                             TRACE_NO_SEQ, 0, TRACE_NONE, 0,
                                                             NULL };
            char *c = chain ? check_strf("%s -> %s", chain, qname(e, q))
                            : check_strf("%s", qname(e, q));
            free(chain);
            chain = c;
        }
        char buf1[256], buf2[256];
        for (uint32_t i = 0; i < n_cyc && !fix; i++) {
            uint32_t q = cyc[i];
            const check_pend *br = cycle_breaker(e, q, info, cyc, n_cyc);
            if (!br)
                continue;
            trace_stmt_ref a = check_ref_of_stmt(&br->s), b = check_ref_of_stmt(&info[q].at->s);
            fix = check_strf("break the cycle %s: move `%s %s %s` (%s) before `%s %s %s` (%s)",
                             chain ? chain : "", qname(e, q), trace_kind_str(br->s.kind),
                             trace_str(t, br->s.object), check_ref_name(t, &a, buf1, sizeof buf1),
                             qname(e, q), trace_kind_str(info[q].at->s.kind),
                             trace_str(t, info[q].at->s.object),
                             check_ref_name(t, &b, buf2, sizeof buf2));
        }
        if (!fix)
            fix = check_strf("break the cycle %s: one of these queues must release the next "
                             "before it blocks",
                             chain ? chain : "");
        str_cat(&names, check_strf("deadlock: %s", chain ? chain : ""));
        free(chain);
    } else {
        /* The root causes: blocked queues whose blockers are not blocked. */
        char buf[256];
        for (uint32_t q = 0; q < n_q; q++) {
            const check_pend *p = info[q].at;
            if (!info[q].waits_for || !p || p->unsubmitted)
                continue;
            bool root = true;
            for (uint32_t i = 0; i < info[q].n_to; i++)
                if (info[info[q].to[i]].waits_for)
                    root = false;
            if (!root)
                continue;
            trace_stmt_ref r = check_ref_of_stmt(&p->s);
            const char *at = check_ref_name(t, &r, buf, sizeof buf);
            if (p->s.kind == TRACE_AWAIT)
                str_cat(&fix, check_strf("nothing signals %s: add `signal %s` where its data is "
                                         "ready, or remove the await at %s",
                                         trace_str(t, p->s.object), trace_str(t, p->s.object), at));
            else if (p->s.kind == TRACE_BARRIER || p->s.kind == TRACE_COLLECTIVE) {
                const gen_state *g = p->gen;
                bool told = false;  /* one line per generation, not per participant */
                for (uint32_t k = 0; k < q && !told; k++)
                    told = info[k].at && !info[k].at->unsubmitted && info[k].at->gen == g;
                if (told)
                    continue;
                char *who = NULL;
                for (uint32_t i = 0; i < g->n_arrived; i++) {
                    char *n = who ? check_strf("%s, %s", who, qname(e, g->arr[i].queue))
                                  : check_strf("%s", qname(e, g->arr[i].queue));
                    free(who);
                    who = n;
                }
                str_cat(&fix, check_strf("%s %s generation %llu expects %llu participants but "
                                         "only %u arrive (%s): make the missing queue arrive "
                                         "or use %s=%u",
                                         trace_kind_str(p->s.kind), trace_str(t, p->s.object),
                                         (unsigned long long)g->gen,
                                         (unsigned long long)g->count, g->n_arrived,
                                         who ? who : "",
                                         p->s.kind == TRACE_BARRIER ? "count" : "size",
                                         g->n_arrived));
                free(who);
            } else
                str_cat(&fix, check_strf("%s at %s can never complete", trace_kind_str(p->s.kind),
                                         at));
        }
        if (!fix)
            fix = check_strf("release the blocked queues");
    }
    f.text = names;
    f.fix = fix;
    if (!check_report_add(e->rep, &f))
        trace_finding_release(&f);
out:
    for (uint32_t q = 0; q < n_q; q++) {
        if (!info[q].waits_for_given)
            free(info[q].waits_for);
        free(info[q].to);
    }
    free(info);
    free(cyc);
}

int check_engine_finish(check_engine *e, bool ignore_hangs)
{
    drain(e);
    if (!ignore_hangs && !check_engine_quiescent(e))
        report_hang(e);
    return e->oom ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Lifetime, checkpoints.                                              */

static void free_nodes(check_map *events, check_map *flags)
{
    for (uint32_t i = 0; i < events->cap; i++)
        if (events->used[i] && events->vals[i])
            ev_unref((ev_node *)(uintptr_t)events->vals[i]);
    for (uint32_t i = 0; i < flags->cap; i++)
        if (flags->used[i] && flags->vals[i]) {
            flag_node *f = (flag_node *)(uintptr_t)flags->vals[i];
            check_vc_unref(f->vc);
            free(f->waiters.q);
            free(f);
        }
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
    check_map_free(&e->events);
    check_map_free(&e->flags);
    trace_binder_free(e->bind);
    check_map_free(&e->gens);
    check_map_free(&e->mismatched);
    check_map_free(&e->dirty_events);
    check_map_free(&e->dirty_flags);
    free(e->work);
    free(e);
}

void check_engine_track(check_engine *e, bool on)
{
    e->track = on;
    if (e->dirty_root)
        memset(e->dirty_root, 0, e->n_shadow);
    check_map_free(&e->dirty_events);
    check_map_free(&e->dirty_flags);
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
    if (check_map_copy(&c->events, &e->events) != 0 || check_map_copy(&c->flags, &e->flags) != 0 ||
        !(c->bind = trace_binder_clone(e->bind)) ||
        check_map_copy(&c->mismatched, &e->mismatched) != 0)
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
        c->flags.vals[i] = (uint64_t)(uintptr_t)n;
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
        uint64_t *x = check_map_get(&a->events, a->dirty_events.keys[i]);
        uint64_t *y = check_map_get(&b->events, a->dirty_events.keys[i]);
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
        uint64_t *x = check_map_get(&a->flags, a->dirty_flags.keys[i]);
        uint64_t *y = check_map_get(&b->flags, a->dirty_flags.keys[i]);
        if (!x && !y)
            continue;
        if (!x || !y)
            return false;
        const flag_node *n = (const flag_node *)(uintptr_t)*x, *m = (const flag_node *)(uintptr_t)*y;
        if (n->ran != m->ran || n->passed != m->passed || !check_vc_equal(n->vc, m->vc))
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
