/*
 * spec.c -- device specs of the real backends, and the set they make.
 *
 *   SPEC   := ITEM ("," ITEM)*
 *   ITEM   := "cpustream" [":" N] | "cpu" | KEY "=" VALUE
 *   KEY    := jitter (DURATION) | seed (N) | threads (N) | mem (SIZE)
 *
 * The generic parser (sched/family.c) cuts a spec into items and their
 * KEY=VALUE words; here each item's count and options are checked and
 * turned into the devices they make, the cpu last (appended when the spec
 * has none). The devices of one spec form a set: they share the events'
 * lock and the all-reduce rendezvous (collective.c).
 */
#include "real_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

real_ctx *real_ctx_of(const sched_backend *b)
{
    if (real_is_cpu(b) || real_is_cs(b))
        return ((const real_backend_hdr *)b->ctx)->rc;
    return NULL;
}

bool real_backend_is_real(const sched_backend *b) { return real_is_cpu(b) || real_is_cs(b); }

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
    int n = 0, total = 0, n_cpu = 0;
    for (int i = 0; i < spec->n_items; i++) {
        const sched_spec_item *si = &spec->item[i];
        bool cpu = strcmp(si->word, "cpu") == 0;
        int count = 1;
        if (si->arg[0]) {
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
        *it = (real_spec_item){ .cpu = cpu, .count = count, .threads = cpu ? o->threads : 1 };
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
    if (n_cpu == 0) {
        items[n++] = (real_spec_item){ .cpu = true, .count = 1, .threads = o->threads };
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
    int cs_index = 0;
    for (int i = 0; i < n_items; i++) {
        for (int k = 0; k < items[i].count; k++) {
            sched_backend *b;
            if (items[i].cpu) {
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
        else if (real_is_cpu(backends[i]) && n_cpus < REAL_MAX_BACKENDS)
            cpus[n_cpus++] = backends[i];
    }
    for (size_t i = 0; i < n_cpus; i++)
        real_cpu_free(cpus[i]);
    free(backends);
    if (c)
        ctx_free(c);
}
