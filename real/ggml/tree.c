/*
 * tree.c -- a user's ggml tree and the harness built from it.
 *
 * A tree is found by src/ggml-backend.cpp under it (or under its ggml/:
 * llama.cpp). Its key is a 64-bit FNV-1a hash of what the build reads: the
 * sources compiled (ggml.c, ggml.cpp, ggml-alloc.c, ggml-backend.cpp,
 * ggml-quants.c, ggml-threading.cpp, ggml-backend-meta.cpp: those the tree
 * has) and every header of include/ and src/. A build is keyed by the
 * tree's key, the harness source, the compilers and their flags, so any
 * edit of the tree (a patch, another commit) builds again and nothing
 * stale is ever run:
 *
 *   CACHE/ggml/KEY/core/FILE.o             every source but ggml-backend.cpp, once
 *   CACHE/ggml/KEY/ggml-backend-cN.o    GGML_SCHED_MAX_COPIES = N
 *   CACHE/ggml/KEY/syncsim_ggml-cN      the harness program for N slots
 *   CACHE/ggml/KEY/build.log            the compilers' output
 *
 * Everything is compiled with -O0 -g: nothing runs long (nodes compute
 * nothing) and the line of every call site must be exact. Each file is
 * written under a temporary name and renamed when complete, so a build that
 * is killed leaves nothing half-made. The compilers are the system's: $CC
 * and $CXX, or cc and c++, or what the caller names (--cc, --cxx).
 */
#include "rggml.h"
#include "rggml_int.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYNCSIM_GGML_HARNESS_DIR
#define SYNCSIM_GGML_HARNESS_DIR "real/ggml/harness"
#endif

static int fail(trace_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(trace_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = TRACE_EUSAGE;
    return -1;
}

int rggml_strf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* FNV-1a, 64 bits. */
static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t fnv_file(uint64_t h, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fnv(h, "-", 1);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        h = fnv(h, buf, n);
    fclose(f);
    return h;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The headers of dir, in name order, into the hash (name and content). */
static uint64_t fnv_headers(uint64_t h, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return h;
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 512) {
        size_t len = strlen(e->d_name);
        if (len > 2 && strcmp(e->d_name + len - 2, ".h") == 0 && (names[n] = strdup(e->d_name)))
            n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    for (int i = 0; i < n; i++) {
        char p[PATH_MAX];
        rggml_strf(p, sizeof p, "%s/%s", dir, names[i]);
        h = fnv(h, names[i], strlen(names[i]) + 1);
        h = fnv_file(h, p);
        free(names[i]);
    }
    return h;
}

/* The first line of a command's output, or "" (a short program: git). */
static void first_line_of(const char *cmd, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (fgets(out, (int)cap, p))
        out[strcspn(out, "\n")] = '\0';
    else
        out[0] = '\0';
    if (pclose(p) != 0)
        out[0] = '\0';
}

/* A path as one shell word. */
static void shell_quote(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    if (cap < 3) {
        out[0] = '\0';
        return;
    }
    out[k++] = '\'';
    for (; *s && k + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            out[k++] = *s;
        }
    }
    out[k++] = '\'';
    out[k] = '\0';
}

/* ggml-cuda's cpy_tensor_async takes host memory at this tree: the line
 * of its copy_from_host inside the function (0: not there). */
static int cuda_copy_from_host_line(const char *root)
{
    char p[PATH_MAX];
    rggml_strf(p, sizeof p, "%s/src/ggml-cuda/ggml-cuda.cu", root);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    char line[4096];
    int n = 0, in_fn = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        n++;
        if (strstr(line, "static bool ggml_backend_cuda_cpy_tensor_async("))
            in_fn = 1;
        else if (in_fn && line[0] == '}')
            in_fn = 0;
        else if (in_fn && strstr(line, "copy_from_host") && strstr(line, "="))
            found = n;
    }
    fclose(f);
    return found;
}

static const char *const tree_sources[] = {
    "ggml.c", "ggml.cpp", "ggml-alloc.c", "ggml-backend.cpp", "ggml-quants.c",
    "ggml-threading.cpp", "ggml-backend-meta.cpp",
};

int rggml_tree_open(const char *path, rggml_tree *t, trace_error *err)
{
    memset(t, 0, sizeof *t);
    char p[PATH_MAX];
    rggml_strf(p, sizeof p, "%s/src/ggml-backend.cpp", path);
    if (is_file(p)) {
        snprintf(t->root, sizeof t->root, "%s", path);
    } else {
        rggml_strf(p, sizeof p, "%s/ggml/src/ggml-backend.cpp", path);
        if (!is_file(p))
            return fail(err, "%s: not a ggml tree (no src/ggml-backend.cpp, nor "
                        "ggml/src/ggml-backend.cpp: a ggml checkout or llama.cpp's)", path);
        snprintf(t->root, sizeof t->root, "%s/ggml", path);
    }
    char inc[PATH_MAX];
    rggml_strf(inc, sizeof inc, "%s/include/ggml-backend.h", t->root);
    if (!is_file(inc))
        return fail(err, "%s: no include/ggml-backend.h", t->root);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof tree_sources / sizeof tree_sources[0]; i++) {
        rggml_strf(p, sizeof p, "%s/src/%s", t->root, tree_sources[i]);
        if (!is_file(p))
            continue;
        snprintf(t->sources[t->n_sources++], sizeof t->sources[0], "%s", tree_sources[i]);
        h = fnv(h, tree_sources[i], strlen(tree_sources[i]) + 1);
        h = fnv_file(h, p);
    }
    rggml_strf(p, sizeof p, "%s/include", t->root);
    h = fnv_headers(h, p);
    rggml_strf(p, sizeof p, "%s/src", t->root);
    h = fnv_headers(h, p);
    snprintf(t->key, sizeof t->key, "%016llx", (unsigned long long)h);
    t->cuda_copy_from_host_line = cuda_copy_from_host_line(t->root);
    t->cuda_copy_from_host = t->cuda_copy_from_host_line > 0;
    char q[PATH_MAX + 16], cmd[PATH_MAX + 128], rev[128];
    shell_quote(t->root, q, sizeof q);
    rggml_strf(cmd, sizeof cmd, "git -C %s rev-parse --short=8 HEAD 2>/dev/null", q);
    first_line_of(cmd, rev, sizeof rev);
    if (rev[0])
        snprintf(t->describe, sizeof t->describe, "commit %.60s", rev);
    else
        snprintf(t->describe, sizeof t->describe, "not a git checkout");
    return 0;
}

int rggml_harness_path(char *out, size_t cap, trace_error *err)
{
    sched_data_path("ggml/syncsim_ggml.c", SYNCSIM_GGML_HARNESS_DIR "/syncsim_ggml.c", out, cap);
    if (is_file(out))
        return 0;
    return fail(err, "the ggml harness is not installed: no %s (looked in $SYNCSIM_DATA_DIR/ggml, "
                "share/syncsim/ggml beside the binary, and the sources)", out);
}

static void cache_root(const rggml_build_opts *o, char *out, size_t cap)
{
    const char *env;
    if (o && o->cache)
        rggml_strf(out, cap, "%s", o->cache);
    else if ((env = getenv("SYNCSIM_CACHE_DIR")) && *env)
        rggml_strf(out, cap, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env)
        rggml_strf(out, cap, "%s/syncsim", env);
    else if ((env = getenv("HOME")) && *env)
        rggml_strf(out, cap, "%s/.cache/syncsim", env);
    else
        rggml_strf(out, cap, "/tmp/syncsim-cache-%d", (int)getuid());
}

/* mkdir -p. 0 or -1. */
static int make_dirs(const char *path)
{
    char p[PATH_MAX];
    rggml_strf(p, sizeof p, "%s", path);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -1;
        *c = '/';
    }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static const char *compiler(const char *given, const char *env, const char *dflt)
{
    const char *e = getenv(env);
    return given ? given : e && *e ? e : dflt;
}

int rggml_spawn(char *const argv[], const char *log, bool append)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (append) {
            /* a log of several commands: each after a line naming it */
            FILE *l = fdopen(2, "a");
            if (l) {
                fprintf(l, "$");
                for (int i = 0; argv[i]; i++)
                    fprintf(l, " %s", argv[i]);
                fprintf(l, "\n");
                fflush(l);
            }
        }
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return st;
}

/* Runs argv with its output appended to log; 0 when it exits 0. */
static int run_logged(char *const argv[], const char *log)
{
    int st = rggml_spawn(argv, log, true);
    return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

void rggml_log_line(const char *log, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    char line[1024], last[1024] = "";
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '$') {           /* the next command: what is before it is done */
            found = false;
            out[0] = last[0] = '\0';
            continue;
        }
        if (line[0])
            snprintf(last, sizeof last, "%s", line);
        if (!found && (strstr(line, "error") || strstr(line, "GGML_ASSERT") ||
                       strstr(line, "GGML_ABORT") || strstr(line, "cannot run"))) {
            snprintf(out, cap, "%.*s", (int)(cap > 0 ? cap - 1 : 0), line);
            found = true;
        }
    }
    fclose(f);
    if (!found)
        snprintf(out, cap, "%.*s", (int)(cap > 0 ? cap - 1 : 0), last);
}

/* Compiles (or links) into out through a temporary name; a file already
 * there is kept. 0, or -1 with err naming the log. */
static int make_file(char **argv, int out_arg, const char *out, const char *log, trace_error *err)
{
    if (is_file(out))
        return 0;
    char tmp[PATH_MAX + 32];
    rggml_strf(tmp, sizeof tmp, "%s.tmp%d", out, (int)getpid());
    char *keep = argv[out_arg];
    argv[out_arg] = tmp;
    int rc = run_logged(argv, log);
    argv[out_arg] = keep;
    if (rc != 0 || rename(tmp, out) != 0) {
        unlink(tmp);
        char line[512];
        rggml_log_line(log, line, sizeof line);
        return fail(err, "building ggml's scheduler failed%s%s (see %s)", line[0] ? ": " : "",
                    line, log);
    }
    return 0;
}

int rggml_build(const rggml_tree *t, int copies, const rggml_build_opts *o, char *out,
                size_t cap, trace_error *err)
{
    if (copies < 1 || copies > 16)
        return fail(err, "copies %d: expected 1 to 16", copies);
    char harness[PATH_MAX];
    if (o && o->harness)
        rggml_strf(harness, sizeof harness, "%s", o->harness);
    else if (rggml_harness_path(harness, sizeof harness, err) != 0)
        return -1;
    const char *cc = compiler(o ? o->cc : NULL, "CC", "cc");
    const char *cxx = compiler(o ? o->cxx : NULL, "CXX", "c++");
    static const char flags_version[] = "flags 1: -O0 -g -w -std=gnu11/c++17 -rdynamic";
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, t->key, strlen(t->key));
    h = fnv_file(h, harness);
    h = fnv(h, cc, strlen(cc) + 1);
    h = fnv(h, cxx, strlen(cxx) + 1);
    h = fnv(h, flags_version, sizeof flags_version);
    char root[PATH_MAX], dir[PATH_MAX + 64], core[PATH_MAX + 80], log[PATH_MAX + 80];
    cache_root(o, root, sizeof root);
    rggml_strf(dir, sizeof dir, "%s/ggml/%016llx", root, (unsigned long long)h);
    rggml_strf(core, sizeof core, "%s/core", dir);
    rggml_strf(log, sizeof log, "%s/build.log", dir);
    if (make_dirs(core) != 0)
        return fail(err, "cannot create the build cache %s: %s", core, strerror(errno));
    rggml_strf(out, cap, "%s/syncsim_ggml-c%d", dir, copies);
    if (is_file(out))
        return 0;

    char inc1[PATH_MAX + 16], inc2[PATH_MAX + 16], def[64];
    rggml_strf(inc1, sizeof inc1, "-I%s/include", t->root);
    rggml_strf(inc2, sizeof inc2, "-I%s/src", t->root);
    snprintf(def, sizeof def, "-DGGML_SCHED_MAX_COPIES=%d", copies);
    char objs[16][PATH_MAX + 96];
    int n_objs = 0, step = 0, n_steps = t->n_sources + 2;
    for (int i = 0; i < t->n_sources; i++) {
        const char *s = t->sources[i];
        bool cpp = strstr(s, ".cpp") != NULL;
        bool per_copies = strcmp(s, "ggml-backend.cpp") == 0;
        char src[PATH_MAX + 80];
        rggml_strf(src, sizeof src, "%s/src/%s", t->root, s);
        if (per_copies)
            rggml_strf(objs[n_objs], sizeof objs[0], "%s/ggml-backend-c%d.o", dir, copies);
        else
            rggml_strf(objs[n_objs], sizeof objs[0], "%s/%s.o", core, s);
        if (o && o->progress && !is_file(objs[n_objs])) {
            char what[128];
            snprintf(what, sizeof what, "compiling %s%s", s, per_copies ? " (copies)" : "");
            o->progress(o->progress_ctx, what, step, n_steps);
        }
        step++;
        char *argv[] = { (char *)(cpp ? cxx : cc), cpp ? "-std=c++17" : "-std=gnu11", "-O0", "-g",
                         "-w", inc1, inc2, def, "-DGGML_VERSION=\"syncsim\"",
                         "-DGGML_COMMIT=\"syncsim\"", "-c", src, "-o", objs[n_objs], NULL };
        if (make_file(argv, 13, objs[n_objs], log, err) != 0)
            return -1;
        n_objs++;
    }
    char hobj[PATH_MAX + 96];
    rggml_strf(hobj, sizeof hobj, "%s/syncsim_ggml-c%d.o", dir, copies);
    if (o && o->progress)
        o->progress(o->progress_ctx, "compiling syncsim_ggml.c (the recording harness)", step,
                    n_steps);
    step++;
    char *hargv[] = { (char *)cc, "-std=gnu11", "-O0", "-g", "-w", inc1, inc2, def, "-c",
                      harness, "-o", hobj, NULL };
    if (make_file(hargv, 11, hobj, log, err) != 0)
        return -1;
    if (o && o->progress)
        o->progress(o->progress_ctx, "linking", step, n_steps);
    char *largv[24];
    int k = 0;
    largv[k++] = (char *)cxx;
    largv[k++] = "-rdynamic";
    largv[k++] = "-o";
    int out_arg = k;
    largv[k++] = out;
    largv[k++] = hobj;
    for (int i = 0; i < n_objs; i++)
        largv[k++] = objs[i];
    largv[k++] = "-lm";
    largv[k++] = "-lpthread";
    largv[k++] = "-ldl";
    largv[k] = NULL;
    if (make_file(largv, out_arg, out, log, err) != 0)
        return -1;
    if (o && o->progress)
        o->progress(o->progress_ctx, "built", n_steps, n_steps);
    return 0;
}

/* cp -R of src/ and include/ (what the build reads) into dir. */
static int copy_tree(const char *from, const char *to, trace_error *err)
{
    char qf[PATH_MAX + 16], qt[PATH_MAX + 16], cmd[2 * PATH_MAX + 64];
    shell_quote(from, qf, sizeof qf);
    shell_quote(to, qt, sizeof qt);
    rggml_strf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp -R %s/src %s/include %s/", qt, qt,
             qf, qf, qt);
    if (system(cmd) != 0)
        return fail(err, "cannot copy %s into %s", from, to);
    return 0;
}

int rggml_tree_patch(const rggml_tree *t, const char *patch, const rggml_build_opts *o,
                     rggml_tree *t_out, trace_error *err)
{
    if (!is_file(patch))
        return fail(err, "%s: no such patch", patch);
    char root[PATH_MAX], dir[PATH_MAX + 128];
    cache_root(o, root, sizeof root);
    uint64_t h = fnv_file(0xcbf29ce484222325ull, patch);
    rggml_strf(dir, sizeof dir, "%s/ggml/patched/%s-%016llx", root, t->key, (unsigned long long)h);
    if (make_dirs(dir) != 0)
        return fail(err, "cannot create %s: %s", dir, strerror(errno));
    if (copy_tree(t->root, dir, err) != 0)
        return -1;
    char qd[PATH_MAX + 160], qp[PATH_MAX + 16], cmd[3 * PATH_MAX], line[512];
    shell_quote(dir, qd, sizeof qd);
    shell_quote(patch, qp, sizeof qp);
    rggml_strf(cmd, sizeof cmd, "patch -p1 --batch --forward -d %s -i %s > %s/patch.log 2>&1", qd,
             qp, qd);
    if (system(cmd) != 0) {
        char log[PATH_MAX + 160];
        rggml_strf(log, sizeof log, "%s/patch.log", dir);
        FILE *f = fopen(log, "r");
        line[0] = '\0';
        /* the line that says why (patch's own words) */
        while (f && fgets(line, sizeof line, f) && !strstr(line, "FAILED") &&
               !strstr(line, "can't find") && !strstr(line, "Only garbage"))
            ;
        if (f)
            fclose(f);
        line[strcspn(line, "\n")] = '\0';
        return fail(err, "%s does not apply to %s%s%s", patch, t->root, line[0] ? ": " : "", line);
    }
    if (rggml_tree_open(dir, t_out, err) != 0)
        return -1;
    snprintf(t_out->describe, sizeof t_out->describe, "%.60s + %.60s", t->describe,
             strrchr(patch, '/') ? strrchr(patch, '/') + 1 : patch);
    return 0;
}
