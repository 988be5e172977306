// cuda_probe: exits 0 when a CUDA device can be used, else prints one line
// saying why ("no CUDA device: cudaGetDeviceCount: ...") and exits 77, the
// status ctest counts as skipped (the corpus tests run it first).
#include "corpus.cuh"

int main()
{
    corpus_need_devices(1);
    return 0;
}
