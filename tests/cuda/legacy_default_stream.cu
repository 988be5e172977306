// Two blocking streams ordered by the legacy default stream: a kernel on
// stream 0 waits for earlier work on every blocking stream, and later work
// on them waits for it. Clean. (per_thread_default_stream.cu is the same
// program built with --default-stream per-thread: there it races.)
// expect clean
// require streams=2 overlap
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    float *a, *out;
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1));           // blocking streams
    CHECK(cudaStreamCreate(&s2));
    CHECK(cudaMalloc(&a, BYTES));
    CHECK(cudaMalloc(&out, BYTES));
    produce<<<GRID, BLOCK, 0, s1>>>(a, N);
    noop<<<1, 1, 0, 0>>>();                 // the default stream between them
    consume<<<GRID, BLOCK, 0, s2>>>(a, out, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(a));
    CHECK(cudaFree(out));
    return 0;
}
