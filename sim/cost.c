/*
 * cost.c -- the cost model: what every statement costs on a device model.
 *
 * One home for the formulas. The simulated backend (backend_sim.c, on the
 * engine of world.c) prices what it runs with them, and replay
 * (replay.c) prices what a trace says with them, from the cost attributes
 * the recording carries; so a simulated run replayed with `--durations
 * model` on the same device model gets the same prices by construction.
 * The numbers are the keys of sim/devices/NAME.dev (device_model.c).
 *
 *   Host.  One host thread runs the scheduler. Every call it submits
 *   costs host time (sim_cost_submit): a kernel launch or a collective
 *   launch_ns, an event record event_record_ns, an async copy, an event
 *   wait or any other call api_call_ns. A blocking statement ends when
 *   what it waits for has ended, plus a fixed cost (sim_cost_unblock): a
 *   sync sync_ns (the round trip; ~10 us on Linux, ~30 us under WDDM), a
 *   host's event wait event_sync_ns, a stream's event wait
 *   event_wait_device_ns. A blocking copy performed by the host
 *   (cudaMemcpy) waits for its transfer and costs host_copy_ns more.
 *
 *   Ops (sim_cost_op).  overhead + max(compute, memory):
 *     on a stream  overhead kernel_overhead_ns; compute flops at
 *                  gpu_tflops_f32, half-precision flops (a mul_mat of
 *                  f16/bf16 weights) at gpu_tflops_f16; memory the bytes
 *                  moved at gpu_mem_gbps;
 *     on the host  (the CPU backend's thread pool) overhead: the pool's
 *                  barrier after the op (`--barrier`, sim_cost_host_barrier):
 *                  spin costs spin_barrier_ns while cpu_threads <=
 *                  cpu_cores and oversub_barrier_ns when oversubscribed (a
 *                  spinning thread burns the slice the thread holding
 *                  progress needs); futex and pthread futex_wake_ns (the
 *                  last thread wakes the sleepers, whatever the count);
 *                  hybrid spins while threads <= cores, then sleeps:
 *                  spin_barrier_ns, else futex_wake_ns. Measured with
 *                  real/barrier.c on a 16-core host (ns per crossing,
 *                  spin/futex/hybrid): 4 threads 642/7105/631, 16 threads
 *                  3238/21332/3454, 17 threads 4.04 ms/23.6 us/19.1 us;
 *                  compute every flop at cpu_gflops; memory at
 *                  cpu_mem_gbps.
 *   Kernel families (sim_cost_kernel).  A model's [kernels] lines, which
 *   `syncsim calibrate` fits from a run, price an op of a measured family
 *   instead of the roofline: fixed_ns + flops / gflops + flops_f16 /
 *   gflops_f16 + bytes / gbps, each term only where the line has its rate
 *   (a captured kernel whose FLOPs and bytes nobody knows: fixed_ns per
 *   op). A sum, not the roofline's max: fitted over a family's ops, it
 *   carries the compute-bound and the memory-bound ones alike. An op's
 *   family (sim_op_family) is its op= attribute, the op kind `syncsim run` records (mul_mat, add,
 *   rms_norm, ...), else the family of its label, a captured kernel's
 *   name (sim_kernel_family: gemm, conv, attention, softmax, norm, reduce,
 *   elementwise, copy, memset, other). Ops on a host queue are looked up
 *   as `host.FAMILY`: the same op kind runs at another rate on the CPU.
 *   Host code that is no backend's op (the program's own set_inputs,
 *   sample) names its fixed cost instead of the barrier (overhead_ns=).
 *   The bytes an op moves are its bytes= attribute when it has one (a
 *   get_rows names its whole table but reads a few rows), else the bytes
 *   it accesses.
 *
 *   Copies (sim_cost_link_gbps, sim_cost_transfer_ns).  A copy occupies
 *   its stream and the copy engine of its direction, waits
 *   copy_latency_ns, then moves its bytes over its links: host -> device
 *   over the device's PCIe down link (h2d_gbps), device -> host over its
 *   up link (d2h_gbps), device -> device over NVLink (p2p_gbps per
 *   direction, nvlink = 1) or over the source's up link, the
 *   destination's down link and p2p_gbps, whichever is slowest. A
 *   transfer ends on the nanosecond its last byte lands (rounded up).
 *   Concurrent transfers share each link fairly (engine.c): a transfer's
 *   rate is the minimum over its links of bandwidth / transfers on it. A
 *   copy that crosses no link costs copy_latency_ns on a stream; on the
 *   host its bytes at cpu_mem_gbps.
 *
 *   Collectives (sim_cost_allreduce).  An all-reduce of B bytes on the
 *   wire over n devices starts when every participant's stream reached it
 *   and takes, alpha-beta:
 *     ring:      allreduce_base_ns + 2(n-1) allreduce_step_ns + 2(n-1)/n B / p2p
 *     butterfly: allreduce_base_ns + log2(n) (allreduce_step_ns + B / p2p)
 *   and nothing for n = 1. BF16 compression converts f32 to bf16 first
 *   (an op moving the f32 and bf16 bytes), halving B, and back after.
 *
 * What replay cannot reproduce: concurrent transfers sharing a link or a
 * copy engine (replay times statements by dependencies, not in time
 * order). A run whose transfers never overlap (a policy that syncs around
 * every copy, or one device) replays to the nanosecond; others replay a
 * little faster than they ran (docs/device-model.md).
 */
#include "sim.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

/* Nanoseconds as an integer, truncated; a hand-written attribute cannot
 * push a time past a million seconds (nor the sums after it past int64_t). */
#define NS_MAX 1e15
static int64_t ns_of(double ns) { return ns < NS_MAX ? (int64_t)ns : (int64_t)NS_MAX; }

int64_t sim_cost_submit(const sim_model *m, trace_kind kind)
{
    switch (kind) {
    case TRACE_OP:
    case TRACE_COLLECTIVE:
        return m->launch_ns;
    case TRACE_RECORD:
        return m->event_record_ns;
    default:
        return m->api_call_ns;
    }
}

int64_t sim_cost_unblock(const sim_model *m, trace_kind kind, bool host)
{
    switch (kind) {
    case TRACE_SYNC:
        return m->sync_ns;
    case TRACE_WAIT:
        return host ? m->event_sync_ns : m->event_wait_device_ns;
    case TRACE_COPY:
        return host ? m->host_copy_ns : 0;
    default:
        return 0;
    }
}

int64_t sim_cost_host_barrier(const sim_model *m)
{
    bool oversub = m->cpu_threads > m->cpu_cores;
    switch ((sched_barrier_kind)m->pool_barrier) {
    case SCHED_BARRIER_FUTEX:
    case SCHED_BARRIER_PTHREAD:
        return m->futex_wake_ns;
    case SCHED_BARRIER_HYBRID:
        return oversub ? m->futex_wake_ns : m->spin_barrier_ns;
    default:
        return oversub ? m->oversub_barrier_ns : m->spin_barrier_ns;
    }
}

int64_t sim_cost_op(const sim_model *m, bool host, uint64_t flops, uint64_t flops_half,
                    uint64_t bytes, int64_t overhead_ns)
{
    double compute, memory;
    int64_t overhead;
    if (host) {
        overhead = overhead_ns >= 0 ? overhead_ns : sim_cost_host_barrier(m);
        compute = ((double)flops + (double)flops_half) / m->cpu_gflops;
        memory = (double)bytes / m->cpu_mem_gbps;
    } else {
        overhead = overhead_ns >= 0 ? overhead_ns : m->kernel_overhead_ns;
        compute = (double)flops / (m->gpu_tflops_f32 * 1e3) +
                  (double)flops_half / (m->gpu_tflops_f16 * 1e3);
        memory = (double)bytes / m->gpu_mem_gbps;
    }
    return ns_of((double)overhead) + ns_of(compute > memory ? compute : memory);
}

/*
 * The families of captured kernels, by what their names contain (case
 * folded), first match wins: attention and conv before gemm (a fused
 * attention kernel and cuDNN's implicit_convolve_sgemm run GEMMs), softmax and norm before reduce (they reduce too),
 * copies before elementwise. The words come from the kernel names of
 * cuBLAS/CUTLASS (gemm, gemv, sgemm, xmma), cuDNN (conv, implicit_convolve,
 * winograd), PyTorch's ATen (vectorized_elementwise_kernel, reduce_kernel,
 * softmax_warp_forward, layer_norm_kernel, CatArrayBatchedCopy), FlashAttention
 * (flash_fwd, fmha) and the profilers' own rows ("Memset (Device)").
 */
static const struct {
    const char *family;
    const char *words[12];
} kernel_families[] = {
    { "memset", { "memset" } },
    { "attention", { "attention", "flash", "fmha", "sdpa", "mha_" } },
    { "softmax", { "softmax" } },
    { "norm", { "norm" } },
    { "conv", { "conv", "winograd", "cudnn" } },
    { "gemm", { "gemm", "gemv", "matmul", "xmma", "mma_", "cutlass", "cublas", "dot_kernel" } },
    { "reduce", { "reduce", "pool", "argmax", "topk", "scan", "sum_kernel" } },
    { "copy", { "copy", "memcpy", "transpose", "cat_", "catarray", "gather", "scatter",
                "index" } },
    { "elementwise", { "elementwise", "unrolled", "vectorized", "fill", "add", "mul", "relu",
                       "gelu", "silu", "sigmoid", "tanh" } },
};

const char *sim_kernel_family(const char *name)
{
    char low[256];
    size_t n = 0;
    for (; name && name[n] && n + 1 < sizeof low; n++)
        low[n] = (char)tolower((unsigned char)name[n]);
    low[n] = '\0';
    for (size_t f = 0; f < sizeof kernel_families / sizeof kernel_families[0]; f++)
        for (size_t w = 0; w < 12 && kernel_families[f].words[w]; w++)
            if (strstr(low, kernel_families[f].words[w]))
                return kernel_families[f].family;
    return "other";
}

const char *sim_op_family(const trace *t, const trace_stmt *s)
{
    for (uint32_t a = 0; a < s->n_attr; a++)
        if (strcmp(trace_str(t, s->attr[a].key), "op") == 0 &&
            sim_family_name_ok(trace_str(t, s->attr[a].value)))
            return trace_str(t, s->attr[a].value);
    return sim_kernel_family(s->label == TRACE_LABEL_LAZY ? "" : trace_str(t, s->label));
}

int64_t sim_cost_kernel(const sim_model *m, const char *family, bool host, uint64_t flops,
                        uint64_t flops_half, uint64_t bytes, int64_t overhead_ns)
{
    const sim_kernel_rate *k = overhead_ns < 0 && family ? sim_model_kernel(m, family, host) : NULL;
    if (!k)
        return sim_cost_op(m, host, flops, flops_half, bytes, overhead_ns);
    double half_rate = k->gflops_f16 > 0 ? k->gflops_f16 : k->gflops;
    double ns = (k->gflops > 0 ? (double)flops / k->gflops : 0) +
                (half_rate > 0 ? (double)flops_half / half_rate : 0) +
                (k->gbps > 0 ? (double)bytes / k->gbps : 0);
    return k->fixed_ns + ns_of(ns);
}

static double min3(double a, double b, double c)
{
    double x = a < b ? a : b;
    return x < c ? x : c;
}

double sim_cost_link_gbps(const sim_model *m, sim_path path)
{
    switch (path) {
    case SIM_PATH_H2D:
        return m->h2d_gbps;
    case SIM_PATH_D2H:
        return m->d2h_gbps;
    case SIM_PATH_P2P:
        return m->nvlink ? m->p2p_gbps : min3(m->d2h_gbps, m->h2d_gbps, m->p2p_gbps);
    case SIM_PATH_NONE:
        break;
    }
    return 0;
}

int64_t sim_cost_transfer_ns(uint64_t bytes, double gbps)
{
    if (gbps <= 0)
        return 0;
    /* The engine finishes a transfer on the nanosecond its last byte lands. */
    return ns_of(ceil((double)bytes / gbps - 1e-9));
}

int64_t sim_cost_copy(const sim_model *m, bool host, sim_path path, uint64_t bytes)
{
    if (path == SIM_PATH_NONE)
        return host ? ns_of((double)bytes / m->cpu_mem_gbps) + m->host_copy_ns : m->copy_latency_ns;
    return m->copy_latency_ns + sim_cost_transfer_ns(bytes, sim_cost_link_gbps(m, path)) +
           sim_cost_unblock(m, TRACE_COPY, host);
}

int64_t sim_cost_allreduce(const sim_model *m, uint64_t n, uint64_t wire_bytes, bool butterfly)
{
    if (n <= 1)
        return 0;
    double b = (double)wire_bytes;
    if (butterfly) {
        int64_t rounds = 0;
        while ((1ull << rounds) < n)
            rounds++;
        return m->allreduce_base_ns + rounds * (m->allreduce_step_ns + ns_of(b / m->p2p_gbps));
    }
    return m->allreduce_base_ns + 2 * (int64_t)(n - 1) * m->allreduce_step_ns +
           ns_of(2.0 * (double)(n - 1) / (double)n * b / m->p2p_gbps);
}
