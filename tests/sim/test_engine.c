/* test_engine.c -- the discrete-event engine and the device model files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sim/sim.h"

static void test_engine_events_in_time_order_ties_in_insertion_order(void **state)
{
    (void)state;
    sim_engine *e = sim_engine_new();
    sim_engine_timer(e, 30, 1);
    sim_engine_timer(e, 10, 2);
    sim_engine_timer(e, 20, 3);
    sim_engine_timer(e, 10, 4);
    int order[8];
    int64_t done[1];
    assert_int_equal(sim_engine_drain(e, done, 0, order, 8), 4);
    assert_int_equal(order[0] & 0xffffff, 2);
    assert_int_equal(order[1] & 0xffffff, 4);
    assert_int_equal(order[2] & 0xffffff, 3);
    assert_int_equal(order[3] & 0xffffff, 1);
    sim_engine_free(e);
}

static void test_engine_single_copy_gets_the_whole_link(void **state)
{
    (void)state;
    sim_engine *e = sim_engine_new();
    int link = sim_engine_link(e, 10.0); /* 10 GB/s = 10 bytes/ns */
    sim_engine_transfer(e, 0, &link, 1, 1000);
    int64_t done[1] = { -1 };
    int order[4];
    sim_engine_drain(e, done, 1, order, 4);
    assert_int_equal(done[0], 100);
    sim_engine_free(e);
}

static void test_engine_two_concurrent_copies_share_a_link_fairly(void **state)
{
    (void)state;
    sim_engine *e = sim_engine_new();
    int link = sim_engine_link(e, 10.0);
    sim_engine_transfer(e, 0, &link, 1, 1000);
    sim_engine_transfer(e, 0, &link, 1, 1000);
    int64_t done[2] = { -1, -1 };
    int order[4];
    sim_engine_drain(e, done, 2, order, 4);
    /* Each gets half the bandwidth: 1000 bytes at 5 bytes/ns. */
    assert_int_equal(done[0], 200);
    assert_int_equal(done[1], 200);
    sim_engine_free(e);
}

static void test_engine_rates_follow_joins_and_leaves(void **state)
{
    (void)state;
    sim_engine *e = sim_engine_new();
    int link = sim_engine_link(e, 10.0);
    sim_engine_transfer(e, 0, &link, 1, 1000);   /* alone for 50 ns: 500 bytes */
    sim_engine_transfer(e, 50, &link, 1, 1000);  /* then both at 5 bytes/ns */
    int64_t done[2] = { -1, -1 };
    int order[4];
    sim_engine_drain(e, done, 2, order, 4);
    assert_int_equal(done[0], 150);              /* 500 more bytes at 5/ns */
    assert_int_equal(done[1], 200);              /* 500 by 150, 500 alone at 10/ns */
    sim_engine_free(e);
}

static void test_engine_path_takes_its_slowest_share(void **state)
{
    (void)state;
    sim_engine *e = sim_engine_new();
    int fast = sim_engine_link(e, 20.0), slow = sim_engine_link(e, 10.0);
    int path[2] = { fast, slow };
    sim_engine_transfer(e, 0, path, 2, 1000);
    sim_engine_transfer(e, 0, &fast, 1, 1000);
    int64_t done[2] = { -1, -1 };
    int order[4];
    sim_engine_drain(e, done, 2, order, 4);
    assert_int_equal(done[0], 100);              /* min(20/2, 10/1) = 10 bytes/ns */
    assert_int_equal(done[1], 100);              /* 20/2 */
    sim_engine_free(e);
}

/* ------------------------------------------------------------------ */

static char *model_text(const char *drop_key, const char *replace_line)
{
    char path[512];
    snprintf(path, sizeof path, "%s/sim/devices/h100-pcie.dev", SYNCSIM_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char out[16384];
    out[0] = '\0';
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (drop_key && strncmp(line, drop_key, strlen(drop_key)) == 0) {
            if (replace_line)
                strcat(out, replace_line);
            continue;
        }
        strcat(out, line);
    }
    fclose(f);
    return out;
}

static void test_device_model_shipped_files_load(void **state)
{
    (void)state;
    const char *names[] = { "h100-pcie", "h100-sxm", "rtx4090-pcie4", "rtx4090-windows",
                            "cpu-2core" };
    for (size_t i = 0; i < 5; i++) {
        sim_model m;
        trace_error err = { 0 };
        assert_int_equal(sim_model_load(names[i], &m, &err), 0);
        assert_string_equal(m.name, names[i]);
    }
    sim_model lin, win;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("rtx4090-pcie4", &lin, &err), 0);
    assert_int_equal(sim_model_load("rtx4090-windows:gpus=4", &win, &err), 0);
    assert_true(win.sync_ns > lin.sync_ns);
    assert_int_equal(win.gpus, 4);
}

static void test_device_model_missing_key_is_named(void **state)
{
    (void)state;
    sim_model m;
    trace_error err = { 0 };
    assert_int_not_equal(sim_model_parse("x.dev", model_text("sync_ns", NULL), &m, &err), 0);
    assert_non_null(strstr(err.msg, "x.dev: missing key 'sync_ns' in [host]"));
}

static void test_device_model_malformed_value_names_line_and_column(void **state)
{
    (void)state;
    sim_model m;
    trace_error err = { 0 };
    const char *text = model_text("sync_ns", "sync_ns = fast  # oops\n");
    assert_int_not_equal(sim_model_parse("x.dev", text, &m, &err), 0);
    /* The line of sync_ns in the shipped file, column of the value. */
    int line = 1;
    for (const char *p = text; *p && strncmp(p, "sync_ns", 7) != 0; p++)
        if (*p == '\n')
            line++;
    char want[128];
    snprintf(want, sizeof want, "x.dev:%d:11: expected a non-negative integer for 'sync_ns'", line);
    assert_non_null(strstr(err.msg, want));
}

static void test_device_model_unknown_key_is_an_error(void **state)
{
    (void)state;
    sim_model m;
    trace_error err = { 0 };
    const char *text = model_text("sync_ns", "sync_ns = 10000\nsnyc_ns = 5\n");
    assert_int_not_equal(sim_model_parse("x.dev", text, &m, &err), 0);
    assert_non_null(strstr(err.msg, "unknown key 'snyc_ns' in [host]"));
}

static void test_device_model_missing_file_is_an_error(void **state)
{
    (void)state;
    sim_model m;
    trace_error err = { 0 };
    assert_int_not_equal(sim_model_load("no-such-machine", &m, &err), 0);
    assert_non_null(strstr(err.msg, "no-such-machine.dev"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_events_in_time_order_ties_in_insertion_order),
        cmocka_unit_test(test_engine_single_copy_gets_the_whole_link),
        cmocka_unit_test(test_engine_two_concurrent_copies_share_a_link_fairly),
        cmocka_unit_test(test_engine_rates_follow_joins_and_leaves),
        cmocka_unit_test(test_engine_path_takes_its_slowest_share),
        cmocka_unit_test(test_device_model_shipped_files_load),
        cmocka_unit_test(test_device_model_missing_key_is_named),
        cmocka_unit_test(test_device_model_malformed_value_names_line_and_column),
        cmocka_unit_test(test_device_model_unknown_key_is_an_error),
        cmocka_unit_test(test_device_model_missing_file_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
