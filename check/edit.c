/*
 * edit.c -- a trace rewritten: some statements deleted, some moved from
 * the host that ran them to a stream, new synchronisations put in. The
 * minimiser's output (check_trace_filter: deletions only) and the advice's
 * what-ifs (check/advise.c: a blocking copy made asynchronous, an event
 * record and wait put where a host sync was) are edits.
 *
 * The result is a new in-memory trace: the declarations, metadata and
 * expectations of the input (string ids, queue and buffer indices kept, so
 * findings on it name the same roots), then the statements in order with
 * the insertions where they were asked for. A map from each statement of
 * the result to the one of the input it came from lets a caller compare
 * findings on both. A view (check_trace_edit_view) shares the input's
 * declarations and strings and has statements of its own: what a check and
 * a replay of a what-if need, without copying a capture's million labels.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Order of insertions at one place: records and signals before the waits,
 * syncs and awaits, so that a record put after x and a wait put before y
 * = x + 1 come in that order. */
static int ins_rank(trace_kind k)
{
    return k == TRACE_RECORD || k == TRACE_SIGNAL ? 0 : 1;
}

static int cmp_insert(const void *a, const void *b)
{
    const check_insert *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    int rx = ins_rank(x->kind), ry = ins_rank(y->kind);
    if (rx != ry)
        return rx - ry;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* A copy of t's declarations, strings (same ids), metadata and expectations
 * other than redundant-sync. NULL when out of memory. */
static trace *copy_declarations(const trace *t)
{
    trace *o = trace_new();
    if (!o)
        return NULL;
    for (uint32_t i = 0; i < t->n_strs; i++)
        if (trace_intern(o, t->strs[i], t->str_len[i]) != i)
            goto fail;
    for (uint32_t q = 0; q < t->n_queues; q++)
        if (trace_add_queue(o, t->queues[q].name, t->queues[q].kind, t->queues[q].device) != q)
            goto fail;
    for (uint32_t b = 0; b < t->n_buffers; b++) {
        const trace_buffer *x = &t->buffers[b];
        uint32_t got = x->parent == TRACE_NONE
                           ? trace_add_root_buffer(o, x->name, x->size, x->loc, x->device, x->pinned)
                           : trace_add_view(o, x->name, x->parent, x->offset, x->size);
        if (got != b)
            goto fail;
    }
    for (uint32_t i = 0; i < t->n_expects; i++) {
        const trace_expect *x = &t->expects[i];
        if (x->kind == TRACE_FINDING_REDUNDANT_SYNC)
            continue;
        if (trace_add_expect(o, x->kind, x->line, x->kv, x->n_kv) != 0)
            goto fail;
    }
    for (uint32_t i = 0; i < t->n_meta; i++)
        if (trace_set_meta(o, trace_str(t, t->meta[i].key), trace_str(t, t->meta[i].value)) != 0)
            goto fail;
    return o;
fail:
    trace_free(o);
    return NULL;
}

/* Appends insertion x to o. */
static int append_insert(trace *o, const check_insert *x, uint64_t *map, uint64_t *n_map)
{
    trace_stmt s;
    trace_stmt_init(&s);
    s.queue = x->queue;
    s.kind = x->kind;
    s.by = x->by;
    s.object = x->object;
    if (x->kind == TRACE_SYNC)
        s.sync_scope = x->sync_scope;
    if (trace_append(o, &s) != 0)
        return -1;
    if (map)
        map[(*n_map)++] = TRACE_NO_SEQ;
    return 0;
}

/* Appends t's statements edited by e to o (declarations already there). */
static int append_edited(trace *o, const trace *t, const check_edit *e, uint64_t **seq_of)
{
    check_insert *ins = NULL;
    uint64_t *map = NULL, n_map = 0;
    size_t n_ins = e ? e->n_ins : 0;
    if (n_ins) {
        if (!(ins = malloc(n_ins * sizeof *ins)))
            goto fail;
        memcpy(ins, e->ins, n_ins * sizeof *ins);
        for (size_t i = 0; i < n_ins; i++)
            ins[i].order = i;
        qsort(ins, n_ins, sizeof *ins, cmp_insert);
    }
    if (seq_of && !(map = malloc((t->n_stmts + n_ins + 1) * sizeof *map)))
        goto fail;

    size_t k = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        for (; k < n_ins && ins[k].at <= i; k++)
            if (append_insert(o, &ins[k], map, &n_map) != 0)
                goto fail;
        if (e && e->drop && e->drop[i])
            continue;
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        if (e && e->move_to && e->move_to[i] != TRACE_NONE) {
            /* what the host did itself, submitted to a stream instead */
            s.by = s.queue;
            s.queue = e->move_to[i];
        }
        if (trace_append(o, &s) != 0)
            goto fail;
        if (map)
            map[n_map++] = i;
    }
    for (; k < n_ins; k++)
        if (append_insert(o, &ins[k], map, &n_map) != 0)
            goto fail;
    free(ins);
    if (seq_of)
        *seq_of = map;
    return 0;
fail:
    free(ins);
    free(map);
    return -1;
}

trace *check_trace_edit(const trace *t, const check_edit *e, uint64_t **seq_of)
{
    trace *o = copy_declarations(t);
    if (!o || append_edited(o, t, e, seq_of) != 0) {
        trace_free(o);
        return NULL;
    }
    return o;
}

int check_trace_edit_view(const trace *t, const check_edit *e, trace *view, uint64_t **seq_of)
{
    *view = *t;
    view->stmts = NULL;
    view->n_stmts = view->cap_stmts = 0;
    view->access_pool = NULL;
    view->n_access_pool = view->cap_access_pool = 0;
    view->attr_pool = NULL;
    view->n_attr_pool = view->cap_attr_pool = 0;
    if (append_edited(view, t, e, seq_of) != 0) {
        check_trace_view_free(view);
        return -1;
    }
    return 0;
}

void check_trace_view_free(trace *view)
{
    free(view->stmts);
    free(view->access_pool);
    free(view->attr_pool);
    view->stmts = NULL;
    view->access_pool = NULL;
    view->attr_pool = NULL;
    view->n_stmts = 0;
}

trace *check_trace_filter(const trace *t, const bool *keep)
{
    bool *drop = NULL;
    if (keep) {
        if (!(drop = malloc((t->n_stmts ? t->n_stmts : 1) * sizeof *drop)))
            return NULL;
        for (uint64_t i = 0; i < t->n_stmts; i++)
            drop[i] = !keep[i];
    }
    check_edit e = { .drop = drop };
    trace *o = check_trace_edit(t, &e, NULL);
    free(drop);
    return o;
}
