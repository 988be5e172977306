/*
 * bench_capture.c -- the trace path on the shape of captured traces
 * (bench/shapes.h: 8 streams on 4 devices, 2 host threads, 4096 buffers,
 * ~1.5 accesses per statement, times, a distinct label per statement),
 * measured the way a user meets it: the real `syncsim` commands, each in
 * its own process, timed wall-clock with its own peak RSS.
 *
 *   bench_capture [--stmts N] [--dir DIR] [--shape NAME] [--repeat-labels] [--runs K]
 *                 [--report] [--minimize] [--advise] [--keep]
 *
 * 1. writes N statements of the shape as a text trace (DIR/capture.trace);
 * 2. `syncsim import` it into DIR/capture.db: statements/s, bytes/statement
 *    on disk, peak RSS;
 * 3. `syncsim check` the database end to end: statements/s, peak RSS;
 * 4. with --report, `syncsim report` of the run (timeline included);
 * 5. with --minimize, `syncsim minimize -q` of the database, and with
 *    --advise, `syncsim advise` of it (issue 35's targets: 1 M statements
 *    in 5 s and 30 s): wall and CPU time, statements re-checked (minimize),
 *    peak RSS and RSS per statement (memory should grow linearly).
 * --shape picks a variant of the shape (bench/shapes.h: whole, labels,
 * arenas, tokens, ragged, scatter, worst; default whole); --repeat-labels
 * gives every statement of a kind the same label (the kind shape of the
 * earlier benchmarks), for comparison. --runs K runs each command K times
 * and prints the medians of wall and CPU time (CPU time is the figure to
 * compare on a shared machine). --keep leaves the files
 * in DIR (to profile one command on them). Every figure is measured by this
 * run.
 */
#include "bench/shapes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs argv (stdout to /dev/null); returns its exit status, wall time, CPU
 * time (user + system) and peak RSS (KiB). */
static int run_once(char *const argv[], double *wall, double *cpu, long *rss_kb)
{
    fflush(stdout);             /* or the child prints it again */
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) < 0)
        return -1;
    *wall = now() - t0;
    *cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    *rss_kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs argv `runs` times (before each, `prepare` when not NULL, e.g. to
 * remove the output); the medians of wall and CPU time, the largest peak
 * RSS and the last exit status. */
static int run(char *const argv[], int runs, const char *prepare, double *wall, double *cpu,
               long *rss_kb)
{
    double w[16], c[16];
    int st = -1;
    *rss_kb = 0;
    if (runs > 16)
        runs = 16;
    for (int k = 0; k < runs; k++) {
        long rss = 0;
        if (prepare)
            unlink(prepare);
        st = run_once(argv, &w[k], &c[k], &rss);
        if (rss > *rss_kb)
            *rss_kb = rss;
    }
    qsort(w, (size_t)runs, sizeof w[0], cmp_double);
    qsort(c, (size_t)runs, sizeof c[0], cmp_double);
    *wall = w[runs / 2];
    *cpu = c[runs / 2];
    return st;
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

int main(int argc, char **argv)
{
    uint64_t n = 2000000;
    const char *dir = "/tmp";
    bool repeat = false, report = false, keep = false, minimize = false, advise = false;
    const char *shape_name = "whole";
    int runs = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--stmts") == 0 && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc)
            shape_name = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--repeat-labels") == 0)
            repeat = true;
        else if (strcmp(argv[i], "--report") == 0)
            report = true;
        else if (strcmp(argv[i], "--keep") == 0)
            keep = true;
        else if (strcmp(argv[i], "--minimize") == 0)
            minimize = true;
        else if (strcmp(argv[i], "--advise") == 0)
            advise = true;
        else {
            fprintf(stderr, "usage: bench_capture [--stmts N] [--dir DIR] [--shape NAME] "
                            "[--repeat-labels] [--runs K] [--report] [--minimize] [--advise] "
                            "[--keep]\n");
            return 2;
        }
    }
    capture_shape shape;
    if (capture_shape_parse(shape_name, &shape) != 0 || runs < 1) {
        fprintf(stderr, "bench_capture: unknown shape %s (whole, labels, arenas, tokens, ragged, "
                        "scatter, worst) or --runs < 1\n", shape_name);
        return 2;
    }
    if (repeat)
        shape.repeat_labels = true;
    char text[512], db[512], html[512];
    snprintf(text, sizeof text, "%s/capture.trace", dir);
    snprintf(db, sizeof db, "%s/capture.db", dir);
    snprintf(html, sizeof html, "%s/capture.html", dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_capture: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    unlink(db);

    /* 1. the text trace */
    trace_reader r;
    trace_error err = { 0 };
    FILE *f = fopen(text, "w");
    if (!f || capture_open_shape(&r, n, &shape) != 0) {
        fprintf(stderr, "bench_capture: %s: %s\n", text, strerror(errno));
        return 1;
    }
    double t0 = now();
    if (trace_text_write(f, &r, &err) != 0 || fclose(f) != 0) {
        fprintf(stderr, "bench_capture: %s\n", err.msg);
        return 1;
    }
    uint32_t n_buffers = r.trace->n_buffers, n_queues = r.trace->n_queues;
    trace_reader_close(&r);
    printf("capture shape %s%s: %llu statements, %u queues, %u buffers; text %.1f MB written in "
           "%.2f s\n",
           shape_name, shape.repeat_labels ? " (repeated labels)" : "", (unsigned long long)n,
           n_queues, n_buffers,
           (double)file_size(text) / 1e6, now() - t0);

    /* 2. import */
    double wall, cpu;
    long rss;
    char *imp[] = { SYNCSIM_BINARY, "import", text, "-o", db, NULL };
    if (run(imp, runs, db, &wall, &cpu, &rss) != 0) {
        fprintf(stderr, "bench_capture: syncsim import failed\n");
        return 1;
    }
    printf("import:  %.2f s wall %.2f s CPU = %.2f M statements/s CPU (%.2f wall), %.1f "
           "bytes/statement on disk, peak RSS %ld KiB\n",
           wall, cpu, (double)n / cpu / 1e6, (double)n / wall / 1e6, (double)file_size(db) / (double)n, rss);

    /* 3. check */
    char *chk[] = { SYNCSIM_BINARY, "check", db, NULL };
    int st = run(chk, runs, NULL, &wall, &cpu, &rss);
    printf("check:   %.2f s wall %.2f s CPU = %.2f M statements/s CPU (%.2f wall) end to end, "
           "peak RSS %ld KiB (exit %d%s)\n",
           wall, cpu, (double)n / cpu / 1e6, (double)n / wall / 1e6, rss, st, st == 0 ? ", clean" : "");

    /* 4. report */
    if (report) {
        char *rep[] = { SYNCSIM_BINARY, "report", db, "-o", html, NULL };
        st = run(rep, runs, NULL, &wall, &cpu, &rss);
        printf("report:  %.2f s wall %.2f s CPU for %llu statements, peak RSS %ld KiB (exit %d)\n",
               wall, cpu, (unsigned long long)n, rss, st);
    }
    /* 5. minimize and advise */
    if (minimize) {
        char *min[] = { SYNCSIM_BINARY, "minimize", "-q", db, NULL };
        st = run(min, runs, NULL, &wall, &cpu, &rss);
        printf("minimize: %.2f s wall %.2f s CPU for %llu statements, peak RSS %ld KiB = %.0f "
               "bytes/statement (exit %d)\n",
               wall, cpu, (unsigned long long)n, rss, 1024.0 * (double)rss / (double)n, st);
    }
    if (advise) {
        char *adv[] = { SYNCSIM_BINARY, "advise", db, NULL };
        st = run(adv, runs, NULL, &wall, &cpu, &rss);
        printf("advise:  %.2f s wall %.2f s CPU for %llu statements, peak RSS %ld KiB = %.0f "
               "bytes/statement (exit %d)\n",
               wall, cpu, (unsigned long long)n, rss, 1024.0 * (double)rss / (double)n, st);
    }
    if (!keep) {
        unlink(text);
        unlink(db);
        unlink(html);
    }
    return 0;
}
