/*
 * record_int.h -- what the recording's two files share (not public):
 * record.c (statements, ids, times) and record_wrap.c (the wrapped calls).
 */
#ifndef SYNCSIM_SCHED_RECORD_INT_H
#define SYNCSIM_SCHED_RECORD_INT_H

#include "sched.h"

#include <pthread.h>

#define REC_MAX_BACKENDS 16
#define REC_ACC (SCHED_MAX_SRC + 1)     /* accesses kept inline in a slot */
#define REC_ATTR 6
#define REC_SMALL 4096                  /* numbers interned once, by value */
#define REC_GRAPHS 8
#define REC_SLOTS 8                     /* pipeline slots (sched_options.n_copies <= 8) */

/* A statement in flight: ids of the recording's own trace. */
typedef struct rec_slot {
    trace_stmt s;
    trace_access acc[REC_ACC];
    trace_attr attr[REC_ATTR];
    trace_access *more;             /* more than REC_ACC accesses (owned) */
    bool timed;
} rec_slot;

/* What a node's statements need, made on first use. */
typedef struct node_info {
    bool ready;
    uint8_t n_cost;
    uint32_t label, label_to, label_from;
    trace_attr cost[3];             /* op=, flops= / flops_f16=, bytes= */
} node_info;

typedef struct graph_cache {
    const sched_graph *g;
    const void *sched;              /* the scheduler that runs it */
    const sched_tensor *tensors;
    int32_t n;
    node_info *info;
    /* Per pipeline slot, each node's accesses (REC_ACC a node) and their
     * number (0: not made yet): they depend on the slot alone. */
    trace_access *acc[REC_SLOTS];
    uint8_t *n_acc[REC_SLOTS];
} graph_cache;

typedef struct wrapped {
    sched_backend outer;            /* what the scheduler drives; outer.ctx = this */
    sched_backend_iface iface;      /* inner's members, wrapped where inner has them */
    sched_backend *inner;
    struct sched_rec *rec;
    bool stream;                    /* an asynchronous device with a stream queue */
    uint32_t queue;                 /* its stream queue, or the host's */
    char dev[32];                   /* its device's trace name */
    int n_workers;
    uint32_t *worker_q;             /* [0] the host, [1..n_workers] its threads */
    uint32_t pool;                  /* the barrier name of its threads */
    sched_ticket *tickets;          /* 3 per node entry of the exec in progress */
    int cap_tickets;
    /* Worker level: the exec in progress and each node entry's accesses. */
    const sched_exec *x;
    trace_access *x_acc;            /* REC_ACC per entry */
    uint8_t *x_nacc;
    int cap_x;
} wrapped;

struct sched_rec {
    sched_rec_opts o;
    trace *t;                       /* declarations and strings, our ids */
    sched_sink self;
    pthread_mutex_t lock;           /* recursive; taken only when threaded */
    /* Our ids -> the sink's. */
    uint32_t *str_map, *buf_map, *q_map;
    uint32_t cap_str, cap_buf, cap_q;
    bool identity;
    /* Statements in flight: positions [head, tail) of a ring. */
    rec_slot *ring;
    uint64_t head, tail, cap;
    uint64_t seq0;                  /* the sink's seq of position 0 */
    bool have_seq0;
    uint32_t host;
    uint64_t eval;
    uint32_t token;                 /* the value of token= for eval */
    bool token_ok;
    int split;                      /* the split the scheduler is in, -1 */
    uint32_t k_token, k_split, k_flops, k_flops_f16, k_bytes, k_overhead, k_algorithm, k_op;
    uint32_t v_butterfly, o_tp, v_allreduce, v_allreduce_bf16;
    uint32_t small[REC_SMALL];      /* id + 1 of small numbers */
    wrapped *w[REC_MAX_BACKENDS];
    int n_w;
    graph_cache gc[REC_GRAPHS];
    int n_gc;
    sched_ticket cur;               /* the ticket of the call in progress */
    trace_pattern *observer;
    trace_stmt blank;               /* trace_stmt_init's, copied into new statements */
};

/* record.c: the lock (taken only when threaded; recursive). */
void rec_lock(sched_rec *r);
void rec_unlock(sched_rec *r);
/* Interns s in our trace (and the sink, when new); TRACE_NONE when out of memory. */
uint32_t rec_intern(sched_rec *r, const char *s);
uint32_t rec_declare_queue(sched_rec *r, const char *name, trace_queue_kind kind,
                           const char *device);
uint32_t rec_declare_root(sched_rec *r, const char *name, uint64_t size, trace_loc loc,
                          const char *device, bool pinned);
/* The interned decimal of v (small ones once a run). */
uint32_t rec_num(sched_rec *r, uint64_t v);
/* A new statement of kind on queue (a stream's is submitted by=host), at
 * position *pos; NULL when out of memory. */
rec_slot *rec_stmt(sched_rec *r, uint32_t queue, bool stream, trace_kind kind, uint64_t *pos);
rec_slot *rec_slot_at(sched_rec *r, uint64_t pos);
/* Drops the last reservation (a call that made no statement after all). */
void rec_unreserve(sched_rec *r, uint64_t pos);
void rec_add_attr(rec_slot *slot, uint32_t key, uint32_t value);
/* token= of the current evaluation. */
void rec_add_token(sched_rec *r, rec_slot *slot);
/* split= of the split the scheduler is in (when in one), token=. */
void rec_add_place(sched_rec *r, rec_slot *slot);
/* Feeds a made statement to the observer (in submission order). */
void rec_observe(sched_rec *r, rec_slot *slot);
/* The times of the statement at pos: held or passed on, or patched. */
void rec_done_at(sched_rec *r, uint64_t pos, int64_t t, int64_t dur);
/* The end of a call: without hold, what it made goes to the sink now. */
void rec_call_end(sched_rec *r);
/* record_wrap.c */
void rec_set_eval(sched_rec *r, uint64_t eval);
void rec_cache_free(graph_cache *gc);
void rec_wrapped_free(wrapped *w);

#endif
