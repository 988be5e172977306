/*
 * bind.c -- which statements a statement depends on, by the rules of the
 * trace format (docs/trace-format.md, "Order and happens-before"), decided
 * here once for every consumer: the checker (check/hb.c), replay
 * (sim/replay.c) and the timeline's arrows (viz/timeline.c). Each consumer
 * keeps its own runtime state (clocks, times, pictures); none decides a
 * binding itself.
 *
 *   rule 2  submission: trace_submitter() (model.c): by=, else the only
 *           host.
 *   rule 3  `wait E` binds to the most recent `record E` before it in the
 *           file; a later record does not change that binding; a wait with
 *           none binds to nothing (wait-unrecorded). The binder also says
 *           which record a new record supersedes: no later wait can bind to
 *           the old one, so consumers may forget it once its waits ran.
 *   rule 4  `sync S | device=D | all` covers the streams in its scope
 *           (trace_sync_covers); "what was submitted before the sync" is
 *           each consumer's count of the stream's statements at that point.
 *           In a merged job (queues named rN. by merge.c) a host's `sync
 *           all` covers its own rank's streams only (ruling 4).
 *   rule 5, 7  generation k of a barrier (a communicator's collectives) is
 *           each queue's k-th arrival; it holds the first count= (size=)
 *           such arrivals in submission order. One more is an extra arrival
 *           (a mismatch that synchronises nothing); arrivals that disagree
 *           with the generation's first on count= (or, for collectives, on
 *           KIND or size=) are members that mismatch.
 *   rule 6  every signal of a flag happens before what follows any await of
 *           it, wherever it stands: with TRACE_BIND_FLAGS the binder keeps
 *           each flag's signals and awaits (trace_binder_flag) so that
 *           consumers that hold the whole trace (replay, pictures) can pair
 *           them; the checker counts signals instead (check/hb.c).
 *   rule 6b value semaphores (trace_sem_release): the sets of a semaphore,
 *           in the order they run (each must happen before the next), give
 *           its values; `await S >=V` is released by the first set, from
 *           the last set that happens before the await on, whose value is at
 *           least V: nothing earlier can be what it saw, nothing later need
 *           have run. A semaphore starts at 0.
 *   rule 9  point to point: the messages on a channel (communicator, source
 *           rank, destination rank, tag) pair up in order: the k-th send on
 *           it with the k-th recv on it, each side counted in submission
 *           order on its own. The pairing needs no order between ranks (a
 *           recv may be fed before its send), only each rank's own order of
 *           its sends (its recvs) on a channel, which a merge keeps. Each
 *           pair gets a message id; an end still alone at the end of the
 *           input is unmatched (trace_binder_unmatched).
 *
 * State: the latest record of each event name and, per barrier or
 * communicator, its participant queues and their arrival counts. Memory
 * grows with distinct names, not with statements (flag lists aside).
 */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */

/* A barrier or communicator: who arrives, and each generation's first
 * arrival while the generation is still filling. */
typedef struct gen_first {
    uint64_t k;
    uint64_t seq, count;
    uint32_t queue, line, kind;
    uint64_t members;           /* arrivals bound to it so far */
} gen_first;

typedef struct bar {
    uint64_t first_count;       /* count= (size=) of the first arrival ever */
    trace_member *part;         /* one per queue: its arrivals and latest arrival */
    uint32_t n, cap;
    gen_first *open;            /* generations not yet full */
    uint32_t n_open, cap_open;
} bar;

typedef struct flag_lists {
    uint64_t *signals, *awaits;
    uint32_t n_signals, n_awaits, cap_signals, cap_awaits;
} flag_lists;

/* A point-to-point channel: its unmatched ends, all sends or all recvs,
 * as a FIFO (pending[head..n)). */
typedef struct chan {
    uint32_t comm, src, dst;
    uint64_t tag;
    bool sends_ahead;           /* the pending ends are sends */
    trace_p2p_end *pending;
    uint32_t head, n, cap;
    uint32_t next;              /* the next channel of the same hash, index + 1; 0: none */
} chan;

struct trace_binder {
    unsigned options;
    chan *chans;                        /* rule 9 */
    uint32_t n_chans, cap_chans;
    trace_u64map chan_idx;              /* channel hash -> index + 1 of its first channel */
    uint64_t n_matches;
    trace_u64map records;               /* event name -> seq of its latest record */
    trace_u64map bars;                  /* name << 1 | coll -> bar* */
    trace_u64map flags;                 /* flag name -> flag_lists* */
};

trace_binder *trace_binder_new(unsigned options)
{
    trace_binder *b = calloc(1, sizeof *b);
    if (b)
        b->options = options;
    return b;
}

static void bar_free(bar *x)
{
    if (x) {
        free(x->part);
        free(x->open);
        free(x);
    }
}

void trace_binder_free(trace_binder *b)
{
    if (!b)
        return;
    for (uint32_t i = 0; i < b->bars.cap; i++)
        if (b->bars.used[i])
            bar_free((bar *)(uintptr_t)b->bars.vals[i]);
    for (uint32_t i = 0; i < b->flags.cap; i++)
        if (b->flags.used[i]) {
            flag_lists *f = (flag_lists *)(uintptr_t)b->flags.vals[i];
            free(f->signals);
            free(f->awaits);
            free(f);
        }
    for (uint32_t i = 0; i < b->n_chans; i++)
        free(b->chans[i].pending);
    free(b->chans);
    trace_u64map_free(&b->chan_idx);
    trace_u64map_free(&b->records);
    trace_u64map_free(&b->bars);
    trace_u64map_free(&b->flags);
    free(b);
}

trace_binder *trace_binder_clone(const trace_binder *b)
{
    trace_binder *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->options = b->options & ~TRACE_BIND_FLAGS;   /* flag lists are not cloned */
    if (trace_u64map_copy(&c->records, &b->records) != 0 || trace_u64map_copy(&c->bars, &b->bars) != 0)
        goto fail;
    for (uint32_t i = 0; i < c->bars.cap; i++) {
        if (!c->bars.used[i])
            continue;
        const bar *x = (const bar *)(uintptr_t)c->bars.vals[i];
        bar *y = calloc(1, sizeof *y);
        if (y) {
            y->part = malloc((x->cap ? x->cap : 1) * sizeof *y->part);
            y->open = malloc((x->cap_open ? x->cap_open : 1) * sizeof *y->open);
        }
        if (!y || !y->part || !y->open) {
            bar_free(y);
            /* leave the rest pointing at nothing the free would touch */
            for (uint32_t k = i; k < c->bars.cap; k++)
                c->bars.used[k] = 0;
            goto fail;
        }
        memcpy(y->part, x->part, x->n * sizeof *y->part);
        memcpy(y->open, x->open, x->n_open * sizeof *y->open);
        y->n = x->n;
        y->cap = x->cap ? x->cap : 1;
        y->n_open = x->n_open;
        y->cap_open = x->cap_open ? x->cap_open : 1;
        c->bars.vals[i] = (uint64_t)(uintptr_t)y;
    }
    c->n_matches = b->n_matches;
    if (b->n_chans) {
        if (trace_u64map_copy(&c->chan_idx, &b->chan_idx) != 0 ||
            !(c->chans = calloc(b->n_chans, sizeof *c->chans)))
            goto fail;
        c->cap_chans = c->n_chans = b->n_chans;
        for (uint32_t i = 0; i < b->n_chans; i++) {
            chan *y = &c->chans[i];
            *y = b->chans[i];
            y->pending = NULL;
            y->cap = y->n - y->head;
            if (y->cap && !(y->pending = malloc(y->cap * sizeof *y->pending))) {
                y->cap = y->n = y->head = 0;
                goto fail;
            }
            if (y->cap)
                memcpy(y->pending, b->chans[i].pending + y->head, y->cap * sizeof *y->pending);
            y->n -= y->head;
            y->head = 0;
        }
    }
    return c;
fail:
    trace_binder_free(c);
    return NULL;
}

bool trace_binder_same(const trace_binder *a, const trace_binder *b)
{
    /* The binder's state is a function of the statements fed: two binders
     * fed the same statements agree. This compares what pruning may make
     * differ: the records still known. */
    if (a->records.count != b->records.count)
        return false;
    for (uint32_t i = 0; i < a->records.cap; i++) {
        if (!a->records.used[i])
            continue;
        const uint64_t *v = trace_u64map_get(&b->records, a->records.keys[i]);
        if (!v || *v != a->records.vals[i])
            return false;
    }
    return true;
}

void trace_binder_forget(trace_binder *b, bool (*dead)(void *ctx, uint64_t record_seq), void *ctx)
{
    for (uint32_t i = 0; i < b->records.cap;) {
        if (b->records.used[i] && dead(ctx, b->records.vals[i])) {
            trace_u64map_del(&b->records, b->records.keys[i]);
            continue;           /* a later key may have moved into slot i */
        }
        i++;
    }
}

/* The rank of queue q in a merged job: N when its name is "rN." and more
 * (traces/merge.c names every queue of rank N so); TRACE_NONE otherwise. */
static uint32_t queue_rank(const trace *t, uint32_t q)
{
    const char *n = trace_str(t, t->queues[q].name);
    if (n[0] != 'r' || n[1] < '0' || n[1] > '9')
        return TRACE_NONE;
    uint64_t r = 0;
    for (n++; *n >= '0' && *n <= '9'; n++)
        if ((r = r * 10 + (uint64_t)(*n - '0')) >= TRACE_NONE)
            return TRACE_NONE;
    return *n == '.' ? (uint32_t)r : TRACE_NONE;
}

bool trace_sync_covers(const trace *t, const trace_stmt *s, uint32_t q)
{
    if (q >= t->n_queues || t->queues[q].kind != TRACE_QUEUE_STREAM)
        return false;
    switch (s->sync_scope) {
    case TRACE_SYNC_QUEUE:
        return q == s->object;
    case TRACE_SYNC_DEVICE:
        return t->queues[q].device == s->object;
    case TRACE_SYNC_ALL: {
        /* ruling 4: a rank's `sync all` covers that rank's streams only
         * (a device sync is per rank already: merge names devices rN.D) */
        uint32_t h = s->queue < t->n_queues ? queue_rank(t, s->queue) : TRACE_NONE;
        uint32_t r = h == TRACE_NONE ? TRACE_NONE : queue_rank(t, q);
        return r == TRACE_NONE || r == h;
    }
    }
    return false;
}

static bar *bar_get(trace_binder *b, uint32_t name, bool coll)
{
    uint64_t *v = trace_u64map_put(&b->bars, (uint64_t)name << 1 | coll, 0);
    if (!v)
        return NULL;
    if (!*v) {
        bar *x = calloc(1, sizeof *x);
        if (!x)
            return NULL;
        *v = (uint64_t)(uintptr_t)x;
    }
    return (bar *)(uintptr_t)*v;
}

static trace_member *member_of(bar *x, uint32_t q)
{
    for (uint32_t i = 0; i < x->n; i++)
        if (x->part[i].queue == q)
            return &x->part[i];
    if (trace_grow32((void **)&x->part, &x->cap, x->n + 1, sizeof *x->part) != 0)
        return NULL;
    x->part[x->n] = (trace_member){ q, 0, TRACE_NO_SEQ, 0, 0, TRACE_NONE };
    return &x->part[x->n++];
}

/* Generation k of x: binds an arrival of s to it (rules 5 and 7). */
static int bind_generation(bar *x, const trace_stmt *s, uint64_t k, trace_bind *out)
{
    bool coll = s->kind == TRACE_COLLECTIVE;
    gen_first *g = NULL;
    for (uint32_t i = 0; i < x->n_open && !g; i++)
        if (x->open[i].k == k)
            g = &x->open[i];
    if (!g) {
        /* Not open: new, unless another queue is already past its k-th
         * arrival -- then generation k filled up and closed: one too many. */
        for (uint32_t i = 0; i < x->n; i++)
            if (x->part[i].queue != s->queue && x->part[i].arrivals >= k) {
                out->gen_role = TRACE_GEN_EXTRA;
                out->gen_count = x->first_count;
                return 0;
            }
        if (x->n_open == x->cap_open) {
            uint32_t cap = x->cap_open ? x->cap_open * 2 : 4;
            gen_first *p = realloc(x->open, cap * sizeof *p);
            if (!p)
                return -1;
            x->open = p;
            x->cap_open = cap;
        }
        g = &x->open[x->n_open++];
        *g = (gen_first){ k, s->seq, s->count ? s->count : 1, s->queue, s->line,
                          coll ? s->coll_kind : TRACE_NONE, 0 };
    }
    out->gen_first = g->seq;
    out->gen_first_queue = g->queue;
    out->gen_first_line = g->line;
    out->gen_first_kind = g->kind;
    out->gen_count = g->count;
    if (g->members >= g->count) {
        out->gen_role = TRACE_GEN_EXTRA;
        return 0;
    }
    uint64_t mine = s->count ? s->count : 1;
    out->gen_role = mine != g->count || (coll && s->coll_kind != g->kind) ? TRACE_GEN_DISAGREES
                                                                          : TRACE_GEN_MEMBER;
    if (++g->members == g->count)
        *g = x->open[--x->n_open];      /* full: nobody else joins it */
    return 0;
}

static flag_lists *flag_get(trace_binder *b, uint32_t name)
{
    uint64_t *v = trace_u64map_put(&b->flags, name, 0);
    if (!v)
        return NULL;
    if (!*v) {
        flag_lists *f = calloc(1, sizeof *f);
        if (!f)
            return NULL;
        *v = (uint64_t)(uintptr_t)f;
    }
    return (flag_lists *)(uintptr_t)*v;
}

static int push_seq(uint64_t **v, uint32_t *n, uint32_t *cap, uint64_t seq)
{
    if (*n == *cap) {
        uint32_t c = *cap ? *cap * 2 : 4;
        uint64_t *p = realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = seq;
    return 0;
}

static uint64_t chan_hash(uint32_t comm, uint32_t src, uint32_t dst, uint64_t tag)
{
    uint64_t k[3] = { (uint64_t)comm << 32 | src, (uint64_t)dst << 32, tag };
    return trace_hash(k, sizeof k);
}

/* The channel of (comm, src, dst, tag), made when new; NULL on OOM. */
static chan *chan_get(trace_binder *b, uint32_t comm, uint32_t src, uint32_t dst, uint64_t tag)
{
    uint64_t h = chan_hash(comm, src, dst, tag);
    uint64_t *v = trace_u64map_put(&b->chan_idx, h, 0);
    if (!v)
        return NULL;
    for (uint32_t i = (uint32_t)*v; i; i = b->chans[i - 1].next) {
        chan *c = &b->chans[i - 1];
        if (c->comm == comm && c->src == src && c->dst == dst && c->tag == tag)
            return c;
    }
    if (trace_grow32((void **)&b->chans, &b->cap_chans, (uint64_t)b->n_chans + 1,
                     sizeof *b->chans) != 0)
        return NULL;
    chan *c = &b->chans[b->n_chans++];
    *c = (chan){ .comm = comm, .src = src, .dst = dst, .tag = tag, .next = (uint32_t)*v };
    *v = b->n_chans;
    return c;
}

/* Rule 9: pairs send/recv s with the oldest unmatched end of the other
 * kind on its channel, or leaves it waiting for one. */
static int bind_p2p(trace_binder *b, const trace_stmt *s, trace_bind *out)
{
    bool send = s->kind == TRACE_SEND;
    chan *c = chan_get(b, s->object, send ? s->rank : s->peer, send ? s->peer : s->rank, s->count);
    if (!c)
        return -1;
    if (c->head < c->n && c->sends_ahead != send) {
        const trace_p2p_end *o = &c->pending[c->head++];
        out->match = o->match;
        out->match_other = o->seq;
        if (c->head == c->n)
            c->head = c->n = 0;
        return 0;
    }
    if (c->head == c->n)
        c->head = c->n = 0;
    else if (c->head > c->n / 2) {
        memmove(c->pending, c->pending + c->head, (c->n - c->head) * sizeof *c->pending);
        c->n -= c->head;
        c->head = 0;
    }
    if (trace_grow32((void **)&c->pending, &c->cap, (uint64_t)c->n + 1, sizeof *c->pending) != 0)
        return -1;
    c->sends_ahead = send;
    out->match = b->n_matches++;
    c->pending[c->n++] = (trace_p2p_end){ send, c->comm, c->src, c->dst, c->tag, s->seq,
                                          out->match, s->queue, s->line };
    return 0;
}

int trace_binder_unmatched(const trace_binder *b, trace_p2p_end **out, uint64_t *n)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < b->n_chans; i++)
        total += b->chans[i].n - b->chans[i].head;
    *out = NULL;
    *n = 0;
    if (!total)
        return 0;
    if (!(*out = malloc(total * sizeof **out)))
        return -1;
    for (uint32_t i = 0; i < b->n_chans; i++)
        for (uint32_t k = b->chans[i].head; k < b->chans[i].n; k++)
            (*out)[(*n)++] = b->chans[i].pending[k];
    return 0;
}

int trace_binder_feed(trace_binder *b, const trace_stmt *s, trace_bind *out)
{
    out->match = 0;
    out->match_other = TRACE_NO_SEQ;
    out->record = out->superseded = TRACE_NO_SEQ;
    out->gen = 0;
    out->gen_role = TRACE_GEN_NONE;
    out->gen_first = TRACE_NO_SEQ;
    out->gen_first_queue = out->gen_first_kind = TRACE_NONE;
    out->gen_first_line = 0;
    out->gen_count = 0;
    switch (s->kind) {
    case TRACE_RECORD: {
        uint64_t *v = trace_u64map_put(&b->records, s->object, TRACE_NO_SEQ);
        if (!v)
            return -1;
        out->superseded = *v;
        *v = s->seq;
        return 0;
    }
    case TRACE_WAIT: {
        const uint64_t *v = trace_u64map_get(&b->records, s->object);
        out->record = v ? *v : TRACE_NO_SEQ;
        return 0;
    }
    case TRACE_BARRIER:
    case TRACE_COLLECTIVE: {
        bar *x = bar_get(b, s->object, s->kind == TRACE_COLLECTIVE);
        trace_member *me = x ? member_of(x, s->queue) : NULL;
        if (!me)
            return -1;
        if (!x->first_count)
            x->first_count = s->count ? s->count : 1;
        out->gen = ++me->arrivals;
        me->last_seq = s->seq;
        me->last_line = s->line;
        me->last_count = s->count;
        me->last_kind = s->kind == TRACE_COLLECTIVE ? s->coll_kind : TRACE_NONE;
        return bind_generation(x, s, out->gen, out);
    }
    case TRACE_SEND:
    case TRACE_RECV:
        return bind_p2p(b, s, out);
    case TRACE_SIGNAL:
    case TRACE_AWAIT: {
        if (!(b->options & TRACE_BIND_FLAGS))
            return 0;
        flag_lists *f = flag_get(b, s->object);
        if (!f)
            return -1;
        return s->kind == TRACE_SIGNAL
                   ? push_seq(&f->signals, &f->n_signals, &f->cap_signals, s->seq)
                   : push_seq(&f->awaits, &f->n_awaits, &f->cap_awaits, s->seq);
    }
    default:
        return 0;
    }
}

uint32_t trace_binder_members(const trace_binder *b, uint32_t object, bool coll,
                              const trace_member **out)
{
    const uint64_t *v = trace_u64map_get(&b->bars, (uint64_t)object << 1 | coll);
    if (!v || !*v) {
        *out = NULL;
        return 0;
    }
    const bar *x = (const bar *)(uintptr_t)*v;
    *out = x->part;
    return x->n;
}

void trace_binder_flag(const trace_binder *b, uint32_t flag, const uint64_t **signals,
                       uint32_t *n_signals, const uint64_t **awaits, uint32_t *n_awaits)
{
    const uint64_t *v = trace_u64map_get(&b->flags, flag);
    const flag_lists *f = v ? (const flag_lists *)(uintptr_t)*v : NULL;
    *signals = f ? f->signals : NULL;
    *n_signals = f ? f->n_signals : 0;
    *awaits = f ? f->awaits : NULL;
    *n_awaits = f ? f->n_awaits : 0;
}

uint64_t trace_sem_release(const uint64_t *values, uint64_t n, uint64_t last_before, uint64_t want)
{
    if (last_before == TRACE_NO_SEQ) {
        if (want == 0)
            return TRACE_SEM_PASSED;    /* a semaphore starts at 0 */
        last_before = 0;
    } else if (last_before < n && values[last_before] >= want) {
        return TRACE_SEM_PASSED;
    }
    for (uint64_t i = last_before; i < n; i++)
        if (values[i] >= want)
            return i;
    return TRACE_SEM_PENDING;
}
