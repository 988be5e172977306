/*
 * sim_int.h -- what the simulator's files share (not public).
 */
#ifndef SYNCSIM_SIM_INT_H
#define SYNCSIM_SIM_INT_H

#include "sim.h"

/* Engine event kinds. */
enum {
    SIM_EV_KICK = 0,        /* a: stream; try to start its head item */
    SIM_EV_ITEM_DONE = 1,   /* a: stream; its running item finished */
    SIM_EV_XFER = 2,        /* a: transfer, b: version */
    SIM_EV_TIMER = 3,       /* a: tag */
};

typedef struct sim_heap_ev {
    int64_t t;
    uint64_t seq;           /* ties break in insertion order */
    uint32_t kind, a, b;
} sim_heap_ev;

typedef struct sim_link {
    double bytes_per_ns;
    int n_active;
    uint64_t bytes;         /* moved over it, for the summary */
} sim_link;

typedef struct sim_xfer {
    double left;            /* bytes still to move */
    double rate;            /* bytes/ns now */
    int64_t last;           /* when left was last brought up to date */
    int links[3];
    int n_links;
    uint32_t version;       /* bumped whenever its finish is rescheduled */
    bool active;
    int owner;              /* who to tell: stream index, or -1 - host slot */
    int64_t done_at;
} sim_xfer;

struct sim_engine {
    int64_t now;
    uint64_t seq;
    sim_heap_ev *heap;
    size_t n_heap, cap_heap;
    sim_link *links;
    int n_links, cap_links;
    sim_xfer *xfers;
    int n_xfers, cap_xfers;
    int *free_xfers;        /* finished transfers' slots, reused */
    int n_free, cap_free;
    int *active;            /* indices of active transfers */
    int n_active, cap_active;
};

void sim_engine_init(sim_engine *e);
void sim_engine_release(sim_engine *e);
int sim_engine_push(sim_engine *e, int64_t t, uint32_t kind, uint32_t a, uint32_t b);
/* Pops the earliest event into *ev and advances now; returns false when empty. */
bool sim_engine_pop(sim_engine *e, sim_heap_ev *ev);
/* Starts a transfer now; returns its id or -1. */
int sim_engine_xfer_start(sim_engine *e, const int *links, int n_links, uint64_t bytes, int owner);
/* Handles an SIM_EV_XFER event: true when it finished the transfer (stale
 * versions are ignored). Rebalances the others. */
bool sim_engine_xfer_event(sim_engine *e, const sim_heap_ev *ev);

/* ------------------------------------------------------------------ */
/* The world (world.c), used by the simulated backend (backend_sim.c). */

#define SIM_MAX_GPUS 16

typedef enum { SIM_IT_KERNEL, SIM_IT_COPY, SIM_IT_RECORD, SIM_IT_WAIT, SIM_IT_COLL } sim_item_kind;

/* One piece of work queued on a stream. */
typedef struct sim_item {
    uint8_t kind;
    int8_t n_links;
    int16_t engine;         /* copy engine index */
    int links[3];
    int64_t ready;          /* not before (submission time) */
    int64_t dur;            /* kernel time; copies: latency */
    int64_t t0;             /* when the stream reached it, -1 before */
    uint64_t bytes;
    uint32_t event;         /* record/wait: sim event index */
    uint64_t gen;           /* record: the record number; wait: the one it waits for */
    uint32_t coll;          /* collective instance */
    sched_ticket ticket;    /* its statement: report its times when done */
} sim_item;

typedef struct sim_stream {
    sim_item *items;
    uint64_t head, tail, cap;   /* ring: positions are absolute, cap a power of two */
    bool busy, blocked;
    int64_t kick_at;
    int64_t busy_ns, compute_ns;
    uint32_t coll_gen;          /* collectives reached so far */
} sim_stream;

typedef struct sim_event_state {
    uint64_t completed;         /* highest record number completed */
    int *waiters;               /* streams blocked on it */
    int n_waiters, cap_waiters;
} sim_event_state;

typedef struct sim_coll {
    int n_ranks, arrived;
    int streams[SIM_MAX_GPUS];
    int64_t cost;
} sim_coll;

typedef struct sim_backend_ctx {
    struct sim_world *w;
    int device;                 /* GPU index, -1 for the CPU */
    char name[16], trace_name[16];
} sim_backend_ctx;

/* A simulated buffer knows where its bytes are (its backend is whichever
 * the scheduler drives, a recording's wrapper perhaps). */
typedef struct sim_buffer {
    sched_buffer base;
    int device;                 /* GPU index, -1 for host memory */
} sim_buffer;

struct sim_world {
    sim_model m;
    sim_engine e;
    int n_gpus;
    int64_t host_t, host_busy;
    sim_stream streams[SIM_MAX_GPUS];
    int copy_busy[SIM_MAX_GPUS * 3];        /* stream using each copy engine, -1 */
    int *copy_waiters[SIM_MAX_GPUS * 3];
    int n_copy_waiters[SIM_MAX_GPUS * 3], cap_copy_waiters[SIM_MAX_GPUS * 3];
    sim_event_state *events;
    uint32_t n_events, cap_events;
    sim_coll *colls;
    uint32_t n_colls, cap_colls;
    int link_down[SIM_MAX_GPUS], link_up[SIM_MAX_GPUS];
    int link_p2p[SIM_MAX_GPUS][SIM_MAX_GPUS];
    char link_names[64][32];
    int host_xfer;              /* transfer the host blocks on, -1 */
    bool host_xfer_done;
    bool hung;
    sim_stats stats;
    sched_backend backends[SIM_MAX_GPUS + 1];
    sched_backend *backend_ptrs[SIM_MAX_GPUS + 1];
    sim_backend_ctx ctxs[SIM_MAX_GPUS + 1];
};

/* Queues an item on GPU d's stream (ready = host time). */
int sim_submit(struct sim_world *w, int d, sim_item *it);
/* Host blocking: until GPU d's stream drained / event gen completed / the
 * host's transfer done. Return 0, or -1 when it never happens (hang). */
int sim_block_stream(struct sim_world *w, int d);
int sim_block_event(struct sim_world *w, uint32_t ev, uint64_t gen);
int sim_host_transfer(struct sim_world *w, const int *links, int n_links, uint64_t bytes);
uint32_t sim_event_alloc(struct sim_world *w);
uint32_t sim_coll_instance(struct sim_world *w, uint32_t gen, int n_ranks, int64_t cost);
/* The host spends dt of its time. */
void sim_host_spend(struct sim_world *w, int64_t dt);
/* backend_sim.c */
void sim_backends_init(struct sim_world *w);

#endif
