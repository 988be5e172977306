// A kernel reads a buffer before the asynchronous host-to-device copy into
// it is waited for: the copy runs on s1, the kernel on s2, nothing orders them.
// Fix: record an event on s1 after the copy and cudaStreamWaitEvent(s2, it).
// expect race type=RAW first="Memcpy HtoD" second="consume(float const*, float*, int)"
// require streams=2 overlap
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    float *h, *in, *out;
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaMallocHost(&h, BYTES));
    CHECK(cudaMalloc(&in, BYTES));
    CHECK(cudaMalloc(&out, BYTES));
    CHECK(cudaMemcpyAsync(in, h, BYTES, cudaMemcpyHostToDevice, s1));
    consume<<<GRID, BLOCK, 0, s2>>>(in, out, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(in));
    CHECK(cudaFree(out));
    CHECK(cudaFreeHost(h));
    return 0;
}
