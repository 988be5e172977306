/*
 * allreduce.c -- the all-reduce of tensor-split graphs, as each backend of
 * ggml does it.
 *
 * A tp graph has, per all_reduce group, one all_reduce node per rank, each
 * on its own device (graph.c: sched_allreduce_group). What the group runs
 * is a strategy (SCHED_ALLREDUCE_MAP); `auto` picks one as ggml's meta
 * backend does (ggml-backend-meta.cpp, ggml-org/llama.cpp at
 * 01a87682ca1d28a341ffb1aeea25b528dcc48421): the devices' own all-reduce
 * where the backend has one and it applies, else the generic butterfly.
 *
 *   nccl       ggml-cuda: one NCCL call per rank, an opaque `collective`
 *              whose read/write set is the rank's source and result (or,
 *              from the BF16 threshold on, its bf16 wire between the
 *              to_bf16 / from_bf16 conversions, round to nearest). The
 *              threshold depends on the device count: 32768 elements for
 *              2, 131072 for 3, 262144 for 4 or more. The recording makes
 *              these statements (record_wrap.c), the devices run the
 *              rendezvous (real/collective.c, sim/backend_sim.c).
 *   sycl       ggml-sycl, 2 devices only (otherwise the butterfly), as
 *              ggml_backend_sycl_comm_allreduce_tensor at ggml-org/ggml
 *              d99724f2: the host waits for both queues (q->wait()), copies
 *              each rank's partial into the peer's inbox with a blocking
 *              device-to-device copy (dev2dev_memcpy), then each queue adds
 *              its inbox into its partial. From 32768 elements each queue
 *              first truncates its partial to bf16 (the outbox: a bit
 *              shift, no rounding), the host waits for both, and the bf16
 *              halves travel: the local half stays f32, the peer's arrives
 *              bf16. No event: the next all-reduce's host waits cover the
 *              adds that read the inboxes. F16 partials (ggml-sycl's F16
 *              path) are exchanged as they are at every size, never
 *              compressed; other types go to the butterfly.
 *   butterfly  ggml's meta-backend fallback: for offset o = 1, 2, 4, ...
 *              rank j and j^o (j^o < j) exchange their partials into each
 *              other's inbox (a copy on the sender's queue handed over to
 *              the receiver's with an event, as ggml-cuda's
 *              cpy_tensor_async), then each adds its inbox into its
 *              partial. syncsim adds the one wait ggml lacks: before a
 *              sender refills a peer's inbox its queue waits for the event
 *              the peer records after adding the inbox (SCHED_AR_WAIT_FREE,
 *              SCHED_AR_FREE). For a rank count that is not a power of two
 *              the ranks past the largest power of two p first fold into
 *              rank r - p and get the sum back at the end (ggml's loop
 *              leaves rank 1 of 3 without rank 2's partial).
 *   butterfly-ggml  the fallback exactly as ggml has it: no inbox wait, and
 *              ggml's pairing for every n. Every refill of an inbox races
 *              with its owner's add of the previous contents (WAR): the
 *              inbox is one buffer per device, reused by every round and
 *              every all-reduce.
 *   ring, bf16 one opaque collective per rank, priced as a ring (bf16: on
 *              bf16 data from --bf16-min elements).
 *
 * An expanded strategy is a program of steps (sched_allreduce_program):
 * data, read by the scheduler here, which runs each step as backend calls
 * (copies, a one-node graph for an add or a conversion, event records and
 * waits: what the recording turns into statements and what the simulated
 * devices price with their copy and op formulas), and by the reference
 * (real/reference.c), which computes the same steps in order on one thread,
 * so that a real run matches it bit for bit.
 *
 * The ranks' parts are in different splits: ggml's meta backend queues all
 * ranks' subgraphs, then the all-reduce over all of them. The scheduler
 * does the same: a split that reaches its rank's all_reduce node stops
 * there (its rest is held) until the group's last rank arrives; then the
 * group's steps run and the held splits resume in rank order. Each rank's
 * partial is first copied into its all_reduce node's tensor (the
 * accumulator; ggml reduces the partial in place).
 */
#include "sched_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* The strategies as data.                                             */

sched_allreduce sched_allreduce_pick(sched_allreduce a, const char *family, int n,
                                     sched_dtype type)
{
    /* ggml-sycl takes 2 devices' f32 or f16 partials (f16: exchanged as
     * they are, never compressed); it declines anything else. */
    bool sycl_takes = n == 2 && (type == SCHED_F32 || type == SCHED_F16);
    if (a == SCHED_ALLREDUCE_AUTO) {
        if (type == SCHED_F16 && family && strcmp(family, "sycl") == 0 && sycl_takes)
            return SCHED_ALLREDUCE_SYCL;
        if (type != SCHED_F32)
            return SCHED_ALLREDUCE_BUTTERFLY;
        if (family && strcmp(family, "cuda") == 0)
            return SCHED_ALLREDUCE_NCCL;
        if (family && strcmp(family, "sycl") == 0 && n == 2)
            return SCHED_ALLREDUCE_SYCL;
        if (family && strcmp(family, "mpi") == 0)
            return SCHED_ALLREDUCE_RING;     /* ranks in other processes: one collective */
        return SCHED_ALLREDUCE_BUTTERFLY;
    }
    if (a == SCHED_ALLREDUCE_SYCL && !sycl_takes)
        return SCHED_ALLREDUCE_BUTTERFLY;
    return a;
}

int64_t sched_allreduce_bf16_from(sched_allreduce a, int n, int64_t bf16_min)
{
    switch (a) {
    case SCHED_ALLREDUCE_BF16:
    case SCHED_ALLREDUCE_SYCL:
        return bf16_min > 0 ? bf16_min : 32768;
    case SCHED_ALLREDUCE_NCCL:
        if (bf16_min > 0)
            return bf16_min;
        return n <= 2 ? 32768 : n == 3 ? 131072 : 262144;
    default:
        return INT64_MAX;
    }
}

bool sched_allreduce_expanded(sched_allreduce a)
{
    return a == SCHED_ALLREDUCE_BUTTERFLY || a == SCHED_ALLREDUCE_BUTTERFLY_GGML ||
           a == SCHED_ALLREDUCE_SYCL;
}

typedef struct program {
    sched_ar_step *s;
    int n;
} program;

static void step(program *p, sched_ar_kind kind, int rank, int peer)
{
    if (p->n < SCHED_AR_MAX_STEPS)
        p->s[p->n++] = (sched_ar_step){ (uint8_t)kind, (uint8_t)rank, (uint8_t)peer };
}

/* rank's partial into peer's inbox; guarded: first wait until peer added
 * what its inbox held. */
static void send(program *p, int rank, int peer, bool guarded)
{
    if (guarded)
        step(p, SCHED_AR_WAIT_FREE, rank, peer);
    step(p, SCHED_AR_SEND, rank, peer);
}

static void add(program *p, int rank, bool guarded)
{
    step(p, SCHED_AR_ADD, rank, rank);
    if (guarded)
        step(p, SCHED_AR_FREE, rank, rank);
}

/* ggml's loop over ranks 0..m-1: pairs (j, j ^ o) with j ^ o < j send in
 * that order, then every paired rank adds. */
static void butterfly_rounds(program *p, int m, bool guarded)
{
    for (int o = 1; o < m; o *= 2) {
        bool paired[16] = { false };
        for (int j = 0; j < m; j++) {
            int jo = j ^ o;
            if (jo > j)
                continue;
            send(p, j, jo, guarded);
            send(p, jo, j, guarded);
            paired[j] = paired[jo] = true;
        }
        for (int j = 0; j < m; j++)
            if (paired[j])
                add(p, j, guarded);
    }
}

int sched_allreduce_program(sched_allreduce a, int n, bool bf16, sched_ar_step *out)
{
    if (!sched_allreduce_expanded(a) || n < 1 || n > 16)
        return 0;
    program p = { out, 0 };
    for (int r = 0; r < n; r++)
        step(&p, SCHED_AR_LOCAL, r, r);
    if (n == 1)
        return p.n;
    if (a == SCHED_ALLREDUCE_SYCL) {
        for (int r = 0; bf16 && r < 2; r++)
            step(&p, SCHED_AR_TO_BF16, r, r);
        step(&p, SCHED_AR_SYNC, 0, 0);
        step(&p, SCHED_AR_SYNC, 1, 1);
        step(&p, SCHED_AR_SEND_BLOCKING, 1, 0);
        step(&p, SCHED_AR_SEND_BLOCKING, 0, 1);
        step(&p, SCHED_AR_ADD, 0, 0);
        step(&p, SCHED_AR_ADD, 1, 1);
        return p.n;
    }
    if (a == SCHED_ALLREDUCE_BUTTERFLY_GGML) {
        butterfly_rounds(&p, n, false);
        return p.n;
    }
    int m = 1;
    while (m * 2 <= n)
        m *= 2;
    for (int r = m; r < n; r++) {
        send(&p, r, r - m, true);
        add(&p, r - m, true);
    }
    butterfly_rounds(&p, m, true);
    for (int r = m; r < n; r++)
        step(&p, SCHED_AR_PUT, r - m, r);
    return p.n;
}

/* ------------------------------------------------------------------ */
/* Planning: strategies, inboxes, adds, events.                        */

void sched_ar_free(sched *s)
{
    for (int b = 0; b < s->n_backends; b++) {
        sched_backend *be = s->backends[b];
        if (s->inbox[b] && be->iface->buffer_free)
            be->iface->buffer_free(be, s->inbox[b]);
        if (s->ar_free[b] && be->iface->event_free)
            be->iface->event_free(be, s->ar_free[b]);
        s->inbox[b] = NULL;
        s->ar_free[b] = NULL;
    }
    free(s->ar_algo);
    free(s->ar_next);
    free(s->ar_inbox);
    free(s->ar_add);
    free(s->ar_wire);
    free(s->ar_resume_split);
    free(s->ar_resume_k);
    s->ar_algo = NULL;
    s->ar_next = s->ar_inbox = s->ar_add = s->ar_wire = NULL;
    s->ar_resume_split = s->ar_resume_k = NULL;
}

bool sched_ar_is_expanded(const sched *s, int32_t node)
{
    return s->ar_algo && node < s->n_orig && s->graph->tensors[node].op == SCHED_OP_ALL_REDUCE &&
           s->ar_n[node] > 1 && sched_allreduce_expanded((sched_allreduce)s->ar_algo[node]);
}

static uint64_t align256(uint64_t v) { return (v + 255) & ~(uint64_t)255; }

/* The tensors of node i's steps: appended to the graph (the scheduler
 * places them itself: the inbox and wire in the backend's inbox buffer,
 * the add in place over the node's own bytes). */
static sched_status make_tensors(sched *s, int32_t i, bool bf16, uint64_t *need)
{
    sched_graph *g = s->graph;
    char name[SCHED_NAME_MAX + 16];
    sched_tensor t = g->tensors[i];
    const sched_tensor *src = &g->tensors[t.src[0]];
    int64_t ne[SCHED_MAX_DIMS];
    memcpy(ne, src->ne, sizeof ne);
    int n_dims = src->n_dims;
    snprintf(name, sizeof name, "%.*s.inbox", SCHED_NAME_MAX - 8, t.name);
    int32_t inbox = sched_graph_leaf(g, name, bf16 ? SCHED_BF16 : src->type, n_dims, ne, 0);
    if (inbox < 0)
        return SCHED_ENOMEM;
    snprintf(name, sizeof name, "%.*s.add", SCHED_NAME_MAX - 8, t.name);
    int32_t srcs[2] = { i, inbox };
    int32_t sum = sched_graph_op(g, name, SCHED_OP_ADD, srcs, 2);
    if (sum < 0)
        return SCHED_ENOMEM;
    int32_t wire = -1;
    if (bf16) {
        snprintf(name, sizeof name, "%.*s.to_bf16", SCHED_NAME_MAX - 10, t.name);
        wire = sched_graph_op(g, name, SCHED_OP_CONVERT, &i, 1);
        if (wire < 0)
            return SCHED_ENOMEM;
        g->tensors[wire].param = SCHED_CONVERT_TRUNCATE;
    }
    int b = t.backend;
    uint64_t ib = align256(sched_tensor_nbytes(&g->tensors[inbox]));
    g->tensors[inbox].backend = b;
    g->tensors[inbox].offset = 0;
    g->tensors[sum].backend = b;
    g->tensors[sum].buffer = t.buffer;
    g->tensors[sum].offset = t.offset;
    g->tensors[sum].cause = t.cause;
    uint64_t end = ib;
    if (wire >= 0) {
        g->tensors[wire].backend = b;
        g->tensors[wire].offset = ib;
        g->tensors[wire].cause = t.cause;
        end += align256(sched_tensor_nbytes(&g->tensors[wire]));
    }
    if (end > need[b])
        need[b] = end;
    s->ar_inbox[i] = inbox;
    s->ar_add[i] = sum;
    s->ar_wire[i] = wire;
    return SCHED_OK;
}

sched_status sched_ar_plan(sched *s, char *err, size_t err_cap)
{
    sched_ar_free(s);
    sched_graph *g = s->graph;
    size_t nt = (size_t)g->n_tensors + 1;
    s->ar_algo = calloc(nt, sizeof *s->ar_algo);
    s->ar_next = malloc(nt * sizeof *s->ar_next);
    s->ar_inbox = malloc(nt * sizeof *s->ar_inbox);
    s->ar_add = malloc(nt * sizeof *s->ar_add);
    s->ar_wire = malloc(nt * sizeof *s->ar_wire);
    s->ar_resume_split = malloc(nt * sizeof *s->ar_resume_split);
    s->ar_resume_k = malloc(nt * sizeof *s->ar_resume_k);
    if (!s->ar_algo || !s->ar_next || !s->ar_inbox || !s->ar_add || !s->ar_wire ||
        !s->ar_resume_split || !s->ar_resume_k)
        return SCHED_ENOMEM;
    for (size_t i = 0; i < nt; i++)
        s->ar_next[i] = s->ar_inbox[i] = s->ar_add[i] = s->ar_wire[i] = s->ar_resume_split[i] =
            s->ar_resume_k[i] = -1;
    uint64_t need[SCHED_MAX_BACKENDS] = { 0 };
    int32_t n_orig = g->n_tensors;
    for (int32_t i = 0; i < n_orig; i++) {
        if (g->tensors[i].op != SCHED_OP_ALL_REDUCE)
            continue;
        for (int32_t j = i + 1; j < n_orig && s->ar_next[i] < 0; j++)
            if (g->tensors[j].op == SCHED_OP_ALL_REDUCE && g->tensors[j].param == g->tensors[i].param)
                s->ar_next[i] = j;
        if (s->ar_rank[i] != (g->world > 0 ? g->rank : 0))
            continue;
        /* The group's strategy, decided at its first rank for all (the
         * only one of a rank's part of a multi-process job). */
        const sched_tensor *src = &g->tensors[g->tensors[i].src[0]];
        sched_allreduce a = sched_allreduce_pick(s->opts.allreduce, s->opts.allreduce_family,
                                                 s->ar_n[i], src->type);
        uint32_t used = 0;
        bool shared = false;
        for (int32_t m = i; m >= 0; m = s->ar_next[m]) {
            int b = g->tensors[m].backend;
            shared |= b >= 0 && (used & (1u << b));
            used |= b >= 0 ? 1u << b : 0;
            if (s->ar_next[m] < 0) {
                /* ar_next of later members is not linked yet: find it. */
                for (int32_t j = m + 1; j < n_orig && s->ar_next[m] < 0; j++)
                    if (g->tensors[j].op == SCHED_OP_ALL_REDUCE &&
                        g->tensors[j].param == g->tensors[i].param)
                        s->ar_next[m] = j;
            }
        }
        if (shared && sched_allreduce_expanded(a)) {
            /* Steps name one queue per rank; ranks sharing a device would
             * hold a split on their own all_reduce. (An opaque collective
             * of two ranks on one queue hangs instead, as NCCL would.) */
            snprintf(err, err_cap, "all_reduce group %d: two ranks on one device; %s needs a "
                     "device per rank", (int)g->tensors[i].param, sched_allreduce_str(a));
            return SCHED_EUSAGE;
        }
        for (int32_t m = i; m >= 0; m = s->ar_next[m])
            s->ar_algo[m] = (uint8_t)a;
    }
    for (int32_t i = 0; i < n_orig; i++) {
        if (g->tensors[i].op != SCHED_OP_ALL_REDUCE)
            continue;
        int n = s->ar_n[i];
        const sched_tensor *src = &g->tensors[g->tensors[i].src[0]];
        sched_allreduce a = (sched_allreduce)s->ar_algo[i];
        if (n < 2 || !sched_allreduce_expanded(a))
            continue;
        bool f16_sycl = a == SCHED_ALLREDUCE_SYCL && src->type == SCHED_F16 &&
                        g->tensors[i].type == SCHED_F16;
        if (!f16_sycl && (src->type != SCHED_F32 || g->tensors[i].type != SCHED_F32)) {
            snprintf(err, err_cap, "all_reduce '%s': %s runs on f32 partials only (its source is %s)",
                     g->tensors[i].name, sched_allreduce_str(a), sched_dtype_str(src->type));
            return SCHED_EUSAGE;
        }
        if (g->tensors[i].backend < 0 || !g->tensors[i].buffer) {
            snprintf(err, err_cap, "all_reduce '%s' has no device", g->tensors[i].name);
            return SCHED_EUSAGE;
        }
        bool bf16 = !f16_sycl &&
                    sched_tensor_nelements(src) >= sched_allreduce_bf16_from(a, n, s->opts.allreduce_bf16_min);
        sched_status st = make_tensors(s, i, bf16, need);
        if (st != SCHED_OK)
            return st;
    }
    for (int b = 0; b < s->n_backends; b++) {
        if (!need[b])
            continue;
        sched_backend *be = s->backends[b];
        char name[SCHED_NAME_MAX];
        snprintf(name, sizeof name, "%.20s.allreduce_inbox.%.24s", s->opts.name,
                 be->iface->get_name(be));
        s->inbox[b] = be->iface->buffer_alloc(be, name, need[b], SCHED_BUFFER_COMPUTE);
        if (!s->inbox[b]) {
            snprintf(err, err_cap, "cannot allocate the all-reduce inbox on %s", be->iface->get_name(be));
            return SCHED_EBACKEND;
        }
        if (be->iface->event_new) {
            snprintf(name, sizeof name, "%.20s.inbox_free.%.24s", s->opts.name, be->iface->get_name(be));
            if (!(s->ar_free[b] = be->iface->event_new(be, name)))
                return SCHED_ENOMEM;
        }
    }
    for (int32_t i = 0; i < n_orig; i++) {
        if (s->ar_inbox[i] < 0)
            continue;
        int b = g->tensors[i].backend;
        g->tensors[s->ar_inbox[i]].buffer = s->inbox[b];
        if (s->ar_wire[i] >= 0)
            g->tensors[s->ar_wire[i]].buffer = s->inbox[b];
    }
    return SCHED_OK;
}

/* ------------------------------------------------------------------ */
/* Running a group's steps on its ranks' backends.                     */

static sched_status call(int rc) { return rc < 0 ? SCHED_EBACKEND : SCHED_OK; }

static sched_status sync_of(sched_backend *be)
{
    return be->iface->synchronize ? call(be->iface->synchronize(be)) : SCHED_OK;
}

/* src (on backend a) into dst (on b), queued on a's queue and handed over
 * to b's; where the backends decline, as ggml: sync both, copy blocking. */
static sched_status copy(sched *s, int a, int b, sched_tensor *src, sched_tensor *dst)
{
    int rc = sched_copy_between(s, a, b, src, dst);
    if (rc < 0)
        return SCHED_EBACKEND;
    if (rc == 1)
        return SCHED_OK;
    sched_status st = sync_of(s->backends[a]);
    if (st == SCHED_OK)
        st = sync_of(s->backends[b]);
    if (st == SCHED_OK)
        st = call(s->backends[b]->iface->copy_sync(s->backends[b], src, dst));
    return st;
}

static sched_status compute_one(sched *s, int b, int32_t *node, int split, uint64_t eval)
{
    sched_backend *be = s->backends[b];
    sched_exec x = {
        .graph = s->graph, .nodes = node, .n_nodes = 1, .split = split, .cur_copy = s->cur_copy,
        .eval = eval, .src_of = sched_exec_src_of, .sched = s, .allreduce = s->opts.allreduce,
        .allreduce_bf16_min = s->opts.allreduce_bf16_min, .wire = s->wire[b],
    };
    return call(be->iface->graph_compute(be, &x));
}

static sched_status run_group(sched *s, int32_t head, int split, uint64_t eval)
{
    sched_graph *g = s->graph;
    int32_t m[16];
    int n = 0;
    for (int32_t k = head; k >= 0 && n < 16; k = s->ar_next[k])
        m[n++] = k;
    sched_allreduce a = (sched_allreduce)s->ar_algo[head];
    sched_ar_step steps[SCHED_AR_MAX_STEPS];
    int n_steps = sched_allreduce_program(a, n, s->ar_wire[head] >= 0, steps);
    sched_status st = SCHED_OK;
    for (int k = 0; k < n_steps && st == SCHED_OK; k++) {
        int r = steps[k].rank, p = steps[k].peer;
        int br = g->tensors[m[r]].backend, bp = g->tensors[m[p]].backend;
        sched_backend *be = s->backends[br];
        switch ((sched_ar_kind)steps[k].kind) {
        case SCHED_AR_LOCAL: {
            int32_t src = sched_exec_src_of_sched(s, m[r], 0);
            st = copy(s, br, br, &g->tensors[src], &g->tensors[m[r]]);
            break;
        }
        case SCHED_AR_SEND:
        case SCHED_AR_SEND_BLOCKING: {
            int32_t from = s->ar_wire[m[r]] >= 0 ? s->ar_wire[m[r]] : m[r];
            sched_tensor *src = &g->tensors[from], *dst = &g->tensors[s->ar_inbox[m[p]]];
            if (steps[k].kind == SCHED_AR_SEND)
                st = copy(s, br, bp, src, dst);
            else
                st = call(s->backends[bp]->iface->copy_sync(s->backends[bp], src, dst));
            break;
        }
        case SCHED_AR_SYNC:
            st = sync_of(be);
            break;
        case SCHED_AR_PUT:
            st = copy(s, br, bp, &g->tensors[m[r]], &g->tensors[m[p]]);
            break;
        case SCHED_AR_ADD:
            st = compute_one(s, br, &s->ar_add[m[r]], split, eval);
            break;
        case SCHED_AR_TO_BF16:
            st = compute_one(s, br, &s->ar_wire[m[r]], split, eval);
            break;
        case SCHED_AR_WAIT_FREE: {
            sched_event *ev = s->ar_free[bp];
            if (!ev)
                st = sync_of(s->backends[bp]);
            else if (ev->n_records == 0)
                break;
            else if (be->iface->synchronize && be->iface->event_wait)
                st = call(be->iface->event_wait(be, ev));
            else
                st = call(s->backends[bp]->iface->event_synchronize(s->backends[bp], ev));
            break;
        }
        case SCHED_AR_FREE:
            if (s->ar_free[br])
                st = call(be->iface->event_record(be, s->ar_free[br]));
            break;
        }
    }
    return st;
}

sched_status sched_ar_arrive(sched *s, int32_t node, int i, int k, uint64_t eval, bool *held)
{
    sched_graph *g = s->graph;
    int32_t head = node;
    for (int32_t j = 0; j < node; j++)
        if (s->ar_next[j] == head) {
            head = j;
            j = -1;
        }
    s->ar_resume_split[node] = i;
    s->ar_resume_k[node] = k;
    for (int32_t m = head; m >= 0; m = s->ar_next[m])
        if (s->ar_resume_split[m] < 0) {
            *held = true;
            return SCHED_OK;
        }
    *held = false;
    sched_status st = run_group(s, head, i, eval);
    /* Resume the other ranks' splits in rank order, then go on with this one. */
    int32_t m[16];
    int n = 0;
    for (int32_t j = head; j >= 0 && n < 16; j = s->ar_next[j])
        m[n++] = j;
    int32_t resume_split[16], resume_k[16];
    for (int r = 0; r < n; r++) {
        resume_split[r] = s->ar_resume_split[m[r]];
        resume_k[r] = s->ar_resume_k[m[r]];
        s->ar_resume_split[m[r]] = s->ar_resume_k[m[r]] = -1;
    }
    for (int r = 0; r < n && st == SCHED_OK; r++) {
        if (m[r] == node)
            continue;
        sched_backend *be = s->backends[g->tensors[m[r]].backend];
        if (be->iface->split_begin)
            be->iface->split_begin(be, resume_split[r], eval);
        st = sched_run_split_from(s, resume_split[r], resume_k[r], eval);
    }
    sched_backend *be = s->backends[s->splits[i].backend];
    if (be->iface->split_begin)
        be->iface->split_begin(be, i, eval);
    return st;
}

int sched_ar_held(const sched *s)
{
    int held = 0;
    for (int32_t i = 0; s->ar_resume_split && i < s->n_orig; i++)
        held += s->ar_resume_split[i] >= 0;
    return held;
}
