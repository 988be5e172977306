/*
 * test_import_kineto.c -- PyTorch profiler traces and execution traces: the
 * public captures import with the counts SOURCES.md gives, the synthetic
 * two-stream pair is clean with its wait and racy without it, and bad
 * captures give one line and leave nothing behind.
 */
#include "../tmpdir.h"
#include "import_test_util.h"

#include <unistd.h>
#include <zlib.h>

#define CLEAN REPO_CAPTURE("kineto-2stream-clean.synthetic.json")
#define RACY REPO_CAPTURE("kineto-2stream-missing-wait.synthetic.json")
#define ET REPO_CAPTURE("et-2stream.synthetic.json")

/* Reads a whole file (the test's own data). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* Writes text gzipped to path; keep: how many compressed bytes to keep
 * (0: all), to make a truncated file. */
static void write_gz(const char *path, const char *text, size_t len, long keep)
{
    gzFile g = gzopen(path, "wb");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, text, (unsigned)len), (int)len);
    assert_int_equal(gzclose(g), Z_OK);
    if (keep)
        assert_int_equal(truncate(path, keep), 0);
}

static void test_import_kineto_event_sync_counts(void **state)
{
    (void)state;
    trace *t = load_capture(SHARED_CAPTURE("hta-event-sync-multi-stream.json.gz"), NULL);
    assert_meta(t, "capture.format", "kineto");
    assert_meta(t, "capture.kernels", "3");
    assert_meta(t, "capture.memset", "3");
    assert_meta(t, "capture.api_calls", "39");
    assert_meta(t, "capture.sync_rows", "5");
    assert_meta(t, "capture.flows", "50");
    assert_meta(t, "capture.events", "149");
    /* 3 Event Sync rows come from cudaEventQuery: no statement */
    assert_meta(t, "capture.queries", "3");
    assert_meta(t, "accesses", "none");
    assert_int_equal(count_queues(t, TRACE_QUEUE_HOST), 1);
    assert_int_equal(count_queues(t, TRACE_QUEUE_STREAM), 3);
    /* the Stream Wait Event on stream 24 of the record on 20; the Context Sync */
    assert_int_equal(count_kind(t, TRACE_WAIT), 1);
    assert_int_equal(count_kind(t, TRACE_RECORD), 1);
    assert_int_equal(count_kind(t, TRACE_SYNC), 1);
    trace_stmt s;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        if (s.kind == TRACE_WAIT)
            assert_string_equal(trace_str(t, t->queues[s.queue].name), "gpu0.s24");
        if (s.kind == TRACE_RECORD)
            assert_string_equal(trace_str(t, t->queues[s.queue].name), "gpu0.s20");
    }
    trace_free(t);
}

static void test_import_kineto_simple_add_counts(void **state)
{
    (void)state;
    trace *t = load_capture(SHARED_CAPTURE("hta-simple-add.json.gz"), NULL);
    assert_meta(t, "capture.kernels", "79");
    assert_meta(t, "capture.memcpy", "16");
    assert_meta(t, "capture.memset", "3");
    assert_meta(t, "capture.api_calls", "331");
    assert_meta(t, "capture.sync_rows", "41");
    assert_meta(t, "capture.cpu_ops", "359");
    assert_int_equal(count_kind(t, TRACE_COPY), 16);
    /* 20 Stream Wait Event rows, each with an assumed record on wait_on_stream */
    assert_int_equal(count_kind(t, TRACE_WAIT), 20);
    assert_int_equal(count_kind(t, TRACE_RECORD), 20);
    /* streams 7 and 20..27 of device 0, one host thread */
    assert_int_equal(count_queues(t, TRACE_QUEUE_STREAM), 9);
    assert_int_equal(count_queues(t, TRACE_QUEUE_HOST), 1);
    /* 16 Stream Sync + 5 Context Sync + 16 pageable (blocking) copies + 15 cudaFree */
    assert_int_equal(count_kind(t, TRACE_SYNC), 52);
    trace_free(t);
}

/* Every host op is the program's own time: it names its cost
 * (overhead_ns= its recorded duration), which the device model keeps. */
static void test_import_kineto_host_ops_name_their_own_cost(void **state)
{
    (void)state;
    trace *t = load_capture(SHARED_CAPTURE("hta-simple-add.json.gz"), NULL);
    uint64_t host_ops = 0;
    trace_stmt s;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        const char *o = stmt_attr(t, &s, "overhead_ns");
        bool on_host = t->queues[s.queue].kind == TRACE_QUEUE_HOST;
        if (s.kind == TRACE_OP && on_host) {
            host_ops++;
            assert_non_null(o);
            assert_int_equal(strtoll(o, NULL, 10), s.dur);
        } else {
            assert_null(o);         /* device work is the model's to price */
        }
    }
    assert_true(host_ops > 100);
    trace_free(t);
}

static void test_import_kineto_et_pair_gives_kernels_byte_ranges(void **state)
{
    (void)state;
    trace *t = load_capture(SHARED_CAPTURE("hta-simple-add-et-kineto.json.gz"),
                            SHARED_CAPTURE("hta-simple-add-et.json.gz"));
    assert_meta(t, "accesses", "execution-trace");
    assert_meta(t, "capture.kernels", "4");
    uint64_t kernels = 0;
    trace_stmt s;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        if (t->queues[s.queue].kind != TRACE_QUEUE_STREAM || s.kind != TRACE_OP)
            continue;
        kernels++;
        assert_true(s.n_access > 0);
        bool writes = false;
        for (uint32_t a = 0; a < s.n_access; a++) {
            writes |= (s.access[a].mode & TRACE_W) != 0;
            assert_int_equal(s.access[a].hi - s.access[a].lo, 65536 * 4);
        }
        assert_true(writes);
    }
    assert_int_equal(kernels, 4);
    trace_free(t);
}

static void test_import_kineto_et_without_it_is_ordering_only(void **state)
{
    (void)state;
    trace *t = load_capture(SHARED_CAPTURE("hta-simple-add-et-kineto.json.gz"), NULL);
    assert_meta(t, "accesses", "none");
    trace_free(t);
}

static void test_import_kineto_times_are_exact_and_sorted(void **state)
{
    (void)state;
    trace *t = load_capture(CLEAN, ET);
    trace_stmt fill = find_label(t, "fill_kernel"), add = find_label(t, "add_kernel");
    /* the add kernel is first in the file, later in submission */
    assert_true(fill.seq < add.seq);
    assert_int_equal(add.t, 1060250);
    assert_int_equal(add.dur, 5500);
    /* the host time after the first launch ends at 1002.125 us */
    trace_stmt s;
    bool found = false;
    for (uint64_t i = 0; i < t->n_stmts && !found; i++) {
        trace_stmt_at(t, i, &s);
        found = t->queues[s.queue].kind == TRACE_QUEUE_HOST && s.kind == TRACE_OP &&
                s.t == 1006125;
    }
    assert_true(found);
    trace_free(t);
}

static void test_import_kineto_profiler_step_marks_iterations(void **state)
{
    (void)state;
    trace *t = load_capture(CLEAN, NULL);
    trace_stmt s;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        const char *it = stmt_attr(t, &s, "iter");
        assert_non_null(it);
        assert_string_equal(it, "3");
    }
    trace_free(t);
}

static void test_import_kineto_unsigned_stream_is_a_device_sync(void **state)
{
    (void)state;
    trace *t = load_capture(CLEAN, NULL);
    trace_stmt s;
    uint64_t syncs = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        if (s.kind != TRACE_SYNC)
            continue;
        syncs++;
        assert_int_equal(s.sync_scope, TRACE_SYNC_DEVICE);
        assert_string_equal(trace_str(t, s.object), "gpu0");
    }
    assert_int_equal(syncs, 1);
    trace_free(t);
}

static void test_import_kineto_clean_pair_checks_clean(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import %s --et %s -o k.db",
                               SYNCSIM_BINARY, CLEAN, ET), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check k.db", SYNCSIM_BINARY), 0);
}

static void test_import_kineto_missing_wait_is_a_race_with_its_fix(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import %s --et %s -o k.db",
                               SYNCSIM_BINARY, RACY, ET), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check k.db", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "RAW"));
    assert_non_null(strstr(out, "fill_kernel"));
    assert_non_null(strstr(out, "add_kernel"));
    assert_non_null(strstr(out, "record an event on gpu0.s7 after fill_kernel and wait for it "
                                "on gpu0.s20 before add_kernel"));
}

static void test_import_kineto_reads_gzip_by_content(void **state)
{
    fixture *f = *state;
    size_t len;
    char *text = slurp(CLEAN, &len), path[256];
    snprintf(path, sizeof path, "%s/capture.bin", f->dir);
    write_gz(path, text, len, 0);
    trace *plain = load_capture(CLEAN, NULL), *gz = load_capture(path, NULL);
    assert_int_equal(plain->n_stmts, gz->n_stmts);
    for (uint64_t i = 0; i < plain->n_stmts; i++) {
        trace_stmt a, b;
        trace_stmt_at(plain, i, &a);
        trace_stmt_at(gz, i, &b);
        assert_true(trace_stmt_equal(plain, &a, gz, &b));
    }
    trace_free(plain);
    trace_free(gz);
    free(text);
}

static void test_import_kineto_truncated_gzip_is_one_line_and_writes_nothing(void **state)
{
    fixture *f = *state;
    size_t len;
    char *text = slurp(CLEAN, &len), path[256], out[4096];
    snprintf(path, sizeof path, "%s/cut.json.gz", f->dir);
    write_gz(path, text, len, 300);
    free(text);
    trace_error err = open_error(path, NULL);
    assert_non_null(strstr(err.msg, "cut.json.gz"));
    assert_true(strstr(err.msg, "truncated") || strstr(err.msg, "ends early"));
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import cut.json.gz -o k.db; test ! -e k.db",
                               SYNCSIM_BINARY), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import cut.json.gz -o k.db",
                               SYNCSIM_BINARY), 2);
}

static void test_import_kineto_invalid_json_names_the_byte(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/bad.json", f->dir);
    const char *text = "{\"schemaVersion\": 1, \"traceEvents\": [{\"ph\": \"X\",, }]}";
    write_file(path, text, strlen(text));
    trace_error err = open_error(path, NULL);
    assert_non_null(strstr(err.msg, "bad.json: invalid JSON at byte"));
    assert_null(strchr(err.msg, '\n'));
}

static void test_import_kineto_unknown_schema_version_is_refused(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/v2.json", f->dir);
    const char *text = "{\"schemaVersion\": 2, \"traceEvents\": []}";
    write_file(path, text, strlen(text));
    trace_error err = open_error(path, NULL);
    assert_int_equal(err.status, TRACE_EVERSION);
    assert_non_null(strstr(err.msg, "schemaVersion 2"));
}

static void test_import_kineto_unrelated_et_is_refused(void **state)
{
    fixture *f = *state;
    char out[4096];
    trace_error err = open_error(CLEAN, REPO_CAPTURE("et-unrelated.synthetic.json"));
    assert_non_null(strstr(err.msg, "et-unrelated.synthetic.json: none of the 3 ops"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import %s --et %s -o k.db",
                               SYNCSIM_BINARY, CLEAN,
                               REPO_CAPTURE("et-unrelated.synthetic.json")), 2);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "test ! -e k.db"), 0);
}

static void test_import_kineto_et_of_unknown_schema_is_refused(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/et.json", f->dir);
    const char *text = "{\"schema\": \"2.0.0\", \"nodes\": [{\"rf_id\": 1}]}";
    write_file(path, text, strlen(text));
    trace_error err = open_error(CLEAN, path);
    assert_int_equal(err.status, TRACE_EVERSION);
    assert_non_null(strstr(err.msg, "2.0.0"));
}

/* A ROCm trace: HIP names, no cuda_sync rows. */
static const char rocm[] =
    "{\"schemaVersion\": 1, \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"hipMemcpyAsync\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 10, \"dur\": 2, \"args\": {\"correlation\": 1}},\n"
    "{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"CopyHostToDevice\", \"pid\": 1, "
    "\"tid\": 3, \"ts\": 13, \"dur\": 4, \"args\": {\"device\": 1, \"stream\": 3, "
    "\"correlation\": 1, \"bytes\": 4096}},\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"hipLaunchKernel\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 20, \"dur\": 2, \"args\": {\"correlation\": 2}},\n"
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 1, \"tid\": 3, \"ts\": 23, "
    "\"dur\": 4, \"args\": {\"device\": 1, \"stream\": 3, \"correlation\": 2}},\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"hipStreamSynchronize\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 30, \"dur\": 5, \"args\": {\"correlation\": 3}}]}\n";

static void test_import_kineto_rocm_names_map_like_cuda(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/rocm.json", f->dir);
    write_file(path, rocm, strlen(rocm));
    trace *t = load_capture(path, NULL);
    assert_int_equal(count_kind(t, TRACE_COPY), 1);
    assert_int_equal(count_kind(t, TRACE_OP), 3); /* the kernel, the host time around its launch */
    trace_stmt k = find_label(t, "k");
    assert_string_equal(trace_str(t, t->queues[k.queue].name), "gpu1.s3");
    assert_string_equal(trace_str(t, t->queues[k.by].name), "host.5.6");
    /* hipStreamSynchronize without a sync row: the launching thread's device */
    trace_stmt s;
    trace_stmt_at(t, t->n_stmts - 1, &s);
    assert_int_equal(s.kind, TRACE_SYNC);
    assert_int_equal(s.sync_scope, TRACE_SYNC_DEVICE);
    assert_string_equal(trace_str(t, s.object), "gpu1");
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_kineto_event_sync_counts),
        cmocka_unit_test(test_import_kineto_simple_add_counts),
        cmocka_unit_test(test_import_kineto_host_ops_name_their_own_cost),
        cmocka_unit_test(test_import_kineto_et_pair_gives_kernels_byte_ranges),
        cmocka_unit_test(test_import_kineto_et_without_it_is_ordering_only),
        cmocka_unit_test(test_import_kineto_times_are_exact_and_sorted),
        cmocka_unit_test(test_import_kineto_profiler_step_marks_iterations),
        cmocka_unit_test(test_import_kineto_unsigned_stream_is_a_device_sync),
        cmocka_unit_test_setup_teardown(test_import_kineto_clean_pair_checks_clean,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_import_kineto_missing_wait_is_a_race_with_its_fix,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_import_kineto_reads_gzip_by_content, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(
            test_import_kineto_truncated_gzip_is_one_line_and_writes_nothing, tmpdir_setup,
            tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_import_kineto_invalid_json_names_the_byte,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_import_kineto_unknown_schema_version_is_refused,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_import_kineto_unrelated_et_is_refused, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_import_kineto_et_of_unknown_schema_is_refused,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_import_kineto_rocm_names_map_like_cuda,
                                        tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
