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

static void write_log(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "/tmp/syncsim-cudalog-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, text, strlen(text));
}

static trace *load_log(const char *text)
{
    char path[64];
    write_log(path, sizeof path, text);
    trace *t = load_capture(path, NULL);
    unlink(path);
    return t;
}

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
    size_t races;
    assert_int_equal(findings(log, TRACE_FINDING_RACE, &races), 0);
    trace *t = load_log(log);
    trace_stmt s = find_prefix(t, "void at::native::vectorized_elementwise_kernel");
    assert_int_equal(s.n_access, 3);
    assert_int_equal(s.access[0].mode, TRACE_W);
    assert_int_equal(s.access[1].mode, TRACE_R);
    assert_int_equal(s.access[2].mode, TRACE_R);
    trace_free(t);
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
    size_t races;
    assert_int_equal(findings(log, TRACE_FINDING_RACE, &races), 0);
    trace *t = load_log(log);
    trace_stmt s = find_prefix(t, "void at::native::elementwise_kernel");
    assert_int_equal(s.n_access, 3);
    assert_int_equal(s.access[0].mode, TRACE_W);
    assert_string_equal(trace_str(t, t->buffers[s.access[0].buffer].name), "gpu0.b1");
    assert_int_equal(s.access[1].mode, TRACE_R);
    assert_int_equal(s.access[2].mode, TRACE_R);
    assert_int_equal(s.access[2].lo, 0x100);
    assert_meta(t, "dropped.unresolved-param", "1");
    trace_free(t);
#undef LEGACY
#undef CLOSURE
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_log_lambda_template_param_written),
        cmocka_unit_test(test_cuda_log_std_array_inputs_read),
        cmocka_unit_test(test_cuda_log_broadcast_closure_operands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
