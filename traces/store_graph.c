/*
 * store_graph.c -- the split graph a run keeps beside its statements
 * (tables graph_nodes, graph_edges and graph_splits; see the schema at the
 * top of store.c). Strings are plain text columns: these tables are small
 * and read by people and notebooks.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* The split graph.                                                    */

static void bind_text_or_null(sqlite3_stmt *q, int col, const char *s)
{
    if (s)
        sqlite3_bind_text(q, col, s, -1, SQLITE_STATIC);
}

/* Prepares sql, lets bind() fill it, steps once. */
static int run_once(trace_store *st, const char *sql, const char *table, sqlite3_stmt **out,
                    trace_error *err)
{
    int rc = sqlite3_prepare_v2(st->db, sql, -1, out, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, table, NULL, err);
    return 0;
}

static int finish_once(trace_store *st, sqlite3_stmt *q, const char *table, trace_error *err)
{
    int rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, table, "cannot write", err);
    return 0;
}

int store_put_graph_node(trace_store *st, int64_t run, const trace_graph_node *n, trace_error *err)
{
    sqlite3_stmt *q;
    if (run_once(st, "INSERT OR REPLACE INTO graph_nodes VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
                 "graph_nodes", &q, err))
        return -1;
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, n->id);
    bind_text_or_null(q, 3, n->name);
    bind_text_or_null(q, 4, n->op);
    bind_text_or_null(q, 5, n->shape);
    bind_text_or_null(q, 6, n->backend);
    sqlite3_bind_int64(q, 7, n->split);
    bind_text_or_null(q, 8, n->cause);
    sqlite3_bind_int64(q, 9, n->copy_slot);
    sqlite3_bind_int64(q, 10, n->flags);
    return finish_once(st, q, "graph_nodes", err);
}

int store_put_graph_edge(trace_store *st, int64_t run, int64_t idx, const trace_graph_edge *e,
                         trace_error *err)
{
    sqlite3_stmt *q;
    if (run_once(st, "INSERT INTO graph_edges VALUES(?1,?2,?3,?4,?5)", "graph_edges", &q, err))
        return -1;
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, idx);
    sqlite3_bind_int64(q, 3, e->src);
    sqlite3_bind_int64(q, 4, e->dst);
    bind_text_or_null(q, 5, e->kind);
    return finish_once(st, q, "graph_edges", err);
}

int store_put_graph_split(trace_store *st, int64_t run, const trace_graph_split *s,
                          trace_error *err)
{
    sqlite3_stmt *q;
    if (run_once(st, "INSERT OR REPLACE INTO graph_splits VALUES(?1,?2,?3,?4,?5,?6)",
                 "graph_splits", &q, err))
        return -1;
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, s->id);
    bind_text_or_null(q, 3, s->backend);
    sqlite3_bind_int64(q, 4, s->first_node);
    sqlite3_bind_int64(q, 5, s->n_nodes);
    bind_text_or_null(q, 6, s->inputs);
    return finish_once(st, q, "graph_splits", err);
}

/* A copy of column col, NULL for SQL NULL; sets *oom on failure. */
static char *opt_col(sqlite3_stmt *q, int col, bool *oom)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    if (!s)
        return NULL;
    char *c = strdup((const char *)s);
    if (!c)
        *oom = true;
    return c;
}

void trace_graph_free(trace_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_nodes; i++) {
        free((char *)g->nodes[i].name);
        free((char *)g->nodes[i].op);
        free((char *)g->nodes[i].shape);
        free((char *)g->nodes[i].backend);
        free((char *)g->nodes[i].cause);
    }
    for (size_t i = 0; i < g->n_edges; i++)
        free((char *)g->edges[i].kind);
    for (size_t i = 0; i < g->n_splits; i++) {
        free((char *)g->splits[i].backend);
        free((char *)g->splits[i].inputs);
    }
    free(g->nodes);
    free(g->edges);
    free(g->splits);
    memset(g, 0, sizeof *g);
}

/* Reads all rows of one graph table into a growing array through fill(). */
static int read_rows(trace_store *st, int64_t run, const char *sql, const char *table,
                     void **arr, size_t *n, size_t elem,
                     void (*fill)(sqlite3_stmt *q, void *row, bool *oom), trace_error *err)
{
    sqlite3_stmt *q = NULL;
    size_t cap = 0;
    bool oom = false;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, table, NULL, err);
    sqlite3_bind_int64(q, 1, run);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            void *na = realloc(*arr, cap * elem);
            if (!na) {
                oom = true;
                break;
            }
            *arr = na;
        }
        void *row = (char *)*arr + *n * elem;
        memset(row, 0, elem);
        (*n)++;
        fill(q, row, &oom);
        if (oom)
            break;
    }
    sqlite3_finalize(q);
    if (oom)
        return trace_error_set(err, TRACE_ENOMEM, "%s: table %s: out of memory", st->path, table),
               -1;
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, table, NULL, err);
    return 0;
}

static void fill_node(sqlite3_stmt *q, void *row, bool *oom)
{
    trace_graph_node *n = row;
    n->id = sqlite3_column_int64(q, 0);
    n->name = opt_col(q, 1, oom);
    n->op = opt_col(q, 2, oom);
    n->shape = opt_col(q, 3, oom);
    n->backend = opt_col(q, 4, oom);
    n->split = sqlite3_column_int64(q, 5);
    n->cause = opt_col(q, 6, oom);
    n->copy_slot = sqlite3_column_int64(q, 7);
    n->flags = (uint32_t)sqlite3_column_int64(q, 8);
}

static void fill_edge(sqlite3_stmt *q, void *row, bool *oom)
{
    trace_graph_edge *e = row;
    e->src = sqlite3_column_int64(q, 0);
    e->dst = sqlite3_column_int64(q, 1);
    e->kind = opt_col(q, 2, oom);
}

static void fill_split(sqlite3_stmt *q, void *row, bool *oom)
{
    trace_graph_split *s = row;
    s->id = sqlite3_column_int64(q, 0);
    s->backend = opt_col(q, 1, oom);
    s->first_node = sqlite3_column_int64(q, 2);
    s->n_nodes = sqlite3_column_int64(q, 3);
    s->inputs = opt_col(q, 4, oom);
}

int trace_store_graph(trace_store *st, int64_t run, trace_graph *out, trace_error *err)
{
    memset(out, 0, sizeof *out);
    run = store_resolve_run(st, run, err);
    if (run < 0)
        return -1;
    if (read_rows(st, run,
                  "SELECT id, name, op, shape, backend, split, cause, copy_slot, flags"
                  " FROM graph_nodes WHERE run = ?1 ORDER BY id",
                  "graph_nodes", (void **)&out->nodes, &out->n_nodes, sizeof *out->nodes,
                  fill_node, err) ||
        read_rows(st, run, "SELECT src, dst, kind FROM graph_edges WHERE run = ?1 ORDER BY idx",
                  "graph_edges", (void **)&out->edges, &out->n_edges, sizeof *out->edges,
                  fill_edge, err) ||
        read_rows(st, run,
                  "SELECT id, backend, first_node, n_nodes, inputs FROM graph_splits"
                  " WHERE run = ?1 ORDER BY id",
                  "graph_splits", (void **)&out->splits, &out->n_splits, sizeof *out->splits,
                  fill_split, err)) {
        trace_graph_free(out);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Findings.                                                           */
