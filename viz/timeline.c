/*
 * timeline.c -- what every queue did, when: the model of the timeline
 * picture, collected from a trace reader in one streaming pass.
 *
 * Lanes. One lane per queue, top to bottom: host threads first, then the
 * streams grouped by device (devices in the order they first appear).
 *
 * Items. Every statement becomes one item, indexed by its submission index
 * (seq), so that findings, which name statements by seq, find their place:
 *   - boxes: op, copy, collective, alloc, free: [t, t + dur) on the lane;
 *   - marks: record, wait, sync, barrier, signal, await: a point where the
 *     statement completes; a blocking statement with a duration (a host
 *     sync that waited) also gets a thin "blocked" bar over that time.
 * A statement without t= cannot be placed in time. When any box lacks a
 * time the whole trace is laid out by submission order instead: item seq
 * spans [seq, seq + 0.8) on its lane, and the picture's title says so.
 *
 * Arrows show why a queue could go on: from a `record E` to each `wait E`
 * bound to it (the most recent record before the wait, rule 3), from a
 * `signal F` to each `await F` (rule 6), and from the last statement
 * submitted to a stream before a host `sync` covering it to that sync
 * (rule 4). They are kept as pairs of seqs and placed when drawn.
 *
 * Races (viz_timeline_add_race) are pairs of seqs too: drawn as red
 * outlines around both statements and a red arrow between their lanes.
 *
 * Size. Beyond merge_above boxes (50 k), boxes narrower than a pixel are
 * merged per lane into runs of at most one pixel column (coloured by the
 * kind most of them have, so a lane still shows copies among kernels),
 * marks are thinned to one per pixel, and the default format is PNG; SVG
 * with hundreds of thousands of rectangles is too heavy for a browser.
 * The layout (lanes, units, merging) is computed once, at the end of
 * collection; viz/gnuplot.c writes the script and data from it.
 */
#include "viz/timeline_int.h"

#include "check/check.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_box_kind(trace_kind k)
{
    return k == TRACE_OP || k == TRACE_COPY || k == TRACE_COLLECTIVE || k == TRACE_ALLOC ||
           k == TRACE_FREE;
}


static int add_arrow(viz_timeline *tl, uint64_t from, uint64_t to, uint8_t kind)
{
    if (trace_grow((void **)&tl->arrows, &tl->cap_arrows, tl->n_arrows + 1,
                   sizeof *tl->arrows) != 0)
        return -1;
    tl->arrows[tl->n_arrows++] = (tl_arrow){ from, to, kind };
    return 0;
}

/* A value semaphore's signal (the value it sets) or await (the value it
 * wants), kept in seq order so that the pairing can look them up. */
typedef struct sem_value {
    uint64_t seq, value;
} sem_value;

typedef struct collect_state {
    trace_binder *bind;                  /* what each statement waits for (traces/bind.c) */
    uint64_t *last_on_queue;             /* by queue index */
    size_t cap_queue;
    uint32_t *flags;                     /* the flags awaited, to pair at the end */
    size_t n_flags, cap_flags;
    sem_value *sem;                      /* value semaphores' sets and awaits, by seq */
    size_t n_sem, cap_sem;
} collect_state;

static void collect_state_free(collect_state *cs)
{
    trace_binder_free(cs->bind);
    free(cs->last_on_queue);
    free(cs->flags);
    free(cs->sem);
}

static int note_sem(collect_state *cs, const trace_stmt *s)
{
    if (trace_grow((void **)&cs->sem, &cs->cap_sem, cs->n_sem + 1, sizeof *cs->sem) != 0)
        return -1;
    cs->sem[cs->n_sem++] = (sem_value){ s->seq, s->count };
    return 0;
}

/* The entry of statement seq among the value semaphores' statements (fed
 * in seq order), or NULL when it is none of them. */
static const sem_value *sem_find(const collect_state *cs, uint64_t seq)
{
    size_t lo = 0, hi = cs->n_sem;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cs->sem[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < cs->n_sem && cs->sem[lo].seq == seq ? &cs->sem[lo] : NULL;
}

/* The arrows that end at statement s (seq already stored): the binder says
 * which record a wait binds to and what a sync covers. Flags are paired at
 * the end (rule 6: every signal, wherever it stands). */
static int link_statement(viz_timeline *tl, collect_state *cs, const trace *t, const trace_stmt *s)
{
    trace_bind bd;
    if (trace_binder_feed(cs->bind, s, &bd) != 0)
        return -1;
    switch (s->kind) {
    case TRACE_WAIT:
        return bd.record == TRACE_NO_SEQ ? 0 : add_arrow(tl, bd.record, s->seq, TL_ARROW_EVENT);
    case TRACE_SIGNAL:
        return s->sem ? note_sem(cs, s) : 0;
    case TRACE_AWAIT:
        if (s->sem && note_sem(cs, s) != 0)
            return -1;
        for (size_t i = 0; i < cs->n_flags; i++)
            if (cs->flags[i] == s->object)
                return 0;
        if (trace_grow((void **)&cs->flags, &cs->cap_flags, cs->n_flags + 1,
                       sizeof *cs->flags) != 0)
            return -1;
        cs->flags[cs->n_flags++] = s->object;
        return 0;
    case TRACE_SEND:
    case TRACE_RECV:
        /* rule 9: a message's arrow, drawn when its second end is fed */
        if (bd.match_other == TRACE_NO_SEQ)
            return 0;
        return s->kind == TRACE_RECV ? add_arrow(tl, bd.match_other, s->seq, TL_ARROW_MESSAGE)
                                     : add_arrow(tl, s->seq, bd.match_other, TL_ARROW_MESSAGE);
    case TRACE_SYNC:
        for (uint32_t q = 0; q < t->n_queues && q < cs->cap_queue; q++)
            if (cs->last_on_queue[q] != UINT64_MAX && trace_sync_covers(t, s, q) &&
                add_arrow(tl, cs->last_on_queue[q], s->seq, TL_ARROW_SYNC) != 0)
                return -1;
        return 0;
    default:
        return 0;
    }
}

/* Rule 6b's arrow for an await of value semaphore: from the set that
 * releases it (trace_sem_release), the sets that ended before the await
 * started being the ones it is ordered after, as replay times them; an
 * untimed trace has no such set. An await that saw enough already points at
 * the last set before it. */
static int link_sem_await(viz_timeline *tl, collect_state *cs, const uint64_t *sig,
                          uint32_t n_sig, uint64_t await)
{
    if (n_sig == 0)
        return 0;
    uint64_t *values = malloc(n_sig * sizeof *values);
    if (!values)
        return -1;
    const tl_item *a = &tl->items[await];
    uint64_t last = TRACE_NO_SEQ;
    for (uint32_t k = 0; k < n_sig; k++) {
        const tl_item *it = &tl->items[sig[k]];
        const sem_value *v = sem_find(cs, sig[k]);
        values[k] = v ? v->value : 0;
        if (a->t != TRACE_TIME_NONE && it->t != TRACE_TIME_NONE && it->t + it->dur <= a->t)
            last = k;
    }
    uint64_t rel = trace_sem_release(values, n_sig, last, sem_find(cs, await)->value);
    free(values);
    if (rel == TRACE_SEM_PASSED)
        rel = last;
    if (rel == TRACE_SEM_PENDING || rel == TRACE_NO_SEQ)
        return 0;
    return add_arrow(tl, sig[rel], await, TL_ARROW_FLAG);
}

/* Rule 6's arrows: from every signal of each awaited flag to each await;
 * a value semaphore's await gets one, from the set that releases it. */
static int link_flags(viz_timeline *tl, collect_state *cs)
{
    for (size_t i = 0; i < cs->n_flags; i++) {
        const uint64_t *sig, *aw;
        uint32_t n_sig, n_aw;
        trace_binder_flag(cs->bind, cs->flags[i], &sig, &n_sig, &aw, &n_aw);
        for (uint32_t a = 0; a < n_aw; a++) {
            if (sem_find(cs, aw[a])) {
                if (link_sem_await(tl, cs, sig, n_sig, aw[a]) != 0)
                    return -1;
                continue;
            }
            for (uint32_t k = 0; k < n_sig; k++)
                if (add_arrow(tl, sig[k], aw[a], TL_ARROW_FLAG) != 0)
                    return -1;
        }
    }
    return 0;
}

static int store_item(viz_timeline *tl, collect_state *cs, const trace *t, const trace_stmt *s)
{
    if (s->seq != tl->n_items)
        return -2; /* seqs must be dense: every reader guarantees it */
    if (trace_grow((void **)&tl->items, &tl->cap_items, tl->n_items + 1, sizeof *tl->items) != 0)
        return -1;
    tl_item *it = &tl->items[tl->n_items++];
    it->t = s->t;
    it->dur = s->dur != TRACE_TIME_NONE && s->dur > 0 ? s->dur : 0;
    it->queue = s->queue;
    it->kind = (uint8_t)s->kind;
    it->label = TRACE_NONE;
    if (s->label != TRACE_NONE) {
        const char *l = trace_str(t, s->label);
        it->label = trace_intern_cstr(tl->names, l);
        if (it->label == TRACE_NONE)
            return -1;
    }
    if (is_box_kind(s->kind)) {
        tl->n_boxes_in++;
        if (s->t == TRACE_TIME_NONE)
            tl->n_untimed++;
    }
    size_t old = cs->cap_queue;
    if (trace_grow((void **)&cs->last_on_queue, &cs->cap_queue, (size_t)s->queue + 1,
              sizeof *cs->last_on_queue) != 0)
        return -1;
    for (size_t i = old; i < cs->cap_queue; i++)
        cs->last_on_queue[i] = UINT64_MAX;
    if (t->queues[s->queue].kind == TRACE_QUEUE_STREAM)
        cs->last_on_queue[s->queue] = s->seq;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Layout, once everything is read.                                    */

static int make_lanes(viz_timeline *tl, const trace *t)
{
    tl->n_lanes = t->n_queues;
    tl->lanes = calloc(t->n_queues ? t->n_queues : 1, sizeof *tl->lanes);
    tl->lane_of = calloc(t->n_queues ? t->n_queues : 1, sizeof *tl->lane_of);
    if (!tl->lanes || !tl->lane_of)
        return -1;
    uint32_t lane = 0;
    for (uint32_t q = 0; q < t->n_queues; q++)
        if (t->queues[q].kind == TRACE_QUEUE_HOST)
            tl->lane_of[q] = lane++;
    uint32_t host_lanes = lane;
    /* Devices in order of first appearance, their streams in declaration order. */
    uint32_t group = host_lanes ? 1 : 0;
    for (uint32_t q = 0; q < t->n_queues; q++) {
        const trace_queue *tq = &t->queues[q];
        if (tq->kind != TRACE_QUEUE_STREAM)
            continue;
        bool seen = false;
        for (uint32_t p = 0; p < q && !seen; p++)
            seen = t->queues[p].kind == TRACE_QUEUE_STREAM && t->queues[p].device == tq->device;
        if (seen)
            continue;
        for (uint32_t p = q; p < t->n_queues; p++)
            if (t->queues[p].kind == TRACE_QUEUE_STREAM && t->queues[p].device == tq->device) {
                tl->lane_of[p] = lane;
                tl->lanes[lane].group = group;
                lane++;
            }
        group++;
    }
    tl->n_groups = group;
    for (uint32_t q = 0; q < t->n_queues; q++) {
        const trace_queue *tq = &t->queues[q];
        tl_lane *l = &tl->lanes[tl->lane_of[q]];
        char buf[256];
        if (tq->kind == TRACE_QUEUE_HOST)
            snprintf(buf, sizeof buf, "%s (host thread)", trace_str(t, tq->name));
        else
            snprintf(buf, sizeof buf, "%s (device %s stream)", trace_str(t, tq->name),
                     trace_str(t, tq->device));
        l->name = strdup(buf);
        l->qname = strdup(trace_str(t, tq->name));
        l->host = tq->kind == TRACE_QUEUE_HOST;
        if (!l->name || !l->qname)
            return -1;
    }
    return 0;
}

/* Positions in nanoseconds (timed) or submission slots (untimed). */
void tl_item_span(const viz_timeline *tl, const tl_item *it, uint64_t seq, double *x0, double *x1)
{
    if (!tl->timed) {
        *x0 = (double)seq;
        *x1 = (double)seq + 0.8;
        return;
    }
    if (it->t == TRACE_TIME_NONE) { /* a mark without a time: at its queue's last time */
        *x0 = *x1 = (double)tl->x_min;
        return;
    }
    *x0 = (double)it->t;
    *x1 = (double)(it->t + it->dur);
}

/* The drawn x range: the trace's extent, or the window --from/--to ask for,
 * which must overlap it. Returns 0, or -1 with err. */
static int compute_range(viz_timeline *tl, const viz_timeline_opts *o, trace_error *err)
{
    double lo = 1e300, hi = -1e300;
    for (uint64_t i = 0; i < tl->n_items; i++) {
        const tl_item *it = &tl->items[i];
        if (tl->timed && it->t == TRACE_TIME_NONE)
            continue;
        double x0, x1;
        tl_item_span(tl, it, i, &x0, &x1);
        lo = x0 < lo ? x0 : lo;
        hi = x1 > hi ? x1 : hi;
    }
    if (lo > hi)
        lo = hi = 0;
    tl->data_lo = lo;
    tl->data_hi = hi;
    bool window = o && (o->from != TRACE_TIME_NONE || o->to != TRACE_TIME_NONE);
    if (window && !tl->timed)
        return trace_error_set(err, TRACE_EUSAGE, "--from/--to choose a window of time, and "
                               "this trace has no times (t=): it is drawn in submission "
                               "order"),
               -1;
    if (o && o->from != TRACE_TIME_NONE)
        lo = (double)o->from;
    if (o && o->to != TRACE_TIME_NONE)
        hi = (double)o->to;
    if (window && (lo > tl->data_hi || hi < tl->data_lo)) {
        char a[32], b[32], c[32], d[32];
        return trace_error_set(err, TRACE_EUSAGE, "the window %s to %s holds nothing: the "
                               "trace runs from %s to %s",
                               viz_ns_str(lo, a, sizeof a), viz_ns_str(hi, b, sizeof b),
                               viz_ns_str(tl->data_lo, c, sizeof c),
                               viz_ns_str(tl->data_hi, d, sizeof d)),
               -1;
    }
    tl->windowed = window;
    if (hi <= lo)
        hi = lo + 1;
    tl->x_min = (int64_t)lo;
    tl->view_lo = lo;
    tl->view_hi = hi;
    return 0;
}

static int box_order(const void *a, const void *b, void *ctx)
{
    const viz_timeline *sort_tl = ctx;
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    const tl_item *ix = &sort_tl->items[x], *iy = &sort_tl->items[y];
    uint32_t lx = sort_tl->lane_of[ix->queue], ly = sort_tl->lane_of[iy->queue];
    if (lx != ly)
        return lx < ly ? -1 : 1;
    double ax, ax1, bx, bx1;
    tl_item_span(sort_tl, ix, x, &ax, &ax1);
    tl_item_span(sort_tl, iy, y, &bx, &bx1);
    if (ax != bx)
        return ax < bx ? -1 : 1;
    return (x > y) - (x < y);
}

static int push_box(viz_timeline *tl, uint32_t lane, double x0, double x1, uint8_t kind,
                    uint32_t label, uint32_t count)
{
    if (trace_grow((void **)&tl->boxes, &tl->cap_boxes, tl->n_boxes + 1, sizeof *tl->boxes) != 0)
        return -1;
    tl->boxes[tl->n_boxes++] = (tl_box){ x0, x1, lane, kind, label, count };
    return 0;
}

/* The boxes to draw: every box in view, or with merging, runs of sub-pixel
 * boxes per lane. */
static int layout_boxes(viz_timeline *tl, const viz_timeline_opts *o)
{
    size_t merge_above = o && o->merge_above ? o->merge_above : VIZ_TIMELINE_MERGE_ABOVE;
    tl->merge = tl->n_boxes_in > merge_above;
    double px = (tl->view_hi - tl->view_lo) / (double)tl_plot_px(tl);
    tl->ns_per_px = px;
    uint64_t *order = malloc((tl->n_boxes_in ? tl->n_boxes_in : 1) * sizeof *order);
    if (!order)
        return -1;
    size_t n = 0;
    for (uint64_t i = 0; i < tl->n_items; i++) {
        const tl_item *it = &tl->items[i];
        if (!is_box_kind((trace_kind)it->kind) || (tl->timed && it->t == TRACE_TIME_NONE))
            continue;
        double x0, x1;
        tl_item_span(tl, it, i, &x0, &x1);
        if (x1 < tl->view_lo || x0 > tl->view_hi)
            continue;
        order[n++] = i;
    }
    if (!tl->merge) {
        for (size_t k = 0; k < n; k++) {
            const tl_item *it = &tl->items[order[k]];
            double x0, x1;
            tl_item_span(tl, it, order[k], &x0, &x1);
            if (push_box(tl, tl->lane_of[it->queue], x0, x1, it->kind, it->label, 1) != 0)
                goto fail;
        }
        free(order);
        return 0;
    }
    qsort_r(order, n, sizeof *order, box_order, tl);
    uint32_t run_lane = UINT32_MAX, run_count = 0, kinds[TRACE_KIND_COUNT] = { 0 };
    double run_x0 = 0, run_x1 = 0;
#define FLUSH_RUN()                                                                        \
    do {                                                                                   \
        if (run_count) {                                                                   \
            uint8_t best = 0;                                                              \
            for (uint8_t kk = 1; kk < TRACE_KIND_COUNT; kk++)                              \
                if (kinds[kk] > kinds[best])                                               \
                    best = kk;                                                             \
            double w = run_x1 - run_x0 < px ? px : run_x1 - run_x0;                        \
            if (push_box(tl, run_lane, run_x0, run_x0 + w, best, TRACE_NONE, run_count))   \
                goto fail;                                                                 \
            tl->n_merged += run_count;                                                     \
        }                                                                                  \
        run_count = 0;                                                                     \
        memset(kinds, 0, sizeof kinds);                                                    \
    } while (0)
    for (size_t k = 0; k < n; k++) {
        const tl_item *it = &tl->items[order[k]];
        uint32_t lane = tl->lane_of[it->queue];
        double x0, x1;
        tl_item_span(tl, it, order[k], &x0, &x1);
        if (x1 - x0 >= px) { /* wide enough to stand alone */
            FLUSH_RUN();
            if (push_box(tl, lane, x0, x1, it->kind, it->label, 1) != 0)
                goto fail;
            continue;
        }
        /* A run covers at most one pixel column, so colours and gaps survive. */
        if (run_count && (lane != run_lane || x0 > run_x1 + px || x1 > run_x0 + px))
            FLUSH_RUN();
        if (!run_count) {
            run_lane = lane;
            run_x0 = x0;
            run_x1 = x1;
        }
        run_x1 = x1 > run_x1 ? x1 : run_x1;
        kinds[it->kind]++;
        run_count++;
    }
    FLUSH_RUN();
#undef FLUSH_RUN
    free(order);
    return 0;
fail:
    free(order);
    return -1;
}

int tl_plot_px(const viz_timeline *tl)
{
    int w = tl->width - 260;
    return w < 200 ? 200 : w;
}

viz_timeline *viz_timeline_new(const viz_timeline_opts *o)
{
    viz_timeline *tl = calloc(1, sizeof *tl);
    if (!tl)
        return NULL;
    tl->cs = calloc(1, sizeof *tl->cs);
    if (!tl->cs || !(tl->cs->bind = trace_binder_new(TRACE_BIND_FLAGS)) ||
        !(tl->names = trace_new())) {
        viz_timeline_free(tl);
        return NULL;
    }
    tl->width = o && o->width > 0 ? o->width : 1400;
    if (o)
        tl->opts = *o;
    tl->opts.title = NULL;
    if (o && o->title)
        snprintf(tl->title, sizeof tl->title, "%s", o->title);
    return tl;
}

int viz_timeline_feed(viz_timeline *tl, const trace *t, const trace_stmt *s, trace_error *err)
{
    int st = store_item(tl, tl->cs, t, s);
    if (st == -2)
        return trace_error_set(err, TRACE_ECORRUPT, "statement %llu comes out of order",
                               (unsigned long long)s->seq),
               -1;
    if (st != 0 || link_statement(tl, tl->cs, t, s) != 0)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory collecting the timeline"), -1;
    return 0;
}

int viz_timeline_end(viz_timeline *tl, const trace *t, const char *source, trace_error *err)
{
    tl->timed = tl->n_untimed == 0 && tl->n_items > 0;
    if (!tl->timed) /* a trace with no box at all but timed marks is still timed */
        tl->timed = tl->n_boxes_in == 0 && tl->n_items > 0 && tl->items[0].t != TRACE_TIME_NONE;
    if (link_flags(tl, tl->cs) != 0 || make_lanes(tl, t) != 0)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory laying out the timeline"), -1;
    if (compute_range(tl, &tl->opts, err) != 0)
        return -1;
    if (layout_boxes(tl, &tl->opts) != 0)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory laying out the timeline"), -1;
    tl->n_devices = tl->n_groups - ((t->n_host_queues ? 1 : 0));
    snprintf(tl->source, sizeof tl->source, "%s", source ? source : "trace");
    collect_state_free(tl->cs);
    free(tl->cs);
    tl->cs = NULL;
    return 0;
}

int viz_timeline_collect(trace_reader *r, const viz_timeline_opts *o, viz_timeline **out,
                         trace_error *err)
{
    viz_timeline *tl = viz_timeline_new(o);
    if (!tl)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory collecting the timeline"), -1;
    trace_stmt s;
    int rc;
    while ((rc = trace_reader_next(r, &s, err)) == 1)
        if (viz_timeline_feed(tl, r->trace, &s, err) != 0) {
            rc = -1;
            break;
        }
    if (rc < 0 || viz_timeline_end(tl, r->trace, r->source, err) != 0) {
        viz_timeline_free(tl);
        return -1;
    }
    *out = tl;
    return 0;
}

void viz_timeline_free(viz_timeline *tl)
{
    if (!tl)
        return;
    for (uint32_t i = 0; i < tl->n_lanes && tl->lanes; i++)
        free(tl->lanes[i].name), free(tl->lanes[i].qname);
    free(tl->lanes);
    free(tl->lane_of);
    free(tl->items);
    free(tl->arrows);
    free(tl->boxes);
    free(tl->races);
    free(tl->advice);
    trace_free(tl->names);
    if (tl->cs) {
        collect_state_free(tl->cs);
        free(tl->cs);
    }
    free(tl);
}

int viz_timeline_add_advice(viz_timeline *tl, const struct check_advice *a)
{
    uint64_t n = a->n_stmts < tl->n_items ? a->n_stmts : tl->n_items;
    uint8_t *m = malloc((n ? n : 1) * sizeof *m);
    if (!m)
        return -1;
    if (n)
        memcpy(m, a->mark, n * sizeof *m);
    free(tl->advice);
    tl->advice = m;
    tl->n_advice = n;
    return 0;
}

const char *viz_timeline_format_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && strcasecmp(dot, ".svg") == 0)
        return "svg";
    if (dot && strcasecmp(dot, ".png") == 0)
        return "png";
    return NULL;
}

int viz_timeline_add_race(viz_timeline *tl, uint64_t first_seq, uint64_t second_seq,
                          const char *label)
{
    if (first_seq >= tl->n_items || second_seq >= tl->n_items)
        return 0;
    if (trace_grow((void **)&tl->races, &tl->cap_races, tl->n_races + 1, sizeof *tl->races) != 0)
        return -1;
    tl_race *rc = &tl->races[tl->n_races++];
    rc->first = first_seq;
    rc->second = second_seq;
    snprintf(rc->label, sizeof rc->label, "%s", label ? label : "race");
    rc->type[0] = '\0';
    return 0;
}

int viz_timeline_add_findings(viz_timeline *tl, const trace *t, const trace_check_info *info,
                              const trace_finding *f, size_t n)
{
    check_coverage cov;
    check_verdict(tl->verdict, sizeof tl->verdict, t, info ? info->statements : tl->n_items,
                  info ? info->findings : n, info && info->incomplete,
                  check_coverage_from_info(&cov, info), f, n);
    for (size_t i = 0; i < n; i++) {
        const trace_finding *x = &f[i];
        bool race = x->kind == TRACE_FINDING_RACE, uaf = x->kind == TRACE_FINDING_USE_AFTER_FREE;
        if ((!race && !uaf) || x->first.seq == TRACE_NO_SEQ || x->second.seq == TRACE_NO_SEQ)
            continue;
        uint32_t b = x->buffer != TRACE_NONE ? x->buffer : x->root;
        const char *buffer = b < t->n_buffers ? trace_str(t, t->buffers[b].name) : "?";
        const char *type = race ? check_race_word(x->race_type) : "";
        char label[160];
        if (race)
            snprintf(label, sizeof label, "%s on %s", type, buffer);
        else
            snprintf(label, sizeof label, "use after free of %s", buffer);
        if (viz_timeline_add_race(tl, x->first.seq, x->second.seq, label) != 0)
            return -1;
        if (race && tl->n_races && tl->races[tl->n_races - 1].second == x->second.seq)
            snprintf(tl->races[tl->n_races - 1].type, sizeof tl->races[0].type, "%s", type);
    }
    return 0;
}

/* The findings a source has: those stored for its run by `check`, else the
 * checker's, run now over the statements again. *checked says which. */
int viz_findings_of(trace_source *src, trace_check_info *info, trace_finding **out, size_t *n,
                    bool *checked_now, trace_error *err)
{
    *out = NULL;
    *n = 0;
    *checked_now = false;
    memset(info, 0, sizeof *info);
    if (src->store &&
        trace_store_load_check(src->store, src->run, src->reader.trace, info, out, n, err) != 0)
        return -1;
    if (info->id)
        return 0;
    if (trace_reader_rewind(&src->reader, err) != 0)
        return -1;
    check_options opt = { .max_findings = 10000 };
    check_report *rep = NULL;
    if (check_trace(&src->reader, &opt, &rep, err) != 0)
        return -1;
    *checked_now = true;
    info->incomplete = trace_source_incomplete(src);
    info->statements = check_report_ops(rep);
    info->findings = check_report_count(rep) + check_report_dropped(rep);
    info->stored = check_report_count(rep);
    check_coverage_to_info(check_report_coverage(rep), info);
    *n = check_report_take(rep, out);
    check_report_free(rep);
    return 0;
}

int viz_timeline_from_source(trace_source *src, const viz_timeline_opts *o, viz_timeline **out,
                             trace_error *err)
{
    viz_timeline *tl = NULL;
    if (viz_timeline_collect(&src->reader, o, &tl, err) != 0)
        return -1;
    if (src->store && !(o && o->title))
        snprintf(tl->title, sizeof tl->title, "%s, run %lld", src->path, (long long)src->run);
    else if (!(o && o->title)) {
        const char *base = strrchr(src->path, '/');
        snprintf(tl->title, sizeof tl->title, "%s", base ? base + 1 : src->path);
    }
    if (!(o && o->no_findings)) {
        trace_check_info info;
        trace_finding *f = NULL;
        size_t n = 0;
        bool now;
        if (viz_findings_of(src, &info, &f, &n, &now, err) != 0) {
            viz_timeline_free(tl);
            return -1;
        }
        int rc = viz_timeline_add_findings(tl, src->reader.trace, &info, f, n);
        trace_findings_free(f, n);
        if (rc != 0) {
            viz_timeline_free(tl);
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
        }
    }
    *out = tl;
    return 0;
}

int viz_timeline_open(const char *path, int64_t run, const viz_timeline_opts *o,
                      viz_timeline **out, trace_error *err)
{
    trace_source src;
    trace_source_opts so = { .run = run };
    if (trace_source_open(&src, path, &so, err) != 0)
        return -1;
    int rc = viz_timeline_from_source(&src, o, out, err);
    trace_source_close(&src);
    return rc;
}

size_t viz_timeline_boxes(const viz_timeline *tl)
{
    return tl->n_boxes;
}

const char *viz_timeline_verdict(const viz_timeline *tl)
{
    return tl->verdict;
}

size_t viz_timeline_races(const viz_timeline *tl)
{
    return tl->n_races;
}

bool viz_timeline_timed(const viz_timeline *tl)
{
    return tl->timed;
}

bool viz_timeline_merged(const viz_timeline *tl)
{
    return tl->merge && tl->n_merged;
}

const char *viz_timeline_default_format(const viz_timeline *tl)
{
    return tl->merge ? "png" : "svg";
}
