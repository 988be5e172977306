/*
 * backend_cuda.h -- between syncsim and its CUDA plugin, libsyncsim_cuda.so.
 *
 * The `syncsim` binary never links the CUDA runtime. When a --devices spec
 * names `cuda[:N]`, real/spec.c dlopen()s libsyncsim_cuda.so and calls its
 * one exported function, REAL_CUDA_ENTRY, for the table below. The plugin
 * links no syncsim library either: what it needs of syncsim (the
 * recording's tickets, a node's kernel arguments, the set's failure) it is
 * given as real_cuda_host. Both sides check REAL_CUDA_ABI.
 *
 * The kernels (backend_kernels.cu, C++) see none of syncsim's headers:
 * they take rcu_args, plain C that backend_cuda.c fills from
 * real_kernel_args.
 */
#ifndef SYNCSIM_REAL_CUDA_BACKEND_H
#define SYNCSIM_REAL_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#define REAL_CUDA_ABI 2
#define REAL_CUDA_LIB "libsyncsim_cuda.so"
#define REAL_CUDA_ENTRY "syncsim_cuda_plugin"

/* ------------------------------------------------------------------ */
/* The kernels' view of a node (backend_kernels.cu).                   */

typedef enum { RCU_F32 = 0, RCU_F16 = 1, RCU_BF16 = 2, RCU_I32 = 3 } rcu_type;

typedef enum {
    RCU_MUL_MAT, RCU_ADD, RCU_MUL, RCU_SCALE, RCU_RMS_NORM, RCU_SOFTMAX, RCU_SILU, RCU_ROPE,
    RCU_GET_ROWS, RCU_CPY, RCU_CONVERT, RCU_CONCAT, RCU_ALL_REDUCE_LOCAL,
} rcu_op;

typedef struct rcu_tensor {
    int type;                       /* rcu_type */
    int64_t ne[4];
    void *data;                     /* device memory (weights: managed, on the device) */
} rcu_tensor;

typedef struct rcu_args {
    int op;                         /* rcu_op */
    rcu_tensor dst, src[4];
    int n_src;
    int32_t param;
    int bf16_wire;                  /* ALL_REDUCE_LOCAL: round through bf16 */
    int convert_truncate;           /* CONVERT to bf16 by truncation */
} rcu_args;

#ifdef __cplusplus
extern "C" {
#endif
/* Queues the kernel of a on stream (a cudaStream_t). Returns 0, or the
 * cudaError_t of the launch. */
int rcu_launch(const rcu_args *a, void *stream);
/* Queues hi[e] + lo[e] = src[e] (f16 each: hi the nearest to src, lo the
 * nearest to the rest) for e < n: the f32 activations of a mul_mat of f16
 * weights as two f16 operands of cublasGemmEx, which together hold 22 of
 * f32's 24 bits. Returns 0, or the cudaError_t of the launch. */
int rcu_split_f16(const float *src, void *hi, void *lo, int64_t n, void *stream);
#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------ */
/* The plugin's table (C only: syncsim's types).                       */

#ifndef __cplusplus
#include "real/real.h"

/* What syncsim gives the plugin. */
typedef struct real_cuda_host {
    int abi;
    sched_ticket (*rec_ticket)(const sched_backend *b);
    void (*rec_done)(const sched_backend *b, sched_ticket tk, int64_t t, int64_t dur);
    int (*node_args)(const sched_exec *x, int32_t node, real_kernel_args *a);
    void (*exec_group)(const sched_exec *x, int32_t node, int *rank, int *n);
    bool (*exec_bf16)(const sched_exec *x, int32_t node);
    bool (*kernel_supports)(const sched_graph *g, const sched_tensor *t);
    const char *(*op_str)(sched_op op);
    int64_t (*tensor_nelements)(const sched_tensor *t);
    uint64_t (*tensor_nbytes)(const sched_tensor *t);
    int64_t (*now_ns)(void);                /* CLOCK_MONOTONIC, the run's clock */
    /* The set a device belongs to (real_ctx): its first failure. */
    void (*fail)(void *set, const char *msg);
    bool (*failed)(void *set);
} real_cuda_host;

/* One logical device: `cuda:N` item number `index` of the spec. */
typedef struct real_cuda_params {
    int index;                      /* logical: cuda0, cuda1, ... (the trace's names) */
    int device;                     /* physical: the N of cuda:N */
    void *set;                      /* real_ctx of the set */
} real_cuda_params;

/* What the plugin gives syncsim. */
typedef struct real_cuda_plugin {
    int abi;
    /* The CUDA devices of this computer; -1 with "cudaGetDeviceCount: WHY"
     * in err when there are none usable (no driver). */
    int (*device_count)(char *err, size_t errlen);
    /* Whether it was built with NCCL (all_reduce across devices). */
    bool nccl;
    /* A logical device (its own stream, buffers, events); NULL with one
     * line in err. */
    sched_backend *(*open)(const real_cuda_host *h, const real_cuda_params *p, char *err,
                           size_t errlen);
    /* Waits for its work, then frees it (its buffers must be freed). */
    void (*close)(sched_backend *b);
    bool (*is_device)(const sched_backend *b);
    /* Pinned host memory (cudaMallocHost), zeroed, for the cpu backend's
     * buffers while CUDA devices are open, so that copies from and to them
     * are asynchronous DMA; NULL when CUDA cannot give it. Freed with
     * host_free. */
    void *(*host_alloc)(size_t size);
    void (*host_free)(void *p);
    /* A blocking copy of n bytes by the host between any two addresses,
     * device memory included (cudaMemcpy; memcpy when both are host
     * memory). 0, or -1. */
    int (*copy_bytes)(void *dst, const void *src, size_t n);
} real_cuda_plugin;

typedef const real_cuda_plugin *(*real_cuda_entry_fn)(void);
#endif

#endif
