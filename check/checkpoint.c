/*
 * checkpoint.c -- the minimiser's view of an engine: copies that share
 * clocks and shadow segments copy-on-write (check_engine_clone), copies
 * made again into an engine that held one before, looking only at the
 * shadows that may differ (check_engine_assign), the test that two
 * quiescent engines will behave alike from here on (check_engine_same), the
 * tracking of what changed since a copy, and pruning: the minimiser knows
 * the whole trace, so it tells the engine when each record and flag is last
 * used, and dead ones go (docs/checker.md, "The minimiser").
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

/* Empties m, keeping its storage. */
static void map_clear(trace_u64map *m)
{
    if (m->count)
        memset(m->used, 0, m->cap);
    m->count = 0;
}

void check_engine_track(check_engine *e, bool on)
{
    e->track = on;
    if (e->dirty_root)
        memset(e->dirty_root, 0, e->n_shadow);
    map_clear(&e->dirty_events);
    map_clear(&e->dirty_flags);
}

/* dst := src, reusing dst's storage when the sizes agree. 0 or -1 (OOM). */
static int map_assign(trace_u64map *dst, const trace_u64map *src)
{
    if (dst->cap != src->cap || !src->cap) {
        trace_u64map_free(dst);
        return trace_u64map_copy(dst, src);
    }
    memcpy(dst->keys, src->keys, src->cap * sizeof *dst->keys);
    memcpy(dst->vals, src->vals, src->cap * sizeof *dst->vals);
    memcpy(dst->used, src->used, src->cap);
    dst->count = src->count;
    return 0;
}

/* Drops what dst holds of a previous copy: its nodes, maps and binder (its
 * queues' clocks and its shadows are replaced one by one by the caller). */
static void drop_tables(check_engine *d)
{
    for (uint32_t i = 0; i < d->events.cap; i++)
        if (d->events.used[i] && d->events.vals[i])
            check_ev_unref((ev_node *)(uintptr_t)d->events.vals[i]);
    for (uint32_t i = 0; i < d->flags.cap; i++)
        if (d->flags.used[i] && d->flags.vals[i])
            flag_node_free((flag_node *)(uintptr_t)d->flags.vals[i]);
    map_clear(&d->events);
    map_clear(&d->flags);
    map_clear(&d->dirty_events);
    map_clear(&d->dirty_flags);
    trace_binder_free(d->bind);
    d->bind = NULL;
}

/* The flags of a quiescent engine, deep: a flag's sets grow in place. */
static int copy_flags(check_engine *c, const check_engine *e)
{
    if (map_assign(&c->flags, &e->flags) != 0)
        return -1;
    for (uint32_t i = 0; i < c->flags.cap; i++) {
        if (!c->flags.used[i] || !c->flags.vals[i])
            continue;
        const flag_node *f = (const flag_node *)(uintptr_t)c->flags.vals[i];
        flag_node *n = calloc(1, sizeof *n);
        if (!n) {
            /* the rest still point at e's nodes: forget them */
            for (uint32_t k = i; k < c->flags.cap; k++)
                c->flags.vals[k] = 0;
            return -1;
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
                return -1;
            memcpy(n->values, f->values, f->n_sets * sizeof *n->values);
            for (uint64_t k = 0; k < f->n_sets; k++) {
                n->snaps[k] = f->snaps[k];
                n->snaps[k].vc = check_vc_ref(f->snaps[k].vc);
            }
            n->n_sets = n->cap_sets = f->n_sets;
        }
    }
    return 0;
}

bool check_engine_reusable(const check_engine *e)
{
    return !e->oom && e->gens.count == 0 && check_engine_quiescent(e);
}

/* Bytes [i, i + 8) of a and b (each n long, absent bytes zero) are all zero:
 * dirty bytes are scanned a word at a time. */
static bool clean8(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb, uint32_t i)
{
    uint64_t x = 0, y = 0;
    if (i + 8 <= na)
        memcpy(&x, a + i, 8);
    else
        for (uint32_t k = i; k < na; k++)
            x |= a[k];
    if (i + 8 <= nb)
        memcpy(&y, b + i, 8);
    else
        for (uint32_t k = i; k < nb; k++)
            y |= b[k];
    return (x | y) == 0;
}

int check_engine_assign(check_engine *c, const check_engine *e, check_report *rep,
                        const uint32_t *roots, size_t n_roots)
{
    c->t = e->t;
    c->rep = rep;
    c->remove = e->remove;
    c->fed = e->fed;
    c->only_host = e->only_host;
    c->oom = false;
    c->track = false;
    c->n_work = c->work_head = 0;
    drop_tables(c);
    if (c->cap_q < e->n_q) {
        uint32_t cap = e->cap_q ? e->cap_q : 1;
        qstate *q = realloc(c->q, cap * sizeof *q);
        if (!q)
            return -1;
        for (uint32_t i = c->cap_q; i < cap; i++)
            q[i] = (qstate){ 0 };
        c->q = q;
        c->cap_q = cap;
    }
    for (uint32_t q = 0; q < e->n_q; q++) {
        check_vc *vc = check_vc_ref(e->q[q].vc), *sub = check_vc_ref(e->q[q].sub_vc);
        if (q < c->n_q) {
            check_vc_unref(c->q[q].vc);
            check_vc_unref(c->q[q].sub_vc);
        }
        c->q[q] = e->q[q];
        c->q[q].vc = vc;
        c->q[q].sub_vc = sub;
        c->q[q].head = c->q[q].tail = NULL;
        c->q[q].req_head = c->q[q].req_tail = NULL;
        c->q[q].in_work = false;
    }
    for (uint32_t q = e->n_q; q < c->n_q; q++) {
        check_vc_unref(c->q[q].vc);
        check_vc_unref(c->q[q].sub_vc);
        c->q[q] = (qstate){ 0 };
    }
    c->n_q = e->n_q;
    uint32_t old_n = c->n_shadow;
    if (c->n_shadow < e->n_shadow) {
        check_shadow **sh = realloc(c->shadow, e->n_shadow * sizeof *sh);
        if (sh)
            c->shadow = sh;
        uint8_t *d = sh ? realloc(c->dirty_root, e->n_shadow) : NULL;
        if (!d)
            return -1;
        c->dirty_root = d;
        memset(c->shadow + c->n_shadow, 0, (e->n_shadow - c->n_shadow) * sizeof *sh);
        c->n_shadow = e->n_shadow;
    }
    /* A shadow both hold is shared (refs > 1), so neither changes it in
     * place: equal pointers are equal states, and only the others move.
     * With a list of roots, only those (and roots c did not have) can
     * differ. */
    size_t n_look = roots ? n_roots + (c->n_shadow - old_n) : c->n_shadow;
    for (size_t k = 0; k < n_look; k++) {
        uint32_t i = !roots ? (uint32_t)k : k < n_roots ? roots[k] : old_n + (uint32_t)(k - n_roots);
        if (i >= c->n_shadow)
            continue;
        check_shadow *x = i < e->n_shadow ? e->shadow[i] : NULL;
        if (c->shadow[i] != x) {
            check_shadow_unref(c->shadow[i]);
            c->shadow[i] = x ? check_shadow_ref(x) : NULL;
        }
    }
    if (c->dirty_root && c->n_shadow)
        memset(c->dirty_root, 0, c->n_shadow);
    if (map_assign(&c->events, &e->events) != 0)
        return -1;
    for (uint32_t i = 0; i < c->events.cap; i++)
        if (c->events.used[i] && c->events.vals[i])
            ((ev_node *)(uintptr_t)c->events.vals[i])->refs++;
    if (copy_flags(c, e) != 0 || !(c->bind = trace_binder_clone(e->bind)) ||
        map_assign(&c->mismatched, &e->mismatched) != 0)
        return -1;
    c->flag_totals = e->flag_totals;
    c->record_last = e->record_last;
    c->flag_last = e->flag_last;
    c->inexact = e->inexact;
    return 0;
}

void check_engine_let_go(check_engine *c, const check_engine *e, uint32_t root)
{
    if (root < c->n_shadow && root < e->n_shadow && c->shadow[root] &&
        c->shadow[root] == e->shadow[root]) {
        check_shadow_unref(c->shadow[root]);
        c->shadow[root] = NULL;
    }
}

check_engine *check_engine_clone(const check_engine *e, check_report *rep)
{
    check_engine *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (check_engine_assign(c, e, rep, NULL, 0) != 0) {
        check_engine_free(c);
        return NULL;
    }
    return c;
}

static bool snap_equal(const check_snap *a, const check_snap *b)
{
    return a->queue == b->queue && a->own == b->own && check_vc_equal(a->vc, b->vc);
}

static bool event_same(const check_engine *a, const check_engine *b, uint64_t key)
{
    if (a->record_last && !still_used(a->record_last, key, a->fed))
        return true;            /* no later wait reads it: as good as pruned */
    const uint64_t *x = trace_u64map_get(&a->events, key), *y = trace_u64map_get(&b->events, key);
    if (!x && !y)
        return true;            /* pruned in both */
    if (!x || !y)
        return false;
    const ev_node *n = (const ev_node *)(uintptr_t)*x, *m = (const ev_node *)(uintptr_t)*y;
    return n->seq == m->seq && n->executed == m->executed && snap_equal(&n->snap, &m->snap);
}

static bool flag_same(const check_engine *a, const check_engine *b, uint64_t key)
{
    /* a flag's node goes once its last signal or await is read (a
     * message's once its recv ran, which both did) */
    if (a->flag_last && key >> 63 == 0 && !still_used(a->flag_last, key, a->fed))
        return true;
    const uint64_t *x = trace_u64map_get(&a->flags, key), *y = trace_u64map_get(&b->flags, key);
    if (!x && !y)
        return true;
    if (!x || !y)
        return false;
    const flag_node *n = (const flag_node *)(uintptr_t)*x, *m = (const flag_node *)(uintptr_t)*y;
    if (n->ran != m->ran || n->passed != m->passed || (n->passed && n->passed_q != m->passed_q) ||
        !check_vc_equal(n->vc, m->vc) || n->n_sets != m->n_sets)
        return false;
    for (uint64_t k = 0; k < n->n_sets; k++)
        if (n->values[k] != m->values[k] || !snap_equal(&n->snaps[k], &m->snaps[k]))
            return false;
    return true;
}

/* The keys of dirty set d name the same state in a and b. */
static bool dirty_same(const check_engine *a, const check_engine *b, const trace_u64map *d,
                       bool (*same)(const check_engine *, const check_engine *, uint64_t))
{
    for (uint32_t i = 0; i < d->cap; i++)
        if (d->used[i] && !same(a, b, d->keys[i]))
            return false;
    return true;
}

/* Queue q of a and of b: the same counter and clock, nothing pending. */
static bool queue_same(const check_engine *a, const check_engine *b, uint32_t q)
{
    const qstate *x = &a->q[q], *y = &b->q[q];
    return x->own == y->own && !x->head && !y->head &&
           (x->vc == y->vc || check_vc_equal(x->vc, y->vc));
}

bool check_engine_clocks_same(const check_engine *a, const check_engine *b, uint32_t *hint)
{
    if (a->n_q != b->n_q || a->fed != b->fed)
        return false;
    /* they differ until the windows meet, most often in the queue that
     * differed last time */
    if (hint && *hint < a->n_q && !queue_same(a, b, *hint))
        return false;
    for (uint32_t q = 0; q < a->n_q; q++) {
        if (!queue_same(a, b, q)) {
            if (hint)
                *hint = q;
            return false;
        }
    }
    return true;
}

/* How far clocks_alike looks ahead for a host sync that would read a
 * stream's clock before the stream runs again; farther, it assumes one. */
#define SYNC_LOOKAHEAD 512

/* Until stream q runs its next statement, no host sync covers it whose
 * host may not know all q knows in either engine: such a sync would take
 * q's clock as it is now. Looks at the statements from the read position
 * to q's next one (at most SYNC_LOOKAHEAD). */
static bool unread_until_next(const check_engine *a, const check_engine *b, uint32_t q)
{
    const trace *t = a->t;
    for (uint64_t i = a->fed, end = a->fed + SYNC_LOOKAHEAD; i < t->n_stmts; i++) {
        if (i == end)
            return false;
        if (a->remove && a->remove[i])
            continue;
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.queue == q)
            return true;
        if (s.kind != TRACE_SYNC || !trace_sync_covers(t, &s, q))
            continue;
        uint32_t h = s.queue;
        if (h >= a->n_q || !queue_same(a, b, h) || !check_vc_leq(a->q[q].vc, a->q[h].vc) ||
            !check_vc_leq(b->q[q].vc, b->q[h].vc))
            return false;
    }
    return true;
}

/*
 * Stream q's clocks differ in a and b, but they will not be told apart: q
 * has nothing pending, the same counter, and every host that submits to it
 * (reach) has the same clock in both, which holds all of q's clock in each.
 * q's next statement then joins its submitter's clock of that moment, which
 * holds both, so after it q's clock is the same in a and b; before it, only
 * a host sync could read q's clock (a record, a barrier or an access is a
 * statement of q), and unread_until_next sees none that could tell them
 * apart. What q knows only through its clock its submitters know too, so a
 * read's deadness (queue_knows) is the same in both.
 */
static bool stream_alike(const check_engine *a, const check_engine *b, const check_reach *reach,
                         uint32_t q)
{
    const qstate *x = &a->q[q], *y = &b->q[q];
    if (x->own != y->own || x->head || y->head || !x->is_stream || q >= reach->n_queues ||
        reach->no_submitter[q] || reach->sub_at[q] == reach->sub_at[q + 1])
        return false;
    for (uint32_t k = reach->sub_at[q]; k < reach->sub_at[q + 1]; k++) {
        uint32_t h = reach->sub_h[k];
        if (h >= a->n_q || !queue_same(a, b, h) || !check_vc_leq(x->vc, a->q[h].vc) ||
            !check_vc_leq(y->vc, b->q[h].vc))
            return false;
    }
    return unread_until_next(a, b, q);
}

/* check_engine_clocks_same, streams also alike by stream_alike. */
static bool clocks_alike(const check_engine *a, const check_engine *b, const check_reach *reach,
                         uint32_t *hint)
{
    if (a->n_q != b->n_q || a->fed != b->fed)
        return false;
    if (hint && *hint < a->n_q && !queue_same(a, b, *hint) &&
        !stream_alike(a, b, reach, *hint))
        return false;
    for (uint32_t q = 0; q < a->n_q; q++) {
        if (!queue_same(a, b, q) && !stream_alike(a, b, reach, q)) {
            if (hint)
                *hint = q;
            return false;
        }
    }
    return true;
}

bool check_engine_clocks_alike(const check_engine *a, const check_engine *b,
                               const check_reach *reach, uint32_t *hint)
{
    return clocks_alike(a, b, reach, hint);
}

/* Read r can never race again: every queue that accesses the root knows
 * it -- the queue ran it, its clock covers it, or it is a stream every
 * statement of which is submitted by hosts that all know it (for a stream
 * whose clocks differ, stream_alike: then its clock knows no more than
 * its submitters, so the answer is the same in both engines). A later access
 * of the root runs on one of those queues with a clock at least the
 * queue's now (a stream's later statements also at least their
 * submitter's), so it is ordered after r. Only quiescent engines are asked
 * (nothing pending, no statement submitted and not run). */
static bool knows(const check_engine *e, uint32_t q, const check_site *r)
{
    return q == r->queue || (q < e->n_q && check_vc_get(e->q[q].vc, r->queue) >= r->time);
}

static bool queue_knows(const check_engine *e, const check_reach *reach, uint32_t q,
                        const check_site *r)
{
    if (knows(e, q, r))
        return true;
    if (q >= reach->n_queues || q >= e->n_q || !e->q[q].is_stream || reach->no_submitter[q] ||
        reach->sub_at[q] == reach->sub_at[q + 1])
        return false;
    for (uint32_t k = reach->sub_at[q]; k < reach->sub_at[q + 1]; k++)
        if (!knows(e, reach->sub_h[k], r))
            return false;
    return true;
}

static bool read_dead(const check_engine *e, const check_reach *reach, uint32_t root,
                      const check_site *r)
{
    if (root >= reach->n_roots) {
        for (uint32_t q = 0; q < e->n_q; q++)
            if (!queue_knows(e, reach, q, r))
                return false;
        return true;
    }
    for (uint32_t k = reach->root_at[root]; k < reach->root_at[root + 1]; k++)
        if (!queue_knows(e, reach, reach->root_q[k], r))
            return false;
    return true;
}

/* Some read of c that is not dead has seq `seq`. */
static bool has_read(const check_cell *c, uint64_t seq)
{
    for (uint32_t i = 0; i < c->n_reads; i++)
        if (check_cell_read(c, i)->seq == seq)
            return true;
    return false;
}

/* The live reads of x (those not dead) are reads of y. */
static bool live_reads_in(const check_engine *e, const check_reach *reach, uint32_t root,
                          const check_cell *x, const check_cell *y)
{
    for (uint32_t i = 0; i < x->n_reads; i++) {
        const check_site *r = check_cell_read(x, i);
        if (!has_read(y, r->seq) && !read_dead(e, reach, root, r))
            return false;
    }
    return true;
}

/*
 * Two cells of one byte range in two engines with the same clocks, which
 * find the same from here on: the same last write and lifetime marks, and
 * the same reads once dead ones are left out. Why that is enough (hb.c's
 * visit_cell): a later access x is ordered after every dead read, so
 *  - a read x checks the last write (the same) and keeps the reads or drops
 *    them as all of them happen before x: dead ones do, so the choice is
 *    the same; the live reads stay equal (x replaces its own queue's read,
 *    whichever of them held it);
 *  - a write x reports each read it is not ordered after -- never a dead
 *    one -- then drops them all: the cells are then equal.
 * Deadness only grows, and the engines' clocks stay equal, so it holds
 * until then. The reports are the same pairs at the same statements.
 */
static bool cells_alike(const check_engine *e, const check_reach *reach, uint32_t root,
                        const check_cell *a, const check_cell *b)
{
    check_cell x = *a, y = *b;
    x.n_reads = y.n_reads = 0;
    x.reads = y.reads = NULL;
    if (!check_cell_equal(&x, &y))      /* the write and the lifetime marks */
        return false;
    return live_reads_in(e, reach, root, a, b) && live_reads_in(e, reach, root, b, a);
}

/* Walks a shadow's segments in order. */
typedef struct seg_cursor {
    const check_shadow *s;
    uint32_t k, i;
} seg_cursor;

static const check_seg *cursor_seg(const seg_cursor *c)
{
    return c->s && c->k < c->s->n_chunks ? &c->s->chunks[c->k].segs[c->i] : NULL;
}

static void cursor_next(seg_cursor *c)
{
    if (++c->i == c->s->chunks[c->k].n) {
        c->k++;
        c->i = 0;
    }
}

/* The shadows x and y (NULL: all empty) of root, byte by byte alike. */
static bool shadows_alike(const check_engine *e, const check_reach *reach, uint32_t root,
                          const check_shadow *x, const check_shadow *y)
{
    check_cell empty;
    check_cell_clear(&empty);
    seg_cursor a = { x, 0, 0 }, b = { y, 0, 0 };
    const check_seg *sa = cursor_seg(&a), *sb = cursor_seg(&b);
    uint64_t pos = 0;
    while (sa || sb) {
        /* the piece [pos, end) has one cell on each side */
        const check_cell *ca = sa && sa->lo <= pos ? &sa->c : &empty;
        const check_cell *cb = sb && sb->lo <= pos ? &sb->c : &empty;
        uint64_t end = UINT64_MAX;
        if (sa)
            end = sa->lo <= pos ? sa->hi : sa->lo;
        if (sb) {
            uint64_t eb = sb->lo <= pos ? sb->hi : sb->lo;
            end = eb < end ? eb : end;
        }
        if ((ca != &empty || cb != &empty) && !cells_alike(e, reach, root, ca, cb))
            return false;
        pos = end;
        if (sa && sa->hi <= pos) {
            cursor_next(&a);
            sa = cursor_seg(&a);
        }
        if (sb && sb->hi <= pos) {
            cursor_next(&b);
            sb = cursor_seg(&b);
        }
    }
    return true;
}

/* Shadows x and y of root: equal, or with reach alike. */
static bool shadows_same(const check_engine *e, const check_reach *reach, uint32_t root,
                         const check_shadow *x, const check_shadow *y)
{
    return check_shadow_equal(x, y) || (reach && shadows_alike(e, reach, root, x, y));
}

static bool engines_same(const check_engine *a, const check_engine *b, const uint32_t *roots,
                         size_t n_roots, const check_reach *reach, uint32_t *hint)
{
    if (a->mismatched.count != b->mismatched.count ||
        !(reach ? clocks_alike(a, b, reach, hint) : check_engine_clocks_same(a, b, hint)))
        return false;
    if (!trace_binder_same(a->bind, b->bind))
        return false;
    /* what either changed since the copy both started from */
    if (!dirty_same(a, b, &a->dirty_events, event_same) ||
        !dirty_same(a, b, &b->dirty_events, event_same) ||
        !dirty_same(a, b, &a->dirty_flags, flag_same) ||
        !dirty_same(a, b, &b->dirty_flags, flag_same))
        return false;
    uint32_t ns = a->n_shadow > b->n_shadow ? a->n_shadow : b->n_shadow;
    if (roots) {
        for (size_t k = 0; k < n_roots; k++) {
            uint32_t i = roots[k];
            const check_shadow *x = i < a->n_shadow ? a->shadow[i] : NULL;
            const check_shadow *y = i < b->n_shadow ? b->shadow[i] : NULL;
            if (!shadows_same(a, reach, i, x, y))
                return false;
        }
        return true;
    }
    for (uint32_t i = 0; i < ns; i++) {
        if ((i & 7) == 0 && i + 8 <= a->n_shadow && i + 8 <= b->n_shadow &&
            clean8(a->dirty_root, a->n_shadow, b->dirty_root, b->n_shadow, i)) {
            i += 7;
            continue;
        }
        bool da = i >= a->n_shadow || a->dirty_root[i], db = i >= b->n_shadow || b->dirty_root[i];
        if (!da && !db)
            continue;
        const check_shadow *x = i < a->n_shadow ? a->shadow[i] : NULL;
        const check_shadow *y = i < b->n_shadow ? b->shadow[i] : NULL;
        if (!shadows_same(a, reach, i, x, y))
            return false;
    }
    return true;
}

bool check_engine_same(const check_engine *a, const check_engine *b, const uint32_t *roots,
                       size_t n_roots, uint32_t *hint)
{
    return engines_same(a, b, roots, n_roots, NULL, hint);
}

bool check_engine_alike(const check_engine *a, const check_engine *b, const uint32_t *roots,
                        size_t n_roots, const check_reach *reach, uint32_t *hint)
{
    return engines_same(a, b, roots, n_roots, reach, hint);
}
