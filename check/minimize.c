/*
 * minimize.c -- the greedy sync minimiser, made incremental with engine
 * checkpoints.
 *
 * Greedy: every wait, sync and await statement, and every barrier
 * generation (all its participants at once), is a candidate, tried in
 * submission order. A candidate is removed when the trace without it (and
 * without the removals kept so far) has no finding that the trace with it
 * lacked. A removed statement keeps its place in its queue (so epochs and
 * barrier generation numbers do not shift) but synchronises nothing.
 *
 * Incremental: re-checking the whole trace per candidate costs
 * O(candidates x statements). Instead one baseline run saves checkpoints:
 * clones of the engine at quiescent points (nothing pending anywhere),
 * every CKPT_EVERY statements or so. Clones share clocks and shadow
 * segments copy-on-write, so a checkpoint costs O(queues + buffers). A
 * candidate at seq p is replayed from the last checkpoint at or before p
 * with the candidate removed. After p, at each later checkpoint position,
 * the replay compares its state with the baseline's: the queues' clocks and
 * own counters, and the events, flags and root buffers that the window
 * touched (dirty tracking). When they are equal, the rest of the run would
 * be identical, so the replay stops: only the window can hold new findings.
 * A replay also stops at the first new finding. A removal rarely changes
 * the clocks beyond the next covering sync, so each candidate costs about
 * the distance between checkpoints plus the distance to that sync.
 *
 * When a removal is kept, the checkpoints inside its window are replaced by
 * the replay's own (taken at the same positions), and the baseline findings
 * of the window by the replay's.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define CKPT_EVERY 256 /* default statements between checkpoints */

typedef struct ckpt {
    uint64_t pos;               /* statements fed */
    check_engine *e;
} ckpt;

typedef struct fitem {
    uint64_t hash;
    uint64_t pos;               /* seq of the statement being fed when found */
} fitem;

typedef struct minimizer {
    trace *t;
    bool ignore_hangs;
    bool *remove;               /* per seq */
    ckpt *ck;
    size_t n_ck, cap_ck;
    fitem *fi;                  /* baseline findings */
    size_t n_fi, cap_fi;
    trace_u64map fset;             /* hash -> count */
    trace_u64map flag_totals;      /* flag -> signals: exact rule 6 from the start */
    trace_u64map record_last;      /* record seq -> last wait bound to it */
    trace_u64map flag_last;        /* flag -> last signal or await */
    uint64_t replayed;
    uint32_t every;             /* statements between checkpoints */
} minimizer;

static uint64_t fkey_hash(const trace_finding *f)
{
    check_fkey k = check_finding_key(f);
    uint64_t h = k.a * 0x9E3779B97F4A7C15ULL;
    h ^= (k.b + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    h = (h << 31) | (h >> 33);
    h ^= (k.c + 0x165667B19E3779F9ULL) * 0x27D4EB2F165667C5ULL;
    return h;
}

static int fi_push(fitem **v, size_t *n, size_t *cap, fitem x)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        fitem *p = realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static int ck_push(ckpt **v, size_t *n, size_t *cap, ckpt x)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        ckpt *p = realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

/* Findings rep->f[from..] found while feeding statement pos. */
static int collect(fitem **v, size_t *n, size_t *cap, check_report *rep, size_t from, uint64_t pos)
{
    for (size_t i = from; i < rep->n; i++)
        if (fi_push(v, n, cap, (fitem){ fkey_hash(&rep->f[i]), pos }) != 0)
            return -1;
    return 0;
}

static bool is_new(const minimizer *m, const check_report *rep, size_t from)
{
    for (size_t i = from; i < rep->n; i++) {
        uint64_t *c = trace_u64map_get(&m->fset, fkey_hash(&rep->f[i]));
        if (!c || !*c)
            return true;
    }
    return false;
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

/* The baseline run: findings and checkpoints. */
static int baseline(minimizer *m)
{
    check_report *rep = check_report_new(m->t, 0);
    check_engine *e = rep ? check_engine_new(m->t, rep, m->remove) : NULL;
    if (!e)
        goto fail;
    check_engine_set_flag_totals(e, &m->flag_totals);
    check_engine_set_lifetimes(e, &m->record_last, &m->flag_last);
    uint64_t last = 0;
    check_engine *c0 = check_engine_clone(e, NULL);
    if (!c0 || ck_push(&m->ck, &m->n_ck, &m->cap_ck, (ckpt){ 0, c0 }) != 0) {
        check_engine_free(c0);
        goto fail;
    }
    for (uint64_t i = 0; i < m->t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(m->t, i, &s);
        size_t before = rep->n;
        if (check_engine_feed(e, &s) != 0 ||
            collect(&m->fi, &m->n_fi, &m->cap_fi, rep, before, i) != 0)
            goto fail;
        if (i + 1 - last >= m->every && check_engine_quiescent(e)) {
            check_engine_prune(e);
            check_engine *c = check_engine_clone(e, NULL);
            if (!c || ck_push(&m->ck, &m->n_ck, &m->cap_ck, (ckpt){ i + 1, c }) != 0) {
                check_engine_free(c);
                goto fail;
            }
            last = i + 1;
        }
    }
    size_t before = rep->n;
    if (check_engine_finish(e, m->ignore_hangs) != 0 ||
        collect(&m->fi, &m->n_fi, &m->cap_fi, rep, before, m->t->n_stmts) != 0)
        goto fail;
    for (size_t i = 0; i < m->n_fi; i++) {
        uint64_t *c = trace_u64map_put(&m->fset, m->fi[i].hash, 0);
        if (!c)
            goto fail;
        ++*c;
    }
    check_engine_free(e);
    check_report_free(rep);
    return 0;
fail:
    check_engine_free(e);
    check_report_free(rep);
    return -1;
}

/* Index of the last checkpoint at or before pos. */
static size_t ck_at_or_before(const minimizer *m, uint64_t pos)
{
    size_t lo = 0, hi = m->n_ck;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (m->ck[mid].pos <= pos)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Tries removing the statements seqs[0..n) (sorted). Returns 1 when kept,
 * 0 when not, -1 on OOM. */
static int try_removal(minimizer *m, const uint64_t *seqs, size_t n)
{
    uint64_t first = seqs[0], last = seqs[n - 1];
    for (size_t i = 0; i < n; i++)
        m->remove[seqs[i]] = true;
    size_t ci = ck_at_or_before(m, first);
    check_report *rep = check_report_new(m->t, 0);
    check_engine *e = rep ? check_engine_clone(m->ck[ci].e, rep) : NULL;
    ckpt *nck = NULL;
    size_t n_nck = 0, cap_nck = 0;
    fitem *nfi = NULL;
    size_t n_nfi = 0, cap_nfi = 0;
    int verdict = -1;
    size_t cj = m->n_ck;            /* checkpoint where the replay converged */
    if (!e)
        goto out;
    check_engine_set_remove(e, m->remove);
    check_engine_track(e, true);
    size_t next = ci + 1;
    bool fresh = true;
    for (uint64_t i = m->ck[ci].pos; i < m->t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(m->t, i, &s);
        size_t before = rep->n;
        m->replayed++;
        if (check_engine_feed(e, &s) != 0 || collect(&nfi, &n_nfi, &cap_nfi, rep, before, i) != 0)
            goto out;
        if (is_new(m, rep, before)) {
            fresh = false;
            break;
        }
        while (next < m->n_ck && m->ck[next].pos < i + 1)
            next++;
        if (next < m->n_ck && m->ck[next].pos == i + 1 && check_engine_quiescent(e)) {
            check_engine_prune(e);
            if (i >= last && check_engine_same(e, m->ck[next].e)) {
                cj = next;
                break;
            }
            check_engine *c = check_engine_clone(e, NULL);
            if (!c || ck_push(&nck, &n_nck, &cap_nck, (ckpt){ i + 1, c }) != 0) {
                check_engine_free(c);
                goto out;
            }
        }
    }
    if (fresh && cj == m->n_ck) {
        size_t before = rep->n;
        if (check_engine_finish(e, m->ignore_hangs) != 0 ||
            collect(&nfi, &n_nfi, &cap_nfi, rep, before, m->t->n_stmts) != 0)
            goto out;
        fresh = !is_new(m, rep, before);
    }
    if (!fresh) {
        verdict = 0;
        goto out;
    }
    /* Kept: the window [ck[ci].pos, end) takes the replay's checkpoints and
     * findings. */
    uint64_t lo = m->ck[ci].pos, hi = cj < m->n_ck ? m->ck[cj].pos : UINT64_MAX;
    size_t w = 0;
    for (size_t i = 0; i < m->n_fi; i++) {
        if (m->fi[i].pos >= lo && m->fi[i].pos < hi) {
            uint64_t *c = trace_u64map_get(&m->fset, m->fi[i].hash);
            if (c && *c)
                --*c;
        } else
            m->fi[w++] = m->fi[i];
    }
    m->n_fi = w;
    for (size_t i = 0; i < n_nfi; i++) {
        uint64_t *c = trace_u64map_put(&m->fset, nfi[i].hash, 0);
        if (!c || fi_push(&m->fi, &m->n_fi, &m->cap_fi, nfi[i]) != 0)
            goto out;
        ++*c;
    }
    /* checkpoints: keep [0, ci], the replay's, then [cj, end) */
    size_t keep_tail = cj < m->n_ck ? m->n_ck - cj : 0;
    for (size_t i = ci + 1; i < cj && i < m->n_ck; i++)
        check_engine_free(m->ck[i].e);
    ckpt *merged = malloc((ci + 1 + n_nck + keep_tail + 1) * sizeof *merged);
    if (!merged)
        goto out;
    memcpy(merged, m->ck, (ci + 1) * sizeof *merged);
    if (n_nck)
        memcpy(merged + ci + 1, nck, n_nck * sizeof *merged);
    if (keep_tail)
        memcpy(merged + ci + 1 + n_nck, m->ck + cj, keep_tail * sizeof *merged);
    free(m->ck);
    m->ck = merged;
    m->n_ck = ci + 1 + n_nck + keep_tail;
    m->cap_ck = m->n_ck + 1;
    n_nck = 0;
    verdict = 1;
out:
    for (size_t i = 0; i < n_nck; i++)
        check_engine_free(nck[i].e);
    free(nck);
    free(nfi);
    check_engine_free(e);
    check_report_free(rep);
    if (verdict != 1)
        for (size_t i = 0; i < n; i++)
            m->remove[seqs[i]] = false;
    return verdict;
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
    m.t = t;
    m.ignore_hangs = opt ? opt->ignore_hangs : false;
    m.every = opt && opt->checkpoint_every ? opt->checkpoint_every : CKPT_EVERY;
    m.remove = calloc(t->n_stmts ? t->n_stmts : 1, sizeof *m.remove);
    cand *c = NULL;
    size_t n_c = 0;
    int rc = -1;
    if (!m.remove || check_flag_totals(t, &m.flag_totals) != 0 || lifetimes(&m) != 0 ||
        baseline(&m) != 0 ||
        candidates(t, &c, &n_c) != 0)
        goto out;
    out->n_findings = m.n_fi;
    bool allowed = m.n_fi == 0 || (opt && opt->allow_findings);
    for (size_t i = 0; allowed && i < n_c; i++)
        if (try_removal(&m, c[i].seqs, c[i].n) < 0)
            goto out;
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
    for (size_t i = 0; i < m.n_ck; i++)
        check_engine_free(m.ck[i].e);
    free(m.ck);
    free(m.fi);
    trace_u64map_free(&m.fset);
    trace_u64map_free(&m.flag_totals);
    trace_u64map_free(&m.record_last);
    trace_u64map_free(&m.flag_last);
    free(m.remove);
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

/* ------------------------------------------------------------------ */
/* The minimised trace.                                                */

trace *check_trace_filter(const trace *t, const bool *keep)
{
    trace *o = trace_new();
    if (!o)
        return NULL;
    for (uint32_t i = 0; i < t->n_strs; i++)
        if (trace_intern(o, t->strs[i], t->str_len[i]) != i)
            goto fail;
    for (uint32_t q = 0; q < t->n_queues; q++)
        if (trace_add_queue(o, t->queues[q].name, t->queues[q].kind, t->queues[q].device) != q)
            goto fail;
    for (uint32_t b = 0; b < t->n_buffers; b++) {
        const trace_buffer *x = &t->buffers[b];
        uint32_t got = x->parent == TRACE_NONE
                           ? trace_add_root_buffer(o, x->name, x->size, x->loc, x->device, x->pinned)
                           : trace_add_view(o, x->name, x->parent, x->offset, x->size);
        if (got != b)
            goto fail;
    }
    for (uint32_t i = 0; i < t->n_expects; i++) {
        const trace_expect *x = &t->expects[i];
        if (x->kind == TRACE_FINDING_REDUNDANT_SYNC)
            continue;
        if (trace_add_expect(o, x->kind, x->line, x->kv, x->n_kv) != 0)
            goto fail;
    }
    for (uint32_t i = 0; i < t->n_meta; i++)
        if (trace_set_meta(o, trace_str(t, t->meta[i].key), trace_str(t, t->meta[i].value)) != 0)
            goto fail;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        if (keep && !keep[i])
            continue;
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (trace_append(o, &s) != 0)
            goto fail;
    }
    return o;
fail:
    trace_free(o);
    return NULL;
}
