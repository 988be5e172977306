/*
 * cmd_capture.c -- `syncsim capture -o DB [--keep-log] -- PROGRAM ARGS...`:
 * runs an unmodified CUDA program with syncsim's CUPTI injection library
 * (real/cuda/inject.c, through CUDA_INJECTION64_PATH) and its cuBLAS/NCCL
 * shim (LD_PRELOAD), then reads the event log they wrote (the cuda-log
 * format, traces/formats/cuda_log.c) and stores it as a new run of DB, as
 * `syncsim import` does. The libraries are found next to the binary
 * (build/lib, or LIBDIR/syncsim once installed); a syncsim built without
 * the CUDA toolkit has none and says so.
 */
#include "cli.h"
#include "sched/sched.h"
#include "traces/trace.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void cmd_capture_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim capture [-o DB] [--name NAME] [--keep-log] [--log FILE] -- PROGRAM [ARGS...]\n"
            "\n"
            "Runs PROGRAM, any CUDA program, unmodified, under syncsim's CUPTI injection\n"
            "library and records what it did: allocations and frees, streams (the legacy\n"
            "and per-thread default streams too), events, records and waits, stream, event\n"
            "and device synchronisation, copies and memsets with their byte ranges, kernel\n"
            "launches with their pointer parameters (const pointees are reads), CUDA graph\n"
            "launches, NVTX ranges (iterations), cuBLAS and NCCL calls with their read/write\n"
            "sets (NCCL collectives as collectives), and the GPU times of each. The record\n"
            "is stored as a new run of DB; `syncsim check DB` then says which copy or\n"
            "kernel is missing a wait. Prints the run id, what was recorded and the\n"
            "program's exit status. A host thread's own reads and writes are invisible to\n"
            "CUPTI: mark one with nvtxMarkA(\"syncsim:r PTR SIZE [LABEL]\") (w, rw; PTR in\n"
            "hex) to have it checked. docs/cuda.md says how each call maps.\n"
            "\n"
            "Needs a CUDA driver and a syncsim built with the CUDA toolkit (it finds its\n"
            "libsyncsim_inject.so next to the binary, in lib/ or ../lib/syncsim/).\n"
            "\n"
            "Options:\n"
            "  -o, --output DB   the database (default ./" CLI_DEFAULT_DB ")\n"
            "  -n, --name NAME   the run's name (default: the program's name)\n"
            "  -k, --keep-log    keep the event log (DB.PID.cuda-log) after storing it\n"
            "  -l, --log FILE    write the event log to FILE (kept)\n"
            "\n"
            "Exit status: 0 recorded and stored (whatever the program returned), 2 bad\n"
            "usage, no CUDA support, a program that could not run or made no CUDA call.\n"
            "\n"
            "Examples:\n"
            "  syncsim capture -o run.db -- PROGRAM --steps 4 && syncsim check run.db\n"
            "  syncsim capture --log run.cuda-log -- python3 TRAIN.py && syncsim check run.cuda-log\n");
}

/* The path of library `name` of the CUDA parts, or "" when none
 * (sched_plugin_path says where plugins are). */
static void find_lib(const char *name, char *out, size_t cap)
{
    sched_plugin_path(name, "SYNCSIM_CUDA_LIB_DIR", out, cap);
    if (out[0] && access(out, R_OK) != 0)
        out[0] = '\0';
}

/* The libcupti the injection library was linked with (NVTX callbacks need
 * it named in NVTX_INJECTION64_PATH). Loading the library also proves the
 * CUDA driver is there: without it, one line says so. */
static int cupti_path(const char *inject, char *out, size_t cap)
{
    void *h = dlopen(inject, RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return cli_error("capture", "cannot load %s: %s (is an NVIDIA driver installed?)",
                         inject, dlerror());
    void *sym = dlsym(h, "cuptiGetTimestamp");
    Dl_info info;
    out[0] = '\0';
    if (sym && dladdr(sym, &info) && info.dli_fname)
        snprintf(out, cap, "%s", info.dli_fname);
    /* the handle stays open: unloading CUPTI from this process gains nothing */
    return 0;
}

/* Runs argv with the capture environment; returns its wait status, or -1
 * (error printed) when it could not start. */
static int run_program(char **argv, const char *inject, const char *shim, const char *cupti,
                       const char *log)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return cli_error("capture", "pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return cli_error("capture", "fork: %s", strerror(errno)), -1;
    }
    if (pid == 0) {
        close(fds[0]);
        setenv("CUDA_INJECTION64_PATH", inject, 1);
        setenv("SYNCSIM_CAPTURE_LOG", log, 1);
        if (cupti[0])
            setenv("NVTX_INJECTION64_PATH", cupti, 1);
        if (shim[0]) {
            const char *old = getenv("LD_PRELOAD");
            char *pre = malloc(strlen(shim) + (old ? strlen(old) : 0) + 2);
            if (pre) {
                sprintf(pre, "%s%s%s", shim, old && *old ? ":" : "", old && *old ? old : "");
                setenv("LD_PRELOAD", pre, 1);
            }
        }
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(fds[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(fds[1]);
    int e = 0;
    ssize_t got = read(fds[0], &e, sizeof e);
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got == (ssize_t)sizeof e)
        return cli_error("capture", "cannot run %s: %s", argv[0], strerror(e)), -1;
    return status;
}

int cmd_capture(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "name", required_argument, NULL, 'n' },
        { "keep-log", no_argument, NULL, 'k' },
        { "log", required_argument, NULL, 'l' },
        { NULL, 0, NULL, 0 },
    };
    const char *db = CLI_DEFAULT_DB, *name = NULL, *log_opt = NULL;
    bool keep = false;
    int c;
    /* "+": options stop at the program, whose own options are its own */
    while ((c = cli_getopt("capture", argc, argv, "+:o:n:kl:", longopts)) != -1) {
        switch (c) {
        case 'o':
            db = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case 'k':
            keep = true;
            break;
        case 'l':
            log_opt = optarg;
            keep = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    if (optind >= argc)
        return cli_usage_error("capture", "missing the program to run (after --)");
    char **prog = argv + optind;
    char inject[PATH_MAX], shim[PATH_MAX], cupti[PATH_MAX];
    find_lib("libsyncsim_inject.so", inject, sizeof inject);
    if (!inject[0])
        return cli_error("capture", "this syncsim was built without the CUDA toolkit (no "
                                    "libsyncsim_inject.so beside it): rebuild where one is "
                                    "installed, see docs/cuda.md");
    find_lib("libsyncsim_shim.so", shim, sizeof shim);
    if (cupti_path(inject, cupti, sizeof cupti) != 0)
        return 2;
    char log[PATH_MAX];
    if (log_opt)
        snprintf(log, sizeof log, "%s", log_opt);
    else
        snprintf(log, sizeof log, "%s.%ld.cuda-log", db, (long)getpid());
    /* the header first: the injection library and the shim only append */
    FILE *lf = fopen(log, "w");
    if (!lf || fputs("syncsim-cuda-log 1\n", lf) < 0 || fclose(lf) != 0)
        return cli_error("capture", "%s: %s", log, strerror(errno));
    int status = run_program(prog, inject, shim, cupti, log);
    if (status < 0)
        return 2;
    struct stat st;
    if (stat(log, &st) != 0 || st.st_size <= (off_t)strlen("syncsim-cuda-log 1\n")) {
        unlink(log);
        return cli_error("capture", "%s made no CUDA call the injection library saw (not a "
                                    "CUDA program, or no CUDA driver)", prog[0]);
    }
    trace_source src;
    trace_source_opts so = { .lazy_labels = true, .as_recorded = true };
    if (cli_open("capture", log, &so, &src) != 0) {
        fprintf(stderr, "syncsim capture: the event log is kept: %s\n", log);
        return 2;
    }
    trace_error err = { 0 };
    uint64_t n_stmts = 0;
    const char *k = trace_get_meta(src.reader.trace, "capture.kernels");
    const char *m = trace_get_meta(src.reader.trace, "capture.memcpy");
    const char *a = trace_get_meta(src.reader.trace, "capture.api_calls");
    char kernels[32], copies[32], calls[32];
    snprintf(kernels, sizeof kernels, "%s", k ? k : "0");
    snprintf(copies, sizeof copies, "%s", m ? m : "0");
    snprintf(calls, sizeof calls, "%s", a ? a : "0");
    int64_t run = trace_store_import(db, &src.reader, name ? name : prog[0], &n_stmts, &err);
    trace_source_close(&src);
    if (run < 0) {
        fprintf(stderr, "syncsim capture: the event log is kept: %s\n", log);
        return cli_error("capture", "%s", err.msg);
    }
    if (!keep)
        unlink(log);
    printf("captured %s as run %lld of %s: %llu statements (%s API calls, %s kernels, %s "
           "copies)\n",
           prog[0], (long long)run, db, (unsigned long long)n_stmts, calls, kernels, copies);
    if (keep)
        printf("event log: %s\n", log);
    if (WIFEXITED(status))
        printf("%s exited with status %d\n", prog[0], WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        printf("%s was killed by signal %d (%s): what it did until then is recorded\n", prog[0],
               WTERMSIG(status), strsignal(WTERMSIG(status)));
    printf("check it: syncsim check %s --run %lld\n", db, (long long)run);
    return 0;
}
