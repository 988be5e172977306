/*
 * nccl_prog.c -- tests/cuda/shim_nccl.sh's program: creates a communicator
 * the way PyTorch does (ncclCommInitRankConfig, 4 ranks), splits it
 * (color 1), all-reduces on each, and prints the communicator ids the shim
 * must log (the hash of the unique id every rank passed; of the parent's
 * id and the color), as "nccl.HEX nccl.HEX".
 */
#include <nccl.h>

#include <stdio.h>
#include <string.h>

static unsigned long long fnv_more(unsigned long long h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

int main(void)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    strcpy(id.internal, "the unique id every rank got");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t world, half;
    ncclResult_t r = ncclCommInitRankConfig(&world, 4, id, 0, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        return 1;
    if (ncclCommSplit(world, 1, 0, &half, NULL) != ncclSuccess)
        return 1;
    float buf[16];
    if (ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, world, NULL) != ncclSuccess ||
        ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, half, NULL) != ncclSuccess)
        return 1;
    unsigned long long w = fnv_more(1469598103934665603ull, &id, sizeof id);
    int color = 1;
    unsigned long long h = fnv_more(fnv_more(1469598103934665603ull, &w, sizeof w), &color,
                                    sizeof color);
    printf("nccl.%llx nccl.%llx\n", w, h);
    return 0;
}
