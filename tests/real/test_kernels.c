/*
 * test_kernels.c -- every kernel against a naive reference on random inputs.
 *
 * The references below compute in double, straight from the definitions in
 * real/kernels.c. Each kernel runs in 3 chunks (as 3 pool threads would).
 * Tolerances: f32 results within 1e-5 relative (|d| <= 1e-5 * scale + 1e-6,
 * scale = the magnitude of the terms summed); f16/bf16 results within
 * one rounding of the storage type (2^-10 and 2^-7 relative). Half
 * conversions are exact: every f16 round-trips, known values map to their
 * bit patterns, rounding is to nearest even.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "real/real.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static real_tensor mk(sched_dtype type, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    real_tensor t = { type, { n0, n1, n2, n3 }, NULL };
    int64_t n = n0 * n1 * n2 * n3;
    t.data = calloc((size_t)n, sched_dtype_size(type));
    for (int64_t i = 0; i < n; i++)
        real_store_f32(&t, i, frand());
    return t;
}

static int64_t nel(const real_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

static void run3(real_kernel_args *a)
{
    uint64_t prev_hi = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t lo, hi;
        real_kernel_chunk(a, i, 3, &lo, &hi);
        assert_int_equal(lo, prev_hi);     /* contiguous, disjoint */
        prev_hi = hi;
        assert_int_equal(real_kernel_run(a, i, 3), REAL_OK);
    }
    assert_int_equal(prev_hi, (uint64_t)nel(&a->dst) * sched_dtype_size(a->dst.type));
}

static void expect_close(const real_tensor *d, const double *ref, const double *scale)
{
    double rtol = d->type == SCHED_F32 ? 1e-5 : d->type == SCHED_F16 ? 1.0 / 1024 : 1.0 / 128;
    for (int64_t i = 0; i < nel(d); i++) {
        double got = real_load_f32(d, i), want = ref[i];
        double tol = rtol * (scale ? scale[i] : fabs(want)) + (d->type == SCHED_F32 ? 1e-6 : rtol * fabs(want) + 1e-7);
        if (!(fabs(got - want) <= tol)) {
            print_error("element %lld: got %.9g want %.9g (tol %.3g)\n", (long long)i, got, want, tol);
            fail();
        }
    }
}

static void freet(real_tensor *t) { free(t->data); t->data = NULL; }

static void test_kernels_mul_mat_broadcasts_batches(void **state)
{
    (void)state;
    sched_dtype atypes[3] = { SCHED_F32, SCHED_F16, SCHED_BF16 };
    for (int ty = 0; ty < 3; ty++) {
        int64_t K = 37, M = 5, N = 3;
        real_tensor a = mk(atypes[ty], K, M, 2, 1), b = mk(SCHED_F32, K, N, 4, 1);
        real_tensor d = mk(SCHED_F32, M, N, 4, 1);
        real_kernel_args x = { .op = SCHED_OP_MUL_MAT, .dst = d, .src = { a, b }, .n_src = 2 };
        run3(&x);
        double ref[M * N * 4], sc[M * N * 4];
        for (int64_t i2 = 0; i2 < 4; i2++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t m = 0; m < M; m++) {
                    double s = 0, mag = 0;
                    for (int64_t k = 0; k < K; k++) {
                        double p = (double)real_load_f32(&a, ((i2 / 2) * M + m) * K + k) *
                                   real_load_f32(&b, (i2 * N + n) * K + k);
                        s += p;
                        mag += fabs(p);
                    }
                    ref[(i2 * N + n) * M + m] = s;
                    sc[(i2 * N + n) * M + m] = mag;
                }
        expect_close(&d, ref, sc);
        freet(&a); freet(&b); freet(&d);
    }
}

static void test_kernels_add_mul_broadcast_b(void **state)
{
    (void)state;
    for (int op = 0; op < 2; op++) {
        real_tensor a = mk(SCHED_F32, 8, 6, 2, 1), b = mk(SCHED_F16, 8, 3, 1, 1);
        real_tensor d = mk(SCHED_F32, 8, 6, 2, 1);
        real_kernel_args x = { .op = op ? SCHED_OP_MUL : SCHED_OP_ADD, .dst = d, .src = { a, b }, .n_src = 2 };
        run3(&x);
        double ref[96];
        for (int64_t i = 0; i < 96; i++) {
            int64_t i0 = i % 8, i1 = (i / 8) % 6;
            double va = real_load_f32(&a, i), vb = real_load_f32(&b, (i1 % 3) * 8 + i0);
            ref[i] = op ? va * vb : va + vb;
        }
        expect_close(&d, ref, NULL);
        freet(&a); freet(&b); freet(&d);
    }
}

static void test_kernels_unary_ops(void **state)
{
    (void)state;
    sched_op ops[4] = { SCHED_OP_SCALE, SCHED_OP_SILU, SCHED_OP_CPY, SCHED_OP_CONVERT };
    sched_dtype dt[4] = { SCHED_F32, SCHED_F32, SCHED_F16, SCHED_BF16 };
    for (int k = 0; k < 4; k++) {
        real_tensor a = mk(SCHED_F32, 33, 7, 1, 1), d = mk(dt[k], 33, 7, 1, 1);
        real_kernel_args x = { .op = ops[k], .dst = d, .src = { a }, .n_src = 1 };
        run3(&x);
        double ref[33 * 7];
        for (int64_t i = 0; i < 33 * 7; i++) {
            double v = real_load_f32(&a, i);
            ref[i] = k == 0 ? v * 0.125 : k == 1 ? v / (1 + exp(-v)) : v;
        }
        expect_close(&d, ref, NULL);
        freet(&a); freet(&d);
    }
}

static void test_kernels_rms_norm_rows(void **state)
{
    (void)state;
    real_tensor a = mk(SCHED_F32, 64, 5, 1, 1), d = mk(SCHED_F32, 64, 5, 1, 1);
    real_kernel_args x = { .op = SCHED_OP_RMS_NORM, .dst = d, .src = { a }, .n_src = 1 };
    run3(&x);
    double ref[320];
    for (int r = 0; r < 5; r++) {
        double ss = 0;
        for (int i = 0; i < 64; i++)
            ss += pow(real_load_f32(&a, r * 64 + i), 2);
        for (int i = 0; i < 64; i++)
            ref[r * 64 + i] = real_load_f32(&a, r * 64 + i) / sqrt(ss / 64 + 1e-5);
    }
    expect_close(&d, ref, NULL);
    freet(&a); freet(&d);
}

static void test_kernels_softmax_with_mask(void **state)
{
    (void)state;
    real_tensor a = mk(SCHED_F32, 16, 4, 3, 1), m = mk(SCHED_F32, 16, 4, 1, 1);
    real_tensor d = mk(SCHED_F32, 16, 4, 3, 1);
    for (int i = 0; i < 64; i++)
        if (i % 16 > i / 16 + 2)
            ((float *)m.data)[i] = -INFINITY;
    real_kernel_args x = { .op = SCHED_OP_SOFTMAX, .dst = d, .src = { a, m }, .n_src = 2 };
    run3(&x);
    double ref[192];
    for (int r = 0; r < 12; r++) {
        double mx = -INFINITY, sum = 0, v[16];
        for (int i = 0; i < 16; i++) {
            v[i] = real_load_f32(&a, r * 16 + i) + real_load_f32(&m, (r % 4) * 16 + i);
            mx = v[i] > mx ? v[i] : mx;
        }
        for (int i = 0; i < 16; i++)
            sum += exp(v[i] - mx);
        for (int i = 0; i < 16; i++)
            ref[r * 16 + i] = exp(v[i] - mx) / sum;
    }
    expect_close(&d, ref, NULL);
    assert_true(((float *)d.data)[15] == 0.0f);     /* masked */
    freet(&a); freet(&m); freet(&d);
}

static void test_kernels_rope_rotates_pairs(void **state)
{
    (void)state;
    int64_t D = 8, H = 3, T = 4;
    real_tensor a = mk(SCHED_F32, D, H, T, 1), d = mk(SCHED_F32, D, H, T, 1);
    real_tensor pos = { SCHED_I32, { T, 1, 1, 1 }, calloc(4, 4) };
    for (int t = 0; t < T; t++)
        ((int32_t *)pos.data)[t] = 5 + 3 * t;
    real_kernel_args x = { .op = SCHED_OP_ROPE, .dst = d, .src = { a, pos }, .n_src = 2 };
    run3(&x);
    double ref[8 * 3 * 4];
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < D; i += 2) {
                int64_t o = (t * H + h) * D + i;
                double th = (5 + 3 * t) * pow(10000.0, -(double)i / D);
                double x0 = real_load_f32(&a, o), x1 = real_load_f32(&a, o + 1);
                ref[o] = x0 * cos(th) - x1 * sin(th);
                ref[o + 1] = x0 * sin(th) + x1 * cos(th);
            }
    double sc[96];
    for (int i = 0; i < 96; i++)
        sc[i] = 1e2;    /* theta up to 14 rad in f32: absolute error ~1e-6 * |theta| */
    expect_close(&d, ref, sc);
    freet(&a); freet(&d); freet(&pos);
}

static void test_kernels_get_rows_gathers(void **state)
{
    (void)state;
    real_tensor a = mk(SCHED_F16, 12, 10, 1, 1), d = mk(SCHED_F32, 12, 5, 1, 1);
    real_tensor idx = { SCHED_I32, { 5, 1, 1, 1 }, calloc(5, 4) };
    int32_t rows[5] = { 9, 0, 3, 3, 13 };   /* 13 wraps to 3 */
    memcpy(idx.data, rows, sizeof rows);
    real_kernel_args x = { .op = SCHED_OP_GET_ROWS, .dst = d, .src = { a, idx }, .n_src = 2 };
    run3(&x);
    double ref[60];
    for (int r = 0; r < 5; r++)
        for (int i = 0; i < 12; i++)
            ref[r * 12 + i] = real_load_f32(&a, (rows[r] % 10) * 12 + i);
    expect_close(&d, ref, NULL);
    freet(&a); freet(&d); freet(&idx);
}

static void test_kernels_concat_and_all_reduce(void **state)
{
    (void)state;
    real_tensor a = mk(SCHED_F32, 6, 2, 3, 1), b = mk(SCHED_F32, 6, 3, 3, 1);
    real_tensor d = mk(SCHED_F32, 6, 5, 3, 1);
    real_kernel_args x = { .op = SCHED_OP_CONCAT, .dst = d, .src = { a, b }, .n_src = 2 };
    run3(&x);
    double ref[90];
    for (int i2 = 0; i2 < 3; i2++)
        for (int i1 = 0; i1 < 5; i1++)
            for (int i0 = 0; i0 < 6; i0++)
                ref[(i2 * 5 + i1) * 6 + i0] = i1 < 2 ? real_load_f32(&a, (i2 * 2 + i1) * 6 + i0)
                                                     : real_load_f32(&b, (i2 * 3 + i1 - 2) * 6 + i0);
    expect_close(&d, ref, NULL);

    real_tensor r[3] = { mk(SCHED_F32, 10, 1, 1, 1), mk(SCHED_F32, 10, 1, 1, 1), mk(SCHED_F32, 10, 1, 1, 1) };
    real_tensor s = mk(SCHED_F32, 10, 1, 1, 1);
    real_kernel_args y = { .op = SCHED_OP_ALL_REDUCE, .dst = s, .src = { r[1] }, .n_src = 1,
                           .ranks = r, .n_ranks = 3 };
    run3(&y);
    double sum[10];
    for (int i = 0; i < 10; i++)
        sum[i] = (double)real_load_f32(&r[0], i) + real_load_f32(&r[1], i) + real_load_f32(&r[2], i);
    expect_close(&s, sum, NULL);
    freet(&a); freet(&b); freet(&d); freet(&s);
    for (int i = 0; i < 3; i++)
        freet(&r[i]);
}

static void test_kernels_half_conversions_exact(void **state)
{
    (void)state;
    assert_int_equal(real_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(real_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(real_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(real_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(real_f32_to_f16(5.9604645e-8f), 0x0001);     /* smallest subnormal */
    assert_int_equal(real_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
    assert_int_equal(real_f32_to_bf16(1.0f), 0x3f80);
    assert_true(real_f16_to_f32(0x3555) > 0.333f && real_f16_to_f32(0x3555) < 0.3334f);
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue;                                  /* nan */
        assert_int_equal(real_f32_to_f16(real_f16_to_f32((uint16_t)h)), h);
        if (((h << 16) & 0x7f800000u) != 0x7f800000u)
            assert_int_equal(real_f32_to_bf16(real_bf16_to_f32((uint16_t)h)), h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_mul_mat_broadcasts_batches),
        cmocka_unit_test(test_kernels_add_mul_broadcast_b),
        cmocka_unit_test(test_kernels_unary_ops),
        cmocka_unit_test(test_kernels_rms_norm_rows),
        cmocka_unit_test(test_kernels_softmax_with_mask),
        cmocka_unit_test(test_kernels_rope_rotates_pairs),
        cmocka_unit_test(test_kernels_get_rows_gathers),
        cmocka_unit_test(test_kernels_concat_and_all_reduce),
        cmocka_unit_test(test_kernels_half_conversions_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
