/*
 * bench_inject.c -- what a launch costs the launching thread in syncsim's
 * CUPTI injection library (real/cuda/inject*.c), without a GPU: the
 * library's callback code runs on the records CUPTI would give it (a
 * cudaLaunchKernel around a cuLaunchKernel, cudaEventRecord,
 * cudaStreamWaitEvent), through the stand-in driver and CUPTI of
 * tests/cuda/fake_cupti.c, and writes its log to a temporary file as it
 * would under `syncsim capture`.
 *
 * usage: bench_inject [LAUNCHES [SHAPE SITES]]   (default 2,000,000; SHAPE 0-2
 *        and SITES 0/1 run that one configuration in this process, for a profiler)
 *
 * Prints, for three launch shapes (launch_bound.cu's bump(float*, int); a
 * PyTorch vectorized kernel with std::array<char*, 3>; a broadcasting
 * closure of 648 bytes), with call sites on and off (SYNCSIM_CAPTURE_SITES):
 * ns per launch on the launching thread (the iteration of launch_bound.cu:
 * two launches, two records, two waits, divided by two), as its CPU time
 * (what it costs the program, whatever else the machine runs) and as wall
 * time, and the writer thread's CPU ns per launch (formatting and writing,
 * off the launching thread). Each configuration runs in a process of its own. What it does
 * not measure: the driver's and CUPTI's own cost of delivering a callback
 * (the GPU run's overhead figures, bench/gpu/all.sh), and the unwinding of
 * a real program's deeper stack (here a few frames).
 */
#include <stdio.h>
#include <stdlib.h>

#ifndef SYNCSIM_INJECT_BENCH
int main(void)
{
    puts("bench_inject: no CUDA headers in this build (the toolkit): not built");
    return 0;
}
#else

#include <cuda_runtime_api.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "real/cuda/inject.h"
#include "tests/cuda/fake_cupti.h"

int InitializeInjection(void);

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const char *name,
                 const void *params, uint32_t corr, const void *inner_params)
{
    int ret = 0;
    CUpti_CallbackData cb = { .callbackSite = CUPTI_API_ENTER, .functionName = name,
                              .functionParams = params, .functionReturnValue = &ret,
                              .context = FAKE_CONTEXT, .correlationId = corr };
    fake_callback(dom, cbid, &cb);
    if (inner_params) {         /* the driver launch inside cudaLaunchKernel */
        CUpti_CallbackData d = cb;
        d.functionName = "cuLaunchKernel";
        d.functionParams = inner_params;
        d.correlationId = corr + 1;
        fake_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d);
        d.callbackSite = CUPTI_API_EXIT;
        fake_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d);
    }
    cb.callbackSite = CUPTI_API_EXIT;
    fake_callback(dom, cbid, &cb);
}

typedef struct shape {
    const char *what;
    int n;
    size_t sizes[4];
} shape;

static const shape shapes[] = {
    { "bump(float*, int)", 2, { 8, 4 } },
    { "vectorized_elementwise_kernel(int, functor, std::array<char*, 3>)", 3, { 4, 8, 24 } },
    { "elementwise_kernel(int, 648-byte broadcasting closure)", 2, { 4, 648 } },
};

/* One configuration, in this (child) process: prints its line. */
static int run(const shape *sh, int sites, long launches, const char *log)
{
    setenv("SYNCSIM_CAPTURE_LOG", log, 1);
    setenv("SYNCSIM_CAPTURE_SITES", sites ? "1" : "0", 1);
    if (InitializeInjection() != 1)
        return 1;
    CUfunction f = (CUfunction)0x1001;
    fake_function(f, sh->n, sh->sizes);
    /* the program's memory, as the library sees it allocated */
    CUdeviceptr base = 0x7f0000000000ull;
    cuMemAlloc_v2_params alloc = { &base, 64 << 20 };
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &alloc,
         1, NULL);
    uint64_t ptr = base + 256, words[81] = { 0 }, operands[3] = { base, base + 4096, base + 8192 };
    int n = 1024;
    words[3] = 0x1234567ull;    /* strides and sizes: not addresses of anything */
    words[76] = base;
    words[77] = base + 4096;
    words[78] = base + 8192;
    void *params[4];
    if (sh->n == 2 && sh->sizes[1] == 4) {
        params[0] = &ptr;
        params[1] = &n;
    } else if (sh->n == 3) {
        params[0] = &n;
        params[1] = &ptr;
        params[2] = operands;
    } else {
        params[0] = &n;
        params[1] = words;
    }
    cuLaunchKernel_params drv = { .f = f, .hStream = (CUstream)0x70, .kernelParams = params };
    cudaLaunchKernel_v7000_params rt = { .stream = (cudaStream_t)0x70 };
    cudaEventRecord_v3020_params rec = { (cudaEvent_t)0x900, (cudaStream_t)0x70 };
    cudaStreamWaitEvent_v3020_params wait = { (cudaStream_t)0x71, (cudaEvent_t)0x900, 0 };
    uint64_t w0 = ilog_writer_ns(), t0 = clock_ns(CLOCK_MONOTONIC);
    uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    uint32_t corr = 10;
    for (long i = 0; i < launches / 2; i++) {   /* launch_bound.cu's iteration */
        for (int s = 0; s < 2; s++) {
            rt.stream = drv.hStream = (CUstream)(uintptr_t)(0x70 + s);
            rec.stream = wait.stream = (cudaStream_t)(uintptr_t)(0x70 + s);
            call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                 "cudaLaunchKernel", &rt, corr, &drv);
            call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
                 "cudaEventRecord", &rec, corr + 2, NULL);
            call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
                 "cudaStreamWaitEvent", &wait, corr + 3, NULL);
            corr += 4;
        }
    }
    uint64_t c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t1 = clock_ns(CLOCK_MONOTONIC);
    uint64_t lines_before_close = ilog_lines();
    ilog_close();
    uint64_t w1 = ilog_writer_ns();
    long done = launches / 2 * 2;
    printf("  %-66s sites %-3s launching thread %7.1f ns/launch CPU (%7.1f wall), writer %7.1f "
           "ns/launch CPU (%llu lines)\n", sh->what, sites ? "on" : "off",
           (double)(c1 - c0) / (double)done, (double)(t1 - t0) / (double)done,
           (double)(w1 - w0) / (double)done, (unsigned long long)lines_before_close);
    fflush(stdout);             /* the child ends with _exit */
    return 0;
}

int main(int argc, char **argv)
{
    long launches = argc > 1 ? atol(argv[1]) : 2000000;
    if (launches < 2)
        launches = 2;
    if (argc > 3) {             /* one configuration, here */
        int sh = atoi(argv[2]);
        if (sh < 0 || sh >= (int)(sizeof shapes / sizeof shapes[0]))
            return 2;
        return run(&shapes[sh], atoi(argv[3]), launches, "/dev/null");
    }
    char log[] = "/tmp/syncsim-bench-inject-XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0) {
        perror("bench_inject: mkstemp");
        return 1;
    }
    close(fd);
    printf("bench_inject: %ld launches through the callback path (each with a record and a wait),"
           " stand-in driver and CUPTI\n", launches);
    fflush(stdout);
    int rc = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int sites = 1; sites >= 0; sites--) {
            truncate(log, 0);
            pid_t child = fork();
            if (child == 0)
                _exit(run(&shapes[s], sites, launches, log));
            int st = 0;
            waitpid(child, &st, 0);
            rc |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
    unlink(log);
    return rc;
}
#endif
