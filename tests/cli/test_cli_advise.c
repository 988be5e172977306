/*
 * test_cli_advise.c -- `syncsim advise` through the command line (issue
 * 35): the text and the JSON of a trace whose syncs are partly needed, a
 * simulated ggml run whose blocking user-input copies it prices, the
 * timeline with the advised syncs marked, and bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tmpdir.h"

static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    return tmpdir_sh(*state, NULL, 0, "%s examples", SYNCSIM_BINARY) == 0 ? 0 : -1;
}

/* sassassasg: six of the seven host syncs can go; the one before the host
 * reads the logits cannot, and an event synchronize replaces it. */
static void test_cli_advise_text(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s advise examples/sync-pattern-full.trace",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "advice for examples/sync-pattern-full.trace: 14 statements"));
    assert_non_null(strstr(out, "the minimiser removes 6 of 7 synchronisations"));
    assert_non_null(strstr(out, " 1. host sync gpu"));
    assert_non_null(strstr(out, "safe: 6 of 7 can go"));
    assert_non_null(strstr(out, "RAW race on h_logits"));
    assert_non_null(strstr(out, "instead: an event recorded right after"));
}

static void test_cli_advise_json(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s advise examples/sync-pattern-full.trace --json",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "{\"format\": \"syncsim-advice\", \"version\": 1,"));
    assert_non_null(strstr(out, "\"minimiser\": {\"removable\": 6, \"candidates\": 7,"));
    assert_non_null(strstr(out, "\"safe\": \"some\", \"removable\": 6,"));
    assert_non_null(strstr(out, "\"replacement\": {\"what\": "));
    /* what python's json module reads, when there is one */
    if (tmpdir_sh(f, NULL, 0, "command -v python3 >/dev/null") == 0)
        assert_int_equal(tmpdir_sh(f, out, sizeof out,
                                   "%s advise examples/sync-pattern-full.trace --json | python3 "
                                   "-c 'import json,sys; d=json.load(sys.stdin); "
                                   "assert d[\"groups\"][0][\"count\"] == 7'",
                                   SYNCSIM_BINARY),
                         0);
}

/* ggml before #17795 on two simulated GPUs copies user inputs blocking: the
 * advice lists those copies, priced asynchronous. */
static void test_cli_advise_prices_blocking_copies(void **state)
{
    fixture *f = *state;
    static char out[1 << 17];
    assert_int_equal(tmpdir_sh(f, NULL, 0,
                               "%s run --policy ggml-pre-17795 --devices h100-pcie:gpus=2 "
                               "--tokens 4 --prompt 16 -o pre.db",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s advise pre.db --all", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "replayed by replay on h100-pcie, durations recorded"));
    assert_non_null(strstr(out, "ms per iteration (token=/iter=)"));
    assert_non_null(strstr(out, "host copy"));
    assert_non_null(strstr(out, "(blocking; async on gpu"));
    assert_non_null(strstr(out, "host wait p.ev.GPU0.0"));
}

/* `report --advise`: the advice is a section of the page, and the table
 * has a row per group. */
static void test_cli_advise_report_section(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s import examples/sync-pattern-full.trace -o full.db && "
                               "%s report full.db --advise --no-timeline -o full.html",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "grep -c '<h2 id=\"advice\">Advice: the price of every sync' "
                               "full.html"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -o 'some: 6 of 7' full.html"), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s report full.db --devices h100-pcie -o x.html --no-timeline",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "give --advise too"));
}

static void test_cli_advise_timeline_marks(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    if (tmpdir_sh(f, NULL, 0, "command -v gnuplot >/dev/null") != 0) {
        fprintf(stderr, "test_cli_advise: gnuplot is missing: the timeline is not drawn\n");
        return;
    }
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s advise examples/sync-pattern-full.trace --timeline a.svg",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "wrote a.svg"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'advice: can go' a.svg"), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'advice: replace' a.svg"), 0);
}

static void test_cli_advise_bad_input(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s advise missing.trace", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "missing.trace"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s advise examples/sync-pattern-full.trace --durations both",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, "--durations expects recorded or model"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s advise examples/sync-pattern-full.trace --devices nosuch",
                               SYNCSIM_BINARY),
                     2);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s advise examples/sync-pattern-full.trace --timeline t.txt",
                               SYNCSIM_BINARY),
                     2);
    assert_non_null(strstr(out, ".svg or .png"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_advise_text),
        cmocka_unit_test(test_cli_advise_json),
        cmocka_unit_test(test_cli_advise_prices_blocking_copies),
        cmocka_unit_test(test_cli_advise_report_section),
        cmocka_unit_test(test_cli_advise_timeline_marks),
        cmocka_unit_test(test_cli_advise_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
