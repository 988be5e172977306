// Stream-ordered memory: `a` is freed on s1 (cudaFreeAsync) and the pool hands
// its memory out again on s2, but a kernel still launched with the stale
// pointer `a` uses it after the free was ordered before it (the host
// synchronised s1). The checker: use after free of a's buffer.
// Fix: free after the last use (cudaFreeAsync after consume, on its stream).
// expect use-after-free buffer=gpu0.b1 second="consume(float const*, float*, int)"
// require streams=2 overlap
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    float *a, *b, *out;
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&out, BYTES));                     // gpu0.b0
    CHECK(cudaMallocAsync(&a, BYTES, s1));              // gpu0.b1
    produce<<<GRID, BLOCK, 0, s1>>>(a, N);
    CHECK(cudaFreeAsync(a, s1));
    CHECK(cudaStreamSynchronize(s1));
    consume<<<GRID, BLOCK, 0, s2>>>(a, out, N);         // the bug: a was freed
    CHECK(cudaMallocAsync(&b, BYTES, s2));              // the pool may hand a's memory back
    produce<<<GRID, BLOCK, 0, s2>>>(b, N);
    CHECK(cudaFreeAsync(b, s2));
    CHECK(cudaStreamSynchronize(s2));
    std::printf("a %s b\n", a == b ? "==" : "!=");
    CHECK(cudaFree(out));
    return 0;
}
