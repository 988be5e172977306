/* test_pattern.c -- the one sync-pattern alphabet (traces/pattern.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "traces/trace.h"

static trace *parse(const char *text)
{
    trace *t = NULL;
    trace_error err;
    if (trace_text_parse_string("p.trace", text, strlen(text), &t, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    return t;
}

/* The patterns of every statement of t, kept unless drop[seq]. */
static trace_pattern *pattern_of(const trace *t, const bool *drop)
{
    trace_pattern *p = trace_pattern_new();
    assert_non_null(p);
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        assert_int_equal(trace_pattern_feed(p, t, &s, !drop || !drop[i]), 0);
    }
    return p;
}

/* Every letter: s c a g r w and | between splits. */
static void test_pattern_every_letter(void **state)
{
    (void)state;
    trace *t = parse("syncsim-trace 1\n"
                     "queue h host\n"
                     "queue s0 stream device=0\n"
                     "queue s1 stream device=1\n"
                     "buffer X size=8\n"
                     "buffer A size=8\n"
                     "h sync all token=7 split=0\n"
                     "h copy in X A split=0\n"
                     "s0 copy up X A split=0\n"
                     "s0 op k1 w:A split=0\n"
                     "s0 op k2 w:A split=0\n"
                     "s0 record e split=0\n"
                     "s1 wait e split=1\n"
                     "s1 op k3 r:A split=1\n"
                     "h wait e\n");
    trace_pattern *p = pattern_of(t, NULL);
    assert_int_equal(trace_pattern_count(p), 1);
    trace_pattern_iter it = trace_pattern_at(p, 0);
    assert_string_equal(it.iter, "7");
    assert_string_equal(it.before, "scagr|wgs");
    assert_string_equal(it.after, "scagr|wgs");
    trace_pattern_free(p);
    trace_free(t);
}

/* Each token= value starts an iteration per host; dropped statements show in
 * `before` only; statements before a host's first iteration make none. */
static void test_pattern_iterations_and_drops(void **state)
{
    (void)state;
    trace *t = parse("syncsim-trace 1\n"
                     "queue h host\n"
                     "queue g stream device=0\n"
                     "buffer X size=8\n"
                     "h sync g\n"
                     "h sync g token=0\n"
                     "g op k w:X\n"
                     "h sync g\n"
                     "h sync g token=1\n"
                     "g op k w:X\n"
                     "h sync g\n");
    bool drop[7] = { false, true, false, false, true, false, false };
    trace_pattern *p = pattern_of(t, drop);
    assert_int_equal(trace_pattern_count(p), 2);
    trace_pattern_iter a = trace_pattern_at(p, 0), b = trace_pattern_at(p, 1);
    assert_string_equal(a.before, "sgs");
    assert_string_equal(a.after, "gs");
    assert_string_equal(b.iter, "1");
    assert_string_equal(b.before, "sgs");
    trace_pattern_iter last;
    assert_int_equal(trace_pattern_last(p, 0, &last), 0);
    assert_string_equal(last.iter, "1");
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    trace_pattern_print(out, t, p, true);
    fclose(out);
    assert_non_null(strstr(buf, "h iteration 0: sgs -> gs  (and 1 more iteration alike)"));
    free(buf);
    trace_pattern_free(p);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_every_letter),
        cmocka_unit_test(test_pattern_iterations_and_drops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
