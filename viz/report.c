/*
 * report.c -- one self-contained HTML page about a run.
 *
 * The page is meant to be mailed or attached to a bug: it refers to no
 * other file (styles inline, pictures inline as SVG, or as a base64 PNG
 * when the timeline is too large for SVG) and runs no script. Sections, in
 * order:
 *
 *   1. the run: name, source, status, counts, time span, statements by
 *      kind, and its metadata (policy, devices, model ... as the producer
 *      wrote them);
 *   2. findings with their fixes: those `syncsim check DB` stored for the
 *      run, else the checker's, run here;
 *   3. the split graph (viz/graph.c), when the run stored one;
 *   4. the timeline (viz/timeline.c), with the findings' races in red;
 *   5. the sync pattern per iteration, when statements carry token= or
 *      iter=: per host and iteration the letters s (host sync, wait, await
 *      or barrier), a (async copy submitted by the host), g (graph or op
 *      launch submitted by the host), consecutive equal iterations folded;
 *   6. runs derived from this one: any run whose run_meta has source_run
 *      or replay_of equal to this run's id (replays, what-ifs). Their
 *      makespans are compared with this run's in a bar chart and each gets
 *      its timeline. The section is left out when there are none.
 *
 * The statements are streamed once for the summary and the patterns; the
 * timeline reads them once more (and the checker once, when the database
 * holds no findings for the run).
 */
#include "viz/timeline_int.h"

#include "check/check.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* Small JSON lookups in a finding's one-object text.                  */

/* The string or number after "key": within json (from `after`'s first
 * occurrence on, when after is non-NULL). Strings are unescaped. */
static int json_val(const char *json, const char *after, const char *key, char *buf, size_t cap)
{
    const char *p = json;
    if (after) {
        char pat[64];
        snprintf(pat, sizeof pat, "\"%s\"", after);
        p = strstr(json, pat);
        if (!p)
            return -1;
        p += strlen(pat);
    }
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    p = strstr(p, pat);
    if (!p || cap == 0)
        return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    size_t n = 0;
    if (*p == '"') {
        for (p++; *p && *p != '"' && n + 1 < cap; p++) {
            if (*p == '\\' && p[1]) {
                p++;
                buf[n++] = *p == 'n' ? ' ' : *p;
            } else {
                buf[n++] = *p;
            }
        }
    } else if (*p == '[') { /* an array: copied as written */
        int depth = 0;
        for (; *p && n + 1 < cap; p++) {
            buf[n++] = *p;
            depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
            if (depth == 0)
                break;
        }
    } else {
        while (*p && *p != ',' && *p != '}' && n + 1 < cap)
            buf[n++] = *p++;
    }
    buf[n] = '\0';
    return 0;
}

/* "label (queue, line N)" of a finding side. */
static void side_text(const char *json, const char *side, char *buf, size_t cap)
{
    char label[128] = "", queue[64] = "", line[24] = "", seq[24] = "";
    json_val(json, side, "queue", queue, sizeof queue);
    json_val(json, side, "label", label, sizeof label);
    json_val(json, side, "line", line, sizeof line);
    json_val(json, side, "seq", seq, sizeof seq);
    if (*line)
        snprintf(buf, cap, "%s on %s (line %s)", *label ? label : "?", queue, line);
    else
        snprintf(buf, cap, "%s on %s (#%s)", *label ? label : "?", queue, seq);
}

/* ------------------------------------------------------------------ */
/* The statements: summary and sync patterns, one streaming pass.      */

typedef struct iter_pattern {
    uint32_t host;          /* queue index */
    char iter[48];
    char *letters;
    size_t n, cap;
} iter_pattern;

typedef struct run_stats {
    uint64_t n_stmts, by_kind[TRACE_KIND_COUNT], n_timed;
    int64_t t_min, t_max;
    iter_pattern *pat;
    size_t n_pat, cap_pat;
} run_stats;

static void stats_free(run_stats *s)
{
    for (size_t i = 0; i < s->n_pat; i++)
        free(s->pat[i].letters);
    free(s->pat);
}

static char pattern_letter(const trace *t, const trace_stmt *s, uint32_t *host)
{
    if (t->queues[s->queue].kind == TRACE_QUEUE_HOST) {
        *host = s->queue;
        return s->kind == TRACE_SYNC || s->kind == TRACE_WAIT || s->kind == TRACE_AWAIT ||
                       s->kind == TRACE_BARRIER
                   ? 's'
                   : 0;
    }
    *host = trace_submitter(t, s);
    if (*host == TRACE_NONE)
        return 0;
    if (s->kind == TRACE_COPY)
        return 'a';
    return s->kind == TRACE_OP || s->kind == TRACE_COLLECTIVE ? 'g' : 0;
}

static int add_letter(run_stats *st, uint32_t host, const char *iter, char ch)
{
    iter_pattern *p = NULL;
    /* The current iteration of a host is almost always the last one added. */
    for (size_t i = st->n_pat; i-- > 0;)
        if (st->pat[i].host == host) {
            if (strcmp(st->pat[i].iter, iter) == 0)
                p = &st->pat[i];
            break;
        }
    if (!p) {
        if (st->n_pat == st->cap_pat) {
            size_t c = st->cap_pat ? st->cap_pat * 2 : 32;
            iter_pattern *np = realloc(st->pat, c * sizeof *np);
            if (!np)
                return -1;
            st->pat = np;
            st->cap_pat = c;
        }
        p = &st->pat[st->n_pat++];
        memset(p, 0, sizeof *p);
        p->host = host;
        snprintf(p->iter, sizeof p->iter, "%s", iter);
    }
    if (p->n + 2 > p->cap) {
        size_t c = p->cap ? p->cap * 2 : 16;
        char *np = realloc(p->letters, c);
        if (!np)
            return -1;
        p->letters = np;
        p->cap = c;
    }
    p->letters[p->n++] = ch;
    p->letters[p->n] = '\0';
    return 0;
}

static int collect_stats(trace_reader *r, run_stats *st, trace_error *err)
{
    memset(st, 0, sizeof *st);
    st->t_min = INT64_MAX;
    st->t_max = INT64_MIN;
    uint32_t *cur = NULL; /* per host queue: the iteration's string id */
    uint32_t *last_g = NULL; /* per host queue: the stream of its last letter if g */
    size_t cap_cur = 0;
    trace_stmt s;
    int rc;
    while ((rc = trace_reader_next(r, &s, err)) == 1) {
        const trace *t = r->trace;
        st->n_stmts++;
        st->by_kind[s.kind]++;
        if (s.t != TRACE_TIME_NONE) {
            int64_t end = s.t + (s.dur != TRACE_TIME_NONE ? s.dur : 0);
            st->n_timed++;
            st->t_min = s.t < st->t_min ? s.t : st->t_min;
            st->t_max = end > st->t_max ? end : st->t_max;
        }
        uint32_t host = TRACE_NONE;
        char ch = pattern_letter(t, &s, &host);
        if (host == TRACE_NONE)
            continue;
        if (host >= cap_cur) {
            size_t c = t->n_queues + 8;
            uint32_t *nc = realloc(cur, c * sizeof *nc);
            if (nc)
                cur = nc;
            uint32_t *ng = realloc(last_g, c * sizeof *ng);
            if (ng)
                last_g = ng;
            if (!nc || !ng)
                goto oom;
            for (size_t i = cap_cur; i < c; i++)
                cur[i] = last_g[i] = TRACE_NONE;
            cap_cur = c;
        }
        for (uint32_t a = 0; a < s.n_attr; a++) {
            const char *k = trace_str(t, s.attr[a].key);
            if (strcmp(k, "token") == 0 || strcmp(k, "iter") == 0)
                cur[host] = s.attr[a].value;
        }
        /* A graph launched op by op (one statement per kernel) is one g. */
        if (ch == 'g' && last_g[host] == s.queue)
            continue;
        if (ch)
            last_g[host] = ch == 'g' ? s.queue : TRACE_NONE;
        if (ch && cur[host] != TRACE_NONE && add_letter(st, host, trace_str(t, cur[host]), ch) != 0)
            goto oom;
    }
    free(cur);
    free(last_g);
    return rc < 0 ? -1 : 0;
oom:
    free(cur);
    free(last_g);
    return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
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

static void fmt_ns(char *buf, size_t cap, int64_t ns)
{
    if (ns >= 2000000000)
        snprintf(buf, cap, "%.3f s", ns / 1e9);
    else if (ns >= 2000000)
        snprintf(buf, cap, "%.3f ms", ns / 1e6);
    else if (ns >= 2000)
        snprintf(buf, cap, "%.2f us", ns / 1e3);
    else
        snprintf(buf, cap, "%lld ns", (long long)ns);
}

static void write_summary(FILE *out, const trace_run_info *info, const trace *t,
                          const run_stats *st)
{
    char when[64] = "";
    time_t c = (time_t)info->created;
    struct tm tm;
    if (gmtime_r(&c, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    fputs("<h2>Run</h2>\n<table>\n", out);
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
        fmt_ns(span, sizeof span, st->t_max - st->t_min);
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

static void write_findings(FILE *out, const trace_finding_row *rows, size_t n, bool stored)
{
    fputs("<h2>Findings</h2>\n", out);
    fprintf(out, "<p class=\"note\">%s</p>\n",
            stored ? "As stored by <code>syncsim check</code> for this run."
                   : "From the checker, run for this report (the database holds no findings "
                     "for this run).");
    if (!n) {
        fputs("<p class=\"clean\">clean: no races, hangs, unrecorded waits or uses after "
              "free</p>\n",
              out);
        return;
    }
    size_t races = 0;
    for (size_t i = 0; i < n; i++)
        races += strcmp(rows[i].kind, "race") == 0;
    fprintf(out, "<p class=\"race\">%zu finding%s (%zu race%s)</p>\n", n, n == 1 ? "" : "s", races,
            races == 1 ? "" : "s");
    fputs("<table>\n<tr><th>#</th><th>kind</th><th>what</th><th>first</th><th>second</th>"
          "<th>fix</th></tr>\n",
          out);
    for (size_t i = 0; i < n && i < 500; i++) {
        const char *j = rows[i].json;
        char type[16] = "", buffer[128] = "", range[64] = "", what[300] = "", fix[600] = "";
        char a[256] = "", b[256] = "";
        json_val(j, NULL, "fix", fix, sizeof fix);
        if (strcmp(rows[i].kind, "race") == 0 || strcmp(rows[i].kind, "use-after-free") == 0) {
            json_val(j, NULL, "type", type, sizeof type);
            json_val(j, NULL, "buffer", buffer, sizeof buffer);
            json_val(j, NULL, "range", range, sizeof range);
            snprintf(what, sizeof what, "%s%s%s bytes %s", type, *type ? " on " : "", buffer, range);
            side_text(j, "first", a, sizeof a);
            side_text(j, "second", b, sizeof b);
        } else if (strcmp(rows[i].kind, "wait-unrecorded") == 0) {
            char ev[96] = "";
            json_val(j, NULL, "event", ev, sizeof ev);
            snprintf(what, sizeof what, "wait on event %s that nothing recorded before", ev);
            side_text(j, "at", b, sizeof b);
        } else if (strcmp(rows[i].kind, "hang") == 0) {
            json_val(j, NULL, "blocked", what, sizeof what);
        } else if (strcmp(rows[i].kind, "collective-mismatch") == 0) {
            char comm[96] = "", gen[24] = "";
            json_val(j, NULL, "comm", comm, sizeof comm);
            json_val(j, NULL, "generation", gen, sizeof gen);
            snprintf(what, sizeof what, "communicator %s, generation %s", comm, gen);
        } else {
            snprintf(what, sizeof what, "%s", j);
        }
        fprintf(out, "<tr><td class=\"num\">%zu</td><td class=\"%s\">", i + 1,
                strcmp(rows[i].kind, "race") == 0 ? "race" : "");
        viz_html_escape(out, rows[i].kind);
        fputs("</td><td>", out);
        viz_html_escape(out, what);
        fputs("</td><td>", out);
        viz_html_escape(out, a);
        fputs("</td><td>", out);
        viz_html_escape(out, b);
        fputs("</td><td>", out);
        viz_html_escape(out, fix);
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n", out);
    if (n > 500)
        fprintf(out, "<p class=\"note\">and %zu more (syncsim check DB --json lists all)</p>\n",
                n - 500);
}

static void write_graph(FILE *out, trace_store *st, int64_t run, const char *db)
{
    fputs("<h2>Split graph</h2>\n", out);
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
    if (!st->n_pat)
        return;
    fputs("<h2>Sync pattern per iteration</h2>\n<p class=\"note\">Per host and iteration "
          "(token= or iter=), in submission order: <b>s</b> host sync/wait, <b>a</b> async "
          "copy submitted by the host, <b>g</b> graph/op launch submitted by the host "
          "(consecutive ops launched on one stream count as one g). "
          "Fewer s, more overlap; every s removed must still leave the trace clean.</p>\n"
          "<table>\n<tr><th>host</th><th>iterations</th><th>count</th><th>pattern</th></tr>\n",
          out);
    for (size_t i = 0; i < st->n_pat;) {
        size_t j = i + 1;
        while (j < st->n_pat && st->pat[j].host == st->pat[i].host &&
               strcmp(st->pat[j].letters, st->pat[i].letters) == 0)
            j++;
        fputs("<tr><td>", out);
        viz_html_escape(out, trace_str(t, t->queues[st->pat[i].host].name));
        fputs("</td><td>", out);
        viz_html_escape(out, st->pat[i].iter);
        if (j - i > 1) {
            fputs(" &ndash; ", out);
            viz_html_escape(out, st->pat[j - 1].iter);
        }
        fprintf(out, "</td><td class=\"num\">%zu</td><td class=\"mono\">", j - i);
        viz_html_escape(out, st->pat[i].letters);
        fputs("</td></tr>\n", out);
        i = j;
    }
    fputs("</table>\n", out);
}

/* ------------------------------------------------------------------ */
/* Derived runs (replays, what-ifs).                                   */

typedef struct derived_run {
    int64_t id;
    char key[32];
} derived_run;

static int find_derived(trace_store *st, int64_t run, derived_run **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3 *db = trace_store_db(st);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT DISTINCT run, key FROM run_meta WHERE key IN "
                               "('source_run', 'replay_of') AND CAST(value AS INTEGER) = ?1 "
                               "AND run <> ?1 ORDER BY run",
                           -1, &q, NULL) != SQLITE_OK)
        return 0; /* no run_meta table: nothing derived */
    sqlite3_bind_int64(q, 1, run);
    size_t cap = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            derived_run *p = realloc(*out, cap * sizeof *p);
            if (!p)
                break;
            *out = p;
        }
        (*out)[*n].id = sqlite3_column_int64(q, 0);
        snprintf((*out)[*n].key, sizeof (*out)[*n].key, "%s", (const char *)sqlite3_column_text(q, 1));
        (*n)++;
    }
    sqlite3_finalize(q);
    return 0;
}

static int run_span(const char *db, int64_t run, run_stats *st, trace **meta_of, trace_error *err)
{
    trace_reader r;
    if (trace_open_any(db, run, &r, err) != 0)
        return -1;
    int rc = collect_stats(&r, st, err);
    if (rc == 0 && meta_of && r.owns_trace) {
        /* keep the declarations and metadata: take them from the reader */
        *meta_of = r.trace;
        r.owns_trace = false;
    }
    trace_reader_close(&r);
    return rc;
}

static void write_derived(FILE *out, trace_store *st, const char *db, int64_t run,
                          const run_stats *base)
{
    derived_run *d = NULL;
    size_t n = 0;
    find_derived(st, run, &d, &n);
    if (!n) {
        free(d);
        return;
    }
    fputs("<h2>Replays and what-ifs</h2>\n<p class=\"note\">Runs whose metadata names this run "
          "as their source (run_meta key source_run or replay_of).</p>\n",
          out);
    int64_t *span = calloc(n + 1, sizeof *span);
    if (!span) {
        free(d);
        return;
    }
    span[0] = base->n_timed ? base->t_max - base->t_min : -1;
    fputs("<table>\n<tr><th>run</th><th>relation</th><th>metadata</th><th>statements</th>"
          "<th>makespan</th><th>vs. this run</th></tr>\n",
          out);
    for (size_t i = 0; i < n; i++) {
        run_stats s;
        trace *t = NULL;
        trace_error err = { 0 };
        span[i + 1] = -1;
        fprintf(out, "<tr><td>%lld</td><td>", (long long)d[i].id);
        viz_html_escape(out, d[i].key);
        fputs("</td><td>", out);
        if (run_span(db, d[i].id, &s, &t, &err) != 0) {
            viz_html_escape(out, err.msg);
            fputs("</td><td></td><td></td><td></td></tr>\n", out);
            trace_free(t);
            continue;
        }
        for (uint32_t m = 0; t && m < t->n_meta; m++) {
            fputs(m ? ", " : "", out);
            viz_html_escape(out, trace_str(t, t->meta[m].key));
            fputc('=', out);
            viz_html_escape(out, trace_str(t, t->meta[m].value));
        }
        char ms[32] = "-", rel[32] = "-";
        if (s.n_timed) {
            span[i + 1] = s.t_max - s.t_min;
            fmt_ns(ms, sizeof ms, span[i + 1]);
            if (span[0] > 0)
                snprintf(rel, sizeof rel, "%+.1f%%", 100.0 * (double)(span[i + 1] - span[0]) / (double)span[0]);
        }
        fprintf(out, "</td><td class=\"num\">%llu</td><td class=\"num\">%s</td><td class=\"num\">%s"
                     "</td></tr>\n",
                (unsigned long long)s.n_stmts, ms, rel);
        stats_free(&s);
        trace_free(t);
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
            fmt_ns(ms, sizeof ms, span[i]);
            int y = 6 + 26 * (int)i;
            fprintf(out, "<text x=\"4\" y=\"%d\">%s %lld</text>", y + 14, i ? "run" : "this run",
                    (long long)(i ? d[i - 1].id : run));
            fprintf(out, "<rect x=\"120\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"%s\"/>", y, w,
                    i ? "#f58518" : "#4c78a8");
            fprintf(out, "<text x=\"%.1f\" y=\"%d\">%s</text>\n", 126 + w, y + 14, ms);
        }
        fputs("</svg></div>\n", out);
    }
    for (size_t i = 0; i < n && i < 8; i++) {
        viz_timeline *tl = NULL;
        trace_error err = { 0 };
        char title[300], prefix[32], id[32];
        snprintf(title, sizeof title, "%s, run %lld (%s %lld)", db, (long long)d[i].id, d[i].key,
                 (long long)run);
        viz_timeline_opts o = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE, .title = title,
                                .no_findings = true };
        fprintf(out, "<h3>Run %lld</h3>\n", (long long)d[i].id);
        if (viz_timeline_open(db, d[i].id, &o, &tl, &err) != 0) {
            fputs("<p class=\"note\">", out);
            viz_html_escape(out, err.msg);
            fputs("</p>\n", out);
            continue;
        }
        snprintf(prefix, sizeof prefix, "d%zu-", i);
        snprintf(id, sizeof id, "timeline-run-%lld", (long long)d[i].id);
        write_timeline_fig(out, tl, prefix, id);
        viz_timeline_free(tl);
    }
    free(span);
    free(d);
}

/* ------------------------------------------------------------------ */

/* The run's findings: stored ones, else the checker's. */
static int get_findings(trace_store *st, const char *db, int64_t run, trace_finding_row **rows,
                        size_t *n, bool *stored, trace_error *err)
{
    if (trace_store_load_findings(st, run, rows, n, err) != 0)
        return -1;
    *stored = *n > 0;
    if (*n > 0)
        return 0;
    trace_finding_rows_free(*rows, *n);
    *rows = NULL;
    trace_reader r;
    if (trace_open_any(db, run, &r, err) != 0)
        return -1;
    check_options opt = { .max_findings = 10000 };
    check_report *rep = NULL;
    int rc = check_trace(&r, &opt, &rep, err);
    if (rc == 0) {
        trace_finding_row *cr = NULL;
        size_t cn = 0;
        if (check_report_rows(rep, &cr, &cn) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            rc = -1;
        } else {
            /* Copy into rows that trace_finding_rows_free can release. */
            *rows = calloc(cn ? cn : 1, sizeof **rows);
            for (size_t i = 0; *rows && i < cn; i++) {
                (*rows)[i].kind = strdup(cr[i].kind);
                (*rows)[i].json = strdup(cr[i].json);
                (*rows)[i].first_seq = cr[i].first_seq;
                (*rows)[i].second_seq = cr[i].second_seq;
            }
            *n = *rows ? cn : 0;
            check_report_rows_free(cr, cn);
        }
        check_report_free(rep);
    }
    trace_reader_close(&r);
    return rc;
}

int viz_report_write(const char *db, const viz_report_opts *o, const char *out_path,
                     trace_error *err)
{
    trace_source src;
    trace_source_opts so = { .run = o ? o->run : 0 };
    if (trace_source_open(&src, db, &so, err) != 0)
        return -1;
    if (!src.store) {
        trace_source_close(&src);
        return trace_error_set(err, TRACE_ENOTTRACE, "%s: a %s, not a trace database (import it "
                               "first: syncsim import)", db, src.format->name), -1;
    }
    trace_store *st = src.store;
    int64_t run = src.run;
    trace_run_info *runs = NULL, *info = NULL;
    size_t n_runs = 0;
    trace_finding_row *rows = NULL;
    size_t n_rows = 0;
    bool stored = false;
    run_stats stats = { 0 };
    trace *t = NULL;
    char *page = NULL;
    size_t page_len = 0;
    FILE *out = NULL;
    int rc = -1;
    if (run <= 0) {
        trace_error_set(err, TRACE_ENORUN, "%s: the database holds no run", db);
        goto done;
    }
    if (trace_store_runs(st, &runs, &n_runs, err) != 0)
        goto done;
    for (size_t i = 0; i < n_runs; i++)
        if (runs[i].id == run)
            info = &runs[i];
    if (!info) {
        trace_error_set(err, TRACE_ENORUN, "%s: no run %lld (table runs)", db, (long long)run);
        goto done;
    }
    if (run_span(db, run, &stats, &t, err) != 0 ||
        get_findings(st, db, run, &rows, &n_rows, &stored, err) != 0)
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
    write_summary(out, info, t, &stats);
    write_findings(out, rows, n_rows, stored);
    write_graph(out, st, run, db);
    fputs("<h2>Timeline</h2>\n", out);
    if (o && o->no_timeline) {
        fputs("<p class=\"note\">left out (--no-timeline)</p>\n", out);
    } else {
        viz_timeline *tl = NULL;
        viz_timeline_opts to = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE,
                                 .no_findings = true };
        if (viz_timeline_open(db, run, &to, &tl, err) != 0)
            goto done;
        if (viz_timeline_add_findings(tl, rows, n_rows) != 0) {
            viz_timeline_free(tl);
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto done;
        }
        write_timeline_fig(out, tl, "t-", "timeline");
        viz_timeline_free(tl);
    }
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
    rc = viz_write_file(out_path, page, page_len, err);
done:
    if (out)
        fclose(out);
    free(page);
    stats_free(&stats);
    trace_free(t);
    trace_finding_rows_free(rows, n_rows);
    trace_run_info_free(runs, n_runs);
    trace_source_close(&src);
    return rc;
}
