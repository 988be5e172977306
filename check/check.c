/*
 * check.c -- check_trace: validate each statement, feed the engine, order
 * the findings, and (when asked) add the minimiser's redundant syncs.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* A statement that refers to declarations that do not exist would crash the
 * engine; readers built by the parser never yield one, hand-built ones may. */
static int validate(const trace *t, const trace_stmt *s, trace_error *err)
{
    if (s->queue >= t->n_queues)
        goto bad;
    if ((unsigned)s->kind >= TRACE_KIND_COUNT)
        goto bad;
    for (uint32_t i = 0; i < s->n_access; i++) {
        const trace_access *a = &s->access[i];
        if (a->buffer >= t->n_buffers || a->lo > a->hi || a->hi > t->buffers[a->buffer].size ||
            !(a->mode & TRACE_RW))
            goto bad;
    }
    if ((s->kind == TRACE_ALLOC || s->kind == TRACE_FREE) && s->object >= t->n_buffers)
        goto bad;
    if (s->kind == TRACE_SYNC && s->sync_scope == TRACE_SYNC_QUEUE && s->object >= t->n_queues)
        goto bad;
    if (s->by != TRACE_NONE && s->by >= t->n_queues)
        goto bad;
    return 0;
bad:
    trace_error_set(err, TRACE_ESYNTAX,
                    "statement %llu (line %u) refers to an undeclared queue or buffer or an "
                    "out-of-range byte range",
                    (unsigned long long)s->seq, s->line);
    return -1;
}

static uint64_t sort_seq(const trace_finding *f)
{
    if (f->kind == TRACE_FINDING_HANG)
        return UINT64_MAX;
    return f->second.seq != TRACE_NO_SEQ ? f->second.seq : f->first.seq;
}

static int cmp_finding(const void *pa, const void *pb)
{
    const trace_finding *a = pa, *b = pb;
    uint64_t x = sort_seq(a), y = sort_seq(b);
    if (x != y)
        return x < y ? -1 : 1;
    if (a->first.seq != b->first.seq)
        return a->first.seq < b->first.seq ? -1 : 1;
    return (int)a->kind - (int)b->kind;
}

static int add_redundant(trace_reader *r, const check_options *opt, check_report *rep,
                         trace_error *err)
{
    /* The minimiser needs the statements in memory: an in-memory reader. */
    trace *t = r->trace;
    if (t->n_stmts == 0 && rep->ops > 0) {
        trace_error_set(err, TRACE_EUSAGE,
                        "redundant-sync needs an in-memory trace (trace_reader_memory)");
        return -1;
    }
    check_options o = *opt;
    o.redundant = false;
    o.allow_findings = true;    /* the report shows those findings beside */
    check_min_result res;
    if (check_minimize(t, &o, &res, err) != 0)
        return -1;
    for (size_t i = 0; i < res.n_removed; i++) {
        trace_finding f = { 0 };
        f.kind = TRACE_FINDING_REDUNDANT_SYNC;
        f.first.seq = TRACE_NO_SEQ;
        f.second = (trace_stmt_ref){ res.removed[i].seq, res.removed[i].queue, TRACE_NONE,
                                     res.removed[i].line, res.removed[i].kind, TRACE_NONE };
        f.buffer = f.root = f.object = TRACE_NONE;
        check_report_add(rep, &f);
    }
    check_min_result_free(&res);
    return 0;
}

int check_flag_totals(const trace *t, trace_u64map *out)
{
    memset(out, 0, sizeof *out);
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (s.kind != TRACE_SIGNAL)
            continue;
        uint64_t *v = trace_u64map_put(out, s.object, 0);
        if (!v)
            return -1;
        ++*v;
    }
    return 0;
}

/* One pass over r: a report, and whether the engine could decide the flags
 * exactly (see check_engine_set_flag_totals); *counts gets the signals per
 * flag when it could not. */
static int check_pass(trace_reader *r, const check_options *opt, const trace_u64map *totals,
                      check_report **out, trace_u64map *counts, trace_error *err)
{
    *out = NULL;
    check_report *rep = check_report_new(r->trace, opt->max_findings);
    check_engine *e = rep ? check_engine_new(r->trace, rep, NULL) : NULL;
    if (!e) {
        check_report_free(rep);
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        return -1;
    }
    check_engine_set_flag_totals(e, totals);
    check_coverage_init(&rep->cov, r->trace);
    trace_stmt s;
    int rc;
    while ((rc = trace_reader_next(r, &s, err)) == 1) {
        if (validate(r->trace, &s, err) != 0) {
            rc = -1;
            break;
        }
        check_coverage_stmt(&rep->cov, r->trace, &s);
        if (check_engine_feed(e, &s) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory after %llu statements",
                            (unsigned long long)s.seq);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && check_engine_finish(e, opt->ignore_hangs) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        rc = -1;
    }
    if (rc == 0 && check_engine_inexact(e) && check_engine_signal_counts(e, counts) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        rc = -1;
    }
    check_engine_free(e);
    if (rc != 0) {
        check_report_free(rep);
        return -1;
    }
    *out = rep;
    return 0;
}

/* A statement a finding names, to resolve: its label (NULL: a part, which
 * has none) and its site. */
typedef struct named_stmt {
    uint64_t seq;
    uint32_t *label;
    uint32_t *site;
} named_stmt;

static int cmp_named(const void *pa, const void *pb)
{
    const named_stmt *a = pa, *b = pb;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* What the engine did not keep of the statements the findings name: the
 * labels a lazy reader left unbuilt and each statement's site=, read
 * again from r now -- in seq order, so that a reader that reads its input
 * again (a text file) goes through it once, whatever the findings' order.
 * A reader that cannot look back gives no site. */
static int resolve_named(trace_reader *r, check_report *rep, trace_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->n; i++)
        n += 2 + rep->f[i].n_parts;
    if (!n)
        return 0;
    named_stmt *v = malloc(n * sizeof *v);
    if (!v)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    n = 0;
    for (size_t i = 0; i < rep->n; i++) {
        trace_finding *f = &rep->f[i];
        v[n++] = (named_stmt){ f->first.seq, &f->first.label, &f->first.site };
        v[n++] = (named_stmt){ f->second.seq, &f->second.label, &f->second.site };
        for (uint32_t k = 0; k < f->n_parts; k++)
            v[n++] = (named_stmt){ f->parts[k].seq, NULL, &f->parts[k].site };
    }
    qsort(v, n, sizeof *v, cmp_named);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        *v[i].site = TRACE_NONE;
        if (v[i].seq == TRACE_NO_SEQ)
            continue;
        if ((v[i].label && trace_reader_label(r, v[i].seq, v[i].label, err) != 0) ||
            trace_reader_attr(r, v[i].seq, TRACE_ATTR_SITE, v[i].site, err) != 0)
            rc = -1;
    }
    free(v);
    return rc;
}

int check_trace(trace_reader *r, const check_options *opt, check_report **out, trace_error *err)
{
    static const check_options defaults = { 0 };
    if (!opt)
        opt = &defaults;
    *out = NULL;
    check_report *rep = NULL;
    trace_u64map counts = { 0 };
    if (check_pass(r, opt, NULL, &rep, &counts, err) != 0)
        return -1;
    if (counts.count) {
        /* A flag was signalled after an await of it passed: rule 6 orders
         * that signal before the await's successors too, which one streaming
         * pass cannot know. Again, with every flag's signal count. */
        check_report_free(rep);
        rep = NULL;
        int rc = trace_reader_rewind(r, err);
        if (rc != 0)
            trace_error_set(err, err->status,
                            "%s: a flag is signalled after an await of it passed, so checking "
                            "needs a second pass, and this input cannot be read twice: write "
                            "the trace to a file first",
                            r->source ? r->source : "the trace");
        if (rc == 0)
            rc = check_pass(r, opt, &counts, &rep, &(trace_u64map){ 0 }, err);
        trace_u64map_free(&counts);
        if (rc != 0)
            return -1;
    }
    if (opt->redundant && add_redundant(r, opt, rep, err) != 0) {
        check_report_free(rep);
        return -1;
    }
    if (resolve_named(r, rep, err) != 0) {
        check_report_free(rep);
        return -1;
    }
    if (rep->n)
        qsort(rep->f, rep->n, sizeof *rep->f, cmp_finding);
    check_report_finish(rep);
    *out = rep;
    return 0;
}

int check_store_report(trace_source *src, const check_report *rep, trace_error *err)
{
    if (!src->store || !trace_store_writable(src->store))
        return 1;
    trace_check_info info = { .incomplete = trace_source_incomplete(src),
                              .statements = check_report_ops(rep),
                              .findings = check_report_count(rep) + check_report_dropped(rep) };
    check_coverage_to_info(&rep->cov, &info);
    return trace_store_save_check(src->store, src->run, src->reader.trace, &info,
                                  check_report_findings(rep), check_report_count(rep), err) == 0
               ? 0
               : -1;
}
