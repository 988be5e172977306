/* test_cli_coverage.c -- a verdict says what syncsim looked at (issue 20):
 * "clean" (exit 0) only with full coverage, exit 4 where it is partial;
 * minimize and replay --drop-sync refuse what they cannot judge; one rank
 * alone is a partial job, not a hang; ranks of different jobs do not merge;
 * a recording that fails on a full disk leaves the database as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tmpdir.h"

#define CAPTURES SYNCSIM_SOURCE_DIR "/tests/data/captures/"
#define EXTERNAL SYNCSIM_SOURCE_DIR "/tests/data/external/"
#define SHARED SYNCSIM_SHARED_DIR "/external-traces/"

#define SH(out, ...) tmpdir_sh(f, out, sizeof out, __VA_ARGS__)

/* Every capture the project holds, with and without its execution trace:
 * check exits 0 only where coverage is full, 4 where it is not (and says
 * "partial coverage"), and minimize refuses exactly the partial ones. */
static void test_cli_coverage_every_capture(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *path, *et;
        int want;
    } cases[] = {
        { CAPTURES "kineto-2stream-clean.synthetic.json", NULL, 4 },
        { CAPTURES "kineto-2stream-clean.synthetic.json", CAPTURES "et-2stream.synthetic.json", 0 },
        { CAPTURES "kineto-2stream-missing-wait.synthetic.json", CAPTURES "et-2stream.synthetic.json",
          1 },
        { CAPTURES "kineto-rank0-nccl.synthetic.json", NULL, 4 },
        { EXTERNAL "sampled_rank-0.json.gz", NULL, 4 },
        { SHARED "pipit-cloverleaf-nsys.sqlite", NULL, 4 },
        { SHARED "hta-simple-add.json.gz", NULL, 4 },
        { SHARED "hta-event-sync-multi-stream.json.gz", NULL, 4 },
        { SHARED "hta-simple-add-et-kineto.json.gz", SHARED "hta-simple-add-et.json.gz", 0 },
    };
    char out[16384];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (access(cases[i].path, R_OK) != 0) {
            /* shared/ lies beside the checkout in CI and for developers */
            print_message("skipped %s: not present\n", cases[i].path);
            continue;
        }
        char et[512] = "";
        if (cases[i].et)
            snprintf(et, sizeof et, " --et %s", cases[i].et);
        int rc = SH(out, "rm -f c.db && %s import %s%s -o c.db >/dev/null && %s check c.db",
                    SYNCSIM_BINARY, cases[i].path, et, SYNCSIM_BINARY);
        if (rc != cases[i].want)
            fail_msg("%s%s: check exited %d, expected %d\n%s", cases[i].path, et, rc,
                     cases[i].want, out);
        if (rc == 0 && (!strstr(out, "clean:") || !strstr(out, "coverage full")))
            fail_msg("%s: exit 0 without 'clean' and 'coverage full':\n%s", cases[i].path, out);
        if (rc == 4 && (strstr(out, "clean") || !strstr(out, "no findings, partial coverage")))
            fail_msg("%s: exit 4 must say partial coverage, never clean:\n%s", cases[i].path, out);
        rc = SH(out, "%s minimize c.db", SYNCSIM_BINARY);
        if (cases[i].want == 4 && (rc != 2 || !strstr(out, "coverage is partial")))
            fail_msg("%s: minimize of a partial trace exited %d:\n%s", cases[i].path, rc, out);
        if (cases[i].want == 0 && rc != 0)
            fail_msg("%s: minimize of a fully covered trace exited %d:\n%s", cases[i].path, rc,
                     out);
    }
}

/* minimize --ordering-only and replay --drop-sync on a capture without
 * byte ranges: the refusal names what is missing; the explicit option gives
 * the weaker promise and says so. */
static void test_cli_coverage_minimize_and_replay_refuse_partial(void **state)
{
    fixture *f = *state;
    char out[16384];
    const char *cap = CAPTURES "kineto-2stream-clean.synthetic.json";
    assert_int_equal(SH(out, "%s import %s -o p.db", SYNCSIM_BINARY, cap), 0);
    assert_int_equal(SH(out, "%s minimize p.db", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "device statements have no byte ranges"));
    assert_non_null(strstr(out, "--ordering-only"));
    assert_int_equal(SH(out, "%s minimize p.db --ordering-only", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "ordering only (--ordering-only): coverage is partial"));
    /* replay itself works; dropping a sync is what cannot be judged */
    assert_int_equal(SH(out, "%s replay p.db -o r.db", SYNCSIM_BINARY), 0);
    assert_int_equal(SH(out, "%s export p.db | grep -n ' sync ' | head -1", SYNCSIM_BINARY), 0);
    assert_int_equal(SH(out, "%s check p.db --json | grep -c '\"status\": \"partial\"'",
                        SYNCSIM_BINARY),
                     0);
    int seq = -1;
    assert_int_equal(SH(out, "%s export p.db | grep -v '^meta\\|^queue\\|^buffer\\|^syncsim' | "
                             "grep -n ' sync \\| wait ' | head -1 | cut -d: -f1",
                        SYNCSIM_BINARY),
                     0);
    seq = atoi(out) - 1;
    assert_true(seq >= 0);
    assert_int_equal(SH(out, "%s replay p.db -o r.db --drop-sync %d", SYNCSIM_BINARY, seq), 2);
    assert_non_null(strstr(out, "coverage is partial"));
    assert_non_null(strstr(out, "--ordering-only"));
}

/* One rank's NCCL profile alone: its collectives wait for absent ranks,
 * which is partial coverage (exit 4, the absent ranks named), not a hang;
 * replay works on it. */
static void test_cli_coverage_one_rank_alone_is_partial(void **state)
{
    fixture *f = *state;
    char out[16384];
    const char *r0 = CAPTURES "kineto-rank0-nccl.synthetic.json";
    assert_int_equal(SH(out, "%s check %s", SYNCSIM_BINARY, r0), 4);
    assert_null(strstr(out, "hang"));
    assert_non_null(strstr(out, "1 of 2 ranks absent (1)"));
    assert_int_equal(SH(out, "%s check --json %s", SYNCSIM_BINARY, r0), 4);
    assert_non_null(strstr(out, "\"ranks\": {\"given\": 1, \"world\": 2, \"absent\": \"1\"}"));
    assert_int_equal(SH(out, "%s replay %s -o r.db --devices h100-pcie", SYNCSIM_BINARY, r0), 0);
    /* imported, the rank stays as recorded (its collectives), and still checks partial */
    assert_int_equal(SH(out, "%s import %s -o one.db >/dev/null && %s export one.db | "
                             "grep -c ' collective '",
                        SYNCSIM_BINARY, r0, SYNCSIM_BINARY),
                     0);
    assert_true(atoi(out) > 0);
    assert_int_equal(SH(out, "%s check one.db", SYNCSIM_BINARY), 4);
    assert_non_null(strstr(out, "1 of 2 ranks absent (1)"));
}

/* Ranks of two different jobs: merge refuses them with one line naming the
 * key and both files, unless --force. */
static void test_cli_coverage_ranks_of_two_jobs_do_not_merge(void **state)
{
    fixture *f = *state;
    char out[16384];
    static const char rank[] = "syncsim-trace 1\n"
                               "meta rank=%d world_size=2 dist.backend=%s\n"
                               "queue h host\n"
                               "buffer X size=64 host\n"
                               "h op work w:X\n";
    char text[512];
    for (int r = 0; r < 2; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/j%d.trace", f->dir, r);
        FILE *fp = fopen(path, "w");
        assert_non_null(fp);
        snprintf(text, sizeof text, rank, r, r ? "gloo" : "nccl");
        fputs(text, fp);
        fclose(fp);
    }
    assert_int_equal(SH(out, "%s merge j0.trace j1.trace -o job.db", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "j0.trace says dist.backend=nccl but j1.trace says "
                                "dist.backend=gloo: the ranks are of different jobs"));
    assert_int_equal(SH(out, "ls job.db 2>/dev/null | wc -l"), 0);
    assert_int_equal(atoi(out), 0);
    assert_int_equal(SH(out, "%s merge --force j0.trace j1.trace -o job.db", SYNCSIM_BINARY), 0);
    /* a tensor-parallel rank with a pipeline-parallel one */
    assert_int_equal(SH(out, "sed -i 's/dist.backend=[a-z]*/parallel=tp/' j0.trace && "
                             "sed -i 's/dist.backend=[a-z]*/parallel=pp/' j1.trace && "
                             "%s merge j0.trace j1.trace -o job2.db",
                        SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "parallel=tp but"));
}

/* A recording, an import and a generated trace that fail on a full disk
 * (a small tmpfs) leave the database as it was, with one line naming the
 * file and the cause. Skipped where the test cannot mount one. */
static void test_cli_coverage_full_disk_leaves_no_run(void **state)
{
    fixture *f = *state;
    char out[16384];
    if (SH(out, "mkdir -p small && mount -t tmpfs -o size=768k tmpfs small 2>&1") != 0) {
        print_message("skipped: cannot mount a small tmpfs here (needs root): %s", out);
        skip();
    }
    int rc = SH(out, "cd small && %s examples >/dev/null && %s import "
                     "examples/event-missing-wait.trace -o y.db >/dev/null && "
                     "%s run --tokens 400 -o y.db",
                SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY);
    char run_out[16384];
    memcpy(run_out, out, sizeof out);
    int info = SH(out, "%s info small/y.db", SYNCSIM_BINARY);
    char info_out[16384];
    memcpy(info_out, out, sizeof out);
    int gen = SH(out, "%s generate nvfuser-ring --ranks 64 -o small/big.trace", SYNCSIM_BINARY);
    char gen_out[16384];
    memcpy(gen_out, out, sizeof out);
    int left = SH(out, "ls small | grep -c 'big\\|tmp'");
    SH(out, "umount small");
    if (rc != 2 || !strstr(run_out, "y.db: ") || !strstr(run_out, "disk is full"))
        fail_msg("run on a full disk: exit %d\n%s", rc, run_out);
    assert_int_equal(info, 0);
    if (!strstr(info_out, "1 run") || strstr(info_out, "recording"))
        fail_msg("a phantom run is left:\n%s", info_out);
    if (gen != 2 || !strstr(gen_out, "big.trace: ") || !strstr(gen_out, "No space left"))
        fail_msg("generate on a full disk: exit %d\n%s", gen, gen_out);
    assert_int_not_equal(left, 0);     /* grep found nothing: no partial file */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_coverage_every_capture, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_coverage_minimize_and_replay_refuse_partial,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_coverage_one_rank_alone_is_partial, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_coverage_ranks_of_two_jobs_do_not_merge,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_coverage_full_disk_leaves_no_run, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
