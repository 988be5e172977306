/*
 * store_import.c -- trace_store_import: any reader into a new run, in one
 * transaction, so that a failed import leaves nothing behind (a database
 * the import created is removed; an existing one is rolled back).
 *
 * Parsing and writing cost about the same, so they run on two threads: the
 * reader on a producer thread (pipe.h), SQLite on the caller's. A text
 * reader declares queues and buffers into its trace as it meets them, and
 * the writer must write those before the statements that use them; the
 * producer is therefore held after each batch (stmt_pipe_start's hold)
 * until the writer has taken note of the declarations so far, the only
 * moment it reads the reader's trace. Labels travel as text in the batch
 * (the reader is opened with lazy labels where it can be), so that a
 * distinct label on every statement is never interned.
 *
 * A text trace's statements keep their line numbers, which count in the
 * file read: its absolute path goes into the run's metadata as
 * source_file, so that `check` of the database shows a finding at that
 * file's line, as it does for the file itself. Any other input keeps the
 * source_file its trace carries (a run read from another database).
 */
#include "pipe.h"
#include "store_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The producer: statements of the reader, each with its label's text. */
static int import_fill(void *ctx, stmt_batch *b)
{
    trace_reader *r = ctx;
    while (b->n < STMT_BATCH) {
        trace_stmt s;
        int rc = trace_reader_next(r, &s, &b->err);
        if (rc != 1)
            return rc;
        const char *label = NULL;
        size_t len = 0;
        if (s.label == TRACE_LABEL_LAZY &&
            trace_reader_label_text(r, &s, &label, &len, &b->err) != 0)
            return -1;
        if (stmt_batch_push(b, &s, label, len) != 0) {
            trace_error_set(&b->err, TRACE_ENOMEM, "%s: out of memory",
                            r->source ? r->source : "trace");
            return -1;
        }
    }
    return 1;
}

/* Writes every statement of r, and the declarations they use before them;
 * *lines: whether any statement had a line number. Returns 0 or -1 with
 * err. */
static int write_stmts(store_writer *w, trace_reader *r, bool *lines, trace_error *err)
{
    stmt_pipe *pp = stmt_pipe_start(import_fill, r, true);
    trace_stmt s;
    int rc;
    if (!pp) {                  /* no second thread: one statement at a time */
        while ((rc = trace_reader_next(r, &s, err)) == 1) {
            const char *label = NULL;
            size_t len = 0;
            *lines |= s.line != 0;
            if (trace_reader_label_text(r, &s, &label, &len, err) != 0 ||
                store_writer_decls(w, r->trace, err) != 0 ||
                store_writer_stmt(w, r->trace, w->n_stmts, &s, label, len, err) != 0)
                return -1;
        }
        return rc;
    }
    const char *label;
    size_t len;
    bool fresh;
    while ((rc = stmt_pipe_next(pp, &s, &label, &len, &fresh, err)) == 1) {
        if (fresh) {            /* the producer waits: its trace is ours to read */
            rc = store_writer_decls(w, r->trace, err);
            stmt_pipe_resume(pp);
            if (rc != 0)
                break;
        }
        if (s.label == TRACE_LABEL_LAZY && !label) {
            trace_error_set(err, TRACE_EUSAGE, "%s: a lazy label without its text",
                            r->source ? r->source : "trace");
            rc = -1;
            break;
        }
        *lines |= s.line != 0;
        if ((rc = store_writer_stmt(w, r->trace, w->n_stmts, &s, label, len, err)) != 0)
            break;
    }
    stmt_pipe_stop(pp);
    return rc;
}

/* An imported run is complete unless the trace says it was not (run
 * metadata status=, which export writes for a run that was recording or
 * interrupted): then it stays 'incomplete', and is never checked clean. */
static const char *run_status(const trace *t)
{
    const char *s = trace_get_meta(t, "status");
    return s && strcmp(s, "complete") != 0 ? "incomplete" : "complete";
}

/* The file a text trace's line numbers count in: r's source, when it is a
 * regular file that is not a database (a run read from a database keeps
 * the source_file of its metadata); its absolute path, malloc'd, or NULL. */
static char *lines_file(const trace_reader *r)
{
    struct stat sb;
    if (!r->source || stat(r->source, &sb) != 0 || !S_ISREG(sb.st_mode))
        return NULL;
    FILE *f = fopen(r->source, "rb");
    char head[16] = "";
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    if (n == sizeof head && memcmp(head, "SQLite format 3", 16) == 0)
        return NULL;
    return realpath(r->source, NULL);
}

/* Sets run_meta source_file of w's run to file. */
static int write_source_file(store_writer *w, const char *file, trace_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(w->st->db,
                                "INSERT OR REPLACE INTO run_meta VALUES(?1, 'source_file', ?2,"
                                " coalesce((SELECT pos FROM run_meta WHERE run = ?1 AND"
                                " key = 'source_file'), (SELECT count(*) FROM run_meta"
                                " WHERE run = ?1)))",
                                -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, w->run);
        sqlite3_bind_text(q, 2, file, -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : store_fail(w->st, rc, "run_meta", "cannot write", err);
}

int64_t trace_store_import(const char *path, trace_reader *r, const char *run_name,
                           uint64_t *n_stmts, trace_error *err)
{
    bool existed = access(path, F_OK) == 0;
    store_writer w = { 0 };
    bool in_txn = false;
    int64_t run = -1;
    trace_store *st = trace_store_open(path, true, err);
    if (!st)
        goto fail;
    if (store_exec(st, "BEGIN IMMEDIATE", NULL, err) != 0)
        goto fail;
    in_txn = true;
    if (!run_name)
        run_name = r->source ? r->source : "import";
    run = store_new_run(st, run_name, "import", err);
    bool lines = false;
    if (run < 0 || store_writer_init(&w, st, run, err) != 0 ||
        write_stmts(&w, r, &lines, err) != 0 || store_writer_decls(&w, r->trace, err) != 0 ||
        store_writer_meta(&w, r->trace, err) != 0)
        goto fail;
    char *text = lines ? lines_file(r) : NULL;
    int src_rc = text ? write_source_file(&w, text, err) : 0;
    free(text);
    if (src_rc != 0 || store_writer_run_row(&w, run_status(r->trace), err) != 0)
        goto fail;
    if (n_stmts)
        *n_stmts = w.n_stmts;
    store_writer_fini(&w);
    if (store_exec(st, "COMMIT", NULL, err) != 0)
        goto fail;
    trace_store_close(st);
    return run;
fail:
    store_writer_fini(&w);
    if (in_txn)
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    trace_store_close(st);
    if (!existed)
        store_remove_files(path);
    return -1;
}
