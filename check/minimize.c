/*
 * minimize.c -- the greedy sync minimiser, made incremental.
 *
 * Greedy: every wait, sync and await statement, and every barrier
 * generation (all its participants at once), is a candidate, tried in
 * submission order. A candidate is removed when the trace without it (and
 * without the removals kept so far) has no finding that the trace with it
 * lacked. A removed statement keeps its place in its queue (so epochs and
 * barrier generation numbers do not shift) but synchronises nothing.
 *
 * Incremental: re-checking the whole trace per candidate costs
 * O(candidates x statements). Instead, in passes:
 *
 *  0. What each record and flag is last used by (so that engines drop dead
 *     ones: a trace that names a new event every iteration would otherwise
 *     keep them, and two runs would never look alike again), and the waits
 *     that a repeat makes changeless (0b, repeated_waits). And the trace's
 *     islands (0c, reach.c): the roots cut where no access crosses, so that
 *     a copy-on-write copies a tensor's segments, not an arena's; every
 *     engine here runs on that view of the trace, and findings are keyed by
 *     the root an island is part of.
 *  1. The baseline: one run of the trace as it is, its findings kept with
 *     the position of the statement that found them. Through the pass they
 *     stay the findings of the accepted trace (the removals kept so far):
 *     `fset` counts them, `found` orders them.
 *  2. A live engine runs the accepted trace, fed up to each candidate. Where
 *     it is quiescent there (nothing pending), a trial engine is copied from
 *     it (check_engine_assign: clocks and shadows shared copy-on-write, only
 *     the roots that moved since the last copy looked at) and fed on with the
 *     candidate removed. The trial stops at its first new finding (the
 *     candidate stays). It is compared with a reference, the accepted
 *     trace's run: the one the previous window left (try_removal says why
 *     it still is that run) when it stands at most AHEAD_MAX statements
 *     ahead, else a copy of the live engine that catches up two statements
 *     after the candidate. From where both stand at one statement they are
 *     fed in lockstep; after each statement their clocks are compared, and
 *     where those agree (check_engine_clocks_alike: equal, or a stream's
 *     that nothing can tell apart before it runs again) check_engine_alike
 *     compares the records, flags and roots the window touched (at doubling
 *     intervals while only those differ), leaving out reads that no later
 *     access can race with. Alike states make equal futures, so there the
 *     removal is kept, and the window's findings replace the accepted
 *     trace's between the candidate and that point. A trial that never
 *     meets the reference (a hang keeps queues blocked) runs to the end and
 *     is judged on all it found; past ABANDON statements it runs without
 *     the reference.
 *  Where the live run is not quiescent at a candidate, the windows start
 *  from a snapshot of it taken at an earlier quiescent candidate (every
 *  checkpoint_every statements) and replay up to the candidate.
 *
 * A removal rarely changes the clocks past the next covering sync, so a
 * candidate costs the distance to where its effect washes out (the trial;
 * the reference mostly runs once along the trace), plus a copy; the live
 * run and the baseline read each statement once. Memory: the trace, five
 * engines, and the shadows they do not share.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SNAP_EVERY 256 /* default statements between snapshots of the live run */

/* Findings (their hashes) in the order they were found, each with the
 * position of the statement being fed when it was (n_stmts: at the end). */
typedef struct fitem {
    uint64_t hash, pos;
} fitem;

typedef struct hashes {
    fitem *h;
    size_t n, cap;
} hashes;

/* A set of root buffers (a list, and a stamp per root for membership). */
typedef struct rootset {
    uint32_t *r;
    size_t n, cap;
    uint32_t *stamp;            /* per root: epoch when in the set */
    uint32_t n_stamp, epoch;
} rootset;

/* A window engine: a copy of the live run (or of the snapshot) fed a
 * window of statements. */
typedef struct window {
    check_engine *e;
    check_report *rep;
    hashes f;                   /* its findings in the window */
    bool from_live;             /* last copied from the live run... */
    rootset moved;              /* ...and these roots may differ from its since */
} window;

typedef struct minimizer {
    const trace *t;             /* the islands' view of the trace (reach.c) */
    check_islands is;
    bool ignore_hangs;
    bool *remove;               /* per seq: the removals kept (the accepted trace) */
    bool *trial;                /* remove, plus the candidate being tried */
    bool *repeated;             /* per seq: a wait its stream repeats (repeated_waits) */
    trace_u64map fset;          /* finding hash -> count, over the accepted trace's run */
    hashes found;               /* the accepted trace's findings, by position */
    size_t n_findings;          /* findings before any removal */
    trace_u64map flag_totals;   /* flag -> signals: exact rule 6 from the start */
    trace_u64map record_last;   /* record seq -> last wait bound to it */
    trace_u64map flag_last;     /* flag -> last signal or await */
    uint64_t replayed;
    uint32_t every;             /* statements between snapshots */
    check_engine *live;         /* the accepted trace, fed up to the candidate */
    check_report *live_rep;
    uint64_t pruned;            /* where live was last pruned */
    check_engine *snap;         /* live at an earlier quiescent candidate (never fed) */
    window ref, try;            /* the window with the candidate, and without */
    bool ahead;                 /* ref holds the accepted trace's run (try_removal) */
    rootset touched;            /* roots the window's statements access */
} minimizer;

/* A finding's key, as found on the trace itself: an island's root is the
 * root it is part of (reach.c). */
static uint64_t fkey_hash(const minimizer *m, const trace_finding *f)
{
    trace_finding g = *f;
    g.root = check_island_root(&m->is, f->root);
    check_fkey k = check_finding_key(&g);
    uint64_t h = k.a * 0x9E3779B97F4A7C15ULL;
    h ^= (k.b + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    h = (h << 31) | (h >> 33);
    h ^= (k.c + 0x165667B19E3779F9ULL) * 0x27D4EB2F165667C5ULL;
    return h;
}

/* Moves the findings of rep, found at position pos, into v (NULL: drops
 * them) and empties rep, so that a report fed for a whole run holds one
 * statement's findings at a time. The merge window of
 * check_report_conflict is one statement, which one feed completes. 0 or -1
 * (OOM). */
static int drain_report(const minimizer *m, check_report *rep, hashes *v, uint64_t pos)
{
    int rc = 0;
    for (size_t i = 0; i < rep->n; i++) {
        if (v && rc == 0) {
            if (v->n == v->cap) {
                size_t c = v->cap ? v->cap * 2 : 64;
                fitem *p = realloc(v->h, c * sizeof *p);
                if (!p)
                    rc = -1;
                else
                    v->h = p, v->cap = c;
            }
            if (rc == 0)
                v->h[v->n++] = (fitem){ fkey_hash(m, &rep->f[i]), pos };
        }
        trace_finding_release(&rep->f[i]);
    }
    rep->n = 0;
    rep->dedupe_from = 0;
    rep->n_dropped_now = 0;
    return rc;
}

/* Some finding of v[from..] is not one of the accepted trace's. */
static bool is_new(const minimizer *m, const hashes *v, size_t from)
{
    for (size_t i = from; i < v->n; i++) {
        uint64_t *c = trace_u64map_get(&m->fset, v->h[i].hash);
        if (!c || !*c)
            return true;
    }
    return false;
}

/* fset += sign * v[lo..hi). */
static int fset_add(minimizer *m, const fitem *v, size_t lo, size_t hi, int sign)
{
    for (size_t i = lo; i < hi; i++) {
        uint64_t *c = trace_u64map_put(&m->fset, v[i].hash, 0);
        if (!c)
            return -1;
        *c += (uint64_t)(int64_t)sign;
    }
    return 0;
}

/* The first finding of v (sorted by position) at or after pos. */
static size_t first_at(const hashes *v, uint64_t pos)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->h[mid].pos < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A kept removal: the accepted trace's findings at positions [lo, hi) are
 * the trial's findings there now (fset and the list both). */
static int accept_window(minimizer *m, const hashes *trial, uint64_t lo, uint64_t hi)
{
    hashes *a = &m->found;
    size_t a0 = first_at(a, lo), a1 = first_at(a, hi);
    size_t t0 = first_at(trial, lo), t1 = first_at(trial, hi);
    if (fset_add(m, a->h, a0, a1, -1) != 0 || fset_add(m, trial->h, t0, t1, 1) != 0)
        return -1;
    size_t n = a->n - (a1 - a0) + (t1 - t0);
    if (n > a->cap) {
        fitem *p = realloc(a->h, n * sizeof *p);
        if (!p)
            return -1;
        a->h = p;
        a->cap = n;
    }
    if (a->n > a1)              /* a->h is NULL while nothing was found */
        memmove(a->h + a0 + (t1 - t0), a->h + a1, (a->n - a1) * sizeof *a->h);
    if (t1 > t0)
        memcpy(a->h + a0, trial->h + t0, (t1 - t0) * sizeof *a->h);
    a->n = n;
    return 0;
}

/* Pass 0b: the stream waits whose removal changes nothing. A wait W on
 * stream q whose next statement on q is a wait W2 on the same event, bound
 * to the same record (one recorded before W, none between), submitted by
 * the same host, with no host sync that may cover q between them: in a run
 * quiescent at W (the record has run), W runs at once, and W2 after it
 * makes q learn the same record and a submission clock that holds W's (a
 * host's clock only grows). Between them q runs nothing and nothing reads
 * q's clock (no statement of q, no sync of it), so after W2 the state with
 * W and the state without it are the same, and so are the findings on the
 * way: the greedy keeps the removal, and no window needs to show it. A sync
 * `all` counts as covering q whatever its rank (ruling 4), which only makes
 * this rarer. */
static int repeated_waits(minimizer *m)
{
    const trace *t = m->t;
    uint64_t *last_wait = malloc((t->n_queues ? t->n_queues : 1) * sizeof *last_wait);
    uint64_t *last_sync = malloc((t->n_queues ? t->n_queues : 1) * sizeof *last_sync);
    trace_u64map record = { 0 }, dev_sync = { 0 };
    uint64_t last_all = 0;
    int rc = -1;
    if (!last_wait || !last_sync)
        goto out;
    for (uint32_t q = 0; q < t->n_queues; q++)
        last_wait[q] = UINT64_MAX, last_sync[q] = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        uint32_t q = s.queue;
        if (s.kind == TRACE_RECORD) {
            uint64_t *r = trace_u64map_put(&record, s.object, 0);
            if (!r)
                goto out;
            *r = i + 1;     /* 0: none */
        } else if (s.kind == TRACE_SYNC) {
            /* a sync at i covers q when i + 1 > W's seq */
            if (s.sync_scope == TRACE_SYNC_ALL)
                last_all = i + 1;
            else if (s.sync_scope == TRACE_SYNC_QUEUE && s.object < t->n_queues)
                last_sync[s.object] = i + 1;
            else {
                uint64_t *d = trace_u64map_put(&dev_sync, s.object, 0);
                if (!d)
                    goto out;
                *d = i + 1;
            }
        }
        if (q >= t->n_queues)
            continue;
        uint64_t w = last_wait[q];
        if (w != UINT64_MAX && s.kind == TRACE_WAIT) {
            trace_stmt x;
            trace_stmt_at(t, w, &x);
            const uint64_t *r = trace_u64map_get(&record, s.object);
            const uint64_t *d = trace_u64map_get(&dev_sync, t->queues[q].device);
            uint64_t covered = last_all > last_sync[q] ? last_all : last_sync[q];
            if (d && *d > covered)
                covered = *d;
            if (x.object == s.object && x.by == s.by && r && *r && *r - 1 < w && covered <= w)
                m->repeated[w] = true;
        }
        last_wait[q] = s.kind == TRACE_WAIT && t->queues[q].kind == TRACE_QUEUE_STREAM
                           ? i
                           : UINT64_MAX;
    }
    rc = 0;
out:
    free(last_wait);
    free(last_sync);
    trace_u64map_free(&record);
    trace_u64map_free(&dev_sync);
    return rc;
}

/* When each record and flag is last used (see check_engine_set_lifetimes). */
static int lifetimes(minimizer *m)
{
    trace_u64map last_record = { 0 };     /* event name -> seq of its latest record */
    int rc = -1;
    for (uint64_t i = 0; i < m->t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(m->t, i, &s);
        if (s.kind == TRACE_RECORD) {
            uint64_t *r = trace_u64map_put(&last_record, s.object, 0);
            uint64_t *l = r ? trace_u64map_put(&m->record_last, i, i) : NULL;
            if (!l)
                goto out;
            *r = i;
        } else if (s.kind == TRACE_WAIT) {
            uint64_t *r = trace_u64map_get(&last_record, s.object);
            uint64_t *l = r ? trace_u64map_get(&m->record_last, *r) : NULL;
            if (l)
                *l = i;
        } else if (s.kind == TRACE_SIGNAL || s.kind == TRACE_AWAIT) {
            uint64_t *l = trace_u64map_put(&m->flag_last, s.object, i);
            if (!l)
                goto out;
            *l = i;
        }
    }
    rc = 0;
out:
    trace_u64map_free(&last_record);
    return rc;
}

static check_engine *engine_new(minimizer *m, check_report *rep, const bool *remove)
{
    check_engine *e = check_engine_new(m->t, rep, remove);
    if (e) {
        check_engine_set_flag_totals(e, &m->flag_totals);
        check_engine_set_lifetimes(e, &m->record_last, &m->flag_last);
    }
    return e;
}

/* Pass 1, the baseline: every finding of the trace as it is. */
static int baseline(minimizer *m)
{
    check_report *rep = check_report_new(m->t, 0);
    check_engine *e = rep ? engine_new(m, rep, NULL) : NULL;
    int rc = -1;
    if (!e)
        goto out;
    for (uint64_t i = 0; i < m->t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(m->t, i, &s);
        if (check_engine_feed(e, &s) != 0 || drain_report(m, rep, &m->found, i) != 0)
            goto out;
        /* keeps the tables small; changes no verdict */
        if ((i & 255) == 255 && check_engine_quiescent(e))
            check_engine_prune(e);
    }
    if (check_engine_finish(e, m->ignore_hangs) != 0 ||
        drain_report(m, rep, &m->found, m->t->n_stmts) != 0 ||
        fset_add(m, m->found.h, 0, m->found.n, 1) != 0)
        goto out;
    m->n_findings = m->found.n;
    rc = 0;
out:
    check_engine_free(e);
    check_report_free(rep);
    return rc;
}

/* Adds root r to rs. 0 or -1 (OOM). */
static int roots_add(rootset *rs, uint32_t r)
{
    if (rs->stamp[r] == rs->epoch)
        return 0;
    if (rs->n == rs->cap) {
        size_t c = rs->cap ? rs->cap * 2 : 64;
        uint32_t *p = realloc(rs->r, c * sizeof *p);
        if (!p)
            return -1;
        rs->r = p;
        rs->cap = c;
    }
    rs->stamp[r] = rs->epoch;
    rs->r[rs->n++] = r;
    return 0;
}

static void roots_clear(rootset *rs)
{
    rs->n = 0;
    if (++rs->epoch == 0) {     /* wrapped: no stamp may match */
        memset(rs->stamp, 0, rs->n_stamp * sizeof *rs->stamp);
        rs->epoch = 1;
    }
}

/* Adds the roots statement s accesses (alloc and free: its buffer's) to
 * a and, when not NULL, b. Only these can change in an engine fed s. */
static int roots_of(const trace *t, const trace_stmt *s, rootset *a, rootset *b)
{
    if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE) {
        if (s->object >= t->n_buffers)
            return 0;
        uint32_t r = t->buffers[s->object].root;
        return roots_add(a, r) != 0 || (b && roots_add(b, r) != 0) ? -1 : 0;
    }
    for (uint32_t i = 0; i < s->n_access; i++) {
        uint32_t r;
        uint64_t lo, hi;
        trace_access_root(t, &s->access[i], &r, &lo, &hi);
        if (roots_add(a, r) != 0 || (b && roots_add(b, r) != 0))
            return -1;
    }
    return 0;
}

/* The windows that will be assigned over before they are fed again (the
 * trial always; the reference unless it is the accepted run left ahead)
 * let go of the roots the live run is about to change, which it then
 * changes in place instead of copying them. roots_of has named them to
 * the windows' next copy. */
static void let_go(minimizer *m, const trace_stmt *s)
{
    window *w[2] = { &m->try, m->ahead ? NULL : &m->ref };
    for (int k = 0; k < 2; k++) {
        if (!w[k] || !w[k]->e || !w[k]->from_live)
            continue;
        if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE) {
            if (s->object < m->t->n_buffers)
                check_engine_let_go(w[k]->e, m->live, m->t->buffers[s->object].root);
            continue;
        }
        for (uint32_t i = 0; i < s->n_access; i++) {
            uint32_t r;
            uint64_t lo, hi;
            trace_access_root(m->t, &s->access[i], &r, &lo, &hi);
            check_engine_let_go(w[k]->e, m->live, r);
        }
    }
}

/* Feeds the live run (the accepted trace) up to statement `to`. */
static int live_to(minimizer *m, uint64_t to)
{
    for (uint64_t i = check_engine_fed(m->live); i < to; i++) {
        trace_stmt s;
        trace_stmt_at(m->t, i, &s);
        if (roots_of(m->t, &s, &m->ref.moved, &m->try.moved) != 0)
            return -1;
        let_go(m, &s);
        if (check_engine_feed(m->live, &s) != 0 || drain_report(m, m->live_rep, NULL, i) != 0)
            return -1;
    }
    return 0;
}

/* w := a copy of base that reads `remove` and tracks what it changes. */
static int prepare(minimizer *m, window *w, const check_engine *base, const bool *remove)
{
    bool live = base == m->live;
    w->f.n = 0;
    if (w->e && check_engine_reusable(w->e)) {
        bool known = live && w->from_live;
        if (check_engine_assign(w->e, base, w->rep, known ? w->moved.r : NULL,
                                known ? w->moved.n : 0) != 0)
            return -1;
    } else {
        check_engine_free(w->e);
        if (!(w->e = check_engine_clone(base, w->rep)))
            return -1;
    }
    w->from_live = live;
    roots_clear(&w->moved);
    check_engine_set_remove(w->e, remove);
    check_engine_track(w->e, true);
    return 0;
}

/* Feeds statement s to window w; the trial keeps its findings. */
static int feed(minimizer *m, window *w, const trace_stmt *s)
{
    m->replayed++;
    return check_engine_feed(w->e, s) != 0 ||
                   drain_report(m, w->rep, w == &m->try ? &w->f : NULL, s->seq) != 0 ||
                   roots_of(m->t, s, &w->moved, &m->touched) != 0
               ? -1
               : 0;
}

/* The two windows may have met (their states compared) once the candidate's
 * last statement is this far behind: a removal that changes anything
 * usually shows a new finding within a statement or two, and the reference
 * window is copied only when a comparison is due. */
#define MEET_AFTER 2

/* A trial still apart from the reference this far after its candidate runs
 * on alone: the reference would cost as much as the trial, for a meeting
 * that has not come. */
#define ABANDON 1024

/* The reference of a window that starts at `first` may be one left from
 * earlier candidates when it is at most this far ahead (the trial then
 * catches up with it before they are compared); farther, a fresh copy. */
#define AHEAD_MAX 256

/* Whether m->ref, left from earlier candidates, can be this candidate's
 * reference as it is: the accepted trace's run (m->ahead), from a window
 * that starts at the live run's position `first`, and not too far ahead. */
static bool ahead_usable(const minimizer *m, const check_engine *base, uint64_t first)
{
    if (!m->ahead || base != m->live)
        return false;
    uint64_t at = check_engine_fed(m->ref.e);
    return at >= first && at - first <= AHEAD_MAX;
}

/* Pass 2, one candidate: tries removing the statements seqs[0..n) (sorted;
 * the live run is fed up to seqs[0]). Returns 1 when kept, 0 when not, -1
 * on OOM.
 *
 * The reference is the accepted trace's run. A window's reference is left
 * as it is when the window ends (m->ahead): when the candidate goes, the
 * trial becomes the reference (the trial's run is the accepted trace's
 * now), and when it stays, the reference is still the accepted trace's.
 * The next candidate's trial then meets that reference where it stands
 * instead of a fresh copy catching up from the candidate: the statements
 * between are fed once, not twice. */
static int try_removal(minimizer *m, const uint64_t *seqs, size_t n)
{
    uint64_t first = seqs[0], last = seqs[n - 1];
    if (m->repeated[first] && check_engine_reusable(m->live)) {
        /* pass 0b: nothing changes (the reference, if ahead of the
         * repeat, is the same run; if behind, it skips the removal) */
        m->remove[first] = m->trial[first] = true;
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        m->trial[seqs[i]] = true;
    /* The window starts at the live position when the live run is
     * quiescent there, else at the snapshot (and replays up to it). */
    const check_engine *base = m->snap;
    if (check_engine_reusable(m->live)) {
        if (first - m->pruned >= 32) {
            check_engine_prune(m->live);
            m->pruned = first;
        }
        if (first - check_engine_fed(m->snap) >= m->every &&
            check_engine_assign(m->snap, m->live, NULL, NULL, 0) != 0)
            return -1;
        base = m->live;
    }
    roots_clear(&m->touched);
    if (prepare(m, &m->try, base, m->trial) != 0)
        return -1;
    bool ahead = ahead_usable(m, base, first);
    if (!ahead)
        m->ahead = false;       /* a fresh reference, if one is needed */
    else if (check_engine_quiescent(m->ref.e))
        check_engine_prune(m->ref.e);
    bool fresh = true, converged = false, ref_ready = false;
    uint32_t hint = 0;          /* a queue whose clocks differed */
    uint64_t next_full = 0, gap = 1;
    bool alone = false;         /* the reference was given up */
    uint64_t from = check_engine_fed(base);
    for (uint64_t i = from; i < m->t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(m->t, i, &s);
        size_t before = m->try.f.n;
        if (feed(m, &m->try, &s) != 0)
            return -1;
        if (is_new(m, &m->try.f, before)) {
            fresh = false;
            break;
        }
        if (alone || i < last + MEET_AFTER)
            continue;
        if (i - last > ABANDON) {
            /* a removal whose effect does not wash out: the trial runs on
             * alone to the end, as it would if the windows never met */
            alone = true;
            continue;
        }
        if (ref_ready && feed(m, &m->ref, &s) != 0)
            return -1;
        if (!ref_ready) {
            if (ahead) {
                /* the reference left ahead: compare once the trial is
                 * there (one that is not quite there yet catches up) */
                if (check_engine_fed(m->ref.e) > i + 1)
                    continue;
                for (uint64_t k = check_engine_fed(m->ref.e); k <= i; k++) {
                    trace_stmt x;
                    trace_stmt_at(m->t, k, &x);
                    if (feed(m, &m->ref, &x) != 0)
                        return -1;
                }
            } else {
                if (!check_engine_quiescent(m->try.e))
                    continue;
                /* the reference catches up */
                if (prepare(m, &m->ref, base, m->remove) != 0)
                    return -1;
                m->ahead = true;
                for (uint64_t k = from; k <= i; k++) {
                    trace_stmt x;
                    trace_stmt_at(m->t, k, &x);
                    if (feed(m, &m->ref, &x) != 0)
                        return -1;
                }
            }
            ref_ready = true;
        }
        /* The clocks after every statement (cheap; a queue with something
         * pending is unequal); the records, flags and roots only when the
         * clocks agree, and, while those keep differing (read sets that
         * the removal left apart, in a large arena), at growing intervals. */
        if (!check_engine_clocks_alike(m->try.e, m->ref.e, &m->is.reach, &hint) ||
            i < next_full)
            continue;
        /* both forget the same records and flags (a reference left ahead
         * was pruned elsewhere than the live run the trial copies) */
        check_engine_prune(m->try.e);
        check_engine_prune(m->ref.e);
        if (check_engine_alike(m->try.e, m->ref.e, m->touched.r, m->touched.n, &m->is.reach,
                               &hint)) {
            /* the rest of both runs is the same */
            converged = true;
            break;
        }
        next_full = i + gap;
        gap = gap < 256 ? gap * 2 : gap;
    }
    if (fresh && !converged) {
        size_t before = m->try.f.n;
        if (check_engine_finish(m->try.e, m->ignore_hangs) != 0 ||
            drain_report(m, m->try.rep, &m->try.f, m->t->n_stmts) != 0)
            return -1;
        fresh = !is_new(m, &m->try.f, before);
    }
    if (!fresh) {
        /* the reference, where it stands, is still the accepted trace's run */
        for (size_t i = 0; i < n; i++)
            m->trial[seqs[i]] = false;
        return 0;
    }
    /* Kept: from the candidate to where the windows met (or to the end),
     * the trial's findings are the accepted trace's now. */
    if (accept_window(m, &m->try.f, first,
                      converged ? check_engine_fed(m->try.e) : UINT64_MAX) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        m->remove[seqs[i]] = true;
    /* The trial's run is the accepted trace's now: it becomes the reference
     * (a trial that ran to the end is finished, of no use). */
    m->ahead = converged;
    if (converged) {
        window w = m->ref;
        m->ref = m->try;
        m->try = w;
        check_engine_set_remove(m->ref.e, m->remove);
    }
    return 1;
}

typedef struct cand {
    uint64_t first;             /* sort key: first seq */
    uint64_t *seqs;
    size_t n, cap;
} cand;

static int cand_add(cand *c, uint64_t seq)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 2;
        uint64_t *p = realloc(c->seqs, cap * sizeof *p);
        if (!p)
            return -1;
        c->seqs = p;
        c->cap = cap;
    }
    c->seqs[c->n++] = seq;
    return 0;
}

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* Candidates in submission order: single statements and barrier generations. */
static int candidates(const trace *t, cand **out, size_t *n_out)
{
    cand *c = NULL;
    size_t n = 0, cap = 0;
    trace_u64map arrivals = { 0 }, groups = { 0 };
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        bool single = s.kind == TRACE_WAIT || s.kind == TRACE_SYNC || s.kind == TRACE_AWAIT;
        size_t at = n;
        if (s.kind == TRACE_BARRIER) {
            uint64_t *k = trace_u64map_put(&arrivals, ((uint64_t)s.object << 32) | s.queue, 0);
            if (!k)
                goto fail;
            ++*k;
            uint64_t *g = trace_u64map_put(&groups, ((uint64_t)s.object << 32) ^ (*k * 0x9E3779B97F4A7C15ULL),
                                        UINT64_MAX);
            if (!g)
                goto fail;
            if (*g != UINT64_MAX) {
                if (cand_add(&c[*g], i) != 0)
                    goto fail;
                continue;
            }
            *g = n;
        } else if (!single)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            cand *p = realloc(c, nc * sizeof *p);
            if (!p)
                goto fail;
            c = p;
            cap = nc;
        }
        c[at] = (cand){ i, NULL, 0, 0 };
        n++;
        if (cand_add(&c[at], i) != 0)
            goto fail;
    }
    trace_u64map_free(&arrivals);
    trace_u64map_free(&groups);
    if (n) /* c is NULL when the trace has no candidate */
        qsort(c, n, sizeof *c, cmp_cand);
    *out = c;
    *n_out = n;
    return 0;
fail:
    for (size_t i = 0; i < n; i++)
        free(c[i].seqs);
    free(c);
    trace_u64map_free(&arrivals);
    trace_u64map_free(&groups);
    return -1;
}

int check_minimize(trace *t, const check_options *opt, check_min_result *out, trace_error *err)
{
    memset(out, 0, sizeof *out);
    minimizer m = { 0 };
    m.ignore_hangs = opt ? opt->ignore_hangs : false;
    m.every = opt && opt->checkpoint_every ? opt->checkpoint_every : SNAP_EVERY;
    m.remove = calloc(t->n_stmts ? t->n_stmts : 1, sizeof *m.remove);
    m.trial = calloc(t->n_stmts ? t->n_stmts : 1, sizeof *m.trial);
    m.repeated = calloc(t->n_stmts ? t->n_stmts : 1, sizeof *m.repeated);
    cand *c = NULL;
    size_t n_c = 0;
    int rc = -1;
    if (check_islands_new(&m.is, t) != 0)
        goto out;
    m.t = &m.is.view;
    if (!m.remove || !m.trial || !m.repeated || check_flag_totals(t, &m.flag_totals) != 0 ||
        lifetimes(&m) != 0 || repeated_waits(&m) != 0 || baseline(&m) != 0 || candidates(t, &c, &n_c) != 0)
        goto out;
    out->n_findings = m.n_findings;
    bool allowed = m.n_findings == 0 || (opt && opt->allow_findings);
    if (allowed && n_c) {
        size_t nb = m.t->n_buffers ? m.t->n_buffers : 1;
        m.live_rep = check_report_new(m.t, 0);
        m.ref.rep = check_report_new(m.t, 0);
        m.try.rep = check_report_new(m.t, 0);
        m.ref.moved.stamp = calloc(nb, sizeof(uint32_t));
        m.try.moved.stamp = calloc(nb, sizeof(uint32_t));
        m.touched.stamp = calloc(nb, sizeof(uint32_t));
        m.ref.moved.epoch = m.try.moved.epoch = m.touched.epoch = 1;
        m.ref.moved.n_stamp = m.try.moved.n_stamp = m.touched.n_stamp = (uint32_t)nb;
        m.live = m.live_rep ? engine_new(&m, m.live_rep, m.remove) : NULL;
        m.snap = m.live ? check_engine_clone(m.live, NULL) : NULL;
        if (!m.ref.rep || !m.try.rep || !m.snap || !m.ref.moved.stamp || !m.try.moved.stamp ||
            !m.touched.stamp)
            goto out;
    }
    for (size_t i = 0; allowed && i < n_c; i++) {
        if (live_to(&m, c[i].first) != 0 || try_removal(&m, c[i].seqs, c[i].n) < 0)
            goto out;
        if (opt && opt->progress)
            opt->progress(opt->progress_ctx, i + 1, n_c);
    }
    out->n_stmts = t->n_stmts;
    out->n_candidates = n_c;
    out->replayed = m.replayed;
    out->keep = malloc((t->n_stmts ? t->n_stmts : 1) * sizeof *out->keep);
    if (!out->keep)
        goto out;
    size_t n_rm = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        out->keep[i] = !m.remove[i];
        n_rm += m.remove[i];
    }
    out->removed = calloc(n_rm ? n_rm : 1, sizeof *out->removed);
    if (!out->removed)
        goto out;
    /* group: the first statement of the candidate it belonged to */
    for (size_t i = 0; i < n_c; i++) {
        if (!m.remove[c[i].seqs[0]])
            continue;
        for (size_t k = 0; k < c[i].n; k++) {
            trace_stmt s;
            trace_stmt_at(t, c[i].seqs[k], &s);
            out->removed[out->n_removed++] =
                (check_removal){ s.seq, s.queue, s.line, s.kind, c[i].first };
        }
    }
    rc = 0;
out:
    if (rc != 0) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory while minimising");
        check_min_result_free(out);
    }
    for (size_t i = 0; i < n_c; i++)
        free(c[i].seqs);
    free(c);
    check_engine_free(m.live);
    check_engine_free(m.snap);
    window *w[2] = { &m.ref, &m.try };
    for (int k = 0; k < 2; k++) {
        check_engine_free(w[k]->e);
        check_report_free(w[k]->rep);
        free(w[k]->f.h);
        free(w[k]->moved.r);
        free(w[k]->moved.stamp);
    }
    free(m.touched.r);
    free(m.touched.stamp);
    free(m.found.h);
    check_report_free(m.live_rep);
    trace_u64map_free(&m.fset);
    trace_u64map_free(&m.flag_totals);
    trace_u64map_free(&m.record_last);
    trace_u64map_free(&m.flag_last);
    free(m.remove);
    free(m.trial);
    free(m.repeated);
    check_islands_free(&m.is);
    return rc;
}

void check_min_result_free(check_min_result *res)
{
    free(res->removed);
    free(res->keep);
    memset(res, 0, sizeof *res);
}

/* ------------------------------------------------------------------ */
/* Sync patterns per host iteration: traces/pattern.c, before and after. */

void check_print_sync_patterns(FILE *out, const trace *t, const bool *keep)
{
    trace_pattern *p = trace_pattern_new();
    if (!p)
        return;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (trace_pattern_feed(p, t, &s, !keep || keep[i]) != 0)
            break;
    }
    trace_pattern_print(out, t, p, true);
    trace_pattern_free(p);
}
