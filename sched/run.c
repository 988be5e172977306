/*
 * run.c -- the `run` driver: a model or graph file scheduled on a machine
 * (simulated or real), the way llama.cpp drives ggml's scheduler.
 *
 * One driver for every machine, in two steps. sched_run_prepare checks
 * everything the run is given -- the policy and the all-reduce against
 * their tables, the --devices spec against the families, the machine's
 * options, the model or the graph file (read once) -- and builds the
 * graphs, so that bad input is one line and exit status 2 before anything
 * is recorded. sched_run_exec then:
 *
 *   1. opens the machine (its family) and wraps its backends in a
 *      recording (record.c): everything below is traced there;
 *   2. places the weights, plans the prompt graph and the decode graph,
 *      each with its own scheduler, arenas and events (they share weights
 *      and the KV cache), records the split graph and the run metadata;
 *   3. gives the weights their values (real machines);
 *   4. evaluates the prompt in ubatches back to back (pipeline
 *      parallelism: the host sets the next ubatch's inputs while the
 *      devices work on the previous one), then each decode token;
 *   5. reads outputs in one of two ways, as the machine asks. llama.cpp's:
 *      the last prompt ubatch's logits, then each token's, with a sync,
 *      after which the host samples. Pipelined (a machine that checks
 *      outputs): every evaluation's output asynchronously into a window of
 *      host tensors, a synchronize when the window is full and at the end
 *      of each phase, then each output checked in order -- reading every
 *      output with a sync would hide the broken policies' races in the
 *      numbers. The checking time is left out of the run's times, and
 *      said.
 *
 * The program's own host work is recorded as host ops (set_inputs, sample,
 * init:, read:), with overhead_ns= for what a device model charges for it.
 * The sync pattern of each evaluation and the syncs per token are read
 * from the recorded statements (traces/pattern.c), nowhere else.
 */
#include "sched.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The program's own host code, as a device model prices it (overhead_ns=). */
#define SET_INPUTS_NS 1000
#define SAMPLE_NS 2000
/* Pipelined reads: evaluations in flight between synchronizes. */
#define READ_WINDOW 64

struct sched_run {
    sched_run_opts o;
    const sched_family *const *families;
    sched_spec spec;
    const sched_family *family;         /* the first item's: it opens the machine */
    sched_machine_info info;
    const sched_policy *policy;
    sched_allreduce allreduce;
    int64_t bf16_min;
    int n_copies, tokens, prompt, n_ub, n_ranks;
    sched_model_params p;
    sched_graph *g[2];                  /* prompt (may be NULL), decode */
    sched_graph *whole[2];              /* a rank of a multi-process job: the whole
                                         * graphs, for the machine's reference */
    int32_t out[2];
    char name[512];
    char model_desc[256];
    sched_machine m;                    /* open during exec */
};

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *plural(long n, const char *one, const char *many) { return n == 1 ? one : many; }

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
        sched_allreduce_group(g, i, &rank, &n);
        if (n > best)
            best = n;
    }
    return best;
}

/* Every run option must be one the spec's machine takes. */
static int check_options(const sched_run *r, trace_error *err)
{
    for (int i = 0; i < r->o.n_options; i++) {
        const char *name = r->o.options[i].name;
        bool known = false;
        for (int k = 0; k < r->spec.n_items && !known; k++) {
            const sched_option *opt = r->spec.item[k].family->iface->options;
            for (int j = 0; opt && opt[j].name && !known; j++)
                known = strcmp(opt[j].name, name) == 0;
        }
        if (known)
            continue;
        char who[256] = "", machines[64] = "";
        size_t used = 0;
        for (int f = 0; r->families[f]; f++) {
            const sched_family_iface *fi = r->families[f]->iface;
            for (int j = 0; fi->options && fi->options[j].name; j++) {
                if (strcmp(fi->options[j].name, name) != 0)
                    continue;
                if (used < sizeof who)
                    used += (size_t)snprintf(who + used, sizeof who - used, "%s%s", used ? ", " : "",
                                             fi->name);
                if (!strstr(machines, fi->machine))
                    snprintf(machines + strlen(machines), sizeof machines - strlen(machines),
                             "%s%s", machines[0] ? " or " : "", fi->machine);
            }
        }
        return trace_error_set(err, TRACE_EUSAGE, "--%s applies to %s devices only (%s), not to '%s'",
                               name, machines, who, r->spec.text), 2;
    }
    return 0;
}

/* The model (or graph file), read once, and the graphs of the run. */
static int build_graphs(sched_run *r, trace_error *err)
{
    const sched_run_opts *o = &r->o;
    if (o->graph_file) {
        sched_graph *g = sched_graph_parse_file(o->graph_file, err);
        if (!g)
            return 2;
        r->g[1] = g;
        r->prompt = 0;
        snprintf(r->model_desc, sizeof r->model_desc, "graph %s", o->graph_file);
    } else {
        char perr[512];
        if (sched_model_parse(o->model ? o->model : "llama", &r->p, perr, sizeof perr) != 0)
            return trace_error_set(err, TRACE_EUSAGE, "%s", perr), 2;
        sched_model_params *p = &r->p;
        int n_dev = r->info.n_devices > 0 ? r->info.n_devices : 1;
        if (o->world > 0 && o->pipeline) {
            /* One pipeline stage per process: the layers a single process
             * would give device `rank` of `world`. */
            if (p->split_mode != SCHED_SPLIT_LAYER || strcmp(p->kind, "mlp") == 0)
                return trace_error_set(err, TRACE_EUSAGE, "--pp %d splits the layers of a llama "
                                       "model over processes: give --model llama[:...] or "
                                       "moe[:...], not '%s'", o->world,
                                       o->model ? o->model : "llama"), 2;
            if (p->n_layer < o->world)
                return trace_error_set(err, TRACE_EUSAGE, "--pp %d: the model has %d %s, fewer "
                                       "than the stages (give n_layer=%d or more)", o->world,
                                       p->n_layer, plural(p->n_layer, "layer", "layers"),
                                       o->world), 2;
            if (strcmp(r->family->iface->name, "cpustream") != 0 || r->info.n_devices != 1)
                return trace_error_set(err, TRACE_EUSAGE, "--pp %d runs one stage per process "
                                       "on one device: give --devices cpustream:1 (or "
                                       "cpustream:1,cpu...), not '%s'", o->world,
                                       r->spec.text), 2;
            n_dev = o->world;
        } else if (o->world > 0) {
            /* One rank per process: each builds its shard, the job has
             * world of them. */
            if (p->split_mode != SCHED_SPLIT_TENSOR)
                return trace_error_set(err, TRACE_EUSAGE, "--tp %d splits a tensor-parallel "
                                       "model over processes: give --model tp[:...], not '%s'",
                                       o->world, o->model ? o->model : "llama"), 2;
            if (strcmp(r->family->iface->name, "cpustream") != 0 || r->info.n_devices != 1)
                return trace_error_set(err, TRACE_EUSAGE, "--tp %d runs one rank per process "
                                       "on one device: give --devices cpustream:1 (or "
                                       "cpustream:1,cpu...), not '%s'", o->world,
                                       r->spec.text), 2;
            n_dev = o->world;
        }
        p->n_devices = n_dev;
        if (p->split_mode == SCHED_SPLIT_TENSOR &&
            (p->n_head_kv % n_dev || p->n_ff % n_dev || p->n_head % n_dev))
            return trace_error_set(err, TRACE_EUSAGE, "model '%s': a tensor split over %d %s needs "
                                   "n_head, n_head_kv and n_ff divisible by %d",
                                   o->model ? o->model : "tp", n_dev,
                                   plural(n_dev, "device", "devices"), n_dev), 2;
        int ub = p->ubatch < r->prompt ? p->ubatch : (r->prompt > 0 ? r->prompt : 1);
        if (ub > p->n_ctx)
            return trace_error_set(err, TRACE_EUSAGE, "ubatch %d exceeds n_ctx %d", ub, p->n_ctx), 2;
        p->ubatch = ub;
        if (o->world > 0) {
            r->whole[1] = sched_model_build(p, 1);
            r->whole[0] = r->prompt > 0 ? sched_model_build(p, ub) : NULL;
            if (!r->whole[1] || (r->prompt > 0 && !r->whole[0]))
                return trace_error_set(err, TRACE_ENOMEM, "cannot build the %s graph", p->kind), 2;
            p->one_rank = true;
            p->rank = o->rank;
            p->skip_first_allreduce = o->skip_allreduce && o->rank == o->world - 1;
            if (o->pipeline && o->rank < o->world - 1) {
                /* The reference checks an earlier stage's output: its last
                 * layer's in the whole graphs. */
                int lo, hi;
                sched_model_stage(p, o->rank, o->world, &lo, &hi);
                char name[SCHED_NAME_MAX];
                snprintf(name, sizeof name, "l%d.out", hi - 1);
                for (int k = 0; k < 2; k++) {
                    sched_graph *w = r->whole[k];
                    for (int32_t i = 0; w && i < w->n_tensors; i++) {
                        if (strcmp(w->tensors[i].name, name) == 0)
                            w->tensors[i].flags |= SCHED_FLAG_OUTPUT;
                        else
                            w->tensors[i].flags &= ~(uint32_t)SCHED_FLAG_OUTPUT;
                    }
                }
            }
        }
        r->g[1] = sched_model_build(p, 1);
        r->g[0] = r->prompt > 0 ? sched_model_build(p, ub) : NULL;
        p->one_rank = p->skip_first_allreduce = false;
        if (!r->g[1] || (r->prompt > 0 && !r->g[0]))
            return trace_error_set(err, TRACE_ENOMEM, "cannot build the %s graph", p->kind), 2;
        r->n_ub = r->prompt > 0 ? (r->prompt + ub - 1) / ub : 0;
        snprintf(r->model_desc, sizeof r->model_desc,
                 "%s n_layer=%d n_embd=%d n_head=%d n_head_kv=%d n_ff=%d n_vocab=%d %s",
                 p->split_mode == SCHED_SPLIT_TENSOR ? "tp" : p->kind, p->n_layer, p->n_embd,
                 p->n_head, p->n_head_kv, p->n_ff, p->n_vocab, sched_dtype_str(p->dtype));
    }
    for (int k = 0; k < 2; k++)
        if (r->g[k] && (r->out[k] = output_of(r->g[k])) < 0)
            return trace_error_set(err, TRACE_EUSAGE, "%s: the graph has no output tensor (mark "
                                   "one `output`)", o->graph_file ? o->graph_file : r->p.kind), 2;
    r->n_ranks = max_ranks(r->g[1]);
    return 0;
}

int sched_run_prepare(const sched_run_opts *o, const sched_family *const *families,
                      sched_run **out, trace_error *err)
{
    *out = NULL;
    sched_run *r = calloc(1, sizeof *r);
    if (!r)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), 2;
    r->o = *o;
    r->families = families;
    r->out[0] = r->out[1] = -1;
    int rc = 2;
    r->policy = sched_policy_find(o->policy ? o->policy : "events");
    if (!r->policy) {
        trace_error_set(err, TRACE_EUSAGE, "unknown policy '%s' (expected %s)", o->policy,
                        sched_policy_names());
        goto fail;
    }
    int ar = sched_allreduce_parse(o->allreduce ? o->allreduce : "auto");
    if (ar < 0) {
        trace_error_set(err, TRACE_EUSAGE, "unknown all-reduce '%s' (expected %s)", o->allreduce,
                        sched_allreduce_names());
        goto fail;
    }
    r->allreduce = (sched_allreduce)ar;
    r->bf16_min = o->bf16_min > 0 ? o->bf16_min : 0;     /* 0: the strategy's */
    r->n_copies = o->n_copies;          /* 0: the policy's default, once the machine is known */
    r->tokens = o->tokens >= 0 ? o->tokens : 16;
    r->prompt = o->prompt >= 0 ? o->prompt : 64;
    if (o->model && o->graph_file) {
        trace_error_set(err, TRACE_EUSAGE, "give --model or --graph, not both");
        goto fail;
    }
    if (o->world > 0 && (o->graph_file || o->rank < 0 || o->rank >= o->world)) {
        trace_error_set(err, TRACE_EUSAGE, o->graph_file ? "--tp splits a tp model over "
                        "processes: give --model tp[:...], not --graph" :
                        "rank %d is not one of the %d ranks", o->rank, o->world);
        goto fail;
    }
    if (o->world > 0 && !o->pipeline && sched_allreduce_expanded(r->allreduce)) {
        trace_error_set(err, TRACE_EUSAGE, "--allreduce %s is copies between the devices' "
                        "memories; the ranks of --tp are processes: use ring, bf16, nccl or auto",
                        sched_allreduce_str(r->allreduce));
        goto fail;
    }
    const char *devices = o->devices;
    for (int i = 0; !devices && families[i]; i++)
        devices = families[i]->iface->default_spec;
    if (sched_spec_parse(devices, families, &r->spec, err) != 0)
        goto fail;
    r->family = r->spec.item[0].family;
    if ((rc = check_options(r, err)) != 0)
        goto fail;
    rc = 2;
    if (r->family->iface->check(r->family, &r->spec, o, &r->info, err) != 0)
        goto fail;
    if (build_graphs(r, err) != 0)
        goto fail;
    if (r->n_copies <= 0) {
        /* llama.cpp pipelines (ggml's `parallel`) with more than one device
         * and a layer split; the policy says how many slots that takes. */
        bool pipelined = r->info.n_devices > 1 &&
                         (o->graph_file || r->p.split_mode == SCHED_SPLIT_LAYER);
        int n = pipelined ? r->policy->copies_pipelined : r->policy->copies_single;
        r->n_copies = n > 0 ? n : 2;
    }
    if (r->tokens == 0 && r->n_ub == 0) {
        trace_error_set(err, TRACE_EUSAGE, "nothing to evaluate: --tokens 0 and %s",
                        o->graph_file ? "a graph file has no prompt" : "--prompt 0");
        goto fail;
    }
    snprintf(r->name, sizeof r->name, "%s %s on %s",
             o->graph_file ? o->graph_file : o->model ? o->model : "llama", r->policy->name,
             r->spec.text);
    *out = r;
    return 0;
fail:
    sched_run_free(r);
    return rc;
}

const char *sched_run_name(const sched_run *r) { return r->name; }

const char *sched_run_source(const sched_run *r) { return r->family->iface->source; }
const sched_machine *sched_run_machine(const sched_run *r) { return &r->m; }

void sched_run_free(sched_run *r)
{
    if (!r)
        return;
    if (r->m.iface && r->m.iface->free)
        r->m.iface->free(r->m.ctx);
    sched_graph_free(r->g[0]);
    sched_graph_free(r->g[1]);
    sched_graph_free(r->whole[0]);
    sched_graph_free(r->whole[1]);
    free(r);
}

/* ------------------------------------------------------------------ */
/* Executing.                                                          */

/* One phase of the run: its graph, scheduler, output and host tensors. */
typedef struct phase {
    sched *s;
    sched_graph *g;
    int32_t out;
    const char *prefix;
    sched_tensor **host;                /* llama.cpp's reads: 1; pipelined: a window */
    int n_host;
    int64_t start, paused;          /* machine clock: the phase's start, time checking */
    int64_t synced;                 /* when the last synchronize of outputs returned */
} phase;

typedef struct pending {
    uint64_t eval;
    int phase, slot;
} pending;

typedef struct exec {
    sched_run *r;
    sched_machine *m;
    sched_rec *rec;
    sched_backend *be[SCHED_SPEC_MAX_ITEMS + 1];
    int nb;
    phase ph[2];
    pending pend[READ_WINDOW];
    int n_pend;
    trace_pattern *pattern;
    int cur_phase;                      /* the phase of the iteration the pattern holds, -1 */
    uint64_t syncs;                     /* host-blocking statements of the decode */
    sched_run_result *res;
    /* progress */
    int done, total;
    int64_t t0, last_line;
    bool lines;
} exec;

static int64_t now(const exec *x) { return x->m->iface->now(x->m->ctx); }

static void progress(exec *x, bool last)
{
    if (x->r->o.progress_fn) {
        x->r->o.progress_fn(x->r->o.progress_ctx, x->done, x->total);
        return;
    }
    sched_progress mode = x->r->o.progress;
    if (mode == SCHED_PROGRESS_NONE)
        return;
    int64_t t = wall_ns(), elapsed = t - x->t0;
    if (mode == SCHED_PROGRESS_BAR) {
        /* Only long runs: at least 50 evaluations or one second in. */
        if (last ? !x->lines : x->total < 50 && elapsed < 1000000000)
            return;
        x->lines = true;
        int width = 40, fill = x->total ? x->done * width / x->total : width;
        fprintf(stderr, "\r[%.*s%*s] %d/%d evaluations", fill,
                "########################################", width - fill, "", x->done, x->total);
        if (last)
            fputc('\n', stderr);
        return;
    }
    /* Not a terminal (a log): a line every interval, once one has passed,
     * and the last one if any was printed. */
    int64_t every = (int64_t)(x->r->o.progress_ms > 0 ? x->r->o.progress_ms : 5000) * 1000000;
    if (last ? !x->lines : t - (x->lines ? x->last_line : x->t0) < every)
        return;
    x->last_line = t;
    x->lines = true;
    fprintf(stderr, "syncsim run: %d/%d evaluations (%d%%), %.1f s\n", x->done, x->total,
            x->total ? 100 * x->done / x->total : 100, (double)elapsed / 1e9);
}

/* The sync pattern of the iteration just ended: saved as its phase's, its
 * host-blocking letters counted for the decode; then a fresh pattern. */
static int end_iteration(exec *x)
{
    if (x->cur_phase >= 0 && x->pattern) {
        trace_pattern_iter it;
        if (trace_pattern_last(x->pattern, sched_rec_host(x->rec), &it) == 0) {
            char *dst = x->cur_phase ? x->res->pattern : x->res->prompt_pattern;
            snprintf(dst, sizeof x->res->pattern, "%s", it.before);
            if (x->cur_phase == 1)
                for (const char *c = it.before; *c; c++)
                    x->syncs += *c == 's';
        }
    }
    sched_rec_observe(x->rec, NULL);
    trace_pattern_free(x->pattern);
    x->pattern = trace_pattern_new();
    if (!x->pattern)
        return -1;
    sched_rec_observe(x->rec, x->pattern);
    x->cur_phase = -1;
    return 0;
}

static trace_access whole(exec *x, sched_tensor *t, trace_mode mode)
{
    return (trace_access){ sched_tensor_view(sched_rec_sink(x->rec), t), (uint8_t)mode,
                           TRACE_REF_WHOLE, 0, sched_tensor_nbytes(t) };
}

/* The host writes the inputs of evaluation eval of phase k (set_inputs). */
static int set_inputs(exec *x, int k, uint64_t eval, trace_error *err)
{
    const sched_machine_iface *mi = x->m->iface;
    sched_graph *g = x->ph[k].g;
    trace_access *acc = malloc(((size_t)g->n_tensors + 1) * sizeof *acc);
    if (!acc)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    uint32_t n = 0;
    uint64_t bytes = 0;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & SCHED_FLAG_INPUT) || t->op != SCHED_OP_NONE)
            continue;
        acc[n++] = whole(x, t, TRACE_W);
        bytes += sched_tensor_nbytes(t);
    }
    sched_rec_set_eval(x->rec, eval);
    int64_t t0 = now(x);
    int rc = mi->fill_inputs ? mi->fill_inputs(x->m->ctx, g, eval) : 0;
    if (mi->host_work)
        mi->host_work(x->m->ctx, SET_INPUTS_NS, bytes);
    int64_t t1 = now(x);
    if (rc == 0)
        rc = sched_rec_host_op(x->rec, "set_inputs", acc, n, SET_INPUTS_NS, (int64_t)bytes, t0,
                               t1 - t0);
    free(acc);
    if (rc != 0)
        trace_error_set(err, TRACE_EUSAGE, "cannot set the inputs of evaluation %llu",
                        (unsigned long long)eval);
    return rc;
}

/* A host tensor shaped like output t of g, in the CPU backend's memory. */
static sched_tensor *host_tensor(exec *x, const sched_graph *g, int32_t t, const char *name)
{
    sched_backend *cpu = x->be[x->nb - 1];
    sched_tensor *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    *h = g->tensors[t];
    snprintf(h->name, sizeof h->name, "%s", name);
    h->op = SCHED_OP_NONE;
    for (int i = 0; i < SCHED_MAX_SRC; i++)
        h->src[i] = -1;
    h->view_src = -1;
    h->flags = 0;
    h->offset = 0;
    h->buffer = cpu->iface->buffer_alloc(cpu, name, sched_tensor_nbytes(h), SCHED_BUFFER_HOST);
    h->trace_view = h->buffer ? h->buffer->trace_id : TRACE_NONE;
    if (!h->buffer) {
        free(h);
        return NULL;
    }
    return h;
}

static void free_host_tensors(exec *x)
{
    sched_backend *cpu = x->nb ? x->be[x->nb - 1] : NULL;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; x->ph[k].host && i < x->ph[k].n_host; i++) {
            sched_tensor *h = x->ph[k].host[i];
            if (h && h->buffer && cpu && cpu->iface->buffer_free)
                cpu->iface->buffer_free(cpu, h->buffer);
            free(h);
        }
        free(x->ph[k].host);
    }
}

/* Pipelined reads: waits for every backend, then checks the pending
 * outputs in evaluation order (the time it takes is left out). */
static int drain(exec *x, int k, trace_error *err)
{
    if (sched_synchronize(x->ph[k].s) != SCHED_OK)
        return trace_error_set(err, TRACE_EUSAGE, "a backend failed to synchronize"), -1;
    x->ph[k].synced = now(x);
    int64_t t0 = wall_ns();
    for (int i = 0; i < x->n_pend; i++) {
        pending *p = &x->pend[i];
        phase *ph = &x->ph[p->phase];
        sched_tensor *h = ph->host[p->slot];
        trace_access acc = whole(x, h, TRACE_R);
        char label[SCHED_NAME_MAX + 8];
        snprintf(label, sizeof label, "read:%s", h->name);
        int64_t t = now(x);
        sched_rec_host_op(x->rec, label, &acc, 1, -1, -1, t, 0);
        if (x->m->iface->check_output(x->m->ctx, p->phase, p->eval, h, err) != 0)
            return -1;
    }
    x->n_pend = 0;
    int64_t dt = wall_ns() - t0;
    x->res->check_ns += dt;
    x->ph[k].paused += dt;
    return 0;
}

/* After evaluation eval of phase k: read its output as the machine asks. */
static int read_output(exec *x, int k, uint64_t eval, bool last_of_phase, trace_error *err)
{
    phase *ph = &x->ph[k];
    if (x->m->iface->check_output) {
        int slot = x->n_pend;
        if (sched_get_output_async(ph->s, ph->out, ph->host[slot % ph->n_host]) != SCHED_OK)
            return trace_error_set(err, TRACE_EUSAGE, "cannot read the output of evaluation %llu",
                                   (unsigned long long)eval), -1;
        x->pend[x->n_pend++] = (pending){ eval, k, slot % ph->n_host };
        return 0;
    }
    /* llama.cpp: the prompt's last logits, every token's, then sampling. */
    if (k == 0 && !last_of_phase)
        return 0;
    if (sched_get_output(ph->s, ph->out, ph->host[0]) != SCHED_OK)
        return -1;
    if (k == 1) {
        trace_access acc = whole(x, ph->host[0], TRACE_R);
        int64_t t0 = now(x);
        if (x->m->iface->host_work)
            x->m->iface->host_work(x->m->ctx, SAMPLE_NS, 0);
        sched_rec_host_op(x->rec, "sample", &acc, 1, SAMPLE_NS, 0, t0, now(x) - t0);
    }
    return 0;
}

/* The evaluations of phase k, numbered from *eval on. */
static int run_phase(exec *x, int k, int n, uint64_t *eval, trace_error *err)
{
    phase *ph = &x->ph[k];
    ph->start = now(x);
    if (k == 1 && x->ph[0].s && x->r->policy->ggml_alloc)
        sched_handover(ph->s, x->ph[0].s);  /* one ggml scheduler goes on */
    for (int i = 0; i < n; i++, (*eval)++) {
        if (x->m->iface->check_output && x->n_pend == ph->n_host && drain(x, k, err) != 0)
            return -1;
        if (end_iteration(x) != 0)
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
        x->cur_phase = k;
        /* llama.cpp allocates the graph (ggml chooses its copy slot) before
         * it sets the inputs, which then go to that slot's host copies. */
        sched_reset(ph->s);                 /* process_ubatch: a new graph */
        if (sched_alloc_graph(ph->s) != SCHED_OK)
            return trace_error_set(err, TRACE_EUSAGE, "cannot allocate evaluation %llu",
                                   (unsigned long long)*eval), -1;
        if (set_inputs(x, k, *eval, err) != 0)
            return -1;
        sched_status cst = sched_graph_compute(ph->s, *eval);
        /* The end of a llama_decode (the prompt's last ubatch, each token)
         * resets the scheduler before its outputs are read: the sync that
         * reads them sends the next slot back to 0. A sync inside the
         * prompt (pipelined reads) does not. */
        if (k == 1 || i + 1 == n)
            sched_reset(ph->s);
        if (cst != SCHED_OK || read_output(x, k, *eval, i + 1 == n, err) != 0)
            return trace_error_set(err, TRACE_EUSAGE, "evaluation %llu failed on a backend",
                                   (unsigned long long)*eval), -1;
        x->done++;
        progress(x, false);
    }
    if (x->m->iface->check_output) {
        /* The phase ends when its last output is in (the checks after
         * that are left out). */
        int64_t paused = ph->paused;
        if (drain(x, k, err) != 0)
            return -1;
        int64_t ns = ph->synced - ph->start - paused;
        if (k == 0)
            x->res->prompt_ns = ns;
        else
            x->res->decode_ns = ns;
        return 0;
    }
    int64_t ns = now(x) - ph->start;
    if (k == 0)
        x->res->prompt_ns = ns;
    else
        x->res->decode_ns = ns;
    return 0;
}

static void meta(sched_sink *sink, const char *key, const char *value)
{
    if (sink->iface->meta)
        sink->iface->meta(sink->ctx, key, value);
}

/* Steps 1-3: machine, recording, weights, schedulers, metadata, values. */
static int setup(exec *x, sched_sink sink, sched_weights **wts, trace_error *err)
{
    sched_run *r = x->r;
    const sched_machine_iface *mi = x->m->iface;
    sched_rec_opts ro = { .sink = sink, .hold = mi->hold, .threaded = mi->threaded,
                          .now = mi->now, .now_ctx = x->m->ctx };
    x->rec = sched_rec_new(&ro);
    if (!x->rec)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    sched_backend **inner;
    int n = mi->backends(x->m->ctx, &inner);
    if (n < 1 || n > SCHED_SPEC_MAX_ITEMS + 1)
        return trace_error_set(err, TRACE_EUSAGE, "the machine has %d backends", n), -1;
    for (int i = 0; i < n; i++)
        if (!(x->be[x->nb++] = sched_rec_wrap(x->rec, inner[i])))
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    /* A rank of a multi-process job checks its output against the whole
     * job's graphs. */
    sched_graph *const *adopt = r->whole[1] ? r->whole : r->g;
    if (mi->adopt && mi->adopt(x->m->ctx, adopt[0], adopt[1], err) != 0)
        return -1;
    if (mi->recording)
        mi->recording(x->m->ctx, x->rec);
    sched_graph_prefix_names(r->g[1], "d:");
    if (r->g[0])
        sched_graph_prefix_names(r->g[0], "p:");
    sched_sink *rs = sched_rec_sink(x->rec);
    *wts = sched_weights_new(x->be, x->nb, r->g[1], rs);
    if (!*wts || sched_weights_bind(*wts, r->g[1]) != 0 ||
        (r->g[0] && sched_weights_bind(*wts, r->g[0]) != 0))
        return trace_error_set(err, TRACE_ENOMEM, "cannot place the weights"), -1;
    const sched_copy_traits *traits[SCHED_SPEC_MAX_ITEMS + 1] = { 0 };
    for (int i = 0; mi->copy_traits && i < x->nb; i++)
        traits[i] = mi->copy_traits(x->m->ctx, i);
    /* auto: a simulated GPU's all-reduce is its family's (CUDA and NCCL
     * unless `backend=` names another); the real CPU devices have no
     * all-reduce of their own (ggml's meta backend falls back to the
     * butterfly). */
    const char *ar_family = NULL;
    if (strcmp(sched_run_source(r), "sim") == 0)
        ar_family = traits[0] && traits[0]->family ? traits[0]->family : "cuda";
    if (r->o.world > 0 && !r->o.pipeline)
        ar_family = "mpi";      /* the other ranks are other processes: one collective */
    sched_options so = { .policy = r->policy, .n_copies = r->n_copies,
                         .allreduce = r->allreduce, .allreduce_bf16_min = r->bf16_min,
                         .allreduce_family = ar_family,
                         .copy_traits = traits, .sink = sched_rec_sink(x->rec),
                         .read_ids = mi->read_i32, .read_ids_ctx = x->m->ctx,
                         .rec = x->rec };
    const char *names[2] = { "p", "d" }, *prefixes[2] = { "p:", "d:" };
    /* Under ggml's allocator, one scheduler's state for both graphs, as
     * llama.cpp's one ggml_backend_sched: the decode's uses the prompt's
     * slot events and compute buffers (grown to the larger graph), so
     * reuse across the phase change shows. Syncsim's own policies keep
     * one of each per phase. */
    for (int k = 0; k < 2; k++) {
        phase *ph = &x->ph[k];
        ph->g = r->g[k];
        ph->out = r->out[k];
        ph->prefix = prefixes[k];
        if (!ph->g)
            continue;
        so.name = names[k];
        so.share = k == 1 && r->policy->ggml_alloc ? x->ph[0].s : NULL;
        ph->s = sched_new(x->be, x->nb, &so);
        if (!ph->s)
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
        char serr[512] = "";
        if (sched_plan(ph->s, ph->g, serr, sizeof serr) != SCHED_OK)
            return trace_error_set(err, TRACE_EUSAGE, "cannot schedule the graph: %s", serr), -1;
    }
    sched_record_graph(x->ph[1].s, rs, 0);
    char buf[64];
    snprintf(buf, sizeof buf, "syncsim run (%s)", r->family->iface->machine);
    meta(rs, "producer", buf);
    meta(rs, "policy", r->policy->name);
    meta(rs, "model", r->o.graph_file ? r->o.graph_file : r->o.model ? r->o.model : "llama");
    snprintf(buf, sizeof buf, "%d", r->n_copies);
    meta(rs, "n_copies", buf);
    if (r->n_ranks > 0)
        meta(rs, "allreduce", sched_allreduce_str(r->allreduce));
    if (r->o.world > 0) {       /* what `syncsim merge` reads */
        snprintf(buf, sizeof buf, "%d", r->o.rank);
        meta(rs, "rank", buf);
        snprintf(buf, sizeof buf, "%d", r->o.world);
        meta(rs, "world_size", buf);
    }
    if (mi->meta)
        mi->meta(x->m->ctx, rs);
    /* Output tensors: one per phase, or a window of them. */
    for (int k = 0; k < 2; k++) {
        phase *ph = &x->ph[k];
        if (!ph->g)
            continue;
        int evals = k ? r->tokens : r->n_ub;
        ph->n_host = mi->check_output ? (evals < READ_WINDOW ? (evals > 0 ? evals : 1) : READ_WINDOW)
                                      : 1;
        ph->host = calloc((size_t)ph->n_host, sizeof *ph->host);
        if (!ph->host)
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
        for (int i = 0; i < ph->n_host; i++) {
            char name[SCHED_NAME_MAX];
            if (mi->check_output)
                snprintf(name, sizeof name, "%slogits.%d", ph->prefix, i);
            else
                snprintf(name, sizeof name, "%slogits.host", ph->prefix);
            if (!(ph->host[i] = host_tensor(x, ph->g, ph->out, name)))
                return trace_error_set(err, TRACE_ENOMEM, "out of memory for the outputs"), -1;
        }
    }
    if (mi->fill_weight) {
        sched_graph *g = r->g[1];
        for (int32_t i = 0; i < g->n_tensors; i++) {
            sched_tensor *t = &g->tensors[i];
            if (!(t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) || t->op != SCHED_OP_NONE)
                continue;
            trace_access acc = whole(x, t, TRACE_W);
            int64_t t0 = now(x);
            if (mi->fill_weight(x->m->ctx, t) != 0)
                return trace_error_set(err, TRACE_EUSAGE, "cannot initialise weight %s", t->name), -1;
            char label[SCHED_NAME_MAX + 8];
            snprintf(label, sizeof label, "init:%s", t->name);
            sched_rec_host_op(x->rec, label, &acc, 1, -1, -1, t0, now(x) - t0);
        }
    }
    return 0;
}

static void fill_result(exec *x)
{
    sched_run *r = x->r;
    sched_run_result *res = x->res;
    sched *ds = x->ph[1].s;
    res->policy = r->policy->name;
    res->n_copies = ds ? sched_n_copies(ds) : r->n_copies;
    for (int i = 0; ds && i < sched_n_splits(ds); i++)
        res->n_inputs += sched_get_split(ds, i)->n_inputs;
    res->n_splits = ds ? sched_n_splits(ds) : 0;
    res->prompt_tokens = r->n_ub ? r->prompt : 0;
    res->n_ubatches = r->n_ub;
    res->tokens = r->tokens;
    res->ns_per_token = r->tokens ? (double)res->decode_ns / r->tokens : 0;
    res->syncs_per_token = r->tokens ? (double)x->syncs / r->tokens : 0;
    char machine[256] = "";
    x->m->iface->describe(x->m->ctx, machine, sizeof machine);
    snprintf(res->desc, sizeof res->desc, "%s on %s", r->model_desc, machine);
}

int sched_run_exec(sched_run *r, sched_sink sink, sched_run_result *res, trace_error *err)
{
    memset(res, 0, sizeof *res);
    exec x = { .r = r, .m = &r->m, .res = res, .cur_phase = -1 };
    x.t0 = wall_ns();
    if (r->family->iface->open(r->family, &r->spec, &r->o, &r->m, err) != 0) {
        r->m.iface = NULL;
        return 1;
    }
    sched_weights *wts = NULL;
    int rc = 1;
    uint64_t eval = 0;
    x.total = r->n_ub + r->tokens;
    if (r->o.progress_fn)
        r->o.progress_fn(r->o.progress_ctx, 0, x.total);
    if (setup(&x, sink, &wts, err) != 0 ||
        (r->n_ub && run_phase(&x, 0, r->n_ub, &eval, err) != 0) ||
        (r->tokens && run_phase(&x, 1, r->tokens, &eval, err) != 0) || end_iteration(&x) != 0 ||
        (r->m.iface->finish && r->m.iface->finish(r->m.ctx) != 0)) {
        if (r->m.iface->finish)
            r->m.iface->finish(r->m.ctx);
        /* The machine knows why a backend call failed (a hang). */
        const char *why = r->m.iface->error ? r->m.iface->error(r->m.ctx) : NULL;
        if (why)
            trace_error_set(err, TRACE_EUSAGE, "%s", why);
        if (r->o.progress == SCHED_PROGRESS_BAR && x.lines)
            fputc('\n', stderr);
    } else {
        progress(&x, true);
        rc = 0;
    }
    /* A failed run: nothing may still write into the host tensors or arenas. */
    for (int k = 0; rc != 0 && k < 2; k++)
        if (x.ph[k].s)
            sched_synchronize(x.ph[k].s);
    if (x.rec) {
        sched_rec_observe(x.rec, NULL);
        res->n_stmts = sched_rec_count(x.rec);
    }
    trace_pattern_free(x.pattern);
    fill_result(&x);
    free_host_tensors(&x);
    sched_free(x.ph[0].s);
    sched_free(x.ph[1].s);
    sched_weights_free(wts);
    sched_rec_free(x.rec);
    res->wall_ns = wall_ns() - x.t0;
    return rc;
}

int sched_run_print(const sched_run *r, const sched_run_result *res, FILE *out, const char *db,
                    int64_t run_id)
{
    const char *clock = r->m.iface ? r->m.iface->clock : "";
    fprintf(out, "%s\n", res->desc);
    fprintf(out, "policy %s, %d %s: %d %s, %d split %s; run %lld in %s (%llu statements)\n",
            res->policy, res->n_copies, plural(res->n_copies, "copy", "copies"), res->n_splits,
            plural(res->n_splits, "split", "splits"), res->n_inputs,
            plural(res->n_inputs, "input", "inputs"), (long long)run_id, db,
            (unsigned long long)res->n_stmts);
    if (res->prompt_tokens > 0)
        fprintf(out, "prompt: %d %s in %d %s: %.3f ms %s (%.1f tokens/s)\n", res->prompt_tokens,
                plural(res->prompt_tokens, "token", "tokens"), res->n_ubatches,
                plural(res->n_ubatches, "ubatch", "ubatches"), (double)res->prompt_ns / 1e6, clock,
                res->prompt_ns > 0 ? res->prompt_tokens * 1e9 / (double)res->prompt_ns : 0.0);
    if (res->tokens > 0)
        fprintf(out, "decode: %.3f ms/token %s (%.1f tokens/s), %.2f syncs/token over %d %s\n",
                res->ns_per_token / 1e6, clock,
                res->ns_per_token > 0 ? 1e9 / res->ns_per_token : 0.0, res->syncs_per_token,
                res->tokens, plural(res->tokens, "token", "tokens"));
    else
        fprintf(out, "decode: none (--tokens 0)\n");
    if (res->tokens > 0)
        fprintf(out, "pattern (decode): %s\n", res->pattern);
    if (res->prompt_tokens > 0)
        fprintf(out, "pattern (prompt): %s\n", res->prompt_pattern);
    if (res->check_ns > 0)
        fprintf(out, "wall time: %.3f s, of which %.3f s checking outputs (left out of the times "
                "above)\n", (double)res->wall_ns / 1e9, (double)res->check_ns / 1e9);
    return r->m.iface && r->m.iface->report ? r->m.iface->report(r->m.ctx, out, db) : 0;
}
