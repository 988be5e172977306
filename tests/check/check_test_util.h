/*
 * check_test_util.h -- builds small in-memory traces for the checker tests
 * and queries reports. Header-only (static functions) so that each test
 * file stays one executable.
 *
 *   trace *t = tb_new();
 *   tb_host(t, "host"); tb_stream(t, "s0", "0"); tb_buf(t, "A", 4096);
 *   tb_op(t, "s0", "mm0", "r:A w:A[0:16]");
 *   check_report *rep = tb_check(t);
 *
 * Every statement gets line = its seq + 1, so Q@LINE names work.
 */
#ifndef SYNCSIM_CHECK_TEST_UTIL_H
#define SYNCSIM_CHECK_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "traces/trace.h"

static uint32_t tb_by_host = TRACE_NONE;   /* by= of the next stream statements */

static inline trace *tb_new(void)
{
    tb_by_host = TRACE_NONE;
    return trace_new();
}

static inline uint32_t tb_q(trace *t, const char *name)
{
    uint32_t q = trace_find_queue(t, name, strlen(name));
    if (q == TRACE_NONE) {
        fprintf(stderr, "tb: no queue %s\n", name);
        abort();
    }
    return q;
}

static inline uint32_t tb_host(trace *t, const char *name)
{
    return trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_HOST, TRACE_NONE);
}

static inline uint32_t tb_stream(trace *t, const char *name, const char *dev)
{
    return trace_add_queue(t, trace_intern_cstr(t, name), TRACE_QUEUE_STREAM,
                           trace_intern_cstr(t, dev));
}

static inline uint32_t tb_buf(trace *t, const char *name, uint64_t size)
{
    return trace_add_root_buffer(t, trace_intern_cstr(t, name), size, TRACE_LOC_UNSPECIFIED,
                                 TRACE_NONE, false);
}

static inline uint32_t tb_view(trace *t, const char *name, const char *parent, uint64_t off,
                        uint64_t size)
{
    uint32_t p = trace_find_buffer(t, parent, strlen(parent));
    return trace_add_view(t, trace_intern_cstr(t, name), p, off, size);
}

/* Parses "r:A w:B[0:16] rw:C[8:]" into acc (at most 8). */
static inline uint32_t tb_parse_access(trace *t, const char *spec, trace_access *acc)
{
    uint32_t n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    for (char *tok = strtok(buf, " "); tok && n < 8; tok = strtok(NULL, " ")) {
        trace_access a = { 0 };
        char *colon = strchr(tok, ':');
        *colon = '\0';
        a.mode = strcmp(tok, "r") == 0 ? TRACE_R : strcmp(tok, "w") == 0 ? TRACE_W : TRACE_RW;
        char *name = colon + 1, *br = strchr(name, '[');
        if (br)
            *br = '\0';
        a.buffer = trace_find_buffer(t, name, strlen(name));
        if (a.buffer == TRACE_NONE) {
            fprintf(stderr, "tb: no buffer %s\n", name);
            abort();
        }
        a.lo = 0;
        a.hi = t->buffers[a.buffer].size;
        if (br) {
            a.lo = strtoull(br + 1, &br, 0);
            br++; /* ':' */
            if (*br != ']')
                a.hi = strtoull(br, NULL, 0);
            a.form = TRACE_REF_RANGE;
        }
        acc[n++] = a;
    }
    return n;
}

static inline uint64_t tb_stmt_full(trace *t, const char *q, trace_kind kind, const char *label,
                             uint32_t object, const char *access, uint64_t count,
                             const char *coll_kind)
{
    trace_stmt s;
    trace_access acc[8];
    trace_stmt_init(&s);
    s.queue = tb_q(t, q);
    s.kind = kind;
    s.label = label ? trace_intern_cstr(t, label) : TRACE_NONE;
    s.object = object;
    s.count = count;
    s.coll_kind = coll_kind ? trace_intern_cstr(t, coll_kind) : TRACE_NONE;
    s.n_access = tb_parse_access(t, access, acc);
    s.access = acc;
    s.line = (uint32_t)t->n_stmts + 1;
    if (t->queues[s.queue].kind == TRACE_QUEUE_STREAM)
        s.by = tb_by_host;
    trace_append(t, &s);
    return t->n_stmts - 1;
}

static inline uint64_t tb_stmt(trace *t, const char *q, trace_kind kind, const char *label,
                        const char *object, const char *access)
{
    return tb_stmt_full(t, q, kind, label, object ? trace_intern_cstr(t, object) : TRACE_NONE,
                        access, 0, NULL);
}

static inline uint64_t tb_op(trace *t, const char *q, const char *label, const char *access)
{
    return tb_stmt(t, q, TRACE_OP, label, NULL, access);
}

static inline uint64_t tb_record(trace *t, const char *q, const char *ev)
{
    return tb_stmt(t, q, TRACE_RECORD, NULL, ev, NULL);
}

static inline uint64_t tb_wait(trace *t, const char *q, const char *ev)
{
    return tb_stmt(t, q, TRACE_WAIT, NULL, ev, NULL);
}

static inline uint64_t tb_signal(trace *t, const char *q, const char *flag)
{
    return tb_stmt(t, q, TRACE_SIGNAL, NULL, flag, NULL);
}

static inline uint64_t tb_await(trace *t, const char *q, const char *flag)
{
    return tb_stmt(t, q, TRACE_AWAIT, NULL, flag, NULL);
}

/* target: a stream name, "all" or "device=D". */
static inline uint64_t tb_sync(trace *t, const char *host, const char *target)
{
    trace_stmt s;
    trace_stmt_init(&s);
    s.queue = tb_q(t, host);
    s.kind = TRACE_SYNC;
    if (strcmp(target, "all") == 0)
        s.sync_scope = TRACE_SYNC_ALL;
    else if (strncmp(target, "device=", 7) == 0) {
        s.sync_scope = TRACE_SYNC_DEVICE;
        s.object = trace_intern_cstr(t, target + 7);
    } else {
        s.sync_scope = TRACE_SYNC_QUEUE;
        s.object = tb_q(t, target);
    }
    s.line = (uint32_t)t->n_stmts + 1;
    trace_append(t, &s);
    return t->n_stmts - 1;
}

static inline uint64_t tb_barrier(trace *t, const char *q, const char *name, uint64_t count)
{
    return tb_stmt_full(t, q, TRACE_BARRIER, NULL, trace_intern_cstr(t, name), NULL, count, NULL);
}

static inline uint64_t tb_coll(trace *t, const char *q, const char *comm, const char *kind,
                        uint64_t size, const char *label, const char *access)
{
    return tb_stmt_full(t, q, TRACE_COLLECTIVE, label, trace_intern_cstr(t, comm), access, size,
                        kind);
}

static inline uint64_t tb_alloc_free(trace *t, const char *q, trace_kind kind, const char *buf)
{
    return tb_stmt_full(t, q, kind, NULL, trace_find_buffer(t, buf, strlen(buf)), NULL, 0, NULL);
}

/* More lifetime marks than a range keeps (docs/checker.md): h0 frees X and
 * signals f, h1 awaits f (it learns of h0 just after that free), then h0
 * allocs and frees X nine times more and allocs it again. A read of X on
 * h1 after this could need the forgotten first marks: it is not judged for
 * use after free. */
static inline trace *tb_more_marks_than_kept(void)
{
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_host(t, "h1");
    tb_buf(t, "X", 64);
    tb_alloc_free(t, "h0", TRACE_FREE, "X");
    tb_signal(t, "h0", "f");
    tb_await(t, "h1", "f");
    for (int i = 0; i < 9; i++) {
        tb_alloc_free(t, "h0", TRACE_ALLOC, "X");
        tb_alloc_free(t, "h0", TRACE_FREE, "X");
    }
    tb_alloc_free(t, "h0", TRACE_ALLOC, "X");
    return t;
}

static inline void tb_expect(trace *t, trace_finding_kind kind, const char *kv)
{
    trace_attr a[8];
    uint32_t n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", kv ? kv : "");
    for (char *tok = strtok(buf, " "); tok && n < 8; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        *eq = '\0';
        a[n].key = trace_intern_cstr(t, tok);
        a[n].value = trace_intern_cstr(t, eq + 1);
        n++;
    }
    trace_add_expect(t, kind, 0, a, n);
}

static inline check_report *tb_check_opt(trace *t, const check_options *opt)
{
    trace_reader r;
    trace_reader_memory(&r, t);
    check_report *rep = NULL;
    trace_error err = { 0 };
    if (check_trace(&r, opt, &rep, &err) != 0) {
        fprintf(stderr, "check_trace: %s\n", err.msg);
        abort();
    }
    trace_reader_close(&r);
    return rep;
}

static inline check_report *tb_check(trace *t)
{
    check_options opt = { 0 };
    return tb_check_opt(t, &opt);
}

static inline const char *tb_name(const trace *t, const trace_stmt_ref *r, char *buf, size_t cap)
{
    if (r->label != TRACE_NONE)
        snprintf(buf, cap, "%s", trace_str(t, r->label));
    else
        snprintf(buf, cap, "%s@%u", trace_str(t, t->queues[r->queue].name), r->line);
    return buf;
}

/* The race between first and second (names as in expect lines), or NULL. */
static inline const trace_finding *tb_race(const check_report *rep, const trace *t, const char *first,
                                    const char *second)
{
    char a[128], b[128];
    for (size_t i = 0; i < check_report_count(rep); i++) {
        const trace_finding *f = check_report_finding(rep, i);
        if (f->kind == TRACE_FINDING_RACE && strcmp(tb_name(t, &f->first, a, sizeof a), first) == 0 &&
            strcmp(tb_name(t, &f->second, b, sizeof b), second) == 0)
            return f;
    }
    return NULL;
}

static inline const trace_finding *tb_find(const check_report *rep, trace_finding_kind k)
{
    for (size_t i = 0; i < check_report_count(rep); i++)
        if (check_report_finding(rep, i)->kind == k)
            return check_report_finding(rep, i);
    return NULL;
}

/* Parts of finding f with role `role`; how many have text containing sub
 * (sub NULL: how many there are). */
static inline uint32_t tb_parts(const trace_finding *f, trace_part_role role, const char *sub)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < f->n_parts; i++)
        if (f->parts[i].role == role &&
            (!sub || (f->parts[i].text && strstr(f->parts[i].text, sub))))
            n++;
    return n;
}

#endif
