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
 * empty, and merges neighbours whose states are equal. Accesses to a whole
 * buffer keep it one segment; an arena, whose views and their sub-ranges
 * (token counts, ragged slices) are each accessed on their own, holds
 * thousands (768 views of 64 KiB at 1-4 segments each in bench/shapes.h).
 * Two common updates skip the general path's array of pieces: one that is
 * exactly a segment (update_in_place) and one inside a segment
 * (update_inside: a token prefix of a view last accessed whole).
 *
 * The cost model. The segments are a sequence cut into chunks of at most
 * CHECK_CHUNK_MAX (32): an update finds its chunk by binary search over the
 * chunks' last ends, then the segment inside it, and rewrites only that
 * chunk, so an update costs O(log n + 32 + the segments it overlaps)
 * instead of a memmove of the whole array (with one flat array, an arena of
 * 2 000 segments moved ~100 KB per access: 87 % of `check` on the ragged
 * shape). An update whose range or neighbours (it may merge with them)
 * reach into the next or previous chunk first joins those chunks; a chunk
 * grown past 32 is cut into halves; an emptied chunk is dropped. The
 * chunking never shows: the segments, merged the same, are exactly those
 * of one flat array (check_shadow_equal compares them, not the chunks), and
 * a shadow of one to 32 segments is one exactly sized array, as before.
 *
 * States hold sites by value; the set of reads since the last write is a
 * reference-counted array when more than one queue read (FastTrack's
 * read-shared mode), so splitting a segment shares it.
 *
 * Lifetime marks (check_life, ruling 2). An access is a use after free
 * when it is ordered after a free F and after no alloc A with F HB A. The
 * marks an access sees form a down-set of the HB order, and the verdict
 * depends only on its maximal elements: a maximal free makes it a use
 * after free. On one queue a mark is never maximal for an access that also
 * sees the queue's next mark, so a mark with a later one on its queue can
 * be forgotten at the price of one interval of that queue's times (the
 * access saw it but not the next: the gap) in which no verdict can be
 * given; what the mark covered moves to the next mark (F HB A HB next), so
 * that an access beyond the gap is judged as with every mark. Forgetting
 * the oldest such mark keeps each queue's gap one interval.
 * test_shadow.c compares this with a dense reference.
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
    if (l) {
        *n = *l;
    } else {
        n->n = n->n_gaps = 0;
        n->blind = false;
    }
    n->refs = 1;
    life_unref(l);
    c->life = n;
    return n;
}

/* Mask m without bit i: the bits above it move down one, as the events
 * above ev[i] do when it is forgotten. */
static check_life_mask mask_drop(check_life_mask m, uint32_t i)
{
    uint32_t low = m & ((1u << i) - 1), high = (uint32_t)(m >> (i + 1)) << i;
    return (check_life_mask)(low | high);
}

/* Queue q's times [lo, hi) are a gap of l (see check_life): the hull with
 * the queue's gap so far, or a new one; blind when there is no room. */
static void life_add_gap(check_life *l, uint32_t q, uint32_t lo, uint32_t hi)
{
    for (uint32_t i = 0; i < l->n_gaps; i++) {
        check_life_gap *g = &l->gaps[i];
        if (g->queue == q) {
            g->lo = lo < g->lo ? lo : g->lo;
            g->hi = hi > g->hi ? hi : g->hi;
            return;
        }
    }
    if (l->n_gaps == CHECK_LIFE_MAX) {
        l->blind = true;
        return;
    }
    l->gaps[l->n_gaps++] = (check_life_gap){ q, lo, hi };
}

/* Forgets ev[i] to make room for event `in` (covers *in_covers, which is
 * re-indexed with the others). The next event of its queue -- kept, or
 * `in` -- takes over what it covers: the frees covered by an alloc before
 * an event on its queue are covered for whoever sees that event. The
 * queue's times from ev[i] up to that next event become a gap. */
static void life_forget(check_life *l, uint32_t i, const check_site *in,
                        check_life_mask *in_covers)
{
    const check_site *v = &l->ev[i];
    uint32_t hi = UINT32_MAX;
    uint32_t j = i + 1;
    while (j < l->n && l->ev[j].queue != v->queue)
        j++;
    if (j < l->n) {
        hi = l->ev[j].time;
        l->covers[j] |= l->covers[i];
    } else if (in->queue == v->queue) {
        hi = in->time;
        *in_covers |= l->covers[i];
    }
    life_add_gap(l, v->queue, v->time, hi);
    memmove(l->ev + i, l->ev + i + 1, (l->n - i - 1) * sizeof *l->ev);
    memmove(l->covers + i, l->covers + i + 1, (l->n - i - 1) * sizeof *l->covers);
    l->n--;
    for (uint32_t k = 0; k < l->n; k++)
        l->covers[k] = mask_drop(l->covers[k], i);
    *in_covers = mask_drop(*in_covers, i);
}

/* Appends event s (with the frees it covers, in l's indexing) to l. When l
 * is full, the oldest event with a later one on its own queue (s counts)
 * is forgotten, else the oldest of all (check_life's head). */
static void life_push(check_life *l, const check_site *s, check_life_mask covers)
{
    if (l->n == CHECK_LIFE_MAX) {
        uint32_t victim = 0;
        bool found = false;
        for (uint32_t i = 0; i < l->n && !found; i++) {
            found = l->ev[i].queue == s->queue;
            for (uint32_t j = i + 1; j < l->n && !found; j++)
                found = l->ev[j].queue == l->ev[i].queue;
            if (found)
                victim = i;
        }
        life_forget(l, victim, s, &covers);
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

int check_cell_mark_alloc(check_cell *c, const check_site *s, check_life_mask covers)
{
    if (!c->life)
        return 0;               /* never freed: the alloc only starts the lifetime */
    check_life *l = life_own(c);
    if (!l)
        return -1;
    life_push(l, s, covers);
    return 0;
}

/* Whether an access that knows `knows` of each queue has seen event s. */
static bool life_seen(check_life_knows knows, void *ctx, const check_site *s)
{
    return knows(ctx, s->queue) >= s->time;
}

check_life_mask check_life_covers(const check_life *l, check_life_knows knows, void *ctx)
{
    check_life_mask m = 0;
    for (uint32_t i = 0; i < l->n; i++)
        if (l->ev[i].kind == TRACE_FREE && life_seen(knows, ctx, &l->ev[i]))
            m |= (check_life_mask)(1u << i);
    return m;
}

const check_site *check_life_uaf(const check_life *l, check_life_knows knows, void *ctx,
                                 bool *unjudged)
{
    *unjudged = l->blind;
    for (uint32_t i = 0; i < l->n_gaps && !*unjudged; i++) {
        uint32_t t = knows(ctx, l->gaps[i].queue);
        *unjudged = t >= l->gaps[i].lo && (l->gaps[i].hi == UINT32_MAX || t < l->gaps[i].hi);
    }
    if (*unjudged)
        return NULL;
    const check_site *best = NULL;
    for (uint32_t i = 0; i < l->n; i++) {
        const check_site *f = &l->ev[i];
        if (f->kind != TRACE_FREE || (best && best->seq > f->seq) || !life_seen(knows, ctx, f))
            continue;
        bool covered = false;
        for (uint32_t j = i + 1; j < l->n && !covered; j++)
            covered = (l->covers[j] >> i & 1) && life_seen(knows, ctx, &l->ev[j]);
        if (!covered)
            best = f;
    }
    return best;
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

/* Rare (freed bytes only), so out of line: check_cell_equal runs on every
 * merge of neighbours and stays small. */
static __attribute__((noinline)) bool life_equal(const check_life *a, const check_life *b)
{
    if (!a || !b || a->n != b->n || a->n_gaps != b->n_gaps || a->blind != b->blind)
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (a->ev[i].seq != b->ev[i].seq || a->covers[i] != b->covers[i])
            return false;
    for (uint32_t i = 0; i < a->n_gaps; i++)
        if (a->gaps[i].queue != b->gaps[i].queue || a->gaps[i].lo != b->gaps[i].lo ||
            a->gaps[i].hi != b->gaps[i].hi)
            return false;
    return true;
}

const check_site *check_cell_read(const check_cell *c, uint32_t i)
{
    return c->n_reads == 1 ? &c->read : &c->reads->s[i];
}

bool check_cell_equal(const check_cell *a, const check_cell *b)
{
    /* the write's mode too: two pieces of one statement can differ in it
     * (`w:A r:A[0:42]`), and a race's type comes from it */
    if (a->w.seq != b->w.seq || a->w.mode != b->w.mode ||
        (a->life != b->life && !life_equal(a->life, b->life)) || a->n_reads != b->n_reads)
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

static void chunk_release(check_chunk *k)
{
    for (uint32_t i = 0; i < k->n; i++)
        check_cell_release(&k->segs[i].c);
    free(k->segs);
}

void check_shadow_unref(check_shadow *s)
{
    if (!s || --s->refs > 0)
        return;
    for (uint32_t k = 0; k < s->n_chunks; k++)
        chunk_release(&s->chunks[k]);
    if (s->chunks != &s->one)
        free(s->chunks);
    free(s->spare);
    free(s);
}

uint32_t check_shadow_segments(const check_shadow *s)
{
    return s ? s->n : 0;
}

const check_seg *check_shadow_seg(const check_shadow *s, uint32_t i)
{
    for (uint32_t k = 0; s && k < s->n_chunks; k++) {
        if (i < s->chunks[k].n)
            return &s->chunks[k].segs[i];
        i -= s->chunks[k].n;
    }
    return NULL;
}

/* The segments in order, whatever the chunks: equality is of the maps. */
bool check_shadow_equal(const check_shadow *a, const check_shadow *b)
{
    if (a == b)
        return true;
    uint32_t an = a ? a->n : 0, bn = b ? b->n : 0;
    if (an != bn)
        return false;
    uint32_t ka = 0, ia = 0, kb = 0, ib = 0;
    for (uint32_t i = 0; i < an; i++) {
        while (ia == a->chunks[ka].n)
            ka++, ia = 0;
        while (ib == b->chunks[kb].n)
            kb++, ib = 0;
        const check_seg *x = &a->chunks[ka].segs[ia++], *y = &b->chunks[kb].segs[ib++];
        if (x->lo != y->lo || x->hi != y->hi || !check_cell_equal(&x->c, &y->c))
            return false;
    }
    return true;
}

/* Room for need segments in chunk k. A fresh array is sized exactly: most
 * shadows are one or two segments, and a minimiser checkpoint keeps every
 * copy-on-write copy alive, so slack would cost more than the occasional
 * regrowth. */
static int chunk_cap(check_chunk *k, uint32_t need)
{
    if (need <= k->cap)
        return 0;
    uint32_t cap = k->cap + k->cap / 2;
    if (cap < need)
        cap = need;
    check_seg *p = realloc(k->segs, (size_t)cap * sizeof *p);
    if (!p)
        return -1;
    k->segs = p;
    k->cap = cap;
    return 0;
}

/* Room for need chunks in s: the one inside s, else an array. */
static int chunks_cap(check_shadow *s, uint32_t need)
{
    if (need <= s->cap_chunks)
        return 0;
    if (!s->chunks && need == 1) {
        s->chunks = &s->one;
        s->cap_chunks = 1;
        return 0;
    }
    uint32_t cap = s->cap_chunks + s->cap_chunks / 2;
    if (cap < need)
        cap = need;
    bool inside = s->chunks == &s->one;
    check_chunk *p = realloc(inside ? NULL : s->chunks, (size_t)cap * sizeof *p);
    if (!p)
        return -1;
    if (inside)
        memcpy(p, &s->one, s->n_chunks * sizeof *p);
    s->chunks = p;
    s->cap_chunks = cap;
    return 0;
}

/* A private copy of a shared shadow (its chunks laid out the same). */
static check_shadow *shadow_unshare(check_shadow *s)
{
    check_shadow *c = check_shadow_new();
    if (!c || chunks_cap(c, s->n_chunks) != 0)
        goto fail;
    for (uint32_t k = 0; k < s->n_chunks; k++) {
        const check_chunk *from = &s->chunks[k];
        check_chunk *to = &c->chunks[k];
        *to = (check_chunk){ 0 };
        if (chunk_cap(to, from->n) != 0)
            goto fail;
        for (uint32_t i = 0; i < from->n; i++) {
            to->segs[i].lo = from->segs[i].lo;
            to->segs[i].hi = from->segs[i].hi;
            to->segs[i].c = cell_share(&from->segs[i].c);
        }
        to->n = from->n;
        to->hi = from->hi;
        c->n_chunks++;
        c->n += from->n;
    }
    s->refs--;
    return c;
fail:
    check_shadow_unref(c);
    return NULL;
}

/* Moves chunk k + 1's segments to the end of chunk k and drops chunk k + 1.
 * Returns 0, or -1 with nothing changed. */
static int chunk_join_next(check_shadow *s, uint32_t k)
{
    check_chunk *a = &s->chunks[k], *b = &s->chunks[k + 1];
    if (chunk_cap(a, a->n + b->n) != 0)
        return -1;
    memcpy(&a->segs[a->n], b->segs, b->n * sizeof *b->segs);
    a->n += b->n;
    a->hi = b->hi;
    if (!s->spare && b->cap >= CHECK_CHUNK_MAX) {
        s->spare = b->segs;     /* the split that usually follows takes it */
        s->spare_cap = b->cap;
    } else {
        free(b->segs);
    }
    memmove(b, b + 1, (s->n_chunks - k - 2) * sizeof *b);
    s->n_chunks--;
    return 0;
}

/* A split chunk's most segments: room to grow by 8 before the next split. */
#define CHECK_CHUNK_SPLIT (CHECK_CHUNK_MAX * 3 / 4)

/* Cuts chunk k, grown past CHECK_CHUNK_MAX, into chunks of at most
 * CHECK_CHUNK_SPLIT segments (each with room for CHECK_CHUNK_MAX). Out of
 * memory it stays whole, which is still a valid shadow. */
static void chunk_split(check_shadow *s, uint32_t k)
{
    uint32_t n = s->chunks[k].n, parts = (n + CHECK_CHUNK_SPLIT - 1) / CHECK_CHUNK_SPLIT;
    check_chunk local[4];       /* a split after a join makes two */
    check_chunk *fresh = parts <= 4 ? local : malloc(parts * sizeof *fresh);
    if (!fresh)
        return;
    memset(fresh, 0, parts * sizeof *fresh);
    if (chunks_cap(s, s->n_chunks + parts - 1) != 0)
        goto fail;
    check_chunk *whole = &s->chunks[k];
    for (uint32_t p = 1; p < parts; p++) {
        uint32_t from = (uint32_t)((uint64_t)n * p / parts);
        uint32_t to = (uint32_t)((uint64_t)n * (p + 1) / parts);
        /* room to grow back to the maximum without a realloc: these are
         * the chunks of busy arenas */
        if (s->spare) {
            fresh[p].segs = s->spare;
            fresh[p].cap = s->spare_cap;
            s->spare = NULL;
        } else if (chunk_cap(&fresh[p], CHECK_CHUNK_MAX) != 0) {
            goto fail;
        }
        memcpy(fresh[p].segs, &whole->segs[from], (to - from) * sizeof *whole->segs);
        fresh[p].n = to - from;
        fresh[p].hi = fresh[p].segs[to - from - 1].hi;
    }
    whole->n = n / parts;
    whole->hi = whole->segs[whole->n - 1].hi;
    if (whole->cap > 2 * CHECK_CHUNK_MAX) {    /* after a join of many chunks */
        check_seg *p = realloc(whole->segs, CHECK_CHUNK_MAX * sizeof *p);
        if (p) {
            whole->segs = p;
            whole->cap = CHECK_CHUNK_MAX;
        }
    }
    memmove(&s->chunks[k + parts], &s->chunks[k + 1], (s->n_chunks - k - 1) * sizeof *s->chunks);
    memcpy(&s->chunks[k + 1], &fresh[1], (parts - 1) * sizeof *s->chunks);
    s->n_chunks += parts - 1;
    if (fresh != local)
        free(fresh);
    return;
fail:
    for (uint32_t p = 1; p < parts; p++)
        free(fresh[p].segs);
    if (fresh != local)
        free(fresh);
}

/* Drops chunk k, which holds no segment. */
static void chunk_drop(check_shadow *s, uint32_t k)
{
    free(s->chunks[k].segs);
    memmove(&s->chunks[k], &s->chunks[k + 1], (s->n_chunks - k - 1) * sizeof *s->chunks);
    s->n_chunks--;
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

/*
 * The chunk *kp holding the first segment that ends after lo, and that
 * segment's index *ip in it (the last chunk and its end when no segment
 * does). The chunk of the last update is tried first: accesses to an arena
 * come in runs on one view. The shadow has at least one chunk.
 */
static void find(check_shadow *s, uint64_t lo, uint32_t *kp, uint32_t *ip)
{
    uint32_t k = s->finger;
    if (!(k < s->n_chunks && s->chunks[k].hi > lo && (k == 0 || s->chunks[k - 1].hi <= lo))) {
        uint32_t a = 0, b = s->n_chunks - 1;
        while (a < b) {
            uint32_t mid = (a + b) / 2;
            if (s->chunks[mid].hi <= lo)
                a = mid + 1;
            else
                b = mid;
        }
        k = a;
        s->finger = k;
    }
    const check_chunk *c = &s->chunks[k];
    uint32_t i = 0, j = c->n;
    while (i < j) {
        uint32_t mid = (i + j) / 2;
        if (c->segs[mid].hi <= lo)
            i = mid + 1;
        else
            j = mid;
    }
    *kp = k;
    *ip = i;
}

/*
 * Makes the segments an update of [lo, hi) overlaps, and both neighbours
 * when it may merge with them, lie in chunk *kp, from its segment *ip on
 * (as find() gave them): joins the chunks they reach into. Returns 0 or -1 (out
 * of memory, nothing changed).
 */
static int gather(check_shadow *s, uint64_t lo, uint64_t hi, uint32_t *kp, uint32_t *ip)
{
    uint32_t k = *kp, i = *ip, j;
    /* The previous chunk's last segment ends at or before lo; it can merge
     * only with a piece that starts where it ends. Likewise the next
     * chunk's first. A gap between them and the update needs no join. */
    const check_chunk *c = &s->chunks[k];
    uint64_t left = k > 0 ? s->chunks[k - 1].hi : 0;
    if (i == 0 && k > 0 && (left == lo || (c->n && c->segs[0].lo == left && left < hi))) {
        k--;
        i = s->chunks[k].n;
        if (chunk_join_next(s, k) != 0)
            return -1;
    }
    for (j = i;;) {
        c = &s->chunks[k];
        while (j < c->n && c->segs[j].lo < hi)
            j++;
        if (j < c->n || k + 1 == s->n_chunks || s->chunks[k + 1].segs[0].lo > hi)
            break;
        if (chunk_join_next(s, k) != 0)   /* the range or the right neighbour goes on */
            return -1;
    }
    *kp = k;
    *ip = i;
    s->finger = k;
    return 0;
}

/* Removes segment i of chunk k (its state already released). */
static void seg_remove(check_shadow *s, uint32_t k, uint32_t i)
{
    check_chunk *c = &s->chunks[k];
    memmove(&c->segs[i], &c->segs[i + 1], (c->n - i - 1) * sizeof *c->segs);
    c->n--;
    s->n--;
    if (c->n == 0)
        chunk_drop(s, k);
    else
        c->hi = c->segs[c->n - 1].hi;
}

/*
 * The common update, done without copying: [lo, hi) is exactly segment i of
 * chunk ck (a tensor accessed again the way it was last accessed), and no
 * segment of another chunk touches it. fn changes the state in place; the
 * segment is then dropped if empty or merged with an equal neighbour, as
 * the general path would. Returns false, having done nothing, when the case
 * does not apply.
 */
static bool update_in_place(check_shadow *s, uint32_t ck, uint32_t i, uint64_t lo, uint64_t hi,
                            check_cell_fn fn, void *ctx)
{
    check_chunk *k = &s->chunks[ck];
    if (i == k->n)
        return false;
    check_seg *g = &k->segs[i];
    if (g->lo != lo || g->hi != hi || (i == 0 && ck > 0 && s->chunks[ck - 1].hi == lo) ||
        (i + 1 == k->n && ck + 1 < s->n_chunks && s->chunks[ck + 1].segs[0].lo == hi))
        return false;
    fn(ctx, lo, hi, &g->c);
    if (cell_empty(&g->c)) {
        check_cell_release(&g->c);
        seg_remove(s, ck, i);
        return true;
    }
    if (i > 0 && k->segs[i - 1].hi == lo && check_cell_equal(&k->segs[i - 1].c, &g->c)) {
        k->segs[i - 1].hi = hi;
        check_cell_release(&g->c);
        seg_remove(s, ck, i);   /* the chunk keeps segment i - 1 */
        g = &k->segs[--i];
    }
    if (i + 1 < k->n && k->segs[i + 1].lo == g->hi && check_cell_equal(&k->segs[i + 1].c, &g->c)) {
        g->hi = k->segs[i + 1].hi;
        check_cell_release(&k->segs[i + 1].c);
        seg_remove(s, ck, i + 1);
    }
    return true;
}

/* Makes room for m more segments at index i of chunk k (chunk_cap done). */
static void seg_open(check_shadow *s, check_chunk *k, uint32_t i, uint32_t m)
{
    memmove(&k->segs[i + m], &k->segs[i], (k->n - i) * sizeof *k->segs);
    k->n += m;
    s->n += m;
}

/*
 * The other common update, also without a piece array: [lo, hi) lies inside
 * segment i of chunk ck and is not all of it (a token prefix of a view last
 * accessed whole, a sub-range of a ragged one). The accessed piece gets a
 * copy of the state for fn to change; the remainders keep the old state,
 * which they cannot merge with (it was merged before). The piece is then
 * dropped if empty, merged back when fn changed nothing, merged with the
 * outer neighbour it touches when equal to it, or inserted: one move of
 * the chunk's tail by one or two segments. Returns 1 when done, 0 having
 * done nothing when the case does not apply (or the neighbour the piece
 * touches lies in another chunk), -1 out of memory, nothing changed.
 */
static int update_inside(check_shadow *s, uint32_t ck, uint32_t i, uint64_t lo, uint64_t hi,
                         check_cell_fn fn, void *ctx)
{
    check_chunk *k = &s->chunks[ck];
    if (i == k->n)
        return 0;
    check_seg *g = &k->segs[i];
    if (g->lo > lo || g->hi < hi || (g->lo == lo && g->hi == hi))
        return 0;
    bool cut_lo = g->lo < lo, cut_hi = hi < g->hi;
    if ((!cut_lo && i == 0 && ck > 0 && s->chunks[ck - 1].hi == lo) ||
        (!cut_hi && i + 1 == k->n && ck + 1 < s->n_chunks && s->chunks[ck + 1].segs[0].lo == hi))
        return 0;
    if (chunk_cap(k, k->n + 2) != 0)
        return -1;
    g = &k->segs[i];
    uint64_t glo = g->lo, ghi = g->hi;
    check_cell c = cell_share(&g->c);
    fn(ctx, lo, hi, &c);
    if (cell_empty(&c)) {
        check_cell_release(&c);
        if (cut_lo && cut_hi) {         /* two remainders, a hole between */
            seg_open(s, k, i + 1, 1);
            g = &k->segs[i];
            g->hi = lo;
            k->segs[i + 1] = (check_seg){ hi, ghi, cell_share(&g->c) };
        } else if (cut_lo) {
            g->hi = lo;
        } else {
            g->lo = hi;
        }
    } else if (check_cell_equal(&c, &g->c)) {
        check_cell_release(&c);         /* merged back: nothing changes */
    } else if (cut_lo && cut_hi) {
        seg_open(s, k, i + 1, 2);
        g = &k->segs[i];
        g->hi = lo;
        k->segs[i + 1] = (check_seg){ lo, hi, c };
        k->segs[i + 2] = (check_seg){ hi, ghi, cell_share(&g->c) };
    } else if (cut_lo) {                /* the piece ends where g did */
        check_seg *r = i + 1 < k->n ? &k->segs[i + 1] : NULL;
        g->hi = lo;
        if (r && r->lo == hi && check_cell_equal(&c, &r->c)) {
            r->lo = lo;
            check_cell_release(&c);
        } else {
            seg_open(s, k, i + 1, 1);
            k->segs[i + 1] = (check_seg){ lo, hi, c };
        }
    } else {                            /* the piece starts where g did */
        check_seg *l = i > 0 ? &k->segs[i - 1] : NULL;
        g->lo = hi;
        if (l && l->hi == glo && check_cell_equal(&c, &l->c)) {
            l->hi = hi;
            check_cell_release(&c);
        } else {
            seg_open(s, k, i, 1);
            k->segs[i] = (check_seg){ lo, hi, c };
        }
    }
    k->hi = k->segs[k->n - 1].hi;
    if (k->n > CHECK_CHUNK_MAX)
        chunk_split(s, ck);
    return 1;
}

/* Pieces an update builds on the stack: enough for a range over a whole
 * chunk (CHECK_CHUNK_MAX segments give at most 3 * 32 + 7 pieces), so that
 * a view accessed whole over its fragments allocates nothing. */
#define CHECK_UPDATE_LOCAL (3 * CHECK_CHUNK_MAX + 8)

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
    if (s->n_chunks == 0) {
        if (chunks_cap(s, 1) != 0)
            return -1;
        s->chunks[0] = (check_chunk){ 0 };
        s->n_chunks = 1;
    }
    uint32_t ck, i;
    find(s, lo, &ck, &i);
    if (update_in_place(s, ck, i, lo, hi, fn, ctx))
        return 0;
    int in = update_inside(s, ck, i, lo, hi, fn, ctx);
    if (in != 0)
        return in < 0 ? -1 : 0;
    if (gather(s, lo, hi, &ck, &i) != 0)
        return -1;
    check_chunk *k = &s->chunks[ck];
    /* The affected segments are [i, j). */
    uint32_t j = i;
    while (j < k->n && k->segs[j].lo < hi)
        j++;
    /* Include the neighbours so that merging with them happens here too. */
    uint32_t from = i > 0 ? i - 1 : i;
    uint32_t to = j < k->n ? j + 1 : j;

    /* New segments for [from, to): at most 2 per old segment plus gaps. */
    uint32_t max_out = 2 * (to - from) + (j - i) + 3;
    check_seg local[CHECK_UPDATE_LOCAL];
    check_seg *out = max_out <= CHECK_UPDATE_LOCAL ? local : malloc(max_out * sizeof *out);
    if (!out)
        return -1;
    uint32_t n = 0;
    for (uint32_t x = from; x < i; x++)
        push_merged(out, &n, &k->segs[x]);
    uint64_t pos = lo;
    for (uint32_t x = i; x < j; x++) {
        check_seg *old = &k->segs[x];
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
    for (uint32_t x = j; x < to; x++)
        push_merged(out, &n, &k->segs[x]);

    uint32_t old_n = to - from;
    if (chunk_cap(k, k->n - old_n + n) != 0) {
        /* Out of memory with [from, to) already handed to out: keep the map
         * consistent by cutting the chunk at `from` (its tail leaks; the
         * engine gives up on the error anyway) and release out's
         * references. */
        for (uint32_t x = 0; x < n; x++)
            check_cell_release(&out[x].c);
        s->n -= k->n - from;
        k->n = from;
        if (out != local)
            free(out);
        if (k->n == 0)
            chunk_drop(s, ck);
        else
            k->hi = k->segs[k->n - 1].hi;
        return -1;
    }
    if (n != old_n)
        memmove(&k->segs[from + n], &k->segs[to], (k->n - to) * sizeof *k->segs);
    memcpy(&k->segs[from], out, n * sizeof *out);
    k->n = k->n - old_n + n;
    s->n = s->n - old_n + n;
    if (out != local)
        free(out);
    if (k->n == 0) {            /* no chunk is empty */
        chunk_drop(s, ck);
        return 0;
    }
    k->hi = k->segs[k->n - 1].hi;
    if (k->n > CHECK_CHUNK_MAX)
        chunk_split(s, ck);
    return 0;
}
