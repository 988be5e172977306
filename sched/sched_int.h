/*
 * sched_int.h -- what the scheduler's files share (not public).
 */
#ifndef SYNCSIM_SCHED_INT_H
#define SYNCSIM_SCHED_INT_H

#include "sched.h"

#define SCHED_MAX_BACKENDS 16
#define SCHED_MAX_COPIES 8

/* One allocation of the liveness allocator, kept for the overlap check. */
typedef struct sched_alloc_rec {
    int32_t tensor;
    int backend;
    uint64_t offset, size;
    int32_t born, dies;             /* node positions: live in [born, dies] */
    int32_t inplace_of;             /* ggml_alloc: the tensor whose block it took, -1 */
} sched_alloc_rec;

struct sched {
    sched_backend *backends[SCHED_MAX_BACKENDS];
    int n_backends;
    sched_options opts;
    const sched_policy *policy;
    const sched_copy_traits *copy[SCHED_MAX_BACKENDS];  /* NULL: syncsim's placement */
    int n_copies;
    int cur_copy;
    int next_copy;                  /* ggml_slots: the slot the next allocation takes */
    bool is_alloc;                  /* sched_alloc_graph ran for the coming evaluation */
    bool reserved_now;              /* ... and laid the graph out anew (ggml_alloc) */
    uint64_t n_evals;

    sched_graph *graph;
    int32_t *order;                 /* node indices (op != NONE) in execution order */
    int32_t n_order;

    sched_split *splits;
    int n_splits;
    int n_copy_tensors;

    sched_buffer *weights[SCHED_MAX_BACKENDS];
    sched_buffer *arena[SCHED_MAX_BACKENDS];
    bool shared;                    /* opts.share: its events and arenas are not ours */
    /* ggml_alloc: the graph as ggml-alloc sees it (graph_copy: per split,
     * each input's dependency and copy, then its nodes; leafs), for its
     * reallocation test (sched.c, needs_realloc): per node position its
     * backend and bytes. In the scheduler that owns the shared state: the
     * one whose graph ggml-alloc last reserved for, and the one allocated
     * last (NULL: none yet). */
    int32_t sig_n_nodes, sig_n_leafs;
    int *sig_backend;
    uint64_t *sig_bytes;
    const struct sched *reserved, *last_alloc;
    int32_t n_orig;                 /* tensors before the copies were added */
    int32_t *copy_map;              /* [tensor * n_backends + backend] -> first copy, -1 */
    uint64_t arena_size[SCHED_MAX_BACKENDS];
    sched_alloc_rec *allocs;
    int32_t n_allocs;
    /* ggml_slots with n_copies > 1: [tensor * n_copies + c], the host copy
     * of user input `tensor` for slot c (ggml's graph-input copies); NULL
     * when the inputs have one host buffer each. */
    sched_buffer **in_slot;
    /* Under ggml's allocator (policy.ggml_alloc) the user inputs live in
     * the CPU's arena, as ggml-alloc places them: [tensor * n_copies + c],
     * the offset of user input `tensor`'s slot c (UINT64_MAX: no input);
     * in_slot is then NULL. */
    uint64_t *in_off;
    /* The trace views of those inputs (ggml_alloc, n_copies > 1) and of the
     * views of inputs, per slot, once declared ([tensor * n_copies + c],
     * TRACE_NONE before). */
    uint32_t *in_view;

    /* One event per (backend, copy slot); NULL when the backend has none. */
    sched_event *events[SCHED_MAX_BACKENDS][SCHED_MAX_COPIES];
    sched_event *last_event[SCHED_MAX_BACKENDS]; /* most recently recorded */
    int last_split_backend;         /* backend of the previous split run, -1 */
    /* The event a copy from device a to device b hands over with; made on
     * first use. */
    sched_event *xfer[SCHED_MAX_BACKENDS][SCHED_MAX_BACKENDS];

    /* All-reduce: per tensor, its rank and group size (all_reduce nodes);
     * per backend, the wire buffer of its bf16 all-reduces (NULL: none). */
    int16_t *ar_rank, *ar_n;
    sched_buffer *wire[SCHED_MAX_BACKENDS];
    /* Expanded all-reduces (allreduce.c): per tensor, the strategy its
     * group runs (as picked) and, for its all_reduce nodes, the next
     * member in rank order (-1 last), its inbox, add and bf16 wire tensors
     * (-1 none) and, while the group gathers, where its split resumes
     * (-1: not arrived); per backend the inbox buffer and the event that
     * says its inbox was consumed. */
    uint8_t *ar_algo;
    int32_t *ar_next, *ar_inbox, *ar_add, *ar_wire, *ar_resume_split, *ar_resume_k;
    sched_buffer *inbox[SCHED_MAX_BACKENDS];
    sched_event *ar_free[SCHED_MAX_BACKENDS];

    /* MoE used-expert copies: the host copy of the ids read back (grown on
     * demand), the ids tensor read last in this evaluation (-1: none;
     * ggml's prev_ids_tensor), its values and the experts they use, and
     * the trace views of the byte ranges copied, declared once. */
    sched_buffer *moe_ids_buf;
    int32_t moe_prev_ids;
    int32_t *moe_ids;
    uint8_t *moe_used;
    int64_t moe_n_ids, moe_n_used;
    struct { const char *of; uint32_t parent; uint64_t offset, size; uint32_t view; } *moe_views;
    int moe_n_views;
};

/* assign.c */
sched_status sched_assign_passes(sched *s, sched_graph *g, char *err, size_t err_cap);
bool sched_backend_supports(const sched *s, int b, const sched_tensor *t);
/* split.c */
sched_status sched_make_splits(sched *s, char *err, size_t err_cap);
void sched_free_splits(sched *s);
/* alloc.c */
sched_status sched_allocate(sched *s, char *err, size_t err_cap);
/* sched.c: a copy between backends as the split inputs' (1 queued, 0
 * declined, -1 error); the nodes of split i from entry k on, then its
 * record (all-reduce groups resume the splits they held). */
int sched_copy_between(sched *s, int sb, int b, sched_tensor *src, sched_tensor *dst);
/* Source i of node as split x reads it (its copy when a split input); the
 * same for the scheduler's current slot. */
int32_t sched_exec_src_of(const sched_exec *x, int32_t node, int i);
int32_t sched_exec_src_of_sched(sched *s, int32_t node, int i);
sched_status sched_run_split_from(sched *s, int i, int k, uint64_t eval);
/* allreduce.c */
sched_status sched_ar_plan(sched *s, char *err, size_t err_cap);
void sched_ar_free(sched *s);
bool sched_ar_is_expanded(const sched *s, int32_t node);
/* Node (an expanded all_reduce of split i, entry k) arrives: *held when
 * the split must wait for the group's other ranks (the group then runs
 * and resumes it); otherwise the group ran now. */
sched_status sched_ar_arrive(sched *s, int32_t node, int i, int k, uint64_t eval, bool *held);
/* Splits still held at the end of an evaluation (a group missing a rank). */
int sched_ar_held(const sched *s);

#endif
