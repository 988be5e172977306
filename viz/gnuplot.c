/*
 * gnuplot.c -- the timeline drawn by gnuplot: a generated script and one
 * data file, run as a child process in a temporary directory.
 *
 * The data file holds one block per thing drawn (blocks are separated by
 * two blank lines and addressed with `index`): boxes of each statement
 * kind, the "blocked" bars of syncs that waited, the marks of each
 * synchronisation kind, the arrows of each kind, the race outlines, the
 * race arrows, the box labels and the race labels. Only blocks with rows
 * are written and plotted, so gnuplot never warns about an empty one, and
 * each plotted block gives its legend entry. x is in the unit that suits
 * the span (ns, µs, ms or s, from the first statement in view), or the
 * submission index when the trace has no times; y is the lane (0 on top).
 *
 * gnuplot is found through SYNCSIM_GNUPLOT (a path; tests set it to a
 * missing one to see the error) or on PATH. Its output goes to a file in
 * the temporary directory, read back and then written where asked, so a
 * failed run leaves nothing behind; its stderr is kept to quote its first
 * error line.
 */
#include "viz/timeline_int.h"

#include "check/check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct {
    const char *colour, *title;
    int point;              /* marks: gnuplot point type */
} kind_style[TRACE_KIND_COUNT] = {
    [TRACE_OP] = { "#4c78a8", "op (compute)", 0 },
    [TRACE_COPY] = { "#f58518", "copy", 0 },
    [TRACE_RECORD] = { "#2ca02c", "record event", 9 },
    [TRACE_WAIT] = { "#9467bd", "wait event", 11 },
    [TRACE_SYNC] = { "#222222", "host sync", 5 },
    [TRACE_BARRIER] = { "#8c564b", "barrier", 13 },
    [TRACE_SIGNAL] = { "#17becf", "signal flag", 7 },
    [TRACE_AWAIT] = { "#e377c2", "await flag", 6 },
    [TRACE_COLLECTIVE] = { "#54a24b", "collective", 0 },
    [TRACE_ALLOC] = { "#bab0ac", "alloc", 0 },
    [TRACE_FREE] = { "#9d755d", "free", 0 },
    [TRACE_SEND] = { "#1f77b4", "send", 8 },
    [TRACE_RECV] = { "#ff7f0e", "recv", 10 },
};

static const struct {
    const char *colour, *title, *dash;
} arrow_style[] = {
    [TL_ARROW_EVENT] = { "#9467bd", "event: record -> wait", "2" },
    [TL_ARROW_SYNC] = { "#555555", "host sync covers stream", "3" },
    [TL_ARROW_FLAG] = { "#17becf", "flag: signal -> await", "2" },
    [TL_ARROW_MESSAGE] = { "#1f77b4", "message: send -> recv", "4" },
};

#define RACE_COLOUR "#d62728"
#define MAX_ARROWS 4000
#define MAX_LABELS 600

static bool is_box(uint8_t k)
{
    return k == TRACE_OP || k == TRACE_COPY || k == TRACE_COLLECTIVE || k == TRACE_ALLOC ||
           k == TRACE_FREE;
}

/* The unit of the x axis: divisor of ns and its name. */
static void x_unit(const viz_timeline *tl, double *div, const char **name)
{
    double span = tl->view_hi - tl->view_lo;
    if (!tl->timed) {
        *div = 1;
        *name = "statement, in submission order";
    } else if (span >= 2e9) {
        *div = 1e9;
        *name = "time (s)";
    } else if (span >= 2e6) {
        *div = 1e6;
        *name = "time (ms)";
    } else if (span >= 2e3) {
        *div = 1e3;
        *name = "time (µs)";
    } else {
        *div = 1;
        *name = "time (ns)";
    }
}

/* Writes s as a double-quoted gnuplot string. */
static void gp_str(FILE *out, const char *s)
{
    fputc('"', out);
    viz_quote_escape(out, s);
    fputc('"', out);
}

/* Writes s as a quoted string in the data file (no escapes there). */
static void data_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s && *s; s++)
        fputc(*s == '"' ? '\'' : (*s == '\n' ? ' ' : *s), out);
    fputc('"', out);
}

typedef struct plot_ctx {
    const viz_timeline *tl;
    FILE *script, *data;
    const char *data_path;
    int block;              /* index of the next data block */
    int clauses;            /* plot clauses written */
    double div, lo;
    bool svg;
} plot_ctx;

/* SVG boxes get a tooltip each (up to this many boxes). */
#define MAX_TOOLTIPS 20000

static double X(const plot_ctx *p, double x)
{
    return (x - p->lo) / p->div;
}

/* Ends a data block and adds its plot clause (printf-style). */
static void end_block(plot_ctx *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void end_block(plot_ctx *p, const char *fmt, ...)
{
    fputs("\n\n", p->data);
    fputs(p->clauses++ ? ", \\\n     " : "plot ", p->script);
    fputs("datafile index ", p->script);
    fprintf(p->script, "%d ", p->block++);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->script, fmt, ap);
    va_end(ap);
}

static double mark_x(const viz_timeline *tl, uint64_t seq)
{
    double x0, x1;
    tl_item_span(tl, &tl->items[seq], seq, &x0, &x1);
    return tl->timed ? x1 : x0 + 0.4;
}

static uint32_t lane_of_seq(const viz_timeline *tl, uint64_t seq)
{
    return tl->lane_of[tl->items[seq].queue];
}

static bool in_view(const viz_timeline *tl, double x)
{
    return x >= tl->view_lo && x <= tl->view_hi;
}

static void write_boxes(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    for (int k = 0; k < TRACE_KIND_COUNT; k++) {
        if (!is_box((uint8_t)k))
            continue;
        size_t rows = 0;
        for (size_t i = 0; i < tl->n_boxes; i++) {
            const tl_box *b = &tl->boxes[i];
            if (b->kind != k)
                continue;
            double x0 = X(p, b->x0), x1 = X(p, b->x1);
            fprintf(p->data, "%.9g %.9g %u\n", x0, x1, b->lane);
            rows++;
        }
        if (rows)
            end_block(p, "using (($1+$2)/2):3:1:2:($3-0.3):($3+0.3) with boxxyerror "
                         "fs solid 0.9 noborder lc rgb \"%s\" title \"%s\"",
                      kind_style[k].colour, kind_style[k].title);
    }
}

/* Blocked spans; those of a lane less than a pixel apart become one (a
 * queue's spans come in time order). */
static void write_blocked(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    if (!tl->timed)
        return;
    double px = tl->ns_per_px;  /* spans less than a pixel apart look like one anyway */
    double *run0 = malloc(((size_t)tl->n_lanes + 1) * sizeof *run0);
    double *run1 = malloc(((size_t)tl->n_lanes + 1) * sizeof *run1);
    if (!run0 || !run1) {
        free(run0);
        free(run1);
        return;                 /* the picture goes without them */
    }
    for (uint32_t l = 0; l < tl->n_lanes; l++)
        run0[l] = run1[l] = -1e300;
    size_t rows = 0;
    for (uint64_t i = 0; i < tl->n_items; i++) {
        const tl_item *it = &tl->items[i];
        if (is_box(it->kind) || it->dur <= 0 || it->t == TRACE_TIME_NONE)
            continue;
        double x0 = (double)it->t, x1 = (double)(it->t + it->dur);
        if (x1 < tl->view_lo || x0 > tl->view_hi)
            continue;
        uint32_t lane = tl->lane_of[it->queue];
        if (px > 0 && x0 - run1[lane] < px && x0 >= run0[lane]) {
            if (x1 > run1[lane])
                run1[lane] = x1;
            continue;
        }
        if (run1[lane] > -1e300) {
            fprintf(p->data, "%.9g %.9g %u\n", X(p, run0[lane]), X(p, run1[lane]), lane);
            rows++;
        }
        run0[lane] = x0;
        run1[lane] = x1;
    }
    for (uint32_t l = 0; l < tl->n_lanes; l++)
        if (run1[l] > -1e300) {
            fprintf(p->data, "%.9g %.9g %u\n", X(p, run0[l]), X(p, run1[l]), l);
            rows++;
        }
    free(run0);
    free(run1);
    if (rows)
        end_block(p, "using (($1+$2)/2):3:1:2:($3-0.1):($3+0.1) with boxxyerror fs solid 0.5 "
                     "noborder lc rgb \"#999999\" title \"blocked in a sync or wait\"");
}

static void write_marks(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    /* Marks thinned to one per pixel per lane: more would draw on each other. */
    double px = tl->ns_per_px;
    double *last_x = malloc(((size_t)tl->n_lanes + 1) * sizeof *last_x);
    if (!last_x)
        return;                 /* the picture goes without them */
    for (int k = 0; k < TRACE_KIND_COUNT; k++) {
        if (is_box((uint8_t)k))
            continue;
        size_t rows = 0;
        for (uint32_t l = 0; l < tl->n_lanes; l++)
            last_x[l] = -1e300;
        for (uint64_t i = 0; i < tl->n_items; i++) {
            const tl_item *it = &tl->items[i];
            if (it->kind != k || (tl->timed && it->t == TRACE_TIME_NONE))
                continue;
            double x = mark_x(tl, i);
            uint32_t lane = tl->lane_of[it->queue];
            if (!in_view(tl, x))
                continue;
            if (px > 0 && x >= last_x[lane] && x - last_x[lane] < px)
                continue;
            last_x[lane] = x;
            fprintf(p->data, "%.9g %u\n", X(p, x), lane);
            rows++;
        }
        if (rows)
            end_block(p, "using 1:2 with points pt %d ps 0.9 lc rgb \"%s\" title \"%s\"",
                      kind_style[k].point, kind_style[k].colour, kind_style[k].title);
    }
    free(last_x);
}

/* The advice's marks (viz_timeline_add_advice) above their statements:
 * a green triangle where a sync can go, an orange diamond where one is to
 * be replaced; one per pixel per lane. */
static void write_advice(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    static const struct {
        uint8_t mark;
        int point;
        const char *colour, *title;
    } style[] = {
        { CHECK_MARK_GOES, 11, "#2ca02c", "advice: can go" },
        { CHECK_MARK_REPLACE, 13, "#ff7f0e", "advice: replace (cheaper order)" },
    };
    if (!tl->advice)
        return;
    double px = tl->ns_per_px;
    double *last_x = malloc(((size_t)tl->n_lanes + 1) * sizeof *last_x);
    if (!last_x)
        return;
    for (size_t k = 0; k < sizeof style / sizeof style[0]; k++) {
        size_t rows = 0;
        for (uint32_t l = 0; l < tl->n_lanes; l++)
            last_x[l] = -1e300;
        for (uint64_t i = 0; i < tl->n_advice && i < tl->n_items; i++) {
            const tl_item *it = &tl->items[i];
            if (tl->advice[i] != style[k].mark || (tl->timed && it->t == TRACE_TIME_NONE))
                continue;
            double x = mark_x(tl, i);
            uint32_t lane = tl->lane_of[it->queue];
            if (!in_view(tl, x) || (px > 0 && x >= last_x[lane] && x - last_x[lane] < px))
                continue;
            last_x[lane] = x;
            fprintf(p->data, "%.9g %.2f\n", X(p, x), lane - 0.32);
            rows++;
        }
        if (rows)
            end_block(p, "using 1:2 with points pt %d ps 1.2 lc rgb \"%s\" title \"%s\"",
                      style[k].point, style[k].colour, style[k].title);
    }
    free(last_x);
}

static size_t arrows_in_view(const viz_timeline *tl)
{
    size_t n = 0;
    for (size_t i = 0; i < tl->n_arrows; i++)
        if (in_view(tl, mark_x(tl, tl->arrows[i].to)))
            n++;
    return n;
}

static double from_x(const viz_timeline *tl, uint64_t seq)
{
    double x0, x1;
    tl_item_span(tl, &tl->items[seq], seq, &x0, &x1);
    return is_box(tl->items[seq].kind) ? x1 : mark_x(tl, seq);
}

static void write_arrows(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    if (arrows_in_view(tl) > MAX_ARROWS)
        return;
    for (int k = TL_ARROW_EVENT; k < TL_ARROW_KINDS; k++) {
        size_t rows = 0;
        for (size_t i = 0; i < tl->n_arrows; i++) {
            const tl_arrow *a = &tl->arrows[i];
            if (a->kind != k)
                continue;
            if (tl->timed && (tl->items[a->from].t == TRACE_TIME_NONE ||
                              tl->items[a->to].t == TRACE_TIME_NONE))
                continue;
            double x0 = from_x(tl, a->from), x1 = mark_x(tl, a->to);
            if (!in_view(tl, x1) && !in_view(tl, x0))
                continue;
            uint32_t l0 = lane_of_seq(tl, a->from), l1 = lane_of_seq(tl, a->to);
            if (l0 == l1)
                continue;
            fprintf(p->data, "%.9g %u %.9g %d\n", X(p, x0), l0, X(p, x1) - X(p, x0),
                    (int)l1 - (int)l0);
            rows++;
        }
        if (rows)
            end_block(p, "using 1:2:3:4 with vectors head filled size screen 0.007,18 dt %s "
                         "lw 1.2 lc rgb \"%s\" title \"%s\"",
                      arrow_style[k].dash, arrow_style[k].colour, arrow_style[k].title);
    }
}

/* A race side as a box at least 4 pixels wide. */
static void race_side(const plot_ctx *p, uint64_t seq, double *x0, double *x1)
{
    const viz_timeline *tl = p->tl;
    tl_item_span(tl, &tl->items[seq], seq, x0, x1);
    if (!is_box(tl->items[seq].kind))
        *x0 = *x1 = mark_x(tl, seq);
    double min_w = tl->timed ? 4 * tl->ns_per_px : 0.8;
    if (*x1 - *x0 < min_w) {
        double mid = (*x0 + *x1) / 2;
        *x0 = mid - min_w / 2;
        *x1 = mid + min_w / 2;
    }
}

static void write_races(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    if (!tl->n_races)
        return;
    size_t n = tl->n_races > 200 ? 200 : tl->n_races;
    for (size_t i = 0; i < n; i++)
        for (int side = 0; side < 2; side++) {
            uint64_t seq = side ? tl->races[i].second : tl->races[i].first;
            double x0, x1;
            race_side(p, seq, &x0, &x1);
            fprintf(p->data, "%.9g %.9g %u\n", X(p, x0), X(p, x1), lane_of_seq(tl, seq));
        }
    end_block(p, "using (($1+$2)/2):3:1:2:($3-0.42):($3+0.42) with boxxyerror lc rgb \"%s\" "
                 "lw 2.5 fs empty border lc rgb \"%s\" title \"race: both sides (unordered "
                 "accesses)\"",
              RACE_COLOUR, RACE_COLOUR);
    for (size_t i = 0; i < n; i++) {
        double a0, a1, b0, b1;
        race_side(p, tl->races[i].first, &a0, &a1);
        race_side(p, tl->races[i].second, &b0, &b1);
        uint32_t la = lane_of_seq(tl, tl->races[i].first), lb = lane_of_seq(tl, tl->races[i].second);
        double xa = X(p, (a0 + a1) / 2), xb = X(p, (b0 + b1) / 2);
        double ya = la + (lb > la ? 0.42 : lb < la ? -0.42 : 0);
        double yb = lb + (la > lb ? 0.42 : la < lb ? -0.42 : 0);
        fprintf(p->data, "%.9g %.9g %.9g %.9g\n", xa, ya, xb - xa, yb - ya);
    }
    end_block(p, "using 1:2:3:4 with vectors head filled size screen 0.01,20 lw 2.5 "
                 "lc rgb \"%s\" notitle",
              RACE_COLOUR);
    for (size_t i = 0; i < n; i++) {
        /* "race K" just above the right end of the second side's outline; the
         * title says what race K is. Races that end on the same statement share
         * one label ("races 1, 2"): their labels would print on top of each other. */
        const tl_race *r = &tl->races[i];
        bool shown = false;
        for (size_t j = 0; j < i && !shown; j++)
            shown = tl->races[j].second == r->second;
        if (shown)
            continue;
        char label[128];
        size_t used = 0, count = 0;
        for (size_t j = i; j < n; j++) {
            if (tl->races[j].second != r->second)
                continue;
            int w = snprintf(label + used, sizeof label - used, "%s%zu", count ? ", " : "", j + 1);
            if (w < 0 || (size_t)w >= sizeof label - used)
                break;
            used += (size_t)w;
            count++;
        }
        double b0, b1;
        race_side(p, r->second, &b0, &b1);
        fprintf(p->data, "%.9g %.9g \"race%s %s\"\n", X(p, b1), lane_of_seq(tl, r->second) - 0.42,
                count > 1 ? "s" : "", label);
    }
    end_block(p, "using 1:2:3 with labels left offset 0.2,0.5 tc rgb \"%s\" font \",10\" notitle",
              RACE_COLOUR);
}

static void write_labels(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    size_t rows = 0;
    for (size_t i = 0; i < tl->n_boxes && rows < MAX_LABELS; i++) {
        const tl_box *b = &tl->boxes[i];
        if (b->label == TRACE_NONE)
            continue;
        const char *l = trace_str(tl->names, b->label);
        double lo = b->x0 < tl->view_lo ? tl->view_lo : b->x0;
        double hi = b->x1 > tl->view_hi ? tl->view_hi : b->x1;
        double px = (hi - lo) / (tl->view_hi - tl->view_lo) * tl_plot_px(tl);
        if (px < 6.5 * (double)strlen(l) + 6)
            continue;
        fprintf(p->data, "%.9g %u ", X(p, (lo + hi) / 2), b->lane);
        data_str(p->data, l);
        fputc('\n', p->data);
        rows++;
    }
    if (rows)
        end_block(p, "using 1:2:3 with labels tc rgb \"white\" font \",9\" notitle");
}

/*
 * Tooltips. gnuplot's own (hypertext labels) need its JavaScript and put
 * the text into an attribute unescaped. So each box gets an invisible
 * point whose hypertext is only "#I" (box I), and svg_tooltips() turns
 * every such group gnuplot writes into a plain SVG <title>, which browsers
 * show on hover without script, with the text escaped here.
 */
static void write_tooltips(plot_ctx *p)
{
    const viz_timeline *tl = p->tl;
    if (!p->svg || tl->n_boxes > MAX_TOOLTIPS)
        return;
    size_t rows = 0;
    for (size_t i = 0; i < tl->n_boxes; i++) {
        const tl_box *b = &tl->boxes[i];
        double lo = b->x0 < tl->view_lo ? tl->view_lo : b->x0;
        double hi = b->x1 > tl->view_hi ? tl->view_hi : b->x1;
        if (hi < lo)
            continue;
        fprintf(p->data, "%.9g %u \"#%zu\"\n", X(p, (lo + hi) / 2), b->lane, i);
        rows++;
    }
    if (rows)
        end_block(p, "using 1:2:3 with labels hypertext point pt 7 ps 1.6 lc rgb \"#ffffffff\" "
                     "notitle");
}

/* What hovering box i says. */
static void tooltip_text(const viz_timeline *tl, size_t i, char *buf, size_t cap)
{
    const tl_box *b = &tl->boxes[i];
    const char *lane = tl->lanes[b->lane].qname;
    char a[32], z[32], d[32];
    if (b->count > 1) {
        snprintf(buf, cap, "%u statements on %s, merged (zoom in with --from/--to)\n%s to %s",
                 b->count, lane, viz_ns_str(b->x0, a, sizeof a), viz_ns_str(b->x1, z, sizeof z));
    } else if (!tl->timed) {
        snprintf(buf, cap, "%s: %s on %s\nslot %.0f in submission order",
                 b->label != TRACE_NONE ? trace_str(tl->names, b->label) : "(no label)",
                 trace_kind_str((trace_kind)b->kind), lane, b->x0);
    } else {
        snprintf(buf, cap, "%s: %s on %s\n%s to %s (%s)",
                 b->label != TRACE_NONE ? trace_str(tl->names, b->label) : "(no label)",
                 trace_kind_str((trace_kind)b->kind), lane, viz_ns_str(b->x0, a, sizeof a),
                 viz_ns_str(b->x1, z, sizeof z), viz_ns_str(b->x1 - b->x0, d, sizeof d));
    }
}

/* Rewrites gnuplot's SVG: each hypertext group "#I" gets box I's tooltip
 * as an SVG <title>, and the plots lose their "gnuplot_plot_N" titles,
 * which hovering showed. Returns the new document (malloc'd) or NULL. */
static char *svg_tooltips(const viz_timeline *tl, const char *svg, size_t len, size_t *out_len)
{
    static const char hyper[] = "<g onmousemove=\"gnuplot_svg.showHypertext(evt,'#";
    static const char plot_title[] = "<title>gnuplot_plot_";
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    if (!f)
        return NULL;
    const char *p = svg, *end = svg + len;
    while (p < end) {
        const char *h = memmem(p, (size_t)(end - p), hyper, sizeof hyper - 1);
        const char *t = memmem(p, (size_t)(end - p), plot_title, sizeof plot_title - 1);
        const char *next = h && (!t || h < t) ? h : t;
        if (!next) {
            fwrite(p, 1, (size_t)(end - p), f);
            break;
        }
        fwrite(p, 1, (size_t)(next - p), f);
        if (next == t) {                /* drop <title>gnuplot_plot_N</title> */
            const char *close = memmem(t, (size_t)(end - t), "</title>", 8);
            p = close ? close + 8 : end;
            continue;
        }
        char *num_end;
        unsigned long long i = strtoull(h + sizeof hyper - 1, &num_end, 10);
        const char *close = memmem(h, (size_t)(end - h), "<title> </title>", 16);
        if (i >= tl->n_boxes || !close) {   /* not ours: leave it */
            fwrite(h, 1, sizeof hyper - 1, f);
            p = h + sizeof hyper - 1;
            continue;
        }
        char text[600];
        tooltip_text(tl, (size_t)i, text, sizeof text);
        fputs("<g><title>", f);
        viz_html_escape(f, text);
        fputs("</title>", f);
        p = close + 16;
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    *out_len = n;
    return out;
}

int viz_timeline_write_gnuplot(const viz_timeline *tl, FILE *script, FILE *data,
                               const char *data_path, const char *out_path, const char *format)
{
    plot_ctx p = { tl, script, data, data_path, 0, 0, 1, tl->view_lo,
                   !(format && strcmp(format, "png") == 0) };
    const char *unit;
    x_unit(tl, &p.div, &unit);
    bool png = format && strcmp(format, "png") == 0;
    /* title lines, lanes, and a legend of up to four rows below */
    int height = 230 + 40 * (int)tl->n_lanes + 16 * (int)(tl->n_races < 4 ? tl->n_races : 4);
    if (height < 300)
        height = 300;

    fprintf(script, "# syncsim timeline: gnuplot script (data in %s)\n", data_path);
    if (png)
        fprintf(script, "set terminal pngcairo size %d,%d noenhanced font \"Helvetica,10\" "
                        "background rgb \"white\"\n",
                tl->width, height);
    else
        fprintf(script, "set terminal svg size %d,%d dynamic noenhanced font \"Helvetica,11\" "
                        "background rgb \"white\"\n",
                tl->width, height);
    fputs("set output ", script);
    gp_str(script, out_path);
    fputs("\ndatafile = ", script);
    gp_str(script, data_path);
    fputc('\n', script);

    /* The title says what is drawn and what was simplified. */
    char sub[1100];
    int n = snprintf(sub, sizeof sub, "%llu statements on %u queues",
                     (unsigned long long)tl->n_items, tl->n_lanes);
    if (tl->n_devices)
        n += snprintf(sub + n, sizeof sub - (size_t)n, ", %u device%s", tl->n_devices,
                      tl->n_devices == 1 ? "" : "s");
    n += snprintf(sub + n, sizeof sub - (size_t)n, "; %zu race%s%s", tl->n_races,
                  tl->n_races == 1 ? "" : "s", tl->n_races ? " (red)" : "");
    if (tl->verdict[0])
        n += snprintf(sub + n, sizeof sub - (size_t)n, "\n%s", tl->verdict);
    if (tl->windowed) {
        char a[32], b[32], c[32];
        n += snprintf(sub + n, sizeof sub - (size_t)n, "\nwindow %s to %s of a trace that "
                      "ends at %s", viz_ns_str(tl->view_lo, a, sizeof a),
                      viz_ns_str(tl->view_hi, b, sizeof b), viz_ns_str(tl->data_hi, c, sizeof c));
    }
    if (!tl->timed)
        n += snprintf(sub + n, sizeof sub - (size_t)n,
                      "\nno observed times (t=): statements laid out in submission order");
    if (tl->merge && tl->n_merged)
        n += snprintf(sub + n, sizeof sub - (size_t)n,
                      "\nboxes narrower than a pixel merged: %llu statements in fewer boxes",
                      (unsigned long long)tl->n_merged);
    if (arrows_in_view(tl) > MAX_ARROWS)
        snprintf(sub + n, sizeof sub - (size_t)n, "; %zu sync arrows left out (zoom in with "
                 "--from/--to)", arrows_in_view(tl));
    /* What each numbered race is: the first three, in the title. */
    for (size_t i = 0; i < tl->n_races && i < 3; i++) {
        const tl_race *r = &tl->races[i];
        const char *na = trace_str(tl->names, tl->items[r->first].label);
        const char *nb = trace_str(tl->names, tl->items[r->second].label);
        const char *qa = tl->lanes[lane_of_seq(tl, r->first)].qname;
        const char *qb = tl->lanes[lane_of_seq(tl, r->second)].qname;
        /* Say what the race means, not only its type. */
        const char *how = strcmp(r->type, "WAR") == 0   ? "writes while"
                          : strcmp(r->type, "RAW") == 0 ? "reads while"
                          : strcmp(r->type, "WAW") == 0 ? "writes while"
                                                        : "is unordered with";
        const char *what = strcmp(r->type, "WAR") == 0   ? " may still read"
                           : strcmp(r->type, "RAW") == 0 ? " may still write"
                           : strcmp(r->type, "WAW") == 0 ? " may still write"
                                                         : "";
        n = (int)strlen(sub);
        snprintf(sub + n, sizeof sub - (size_t)n, "\nrace %zu (%s): %s on %s %s %s on %s%s",
                 i + 1, r->label, *nb ? nb : "?", qb, how, *na ? na : "?", qa, what);
    }
    if (tl->n_races > 3) {
        n = (int)strlen(sub);
        snprintf(sub + n, sizeof sub - (size_t)n, "\n... and %zu more races (syncsim check)",
                 tl->n_races - 3);
    }
    char title[1700];
    snprintf(title, sizeof title, "%s\n%s", *tl->title ? tl->title : tl->source, sub);
    fputs("set title ", script);
    gp_str(script, title);
    fputs(" font \",12\"\nset xlabel ", script);
    char xlabel[96];
    snprintf(xlabel, sizeof xlabel, "%s", unit);
    if (tl->windowed && tl->view_lo != 0) {
        char a[32];
        snprintf(xlabel, sizeof xlabel, "%s after %s", unit, viz_ns_str(tl->view_lo, a, sizeof a));
    }
    gp_str(script, xlabel);
    fprintf(script, "\nset xrange [0:%.9g]\n", X(&p, tl->view_hi));
    fprintf(script, "set yrange [%.1f:-0.6]\n", (double)tl->n_lanes - 0.4);
    fputs("set ytics scale 0 (", script);
    size_t widest = 0;
    for (uint32_t l = 0; l < tl->n_lanes; l++) {
        fputs(l ? ", " : "", script);
        gp_str(script, tl->lanes[l].name);
        fprintf(script, " %u", l);
        size_t w = strlen(tl->lanes[l].name);
        widest = w > widest ? w : widest;
    }
    /* the left margin fits the longest lane name (in characters) */
    fprintf(script, ")\nset lmargin %zu", widest + 3 > 24 ? (widest + 3 < 60 ? widest + 3 : 60) : 24);
    fputs("\nset rmargin 4\nset grid xtics lc rgb \"#e0e0e0\"\n"
          "set border 3\nset xtics nomirror\nset key outside below horizontal font \",10\" "
          "samplen 2 spacing 1.1\nset style fill solid 0.9\n",
          script);
    /* Device groups: alternate background bands, a line between groups. */
    int obj = 1;
    for (uint32_t l = 0; l < tl->n_lanes;) {
        uint32_t g = tl->lanes[l].group, e = l;
        while (e < tl->n_lanes && tl->lanes[e].group == g)
            e++;
        if (g % 2 == 1)
            fprintf(script, "set object %d rect from graph 0, first %.1f to graph 1, first %.1f "
                            "behind fc rgb \"#eef2f8\" fs solid 1.0 noborder\n",
                    obj++, l - 0.5, e - 0.5);
        if (l > 0)
            fprintf(script, "set arrow from graph 0, first %.1f to graph 1, first %.1f nohead "
                            "lc rgb \"#999999\" lw 1 back\n",
                    l - 0.5, l - 0.5);
        l = e;
    }

    write_boxes(&p);
    write_blocked(&p);
    write_arrows(&p);
    write_marks(&p);
    write_advice(&p);
    write_labels(&p);
    write_races(&p);
    write_tooltips(&p);
    if (!p.clauses) /* nothing to draw: an empty frame rather than an error */
        fputs("set label 1 \"no statements in view\" at graph 0.5, graph 0.5 center\n"
              "plot NaN notitle",
              script);
    fputs("\nunset output\n", script);
    return ferror(script) || ferror(data) ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Running gnuplot.                                                    */

static char *find_gnuplot(void)
{
    const char *env = getenv("SYNCSIM_GNUPLOT");
    if (env)
        return *env && access(env, X_OK) == 0 ? strdup(env) : NULL;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        char *cand = malloc(len + 10);
        if (!cand)
            return NULL;
        memcpy(cand, path, len);
        strcpy(cand + len, "/gnuplot");
        if (len && access(cand, X_OK) == 0)
            return cand;
        free(cand);
        path += len + (colon ? 1 : 0);
    }
    return NULL;
}

bool viz_gnuplot_available(void)
{
    char *g = find_gnuplot();
    free(g);
    return g != NULL;
}

/* The first line of gnuplot's stderr that says what went wrong. */
static void gnuplot_error_line(const char *log, char *buf, size_t cap)
{
    const char *p = strstr(log, "line ");
    const char *start = log;
    if (p) {
        const char *q = p;
        while (q > log && q[-1] != '\n')
            q--;
        start = q;
    }
    while (*start == '\n' || *start == ' ')
        start++;
    size_t n = 0;
    while (start[n] && start[n] != '\n' && n + 1 < cap)
        n++;
    memcpy(buf, start, n);
    buf[n] = '\0';
}

int viz_timeline_render(const viz_timeline *tl, const char *format, const char *path,
                        char **data, size_t *len, trace_error *err)
{
    if (!format)
        format = viz_timeline_default_format(tl);
    if (strcmp(format, "svg") != 0 && strcmp(format, "png") != 0)
        return trace_error_set(err, TRACE_EUSAGE, "the timeline is drawn as svg or png, not '%s'",
                               format), -1;
    char *gnuplot = find_gnuplot();
    if (!gnuplot)
        return trace_error_set(err, TRACE_EUSAGE, "gnuplot is not installed (apt-get install "
                               "gnuplot-nox); the timeline is drawn by it"), -1;
    const char *tmpdir = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/syncsim-timeline-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir)) {
        free(gnuplot);
        return trace_error_set(err, TRACE_EIO, "cannot make a temporary directory in %s: %s",
                               tmpdir && *tmpdir ? tmpdir : "/tmp", strerror(errno)), -1;
    }
    char script_path[600], data_path[600], out_path[600], log_path[600];
    snprintf(script_path, sizeof script_path, "%s/timeline.gp", dir);
    snprintf(data_path, sizeof data_path, "%s/timeline.dat", dir);
    snprintf(out_path, sizeof out_path, "%s/timeline.%s", dir, format);
    snprintf(log_path, sizeof log_path, "%s/gnuplot.log", dir);
    int rc = -1;
    FILE *script = fopen(script_path, "w"), *dat = fopen(data_path, "w");
    if (!script || !dat) {
        trace_error_set(err, TRACE_EIO, "%s: cannot write the gnuplot script", dir);
        if (script)
            fclose(script);
        if (dat)
            fclose(dat);
        goto cleanup;
    }
    int wr = viz_timeline_write_gnuplot(tl, script, dat, data_path, out_path, format);
    wr |= fclose(script);
    wr |= fclose(dat);
    if (wr != 0) {
        trace_error_set(err, TRACE_EIO, "%s: writing the gnuplot script failed (disk full?)", dir);
        goto cleanup;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        trace_error_set(err, TRACE_EIO, "cannot start gnuplot: %s", strerror(errno));
        goto cleanup;
    }
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int devnull = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
        }
        if (devnull >= 0)
            dup2(devnull, 0);
        execl(gnuplot, "gnuplot", script_path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *log = NULL;
        size_t log_len = 0;
        char line[300] = "no message";
        if (viz_read_file(log_path, &log, &log_len, NULL) == 0) {
            gnuplot_error_line(log, line, sizeof line);
            free(log);
        }
        trace_error_set(err, TRACE_EIO, "gnuplot (%s) failed on %s: %s", gnuplot, script_path,
                        line);
        goto cleanup;
    }
    char *pic = NULL;
    size_t pic_len = 0;
    if (viz_read_file(out_path, &pic, &pic_len, err) != 0)
        goto cleanup;
    if (strcmp(format, "svg") == 0) {
        size_t n;
        char *tipped = svg_tooltips(tl, pic, pic_len, &n);
        if (!tipped) {
            free(pic);
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto cleanup;
        }
        free(pic);
        pic = tipped;
        pic_len = n;
    }
    if (path) {
        rc = trace_out_write(path, pic, pic_len, err);
        free(pic);
    } else {
        *data = pic;
        *len = pic_len;
        rc = 0;
    }
cleanup:
    if (!getenv("SYNCSIM_KEEP_TEMP")) {
        unlink(script_path);
        unlink(data_path);
        unlink(out_path);
        unlink(log_path);
        rmdir(dir);
    } else {
        fprintf(stderr, "syncsim: kept %s\n", dir);
    }
    free(gnuplot);
    return rc;
}
