/*
 * ref_gen.c -- random traces that reach each ruling of the contract.
 *
 * Every generator builds a ref_trace as data (the reference never parses
 * them; the checker reads them as text). Most build a program that is
 * correct by construction and then, with some probability, break it in one
 * place (delete a sync, an arrival, a signal; add an extra arrival; change a
 * count or a value), so that clean verdicts and each finding kind occur
 * often. The generators:
 *
 *   random        any statement on any queue: races, hangs, everything mixed.
 *   phases        phases of disjoint work separated by one synchronisation
 *                 pattern each (host syncs + host barrier, events, a latch
 *                 flag signalled by every queue, semaphore counters, one
 *                 barrier of every queue, collectives), then a mutation.
 *   flags         ruling 1: several signallers of a flag, signals behind
 *                 other awaits and semaphore waits (chains, cycles), a flag
 *                 whose only signals follow the await (`h await f` then
 *                 `s signal f` submitted by h), in random file orders.
 *   alloc-loops   ruling 2: more than 16 free/alloc marks on one range (host
 *                 loops, stream-ordered allocator loops, views of the arena),
 *                 an old free behind many unordered marks, frees racing uses.
 *   events        re-recorded events, waits before records, host waits,
 *                 `sync S`, `sync device=D`, `sync all`, several hosts (by=).
 *   generations   ruling 3: barriers (short, too many arrivals, counts that
 *                 disagree) and collectives (kind/size mismatch, extra and
 *                 missing participants) on hosts and streams.
 *   ranks         ruling 4: merged ranks (`rN.` names, a stream of no rank),
 *                 per-rank `sync all` / `sync device=`, send/recv (wrong tags,
 *                 missing recvs), collectives across ranks.
 *   semaphores    rule 6b: counters handed back and forth, resets, values
 *                 never reached, a second unordered setter.
 *
 * Traces stay at most GEN_MAX statements. The seed of trace i of a run is
 * ref_trace_seed(seed, i), so any trace can be made again alone.
 */
#include "ref.h"

#include <stdarg.h>
#include <string.h>

#define GEN_MAX 64

typedef struct gen {
    ref_trace *t;
    uint64_t rs;
    uint16_t host[4], nh;
    uint16_t strm[8], ns;
    uint16_t owner[REF_MAX_QUEUES];     /* stream -> the host that submits it */
    uint16_t buf[12], nb;               /* buffers accesses pick from */
    unsigned labels;
} gen;

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t ref_trace_seed(uint64_t s, uint64_t i)
{
    return mix64(mix64(s) ^ (i * 0xd1b54a32d192ed03ull));
}

static uint64_t rnd(gen *g)
{
    g->rs += 0x9e3779b97f4a7c15ull;
    return mix64(g->rs);
}

static unsigned below(gen *g, unsigned n)
{
    return n ? (unsigned)(rnd(g) % n) : 0;
}

static bool chance(gen *g, unsigned pct)
{
    return below(g, 100) < pct;
}

static uint16_t name(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint16_t name(gen *g, const char *fmt, ...)
{
    char buf[REF_NAME_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ref_name(g->t, buf);
}

static uint16_t add_host(gen *g, const char *nm)
{
    uint16_t q = ref_add_host(g->t, nm);
    g->owner[q] = REF_NONE;
    g->host[g->nh++] = q;
    return q;
}

static uint16_t add_stream(gen *g, const char *nm, const char *dev, uint16_t owner)
{
    uint16_t q = ref_add_stream(g->t, nm, dev);
    g->owner[q] = owner;
    g->strm[g->ns++] = q;
    return q;
}

/* Hosts h0.., streams s0.. on devices 0/1, each stream owned by a host. */
static void queues(gen *g, unsigned nh, unsigned ns)
{
    char nm[16], dev[8];
    for (unsigned i = 0; i < nh; i++) {
        snprintf(nm, sizeof nm, "h%u", i);
        add_host(g, nm);
    }
    for (unsigned i = 0; i < ns; i++) {
        snprintf(nm, sizeof nm, "s%u", i);
        snprintf(dev, sizeof dev, "%u", below(g, 2));
        add_stream(g, nm, dev, nh ? g->host[below(g, nh)] : REF_NONE);
    }
}

/* Roots A, B, ... of 64 bytes, and with some chance views: two halves of A
 * and an overlapping middle (an allocator's slots in an arena). */
static void buffers(gen *g, unsigned roots, bool views)
{
    char nm[16];
    for (unsigned i = 0; i < roots; i++) {
        snprintf(nm, sizeof nm, "%c", 'A' + i);
        g->buf[g->nb++] = ref_add_buffer(g->t, nm, 64);
    }
    if (views) {
        uint16_t a = g->buf[0];
        g->buf[g->nb++] = ref_add_view(g->t, "A.lo", a, 0, 32);
        uint16_t hi = ref_add_view(g->t, "A.hi", a, 32, 32);
        g->buf[g->nb++] = hi;
        g->buf[g->nb++] = ref_add_view(g->t, "A.mid", a, 16, 32);
        g->buf[g->nb++] = ref_add_view(g->t, "A.hi.q", hi, 8, 8);   /* a view of a view */
    }
}

static uint16_t nqueues(const gen *g)
{
    return (uint16_t)(g->nh + g->ns);
}

static uint16_t any_queue(gen *g)
{
    unsigned i = below(g, nqueues(g));
    return i < g->nh ? g->host[i] : g->strm[i - g->nh];
}

static ref_stmt *emit(gen *g, uint16_t q, ref_kind k)
{
    static ref_stmt scratch;    /* what a full trace's statements go to */
    ref_stmt s = ref_stmt_new(q, k);
    if (g->t->n >= GEN_MAX) {
        scratch = s;
        return &scratch;
    }
    if (!g->t->q[q].host)
        s.by = g->owner[q];
    return ref_push(g->t, &s);
}

static ref_stmt *emit_obj(gen *g, uint16_t q, ref_kind k, uint16_t obj)
{
    ref_stmt *s = emit(g, q, k);
    s->obj = obj;
    return s;
}

static ref_access access_of(gen *g, uint16_t buf, uint8_t mode)
{
    uint32_t size = g->t->b[buf].size;
    ref_access a = { buf, mode, 0, size };
    unsigned shape = below(g, 10);
    if (shape < 4) {
        unsigned q = size >= 16 ? size / 4 : size;
        unsigned k = below(g, size / q);
        a.lo = k * q;
        a.hi = a.lo + q;
    } else if (shape < 7) {
        a.lo = below(g, size);
        a.hi = a.lo + 1 + below(g, size - a.lo);
    }
    return a;
}

static uint8_t any_mode(gen *g)
{
    unsigned m = below(g, 10);
    return m < 4 ? REF_R : m < 8 ? REF_W : REF_RW;
}

static ref_stmt *op_acc(gen *g, uint16_t q, unsigned n, const ref_access *acc)
{
    ref_stmt *s = emit(g, q, REF_OP);
    s->label = name(g, "k%u", g->labels++);
    for (unsigned i = 0; i < n && s->n_acc < REF_MAX_ACC; i++)
        s->acc[s->n_acc++] = acc[i];
    return s;
}

static ref_stmt *op1(gen *g, uint16_t q, uint16_t buf, uint8_t mode, uint32_t lo, uint32_t hi)
{
    ref_access a = { buf, mode, lo, hi };
    return op_acc(g, q, 1, &a);
}

static ref_stmt *op_rand(gen *g, uint16_t q)
{
    ref_access acc[2];
    unsigned n = 1 + (chance(g, 25) ? 1 : 0);
    for (unsigned i = 0; i < n; i++)
        acc[i] = access_of(g, g->buf[below(g, g->nb)], any_mode(g));
    return op_acc(g, q, n, acc);
}

/* Slice i of n of buffer buf (64 bytes). */
static ref_stmt *op_slice(gen *g, uint16_t q, uint16_t buf, unsigned i, unsigned n, uint8_t mode)
{
    uint32_t w = g->t->b[buf].size / n;
    return op1(g, q, buf, mode, i * w, (i + 1) * w);
}

static bool is_sync_kind(uint8_t k)
{
    return k == REF_WAIT || k == REF_SYNC || k == REF_BARRIER || k == REF_AWAIT ||
           k == REF_SIGNAL || k == REF_RECORD || k == REF_COLLECTIVE || k == REF_RECV ||
           k == REF_SEND;
}

/* Deletes one random synchronisation statement (of kinds in mask, 0: any
 * sync kind). Returns whether one was deleted. */
static bool drop_sync(gen *g, uint32_t mask)
{
    uint16_t cand[REF_MAX_STMTS], n = 0;
    for (uint16_t i = 0; i < g->t->n; i++) {
        uint8_t k = g->t->s[i].kind;
        if (mask ? (mask >> k & 1) : is_sync_kind(k))
            cand[n++] = i;
    }
    if (!n)
        return false;
    ref_delete(g->t, cand[below(g, n)]);
    return true;
}

/* Moves statement i to position j (the others keep their order). */
static void move_stmt(ref_trace *t, uint16_t i, uint16_t j)
{
    ref_stmt s = t->s[i];
    ref_delete(t, i);
    memmove(&t->s[j + 1], &t->s[j], (size_t)(t->n - j) * sizeof t->s[0]);
    t->s[j] = s;
    t->n++;
}

/* ------------------------------------------------------------------ */
/* random                                                              */

static void gen_random(gen *g)
{
    queues(g, 1 + below(g, 3), below(g, 4));
    buffers(g, 1 + below(g, 3), chance(g, 40));
    uint16_t sem = name(g, "m0");
    ref_add_sem(g->t, sem);
    unsigned len = 6 + below(g, 30);
    for (unsigned i = 0; i < len; i++) {
        uint16_t q = any_queue(g);
        bool host = g->t->q[q].host;
        unsigned a = below(g, 100);
        if (a < 34) {
            op_rand(g, q);
        } else if (a < 42) {
            if (!host || g->ns)
                emit_obj(g, host ? g->strm[below(g, g->ns)] : q, REF_RECORD,
                         name(g, "e%u", below(g, 2)));
        } else if (a < 50) {
            emit_obj(g, q, REF_WAIT, name(g, "e%u", below(g, 2)));
        } else if (a < 57 && g->nh) {
            uint16_t h = g->host[below(g, g->nh)];
            ref_stmt *s = emit(g, h, REF_SYNC);
            unsigned sc = below(g, 3);
            if (sc == 0 && g->ns) {
                s->scope = REF_SYNC_QUEUE;
                s->obj = g->strm[below(g, g->ns)];
            } else if (sc == 1) {
                s->scope = REF_SYNC_DEVICE;
                s->obj = name(g, "%u", below(g, 2));
            } else {
                s->scope = REF_SYNC_ALL;
            }
        } else if (a < 62) {
            emit_obj(g, q, REF_BARRIER, name(g, "b0"))->count = 1 + below(g, nqueues(g));
        } else if (a < 69) {
            emit_obj(g, q, REF_SIGNAL, name(g, "f%u", below(g, 2)));
        } else if (a < 76) {
            emit_obj(g, q, REF_AWAIT, name(g, "f%u", below(g, 2)));
        } else if (a < 79) {
            emit_obj(g, q, REF_SIGNAL, sem)->count = below(g, 4);
        } else if (a < 82) {
            emit_obj(g, q, REF_AWAIT, sem)->count = 1 + below(g, 3);
        } else if (a < 87) {
            ref_stmt *s = emit_obj(g, q, REF_COLLECTIVE, name(g, "c0"));
            s->coll_kind = name(g, chance(g, 80) ? "allreduce" : "allgather");
            s->count = 1 + below(g, 3);
            s->acc[s->n_acc++] = access_of(g, g->buf[below(g, g->nb)], REF_RW);
        } else if (a < 94) {
            emit_obj(g, q, chance(g, 50) ? REF_ALLOC : REF_FREE, g->buf[below(g, g->nb)]);
            ref_stmt *s = &g->t->s[g->t->n - 1];
            s->obj = g->t->b[s->obj].root;
        } else {
            ref_stmt *s = emit_obj(g, q, chance(g, 50) ? REF_SEND : REF_RECV, name(g, "p"));
            s->from = below(g, 2);
            s->to = 1 - s->from;
            s->count = below(g, 2);
            s->acc[s->n_acc++] = access_of(g, g->buf[below(g, g->nb)],
                                           s->kind == REF_SEND ? REF_R : REF_W);
        }
    }
}

/* ------------------------------------------------------------------ */
/* phases                                                              */

/* Each queue's slice of A; work writes its own slice and reads others'
 * slices of the previous phase. */
static void phase_work(gen *g, unsigned p)
{
    uint16_t qs = nqueues(g);
    for (uint16_t i = 0; i < qs; i++) {
        uint16_t q = i < g->nh ? g->host[i] : g->strm[i - g->nh];
        if (chance(g, 25))
            continue;
        if (p > 0 && chance(g, 50)) {
            ref_access acc[2] = {
                { g->buf[0], REF_R, 0, g->t->b[g->buf[0]].size },
                { g->buf[0], REF_W, 0, 0 },
            };
            uint32_t w = g->t->b[g->buf[0]].size / qs;
            acc[1].lo = i * w;
            acc[1].hi = (i + 1) * w;
            acc[0].lo = ((i + 1) % qs) * w;
            acc[0].hi = acc[0].lo + w;
            op_acc(g, q, 2, acc);
        } else {
            op_slice(g, q, g->buf[0], i, qs, chance(g, 80) ? REF_W : REF_RW);
        }
        if (chance(g, 4))
            op_rand(g, q);      /* an access outside the discipline: may race */
    }
}

static void sync_streams_from_hosts(gen *g, unsigned p)
{
    for (uint16_t i = 0; i < g->ns; i++) {
        uint16_t s = g->strm[i], h = g->owner[s];
        unsigned how = below(g, 4);
        if (how == 0) {
            emit(g, h, REF_SYNC)->scope = REF_SYNC_ALL;
        } else if (how == 1) {
            ref_stmt *st = emit(g, h, REF_SYNC);
            st->scope = REF_SYNC_DEVICE;
            st->obj = g->t->q[s].device;
        } else if (how == 2) {
            ref_stmt *st = emit(g, h, REF_SYNC);
            st->scope = REF_SYNC_QUEUE;
            st->obj = s;
        } else {
            uint16_t e = name(g, "e%u", p % 2);   /* re-recorded every other phase */
            emit_obj(g, s, REF_RECORD, e);
            emit_obj(g, h, REF_WAIT, e);
        }
    }
}

static void host_barrier(gen *g, unsigned p)
{
    if (g->nh < 2)
        return;
    uint16_t b = name(g, "hb%u", p % 2);
    for (uint16_t i = 0; i < g->nh; i++)
        emit_obj(g, g->host[i], REF_BARRIER, b)->count = g->nh;
}

static void phase_boundary(gen *g, unsigned p)
{
    uint16_t qs = nqueues(g);
    unsigned m = below(g, 6);
    if (m == 1 && !g->ns)
        m = 0;
    if (m == 3 && qs > 4)
        m = 2;
    switch (m) {
    case 0:     /* hosts sync their streams, then meet */
        sync_streams_from_hosts(g, p);
        host_barrier(g, p);
        break;
    case 1: {   /* events: every stream records, every host waits, hosts meet */
        for (uint16_t i = 0; i < g->ns; i++)
            emit_obj(g, g->strm[i], REF_RECORD, name(g, "ev%u", i));
        for (uint16_t h = 0; h < g->nh; h++)
            for (uint16_t i = 0; i < g->ns; i++)
                emit_obj(g, g->host[h], REF_WAIT, name(g, "ev%u", i));
        for (uint16_t i = 0; i < g->ns && !g->nh; i++)
            for (uint16_t j = 0; j < g->ns; j++)
                if (i != j)
                    emit_obj(g, g->strm[i], REF_WAIT, name(g, "ev%u", j));
        host_barrier(g, p);
        break;
    }
    case 2: {   /* a latch: every queue signals the phase's flag, then awaits it */
        uint16_t f = name(g, "f%u", p);
        uint16_t order[REF_MAX_QUEUES];
        for (uint16_t i = 0; i < qs; i++)
            order[i] = i < g->nh ? g->host[i] : g->strm[i - g->nh];
        for (uint16_t i = qs; i > 1; i--) {
            uint16_t j = (uint16_t)below(g, i), x = order[i - 1];
            order[i - 1] = order[j];
            order[j] = x;
        }
        bool streams_first = chance(g, 85);
        for (int pass = 0; pass < 2; pass++)
            for (uint16_t i = 0; i < qs; i++)
                if (g->t->q[order[i]].host == (streams_first ? pass == 1 : pass == 0))
                    emit_obj(g, order[i], REF_SIGNAL, f);
        for (int pass = 0; pass < 2; pass++)
            for (uint16_t i = 0; i < qs; i++)
                if (g->t->q[order[i]].host == (streams_first ? pass == 1 : pass == 0))
                    emit_obj(g, order[i], REF_AWAIT, f);
        break;
    }
    case 3: {   /* semaphore counters: each queue counts its phases, the others wait */
        for (uint16_t i = 0; i < qs; i++) {
            uint16_t q = i < g->nh ? g->host[i] : g->strm[i - g->nh];
            uint16_t sm = name(g, "m%u", i);
            ref_add_sem(g->t, sm);
            emit_obj(g, q, REF_SIGNAL, sm)->count = p + 1;
        }
        for (uint16_t i = 0; i < qs; i++)
            for (uint16_t j = 0; j < qs; j++)
                if (i != j) {
                    uint16_t q = i < g->nh ? g->host[i] : g->strm[i - g->nh];
                    emit_obj(g, q, REF_AWAIT, name(g, "m%u", j))->count = p + 1;
                }
        break;
    }
    case 4: {   /* one barrier of every queue; a stream arrives before its host */
        uint16_t b = name(g, "all%u", p % 2);
        for (uint16_t i = 0; i < g->ns; i++)
            emit_obj(g, g->strm[i], REF_BARRIER, b)->count = qs;
        for (uint16_t i = 0; i < g->nh; i++)
            emit_obj(g, g->host[i], REF_BARRIER, b)->count = qs;
        break;
    }
    default: {  /* the streams meet in a collective, the hosts sync and meet */
        if (g->ns > 1) {
            uint16_t c = name(g, "c0");
            for (uint16_t i = 0; i < g->ns; i++) {
                ref_stmt *s = emit_obj(g, g->strm[i], REF_COLLECTIVE, c);
                s->coll_kind = name(g, "allreduce");
                s->count = g->ns;
                uint32_t w = 64 / qs, k = g->nh + i;
                s->acc[s->n_acc++] = (ref_access){ g->buf[0], REF_RW, k * w, (k + 1) * w };
            }
        }
        sync_streams_from_hosts(g, p);
        host_barrier(g, p);
        break;
    }
    }
}

/* One change that may break a correct trace. */
static void mutate(gen *g)
{
    ref_trace *t = g->t;
    unsigned m = below(g, 10);
    if (m < 5) {
        drop_sync(g, 0);
    } else if (m < 6 && t->n) {
        /* an extra arrival at some barrier generation (ruling 3) */
        for (uint16_t i = 0; i < t->n; i++)
            if (t->s[i].kind == REF_BARRIER) {
                ref_stmt s = t->s[i];
                uint16_t q = any_queue(g);
                s.queue = q;
                s.by = t->q[q].host ? REF_NONE : g->owner[q];
                if (t->n < GEN_MAX) {
                    ref_push(t, &s);
                    move_stmt(t, (uint16_t)(t->n - 1), (uint16_t)(i + 1 + below(g, t->n - 1 - i)));
                }
                break;
            }
    } else if (m < 7) {
        /* a count or a value off by one */
        for (uint16_t tries = 0; tries < 8 && t->n; tries++) {
            ref_stmt *s = &t->s[below(g, t->n)];
            if (s->kind == REF_BARRIER || s->kind == REF_COLLECTIVE ||
                (s->kind == REF_AWAIT && ref_is_sem(t, s->obj))) {
                s->count += chance(g, 70) ? 1 : (s->count > 1 ? -1u : 1);
                break;
            }
        }
    } else if (m < 8 && t->n > 2) {
        /* a statement moved elsewhere in the file (another submission order) */
        uint16_t i = (uint16_t)below(g, t->n);
        move_stmt(t, i, (uint16_t)below(g, t->n));
    } else if (m < 9) {
        op_rand(g, any_queue(g));
    } else {
        drop_sync(g, 1u << REF_SIGNAL | 1u << REF_RECORD);
    }
}

static void gen_phases(gen *g)
{
    unsigned nh = 1 + below(g, 3), ns = below(g, 4);
    queues(g, nh, ns);
    buffers(g, 1, false);
    unsigned phases = 2 + below(g, 2);
    for (unsigned p = 0; p < phases; p++) {
        phase_work(g, p);
        if (p + 1 < phases || chance(g, 50))
            phase_boundary(g, p);
    }
    if (chance(g, 40))
        mutate(g);
    if (chance(g, 10))
        mutate(g);
}

/* ------------------------------------------------------------------ */
/* flags                                                               */

/* Per-queue programs, merged into one file in a random order. */
typedef struct prog {
    ref_stmt s[REF_MAX_QUEUES][24];
    unsigned n[REF_MAX_QUEUES];
} prog;

static ref_stmt *prog_add(gen *g, prog *p, uint16_t q, ref_kind k, uint16_t obj)
{
    static ref_stmt scratch;    /* what a full program's statements go to */
    ref_stmt *s = p->n[q] >= 24 ? &scratch : &p->s[q][p->n[q]++];
    *s = ref_stmt_new(q, k);
    s->obj = obj;
    if (!g->t->q[q].host)
        s->by = g->owner[q];
    return s;
}

static void prog_op(gen *g, prog *p, uint16_t q, uint16_t buf, uint8_t mode, uint32_t lo,
                    uint32_t hi)
{
    ref_stmt *s = prog_add(g, p, q, REF_OP, REF_NONE);
    s->label = name(g, "k%u", g->labels++);
    s->acc[s->n_acc++] = (ref_access){ buf, mode, lo, hi };
}

static void prog_merge(gen *g, prog *p)
{
    unsigned at[REF_MAX_QUEUES] = { 0 };
    for (;;) {
        uint16_t live[REF_MAX_QUEUES], n = 0;
        for (uint16_t q = 0; q < g->t->n_queues; q++)
            if (at[q] < p->n[q])
                live[n++] = q;
        if (!n || g->t->n >= GEN_MAX)
            return;
        uint16_t q = live[below(g, n)];
        ref_push(g->t, &p->s[q][at[q]++]);
    }
}

static void gen_flags(gen *g)
{
    static prog p;
    memset(p.n, 0, sizeof p.n);
    unsigned nh = 2 + below(g, 3), ns = below(g, 3);
    queues(g, nh, ns);
    buffers(g, 1, false);
    uint16_t a = g->buf[0];
    uint16_t qs = nqueues(g);
    unsigned nflags = 1 + below(g, 3);
    uint16_t sem = name(g, "m0");
    bool sems = chance(g, 25);
    if (sems)
        ref_add_sem(g->t, sem);
    uint16_t setter = any_queue(g);
    uint32_t setv = 0;
    /* Templates from the issue and the ruling, with some chance each. */
    if (chance(g, 20) && g->ns) {
        /* h await f, then s (submitted by h) signals f: a deadlock */
        uint16_t s = g->strm[below(g, g->ns)], h = g->owner[s];
        prog_op(g, &p, h, a, REF_W, 0, 16);
        prog_add(g, &p, h, REF_AWAIT, name(g, "f0"));
        prog_add(g, &p, s, REF_SIGNAL, name(g, "f0"));
    }
    if (chance(g, 25)) {
        /* a signal of f ordered after the await through another flag g */
        uint16_t q1 = g->host[0], q0 = g->host[1], q2 = any_queue(g);
        if (q2 == q0 || q2 == q1)
            q2 = g->nh > 2 ? g->host[2] : (g->ns ? g->strm[0] : q2);
        if (q2 != q0 && q2 != q1) {
            prog_op(g, &p, q1, a, REF_W, 0, 32);
            prog_add(g, &p, q1, REF_SIGNAL, name(g, "f1"));
            prog_add(g, &p, q0, REF_AWAIT, name(g, "f1"));
            prog_op(g, &p, q0, a, REF_R, 0, 32);
            prog_add(g, &p, q0, REF_SIGNAL, name(g, "f2"));
            prog_add(g, &p, q2, REF_AWAIT, name(g, "f2"));
            prog_add(g, &p, q2, REF_SIGNAL, name(g, "f1"));
            prog_op(g, &p, q2, a, chance(g, 70) ? REF_R : REF_W, 0, 32);
        }
    }
    if (chance(g, 15)) {
        /* the same through a semaphore wait */
        uint16_t q1 = g->host[0], q0 = g->host[1];
        uint16_t sm = name(g, "m1");
        ref_add_sem(g->t, sm);
        prog_add(g, &p, q1, REF_SIGNAL, name(g, "f1"));
        prog_add(g, &p, q0, REF_AWAIT, name(g, "f1"));
        prog_add(g, &p, q0, REF_SIGNAL, sm)->count = 1;
        uint16_t q2 = g->nh > 2 ? g->host[2] : (g->ns ? g->strm[0] : q1);
        prog_add(g, &p, q2, REF_AWAIT, sm)->count = 1;
        prog_add(g, &p, q2, REF_SIGNAL, name(g, "f1"));
        prog_op(g, &p, q2, a, REF_W, 32, 64);
    }
    /* Random programs: own-slice writes, reads of others', signals, awaits. */
    for (uint16_t i = 0; i < qs; i++) {
        uint16_t q = i < g->nh ? g->host[i] : g->strm[i - g->nh];
        unsigned len = 2 + below(g, 5);
        uint32_t w = 64 / qs;
        for (unsigned k = 0; k < len; k++) {
            unsigned c = below(g, 100);
            if (c < 30) {
                prog_op(g, &p, q, a, REF_W, i * w, (i + 1) * w);
            } else if (c < 45) {
                uint16_t j = (uint16_t)below(g, qs);
                prog_op(g, &p, q, a, REF_R, j * w, (j + 1) * w);
            } else if (c < 70) {
                prog_add(g, &p, q, REF_SIGNAL, name(g, "f%u", below(g, nflags)));
            } else if (c < 92) {
                prog_add(g, &p, q, REF_AWAIT, name(g, "f%u", below(g, nflags)));
            } else if (sems && q == setter) {
                setv += below(g, 2) + (chance(g, 90) ? 1 : 0);
                prog_add(g, &p, q, REF_SIGNAL, sem)->count = setv;
            } else if (sems) {
                prog_add(g, &p, q, REF_AWAIT, sem)->count = 1 + below(g, 2);
            }
        }
    }
    prog_merge(g, &p);
    if (chance(g, 20))
        mutate(g);
}

/* ------------------------------------------------------------------ */
/* alloc-loops                                                         */

static void free_alloc(gen *g, uint16_t q, uint16_t root, bool alloc_first)
{
    emit_obj(g, q, alloc_first ? REF_ALLOC : REF_FREE, root);
    emit_obj(g, q, alloc_first ? REF_FREE : REF_ALLOC, root);
}

static void gen_alloc(gen *g)
{
    unsigned nh = 1 + below(g, 2), ns = 1 + below(g, 2);
    queues(g, nh, ns);
    buffers(g, 1, true);
    uint16_t x = g->buf[0], h = g->host[0], s = g->strm[0];
    unsigned pairs = 5 + below(g, 18);
    unsigned pattern = below(g, 5);
    uint16_t view = g->buf[1 + below(g, g->nb - 1)];
    if (pattern == 0) {
        /* host loop: free, alloc, use a view, `pairs` times; then a use */
        op1(g, h, x, REF_W, 0, 64);
        for (unsigned i = 0; i < pairs; i++) {
            free_alloc(g, h, x, false);
            if (chance(g, 40))
                op1(g, h, view, any_mode(g), 0, g->t->b[view].size);
        }
        if (chance(g, 40))
            emit_obj(g, h, REF_FREE, x);
        op1(g, h, view, REF_R, 0, g->t->b[view].size);
    } else if (pattern == 1) {
        /* a stream-ordered allocator loop: alloc, kernel, free */
        for (unsigned i = 0; i < pairs && g->t->n + 4 < GEN_MAX; i++) {
            emit_obj(g, s, REF_ALLOC, x);
            uint16_t b = chance(g, 50) ? x : view;
            op1(g, s, b, REF_W, 0, chance(g, 50) ? g->t->b[b].size : g->t->b[b].size / 2);
            emit_obj(g, s, REF_FREE, x);
        }
        ref_stmt *st = emit(g, h, REF_SYNC);
        st->scope = REF_SYNC_QUEUE;
        st->obj = s;
        if (chance(g, 50))
            emit_obj(g, h, REF_ALLOC, x);
        op1(g, h, view, REF_R, 0, g->t->b[view].size);
    } else if (pattern == 2) {
        /* an old free: one queue frees, another makes many marks, then the
         * first queue uses the buffer */
        uint16_t other = g->ns > 1 ? g->strm[1] : h;
        emit_obj(g, s, REF_FREE, x);
        bool ordered = chance(g, 50);
        if (ordered) {
            emit_obj(g, s, REF_RECORD, name(g, "e0"));
            emit_obj(g, other, REF_WAIT, name(g, "e0"));
        }
        for (unsigned i = 0; i < pairs; i++)
            free_alloc(g, other, x, true);
        if (chance(g, 50) && ordered) {
            if (g->t->q[other].host) {
                ref_stmt *st = emit(g, other, REF_SYNC);
                st->scope = REF_SYNC_QUEUE;
                st->obj = s;
            } else {
                emit_obj(g, other, REF_RECORD, name(g, "e1"));
                emit_obj(g, s, REF_WAIT, name(g, "e1"));
            }
        }
        op1(g, s, view, REF_R, 0, g->t->b[view].size);
    } else if (pattern == 3) {
        /* the host allocates, the stream uses, the host syncs and frees */
        for (unsigned i = 0; i < pairs / 2 + 1 && g->t->n + 5 < GEN_MAX; i++) {
            emit_obj(g, h, REF_ALLOC, x);
            op1(g, s, view, any_mode(g), 0, g->t->b[view].size);
            if (chance(g, 85)) {
                ref_stmt *st = emit(g, h, REF_SYNC);
                st->scope = chance(g, 50) ? REF_SYNC_ALL : REF_SYNC_QUEUE;
                st->obj = st->scope == REF_SYNC_QUEUE ? s : REF_NONE;
            }
            emit_obj(g, h, REF_FREE, x);
        }
        if (chance(g, 40))
            op1(g, h, x, REF_R, 0, 64);
    } else {
        /* frees and allocs on two queues ordered through events, uses between */
        uint16_t other = g->ns > 1 ? g->strm[1] : h;
        for (unsigned i = 0; i < pairs && g->t->n + 6 < GEN_MAX; i++) {
            uint16_t q = chance(g, 50) ? s : other, r = q == s ? other : s;
            emit_obj(g, q, chance(g, 50) ? REF_FREE : REF_ALLOC, x);
            if (!g->t->q[q].host && chance(g, 80)) {
                uint16_t e = name(g, "e%u", i % 3);
                emit_obj(g, q, REF_RECORD, e);
                emit_obj(g, r, REF_WAIT, e);
            } else if (g->t->q[q].host == false && g->t->q[r].host && chance(g, 80)) {
                ref_stmt *st = emit(g, r, REF_SYNC);
                st->scope = REF_SYNC_QUEUE;
                st->obj = q;
            }
            if (chance(g, 40))
                op1(g, r, view, any_mode(g), 0, g->t->b[view].size);
        }
    }
    if (chance(g, 35))
        mutate(g);
}

/* ------------------------------------------------------------------ */
/* events                                                              */

static void gen_events(gen *g)
{
    unsigned nh = 1 + below(g, 2), ns = 2 + below(g, 3);
    queues(g, nh, ns);
    /* Each step hands a fresh 8-byte slot from a stream to a consumer; a few
     * steps reuse a slot (chance), which needs the earlier reader ordered. */
    uint16_t a = ref_add_buffer(g->t, "A", 64);
    unsigned steps = 3 + below(g, 6);
    for (unsigned i = 0; i < steps; i++) {
        uint16_t prod = g->strm[below(g, g->ns)], cons = any_queue(g);
        uint32_t slot = chance(g, 85) ? i % 8 : below(g, 8);
        uint16_t e = name(g, "e%u", below(g, 3));
        unsigned c = below(g, 10);
        if (c < 1)
            emit_obj(g, cons, REF_WAIT, e);     /* a wait before its record, maybe */
        op1(g, prod, a, REF_W, slot * 8, slot * 8 + 8);
        if (cons == prod) {
            /* queue order is enough */
        } else if (c < 6) {
            if (chance(g, 10))
                op1(g, prod, a, REF_W, slot * 8, slot * 8 + 8);   /* after no record */
            emit_obj(g, prod, REF_RECORD, e);
            if (chance(g, 10))
                op1(g, prod, a, REF_W, slot * 8, slot * 8 + 8);   /* after the record */
            if (chance(g, 10))
                emit_obj(g, prod, REF_RECORD, e);                  /* a re-record */
            if (chance(g, 92))
                emit_obj(g, cons, REF_WAIT, e);
        } else {
            uint16_t h = g->t->q[cons].host ? cons : g->owner[cons];
            ref_stmt *st = emit(g, h, REF_SYNC);
            unsigned sc = below(g, 3);
            st->scope = sc == 0 ? REF_SYNC_QUEUE : sc == 1 ? REF_SYNC_DEVICE : REF_SYNC_ALL;
            st->obj = sc == 0   ? (chance(g, 92) ? prod : g->strm[below(g, g->ns)])
                      : sc == 1 ? (chance(g, 92) ? g->t->q[prod].device : name(g, "%u", below(g, 2)))
                                : REF_NONE;
        }
        op1(g, cons, a, chance(g, 80) ? REF_R : REF_RW, slot * 8, slot * 8 + 8);
    }
    if (chance(g, 25))
        mutate(g);
}

/* ------------------------------------------------------------------ */
/* generations                                                         */

static void gen_generations(gen *g)
{
    unsigned nh = 2 + below(g, 3), ns = below(g, 3);
    queues(g, nh, ns);
    /* Round r works in bytes [64r, 64r + 64) of A: a later round never
     * rewrites what an earlier one read, so only the rounds' own
     * synchronisation decides the verdict. */
    uint16_t a = ref_add_buffer(g->t, "A", 256);
    g->buf[g->nb++] = a;
    uint16_t qs = nqueues(g);
    unsigned rounds = 2 + below(g, 3);
    for (unsigned r = 0; r < rounds; r++) {
        /* participants: every queue, or a subset */
        uint16_t part[REF_MAX_QUEUES], np = 0;
        for (uint16_t i = 0; i < qs; i++)
            if (chance(g, 80))
                part[np++] = i < g->nh ? g->host[i] : g->strm[i - g->nh];
        if (np < 2)
            continue;
        uint32_t w = 64 / qs, base = 64 * r;
        for (uint16_t i = 0; i < np; i++)
            op1(g, part[i], a, REF_W, base + (uint32_t)i * w, base + (uint32_t)(i + 1) * w);
        bool coll = chance(g, 40);
        unsigned twist = below(g, 10);
        uint16_t obj = coll ? name(g, "c%u", below(g, 2)) : name(g, "b%u", below(g, 2));
        /* streams arrive before their hosts, mostly (else the host blocks first) */
        uint16_t order[REF_MAX_QUEUES], no = 0;
        for (int pass = 0; pass < 2; pass++)
            for (uint16_t i = 0; i < np; i++)
                if (g->t->q[part[i]].host == (pass == 1))
                    order[no++] = part[i];
        if (chance(g, 15) && no > 1) {
            uint16_t j = (uint16_t)below(g, no), x = order[0];
            order[0] = order[j];
            order[j] = x;
        }
        for (uint16_t i = 0; i < no; i++) {
            if (twist == 0 && i == no - 1)
                break;                          /* a participant skips it: short */
            ref_stmt *s = emit_obj(g, order[i], coll ? REF_COLLECTIVE : REF_BARRIER, obj);
            s->count = np;
            if (twist == 1 && i == 0)
                s->count = np + (chance(g, 50) ? 1 : -1);   /* counts disagree */
            if (coll) {
                s->coll_kind = name(g, twist == 2 && i == 1 ? "allgather" : "allreduce");
                uint16_t k = 0;
                while (part[k] != order[i])
                    k++;
                s->acc[s->n_acc++] = (ref_access){ a, REF_RW, base + (uint32_t)k * w,
                                                   base + (uint32_t)(k + 1) * w };
            }
        }
        if (twist == 3) {
            /* one arrival too many (ruling 3): a queue not in the round; when
             * every queue is in, its next arrival starts a short generation */
            uint16_t q = part[below(g, np)];
            for (uint16_t i = 0; i < qs; i++) {
                uint16_t c = i < g->nh ? g->host[i] : g->strm[i - g->nh];
                bool in = false;
                for (uint16_t k = 0; k < np; k++)
                    in |= part[k] == c;
                if (!in)
                    q = c;
            }
            ref_stmt *s = emit_obj(g, q, coll ? REF_COLLECTIVE : REF_BARRIER, obj);
            s->count = np;
            if (coll) {
                s->coll_kind = name(g, "allreduce");
                s->acc[s->n_acc++] = (ref_access){ a, REF_R, base, base + 64 };
            }
        }
        for (uint16_t i = 0; i < np; i++)
            op1(g, part[i], a, REF_R, base + (uint32_t)((i + 1) % np) * w,
                base + (uint32_t)((i + 1) % np + 1) * w);
    }
    if (g->ns && chance(g, 60))
        emit(g, g->host[0], REF_SYNC)->scope = REF_SYNC_ALL;
    if (chance(g, 20))
        mutate(g);
}

/* ------------------------------------------------------------------ */
/* ranks                                                               */

static void gen_ranks(gen *g)
{
    unsigned nr = 2 + below(g, 2);
    char nm[24], dev[24];
    uint16_t rh[3], rs[3][2], rb[3], nrs[3];
    for (unsigned r = 0; r < nr; r++) {
        snprintf(nm, sizeof nm, "r%u.host", r);
        rh[r] = add_host(g, nm);
        nrs[r] = 1 + (uint16_t)below(g, 2);
        for (unsigned k = 0; k < nrs[r]; k++) {
            snprintf(nm, sizeof nm, "r%u.s%u", r, k);
            snprintf(dev, sizeof dev, "r%u.%u", r, below(g, 2));
            rs[r][k] = add_stream(g, nm, dev, rh[r]);
        }
        snprintf(nm, sizeof nm, "r%u.X", r);
        rb[r] = ref_add_buffer(g->t, nm, 64);
        g->buf[g->nb++] = rb[r];
    }
    /* a stream of no rank, which every rank's `sync all` covers */
    uint16_t shared = REF_NONE;
    if (chance(g, 30))
        shared = add_stream(g, "x.s0", "x", rh[below(g, nr)]);
    uint16_t tag_off = chance(g, 10) ? 1 : 0;
    unsigned steps = 3 + below(g, 6);
    for (unsigned i = 0; i < steps; i++) {
        unsigned r = below(g, nr), c = below(g, 10);
        uint16_t s = rs[r][below(g, nrs[r])];
        if (c < 4) {
            /* rank work on a stream, then a sync of some scope, then host use */
            op1(g, s, rb[r], REF_W, 0, 32);
            if (shared != REF_NONE && chance(g, 30))
                op1(g, shared, rb[r], REF_W, 32, 64);
            if (chance(g, 85)) {
                ref_stmt *st = emit(g, rh[r], REF_SYNC);
                unsigned sc = below(g, 3);
                st->scope = sc == 0 ? REF_SYNC_ALL : sc == 1 ? REF_SYNC_DEVICE : REF_SYNC_QUEUE;
                st->obj = sc == 0 ? REF_NONE : sc == 1 ? g->t->q[s].device : s;
            }
            op1(g, rh[r], rb[r], REF_R, 0, 64);
        } else if (c < 7) {
            /* a message from rank r to rank p: the sender's data, then the receiver's use */
            unsigned p = (r + 1 + below(g, nr - 1)) % nr;
            ref_stmt *snd = emit_obj(g, rh[r], REF_SEND, name(g, "ctl"));
            snd->from = r;
            snd->to = p;
            snd->count = 0;
            snd->acc[snd->n_acc++] = (ref_access){ rb[r], REF_R, 0, 8 };
            if (chance(g, 90)) {
                ref_stmt *rcv = emit_obj(g, rh[p], REF_RECV, name(g, "ctl"));
                rcv->from = r;
                rcv->to = p;
                rcv->count = chance(g, 90) ? 0 : tag_off;
                rcv->acc[rcv->n_acc++] = (ref_access){ rb[p], REF_W, 8, 16 };
                op1(g, rs[p][0], rb[p], REF_R, 8, 16);
            }
            if (chance(g, 40))
                op1(g, s, rb[r], REF_W, 0, 8);  /* overwrites what was sent: fine, send read it */
        } else if (c < 9) {
            /* a collective of every rank on its first stream */
            unsigned skip = chance(g, 12) ? below(g, nr) : 99;
            for (unsigned k = 0; k < nr; k++) {
                if (k == skip)
                    continue;
                ref_stmt *st = emit_obj(g, rs[k][0], REF_COLLECTIVE, name(g, "world"));
                st->coll_kind = name(g, chance(g, 95) ? "allreduce" : "allgather");
                st->count = nr;
                st->acc[st->n_acc++] = (ref_access){ rb[k], REF_RW, 16, 32 };
            }
        } else {
            /* ruling 4: rank r's sync all, then its host writes what rank r's stream read */
            op1(g, s, rb[r], REF_R, 32, 48);
            emit(g, rh[r], REF_SYNC)->scope = REF_SYNC_ALL;
            op1(g, rh[r], rb[r], REF_W, 32, 48);
        }
    }
    /* Ranks interleave in the merged file: shuffle rank blocks a little by
     * moving a few statements (each rank's own order is kept). */
    for (unsigned k = 0; k < 3 && g->t->n > 2; k++) {
        uint16_t i = (uint16_t)below(g, g->t->n - 1);
        const ref_trace *t = g->t;
        int ri = t->q[t->s[i].queue].rank, rj = t->q[t->s[i + 1].queue].rank;
        if (ri != rj && ri >= 0 && rj >= 0)
            move_stmt(g->t, i, (uint16_t)(i + 1));
    }
    if (chance(g, 25))
        drop_sync(g, 1u << REF_SYNC | 1u << REF_RECV);
}

/* ------------------------------------------------------------------ */
/* semaphores                                                          */

static void gen_semaphores(gen *g)
{
    queues(g, 1, 2 + below(g, 2));
    buffers(g, 1, false);
    uint16_t a = g->buf[0];
    uint16_t full = name(g, "full"), empty = name(g, "empty");
    ref_add_sem(g->t, full);
    ref_add_sem(g->t, empty);
    uint16_t prod = g->strm[0], cons = g->strm[1];
    unsigned iters = 2 + below(g, 3);
    bool reset = chance(g, 20);
    for (unsigned i = 1; i <= iters; i++) {
        uint32_t v = reset ? 1 : i;
        if (i > 1 && chance(g, 90))
            emit_obj(g, prod, REF_AWAIT, empty)->count = reset ? 1 : i - 1;
        op1(g, prod, a, REF_W, 0, 32);
        if (chance(g, 15))
            op1(g, prod, a, REF_W, 32, 64);
        emit_obj(g, prod, REF_SIGNAL, full)->count = v;
        if (chance(g, 20))
            op1(g, prod, a, REF_W, 32, 64);     /* after the set: not covered */
        uint32_t want = chance(g, 10) ? v + 1 + below(g, 2) : (chance(g, 10) && v > 1 ? v - 1 : v);
        emit_obj(g, cons, REF_AWAIT, full)->count = want;
        op1(g, cons, a, REF_R, 0, chance(g, 70) ? 32 : 64);
        if (reset) {
            emit_obj(g, cons, REF_SIGNAL, full)->count = 0;
            emit_obj(g, cons, REF_SIGNAL, empty)->count = 0;
            emit_obj(g, cons, REF_SIGNAL, empty)->count = 1;
        } else {
            emit_obj(g, cons, REF_SIGNAL, empty)->count = i;
        }
    }
    if (g->ns > 2 && chance(g, 50)) {
        /* a third stream reads after the first value: ABA when reset */
        emit_obj(g, g->strm[2], REF_AWAIT, full)->count = 1;
        op1(g, g->strm[2], a, REF_R, 0, 32);
        if (chance(g, 20))
            emit_obj(g, g->strm[2], REF_SIGNAL, full)->count = 7;   /* an unordered setter */
    }
    if (chance(g, 50))
        emit(g, g->host[0], REF_SYNC)->scope = REF_SYNC_ALL;
    if (chance(g, 25))
        mutate(g);
}

/* ------------------------------------------------------------------ */

typedef struct generator {
    const char *name;
    void (*fn)(gen *g);
    unsigned weight;
} generator;

static const generator generators[] = {
    { "random", gen_random, 14 },
    { "phases", gen_phases, 20 },
    { "flags", gen_flags, 16 },
    { "alloc-loops", gen_alloc, 12 },
    { "events", gen_events, 10 },
    { "generations", gen_generations, 10 },
    { "ranks", gen_ranks, 10 },
    { "semaphores", gen_semaphores, 8 },
};
#define N_GEN (int)(sizeof generators / sizeof generators[0])

int ref_gen_count(void)
{
    return N_GEN;
}

const char *ref_gen_name(int i)
{
    return i >= 0 && i < N_GEN ? generators[i].name : "?";
}

int ref_generate(ref_trace *t, uint64_t seed)
{
    static gen g;
    memset(&g, 0, sizeof g);
    ref_init(t);
    g.t = t;
    g.rs = seed;
    unsigned total = 0;
    for (int i = 0; i < N_GEN; i++)
        total += generators[i].weight;
    unsigned pick = below(&g, total);
    int which = 0;
    while (pick >= generators[which].weight)
        pick -= generators[which++].weight;
    generators[which].fn(&g);
    return which;
}
