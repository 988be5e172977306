/*
 * assign.c -- the four assignment passes of ggml's backend scheduler.
 *
 * Backends are in priority order, the CPU last. Every tensor ends with a
 * backend and a cause (sched_cause) that says which pass put it there and
 * why. A user's assignment (user_backend) is set first and never changed.
 *
 *   pass 1  tensors in a buffer (weights, caches, views of them) go to the
 *           highest-priority backend that can use that buffer (its own, or
 *           one sharing its buffer type); an op follows its first weight to
 *           the highest-priority backend that can use it and runs the op (not a
 *           rope, as ggml) -- unless that weight is in host memory and a
 *           device backend offloads the op (ggml's op_offload: a batch of
 *           at least 32); graph inputs go to the CPU.
 *   pass 2  expansion: an unassigned node takes the backend of the nearest
 *           assigned node before it (down), then after it (up), first only
 *           from non-CPU backends, then from any.
 *   pass 3  upgrade: a node moves to a higher-priority backend that
 *           supports its op and can use the buffers of all its sources;
 *           a node still unassigned (no neighbour's backend supports it)
 *           takes the backend, among those that support it, that can use
 *           the most of its assigned sources (the first at a tie).
 *   pass 4  leftovers: views follow their source, other nodes take the
 *           first backend that supports them, leafs follow their consumer.
 */
#include "sched_int.h"

#include <string.h>

bool sched_backend_supports(const sched *s, int b, const sched_tensor *t)
{
    sched_backend *be = s->backends[b];
    if (!be->iface->supports_op)
        return true;
    return be->iface->supports_op(be, s->graph, t);
}

static int buffer_backend(const sched *s, const sched_buffer *buf)
{
    for (int b = 0; b < s->n_backends; b++)
        if (s->backends[b] == buf->backend)
            return b;
    return -1;
}

/* The buffer a tensor's bytes live in before allocation (weights, caches). */
static const sched_buffer *placed_buffer(const sched_graph *g, const sched_tensor *t)
{
    if (t->buffer)
        return t->buffer;
    if (t->view_src >= 0)
        return g->tensors[t->view_src].buffer;
    return NULL;
}

static bool backend_can_use(const sched *s, int b, const sched_buffer *buf)
{
    sched_backend *be = s->backends[b];
    if (!buf || buf->backend == be)
        return true;
    return be->iface->supports_buffer && be->iface->supports_buffer(be, buf);
}

/* ggml's backend_from_buffer: the highest-priority backend that can use
 * buf (its own, or one sharing its buffer type, as BLAS the CPU's) and
 * runs t; -1 when none. */
static int backend_from_buffer(const sched *s, const sched_buffer *buf, const sched_tensor *t)
{
    for (int b = 0; b < s->n_backends; b++)
        if (backend_can_use(s, b, buf) && sched_backend_supports(s, b, t))
            return b;
    return -1;
}

/* ggml-cuda's get_op_batch_size at the pinned commit: the tokens an op
 * processes, by which a device decides to offload it. */
static int64_t op_batch(const sched_tensor *t)
{
    switch (t->op) {
    case SCHED_OP_GET_ROWS: return 0;
    case SCHED_OP_MUL_MAT: return t->ne[1];
    case SCHED_OP_MUL_MAT_ID:
    case SCHED_OP_ROPE: return t->ne[2];
    default: return t->ne[1] * t->ne[2] * t->ne[3];
    }
}

/* ggml's op_offload: for an op whose weight lives in host memory on the
 * CPU (the last backend), the first device backend (one with a stream)
 * that supports it and whose offload_op accepts its batch
 * (SCHED_OFFLOAD_MIN_BATCH, ggml-cuda's default 32); -1 when none. */
static int offload_backend(const sched *s, const sched_tensor *t, int wb, const sched_buffer *buf)
{
    if (s->opts.no_op_offload || wb != s->n_backends - 1 || !buf->host ||
        op_batch(t) < SCHED_OFFLOAD_MIN_BATCH)
        return -1;
    for (int b = 0; b < wb; b++)
        if (s->backends[b]->iface->synchronize && sched_backend_supports(s, b, t))
            return b;
    return -1;
}

static void set(sched_tensor *t, int b, sched_cause c)
{
    t->backend = b;
    t->cause = c;
}

/* Pass 1: buffers, weights and inputs. */
static void pass1_buffers_weights_inputs(sched *s, sched_graph *g)
{
    int cpu = s->n_backends - 1;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        if (t->backend >= 0)
            continue;
        const sched_buffer *buf = placed_buffer(g, t);
        if (buf && buffer_backend(s, buf) >= 0) {
            int b = backend_from_buffer(s, buf, t);
            set(t, b >= 0 ? b : buffer_backend(s, buf), SCHED_CAUSE_BUFFER);
            continue;
        }
        if (t->flags & SCHED_FLAG_INPUT) {
            set(t, cpu, SCHED_CAUSE_INPUT);
            continue;
        }
        /* ggml skips ROPE here: its weight (the frequencies) is too small
         * to choose a backend by. */
        if (t->op == SCHED_OP_NONE || t->op == SCHED_OP_ROPE)
            continue;
        for (int k = 0; k < SCHED_MAX_SRC; k++) {
            if (t->src[k] < 0)
                continue;
            const sched_tensor *src = &g->tensors[t->src[k]];
            const sched_buffer *sb = placed_buffer(g, src);
            if (sb && sb->usage == SCHED_BUFFER_WEIGHTS && (src->flags & SCHED_FLAG_WEIGHT)) {
                /* ggml decides by the first weight alone: left unassigned
                 * when no backend that can use its buffer runs the op. */
                int b = backend_from_buffer(s, sb, t);
                int off = b >= 0 ? offload_backend(s, t, b, sb) : -1;
                if (off >= 0)
                    set(t, off, SCHED_CAUSE_OFFLOAD);
                else if (b >= 0)
                    set(t, b, SCHED_CAUSE_WEIGHT);
                break;
            }
        }
    }
}

/* Pass 2: expand assignments to unassigned neighbours, down then up. With
 * skip_cpu the CPU's assignments are not spread (they are the fallback). */
static void expand(sched *s, sched_graph *g, bool down, bool skip_cpu, sched_cause cause)
{
    int cpu = s->n_backends - 1;
    int cur = -1;
    int32_t n = s->n_order;
    for (int32_t k = 0; k < n; k++) {
        sched_tensor *t = &g->tensors[s->order[down ? k : n - 1 - k]];
        if (sched_op_is_view(t->op))
            continue;
        if (t->backend >= 0) {
            cur = (skip_cpu && t->backend == cpu) ? -1 : t->backend;
        } else if (cur >= 0 && sched_backend_supports(s, cur, t)) {
            set(t, cur, cause);
        }
    }
}

static void pass2_expand(sched *s, sched_graph *g)
{
    expand(s, g, true, true, SCHED_CAUSE_EXPAND_DOWN);
    expand(s, g, false, true, SCHED_CAUSE_EXPAND_UP);
    expand(s, g, true, false, SCHED_CAUSE_EXPAND_REST_DOWN);
    expand(s, g, false, false, SCHED_CAUSE_EXPAND_REST_UP);
}

/* Whether backend b can read source src where it is now (ggml's
 * buffer_supported): in its buffer, or in the memory of its backend. */
static bool src_usable(const sched *s, const sched_graph *g, const sched_tensor *src, int b)
{
    int sb = src->backend >= 0 ? src->backend
             : src->view_src >= 0 ? g->tensors[src->view_src].backend : -1;
    if (sb < 0)
        return false;
    const sched_buffer *buf = placed_buffer(g, src);
    if (buf)
        return backend_can_use(s, b, buf);
    if (sb == b)
        return true;
    sched_backend *be = s->backends[b], *cur = s->backends[sb];
    sched_buffer probe = { .backend = cur, .usage = SCHED_BUFFER_COMPUTE,
                           .host = cur->iface->device_kind(cur) == SCHED_DEVICE_CPU };
    return be->iface->supports_buffer && be->iface->supports_buffer(be, &probe);
}

/* Pass 3, an unassigned node: the supporting backend that can use the
 * most of its sources (ggml's "3.best"). */
static void most_supported(sched *s, sched_graph *g, sched_tensor *t)
{
    int best = -1;
    for (int b = 0; b < s->n_backends; b++) {
        if (!sched_backend_supports(s, b, t))
            continue;
        int n = 0;
        for (int i = 0; i < SCHED_MAX_SRC; i++)
            n += t->src[i] >= 0 && src_usable(s, g, &g->tensors[t->src[i]], b);
        if (n > best) {
            best = n;
            set(t, b, SCHED_CAUSE_MOST_SUPPORTED);
        }
    }
}

/* Pass 3: upgrade to a higher-priority backend that can run the op on the
 * same buffers (ggml: backends sharing a buffer type, e.g. CPU and BLAS). */
static void pass3_upgrade(sched *s, sched_graph *g)
{
    for (int32_t k = 0; k < s->n_order; k++) {
        sched_tensor *t = &g->tensors[s->order[k]];
        if (t->backend < 0 && !sched_op_is_view(t->op)) {
            most_supported(s, g, t);
            continue;
        }
        if (t->backend <= 0 || t->cause == SCHED_CAUSE_USER || sched_op_is_view(t->op))
            continue;
        sched_backend *cur = s->backends[t->backend];
        for (int b = 0; b < t->backend; b++) {
            sched_backend *be = s->backends[b];
            /* It must use the current backend's memory directly... */
            if (!be->iface->supports_buffer || !sched_backend_supports(s, b, t))
                continue;
            sched_buffer probe = { .backend = cur, .usage = SCHED_BUFFER_COMPUTE,
                                   .host = cur->iface->device_kind(cur) == SCHED_DEVICE_CPU };
            if (!be->iface->supports_buffer(be, &probe))
                continue;
            /* ...and every placed buffer its sources live in. */
            bool ok = true;
            for (int i = 0; i < SCHED_MAX_SRC && ok; i++)
                if (t->src[i] >= 0)
                    ok = backend_can_use(s, b, placed_buffer(g, &g->tensors[t->src[i]]));
            if (ok) {
                set(t, b, SCHED_CAUSE_UPGRADE);
                break;
            }
        }
    }
}

/* Pass 4: leftovers. */
static sched_status pass4_leftovers(sched *s, sched_graph *g, char *err, size_t err_cap)
{
    for (int32_t k = 0; k < s->n_order; k++) {
        sched_tensor *t = &g->tensors[s->order[k]];
        if (t->backend < 0) {
            if (sched_op_is_view(t->op) && g->tensors[t->view_src].backend >= 0) {
                set(t, g->tensors[t->view_src].backend, SCHED_CAUSE_VIEW);
            } else if (sched_op_is_view(t->op) && g->tensors[t->src[0]].backend >= 0) {
                set(t, g->tensors[t->src[0]].backend, SCHED_CAUSE_VIEW);
            } else {
                for (int b = 0; b < s->n_backends; b++)
                    if (sched_backend_supports(s, b, t)) {
                        set(t, b, SCHED_CAUSE_FIRST_SUPPORTED);
                        break;
                    }
            }
            if (t->backend < 0) {
                snprintf(err, err_cap, "node '%s': no backend supports op %s", t->name,
                         sched_op_str(t->op));
                return SCHED_EUNSUPPORTED;
            }
        }
        for (int i = 0; i < SCHED_MAX_SRC; i++) {
            if (t->src[i] < 0)
                continue;
            sched_tensor *src = &g->tensors[t->src[i]];
            if (src->backend < 0)
                set(src, t->backend, SCHED_CAUSE_CONSUMER);
        }
    }
    /* Leafs nobody uses. */
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].backend < 0)
            set(&g->tensors[i], s->n_backends - 1, SCHED_CAUSE_CONSUMER);
    return SCHED_OK;
}

sched_status sched_assign_passes(sched *s, sched_graph *g, char *err, size_t err_cap)
{
    for (int32_t i = 0; i < g->n_tensors; i++) {
        sched_tensor *t = &g->tensors[i];
        t->backend = -1;
        t->cause = SCHED_CAUSE_NONE;
        if (t->user_backend >= s->n_backends) {
            snprintf(err, err_cap, "tensor '%s': assigned to backend %d of %d", t->name,
                     t->user_backend, s->n_backends);
            return SCHED_EUSAGE;
        }
        if (t->user_backend >= 0)
            set(t, t->user_backend, SCHED_CAUSE_USER);
    }
    pass1_buffers_weights_inputs(s, g);
    pass2_expand(s, g);
    pass3_upgrade(s, g);
    return pass4_leftovers(s, g, err, err_cap);
}
