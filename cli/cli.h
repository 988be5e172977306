/*
 * cli.h -- what the syncsim subcommands share.
 *
 * Each subcommand lives in cli/cmd_<name>.c and is listed in
 * cli/commands.def. It gets argv with argv[0] = its own name, returns the
 * process exit status (0 success, 1 "findings" where that applies, 2 bad
 * input or usage; check adds 3 incomplete and 4 partial coverage) and
 * prints errors as one line, "syncsim NAME: message" (cli_error; a message
 * that starts with a place in a file, FILE:LINE[:COL]:, is printed as
 * compilers print it: "FILE:LINE:COL: error: message (syncsim NAME)"), parsing options
 * with cli_getopt so that getopt says nothing of its own. Long work shows
 * progress through cli_progress; a command that derives a run from another
 * writes it only where -o says.
 */
#ifndef SYNCSIM_CLI_H
#define SYNCSIM_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "traces/trace.h"

#define X(name, summary)                    \
    int cmd_##name(int argc, char **argv);  \
    void cmd_##name##_help(FILE *out);
#include "commands.def"
#undef X

/* The database used when a command names none: the embedded default. */
#define CLI_DEFAULT_DB "syncsim.db"

/* Prints "syncsim CMD: message" to stderr; returns 2. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last error line cli_error or cli_usage_error printed ("" before
 * any), without its newline: for a report that says why (SARIF). */
const char *cli_last_error(void);
/* Prints the error, then the command's usage line and a hint; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* getopt_long for a command, with getopt's own messages off: returns the
 * next option as getopt_long does (-1 at the end), or CLI_OPT_ERROR after
 * printing the one error line ("syncsim CMD: unknown option '--x'",
 * "... option '--run' needs a value") and the usage; the command then
 * returns 2. shortopts as getopt's (a leading ':' is added). */
#define CLI_OPT_ERROR (-2)
struct option;
int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts);
/* Prints text wrapped at 95 columns, every line after the first indented by
 * `indent` columns (the first starts there too), and a newline. */
void cli_wrapped(FILE *out, const char *text, int indent);
/* Parses a non-negative integer option value; returns 0 or -1. */
int cli_parse_u64(const char *s, unsigned long long *out);
/* Parses the value of --run: a run id (1, 2, ...), or a run's name, which
 * stands as CLI_RUN_NAMED(k) until cli_run_resolve (cli_open does it) finds
 * it in the database. Returns 0, or prints the usage error for cmd and
 * returns 2, the exit status. */
int cli_parse_run(const char *cmd, const char *arg, unsigned long long *run);
#define CLI_RUN_NAMED(k) ((1ULL << 62) + (unsigned long long)(k))
/* Replaces a run name that cli_parse_run left in *run by the id of the run
 * of path with that name. 0 (also when *run is an id), or 2 after printing
 * the error (no such name, a name two runs share, no database). */
int cli_run_resolve(const char *cmd, const char *path, int64_t *run);
/* Run arg (an id, or a name) of the open database st at path: 0 with *id,
 * or 2 after printing the error. */
int cli_resolve_run_in(const char *cmd, trace_store *st, const char *path, const char *arg,
                       int64_t *id);
/* 1 when exactly one run of st is named name (*id: its id), 0 when none,
 * -1 when several (err says which) or on error. */
int cli_find_run_name(trace_store *st, const char *name, int64_t *id, trace_error *err);

/* The trace argument: argv[first] when given, else ./syncsim.db when it
 * exists. Prints the usage error and returns NULL otherwise (or when more
 * arguments follow). */
const char *cli_trace_arg(const char *cmd, int argc, char **argv, int first);
/* Opens path through trace_source_open, showing how far a capture in a
 * foreign format is read (cli_progress_open; unless o->progress is set
 * already) and erasing it before returning; prints the error line and
 * returns 2 on failure, 0 on success. */
int cli_open(const char *cmd, const char *path, const trace_source_opts *o, trace_source *src);

/* How many statements src holds, where it says (a database's run: for
 * progress); 0 when not known. */
uint64_t cli_source_statements(trace_source *src);

/* Where document name (a file of docs/, "cuda.md"; "" for the folder) is
 * for this binary: an installed copy's PREFIX/share/doc/syncsim/docs/NAME
 * (beside its bin/), else the source tree's docs/NAME it was built from,
 * else "docs/NAME". A static buffer, valid to the next call. */
const char *cli_doc(const char *name);

/* True when a and b name the same existing file (links and ./ included). */
bool cli_same_file(const char *a, const char *b);

/* Whether output may be written: not empty, not a directory, not the input
 * itself, not an existing trace database. 0, or the usage status 2 (error
 * printed). "-" is standard output. */
int cli_output_check(const char *cmd, const char *output, const char *input);
/* Opens a temporary file beside output (stdout for NULL or "-"); *tmp is its
 * name, for cli_output_close. NULL after printing the error. */
FILE *cli_output_open(const char *cmd, const char *output, char **tmp);
/* Closes f; when ok, renames it over output, else removes it. Frees tmp.
 * Returns 0, or 2 after printing the error (also when !ok). */
int cli_output_close(const char *cmd, FILE *f, const char *output, char *tmp, bool ok);

/* Progress of long work on standard error (cli/progress.c, whose head
 * comment says what is shown when). The work counts; a timer thread shows
 * it. Every function accepts NULL (progress off, or out of memory). */
typedef struct cli_progress cli_progress;
/* Starts showing progress of cmd's work, counted in unit ("statements"),
 * or, with unit "", only that it goes on. */
cli_progress *cli_progress_start(const char *cmd, const char *unit);
/* How much there is in all (0: not known: no percentage, no ETA). */
void cli_progress_total(cli_progress *p, uint64_t total);
/* The same, for a total that is only an estimate (merge's text inputs
 * count lines): the end line does not claim it. */
void cli_progress_estimate(cli_progress *p, uint64_t total);
/* For a library's progress hook (void (*)(void *ctx, uint64_t done,
 * uint64_t total), ctx the cli_progress): sets both. */
void cli_progress_callback(void *ctx, uint64_t done, uint64_t total);
/* Shows how far trace_source_open reads a capture in a foreign format
 * (cli_open does it for every command): a session of cmd that stays quiet
 * until the format's reader says how far it is, in bytes of the file or
 * rows, and which o->progress is set to tell. NULL, o untouched, when
 * progress is off. End it once the open has returned. */
cli_progress *cli_progress_open(const char *cmd, trace_source_opts *o);
/* A library's trace_progress hook counting into p: its first call gives the
 * unit, another unit starts a new pass ("pass 2: ..."); fn NULL for p NULL. */
trace_progress cli_progress_hook(cli_progress *p);
/* Counts src's statements into p against the best total src gives: its
 * run's statements for a database; for a text trace, its lines (the unit
 * becomes "lines", and what is done the line of the last statement read).
 * Wraps src->reader (cli_progress_reader). */
void cli_progress_source(cli_progress *p, trace_source *src);
/* What src holds, for a total: a database run's statements, a text trace's
 * lines (*lines set: an upper bound of its statements), else 0. */
uint64_t cli_source_size(trace_source *src, bool *lines);
/* Refuses a bad $SYNCSIM_PROGRESS or $SYNCSIM_PROGRESS_MS in one line on
 * standard error: 2 then, else 0 (main asks before any command runs). */
int cli_progress_env_check(void);
/* How much is done (any thread). */
void cli_progress_set(cli_progress *p, uint64_t done);
void cli_progress_add(cli_progress *p, uint64_t n);
/* Makes r count the statements it gives into p (a rewind starts a new
 * pass). Undo with cli_progress_unwrap before cli_progress_end unless r
 * is closed first. */
void cli_progress_reader(cli_progress *p, trace_reader *r);
void cli_progress_unwrap(cli_progress *p, trace_reader *r);
/* Stops the ticker: erases the bar, or prints a last line when lines were
 * printed; frees p. */
void cli_progress_end(cli_progress *p);
/* The same for work that failed: no last line says it is done (the error
 * that follows says why it is not). */
void cli_progress_abort(cli_progress *p);

/* Known findings (cli/baseline.c, whose head comment is the file format). */
typedef struct cli_baseline cli_baseline;
/* Reads the baseline at path. Returns 0, or 2 after printing the error
 * ("FILE:LINE:1: error: message (syncsim CMD)"). */
int cli_baseline_read(const char *cmd, const char *path, cli_baseline **out);
/* Whether finding f of trace t is known (false for b NULL). */
bool cli_baseline_has(const cli_baseline *b, const trace *t, const trace_finding *f);
/* Releases the known findings of f[0..n) and moves the others to the front,
 * in order; returns how many remain. */
size_t cli_baseline_filter(const cli_baseline *b, const trace *t, trace_finding *f, size_t n);
void cli_baseline_free(cli_baseline *b);
/* Collects findings for --write-baseline, then writes the file whole. */
typedef struct cli_baseline_writer cli_baseline_writer;
cli_baseline_writer *cli_baseline_writer_new(void);   /* NULL: out of memory */
void cli_baseline_writer_add(cli_baseline_writer *w, const trace *t, const char *path,
                             const trace_finding *f, size_t n);
/* Writes path (sorted, one line per fingerprint) and frees w. 0, or 2 after
 * printing the error. */
int cli_baseline_writer_finish(cli_baseline_writer *w, const char *cmd, const char *path);
/* Frees w without writing anything (NULL: nothing). */
void cli_baseline_writer_free(cli_baseline_writer *w);

/* The replay that prices the advice (check_advise) for `advise` and
 * `report --advise` (cli/cmd_advise.c): sim_replay on the device model
 * devices names (NULL: the trace's own, else h100-pcie, said on stderr),
 * durations recorded or by the model. */
#include "check/check.h"
#include "sim/sim.h"
typedef struct cli_pricer {
    check_pricer pricer;    /* what check_advise is given */
    sim_model model;
    bool loaded, recorded;
    const char *devices;
    char name[160];         /* "replay on h100-pcie, durations recorded" after the first replay */
} cli_pricer;
/* Sets p up; a devices name that is no model is said now (returns 2). */
int cli_pricer_init(const char *cmd, cli_pricer *p, const char *devices, bool recorded);

#endif
