/* test_findings.c -- finding output (human, JSON, stored rows), grouping,
 * --max-findings, coverage, and the comparison with expect lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check_test_util.h"
#include "tests/tmpdir.h"

/* The spec's example without its wait: two races. */
static trace *missing_wait(void)
{
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "1");
    tb_buf(t, "X", 4096);
    tb_buf(t, "A", 4096);
    tb_buf(t, "B", 4096);
    tb_op(t, "host", "fill", "w:X");
    tb_stmt(t, "s0", TRACE_COPY, "upload", NULL, "r:X w:A");
    tb_op(t, "s0", "mm0", "r:A w:A");
    tb_record(t, "s0", "e0");
    tb_stmt(t, "s1", TRACE_COPY, "p2p", NULL, "r:A w:B");
    tb_op(t, "s1", "mm1", "r:B w:B");
    tb_sync(t, "host", "s1");
    tb_stmt(t, "host", TRACE_COPY, "download", NULL, "r:B w:X");
    return t;
}

static char *capture_json(const check_report *rep)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    check_report_print_json(f, rep, "x.trace", false);
    fclose(f);
    return buf;
}

static void test_findings_json_has_the_spec_fields(void **state)
{
    (void)state;
    trace *t = missing_wait();
    check_report *rep = tb_check(t);
    char *j = capture_json(rep);
    assert_non_null(strstr(j, "{\"format\": \"syncsim-findings\", \"version\": 1,"));
    assert_non_null(strstr(j, "\"trace\": \"x.trace\", \"status\": \"findings\", \"exit\": 1, "
                              "\"complete\": true, \"races_checked\": true, \"ops\": 8"));
    assert_non_null(strstr(j, "{\"kind\": \"race\", \"type\": \"RAW\", \"buffer\": \"A\", \"root\": "
                              "\"A\", \"range\": [0, 4096]"));
    assert_non_null(strstr(j, "\"first\": {\"queue\": \"s0\", \"label\": \"mm0\", \"line\": 3, "
                              "\"seq\": 2}"));
    assert_non_null(strstr(j, "\"second\": {\"queue\": \"s1\", \"label\": \"p2p\", \"line\": 5, "
                              "\"seq\": 4}"));
    assert_non_null(strstr(j, "\"fix\": \"record an event on s0 after mm0 and wait for it on s1 "
                              "before p2p\""));
    assert_non_null(strstr(j, "\"fix\": \"add \\\"host sync s0\\\" before download\""));
    assert_non_null(strstr(j, "\"summary\": {\"race\": 2}}"));
    free(j);
    check_report_free(rep);
    trace_free(t);
}

static void test_findings_wait_unrecorded_json(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_stream(t, "s1", "0");
    tb_wait(t, "s1", "e1");
    check_report *rep = tb_check(t);
    char *j = capture_json(rep);
    assert_non_null(strstr(j, "{\"kind\": \"wait-unrecorded\", \"event\": \"e1\", \"at\": "
                              "{\"queue\": \"s1\", \"line\": 1, \"seq\": 0}"));
    free(j);
    check_report_free(rep);
    trace_free(t);
}

static bool expect_ok(const check_report *rep, char **diff)
{
    size_t len = 0;
    FILE *f = open_memstream(diff, &len);
    bool ok = check_report_expect(f, rep);
    fclose(f);
    return ok;
}

static void test_findings_expect_exact_match(void **state)
{
    (void)state;
    trace *t = missing_wait();
    tb_expect(t, TRACE_FINDING_RACE, "type=RAW first=mm0 second=p2p buffer=A");
    tb_expect(t, TRACE_FINDING_RACE, "type=WAR first=upload second=download");
    check_report *rep = tb_check(t);
    char *diff = NULL;
    assert_true(expect_ok(rep, &diff));
    free(diff);
    check_report_free(rep);
    trace_free(t);
}

static void test_findings_expect_reports_missing_and_unexpected(void **state)
{
    (void)state;
    trace *t = missing_wait();
    tb_expect(t, TRACE_FINDING_RACE, "type=RAW first=mm0 second=p2p");
    tb_expect(t, TRACE_FINDING_RACE, "type=WAW first=mm0 second=mm1");
    check_report *rep = tb_check(t);
    char *diff = NULL;
    assert_false(expect_ok(rep, &diff));
    assert_non_null(strstr(diff, "missing"));
    assert_non_null(strstr(diff, "expect race type=WAW first=mm0 second=mm1"));
    assert_non_null(strstr(diff, "unexpected"));
    assert_non_null(strstr(diff, "race type=WAR first=upload second=download"));
    free(diff);
    check_report_free(rep);
    trace_free(t);
}

static void test_findings_expect_queue_at_line_names(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "s0", "0");
    tb_buf(t, "A", 64);
    tb_op(t, "s0", "k", "w:A");
    tb_alloc_free(t, "host", TRACE_FREE, "A");
    tb_expect(t, TRACE_FINDING_RACE, "type=WAW first=k second=host@2");
    check_report *rep = tb_check(t);
    char *diff = NULL;
    assert_true(expect_ok(rep, &diff));
    free(diff);
    check_report_free(rep);
    trace_free(t);
}

static void test_findings_expect_clean_fails_on_findings(void **state)
{
    (void)state;
    trace *t = missing_wait();
    tb_expect(t, TRACE_FINDING_CLEAN, NULL);
    check_report *rep = tb_check(t);
    char *diff = NULL;
    assert_false(expect_ok(rep, &diff));
    assert_non_null(strstr(diff, "the trace expects clean"));
    free(diff);
    check_report_free(rep);
    trace_free(t);
}

static void test_findings_expect_hang_names_exact_queues(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "t0");
    tb_host(t, "t1");
    tb_host(t, "t2");
    tb_barrier(t, "t0", "b", 3);
    tb_barrier(t, "t1", "b", 3);
    tb_expect(t, TRACE_FINDING_HANG, "queue=t0");
    check_report *rep = tb_check(t);
    char *diff = NULL;
    assert_false(expect_ok(rep, &diff));    /* t1 is blocked too */
    free(diff);
    trace_free(t);
    check_report_free(rep);
}

static void test_findings_max_findings_counts_the_rest(void **state)
{
    (void)state;
    trace *t = missing_wait();
    check_options opt = { .max_findings = 1 };
    check_report *rep = tb_check_opt(t, &opt);
    assert_int_equal(check_report_count(rep), 1);
    assert_int_equal(check_report_dropped(rep), 1);
    check_report_free(rep);
    trace_free(t);
}

/* A finding left out by --max-findings is counted once, however many byte
 * ranges or accesses of its statement repeat it. */
static void test_findings_max_findings_counts_each_dropped_once(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_stream(t, "s", "0");
    tb_buf(t, "A", 64);
    tb_buf(t, "B", 64);
    tb_op(t, "s", "wa", "w:A");
    tb_op(t, "h", "ra", "r:A");                     /* finding 1 */
    tb_op(t, "s", "wb", "w:B[0:16] w:B[32:48]");
    tb_op(t, "h", "rb", "r:B[0:16] r:B[32:48]");    /* finding 2, on two ranges */
    check_options opt = { .max_findings = 1 };
    check_report *rep = tb_check_opt(t, &opt);
    assert_int_equal(check_report_count(rep), 1);
    assert_int_equal(check_report_dropped(rep), 1);
    check_report_free(rep);
    rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 2);   /* and there are two in all */
    check_report_free(rep);
    trace_free(t);
}

/* A stream blocked only because its host never submits its work still names
 * the statement it is stuck at: seq is always present. */
static void test_findings_hang_unsubmitted_has_seq(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_stream(t, "s", "0");
    tb_await(t, "h", "never");
    tb_op(t, "s", "k", NULL);
    check_report *rep = tb_check(t);
    char *j = capture_json(rep);
    assert_non_null(strstr(j, "{\"queue\": \"s\", \"waits_for\": \"submission by h, which is "
                              "blocked\", \"line\": 2, \"seq\": 1}"));
    free(j);
    check_report_free(rep);
    trace_free(t);
}

/* A hang's fix names the place of the statement it is stuck at, also when a
 * lazy reader has not built its label yet (issue 21: "recv at  can never
 * complete"). */
static void test_findings_hang_fix_names_place_of_lazy_label(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_buf(t, "b", 8);
    trace_stmt s;
    trace_access acc = { .buffer = 0, .mode = TRACE_W, .form = TRACE_REF_WHOLE, .lo = 0, .hi = 8 };
    trace_stmt_init(&s);
    s.queue = tb_q(t, "h");
    s.kind = TRACE_RECV;
    s.object = trace_intern_cstr(t, "ctl");
    s.rank = 0;
    s.peer = 1;
    s.label = TRACE_LABEL_LAZY;
    s.n_access = 1;
    s.access = &acc;
    s.line = 4;
    trace_append(t, &s);
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_HANG);
    assert_non_null(f);
    assert_non_null(strstr(f->fix, "recv at h@4 can never complete"));
    check_report_free(rep);
    trace_free(t);
}

/* Ruling 1 in the hang's explanation: a signal that follows the await is
 * not what it waits for, so h1 -> s0 -> h1 (s0's signal submitted by h1
 * after its await) is no deadlock; h0's signal, stuck behind an await
 * nothing signals, is the cause. */
static void test_findings_hang_no_cycle_through_later_signal(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_host(t, "h1");
    tb_stream(t, "s0", "0");
    tb_await(t, "h0", "g");
    tb_signal(t, "h0", "f");
    tb_await(t, "h1", "f");
    tb_by_host = tb_q(t, "h1");
    tb_signal(t, "s0", "f");
    tb_by_host = TRACE_NONE;
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_HANG);
    assert_non_null(f);
    assert_int_equal(tb_parts(f, TRACE_PART_BLOCKED, NULL), 3);
    assert_int_equal(tb_parts(f, TRACE_PART_CYCLE, NULL), 0);
    assert_non_null(strstr(f->fix, "nothing signals g"));
    check_report_free(rep);
    trace_free(t);
}

/* Bytes that are not UTF-8 (from a database or an importer) leave valid JSON. */
static void test_findings_json_escapes_invalid_utf8(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_stream(t, "s", "0");
    tb_buf(t, "X", 8);
    tb_op(t, "s", "k\xff\xc3\xa9", "w:X");
    tb_op(t, "h", "r", "r:X");
    check_report *rep = tb_check(t);
    char *j = capture_json(rep);
    assert_non_null(strstr(j, "\"label\": \"k\\ufffd\xc3\xa9\""));
    free(j);
    check_report_free(rep);
    trace_free(t);
}

/* A double free is a use-after-free whose fix is about the frees. */
static void test_findings_double_free_fix(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_buf(t, "X", 8);
    tb_alloc_free(t, "h", TRACE_FREE, "X");
    tb_alloc_free(t, "h", TRACE_FREE, "X");
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_USE_AFTER_FREE);
    assert_non_null(f);
    assert_string_equal(f->fix, "free X once: remove one of the frees (h@1, h@2), or alloc it "
                                "again between them");
    assert_non_null(strstr(f->text, "a double free"));
    check_report_free(rep);
    trace_free(t);
}

/* An extra arrival at a barrier: one finding with every participant, the
 * extra one marked, whichever order the queues run in. */
static void test_findings_barrier_mismatch_json(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "t0");
    tb_host(t, "t1");
    tb_host(t, "t2");
    tb_barrier(t, "t0", "b", 2);
    tb_barrier(t, "t1", "b", 2);
    tb_barrier(t, "t2", "b", 2);
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    char *j = capture_json(rep);
    assert_non_null(strstr(j, "{\"kind\": \"barrier-mismatch\", \"barrier\": \"b\", "
                              "\"generation\": 1, \"participants\": [{\"queue\": \"t0\", "
                              "\"count\": 2, \"line\": 1, \"seq\": 0}, {\"queue\": \"t1\", "
                              "\"count\": 2, \"line\": 2, \"seq\": 1}, {\"queue\": \"t2\", "
                              "\"count\": 2, \"line\": 3, \"seq\": 2, \"extra\": true}]"));
    assert_non_null(strstr(j, "\"summary\": {\"barrier-mismatch\": 1}"));
    free(j);
    check_report_free(rep);
    trace_free(t);
}

static void test_findings_human_output_groups_races(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    char name[16], lab[16];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "A%d", i);
        tb_buf(t, name, 64);
    }
    for (int i = 0; i < 5; i++) {
        snprintf(lab, sizeof lab, "w%d", i);
        snprintf(name, sizeof name, "w:A%d", i);
        tb_op(t, "s0", lab, name);
        snprintf(lab, sizeof lab, "r%d", i);
        snprintf(name, sizeof name, "r:A%d", i);
        tb_op(t, "s1", lab, name);
    }
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 5);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    check_report_print(f, rep, false);
    fclose(f);
    assert_non_null(strstr(buf, "w0 (s0) and r0 (s1)"));
    assert_null(strstr(buf, "w1 (s0) and r1 (s1)"));
    assert_non_null(strstr(buf, "and 4 more races between s0 and s1"));
    free(buf);
    check_report_free(rep);
    trace_free(t);
}

/* An incomplete run without findings is not clean, in text and JSON. */
static void test_findings_incomplete_is_never_clean(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_buf(t, "X", 8);
    tb_op(t, "h", "w", "w:X");
    check_report *rep = tb_check(t);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    check_report_print(f, rep, true);
    check_report_print_json(f, rep, "k.db", true);
    fclose(f);
    assert_null(strstr(buf, "clean:"));
    assert_non_null(strstr(buf, "incomplete: 1 statements checked, no findings among them"));
    assert_non_null(strstr(buf, "\"status\": \"incomplete\", \"exit\": 3, \"complete\": false"));
    free(buf);
    assert_int_equal(check_status_of(0, true, NULL), CHECK_INCOMPLETE);
    assert_int_equal(check_status_of(2, true, NULL), CHECK_FINDINGS);
    assert_int_equal(check_status_of(0, false, NULL), CHECK_CLEAN);
    check_report_free(rep);
    trace_free(t);
}

/* A capture without byte ranges is never called clean: races were not
 * checked, the verdict and the JSON say so, and the status is "partial"
 * (exit 4), not "clean" (exit 0). */
static void test_findings_ordering_only_says_what_was_not_checked(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_stream(t, "s0", "0");
    tb_stmt(t, "s0", TRACE_OP, "kernel", NULL, NULL);
    tb_sync(t, "h", "s0");
    assert_int_equal(trace_set_meta(t, "accesses", "none"), 0);
    check_report *rep = tb_check(t);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    check_report_print(f, rep, false);
    check_report_print_json(f, rep, "cap.json", false);
    fclose(f);
    assert_null(strstr(buf, "clean"));
    assert_non_null(strstr(buf, "no findings, partial coverage: 2 statements"));
    assert_non_null(strstr(buf, "1 of 1 device statements have no byte ranges, so their races "
                                "and uses after free were not checked"));
    assert_non_null(strstr(buf, "\"status\": \"partial\", \"exit\": 4, \"complete\": true, "
                                "\"races_checked\": false"));
    assert_non_null(strstr(buf, "\"coverage\": {\"full\": false, \"captured\": true, "
                                "\"device_statements\": 1, \"with_byte_ranges\": 0"));
    free(buf);
    assert_false(check_sees_races(t));
    assert_int_equal(check_status_of(0, false, check_report_coverage(rep)), CHECK_PARTIAL);
    assert_int_equal(check_exit_status(CHECK_PARTIAL), 4);
    check_report_free(rep);
    trace_free(t);
}

/* Coverage is full when every device statement of a capture has a byte
 * range; events dropped at import or absent ranks make it partial, each
 * named in the verdict. */
static void test_findings_coverage_counts_drops_and_ranks(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_stream(t, "s0", "0");
    tb_buf(t, "A", 64);
    tb_op(t, "s0", "kernel", "w:A");
    tb_sync(t, "h", "s0");
    assert_int_equal(trace_set_meta(t, "accesses", "pointers"), 0);
    check_report *rep = tb_check(t);
    assert_true(check_coverage_full(check_report_coverage(rep)));
    char v[1024];
    const check_coverage *c = check_report_coverage(rep);
    check_verdict(v, sizeof v, t, 2, 0, false, c, NULL, 0);
    assert_non_null(strstr(v, "clean: 2 statements, no findings; coverage full: 1 of 1 device "
                              "statements with byte ranges"));
    check_report_free(rep);

    assert_int_equal(trace_set_meta(t, "dropped.no-ts", "3"), 0);
    assert_int_equal(trace_set_meta(t, "partial", "1/4"), 0);
    assert_int_equal(trace_set_meta(t, "ranks.absent", "1-3"), 0);
    rep = tb_check(t);
    c = check_report_coverage(rep);
    assert_false(check_coverage_full(c));
    check_verdict(v, sizeof v, t, 2, 0, false, c, NULL, 0);
    assert_non_null(strstr(v, "no findings, partial coverage"));
    assert_non_null(strstr(v, "3 events dropped at import (no-ts 3)"));
    assert_non_null(strstr(v, "3 of 4 ranks absent (1-3)"));
    assert_int_equal(check_status_of(0, false, c), CHECK_PARTIAL);
    /* findings still win over partial coverage */
    assert_int_equal(check_status_of(1, false, c), CHECK_FINDINGS);
    check_report_free(rep);
    trace_free(t);
}

/* A read that the lifetime marks cannot judge for use after free (it also
 * races with h0's last alloc, as such an access always does: the mark it
 * did not see writes the whole buffer). */
static trace *unjudged_access(void)
{
    trace *t = tb_more_marks_than_kept();
    tb_op(t, "h1", "stale", "r:X");
    return t;
}

/* `check --json`'s coverage counts the accesses not judged for use after
 * free, as the verdict does. */
static void test_findings_json_counts_unjudged_accesses(void **state)
{
    (void)state;
    trace *t = unjudged_access();
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_coverage(rep)->uaf_unjudged, 1);
    char *buf = capture_json(rep);
    assert_non_null(strstr(buf, "\"full\": false"));
    assert_non_null(strstr(buf, "\"uaf_unjudged\": 1"));
    free(buf);
    check_report_free(rep);
    trace_free(t);
}

/* A stored check keeps the count: read back, its coverage is partial and
 * says why, and a stored check with that count and no finding is "partial"
 * (exit 4), never clean. */
static void test_findings_stored_check_keeps_unjudged_accesses(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace *t = unjudged_access();
    trace_reader r;
    trace_reader_memory(&r, t);
    assert_int_equal(trace_store_import(f->db, &r, "unjudged", NULL, &err), 1);
    trace_reader_close(&r);
    trace_source src;
    trace_source_opts o = { .write_results = true };
    assert_int_equal(trace_source_open(&src, f->db, &o, &err), 0);
    check_report *rep = NULL;
    assert_int_equal(check_trace(&src.reader, &(check_options){ 0 }, &rep, &err), 0);
    assert_int_equal(check_store_report(&src, rep, &err), 0);
    check_report_free(rep);

    trace_check_info back;
    trace_finding *found = NULL;
    size_t n = 0;
    assert_int_equal(trace_store_load_check(src.store, 0, src.reader.trace, &back, &found, &n,
                                            &err), 0);
    check_coverage cov;
    const check_coverage *c = check_coverage_from_info(&cov, &back);
    assert_non_null(c);
    assert_int_equal(c->uaf_unjudged, 1);
    assert_false(check_coverage_full(c));
    char v[1024];
    check_verdict(v, sizeof v, src.reader.trace, back.statements, back.findings, false, c, found,
                  n);
    assert_non_null(strstr(v, "coverage partial: 1 access not judged for use after free"));
    trace_findings_free(found, n);
    assert_int_equal(check_exit_status(check_status_of(0, false, c)), 4);

    /* the same count with no finding, stored and read back: partial */
    back.findings = 0;
    assert_int_equal(trace_store_save_check(src.store, 0, src.reader.trace, &back, NULL, 0, &err),
                     0);
    assert_int_equal(trace_store_load_check(src.store, 0, src.reader.trace, &back, &found, &n,
                                            &err), 0);
    c = check_coverage_from_info(&cov, &back);
    assert_non_null(c);
    assert_int_equal(check_status_of(back.findings, back.incomplete, c), CHECK_PARTIAL);
    trace_findings_free(found, n);
    trace_source_close(&src);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_findings_json_has_the_spec_fields),
        cmocka_unit_test(test_findings_wait_unrecorded_json),
        cmocka_unit_test(test_findings_expect_exact_match),
        cmocka_unit_test(test_findings_expect_reports_missing_and_unexpected),
        cmocka_unit_test(test_findings_expect_queue_at_line_names),
        cmocka_unit_test(test_findings_expect_clean_fails_on_findings),
        cmocka_unit_test(test_findings_expect_hang_names_exact_queues),
        cmocka_unit_test(test_findings_max_findings_counts_the_rest),
        cmocka_unit_test(test_findings_max_findings_counts_each_dropped_once),
        cmocka_unit_test(test_findings_hang_unsubmitted_has_seq),
        cmocka_unit_test(test_findings_hang_fix_names_place_of_lazy_label),
        cmocka_unit_test(test_findings_hang_no_cycle_through_later_signal),
        cmocka_unit_test(test_findings_json_escapes_invalid_utf8),
        cmocka_unit_test(test_findings_double_free_fix),
        cmocka_unit_test(test_findings_barrier_mismatch_json),
        cmocka_unit_test(test_findings_human_output_groups_races),
        cmocka_unit_test(test_findings_incomplete_is_never_clean),
        cmocka_unit_test(test_findings_ordering_only_says_what_was_not_checked),
        cmocka_unit_test(test_findings_coverage_counts_drops_and_ranks),
        cmocka_unit_test(test_findings_json_counts_unjudged_accesses),
        cmocka_unit_test_setup_teardown(test_findings_stored_check_keeps_unjudged_accesses,
                                        tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
