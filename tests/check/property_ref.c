/*
 * property_ref.c -- the brute-force reference of the property test
 * (property_gen.h): the checker's verdict on a small trace, written from the
 * spec's rules the slow, obvious way.
 *
 * An explicit happens-before graph: one node per statement and one per
 * barrier generation (between its arrivals and its departures); edges for
 * queue order, submission, event binding, host syncs, messages, flags --
 * every signal an await waits for (ruling 1) before its successors -- and
 * value semaphores -- the first set that reaches the awaited value. Which
 * statements can ever run is a fixpoint over that graph; a flag await's
 * waited signals are decided as ruling 1 reads (docs/semantics.md).
 * Reachability by breadth-first search then gives races (conflicting
 * accesses unordered both ways) and uses after free (ruling 2).
 */
#include <stdio.h>
#include <string.h>

#include "property_gen.h"

static bool conflict(const prop_stmt *a, const prop_stmt *b)
{
    for (int i = 0; i < a->n_acc; i++)
        for (int j = 0; j < b->n_acc; j++) {
            const prop_acc *x = &a->acc[i], *y = &b->acc[j];
            /* overlapping bytes: a zero-length range has none */
            if (x->buf == y->buf && x->lo < x->hi && y->lo < y->hi && x->lo < y->hi &&
                y->lo < x->hi &&
                ((x->mode & TRACE_W) || (y->mode & TRACE_W)))
                return true;
        }
    return false;
}

/* The set that releases semaphore await i: the first of its semaphore
 * whose value reaches the awaited one; -1 when none does. */
static int sem_release(const prop_trace *g, int i)
{
    for (int j = 0; j < g->n; j++)
        if (g->s[j].kind == TRACE_SIGNAL && g->s[j].sem && g->s[j].obj == g->s[i].obj &&
            g->s[j].val >= g->s[i].val)
            return j;
    return -1;
}

/* Marks in seen[] what node `from` reaches in the graph adj/deg. */
static void bfs(int (*adj)[PROP_MAXS + 64], const int *deg, int from, bool *seen)
{
    static int queue[PROP_MAXS + 64];
    int head = 0, tail = 0;
    memset(seen, 0, (PROP_MAXS + 64) * sizeof *seen);
    queue[tail++] = from;
    seen[from] = true;
    while (head < tail) {
        int u = queue[head++];
        for (int k = 0; k < deg[u]; k++) {
            int v = adj[u][k];
            if (!seen[v]) {
                seen[v] = true;
                queue[tail++] = v;
            }
        }
    }
}

/* Signal (or set) j could release await x: a signal of its flag, or a set
 * of its semaphore reaching its value (above 0). */
static bool ref_releases(const prop_trace *g, int j, int x)
{
    const prop_stmt *y = &g->s[j], *w = &g->s[x];
    return y->kind == TRACE_SIGNAL && y->sem == w->sem && y->obj == w->obj &&
           (!w->sem || (w->val > 0 && y->val >= w->val));
}

/* Ruling 1 as docs/semantics.md reads it: the statements that can only run
 * after pending await a (out), given what ran and the awaits decided so
 * far. What a's fixed edges reach, and, to a least fixpoint, an await x
 * that has not run: decided, when it waits for a signal in the set; not
 * decided, when every signal (set) that could release it and does not
 * follow it by fixed edges is in the set, and there is one (one that ran
 * is never in it) -- then what follows x too. */
static void ref_after(const prop_trace *g, int a, bool (*fixed)[PROP_MAXS + 64], const bool *ran,
                      const bool *decided, bool (*waited)[PROP_MAXS], bool *out)
{
    int n = g->n;
    memcpy(out, fixed[a], (PROP_MAXS + 64) * sizeof *out);
    for (bool grew = true; grew;) {
        grew = false;
        for (int x = 0; x < n; x++) {
            if (g->s[x].kind != TRACE_AWAIT || out[x] || ran[x])
                continue;
            bool in = false;
            if (decided[x]) {
                for (int j = 0; j < n && !in; j++)
                    in = waited[x][j] && out[j];
            } else {
                int need = 0;
                bool all = true;
                for (int j = 0; j < n; j++)
                    if (ref_releases(g, j, x) && !fixed[x][j]) {
                        need++;
                        all = all && out[j] && !ran[j];
                    }
                in = need > 0 && all;
            }
            if (in) {
                for (int v = 0; v < PROP_MAXS + 64; v++)
                    out[v] |= fixed[x][v];
                grew = true;
            }
        }
    }
}

/* The signals flag await a waits for: those of its flag not ordered after
 * it (w[j]). */
static void ref_waited(const prop_trace *g, int a, bool (*fixed)[PROP_MAXS + 64], const bool *ran,
                       const bool *decided, bool (*waited)[PROP_MAXS], bool *w)
{
    static bool after[PROP_MAXS + 64];
    ref_after(g, a, fixed, ran, decided, waited, after);
    for (int j = 0; j < g->n; j++)
        w[j] = ref_releases(g, j, a) && !after[j];
}

void prop_reference(const prop_trace *g, prop_verdict *r)
{
    int n = g->n, nq = g->n_hosts + g->n_streams;
    int pred[PROP_MAXS], sub[PROP_MAXS], bind[PROP_MAXS], gen[PROP_MAXS];
    bool extra[PROP_MAXS];       /* an arrival beyond its generation's count */
    static int members[PROP_MAXB][PROP_MAXS];
    memset(members, 0, sizeof members);
    r->mismatch = false;
    int sync_t[PROP_MAXS][PROP_MAXQ];
    int last[PROP_MAXQ];
    int arrivals[PROP_MAXB][PROP_MAXQ];
    memset(arrivals, 0, sizeof arrivals);
    for (int q = 0; q < nq; q++)
        last[q] = -1;
    int last_rec[64];
    for (int e = 0; e < 64; e++)
        last_rec[e] = -1;
    /* rule 9: the k-th send and the k-th recv of a channel (source rank,
     * destination rank, tag) pair up */
    int match[PROP_MAXS];
    for (int i = 0; i < n; i++) {
        const prop_stmt *s = &g->s[i];
        match[i] = -1;
        if (s->kind != TRACE_SEND && s->kind != TRACE_RECV)
            continue;
        int src = s->kind == TRACE_SEND ? g->rank[s->q] : s->peer;
        int dst = s->kind == TRACE_SEND ? s->peer : g->rank[s->q];
        int k = 0;
        for (int j = 0; j < i; j++)
            k += g->s[j].kind == s->kind && g->s[j].obj == s->obj &&
                 (s->kind == TRACE_SEND ? g->s[j].peer == dst && g->rank[g->s[j].q] == src
                                        : g->s[j].peer == src && g->rank[g->s[j].q] == dst);
        trace_kind other = s->kind == TRACE_SEND ? TRACE_RECV : TRACE_SEND;
        for (int j = 0, m = 0; j < n; j++) {
            const prop_stmt *o = &g->s[j];
            if (o->kind != other || o->obj != s->obj)
                continue;
            int osrc = other == TRACE_SEND ? g->rank[o->q] : o->peer;
            int odst = other == TRACE_SEND ? o->peer : g->rank[o->q];
            if (osrc == src && odst == dst && m++ == k) {
                match[i] = j;
                break;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const prop_stmt *s = &g->s[i];
        pred[i] = last[s->q];
        sub[i] = prop_is_stream(g, s->q) ? last[s->by] : -1;
        bind[i] = s->kind == TRACE_WAIT ? last_rec[s->obj] : -1;
        gen[i] = -1;
        extra[i] = false;
        for (int q = 0; q < PROP_MAXQ; q++)
            sync_t[i][q] = -1;
        if (s->kind == TRACE_SYNC)
            for (int q = g->n_hosts; q < nq; q++)
                if ((s->obj == -1 && (g->n_ranks < 2 || g->rank[q] == g->rank[s->q])) ||
                    s->obj == q || s->obj == -2 - g->dev[q])
                    sync_t[i][q] = last[q];
        if (s->kind == TRACE_BARRIER) {
            gen[i] = ++arrivals[s->obj][s->q];
            /* a generation is its first count arrivals in the file */
            if (++members[s->obj][gen[i]] > s->count) {
                extra[i] = true;
                r->mismatch = true;
            }
        }
        if (s->kind == TRACE_RECORD)
            last_rec[s->obj] = i;
        last[s->q] = i;
    }
    /* the happens-before graph: statements, then one node per generation;
     * first the edges that do not depend on how flags are released */
    static int adj[PROP_MAXS + 64][PROP_MAXS + 64];
    static int deg[PROP_MAXS + 64];
    static int gnode[PROP_MAXB][PROP_MAXS];
    memset(gnode, -1, sizeof gnode);
    int nn = n;
    memset(deg, 0, sizeof deg);
#define EDGE(a, b) (adj[a][deg[a]++] = (b))
    for (int i = 0; i < n; i++) {
        const prop_stmt *s = &g->s[i];
        if (pred[i] >= 0)
            EDGE(pred[i], i);
        if (sub[i] >= 0)
            EDGE(sub[i], i);
        if (bind[i] >= 0)
            EDGE(bind[i], i);
        if (s->kind == TRACE_RECV && match[i] >= 0)
            EDGE(match[i], i);
        for (int q = 0; q < PROP_MAXQ; q++)
            if (sync_t[i][q] >= 0)
                EDGE(sync_t[i][q], i);
        if (s->kind == TRACE_BARRIER && !extra[i]) {
            int *v = &gnode[s->obj][gen[i]];
            if (*v < 0)
                *v = nn++;
            if (pred[i] >= 0)
                EDGE(pred[i], *v);
            if (sub[i] >= 0)
                EDGE(sub[i], *v);
            EDGE(*v, i);
        }
    }
    /* ruling 1: what follows each await through those edges (its fixed
     * signals are never what releases it) */
    static bool fixed[PROP_MAXS][PROP_MAXS + 64];
    for (int i = 0; i < n; i++)
        if (g->s[i].kind == TRACE_AWAIT)
            bfs(adj, deg, i, fixed[i]);
    /* which statements can ever run; a flag await's waited signals: those
     * outside its ordered-after set when it is released or decided */
    memset(r->ran, 0, sizeof r->ran);
    static bool decided[PROP_MAXS], waited[PROP_MAXS][PROP_MAXS];
    memset(decided, 0, sizeof decided);
    for (;;) {
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < n; i++) {
            const prop_stmt *s = &g->s[i];
            if (r->ran[i] || (pred[i] >= 0 && !r->ran[pred[i]]) || (sub[i] >= 0 && !r->ran[sub[i]]))
                continue;
            bool ok = true;
            if (s->kind == TRACE_WAIT && bind[i] >= 0)
                ok = r->ran[bind[i]];
            if (s->kind == TRACE_RECV)
                ok = match[i] >= 0 && r->ran[match[i]];
            if (s->kind == TRACE_SYNC)
                for (int q = 0; q < PROP_MAXQ; q++)
                    if (sync_t[i][q] >= 0 && !r->ran[sync_t[i][q]])
                        ok = false;
            if (s->kind == TRACE_AWAIT && s->sem) {
                /* rule 6b: the first set that reaches the value (one setting
                 * queue, growing values: the run order is the file order) */
                int j = sem_release(g, i);
                ok = j >= 0 && r->ran[j];
            } else if (s->kind == TRACE_AWAIT) {
                /* rule 6, ruling 1: every signal of the flag that is not
                 * ordered after the await, and at least one such signal */
                if (!decided[i])
                    ref_waited(g, i, fixed, r->ran, decided, waited, waited[i]);
                int signals = 0;
                for (int j = 0; j < n; j++)
                    if (waited[i][j]) {
                        signals++;
                        if (!r->ran[j])
                            ok = false;
                    }
                ok = ok && signals > 0;
                if (ok)
                    decided[i] = true;
            }
            if (s->kind == TRACE_BARRIER && !extra[i]) {
                /* members of the generation that have arrived */
                int ready = 0;
                for (int j = 0; j < n; j++)
                    if (g->s[j].kind == TRACE_BARRIER && g->s[j].obj == s->obj &&
                        gen[j] == gen[i] && !extra[j] && (pred[j] < 0 || r->ran[pred[j]]) &&
                        (sub[j] < 0 || r->ran[sub[j]]))
                        ready++;
                ok = ready >= s->count;
            }
            if (ok) {
                r->ran[i] = true;
                changed = true;
            }
        }
    }
    /* nothing more runs: decide the flag awaits still open at the head of
     * their queues, in file order (each seeing those decided before it) */
    bool decide = false;
    for (int i = 0; i < n; i++) {
        if (g->s[i].kind != TRACE_AWAIT || g->s[i].sem || decided[i] || r->ran[i] ||
            (pred[i] >= 0 && !r->ran[pred[i]]) || (sub[i] >= 0 && !r->ran[sub[i]]))
            continue;
        ref_waited(g, i, fixed, r->ran, decided, waited, waited[i]);
        decided[i] = decide = true;
    }
    if (!decide)
        break;
    }
    r->hang = false;
    for (int i = 0; i < n; i++)
        if (!r->ran[i])
            r->hang = true;
    /* the flags' and semaphores' edges */
    for (int i = 0; i < n; i++) {
        const prop_stmt *s = &g->s[i];
        if (s->kind == TRACE_AWAIT && s->sem) {
            int j = sem_release(g, i);
            if (j >= 0)
                EDGE(j, i);
        } else if (s->kind == TRACE_AWAIT && r->ran[i]) {
            for (int j = 0; j < n; j++)
                if (waited[i][j])
                    EDGE(j, i);
        }
    }
#undef EDGE
    static bool reach[PROP_MAXS][PROP_MAXS + 64];
    for (int i = 0; i < n; i++) {
        memset(reach[i], 0, sizeof reach[i]);
        bool set = g->s[i].kind == TRACE_SIGNAL && g->s[i].sem;
        if ((!g->s[i].n_acc && !set) || !r->ran[i])
            continue;
        int queue[PROP_MAXS + 64], head = 0, tail = 0;
        queue[tail++] = i;
        reach[i][i] = true;
        while (head < tail) {
            int u = queue[head++];
            for (int k = 0; k < deg[u]; k++) {
                int v = adj[u][k];
                if (!reach[i][v]) {
                    reach[i][v] = true;
                    queue[tail++] = v;
                }
            }
        }
    }
    r->racy = false;
    r->n_unordered = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (!r->ran[i] || !r->ran[j] || !conflict(&g->s[i], &g->s[j]))
                continue;
            if (reach[i][j] || reach[j][i])
                continue;
            r->racy = true;
            if (j == n - 1)
                r->unordered_with_last[r->n_unordered++] = i;
        }
    /* the ambiguous class: the sets of a semaphore do not run one after
     * another in file order (sem_release assumes they do) */
    r->sem_unordered = false;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < j && r->ran[j]; i++)
            if (g->s[i].kind == TRACE_SIGNAL && g->s[i].sem && g->s[j].kind == TRACE_SIGNAL &&
                g->s[j].sem && g->s[i].obj == g->s[j].obj && !(r->ran[i] && reach[i][j]))
                r->sem_unordered = true;
    /* ruling 2: after some free F of a buffer it touches, and after no
     * alloc A of it with F HB A */
    for (int i = 0; i < n; i++) {
        const prop_stmt *x = &g->s[i];
        r->uaf[i] = false;
        if (!r->ran[i] || x->kind == TRACE_ALLOC)
            continue;
        for (int k = 0; k < x->n_acc && !r->uaf[i]; k++) {
            int b = x->acc[k].buf;
            if (x->acc[k].lo == x->acc[k].hi)
                continue;
            for (int f = 0; f < n && !r->uaf[i]; f++) {
                if (f == i || g->s[f].kind != TRACE_FREE || g->s[f].obj != b || !r->ran[f] ||
                    !reach[f][i])
                    continue;
                bool covered = false;
                for (int a = 0; a < n && !covered; a++)
                    covered = g->s[a].kind == TRACE_ALLOC && g->s[a].obj == b && r->ran[a] &&
                              reach[f][a] && reach[a][i];
                r->uaf[i] = !covered;
            }
        }
    }
}

