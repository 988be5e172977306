/*
 * tmpdir.h -- a cmocka fixture shared by tests that write files: a fresh
 * directory under /tmp and the path of a database in it, removed with
 * everything in it afterwards.
 */
#ifndef SYNCSIM_TESTS_TMPDIR_H
#define SYNCSIM_TESTS_TMPDIR_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

typedef struct fixture {
    char dir[64];
    char db[128];           /* DIR/DB_NAME, not created */
} fixture;

/* The database file's name in the directory (commands in tests name it). */
#define TMPDIR_DB_NAME "t.db"

static inline int tmpdir_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/syncsim-test-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->db, sizeof f->db, "%s/" TMPDIR_DB_NAME, f->dir);
    *state = f;
    return 0;
}

static inline int tmpdir_teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

/* Runs a shell command in the fixture's directory; returns its exit status
 * and, when out is given, what it printed (stdout and stderr, truncated to
 * cap - 1 bytes). */
static inline int tmpdir_sh(const fixture *f, char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int tmpdir_sh(const fixture *f, char *out, size_t cap, const char *fmt, ...)
{
    char cmd[2048], full[2200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "cd %s && %s 2>&1", f->dir, cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t n = 0;
    char sink[4096];
    for (;;) {
        size_t got = out && n + 1 < cap ? fread(out + n, 1, cap - 1 - n, p)
                                        : fread(sink, 1, sizeof sink, p);
        if (got == 0)
            break;
        if (out && n + 1 < cap)
            n += got;
    }
    if (out)
        out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Writes text to the file name in the fixture's directory. 0 or -1. */
static inline int tmpdir_write(const fixture *f, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    int rc = fputs(text, fp) < 0 ? -1 : 0;
    return fclose(fp) != 0 ? -1 : rc;
}

#endif
