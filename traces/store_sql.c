/*
 * store_sql.c -- the statements of a trace database as a SQL table, for
 * people who query by hand (`syncsim sql`).
 *
 * Since schema 3 a run's statements are packed into blocks (store.c), which
 * SQL alone cannot read. `stmts` is an eponymous virtual table registered
 * on a connection to the database: every statement of every run, one row
 * each, in run and seq order, read through the store's own reader (so
 * blocks, late times and the rows of older runs alike):
 *
 *   stmts(run, seq, queue, kind, label, object, t, dur, line, text)
 *
 * queue, label and object are names (object as the kind reads it: the
 * queue of `sync S`, `all`, a buffer of alloc/free, else the event, flag,
 * barrier, communicator or device); t and dur nanoseconds or NULL; text the
 * statement as the text format writes it, accesses and attributes
 * included. A `run = N` constraint reads that run only; without one, every
 * run is read. Rows come sorted by run and seq, which the planner is told.
 *
 * trace_store_query runs SQL on the store's own connection and hands each
 * row to its caller as typed values: `syncsim sql` formats them, and no
 * command talks to SQLite itself.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct stmts_vtab {
    sqlite3_vtab base;
    const char *path;       /* the database, read through its own reader */
} stmts_vtab;

typedef struct stmts_cursor {
    sqlite3_vtab_cursor base;
    int64_t *runs;          /* the runs to read, in order */
    size_t n_runs, at;      /* at: the run being read is runs[at - 1] */
    trace_reader r;
    bool open;              /* r holds a run */
    trace_stmt s;
    bool eof;
    char *text;             /* the current statement's text, made when asked */
    size_t text_len;
} stmts_cursor;

enum { COL_RUN, COL_SEQ, COL_QUEUE, COL_KIND, COL_LABEL, COL_OBJECT, COL_T, COL_DUR, COL_LINE,
       COL_TEXT };

static int vt_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **msg)
{
    (void)argc;
    (void)argv;
    (void)msg;
    int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(run INTEGER, seq INTEGER, queue TEXT,"
                                      " kind TEXT, label TEXT, object TEXT, t INTEGER,"
                                      " dur INTEGER, line INTEGER, text TEXT)");
    if (rc != SQLITE_OK)
        return rc;
    stmts_vtab *v = sqlite3_malloc(sizeof *v);
    if (!v)
        return SQLITE_NOMEM;
    memset(v, 0, sizeof *v);
    v->path = aux;
    *out = &v->base;
    return SQLITE_OK;
}

static int vt_disconnect(sqlite3_vtab *vt)
{
    sqlite3_free(vt);
    return SQLITE_OK;
}

/* idxNum 1: a run given by `run = ?`. Rows come in (run, seq) order. */
static int vt_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
    (void)vt;
    info->idxNum = 0;
    info->estimatedCost = 1e9;
    for (int i = 0; i < info->nConstraint; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        if (c->usable && c->iColumn == COL_RUN && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
            info->aConstraintUsage[i].argvIndex = 1;
            info->aConstraintUsage[i].omit = 1;
            info->idxNum = 1;
            info->estimatedCost = 1e6;
            break;
        }
    }
    bool sorted = info->nOrderBy > 0;
    for (int i = 0; i < info->nOrderBy; i++) {
        const struct sqlite3_index_orderby *o = &info->aOrderBy[i];
        int want = info->nOrderBy == 1 && info->idxNum == 1 ? COL_SEQ
                   : i == 0                                 ? COL_RUN
                                                            : COL_SEQ;
        if (o->desc || o->iColumn != want || i > 1)
            sorted = false;
    }
    info->orderByConsumed = sorted;
    return SQLITE_OK;
}

static int vt_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
    (void)vt;
    stmts_cursor *c = sqlite3_malloc(sizeof *c);
    if (!c)
        return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    c->eof = true;
    *out = &c->base;
    return SQLITE_OK;
}

static void cursor_reset(stmts_cursor *c)
{
    if (c->open)
        trace_reader_close(&c->r);
    c->open = false;
    free(c->runs);
    c->runs = NULL;
    c->n_runs = c->at = 0;
    free(c->text);
    c->text = NULL;
    c->eof = true;
}

static int vt_close(sqlite3_vtab_cursor *cur)
{
    cursor_reset((stmts_cursor *)cur);
    sqlite3_free(cur);
    return SQLITE_OK;
}

static int fail(stmts_cursor *c, const char *msg)
{
    sqlite3_vtab *vt = c->base.pVtab;
    sqlite3_free(vt->zErrMsg);
    vt->zErrMsg = sqlite3_mprintf("%s", msg);
    return SQLITE_ERROR;
}

/* The next statement: of the open run, else of the next run that has one. */
static int advance(stmts_cursor *c)
{
    const char *path = ((stmts_vtab *)c->base.pVtab)->path;
    free(c->text);
    c->text = NULL;
    for (;;) {
        trace_error err = { 0 };
        if (c->open) {
            int rc = trace_reader_next(&c->r, &c->s, &err);
            if (rc == 1)
                return SQLITE_OK;
            trace_reader_close(&c->r);
            c->open = false;
            if (rc < 0)
                return fail(c, err.msg);
        }
        if (c->at == c->n_runs) {
            c->eof = true;
            return SQLITE_OK;
        }
        if (trace_store_open_reader(path, c->runs[c->at++], &c->r, &err) != 0) {
            if (err.status == TRACE_ENORUN)
                continue;       /* `run = 7` of no run: no rows */
            return fail(c, err.msg);
        }
        c->open = true;
    }
}

static int vt_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv)
{
    (void)idx_str;
    stmts_cursor *c = (stmts_cursor *)cur;
    cursor_reset(c);
    c->eof = false;
    if (idx == 1 && argc == 1) {
        if (sqlite3_value_numeric_type(argv[0]) != SQLITE_INTEGER) {
            c->eof = true;      /* no run is named so */
            return SQLITE_OK;
        }
        if (!(c->runs = malloc(sizeof *c->runs)))
            return SQLITE_NOMEM;
        c->runs[0] = sqlite3_value_int64(argv[0]);
        c->n_runs = 1;
    } else {
        trace_error err = { 0 };
        trace_store *st = trace_store_open_mode(((stmts_vtab *)cur->pVtab)->path,
                                                TRACE_STORE_READ, &err);
        trace_run_info *ri = NULL;
        size_t n = 0;
        if (!st || trace_store_runs(st, &ri, &n, &err) != 0) {
            trace_store_close(st);
            return fail(c, err.msg);
        }
        trace_store_close(st);
        if (n && !(c->runs = malloc(n * sizeof *c->runs))) {
            trace_run_info_free(ri, n);
            return SQLITE_NOMEM;
        }
        for (size_t i = 0; i < n; i++)
            c->runs[i] = ri[i].id;
        c->n_runs = n;
        trace_run_info_free(ri, n);
    }
    return advance(c);
}

static int vt_next(sqlite3_vtab_cursor *cur)
{
    return advance((stmts_cursor *)cur);
}

static int vt_eof(sqlite3_vtab_cursor *cur)
{
    return ((stmts_cursor *)cur)->eof;
}

/* The name of the statement's object as its kind reads it; NULL: none. */
static const char *object_name(const trace *t, const trace_stmt *s)
{
    if (s->kind == TRACE_SYNC && s->sync_scope == TRACE_SYNC_ALL)
        return "all";
    if (s->object == TRACE_NONE)
        return NULL;
    if (s->kind == TRACE_SYNC && s->sync_scope == TRACE_SYNC_QUEUE)
        return s->object < t->n_queues ? trace_str(t, t->queues[s->object].name) : NULL;
    if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE)
        return s->object < t->n_buffers ? trace_str(t, t->buffers[s->object].name) : NULL;
    return trace_str(t, s->object);
}

static void result_text(sqlite3_context *ctx, const char *s)
{
    if (s)
        sqlite3_result_text(ctx, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_result_null(ctx);
}

static void result_time(sqlite3_context *ctx, int64_t v)
{
    if (v == TRACE_TIME_NONE)
        sqlite3_result_null(ctx);
    else
        sqlite3_result_int64(ctx, v);
}

static int vt_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col)
{
    stmts_cursor *c = (stmts_cursor *)cur;
    const trace *t = c->r.trace;
    const trace_stmt *s = &c->s;
    switch (col) {
    case COL_RUN:
        sqlite3_result_int64(ctx, c->runs[c->at - 1]);
        break;
    case COL_SEQ:
        sqlite3_result_int64(ctx, (int64_t)s->seq);
        break;
    case COL_QUEUE:
        result_text(ctx, trace_str(t, t->queues[s->queue].name));
        break;
    case COL_KIND:
        result_text(ctx, trace_kind_str(s->kind));
        break;
    case COL_LABEL:
        result_text(ctx, s->label == TRACE_NONE ? NULL : trace_str(t, s->label));
        break;
    case COL_OBJECT:
        result_text(ctx, object_name(t, s));
        break;
    case COL_T:
        result_time(ctx, s->t);
        break;
    case COL_DUR:
        result_time(ctx, s->dur);
        break;
    case COL_LINE:
        if (s->line)
            sqlite3_result_int64(ctx, s->line);
        else
            sqlite3_result_null(ctx);
        break;
    case COL_TEXT:
        if (!c->text) {
            FILE *mem = open_memstream(&c->text, &c->text_len);
            trace_error err = { 0 };
            int rc = mem ? trace_text_stmt(mem, t, s, &err) : -1;
            if (mem)
                fclose(mem);
            if (rc != 0 || !c->text) {
                free(c->text);
                c->text = NULL;
                sqlite3_result_error(ctx, mem ? err.msg : "out of memory", -1);
                return SQLITE_ERROR;
            }
        }
        sqlite3_result_text(ctx, c->text, (int)c->text_len, SQLITE_TRANSIENT);
        break;
    }
    return SQLITE_OK;
}

static int vt_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid)
{
    stmts_cursor *c = (stmts_cursor *)cur;
    *rowid = (sqlite3_int64)((uint64_t)c->runs[c->at - 1] << STORE_SEQ_BITS | c->s.seq);
    return SQLITE_OK;
}

/* Eponymous only (no xCreate): `stmts` exists on every connection it is
 * registered on, and in no schema. */
static const sqlite3_module stmts_module = {
    .xConnect = vt_connect,
    .xBestIndex = vt_best_index,
    .xDisconnect = vt_disconnect,
    .xOpen = vt_open,
    .xClose = vt_close,
    .xFilter = vt_filter,
    .xNext = vt_next,
    .xEof = vt_eof,
    .xColumn = vt_column,
    .xRowid = vt_rowid,
};

/* Steps q to its end through fn. 0, 1 when fn stopped, or -1 with err. */
static int query_rows(trace_store *st, sqlite3_stmt *q, trace_query_fn fn, void *ctx,
                      trace_error *err)
{
    int n = sqlite3_column_count(q);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    trace_val *row = calloc((size_t)n + 1, sizeof *row);
    int rc = -1;
    if (!names || !row) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path);
        goto out;
    }
    for (int c = 0; c < n; c++)
        names[c] = sqlite3_column_name(q, c);
    if (fn(ctx, TRACE_QUERY_BEGIN, n, names, NULL)) {
        rc = 1;
        goto out;
    }
    int step;
    while ((step = sqlite3_step(q)) == SQLITE_ROW) {
        for (int c = 0; c < n; c++) {
            trace_val *v = &row[c];
            switch (sqlite3_column_type(q, c)) {
            case SQLITE_NULL:
                *v = (trace_val){ .type = TRACE_VAL_NULL };
                break;
            case SQLITE_INTEGER:
                *v = (trace_val){ .type = TRACE_VAL_INT, .i = sqlite3_column_int64(q, c) };
                break;
            case SQLITE_FLOAT:
                *v = (trace_val){ .type = TRACE_VAL_REAL, .r = sqlite3_column_double(q, c) };
                break;
            default:        /* text, and a blob as its bytes */
                *v = (trace_val){ .type = TRACE_VAL_TEXT,
                                  .s = (const char *)sqlite3_column_text(q, c) };
                if (!v->s)
                    v->s = "";
                break;
            }
        }
        if (fn(ctx, TRACE_QUERY_ROW, n, names, row)) {
            rc = 1;
            goto out;
        }
    }
    if (step != SQLITE_DONE) {
        trace_error_set(err, store_status_of(step), "%s: %s", st->path, sqlite3_errmsg(st->db));
        goto out;
    }
    rc = fn(ctx, TRACE_QUERY_END, n, names, NULL) ? 1 : 0;
out:
    free(names);
    free(row);
    return rc;
}

int trace_store_query(trace_store *st, const char *sql, trace_query_fn fn, void *ctx,
                      trace_error *err)
{
    int rc;
    if (!st->has_stmts) {       /* stmts exists on this connection from the first query on */
        rc = sqlite3_create_module(st->db, "stmts", &stmts_module, (void *)st->path);
        if (rc != SQLITE_OK)
            return store_fail(st, rc, NULL, "cannot make the stmts table", err);
        st->has_stmts = true;
    }
    while (sql && *sql) {
        sqlite3_stmt *q = NULL;
        const char *tail = NULL;
        rc = sqlite3_prepare_v2(st->db, sql, -1, &q, &tail);
        if (rc != SQLITE_OK)
            return trace_error_set(err, TRACE_EUSAGE, "%s: %s", st->path,
                                   sqlite3_errmsg(st->db)), -1;
        int qrc = q ? query_rows(st, q, fn, ctx, err) : 0;
        sqlite3_finalize(q);
        if (qrc != 0)
            return qrc < 0 ? -1 : 0;
        sql = tail;
    }
    return 0;
}
