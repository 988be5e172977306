/*
 * test_run_real.c -- `syncsim run` on the real backends, end to end
 * through the CLI binary: a small llama on `cpustream:2,cpu` with 2 copy
 * slots and 300 us of jitter. `events` and `full` print "outputs match" and
 * `syncsim check` finds nothing; `async-user-inputs` and `no-split-wait`
 * have `syncsim check` report a race on every seed, and print "DIFFER" on
 * at least one. A tp model on `cpustream:2,cpu` matches and checks clean. Also: a thread-level trace of the cpu pool checks clean,
 * and bad input is one line and exit status 2, `cuda` devices where there
 * are none included (the runs on a GPU are tests/cuda/test_cuda_backend.c).
 *
 * Not named like the ThreadSanitizer tests (tests/CMakeLists.txt): the
 * broken policies race on purpose.
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

static char tmpdir[] = "/tmp/syncsim-run-real-XXXXXX";
static int db_serial;

/* Runs the CLI with argv (argv[0] is ignored), its stdout and stderr into
 * out (NUL-terminated, truncated to cap); returns the exit status, or -1
 * when it did not exit normally. */
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
    if (getenv("RUN_REAL_TEST_VERBOSE"))
        fprintf(stderr, "$ %s %s ...\n%s", argv[1], argv[2], out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void new_db(char *db, size_t cap)
{
    snprintf(db, cap, "%s/run%d.db", tmpdir, db_serial++);
}

/* `syncsim run` on the llama with policy and jitter seed; returns its exit status. */
static int run_llama(const char *policy, int seed, const char *db, char *out, size_t cap)
{
    char devices[96];
    snprintf(devices, sizeof devices, "cpustream:2,jitter=300us,seed=%d,cpu", seed);
    const char *argv[] = { "syncsim", "run", "--model", MODEL, "--devices", devices,
                           "--copies", "2", "--policy", policy, "--threads", "2",
                           "--tokens", "4", "--prompt", "16", "-o", db, NULL };
    return run_cli(argv, out, cap);
}

static int check_db(const char *db, char *out, size_t cap)
{
    const char *argv[] = { "syncsim", "check", db, NULL };
    return run_cli(argv, out, cap);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[sizeof tmpdir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_run_real_events_and_full_match_and_check_clean(void **state)
{
    (void)state;
    const char *good[2] = { "events", "full" };
    char out[16384], db[256];
    for (int k = 0; k < 2; k++) {
        new_db(db, sizeof db);
        int rc = run_llama(good[k], 1, db, out, sizeof out);
        if (rc != 0)
            fail_msg("%s: exit %d:\n%s", good[k], rc, out);
        assert_non_null(strstr(out, "outputs match"));
        assert_null(strstr(out, "DIFFER"));
        assert_non_null(strstr(out, "max abs error 0, max rel error 0 against the reference"));
        assert_non_null(strstr(out, "ms/token wall"));
        assert_non_null(strstr(out, "syncs/token"));
        assert_non_null(strstr(out, "pattern (decode): "));
        rc = check_db(db, out, sizeof out);
        if (rc != 0)
            fail_msg("%s: check exit %d:\n%s", good[k], rc, out);
        assert_non_null(strstr(out, "clean"));
    }
}

/* A tensor-split model on two cpustream devices: the all-reduces meet
 * across devices, the outputs match the reference and the trace checks
 * clean (one `collective tp` per rank and all_reduce). */
static void test_run_real_tp_matches_and_checks_clean(void **state)
{
    (void)state;
    char out[16384], db[256];
    new_db(db, sizeof db);
    const char *argv[] = { "syncsim", "run", "--model",
                           "tp:n_layer=2,n_embd=64,n_head=4,n_head_kv=2,n_ff=128,n_vocab=128,n_ctx=32,ubatch=4",
                           "--devices", "cpustream:2,cpu", "--threads", "2", "--tokens", "4",
                           "--prompt", "8", "-o", db, NULL };
    int rc = run_cli(argv, out, sizeof out);
    if (rc != 0)
        fail_msg("tp: exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "outputs match"));
    assert_non_null(strstr(out, "tp n_layer=2"));
    rc = check_db(db, out, sizeof out);
    if (rc != 0)
        fail_msg("tp: check exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "clean"));
}

static void broken_policy(const char *policy)
{
    char out[16384], db[256];
    int differed = 0;
    for (int seed = 1; seed <= 3; seed++) {
        new_db(db, sizeof db);
        int rc = run_llama(policy, seed, db, out, sizeof out);
        /* 0: the race did not change the numbers this time; 1: it did. */
        if (rc != 0 && rc != 1)
            fail_msg("%s seed %d: exit %d:\n%s", policy, seed, rc, out);
        bool differ = strstr(out, "outputs DIFFER from the reference") != NULL;
        assert_int_equal(differ, rc == 1);
        differed += differ;
        /* The checker sees the missing sync whether or not it bit. */
        rc = check_db(db, out, sizeof out);
        if (rc != 1 || !strstr(out, "race"))
            fail_msg("%s seed %d: check exit %d, no race reported:\n%s", policy, seed, rc, out);
    }
    if (!differed)
        fail_msg("%s: matched the reference on every seed", policy);
}

static void test_run_real_async_user_inputs_races_and_differs(void **state)
{
    (void)state;
    broken_policy("async-user-inputs");
}

static void test_run_real_no_split_wait_races_and_differs(void **state)
{
    (void)state;
    broken_policy("no-split-wait");
}

static void test_run_real_thread_level_trace_checks_clean(void **state)
{
    (void)state;
    char out[16384], db[256];
    new_db(db, sizeof db);
    const char *argv[] = { "syncsim", "run", "--model", MODEL, "--devices", "cpu",
                           "--threads", "2", "--trace-level", "thread", "--barrier", "spin",
                           "--tokens", "2", "--prompt", "8", "-o", db, NULL };
    int rc = run_cli(argv, out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "outputs match"));
    assert_non_null(strstr(out, "spin barrier"));
    rc = check_db(db, out, sizeof out);
    if (rc != 0)
        fail_msg("check exit %d:\n%s", rc, out);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_run_real_bad_input_is_one_line_and_exit_2(void **state)
{
    (void)state;
    char out[4096], db[256];
    new_db(db, sizeof db);
    const char *bad_spec[] = { "syncsim", "run", "--devices", "cpustream:x", "-o", db, NULL };
    assert_int_equal(run_cli(bad_spec, out, sizeof out), 2);
    assert_int_equal(count_lines(out), 1);
    assert_non_null(strstr(out, "cpustream:x"));
    assert_int_equal(access(db, F_OK), -1);     /* nothing recorded */

    const char *bad_ar[] = { "syncsim", "run", "--model", "tp", "--devices", "cpustream:2,cpu",
                             "--allreduce", "tree", "-o", db, NULL };
    assert_int_equal(run_cli(bad_ar, out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown all-reduce 'tree'"));
    assert_int_equal(access(db, F_OK), -1);

    /* Options of the other kind of device: an error and the usage line. */
    const char *barrier[] = { "syncsim", "run", "--devices", "cpu", "--barrier", "sleepy",
                              "-o", db, NULL };
    assert_int_equal(run_cli(barrier, out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown barrier 'sleepy'"));
    /* A simulated machine prices the barrier it is given (issue 23). */
    const char *sim_barrier[] = { "syncsim", "run", "--barrier", "sleepy", "-o", db, NULL };
    assert_int_equal(run_cli(sim_barrier, out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown barrier 'sleepy'"));
    assert_int_equal(access(db, F_OK), -1);
}

/* `cuda` where this syncsim cannot run it: one line, exit 2, nothing
 * recorded. The line is the one real_cuda_devices gives here: "this
 * syncsim was built without CUDA (...)" without the toolkit, "no CUDA
 * device: cudaGetDeviceCount: ..." without a driver or GPU. Where a GPU is
 * usable there is no refusal to see: skipped, saying so. Spec errors come
 * first, GPU or not. */
static void test_run_real_cuda_refused_in_one_line(void **state)
{
    (void)state;
    char out[4096], db[256], why[512];
    new_db(db, sizeof db);
    const char *bad_gpu[] = { "syncsim", "run", "--devices", "cuda:x,cpu", "-o", db, NULL };
    assert_int_equal(run_cli(bad_gpu, out, sizeof out), 2);
    assert_int_equal(count_lines(out), 1);
    assert_non_null(strstr(out, "'cuda:x': expected a GPU number from 0 to"));
    const char *mixed[] = { "syncsim", "run", "--devices", "cuda:0,cpustream,cpu", "-o", db, NULL };
    assert_int_equal(run_cli(mixed, out, sizeof out), 2);
    assert_int_equal(count_lines(out), 1);
    assert_non_null(strstr(out, "cuda and cpustream devices do not mix in one run"));
    const char *opt[] = { "syncsim", "run", "--devices", "cuda:0,jitter=1ms,cpu", "-o", db, NULL };
    assert_int_equal(run_cli(opt, out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown option 'jitter' for cuda"));
    assert_int_equal(access(db, F_OK), -1);

    /* What this build and this computer say (the plugin next to the binary). */
    char bin[] = SYNCSIM_BINARY, lib[sizeof bin + 8];
    snprintf(lib, sizeof lib, "%s/lib", dirname(bin));
    setenv("SYNCSIM_CUDA_LIB_DIR", lib, 1);
    int n = real_cuda_devices(why, sizeof why);
    if (n > 0) {
        fprintf(stderr, "skipped: %d CUDA %s usable here: no refusal to check\n", n,
                n == 1 ? "device is" : "devices are");
        skip();
    }
    const char *lines[] = { "no CUDA device: cudaGetDeviceCount: ",
                            "this syncsim was built without CUDA (", "cannot load the CUDA backend: " };
    bool known = false;
    for (int i = 0; i < 3; i++)
        known |= strncmp(why, lines[i], strlen(lines[i])) == 0;
    if (!known)
        fail_msg("unexpected refusal: %s", why);
    const char *gpus[] = { "syncsim", "run", "--devices", "cuda:0,cuda:0,cpu", "--tokens", "2",
                           "-o", db, NULL };
    assert_int_equal(run_cli(gpus, out, sizeof out), 2);
    assert_int_equal(count_lines(out), 1);
    if (!strstr(out, why))
        fail_msg("expected '%s', got: %s", why, out);
    assert_int_equal(access(db, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_real_events_and_full_match_and_check_clean),
        cmocka_unit_test(test_run_real_tp_matches_and_checks_clean),
        cmocka_unit_test(test_run_real_async_user_inputs_races_and_differs),
        cmocka_unit_test(test_run_real_no_split_wait_races_and_differs),
        cmocka_unit_test(test_run_real_thread_level_trace_checks_clean),
        cmocka_unit_test(test_run_real_bad_input_is_one_line_and_exit_2),
        cmocka_unit_test(test_run_real_cuda_refused_in_one_line),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
