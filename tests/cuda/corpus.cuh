// corpus.cuh -- what the corpus programs share: error checks, the kernels,
// and the NVTX mark that tells `syncsim capture` about a host access
// ("syncsim:r PTR SIZE LABEL"; CUPTI cannot see host loads and stores).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,           \
                         cudaGetErrorString(e_));                                        \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)

// Exits 77 (ctest: skipped) with one line when there are fewer than n GPUs.
static inline void corpus_need_devices(int n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        std::printf("no CUDA device: cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
        std::exit(77);
    }
    if (count < n) {
        std::printf("needs %d CUDA devices: cudaGetDeviceCount found %d\n", n, count);
        std::exit(77);
    }
}

static inline void host_access(const char *mode, const void *p, size_t bytes, const char *label)
{
    char msg[256];
    std::snprintf(msg, sizeof msg, "syncsim:%s %p %zu %s", mode, p, bytes, label);
    nvtxMarkA(msg);
}

__global__ void produce(float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 64 && i < n; k++)   // long enough to overlap what races with it
        out[i] = out[i] * 0.5f + (float)k;
}

__global__ void consume(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] + 1.0f;
}

__global__ void noop() {}

static const int N = 1 << 20;
static const size_t BYTES = N * sizeof(float);
static const int BLOCK = 256, GRID = (N + 255) / 256;
