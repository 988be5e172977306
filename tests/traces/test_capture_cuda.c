/*
 * test_capture_cuda.c -- the event log of `syncsim capture` becomes a
 * trace (traces/formats/cuda_log.c through traces/formats/capture.c), checked on
 * synthetic call sequences: no GPU, no CUDA header. Each case is a small
 * log of what a CUDA program called and what its GPU ran, and the findings
 * the checker must then give.
 */
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "check/check.h"
#include "import_test_util.h"
#include "traces/formats/formats.h"

#define HEAD "syncsim-cuda-log 1\n"

/* A checked log: the source stays open (findings name its strings). */
typedef struct checked {
    trace_source src;
    check_report *rep;
    char path[64];
} checked;

static checked *check_log(const char *text)
{
    checked *c = calloc(1, sizeof *c);
    assert_non_null(c);
    write_log(c->path, sizeof c->path, text);
    trace_error err = { 0 };
    if (trace_source_open(&c->src, c->path, &(trace_source_opts){ 0 }, &err) != 0)
        fail_msg("%s", err.msg);
    assert_string_equal(c->src.format->name, "cuda-log");
    check_options opt = { 0 };
    if (check_trace(&c->src.reader, &opt, &c->rep, &err) != 0)
        fail_msg("%s", err.msg);
    return c;
}

static void checked_free(checked *c)
{
    check_report_free(c->rep);
    trace_source_close(&c->src);
    unlink(c->path);
    free(c);
}

static size_t n_kind(const checked *c, trace_finding_kind k)
{
    return check_report_count_kind(c->rep, k);
}

/* The one race of c: its two statements' labels. */
static void assert_race(const checked *c, const char *first, const char *second)
{
    assert_int_equal(check_report_count(c->rep), 1);
    const trace_finding *f = check_report_finding(c->rep, 0);
    assert_int_equal(f->kind, TRACE_FINDING_RACE);
    const trace *t = c->src.reader.trace;
    assert_string_equal(trace_str(t, f->first.label), first);
    assert_string_equal(trace_str(t, f->second.label), second);
}

/* Three blocking/legacy streams: produce on s13, a kernel on the default
 * stream s7, consume on s14. */
#define THREE_STREAMS(DEFAULT_KIND)                                                        \
    HEAD "stream pid=1 dev=0 stream=7 kind=" DEFAULT_KIND "\n"                              \
         "stream pid=1 dev=0 stream=13 kind=blocking\n"                                     \
         "stream pid=1 dev=0 stream=14 kind=blocking\n"                                     \
         "api pid=1 tid=1 t0=100 t1=200 corr=1 dev=0 ptr=0x7000 size=4096 name=cudaMalloc\n" \
         "api pid=1 tid=1 t0=300 t1=400 corr=2 dev=0 stream=13 name=cudaLaunchKernel\n"     \
         "param pid=1 corr=2 ptr=0x7000 mode=rw\n"                                          \
         "gpu pid=1 corr=2 kind=kernel dev=0 stream=13 t0=500 t1=900 name=produce\n"        \
         "api pid=1 tid=1 t0=410 t1=420 corr=3 dev=0 stream=7 name=cudaLaunchKernel\n"     \
         "gpu pid=1 corr=3 kind=kernel dev=0 stream=7 t0=900 t1=950 name=between\n"         \
         "api pid=1 tid=1 t0=430 t1=440 corr=4 dev=0 stream=14 name=cudaLaunchKernel\n"     \
         "param pid=1 corr=4 ptr=0x7000 mode=r\n"                                           \
         "gpu pid=1 corr=4 kind=kernel dev=0 stream=14 t0=950 t1=990 name=consume\n"        \
         "api pid=1 tid=1 t0=1000 t1=1100 corr=5 dev=0 name=cudaDeviceSynchronize\n"

/* The legacy default stream orders the blocking streams around it. */
static void test_legacy_default_stream_clean(void **state)
{
    (void)state;
    checked *c = check_log(THREE_STREAMS("legacy"));
    assert_int_equal(check_report_count(c->rep), 0);
    const trace *t = c->src.reader.trace;
    assert_meta(t, "accesses", "pointers");
    checked_free(c);
}

/* A per-thread default stream orders nothing with other streams: race. */
static void test_per_thread_default_stream_race(void **state)
{
    (void)state;
    checked *c = check_log(THREE_STREAMS("per-thread"));
    assert_race(c, "produce", "consume");
    checked_free(c);
}

/* Kernel parameters: a pointer into an allocation is an access from it to
 * the allocation's end, read-only for a const pointee; values that point
 * nowhere known are counted, not guessed. */
static void test_kernel_params(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x1000 size=256 name=cudaMalloc_v3020\n"
        "api pid=1 tid=1 t0=30 t1=40 corr=2 dev=0 stream=0 name=cudaLaunchKernel_v7000\n"
        "param pid=1 corr=2 idx=0 ptr=0x1040\n"
        "param pid=1 corr=2 idx=1 ptr=0x1000\n"
        "param pid=1 corr=2 idx=2 ptr=0x99\n"
        "gpu pid=1 corr=2 kind=kernel dev=0 stream=0 t0=50 t1=60 name=axpy(float const*, float*, int)\n");
    trace_stmt s = find_label(t, "axpy(float const*, float*, int)");
    assert_int_equal(s.n_access, 2);
    assert_int_equal(s.access[0].mode, TRACE_R);
    assert_int_equal(s.access[0].lo, 0x40);
    assert_int_equal(s.access[0].hi, 256);
    assert_int_equal(s.access[1].mode, TRACE_RW);
    assert_int_equal(s.access[1].lo, 0);
    assert_int_equal(s.access[1].hi, 256);
    assert_string_equal(trace_str(t, t->buffers[s.access[0].buffer].name), "gpu0.b0");
    assert_meta(t, "dropped.unresolved-param", "1");
    assert_int_equal(count_kind(t, TRACE_ALLOC), 1);
    trace_free(t);
}

/* Memsets write exactly their bytes; registered host memory is pinned,
 * managed memory its own space; unregistering ends a registration. */
static void test_memset_and_memory_kinds(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=12 t1=13 corr=2 dev=0 ptr=0x50000 size=4096 name=cudaHostRegister\n"
        "api pid=1 tid=1 t0=14 t1=15 corr=3 dev=0 ptr=0x90000 size=64 name=cudaMallocManaged\n"
        "api pid=1 tid=1 t0=16 t1=17 corr=4 dev=0 stream=13 ptr=0x1100 bytes=256 name=cudaMemsetAsync\n"
        "gpu pid=1 corr=4 kind=memset dev=0 stream=13 t0=20 t1=30 bytes=256 name=Memset\n"
        "api pid=1 tid=1 t0=31 t1=32 corr=5 dev=0 stream=13 name=cudaStreamSynchronize\n"
        "api pid=1 tid=1 t0=33 t1=34 corr=6 dev=0 ptr=0x50000 name=cudaHostUnregister\n");
    trace_stmt s = find_label(t, "Memset");
    assert_int_equal(s.n_access, 1);
    assert_int_equal(s.access[0].mode, TRACE_W);
    assert_int_equal(s.access[0].lo, 0x100);
    assert_int_equal(s.access[0].hi, 0x200);
    assert_string_equal(stmt_attr(t, &s, "bytes"), "256");
    assert_int_equal(count_kind(t, TRACE_ALLOC), 3);
    assert_int_equal(count_kind(t, TRACE_FREE), 1);
    assert_non_null(trace_find_buffer(t, "pinned.b1", 9) != TRACE_NONE ? "ok" : NULL);
    uint32_t m = trace_find_buffer(t, "managed.b2", 10);
    assert_int_not_equal(m, TRACE_NONE);
    assert_int_equal(t->buffers[m].size, 64);
    assert_true(t->buffers[trace_find_buffer(t, "pinned.b1", 9)].pinned);
    trace_free(t);
}

/* Const-ness from a demangled signature: the pointee, not the pointer. */
static void test_param_const(void **state)
{
    (void)state;
    const char *sig = "void ns::k<float, 2>(float const*, float*, const int*, float* const, "
                      "Pair<int*, float const*>, double const* const, int, Vec<float> const*)";
    static const bool want[] = { true, false, true, false, false, true, false, true, false };
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++)
        if (capture_param_const(sig, i) != want[i])
            fail_msg("parameter %u: expected %s", i, want[i] ? "const" : "not const");
    assert_false(capture_param_const("produce", 0));
    assert_false(capture_param_const(NULL, 0));
    assert_true(capture_param_const("f(constant_t const*)", 0));
    assert_false(capture_param_const("f(constant_t*)", 0));
}

/* A kernel reads a buffer before the async H2D copy into it is waited for. */
static void test_h2d_not_waited_race(void **state)
{
    (void)state;
    checked *c = check_log(HEAD
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
        "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=21 t1=22 corr=2 dev=0 ptr=0x90000 size=1024 name=cudaMallocHost\n"
        "api pid=1 tid=1 t0=30 t1=31 corr=3 dev=0 stream=13 src=0x90000 dst=0x1000 bytes=1024 name=cudaMemcpyAsync\n"
        "gpu pid=1 corr=3 kind=memcpy dev=0 stream=13 t0=40 t1=80 bytes=1024 srcmem=pinned dstmem=device name=Memcpy HtoD\n"
        "api pid=1 tid=1 t0=32 t1=33 corr=4 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 ptr=0x1000 mode=r\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=14 t0=40 t1=60 name=use\n"
        "api pid=1 tid=1 t0=90 t1=100 corr=5 dev=0 name=cudaDeviceSynchronize\n");
    assert_race(c, "Memcpy HtoD", "use");
    checked_free(c);
}

/* The same with the event the fix records and waits for: clean. */
static void test_h2d_waited_clean(void **state)
{
    (void)state;
    checked *c = check_log(HEAD
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
        "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=21 t1=22 corr=2 dev=0 ptr=0x90000 size=1024 name=cudaMallocHost\n"
        "api pid=1 tid=1 t0=30 t1=31 corr=3 dev=0 stream=13 src=0x90000 dst=0x1000 bytes=1024 name=cudaMemcpyAsync\n"
        "gpu pid=1 corr=3 kind=memcpy dev=0 stream=13 t0=40 t1=80 bytes=1024 srcmem=pinned dstmem=device name=Memcpy HtoD\n"
        "api pid=1 tid=1 t0=31 t1=32 corr=6 dev=0 stream=13 event=5 name=cudaEventRecord\n"
        "api pid=1 tid=1 t0=32 t1=32 corr=7 dev=0 stream=14 event=5 name=cudaStreamWaitEvent\n"
        "api pid=1 tid=1 t0=33 t1=34 corr=4 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 ptr=0x1000 mode=r\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=14 t0=80 t1=90 name=use\n"
        "api pid=1 tid=1 t0=90 t1=100 corr=5 dev=0 name=cudaDeviceSynchronize\n");
    assert_int_equal(check_report_count(c->rep), 0);
    checked_free(c);
}

/* An event recorded on the wrong stream orders the wrong work: race. */
static void test_event_wrong_stream_race(void **state)
{
    (void)state;
    checked *c = check_log(HEAD
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
        "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=30 t1=31 corr=2 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=2 ptr=0x1000 mode=rw\n"
        "gpu pid=1 corr=2 kind=kernel dev=0 stream=13 t0=40 t1=80 name=produce\n"
        "api pid=1 tid=1 t0=32 t1=33 corr=3 dev=0 stream=14 event=9 name=cudaEventRecord\n"
        "api pid=1 tid=1 t0=34 t1=35 corr=4 dev=0 stream=14 event=9 name=cudaStreamWaitEvent\n"
        "api pid=1 tid=1 t0=36 t1=37 corr=5 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 ptr=0x1000 mode=r\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=40 t1=50 name=consume\n"
        "api pid=1 tid=1 t0=90 t1=100 corr=6 dev=0 name=cudaDeviceSynchronize\n");
    assert_race(c, "produce", "consume");
    checked_free(c);
}

/* A wait on an event never recorded. */
static void test_wait_unrecorded(void **state)
{
    (void)state;
    checked *c = check_log(HEAD
        "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
        "api pid=1 tid=1 t0=34 t1=35 corr=4 dev=0 stream=14 event=9 name=cudaStreamWaitEvent\n"
        "api pid=1 tid=1 t0=36 t1=37 corr=5 dev=0 stream=14 name=cudaLaunchKernel\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=40 t1=50 name=consume\n"
        "api pid=1 tid=1 t0=50 t1=60 corr=6 dev=0 event=9 name=cudaEventSynchronize\n");
    assert_int_equal(n_kind(c, TRACE_FINDING_WAIT_UNRECORDED), 2);
    assert_int_equal(check_report_count(c->rep), 2);
    checked_free(c);
}

/* A host read of pinned memory (an NVTX mark) after an async D2H copy into
 * it without a sync: race; with cudaStreamSynchronize before it: clean. */
static const char *d2h_log(bool sync)
{
    static char buf[2048];
    snprintf(buf, sizeof buf, HEAD
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=21 t1=22 corr=2 dev=0 ptr=0x90000 size=1024 name=cudaHostAlloc\n"
        "api pid=1 tid=1 t0=30 t1=31 corr=3 dev=0 stream=13 src=0x1000 dst=0x90000 bytes=1024 name=cudaMemcpyAsync\n"
        "gpu pid=1 corr=3 kind=memcpy dev=0 stream=13 t0=40 t1=80 bytes=1024 srcmem=device dstmem=pinned name=Memcpy DtoH\n"
        "%s"
        "host pid=1 tid=1 t0=100 t1=100 mode=r ptr=0x90000 size=1024 name=read result\n",
        sync ? "api pid=1 tid=1 t0=32 t1=90 corr=4 dev=0 stream=13 name=cudaStreamSynchronize\n" : "");
    return buf;
}

static void test_d2h_host_read(void **state)
{
    (void)state;
    checked *c = check_log(d2h_log(false));
    assert_race(c, "Memcpy DtoH", "read result");
    checked_free(c);
    c = check_log(d2h_log(true));
    assert_int_equal(check_report_count(c->rep), 0);
    checked_free(c);
}

/* cudaMemcpy from pageable memory returns once the host buffer may be
 * reused: the host overwriting it right after is clean. */
static const char PAGEABLE_LOG[] = HEAD
        "stream pid=1 dev=0 stream=7 kind=legacy\n"
        "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "host pid=1 tid=1 t0=25 t1=26 mode=w ptr=0x55000 size=1024 name=fill input\n"
        "api pid=1 tid=1 t0=30 t1=90 corr=3 dev=0 stream=7 src=0x55000 dst=0x1000 bytes=1024 name=cudaMemcpy\n"
        "gpu pid=1 corr=3 kind=memcpy dev=0 stream=7 t0=40 t1=80 bytes=1024 srcmem=pageable dstmem=device name=Memcpy HtoD\n"
        "host pid=1 tid=1 t0=95 t1=96 mode=w ptr=0x55000 size=1024 name=next input\n";

static void test_pageable_memcpy_clean(void **state)
{
    (void)state;
    checked *c = check_log(PAGEABLE_LOG);
    assert_int_equal(check_report_count(c->rep), 0);
    checked_free(c);
    trace *t = load_log(PAGEABLE_LOG);
    trace_stmt s = find_label(t, "Memcpy HtoD");
    assert_int_equal(s.kind, TRACE_COPY);
    assert_string_equal(trace_str(t, t->buffers[s.access[0].buffer].name), "host.b1");
    assert_int_equal(count_kind(t, TRACE_SYNC), 1);   /* the blocking copy's */
    trace_free(t);
}

/* Stream-ordered free on s13, then the pool hands the same memory to s14
 * (cudaMallocAsync: same address and size) while nothing orders the two
 * streams: the free and the new owner's write race. */
static const char REUSE_LOG[] = HEAD
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 stream=13 ptr=0x1000 size=1024 name=cudaMallocAsync\n"
        "api pid=1 tid=1 t0=12 t1=13 corr=2 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=2 ptr=0x1000 mode=rw\n"
        "gpu pid=1 corr=2 kind=kernel dev=0 stream=13 t0=20 t1=80 name=first owner\n"
        "api pid=1 tid=1 t0=14 t1=15 corr=3 dev=0 stream=13 ptr=0x1000 name=cudaFreeAsync\n"
        "api pid=1 tid=1 t0=16 t1=17 corr=4 dev=0 stream=14 ptr=0x1000 size=1024 name=cudaMallocAsync\n"
        "api pid=1 tid=1 t0=18 t1=19 corr=5 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 ptr=0x1000 mode=rw\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=20 t1=30 name=second owner\n"
        "api pid=1 tid=1 t0=90 t1=100 corr=6 dev=0 name=cudaDeviceSynchronize\n";

static void test_stream_ordered_free_reuse(void **state)
{
    (void)state;
    checked *c = check_log(REUSE_LOG);
    assert_true(n_kind(c, TRACE_FINDING_RACE) >= 1);
    assert_int_equal(check_report_count(c->rep), n_kind(c, TRACE_FINDING_RACE));
    checked_free(c);
    trace *t = load_log(REUSE_LOG);
    assert_int_equal(count_kind(t, TRACE_ALLOC), 2);
    assert_int_equal(count_kind(t, TRACE_FREE), 1);
    trace_stmt s = find_label(t, "second owner");
    assert_string_equal(trace_str(t, t->buffers[s.access[0].buffer].name), "gpu0.b0");
    trace_free(t);
}

/* cudaFree then a kernel still using the pointer: use after free. */
static void test_use_after_free(void **state)
{
    (void)state;
    checked *c = check_log(HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=14 t1=15 corr=3 dev=0 ptr=0x1000 name=cudaFree\n"
        "api pid=1 tid=1 t0=18 t1=19 corr=5 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 ptr=0x1000 mode=rw\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=13 t0=20 t1=30 name=late\n"
        "api pid=1 tid=1 t0=90 t1=100 corr=6 dev=0 name=cudaDeviceSynchronize\n");
    assert_int_equal(n_kind(c, TRACE_FINDING_USE_AFTER_FREE), 1);
    checked_free(c);
}

/* A peer copy from gpu0 to gpu1 on gpu0's stream, read on gpu1 without a
 * wait: race. */
static const char PEER_LOG[] = HEAD
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "stream pid=1 dev=1 stream=21 kind=nonblocking\n"
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=12 t1=13 corr=2 dev=1 ptr=0x8000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=14 t1=15 corr=3 dev=0 stream=13 src=0x1000 dst=0x8000 bytes=1024 name=cudaMemcpyPeerAsync\n"
        "gpu pid=1 corr=3 kind=memcpy dev=0 stream=13 t0=20 t1=60 bytes=1024 srcmem=device dstmem=device srcdev=0 dstdev=1 name=Memcpy PtoP\n"
        "api pid=1 tid=1 t0=16 t1=17 corr=4 dev=1 stream=21 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 ptr=0x8000 mode=r\n"
        "gpu pid=1 corr=4 kind=kernel dev=1 stream=21 t0=20 t1=30 name=consume on gpu1\n"
        "api pid=1 tid=1 t0=90 t1=100 corr=6 dev=0 name=cudaDeviceSynchronize\n"
        "api pid=1 tid=1 t0=101 t1=102 corr=7 dev=1 name=cudaDeviceSynchronize\n";

static void test_peer_copy_without_wait(void **state)
{
    (void)state;
    checked *c = check_log(PEER_LOG);
    assert_race(c, "Memcpy PtoP", "consume on gpu1");
    checked_free(c);
    trace *t = load_log(PEER_LOG);
    trace_stmt s = find_label(t, "Memcpy PtoP");
    assert_string_equal(trace_str(t, t->buffers[s.access[1].buffer].name), "gpu1.b1");
    trace_free(t);
}

/* A CUDA graph launch: its nodes' kernels on the launch stream, each with
 * its node's parameters; NVTX ranges that repeat mark iterations. */
static void test_graph_launch_and_nvtx(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=64 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=12 t1=13 corr=2 dev=0 ptr=0x2000 size=64 name=cudaMalloc\n"
        "range pid=1 tid=1 t0=20 t1=50 name=step\n"
        "api pid=1 tid=1 t0=21 t1=22 corr=3 dev=0 stream=13 name=cudaGraphLaunch\n"
        "param pid=1 corr=3 node=1 ptr=0x1000 mode=rw\n"
        "param pid=1 corr=3 node=2 ptr=0x1000 mode=r\n"
        "param pid=1 corr=3 node=2 ptr=0x2000 mode=rw\n"
        "gpu pid=1 corr=3 kind=kernel dev=0 stream=13 t0=30 t1=40 node=1 name=node a\n"
        "gpu pid=1 corr=3 kind=kernel dev=0 stream=13 t0=41 t1=45 node=2 name=node b\n"
        "api pid=1 tid=1 t0=46 t1=48 corr=4 dev=0 stream=13 name=cudaStreamSynchronize\n"
        "range pid=1 tid=1 t0=60 t1=90 name=step\n"
        "api pid=1 tid=1 t0=61 t1=62 corr=5 dev=0 stream=13 name=cudaGraphLaunch\n"
        "param pid=1 corr=5 node=1 ptr=0x1000 mode=rw\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=13 t0=70 t1=80 node=1 name=node a\n");
    trace_stmt a = find_label(t, "node a"), b = find_label(t, "node b");
    assert_int_equal(a.n_access, 1);
    assert_int_equal(b.n_access, 2);
    assert_int_equal(b.access[1].mode, TRACE_RW);
    assert_int_not_equal(a.by, TRACE_NONE);
    assert_string_equal(stmt_attr(t, &a, "iter"), "step#1");
    assert_int_equal(count_kind(t, TRACE_OP) >= 3, 1);
    /* the second launch's node a is in step#2 */
    int seen = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.label != TRACE_NONE && strcmp(trace_str(t, s.label), "node a") == 0 &&
            strcmp(stmt_attr(t, &s, "iter"), "step#2") == 0)
            seen++;
    }
    assert_int_equal(seen, 1);
    trace_free(t);
}

/* cuBLAS: the call with its documented read/write set, in place of the
 * kernels it launched. */
static void test_cublas_call(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=12 t1=13 corr=2 dev=0 ptr=0x2000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=14 t1=15 corr=3 dev=0 ptr=0x3000 size=4096 name=cudaMalloc\n"
        "lib pid=1 tid=1 t0=20 t1=40 dev=0 stream=13 gemm=0,1,16,32,8,16,32,16,4,1 a=0x1000 b=0x2000 c=0x3000 name=cublasSgemm_v2\n"
        "api pid=1 tid=1 t0=25 t1=30 corr=4 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 ptr=0x1000 mode=rw\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=13 t0=50 t1=90 name=sm90_xmma_gemm\n");
    trace_stmt s = find_label(t, "cublasSgemm_v2");
    assert_int_equal(s.kind, TRACE_OP);
    assert_int_equal(s.n_access, 3);
    assert_int_equal(s.access[0].mode, TRACE_R);     /* A: 16 x 8, lda 16 */
    assert_int_equal(s.access[0].hi - s.access[0].lo, (16 * 7 + 16) * 4);
    assert_int_equal(s.access[1].hi - s.access[1].lo, (32 * 7 + 32) * 4); /* B^T: 32 x 8 */
    assert_int_equal(s.access[2].mode, TRACE_RW);    /* beta != 0 */
    assert_int_equal(s.access[2].hi - s.access[2].lo, (16 * 31 + 16) * 4);
    assert_int_equal(s.t, 50);
    assert_int_equal(s.dur, 40);
    assert_int_not_equal(s.by, TRACE_NONE);
    assert_meta(t, "capture.library_kernels", "1");
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt o;
        trace_stmt_at(t, i, &o);
        if (o.label != TRACE_NONE)
            assert_string_not_equal(trace_str(t, o.label), "sm90_xmma_gemm");
    }
    trace_free(t);
}

/* The NCCL rule on its own: which side is count x ranks, in place. */
static void test_nccl_spans(void **state)
{
    (void)state;
    cap_span sp[2];
    unsigned n;
    assert_string_equal(capture_nccl_spans("ncclAllGather", 100, 200, 8, 4, 3, sp, &n),
                        "allgather");
    assert_int_equal(n, 2);
    assert_int_equal(sp[0].len, 32);
    assert_int_equal(sp[0].mode, TRACE_R);
    assert_int_equal(sp[1].len, 96);
    assert_int_equal(sp[1].mode, TRACE_W);
    assert_string_equal(capture_nccl_spans("ncclReduceScatter", 100, 200, 8, 4, 3, sp, &n),
                        "reducescatter");
    assert_int_equal(sp[0].len, 96);
    assert_int_equal(sp[1].len, 32);
    assert_string_equal(capture_nccl_spans("ncclAllReduce", 100, 100, 8, 2, 4, sp, &n),
                        "allreduce");
    assert_int_equal(n, 1);
    assert_int_equal(sp[0].mode, TRACE_RW);
    assert_int_equal(sp[0].len, 16);
    assert_null(capture_nccl_spans("ncclSend", 1, 2, 8, 4, 2, sp, &n));
    assert_int_equal(n, 0);
}

/* The GEMM rule on its own: transposes, leading dimensions, beta. */
static void test_gemm_spans(void **state)
{
    (void)state;
    cap_span sp[3];
    assert_true(capture_gemm_spans(false, false, 4, 3, 2, 5, 2, 4, 4, false, 100, 200, 300, sp));
    assert_int_equal(sp[0].len, (5 * 1 + 4) * 4);   /* A 4 x 2, lda 5 */
    assert_int_equal(sp[1].len, (2 * 2 + 2) * 4);   /* B 2 x 3, ldb 2 */
    assert_int_equal(sp[2].len, (4 * 2 + 4) * 4);   /* C 4 x 3 */
    assert_int_equal(sp[2].mode, TRACE_W);
    assert_int_equal(sp[1].ptr, 200);
    assert_true(capture_gemm_spans(true, false, 4, 3, 2, 2, 2, 4, 2, true, 1, 2, 3, sp));
    assert_int_equal(sp[0].len, (2 * 3 + 2) * 2);   /* A stored 2 x 4 */
    assert_int_equal(sp[2].mode, TRACE_RW);
    assert_false(capture_gemm_spans(false, false, 4, 3, 2, 3, 2, 4, 4, false, 1, 2, 3, sp));
    assert_false(capture_gemm_spans(false, false, 0, 3, 2, 4, 2, 4, 4, false, 1, 2, 3, sp));
}

/* NCCL: a collective of its communicator, with its bytes and buffers. Two
 * ranks (processes) of one communicator agree: clean. */
static const char NCCL_LOG[] = HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=4096 name=cudaMalloc\n"
        "api pid=2 tid=2 t0=10 t1=11 corr=1 dev=1 ptr=0x1000 size=4096 name=cudaMalloc\n"
        "lib pid=1 tid=1 t0=20 t1=40 dev=0 stream=13 nccl=1024,4 send=0x1000 recv=0x1000 comm=c5e1 ranks=2 name=ncclAllReduce\n"
        "lib pid=2 tid=2 t0=21 t1=41 dev=1 stream=13 acc=0x1000:4096:rw comm=c5e1 coll=allreduce ranks=2 bytes=4096 name=ncclAllReduce\n"
        "api pid=1 tid=1 t0=50 t1=60 corr=2 dev=0 stream=13 name=cudaStreamSynchronize\n"
        "api pid=2 tid=2 t0=50 t1=60 corr=2 dev=1 stream=13 name=cudaStreamSynchronize\n";

static void test_nccl_collective(void **state)
{
    (void)state;
    checked *c = check_log(NCCL_LOG);
    assert_int_equal(check_report_count(c->rep), 0);
    checked_free(c);
    trace *t = load_log(NCCL_LOG);
    trace_stmt s = find_label(t, "ncclAllReduce");
    assert_int_equal(s.kind, TRACE_COLLECTIVE);
    assert_string_equal(trace_str(t, s.object), "c5e1");
    assert_string_equal(trace_str(t, s.coll_kind), "allreduce");
    assert_int_equal(s.count, 2);
    assert_string_equal(stmt_attr(t, &s, "bytes"), "4096");
    assert_int_equal(s.n_access, 1);
    trace_free(t);
}

/* PyTorch's caching allocator: one 1 MiB cudaMalloc segment holding
 * tensor blocks. Block A (0x10000) is used by a kernel on the side stream
 * s14, another block C (0x10200) by a kernel on s13 meanwhile; A is freed
 * and its bytes given to a new block B on s13, whose kernel writes them.
 * RECORD_STREAM is what happens between the side kernel and the free. */
#define ALLOCATOR(RECORD_STREAM)                                                               \
    HEAD "stream pid=1 dev=0 stream=13 kind=blocking\n"                                        \
         "stream pid=1 dev=0 stream=14 kind=nonblocking\n"                                     \
         "clock pid=1 t0=0 unix=5000000000\n"                                                  \
         "api pid=1 tid=1 t0=100000 t1=110000 corr=1 dev=0 ptr=0x10000 size=1048576 name=cudaMalloc\n" \
         "block pid=1 dev=0 stream=13 us=5000150 action=segment_alloc ptr=0x10000 size=1048576\n" \
         "block pid=1 dev=0 stream=13 us=5000150 action=alloc ptr=0x10000 size=512 py=a.py:3\n" \
         "block pid=1 dev=0 stream=13 us=5000160 action=alloc ptr=0x10200 size=512 py=a.py:4\n" \
         "api pid=1 tid=1 t0=200000 t1=201000 corr=2 dev=0 stream=13 name=cudaLaunchKernel\n"   \
         "param pid=1 corr=2 idx=0 ptr=0x10000 mode=w\n"                                       \
         "gpu pid=1 corr=2 kind=kernel dev=0 stream=13 t0=205000 t1=206000 name=fill_a\n"      \
         "api pid=1 tid=1 t0=207000 t1=207500 corr=3 dev=0 stream=13 event=1 name=cudaEventRecord\n" \
         "api pid=1 tid=1 t0=208000 t1=208500 corr=4 dev=0 stream=14 event=1 name=cudaStreamWaitEvent\n" \
         "api pid=1 tid=1 t0=300000 t1=301000 corr=5 dev=0 stream=13 name=cudaLaunchKernel\n"   \
         "param pid=1 corr=5 idx=0 ptr=0x10200 mode=w\n"                                       \
         "gpu pid=1 corr=5 kind=kernel dev=0 stream=13 t0=305000 t1=306000 name=other\n"       \
         "api pid=1 tid=1 t0=400000 t1=401000 corr=6 dev=0 stream=14 name=cudaLaunchKernel\n"   \
         "param pid=1 corr=6 idx=0 ptr=0x10000 mode=w\n"                                       \
         "gpu pid=1 corr=6 kind=kernel dev=0 stream=14 t0=405000 t1=406000 name=side_use\n"    \
         RECORD_STREAM                                                                         \
         "block pid=1 dev=0 stream=13 us=5000600 action=alloc ptr=0x10000 size=512 py=a.py:9\n" \
         "api pid=1 tid=1 t0=700000 t1=701000 corr=8 dev=0 stream=13 name=cudaLaunchKernel\n"   \
         "param pid=1 corr=8 idx=0 ptr=0x10000 mode=w\n"                                       \
         "gpu pid=1 corr=8 kind=kernel dev=0 stream=13 t0=705000 t1=706000 name=new_owner\n"   \
         "api pid=1 tid=1 t0=900000 t1=901000 corr=9 dev=0 name=cudaDeviceSynchronize\n"

/* A block freed after a side stream's use and reused on the allocation
 * stream without record_stream: the side kernel and the new owner's write
 * the same bytes unordered. Only that pair: the kernels of two different
 * blocks of one segment (other, side_use) do not meet, as they would if a
 * pointer reached to the segment's end. */
static void test_block_reused_across_streams_race(void **state)
{
    (void)state;
    checked *c = check_log(ALLOCATOR(
        "block pid=1 dev=0 stream=13 us=5000500 action=free_requested ptr=0x10000 size=512\n"
        "block pid=1 dev=0 stream=13 us=5000500 action=free_completed ptr=0x10000 size=512\n"));
    assert_race(c, "side_use", "new_owner");
    const trace_finding *f = check_report_finding(c->rep, 0);
    assert_int_equal(f->lo, 0);
    assert_int_equal(f->hi, 512);
    checked_free(c);
}

/* The same with record_stream: the allocator records an event on the side
 * stream at the free and reuses the block once a query says it completed:
 * clean. */
static void test_block_record_stream_clean(void **state)
{
    (void)state;
    checked *c = check_log(ALLOCATOR(
        "api pid=1 tid=1 t0=450000 t1=450500 corr=7 dev=0 stream=14 event=2 name=cudaEventRecord\n"
        "block pid=1 dev=0 stream=13 us=5000500 action=free_requested ptr=0x10000 size=512\n"
        "api pid=1 tid=1 t0=550000 t1=550500 corr=10 dev=0 event=2 name=cudaEventQuery\n"
        "block pid=1 dev=0 stream=13 us=5000560 action=free_completed ptr=0x10000 size=512\n"));
    assert_int_equal(check_report_count(c->rep), 0);
    checked_free(c);
}

/* The kernels' accesses are their blocks: from the pointer to the end of
 * the latest block allocated over it, at the time of the launch. */
static void test_block_narrows_params(void **state)
{
    (void)state;
    trace *t = load_log(ALLOCATOR(""));
    trace_stmt s = find_label(t, "other");
    assert_int_equal(s.n_access, 1);
    assert_int_equal(s.access[0].lo, 0x200);
    assert_int_equal(s.access[0].hi, 0x400);
    s = find_label(t, "side_use");
    assert_int_equal(s.access[0].lo, 0);
    assert_int_equal(s.access[0].hi, 0x200);
    trace_free(t);
}

/* A launch taken at the driver inside a runtime call: its parameters are
 * filed under the runtime call (corr), its activity under the driver
 * call (dcorr). The kernel still has its access, so the missing wait is
 * found. */
static void test_driver_launch_ids(void **state)
{
    (void)state;
    checked *c = check_log(HEAD
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
        "api pid=1 tid=1 t0=100 t1=200 corr=1 dev=0 ptr=0x7000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=300 t1=400 corr=2 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=2 dcorr=3 idx=0 ptr=0x7000 mode=w\n"
        "gpu pid=1 corr=3 kind=kernel dev=0 stream=13 t0=500 t1=900 name=produce\n"
        "api pid=1 tid=1 t0=410 t1=420 corr=4 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 dcorr=5 idx=0 ptr=0x7000 mode=r\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=950 t1=990 name=consume\n"
        "api pid=1 tid=1 t0=1000 t1=1100 corr=6 dev=0 name=cudaDeviceSynchronize\n");
    assert_race(c, "produce", "consume");
    checked_free(c);
}

/* Call sites: a call's Python line, else the first of its return
 * addresses that a sym record puts on a source line, else the object and
 * offset of its module; shown as site= on its host statement and its GPU
 * work. */
static void test_call_sites(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=100 t1=200 corr=1 dev=0 ptr=0x7000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=300 t1=400 corr=2 dev=0 stream=0 site=0x401000,0x402000 name=cudaLaunchKernel\n"
        "param pid=1 corr=2 idx=0 ptr=0x7000\n"
        "gpu pid=1 corr=2 kind=kernel dev=0 stream=0 t0=500 t1=600 name=native\n"
        "api pid=1 tid=1 t0=700 t1=800 corr=3 dev=0 stream=0 site=0x401000 py=/w/train.py:12 name=cudaLaunchKernel\n"
        "param pid=1 corr=3 idx=0 ptr=0x7000\n"
        "gpu pid=1 corr=3 kind=kernel dev=0 stream=0 t0=900 t1=950 name=python\n"
        "api pid=1 tid=1 t0=1000 t1=1100 corr=4 dev=0 stream=0 site=0x7f0000001234 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 idx=0 ptr=0x7000\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=0 t0=1200 t1=1300 name=unknown\n"
        "api pid=1 tid=1 t0=1400 t1=1500 corr=5 dev=0 stream=0 site=0x401000 name=cudaStreamSynchronize\n"
        "module pid=1 base=0x7f0000000000 lo=0x7f0000000000 hi=0x7f0000100000 name=/usr/lib/libfoo.so\n"
        "sym pid=1 addr=0x401000 name=??:0\n"
        "sym pid=1 addr=0x402000 name=/src/main.cu:42\n");
    trace_stmt s = find_label(t, "native");
    assert_string_equal(stmt_attr(t, &s, "site"), "/src/main.cu:42");
    s = find_label(t, "python");
    assert_string_equal(stmt_attr(t, &s, "site"), "/w/train.py:12");
    s = find_label(t, "unknown");
    assert_string_equal(stmt_attr(t, &s, "site"), "libfoo.so+0x1234");
    /* the sync's own site has no source line and no module: none */
    bool sync_seen = false;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt st;
        trace_stmt_at(t, i, &st);
        if (st.kind == TRACE_SYNC) {
            sync_seen = true;
            assert_null(stmt_attr(t, &st, "site"));
        }
    }
    assert_true(sync_seen);
    trace_free(t);
}

/* A noinline call whose return address the next test symbolises. */
static __attribute__((noinline)) void *return_address(void)
{
    return __builtin_return_address(0);
}

/* `syncsim capture --symbolize LOG` resolves the return addresses of a
 * log in the objects its module records name (here this test program
 * itself, built with debug information) and the trace shows the line. */
static void test_symbolize_sites(void **state)
{
    (void)state;
    if (system("command -v addr2line >/dev/null 2>&1") != 0 ||
        system("readelf -S /proc/$PPID/exe 2>/dev/null | grep -q debug_line") != 0)
        skip();                 /* no binutils, or this program has no line table */
    void *ra = return_address(); int call_line = __LINE__;
    Dl_info info;
    struct link_map *lm = NULL;
    assert_true(dladdr1(ra, &info, (void **)&lm, RTLD_DL_LINKMAP) != 0 && lm);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    char text[8192];
    /* base: the load bias (a PIE's load address, 0 for a fixed executable) */
    snprintf(text, sizeof text, HEAD
        "api pid=1 tid=1 t0=100 t1=200 corr=1 dev=0 ptr=0x7000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=300 t1=400 corr=2 dev=0 stream=0 site=0x%llx name=cudaLaunchKernel\n"
        "param pid=1 corr=2 idx=0 ptr=0x7000\n"
        "gpu pid=1 corr=2 kind=kernel dev=0 stream=0 t0=500 t1=600 name=k\n"
        "module pid=1 base=0x%llx lo=0x%llx hi=0x%llx name=%s\n",
        (unsigned long long)(uintptr_t)ra, (unsigned long long)lm->l_addr,
        (unsigned long long)(uintptr_t)info.dli_fbase, (unsigned long long)(uintptr_t)ra + 4096,
        exe);
    char path[64], cmd[4300];
    write_log(path, sizeof path, text);
    snprintf(cmd, sizeof cmd, "%s capture --symbolize %s >/dev/null", SYNCSIM_BINARY, path);
    assert_int_equal(system(cmd), 0);
    trace *t = load_capture(path, NULL);
    unlink(path);
    trace_stmt s = find_label(t, "k");
    const char *site = stmt_attr(t, &s, "site");
    char want[64];
    snprintf(want, sizeof want, "test_capture_cuda.c:%d", call_line);
    if (!site || !strstr(site, want))
        fail_msg("site '%s', expected ...%s", site ? site : "(none)", want);
    trace_free(t);
}

/* Pointers inside a structure passed by value (word=): PyTorch's
 * TensorIterator kernels write the first operand of their
 * at::detail::Array<char*, N> and read the others; another structure's
 * addresses are read and written. */
static void test_aggregate_params(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x10000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=12 t1=13 corr=2 dev=0 ptr=0x20000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=14 t1=15 corr=3 dev=0 ptr=0x30000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=30 t1=40 corr=4 dev=0 stream=0 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 idx=2 word=0 ptr=0x30000\n"
        "param pid=1 corr=4 idx=2 word=1 ptr=0x10000\n"
        "param pid=1 corr=4 idx=2 word=2 ptr=0x20100\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=0 t0=50 t1=60 name=void "
        "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3>)\n"
        "api pid=1 tid=1 t0=70 t1=80 corr=5 dev=0 stream=0 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 idx=0 word=3 ptr=0x10000\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=0 t0=90 t1=95 name=reduce(Params)\n");
    trace_stmt s;
    for (uint64_t i = 0;; i++) {
        assert_true(i < t->n_stmts);
        trace_stmt_at(t, i, &s);
        if (s.label != TRACE_NONE && strstr(trace_str(t, s.label), "vectorized_elementwise"))
            break;
    }
    assert_int_equal(s.n_access, 3);
    assert_int_equal(s.access[0].mode, TRACE_W);
    assert_string_equal(trace_str(t, t->buffers[s.access[0].buffer].name), "gpu0.b2");
    assert_int_equal(s.access[1].mode, TRACE_R);
    assert_int_equal(s.access[2].mode, TRACE_R);
    assert_int_equal(s.access[2].lo, 0x100);
    s = find_label(t, "reduce(Params)");
    assert_int_equal(s.n_access, 1);
    assert_int_equal(s.access[0].mode, TRACE_RW);
    trace_free(t);
}

/* A log whose program died mid-line: the complete lines are kept. */
static void test_truncated_last_line(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=12 t1=");
    assert_meta(t, "dropped.truncated-line", "1");
    assert_int_equal(count_kind(t, TRACE_ALLOC), 1);
    trace_free(t);
}

/* Bad logs: one line naming the file, the line and what is wrong. */
static void test_bad_logs(void **state)
{
    (void)state;
    static const struct { const char *text, *msg; } cases[] = {
        { HEAD "launch pid=1 name=x\n", ":2: unknown record" },
        { HEAD "api pid=1 tid=1 t0=1 corr=1 name\n", ":2: expected KEY=VALUE" },
        { HEAD "api pid=1 tid=1 t0=x1 corr=1 name=cudaFree\n", ":2: bad value of 't0=x1'" },
        { HEAD "api pid=1 tid=1 t0=1 name=cudaFree\n", ":2: record without its correlation id" },
        { HEAD "gpu pid=1 corr=1 kind=kernel t0=1 name=k\n", ":2: record without its dev= and stream=" },
        { HEAD "api pid=1 tid=1 t0=1 corr=1 colour=red name=x\n", ":2: unknown key 'colour'" },
        { "syncsim-cuda-log 2\n", ":1: expected the header 'syncsim-cuda-log 1'" },
        { HEAD "block pid=1 t0=1 action=alloc size=4\n", ":2: block record without its ptr= and dev=" },
        { HEAD "clock pid=1 t0=1\n", ":2: clock record without its t0= and unix=" },
        { HEAD "sym pid=1 name=a.c:1\n", ":2: sym record without its addr=" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64];
        write_log(path, sizeof path, cases[i].text);
        trace_error err = open_error(path, NULL);
        unlink(path);
        if (!strstr(err.msg, cases[i].msg) || !strstr(err.msg, path) || strchr(err.msg, '\n'))
            fail_msg("case %zu: got '%s', expected '%s'", i, err.msg, cases[i].msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legacy_default_stream_clean),
        cmocka_unit_test(test_per_thread_default_stream_race),
        cmocka_unit_test(test_kernel_params),
        cmocka_unit_test(test_memset_and_memory_kinds),
        cmocka_unit_test(test_param_const),
        cmocka_unit_test(test_h2d_not_waited_race),
        cmocka_unit_test(test_h2d_waited_clean),
        cmocka_unit_test(test_event_wrong_stream_race),
        cmocka_unit_test(test_wait_unrecorded),
        cmocka_unit_test(test_d2h_host_read),
        cmocka_unit_test(test_pageable_memcpy_clean),
        cmocka_unit_test(test_stream_ordered_free_reuse),
        cmocka_unit_test(test_use_after_free),
        cmocka_unit_test(test_peer_copy_without_wait),
        cmocka_unit_test(test_graph_launch_and_nvtx),
        cmocka_unit_test(test_cublas_call),
        cmocka_unit_test(test_gemm_spans),
        cmocka_unit_test(test_nccl_spans),
        cmocka_unit_test(test_nccl_collective),
        cmocka_unit_test(test_block_reused_across_streams_race),
        cmocka_unit_test(test_block_record_stream_clean),
        cmocka_unit_test(test_block_narrows_params),
        cmocka_unit_test(test_driver_launch_ids),
        cmocka_unit_test(test_call_sites),
        cmocka_unit_test(test_symbolize_sites),
        cmocka_unit_test(test_aggregate_params),
        cmocka_unit_test(test_truncated_last_line),
        cmocka_unit_test(test_bad_logs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
