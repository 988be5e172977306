/*
 * timeline_int.h -- the timeline's model, shared by viz/timeline.c (which
 * collects and lays it out) and viz/gnuplot.c (which draws it). Not part
 * of viz's public interface.
 */
#ifndef SYNCSIM_VIZ_TIMELINE_INT_H
#define SYNCSIM_VIZ_TIMELINE_INT_H

#include "viz/viz.h"

/* One statement, indexed by seq. */
typedef struct tl_item {
    int64_t t, dur;         /* ns; t = TRACE_TIME_NONE when not observed; dur >= 0 */
    uint32_t queue;         /* queue index */
    uint32_t label;         /* string id in tl->names, or TRACE_NONE */
    uint8_t kind;           /* trace_kind */
} tl_item;

enum { TL_ARROW_EVENT, TL_ARROW_SYNC, TL_ARROW_FLAG, TL_ARROW_MESSAGE, TL_ARROW_KINDS };

/* Why a statement could go on: from statement `from` to statement `to`. */
typedef struct tl_arrow {
    uint64_t from, to;
    uint8_t kind;           /* TL_ARROW_* */
} tl_arrow;

typedef struct tl_race {
    uint64_t first, second;
    char label[160];        /* "WAR on inp", or what the caller said */
    char type[16];          /* RAW, WAR, WAW; "" when unknown */
} tl_race;

/* A box as drawn: one statement, or (merged) a run of sub-pixel ones. */
typedef struct tl_box {
    double x0, x1;          /* ns, or submission slots when untimed */
    uint32_t lane;
    uint8_t kind;           /* the kind most of its statements have */
    uint32_t label;         /* TRACE_NONE for merged runs */
    uint32_t count;         /* statements in the box */
} tl_box;

typedef struct tl_lane {
    char *name;             /* "g0 (device 0 stream)" */
    char *qname;            /* "g0" */
    uint32_t group;         /* 0: hosts (when any), then one per device */
    bool host;
} tl_lane;

struct collect_state;

struct viz_timeline {
    trace *names;           /* labels, interned */
    struct collect_state *cs; /* while feeding: what links statements */
    viz_timeline_opts opts; /* as given (title kept in title[]) */
    tl_item *items;
    uint64_t n_items;
    size_t cap_items;
    tl_arrow *arrows;
    size_t n_arrows, cap_arrows;
    tl_race *races;
    size_t n_races, cap_races;

    tl_lane *lanes;
    uint32_t n_lanes, n_groups, n_devices;
    uint32_t *lane_of;      /* queue index -> lane */

    uint64_t n_boxes_in;    /* box statements in the trace */
    uint64_t n_untimed;     /* of them without t= */
    bool timed, merge;
    int64_t x_min;
    double view_lo, view_hi;/* the drawn x range (ns or slots) */
    double data_lo, data_hi;/* the trace's own */
    bool windowed;          /* view chosen with --from/--to */
    double ns_per_px;
    int width;              /* picture width, pixels */

    tl_box *boxes;
    size_t n_boxes, cap_boxes;
    uint64_t n_merged;      /* statements drawn inside merged runs */

    uint8_t *advice;        /* per seq: CHECK_MARK_* of the advice drawn, or NULL */
    uint64_t n_advice;

    char source[256];
    char title[512];
    char verdict[512];      /* the check's, in its words (check_verdict) */
};

/* Start and end of item `seq` in x units (ns or slots). */
void tl_item_span(const viz_timeline *tl, const tl_item *it, uint64_t seq, double *x0, double *x1);
/* Width of the plot area in pixels (the picture less its margins). */
int tl_plot_px(const viz_timeline *tl);


#endif
