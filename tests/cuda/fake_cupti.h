/*
 * fake_cupti.h -- a stand-in CUDA driver and CUPTI for the injection
 * library's code (real/cuda/inject*.c), linked into the unit test
 * (tests/cuda/test_inject.c) and the benchmark (bench/bench_inject.c) in
 * place of libcuda and libcupti: the functions the library calls, with
 * state the caller sets (kernels and their parameter layouts, graphs,
 * refusals, an old driver), and the callbacks the library registered,
 * which the caller drives with the records CUPTI would give it.
 */
#ifndef SYNCSIM_TESTS_CUDA_FAKE_CUPTI_H
#define SYNCSIM_TESTS_CUDA_FAKE_CUPTI_H

#include <cuda.h>
#include <cupti.h>

#include <stddef.h>
#include <stdint.h>

#define FAKE_CONTEXT ((CUcontext)0x5000)

/* A kernel function f with n parameters of the given sizes (laid out one
 * after another, 8-aligned). */
void fake_function(CUfunction f, int n, const size_t *sizes);
/* cuFuncGetParamInfo refuses f with status; kernel_route: whether
 * cuKernelGetParamInfo (f taken as a CUkernel) answers it. */
void fake_refuse(CUfunction f, CUresult status, int kernel_route);
/* cuGetProcAddress finds no CUDA 12.4 function (a driver older than 12.4). */
void fake_old_driver(int old);

/* A graph of n kernel nodes: node k launches funcs[k] with params[k] and
 * has CUPTI node id ids[k]. Returns its handle. */
CUgraph fake_graph(int n, const CUfunction *funcs, void **const *params, const uint64_t *ids);
/* The graph is destroyed: asking it from now on is counted. */
void fake_graph_destroy(CUgraph g);
/* Questions asked of destroyed graphs so far. */
int fake_destroyed_asks(void);
/* The CUgraphNode handle of node k of g. */
CUgraphNode fake_graph_node(CUgraph g, int k);

/* Drives the callback the library subscribed. */
void fake_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data);
/* Hands the library an activity buffer holding the n records given
 * (each rec[i] of size[i] bytes), as CUPTI's thread would. */
void fake_activity(int n, const void *const *rec, const size_t *size);

#endif
