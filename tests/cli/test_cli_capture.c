/*
 * test_cli_capture.c -- `syncsim capture` without a GPU. The real injection
 * library needs a CUDA driver and a GPU (the tests/cuda corpus runs it
 * there); here a stand-in plays its part: a shared library that loads
 * anywhere, named libsyncsim_inject.so in SYNCSIM_CUDA_LIB_DIR, and a
 * "program" that writes the event log the environment names, as the
 * injection library would. That checks what the command itself does: the
 * environment it sets, running the program, storing the log as a run, its
 * summary, and its one-line refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tmpdir.h"

#define SH(out, ...) tmpdir_sh(f, out, sizeof out, __VA_ARGS__)

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A stand-in injection library: any shared library that loads (libm). */
static int fake_lib(const fixture *f)
{
    char out[512];
    return SH(out, "mkdir -p fakelib && for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu "
                   "/lib64 /usr/lib64 /lib /usr/lib; do [ -e $d/libm.so.6 ] && "
                   "cp $d/libm.so.6 fakelib/libsyncsim_inject.so && exit 0; done; exit 1");
}

static void test_usage(void **state)
{
    fixture *f = *state;
    char out[2048];
    assert_int_equal(SH(out, "%s capture -o x.db", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "missing the program to run"));
    assert_int_equal(SH(out, "%s capture --bogus -- true", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "unknown option '--bogus'"));
    assert_int_equal(SH(out, "%s help capture", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "usage: syncsim capture"));
    assert_non_null(strstr(out, "Examples:"));
}

/* A syncsim without the CUDA parts says so in one line. */
static void test_without_toolkit(void **state)
{
    fixture *f = *state;
    char out[2048];
    assert_int_equal(SH(out, "SYNCSIM_CUDA_LIB_DIR=%s/none %s capture -o x.db -- true", f->dir,
                        SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "built without the CUDA toolkit"));
    assert_int_equal(lines(out), 1);
    assert_int_equal(SH(out, "test -e x.db"), 1);
}

/* This build's own libraries: with the toolkit and no driver, loading the
 * injection library fails and says why; without the toolkit, as above;
 * with a driver, /bin/true made no CUDA call. One line each way. */
static void test_this_build(void **state)
{
    fixture *f = *state;
    char out[2048];
    assert_int_equal(SH(out, "%s capture -o x.db -- true", SYNCSIM_BINARY), 2);
    assert_int_equal(lines(out), 1);
    assert_true(strstr(out, "libcuda.so.1") || strstr(out, "built without the CUDA toolkit") ||
                strstr(out, "made no CUDA call"));
}

/* The whole command with the stand-in: the program sees the environment,
 * its log becomes a run, the summary says what was recorded. */
static void test_capture_stores_run(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(fake_lib(f), 0);
    assert_int_equal(tmpdir_write(f, "prog.sh",
        "#!/bin/sh\n"
        "case \"$CUDA_INJECTION64_PATH\" in */libsyncsim_inject.so) ;; *) exit 3 ;; esac\n"
        /* NVTX reaches CUPTI through the injection library, never a second CUPTI */
        "[ \"$NVTX_INJECTION64_PATH\" = \"$CUDA_INJECTION64_PATH\" ] || exit 5\n"
        "cat >> \"$SYNCSIM_CAPTURE_LOG\" <<'EOF'\n"
        "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
        "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
        "api pid=1 tid=1 t0=10 t1=20 corr=1 dev=0 ptr=0x1000 size=1024 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=30 t1=31 corr=2 dev=0 stream=13 name=cudaLaunchKernel\n"
        "param pid=1 corr=2 ptr=0x1000 mode=rw\n"
        "gpu pid=1 corr=2 kind=kernel dev=0 stream=13 t0=40 t1=80 name=produce\n"
        "api pid=1 tid=1 t0=36 t1=37 corr=5 dev=0 stream=14 name=cudaLaunchKernel\n"
        "param pid=1 corr=5 ptr=0x1000 mode=r\n"
        "gpu pid=1 corr=5 kind=kernel dev=0 stream=14 t0=40 t1=50 name=consume\n"
        "api pid=1 tid=1 t0=90 t1=100 corr=6 dev=0 name=cudaDeviceSynchronize\n"
        "EOF\n"
        "exit 4\n"), 0);
    int rc = SH(out, "SYNCSIM_CUDA_LIB_DIR=%s/fakelib %s capture -o run.db --name demo -- sh prog.sh",
                f->dir, SYNCSIM_BINARY);
    if (rc != 0)
        fail_msg("capture: %d: %s", rc, out);
    assert_non_null(strstr(out, "captured sh as run 1 of run.db"));
    assert_non_null(strstr(out, "2 kernels"));
    assert_non_null(strstr(out, "sh exited with status 4"));
    /* the log is gone unless kept; the run is checked like any other */
    assert_int_equal(SH(out, "ls | grep -c cuda-log"), 1);
    rc = SH(out, "%s check run.db", SYNCSIM_BINARY);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "produce"));
    assert_non_null(strstr(out, "consume"));
    /* --log keeps it, and the log is a trace too */
    rc = SH(out, "SYNCSIM_CUDA_LIB_DIR=%s/fakelib %s capture -o run.db --log kept.cuda-log -- "
                 "sh prog.sh", f->dir, SYNCSIM_BINARY);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "run 2 of run.db"));
    assert_non_null(strstr(out, "event log: kept.cuda-log"));
    assert_int_equal(SH(out, "%s check kept.cuda-log", SYNCSIM_BINARY), 1);
}

/* A program that cannot run, or writes no log: one line, nothing stored. */
static void test_capture_refusals(void **state)
{
    fixture *f = *state;
    char out[2048];
    assert_int_equal(fake_lib(f), 0);
    assert_int_equal(SH(out, "SYNCSIM_CUDA_LIB_DIR=%s/fakelib %s capture -o r.db -- ./no-such",
                        f->dir, SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "cannot run ./no-such"));
    assert_int_equal(lines(out), 1);
    assert_int_equal(SH(out, "SYNCSIM_CUDA_LIB_DIR=%s/fakelib %s capture -o r.db -- true",
                        f->dir, SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "made no CUDA call"));
    assert_int_equal(lines(out), 1);
    assert_int_equal(SH(out, "test -e r.db"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_usage, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_without_toolkit, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_this_build, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_capture_stores_run, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_capture_refusals, tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
