/* test_cli_merge.c -- `syncsim merge` through the command line: per-rank
 * files in, one job out (a database or text) that `check` reads, the
 * seeded cross-rank bugs found with their ranks, and one error line (exit
 * 2) for each way the input can be wrong. */
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

/* Rank 0 sends from a request queue (MPI_Isend) and waits for it
 * (MPI_Wait); WAIT_FIRST puts the wait before the buffer is written again. */
static const char *rank0_fmt =
    "syncsim-trace 1\n"
    "queue host host\n"
    "queue mpi stream device=nic\n"
    "buffer act size=256 host\n"
    "host op forward w:act\n"
    "mpi send pp from=0 to=1 tag=0 r:act label=isend\n"
    "mpi record req\n"
    "%s"
    "host op forward_next w:act\n"
    "%s";
static const char *rank1 =
    "syncsim-trace 1\n"
    "queue host host\n"
    "buffer act size=256 host\n"
    "host recv pp from=0 to=1 tag=0 w:act label=irecv\n"
    "host op use r:act\n";

static void write_ranks(fixture *f, bool wait_first)
{
    char r0[1024];
    snprintf(r0, sizeof r0, rank0_fmt, wait_first ? "host wait req\n" : "",
             wait_first ? "" : "host wait req\n");
    assert_int_equal(tmpdir_write(f, "rank0.trace", r0), 0);
    assert_int_equal(tmpdir_write(f, "rank1.trace", rank1), 0);
}

/* A send buffer reused before the wait: the merged job's race names rank
 * 0's queues; with the wait first, the job checks clean. */
static void test_cli_merge_then_check(void **state)
{
    fixture *f = *state;
    char out[8192];
    write_ranks(f, false);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge rank0.trace rank1.trace -o job.db",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "merged 2 ranks as run 1: 7 statements in job.db"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --json job.db", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "\"kind\": \"race\", \"type\": \"WAR\", \"buffer\": \"r0.act\""));
    assert_non_null(strstr(out, "\"queue\": \"r0.mpi\", \"label\": \"isend\""));
    assert_non_null(strstr(out, "\"queue\": \"r0.host\", \"label\": \"forward_next\""));

    write_ranks(f, true);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s merge rank0.trace rank1.trace --format trace -o job.trace",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check job.trace", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "clean"));
    /* the text job is the format: it says where each rank came from */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cat job.trace"), 0);
    assert_non_null(strstr(out, "meta rank.1=rank1.trace"));
    assert_non_null(strstr(out, "r0.mpi send pp from=0 to=1 tag=0 r:r0.act label=isend by=r0.host"));
    /* info counts a message's two ends among the synchronisations */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s info job.trace", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "syncs: 4 (record 1, wait 1, "));
    assert_non_null(strstr(out, "send 1, recv 1)"));
}

/* --run N picks a run of the database that follows it. */
static void test_cli_merge_run_per_input(void **state)
{
    fixture *f = *state;
    char out[4096];
    write_ranks(f, true);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s import rank0.trace -o r0.db && %s import rank1.trace -o r0.db "
                               "&& %s import rank1.trace -o r1.db",
                               SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    /* run 2 of r0.db is rank 1's trace: as rank 0 its recv is in the wrong file */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge r0.db r1.db -o job.db",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "a recv to rank 1 in the trace of rank 0"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge --run 1 r0.db r1.db -o job.db",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check job.db", SYNCSIM_BINARY), 0);
    /* two runs of one database of different jobs: named by their runs, not
     * the file twice */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s run --tokens 1 -o d.db >/dev/null && %s run --tokens 1 --policy "
                               "full -o d.db >/dev/null && %s merge --run 1 d.db --run 2 d.db -o "
                               "j2.db",
                               SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "d.db (run 1) says policy=events but d.db (run 2) says "
                                "policy=full"));
    /* one rank: "1 rank" (it said "merged 1 ranks") */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge rank0.trace -o one.db",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "merged 1 rank as run 1: "));
}

/* Every bad input is one line and exit 2, and writes nothing. */
static void test_cli_merge_errors(void **state)
{
    fixture *f = *state;
    char out[4096];
    write_ranks(f, true);
    assert_int_equal(tmpdir_write(f, "notes.txt", "hello\n"), 0);
    static const struct {
        const char *args, *msg;
    } bad[] = {
        { "", "missing traces: give one per rank" },
        { "rank0.trace notes.txt -o job.db", "notes.txt:1:1: error: expected the header" },
        { "rank0.trace missing.trace -o job.db", "missing.trace" },
        { "rank0.trace rank1.trace --frobnicate", "unknown option '--frobnicate'" },
        { "rank0.trace rank1.trace --format xml", "unknown format 'xml' (expected: db or trace)" },
        { "rank0.trace rank1.trace --run 2", "--run 2 names no database" },
        { "rank0.trace rank1.trace -o rank1.trace", "rank1.trace: is an input" },
        /* the same file by another name: never appended to silently */
        { "rank0.trace rank1.trace -o ./rank1.trace", "./rank1.trace: is an input" },
        { "rank0.trace ./rank0.trace", "./rank0.trace: given twice (as ranks 0 and 1)" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tmpdir_sh(f, out, sizeof out, "%s merge %s", SYNCSIM_BINARY, bad[i].args);
        if (rc != 2 || !strstr(out, bad[i].msg))
            fail_msg("merge %s: exit %d, '%s'; want 2 and '%s'", bad[i].args, rc, out,
                     bad[i].msg);
        /* one error line (a usage error adds its usage and hint lines) */
        const char *nl = strchr(out, '\n');
        assert_non_null(nl);
        if (!strstr(bad[i].msg, "unknown") && !strstr(bad[i].msg, "missing traces") &&
            !strstr(bad[i].msg, "names no database"))
            assert_string_equal(nl + 1, "");
    }
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "test -e job.db"), 1);
}

/* `merge --help` teaches: the naming, the ranks, an example. */
static void test_cli_merge_help(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge --help", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "usage: syncsim merge"));
    assert_non_null(strstr(out, "host -> r1.host"));
    assert_non_null(strstr(out, "syncsim merge examples/rank-0.trace examples/rank-1.trace -o job.db"));
}

/* A rank that skips a collective: the hang's fix names the queue of the
 * rank that arrived at the earlier generation but not at this one. */
static void test_cli_merge_hang_names_the_absent_rank(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s merge %s/tests/litmus/multi-rank/"
                               "hang-rank-skips-allreduce/rank-0.trace %s/tests/litmus/multi-rank/"
                               "hang-rank-skips-allreduce/rank-1.trace --format trace -o job.trace",
                               SYNCSIM_BINARY, SYNCSIM_SOURCE_DIR, SYNCSIM_SOURCE_DIR),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check job.trace", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "only 1 arrive (r0.s0); r1.s0 arrived at an earlier generation "
                                "but not at this one: make it arrive, or use size=1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_merge_then_check, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_merge_run_per_input, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_merge_errors, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_merge_help, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_merge_hang_names_the_absent_rank, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
