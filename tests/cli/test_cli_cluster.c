/* test_cli_cluster.c -- `syncsim cluster` through the command line: the
 * figures it prints (text and JSON), the multi-rank trace it writes that
 * `check` reads clean, the seeded bug that check finds, and one error line
 * (exit 2) for each way the input can be wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

#define SMALL_STEP                                                                          \
    "step:tp=4,pp=2,dp=2,microbatches=3,seq=256,"                                          \
    "model=llama:n_layer=2,n_embd=512,n_ff=1024,n_head=8,n_kv_head=8"

static void test_cli_cluster_allreduce_prints_nccl_figures(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s cluster --network builtin:1x8 --workload "
                               "allreduce:bytes=1G", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "all-reduce of 1073741824 bytes, 1 group of 8 GPUs"));
    assert_non_null(strstr(out, "algbw"));
    assert_non_null(strstr(out, "busbw"));
    assert_non_null(strstr(out, "busiest link    gpu"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s cluster --network builtin:4x8 --workload "
                               "allreduce:bytes=64M,group=node --json", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "\"kind\":\"allreduce\",\"gpus\":32,"));
    assert_non_null(strstr(out, "\"group\":\"node\",\"group_size\":8,\"groups\":4,"));
    assert_non_null(strstr(out, "\"busbw_gbps\":"));
}

static void test_cli_cluster_step_trace_checks_clean(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s cluster --network builtin:2x8 --workload "
                               SMALL_STEP " -o job.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "step of tp=4 pp=2 dp=2, 3 microbatches"));
    assert_non_null(strstr(out, "bubble"));
    assert_non_null(strstr(out, "wrote run 1 of job.db: "));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check job.db", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "clean"));
    /* one rank per GPU, two streams each, the all-reduces on their
     * communicators and the pipeline's messages */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export job.db -o - | grep -c "
                               "'^queue r[0-9]*\\.\\(compute\\|comm\\) stream'",
                               SYNCSIM_BINARY), 0);
    assert_int_equal(atoi(out), 32);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export job.db -o - | grep -m1 "
                               "'r0.comm collective tp0 allreduce size=4'", SYNCSIM_BINARY), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export job.db -o - | grep -m1 "
                               "'r0.comm send pp from=0 to=4 tag=0'", SYNCSIM_BINARY), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export job.db -o - | grep -m1 "
                               "'r8.comm collective dp0 allreduce size=2'", SYNCSIM_BINARY), 0);
    /* a rank reuses its events, as a CUDA program does: many handovers
     * between its streams, few names (the checker keeps a clock per name) */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export job.db -o - | grep -c "
                               "'^r0.compute record '", SYNCSIM_BINARY), 0);
    assert_true(atoi(out) >= 10);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export job.db -o - | grep "
                               "'^r0.[a-z]* record ' | awk '{print $3}' | sort -u | wc -l",
                               SYNCSIM_BINARY), 0);
    assert_true(atoi(out) >= 1 && atoi(out) <= 4);
}

static void test_cli_cluster_seeded_bug_is_found(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s cluster --network builtin:2x8 --workload "
                               SMALL_STEP " -o job.db --seed-bug send-before-compute",
                               SYNCSIM_BINARY), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --json job.db", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "\"kind\": \"race\""));
    assert_non_null(strstr(out, "\"buffer\": \"r0.out.0\""));
    assert_non_null(strstr(out, "\"queue\": \"r0.comm\", \"label\": \"send_act\""));
    assert_non_null(strstr(out, "\"queue\": \"r0.compute\", \"label\": \"fwd_out\""));
}

static void test_cli_cluster_errors(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *args, *says;
    } bad[] = {
        { "--workload allreduce:bytes=1M", "--network is required" },
        { "--network builtin:1x8", "--workload is required" },
        { "--network builtin:1x8 --workload allreduce:bytes=1M --bogus", "unknown option" },
        { "--network nccl:1x8 --workload allreduce:bytes=1M", "unknown engine 'nccl'" },
        { "--network builtin:1x8 --workload step:tp=8,pp=2,dp=1,microbatches=2,seq=8",
          "= 16 GPUs, but the network has 8" },
        { "--network builtin:1x8 --workload allreduce:bytes=1M --device nosuch",
          "nosuch" },
        { "--network builtin:1x8 --workload allreduce:bytes=1M --seed-bug send-before-compute",
          "needs a step workload" },
        { "--network builtin:2x8 --workload " SMALL_STEP " --seed-bug other",
          "seeded bug 'other' is not known" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[4096];
        int rc = tmpdir_sh(f, out, sizeof out, "%s cluster %s", SYNCSIM_BINARY, bad[i].args);
        if (rc != 2 || !strstr(out, bad[i].says) || !strstr(out, "syncsim cluster: "))
            fail_msg("%s: exit %d, '%s' does not say '%s'", bad[i].args, rc, out, bad[i].says);
    }
    /* a folder given as a SimGrid platform: one line that says so (SimGrid's
     * parser said only "input in flex scanner failed") */
    char out[4096];
    if (tmpdir_sh(f, out, sizeof out, "%s cluster --help | grep -q 'Engines in this build: "
                                      "builtin, simgrid'", SYNCSIM_BINARY) == 0) {
        assert_int_equal(tmpdir_sh(f, out, sizeof out, "mkdir -p plat && %s cluster --network "
                                   "simgrid:plat --workload allreduce:bytes=1M", SYNCSIM_BINARY),
                         2);
        assert_string_equal(out, "syncsim cluster: simgrid: 'plat' is a directory, not a platform "
                                 "file (its .xml files: none)\n");
    }
}

static void test_cli_cluster_help(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s cluster --help", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "builtin:NxG"));
    assert_non_null(strstr(out, "Engines in this build: builtin"));
    assert_non_null(strstr(out, "busbw = algbw x 2(n-1)/n"));
    assert_non_null(strstr(out, "Examples:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_cluster_allreduce_prints_nccl_figures,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_cluster_step_trace_checks_clean, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_cluster_seeded_bug_is_found, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_cluster_errors, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_cluster_help, tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
