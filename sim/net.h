/*
 * net.h -- the cluster network: one interface, several engines.
 *
 * The cluster simulator (cluster.c) runs thousands of GPUs, node by node,
 * and moves bytes between them through a sim_net. Which engine moves them
 * is the user's choice, named by a spec (`--network SPEC`):
 *
 *   builtin:NxG[,key=value...]   syncsim's own flow model (net_builtin.c):
 *                                N nodes of G GPUs, NVLink through a switch
 *                                inside a node, one NIC per GPU into a
 *                                non-blocking fabric between nodes; a
 *                                transfer's rate is the fair share of the
 *                                most loaded link on its path (engine.c).
 *   simgrid:PLATFORM.xml         SimGrid's flow-level models
 *                                (net_simgrid.cpp, built when libsimgrid is
 *                                found): links shared between transfers as
 *                                SimGrid's solver shares them.
 *
 * GPUs are numbered 0 .. n_gpus-1, node-major: GPU g is GPU g % gpus_per_node
 * of node g / gpus_per_node. A platform file names its GPU hosts so that
 * they sort into this order (sim/platforms/README.md says how).
 *
 * Time is integer nanoseconds from 0, the cluster simulator's clock. A
 * network's own clock only moves forward, through next(); start() is called
 * at the time next() last reached.
 *
 * Some engines (SimGrid) can only be driven from inside their own
 * simulation: the simulator therefore hands its whole loop to run(), which
 * calls it back in a context where start() and next() may be used.
 */
#ifndef SYNCSIM_SIM_NET_H
#define SYNCSIM_SIM_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sim_net sim_net;

typedef struct sim_net_iface {
    /* The spec's prefix: "builtin", "simgrid". */
    const char *name;
    /* Opens the network arg describes (the spec after "name:"), filling
     * n->n_gpus, n->gpus_per_node, n->describe and n->ctx. Returns 0, or -1
     * with one line in err (the file, line and what was expected). */
    int (*open)(sim_net *n, const char *arg, char *err, size_t errlen);
    /* Calls body(arg) where start() and next() work, and returns its
     * result. NULL: body is called directly. */
    int (*run)(sim_net *n, int (*body)(void *arg), void *arg);
    /* Starts moving bytes from GPU src to GPU dst (src != dst) at time
     * now. Returns the transfer's id (>= 0, unique until it completes) or
     * -1 when out of memory. */
    int64_t (*start)(sim_net *n, int64_t now, int src, int dst, uint64_t bytes);
    /* Advances the network towards time until (INT64_MAX: as far as the
     * next completion). When a transfer completes at or before until, sets
     * *at and *id of the earliest and returns true, one per call; else
     * returns false, having reached until (or, with no transfer in flight,
     * without moving). */
    bool (*next)(sim_net *n, int64_t until, int64_t *at, int64_t *id);
    /* Bytes that crossed the most loaded link so far, and its name, for the
     * summary. NULL: the engine does not say. */
    uint64_t (*busiest)(const sim_net *n, char *name, size_t len);
    /* Frees ctx. */
    void (*close)(sim_net *n);
} sim_net_iface;

struct sim_net {
    const sim_net_iface *iface;
    void *ctx;
    int n_gpus, gpus_per_node;
    char describe[160];     /* one line: engine, shape, bandwidths */
    /* Set by sim_net_open before open(): the shipped data (DATA, whose
     * devices/ sim_devices_dir finds), where an engine looks for its own
     * (DATA/platforms). An engine loaded as a plugin cannot ask the binary. */
    const char *data_dir;
};

/* Opens the network of spec ("builtin:4x8", "simgrid:sim/platforms/4x8.xml").
 * Returns 0, or -1 with one line in err that lists the engines this build
 * has when the prefix is unknown. SimGrid is a plugin (libsyncsim_simgrid.so,
 * found by sched_plugin_path, loaded on first use with its symbols kept to
 * itself): libsimgrid defines MPI_* for SMPI, which must not take the place
 * of the MPI library of a `run` under mpirun. */
int sim_net_open(sim_net *n, const char *spec, char *err, size_t errlen);
void sim_net_close(sim_net *n);
/* The engines this build has, as "builtin, simgrid". */
const char *sim_net_engines(void);

#endif
