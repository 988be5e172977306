/*
 * device_model.c -- device model files: sim/devices/NAME.dev.
 *
 * A device model is the numbers of the cost model (cost.c, where the
 * formulas and their prose live): the host's API costs, the CPU, the
 * GPUs, the links and the collectives of one machine; the key table below
 * says what each number means.
 *
 * The file format: `[section]` headers, `key = value` lines, `#` comments.
 * Every key of every section is required; an unknown key, a missing key or
 * a value that is not a number is an error naming the file and place.
 *
 * One section is a table instead: [kernels] (optional, what `syncsim
 * calibrate` measures) prices whole kernel families, one line each,
 *     FAMILY = FIXED_NS [RATE gflops] [RATE gflops_f16] [RATE gbps]
 * an op of FAMILY (cost.c: sim_op_family; `host.FAMILY` for ops on a host
 * queue) costs FIXED_NS plus its FLOPs, f16 FLOPs and bytes each at its
 * rate (GFLOP/s, GB/s), the amounts without a rate left out (f16 FLOPs go
 * at gflops when gflops_f16 is not given). A family without a line is
 * priced by the roofline of [gpu] / [host].
 */
#include "sim.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SYNCSIM_DEVICES_DIR
#define SYNCSIM_DEVICES_DIR "sim/devices"
#endif

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Where the shipped device models are, first found of:
 *   1. $SYNCSIM_DATA_DIR/devices (the user's override);
 *   2. next to the binary: BINDIR/../share/syncsim/devices (an installed
 *      copy, cmake --install) or BINDIR/share/syncsim/devices (a build
 *      tree, which the build fills), so a moved clone or install works;
 *   3. the source tree the binary was built from.
 */
const char *sim_devices_dir(void)
{
    static char dir[PATH_MAX];
    sched_data_path("devices", SYNCSIM_DEVICES_DIR, dir, sizeof dir);
    return dir;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void sim_models_list(char *buf, size_t cap)
{
    buf[0] = '\0';
    DIR *d = opendir(sim_devices_dir());
    char *names[64];
    int n = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) && n < 64) {
            size_t len = strlen(e->d_name);
            if (len > 4 && strcmp(e->d_name + len - 4, ".dev") == 0 &&
                (names[n] = strndup(e->d_name, len - 4)))
                n++;
        }
        closedir(d);
    }
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (used < cap)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
        free(names[i]);
    }
    if (used < cap)
        snprintf(buf + used, cap - used, "%s%s, or a .dev file", n ? " in " : "none in ",
                 sim_devices_dir());
}

bool sim_model_exists(const char *name)
{
    if (strchr(name, '/') || (strlen(name) > 4 && strcmp(name + strlen(name) - 4, ".dev") == 0))
        return true;
    char path[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s.dev", sim_devices_dir(), name);
    return access(path, R_OK) == 0;
}

typedef enum { KEY_INT, KEY_I64, KEY_DOUBLE } key_type;

static const struct model_key {
    const char *section, *key;
    key_type type;
    size_t off;
    const char *meaning;
} model_keys[] = {
#define K(sec, name, type, what) { sec, #name, type, offsetof(sim_model, name), what }
    K("machine", gpus, KEY_INT, "number of GPUs"),
    K("host", launch_ns, KEY_I64, "host time to enqueue one kernel launch (ns)"),
    K("host", api_call_ns, KEY_I64, "host time of an async copy or other API call (ns)"),
    K("host", sync_ns, KEY_I64, "stream synchronize round trip after the stream drained (ns)"),
    K("host", event_record_ns, KEY_I64, "host time to record an event (ns)"),
    K("host", event_sync_ns, KEY_I64, "host time of an event wait after it completed (ns)"),
    K("host", host_copy_ns, KEY_I64, "fixed host cost of a blocking copy (ns)"),
    K("host", cpu_cores, KEY_INT, "CPU cores"),
    K("host", cpu_threads, KEY_INT, "threads of the CPU backend's pool"),
    K("host", cpu_gflops, KEY_DOUBLE, "CPU compute with all threads (GFLOP/s)"),
    K("host", cpu_mem_gbps, KEY_DOUBLE, "CPU memory bandwidth (GB/s)"),
    K("host", pause_ns, KEY_I64, "one pause instruction in a spin loop (ns)"),
    K("host", syscall_ns, KEY_I64, "a system call (ns)"),
    K("host", yield_ns, KEY_I64, "sched_yield (ns)"),
    K("host", futex_wake_ns, KEY_I64, "futex wake across cores (ns)"),
    K("host", spin_barrier_ns, KEY_I64, "spin barrier, threads <= cores (ns)"),
    K("host", oversub_barrier_ns, KEY_I64, "spin barrier, threads > cores (ns)"),
    K("gpu", gpu_tflops_f16, KEY_DOUBLE, "dense f16/bf16 compute (TFLOP/s)"),
    K("gpu", gpu_tflops_f32, KEY_DOUBLE, "dense f32 compute (TFLOP/s)"),
    K("gpu", gpu_mem_gbps, KEY_DOUBLE, "device memory bandwidth (GB/s)"),
    K("gpu", kernel_overhead_ns, KEY_I64, "device time of an empty kernel (ns)"),
    K("gpu", event_wait_device_ns, KEY_I64, "device time of an event wait (ns)"),
    K("link", h2d_gbps, KEY_DOUBLE, "pinned host to device bandwidth (GB/s)"),
    K("link", d2h_gbps, KEY_DOUBLE, "device to pinned host bandwidth (GB/s)"),
    K("link", p2p_gbps, KEY_DOUBLE, "device to device bandwidth, one way (GB/s)"),
    K("link", nvlink, KEY_INT, "1: devices are connected by NVLink, 0: peer copies cross PCIe"),
    K("link", copy_latency_ns, KEY_I64, "latency before a copy moves bytes (ns)"),
    K("collective", allreduce_base_ns, KEY_I64, "all-reduce base latency (ns)"),
    K("collective", allreduce_step_ns, KEY_I64, "all-reduce latency per step (ns)"),
    K("collective", ipc_barrier_ns, KEY_I64, "barrier of host processes, after the last arrives (ns)"),
    K("collective", kv_store_ns, KEY_I64, "key-value store put or get round trip (ns)"),
#undef K
};
#define N_KEYS (sizeof model_keys / sizeof model_keys[0])

const sim_kernel_rate *sim_model_kernel(const sim_model *m, const char *family, bool host)
{
    /* "host." FAMILY for host kernels; compared in place, as this runs for
     * every simulated kernel */
    for (int i = 0; i < m->n_kernels; i++) {
        const char *k = m->kernels[i].family;
        if (host ? strncmp(k, "host.", 5) == 0 && strcmp(k + 5, family) == 0
                 : strcmp(k, family) == 0)
            return &m->kernels[i];
    }
    return NULL;
}

bool sim_family_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= SIM_FAMILY_MAX - 5)     /* room for "host." in front */
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '.' && name[i] != '-')
            return false;
    return true;
}

/* One [kernels] line: "FAMILY" and "FIXED_NS [RATE UNIT]". */
static int parse_kernel(const char *name, unsigned line, unsigned col, const char *key,
                        char *val, unsigned vcol, sim_model *out, trace_error *err)
{
    if (!sim_family_name_ok(strncmp(key, "host.", 5) == 0 ? key + 5 : key))
        return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: expected a kernel family name "
                               "(letters, digits, _ . -; at most %d), got '%s'", name, line, col,
                               SIM_FAMILY_MAX - 6, key), -1;
    for (int i = 0; i < out->n_kernels; i++)
        if (strcmp(out->kernels[i].family, key) == 0)
            return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: kernel family '%s' given "
                                   "twice", name, line, col, key), -1;
    if (out->n_kernels == SIM_MAX_KERNELS)
        return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: more than %d kernel families",
                               name, line, col, SIM_MAX_KERNELS), -1;
    char *words[8];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(val, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
        words[n < 8 ? n : 7] = w, n++;
    sim_kernel_rate k = { .fixed_ns = 0 };
    snprintf(k.family, sizeof k.family, "%s", key);
    char *end = "";
    double fixed = n ? strtod(words[0], &end) : -1;
    bool good = n % 2 == 1 && n <= 7 && !*end && fixed >= 0 && fixed < 1e15 &&
                fixed == (double)(int64_t)fixed;
    for (int w = 1; good && w + 1 < n; w += 2) {
        errno = 0;
        double rate = strtod(words[w], &end);
        double *field = !strcmp(words[w + 1], "gflops")       ? &k.gflops
                        : !strcmp(words[w + 1], "gflops_f16") ? &k.gflops_f16
                        : !strcmp(words[w + 1], "gbps")       ? &k.gbps
                                                              : NULL;
        good = !*end && !errno && rate > 0 && field && *field == 0;
        if (good)
            *field = rate;
    }
    if (!good)
        return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: expected FIXED_NS [RATE gflops] "
                               "[RATE gflops_f16] [RATE gbps] for kernel family '%s' (a "
                               "non-negative integer, then positive rates, each unit once)",
                               name, line, vcol, key), -1;
    k.fixed_ns = (int64_t)fixed;
    out->kernels[out->n_kernels++] = k;
    return 0;
}

int sim_model_parse(const char *name, const char *text, sim_model *out, trace_error *err)
{
    memset(out, 0, sizeof *out);
    bool seen[N_KEYS] = { false };
    char section[32] = "";
    unsigned line = 0;
    const char *p = text;
    while (*p) {
        line++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char buf[512];
        if (len >= sizeof buf)
            return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:1: line too long", name, line), -1;
        memcpy(buf, p, len);
        buf[len] = '\0';
        p = eol ? eol + 1 : p + len;
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *s = buf;
        while (isspace((unsigned char)*s))
            s++;
        size_t n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1]))
            s[--n] = '\0';
        if (!*s)
            continue;
        unsigned col = (unsigned)(s - buf) + 1;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close || close[1] || close - s - 1 >= (long)sizeof section || close == s + 1)
                return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: expected [section]", name,
                                       line, col), -1;
            memcpy(section, s + 1, (size_t)(close - s - 1));
            section[close - s - 1] = '\0';
            bool known = !strcmp(section, "kernels");
            for (size_t k = 0; k < N_KEYS; k++)
                known |= strcmp(model_keys[k].section, section) == 0;
            if (!known)
                return trace_error_set(err, TRACE_ESYNTAX,
                                       "%s:%u:%u: unknown section [%s] (expected machine, host, "
                                       "gpu, link, collective or kernels)", name, line, col, section), -1;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq)
            return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: expected key = value", name,
                                   line, col), -1;
        char *kend = eq;
        while (kend > s && isspace((unsigned char)kend[-1]))
            kend--;
        *kend = '\0';
        char *val = eq + 1;
        while (isspace((unsigned char)*val))
            val++;
        unsigned vcol = (unsigned)(val - buf) + 1;
        if (!strcmp(section, "kernels")) {
            if (parse_kernel(name, line, col, s, val, vcol, out, err) != 0)
                return -1;
            continue;
        }
        if (!strcmp(s, "name") && !strcmp(section, "machine")) {
            snprintf(out->name, sizeof out->name, "%s", val);
            continue;
        }
        size_t k;
        for (k = 0; k < N_KEYS; k++)
            if (!strcmp(model_keys[k].section, section) && !strcmp(model_keys[k].key, s))
                break;
        if (k == N_KEYS)
            return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: unknown key '%s' in [%s]", name,
                                   line, col, s, section[0] ? section : "no section"), -1;
        if (seen[k])
            return trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: key '%s' given twice", name,
                                   line, col, s), -1;
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (!*val || *end || errno || d < 0 ||
            (model_keys[k].type != KEY_DOUBLE && d != (double)(int64_t)d))
            return trace_error_set(err, TRACE_ESYNTAX,
                                   "%s:%u:%u: expected a non-negative %s for '%s' (%s), got '%s'",
                                   name, line, vcol,
                                   model_keys[k].type == KEY_DOUBLE ? "number" : "integer", s,
                                   model_keys[k].meaning, val), -1;
        char *field = (char *)out + model_keys[k].off;
        if (model_keys[k].type == KEY_INT)
            *(int *)field = (int)d;
        else if (model_keys[k].type == KEY_I64)
            *(int64_t *)field = (int64_t)d;
        else
            *(double *)field = d;
        seen[k] = true;
    }
    for (size_t k = 0; k < N_KEYS; k++)
        if (!seen[k])
            return trace_error_set(err, TRACE_ESYNTAX, "%s: missing key '%s' in [%s] (%s)", name,
                                   model_keys[k].key, model_keys[k].section,
                                   model_keys[k].meaning), -1;
    if (out->gpus < 1 || out->gpus > 16)
        return trace_error_set(err, TRACE_ESYNTAX, "%s: gpus must be 1 to 16", name), -1;
    if (out->cpu_threads < 1 || out->cpu_cores < 1 || out->cpu_gflops <= 0 ||
        out->cpu_mem_gbps <= 0 || out->gpu_mem_gbps <= 0 || out->gpu_tflops_f16 <= 0 ||
        out->gpu_tflops_f32 <= 0 || out->h2d_gbps <= 0 || out->d2h_gbps <= 0 || out->p2p_gbps <= 0)
        return trace_error_set(err, TRACE_ESYNTAX,
                               "%s: cores, threads, compute and bandwidths must be positive",
                               name), -1;
    if (!out->name[0])
        snprintf(out->name, sizeof out->name, "%s", name);
    return 0;
}

int sim_model_load(const char *spec, sim_model *out, trace_error *err)
{
    char base[480];
    snprintf(base, sizeof base, "%.479s", spec);
    int gpus = 0;
    char *colon = strrchr(base, ':');
    if (colon && !strchr(colon, '/')) {
        if (strncmp(colon, ":gpus=", 6) != 0)
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': unknown option '%s' for a "
                                   "device model (expected MODEL[:gpus=N])", spec, colon + 1), -1;
        char *end;
        long v = strtol(colon + 6, &end, 10);
        if (*end || v < 1 || v > 16)
            return trace_error_set(err, TRACE_EUSAGE, "devices '%s': gpus must be 1 to 16", spec), -1;
        gpus = (int)v;
        *colon = '\0';
    }
    char path[PATH_MAX + 200];
    bool named = !strchr(base, '/') && !strstr(base, ".dev");
    if (named)
        snprintf(path, sizeof path, "%s/%.160s.dev", sim_devices_dir(), base);
    else
        snprintf(path, sizeof path, "%.479s", base);
    if (is_dir(path))
        return trace_error_set(err, TRACE_EUSAGE, "%s: is a directory, not a device model file",
                               path), -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        char names[512];
        sim_models_list(names, sizeof names);
        if (named)
            return trace_error_set(err, TRACE_EIO, "devices '%s': no device model %s (expected "
                                   "%s)", spec, path, names), -1;
        return trace_error_set(err, TRACE_EIO, "%s: cannot open device model (%s)", path,
                               strerror(errno)), -1;
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got + 1 > cap) {
            cap = (len + got + 1) * 2;
            char *n = realloc(text, cap);
            if (!n) {
                free(text);
                fclose(f);
                return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
            }
            text = n;
        }
        memcpy(text + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (!text)
        return trace_error_set(err, TRACE_ESYNTAX, "%s: empty device model", path), -1;
    text[len] = '\0';
    int rc = sim_model_parse(path, text, out, err);
    free(text);
    if (rc == 0) {
        snprintf(out->path, sizeof out->path, "%s", path);
        if (gpus)
            out->gpus = gpus;
    }
    return rc;
}

void sim_model_write(FILE *out, const sim_model *m, const char *header,
                     const char *(*note)(void *ctx, const char *key), void *ctx)
{
    if (header) {
        for (const char *p = header; *p;) {
            const char *eol = strchr(p, '\n');
            int len = eol ? (int)(eol - p) : (int)strlen(p);
            fprintf(out, "# %.*s\n", len, p);
            p += len + (eol ? 1 : 0);
        }
        fprintf(out, "\n");
    }
    const char *section = "";
    for (size_t k = 0; k < N_KEYS; k++) {
        const struct model_key *mk = &model_keys[k];
        if (strcmp(section, mk->section) != 0) {
            section = mk->section;
            fprintf(out, "%s[%s]\n", k ? "\n" : "", section);
            if (!strcmp(section, "machine"))
                fprintf(out, "name = %s\n", m->name);
        }
        const char *field = (const char *)m + mk->off;
        char val[64];
        if (mk->type == KEY_INT)
            snprintf(val, sizeof val, "%d", *(const int *)field);
        else if (mk->type == KEY_I64)
            snprintf(val, sizeof val, "%lld", (long long)*(const int64_t *)field);
        else
            snprintf(val, sizeof val, "%.6g", *(const double *)field);
        const char *why = note ? note(ctx, mk->key) : NULL;
        fprintf(out, "%s = %-12s # %s\n", mk->key, val, why ? why : mk->meaning);
    }
    fprintf(out, "\n[kernels]\n");
    if (!m->n_kernels)
        fprintf(out, "# none: every op is priced by the roofline of [gpu] and [host]\n");
    for (int i = 0; i < m->n_kernels; i++) {
        const sim_kernel_rate *k = &m->kernels[i];
        char val[160];
        int len = snprintf(val, sizeof val, "%lld", (long long)k->fixed_ns);
        if (k->gflops > 0)
            len += snprintf(val + len, sizeof val - (size_t)len, " %.6g gflops", k->gflops);
        if (k->gflops_f16 > 0)
            len += snprintf(val + len, sizeof val - (size_t)len, " %.6g gflops_f16", k->gflops_f16);
        if (k->gbps > 0)
            snprintf(val + len, sizeof val - (size_t)len, " %.6g gbps", k->gbps);
        const char *why = note ? note(ctx, k->family) : NULL;
        fprintf(out, "%s = %-24s%s%s\n", k->family, val, why ? " # " : "", why ? why : "");
    }
}
