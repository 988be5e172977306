/*
 * test_import_ledger.c -- the import ledger: each way a capture can hold
 * data the importer does not import is counted by its reason (run metadata
 * dropped.REASON), shown by `info --json`, warned about by `import`, and
 * refused by `import --strict` (exit 2, no database). The captures are
 * synthetic, written by the tests: a small Kineto trace (one launch, one
 * kernel) with one bad event added, and a CUDA injection log. An importer
 * that reads an event and accounts for nothing has it counted too
 * (`unaccounted`).
 */
#include "../tmpdir.h"
#include "import_test_util.h"
#include "traces/formats/formats.h"

#include <unistd.h>

/* A clean capture: a launch and its kernel; %s is where a case adds events. */
static const char base[] =
    "{\"schemaVersion\": 1, \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 10, \"dur\": 2, \"args\": {\"correlation\": 1}},\n"
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 13, "
    "\"dur\": 4, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 1}}%s]}\n";

/* A kernel event with the given members (ts, dur, args). */
#define KERNEL(members) \
    ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k2\", \"pid\": 0, \"tid\": 7, " members "}"
#define ARGS "\"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 1}"

typedef struct drop_case {
    const char *reason;
    const char *extra;      /* events added to base */
} drop_case;

static const drop_case cases[] = {
    { "no-ts", KERNEL("\"dur\": 4, " ARGS) },
    { "bad-ts", KERNEL("\"ts\": 1e30, \"dur\": 4, " ARGS) },
    { "no-dur", KERNEL("\"ts\": 20, " ARGS) },
    { "negative-dur-clamped", KERNEL("\"ts\": 20, \"dur\": -4, " ARGS) },
    { "bad-number", KERNEL("\"ts\": 20, \"dur\": 4, \"args\": {\"device\": 0, \"stream\": "
                           "\"banana\", \"correlation\": 1}") },
    { "bad-type", KERNEL("\"ts\": [20], \"dur\": 4, " ARGS) },
    { "missing-field", ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMalloc\", "
                       "\"pid\": 5, \"ts\": 30, \"dur\": 2, \"args\": {\"correlation\": 2}}" },
    { "unknown-category", ",\n{\"ph\": \"X\", \"cat\": \"gpu_frobnicate\", \"name\": \"f\", "
                          "\"pid\": 0, \"tid\": 7, \"ts\": 30, \"dur\": 2}" },
    { "unmatched-correlation", KERNEL("\"ts\": 20, \"dur\": 4, \"args\": {\"device\": 0, "
                                      "\"stream\": 7, \"correlation\": 99}") },
    { "sync-without-call", ",\n{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"Stream Sync\", "
                           "\"pid\": 0, \"tid\": 7, \"ts\": 30, \"dur\": 1, \"args\": "
                           "{\"cuda_sync_kind\": \"Stream Sync\", \"device\": 0, \"stream\": 7, "
                           "\"correlation\": 77}}" },
    { "unbound-wait", ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                      "\"cudaStreamWaitEvent\", \"pid\": 5, \"tid\": 6, \"ts\": 30, \"dur\": 2, "
                      "\"args\": {\"correlation\": 3}}" },
    { "nccl-unmatched", ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
                        "\"ncclDevKernel_Generic_1\", \"pid\": 0, \"tid\": 7, \"ts\": 20, "
                        "\"dur\": 4, " ARGS "}" },
    { "guessed-stream", ",\n{\"ph\": \"X\", \"cat\": \"cuda_profiler_range\", \"name\": \"k\", "
                        "\"pid\": 0, \"tid\": 0, \"ts\": 100, \"dur\": 50, \"args\": {}}" },
    /* issue 31: every guess is counted */
    { "duplicate-key", KERNEL("\"ts\": 20, \"ts\": 21, \"dur\": 4, " ARGS) },
    { "ignored-gpu-work", ",\n{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"k2\", "
                          "\"pid\": 0, \"tid\": 7, \"ts\": 20, \"dur\": 4, " ARGS "}" },
    { "duplicate", ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, "
                   "\"tid\": 7, \"ts\": 13, \"dur\": 4, " ARGS "}" },
    { "launch-without-work", ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                             "\"cudaLaunchKernel\", \"pid\": 5, \"tid\": 6, \"ts\": 30, "
                             "\"dur\": 2, \"args\": {\"correlation\": 2}}" },
    { "widened-sync", ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                      "\"cudaStreamSynchronize\", \"pid\": 5, \"tid\": 6, \"ts\": 30, "
                      "\"dur\": 2, \"args\": {\"correlation\": 3}}" },
    { "assumed-record", ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                        "\"cudaStreamWaitEvent\", \"pid\": 5, \"tid\": 6, \"ts\": 30, "
                        "\"dur\": 2, \"args\": {\"correlation\": 3}},\n"
                        "{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"Stream Wait Event\", "
                        "\"pid\": 0, \"tid\": 8, \"ts\": 31, \"dur\": 1, \"args\": "
                        "{\"cuda_sync_kind\": \"Stream Wait Event\", \"device\": 0, \"stream\": 8, "
                        "\"wait_on_stream\": 7, \"wait_on_cuda_event_id\": 1, \"correlation\": 3}}" },
    { "idle-stream-wait", ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                          "\"cudaEventRecord\", \"pid\": 5, \"tid\": 6, \"ts\": 28, "
                          "\"dur\": 1, \"args\": {\"correlation\": 3}},\n"
                          "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                          "\"cudaStreamWaitEvent\", \"pid\": 5, \"tid\": 6, \"ts\": 30, "
                          "\"dur\": 2, \"args\": {\"correlation\": 4}},\n"
                          "{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"Stream Wait Event\", "
                          "\"pid\": 0, \"tid\": 8, \"ts\": 31, \"dur\": 1, \"args\": "
                          "{\"cuda_sync_kind\": \"Stream Wait Event\", \"device\": 0, \"stream\": 8, "
                          "\"wait_on_stream\": 7, \"wait_on_cuda_event_record_corr_id\": 3, "
                          "\"wait_on_cuda_event_id\": 1, \"correlation\": 4}},\n"
                          "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                          "\"cudaStreamWaitEvent\", \"pid\": 5, \"tid\": 6, \"ts\": 40, "
                          "\"dur\": 2, \"args\": {\"correlation\": 5}}" },
    { "host-unrecorded", ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                         "\"cudaMemcpyAsync\", \"pid\": 5, \"tid\": 6, \"ts\": 30, \"dur\": 2, "
                         "\"args\": {\"correlation\": 2}},\n"
                         "{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": "
                         "\"Memcpy DtoH (Device -> Pinned)\", \"pid\": 0, \"tid\": 7, \"ts\": 33, "
                         "\"dur\": 4, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 2, "
                         "\"bytes\": 64}}" },
};

static const drop_case *case_of(const char *reason)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].reason, reason) == 0)
            return &cases[i];
    fail_msg("no case %s", reason);
    return NULL;
}

/* Writes base with the case's events as DIR/case.json; returns the path. */
static void write_case(const fixture *f, const drop_case *c, char *path, size_t cap)
{
    char text[4096];
    snprintf(text, sizeof text, base, c->extra);
    snprintf(path, cap, "%s/case.json", f->dir);
    write_file(path, text, strlen(text));
}

/* The behaviour every reason shares: counted once in the run metadata,
 * nothing else counted; shown by info --json; one warning line from import;
 * --strict refuses with exit 2 and writes nothing. */
static void expect_dropped(void **state, const char *reason)
{
    fixture *f = *state;
    char path[256], out[8192], want[128];
    write_case(f, case_of(reason), path, sizeof path);
    trace *t = load_capture(path, NULL);
    snprintf(want, sizeof want, TRACE_LEDGER_PREFIX "%s", reason);
    assert_meta(t, want, "1");
    assert_int_equal(trace_ledger(t, NULL, NULL), 1);
    trace_free(t);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s info --json case.json", SYNCSIM_BINARY),
                     0);
    snprintf(want, sizeof want, "\"dropped_total\": 1, \"dropped\": {\"%s\": 1}", reason);
    if (!strstr(out, want))
        fail_msg("info --json lacks %s: %s", want, out);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import case.json -o ok.db", SYNCSIM_BINARY),
                     0);
    snprintf(want, sizeof want, "case.json: warning: 1 %s: %s (%s)",
             trace_ledger_assumed(reason) ? "ordering assumption" : "event dropped", reason,
             trace_ledger_meaning(reason));
    if (!strstr(out, want))
        fail_msg("import does not warn '%s': %s", want, out);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import --strict case.json -o strict.db",
                               SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "(--strict): nothing written"));
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test ! -e strict.db"), 0);
}

static void test_import_ledger_clean_capture_drops_nothing(void **state)
{
    fixture *f = *state;
    char path[256], out[8192];
    drop_case clean = { "none", "" };
    write_case(f, &clean, path, sizeof path);
    trace *t = load_capture(path, NULL);
    assert_int_equal(trace_ledger(t, NULL, NULL), 0);
    assert_meta(t, "import.read", "2");
    trace_free(t);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import --strict case.json -o k.db",
                               SYNCSIM_BINARY), 0);
    assert_null(strstr(out, "warning"));
}

#define DROP_TEST(fn, reason)                                                                     \
    static void test_import_ledger_##fn(void **state) { expect_dropped(state, reason); }
DROP_TEST(no_ts, "no-ts")
DROP_TEST(bad_ts, "bad-ts")
DROP_TEST(no_dur, "no-dur")
DROP_TEST(negative_dur_clamped, "negative-dur-clamped")
DROP_TEST(bad_number, "bad-number")
DROP_TEST(bad_type, "bad-type")
DROP_TEST(missing_field, "missing-field")
DROP_TEST(unknown_category, "unknown-category")
DROP_TEST(unmatched_correlation, "unmatched-correlation")
DROP_TEST(sync_without_call, "sync-without-call")
DROP_TEST(unbound_wait, "unbound-wait")
DROP_TEST(nccl_unmatched, "nccl-unmatched")
DROP_TEST(guessed_stream, "guessed-stream")
DROP_TEST(duplicate_key, "duplicate-key")
DROP_TEST(ignored_gpu_work, "ignored-gpu-work")
DROP_TEST(duplicate, "duplicate")
DROP_TEST(launch_without_work, "launch-without-work")
DROP_TEST(widened_sync, "widened-sync")
DROP_TEST(assumed_record, "assumed-record")
DROP_TEST(idle_stream_wait, "idle-stream-wait")
DROP_TEST(host_unrecorded, "host-unrecorded")

/* One reason per event: a kernel without a duration whose call is missing
 * is counted once (no-dur, the first found), not twice: read = imported +
 * ignored + counted holds. */
static void test_import_ledger_one_reason_per_event(void **state)
{
    fixture *f = *state;
    char path[256], out[8192];
    drop_case twice = { "two faults", KERNEL("\"ts\": 20, \"args\": {\"device\": 0, \"stream\": 7, "
                                             "\"correlation\": 99}") };
    write_case(f, &twice, path, sizeof path);
    trace *t = load_capture(path, NULL);
    assert_meta(t, "import.read", "3");
    assert_meta(t, "dropped.no-dur", "1");
    assert_null(trace_get_meta(t, "dropped.unmatched-correlation"));
    assert_int_equal(trace_ledger(t, NULL, NULL), 1);
    trace_free(t);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s info --json case.json", SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "\"read\": 3, \"imported\": 2, \"ignored\": 0, "
                                "\"dropped_total\": 1"));
}

/* A clamped duration is kept, as 0: the event is imported and counted. */
static void test_import_ledger_negative_dur_is_kept_as_zero(void **state)
{
    fixture *f = *state;
    char path[256];
    write_case(f, case_of("negative-dur-clamped"), path, sizeof path);
    trace *t = load_capture(path, NULL);
    trace_stmt s = find_label(t, "k2");
    assert_int_equal(s.dur, 0);
    trace_free(t);
}

/* A timestamp that is no time leaves no statement at t=0. */
static void test_import_ledger_bad_ts_makes_no_statement(void **state)
{
    fixture *f = *state;
    char path[256];
    write_case(f, case_of("bad-ts"), path, sizeof path);
    trace *t = load_capture(path, NULL);
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        assert_true(s.label == TRACE_NONE || strcmp(trace_str(t, s.label), "k2") != 0);
    }
    trace_free(t);
}

/* The CUDA injection log's reasons: a last line cut short. */
static void test_import_ledger_truncated_line(void **state)
{
    fixture *f = *state;
    char out[8192];
    static const char log[] =
        "syncsim-cuda-log 1\n"
        "api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=4096 name=cudaMalloc\n"
        "api pid=1 tid=1 t0=12 t1=";
    assert_int_equal(tmpdir_write(f, "cuda.log", log), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s info --json cuda.log", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "\"dropped\": {\"truncated-line\": 1}"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import --strict cuda.log -o s.db",
                               SYNCSIM_BINARY), 2);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test ! -e s.db"), 0);
}

/* An importer that reads an event and neither hands it to the model nor
 * counts it cannot lose it: the model counts it as unaccounted. */
static void test_import_ledger_unaccounted_events_are_counted(void **state)
{
    (void)state;
    trace *t = trace_new();
    capture *c = capture_new(t, "defective");
    assert_non_null(c);
    capture_read(c);    /* accounted: a call */
    uint32_t h = capture_host(c, 1, 1);
    assert_int_equal(capture_api(c, h, 0, 10, 20, 1, trace_intern_cstr(t, "cudaMalloc")), 0);
    capture_read(c);    /* not accounted */
    capture_read(c);    /* ignored by design */
    capture_ignore(c);
    capture_read(c);    /* not accounted: the last one */
    trace_reader r;
    trace_error err = { 0 };
    assert_int_equal(capture_open_reader(c, NULL, &r, "defective", &err), 0);
    assert_meta(r.trace, "dropped.unaccounted", "2");
    assert_meta(r.trace, "import.read", "4");
    assert_meta(r.trace, "import.ignored", "1");
    trace_reader_close(&r);
}

/* A GPU activity seen twice is kept once; the accesses its copy is given
 * (the CUDA log gives them after each activity) are not the first one's. */
static void test_import_ledger_duplicate_activity_keeps_its_accesses(void **state)
{
    (void)state;
    trace *t = trace_new();
    capture *c = capture_new(t, "twice");
    assert_non_null(c);
    capture_read(c);
    uint32_t h = capture_host(c, 1, 1), s = capture_stream(c, 1, 0, 7);
    assert_int_equal(capture_api(c, h, 1, 10, 11, 1, trace_intern_cstr(t, "cudaLaunchKernel")), 0);
    uint32_t a = capture_buffer(c, 1, CAP_MEM_DEVICE, 0, 0x1000, 64);
    uint32_t b = capture_buffer(c, 1, CAP_MEM_DEVICE, 0, 0x2000, 64);
    cap_gpu g = { .stream = s, .kind = CAP_KERNEL, .t0 = 20, .t1 = 30, .corr = 1,
                  .name = trace_intern_cstr(t, "k"), .src_device = CAP_NONE,
                  .dst_device = CAP_NONE, .comm = TRACE_NONE, .coll = TRACE_NONE };
    for (int i = 0; i < 2; i++) {
        capture_read(c);
        assert_int_equal(capture_gpu(c, &g), 0);
        assert_int_equal(capture_gpu_access(c, i ? b : a, 0, 64, TRACE_W), 0);
    }
    trace_reader r;
    trace_error err = { 0 };
    assert_int_equal(capture_open_reader(c, NULL, &r, "twice", &err), 0);
    trace *loaded = NULL;
    assert_int_equal(trace_reader_load(&r, &loaded, &err), 0);     /* closes r */
    assert_meta(loaded, "dropped.duplicate", "1");
    unsigned kernels = 0;
    for (uint64_t i = 0; i < loaded->n_stmts; i++) {
        trace_stmt st;
        trace_stmt_at(loaded, i, &st);
        if (st.label == TRACE_NONE || strcmp(trace_str(loaded, st.label), "k") != 0)
            continue;
        kernels++;
        assert_int_equal(st.n_access, 1);
        assert_string_equal(trace_str(loaded, loaded->buffers[st.access[0].buffer].name),
                            "gpu0.b0");
    }
    assert_int_equal(kernels, 1);
    trace_free(loaded);
}

/* Every reason has a word and a meaning; the CLI's lookups agree with it. */
static void test_import_ledger_reasons_have_meanings(void **state)
{
    (void)state;
    const char *meaning, *word;
    size_t n = 0;
    for (size_t i = 0; (word = trace_ledger_reason(i, &meaning)); i++, n++) {
        assert_string_equal(word, capture_drop_word((cap_drop)i));
        assert_non_null(meaning);
        assert_true(strlen(meaning) > 10);
        assert_ptr_equal(trace_ledger_meaning(word), meaning);
    }
    assert_int_equal(n, CAP_DROP_COUNT);
    assert_null(trace_ledger_meaning("no-such-reason"));
}

/* docs/importers.md lists every reason of the table (and no other). */
static void test_import_ledger_docs_list_every_reason(void **state)
{
    (void)state;
    FILE *f = fopen(SYNCSIM_SOURCE_DIR "/docs/importers.md", "r");
    assert_non_null(f);
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    const char *word;
    char row[64];
    for (size_t i = 0; (word = trace_ledger_reason(i, NULL)); i++) {
        snprintf(row, sizeof row, "| `%s` |", word);
        if (!strstr(doc, row))
            fail_msg("docs/importers.md has no row for %s", word);
    }
}

#define T(fn) cmocka_unit_test_setup_teardown(test_import_ledger_##fn, tmpdir_setup, tmpdir_teardown)
int main(void)
{
    const struct CMUnitTest tests[] = {
        T(clean_capture_drops_nothing),
        T(no_ts),
        T(bad_ts),
        T(no_dur),
        T(negative_dur_clamped),
        T(bad_number),
        T(bad_type),
        T(missing_field),
        T(unknown_category),
        T(unmatched_correlation),
        T(sync_without_call),
        T(unbound_wait),
        T(nccl_unmatched),
        T(guessed_stream),
        T(duplicate_key),
        T(ignored_gpu_work),
        T(duplicate),
        T(launch_without_work),
        T(widened_sync),
        T(assumed_record),
        T(idle_stream_wait),
        T(host_unrecorded),
        T(one_reason_per_event),
        T(negative_dur_is_kept_as_zero),
        T(bad_ts_makes_no_statement),
        T(truncated_line),
        cmocka_unit_test(test_import_ledger_unaccounted_events_are_counted),
        cmocka_unit_test(test_import_ledger_duplicate_activity_keeps_its_accesses),
        cmocka_unit_test(test_import_ledger_reasons_have_meanings),
        cmocka_unit_test(test_import_ledger_docs_list_every_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
