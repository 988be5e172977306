/*
 * test_run_output.c -- what `syncsim run` prints: counts in the singular
 * when there is one, empty cases said as such, both wall times of a real
 * run (the checking left out of the printed times, and said), progress
 * lines on stderr when it is no terminal, and the sync pattern and syncs
 * per token read from the recorded statements (issue 10, issue 9).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "../tmpdir.h"

#define SMALL "llama:n_layer=1,n_embd=64,n_head=4,n_head_kv=2,n_ff=128,n_vocab=64,n_ctx=32,ubatch=4"

static int run(const fixture *f, char *out, size_t cap, const char *args)
{
    return tmpdir_sh(f, out, cap, "%s run %s -o " TMPDIR_DB_NAME, SYNCSIM_BINARY, args);
}

static void test_run_output_counts_of_one_are_singular(void **state)
{
    char out[8192];
    assert_int_equal(run(*state, out, sizeof out,
                         "--model " SMALL " --copies 1 --prompt 4 --tokens 1"), 0);
    assert_non_null(strstr(out, "policy events, 1 copy: "));
    assert_non_null(strstr(out, "prompt: 4 tokens in 1 ubatch: "));
    assert_non_null(strstr(out, "over 1 token\n"));
    assert_null(strstr(out, "1 copies"));
    assert_null(strstr(out, "1 ubatches"));
    assert_non_null(strstr(out, "on h100-pcie (2 GPUs + CPU)"));
    assert_int_equal(run(*state, out, sizeof out,
                         "--model " SMALL " --devices h100-pcie:gpus=1 --tokens 1 --prompt 0"), 0);
    assert_non_null(strstr(out, "(1 GPU + CPU)"));
}

static void test_run_output_cpu_alone_is_no_zero_devices(void **state)
{
    char out[8192];
    assert_int_equal(run(*state, out, sizeof out,
                         "--model " SMALL " --devices cpu --threads 1 --tokens 1 --prompt 4"), 0);
    assert_non_null(strstr(out, "on cpu (CPU, 1 thread, hybrid barrier)"));
    assert_null(strstr(out, "0 cpustream"));
    assert_int_equal(run(*state, out, sizeof out,
                         "--model " SMALL " --devices cpustream,cpu --threads 1 --tokens 1 "
                         "--prompt 0"), 0);
    assert_non_null(strstr(out, "(1 cpustream device + CPU, 1 thread, hybrid barrier)"));
}

static void test_run_output_prompt_only_says_there_is_no_decode(void **state)
{
    char out[8192];
    assert_int_equal(run(*state, out, sizeof out, "--model " SMALL " --tokens 0 --prompt 8"), 0);
    assert_non_null(strstr(out, "decode: none (--tokens 0)"));
    assert_null(strstr(out, "ms/token"));
    assert_null(strstr(out, "pattern (decode)"));
    assert_non_null(strstr(out, "pattern (prompt): "));
}

/* A real run prints its times without the reference's computation, and
 * says how long it took in all. */
static void test_run_output_real_times_say_both(void **state)
{
    char out[8192];
    assert_int_equal(run(*state, out, sizeof out,
                         "--model " SMALL " --devices cpu --threads 1 --tokens 2 --prompt 4"), 0);
    assert_non_null(strstr(out, "ms/token wall"));
    assert_non_null(strstr(out, "\nwall time: "));
    assert_non_null(strstr(out, "s checking outputs (left out of the times above)"));
}

/* Not a terminal (the test reads a pipe): sparse lines on stderr, here one
 * a millisecond apart, and the last. */
static void test_run_output_progress_lines_when_not_a_terminal(void **state)
{
    const fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ SYNCSIM_PROGRESS_MS=1 %s run --model " SMALL " --devices cpu "
                               "--threads 1 --tokens 4 --prompt 4 -o p.db 2>&1 >/dev/null; }",
                               SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "syncsim run: done, 5 of 5 evaluations (100%), "));
    assert_null(strchr(out, '\r'));
    /* Without the variable a short run prints no progress at all. */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ %s run --model " SMALL " --tokens 2 --prompt 4 -o p.db 2>&1 "
                               ">/dev/null; }", SYNCSIM_BINARY), 0);
    assert_string_equal(out, "");
}

/* The pattern and the syncs per token come from the recorded statements:
 * under `full` every copy has a sync before and after it. */
static void test_run_output_pattern_is_the_traces(void **state)
{
    char out[8192];
    assert_int_equal(run(*state, out, sizeof out,
                         "--model " SMALL " --policy full --tokens 2 --prompt 4"), 0);
    assert_non_null(strstr(out, "|sassassasg|"));
    assert_non_null(strstr(out, "syncs/token over 2 tokens"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_output_counts_of_one_are_singular),
        cmocka_unit_test(test_run_output_cpu_alone_is_no_zero_devices),
        cmocka_unit_test(test_run_output_prompt_only_says_there_is_no_decode),
        cmocka_unit_test(test_run_output_real_times_say_both),
        cmocka_unit_test(test_run_output_progress_lines_when_not_a_terminal),
        cmocka_unit_test(test_run_output_pattern_is_the_traces),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
