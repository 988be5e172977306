/*
 * store_findings.c -- what `check` leaves in a database: one row in `checks`
 * per check of a run, and the latest check's findings, typed.
 *
 *   checks(run, id, version, created, status, statements, findings, stored)
 *       status 'complete', or 'incomplete' when the run was still recording
 *       (or its producer died) when it was checked; statements: how many
 *       were checked; findings: how many were found; stored: how many of
 *       them are in `findings` (fewer with --max-findings).
 *   findings(run, idx, check_id, kind, type, first_seq, first_queue,
 *            first_label, first_line, second_seq, second_queue,
 *            second_label, second_line, buffer, root, lo, hi, object,
 *            generation, text, fix)
 *   finding_parts(run, finding, pos, role, queue, seq, line, text, kind,
 *                 count, extra)
 *   check_coverage(run, check_id, captured, device, device_ranged,
 *                  host_accesses, dropped, ranks_given, ranks_world,
 *                  uaf_unjudged)
 *       what each check could judge (check/coverage.c); made by the first
 *       check that stores one, so a database written before it has none and
 *       its checks read back without coverage. uaf_unjudged came later: a
 *       table made without it gains it (NULL in the rows already there,
 *       read as 0) when a check is next stored, and reads as 0 until then.
 *   finding_sites(run, check_id, finding, side, site)
 *       the call site (site=) of a statement a finding names: side 0 its
 *       first, 1 its second, 2 + K its part K. Beside `findings` rather
 *       than in it, as check_coverage is: made by the first check that has
 *       a site to store, so older databases need no migration; keyed by
 *       the check, so rows that an older syncsim left when it replaced the
 *       findings attach to nothing. Replaced with the findings.
 *
 * Names (queues, buffers, labels, the object) are stored as text, so that a
 * person querying by hand reads them without joins, and a finding survives
 * whatever string ids the run's reader hands out; loading interns them into
 * the reader's trace again. Kinds and roles are the words of traces/trace.h.
 * A run with no `checks` row was never checked; one whose latest row says
 * 0 findings was checked and is clean -- or, with status 'incomplete', has
 * no finding among what was there.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const role_words[] = { "blocked", "cycle", "participant" };
static const char *const race_words[] = { "", "RAW", "WAR", "", "WAW" };

static void bind_text(sqlite3_stmt *q, int col, const char *s)
{
    if (s)
        sqlite3_bind_text(q, col, s, -1, SQLITE_TRANSIENT);
}

static void bind_u64(sqlite3_stmt *q, int col, uint64_t v, bool present)
{
    if (present)
        sqlite3_bind_int64(q, col, (int64_t)v);
}

static const char *queue_name(const trace *t, uint32_t q)
{
    return q < t->n_queues ? trace_str(t, t->queues[q].name) : NULL;
}

static const char *buffer_name(const trace *t, uint32_t b)
{
    return b < t->n_buffers ? trace_str(t, t->buffers[b].name) : NULL;
}

/* Binds a statement reference at columns col..col+3 (seq, queue, label, line). */
static void bind_ref(sqlite3_stmt *q, int col, const trace *t, const trace_stmt_ref *r)
{
    if (r->seq == TRACE_NO_SEQ)
        return;
    sqlite3_bind_int64(q, col, (int64_t)r->seq);
    bind_text(q, col + 1, queue_name(t, r->queue));
    if (r->label != TRACE_NONE)
        bind_text(q, col + 2, trace_str(t, r->label));
    if (r->line)
        sqlite3_bind_int64(q, col + 3, r->line);
}

static int step_once(trace_store *st, sqlite3_stmt *q, const char *table, trace_error *err)
{
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, table, "cannot write", err);
}

#define COVERAGE_SQL                                                                       \
    "CREATE TABLE IF NOT EXISTS check_coverage(run INTEGER, check_id INTEGER,"              \
    " captured INTEGER, device INTEGER, device_ranged INTEGER, host_accesses INTEGER,"      \
    " dropped INTEGER, ranks_given INTEGER, ranks_world INTEGER, uaf_unjudged INTEGER,"     \
    " PRIMARY KEY(run, check_id)) WITHOUT ROWID"

#define SITES_SQL                                                                          \
    "CREATE TABLE IF NOT EXISTS finding_sites(run INTEGER, check_id INTEGER,"              \
    " finding INTEGER, side INTEGER, site TEXT NOT NULL,"                                   \
    " PRIMARY KEY(run, check_id, finding, side)) WITHOUT ROWID"

/* 1 when the database has table `name`, 0 when not, -1 with err. */
static int has_table(trace_store *st, const char *name, trace_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "sqlite_master", NULL, err);
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(st, rc, "sqlite_master", NULL, err);
    return rc == SQLITE_ROW;
}

/* 1 when table `table` has column `column`, 0 when not, -1 with err. */
static int has_column(trace_store *st, const char *table, const char *column, trace_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", -1,
                                &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, table, NULL, err);
    sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, column, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(st, rc, table, NULL, err);
    return rc == SQLITE_ROW;
}

/* The call sites of f[0..n), for the check just inserted (the run's highest
 * check id). The table is made only when there is a site to store. */
static int save_sites(trace_store *st, int64_t run, const trace *t, const trace_finding *f,
                      size_t n, trace_error *err)
{
    bool any = false;
    for (size_t i = 0; i < n && !any; i++) {
        any = f[i].first.site != TRACE_NONE || f[i].second.site != TRACE_NONE;
        for (uint32_t k = 0; k < f[i].n_parts && !any; k++)
            any = f[i].parts[k].site != TRACE_NONE;
    }
    if (!any)
        return 0;
    if (store_exec(st, SITES_SQL, "finding_sites", err) != 0)
        return -1;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "INSERT INTO finding_sites SELECT ?1, max(id), ?2, ?3, ?4"
                                " FROM checks WHERE run = ?1",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "finding_sites", NULL, err);
    for (size_t i = 0; i < n; i++)
        for (uint32_t side = 0; side < 2 + f[i].n_parts; side++) {
            uint32_t site = side == 0   ? f[i].first.site
                            : side == 1 ? f[i].second.site
                                        : f[i].parts[side - 2].site;
            if (site == TRACE_NONE)
                continue;
            sqlite3_bind_int64(q, 1, run);
            sqlite3_bind_int64(q, 2, (int64_t)i);
            sqlite3_bind_int64(q, 3, side);
            bind_text(q, 4, trace_str(t, site));
            if (step_once(st, q, "finding_sites", err) != 0) {
                sqlite3_finalize(q);
                return -1;
            }
        }
    sqlite3_finalize(q);
    return 0;
}

/* The coverage of the check just inserted (the run's highest check id). */
static int save_coverage(trace_store *st, int64_t run, const trace_check_info *info,
                         trace_error *err)
{
    if (store_exec(st, COVERAGE_SQL, "check_coverage", err) != 0)
        return -1;
    int counted = has_column(st, "check_coverage", "uaf_unjudged", err);
    if (counted < 0 ||
        (!counted && store_exec(st, "ALTER TABLE check_coverage ADD COLUMN uaf_unjudged INTEGER",
                                "check_coverage", err) != 0))
        return -1;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "INSERT OR REPLACE INTO check_coverage SELECT ?1, max(id), ?2, ?3,"
                                " ?4, ?5, ?6, ?7, ?8, ?9 FROM checks WHERE run = ?1",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "check_coverage", NULL, err);
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int(q, 2, info->captured);
    sqlite3_bind_int64(q, 3, (int64_t)info->device);
    sqlite3_bind_int64(q, 4, (int64_t)info->device_ranged);
    sqlite3_bind_int64(q, 5, (int64_t)info->host_accesses);
    sqlite3_bind_int64(q, 6, (int64_t)info->dropped);
    sqlite3_bind_int64(q, 7, info->ranks_given);
    sqlite3_bind_int64(q, 8, info->ranks_world);
    sqlite3_bind_int64(q, 9, (int64_t)info->uaf_unjudged);
    rc = step_once(st, q, "check_coverage", err);
    sqlite3_finalize(q);
    return rc;
}

/* Fills info's coverage from the check it describes, where one was stored. */
static int load_coverage(trace_store *st, int64_t run, trace_check_info *info, trace_error *err)
{
    int has = has_table(st, "check_coverage", err);
    if (has <= 0)
        return has;             /* 0: stored before coverage was */
    int counted = has_column(st, "check_coverage", "uaf_unjudged", err);
    if (counted < 0)
        return -1;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                counted ? "SELECT captured, device, device_ranged, host_accesses,"
                                          " dropped, ranks_given, ranks_world, uaf_unjudged"
                                          " FROM check_coverage WHERE run = ?1 AND check_id = ?2"
                                        : "SELECT captured, device, device_ranged, host_accesses,"
                                          " dropped, ranks_given, ranks_world, 0"
                                          " FROM check_coverage WHERE run = ?1 AND check_id = ?2",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "check_coverage", NULL, err);
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, info->id);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        info->has_coverage = true;
        info->captured = sqlite3_column_int(q, 0) != 0;
        info->device = (uint64_t)sqlite3_column_int64(q, 1);
        info->device_ranged = (uint64_t)sqlite3_column_int64(q, 2);
        info->host_accesses = (uint64_t)sqlite3_column_int64(q, 3);
        info->dropped = (uint64_t)sqlite3_column_int64(q, 4);
        info->ranks_given = (uint32_t)sqlite3_column_int64(q, 5);
        info->ranks_world = (uint32_t)sqlite3_column_int64(q, 6);
        info->uaf_unjudged = (uint64_t)sqlite3_column_int64(q, 7);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store_fail(st, rc, "check_coverage", NULL, err);
}

int trace_store_save_check(trace_store *st, int64_t run, const trace *t,
                           const trace_check_info *info, const trace_finding *f, size_t n,
                           trace_error *err)
{
    if (!st->can_write)
        return trace_error_set(err, TRACE_EIO, "%s: opened read-only: findings not stored",
                               st->path),
               -1;
    sqlite3_stmt *qc = NULL, *qf = NULL, *qp = NULL;
    /* the run is looked up inside the transaction: a run deleted meanwhile
     * gets no findings that would outlive it */
    if (store_exec(st, "BEGIN IMMEDIATE", "checks", err) != 0)
        return -1;
    if ((run = store_resolve_run(st, run, err)) < 0) {
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    int rc;
    char sql[160];
    snprintf(sql, sizeof sql,
             "DELETE FROM findings WHERE run = %lld; DELETE FROM finding_parts WHERE run = %lld",
             (long long)run, (long long)run);
    if (store_exec(st, sql, "findings", err) != 0)
        goto fail;
    int sites = has_table(st, "finding_sites", err);
    if (sites < 0)
        goto fail;
    snprintf(sql, sizeof sql, "DELETE FROM finding_sites WHERE run = %lld", (long long)run);
    if (sites && store_exec(st, sql, "finding_sites", err) != 0)
        goto fail;
    if ((rc = sqlite3_prepare_v2(st->db,
                                 "INSERT INTO checks SELECT ?1, coalesce(max(id), 0) + 1, ?2, ?3,"
                                 " ?4, ?5, ?6, ?7 FROM checks WHERE run = ?1",
                                 -1, &qc, NULL)) != SQLITE_OK ||
        (rc = sqlite3_prepare_v2(st->db,
                                 "INSERT INTO findings VALUES(?1, ?2, (SELECT max(id) FROM checks"
                                 " WHERE run = ?1), ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
                                 " ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
                                 -1, &qf, NULL)) != SQLITE_OK ||
        (rc = sqlite3_prepare_v2(st->db,
                                 "INSERT INTO finding_parts VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7,"
                                 " ?8, ?9, ?10, ?11)",
                                 -1, &qp, NULL)) != SQLITE_OK) {
        store_fail(st, rc, "findings", NULL, err);
        goto fail;
    }
    sqlite3_bind_int64(qc, 1, run);
    sqlite3_bind_text(qc, 2, SYNCSIM_VERSION, -1, SQLITE_STATIC);
    sqlite3_bind_int64(qc, 3, (int64_t)time(NULL));
    sqlite3_bind_text(qc, 4, info->incomplete ? "incomplete" : "complete", -1, SQLITE_STATIC);
    sqlite3_bind_int64(qc, 5, (int64_t)info->statements);
    sqlite3_bind_int64(qc, 6, (int64_t)info->findings);
    sqlite3_bind_int64(qc, 7, (int64_t)n);
    if (step_once(st, qc, "checks", err) != 0)
        goto fail;
    if (info->has_coverage && save_coverage(st, run, info, err) != 0)
        goto fail;
    if (save_sites(st, run, t, f, n, err) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const trace_finding *x = &f[i];
        sqlite3_bind_int64(qf, 1, run);
        sqlite3_bind_int64(qf, 2, (int64_t)i);
        bind_text(qf, 3, trace_finding_str(x->kind));
        if (x->kind == TRACE_FINDING_RACE && x->race_type <= TRACE_RACE_WAW)
            bind_text(qf, 4, race_words[x->race_type]);
        bind_ref(qf, 5, t, &x->first);
        bind_ref(qf, 9, t, &x->second);
        bind_text(qf, 13, buffer_name(t, x->buffer));
        bind_text(qf, 14, buffer_name(t, x->root));
        bool ranged = x->root != TRACE_NONE;
        bind_u64(qf, 15, x->lo, ranged);
        bind_u64(qf, 16, x->hi, ranged);
        if (x->object != TRACE_NONE)
            bind_text(qf, 17, trace_str(t, x->object));
        bind_u64(qf, 18, x->generation, x->generation != 0);
        bind_text(qf, 19, x->text);
        bind_text(qf, 20, x->fix);
        if (step_once(st, qf, "findings", err) != 0)
            goto fail;
        for (uint32_t k = 0; k < x->n_parts; k++) {
            const trace_finding_part *p = &x->parts[k];
            sqlite3_bind_int64(qp, 1, run);
            sqlite3_bind_int64(qp, 2, (int64_t)i);
            sqlite3_bind_int64(qp, 3, k);
            bind_text(qp, 4, p->role < 3 ? role_words[p->role] : "?");
            bind_text(qp, 5, queue_name(t, p->queue));
            bind_u64(qp, 6, p->seq, p->seq != TRACE_NO_SEQ);
            bind_u64(qp, 7, p->line, p->line != 0);
            bind_text(qp, 8, p->text);
            if (p->kind != TRACE_NONE)
                bind_text(qp, 9, trace_str(t, p->kind));
            bind_u64(qp, 10, p->count, p->count != 0);
            if (p->extra)
                sqlite3_bind_int(qp, 11, 1);
            if (step_once(st, qp, "finding_parts", err) != 0)
                goto fail;
        }
    }
    sqlite3_finalize(qc);
    sqlite3_finalize(qf);
    sqlite3_finalize(qp);
    qc = qf = qp = NULL;
    if (store_exec(st, "COMMIT", "checks", err) != 0)
        goto fail;
    return 0;
fail:
    sqlite3_finalize(qc);
    sqlite3_finalize(qf);
    sqlite3_finalize(qp);
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Loading.                                                            */

/* Interns column col's text into t (TRACE_NONE for NULL). */
static uint32_t intern_col(trace *t, sqlite3_stmt *q, int col, bool *oom)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    if (!s)
        return TRACE_NONE;
    uint32_t id = trace_intern(t, (const char *)s, (size_t)sqlite3_column_bytes(q, col));
    if (id == TRACE_NONE)
        *oom = true;
    return id;
}

static char *dup_col_text(sqlite3_stmt *q, int col, bool *oom)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    if (!s)
        return NULL;
    char *d = strdup((const char *)s);
    if (!d)
        *oom = true;
    return d;
}

static uint32_t queue_col(const trace *t, sqlite3_stmt *q, int col)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    return s ? trace_find_queue(t, (const char *)s, (size_t)sqlite3_column_bytes(q, col))
             : TRACE_NONE;
}

static uint32_t buffer_col(const trace *t, sqlite3_stmt *q, int col)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    return s ? trace_find_buffer(t, (const char *)s, (size_t)sqlite3_column_bytes(q, col))
             : TRACE_NONE;
}

static trace_stmt_ref ref_col(trace *t, sqlite3_stmt *q, int col, bool *oom)
{
    trace_stmt_ref r = { TRACE_NO_SEQ, TRACE_NONE, TRACE_NONE, 0, TRACE_OP, TRACE_NONE,
                         TRACE_NONE };
    if (sqlite3_column_type(q, col) == SQLITE_NULL)
        return r;
    r.seq = (uint64_t)sqlite3_column_int64(q, col);
    r.queue = queue_col(t, q, col + 1);
    r.label = intern_col(t, q, col + 2, oom);
    r.line = (uint32_t)sqlite3_column_int64(q, col + 3);
    return r;
}

static int find_word(const char *const *words, int n, const unsigned char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(words[i], (const char *)s) == 0)
            return i;
    return -1;
}

/* Gives f[0..n), check `check_id` of run `run`, their stored call sites,
 * interned into t. */
static int load_sites(trace_store *st, int64_t run, int64_t check_id, trace *t, trace_finding *f,
                      size_t n, trace_error *err)
{
    int has = has_table(st, "finding_sites", err);
    if (has <= 0)
        return has;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT finding, side, site FROM finding_sites"
                                " WHERE run = ?1 AND check_id = ?2",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "finding_sites", NULL, err);
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, check_id);
    bool oom = false;
    while (!oom && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t i = sqlite3_column_int64(q, 0), side = sqlite3_column_int64(q, 1);
        if (i < 0 || (uint64_t)i >= n || side < 0 || side >= 2 + (int64_t)f[i].n_parts)
            continue;           /* a site of nothing: ignore it */
        uint32_t *site = side == 0   ? &f[i].first.site
                         : side == 1 ? &f[i].second.site
                                     : &f[i].parts[side - 2].site;
        *site = intern_col(t, q, 2, &oom);
    }
    sqlite3_finalize(q);
    if (oom)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory reading findings", st->path),
               -1;
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, "finding_sites", NULL, err);
}

int trace_store_load_check(trace_store *st, int64_t run, trace *t, trace_check_info *info,
                           trace_finding **out, size_t *n, trace_error *err)
{
    memset(info, 0, sizeof *info);
    *out = NULL;
    *n = 0;
    run = store_resolve_run(st, run, err);
    if (run < 0)
        return -1;
    if (st->schema == 1)
        return 0;               /* its JSON findings are not read: never checked */
    sqlite3_stmt *q = NULL;
    trace_finding *f = NULL;
    size_t count = 0, cap = 0;
    bool oom = false;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT id, version, created, status, statements, findings, stored"
                                " FROM checks WHERE run = ?1 ORDER BY id DESC LIMIT 1",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "checks", NULL, err);
    sqlite3_bind_int64(q, 1, run);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        info->id = sqlite3_column_int64(q, 0);
        snprintf(info->version, sizeof info->version, "%s",
                 sqlite3_column_text(q, 1) ? (const char *)sqlite3_column_text(q, 1) : "?");
        info->created = sqlite3_column_int64(q, 2);
        const unsigned char *status = sqlite3_column_text(q, 3);
        info->incomplete = status && strcmp((const char *)status, "complete") != 0;
        info->statements = (uint64_t)sqlite3_column_int64(q, 4);
        info->findings = (uint64_t)sqlite3_column_int64(q, 5);
    }
    sqlite3_finalize(q);
    q = NULL;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(st, rc, "checks", NULL, err);
    if (rc == SQLITE_DONE)
        return 0;
    if (load_coverage(st, run, info, err) != 0)
        return -1;
    rc = sqlite3_prepare_v2(st->db,
                            "SELECT kind, type, first_seq, first_queue, first_label, first_line,"
                            " second_seq, second_queue, second_label, second_line, buffer, root,"
                            " lo, hi, object, generation, text, fix FROM findings WHERE run = ?1"
                            " ORDER BY idx",
                            -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "findings", NULL, err);
    sqlite3_bind_int64(q, 1, run);
    while (!oom && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            trace_finding *nf = realloc(f, cap * sizeof *nf);
            if (!nf) {
                oom = true;
                break;
            }
            f = nf;
        }
        trace_finding *x = &f[count++];
        memset(x, 0, sizeof *x);
        const unsigned char *kind = sqlite3_column_text(q, 0);
        int k = kind ? trace_finding_parse((const char *)kind, strlen((const char *)kind)) : -1;
        if (k < 0) {
            count--;
            sqlite3_finalize(q);
            trace_findings_free(f, count);
            return trace_error_set(err, TRACE_ECORRUPT,
                                   "%s: table findings: run %lld: unknown kind '%s'", st->path,
                                   (long long)run, kind ? (const char *)kind : ""),
                   -1;
        }
        x->kind = (trace_finding_kind)k;
        int type = find_word(race_words, 5, sqlite3_column_text(q, 1));
        x->race_type = x->race_types = type > 0 ? (uint8_t)type : 0;
        x->first = ref_col(t, q, 2, &oom);
        x->second = ref_col(t, q, 6, &oom);
        x->buffer = buffer_col(t, q, 10);
        x->root = buffer_col(t, q, 11);
        x->lo = (uint64_t)sqlite3_column_int64(q, 12);
        x->hi = (uint64_t)sqlite3_column_int64(q, 13);
        x->object = intern_col(t, q, 14, &oom);
        x->generation = (uint64_t)sqlite3_column_int64(q, 15);
        x->text = dup_col_text(q, 16, &oom);
        x->fix = dup_col_text(q, 17, &oom);
    }
    sqlite3_finalize(q);
    q = NULL;
    if (!oom && rc != SQLITE_DONE) {
        trace_findings_free(f, count);
        return store_fail(st, rc, "findings", NULL, err);
    }
    /* the parts, in finding and position order */
    if (!oom && count) {
        rc = sqlite3_prepare_v2(st->db,
                                "SELECT finding, role, queue, seq, line, text, kind, count, extra"
                                " FROM finding_parts WHERE run = ?1 ORDER BY finding, pos",
                                -1, &q, NULL);
        if (rc != SQLITE_OK) {
            trace_findings_free(f, count);
            return store_fail(st, rc, "finding_parts", NULL, err);
        }
        sqlite3_bind_int64(q, 1, run);
        while (!oom && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            int64_t i = sqlite3_column_int64(q, 0);
            int role = find_word(role_words, 3, sqlite3_column_text(q, 1));
            if (i < 0 || (uint64_t)i >= count || role < 0)
                continue;       /* a part of nothing: ignore it */
            trace_finding *x = &f[i];
            trace_finding_part *np = realloc(x->parts, (x->n_parts + 1) * sizeof *np);
            if (!np) {
                oom = true;
                break;
            }
            x->parts = np;
            trace_finding_part *p = &np[x->n_parts++];
            memset(p, 0, sizeof *p);
            p->role = (uint8_t)role;
            p->site = TRACE_NONE;
            p->queue = queue_col(t, q, 2);
            p->seq = sqlite3_column_type(q, 3) == SQLITE_NULL ? TRACE_NO_SEQ
                                                               : (uint64_t)sqlite3_column_int64(q, 3);
            p->line = (uint32_t)sqlite3_column_int64(q, 4);
            p->text = dup_col_text(q, 5, &oom);
            p->kind = intern_col(t, q, 6, &oom);
            p->count = (uint64_t)sqlite3_column_int64(q, 7);
            p->extra = sqlite3_column_int(q, 8) != 0;
        }
        sqlite3_finalize(q);
        if (!oom && rc != SQLITE_DONE) {
            trace_findings_free(f, count);
            return store_fail(st, rc, "finding_parts", NULL, err);
        }
    }
    if (oom) {
        trace_findings_free(f, count);
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory reading findings", st->path),
               -1;
    }
    if (count && load_sites(st, run, info->id, t, f, count, err) != 0) {
        trace_findings_free(f, count);
        return -1;
    }
    info->stored = count;
    *out = f;
    *n = count;
    return 0;
}
