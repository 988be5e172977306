/*
 * values.c -- deterministic values of weights, caches and inputs.
 *
 * Every value a real run starts from is a pure function of (tensor name,
 * element, seed) for weights and caches, and of (input kind, evaluation,
 * element, seed) for user inputs, so that the reference (reference.c)
 * computes from the very same numbers without sharing memory with the
 * run. Token ids stay within the table their get_rows reads, expert ids
 * (mul_mat_id) within the experts; positions
 * count up with the evaluation; the causal mask moves with it.
 */
#include "real_int.h"

#include <math.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in [-1, 1). */
static float unit(uint64_t h) { return (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void real_fill_weight(const sched_tensor *t, void *data, uint64_t seed)
{
    uint64_t h = trace_hash(t->name, strlen(t->name)) ^ mix64(seed);
    real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, data };
    int64_t n = sched_tensor_nelements(t);
    bool norm = t->n_dims == 1 && strstr(t->name, "norm");
    float scale = (t->flags & SCHED_FLAG_CACHE) ? 0.5f : 2.0f / sqrtf((float)t->ne[0]);
    for (int64_t i = 0; i < n; i++) {
        float u = unit(mix64(h + (uint64_t)i));
        real_store_f32(&rt, i, norm ? 1.0f + 0.1f * u : (t->type == SCHED_I32 ? 0 : u * scale));
    }
}

/* Rows of the table a get_rows reads through input t; 0 when none. */
static int64_t index_range(const sched_graph *g, const sched_tensor *t)
{
    int32_t ti = (int32_t)(t - g->tensors);
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].op == SCHED_OP_GET_ROWS && g->tensors[i].src[1] == ti) {
            const sched_tensor *a = &g->tensors[g->tensors[i].src[0]];
            return a->ne[1] * a->ne[2] * a->ne[3];
        } else if (g->tensors[i].op == SCHED_OP_MUL_MAT_ID && g->tensors[i].src[2] == ti) {
            return g->tensors[g->tensors[i].src[0]].ne[2];     /* the experts */
        }
    return 0;
}

void real_fill_input(const sched_graph *g, const sched_tensor *t, void *data, uint64_t eval,
                     uint64_t seed)
{
    real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, data };
    int64_t n = sched_tensor_nelements(t);
    uint64_t h = mix64(seed ^ mix64(eval + 1));
    if (t->type == SCHED_I32) {
        int32_t *v = data;
        int64_t range = index_range(g, t);
        bool pos = ends_with(t->name, "pos");
        for (int64_t i = 0; i < n; i++) {
            if (pos)
                v[i] = (int32_t)((int64_t)eval * n + i);
            else
                v[i] = (int32_t)(mix64(h + (uint64_t)i) % (uint64_t)(range > 0 ? range : 16));
        }
        return;
    }
    if (ends_with(t->name, "kq_mask")) {
        /* Causal over a window that moves with the evaluation; cell 0 is
         * always visible so that no row is fully masked. */
        int64_t C = t->ne[0];
        for (int64_t i = 0; i < n; i++) {
            int64_t c = i % C, row = i / C;
            int64_t last = (row + (int64_t)eval) % C;
            real_store_f32(&rt, i, c <= last ? 0.0f : -INFINITY);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++)
        real_store_f32(&rt, i, unit(mix64(h + (uint64_t)i)));
}

int real_init_weights(sched_backend **backends, size_t n, sched_graph *g, uint64_t seed)
{
    (void)backends;
    (void)n;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) || t->op != SCHED_OP_NONE)
            continue;
        void *d = real_tensor_data(t);
        if (!d)
            return -1;
        real_fill_weight(t, d, seed);
    }
    return 0;
}

int real_set_inputs(sched_backend **backends, size_t n, sched_graph *g, uint64_t eval,
                    uint64_t seed)
{
    (void)backends;
    (void)n;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & SCHED_FLAG_INPUT) || t->op != SCHED_OP_NONE)
            continue;
        void *d = real_tensor_data(t);
        if (!d)
            return -1;
        real_fill_input(g, t, d, eval, seed);
    }
    return 0;
}
