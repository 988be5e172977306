/*
 * net.c -- the cluster network's one table of engines (net.h).
 *
 * A spec names its engine by its prefix, "builtin:4x8" or
 * "simgrid:FILE.xml"; the engines this build has are the rows of engines[]
 * below, and that table is the only place an engine is chosen.
 */
#include "net.h"

#include <stdio.h>
#include <string.h>

extern const sim_net_iface sim_net_builtin;
#ifdef SYNCSIM_HAVE_SIMGRID
extern const sim_net_iface sim_net_simgrid;   /* net_simgrid.cpp (helper "simgrid") */
#endif
static const sim_net_iface *const engines[] = { &sim_net_builtin,
#ifdef SYNCSIM_HAVE_SIMGRID
    &sim_net_simgrid,
#endif
};
#define N_ENGINES (sizeof engines / sizeof engines[0])

const char *sim_net_engines(void)
{
    static char list[128];
    if (!list[0])
        for (size_t i = 0; i < N_ENGINES; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     engines[i]->name);
    return list;
}

int sim_net_open(sim_net *n, const char *spec, char *err, size_t errlen)
{
    memset(n, 0, sizeof *n);
    const char *colon = spec ? strchr(spec, ':') : NULL;
    size_t len = colon ? (size_t)(colon - spec) : (spec ? strlen(spec) : 0);
    for (size_t i = 0; i < N_ENGINES; i++)
        if (strlen(engines[i]->name) == len && strncmp(engines[i]->name, spec, len) == 0) {
            n->iface = engines[i];
            if (engines[i]->open(n, colon ? colon + 1 : "", err, errlen) != 0) {
                memset(n, 0, sizeof *n);
                return -1;
            }
            return 0;
        }
    if (len == 7 && strncmp(spec, "simgrid", 7) == 0)
        snprintf(err, errlen, "network '%s': this syncsim was built without SimGrid (install "
                 "libsimgrid-dev and rebuild); engines here: %s", spec, sim_net_engines());
    else
        snprintf(err, errlen, "network '%s': unknown engine '%.*s' (expected ENGINE:ARGS; "
                 "engines here: %s, e.g. builtin:4x8)", spec ? spec : "", (int)len,
                 spec ? spec : "", sim_net_engines());
    return -1;
}

void sim_net_close(sim_net *n)
{
    if (n->iface && n->iface->close)
        n->iface->close(n);
    memset(n, 0, sizeof *n);
}
