/*
 * graph.c -- the graph model: tensors, ops, their shapes and their costs.
 *
 * Shapes follow ggml: ne[0] is the row length. mul_mat(a, b) with
 * a = [K, M] and b = [K, N, ...] gives [M, N, ...]. Costs are what a
 * roofline needs: FLOPs (2 per multiply-add) and the bytes an op reads
 * and writes in memory. Views cost nothing.
 */
#include "sched.h"

#include <stdlib.h>
#include <string.h>

const char *sched_status_str(sched_status st)
{
    switch (st) {
#define SCHED_STATUS_CASE(name, msg) case SCHED_##name: return msg;
        SCHED_STATUS_MAP(SCHED_STATUS_CASE)
#undef SCHED_STATUS_CASE
    }
    return "unknown status";
}

static const struct { const char *word; size_t size; } dtype_info[] = {
#define SCHED_DTYPE_INFO(name, word, size) { word, size },
    SCHED_DTYPE_MAP(SCHED_DTYPE_INFO)
#undef SCHED_DTYPE_INFO
};

const char *sched_dtype_str(sched_dtype t) { return dtype_info[t].word; }
size_t sched_dtype_size(sched_dtype t) { return dtype_info[t].size; }

int sched_dtype_parse(const char *word)
{
    for (int i = 0; i < SCHED_DTYPE_COUNT; i++)
        if (strcmp(word, dtype_info[i].word) == 0)
            return i;
    return -1;
}

static const struct { const char *word; int n_src; bool view, inplace; } op_info[] = {
#define SCHED_OP_INFO(name, word, nsrc, view, inplace) { word, nsrc, view, inplace },
    SCHED_OP_MAP(SCHED_OP_INFO)
#undef SCHED_OP_INFO
};

const char *sched_op_str(sched_op op) { return op_info[op].word; }
bool sched_op_is_view(sched_op op) { return op_info[op].view; }
bool sched_op_can_inplace(sched_op op) { return op_info[op].inplace; }
int sched_op_n_src(sched_op op) { return op_info[op].n_src; }

int sched_op_parse(const char *word)
{
    for (int i = 1; i < SCHED_OP_COUNT; i++)
        if (strcmp(word, op_info[i].word) == 0)
            return i;
    return -1;
}

static const struct { int pass; const char *text; } cause_info[] = {
#define SCHED_CAUSE_INFO(name, pass, text) { pass, text },
    SCHED_CAUSE_MAP(SCHED_CAUSE_INFO)
#undef SCHED_CAUSE_INFO
};

const char *sched_cause_str(sched_cause c) { return cause_info[c].text; }
int sched_cause_pass(sched_cause c) { return cause_info[c].pass; }

sched_graph *sched_graph_new(const char *name)
{
    sched_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    snprintf(g->name, sizeof g->name, "%s", name ? name : "graph");
    return g;
}

void sched_graph_free(sched_graph *g)
{
    if (!g)
        return;
    free(g->tensors);
    free(g);
}

int32_t sched_graph_find(const sched_graph *g, const char *name)
{
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return i;
    return -1;
}

static sched_tensor *graph_add(sched_graph *g, const char *name, int32_t *index)
{
    if (g->n_tensors == g->cap_tensors) {
        int32_t cap = g->cap_tensors ? g->cap_tensors * 2 : 64;
        sched_tensor *n = realloc(g->tensors, (size_t)cap * sizeof *n);
        if (!n)
            return NULL;
        g->tensors = n;
        g->cap_tensors = cap;
    }
    *index = g->n_tensors;
    sched_tensor *t = &g->tensors[g->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    for (int i = 0; i < SCHED_MAX_SRC; i++)
        t->src[i] = -1;
    for (int i = 0; i < SCHED_MAX_DIMS; i++)
        t->ne[i] = 1;
    t->n_dims = 1;
    t->view_src = -1;
    t->home = -1;
    t->user_backend = -1;
    t->backend = -1;
    t->copy_of = -1;
    t->copy_slot = -1;
    t->trace_view = TRACE_NONE;
    return t;
}

int32_t sched_graph_leaf(sched_graph *g, const char *name, sched_dtype type, int n_dims,
                         const int64_t *ne, uint32_t flags)
{
    int32_t idx;
    if (n_dims < 1 || n_dims > SCHED_MAX_DIMS)
        return -1;
    for (int i = 0; i < n_dims; i++)
        if (ne[i] < 1)
            return -1;
    sched_tensor *t = graph_add(g, name, &idx);
    if (!t)
        return -1;
    t->type = type;
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++)
        t->ne[i] = ne[i];
    t->flags = flags;
    return idx;
}

int32_t sched_graph_view(sched_graph *g, const char *name, sched_op op, int32_t src,
                         sched_dtype type, int n_dims, const int64_t *ne, uint64_t offs)
{
    if (!sched_op_is_view(op) || src < 0 || src >= g->n_tensors)
        return -1;
    int32_t idx = sched_graph_leaf(g, name, type, n_dims, ne, 0);
    if (idx < 0)
        return -1;
    sched_tensor *t = &g->tensors[idx];
    const sched_tensor *s = &g->tensors[src];
    if (offs + sched_tensor_nbytes(t) > sched_tensor_nbytes(s)) {
        g->n_tensors--;
        return -1;
    }
    t->op = op;
    t->src[0] = src;
    /* A view of a view names the root's bytes directly. */
    t->view_src = s->view_src >= 0 ? s->view_src : src;
    t->view_offs = (s->view_src >= 0 ? s->view_offs : 0) + offs;
    return idx;
}

/* Broadcasting as ggml allows it: b repeats to a's shape. */
static bool can_repeat(const sched_tensor *b, const sched_tensor *a)
{
    for (int i = 0; i < SCHED_MAX_DIMS; i++)
        if (a->ne[i] % b->ne[i] != 0)
            return false;
    return true;
}

int32_t sched_graph_op(sched_graph *g, const char *name, sched_op op, const int32_t *srcs,
                       int n_src)
{
    if (op <= SCHED_OP_NONE || op >= SCHED_OP_COUNT || sched_op_is_view(op))
        return -1;
    int want = sched_op_n_src(op);
    if (want > 0 ? n_src != want : (n_src < 1 || n_src > 2))
        return -1;
    for (int i = 0; i < n_src; i++)
        if (srcs[i] < 0 || srcs[i] >= g->n_tensors)
            return -1;
    /* Copy the sources out: graph_add may move the array. */
    sched_tensor a = g->tensors[srcs[0]];
    sched_tensor b = n_src > 1 ? g->tensors[srcs[1]] : a;
    sched_tensor c = n_src > 2 ? g->tensors[srcs[2]] : a;
    int64_t ne[SCHED_MAX_DIMS];
    memcpy(ne, a.ne, sizeof ne);
    sched_dtype type = a.type;
    switch (op) {
    case SCHED_OP_MUL_MAT:
        if (a.ne[0] != b.ne[0])
            return -1;
        ne[0] = a.ne[1];
        ne[1] = b.ne[1];
        ne[2] = b.ne[2];
        ne[3] = b.ne[3];
        type = SCHED_F32;
        break;
    case SCHED_OP_MUL_MAT_ID:
        /* ggml's: experts a [K, M, E], b [K, 1 or U, T], ids [U, T] i32
         * -> [M, U, T]: out[:, u, t] = a[:, :, ids[u, t]] x b[:, u or 0, t]. */
        if (a.ne[0] != b.ne[0] || c.type != SCHED_I32 || b.ne[2] != c.ne[1] ||
            (b.ne[1] != 1 && b.ne[1] != c.ne[0]) || a.ne[3] != 1 || b.ne[3] != 1 || c.ne[2] != 1 ||
            c.ne[3] != 1)
            return -1;
        ne[0] = a.ne[1];
        ne[1] = c.ne[0];
        ne[2] = c.ne[1];
        ne[3] = 1;
        type = SCHED_F32;
        break;
    case SCHED_OP_ADD:
    case SCHED_OP_MUL:
        if (!can_repeat(&b, &a))
            return -1;
        break;
    case SCHED_OP_SOFTMAX:
        if (n_src == 2 && b.ne[0] != a.ne[0])
            return -1;
        break;
    case SCHED_OP_ROPE:
        if (b.ne[0] != a.ne[2] || b.type != SCHED_I32)
            return -1;
        break;
    case SCHED_OP_GET_ROWS:
        if (b.type != SCHED_I32)
            return -1;
        ne[0] = a.ne[0];
        ne[1] = b.ne[0];
        ne[2] = ne[3] = 1;
        type = a.type == SCHED_I32 ? SCHED_I32 : SCHED_F32;
        break;
    case SCHED_OP_CPY:
        if (sched_tensor_nelements(&a) != sched_tensor_nelements(&b))
            return -1;
        memcpy(ne, b.ne, sizeof ne);
        type = b.type;
        break;
    case SCHED_OP_CONVERT:
        type = a.type == SCHED_F32 ? SCHED_BF16 : SCHED_F32;
        break;
    case SCHED_OP_CONCAT:
        for (int i = 0; i < SCHED_MAX_DIMS; i++)
            if (i != 1 && a.ne[i] != b.ne[i])
                return -1;
        ne[1] = a.ne[1] + b.ne[1];
        break;
    default:
        break;
    }
    int32_t idx;
    sched_tensor *t = graph_add(g, name, &idx);
    if (!t)
        return -1;
    t->op = op;
    t->type = type;
    memcpy(t->ne, ne, sizeof ne);
    t->n_dims = 1;
    for (int i = 0; i < SCHED_MAX_DIMS; i++)
        if (ne[i] > 1)
            t->n_dims = i + 1;
    for (int i = 0; i < n_src; i++)
        t->src[i] = srcs[i];
    if (op == SCHED_OP_CPY) {
        /* cpy writes its destination's bytes: the result is a view of it. */
        const sched_tensor *dst = &g->tensors[srcs[1]];
        t->view_src = dst->view_src >= 0 ? dst->view_src : srcs[1];
        t->view_offs = dst->view_src >= 0 ? dst->view_offs : 0;
    }
    return idx;
}

void sched_graph_prefix_names(sched_graph *g, const char *prefix)
{
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE))
            continue;
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.15s%.48s", prefix, t->name);
        memcpy(t->name, name, sizeof name);
    }
}

int64_t sched_tensor_nelements(const sched_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

uint64_t sched_tensor_nbytes(const sched_tensor *t)
{
    return (uint64_t)sched_tensor_nelements(t) * sched_dtype_size(t->type);
}

uint64_t sched_node_flops(const sched_graph *g, const sched_tensor *t)
{
    uint64_t n = (uint64_t)sched_tensor_nelements(t);
    switch (t->op) {
    case SCHED_OP_MUL_MAT:
    case SCHED_OP_MUL_MAT_ID:      /* only the used experts: one product per (u, t) */
        return 2ull * (uint64_t)g->tensors[t->src[0]].ne[0] * n;
    case SCHED_OP_ADD:
    case SCHED_OP_MUL:
    case SCHED_OP_SCALE:
    case SCHED_OP_ALL_REDUCE:
        return n;
    case SCHED_OP_RMS_NORM:
        return 3 * n;
    case SCHED_OP_SOFTMAX:
        return 5 * n;
    case SCHED_OP_SILU:
        return 4 * n;
    case SCHED_OP_ROPE:
        return 6 * n;
    default:
        return 0;
    }
}

uint64_t sched_node_bytes(const sched_graph *g, const sched_tensor *t)
{
    if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
        return 0;
    uint64_t bytes = sched_tensor_nbytes(t);
    for (int i = 0; i < SCHED_MAX_SRC; i++) {
        if (t->src[i] < 0)
            continue;
        const sched_tensor *s = &g->tensors[t->src[i]];
        if (t->op == SCHED_OP_GET_ROWS && i == 0)
            continue;               /* only the gathered rows are read */
        if (t->op == SCHED_OP_CPY && i == 1)
            continue;               /* the destination is only written */
        if (t->op == SCHED_OP_MUL_MAT_ID && i == 0) {
            /* the experts the ids can name: at most U*T of E */
            uint64_t used = (uint64_t)(t->ne[1] * t->ne[2]);
            uint64_t n_exp = (uint64_t)s->ne[2];
            bytes += sched_tensor_nbytes(s) / n_exp * (used < n_exp ? used : n_exp);
            continue;
        }
        bytes += sched_tensor_nbytes(s);
    }
    if (t->op == SCHED_OP_GET_ROWS)
        bytes += sched_tensor_nbytes(t);
    return bytes;
}

bool sched_node_half(const sched_graph *g, const sched_tensor *t)
{
    return (t->op == SCHED_OP_MUL_MAT || t->op == SCHED_OP_MUL_MAT_ID) &&
           g->tensors[t->src[0]].type != SCHED_F32;
}

void sched_allreduce_group(const sched_graph *g, int32_t node, int *rank, int *n)
{
    int32_t group = g->tensors[node].param;
    if (g->world > 0) {             /* one rank of a multi-process job */
        *rank = g->rank;
        *n = g->world;
        return;
    }
    *rank = 0;
    *n = 0;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].op != SCHED_OP_ALL_REDUCE || g->tensors[i].param != group)
            continue;
        if (i < node)
            (*rank)++;
        (*n)++;
    }
}

sched_graph *sched_graph_copy(const sched_graph *g)
{
    sched_graph *c = sched_graph_new(g->name);
    if (!c)
        return NULL;
    c->tensors = malloc(((size_t)g->n_tensors + 1) * sizeof *c->tensors);
    if (!c->tensors) {
        free(c);
        return NULL;
    }
    memcpy(c->tensors, g->tensors, (size_t)g->n_tensors * sizeof *c->tensors);
    c->n_tensors = g->n_tensors;
    c->rank = g->rank;
    c->world = g->world;
    c->cap_tensors = g->n_tensors + 1;
    return c;
}

void sched_tensor_shape_str(const sched_tensor *t, char *buf, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < t->n_dims && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "x" : "", (long long)t->ne[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, " %s", sched_dtype_str(t->type));
}
