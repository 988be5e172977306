/*
 * hang.c -- when the input ends, the queues that still hold pending
 * statements can never advance: the hang. This names every blocked queue
 * and what it waits for (an event whose record cannot run, a flag, a
 * barrier or collective generation short of participants, a stream, the
 * submission by a blocked host), finds a cycle in the wait-for graph when
 * there is one (a deadlock), and proposes the fix: the statement whose move
 * breaks the cycle, or what the root causes lack.
 */
#include "engine.h"

typedef struct blocked_info {
    char *waits_for;
    bool waits_for_given;       /* owned by the finding's part now */
    const check_pend *at;       /* the statement it is stuck at (NULL: never submitted) */
    uint32_t *to;               /* queues it waits for */
    uint32_t n_to, cap_to;
} blocked_info;

static void add_edge(blocked_info *b, uint32_t q)
{
    for (uint32_t i = 0; i < b->n_to; i++)
        if (b->to[i] == q)
            return;
    if (b->n_to == b->cap_to) {
        uint32_t cap = b->cap_to ? b->cap_to * 2 : 4;
        uint32_t *p = realloc(b->to, cap * sizeof *p);
        if (!p)
            return;
        b->to = p;
        b->cap_to = cap;
    }
    b->to[b->n_to++] = q;
}

/* Queues whose pending list holds a statement of kind k on object obj
 * (signals of a flag, records of an event, arrivals at a barrier); with
 * skip_after, not one marked as following the blocked statement (a signal
 * its await does not wait for, ruling 1). */
static void edges_to_pending(const check_engine *e, blocked_info *b, uint32_t self, trace_kind k,
                             uint32_t obj, bool skip_after)
{
    for (uint32_t q = 0; q < e->n_q; q++) {
        for (const check_pend *p = e->q[q].head; p; p = p->next) {
            /* its first such statement: one that arrived already waits for
             * the same generation (a later one behind it is not the point) */
            if (!p->marker && p->s.kind == k && p->s.object == obj && !p->removed &&
                !(skip_after && p->after_mark)) {
                if (q != self && !p->arrived)
                    add_edge(b, q);
                break;
            }
        }
    }
}

/* Appends "; "+piece to *acc (both owned; piece freed). */
static void str_cat(char **acc, char *piece)
{
    if (!piece)
        return;
    if (!*acc) {
        *acc = piece;
        return;
    }
    char *n = check_strf("%s; %s", *acc, piece);
    free(piece);
    if (n) {
        free(*acc);
        *acc = n;
    }
}

static const char *qname(const check_engine *e, uint32_t q)
{
    return trace_str(e->t, e->t->queues[q].name);
}

/* What queue q, stuck at p, waits for. */
static void explain(const check_engine *e, uint32_t q, const check_pend *p, blocked_info *b)
{
    const trace *t = e->t;
    const trace_stmt *s = &p->s;
    if (p->unsubmitted) {
        b->waits_for = check_strf("submission by %s, which is blocked", qname(e, p->sub.queue));
        add_edge(b, p->sub.queue);
        return;
    }
    switch (s->kind) {
    case TRACE_WAIT: {
        const ev_node *n = p->bind;
        b->waits_for = n->line ? check_strf("event %s (recorded on %s at line %u, which has "
                                            "not run)",
                                            trace_str(t, s->object), qname(e, n->queue), n->line)
                               : check_strf("event %s (recorded on %s, which has not run)",
                                            trace_str(t, s->object), qname(e, n->queue));
        add_edge(b, n->queue);
        break;
    }
    case TRACE_SYNC: {
        char *acc = NULL;
        for (uint32_t i = 0; i < p->n_items; i++) {
            const sync_req *r = p->items[i].req;
            if (r && !r->filled) {
                char *n = acc ? check_strf("%s, %s", acc, qname(e, r->stream))
                              : check_strf("stream %s", qname(e, r->stream));
                free(acc);
                acc = n;
                add_edge(b, r->stream);
            }
        }
        b->waits_for = acc;
        break;
    }
    case TRACE_AWAIT:
        if (s->sem) {
            const uint64_t *v = trace_u64map_get(&e->flags, s->object);
            const flag_node *f = v ? (const flag_node *)(uintptr_t)*v : NULL;
            b->waits_for = check_strf("semaphore %s >= %llu (it is %llu)", trace_str(t, s->object),
                                      (unsigned long long)s->count,
                                      (unsigned long long)(f && f->n_sets ? f->values[f->n_sets - 1]
                                                                          : 0));
        } else {
            b->waits_for = check_strf("flag %s", trace_str(t, s->object));
        }
        /* report_hang marked what follows the await (after.c) */
        edges_to_pending(e, b, q, TRACE_SIGNAL, s->object, !s->sem && p->flag);
        break;
    case TRACE_RECV:
        b->waits_for = check_strf("a send from rank %u to rank %u (tag %llu on %s), which %s",
                                  s->peer, s->rank, (unsigned long long)s->count,
                                  trace_str(t, s->object),
                                  p->flag && p->flag->fed ? "has not run" : "no rank posts");
        break;
    case TRACE_BARRIER:
    case TRACE_COLLECTIVE: {
        const gen_state *g = p->gen;
        b->waits_for = check_strf("%s %s generation %llu (%u of %llu arrived)",
                                  s->kind == TRACE_BARRIER ? "barrier" : "collective",
                                  trace_str(t, s->object), (unsigned long long)g->gen,
                                  g->n_arrived, (unsigned long long)g->count);
        edges_to_pending(e, b, q, s->kind, s->object, false);
        break;
    }
    default:
        b->waits_for = check_strf("%s", trace_kind_str(s->kind));
        break;
    }
}

/* The cycle through `start`, if the wait-for graph has one: fills cyc. */
static uint32_t find_cycle(const blocked_info *info, uint32_t n_q, uint32_t *cyc)
{
    /* colour: 0 unvisited, 1 on stack, 2 done; iterative DFS */
    uint8_t *col = calloc(n_q, 1);
    uint32_t *stack = malloc(n_q * sizeof *stack), *edge = calloc(n_q, sizeof *edge);
    uint32_t len = 0;
    if (!col || !stack || !edge)
        goto out;
    for (uint32_t s0 = 0; s0 < n_q && !len; s0++) {
        if (col[s0] || !info[s0].waits_for)
            continue;
        uint32_t sp = 0;
        stack[sp++] = s0;
        col[s0] = 1;
        edge[s0] = 0;
        while (sp && !len) {
            uint32_t u = stack[sp - 1];
            if (edge[u] < info[u].n_to) {
                uint32_t v = info[u].to[edge[u]++];
                if (!info[v].waits_for)
                    continue;
                if (col[v] == 1) {
                    uint32_t i = sp;
                    while (stack[i - 1] != v)
                        i--;
                    for (uint32_t k = i - 1; k < sp; k++)
                        cyc[len++] = stack[k];
                } else if (!col[v]) {
                    col[v] = 1;
                    edge[v] = 0;
                    stack[sp++] = v;
                }
            } else {
                col[u] = 2;
                sp--;
            }
        }
    }
out:
    free(col);
    free(stack);
    free(edge);
    return len;
}

/* A statement of q's pending list after its head that would release one of
 * the queues in cyc: a signal someone awaits, a record someone waits on. */
static const check_pend *cycle_breaker(const check_engine *e, uint32_t q, const blocked_info *info,
                                       const uint32_t *cyc, uint32_t n)
{
    for (const check_pend *p = e->q[q].head ? e->q[q].head->next : NULL; p; p = p->next) {
        for (uint32_t i = 0; i < n; i++) {
            const check_pend *h = info[cyc[i]].at;
            if (!h || cyc[i] == q)
                continue;
            if (p->s.kind == TRACE_SIGNAL && h->s.kind == TRACE_AWAIT && h->s.object == p->s.object)
                return p;
            if (p->s.kind == TRACE_RECORD && h->s.kind == TRACE_WAIT && h->bind == p->rec)
                return p;
        }
    }
    return NULL;
}

/* Appends the name of pending statement x (queue q) to *list. */
static void name_add(const check_engine *e, char **list, uint32_t *n, const check_pend *x,
                     uint32_t q)
{
    char buf[256];
    trace_stmt_ref r = check_ref_of_stmt(&x->s);
    char *m = check_strf("%s%s%s (%s)", *list ? *list : "", *list ? ", " : "",
                         check_ref_name(e->t, &r, buf, sizeof buf), qname(e, q));
    if (m) {
        free(*list);
        *list = m;
        ++*n;
    }
}

/* The fix for a queue blocked at `await F` (at): nothing signals F, its
 * only signals follow the await (ruling 1: it is never released), or the
 * signals it waits for (those not ordered after it) never run. */
static char *await_fix(check_engine *e, const check_pend *p, const char *at)
{
    const char *f = trace_str(e->t, p->s.object);
    char *which = NULL, *behind = NULL;
    uint32_t n = 0, n_behind = 0;
    if (p->flag && p->flag->fed && check_after_mark(e, p, false) == 0) {
        for (uint32_t q = 0; q < e->n_q; q++)
            for (const check_pend *x = e->q[q].head; x; x = x->next)
                if (!x->marker && !x->removed && x->s.kind == TRACE_SIGNAL && !x->s.sem &&
                    x->s.object == p->s.object) {
                    if (x->after_mark)
                        name_add(e, &behind, &n_behind, x, q);
                    else
                        name_add(e, &which, &n, x, q);
                }
    }
    char *fix;
    if (!n && n_behind && !p->flag->ran)
        fix = check_strf("every signal of %s (%s) can only run after the await at %s, so "
                         "nothing releases it: signal %s before the await, or remove the await",
                         f, behind, at, f);
    else if (!n)
        fix = check_strf("nothing signals %s: add `signal %s` where its data is ready, or "
                         "remove the await at %s",
                         f, f, at);
    else
        fix = check_strf("the await of %s at %s waits for the signal%s of %s at %s, which "
                         "never run%s: release %s, or remove the await",
                         f, at, n > 1 ? "s" : "", f, which, n > 1 ? "" : "s",
                         n > 1 ? "what blocks them" : "what blocks it");
    free(which);
    free(behind);
    return fix;
}

void check_engine_report_hang(check_engine *e)
{
    const trace *t = e->t;
    uint32_t n_q = e->n_q;
    blocked_info *info = calloc(n_q, sizeof *info);
    uint32_t *cyc = malloc((n_q + 1) * sizeof *cyc);
    if (!info || !cyc) {
        free(info);
        free(cyc);
        e->oom = true;
        return;
    }
    for (uint32_t q = 0; q < n_q; q++) {
        const check_pend *p = e->q[q].head;
        if (!p)
            continue;
        info[q].at = p;
        if (!p->marker && !p->unsubmitted && p->s.kind == TRACE_AWAIT && !p->s.sem && p->flag &&
            check_after_mark(e, p, false) != 0)
            e->oom = true;
        explain(e, q, p, &info[q]);
    }
    uint32_t n_blocked = 0;
    for (uint32_t q = 0; q < n_q; q++)
        n_blocked += info[q].waits_for != NULL;
    if (n_blocked == 0)
        goto out;

    trace_finding f = { 0 };
    f.kind = TRACE_FINDING_HANG;
    f.first.seq = TRACE_NO_SEQ;
    f.second.seq = TRACE_NO_SEQ;
    f.buffer = f.root = TRACE_NONE;
    f.object = TRACE_NONE;
    uint32_t n_cyc = find_cycle(info, n_q, cyc);
    f.parts = calloc(n_blocked + n_cyc + 1, sizeof *f.parts);
    char *names = NULL;
    if (!f.parts) {
        e->oom = true;
        goto out;
    }
    for (uint32_t q = 0; q < n_q; q++) {
        if (!info[q].waits_for)
            continue;
        /* the statement it is stuck at (unsubmitted ones included) */
        const trace_stmt *s = info[q].at ? &info[q].at->s : NULL;
        f.parts[f.n_parts++] = (trace_finding_part){
            TRACE_PART_BLOCKED, false, q, s ? s->seq : TRACE_NO_SEQ, s ? s->line : 0, TRACE_NONE,
            0, info[q].waits_for };
        info[q].waits_for_given = true;     /* the part owns the text now */
        str_cat(&names, check_strf("%s waits for %s", qname(e, q), info[q].waits_for));
    }

    char *fix = NULL;
    if (n_cyc) {
        char *chain = NULL;
        for (uint32_t i = 0; i <= n_cyc; i++) {
            uint32_t q = cyc[i % n_cyc];
            if (i < n_cyc)
                f.parts[f.n_parts++] = (trace_finding_part){ TRACE_PART_CYCLE, false, q,
                                                             TRACE_NO_SEQ, 0, TRACE_NONE, 0,
                                                             NULL };
            char *c = chain ? check_strf("%s -> %s", chain, qname(e, q))
                            : check_strf("%s", qname(e, q));
            free(chain);
            chain = c;
        }
        char buf1[256], buf2[256];
        for (uint32_t i = 0; i < n_cyc && !fix; i++) {
            uint32_t q = cyc[i];
            const check_pend *br = cycle_breaker(e, q, info, cyc, n_cyc);
            if (!br)
                continue;
            trace_stmt_ref a = check_ref_of_stmt(&br->s), b = check_ref_of_stmt(&info[q].at->s);
            fix = check_strf("break the cycle %s: move `%s %s %s` (%s) before `%s %s %s` (%s)",
                             chain ? chain : "", qname(e, q), trace_kind_str(br->s.kind),
                             trace_str(t, br->s.object), check_ref_name(t, &a, buf1, sizeof buf1),
                             qname(e, q), trace_kind_str(info[q].at->s.kind),
                             trace_str(t, info[q].at->s.object),
                             check_ref_name(t, &b, buf2, sizeof buf2));
        }
        if (!fix)
            fix = check_strf("break the cycle %s: one of these queues must release the next "
                             "before it blocks",
                             chain ? chain : "");
        str_cat(&names, check_strf("deadlock: %s", chain ? chain : ""));
        free(chain);
    } else {
        /* The root causes: blocked queues whose blockers are not blocked. */
        char buf[256];
        for (uint32_t q = 0; q < n_q; q++) {
            const check_pend *p = info[q].at;
            if (!info[q].waits_for || !p || p->unsubmitted)
                continue;
            bool root = true;
            for (uint32_t i = 0; i < info[q].n_to; i++)
                if (info[info[q].to[i]].waits_for)
                    root = false;
            if (!root)
                continue;
            trace_stmt_ref r = check_ref_of_stmt(&p->s);
            const char *at = check_ref_name(t, &r, buf, sizeof buf);
            if (p->s.kind == TRACE_AWAIT && p->s.sem)
                str_cat(&fix, check_strf("nothing sets semaphore %s to %llu or more: add the "
                                         "`signal %s set=%llu` it waits for, or remove the "
                                         "await at %s",
                                         trace_str(t, p->s.object), (unsigned long long)p->s.count,
                                         trace_str(t, p->s.object),
                                         (unsigned long long)p->s.count, at));
            else if (p->s.kind == TRACE_AWAIT)
                str_cat(&fix, await_fix(e, p, at));
            else if (p->s.kind == TRACE_BARRIER || p->s.kind == TRACE_COLLECTIVE) {
                const gen_state *g = p->gen;
                bool told = false;  /* one line per generation, not per participant */
                for (uint32_t k = 0; k < q && !told; k++)
                    told = info[k].at && !info[k].at->unsubmitted && info[k].at->gen == g;
                if (told)
                    continue;
                char *who = NULL;
                for (uint32_t i = 0; i < g->n_arrived; i++) {
                    char *n = who ? check_strf("%s, %s", who, qname(e, g->arr[i].queue))
                                  : check_strf("%s", qname(e, g->arr[i].queue));
                    free(who);
                    who = n;
                }
                /* Who is missing: the queues that arrived at an earlier
                 * generation of the same object but not at this one (in a
                 * merged job their names say the rank). */
                char *gone = NULL;
                const trace_member *m = NULL;
                uint32_t n_m = e->bind ? trace_binder_members(e->bind, p->s.object,
                                                              p->s.kind == TRACE_COLLECTIVE, &m)
                                       : 0;
                for (uint32_t j = 0; j < n_m; j++) {
                    bool here = false;
                    for (uint32_t i = 0; i < g->n_arrived && !here; i++)
                        here = g->arr[i].queue == m[j].queue;
                    if (here)
                        continue;
                    char *n = gone ? check_strf("%s, %s", gone, qname(e, m[j].queue))
                                   : check_strf("%s", qname(e, m[j].queue));
                    free(gone);
                    gone = n;
                }
                char *missing = gone ? check_strf("; %s arrived at an earlier generation but not "
                                                  "at this one: make it arrive",
                                                  gone)
                                     : check_strf(": make the missing queue arrive");
                str_cat(&fix, check_strf("%s %s generation %llu expects %llu participants but "
                                         "only %u arrive (%s)%s, or use %s=%u",
                                         trace_kind_str(p->s.kind), trace_str(t, p->s.object),
                                         (unsigned long long)g->gen,
                                         (unsigned long long)g->count, g->n_arrived,
                                         who ? who : "", missing,
                                         p->s.kind == TRACE_BARRIER ? "count" : "size",
                                         g->n_arrived));
                free(who);
                free(gone);
                free(missing);
            } else
                str_cat(&fix, check_strf("%s at %s can never complete", trace_kind_str(p->s.kind),
                                         at));
        }
        if (!fix)
            fix = check_strf("release the blocked queues");
    }
    f.text = names;
    f.fix = fix;
    if (!check_report_add(e->rep, &f))
        trace_finding_release(&f);
out:
    for (uint32_t q = 0; q < n_q; q++) {
        if (!info[q].waits_for_given)
            free(info[q].waits_for);
        free(info[q].to);
    }
    free(info);
    free(cyc);
}
