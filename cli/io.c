/*
 * io.c -- what commands read and write, in one place: the trace argument
 * (through the one door, traces/source.c, with ./syncsim.db as the default)
 * and output files, written whole or not at all (traces/outfile.c), which
 * may never replace the command's own input or a trace database.
 */
#include "cli.h"
#include "sim/sim.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *cli_trace_arg(const char *cmd, int argc, char **argv, int first)
{
    if (first < argc - 1) {
        cli_usage_error(cmd, "too many arguments ('%s' after '%s')", argv[first + 1], argv[first]);
        return NULL;
    }
    if (first == argc - 1)
        return argv[first];
    if (access(CLI_DEFAULT_DB, F_OK) == 0)
        return CLI_DEFAULT_DB;
    cli_usage_error(cmd, "missing trace, and there is no ./" CLI_DEFAULT_DB " to use instead");
    return NULL;
}

int cli_open(const char *cmd, const char *path, const trace_source_opts *o, trace_source *src)
{
    trace_error err = { 0 };
    trace_source_opts opts = o ? *o : (trace_source_opts){ 0 };
    if ((unsigned long long)opts.run >= CLI_RUN_NAMED(0) &&
        cli_run_resolve(cmd, path, &opts.run) != 0)
        return 2;
    /* a foreign capture is parsed inside the open: that is where its bar is */
    cli_progress *prog = opts.progress.fn ? NULL : cli_progress_open(cmd, &opts);
    if (trace_source_open(src, path, &opts, &err) != 0) {
        cli_progress_abort(prog);       /* gone before the error */
        return cli_error(cmd, "%s", err.msg);
    }
    cli_progress_end(prog);
    return 0;
}

const char *cli_doc(const char *name)
{
    static char path[PATH_MAX + 64];
    /* beside the data this copy reads (sim_devices_dir: the one rule of
     * where an installed copy's files are), share/doc/syncsim/docs */
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/../../doc/syncsim/docs", sim_devices_dir());
    char *real = realpath(dir, NULL);
    struct stat sb;
    if (real && stat(real, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(path, sizeof path, "%.*s/%s", PATH_MAX, real, name);
    else if (stat(SYNCSIM_DOCS_DIR, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(path, sizeof path, "%s/%s", SYNCSIM_DOCS_DIR, name);
    else
        snprintf(path, sizeof path, "docs/%s", name);
    free(real);
    return path;
}

uint64_t cli_source_statements(trace_source *src)
{
    trace_run_info *ri = NULL;
    trace_error err = { 0 };
    if (!src->store || trace_store_run(src->store, src->run, &ri, &err) != 0)
        return 0;
    uint64_t n = ri->n_stmts;
    trace_run_info_free(ri, 1);
    return n;
}

int cli_find_run_name(trace_store *st, const char *name, int64_t *id, trace_error *err)
{
    trace_run_info *runs = NULL;
    size_t n = 0;
    if (trace_store_runs(st, &runs, &n, err) != 0)
        return -1;
    int found = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(runs[i].name, name) == 0) {
            if (found++ == 0)
                *id = runs[i].id;
            else
                snprintf(err->msg, sizeof err->msg, "runs %lld and %lld are both named '%s'; "
                         "give the id, or rename one (syncsim runs --name)",
                         (long long)*id, (long long)runs[i].id, name);
        }
    trace_run_info_free(runs, n);
    return found > 1 ? -1 : found;
}

int cli_resolve_run_in(const char *cmd, trace_store *st, const char *path, const char *arg,
                       int64_t *id)
{
    unsigned long long v;
    if (*arg && strspn(arg, "0123456789") == strlen(arg)) {
        if (cli_parse_u64(arg, &v) != 0 || v == 0 || v > INT64_MAX)
            return cli_usage_error(cmd, "expected a run id (1, 2, ...) or a run's name, got "
                                   "'%s'", arg);
        *id = (int64_t)v;
        trace_run_info *ri = NULL;
        trace_error err = { 0 };
        if (trace_store_run(st, *id, &ri, &err) != 0)
            return cli_error(cmd, "%s", err.msg);
        trace_run_info_free(ri, 1);
        return 0;
    }
    trace_error err = { 0 };
    int found = cli_find_run_name(st, arg, id, &err);
    if (found == 1)
        return 0;
    if (found == 0) {
        char what[300];
        snprintf(what, sizeof what, "named '%.256s'", arg);
        trace_store_no_run(st, what, &err);
        return cli_error(cmd, "%s", err.msg);
    }
    return cli_error(cmd, "%s: %s", path, err.msg);
}

bool cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int cli_output_check(const char *cmd, const char *output, const char *input)
{
    if (!*output)
        return cli_usage_error(cmd, "-o needs a file name (got an empty one)");
    if (strcmp(output, "-") == 0)
        return 0;
    struct stat sb;
    if (stat(output, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cli_error(cmd, "%s: is a directory; -o names the file to write", output);
    if (input && strcmp(input, "-") != 0 && cli_same_file(output, input))
        return cli_error(cmd, "%s: is the input; refusing to write over it (choose another -o)",
                         output);
    if (access(output, F_OK) == 0 && trace_sqlite_has_table(output, "statements") == 1)
        return cli_error(cmd, "%s: is a trace database; refusing to replace it (choose another -o)",
                         output);
    return 0;
}

FILE *cli_output_open(const char *cmd, const char *output, char **tmp)
{
    *tmp = NULL;
    if (!output || strcmp(output, "-") == 0)
        return stdout;
    trace_error err = { 0 };
    FILE *f = trace_out_open(output, tmp, &err);
    if (!f)
        cli_error(cmd, "%s", err.msg);
    return f;
}

int cli_output_close(const char *cmd, FILE *f, const char *output, char *tmp, bool ok)
{
    if (f == stdout) {
        if (fflush(stdout) != 0 && ok)
            return cli_error(cmd, "standard output: %s", strerror(errno));
        return ok ? 0 : 2;
    }
    trace_error err = { 0 };
    bool was_ok = ok;
    if (trace_out_close(f, output, tmp, ok, &err) == 0)
        return 0;
    return was_ok ? cli_error(cmd, "%s", err.msg) : 2;
}
