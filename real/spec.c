/*
 * spec.c -- device specs of the real backends, and the set they make.
 *
 *   SPEC   := ITEM ("," ITEM)*
 *   ITEM   := "cpustream" [":" N] | "cuda" [":" GPU] | "cpu" | KEY "=" VALUE
 *   KEY    := jitter (DURATION) | seed (N) | threads (N) | mem (SIZE)
 *
 * `cuda:GPU` is one logical device on physical GPU number GPU (default 0):
 * `cuda:0,cuda:0` is two of them on one GPU, each with its own stream and
 * buffers. Their backend is a plugin, libsyncsim_cuda.so (real/cuda/,
 * backend_cuda.h), loaded here on first use, so that the syncsim binary
 * never links the CUDA runtime; without it, or without a GPU, a spec
 * naming cuda is refused in one line. cuda and cpustream devices do not
 * mix in one spec (their events are of different kinds).
 *
 * The generic parser (sched/family.c) cuts a spec into items and their
 * KEY=VALUE words; here each item's count and options are checked and
 * turned into the devices they make, the cpu last (appended when the spec
 * has none). The devices of one spec form a set: they share the events'
 * lock and the all-reduce rendezvous (collective.c), or, for one rank of a
 * job over processes, MPI's (mpi.c).
 */
#include "real_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SYNCSIM_CUDA_BACKEND
#include "cuda/backend_cuda.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <unistd.h>
#endif

const char *real_status_str(real_status st)
{
    switch (st) {
#define REAL_STATUS_CASE(name, msg) case REAL_##name: return msg;
        REAL_STATUS_MAP(REAL_STATUS_CASE)
#undef REAL_STATUS_CASE
    }
    return "unknown status";
}

void real_options_default(real_options *o)
{
    memset(o, 0, sizeof *o);
    o->barrier = REAL_BARRIER_HYBRID;
    o->trace_level = REAL_TRACE_STREAM;
    o->skip_barrier_after = -1;
    o->allreduce_timeout_ns = 10000000000ll;
}

/* ------------------------------------------------------------------ */
/* The cuda plugin.                                                    */

#ifdef SYNCSIM_CUDA_BACKEND
static void host_fail(void *set, const char *msg) { real_fail(set, msg); }
static bool host_failed(void *set) { return real_failed(set); }

static const real_cuda_host cuda_host = {
    .abi = REAL_CUDA_ABI,
    .rec_ticket = sched_rec_ticket,
    .rec_done = sched_rec_done,
    .node_args = real_node_args,
    .exec_group = sched_exec_group,
    .exec_bf16 = sched_exec_bf16,
    .kernel_supports = real_kernel_supports,
    .op_str = sched_op_str,
    .tensor_nelements = sched_tensor_nelements,
    .tensor_nbytes = sched_tensor_nbytes,
    .now_ns = real_now_ns,
    .fail = host_fail,
    .failed = host_failed,
};

static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static const real_cuda_plugin *cuda_plugin;
static int cuda_count = -2;         /* -2: not asked yet */
static char cuda_why[320];

/* Loads the plugin and counts the GPUs, once; cuda_why says why not. */
static void cuda_load(void)
{
    if (cuda_count != -2)
        return;
    cuda_count = -1;
    char path[PATH_MAX + 64];
    sched_plugin_path(REAL_CUDA_LIB, "SYNCSIM_CUDA_LIB_DIR", path, sizeof path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cuda_why, sizeof cuda_why, "cannot load the CUDA backend: %.250s", dlerror());
        return;
    }
    real_cuda_entry_fn entry = (real_cuda_entry_fn)dlsym(h, REAL_CUDA_ENTRY);
    const real_cuda_plugin *p = entry ? entry() : NULL;
    if (!p || p->abi != REAL_CUDA_ABI) {
        snprintf(cuda_why, sizeof cuda_why, "cannot load the CUDA backend: %.200s is not "
                 "this syncsim's (ABI %d)", path, REAL_CUDA_ABI);
        return;                     /* the handle stays open: nothing is gained by closing */
    }
    char why[256];
    int n = p->device_count(why, sizeof why);
    if (n < 0) {
        snprintf(cuda_why, sizeof cuda_why, "no CUDA device: %.250s", why);
        return;
    }
    cuda_plugin = p;
    cuda_count = n;
}
#endif

int real_cuda_devices(char *err, size_t errlen)
{
#ifdef SYNCSIM_CUDA_BACKEND
    pthread_mutex_lock(&cuda_lock);
    cuda_load();
    int n = cuda_count;
    if (n < 0)
        snprintf(err, errlen, "%s", cuda_why);
    pthread_mutex_unlock(&cuda_lock);
    return n;
#else
    snprintf(err, errlen, "this syncsim was built without CUDA (no CUDA toolkit was found, or "
             "-DSYNCSIM_CUDA=OFF)");
    return -1;
#endif
}

bool real_cuda_nccl(void)
{
#ifdef SYNCSIM_CUDA_BACKEND
    char why[320];
    return real_cuda_devices(why, sizeof why) > 0 && cuda_plugin->nccl;
#else
    return false;
#endif
}

/* Logical CUDA devices open now: while there are any, the cpu backend's
 * buffers are pinned (real_host_alloc), as ggml's CUDA host buffers. */
static int cuda_open;

void *real_host_alloc(size_t size)
{
#ifdef SYNCSIM_CUDA_BACKEND
    pthread_mutex_lock(&cuda_lock);
    void *p = cuda_open > 0 && cuda_plugin->host_alloc ? cuda_plugin->host_alloc(size) : NULL;
    pthread_mutex_unlock(&cuda_lock);
    return p;
#else
    (void)size;
    (void)cuda_open;
    return NULL;
#endif
}

void real_host_free(void *p)
{
#ifdef SYNCSIM_CUDA_BACKEND
    if (p && cuda_plugin)
        cuda_plugin->host_free(p);
#else
    (void)p;
#endif
}

int real_copy_bytes(void *dst, const void *src, size_t n)
{
#ifdef SYNCSIM_CUDA_BACKEND
    if (cuda_open > 0 && cuda_plugin->copy_bytes)
        return cuda_plugin->copy_bytes(dst, src, n);
#endif
    memcpy(dst, src, n);
    return 0;
}

bool real_is_cuda(const sched_backend *b)
{
#ifdef SYNCSIM_CUDA_BACKEND
    return b && cuda_plugin && cuda_plugin->is_device(b);
#else
    (void)b;
    return false;
#endif
}

real_ctx *real_ctx_of(const sched_backend *b)
{
    if (real_is_cpu(b) || real_is_cs(b) || real_is_cuda(b))
        return ((const real_backend_hdr *)b->ctx)->rc;
    return NULL;
}

bool real_backend_is_real(const sched_backend *b)
{
    return real_is_cpu(b) || real_is_cs(b) || real_is_cuda(b);
}

static int parse_duration(const char *v, int64_t *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || x < 0)
        return -1;
    double mul = 1;
    if (strcmp(end, "ns") == 0 || *end == '\0')
        mul = 1;
    else if (strcmp(end, "us") == 0)
        mul = 1e3;
    else if (strcmp(end, "ms") == 0)
        mul = 1e6;
    else if (strcmp(end, "s") == 0)
        mul = 1e9;
    else
        return -1;
    *out = (int64_t)(x * mul);
    return 0;
}

static int parse_size(const char *v, uint64_t *out)
{
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v)
        return -1;
    uint64_t mul = 1;
    switch (tolower((unsigned char)*end)) {
    case '\0': break;
    case 'k': mul = 1ull << 10; break;
    case 'm': mul = 1ull << 20; break;
    case 'g': mul = 1ull << 30; break;
    default: return -1;
    }
    if (*end && end[1] && !(tolower((unsigned char)end[1]) == 'b' && !end[2]) &&
        !(tolower((unsigned char)end[1]) == 'i' && end[2] == 'B' && !end[3]))
        return -1;
    *out = x * mul;
    return 0;
}

/* One KEY=VALUE of an item; 0, or -1 with the message. */
static int apply_option(const char *spec, real_spec_item *it, const char *key, const char *val,
                        char *err, size_t errlen)
{
    int bad = 0;
    if (it->gpu >= 0) {
        snprintf(err, errlen, "devices '%s': unknown option '%s' for cuda (it takes none)", spec,
                 key);
        return -1;
    }
    if (strcmp(key, "jitter") == 0 && !it->cpu) {
        bad = parse_duration(val, &it->cs.jitter_ns);
    } else if (strcmp(key, "seed") == 0 && !it->cpu) {
        char *end;
        it->cs.seed = strtoull(val, &end, 10);
        bad = (*val == '\0' || *end) ? -1 : 0;
    } else if (strcmp(key, "threads") == 0) {
        char *end;
        long v = strtol(val, &end, 10);
        bad = (*val == '\0' || *end || v < 1 || v > 256) ? -1 : 0;
        it->threads = (int)v;
    } else if (strcmp(key, "mem") == 0 && !it->cpu) {
        bad = parse_size(val, &it->cs.mem);
    } else {
        snprintf(err, errlen, "devices '%s': unknown option '%s' for %s (expected %s)", spec, key,
                 it->cpu ? "cpu" : "cpustream", it->cpu ? "threads" : "jitter, seed, threads or mem");
        return -1;
    }
    if (bad) {
        snprintf(err, errlen, "devices '%s': bad value '%s' for %s", spec, val, key);
        return -1;
    }
    return 0;
}

int real_spec_items(const sched_spec *spec, const real_options *o, real_spec_item *items,
                    char *err, size_t errlen)
{
    int n = 0, total = 0, n_cpu = 0, n_cs = 0, n_cuda = 0, max_gpu = -1;
    for (int i = 0; i < spec->n_items; i++) {
        const sched_spec_item *si = &spec->item[i];
        bool cpu = strcmp(si->word, "cpu") == 0;
        int count = 1, gpu = -1;
        if (strcmp(si->word, "cuda") == 0) {
            char *end;
            long v = si->arg[0] ? strtol(si->arg, &end, 10) : 0;
            if (si->arg[0] && (*end || v < 0 || v >= REAL_MAX_BACKENDS)) {
                snprintf(err, errlen, "devices '%s': 'cuda:%s': expected a GPU number from 0 to "
                         "%d", spec->text, si->arg, REAL_MAX_BACKENDS - 1);
                return -1;
            }
            gpu = (int)v;
            max_gpu = gpu > max_gpu ? gpu : max_gpu;
            n_cuda++;
        } else if (si->arg[0]) {
            char *end;
            long v = strtol(si->arg, &end, 10);
            if (cpu) {
                snprintf(err, errlen, "devices '%s': cpu takes no count", spec->text);
                return -1;
            }
            if (*end || v < 1 || v > 8) {
                snprintf(err, errlen, "devices '%s': '%s:%s': expected a count from 1 to 8",
                         spec->text, si->word, si->arg);
                return -1;
            }
            count = (int)v;
        }
        if (n == REAL_MAX_BACKENDS - 1) {
            snprintf(err, errlen, "devices '%s': too many devices", spec->text);
            return -1;
        }
        real_spec_item *it = &items[n++];
        *it = (real_spec_item){ .cpu = cpu, .gpu = gpu, .count = count,
                                .threads = cpu ? o->threads : 1 };
        n_cs += !cpu && gpu < 0;
        it->cs.jitter_ns = o->jitter_ns;
        it->cs.seed = o->seed;
        it->cs.mem = 1ull << 30;
        for (int k = 0; k < si->n_opt; k++)
            if (apply_option(spec->text, it, si->opt[k].key, si->opt[k].value, err, errlen) != 0)
                return -1;
        n_cpu += cpu;
        total += count;
    }
    if (n_cpu > 1 || (n_cpu == 1 && !items[n - 1].cpu)) {
        snprintf(err, errlen, "devices '%s': cpu must come once, last", spec->text);
        return -1;
    }
    if (n_cs > 0 && n_cuda > 0) {
        snprintf(err, errlen, "devices '%s': cuda and cpustream devices do not mix in one run",
                 spec->text);
        return -1;
    }
    if (n_cuda > 0) {
        char why[320];
        int have = real_cuda_devices(why, sizeof why);
        if (have < 0) {
            snprintf(err, errlen, "%s", why);
            return -1;
        }
        if (max_gpu >= have) {
            snprintf(err, errlen, "devices '%s': cuda:%d: this computer has %d CUDA %s (0 to %d)",
                     spec->text, max_gpu, have, have == 1 ? "device" : "devices", have - 1);
            return -1;
        }
    }
    if (n_cpu == 0) {
        items[n++] = (real_spec_item){ .cpu = true, .gpu = -1, .count = 1, .threads = o->threads };
        total++;
    }
    if (total > REAL_MAX_BACKENDS) {
        snprintf(err, errlen, "devices '%s': at most %d devices", spec->text, REAL_MAX_BACKENDS);
        return -1;
    }
    return n;
}

/* Frees a set that has no backend yet. */
static void ctx_free(real_ctx *c)
{
    pthread_mutex_destroy(&c->ev_lock);
    pthread_cond_destroy(&c->ev_cond);
    real_coll_destroy(c);
    free(c);
}

int real_backends_create(const char *spec, const real_options *opt, sched_backend ***out,
                         size_t *n_out, char *errbuf, size_t errlen)
{
    real_options defaults;
    real_options_default(&defaults);
    sched_spec parsed;
    trace_error terr = { 0 };
    if (sched_spec_parse(spec ? spec : "cpu", real_families, &parsed, &terr) != 0) {
        snprintf(errbuf, errlen, "%s", terr.msg);
        return -1;
    }
    return real_set_create(&parsed, opt ? opt : &defaults, out, n_out, errbuf, errlen);
}

int real_set_create(const sched_spec *spec, const real_options *opt, sched_backend ***out,
                    size_t *n_out, char *errbuf, size_t errlen)
{
    real_spec_item items[REAL_MAX_BACKENDS];
    int n_items = real_spec_items(spec, opt, items, errbuf, errlen);
    if (n_items < 0)
        return -1;
    int total = 0;
    for (int i = 0; i < n_items; i++)
        total += items[i].count;
    real_ctx *c = calloc(1, sizeof *c);
    sched_backend **arr = calloc((size_t)total, sizeof *arr);
    if (!c || !arr) {
        free(c);
        free(arr);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    c->opt = *opt;
    pthread_mutex_init(&c->ev_lock, NULL);
    pthread_cond_init(&c->ev_cond, NULL);
    real_coll_init(c);
    /* The one place a set's all-reduce transport is chosen: a rank of a job
     * over processes reaches the other ranks through MPI (mpi.c). */
    if (opt->world > 0 && real_mpi_attach(c, errbuf, errlen) != 0) {
        free(arr);
        ctx_free(c);
        return -1;
    }
    int cs_index = 0, cuda_index = 0;
    for (int i = 0; i < n_items; i++) {
        for (int k = 0; k < items[i].count; k++) {
            sched_backend *b;
            if (items[i].gpu >= 0) {
#ifdef SYNCSIM_CUDA_BACKEND
                real_cuda_params p = { .index = cuda_index++, .device = items[i].gpu, .set = c };
                b = cuda_plugin->open(&cuda_host, &p, errbuf, errlen);
                pthread_mutex_lock(&cuda_lock);
                cuda_open += b != NULL;
                pthread_mutex_unlock(&cuda_lock);
#else
                (void)cuda_index;
                b = NULL;
                snprintf(errbuf, errlen, "this syncsim was built without CUDA");
#endif
            } else if (items[i].cpu) {
                b = real_cpu_new(c, items[i].threads, opt->barrier, errbuf, errlen);
            } else {
                real_cs_params p = items[i].cs;
                p.index = cs_index++;
                p.threads = items[i].threads;
                b = real_cs_new(c, &p, errbuf, errlen);
            }
            if (!b)
                goto fail;
            arr[c->n_backends] = b;
            c->backends[c->n_backends++] = b;
        }
    }
    *out = arr;
    *n_out = (size_t)c->n_backends;
    return 0;
fail:
    if (c->n_backends == 0) {
        free(arr);
        ctx_free(c);
    } else {
        real_backends_free(arr, (size_t)c->n_backends);
    }
    return -1;
}

void real_backends_free(sched_backend **backends, size_t n)
{
    if (!backends)
        return;
    real_ctx *c = n > 0 ? real_ctx_of(backends[n - 1]) : NULL;
    if (!c && n > 0)
        c = real_ctx_of(backends[0]);
    /* Devices first: their queues may still copy into host memory. */
    sched_backend *cpus[REAL_MAX_BACKENDS];
    size_t n_cpus = 0;
    for (size_t i = 0; i < n; i++) {
        if (real_is_cs(backends[i]))
            real_cs_free(backends[i]);
#ifdef SYNCSIM_CUDA_BACKEND
        else if (real_is_cuda(backends[i])) {
            cuda_plugin->close(backends[i]);
            pthread_mutex_lock(&cuda_lock);
            cuda_open--;
            pthread_mutex_unlock(&cuda_lock);
        }
#endif
        else if (real_is_cpu(backends[i]) && n_cpus < REAL_MAX_BACKENDS)
            cpus[n_cpus++] = backends[i];
    }
    for (size_t i = 0; i < n_cpus; i++)
        real_cpu_free(cpus[i]);
    free(backends);
    if (c)
        ctx_free(c);
}
