/*
 * replay.c -- re-timing a trace through a device model.
 *
 * Every statement gets a new start and end that honour every
 * happens-before edge of the trace format: queue order; submission (a
 * stream statement starts no earlier than its host reached it, having
 * paid the model's API cost for each call since its last statement); and
 * what the binder (traces/bind.c, the checker's and the timeline's too)
 * says each statement depends on: an event wait on the record it binds
 * to, a host sync on the last statement of every stream it covers, a
 * barrier or collective on its generation (which ends when its last
 * participant arrives; an extra arrival synchronises nothing), an await
 * on every signal of its flag, an await of a value semaphore on the set
 * that releases it (trace_sem_release, with the sets that ended before the
 * await is ready as the ones it is ordered after), a recv on the send it
 * is paired with (rule 9: its data arrives a P2P copy of the send's bytes
 * after the send started; a send does not wait for its recv). Statements are taken in file order into
 * per-queue FIFOs; a queue's head is timed as soon as what it depends on
 * is, so a collective whose peers come later in the file simply waits.
 * What never becomes ready is a hang.
 *
 * Synchronisation between host processes is priced from the model: a
 * barrier generation ends ipc_barrier_ns after its last arrival, and a
 * host's set or await of a value semaphore -- the key-value store of a
 * handle exchange (`signal KEY set=G`, `await KEY >=G`) -- costs
 * kv_store_ns (a put; a get's round trip after the value is there).
 *
 * Durations: with durations_recorded, op, copy and collective statements
 * keep their dur= (the last collective participant's dur is the
 * collective's cost); blocking statements are always recomputed: they end
 * when what they wait for ends, plus the model's fixed cost. Otherwise
 * every statement is priced by the cost model (cost.c, the formulas and
 * their inputs) from what the trace says: an op by its family (op=, else
 * its label), flops=, flops_f16=, bytes= (else the bytes it accesses) and
 * overhead_ns=, a copy by the path between the places of its source and
 * destination and its bytes= (else the bytes it reads), a
 * collective by its size= participants, its wire bytes and algorithm=.
 * The simulated backend records exactly those attributes, so a simulated
 * run replays with the prices it ran with.
 *
 * What replay does not model: concurrent copies sharing a link's bandwidth
 * and a direction's copy engine (the simulator does). Runs that overlap
 * transfers replay slightly faster than they ran.
 */
#include "sim_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define UNTIMED INT64_MIN
#define NO_GEN UINT32_MAX

typedef struct rp_stmt {
    int64_t start, end;
    int64_t sub_after;      /* host statement it was submitted after, -1 none */
    int64_t sub_offset;     /* API cost paid since then, its own included */
    int64_t dep;            /* wait: bound record; sync: last statement of the target;
                             * await: the signal; recv: its send */
    uint32_t gen;           /* collective/barrier generation index; NO_GEN: none */
    bool dropped;
} rp_stmt;

typedef struct rp_gen {
    uint32_t object;        /* communicator / barrier name */
    uint64_t k;             /* k-th generation of it */
    uint64_t count;         /* participants expected */
    uint64_t arrived;
    int64_t latest;         /* latest arrival */
    int64_t latest_stmt;    /* the statement that arrived then */
    int64_t cost;           /* collective cost (max over participants' estimates) */
} rp_gen;

typedef struct replay {
    const trace *t;
    const sim_replay_opts *o;
    /* statements are decoded from t when needed (stmt_at): a copy of each
     * would be 112 bytes a statement, a replay of a million 112 MB */
    rp_stmt *r;
    uint64_t n;
    /* per queue */
    int64_t *fifo_head_pos; /* index into q_list */
    int64_t **q_list;
    uint64_t *q_n, *q_cap;
    int64_t *q_end;         /* end of its last timed statement */
    int64_t *q_last;        /* that statement, -1 none */
    int64_t *why;           /* per statement: the one whose end decided its end, -1 none */
    int64_t *last_host;     /* host queues: last statement appended */
    int64_t *api_since;     /* host queues: cost paid since it */
    int64_t *last_on;       /* last statement appended per queue */
    rp_gen *gens;
    uint32_t n_gens, cap_gens;
    uint32_t **gen_of;      /* by string id: generation k's index in gens */
    uint64_t *n_gen_of;
    int64_t **sync_deps;    /* sync device/all, await: statements to wait for */
    int64_t **sem_sets;     /* await of a value semaphore: its sets, in file order */
} replay;

/* Statement i of the replayed trace, its seq i (what the binder answers in). */
static trace_stmt stmt_at(const replay *rp, uint64_t i)
{
    trace_stmt s;
    trace_stmt_at(rp->t, i, &s);
    s.seq = i;
    return s;
}

static uint64_t access_bytes(const trace_stmt *s)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i < s->n_access; i++)
        b += s->access[i].hi - s->access[i].lo;
    return b;
}

/* The value of attribute key of s as a number; false when absent or not a
 * number (a hand-written trace may use any key for its own purposes). */
static bool attr_u64(const trace *t, const trace_stmt *s, const char *key, uint64_t *out)
{
    for (uint32_t a = 0; a < s->n_attr; a++) {
        if (strcmp(trace_str(t, s->attr[a].key), key) != 0)
            continue;
        const char *v = trace_str(t, s->attr[a].value);
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (!*v || *end || errno || *v == '-')
            return false;
        *out = n;
        return true;
    }
    return false;
}

static bool attr_is(const trace *t, const trace_stmt *s, const char *key, const char *value)
{
    for (uint32_t a = 0; a < s->n_attr; a++)
        if (strcmp(trace_str(t, s->attr[a].key), key) == 0)
            return strcmp(trace_str(t, s->attr[a].value), value) == 0;
    return false;
}

/* Where a buffer's root lives: a device name id, or TRACE_NONE for host memory. */
static uint32_t place_of(const trace *t, uint32_t buffer)
{
    const trace_buffer *root = &t->buffers[t->buffers[buffer].root];
    return root->loc == TRACE_LOC_DEVICE ? root->device : TRACE_NONE;
}

void sim_stmt_cost_of(const trace *t, const trace_stmt *s, sim_stmt_cost *out)
{
    memset(out, 0, sizeof *out);
    out->overhead_ns = -1;
    if (s->kind == TRACE_COPY) {
        if (s->n_access < 2)
            return;
        /* The path of a copy from the places of its two accesses. */
        uint32_t from = place_of(t, s->access[0].buffer), to = place_of(t, s->access[1].buffer);
        if (from == TRACE_NONE && to != TRACE_NONE)
            out->path = SIM_PATH_H2D;
        else if (from != TRACE_NONE && to == TRACE_NONE)
            out->path = SIM_PATH_D2H;
        else if (from != TRACE_NONE && from != to)
            out->path = SIM_PATH_P2P;
        if (!attr_u64(t, s, "bytes", &out->bytes))
            out->bytes = s->access[0].hi - s->access[0].lo;
        return;
    }
    if (s->kind != TRACE_OP)
        return;
    out->family = sim_op_family(t, s);
    if (!attr_u64(t, s, "bytes", &out->bytes))
        out->bytes = access_bytes(s);
    attr_u64(t, s, "flops", &out->flops);
    attr_u64(t, s, "flops_f16", &out->flops_half);
    uint64_t overhead;
    if (attr_u64(t, s, "overhead_ns", &overhead))
        out->overhead_ns = overhead > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)overhead;
}

/* An op, priced from its attributes (cost.c). */
static int64_t op_dur(const trace *t, const sim_model *m, const trace_stmt *s, bool host)
{
    sim_stmt_cost c;
    sim_stmt_cost_of(t, s, &c);
    return sim_cost_kernel(m, c.family, host, c.flops, c.flops_half, c.bytes, c.overhead_ns);
}

/* A copy: over the path between its source's and destination's roots. */
static int64_t copy_dur(const trace *t, const sim_model *m, const trace_stmt *s, bool host)
{
    if (s->n_access < 2)
        return m->copy_latency_ns + sim_cost_unblock(m, TRACE_COPY, host);
    sim_stmt_cost c;
    sim_stmt_cost_of(t, s, &c);
    return sim_cost_copy(m, host, c.path, c.bytes);
}

/* A collective's cost once every participant arrived. */
static int64_t collective_dur(const trace *t, const sim_model *m, const trace_stmt *s)
{
    uint64_t n = s->count ? s->count : 2;
    uint64_t b = s->n_access ? s->access[0].hi - s->access[0].lo : 0;
    return sim_cost_allreduce(m, n, b, attr_is(t, s, "algorithm", "butterfly"));
}

static int64_t model_dur(const replay *rp, const trace_stmt *s, bool host)
{
    switch (s->kind) {
    case TRACE_OP:
        return op_dur(rp->t, rp->o->model, s, host);
    case TRACE_COPY:
        return copy_dur(rp->t, rp->o->model, s, host);
    case TRACE_COLLECTIVE:
        return collective_dur(rp->t, rp->o->model, s);
    default:
        return 0;
    }
}

static int64_t work_dur(const replay *rp, const trace_stmt *s, bool host)
{
    if (rp->o->durations_recorded && s->dur != TRACE_TIME_NONE && s->kind != TRACE_WAIT &&
        s->kind != TRACE_SYNC && s->kind != TRACE_AWAIT && s->kind != TRACE_BARRIER &&
        s->kind != TRACE_RECORD && s->kind != TRACE_RECV)
        return s->dur;
    return model_dur(rp, s, host);
}

static int push_q(replay *rp, uint32_t q, int64_t i)
{
    if (rp->q_n[q] == rp->q_cap[q]) {
        uint64_t cap = rp->q_cap[q] ? rp->q_cap[q] * 2 : 64;
        int64_t *n = realloc(rp->q_list[q], cap * sizeof *n);
        if (!n)
            return -1;
        rp->q_list[q] = n;
        rp->q_cap[q] = cap;
    }
    rp->q_list[q][rp->q_n[q]++] = i;
    return 0;
}

/* Generation k of barrier or communicator `object`, made when first met. */
static rp_gen *gen_for(replay *rp, uint32_t object, uint64_t k, uint32_t *idx)
{
    uint64_t *n = &rp->n_gen_of[object];
    if (k < *n) {
        *idx = rp->gen_of[object][k];
        return &rp->gens[*idx];
    }
    uint32_t *ids = realloc(rp->gen_of[object], (k + 1) * sizeof *ids);
    if (!ids)
        return NULL;
    rp->gen_of[object] = ids;
    for (; *n <= k; (*n)++) {
        if (trace_grow32((void **)&rp->gens, &rp->cap_gens, rp->n_gens + 1, sizeof *rp->gens) != 0)
            return NULL;
        rp_gen *g = &rp->gens[rp->n_gens];
        memset(g, 0, sizeof *g);
        g->object = object;
        g->k = *n;
        g->latest = INT64_MIN;
        ids[*n] = rp->n_gens++;
    }
    *idx = ids[k];
    return &rp->gens[*idx];
}

/* A -1-terminated copy of deps[0..n) (seqs are indices here). */
static int64_t *dep_list(const uint64_t *deps, uint32_t n)
{
    int64_t *d = malloc(((size_t)n + 1) * sizeof *d);
    if (!d)
        return NULL;
    for (uint32_t k = 0; k < n; k++)
        d[k] = (int64_t)deps[k];
    d[n] = -1;
    return d;
}

/* An await of a value semaphore, ready at `ready`: whether it is released,
 * and when (*end). Rule 6b over the replayed times: the sets that ended by
 * `ready` are the ones it is ordered after. */
static bool sem_released(const replay *rp, int64_t i, int64_t ready, int64_t *end)
{
    const int64_t *sets = rp->sem_sets[i];
    uint64_t n = 0, last = TRACE_NO_SEQ;
    while (sets[n] >= 0)
        n++;
    uint64_t *values = malloc((n ? n : 1) * sizeof *values);
    if (!values)
        return false;
    for (uint64_t k = 0; k < n; k++) {
        values[k] = stmt_at(rp, (uint64_t)sets[k]).count;
        int64_t e = rp->r[sets[k]].end;
        if (e != UNTIMED && e <= ready)
            last = k;
    }
    uint64_t rel = trace_sem_release(values, n, last, stmt_at(rp, (uint64_t)i).count);
    free(values);
    if (rel == TRACE_SEM_PENDING)
        return false;               /* no set reaches the value: it never returns */
    if (rel == TRACE_SEM_PASSED) {
        *end = ready;
        return true;
    }
    if (rp->r[sets[rel]].end == UNTIMED)
        return false;
    *end = rp->r[sets[rel]].end;
    return true;
}

/* Tries to time statement i (its queue predecessor is timed). */
static bool try_time(replay *rp, int64_t i)
{
    const trace *t = rp->t;
    const trace_stmt stmt = stmt_at(rp, (uint64_t)i), *s = &stmt;
    rp_stmt *r = &rp->r[i];
    const sim_model *m = rp->o->model;
    bool host = t->queues[s->queue].kind == TRACE_QUEUE_HOST;
    int64_t ready = rp->q_end[s->queue];
    int64_t ready_src = rp->q_last[s->queue];  /* what `ready` is the end of */
    if (r->sub_after >= 0) {
        if (rp->r[r->sub_after].end == UNTIMED)
            return false;
        int64_t sub = rp->r[r->sub_after].end + r->sub_offset;
        if (sub > ready) {
            ready = sub;
            ready_src = r->sub_after;
        }
    } else if (!host) {
        if (r->sub_offset > ready) {
            ready = r->sub_offset;
            ready_src = -1;
        }
    }
    if (host && r->sub_offset > 0)
        ready += r->sub_offset;     /* API calls made since its previous statement */
    int64_t dep_end = INT64_MIN, dep_src = -1;
    if (r->dep >= 0) {
        if (rp->r[r->dep].end == UNTIMED)
            return false;
        dep_end = rp->r[r->dep].end;
        dep_src = r->dep;
    }
    if (rp->sync_deps && rp->sync_deps[i]) {
        for (int64_t *d = rp->sync_deps[i]; *d >= 0; d++) {
            if (rp->r[*d].end == UNTIMED)
                return false;
            if (rp->r[*d].end > dep_end) {
                dep_end = rp->r[*d].end;
                dep_src = *d;
            }
        }
    }
    /* what decided the end: the dependency when it ended after the queue
     * was ready (set again below where another rule decides) */
    rp->why[i] = dep_src >= 0 && dep_end > ready ? dep_src : ready_src;
    switch (s->kind) {
    case TRACE_WAIT:
        if (r->dep < 0) {           /* binds to nothing: orders nothing */
            r->start = ready;
            r->end = ready;
            break;
        }
        r->start = ready;
        r->end = (dep_end > ready ? dep_end : ready) + sim_cost_unblock(m, TRACE_WAIT, host);
        break;
    case TRACE_SYNC:
        r->start = ready;
        r->end = (dep_end > ready ? dep_end : ready) + sim_cost_unblock(m, TRACE_SYNC, host);
        break;
    case TRACE_AWAIT:
        if (s->sem) {
            int64_t end;
            if (!rp->sem_sets[i] || !sem_released(rp, i, ready, &end))
                return false;
            r->start = ready;
            r->end = (end > ready ? end : ready) + (host ? m->kv_store_ns : 0);
            rp->why[i] = ready_src;     /* the set is not named: the queue's */
            break;
        }
        if (!rp->sync_deps[i] || rp->sync_deps[i][0] < 0)
            return false;           /* no signal of its flag: it never returns */
        r->start = ready;
        r->end = dep_end > ready ? dep_end : ready;
        break;
    case TRACE_COLLECTIVE:
    case TRACE_BARRIER: {
        if (r->gen == NO_GEN) {     /* an extra arrival: passes through */
            r->start = r->end = ready;
            break;
        }
        rp_gen *g = &rp->gens[r->gen];
        if (r->start == UNTIMED) {  /* arrive once */
            r->start = ready;
            g->arrived++;
            if (ready > g->latest) {
                g->latest = ready;
                g->latest_stmt = i;
            }
            int64_t c = s->kind == TRACE_COLLECTIVE ? work_dur(rp, s, host) : m->ipc_barrier_ns;
            /* Recorded: the last arriver's dur is the pure cost. */
            if (rp->o->durations_recorded && s->kind == TRACE_COLLECTIVE) {
                if (g->cost < 0 || c < g->cost)
                    g->cost = c;
            } else if (c > g->cost) {
                g->cost = c;
            }
        }
        if (g->arrived < g->count)
            return false;
        r->end = g->latest + (g->cost > 0 ? g->cost : 0);
        /* the last arrival decided it: its queue's readiness */
        rp->why[i] = g->latest_stmt == i ? ready_src : g->latest_stmt;
        break;
    }
    case TRACE_RECV: {
        if (r->dep < 0)
            return false;           /* no send pairs with it: it never returns */
        const trace_stmt send = stmt_at(rp, (uint64_t)r->dep), *snd = &send;
        uint64_t bytes = snd->n_access ? snd->access[0].hi - snd->access[0].lo : 0;
        int64_t arrive = rp->r[r->dep].start + sim_cost_copy(m, false, SIM_PATH_P2P, bytes);
        r->start = ready;
        r->end = arrive > ready ? arrive : ready;
        rp->why[i] = arrive > ready ? r->dep : ready_src;
        break;
    }
    case TRACE_SIGNAL:
        /* A host's set of a value semaphore is a key-value store put. */
        r->start = ready;
        r->end = ready + (host && s->sem ? m->kv_store_ns : 0);
        break;
    case TRACE_RECORD:
    case TRACE_ALLOC:
    case TRACE_FREE:
        r->start = ready;
        r->end = ready;
        break;
    default:
        r->start = ready;
        r->end = ready + work_dur(rp, s, host);
        break;
    }
    rp->q_end[s->queue] = r->end;
    rp->q_last[s->queue] = i;
    return true;
}


/* The k-th smallest of e[0..n) (k < n), moving e's values about:
 * quickselect, O(n) on average (a replay of a million statements is priced
 * many times by `advise`; sorting for a median cost more than the replay). */
static int64_t nth_smallest(int64_t *e, uint64_t n, uint64_t k)
{
    uint64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t pivot = e[lo + (hi - lo) / 2];
        uint64_t i = lo, j = hi;
        while (i <= j) {
            while (e[i] < pivot)
                i++;
            while (e[j] > pivot)
                j--;
            if (i <= j) {
                int64_t x = e[i];
                e[i] = e[j];
                e[j] = x;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return e[k];
    }
    return e[k];
}

/* The median start-time error of the statements the input timed (each side
 * measured from its own first start). Returns 0 or -1 (memory). */
static int start_errors(const replay *rp, int64_t t_min, int64_t start, sim_replay_result *res)
{
    res->median_start_error_ns = -1;
    res->n_start_compared = 0;
    int64_t *e = malloc((rp->n ? rp->n : 1) * sizeof *e);
    if (!e)
        return -1;
    uint64_t n = 0;
    for (uint64_t i = 0; i < rp->n; i++) {
        int64_t t0 = rp->r[i].dropped ? TRACE_TIME_NONE : stmt_at(rp, i).t;
        if (t0 == TRACE_TIME_NONE || rp->r[i].start == UNTIMED)
            continue;
        int64_t d = (rp->r[i].start - start) - (t0 - t_min);
        e[n++] = d < 0 ? -d : d;
    }
    if (n) {
        res->median_start_error_ns = nth_smallest(e, n, n / 2);
        res->n_start_compared = n;
    }
    free(e);
    return 0;
}

/* The critical path: from the statement that ends last, back through the
 * statement whose end decided each one's end (try_time's `why`: its
 * queue's previous statement, its submission, or what it waited for).
 * crit[i] is set for every statement on it. */
static void critical_path(const replay *rp, bool *crit)
{
    int64_t last = -1;
    for (uint64_t i = 0; i < rp->n; i++) {
        crit[i] = false;
        if (!rp->r[i].dropped && (last < 0 || rp->r[i].end > rp->r[last].end))
            last = (int64_t)i;
    }
    /* each step goes to a statement that ended no later, and a statement
     * is visited once: the walk ends */
    for (int64_t i = last; i >= 0 && !crit[i]; i = rp->why[i])
        crit[i] = true;
}

int sim_replay(trace_reader *rd, const sim_replay_opts *o, sim_replay_result *res, trace_error *err)
{
    memset(res, 0, sizeof *res);
    trace *t = NULL;
    /* A memory reader does not own its trace: its statements are there. */
    bool own = rd->owns_trace;
    if (own) {
        if (trace_reader_load(rd, &t, err) != 0)
            return -1;
    } else {
        t = rd->trace;
        trace_reader_close(rd);
    }
    replay rp = { .t = t, .o = o, .n = t->n_stmts };
    uint32_t nq = t->n_queues;
    int rc = -1;
    rp.r = calloc(rp.n + 1, sizeof *rp.r);
    rp.q_list = calloc(nq + 1, sizeof *rp.q_list);
    rp.q_n = calloc(nq + 1, sizeof *rp.q_n);
    rp.q_cap = calloc(nq + 1, sizeof *rp.q_cap);
    rp.q_end = calloc(nq + 1, sizeof *rp.q_end);
    rp.q_last = malloc((nq + 1) * sizeof *rp.q_last);
    rp.why = malloc((rp.n + 1) * sizeof *rp.why);
    rp.last_host = calloc(nq + 1, sizeof *rp.last_host);
    rp.api_since = calloc(nq + 1, sizeof *rp.api_since);
    rp.last_on = calloc(nq + 1, sizeof *rp.last_on);
    rp.fifo_head_pos = calloc(nq + 1, sizeof *rp.fifo_head_pos);
    rp.gen_of = calloc((size_t)t->n_strs + 1, sizeof *rp.gen_of);
    rp.n_gen_of = calloc((size_t)t->n_strs + 1, sizeof *rp.n_gen_of);
    rp.sync_deps = calloc(rp.n + 1, sizeof *rp.sync_deps);
    rp.sem_sets = calloc(rp.n + 1, sizeof *rp.sem_sets);
    trace_binder *bind = trace_binder_new(TRACE_BIND_FLAGS);
    if (!rp.r || !rp.q_list || !rp.q_n || !rp.q_cap || !rp.q_end || !rp.q_last ||
        !rp.why || !rp.last_host ||
        !rp.api_since || !rp.last_on || !rp.fifo_head_pos || !rp.gen_of || !rp.n_gen_of ||
        !rp.sync_deps || !rp.sem_sets || !bind) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t q = 0; q < nq; q++) {
        rp.last_host[q] = -1;
        rp.last_on[q] = -1;
        rp.q_last[q] = -1;
    }
    for (uint64_t i = 0; i < rp.n; i++)
        rp.why[i] = -1;
    int64_t t_min = INT64_MAX, t_max = INT64_MIN;
    /* Pass 1: bindings, submission points and generations, in file order. */
    for (uint64_t i = 0; i < rp.n; i++) {
        const trace_stmt stmt = stmt_at(&rp, i), *s = &stmt;
        rp_stmt *r = &rp.r[i];
        r->start = r->end = UNTIMED;
        r->dep = -1;
        r->gen = NO_GEN;
        r->sub_after = -1;
        if (s->t != TRACE_TIME_NONE) {
            if (s->t < t_min)
                t_min = s->t;
            int64_t e = s->t + (s->dur != TRACE_TIME_NONE ? s->dur : 0);
            if (e > t_max)
                t_max = e;
        }
        for (int d = 0; d < o->n_drop; d++)
            if (o->drop_seq[d] == s->seq && (s->kind == TRACE_WAIT || s->kind == TRACE_SYNC ||
                                             s->kind == TRACE_AWAIT))
                r->dropped = true;
        if (o->drop && o->drop[i] &&
            (s->kind == TRACE_WAIT || s->kind == TRACE_SYNC || s->kind == TRACE_AWAIT ||
             s->kind == TRACE_BARRIER))
            r->dropped = true;
        if (r->dropped) {
            res->n_dropped++;
            continue;
        }
        bool host = t->queues[s->queue].kind == TRACE_QUEUE_HOST;
        if (host) {
            r->sub_offset = rp.api_since[s->queue];
            rp.api_since[s->queue] = 0;
            rp.last_host[s->queue] = (int64_t)i;
        } else {
            uint32_t h = trace_submitter(t, s);
            if (h != TRACE_NONE) {
                rp.api_since[h] += sim_cost_submit(o->model, s->kind);
                r->sub_after = rp.last_host[h];
                r->sub_offset = rp.api_since[h];
            }
        }
        trace_bind bd;
        if (trace_binder_feed(bind, s, &bd) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto done;
        }
        switch (s->kind) {
        case TRACE_WAIT:
            r->dep = bd.record == TRACE_NO_SEQ ? -1 : (int64_t)bd.record;
            break;
        case TRACE_SEND:
        case TRACE_RECV:
            /* rule 9: whichever of the pair comes second links them */
            if (bd.match_other != TRACE_NO_SEQ) {
                if (s->kind == TRACE_RECV)
                    r->dep = (int64_t)bd.match_other;
                else
                    rp.r[bd.match_other].dep = (int64_t)i;
            }
            break;
        case TRACE_SYNC: {
            int64_t *deps = malloc((nq + 1) * sizeof *deps);
            if (!deps) {
                trace_error_set(err, TRACE_ENOMEM, "out of memory");
                goto done;
            }
            uint32_t nd = 0;
            for (uint32_t q = 0; q < nq; q++)
                if (rp.last_on[q] >= 0 && trace_sync_covers(t, s, q))
                    deps[nd++] = rp.last_on[q];
            deps[nd] = -1;
            rp.sync_deps[i] = deps;
            break;
        }
        case TRACE_COLLECTIVE:
        case TRACE_BARRIER: {
            if (bd.gen_role == TRACE_GEN_EXTRA)
                break;
            rp_gen *g = gen_for(&rp, s->object, bd.gen, &r->gen);
            if (!g) {
                trace_error_set(err, TRACE_ENOMEM, "out of memory");
                goto done;
            }
            g->count = bd.gen_count ? bd.gen_count : 1;
            g->cost = (o->durations_recorded && s->kind == TRACE_COLLECTIVE) ? -1 : 0;
            break;
        }
        default:
            break;
        }
        rp.last_on[s->queue] = (int64_t)i;
        if (push_q(&rp, s->queue, (int64_t)i) != 0)
            goto done;
    }
    /* Awaits: after every signal of their flag, wherever it stands (rule 6). */
    for (uint64_t i = 0; i < rp.n; i++) {
        const trace_stmt aw_stmt = stmt_at(&rp, i);
        if (aw_stmt.kind != TRACE_AWAIT || rp.r[i].dropped)
            continue;
        const uint64_t *sig, *aw;
        uint32_t n_sig, n_aw;
        trace_binder_flag(bind, aw_stmt.object, &sig, &n_sig, &aw, &n_aw);
        int64_t **to = aw_stmt.sem ? &rp.sem_sets[i] : &rp.sync_deps[i];
        if (!(*to = dep_list(sig, n_sig))) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto done;
        }
    }
    /* Pass 2: advance queues until nothing moves. */
    uint64_t timed = 0, todo = rp.n - res->n_dropped;
    bool moved = true;
    while (moved && timed < todo) {
        moved = false;
        for (uint32_t q = 0; q < nq; q++) {
            while ((uint64_t)rp.fifo_head_pos[q] < rp.q_n[q]) {
                int64_t i = rp.q_list[q][rp.fifo_head_pos[q]];
                if (!try_time(&rp, i))
                    break;
                rp.fifo_head_pos[q]++;
                timed++;
                moved = true;
            }
        }
    }
    if (timed < todo) {
        for (uint32_t q = 0; q < nq; q++)
            if ((uint64_t)rp.fifo_head_pos[q] < rp.q_n[q]) {
                int64_t i = rp.q_list[q][rp.fifo_head_pos[q]];
                const trace_stmt hs = stmt_at(&rp, (uint64_t)i);
                char name[64];
                trace_error_set(err, TRACE_EUSAGE,
                                "the replay hangs: queue %s can never run %s (seq %llu)",
                                trace_str(t, t->queues[q].name),
                                trace_stmt_name(t, &hs, name, sizeof name),
                                (unsigned long long)hs.seq);
                break;
            }
        goto done;
    }
    int64_t start = INT64_MAX, end = INT64_MIN;
    res->n_queues = nq < 256 ? nq : 256;
    for (uint64_t i = 0; i < rp.n; i++) {
        if (rp.r[i].dropped)
            continue;
        if (rp.r[i].start < start)
            start = rp.r[i].start;
        if (rp.r[i].end > end)
            end = rp.r[i].end;
        const trace_stmt bs = stmt_at(&rp, i);
        trace_kind k = bs.kind;
        if (bs.queue < 256 && (k == TRACE_OP || k == TRACE_COPY || k == TRACE_COLLECTIVE))
            res->busy_ns[bs.queue] += rp.r[i].end - rp.r[i].start;
    }
    for (uint32_t q = 0; q < res->n_queues; q++)
        snprintf(res->queue_names[q], sizeof res->queue_names[q], "%s", trace_str(t, t->queues[q].name));
    res->makespan_ns = end > start ? end - start : 0;
    if (o->start && o->end)
        for (uint64_t i = 0; i < rp.n; i++) {
            bool kept = !rp.r[i].dropped;
            o->start[i] = kept ? rp.r[i].start - start : TRACE_TIME_NONE;
            o->end[i] = kept ? rp.r[i].end - start : TRACE_TIME_NONE;
        }
    if (o->critical)
        critical_path(&rp, o->critical);
    res->recorded_makespan_ns = t_max > t_min ? t_max - t_min : -1;
    res->n_stmts = rp.n;
    if (start_errors(&rp, t_min, start, res) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    /* The re-timed trace. */
    if (o->out) {
        sched_sink *k = o->out;
        for (uint32_t q = 0; q < nq; q++)
            k->iface->queue(k->ctx, trace_str(t, t->queues[q].name), t->queues[q].kind,
                            t->queues[q].device == TRACE_NONE ? NULL : trace_str(t, t->queues[q].device));
        for (uint32_t b = 0; b < t->n_buffers; b++) {
            const trace_buffer *tb = &t->buffers[b];
            if (tb->parent == TRACE_NONE)
                k->iface->buffer(k->ctx, trace_str(t, tb->name), tb->size, tb->loc,
                                 tb->device == TRACE_NONE ? NULL : trace_str(t, tb->device), tb->pinned);
            else
                k->iface->view(k->ctx, trace_str(t, tb->name), tb->parent, tb->offset, tb->size);
        }
        trace_attr *attrs = NULL;
        uint32_t cap_attrs = 0;
        for (uint64_t i = 0; i < rp.n; i++) {
            if (rp.r[i].dropped)
                continue;
            trace_stmt s = stmt_at(&rp, i);
#define REMAP(id) ((id) == TRACE_NONE ? TRACE_NONE : k->iface->intern(k->ctx, trace_str(t, (id))))
            s.label = REMAP(s.label);
            if (s.kind == TRACE_RECORD || s.kind == TRACE_WAIT || s.kind == TRACE_BARRIER ||
                s.kind == TRACE_SIGNAL || s.kind == TRACE_AWAIT || s.kind == TRACE_COLLECTIVE ||
                s.kind == TRACE_SEND || s.kind == TRACE_RECV ||
                (s.kind == TRACE_SYNC && s.sync_scope == TRACE_SYNC_DEVICE))
                s.object = REMAP(s.object);
            s.coll_kind = REMAP(s.coll_kind);
            if (s.n_attr > cap_attrs) {
                trace_attr *na = realloc(attrs, s.n_attr * sizeof *na);
                if (!na)
                    break;
                attrs = na;
                cap_attrs = s.n_attr;
            }
            for (uint32_t a = 0; a < s.n_attr; a++)
                attrs[a] = (trace_attr){ REMAP(s.attr[a].key), REMAP(s.attr[a].value) };
#undef REMAP
            s.attr = attrs;
            s.t = rp.r[i].start - start;
            s.dur = rp.r[i].end - rp.r[i].start;
            s.line = 0;
            k->iface->append(k->ctx, &s);
        }
        free(attrs);
    }
    rc = 0;
done:
    if (rp.sync_deps)
        for (uint64_t i = 0; i < rp.n; i++)
            free(rp.sync_deps[i]);
    if (rp.sem_sets)
        for (uint64_t i = 0; i < rp.n; i++)
            free(rp.sem_sets[i]);
    free(rp.sem_sets);
    if (rp.q_list)
        for (uint32_t q = 0; q < nq; q++)
            free(rp.q_list[q]);
    if (rp.gen_of)
        for (uint32_t k = 0; k <= t->n_strs; k++)
            free(rp.gen_of[k]);
    free(rp.gen_of);
    free(rp.n_gen_of);
    trace_binder_free(bind);
    free(rp.gens);
    free(rp.sync_deps);
    free(rp.r);
    free(rp.q_list);
    free(rp.q_n);
    free(rp.q_cap);
    free(rp.q_end);
    free(rp.q_last);
    free(rp.why);
    free(rp.last_host);
    free(rp.api_since);
    free(rp.last_on);
    free(rp.fifo_head_pos);
    if (own)
        trace_free(t);
    return rc;
}
