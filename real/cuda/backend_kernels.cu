/*
 * backend_kernels.cu -- the f32 kernels of the `cuda` backend: one kernel
 * per op of real/kernels.c, the same math in the same order.
 *
 * Each thread computes what one chunk unit of real/kernels.c is: an
 * element (mul_mat, add, mul, scale, silu, cpy, convert, concat) or a row
 * (rms_norm, softmax, rope, get_rows), with the sums of a unit in the
 * order the CPU adds them and no fused multiply-add (built with
 * -fmad=false), so that outputs compare with the CPU reference as
 * cpustream's do. What still differs: expf, powf, sinf, cosf are CUDA's
 * (within 2 ulp of the C library's), and mul_mat of f32 x f32 goes to
 * cuBLAS (backend_cuda.c), which orders its sums its own way. f16 and bf16
 * storage is converted on load and store with round-to-nearest-even, as
 * real_f32_to_f16/real_f32_to_bf16 do.
 *
 * Plain and slow on purpose (one thread per row for row ops): the backend
 * exists to run schedules for real, not to be fast; mul_mat, where the
 * time goes, is cuBLAS when it can be.
 */
#include "backend_cuda.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

__device__ static float bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ static uint16_t f32_to_bf16(float f)
{
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);    /* quiet nan, as real_f32_to_bf16 */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

__device__ static float load(const rcu_tensor &t, int64_t e)
{
    switch (t.type) {
    case RCU_F32: return ((const float *)t.data)[e];
    case RCU_F16: return __half2float(((const __half *)t.data)[e]);
    case RCU_BF16: return bf16_to_f32(((const uint16_t *)t.data)[e]);
    case RCU_I32: return (float)((const int32_t *)t.data)[e];
    default: return 0;
    }
}

__device__ static void store(const rcu_tensor &t, int64_t e, float v)
{
    switch (t.type) {
    case RCU_F32: ((float *)t.data)[e] = v; break;
    case RCU_F16: ((__half *)t.data)[e] = __float2half_rn(v); break;
    case RCU_BF16: ((uint16_t *)t.data)[e] = f32_to_bf16(v); break;
    case RCU_I32: ((int32_t *)t.data)[e] = __float2int_rn(v); break;
    default: break;
    }
}

__device__ static int64_t nel(const rcu_tensor &t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }

#define FOR_UNITS(u, n) \
    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < (n); \
         u += (int64_t)gridDim.x * blockDim.x)

__global__ static void k_mul_mat(rcu_args x, int64_t n)
{
    const rcu_tensor &a = x.src[0], &b = x.src[1], &d = x.dst;
    int64_t K = a.ne[0], M = d.ne[0], N = d.ne[1], B2 = d.ne[2];
    int64_t r2 = B2 / a.ne[2] > 0 ? B2 / a.ne[2] : 1;
    int64_t r3 = d.ne[3] / a.ne[3] > 0 ? d.ne[3] / a.ne[3] : 1;
    FOR_UNITS(e, n) {
        int64_t m = e % M, rest = e / M;
        int64_t nn = rest % N, i2 = (rest / N) % B2, i3 = rest / N / B2;
        int64_t a2 = i2 / r2 < a.ne[2] ? i2 / r2 : a.ne[2] - 1;
        int64_t a3 = i3 / r3 < a.ne[3] ? i3 / r3 : a.ne[3] - 1;
        int64_t ao = ((a3 * a.ne[2] + a2) * a.ne[1] + m) * K;
        int64_t bo = ((i3 * b.ne[2] + i2) * b.ne[1] + nn) * K;
        float sum = 0;
        for (int64_t k = 0; k < K; k++)
            sum += load(a, ao + k) * load(b, bo + k);
        store(d, e, sum);
    }
}

__global__ static void k_binary(rcu_args x, int64_t n)
{
    const rcu_tensor &a = x.src[0], &b = x.src[1], &d = x.dst;
    bool add = x.op == RCU_ADD;
    FOR_UNITS(e, n) {
        int64_t i0 = e % d.ne[0], r = e / d.ne[0];
        int64_t i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / d.ne[1] / d.ne[2];
        int64_t be = (i0 % b.ne[0]) +
                     b.ne[0] * ((i1 % b.ne[1]) + b.ne[1] * ((i2 % b.ne[2]) + b.ne[2] * (i3 % b.ne[3])));
        float va = load(a, e), vb = load(b, be);
        store(d, e, add ? va + vb : va * vb);
    }
}

__global__ static void k_unary(rcu_args x, int64_t n)
{
    const rcu_tensor &a = x.src[0], &d = x.dst;
    float scale = x.param > 0 ? 1.0f / (float)x.param : 0.125f;
    FOR_UNITS(e, n) {
        float v = load(a, e);
        if (x.op == RCU_CONVERT && x.convert_truncate && d.type == RCU_BF16) {
            ((uint16_t *)d.data)[e] = (uint16_t)(__float_as_uint(v) >> 16);
            continue;
        }
        if (x.op == RCU_SCALE)
            v *= scale;
        else if (x.op == RCU_SILU)
            v = v / (1.0f + expf(-v));
        store(d, e, v);
    }
}

__global__ static void k_rms_norm(rcu_args x, int64_t rows)
{
    const rcu_tensor &a = x.src[0], &d = x.dst;
    int64_t n = d.ne[0];
    FOR_UNITS(r, rows) {
        float ss = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = load(a, r * n + i);
            ss += v * v;
        }
        float inv = 1.0f / sqrtf(ss / (float)n + 1e-5f);
        for (int64_t i = 0; i < n; i++)
            store(d, r * n + i, load(a, r * n + i) * inv);
    }
}

__global__ static void k_softmax(rcu_args x, int64_t rows)
{
    const rcu_tensor &a = x.src[0], &d = x.dst, &mask = x.src[1];
    bool has_mask = x.n_src > 1;
    int64_t n = d.ne[0];
    FOR_UNITS(r, rows) {
        int64_t mr = has_mask ? (r % d.ne[1]) % mask.ne[1] : 0;
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            float v = load(a, r * n + i) + (has_mask ? load(mask, mr * n + i) : 0);
            if (v > mx)
                mx = v;
        }
        float sum = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = load(a, r * n + i) + (has_mask ? load(mask, mr * n + i) : 0);
            float ev = mx == -INFINITY ? 0 : expf(v - mx);
            store(d, r * n + i, ev);
            sum += ev;
        }
        float inv = sum > 0 ? 1.0f / sum : 0;
        for (int64_t i = 0; i < n; i++)
            store(d, r * n + i, load(d, r * n + i) * inv);
    }
}

__global__ static void k_rope(rcu_args x, int64_t rows)
{
    const rcu_tensor &a = x.src[0], &pos = x.src[1], &d = x.dst;
    int64_t D = d.ne[0], H = d.ne[1], T = d.ne[2];
    FOR_UNITS(r, rows) {
        int64_t t = (r / H) % T;
        float p = load(pos, t % pos.ne[0]);
        for (int64_t i = 0; i + 1 < D; i += 2) {
            float theta = p * powf(10000.0f, -(float)i / (float)D);
            float c = cosf(theta), s = sinf(theta);
            float x0 = load(a, r * D + i), x1 = load(a, r * D + i + 1);
            store(d, r * D + i, x0 * c - x1 * s);
            store(d, r * D + i + 1, x0 * s + x1 * c);
        }
        if (D & 1)
            store(d, r * D + D - 1, load(a, r * D + D - 1));
    }
}

__global__ static void k_get_rows(rcu_args x, int64_t rows)
{
    const rcu_tensor &a = x.src[0], &idx = x.src[1], &d = x.dst;
    int64_t E = d.ne[0], V = a.ne[1] * a.ne[2] * a.ne[3];
    FOR_UNITS(r, rows) {
        int64_t row = ((const int32_t *)idx.data)[r % nel(idx)];
        row = ((row % V) + V) % V;
        for (int64_t i = 0; i < E; i++) {
            if (a.type == d.type && a.type != RCU_F32 && a.type != RCU_I32)
                ((uint16_t *)d.data)[r * E + i] = ((const uint16_t *)a.data)[row * E + i];
            else if (a.type == d.type)
                ((uint32_t *)d.data)[r * E + i] = ((const uint32_t *)a.data)[row * E + i];
            else
                store(d, r * E + i, load(a, row * E + i));
        }
    }
}

__global__ static void k_concat(rcu_args x, int64_t n)
{
    const rcu_tensor &a = x.src[0], &b = x.src[1], &d = x.dst;
    FOR_UNITS(e, n) {
        int64_t i0 = e % d.ne[0], r = e / d.ne[0];
        int64_t i1 = r % d.ne[1], i23 = r / d.ne[1];
        float v = i1 < a.ne[1] ? load(a, (i23 * a.ne[1] + i1) * d.ne[0] + i0)
                               : load(b, (i23 * b.ne[1] + i1 - a.ne[1]) * d.ne[0] + i0);
        store(d, e, v);
    }
}

/* One rank alone (n_ranks 1: a copy), or the bf16 rounding of the wire. */
__global__ static void k_all_reduce_local(rcu_args x, int64_t n)
{
    FOR_UNITS(e, n) {
        float v = load(x.src[0], e);
        if (x.bf16_wire)
            v = bf16_to_f32(f32_to_bf16(v));
        store(x.dst, e, x.bf16_wire ? bf16_to_f32(f32_to_bf16(v)) : v);
    }
}

extern "C" int rcu_launch(const rcu_args *a, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int64_t n = a->dst.ne[0] * a->dst.ne[1] * a->dst.ne[2] * a->dst.ne[3];
    bool rows = a->op == RCU_RMS_NORM || a->op == RCU_SOFTMAX || a->op == RCU_ROPE ||
                a->op == RCU_GET_ROWS;
    int64_t units = rows ? (a->dst.ne[0] ? n / a->dst.ne[0] : 0) : n;
    if (units <= 0)
        return 0;
    const int threads = rows ? 64 : 256;
    int64_t want = (units + threads - 1) / threads;
    unsigned blocks = (unsigned)(want < 65535 ? want : 65535);
    switch (a->op) {
    case RCU_MUL_MAT: k_mul_mat<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_ADD:
    case RCU_MUL: k_binary<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_SCALE:
    case RCU_SILU:
    case RCU_CPY:
    case RCU_CONVERT: k_unary<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_RMS_NORM: k_rms_norm<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_SOFTMAX: k_softmax<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_ROPE: k_rope<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_GET_ROWS: k_get_rows<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_CONCAT: k_concat<<<blocks, threads, 0, s>>>(*a, units); break;
    case RCU_ALL_REDUCE_LOCAL: k_all_reduce_local<<<blocks, threads, 0, s>>>(*a, units); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
