/*
 * property_gen.c -- the property test's random traces (property_gen.h).
 *
 * A trace grows a statement at a time: random accesses on random queues,
 * and before each access, while the reference (property_ref.c) finds an
 * earlier conflicting access unordered with it, an order for that pair the
 * way a programmer would write it (order(): an event between streams, a
 * host sync of some scope, a flag or a value semaphore towards a host, or
 * -- with several hosts -- a hand-over through a submission edge), plus
 * random extra syncs, event hand-overs, host barriers, barriers over every
 * stream (wide traces) and the statements of rich traces (rich_step). So a
 * trace is clean, unless rich, and every synchronisation in it may matter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "property_gen.h"

uint32_t prop_rnd(prop_gen *pg, uint32_t n)
{
    pg->rng ^= pg->rng << 13;
    pg->rng ^= pg->rng >> 7;
    pg->rng ^= pg->rng << 17;
    return (uint32_t)(pg->rng % n);
}

static void push(prop_trace *g, prop_stmt s)
{
    if (g->n >= PROP_MAXS) {    /* the generator keeps room: a bug here */
        fprintf(stderr, "property_gen: more than %d statements\n", PROP_MAXS);
        abort();
    }
    g->s[g->n++] = s;
}

/* One of the flags generated so far (at least one: the caller checks). */
static int any_flag(prop_gen *pg)
{
    return (int)prop_rnd(pg, pg->n_flags < 64 ? (uint32_t)pg->n_flags : 64);
}

static int host_of(const prop_trace *g, const prop_stmt *s)
{
    return prop_is_stream(g, s->q) ? s->by : s->q;
}

/* Orders statement p before a statement that queue q (submitted by host h)
 * is about to run, by the rules a programmer would use. */
static void order(prop_gen *pg, prop_trace *g, const prop_stmt *p, int q, int h)
{
    if (prop_is_stream(g, p->q) && prop_is_stream(g, q)) {
        int e = pg->n_events++ % 64;
        push(g, (prop_stmt){ .q = p->q, .kind = TRACE_RECORD, .obj = e, .by = h });
        push(g, (prop_stmt){ .q = q, .kind = TRACE_WAIT, .obj = e, .by = h });
    } else if (prop_is_stream(g, p->q)) {
        int scope = prop_rnd(pg, 3);
        int obj = scope == 0 ? p->q : scope == 1 ? -1 : -2 - g->dev[p->q];
        push(g, (prop_stmt){ .q = q, .kind = TRACE_SYNC, .obj = obj });
    } else if (prop_is_stream(g, q) && p->q != h && prop_rnd(pg, 4)) {
        /* p's own host submits a synchronisation to x's stream: its
         * submission edge, then queue order, carry p before x (the shape
         * whose removal the minimiser once got wrong) */
        int how = prop_rnd(pg, 3), other = g->n_hosts + prop_rnd(pg, g->n_streams);
        pg->n_handoffs++;
        if (how == 0) {
            int e = pg->n_events++ % 64;
            push(g, (prop_stmt){ .q = other, .kind = TRACE_RECORD, .obj = e, .by = p->q });
            push(g, (prop_stmt){ .q = q, .kind = TRACE_WAIT, .obj = e, .by = p->q });
        } else if (how == 1 && prop_rnd(pg, 2)) {
            int v = ++pg->sem_val[p->q];
            push(g, (prop_stmt){ .q = p->q, .kind = TRACE_SIGNAL, .obj = p->q, .sem = true,
                                 .val = v });
            push(g, (prop_stmt){ .q = q, .kind = TRACE_AWAIT, .obj = p->q, .sem = true, .val = v,
                                 .by = p->q });
        } else if (how == 1) {
            int f = pg->n_flags++ % 64;
            push(g, (prop_stmt){ .q = p->q, .kind = TRACE_SIGNAL, .obj = f });
            push(g, (prop_stmt){ .q = q, .kind = TRACE_AWAIT, .obj = f, .by = p->q });
        } else {
            /* a barrier of its own per stream, so count=1 is exact */
            push(g, (prop_stmt){ .q = q, .kind = TRACE_BARRIER, .obj = 1 + q - g->n_hosts,
                                 .count = 1, .by = p->q });
        }
    } else if (pg->rich && prop_rnd(pg, 3) == 0) {
        /* a message from p's queue to the host's rank (rule 9) */
        push(g, (prop_stmt){ .q = p->q, .kind = TRACE_SEND, .obj = 2, .peer = g->rank[h],
                             .by = p->by, .n_acc = 1, .acc = { { 0, 0, 8, TRACE_R } } });
        push(g, (prop_stmt){ .q = h, .kind = TRACE_RECV, .obj = 2, .peer = g->rank[p->q],
                             .n_acc = 1, .acc = { { g->n_bufs - 1, 56, 64, TRACE_W } } });
    } else if (prop_rnd(pg, 2)) {
        /* a value semaphore of p's queue: its next value */
        int v = ++pg->sem_val[p->q];
        push(g, (prop_stmt){ .q = p->q, .kind = TRACE_SIGNAL, .obj = p->q, .sem = true,
                             .val = v });
        push(g, (prop_stmt){ .q = h, .kind = TRACE_AWAIT, .obj = p->q, .sem = true, .val = v });
    } else {
        int f = pg->n_flags++ % 64;
        push(g, (prop_stmt){ .q = p->q, .kind = TRACE_SIGNAL, .obj = f });
        push(g, (prop_stmt){ .q = h, .kind = TRACE_AWAIT, .obj = f });
    }
}

static void random_access(prop_gen *pg, prop_trace *g, prop_acc *a)
{
    static const uint64_t ranges[4][2] = { { 0, 64 }, { 0, 32 }, { 32, 64 }, { 16, 48 } };
    int r = prop_rnd(pg, 4);
    a->buf = prop_rnd(pg, g->n_bufs);
    a->lo = ranges[r][0];
    a->hi = ranges[r][1];
    a->mode = 1 + prop_rnd(pg, 3);
    if (pg->rich && prop_rnd(pg, 8) == 0)
        a->hi = a->lo;          /* a zero-length range touches nothing */
}

/* Rich traces: one of the extra statements (see prop_gen.rich). */
static void rich_step(prop_gen *pg, prop_trace *g, int *life_events)
{
    int nq = g->n_hosts + g->n_streams;
    int q = prop_rnd(pg, nq), by = (int)prop_rnd(pg, g->n_hosts);
    switch (prop_rnd(pg, 8)) {
    case 5:
    case 6: {                   /* a signal (or set) behind an await: of another
                                 * flag, chains and cycles of awaits (ruling 1) */
        int cand[PROP_MAXS], n = 0;
        for (int i = 0; i < g->n; i++)
            if (g->s[i].kind == TRACE_AWAIT)
                cand[n++] = i;
        if (!n || !pg->n_flags)
            return;
        const prop_stmt *a = &g->s[cand[prop_rnd(pg, n)]];
        if (prop_rnd(pg, 4) == 0) {
            int v = ++pg->sem_val[a->q];
            push(g, (prop_stmt){ .q = a->q, .kind = TRACE_SIGNAL, .obj = a->q, .sem = true,
                                 .val = v, .by = a->by });
        } else {
            push(g, (prop_stmt){ .q = a->q, .kind = TRACE_SIGNAL, .obj = any_flag(pg),
                                 .by = a->by });
        }
        return;
    }
    case 7: {                   /* a host awaits a flag, then submits a signal of
                                 * it to a stream: ordered after the await */
        if (!pg->n_flags)
            return;
        int f = any_flag(pg);
        int h = (int)prop_rnd(pg, g->n_hosts), st = g->n_hosts + (int)prop_rnd(pg, g->n_streams);
        push(g, (prop_stmt){ .q = h, .kind = TRACE_AWAIT, .obj = f });
        push(g, (prop_stmt){ .q = st, .kind = TRACE_SIGNAL, .obj = f, .by = h });
        return;
    }
    case 4: {                   /* another queue sets a semaphore: unordered
                                 * with its owner's sets at times (the
                                 * ambiguous class) */
        int o = prop_rnd(pg, nq);
        if (!pg->sem_val[o] || o == q)
            return;
        int v = ++pg->sem_val[o];
        push(g, (prop_stmt){ .q = q, .kind = TRACE_SIGNAL, .obj = o, .sem = true, .val = v,
                             .by = by });
        return;
    }
    case 0: {                   /* alloc or free of a root (ruling 2) */
        int b = prop_rnd(pg, g->n_bufs);
        if (prop_rnd(pg, 4) == 0 && g->n < PROP_MAXS - 80) {
            /* an allocator loop on one queue: more frees and allocs of one
             * range than the checker keeps marks for (CHECK_LIFE_MAX) */
            int pairs = 6 + (int)prop_rnd(pg, 8);
            for (int k = 0; k < pairs; k++) {
                push(g, (prop_stmt){ .q = q, .kind = TRACE_FREE, .obj = b, .by = by,
                                     .n_acc = 1, .acc = { { b, 0, 64, TRACE_W } } });
                push(g, (prop_stmt){ .q = q, .kind = TRACE_ALLOC, .obj = b, .by = by,
                                     .n_acc = 1, .acc = { { b, 0, 64, TRACE_W } } });
            }
            life_events[b] += 2 * pairs;
            return;
        }
        life_events[b]++;
        push(g, (prop_stmt){ .q = q, .kind = prop_rnd(pg, 2) ? TRACE_FREE : TRACE_ALLOC,
                             .obj = b, .by = by, .n_acc = 1,
                             .acc = { { b, 0, 64, TRACE_W } } });
        return;
    }
    case 1: {                   /* a message, its recv first at times (rule 9) */
        int d = prop_rnd(pg, nq);
        prop_stmt snd = { .q = q, .kind = TRACE_SEND, .obj = (int)prop_rnd(pg, 2),
                          .peer = g->rank[d], .by = by, .n_acc = 1 };
        prop_stmt rcv = { .q = d, .kind = TRACE_RECV, .obj = snd.obj, .peer = g->rank[q],
                          .by = (int)prop_rnd(pg, g->n_hosts), .n_acc = 1 };
        random_access(pg, g, &snd.acc[0]);
        snd.acc[0].mode = TRACE_R;
        random_access(pg, g, &rcv.acc[0]);
        rcv.acc[0].mode = TRACE_W;
        bool lone = prop_rnd(pg, 6) == 0;
        if (prop_rnd(pg, 4) == 0) {
            push(g, rcv);
            if (!lone)
                push(g, snd);
        } else {
            push(g, snd);
            if (!lone)
                push(g, rcv);
        }
        return;
    }
    case 2: {                   /* a signal behind an await of its flag (ruling 1) */
        int cand[PROP_MAXS], n = 0;
        for (int i = 0; i < g->n; i++)
            if (g->s[i].kind == TRACE_AWAIT && !g->s[i].sem)
                cand[n++] = i;
        if (!n)
            return;
        const prop_stmt *a = &g->s[cand[prop_rnd(pg, n)]];
        push(g, (prop_stmt){ .q = a->q, .kind = TRACE_SIGNAL, .obj = a->obj, .by = a->by });
        return;
    }
    default:                    /* a lone signal of a flag, from anywhere */
        if (pg->n_flags)
            push(g, (prop_stmt){ .q = q, .kind = TRACE_SIGNAL, .obj = any_flag(pg), .by = by });
        return;
    }
}

/* A trace with at least min_hosts host queues. */
void prop_generate(prop_gen *pg, prop_trace *g, int min_hosts)
{
    memset(g, 0, sizeof *g);
    pg->n_events = pg->n_flags = 0;
    memset(pg->sem_val, 0, sizeof pg->sem_val);
    g->n_hosts = min_hosts + prop_rnd(pg, 4 - min_hosts);
    g->n_streams = pg->wide ? 17 + prop_rnd(pg, PROP_MAXQ - 3 - 17 + 1) : 2 + prop_rnd(pg, 3);
    g->n_bufs = 2 + prop_rnd(pg, 3);
    for (int i = 0; i < g->n_streams; i++)
        g->dev[g->n_hosts + i] = prop_rnd(pg, 2);
    int life_events[PROP_MAXQ] = { 0 };
    if (pg->rich) {
        g->n_ranks = 1 + prop_rnd(pg, 2);
        for (int q = 0; q < g->n_hosts + g->n_streams; q++)
            g->rank[q] = prop_rnd(pg, g->n_ranks);
    }
    int steps = pg->wide ? 24 + prop_rnd(pg, 10) : 14 + prop_rnd(pg, 10);
    int n_barriers = 0;
    for (int step = 0; step < steps && g->n < PROP_MAXS - 40; step++) {
        int what = prop_rnd(pg, pg->rich ? 14 : 10);
        int nq = g->n_hosts + g->n_streams;
        if (what >= 10) {
            rich_step(pg, g, life_events);
            continue;
        }
        if (what == 0) {            /* an extra host sync */
            int h = prop_rnd(pg, g->n_hosts);
            int scope = prop_rnd(pg, 3);
            int s = g->n_hosts + prop_rnd(pg, g->n_streams);
            push(g, (prop_stmt){ .q = h, .kind = TRACE_SYNC,
                                 .obj = scope == 0 ? s : scope == 1 ? -1 : -2 - g->dev[s] });
            continue;
        }
        if (what == 1) {            /* an extra event hand-over */
            int a = g->n_hosts + prop_rnd(pg, g->n_streams);
            int b = g->n_hosts + prop_rnd(pg, g->n_streams);
            if (a != b) {
                prop_stmt p = { .q = a };
                order(pg, g, &p, b, prop_rnd(pg, g->n_hosts));
            }
            continue;
        }
        if (pg->wide && what == 4 && g->n < PROP_MAXS - 40 - g->n_streams) {
            /* every stream arrives, each submitted by some host */
            for (int q = g->n_hosts; q < nq; q++)
                push(g, (prop_stmt){ .q = q, .kind = TRACE_BARRIER, .obj = PROP_WIDE_B,
                                     .count = g->n_streams,
                                     .by = (int)prop_rnd(pg, g->n_hosts) });
            pg->n_wide_gens++;
            continue;
        }
        if (what == 2 && g->n_hosts >= 2 && n_barriers < 15) {
            for (int h = 0; h < g->n_hosts; h++)
                push(g, (prop_stmt){ .q = h, .kind = TRACE_BARRIER, .obj = 0,
                                     .count = g->n_hosts });
            n_barriers++;
            continue;
        }
        if (what == 3 && g->n_hosts >= 2 && pg->n_flags > 0) {
            /* one more signal of a flag, from any host: rule 6 makes every
             * await of it wait for this one too -- unless that would hang,
             * or, in a trace meant to be clean, make it racy. The latter
             * when it stands behind an await on whose release an earlier
             * await of its flag depends (h2: await f0, signal f1; h1: await
             * f1, then this signal of f0): ruling 1 can then be settled two
             * ways (tests/check/ref's "order-hb"), and the one it takes
             * leaves h1's await not waiting for h2's signal. About 1 trace
             * in 10,000 (test_minimize_greedy.c's long run). */
            push(g, (prop_stmt){ .q = (int)prop_rnd(pg, g->n_hosts), .kind = TRACE_SIGNAL,
                                 .obj = any_flag(pg) });
            prop_verdict r;
            prop_reference(g, &r);
            if (r.hang || (r.racy && !pg->rich))
                g->n--;
            continue;
        }
        prop_stmt x = { .q = prop_rnd(pg, nq) };
        x.kind = TRACE_OP;
        x.by = prop_is_stream(g, x.q) ? (int)prop_rnd(pg, g->n_hosts) : -1;
        x.n_acc = 1 + prop_rnd(pg, 2);
        for (int i = 0; i < x.n_acc; i++)
            random_access(pg, g, &x.acc[i]);
        for (int tries = 0; tries < 20; tries++) {
            push(g, x);
            prop_verdict r;
            prop_reference(g, &r);
            if (r.n_unordered == 0)
                break;
            g->n--;
            prop_stmt p = g->s[r.unordered_with_last[0]];
            order(pg, g, &p, x.q, host_of(g, &x));
        }
    }
    /* end with the host(s) syncing everything */
    for (int h = 0; h < g->n_hosts; h++)
        push(g, (prop_stmt){ .q = h, .kind = TRACE_SYNC, .obj = -1 });
}

/* ------------------------------------------------------------------ */
/* Into a real trace.                                                  */

trace *prop_materialise(const prop_trace *g, const bool *drop)
{
    trace *t = trace_new();
    char name[32];
    char pre[16] = "";
    for (int h = 0; h < g->n_hosts; h++) {
        if (g->n_ranks > 1)
            snprintf(pre, sizeof pre, "r%d.", g->rank[h]);
        snprintf(name, sizeof name, "%sh%d", pre, h);
        trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_HOST, TRACE_NONE);
    }
    for (int s = 0; s < g->n_streams; s++) {
        if (g->n_ranks > 1)
            snprintf(pre, sizeof pre, "r%d.", g->rank[g->n_hosts + s]);
        snprintf(name, sizeof name, "%ss%d", pre, s);
        char dev[8];
        snprintf(dev, sizeof dev, "%d", g->dev[g->n_hosts + s]);
        trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_STREAM,
                        trace_intern_cstr(t, dev));
    }
    for (int b = 0; b < g->n_bufs; b++) {
        snprintf(name, sizeof name, "B%d", b);
        trace_add_root_buffer(t, trace_intern_cstr(t, name), 64, TRACE_LOC_UNSPECIFIED, TRACE_NONE,
                              false);
    }
    for (int i = 0; i < g->n; i++) {
        if (drop && drop[i])
            continue;
        const prop_stmt *x = &g->s[i];
        trace_stmt s;
        trace_access acc[2];
        trace_stmt_init(&s);
        s.queue = (uint32_t)x->q;
        s.kind = x->kind;
        s.line = (uint32_t)i + 1;
        if (prop_is_stream(g, x->q) && g->n_hosts > 1)
            s.by = (uint32_t)x->by;
        switch (x->kind) {
        case TRACE_RECORD:
        case TRACE_WAIT:
            snprintf(name, sizeof name, "e%d", x->obj);
            s.object = trace_intern_cstr(t, name);
            break;
        case TRACE_SIGNAL:
        case TRACE_AWAIT:
            snprintf(name, sizeof name, x->sem ? "S%d" : "f%d", x->obj);
            s.object = trace_intern_cstr(t, name);
            s.sem = x->sem;
            s.count = (uint64_t)x->val;
            break;
        case TRACE_BARRIER:
            snprintf(name, sizeof name, "b%d", x->obj);
            s.object = trace_intern_cstr(t, name);
            s.count = (uint64_t)x->count;
            break;
        case TRACE_ALLOC:
        case TRACE_FREE:
            s.object = (uint32_t)x->obj;
            break;
        case TRACE_SEND:
        case TRACE_RECV:
            s.object = trace_intern_cstr(t, "comm");
            s.rank = (uint32_t)g->rank[x->q];
            s.peer = (uint32_t)x->peer;
            s.count = (uint64_t)x->obj;
            acc[0] = (trace_access){ .buffer = (uint32_t)x->acc[0].buf,
                                     .mode = (uint8_t)x->acc[0].mode, .form = TRACE_REF_RANGE,
                                     .lo = x->acc[0].lo, .hi = x->acc[0].hi };
            s.n_access = 1;
            s.access = acc;
            break;
        case TRACE_SYNC:
            if (x->obj == -1) {
                s.sync_scope = TRACE_SYNC_ALL;
            } else if (x->obj <= -2) {
                snprintf(name, sizeof name, "%d", -2 - x->obj);
                s.sync_scope = TRACE_SYNC_DEVICE;
                s.object = trace_intern_cstr(t, name);
            } else {
                s.sync_scope = TRACE_SYNC_QUEUE;
                s.object = (uint32_t)x->obj;
            }
            break;
        default:
            for (int k = 0; k < x->n_acc; k++)
                acc[k] = (trace_access){ .buffer = (uint32_t)x->acc[k].buf,
                                         .mode = (uint8_t)x->acc[k].mode,
                                         .form = TRACE_REF_RANGE, .lo = x->acc[k].lo,
                                         .hi = x->acc[k].hi };
            s.n_access = (uint32_t)x->n_acc;
            s.access = acc;
            break;
        }
        trace_append(t, &s);
    }
    return t;
}

void prop_each_deletion(const prop_trace *g, prop_deletion_fn *fn, void *ctx)
{
    bool drop[PROP_MAXS];
    int gen_of[PROP_MAXS], arrivals[PROP_MAXB][PROP_MAXQ];
    memset(arrivals, 0, sizeof arrivals);
    for (int i = 0; i < g->n; i++)
        gen_of[i] = g->s[i].kind == TRACE_BARRIER ? ++arrivals[g->s[i].obj][g->s[i].q] : 0;
    for (int i = 0; i < g->n; i++) {
        trace_kind kd = g->s[i].kind;
        if (kd != TRACE_WAIT && kd != TRACE_SYNC && kd != TRACE_AWAIT && kd != TRACE_BARRIER &&
            kd != TRACE_SIGNAL)
            continue;
        /* one statement */
        memset(drop, 0, sizeof drop);
        drop[i] = true;
        fn(g, drop, ctx);
        /* a whole barrier generation (once, at its first participant) */
        int first = g->s[i].obj == PROP_WIDE_B ? g->n_hosts : 0;
        if (kd == TRACE_BARRIER && g->s[i].q == first) {
            for (int j = 0; j < g->n; j++)
                drop[j] = g->s[j].kind == TRACE_BARRIER && g->s[j].obj == g->s[i].obj &&
                          gen_of[j] == gen_of[i];
            fn(g, drop, ctx);
        }
    }
}

void prop_filtered(const prop_trace *g, const bool *drop, prop_trace *out)
{
    *out = *g;
    out->n = 0;
    for (int i = 0; i < g->n; i++)
        if (!drop[i])
            out->s[out->n++] = g->s[i];
}

void prop_dump(const prop_trace *g, const bool *drop)
{
    trace *t = prop_materialise(g, drop);
    trace_reader r;
    trace_reader_memory(&r, t);
    trace_error err;
    trace_text_write(stderr, &r, &err);
    trace_reader_close(&r);
    trace_free(t);
}
