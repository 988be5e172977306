// A correct multi-stream pipeline: chunks are uploaded on a copy stream,
// computed on a compute stream and downloaded on the copy stream again,
// each hand-over an event; the host reads the results after synchronising.
// Clean.
// expect clean
// require streams=2 overlap host-overlap
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    const int CHUNKS = 4, CN = N / CHUNKS;
    const size_t CB = CN * sizeof(float);
    float *h_in, *h_out, *d_in, *d_out;
    cudaStream_t copy, compute;
    cudaEvent_t up[CHUNKS], done[CHUNKS];
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaMallocHost(&h_in, BYTES));
    CHECK(cudaMallocHost(&h_out, BYTES));
    CHECK(cudaMalloc(&d_in, BYTES));
    CHECK(cudaMalloc(&d_out, BYTES));
    host_access("w", h_in, BYTES, "fill input");
    for (int c = 0; c < CHUNKS; c++) {
        CHECK(cudaEventCreateWithFlags(&up[c], cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&done[c], cudaEventDisableTiming));
        CHECK(cudaMemcpyAsync(d_in + c * CN, h_in + c * CN, CB, cudaMemcpyHostToDevice, copy));
        CHECK(cudaEventRecord(up[c], copy));
        CHECK(cudaStreamWaitEvent(compute, up[c], 0));
        consume<<<(CN + BLOCK - 1) / BLOCK, BLOCK, 0, compute>>>(d_in + c * CN, d_out + c * CN, CN);
        CHECK(cudaEventRecord(done[c], compute));
        CHECK(cudaStreamWaitEvent(copy, done[c], 0));
        CHECK(cudaMemcpyAsync(h_out + c * CN, d_out + c * CN, CB, cudaMemcpyDeviceToHost, copy));
    }
    CHECK(cudaStreamSynchronize(copy));
    host_access("r", h_out, BYTES, "read results");
    std::printf("h_out[0] = %f\n", h_out[0]);
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_out));
    CHECK(cudaFreeHost(h_in));
    CHECK(cudaFreeHost(h_out));
    return 0;
}
