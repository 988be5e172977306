/*
 * family.c -- `run --devices MODEL[:gpus=N]`: the simulated machine.
 *
 * The family claims a spec item that names a shipped device model
 * (sim_devices_dir) or a .dev file, and opens a world of it: its backends
 * run on the engine and report simulated times, so the recording holds
 * statements until they are timed (every time is known before the run
 * ends) and needs no lock (one thread). The program's own host code costs
 * what the cost model says (sim_world_host_work); outputs are read as
 * llama.cpp reads them. A run's result adds the bytes each link moved and
 * each device's utilisation.
 *
 * The GPUs of a device model are of one ggml backend family (the family
 * table, sched/family.c: how it places and blocks split-input copies):
 * cuda, as every shipped model is an NVIDIA GPU, or the one the spec
 * names (`h100-pcie,backend=vulkan`).
 */
#include "sim_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct sim_machine {
    sim_model m;
    sim_world *w;
    const sched_copy_traits *gpu_family;
} sim_machine;

static bool models_claim(const sched_family *f, const char *word)
{
    (void)f;
    return sim_model_exists(word);
}

static void models_list(const sched_family *f, char *buf, size_t cap)
{
    (void)f;
    sim_models_list(buf, cap);
}

/* The model of a spec: one item, MODEL[:gpus=N][,backend=FAMILY]. */
static int load(const sched_spec *spec, sim_model *m, const sched_copy_traits **family,
                trace_error *err)
{
    if (spec->n_items != 1)
        return trace_error_set(err, TRACE_EUSAGE, "devices '%s': one device model per run, not "
                               "%d items", spec->text, spec->n_items), -1;
    const sched_spec_item *it = &spec->item[0];
    *family = sched_copy_family("cuda");
    for (int i = 0; i < it->n_opt; i++) {
        if (strcmp(it->opt[i].key, "backend") != 0)
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': unknown option '%s' for a "
                                   "device model (expected MODEL[:gpus=N][,backend=FAMILY])",
                                   spec->text, it->opt[i].key), -1;
        *family = sched_copy_family(it->opt[i].value);
        if (!*family || strcmp(it->opt[i].value, "cpu") == 0)
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': backend '%s' is not a GPU "
                                   "backend family (expected cuda, vulkan, sycl or metal)",
                                   spec->text, it->opt[i].value), -1;
    }
    char model[256];
    snprintf(model, sizeof model, "%s%s%s", it->word, it->arg[0] ? ":" : "", it->arg);
    if (sim_model_load(model, m, err) != 0)
        return -1;
    /* Messages name the spec the user gave. */
    return 0;
}

static void help_barrier(char *buf, size_t cap)
{
    snprintf(buf, cap, "the cpu pool's barrier, %s (simulated: priced from the device model's "
             "spin_barrier_ns, oversub_barrier_ns and futex_wake_ns; default spin)",
             sched_barrier_names());
}

static void help_threads(char *buf, size_t cap)
{
    snprintf(buf, cap, "cpu pool threads, 1 to 256 (simulated: the device model's cpu_threads)");
}

static const sched_option models_options[] = {
    { "barrier", "NAME", help_barrier },
    { "threads", "N", help_threads },
    { NULL, NULL, NULL },
};

/* The run's machine options into m; 0, or -1 with err. */
static int apply_options(const sched_run_opts *o, sim_model *m, trace_error *err)
{
    for (int i = 0; o && i < o->n_options; i++) {
        const char *name = o->options[i].name, *v = o->options[i].value;
        if (strcmp(name, "barrier") == 0) {
            int k = sched_barrier_parse(v);
            if (k < 0)
                return trace_error_set(err, TRACE_EUSAGE, "unknown barrier '%s' (expected %s)", v,
                                       sched_barrier_names()), -1;
            m->pool_barrier = k;
        } else if (strcmp(name, "threads") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 1 || n > 256)
                return trace_error_set(err, TRACE_EUSAGE, "--threads expects 1 to 256, got '%s'",
                                       v), -1;
            m->cpu_threads = (int)n;
        }
    }
    return 0;
}

static int models_check(const sched_family *f, const sched_spec *spec, const sched_run_opts *o,
                        sched_machine_info *info, trace_error *err)
{
    (void)f;
    sim_model m;
    const sched_copy_traits *family;
    if (load(spec, &m, &family, err) != 0 || apply_options(o, &m, err) != 0)
        return -1;
    info->n_devices = m.gpus;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The machine.                                                        */

static int64_t m_now(void *ctx) { return sim_world_now(((sim_machine *)ctx)->w); }

static int m_backends(void *ctx, sched_backend ***out)
{
    return sim_world_backends(((sim_machine *)ctx)->w, out);
}

static void m_host_work(void *ctx, int64_t overhead_ns, uint64_t bytes)
{
    sim_world_host_work(((sim_machine *)ctx)->w, overhead_ns, bytes);
}

static const sched_copy_traits *m_copy_traits(void *ctx, int backend)
{
    sim_machine *sm = ctx;
    return backend < sm->m.gpus ? sm->gpu_family : sched_copy_family("cpu");
}

static int m_finish(void *ctx) { return sim_world_finish(((sim_machine *)ctx)->w); }

static const char *m_error(void *ctx)
{
    return sim_world_hung(((sim_machine *)ctx)->w)
               ? "the schedule hangs: the simulated host waits for work that can never complete"
               : NULL;
}

static void m_meta(void *ctx, sched_sink *sink)
{
    sim_machine *sm = ctx;
    if (sink->iface->meta)
        sink->iface->meta(sink->ctx, "devices", sm->m.name);
    if (sink->iface->meta)
        sink->iface->meta(sink->ctx, "backend_family", sm->gpu_family->family);
}

static void m_describe(void *ctx, char *buf, size_t cap)
{
    sim_machine *sm = ctx;
    bool cuda = strcmp(sm->gpu_family->family, "cuda") == 0;
    snprintf(buf, cap, "%s (%d %s%s%s + CPU)", sm->m.name, sm->m.gpus, cuda ? "" : sm->gpu_family->family,
             cuda ? "" : " ", sm->m.gpus == 1 ? "GPU" : "GPUs");
}

static void human_bytes(uint64_t b, char *buf, size_t cap)
{
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, cap, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= 1024)
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024);
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
}

static int m_report(void *ctx, FILE *out, const char *db)
{
    (void)db;
    sim_machine *sm = ctx;
    const sim_stats *st = sim_world_stats(sm->w);
    fprintf(out, "bytes per link:");
    int shown = 0;
    for (int l = 0; l < st->n_links; l++) {
        if (!st->link_bytes[l])
            continue;
        char hb[32];
        human_bytes(st->link_bytes[l], hb, sizeof hb);
        fprintf(out, "%s %s %s", shown++ ? "," : "", sim_world_link_name(sm->w, l), hb);
    }
    fprintf(out, "%s\n", shown ? "" : " none");
    double span = st->end_ns > 0 ? (double)st->end_ns : 1;
    fprintf(out, "utilisation over %.3f ms: host %.1f%%", span / 1e6,
            100.0 * (double)st->host_busy_ns / span);
    for (int d = 0; d < sm->m.gpus && d < 16; d++)
        fprintf(out, ", gpu%d %.1f%% (compute %.1f%%)", d, 100.0 * (double)st->gpu_busy_ns[d] / span,
                100.0 * (double)st->gpu_compute_ns[d] / span);
    fprintf(out, "\n");
    return 0;
}

static void m_free(void *ctx)
{
    sim_machine *sm = ctx;
    sim_world_free(sm->w);
    free(sm);
}

static const sched_machine_iface machine_iface = {
    .clock = "simulated",
    .hold = true,
    .threaded = false,
    .now = m_now,
    .backends = m_backends,
    .host_work = m_host_work,
    .copy_traits = m_copy_traits,
    .finish = m_finish,
    .error = m_error,
    .meta = m_meta,
    .describe = m_describe,
    .report = m_report,
    .free = m_free,
};

static int models_open(const sched_family *f, const sched_spec *spec, const sched_run_opts *o,
                       sched_machine *out, trace_error *err)
{
    (void)f;
    sim_machine *sm = calloc(1, sizeof *sm);
    if (!sm)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    if (load(spec, &sm->m, &sm->gpu_family, err) != 0 || apply_options(o, &sm->m, err) != 0) {
        free(sm);
        return -1;
    }
    sm->w = sim_world_new(&sm->m);
    if (!sm->w) {
        free(sm);
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    }
    *out = (sched_machine){ &machine_iface, sm };
    return 0;
}

static const sched_family_iface models_iface = {
    .name = "device model",
    .syntax = "MODEL[:gpus=N]",
    .summary = "a simulated machine: GPUs, links and host costs from a device model; "
               "option after it: backend=cuda|vulkan|sycl|metal, the ggml backend family that "
               "decides how split inputs are copied (default cuda)",
    .machine = "simulated",
    .source = "sim",
    .default_spec = "h100-pcie",
    .claims = models_claim,
    .list = models_list,
    .check = models_check,
    .open = models_open,
    .options = models_options,
};

const sched_family sim_family = { &models_iface, NULL };

const sim_world *sim_machine_world(const sched_machine *m)
{
    return m && m->iface == &machine_iface ? ((const sim_machine *)m->ctx)->w : NULL;
}
