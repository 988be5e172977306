/*
 * tmpdir.h -- a cmocka fixture shared by tests that write files: a fresh
 * directory under /tmp and the path of a database in it, removed with
 * everything in it afterwards.
 */
#ifndef SYNCSIM_TESTS_TMPDIR_H
#define SYNCSIM_TESTS_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
