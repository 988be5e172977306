/* test_run.c -- end to end: a llama on two simulated GPUs under each
 * policy, recorded in memory and checked; tensor parallel all-reduces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "check/check.h"
#include "sim_test_util.h"

#define SMALL_LLAMA "llama:n_layer=4,n_embd=256,n_head=4,n_head_kv=2,n_ff=512,n_vocab=1000,n_ctx=128,ubatch=16"
#define SMALL_MOE "moe:n_layer=2,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=64,ubatch=32,n_expert=64,n_expert_used=2"
#define SMALL_TP "tp:n_layer=2,n_embd=1024,n_head=8,n_head_kv=4,n_ff=2048,n_vocab=1000,n_ctx=128,ubatch=64"

typedef struct outcome {
    trace *t;
    check_report *rep;
    sched_run *run;
    sched_run_result res;
    const sim_world *world;
} outcome;

/* A run of a model (or, graph_file set, of a graph file) with n_copies
 * slots (0: the policy's default), recorded in memory and checked. */
static void run_checked_on(outcome *o, const char *model, const char *graph_file,
                           const char *devices, const char *policy, const char *allreduce,
                           int n_copies, int prompt, int tokens)
{
    memset(o, 0, sizeof *o);
    o->t = trace_new();
    sched_run_opts opts = { .model = model, .graph_file = graph_file, .devices = devices,
                            .policy = policy, .n_copies = n_copies, .tokens = tokens,
                            .prompt = prompt, .allreduce = allreduce };
    trace_error err = { 0 };
    o->run = sim_test_run(&opts, o->t, &o->res);
    o->world = sim_machine_world(sched_run_machine(o->run));
    assert_non_null(o->world);
    trace_reader r;
    trace_reader_memory(&r, o->t);
    check_options co = { 0 };
    assert_int_equal(check_trace(&r, &co, &o->rep, &err), 0);
    trace_reader_close(&r);
}

static void run_checked(outcome *o, const char *model, const char *devices, const char *policy,
                        const char *allreduce, int prompt, int tokens)
{
    run_checked_on(o, model, NULL, devices, policy, allreduce, 2, prompt, tokens);
}

static void done(outcome *o)
{
    check_report_free(o->rep);
    sched_run_free(o->run);
    trace_free(o->t);
}

/* Names of the root buffers of the races found. */
static bool race_on(const outcome *o, const char *root_prefix)
{
    for (size_t i = 0; i < check_report_count(o->rep); i++) {
        const trace_finding *f = check_report_finding(o->rep, i);
        if (f->kind != TRACE_FINDING_RACE)
            continue;
        const char *root = trace_str(o->t, o->t->buffers[f->root].name);
        if (strncmp(root, root_prefix, strlen(root_prefix)) == 0)
            return true;
    }
    return false;
}

static void test_run_events_and_full_are_clean(void **state)
{
    (void)state;
    const char *clean[] = { "events", "full", "relaxed" };
    for (int i = 0; i < 3; i++) {
        outcome o;
        run_checked(&o, SMALL_LLAMA, "h100-pcie", clean[i], NULL, 32, 4);
        if (check_report_count(o.rep) != 0) {
            check_report_print(stderr, o.rep, false);
            fail_msg("policy %s is not clean", clean[i]);
        }
        assert_true(o.res.n_stmts > 100);
        done(&o);
    }
}

static void test_run_async_user_inputs_races_on_user_inputs(void **state)
{
    (void)state;
    outcome o;
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "async-user-inputs", NULL, 32, 4);
    assert_true(check_report_count_kind(o.rep, TRACE_FINDING_RACE) > 0);
    assert_true(race_on(&o, "p:inp_pos") || race_on(&o, "p:kq_mask"));
    assert_false(race_on(&o, "p.arena"));
    done(&o);
}

static void test_run_no_split_wait_races_on_reused_arena(void **state)
{
    (void)state;
    outcome o;
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "no-split-wait", NULL, 32, 4);
    assert_true(check_report_count_kind(o.rep, TRACE_FINDING_RACE) > 0);
    assert_true(race_on(&o, "p.arena.CPU"));
    assert_false(race_on(&o, "p:inp_pos") || race_on(&o, "p:kq_mask"));
    done(&o);
}

static void test_run_pattern_strings_of_the_llama(void **state)
{
    (void)state;
    outcome o;
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "full", NULL, 16, 2);
    /* GPU0's split copies the embeddings and two user inputs: sassassasg. */
    assert_non_null(strstr(o.res.pattern, "|sassassasg|"));
    done(&o);
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "relaxed", NULL, 16, 2);
    assert_non_null(strstr(o.res.pattern, "|saaasg|"));
    done(&o);
}

static double per_token(const char *devices, const char *policy)
{
    outcome o;
    run_checked(&o, SMALL_LLAMA, devices, policy, NULL, 16, 8);
    double v = o.res.ns_per_token;
    done(&o);
    return v;
}

static void test_run_relaxed_beats_full_more_on_windows(void **state)
{
    (void)state;
    double lin_full = per_token("rtx4090-pcie4", "full");
    double lin_relaxed = per_token("rtx4090-pcie4", "relaxed");
    double win_full = per_token("rtx4090-windows", "full");
    double win_relaxed = per_token("rtx4090-windows", "relaxed");
    assert_true(lin_relaxed < lin_full);
    assert_true(win_relaxed < win_full);
    assert_true(win_full - win_relaxed > lin_full - lin_relaxed);
    assert_true(win_relaxed / win_full < lin_relaxed / lin_full);
}

static void test_run_tensor_parallel_allreduces_are_clean(void **state)
{
    (void)state;
    const char *kinds[] = { "ring", "butterfly", "bf16" };
    uint64_t link_bytes[3] = { 0 };
    for (int i = 0; i < 3; i++) {
        outcome o;
        run_checked(&o, SMALL_TP, "h100-sxm", "events", kinds[i], 64, 0);
        if (check_report_count(o.rep) != 0) {
            check_report_print(stderr, o.rep, false);
            fail_msg("all-reduce %s is not clean", kinds[i]);
        }
        const sim_stats *st = sim_world_stats(o.world);
        for (int l = 0; l < st->n_links; l++)
            if (strncmp(sim_world_link_name(o.world, l), "nvlink", 6) == 0)
                link_bytes[i] += st->link_bytes[l];
        done(&o);
    }
    /* 64 tokens x 1024 = 65536 elements >= 32768: bf16 halves the bytes. */
    assert_true(link_bytes[0] > 0);
    assert_int_equal(link_bytes[2] * 2, link_bytes[0]);
    assert_int_equal(link_bytes[1], link_bytes[0]);    /* two devices: one exchange */
}

static void test_run_replay_with_recorded_durations_reproduces_makespan(void **state)
{
    (void)state;
    outcome o;
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "events", NULL, 32, 8);
    sim_model m;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie", &m, &err), 0);
    trace *out = trace_new();
    sched_sink sink = sched_sink_memory(out);
    sim_replay_opts ro = { .model = &m, .durations_recorded = true, .out = &sink };
    sim_replay_result rr;
    trace_reader r;
    trace_reader_memory(&r, o.t);
    assert_int_equal(sim_replay(&r, &ro, &rr, &err), 0);
    assert_true(rr.recorded_makespan_ns > 0);
    double diff = (double)(rr.makespan_ns - rr.recorded_makespan_ns) / (double)rr.recorded_makespan_ns;
    assert_true(diff < 0.01 && diff > -0.01);
    assert_int_equal(out->n_stmts, o.t->n_stmts);
    /* The re-timed trace is still clean. */
    trace_reader r2;
    trace_reader_memory(&r2, out);
    check_report *rep;
    check_options co = { 0 };
    assert_int_equal(check_trace(&r2, &co, &rep, &err), 0);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_reader_close(&r2);
    trace_free(out);
    done(&o);
}

static void test_run_replay_dropping_syncs_gains_time(void **state)
{
    (void)state;
    outcome o;
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "full", NULL, 16, 4);
    uint64_t drops[256];
    int n = 0;
    for (uint64_t i = 0; i < o.t->n_stmts && n < 256; i++) {
        trace_stmt s;
        trace_stmt_at(o.t, i, &s);
        if (s.kind == TRACE_SYNC)
            drops[n++] = s.seq;
    }
    assert_true(n > 4);
    sim_model m;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie", &m, &err), 0);
    sim_replay_opts ro = { .model = &m, .durations_recorded = true };
    sim_replay_result base, dropped;
    trace_reader r;
    trace_reader_memory(&r, o.t);
    assert_int_equal(sim_replay(&r, &ro, &base, &err), 0);
    ro.drop_seq = drops;
    ro.n_drop = n;
    trace_reader_memory(&r, o.t);
    assert_int_equal(sim_replay(&r, &ro, &dropped, &err), 0);
    assert_int_equal(dropped.n_dropped, (uint64_t)n);
    assert_true(dropped.makespan_ns < base.makespan_ns);
    done(&o);
}

static void assert_clean(const outcome *o, const char *what)
{
    if (check_report_count(o->rep) != 0) {
        check_report_print(stderr, o->rep, false);
        fail_msg("%s is not clean", what);
    }
}

/* Issue 12: on one GPU ggml does not pipeline (one slot, no events);
 * GPU0's split copies the embeddings and two user inputs. */
static void test_run_ggml_single_gpu_patterns(void **state)
{
    (void)state;
    static const struct { const char *policy, *pattern; } want[] = {
        { "full", "sassassasg" },
        { "ggml-20793", "saaasg" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        outcome o;
        run_checked_on(&o, SMALL_LLAMA, NULL, "h100-pcie:gpus=1", want[i].policy, NULL, 0, 16, 2);
        assert_clean(&o, want[i].policy);
        if (!strstr(o.res.pattern, want[i].pattern))
            fail_msg("%s: pattern %s has no %s", want[i].policy, o.res.pattern, want[i].pattern);
        done(&o);
    }
    outcome o;
    run_checked_on(&o, SMALL_LLAMA, NULL, "h100-pcie:gpus=1", "ggml-20793", NULL, 0, 16, 2);
    assert_int_equal(o.res.n_copies, 1);
    assert_null(strchr(o.res.pattern, 'r'));           /* one slot: no events */
    done(&o);
}

/* Issue 12: pipeline parallelism over two GPUs with prompt micro-batches
 * (ggml's -ub 512 -b 2048 scaled down: four ubatches of one batch). ggml's
 * default is four slots. #17795 copies the CPU split's embeddings
 * asynchronously (copy_from_host) with no sync after: the next ubatch's
 * CPU split overwrites them in the CPU's arena while GPU0 may still copy
 * them. #20793's syncs and the pinned ggml's blocking host copies
 * (CUDA without copy_from_host) are clean. */
static void test_run_ggml_pipeline_microbatches(void **state)
{
    (void)state;
    static const struct { const char *policy; bool races; } want[] = {
        { "ggml-pre-17795", false },
        { "ggml-17795", true },
        { "ggml-20793", false },
        { "ggml-pre-26040", false },
        { "ggml-head", false },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        outcome o;
        run_checked_on(&o, SMALL_LLAMA, NULL, "h100-pcie", want[i].policy, NULL, 0, 64, 4);
        assert_int_equal(o.res.n_copies, 4);
        assert_int_equal(o.res.n_ubatches, 4);
        if (want[i].races)
            assert_true(race_on(&o, "p.arena.CPU"));
        else
            assert_clean(&o, want[i].policy);
        done(&o);
    }
}

/* Issue 12, #26040: a CPU split without inputs after GPU0's split blocks
 * the host on GPU0 (ggml-head). Dropping those syncs gains time and lets
 * the CPU overwrite, in its arena, what GPU0's asynchronous (vulkan) copy
 * still reads. */
static void test_run_ggml_26040_wait_dropped_races(void **state)
{
    (void)state;
    outcome o;
    run_checked_on(&o, NULL, SYNCSIM_SOURCE_DIR "/tests/sched/ggml-26040.graph",
                   "h100-pcie:gpus=1,backend=vulkan", "ggml-head", NULL, 0, 0, 6);
    assert_clean(&o, "ggml-head");
    uint64_t drops[16];
    int n = 0;
    uint32_t host = trace_find_queue(o.t, "host", 4);
    for (uint64_t i = 0; i + 1 < o.t->n_stmts && n < 16; i++) {
        trace_stmt s, next;
        trace_stmt_at(o.t, i, &s);
        if (s.kind != TRACE_SYNC)
            continue;
        for (uint64_t k = i + 1; k < o.t->n_stmts; k++) {
            trace_stmt_at(o.t, k, &next);
            if (next.queue == host)
                break;
        }
        if (next.kind == TRACE_OP && strcmp(trace_str(o.t, next.label), "d:c") == 0)
            drops[n++] = s.seq;
    }
    assert_int_equal(n, 6);                             /* one per token */
    sim_model m;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie:gpus=1", &m, &err), 0);
    trace *out = trace_new();
    sched_sink sink = sched_sink_memory(out);
    sim_replay_opts ro = { .model = &m, .durations_recorded = true };
    sim_replay_result base, dropped;
    trace_reader r;
    trace_reader_memory(&r, o.t);
    assert_int_equal(sim_replay(&r, &ro, &base, &err), 0);
    ro.drop_seq = drops;
    ro.n_drop = n;
    ro.out = &sink;
    trace_reader_memory(&r, o.t);
    assert_int_equal(sim_replay(&r, &ro, &dropped, &err), 0);
    assert_true(dropped.makespan_ns < base.makespan_ns);
    trace_reader r2;
    trace_reader_memory(&r2, out);
    check_report *rep;
    check_options co = { 0 };
    assert_int_equal(check_trace(&r2, &co, &rep, &err), 0);
    assert_true(check_report_count_kind(rep, TRACE_FINDING_RACE) > 0);
    check_report_free(rep);
    trace_reader_close(&r2);
    trace_free(out);
    done(&o);
}

/* The real baselines (issue 23, item 5): ggml before #26040 (and before
 * #17795: the same compute_splits) has no wait before the CPU split
 * without inputs, so the race #26040 fixed is there as recorded, with no
 * sync dropped; the pinned ggml is clean. */
static void test_run_ggml_baselines_have_the_26040_race(void **state)
{
    (void)state;
    const char *pre[2] = { "ggml-pre-26040", "ggml-pre-17795" };
    for (int i = 0; i < 2; i++) {
        outcome o;
        run_checked_on(&o, NULL, SYNCSIM_SOURCE_DIR "/tests/sched/ggml-26040.graph",
                       "h100-pcie:gpus=1,backend=vulkan", pre[i], NULL, 0, 0, 6);
        assert_true(race_on(&o, "d.arena.CPU"));
        assert_string_equal(o.res.pattern, "sag|sagas");
        done(&o);
    }
}

/* The ranks of a tensor-parallel group are one (meta) backend to ggml: the
 * #26040 wait does not separate them (it would wait for a rank whose
 * all-reduce has not gathered: a hang). */
static int32_t find_buffer(const trace *t, const char *name)
{
    for (uint32_t i = 0; i < t->n_buffers; i++)
        if (strcmp(trace_str(t, t->buffers[i].name), name) == 0)
            return (int32_t)i;
    return -1;
}

/* Issue 12, MoE: the prompt (32 tokens, ggml's op_offload batch) runs each
 * mul_mat_id on GPU0 with its experts copied from host memory, only the
 * experts the ids name: the ids read back (a copy into p.moe_ids, then a
 * host sync of GPU0 before the host reads them), then one copy per run of
 * consecutive used experts with ggml's padding. */
static void test_run_moe_used_expert_copies(void **state)
{
    (void)state;
    outcome o;
    run_checked_on(&o, SMALL_MOE, NULL, "h100-pcie:gpus=1", "ggml-head", NULL, 0, 32, 2);
    assert_clean(&o, "ggml-head");
    const trace *t = o.t;
    /* The experts the prompt (evaluation 0) uses: U*T = 64 ids of 64. */
    bool used[64] = { false };
    int n_used = 0;
    for (int i = 0; i < 64; i++) {
        int32_t id = sched_moe_ids(0, i, 64);
        n_used += !used[id];
        used[id] = true;
    }
    assert_true(n_used > 1 && n_used < 64);      /* some experts are left out */
    uint64_t want_off[64], want_size[64];
    int n_want = 0;
    const uint64_t esize = 64 * 128 * 2;         /* one f16 expert of gate_exps */
    for (int first = 0; first < 64;) {
        if (!used[first]) {
            first++;
            continue;
        }
        int last = first;
        while (last + 1 < 64 && used[last + 1])
            last++;
        want_off[n_want] = (uint64_t)first * esize;
        want_size[n_want++] = (uint64_t)(last - first + 1) * esize + (last < 63 ? 512 : 0);
        first = last + 1;
    }
    int32_t whole = find_buffer(t, "blk.0.ffn_gate_exps#GPU0#0");
    int32_t ids = find_buffer(t, "p.moe_ids");
    assert_true(whole >= 0 && ids >= 0);
    int n_got = 0;
    bool read_back = false, synced = false, read_by_host = false;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt st;
        trace_stmt_at(t, i, &st);
        const char *label = st.label != TRACE_NONE ? trace_str(t, st.label) : "";
        if (st.kind == TRACE_COPY && st.n_access == 2 && st.access[1].buffer == (uint32_t)ids &&
            strncmp(trace_str(t, t->queues[st.queue].name), "gpu0", 4) == 0) {
            read_back = true;
            synced = false;
        } else if (st.kind == TRACE_SYNC && read_back) {
            synced = true;
        } else if (st.kind == TRACE_OP && strcmp(label, "moe.used_experts") == 0 && read_back) {
            assert_true(synced);                 /* the host waited for the get */
            read_by_host = true;
            read_back = false;
        }
        if (st.kind != TRACE_COPY || st.n_access != 2)
            continue;
        const trace_buffer *dst = &t->buffers[st.access[1].buffer];
        if (dst->parent == TRACE_NONE || st.access[1].buffer == (uint32_t)whole ||
            strncmp(trace_str(t, dst->name), "blk.0.ffn_gate_exps#GPU0#0[", 27) != 0)
            continue;
        assert_true(n_got < n_want);
        assert_int_equal(dst->root_offset - t->buffers[whole].root_offset, want_off[n_got]);
        assert_int_equal(dst->size, want_size[n_got]);
        n_got++;
    }
    assert_int_equal(n_got, n_want);
    assert_true(read_by_host);
    done(&o);
    /* The broken variant: no sync after the read-back, the host reads ids
     * GPU0 may still be copying. */
    run_checked_on(&o, SMALL_MOE, NULL, "h100-pcie:gpus=1", "moe-no-ids-sync", NULL, 0, 32, 2);
    assert_true(race_on(&o, "p.moe_ids"));
    done(&o);
}

static void test_run_ggml_head_tensor_parallel(void **state)
{
    (void)state;
    outcome o;
    run_checked_on(&o, SMALL_TP, NULL, "h100-sxm", "ggml-head", NULL, 0, 64, 2);
    assert_clean(&o, "ggml-head on tp");
    assert_int_equal(o.res.n_copies, 1);               /* a tensor split does not pipeline */
    done(&o);
}

/* Buffers of the run whose name starts with prefix. */
static int buffers_named(const outcome *o, const char *prefix)
{
    int n = 0;
    for (uint32_t i = 0; i < o->t->n_buffers; i++)
        n += strncmp(trace_str(o->t, o->t->buffers[i].name), prefix, strlen(prefix)) == 0;
    return n;
}

/* Item 4 of issue 23: under ggml's allocator the prompt and the decode
 * graphs share one compute buffer per backend (llama.cpp's one
 * ggml_backend_sched), grown to the larger graph; syncsim's own policies
 * keep an arena per phase. */
static void test_run_ggml_one_compute_buffer(void **state)
{
    (void)state;
    outcome o;
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "ggml-head", NULL, 32, 2);
    assert_int_equal(buffers_named(&o, "d.arena."), 0);
    assert_int_equal(buffers_named(&o, "p.arena."), 3);   /* GPU0, GPU1, CPU */
    assert_int_equal(check_report_count(o.rep), 0);
    done(&o);
    run_checked(&o, SMALL_LLAMA, "h100-pcie", "events", NULL, 32, 2);
    assert_true(buffers_named(&o, "d.arena.") > 0);
    done(&o);
}

/* Issue 23, item 6: ggml at #20793 synchronizes the split's backend
 * before a copy when there is no slot event and the backend has no
 * cpy_tensor_async -- SYCL's case (one slot: no events). #17795 does not. */
static void test_run_ggml_20793_syncs_before_sycl_copies(void **state)
{
    (void)state;
    outcome o;
    run_checked_on(&o, SMALL_LLAMA, NULL, "h100-pcie:gpus=1,backend=sycl", "ggml-20793", NULL, 0,
                   16, 2);
    assert_string_equal(o.res.pattern, "ssscsscsscsgas");
    assert_int_equal(check_report_count(o.rep), 0);
    done(&o);
    run_checked_on(&o, SMALL_LLAMA, NULL, "h100-pcie:gpus=1,backend=sycl", "ggml-17795", NULL, 0,
                   16, 2);
    assert_string_equal(o.res.pattern, "sscscscsgas");
    done(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_ggml_20793_syncs_before_sycl_copies),
        cmocka_unit_test(test_run_ggml_baselines_have_the_26040_race),
        cmocka_unit_test(test_run_ggml_one_compute_buffer),
        cmocka_unit_test(test_run_events_and_full_are_clean),
        cmocka_unit_test(test_run_async_user_inputs_races_on_user_inputs),
        cmocka_unit_test(test_run_no_split_wait_races_on_reused_arena),
        cmocka_unit_test(test_run_pattern_strings_of_the_llama),
        cmocka_unit_test(test_run_relaxed_beats_full_more_on_windows),
        cmocka_unit_test(test_run_tensor_parallel_allreduces_are_clean),
        cmocka_unit_test(test_run_replay_with_recorded_durations_reproduces_makespan),
        cmocka_unit_test(test_run_replay_dropping_syncs_gains_time),
        cmocka_unit_test(test_run_ggml_single_gpu_patterns),
        cmocka_unit_test(test_run_ggml_pipeline_microbatches),
        cmocka_unit_test(test_run_ggml_26040_wait_dropped_races),
        cmocka_unit_test(test_run_ggml_head_tensor_parallel),
        cmocka_unit_test(test_run_moe_used_expert_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
