/*
 * backend_kernels.cu -- the kernels of the `cuda` backend: one per op of
 * real/kernels.c, the same math per element, with the work spread so that
 * a GPU is busy at ggml's sizes (issue 24: one thread per row made decode
 * of the small llama 24 ms per token).
 *
 * How each op is spread:
 *   element ops     add, mul, scale, silu, cpy, convert, concat, the local
 *                   all-reduce, rope (one thread per pair of a row),
 *                   get_rows (one thread per element): a grid-stride loop,
 *                   256 threads a block;
 *   row reductions  rms_norm and softmax: one block per row, the sums and
 *                   the maximum reduced across the block (warp shuffles,
 *                   then one value per warp in shared memory);
 *   mul_mat         one warp per output element (a dot product of K: the
 *                   lanes read consecutive elements of both rows, half2
 *                   and float2 at a time for f16 weights by f32, then a
 *                   shuffle reduction). This is the decode path (N = 1,
 *                   matrix-vector) and the batched attention products;
 *                   2-D mul_mat of f32 by f32, and of f16 weights by f32
 *                   from RCU_GEMM_MIN_N columns on, go to cuBLAS
 *                   (backend_cuda.c; rcu_split_f16 prepares the latter).
 *
 * Numbers: no fused multiply-add (built with -fmad=false); sums are
 * formed in another order than the CPU's sequential one (per lane, then
 * across lanes and warps), which moves the last bits only: far below
 * REAL_RUN_TOLERANCE at the generators' sizes. expf, powf, sinf, cosf are
 * CUDA's (within 2 ulp of the C library's). f16 and bf16 storage is
 * converted on load and store with round-to-nearest-even, as
 * real_f32_to_f16/real_f32_to_bf16 do.
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

#define WARP 32

__device__ static float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The sum (or maximum) of v over the block, in every thread. Every thread
 * of the block must call it (the row loops below are uniform per block);
 * sh holds one float per warp. */
__device__ static float block_reduce(float v, float *sh, bool max)
{
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = (blockDim.x + WARP - 1) / WARP;
    v = max ? warp_max(v) : warp_sum(v);
    __syncthreads();                /* sh may still be read by the previous call */
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : (max ? -INFINITY : 0.0f);
    return max ? warp_max(r) : warp_sum(r);
}

/* Output element e of mul_mat by one warp: sum_k a[m][k] b[n][k], with
 * a's batch dimensions broadcast over d's as real/kernels.c does. */
__global__ static void k_mul_mat(rcu_args x, int64_t n)
{
    const rcu_tensor &a = x.src[0], &b = x.src[1], &d = x.dst;
    int64_t K = a.ne[0], M = d.ne[0], N = d.ne[1], B2 = d.ne[2];
    int64_t r2 = B2 / a.ne[2] > 0 ? B2 / a.ne[2] : 1;
    int64_t r3 = d.ne[3] / a.ne[3] > 0 ? d.ne[3] / a.ne[3] : 1;
    int lane = threadIdx.x % WARP;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / WARP);
    bool h2 = a.type == RCU_F16 && b.type == RCU_F32 && K % 2 == 0 &&
              (uintptr_t)a.data % 4 == 0 && (uintptr_t)b.data % 8 == 0;
    for (int64_t e = (int64_t)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP; e < n;
         e += warps) {
        int64_t m = e % M, rest = e / M;
        int64_t nn = rest % N, i2 = (rest / N) % B2, i3 = rest / N / B2;
        int64_t a2 = i2 / r2 < a.ne[2] ? i2 / r2 : a.ne[2] - 1;
        int64_t a3 = i3 / r3 < a.ne[3] ? i3 / r3 : a.ne[3] - 1;
        int64_t ao = ((a3 * a.ne[2] + a2) * a.ne[1] + m) * K;
        int64_t bo = ((i3 * b.ne[2] + i2) * b.ne[1] + nn) * K;
        float sum = 0;
        if (h2) {                   /* rows start at even elements: 4- and 8-byte loads */
            const __half2 *ar = (const __half2 *)((const __half *)a.data + ao);
            const float2 *br = (const float2 *)((const float *)b.data + bo);
            for (int64_t k = lane; k < K / 2; k += WARP) {
                float2 av = __half22float2(ar[k]), bv = br[k];
                sum += av.x * bv.x;
                sum += av.y * bv.y;
            }
        } else {
            for (int64_t k = lane; k < K; k += WARP)
                sum += load(a, ao + k) * load(b, bo + k);
        }
        sum = warp_sum(sum);
        if (lane == 0)
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
    __shared__ float sh[WARP];
    const rcu_tensor &a = x.src[0], &d = x.dst;
    int64_t n = d.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float ss = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float v = load(a, r * n + i);
            ss += v * v;
        }
        ss = block_reduce(ss, sh, false);
        float inv = 1.0f / sqrtf(ss / (float)n + 1e-5f);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            store(d, r * n + i, load(a, r * n + i) * inv);
    }
}

/* Each thread rescales what it stored itself: no barrier between. */
__global__ static void k_softmax(rcu_args x, int64_t rows)
{
    __shared__ float sh[WARP];
    const rcu_tensor &a = x.src[0], &d = x.dst, &mask = x.src[1];
    bool has_mask = x.n_src > 1;
    int64_t n = d.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t mr = has_mask ? (r % d.ne[1]) % mask.ne[1] : 0;
        float mx = -INFINITY;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float v = load(a, r * n + i) + (has_mask ? load(mask, mr * n + i) : 0);
            mx = fmaxf(mx, v);
        }
        mx = block_reduce(mx, sh, true);
        float sum = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float v = load(a, r * n + i) + (has_mask ? load(mask, mr * n + i) : 0);
            float ev = mx == -INFINITY ? 0 : expf(v - mx);
            store(d, r * n + i, ev);
            sum += ev;
        }
        sum = block_reduce(sum, sh, false);
        float inv = sum > 0 ? 1.0f / sum : 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            store(d, r * n + i, load(d, r * n + i) * inv);
    }
}

/* Unit u: pair u % P of row u / P (P = ceil(D / 2)); the last unit of an
 * odd row copies its last element. */
__global__ static void k_rope(rcu_args x, int64_t units)
{
    const rcu_tensor &a = x.src[0], &pos = x.src[1], &d = x.dst;
    int64_t D = d.ne[0], H = d.ne[1], T = d.ne[2], P = (D + 1) / 2;
    FOR_UNITS(u, units) {
        int64_t r = u / P, i = 2 * (u % P);
        if (i + 1 >= D) {
            store(d, r * D + D - 1, load(a, r * D + D - 1));
            continue;
        }
        int64_t t = (r / H) % T;
        float p = load(pos, t % pos.ne[0]);
        float theta = p * powf(10000.0f, -(float)i / (float)D);
        float c = cosf(theta), s = sinf(theta);
        float x0 = load(a, r * D + i), x1 = load(a, r * D + i + 1);
        store(d, r * D + i, x0 * c - x1 * s);
        store(d, r * D + i + 1, x0 * s + x1 * c);
    }
}

/* One thread per element of the destination. */
__global__ static void k_get_rows(rcu_args x, int64_t n)
{
    const rcu_tensor &a = x.src[0], &idx = x.src[1], &d = x.dst;
    int64_t E = d.ne[0], V = a.ne[1] * a.ne[2] * a.ne[3];
    FOR_UNITS(e, n) {
        int64_t r = e / E, i = e % E;
        int64_t row = ((const int32_t *)idx.data)[r % nel(idx)];
        row = ((row % V) + V) % V;
        if (a.type == d.type && a.type != RCU_F32 && a.type != RCU_I32)
            ((uint16_t *)d.data)[r * E + i] = ((const uint16_t *)a.data)[row * E + i];
        else if (a.type == d.type)
            ((uint32_t *)d.data)[r * E + i] = ((const uint32_t *)a.data)[row * E + i];
        else
            store(d, r * E + i, load(a, row * E + i));
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

/* v = hi + lo, both f16: hi the nearest f16, lo the nearest to the rest. */
__global__ static void k_split_f16(const float *src, __half *hi, __half *lo, int64_t n)
{
    FOR_UNITS(e, n) {
        float v = src[e];
        __half h = __float2half_rn(v);
        hi[e] = h;
        lo[e] = __float2half_rn(v - __half2float(h));
    }
}

static unsigned grid(int64_t units, int threads)
{
    int64_t want = (units + threads - 1) / threads;
    return (unsigned)(want < 65535 ? (want > 0 ? want : 1) : 65535);
}

extern "C" int rcu_split_f16(const float *src, void *hi, void *lo, int64_t n, void *stream)
{
    if (n <= 0)
        return 0;
    k_split_f16<<<grid(n, 256), 256, 0, (cudaStream_t)stream>>>(src, (__half *)hi, (__half *)lo,
                                                               n);
    return (int)cudaGetLastError();
}

extern "C" int rcu_launch(const rcu_args *a, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int64_t n = a->dst.ne[0] * a->dst.ne[1] * a->dst.ne[2] * a->dst.ne[3];
    int64_t rows = a->dst.ne[0] ? n / a->dst.ne[0] : 0;
    if (n <= 0)
        return 0;
    /* A row's block: enough warps for its length, at most 256 threads. */
    int row_threads = a->dst.ne[0] >= 256 ? 256 : (int)((a->dst.ne[0] + WARP - 1) / WARP) * WARP;
    switch (a->op) {
    case RCU_MUL_MAT: k_mul_mat<<<grid(n * WARP, 256), 256, 0, s>>>(*a, n); break;
    case RCU_ADD:
    case RCU_MUL: k_binary<<<grid(n, 256), 256, 0, s>>>(*a, n); break;
    case RCU_SCALE:
    case RCU_SILU:
    case RCU_CPY:
    case RCU_CONVERT: k_unary<<<grid(n, 256), 256, 0, s>>>(*a, n); break;
    case RCU_RMS_NORM: k_rms_norm<<<grid(rows, 1), row_threads, 0, s>>>(*a, rows); break;
    case RCU_SOFTMAX: k_softmax<<<grid(rows, 1), row_threads, 0, s>>>(*a, rows); break;
    case RCU_ROPE: {
        int64_t units = rows * ((a->dst.ne[0] + 1) / 2);
        k_rope<<<grid(units, 256), 256, 0, s>>>(*a, units);
        break;
    }
    case RCU_GET_ROWS: k_get_rows<<<grid(n, 256), 256, 0, s>>>(*a, n); break;
    case RCU_CONCAT: k_concat<<<grid(n, 256), 256, 0, s>>>(*a, n); break;
    case RCU_ALL_REDUCE_LOCAL: k_all_reduce_local<<<grid(n, 256), 256, 0, s>>>(*a, n); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
