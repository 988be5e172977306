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
    /* minimiser: called after each candidate is tried, with the candidates
     * tried and their number (for a progress bar). NULL: none. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} check_options;

typedef struct check_report check_report;   /* findings + summary */

/* Checks everything r yields, streaming: memory does not grow with the
 * number of statements (only with pending blocked work and findings).
 * Returns 0 (report made, possibly with findings) or -1 with err (bad input
 * or out of memory). Does not close r; keep r->trace alive while using the
 * report. */
int check_trace(trace_reader *r, const check_options *opt, check_report **out,
                trace_error *err);

/* Records rep, a check of src's run, in src's database (a check mark and
 * the findings kept: trace_store_save_check). Returns 0 when stored, 1 when
 * src is no database or one this process cannot write, -1 with err. */
int check_store_report(trace_source *src, const check_report *rep, trace_error *err);

size_t check_report_count(const check_report *rep);             /* findings kept */
size_t check_report_count_kind(const check_report *rep, trace_finding_kind k);
/* Findings found but not kept because of max_findings. */
uint64_t check_report_dropped(const check_report *rep);
/* Statements checked. */
uint64_t check_report_ops(const check_report *rep);

/* Human output: races grouped by cause (queue pair and missing edge), the
 * first of each group shown with a count; every other finding in full.
 * incomplete: the run is incomplete (the verdict says so, never "clean"). */
void check_report_print(FILE *out, const check_report *rep, bool incomplete);
/* check_print_json of the report. */
void check_report_print_json(FILE *out, const check_report *rep, const char *trace_name,
                             bool incomplete);
void check_report_free(check_report *rep);

const trace_finding *check_report_finding(const check_report *rep, size_t i);

/* The findings kept, in report order (n: check_report_count). */
const trace_finding *check_report_findings(const check_report *rep);
/* Moves the findings out of rep into *out (the caller's: trace_findings_free);
 * rep keeps its counts but no finding. Returns how many. */
size_t check_report_take(check_report *rep, trace_finding **out);
/* A race type's word: RAW, WAR or WAW (TRACE_RACE_*). */
const char *check_race_word(uint8_t type);

/* What a check could judge (check/coverage.c says why each part counts):
 * device statements with byte ranges out of all that compute or move data,
 * host statements with byte ranges, events dropped at import (the ledger),
 * ranks absent from a job. Filled while checking; check_coverage_of() fills
 * it from an in-memory trace. */
typedef struct check_coverage {
    uint64_t device;        /* op, copy, collective, send, recv on stream queues */
    uint64_t device_ranged; /* of which with a non-empty byte range */
    uint64_t host_accesses; /* host statements with a non-empty byte range */
    uint64_t dropped;       /* events read and not imported (trace_ledger) */
    bool captured;          /* a capture: accesses come from its source (run
                             * metadata accesses=), so a missing one is unknown */
    uint32_t ranks_given, ranks_world;  /* some ranks of a job (partial=); 0, 0: whole */
    uint64_t uaf_unjudged;  /* accesses whose use-after-free verdict needed lifetime
                             * marks the checker had forgotten (check/internal.h,
                             * check_life) */
} check_coverage;

void check_coverage_init(check_coverage *c, const trace *t);
void check_coverage_stmt(check_coverage *c, const trace *t, const trace_stmt *s);
void check_coverage_of(check_coverage *c, const trace *t);
/* Full: every device statement of a capture has byte ranges (and it has
 * some), nothing was dropped at import, no rank is absent, every access
 * could be judged for use after free. */
bool check_coverage_full(const check_coverage *c);
/* What is missing, in one line without a final period ("" when full); t
 * (may be NULL) names the ledger's reasons and the absent ranks. Writes at
 * most cap bytes of buf; returns the length it needed. */
size_t check_coverage_missing(char *buf, size_t cap, const check_coverage *c, const trace *t);
/* "coverage full[: N of N device statements with byte ranges, ...]" or
 * "coverage partial: <what is missing>". Same conventions. */
size_t check_coverage_describe(char *buf, size_t cap, const check_coverage *c, const trace *t);
/* The JSON object {"full": ..., "device_statements": ..., ...}. */
void check_coverage_print_json(FILE *out, const check_coverage *c, const trace *t);
/* A coverage as the store keeps it with a check (trace_check_info), and
 * back: NULL when info has none (a check stored before coverage was). */
void check_coverage_to_info(const check_coverage *c, trace_check_info *info);
const check_coverage *check_coverage_from_info(check_coverage *c, const trace_check_info *info);
/* The coverage of a report's check. */
const check_coverage *check_report_coverage(const check_report *rep);

/* How a check ended, for people and programs: clean (with full coverage),
 * findings, a run that is incomplete (still recording, or its producer
 * died), or no findings with partial coverage. Neither of the last two is
 * ever called clean. */
typedef enum {
    CHECK_CLEAN = 0,
    CHECK_FINDINGS = 1,
    CHECK_INCOMPLETE = 2,
    CHECK_PARTIAL = 3,
} check_status;
/* cov NULL: coverage unknown, taken as full (a check stored before coverage was).
 * findings: those that are errors (check_errors_of): warnings alone leave a
 * trace clean. */
check_status check_status_of(uint64_t findings, bool incomplete, const check_coverage *cov);
/* How many of f[0..n) are errors (check_finding_is_error), plus dropped
 * (found, not kept: counted as errors). */
uint64_t check_errors_of(const trace_finding *f, size_t n, uint64_t dropped);
const char *check_status_str(check_status st);
/* The exit status of `check` for st: 0 clean, 1 findings, 3 incomplete,
 * 4 partial coverage (2 is bad input or usage, never a verdict). */
int check_exit_status(check_status st);
/* False when t records only ordering (run metadata accesses=none: a capture
 * without byte ranges), where races and uses after free cannot be seen. */
bool check_sees_races(const trace *t);
/* The verdict in one line, the words every command and picture uses:
 * "clean: 27 statements, no findings", "incomplete: ...", "no findings,
 * partial coverage: ..." or "3 findings in 27 statements (race 2, hang 1)",
 * with "; 1 of 3 shown (--max-findings)" when fewer than found are at hand
 * (f[0..n): those, counted by kind), "; the run is incomplete ..." when it
 * is, and the coverage (check_coverage_describe) when cov is given and the
 * trace is a capture or its coverage partial. cov NULL: coverage unknown
 * (a check stored before coverage was), judged from t's metadata alone.
 * Writes into buf (cap bytes). */
const char *check_verdict(char *buf, size_t cap, const trace *t, uint64_t statements,
                          uint64_t found, bool incomplete, const check_coverage *cov,
                          const trace_finding *f, size_t n);

/* The --json form: one object (format syncsim-findings, version 1) with the
 * status, the statements checked, each finding (check_finding_print_json)
 * and the summary per kind. The one JSON writer of findings: a report's, or
 * those a database stores (t: the trace their ids refer to). dropped: found
 * but not kept. */
void check_print_json(FILE *out, const trace *t, const char *trace_name, uint64_t statements,
                      bool incomplete, const check_coverage *cov, const trace_finding *f,
                      size_t n, uint64_t dropped);
/* Writes finding f of trace t as one JSON object (no newline). */
void check_finding_print_json(FILE *out, const trace *t, const trace_finding *f);

/* A statement a finding names, and what it is to the finding. */
typedef struct check_place {
    const char *role;       /* "the later access", "the free", "blocked", ...: for notes */
    const char *detail;     /* what a blocked queue waits for, else NULL (the finding's) */
    uint32_t queue;
    uint32_t line;          /* 0: not from text */
    uint64_t seq;           /* TRACE_NO_SEQ: not known */
    uint32_t label;         /* string id of its label, TRACE_NONE: none (or a part) */
    uint32_t site;          /* string id of its site= (trace_stmt_ref.site), TRACE_NONE: none */
} check_place;
/* The statements finding f names: first the one to report it at (a race's
 * or use after free's later access, the statement of the other kinds, a
 * hang's first blocked queue), then the other side (a race's earlier
 * access, the free, the other set) and every part that names a statement.
 * Writes at most cap into out; returns how many there are. The one rule of
 * where a finding is, for the diagnostic lines and SARIF. */
size_t check_finding_places(const trace_finding *f, check_place *out, size_t cap);
/* Whether a finding is an error or only a warning (redundant-sync): the
 * severity of the diagnostic lines and the SARIF level. */
bool check_finding_is_error(const trace_finding *f);

/* The findings f[0..n) of trace t as compiler-style lines, one per finding,
 * each followed by notes:
 *
 *   FILE:LINE:COL: error|warning: KIND: what happened
 *   FILE:LINE:COL: note: fix: the concrete fix
 *   FILE:LINE:COL: note: the later statement: kernel_b (s1) at train.py:57
 *   FILE:LINE:COL: note: the other access (s0)
 *
 * A statement with a call site (site=) shows it: "LABEL (QUEUE) at SITE";
 * the statement the error line names gets a note of its own only then.
 *
 * path names the trace; in_db: it is a database, whose statements are
 * named "DB:seq N" (a line of the text it was imported from would name
 * another file), as is a statement without a line. Races with the same
 * missing edge (queue pair) are one group: the first in full, then a note
 * counting the rest. Prints no verdict (check_verdict). */
void check_print_diagnostics(FILE *out, const trace *t, const char *path, bool in_db,
                             const trace_finding *f, size_t n);

/* ------------------------------------------------------------------ */
/* SARIF 2.1.0 (check/sarif.c).                                        */

/* A finding's identity that survives edits of the trace elsewhere: a hash
 * of its kind and the names it involves (queues, labels or statement
 * kinds, buffer, event or communicator, race type), never lines or seqs.
 * Used by baselines (check --baseline) and as SARIF's partialFingerprints. */
uint64_t check_finding_fingerprint(const trace *t, const trace_finding *f);

/* A SARIF 2.1.0 log of one check of one or more traces: one run whose tool
 * lists every finding kind as a rule, one result per finding. */
typedef struct check_sarif check_sarif;
/* Starts the log on out. NULL when out of memory. */
check_sarif *check_sarif_begin(FILE *out);
/* Adds the findings f[0..n) of trace t, read from path (in_db as in
 * check_print_diagnostics). Each result has the finding's message, both
 * sides as locations (a file and region, or a database and a logical
 * location "seq N"), the parts as related locations, and, where the
 * statement has a line, the fix as a fix object. */
void check_sarif_add(check_sarif *w, const trace *t, const char *path, bool in_db,
                     const trace_finding *f, size_t n);
/* Why one trace's check is not a verdict to trust whole: a notification of
 * the invocation, so that such a log never looks clean. */
typedef enum {
    CHECK_SARIF_INCOMPLETE,     /* the run is incomplete (exit status 3) */
    CHECK_SARIF_PARTIAL,        /* coverage is partial (exit status 4) */
    CHECK_SARIF_UNREADABLE,     /* the trace could not be read (exit status 2) */
} check_sarif_notice;
/* Adds that notification about the trace at path, text saying it (the
 * verdict, or the error line). */
void check_sarif_notify(check_sarif *w, const char *path, check_sarif_notice kind,
                        const char *text);
/* Ends the log (invocation: exit_status, whether the run succeeded --
 * status 0, 1, 3 or 4 --, the working directory, the notifications) and
 * frees w. */
void check_sarif_end(check_sarif *w, int exit_status);

/* Compares the findings with the trace's `expect` lines (rep's trace).
 * Returns true when they agree exactly; prints the difference (missing and
 * unexpected findings) to out when not. A trace without expect lines never
 * agrees (prints that it has none). */
bool check_report_expect(FILE *out, const check_report *rep);



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
 * statement, or those up to any one of them in removed[]'s order, leaves a
 * trace without findings (not any subset: an earlier removal can be what
 * makes a later one safe, docs/checker.md). On a trace
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
 * preserved). NULL when out of memory. check_trace_edit with drops only. */
trace *check_trace_filter(const trace *t, const bool *keep);

/* ------------------------------------------------------------------ */
/* Edits of a trace (check/edit.c).                                    */

/* One synchronisation put into a trace by check_trace_edit. */
typedef struct check_insert {
    uint64_t at;            /* before statement `at` of the input (n_stmts: at the end);
                             * at one place, records and signals come first */
    trace_kind kind;        /* TRACE_RECORD, TRACE_WAIT, TRACE_SIGNAL, TRACE_AWAIT or TRACE_SYNC */
    uint32_t queue;         /* the queue that runs it */
    uint32_t by;            /* a stream statement's submitting host, else TRACE_NONE */
    uint32_t object;        /* as trace_stmt.object (string ids of the input): the event or
                             * flag; a sync's target */
    trace_sync_scope sync_scope; /* sync: its scope */
    size_t order;           /* check_trace_edit's own (keeps the order asked) */
} check_insert;

typedef struct check_edit {
    const bool *drop;       /* per seq of the input, NULL: none; true: deleted */
    const uint32_t *move_to;/* per seq, NULL: none; not TRACE_NONE: a statement its host ran
                             * itself (a blocking copy) is submitted by it to this stream */
    const check_insert *ins;
    size_t n_ins;
} check_edit;

/* A new trace: t's declarations, strings (same ids), metadata and
 * expectations other than redundant-sync, then its statements edited by e
 * (NULL: none). With seq_of, *seq_of (malloc'd, the caller's) gives for
 * each statement of the result the seq of t's it came from, TRACE_NO_SEQ
 * for an inserted one. NULL when out of memory. */
trace *check_trace_edit(const trace *t, const check_edit *e, uint64_t **seq_of);
/* The same as a view: *view shares t's declarations, strings and metadata
 * (t must outlive it and not change) and owns its statements only; free
 * them with check_trace_view_free, never trace_free. 0, or -1 (OOM). */
int check_trace_edit_view(const trace *t, const check_edit *e, trace *view, uint64_t **seq_of);
void check_trace_view_free(trace *view);

/* ------------------------------------------------------------------ */
/* The price of every sync (check/advise.c, check/advise_print.c).     */

/* What a run takes, as a replay says. */
typedef struct check_timing {
    int64_t makespan_ns;    /* -1: not known (the replay hangs) */
    int64_t per_iter_ns;    /* the median time between the ends of consecutive iterations
                             * (token= or iter=); -1 with fewer than two */
} check_timing;

/* The replay the advice prices with. check/ knows traces only, so the
 * caller plugs one in (cli/cmd_advise.c: sim/'s replay). */
typedef struct check_pricer {
    /* Replays t without the statements drop marks (NULL: none; waits,
     * syncs, awaits and barrier generations): *makespan, and when not NULL,
     * per statement of t its start and end (ns from the replay's start;
     * TRACE_TIME_NONE for a dropped one) and whether it is on the critical
     * path. Returns 0, 1 when the replay hangs (err says where), -1 with
     * err. */
    int (*replay)(void *ctx, const trace *t, const bool *drop, int64_t *makespan,
                  int64_t *start, int64_t *end, bool *critical, trace_error *err);
    void *ctx;
    const char *name;       /* how it prices, for the output ("h100-pcie, durations recorded") */
} check_pricer;

typedef enum {
    CHECK_SAFE_ALL,         /* the minimiser removes every occurrence */
    CHECK_SAFE_SOME,        /* some of them */
    CHECK_SAFE_NONE,        /* none */
    CHECK_SAFE_UNJUDGED,    /* coverage partial: no race can be judged, nothing is "safe" */
} check_safety;

/* What the advice says of each statement (check_advice.mark, per seq). */
enum { CHECK_MARK_NONE, CHECK_MARK_GOES, CHECK_MARK_REPLACE, CHECK_MARK_STAYS };

/* One group of synchronisations: the statements at one place of their
 * host's iteration pattern (and call site), or of one kind, queue and
 * target; a barrier's generations; or blocking copies alike. */
typedef struct check_advice_item {
    trace_kind kind;        /* wait, sync, await, barrier; TRACE_COPY: blocking copies */
    uint32_t queue;         /* the queue of its first statement */
    char what[192];         /* "host wait p.ev.GPU0.0", "barrier b", "host copy X (blocking; ...)" */
    char where[256];        /* its letter in its iteration's pattern "ws[c]sc...", its site; or "" */
    uint64_t count;         /* occurrences: statements, or barrier generations */
    uint64_t first_seq;
    uint64_t *seqs;         /* every statement of it */
    size_t n_seqs;
    int64_t held_ns;        /* the time its statements hold their queue, in all */
    bool held_recorded;     /* from the trace's own times (else the replay's) */
    int64_t critical_ns;    /* of which on the replay's critical path */
    uint64_t n_safe;        /* occurrences the minimiser removes (copies: all or none) */
    check_safety safety;
    check_timing without;   /* replayed without them all (copies: asynchronous) */
    check_timing without_safe; /* without the n_safe removable ones (SOME only) */
    uint64_t n_new;         /* findings removing them all lets in */
    char *finding, *fix;    /* the first of those, and its fix (owned; NULL: none) */
    char *replacement;      /* what keeps the order for less (owned; NULL: none found) */
    check_timing with_replacement;
    int64_t buys_ns;        /* makespan saved by the advice: the larger of the safe
                             * removal's gain and the replacement's; the sort key */
} check_advice_item;

typedef struct check_advice {
    check_advice_item *items;   /* sorted by buys_ns, largest first */
    size_t n;
    check_timing base;          /* the trace replayed as it is */
    check_timing all_safe;      /* without every removal the minimiser lists */
    uint64_t n_removable;       /* the minimiser: removals (a generation counts once) */
    uint64_t n_candidates;
    uint64_t n_copies;          /* blocking copies (host<->device copies the host performs) */
    check_timing all_async;     /* every one of them submitted to its stream instead */
    uint64_t all_async_new;     /* findings that lets in */
    char *all_async_finding;    /* the first of them (owned; NULL: none) */
    size_t n_findings;          /* the trace's own */
    bool ordering_only;         /* coverage partial */
    char coverage[512];         /* check_coverage_describe */
    uint8_t *mark;              /* per seq: CHECK_MARK_* (the timeline's marks) */
    uint64_t n_stmts;
} check_advice;

typedef struct check_advise_opts {
    const check_pricer *pricer;
    size_t max_groups;          /* 0: 128 (24 above 200 000 statements); more groups
                                 * are coarsened */
    bool no_replacements;       /* do not look for replacements */
    trace_progress progress;    /* the minimiser's "candidates", then the "groups"
                                 * priced (fn NULL: none) */
} check_advise_opts;

/* The advice for in-memory trace t (check/advise.c's head says how).
 * Returns 0, or -1 with err (out of memory, a replay that fails). */
int check_advise(trace *t, const check_advise_opts *o, check_advice *out, trace_error *err);
void check_advice_free(check_advice *a);
/* For people: a header (the replay, the baseline, coverage, the
 * minimiser's total) and one block per group, at most max_items (0: all). */
void check_advice_print(FILE *out, const trace *t, const char *name, const check_pricer *pr,
                        const check_advice *a, size_t max_items);
/* One JSON object, format syncsim-advice, version 1 (docs/advise.md). */
void check_advice_print_json(FILE *out, const trace *t, const char *name,
                             const check_pricer *pr, const check_advice *a);
/* "safe", "some", "unsafe", "unjudged". */
const char *check_safety_str(check_safety s);

#endif
