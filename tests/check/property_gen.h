/*
 * property_gen.h -- the property test's random traces, and the brute-force
 * reference they are generated against, for every test that wants them
 * (test_property.c compares the checker's verdicts with the reference on
 * them; test_minimize_greedy.c compares the minimiser with the plain
 * greedy on them). Built once into the syncsim_propgen library
 * (tests/check/CMakeLists.txt).
 *
 * A prop_trace is a small trace in a form that is easy to generate and to
 * delete statements from: queue 0 .. n_hosts - 1 are host threads, the
 * rest streams; objects (events, flags, barriers, buffers) are numbers.
 * prop_materialise makes it a syncsim trace (line = index + 1).
 *
 *   prop_gen pg = { .rng = 0x5eed };
 *   prop_trace g;
 *   prop_generate(&pg, &g, 1);           well synchronised: clean
 *   trace *t = prop_materialise(&g, NULL);
 *
 * property_ref.c: the reference, an explicit happens-before graph from the
 * spec's rules (queue order, submission, event binding, host syncs, flags
 * by ruling 1, value semaphores, barrier generations), reachability by
 * breadth-first search and a fixpoint that decides what can ever run.
 * property_gen.c: the generator (which asks the reference what is still
 * unordered, and orders it the way a programmer would) and the conversions.
 * Not reentrant: the reference works in static arrays.
 */
#ifndef SYNCSIM_PROPERTY_GEN_H
#define SYNCSIM_PROPERTY_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "traces/trace.h"

#define PROP_MAXS 256
#define PROP_MAXQ 40
#define PROP_MAXB (PROP_MAXQ + 2)   /* barrier ids: 0 the hosts', 1.. a stream's own, PROP_WIDE_B */
#define PROP_WIDE_B (PROP_MAXQ + 1) /* the barrier over every stream (wide traces) */

typedef struct prop_acc {
    int buf;
    uint64_t lo, hi;
    int mode;
} prop_acc;

typedef struct prop_stmt {
    int q;
    trace_kind kind;
    int obj;            /* event / flag / barrier id; sync: stream, -1 all, -2-D device D */
    int by;             /* submitter host (stream statements) */
    int count;          /* barrier */
    bool sem;           /* signal/await of value semaphore `obj` (the setting queue) */
    int peer;           /* send: to=, recv: from= (rank); obj is the tag */
    int val;            /* its set=V / >=V */
    int n_acc;
    prop_acc acc[2];
} prop_stmt;

typedef struct prop_trace {
    int n_hosts, n_streams, n_bufs;
    int dev[PROP_MAXQ]; /* device of each stream queue */
    int n_ranks;        /* > 1: queues named rN. (a merged job, ruling 4) */
    int rank[PROP_MAXQ];
    prop_stmt s[PROP_MAXS];
    int n;
} prop_trace;

static inline bool prop_is_stream(const prop_trace *g, int q)
{
    return q >= g->n_hosts;
}

/* The property test's seeds, one per kind of trace it generates, so that
 * another test can run on the very same traces (test_minimize_greedy.c). */
#define PROP_SEED_CLEAN 0x5eed1234abcdULL   /* well synchronised, 1 to 3 hosts */
#define PROP_SEED_DELETE 0xfeedbeef77ULL    /* the same kind, each sync deleted in turn */
#define PROP_SEED_WIDE 0x3172a5e5ULL        /* wide */
#define PROP_SEED_HOSTS 0x15a11dULL         /* 2 or 3 hosts */
#define PROP_SEED_RICH 0xd1ff5eedULL        /* rich (the differential run's default) */

/* ------------------------------------------------------------------ */
/* The reference (property_ref.c).                                     */

typedef struct prop_verdict {
    bool ran[PROP_MAXS];
    bool racy, hang, mismatch;
    bool uaf[PROP_MAXS];    /* a use after free (ruling 2) */
    bool sem_unordered;     /* a set ran that an earlier set of its semaphore does not HB */
    /* for the generator: statements conflicting with the last one, unordered */
    int unordered_with_last[PROP_MAXS];
    int n_unordered;
} prop_verdict;

/* The reference's verdict on g, into r. Costs O(n^2) per statement that
 * accesses memory; uses static arrays. */
void prop_reference(const prop_trace *g, prop_verdict *r);

/* ------------------------------------------------------------------ */
/* The generator (property_gen.c).                                     */

/* The generator's state: the seed and options the caller sets, counters
 * it reads. One per sequence of traces; the same seed gives the same
 * sequence. */
typedef struct prop_gen {
    uint64_t rng;       /* xorshift64 state: set to a seed other than 0 */
    /* wide traces: 17 to 37 streams (more than a clock keeps flat when
     * shared: vclock.c's deltas and lines are at work) and barriers over
     * every stream, the shape of a collective across ranks */
    bool wide;
    /* rich traces for the differential run: ranks (queues named rN.,
     * ruling 4), send/recv, alloc/free (allocator loops among them),
     * zero-length ranges, signals of a flag behind its own await, behind an
     * await of another flag or submitted after an await by its host, sets
     * of a semaphore behind an await (ruling 1), lone signals and messages */
    bool rich;
    int n_wide_gens;    /* counts barriers over every stream generated */
    int n_handoffs;     /* counts cross-host orders carried by a submission edge */
    /* per trace, reset by prop_generate */
    int n_events, n_flags;
    int sem_val[PROP_MAXQ]; /* the last value each queue set its semaphore to */
} prop_gen;

/* A random number in [0, n), n > 0, from pg's sequence. */
uint32_t prop_rnd(prop_gen *pg, uint32_t n);

/* Fills g with a random trace of at least min_hosts (1 to 3) host queues,
 * ending with every host's `sync all`. Without pg->rich it is well
 * synchronised: the reference (and the checker) find it clean. */
void prop_generate(prop_gen *pg, prop_trace *g, int min_hosts);

/* g as a syncsim trace, without the statements whose drop[] is set (drop
 * may be NULL); statement i keeps line i + 1. The caller frees it. */
trace *prop_materialise(const prop_trace *g, const bool *drop);

/* The deletions the property test makes of g, one at a time: each
 * synchronisation statement alone (a wait, sync, await, barrier arrival or
 * signal), and after a barrier generation's first participant alone, that
 * generation whole. Calls fn with each deletion's drop[] (per statement,
 * PROP_MAXS long) and ctx, in that order. */
typedef void prop_deletion_fn(const prop_trace *g, const bool *drop, void *ctx);
void prop_each_deletion(const prop_trace *g, prop_deletion_fn *fn, void *ctx);

/* out := g without the statements whose drop[] is set. */
void prop_filtered(const prop_trace *g, const bool *drop, prop_trace *out);

/* Writes g without drop[] to stderr in the text format (for a failure). */
void prop_dump(const prop_trace *g, const bool *drop);

#endif
