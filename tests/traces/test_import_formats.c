/*
 * test_import_formats.c -- the PyTorch profiles users have, beyond the
 * modern Kineto trace: PyTorch 1.8-1.10 categories (Kernel, Runtime, Memcpy,
 * Memset, Operator, "async" flows, ids as strings like "stream 7"), CUPTI
 * profiler ranges as kernels, profiles without CUDA or ROCm work (MTIA, CPU
 * only) refused in one line, distributedInfo kept whole, and an execution
 * trace that joins only its own capture. Every capture is synthetic,
 * written by the test, shaped after the public samples (the TensorBoard
 * plugin's ResNet50 traces, HTA's cupti_profiler, mtia and cpu_only data).
 */
#include "../tmpdir.h"
#include "import_test_util.h"

#define CLEAN REPO_CAPTURE("kineto-2stream-clean.synthetic.json")

static void write_in(const fixture *f, const char *name, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", f->dir, name);
    write_file(path, text, strlen(text));
}

/* PyTorch 1.8: the categories are capitalised, thread ids are strings and
 * GPU work sits on tid "stream 7"; flows are "async" "launch" pairs. */
static const char old_profile[] =
    "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"Tesla V100\"}],\n"
    "\"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"Operator\", \"name\": \"aten::copy_\", \"pid\": 25738, \"tid\": "
    "\"25738\", \"ts\": 100, \"dur\": 50, \"args\": {\"External id\": 7}},\n"
    "{\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaMemcpyAsync\", \"pid\": 25738, "
    "\"tid\": \"25738\", \"ts\": 101, \"dur\": 20, \"args\": {\"cbid\": 41, \"correlation\": 34417, "
    "\"external id\": 7}},\n"
    "{\"ph\": \"X\", \"cat\": \"Memcpy\", \"name\": \"Memcpy HtoD (Pageable -> Device)\", \"pid\": 0, "
    "\"tid\": \"stream 7\", \"ts\": 105, \"dur\": 15, \"args\": {\"device\": 0, \"context\": 1, "
    "\"stream\": 7, \"correlation\": 34417, \"bytes\": 4096}},\n"
    "{\"ph\": \"s\", \"id\": 34417, \"pid\": 25738, \"tid\": 25738, \"ts\": 101, \"cat\": \"async\", "
    "\"name\": \"launch\"},\n"
    "{\"ph\": \"f\", \"id\": 34417, \"pid\": 0, \"tid\": \"stream 7\", \"ts\": 105, \"cat\": "
    "\"async\", \"name\": \"launch\", \"bp\": \"e\"},\n"
    "{\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 25738, \"tid\": "
    "\"25738\", \"ts\": 130, \"dur\": 5, \"args\": {\"cbid\": 211, \"correlation\": 34441}},\n"
    "{\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"computeOffsetsKernel\", \"pid\": 0, "
    "\"tid\": \"stream 7\", \"ts\": 140, \"dur\": 2, \"args\": {\"queued\": 0, \"device\": 0, "
    "\"context\": 1, \"stream\": 7, \"correlation\": 34441}},\n"
    "{\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaMemsetAsync\", \"pid\": 25738, \"tid\": "
    "\"25738\", \"ts\": 150, \"dur\": 5, \"args\": {\"correlation\": 38304}},\n"
    "{\"ph\": \"X\", \"cat\": \"Memset\", \"name\": \"Memset (Device)\", \"pid\": 0, \"tid\": "
    "\"stream 7\", \"ts\": 156, \"dur\": 1, \"args\": {\"device\": 0, \"stream\": 7, "
    "\"correlation\": 38304, \"bytes\": 128}},\n"
    "{\"ph\": \"i\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 25738, \"tid\": 25738, \"ts\": "
    "121, \"args\": {\"Bytes\": 4}},\n"
    "{\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": 100, \"dur\": 100, \"pid\": \"Traces\", \"tid\": "
    "\"PyTorch Profiler\", \"name\": \"PyTorch Profiler (0)\", \"args\": {\"Op count\": 0}}\n"
    "]}\n";

static void test_import_formats_pytorch_18_categories_map_like_modern_ones(void **state)
{
    fixture *f = *state;
    char path[256];
    write_in(f, "old.json", old_profile, path, sizeof path);
    trace *t = load_capture(path, NULL);
    assert_meta(t, "capture.kernels", "1");
    assert_meta(t, "capture.memcpy", "1");
    assert_meta(t, "capture.memset", "1");
    assert_meta(t, "capture.cpu_ops", "1");
    assert_int_equal(trace_ledger(t, NULL, NULL), 0);
    trace_stmt k = find_label(t, "computeOffsetsKernel");
    assert_string_equal(trace_str(t, t->queues[k.queue].name), "gpu0.s7");
    assert_string_equal(trace_str(t, t->queues[k.by].name), "host.25738.25738");
    /* the pageable copy blocks its caller: copy, then sync on its stream */
    assert_int_equal(count_kind(t, TRACE_COPY), 1);
    assert_int_equal(count_kind(t, TRACE_SYNC), 1);
    trace_free(t);
}

/* An activity whose stream is a string id and whose correlation comes from
 * its flow keeps its submitter, and the caller's device sync stays a sync
 * of its device (not `sync all`). */
static const char string_ids[] =
    "{\"schemaVersion\": 1, \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 10, \"dur\": 2, \"args\": {\"correlation\": 1}},\n"
    "{\"ph\": \"s\", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"id\": 1, \"pid\": 5, \"tid\": 6, "
    "\"ts\": 10},\n"
    "{\"ph\": \"f\", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"id\": 1, \"pid\": 0, \"tid\": "
    "\"stream 7\", \"ts\": 13, \"bp\": \"e\"},\n"
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": \"stream 7\", "
    "\"ts\": 13, \"dur\": 4, \"args\": {\"device\": \"0\"}},\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 14, \"dur\": 2, \"args\": {\"correlation\": 2}},\n"
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k2\", \"pid\": 0, \"tid\": 7, \"ts\": 18, "
    "\"dur\": 4, \"args\": {\"device\": 0, \"stream\": \"7\", \"correlation\": \"2\"}},\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaDeviceSynchronize\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 30, \"dur\": 5, \"args\": {\"correlation\": 3}}\n"
    "]}\n";

static void test_import_formats_string_stream_ids_keep_by_and_device_sync(void **state)
{
    fixture *f = *state;
    char path[256];
    write_in(f, "ids.json", string_ids, path, sizeof path);
    trace *t = load_capture(path, NULL);
    assert_int_equal(trace_ledger(t, NULL, NULL), 0);
    const char *labels[] = { "k", "k2" };
    for (int i = 0; i < 2; i++) {
        trace_stmt k = find_label(t, labels[i]);
        assert_string_equal(trace_str(t, t->queues[k.queue].name), "gpu0.s7");
        assert_int_not_equal(k.by, TRACE_NONE);
        assert_string_equal(trace_str(t, t->queues[k.by].name), "host.5.6");
    }
    trace_stmt s;
    trace_stmt_at(t, t->n_stmts - 1, &s);
    assert_int_equal(s.kind, TRACE_SYNC);
    assert_int_equal(s.sync_scope, TRACE_SYNC_DEVICE);
    assert_string_equal(trace_str(t, s.object), "gpu0");
    trace_free(t);
}

/* The CUPTI range profiler: kernels as cuda_profiler_range events, without
 * stream or correlation, at times Kineto spreads evenly; the k-th range is
 * the kernel of the k-th launch. */
static const char ranges_fmt[] =
    "{\"schemaVersion\": 1, \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 9, "
    "\"tid\": 9, \"ts\": 10, \"dur\": 2, \"args\": {\"correlation\": 21}},\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 9, "
    "\"tid\": 9, \"ts\": 20, \"dur\": 2, \"args\": {\"correlation\": 25}},\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_profiler_range\", \"name\": \"second\", \"pid\": 0, \"tid\": "
    "0, \"ts\": 1300, \"dur\": 300, \"args\": {\"smsp__inst_executed.sum\": 5}},\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_profiler_range\", \"name\": \"first\", \"pid\": 0, \"tid\": "
    "0, \"ts\": 1000, \"dur\": 300, \"args\": {\"smsp__inst_executed.sum\": 7}}%s\n"
    "]}\n";

static void test_import_formats_profiler_ranges_are_kernels_of_their_launches(void **state)
{
    fixture *f = *state;
    char path[256], text[2048];
    snprintf(text, sizeof text, ranges_fmt, "");
    write_in(f, "ranges.json", text, path, sizeof path);
    trace *t = load_capture(path, NULL);
    assert_meta(t, "capture.kernels", "2");
    assert_meta(t, "dropped.guessed-stream", "2");
    trace_stmt a = find_label(t, "first"), b = find_label(t, "second");
    assert_true(a.seq < b.seq);
    assert_int_equal(a.t, TRACE_TIME_NONE);     /* the profiler's times are not when it ran */
    assert_string_equal(trace_str(t, t->queues[a.by].name), "host.9.9");
    assert_string_equal(trace_str(t, t->queues[a.queue].name), "gpu0.s0");
    trace_free(t);
}

static void test_import_formats_profiler_ranges_without_their_launches_are_counted(void **state)
{
    fixture *f = *state;
    char path[256], text[2048];
    snprintf(text, sizeof text, ranges_fmt,
             ",\n{\"ph\": \"X\", \"cat\": \"cuda_profiler_range\", \"name\": \"third\", \"pid\": "
             "0, \"tid\": 0, \"ts\": 1600, \"dur\": 300, \"args\": {}}");
    write_in(f, "ranges.json", text, path, sizeof path);
    trace *t = load_capture(path, NULL);
    assert_meta(t, "capture.kernels", "0");
    assert_meta(t, "dropped.unmatched-correlation", "3");
    trace_free(t);
}

/* Profiles without CUDA or ROCm work: refused, naming what they hold. */
static const char mtia_profile[] =
    "{\"schemaVersion\": 1, \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 3, \"tid\": 3, "
    "\"ts\": 10, \"dur\": 20, \"args\": {\"External id\": 1}},\n"
    "{\"ph\": \"X\", \"cat\": \"mtia_runtime\", \"name\": \"launchKernel\", \"pid\": 3, "
    "\"tid\": 3, \"ts\": 12, \"dur\": 2, \"args\": {\"correlation\": 1}},\n"
    "{\"ph\": \"X\", \"cat\": \"mtia_ccp_events\", \"name\": \"mm_kernel\", \"pid\": 1, "
    "\"tid\": 1, \"ts\": 15, \"dur\": 5, \"args\": {\"correlation\": 1}},\n"
    "{\"ph\": \"X\", \"cat\": \"mtia_ccp_events\", \"name\": \"add_kernel\", \"pid\": 1, "
    "\"tid\": 1, \"ts\": 21, \"dur\": 5, \"args\": {\"correlation\": 1}}\n"
    "]}\n";

static const char cpu_profile[] =
    "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"gloo\", \"rank\": 3, "
    "\"world_size\": 8}, \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 3, \"tid\": 3, "
    "\"ts\": 10, \"dur\": 20, \"args\": {\"External id\": 1}},\n"
    "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"step\", \"pid\": 3, \"tid\": 3, "
    "\"ts\": 5, \"dur\": 40}\n"
    "]}\n";

static void refused_without_gpu(const fixture *f, const char *name, const char *text,
                                const char *holds)
{
    char path[256], out[4096];
    write_in(f, name, text, path, sizeof path);
    trace_error err = open_error(path, NULL);
    assert_int_equal(err.status, TRACE_ENOTTRACE);
    assert_non_null(strstr(err.msg, name));
    assert_non_null(strstr(err.msg, "without CUDA or ROCm activity"));
    if (!strstr(err.msg, holds))
        fail_msg("'%s' does not name %s", err.msg, holds);
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import %s -o k.db", SYNCSIM_BINARY, name),
                     2);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test ! -e k.db"), 0);
}

static void test_import_formats_mtia_profile_is_refused(void **state)
{
    refused_without_gpu(*state, "mtia.json", mtia_profile, "2 mtia_ccp_events");
}

static void test_import_formats_cpu_only_profile_is_refused(void **state)
{
    refused_without_gpu(*state, "cpu.json", cpu_profile, "1 cpu_op");
}

/* distributedInfo, whole: merge tells jobs apart by these. */
static const char dist_fmt[] =
    "{\"schemaVersion\": 1, \"group_trace_id\": \"job-42\", \"distributedInfo\": {\"backend\": "
    "\"nccl\", \"rank\": 1, \"world_size\": 2, \"pg_count\": 1, \"nccl_version\": \"2.18.3\", "
    "\"pg_config\": [{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": "
    "\"cuda:nccl\", \"pg_size\": %d, \"ranks\": [0, 1]}]}, \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 5, "
    "\"tid\": 6, \"ts\": 10, \"dur\": 2, \"args\": {\"correlation\": 1}},\n"
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 13, "
    "\"dur\": 4, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 1}}]}\n";

static void test_import_formats_distributed_info_is_kept_whole(void **state)
{
    fixture *f = *state;
    char path[256], text[2048];
    const char *digest[2];
    trace *t[2];
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text, dist_fmt, 2 + i);
        char name[32];
        snprintf(name, sizeof name, "dist%d.json", i);
        write_in(f, name, text, path, sizeof path);
        t[i] = load_capture(path, NULL);
        digest[i] = trace_get_meta(t[i], "dist.pg_config");
        assert_non_null(digest[i]);
        assert_int_equal(strlen(digest[i]), 16);
    }
    assert_meta(t[0], "rank", "1");
    assert_meta(t[0], "world_size", "2");
    assert_meta(t[0], "dist.backend", "nccl");
    assert_meta(t[0], "dist.pg_count", "1");
    assert_meta(t[0], "dist.nccl_version", "2.18.3");
    assert_meta(t[0], "job.id", "job-42");
    /* the digest follows the config: same config, same digest */
    assert_string_not_equal(digest[0], digest[1]);
    snprintf(text, sizeof text, dist_fmt, 2);
    write_in(f, "again.json", text, path, sizeof path);
    trace *again = load_capture(path, NULL);
    assert_string_equal(trace_get_meta(again, "dist.pg_config"), digest[0]);
    trace_free(again);
    trace_free(t[0]);
    trace_free(t[1]);
}

/* Execution traces: joined on rf_id and name, in the capture's process, and
 * giving byte ranges to most ops that launched GPU work. */
#define ET_NODE(rf, name, storage)                                                              \
    "{\"name\": \"" name "\", \"id\": " #rf ", \"rf_id\": " #rf ", \"parent\": 1, "             \
    "\"op_schema\": \"\", \"inputs\": [[" #rf ", " #storage ", 0, 256, 4, \"cuda:0\"]], "       \
    "\"input_types\": [\"Tensor(float)\"], \"outputs\": [], \"output_types\": []}"

static void write_et(const fixture *f, const char *name, int pid, const char *nodes, char *path,
                     size_t cap)
{
    char text[4096];
    snprintf(text, sizeof text, "{\"schema\": \"1.0.1\", \"pid\": %d, \"nodes\": [%s]}", pid,
             nodes);
    write_in(f, name, text, path, cap);
}

static void test_import_formats_et_joins_and_counts_its_ops(void **state)
{
    fixture *f = *state;
    char et[256];
    write_et(f, "et.json", 100,
             ET_NODE(1, "aten::fill_", 10) ", " ET_NODE(2, "aten::add", 10) ", "
             ET_NODE(7, "aten::mul", 12) ", {\"name\": \"[param|x]\", \"rf_id\": 8}",
             et, sizeof et);
    trace *t = load_capture(CLEAN, et);
    assert_meta(t, "accesses", "execution-trace");
    assert_meta(t, "et.ops_joined", "2");
    assert_meta(t, "et.ops_unjoined", "2");
    /* of the unjoined, the op with tensors: its byte ranges are lost */
    assert_meta(t, "dropped.unjoined-et-op", "1");
    assert_meta(t, "et.launch_ops", "2");
    assert_meta(t, "et.launch_ops_joined", "2");
    trace_free(t);
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import %s --et et.json -o k.db",
                               SYNCSIM_BINARY, CLEAN), 0);
    assert_non_null(strstr(out, "warning: 1 event dropped: unjoined-et-op"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import --strict %s --et et.json -o s.db",
                               SYNCSIM_BINARY, CLEAN), 2);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test ! -e s.db"), 0);
}

static void expect_et_refused(const fixture *f, const char *et, const char *says)
{
    char out[4096];
    trace_error err = open_error(CLEAN, et);
    assert_int_equal(err.status, TRACE_EUSAGE);
    if (!strstr(err.msg, says))
        fail_msg("'%s' does not say '%s'", err.msg, says);
    assert_non_null(strstr(err.msg, "--force-et"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import %s --et %s -o k.db",
                               SYNCSIM_BINARY, CLEAN, et), 2);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test ! -e k.db"), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import %s --et %s --force-et -o k.db",
                               SYNCSIM_BINARY, CLEAN, et), 0);
}

static void test_import_formats_et_of_another_process_is_refused(void **state)
{
    fixture *f = *state;
    char et[256];
    write_et(f, "et.json", 999, ET_NODE(1, "aten::fill_", 10) ", " ET_NODE(2, "aten::add", 10),
             et, sizeof et);
    expect_et_refused(f, et, "recorded in process 999");
}

static void test_import_formats_et_matching_rf_ids_by_coincidence_is_refused(void **state)
{
    fixture *f = *state;
    char et[256];
    /* the same rf_ids, other ops: another program's trace */
    write_et(f, "et.json", 100, ET_NODE(1, "aten::relu", 10) ", " ET_NODE(2, "aten::sub", 10),
             et, sizeof et);
    expect_et_refused(f, et, "none of the 2 ops");
}

static void test_import_formats_et_joining_few_launching_ops_is_refused(void **state)
{
    fixture *f = *state;
    char et[256];
    /* one of the capture's two launching ops has no tensors in this ET, the
     * other another name: fewer than half get byte ranges */
    write_et(f, "et.json", 100,
             "{\"name\": \"aten::fill_\", \"rf_id\": 1, \"inputs\": [], \"outputs\": []}, "
             ET_NODE(2, "aten::mul", 10),
             et, sizeof et);
    expect_et_refused(f, et, "gives byte ranges to 0 of the 2 ops");
}

static void test_import_formats_et_tensor_of_wrong_types_is_counted(void **state)
{
    fixture *f = *state;
    char et[256];
    write_et(f, "et.json", 100,
             ET_NODE(1, "aten::fill_", 10) ", "
             "{\"name\": \"aten::add\", \"rf_id\": 2, \"inputs\": [[\"2\", \"10\", 0, 256, 4, "
             "\"cuda:0\"]], \"input_types\": [\"Tensor(float)\"], \"outputs\": []}",
             et, sizeof et);
    trace *t = load_capture(CLEAN, et);
    assert_meta(t, "dropped.bad-type", "1");
    trace_free(t);
}

#define T(fn) cmocka_unit_test_setup_teardown(test_import_formats_##fn, tmpdir_setup, tmpdir_teardown)
int main(void)
{
    const struct CMUnitTest tests[] = {
        T(pytorch_18_categories_map_like_modern_ones),
        T(string_stream_ids_keep_by_and_device_sync),
        T(profiler_ranges_are_kernels_of_their_launches),
        T(profiler_ranges_without_their_launches_are_counted),
        T(mtia_profile_is_refused),
        T(cpu_only_profile_is_refused),
        T(distributed_info_is_kept_whole),
        T(et_joins_and_counts_its_ops),
        T(et_of_another_process_is_refused),
        T(et_matching_rf_ids_by_coincidence_is_refused),
        T(et_joining_few_launching_ops_is_refused),
        T(et_tensor_of_wrong_types_is_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
