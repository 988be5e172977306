/*
 * findings.c -- finding records and their concrete fixes (output.c writes
 * them and compares them with a trace's `expect` lines).
 *
 * A race is kept once per pair of statements and root buffer: the engine may
 * see the same pair on many byte ranges and through several accesses of one
 * statement; those merge (the range widens, the conflict types add up). The
 * reported type is the most telling one: RAW (the second read stale data),
 * then WAW, then WAR.
 *
 * Fixes name the missing happens-before edge from the first statement to the
 * second in the vocabulary of the trace:
 *   stream -> stream  record an event on A after x and wait for it on B before y
 *   stream -> host    add "B sync A" before y
 *   host -> stream    submitted by the same host it is already ordered, so
 *                     the submitter is another host: signal a flag on A after
 *                     x and await it on the submitter before it submits y
 *   host -> host      signal a flag on A after x and await it on B before y
 */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Records.                                                            */

check_report *check_report_new(const trace *t, uint32_t max_findings)
{
    check_report *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->t = t;
    r->max_findings = max_findings;
    return r;
}

void check_report_free(check_report *rep)
{
    if (!rep)
        return;
    for (size_t i = 0; i < rep->n; i++)
        trace_finding_release(&rep->f[i]);
    free(rep->f);
    free(rep->dropped_now);
    free(rep);
}

void check_report_begin_stmt(check_report *rep)
{
    rep->dedupe_from = rep->n;
    rep->n_dropped_now = 0;
}

/* True the first time this statement drops finding f (see dropped_now). */
static bool drop_is_new(check_report *rep, const trace_finding *f)
{
    check_fkey k = check_finding_key(f);
    for (size_t i = 0; i < rep->n_dropped_now; i++)
        if (rep->dropped_now[i].a == k.a && rep->dropped_now[i].b == k.b &&
            rep->dropped_now[i].c == k.c)
            return false;
    if (rep->n_dropped_now == rep->cap_dropped_now) {
        size_t cap = rep->cap_dropped_now ? rep->cap_dropped_now * 2 : 8;
        check_fkey *p = realloc(rep->dropped_now, cap * sizeof *p);
        if (!p)
            return true;        /* counted again at worst */
        rep->dropped_now = p;
        rep->cap_dropped_now = cap;
    }
    rep->dropped_now[rep->n_dropped_now++] = k;
    return true;
}

trace_finding *check_report_add(check_report *rep, const trace_finding *f)
{
    if (rep->max_findings && rep->n >= rep->max_findings) {
        rep->dropped += drop_is_new(rep, f);
        return NULL;
    }
    if (trace_grow((void **)&rep->f, &rep->cap, rep->n + 1, sizeof *rep->f) != 0)
        return NULL;
    rep->f[rep->n] = *f;
    return &rep->f[rep->n++];
}

static trace_stmt_ref ref_of_site(const check_site *s)
{
    return (trace_stmt_ref){ s->seq, s->queue, s->label, s->line, (trace_kind)s->kind, s->by };
}

trace_stmt_ref check_ref_of_stmt(const trace_stmt *s)
{
    return (trace_stmt_ref){ s->seq, s->queue, s->label, s->line, s->kind, s->by };
}

void check_report_conflict(check_report *rep, trace_finding_kind kind, const check_site *a,
                           const check_site *b, uint32_t root, uint64_t lo, uint64_t hi)
{
    /* `first` is the statement earlier in the file (use-after-free: the free). */
    const check_site *x = a, *y = b;
    uint8_t type = 0;
    if (kind == TRACE_FINDING_RACE) {
        if (a->seq > b->seq) {
            x = b;
            y = a;
        }
        /* what first and second do, whichever the engine ran first */
        bool xr = x->mode & TRACE_R, xw = x->mode & TRACE_W;
        bool yr = y->mode & TRACE_R, yw = y->mode & TRACE_W;
        type = (uint8_t)((xw && yr ? TRACE_RACE_RAW : 0) | (xr && yw ? TRACE_RACE_WAR : 0) |
                         (xw && yw ? TRACE_RACE_WAW : 0));
    }
    for (size_t i = rep->dedupe_from; i < rep->n; i++) {
        trace_finding *f = &rep->f[i];
        if (f->kind == kind && f->first.seq == x->seq && f->second.seq == y->seq && f->root == root) {
            f->race_types |= type;
            if (lo < f->lo)
                f->lo = lo;
            if (hi > f->hi)
                f->hi = hi;
            return;
        }
    }
    trace_finding f = { 0 };
    f.kind = kind;
    f.race_types = type;
    f.first = ref_of_site(x);
    f.second = ref_of_site(y);
    f.buffer = b->buffer;
    f.root = root;
    f.lo = lo;
    f.hi = hi;
    f.object = TRACE_NONE;
    check_report_add(rep, &f);
}

size_t check_report_count(const check_report *rep)
{
    return rep->n;
}

size_t check_report_count_kind(const check_report *rep, trace_finding_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->n; i++)
        n += rep->f[i].kind == k;
    return n;
}

uint64_t check_report_dropped(const check_report *rep)
{
    return rep->dropped;
}

uint64_t check_report_ops(const check_report *rep)
{
    return rep->ops;
}

const trace_finding *check_report_finding(const check_report *rep, size_t i)
{
    return i < rep->n ? &rep->f[i] : NULL;
}

const trace_finding *check_report_findings(const check_report *rep)
{
    return rep->f;
}

size_t check_report_take(check_report *rep, trace_finding **out)
{
    size_t n = rep->n;
    *out = rep->f;
    rep->f = NULL;
    rep->n = rep->cap = 0;
    rep->taken = n;
    return n;
}

const char *check_ref_name(const trace *t, const trace_stmt_ref *r, char *buf, size_t cap)
{
    const char *q = r->queue < t->n_queues ? trace_str(t, t->queues[r->queue].name) : "?";
    /* a label a lazy reader has not built yet (the engine's hang fixes are
     * written before labels are resolved) names nothing: use the place */
    if (r->label != TRACE_NONE && r->label != TRACE_LABEL_LAZY && *trace_str(t, r->label))
        snprintf(buf, cap, "%s", trace_str(t, r->label));
    else if (r->line)
        snprintf(buf, cap, "%s@%u", q, r->line);
    else
        snprintf(buf, cap, "%s#%llu", q, (unsigned long long)r->seq);
    return buf;
}

const char *check_queue_name(const trace *t, uint32_t q)
{
    return q < t->n_queues ? trace_str(t, t->queues[q].name) : "?";
}


static bool is_host(const trace *t, uint32_t q)
{
    return q < t->n_queues && t->queues[q].kind == TRACE_QUEUE_HOST;
}

char *check_strf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

check_edge check_edge_of(const trace *t, const trace_stmt_ref *x, const trace_stmt_ref *y)
{
    if (!is_host(t, x->queue) && !is_host(t, y->queue))
        return (check_edge){ CHECK_EDGE_EVENT, x->queue, y->queue, false };
    if (!is_host(t, x->queue))
        return (check_edge){ CHECK_EDGE_SYNC, x->queue, y->queue, false };
    if (!is_host(t, y->queue) && y->by != TRACE_NONE && y->by != x->queue)
        return (check_edge){ CHECK_EDGE_FLAG, x->queue, y->by, true };
    return (check_edge){ CHECK_EDGE_FLAG, x->queue, y->queue, false };
}

/* The missing edge from statement x to statement y, as an instruction. */
static char *edge_fix(const trace *t, const trace_stmt_ref *x, const trace_stmt_ref *y)
{
    char xn[256], yn[256];
    check_ref_name(t, x, xn, sizeof xn);
    check_ref_name(t, y, yn, sizeof yn);
    check_edge e = check_edge_of(t, x, y);
    const char *a = check_queue_name(t, e.from), *b = check_queue_name(t, e.to);
    switch (e.kind) {
    case CHECK_EDGE_EVENT:
        return check_strf("record an event on %s after %s and wait for it on %s before %s", a, xn,
                          b, yn);
    case CHECK_EDGE_SYNC:
        return check_strf("add \"%s sync %s\" before %s", b, a, yn);
    case CHECK_EDGE_FLAG:
        if (e.by_submitter)
            return check_strf("signal a flag on %s after %s and await it on %s before it submits "
                              "%s (or submit %s from %s)",
                              a, xn, b, yn, yn, a);
        break;
    }
    return check_strf("signal a flag on %s after %s and await it on %s before %s", a, xn, b, yn);
}

const char *check_race_word(uint8_t type)
{
    return type == TRACE_RACE_RAW ? "RAW" : type == TRACE_RACE_WAW ? "WAW" : "WAR";
}


void check_report_finish(check_report *rep)
{
    const trace *t = rep->t;
    for (size_t i = 0; i < rep->n; i++) {
        trace_finding *f = &rep->f[i];
        char xn[256], yn[256];
        if (f->kind == TRACE_FINDING_RACE) {
            f->race_type = (f->race_types & TRACE_RACE_RAW)   ? TRACE_RACE_RAW
                           : (f->race_types & TRACE_RACE_WAW) ? TRACE_RACE_WAW
                                                         : TRACE_RACE_WAR;
            if (!f->fix)
                f->fix = edge_fix(t, &f->first, &f->second);
            if (!f->text)
                f->text = check_strf(
                    "%s race on %s[%llu:%llu]: %s (%s) and %s (%s) are not ordered",
                    check_race_word(f->race_type), trace_str(t, t->buffers[f->root].name),
                    (unsigned long long)f->lo, (unsigned long long)f->hi,
                    check_ref_name(t, &f->first, xn, sizeof xn), check_queue_name(t, f->first.queue),
                    check_ref_name(t, &f->second, yn, sizeof yn), check_queue_name(t, f->second.queue));
        } else if (f->kind == TRACE_FINDING_USE_AFTER_FREE && f->second.kind == TRACE_FREE) {
            const char *buf = trace_str(t, t->buffers[f->root].name);
            if (!f->fix)
                f->fix = check_strf("free %s once: remove one of the frees (%s, %s), or alloc it "
                                    "again between them",
                                    buf, check_ref_name(t, &f->first, xn, sizeof xn),
                                    check_ref_name(t, &f->second, yn, sizeof yn));
            if (!f->text)
                f->text = check_strf("%s (%s) frees %s[%llu:%llu] again after the free %s (%s): "
                                     "a double free",
                                     check_ref_name(t, &f->second, yn, sizeof yn),
                                     check_queue_name(t, f->second.queue), buf, (unsigned long long)f->lo,
                                     (unsigned long long)f->hi,
                                     check_ref_name(t, &f->first, xn, sizeof xn),
                                     check_queue_name(t, f->first.queue));
        } else if (f->kind == TRACE_FINDING_USE_AFTER_FREE) {
            if (!f->fix) {
                /* The free must move after the use; across queues that also
                 * needs the edge from the use to the free's new place. */
                const char *buf = trace_str(t, t->buffers[f->root].name);
                check_ref_name(t, &f->second, yn, sizeof yn);
                check_ref_name(t, &f->first, xn, sizeof xn);
                char *edge = f->first.queue != f->second.queue
                                 ? edge_fix(t, &f->second, &f->first)
                                 : NULL;
                f->fix = edge ? check_strf("free %s only after its last use %s: move the free "
                                           "(%s) after it, and %s",
                                           buf, yn, xn, edge)
                              : check_strf("free %s only after its last use %s: move the free "
                                           "(%s) after it",
                                           buf, yn, xn);
                free(edge);
            }
            if (!f->text)
                f->text = check_strf("%s (%s) uses %s[%llu:%llu] after the free %s (%s)",
                                     check_ref_name(t, &f->second, yn, sizeof yn),
                                     check_queue_name(t, f->second.queue),
                                     trace_str(t, t->buffers[f->root].name),
                                     (unsigned long long)f->lo, (unsigned long long)f->hi,
                                     check_ref_name(t, &f->first, xn, sizeof xn),
                                     check_queue_name(t, f->first.queue));
        } else if (f->kind == TRACE_FINDING_WAIT_UNRECORDED) {
            if (!f->text)
                f->text = check_strf("%s waits for event %s, which no earlier statement records",
                                     check_ref_name(t, &f->second, yn, sizeof yn),
                                     trace_str(t, f->object));
            if (!f->fix)
                f->fix = check_strf("record %s before %s in submission order (a wait binds to "
                                    "the most recent earlier record), or remove the wait",
                                    trace_str(t, f->object),
                                    check_ref_name(t, &f->second, yn, sizeof yn));
        } else if (f->kind == TRACE_FINDING_REDUNDANT_SYNC) {
            if (!f->text)
                f->text = check_strf("%s %s (%s) can be removed: removing it creates no new "
                                     "finding",
                                     check_queue_name(t, f->second.queue), trace_kind_str(f->second.kind),
                                     check_ref_name(t, &f->second, yn, sizeof yn));
            if (!f->fix)
                f->fix = check_strf("remove %s", check_ref_name(t, &f->second, yn, sizeof yn));
        }
    }
}

/* ------------------------------------------------------------------ */
/* Output.                                                             */

/* ------------------------------------------------------------------ */
/* Keys (the minimiser's "nothing new" test, --max-findings).          */

check_fkey check_finding_key(const trace_finding *f)
{
    check_fkey k = { 0, 0, 0 };
    k.a = (uint64_t)f->kind << 56;
    k.b = f->first.seq;
    k.c = f->second.seq;
    if (f->kind == TRACE_FINDING_RACE || f->kind == TRACE_FINDING_USE_AFTER_FREE)
        k.a ^= (uint64_t)f->root << 8;
    if (trace_finding_about(f->kind)->object)
        k.a ^= (uint64_t)f->object << 8;
    if (f->kind == TRACE_FINDING_HANG) {
        /* a hang is the set of its blocked queues */
        uint64_t h = 1469598103934665603ULL;
        uint32_t n = 0;
        for (uint32_t i = 0; i < f->n_parts; i++)
            if (f->parts[i].role == TRACE_PART_BLOCKED) {
                h = (h ^ f->parts[i].queue) * 1099511628211ULL;
                n++;
            }
        k.a ^= n;
        k.b = h;
        k.c = 0;
    }
    return k;
}
