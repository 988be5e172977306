/*
 * source.c -- the one door to traces. trace_source_open() takes any file a
 * user names -- a text trace, a syncsim database (one of its runs), or a
 * capture in a registered foreign format -- decides what it is from its
 * content (never its name), and hands back one streaming reader, plus the
 * database it came from when it is one, opened once for everything the
 * command needs from it (the split graph, stored findings, other runs).
 *
 * Formats. Each format is a trace_format (a sniff and an open) registered
 * in formats[] below, one line each, most specific first: the first whose
 * sniff claims the file opens it. Text comes last and takes anything that
 * looks like text, so that a file without the header still gets the
 * parser's precise "file:line:col: expected ..." message. An importer is
 * therefore one file plus one line here (docs/extending.md).
 *
 * Standard input ("-") is a text trace: it cannot be sniffed without being
 * consumed.
 *
 * Progress. A capture in a foreign format is parsed whole inside its open,
 * so the format's reader says how far it has read through
 * trace_source_opts.progress (trace.h says when): the shared readers call
 * it -- json.c for every JSON format, nsys.c's row loop, cuda_log.c's line
 * loop -- and no importer has a copy. A syncsim database or a text trace
 * is read after the open, as statements, which the caller counts itself.
 */
#include "store_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ */
/* The two formats of syncsim itself.                                  */

static bool sniff_sqlite(const unsigned char *head, size_t n)
{
    return n >= 16 && memcmp(head, "SQLite format 3", 16) == 0;
}

/* A syncsim database: SQLite with syncsim's marker. A SQLite file that is
 * not a database of ours is left to the other formats (an Nsight Systems
 * export is SQLite too), and claimed at last by nobody. */
static bool syncsim_db_sniff(const char *path, const unsigned char *head, size_t n)
{
    if (!sniff_sqlite(head, n))
        return false;
    return trace_sqlite_has_table(path, "meta") == 1 && trace_sqlite_has_table(path, "statements") == 1;
}

static int syncsim_db_open(trace_source *src, const char *path, const trace_source_opts *o,
                           trace_error *err)
{
    trace_store *st = trace_store_open_mode(path, o->write_results ? TRACE_STORE_RESULTS
                                                                   : TRACE_STORE_READ,
                                            err);
    if (!st)
        return -1;
    int64_t run = store_resolve_run(st, o->run, err);
    if (run < 0 || (o->lazy_labels ? trace_store_reader_lazy(st, run, &src->reader, err)
                                   : trace_store_reader(st, run, &src->reader, err)) != 0) {
        trace_store_close(st);
        return -1;
    }
    src->store = st;
    src->run = run;
    trace_run_info *info;
    if (trace_store_run(st, run, &info, NULL) == 0) {
        src->incomplete = strcmp(info->status, "complete") != 0;
        trace_run_info_free(info, 1);
    }
    return 0;
}

/* Text: no NUL byte, and mostly UTF-8 -- a stray byte that is not is left
 * to the parser, whose message names its line and column. */
static bool text_sniff(const char *path, const unsigned char *head, size_t n)
{
    (void)path;
    if (n == 0 || memchr(head, 0, n))
        return false;           /* an empty file is told as such below */
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        size_t ok = trace_utf8_check((const char *)head + i, n - i);
        i += ok;
        if (i < n && n - i >= 4) {      /* not a sequence the head merely cuts */
            bad++;
            i++;
        } else {
            break;
        }
    }
    return bad * 16 <= n;
}

static int text_open(trace_source *src, const char *path, const trace_source_opts *o,
                     trace_error *err)
{
    return trace_text_open_lazy(path, o->lazy_labels, &src->reader, err);
}

const trace_format trace_format_syncsim_db = {
    "syncsim-db", "a syncsim trace database (SQLite; --run N picks a run, the latest by default)",
    false, syncsim_db_sniff, syncsim_db_open,
};

const trace_format trace_format_text = {
    "syncsim-text", "a text trace (docs/trace-format.md), or - for standard input", false,
    text_sniff, text_open,
};

/* Every format syncsim reads, one line each, most specific first. */
static const trace_format *const formats[] = {
    &trace_format_syncsim_db,
    &trace_format_nsys,
    &trace_format_chrome,
    &trace_format_cuda_log,
    &trace_format_kineto,
    &trace_format_text,
    NULL,
};

const trace_format *const *trace_formats(void)
{
    return formats;
}

/* ------------------------------------------------------------------ */
/* Opening.                                                            */

/* "a syncsim database, a text trace, ..." from the table. */
static void format_list(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; formats[i] && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", formats[i]->name);
}

/* One rank's trace of a larger job: its run metadata says rank= (or that
 * its rank is unknown: rank.unknown=, a profile with rank -1) and a
 * world_size= above 1, and it is no merged job (partial=, source=merge). */
static bool rank_alone(const trace *t)
{
    const char *rank = trace_get_meta(t, "rank"), *world = trace_get_meta(t, "world_size");
    const char *source = trace_get_meta(t, "source");
    return (rank || trace_get_meta(t, "rank.unknown")) && world &&
           strtoul(world, NULL, 10) > 1 && !trace_get_meta(t, "partial") &&
           !(source && strcmp(source, "merge") == 0);
}

/* Reads src's one rank as a partial job (trace_source_opts.as_recorded):
 * the merge takes the rank's reader over. */
static int open_rank_alone(trace_source *src, trace_error *err)
{
    trace_reader *one = malloc(sizeof *one);
    if (!one)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", src->path), -1;
    *one = src->reader;
    trace_merge_opts mo = { .partial = true, .owns_inputs = true };
    trace_reader job;
    if (trace_merge_open_opts(&one, 1, &mo, &job, err) != 0) {
        free(one);              /* src->reader still holds the rank */
        return -1;
    }
    free(job.source);
    job.source = strdup(one->source ? one->source : src->path);
    src->reader = job;
    return 0;
}

void trace_progress_say(const trace_progress *p, const char *unit, uint64_t done,
                        uint64_t total)
{
    if (p && p->fn)
        p->fn(p->ctx, unit, done, total);
}

int trace_source_open(trace_source *src, const char *path, const trace_source_opts *opts,
                      trace_error *err)
{
    static const trace_source_opts defaults = { 0 };
    const trace_source_opts *o = opts ? opts : &defaults;
    memset(src, 0, sizeof *src);
    if (!path || !*path)
        return trace_error_set(err, TRACE_EUSAGE, "no trace named (an empty file name)"), -1;
    src->path = strdup(path);
    if (!src->path)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path), -1;
    const trace_format *fmt = NULL;
    if (strcmp(path, "-") == 0) {
        fmt = &trace_format_text;
    } else {
        struct stat sb;
        if (stat(path, &sb) != 0) {
            trace_error_set(err, TRACE_EIO, "%s: %s", path,
                            errno == ENOENT ? "no such file" : strerror(errno));
            goto fail;
        }
        if (S_ISDIR(sb.st_mode)) {
            trace_error_set(err, TRACE_EIO, "%s: is a directory, expected a trace file", path);
            goto fail;
        }
        unsigned char head[TRACE_SNIFF_BYTES];
        FILE *f = fopen(path, "rb");
        if (!f) {
            trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno));
            goto fail;
        }
        size_t n = fread(head, 1, sizeof head, f);
        fclose(f);
        for (size_t i = 0; formats[i] && !fmt; i++)
            if (formats[i]->sniff(path, head, n))
                fmt = formats[i];
        if (!fmt) {
            char list[512];
            format_list(list, sizeof list);
            if (sniff_sqlite(head, n))
                trace_error_set(err, TRACE_ENOTTRACE,
                                "%s: a SQLite database, but not one syncsim reads (formats: %s)",
                                path, list);
            else
                trace_error_set(err, n ? TRACE_ENOTTRACE : TRACE_ESYNTAX,
                                n ? "%s: not a trace syncsim reads: binary data, neither a "
                                    "syncsim database nor a capture it knows (formats: %s)"
                                  : "%s: empty file, expected a trace (formats: %s)",
                                path, list);
            goto fail;
        }
    }
    if (o->run && fmt != &trace_format_syncsim_db) {
        trace_error_set(err, TRACE_EUSAGE,
                        "%s: --run picks a run of a syncsim database; this is a %s, which has "
                        "one trace",
                        path, fmt->name);
        goto fail;
    }
    if (o->companion && !fmt->companion) {
        trace_error_set(err, TRACE_EUSAGE, "%s: a %s takes no second input (%s)", path, fmt->name,
                        o->companion);
        goto fail;
    }
    src->format = fmt;
    if (fmt->open(src, path, o, err) != 0)
        goto fail;
    if (!o->as_recorded && rank_alone(src->reader.trace)) {
        if (o->lazy_labels) {
            /* the merge copies labels as it reads: open again with them */
            trace_source_opts eager = *o;
            eager.lazy_labels = false;
            trace_reader_close(&src->reader);
            trace_store_close(src->store);
            src->store = NULL;
            if (fmt->open(src, path, &eager, err) != 0)
                goto fail;
        }
        if (open_rank_alone(src, err) != 0)
            goto fail;
    }
    return 0;
fail:
    trace_source_close(src);
    return -1;
}

bool trace_source_incomplete(const trace_source *src)
{
    /* a run exported while incomplete says so in its metadata (status=) */
    const char *status = src->reader.trace ? trace_get_meta(src->reader.trace, "status") : NULL;
    return src->incomplete || (status && strcmp(status, "complete") != 0);
}

void trace_source_close(trace_source *src)
{
    trace_reader_close(&src->reader);
    trace_store_close(src->store);
    free(src->path);
    memset(src, 0, sizeof *src);
}

int trace_source_load(trace_source *src, trace **out, trace_error *err)
{
    if (trace_reader_load(&src->reader, out, err) != 0)
        return -1;
    trace_reader_memory(&src->reader, *out);
    return 0;
}
