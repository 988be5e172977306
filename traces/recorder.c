/*
 * recorder.c -- the thread-safe trace recorder: producers append, one writer
 * thread flushes to SQLite.
 *
 * Design
 * ------
 * Two locks, never held together by a producer:
 *
 *   decl_lock  guards the recorder's trace (strings, queues, buffers,
 *              expectations, metadata) and the pending split-graph rows.
 *   lock       guards the statement batches, the seq counter, the pending
 *              time updates and the flush handshake.
 *
 * Statements go to `cur`, a batch of fixed-size records plus pools for their
 * accesses and attributes: an append takes `lock`, copies the statement and
 * its accesses with memcpy and releases it. Seqs are assigned under the same
 * lock, so they are dense and in append order. The writer thread swaps `cur`
 * with `spare` (double buffering: producers go on appending into the fresh
 * batch while the writer writes the old one) when the batch is full, every
 * flush_ms, on trace_recorder_flush and on close. A producer that finds
 * `cur` full waits until the writer swaps.
 *
 * One flush is one transaction, in this order: declarations and strings
 * that are new (taken under decl_lock after the swap, so they include every
 * string a statement of the batch uses, since a producer interns before it
 * appends), metadata when changed, the batch's statements, time updates for
 * statements of earlier batches, graph rows, and the run row's counts. A
 * SIGKILL therefore loses at most the transaction in progress and the batch
 * being filled; the database stays readable and the run stays 'recording'.
 *
 * trace_recorder_set_time patches the statement in `cur` when it is still
 * there; otherwise it queues an UPDATE for the next flush (the statement is
 * then in the batch being written or already committed, and the next
 * transaction starts after that one committed).
 *
 * A write error stops recording: later flushes discard their batches and
 * trace_recorder_flush / trace_recorder_close report the first error.
 */
#include "store_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A statement in a batch: the fields of trace_stmt, pool offsets instead
 * of pointers. */
typedef struct rec_stmt {
    trace_stmt s;
    uint32_t first_access, first_attr;
} rec_stmt;

typedef struct rec_batch {
    _Alignas(64) uint64_t first_seq;    /* each batch on its own cache lines */
    uint32_t n;
    rec_stmt *stmts;        /* batch_stmts of them */
    trace_access *acc;
    uint32_t n_acc, cap_acc;
    trace_attr *attr;
    uint32_t n_attr, cap_attr;
} rec_batch;

typedef struct time_update {
    uint64_t seq;
    int64_t t, dur;
} time_update;

/* A graph row kept until the next flush; strings owned. */
typedef struct graph_item {
    enum { ITEM_NODE, ITEM_EDGE, ITEM_SPLIT } kind;
    union {
        trace_graph_node node;
        trace_graph_edge edge;
        trace_graph_split split;
    } u;
    int64_t edge_idx;
} graph_item;

struct trace_recorder {
    trace_store *st;
    int64_t run;
    store_writer w;             /* writer thread only */
    uint32_t batch_stmts, flush_ms;

    pthread_mutex_t decl_lock;
    trace *t;
    bool meta_dirty;
    graph_item *items;
    size_t n_items, cap_items;
    int64_t n_edges;

    /* Producers write the lock and their batch's counts on every append:
     * each on cache lines of its own, or the writer thread, reading the
     * other batch, pulls them away from the producer (false sharing: 40 %
     * of a simulator's thread went to unlocking). */
    _Alignas(64) pthread_mutex_t lock;
    pthread_cond_t wake;        /* writer: work to do */
    pthread_cond_t space;       /* producers: cur has room again */
    pthread_cond_t done;        /* flushers: a flush finished */
    _Alignas(64) rec_batch batches[2];
    rec_batch *cur, *spare;
    uint64_t next_seq;
    time_update *updates;
    size_t n_updates, cap_updates;
    uint64_t flush_req, flush_done;
    bool closing, failed;
    bool created;               /* this recorder created the database file */
    char *path;
    trace_error error;          /* the first write error */

    pthread_t writer;
    bool writer_started;
};

/* ------------------------------------------------------------------ */
/* Batches.                                                            */

static int batch_init(rec_batch *b, uint32_t cap)
{
    memset(b, 0, sizeof *b);
    b->stmts = malloc((size_t)cap * sizeof *b->stmts);
    b->cap_acc = cap * 2;
    b->acc = malloc((size_t)b->cap_acc * sizeof *b->acc);
    b->cap_attr = 64;
    b->attr = malloc((size_t)b->cap_attr * sizeof *b->attr);
    return b->stmts && b->acc && b->attr ? 0 : -1;
}

static void batch_free(rec_batch *b)
{
    free(b->stmts);
    free(b->acc);
    free(b->attr);
}

static int pool_grow(void **pool, uint32_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint64_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    if (ncap > UINT32_MAX)
        return -1;
    void *p = realloc(*pool, ncap * elem);
    if (!p)
        return -1;
    *pool = p;
    *cap = (uint32_t)ncap;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The writer thread.                                                  */

static void item_free(graph_item *it)
{
    switch (it->kind) {
    case ITEM_NODE:
        free((char *)it->u.node.name);
        free((char *)it->u.node.op);
        free((char *)it->u.node.shape);
        free((char *)it->u.node.backend);
        free((char *)it->u.node.cause);
        break;
    case ITEM_EDGE:
        free((char *)it->u.edge.kind);
        break;
    case ITEM_SPLIT:
        free((char *)it->u.split.backend);
        free((char *)it->u.split.inputs);
        break;
    }
}

/* Writes one batch and what goes with it in one transaction. Called by the
 * writer thread without `lock`. */
static int write_batch(trace_recorder *rec, rec_batch *b, time_update *ups, size_t n_ups,
                       trace_error *err)
{
    store_writer *w = &rec->w;
    graph_item *items = NULL;
    size_t n_items = 0;
    int rc = -1;
    if (store_exec(rec->st, "BEGIN IMMEDIATE", NULL, err) != 0)
        return -1;
    pthread_mutex_lock(&rec->decl_lock);
    int drc = store_writer_decls(w, rec->t, err);
    if (drc == 0 && rec->meta_dirty) {
        drc = store_writer_meta(w, rec->t, err);
        rec->meta_dirty = drc != 0;
    }
    items = rec->items;
    n_items = rec->n_items;
    rec->items = NULL;
    rec->n_items = rec->cap_items = 0;
    pthread_mutex_unlock(&rec->decl_lock);
    if (drc != 0)
        goto done;
    /* b is the writer's until it hands it back: its fields read once */
    const rec_batch batch = *b;
    for (uint32_t i = 0; i < batch.n; i++) {
        rec_stmt *r = &batch.stmts[i];
        r->s.access = r->s.n_access ? batch.acc + r->first_access : NULL;
        r->s.attr = r->s.n_attr ? batch.attr + r->first_attr : NULL;
        if (store_writer_stmt(w, rec->t, batch.first_seq + i, &r->s, NULL, 0, err) != 0)
            goto done;
    }
    for (size_t i = 0; i < n_ups; i++)
        if (ups[i].seq < w->n_stmts &&
            store_writer_time(w, ups[i].seq, ups[i].t, ups[i].dur, err) != 0)
            goto done;
    for (size_t i = 0; i < n_items; i++) {
        graph_item *it = &items[i];
        int grc = it->kind == ITEM_NODE   ? store_put_graph_node(rec->st, rec->run, &it->u.node, err)
                  : it->kind == ITEM_EDGE ? store_put_graph_edge(rec->st, rec->run, it->edge_idx,
                                                                 &it->u.edge, err)
                                          : store_put_graph_split(rec->st, rec->run, &it->u.split,
                                                                  err);
        if (grc != 0)
            goto done;
    }
    if (store_writer_run_row(w, NULL, err) != 0 ||
        store_exec(rec->st, "COMMIT", NULL, err) != 0)
        goto done;
    rc = 0;
done:
    if (rc != 0)
        sqlite3_exec(rec->st->db, "ROLLBACK", NULL, NULL, NULL);
    for (size_t i = 0; i < n_items; i++)
        item_free(&items[i]);
    free(items);
    return rc;
}

static bool has_work(const trace_recorder *rec)
{
    return rec->cur->n >= rec->batch_stmts || rec->flush_req > rec->flush_done || rec->closing;
}

static void *writer_main(void *arg)
{
    trace_recorder *rec = arg;
    time_update *ups = NULL;
    size_t cap_ups = 0;
    pthread_mutex_lock(&rec->lock);
    for (;;) {
        if (!has_work(rec)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += rec->flush_ms / 1000;
            until.tv_nsec += (long)(rec->flush_ms % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            int wrc = 0;
            while (!has_work(rec) && wrc != ETIMEDOUT)
                wrc = pthread_cond_timedwait(&rec->wake, &rec->lock, &until);
            if (!has_work(rec) && rec->cur->n == 0 && rec->n_updates == 0)
                continue; /* a quiet period: nothing to write */
        }
        uint64_t req = rec->flush_req;
        bool closing = rec->closing;
        rec_batch *b = rec->cur;
        rec->cur = rec->spare;
        rec->spare = NULL;
        rec->cur->first_seq = rec->next_seq;
        rec->cur->n = rec->cur->n_acc = rec->cur->n_attr = 0;
        /* Take the updates: swap buffers so that producers keep theirs. */
        time_update *taken = rec->updates;
        size_t n_taken = rec->n_updates, cap_taken = rec->cap_updates;
        rec->updates = ups;
        rec->cap_updates = cap_ups;
        rec->n_updates = 0;
        ups = taken;
        cap_ups = 0;
        pthread_cond_broadcast(&rec->space);
        bool failed = rec->failed;
        pthread_mutex_unlock(&rec->lock);

        trace_error err = { 0 };
        int wrc = failed ? 0 : write_batch(rec, b, ups, n_taken, &err);

        pthread_mutex_lock(&rec->lock);
        /* ups is ours again; keep its capacity. */
        cap_ups = cap_taken;
        if (wrc != 0 && !rec->failed) {
            rec->failed = true;
            rec->error = err;
        }
        rec->spare = b;
        rec->flush_done = req;
        pthread_cond_broadcast(&rec->done);
        pthread_cond_broadcast(&rec->space);
        if (closing && rec->cur->n == 0 && rec->n_updates == 0)
            break;
    }
    pthread_mutex_unlock(&rec->lock);
    free(ups);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Opening and closing.                                                */

static void recorder_free(trace_recorder *rec)
{
    if (!rec)
        return;
    store_writer_fini(&rec->w);
    trace_store_close(rec->st);
    trace_free(rec->t);
    batch_free(&rec->batches[0]);
    batch_free(&rec->batches[1]);
    free(rec->updates);
    for (size_t i = 0; i < rec->n_items; i++)
        item_free(&rec->items[i]);
    free(rec->items);
    pthread_mutex_destroy(&rec->decl_lock);
    pthread_mutex_destroy(&rec->lock);
    pthread_cond_destroy(&rec->wake);
    pthread_cond_destroy(&rec->space);
    pthread_cond_destroy(&rec->done);
    free(rec->path);
    free(rec);
}

/* A recording that failed (a full disk, a read-only file) leaves the
 * database as it was: its run is deleted, and a file this recorder
 * created is removed. Best effort: where even the deletion cannot be
 * written, the run stays 'recording' and is never called clean. */
static void undo_failed_run(trace_recorder *rec)
{
    if (!rec->st)
        return;
    trace_error ignored = { 0 };
    bool deleted = rec->run > 0 && trace_store_delete_run(rec->st, rec->run, &ignored) == 0;
    bool only_run = false;
    sqlite3_stmt *q = NULL;
    if (deleted && sqlite3_prepare_v2(rec->st->db, "SELECT count(*) FROM runs", -1, &q, NULL) ==
                       SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        only_run = sqlite3_column_int64(q, 0) == 0;
    sqlite3_finalize(q);
    if (rec->created && (only_run || rec->run <= 0)) {
        store_writer_fini(&rec->w);
        trace_store_close(rec->st);
        rec->st = NULL;
        store_remove_files(rec->path);
    }
}

trace_recorder *trace_recorder_open(const char *path, const trace_recorder_opts *opts,
                                    trace_error *err)
{
    trace_recorder_opts o = opts ? *opts : (trace_recorder_opts){ 0 };
    /* over-aligned (its cache lines above): sizeof is a multiple of 64 */
    trace_recorder *rec = aligned_alloc(_Alignof(trace_recorder), sizeof *rec);
    if (!rec) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    memset(rec, 0, sizeof *rec);
    pthread_mutex_init(&rec->decl_lock, NULL);
    pthread_mutex_init(&rec->lock, NULL);
    pthread_cond_init(&rec->wake, NULL);
    pthread_cond_init(&rec->space, NULL);
    pthread_cond_init(&rec->done, NULL);
    rec->batch_stmts = o.batch_stmts ? o.batch_stmts : 65536;
    rec->flush_ms = o.flush_ms ? o.flush_ms : 200;
    rec->t = trace_new();
    if (!rec->t || batch_init(&rec->batches[0], rec->batch_stmts) ||
        batch_init(&rec->batches[1], rec->batch_stmts)) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    rec->cur = &rec->batches[0];
    rec->spare = &rec->batches[1];
    rec->created = access(path, F_OK) != 0;
    rec->path = strdup(path);
    if (!rec->path) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    rec->st = trace_store_open(path, true, err);
    if (!rec->st)
        goto fail;
    if (store_exec(rec->st, "BEGIN IMMEDIATE", NULL, err) != 0)
        goto fail;
    rec->run = store_new_run(rec->st, o.run_name, o.source, err);
    if (rec->run < 0 || store_exec(rec->st, "COMMIT", NULL, err) != 0) {
        sqlite3_exec(rec->st->db, "ROLLBACK", NULL, NULL, NULL);
        rec->run = 0;
        undo_failed_run(rec);
        goto fail;
    }
    if (store_writer_init(&rec->w, rec->st, rec->run, err) != 0)
        goto fail;
    if (pthread_create(&rec->writer, NULL, writer_main, rec) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "%s: cannot start the writer thread", path);
        goto fail;
    }
    rec->writer_started = true;
    return rec;
fail:
    recorder_free(rec);
    return NULL;
}

int64_t trace_recorder_run(const trace_recorder *rec)
{
    return rec->run;
}

int trace_recorder_flush(trace_recorder *rec, trace_error *err)
{
    pthread_mutex_lock(&rec->lock);
    uint64_t my = ++rec->flush_req;
    pthread_cond_signal(&rec->wake);
    while (rec->flush_done < my)
        pthread_cond_wait(&rec->done, &rec->lock);
    int rc = 0;
    if (rec->failed) {
        if (err)
            *err = rec->error;
        rc = -1;
    }
    pthread_mutex_unlock(&rec->lock);
    return rc;
}

int trace_recorder_close(trace_recorder *rec, trace_error *err)
{
    if (!rec)
        return 0;
    int rc = trace_recorder_flush(rec, err);
    pthread_mutex_lock(&rec->lock);
    rec->closing = true;
    pthread_cond_signal(&rec->wake);
    pthread_mutex_unlock(&rec->lock);
    pthread_join(rec->writer, NULL);
    if (rc == 0 && rec->failed) {
        if (err)
            *err = rec->error;
        rc = -1;
    }
    if (rec->failed)
        undo_failed_run(rec);
    if (rc == 0) {
        /* The writer has exited: this thread owns the connection now. */
        if (store_exec(rec->st, "BEGIN IMMEDIATE", NULL, err) != 0 ||
            store_writer_run_row(&rec->w, "complete", err) != 0 ||
            store_exec(rec->st, "COMMIT", NULL, err) != 0) {
            sqlite3_exec(rec->st->db, "ROLLBACK", NULL, NULL, NULL);
            rc = -1;
        }
    }
    recorder_free(rec);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Producers.                                                          */

uint32_t trace_recorder_intern(trace_recorder *rec, const char *s)
{
    pthread_mutex_lock(&rec->decl_lock);
    uint32_t id = trace_intern_cstr(rec->t, s);
    pthread_mutex_unlock(&rec->decl_lock);
    return id;
}

uint32_t trace_recorder_queue(trace_recorder *rec, const char *name, trace_queue_kind kind,
                              const char *device)
{
    uint32_t q = TRACE_NONE;
    pthread_mutex_lock(&rec->decl_lock);
    uint32_t n = trace_intern_cstr(rec->t, name);
    uint32_t d = device ? trace_intern_cstr(rec->t, device) : TRACE_NONE;
    if (n != TRACE_NONE && (!device || d != TRACE_NONE))
        q = trace_add_queue(rec->t, n, kind, d);
    pthread_mutex_unlock(&rec->decl_lock);
    return q;
}

uint32_t trace_recorder_buffer(trace_recorder *rec, const char *name, uint64_t size,
                               trace_loc loc, const char *device, bool pinned)
{
    uint32_t b = TRACE_NONE;
    if (size == 0)
        return TRACE_NONE;
    pthread_mutex_lock(&rec->decl_lock);
    uint32_t n = trace_intern_cstr(rec->t, name);
    uint32_t d = device ? trace_intern_cstr(rec->t, device) : TRACE_NONE;
    if (n != TRACE_NONE && (!device || d != TRACE_NONE))
        b = trace_add_root_buffer(rec->t, n, size, loc, d, pinned);
    pthread_mutex_unlock(&rec->decl_lock);
    return b;
}

uint32_t trace_recorder_view(trace_recorder *rec, const char *name, uint32_t parent,
                             uint64_t offset, uint64_t size)
{
    uint32_t b = TRACE_NONE;
    pthread_mutex_lock(&rec->decl_lock);
    if (parent < rec->t->n_buffers && size >= 1 && offset <= rec->t->buffers[parent].size &&
        size <= rec->t->buffers[parent].size - offset) {
        uint32_t n = trace_intern_cstr(rec->t, name);
        if (n != TRACE_NONE)
            b = trace_add_view(rec->t, n, parent, offset, size);
    }
    pthread_mutex_unlock(&rec->decl_lock);
    return b;
}

int trace_recorder_expect(trace_recorder *rec, trace_finding_kind kind, const trace_attr *kv,
                          uint32_t n_kv)
{
    pthread_mutex_lock(&rec->decl_lock);
    int rc = trace_add_expect(rec->t, kind, 0, kv, n_kv);
    pthread_mutex_unlock(&rec->decl_lock);
    return rc;
}

int trace_recorder_meta(trace_recorder *rec, const char *key, const char *value)
{
    pthread_mutex_lock(&rec->decl_lock);
    int rc = trace_set_meta(rec->t, key, value);
    rec->meta_dirty = true;
    pthread_mutex_unlock(&rec->decl_lock);
    return rc;
}

uint64_t trace_recorder_append(trace_recorder *rec, const trace_stmt *s)
{
    pthread_mutex_lock(&rec->lock);
    while (rec->cur->n >= rec->batch_stmts) {
        pthread_cond_signal(&rec->wake);
        pthread_cond_wait(&rec->space, &rec->lock);
    }
    rec_batch *b = rec->cur;
    if (pool_grow((void **)&b->acc, &b->cap_acc, (uint64_t)b->n_acc + s->n_access,
                  sizeof *b->acc) ||
        pool_grow((void **)&b->attr, &b->cap_attr, (uint64_t)b->n_attr + s->n_attr,
                  sizeof *b->attr)) {
        /* Out of memory: the statement is lost; recording is broken. */
        if (!rec->failed) {
            rec->failed = true;
            trace_error_set(&rec->error, TRACE_ENOMEM, "%s: out of memory in the recorder",
                            rec->st->path);
        }
        pthread_mutex_unlock(&rec->lock);
        return UINT64_MAX;
    }
    rec_stmt *r = &b->stmts[b->n];
    uint64_t seq = b->first_seq + b->n;
    r->s = *s;
    r->s.seq = seq;
    r->first_access = b->n_acc;
    r->first_attr = b->n_attr;
    if (s->n_access)
        memcpy(b->acc + b->n_acc, s->access, s->n_access * sizeof *s->access);
    if (s->n_attr)
        memcpy(b->attr + b->n_attr, s->attr, s->n_attr * sizeof *s->attr);
    b->n_acc += s->n_access;
    b->n_attr += s->n_attr;
    b->n++;
    rec->next_seq = seq + 1;
    if (b->n >= rec->batch_stmts)
        pthread_cond_signal(&rec->wake);
    pthread_mutex_unlock(&rec->lock);
    return seq;
}

void trace_recorder_set_time(trace_recorder *rec, uint64_t seq, int64_t t, int64_t dur)
{
    pthread_mutex_lock(&rec->lock);
    rec_batch *b = rec->cur;
    if (seq >= b->first_seq && seq < b->first_seq + b->n) {
        b->stmts[seq - b->first_seq].s.t = t;
        b->stmts[seq - b->first_seq].s.dur = dur;
    } else if (seq < b->first_seq) {
        if (rec->n_updates == rec->cap_updates) {
            size_t cap = rec->cap_updates ? rec->cap_updates * 2 : 256;
            time_update *nu = realloc(rec->updates, cap * sizeof *nu);
            if (!nu) {
                pthread_mutex_unlock(&rec->lock);
                return; /* a lost time is not worth failing the run for */
            }
            rec->updates = nu;
            rec->cap_updates = cap;
        }
        rec->updates[rec->n_updates++] = (time_update){ seq, t, dur };
    }
    pthread_mutex_unlock(&rec->lock);
}

/* ------------------------------------------------------------------ */
/* Split graph.                                                        */

/* Copies s, NULL staying NULL; sets *oom. */
static const char *dup_opt(const char *s, bool *oom)
{
    if (!s)
        return NULL;
    char *c = strdup(s);
    if (!c)
        *oom = true;
    return c;
}

static int push_item(trace_recorder *rec, graph_item *it, bool oom)
{
    pthread_mutex_lock(&rec->decl_lock);
    if (!oom && rec->n_items == rec->cap_items) {
        size_t cap = rec->cap_items ? rec->cap_items * 2 : 64;
        graph_item *ni = realloc(rec->items, cap * sizeof *ni);
        if (ni) {
            rec->items = ni;
            rec->cap_items = cap;
        } else {
            oom = true;
        }
    }
    if (!oom) {
        if (it->kind == ITEM_EDGE)
            it->edge_idx = rec->n_edges++;
        rec->items[rec->n_items++] = *it;
    }
    pthread_mutex_unlock(&rec->decl_lock);
    if (oom) {
        item_free(it);
        return -1;
    }
    return 0;
}

int trace_recorder_graph_node(trace_recorder *rec, const trace_graph_node *n)
{
    bool oom = false;
    graph_item it = { .kind = ITEM_NODE, .u.node = *n };
    it.u.node.name = dup_opt(n->name, &oom);
    it.u.node.op = dup_opt(n->op, &oom);
    it.u.node.shape = dup_opt(n->shape, &oom);
    it.u.node.backend = dup_opt(n->backend, &oom);
    it.u.node.cause = dup_opt(n->cause, &oom);
    return push_item(rec, &it, oom);
}

int trace_recorder_graph_edge(trace_recorder *rec, const trace_graph_edge *e)
{
    bool oom = false;
    graph_item it = { .kind = ITEM_EDGE, .u.edge = *e };
    it.u.edge.kind = dup_opt(e->kind, &oom);
    return push_item(rec, &it, oom);
}

int trace_recorder_graph_split(trace_recorder *rec, const trace_graph_split *s)
{
    bool oom = false;
    graph_item it = { .kind = ITEM_SPLIT, .u.split = *s };
    it.u.split.backend = dup_opt(s->backend, &oom);
    it.u.split.inputs = dup_opt(s->inputs, &oom);
    return push_item(rec, &it, oom);
}
