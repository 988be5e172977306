/*
 * node.c -- a node of a split as the kernels take it.
 *
 * A node's sources are read where the split reads them (x->src_of: the
 * split-input copy of its slot when the source lives on another
 * backend). A source that is a view of a copied tensor is read at its
 * offset in the copy. Every tensor is contiguous in its shape (views,
 * reshapes and permutes name bytes, they move none), so a kernel needs
 * only shapes, types and addresses.
 */
#include "real_int.h"

#include <string.h>

static void tensor_of(const sched_tensor *t, void *data, real_tensor *out)
{
    out->type = t->type;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->data = data;
}

int real_node_args(const sched_exec *x, int32_t node, real_kernel_args *a)
{
    sched_graph *g = x->graph;
    sched_tensor *t = &g->tensors[node];
    memset(a, 0, sizeof *a);
    a->op = t->op;
    a->param = t->param;
    void *dd = real_tensor_data(t);
    if (!dd)
        return -1;
    tensor_of(t, dd, &a->dst);
    for (int i = 0; i < SCHED_MAX_SRC; i++) {
        if (t->src[i] < 0)
            continue;
        int32_t orig = t->src[i];
        int32_t act = x->src_of ? x->src_of(x, node, i) : orig;
        sched_tensor *ot = &g->tensors[orig], *at = &g->tensors[act];
        /* A split input's copy is the tensor read, a view as the view. */
        char *base = real_tensor_data(at);
        if (!base)
            return -1;
        tensor_of(ot, base, &a->src[i]);
        a->n_src = i + 1;
    }
    return 0;
}
