/*
 * test_timeline.c -- the timeline: lanes, boxes, marks and race marks in the
 * generated gnuplot script and data, the submission-order layout of traces
 * without times, merging beyond the box limit, drawing through gnuplot, and
 * the one-line error when gnuplot is missing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "viz/timeline_int.h"
#include "viz/viz.h"
#include "viz_test_util.h"

typedef struct gp_text {
    char *script, *data;
} gp_text;

static gp_text write_gp(const viz_timeline *tl, const char *format)
{
    gp_text g = { 0 };
    size_t a, b;
    FILE *s = open_memstream(&g.script, &a), *d = open_memstream(&g.data, &b);
    assert_int_equal(viz_timeline_write_gnuplot(tl, s, d, "/tmp/x.dat", "/tmp/x.svg", format), 0);
    fclose(s);
    fclose(d);
    return g;
}

static viz_timeline *open_tl(const char *path, const viz_timeline_opts *o)
{
    viz_timeline_opts def = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE };
    viz_timeline *tl = NULL;
    trace_error err = { 0 };
    assert_int_equal(viz_timeline_open(path, 0, o ? o : &def, &tl, &err), 0);
    return tl;
}

/* The rows of data block `index` (blocks end with two blank lines). */
static size_t block_rows(const char *data, int index)
{
    const char *p = data;
    for (int i = 0; i < index; i++) {
        p = strstr(p, "\n\n\n");
        if (!p)
            return 0;
        p += 3;
    }
    const char *end = strstr(p, "\n\n\n");
    size_t n = 0;
    for (const char *q = p; q < end; q++)
        n += *q == '\n';
    return n + 1;
}

static void test_timeline_lanes_group_hosts_then_devices(void **state)
{
    (void)state;
    viz_timeline *tl = open_tl(PIPELINE_TRACE, NULL);
    gp_text g = write_gp(tl, "svg");
    assert_non_null(strstr(g.script, "set ytics scale 0 (\"host (host thread)\" 0, "
                                     "\"g0 (device 0 stream)\" 1, \"g1 (device 1 stream)\" 2)"));
    assert_non_null(strstr(g.script, "set yrange [2.6:-0.6]"));
    /* device 0's band is shaded, a line separates each group */
    assert_int_equal(vt_count(g.script, "set object"), 1);
    assert_int_equal(vt_count(g.script, "nohead"), 2);
    assert_non_null(strstr(g.script, "set terminal svg"));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
}

static void test_timeline_boxes_by_kind_with_times(void **state)
{
    (void)state;
    viz_timeline *tl = open_tl(PIPELINE_TRACE, NULL);
    assert_true(viz_timeline_timed(tl));
    assert_false(viz_timeline_merged(tl));
    assert_int_equal(viz_timeline_boxes(tl), 15); /* 9 ops + 6 copies */
    gp_text g = write_gp(tl, "svg");
    /* block 0: ops (x in us from the first statement), block 1: copies */
    assert_non_null(strstr(g.script, "datafile index 0 using (($1+$2)/2):3:1:2:($3-0.3):($3+0.3) "
                                     "with boxxyerror fs solid 0.9 noborder lc rgb \"#4c78a8\" "
                                     "title \"op (compute)\""));
    assert_non_null(strstr(g.script, "datafile index 1 "));
    assert_non_null(strstr(g.script, "title \"copy\""));
    assert_int_equal(block_rows(g.data, 0), 9);
    assert_int_equal(block_rows(g.data, 1), 6);
    assert_non_null(strstr(g.data, "28 88 1\n"));   /* layers_a_0 on g0: 28..88 us */
    assert_non_null(strstr(g.data, "8 28 1\n"));    /* cp_inp_0 */
    assert_non_null(strstr(g.script, "set xlabel \"time (µs)\""));
    assert_non_null(strstr(g.script, "title \"event: record -> wait\""));
    assert_non_null(strstr(g.script, "title \"host sync\""));
    assert_non_null(strstr(g.script, "title \"blocked in a sync or wait\""));
    assert_non_null(strstr(g.data, "\"layers_a_0\""));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
}

static void test_timeline_races_drawn_in_red(void **state)
{
    (void)state;
    viz_timeline *tl = open_tl(PIPELINE_TRACE, NULL);
    assert_int_equal(viz_timeline_races(tl), 2);
    gp_text g = write_gp(tl, "svg");
    assert_non_null(strstr(g.script, "race 1 (WAR on inp): set_inputs_1 on host writes while "
                                     "cp_inp_0 on g0 may still read"));
    assert_non_null(strstr(g.script, "race 2 (WAR on inp): set_inputs_2 on host"));
    assert_int_equal(vt_count(g.script, "lc rgb \"#d62728\""), 3); /* outlines, arrows, labels */
    assert_non_null(strstr(g.data, "\"race 1\""));
    assert_non_null(strstr(g.data, "\"race 2\""));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
}

/* A value semaphore's await gets one arrow, from the set that releases it
 * (rule 6b), not one from every set as a flag's await does. Untimed, the
 * releasing set is the first that reaches the value: sem_rx's awaits >=1,
 * >=3, >=5 come from its sets 1, 3, 5 and sem_tx's >=2, >=4 from 2, 4. */
static void test_timeline_semaphore_arrow_from_releasing_set(void **state)
{
    (void)state;
    viz_timeline *tl = open_tl(SYNCSIM_SOURCE_DIR "/tests/litmus/rule6-sem-reuse-counter.trace", NULL);
    size_t n = 0;
    for (size_t i = 0; i < tl->n_arrows; i++) {
        const tl_arrow *a = &tl->arrows[i];
        if (a->kind != TL_ARROW_FLAG)
            continue;
        n++;
        /* the set (seq of `signal`) sets the value the await (seq) wants:
         * in this trace each releasing set is 2 or 3 statements before
         * the await it releases, on the other queue */
        assert_true(a->from < a->to);
        assert_true(a->to - a->from <= 3);
    }
    assert_int_equal(n, 5);
    viz_timeline_free(tl);
}

/* A message's arrow goes from its send to its recv (rule 9), whichever
 * end the file names first. */
static void test_timeline_message_arrow_from_send_to_recv(void **state)
{
    (void)state;
    char path[] = "/tmp/syncsim-tl-msg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "syncsim-trace 1\n"
                       "queue r0.host host\nqueue r1.host host\n"
                       "buffer a size=64 host\nbuffer b size=64 host\n"
                       "r1.host recv pp from=0 to=1 tag=2 w:b label=early_recv\n"
                       "r0.host op produce w:a\n"
                       "r0.host send pp from=0 to=1 tag=1 r:a label=s1\n"
                       "r0.host send pp from=0 to=1 tag=2 r:a label=s2\n"
                       "r1.host recv pp from=0 to=1 tag=1 w:b label=r1\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    viz_timeline *tl = open_tl(path, NULL);
    size_t n = 0;
    for (size_t i = 0; i < tl->n_arrows; i++) {
        const tl_arrow *a = &tl->arrows[i];
        if (a->kind != TL_ARROW_MESSAGE)
            continue;
        n++;
        /* seqs: 0 early_recv, 1 produce, 2 s1, 3 s2, 4 r1 */
        assert_true((a->from == 3 && a->to == 0) || (a->from == 2 && a->to == 4));
    }
    assert_int_equal(n, 2);
    gp_text g = write_gp(tl, "svg");
    assert_non_null(strstr(g.script, "title \"message: send -> recv\""));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
    unlink(path);
}

static void test_timeline_without_times_uses_submission_order(void **state)
{
    (void)state;
    viz_timeline *tl = open_tl(PIPELINE_LITMUS, NULL);
    assert_false(viz_timeline_timed(tl));
    gp_text g = write_gp(tl, "svg");
    assert_non_null(strstr(g.script, "no observed times (t=): statements laid out in submission order"));
    assert_non_null(strstr(g.script, "set xlabel \"statement, in submission order\""));
    /* set_inputs_0 is statement 0 on the host lane */
    assert_non_null(strstr(g.data, "0 0.8 0\n"));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
}

static void test_timeline_window_keeps_boxes_in_view(void **state)
{
    (void)state;
    viz_timeline_opts o = { .from = 100000, .to = 200000 };
    viz_timeline *tl = open_tl(PIPELINE_TRACE, &o);
    /* in 100-200 us: layers_a_0..2? a_1, a_2, cp_inp_1, cp_inp_2, b_0, b_1, cp_act_1, cp_act_0 */
    assert_int_equal(viz_timeline_boxes(tl), 8);
    viz_timeline_free(tl);
}

/* A trace of n tiny ops on two streams, in memory. */
static trace *many_ops(uint64_t n)
{
    trace *t = trace_new();
    uint32_t dev = trace_intern_cstr(t, "0");
    trace_add_queue(t, trace_intern_cstr(t, "host"), TRACE_QUEUE_HOST, TRACE_NONE);
    trace_add_queue(t, trace_intern_cstr(t, "s0"), TRACE_QUEUE_STREAM, dev);
    trace_add_queue(t, trace_intern_cstr(t, "s1"), TRACE_QUEUE_STREAM, dev);
    uint32_t label = trace_intern_cstr(t, "k");
    for (uint64_t i = 0; i < n; i++) {
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = 1 + (uint32_t)(i % 2);
        s.kind = TRACE_OP;
        s.label = label;
        s.t = (int64_t)(i / 2) * 1000;
        s.dur = 900;
        assert_int_equal(trace_append(t, &s), 0);
    }
    return t;
}

static void test_timeline_merges_sub_pixel_boxes(void **state)
{
    (void)state;
    trace *t = many_ops(60000);
    trace_reader r;
    trace_reader_memory(&r, t);
    viz_timeline_opts o = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE, .no_findings = true };
    viz_timeline *tl = NULL;
    trace_error err = { 0 };
    assert_int_equal(viz_timeline_collect(&r, &o, &tl, &err), 0);
    trace_reader_close(&r);
    assert_true(viz_timeline_merged(tl));
    assert_string_equal(viz_timeline_default_format(tl), "png");
    assert_true(viz_timeline_boxes(tl) >= 2);
    assert_true(viz_timeline_boxes(tl) < 3000); /* at most about one per pixel per lane */
    gp_text g = write_gp(tl, "png");
    assert_non_null(strstr(g.script, "boxes narrower than a pixel merged: 60000 statements"));
    assert_non_null(strstr(g.script, "set terminal pngcairo"));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
    trace_free(t);
}

/* Marks (records here) and blocked spans of interleaved lanes are thinned
 * per lane too: 60000 records on two streams are not 60000 points. */
static void test_timeline_thins_marks_of_interleaved_lanes(void **state)
{
    (void)state;
    trace *t = trace_new();
    uint32_t dev = trace_intern_cstr(t, "0");
    uint32_t h = trace_add_queue(t, trace_intern_cstr(t, "host"), TRACE_QUEUE_HOST, TRACE_NONE);
    trace_add_queue(t, trace_intern_cstr(t, "s0"), TRACE_QUEUE_STREAM, dev);
    trace_add_queue(t, trace_intern_cstr(t, "s1"), TRACE_QUEUE_STREAM, dev);
    uint32_t ev[2] = { trace_intern_cstr(t, "e0"), trace_intern_cstr(t, "e1") };
    for (uint64_t i = 0; i < 60000; i++) {
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = 1 + (uint32_t)(i % 2);
        s.kind = TRACE_RECORD;
        s.object = ev[i % 2];
        s.by = h;
        s.t = (int64_t)i * 500;
        s.dur = 0;
        assert_int_equal(trace_append(t, &s), 0);
        trace_stmt_init(&s);
        s.queue = h;
        s.kind = TRACE_SYNC;
        s.sync_scope = TRACE_SYNC_QUEUE;
        s.object = 1 + (uint32_t)(i % 2);
        s.t = (int64_t)i * 500;
        s.dur = 400;
        assert_int_equal(trace_append(t, &s), 0);
    }
    trace_reader r;
    trace_reader_memory(&r, t);
    viz_timeline_opts o = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE, .no_findings = true };
    viz_timeline *tl = NULL;
    trace_error err = { 0 };
    assert_int_equal(viz_timeline_collect(&r, &o, &tl, &err), 0);
    trace_reader_close(&r);
    gp_text g = write_gp(tl, "png");
    /* blocks: blocked spans, records, syncs (no op boxes) */
    size_t blocked = block_rows(g.data, 0), records = block_rows(g.data, 1);
    if (blocked > 3000 || records > 3000)
        fail_msg("%zu blocked spans and %zu record marks drawn for 60000 each", blocked,
                 records);
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
    trace_free(t);
}

/* A window is named in the title and on the axis; one that misses the
 * trace, or one asked of a trace without times, is an error. */
static void test_timeline_window_is_named_and_checked(void **state)
{
    (void)state;
    viz_timeline_opts o = { .from = 100000, .to = 200000 };
    viz_timeline *tl = open_tl(PIPELINE_TRACE, &o);
    gp_text g = write_gp(tl, "svg");
    assert_non_null(strstr(g.script, "window 100 µs to 200 µs of a trace that ends at "));
    assert_non_null(strstr(g.script, "set xlabel \"time (µs) after 100 µs\""));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
    viz_timeline_opts late = { .from = 1000000000, .to = TRACE_TIME_NONE };
    trace_error err = { 0 };
    assert_int_equal(viz_timeline_open(PIPELINE_TRACE, 0, &late, &tl, &err), -1);
    assert_non_null(strstr(err.msg, "the window 1 s to "));
    assert_non_null(strstr(err.msg, " holds nothing: the trace runs from "));
    viz_timeline_opts untimed = { .from = 5, .to = TRACE_TIME_NONE };
    assert_int_equal(viz_timeline_open(SYNCSIM_SOURCE_DIR "/tests/litmus/"
                                       "race-war-reads-since-write.trace",
                                       0, &untimed, &tl, &err),
                     -1);
    assert_non_null(strstr(err.msg, "this trace has no times (t=)"));
}

/* Two races that end on one statement share one label: two labels at one
 * spot print on top of each other. */
static void test_timeline_races_on_one_statement_share_a_label(void **state)
{
    (void)state;
    viz_timeline *tl = open_tl(SYNCSIM_SOURCE_DIR "/tests/litmus/race-war-reads-since-write.trace", NULL);
    assert_int_equal(viz_timeline_races(tl), 2);
    gp_text g = write_gp(tl, "svg");
    assert_non_null(strstr(g.data, "\"races 1, 2\""));
    assert_null(strstr(g.data, "\"race 1\""));
    assert_null(strstr(g.data, "\"race 2\""));
    free(g.script);
    free(g.data);
    viz_timeline_free(tl);
}

static void test_timeline_render_svg_with_gnuplot(void **state)
{
    (void)state;
    if (!viz_gnuplot_available()) {
        fprintf(stderr, "skipped: gnuplot is not installed\n");
        skip();
    }
    viz_timeline *tl = open_tl(PIPELINE_TRACE, NULL);
    char *svg = NULL;
    size_t len = 0;
    trace_error err = { 0 };
    assert_int_equal(viz_timeline_render(tl, "svg", NULL, &svg, &len, &err), 0);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "layers_a_0"));
    assert_non_null(strstr(svg, "race 1"));
    /* hovering a box says what it is, in a plain SVG title (no script) */
    assert_non_null(strstr(svg, "<g><title>layers_a_0: op on "));
    assert_null(strstr(svg, "showHypertext"));
    assert_null(strstr(svg, "<title>gnuplot_plot_"));
    free(svg);
    viz_timeline_free(tl);
}

static void test_timeline_cli_without_gnuplot_is_one_error(void **state)
{
    (void)state;
    char *dir = vt_tmpdir();
    char cmd[2048], err_path[600], out[600];
    snprintf(err_path, sizeof err_path, "%s/err.txt", dir);
    snprintf(out, sizeof out, "%s/t.svg", dir);
    snprintf(cmd, sizeof cmd, "SYNCSIM_GNUPLOT=/nonexistent/gnuplot '%s' timeline '%s' -o '%s' 2>'%s'",
             SYNCSIM_BINARY, PIPELINE_TRACE, out, err_path);
    assert_int_equal(vt_sh(cmd), 2);
    char *msg = vt_slurp(err_path);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "syncsim timeline: gnuplot is not installed"));
    assert_int_equal(vt_count(msg, "\n"), 1);
    assert_int_equal(access(out, F_OK), -1);
    free(msg);
    vt_rmdir(dir);
}

static void test_timeline_cli_draws_png(void **state)
{
    (void)state;
    if (!viz_gnuplot_available()) {
        fprintf(stderr, "skipped: gnuplot is not installed\n");
        skip();
    }
    char *dir = vt_tmpdir();
    char cmd[2048], out[600];
    snprintf(out, sizeof out, "%s/t.png", dir);
    snprintf(cmd, sizeof cmd, "'%s' timeline '%s' -o '%s' >/dev/null", SYNCSIM_BINARY,
             PIPELINE_TRACE, out);
    assert_int_equal(vt_sh(cmd), 0);
    char *png = vt_slurp(out);
    assert_non_null(png);
    assert_memory_equal(png, "\x89PNG", 4);
    free(png);
    snprintf(cmd, sizeof cmd, "'%s' timeline '%s' --from 2ms --to 1ms 2>/dev/null", SYNCSIM_BINARY,
             PIPELINE_TRACE);
    assert_int_equal(vt_sh(cmd), 2);
    vt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeline_lanes_group_hosts_then_devices),
        cmocka_unit_test(test_timeline_boxes_by_kind_with_times),
        cmocka_unit_test(test_timeline_races_drawn_in_red),
        cmocka_unit_test(test_timeline_races_on_one_statement_share_a_label),
        cmocka_unit_test(test_timeline_without_times_uses_submission_order),
        cmocka_unit_test(test_timeline_semaphore_arrow_from_releasing_set),
        cmocka_unit_test(test_timeline_message_arrow_from_send_to_recv),
        cmocka_unit_test(test_timeline_window_keeps_boxes_in_view),
        cmocka_unit_test(test_timeline_merges_sub_pixel_boxes),
        cmocka_unit_test(test_timeline_thins_marks_of_interleaved_lanes),
        cmocka_unit_test(test_timeline_window_is_named_and_checked),
        cmocka_unit_test(test_timeline_render_svg_with_gnuplot),
        cmocka_unit_test(test_timeline_cli_without_gnuplot_is_one_error),
        cmocka_unit_test(test_timeline_cli_draws_png),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
