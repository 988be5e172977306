/* test_sites.c -- check_trace gives each side of a finding, and each part,
 * its statement's call site (site=), read from the reader after the check;
 * a reader that cannot look back (attr_text NULL) gives none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/check.h"

/* A race of fill (s, site lib.so+0x10) and use (h, no site), and a hang
 * of h at an await with a site. */
static const char *text =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s stream device=0\n"
    "buffer X size=8\n"
    "s op fill w:X site=lib.so+0x10\n"
    "h op use r:X\n"
    "h await f site=app.py:3\n";

static const trace_finding *find_kind(const check_report *rep, trace_finding_kind k)
{
    for (size_t i = 0; i < check_report_count(rep); i++)
        if (check_report_finding(rep, i)->kind == k)
            return check_report_finding(rep, i);
    return NULL;
}

static const char *site_str(const trace *t, uint32_t site)
{
    return site == TRACE_NONE ? NULL : trace_str(t, site);
}

static void test_sites_sides_and_parts(void **state)
{
    (void)state;
    trace *t = NULL;
    trace_error err = { 0 };
    assert_int_equal(trace_text_parse_string("s.trace", text, strlen(text), &t, &err), 0);
    trace_reader r;
    trace_reader_memory(&r, t);
    check_report *rep = NULL;
    assert_int_equal(check_trace(&r, NULL, &rep, &err), 0);
    const trace_finding *race = find_kind(rep, TRACE_FINDING_RACE);
    assert_non_null(race);
    assert_string_equal(site_str(t, race->first.site), "lib.so+0x10");
    assert_null(site_str(t, race->second.site));
    const trace_finding *hang = find_kind(rep, TRACE_FINDING_HANG);
    assert_non_null(hang);
    bool blocked = false;
    for (uint32_t k = 0; k < hang->n_parts; k++)
        if (hang->parts[k].role == TRACE_PART_BLOCKED) {
            blocked = true;
            assert_string_equal(site_str(t, hang->parts[k].site), "app.py:3");
        }
    assert_true(blocked);
    check_report_free(rep);
    trace_reader_close(&r);
    trace_free(t);
}

static void test_sites_reader_that_cannot_look_back(void **state)
{
    (void)state;
    trace *t = NULL;
    trace_error err = { 0 };
    assert_int_equal(trace_text_parse_string("s.trace", text, strlen(text), &t, &err), 0);
    trace_reader r;
    trace_reader_memory(&r, t);
    trace_reader_iface blind = *r.iface;
    blind.attr_text = NULL;
    const trace_reader_iface *own = r.iface;
    r.iface = &blind;
    check_report *rep = NULL;
    assert_int_equal(check_trace(&r, NULL, &rep, &err), 0);
    const trace_finding *race = find_kind(rep, TRACE_FINDING_RACE);
    assert_non_null(race);
    assert_int_equal(race->first.site, TRACE_NONE);
    assert_int_equal(race->second.site, TRACE_NONE);
    const trace_finding *hang = find_kind(rep, TRACE_FINDING_HANG);
    assert_non_null(hang);
    for (uint32_t k = 0; k < hang->n_parts; k++)
        assert_int_equal(hang->parts[k].site, TRACE_NONE);
    check_report_free(rep);
    r.iface = own;
    trace_reader_close(&r);
    trace_free(t);
}

/* From a text file with lazy labels: N_PAIRS races whose sides lie in
 * many mark windows (a mark every 1024 statements). Labels and sites are
 * read again in seq order, the look parser reading on where it can; each
 * side must still get its own statement's label and site (wN at a.py:N,
 * rN at b.py:N). */
#define N_PAIRS 3000

static void test_sites_text_file_in_seq_order(void **state)
{
    (void)state;
    char path[] = "/tmp/syncsim-sites-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("syncsim-trace 1\nqueue h host\nqueue s1 stream device=0\n"
          "queue s2 stream device=0\n",
          f);
    for (int i = 0; i < N_PAIRS; i++)
        fprintf(f, "buffer b%d size=8\n", i);
    /* the reads come in reverse order, so findings and seqs disagree */
    for (int i = 0; i < N_PAIRS; i++)
        fprintf(f, "s1 op w%d w:b%d site=a.py:%d\n", i, i, i);
    for (int i = N_PAIRS - 1; i >= 0; i--)
        fprintf(f, "s2 op r%d r:b%d site=b.py:%d\n", i, i, i);
    fclose(f);
    trace_reader r;
    trace_error err = { 0 };
    assert_int_equal(trace_text_open_lazy(path, true, &r, &err), 0);
    check_report *rep = NULL;
    assert_int_equal(check_trace(&r, NULL, &rep, &err), 0);
    assert_int_equal(check_report_count(rep), N_PAIRS);
    for (size_t i = 0; i < check_report_count(rep); i++) {
        const trace_finding *x = check_report_finding(rep, i);
        int a = -1, b = -1, sa = -2, sb = -2;
        assert_int_equal(sscanf(trace_str(r.trace, x->first.label), "w%d", &a), 1);
        assert_int_equal(sscanf(trace_str(r.trace, x->second.label), "r%d", &b), 1);
        assert_non_null(site_str(r.trace, x->first.site));
        assert_non_null(site_str(r.trace, x->second.site));
        assert_int_equal(sscanf(site_str(r.trace, x->first.site), "a.py:%d", &sa), 1);
        assert_int_equal(sscanf(site_str(r.trace, x->second.site), "b.py:%d", &sb), 1);
        assert_int_equal(a, b);
        assert_int_equal(sa, a);
        assert_int_equal(sb, b);
    }
    check_report_free(rep);
    trace_reader_close(&r);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sites_sides_and_parts),
        cmocka_unit_test(test_sites_reader_that_cannot_look_back),
        cmocka_unit_test(test_sites_text_file_in_seq_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
