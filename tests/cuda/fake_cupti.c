/*
 * fake_cupti.c -- the stand-in CUDA driver and CUPTI of fake_cupti.h: just
 * what real/cuda/inject*.c calls, answering from tables the caller fills.
 * Not thread-safe to set up; the library's calls into it are (read-only
 * tables, a clock, atomics).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "fake_cupti.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* Kernels.                                                            */

#define FUNCS 256
static struct {
    CUfunction f;
    int n;
    size_t off[64], size[64];
    CUresult refuse;            /* cuFuncGetParamInfo's answer, 0: answers */
    int kernel_route;           /* cuKernelGetParamInfo answers */
} funcs[FUNCS];
static int n_funcs, old_driver;

static int func_index(CUfunction f)
{
    for (int i = 0; i < n_funcs; i++)
        if (funcs[i].f == f)
            return i;
    return -1;
}

void fake_function(CUfunction f, int n, const size_t *sizes)
{
    int i = func_index(f);
    if (i < 0 && n_funcs < FUNCS)
        i = n_funcs++;
    if (i < 0)
        return;
    memset(&funcs[i], 0, sizeof funcs[i]);
    funcs[i].f = f;
    funcs[i].n = n;
    size_t at = 0;
    for (int k = 0; k < n && k < 64; k++) {
        at = (at + 7) & ~(size_t)7;
        funcs[i].off[k] = at;
        funcs[i].size[k] = sizes[k];
        at += sizes[k];
    }
}

void fake_refuse(CUfunction f, CUresult status, int kernel_route)
{
    int i = func_index(f);
    if (i >= 0) {
        funcs[i].refuse = status;
        funcs[i].kernel_route = kernel_route;
    }
}

void fake_old_driver(int old)
{
    old_driver = old;
}

static CUresult info(int i, size_t k, size_t *off, size_t *size)
{
    if (i < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((int)k >= funcs[i].n)
        return CUDA_ERROR_INVALID_VALUE;
    *off = funcs[i].off[k];
    if (size)
        *size = funcs[i].size[k];
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI func_param_info(CUfunction f, size_t k, size_t *off, size_t *size)
{
    int i = func_index(f);
    if (i >= 0 && funcs[i].refuse)
        return funcs[i].refuse;
    return info(i, k, off, size);
}

static CUresult CUDAAPI kernel_param_info(CUkernel kern, size_t k, size_t *off, size_t *size)
{
    int i = func_index((CUfunction)kern);
    if (i >= 0 && funcs[i].refuse && !funcs[i].kernel_route)
        return CUDA_ERROR_INVALID_HANDLE;
    return info(i, k, off, size);
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *status)
{
    (void)cudaVersion;
    (void)flags;
    *pfn = NULL;
    if (!old_driver && strcmp(symbol, "cuFuncGetParamInfo") == 0)
        *pfn = (void *)func_param_info;
    else if (!old_driver && strcmp(symbol, "cuKernelGetParamInfo") == 0)
        *pfn = (void *)kernel_param_info;
    if (status)
        *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    (void)pFunc;
    (void)kernel;
    return CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    *driverVersion = old_driver ? 12020 : 13000;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    *pctx = FAKE_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    (void)hStream;
    *flags = CU_STREAM_NON_BLOCKING;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    *pbase = dptr;
    *psize = 1;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Graphs.                                                             */

#define GRAPHS 16
#define GRAPH_NODES 8
static struct fake_graph_st {
    int n, destroyed;
    struct fake_node_st {
        CUfunction f;
        void **params;
        uint64_t id;
    } nodes[GRAPH_NODES];
} graphs[GRAPHS];
static int n_graphs;
static _Atomic int destroyed_asks;

CUgraph fake_graph(int n, const CUfunction *f, void **const *params, const uint64_t *ids)
{
    struct fake_graph_st *g = &graphs[n_graphs++ % GRAPHS];
    memset(g, 0, sizeof *g);
    g->n = n < GRAPH_NODES ? n : GRAPH_NODES;
    for (int k = 0; k < g->n; k++) {
        g->nodes[k].f = f[k];
        g->nodes[k].params = params[k];
        g->nodes[k].id = ids[k];
    }
    return (CUgraph)g;
}

void fake_graph_destroy(CUgraph g)
{
    ((struct fake_graph_st *)g)->destroyed = 1;
}

int fake_destroyed_asks(void)
{
    return atomic_load(&destroyed_asks);
}

CUgraphNode fake_graph_node(CUgraph g, int k)
{
    return (CUgraphNode) & ((struct fake_graph_st *)g)->nodes[k];
}

/* The graph a node handle belongs to. */
static struct fake_graph_st *graph_of(CUgraphNode node)
{
    for (int i = 0; i < GRAPHS; i++)
        if ((char *)node >= (char *)graphs[i].nodes &&
            (char *)node < (char *)(graphs[i].nodes + GRAPH_NODES))
            return &graphs[i];
    return NULL;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    struct fake_graph_st *g = (struct fake_graph_st *)hGraph;
    if (g->destroyed) {
        atomic_fetch_add(&destroyed_asks, 1);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (nodes)
        for (int k = 0; k < g->n && (size_t)k < *numNodes; k++)
            nodes[k] = (CUgraphNode)&g->nodes[k];
    *numNodes = (size_t)g->n;
    return CUDA_SUCCESS;
}

/* Whether node belongs to a graph not destroyed (a question of a
 * destroyed one is counted). */
static int node_alive(CUgraphNode node)
{
    struct fake_graph_st *g = graph_of(node);
    if (g && !g->destroyed)
        return 1;
    atomic_fetch_add(&destroyed_asks, 1);
    return 0;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    if (!node_alive(hNode))
        return CUDA_ERROR_INVALID_VALUE;
    *type = CU_GRAPH_NODE_TYPE_KERNEL;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!node_alive(hNode))
        return CUDA_ERROR_INVALID_VALUE;
    const struct fake_node_st *n = (const struct fake_node_st *)hNode;
    memset(p, 0, sizeof *p);
    p->func = n->f;
    p->kernelParams = n->params;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* CUPTI.                                                              */

static CUpti_CallbackFunc callback;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *timestamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t *deviceId)
{
    (void)context;
    *deviceId = 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t perThreadStream,
                                        uint32_t *streamId)
{
    (void)context;
    *streamId = perThreadStream ? 2 : stream ? 10 + (uint32_t)((uintptr_t)stream % 1000) : 7;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphNodeId(CUgraphNode node, uint64_t *nodeId)
{
    struct fake_graph_st *g = graph_of(node);
    if (g) {
        *nodeId = ((const struct fake_node_st *)node)->id;
        return CUPTI_SUCCESS;
    }
    *nodeId = (uint64_t)(uintptr_t)node;      /* a clone: its handle is its id */
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc cb,
                                    void *userdata)
{
    (void)userdata;
    *subscriber = (CUpti_SubscriberHandle)0x1;
    callback = cb;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain)
{
    (void)enable;
    (void)subscriber;
    (void)domain;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    (void)enable;
    (void)subscriber;
    (void)domain;
    (void)cbid;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done)
{
    requested = req;
    completed = done;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    (void)kind;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time)
{
    (void)time;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    return CUPTI_SUCCESS;
}

/* A buffer of fake_activity: records one after another, each after a
 * header with its size. */
typedef struct packed {
    uint64_t size;
} packed;

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                CUpti_Activity **record)
{
    uint8_t *at = *record ? (uint8_t *)*record : buffer + sizeof(packed);
    if (*record)
        at += ((const packed *)at - 1)->size + sizeof(packed);
    if ((size_t)(at - buffer) >= valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)at;
    return CUPTI_SUCCESS;
}

void fake_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    callback(NULL, domain, cbid, data);
}

void fake_activity(int n, const void *const *rec, const size_t *size)
{
    uint8_t *buf = NULL;
    size_t cap = 0, max = 0, at = 0;
    requested(&buf, &cap, &max);
    for (int i = 0; i < n; i++) {
        size_t step = (size[i] + 7) & ~(size_t)7;
        if (at + sizeof(packed) + step > cap)
            break;
        ((packed *)(buf + at))->size = step;
        memcpy(buf + at + sizeof(packed), rec[i], size[i]);
        at += sizeof(packed) + step;
    }
    completed(FAKE_CONTEXT, 0, buf, cap, at);
}
