/*
 * net.c -- the cluster network's one table of engines (net.h).
 *
 * A spec names its engine by its prefix, "builtin:4x8" or
 * "simgrid:FILE.xml"; the engines this build has are the rows of engines[]
 * below, and that table is the only place an engine is chosen.
 */
#include "net.h"

#include "sched/sched.h"
#include "sim.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

extern const sim_net_iface sim_net_builtin;
static const sim_net_iface *const engines[] = { &sim_net_builtin };
#define N_ENGINES (sizeof engines / sizeof engines[0])

#ifdef SYNCSIM_HAVE_SIMGRID
#define SIMGRID_LIB "libsyncsim_simgrid.so"
static pthread_once_t simgrid_once = PTHREAD_ONCE_INIT;
static const sim_net_iface *simgrid_iface;
static char simgrid_why[400];

/* Loads the SimGrid engine, once (RTLD_LOCAL: its MPI_* stay its own). */
static void simgrid_load(void)
{
    char path[PATH_MAX + 64];
    sched_plugin_path(SIMGRID_LIB, "SYNCSIM_LIB_DIR", path, sizeof path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(simgrid_why, sizeof simgrid_why, "cannot load the SimGrid engine: %.300s",
                 dlerror());
        return;
    }
    simgrid_iface = (const sim_net_iface *)dlsym(h, "sim_net_simgrid");
    if (!simgrid_iface)
        snprintf(simgrid_why, sizeof simgrid_why, "%.300s has no sim_net_simgrid", path);
}
#endif

/* The engine named by spec[0..len), or NULL with why in err. */
static const sim_net_iface *engine_of(const char *spec, size_t len, char *err, size_t errlen)
{
    for (size_t i = 0; i < N_ENGINES; i++)
        if (strlen(engines[i]->name) == len && strncmp(engines[i]->name, spec, len) == 0)
            return engines[i];
    if (len == 7 && strncmp(spec, "simgrid", 7) == 0) {
#ifdef SYNCSIM_HAVE_SIMGRID
        pthread_once(&simgrid_once, simgrid_load);
        if (simgrid_iface)
            return simgrid_iface;
        snprintf(err, errlen, "network '%s': %s", spec, simgrid_why);
#else
        snprintf(err, errlen, "network '%s': this syncsim was built without SimGrid (install "
                 "libsimgrid-dev and rebuild); engines here: %s", spec, sim_net_engines());
#endif
        return NULL;
    }
    snprintf(err, errlen, "network '%s': unknown engine '%.*s' (expected ENGINE:ARGS; "
             "engines here: %s, e.g. builtin:4x8)", spec ? spec : "", (int)len, spec ? spec : "",
             sim_net_engines());
    return NULL;
}

const char *sim_net_engines(void)
{
#ifdef SYNCSIM_HAVE_SIMGRID
    return "builtin, simgrid";
#else
    return "builtin";
#endif
}

int sim_net_open(sim_net *n, const char *spec, char *err, size_t errlen)
{
    memset(n, 0, sizeof *n);
    const char *colon = spec ? strchr(spec, ':') : NULL;
    size_t len = colon ? (size_t)(colon - spec) : (spec ? strlen(spec) : 0);
    const sim_net_iface *e = engine_of(spec ? spec : "", len, err, errlen);
    if (!e)
        return -1;
    /* DATA: the parent of the devices directory */
    static char data[PATH_MAX];
    snprintf(data, sizeof data, "%s", sim_devices_dir());
    n->iface = e;
    n->data_dir = dirname(data);
    if (e->open(n, colon ? colon + 1 : "", err, errlen) != 0) {
        memset(n, 0, sizeof *n);
        return -1;
    }
    return 0;
}

void sim_net_close(sim_net *n)
{
    if (n->iface && n->iface->close)
        n->iface->close(n);
    memset(n, 0, sizeof *n);
}
