/* test_cli_merge_captures.c -- profiles of a multi-rank job, one file per
 * rank, merged and checked: PyTorch profiler captures whose NCCL kernels
 * become collectives (traces/formats/capture.c), the seeded cross-rank bugs found
 * with their ranks, and some ranks of a larger job (`merge --partial`),
 * synthetic and real (tests/data/external: ranks 0 and 1 of 128). */
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

#define CAPTURES SYNCSIM_SOURCE_DIR "/tests/data/captures/"
#define EXTERNAL SYNCSIM_SOURCE_DIR "/tests/data/external/"

/* Merges rank 0 with rank1 (a file of CAPTURES) into job.db; returns check's
 * exit code, its output in out. */
static int merge_and_check(fixture *f, const char *rank1, char *out, size_t cap)
{
    assert_int_equal(tmpdir_sh(f, out, cap, "rm -f job.db && %s merge "
                                            "%skineto-rank0-nccl.synthetic.json %s%s -o job.db",
                               SYNCSIM_BINARY, CAPTURES, CAPTURES, rank1),
                     0);
    assert_non_null(strstr(out, "merged 2 ranks as run 1"));
    return tmpdir_sh(f, out, cap, "%s check job.db", SYNCSIM_BINARY);
}

/* An NCCL kernel is a collective of its stream's communicator, its KIND from
 * its name or from the nccl: annotation around its launch, its size the
 * world's; the rank and world size are run metadata. */
static void test_cli_merge_captures_nccl_kernels(void **state)
{
    fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export %skineto-rank0-nccl.synthetic.json",
                               SYNCSIM_BINARY, CAPTURES),
                     0);
    assert_non_null(strstr(out, "meta rank=0\n"));
    assert_non_null(strstr(out, "meta world_size=2\n"));
    assert_non_null(strstr(out, "meta capture.nccl_collectives=3\n"));
    assert_non_null(strstr(out, "gpu0.s30 collective nccl-stream30 allreduce size=2 "
                                "label=\"ncclKernel_AllReduce_RING_LL_Sum_float("));
    /* ncclDevKernel_Generic_1 says nothing: the annotation says all_gather */
    assert_non_null(strstr(out, "gpu0.s30 collective nccl-stream30 allgather size=2 "
                                "label=\"ncclDevKernel_Generic_1("));
}

/* The two ranks of a correct job check clean; rank 1 skipping its last
 * all_reduce hangs rank 0 and names rank 1's stream; rank 1 reordering is a
 * mismatch naming both (read back from the database, lazy labels and all). */
static void test_cli_merge_captures_seeded_bugs(void **state)
{
    fixture *f = *state;
    char out[16384];
    /* no byte ranges (no execution trace): no findings, but not clean */
    assert_int_equal(merge_and_check(f, "kineto-rank1-nccl.synthetic.json", out, sizeof out), 4);
    assert_non_null(strstr(out, "no findings, partial coverage: 14 statements; not judged: 6 of 6 "
                                "device statements have no byte ranges"));

    assert_int_equal(merge_and_check(f, "kineto-rank1-skips-allreduce.synthetic.json", out,
                                     sizeof out),
                     1);
    assert_non_null(strstr(out, "r0.gpu0.s30 waits for collective nccl-stream30 generation 3 "
                                "(1 of 2 arrived)"));
    assert_non_null(strstr(out, "r1.gpu1.s30 arrived at an earlier generation but not at this one"));

    assert_int_equal(merge_and_check(f, "kineto-rank1-reorders.synthetic.json", out, sizeof out),
                     1);
    assert_non_null(strstr(out, "generation 1 of communicator nccl-stream30: r0.gpu0.s30 issues "
                                "allreduce size=2 but r1.gpu1.s30 issues allgather size=2"));
}

/* Ranks 0 and 2 of 4: refused without --partial; with it, the world's
 * all_reduce is an op of each rank, the 2-rank group's (Kineto's process
 * group name and size) stays a collective, and check says what it skipped. */
static void test_cli_merge_captures_partial(void **state)
{
    fixture *f = *state;
    char out[16384];
    const char *r0 = CAPTURES "kineto-rank0-of-4.synthetic.json";
    const char *r2 = CAPTURES "kineto-rank2-of-4.synthetic.json";
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge %s %s -o job.db", SYNCSIM_BINARY,
                               r0, r2),
                     2);
    assert_non_null(strstr(out, "world_size=4"));
    assert_non_null(strstr(out, "but 2 traces given"));
    assert_non_null(strstr(out, "--partial"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge --partial %s %s --format trace",
                               SYNCSIM_BINARY, r0, r2),
                     0);
    assert_non_null(strstr(out, "meta partial=2/4\n"));
    assert_non_null(strstr(out, "r2.gpu2.s30 op \"allreduce nccl-stream30 (partial)\""));
    assert_non_null(strstr(out, "r2.gpu2.s30 collective pg.3 allreduce size=2"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge --partial %s %s -o job.db && "
                                                   "%s check job.db",
                               SYNCSIM_BINARY, r0, r2, SYNCSIM_BINARY),
                     4);
    assert_non_null(strstr(out, "no findings, partial coverage: 10 statements"));
    assert_non_null(strstr(out, "2 of 4 ranks absent (1, 3)"));
    /* the whole job needs no --partial */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge --partial %skineto-rank0-nccl."
                                                   "synthetic.json %skineto-rank1-nccl.synthetic."
                                                   "json -o job2.db",
                               SYNCSIM_BINARY, CAPTURES, CAPTURES),
                     2);
    assert_non_null(strstr(out, "are the whole job"));
}

/* Real captures: ranks 0 and 1 of a 128-rank PyTorch job merge as a partial
 * job, their NCCL kernels recognised, and check. */
static void test_cli_merge_captures_real_sampled_ranks(void **state)
{
    fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge --partial %ssampled_rank-0.json.gz "
                                                   "%ssampled_rank-1.json.gz -o job.db",
                               SYNCSIM_BINARY, EXTERNAL, EXTERNAL),
                     0);
    assert_non_null(strstr(out, "merged 2 ranks as run 1: 4760 statements"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s export job.db | grep -c '(partial)'",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(atoi(out), 20);    /* every NCCL kernel of both ranks */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check job.db", SYNCSIM_BINARY), 4);
    assert_non_null(strstr(out, "no findings, partial coverage: 4760 statements"));
    assert_non_null(strstr(out, "126 of 128 ranks absent (2-127)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_merge_captures_nccl_kernels, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_merge_captures_seeded_bugs, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_merge_captures_partial, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_merge_captures_real_sampled_ranks, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
