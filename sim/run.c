/*
 * run.c -- the `run` driver: a model (or graph file) scheduled on a
 * simulated machine, the way llama.cpp drives ggml's scheduler.
 *
 * The prompt is cut into ubatches evaluated back to back without waiting
 * for their outputs (pipeline parallelism: the host sets the inputs of the
 * next ubatch while the devices still work on the previous one); only the
 * last ubatch's logits are read. Each decode token then sets its inputs,
 * evaluates the one-token graph, reads the logits (a sync) and samples.
 * The prompt graph and the decode graph share the weights and the KV
 * cache; each has its own scheduler, arenas and events.
 */
#include "sim_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int set_inputs(sim_world *w, sched_graph *g, const char *label)
{
    trace_access acc[SIM_MAX_ACC];
    uint32_t n = 0;
    uint64_t bytes = 0;
    for (int32_t i = 0; i < g->n_tensors && n < SIM_MAX_ACC; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & SCHED_FLAG_INPUT))
            continue;
        acc[n++] = (trace_access){ sched_tensor_view(&w->sink, t), TRACE_W, TRACE_REF_WHOLE, 0,
                                   sched_tensor_nbytes(t) };
        bytes += sched_tensor_nbytes(t);
    }
    return sim_world_host_op(w, label, acc, n, 1000, bytes);
}

static int32_t output_of(const sched_graph *g)
{
    for (int32_t i = g->n_tensors - 1; i >= 0; i--)
        if (g->tensors[i].flags & SCHED_FLAG_OUTPUT)
            return i;
    return -1;
}

/* A host tensor to read output t into. */
static int host_output(sched_backend *cpu, const sched_graph *g, int32_t t, const char *name,
                       sched_tensor *out)
{
    *out = g->tensors[t];
    snprintf(out->name, sizeof out->name, "%s", name);
    out->op = SCHED_OP_NONE;
    out->view_src = -1;
    out->trace_view = TRACE_NONE;
    out->buffer = cpu->iface->buffer_alloc(cpu, name, sched_tensor_nbytes(out), SCHED_BUFFER_HOST);
    out->offset = 0;
    return out->buffer ? 0 : -1;
}

static void progress(int done, int total)
{
    int width = 40, fill = total ? done * width / total : width;
    fprintf(stderr, "\r[%.*s%*s] %d/%d evaluations", fill,
            "########################################", width - fill, "", done, total);
    if (done == total)
        fputc('\n', stderr);
}

int sim_run(const sim_run_opts *o, sim_run_result *res, trace_error *err)
{
    memset(res, 0, sizeof *res);
    sim_model m;
    if (sim_model_load(o->devices ? o->devices : "h100-pcie", &m, err) != 0)
        return 2;
    const sched_policy *pol = sched_policy_find(o->policy ? o->policy : "events");
    if (!pol) {
        trace_error_set(err, TRACE_EUSAGE, "unknown policy '%s' (expected %s)", o->policy,
                        sched_policy_names());
        return 2;
    }
    const char *ar = o->allreduce ? o->allreduce : "ring";
    if (!sched_allreduce_known(ar)) {
        trace_error_set(err, TRACE_EUSAGE, "unknown all-reduce '%s' (expected " SCHED_ALLREDUCE_NAMES ")",
                        ar);
        return 2;
    }
    sched_model_params p;
    char perr[512];
    sched_model_defaults(&p, "llama");
    sched_graph *pg = NULL, *dg = NULL;
    int prompt = o->prompt >= 0 ? o->prompt : 64, tokens = o->tokens >= 0 ? o->tokens : 16;
    if (o->graph_file) {
        dg = sched_graph_parse_file(o->graph_file, err);
        if (!dg)
            return 2;
        prompt = 0;
    } else {
        if (sched_model_parse(o->model ? o->model : "llama", &p, perr, sizeof perr) != 0) {
            trace_error_set(err, TRACE_EUSAGE, "%s", perr);
            return 2;
        }
        p.n_devices = m.gpus;
        if (p.split_mode == SCHED_SPLIT_TENSOR &&
            (p.n_head_kv % m.gpus || p.n_ff % m.gpus || p.n_head % m.gpus)) {
            trace_error_set(err, TRACE_EUSAGE, "tensor split over %d GPUs needs n_head, n_head_kv "
                            "and n_ff divisible by %d", m.gpus, m.gpus);
            return 2;
        }
        int ub = p.ubatch < prompt ? p.ubatch : (prompt > 0 ? prompt : 1);
        if (ub > p.n_ctx) {
            trace_error_set(err, TRACE_EUSAGE, "ubatch %d exceeds n_ctx %d", ub, p.n_ctx);
            return 2;
        }
        p.ubatch = ub;
        dg = sched_model_build(&p, 1);
        pg = prompt > 0 ? sched_model_build(&p, ub) : NULL;
        if (!dg || (prompt > 0 && !pg)) {
            sched_graph_free(dg);
            sched_graph_free(pg);
            trace_error_set(err, TRACE_ENOMEM, "cannot build the %s graph", p.kind);
            return 2;
        }
    }
    sched_graph_prefix_names(dg, "d:");
    if (pg)
        sched_graph_prefix_names(pg, "p:");

    int rc = 1;
    sim_world *w = NULL;
    sched_weights *wts = NULL;
    sched *ps = NULL, *ds = NULL;
    sched_tensor out_p = { .buffer = NULL }, out_d = { .buffer = NULL };
    char serr[512] = "";
    w = sim_world_new(&m, o->sink);
    if (!w)
        goto done;
    sched_backend **backends;
    int nb = sim_world_backends(w, &backends);
    wts = sched_weights_new(backends, nb, dg, &w->sink);
    if (!wts || sched_weights_bind(wts, dg) != 0 || (pg && sched_weights_bind(wts, pg) != 0)) {
        trace_error_set(err, TRACE_ENOMEM, "cannot place the weights");
        goto done;
    }
    sched_options so = { .policy = pol, .n_copies = o->n_copies > 0 ? o->n_copies : 2,
                         .allreduce = ar, .allreduce_bf16_min = o->bf16_min,
                         .n_ranks = p.split_mode == SCHED_SPLIT_TENSOR ? m.gpus : 1 };
    so.name = "d";
    ds = sched_new(backends, nb, &so);
    so.name = "p";
    ps = pg ? sched_new(backends, nb, &so) : NULL;
    if (!ds || (pg && !ps)) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    if (sched_plan(ds, dg, serr, sizeof serr) != SCHED_OK ||
        (ps && sched_plan(ps, pg, serr, sizeof serr) != SCHED_OK)) {
        trace_error_set(err, TRACE_EUSAGE, "cannot schedule the graph: %s", serr);
        rc = 2;
        goto done;
    }
    sched_record_graph(ds, &w->sink, 0);
    if (w->sink.iface->meta) {
        char buf[64];
        w->sink.iface->meta(w->sink.ctx, "producer", "syncsim run (simulated)");
        w->sink.iface->meta(w->sink.ctx, "policy", pol->name);
        w->sink.iface->meta(w->sink.ctx, "devices", m.name);
        w->sink.iface->meta(w->sink.ctx, "model", o->graph_file ? o->graph_file : (o->model ? o->model : "llama"));
        snprintf(buf, sizeof buf, "%d", so.n_copies);
        w->sink.iface->meta(w->sink.ctx, "n_copies", buf);
        w->sink.iface->meta(w->sink.ctx, "allreduce", ar);
    }
    int32_t od = output_of(dg), op_ = pg ? output_of(pg) : -1;
    if (od < 0 || host_output(backends[nb - 1], dg, od, "d:logits.host", &out_d) != 0 ||
        (pg && (op_ < 0 || host_output(backends[nb - 1], pg, op_, "p:logits.host", &out_p) != 0))) {
        trace_error_set(err, TRACE_EUSAGE, "the graph has no output tensor");
        rc = 2;
        goto done;
    }

    int n_ub = pg ? (prompt + p.ubatch - 1) / p.ubatch : 0;
    int total = n_ub + tokens;
    bool show = o->progress && total >= 50;
    uint64_t eval = 0;
    for (int u = 0; u < n_ub; u++, eval++) {
        if (set_inputs(w, pg, "set_inputs") != 0 || sched_graph_compute(ps, eval) != SCHED_OK)
            goto hang;
        snprintf(res->prompt_pattern, sizeof res->prompt_pattern, "%s", sched_last_pattern(ps));
        if (show && (eval % 16 == 0))
            progress((int)eval, total);
    }
    if (n_ub && sched_get_output(ps, op_, &out_p) != SCHED_OK)
        goto hang;
    res->prompt_ns = sim_world_now(w);
    uint64_t s0 = sched_count(ds, 's') + sched_count(ds, 'e');
    for (int k = 0; k < tokens; k++, eval++) {
        if (set_inputs(w, dg, "set_inputs") != 0 || sched_graph_compute(ds, eval) != SCHED_OK)
            goto hang;
        snprintf(res->pattern, sizeof res->pattern, "%s", sched_last_pattern(ds));
        if (sched_get_output(ds, od, &out_d) != SCHED_OK)
            goto hang;
        trace_access acc = { sched_tensor_view(&w->sink, &out_d), TRACE_R, TRACE_REF_WHOLE, 0,
                             sched_tensor_nbytes(&out_d) };
        sim_world_host_op(w, "sample", &acc, 1, 2000, 0);
        if (show && (eval % 16 == 0))
            progress((int)eval, total);
    }
    if (show)
        progress(total, total);
    res->decode_ns = sim_world_now(w) - res->prompt_ns;
    res->ns_per_token = tokens ? (double)res->decode_ns / tokens : 0;
    res->syncs_per_token = tokens ? (sched_count(ds, 's') + sched_count(ds, 'e') - s0) / (uint64_t)tokens : 0;
    res->prompt_tokens = prompt;
    res->n_ubatches = n_ub;
    if (sim_world_finish(w) != 0)
        goto hang;
    rc = 0;
    goto stats;
hang:
    sim_world_finish(w);
    trace_error_set(err, TRACE_EUSAGE, "the schedule hangs: the simulated host waits for work "
                    "that can never complete");
    rc = 1;
stats:
    res->stats = *sim_world_stats(w);
    for (int l = 0; l < res->stats.n_links; l++)
        snprintf(res->link_names[l], sizeof res->link_names[l], "%s", sim_world_link_name(w, l));
    res->n_splits = sched_n_splits(ds);
    res->n_copies = sched_n_copies(ds);
    for (int i = 0; i < sched_n_splits(ds); i++)
        res->n_inputs += sched_get_split(ds, i)->n_inputs;
    res->n_gpus = m.gpus;
    if (o->graph_file)
        snprintf(res->desc, sizeof res->desc, "graph %s on %s (%d GPUs + CPU)", o->graph_file,
                 m.name, m.gpus);
    else
        snprintf(res->desc, sizeof res->desc,
                 "%s n_layer=%d n_embd=%d n_head=%d n_head_kv=%d n_ff=%d n_vocab=%d %s on %s "
                 "(%d GPUs + CPU)", p.split_mode == SCHED_SPLIT_TENSOR ? "tp" : p.kind, p.n_layer,
                 p.n_embd, p.n_head, p.n_head_kv, p.n_ff, p.n_vocab, sched_dtype_str(p.dtype),
                 m.name, m.gpus);
done:
    free(out_p.buffer);             /* sim buffers are plain allocations */
    free(out_d.buffer);
    sched_free(ps);
    sched_free(ds);
    sched_weights_free(wts);
    sim_world_free(w);
    sched_graph_free(pg);
    sched_graph_free(dg);
    return rc;
}
