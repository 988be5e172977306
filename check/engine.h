/*
 * engine.h -- the happens-before engine's state, shared by the files that
 * make it (not a public header; the checker's other files see check_engine
 * through internal.h only):
 *
 *   hb.c          the rules at work: queues advancing like a scheduler,
 *                 clocks, accesses against the shadow (its head comment
 *                 states the rules)
 *   hang.c        when the input ends: what each blocked queue waits for,
 *                 cycles, and the one hang finding
 *   mismatch.c    barrier and collective generations whose participants
 *                 disagree
 *   checkpoint.c  the minimiser's copies of an engine, their comparison,
 *                 and dropping records and flags no later statement uses
 */
#ifndef SYNCSIM_CHECK_ENGINE_H
#define SYNCSIM_CHECK_ENGINE_H

#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* A small growable list of queue ids (who waits for something). */
typedef struct qlist {
    uint32_t *q;
    uint32_t n, cap;
} qlist;

static inline int qlist_add(qlist *l, uint32_t q)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (l->q[i] == q)
            return 0;
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 4;
        uint32_t *p = realloc(l->q, cap * sizeof *p);
        if (!p)
            return -1;
        l->q = p;
        l->cap = cap;
    }
    l->q[l->n++] = q;
    return 0;
}

/* A `record E` as bound by waits: its snapshot once it has run. */
typedef struct ev_node {
    uint32_t refs;
    bool executed;
    check_snap snap;
    uint32_t name, queue, line;
    uint64_t seq;
    qlist waiters;
} ev_node;

#define FLAG_UNKNOWN UINT64_MAX

/* A flag. Rule 6 puts every signal of a flag before what follows any await
 * of it, so an await passes once every signal has run: all `total` of them
 * when the trace's signal counts are known (check_engine_set_flag_totals),
 * else every signal fed so far. Streaming that way is exact unless a signal
 * is fed after an await already passed on another queue; that sets the
 * engine's `inexact`, and check_trace runs a second pass with the counts of
 * the first. Ruling 1 exempts the signals ordered after an await: those are
 * still pending when the input ends, and hb.c's release_awaits releases an
 * await one of whose signals has run and whose remaining signals all follow
 * it (after.c). */
typedef struct flag_node {
    uint64_t fed, ran;              /* signals read, signals run */
    uint64_t total;                 /* signals in the whole trace, or FLAG_UNKNOWN */
    bool passed;                    /* an await has passed */
    uint32_t passed_q;              /* the queue of every await that passed; TRACE_NONE: several */
    check_vc *vc;                   /* the signals that ran, joined */
    uint32_t name;
    qlist waiters;
    /* A value semaphore (rule 6b): its sets in the order they ran, each
     * with its value and the setter's snapshot; the last one as a
     * statement for the semaphore-race finding. */
    uint64_t n_sets, cap_sets;
    uint64_t *values;
    check_snap *snaps;
    trace_stmt_ref last_set;
} flag_node;

/* Frees a flag node and what it holds. */
static inline void flag_node_free(flag_node *f)
{
    check_vc_unref(f->vc);
    for (uint64_t i = 0; i < f->n_sets; i++)
        check_vc_unref(f->snaps[i].vc);
    free(f->values);
    free(f->snaps);
    free(f->waiters.q);
    free(f);
}

static inline bool flag_ready(const flag_node *f)
{
    uint64_t need = f->total != FLAG_UNKNOWN ? f->total : f->fed;
    return need > 0 && f->ran >= need;
}


/* A host sync's need: stream `stream` has run its first `n` statements. */
typedef struct sync_req {
    uint32_t refs;
    uint32_t stream;
    uint64_t n;
    bool filled;
    check_snap snap;
    uint32_t waiter;                /* the host, TRACE_NONE until it blocks */
    struct sync_req *next;          /* the stream's FIFO */
} sync_req;

struct check_pend;

typedef struct arrival {
    uint32_t queue;
    check_snap snap;
    struct check_pend *pend;
} arrival;

/* One generation of a barrier or collective. */
typedef struct gen_state {
    uint32_t refs;                  /* the generation table and each bound statement */
    uint64_t key;
    uint32_t name;
    bool collective;
    uint64_t gen;
    uint64_t count;                 /* participants expected (first arrival's) */
    uint32_t n_read, n_arrived;
    bool released;
    arrival *arr;
    uint32_t cap_arr;
} gen_state;

/* One synchronisation target of a host sync: a request or a snapshot taken
 * when the sync was read (the stream had already run everything). */
typedef struct sync_item {
    sync_req *req;
    check_snap snap;
} sync_item;

/* A statement fed but not yet done with. hb.c's pend_init sets every field
 * (not a memset: see there): a new field needs its line in it. */
typedef struct check_pend {
    struct check_pend *next;
    trace_stmt s;
    bool heap;                      /* allocated; s.access owned */
    bool removed;
    bool marker;                    /* in a host's list: submits `target` when reached */
    bool unsubmitted;               /* in a stream's list: its host has not submitted it */
    struct check_pend *target;      /* marker: the statement it submits */
    bool has_sub, sub_joined;
    check_snap sub;
    ev_node *bind;                  /* wait: the record it binds to */
    ev_node *rec;                   /* record: its node */
    flag_node *flag;                /* signal/await; send/recv: its message's */
    uint64_t match;                 /* send/recv: the message id (trace_bind.match) */
    gen_state *gen;                 /* barrier/collective */
    bool arrived, done;
    bool forced;                    /* await: released at the end by ruling 1 (after.c) */
    bool decided;                   /* await: waits for exactly waited[] (after.c) */
    uint64_t *waited;               /* seqs of the pending signals it waits for, sorted */
    uint32_t n_waited;
    bool after_mark;                /* after.c: ordered after the statement asked about */
    uint32_t after_idx;             /* after.c: its index in the marking's table */
    uint64_t after_pos;             /* after.c: its position in its queue */
    sync_item *items;               /* sync */
    uint32_t n_items;
    sync_item item_local[2];
} check_pend;

typedef struct qstate {
    check_vc *vc;
    uint32_t own;
    check_pend *head, *tail;
    uint32_t n_pend;
    uint64_t n_read;                /* statements of this queue fed so far */
    check_vc *sub_vc;               /* last submission clock joined (a reference) */
    sync_req *req_head, *req_tail;
    uint32_t n_markers;             /* host: submit markers in its list */
    bool in_work;
    bool is_stream;
    uint32_t device;
} qstate;

struct check_engine {
    const trace *t;
    check_report *rep;
    const bool *remove;
    qstate *q;
    uint32_t n_q, cap_q;
    check_shadow **shadow;          /* per buffer index (roots only used) */
    uint32_t n_shadow;
    trace_binder *bind;             /* rules 3, 5, 7: which record, which generation */
    trace_u64map events;               /* record seq -> ev_node* (records a wait may still bind to) */
    trace_u64map flags;                /* flag name -> flag_node* */
    const trace_u64map *flag_totals;   /* flag name -> signals in the trace; NULL: unknown */
    const trace_u64map *record_last;   /* record seq -> seq of the last wait bound to it */
    const trace_u64map *flag_last;     /* flag name -> seq of its last signal or await */
    bool inexact;                   /* a signal came after an await of its flag passed */
    trace_u64map gens;                 /* (name, coll, gen) -> gen_state* */
    trace_u64map mismatched;           /* (name, coll) -> 1 once reported */
    uint32_t *work;
    uint32_t n_work, cap_work, work_head;
    uint64_t fed;
    uint32_t only_host;             /* cache of the only host queue */
    bool oom;
    /* dirty tracking for the minimiser */
    bool track;
    uint8_t *dirty_root;
    trace_u64map dirty_events, dirty_flags;
    /* the access being checked */
    uint32_t cur_q;
    check_vc *cur_vc;
    uint32_t memo_q, memo_t;        /* cur_vc's entry of queue memo_q (TRACE_NONE: none) */
    check_site cur_site;
    uint8_t cur_mode;
    trace_kind cur_kind;
    uint32_t cur_root;
    bool cur_unjudged;              /* a piece's use-after-free verdict needed forgotten marks */
};

/* hb.c: what the others share of it. */
void check_snap_release(check_snap *s);
void check_ev_unref(ev_node *n);

/* after.c: ruling 1 when nothing can run. check_after_mark sets after_mark
 * on every pending statement that can only run after pending statement
 * `from` (ruling 1's "ordered after": through queue order, submission,
 * events, syncs, generations, messages, and, through_awaits, awaits and
 * semaphore waits whose every possible signal follows `from`) and clears
 * it on the others. Without through_awaits it is what `from` holds back
 * directly: hang.c's explanations (what a blocked await waits for).
 * check_after_release sets `forced` on each await at the head of its queue
 * that ruling 1 releases now (a signal of its flag has run, and each one
 * that has not is ordered after it) and returns how many. Both 0 or more,
 * or -1 (OOM). */
int check_after_mark(check_engine *e, const check_pend *from, bool through_awaits);
int check_after_release(check_engine *e);

/* hang.c: reports the queues that can never advance (one finding). */
void check_engine_report_hang(check_engine *e);

/* mismatch.c: why an arrival does not fit its generation. */
typedef enum {
    MISMATCH_KIND,      /* collectives: another KIND or size= */
    MISMATCH_COUNT,     /* barriers: another count= */
    MISMATCH_EXTRA,     /* more arrivals than count= (size= for collectives) */
} check_mismatch;
/* Reports, once per barrier or communicator, that arrival s (bound as bd)
 * does not fit its generation. */
void check_engine_report_mismatch(check_engine *e, const trace_bind *bd, const trace_stmt *s,
                                  check_mismatch why);

#endif
