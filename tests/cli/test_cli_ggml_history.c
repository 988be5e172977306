/* test_cli_ggml_history.c -- `syncsim ggml` on ggml's own trees, as its
 * history shows it (issue 33, docs/ggml-check.md): where the user gives
 * the trees, never fetched; without $SYNCSIM_GGML_DIR it exits 77
 * (skipped) with one line saying so.
 *
 *   SYNCSIM_GGML_DIR        ggml at the commit syncsim pins (d99724f2):
 *                           the slot-reuse race once micro-batches outnumber
 *                           the copies, each side at ggml-backend.cpp's line
 *                           in ggml_backend_sched_compute_splits; clean with
 *                           the shipped fix, which ggml-source-wait twins;
 *   SYNCSIM_GGML_17795      ggml at llama.cpp #17795 (4b496bb9): the
 *                           pipelined-prompt race already with two
 *                           micro-batches (a copy of host memory in flight);
 *   SYNCSIM_GGML_PRE_17795  ggml before it (4b496bb9^): clean while the
 *                           micro-batches fit the slots, the slot-reuse race
 *                           past them.
 * The twin of each point agrees with it call for call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

static char cache[600];
static char out[1 << 17];

static const char *tree(const char *var)
{
    const char *v = getenv(var);
    return v && *v ? v : NULL;
}

/* syncsim ggml TREE ARGS, the builds cached in the build tree; its exit. */
static int ggml(const fixture *f, const char *t, const char *args)
{
    return tmpdir_sh(f, out, sizeof out, "%s ggml '%s' --cache '%s' %s", SYNCSIM_BINARY, t, cache,
                     args);
}

/* The line of configuration n of the table. */
static const char *row(int n)
{
    static char buf[512];
    char key[16];
    snprintf(key, sizeof key, "\n%4d  ", n);
    const char *p = strstr(out, key);
    if (!p)
        fail_msg("no configuration %d in:\n%s", n, out);
    snprintf(buf, sizeof buf, "%.*s", (int)strcspn(p + 1, "\n"), p + 1);
    return buf;
}

static void test_cli_ggml_pin_has_the_slot_reuse_race(void **state)
{
    const fixture *f = *state;
    const char *t = tree("SYNCSIM_GGML_DIR");
    int rc = ggml(f, t, "--gpus 2 --copies 4 --ubatches 4,6 --model llama");
    if (rc != 1)
        fail_msg("exit %d, wanted 1:\n%s", rc, out);
    /* 4 micro-batches fit the 4 slots; 6 reuse two of them */
    assert_non_null(strstr(row(1), "agrees   clean"));
    assert_non_null(strstr(row(2), "agrees   2 races"));
    /* both sides at ggml's lines, in compute_splits, and the fix */
    assert_non_null(strstr(out, "race WAR, 2 alike, the first on GPU1#"));
    assert_non_null(strstr(out, "(graph_compute in compute_splits)"));
    assert_non_null(strstr(out, "(cpy_tensor_async in compute_splits)"));
    assert_non_null(strstr(out, "at ggml-backend.cpp:"));
    assert_non_null(strstr(out, "runs on the SOURCE's stream"));
    assert_non_null(strstr(out, "the twin (ggml-head) agrees call for call in 2 of 2"));
}

static void test_cli_ggml_pin_with_the_fix_is_clean(void **state)
{
    const fixture *f = *state;
    const char *t = tree("SYNCSIM_GGML_DIR");
    int rc = ggml(f, t, "--gpus 2-3 --copies 2,4 --ubatches 3-6 --model llama "
                  "--patch source-stream-wait -q");   /* the fix's twin by default */
    if (rc != 0)
        fail_msg("exit %d, wanted 0:\n%s", rc, out);
    assert_non_null(strstr(out, "16 configurations: 0 with findings (0 in all), 16 clean; the twin "
                                "(ggml-source-wait) agrees call for call in 16 of 16"));
}

static void test_cli_ggml_17795_has_the_pipelined_prompt_race(void **state)
{
    const fixture *f = *state;
    const char *t = tree("SYNCSIM_GGML_17795");
    if (!t) {
        skip();
        return;
    }
    int rc = ggml(f, t, "--gpus 2 --copies 4 --ubatches 2 --model llama --twin ggml-17795");
    if (rc != 1)
        fail_msg("exit %d, wanted 1:\n%s", rc, out);
    assert_non_null(strstr(out, "cuda copies from host memory: yes"));
    assert_non_null(strstr(out, "reads host memory asynchronously"));
    assert_non_null(strstr(out, "agrees call for call in 1 of 1"));
}

static void test_cli_ggml_pre_17795_races_only_past_the_slots(void **state)
{
    const fixture *f = *state;
    const char *t = tree("SYNCSIM_GGML_PRE_17795");
    if (!t) {
        skip();
        return;
    }
    int rc = ggml(f, t, "--gpus 2 --copies 4 --ubatches 2,4,6 --model llama --twin ggml-pre-17795");
    if (rc != 1)
        fail_msg("exit %d, wanted 1:\n%s", rc, out);
    assert_non_null(strstr(row(1), "agrees   clean"));
    assert_non_null(strstr(row(2), "agrees   clean"));
    assert_non_null(strstr(row(3), "agrees   2 races"));
    assert_non_null(strstr(out, "runs on the SOURCE's stream"));
}

int main(void)
{
    if (!tree("SYNCSIM_GGML_DIR")) {
        printf("test_cli_ggml_history: skipped: no ggml tree (set SYNCSIM_GGML_DIR; "
               "SYNCSIM_GGML_17795 and SYNCSIM_GGML_PRE_17795 for the history)\n");
        return 77;
    }
    char bin[512];
    snprintf(bin, sizeof bin, "%s", SYNCSIM_BINARY);
    snprintf(cache, sizeof cache, "%s/ggml-cache", dirname(bin));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_ggml_pin_has_the_slot_reuse_race, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_ggml_pin_with_the_fix_is_clean, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_ggml_17795_has_the_pipelined_prompt_race,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_ggml_pre_17795_races_only_past_the_slots,
                                        tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
