/*
 * child.h -- one way for the benchmarks to measure a phase: run it in a
 * child process, so that its peak RSS is its own, and print its wall time,
 * CPU time (user + system) and peak RSS on one line.
 */
#ifndef SYNCSIM_BENCH_CHILD_H
#define SYNCSIM_BENCH_CHILD_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs fn(arg) in a child; prints "what: wall, CPU, peak RSS" (and FAILED
 * when fn did not return 0). Returns 0 when it succeeded. */
static inline int bench_in_child(const char *what, int (*fn)(void *), void *arg)
{
    fflush(stdout);
    double t0 = bench_now();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int rc = fn(arg);
        fflush(stdout);
        _exit(rc == 0 ? 0 : 1);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0)
        return -1;
    double dt = bench_now() - t0;
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
                 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("  %-34s %8.2f s wall %8.2f s CPU   peak RSS %7.1f MB%s\n", what, dt, cpu,
           ru.ru_maxrss / 1024.0, ok ? "" : "   (FAILED)");
    return ok ? 0 : -1;
}

#endif
