// launch_bound.cu -- the launch-bound program of issue 22's cost figures
// (bench/gpu/capture.sh): ITERS rounds of two tiny kernels on two streams
// handing over with events (20,000 kernels by default), timed inside the
// program from the first launch to the final synchronise, so that CUDA's
// start-up and the capture's start-up and teardown are not counted.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            std::fprintf(stderr, "launch_bound: %s: %s\n", #call, cudaGetErrorString(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

__global__ void bump(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] += 1.0f;
}

static double seconds()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? std::atoi(argv[1]) : 10000, n = 1024;
    float *a;
    cudaStream_t s0, s1;
    cudaEvent_t e0, e1;
    CHECK(cudaMalloc(&a, n * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
    CHECK(cudaMemset(a, 0, n * sizeof(float)));
    bump<<<4, 256, 0, s0>>>(a, n);      // load the module before timing
    CHECK(cudaDeviceSynchronize());
    double t0 = seconds();
    for (int i = 0; i < iters; i++) {
        bump<<<4, 256, 0, s0>>>(a, n);
        CHECK(cudaEventRecord(e0, s0));
        CHECK(cudaStreamWaitEvent(s1, e0, 0));
        bump<<<4, 256, 0, s1>>>(a, n);
        CHECK(cudaEventRecord(e1, s1));
        CHECK(cudaStreamWaitEvent(s0, e1, 0));
    }
    CHECK(cudaDeviceSynchronize());
    double t1 = seconds();
    std::printf("launch_bound: %d kernels in %.6f s\n", 2 * iters, t1 - t0);
    return 0;
}
