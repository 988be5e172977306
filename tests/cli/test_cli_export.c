/* test_cli_export.c -- `syncsim export --format chrome` through the command
 * line: flow arrows a viewer can draw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/* One record, three waits bound to it, and a record nothing waits for. */
static const char *fan_out =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s0 stream device=0\n"
    "queue s1 stream device=1\n"
    "queue s2 stream device=2\n"
    "queue s3 stream device=3\n"
    "buffer X size=64\n"
    "s0 op fill w:X by=h\n"
    "s0 record e by=h\n"
    "s1 wait e by=h\n"
    "s2 wait e by=h\n"
    "s3 wait e by=h\n"
    "s1 op use r:X by=h\n"
    "s0 record lonely by=h\n";

/* Counts the flow events of phase ph ('s' or 'f') with id `id` in text. */
static int count_flow(const char *text, char ph, unsigned long id)
{
    char want[64];
    int n = 0;
    snprintf(want, sizeof want, "{\"ph\": \"%c\", \"cat\": \"", ph);
    for (const char *p = text; (p = strstr(p, want)) != NULL; p++) {
        const char *idp = strstr(p, "\"id\": ");
        const char *end = strchr(p, '}');
        if (idp && idp < end && strtoul(idp + 6, NULL, 10) == id)
            n++;
    }
    return n;
}

/* Every flow id has exactly one start and one end: a record with three
 * waits draws three arrows, not one start with three ends. */
static void test_cli_export_chrome_flows_are_pairs(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    assert_int_equal(tmpdir_write(f, "fan.trace", fan_out), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s export fan.trace --format chrome -o fan.json && cat fan.json",
                               SYNCSIM_BINARY),
                     0);
    int sync_starts = 0;
    for (const char *p = out; (p = strstr(p, "\"ph\": \"s\", \"cat\": \"sync\"")) != NULL; p++)
        sync_starts++;
    assert_int_equal(sync_starts, 3);           /* one per wait; none for "lonely" */
    unsigned long max_id = 0;
    for (const char *p = out; (p = strstr(p, "\"ph\": \"s\"")) != NULL; p++) {
        const char *idp = strstr(p, "\"id\": ");
        assert_non_null(idp);
        unsigned long id = strtoul(idp + 6, NULL, 10);
        max_id = id > max_id ? id : max_id;
    }
    assert_true(max_id >= 3);
    for (unsigned long id = 1; id <= max_id; id++) {
        assert_int_equal(count_flow(out, 's', id), 1);
        assert_int_equal(count_flow(out, 'f', id), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_export_chrome_flows_are_pairs, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
