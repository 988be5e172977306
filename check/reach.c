/*
 * reach.c -- who can touch what, read once from a whole trace: the
 * minimiser's map of the trace it minimises (check/minimize.c).
 *
 * Islands. The shadow is kept per root buffer, and the minimiser's copies
 * share shadows copy-on-write a root at a time: a window that touches an
 * arena copies the whole arena's segments (thousands on a capture, where
 * every tensor is a view of one arena per device), once per candidate. But
 * no rule of the checker looks across bytes: a byte's state (last write,
 * reads since, lifetime marks) changes only through accesses that cover it,
 * and a finding is a pair of statements that conflict on some byte. So the
 * bytes of a root fall apart into islands -- the connected pieces of the
 * union of the extents of the buffers that are accessed (each access lies
 * inside its buffer's extent, so no access crosses from one island to
 * another) -- and an island can have its own shadow. check_islands makes a
 * view of the trace whose buffer table gives every island a root of its own
 * (appended after the trace's buffers; the trace's statements are shared,
 * not copied), so that a copy-on-write copies one tensor's few segments.
 * What changes: a pair of statements that conflict on two islands of one
 * root is two findings (one per island root) where it was one;
 * check_island_root maps an island back to its root, and the minimiser keys
 * findings by that, so its test "a finding the accepted trace lacks" is the
 * same. A root with an alloc or a free of it or of a view of it is never
 * split (its lifetime marks stay whole), nor is a root accessed whole.
 *
 * Reach. For each root (island roots included) the queues that access it
 * anywhere in the trace, and for each stream the hosts that submit to it
 * (and whether some statement of it has no submitter). check_engine_same
 * uses it to see that a read can never race again: when every queue that
 * will ever access the bytes already knows it (its clock, or the clock of
 * every host that submits to it, covers the read), later writes are all
 * ordered after it, and two runs whose read sets differ only in such reads
 * behave the same from there on (checkpoint.c, cells_alike).
 *
 * Cost: one pass over the statements, a hash set of (root, queue) and
 * (stream, host) pairs, a sort of the accessed buffers' extents.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* An extent of a root that some buffer's accesses cover. */
typedef struct extent {
    uint32_t root;
    uint64_t lo, hi;
} extent;

static int cmp_extent(const void *a, const void *b)
{
    const extent *x = a, *y = b;
    if (x->root != y->root)
        return x->root < y->root ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Per split root: its islands are isl[first .. first + n) (sorted by lo). */
typedef struct split_root {
    uint32_t first, n;
} split_root;

static int islands_build(check_islands *is, const trace *t)
{
    uint32_t nb = t->n_buffers;
    bool *accessed = calloc(nb ? nb : 1, sizeof *accessed);
    bool *whole = calloc(nb ? nb : 1, sizeof *whole);   /* per root: never split */
    extent *ex = NULL, *isl = NULL;
    split_root *sr = calloc(nb ? nb : 1, sizeof *sr);
    int rc = -1;
    if (!accessed || !whole || !sr)
        goto out;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.kind == TRACE_ALLOC || s.kind == TRACE_FREE) {
            if (s.object < nb)
                whole[t->buffers[s.object].root] = true;
            continue;
        }
        for (uint32_t k = 0; k < s.n_access; k++)
            if (s.access[k].buffer < nb)
                accessed[s.access[k].buffer] = true;
    }
    size_t n_ex = 0;
    for (uint32_t b = 0; b < nb; b++)
        n_ex += accessed[b] && !whole[t->buffers[b].root];
    ex = malloc((n_ex ? n_ex : 1) * sizeof *ex);
    isl = malloc((n_ex ? n_ex : 1) * sizeof *isl);
    if (!ex || !isl)
        goto out;
    n_ex = 0;
    for (uint32_t b = 0; b < nb; b++) {
        const trace_buffer *x = &t->buffers[b];
        if (accessed[b] && !whole[x->root])
            ex[n_ex++] = (extent){ x->root, x->root_offset, x->root_offset + x->size };
    }
    qsort(ex, n_ex, sizeof *ex, cmp_extent);
    /* The islands: extents merged where they overlap. */
    uint32_t n_isl = 0;
    for (size_t i = 0; i < n_ex;) {
        uint32_t r = ex[i].root, first = n_isl;
        while (i < n_ex && ex[i].root == r) {
            extent cur = ex[i++];
            while (i < n_ex && ex[i].root == r && ex[i].lo < cur.hi) {
                if (ex[i].hi > cur.hi)
                    cur.hi = ex[i].hi;
                i++;
            }
            isl[n_isl++] = cur;
        }
        if (n_isl - first < 2) /* one island is the root as it is */
            n_isl = first;
        else
            sr[r] = (split_root){ first, n_isl - first };
    }
    uint64_t total = (uint64_t)nb + n_isl;
    if (total >= TRACE_NONE)
        goto out;
    is->buffers = malloc((total ? total : 1) * sizeof *is->buffers);
    is->orig_root = malloc((n_isl ? n_isl : 1) * sizeof *is->orig_root);
    if (!is->buffers || !is->orig_root)
        goto out;
    if (nb)
        memcpy(is->buffers, t->buffers, nb * sizeof *is->buffers);
    for (uint32_t k = 0; k < n_isl; k++) {
        const trace_buffer *root = &t->buffers[isl[k].root];
        trace_buffer *b = &is->buffers[nb + k];
        *b = *root;
        b->size = isl[k].hi - isl[k].lo;
        b->parent = TRACE_NONE;
        b->offset = 0;
        b->root = nb + k;
        b->root_offset = 0;
        is->orig_root[k] = isl[k].root;
    }
    for (uint32_t b = 0; b < nb; b++) {
        trace_buffer *x = &is->buffers[b];
        const split_root *s = &sr[x->root];
        if (!accessed[b] || s->n == 0)
            continue;
        /* the island that holds the buffer's extent: the last one starting
         * at or before it */
        uint32_t lo = s->first, hi = s->first + s->n;
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (isl[mid].lo <= x->root_offset)
                lo = mid;
            else
                hi = mid;
        }
        x->root_offset -= isl[lo].lo;
        x->root = nb + lo;
    }
    is->view = *t;
    is->view.buffers = is->buffers;
    is->view.n_buffers = is->view.cap_buffers = (uint32_t)total;
    is->n_orig = nb;
    is->n_islands = n_isl;
    rc = 0;
out:
    free(accessed);
    free(whole);
    free(ex);
    free(isl);
    free(sr);
    return rc;
}

/* Builds the CSR lists of reach from a set of (owner << 32 | member) keys. */
static int lists_from(const trace_u64map *set, uint32_t n_owners, uint32_t **at_out,
                      uint32_t **items_out)
{
    uint32_t *at = calloc((size_t)n_owners + 2, sizeof *at);
    uint32_t *items = malloc((set->count ? set->count : 1) * sizeof *items);
    if (!at || !items) {
        free(at);
        free(items);
        return -1;
    }
    for (uint32_t i = 0; i < set->cap; i++)
        if (set->used[i])
            at[(set->keys[i] >> 32) + 2]++;
    for (uint32_t o = 0; o < n_owners; o++)
        at[o + 2] += at[o + 1];
    for (uint32_t i = 0; i < set->cap; i++)
        if (set->used[i])
            items[at[(set->keys[i] >> 32) + 1]++] = (uint32_t)set->keys[i];
    *at_out = at;           /* owner o: items[at[o] .. at[o + 1]) */
    *items_out = items;
    return 0;
}

static int reach_build(check_reach *rc_out, const trace *t)
{
    trace_u64map roots = { 0 }, subs = { 0 };
    uint32_t nq = t->n_queues, only_host = TRACE_NONE;
    int rc = -1;
    if (t->n_host_queues == 1)
        for (uint32_t q = 0; q < nq; q++)
            if (t->queues[q].kind == TRACE_QUEUE_HOST)
                only_host = q;
    rc_out->no_submitter = calloc(nq ? nq : 1, sizeof *rc_out->no_submitter);
    if (!rc_out->no_submitter)
        goto out;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.queue >= nq)
            continue;
        if (t->queues[s.queue].kind == TRACE_QUEUE_STREAM) {
            uint32_t h = s.by != TRACE_NONE ? s.by : only_host;
            if (h >= nq || t->queues[h].kind != TRACE_QUEUE_HOST)
                rc_out->no_submitter[s.queue] = true;
            else if (!trace_u64map_put(&subs, (uint64_t)s.queue << 32 | h, 0))
                goto out;
        }
        if (s.kind == TRACE_ALLOC || s.kind == TRACE_FREE) {
            if (s.object < t->n_buffers &&
                !trace_u64map_put(&roots, (uint64_t)t->buffers[s.object].root << 32 | s.queue, 0))
                goto out;
            continue;
        }
        for (uint32_t k = 0; k < s.n_access; k++) {
            if (s.access[k].buffer >= t->n_buffers)
                continue;
            uint64_t key = (uint64_t)t->buffers[s.access[k].buffer].root << 32 | s.queue;
            if (!trace_u64map_put(&roots, key, 0))
                goto out;
        }
    }
    if (lists_from(&roots, t->n_buffers, &rc_out->root_at, &rc_out->root_q) != 0 ||
        lists_from(&subs, nq, &rc_out->sub_at, &rc_out->sub_h) != 0)
        goto out;
    rc_out->n_roots = t->n_buffers;
    rc_out->n_queues = nq;
    rc = 0;
out:
    trace_u64map_free(&roots);
    trace_u64map_free(&subs);
    return rc;
}

int check_islands_new(check_islands *is, const trace *t)
{
    memset(is, 0, sizeof *is);
    if (islands_build(is, t) != 0 || reach_build(&is->reach, &is->view) != 0) {
        check_islands_free(is);
        return -1;
    }
    return 0;
}

void check_islands_free(check_islands *is)
{
    free(is->buffers);
    free(is->orig_root);
    free(is->reach.root_at);
    free(is->reach.root_q);
    free(is->reach.sub_at);
    free(is->reach.sub_h);
    free(is->reach.no_submitter);
    memset(is, 0, sizeof *is);
}

uint32_t check_island_root(const check_islands *is, uint32_t root)
{
    if (root == TRACE_NONE || root < is->n_orig || root - is->n_orig >= is->n_islands)
        return root;
    return is->orig_root[root - is->n_orig];
}
