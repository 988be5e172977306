/*
 * sched.c -- running splits under a sync policy (ggml's compute_splits).
 *
 * For each split, in order:
 *   0. a split without inputs whose backend's memory other backends read
 *      waits for the previous split (policy.no_input_wait);
 *   1. its input copies for slot cur_copy, each guarded as the policy
 *      says (a sync, or the slot's event: the host waits for it before a
 *      blocking copy, the copying queue waits for it before an async one);
 *      a copy from another device runs on the source's stream after the
 *      work that produced it and hands over with an event the split's
 *      stream waits for (ggml-cuda's cpy_tensor_async);
 *   2. the graph launch (asynchronous where the backend is);
 *   3. the record of the (backend, slot) event.
 * Where the policy says so (the ggml-* rows), ggml's variants: syncs
 * around every split, a split without inputs blocking the host on the
 * previous backend after any change of backend (#26040), records only
 * after splits with inputs, the split's stream waiting for the slot event.
 * The slot (cur_copy) of an evaluation is chosen by sched_alloc_graph:
 * with ggml's copy slots (policy.ggml_slots) the one after the last
 * allocated, 0 after a synchronize, and each user input has one host copy
 * per slot; otherwise cur_copy rotates after every evaluation. With
 * n_copies > 1 an evaluation's copies go to other slots while the previous
 * one's may still be read.
 *
 * What the calls add up to (the sync pattern, syncs per token) is read
 * from the trace they make (sched_rec, traces/pattern.c), not counted here.
 */
#include "sched_int.h"

#include <stdlib.h>
#include <string.h>

struct sched_weights {
    sched_buffer *buf[SCHED_MAX_BACKENDS];
    uint64_t bytes[SCHED_MAX_BACKENDS];
    int n_backends;
    struct weight_slot { char name[SCHED_NAME_MAX]; int backend; uint64_t offset; uint32_t view; } *slots;
    int n_slots;
};

static const char *bname(sched_backend *b) { return b->iface->get_name(b); }
static int realloc_signature(sched *s);

sched_weights *sched_weights_new(sched_backend **backends, int n_backends, const sched_graph *g,
                                 sched_sink *sink)
{
    if (n_backends < 1 || n_backends > SCHED_MAX_BACKENDS)
        return NULL;
    sched_weights *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->n_backends = n_backends;
    w->slots = calloc((size_t)g->n_tensors + 1, sizeof *w->slots);
    if (!w->slots)
        goto fail;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (!(t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) || t->op != SCHED_OP_NONE)
            continue;
        int b = t->home >= 0 && t->home < n_backends - 1 ? t->home : n_backends - 1;
        struct weight_slot *ws = &w->slots[w->n_slots++];
        snprintf(ws->name, sizeof ws->name, "%s", t->name);
        ws->backend = b;
        ws->offset = w->bytes[b];
        w->bytes[b] += (sched_tensor_nbytes(t) + 255) & ~(uint64_t)255;
    }
    for (int b = 0; b < n_backends; b++) {
        if (!w->bytes[b])
            continue;
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "weights.%s", bname(backends[b]));
        w->buf[b] = backends[b]->iface->buffer_alloc(backends[b], name, w->bytes[b],
                                                     SCHED_BUFFER_WEIGHTS);
        if (!w->buf[b])
            goto fail;
    }
    for (int i = 0; i < w->n_slots; i++) {
        struct weight_slot *ws = &w->slots[i];
        int32_t ti = sched_graph_find(g, ws->name);
        ws->view = sink->iface->view(sink->ctx, ws->name, w->buf[ws->backend]->trace_id, ws->offset,
                                     sched_tensor_nbytes(&g->tensors[ti]));
    }
    return w;
fail:
    sched_weights_free(w);
    return NULL;
}

int sched_weights_bind(const sched_weights *w, sched_graph *g)
{
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) || t->op != SCHED_OP_NONE)
            continue;
        int k;
        for (k = 0; k < w->n_slots; k++)
            if (strcmp(w->slots[k].name, t->name) == 0)
                break;
        if (k == w->n_slots)
            return -1;
        t->buffer = w->buf[w->slots[k].backend];
        t->offset = w->slots[k].offset;
        t->trace_view = w->slots[k].view;
    }
    return 0;
}

void sched_weights_free(sched_weights *w)
{
    if (!w)
        return;
    for (int b = 0; b < w->n_backends; b++)
        if (w->buf[b] && w->buf[b]->backend->iface->buffer_free)
            w->buf[b]->backend->iface->buffer_free(w->buf[b]->backend, w->buf[b]);
    free(w->slots);
    free(w);
}

uint64_t sched_weights_bytes(const sched_weights *w, int backend)
{
    return backend >= 0 && backend < w->n_backends ? w->bytes[backend] : 0;
}

/* ------------------------------------------------------------------ */

sched *sched_new(sched_backend **backends, int n_backends, const sched_options *opts)
{
    if (n_backends < 1 || n_backends > SCHED_MAX_BACKENDS)
        return NULL;
    sched *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    for (int i = 0; i < n_backends; i++)
        s->backends[i] = backends[i];
    s->n_backends = n_backends;
    if (opts)
        s->opts = *opts;
    if (!s->opts.name)
        s->opts.name = "g";
    s->policy = s->opts.policy ? s->opts.policy : sched_policy_find("events");
    s->n_copies = s->opts.n_copies > 0 ? s->opts.n_copies : 1;
    if (s->n_copies > SCHED_MAX_COPIES)
        s->n_copies = SCHED_MAX_COPIES;
    s->last_split_backend = -1;
    for (int b = 0; s->opts.copy_traits && b < n_backends; b++)
        s->copy[b] = s->opts.copy_traits[b];
    /* ggml creates the slot events only when there is more than one slot. */
    bool events = !(s->policy->ggml_slots && s->n_copies < 2);
    sched *o = s->opts.share;
    if (o && (o->n_backends != n_backends || o->n_copies != s->n_copies || o->opts.share)) {
        free(s);
        return NULL;
    }
    s->shared = o != NULL;
    for (int b = 0; o && b < n_backends; b++)
        for (int c = 0; c < s->n_copies; c++)
            s->events[b][c] = o->events[b][c];
    for (int b = 0; b < n_backends && !o; b++) {
        sched_backend *be = backends[b];
        if (!be->iface->event_new || !events)
            continue;
        for (int c = 0; c < s->n_copies; c++) {
            char name[SCHED_NAME_MAX];
            snprintf(name, sizeof name, "%.24s.ev.%.24s.%d", s->opts.name, bname(be), c);
            s->events[b][c] = be->iface->event_new(be, name);
            if (!s->events[b][c]) {
                sched_free(s);
                return NULL;
            }
        }
    }
    return s;
}

void sched_free(sched *s)
{
    if (!s)
        return;
    for (int b = 0; b < s->n_backends; b++) {
        sched_backend *be = s->backends[b];
        for (int c = 0; c < SCHED_MAX_COPIES && !s->shared; c++)
            if (s->events[b][c] && be->iface->event_free)
                be->iface->event_free(be, s->events[b][c]);
        for (int d = 0; d < s->n_backends; d++)
            if (s->xfer[b][d] && be->iface->event_free)
                be->iface->event_free(be, s->xfer[b][d]);
        if (s->arena[b] && !s->shared && be->iface->buffer_free)
            be->iface->buffer_free(be, s->arena[b]);
        if (s->wire[b] && be->iface->buffer_free)
            be->iface->buffer_free(be, s->wire[b]);
    }
    sched_backend *cpu = s->backends[s->n_backends - 1];
    if (s->in_slot) {
        for (int32_t i = 0; i < s->n_orig * s->n_copies; i++)
            if (s->in_slot[i] && cpu->iface->buffer_free)
                cpu->iface->buffer_free(cpu, s->in_slot[i]);
    } else if (s->graph && !s->in_off) {     /* (ggml_alloc: the inputs are in the arena) */
        for (int32_t i = 0; i < s->graph->n_tensors; i++) {
            sched_tensor *t = &s->graph->tensors[i];
            if ((t->flags & SCHED_FLAG_INPUT) && t->buffer && t->buffer->usage == SCHED_BUFFER_HOST &&
                cpu->iface->buffer_free)
                cpu->iface->buffer_free(cpu, t->buffer);
        }
    }
    if (s->moe_ids_buf && cpu->iface->buffer_free)
        cpu->iface->buffer_free(cpu, s->moe_ids_buf);
    free(s->moe_ids);
    free(s->moe_used);
    free(s->moe_views);
    sched_free_splits(s);
    free(s->order);
    free(s->allocs);
    free(s->copy_map);
    free(s->sig_backend);
    free(s->sig_bytes);
    free(s->in_slot);
    free(s->in_off);
    free(s->in_view);
    sched_ar_free(s);
    free(s->ar_rank);
    free(s->ar_n);
    free(s);
}

static sched_status make_order(sched *s, sched_graph *g)
{
    free(s->order);
    s->order = malloc((size_t)(g->n_tensors + 1) * sizeof *s->order);
    if (!s->order)
        return SCHED_ENOMEM;
    s->n_order = 0;
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].op != SCHED_OP_NONE)
            s->order[s->n_order++] = i;
    return SCHED_OK;
}

sched_status sched_assign(sched *s, sched_graph *g, char *err, size_t err_cap)
{
    s->graph = g;
    sched_status st = make_order(s, g);
    if (st != SCHED_OK)
        return st;
    return sched_assign_passes(s, g, err, err_cap);
}

/* Each all_reduce node's rank and group size, its group's strategy and
 * the tensors of its steps (allreduce.c), and per backend a wire buffer
 * for its opaque bf16 all-reduces (the largest one's bf16 bytes). */
static sched_status plan_allreduce(sched *s, char *err, size_t err_cap)
{
    const sched_graph *g = s->graph;
    free(s->ar_rank);
    free(s->ar_n);
    s->ar_rank = calloc((size_t)g->n_tensors + 1, sizeof *s->ar_rank);
    s->ar_n = calloc((size_t)g->n_tensors + 1, sizeof *s->ar_n);
    if (!s->ar_rank || !s->ar_n)
        return SCHED_ENOMEM;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].op != SCHED_OP_ALL_REDUCE)
            continue;
        int rank, n;
        sched_allreduce_group(g, i, &rank, &n);
        s->ar_rank[i] = (int16_t)rank;
        s->ar_n[i] = (int16_t)n;
    }
    sched_status st = sched_ar_plan(s, err, err_cap);
    if (st != SCHED_OK)
        return st;
    g = s->graph;
    uint64_t wire[SCHED_MAX_BACKENDS] = { 0 };
    for (int32_t i = 0; i < s->n_orig; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (t->op != SCHED_OP_ALL_REDUCE || t->backend < 0 || sched_ar_is_expanded(s, i))
            continue;
        int64_t ne = sched_tensor_nelements(&g->tensors[t->src[0]]);
        if (ne >= sched_allreduce_bf16_from((sched_allreduce)s->ar_algo[i], s->ar_n[i],
                                            s->opts.allreduce_bf16_min)) {
            uint64_t bytes = (uint64_t)ne * sched_dtype_size(SCHED_BF16);
            if (bytes > wire[t->backend])
                wire[t->backend] = bytes;
        }
    }
    for (int b = 0; b < s->n_backends; b++) {
        if (!wire[b] || (s->wire[b] && s->wire[b]->size >= wire[b]))
            continue;
        sched_backend *be = s->backends[b];
        if (s->wire[b] && be->iface->buffer_free)
            be->iface->buffer_free(be, s->wire[b]);
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.20s.allreduce_bf16.%.24s", s->opts.name, bname(be));
        s->wire[b] = be->iface->buffer_alloc(be, name, wire[b], SCHED_BUFFER_COMPUTE);
        if (!s->wire[b]) {
            snprintf(err, err_cap, "cannot allocate the bf16 all-reduce buffer on %s", bname(be));
            return SCHED_EBACKEND;
        }
    }
    return SCHED_OK;
}

sched_status sched_plan(sched *s, sched_graph *g, char *err, size_t err_cap)
{
    sched_status st = sched_assign(s, g, err, err_cap);
    if (st != SCHED_OK)
        return st;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if ((t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) && !t->buffer) {
            snprintf(err, err_cap, "weight '%s' has no buffer (bind the weights first)", t->name);
            return SCHED_EUSAGE;
        }
    }
    s->n_orig = g->n_tensors;
    st = sched_make_splits(s, err, err_cap);
    if (st != SCHED_OK)
        return st;
    /* (source, backend) -> first copy, for src_of and the allocator. */
    free(s->copy_map);
    s->copy_map = malloc((size_t)s->n_orig * (size_t)s->n_backends * sizeof *s->copy_map);
    if (!s->copy_map)
        return SCHED_ENOMEM;
    for (int32_t i = 0; i < s->n_orig * s->n_backends; i++)
        s->copy_map[i] = -1;
    for (int i = 0; i < s->n_splits; i++)
        for (int j = 0; j < s->splits[i].n_inputs; j++)
            s->copy_map[s->splits[i].inputs[j] * s->n_backends + s->splits[i].backend] =
                s->splits[i].input_copy[j];
    st = sched_allocate(s, err, err_cap);
    if (st != SCHED_OK)
        return st;
    /* User inputs: one host buffer each, written by the user; with ggml's
     * copy slots one per slot (ggml's graph-input copies), the one of the
     * current slot pointed at by sched_alloc_graph. */
    sched_backend *cpu = s->backends[s->n_backends - 1];
    bool slots = s->policy->ggml_slots && s->n_copies > 1;
    size_t n_slot = (size_t)s->n_orig * (size_t)s->n_copies;
    free(s->in_slot);
    free(s->in_view);
    s->in_slot = NULL;
    s->in_view = NULL;
    /* under ggml's allocator the inputs are in the CPU's arena already (s->in_off) */
    if (slots && ((!s->in_off && !(s->in_slot = calloc(n_slot, sizeof *s->in_slot))) ||
                  !(s->in_view = malloc(n_slot * sizeof *s->in_view))))
        return SCHED_ENOMEM;
    for (size_t i = 0; slots && i < n_slot; i++)
        s->in_view[i] = TRACE_NONE;
    for (int32_t i = 0; i < s->n_orig; i++) {
        sched_tensor *t = &g->tensors[i];
        if (!(t->flags & SCHED_FLAG_INPUT) || t->buffer)
            continue;
        for (int c = 0; c < (slots ? s->n_copies : 1); c++) {
            char name[SCHED_NAME_MAX];
            snprintf(name, sizeof name, slots ? "%.50s#%d" : "%.50s", t->name, c);
            sched_buffer *buf = cpu->iface->buffer_alloc(cpu, name, sched_tensor_nbytes(t),
                                                         SCHED_BUFFER_HOST);
            if (!buf) {
                snprintf(err, err_cap, "cannot allocate the host buffer of input '%s'", t->name);
                return SCHED_EBACKEND;
            }
            if (slots)
                s->in_slot[(size_t)i * (size_t)s->n_copies + (size_t)c] = buf;
            if (c == s->cur_copy)
                t->buffer = buf;
        }
        t->offset = 0;
        t->trace_view = t->buffer->trace_id;
    }
    /* Views of inputs name the input's buffer. */
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (t->view_src >= 0 && !t->buffer) {
            t->buffer = g->tensors[t->view_src].buffer;
            t->offset = g->tensors[t->view_src].offset + t->view_offs;
        }
    }
    if ((st = plan_allreduce(s, err, err_cap)) != SCHED_OK)
        return st;
    return realloc_signature(s) == 0 ? SCHED_OK : SCHED_ENOMEM;
}

int sched_n_splits(const sched *s) { return s->n_splits; }
const sched_split *sched_get_split(const sched *s, int i) { return &s->splits[i]; }
int sched_n_copies(const sched *s) { return s->n_copies; }
int sched_cur_copy(const sched *s) { return s->cur_copy; }
int sched_n_copy_tensors(const sched *s) { return s->n_copy_tensors; }
uint64_t sched_arena_size(const sched *s, int b) { return s->arena_size[b]; }
sched_backend *sched_backend_at(const sched *s, int i) { return s->backends[i]; }
int sched_n_backends(const sched *s) { return s->n_backends; }
const sched_policy *sched_get_policy(const sched *s) { return s->policy; }
sched_graph *sched_get_graph(const sched *s) { return s->graph; }

void sched_exec_group(const sched_exec *x, int32_t node, int *rank, int *n)
{
    const sched *s = x->sched;
    *rank = s->ar_rank[node];
    *n = s->ar_n[node];
}

bool sched_exec_bf16(const sched_exec *x, int32_t node)
{
    const sched *s = x->sched;
    const sched_tensor *t = &x->graph->tensors[node];
    if (!s->ar_algo || node >= s->n_orig || sched_ar_is_expanded(s, node))
        return false;
    return sched_tensor_nelements(&x->graph->tensors[t->src[0]]) >=
           sched_allreduce_bf16_from((sched_allreduce)s->ar_algo[node], s->ar_n[node],
                                     x->allreduce_bf16_min);
}

/* ------------------------------------------------------------------ */
/* Running.                                                            */

static int32_t exec_src_of(const sched_exec *x, int32_t node, int i)
{
    const sched *s = x->sched;
    const sched_graph *g = x->graph;
    int32_t src = g->tensors[node].src[i];
    if (src < 0 || src >= s->n_orig)
        return src;
    /* A split input is the tensor read, a view as the view (split.c). */
    int32_t first = s->copy_map[src * s->n_backends + g->tensors[node].backend];
    return first >= 0 ? first + x->cur_copy : src;
}

int32_t sched_exec_src_of(const sched_exec *x, int32_t node, int i) { return exec_src_of(x, node, i); }

int32_t sched_exec_src_of_sched(sched *s, int32_t node, int i)
{
    sched_exec x = { .graph = s->graph, .cur_copy = s->cur_copy, .sched = s };
    return exec_src_of(&x, node, i);
}

static sched_status call(int rc) { return rc < 0 ? SCHED_EBACKEND : SCHED_OK; }

static sched_status sync_backend(sched *s, int b)
{
    sched_backend *be = s->backends[b];
    if (!be->iface->synchronize)
        return SCHED_OK;            /* synchronous backend: nothing in flight */
    return call(be->iface->synchronize(be));
}

static bool has_events(const sched *s, int b) { return s->events[b][0] != NULL; }

/* The trace view "NAME#c" of bytes [off, off + size) of buf, declared
 * once into *view (TRACE_NONE before; none without a sink). */
static uint32_t slot_view(sched *s, uint32_t *view, const char *name, int c, const sched_buffer *buf,
                          uint64_t off, uint64_t size)
{
    if (*view == TRACE_NONE && s->opts.sink) {
        char nm[SCHED_NAME_MAX];
        snprintf(nm, sizeof nm, "%.50s#%d", name, c);
        *view = s->opts.sink->iface->view(s->opts.sink->ctx, nm, buf->trace_id, off, size);
    }
    return *view;
}

/* Points every user input (and the views of one) at its copy for slot c:
 * its host buffer, or its place in the CPU's arena (ggml_alloc). */
static void point_inputs(sched *s, int c)
{
    sched_graph *g = s->graph;
    size_t n = (size_t)s->n_copies;
    for (int32_t i = 0; i < s->n_orig; i++) {
        sched_tensor *t = &g->tensors[i];
        size_t at = (size_t)i * n + (size_t)c;
        if (s->in_off) {
            if (s->in_off[at] == UINT64_MAX)
                continue;
            t->buffer = s->arena[t->backend];
            t->offset = s->in_off[at];
            t->trace_view = slot_view(s, &s->in_view[at], t->name, c, t->buffer, t->offset,
                                      sched_tensor_nbytes(t));
            continue;
        }
        sched_buffer *buf = s->in_slot[at];
        if (!buf)
            continue;
        t->buffer = buf;
        t->offset = 0;
        t->trace_view = buf->trace_id;
    }
    for (int32_t i = 0; i < s->n_orig; i++) {
        sched_tensor *t = &g->tensors[i];
        if (t->view_src < 0 || (s->in_off ? s->in_off[(size_t)t->view_src * n] == UINT64_MAX
                                          : !s->in_slot[(size_t)t->view_src * n]))
            continue;
        const sched_tensor *v = &g->tensors[t->view_src];
        /* Its view of this slot's copy, "NAME#c", declared once. */
        t->buffer = v->buffer;
        t->offset = v->offset + t->view_offs;
        t->trace_view = slot_view(s, &s->in_view[(size_t)i * n + (size_t)c], t->name, c,
                                  v->buffer, t->offset, sched_tensor_nbytes(t));
    }
}

/* The graph as ggml-alloc sees it (sched_int.h): ggml's graph_copy has,
 * per split, a dependency on each input (on the input's backend, no bytes)
 * and the input's copy, then the split's nodes; its leafs are the graph's
 * and the copies. Returns 0 or -1 (memory). */
static int realloc_signature(sched *s)
{
    const sched_graph *g = s->graph;
    int32_t n = s->n_order;
    for (int i = 0; i < s->n_splits; i++)
        n += 2 * s->splits[i].n_inputs;
    free(s->sig_backend);
    free(s->sig_bytes);
    s->sig_backend = malloc(((size_t)n + 1) * sizeof *s->sig_backend);
    s->sig_bytes = malloc(((size_t)n + 1) * sizeof *s->sig_bytes);
    if (!s->sig_backend || !s->sig_bytes)
        return -1;
    int32_t k = 0;
    for (int i = 0; i < s->n_splits; i++) {
        const sched_split *sp = &s->splits[i];
        for (int j = 0; j < sp->n_inputs; j++) {
            s->sig_backend[k] = g->tensors[sp->inputs[j]].backend;
            s->sig_bytes[k++] = 0;
            s->sig_backend[k] = sp->backend;
            s->sig_bytes[k++] = sched_tensor_nbytes(&g->tensors[sp->input_copy[j]]);
        }
        for (int q = 0; q < sp->n_nodes; q++) {
            const sched_tensor *t = &g->tensors[sp->nodes[q]];
            s->sig_backend[k] = t->backend;
            s->sig_bytes[k++] = sched_op_is_view(t->op) || t->view_src >= 0 ? 0 : sched_tensor_nbytes(t);
        }
    }
    s->sig_n_nodes = k;
    s->sig_n_leafs = s->n_copy_tensors;
    for (int32_t i = 0; i < s->n_orig; i++)
        s->sig_n_leafs += g->tensors[i].op == SCHED_OP_NONE;
    return 0;
}

/* ggml_gallocr_needs_realloc and backend_ids_changed, on the signatures:
 * nothing reserved yet, another node or leaf count, a node that needs more
 * bytes than were reserved at its place, or a node on another backend than
 * in the graph allocated before. */
static bool needs_realloc(const sched *reserved, const sched *prev, const sched *s)
{
    if (!reserved || reserved->sig_n_nodes != s->sig_n_nodes ||
        reserved->sig_n_leafs != s->sig_n_leafs)
        return true;
    for (int32_t i = 0; i < s->sig_n_nodes; i++)
        if (s->sig_bytes[i] > reserved->sig_bytes[i])
            return true;
    int32_t n = prev && prev->sig_n_nodes < s->sig_n_nodes ? prev->sig_n_nodes : s->sig_n_nodes;
    for (int32_t i = 0; prev && i < n; i++)
        if (prev->sig_backend[i] != s->sig_backend[i])
            return true;
    return false;
}

sched_status sched_alloc_graph(sched *s)
{
    if (!s->graph || !s->splits)
        return SCHED_EUSAGE;
    /* ggml-alloc reserves again when the graph does not fit what it
     * reserved for, and ggml synchronizes every backend first, leaving the
     * slot alone (ggml_backend_sched_alloc_splits). */
    sched *root = s->opts.share ? s->opts.share : s;
    s->reserved_now = false;
    if (s->policy->ggml_alloc) {
        bool realloc = needs_realloc(root->reserved, root->last_alloc, s);
        root->last_alloc = s;
        s->reserved_now = realloc;
        if (realloc) {
            root->reserved = s;
            for (int b = 0; b < s->n_backends; b++) {
                sched_status st = sync_backend(s, b);
                if (st != SCHED_OK)
                    return st;
            }
        }
    }
    /* ggml allocates again whenever asked, allocated or not; syncsim's own
     * policies keep the slot their last evaluation rotated to. */
    if (s->policy->ggml_slots) {
        s->cur_copy = s->next_copy;
        s->next_copy = (s->next_copy + 1) % s->n_copies;
    } else if (s->is_alloc) {
        return SCHED_OK;
    }
    if (s->in_slot || (s->in_off && s->n_copies > 1))
        point_inputs(s, s->cur_copy);
    s->is_alloc = true;
    return SCHED_OK;
}

bool sched_alloc_reserved(const sched *s) { return s->reserved_now; }

uint64_t sched_input_slot_offset(const sched *s, int32_t t, int c)
{
    if (!s->in_off || t < 0 || t >= s->n_orig || c < 0 || c >= s->n_copies)
        return UINT64_MAX;
    return s->in_off[(size_t)t * (size_t)s->n_copies + (size_t)c];
}

/* #26040: the host blocks until the previous split's backend is done. */
static sched_status block_on_previous(sched *s, int prev)
{
    sched_backend *pb = s->backends[prev];
    sched_event *ev = s->events[prev][s->cur_copy];
    if (!ev)
        return sync_backend(s, prev);
    if (ev->n_records == 0)
        return SCHED_OK;            /* never recorded: complete */
    return call(pb->iface->event_synchronize(pb, ev));
}

/* Step 0: wait for the previous split (allocator reuse). */
static sched_status wait_previous(sched *s, int b)
{
    int prev = s->last_split_backend;
    if (prev < 0 || prev == b)
        return SCHED_OK;
    sched_backend *be = s->backends[b], *pb = s->backends[prev];
    sched_event *ev = s->last_event[prev];
    if (s->policy->record_after_split && ev) {
        if (be->iface->synchronize && be->iface->event_wait)
            return call(be->iface->event_wait(be, ev));
        return call(pb->iface->event_synchronize(pb, ev));
    }
    return sync_backend(s, prev);
}

/* Backend b's stream waits for ev; where b's family makes an event wait
 * block the host (ggml-sycl's sycl::event::wait()), the host waits. */
static sched_status stream_wait(sched *s, int b, sched_event *ev)
{
    sched_backend *be = s->backends[b];
    if (s->copy[b] && s->copy[b]->event_wait_blocks_host)
        return call(be->iface->event_synchronize(be, ev));
    return call(be->iface->event_wait(be, ev));
}

/* Whether backend b has a stream and events (an asynchronous device). */
static bool is_async_device(const sched *s, int b)
{
    const sched_backend_iface *i = s->backends[b]->iface;
    return i->synchronize && i->event_new && i->event_record && i->event_wait;
}

/* The event a copy from device a to device b hands over with. */
static sched_event *xfer_event(sched *s, int a, int b)
{
    if (!s->xfer[a][b]) {
        sched_backend *be = s->backends[a];
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.20s.xfer.%.18s>%.18s", s->opts.name, bname(be),
                 bname(s->backends[b]));
        s->xfer[a][b] = be->iface->event_new(be, name);
    }
    return s->xfer[a][b];
}

/* syncsim's own placement, for backends whose family is not given. */
static const sched_copy_traits syncsim_traits = {
    "syncsim", SCHED_XFER_SOURCE, SCHED_XFER_DEST, false, "syncsim's placement",
};

/* Whether b's family queues a copy from host memory (else the host copies). */
static bool host_copy_async(const sched *s, int b)
{
    const sched_copy_traits *tr = s->copy[b] ? s->copy[b] : &syncsim_traits;
    return tr->host_to_device == SCHED_XFER_DEST &&
           (!tr->host_needs_copy_from_host || s->policy->copy_from_host);
}

/* An asynchronous copy of src (on backend sb) into dst (on b), as b's
 * family makes it: 1 queued, 0 declined, -1 error. Between two devices it
 * runs on the source's stream, after the work that produced src, and b's
 * stream waits for the hand-over event; from host memory b's stream pulls
 * it. */
static int copy_async(sched *s, int sb, int b, sched_tensor *src, sched_tensor *dst)
{
    sched_backend *be = s->backends[b], *sbe = s->backends[sb];
    const sched_copy_traits *tr = s->copy[b] ? s->copy[b] : &syncsim_traits;
    if (sb != b && is_async_device(s, sb) && is_async_device(s, b) &&
        tr->device_to_device == SCHED_XFER_BLOCKING)
        return 0;
    if (!is_async_device(s, sb) && !host_copy_async(s, b))
        return 0;
    if (sb != b && is_async_device(s, sb) && is_async_device(s, b) && sbe->iface->copy_async) {
        sched_event *ev = xfer_event(s, sb, b);
        if (!ev)
            return -1;
        int rc = sbe->iface->copy_async(sbe, be, src, dst);
        if (rc != 1)
            return rc;
        if (sbe->iface->event_record(sbe, ev) != 0 || be->iface->event_wait(be, ev) != 0)
            return -1;
        return 1;
    }
    if (!be->iface->copy_async)
        return 0;
    return be->iface->copy_async(be, sbe, src, dst);
}

int sched_copy_between(sched *s, int sb, int b, sched_tensor *src, sched_tensor *dst)
{
    return copy_async(s, sb, b, src, dst);
}

int32_t sched_moe_ids(uint64_t eval, int64_t i, int64_t n_expert)
{
    uint64_t x = (eval + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)i;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (int32_t)(x % (uint64_t)(n_expert > 0 ? n_expert : 1));
}

/* Whether input j of split sp is a MoE weight ggml copies expert by
 * expert: a weight in host memory read as the experts (src 0) of the
 * split's first node, a mul_mat_id. */
static bool moe_input(const sched *s, const sched_split *sp, int j)
{
    const sched_graph *g = s->graph;
    const sched_tensor *src = &g->tensors[sp->inputs[j]];
    if (sp->n_nodes == 0 || !(src->flags & SCHED_FLAG_WEIGHT) || !src->buffer ||
        !src->buffer->host || src->buffer->usage != SCHED_BUFFER_WEIGHTS)
        return false;
    const sched_tensor *node = &g->tensors[sp->nodes[0]];
    if (node->op != SCHED_OP_MUL_MAT_ID)
        return false;
    return node->src[0] == sp->inputs[j];
}

/* A tensor naming bytes [off, off + size) of t, with its trace view
 * (declared once per range). */
static sched_status moe_range(sched *s, const sched_tensor *t, uint64_t off, uint64_t size,
                              sched_tensor *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.40s[%llu]", t->name, (unsigned long long)off);
    out->type = size % 4 == 0 ? SCHED_I32 : SCHED_F16;
    out->n_dims = 1;
    out->ne[0] = (int64_t)(size / sched_dtype_size(out->type));
    out->ne[1] = out->ne[2] = out->ne[3] = 1;
    for (int i = 0; i < SCHED_MAX_SRC; i++)
        out->src[i] = -1;
    out->view_src = out->copy_of = out->copy_slot = -1;
    out->backend = t->backend;
    out->buffer = t->buffer;
    out->offset = t->offset + off;
    out->trace_view = TRACE_NONE;
    sched_sink *sink = s->opts.sink;
    if (!sink || !t->buffer)
        return SCHED_OK;
    uint32_t parent = t->buffer->trace_id;
    for (int i = 0; i < s->moe_n_views; i++)
        if (s->moe_views[i].of == t->name && s->moe_views[i].parent == parent &&
            s->moe_views[i].offset == out->offset && s->moe_views[i].size == size) {
            out->trace_view = s->moe_views[i].view;
            return SCHED_OK;
        }
    void *n = realloc(s->moe_views, (size_t)(s->moe_n_views + 1) * sizeof *s->moe_views);
    if (!n)
        return SCHED_ENOMEM;
    s->moe_views = n;
    char name[SCHED_NAME_MAX];
    snprintf(name, sizeof name, "%.30s[%llu:%llu]", t->name, (unsigned long long)off,
             (unsigned long long)(off + size));
    out->trace_view = sink->iface->view(sink->ctx, name, parent, out->offset, size);
    s->moe_views[s->moe_n_views].of = t->name;
    s->moe_views[s->moe_n_views].parent = parent;
    s->moe_views[s->moe_n_views].offset = out->offset;
    s->moe_views[s->moe_n_views].size = size;
    s->moe_views[s->moe_n_views].view = out->trace_view;
    s->moe_n_views++;
    return SCHED_OK;
}

/* ggml reads the ids back (a get, then a synchronize of their backend: the
 * host blocks) and marks the experts they name. */
static sched_status moe_read_ids(sched *s, const sched_split *sp, int j, int64_t n_expert)
{
    sched_graph *g = s->graph;
    int32_t node = sp->nodes[0];
    int32_t ids = sched_exec_src_of_sched(s, node, 2);
    int ib = sp->backend;
    /* An ids tensor that is a later input of this split is not copied
     * yet: ggml reads the original, from its own backend. */
    for (int k = j + 1; k < sp->n_inputs; k++)
        if (sp->input_copy[k] + s->cur_copy == ids) {
            ids = sp->inputs[k];
            ib = g->tensors[ids].backend;
        }
    if (ids == s->moe_prev_ids)
        return SCHED_OK;
    const sched_tensor *it = &g->tensors[ids];
    int64_t n = sched_tensor_nelements(it);
    int cpu = s->n_backends - 1;
    sched_backend *cbe = s->backends[cpu], *ibe = s->backends[ib];
    uint64_t bytes = (uint64_t)n * sizeof(int32_t);
    if (!s->moe_ids_buf || s->moe_ids_buf->size < bytes) {
        if (s->moe_ids_buf && cbe->iface->buffer_free)
            cbe->iface->buffer_free(cbe, s->moe_ids_buf);
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.40s.moe_ids", s->opts.name ? s->opts.name : "g");
        s->moe_ids_buf = cbe->iface->buffer_alloc(cbe, name, bytes, SCHED_BUFFER_HOST);
        int32_t *v = realloc(s->moe_ids, (size_t)bytes);
        if (!s->moe_ids_buf || !v)
            return SCHED_ENOMEM;
        s->moe_ids = v;
    }
    /* The host copy: the whole scratch buffer, shaped as the ids. */
    sched_tensor host = *it;
    for (int i = 0; i < SCHED_MAX_SRC; i++)
        host.src[i] = -1;
    host.op = SCHED_OP_NONE;
    host.view_src = -1;
    host.flags = 0;
    host.buffer = s->moe_ids_buf;
    host.offset = 0;
    host.backend = cpu;
    host.trace_view = s->moe_ids_buf->trace_id;
    snprintf(host.name, sizeof host.name, "%.50s.ids", s->opts.name ? s->opts.name : "g");
    sched_status st = SCHED_OK;
    sched_tensor src = *it;
    if (ibe->iface->get_async) {
        st = call(ibe->iface->get_async(ibe, &src, &host));
        if (st == SCHED_OK && !s->policy->moe_no_ids_sync)
            st = sync_backend(s, ib);
    } else {
        if ((st = sync_backend(s, ib)) == SCHED_OK)
            st = call(ibe->iface->copy_sync(ibe, &src, &host));
    }
    if (st != SCHED_OK)
        return st;
    /* The host reads the ids (what the checker orders after the get). */
    if (s->opts.rec && sched_rec_host_read(s->opts.rec, "moe.used_experts", &host) != 0)
        return SCHED_EBACKEND;
    if (!s->opts.read_ids || s->opts.read_ids(s->opts.read_ids_ctx, &host, s->moe_ids, n) != 0)
        for (int64_t i = 0; i < n; i++)
            s->moe_ids[i] = sched_moe_ids(s->n_evals, i, n_expert);
    uint8_t *u = realloc(s->moe_used, (size_t)n_expert);
    if (!u)
        return SCHED_ENOMEM;
    s->moe_used = u;
    memset(u, 0, (size_t)n_expert);
    for (int64_t i = 0; i < n; i++)
        u[((s->moe_ids[i] % n_expert) + n_expert) % n_expert] = 1;
    s->moe_prev_ids = ids;
    return SCHED_OK;
}

/* ggml's used-expert copies: consecutive used experts in one copy from the
 * host weight into the split's copy, queued on the split's stream, each
 * with min(expert, 512) bytes more unless it ends at the last expert. */
static sched_status moe_copy(sched *s, const sched_split *sp, int j, sched_tensor *src,
                             sched_tensor *dst)
{
    sched_backend *be = s->backends[sp->backend];
    int64_t n_expert = src->ne[2];
    uint64_t esize = sched_tensor_nbytes(src) / (uint64_t)n_expert;
    sched_status st = sync_backend(s, src->backend);
    if (st == SCHED_OK)
        st = moe_read_ids(s, sp, j, n_expert);
    for (int64_t first = 0; first < n_expert && st == SCHED_OK;) {
        if (!s->moe_used[first]) {
            first++;
            continue;
        }
        int64_t last = first;
        while (last + 1 < n_expert && s->moe_used[last + 1])
            last++;
        uint64_t pad = last < n_expert - 1 ? (esize < 512 ? esize : 512) : 0;
        uint64_t off = (uint64_t)first * esize, size = (uint64_t)(last - first + 1) * esize + pad;
        sched_tensor a, b;
        if ((st = moe_range(s, src, off, size, &a)) != SCHED_OK ||
            (st = moe_range(s, dst, off, size, &b)) != SCHED_OK)
            break;
        st = be->iface->set_async ? call(be->iface->set_async(be, &a, &b))
                                  : call(be->iface->copy_sync(be, &a, &b));
        first = last + 1;
    }
    return st;
}

/* Step 1: one input copy with its guards. */
static sched_status copy_input(sched *s, const sched_split *sp, int j)
{
    sched_graph *g = s->graph;
    int b = sp->backend;
    sched_backend *be = s->backends[b];
    sched_tensor *src = &g->tensors[sp->inputs[j]];
    sched_tensor *dst = &g->tensors[sp->input_copy[j] + s->cur_copy];
    int sb = src->backend;
    sched_backend *sbe = s->backends[sb];
    bool user = (src->flags & SCHED_FLAG_INPUT) != 0;
    sched_copy_mode mode = user ? s->policy->user_copy : s->policy->input_copy;
    sched_status st = SCHED_OK;

    if (s->policy->before_copy == SCHED_GUARD_SYNC) {
        st = sync_backend(s, b);
    } else if (s->policy->before_copy != SCHED_GUARD_NONE) {
        sched_event *ev = s->events[b][s->cur_copy];
        if (!ev) {
            if (s->policy->before_copy == SCHED_GUARD_EVENT ||
                (s->policy->before_copy == SCHED_GUARD_EVENT_ELSE_SYNC_NO_ASYNC && s->copy[b] &&
                 s->copy[b]->no_cpy_tensor_async))
                st = sync_backend(s, b);
        } else if (ev->n_records > 0 && s->policy->slot_waiter != SCHED_WAITER_COPIER) {
            /* ggml: the host for a user input, the split's stream otherwise
             * (even when the copy runs on the source's stream); with the
             * fix, the source's stream too. */
            st = user ? call(be->iface->event_synchronize(be, ev)) : stream_wait(s, b, ev);
            if (st == SCHED_OK && !user && sb != b && has_events(s, sb) &&
                s->policy->slot_waiter == SCHED_WAITER_GGML_SOURCE)
                st = stream_wait(s, sb, ev);
        } else if (ev->n_records > 0) {
            /* The slot's previous reader must be done before it is overwritten:
             * the host waits for a copy it makes itself; otherwise the queue
             * that runs the copy (the source's, when it has events) waits. */
            if (mode == SCHED_COPY_BLOCKING) {
                st = call(be->iface->event_synchronize(be, ev));
            } else {
                sched_backend *waiter = (!user && has_events(s, sb)) ? sbe : be;
                st = call(waiter->iface->event_wait(waiter, ev));
            }
        }
    }
    if (st != SCHED_OK)
        return st;

    if (!user && moe_input(s, sp, j)) {
        st = moe_copy(s, sp, j, src, dst);
        if (st == SCHED_OK && s->policy->after_copy == SCHED_GUARD_SYNC)
            st = sync_backend(s, b);
        return st;
    }

    bool done = false;
    if (mode == SCHED_COPY_ASYNC) {
        if (user && be->iface->set_async && host_copy_async(s, b)) {
            st = call(be->iface->set_async(be, src, dst));
            done = true;
        } else if (!user) {
            int rc = copy_async(s, sb, b, src, dst);
            if (rc < 0)
                return SCHED_EBACKEND;
            done = rc == 1;
        }
    }
    if (!done) {
        /* Blocking: the source must be complete, the host copies. */
        if (!user && (st = sync_backend(s, sb)) != SCHED_OK)
            return st;
        if (mode == SCHED_COPY_ASYNC && s->policy->slot_waiter != SCHED_WAITER_COPIER) {
            /* ggml's fallback of a declined asynchronous copy: the host
             * also waits for the destination (its slot event, when any). */
            sched_event *ev = s->events[b][s->cur_copy];
            if (user || !ev)
                st = sync_backend(s, b);
            else if (ev->n_records > 0)
                st = call(be->iface->event_synchronize(be, ev));
            if (st != SCHED_OK)
                return st;
        }
        st = call(be->iface->copy_sync(be, src, dst));
    }
    if (st == SCHED_OK && s->policy->after_copy == SCHED_GUARD_SYNC)
        st = sync_backend(s, b);
    return st;
}

/* Steps 2 and 3 from node entry k of split i on: its nodes, up to an
 * expanded all_reduce whose group has not all arrived (the rest is held
 * and resumed by the group, allreduce.c), then the record. */
sched_status sched_run_split_from(sched *s, int i, int k, uint64_t eval)
{
    const sched_split *sp = &s->splits[i];
    int b = sp->backend;
    sched_backend *be = s->backends[b];
    sched_exec x = {
        .graph = s->graph, .nodes = sp->nodes, .n_nodes = sp->n_nodes, .split = i,
        .cur_copy = s->cur_copy, .eval = eval, .src_of = exec_src_of, .sched = s,
        .allreduce = s->opts.allreduce, .allreduce_bf16_min = s->opts.allreduce_bf16_min,
        .wire = s->wire[b],
    };
    sched_status st = SCHED_OK;
    while (st == SCHED_OK) {
        int end = k;
        while (end < sp->n_nodes && !sched_ar_is_expanded(s, sp->nodes[end]))
            end++;
        if (end > k || (k == 0 && sp->n_nodes == 0)) {
            x.nodes = sp->nodes + k;
            x.n_nodes = end - k;
            st = call(be->iface->graph_compute(be, &x));
        }
        if (st != SCHED_OK || end == sp->n_nodes)
            break;
        bool held = false;
        st = sched_ar_arrive(s, sp->nodes[end], i, end + 1, eval, &held);
        if (held)
            return st;
        k = end + 1;
    }
    if (st == SCHED_OK && s->policy->record_after_split && s->events[b][s->cur_copy] &&
        (!s->policy->record_needs_inputs || sp->n_inputs > 0)) {
        st = call(be->iface->event_record(be, s->events[b][s->cur_copy]));
        s->last_event[b] = s->events[b][s->cur_copy];
    }
    return st;
}

sched_status sched_graph_compute(sched *s, uint64_t eval)
{
    if (!s->graph || !s->splits)
        return SCHED_EUSAGE;
    sched_status st = s->is_alloc ? SCHED_OK : sched_alloc_graph(s);
    const sched_policy *pol = s->policy;
    /* #26040 forgets the previous backend at each evaluation. Two ranks of
     * a tensor-parallel group are one backend to it (ggml's meta backend
     * runs them together): no wait between them. */
    int prev = pol->no_input_wait == SCHED_NOINPUT_ANY_CHANGE ? -1 : s->last_split_backend;
    s->moe_prev_ids = -1;
    bool prev_tp = false;
    for (int i = 0; i < s->n_splits && st == SCHED_OK; i++) {
        const sched_split *sp = &s->splits[i];
        int b = sp->backend;
        sched_backend *be = s->backends[b];
        if (be->iface->split_begin)
            be->iface->split_begin(be, i, eval);
        if (sp->n_inputs == 0 && pol->no_input_wait == SCHED_NOINPUT_READERS && sp->wait_prev)
            st = wait_previous(s, b);
        else if (sp->n_inputs == 0 && pol->no_input_wait == SCHED_NOINPUT_ANY_CHANGE && prev >= 0 &&
                 prev != b && !(prev_tp && sp->tp_rank))
            st = block_on_previous(s, prev);
        bool around = (sp->n_inputs > 0 || pol->sync_every_split) &&
                      !(pol->sync_only_without_events && has_events(s, b));
        if (st == SCHED_OK && around && pol->sync_before_inputs)
            st = sync_backend(s, b);
        for (int j = 0; j < sp->n_inputs && st == SCHED_OK; j++)
            st = copy_input(s, sp, j);
        if (st == SCHED_OK && around && pol->sync_after_inputs)
            st = sync_backend(s, b);
        if (st != SCHED_OK)
            break;
        st = sched_run_split_from(s, i, 0, eval);
        s->last_split_backend = prev = b;
        prev_tp = sp->tp_rank;
    }
    /* A group that never gathered all its ranks (a graph whose ranks are
     * not all in this evaluation) leaves splits held: an error. */
    if (st == SCHED_OK && sched_ar_held(s) > 0)
        st = SCHED_EUSAGE;
    sched_backend *first = s->backends[0];
    if (first->iface->split_begin)
        first->iface->split_begin(first, -1, eval);
    /* ggml keeps the graph allocated after a compute (is_alloc is cleared
     * by ggml_backend_sched_reset alone): the next compute without a reset
     * reuses the slot, and a synchronize before the reset keeps next_copy. */
    if (!pol->ggml_slots) {
        s->is_alloc = false;
        s->cur_copy = (s->cur_copy + 1) % s->n_copies;
    }
    s->n_evals++;
    return st;
}

void sched_reset(sched *s)
{
    s->is_alloc = false;
}

void sched_handover(sched *to, const sched *from)
{
    to->next_copy = from->next_copy;
    to->cur_copy = from->cur_copy;
    to->last_split_backend = from->last_split_backend;
    memcpy(to->last_event, from->last_event, sizeof to->last_event);
}

sched_status sched_synchronize(sched *s)
{
    for (int b = 0; b < s->n_backends; b++) {
        sched_status st = sync_backend(s, b);
        if (st != SCHED_OK)
            return st;
    }
    /* ggml: the next graph allocated after a sync uses slot 0 again. */
    if (s->policy->ggml_slots && !s->is_alloc)
        s->next_copy = 0;
    return SCHED_OK;
}

sched_status sched_get_output(sched *s, int32_t t, sched_tensor *dst)
{
    sched_tensor *src = &s->graph->tensors[t];
    int b = src->backend;
    sched_backend *be = s->backends[b];
    if (be->iface->get_async) {
        sched_status st = call(be->iface->get_async(be, src, dst));
        if (st != SCHED_OK)
            return st;
        /* llama.cpp reads an output after llama_synchronize: every backend. */
        return s->policy->ggml_slots ? sched_synchronize(s) : sync_backend(s, b);
    }
    sched_status st = s->policy->ggml_slots ? sched_synchronize(s) : sync_backend(s, b);
    if (st != SCHED_OK)
        return st;
    return call(be->iface->copy_sync(s->backends[s->n_backends - 1], src, dst));
}

sched_status sched_get_output_async(sched *s, int32_t t, sched_tensor *dst)
{
    sched_tensor *src = &s->graph->tensors[t];
    sched_backend *be = s->backends[src->backend];
    if (be->iface->get_async)
        return call(be->iface->get_async(be, src, dst));
    return sched_get_output(s, t, dst);
}

/* ------------------------------------------------------------------ */
/* The split graph, for the trace database.                            */

int sched_record_graph(const sched *s, sched_sink *sink, int64_t id_base)
{
    if (!sink->iface->graph_node)
        return 0;
    const sched_graph *g = s->graph;
    int32_t *split_of = malloc((size_t)g->n_tensors * sizeof *split_of);
    if (!split_of)
        return -1;
    for (int32_t i = 0; i < g->n_tensors; i++)
        split_of[i] = -1;
    for (int i = 0; i < s->n_splits; i++)
        for (int k = 0; k < s->splits[i].n_nodes; k++)
            split_of[s->splits[i].nodes[k]] = i;
    int rc = 0;
    for (int32_t i = 0; i < g->n_tensors && rc == 0; i++) {
        const sched_tensor *t = &g->tensors[i];
        char shape[64], cause[160];
        sched_tensor_shape_str(t, shape, sizeof shape);
        snprintf(cause, sizeof cause, "pass %d: %s", sched_cause_pass(t->cause),
                 sched_cause_str(t->cause));
        uint32_t flags = 0;
        if (t->flags & SCHED_FLAG_INPUT) flags |= TRACE_NODE_INPUT;
        if (t->flags & SCHED_FLAG_OUTPUT) flags |= TRACE_NODE_OUTPUT;
        if (t->flags & (SCHED_FLAG_WEIGHT | SCHED_FLAG_CACHE)) flags |= TRACE_NODE_WEIGHT;
        if (t->flags & SCHED_FLAG_COPY) flags |= TRACE_NODE_COPY;
        if (sched_op_is_view(t->op)) flags |= TRACE_NODE_VIEW;
        int32_t sp = split_of[i];
        if (t->flags & SCHED_FLAG_COPY)
            for (int k = 0; k < s->n_splits && sp < 0; k++)
                for (int j = 0; j < s->splits[k].n_inputs; j++)
                    if (i >= s->splits[k].input_copy[j] &&
                        i < s->splits[k].input_copy[j] + s->n_copies)
                        sp = k;
        trace_graph_node n = {
            .id = id_base + i, .name = t->name,
            .op = (t->flags & SCHED_FLAG_COPY) ? "cpy" : sched_op_str(t->op),
            .shape = shape, .backend = t->backend >= 0 ? bname(s->backends[t->backend]) : "",
            .split = sp, .cause = cause, .copy_slot = t->copy_slot, .flags = flags,
        };
        rc = sink->iface->graph_node(sink->ctx, &n);
        for (int k = 0; k < SCHED_MAX_SRC && rc == 0; k++) {
            if (t->src[k] < 0)
                continue;
            int32_t src = t->src[k];
            const char *kind = "data";
            if (src < s->n_orig && t->backend >= 0 &&
                s->copy_map[src * s->n_backends + t->backend] >= 0) {
                /* The node reads the slot-0 copy; the copy reads the source. */
                src = s->copy_map[src * s->n_backends + t->backend];
                kind = "input";
            }
            trace_graph_edge e = { id_base + src, id_base + i, kind };
            rc = sink->iface->graph_edge(sink->ctx, &e);
        }
        if (rc == 0 && (t->flags & SCHED_FLAG_COPY)) {
            trace_graph_edge e = { id_base + t->copy_of, id_base + i, "copy" };
            rc = sink->iface->graph_edge(sink->ctx, &e);
        }
    }
    for (int i = 0; i < s->n_splits && rc == 0; i++) {
        const sched_split *sp = &s->splits[i];
        char *inputs = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&inputs, &len);
        if (!f) {
            rc = -1;
            break;
        }
        for (int j = 0; j < sp->n_inputs; j++)
            fprintf(f, "%s%lld", j ? "," : "", (long long)(id_base + sp->inputs[j]));
        fclose(f);
        trace_graph_split row = {
            .id = i, .backend = bname(s->backends[sp->backend]),
            .first_node = id_base + sp->nodes[0], .n_nodes = sp->n_nodes,
            .inputs = sp->n_inputs ? inputs : NULL,
        };
        rc = sink->iface->graph_split(sink->ctx, &row);
        free(inputs);
    }
    free(split_of);
    return rc;
}
