/*
 * test_allreduce.c -- the all-reduce strategies as ggml's backends run them
 * (sched/allreduce.c): what `auto` picks and the BF16 thresholds, what each
 * program computes, and, on simulated GPUs, that the expanded statements
 * check clean on 2, 3 and 4 ranks while the seeded bugs race: ggml's
 * butterfly refilling an inbox too early, and one inner wait dropped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "check/check.h"
#include "sim_test_util.h"

#define TP2 "tp:n_layer=2,n_embd=256,n_head=4,n_head_kv=4,n_ff=512,n_vocab=256,n_ctx=64,ubatch=16"
#define TP3 "tp:n_layer=2,n_embd=192,n_head=6,n_head_kv=6,n_ff=384,n_vocab=256,n_ctx=64,ubatch=16"

/* ------------------------------------------------------------------ */
/* Choice and thresholds.                                              */

static void test_allreduce_auto_picks_as_ggml(void **state)
{
    (void)state;
    sched_allreduce A = SCHED_ALLREDUCE_AUTO;
    assert_int_equal(sched_allreduce_pick(A, "cuda", 2, SCHED_F32), SCHED_ALLREDUCE_NCCL);
    assert_int_equal(sched_allreduce_pick(A, "cuda", 4, SCHED_F32), SCHED_ALLREDUCE_NCCL);
    assert_int_equal(sched_allreduce_pick(A, "sycl", 2, SCHED_F32), SCHED_ALLREDUCE_SYCL);
    assert_int_equal(sched_allreduce_pick(A, "sycl", 3, SCHED_F32), SCHED_ALLREDUCE_BUTTERFLY);
    assert_int_equal(sched_allreduce_pick(A, NULL, 2, SCHED_F32), SCHED_ALLREDUCE_BUTTERFLY);
    assert_int_equal(sched_allreduce_pick(A, "cuda", 2, SCHED_F16), SCHED_ALLREDUCE_BUTTERFLY);
    /* ggml-sycl's F16 path (issue 23, item 6): exchanged, not the butterfly. */
    assert_int_equal(sched_allreduce_pick(A, "sycl", 2, SCHED_F16), SCHED_ALLREDUCE_SYCL);
    assert_int_equal(sched_allreduce_pick(A, "sycl", 2, SCHED_BF16), SCHED_ALLREDUCE_BUTTERFLY);
    assert_int_equal(sched_allreduce_pick(SCHED_ALLREDUCE_SYCL, NULL, 2, SCHED_BF16),
                     SCHED_ALLREDUCE_BUTTERFLY);
    /* Forced: as given, but ggml-sycl declines anything but 2 devices. */
    assert_int_equal(sched_allreduce_pick(SCHED_ALLREDUCE_NCCL, NULL, 3, SCHED_F32), SCHED_ALLREDUCE_NCCL);
    assert_int_equal(sched_allreduce_pick(SCHED_ALLREDUCE_SYCL, NULL, 4, SCHED_F32),
                     SCHED_ALLREDUCE_BUTTERFLY);
    assert_int_equal(sched_allreduce_parse("auto"), SCHED_ALLREDUCE_AUTO);
    assert_int_equal(sched_allreduce_parse("tree"), -1);
}

static void test_allreduce_bf16_thresholds_by_device_count(void **state)
{
    (void)state;
    assert_int_equal(sched_allreduce_bf16_from(SCHED_ALLREDUCE_NCCL, 2, 0), 32768);
    assert_int_equal(sched_allreduce_bf16_from(SCHED_ALLREDUCE_NCCL, 3, 0), 131072);
    assert_int_equal(sched_allreduce_bf16_from(SCHED_ALLREDUCE_NCCL, 4, 0), 262144);
    assert_int_equal(sched_allreduce_bf16_from(SCHED_ALLREDUCE_NCCL, 8, 0), 262144);
    assert_int_equal(sched_allreduce_bf16_from(SCHED_ALLREDUCE_NCCL, 4, 100), 100);
    assert_int_equal(sched_allreduce_bf16_from(SCHED_ALLREDUCE_SYCL, 2, 0), 32768);
    assert_int_equal(sched_allreduce_bf16_from(SCHED_ALLREDUCE_BF16, 4, 0), 32768);
    assert_true(sched_allreduce_bf16_from(SCHED_ALLREDUCE_BUTTERFLY, 2, 16) == INT64_MAX);
    assert_true(sched_allreduce_bf16_from(SCHED_ALLREDUCE_RING, 2, 16) == INT64_MAX);
}

/* ------------------------------------------------------------------ */
/* The programs, run on sets: which ranks' partials each rank ends with. */

/* Bit r of have[k]: rank k's accumulator holds rank r's partial; 0 when a
 * partial would be added twice. */
static void run_sets(sched_allreduce a, int n, bool bf16, uint32_t *have)
{
    sched_ar_step st[SCHED_AR_MAX_STEPS];
    int ns = sched_allreduce_program(a, n, bf16, st);
    assert_true(ns > 0 && ns < SCHED_AR_MAX_STEPS);
    uint32_t inbox[16] = { 0 };
    for (int k = 0; k < ns; k++) {
        int r = st[k].rank, p = st[k].peer;
        switch (st[k].kind) {
        case SCHED_AR_LOCAL: have[r] = 1u << r; break;
        case SCHED_AR_SEND:
        case SCHED_AR_SEND_BLOCKING: inbox[p] = have[r]; break;
        case SCHED_AR_PUT: have[p] = have[r]; break;
        case SCHED_AR_ADD: have[r] = (have[r] & inbox[r]) ? 0 : have[r] | inbox[r]; break;
        default: break;
        }
    }
}

static void test_allreduce_programs_sum_every_partial_once(void **state)
{
    (void)state;
    for (int n = 2; n <= 8; n++) {
        uint32_t have[16] = { 0 };
        run_sets(SCHED_ALLREDUCE_BUTTERFLY, n, false, have);
        for (int r = 0; r < n; r++)
            assert_int_equal(have[r], (1u << n) - 1);
    }
    uint32_t have[16] = { 0 };
    run_sets(SCHED_ALLREDUCE_SYCL, 2, true, have);
    assert_int_equal(have[0], 3);
    assert_int_equal(have[1], 3);
    /* ggml's own loop is right for powers of two ... */
    run_sets(SCHED_ALLREDUCE_BUTTERFLY_GGML, 4, false, have);
    for (int r = 0; r < 4; r++)
        assert_int_equal(have[r], 15);
    /* ... but leaves rank 1 of 3 without rank 2's partial. */
    run_sets(SCHED_ALLREDUCE_BUTTERFLY_GGML, 3, false, have);
    assert_int_equal(have[0], 7);
    assert_int_equal(have[1], 3);
    assert_int_equal(have[2], 7);
}

static void test_allreduce_programs_guard_every_refill(void **state)
{
    (void)state;
    sched_ar_step st[SCHED_AR_MAX_STEPS];
    for (int n = 2; n <= 4; n++) {
        int ns = sched_allreduce_program(SCHED_ALLREDUCE_BUTTERFLY, n, false, st);
        int sends = 0, guarded = 0, frees = 0, adds = 0;
        for (int k = 0; k < ns; k++) {
            sends += st[k].kind == SCHED_AR_SEND;
            adds += st[k].kind == SCHED_AR_ADD;
            frees += st[k].kind == SCHED_AR_FREE;
            guarded += st[k].kind == SCHED_AR_SEND && k > 0 && st[k - 1].kind == SCHED_AR_WAIT_FREE &&
                       st[k - 1].peer == st[k].peer;
        }
        assert_int_equal(sends, guarded);
        assert_int_equal(adds, frees);
        assert_int_equal(sends, adds);
        ns = sched_allreduce_program(SCHED_ALLREDUCE_BUTTERFLY_GGML, n, false, st);
        for (int k = 0; k < ns; k++)
            assert_true(st[k].kind != SCHED_AR_WAIT_FREE && st[k].kind != SCHED_AR_FREE);
    }
    assert_int_equal(sched_allreduce_program(SCHED_ALLREDUCE_NCCL, 2, false, st), 0);
    assert_int_equal(sched_allreduce_program(SCHED_ALLREDUCE_RING, 2, false, st), 0);
}

/* ------------------------------------------------------------------ */
/* On simulated GPUs.                                                  */

typedef struct outcome {
    trace *t;
    check_report *rep;
    sched_run *run;
    size_t collectives, adds, bf16_ops;
} outcome;

static void check_into(trace *t, check_report **rep)
{
    trace_reader r;
    trace_reader_memory(&r, t);
    trace_error err = { 0 };
    check_options co = { .max_findings = 1000 };
    assert_int_equal(check_trace(&r, &co, rep, &err), 0);
    trace_reader_close(&r);
}

static void simulate_prompt(outcome *o, const char *model, const char *devices,
                            const char *allreduce, int prompt)
{
    memset(o, 0, sizeof *o);
    o->t = trace_new();
    sched_run_opts opts = { .model = model, .devices = devices, .policy = "events", .n_copies = 2,
                            .tokens = 2, .prompt = prompt, .allreduce = allreduce };
    sched_run_result res;
    o->run = sim_test_run(&opts, o->t, &res);
    check_into(o->t, &o->rep);
    for (uint64_t i = 0; i < o->t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(o->t, i, &s);
        const char *label = s.label != TRACE_NONE ? trace_str(o->t, s.label) : "";
        o->collectives += s.kind == TRACE_COLLECTIVE;
        o->adds += s.kind == TRACE_OP && strstr(label, "_ar@") && strstr(label, ".add");
        o->bf16_ops += s.kind == TRACE_OP && strstr(label, "_bf16");
    }
}

static void simulate(outcome *o, const char *model, const char *devices, const char *allreduce)
{
    simulate_prompt(o, model, devices, allreduce, 16);
}

static void done(outcome *o)
{
    check_report_free(o->rep);
    sched_run_free(o->run);
    trace_free(o->t);
}

static size_t races_on(const trace *t, check_report *rep, const char *root_part)
{
    size_t n = 0;
    for (size_t i = 0; i < check_report_count(rep); i++) {
        const trace_finding *f = check_report_finding(rep, i);
        if (f->kind == TRACE_FINDING_RACE &&
            strstr(trace_str(t, t->buffers[f->root].name), root_part))
            n++;
    }
    return n;
}

static void expect_clean(const char *model, const char *devices, const char *allreduce)
{
    outcome o;
    simulate(&o, model, devices, allreduce);
    if (check_report_count(o.rep) != 0) {
        check_report_print(stderr, o.rep, false);
        fail_msg("%s on %s is not clean", allreduce, devices);
    }
    assert_int_equal(o.collectives, 0);
    assert_true(o.adds > 0);
    done(&o);
}

static void test_allreduce_expanded_strategies_check_clean(void **state)
{
    (void)state;
    expect_clean(TP2, "h100-pcie", "butterfly");
    expect_clean(TP2, "h100-pcie", "sycl");
    /* auto on GPUs of the sycl family is ggml-sycl's exchange, expanded */
    expect_clean(TP2, "h100-pcie,backend=sycl", "auto");
    expect_clean(TP3, "h100-pcie:gpus=3", "butterfly");
    expect_clean(TP2, "h100-sxm:gpus=4", "butterfly");
    /* 16 tokens x 256 = 4096 elements: bf16 from 1024 (truncated wire). */
    outcome o;
    sched_run_opts opts = { .model = TP2, .devices = "h100-pcie", .policy = "events", .n_copies = 2,
                            .tokens = 2, .prompt = 16, .allreduce = "sycl", .bf16_min = 1024 };
    memset(&o, 0, sizeof o);
    o.t = trace_new();
    sched_run_result res;
    o.run = sim_test_run(&opts, o.t, &res);
    check_into(o.t, &o.rep);
    assert_int_equal(check_report_count(o.rep), 0);
    size_t to_bf16 = 0;
    for (uint64_t i = 0; i < o.t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(o.t, i, &s);
        to_bf16 += s.kind == TRACE_OP && s.label != TRACE_NONE &&
                   strstr(trace_str(o.t, s.label), "_ar@") && strstr(trace_str(o.t, s.label), ".to_bf16");
    }
    assert_true(to_bf16 > 0);
    done(&o);
}

/* auto on simulated GPUs is NCCL: one collective per rank and all_reduce;
 * bf16 from 32768 elements on 2 GPUs but not on 4 (262144). */
static void test_allreduce_auto_is_nccl_with_thresholds(void **state)
{
    (void)state;
    const char *big = "tp:n_layer=1,n_embd=1024,n_head=8,n_head_kv=4,n_ff=2048,n_vocab=256,"
                      "n_ctx=128,ubatch=64";
    outcome o2, o4;
    simulate_prompt(&o2, big, "h100-sxm", NULL, 64);
    simulate_prompt(&o4, big, "h100-sxm:gpus=4", NULL, 64);
    assert_int_equal(check_report_count(o2.rep), 0);
    assert_int_equal(check_report_count(o4.rep), 0);
    assert_true(o2.collectives > 0);
    assert_int_equal(o2.adds, 0);
    /* The prompt's 64 x 1024 = 65536 elements: bf16 on 2 GPUs only. */
    assert_true(o2.bf16_ops > 0);
    assert_int_equal(o4.bf16_ops, 0);
    done(&o2);
    done(&o4);
}

static void test_allreduce_ggml_butterfly_refills_inbox_too_early(void **state)
{
    (void)state;
    const char *devs[] = { "h100-pcie", "h100-sxm:gpus=4" };
    for (int i = 0; i < 2; i++) {
        outcome o;
        simulate(&o, TP2, devs[i], "butterfly-ggml");
        assert_true(check_report_count(o.rep) > 0);
        /* Every race is on an inbox: the sender's refill against its owner's add. */
        assert_int_equal(races_on(o.t, o.rep, "allreduce_inbox"), check_report_count(o.rep));
        done(&o);
    }
}

/* Drops statement seq from o's trace (replay) into *out and checks it. */
static check_report *check_without(outcome *o, uint64_t seq, trace **out_trace)
{
    sim_model m;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie", &m, &err), 0);
    trace *out = trace_new();
    sched_sink sink = sched_sink_memory(out);
    sim_replay_opts ro = { .model = &m, .durations_recorded = true, .drop_seq = &seq, .n_drop = 1,
                           .out = &sink };
    sim_replay_result rr;
    trace_reader r;
    trace_reader_memory(&r, o->t);
    assert_int_equal(sim_replay(&r, &ro, &rr, &err), 0);
    assert_int_equal(rr.n_dropped, 1);
    check_report *rep = NULL;
    check_into(out, &rep);
    *out_trace = out;
    return rep;
}

/* The wait right before the first add of an all-reduce (the hand-over of
 * the peer's copy), and the first wait for an inbox to be consumed. */
static void inner_waits(const outcome *o, uint64_t *handover, uint64_t *inbox_free)
{
    uint64_t last_wait[64];
    bool last_is_wait[64] = { false };
    *handover = *inbox_free = UINT64_MAX;
    for (uint64_t i = 0; i < o->t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(o->t, i, &s);
        if (s.queue >= 64)
            continue;
        if (s.kind == TRACE_WAIT && s.object != TRACE_NONE &&
            strstr(trace_str(o->t, s.object), "inbox_free") && *inbox_free == UINT64_MAX)
            *inbox_free = s.seq;
        const char *label = s.label != TRACE_NONE ? trace_str(o->t, s.label) : "";
        if (s.kind == TRACE_OP && strstr(label, ".add") && last_is_wait[s.queue] &&
            *handover == UINT64_MAX)
            *handover = last_wait[s.queue];
        last_is_wait[s.queue] = s.kind == TRACE_WAIT;
        last_wait[s.queue] = s.seq;
    }
    assert_true(*handover != UINT64_MAX);
    assert_true(*inbox_free != UINT64_MAX);
}

static void test_allreduce_dropping_an_inner_wait_races(void **state)
{
    (void)state;
    outcome o;
    simulate(&o, TP2, "h100-sxm:gpus=4", "butterfly");
    assert_int_equal(check_report_count(o.rep), 0);
    uint64_t handover, inbox_free;
    inner_waits(&o, &handover, &inbox_free);
    trace *t;
    check_report *rep = check_without(&o, handover, &t);
    /* The add reads the inbox before the peer's copy into it is done. */
    assert_true(check_report_count_kind(rep, TRACE_FINDING_RACE) > 0);
    assert_true(races_on(t, rep, "allreduce_inbox") > 0);
    check_report_free(rep);
    trace_free(t);
    rep = check_without(&o, inbox_free, &t);
    /* The refill overwrites what the owner's add still reads. */
    assert_true(races_on(t, rep, "allreduce_inbox") > 0);
    check_report_free(rep);
    trace_free(t);
    done(&o);
}

/* ggml-sycl's exchange: the host waits for both queues, copies each
 * partial into the peer's inbox blocking, then each queue adds. Dropping
 * either host wait lets a blocking copy read a partial its queue is still
 * writing: a race on the accumulator. */
static void test_allreduce_sycl_host_waits_guard_the_copies(void **state)
{
    (void)state;
    sched_ar_step st[SCHED_AR_MAX_STEPS];
    int ns = sched_allreduce_program(SCHED_ALLREDUCE_SYCL, 2, true, st);
    const uint8_t want[] = { SCHED_AR_LOCAL, SCHED_AR_LOCAL, SCHED_AR_TO_BF16, SCHED_AR_TO_BF16,
                             SCHED_AR_SYNC, SCHED_AR_SYNC, SCHED_AR_SEND_BLOCKING,
                             SCHED_AR_SEND_BLOCKING, SCHED_AR_ADD, SCHED_AR_ADD };
    assert_int_equal(ns, (int)sizeof want);
    for (int k = 0; k < ns; k++)
        assert_int_equal(st[k].kind, want[k]);
    outcome o;
    simulate(&o, TP2, "h100-pcie", "sycl");
    assert_int_equal(check_report_count(o.rep), 0);
    /* the two host syncs right before the first copy into an inbox */
    uint64_t sync[2] = { UINT64_MAX, UINT64_MAX };
    for (uint64_t i = 0; i < o.t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(o.t, i, &s);
        if (s.kind == TRACE_SYNC) {
            sync[0] = sync[1];
            sync[1] = s.seq;
        }
        const char *label = s.label != TRACE_NONE ? trace_str(o.t, s.label) : "";
        if (s.kind == TRACE_COPY && strstr(label, ".inbox"))
            break;
    }
    assert_true(sync[0] != UINT64_MAX && sync[1] == sync[0] + 1);
    for (int k = 0; k < 2; k++) {
        trace *t;
        check_report *rep = check_without(&o, sync[k], &t);
        assert_true(check_report_count_kind(rep, TRACE_FINDING_RACE) > 0);
        assert_true(races_on(t, rep, "arena.GPU") > 0);
        check_report_free(rep);
        trace_free(t);
    }
    done(&o);
}

/* Two ranks of a group on one device: an expanded strategy (auto is the
 * NCCL collective on simulated GPUs: butterfly and sycl here) is refused
 * at planning, in one line. */
static void test_allreduce_ranks_sharing_a_device(void **state)
{
    (void)state;
    char path[] = "/tmp/syncsim-ar-shared-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *graph = "syncsim-graph 1\n"
                        "leaf x f32 64x4 input\n"
                        "op a0 scale x backend=0\n"
                        "op a1 scale x backend=0\n"
                        "op r0 all_reduce a0 backend=0 param=0\n"
                        "op r1 all_reduce a1 backend=0 param=0\n"
                        "op y add r0 r1 backend=0 output\n";
    assert_true(write(fd, graph, strlen(graph)) == (ssize_t)strlen(graph));
    close(fd);
    const char *asked[] = { "butterfly", "sycl" };
    for (int k = 0; k < 2; k++) {
        trace *t = trace_new();
        sched_run_opts o = { .graph_file = path, .devices = "h100-pcie", .policy = "events",
                             .tokens = 2, .prompt = 0, .allreduce = asked[k] };
        sched_run *r = NULL;
        trace_error err = { 0 };
        assert_int_equal(sched_run_prepare(&o, sim_test_families, &r, &err), 0);
        sched_run_result res;
        assert_int_not_equal(sched_run_exec(r, sched_sink_memory(t), &res, &err), 0);
        assert_non_null(strstr(err.msg, "all_reduce group 0: two ranks on one device"));
        assert_null(strchr(err.msg, '\n'));
        sched_run_free(r);
        trace_free(t);
    }
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_auto_picks_as_ggml),
        cmocka_unit_test(test_allreduce_bf16_thresholds_by_device_count),
        cmocka_unit_test(test_allreduce_programs_sum_every_partial_once),
        cmocka_unit_test(test_allreduce_programs_guard_every_refill),
        cmocka_unit_test(test_allreduce_expanded_strategies_check_clean),
        cmocka_unit_test(test_allreduce_auto_is_nccl_with_thresholds),
        cmocka_unit_test(test_allreduce_ggml_butterfly_refills_inbox_too_early),
        cmocka_unit_test(test_allreduce_dropping_an_inner_wait_races),
        cmocka_unit_test(test_allreduce_sycl_host_waits_guard_the_copies),
        cmocka_unit_test(test_allreduce_ranks_sharing_a_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
