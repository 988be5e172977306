/*
 * test_run_input.c -- `syncsim run` given bad input: one line that says
 * what is wrong with what, exit status 2, and nothing recorded (no
 * database is created). Each case is one a new user hit (issue 10).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "../tmpdir.h"

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Runs `syncsim run ARGS` in the fixture's directory: exit status 2, one
 * line containing want, and no database anywhere it could have gone. */
static void expect_bad(const fixture *f, const char *args, const char *want)
{
    char out[4096];
    int rc = tmpdir_sh(f, out, sizeof out, "%s run --tokens 1 --prompt 0 %s", SYNCSIM_BINARY, args);
    if (rc != 2 || count_lines(out) != 1 || !strstr(out, want))
        fail_msg("run %s: exit %d, wanted 2 and one line with \"%s\":\n%s", args, rc, want, out);
    assert_non_null(strstr(out, "syncsim run: "));
    char path[256];
    snprintf(path, sizeof path, "%s/syncsim.db", f->dir);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(access(f->db, F_OK), -1);
}

static void test_run_input_empty_database_path(void **state)
{
    expect_bad(*state, "-o ''", "-o: an empty path");
}

static void test_run_input_database_in_a_missing_directory(void **state)
{
    expect_bad(*state, "-o /nonexistent-syncsim-dir/x.db",
               "-o /nonexistent-syncsim-dir/x.db: cannot create it: no directory "
               "/nonexistent-syncsim-dir");
}

static void test_run_input_database_that_is_a_directory(void **state)
{
    expect_bad(*state, "-o .", "-o .: is a directory, not a database file");
}

static void test_run_input_device_model_with_an_unknown_option(void **state)
{
    const fixture *f = *state;
    expect_bad(f, "--devices h100-pcie:foo=1 -o " TMPDIR_DB_NAME,
               "devices 'h100-pcie:foo=1': unknown option 'foo=1' for a device model (expected "
               "MODEL[:gpus=N])");
    char out[4096];
    tmpdir_sh(f, out, sizeof out, "%s run --devices h100-pcie:foo=1", SYNCSIM_BINARY);
    assert_null(strstr(out, ".dev"));
}

/* The ggml backend family of a device model's GPUs (sched/family.c). */
static void test_run_input_device_model_backend_family(void **state)
{
    const fixture *f = *state;
    expect_bad(f, "--devices h100-pcie,backend=tpu -o " TMPDIR_DB_NAME,
               "devices 'h100-pcie,backend=tpu': backend 'tpu' is not a GPU backend family "
               "(expected cuda, vulkan, sycl or metal)");
    expect_bad(f, "--devices h100-pcie,backend=cpu -o " TMPDIR_DB_NAME,
               "backend 'cpu' is not a GPU backend family");
    expect_bad(f, "--devices h100-pcie,colour=red -o " TMPDIR_DB_NAME,
               "unknown option 'colour' for a device model (expected "
               "MODEL[:gpus=N][,backend=FAMILY])");
}

static void test_run_input_unknown_device_lists_what_there_is(void **state)
{
    /* From the families' table and the shipped models. */
    expect_bad(*state, "--devices gpu:2 -o " TMPDIR_DB_NAME, "unknown device 'gpu'");
    expect_bad(*state, "--devices gpu:2 -o " TMPDIR_DB_NAME, "cpustream[:N]");
    expect_bad(*state, "--devices gpu:2 -o " TMPDIR_DB_NAME, "h100-pcie");
    expect_bad(*state, "--devices cpu,h100-pcie -o " TMPDIR_DB_NAME, "cannot run in one machine");
}

static void test_run_input_graph_that_is_a_directory(void **state)
{
    expect_bad(*state, "--graph . -o " TMPDIR_DB_NAME, ".: is a directory, not a graph file");
    expect_bad(*state, "--graph missing.graph -o " TMPDIR_DB_NAME,
               "missing.graph: cannot open the graph file");
}

static void test_run_input_names_come_from_their_tables(void **state)
{
    expect_bad(*state, "--policy eager -o " TMPDIR_DB_NAME,
               "unknown policy 'eager' (expected full, relaxed, events, async-user-inputs, "
               "no-split-wait, ggml-pre-17795, ggml-17795, ggml-20793, ggml-pre-26040, ggml-head, ggml-source-wait or moe-no-ids-sync)");
    expect_bad(*state, "--allreduce tree -o " TMPDIR_DB_NAME,
               "unknown all-reduce 'tree' (expected ring, butterfly, bf16, auto, nccl, sycl or "
               "butterfly-ggml)");
    expect_bad(*state, "--devices cpu --barrier sleepy -o " TMPDIR_DB_NAME,
               "unknown barrier 'sleepy' (expected spin, futex, hybrid or pthread)");
    /* A simulated machine takes --barrier too (issue 23: it prices it). */
    expect_bad(*state, "--barrier sleepy -o " TMPDIR_DB_NAME,
               "unknown barrier 'sleepy' (expected spin, futex, hybrid or pthread)");
}

static void test_run_input_nothing_to_evaluate(void **state)
{
    const fixture *f = *state;
    char out[4096];
    int rc = tmpdir_sh(f, out, sizeof out, "%s run --tokens 0 --prompt 0 -o " TMPDIR_DB_NAME,
                       SYNCSIM_BINARY);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "nothing to evaluate: --tokens 0 and --prompt 0"));
    assert_int_equal(access(f->db, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_input_empty_database_path),
        cmocka_unit_test(test_run_input_database_in_a_missing_directory),
        cmocka_unit_test(test_run_input_database_that_is_a_directory),
        cmocka_unit_test(test_run_input_device_model_with_an_unknown_option),
        cmocka_unit_test(test_run_input_device_model_backend_family),
        cmocka_unit_test(test_run_input_unknown_device_lists_what_there_is),
        cmocka_unit_test(test_run_input_graph_that_is_a_directory),
        cmocka_unit_test(test_run_input_names_come_from_their_tables),
        cmocka_unit_test(test_run_input_nothing_to_evaluate),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
