/*
 * shadow.c -- byte-range shadow memory, one interval map per root buffer.
 *
 * The race detector needs, for every byte of every root buffer, the last
 * write, the reads since it and whether the bytes are freed. Keeping that
 * per byte would cost gigabytes for real arenas; instead each root keeps a
 * sorted array of disjoint segments [lo, hi) with one state each, and bytes
 * outside every segment are untouched (the empty state).
 *
 * An update of [lo, hi) splits the segments that straddle lo and hi,
 * fills the gaps inside [lo, hi) with empty pieces, hands every piece to a
 * callback that checks it and changes its state, drops pieces that became
 * empty, and merges neighbours whose states are equal. Because accesses to
 * a buffer usually cover the same ranges (whole tensors, the same views of
 * an arena), the map stays a handful of segments per root: an update is a
 * binary search plus work proportional to the segments it overlaps. The
 * array is moved with memmove when segments appear or vanish, which is cheap
 * for the segment counts real traces produce (tens to thousands per arena).
 *
 * States hold sites by value; the set of reads since the last write is a
 * reference-counted array when more than one queue read (FastTrack's
 * read-shared mode), so splitting a segment shares it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const check_site no_site = { .seq = TRACE_NO_SEQ };

void check_cell_clear(check_cell *c)
{
    c->w = no_site;
    c->life = NULL;
    c->read = no_site;
    c->reads = NULL;
    c->n_reads = 0;
}

static void reads_unref(check_reads *r)
{
    if (r && --r->refs == 0)
        free(r);
}

void check_cell_drop_reads(check_cell *c)
{
    if (c->n_reads > 1)
        reads_unref(c->reads);
    c->reads = NULL;
    c->n_reads = 0;
    c->read = no_site;
}

static void life_unref(check_life *l)
{
    if (l && --l->refs == 0)
        free(l);
}

void check_cell_release(check_cell *c)
{
    check_cell_drop_reads(c);
    life_unref(c->life);
    c->life = NULL;
}

/* c's lifetime marks, made its own (copied when shared); NULL on OOM. */
static check_life *life_own(check_cell *c)
{
    check_life *l = c->life;
    if (l && l->refs == 1)
        return l;
    check_life *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    if (l)
        *n = *l;
    else
        n->n = 0;
    n->refs = 1;
    life_unref(l);
    c->life = n;
    return n;
}

/* Appends event s (with the frees it covers) to l, forgetting the oldest
 * event when l is full. */
static void life_push(check_life *l, const check_site *s, uint16_t covers)
{
    if (l->n == CHECK_LIFE_MAX) {
        memmove(l->ev, l->ev + 1, (CHECK_LIFE_MAX - 1) * sizeof *l->ev);
        memmove(l->covers, l->covers + 1, (CHECK_LIFE_MAX - 1) * sizeof *l->covers);
        for (uint32_t i = 0; i < CHECK_LIFE_MAX - 1; i++)
            l->covers[i] >>= 1;
        l->n--;
    }
    l->ev[l->n] = *s;
    l->covers[l->n] = covers;
    l->n++;
}

int check_cell_mark_free(check_cell *c, const check_site *s)
{
    check_life *l = life_own(c);
    if (!l)
        return -1;
    life_push(l, s, 0);
    return 0;
}

int check_cell_mark_alloc(check_cell *c, const check_site *s, uint16_t covers)
{
    if (!c->life)
        return 0;               /* never freed: the alloc only starts the lifetime */
    check_life *l = life_own(c);
    if (!l)
        return -1;
    life_push(l, s, covers);
    return 0;
}

/* A copy of c sharing its reads and lifetime marks. */
static check_cell cell_share(const check_cell *c)
{
    check_cell d = *c;
    if (d.n_reads > 1)
        d.reads->refs++;
    if (d.life)
        d.life->refs++;
    return d;
}

static bool cell_empty(const check_cell *c)
{
    return c->w.seq == TRACE_NO_SEQ && !c->life && c->n_reads == 0;
}

static bool life_equal(const check_life *a, const check_life *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->n != b->n)
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (a->ev[i].seq != b->ev[i].seq || a->covers[i] != b->covers[i])
            return false;
    return true;
}

const check_site *check_cell_read(const check_cell *c, uint32_t i)
{
    return c->n_reads == 1 ? &c->read : &c->reads->s[i];
}

bool check_cell_equal(const check_cell *a, const check_cell *b)
{
    if (a->w.seq != b->w.seq || !life_equal(a->life, b->life) || a->n_reads != b->n_reads)
        return false;
    if (a->n_reads == 0)
        return true;
    if (a->n_reads == 1)
        return a->read.seq == b->read.seq;
    if (a->reads == b->reads)
        return true;
    for (uint32_t i = 0; i < a->n_reads; i++)
        if (a->reads->s[i].seq != b->reads->s[i].seq)
            return false;
    return true;
}

int check_cell_add_read(check_cell *c, const check_site *s)
{
    if (c->n_reads == 0 || (c->n_reads == 1 && c->read.queue == s->queue)) {
        c->read = *s;
        c->n_reads = 1;
        return 0;
    }
    if (c->n_reads == 1) {
        check_reads *r = malloc(sizeof *r + 4 * sizeof r->s[0]);
        if (!r)
            return -1;
        r->refs = 1;
        r->cap = 4;
        r->n = 2;
        r->s[0] = c->read;
        r->s[1] = *s;
        c->reads = r;
        c->read = no_site;
        c->n_reads = 2;
        return 0;
    }
    check_reads *r = c->reads;
    uint32_t i = 0;
    while (i < r->n && r->s[i].queue != s->queue)
        i++;
    bool append = i == r->n;
    if (r->refs > 1 || (append && r->n == r->cap)) {
        uint32_t cap = append && r->n == r->cap ? r->cap * 2 : r->cap;
        check_reads *nr = malloc(sizeof *nr + cap * sizeof nr->s[0]);
        if (!nr)
            return -1;
        nr->refs = 1;
        nr->cap = cap;
        nr->n = r->n;
        memcpy(nr->s, r->s, r->n * sizeof r->s[0]);
        reads_unref(r);
        c->reads = r = nr;
    }
    r->s[i] = *s;
    if (append)
        r->n++;
    c->n_reads = r->n;
    return 0;
}

check_shadow *check_shadow_new(void)
{
    check_shadow *s = calloc(1, sizeof *s);
    if (s)
        s->refs = 1;
    return s;
}

check_shadow *check_shadow_ref(check_shadow *s)
{
    if (s)
        s->refs++;
    return s;
}

void check_shadow_unref(check_shadow *s)
{
    if (!s || --s->refs > 0)
        return;
    for (uint32_t i = 0; i < s->n; i++)
        check_cell_release(&s->segs[i].c);
    free(s->segs);
    free(s);
}

uint32_t check_shadow_segments(const check_shadow *s)
{
    return s ? s->n : 0;
}

bool check_shadow_equal(const check_shadow *a, const check_shadow *b)
{
    if (a == b)
        return true;
    uint32_t an = a ? a->n : 0, bn = b ? b->n : 0;
    if (an != bn)
        return false;
    for (uint32_t i = 0; i < an; i++)
        if (a->segs[i].lo != b->segs[i].lo || a->segs[i].hi != b->segs[i].hi ||
            !check_cell_equal(&a->segs[i].c, &b->segs[i].c))
            return false;
    return true;
}

/* Room for need segments. A fresh array is sized exactly: most shadows are
 * one or two segments, and a minimiser checkpoint keeps every copy-on-write
 * copy alive, so slack would cost more than the occasional regrowth. */
static int ensure_cap(check_shadow *s, uint32_t need)
{
    if (need <= s->cap)
        return 0;
    uint32_t cap = s->cap + s->cap / 2;
    if (cap < need)
        cap = need;
    check_seg *p = realloc(s->segs, (size_t)cap * sizeof *p);
    if (!p)
        return -1;
    s->segs = p;
    s->cap = cap;
    return 0;
}

/* A private copy of a shared shadow. */
static check_shadow *shadow_unshare(check_shadow *s)
{
    check_shadow *c = calloc(1, sizeof *c);
    if (!c || ensure_cap(c, s->n) != 0) {
        free(c);
        return NULL;
    }
    c->refs = 1;
    for (uint32_t i = 0; i < s->n; i++) {
        c->segs[i].lo = s->segs[i].lo;
        c->segs[i].hi = s->segs[i].hi;
        c->segs[i].c = cell_share(&s->segs[i].c);
    }
    c->n = s->n;
    s->refs--;
    return c;
}

/* Appends seg to out[], merging with the last one when contiguous and equal. */
static void push_merged(check_seg *out, uint32_t *n, check_seg *seg)
{
    if (*n && out[*n - 1].hi == seg->lo && check_cell_equal(&out[*n - 1].c, &seg->c)) {
        out[*n - 1].hi = seg->hi;
        check_cell_release(&seg->c);
        return;
    }
    out[(*n)++] = *seg;
}

/* Lets fn update the state of seg's bytes, then keeps seg (merged into out)
 * unless fn left it empty. */
static void visit(check_seg *seg, check_cell_fn fn, void *ctx, check_seg *out, uint32_t *n)
{
    fn(ctx, seg->lo, seg->hi, &seg->c);
    if (cell_empty(&seg->c))
        check_cell_release(&seg->c);
    else
        push_merged(out, n, seg);
}

int check_shadow_update(check_shadow **shp, uint64_t lo, uint64_t hi, check_cell_fn fn,
                        void *ctx)
{
    if (lo >= hi)
        return 0;
    check_shadow *s = *shp;
    if (s->refs > 1) {
        s = shadow_unshare(s);
        if (!s)
            return -1;
        *shp = s;
    }
    /* First segment ending after lo; the affected ones are [i, j). */
    uint32_t a = 0, b = s->n;
    while (a < b) {
        uint32_t mid = (a + b) / 2;
        if (s->segs[mid].hi <= lo)
            a = mid + 1;
        else
            b = mid;
    }
    uint32_t i = a, j = a;
    while (j < s->n && s->segs[j].lo < hi)
        j++;
    /* Include the neighbours so that merging with them happens here too. */
    uint32_t from = i > 0 ? i - 1 : i;
    uint32_t to = j < s->n ? j + 1 : j;

    /* New segments for [from, to): at most 2 per old segment plus gaps. */
    uint32_t max_out = 2 * (to - from) + (j - i) + 3;
    check_seg local[16];
    check_seg *out = max_out <= 16 ? local : malloc(max_out * sizeof *out);
    if (!out)
        return -1;
    uint32_t n = 0;
    for (uint32_t k = from; k < i; k++)
        push_merged(out, &n, &s->segs[k]);
    uint64_t pos = lo;
    for (uint32_t k = i; k < j; k++) {
        check_seg *old = &s->segs[k];
        if (old->lo < lo) {     /* left remainder */
            check_seg left = { old->lo, lo, cell_share(&old->c) };
            push_merged(out, &n, &left);
        }
        if (old->lo > pos) {    /* gap before it */
            check_seg gap = { .lo = pos, .hi = old->lo };
            check_cell_clear(&gap.c);
            visit(&gap, fn, ctx, out, &n);
            pos = old->lo;
        }
        uint64_t plo = old->lo > lo ? old->lo : lo;
        uint64_t phi = old->hi < hi ? old->hi : hi;
        check_seg mid = { plo, phi, cell_share(&old->c) };
        visit(&mid, fn, ctx, out, &n);
        pos = phi;
        if (old->hi > hi) {     /* right remainder */
            check_seg right = { hi, old->hi, cell_share(&old->c) };
            push_merged(out, &n, &right);
        }
        check_cell_release(&old->c);
    }
    if (pos < hi) {
        check_seg gap = { .lo = pos, .hi = hi };
        check_cell_clear(&gap.c);
        visit(&gap, fn, ctx, out, &n);
    }
    for (uint32_t k = j; k < to; k++)
        push_merged(out, &n, &s->segs[k]);

    uint32_t old_n = to - from;
    if (ensure_cap(s, s->n - old_n + n) != 0) {
        /* Out of memory with [from, to) already handed to out: keep the map
         * consistent by cutting it at `from` (the tail leaks; the engine
         * gives up on the error anyway) and release out's references. */
        for (uint32_t k = 0; k < n; k++)
            check_cell_release(&out[k].c);
        s->n = from;
        if (out != local)
            free(out);
        return -1;
    }
    memmove(&s->segs[from + n], &s->segs[to], (s->n - to) * sizeof *s->segs);
    memcpy(&s->segs[from], out, n * sizeof *out);
    s->n = s->n - old_n + n;
    if (out != local)
        free(out);
    return 0;
}
