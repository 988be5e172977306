/*
 * reference.c -- the reference run, and the error of outputs against it.
 *
 * A run on real backends must be comparable with a reference: every value
 * it starts from is a pure function of names, evaluations and the seed
 * (values.c), so the reference gives its own copy of the graph the same
 * weights, caches and inputs, and runs every node of the whole graph in
 * order with the same kernels: on one thread, or, given a pool
 * (real_ref_set_pool), each node chunked over the pool's threads as the
 * cpu backend chunks it. Since a kernel's result does not depend on how it
 * is chunked, a correctly synchronised run matches it exactly either way,
 * and any difference comes from an ordering bug (or a kernel bug: the
 * kernel tests rule that out). The pool is the difference between a
 * reference that keeps up with a GPU and one that does not: the whole
 * graph of a 2048-token prompt is hundreds of GFLOP (issue 24).
 */
#include "real_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct real_ref {
    sched_graph *g;
    uint64_t seed;
    void **data;            /* per tensor: its bytes (views point into their source) */
    void **owned;
    float **f32;            /* per tensor: f32 copy made on request */
    sched_allreduce allreduce;  /* as asked (picked per group for the CPU devices) */
    int64_t bf16_min;           /* 0: the strategy's threshold */
    real_pool *pool;            /* NULL: one thread; not owned */
    /* Scratch of real_ref_eval, per tensor. */
    bool *done;
    uint8_t *pend;          /* of a base tensor: PEND_R / PEND_W by a deferred node */
};

#define PEND_R 1u
#define PEND_W 2u

real_ref *real_ref_new(sched_graph *g, uint64_t seed)
{
    return real_ref_new_shared(g, seed, NULL);
}

real_ref *real_ref_new_shared(sched_graph *g, uint64_t seed, real_ref *share)
{
    real_ref *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->g = g;
    r->seed = seed;
    size_t nt = (size_t)g->n_tensors;
    r->data = calloc(nt, sizeof *r->data);
    r->owned = calloc(nt, sizeof *r->owned);
    r->f32 = calloc(nt, sizeof *r->f32);
    r->done = calloc(nt ? nt : 1, sizeof *r->done);
    r->pend = calloc(nt ? nt : 1, sizeof *r->pend);
    if (!r->data || !r->owned || !r->f32 || !r->done || !r->pend)
        goto fail;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (t->view_src >= 0)
            continue;
        if (share && (t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE))) {
            int32_t j = sched_graph_find(share->g, t->name);
            if (j >= 0 && share->data[j] &&
                sched_tensor_nbytes(&share->g->tensors[j]) == sched_tensor_nbytes(t)) {
                r->data[i] = share->data[j];
                continue;
            }
        }
        r->owned[i] = calloc(1, sched_tensor_nbytes(t) + 64);
        if (!r->owned[i])
            goto fail;
        r->data[i] = r->owned[i];
        if (t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE))
            real_fill_weight(t, r->data[i], seed);
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (t->view_src >= 0)
            r->data[i] = (char *)r->data[t->view_src] + t->view_offs;
    }
    return r;
fail:
    real_ref_free(r);
    return NULL;
}

void real_ref_free(real_ref *r)
{
    if (!r)
        return;
    for (int32_t i = 0; r->owned && i < r->g->n_tensors; i++)
        free(r->owned[i]);
    for (int32_t i = 0; r->f32 && i < r->g->n_tensors; i++)
        free(r->f32[i]);
    free(r->owned);
    free(r->f32);
    free(r->data);
    free(r->done);
    free(r->pend);
    free(r);
}

void real_ref_set_allreduce(real_ref *r, const char *strategy, int64_t bf16_min)
{
    int a = strategy ? sched_allreduce_parse(strategy) : SCHED_ALLREDUCE_RING;
    r->allreduce = a < 0 ? SCHED_ALLREDUCE_RING : (sched_allreduce)a;
    r->bf16_min = bf16_min;
}

void real_ref_set_pool(real_ref *r, real_pool *pool) { r->pool = pool; }

typedef struct ref_job {
    const real_kernel_args *a;
    int failed;                     /* written with atomics: any thread may fail */
} ref_job;

static void ref_chunk(void *arg, int ith, int nth)
{
    ref_job *j = arg;
    if (real_kernel_run(j->a, ith, nth) != REAL_OK)
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

/* Runs kernel a, on the pool's threads when r has one. REAL_OK or not. */
static real_status ref_kernel(const real_ref *r, const real_kernel_args *a)
{
    if (!r->pool)
        return real_kernel_run(a, 0, 1);
    ref_job j = { a, 0 };
    real_pool_run(r->pool, ref_chunk, &j);
    return __atomic_load_n(&j.failed, __ATOMIC_RELAXED) ? REAL_EUNSUPPORTED : REAL_OK;
}

static real_tensor ref_tensor(const real_ref *r, int32_t i)
{
    const sched_tensor *t = &r->g->tensors[i];
    return (real_tensor){ t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, r->data[i] };
}

/* The tensor whose bytes t names (itself unless a view). */
static int32_t base_of(const sched_graph *g, int32_t i)
{
    while (g->tensors[i].view_src >= 0)
        i = g->tensors[i].view_src;
    return i;
}

/* Runs node i (not an all_reduce of more than one rank). */
static int ref_node(real_ref *r, int32_t i)
{
    const sched_tensor *t = &r->g->tensors[i];
    real_kernel_args a = { .op = t->op, .param = t->param };
    a.dst = ref_tensor(r, i);
    for (int k = 0; k < SCHED_MAX_SRC; k++) {
        if (t->src[k] < 0)
            continue;
        a.src[k] = ref_tensor(r, t->src[k]);
        a.n_src = k + 1;
    }
    if (t->op == SCHED_OP_ALL_REDUCE) {
        const sched_tensor *src = &r->g->tensors[t->src[0]];
        sched_allreduce algo = sched_allreduce_pick(r->allreduce, NULL, 1, src->type);
        a.bf16_wire = sched_tensor_nelements(src) >= sched_allreduce_bf16_from(algo, 1, r->bf16_min);
    }
    return ref_kernel(r, &a) == REAL_OK ? 0 : -1;
}

/* An expanded all-reduce (sched_allreduce_program), step by step in its
 * order, with the devices' kernels: the accumulators are the members'
 * tensors; each rank has an inbox (f32, or bf16 when the group sends bf16)
 * and a bf16 wire. Copies move bytes; adds and conversions are the add
 * and convert kernels, so the rounding is the devices'. */
static int ref_steps(real_ref *r, sched_allreduce algo, bool bf16, const int32_t *members,
                     const real_tensor *srcs, int n)
{
    sched_ar_step steps[SCHED_AR_MAX_STEPS];
    int n_steps = sched_allreduce_program(algo, n, bf16, steps);
    real_tensor acc[REAL_MAX_BACKENDS], inbox[REAL_MAX_BACKENDS], wire[REAL_MAX_BACKENDS];
    void *mem[2 * REAL_MAX_BACKENDS] = { NULL };
    int rc = 1;
    for (int k = 0; k < n; k++) {
        acc[k] = ref_tensor(r, members[k]);
        inbox[k] = acc[k];
        wire[k] = acc[k];
        inbox[k].type = bf16 ? SCHED_BF16 : SCHED_F32;
        wire[k].type = SCHED_BF16;
        size_t bytes = (size_t)sched_tensor_nelements(&r->g->tensors[members[k]]) * sizeof(float);
        inbox[k].data = mem[2 * k] = calloc(1, bytes);
        wire[k].data = mem[2 * k + 1] = calloc(1, bytes);
        if (!inbox[k].data || !wire[k].data)
            rc = -1;
    }
    for (int k = 0; k < n_steps && rc == 1; k++) {
        int a = steps[k].rank, p = steps[k].peer;
        size_t ne = (size_t)sched_tensor_nelements(&r->g->tensors[members[a]]);
        real_kernel_args x = { .op = SCHED_OP_NONE };
        switch ((sched_ar_kind)steps[k].kind) {
        case SCHED_AR_LOCAL:
            memmove(acc[a].data, srcs[a].data, ne * sizeof(float));
            break;
        case SCHED_AR_SEND:
        case SCHED_AR_SEND_BLOCKING:
            if (bf16)
                memcpy(inbox[p].data, wire[a].data, ne * sizeof(uint16_t));
            else
                memcpy(inbox[p].data, acc[a].data, ne * sizeof(float));
            break;
        case SCHED_AR_PUT:
            memcpy(acc[p].data, acc[a].data, ne * sizeof(float));
            break;
        case SCHED_AR_ADD:
            x = (real_kernel_args){ .op = SCHED_OP_ADD, .dst = acc[a], .n_src = 2 };
            x.src[0] = acc[a];
            x.src[1] = inbox[a];
            break;
        case SCHED_AR_TO_BF16:
            x = (real_kernel_args){ .op = SCHED_OP_CONVERT, .param = SCHED_CONVERT_TRUNCATE,
                                    .dst = wire[a], .n_src = 1 };
            x.src[0] = acc[a];
            break;
        case SCHED_AR_WAIT_FREE:
        case SCHED_AR_FREE:
        case SCHED_AR_SYNC:
            break;              /* orderings: one thread has them */
        }
        if (x.op != SCHED_OP_NONE && ref_kernel(r, &x) != REAL_OK)
            rc = -1;
    }
    for (int k = 0; k < 2 * n; k++)
        free(mem[k]);
    return rc;
}

/* Whether every member of node i's all_reduce group has its source; if so,
 * runs them all (each the sum of every member's source in rank order, i.e.
 * graph order) and marks them done. 1 ran, 0 not ready, -1 error. */
static int ref_group(real_ref *r, int32_t i)
{
    const sched_graph *g = r->g;
    int32_t group = g->tensors[i].param;
    int32_t members[REAL_MAX_BACKENDS];
    real_tensor srcs[REAL_MAX_BACKENDS];
    int n = 0;
    for (int32_t k = 0; k < g->n_tensors; k++) {
        const sched_tensor *t = &g->tensors[k];
        if (t->op != SCHED_OP_ALL_REDUCE || t->param != group)
            continue;
        if (n == REAL_MAX_BACKENDS)
            return -1;
        int32_t src = base_of(g, t->src[0]);
        if (!r->done[src] || (r->pend[src] & PEND_W))
            return 0;
        members[n] = k;
        srcs[n++] = ref_tensor(r, t->src[0]);
    }
    const sched_tensor *t0 = &g->tensors[members[0]];
    int64_t ne = sched_tensor_nelements(&g->tensors[t0->src[0]]);
    /* The CPU devices are no CUDA or SYCL devices: auto picks as for them. */
    sched_allreduce algo = sched_allreduce_pick(r->allreduce, NULL, n, g->tensors[t0->src[0]].type);
    bool bf16 = ne >= sched_allreduce_bf16_from(algo, n, r->bf16_min);
    if (n > 1 && sched_allreduce_expanded(algo)) {
        int rc = ref_steps(r, algo, bf16, members, srcs, n);
        for (int m = 0; m < n; m++)
            r->done[members[m]] = true;
        return rc;
    }
    for (int m = 0; m < n; m++) {
        const sched_tensor *t = &g->tensors[members[m]];
        real_kernel_args a = { .op = t->op, .param = t->param, .ranks = srcs, .n_ranks = n };
        a.dst = ref_tensor(r, members[m]);
        a.src[0] = srcs[m];
        a.n_src = 1;
        a.bf16_wire = bf16;
        if (ref_kernel(r, &a) != REAL_OK)
            return -1;
        r->done[members[m]] = true;
    }
    return 1;
}

/*
 * Evaluation order. Nodes run in graph order, except that an all_reduce
 * runs only once every rank of its group has its source, and then all of
 * the group's ranks run at once (in a tensor-split graph rank 0's
 * all_reduce and the nodes after it come before rank 1's part). A node
 * that cannot run yet is deferred, and so is every later node that reads
 * bytes a deferred node writes, or writes bytes a deferred node reads or
 * writes (a cpy into the KV cache); passes repeat until all nodes ran.
 * A graph without all_reduce runs in one pass, in graph order.
 */
int real_ref_eval(real_ref *r, uint64_t eval)
{
    sched_graph *g = r->g;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if ((t->flags & SCHED_FLAG_INPUT) && t->op == SCHED_OP_NONE)
            real_fill_input(g, t, r->data[i], eval, r->seed);
        r->done[i] = t->op == SCHED_OP_NONE || sched_op_is_view(t->op);
    }
    for (int32_t left = g->n_tensors;;) {
        memset(r->pend, 0, (size_t)g->n_tensors * sizeof *r->pend);
        int32_t ran = 0, remaining = 0;
        for (int32_t i = 0; i < g->n_tensors; i++) {
            if (r->done[i])
                continue;
            const sched_tensor *t = &g->tensors[i];
            int32_t wb[2] = { base_of(g, i), -1 };
            if (t->op == SCHED_OP_CPY && t->src[1] >= 0)
                wb[1] = base_of(g, t->src[1]);
            bool ready = true;
            for (int k = 0; k < SCHED_MAX_SRC; k++) {
                if (t->src[k] < 0)
                    continue;
                int32_t b = base_of(g, t->src[k]);
                if (!r->done[b] || (r->pend[b] & PEND_W))
                    ready = false;
            }
            for (int k = 0; k < 2; k++)
                if (wb[k] >= 0 && r->pend[wb[k]])
                    ready = false;
            int rc = 0;
            if (ready && t->op == SCHED_OP_ALL_REDUCE)
                rc = ref_group(r, i);
            else if (ready)
                rc = ref_node(r, i) == 0 ? 1 : -1;
            if (rc < 0)
                return -1;
            if (rc > 0) {
                r->done[i] = true;
                ran++;
                continue;
            }
            remaining++;
            for (int k = 0; k < SCHED_MAX_SRC; k++)
                if (t->src[k] >= 0)
                    r->pend[base_of(g, t->src[k])] |= PEND_R;
            for (int k = 0; k < 2; k++)
                if (wb[k] >= 0)
                    r->pend[wb[k]] |= PEND_W;
        }
        if (remaining == 0)
            break;
        if (ran == 0 || --left < 0)
            return -1;              /* a group that can never complete */
    }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        free(r->f32[i]);
        r->f32[i] = NULL;
    }
    return 0;
}

const float *real_ref_tensor(const real_ref *r, const char *name, size_t *n)
{
    int32_t i = sched_graph_find(r->g, name);
    if (i < 0)
        return NULL;
    const sched_tensor *t = &r->g->tensors[i];
    int64_t ne = sched_tensor_nelements(t);
    if (!r->f32[i]) {
        r->f32[i] = malloc((size_t)ne * sizeof(float));
        if (!r->f32[i])
            return NULL;
        real_tensor rt = { t->type, { t->ne[0], t->ne[1], t->ne[2], t->ne[3] }, r->data[i] };
        for (int64_t e = 0; e < ne; e++)
            r->f32[i][e] = real_load_f32(&rt, e);
    }
    if (n)
        *n = (size_t)ne;
    return r->f32[i];
}

void real_compare_outputs(const float *out, const float *ref, size_t n, real_error *e)
{
    for (size_t i = 0; i < n; i++) {
        bool na = isnan(out[i]), nb = isnan(ref[i]);
        e->n++;
        if (na != nb) {
            e->n_nan++;
            continue;
        }
        if (na)
            continue;
        double d = fabs((double)out[i] - (double)ref[i]);
        if (isinf(out[i]) && out[i] == ref[i])
            d = 0;
        if (d > e->max_abs)
            e->max_abs = d;
        if (fabs((double)ref[i]) > e->max_ref && !isinf(ref[i]))
            e->max_ref = fabs((double)ref[i]);
    }
    e->max_rel = e->max_ref > 0 ? e->max_abs / e->max_ref : e->max_abs;
}
