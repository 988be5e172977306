/* test_cli_generate.c -- `syncsim generate nvfuser-ring`: the documented
 * commands of docs/checker.md ("nvFuser's ring pipeline"), each with the
 * exit status and the finding it promises, and its usage errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/* Generates variant v at the documented size and checks it: check's exit
 * status; its output in out. */
static int gen_check(fixture *f, const char *v, char *out, size_t cap)
{
    char buf[4096];
    int rc = tmpdir_sh(f, buf, sizeof buf,
                       "%s generate nvfuser-ring --ranks 4 --streams 2 --iters 3 --variant %s "
                       "-o ring.trace",
                       SYNCSIM_BINARY, v);
    if (rc != 0)
        fail_msg("generate %s: exit %d: %s", v, rc, buf);
    assert_non_null(strstr(buf, "wrote ring.trace"));
    return tmpdir_sh(f, out, cap, "%s check ring.trace", SYNCSIM_BINARY);
}

static void test_cli_generate_reproductions(void **state)
{
    fixture *f = *state;
    char out[65536];
    assert_int_equal(gen_check(f, "correct", out, sizeof out), 0);
    assert_non_null(strstr(out, "clean"));
    assert_int_equal(gen_check(f, "uniform-cache-hits", out, sizeof out), 0);
    assert_non_null(strstr(out, "clean"));
    assert_int_equal(gen_check(f, "uneven-cache-hits", out, sizeof out), 1);
    assert_non_null(strstr(out, "(hang 1)"));
    assert_non_null(strstr(out, "rank0 waits for barrier ipc_exchange generation 2 (1 of 4"));
    assert_int_equal(gen_check(f, "no-barrier", out, sizeof out), 1);
    assert_non_null(strstr(out, "WAR race on kv_store"));
    assert_null(strstr(out, "hang"));
    assert_int_equal(gen_check(f, "early-rearm", out, sizeof out), 1);
    assert_non_null(strstr(out, "WAR race on ag"));
    assert_null(strstr(out, "hang"));
}

/* The trace goes to standard output without -o, and check reads it there. */
static void test_cli_generate_to_a_pipe(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s generate nvfuser-ring --ranks 2 --variant no-barrier | %s check -",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "race"));
}

static void test_cli_generate_usage_errors(void **state)
{
    fixture *f = *state;
    char out[4096];
    static const struct {
        const char *args, *says;
    } bad[] = {
        { "", "which scenario?" },
        { "ring", "unknown scenario 'ring'" },
        /* one range, said once: it said "from 1 to 1024" and "2 or more" */
        { "nvfuser-ring --ranks 1", "--ranks takes a number from 2 to 1024 (a ring needs two "
                                    "ranks), not '1'" },
        { "nvfuser-ring --ranks 0", "--ranks takes a number from 2 to 1024 (a ring needs two "
                                    "ranks), not '0'" },
        { "nvfuser-ring --streams 0", "--streams takes a number from 1 to 256, not '0'" },
        { "nvfuser-ring --variant slow", "unknown variant 'slow' (expected: correct, " },
        { "nvfuser-ring --variant early-rearm --iters 1", "give --iters 2 or more" },
        { "nvfuser-ring --nope", "unknown option '--nope'" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tmpdir_sh(f, out, sizeof out, "%s generate %s -o x.trace", SYNCSIM_BINARY,
                           bad[i].args);
        if (rc != 2 || !strstr(out, bad[i].says))
            fail_msg("generate %s: exit %d, '%s'; want 2 and '%s'", bad[i].args, rc, out,
                     bad[i].says);
    }
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "test -e x.trace"), 1);  /* nothing written */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s generate --help", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "uneven-cache-hits"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_generate_reproductions, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_generate_to_a_pipe, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_generate_usage_errors, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
