// cublas_loop.cu -- the cuBLAS-bound program of issue 22's cost figures
// (bench/gpu/capture.sh): ITERS single-precision GEMMs of N x N on one
// stream, timed inside the program around the loop.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cublas_v2.h>
#include <cuda_runtime.h>

static double seconds()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? std::atoi(argv[1]) : 50, n = argc > 2 ? std::atoi(argv[2]) : 4096;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a, *b, *c, one = 1.0f, zero = 0.0f;
    cublasHandle_t h;
    if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) || cudaMalloc(&c, bytes) ||
        cudaMemset(a, 0, bytes) || cudaMemset(b, 0, bytes) || cublasCreate(&h)) {
        std::fprintf(stderr, "cublas_loop: cannot set up (no GPU, or out of memory)\n");
        return 1;
    }
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
    cudaDeviceSynchronize();
    double t0 = seconds();
    for (int i = 0; i < iters; i++)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        std::fprintf(stderr, "cublas_loop: the GEMMs failed\n");
        return 1;
    }
    double t1 = seconds();
    std::printf("cublas_loop: %d GEMMs of %d in %.6f s\n", iters, n, t1 - t0);
    return 0;
}
