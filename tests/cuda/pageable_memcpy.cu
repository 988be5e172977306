// cudaMemcpy from and to pageable (malloc'd) host memory returns only once
// the host buffer may be reused: overwriting the input and reading the
// output right after are safe. Clean.
// expect clean
// require streams=1 host-overlap
#include "corpus.cuh"
#include <cstring>

int main()
{
    corpus_need_devices(1);
    float *in = (float *)std::malloc(BYTES), *res = (float *)std::malloc(BYTES), *d, *out;
    CHECK(cudaMalloc(&d, BYTES));
    CHECK(cudaMalloc(&out, BYTES));
    std::memset(in, 0, BYTES);
    host_access("w", in, BYTES, "fill input");
    CHECK(cudaMemcpy(d, in, BYTES, cudaMemcpyHostToDevice));
    std::memset(in, 1, BYTES);
    host_access("w", in, BYTES, "next input");
    consume<<<GRID, BLOCK>>>(d, out, N);
    CHECK(cudaMemcpy(res, out, BYTES, cudaMemcpyDeviceToHost));
    host_access("r", res, BYTES, "read result");
    std::printf("res[0] = %f\n", res[0]);
    CHECK(cudaFree(d));
    CHECK(cudaFree(out));
    std::free(in);
    std::free(res);
    return 0;
}
