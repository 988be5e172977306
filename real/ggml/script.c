/*
 * script.c -- a configuration as the calls llama.cpp makes, and its text.
 *
 * A configuration (GPUs and their family, copy slots, prompt
 * micro-batches, decode tokens, the model or a graph file, an op the GPUs
 * decline) becomes the graphs (sched/'s generators: the prompt's ubatch
 * graph and the decode graph; or the graph file as the decode graph) and a
 * list of steps, the calls llama.cpp makes on ggml's scheduler (its
 * llama_context::decode and process_ubatch):
 *
 *   each llama_decode (the prompt: one batch of `ubatches` micro-batches;
 *   then one per token), per micro-batch:
 *       eval k; a new graph: reset, build, alloc (or, reusing the graph
 *       built for the previous token: nothing); set_inputs; compute
 *       (async) -- no synchronize between micro-batches;
 *       the last one's output (get_async of the logits);
 *   [end_reset: a reset, as llama.cpp did before set_rows];
 *   then llama_get_logits: sync, read_output.
 *
 * Graph reuse (graph_reuse: the decode tokens after the first) computes the
 * graph again while it is still allocated: is_alloc kept, the same slot.
 * llama.cpp reuses a graph unless it pipelines (#20463). compute_sync makes
 * every compute ggml_backend_sched_graph_compute (a synchronize while the
 * graph is allocated). The twin
 * (twin.c) runs the same steps; the harness reads this text:
 *
 *   syncsim-ggml-script 1
 *   cuda_copy_from_host 0|1
 *   backend NAME FAMILY                      one per backend, the CPU last
 *   unsupported OP                           an op the GPUs decline
 *   graph G N                                then N tensor lines:
 *   t NAME TYPE NE0 NE1 NE2 NE3 OP S0 S1 S2 S3 VIEW_SRC VIEW_OFFS FLAGS HOME USER
 *   weights G                                weights and caches of graph G
 *   sched PARALLEL                           ggml_backend_sched_new (1: slots)
 *   eval E | build G | reset | alloc | set_inputs | compute | compute_sync |
 *   output | sync | read_output
 *   input NAME V0 V1 ...                     i32 values the next set_inputs writes
 *
 * OP is sched/'s word (sched_op_str), sources and VIEW_SRC tensor indices
 * of the same graph (-1: none), FLAGS sched/'s SCHED_FLAG_* bits.
 */
#include "rggml.h"
#include "rggml_int.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

/* The families whose semantics the harness has (harness/syncsim_ggml.c). */
static const char *const harness_families[] = { "cuda", "sycl", "noasync", NULL };

bool rggml_family_known(const char *word)
{
    for (int i = 0; harness_families[i]; i++)
        if (strcmp(harness_families[i], word) == 0)
            return sched_copy_family(word) != NULL;
    return false;
}

const char *rggml_family_at(int i)
{
    return i >= 0 && i < (int)(sizeof harness_families / sizeof *harness_families)
               ? harness_families[i] : NULL;
}


const char *rggml_family_names(void)
{
    /* built once from the table, so a new family needs no message edits */
    static char names[64];
    return names[0] ? names : sched_words(rggml_family_at, names, sizeof names);
}

static const char *family_of(const rggml_config *c) { return c->family ? c->family : "cuda"; }

void rggml_config_describe(const rggml_config *c, char *buf, size_t cap)
{
    char model[64];
    if (c->graph_file) {
        const char *slash = strrchr(c->graph_file, '/');
        snprintf(model, sizeof model, "%.60s", slash ? slash + 1 : c->graph_file);
    } else {
        snprintf(model, sizeof model, "%.*s", (int)strcspn(c->model, ":"), c->model);
    }
    int n = snprintf(buf, cap, "%s, %d GPU%s (%s), %d cop%s", model, c->n_gpus,
                     c->n_gpus == 1 ? "" : "s", family_of(c), c->copies,
                     c->copies == 1 ? "y" : "ies");
    if (c->ubatches > 0 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", %d micro-batch%s", c->ubatches,
                      c->ubatches == 1 ? "" : "es");
    if (c->fallback && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", %s on the CPU", c->fallback);
    if (c->compute_sync && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", graph_compute");
    if (c->end_reset && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ", reset at each decode's end");
}

static int step(rggml_script *s, rggml_step_kind k, int arg)
{
    size_t cap = (size_t)s->cap_steps;
    if (trace_grow((void **)&s->steps, &cap, (size_t)s->n_steps + 1, sizeof *s->steps) != 0)
        return -1;
    s->cap_steps = (int)cap;
    s->steps[s->n_steps++] = (rggml_step){ k, arg };
    return 0;
}

/* One llama_decode of `n` micro-batches of graph g from evaluation *eval;
 * reuse: its graph is the one built before, still allocated. */
static int decode(rggml_script *s, int g, int n, bool reuse, int *eval)
{
    const rggml_config *c = &s->cfg;
    int rc = 0;
    for (int k = 0; k < n; k++) {
        rc |= step(s, RGGML_EVAL, (*eval)++);
        if (!reuse) {
            rc |= step(s, RGGML_RESET, 0);
            rc |= step(s, RGGML_BUILD, g);
            rc |= step(s, RGGML_ALLOC, 0);
        }
        rc |= step(s, RGGML_SET_INPUTS, *eval - 1);
        rc |= step(s, c->compute_sync ? RGGML_COMPUTE_SYNC : RGGML_COMPUTE, 0);
        if (k == n - 1)
            rc |= step(s, RGGML_OUTPUT, 0);
    }
    if (c->end_reset)
        rc |= step(s, RGGML_RESET, 0);
    rc |= step(s, RGGML_SYNC, 0);
    rc |= step(s, RGGML_READ_OUTPUT, 0);
    return rc;
}

rggml_script *rggml_script_new(const rggml_config *c, trace_error *err)
{
    rggml_script *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return NULL;
    }
    s->cfg = *c;
    err->status = TRACE_EUSAGE;
    if (c->n_gpus < 1 || c->n_gpus > 8 || c->copies < 1 || c->copies > 16 || c->ubatches < 0 ||
        c->tokens < 0 || !rggml_family_known(family_of(c))) {
        snprintf(err->msg, sizeof err->msg, "a configuration out of range (1-8 GPUs, 1-16 copies, "
                 "a family of %s)", rggml_family_names());
        goto fail;
    }
    if (c->model) {
        char e[256];
        if (sched_model_parse(c->model, &s->p, e, sizeof e) != 0) {
            snprintf(err->msg, sizeof err->msg, "%s", e);
            goto fail;
        }
        s->p.n_devices = c->n_gpus;
        if (c->ubatches > 0 && !(s->graph[0] = sched_model_build(&s->p, s->p.ubatch)))
            goto no_graph;
        if (!(s->graph[1] = sched_model_build(&s->p, 1)))
            goto no_graph;
    } else if (c->graph_file) {
        if (!(s->graph[1] = sched_graph_parse_file(c->graph_file, err)))
            goto fail;
        s->cfg.ubatches = 0;
    } else {
        snprintf(err->msg, sizeof err->msg, "a configuration needs a model or a graph file");
        goto fail;
    }
    int eval = 0, rc = 0;
    if (s->cfg.ubatches > 0)
        rc |= decode(s, 0, s->cfg.ubatches, false, &eval);
    for (int t = 0; t < c->tokens; t++)
        rc |= decode(s, 1, 1, t > 0 && c->graph_reuse && !c->end_reset, &eval);
    if (rc == 0)
        return s;
    snprintf(err->msg, sizeof err->msg, "out of memory");
    goto fail;
no_graph:
    snprintf(err->msg, sizeof err->msg, "cannot build the graphs of %s",
             c->model ? c->model : c->graph_file);
fail:
    rggml_script_free(s);
    return NULL;
}

void rggml_script_free(rggml_script *s)
{
    if (!s)
        return;
    sched_graph_free(s->graph[0]);
    sched_graph_free(s->graph[1]);
    free(s->steps);
    free(s);
}

int32_t rggml_input_value(const rggml_script *s, const sched_tensor *t, int eval, int64_t i)
{
    if (t->type == SCHED_I32 && strstr(t->name, "ffn_ids") && s->p.n_expert > 0)
        return sched_moe_ids((uint64_t)eval, i, s->p.n_expert);
    return 0;
}

static void write_graph(FILE *out, int k, const sched_graph *g)
{
    fprintf(out, "graph %d %d\n", k, g->n_tensors);
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        fprintf(out, "t %s %s %lld %lld %lld %lld %s %d %d %d %d %d %llu %u %d %d\n", t->name,
                sched_dtype_str(t->type), (long long)t->ne[0], (long long)t->ne[1],
                (long long)t->ne[2], (long long)t->ne[3], sched_op_str(t->op), t->src[0],
                t->src[1], t->src[2], t->src[3], t->view_src, (unsigned long long)t->view_offs,
                t->flags, t->home, t->user_backend);
    }
}

int rggml_script_write(const rggml_script *s, FILE *out)
{
    const rggml_config *c = &s->cfg;
    fprintf(out, "syncsim-ggml-script 1\n");
    fprintf(out, "cuda_copy_from_host %d\n", c->cuda_copy_from_host ? 1 : 0);
    for (int i = 0; i < c->n_gpus; i++)
        fprintf(out, "backend GPU%d %s\n", i, family_of(c));
    fprintf(out, "backend CPU cpu\n");
    if (c->fallback)
        fprintf(out, "unsupported %s\n", c->fallback);
    for (int k = 0; k < 2; k++)
        if (s->graph[k])
            write_graph(out, k, s->graph[k]);
    fprintf(out, "weights 1\n");
    fprintf(out, "sched %d\n", c->copies > 1 ? 1 : 0);
    for (int i = 0; i < s->n_steps; i++) {
        const rggml_step *st = &s->steps[i];
        switch (st->kind) {
        case RGGML_EVAL: fprintf(out, "eval %d\n", st->arg); break;
        case RGGML_BUILD: fprintf(out, "build %d\n", st->arg); break;
        case RGGML_RESET: fprintf(out, "reset\n"); break;
        case RGGML_ALLOC: fprintf(out, "alloc\n"); break;
        case RGGML_SET_INPUTS: {
            /* the i32 inputs that carry values (the MoE ids) */
            int g = 1;
            for (int j = i; j >= 0; j--)
                if (s->steps[j].kind == RGGML_BUILD) {
                    g = s->steps[j].arg;
                    break;
                }
            const sched_graph *gr = s->graph[g] ? s->graph[g] : s->graph[1];
            for (int32_t t = 0; t < gr->n_tensors; t++) {
                const sched_tensor *x = &gr->tensors[t];
                if (!(x->flags & SCHED_FLAG_INPUT) || x->type != SCHED_I32 ||
                    rggml_input_value(s, x, st->arg, 0) < 0 || !strstr(x->name, "ffn_ids"))
                    continue;
                fprintf(out, "input %s", x->name);
                for (int64_t e = 0; e < sched_tensor_nelements(x); e++)
                    fprintf(out, " %d", rggml_input_value(s, x, st->arg, e));
                fprintf(out, "\n");
            }
            fprintf(out, "set_inputs\n");
            break;
        }
        case RGGML_COMPUTE: fprintf(out, "compute\n"); break;
        case RGGML_COMPUTE_SYNC: fprintf(out, "compute_sync\n"); break;
        case RGGML_OUTPUT: fprintf(out, "output\n"); break;
        case RGGML_SYNC: fprintf(out, "sync\n"); break;
        case RGGML_READ_OUTPUT: fprintf(out, "read_output\n"); break;
        }
    }
    return ferror(out) ? -1 : 0;
}

int rggml_calls_add(rggml_calls *c, const char *line)
{
    size_t cap = (size_t)c->cap;
    if (trace_grow((void **)&c->line, &cap, (size_t)c->n + 1, sizeof *c->line) != 0)
        return -1;
    c->cap = (int)cap;
    if (!(c->line[c->n] = strdup(line)))
        return -1;
    c->n++;
    return 0;
}

void rggml_calls_free(rggml_calls *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->line[i]);
    free(c->line);
    memset(c, 0, sizeof *c);
}

static int calls_read(const char *path, rggml_calls *c)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[1024];
    while (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        if (strncmp(buf, "unrecorded_waits ", 17) == 0) {
            c->unrecorded_waits = atoll(buf + 17);
            continue;
        }
        if (rggml_calls_add(c, buf) != 0) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int rggml_run(const char *harness, const rggml_script *s, const char *dir, const char *name,
              char *trace_path, size_t cap, rggml_calls *calls, trace_error *err)
{
    char script[PATH_MAX], callp[PATH_MAX], errp[PATH_MAX];
    rggml_strf(script, sizeof script, "%s/%s.script", dir, name);
    rggml_strf(trace_path, cap, "%s/%s.trace", dir, name);
    rggml_strf(callp, sizeof callp, "%s/%s.calls", dir, name);
    rggml_strf(errp, sizeof errp, "%s/%s.stderr", dir, name);
    err->status = TRACE_EUSAGE;
    FILE *f = fopen(script, "w");
    if (!f || rggml_script_write(s, f) != 0 || fclose(f) != 0) {
        snprintf(err->msg, sizeof err->msg, "cannot write %.300s: %s", script, strerror(errno));
        return -1;
    }
    char *argv[] = { (char *)harness, script, trace_path, callp, NULL };
    int st = rggml_spawn(argv, errp, false);
    if (st < 0) {
        snprintf(err->msg, sizeof err->msg, "cannot run %.300s: %s", harness, strerror(errno));
        return -1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char line[600];
        rggml_log_line(errp, line, sizeof line);
        if (WIFSIGNALED(st))
            snprintf(err->msg, sizeof err->msg, "ggml stopped (%s)%s%s", strsignal(WTERMSIG(st)),
                     line[0] ? ": " : "", line);
        else
            snprintf(err->msg, sizeof err->msg, "the harness exited %d%s%s", WEXITSTATUS(st),
                     line[0] ? ": " : "", line);
        return -1;
    }
    memset(calls, 0, sizeof *calls);
    if (calls_read(callp, calls) != 0) {
        snprintf(err->msg, sizeof err->msg, "cannot read %.300s", callp);
        return -1;
    }
    return 0;
}
