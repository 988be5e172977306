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
} arena_plan;

static uint64_t align_up(uint64_t v) { return (v + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

static uint64_t plan_alloc(arena_plan *a, uint64_t size)
{
    size = align_up(size ? size : 1);
    int best = -1;
    for (int i = 0; i < a->n_free; i++)
        if (a->free[i].size >= size && (best < 0 || a->free[i].size < a->free[best].size))
            best = i;
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
    /* Grow the arena; a free block that ends at the top is extended. */
    if (a->n_free > 0 && a->free[a->n_free - 1].off + a->free[a->n_free - 1].size == a->top) {
        uint64_t off = a->free[a->n_free - 1].off;
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
    s->allocs[s->n_allocs++] = (sched_alloc_rec){ t, b, off, size, born, dies };
    return 0;
}

sched_status sched_allocate(sched *s, char *err, size_t err_cap)
{
    sched_graph *g = s->graph;
    arena_plan plan[SCHED_MAX_BACKENDS];
    memset(plan, 0, sizeof plan);
    int32_t *last_use = malloc((size_t)g->n_tensors * sizeof *last_use);
    int32_t *born = malloc((size_t)g->n_tensors * sizeof *born);
    int32_t *copy_born = NULL;
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
    /* One arena per backend that needs one. */
    for (int b = 0; b < s->n_backends; b++) {
        s->arena_size[b] = plan[b].top;
        if (s->arena[b] || plan[b].top == 0)
            continue;
        sched_backend *be = s->backends[b];
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.24s.arena.%.24s", s->opts.name, be->iface->get_name(be));
        s->arena[b] = be->iface->buffer_alloc(be, name, plan[b].top, SCHED_BUFFER_COMPUTE);
        if (!s->arena[b]) {
            snprintf(err, err_cap, "backend %s: cannot allocate an arena of %llu bytes",
                     be->iface->get_name(be), (unsigned long long)plan[b].top);
            st = SCHED_EBACKEND;
            goto fail;
        }
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (t->buffer || t->view_src >= 0 || (t->op == SCHED_OP_NONE && !(t->flags & SCHED_FLAG_COPY)))
            continue;
        t->buffer = s->arena[t->backend];
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
    return SCHED_OK;
fail:
    for (int b = 0; b < SCHED_MAX_BACKENDS; b++)
        free(plan[b].free);
    free(last_use);
    free(born);
    free(copy_born);
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
            bool live = a->born <= b->dies && b->born <= a->dies;
            bool bytes = a->offset < b->offset + b->size && b->offset < a->offset + a->size;
            if (live && bytes)
                n++;
        }
    return n;
}
