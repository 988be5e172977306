/*
 * findings.c -- finding records, their concrete fixes, the human and JSON
 * outputs, and the comparison with a trace's `expect` lines.
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

static void finding_free(check_finding *f)
{
    free(f->detail);
    free(f->text);
    free(f->fix);
    free(f->queues);
}

void check_report_free(check_report *rep)
{
    if (!rep)
        return;
    for (size_t i = 0; i < rep->n; i++)
        finding_free(&rep->f[i]);
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
static bool drop_is_new(check_report *rep, const check_finding *f)
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

check_finding *check_report_add(check_report *rep, const check_finding *f)
{
    if (rep->max_findings && rep->n >= rep->max_findings) {
        rep->dropped += drop_is_new(rep, f);
        return NULL;
    }
    if (rep->n == rep->cap) {
        size_t cap = rep->cap ? rep->cap * 2 : 16;
        check_finding *p = realloc(rep->f, cap * sizeof *p);
        if (!p)
            return NULL;
        rep->f = p;
        rep->cap = cap;
    }
    rep->f[rep->n] = *f;
    return &rep->f[rep->n++];
}

static check_stmt_ref ref_of_site(const check_site *s)
{
    return (check_stmt_ref){ s->seq, s->queue, s->label, s->line, (trace_kind)s->kind, s->by };
}

check_stmt_ref check_ref_of_stmt(const trace_stmt *s)
{
    return (check_stmt_ref){ s->seq, s->queue, s->label, s->line, s->kind, s->by };
}

void check_report_conflict(check_report *rep, trace_finding_kind kind, const check_site *a,
                           const check_site *b, uint8_t type, uint32_t root, uint64_t lo,
                           uint64_t hi)
{
    /* `first` is the statement earlier in the file (use-after-free: the free). */
    const check_site *x = a, *y = b;
    if (kind == TRACE_FINDING_RACE && a->seq > b->seq) {
        x = b;
        y = a;
        /* seen from the earlier statement, a read-after-write is a write-after-read */
        type = (uint8_t)(((type & CHECK_RAW) ? CHECK_WAR : 0) | ((type & CHECK_WAR) ? CHECK_RAW : 0) |
                         (type & CHECK_WAW));
    }
    for (size_t i = rep->dedupe_from; i < rep->n; i++) {
        check_finding *f = &rep->f[i];
        if (f->kind == kind && f->first.seq == x->seq && f->second.seq == y->seq && f->root == root) {
            f->race_types |= type;
            if (lo < f->lo)
                f->lo = lo;
            if (hi > f->hi)
                f->hi = hi;
            return;
        }
    }
    check_finding f = { 0 };
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

const check_finding *check_report_finding(const check_report *rep, size_t i)
{
    return i < rep->n ? &rep->f[i] : NULL;
}

const char *check_ref_name(const trace *t, const check_stmt_ref *r, char *buf, size_t cap)
{
    const char *q = r->queue < t->n_queues ? trace_str(t, t->queues[r->queue].name) : "?";
    if (r->label != TRACE_NONE)
        snprintf(buf, cap, "%s", trace_str(t, r->label));
    else if (r->line)
        snprintf(buf, cap, "%s@%u", q, r->line);
    else
        snprintf(buf, cap, "%s#%llu", q, (unsigned long long)r->seq);
    return buf;
}

static const char *qname(const trace *t, uint32_t q)
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

/* The missing edge from statement x to statement y, as an instruction. */
static char *edge_fix(const trace *t, const check_stmt_ref *x, const check_stmt_ref *y)
{
    char xn[256], yn[256];
    check_ref_name(t, x, xn, sizeof xn);
    check_ref_name(t, y, yn, sizeof yn);
    const char *a = qname(t, x->queue), *b = qname(t, y->queue);
    if (!is_host(t, x->queue) && !is_host(t, y->queue))
        return check_strf("record an event on %s after %s and wait for it on %s before %s", a, xn,
                          b, yn);
    if (!is_host(t, x->queue))
        return check_strf("add \"%s sync %s\" before %s", b, a, yn);
    if (!is_host(t, y->queue)) {
        if (y->by != TRACE_NONE && y->by != x->queue)
            return check_strf("signal a flag on %s after %s and await it on %s before it submits "
                              "%s (or submit %s from %s)",
                              a, xn, qname(t, y->by), yn, yn, a);
        return check_strf("signal a flag on %s after %s and await it on %s before %s", a, xn, b,
                          yn);
    }
    return check_strf("signal a flag on %s after %s and await it on %s before %s", a, xn, b, yn);
}

static const char *type_str(uint8_t type)
{
    return type == CHECK_RAW ? "RAW" : type == CHECK_WAW ? "WAW" : "WAR";
}

void check_report_finish(check_report *rep)
{
    const trace *t = rep->t;
    for (size_t i = 0; i < rep->n; i++) {
        check_finding *f = &rep->f[i];
        char xn[256], yn[256];
        if (f->kind == TRACE_FINDING_RACE) {
            f->race_type = (f->race_types & CHECK_RAW)   ? CHECK_RAW
                           : (f->race_types & CHECK_WAW) ? CHECK_WAW
                                                         : CHECK_WAR;
            if (!f->fix)
                f->fix = edge_fix(t, &f->first, &f->second);
            if (!f->text)
                f->text = check_strf(
                    "%s race on %s[%llu:%llu]: %s (%s) and %s (%s) are not ordered",
                    type_str(f->race_type), trace_str(t, t->buffers[f->root].name),
                    (unsigned long long)f->lo, (unsigned long long)f->hi,
                    check_ref_name(t, &f->first, xn, sizeof xn), qname(t, f->first.queue),
                    check_ref_name(t, &f->second, yn, sizeof yn), qname(t, f->second.queue));
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
                                     qname(t, f->second.queue), buf, (unsigned long long)f->lo,
                                     (unsigned long long)f->hi,
                                     check_ref_name(t, &f->first, xn, sizeof xn),
                                     qname(t, f->first.queue));
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
                                     qname(t, f->second.queue),
                                     trace_str(t, t->buffers[f->root].name),
                                     (unsigned long long)f->lo, (unsigned long long)f->hi,
                                     check_ref_name(t, &f->first, xn, sizeof xn),
                                     qname(t, f->first.queue));
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
                                     qname(t, f->second.queue), trace_kind_str(f->second.kind),
                                     check_ref_name(t, &f->second, yn, sizeof yn));
            if (!f->fix)
                f->fix = check_strf("remove %s", check_ref_name(t, &f->second, yn, sizeof yn));
        }
    }
}

/* ------------------------------------------------------------------ */
/* Output.                                                             */

static void json_ref(FILE *out, const trace *t, const check_stmt_ref *r, bool with_label)
{
    fputs("{\"queue\": ", out);
    trace_json_str(out, qname(t, r->queue));
    if (with_label && r->label != TRACE_NONE) {
        fputs(", \"label\": ", out);
        trace_json_str(out, trace_str(t, r->label));
    }
    if (r->line)
        fprintf(out, ", \"line\": %u", r->line);
    fprintf(out, ", \"seq\": %llu}", (unsigned long long)r->seq);
}

void check_finding_print_json(FILE *out, const check_report *rep, const check_finding *f)
{
    const trace *t = rep->t;
    fputs("{\"kind\": ", out);
    trace_json_str(out, trace_finding_str(f->kind));
    switch (f->kind) {
    case TRACE_FINDING_RACE:
    case TRACE_FINDING_USE_AFTER_FREE:
        if (f->kind == TRACE_FINDING_RACE)
            fprintf(out, ", \"type\": \"%s\"", type_str(f->race_type));
        fputs(", \"buffer\": ", out);
        trace_json_str(out, trace_str(t, t->buffers[f->buffer != TRACE_NONE ? f->buffer : f->root].name));
        fputs(", \"root\": ", out);
        trace_json_str(out, trace_str(t, t->buffers[f->root].name));
        fprintf(out, ", \"range\": [%llu, %llu]", (unsigned long long)f->lo,
                (unsigned long long)f->hi);
        fputs(",\n   \"first\": ", out);
        json_ref(out, t, &f->first, true);
        fputs(",\n   \"second\": ", out);
        json_ref(out, t, &f->second, true);
        break;
    case TRACE_FINDING_WAIT_UNRECORDED:
        fputs(", \"event\": ", out);
        trace_json_str(out, trace_str(t, f->object));
        fputs(", \"at\": ", out);
        json_ref(out, t, &f->second, false);
        break;
    case TRACE_FINDING_HANG:
        fprintf(out, ", \"blocked\": %s", f->detail ? f->detail : "[]");
        break;
    case TRACE_FINDING_COLLECTIVE_MISMATCH:
    case TRACE_FINDING_BARRIER_MISMATCH:
        fputs(f->kind == TRACE_FINDING_BARRIER_MISMATCH ? ", \"barrier\": " : ", \"comm\": ", out);
        trace_json_str(out, trace_str(t, f->object));
        fprintf(out, ", \"generation\": %llu, \"participants\": %s",
                (unsigned long long)f->generation, f->detail ? f->detail : "[]");
        break;
    case TRACE_FINDING_REDUNDANT_SYNC:
        fputs(", \"sync\": ", out);
        trace_json_str(out, trace_kind_str(f->second.kind));
        fputs(", \"at\": ", out);
        json_ref(out, t, &f->second, false);
        break;
    default:
        break;
    }
    if (f->fix) {
        fputs(",\n   \"fix\": ", out);
        trace_json_str(out, f->fix);
    }
    fputc('}', out);
}

void check_report_print_json(FILE *out, const check_report *rep, const char *trace_name)
{
    fputs("{\"format\": \"syncsim-findings\", \"version\": 1,\n \"trace\": ", out);
    trace_json_str(out, trace_name ? trace_name : "");
    fprintf(out, ", \"ops\": %llu,\n \"findings\": [", (unsigned long long)rep->ops);
    for (size_t i = 0; i < rep->n; i++) {
        fputs(i ? ",\n  " : "\n  ", out);
        check_finding_print_json(out, rep, &rep->f[i]);
    }
    fputs(rep->n ? "],\n \"summary\": {" : "],\n \"summary\": {", out);
    bool any = false;
    for (int k = 0; k < TRACE_FINDING_COUNT; k++) {
        size_t n = check_report_count_kind(rep, (trace_finding_kind)k);
        if (!n)
            continue;
        fprintf(out, "%s\"%s\": %zu", any ? ", " : "", trace_finding_str((trace_finding_kind)k), n);
        any = true;
    }
    if (rep->dropped)
        fprintf(out, "%s\"dropped\": %llu", any ? ", " : "", (unsigned long long)rep->dropped);
    fputs("}}\n", out);
}

/* Races are grouped by cause: the queue pair, hence the missing edge. */
static bool same_group(const check_finding *a, const check_finding *b)
{
    return a->kind == TRACE_FINDING_RACE && b->kind == TRACE_FINDING_RACE &&
           a->first.queue == b->first.queue && a->second.queue == b->second.queue;
}

void check_report_print(FILE *out, const check_report *rep)
{
    const trace *t = rep->t;
    if (rep->n == 0) {
        fprintf(out, "clean: %llu statements, no findings\n", (unsigned long long)rep->ops);
        return;
    }
    /* Kind words are the spec's ("wait-unrecorded"), so they are counted
     * rather than pluralised: "3 findings in 27 statements (race 2, hang 1)". */
    fprintf(out, "%zu finding%s in %llu statements", rep->n, rep->n == 1 ? "" : "s",
            (unsigned long long)rep->ops);
    const char *sep = " (";
    for (int k = 0; k < TRACE_FINDING_COUNT; k++) {
        size_t n = check_report_count_kind(rep, (trace_finding_kind)k);
        if (n) {
            fprintf(out, "%s%s %zu", sep, trace_finding_str((trace_finding_kind)k), n);
            sep = ", ";
        }
    }
    fputc(')', out);
    if (rep->dropped)
        fprintf(out, " (and %llu more not kept: --max-findings)", (unsigned long long)rep->dropped);
    fputc('\n', out);
    bool *shown = calloc(rep->n ? rep->n : 1, sizeof *shown);
    if (!shown)
        return;
    for (size_t i = 0; i < rep->n; i++) {
        if (shown[i])
            continue;
        const check_finding *f = &rep->f[i];
        size_t more = 0;
        if (f->kind == TRACE_FINDING_RACE)
            for (size_t j = i + 1; j < rep->n; j++)
                if (!shown[j] && same_group(f, &rep->f[j])) {
                    shown[j] = true;
                    more++;
                }
        fprintf(out, "\n%s", trace_finding_str(f->kind));
        if (f->first.line || f->second.line) {
            const check_stmt_ref *r = f->second.seq != CHECK_NO_SEQ ? &f->second : &f->first;
            if (r->line)
                fprintf(out, " (line %u)", r->line);
        }
        fprintf(out, ": %s\n", f->text ? f->text : "");
        if (f->fix)
            fprintf(out, "  fix: %s\n", f->fix);
        if (more)
            fprintf(out, "  ... and %zu more race%s between %s and %s with the same missing "
                         "edge\n",
                    more, more == 1 ? "" : "s", qname(t, f->first.queue),
                    qname(t, f->second.queue));
    }
    free(shown);
}

/* ------------------------------------------------------------------ */
/* Expectations.                                                       */

static bool name_matches(const trace *t, const check_stmt_ref *r, const char *want)
{
    if (r->seq == CHECK_NO_SEQ)
        return false;
    if (r->label != TRACE_NONE && strcmp(trace_str(t, r->label), want) == 0)
        return true;
    const char *at = strrchr(want, '@');
    const char *q = qname(t, r->queue);
    size_t ql = strlen(q);
    if (at && (size_t)(at - want) == ql && memcmp(want, q, ql) == 0) {
        char *end;
        unsigned long line = strtoul(at + 1, &end, 10);
        return *end == '\0' && r->line && line == r->line;
    }
    const char *hash = strrchr(want, '#');
    if (hash && (size_t)(hash - want) == ql && memcmp(want, q, ql) == 0) {
        char *end;
        unsigned long long seq = strtoull(hash + 1, &end, 10);
        return *end == '\0' && seq == r->seq;
    }
    return false;
}

static bool buffer_matches(const trace *t, const check_finding *f, const char *want)
{
    if (f->buffer != TRACE_NONE && strcmp(trace_str(t, t->buffers[f->buffer].name), want) == 0)
        return true;
    return f->root != TRACE_NONE && strcmp(trace_str(t, t->buffers[f->root].name), want) == 0;
}

static bool expect_matches(const trace *t, const trace_expect *x, const check_finding *f)
{
    if (x->kind != f->kind)
        return false;
    uint32_t n_queue = 0;
    for (uint32_t i = 0; i < x->n_kv; i++) {
        const char *k = trace_str(t, x->kv[i].key), *v = trace_str(t, x->kv[i].value);
        if (strcmp(k, "type") == 0) {
            uint8_t want = strcmp(v, "RAW") == 0 ? CHECK_RAW : strcmp(v, "WAR") == 0 ? CHECK_WAR
                           : strcmp(v, "WAW") == 0                                   ? CHECK_WAW
                                                                                     : 0;
            if (!(f->race_types & want))
                return false;
        } else if (strcmp(k, "first") == 0) {
            if (!name_matches(t, &f->first, v))
                return false;
        } else if (strcmp(k, "second") == 0) {
            if (!name_matches(t, &f->second, v))
                return false;
        } else if (strcmp(k, "buffer") == 0) {
            if (!buffer_matches(t, f, v))
                return false;
        } else if (strcmp(k, "event") == 0 || strcmp(k, "comm") == 0 ||
                   strcmp(k, "barrier") == 0) {
            if (f->object == TRACE_NONE || strcmp(trace_str(t, f->object), v) != 0)
                return false;
        } else if (strcmp(k, "queue") == 0) {
            bool found = false;
            for (uint32_t j = 0; j < f->n_queues && !found; j++)
                found = strcmp(qname(t, f->queues[j]), v) == 0;
            if (!found)
                return false;
            n_queue++;
        } else if (strcmp(k, "line") == 0) {
            char *end;
            unsigned long line = strtoul(v, &end, 0);
            if (*end || f->second.line != line)
                return false;
        }
        /* unknown keys are metadata: they do not take part */
    }
    if (f->kind == TRACE_FINDING_HANG && n_queue != f->n_queues)
        return false;   /* a hang names exactly the blocked queues */
    return true;
}

static void print_expect(FILE *out, const trace *t, const trace_expect *x)
{
    fprintf(out, "expect %s", trace_finding_str(x->kind));
    for (uint32_t i = 0; i < x->n_kv; i++)
        fprintf(out, " %s=%s", trace_str(t, x->kv[i].key), trace_str(t, x->kv[i].value));
    if (x->line)
        fprintf(out, "  (line %u)", x->line);
    fputc('\n', out);
}

static void print_as_expect(FILE *out, const check_report *rep, const check_finding *f)
{
    const trace *t = rep->t;
    char a[256], b[256];
    switch (f->kind) {
    case TRACE_FINDING_RACE:
        fprintf(out, "race type=%s first=%s second=%s buffer=%s", type_str(f->race_type),
                check_ref_name(t, &f->first, a, sizeof a),
                check_ref_name(t, &f->second, b, sizeof b),
                trace_str(t, t->buffers[f->buffer != TRACE_NONE ? f->buffer : f->root].name));
        break;
    case TRACE_FINDING_WAIT_UNRECORDED:
        fprintf(out, "wait-unrecorded event=%s", trace_str(t, f->object));
        break;
    case TRACE_FINDING_HANG:
        fputs("hang", out);
        for (uint32_t i = 0; i < f->n_queues; i++)
            fprintf(out, " queue=%s", qname(t, f->queues[i]));
        break;
    case TRACE_FINDING_COLLECTIVE_MISMATCH:
        fprintf(out, "collective-mismatch comm=%s", trace_str(t, f->object));
        break;
    case TRACE_FINDING_BARRIER_MISMATCH:
        fprintf(out, "barrier-mismatch barrier=%s", trace_str(t, f->object));
        break;
    case TRACE_FINDING_USE_AFTER_FREE:
        fprintf(out, "use-after-free buffer=%s second=%s", trace_str(t, t->buffers[f->root].name),
                check_ref_name(t, &f->second, b, sizeof b));
        break;
    case TRACE_FINDING_REDUNDANT_SYNC:
        fprintf(out, "redundant-sync line=%u", f->second.line);
        break;
    default:
        fputs(trace_finding_str(f->kind), out);
    }
    if (f->text)
        fprintf(out, "   # %s", f->text);
    fputc('\n', out);
}

bool check_report_expect(FILE *out, const check_report *rep)
{
    const trace *t = rep->t;
    if (t->n_expects == 0) {
        fprintf(out, "the trace has no expect lines: nothing to compare with\n");
        return false;
    }
    bool *used = calloc(rep->n ? rep->n : 1, sizeof *used);
    bool *met = calloc(t->n_expects, sizeof *met);
    if (!used || !met) {
        free(used);
        free(met);
        return false;
    }
    bool ok = true;
    bool want_clean = false;
    /* Specific expectations first, so that a loose one cannot take the
     * finding a specific one needs: two passes, most keys first. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < t->n_expects; i++) {
            const trace_expect *x = &t->expects[i];
            if (met[i])
                continue;
            if (x->kind == TRACE_FINDING_CLEAN) {
                want_clean = true;
                met[i] = true;
                continue;
            }
            bool has_pair = false;
            for (uint32_t k = 0; k < x->n_kv; k++) {
                const char *key = trace_str(t, x->kv[k].key);
                has_pair |= strcmp(key, "first") == 0 || strcmp(key, "second") == 0;
            }
            if (pass == 0 && !has_pair && x->kind == TRACE_FINDING_RACE)
                continue;
            for (size_t j = 0; j < rep->n; j++) {
                if (!used[j] && expect_matches(t, x, &rep->f[j])) {
                    used[j] = met[i] = true;
                    break;
                }
            }
        }
    }
    size_t n_missing = 0, n_unexpected = 0;
    for (uint32_t i = 0; i < t->n_expects; i++)
        n_missing += !met[i];
    for (size_t j = 0; j < rep->n; j++)
        n_unexpected += !used[j];
    if (want_clean && rep->n)
        ok = false;
    if (n_missing || n_unexpected)
        ok = false;
    if (!ok) {
        if (n_missing) {
            fprintf(out, "missing (expected, not found):\n");
            for (uint32_t i = 0; i < t->n_expects; i++)
                if (!met[i]) {
                    fputs("  ", out);
                    print_expect(out, t, &t->expects[i]);
                }
        }
        if (n_unexpected) {
            fprintf(out, "unexpected (found, not expected%s):\n",
                    want_clean ? "; the trace expects clean" : "");
            for (size_t j = 0; j < rep->n; j++)
                if (!used[j]) {
                    fputs("  ", out);
                    print_as_expect(out, rep, &rep->f[j]);
                }
        }
        if (rep->dropped)
            fprintf(out, "(%llu findings were not kept: --max-findings)\n",
                    (unsigned long long)rep->dropped);
    }
    free(used);
    free(met);
    return ok;
}

/* ------------------------------------------------------------------ */
/* Storage rows and keys.                                              */

int check_report_rows(const check_report *rep, trace_finding_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (rep->n == 0)
        return 0;
    trace_finding_row *r = calloc(rep->n, sizeof *r);
    if (!r)
        return -1;
    for (size_t i = 0; i < rep->n; i++) {
        const check_finding *f = &rep->f[i];
        char *json = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&json, &len);
        if (!m) {
            check_report_rows_free(r, i);
            return -1;
        }
        check_finding_print_json(m, rep, f);
        fclose(m);
        r[i].kind = trace_finding_str(f->kind);
        r[i].first_seq = f->first.seq == CHECK_NO_SEQ ? -1 : (int64_t)f->first.seq;
        r[i].second_seq = f->second.seq == CHECK_NO_SEQ ? -1 : (int64_t)f->second.seq;
        r[i].json = json;
    }
    *rows = r;
    *n = rep->n;
    return 0;
}

void check_report_rows_free(trace_finding_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free((char *)rows[i].json);
    free(rows);
}

check_fkey check_finding_key(const check_finding *f)
{
    check_fkey k = { 0, 0, 0 };
    k.a = ((uint64_t)f->kind << 56) ^ (f->kind == TRACE_FINDING_HANG ? f->n_queues : 0);
    k.b = f->first.seq;
    k.c = f->second.seq;
    if (f->kind == TRACE_FINDING_RACE || f->kind == TRACE_FINDING_USE_AFTER_FREE)
        k.a ^= (uint64_t)f->root << 8;
    if (f->kind == TRACE_FINDING_COLLECTIVE_MISMATCH || f->kind == TRACE_FINDING_BARRIER_MISMATCH)
        k.a ^= (uint64_t)f->object << 8;
    if (f->kind == TRACE_FINDING_HANG) {
        uint64_t h = 1469598103934665603ULL;
        for (uint32_t i = 0; i < f->n_queues; i++)
            h = (h ^ f->queues[i]) * 1099511628211ULL;
        k.b = h;
        k.c = 0;
    }
    return k;
}
