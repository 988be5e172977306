// The host reads the result of an asynchronous device-to-host copy without
// synchronising with the copy's stream.
// Fix: cudaStreamSynchronize(s1) before reading.
// expect race type=RAW first="Memcpy DtoH" second="read result"
// require streams=1 host-overlap
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    float *h, *d;
    cudaStream_t s1;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaMallocHost(&h, BYTES));
    CHECK(cudaMalloc(&d, BYTES));
    CHECK(cudaMemsetAsync(d, 0, BYTES, s1));
    produce<<<GRID, BLOCK, 0, s1>>>(d, N);
    CHECK(cudaMemcpyAsync(h, d, BYTES, cudaMemcpyDeviceToHost, s1));
    host_access("r", h, BYTES, "read result");
    std::printf("h[0] = %f (may be stale)\n", h[0]);
    CHECK(cudaStreamSynchronize(s1));
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(h));
    return 0;
}
