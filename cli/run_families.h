/*
 * run_families.h -- the backend families `syncsim run` knows (run_families.c).
 */
#ifndef SYNCSIM_CLI_RUN_FAMILIES_H
#define SYNCSIM_CLI_RUN_FAMILIES_H

#include "sched/sched.h"

/* NULL-terminated, in the order a --devices word is matched. */
extern const sched_family *const cli_run_families[];

#endif
