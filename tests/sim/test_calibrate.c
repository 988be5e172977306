/* test_calibrate.c -- `syncsim calibrate` (sim/calibrate.c): a run simulated
 * on a known device model gives that model's numbers back; a trace that
 * lacks what a number needs keeps the base's and says so; a calibrated
 * model prices what it measured; the [kernels] section reads, writes and
 * refuses bad lines; the command writes a file `replay --devices` loads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_util.h"
#include "tests/tmpdir.h"

#define SMALL_LLAMA \
    "llama:n_layer=4,n_embd=256,n_head=4,n_head_kv=2,n_ff=512,n_vocab=1000,n_ctx=128,ubatch=16"

/* The stated tolerances. A simulated run is exact in its host costs and
 * waits: they come back to the nanosecond (1 ns of rounding). Bandwidths
 * come back within 2 %: the simulator rounds each transfer up to its last
 * byte's nanosecond and shares a link between overlapping copies, which
 * the fitted line sees as noise. */
#define NS_TOLERANCE 1
#define BW_TOLERANCE 0.02

/* A model no shipped file has: every number the fit must find differs
 * from the base's (rtx4090-pcie4). */
static void known_model(sim_model *m)
{
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("rtx4090-pcie4", m, &err), 0);
    snprintf(m->name, sizeof m->name, "known");
    m->launch_ns = 4321;
    m->api_call_ns = 2345;
    m->event_record_ns = 1234;
    m->sync_ns = 12345;
    m->event_sync_ns = 1500;
    m->event_wait_device_ns = 2500;
    m->copy_latency_ns = 3000;
    m->h2d_gbps = 20;
    m->d2h_gbps = 16;
    m->p2p_gbps = 12;           /* below both PCIe links: peer copies run at it */
    m->host_copy_ns = 7000;
    m->kernel_overhead_ns = 2500;
}

static void write_model(const fixture *f, const char *name, const sim_model *m, char *path,
                        size_t cap)
{
    snprintf(path, cap, "%s/%s", f->dir, name);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    sim_model_write(out, m, "a test model", NULL, NULL);
    assert_int_equal(fclose(out), 0);
}

static trace *simulate(const char *devices, const char *policy)
{
    trace *t = trace_new();
    assert_non_null(t);
    sched_run_opts o = { .model = SMALL_LLAMA, .devices = devices, .policy = policy,
                         .n_copies = 2, .tokens = 4, .prompt = 32 };
    sched_run_result res;
    sched_run_free(sim_test_run(&o, t, &res));
    return t;
}

static const sim_calib_param *param(const sim_calib *c, const char *key)
{
    const sim_calib_param *p = sim_calib_find(c, key);
    if (!p)
        fail_msg("calibrate reported no '%s'", key);
    return p;
}

static void assert_ns(const sim_calib *c, const char *key, int64_t want)
{
    const sim_calib_param *p = param(c, key);
    assert_true(p->fitted);
    assert_true(p->samples > 0);
    if (fabs(p->value - (double)want) > NS_TOLERANCE)
        fail_msg("%s: fitted %.1f, the model says %lld", key, p->value, (long long)want);
}

static void assert_bw(const sim_calib *c, const char *key, double want)
{
    const sim_calib_param *p = param(c, key);
    assert_true(p->fitted);
    if (fabs(p->value - want) > BW_TOLERANCE * want)
        fail_msg("%s: fitted %.3f GB/s, the model says %.3f", key, p->value, want);
}

/* A run simulated on the known model gives back its host costs, waits and
 * links; every family it ran is fitted, and replaying the run with the
 * fitted model reproduces its makespan. */
static void test_calibrate_recovers_the_model_a_run_was_simulated_on(void **state)
{
    fixture *f = *state;
    sim_model known, base;
    known_model(&known);
    char path[256];
    write_model(f, "known.dev", &known, path, sizeof path);
    trace *t = simulate(path, "events");
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("rtx4090-pcie4", &base, &err), 0);
    sim_calib c;
    if (sim_calibrate(t, &base, &c, &err) != 0)
        fail_msg("%s", err.msg);
    assert_ns(&c, "launch_ns", known.launch_ns);
    assert_ns(&c, "api_call_ns", known.api_call_ns);
    assert_ns(&c, "event_record_ns", known.event_record_ns);
    assert_ns(&c, "sync_ns", known.sync_ns);
    assert_ns(&c, "event_sync_ns", known.event_sync_ns);
    assert_ns(&c, "event_wait_device_ns", known.event_wait_device_ns);
    assert_ns(&c, "copy_latency_ns", known.copy_latency_ns);
    assert_bw(&c, "h2d_gbps", known.h2d_gbps);
    assert_bw(&c, "d2h_gbps", known.d2h_gbps);
    assert_bw(&c, "p2p_gbps", known.p2p_gbps);
    /* A stream family's fixed part is the model's kernel overhead. */
    const sim_calib_param *mm = param(&c, "mul_mat");
    assert_true(mm->family && mm->fitted);
    assert_true(llabs(mm->rate.fixed_ns - known.kernel_overhead_ns) <= NS_TOLERANCE);
    assert_true(mm->r2 > 0.999);
    assert_non_null(sim_model_kernel(&c.model, "rms_norm", false));
    assert_null(sim_model_kernel(&c.model, "rms_norm", true));
    /* What was not measured is the base's. */
    assert_true(c.model.allreduce_base_ns == base.allreduce_base_ns);
    assert_true(c.model.gpu_tflops_f16 == base.gpu_tflops_f16);
    /* Replaying the run under the fitted model prices it as it ran. */
    sim_replay_opts o = { .model = &c.model, .durations_recorded = false };
    sim_replay_result r;
    trace_reader rd;
    trace_reader_memory(&rd, t);
    assert_int_equal(sim_replay(&rd, &o, &r, &err), 0);
    double e = fabs((double)r.makespan_ns - (double)r.recorded_makespan_ns) /
               (double)r.recorded_makespan_ns;
    if (e > 0.005)
        fail_msg("self-replay makespan %lld against recorded %lld", (long long)r.makespan_ns,
                 (long long)r.recorded_makespan_ns);
    sim_calib_free(&c);
    trace_free(t);
}

static trace *parse(const char *text)
{
    trace *t = NULL;
    trace_error err = { 0 };
    if (trace_text_parse_string("t.trace", text, strlen(text), &t, &err) != 0)
        fail_msg("%s", err.msg);
    return t;
}

/* Captured kernels: no FLOPs, no bytes. Their family (by name) gets its
 * mean time per launch, which replay then charges; a trace with no copies
 * keeps the base's links and says why; the sync tail is measured after
 * the work it covered ended. */
static void test_calibrate_prices_kernels_of_unknown_size_by_their_mean(void **state)
{
    (void)state;
    trace *t = parse("syncsim-trace 1\n"
                     "queue h host\n"
                     "queue s stream device=0\n"
                     "h op host t=0 dur=1000\n"
                     "s op ampere_sgemm_128x64_nn by=h t=1000 dur=10000\n"
                     "h op host t=1000 dur=1000\n"
                     "s op volta_hgemm_tn by=h t=11000 dur=20000\n"
                     "h op host t=2000 dur=1000\n"
                     "s op vectorized_elementwise_kernel by=h t=31000 dur=3000\n"
                     "h sync s t=3000 dur=35000\n");
    sim_model base;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie", &base, &err), 0);
    sim_calib c;
    assert_int_equal(sim_calibrate(t, &base, &c, &err), 0);
    const sim_kernel_rate *g = sim_model_kernel(&c.model, "gemm", false);
    assert_non_null(g);
    assert_int_equal(g->fixed_ns, 15000);
    assert_true(g->gflops == 0 && g->gflops_f16 == 0 && g->gbps == 0);
    assert_non_null(strstr(param(&c, "gemm")->note, "neither FLOPs nor bytes known"));
    assert_int_equal(sim_model_kernel(&c.model, "elementwise", false)->fixed_ns, 3000);
    /* The host's gaps: none, so the submission costs are 0 (the host ops
     * hold the calls, as in a capture). */
    assert_ns(&c, "launch_ns", 0);
    /* sync: ended at 38000, the work it covered at 34000 */
    assert_ns(&c, "sync_ns", 4000);
    const sim_calib_param *h2d = param(&c, "h2d_gbps");
    assert_false(h2d->fitted);
    assert_true(h2d->value == base.h2d_gbps);
    assert_non_null(strstr(h2d->note, "no host-to-device copy"));
    assert_non_null(strstr(h2d->note, "h100-pcie"));
    /* Replay charges the means: 1000 + 15000 + 15000 + 3000 on the stream,
     * then the 4000 sync tail. */
    sim_replay_opts o = { .model = &c.model, .durations_recorded = false };
    sim_replay_result r;
    trace_reader rd;
    trace_reader_memory(&rd, t);
    assert_int_equal(sim_replay(&rd, &o, &r, &err), 0);
    assert_int_equal(r.makespan_ns, 1000 + 15000 + 15000 + 3000 + 4000);
    sim_calib_free(&c);
    trace_free(t);
}

/* Copies with byte counts (bytes=, as an import writes them) give one
 * latency and a bandwidth per direction, exactly for exact lines. */
static void test_calibrate_fits_latency_and_bandwidth_per_direction(void **state)
{
    (void)state;
    /* dur = 2000 + bytes / 10 (h2d) and 2000 + bytes / 5 (d2h) */
    trace *t = parse("syncsim-trace 1\n"
                     "queue h host\n"
                     "queue s stream device=0\n"
                     "buffer H size=1 host pinned\n"
                     "buffer D size=1 device=0\n"
                     "s copy up H[0:0] D[0:0] by=h t=0 dur=3000 bytes=10000\n"
                     "s copy up H[0:0] D[0:0] by=h t=3000 dur=12000 bytes=100000\n"
                     "s copy up H[0:0] D[0:0] by=h t=15000 dur=6000 bytes=40000\n"
                     "s copy down D[0:0] H[0:0] by=h t=21000 dur=4000 bytes=10000\n"
                     "s copy down D[0:0] H[0:0] by=h t=25000 dur=22000 bytes=100000\n");
    sim_model base;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie", &base, &err), 0);
    sim_calib c;
    assert_int_equal(sim_calibrate(t, &base, &c, &err), 0);
    assert_ns(&c, "copy_latency_ns", 2000);
    assert_bw(&c, "h2d_gbps", 10);
    assert_bw(&c, "d2h_gbps", 5);
    assert_true(param(&c, "h2d_gbps")->r2 > 0.9999);
    assert_false(param(&c, "p2p_gbps")->fitted);
    assert_non_null(strstr(param(&c, "p2p_gbps")->note, "no device-to-device"));
    sim_calib_free(&c);
    trace_free(t);
}

static void test_calibrate_refuses_a_trace_without_times(void **state)
{
    (void)state;
    trace *t = parse("syncsim-trace 1\nqueue h host\nqueue s stream device=0\n"
                     "s op k by=h\nh sync s\n");
    sim_model base;
    trace_error err = { 0 };
    assert_int_equal(sim_model_load("h100-pcie", &base, &err), 0);
    sim_calib c;
    assert_int_equal(sim_calibrate(t, &base, &c, &err), -1);
    assert_non_null(strstr(err.msg, "no statement has an observed time"));
    trace_free(t);
}

/* The one naming rule: op= wins, else the kernel's name. */
static void test_calibrate_families_of_kernel_names(void **state)
{
    (void)state;
    static const struct { const char *name, *family; } cases[] = {
        { "ampere_sgemm_128x64_nn", "gemm" },
        { "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>", "gemm" },
        { "flash_fwd_kernel", "attention" },
        { "void at::native::(anonymous namespace)::softmax_warp_forward", "softmax" },
        { "void at::native::vectorized_layer_norm_kernel", "norm" },
        { "implicit_convolve_sgemm", "conv" },
        { "cudnn::winograd_nonfused::winogradForwardData4x4", "conv" },
        { "void at::native::reduce_kernel<512, 1>", "reduce" },
        { "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add>",
          "elementwise" },
        { "Memset (Device)", "memset" },
        { "CatArrayBatchedCopy", "copy" },
        { "my_kernel", "other" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(sim_kernel_family(cases[i].name), cases[i].family) != 0)
            fail_msg("'%s': family %s, expected %s", cases[i].name,
                     sim_kernel_family(cases[i].name), cases[i].family);
    trace *t = parse("syncsim-trace 1\nqueue h host\n"
                     "h op l0.up op=mul_mat flops=10\n"
                     "h op gemm_but_named\n"
                     "h op gemm_badly_named op=no/family\n");
    trace_stmt s;
    trace_stmt_at(t, 0, &s);
    assert_string_equal(sim_op_family(t, &s), "mul_mat");
    trace_stmt_at(t, 1, &s);
    assert_string_equal(sim_op_family(t, &s), "gemm");
    trace_stmt_at(t, 2, &s);     /* an op= that names no family: the name decides */
    assert_string_equal(sim_op_family(t, &s), "gemm");
    trace_free(t);
}

/* [kernels] lines: written and read back; bad ones named by file and line. */
static void test_calibrate_kernels_section_reads_writes_and_refuses(void **state)
{
    fixture *f = *state;
    sim_model m, back;
    known_model(&m);
    m.kernels[0] = (sim_kernel_rate){ .family = "mul_mat", .fixed_ns = 2000, .gflops = 150,
                                      .gflops_f16 = 300, .gbps = 900 };
    m.kernels[1] = (sim_kernel_rate){ .family = "host.gemm", .fixed_ns = 7 };
    m.n_kernels = 2;
    char path[256];
    write_model(f, "k.dev", &m, path, sizeof path);
    trace_error err = { 0 };
    assert_int_equal(sim_model_load(path, &back, &err), 0);
    assert_int_equal(back.n_kernels, 2);
    const sim_kernel_rate *k = sim_model_kernel(&back, "mul_mat", false);
    assert_non_null(k);
    assert_int_equal(k->fixed_ns, 2000);
    assert_true(k->gflops == 150 && k->gflops_f16 == 300 && k->gbps == 900);
    assert_int_equal(sim_model_kernel(&back, "gemm", true)->fixed_ns, 7);
    assert_null(sim_model_kernel(&back, "gemm", false));
    assert_int_equal(back.launch_ns, m.launch_ns);
    /* 2000 + 3000 / 150 + 6000 / 300 + 9000 / 900 */
    assert_int_equal(sim_cost_kernel(&back, "mul_mat", false, 3000, 6000, 9000, -1), 2050);
    /* a fixed cost named by the op wins over the family */
    assert_int_equal(sim_cost_kernel(&back, "mul_mat", false, 3000, 6000, 9000, 5),
                     sim_cost_op(&back, false, 3000, 6000, 9000, 5));
    static const struct { const char *line, *says; } bad[] = {
        { "mul_mat = fast\n", "expected FIXED_NS" },
        { "mul_mat = 10 5\n", "expected FIXED_NS" },
        { "mul_mat = 10 5 tflops\n", "expected FIXED_NS" },
        { "mul_mat = 10 5 gbps 6 gbps\n", "each unit once" },
        { "mul_mat = 10\nmul_mat = 20\n", "given twice" },
        { "bad name = 10\n", "kernel family name" },
    };
    const char *base = "[machine]\ngpus = 1\n[host]\nlaunch_ns = 1\n";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "%s[kernels]\n%s", base, bad[i].line);
        sim_model x;
        assert_int_equal(sim_model_parse("x.dev", text, &x, &err), -1);
        if (!strstr(err.msg, bad[i].says) || !strstr(err.msg, "x.dev:"))
            fail_msg("'%s': %s", bad[i].line, err.msg);
    }
}

/* The command: a table, a file `replay --devices` loads, a validation on
 * another run, and the errors of bad input (exit 2, nothing written). */
static void test_calibrate_command_writes_a_model_replay_loads(void **state)
{
    fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s run --model " SMALL_LLAMA " --devices h100-sxm --tokens 2 "
                               "--prompt 16 -o a.db >/dev/null && "
                               "%s run --model " SMALL_LLAMA " --devices h100-sxm --tokens 4 "
                               "--prompt 32 --policy full -o a.db >/dev/null",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s calibrate a.db --run 1 -o fit.dev --validate a.db --run 2",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "base h100-sxm: the run's device model"));
    assert_non_null(strstr(out, "launch_ns"));
    assert_non_null(strstr(out, "itself: a.db run 1"));
    assert_non_null(strstr(out, "validate: a.db run 2"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'fitted' fit.dev && grep -q "
                               "'^mul_mat = ' fit.dev && %s replay a.db --run 2 --devices "
                               "./fit.dev --durations model", SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s calibrate a.db --json -o j.dev",
                               SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "\"parameters\": ["));
    assert_non_null(strstr(out, "\"role\": \"self\""));
    /* bad input: one line, exit 2, no file */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s calibrate a.db", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "-o FILE.dev is required"));
    assert_int_equal(tmpdir_write(f, "untimed.trace", "syncsim-trace 1\nqueue h host\n"
                                                      "h op x\n"), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s calibrate untimed.trace -o u.dev 2>&1; "
                               "test ! -e u.dev", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "no statement has an observed time"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s calibrate a.db -o v.dev --validate "
                               "nothere.trace 2>&1; test ! -e v.dev", SYNCSIM_BINARY), 0);
    assert_non_null(strstr(out, "nothere.trace"));
}

/* A real run's devices are no device model: replay says what to do, and
 * the model calibrate fits to the run replays it. */
static void test_calibrate_replay_of_a_real_run_says_to_calibrate(void **state)
{
    fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s run --model " SMALL_LLAMA " --devices cpustream:1,cpu "
                               "--threads 1 --tokens 1 --prompt 16 -o real.db >/dev/null",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s replay real.db", SYNCSIM_BINARY), 2);
    assert_non_null(strstr(out, "devices 'cpustream:1,cpu', which are no device model"));
    assert_non_null(strstr(out, "syncsim calibrate real.db --run 1 -o my.dev"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s calibrate real.db -o my.dev && "
                               "%s replay real.db --devices ./my.dev --durations model",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_non_null(strstr(out, "are no device model; --base names another"));
    assert_non_null(strstr(out, "makespan:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_calibrate_recovers_the_model_a_run_was_simulated_on,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test(test_calibrate_prices_kernels_of_unknown_size_by_their_mean),
        cmocka_unit_test(test_calibrate_fits_latency_and_bandwidth_per_direction),
        cmocka_unit_test(test_calibrate_refuses_a_trace_without_times),
        cmocka_unit_test(test_calibrate_families_of_kernel_names),
        cmocka_unit_test_setup_teardown(test_calibrate_kernels_section_reads_writes_and_refuses,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_calibrate_command_writes_a_model_replay_loads,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_calibrate_replay_of_a_real_run_says_to_calibrate,
                                        tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
