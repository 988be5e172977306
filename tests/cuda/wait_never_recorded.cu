// A stream waits on an event that was never recorded: CUDA treats the wait
// as already satisfied, so it orders nothing.
// Fix: record the event (after the work to wait for) before waiting on it.
// expect wait-unrecorded event=ev1
// require streams=1
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    float *a;
    cudaStream_t s1;
    cudaEvent_t ev;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&ev));
    CHECK(cudaMalloc(&a, BYTES));
    CHECK(cudaStreamWaitEvent(s1, ev, 0));
    produce<<<GRID, BLOCK, 0, s1>>>(a, N);
    CHECK(cudaStreamSynchronize(s1));
    CHECK(cudaFree(a));
    return 0;
}
