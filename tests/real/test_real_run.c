/*
 * test_real_run.c -- end to end: the scheduler (sched/sched.h) drives the
 * real backends on real data, and every run is compared with the
 * sequential reference and checked.
 *
 * A small llama, layer split over `cpustream:2,cpu` with 2 copy slots (4 for
 * the ggml-* policies of issue 12) and
 * 300 us of jitter, runs a few evaluations back to back (outputs fetched
 * with get_async, one host tensor per evaluation, a single synchronize at
 * the end: the pipelined way llama.cpp reads logits). `events` and `full`
 * must match the reference exactly and check clean; `async-user-inputs`
 * and `no-split-wait` must differ from it on at least one of a few seeds,
 * and the checker must report the race on every run's trace, whether or
 * not it manifested. Not labelled `threads`: the broken policies race on
 * purpose, which ThreadSanitizer would (rightly) report.
 *
 * Also: a thread-level trace of the cpu pool checks clean with its
 * barriers, and reports the race between node chunks with one barrier
 * removed (test-only switch), both from a recorded SQLite database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check/check.h"
#include "real_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "llama:n_layer=4,n_embd=64,n_head=4,n_head_kv=2,n_ff=128,n_vocab=256,n_ctx=32,dtype=f16,devices=2"
#define TOKENS 4
#define EVALS 6

typedef struct run_result {
    real_error err;
    size_t races;
    size_t findings;
    size_t device_work, untimed;    /* stream ops and copies, of them without a time */
} run_result;

/* The host writes the inputs of evaluation eval, recorded (one host op). */
static void set_inputs(sched_rec *rec, sched_backend **be, size_t nb, sched_graph *g,
                       uint64_t eval, uint64_t seed)
{
    trace_access acc[8];
    uint32_t n = 0;
    for (int32_t i = 0; i < g->n_tensors && n < 8; i++) {
        sched_tensor *t = &g->tensors[i];
        if ((t->flags & SCHED_FLAG_INPUT) && t->op == SCHED_OP_NONE)
            acc[n++] = (trace_access){ sched_tensor_view(sched_rec_sink(rec), t), TRACE_W,
                                       TRACE_REF_WHOLE, 0, sched_tensor_nbytes(t) };
    }
    sched_rec_set_eval(rec, eval);
    assert_int_equal(real_set_inputs(be, nb, g, eval, seed), 0);
    assert_int_equal(sched_rec_host_op(rec, "set_inputs", acc, n, -1, -1, 0, 0), 0);
}

static size_t check_memory(trace *tr, size_t *races)
{
    trace_reader r;
    trace_reader_memory(&r, tr);
    check_report *rep = NULL;
    trace_error err;
    check_options opt = { .max_findings = 1000 };
    assert_int_equal(check_trace(&r, &opt, &rep, &err), 0);
    size_t n = check_report_count(rep);
    *races = check_report_count_kind(rep, TRACE_FINDING_RACE);
    if (getenv("REAL_TEST_VERBOSE"))
        check_report_print(stderr, rep, false);
    check_report_free(rep);
    trace_reader_close(&r);
    return n;
}

static void run_llama_evals(const char *policy, int n_copies, int evals, uint64_t seed,
                            run_result *res)
{
    memset(res, 0, sizeof *res);
    sched_model_params p;
    char err[256];
    assert_int_equal(sched_model_parse(MODEL, &p, err, sizeof err), 0);
    trace *tr = trace_new();
    real_options o;
    real_options_default(&o);
    char spec[128];
    snprintf(spec, sizeof spec, "cpustream:2,jitter=300us,seed=%llu,cpu,threads=2",
             (unsigned long long)seed);
    sched_backend **inner, *be[4];
    size_t nb;
    if (real_backends_create(spec, &o, &inner, &nb, err, sizeof err) != 0)
        fail_msg("%s", err);
    sched_rec *rec = real_test_rec(sched_sink_memory(tr));
    assert_non_null(rec);
    for (size_t i = 0; i < nb; i++)
        assert_non_null(be[i] = sched_rec_wrap(rec, inner[i]));
    sched_graph *g = sched_model_build(&p, TOKENS);
    sched_graph *rg = sched_model_build(&p, TOKENS);
    assert_non_null(g);
    sched_weights *w = sched_weights_new(be, (int)nb, g, sched_rec_sink(rec));
    assert_non_null(w);
    assert_int_equal(sched_weights_bind(w, g), 0);
    /* cpustream devices copy as ggml's CUDA backend does (real/family.c). */
    const sched_copy_traits *traits[4] = { 0 };
    for (size_t i = 0; i < nb; i++)
        traits[i] = sched_copy_family(i + 1 < nb ? "cuda" : "cpu");
    sched_options so = { .policy = sched_policy_find(policy), .n_copies = n_copies,
                         .copy_traits = traits, .sink = sched_rec_sink(rec) };
    assert_non_null(so.policy);
    sched *s = sched_new(be, (int)nb, &so);
    assert_non_null(s);
    if (sched_plan(s, g, err, sizeof err) != SCHED_OK)
        fail_msg("plan: %s", err);
    assert_int_equal(real_init_weights(be, nb, g, 11), 0);
    int32_t out = sched_graph_find(g, "result_output");
    assert_true(out >= 0);
    sched_tensor *ot = &g->tensors[out];
    sched_backend *ob = sched_backend_at(s, ot->backend);
    sched_tensor *host_out[EVALS];
    assert_true(evals <= EVALS);
    for (int e = 0; e < evals; e++) {
        char name[32];
        snprintf(name, sizeof name, "logits.%d", e);
        host_out[e] = real_host_tensor_new(be, nb, ot, name);
        assert_non_null(host_out[e]);
    }
    for (int e = 0; e < evals; e++) {
        /* the slot first: with ggml's slots the inputs go to its host copies */
        assert_int_equal(sched_alloc_graph(s), SCHED_OK);
        set_inputs(rec, be, nb, g, (uint64_t)e, 11);
        assert_int_equal(sched_graph_compute(s, (uint64_t)e), SCHED_OK);
        if (ob->iface->get_async)
            assert_int_equal(ob->iface->get_async(ob, ot, host_out[e]), 0);
        else
            assert_int_equal(sched_get_output(s, out, host_out[e]), SCHED_OK);
    }
    assert_int_equal(sched_synchronize(s), SCHED_OK);

    real_ref *ref = real_ref_new(rg, 11);
    assert_non_null(ref);
    size_t n = (size_t)sched_tensor_nelements(ot);
    float *got = malloc(n * sizeof *got);
    for (int e = 0; e < evals; e++) {
        assert_int_equal(real_ref_eval(ref, (uint64_t)e), 0);
        size_t rn;
        const float *want = real_ref_tensor(ref, "result_output", &rn);
        assert_non_null(want);
        assert_int_equal(rn, n);
        assert_int_equal(real_read_output(host_out[e], got), 0);
        trace_access read = { host_out[e]->trace_view, TRACE_R, TRACE_REF_WHOLE, 0,
                              sched_tensor_nbytes(host_out[e]) };
        assert_int_equal(sched_rec_host_op(rec, "read", &read, 1, -1, -1, 0, 0), 0);
        real_compare_outputs(got, want, n, &res->err);
    }
    sched_rec_flush(rec);
    /* device work is timed when it ends: the memory sink takes late times */
    for (uint64_t i = 0; i < tr->n_stmts; i++) {
        trace_stmt st;
        trace_stmt_at(tr, i, &st);
        res->device_work += tr->queues[st.queue].kind == TRACE_QUEUE_STREAM &&
                            (st.kind == TRACE_OP || st.kind == TRACE_COPY);
        res->untimed += tr->queues[st.queue].kind == TRACE_QUEUE_STREAM &&
                        (st.kind == TRACE_OP || st.kind == TRACE_COPY) &&
                        st.t == TRACE_TIME_NONE;
    }
    res->findings = check_memory(tr, &res->races);
    if (getenv("REAL_TEST_VERBOSE"))
        fprintf(stderr, "%s seed %llu: max abs %.3g rel %.3g, %zu findings (%zu races)\n",
                policy, (unsigned long long)seed, res->err.max_abs, res->err.max_rel,
                res->findings, res->races);
    free(got);
    real_ref_free(ref);
    for (int e = 0; e < evals; e++)
        real_host_tensor_free(be, nb, host_out[e]);
    sched_free(s);
    sched_weights_free(w);
    real_backends_free(inner, nb);
    sched_rec_free(rec);
    sched_graph_free(g);
    sched_graph_free(rg);
    trace_free(tr);
}

static void run_llama(const char *policy, uint64_t seed, run_result *res)
{
    run_llama_evals(policy, 2, EVALS, seed, res);
}

static void test_real_run_events_and_full_match_reference_and_check_clean(void **state)
{
    (void)state;
    const char *good[2] = { "events", "full" };
    for (int k = 0; k < 2; k++)
        for (uint64_t seed = 1; seed <= 2; seed++) {
            run_result r;
            run_llama(good[k], seed, &r);
            assert_true(r.err.n > 0);
            assert_int_equal(r.err.n_nan, 0);
            assert_true(r.err.max_ref > 0);
            if (r.err.max_abs != 0)
                fail_msg("%s seed %llu: max abs error %g", good[k], (unsigned long long)seed,
                         r.err.max_abs);
            assert_int_equal(r.findings, 0);
            assert_true(r.device_work > 0);
            assert_int_equal(r.untimed, 0);
        }
}

static void broken_policy_copies(const char *policy, int n_copies, int evals)
{
    int differed = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        run_result r;
        run_llama_evals(policy, n_copies, evals, seed, &r);
        /* The checker sees the missing sync whether or not it bit. */
        if (r.races == 0)
            fail_msg("%s seed %llu: no race reported", policy, (unsigned long long)seed);
        if (r.err.max_abs > 0 || r.err.n_nan > 0)
            differed++;
    }
    if (!differed)
        fail_msg("%s: matched the reference on every seed", policy);
}

static void broken_policy(const char *policy)
{
    broken_policy_copies(policy, 2, EVALS);
}

/* Issue 12: ggml's pipeline over cpustream:2,cpu, one batch of four
 * micro-batches in ggml's four slots (-b 2048 -ub 512). #17795 copies the
 * CPU split's result asynchronously and nothing waits before the next
 * micro-batch's CPU split overwrites it: a race the checker sees on every
 * seed and the outputs show on some. #20793 and the pinned ggml (blocking
 * host copies) match exactly and check clean. */
static void test_real_run_ggml_policies(void **state)
{
    (void)state;
    broken_policy_copies("ggml-17795", 4, 4);
    const char *good[2] = { "ggml-20793", "ggml-head" };
    for (int k = 0; k < 2; k++)
        for (uint64_t seed = 1; seed <= 2; seed++) {
            run_result r;
            run_llama_evals(good[k], 4, 4, seed, &r);
            assert_true(r.err.n > 0);
            if (r.err.max_abs != 0 || r.err.n_nan != 0)
                fail_msg("%s seed %llu: max abs error %g", good[k], (unsigned long long)seed,
                         r.err.max_abs);
            if (r.findings != 0)
                fail_msg("%s seed %llu: %zu findings", good[k], (unsigned long long)seed,
                         r.findings);
        }
}

/* Issue 12, difference 2: more micro-batches than slots with no sync
 * between them. The pinned ggml makes the destination's stream wait for
 * the slot, but a copy between devices runs on the source's stream, which
 * nothing holds back: micro-batch k + 4 overwrites GPU1's slot while
 * micro-batch k may still read it. The checker reports it on every seed
 * (the outputs rarely show it); #20793's syncs prevent it. */
static void test_real_run_ggml_head_slot_reuse_races(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 2; seed++) {
        run_result r;
        run_llama_evals("ggml-head", 4, EVALS, seed, &r);
        if (r.races == 0)
            fail_msg("ggml-head seed %llu: no race reported", (unsigned long long)seed);
        run_llama_evals("ggml-20793", 4, EVALS, seed, &r);
        assert_int_equal(r.findings, 0);
        assert_true(r.err.max_abs == 0 && r.err.n_nan == 0);
    }
}

/* Issue 12, MoE: the moe model's prompt (32 tokens: op_offload puts each
 * mul_mat_id on its cpustream device) copies only the used experts from
 * host memory, after reading the ids back with a sync. ggml-head matches
 * the reference exactly (an expert not copied would be read as stale or
 * zero bytes) and checks clean; moe-no-ids-sync, which drops the sync,
 * races on the ids' host buffer. */
#define MOE_MODEL "moe:n_layer=2,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=64," \
                  "ubatch=32,n_expert=64,n_expert_used=2"
static void moe_run(const char *policy, real_test_outcome *out, size_t *findings, size_t *ids_races,
                    int *range_copies, int *host_reads)
{
    trace *tr = trace_new();
    assert_non_null(tr);
    sched_option_value opts[] = { { "threads", "2" } };
    sched_run_opts o = { .model = MOE_MODEL, .devices = "cpustream:2,jitter=200us,seed=1,cpu",
                         .policy = policy, .tokens = 2, .prompt = 32, .options = opts,
                         .n_options = 1 };
    real_test_run(&o, sched_sink_memory(tr), out);
    *range_copies = *host_reads = 0;
    for (uint64_t i = 0; i < tr->n_stmts; i++) {
        trace_stmt st;
        trace_stmt_at(tr, i, &st);
        const char *label = st.label != TRACE_NONE ? trace_str(tr, st.label) : "";
        if (st.kind == TRACE_COPY && strstr(label, "_exps#") && strchr(label, '['))
            (*range_copies)++;
        if (st.kind == TRACE_OP && strcmp(label, "moe.used_experts") == 0)
            (*host_reads)++;
    }
    trace_reader r;
    trace_reader_memory(&r, tr);
    check_report *rep = NULL;
    trace_error err = { 0 };
    check_options co = { .max_findings = 100 };
    assert_int_equal(check_trace(&r, &co, &rep, &err), 0);
    trace_reader_close(&r);
    *findings = check_report_count(rep);
    *ids_races = 0;
    for (size_t i = 0; i < check_report_count(rep); i++) {
        const trace_finding *f = check_report_finding(rep, i);
        if (f->kind == TRACE_FINDING_RACE &&
            strstr(trace_str(tr, tr->buffers[f->root].name), "moe_ids"))
            (*ids_races)++;
    }
    check_report_free(rep);
    trace_free(tr);
}

/* Issue 24: the check of every output (the reference's evaluation and the
 * comparison) is host time in the trace, not a gap in it: one host op
 * `check:OUTPUT` per evaluation, after the read of that output, with a
 * duration, and all of them inside the time the run says it spent
 * checking (sched_run_result.check_ns), so that a replay of the trace
 * holds what the run's makespan holds. */
static void test_real_run_output_checks_are_host_time_in_the_trace(void **state)
{
    (void)state;
    trace *tr = trace_new();
    assert_non_null(tr);
    sched_option_value opts[] = { { "threads", "2" } };
    sched_run_opts o = { .model = MODEL, .devices = "cpustream:2,cpu", .policy = "events",
                         .tokens = TOKENS, .prompt = 4, .options = opts, .n_options = 1 };
    real_test_outcome out;
    real_test_run(&o, sched_sink_memory(tr), &out);
    if (out.rc != 0)
        fail_msg("run: %s", out.msg);
    assert_true(out.n_evals > 0);
    uint64_t checks = 0, read_before = 0;
    int64_t checked_ns = 0, last_read_t = INT64_MIN;
    for (uint64_t i = 0; i < tr->n_stmts; i++) {
        trace_stmt st;
        trace_stmt_at(tr, i, &st);
        const char *label = st.label != TRACE_NONE ? trace_str(tr, st.label) : "";
        if (st.kind == TRACE_OP && strncmp(label, "read:", 5) == 0)
            last_read_t = st.t;
        if (st.kind != TRACE_OP || strncmp(label, "check:", 6) != 0)
            continue;
        checks++;
        assert_int_equal(tr->queues[st.queue].kind, TRACE_QUEUE_HOST);
        assert_true(st.dur > 0);
        read_before += last_read_t != INT64_MIN && last_read_t <= st.t;
        checked_ns += st.dur;
    }
    assert_int_equal(checks, out.n_evals);
    assert_int_equal(read_before, checks);
    assert_true(checked_ns <= out.res.check_ns);
    trace_free(tr);
}

/* The kernel: out[m, u, t] = sum_k W[k, m, ids[u, t]] * x[k, 0, t], over
 * three threads (each element by one thread). */
static void test_real_run_moe_kernel(void **state)
{
    (void)state;
    enum { K = 3, M = 2, E = 3, U = 2, T = 2 };
    float w[K * M * E], x[K * T], out[M * U * T];
    int32_t ids[U * T] = { 2, 0, 1, 2 };
    for (int i = 0; i < K * M * E; i++)
        w[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < K * T; i++)
        x[i] = 0.5f * (float)(i + 1);
    real_kernel_args a = { .op = SCHED_OP_MUL_MAT_ID, .n_src = 3 };
    a.dst = (real_tensor){ SCHED_F32, { M, U, T, 1 }, out };
    a.src[0] = (real_tensor){ SCHED_F32, { K, M, E, 1 }, w };
    a.src[1] = (real_tensor){ SCHED_F32, { K, 1, T, 1 }, x };
    a.src[2] = (real_tensor){ SCHED_I32, { U, T, 1, 1 }, ids };
    for (int th = 0; th < 3; th++)
        assert_int_equal(real_kernel_run(&a, th, 3), REAL_OK);
    for (int t = 0; t < T; t++)
        for (int u = 0; u < U; u++)
            for (int m = 0; m < M; m++) {
                float want = 0;
                for (int k = 0; k < K; k++)
                    want += w[(ids[t * U + u] * M + m) * K + k] * x[t * K + k];
                assert_true(out[(t * U + u) * M + m] == want);
            }
}

static void test_real_run_moe(void **state)
{
    (void)state;
    real_test_outcome out;
    size_t findings, ids_races;
    int ranges, reads;
    moe_run("ggml-head", &out, &findings, &ids_races, &ranges, &reads);
    if (out.rc != 0)
        fail_msg("ggml-head: %s", out.msg);
    assert_true(out.err.n > 0);
    assert_int_equal(out.verdict, 0);
    if (out.err.max_abs != 0 || out.err.n_nan != 0)
        fail_msg("ggml-head: max abs error %g", out.err.max_abs);
    assert_int_equal(findings, 0);
    assert_true(ranges > 6);            /* 3 weights x 2 layers, several runs each */
    assert_true(reads >= 4);            /* gate and up of each layer; down reuses up's */
    moe_run("moe-no-ids-sync", &out, &findings, &ids_races, &ranges, &reads);
    assert_true(ids_races > 0);
}

static void test_real_run_async_user_inputs_differs_and_races(void **state)
{
    (void)state;
    broken_policy("async-user-inputs");
}

static void test_real_run_no_split_wait_differs_and_races(void **state)
{
    (void)state;
    broken_policy("no-split-wait");
}

/* ------------------------------------------------------------------ */
/* Thread-level trace of the pool.                                     */

static size_t pool_trace_races(int skip_barrier_after, size_t *findings)
{
    char path[] = "/tmp/syncsim-real-pool-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    trace_error terr;
    trace_recorder *rec = trace_recorder_open(path, &(trace_recorder_opts){ .run_name = "pool" }, &terr);
    assert_non_null(rec);
    real_options o;
    real_options_default(&o);
    o.trace_level = REAL_TRACE_THREAD;
    o.skip_barrier_after = skip_barrier_after;
    o.threads = 2;
    sched_backend **inner, *be[1];
    size_t nb;
    char err[256];
    assert_int_equal(real_backends_create("cpu", &o, &inner, &nb, err, sizeof err), 0);
    sched_rec *sr = real_test_rec(sched_sink_recorder(rec));
    be[0] = sched_rec_wrap(sr, inner[0]);
    assert_non_null(be[0]);
    /* x -> rms_norm (row chunks) -> mul_mat (reads every row) */
    sched_graph *g = sched_graph_new("pool");
    int64_t xe[2] = { 64, 8 }, we[2] = { 64, 64 };
    int32_t x = sched_graph_leaf(g, "x", SCHED_F32, 2, xe, SCHED_FLAG_INPUT);
    int32_t wt = sched_graph_leaf(g, "w", SCHED_F32, 2, we, SCHED_FLAG_WEIGHT);
    int32_t n1 = sched_graph_op(g, "norm", SCHED_OP_RMS_NORM, (int32_t[]){ x }, 1);
    int32_t mm = sched_graph_op(g, "mm", SCHED_OP_MUL_MAT, (int32_t[]){ wt, n1 }, 2);
    assert_true(mm >= 0);
    g->tensors[mm].flags |= SCHED_FLAG_OUTPUT;
    sched_weights *w = sched_weights_new(be, (int)nb, g, sched_rec_sink(sr));
    assert_int_equal(sched_weights_bind(w, g), 0);
    sched *s = sched_new(be, (int)nb, NULL);
    assert_int_equal(sched_plan(s, g, err, sizeof err), SCHED_OK);
    assert_int_equal(real_init_weights(inner, nb, g, 1), 0);
    for (int e = 0; e < 2; e++) {
        set_inputs(sr, inner, nb, g, (uint64_t)e, 1);
        assert_int_equal(sched_graph_compute(s, (uint64_t)e), SCHED_OK);
    }
    sched_free(s);
    sched_weights_free(w);
    real_backends_free(inner, nb);
    sched_rec_free(sr);
    sched_graph_free(g);
    assert_int_equal(trace_recorder_close(rec, &terr), 0);

    trace_reader r;
    assert_int_equal(trace_store_open_reader(path, 0, &r, &terr), 0);
    assert_true(r.trace->n_host_queues >= 2);   /* host + cpu.t1 */
    check_report *rep = NULL;
    check_options opt = { 0 };
    assert_int_equal(check_trace(&r, &opt, &rep, &terr), 0);
    if (getenv("REAL_TEST_VERBOSE"))
        check_report_print(stderr, rep, false);
    size_t races = check_report_count_kind(rep, TRACE_FINDING_RACE);
    *findings = check_report_count(rep);
    check_report_free(rep);
    trace_reader_close(&r);
    unlink(path);
    char side[sizeof path + 8];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return races;
}

static void test_real_run_pool_thread_trace_clean_with_barriers(void **state)
{
    (void)state;
    size_t findings;
    assert_int_equal(pool_trace_races(-1, &findings), 0);
    assert_int_equal(findings, 0);
}

static void test_real_run_pool_missing_barrier_races_between_chunks(void **state)
{
    (void)state;
    size_t findings;
    assert_true(pool_trace_races(0, &findings) >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_run_events_and_full_match_reference_and_check_clean),
        cmocka_unit_test(test_real_run_async_user_inputs_differs_and_races),
        cmocka_unit_test(test_real_run_no_split_wait_differs_and_races),
        cmocka_unit_test(test_real_run_ggml_policies),
        cmocka_unit_test(test_real_run_moe_kernel),
        cmocka_unit_test(test_real_run_moe),
        cmocka_unit_test(test_real_run_ggml_head_slot_reuse_races),
        cmocka_unit_test(test_real_run_pool_thread_trace_clean_with_barriers),
        cmocka_unit_test(test_real_run_pool_missing_barrier_races_between_chunks),
        cmocka_unit_test(test_real_run_output_checks_are_host_time_in_the_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
