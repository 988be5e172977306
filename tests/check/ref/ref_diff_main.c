/*
 * ref_diff_main.c -- build/tests/ref_diff: the checker against the
 * independent reference (ref.h) on any number of random traces.
 *
 *   ref_diff [--traces N] [--seed S] [--jobs J]    # default 10000, 1, 2
 *   ref_diff --show I [--seed S]                    # trace I of seed S, its diff
 *
 * Prints the traces per generator and per finding kind the reference found
 * (coverage), the disagreements per class and generator, and for each class
 * the first disagreeing trace shrunk (statements deleted while the class
 * stays). Exit status 0 when no trace disagrees, 1 when some do, 2 on usage.
 * Jobs are forked processes, each taking every J-th trace.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/check/ref/ref.h"

static int usage(void)
{
    fprintf(stderr, "usage: ref_diff [--traces N] [--seed S] [--jobs J] | --show I [--seed S]\n");
    return 2;
}

static bool number(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (!*s || *end || errno)
        return false;
    *v = x;
    return true;
}

static void show(uint64_t seed, uint64_t i, uint32_t want)
{
    static ref_trace t;
    static ref_verdict v;
    static char text[1 << 16], why[8192];
    int g = ref_generate(&t, ref_trace_seed(seed, i));
    ref_eval(&t, &v);
    uint32_t cls = ref_diff(&t, &v, why, sizeof why);
    printf("trace %" PRIu64 " of seed %" PRIu64 " (generator %s, %u statements)", i, seed,
           ref_gen_name(g), t.n);
    if (want && (cls & want)) {
        cls = ref_shrink(&t, want);
        ref_eval(&t, &v);
        ref_diff(&t, &v, why, sizeof why);
        printf(", shrunk to %u statements", t.n);
    }
    printf(":\n");
    ref_print(&t, text, sizeof text);
    fputs(text, stdout);
    printf("-- %s\n", cls ? "disagreement:" : "checker and reference agree");
    fputs(why, stdout);
}

int main(int argc, char **argv)
{
    uint64_t traces = 10000, seed = 1, jobs = 2, show_i = UINT64_MAX;
    for (int i = 1; i < argc; i++) {
        uint64_t *dst = strcmp(argv[i], "--traces") == 0 ? &traces
                        : strcmp(argv[i], "--seed") == 0 ? &seed
                        : strcmp(argv[i], "--jobs") == 0 ? &jobs
                        : strcmp(argv[i], "--show") == 0 ? &show_i
                                                         : NULL;
        if (!dst || i + 1 >= argc || !number(argv[++i], dst))
            return usage();
    }
    if (show_i != UINT64_MAX) {
        show(seed, show_i, 0);
        return 0;
    }
    if (jobs < 1 || jobs > 64)
        return usage();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ref_run_stats total;
    ref_stats_init(&total);
    int fds[64];
    pid_t pids[64];
    for (uint64_t j = 0; j < jobs; j++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 2;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            close(p[0]);
            ref_run_stats st;
            ref_stats_init(&st);
            for (uint64_t i = j; i < traces; i += jobs)
                ref_run_one(seed, i, &st);
            ssize_t w = write(p[1], &st, sizeof st);
            _exit(w == (ssize_t)sizeof st ? 0 : 1);
        }
        close(p[1]);
        fds[j] = p[0];
        pids[j] = pid;
    }
    for (uint64_t j = 0; j < jobs; j++) {
        ref_run_stats st;
        size_t got = 0;
        while (got < sizeof st) {
            ssize_t r = read(fds[j], (char *)&st + got, sizeof st - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        close(fds[j]);
        int status;
        waitpid(pids[j], &status, 0);
        if (got != sizeof st || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "ref_diff: job %" PRIu64 " failed\n", j);
            return 2;
        }
        ref_stats_add(&total, &st);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("seed %" PRIu64 ", %" PRIu64 " jobs, %.1f s\n", seed, jobs, secs);
    ref_stats_print(stdout, &total);
    for (int c = 0; c < REF_CLASS_COUNT; c++) {
        if (!total.classes[c])
            continue;
        printf("\n== %s: %s (%" PRIu64 " traces); the first, shrunk:\n", ref_class_word(c),
               ref_class_what(c), total.classes[c]);
        show(seed, total.first_index[c], 1u << c);
    }
    return total.disagree ? 1 : 0;
}
