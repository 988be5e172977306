/*
 * cmd_calibrate.c -- `syncsim calibrate`: fit a device model file to a
 * recorded run (sim/calibrate.c) and say how well it replays.
 */
#include "cli.h"
#include "sim/sim.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cmd_calibrate_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim calibrate TRACE|DB [--run N] [--base MODEL] -o FILE.dev\n"
            "                         [--validate OTHER [--run M]] [--json]\n"
            "\n"
            "Fits a device model to the observed times of a run: a real run (`syncsim run\n"
            "--devices cpustream:2,cpu`), a simulated one, or an imported capture (Nsight\n"
            "Systems, PyTorch profiler). It measures what the trace shows and keeps every\n"
            "other number of a base model, so the file is complete and loads with\n"
            "`--devices ./FILE.dev`:\n"
            "  launch_ns, api_call_ns, event_record_ns  host time per submission (least\n"
            "                   squares over the gaps between timed host statements)\n"
            "  sync_ns, event_sync_ns, event_wait_device_ns  what a sync or wait takes\n"
            "                   after the work it waited for ended (mean)\n"
            "  copy_latency_ns, h2d_gbps, d2h_gbps, p2p_gbps  dur = latency + bytes / bw over\n"
            "                   the copies with a byte count; host_copy_ns beyond that\n"
            "  [kernels]        per kernel family (the op kind of a syncsim run; for a\n"
            "                   capture gemm, conv, attention, softmax, norm, reduce,\n"
            "                   elementwise, copy, memset, other from the kernel's name):\n"
            "                   fixed + FLOPs / rate, or + bytes / rate, or, where neither\n"
            "                   is known, the mean time per op\n"
            "It prints each number with its samples and fit (R2 of a fitted line, RMS\n"
            "residual), writes FILE.dev commented with where each number came from, and\n"
            "replays the run (and OTHER, with --validate) with --durations model under the\n"
            "fitted model: the makespan error and the median start-time error.\n"
            "\n"
            "Exit status: 0 done, 2 bad input (nothing written).\n"
            "\n"
            "  --run N          run of a database (default: the latest); after --validate,\n"
            "                   the run of OTHER\n"
            "  --base MODEL     where the numbers not measured come from (default: the run's\n"
            "                   device model, else h100-pcie)\n"
            "  -o FILE          the device model file to write (required)\n"
            "  --validate OTHER replay another trace of the same machine with the fitted model\n"
            "  -j, --json       one JSON object on standard output instead of the table\n"
            "\n"
            "Examples:\n"
            "  syncsim run --model llama:n_layer=2,n_embd=128 --devices cpustream:2,cpu --tokens 8 \\\n"
            "              --prompt 16 -o cpu.db\n"
            "  syncsim run --model llama:n_layer=2,n_embd=128 --devices cpustream:2,cpu --tokens 8 \\\n"
            "              --prompt 32 --policy full -o cpu.db\n"
            "  syncsim calibrate cpu.db --run 1 -o cpu.dev --validate cpu.db --run 2\n"
            "  syncsim replay cpu.db --run 2 --devices ./cpu.dev --durations model\n");
}

/* A replay of path with the fitted model; what it printed goes in res. */
typedef struct validation {
    const char *path;
    int64_t run;                    /* 0: not a database */
    sim_replay_result res;          /* --durations model */
    /* Ops, copies and collectives priced by the model, and the same with
     * their recorded durations: [0] on streams (the device's work), [1] on
     * host queues (the CPU backend's ops; a capture's host code). */
    int64_t work_model_ns[2], work_recorded_ns[2];
    double unshown_ns;              /* host time between statements no submission explains */
} validation;

static void work_of(const trace *t, const sim_replay_result *r, int64_t *w)
{
    w[0] = w[1] = 0;
    for (uint32_t q = 0; q < r->n_queues && q < t->n_queues; q++)
        w[t->queues[q].kind == TRACE_QUEUE_HOST] += r->busy_ns[q];
}

/* Replays t with --durations model under m, and with its recorded
 * durations for the work they price. */
static int replay_model(trace *t, const sim_model *m, validation *v, trace_error *err)
{
    trace_reader r;
    trace_reader_memory(&r, t);
    sim_replay_opts o = { .model = m, .durations_recorded = false };
    if (sim_replay(&r, &o, &v->res, err) != 0)
        return -1;
    sim_replay_result rec;
    trace_reader_memory(&r, t);
    o.durations_recorded = true;
    if (sim_replay(&r, &o, &rec, err) != 0)
        return -1;
    work_of(t, &v->res, v->work_model_ns);
    work_of(t, &rec, v->work_recorded_ns);
    v->unshown_ns = sim_calib_host_unpriced(t, m, err);
    return v->unshown_ns < 0 ? -1 : 0;
}

static double error_pct(const sim_replay_result *r)
{
    if (r->recorded_makespan_ns <= 0)
        return NAN;
    return 100.0 * ((double)r->makespan_ns - (double)r->recorded_makespan_ns) /
           (double)r->recorded_makespan_ns;
}

/* Loads path (run of a database) whole; prints the error and returns NULL. */
static trace *load(const char *path, int64_t *run)
{
    trace_source src;
    trace_source_opts so = { .run = *run };
    if (cli_open("calibrate", path, &so, &src) != 0)
        return NULL;
    *run = src.store ? src.run : 0;
    trace *t = NULL;
    trace_error err = { 0 };
    int rc = trace_source_load(&src, &t, &err);
    trace_source_close(&src);
    if (rc != 0) {
        cli_error("calibrate", "%s", err.msg);
        return NULL;
    }
    return t;
}

static const char *param_note(void *ctx, const char *key)
{
    const sim_calib *c = ctx;
    const sim_calib_param *p = sim_calib_find(c, key);
    return p ? p->note : NULL;
}

static void print_value(FILE *out, const sim_calib_param *p)
{
    if (p->family) {
        const sim_kernel_rate *k = &p->rate;
        fprintf(out, "%lld ns", (long long)k->fixed_ns);
        if (k->gflops > 0)
            fprintf(out, " + F/%.4g GF/s", k->gflops);
        if (k->gflops_f16 > 0)
            fprintf(out, " + F16/%.4g GF/s", k->gflops_f16);
        if (k->gbps > 0)
            fprintf(out, " + B/%.4g GB/s", k->gbps);
        if (!(k->gflops > 0 || k->gflops_f16 > 0 || k->gbps > 0))
            fprintf(out, " per op");
    } else if (!strcmp(p->unit, "ns"))
        fprintf(out, "%.0f %s", p->value, p->unit);
    else
        fprintf(out, "%.4g %s", p->value, p->unit);
}

static void print_table(const char *path, int64_t run, const sim_model *base, const char *base_why,
                        const sim_calib *c, const validation *v, int n_v, const char *output)
{
    printf("calibrate %s", path);
    if (run)
        printf(" run %lld", (long long)run);
    printf(" (base %s: %s)\n\n", base->name, base_why);
    printf("%-24s %-40s %8s %8s %12s  %s\n", "parameter", "value", "samples", "R2", "RMS resid",
           "source");
    for (uint32_t i = 0; i < c->n_params; i++) {
        const sim_calib_param *p = &c->params[i];
        char val[96], r2[16] = "-", rms[24] = "-", n[24] = "-";
        FILE *m = fmemopen(val, sizeof val, "w");
        if (m) {
            print_value(m, p);
            fclose(m);
        }
        if (p->fitted) {
            snprintf(n, sizeof n, "%llu", (unsigned long long)p->samples);
            if (!isnan(p->r2))
                snprintf(r2, sizeof r2, "%.4f", p->r2);
            if (!isnan(p->rms_ns))
                snprintf(rms, sizeof rms, "%.0f ns", p->rms_ns);
        }
        const char *src = p->info ? p->note : p->fitted ? "fitted" : p->note;
        const char *semi = p->fitted && !p->info ? strchr(p->note, ';') : NULL;
        printf("%-24s %-40s %8s %8s %12s  %s%s\n", p->key, val, n, r2, rms, src,
               semi ? semi : "");
    }
    printf("\nreplay with --durations model under the fitted model:\n");
    for (int i = 0; i < n_v; i++) {
        const sim_replay_result *r = &v[i].res;
        printf("  %s%s", i == 0 ? "itself: " : "validate: ", v[i].path);
        if (v[i].run)
            printf(" run %lld", (long long)v[i].run);
        printf(": makespan %.3f ms", (double)r->makespan_ns / 1e6);
        if (r->recorded_makespan_ns > 0)
            printf(" (recorded %.3f ms, %+.2f%%)", (double)r->recorded_makespan_ns / 1e6,
                   error_pct(r));
        if (r->median_start_error_ns >= 0)
            printf(", median start error %.3f ms over %llu statements",
                   (double)r->median_start_error_ns / 1e6, (unsigned long long)r->n_start_compared);
        if (v[i].unshown_ns > 0 && r->recorded_makespan_ns > 0)
            printf("\n      host time between statements that no submission explains: %.3f ms; "
                   "added to the makespan: %+.2f%%", v[i].unshown_ns / 1e6,
                   100.0 * ((double)r->makespan_ns + v[i].unshown_ns -
                            (double)r->recorded_makespan_ns) / (double)r->recorded_makespan_ns);
        static const char *const where[2] = { "device work (stream ops, copies)",
                                              "host ops" };
        for (int k = 0; k < 2; k++) {
            if (!v[i].work_recorded_ns[k] && !v[i].work_model_ns[k])
                continue;
            printf("\n      %s: priced %.3f ms, recorded %.3f ms", where[k],
                   (double)v[i].work_model_ns[k] / 1e6, (double)v[i].work_recorded_ns[k] / 1e6);
            if (v[i].work_recorded_ns[k] > 0)
                printf(" (%+.2f%%)", 100.0 * (double)(v[i].work_model_ns[k] -
                                                     v[i].work_recorded_ns[k]) /
                                         (double)v[i].work_recorded_ns[k]);
        }
        printf("\n");
    }
    printf("written %s (use: --devices %s%s)\n", output, strchr(output, '/') ? "" : "./", output);
}

static void json_num(FILE *out, double v)
{
    if (isnan(v) || isinf(v))
        fprintf(out, "null");
    else
        fprintf(out, "%.9g", v);
}

static void print_json(const char *path, int64_t run, const sim_model *base, const sim_calib *c,
                       const validation *v, int n_v, const char *output)
{
    printf("{\"trace\": ");
    trace_json_str(stdout, path);
    printf(", \"run\": %lld, \"base\": ", (long long)run);
    trace_json_str(stdout, base->name);
    printf(", \"output\": ");
    trace_json_str(stdout, output);
    printf(", \"parameters\": [");
    for (uint32_t i = 0; i < c->n_params; i++) {
        const sim_calib_param *p = &c->params[i];
        printf("%s\n  {\"key\": ", i ? "," : "");
        trace_json_str(stdout, p->key);
        printf(", \"kind\": \"%s\", \"value\": ",
               p->family ? "kernel-family" : p->info ? "info" : "key");
        json_num(stdout, p->value);
        printf(", \"unit\": ");
        trace_json_str(stdout, p->unit);
        if (p->family) {
            printf(", \"fixed_ns\": %lld, \"gflops\": ", (long long)p->rate.fixed_ns);
            json_num(stdout, p->rate.gflops);
            printf(", \"gflops_f16\": ");
            json_num(stdout, p->rate.gflops_f16);
            printf(", \"gbps\": ");
            json_num(stdout, p->rate.gbps);
        }
        printf(", \"fitted\": %s, \"samples\": %llu, \"r2\": ", p->fitted ? "true" : "false",
               (unsigned long long)p->samples);
        json_num(stdout, p->r2);
        printf(", \"rms_ns\": ");
        json_num(stdout, p->rms_ns);
        printf(", \"note\": ");
        trace_json_str(stdout, p->note);
        printf("}");
    }
    printf("],\n \"host_gaps_left_out\": %llu,\n \"replays\": [",
           (unsigned long long)c->gaps_left_out);
    for (int i = 0; i < n_v; i++) {
        const sim_replay_result *r = &v[i].res;
        printf("%s\n  {\"role\": \"%s\", \"trace\": ", i ? "," : "", i ? "validate" : "self");
        trace_json_str(stdout, v[i].path);
        printf(", \"run\": %lld, \"makespan_ns\": %lld, \"recorded_makespan_ns\": %lld, "
               "\"makespan_error_pct\": ", (long long)v[i].run, (long long)r->makespan_ns,
               (long long)r->recorded_makespan_ns);
        json_num(stdout, error_pct(r));
        printf(", \"median_start_error_ns\": %lld, \"start_compared\": %llu, "
               "\"device_work_model_ns\": %lld, \"device_work_recorded_ns\": %lld, "
               "\"host_work_model_ns\": %lld, \"host_work_recorded_ns\": %lld, "
               "\"host_unshown_ns\": %.0f}",
               (long long)r->median_start_error_ns, (unsigned long long)r->n_start_compared,
               (long long)v[i].work_model_ns[0], (long long)v[i].work_recorded_ns[0],
               (long long)v[i].work_model_ns[1], (long long)v[i].work_recorded_ns[1],
               v[i].unshown_ns);
    }
    printf("]}\n");
}

int cmd_calibrate(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },      { "base", required_argument, NULL, 'b' },
        { "output", required_argument, NULL, 'o' },   { "validate", required_argument, NULL, 'v' },
        { "json", no_argument, NULL, 'j' },           { NULL, 0, NULL, 0 },
    };
    const char *base_spec = NULL, *output = NULL, *other = NULL;
    int64_t run = 0, vrun = 0;
    bool json = false;
    unsigned long long n;
    int c;
    while ((c = cli_getopt("calibrate", argc, argv, "o:j", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("calibrate", optarg, &n) != 0)
                return 2;
            *(other ? &vrun : &run) = (int64_t)n;
            break;
        case 'b': base_spec = optarg; break;
        case 'o': output = optarg; break;
        case 'v': other = optarg; break;
        case 'j': json = true; break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *path = cli_trace_arg("calibrate", argc, argv, optind);
    if (!path)
        return 2;
    if (!output)
        return cli_usage_error("calibrate", "-o FILE.dev is required: where the fitted device "
                               "model goes");
    if (cli_output_check("calibrate", output, path) != 0 ||
        (other && cli_output_check("calibrate", output, other) != 0))
        return 2;
    trace *t = load(path, &run);
    if (!t)
        return 2;
    trace_error err = { 0 };
    /* The base: given, else the run's own model, else h100-pcie. */
    sim_model base;
    char base_why[192];
    const char *run_devices = trace_get_meta(t, "devices");
    if (base_spec) {
        snprintf(base_why, sizeof base_why, "--base");
        if (sim_model_load(base_spec, &base, &err) != 0) {
            trace_free(t);
            return cli_error("calibrate", "--base: %s", err.msg);
        }
    } else if (run_devices && sim_model_load(run_devices, &base, &err) == 0) {
        snprintf(base_why, sizeof base_why, "the run's device model");
    } else {
        if (run_devices)
            snprintf(base_why, sizeof base_why, "the run's devices '%.120s' are no device model; "
                     "--base names another", run_devices);
        else
            snprintf(base_why, sizeof base_why, "the default; --base names another");
        if (sim_model_load("h100-pcie", &base, &err) != 0) {
            trace_free(t);
            return cli_error("calibrate", "%s", err.msg);
        }
    }
    sim_calib cal;
    if (sim_calibrate(t, &base, &cal, &err) != 0) {
        trace_free(t);
        return cli_error("calibrate", "%s: %s", path, err.msg);
    }
    /* The name says what it was fitted to. */
    const char *slash = strrchr(path, '/');
    snprintf(cal.model.name, sizeof cal.model.name, "calibrated-%.40s", slash ? slash + 1 : path);
    validation v[2] = { { .path = path, .run = run } };
    int n_v = 1, status = 2;
    if (replay_model(t, &cal.model, &v[0], &err) != 0) {
        cli_error("calibrate", "%s: replaying it with the fitted model: %s", path, err.msg);
        goto done;
    }
    if (other) {
        trace *o = load(other, &vrun);
        if (!o)
            goto done;
        v[1] = (validation){ .path = other, .run = vrun };
        int rc = replay_model(o, &cal.model, &v[1], &err);
        trace_free(o);
        if (rc != 0) {
            cli_error("calibrate", "--validate %s: %s", other, err.msg);
            goto done;
        }
        n_v = 2;
    }
    char *tmp = NULL;
    FILE *f = cli_output_open("calibrate", output, &tmp);
    if (!f)
        goto done;
    char header[1024];
    int len = snprintf(header, sizeof header,
                       "Fitted by `syncsim calibrate` to %s%s%.0lld: measured numbers say\n"
                       "\"fitted\" with their samples and fit; the others come from %s (%s).\n",
                       path, run ? " run " : "", (long long)run, base.name, base_why);
    for (int i = 0; i < n_v && len < (int)sizeof header; i++) {
        double e = error_pct(&v[i].res);
        len += snprintf(header + len, sizeof header - (size_t)len,
                        "Replay of %s%s with --durations model: makespan %.3f ms, %s%.2f%% "
                        "against the recording.\n", i ? "the validation trace " : "it",
                        i ? v[i].path : "", (double)v[i].res.makespan_ns / 1e6,
                        isnan(e) ? "no recorded makespan, " : e >= 0 ? "+" : "", isnan(e) ? 0 : e);
    }
    if (len < (int)sizeof header)
        snprintf(header + len, sizeof header - (size_t)len,
                 "Units: _ns nanoseconds, _gbps GB/s, _tflops/_gflops 1e12/1e9 FLOP/s.\n"
                 "[kernels]: FAMILY = FIXED_NS [RATE gflops] [RATE gflops_f16] [RATE gbps]\n"
                 "(docs/device-model.md, \"Calibrating a device file\").");
    sim_model_write(f, &cal.model, header, param_note, &cal);
    if (cli_output_close("calibrate", f, output, tmp, !ferror(f)) != 0)
        goto done;
    /* Read back what was written: the file must load as a model. */
    sim_model back;
    if (sim_model_load(output, &back, &err) != 0) {
        remove(output);
        cli_error("calibrate", "the written model does not load (a bug): %s", err.msg);
        goto done;
    }
    if (json)
        print_json(path, run, &base, &cal, v, n_v, output);
    else
        print_table(path, run, &base, base_why, &cal, v, n_v, output);
    status = 0;
done:
    sim_calib_free(&cal);
    trace_free(t);
    return status;
}
