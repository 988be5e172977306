/*
 * kernels.c -- f32 kernels for every op of sched/, chunked for a pool.
 *
 * Data model. A tensor of sched/ is contiguous in its shape (ne[0] is the
 * row length); views, reshapes and permutes name bytes of their source and
 * move none, so a kernel reads each source as a dense array of its shape.
 * Storage may be f32, f16, bf16 or i32; kernels load every element as f32
 * and store the result in the destination's type (round to nearest even).
 *
 * Semantics (ggml's, where sched/ leaves them open):
 *   mul_mat(a [K,M,A2,A3], b [K,N,B2,B3]) -> [M,N,B2,B3]:
 *       d[m,n,i2,i3] = sum_k a[k,m,i2/(B2/A2),i3/(B3/A3)] * b[k,n,i2,i3]
 *       (a broadcast over b's batch: grouped-query attention), summed in
 *       k order in f32.
 *   add, mul: b repeats to a's shape.       scale: x * 0.125 (1/param if param > 0).
 *   rms_norm: x / sqrt(mean(x^2) + 1e-5) per row.
 *   softmax(a [, mask]): exp(x + mask - max) / sum per row; mask row i1 % mask.ne[1].
 *   silu: x / (1 + exp(-x)).
 *   rope(a [D,H,T], pos [T] i32): pairs (x[2i], x[2i+1]) rotated by
 *       pos[t] * 10000^(-2i/D) (ggml's normal mode).
 *   get_rows(a [E,V], idx [R] i32) -> [E,R]: row r = a row (idx[r] mod V).
 *   cpy(a, b): b's bytes <- a's elements in b's type.  convert: to its type
 *       (param SCHED_CONVERT_TRUNCATE: to bf16 by truncation).
 *   concat(a, b): along dimension 1.
 *   mul_mat_id(a [K,M,E], b [K,U or 1,T], ids [U,T] i32) -> [M,U,T]:
 *       d[m,u,t] = sum_k a[k,m,ids[u,t] mod E] * b[k,u (or 0),t]: each token
 *       through its U experts (ggml's MoE), summed in k order in f32.
 *   all_reduce: the sum of every rank's source, in rank order (f32); with
 *               bf16_wire each source and the sum rounded to bf16.
 *
 * Chunks. Thread ith of nth writes one contiguous range of the
 * destination: whole rows for the row ops (rms_norm, softmax, rope,
 * get_rows), elements for the rest (a mul_mat element is one dot product,
 * so a decode matmul with one column still splits over its rows). Every
 * element is computed by exactly one thread in a fixed order, so results
 * do not depend on the number of threads: a run on the pool equals the
 * sequential reference bit for bit.
 */
#include "real.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Half precision.                                                     */

float real_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {                    /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t real_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff)                /* inf, nan */
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {                   /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++;                     /* may carry into the exponent: correct */
    return (uint16_t)half;
}

float real_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t real_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);    /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* f16 -> f32 by table: the matmul inner loop converts every weight. */
static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_table_init(void)
{
    for (uint32_t i = 0; i < 65536; i++)
        f16_table[i] = real_f16_to_f32((uint16_t)i);
}

float real_load_f32(const real_tensor *t, int64_t e)
{
    switch (t->type) {
    case SCHED_F32: return ((const float *)t->data)[e];
    case SCHED_F16: return real_f16_to_f32(((const uint16_t *)t->data)[e]);
    case SCHED_BF16: return real_bf16_to_f32(((const uint16_t *)t->data)[e]);
    case SCHED_I32: return (float)((const int32_t *)t->data)[e];
    default: return 0;
    }
}

void real_store_f32(const real_tensor *t, int64_t e, float v)
{
    switch (t->type) {
    case SCHED_F32: ((float *)t->data)[e] = v; break;
    case SCHED_F16: ((uint16_t *)t->data)[e] = real_f32_to_f16(v); break;
    case SCHED_BF16: ((uint16_t *)t->data)[e] = real_f32_to_bf16(v); break;
    case SCHED_I32: ((int32_t *)t->data)[e] = (int32_t)lrintf(v); break;
    default: break;
    }
}

/* ------------------------------------------------------------------ */
/* Chunks.                                                             */

static int64_t nelements(const real_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

static bool row_op(sched_op op)
{
    return op == SCHED_OP_RMS_NORM || op == SCHED_OP_SOFTMAX || op == SCHED_OP_ROPE ||
           op == SCHED_OP_GET_ROWS;
}

/* Units of work: rows or elements; returns their count and size. */
static int64_t units(const real_kernel_args *a, int64_t *per_unit)
{
    int64_t n = nelements(&a->dst);
    if (row_op(a->op)) {
        *per_unit = a->dst.ne[0];
        return n / a->dst.ne[0];
    }
    *per_unit = 1;
    return n;
}

static void unit_range(const real_kernel_args *a, int ith, int nth, int64_t *u0, int64_t *u1)
{
    int64_t per;
    int64_t nu = units(a, &per);
    *u0 = nu * ith / nth;
    *u1 = nu * (ith + 1) / nth;
}

void real_kernel_chunk(const real_kernel_args *a, int ith, int nth, uint64_t *lo, uint64_t *hi)
{
    int64_t per, u0, u1;
    units(a, &per);
    unit_range(a, ith, nth, &u0, &u1);
    size_t es = sched_dtype_size(a->dst.type);
    *lo = (uint64_t)(u0 * per) * es;
    *hi = (uint64_t)(u1 * per) * es;
}

/* ------------------------------------------------------------------ */
/* Kernels: each computes elements [e0, e1) or rows [r0, r1).          */

static float dot_row(const real_tensor *a, int64_t ao, const real_tensor *b, int64_t bo, int64_t K)
{
    float sum = 0;
    if (a->type == SCHED_F16 && b->type == SCHED_F32) {
        const uint16_t *x = (const uint16_t *)a->data + ao;
        const float *y = (const float *)b->data + bo;
        for (int64_t k = 0; k < K; k++)
            sum += f16_table[x[k]] * y[k];
    } else if (a->type == SCHED_F32 && b->type == SCHED_F32) {
        const float *x = (const float *)a->data + ao;
        const float *y = (const float *)b->data + bo;
        for (int64_t k = 0; k < K; k++)
            sum += x[k] * y[k];
    } else {
        for (int64_t k = 0; k < K; k++)
            sum += real_load_f32(a, ao + k) * real_load_f32(b, bo + k);
    }
    return sum;
}

static void k_mul_mat(const real_kernel_args *x, int64_t e0, int64_t e1)
{
    const real_tensor *a = &x->src[0], *b = &x->src[1], *d = &x->dst;
    int64_t K = a->ne[0], M = d->ne[0], N = d->ne[1], B2 = d->ne[2];
    int64_t r2 = B2 / a->ne[2] > 0 ? B2 / a->ne[2] : 1;
    int64_t r3 = d->ne[3] / a->ne[3] > 0 ? d->ne[3] / a->ne[3] : 1;
    for (int64_t e = e0; e < e1; e++) {
        int64_t m = e % M, rest = e / M;
        int64_t n = rest % N, i2 = (rest / N) % B2, i3 = rest / N / B2;
        int64_t a2 = i2 / r2 < a->ne[2] ? i2 / r2 : a->ne[2] - 1;
        int64_t a3 = i3 / r3 < a->ne[3] ? i3 / r3 : a->ne[3] - 1;
        int64_t ao = ((a3 * a->ne[2] + a2) * a->ne[1] + m) * K;
        int64_t bo = ((i3 * b->ne[2] + i2) * b->ne[1] + n) * K;
        real_store_f32(d, e, dot_row(a, ao, b, bo, K));
    }
}

static void k_mul_mat_id(const real_kernel_args *x, int64_t e0, int64_t e1)
{
    const real_tensor *a = &x->src[0], *b = &x->src[1], *ids = &x->src[2], *d = &x->dst;
    int64_t K = a->ne[0], M = d->ne[0], U = d->ne[1], E = a->ne[2];
    for (int64_t e = e0; e < e1; e++) {
        int64_t m = e % M, u = (e / M) % U, t = e / M / U;
        int32_t id = ((const int32_t *)ids->data)[t * ids->ne[0] + u];
        int64_t ex = ((int64_t)id % E + E) % E;
        int64_t ao = (ex * a->ne[1] + m) * K;
        int64_t bo = (t * b->ne[1] + (b->ne[1] == 1 ? 0 : u)) * K;
        real_store_f32(d, e, dot_row(a, ao, b, bo, K));
    }
}

static void k_binary(const real_kernel_args *x, int64_t e0, int64_t e1)
{
    const real_tensor *a = &x->src[0], *b = &x->src[1], *d = &x->dst;
    bool add = x->op == SCHED_OP_ADD;
    for (int64_t e = e0; e < e1; e++) {
        int64_t i0 = e % d->ne[0], r = e / d->ne[0];
        int64_t i1 = r % d->ne[1], i2 = (r / d->ne[1]) % d->ne[2], i3 = r / d->ne[1] / d->ne[2];
        int64_t be = (i0 % b->ne[0]) +
                     b->ne[0] * ((i1 % b->ne[1]) + b->ne[1] * ((i2 % b->ne[2]) + b->ne[2] * (i3 % b->ne[3])));
        float va = real_load_f32(a, e), vb = real_load_f32(b, be);
        real_store_f32(d, e, add ? va + vb : va * vb);
    }
}

static void k_unary(const real_kernel_args *x, int64_t e0, int64_t e1)
{
    const real_tensor *a = &x->src[0], *d = &x->dst;
    float scale = x->param > 0 ? 1.0f / (float)x->param : 0.125f;
    for (int64_t e = e0; e < e1; e++) {
        float v = real_load_f32(a, e);
        if (x->op == SCHED_OP_CONVERT && x->param == SCHED_CONVERT_TRUNCATE &&
            d->type == SCHED_BF16) {
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            ((uint16_t *)d->data)[e] = (uint16_t)(bits >> 16);
            continue;
        }
        switch (x->op) {
        case SCHED_OP_SCALE: v *= scale; break;
        case SCHED_OP_SILU: v = v / (1.0f + expf(-v)); break;
        default: break;             /* cpy, convert */
        }
        real_store_f32(d, e, v);
    }
}

static void k_rms_norm(const real_kernel_args *x, int64_t r0, int64_t r1)
{
    const real_tensor *a = &x->src[0], *d = &x->dst;
    int64_t n = d->ne[0];
    for (int64_t r = r0; r < r1; r++) {
        float ss = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = real_load_f32(a, r * n + i);
            ss += v * v;
        }
        float inv = 1.0f / sqrtf(ss / (float)n + 1e-5f);
        for (int64_t i = 0; i < n; i++)
            real_store_f32(d, r * n + i, real_load_f32(a, r * n + i) * inv);
    }
}

static void k_softmax(const real_kernel_args *x, int64_t r0, int64_t r1)
{
    const real_tensor *a = &x->src[0], *d = &x->dst;
    const real_tensor *mask = x->n_src > 1 ? &x->src[1] : NULL;
    int64_t n = d->ne[0];
    for (int64_t r = r0; r < r1; r++) {
        int64_t mr = mask ? (r % d->ne[1]) % mask->ne[1] : 0;
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            float v = real_load_f32(a, r * n + i) + (mask ? real_load_f32(mask, mr * n + i) : 0);
            if (v > mx)
                mx = v;
        }
        float sum = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = real_load_f32(a, r * n + i) + (mask ? real_load_f32(mask, mr * n + i) : 0);
            float ev = mx == -INFINITY ? 0 : expf(v - mx);
            real_store_f32(d, r * n + i, ev);
            sum += ev;
        }
        float inv = sum > 0 ? 1.0f / sum : 0;
        for (int64_t i = 0; i < n; i++)
            real_store_f32(d, r * n + i, real_load_f32(d, r * n + i) * inv);
    }
}

static void k_rope(const real_kernel_args *x, int64_t r0, int64_t r1)
{
    const real_tensor *a = &x->src[0], *pos = &x->src[1], *d = &x->dst;
    int64_t D = d->ne[0], H = d->ne[1], T = d->ne[2];
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = (r / H) % T;
        float p = real_load_f32(pos, t % pos->ne[0]);
        for (int64_t i = 0; i + 1 < D; i += 2) {
            float theta = p * powf(10000.0f, -(float)i / (float)D);
            float c = cosf(theta), s = sinf(theta);
            float x0 = real_load_f32(a, r * D + i), x1 = real_load_f32(a, r * D + i + 1);
            real_store_f32(d, r * D + i, x0 * c - x1 * s);
            real_store_f32(d, r * D + i + 1, x0 * s + x1 * c);
        }
        if (D & 1)
            real_store_f32(d, r * D + D - 1, real_load_f32(a, r * D + D - 1));
    }
}

static void k_get_rows(const real_kernel_args *x, int64_t r0, int64_t r1)
{
    const real_tensor *a = &x->src[0], *idx = &x->src[1], *d = &x->dst;
    int64_t E = d->ne[0], V = a->ne[1] * a->ne[2] * a->ne[3];
    size_t es = sched_dtype_size(d->type);
    for (int64_t r = r0; r < r1; r++) {
        int64_t row = ((const int32_t *)idx->data)[r % nelements(idx)];
        row = ((row % V) + V) % V;
        if (a->type == d->type)
            memcpy((char *)d->data + (size_t)(r * E) * es, (const char *)a->data + (size_t)(row * E) * es,
                   (size_t)E * es);
        else
            for (int64_t i = 0; i < E; i++)
                real_store_f32(d, r * E + i, real_load_f32(a, row * E + i));
    }
}

static void k_concat(const real_kernel_args *x, int64_t e0, int64_t e1)
{
    const real_tensor *a = &x->src[0], *b = &x->src[1], *d = &x->dst;
    for (int64_t e = e0; e < e1; e++) {
        int64_t i0 = e % d->ne[0], r = e / d->ne[0];
        int64_t i1 = r % d->ne[1], i23 = r / d->ne[1];
        float v = i1 < a->ne[1] ? real_load_f32(a, (i23 * a->ne[1] + i1) * d->ne[0] + i0)
                                : real_load_f32(b, (i23 * b->ne[1] + i1 - a->ne[1]) * d->ne[0] + i0);
        real_store_f32(d, e, v);
    }
}

static float bf16_round(float v) { return real_bf16_to_f32(real_f32_to_bf16(v)); }

static void k_all_reduce(const real_kernel_args *x, int64_t e0, int64_t e1)
{
    for (int64_t e = e0; e < e1; e++) {
        float v = 0;
        if (x->ranks && x->n_ranks > 0) {
            for (int r = 0; r < x->n_ranks; r++) {
                float c = real_load_f32(&x->ranks[r], e);
                v += x->bf16_wire ? bf16_round(c) : c;
            }
        } else {
            v = real_load_f32(&x->src[0], e);
            if (x->bf16_wire)
                v = bf16_round(v);
        }
        real_store_f32(&x->dst, e, x->bf16_wire ? bf16_round(v) : v);
    }
}

static bool float_type(sched_dtype t) { return t == SCHED_F32 || t == SCHED_F16 || t == SCHED_BF16; }

bool real_kernel_supports(const sched_graph *g, const sched_tensor *t)
{
    if (t->op == SCHED_OP_NONE || sched_op_is_view(t->op))
        return true;
    for (int i = 0; i < SCHED_MAX_SRC; i++) {
        if (t->src[i] < 0)
            continue;
        sched_dtype st = g->tensors[t->src[i]].type;
        bool index = ((t->op == SCHED_OP_ROPE || t->op == SCHED_OP_GET_ROWS) && i == 1) ||
                     (t->op == SCHED_OP_MUL_MAT_ID && i == 2);
        if (index ? st != SCHED_I32 : !(float_type(st) || (t->op == SCHED_OP_GET_ROWS && st == SCHED_I32)))
            return false;
    }
    return t->op < SCHED_OP_COUNT;
}

real_status real_kernel_run(const real_kernel_args *a, int ith, int nth)
{
    pthread_once(&f16_once, f16_table_init);
    int64_t u0, u1;
    unit_range(a, ith, nth, &u0, &u1);
    if (u0 >= u1)
        return REAL_OK;
    switch (a->op) {
    case SCHED_OP_NONE:
    case SCHED_OP_VIEW:
    case SCHED_OP_RESHAPE:
    case SCHED_OP_PERMUTE:
        return REAL_OK;
    case SCHED_OP_MUL_MAT: k_mul_mat(a, u0, u1); return REAL_OK;
    case SCHED_OP_MUL_MAT_ID: k_mul_mat_id(a, u0, u1); return REAL_OK;
    case SCHED_OP_ADD:
    case SCHED_OP_MUL: k_binary(a, u0, u1); return REAL_OK;
    case SCHED_OP_SCALE:
    case SCHED_OP_SILU:
    case SCHED_OP_CPY:
    case SCHED_OP_CONVERT: k_unary(a, u0, u1); return REAL_OK;
    case SCHED_OP_RMS_NORM: k_rms_norm(a, u0, u1); return REAL_OK;
    case SCHED_OP_SOFTMAX: k_softmax(a, u0, u1); return REAL_OK;
    case SCHED_OP_ROPE: k_rope(a, u0, u1); return REAL_OK;
    case SCHED_OP_GET_ROWS: k_get_rows(a, u0, u1); return REAL_OK;
    case SCHED_OP_CONCAT: k_concat(a, u0, u1); return REAL_OK;
    case SCHED_OP_ALL_REDUCE: k_all_reduce(a, u0, u1); return REAL_OK;
    default: return REAL_EUNSUPPORTED;
    }
}
