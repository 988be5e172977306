/*
 * mismatch.c -- the finding for a barrier or collective generation whose
 * participants disagree (rules 5 and 7): one arrival too many, another
 * count=, or (collectives) another KIND or size=. The binder
 * (traces/bind.c) decides who belongs to which generation; this names the
 * participants, says what each said, and proposes the fix. Reported once
 * per barrier or communicator.
 */
#include "engine.h"


/* The queues whose k-th arrival at a barrier or communicator has been
 * read, as "q0, q1". */
static char *gen_members(const check_engine *e, uint32_t name, bool coll, uint64_t k)
{
    const trace_member *m;
    uint32_t n = trace_binder_members(e->bind, name, coll, &m);
    char *who = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (m[i].arrivals < k)
            continue;
        const char *q = trace_str(e->t, e->t->queues[m[i].queue].name);
        char *w = who ? check_strf("%s, %s", who, q) : check_strf("%s", q);
        free(who);
        who = w;
    }
    return who;
}

/* Reports, once per barrier or communicator, that generation k's
 * participants disagree: s is the arrival that does not fit, bd what the
 * binder said of it (the generation's first arrival, when known). */
void check_engine_report_mismatch(check_engine *e, const trace_bind *bd, const trace_stmt *s,
                                  check_mismatch why)
{
    bool coll = s->kind == TRACE_COLLECTIVE;
    uint64_t k = bd->gen;
    uint64_t *done = trace_u64map_put(&e->mismatched, (uint64_t)s->object << 1 | coll, 0);
    if (!done || *done)
        return;
    *done = 1;
    const trace *t = e->t;
    bool first_known = bd->gen_first != TRACE_NO_SEQ;
    const char *name = trace_str(t, s->object);
    const char *q2 = trace_str(t, t->queues[s->queue].name);
    const char *q1 = first_known ? trace_str(t, t->queues[bd->gen_first_queue].name) : "?";
    trace_finding f = { 0 };
    f.kind = coll ? TRACE_FINDING_COLLECTIVE_MISMATCH : TRACE_FINDING_BARRIER_MISMATCH;
    f.object = s->object;
    f.generation = k;
    f.first.seq = TRACE_NO_SEQ;
    if (first_known)
        f.first = (trace_stmt_ref){ bd->gen_first, bd->gen_first_queue, TRACE_NONE,
                                    bd->gen_first_line, s->kind, TRACE_NONE };
    f.second = check_ref_of_stmt(s);
    f.buffer = f.root = TRACE_NONE;
    const char *what = coll ? "size" : "count";
    uint64_t expected = bd->gen_count;
    char *members = gen_members(e, s->object, coll, k);
    char *at = s->line ? check_strf(" (line %u)", s->line) : check_strf("%s", "");
    /* a database or capture has no lines: say none rather than "line 0" */
    char *at1 = bd->gen_first_line ? check_strf(" (line %u)", bd->gen_first_line)
                                   : check_strf("%s", "");
    char *text = NULL, *fix = NULL;
    if (why == MISMATCH_EXTRA) {
        text = check_strf("%s %s generation %llu has %s=%llu but more queues arrive (%s): "
                          "%s%s is one too many and passes without synchronising",
                          coll ? "communicator" : "barrier", name, (unsigned long long)k, what,
                          (unsigned long long)expected, members ? members : "", q2,
                          at ? at : "");
        fix = check_strf("make exactly %llu queues arrive at every generation of %s: remove "
                         "%s's arrival%s, or set %s= to the number of participants on every "
                         "arrival",
                         (unsigned long long)expected, name, q2, at ? at : "", what);
    } else if (!coll) {
        text = check_strf("barrier %s generation %llu: %s arrives with count=%llu%s but "
                          "%s with count=%llu%s",
                          name, (unsigned long long)k, q1, (unsigned long long)expected,
                          at1 ? at1 : "", q2, (unsigned long long)s->count, at ? at : "");
        fix = check_strf("give every arrival at %s the same count=: the number of queues that "
                         "arrive at each generation",
                         name);
    } else {
        text = check_strf("generation %llu of communicator %s: %s issues %s size=%llu%s "
                          "but %s issues %s size=%llu%s",
                          (unsigned long long)k, name, q1, trace_str(t, bd->gen_first_kind),
                          (unsigned long long)expected, at1 ? at1 : "", q2,
                          trace_str(t, s->coll_kind), (unsigned long long)s->count, at ? at : "");
        fix = check_strf("make every participant of %s issue the same collectives in the same "
                         "order: generation %llu pairs %s's %s with %s's %s",
                         name, (unsigned long long)k, q1, trace_str(t, bd->gen_first_kind), q2,
                         trace_str(t, s->coll_kind));
    }
    /* parts: the participants, each with what it said (the misfit last) */
    const trace_member *m;
    uint32_t n_m = trace_binder_members(e->bind, s->object, coll, &m);
    trace_finding_part *parts = calloc(n_m + 2, sizeof *parts);
    uint32_t np = 0;
    if (parts && why == MISMATCH_EXTRA) {
        /* generation k's queues in arrival order; a queue already past its
         * k-th arrival is named without its statement */
        for (uint32_t pass = 0; pass < 2; pass++)
            for (uint32_t i = 0; i < n_m; i++) {
                bool self = m[i].queue == s->queue;
                if (m[i].arrivals < k || self != (pass == 1))
                    continue;
                trace_finding_part *p = &parts[np++];
                *p = (trace_finding_part){ TRACE_PART_PARTICIPANT, self, m[i].queue,
                                           TRACE_NO_SEQ, 0, TRACE_NONE, 0, NULL };
                if (m[i].arrivals == k) {
                    p->seq = m[i].last_seq;
                    p->line = m[i].last_line;
                    p->count = m[i].last_count;
                    p->kind = m[i].last_kind;
                }
            }
    } else if (parts) {
        if (first_known)
            parts[np++] = (trace_finding_part){ TRACE_PART_PARTICIPANT, false,
                                                bd->gen_first_queue, bd->gen_first,
                                                bd->gen_first_line, bd->gen_first_kind,
                                                expected, NULL };
        parts[np++] = (trace_finding_part){ TRACE_PART_PARTICIPANT, false, s->queue, s->seq,
                                            s->line, coll ? s->coll_kind : TRACE_NONE, s->count,
                                            NULL };
    }
    if (!parts)
        e->oom = true;
    free(members);
    free(at);
    free(at1);
    f.text = text;
    f.fix = fix;
    f.parts = parts;
    f.n_parts = np;
    if (!check_report_add(e->rep, &f))
        trace_finding_release(&f);
}

