/*
 * bench_capture.c -- the trace path on the shape of captured traces
 * (bench/shapes.h: 8 streams on 4 devices, 2 host threads, 4096 buffers,
 * ~1.5 accesses per statement, times, a distinct label per statement),
 * measured the way a user meets it: the real `syncsim` commands, each in
 * its own process, timed wall-clock with its own peak RSS.
 *
 *   bench_capture [--stmts N] [--dir DIR] [--repeat-labels] [--report] [--keep]
 *
 * 1. writes N statements of the shape as a text trace (DIR/capture.trace);
 * 2. `syncsim import` it into DIR/capture.db: statements/s, bytes/statement
 *    on disk, peak RSS;
 * 3. `syncsim check` the database end to end: statements/s, peak RSS;
 * 4. with --report, `syncsim report` of the run (timeline included).
 * --repeat-labels gives every statement of a kind the same label (the kind
 * shape of the earlier benchmarks), for comparison. --keep leaves the files
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

/* Runs argv (stdout to /dev/null); returns its exit status, wall time and
 * peak RSS (KiB). */
static int run(char *const argv[], double *wall, long *rss_kb)
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
    *rss_kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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
    bool repeat = false, report = false, keep = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--stmts") == 0 && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--repeat-labels") == 0)
            repeat = true;
        else if (strcmp(argv[i], "--report") == 0)
            report = true;
        else if (strcmp(argv[i], "--keep") == 0)
            keep = true;
        else {
            fprintf(stderr, "usage: bench_capture [--stmts N] [--dir DIR] [--repeat-labels] "
                            "[--report] [--keep]\n");
            return 2;
        }
    }
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
    if (!f || capture_open(&r, n, repeat) != 0) {
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
    printf("capture shape%s: %llu statements, %u queues, %u buffers; text %.1f MB written in "
           "%.2f s\n",
           repeat ? " (repeated labels)" : "", (unsigned long long)n, n_queues, n_buffers,
           (double)file_size(text) / 1e6, now() - t0);

    /* 2. import */
    double wall;
    long rss;
    char *imp[] = { SYNCSIM_BINARY, "import", text, "-o", db, NULL };
    if (run(imp, &wall, &rss) != 0) {
        fprintf(stderr, "bench_capture: syncsim import failed\n");
        return 1;
    }
    printf("import:  %.2f s = %.2f M statements/s, %.1f bytes/statement on disk, peak RSS %ld "
           "KiB\n",
           wall, (double)n / wall / 1e6, (double)file_size(db) / (double)n, rss);

    /* 3. check */
    char *chk[] = { SYNCSIM_BINARY, "check", db, NULL };
    int st = run(chk, &wall, &rss);
    printf("check:   %.2f s = %.2f M statements/s end to end, peak RSS %ld KiB (exit %d%s)\n",
           wall, (double)n / wall / 1e6, rss, st, st == 0 ? ", clean" : "");

    /* 4. report */
    if (report) {
        char *rep[] = { SYNCSIM_BINARY, "report", db, "-o", html, NULL };
        st = run(rep, &wall, &rss);
        printf("report:  %.2f s for %llu statements, peak RSS %ld KiB (exit %d)\n", wall,
               (unsigned long long)n, rss, st);
    }
    if (!keep) {
        unlink(text);
        unlink(db);
        unlink(html);
    }
    return 0;
}
