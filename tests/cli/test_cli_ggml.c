/* test_cli_ggml.c -- `syncsim ggml` without a ggml tree: the sweep it
 * would run (--list), and bad input as one line with exit status 2
 * (test_cli_ggml_history.c runs it on ggml's trees where they are given). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The sweep is every combination of the lists, in order: families,
 * models, fallbacks, GPUs, copies, micro-batches. */
static void test_cli_ggml_list_is_the_sweep(void **state)
{
    const fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s ggml --list --gpus 2 --copies 4 "
                               "--ubatches 3-6", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "   1  llama, 2 GPUs (cuda), 4 copies, 3 micro-batches\n"));
    assert_non_null(strstr(out, "   8  moe, 2 GPUs (cuda), 4 copies, 6 micro-batches\n"));
    assert_non_null(strstr(out, "8 configurations\n"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s ggml --list", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "256 configurations\n"));      /* 4 x 4 x 8 x 2 */
    assert_int_equal(lines(out), 257);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s ggml --list --gpus 1 --copies 1 "
                               "--ubatches 1 --model llama --fallback none,rope --family "
                               "cuda,sycl", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "llama, 1 GPU (sycl), 1 copy, 1 micro-batch, rope on the CPU\n"));
    assert_non_null(strstr(out, "4 configurations\n"));
}

/* Each mistake is one line naming what is wrong, exit 2. */
static void test_cli_ggml_bad_input_is_one_line(void **state)
{
    const fixture *f = *state;
    static const struct { const char *args, *says; } bad[] = {
        { "", "missing PATH" },
        { ".", "not a ggml tree (no src/ggml-backend.cpp" },
        { "/no/such/tree", "/no/such/tree: not a ggml tree" },
        { "--gpus 0 .", "--gpus expects numbers 1 to 8" },
        { "--copies 2-9 .", "--copies expects numbers 1 to 4" },
        { "--ubatches x .", "--ubatches expects numbers 1 to 8" },
        { "--family rocm .", "unknown family 'rocm' (expected cuda, sycl or noasync)" },
        { "--fallback nope .", "'nope' is no op" },
        { "--model tp .", "no llama or moe model" },
        { "--twin nope .", "--twin: unknown policy 'nope'" },
        { "--graph nope.graph .", "nope.graph" },
        { "--graph x.graph --model llama .", "--graph and --model" },
        { "--patch nope .", "not a ggml tree" },
    };
    char out[4096];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tmpdir_sh(f, out, sizeof out, "%s ggml %s", SYNCSIM_BINARY, bad[i].args);
        if (rc != 2 || !strstr(out, bad[i].says) || strncmp(out, "syncsim ggml: ", 14) != 0)
            fail_msg("syncsim ggml %s: exit %d, wanted 2 and a line with \"%s\":\n%s",
                     bad[i].args, rc, bad[i].says, out);
        /* the message itself is one line (a usage error adds the usage) */
        assert_true(strchr(out, '\n') != NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_ggml_list_is_the_sweep, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_ggml_bad_input_is_one_line, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
