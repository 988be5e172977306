// The event meant to say "produce is done" is recorded on the consumer's own
// stream, so the wait orders nothing with the producer.
// Fix: cudaEventRecord(ev, s1).
// expect race type=RAW first="produce(float*, int)" second="consume(float const*, float*, int)"
// require streams=2 overlap
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    float *a, *out;
    cudaStream_t s1, s2;
    cudaEvent_t ev;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CHECK(cudaMalloc(&a, BYTES));
    CHECK(cudaMalloc(&out, BYTES));
    CHECK(cudaMemset(a, 0, BYTES));
    CHECK(cudaDeviceSynchronize());
    produce<<<GRID, BLOCK, 0, s1>>>(a, N);
    CHECK(cudaEventRecord(ev, s2));         // the bug: s2, not s1
    CHECK(cudaStreamWaitEvent(s2, ev, 0));
    consume<<<GRID, BLOCK, 0, s2>>>(a, out, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(a));
    CHECK(cudaFree(out));
    return 0;
}
