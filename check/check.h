/*
 * check.h -- the checker: happens-before verification of a trace, findings
 * with concrete fixes, expectations, and the sync minimiser.
 *
 * The rules are those of docs/trace-format.md (shared/spec/trace-text-format.md);
 * check/hb.c states them in prose at its top. docs/checker.md explains the
 * engine, the clocks, the shadow memory and the incremental minimiser.
 *
 * Memory: a report refers to the trace it was made from by string and queue
 * ids (labels, names): keep that trace alive while using the report.
 */
#ifndef SYNCSIM_CHECK_H
#define SYNCSIM_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "traces/trace.h"

typedef struct check_options {
    uint32_t max_findings;  /* findings kept in the report; 0 = unlimited (the
                             * summary still counts the ones left out) */
    bool ignore_hangs;      /* do not report `hang` (e.g. a truncated recording) */
    bool redundant;         /* also report `redundant-sync` (runs the minimiser;
                             * needs an in-memory reader: trace_reader_memory) */
    uint32_t checkpoint_every; /* minimiser: statements between checkpoints (0: 256) */
    bool allow_findings;    /* minimiser: go on when the trace already has findings
                             * (see check_minimize for what that promises) */
} check_options;

typedef struct check_report check_report;   /* findings + summary */

/* Checks everything r yields, streaming: memory does not grow with the
 * number of statements (only with pending blocked work and findings).
 * Returns 0 (report made, possibly with findings) or -1 with err (bad input
 * or out of memory). Does not close r; keep r->trace alive while using the
 * report. */
int check_trace(trace_reader *r, const check_options *opt, check_report **out,
                trace_error *err);

size_t check_report_count(const check_report *rep);             /* findings kept */
size_t check_report_count_kind(const check_report *rep, trace_finding_kind k);
/* Findings found but not kept because of max_findings. */
uint64_t check_report_dropped(const check_report *rep);
/* Statements checked. */
uint64_t check_report_ops(const check_report *rep);

/* Human output: races grouped by cause (queue pair and missing edge), the
 * first of each group shown with a count; every other finding in full. */
void check_report_print(FILE *out, const check_report *rep);
/* The --json form of the spec: one object, one line per finding. */
void check_report_print_json(FILE *out, const check_report *rep, const char *trace_name);
void check_report_free(check_report *rep);

/* A read-only view of one finding. Pointers stay valid while rep lives. */
typedef struct check_stmt_ref {
    uint64_t seq;           /* UINT64_MAX: absent */
    uint32_t queue;
    uint32_t label;         /* string id or TRACE_NONE */
    uint32_t line;          /* 0 when not from text */
    trace_kind kind;
    uint32_t by;            /* the submitting host of a stream statement, or TRACE_NONE */
} check_stmt_ref;

enum { CHECK_RAW = 1, CHECK_WAR = 2, CHECK_WAW = 4 };

typedef struct check_finding {
    trace_finding_kind kind;
    uint8_t race_type;      /* the reported CHECK_* (race) */
    uint8_t race_types;     /* every CHECK_* seen between the two statements */
    check_stmt_ref first;   /* race: earlier in the file; use-after-free: the free */
    check_stmt_ref second;  /* race/use-after-free: the later access; others: the statement */
    uint32_t buffer;        /* buffer as named by the second access (race, uaf) */
    uint32_t root;          /* its root buffer */
    uint64_t lo, hi;        /* root bytes */
    uint32_t object;        /* wait-unrecorded: event; collective-mismatch: communicator */
    uint64_t generation;    /* collective-mismatch: generation (from 1) */
    char *detail;           /* hang: JSON array of blocked queues; mismatch: participants */
    char *text;             /* one line for people: what happened */
    char *fix;              /* the concrete fix */
    uint32_t n_queues;      /* hang: blocked queues */
    uint32_t *queues;
} check_finding;

const check_finding *check_report_finding(const check_report *rep, size_t i);

/* Writes finding f as one JSON object (no newline). */
void check_finding_print_json(FILE *out, const check_report *rep, const check_finding *f);

/* Compares the findings with the trace's `expect` lines (rep's trace).
 * Returns true when they agree exactly; prints the difference (missing and
 * unexpected findings) to out when not. A trace without expect lines never
 * agrees (prints that it has none). */
bool check_report_expect(FILE *out, const check_report *rep);

/* Rows for trace_store_save_findings: one per finding, JSON made with
 * check_finding_print_json. Free with check_report_rows_free. */
int check_report_rows(const check_report *rep, trace_finding_row **rows, size_t *n);
void check_report_rows_free(trace_finding_row *rows, size_t n);

/* ------------------------------------------------------------------ */
/* The minimiser.                                                      */

/* One removable synchronisation: a wait, sync or await statement, or one
 * participant of a barrier generation (every participant of a generation is
 * removed together). */
typedef struct check_removal {
    uint64_t seq;
    uint32_t queue;
    uint32_t line;
    trace_kind kind;
    uint64_t group;         /* barrier generation: seq of its first statement; else seq */
} check_removal;

typedef struct check_min_result {
    check_removal *removed; /* what can go, in submission order */
    size_t n_removed;
    size_t n_candidates;    /* candidates tried (a barrier generation counts once) */
    uint64_t replayed;      /* statements re-checked in total (cost measure) */
    bool *keep;             /* per seq of the input trace: false when removed */
    uint64_t n_stmts;
    size_t n_findings;      /* findings the trace has before any removal */
} check_min_result;

/* Greedy minimisation of an in-memory trace t: tries removing each wait,
 * sync and await statement and each barrier generation in submission order,
 * keeping a removal when re-checking finds nothing that the trace with the
 * removals so far did not find. A removal is a deletion of the line: the
 * statement keeps no submission edge or binding. Incremental: see
 * docs/checker.md.
 *
 * The promise: on a trace without findings, deleting every removed
 * statement (or any of them) leaves a trace without findings. On a trace
 * that has findings it is weaker -- no new *reported* finding -- because
 * the checker reports each access against the latest conflicting ones, so
 * a removal can add a race that hides behind a reported one and appears
 * once that one is fixed. So unless opt->allow_findings, a trace with
 * findings is not minimised: res->n_findings says how many it has and
 * nothing is removed. Returns 0 or -1 with err. */
int check_minimize(trace *t, const check_options *opt, check_min_result *out,
                   trace_error *err);
void check_min_result_free(check_min_result *res);

/* The sync pattern of each host iteration before and after the removals
 * (keep: per seq, NULL = all kept), in the one alphabet of traces/pattern.c.
 * Prints nothing when no statement carries token= or iter=. */
void check_print_sync_patterns(FILE *out, const trace *t, const bool *keep);

/* A copy of t without the statements whose keep[] is false (declarations,
 * metadata and expectations other than redundant-sync copied; string ids
 * preserved). NULL when out of memory. */
trace *check_trace_filter(const trace *t, const bool *keep);

#endif
