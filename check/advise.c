/*
 * advise.c -- the price of every sync: which synchronisations can go, what
 * each buys, and what to put instead of the ones that cannot.
 *
 * The advice answers, for every wait, host sync, await, barrier and
 * blocking copy of a trace, grouped as the minimiser's output reads them,
 * what `minimize`, `replay --drop-sync` and `check` answer one by one:
 *
 *  1. Groups. A statement's group is its place in its host's iteration
 *     pattern (traces/pattern.c: the letter at position k of iterations
 *     that read alike, e.g. the second `s` of `wscscscgr|...`) and its call
 *     site (site=, when captured); without token=/iter= its kind, queue,
 *     target and split=. A barrier's generations (all participants) are one
 *     group per barrier. When there are more groups than asked for, targets
 *     lose their digits (per-iteration event names), then only kind and
 *     queue are kept.
 *  2. The baseline: a replay through the caller's pricer (check/ knows
 *     traces only; cli plugs in sim/'s replay), each statement's start, end
 *     and place on the critical path; the trace's own findings (keys); the
 *     minimiser's removals (check_minimize, findings allowed).
 *  3. Per group: how long its statements hold their queue (the trace's own
 *     dur= when it has times, else the replay's), the part of that on the
 *     critical path, how many the minimiser removes; the run replayed
 *     without them all, and without the removable ones when only some are.
 *     A blocking copy (a copy between host and device memory that the host
 *     performs itself, `c`) is "removed" by submitting it to a stream
 *     instead (what llama.cpp #17795 did to ggml's user-input copies); its
 *     safety is one check of the trace so edited.
 *  4. Where removing them all creates findings: the first one, with its
 *     fix, and the cheapest replacement that keeps the order, found by
 *     trying and checking: every `sync all` or `sync device=D` of the group
 *     narrowed to syncs of the streams the findings name, or, for each new
 *     race, an event recorded right after its earlier statement and waited
 *     for right before its later one (on the host: an event synchronize,
 *     which waits for that statement only, not for the whole stream; host
 *     to host: a flag). Each try is checked; findings it still lets in get
 *     their own edge, for a few rounds; the one that checks clean and
 *     replays fastest is the replacement.
 *  5. The groups sorted by what the advice buys: the replayed gain of the
 *     safe removal, or of the replacement.
 *
 * A trace whose coverage is partial (an ordering-only capture) gets no
 * "safe": the minimiser there judges no race (CHECK_SAFE_UNJUDGED).
 *
 * Cost: the minimiser, a check per group that cannot go whole, two to four
 * replays per group, and a check and a replay per replacement round, each
 * O(statements).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Default groups before they are coarsened: each costs a check and a few
 * replays, about 2 s at a million statements. */
#define MAX_GROUPS 128
#define MAX_GROUPS_LARGE 24 /* for traces of more than LARGE statements */
#define LARGE 200000
#define ROUNDS 4            /* replacement rounds: edges added for what a try lets in */

/* check_options.progress of the minimiser's pass: its candidates. */
static void min_progress(void *ctx, uint64_t done, uint64_t total)
{
    trace_progress_say(ctx, "candidates", done, total);
}

/* ------------------------------------------------------------------ */
/* Groups.                                                             */

/* What a statement is to the advice. */
static bool is_sync_kind(trace_kind k)
{
    return k == TRACE_WAIT || k == TRACE_SYNC || k == TRACE_AWAIT || k == TRACE_BARRIER;
}

/* A host's blocking copy between host and device memory, and the stream it
 * would be submitted to instead (ggml's user inputs go to the destination
 * backend's stream): the next stream of the device side's device to access
 * its root (in file order), else the first stream of that device.
 * TRACE_NONE when s is none or no stream of its device exists. next_on[root]
 * gives the stream of that device that next accesses each root, as the
 * caller keeps it. */
static uint32_t copy_stream(const trace *t, const trace_stmt *s, const uint32_t *next_on)
{
    if (s->kind != TRACE_COPY || s->n_access < 2 || s->queue >= t->n_queues ||
        t->queues[s->queue].kind != TRACE_QUEUE_HOST)
        return TRACE_NONE;
    for (uint32_t k = 0; k < 2; k++) {
        const trace_buffer *root = &t->buffers[t->buffers[s->access[k].buffer].root];
        if (root->loc != TRACE_LOC_DEVICE)
            continue;
        uint32_t r = t->buffers[s->access[k].buffer].root;
        if (next_on && next_on[r] != TRACE_NONE)
            return next_on[r];
        for (uint32_t q = 0; q < t->n_queues; q++)
            if (t->queues[q].kind == TRACE_QUEUE_STREAM && t->queues[q].device == root->device)
                return q;
    }
    return TRACE_NONE;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    return h * 0xBF58476D1CE4E5B9ULL;
}

/* FNV-1a of s, digits left out when coarse. */
static uint64_t hash_name(const char *s, bool coarse)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        if (!coarse || *s < '0' || *s > '9')
            h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* What a candidate statement is known by before grouping. */
typedef struct cand_info {
    uint64_t seq;
    size_t iter;            /* its host's iteration (index in the pattern), SIZE_MAX: none */
    uint32_t pos;           /* its letter's position in that iteration's pattern */
    uint32_t gen;           /* barrier: generation (traces/bind.c) */
    uint32_t stream;        /* blocking copy: the stream it would go to */
} cand_info;

typedef struct grouping {
    cand_info *c;
    size_t n, cap;
    trace_pattern *pat;
    uint32_t k_site, k_split;
} grouping;

static uint32_t attr_value(const trace_stmt *s, uint32_t key)
{
    if (key == TRACE_NONE)
        return TRACE_NONE;
    for (uint32_t a = 0; a < s->n_attr; a++)
        if (s->attr[a].key == key)
            return s->attr[a].value;
    return TRACE_NONE;
}

/* The host whose pattern statement s makes a letter in (traces/pattern.c):
 * its own queue, or the host that submitted it. */
static uint32_t host_of(const trace *t, const trace_stmt *s)
{
    if (s->queue < t->n_queues && t->queues[s->queue].kind == TRACE_QUEUE_HOST)
        return s->queue;
    return trace_submitter(t, s);
}

/* Pass 1: the candidates, their iterations and letters. */
static int collect(const trace *t, grouping *g)
{
    trace_binder *bind = trace_binder_new(0);
    uint32_t *next_on = malloc((t->n_buffers ? t->n_buffers : 1) * sizeof *next_on);
    uint32_t *copy_to = NULL;
    int rc = -1;
    if (!bind || !next_on || !(g->pat = trace_pattern_new()))
        goto out;
    g->k_site = trace_str_find(t, "site", 4);
    g->k_split = trace_str_find(t, "split", 5);
    /* the stream of the next access of each root, from the end */
    if (!(copy_to = malloc((t->n_stmts ? t->n_stmts : 1) * sizeof *copy_to)))
        goto out;
    for (uint32_t b = 0; b < t->n_buffers; b++)
        next_on[b] = TRACE_NONE;
    for (uint64_t i = t->n_stmts; i-- > 0;) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        copy_to[i] = copy_stream(t, &s, next_on);
        if (s.queue < t->n_queues && t->queues[s.queue].kind == TRACE_QUEUE_STREAM)
            for (uint32_t k = 0; k < s.n_access; k++) {
                uint32_t r = t->buffers[s.access[k].buffer].root;
                if (t->buffers[r].loc == TRACE_LOC_DEVICE &&
                    t->buffers[r].device == t->queues[s.queue].device)
                    next_on[r] = s.queue;
            }
    }
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        s.seq = i;
        trace_bind bd;
        if (trace_binder_feed(bind, &s, &bd) != 0 || trace_pattern_feed(g->pat, t, &s, true) != 0)
            goto out;
        bool copy = copy_to[i] != TRACE_NONE;
        if (!is_sync_kind(s.kind) && !copy)
            continue;
        cand_info c = { .seq = i, .iter = SIZE_MAX, .stream = copy ? copy_to[i] : TRACE_NONE };
        if (s.kind == TRACE_BARRIER) {
            if (bd.gen_role == TRACE_GEN_EXTRA)
                continue;       /* an extra arrival synchronises nothing */
            c.gen = (uint32_t)bd.gen;
        }
        uint32_t host = host_of(t, &s);
        if (host != TRACE_NONE) {
            for (size_t k = trace_pattern_count(g->pat); k-- > 0;) {
                trace_pattern_iter it = trace_pattern_at(g->pat, k);
                if (it.host == host) {
                    size_t len = strlen(it.before);
                    c.iter = k;
                    c.pos = len ? (uint32_t)(len - 1) : 0;
                    break;
                }
            }
        }
        if (trace_grow((void **)&g->c, &g->cap, g->n + 1, sizeof *g->c) != 0)
            goto out;
        g->c[g->n++] = c;
    }
    rc = 0;
out:
    trace_binder_free(bind);
    free(next_on);
    free(copy_to);
    return rc;
}

/* A candidate's group key at coarseness level 0 (exact), 1 (targets
 * without digits), 2 (kind and queue). */
static uint64_t key_of(const trace *t, const grouping *g, const cand_info *c, int level)
{
    trace_stmt s;
    trace_stmt_at(t, c->seq, &s);
    bool copy = c->stream != TRACE_NONE;
    uint64_t h = mix(1, copy ? 1000 : (uint64_t)s.kind);
    if (s.kind == TRACE_BARRIER)
        return mix(h, hash_name(trace_str(t, s.object), level > 0));
    h = mix(h, s.queue);
    uint32_t site = attr_value(&s, g->k_site);
    if (site != TRACE_NONE)
        h = mix(h, hash_name(trace_str(t, site), false));
    if (level >= 2)
        return h;
    if (c->iter != SIZE_MAX && level == 0) {
        trace_pattern_iter it = trace_pattern_at(g->pat, c->iter);
        return mix(mix(mix(h, hash_name(it.before, false)), c->pos), it.host);
    }
    /* no iteration: the target and split= */
    const char *target = copy ? trace_str(t, s.label)
                         : s.kind == TRACE_SYNC
                             ? (s.sync_scope == TRACE_SYNC_ALL      ? "all"
                                : s.sync_scope == TRACE_SYNC_DEVICE ? trace_str(t, s.object)
                                                                    : check_queue_name(t, s.object))
                             : trace_str(t, s.object);
    h = mix(h, (uint64_t)s.sync_scope);
    h = mix(h, hash_name(target, level > 0));
    uint32_t split = attr_value(&s, g->k_split);
    if (split != TRACE_NONE)
        h = mix(h, hash_name(trace_str(t, split), false));
    return h;
}

/* ------------------------------------------------------------------ */
/* Checks: findings a trace has that the original lacks.                */

typedef struct keyset {
    trace_u64map k;         /* key hash -> 1 */
} keyset;

static uint64_t key_hash(check_fkey k)
{
    return mix(mix(mix(7, k.a), k.b), k.c);
}

/* The findings of t without the statements remove marks (NULL: none), as
 * the minimiser checks (flag totals known). Returns the report (texts and
 * fixes not made: finding_words) or NULL on OOM. */
static check_report *check_run(const trace *t, const bool *remove)
{
    trace_u64map totals = { 0 };
    check_report *rep = check_report_new(t, 0);
    check_engine *e = rep ? check_engine_new(t, rep, remove) : NULL;
    if (!e || check_flag_totals(t, &totals) != 0)
        goto fail;
    check_engine_set_flag_totals(e, &totals);
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (check_engine_feed(e, &s) != 0)
            goto fail;
    }
    if (check_engine_finish(e, false) != 0)
        goto fail;
    check_engine_free(e);
    trace_u64map_free(&totals);
    return rep;
fail:
    check_engine_free(e);
    check_report_free(rep);
    trace_u64map_free(&totals);
    return NULL;
}

/* The text and fix of finding i of rep, made for it alone (a what-if can
 * let in a hundred thousand findings; one is shown). */
static void finding_words(check_report *rep, size_t i, char **text, char **fix)
{
    trace_finding keep = rep->f[0];
    size_t n = rep->n;
    rep->f[0] = rep->f[i];
    rep->n = 1;
    check_report_finish(rep);
    *text = rep->f[0].text ? strdup(rep->f[0].text) : NULL;
    *fix = rep->f[0].fix ? strdup(rep->f[0].fix) : NULL;
    rep->f[i] = rep->f[0];      /* the made strings stay with it, freed with rep */
    if (i)
        rep->f[0] = keep;
    rep->n = n;
}

/* A finding's key with its statements named by the original's seqs. */
static check_fkey orig_key(const trace_finding *f, const uint64_t *seq_of)
{
    trace_finding g = *f;
    if (seq_of) {
        if (g.first.seq != TRACE_NO_SEQ)
            g.first.seq = seq_of[g.first.seq];
        if (g.second.seq != TRACE_NO_SEQ)
            g.second.seq = seq_of[g.second.seq];
    }
    return check_finding_key(&g);
}

/* ------------------------------------------------------------------ */
/* The advice.                                                          */

typedef struct advisor {
    trace *t;
    const check_advise_opts *o;
    const check_pricer *pr;
    keyset base;            /* the trace's own findings */
    check_min_result min;
    int64_t *start, *end;   /* the baseline replay */
    bool *crit;
    uint64_t next_name;     /* for inserted events and flags */
} advisor;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The median time between the ends of consecutive iterations (token= or
 * iter= values, in the order they first appear) of t, given each
 * statement's end; -1 with fewer than two. */
static int64_t per_iteration(const trace *t, const int64_t *end)
{
    uint32_t k_token = trace_str_find(t, "token", 5), k_iter = trace_str_find(t, "iter", 4);
    if (k_token == TRACE_NONE && k_iter == TRACE_NONE)
        return -1;
    trace_u64map index = { 0 };     /* value id -> iteration number + 1 */
    int64_t *ends = NULL;
    size_t n = 0, cap = 0;
    int64_t med = -1;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        if (end[i] == TRACE_TIME_NONE)
            continue;
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        uint32_t v = attr_value(&s, k_token);
        if (v == TRACE_NONE)
            v = attr_value(&s, k_iter);
        if (v == TRACE_NONE)
            continue;
        uint64_t *x = trace_u64map_put(&index, v, 0);
        if (!x)
            goto out;
        if (!*x) {
            if (trace_grow((void **)&ends, &cap, n + 1, sizeof *ends) != 0)
                goto out;
            ends[n++] = end[i];
            *x = n;
        } else if (end[i] > ends[*x - 1])
            ends[*x - 1] = end[i];
    }
    if (n >= 2) {
        for (size_t k = n - 1; k > 0; k--)
            ends[k] -= ends[k - 1];
        qsort(ends + 1, n - 1, sizeof *ends, cmp_i64);
        med = ends[1 + (n - 1) / 2];
    }
out:
    free(ends);
    trace_u64map_free(&index);
    return med;
}

/* Prices t (without drop): 0, 1 when it hangs (timing -1), -1 with err. */
static int price(advisor *a, const trace *t, const bool *drop, check_timing *out,
                 trace_error *err)
{
    out->makespan_ns = out->per_iter_ns = -1;
    int64_t *end = malloc((t->n_stmts ? t->n_stmts : 1) * sizeof *end);
    if (!end)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    int rc = a->pr->replay(a->pr->ctx, t, drop, &out->makespan_ns, NULL, end, NULL, err);
    if (rc == 0)
        out->per_iter_ns = per_iteration(t, end);
    else
        out->makespan_ns = -1;
    free(end);
    return rc;
}

/* One group being advised. */
typedef struct group {
    uint64_t key;
    int level;              /* key_of's: 0 exact, 1 and 2 coarsened */
    uint64_t *seqs;
    size_t n, cap;
    uint64_t units;         /* occurrences: statements, or barrier generations */
    bool copy;              /* blocking copies */
    uint32_t *streams;      /* copy: the stream each goes to (by seq order) */
} group;

static int group_add(group *g, uint64_t seq, uint32_t stream)
{
    if (trace_grow((void **)&g->seqs, &g->cap, g->n + 1, sizeof *g->seqs) != 0)
        return -1;
    if (g->copy) {
        uint32_t *s = realloc(g->streams, g->cap * sizeof *s);
        if (!s)
            return -1;
        g->streams = s;
        g->streams[g->n] = stream;
    }
    g->seqs[g->n++] = seq;
    return 0;
}

/* The edit that "removes" group g from t: its statements deleted, or its
 * copies moved to their streams. The arrays are the caller's. */
static int removal_edit(const trace *t, const group *g, bool **drop, uint32_t **move)
{
    *drop = NULL;
    *move = NULL;
    uint64_t n = t->n_stmts ? t->n_stmts : 1;
    if (g->copy) {
        if (!(*move = malloc(n * sizeof **move)))
            return -1;
        for (uint64_t i = 0; i < t->n_stmts; i++)
            (*move)[i] = TRACE_NONE;
        for (size_t k = 0; k < g->n; k++)
            (*move)[g->seqs[k]] = g->streams[k];
        return 0;
    }
    if (!(*drop = calloc(n, sizeof **drop)))
        return -1;
    for (size_t k = 0; k < g->n; k++)
        (*drop)[g->seqs[k]] = true;
    return 0;
}

/* A replacement being tried: the group removed, insertions on top. */
typedef struct attempt {
    check_insert *ins;
    size_t n, cap;
    uint32_t *streams;      /* narrowing: the streams to sync (sorted, unique) */
    size_t n_streams, cap_streams;
} attempt;

static int ins_add(attempt *x, check_insert in)
{
    if (trace_grow((void **)&x->ins, &x->cap, x->n + 1, sizeof *x->ins) != 0)
        return -1;
    x->ins[x->n++] = in;
    return 0;
}

static bool is_host_q(const trace *t, uint32_t q)
{
    return q < t->n_queues && t->queues[q].kind == TRACE_QUEUE_HOST;
}

/* The edge from x to y (statements of the original, as a finding on the
 * edited trace names them: queue and submitter there) that keeps them in
 * order for the least: an event recorded right after x and waited for
 * right before y, where x runs on a stream (y on a host: an event
 * synchronize); from a host, a flag signalled after x and awaited before y
 * (or before its submission). */
static int add_edge(advisor *a, attempt *x, uint64_t xs, const trace_stmt_ref *xr, uint64_t ys,
                    const trace_stmt_ref *yr)
{
    trace *t = a->t;
    char buf[48];
    bool host_x = is_host_q(t, xr->queue);
    /* a name of its own (interned into the trace, whose edits share its
     * strings): a wait binds to the latest record of its name. Interning
     * may move the trace's string table: a view made before must not be
     * asked for a string after (its findings' words are made first). */
    snprintf(buf, sizeof buf, "advise.%s%llu", host_x ? "f" : "e",
             (unsigned long long)a->next_name++);
    uint32_t name = trace_intern_cstr(t, buf);
    if (name == TRACE_NONE)
        return -1;
    if (!host_x) {
        check_insert rec = { .at = xs + 1, .kind = TRACE_RECORD, .queue = xr->queue,
                             .by = xr->by, .object = name };
        check_insert w = { .at = ys, .kind = TRACE_WAIT, .queue = yr->queue,
                           .by = is_host_q(t, yr->queue) ? TRACE_NONE : yr->by, .object = name };
        return ins_add(x, rec) != 0 || ins_add(x, w) != 0 ? -1 : 0;
    }
    check_insert sig = { .at = xs + 1, .kind = TRACE_SIGNAL, .queue = xr->queue,
                         .by = TRACE_NONE, .object = name };
    uint32_t q = yr->queue, by = TRACE_NONE;
    if (!is_host_q(t, q) && yr->by != TRACE_NONE)
        q = yr->by;             /* its host awaits before it submits y */
    else if (!is_host_q(t, q))
        by = TRACE_NONE;
    check_insert aw = { .at = ys, .kind = TRACE_AWAIT, .queue = q, .by = by, .object = name };
    return ins_add(x, sig) != 0 || ins_add(x, aw) != 0 ? -1 : 0;
}

static int add_stream(attempt *x, uint32_t s)
{
    for (size_t i = 0; i < x->n_streams; i++)
        if (x->streams[i] == s)
            return 0;
    if (trace_grow((void **)&x->streams, &x->cap_streams, x->n_streams + 1,
                   sizeof *x->streams) != 0)
        return -1;
    x->streams[x->n_streams++] = s;
    return 0;
}

/* The narrowed syncs of attempt x as insertions: at each sync of the group
 * (deleted), a sync of each stream named. */
static int narrow_ins(const advisor *a, const group *g, const attempt *x, attempt *out)
{
    out->n = 0;
    for (size_t k = 0; k < g->n; k++) {
        trace_stmt s;
        trace_stmt_at(a->t, g->seqs[k], &s);
        for (size_t i = 0; i < x->n_streams; i++) {
            check_insert in = { .at = g->seqs[k], .kind = TRACE_SYNC, .queue = s.queue,
                                .by = TRACE_NONE, .sync_scope = TRACE_SYNC_QUEUE,
                                .object = x->streams[i] };
            if (ins_add(out, in) != 0)
                return -1;
        }
    }
    return 0;
}

/* A what-if: the trace with group g removed and the insertions ins[0..n),
 * checked. Drops alone run on the trace itself with a mask; anything else
 * on a view with statements of its own (check_trace_edit_view). */
typedef struct whatif {
    trace view;             /* when edited */
    bool edited;
    uint64_t *map;          /* the view's statement -> the trace's seq; NULL: the trace */
    bool *drop;             /* when not edited: the removal */
    check_report *rep;      /* its findings */
    size_t n_new;           /* of them not the trace's own */
    size_t first_new;       /* the first of those (index in rep) */
} whatif;

static void whatif_free(whatif *w)
{
    if (w->edited)
        check_trace_view_free(&w->view);
    free(w->map);
    free(w->drop);
    check_report_free(w->rep);
    memset(w, 0, sizeof *w);
}

/* The trace the what-if is about, and the drops to replay it with. */
static const trace *whatif_trace(const advisor *a, const whatif *w)
{
    return w->edited ? &w->view : a->t;
}

static int try_edit(advisor *a, const group *g, const check_insert *ins, size_t n_ins, whatif *w,
                    trace_error *err)
{
    memset(w, 0, sizeof *w);
    uint32_t *move = NULL;
    if (removal_edit(a->t, g, &w->drop, &move) != 0)
        goto oom;
    if (move || n_ins) {
        check_edit e = { .drop = w->drop, .move_to = move, .ins = ins, .n_ins = n_ins };
        if (check_trace_edit_view(a->t, &e, &w->view, &w->map) != 0)
            goto oom;
        w->edited = true;
        free(w->drop);
        w->drop = NULL;
    }
    free(move);
    move = NULL;
    if (!(w->rep = check_run(whatif_trace(a, w), w->drop)))
        goto oom;
    for (size_t i = 0; i < w->rep->n; i++)
        if (!trace_u64map_get(&a->base.k, key_hash(orig_key(&w->rep->f[i], w->map))))
            if (w->n_new++ == 0)
                w->first_new = i;
    return 0;
oom:
    free(move);
    whatif_free(w);
    trace_error_set(err, TRACE_ENOMEM, "out of memory");
    return -1;
}

/* Finding f (on an edited trace with map) is new and a pair an edge can
 * order: its two statements' original seqs. */
static bool new_pair(const advisor *a, const trace_finding *f, const uint64_t *map, uint64_t *xs,
                     uint64_t *ys)
{
    if (trace_u64map_get(&a->base.k, key_hash(orig_key(f, map))))
        return false;
    if (f->kind != TRACE_FINDING_RACE && f->kind != TRACE_FINDING_USE_AFTER_FREE)
        return false;
    if (f->first.seq == TRACE_NO_SEQ || f->second.seq == TRACE_NO_SEQ)
        return false;
    *xs = map ? map[f->first.seq] : f->first.seq;
    *ys = map ? map[f->second.seq] : f->second.seq;
    return *xs != TRACE_NO_SEQ && *ys != TRACE_NO_SEQ && *xs < *ys;
}

typedef struct outcome {
    bool found;
    check_timing timing;
    size_t inserted;
    char *what;             /* owned */
} outcome;

/* A way to keep the order a removal broke, tried in rounds: the group
 * removed with the attempt's insertions, checked; what it still lets in
 * grows the attempt, until it checks clean (then it is priced), nothing
 * can be added, or ROUNDS. */
typedef struct strategy {
    /* The insertions of attempt x into out (which may be x itself). */
    int (*inserts)(const advisor *a, const group *g, const attempt *x, attempt *out);
    /* Grows x by what the new findings of w ask for: returns how much it
     * added (0: none can be), or -1 (OOM). *stuck: a finding it cannot
     * answer. */
    int (*grow)(advisor *a, attempt *x, const whatif *w, bool *stuck);
} strategy;

static int rounds(advisor *a, const group *g, const whatif *removal, const strategy *st,
                  attempt *x, outcome *res, trace_error *err)
{
    attempt own = { 0 }, *ins = st->inserts == NULL ? x : &own;
    int rc = -1;
    for (int round = 0; round < ROUNDS; round++) {
        if (st->inserts && st->inserts(a, g, x, ins) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto out;
        }
        whatif w;
        if (round == 0)
            w = *removal;       /* the caller's: its findings are round 0's */
        else if (try_edit(a, g, ins->ins, ins->n, &w, err) != 0)
            goto out;
        if (w.n_new == 0) {     /* never round 0: the removal has findings */
            int prc = ins->n ? price(a, whatif_trace(a, &w), w.drop, &res->timing, err) : 0;
            whatif_free(&w);
            if (prc < 0)
                goto out;
            /* with nothing put in, the removal itself was safe */
            res->found = ins->n && res->timing.makespan_ns >= 0;
            res->inserted = ins->n;
            break;
        }
        bool stuck = false;
        int added = st->grow(a, x, &w, &stuck);
        if (round > 0)
            whatif_free(&w);
        if (added < 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto out;
        }
        if (stuck || added == 0)
            break;
    }
    rc = 0;
out:
    free(own.ins);
    free(own.streams);
    return rc;
}

/* Events (and flags): an edge for each new pair. */
static int grow_edges(advisor *a, attempt *x, const whatif *w, bool *stuck)
{
    int added = 0;
    (void)stuck;                /* what no edge orders is left; the next round says */
    for (size_t i = 0; i < w->rep->n; i++) {
        const trace_finding *f = &w->rep->f[i];
        uint64_t xs, ys;
        if (!new_pair(a, f, w->map, &xs, &ys))
            continue;
        if (add_edge(a, x, xs, &f->first, ys, &f->second) != 0)
            return -1;
        added++;
    }
    return added;
}

/* Narrowing: the streams the new findings start on. */
static int grow_streams(advisor *a, attempt *x, const whatif *w, bool *stuck)
{
    int added = 0;
    for (size_t i = 0; i < w->rep->n && !*stuck; i++) {
        const trace_finding *f = &w->rep->f[i];
        uint64_t xs, ys;
        if (!new_pair(a, f, w->map, &xs, &ys) || is_host_q(a->t, f->first.queue)) {
            /* a stream sync cannot order it */
            *stuck = !trace_u64map_get(&a->base.k, key_hash(orig_key(f, w->map)));
            continue;
        }
        size_t before = x->n_streams;
        if (add_stream(x, f->first.queue) != 0)
            return -1;
        added += (int)(x->n_streams - before);
    }
    return added;
}

/* Strategy: events (and flags) for each new pair. removal: the what-if of
 * the group removed (round 0). */
static int try_events(advisor *a, const group *g, const whatif *removal, outcome *res,
                      trace_error *err)
{
    static const strategy st = { NULL, grow_edges };
    attempt x = { 0 };
    int rc = rounds(a, g, removal, &st, &x, res, err);
    free(x.ins);
    free(x.streams);
    return rc;
}

/* Strategy: each `sync all` / `sync device=D` narrowed to the streams the
 * new findings start on. */
static int try_narrow(advisor *a, const group *g, const whatif *removal, outcome *res,
                      trace_error *err)
{
    static const strategy st = { narrow_ins, grow_streams };
    attempt x = { 0 };
    int rc = rounds(a, g, removal, &st, &x, res, err);
    if (rc == 0 && res->found) {
        char list[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < x.n_streams && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                     check_queue_name(a->t, x.streams[i]));
        res->what = check_strf("sync only %s instead (%zu stream sync%s in place of each)", list,
                               x.n_streams, x.n_streams == 1 ? "" : "s");
    }
    free(x.ins);
    free(x.streams);
    return rc;
}

/* ------------------------------------------------------------------ */
/* One group's advice.                                                 */

/* "what": the first statement's kind and target, as people read it. */
static void describe(const trace *t, const group *g, check_advice_item *it)
{
    trace_stmt s;
    trace_stmt_at(t, g->seqs[0], &s);
    const char *q = check_queue_name(t, s.queue);
    if (g->copy) {
        const char *l = s.label != TRACE_NONE ? trace_str(t, s.label) : "";
        snprintf(it->what, sizeof it->what, "%s copy %s (blocking; async on %s instead)", q, l,
                 check_queue_name(t, g->streams[0]));
        return;
    }
    const char *target = s.kind == TRACE_SYNC
                             ? (s.sync_scope == TRACE_SYNC_ALL      ? "all"
                                : s.sync_scope == TRACE_SYNC_DEVICE ? trace_str(t, s.object)
                                                                    : check_queue_name(t, s.object))
                             : trace_str(t, s.object);
    if (s.kind == TRACE_BARRIER)
        snprintf(it->what, sizeof it->what, "barrier %s", target);
    else
        snprintf(it->what, sizeof it->what, "%s %s %s%s", q, trace_kind_str(s.kind),
                 s.kind == TRACE_SYNC && s.sync_scope == TRACE_SYNC_DEVICE ? "device=" : "",
                 target);
}

/* "where": its letter in its iteration's pattern, and its site. */
static void locate(const trace *t, const grouping *gr, const cand_info *c, int level,
                   check_advice_item *it)
{
    trace_stmt s;
    trace_stmt_at(t, c->seq, &s);
    size_t used = 0;
    it->where[0] = '\0';
    if (level > 0)              /* many places: its first is no name for all */
        used += (size_t)snprintf(it->where, sizeof it->where, "%s",
                                 level == 1 ? "(grouped by queue and target)"
                                            : "(grouped by queue)");
    else if (c->iter != SIZE_MAX) {
        trace_pattern_iter pi = trace_pattern_at(gr->pat, c->iter);
        size_t len = strlen(pi.before), from = c->pos > 24 ? c->pos - 24 : 0;
        size_t to = len - c->pos > 25 ? c->pos + 25 : len;
        used += (size_t)snprintf(it->where, sizeof it->where, "%s%.*s[%c]%.*s%s",
                                 from ? "..." : "", (int)(c->pos - from), pi.before + from,
                                 c->pos < len ? pi.before[c->pos] : '?',
                                 (int)(to > c->pos + 1 ? to - c->pos - 1 : 0),
                                 pi.before + c->pos + 1, to < len ? "..." : "");
    }
    uint32_t site = attr_value(&s, gr->k_site);
    if (site != TRACE_NONE && used < sizeof it->where)
        snprintf(it->where + used, sizeof it->where - used, "%sat %s", used ? " " : "",
                 trace_str(t, site));
}

/* The time each statement of g holds its queue (the trace's dur= when it
 * has times, else the replay's), and that time of the statements on the
 * replay's critical path. */
static void hold_times(const advisor *a, const group *g, check_advice_item *it)
{
    it->held_recorded = true;
    for (size_t k = 0; k < g->n; k++) {
        uint64_t i = g->seqs[k];
        trace_stmt s;
        trace_stmt_at(a->t, i, &s);
        int64_t held = a->end[i] != TRACE_TIME_NONE ? a->end[i] - a->start[i] : 0;
        if (s.t != TRACE_TIME_NONE && s.dur != TRACE_TIME_NONE)
            held = s.dur;
        else
            it->held_recorded = false;
        it->held_ns += held;
        if (a->crit[i])
            it->critical_ns += held;
    }
}

/* How many of g's occurrences the minimiser removes (a barrier generation
 * counts when all its participants go). */
static uint64_t safe_units(const advisor *a, const group *g, const cand_info *cands,
                           const size_t *cand_of)
{
    uint64_t n = 0;
    trace_u64map gens = { 0 };  /* barrier generation -> 1: kept, 2: removed */
    for (size_t k = 0; k < g->n; k++) {
        bool removed = !a->min.keep[g->seqs[k]];
        trace_stmt s;
        trace_stmt_at(a->t, g->seqs[k], &s);
        if (s.kind != TRACE_BARRIER) {
            n += removed;
            continue;
        }
        uint64_t key = (uint64_t)s.object << 32 | cands[cand_of[k]].gen;
        uint64_t *v = trace_u64map_put(&gens, key, removed ? 2 : 1);
        if (v && !removed)
            *v = 1;
    }
    for (uint32_t i = 0; i < gens.cap; i++)
        n += gens.used[i] && gens.vals[i] == 2;
    trace_u64map_free(&gens);
    return n;
}

static int advise_group(advisor *a, const group *g, const grouping *gr, const cand_info *first,
                        const size_t *cand_of, bool ordering_only, check_advice_item *it,
                        trace_error *err)
{
    describe(a->t, g, it);
    locate(a->t, gr, first, g->level, it);
    trace_stmt s0;
    trace_stmt_at(a->t, g->seqs[0], &s0);
    it->kind = g->copy ? TRACE_COPY : s0.kind;
    it->queue = s0.queue;
    it->count = g->units;
    it->first_seq = g->seqs[0];
    if (!(it->seqs = malloc(g->n * sizeof *it->seqs)))
        goto oom;
    memcpy(it->seqs, g->seqs, g->n * sizeof *it->seqs);
    it->n_seqs = g->n;
    hold_times(a, g, it);
    it->without.makespan_ns = it->without_safe.makespan_ns = -1;
    it->without.per_iter_ns = it->without_safe.per_iter_ns = -1;
    it->with_replacement.makespan_ns = it->with_replacement.per_iter_ns = -1;

    /* What removing them all buys, and what it lets in. */
    whatif w;
    if (try_edit(a, g, NULL, 0, &w, err) != 0)
        return -1;
    int prc = price(a, whatif_trace(a, &w), w.drop, &it->without, err);
    size_t n_new = w.n_new;
    it->n_new = n_new;
    if (n_new)
        finding_words(w.rep, w.first_new, &it->finding, &it->fix);
    if (prc < 0) {
        whatif_free(&w);
        return -1;
    }

    if (g->copy)
        it->n_safe = n_new == 0 ? g->units : 0;
    else
        it->n_safe = safe_units(a, g, gr->c, cand_of);
    it->safety = ordering_only      ? CHECK_SAFE_UNJUDGED
                 : it->n_safe == it->count ? CHECK_SAFE_ALL
                 : it->n_safe == 0   ? CHECK_SAFE_NONE
                                     : CHECK_SAFE_SOME;
    if (!g->copy && it->n_safe > 0 && it->n_safe < it->count) {
        bool *drop = calloc(a->t->n_stmts ? a->t->n_stmts : 1, sizeof *drop);
        if (!drop) {
            whatif_free(&w);
            goto oom;
        }
        for (size_t k = 0; k < g->n; k++)
            drop[g->seqs[k]] = !a->min.keep[g->seqs[k]];
        prc = price(a, a->t, drop, &it->without_safe, err);
        free(drop);
        if (prc < 0) {
            whatif_free(&w);
            return -1;
        }
    }

    /* What keeps the order for less. */
    if (n_new && !a->o->no_replacements) {
        outcome ev = { 0 }, nar = { 0 };
        bool widest = !g->copy;
        for (size_t k = 0; k < g->n && widest; k++) {
            trace_stmt s;
            trace_stmt_at(a->t, g->seqs[k], &s);
            widest = s.kind == TRACE_SYNC && s.sync_scope != TRACE_SYNC_QUEUE;
        }
        if (try_events(a, g, &w, &ev, err) != 0 ||
            (widest && try_narrow(a, g, &w, &nar, err) != 0)) {
            free(nar.what);
            whatif_free(&w);
            return -1;
        }
        outcome *best = ev.found ? &ev : NULL;
        if (nar.found && (!best || nar.timing.makespan_ns < best->timing.makespan_ns))
            best = &nar;
        if (best == &ev) {
            trace_stmt s;
            trace_stmt_at(a->t, g->seqs[0], &s);
            it->replacement = check_strf(
                "%san event recorded right after each statement it ordered and waited for "
                "right before the one that needs it (%zu record%s and wait%s in all; on a host, "
                "an event synchronize of that statement alone; host to host, a flag)",
                g->copy ? "copy asynchronously, and for each access that then races, " : "",
                ev.inserted / 2, ev.inserted / 2 == 1 ? "" : "s", ev.inserted / 2 == 1 ? "" : "s");
            it->with_replacement = ev.timing;
        } else if (best == &nar) {
            it->replacement = nar.what;
            nar.what = NULL;
            it->with_replacement = nar.timing;
        }
        free(nar.what);
        free(ev.what);
    }
    whatif_free(&w);
    return 0;
oom:
    trace_error_set(err, TRACE_ENOMEM, "out of memory");
    return -1;
}

/* What the advice buys, the sort key: the larger gain of the safe removal
 * and the replacement; 0 when neither is known or neither gains. */
static int64_t buys(const check_advice *adv, const check_advice_item *it)
{
    int64_t base = adv->base.makespan_ns, best = 0;
    const check_timing *with[2] = {
        it->safety == CHECK_SAFE_ALL    ? &it->without
        : it->safety == CHECK_SAFE_SOME ? &it->without_safe
                                        : NULL,
        it->replacement ? &it->with_replacement : NULL,
    };
    for (int k = 0; k < 2; k++)
        if (with[k] && with[k]->makespan_ns >= 0 && base >= 0 && base - with[k]->makespan_ns > best)
            best = base - with[k]->makespan_ns;
    return best;
}

static int cmp_items(const void *x, const void *y)
{
    const check_advice_item *a = x, *b = y;
    if (a->buys_ns != b->buys_ns)
        return a->buys_ns > b->buys_ns ? -1 : 1;
    if (a->held_ns != b->held_ns)
        return a->held_ns > b->held_ns ? -1 : 1;
    return a->first_seq < b->first_seq ? -1 : a->first_seq > b->first_seq;
}

/* ------------------------------------------------------------------ */

/* Every blocking copy submitted to its stream at once (what llama.cpp
 * #17795 did to ggml's user-input copies): priced and checked. */
static int all_copies_async(advisor *a, const grouping *gr, check_advice *out, trace_error *err)
{
    group all = { .copy = true };
    int rc = -1;
    out->all_async.makespan_ns = out->all_async.per_iter_ns = -1;
    for (size_t c = 0; c < gr->n; c++)
        if (gr->c[c].stream != TRACE_NONE && group_add(&all, gr->c[c].seq, gr->c[c].stream) != 0)
            goto oom;
    out->n_copies = all.n;
    if (all.n) {
        whatif w;
        if (try_edit(a, &all, NULL, 0, &w, err) != 0)
            goto done;
        out->all_async_new = w.n_new;
        if (w.n_new) {
            char *fix = NULL;
            finding_words(w.rep, w.first_new, &out->all_async_finding, &fix);
            free(fix);
        }
        int prc = price(a, whatif_trace(a, &w), w.drop, &out->all_async, err);
        whatif_free(&w);
        if (prc < 0)
            goto done;
    }
    rc = 0;
    goto done;
oom:
    trace_error_set(err, TRACE_ENOMEM, "out of memory");
done:
    free(all.seqs);
    free(all.streams);
    return rc;
}

/* Groups of the candidates at the coarsest level needed to keep at most
 * max of them. *out, *n_out: the caller's (each group's arrays too);
 * cand_of[k] of each group: the index of its k-th statement's candidate. */
static int make_groups(const trace *t, const grouping *gr, size_t max, group **out, size_t *n_out,
                       size_t ***cand_of_out)
{
    trace_u64map idx = { 0 };
    group *g = NULL;
    size_t n = 0, cap = 0, **cand_of = NULL;
    for (int level = 0; level < 3; level++) {
        for (size_t i = 0; i < n; i++)
            free(g[i].seqs), free(g[i].streams), free(cand_of[i]);
        free(g);
        free(cand_of);
        g = NULL;
        cand_of = NULL;
        n = cap = 0;
        trace_u64map_free(&idx);
        memset(&idx, 0, sizeof idx);
        size_t cap_of = 0;
        for (size_t c = 0; c < gr->n; c++) {
            const cand_info *ci = &gr->c[c];
            uint64_t key = key_of(t, gr, ci, level);
            uint64_t *v = trace_u64map_put(&idx, key, UINT64_MAX);
            if (!v)
                goto oom;
            if (*v == UINT64_MAX) {
                if (trace_grow((void **)&g, &cap, n + 1, sizeof *g) != 0 ||
                    trace_grow((void **)&cand_of, &cap_of, n + 1, sizeof *cand_of) != 0)
                    goto oom;
                g[n] = (group){ .key = key, .level = level, .copy = ci->stream != TRACE_NONE };
                cand_of[n] = NULL;
                *v = n++;
            }
            group *x = &g[*v];
            if (group_add(x, ci->seq, ci->stream) != 0)
                goto oom;
            size_t **co = &cand_of[*v];
            size_t *p = realloc(*co, x->cap * sizeof *p);
            if (!p)
                goto oom;
            *co = p;
            p[x->n - 1] = c;
        }
        if (n <= max || level == 2)
            break;
    }
    /* occurrences: statements, or barrier generations */
    for (size_t i = 0; i < n; i++) {
        trace_u64map gens = { 0 };
        for (size_t k = 0; k < g[i].n; k++) {
            const cand_info *ci = &gr->c[cand_of[i][k]];
            trace_stmt s;
            trace_stmt_at(t, ci->seq, &s);
            if (s.kind != TRACE_BARRIER) {
                g[i].units++;
                continue;
            }
            uint64_t *v = trace_u64map_put(&gens, (uint64_t)s.object << 32 | ci->gen, 0);
            if (!v) {
                trace_u64map_free(&gens);
                goto oom;
            }
            if (!*v) {
                *v = 1;
                g[i].units++;
            }
        }
        trace_u64map_free(&gens);
    }
    trace_u64map_free(&idx);
    *out = g;
    *n_out = n;
    *cand_of_out = cand_of;
    return 0;
oom:
    for (size_t i = 0; i < n; i++)
        free(g[i].seqs), free(g[i].streams), free(cand_of[i]);
    free(g);
    free(cand_of);
    trace_u64map_free(&idx);
    return -1;
}

int check_advise(trace *t, const check_advise_opts *o, check_advice *out, trace_error *err)
{
    memset(out, 0, sizeof *out);
    advisor a = { .t = t, .o = o, .pr = o->pricer };
    grouping gr = { 0 };
    group *groups = NULL;
    size_t n_groups = 0, **cand_of = NULL;
    check_report *base_rep = NULL;
    uint64_t n = t->n_stmts ? t->n_stmts : 1;
    int rc = -1;
    a.start = malloc(n * sizeof *a.start);
    a.end = malloc(n * sizeof *a.end);
    a.crit = calloc(n, sizeof *a.crit);
    out->mark = calloc(n, sizeof *out->mark);
    if (!a.start || !a.end || !a.crit || !out->mark)
        goto oom;
    out->n_stmts = t->n_stmts;

    /* 2. the baseline: replay, findings, coverage, the minimiser */
    int prc = a.pr->replay(a.pr->ctx, t, NULL, &out->base.makespan_ns, a.start, a.end, a.crit,
                           err);
    if (prc != 0) {
        if (prc > 0)
            trace_error_set(err, TRACE_EUSAGE, "%s", err->msg[0] ? err->msg : "the replay hangs");
        goto out;
    }
    out->base.per_iter_ns = per_iteration(t, a.end);
    if (!(base_rep = check_run(t, NULL)))
        goto oom;
    out->n_findings = check_report_count(base_rep);
    for (size_t i = 0; i < check_report_count(base_rep); i++)
        if (!trace_u64map_put(&a.base.k, key_hash(check_finding_key(check_report_finding(base_rep, i))), 1))
            goto oom;
    check_coverage cov;
    check_coverage_of(&cov, t);
    out->ordering_only = !check_coverage_full(&cov);
    check_coverage_describe(out->coverage, sizeof out->coverage, &cov, t);
    check_options mo = { .allow_findings = true };
    if (o->progress.fn) {
        mo.progress = min_progress;
        mo.progress_ctx = (void *)&o->progress;
    }
    if (check_minimize(t, &mo, &a.min, err) != 0)
        goto out;
    out->n_candidates = a.min.n_candidates;
    for (size_t i = 0; i < a.min.n_removed; i++)
        out->n_removable += i == 0 || a.min.removed[i].group != a.min.removed[i - 1].group;
    if (a.min.n_removed) {
        bool *drop = calloc(n, sizeof *drop);
        if (!drop)
            goto oom;
        for (uint64_t i = 0; i < t->n_stmts; i++)
            drop[i] = !a.min.keep[i];
        prc = price(&a, t, drop, &out->all_safe, err);
        free(drop);
        if (prc < 0)
            goto out;
    } else
        out->all_safe = out->base;

    /* 1. groups */
    if (collect(t, &gr) != 0 ||
        make_groups(t, &gr,
                    o->max_groups             ? o->max_groups
                    : t->n_stmts > LARGE      ? MAX_GROUPS_LARGE
                                              : MAX_GROUPS,
                    &groups, &n_groups, &cand_of) != 0)
        goto oom;
    if (!(out->items = calloc(n_groups ? n_groups : 1, sizeof *out->items)))
        goto oom;
    if (all_copies_async(&a, &gr, out, err) != 0)
        goto out;
    /* 3, 4. each group */
    for (size_t i = 0; i < n_groups; i++) {
        trace_progress_say(&o->progress, "groups", i, n_groups);
        check_advice_item *it = &out->items[out->n++];
        if (advise_group(&a, &groups[i], &gr, &gr.c[cand_of[i][0]], cand_of[i],
                         out->ordering_only, it, err) != 0)
            goto out;
        it->buys_ns = buys(out, it);
        for (size_t k = 0; k < it->n_seqs; k++) {
            uint64_t s = it->seqs[k];
            out->mark[s] = !groups[i].copy && !a.min.keep[s] ? CHECK_MARK_GOES
                           : it->replacement                  ? CHECK_MARK_REPLACE
                           : groups[i].copy && it->n_safe     ? CHECK_MARK_GOES
                                                              : CHECK_MARK_STAYS;
        }
    }
    trace_progress_say(&o->progress, "groups", n_groups, n_groups);
    /* 5. by what each buys */
    qsort(out->items, out->n, sizeof *out->items, cmp_items);
    rc = 0;
    goto out;
oom:
    trace_error_set(err, TRACE_ENOMEM, "out of memory");
out:
    if (rc != 0)
        check_advice_free(out);
    for (size_t i = 0; i < n_groups; i++)
        free(groups[i].seqs), free(groups[i].streams), free(cand_of[i]);
    free(groups);
    free(cand_of);
    free(gr.c);
    trace_pattern_free(gr.pat);
    check_report_free(base_rep);
    trace_u64map_free(&a.base.k);
    check_min_result_free(&a.min);
    free(a.start);
    free(a.end);
    free(a.crit);
    return rc;
}

void check_advice_free(check_advice *a)
{
    for (size_t i = 0; i < a->n; i++) {
        free(a->items[i].seqs);
        free(a->items[i].finding);
        free(a->items[i].fix);
        free(a->items[i].replacement);
    }
    free(a->items);
    free(a->mark);
    free(a->all_async_finding);
    memset(a, 0, sizeof *a);
}
