/*
 * test_export_chrome.c -- export --format chrome: export then import keeps
 * every queue, buffer, statement (kind, queue, accesses, attributes,
 * submitter), time, expectation and metadata; the JSON has the tracks,
 * flows and findings a viewer draws.
 */
#include "../tmpdir.h"
#include "import_test_util.h"

#include <dirent.h>

/* Writes the trace at src as Chrome JSON to path. */
static void export_chrome(const char *src, const char *path)
{
    trace_source s;
    trace_error err = { 0 };
    if (trace_source_open(&s, src, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    if (trace_chrome_write(out, &s.reader, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(fclose(out), 0);
    trace_source_close(&s);
}

/* a and b hold the same trace. */
static void assert_same(const trace *a, const trace *b, const char *what)
{
    if (a->n_queues != b->n_queues || a->n_buffers != b->n_buffers ||
        a->n_stmts != b->n_stmts || a->n_expects != b->n_expects || a->n_meta != b->n_meta)
        fail_msg("%s: %u/%u queues, %u/%u buffers, %llu/%llu statements, %u/%u expects, "
                 "%u/%u meta", what, a->n_queues, b->n_queues, a->n_buffers, b->n_buffers,
                 (unsigned long long)a->n_stmts, (unsigned long long)b->n_stmts, a->n_expects,
                 b->n_expects, a->n_meta, b->n_meta);
    for (uint32_t q = 0; q < a->n_queues; q++) {
        assert_string_equal(trace_str(a, a->queues[q].name), trace_str(b, b->queues[q].name));
        assert_int_equal(a->queues[q].kind, b->queues[q].kind);
        assert_string_equal(trace_str(a, a->queues[q].device), trace_str(b, b->queues[q].device));
    }
    for (uint32_t i = 0; i < a->n_buffers; i++) {
        const trace_buffer *x = &a->buffers[i], *y = &b->buffers[i];
        assert_string_equal(trace_str(a, x->name), trace_str(b, y->name));
        assert_int_equal(x->size, y->size);
        assert_int_equal(x->root_offset, y->root_offset);
        assert_int_equal(x->loc, y->loc);
        assert_int_equal(x->pinned, y->pinned);
    }
    for (uint64_t i = 0; i < a->n_stmts; i++) {
        trace_stmt x, y;
        trace_stmt_at(a, i, &x);
        trace_stmt_at(b, i, &y);
        if (!trace_stmt_equal(a, &x, b, &y) || x.t != y.t || x.dur != y.dur)
            fail_msg("%s: statement %llu differs", what, (unsigned long long)i);
    }
    for (uint32_t i = 0; i < a->n_expects; i++) {
        assert_int_equal(a->expects[i].kind, b->expects[i].kind);
        assert_int_equal(a->expects[i].n_kv, b->expects[i].n_kv);
    }
    for (uint32_t i = 0; i < a->n_meta; i++)
        assert_string_equal(trace_str(a, a->meta[i].value), trace_str(b, b->meta[i].value));
}

static void round_trip(const fixture *f, const char *src)
{
    char path[256];
    snprintf(path, sizeof path, "%s/rt.json", f->dir);
    export_chrome(src, path);
    trace *a = load_capture(src, NULL), *b = load_capture(path, NULL);
    assert_same(a, b, src);
    trace_free(a);
    trace_free(b);
}

static void test_export_chrome_round_trips_the_litmus_corpus(void **state)
{
    const char *dir = SYNCSIM_SOURCE_DIR "/tests/litmus";
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        char src[512];
        snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
        round_trip(*state, src);
        n++;
    }
    closedir(d);
    assert_true(n > 50);
}

static void test_export_chrome_round_trips_times_of_a_run(void **state)
{
    fixture *f = *state;
    trace_source s;
    trace_error err = { 0 };
    const char *timed = SYNCSIM_SOURCE_DIR "/tests/viz/pipeline-2dev-timed.trace";
    assert_int_equal(trace_source_open(&s, timed, NULL, &err), 0);
    assert_true(trace_store_import(f->db, &s.reader, "timed", NULL, &err) > 0);
    trace_source_close(&s);
    round_trip(f, f->db);
}

static void test_export_chrome_round_trips_captures(void **state)
{
    round_trip(*state, SHARED_CAPTURE("pipit-cloverleaf-nsys.sqlite"));
    round_trip(*state, SHARED_CAPTURE("hta-simple-add.json.gz"));
}

static void test_export_chrome_draws_tracks_and_flows(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/ms.json", f->dir);
    export_chrome(SHARED_CAPTURE("hta-event-sync-multi-stream.json.gz"), path);
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = '\0';
    assert_int_equal(strncmp(text, "{\"syncsim\": \"chrome-trace 1\"", 28), 0);
    assert_non_null(strstr(text, "\"process_name\", \"pid\": 1, \"tid\": 0, \"args\": "
                                 "{\"name\": \"host\"}"));
    assert_non_null(strstr(text, "{\"name\": \"device gpu0\"}"));
    assert_non_null(strstr(text, "\"thread_name\""));
    /* one record -> wait flow, and launch flows to the kernels */
    assert_non_null(strstr(text, "\"ph\": \"s\", \"cat\": \"sync\""));
    assert_non_null(strstr(text, "\"ph\": \"f\", \"cat\": \"sync\""));
    assert_non_null(strstr(text, "\"ph\": \"f\", \"cat\": \"launch\""));
    /* ts in microseconds with exact nanoseconds */
    assert_non_null(strstr(text, "\"ts\": 1712867402348700.000, \"dur\": 123.000"));
}

/* What check's writer would give, enough to find it in the file. */
static void finding_json(FILE *out, const trace *t, const trace_finding *f)
{
    (void)t;
    fprintf(out, "{\"kind\": \"%s\", \"fix\": \"record an event\"}",
            trace_finding_str(f->kind));
}

static void test_export_chrome_findings_are_instant_events(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/f.json", f->dir);
    trace_source s;
    trace_error err = { 0 };
    assert_int_equal(trace_source_open(&s, REPO_CAPTURE("kineto-2stream-missing-wait."
                                                        "synthetic.json"), NULL, &err), 0);
    FILE *out = fopen(path, "w");
    trace_chrome *w = trace_chrome_begin(out, &s.reader, &err);
    assert_non_null(w);
    trace_finding race = { .kind = TRACE_FINDING_RACE, .first = { .seq = 0 },
                           .second = { .seq = 1 } };
    assert_int_equal(trace_chrome_findings(w, &race, 1, finding_json, &err), 0);
    assert_int_equal(trace_chrome_end(w, &err), 0);
    fclose(out);
    trace_source_close(&s);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -q '\"cat\": \"finding\", \"name\": \"race\".*\"fix\": "
             "\"record an event\"' %s", path);
    assert_int_equal(system(cmd), 0);
    /* and it still reads back */
    trace *t = load_capture(path, NULL);
    assert_int_equal(count_kind(t, TRACE_OP), 4);
    trace_free(t);
}

static void test_export_chrome_out_of_order_statements_are_refused(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/bad.json", f->dir);
    const char *text =
        "{\"syncsim\": \"chrome-trace 1\", \"traceEvents\": [\n"
        "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, \"args\": "
        "{\"name\": \"h\", \"syncsim\": {\"kind\": \"host\"}}},\n"
        "{\"ph\": \"X\", \"name\": \"a\", \"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 1, "
        "\"args\": {\"seq\": 1, \"kind\": \"op\", \"queue\": \"h\"}}]}";
    write_file(path, text, strlen(text));
    trace_error err = open_error(path, NULL);
    assert_non_null(strstr(err.msg, "out of order"));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, tmpdir_setup, tmpdir_teardown)
    const struct CMUnitTest tests[] = {
        T(test_export_chrome_round_trips_the_litmus_corpus),
        T(test_export_chrome_round_trips_times_of_a_run),
        T(test_export_chrome_round_trips_captures),
        T(test_export_chrome_draws_tracks_and_flows),
        T(test_export_chrome_findings_are_instant_events),
        T(test_export_chrome_out_of_order_statements_are_refused),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
