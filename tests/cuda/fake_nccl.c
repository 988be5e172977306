/*
 * fake_nccl.c -- a stand-in libnccl for tests/cuda/shim_nccl.sh: the calls
 * PyTorch's ProcessGroupNCCL makes, answering at once, so that the shim
 * (real/cuda/shim.c, preloaded) is seen wrapping them without NCCL or a GPU.
 * ncclCommInitRankConfig answers ncclInProgress, as a non-blocking
 * communicator does.
 */
#include <nccl.h>

#include <stdlib.h>

struct ncclComm {
    int nranks;
};

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    (void)id;
    (void)rank;
    (void)config;
    *comm = calloc(1, sizeof **comm);
    (*comm)->nranks = nranks;
    return ncclInProgress;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    (void)color;
    (void)key;
    (void)config;
    *newcomm = calloc(1, sizeof **newcomm);
    (*newcomm)->nranks = comm->nranks / 2;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t s)
{
    (void)send;
    (void)recv;
    (void)count;
    (void)t;
    (void)op;
    (void)comm;
    (void)s;
    return ncclSuccess;
}
