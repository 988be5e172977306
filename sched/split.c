/*
 * split.c -- cutting the assigned node list into splits, and split inputs.
 *
 * A new split starts where the backend of a (non-view) node changes (the
 * first split's backend is its first non-view node's, as ggml's). A
 * source of a node that lives on another backend, in memory the split's
 * backend cannot use, is a split input: the split gets n_copies copies of
 * it (one per pipeline slot) in its backend's arena. A source that is a
 * view is the input as the view, as in ggml: its copy has the view's shape
 * and takes the view's byte range alone (two views of one tensor are two
 * inputs). A later split on the
 * same backend reads the copy already made; it is not an input again
 * (ggml's tensor_id_copy).
 *
 * As ggml, a split that has inputs also ends before a node on its backend
 * that reads a weight of another backend it cannot use (the copies of the
 * weights before it can then be reused: MoE experts in host memory).
 *
 * A split with no inputs gets wait_prev when its backend's memory is read
 * by another backend's split (its outputs are copied from there): the
 * allocator reuses that memory, so the split must wait for the previous
 * split before it overwrites what a copy may still read.
 */
#include "sched_int.h"

#include <stdlib.h>
#include <string.h>

void sched_free_splits(sched *s)
{
    for (int i = 0; i < s->n_splits; i++) {
        free(s->splits[i].nodes);
        free(s->splits[i].inputs);
        free(s->splits[i].input_copy);
    }
    free(s->splits);
    s->splits = NULL;
    s->n_splits = 0;
}

/* The tensor whose bytes t names (itself unless it is a view). */
static int32_t storage_of(const sched_graph *g, int32_t t)
{
    return g->tensors[t].view_src >= 0 ? g->tensors[t].view_src : t;
}

static bool can_use(const sched *s, int b, const sched_tensor *src)
{
    if (src->backend == b)
        return true;
    sched_backend *be = s->backends[b];
    const sched_buffer *buf = src->buffer;
    return buf && be->iface->supports_buffer && be->iface->supports_buffer(be, buf);
}

/* Whether backend b can read tensor t where it is: t's own backend, or the
 * buffer of the bytes it names (a view's source's: ggml's
 * ggml_backend_sched_buffer_supported). */
static bool can_read(const sched *s, int b, const sched_graph *g, int32_t t)
{
    const sched_tensor *x = &g->tensors[t];
    if (x->backend == b)
        return true;
    const sched_tensor *st = &g->tensors[storage_of(g, t)];
    return can_use(s, b, st->buffer ? st : x);
}

static int push_i32(int32_t **arr, int *n, int32_t v)
{
    int32_t *a = realloc(*arr, (size_t)(*n + 1) * sizeof *a);
    if (!a)
        return -1;
    a[(*n)++] = v;
    *arr = a;
    return 0;
}

/* Adds n_copies copy tensors of src for backend b; returns the first. */
static int32_t add_copies(sched *s, int32_t src, int b)
{
    sched_graph *g = s->graph;
    int32_t first = -1;
    for (int c = 0; c < s->n_copies; c++) {
        sched_tensor base = g->tensors[src];
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.40s#%s#%d", base.name,
                 s->backends[b]->iface->get_name(s->backends[b]), c);
        int32_t t = sched_graph_leaf(g, name, base.type, base.n_dims, base.ne, SCHED_FLAG_COPY);
        if (t < 0)
            return -1;
        if (first < 0)
            first = t;
        sched_tensor *ct = &g->tensors[t];
        ct->backend = b;
        ct->cause = SCHED_CAUSE_COPY;
        ct->copy_of = src;
        ct->copy_slot = c;
        s->n_copy_tensors++;
    }
    return first;
}

/* (source, backend) -> first copy, as a flat list: splits have few inputs. */
typedef struct copy_key { int32_t src; int backend; int32_t first; } copy_key;

sched_status sched_make_splits(sched *s, char *err, size_t err_cap)
{
    sched_graph *g = s->graph;
    sched_free_splits(s);
    s->n_copy_tensors = 0;
    copy_key *copies = NULL;
    int n_keys = 0;
    sched_status st = SCHED_ENOMEM;
    int cur = -1;
    /* As ggml, the first split's backend is its first node's that is no
     * view: views before it belong to it (they make no split of their own). */
    int first_backend = -1;
    for (int32_t k = 0; k < s->n_order && first_backend < 0; k++)
        if (!sched_op_is_view(g->tensors[s->order[k]].op))
            first_backend = g->tensors[s->order[k]].backend;
    for (int32_t k = 0; k < s->n_order; k++) {
        int32_t ni = s->order[k];
        const sched_tensor *t = &g->tensors[ni];
        bool starts = s->n_splits == 0 || (!sched_op_is_view(t->op) && t->backend != cur);
        if (!starts && !sched_op_is_view(t->op) && s->splits[s->n_splits - 1].n_inputs > 0) {
            bool full = s->splits[s->n_splits - 1].n_inputs >= SCHED_MAX_SPLIT_INPUTS;
            for (int i = 0; i < SCHED_MAX_SRC && !starts; i++) {
                if (t->src[i] < 0)
                    continue;
                int32_t wi = storage_of(g, t->src[i]);
                const sched_tensor *w = &g->tensors[wi];
                starts = (w->flags & SCHED_FLAG_WEIGHT) && w->buffer &&
                         w->buffer->usage == SCHED_BUFFER_WEIGHTS && !can_use(s, cur, w);
                /* A full split ends before a node that needs a new input. */
                if (full && !starts && !can_use(s, cur, w)) {
                    bool known = false;
                    for (int q = 0; q < n_keys && !known; q++)
                        known = copies[q].src == wi && copies[q].backend == cur;
                    starts = !known;
                }
            }
        }
        if (starts) {
            sched_split *n = realloc(s->splits, (size_t)(s->n_splits + 1) * sizeof *n);
            if (!n)
                goto fail;
            s->splits = n;
            memset(&n[s->n_splits], 0, sizeof *n);
            cur = s->n_splits == 0 && sched_op_is_view(t->op) && first_backend >= 0 ? first_backend
                                                                                   : t->backend;
            n[s->n_splits].backend = cur;
            n[s->n_splits].first = k;
            s->n_splits++;
        }
        sched_split *sp = &s->splits[s->n_splits - 1];
        sp->end = k + 1;
        if (push_i32(&sp->nodes, &sp->n_nodes, ni) != 0)
            goto fail;
        if (sched_op_is_view(t->op))
            continue;
        for (int i = 0; i < SCHED_MAX_SRC; i++) {
            if (t->src[i] < 0)
                continue;
            /* The tensor read, a view as the view: ggml copies its bytes
             * alone (ggml_dup_tensor_layout of the source as the node
             * names it), not the whole tensor it is a view of. */
            int32_t src = t->src[i];
            if (can_read(s, sp->backend, g, src))
                continue;
            bool known = false;
            for (int q = 0; q < n_keys; q++)
                if (copies[q].src == src && copies[q].backend == sp->backend)
                    known = true;
            if (known)
                continue;
            int32_t first = add_copies(s, src, sp->backend);
            if (first < 0)
                goto fail;
            t = &g->tensors[ni];            /* the array may have moved */
            copy_key *nk = realloc(copies, (size_t)(n_keys + 1) * sizeof *nk);
            if (!nk)
                goto fail;
            copies = nk;
            copies[n_keys++] = (copy_key){ src, sp->backend, first };
            int n_in = sp->n_inputs;
            if (push_i32(&sp->inputs, &n_in, src) != 0)
                goto fail;
            n_in = sp->n_inputs;
            if (push_i32(&sp->input_copy, &n_in, first) != 0)
                goto fail;
            sp->n_inputs = n_in;
        }
    }
    /* Which backends' memory is read by other backends' splits. */
    bool shared[SCHED_MAX_BACKENDS] = { false };
    for (int i = 0; i < s->n_splits; i++)
        for (int j = 0; j < s->splits[i].n_inputs; j++) {
            const sched_tensor *src = &g->tensors[s->splits[i].inputs[j]];
            if (!(src->flags & SCHED_FLAG_INPUT) && src->backend >= 0)
                shared[src->backend] = true;
        }
    for (int i = 0; i < s->n_splits; i++)
        s->splits[i].wait_prev = s->splits[i].n_inputs == 0 && shared[s->splits[i].backend];
    for (int i = 0; i < s->n_splits; i++)
        for (int k = 0; k < s->splits[i].n_nodes && !s->splits[i].tp_rank; k++)
            s->splits[i].tp_rank = g->tensors[s->splits[i].nodes[k]].op == SCHED_OP_ALL_REDUCE;
    free(copies);
    return SCHED_OK;
fail:
    free(copies);
    snprintf(err, err_cap, "out of memory while splitting");
    return st;
}
