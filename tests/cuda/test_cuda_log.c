/*
 * test_cuda_log.c -- what issue 32's review found in the reading of the
 * event log of `syncsim capture` (traces/formats/cuda_log.c): logs the test
 * writes as the injection library would for PyTorch 2.x and the CUDA 13
 * driver, and what the trace and the checker must make of them. No GPU, no
 * CUDA header.
 */
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
#include "tests/traces/import_test_util.h"
#include "traces/formats/formats.h"

#define HEAD "syncsim-cuda-log 1\n"

/* Two non-blocking streams and buffer X (gpu0.b0, 4 KiB at 0x7000), Y and Z
 * (outputs), then the launches given. */
#define TWO_STREAMS(LAUNCHES)                                                                 \
    HEAD "stream pid=1 dev=0 stream=13 kind=nonblocking\n"                                    \
         "stream pid=1 dev=0 stream=14 kind=nonblocking\n"                                    \
         "api pid=1 tid=1 t0=100 t1=200 corr=1 dev=0 ptr=0x7000 size=4096 name=cudaMalloc\n" \
         "api pid=1 tid=1 t0=210 t1=220 corr=2 dev=0 ptr=0x9000 size=4096 name=cudaMalloc\n" \
         "api pid=1 tid=1 t0=230 t1=240 corr=3 dev=0 ptr=0xb000 size=4096 name=cudaMalloc\n" \
    LAUNCHES                                                                                   \
         "api pid=1 tid=1 t0=5000 t1=5100 corr=99 dev=0 name=cudaDeviceSynchronize\n"

/* The findings of a log: how many, and of which kinds. */
static size_t findings(const char *text, trace_finding_kind kind, size_t *of_kind)
{
    char path[64];
    write_log(path, sizeof path, text);
    trace_source src;
    trace_error err = { 0 };
    if (trace_source_open(&src, path, &(trace_source_opts){ 0 }, &err) != 0)
        fail_msg("%s", err.msg);
    check_report *rep = NULL;
    check_options opt = { 0 };
    if (check_trace(&src.reader, &opt, &rep, &err) != 0)
        fail_msg("%s", err.msg);
    size_t n = check_report_count(rep);
    *of_kind = check_report_count_kind(rep, kind);
    check_report_free(rep);
    trace_source_close(&src);
    unlink(path);
    return n;
}

/* The first statement whose label starts with prefix. */
static trace_stmt find_prefix(const trace *t, const char *prefix)
{
    trace_stmt s;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        if (s.label != TRACE_NONE && strncmp(trace_str(t, s.label), prefix, strlen(prefix)) == 0)
            return s;
    }
    fail_msg("no statement labelled %s...", prefix);
    return s;
}

/* Log `log` checks clean, and its first statement labelled prefix... writes
 * its first operand and reads the other two. Returns the trace (freed by
 * the caller) for more. */
static trace *assert_operands(const char *log, const char *prefix)
{
    size_t races;
    assert_int_equal(findings(log, TRACE_FINDING_RACE, &races), 0);
    trace *t = load_log(log);
    trace_stmt s = find_prefix(t, prefix);
    assert_int_equal(s.n_access, 3);
    assert_int_equal(s.access[0].mode, TRACE_W);
    assert_int_equal(s.access[1].mode, TRACE_R);
    assert_int_equal(s.access[2].mode, TRACE_R);
    return t;
}

/* A lambda in a kernel's template arguments brings parentheses before the
 * parameter list: "apply<mul(float const*, float*)::{lambda(float)#1}>
 * (float*, float const*, int)". Its parameter 0 is a float* the kernel
 * writes; read from the first '(' it would be the lambda's float const*, a
 * read, and the race with a reader on another stream would be missed. */
static void test_cuda_log_lambda_template_param_written(void **state)
{
    (void)state;
    static const char sig[] = "void apply<mul(float const*, float*)::{lambda(float)#1}>"
                              "(float*, float const*, int)";
    assert_false(capture_param_const(sig, 0));
    assert_true(capture_param_const(sig, 1));
    size_t races;
    size_t n = findings(TWO_STREAMS(
        "api pid=1 tid=1 t0=300 t1=310 corr=4 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 idx=0 ptr=0x7000\n"
        "param pid=1 corr=4 idx=1 ptr=0x9000\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=13 t0=400 t1=900 name=void apply<mul(float "
        "const*, float*)::{lambda(float)#1}>(float*, float const*, int)\n"
        "api pid=1 tid=1 t0=320 t1=330 corr=5 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 idx=0 ptr=0x7000\n"
        "param pid=1 corr=5 idx=1 ptr=0xb000\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=500 t1=800 name=consume(float const*, "
        "float*)\n"), TRACE_FINDING_RACE, &races);
    assert_int_equal(races, 1);
    assert_int_equal(n, 1);
}

/* PyTorch 2.x passes a TensorIterator's operands as std::array<char*, N>
 * (at::detail::Array before): word 0 the output, the others inputs. Two
 * streams that only read X, each writing its own output, do not race. */
static void test_cuda_log_std_array_inputs_read(void **state)
{
    (void)state;
#define VEC_ADD "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, " \
                "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
    static const char log[] = TWO_STREAMS(
        "api pid=1 tid=1 t0=300 t1=310 corr=4 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 idx=2 word=0 ptr=0x9000\n"
        "param pid=1 corr=4 idx=2 word=1 ptr=0x7000\n"
        "param pid=1 corr=4 idx=2 word=2 ptr=0x7000\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=13 t0=400 t1=900 name=" VEC_ADD "\n"
        "api pid=1 tid=1 t0=320 t1=330 corr=5 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 idx=2 word=0 ptr=0xb000\n"
        "param pid=1 corr=5 idx=2 word=1 ptr=0x7000\n"
        "param pid=1 corr=5 idx=2 word=2 ptr=0x7000\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=500 t1=800 name=" VEC_ADD "\n");
    trace_free(assert_operands(log, "void at::native::vectorized_elementwise_kernel"));
#undef VEC_ADD
}

/* The broadcasting elementwise kernel (`grad.expand(N) * x`) passes one
 * closure of 648 bytes whose std::array of operands sits at words 76-78,
 * after its offset calculator: its first word into an allocation is the
 * output, the next ones inputs; two of them reading X on two streams do not
 * race. Its name has parentheses in its template arguments too. */
static void test_cuda_log_broadcast_closure_operands(void **state)
{
    (void)state;
#define CLOSURE "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, " \
                "at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "       \
                "at::native::BinaryFunctor<float, float, float, "                                   \
                "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}"
#define LEGACY "void at::native::elementwise_kernel<128, 4, " CLOSURE ">(int, " CLOSURE ")"
    static const char log[] = TWO_STREAMS(
        "api pid=1 tid=1 t0=300 t1=310 corr=4 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 idx=1 word=3 ptr=0x123456789\n"
        "param pid=1 corr=4 idx=1 word=76 ptr=0x9000\n"
        "param pid=1 corr=4 idx=1 word=77 ptr=0x7000\n"
        "param pid=1 corr=4 idx=1 word=78 ptr=0x7100\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=13 t0=400 t1=900 name=" LEGACY "\n"
        "api pid=1 tid=1 t0=320 t1=330 corr=5 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 idx=1 word=76 ptr=0xb000\n"
        "param pid=1 corr=5 idx=1 word=77 ptr=0x7000\n"
        "param pid=1 corr=5 idx=1 word=78 ptr=0x7100\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=500 t1=800 name=" LEGACY "\n");
    trace *t = assert_operands(log, "void at::native::elementwise_kernel");
    trace_stmt s = find_prefix(t, "void at::native::elementwise_kernel");
    assert_string_equal(trace_str(t, t->buffers[s.access[0].buffer].name), "gpu0.b1");
    assert_int_equal(s.access[2].lo, 0x100);
    assert_meta(t, "dropped.unresolved-param", "1");
    trace_free(t);
#undef LEGACY
#undef CLOSURE
}

/* Allocator blocks are timed on PyTorch's clock (microseconds of the
 * epoch), launches on CUPTI's; the two drift apart by tens of microseconds
 * over a run, the order of the gap between an allocation and its launch.
 * Here the epoch clock gains 100 us a second against the log's (three
 * clock pairs). Block B is allocated over X 5 us after the launch of
 * `first` (at 0.1 s): by one clock pair (the last) it would come 90 us
 * earlier, before the launch, and narrow first's access to B's 256 bytes;
 * interpolated between the pairs around it, first keeps block A's 512 and
 * only `second`, launched after B, gets 256. */
static void test_cuda_log_block_clock_drift(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "clock pid=1 t0=0 unix=5000000000\n"
        "clock pid=1 t0=500000000 unix=5500050000\n"
        "clock pid=1 t0=1000000000 unix=6000100000\n"
        "api pid=1 tid=1 t0=1000 t1=2000 corr=1 dev=0 ptr=0x10000 size=1048576 name=cudaMalloc\n"
        "block pid=1 dev=0 stream=0 us=5000003 action=segment_alloc ptr=0x10000 size=1048576\n"
        "block pid=1 dev=0 stream=0 us=5050005 action=alloc ptr=0x10000 size=512\n"
        "api pid=1 tid=1 t0=100000000 t1=100000500 corr=2 dev=0 stream=0 name=cudaLaunchKernel\n"
        "param pid=1 corr=2 idx=0 ptr=0x10000\n"
        "gpu pid=1 corr=2 kind=kernel dev=0 stream=0 t0=100001000 t1=100002000 name=first(float*)\n"
        "block pid=1 dev=0 stream=0 us=5100015 action=alloc ptr=0x10000 size=256\n"
        "api pid=1 tid=1 t0=100010000 t1=100010500 corr=3 dev=0 stream=0 name=cudaLaunchKernel\n"
        "param pid=1 corr=3 idx=0 ptr=0x10000\n"
        "gpu pid=1 corr=3 kind=kernel dev=0 stream=0 t0=100011000 t1=100012000 name=second(float*)\n");
    trace_stmt s = find_label(t, "first(float*)");
    assert_int_equal(s.n_access, 1);
    assert_int_equal(s.access[0].hi, 512);
    s = find_label(t, "second(float*)");
    assert_int_equal(s.access[0].hi, 256);
    trace_free(t);
}

/* A launch whose parameter layout the driver refused (cuFuncGetParamInfo
 * failed; refused= is its CUresult) has no accesses: counted in the ledger
 * (param-layout), once a launch, not for a kernel that takes no
 * parameters. NVTX marks starting "syncsim:" that the injection library
 * could not read are counted too (note what=malformed-mark); neither fails
 * the import. */
static void test_cuda_log_refused_layout_counted(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x7000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=20 t1=21 corr=2 dev=0 stream=0 name=cudaLaunchKernel\n"
        "param pid=1 corr=2 dcorr=3 refused=400\n"
        "gpu pid=1 corr=3 kind=kernel dev=0 stream=0 t0=30 t1=40 name=scale(float*, int)\n"
        "api pid=1 tid=1 t0=50 t1=51 corr=4 dev=0 stream=0 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 refused=1\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=0 t0=60 t1=70 name=noop()\n"
        "api pid=1 tid=1 t0=80 t1=81 corr=5 dev=0 stream=0 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 idx=0 ptr=0x7000\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=0 t0=90 t1=99 name=scale(float*, int)\n"
        "note pid=1 what=malformed-mark n=2 name=syncsim:x 7000 64 first\n"
        "note pid=1 what=something-new n=5\n");
    assert_meta(t, "dropped.param-layout", "1");
    assert_meta(t, "dropped.malformed-mark", "2");
    assert_meta(t, "capture.kernels", "3");
    trace_free(t);
}

/* PyTorch's bindings release the GIL around every op, so a launch rarely
 * has its Python line (py=); the caching allocator records the Python stack
 * of each allocation, and an op allocates its outputs right before its
 * launch. `y = x * 2` (line 5) allocates y, then launches mul: mul's site
 * is line 5, though a cudaGetDevice comes between. `y.fill_(1)` (line 6)
 * allocates nothing: fill keeps its object+offset. */
static void test_cuda_log_op_line_from_allocator(void **state)
{
    (void)state;
    trace *t = load_log(HEAD
        "clock pid=1 t0=0 unix=5000000000\n"
        "api pid=1 tid=1 t0=1000 t1=2000 corr=1 dev=0 ptr=0x10000 size=1048576 name=cudaMalloc\n"
        "block pid=1 dev=0 stream=0 us=5000002 action=segment_alloc ptr=0x10000 size=1048576 py=/w/p.py:3\n"
        "block pid=1 dev=0 stream=0 us=5000010 action=alloc ptr=0x10000 size=512 py=/w/p.py:5\n"
        "api pid=1 tid=1 t0=10500 t1=10600 corr=2 dev=0 name=cudaGetDevice\n"
        "api pid=1 tid=1 t0=11000 t1=11500 corr=3 dev=0 stream=0 site=0x401010 name=cudaLaunchKernel\n"
        "param pid=1 corr=3 idx=0 ptr=0x10000\n"
        "gpu pid=1 corr=3 kind=kernel dev=0 stream=0 t0=12000 t1=13000 name=mul(float*)\n"
        "api pid=1 tid=1 t0=20000 t1=20500 corr=4 dev=0 stream=0 site=0x401020 name=cudaLaunchKernel\n"
        "param pid=1 corr=4 idx=0 ptr=0x10000\n"
        "gpu pid=1 corr=4 kind=kernel dev=0 stream=0 t0=21000 t1=22000 name=fill(float*)\n"
        "module pid=1 base=0x400000 lo=0x400000 hi=0x500000 name=/lib/libtorch_cuda.so\n");
    trace_stmt s = find_label(t, "mul(float*)");
    const char *site = stmt_attr(t, &s, "site");
    assert_non_null(site);
    assert_string_equal(site, "/w/p.py:5");
    s = find_label(t, "fill(float*)");
    site = stmt_attr(t, &s, "site");
    assert_non_null(site);
    assert_string_equal(site, "libtorch_cuda.so+0x1020");
    trace_free(t);
}

/* 10^6 launches read in linear time. Each launch is a runtime call with a
 * call site, a parameter taken at the driver (dcorr=: its activity is filed
 * under the driver call's id) and its kernel; another thread makes a
 * library call every tenth launch; 200 objects are loaded (sites resolve
 * against them); the allocator writes a block every 100 launches and the
 * clock is paired every 1000. The searches that match records to records
 * (capture.log_lookups: the alias of a driver id, the library call around
 * an API call, a block's clock, a site's object) must stay within a
 * constant per record: a reader that scans every alias per GPU record (or
 * every library call per API call) makes about 10^11 steps here and takes
 * hours. SYNCSIM_TEST_LAUNCHES sets the count (sanitizer builds: 10^5). */
static void test_cuda_log_million_launches_linear(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    long n = 100000;
#else
    long n = 1000000;
#endif
    const char *env = getenv("SYNCSIM_TEST_LAUNCHES");
    if (env && atol(env) > 0)
        n = atol(env);
    char path[64];
    write_log(path, sizeof path, HEAD);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
               "clock pid=1 t0=0 unix=5000000000\n"
               "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x7000000 size=1048576 name=cudaMalloc\n"
               "block pid=1 dev=0 stream=0 us=5000000 action=segment_alloc ptr=0x7000000 size=1048576\n");
    for (long i = 0; i < n; i++) {
        long t = 1000 + 1000 * i, corr = 10 + 2 * i;
        fprintf(f, "api pid=1 tid=1 t0=%ld t1=%ld corr=%ld dev=0 stream=13 site=0x%lx "
                   "name=cudaLaunchKernel\n"
                   "param pid=1 corr=%ld dcorr=%ld idx=0 ptr=0x%lx\n"
                   "gpu pid=1 corr=%ld kind=kernel dev=0 stream=13 t0=%ld t1=%ld name=k(float*)\n",
                t, t + 100, corr, 0x400000 + 0x1000 * 199 + (i % 16) * 8, corr, corr + 1,
                0x7000000 + (i % 1024) * 1024, corr + 1, t + 200, t + 300);
        if (i % 10 == 0)
            fprintf(f, "lib pid=1 tid=2 t0=%ld t1=%ld dev=0 stream=13 acc=0x7000000:64:r "
                       "name=cublasSgemm_v2\n", t + 10, t + 20);
        if (i % 100 == 0)
            fprintf(f, "block pid=1 dev=0 stream=0 us=%ld action=alloc ptr=0x%lx size=1024\n",
                    5000000 + (t + 50) / 1000, 0x7000000 + (i % 1024) * 1024);
        if (i % 1000 == 999)
            fprintf(f, "clock pid=1 t0=%ld unix=%ld\n", t, 5000000000 + t);
    }
    for (int m = 0; m < 200; m++)
        fprintf(f, "module pid=1 base=0x%x lo=0x%x hi=0x%x name=/lib/object%d.so\n",
                0x400000 + 0x1000 * m, 0x400000 + 0x1000 * m, 0x400000 + 0x1000 * (m + 1), m);
    assert_int_equal(fclose(f), 0);
    trace_source src;
    trace_error err = { 0 };
    if (trace_source_open(&src, path, &(trace_source_opts){ .as_recorded = true }, &err) != 0)
        fail_msg("%s", err.msg);
    unlink(path);
    const trace *t = src.reader.trace;
    const char *k = trace_get_meta(t, "capture.kernels"), *lib = trace_get_meta(t, "capture.library_kernels");
    const char *rec = trace_get_meta(t, "capture.log_records"), *look = trace_get_meta(t, "capture.log_lookups");
    assert_non_null(k);
    assert_non_null(rec);
    assert_non_null(look);
    long records = atol(rec), lookups = atol(look);
    print_message("%ld launches: %s kernels (%s inside library calls), %ld records, %ld lookups "
                  "(%.1f per record)\n", n, k, lib ? lib : "0", records, lookups,
                  (double)lookups / (double)records);
    assert_true(records >= 3 * n);
    if (lookups > 16 * records)
        fail_msg("%ld lookups for %ld records: not linear", lookups, records);
    trace_source_close(&src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_log_lambda_template_param_written),
        cmocka_unit_test(test_cuda_log_std_array_inputs_read),
        cmocka_unit_test(test_cuda_log_broadcast_closure_operands),
        cmocka_unit_test(test_cuda_log_block_clock_drift),
        cmocka_unit_test(test_cuda_log_refused_layout_counted),
        cmocka_unit_test(test_cuda_log_op_line_from_allocator),
        cmocka_unit_test(test_cuda_log_million_launches_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
