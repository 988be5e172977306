/*
 * test_cuda_backend.c -- `syncsim run` on the `cuda` backend family, end
 * to end through the CLI binary, on a real GPU. NEVER RUN: written where
 * there is no GPU; each test skips with one line saying why
 * (real_cuda_devices: no toolkit at build time, no driver, no GPU).
 *
 * On a GPU: a small llama on two logical devices of one GPU
 * (`cuda:0,cuda:0,cpu`, 2 copy slots) matches the CPU reference under
 * `events` and `full` and its recording checks clean, with GPU times
 * (t= and dur= on the cuda0/cuda1 queues); `async-user-inputs` makes
 * `syncsim check` report a race; a tensor-split model on one GPU named
 * twice runs with the default all-reduce (the butterfly) and matches,
 * and is refused in one line under --allreduce nccl (NCCL puts one rank
 * on a GPU); on two GPUs with NCCL it matches and checks clean.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "real/real.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODEL "llama:n_layer=2,n_embd=128,n_head=4,n_head_kv=2,n_ff=256,n_vocab=256,n_ctx=32,ubatch=4"
#define TP "tp:n_layer=2,n_embd=128,n_head=4,n_head_kv=2,n_ff=256,n_vocab=256,n_ctx=32,ubatch=4"

static char tmpdir[] = "/tmp/syncsim-cuda-backend-XXXXXX";
static int db_serial;
static int n_gpus;
static char why[512];

static int run_cli(const char *const *argv, char *out, size_t cap)
{
    char path[sizeof tmpdir + 32];
    snprintf(path, sizeof path, "%s/out.txt", tmpdir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        execv(SYNCSIM_BINARY, (char *const *)argv);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void new_db(char *db, size_t cap)
{
    snprintf(db, cap, "%s/run%d.db", tmpdir, db_serial++);
}

/* Skips the test, saying why in one line, when no GPU is usable. */
#define NEED_GPUS(n)                                                                      \
    do {                                                                                  \
        if (n_gpus < (n)) {                                                               \
            fprintf(stderr, "skipped: needs %d CUDA %s: %s\n", (n), (n) == 1 ? "device" : \
                    "devices", n_gpus < 0 ? why : "fewer here");                          \
            skip();                                                                       \
        }                                                                                 \
    } while (0)

/* A run of model on devices under policy into db; allreduce NULL: the
 * default (auto). */
static int run_model_ar(const char *model, const char *devices, const char *policy,
                        const char *allreduce, const char *db, char *out, size_t cap)
{
    const char *argv[] = { "syncsim", "run", "--model", model, "--devices", devices,
                           "--copies", "2", "--policy", policy, "--tokens", "4", "--prompt", "16",
                           "-o", db, allreduce ? "--allreduce" : NULL, allreduce, NULL };
    return run_cli(argv, out, cap);
}

static int run_model(const char *model, const char *devices, const char *policy, const char *db,
                     char *out, size_t cap)
{
    return run_model_ar(model, devices, policy, NULL, db, out, cap);
}

static int setup(void **state)
{
    (void)state;
    char bin[] = SYNCSIM_BINARY, lib[sizeof bin + 8];
    snprintf(lib, sizeof lib, "%s/lib", dirname(bin));
    setenv("SYNCSIM_CUDA_LIB_DIR", lib, 1);
    n_gpus = real_cuda_devices(why, sizeof why);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[sizeof tmpdir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_cuda_events_and_full_match_and_check_clean(void **state)
{
    (void)state;
    NEED_GPUS(1);
    const char *good[2] = { "events", "full" };
    char out[16384], db[256];
    for (int k = 0; k < 2; k++) {
        new_db(db, sizeof db);
        int rc = run_model(MODEL, "cuda:0,cuda:0,cpu", good[k], db, out, sizeof out);
        if (rc != 0)
            fail_msg("%s: exit %d:\n%s", good[k], rc, out);
        assert_non_null(strstr(out, "outputs match"));
        assert_non_null(strstr(out, "2 CUDA devices + CPU"));
        assert_non_null(strstr(out, "ms/token wall"));
        const char *check[] = { "syncsim", "check", db, NULL };
        rc = run_cli(check, out, sizeof out);
        if (rc != 0)
            fail_msg("%s: check exit %d:\n%s", good[k], rc, out);
        assert_non_null(strstr(out, "clean"));
        /* GPU times: the kernels on cuda0's queue have observed durations. */
        const char *exp[] = { "syncsim", "export", db, NULL };
        assert_int_equal(run_cli(exp, out, sizeof out), 0);
        assert_non_null(strstr(out, "cuda0"));
        assert_non_null(strstr(out, "dur="));
    }
}

static void test_cuda_async_user_inputs_races(void **state)
{
    (void)state;
    NEED_GPUS(1);
    char out[16384], db[256];
    new_db(db, sizeof db);
    int rc = run_model(MODEL, "cuda:0,cuda:0,cpu", "async-user-inputs", db, out, sizeof out);
    if (rc != 0 && rc != 1)
        fail_msg("exit %d:\n%s", rc, out);
    const char *check[] = { "syncsim", "check", db, NULL };
    assert_int_equal(run_cli(check, out, sizeof out), 1);
    assert_non_null(strstr(out, "race"));
}

/* A tensor-split model on one GPU named twice runs: its two ranks are two
 * streams of one GPU, and the default all-reduce of the real devices
 * (auto: ggml's butterfly, copies between the ranks' memories and adds)
 * needs nothing NCCL gives. This is what issue 24 saw on the H200: NCCL
 * was never called. */
static void test_cuda_tp_on_one_gpu_twice_runs_the_butterfly(void **state)
{
    (void)state;
    NEED_GPUS(1);
    char out[16384], db[256];
    new_db(db, sizeof db);
    int rc = run_model(TP, "cuda:0,cuda:0,cpu", "events", db, out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "outputs match"));
    const char *check[] = { "syncsim", "check", db, NULL };
    assert_int_equal(run_cli(check, out, sizeof out), 0);
    /* The butterfly: copies between the ranks' inboxes, no collective. */
    const char *info[] = { "syncsim", "info", db, NULL };
    assert_int_equal(run_cli(info, out, sizeof out), 0);
    assert_non_null(strstr(out, "collective 0,"));
    assert_non_null(strstr(out, "meta allreduce = auto"));
}

/* With --allreduce nccl the ranks would be two NCCL ranks on one GPU,
 * which NCCL refuses (ncclInvalidUsage, "Duplicate GPU detected"): the
 * run fails at the first all_reduce with one line saying so. */
static void test_cuda_tp_nccl_on_one_gpu_twice_is_refused(void **state)
{
    (void)state;
    NEED_GPUS(1);
    char out[16384], db[256];
    new_db(db, sizeof db);
    int rc = run_model_ar(TP, "cuda:0,cuda:0,cpu", "events", "nccl", db, out, sizeof out);
    assert_int_not_equal(rc, 0);
    if (!strstr(out, "NCCL needs a GPU per rank") && !strstr(out, "was built without it"))
        fail_msg("expected the NCCL refusal, got:\n%s", out);
}

static void test_cuda_tp_on_two_gpus_matches(void **state)
{
    (void)state;
    NEED_GPUS(2);
    if (!real_cuda_nccl()) {
        fprintf(stderr, "skipped: libsyncsim_cuda.so was built without NCCL\n");
        skip();
    }
    char out[16384], db[256];
    new_db(db, sizeof db);
    int rc = run_model(TP, "cuda:0,cuda:1,cpu", "events", db, out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "outputs match"));
    const char *check[] = { "syncsim", "check", db, NULL };
    assert_int_equal(run_cli(check, out, sizeof out), 0);
}

int main(void)
{
    /* No usable GPU at all: one line, and ctest counts the test skipped
     * (SKIP_RETURN_CODE 77), not passed. */
    char bin[] = SYNCSIM_BINARY, lib[sizeof bin + 8];
    snprintf(lib, sizeof lib, "%s/lib", dirname(bin));
    setenv("SYNCSIM_CUDA_LIB_DIR", lib, 1);
    if (real_cuda_devices(why, sizeof why) < 1) {
        printf("skipped: the cuda backend's tests need a CUDA device: %s\n", why);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_events_and_full_match_and_check_clean),
        cmocka_unit_test(test_cuda_async_user_inputs_races),
        cmocka_unit_test(test_cuda_tp_on_one_gpu_twice_runs_the_butterfly),
        cmocka_unit_test(test_cuda_tp_nccl_on_one_gpu_twice_is_refused),
        cmocka_unit_test(test_cuda_tp_on_two_gpus_matches),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
