// legacy_default_stream.cu built with --default-stream per-thread: stream 0
// is the thread's own stream, which orders nothing with the other blocking
// streams. Fix: an event recorded on s1 and waited for on s2.
// expect race type=RAW first="produce(float*, int)" second="consume(float const*, float*, int)"
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
