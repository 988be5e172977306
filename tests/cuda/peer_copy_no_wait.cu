// A peer copy from GPU 0 to GPU 1, queued on GPU 0's stream, then read by a
// kernel on GPU 1 that does not wait for it. Needs two GPUs (skips with one).
// Fix: record an event on s0 after the copy, cudaStreamWaitEvent(s1, it).
// expect race type=RAW first="Memcpy PtoP" second="consume(float const*, float*, int)"
// require streams=2 overlap
#include "corpus.cuh"

int main()
{
    corpus_need_devices(2);
    float *src, *dst, *out;
    cudaStream_t s0, s1;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&src, BYTES));
    CHECK(cudaMemset(src, 0, BYTES));
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&dst, BYTES));
    CHECK(cudaMalloc(&out, BYTES));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaSetDevice(0));
    CHECK(cudaMemcpyPeerAsync(dst, 1, src, 0, BYTES, s0));
    CHECK(cudaSetDevice(1));
    consume<<<GRID, BLOCK, 0, s1>>>(dst, out, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceSynchronize());
    return 0;
}
