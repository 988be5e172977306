/*
 * report.c -- one self-contained HTML page about a run.
 *
 * The page is meant to be mailed or attached to a bug: it refers to no
 * other file (styles inline, pictures inline as SVG, or as a base64 PNG
 * when the timeline is too large for SVG) and runs no script. Sections, in
 * order, after a table of contents:
 *
 *   1. the run: name, source, status, counts, time span, statements by
 *      kind, and its metadata (policy, devices, model ... as the producer
 *      wrote them);
 *   2. the check: when `syncsim check` last looked at the run and what it
 *      found (findings with their fixes), or that it never did -- then the
 *      checker runs for the page and says so. An incomplete run is never
 *      called clean;
 *   3. the timeline (viz/timeline.c), with the findings' races in red;
 *   4. the split graph (viz/graph.c), when the run stored one;
 *   5. the sync pattern per iteration (traces/pattern.c, its one alphabet);
 *   6. runs derived from this one (replays, what-ifs: trace_store_derived),
 *      with their makespans against this run's, what their checks found,
 *      and their timelines;
 *   and, when the caller gives a pricer (`report --advise`), after the
 *   check: the advice (check/advise.c), every group of syncs with what
 *   removing it buys and what to put instead, its syncs marked on the
 *   timeline.
 *
 * The database is opened once (through trace_source_open), and every run is
 * streamed once for its summary, its pattern and its timeline together; the
 * statements are read a second time only when the run was never checked.
 */
#include "viz/timeline_int.h"

#include "check/check.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* One pass over a run: summary, pattern and timeline together.        */

typedef struct run_stats {
    uint64_t n_stmts, by_kind[TRACE_KIND_COUNT], n_timed;
    int64_t t_min, t_max;
    trace_pattern *pat;
} run_stats;

static void stats_free(run_stats *s)
{
    trace_pattern_free(s->pat);
    s->pat = NULL;
}

/* Streams r once into st (and tl when non-NULL, which is then laid out). */
static int run_pass(trace_reader *r, run_stats *st, viz_timeline *tl, trace_error *err)
{
    memset(st, 0, sizeof *st);
    st->t_min = INT64_MAX;
    st->t_max = INT64_MIN;
    if (!(st->pat = trace_pattern_new()))
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    trace_stmt s;
    int rc;
    while ((rc = trace_reader_next(r, &s, err)) == 1) {
        st->n_stmts++;
        st->by_kind[s.kind]++;
        if (s.t != TRACE_TIME_NONE) {
            int64_t end = s.t + (s.dur != TRACE_TIME_NONE ? s.dur : 0);
            st->n_timed++;
            st->t_min = s.t < st->t_min ? s.t : st->t_min;
            st->t_max = end > st->t_max ? end : st->t_max;
        }
        if (trace_pattern_feed(st->pat, r->trace, &s, true) != 0)
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
        if (tl && viz_timeline_feed(tl, r->trace, &s, err) != 0)
            return -1;
    }
    if (rc < 0)
        return -1;
    return tl ? viz_timeline_end(tl, r->trace, r->source, err) : 0;
}

/* ------------------------------------------------------------------ */
/* Pieces of the page.                                                 */

static const char *const style =
    "body{font-family:Helvetica,Arial,sans-serif;margin:24px auto;max-width:1500px;color:#222;"
    "padding:0 16px}h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;"
    "padding-bottom:4px;margin-top:32px}table{border-collapse:collapse;margin:8px 0}"
    "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top;"
    "font-size:13px}th{background:#f3f3f3}.num{text-align:right}.fig{overflow:auto;"
    "border:1px solid #ddd;padding:4px;background:#fff}.fig svg{max-width:none}"
    ".race{color:#d62728;font-weight:bold}.clean{color:#2ca02c;font-weight:bold}"
    ".incomplete{color:#b8860b;font-weight:bold}.toc{font-size:13px}"
    "code,.mono{font-family:Menlo,Consolas,monospace;font-size:13px}.note{color:#666;"
    "font-size:13px}";

static void base64(FILE *out, const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        fputc(tab[(v >> 18) & 63], out);
        fputc(tab[(v >> 12) & 63], out);
        fputc(i + 1 < n ? tab[(v >> 6) & 63] : '=', out);
        fputc(i + 2 < n ? tab[v & 63] : '=', out);
    }
}

static void write_summary(FILE *out, const trace_run_info *info, const trace *t,
                          const run_stats *st)
{
    char when[64] = "";
    time_t c = (time_t)info->created;
    struct tm tm;
    if (gmtime_r(&c, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    fputs("<h2 id=\"run\">Run</h2>\n<table>\n", out);
    fprintf(out, "<tr><th>run</th><td>%lld</td></tr>\n<tr><th>name</th><td>", (long long)info->id);
    viz_html_escape(out, info->name);
    fputs("</td></tr>\n<tr><th>source</th><td>", out);
    viz_html_escape(out, info->source);
    fputs("</td></tr>\n<tr><th>status</th><td>", out);
    viz_html_escape(out, info->status);
    fprintf(out, "</td></tr>\n<tr><th>recorded</th><td>%s</td></tr>\n", when);
    fprintf(out, "<tr><th>statements</th><td>%llu</td></tr>\n", (unsigned long long)st->n_stmts);
    uint32_t n_dev = 0;
    for (uint32_t q = 0; q < t->n_queues; q++) {
        bool seen = false;
        for (uint32_t p = 0; p < q && !seen; p++)
            seen = t->queues[p].kind == TRACE_QUEUE_STREAM && t->queues[p].device == t->queues[q].device;
        n_dev += t->queues[q].kind == TRACE_QUEUE_STREAM && !seen;
    }
    fprintf(out, "<tr><th>queues</th><td>%u (%u host, %u streams on %u device%s)</td></tr>\n",
            t->n_queues, t->n_host_queues, t->n_queues - t->n_host_queues, n_dev,
            n_dev == 1 ? "" : "s");
    fprintf(out, "<tr><th>buffers</th><td>%u</td></tr>\n", t->n_buffers);
    if (st->n_timed) {
        char span[32];
        viz_ns_str((double)(st->t_max - st->t_min), span, sizeof span);
        fprintf(out, "<tr><th>time span</th><td>%s (%llu of %llu statements timed)</td></tr>\n",
                span, (unsigned long long)st->n_timed, (unsigned long long)st->n_stmts);
    } else {
        fputs("<tr><th>time span</th><td>no observed times</td></tr>\n", out);
    }
    fputs("<tr><th>by kind</th><td>", out);
    bool first = true;
    for (int k = 0; k < TRACE_KIND_COUNT; k++)
        if (st->by_kind[k]) {
            fprintf(out, "%s%s %llu", first ? "" : ", ", trace_kind_str((trace_kind)k),
                    (unsigned long long)st->by_kind[k]);
            first = false;
        }
    fputs("</td></tr>\n</table>\n", out);
    if (t->n_meta) {
        fputs("<h3>Metadata</h3>\n<table>\n", out);
        for (uint32_t i = 0; i < t->n_meta; i++) {
            fputs("<tr><th>", out);
            viz_html_escape(out, trace_str(t, t->meta[i].key));
            fputs("</th><td>", out);
            viz_html_escape(out, trace_str(t, t->meta[i].value));
            fputs("</td></tr>\n", out);
        }
        fputs("</table>\n", out);
    }
}

/* "label on queue (line N)" of a statement a finding names. */
static void ref_text(const trace *t, const trace_stmt_ref *r, char *buf, size_t cap)
{
    if (r->seq == TRACE_NO_SEQ) {
        buf[0] = '\0';
        return;
    }
    const char *q = r->queue < t->n_queues ? trace_str(t, t->queues[r->queue].name) : "?";
    const char *l = r->label != TRACE_NONE ? trace_str(t, r->label) : trace_kind_str(r->kind);
    if (r->line)
        snprintf(buf, cap, "%s on %s (line %u, seq %llu)", l, q, r->line,
                 (unsigned long long)r->seq);
    else
        snprintf(buf, cap, "%s on %s (seq %llu)", l, q, (unsigned long long)r->seq);
}

/* What a finding is about, in a few words. */
static void finding_what(const trace *t, const trace_finding *f, char *buf, size_t cap)
{
    const char *object = trace_finding_about(f->kind)->object;
    uint32_t b = f->buffer != TRACE_NONE ? f->buffer : f->root;
    switch (f->kind) {
    case TRACE_FINDING_RACE:
    case TRACE_FINDING_USE_AFTER_FREE:
        snprintf(buf, cap, "%s%s%s[%llu:%llu]", f->kind == TRACE_FINDING_RACE
                                                     ? check_race_word(f->race_type)
                                                     : "",
                 f->kind == TRACE_FINDING_RACE ? " on " : "",
                 b < t->n_buffers ? trace_str(t, t->buffers[b].name) : "?",
                 (unsigned long long)f->lo, (unsigned long long)f->hi);
        break;
    default:
        if (object && f->object != TRACE_NONE)
            snprintf(buf, cap, "%s %s", object, trace_str(t, f->object));
        else
            snprintf(buf, cap, "%s", f->text ? f->text : "");
        if (object && f->generation) {
            size_t n = strlen(buf);
            snprintf(buf + n, cap - n, ", generation %llu", (unsigned long long)f->generation);
        }
    }
}

/* The check's verdict, findings and fixes. */
static void write_findings(FILE *out, const trace *t, const trace_check_info *info,
                           bool checked_now, const trace_finding *f, size_t n)
{
    fputs("<h2 id=\"check\">Check</h2>\n<p class=\"note\">", out);
    if (checked_now) {
        fputs("This run was never checked (<code>syncsim check</code> stores its findings); the "
              "checker ran for this page.",
              out);
    } else {
        char when[64] = "";
        time_t c = (time_t)info->created;
        struct tm tm;
        if (gmtime_r(&c, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
        fprintf(out, "Checked by syncsim %s on %s: %llu statements.", info->version, when,
                (unsigned long long)info->statements);
    }
    fputs("</p>\n", out);
    check_coverage cov;
    const check_coverage *c = check_coverage_from_info(&cov, info);
    check_status st = check_status_of(info->findings, info->incomplete, c);
    static const char *const cls[] = { "clean", "race", "incomplete", "incomplete" };
    char verdict[1024];
    fprintf(out, "<p class=\"%s\">", cls[st]);
    viz_html_escape(out, check_verdict(verdict, sizeof verdict, t, info->statements, info->findings,
                                       info->incomplete, c, f, n));
    fputs("</p>\n", out);
    if (st != CHECK_FINDINGS)
        return;
    fputs("<table>\n<tr><th>#</th><th>kind</th><th>what</th><th>first</th><th>second</th>"
          "<th>fix</th></tr>\n",
          out);
    for (size_t i = 0; i < n && i < 500; i++) {
        char what[400], a[300], b[300];
        finding_what(t, &f[i], what, sizeof what);
        ref_text(t, &f[i].first, a, sizeof a);
        ref_text(t, &f[i].second, b, sizeof b);
        if (f[i].kind == TRACE_FINDING_HANG)
            snprintf(what, sizeof what, "%s", f[i].text ? f[i].text : "");
        fprintf(out, "<tr><td class=\"num\">%zu</td><td class=\"%s\">", i + 1,
                f[i].kind == TRACE_FINDING_RACE ? "race" : "");
        viz_html_escape(out, trace_finding_str(f[i].kind));
        fputs("</td><td>", out);
        viz_html_escape(out, what);
        fputs("</td><td>", out);
        viz_html_escape(out, a);
        fputs("</td><td>", out);
        viz_html_escape(out, b);
        fputs("</td><td>", out);
        viz_html_escape(out, f[i].fix ? f[i].fix : "");
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n", out);
    if (n > 500)
        fprintf(out, "<p class=\"note\">and %zu more (syncsim check DB --json lists all)</p>\n",
                n - 500);
}

/* ms with three decimals, and the change against base in per cent. */
static void change_cell(FILE *out, const check_timing *base, const check_timing *with)
{
    if (with->makespan_ns < 0) {
        fputs("<td>hangs</td>", out);
        return;
    }
    fprintf(out, "<td class=\"num\">%.3f ms (%+.2f %%)", (double)with->makespan_ns / 1e6,
            base->makespan_ns > 0 ? 100.0 * ((double)with->makespan_ns - (double)base->makespan_ns) /
                                        (double)base->makespan_ns
                                  : 0.0);
    if (base->per_iter_ns >= 0 && with->per_iter_ns >= 0)
        fprintf(out, "<br>%.3f ms/iter", (double)with->per_iter_ns / 1e6);
    fputs("</td>", out);
}

/* The advice (check/advise.c): every group of syncs, what removing it
 * buys, whether it is safe, what to put instead. */
static void write_advice(FILE *out, const char *pricer, const check_advice *a)
{
    fputs("<h2 id=\"advice\">Advice: the price of every sync</h2>\n<p>", out);
    fprintf(out, "Replayed by ");
    viz_html_escape(out, pricer ? pricer : "the pricer");
    fprintf(out, ": makespan %.3f ms", (double)a->base.makespan_ns / 1e6);
    if (a->base.per_iter_ns >= 0)
        fprintf(out, ", %.3f ms per iteration", (double)a->base.per_iter_ns / 1e6);
    fputs(". ", out);
    viz_html_escape(out, a->coverage);
    if (a->ordering_only)
        fputs(" (ordering only: no sync is called safe)", out);
    fprintf(out, ". The minimiser removes %llu of %llu synchronisations",
            (unsigned long long)a->n_removable, (unsigned long long)a->n_candidates);
    if (a->n_removable && a->all_safe.makespan_ns >= 0)
        fprintf(out, "; all together the run takes %.3f ms", (double)a->all_safe.makespan_ns / 1e6);
    fputs(". Sorted by what the advice buys; the timeline marks the syncs that can go (green) "
          "and those to replace (orange).</p>\n",
          out);
    fputs("<table>\n<tr><th>#</th><th>sync</th><th>where</th><th>count</th><th>holds</th>"
          "<th>on the critical path</th><th>without it</th><th>safe</th>"
          "<th>what removing all lets in</th><th>instead</th><th>buys</th></tr>\n",
          out);
    for (size_t i = 0; i < a->n && i < 200; i++) {
        const check_advice_item *it = &a->items[i];
        fprintf(out, "<tr><td class=\"num\">%zu</td><td class=\"mono\">", i + 1);
        viz_html_escape(out, it->what);
        fputs("</td><td class=\"mono\">", out);
        viz_html_escape(out, it->where);
        fprintf(out, "</td><td class=\"num\">%llu</td><td class=\"num\">%.3f ms%s</td>"
                     "<td class=\"num\">%.1f %%</td>",
                (unsigned long long)it->count, (double)it->held_ns / 1e6,
                it->held_recorded ? "" : " (replayed)",
                a->base.makespan_ns > 0 ? 100.0 * (double)it->critical_ns /
                                              (double)a->base.makespan_ns
                                        : 0.0);
        change_cell(out, &a->base, &it->without);
        fprintf(out, "<td class=\"%s\">", it->safety == CHECK_SAFE_ALL    ? "clean"
                                         : it->safety == CHECK_SAFE_NONE ? "race"
                                                                         : "incomplete");
        if (it->safety == CHECK_SAFE_SOME || it->safety == CHECK_SAFE_UNJUDGED)
            fprintf(out, "%s: %llu of %llu", check_safety_str(it->safety),
                    (unsigned long long)it->n_safe, (unsigned long long)it->count);
        else
            viz_html_escape(out, check_safety_str(it->safety));
        fputs("</td><td>", out);
        if (it->n_new) {
            fprintf(out, "%llu: ", (unsigned long long)it->n_new);
            viz_html_escape(out, it->finding ? it->finding : "");
        }
        fputs("</td><td>", out);
        viz_html_escape(out, it->replacement ? it->replacement : "");
        fputs("</td>", out);
        fprintf(out, "<td class=\"num\">%.3f ms</td></tr>\n", (double)it->buys_ns / 1e6);
    }
    fputs("</table>\n", out);
    if (a->n > 200)
        fprintf(out, "<p class=\"note\">and %zu more groups (syncsim advise DB --all)</p>\n",
                a->n - 200);
}

static void write_graph(FILE *out, trace_store *st, int64_t run, const char *db)
{
    fputs("<h2 id=\"graph\">Split graph</h2>\n", out);
    trace_graph g = { 0 };
    trace_error err = { 0 };
    if (trace_store_graph(st, run, &g, &err) != 0) {
        fputs("<p class=\"note\">cannot read the split graph: ", out);
        viz_html_escape(out, err.msg);
        fputs("</p>\n", out);
        return;
    }
    if (!g.n_nodes) {
        fputs("<p class=\"note\">This run stored no split graph (imported traces have none; "
              "<code>syncsim run</code> stores one).</p>\n",
              out);
        trace_graph_free(&g);
        return;
    }
    char title[300];
    snprintf(title, sizeof title, "%s, run %lld: %zu nodes in %zu splits", db, (long long)run,
             g.n_nodes, g.n_splits);
    viz_graph_opts o = { .title = title };
    char *svg = NULL;
    size_t len = 0;
    if (viz_graph_render(&g, &o, "svg", NULL, &svg, &len, &err) != 0) {
        fputs("<p class=\"note\">cannot draw the split graph: ", out);
        viz_html_escape(out, err.msg);
        fputs("</p>\n", out);
    } else {
        if (viz_graph_summarised(&g, &o))
            fprintf(out, "<p class=\"note\">%zu nodes: drawn one node per split "
                         "(<code>syncsim graph DB --full</code> draws every node).</p>\n",
                    g.n_nodes);
        fputs("<div class=\"fig\" id=\"split-graph\">\n", out);
        viz_svg_inline(out, svg, len, "g-");
        fputs("</div>\n", out);
        free(svg);
    }
    trace_graph_free(&g);
}

/* Draws a timeline inline: SVG, or a PNG in a data URI when merged. */
static void write_timeline_fig(FILE *out, viz_timeline *tl, const char *prefix, const char *id)
{
    char *pic = NULL;
    size_t len = 0;
    trace_error err = { 0 };
    const char *format = viz_timeline_default_format(tl);
    if (viz_timeline_render(tl, format, NULL, &pic, &len, &err) != 0) {
        fputs("<p class=\"note\">no timeline: ", out);
        viz_html_escape(out, err.msg);
        fputs("</p>\n", out);
        return;
    }
    fprintf(out, "<div class=\"fig\" id=\"%s\">\n", id);
    if (strcmp(format, "svg") == 0) {
        viz_svg_inline(out, pic, len, prefix);
    } else {
        fputs("<img alt=\"timeline\" src=\"data:image/png;base64,", out);
        base64(out, (const unsigned char *)pic, len);
        fputs("\">", out);
    }
    fputs("\n</div>\n", out);
    free(pic);
}

static void write_patterns(FILE *out, const trace *t, const run_stats *st)
{
    size_t n = trace_pattern_count(st->pat);
    if (!n)
        return;
    fputs("<h2 id=\"patterns\">Sync pattern per iteration</h2>\n<p class=\"note\">Per host and "
          "iteration (token= or iter=), in submission order: ",
          out);
    viz_html_escape(out, trace_pattern_legend);
    fputs(". Fewer s, more overlap; every s removed must still leave the trace clean.</p>\n"
          "<table>\n<tr><th>host</th><th>iterations</th><th>count</th><th>pattern</th></tr>\n",
          out);
    for (size_t i = 0; i < n;) {
        trace_pattern_iter a = trace_pattern_at(st->pat, i), last = a;
        size_t j = i + 1;
        for (; j < n; j++) {
            trace_pattern_iter b = trace_pattern_at(st->pat, j);
            if (b.host != a.host || strcmp(b.before, a.before) != 0)
                break;
            last = b;
        }
        fputs("<tr><td>", out);
        viz_html_escape(out, trace_str(t, t->queues[a.host].name));
        fputs("</td><td>", out);
        viz_html_escape(out, a.iter);
        if (j - i > 1) {
            fputs(" &ndash; ", out);
            viz_html_escape(out, last.iter);
        }
        fprintf(out, "</td><td class=\"num\">%zu</td><td class=\"mono\">", j - i);
        viz_html_escape(out, a.before);
        fputs("</td></tr>\n", out);
        i = j;
    }
    fputs("</table>\n", out);
}

/* ------------------------------------------------------------------ */
/* Derived runs (replays, what-ifs).                                   */

/* One derived run, read once on the report's connection. */
typedef struct derived {
    trace_derived_run d;
    run_stats st;
    viz_timeline *tl;
    trace *t;               /* its declarations and metadata */
    trace_check_info check;
    char error[sizeof(((trace_error *)0)->msg)];
} derived;

static void read_derived(trace_store *st, const char *db, int64_t run, derived *x)
{
    trace_reader r;
    trace_error err = { 0 };
    char title[300];
    snprintf(title, sizeof title, "%s, run %lld (%s %lld)", db, (long long)x->d.id, x->d.key,
             (long long)run);
    viz_timeline_opts o = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE, .title = title };
    if (trace_store_reader(st, x->d.id, &r, &err) != 0) {
        snprintf(x->error, sizeof x->error, "%s", err.msg);
        return;
    }
    x->tl = viz_timeline_new(&o);
    trace_finding *f = NULL;
    size_t n = 0;
    if (!x->tl || run_pass(&r, &x->st, x->tl, &err) != 0 ||
        trace_store_load_check(st, x->d.id, r.trace, &x->check, &f, &n, &err) != 0 ||
        viz_timeline_add_findings(x->tl, r.trace, &x->check, f, n) != 0) {
        snprintf(x->error, sizeof x->error, "%s", err.msg[0] ? err.msg : "out of memory");
        viz_timeline_free(x->tl);
        x->tl = NULL;
    }
    trace_findings_free(f, n);
    /* keep the declarations and metadata: take them from the reader */
    x->t = r.trace;
    r.owns_trace = false;
    trace_reader_close(&r);
}

/* What a derived run's check said, in a table cell. */
static const char *check_cell(const trace_check_info *c, char *buf, size_t cap)
{
    if (!c->id)
        return "not checked";
    check_coverage cov;
    check_status st = check_status_of(c->findings, c->incomplete, check_coverage_from_info(&cov, c));
    if (st == CHECK_FINDINGS)
        snprintf(buf, cap, "%llu finding%s", (unsigned long long)c->findings,
                 c->findings == 1 ? "" : "s");
    else
        snprintf(buf, cap, "%s", check_status_str(st));
    return buf;
}

static void write_derived(FILE *out, trace_store *st, const char *db, int64_t run,
                          const run_stats *base)
{
    trace_derived_run *d = NULL;
    size_t n = 0;
    trace_error err = { 0 };
    if (trace_store_derived(st, run, &d, &n, &err) != 0 || !n) {
        free(d);
        return;
    }
    derived *x = calloc(n, sizeof *x);
    int64_t *span = calloc(n + 1, sizeof *span);
    if (!x || !span) {
        free(x);
        free(span);
        free(d);
        return;
    }
    fputs("<h2 id=\"derived\">Replays and what-ifs</h2>\n<p class=\"note\">Runs whose metadata "
          "names this run as their source (run_meta key source_run or replay_of). A what-if "
          "that drops syncs is only a gain when its check is clean.</p>\n",
          out);
    span[0] = base->n_timed ? base->t_max - base->t_min : -1;
    fputs("<table>\n<tr><th>run</th><th>relation</th><th>metadata</th><th>statements</th>"
          "<th>makespan</th><th>vs. this run</th><th>check</th></tr>\n",
          out);
    for (size_t i = 0; i < n; i++) {
        x[i].d = d[i];
        read_derived(st, db, run, &x[i]);
        span[i + 1] = -1;
        fprintf(out, "<tr><td>%lld</td><td>", (long long)d[i].id);
        viz_html_escape(out, d[i].key);
        fputs("</td><td>", out);
        if (x[i].error[0]) {
            viz_html_escape(out, x[i].error);
            fputs("</td><td></td><td></td><td></td><td></td></tr>\n", out);
            continue;
        }
        for (uint32_t m = 0; x[i].t && m < x[i].t->n_meta; m++) {
            fputs(m ? ", " : "", out);
            viz_html_escape(out, trace_str(x[i].t, x[i].t->meta[m].key));
            fputc('=', out);
            viz_html_escape(out, trace_str(x[i].t, x[i].t->meta[m].value));
        }
        char ms[32] = "-", rel[32] = "-", chk[64];
        const run_stats *s = &x[i].st;
        if (s->n_timed) {
            span[i + 1] = s->t_max - s->t_min;
            viz_ns_str((double)(span[i + 1]), ms, sizeof ms);
            if (span[0] > 0)
                snprintf(rel, sizeof rel, "%+.1f%%",
                         100.0 * (double)(span[i + 1] - span[0]) / (double)span[0]);
        }
        const char *cc = check_cell(&x[i].check, chk, sizeof chk);
        fprintf(out, "</td><td class=\"num\">%llu</td><td class=\"num\">%s</td><td class=\"num\">"
                     "%s</td><td class=\"%s\">",
                (unsigned long long)s->n_stmts, ms, rel,
                x[i].check.findings ? "race" : x[i].check.id ? "clean" : "note");
        viz_html_escape(out, cc);
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n", out);
    /* Makespans as bars: this run first. */
    int64_t max = 0;
    for (size_t i = 0; i <= n; i++)
        max = span[i] > max ? span[i] : max;
    if (max > 0) {
        int h = 26 * (int)(n + 1) + 10;
        fprintf(out, "<div class=\"fig\" id=\"derived-bars\"><svg xmlns=\"http://www.w3.org/2000/svg\" "
                     "width=\"760\" height=\"%d\" font-family=\"Helvetica\" font-size=\"12\">\n", h);
        for (size_t i = 0; i <= n; i++) {
            if (span[i] < 0)
                continue;
            double w = 520.0 * (double)span[i] / (double)max;
            char ms[32];
            viz_ns_str((double)(span[i]), ms, sizeof ms);
            int y = 6 + 26 * (int)i;
            fprintf(out, "<text x=\"4\" y=\"%d\">%s %lld</text>", y + 14, i ? "run" : "this run",
                    (long long)(i ? d[i - 1].id : run));
            fprintf(out, "<rect x=\"120\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"%s\"/>", y, w,
                    i ? (x[i - 1].check.findings ? "#d62728" : "#f58518") : "#4c78a8");
            fprintf(out, "<text x=\"%.1f\" y=\"%d\">%s%s</text>\n", 126 + w, y + 14, ms,
                    i && x[i - 1].check.findings ? " (has findings)" : "");
        }
        fputs("</svg></div>\n", out);
    }
    for (size_t i = 0; i < n && i < 8; i++) {
        char prefix[32], id[32];
        if (!x[i].tl)
            continue;
        fprintf(out, "<h3>Run %lld</h3>\n", (long long)d[i].id);
        snprintf(prefix, sizeof prefix, "d%zu-", i);
        snprintf(id, sizeof id, "timeline-run-%lld", (long long)d[i].id);
        write_timeline_fig(out, x[i].tl, prefix, id);
    }
    for (size_t i = 0; i < n; i++) {
        viz_timeline_free(x[i].tl);
        stats_free(&x[i].st);
        trace_free(x[i].t);
    }
    free(x);
    free(span);
    free(d);
}

/* ------------------------------------------------------------------ */

static void write_contents(FILE *out, bool advice, bool patterns, bool any_derived)
{
    fputs("<p class=\"toc\"><a href=\"#run\">run</a> &middot; <a href=\"#check\">check</a> ",
          out);
    if (advice)
        fputs("&middot; <a href=\"#advice\">advice</a> ", out);
    fputs("&middot; <a href=\"#timeline\">timeline</a> &middot; <a href=\"#graph\">split "
          "graph</a>",
          out);
    if (patterns)
        fputs(" &middot; <a href=\"#patterns\">sync patterns</a>", out);
    if (any_derived)
        fputs(" &middot; <a href=\"#derived\">replays and what-ifs</a>", out);
    fputs("</p>\n", out);
}

int viz_report_write(const char *db, const viz_report_opts *o, const char *out_path,
                     trace_error *err)
{
    trace_source src;
    trace_source_opts so = { .run = o ? o->run : 0 };
    if (trace_source_open(&src, db, &so, err) != 0)
        return -1;
    if (!src.store) {
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: a %s, not a trace database (import it first: syncsim import)", db,
                        src.format->name);
        trace_source_close(&src);
        return -1;
    }
    trace_store *st = src.store;
    int64_t run = src.run;
    trace_run_info *info = NULL;
    trace_finding *f = NULL;
    size_t n_f = 0;
    trace_check_info check;
    bool checked_now = false;
    run_stats stats = { 0 };
    viz_timeline *tl = NULL;
    trace_derived_run *dr = NULL;
    size_t n_dr = 0;
    char *page = NULL;
    size_t page_len = 0;
    FILE *out = NULL;
    int rc = -1;
    const trace *t = src.reader.trace;
    trace *whole = NULL;
    check_advice advice;
    bool have_advice = false;
    if (trace_store_run(st, run, &info, err) != 0)
        goto done;
    if (o && o->watch)
        o->watch(o->watch_ctx, &src.reader, info->n_stmts);
    viz_timeline_opts to = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE };
    if (!(o && o->no_timeline) && !(tl = viz_timeline_new(&to))) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    if (run_pass(&src.reader, &stats, tl, err) != 0 ||
        viz_findings_of(&src, &check, &f, &n_f, &checked_now, err) != 0)
        goto done;
    if (tl) {
        snprintf(tl->title, sizeof tl->title, "%s, run %lld", db, (long long)run);
        if (viz_timeline_add_findings(tl, t, &check, f, n_f) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto done;
        }
    }
    /* The advice needs the run in memory (it replays and checks what-ifs). */
    if (o && o->pricer) {
        check_advise_opts ao = { .pricer = o->pricer };
        if (trace_reader_rewind(&src.reader, err) != 0 ||
            trace_source_load(&src, &whole, err) != 0 || check_advise(whole, &ao, &advice, err) != 0)
            goto done;
        have_advice = true;
        if (tl && viz_timeline_add_advice(tl, &advice) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto done;
        }
    }
    if (trace_store_derived(st, run, &dr, &n_dr, err) != 0)
        goto done;
    out = open_memstream(&page, &page_len);
    if (!out) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>syncsim "
          "report: ",
          out);
    viz_html_escape(out, db);
    fprintf(out, " run %lld</title>\n<style>%s</style>\n</head>\n<body>\n<h1>syncsim report: ",
            (long long)run, style);
    viz_html_escape(out, db);
    fprintf(out, ", run %lld", (long long)run);
    fputs("</h1>\n", out);
    write_contents(out, have_advice, trace_pattern_count(stats.pat) > 0, n_dr > 0);
    write_summary(out, info, t, &stats);
    write_findings(out, t, &check, checked_now, f, n_f);
    if (have_advice)
        write_advice(out, o->pricer->name, &advice);
    fputs("<h2 id=\"timeline\">Timeline</h2>\n", out);
    if (!tl)
        fputs("<p class=\"note\">left out (--no-timeline)</p>\n", out);
    else
        write_timeline_fig(out, tl, "t-", "timeline-fig");
    write_graph(out, st, run, db);
    write_patterns(out, t, &stats);
    write_derived(out, st, db, run, &stats);
    fprintf(out, "<p class=\"note\">Made by syncsim %s (<code>syncsim report</code>); every "
                 "figure comes from the database.</p>\n</body>\n</html>\n",
            SYNCSIM_VERSION);
    if (fclose(out) != 0) {
        out = NULL;
        trace_error_set(err, TRACE_ENOMEM, "out of memory writing the report");
        goto done;
    }
    out = NULL;
    rc = trace_out_write(out_path, page, page_len, err);
done:
    if (out)
        fclose(out);
    free(page);
    free(dr);
    if (have_advice)
        check_advice_free(&advice);
    trace_free(whole);
    stats_free(&stats);
    viz_timeline_free(tl);
    trace_findings_free(f, n_f);
    trace_run_info_free(info, info ? 1 : 0);
    trace_source_close(&src);
    return rc;
}
