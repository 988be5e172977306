/*
 * import_test_util.h -- what the importer tests share: opening a capture
 * into memory, counting its statements, reading its metadata.
 */
#ifndef SYNCSIM_TESTS_IMPORT_TEST_UTIL_H
#define SYNCSIM_TESTS_IMPORT_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "traces/trace.h"

#define SHARED_CAPTURE(name) SYNCSIM_SHARED_DIR "/external-traces/" name
#define REPO_CAPTURE(name) SYNCSIM_SOURCE_DIR "/tests/data/captures/" name

/* Opens path (with an optional companion) and loads it; fails the test on
 * error. The caller frees the trace. */
static inline trace *load_capture(const char *path, const char *companion)
{
    trace_source src;
    trace_source_opts o = { .companion = companion, .as_recorded = true };
    trace_error err = { 0 };
    trace *t = NULL;
    if (trace_source_open(&src, path, &o, &err) != 0)
        fail_msg("%s", err.msg);
    if (trace_source_load(&src, &t, &err) != 0)
        fail_msg("%s", err.msg);
    trace_source_close(&src);
    return t;
}

/* The error opening path gives (test fails if it opens). */
static inline trace_error open_error(const char *path, const char *companion)
{
    trace_source src;
    trace_source_opts o = { .companion = companion, .as_recorded = true };
    trace_error err = { 0 };
    if (trace_source_open(&src, path, &o, &err) == 0) {
        trace_source_close(&src);
        fail_msg("%s opened, expected an error", path);
    }
    return err;
}

static inline uint64_t count_kind(const trace *t, trace_kind k)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        n += s.kind == k;
    }
    return n;
}

static inline uint32_t count_queues(const trace *t, trace_queue_kind k)
{
    uint32_t n = 0;
    for (uint32_t q = 0; q < t->n_queues; q++)
        n += t->queues[q].kind == k;
    return n;
}

static inline void assert_meta(const trace *t, const char *key, const char *value)
{
    const char *v = trace_get_meta(t, key);
    if (!v)
        fail_msg("no metadata %s", key);
    assert_string_equal(v, value);
}

/* The value of attribute key of s, or NULL. */
static inline const char *stmt_attr(const trace *t, const trace_stmt *s, const char *key)
{
    for (uint32_t a = 0; a < s->n_attr; a++)
        if (strcmp(trace_str(t, s->attr[a].key), key) == 0)
            return trace_str(t, s->attr[a].value);
    return NULL;
}

/* The first statement labelled label; fails the test when none. */
static inline trace_stmt find_label(const trace *t, const char *label)
{
    trace_stmt s;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        if (s.label != TRACE_NONE && strcmp(trace_str(t, s.label), label) == 0)
            return s;
    }
    fail_msg("no statement labelled %s", label);
    return s;
}

static inline void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Writes text to a fresh file /tmp/syncsim-cudalog-XXXXXX; its name into
 * path (cap bytes). The caller unlinks it. */
static inline void write_log(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "/tmp/syncsim-cudalog-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, text, strlen(text));
}

/* The capture a log's text loads as (written to a file, loaded, removed). */
static inline trace *load_log(const char *text)
{
    char path[64];
    write_log(path, sizeof path, text);
    trace *t = load_capture(path, NULL);
    unlink(path);
    return t;
}

#endif
