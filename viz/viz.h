/*
 * viz.h -- pictures and reports of what is stored: the split graph drawn
 * through Graphviz (libgvc, in-process), the timeline drawn by gnuplot (a
 * child process on a generated script and data file), and one
 * self-contained HTML page per run.
 *
 * viz draws what a trace or a trace database holds; it never runs a
 * schedule. It uses traces/ (readers, the store, the split graph, stored
 * findings) and check/ (the checker, run when a trace has no stored
 * findings, to find the races to draw). docs/viz.md is the user's page.
 *
 * Errors are trace_error values (traces/trace.h): one line that names the
 * file or database and what went wrong. Every function that writes a file
 * writes it whole or not at all (a temporary file renamed into place).
 */
#ifndef SYNCSIM_VIZ_H
#define SYNCSIM_VIZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "traces/trace.h"

/* ------------------------------------------------------------------ */
/* The split graph (viz/graph.c).                                      */

/* Above this many nodes drawn (after collapsing repeated layers) the graph
 * is drawn one node per split instead. */
#define VIZ_GRAPH_NODE_LIMIT 400
/* At least this many consecutive alike layers (same node names once the
 * layer number is taken out) are collapsed: the first and the last drawn,
 * the ones between as one placeholder node per split. */
#define VIZ_GRAPH_COLLAPSE_MIN 4

typedef struct viz_graph_opts {
    size_t node_limit;      /* 0: VIZ_GRAPH_NODE_LIMIT */
    bool full;              /* draw every node whatever the count; collapse nothing */
    const char *title;      /* graph label; NULL: none */
} viz_graph_opts;

/* The three pictures of a split graph. */
typedef enum viz_graph_view {
    VIZ_GRAPH_EVERY_NODE,   /* every node (--full, or nothing to collapse within the limit) */
    VIZ_GRAPH_COLLAPSED,    /* repeated layers collapsed into placeholders */
    VIZ_GRAPH_PER_SPLIT,    /* one node per split: over the limit even collapsed */
} viz_graph_view;

/* What a picture of g draws (viz_graph_describe). */
typedef struct viz_graph_drawing {
    viz_graph_view view;
    size_t nodes;           /* nodes of g drawn as themselves (PER_SPLIT: 0) */
    size_t layers_collapsed;/* layers drawn as placeholders */
    size_t nodes_collapsed; /* nodes of g inside placeholders */
    size_t placeholders;    /* "layers l1 to l78" nodes */
    size_t proxies;         /* "↳ name" nodes standing for a tensor drawn elsewhere */
} viz_graph_drawing;

/* Decides how g is drawn under o, as viz_graph_dot does, without drawing.
 * Returns 0, or -1 when out of memory. */
int viz_graph_describe(const trace_graph *g, const viz_graph_opts *o, viz_graph_drawing *out);

/* True when g is drawn one node per split under o (view PER_SPLIT; also
 * false when out of memory). */
bool viz_graph_summarised(const trace_graph *g, const viz_graph_opts *o);

/* Writes g as DOT text: one cluster per split (titled with split, backend,
 * inputs), nodes filled with their backend's colour and labelled with op
 * and shape, copy nodes and edges styled by kind, copy slots in the copy
 * nodes' labels, the assignment cause in each node's tooltip. Repeated
 * layers are collapsed unless o->full; a tensor read far from where it is
 * drawn reaches its far readers through "↳ name" proxy nodes; the label
 * says what the shapes and colours mean and what was collapsed. The design
 * is at the top of viz/graph.c. Returns 0, or -1 when writing fails or
 * memory runs out. Deterministic for a given graph. */
int viz_graph_dot(FILE *out, const trace_graph *g, const viz_graph_opts *o);

/* Lays g out with Graphviz's dot and renders it in `format` ("svg", "png",
 * "pdf"; "dot" writes viz_graph_dot's text without layout). With path
 * non-NULL the picture is written there (whole or not at all); else it is
 * returned in *data (malloc'd, NUL-terminated, *len bytes; caller frees).
 * Returns 0 or -1 with err filled. */
int viz_graph_render(const trace_graph *g, const viz_graph_opts *o, const char *format,
                     const char *path, char **data, size_t *len, trace_error *err);

/* The format named by a file name's extension (".svg" -> "svg", ...), or
 * NULL when the extension is not one of svg, png, pdf, dot, gv. */
const char *viz_graph_format_of(const char *path);

/* ------------------------------------------------------------------ */
/* The timeline (viz/timeline.c and viz/gnuplot.c).                   */

/* Above this many boxes, boxes narrower than a pixel are merged and the
 * default picture format is PNG. */
#define VIZ_TIMELINE_MERGE_ABOVE 50000

typedef struct viz_timeline_opts {
    int64_t from, to;       /* ns; TRACE_TIME_NONE: no bound */
    const char *title;      /* NULL: made from the trace */
    int width;              /* pixels; 0: 1400 */
    size_t merge_above;     /* 0: VIZ_TIMELINE_MERGE_ABOVE */
    bool no_findings;       /* do not look for races (no checker run) */
} viz_timeline_opts;

typedef struct viz_timeline viz_timeline;

/* A timeline fed statement by statement (so that one pass over a run can
 * feed it beside other consumers): new, feed each statement in submission
 * order, then end to lay it out. One lane per queue (hosts first, then the
 * streams grouped by device), statements as boxes (op, copy, collective,
 * alloc/free) or marks (record, wait, sync, barrier, signal, await), and
 * arrows from a record (or signal) to the waits it releases and from a
 * stream to the host syncs that cover it. Statements without t= are laid out
 * by submission order. NULL / -1 with err on failure. */
viz_timeline *viz_timeline_new(const viz_timeline_opts *o);
int viz_timeline_feed(viz_timeline *tl, const trace *t, const trace_stmt *s, trace_error *err);
int viz_timeline_end(viz_timeline *tl, const trace *t, const char *source, trace_error *err);
/* new + every statement of r + end. Does not close r. */
int viz_timeline_collect(trace_reader *r, const viz_timeline_opts *o, viz_timeline **out,
                         trace_error *err);

/* Adds a race between the statements with submission indices first_seq and
 * second_seq, drawn in red between their lanes; label says what it is
 * ("WAR on inp"). Unknown seqs are ignored. Returns 0 or -1 (memory). */
int viz_timeline_add_race(viz_timeline *tl, uint64_t first_seq, uint64_t second_seq,
                          const char *label);

/* Marks the statements the advice (check/advise.c) names on the timeline:
 * those that can go, and those to replace (per seq, check_advice.mark).
 * Returns 0 or -1 (memory). */
struct check_advice;
int viz_timeline_add_advice(viz_timeline *tl, const struct check_advice *a);
/* "svg" or "png" from a picture's name; NULL for another ending. */
const char *viz_timeline_format_of(const char *path);

/* Adds the races and uses after free among findings f[0..n) (names from t)
 * and, from info (the check they come from; NULL: f is all there is), the
 * verdict the picture states (check_verdict): how many were found, how
 * many are shown, whether the run is incomplete. Returns 0 or -1 (memory). */
int viz_timeline_add_findings(viz_timeline *tl, const trace *t, const trace_check_info *info,
                              const trace_finding *f, size_t n);
/* That verdict; "" before viz_timeline_add_findings. */
const char *viz_timeline_verdict(const viz_timeline *tl);

/* The findings of a source: those `check` stored for its run (info says
 * when and with what result), else -- never checked, or not a database --
 * the checker's, run now over the statements once more (*checked_now).
 * *out is the caller's (trace_findings_free). Returns 0 or -1 with err. */
int viz_findings_of(trace_source *src, trace_check_info *info, trace_finding **out, size_t *n,
                    bool *checked_now, trace_error *err);

/* Collects the timeline of a source and adds its races (viz_findings_of,
 * unless o->no_findings). Returns 0 or -1 with err. */
int viz_timeline_from_source(trace_source *src, const viz_timeline_opts *o, viz_timeline **out,
                             trace_error *err);
/* Opens path (run `run` of a database, 0: the latest) through the one door
 * and does viz_timeline_from_source. Returns 0 or -1 with err. */
int viz_timeline_open(const char *path, int64_t run, const viz_timeline_opts *o,
                      viz_timeline **out, trace_error *err);

void viz_timeline_free(viz_timeline *tl);

/* Facts about a collected timeline. */
size_t viz_timeline_boxes(const viz_timeline *tl);     /* boxes drawn (after merging) */
size_t viz_timeline_races(const viz_timeline *tl);
bool viz_timeline_timed(const viz_timeline *tl);       /* statements carry t= */
bool viz_timeline_merged(const viz_timeline *tl);      /* sub-pixel boxes merged */
/* "svg", or "png" when the timeline has more than merge_above boxes. */
const char *viz_timeline_default_format(const viz_timeline *tl);

/* Writes the gnuplot script to `script` and its data to `data`: the script
 * reads the data from data_path and writes the picture to out_path in
 * `format` ("svg" or "png"). Returns 0 or -1 when writing fails. */
int viz_timeline_write_gnuplot(const viz_timeline *tl, FILE *script, FILE *data,
                               const char *data_path, const char *out_path, const char *format);

/* True when a gnuplot program can be found (SYNCSIM_GNUPLOT names it, else
 * `gnuplot` on PATH). */
bool viz_gnuplot_available(void);

/* Draws tl with gnuplot in a fresh temporary directory (removed after):
 * with path non-NULL the picture goes there (whole or not at all), else into
 * *data and *len (malloc'd, NUL-terminated). format: "svg" or "png"; NULL: the
 * default. No gnuplot: err says so (status EUSAGE). Returns 0 or -1. */
int viz_timeline_render(const viz_timeline *tl, const char *format, const char *path,
                        char **data, size_t *len, trace_error *err);

/* ------------------------------------------------------------------ */
/* The report (viz/report.c).                                          */

struct check_pricer;
typedef struct viz_report_opts {
    int64_t run;            /* 0: the latest */
    bool no_timeline;       /* leave the timeline out (no gnuplot needed) */
    /* Called with the run's reader once it is open, before anything reads
     * it, and the run's statements (a progress bar wraps it to count what
     * the report's passes read; the reader is closed with the run). NULL:
     * none. */
    void (*watch)(void *ctx, trace_reader *r, uint64_t n_stmts);
    void *watch_ctx;
    /* NULL: no advice. Else the page has the advice (check_advise, priced by
     * this replay, which the caller plugs in: viz runs no schedule) and the
     * timeline marks the advised syncs. */
    const struct check_pricer *pricer;
} viz_report_opts;

/* Writes one self-contained HTML page about run o->run of the database at
 * db to out_path (whole or not at all): the run summary and metadata, the
 * findings with their fixes, the split graph and the timeline as inline
 * SVG, the sync pattern per iteration when statements carry token=/iter=,
 * and the runs derived from this one (replays, what-ifs: runs whose
 * run_meta names it under source_run or replay_of). Returns 0 or -1 with
 * err. */
int viz_report_write(const char *db, const viz_report_opts *o, const char *out_path,
                     trace_error *err);

/* ------------------------------------------------------------------ */
/* Shared helpers (viz/util.c).                                        */

/* Writes s HTML-escaped (also fine inside attribute values). */
void viz_html_escape(FILE *out, const char *s);
/* ns as people read it: "15 ns", "200 µs", "1.2 ms", "681.53 ms", "2.5 s". */
const char *viz_ns_str(double ns, char *buf, size_t cap);
/* Writes s escaped for the inside of a double-quoted gnuplot or DOT string:
 * \" and \\ escaped, newlines as \n. */
void viz_quote_escape(FILE *out, const char *s);
/* Writes data (an SVG document) for inline use in HTML: without the XML
 * prolog and doctype, every id and reference to one prefixed with prefix
 * so that several inline pictures cannot clash. */
void viz_svg_inline(FILE *out, const char *data, size_t len, const char *prefix);
/* Reads a whole file into *data (malloc'd, NUL-terminated). Returns 0 or -1. */
int viz_read_file(const char *path, char **data, size_t *len, trace_error *err);

#endif
