/*
 * alloc.c -- the graph allocator: one arena per backend, reused by liveness.
 *
 * Walking the nodes in execution order, each node's result gets the
 * best-fitting free block of its backend's arena (256-byte aligned); after
 * the node, the sources whose last reader it was are freed and merged with
 * their free neighbours. Graph outputs are never freed. Split-input copies
 * are allocated first and kept for the whole graph, one per pipeline slot,
 * since other backends' queues write them -- except under ggml's copy
 * slots with a single slot (policy.ggml_slots, n_copies 1), where ggml
 * allocates a split's copies when the split starts and frees each after
 * its last reader, like any node (ggml's graph_copy). Views take their source's
 * bytes. The arena's size is the high-water mark; in the trace every
 * allocation is a view of the arena (sched_tensor_view), so the checker
 * sees two tensors that reuse the same bytes as two views that overlap.
 *
 * Under ggml's allocator (policy.ggml_alloc) the lifetimes are counted as
 * ggml-alloc counts them (ggml_gallocr_alloc_graph_impl at the pinned
 * commit), on the graph as the split rewrote it: a node on another backend
 * reads the split's copy, not the source. Each tensor has its readers
 * (n_children) and its views (n_views); after a node, each source loses a
 * reader, and one with no reader and no view left is freed -- a view
 * instead gives its source one view less, and the source goes when it has
 * neither. Before taking a new block, a node whose op can work in place
 * (sched_op_can_inplace) takes the block of its first source, in source
 * order, that this allocator placed (not a weight, a user input or a kept
 * copy), that is no output, has the node's type and shape, whose last
 * reader is this node (n_children 1) and which no view uses (n_views 0).
 * ggml also has a branch for a source that is a view; it cannot be taken
 * at the pinned commit (a view is never "own": its hash node is never
 * allocated), and it is not taken here either. The pair in place is not an
 * overlap (sched_alloc_overlaps).
 *
 * ggml-alloc also places the user's inputs, in the CPU's compute buffer,
 * before anything else (ggml's graph_copy has them as leafs): with one
 * slot each input where the graph lists it, an own allocation like a node
 * (freed after its last reader, and a node may take it in place); with
 * more slots, each input's one copy per slot, in the order ggml's split
 * pass meets the inputs (a non-view node reading it), each flagged output
 * (never freed, never taken). So they are here, in s->in_off, with ggml's
 * block choice (arena_plan.ggml), and the offsets of every tensor are
 * ggml-alloc's (the differential test compares them).
 */
#include "sched_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 256u

typedef struct block { uint64_t off, size; } block;

typedef struct arena_plan {
    block *free;
    int n_free, cap_free;
    uint64_t top;                   /* high-water mark */
    /* ggml's block choice (ggml_dyn_tallocr_alloc, policy.ggml_alloc): the
     * free block that ends at the top is ggml's last block, which is taken
     * only when no other fits; of the others the smallest that fits, the
     * later one of equal sizes. Otherwise: the smallest that fits, any,
     * the first of equal sizes. */
    bool ggml;
} arena_plan;

static uint64_t align_up(uint64_t v) { return (v + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

static uint64_t plan_alloc(arena_plan *a, uint64_t size)
{
    size = align_up(size ? size : 1);
    int best = -1;
    for (int i = 0; i < a->n_free; i++) {
        const block *b = &a->free[i];
        if (b->size < size)
            continue;
        if (a->ggml ? b->off + b->size != a->top && (best < 0 || b->size <= a->free[best].size)
                    : (best < 0 || b->size < a->free[best].size))
            best = i;
    }
    if (best >= 0) {
        uint64_t off = a->free[best].off;
        a->free[best].off += size;
        a->free[best].size -= size;
        if (a->free[best].size == 0) {
            memmove(&a->free[best], &a->free[best + 1], (size_t)(a->n_free - best - 1) * sizeof(block));
            a->n_free--;
        }
        return off;
    }
    /* The free block that ends at the top (ggml's last block: big enough
     * when ggml's choice passed it over), or grow it, or grow the arena. */
    block *last = a->n_free > 0 ? &a->free[a->n_free - 1] : NULL;
    if (last && last->off + last->size == a->top) {
        uint64_t off = last->off;
        if (last->size > size) {
            last->off += size;
            last->size -= size;
            return off;
        }
        a->n_free--;
        a->top = off + size;
        return off;
    }
    uint64_t off = a->top;
    a->top += size;
    return off;
}

/* Returns 0 or -1 (out of memory). Keeps the list sorted and merged. */
static int plan_free(arena_plan *a, uint64_t off, uint64_t size)
{
    size = align_up(size ? size : 1);
    int i = 0;
    while (i < a->n_free && a->free[i].off < off)
        i++;
    if (a->n_free == a->cap_free) {
        int cap = a->cap_free ? a->cap_free * 2 : 16;
        block *n = realloc(a->free, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        a->free = n;
        a->cap_free = cap;
    }
    memmove(&a->free[i + 1], &a->free[i], (size_t)(a->n_free - i) * sizeof(block));
    a->free[i] = (block){ off, size };
    a->n_free++;
    if (i + 1 < a->n_free && a->free[i].off + a->free[i].size == a->free[i + 1].off) {
        a->free[i].size += a->free[i + 1].size;
        memmove(&a->free[i + 1], &a->free[i + 2], (size_t)(a->n_free - i - 2) * sizeof(block));
        a->n_free--;
    }
    if (i > 0 && a->free[i - 1].off + a->free[i - 1].size == a->free[i].off) {
        a->free[i - 1].size += a->free[i].size;
        memmove(&a->free[i], &a->free[i + 1], (size_t)(a->n_free - i - 1) * sizeof(block));
        a->n_free--;
    }
    return 0;
}

static int32_t storage_of(const sched_graph *g, int32_t t)
{
    return g->tensors[t].view_src >= 0 ? g->tensors[t].view_src : t;
}

static int add_rec(sched *s, int32_t t, int b, uint64_t off, uint64_t size, int32_t born,
                   int32_t dies)
{
    sched_alloc_rec *n = realloc(s->allocs, (size_t)(s->n_allocs + 1) * sizeof *n);
    if (!n)
        return -1;
    s->allocs = n;
    s->allocs[s->n_allocs++] = (sched_alloc_rec){ t, b, off, size, born, dies, -1 };
    return 0;
}

/* The tensor node reads as its source i on the graph the split rewrote:
 * the copy on the node's backend when the source is a split input there
 * (the first slot's: with ggml's transient copies there is one), else the
 * source. */
static int32_t read_of(const sched *s, int32_t node, int i)
{
    const sched_graph *g = s->graph;
    int32_t src = g->tensors[node].src[i];
    int b = g->tensors[node].backend;
    if (src < 0 || src >= s->n_orig || b < 0)
        return src;
    int32_t c = s->copy_map[src * s->n_backends + b];
    return c >= 0 ? c : src;
}

/* ggml-alloc's record of a tensor (its hash_node). */
typedef struct galloc_node {
    int32_t children, views;
    bool allocated;                 /* placed by this allocator and not freed */
    int32_t rec;                    /* its sched_alloc_rec, -1 */
} galloc_node;

static bool same_layout(const sched_tensor *a, const sched_tensor *b)
{
    if (a->type != b->type)
        return false;
    for (int i = 0; i < SCHED_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i])
            return false;
    return true;
}

/* ggml's in-place reuse: the source node ni may take, or -1. */
static int32_t inplace_parent(const sched *s, const galloc_node *h, int32_t ni)
{
    const sched_graph *g = s->graph;
    const sched_tensor *t = &g->tensors[ni];
    if (!sched_op_can_inplace(t->op))
        return -1;
    for (int i = 0; i < SCHED_MAX_SRC; i++) {
        int32_t p = read_of(s, ni, i);
        if (p < 0 || !h[p].allocated)
            continue;                           /* not ggml-alloc's own */
        const sched_tensor *pt = &g->tensors[p];
        if ((pt->flags & SCHED_FLAG_OUTPUT) || pt->backend != t->backend || !same_layout(t, pt))
            continue;
        if (h[p].children == 1 && h[p].views == 0)
            return p;
    }
    return -1;
}

/* ggml_gallocr_free_node: outputs are never freed. */
static int galloc_free(sched *s, arena_plan *plan, galloc_node *h, int32_t t, int32_t k)
{
    sched_tensor *x = &s->graph->tensors[t];
    if (x->flags & SCHED_FLAG_OUTPUT)
        return 0;
    h[t].allocated = false;
    if (h[t].rec >= 0)
        s->allocs[h[t].rec].dies = k;
    return plan_free(&plan[x->backend], x->offset, sched_tensor_nbytes(x));
}

/* One reader of p is done (ggml's "update parents"): p goes when it has
 * no reader and no view left; a view gives its source one view less. */
static int galloc_release(sched *s, arena_plan *plan, galloc_node *h, int32_t p, int32_t k)
{
    if (--h[p].children != 0 || h[p].views != 0)
        return 0;
    int32_t v = s->graph->tensors[p].view_src;
    if (v >= 0)
        return --h[v].views == 0 && h[v].children == 0 && h[v].allocated
                   ? galloc_free(s, plan, h, v, k) : 0;
    return h[p].allocated ? galloc_free(s, plan, h, p, k) : 0;
}

static bool is_user_input(const sched_tensor *t)
{
    return (t->flags & SCHED_FLAG_INPUT) && t->op == SCHED_OP_NONE && !t->buffer &&
           t->view_src < 0 && t->backend >= 0;
}

/* One input placed as ggml-alloc's own (a leaf of the graph it was given):
 * one place for every slot, freed after its last reader (rec). */
static sched_status place_own_input(sched *s, arena_plan *plan, int32_t i, int32_t *rec)
{
    sched_tensor *t = &s->graph->tensors[i];
    uint64_t size = sched_tensor_nbytes(t);
    t->offset = plan_alloc(&plan[t->backend], size);
    rec[i] = s->n_allocs;
    return add_rec(s, i, t->backend, t->offset, size, -1, INT32_MAX) == 0 ? SCHED_OK
                                                                           : SCHED_ENOMEM;
}

/* The user inputs in the CPU's arena, as ggml-alloc's leafs (the head
 * comment): the slot copies' in s->in_off, an own input's in its offset
 * and rec[input] its record (-1: none).
 * Phase 0, before the split inputs' copies: with more than one slot, the
 * slot copies of each input ggml's split pass meets. Phase 1, after them:
 * the others, own (all of them with one slot). */
static sched_status place_inputs(sched *s, arena_plan *plan, int32_t *rec, int phase)
{
    sched_graph *g = s->graph;
    size_t n = (size_t)s->n_copies;
    if (phase == 0) {
        free(s->in_off);
        if (!(s->in_off = malloc((size_t)s->n_orig * n * sizeof *s->in_off)))
            return SCHED_ENOMEM;
        for (size_t i = 0; i < (size_t)s->n_orig * n; i++)
            s->in_off[i] = UINT64_MAX;
        for (int32_t i = 0; i < s->n_orig; i++)
            rec[i] = -1;
    }
    if (phase == 1) {
        for (int32_t i = 0; i < s->n_orig; i++)
            if (is_user_input(&g->tensors[i]) && s->in_off[(size_t)i * n] == UINT64_MAX &&
                rec[i] < 0 && place_own_input(s, plan, i, rec) != SCHED_OK)
                return SCHED_ENOMEM;
        return SCHED_OK;
    }
    if (n == 1)
        return SCHED_OK;
    /* ggml's split pass: nodes in order from the first that is no view,
     * views skipped, each source in order */
    int32_t k = 0;
    while (k < s->n_order && sched_op_is_view(g->tensors[s->order[k]].op))
        k++;
    for (; k < s->n_order; k++) {
        const sched_tensor *node = &g->tensors[s->order[k]];
        if (sched_op_is_view(node->op))
            continue;
        for (int j = 0; j < SCHED_MAX_SRC; j++) {
            int32_t i = node->src[j];
            if (i < 0 || i >= s->n_orig || !is_user_input(&g->tensors[i]) ||
                s->in_off[(size_t)i * n] != UINT64_MAX)
                continue;
            uint64_t size = sched_tensor_nbytes(&g->tensors[i]);
            for (size_t c = 0; c < n; c++) {
                uint64_t off = plan_alloc(&plan[g->tensors[i].backend], size);
                s->in_off[(size_t)i * n + c] = off;
                if (add_rec(s, i, g->tensors[i].backend, off, size, -1, INT32_MAX) != 0)
                    return SCHED_ENOMEM;
            }
        }
    }
    return SCHED_OK;
}

/* The nodes in order under ggml-alloc's counts (the head comment). Kept
 * copies are placed already; transient ones are born at copy_born; user
 * inputs with one slot are ggml-alloc's own, input_rec their records. */
static sched_status nodes_ggml(sched *s, arena_plan *plan, const int32_t *copy_born,
                               const int32_t *input_rec)
{
    sched_graph *g = s->graph;
    galloc_node *h = calloc((size_t)g->n_tensors, sizeof *h);
    if (!h)
        return SCHED_ENOMEM;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        h[i].rec = i < s->n_orig ? input_rec[i] : -1;
        h[i].allocated = h[i].rec >= 0;
    }
    for (int32_t k = 0; k < s->n_order; k++) {
        int32_t ni = s->order[k];
        if (g->tensors[ni].view_src >= 0)
            h[g->tensors[ni].view_src].views++;
        for (int i = 0; i < SCHED_MAX_SRC; i++) {
            int32_t r = read_of(s, ni, i);
            if (r >= 0)
                h[r].children++;
        }
    }
    /* ggml's graph_copy reads each split input at the split's start (its
     * input_dep), which keeps the source until the copy is made. */
    for (int i = 0; i < s->n_splits; i++)
        for (int j = 0; j < s->splits[i].n_inputs; j++)
            h[s->splits[i].inputs[j]].children++;
    sched_status st = SCHED_ENOMEM;
    int next_split = 0;
    for (int32_t k = 0; k < s->n_order; k++) {
        int32_t ni = s->order[k];
        for (; next_split < s->n_splits && s->splits[next_split].first <= k; next_split++) {
            const sched_split *sp = &s->splits[next_split];
            for (int j = 0; j < sp->n_inputs; j++)
                if (galloc_release(s, plan, h, sp->inputs[j], k) != 0)
                    goto fail;
        }
        for (int32_t c = s->n_orig; copy_born && c < g->n_tensors; c++) {
            sched_tensor *ct = &g->tensors[c];
            if (copy_born[c] != k)
                continue;
            uint64_t size = sched_tensor_nbytes(ct);
            ct->offset = plan_alloc(&plan[ct->backend], size);
            h[c].allocated = true;
            h[c].rec = s->n_allocs;
            if (add_rec(s, c, ct->backend, ct->offset, size, k, INT32_MAX) != 0)
                goto fail;
        }
        sched_tensor *t = &g->tensors[ni];
        if (!sched_op_is_view(t->op) && t->view_src < 0 && !t->buffer) {
            uint64_t size = sched_tensor_nbytes(t);
            int32_t p = inplace_parent(s, h, ni);
            if (p >= 0) {
                /* The parent's block, kept: the parent is not freed. */
                t->offset = g->tensors[p].offset;
                h[p].allocated = false;
                if (h[p].rec >= 0)
                    s->allocs[h[p].rec].dies = k;
            } else {
                t->offset = plan_alloc(&plan[t->backend], size);
            }
            h[ni].allocated = true;
            h[ni].rec = s->n_allocs;
            if (add_rec(s, ni, t->backend, t->offset, size, k, INT32_MAX) != 0)
                goto fail;
            s->allocs[s->n_allocs - 1].inplace_of = p;
        }
        for (int i = 0; i < SCHED_MAX_SRC; i++) {
            int32_t p = read_of(s, ni, i);
            if (p >= 0 && galloc_release(s, plan, h, p, k) != 0)
                goto fail;
        }
    }
    st = SCHED_OK;
fail:
    free(h);
    return st;
}

/* The tensors of s in arena `from` move to arena `to` (a shared arena that
 * grew); their trace views are declared again when next used. */
static void move_arena(sched *s, sched_buffer *from, sched_buffer *to)
{
    sched_graph *g = s->graph;
    for (size_t i = 0; s->in_view && s->in_off && g && i < (size_t)s->n_orig * (size_t)s->n_copies; i++)
        s->in_view[i] = TRACE_NONE;
    for (int32_t i = 0; g && i < g->n_tensors; i++)
        if (g->tensors[i].buffer == from) {
            g->tensors[i].buffer = to;
            g->tensors[i].trace_view = TRACE_NONE;
        }
    sched_backend *be = from->backend;
    if (be->iface->buffer_free)
        be->iface->buffer_free(be, from);
}

sched_status sched_allocate(sched *s, char *err, size_t err_cap)
{
    sched_graph *g = s->graph;
    arena_plan plan[SCHED_MAX_BACKENDS];
    memset(plan, 0, sizeof plan);
    for (int b = 0; b < SCHED_MAX_BACKENDS; b++)
        plan[b].ggml = s->policy->ggml_alloc;
    int32_t *last_use = malloc((size_t)g->n_tensors * sizeof *last_use);
    int32_t *born = malloc((size_t)g->n_tensors * sizeof *born);
    int32_t *copy_born = NULL, *input_rec = NULL;
    sched_status st = SCHED_ENOMEM;
    if (!last_use || !born)
        goto fail;
    for (int32_t i = 0; i < g->n_tensors; i++)
        last_use[i] = born[i] = -1;
    for (int32_t k = 0; k < s->n_order; k++) {
        const sched_tensor *t = &g->tensors[s->order[k]];
        for (int i = 0; i < SCHED_MAX_SRC; i++)
            if (t->src[i] >= 0)
                last_use[storage_of(g, t->src[i])] = k;
    }
    free(s->allocs);
    s->allocs = NULL;
    s->n_allocs = 0;

    /* ggml with one slot: a copy is born when its split starts and dies
     * after the last node that reads it (through copy_of, on its backend). */
    bool transient = s->policy->ggml_slots && s->n_copies == 1;
    if (transient) {
        if (!(copy_born = malloc((size_t)g->n_tensors * sizeof *copy_born)))
            goto fail;
        for (int32_t i = 0; i < g->n_tensors; i++)
            copy_born[i] = -1;
        for (int i = 0; i < s->n_splits; i++)
            for (int j = 0; j < s->splits[i].n_inputs; j++)
                copy_born[s->splits[i].input_copy[j]] = s->splits[i].first;
        for (int32_t k = 0; k < s->n_order; k++) {
            const sched_tensor *t = &g->tensors[s->order[k]];
            for (int i = 0; i < SCHED_MAX_SRC; i++) {
                if (t->src[i] < 0)
                    continue;
                int32_t read = t->src[i];   /* a view input is copied as the view */
                for (int32_t c = s->n_orig; c < g->n_tensors; c++)
                    if ((g->tensors[c].flags & SCHED_FLAG_COPY) && g->tensors[c].copy_of == read &&
                        g->tensors[c].backend == t->backend)
                        last_use[c] = k;
            }
        }
    }
    if (s->policy->ggml_alloc) {
        if (!(input_rec = malloc(((size_t)s->n_orig + 1) * sizeof *input_rec)) ||
            (st = place_inputs(s, plan, input_rec, 0)) != SCHED_OK)
            goto fail;
        st = SCHED_ENOMEM;
    }
    /* Split-input copies: live for the whole graph (unless transient). */
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & SCHED_FLAG_COPY) || transient)
            continue;
        uint64_t size = sched_tensor_nbytes(t);
        t->offset = plan_alloc(&plan[t->backend], size);
        if (add_rec(s, i, t->backend, t->offset, size, -1, INT32_MAX) != 0)
            goto fail;
    }
    if (s->policy->ggml_alloc) {
        if ((st = place_inputs(s, plan, input_rec, 1)) != SCHED_OK)
            goto fail;
        for (int32_t i = 0; i < s->n_orig; i++)
            if (s->in_off[(size_t)i * (size_t)s->n_copies] != UINT64_MAX)
                g->tensors[i].offset = s->in_off[(size_t)i * (size_t)s->n_copies + s->cur_copy];
        if ((st = nodes_ggml(s, plan, copy_born, input_rec)) != SCHED_OK)
            goto fail;
        goto arenas;
    }
    /* Nodes in order; free sources after their last reader. */
    for (int32_t k = 0; k < s->n_order; k++) {
        int32_t ni = s->order[k];
        sched_tensor *t = &g->tensors[ni];
        for (int32_t c = s->n_orig; transient && c < g->n_tensors; c++) {
            sched_tensor *ct = &g->tensors[c];
            if (copy_born[c] != k)
                continue;
            uint64_t size = sched_tensor_nbytes(ct);
            ct->offset = plan_alloc(&plan[ct->backend], size);
            born[c] = k;
            if (last_use[c] < k)
                last_use[c] = INT32_MAX;        /* read by no node: kept */
            if (add_rec(s, c, ct->backend, ct->offset, size, k, last_use[c]) != 0)
                goto fail;
        }
        if (!sched_op_is_view(t->op) && t->view_src < 0 && !t->buffer) {
            uint64_t size = sched_tensor_nbytes(t);
            t->offset = plan_alloc(&plan[t->backend], size);
            born[ni] = k;
            bool keep = (t->flags & SCHED_FLAG_OUTPUT) || last_use[ni] < 0;
            if (add_rec(s, ni, t->backend, t->offset, size, k,
                        keep ? INT32_MAX : last_use[ni]) != 0)
                goto fail;
            if (keep)
                last_use[ni] = INT32_MAX;
        }
        for (int i = 0; i < SCHED_MAX_SRC; i++) {
            if (t->src[i] < 0)
                continue;
            int32_t si = storage_of(g, t->src[i]);
            sched_tensor *src = &g->tensors[si];
            if (last_use[si] != k || born[si] < 0 || (src->flags & SCHED_FLAG_OUTPUT))
                continue;
            last_use[si] = -2;      /* freed once even when read twice by this node */
            if (plan_free(&plan[src->backend], src->offset, sched_tensor_nbytes(src)) != 0)
                goto fail;
        }
        for (int32_t c = s->n_orig; transient && c < g->n_tensors; c++) {
            if (last_use[c] != k || born[c] < 0)
                continue;
            last_use[c] = -2;
            if (plan_free(&plan[g->tensors[c].backend], g->tensors[c].offset,
                          sched_tensor_nbytes(&g->tensors[c])) != 0)
                goto fail;
        }
    }
arenas:
    /* One arena per backend that needs one. */
    for (int b = 0; b < s->n_backends; b++) {
        s->arena_size[b] = plan[b].top;
        if (s->arena[b] || plan[b].top == 0)
            continue;
        /* Shared (opts.share): the first scheduler's buffer, grown if need be. */
        sched *owner = s->opts.share ? s->opts.share : s;
        sched_buffer *old = owner->arena[b];
        if (old && old->size >= plan[b].top) {
            s->arena[b] = old;
            continue;
        }
        sched_backend *be = s->backends[b];
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.24s.arena.%.24s", owner->opts.name, be->iface->get_name(be));
        s->arena[b] = be->iface->buffer_alloc(be, name, plan[b].top, SCHED_BUFFER_COMPUTE);
        if (!s->arena[b]) {
            snprintf(err, err_cap, "backend %s: cannot allocate an arena of %llu bytes",
                     be->iface->get_name(be), (unsigned long long)plan[b].top);
            st = SCHED_EBACKEND;
            goto fail;
        }
        if (owner != s) {
            if (old)
                move_arena(owner, old, s->arena[b]);
            owner->arena[b] = s->arena[b];
        }
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (t->buffer || t->view_src >= 0 || (t->op == SCHED_OP_NONE && !(t->flags & SCHED_FLAG_COPY)))
            continue;
        t->buffer = s->arena[t->backend];
    }
    for (int32_t i = 0; s->in_off && i < s->n_orig; i++) {
        size_t at = (size_t)i * (size_t)s->n_copies + (size_t)s->cur_copy;
        if (s->in_off[at] == UINT64_MAX && input_rec[i] < 0)
            continue;
        g->tensors[i].buffer = s->arena[g->tensors[i].backend];
        if (s->in_off[at] != UINT64_MAX)
            g->tensors[i].offset = s->in_off[at];
        g->tensors[i].trace_view = TRACE_NONE;     /* declared on first use */
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (t->view_src < 0)
            continue;
        const sched_tensor *base = &g->tensors[t->view_src];
        t->buffer = base->buffer;
        t->offset = base->offset + t->view_offs;
    }
    for (int b = 0; b < SCHED_MAX_BACKENDS; b++)
        free(plan[b].free);
    free(last_use);
    free(born);
    free(copy_born);
    free(input_rec);
    return SCHED_OK;
fail:
    for (int b = 0; b < SCHED_MAX_BACKENDS; b++)
        free(plan[b].free);
    free(last_use);
    free(born);
    free(copy_born);
    free(input_rec);
    if (st == SCHED_ENOMEM)
        snprintf(err, err_cap, "out of memory while allocating");
    return st;
}

int sched_alloc_overlaps(const sched *s)
{
    int n = 0;
    for (int32_t i = 0; i < s->n_allocs; i++)
        for (int32_t j = i + 1; j < s->n_allocs; j++) {
            const sched_alloc_rec *a = &s->allocs[i], *b = &s->allocs[j];
            if (a->backend != b->backend)
                continue;
            /* A node in place of its parent: one block, handed over. */
            if (a->inplace_of == b->tensor || b->inplace_of == a->tensor)
                continue;
            bool live = a->born <= b->dies && b->born <= a->dies;
            bool bytes = a->offset < b->offset + b->size && b->offset < a->offset + a->size;
            if (live && bytes)
                n++;
        }
    return n;
}
