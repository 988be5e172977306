/*
 * vclock.c -- sparse, reference-counted vector clocks that stay small
 * when everyone has learnt about everyone.
 *
 * A trace may have thousands of queues (ranks x streams), but a queue only
 * learns about the queues it synchronises with, directly or transitively.
 * So a clock stores only the entries it has, sorted by queue: a lookup is a
 * binary search, a join a merge of sorted arrays, and a clock that never
 * synchronised is NULL and costs nothing.
 *
 * Clocks are shared: a snapshot (an event record, a host's state at a
 * submission, a barrier's release) takes a reference instead of a copy.
 * A shared clock is immutable; mutators copy it first (copy-on-write), and
 * mutate in place when they hold the only reference.
 *
 * Base and delta. Sparseness alone does not help once an all-rank
 * collective has put every queue in every queue's past: then every clock
 * holds an entry per queue, and a join or a comparison of two of them would
 * cost O(queues) although they differ in a handful of entries. So a clock is
 * either flat (its entries are the whole clock) or a small sorted delta over
 * a shared flat `base`: its value is the base with the delta's entries
 * raised (each delta entry is above the base's). A raise of a large shared
 * clock makes a one-entry delta over it instead of a copy; joining two
 * clocks whose bases are ordered (the same base, or one known to be below
 * the other) merges their deltas in O(delta log base), and so does a
 * comparison. A delta that grows past a quarter of its base (and past
 * FLAT_MIN entries) is folded into a new flat clock, so deltas stay small
 * and the cost of a fold is spread over the entries that made it. Small
 * clocks (bases of at most FLAT_MIN entries, every clock of a trace with a
 * few queues) stay flat: a join of two is one merge pass, as is a copy.
 *
 * Lines. "Base X is below base Y" must be cheap to know. A flat clock made
 * from a base (a fold, or a join whose result is flat) is above it; the
 * first such clock of each base continues the base's line (same line id,
 * depth + 1), so along a line every clock is above every clock of smaller
 * depth: X <= Y when both are on one line and X is not deeper. The next
 * generation of an allreduce is the next clock on the line of the last, and
 * a queue whose delta sits on an older generation joins a newer one in
 * O(delta). A flat clock changed in place (only reference, raised) after its
 * line was continued starts a new line: its successor no longer covers it.
 * Every flat clock has a line (line 0 is never "the same line"). When
 * nothing is known, a comparison or join walks both clocks in full and
 * keeps the larger base.
 *
 * Many at once. A generation joins the clocks of all its arrivals and
 * raises an entry per participant. Joined one by one, each arrival would
 * merge its few entries into a delta that grows with every arrival; the
 * accumulator (check_vc_acc) instead collects the deltas and raised entries,
 * moves its base forward when an arrival's base is newer, and sorts and
 * merges everything once at the end.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Deltas up to this size are never folded (a fold costs O(base)). */
#define FLAT_MIN 16

static atomic_uint_fast64_t next_line = 1;

static check_vc *vc_alloc(uint32_t cap)
{
    if (cap < 4)
        cap = 4;
    check_vc *v = malloc(sizeof *v + (size_t)cap * sizeof v->e[0]);
    if (!v)
        return NULL;
    v->refs = 1;
    v->n = 0;
    v->cap = cap;
    v->base = NULL;
    v->line = 0;
    v->depth = 0;
    v->extended = false;
    return v;
}

/* A new flat clock starts its own line. */
static void vc_new_line(check_vc *v)
{
    v->line = (uint64_t)atomic_fetch_add(&next_line, 1);
    v->depth = 0;
    v->extended = false;
}

/* Flat clock v, made to be >= flat clock parent, continues parent's line if
 * nothing continued it yet. parent may be shared: `extended` is bookkeeping,
 * not part of its value. */
static void vc_child_of(check_vc *v, const check_vc *parent)
{
    check_vc *p = (check_vc *)parent;
    if (p && !p->extended) {
        p->extended = true;
        v->line = p->line;
        v->depth = p->depth + 1;
        v->extended = false;
    } else {
        vc_new_line(v);
    }
}

check_vc *check_vc_ref(check_vc *v)
{
    if (v)
        v->refs++;
    return v;
}

void check_vc_unref(check_vc *v)
{
    if (v && --v->refs == 0) {
        check_vc_unref(v->base);
        free(v);
    }
}

/* The flat clock a clock's value starts from: its base, or itself. */
static inline const check_vc *vc_base(const check_vc *v)
{
    return v->base ? v->base : v;
}

/* Flat clocks x <= y, as far as is known without looking at entries. */
static inline bool base_leq(const check_vc *x, const check_vc *y)
{
    return x == y || (x->line && x->line == y->line && x->depth <= y->depth);
}

static uint32_t find(const check_vc_entry *e, uint32_t n, uint32_t q)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (e[mid].queue < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The time of q among n sorted entries (0 when absent). */
static uint32_t lookup(const check_vc_entry *e, uint32_t n, uint32_t q)
{
    if (n <= 8) {
        for (uint32_t i = 0; i < n; i++)
            if (e[i].queue == q)
                return e[i].time;
        return 0;
    }
    uint32_t i = find(e, n, q);
    return i < n && e[i].queue == q ? e[i].time : 0;
}

uint32_t check_vc_get(const check_vc *v, uint32_t q)
{
    if (!v)
        return 0;
    uint32_t t = lookup(v->e, v->n, q);
    if (t || !v->base)
        return t;       /* a delta entry is above the base's */
    return lookup(v->base->e, v->base->n, q);
}

/* Walks a clock's value in queue order: the merge of its base and delta.
 * Also a forward-only lookup (it_get) for queues asked in rising order. */
typedef struct vc_it {
    const check_vc_entry *b, *be, *d, *de;
} vc_it;

static void it_init(vc_it *it, const check_vc *v)
{
    it->b = it->be = it->d = it->de = NULL;
    if (!v)
        return;
    if (v->base) {
        it->b = v->base->e;
        it->be = it->b + v->base->n;
        it->d = v->e;
        it->de = it->d + v->n;
    } else {
        it->b = v->e;
        it->be = it->b + v->n;
    }
}

static bool it_next(vc_it *it, check_vc_entry *out)
{
    bool hb = it->b < it->be, hd = it->d < it->de;
    if (hb && (!hd || it->b->queue < it->d->queue)) {
        *out = *it->b++;
    } else if (hd && (!hb || it->d->queue < it->b->queue)) {
        *out = *it->d++;
    } else if (hb) {
        *out = *it->d++;
        if (it->b->time > out->time)
            out->time = it->b->time;
        it->b++;
    } else {
        return false;
    }
    return true;
}

static uint32_t it_get(vc_it *it, uint32_t q)
{
    while (it->b < it->be && it->b->queue < q)
        it->b++;
    while (it->d < it->de && it->d->queue < q)
        it->d++;
    uint32_t t = 0;
    if (it->b < it->be && it->b->queue == q)
        t = it->b->time;
    if (it->d < it->de && it->d->queue == q && it->d->time > t)
        t = it->d->time;
    return t;
}

/* Number of entries of the value, at most (for allocation). */
static uint32_t vc_size(const check_vc *v)
{
    return v ? v->n + (v->base ? v->base->n : 0) : 0;
}

bool check_vc_leq(const check_vc *a, const check_vc *b)
{
    if (!a || a == b)
        return true;
    if (b && base_leq(vc_base(a), vc_base(b))) {
        if (!a->base)
            return true;        /* a is its base, below b's */
        /* only the delta can be above b: a few binary searches */
        for (uint32_t i = 0; i < a->n; i++)
            if (a->e[i].time > check_vc_get(b, a->e[i].queue))
                return false;
        return true;
    }
    if (!b)
        return check_vc_count(a) == 0;
    if (!a->base && !b->base) {
        /* two flat clocks (every clock of a small trace): one merge pass */
        uint32_t j = 0;
        for (uint32_t i = 0; i < a->n; i++) {
            while (j < b->n && b->e[j].queue < a->e[i].queue)
                j++;
            if (j == b->n || b->e[j].queue != a->e[i].queue) {
                if (a->e[i].time)
                    return false;
                continue;
            }
            if (a->e[i].time > b->e[j].time)
                return false;
        }
        return true;
    }
    vc_it ia, ib;
    it_init(&ia, a);
    it_init(&ib, b);
    check_vc_entry x;
    while (it_next(&ia, &x))
        if (x.time > it_get(&ib, x.queue))
            return false;
    return true;
}

bool check_vc_equal(const check_vc *a, const check_vc *b)
{
    return check_vc_leq(a, b) && check_vc_leq(b, a);
}

/* A new flat clock with v's value (v unchanged); on parent's line if free. */
static check_vc *vc_fold(const check_vc *v)
{
    check_vc *out = vc_alloc(vc_size(v));
    if (!out)
        return NULL;
    vc_it it;
    it_init(&it, v);
    check_vc_entry x;
    while (it_next(&it, &x))
        out->e[out->n++] = x;
    vc_child_of(out, vc_base(v));
    return out;
}

/* Folds *v into a flat clock when its delta is large (see the head). */
static int maybe_fold(check_vc **v, bool eager)
{
    check_vc *d = *v;
    if (!d || !d->base || d->n <= FLAT_MIN || (!eager && (uint64_t)d->n * 4 <= d->base->n))
        return 0;
    check_vc *out = vc_fold(d);
    if (!out)
        return -1;
    check_vc_unref(d);
    *v = out;
    return 0;
}

int check_vc_compact(check_vc **v)
{
    return maybe_fold(v, true);
}

/* A clock over flat `base` whose delta merges `keep` (entries already above
 * base) with those entries of `more` that are above base. NULL on OOM; a
 * reference to base itself when no entry is left. */
static check_vc *vc_rebase(const check_vc *base, const check_vc_entry *keep, uint32_t nk,
                           vc_it *more, uint32_t nm)
{
    check_vc *out = vc_alloc(nk + nm);
    if (!out)
        return NULL;
    uint32_t i = 0, k = 0;
    check_vc_entry y;
    bool hy = it_next(more, &y);
    while (i < nk || hy) {
        if (!hy || (i < nk && keep[i].queue < y.queue)) {
            out->e[k++] = keep[i++];
        } else if (i == nk || y.queue < keep[i].queue) {
            if (y.time > lookup(base->e, base->n, y.queue))
                out->e[k++] = y;
            hy = it_next(more, &y);
        } else {
            check_vc_entry x = keep[i++];
            if (y.time > x.time)
                x.time = y.time;
            out->e[k++] = x;
            hy = it_next(more, &y);
        }
    }
    if (k == 0) {
        free(out);
        return check_vc_ref((check_vc *)base);
    }
    out->n = k;
    out->base = check_vc_ref((check_vc *)base);
    return out;
}

/* The delta of v alone as an iterator (empty for a flat clock). */
static void it_delta(vc_it *it, const check_vc *v)
{
    it->b = it->be = NULL;
    it->d = v->e;
    it->de = v->e + (v->base ? v->n : 0);
}

/* A new flat clock: the values of a and b joined, continuing the line of
 * the larger base (small clocks; a merge pass over both). */
static check_vc *vc_join_flat(const check_vc *a, const check_vc *b)
{
    check_vc *out = vc_alloc(vc_size(a) + vc_size(b));
    if (!out)
        return NULL;
    uint32_t k = 0;
    if (!a->base && !b->base) {
        uint32_t i = 0, j = 0;
        while (i < a->n || j < b->n) {
            if (j == b->n || (i < a->n && a->e[i].queue < b->e[j].queue))
                out->e[k++] = a->e[i++];
            else if (i == a->n || b->e[j].queue < a->e[i].queue)
                out->e[k++] = b->e[j++];
            else {
                check_vc_entry x = a->e[i++];
                if (b->e[j].time > x.time)
                    x.time = b->e[j].time;
                j++;
                out->e[k++] = x;
            }
        }
    } else {
        vc_it ia, ib;
        it_init(&ia, a);
        it_init(&ib, b);
        check_vc_entry x, y;
        bool hx = it_next(&ia, &x), hy = it_next(&ib, &y);
        while (hx || hy) {
            if (hx && (!hy || x.queue < y.queue)) {
                out->e[k++] = x;
                hx = it_next(&ia, &x);
            } else if (hy && (!hx || y.queue < x.queue)) {
                out->e[k++] = y;
                hy = it_next(&ib, &y);
            } else {
                if (y.time > x.time)
                    x.time = y.time;
                out->e[k++] = x;
                hx = it_next(&ia, &x);
                hy = it_next(&ib, &y);
            }
        }
    }
    out->n = k;
    vc_child_of(out, vc_base(a)->n >= vc_base(b)->n ? vc_base(a) : vc_base(b));
    return out;
}

int check_vc_join(check_vc **dst, const check_vc *src)
{
    check_vc *d = *dst;
    if (!src || d == src || (!src->base && src->n == 0))
        return 0;
    if (!d) {
        *dst = check_vc_ref((check_vc *)src);
        return 0;
    }
    if (check_vc_leq(src, d))
        return 0;
    const check_vc *bd = vc_base(d), *bs = vc_base(src);
    uint32_t nd = d->base ? d->n : 0, ns = src->base ? src->n : 0;
    vc_it it;
    check_vc *out;
    if (bd->n <= FLAT_MIN && bs->n <= FLAT_MIN)
        out = vc_join_flat(d, src);     /* small clocks stay flat */
    else if (base_leq(bs, bd)) {
        it_delta(&it, src);
        out = vc_rebase(bd, d->e, nd, &it, ns);
    } else if (base_leq(bd, bs)) {
        it_delta(&it, d);
        out = vc_rebase(bs, src->e, ns, &it, nd);
    } else if (bd->n >= bs->n) {
        /* bases not known to be ordered: the larger stays the base, the
         * other clock's whole value is filtered against it (O(n)) */
        it_init(&it, src);
        out = vc_rebase(bd, d->e, nd, &it, vc_size(src));
    } else {
        it_init(&it, d);
        out = vc_rebase(bs, src->e, ns, &it, vc_size(d));
    }
    if (!out)
        return -1;
    check_vc_unref(d);
    *dst = out;
    return maybe_fold(dst, false);
}

/* Inserts or raises entry (q, t) of v's own entries in place (v->n < v->cap
 * when q is absent). */
static void vc_put(check_vc *v, uint32_t q, uint32_t t)
{
    uint32_t i = find(v->e, v->n, q);
    if (i == v->n || v->e[i].queue != q) {
        memmove(&v->e[i + 1], &v->e[i], (v->n - i) * sizeof v->e[0]);
        v->e[i].queue = q;
        v->n++;
    }
    v->e[i].time = t;
}

int check_vc_raise(check_vc **dst, uint32_t q, uint32_t t)
{
    check_vc *d = *dst;
    if (t == 0 || check_vc_get(d, q) >= t)
        return 0;
    if (d && d->refs == 1) {
        /* the only reference: in place, growing it if needed */
        if (d->n == d->cap && lookup(d->e, d->n, q) == 0) {
            uint32_t cap = d->cap + d->cap / 2 + 1;
            check_vc *g = realloc(d, sizeof *g + (size_t)cap * sizeof g->e[0]);
            if (!g)
                return -1;
            g->cap = cap;
            *dst = d = g;
        }
        vc_put(d, q, t);
        if (!d->base && d->extended)
            vc_new_line(d);     /* its successor on the line no longer covers it */
        return maybe_fold(dst, false);
    }
    check_vc *out;
    if (d && !d->base && d->n > FLAT_MIN) {
        /* a large shared flat clock: a one-entry delta over it */
        if (!(out = vc_alloc(4)))
            return -1;
        out->base = check_vc_ref(d);
    } else {
        /* a small flat clock or a delta: a copy with room for the entry */
        uint32_t n = d ? d->n : 0;
        if (!(out = vc_alloc(n + 1 + n / 2)))
            return -1;
        if (n)
            memcpy(out->e, d->e, n * sizeof d->e[0]);
        out->n = n;
        out->base = d ? check_vc_ref(d->base) : NULL;
        if (!out->base) {
            if (d)
                vc_child_of(out, d);
            else
                vc_new_line(out);
        }
    }
    vc_put(out, q, t);
    check_vc_unref(d);
    *dst = out;
    return maybe_fold(dst, false);
}

uint32_t check_vc_count(const check_vc *v)
{
    uint32_t n = 0;
    vc_it it;
    it_init(&it, v);
    check_vc_entry x;
    while (it_next(&it, &x))
        n += x.time != 0;
    return n;
}

/* ------------------------------------------------------------------ */
/* Joining many clocks at once (a generation's arrivals).              */

void check_vc_acc_init(check_vc_acc *a, check_vc *start)
{
    a->vc = check_vc_ref(start);
    a->pend = NULL;
    a->n = a->cap = 0;
    a->oom = false;
}

static void acc_push(check_vc_acc *a, const check_vc_entry *x, uint32_t n)
{
    if (a->oom || n == 0)
        return;
    if (a->n + n > a->cap) {
        uint32_t cap = a->cap ? a->cap : 64;
        while (cap < a->n + n)
            cap *= 2;
        check_vc_entry *p = realloc(a->pend, (size_t)cap * sizeof *p);
        if (!p) {
            a->oom = true;
            return;
        }
        a->pend = p;
        a->cap = cap;
    }
    memcpy(a->pend + a->n, x, (size_t)n * sizeof *x);
    a->n += n;
}

void check_vc_acc_join(check_vc_acc *a, const check_vc *v)
{
    if (!v || a->oom)
        return;
    const check_vc *bv = vc_base(v);
    uint32_t nd = v->base ? v->n : 0;
    if (!a->vc) {
        a->vc = check_vc_ref((check_vc *)bv);
    } else if (!base_leq(bv, vc_base(a->vc)) && check_vc_join(&a->vc, bv) != 0) {
        /* (a newer base: O(delta) on one line; else O(queues)) */
        a->oom = true;
    }
    /* the delta waits with the raised entries */
    acc_push(a, v->e, nd);
}

void check_vc_acc_raise(check_vc_acc *a, uint32_t q, uint32_t t)
{
    if (t == 0)
        return;
    check_vc_entry x = { q, t };
    acc_push(a, &x, 1);
}

static int entry_cmp(const void *x, const void *y)
{
    const check_vc_entry *a = x, *b = y;
    return a->queue < b->queue ? -1 : a->queue > b->queue;
}

int check_vc_acc_finish(check_vc_acc *a, check_vc **out)
{
    *out = NULL;
    int rc = a->oom ? -1 : 0;
    uint32_t m = 0;
    if (rc == 0 && a->n) {
        /* the pending entries sorted, one per queue (the largest) */
        qsort(a->pend, a->n, sizeof *a->pend, entry_cmp);
        for (uint32_t i = 0; i < a->n; i++) {
            if (m && a->pend[m - 1].queue == a->pend[i].queue) {
                if (a->pend[i].time > a->pend[m - 1].time)
                    a->pend[m - 1].time = a->pend[i].time;
            } else {
                a->pend[m++] = a->pend[i];
            }
        }
    }
    check_vc *v = a->vc;
    a->vc = NULL;
    if (rc == 0 && m && !v) {
        /* nothing but raises: a flat clock of them */
        if (!(v = vc_alloc(m))) {
            rc = -1;
        } else {
            memcpy(v->e, a->pend, (size_t)m * sizeof *v->e);
            v->n = m;
            vc_new_line(v);
        }
    } else if (rc == 0 && m) {
        vc_it it = { NULL, NULL, a->pend, a->pend + m };
        check_vc *r = vc_rebase(vc_base(v), v->e, v->base ? v->n : 0, &it, m);
        if (!r) {
            rc = -1;
        } else {
            check_vc_unref(v);
            v = r;
            rc = maybe_fold(&v, false);
        }
    }
    free(a->pend);
    a->pend = NULL;
    a->n = a->cap = 0;
    if (rc != 0) {
        check_vc_unref(v);
        return -1;
    }
    *out = v;
    return 0;
}
