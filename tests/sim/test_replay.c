/* test_replay.c -- `replay --durations model` prices a simulated run the way
 * the simulator did (the cost attributes it records), hand-written traces
 * without them by their bytes, and a replay run names the run it read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_test_util.h"

#define SMALL_LLAMA \
    "llama:n_layer=4,n_embd=256,n_head=4,n_head_kv=2,n_ff=512,n_vocab=1000,n_ctx=128,ubatch=16"
#define SMALL_TP \
    "tp:n_layer=2,n_embd=1024,n_head=8,n_head_kv=4,n_ff=2048,n_vocab=1000,n_ctx=128,ubatch=64"

/* The stated tolerance of a model-priced replay of a simulated run on the
 * same device model. Replay reproduces the simulator's prices exactly and
 * does not model link sharing between concurrent copies; these runs
 * replay to within a few nanoseconds. */
#define MODEL_TOLERANCE 0.001

/* Runs model on devices into a fresh in-memory trace (the caller frees it). */
static trace *simulate_policy(const char *model, const char *devices, const char *policy,
                              const char *allreduce, int prompt, int tokens)
{
    trace *t = trace_new();
    assert_non_null(t);
    sched_run_opts o = { .model = model, .devices = devices, .policy = policy, .n_copies = 2,
                         .tokens = tokens, .prompt = prompt, .allreduce = allreduce };
    sched_run_result res;
    sched_run_free(sim_test_run(&o, t, &res));
    return t;
}

static trace *simulate(const char *model, const char *devices, const char *allreduce, int prompt,
                       int tokens)
{
    return simulate_policy(model, devices, "events", allreduce, prompt, tokens);
}

static sim_replay_result replay(trace *t, const char *devices, bool recorded)
{
    sim_model m;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load(devices, &m, &err), 0);
    sim_replay_opts o = { .model = &m, .durations_recorded = recorded };
    sim_replay_result r;
    trace_reader rd;
    trace_reader_memory(&rd, t);
    if (sim_replay(&rd, &o, &r, &err) != 0)
        fail_msg("sim_replay on %s: %s", devices, err.msg);
    assert_true(r.recorded_makespan_ns > 0);
    return r;
}

static double rel_error(const sim_replay_result *r)
{
    return ((double)r->makespan_ns - (double)r->recorded_makespan_ns) /
           (double)r->recorded_makespan_ns;
}

/* Model durations within MODEL_TOLERANCE, recorded durations exact. */
static void assert_replays(const char *model, const char *devices, const char *allreduce,
                           int prompt, int tokens)
{
    trace *t = simulate(model, devices, allreduce, prompt, tokens);
    sim_replay_result rec = replay(t, devices, true);
    assert_int_equal(rec.makespan_ns, rec.recorded_makespan_ns);
    /* and every statement starts when it did */
    assert_true(rec.n_start_compared > 0);
    assert_int_equal(rec.median_start_error_ns, 0);
    sim_replay_result mod = replay(t, devices, false);
    double e = rel_error(&mod);
    if (e > MODEL_TOLERANCE || e < -MODEL_TOLERANCE)
        fail_msg("%s on %s (%s): model replay %lld ns, run %lld ns (%+.3f%%)",
                 model ? model : "llama", devices,
                 allreduce ? allreduce : "ring", (long long)mod.makespan_ns,
                 (long long)mod.recorded_makespan_ns, 100 * e);
    trace_free(t);
}

/* The default llama of `syncsim run` (NULL: its defaults, 64 prompt and 16
 * decode tokens): its embedding table is 65 MB, of which get_rows reads a
 * few rows, so pricing by accesses alone is far off. */
static void test_replay_model_durations_reproduce_a_llama_on_h100_pcie(void **state)
{
    (void)state;
    assert_replays(NULL, "h100-pcie", NULL, -1, -1);
    assert_replays(SMALL_LLAMA, "h100-pcie", NULL, 32, 8);
}

static void test_replay_model_durations_reproduce_a_llama_on_rtx4090_pcie4(void **state)
{
    (void)state;
    assert_replays(NULL, "rtx4090-pcie4", NULL, -1, -1);
    assert_replays(NULL, "rtx4090-windows", NULL, -1, -1);
    assert_replays(SMALL_LLAMA, "rtx4090-pcie4", NULL, 32, 8);
}

/* f32 weights: the mul_mats are compute bound at the f32 peak. */
static void test_replay_model_durations_reproduce_compute_bound_ops(void **state)
{
    (void)state;
    assert_replays(SMALL_LLAMA ",dtype=f32", "rtx4090-pcie4", NULL, 64, 2);
}

static void test_replay_model_durations_reproduce_tensor_parallel_on_h100_sxm(void **state)
{
    (void)state;
    const char *kinds[] = { "ring", "butterfly", "bf16" };
    for (int i = 0; i < 3; i++)
        assert_replays(SMALL_TP, "h100-sxm", kinds[i], 64, 2);
    assert_replays(SMALL_TP, "h100-pcie:gpus=4", "butterfly", 64, 2);
}

/* The simulator and replay price with one cost model (sim/cost.c): a run
 * whose transfers never share a link or a copy engine replays to the
 * nanosecond: `full` syncs before and after every copy, and `relaxed` on one
 * GPU syncs around a split's copies, which all use that GPU's stream. Where
 * copies overlap on one link (`events`: a stream's copy beside the host's
 * blocking ones; `relaxed` on two GPUs: a peer copy on the source's stream
 * beside the destination's upload), the simulator shares the link and
 * replay does not: those replay within MODEL_TOLERANCE (above). */
static void test_replay_model_durations_equal_runs_whose_copies_never_overlap(void **state)
{
    (void)state;
    static const struct { const char *model, *devices, *policy, *allreduce; } runs[] = {
        { NULL, "h100-pcie", "full", NULL },
        { NULL, "h100-pcie:gpus=1", "relaxed", NULL },
        { NULL, "h100-pcie:gpus=1", "full", NULL },
        { NULL, "rtx4090-windows", "full", NULL },
        { NULL, "h100-sxm", "full", NULL },
        { SMALL_TP, "h100-sxm", "full", "butterfly" },
        { SMALL_TP, "h100-pcie:gpus=4", "full", "bf16" },
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        trace *t = simulate_policy(runs[i].model, runs[i].devices, runs[i].policy,
                                   runs[i].allreduce, 64, 4);
        sim_replay_result mod = replay(t, runs[i].devices, false);
        if (mod.makespan_ns != mod.recorded_makespan_ns)
            fail_msg("%s on %s, %s: model replay %lld ns, run %lld ns",
                     runs[i].model ? runs[i].model : "llama", runs[i].devices, runs[i].policy,
                     (long long)mod.makespan_ns, (long long)mod.recorded_makespan_ns);
        trace_free(t);
    }
}

/* The simulator's ops carry the cost attributes replay needs. */
static void test_replay_simulated_ops_carry_cost_attributes(void **state)
{
    (void)state;
    trace *t = simulate(SMALL_LLAMA, "h100-pcie", NULL, 16, 1);
    bool flops_f16 = false, rows_bytes = false, overhead = false;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        const char *label = s.label == TRACE_NONE ? "" : trace_str(t, s.label);
        for (uint32_t a = 0; a < s.n_attr; a++) {
            const char *k = trace_str(t, s.attr[a].key);
            flops_f16 |= strcmp(label, "p:l0.q") == 0 && strcmp(k, "flops_f16") == 0;
            /* get_rows names the whole table but moves a few rows */
            rows_bytes |= strcmp(label, "p:inp_embd") == 0 && strcmp(k, "bytes") == 0;
            overhead |= strcmp(label, "sample") == 0 && strcmp(k, "overhead_ns") == 0;
        }
    }
    assert_true(flops_f16);
    assert_true(rows_bytes);
    assert_true(overhead);
    trace_free(t);
}

/* One statement's model duration in a hand-written trace. */
static int64_t priced(const char *devices, const char *text, const char *label)
{
    trace *t = NULL;
    trace_error err = { 0 };
    if (trace_text_parse_string("priced.trace", text, strlen(text), &t, &err) != 0)
        fail_msg("parse: %s", err.msg);
    sim_model m;
    assert_int_equal(sim_model_load(devices, &m, &err), 0);
    trace *out = trace_new();
    sched_sink sink = sched_sink_memory(out);
    sim_replay_opts o = { .model = &m, .durations_recorded = false, .out = &sink };
    sim_replay_result r;
    trace_reader rd;
    trace_reader_memory(&rd, t);
    if (sim_replay(&rd, &o, &r, &err) != 0)
        fail_msg("sim_replay: %s", err.msg);
    int64_t dur = -1;
    for (uint64_t i = 0; i < out->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(out, i, &s);
        if (s.label != TRACE_NONE && strcmp(trace_str(out, s.label), label) == 0)
            dur = s.dur;
    }
    trace_free(out);
    trace_free(t);
    assert_true(dur >= 0);
    return dur;
}

#define DECLS "syncsim-trace 1\n" \
              "queue host host\n" \
              "queue gpu0 stream device=gpu0\n" \
              "queue gpu1 stream device=gpu1\n" \
              "buffer a size=2000000 device=gpu0\n" \
              "buffer b size=2000000 device=gpu1\n" \
              "buffer h size=2000000 host pinned\n" \
              "buffer h2 size=2000000 host\n"

/* h100-pcie: kernel_overhead 2000 ns, 2000 GB/s, 51 / 756 TFLOP/s f32 / f16;
 * host: 16 threads on 32 cores (spin barrier 100 ns), 1500 GFLOP/s, 200 GB/s;
 * links h2d 55, d2h 52, p2p 40 GB/s; copy latency 2000 ns, host copy 6000 ns. */
/* Replays text; *start and *end of the k-th statement with label (or,
 * label NULL, of kind) in the result. */
static void replayed_span(const char *text, const char *label, trace_kind kind, int k,
                          int64_t *start, int64_t *end)
{
    trace *t = NULL;
    trace_error err = { 0 };
    if (trace_text_parse_string("span.trace", text, strlen(text), &t, &err) != 0)
        fail_msg("parse: %s", err.msg);
    sim_model m;
    assert_int_equal(sim_model_load("h100-pcie", &m, &err), 0);
    trace *out = trace_new();
    sched_sink sink = sched_sink_memory(out);
    sim_replay_opts o = { .model = &m, .out = &sink };
    sim_replay_result r;
    trace_reader rd;
    trace_reader_memory(&rd, t);
    if (sim_replay(&rd, &o, &r, &err) != 0)
        fail_msg("sim_replay: %s", err.msg);
    *start = *end = -1;
    for (uint64_t i = 0; i < out->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(out, i, &s);
        bool match = label ? s.label != TRACE_NONE && strcmp(trace_str(out, s.label), label) == 0
                           : s.kind == kind;
        if (match && k-- == 0) {
            *start = s.t;
            *end = s.t + s.dur;
        }
    }
    trace_free(out);
    trace_free(t);
    assert_true(*start >= 0);
}

#define TWO_HOSTS "syncsim-trace 1\n" \
                  "queue host host\n" \
                  "queue h1 host\n" \
                  "queue h2 host\n" \
                  "queue gpu0 stream device=gpu0\n" \
                  "buffer a size=2000000 device=gpu0\n" \
                  "buffer h size=2000000 host\n" \
                  "buffer h2 size=2000000 host\n"

/* Rule 6, as the checker reads it: an await returns after every signal of
 * its flag, not only after the last one in the file. */
static void test_replay_await_follows_every_signal(void **state)
{
    (void)state;
    const char *text = TWO_HOSTS
        "h1 op slow r:h w:h2\n"
        "h1 signal f\n"
        "host signal f\n"
        "gpu0 await f by=host\n"
        "gpu0 op k r:a w:a by=host\n";
    int64_t slow_start, slow_end, k_start, k_end;
    replayed_span(text, "slow", TRACE_OP, 0, &slow_start, &slow_end);
    replayed_span(text, "k", TRACE_OP, 0, &k_start, &k_end);
    if (k_start < slow_end)
        fail_msg("k starts at %lld, before the signal after slow (%lld)", (long long)k_start,
                 (long long)slow_end);
}

/* An arrival beyond a barrier's count synchronises nothing (the checker
 * reports it as barrier-mismatch): the others do not wait for it. */
static void test_replay_extra_barrier_arrival_orders_nothing(void **state)
{
    (void)state;
    const char *text = TWO_HOSTS
        "host barrier b count=2\n"
        "h1 barrier b count=2\n"
        "h2 op slow r:h w:h2\n"
        "h2 barrier b count=2\n"
        "host op after r:h\n";
    int64_t slow_start, slow_end, a_start, a_end;
    replayed_span(text, "slow", TRACE_OP, 0, &slow_start, &slow_end);
    replayed_span(text, "after", TRACE_OP, 0, &a_start, &a_end);
    if (a_start >= slow_end)
        fail_msg("after starts at %lld, waiting for the extra arrival after slow (%lld)",
                 (long long)a_start, (long long)slow_end);
}

/* Replays text with per-statement outputs (the caller frees the three
 * arrays, one entry per statement); drop may be NULL. */
static trace *replay_each(const char *text, const bool *drop, int64_t **start, int64_t **end,
                          bool **crit, sim_replay_result *r)
{
    trace *t = NULL;
    trace_error err = { 0 };
    if (trace_text_parse_string("each.trace", text, strlen(text), &t, &err) != 0)
        fail_msg("parse: %s", err.msg);
    sim_model m;
    assert_int_equal(sim_model_load("h100-pcie", &m, &err), 0);
    *start = calloc(t->n_stmts, sizeof **start);
    *end = calloc(t->n_stmts, sizeof **end);
    *crit = calloc(t->n_stmts, sizeof **crit);
    sim_replay_opts o = { .model = &m, .durations_recorded = true, .drop = drop,
                          .start = *start, .end = *end, .critical = *crit };
    trace_reader rd;
    trace_reader_memory(&rd, t);
    if (sim_replay(&rd, &o, r, &err) != 0)
        fail_msg("sim_replay: %s", err.msg);
    return t;
}

static void free_each(trace *t, int64_t *start, int64_t *end, bool *crit)
{
    free(start);
    free(end);
    free(crit);
    trace_free(t);
}

/* The critical path runs back from the statement that ends last through
 * what each waited for: here the long kernel on gpu0, its record, gpu1's
 * wait for it and the kernel after; not the short kernel gpu1 ran before
 * the wait, nor the host's work. */
static void test_replay_critical_path_goes_through_the_wait(void **state)
{
    (void)state;
    const char *text = DECLS
        "gpu0 op long w:a dur=50000\n"
        "gpu0 record e\n"
        "gpu1 op short w:b dur=1000\n"
        "gpu1 wait e\n"
        "gpu1 op after r:b dur=2000\n"
        "host op own r:h w:h2 dur=3000\n";
    int64_t *start, *end;
    bool *crit;
    sim_replay_result r;
    trace *t = replay_each(text, NULL, &start, &end, &crit, &r);
    bool want[6] = { true, true, false, true, true, false };
    for (int i = 0; i < 6; i++)
        if (crit[i] != want[i])
            fail_msg("statement %d: on the critical path %d, want %d", i, crit[i], want[i]);
    assert_int_equal(end[4], r.makespan_ns);
    assert_true(end[3] >= end[0]);      /* the wait held gpu1 until the long kernel ended */
    free_each(t, start, end, crit);
}

/* drop[] removes a barrier generation whole: without it the host that
 * arrived early does not wait for the slow one. */
static void test_replay_drop_mask_takes_a_barrier_generation(void **state)
{
    (void)state;
    const char *text = TWO_HOSTS
        "h1 op slow r:h w:h2 dur=40000\n"
        "h1 barrier b count=2\n"
        "h2 barrier b count=2\n"
        "h2 op after r:h dur=1000\n";
    int64_t *start, *end;
    bool *crit;
    sim_replay_result with, without;
    trace *t = replay_each(text, NULL, &start, &end, &crit, &with);
    int64_t after_with = start[3];
    free_each(t, start, end, crit);
    bool drop[4] = { false, true, true, false };
    t = replay_each(text, drop, &start, &end, &crit, &without);
    assert_true(after_with >= 40000);
    assert_true(start[3] < 40000);
    assert_int_equal(start[1], TRACE_TIME_NONE);
    assert_int_equal(without.n_dropped, 2);
    free_each(t, start, end, crit);
}

static void test_replay_hand_written_ops_are_priced_by_bytes_unless_told(void **state)
{
    (void)state;
    /* 2 MB read + 2 MB written at 2000 GB/s */
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 op k r:a w:a\n", "k"), 2000 + 2000);
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 op k r:a[0:1000] w:a[0:1000]\n", "k"), 2001);
    /* 51e6 f32 FLOPs take 1000 ns: more than the 1 ns of bytes */
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 op k r:a[0:1000] w:a[0:1000] flops=51000000\n",
                            "k"), 3000);
    assert_int_equal(priced("h100-pcie",
                            DECLS "gpu0 op k r:a[0:1000] w:a[0:1000] flops_f16=756000000\n", "k"),
                     3000);
    /* bytes= replaces the accessed bytes; overhead_ns= the kernel overhead */
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 op k r:a w:a bytes=20000\n", "k"), 2010);
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 op k r:a w:a overhead_ns=0\n", "k"), 2000);
    /* a host op: a thread-pool barrier + roofline on the CPU */
    assert_int_equal(priced("h100-pcie", DECLS "host op c r:h w:h2\n", "c"), 100 + 20000);
    assert_int_equal(priced("h100-pcie", DECLS "host op c r:h w:h2 flops=60000000\n", "c"),
                     100 + 40000);
    /* an attribute that is not a number prices nothing */
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 op k r:a w:a flops=many\n", "k"), 4000);
}

static void test_replay_hand_written_copies_take_their_link(void **state)
{
    (void)state;
    /* 2 MB: host -> device at 55, device -> host at 52, over PCIe at min(52, 55, 40) */
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 copy c h a\n", "c"), 2000 + 36364);
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 copy c a h\n", "c"), 2000 + 38462);
    assert_int_equal(priced("h100-pcie", DECLS "gpu0 copy c a b\n", "c"), 2000 + 50000);
    /* NVLink at 380 */
    assert_int_equal(priced("h100-sxm", DECLS "gpu0 copy c a b\n", "c"), 2000 + 5264);
    /* the host blocks: + host_copy_ns; host to host through its memory */
    assert_int_equal(priced("h100-pcie", DECLS "host copy c h a\n", "c"), 2000 + 36364 + 6000);
    assert_int_equal(priced("h100-pcie", DECLS "host copy c h h2\n", "c"), 10000 + 6000);
}

/* The model-priced makespan of a hand-written trace. */
static int64_t makespan(const char *devices, const char *text)
{
    trace *t = NULL;
    trace_error err = { 0 };
    if (trace_text_parse_string("makespan.trace", text, strlen(text), &t, &err) != 0)
        fail_msg("parse: %s", err.msg);
    sim_model m;
    assert_int_equal(sim_model_load(devices, &m, &err), 0);
    sim_replay_opts o = { .model = &m };
    sim_replay_result r;
    trace_reader rd;
    trace_reader_memory(&rd, t);
    if (sim_replay(&rd, &o, &r, &err) != 0)
        fail_msg("sim_replay: %s", err.msg);
    trace_free(t);
    return r.makespan_ns;
}

/* h100-pcie: base 6600 ns, step 1000 ns, p2p 40 GB/s, launch 3000 ns. The
 * first participant is launched at 3000, the second at 6000; the
 * collective runs from then. */
static void test_replay_hand_written_collectives_are_alpha_beta(void **state)
{
    (void)state;
    /* ring over 2: base + 2 steps + 2 MB */
    assert_int_equal(makespan("h100-pcie", DECLS "gpu0 collective tp allreduce size=2 rw:a\n"
                                                 "gpu1 collective tp allreduce size=2 rw:b\n"),
                     3000 + 6600 + 2 * 1000 + 50000);
    /* butterfly over 2: base + 1 round of (step + 2 MB) */
    assert_int_equal(makespan("h100-pcie", DECLS
                              "gpu0 collective tp allreduce size=2 rw:a algorithm=butterfly\n"
                              "gpu1 collective tp allreduce size=2 rw:b algorithm=butterfly\n"),
                     3000 + 6600 + 1000 + 50000);
    /* alone: nothing to exchange */
    assert_int_equal(makespan("h100-pcie", DECLS "gpu0 collective tp allreduce size=1 rw:a\n"
                                                 "gpu0 op k r:a[0:2000]\n"),
                     3000 + 2001);
}

/* Runs a shell command in dir; returns its exit status. */
static int sh(const char *dir, const char *fmt, ...)
{
    char cmd[1024], full[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "cd %s && %s >/dev/null 2>&1", dir, cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *meta_of(const char *db, int64_t run, const char *key, char *buf, size_t cap)
{
    trace_reader r = { 0 };
    trace_error err = { 0 };
    if (trace_open_any(db, run, &r, &err) != 0)
        fail_msg("%s run %lld: %s", db, (long long)run, err.msg);
    const char *v = trace_get_meta(r.trace, key);
    if (v)
        snprintf(buf, cap, "%s", v);
    trace_reader_close(&r);
    return v ? buf : NULL;
}

static void test_replay_run_names_its_source_run(void **state)
{
    (void)state;
    char dir[64] = "/tmp/syncsim-replay-src-XXXXXX", db[128], buf[64];
    assert_non_null(mkdtemp(dir));
    snprintf(db, sizeof db, "%s/run.db", dir);
    assert_int_equal(sh(dir, "%s run --tokens 2 --prompt 16 -o run.db", SYNCSIM_BINARY), 0);
    assert_int_equal(sh(dir, "%s run --tokens 2 --prompt 16 -o run.db", SYNCSIM_BINARY), 0);
    /* the latest run (2) by default, a given one with --run */
    assert_int_equal(sh(dir, "%s replay run.db --durations model -o run.db", SYNCSIM_BINARY), 0);
    assert_int_equal(sh(dir, "%s replay run.db --run 1 -o run.db", SYNCSIM_BINARY), 0);
    assert_string_equal(meta_of(db, 3, "source_run", buf, sizeof buf), "2");
    assert_string_equal(meta_of(db, 4, "source_run", buf, sizeof buf), "1");
    assert_string_equal(meta_of(db, 4, "replay_of", buf, sizeof buf), "run.db");
    assert_null(meta_of(db, 1, "source_run", buf, sizeof buf));
    /* a text trace is no run: replay_of only */
    assert_int_equal(sh(dir, "%s export run.db --run 1 -o run.trace && %s replay run.trace -o t.db",
                        SYNCSIM_BINARY, SYNCSIM_BINARY), 0);
    snprintf(db, sizeof db, "%s/t.db", dir);
    assert_null(meta_of(db, 1, "source_run", buf, sizeof buf));
    assert_string_equal(meta_of(db, 1, "replay_of", buf, sizeof buf), "run.trace");
    assert_int_equal(sh(dir, "rm -rf %s", dir), 0);
}

/* Issue 23, item 7: synchronisation between host processes is priced from
 * the device model -- a barrier ends ipc_barrier_ns after its last arrival,
 * a host's put and get of a key (value semaphore) cost kv_store_ns each --
 * so removing a barrier or a store round trip gains time in a what-if. */
static void test_replay_prices_ipc_barriers_and_the_kv_store(void **state)
{
    (void)state;
    sim_model m;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie", &m, &err), 0);
    assert_true(m.ipc_barrier_ns > 0 && m.kv_store_ns > 0);
    const char *barrier = TWO_HOSTS
        "h1 barrier b count=2\n"
        "h2 op slow r:h w:h2\n"
        "h2 barrier b count=2\n"
        "h1 op after r:h\n";
    int64_t slow_start, slow_end, a_start, a_end;
    replayed_span(barrier, "slow", TRACE_OP, 0, &slow_start, &slow_end);
    replayed_span(barrier, "after", TRACE_OP, 0, &a_start, &a_end);
    if (a_start < slow_end + m.ipc_barrier_ns)
        fail_msg("after starts at %lld, before the barrier's cost after slow (%lld + %lld)",
                 (long long)a_start, (long long)slow_end, (long long)m.ipc_barrier_ns);
    const char *kv = TWO_HOSTS
        "semaphore key\n"
        "h1 op first r:h w:h2\n"
        "h1 signal key set=1\n"
        "h2 await key >=1\n"
        "h2 op got r:h\n";
    int64_t f_start, f_end, g_start, g_end;
    replayed_span(kv, "first", TRACE_OP, 0, &f_start, &f_end);
    replayed_span(kv, "got", TRACE_OP, 0, &g_start, &g_end);
    if (g_start < f_end + 2 * m.kv_store_ns)
        fail_msg("got starts at %lld, before a put and a get after first (%lld + 2 x %lld)",
                 (long long)g_start, (long long)f_end, (long long)m.kv_store_ns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_prices_ipc_barriers_and_the_kv_store),
        cmocka_unit_test(test_replay_model_durations_reproduce_a_llama_on_h100_pcie),
        cmocka_unit_test(test_replay_model_durations_reproduce_a_llama_on_rtx4090_pcie4),
        cmocka_unit_test(test_replay_model_durations_reproduce_compute_bound_ops),
        cmocka_unit_test(test_replay_model_durations_reproduce_tensor_parallel_on_h100_sxm),
        cmocka_unit_test(test_replay_model_durations_equal_runs_whose_copies_never_overlap),
        cmocka_unit_test(test_replay_simulated_ops_carry_cost_attributes),
        cmocka_unit_test(test_replay_hand_written_ops_are_priced_by_bytes_unless_told),
        cmocka_unit_test(test_replay_hand_written_copies_take_their_link),
        cmocka_unit_test(test_replay_hand_written_collectives_are_alpha_beta),
        cmocka_unit_test(test_replay_run_names_its_source_run),
        cmocka_unit_test(test_replay_await_follows_every_signal),
        cmocka_unit_test(test_replay_extra_barrier_arrival_orders_nothing),
        cmocka_unit_test(test_replay_critical_path_goes_through_the_wait),
        cmocka_unit_test(test_replay_drop_mask_takes_a_barrier_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
