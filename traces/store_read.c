/*
 * store_read.c -- the streaming reader over one run of a trace database.
 *
 * Opening a reader loads the run's declarations (strings, queues, buffers,
 * expectations, metadata) into a fresh trace that the reader owns, then
 * steps one prepared statement over the run's rowid range
 * [run << 40, (run + 1) << 40): statements come in seq order and only the
 * current one is in memory. Every value read is checked against the
 * declarations (the invariants at the top of store.c), so a damaged file
 * gives ECORRUPT naming the database, table and row, never a crash.
 */
#include "pipe.h"
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

trace_store *store_open_readonly(const char *path, trace_error *err);

/* Where a reader is in a block of statements. */
typedef struct blk_cur {
    const uint8_t *p, *end;
    uint64_t seq;           /* the next statement's */
    uint64_t left;          /* statements not read yet */
    uint64_t times;         /* STORE_TIMES_* */
    int64_t prev_t;
} blk_cur;

typedef struct store_reader {
    trace_store *st;
    bool owns_store;
    trace *t;
    int64_t run;
    sqlite3_stmt *q;
    uint64_t next_min;      /* the next seq must be at least this */
    int body_shift;         /* header >> body_shift = n_access (body_version) */
    uint64_t body_flags;    /* the optional fields its layout knows */
    uint32_t n_db_strs;     /* the run's strings (the trace's first ids) */
    uint64_t largs[STORE_MAX_LARGS];  /* the current statement's label numbers */
    uint32_t n_largs;
    char *label_buf;        /* a label joined from its template */
    size_t cap_label;
    bool lazy;              /* labels with numbers come as TRACE_LABEL_LAZY */
    sqlite3_stmt *q_label;  /* one statement's label and body, for a lazy label */
    stmt_pipe *pipe;        /* lazy readers: rows decoded on a second thread */
    bool pipe_finished;     /* the pipeline read to the end */
    uint64_t handed;        /* seq after the last statement next() handed out */
    bool began;             /* we opened the read transaction: end it */
    trace_access *acc;
    uint32_t cap_acc;
    trace_attr *attr;
    uint32_t cap_attr;
    /* A run of blocks (body_version 3): the current block, read through,
     * and the late times of stmt_times merged in seq order. */
    bool blocks;
    blk_cur cur;
    uint64_t limit;         /* seqs below it only (a rewind's), else UINT64_MAX */
    sqlite3_stmt *q_times;  /* NULL: none to merge (a lazy reader ignores times) */
    uint64_t time_seq;      /* the next late time's seq, UINT64_MAX: none */
    int64_t time_t, time_dur;
} store_reader;

static int corrupt(const store_reader *sr, const char *table, const char *fmt, uint64_t a,
                   trace_error *err)
{
    char what[160];
    snprintf(what, sizeof what, fmt, (unsigned long long)a);
    trace_error_set(err, TRACE_ECORRUPT, "%s: table %s: run %lld: %s", sr->st->path, table,
                    (long long)sr->run, what);
    return -1;
}

/* Column col as an id below limit, or TRACE_NONE for NULL. Returns 0, -1
 * when out of range. */
static int col_id(sqlite3_stmt *q, int col, uint32_t limit, uint32_t *out)
{
    if (sqlite3_column_type(q, col) == SQLITE_NULL) {
        *out = TRACE_NONE;
        return 0;
    }
    sqlite3_int64 v = sqlite3_column_int64(q, col);
    if (v < 0 || v >= limit)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Declarations.                                                       */

static int prepare_run(store_reader *sr, const char *sql, const char *table, sqlite3_stmt **q,
                       trace_error *err)
{
    int rc = sqlite3_prepare_v2(sr->st->db, sql, -1, q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(sr->st, rc, table, NULL, err);
    sqlite3_bind_int64(*q, 1, sr->run);
    return 0;
}

/* Finishes a declaration query: rc is the last step's result. */
static int finish(store_reader *sr, sqlite3_stmt *q, int rc, const char *table, trace_error *err)
{
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE)
        return store_fail(sr->st, rc, table, NULL, err);
    return 0;
}

static int load_strings(store_reader *sr, trace_error *err)
{
    sqlite3_stmt *q;
    int rc;
    if (prepare_run(sr, "SELECT id, text FROM strings WHERE run = ?1 ORDER BY id", "strings", &q,
                    err))
        return -1;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *s = (const char *)sqlite3_column_text(q, 1);
        int len = sqlite3_column_bytes(q, 1);
        uint32_t want = sr->t->n_strs;
        if (sqlite3_column_int64(q, 0) != want || !s ||
            trace_intern(sr->t, s, (size_t)len) != want) {
            sqlite3_finalize(q);
            return corrupt(sr, "strings", "string %llu is missing, duplicate or unreadable", want,
                           err);
        }
    }
    sr->n_db_strs = sr->t->n_strs;
    return finish(sr, q, rc, "strings", err);
}

static int load_queues(store_reader *sr, trace_error *err)
{
    sqlite3_stmt *q;
    int rc;
    trace *t = sr->t;
    if (prepare_run(sr, "SELECT idx, name, kind, device FROM queues WHERE run = ?1 ORDER BY idx",
                    "queues", &q, err))
        return -1;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        uint32_t name, device, want = t->n_queues;
        const char *kind = (const char *)sqlite3_column_text(q, 2);
        bool host = kind && strcmp(kind, "host") == 0;
        if (sqlite3_column_int64(q, 0) != want || col_id(q, 1, t->n_strs, &name) ||
            name == TRACE_NONE || col_id(q, 3, t->n_strs, &device) ||
            (!host && (!kind || strcmp(kind, "stream") != 0)) ||
            trace_add_queue(t, name, host ? TRACE_QUEUE_HOST : TRACE_QUEUE_STREAM, device) !=
                want) {
            sqlite3_finalize(q);
            return corrupt(sr, "queues", "queue %llu is missing or invalid", want, err);
        }
    }
    return finish(sr, q, rc, "queues", err);
}

static int load_buffers(store_reader *sr, trace_error *err)
{
    sqlite3_stmt *q;
    int rc;
    trace *t = sr->t;
    if (prepare_run(sr,
                    "SELECT idx, name, size, parent, offset, loc, device, pinned FROM buffers"
                    " WHERE run = ?1 ORDER BY idx",
                    "buffers", &q, err))
        return -1;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        uint32_t name, parent, device, want = t->n_buffers, got = TRACE_NONE;
        sqlite3_int64 size = sqlite3_column_int64(q, 2);
        if (sqlite3_column_int64(q, 0) == want && !col_id(q, 1, t->n_strs, &name) &&
            name != TRACE_NONE && size >= 1 && !col_id(q, 3, want, &parent)) {
            if (parent != TRACE_NONE) {
                sqlite3_int64 off = sqlite3_column_int64(q, 4);
                uint64_t psize = t->buffers[parent].size;
                if (off >= 0 && (uint64_t)off <= psize && (uint64_t)size <= psize - (uint64_t)off)
                    got = trace_add_view(t, name, parent, (uint64_t)off, (uint64_t)size);
            } else {
                const char *loc = (const char *)sqlite3_column_text(q, 5);
                trace_loc l = !loc                        ? TRACE_LOC_UNSPECIFIED
                              : strcmp(loc, "host") == 0   ? TRACE_LOC_HOST
                              : strcmp(loc, "device") == 0 ? TRACE_LOC_DEVICE
                                                           : (trace_loc)-1;
                if (l != (trace_loc)-1 && !col_id(q, 6, t->n_strs, &device))
                    got = trace_add_root_buffer(t, name, (uint64_t)size, l, device,
                                                sqlite3_column_int(q, 7) != 0);
            }
        }
        if (got != want) {
            sqlite3_finalize(q);
            return corrupt(sr, "buffers", "buffer %llu is missing or invalid", want, err);
        }
    }
    return finish(sr, q, rc, "buffers", err);
}

static int load_expectations(store_reader *sr, trace_error *err)
{
    sqlite3_stmt *q, *kv;
    int rc;
    trace *t = sr->t;
    trace_attr *pairs = NULL;
    uint32_t n_pairs = 0, cap_pairs = 0;
    if (prepare_run(sr, "SELECT idx, kind, line FROM expectations WHERE run = ?1 ORDER BY idx",
                    "expectations", &q, err))
        return -1;
    if (prepare_run(sr,
                    "SELECT key, value FROM expectation_kv WHERE run = ?1 AND expect = ?2"
                    " ORDER BY pos",
                    "expectation_kv", &kv, err)) {
        sqlite3_finalize(q);
        return -1;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        uint32_t want = t->n_expects;
        const char *kind = (const char *)sqlite3_column_text(q, 1);
        int k = kind ? trace_finding_parse(kind, strlen(kind)) : -1;
        sqlite3_int64 line = sqlite3_column_int64(q, 2);
        bool ok = sqlite3_column_int64(q, 0) == want && k >= 0 && line >= 0 && line <= UINT32_MAX;
        n_pairs = 0;
        sqlite3_bind_int64(kv, 2, want);
        while (ok && (rc = sqlite3_step(kv)) == SQLITE_ROW) {
            trace_attr a;
            if (n_pairs == cap_pairs) {
                cap_pairs = cap_pairs ? cap_pairs * 2 : 8;
                trace_attr *np = realloc(pairs, cap_pairs * sizeof *np);
                if (!np) {
                    ok = false;
                    break;
                }
                pairs = np;
            }
            if (col_id(kv, 0, t->n_strs, &a.key) || col_id(kv, 1, t->n_strs, &a.value) ||
                a.key == TRACE_NONE || a.value == TRACE_NONE)
                ok = false;
            pairs[n_pairs++] = a;
        }
        sqlite3_reset(kv);
        if (!ok || trace_add_expect(t, (trace_finding_kind)k, (uint32_t)line, pairs, n_pairs)) {
            free(pairs);
            sqlite3_finalize(q);
            sqlite3_finalize(kv);
            return corrupt(sr, "expectations", "expectation %llu is invalid", want, err);
        }
    }
    free(pairs);
    sqlite3_finalize(kv);
    return finish(sr, q, rc, "expectations", err);
}

static int load_meta(store_reader *sr, trace_error *err)
{
    sqlite3_stmt *q;
    int rc;
    if (prepare_run(sr, "SELECT key, value FROM run_meta WHERE run = ?1 ORDER BY pos", "run_meta",
                    &q, err))
        return -1;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(q, 0);
        const char *v = (const char *)sqlite3_column_text(q, 1);
        if (!k || !v || trace_set_meta(sr->t, k, v) != 0) {
            sqlite3_finalize(q);
            return corrupt(sr, "run_meta", "entry %llu is invalid", 0, err);
        }
    }
    return finish(sr, q, rc, "run_meta", err);
}

/* ------------------------------------------------------------------ */
/* Statements.                                                         */

static int grow_pools(store_reader *sr, uint64_t n_acc, uint64_t n_attr)
{
    if (n_acc > sr->cap_acc) {
        uint32_t cap = sr->cap_acc ? sr->cap_acc : 16;
        while (cap < n_acc)
            cap *= 2;
        trace_access *na = realloc(sr->acc, cap * sizeof *na);
        if (!na)
            return -1;
        sr->acc = na;
        sr->cap_acc = cap;
    }
    if (n_attr > sr->cap_attr) {
        uint32_t cap = sr->cap_attr ? sr->cap_attr : 16;
        while (cap < n_attr)
            cap *= 2;
        trace_attr *na = realloc(sr->attr, cap * sizeof *na);
        if (!na)
            return -1;
        sr->attr = na;
        sr->cap_attr = cap;
    }
    return 0;
}


/* store_varint_get with its common cases inline: most numbers of a body
 * (its header, buffer ids, line numbers) take one or two bytes. */
static inline int varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *q = *p;
    if (end - q >= 2) {
        if (q[0] < 0x80) {
            *v = q[0];
            *p = q + 1;
            return 0;
        }
        if (q[1] < 0x80) {
            *v = (uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7;
            *p = q + 2;
            return 0;
        }
    }
    return store_varint_get(p, end, v);
}
/* Decodes the body blob into s's optional fields, accesses and attributes.
 * Returns NULL or what is wrong. */
static const char *decode_body(store_reader *sr, const uint8_t *p, const uint8_t *end,
                               trace_stmt *s, int *oom)
{
    const trace *t = sr->t;
    uint64_t h, n_acc, v;
    if (varint_get(&p, end, &h) || (h >> sr->body_shift) > (uint64_t)(end - p) / 2 ||
        (h & ((1u << sr->body_shift) - 1) & ~sr->body_flags))
        return "bad body header";
    n_acc = h >> sr->body_shift;
    if (h & STORE_BODY_BY) {
        if (varint_get(&p, end, &v) || v >= t->n_queues)
            return "bad by";
        s->by = (uint32_t)v;
    }
    if ((h & STORE_BODY_COUNT) && varint_get(&p, end, &s->count))
        return "bad count";
    if (h & STORE_BODY_ARG) {
        if (varint_get(&p, end, &v))
            return "bad arg";
        if (s->kind == TRACE_SYNC && v >= 1 && v <= TRACE_SYNC_ALL)
            s->sync_scope = (trace_sync_scope)v;
        else if (s->kind == TRACE_COLLECTIVE && v >= 1 && v <= sr->n_db_strs)
            s->coll_kind = (uint32_t)(v - 1);
        else if ((s->kind == TRACE_SIGNAL || s->kind == TRACE_AWAIT) && v == STORE_ARG_SEM)
            s->sem = true;
        else if ((s->kind == TRACE_SEND || s->kind == TRACE_RECV) && v >= 1 &&
                 ((v - 1) >> 32) < TRACE_NONE - 1 && ((v - 1) & UINT32_MAX) < TRACE_NONE - 1) {
            s->rank = (uint32_t)((v - 1) >> 32);
            s->peer = (uint32_t)((v - 1) & UINT32_MAX);
        } else
            return "bad arg";
    }
    if (h & STORE_BODY_LINE) {
        if (varint_get(&p, end, &v) || v > UINT32_MAX)
            return "bad line";
        s->line = (uint32_t)v;
    }
    sr->n_largs = 0;
    if (h & STORE_BODY_LARGS) {
        if (varint_get(&p, end, &v) || v == 0 || v > STORE_MAX_LARGS)
            return "bad label numbers";
        sr->n_largs = (uint32_t)v;
        for (uint32_t i = 0; i < sr->n_largs; i++)
            if (varint_get(&p, end, &sr->largs[i]))
                return "bad label numbers";
    }
    /* Every attribute takes at least two bytes. */
    if (grow_pools(sr, n_acc, (uint64_t)(end - p) / 2)) {
        *oom = 1;
        return "out of memory";
    }
    for (uint64_t i = 0; i < n_acc; i++) {
        trace_access *a = &sr->acc[i];
        if (varint_get(&p, end, &v) || v >= t->n_buffers || p >= end)
            return "bad access buffer";
        a->buffer = (uint32_t)v;
        uint8_t flags = *p++;
        a->mode = flags & STORE_ACC_MODE;
        a->form = (flags & STORE_ACC_FORM) >> STORE_ACC_FORM_SHIFT;
        if (a->mode == 0 || a->form > TRACE_REF_FROM || (flags & ~0x3fu))
            return "bad access flags";
        uint64_t size = t->buffers[a->buffer].size;
        a->lo = 0;
        if ((flags & STORE_ACC_LO) && varint_get(&p, end, &a->lo))
            return "bad access range";
        if (flags & STORE_ACC_LEN) {
            if (varint_get(&p, end, &v) || v > UINT64_MAX - a->lo)
                return "bad access range";
            a->hi = a->lo + v;
        } else {
            a->hi = size;
        }
        if (a->lo > a->hi || a->hi > size)
            return "access outside its buffer";
    }
    uint32_t n_attr = 0;
    while (p < end) {
        uint64_t k;
        if (varint_get(&p, end, &k) || varint_get(&p, end, &v) || k >= sr->n_db_strs ||
            v >= t->n_strs)
            return "bad attribute";
        sr->attr[n_attr++] = (trace_attr){ (uint32_t)k, (uint32_t)v };
    }
    s->n_access = (uint32_t)n_acc;
    s->access = n_acc ? sr->acc : NULL;
    s->n_attr = n_attr;
    s->attr = n_attr ? sr->attr : NULL;
    return NULL;
}

/* Ends the read transaction open_reader began, if it did. */
static void end_snapshot(store_reader *sr)
{
    if (!sr->began)
        return;
    sqlite3_reset(sr->q);
    sqlite3_reset(sr->q_times);
    sqlite3_exec(sr->st->db, "COMMIT", NULL, NULL, NULL);
    sr->began = false;
}

/* Column col of the current row as an id below limit, TRACE_NONE for NULL;
 * false when out of range. Goes through sqlite3_column_value: one API call
 * per column. */
static bool value_id(sqlite3_stmt *q, int col, uint32_t limit, uint32_t *out)
{
    sqlite3_value *v = sqlite3_column_value(q, col);
    if (sqlite3_value_type(v) == SQLITE_NULL) {
        *out = TRACE_NONE;
        return true;
    }
    sqlite3_int64 x = sqlite3_value_int64(v);
    *out = (uint32_t)x;
    return x >= 0 && x < limit;
}

static int64_t value_time(sqlite3_stmt *q, int col)
{
    sqlite3_value *v = sqlite3_column_value(q, col);
    return sqlite3_value_type(v) == SQLITE_NULL ? TRACE_TIME_NONE : sqlite3_value_int64(v);
}

static int bad_row(const store_reader *sr, const trace_stmt *s, const char *bad, trace_error *err)
{
    trace_error_set(err, TRACE_ECORRUPT, "%s: table statements: run %lld seq %llu: %s",
                    sr->st->path, (long long)sr->run, (unsigned long long)s->seq, bad);
    return -1;
}

static int block_fetch(store_reader *sr, trace_stmt *s, const uint8_t **body, int *len,
                       trace_error *err);

/* The next row's columns into s, and its body (*body NULL when it has
 * none; valid until the next step). The connection's thread only: the
 * caller's, or the pipeline's producer. Returns 1, 0 at the end, -1. */
static int row_fetch(store_reader *sr, trace_stmt *s, const uint8_t **body, int *len,
                     trace_error *err)
{
    if (sr->blocks)
        return block_fetch(sr, s, body, len, err);
    sqlite3_stmt *q = sr->q;
    const trace *t = sr->t;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) {
        end_snapshot(sr);
        return 0;
    }
    if (rc != SQLITE_ROW)
        return store_fail(sr->st, rc, "statements", NULL, err);
    uint64_t id = (uint64_t)sqlite3_column_int64(q, 0);
    uint32_t kind;
    trace_stmt_init(s);
    s->seq = id & STORE_SEQ_MASK;
    if ((int64_t)(id >> STORE_SEQ_BITS) != sr->run || s->seq < sr->next_min)
        return bad_row(sr, s, "seq out of order", err);
    sr->next_min = s->seq + 1;
    if (!value_id(q, 1, t->n_queues, &s->queue) || s->queue == TRACE_NONE)
        return bad_row(sr, s, "bad queue", err);
    if (!value_id(q, 2, TRACE_KIND_COUNT, &kind) || kind == TRACE_NONE)
        return bad_row(sr, s, "bad kind", err);
    s->kind = (trace_kind)kind;
    if (!value_id(q, 3, sr->n_db_strs, &s->label))
        return bad_row(sr, s, "bad label", err);
    /* its limit depends on the kind and a sync's scope (from the body):
     * row_finish checks it */
    if (!value_id(q, 4, UINT32_MAX, &s->object))
        return bad_row(sr, s, "bad object", err);
    int col_body = 5;           /* a lazy reader's query has no times */
    if (!sr->lazy) {
        s->t = value_time(q, 5);
        s->dur = value_time(q, 6);
        col_body = 7;
    }
    *body = NULL;
    *len = 0;
    sqlite3_value *v = sqlite3_column_value(q, col_body);
    if (sqlite3_value_type(v) != SQLITE_NULL) {
        *body = sqlite3_value_blob(v);
        *len = sqlite3_value_bytes(v);
        if (!*body && *len)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", sr->st->path), -1;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Blocks (body_version 3).                                            */

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Starts reading a block of n statements from seq first. NULL or what is
 * wrong. */
static const char *blk_open(blk_cur *c, const uint8_t *data, int len, uint64_t first, int64_t n)
{
    c->p = data;
    c->end = data + len;
    c->seq = first;
    c->prev_t = 0;
    if (n <= 0 || !data || varint_get(&c->p, c->end, &c->times) || c->times > STORE_TIMES_EACH)
        return "bad block header";
    c->left = (uint64_t)n;
    return NULL;
}

/* The block's next statement: its columns into s (label: the run's string
 * id, object unchecked: row_finish checks it), its body in *body, *len
 * (NULL, 0: none). NULL or what is wrong. */
static const char *blk_next(blk_cur *c, const store_reader *sr, trace_stmt *s,
                            const uint8_t **body, int *len)
{
    uint64_t head, v;
    trace_stmt_init(s);
    s->seq = c->seq++;
    c->left--;
    if (varint_get(&c->p, c->end, &head) || (head & STORE_STMT_KIND) >= TRACE_KIND_COUNT ||
        head >= 2 * STORE_STMT_DUR)
        return "bad statement head";
    s->kind = (trace_kind)(head & STORE_STMT_KIND);
    if (varint_get(&c->p, c->end, &v) || v >= sr->t->n_queues)
        return "bad queue";
    s->queue = (uint32_t)v;
    if (head & STORE_STMT_LABEL) {
        if (varint_get(&c->p, c->end, &v) || v >= sr->n_db_strs)
            return "bad label";
        s->label = (uint32_t)v;
    }
    if (head & STORE_STMT_OBJECT) {
        if (varint_get(&c->p, c->end, &v) || v >= UINT32_MAX)
            return "bad object";
        s->object = (uint32_t)v;
    }
    bool has_t = c->times == STORE_TIMES_ALL || (head & STORE_STMT_T);
    bool has_d = c->times == STORE_TIMES_ALL || (head & STORE_STMT_DUR);
    if (has_t) {
        if (varint_get(&c->p, c->end, &v))
            return "bad time";
        c->prev_t = (int64_t)((uint64_t)c->prev_t + (uint64_t)unzigzag(v));
        s->t = c->prev_t;
    }
    if (has_d) {
        if (varint_get(&c->p, c->end, &v))
            return "bad duration";
        s->dur = unzigzag(v);
    }
    *body = NULL;
    *len = 0;
    if (head & STORE_STMT_BODY) {
        if (varint_get(&c->p, c->end, &v) || v == 0 || v > (uint64_t)(c->end - c->p))
            return "bad body length";
        *body = c->p;
        *len = (int)v;
        c->p += v;
    }
    if (c->left == 0 && c->p != c->end)
        return "block does not end after its statements";
    if (c->left > 0 && c->p == c->end)
        return "block ends before its statements";
    return NULL;
}

/* The next late time (time_seq UINT64_MAX: no more). */
static int time_step(store_reader *sr, trace_error *err)
{
    int rc = sqlite3_step(sr->q_times);
    if (rc == SQLITE_DONE) {
        sr->time_seq = UINT64_MAX;
        return 0;
    }
    if (rc != SQLITE_ROW)
        return store_fail(sr->st, rc, "stmt_times", NULL, err);
    sr->time_seq = (uint64_t)sqlite3_column_int64(sr->q_times, 0) & STORE_SEQ_MASK;
    sr->time_t = value_time(sr->q_times, 1);
    sr->time_dur = value_time(sr->q_times, 2);
    return 0;
}

/* Steps the late times up to s's; applies s's. */
static int merge_time(store_reader *sr, trace_stmt *s, trace_error *err)
{
    while (sr->time_seq < s->seq)
        if (time_step(sr, err) != 0)
            return -1;
    if (sr->time_seq == s->seq) {
        s->t = sr->time_t;
        s->dur = sr->time_dur;
    }
    return 0;
}

/* row_fetch for a run of blocks: the next statement of the current block,
 * or of the next block. */
static int block_fetch(store_reader *sr, trace_stmt *s, const uint8_t **body, int *len,
                       trace_error *err)
{
    blk_cur *c = &sr->cur;
    while (c->left == 0) {
        int rc = sqlite3_step(sr->q);
        if (rc == SQLITE_DONE) {
            end_snapshot(sr);
            return 0;
        }
        if (rc != SQLITE_ROW)
            return store_fail(sr->st, rc, "stmt_blocks", NULL, err);
        uint64_t id = (uint64_t)sqlite3_column_int64(sr->q, 0);
        s->seq = id & STORE_SEQ_MASK;
        if ((int64_t)(id >> STORE_SEQ_BITS) != sr->run || s->seq < sr->next_min)
            return bad_row(sr, s, "block out of order", err);
        sqlite3_value *v = sqlite3_column_value(sr->q, 2);
        const uint8_t *data = sqlite3_value_blob(v);
        int n_data = sqlite3_value_bytes(v);
        if (!data && n_data)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", sr->st->path), -1;
        const char *bad = blk_open(c, data, n_data, s->seq, sqlite3_column_int64(sr->q, 1));
        if (bad)
            return bad_row(sr, s, bad, err);
        sr->next_min = s->seq + (uint64_t)sqlite3_column_int64(sr->q, 1);
    }
    if (c->seq >= sr->limit) {  /* a rewind reads what was handed out before, no more */
        c->left = 0;
        end_snapshot(sr);
        return 0;
    }
    const char *bad = blk_next(c, sr, s, body, len);
    if (bad)
        return bad_row(sr, s, bad, err);
    if (sr->lazy)
        s->t = s->dur = TRACE_TIME_NONE;   /* as a row's reader: the checker ignores them */
    else if (sr->q_times && merge_time(sr, s, err) != 0)
        return -1;
    return 1;
}

/* Decodes a fetched row's body into s and checks what depends on it.
 * Pointers into sr's pools stay valid until the next call. Any thread, one
 * at a time (the consumer of a pipeline). Returns 1 or -1. */
static int row_finish(store_reader *sr, trace_stmt *s, const uint8_t *body, int len,
                      trace_error *err)
{
    const trace *t = sr->t;
    sr->n_largs = 0;            /* set by decode_body, when there is a body */
    if (body) {
        int oom = 0;
        const char *bad = decode_body(sr, body, body + len, s, &oom);
        if (oom)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", sr->st->path), -1;
        if (bad)
            return bad_row(sr, s, bad, err);
    }
    uint32_t obj_limit = sr->n_db_strs;
    if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE)
        obj_limit = t->n_buffers;
    else if (s->kind == TRACE_SYNC && s->sync_scope == TRACE_SYNC_QUEUE)
        obj_limit = t->n_queues;
    if (s->object != TRACE_NONE && s->object >= obj_limit)
        return bad_row(sr, s, "bad object", err);
    if (s->kind == TRACE_COPY && s->n_access != 2)
        return bad_row(sr, s, "a copy without its two accesses", err);
    if ((s->kind == TRACE_SEND || s->kind == TRACE_RECV) &&
        (s->rank == TRACE_NONE || s->object == TRACE_NONE || s->count > UINT32_MAX))
        return bad_row(sr, s, "a send or recv without its communicator, ranks or tag", err);
    if (sr->n_largs) {
        /* the label is a template with numbers: join them (store_label.c),
         * now or when asked */
        if (s->label == TRACE_NONE || s->label >= sr->n_db_strs)
            return bad_row(sr, s, "label numbers without a label", err);
        if (sr->lazy) {
            s->label = TRACE_LABEL_LAZY;
            return 1;
        }
        int64_t n = store_label_join(t->strs[s->label], t->str_len[s->label], sr->largs,
                                     sr->n_largs, &sr->label_buf, &sr->cap_label);
        if (n < 0)
            return bad_row(sr, s, "label numbers that do not fit the label", err);
        s->label = trace_intern(sr->t, sr->label_buf, (size_t)n);
        if (s->label == TRACE_NONE)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", sr->st->path), -1;
    }
    return 1;
}

/* The next row, decoded, on this thread. */
static int row_next(store_reader *sr, trace_stmt *s, trace_error *err)
{
    const uint8_t *body = NULL;
    int len = 0;
    int rc = row_fetch(sr, s, &body, &len, err);
    return rc == 1 ? row_finish(sr, s, body, len, err) : rc;
}

/* ------------------------------------------------------------------ */
/* The pipeline: SQLite steps and bodies decode on a second thread.    */

/*
 * Reading a run costs about as much as checking it, so a lazy reader (one
 * that interns nothing while it reads: labels stay TRACE_LABEL_LAZY) reads
 * ahead on a producer thread (pipe.h) while the consumer works on the
 * previous batch. The producer steps SQLite and decodes each statement
 * (row_next) into the batch, accesses and attributes copied; the consumer
 * only takes them. With blocks (body_version 3) reading costs a fraction of
 * checking, so all of it goes to the producer. The producer alone uses the
 * database connection while it runs; everything that touches the
 * connection otherwise (a lazy label, a rewind, close) stops and joins it
 * first, dropping what it read ahead.
 */
static int pipe_fill(void *ctx, stmt_batch *b)
{
    store_reader *sr = ctx;
    while (b->n < STMT_BATCH) {
        trace_stmt s;
        int rc = row_next(sr, &s, &b->err);
        if (rc == 1 && stmt_batch_push(b, &s, NULL, 0) != 0) {
            trace_error_set(&b->err, TRACE_ENOMEM, "%s: out of memory", sr->st->path);
            rc = -1;
        }
        if (rc != 1)
            return rc;
    }
    return 1;
}

/* Stops and joins the producer (the connection is this thread's again). */
static void pipe_stop(store_reader *sr)
{
    stmt_pipe_stop(sr->pipe);
    sr->pipe = NULL;
}

/* The next statement: from the pipeline when lazy, else from this thread. */
static int pipe_next(store_reader *sr, trace_stmt *s, trace_error *err)
{
    if (!sr->lazy || sr->pipe_finished)
        return sr->pipe_finished ? 0 : row_next(sr, s, err);
    if (!sr->pipe && !(sr->pipe = stmt_pipe_start(pipe_fill, sr, false)))
        return row_next(sr, s, err);    /* no thread: read on this one */
    int rc = stmt_pipe_next(sr->pipe, s, NULL, NULL, NULL, err);
    if (rc != 1) {
        pipe_stop(sr);          /* the producer is done; the connection is ours */
        sr->pipe_finished = rc == 0;
    }
    return rc;
}

static int reader_next(void *ctx, trace_stmt *s, trace_error *err)
{
    store_reader *sr = ctx;
    int rc = pipe_next(sr, s, err);
    if (rc == 1)
        sr->handed = s->seq + 1;
    return rc;
}

static void reader_close(void *ctx)
{
    store_reader *sr = ctx;
    if (!sr)
        return;
    pipe_stop(sr);
    if (sr->q)
        end_snapshot(sr);
    sqlite3_finalize(sr->q);
    sqlite3_finalize(sr->q_times);
    if (sr->began)
        sqlite3_exec(sr->st->db, "COMMIT", NULL, NULL, NULL);
    free(sr->acc);
    free(sr->attr);
    free(sr->label_buf);
    sqlite3_finalize(sr->q_label);
    if (sr->owns_store)
        trace_store_close(sr->st);
    free(sr);
}

static int row_corrupt(store_reader *sr, uint64_t seq, const char *why, trace_error *err);

/* The end of a statement read once more: its body (NULL: none) decoded
 * into s, labels with their numbers whatever the reader's laziness; the
 * query reset. 0, or -1 with err naming seq. */
static int again_finish(store_reader *sr, uint64_t seq, trace_stmt *s, const uint8_t *body,
                        int len, const char *bad, trace_error *err)
{
    int oom = 0;
    if (!bad && body) {
        bool lazy = sr->lazy;
        sr->lazy = false;
        bad = decode_body(sr, body, body + len, s, &oom);
        sr->lazy = lazy;
    }
    sqlite3_reset(sr->q_label);
    if (oom)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", sr->st->path), -1;
    return bad ? row_corrupt(sr, seq, bad, err) : 0;
}

/* row_again in a run of blocks: the block holding seq, read up to it. */
static int block_again(store_reader *sr, uint64_t seq, trace_stmt *s, uint32_t *tpl,
                       bool *has_body, trace_error *err)
{
    if (!sr->q_label &&
        sqlite3_prepare_v2(sr->st->db,
                           "SELECT id, n, data FROM stmt_blocks WHERE id <= ?1 AND id >= ?2"
                           " ORDER BY id DESC LIMIT 1",
                           -1, &sr->q_label, NULL) != SQLITE_OK)
        return store_fail(sr->st, sqlite3_errcode(sr->st->db), "stmt_blocks", NULL, err);
    sqlite3_bind_int64(sr->q_label, 1, (int64_t)((uint64_t)sr->run << STORE_SEQ_BITS | seq));
    sqlite3_bind_int64(sr->q_label, 2, (int64_t)((uint64_t)sr->run << STORE_SEQ_BITS));
    int rc = sqlite3_step(sr->q_label);
    const char *bad = rc == SQLITE_ROW ? NULL : "no such statement";
    trace_stmt_init(s);
    *has_body = false;
    if (!bad) {
        blk_cur c;
        uint64_t first = (uint64_t)sqlite3_column_int64(sr->q_label, 0) & STORE_SEQ_MASK;
        sqlite3_value *v = sqlite3_column_value(sr->q_label, 2);
        bad = blk_open(&c, sqlite3_value_blob(v), sqlite3_value_bytes(v), first,
                       sqlite3_column_int64(sr->q_label, 1));
        const uint8_t *body = NULL;
        int len = 0;
        while (!bad && c.left > 0 && c.seq <= seq)
            bad = blk_next(&c, sr, s, &body, &len);
        if (!bad && s->seq != seq)
            bad = "no such statement";
        *tpl = s->label;
        *has_body = body != NULL;
        return again_finish(sr, seq, s, body, len, bad, err);
    }
    return again_finish(sr, seq, s, NULL, 0, bad, err);
}

/* Statement seq of the run read once more (lazy labels and attributes ask
 * for statements read so far): its row decoded into *s with its label's
 * numbers, *tpl its label's string id, *has_body false when the row has no
 * body. What *s points to lives in sr's buffers until the next decode.
 * Returns 0, or -1 with err (the row is missing or corrupt, out of memory). */
static int row_again(store_reader *sr, uint64_t seq, trace_stmt *s, uint32_t *tpl, bool *has_body,
                     trace_error *err)
{
    pipe_stop(sr);              /* the connection is this thread's */
    if (sr->blocks)
        return block_again(sr, seq, s, tpl, has_body, err);
    if (!sr->q_label &&
        sqlite3_prepare_v2(sr->st->db, "SELECT label, body, kind FROM statements WHERE id = ?1", -1,
                           &sr->q_label, NULL) != SQLITE_OK)
        return store_fail(sr->st, sqlite3_errcode(sr->st->db), "statements", NULL, err);
    sqlite3_bind_int64(sr->q_label, 1, (int64_t)((uint64_t)sr->run << STORE_SEQ_BITS | seq));
    int rc = sqlite3_step(sr->q_label);
    const char *bad = rc == SQLITE_ROW ? NULL : "no such statement";
    trace_stmt_init(s);
    *has_body = false;
    if (bad)
        return again_finish(sr, seq, s, NULL, 0, bad, err);
    /* the body's argument means what the kind says (a collective's KIND) */
    int64_t kind = sqlite3_column_int64(sr->q_label, 2);
    s->kind = kind >= 0 && kind < TRACE_KIND_COUNT ? (trace_kind)kind : TRACE_OP;
    sqlite3_value *body = sqlite3_column_value(sr->q_label, 1);
    const uint8_t *p = sqlite3_value_blob(body);
    *tpl = (uint32_t)sqlite3_column_int64(sr->q_label, 0);
    *has_body = p != NULL;
    return again_finish(sr, seq, s, p, sqlite3_value_bytes(body), NULL, err);
}

static int row_corrupt(store_reader *sr, uint64_t seq, const char *why, trace_error *err)
{
    return trace_error_set(err, TRACE_ECORRUPT, "%s: table statements: run %lld seq %llu: %s",
                           sr->st->path, (long long)sr->run, (unsigned long long)seq, why),
           -1;
}

/* A lazy label: statement seq's row once more, its label numbers joined
 * into label_buf. */
static int reader_label_text(void *ctx, uint64_t seq, const char **text, size_t *len,
                             trace_error *err)
{
    store_reader *sr = ctx;
    trace_stmt s;
    uint32_t tpl = 0;
    bool has_body;
    if (row_again(sr, seq, &s, &tpl, &has_body, err) != 0)
        return -1;
    if (!has_body || !sr->n_largs || tpl >= sr->n_db_strs)
        return row_corrupt(sr, seq, "no label numbers", err);
    int64_t n = store_label_join(sr->t->strs[tpl], sr->t->str_len[tpl], sr->largs, sr->n_largs,
                                 &sr->label_buf, &sr->cap_label);
    if (n < 0)
        return row_corrupt(sr, seq, "label numbers that do not fit the label", err);
    *text = sr->label_buf;
    *len = (size_t)n;
    return 0;
}

/* An attribute of statement seq: its row once more, its body decoded for
 * the attributes, whose values are strings of the run (the trace's first
 * ids). */
static int reader_attr_text(void *ctx, uint64_t seq, const char *key, const char **text,
                            size_t *len, trace_error *err)
{
    store_reader *sr = ctx;
    *text = NULL;
    *len = 0;
    uint32_t k = trace_str_find(sr->t, key, strlen(key));
    if (k == TRACE_NONE || k >= sr->n_db_strs)
        return 0;               /* no statement of the run has it */
    trace_stmt s;
    uint32_t tpl;
    bool has_body;
    if (row_again(sr, seq, &s, &tpl, &has_body, err) != 0)
        return -1;
    for (uint32_t i = 0; i < s.n_attr; i++)
        if (s.attr[i].key == k) {
            *text = sr->t->strs[s.attr[i].value];
            *len = sr->t->str_len[s.attr[i].value];
            break;
        }
    return 0;
}

/* Runs the statement query again, over the statements handed out so far
 * (a recorder may have appended more since; a pipeline may have read
 * ahead). */
static int reader_rewind(void *ctx, trace_error *err)
{
    store_reader *sr = ctx;
    pipe_stop(sr);
    sr->pipe_finished = false;
    sqlite3_reset(sr->q);
    sqlite3_bind_int64(sr->q, 2, (int64_t)(((uint64_t)sr->run << STORE_SEQ_BITS) + sr->handed));
    sr->cur.left = 0;
    sr->limit = sr->handed;
    if (sr->q_times) {
        sqlite3_reset(sr->q_times);
        sr->time_seq = 0;
    }
    sr->next_min = 0;
    sr->handed = 0;
    if (!sr->began && sqlite3_get_autocommit(sr->st->db)) {
        if (store_exec(sr->st, "BEGIN", NULL, err) != 0)
            return -1;
        sr->began = true;
    }
    if (sr->q_times && time_step(sr, err) != 0)
        return -1;
    return 0;
}

static const trace_reader_iface store_reader_iface = { reader_next, reader_close, reader_rewind,
                                                       reader_label_text, reader_attr_text };

static int open_reader(trace_store *st, bool owns_store, bool lazy, int64_t run, trace_reader *r,
                       trace_error *err)
{
    memset(r, 0, sizeof *r);
    store_reader *sr = calloc(1, sizeof *sr);
    if (!sr) {
        if (owns_store)
            trace_store_close(st);
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path), -1;
    }
    sr->st = st;
    sr->owns_store = owns_store;
    sr->lazy = lazy;
    r->iface = &store_reader_iface;
    r->ctx = sr;
    r->owns_trace = true;
    r->trace = sr->t = trace_new();
    if (!sr->t) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path);
        goto fail;
    }
    sr->run = store_resolve_run(st, run, err);
    if (sr->run < 0)
        goto fail;
    /* messages name the run, not only the file: two runs of one database
     * (merge --run 1 d.db --run 2 d.db) are told apart */
    if (asprintf(&r->source, "%s (run %lld)", st->path, (long long)sr->run) < 0) {
        r->source = NULL;
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path);
        goto fail;
    }
    int bv = store_body_version(st, sr->run);
    sr->body_shift = STORE_BODY_SHIFT(bv);
    /* label arguments come with label templates (a later body layout) */
    sr->body_flags = STORE_BODY_BY | STORE_BODY_COUNT | STORE_BODY_ARG | STORE_BODY_LINE |
                     (bv >= 2 ? STORE_BODY_LARGS : 0);
    /* The declarations and the statements come from one snapshot (a
     * recorder may be appending): a read transaction, unless the caller
     * already holds one. */
    if (sqlite3_get_autocommit(st->db)) {
        if (store_exec(st, "BEGIN", NULL, err) != 0)
            goto fail;
        sr->began = true;
    }
    sr->blocks = bv >= STORE_BODY_BLOCKS;
    sr->limit = UINT64_MAX;
    if (load_strings(sr, err) || load_queues(sr, err) || load_buffers(sr, err) ||
        load_expectations(sr, err) || load_meta(sr, err))
        goto fail;
    if (sr->blocks) {
        if (prepare_run(sr,
                        "SELECT id, n, data FROM stmt_blocks WHERE id >= ?1 AND id < ?2"
                        " ORDER BY id",
                        "stmt_blocks", &sr->q, err) ||
            (!sr->lazy && prepare_run(sr,
                                      "SELECT id, t, dur FROM stmt_times"
                                      " WHERE id >= ?1 AND id < ?2 ORDER BY id",
                                      "stmt_times", &sr->q_times, err)))
            goto fail;
        for (sqlite3_stmt *q = sr->q; q; q = q == sr->q ? sr->q_times : NULL) {
            sqlite3_bind_int64(q, 1, (int64_t)((uint64_t)sr->run << STORE_SEQ_BITS));
            sqlite3_bind_int64(q, 2, (int64_t)((uint64_t)(sr->run + 1) << STORE_SEQ_BITS));
        }
        if (sr->q_times && time_step(sr, err) != 0)
            goto fail;
        return 0;
    }
    if (prepare_run(sr,
                    /* a lazy reader serves the checker, which ignores times */
                    sr->lazy ? "SELECT id, queue, kind, label, object, body"
                               " FROM statements WHERE id >= ?1 AND id < ?2 ORDER BY id"
                             : "SELECT id, queue, kind, label, object, t, dur, body"
                               " FROM statements WHERE id >= ?1 AND id < ?2 ORDER BY id",
                    "statements", &sr->q, err))
        goto fail;
    sqlite3_bind_int64(sr->q, 1, (int64_t)((uint64_t)sr->run << STORE_SEQ_BITS));
    sqlite3_bind_int64(sr->q, 2, (int64_t)((uint64_t)(sr->run + 1) << STORE_SEQ_BITS));
    return 0;
fail:
    trace_reader_close(r);
    return -1;
}

void store_reader_adopt(trace_reader *r)
{
    ((store_reader *)r->ctx)->owns_store = true;
}

int trace_store_reader(trace_store *st, int64_t run, trace_reader *r, trace_error *err)
{
    return open_reader(st, false, false, run, r, err);
}

int trace_store_reader_lazy(trace_store *st, int64_t run, trace_reader *r, trace_error *err)
{
    return open_reader(st, false, true, run, r, err);
}

int trace_store_open_reader(const char *path, int64_t run, trace_reader *r, trace_error *err)
{
    memset(r, 0, sizeof *r);
    trace_store *st = store_open_readonly(path, err);
    if (!st)
        return -1;
    return open_reader(st, true, false, run, r, err);
}
