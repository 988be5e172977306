/*
 * test_report.c -- the HTML report: one self-contained page holding the
 * findings with their fixes, the split graph and the timeline inline, the
 * sync pattern, the runs derived from this one; and it opens in headless
 * Chromium without errors (skipped when /usr/bin/chromium is absent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "viz/viz.h"
#include "viz_test_util.h"

typedef struct fixture {
    char *dir;
    char db[512], html[512];
    char *page;
} fixture;

static int setup(void **state)
{
    if (!viz_gnuplot_available()) {
        fprintf(stderr, "gnuplot is not installed: the report tests need it (gnuplot-nox)\n");
        return -1;
    }
    fixture *f = calloc(1, sizeof *f);
    f->dir = vt_tmpdir();
    snprintf(f->db, sizeof f->db, "%s/run.db", f->dir);
    snprintf(f->html, sizeof f->html, "%s/report.html", f->dir);
    static const char *const meta[] = { "policy", "async-user-inputs", "devices", "h100-pcie" };
    static const char *const replay_meta[] = { "source_run", "1", "what_if", "drop sync all" };
    if (vt_record_trace(f->db, PIPELINE_TRACE, true, meta, 2) != 1 ||
        vt_record_trace(f->db, PIPELINE_TRACE, false, replay_meta, 2) != 2)
        return -1;
    viz_report_opts o = { .run = 1 };
    trace_error err = { 0 };
    if (viz_report_write(f->db, &o, f->html, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    f->page = vt_slurp(f->html);
    *state = f;
    return f->page ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->page);
    vt_rmdir(f->dir);
    free(f);
    return 0;
}

static void test_report_holds_findings_with_fixes(void **state)
{
    fixture *f = *state;
    assert_non_null(strstr(f->page, "<h2 id=\"check\">Check</h2>"));
    /* never checked: the page says so, and the checker ran for it */
    assert_non_null(strstr(f->page, "This run was never checked"));
    /* the verdict in the words of check */
    assert_non_null(strstr(f->page, "<p class=\"race\">2 findings in "));
    assert_non_null(strstr(f->page, " statements (race 2)</p>"));
    assert_int_equal(vt_count(f->page, "<td>WAR on inp[0:2048]</td>"), 2);
    assert_non_null(strstr(f->page, "<td>cp_inp_0 on g0 (seq 1)</td><td>set_inputs_1 on host "
                                     "(seq 8)</td>"));
    assert_non_null(strstr(f->page, "add &quot;host sync g0&quot; before set_inputs_1"));
}

static void test_report_holds_both_figures_inline(void **state)
{
    fixture *f = *state;
    assert_non_null(strstr(f->page, "<div class=\"fig\" id=\"split-graph\">\n<svg"));
    assert_non_null(strstr(f->page, "<div class=\"fig\" id=\"timeline-fig\">\n<svg"));
    /* graph: three split clusters; timeline: the races, numbered */
    assert_int_equal(vt_count(f->page, "class=\"cluster\""), 3);
    assert_non_null(strstr(f->page, "race 1 (WAR on inp)"));
    /* ids prefixed per figure, so inline pictures cannot clash */
    assert_non_null(strstr(f->page, "id=\"g-graph0\""));
    assert_null(strstr(f->page, "id=\"graph0\""));
}

static void test_report_is_self_contained(void **state)
{
    fixture *f = *state;
    assert_null(strstr(f->page, "<script"));
    assert_null(strstr(f->page, "<link"));
    assert_null(strstr(f->page, "src=\"http"));
    assert_null(strstr(f->page, "<?xml"));
    assert_null(strstr(f->page, "<!DOCTYPE svg"));
    assert_int_equal(vt_count(f->page, "<html"), 1);
    assert_non_null(strstr(f->page, "</html>"));
}

static void test_report_summary_meta_pattern_and_derived_runs(void **state)
{
    fixture *f = *state;
    assert_non_null(strstr(f->page, "<tr><th>statements</th><td>27</td></tr>"));
    assert_non_null(strstr(f->page, "<tr><th>policy</th><td>async-user-inputs</td></tr>"));
    assert_non_null(strstr(f->page, "<h2 id=\"patterns\">Sync pattern per iteration</h2>"));
    assert_non_null(strstr(f->page, "<td>host</td><td>1</td><td class=\"num\">1</td>"
                                     "<td class=\"mono\">awgrwarg</td>"));
    assert_non_null(strstr(f->page, "<h2 id=\"derived\">Replays and what-ifs</h2>"));
    assert_non_null(strstr(f->page, "<td class=\"note\">not checked</td>"));
    assert_non_null(strstr(f->page, "what_if=drop sync all"));
    assert_non_null(strstr(f->page, "id=\"timeline-run-2\""));
    assert_non_null(strstr(f->page, "id=\"derived-bars\""));
}

/* Valid HTML: every id="..." on the page (headings, figures, the inline
 * SVGs' own ids) is unique; the timeline's heading and figure once shared
 * one. */
static void test_report_ids_are_unique(void **state)
{
    fixture *f = *state;
    size_t n = 0, cap = 0;
    char **ids = NULL;
    for (const char *p = f->page; (p = strstr(p, " id=\"")) != NULL;) {
        p += 5;
        const char *e = strchr(p, '"');
        assert_non_null(e);
        char *id = strndup(p, (size_t)(e - p));
        for (size_t i = 0; i < n; i++)
            if (strcmp(ids[i], id) == 0)
                fail_msg("id=\"%s\" appears twice", id);
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            ids = realloc(ids, cap * sizeof *ids);
        }
        ids[n++] = id;
        p = e;
    }
    assert_true(n > 10);                /* the headings and the figures' ids */
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

static void test_report_without_derived_runs_leaves_the_section_out(void **state)
{
    fixture *f = *state;
    char out[600];
    snprintf(out, sizeof out, "%s/run2.html", f->dir);
    viz_report_opts o = { .run = 2, .no_timeline = true };
    trace_error err = { 0 };
    assert_int_equal(viz_report_write(f->db, &o, out, &err), 0);
    char *page = vt_slurp(out);
    assert_null(strstr(page, "Replays and what-ifs"));
    assert_non_null(strstr(page, "stored no split graph"));
    free(page);
    /* no such run: an error naming the database, and no page */
    snprintf(out, sizeof out, "%s/run9.html", f->dir);
    o.run = 9;
    assert_int_equal(viz_report_write(f->db, &o, out, &err), -1);
    assert_non_null(strstr(err.msg, "no run 9"));
    assert_int_equal(access(out, F_OK), -1);
}

static void test_report_opens_in_headless_chromium(void **state)
{
    fixture *f = *state;
    if (access("/usr/bin/chromium", X_OK) != 0) {
        fprintf(stderr, "skipped: /usr/bin/chromium is not installed (apt-get install chromium)\n");
        skip();
    }
    char *profile = vt_tmpdir();
    char cmd[4096], dom[600], log[600];
    snprintf(dom, sizeof dom, "%s/dom.html", f->dir);
    snprintf(log, sizeof log, "%s/chromium.log", f->dir);
    snprintf(cmd, sizeof cmd,
             "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
             "--no-first-run --disable-background-networking --disable-component-update "
             "--disable-sync --user-data-dir='%s' --enable-logging=stderr --v=0 --dump-dom "
             "'file://%s' >'%s' 2>'%s'",
             profile, f->html, dom, log);
    assert_int_equal(vt_sh(cmd), 0);
    char *out = vt_slurp(dom), *err = vt_slurp(log);
    assert_non_null(out);
    assert_non_null(err);
    /* the DOM was built: both figures and the findings are there */
    assert_non_null(strstr(out, "id=\"split-graph\""));
    assert_non_null(strstr(out, "id=\"timeline\""));
    assert_non_null(strstr(out, "2 findings (2 races)"));
    /* no console errors, no resource that failed to load */
    assert_null(strstr(err, "Uncaught"));
    assert_null(strstr(err, "Failed to load resource"));
    assert_null(strstr(err, "ERR_FILE_NOT_FOUND"));
    free(out);
    free(err);
    vt_rmdir(profile);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_holds_findings_with_fixes),
        cmocka_unit_test(test_report_holds_both_figures_inline),
        cmocka_unit_test(test_report_is_self_contained),
        cmocka_unit_test(test_report_ids_are_unique),
        cmocka_unit_test(test_report_summary_meta_pattern_and_derived_runs),
        cmocka_unit_test(test_report_without_derived_runs_leaves_the_section_out),
        cmocka_unit_test(test_report_opens_in_headless_chromium),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
