/*
 * run.c -- the `run` driver on real backends: sim_run's schedule (a prompt
 * cut into ubatches, then decode tokens, each graph with its own scheduler
 * and shared weights and KV cache) computed for real by the cpu and
 * cpustream backends, recorded, timed on the wall clock and compared with
 * the sequential reference.
 *
 * Outputs are read pipelined, the way llama.cpp reads the logits of a batch:
 * get_async into one host tensor per evaluation, one synchronize when the
 * window of host tensors is full and at the end of the prompt and of the
 * decode. Reading them with sched_get_output after every evaluation would
 * synchronise every token and hide the broken policies' races in the
 * numbers (the checker would still report them). After each synchronize
 * the pending outputs are compared, in evaluation order, with the
 * reference's (real_ref: the same graphs on one thread, same weights,
 * caches and inputs); that time is left out of the measured times.
 *
 * Tensor-split models (tp) put one rank of each all_reduce on every
 * cpustream device; the devices meet at a rendezvous (collective.c) and
 * the reference computes each group with the same strategy (bf16 rounding
 * included). A schedule that hangs for real fails the run with the
 * rendezvous' one-line error once a rank waited allreduce_timeout_ms.
 */
#include "real_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool real_spec_is_real(const char *spec)
{
    if (!spec)
        return false;
    size_t n = strcspn(spec, ",:");
    return (n == 3 && strncmp(spec, "cpu", 3) == 0) || (n == 9 && strncmp(spec, "cpustream", 9) == 0);
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int32_t output_of(const sched_graph *g)
{
    for (int32_t i = g->n_tensors - 1; i >= 0; i--)
        if (g->tensors[i].flags & SCHED_FLAG_OUTPUT)
            return i;
    return -1;
}

/* The most ranks of an all_reduce group of g (0: none). */
static int max_ranks(const sched_graph *g)
{
    int best = 0;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].op != SCHED_OP_ALL_REDUCE)
            continue;
        int rank, n;
        real_coll_group_of(g, i, &rank, &n);
        if (n > best)
            best = n;
    }
    return best;
}

/* One graph of the run (0: prompt, 1: decode) and its reference. */
typedef struct phase {
    sched *s;
    sched_graph *g;                 /* planned, names prefixed */
    sched_graph *rg;                /* the reference's copy, unprefixed */
    real_ref *ref;
    int32_t out;
    sched_tensor **host;            /* window of host tensors */
    int n_host;
    float *got;
    size_t n_out;
} phase;

typedef struct pending {
    uint64_t eval;
    int phase;
    int slot;
} pending;

typedef struct run_state {
    sched_backend **be;
    size_t nb;
    uint64_t seed;
    phase ph[2];
    pending *pend;
    int n_pend, window;
    int64_t paused_ns;              /* comparing: left out of the times */
    real_error err;
    uint64_t n_evals;
    bool show;
    int done, total;
    int64_t t0;
} run_state;

static void progress(run_state *st, bool last)
{
    if (!st->show)
        return;
    /* Only long runs: at least 50 evaluations or one second in. */
    if (st->total < 50 && wall_ns() - st->t0 < 1000000000 && !last)
        return;
    int width = 40, fill = st->total ? st->done * width / st->total : width;
    fprintf(stderr, "\r[%.*s%*s] %d/%d evaluations", fill,
            "########################################", width - fill, "", st->done, st->total);
    if (last)
        fputc('\n', stderr);
}

/* Synchronises every backend, then compares the pending outputs in order. */
static int drain(run_state *st, sched *s, trace_error *err)
{
    if (sched_synchronize(s) != SCHED_OK) {
        trace_error_set(err, TRACE_EUSAGE, "a backend failed to synchronize");
        return -1;
    }
    int64_t t = wall_ns();
    for (int i = 0; i < st->n_pend; i++) {
        pending *p = &st->pend[i];
        phase *ph = &st->ph[p->phase];
        if (real_ref_eval(ph->ref, p->eval) != 0) {
            trace_error_set(err, TRACE_EUSAGE, "the reference cannot evaluate the graph");
            return -1;
        }
        size_t n = 0;
        const float *want = real_ref_tensor(ph->ref, ph->rg->tensors[ph->out].name, &n);
        if (!want || n != ph->n_out ||
            real_read_output(st->be, st->nb, ph->host[p->slot], ph->got) != 0) {
            trace_error_set(err, TRACE_EUSAGE, "cannot read output %s",
                            ph->g->tensors[ph->out].name);
            return -1;
        }
        real_compare_outputs(ph->got, want, n, &st->err);
        st->n_evals++;
    }
    st->n_pend = 0;
    st->paused_ns += wall_ns() - t;
    return 0;
}

/* Drains when the window is full, then sets the inputs of evaluation eval
 * of phase k. */
static int begin_eval(run_state *st, int k, uint64_t eval, trace_error *err)
{
    phase *ph = &st->ph[k];
    if (st->n_pend == st->window && drain(st, ph->s, err) != 0)
        return -1;
    if (real_set_inputs(st->be, st->nb, ph->g, eval, st->seed) != 0) {
        trace_error_set(err, TRACE_EUSAGE, "cannot set the inputs of evaluation %llu",
                        (unsigned long long)eval);
        return -1;
    }
    return 0;
}

static int compute(run_state *st, int k, uint64_t eval, trace_error *err)
{
    if (sched_graph_compute(st->ph[k].s, eval) != SCHED_OK) {
        trace_error_set(err, TRACE_EUSAGE, "evaluation %llu failed on a backend",
                        (unsigned long long)eval);
        return -1;
    }
    return 0;
}

/* Queues the read of the output into the next host tensor of the window
 * (pending outputs are of one phase: the prompt is drained before the decode). */
static int queue_read(run_state *st, int k, uint64_t eval, trace_error *err)
{
    phase *ph = &st->ph[k];
    int slot = st->n_pend;
    sched_tensor *ot = &ph->g->tensors[ph->out];
    sched_backend *ob = sched_backend_at(ph->s, ot->backend);
    int rc = ob->iface->get_async ? ob->iface->get_async(ob, ot, ph->host[slot])
                                  : (sched_get_output(ph->s, ph->out, ph->host[slot]) == SCHED_OK ? 0 : -1);
    if (rc != 0) {
        trace_error_set(err, TRACE_EUSAGE, "cannot read the output of evaluation %llu",
                        (unsigned long long)eval);
        return -1;
    }
    st->pend[st->n_pend++] = (pending){ eval, k, slot };
    st->done++;
    progress(st, false);
    return 0;
}

static int make_phase(run_state *st, phase *ph, const char *prefix, int n_evals, trace_error *err)
{
    ph->out = output_of(ph->g);
    if (ph->out < 0) {
        trace_error_set(err, TRACE_EUSAGE, "the graph has no output tensor");
        return 2;
    }
    const sched_tensor *ot = &ph->g->tensors[ph->out];
    ph->n_out = (size_t)sched_tensor_nelements(ot);
    ph->n_host = n_evals < st->window ? n_evals : st->window;
    ph->host = calloc((size_t)(ph->n_host > 0 ? ph->n_host : 1), sizeof *ph->host);
    ph->got = malloc((ph->n_out ? ph->n_out : 1) * sizeof *ph->got);
    if (!ph->host || !ph->got)
        goto oom;
    for (int i = 0; i < ph->n_host; i++) {
        char name[64];
        snprintf(name, sizeof name, "%slogits.%d", prefix, i);
        ph->host[i] = real_host_tensor_new(st->be, st->nb, ot, name);
        if (!ph->host[i])
            goto oom;
    }
    return 0;
oom:
    trace_error_set(err, TRACE_ENOMEM, "out of memory for the output tensors");
    return 1;
}

static void free_phase(run_state *st, phase *ph)
{
    for (int i = 0; ph->host && i < ph->n_host; i++)
        real_host_tensor_free(st->be, st->nb, ph->host[i]);
    free(ph->host);
    free(ph->got);
}

static void meta(sched_sink *sink, const char *key, const char *value)
{
    if (sink->iface && sink->iface->meta)
        sink->iface->meta(sink->ctx, key, value);
}

int real_run(const real_run_opts *o, real_run_result *res, trace_error *err)
{
    memset(res, 0, sizeof *res);
    const char *devices = o->devices ? o->devices : "cpu";
    const sched_policy *pol = sched_policy_find(o->policy ? o->policy : "events");
    if (!pol) {
        trace_error_set(err, TRACE_EUSAGE, "unknown policy '%s' (expected %s)", o->policy,
                        sched_policy_names());
        return 2;
    }
    int bk = real_barrier_parse(o->barrier ? o->barrier : "hybrid");
    if (bk < 0) {
        trace_error_set(err, TRACE_EUSAGE, "unknown barrier '%s' (expected spin, futex, hybrid or "
                        "pthread)", o->barrier);
        return 2;
    }
    char ebuf[512];
    int n_cs = 0;
    if (real_spec_check(devices, &n_cs, ebuf, sizeof ebuf) != 0) {
        trace_error_set(err, TRACE_EUSAGE, "%s", ebuf);
        return 2;
    }
    sched_model_params p;
    sched_model_defaults(&p, "llama");
    sched_graph *pg = NULL, *dg = NULL, *rpg = NULL, *rdg = NULL;
    int prompt = o->prompt >= 0 ? o->prompt : 64, tokens = o->tokens >= 0 ? o->tokens : 16;
    int n_devices = n_cs > 0 ? n_cs : 1;
    if (o->graph_file) {
        dg = sched_graph_parse_file(o->graph_file, err);
        rdg = dg ? sched_graph_parse_file(o->graph_file, err) : NULL;
        if (!dg || !rdg) {
            sched_graph_free(dg);
            return 2;
        }
        prompt = 0;
    } else {
        if (sched_model_parse(o->model ? o->model : "llama", &p, ebuf, sizeof ebuf) != 0) {
            trace_error_set(err, TRACE_EUSAGE, "%s", ebuf);
            return 2;
        }
        p.n_devices = n_devices;
        int ub = p.ubatch < prompt ? p.ubatch : (prompt > 0 ? prompt : 1);
        if (ub > p.n_ctx) {
            trace_error_set(err, TRACE_EUSAGE, "ubatch %d exceeds n_ctx %d", ub, p.n_ctx);
            return 2;
        }
        p.ubatch = ub;
        dg = sched_model_build(&p, 1);
        rdg = sched_model_build(&p, 1);
        if (prompt > 0) {
            pg = sched_model_build(&p, ub);
            rpg = sched_model_build(&p, ub);
        }
        if (!dg || !rdg || (prompt > 0 && (!pg || !rpg))) {
            sched_graph_free(dg);
            sched_graph_free(rdg);
            sched_graph_free(pg);
            sched_graph_free(rpg);
            trace_error_set(err, TRACE_ENOMEM, "cannot build the %s graph", p.kind);
            return 2;
        }
    }
    const char *allreduce = o->allreduce ? o->allreduce : "ring";
    if (!sched_allreduce_known(allreduce)) {
        sched_graph_free(dg);
        sched_graph_free(rdg);
        sched_graph_free(pg);
        sched_graph_free(rpg);
        trace_error_set(err, TRACE_EUSAGE, "unknown all-reduce '%s' (expected "
                        SCHED_ALLREDUCE_NAMES ")", allreduce);
        return 2;
    }
    int64_t bf16_min = o->allreduce_bf16_min > 0 ? o->allreduce_bf16_min : 32768;
    int n_ranks = max_ranks(dg);
    sched_graph_prefix_names(dg, "d:");
    if (pg)
        sched_graph_prefix_names(pg, "p:");

    int rc = 1;
    run_state st = { .be = NULL };
    st.window = o->window > 0 ? o->window : 64;
    st.pend = calloc((size_t)st.window, sizeof *st.pend);
    st.ph[0].g = pg;
    st.ph[0].rg = rpg;
    st.ph[1].g = dg;
    st.ph[1].rg = rdg;
    sched_weights *wts = NULL;
    /* Without a recorder the run is recorded into memory and dropped. */
    trace *mem = o->rec ? NULL : trace_new();
    sched_sink sink = o->rec ? sched_sink_recorder(o->rec) : sched_sink_memory(mem);
    uint64_t seed = o->seed;
    st.seed = seed;
    real_options ro;
    real_options_default(&ro);
    ro.barrier = (real_barrier_kind)bk;
    ro.threads = o->threads;
    ro.trace_level = o->trace_level;
    ro.seed = seed;
    if (o->allreduce_timeout_ms > 0)
        ro.allreduce_timeout_ns = o->allreduce_timeout_ms * 1000000;
    if (!o->rec)
        ro.sink = &sink;
    if (!st.pend || (!o->rec && !mem)) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    if (real_backends_create(devices, &ro, o->rec, &st.be, &st.nb, ebuf, sizeof ebuf) != 0) {
        trace_error_set(err, TRACE_EUSAGE, "%s", ebuf);
        goto done;
    }
    wts = sched_weights_new(st.be, (int)st.nb, dg, &sink);
    if (!wts || sched_weights_bind(wts, dg) != 0 || (pg && sched_weights_bind(wts, pg) != 0)) {
        trace_error_set(err, TRACE_ENOMEM, "cannot place the weights");
        goto done;
    }
    sched_options so = { .policy = pol, .n_copies = o->n_copies > 0 ? o->n_copies : 2,
                         .allreduce = allreduce, .allreduce_bf16_min = bf16_min,
                         .n_ranks = n_ranks > 0 ? n_ranks : 1 };
    so.name = "d";
    st.ph[1].s = sched_new(st.be, (int)st.nb, &so);
    so.name = "p";
    st.ph[0].s = pg ? sched_new(st.be, (int)st.nb, &so) : NULL;
    if (!st.ph[1].s || (pg && !st.ph[0].s)) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    char serr[512] = "";
    if (sched_plan(st.ph[1].s, dg, serr, sizeof serr) != SCHED_OK ||
        (pg && sched_plan(st.ph[0].s, pg, serr, sizeof serr) != SCHED_OK)) {
        trace_error_set(err, TRACE_EUSAGE, "cannot schedule the graph: %s", serr);
        rc = 2;
        goto done;
    }
    sched_record_graph(st.ph[1].s, &sink, 0);
    res->cpu_threads = real_cpu_threads(st.be[st.nb - 1]);
    {
        char buf[64];
        meta(&sink, "producer", "syncsim run (real)");
        meta(&sink, "policy", pol->name);
        meta(&sink, "model", o->graph_file ? o->graph_file : (o->model ? o->model : "llama"));
        snprintf(buf, sizeof buf, "%d", so.n_copies);
        meta(&sink, "n_copies", buf);
        snprintf(buf, sizeof buf, "%d", res->cpu_threads);
        meta(&sink, "threads", buf);
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
        meta(&sink, "seed", buf);
        meta(&sink, "trace_level", o->trace_level == REAL_TRACE_THREAD ? "thread" : "stream");
        if (n_ranks > 0)
            meta(&sink, "allreduce", allreduce);
    }
    if (real_init_weights(st.be, st.nb, dg, seed) != 0) {
        trace_error_set(err, TRACE_EUSAGE, "cannot initialise the weights");
        goto done;
    }
    if (rpg && !(st.ph[0].ref = real_ref_new(rpg, seed))) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory for the reference");
        goto done;
    }
    if (!(st.ph[1].ref = real_ref_new_shared(rdg, seed, st.ph[0].ref))) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory for the reference");
        goto done;
    }
    for (int k = 0; k < 2; k++)
        if (st.ph[k].ref)
            real_ref_set_allreduce(st.ph[k].ref, allreduce, bf16_min);
    int n_ub = pg ? (prompt + p.ubatch - 1) / p.ubatch : 0;
    int mrc;
    if ((pg && (mrc = make_phase(&st, &st.ph[0], "p:", n_ub, err)) != 0) ||
        (mrc = make_phase(&st, &st.ph[1], "d:", tokens, err)) != 0) {
        rc = mrc;
        goto done;
    }

    st.show = o->progress;
    st.total = n_ub + tokens;
    st.t0 = wall_ns();
    uint64_t eval = 0;
    for (int u = 0; u < n_ub; u++, eval++) {
        if (begin_eval(&st, 0, eval, err) != 0 || compute(&st, 0, eval, err) != 0 ||
            queue_read(&st, 0, eval, err) != 0)
            goto done;
        snprintf(res->prompt_pattern, sizeof res->prompt_pattern, "%s",
                 sched_last_pattern(st.ph[0].s));
    }
    if (n_ub) {
        if (sched_synchronize(st.ph[0].s) != SCHED_OK) {
            trace_error_set(err, TRACE_EUSAGE, "a backend failed to synchronize");
            goto done;
        }
        res->prompt_ns = wall_ns() - st.t0 - st.paused_ns;
        if (drain(&st, st.ph[0].s, err) != 0)
            goto done;
    }
    sched *ds = st.ph[1].s;
    int64_t t1 = wall_ns();
    st.paused_ns = 0;
    uint64_t syncs = 0;
    for (int k = 0; k < tokens; k++, eval++) {
        if (begin_eval(&st, 1, eval, err) != 0)
            goto done;
        uint64_t s0 = sched_count(ds, 's') + sched_count(ds, 'e');
        if (compute(&st, 1, eval, err) != 0)
            goto done;
        syncs += sched_count(ds, 's') + sched_count(ds, 'e') - s0;
        snprintf(res->pattern, sizeof res->pattern, "%s", sched_last_pattern(ds));
        if (queue_read(&st, 1, eval, err) != 0)
            goto done;
    }
    if (sched_synchronize(ds) != SCHED_OK) {
        trace_error_set(err, TRACE_EUSAGE, "a backend failed to synchronize");
        goto done;
    }
    res->decode_ns = wall_ns() - t1 - st.paused_ns;
    if (drain(&st, ds, err) != 0)
        goto done;
    progress(&st, true);
    res->ns_per_token = tokens ? (double)res->decode_ns / tokens : 0;
    res->syncs_per_token = tokens ? (double)syncs / tokens : 0;
    res->prompt_tokens = n_ub ? prompt : 0;
    res->n_ubatches = n_ub;
    res->tokens = tokens;
    res->err = st.err;
    res->n_evals = st.n_evals;
    res->differ = st.err.n_nan > 0 || st.err.max_rel > REAL_RUN_TOLERANCE;
    res->n_splits = sched_n_splits(ds);
    res->n_copies = sched_n_copies(ds);
    for (int i = 0; i < sched_n_splits(ds); i++)
        res->n_inputs += sched_get_split(ds, i)->n_inputs;
    res->n_devices = n_cs;
    if (o->graph_file)
        snprintf(res->desc, sizeof res->desc, "graph %s on %s (%d cpustream + CPU, %d threads, "
                 "%s barrier)", o->graph_file, devices, n_cs, res->cpu_threads,
                 real_barrier_str(ro.barrier));
    else
        snprintf(res->desc, sizeof res->desc,
                 "%s n_layer=%d n_embd=%d n_head=%d n_head_kv=%d n_ff=%d n_vocab=%d %s on %s "
                 "(%d cpustream + CPU, %d threads, %s barrier)", p.kind, p.n_layer, p.n_embd,
                 p.n_head, p.n_head_kv, p.n_ff, p.n_vocab, sched_dtype_str(p.dtype), devices, n_cs,
                 res->cpu_threads, real_barrier_str(ro.barrier));
    rc = 0;
done:
    if (rc != 0 && st.show && st.done)
        fputc('\n', stderr);
    /* Nothing may still write into the host tensors or arenas. */
    if (st.be && st.ph[1].s)
        sched_synchronize(st.ph[1].s);
    /* A hung all_reduce makes every later call fail: report its cause. */
    const char *be_err = st.be ? real_backends_error(st.be, st.nb) : NULL;
    if (be_err) {
        trace_error_set(err, TRACE_EUSAGE, "%s", be_err);
        rc = 1;
    }
    for (int k = 0; k < 2; k++)
        if (st.be)
            free_phase(&st, &st.ph[k]);
    real_ref_free(st.ph[1].ref);
    real_ref_free(st.ph[0].ref);
    sched_free(st.ph[0].s);
    sched_free(st.ph[1].s);
    sched_weights_free(wts);
    real_backends_free(st.be, st.nb);
    free(st.pend);
    if (mem)
        trace_free(mem);
    sched_graph_free(pg);
    sched_graph_free(dg);
    sched_graph_free(rpg);
    sched_graph_free(rdg);
    return rc;
}
