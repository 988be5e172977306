/*
 * run_families.c -- the one table of backend families of `syncsim run`.
 *
 * A family is what a --devices item names (sched/sched.h): the real
 * devices of this computer (real/family.c) and the simulated machines of
 * device models (sim/family.c). `run --help`, its error messages and the
 * driver (sched/run.c) read this table; a new family is one line here
 * (docs/extending.md). `cuda` is listed always: where syncsim was built
 * without the CUDA toolkit, or finds no GPU, naming it is refused in one
 * line (real/spec.c). Device model names match last: a real device's
 * word is never a model file.
 */
#include "run_families.h"

#include "real/real.h"
#include "sim/sim.h"

const sched_family *const cli_run_families[] = {
    &real_cpustream_family,
    &real_cuda_family,
    &real_cpu_family,
    &sim_family,
    NULL,
};
