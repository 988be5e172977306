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
#include <elf.h>
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
            "       syncsim capture --symbolize LOG\n"
            "\n"
            "Runs PROGRAM, any CUDA program, unmodified, under syncsim's CUPTI injection\n"
            "library and records what it did: allocations and frees, streams (the legacy\n"
            "and per-thread default streams too), events, records and waits, stream, event\n"
            "and device synchronisation, copies and memsets with their byte ranges, kernel\n"
            "launches with their pointer parameters (const pointees are reads), CUDA graph\n"
            "launches, NVTX ranges (iterations), cuBLAS and NCCL calls with their read/write\n"
            "sets (NCCL collectives as collectives), and the GPU times of each. The record\n"
            "is stored as a new run of DB; `syncsim check DB` then says which copy or\n"
            "kernel is missing a wait, with each side's call site (file:line; Python's\n"
            "line in Python programs, whose kernels access the tensors they point into).\n"
            "Prints the run id, what was recorded and the program's exit status. A host\n"
            "thread's own reads and writes are invisible to CUPTI: mark one with\n"
            "nvtxMarkA(\"syncsim:r PTR SIZE [LABEL]\") (w, rw; PTR in hex) to have it\n"
            "checked. docs/cuda.md says how each call maps.\n"
            "\n"
            "Needs a CUDA driver and a syncsim built with the CUDA toolkit (it finds its\n"
            "libsyncsim_inject.so next to the binary, in lib/ or ../lib/syncsim/).\n"
            "\n"
            "Options:\n"
            "  -o, --output DB   the database (default ./" CLI_DEFAULT_DB ")\n"
            "  -n, --name NAME   the run's name (default: the program's name)\n"
            "  -k, --keep-log    keep the event log (DB.PID.cuda-log) after storing it\n"
            "  -l, --log FILE    write the event log to FILE (kept)\n"
            "  -s, --symbolize LOG  resolve the call sites of LOG only (done after each run)\n"
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

/* Whether the injection library loads here: it needs the CUDA driver
 * (libcuda.so.1) and CUPTI; without them, one line says so. */
static int check_loads(const char *inject)
{
    void *h = dlopen(inject, RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return cli_error("capture", "cannot load %s: %s (is an NVIDIA driver installed?)",
                         inject, dlerror());
    /* the handle stays open: unloading CUPTI from this process gains nothing */
    return 0;
}

/* ------------------------------------------------------------------ */
/* Call sites, symbolised after the run.                               */

typedef struct site_module {
    long pid;
    unsigned long long base, lo, hi;
    char *path;
} site_module;

typedef struct site_addr {
    long pid;
    unsigned long long addr;
} site_addr;

static int by_site_addr(const void *pa, const void *pb)
{
    const site_addr *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The value of key (" pid=") in line, or NULL. */
static const char *word(const char *line, const char *key)
{
    const char *w = strstr(line, key);
    return w ? w + strlen(key) : NULL;
}

/* Whether the ELF object at path has a line table (.debug_line): without
 * one addr2line can only answer "??" and would spend seconds reading a
 * large library (PyTorch's) to say so. */
static bool has_line_table(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool found = false;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    char *names = NULL;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof *sh || !eh.e_shnum ||
        eh.e_shstrndx >= eh.e_shnum)
        goto done;
    sh = malloc((size_t)eh.e_shnum * sizeof *sh);
    if (!sh || pread(fd, sh, (size_t)eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff) !=
                   (ssize_t)((size_t)eh.e_shnum * sizeof *sh))
        goto done;
    const Elf64_Shdr *str = &sh[eh.e_shstrndx];
    if (str->sh_size > (64u << 20) || !(names = malloc(str->sh_size + 1)) ||
        pread(fd, names, str->sh_size, (off_t)str->sh_offset) != (ssize_t)str->sh_size)
        goto done;
    names[str->sh_size] = '\0';
    for (unsigned i = 0; i < eh.e_shnum && !found; i++)
        found = sh[i].sh_name < str->sh_size &&
                (strcmp(names + sh[i].sh_name, ".debug_line") == 0 ||
                 strcmp(names + sh[i].sh_name, ".zdebug_line") == 0);
done:
    free(sh);
    free(names);
    close(fd);
    return found;
}

/* Runs addr2line on path for n addresses (offsets in the object), one
 * answer a line into out (each "FILE:LINE", "??:0" when unknown). Returns
 * 0, or -1 when addr2line could not run. */
static int addr2line(const char *path, const unsigned long long *off, size_t n, FILE *out)
{
    char **argv = calloc(n + 5, sizeof *argv);
    char *nums = malloc(n * 20 + 1);
    int fds[2] = { -1, -1 };
    if (!argv || !nums || pipe2(fds, O_CLOEXEC) != 0) {
        free(argv);
        free(nums);
        return -1;
    }
    size_t k = 0;
    argv[k++] = "addr2line";
    argv[k++] = "-e";
    argv[k++] = (char *)path;
    for (size_t i = 0; i < n; i++) {
        argv[k] = nums + 20 * i;
        snprintf(argv[k++], 20, "0x%llx", off[i]);
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2);
        execvp("addr2line", argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *in = pid > 0 ? fdopen(fds[0], "r") : NULL;
    char line[4096];
    size_t got = 0;
    while (in && fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = '\0';
        char *disc = strstr(line, " (discriminator");
        if (disc)
            *disc = '\0';
        fprintf(out, "%s\n", line);
        got++;
    }
    if (in)
        fclose(in);
    else
        close(fds[0]);
    int status = 0;
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    free(argv);
    free(nums);
    return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == n ? 0 : -1;
}

/* Appends to log one `sym` record per distinct return address of its
 * site= words, resolved in the objects its `module` records name
 * (addr2line on the address minus one: the call, not the instruction
 * after it; objects without a line table are skipped). Returns the number of addresses given a source line, or -1
 * (one line printed) when the log cannot be read or addr2line is missing. */
static long symbolize(const char *log)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return cli_error("capture", "%s: %s", log, strerror(errno)), -1;
    site_module *mods = NULL;
    site_addr *addrs = NULL;
    size_t n_mods = 0, n_addrs = 0, cap_mods = 0, cap_addrs = 0;
    char *line = NULL;
    size_t cap = 0;
    long resolved = -1;
    while (getline(&line, &cap, f) > 0) {
        const char *pid = word(line, " pid=");
        if (!pid)
            continue;
        if (strncmp(line, "module ", 7) == 0) {
            const char *b = word(line, " base="), *lo = word(line, " lo="),
                       *hi = word(line, " hi="), *name = word(line, " name=");
            if (!b || !lo || !hi || !name)
                continue;
            if (n_mods == cap_mods) {
                cap_mods = cap_mods ? 2 * cap_mods : 64;
                site_module *m = realloc(mods, cap_mods * sizeof *m);
                if (!m)
                    goto done;
                mods = m;
            }
            mods[n_mods] = (site_module){ strtol(pid, NULL, 10), strtoull(b, NULL, 0),
                                          strtoull(lo, NULL, 0), strtoull(hi, NULL, 0),
                                          strndup(name, strcspn(name, "\n")) };
            if (!mods[n_mods].path)
                goto done;
            n_mods++;
        } else if (strncmp(line, "api ", 4) == 0) {
            const char *site = word(line, " site=");
            for (const char *p = site; p && *p && *p != ' ' && *p != '\n';) {
                char *end;
                unsigned long long a = strtoull(p, &end, 0);
                if (end == p)
                    break;
                if (n_addrs == cap_addrs) {
                    cap_addrs = cap_addrs ? 2 * cap_addrs : 1024;
                    site_addr *x = realloc(addrs, cap_addrs * sizeof *x);
                    if (!x)
                        goto done;
                    addrs = x;
                }
                addrs[n_addrs++] = (site_addr){ strtol(pid, NULL, 10), a };
                p = *end == ',' ? end + 1 : end;
            }
        }
    }
    if (n_addrs)
        qsort(addrs, n_addrs, sizeof *addrs, by_site_addr);
    size_t n = 0;
    for (size_t i = 0; i < n_addrs; i++)
        if (n == 0 || by_site_addr(&addrs[n - 1], &addrs[i]) != 0)
            addrs[n++] = addrs[i];
    n_addrs = n;
    FILE *out = fopen(log, "a");
    if (!out) {
        cli_error("capture", "%s: %s", log, strerror(errno));
        goto done;
    }
    resolved = 0;
    unsigned long long *off = malloc((n_addrs + 1) * sizeof *off);
    site_addr *mine = malloc((n_addrs + 1) * sizeof *mine);
    char *answers = NULL;
    size_t answers_len = 0;
    for (size_t m = 0; off && mine && m < n_mods && resolved >= 0; m++) {
        size_t k = 0;
        for (size_t i = 0; i < n_addrs; i++)
            if (addrs[i].pid == mods[m].pid && addrs[i].addr > mods[m].lo &&
                addrs[i].addr <= mods[m].hi) {
                mine[k] = addrs[i];
                off[k++] = addrs[i].addr - 1 - mods[m].base;
            }
        if (!k || !has_line_table(mods[m].path))
            continue;           /* its sites stay OBJECT+OFFSET */
        FILE *mem = open_memstream(&answers, &answers_len);
        if (!mem || addr2line(mods[m].path, off, k, mem) != 0) {
            if (mem)
                fclose(mem);
            if (access(mods[m].path, R_OK) != 0)
                continue;       /* gone since the run: its sites stay addresses */
            cli_error("capture", "addr2line failed on %s: call sites stay addresses "
                                 "(is binutils installed?)", mods[m].path);
            resolved = -1;
            break;
        }
        fclose(mem);
        char *p = answers;
        for (size_t i = 0; i < k && p && *p; i++) {
            char *nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            fprintf(out, "sym pid=%ld addr=0x%llx name=%s\n", mine[i].pid, mine[i].addr, p);
            if (p[0] != '?' && !strstr(p, ":?") && !strstr(p, ":0"))
                resolved++;
            p = nl ? nl + 1 : NULL;
        }
        free(answers);
        answers = NULL;
    }
    free(off);
    free(mine);
    if (fclose(out) != 0 && resolved >= 0) {
        cli_error("capture", "%s: %s", log, strerror(errno));
        resolved = -1;
    }
done:
    fclose(f);
    free(line);
    for (size_t i = 0; i < n_mods; i++)
        free(mods[i].path);
    free(mods);
    free(addrs);
    return resolved;
}

/* Runs argv with the capture environment; returns its wait status, or -1
 * (error printed) when it could not start. */
static int run_program(char **argv, const char *inject, const char *shim, const char *log)
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
        /* NVTX goes through the injection library to the CUPTI it is
         * subscribed on, never to a second CUPTI the program loads (PyTorch
         * brings its own): InitializeInjectionNvtx2 in real/cuda/inject.c */
        setenv("NVTX_INJECTION64_PATH", inject, 1);
        /* Python programs: sitecustomize.py beside the libraries records
         * PyTorch's allocator history into the log (it then runs the
         * sitecustomize it shadows) */
        char py[PATH_MAX];
        snprintf(py, sizeof py, "%s", inject);
        char *slash = strrchr(py, '/');
        if (slash && (size_t)(slash - py) + sizeof "/python/sitecustomize.py" <= sizeof py) {
            strcpy(slash, "/python/sitecustomize.py");
            if (access(py, R_OK) == 0) {
                slash[sizeof "/python" - 1] = '\0';
                const char *old = getenv("PYTHONPATH");
                char *pp = malloc(strlen(py) + (old ? strlen(old) : 0) + 2);
                if (pp) {
                    sprintf(pp, "%s%s%s", py, old && *old ? ":" : "", old && *old ? old : "");
                    setenv("PYTHONPATH", pp, 1);
                    setenv("SYNCSIM_PYTHON_DIR", py, 1);
                }
            }
        }
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
        { "symbolize", required_argument, NULL, 's' },
        { NULL, 0, NULL, 0 },
    };
    const char *db = CLI_DEFAULT_DB, *name = NULL, *log_opt = NULL;
    bool keep = false;
    int c;
    /* "+": options stop at the program, whose own options are its own */
    while ((c = cli_getopt("capture", argc, argv, "+:o:n:kl:s:", longopts)) != -1) {
        switch (c) {
        case 's': {
            long n = symbolize(optarg);
            if (n < 0)
                return 2;
            printf("%s: %ld call-site addresses on a source line\n", optarg, n);
            return 0;
        }
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
    char inject[PATH_MAX], shim[PATH_MAX];
    find_lib("libsyncsim_inject.so", inject, sizeof inject);
    if (!inject[0])
        return cli_error("capture", "this syncsim was built without the CUDA toolkit (no "
                                    "libsyncsim_inject.so beside it): rebuild where one is "
                                    "installed, see %s", cli_doc("cuda.md"));
    find_lib("libsyncsim_shim.so", shim, sizeof shim);
    if (check_loads(inject) != 0)
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
    int status = run_program(prog, inject, shim, log);
    if (status < 0)
        return 2;
    /* the program's objects are still where it loaded them from: now the
     * call sites become file:line (a failure leaves them addresses) */
    if (symbolize(log) < 0)
        fprintf(stderr, "syncsim capture: call sites are shown as OBJECT+OFFSET\n");
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
    /* what the log held and the trace could not (`syncsim info` lists it) */
    uint64_t dropped = trace_ledger(src.reader.trace, NULL, NULL);
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
    if (dropped)
        printf("not imported: %llu events or fields (syncsim info %s --run %lld says which)\n",
               (unsigned long long)dropped, db, (long long)run);
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
