/*
 * bench_graph.c -- how long `syncsim graph` takes on the split graph of a
 * llama as the model grows (issue 10: the graph of 80 layers took over
 * 100 s in dot).
 *
 * For each layer count L the benchmark records one decode token of
 * `syncsim run --model llama:n_layer=L --tokens 1 --prompt 4` (not timed),
 * then times the whole command `syncsim graph gL.db -o gL.svg`, with --full
 * and without (the default picture), REPEAT times each, and prints the
 * typical (median) and the worst wall time, and what the command printed
 * (how many nodes it drew, what it collapsed). Target on a 2-core machine:
 * --full at 80 layers <= 3 s.
 *
 * usage: bench_graph [--layers 8,16,24,32,48,64,80] [--repeat 3] [--dir DIR]
 *                    [--no-default]
 *   --dir keeps the databases and pictures there (default: a temporary
 *   directory, removed); --no-default times --full only.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPEAT 32
#define MAX_LAYER_COUNTS 32

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs cmd through the shell; its first line of output goes to line.
 * Returns the exit status, or -1. */
static int sh(const char *cmd, char *line, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    line[0] = '\0';
    char buf[1024];
    bool first = true;
    while (fgets(buf, sizeof buf, p)) {
        if (first) {
            snprintf(line, cap, "%s", buf);
            line[strcspn(line, "\n")] = '\0';
            first = false;
        }
    }
    int st = pclose(p);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times `syncsim graph db [extra] -o svg` repeat times: median and worst. */
static int time_graph(const char *db, const char *svg, const char *extra, int repeat,
                      double *typical, double *worst, char *line, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' graph '%s' %s -o '%s' 2>&1", SYNCSIM_BINARY, db, extra, svg);
    double t[MAX_REPEAT];
    for (int i = 0; i < repeat; i++) {
        double t0 = now_s();
        if (sh(cmd, line, cap) != 0) {
            fprintf(stderr, "bench_graph: %s failed: %s\n", cmd, line);
            return -1;
        }
        t[i] = now_s() - t0;
    }
    qsort(t, (size_t)repeat, sizeof t[0], cmp_double);
    *typical = t[repeat / 2];
    *worst = t[repeat - 1];
    return 0;
}

int main(int argc, char **argv)
{
    int layers[MAX_LAYER_COUNTS] = { 8, 16, 24, 32, 48, 64, 80 }, n_layers = 7;
    int repeat = 3;
    const char *dir = NULL;
    bool with_default = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
            n_layers = 0;
            for (char *p = argv[++i]; *p && n_layers < MAX_LAYER_COUNTS;) {
                layers[n_layers++] = (int)strtol(p, &p, 10);
                p += *p == ',';
            }
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--no-default") == 0) {
            with_default = false;
        } else {
            fprintf(stderr, "usage: bench_graph [--layers 8,16,...] [--repeat N] [--dir DIR] "
                            "[--no-default]\n");
            return 2;
        }
    }
    if (repeat < 1 || repeat > MAX_REPEAT) {
        fprintf(stderr, "bench_graph: --repeat takes 1 to %d\n", MAX_REPEAT);
        return 2;
    }
    char tmp[] = "/tmp/bench_graph-XXXXXX";
    if (!dir) {
        if (!mkdtemp(tmp)) {
            perror("bench_graph: mkdtemp");
            return 1;
        }
    } else {
        mkdir(dir, 0777);
    }
    const char *work = dir ? dir : tmp;
    printf("syncsim graph on llama:n_layer=L (one decode token), whole command, %d runs each: "
           "typical (median) / worst\n", repeat);
    int rc = 0;
    for (int k = 0; k < n_layers && rc == 0; k++) {
        char db[600], svg[600], cmd[2048], line[1024];
        snprintf(db, sizeof db, "%s/g%d.db", work, layers[k]);
        snprintf(svg, sizeof svg, "%s/g%d.svg", work, layers[k]);
        if (access(db, F_OK) != 0) {
            snprintf(cmd, sizeof cmd, "'%s' run --model llama:n_layer=%d --tokens 1 --prompt 4 "
                     "-o '%s' 2>&1", SYNCSIM_BINARY, layers[k], db);
            if (sh(cmd, line, sizeof line) != 0) {
                fprintf(stderr, "bench_graph: %s failed: %s\n", cmd, line);
                rc = 1;
                break;
            }
        }
        double typical, worst;
        if (time_graph(db, svg, "--full", repeat, &typical, &worst, line, sizeof line) != 0) {
            rc = 1;
            break;
        }
        printf("L=%-3d --full   %6.2f s / %6.2f s  | %s\n", layers[k], typical, worst, line);
        fflush(stdout);
        if (!with_default)
            continue;
        if (time_graph(db, svg, "", repeat, &typical, &worst, line, sizeof line) != 0) {
            rc = 1;
            break;
        }
        printf("L=%-3d default  %6.2f s / %6.2f s  | %s\n", layers[k], typical, worst, line);
        fflush(stdout);
    }
    if (!dir) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_graph: could not remove %s\n", tmp);
    }
    return rc;
}
