/* test_text.c -- the text trace format: the parser (every construct of
 * docs/trace-format.md into the right model fields, every error with its
 * line and column), the writer (round trips, Q@LINE renumbering) and
 * streaming with constant memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "traces/trace.h"

#define PRELUDE                                                                            \
    "syncsim-trace 1\n"                                                                    \
    "queue h host\n"                                                                       \
    "queue s stream device=0\n"                                                            \
    "buffer A size=64 device=0\n"                                                          \
    "buffer X size=64 host\n"

/* ------------------------------------------------------------------ */
/* Helpers.                                                            */

static trace *parse_ok(const char *text)
{
    trace *t = NULL;
    trace_error err = { 0 };
    int rc = trace_text_parse_string("t.trace", text, strlen(text), &t, &err);
    if (rc != 0)
        fail_msg("parse failed: %s", err.msg);
    assert_non_null(t);
    return t;
}

/* Parsing text fails with a message that starts with want. */
static void parse_fails(const char *text, const char *want)
{
    trace *t = NULL;
    trace_error err = { 0 };
    int rc = trace_text_parse_string("t.trace", text, strlen(text), &t, &err);
    if (rc != -1 || strncmp(err.msg, want, strlen(want)) != 0)
        fail_msg("expected '%s', got rc %d: %s", want, rc, err.msg);
    trace_free(t);
}

static trace_stmt stmt_at(const trace *t, uint64_t i)
{
    trace_stmt s;
    assert_true(i < t->n_stmts);
    trace_stmt_at(t, i, &s);
    return s;
}

static const char *str(const trace *t, uint32_t id)
{
    return trace_str(t, id);
}

static const char *attr_value(const trace *t, const trace_stmt *s, const char *key)
{
    for (uint32_t i = 0; i < s->n_attr; i++)
        if (strcmp(str(t, s->attr[i].key), key) == 0)
            return str(t, s->attr[i].value);
    return NULL;
}

/* Writes r as text into a malloc'd string. */
static char *write_reader(trace_reader *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    trace_error err = { 0 };
    int rc = trace_text_write(f, r, &err);
    fclose(f);
    if (rc != 0)
        fail_msg("write failed: %s", err.msg);
    return buf;
}

static char *write_trace(trace *t)
{
    trace_reader r;
    trace_reader_memory(&r, t);
    char *text = write_reader(&r);
    trace_reader_close(&r);
    return text;
}

/* Index of the statement of a at source line `line`, or -1. */
static int64_t stmt_of_line(const trace *t, uint64_t line)
{
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s = stmt_at(t, i);
        if (s.line == line)
            return (int64_t)i;
    }
    return -1;
}

/* An expect value of a, as b should hold it after the writer renumbered
 * statement lines. */
static void assert_expect_value(const trace *a, const trace_expect *ea, const trace_attr *kva,
                                const trace *b, const trace_attr *kvb)
{
    const char *key = str(a, kva->key);
    const char *va = str(a, kva->value), *vb = str(b, kvb->value);
    char want[256];
    snprintf(want, sizeof want, "%s", va);
    if (ea->kind == TRACE_FINDING_REDUNDANT_SYNC && strcmp(key, "line") == 0) {
        int64_t i = stmt_of_line(a, strtoull(va, NULL, 0));
        if (i >= 0)
            snprintf(want, sizeof want, "%u", stmt_at(b, (uint64_t)i).line);
    } else if (strcmp(key, "first") == 0 || strcmp(key, "second") == 0) {
        const char *at = strrchr(va, '@');
        if (at && at > va && at[1] && strspn(at + 1, "0123456789") == strlen(at + 1)) {
            int64_t i = stmt_of_line(a, strtoull(at + 1, NULL, 10));
            if (i >= 0)
                snprintf(want, sizeof want, "%.*s@%u", (int)(at - va), va,
                         stmt_at(b, (uint64_t)i).line);
        }
    }
    assert_string_equal(vb, want);
}

/* Declarations, statements and expectations of a and b are equal. */
static void assert_traces_equal(const trace *a, const trace *b)
{
    assert_int_equal(a->n_queues, b->n_queues);
    for (uint32_t i = 0; i < a->n_queues; i++) {
        assert_string_equal(str(a, a->queues[i].name), str(b, b->queues[i].name));
        assert_int_equal(a->queues[i].kind, b->queues[i].kind);
        assert_string_equal(str(a, a->queues[i].device), str(b, b->queues[i].device));
    }
    assert_int_equal(a->n_buffers, b->n_buffers);
    for (uint32_t i = 0; i < a->n_buffers; i++) {
        const trace_buffer *x = &a->buffers[i], *y = &b->buffers[i];
        assert_string_equal(str(a, x->name), str(b, y->name));
        assert_int_equal(x->size, y->size);
        assert_int_equal(x->parent, y->parent);
        assert_int_equal(x->offset, y->offset);
        assert_int_equal(x->loc, y->loc);
        assert_string_equal(str(a, x->device), str(b, y->device));
        assert_int_equal(x->pinned, y->pinned);
    }
    assert_int_equal(a->n_stmts, b->n_stmts);
    for (uint64_t i = 0; i < a->n_stmts; i++) {
        trace_stmt x = stmt_at(a, i), y = stmt_at(b, i);
        assert_true(trace_stmt_equal(a, &x, b, &y));
    }
    assert_int_equal(a->n_expects, b->n_expects);
    for (uint32_t i = 0; i < a->n_expects; i++) {
        const trace_expect *x = &a->expects[i], *y = &b->expects[i];
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->n_kv, y->n_kv);
        for (uint32_t k = 0; k < x->n_kv; k++) {
            assert_string_equal(str(a, x->kv[k].key), str(b, y->kv[k].key));
            assert_expect_value(a, x, &x->kv[k], b, &y->kv[k]);
        }
    }
}

/* text -> model -> text -> model: equal models, and the second text is the
 * first (the writer's output is a fixed point). Also through a streaming
 * reader straight to the writer. */
static void assert_round_trip(const char *text)
{
    trace *a = parse_ok(text);
    char *out1 = write_trace(a);
    trace *b = parse_ok(out1);
    assert_traces_equal(a, b);
    char *out2 = write_trace(b);
    assert_string_equal(out1, out2);

    trace_reader r;
    trace_error err = { 0 };
    assert_int_equal(trace_text_open_string("t.trace", text, strlen(text), &r, &err), 0);
    char *out3 = write_reader(&r);
    trace_reader_close(&r);
    trace *c = parse_ok(out3);
    assert_traces_equal(a, c);
    trace_free(a);
    trace_free(b);
    trace_free(c);
    free(out1);
    free(out2);
    free(out3);
}

/* ------------------------------------------------------------------ */
/* Constructs.                                                         */

static void test_text_header_comments_and_blank_lines(void **state)
{
    (void)state;
    trace *t = parse_ok("# a comment before the header\n"
                        "\n"
                        "   syncsim-trace 1   # trailing comment\r\n"
                        "queue h#1 host #a comment: # begins a word\n"
                        "\t\n"
                        "queue s stream device=0 # comment\n");
    assert_int_equal(t->n_queues, 2);
    assert_string_equal(str(t, t->queues[0].name), "h#1");
    assert_int_equal(t->n_stmts, 0);
    trace_free(t);
}

static void test_text_queue_declarations(void **state)
{
    (void)state;
    trace *t = parse_ok("syncsim-trace 0x1\n"
                        "queue h host\n"
                        "queue s0 stream device=0\n"
                        "queue s1 stream device=cuda:1\n"
                        "queue \"my stream\" stream device=\"GPU 2\"\n");
    assert_int_equal(t->n_queues, 4);
    assert_int_equal(t->n_host_queues, 1);
    assert_int_equal(t->queues[0].kind, TRACE_QUEUE_HOST);
    assert_int_equal(t->queues[0].device, TRACE_NONE);
    assert_int_equal(t->queues[1].kind, TRACE_QUEUE_STREAM);
    assert_string_equal(str(t, t->queues[1].device), "0");
    assert_string_equal(str(t, t->queues[2].device), "cuda:1");
    assert_string_equal(str(t, t->queues[3].name), "my stream");
    assert_string_equal(str(t, t->queues[3].device), "GPU 2");
    trace_free(t);
}

static void test_text_buffer_declarations(void **state)
{
    (void)state;
    trace *t = parse_ok("syncsim-trace 1\n"
                        "buffer arena size=0x10000 host pinned\n"
                        "buffer d size=4096 device=0\n"
                        "buffer u size=1\n"
                        "buffer v in=arena offset=1024 size=4096\n"
                        "buffer w size=100 offset=8 in=v\n");
    assert_int_equal(t->n_buffers, 5);
    const trace_buffer *b = t->buffers;
    assert_int_equal(b[0].size, 65536);
    assert_int_equal(b[0].loc, TRACE_LOC_HOST);
    assert_true(b[0].pinned);
    assert_int_equal(b[0].parent, TRACE_NONE);
    assert_int_equal(b[1].loc, TRACE_LOC_DEVICE);
    assert_string_equal(str(t, b[1].device), "0");
    assert_false(b[1].pinned);
    assert_int_equal(b[2].loc, TRACE_LOC_UNSPECIFIED);
    assert_int_equal(b[3].parent, 0);
    assert_int_equal(b[3].offset, 1024);
    assert_int_equal(b[3].size, 4096);
    assert_int_equal(b[4].parent, 3);
    assert_int_equal(b[4].root, 0);
    assert_int_equal(b[4].root_offset, 1024 + 8);
    assert_int_equal(b[4].loc, TRACE_LOC_HOST);
    trace_free(t);
}

static void test_text_op_accesses_and_ref_forms(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "buffer v in=A offset=16 size=32\n"
                                "s op mm r:A w:A[8:16] rw:v[4:] r:v[0:0]\n"
                                "h op think\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.kind, TRACE_OP);
    assert_string_equal(str(t, s.label), "mm");
    assert_int_equal(s.n_access, 4);
    assert_int_equal(s.access[0].mode, TRACE_R);
    assert_int_equal(s.access[0].form, TRACE_REF_WHOLE);
    assert_int_equal(s.access[0].lo, 0);
    assert_int_equal(s.access[0].hi, 64);
    assert_int_equal(s.access[1].mode, TRACE_W);
    assert_int_equal(s.access[1].form, TRACE_REF_RANGE);
    assert_int_equal(s.access[1].lo, 8);
    assert_int_equal(s.access[1].hi, 16);
    assert_int_equal(s.access[2].mode, TRACE_RW);
    assert_int_equal(s.access[2].form, TRACE_REF_FROM);
    assert_int_equal(s.access[2].buffer, 2);
    assert_int_equal(s.access[2].lo, 4);
    assert_int_equal(s.access[2].hi, 32);
    assert_int_equal(s.access[3].lo, 0);
    assert_int_equal(s.access[3].hi, 0);
    s = stmt_at(t, 1);
    assert_int_equal(s.n_access, 0);
    trace_free(t);
}

static void test_text_copy_is_read_then_write(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "s copy up X[0:32] A[32:]\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.kind, TRACE_COPY);
    assert_string_equal(str(t, s.label), "up");
    assert_int_equal(s.n_access, 2);
    assert_int_equal(s.access[0].buffer, 1);
    assert_int_equal(s.access[0].mode, TRACE_R);
    assert_int_equal(s.access[1].buffer, 0);
    assert_int_equal(s.access[1].mode, TRACE_W);
    assert_int_equal(s.access[1].lo, 32);
    assert_int_equal(s.access[1].hi, 64);
    trace_free(t);
}

static void test_text_record_wait_signal_await(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "s record e0\nh wait e0\ns wait e0\nh signal f\ns await f\n");
    trace_kind kinds[] = { TRACE_RECORD, TRACE_WAIT, TRACE_WAIT, TRACE_SIGNAL, TRACE_AWAIT };
    const char *objects[] = { "e0", "e0", "e0", "f", "f" };
    assert_int_equal(t->n_stmts, 5);
    for (uint64_t i = 0; i < 5; i++) {
        trace_stmt s = stmt_at(t, i);
        assert_int_equal(s.kind, kinds[i]);
        assert_string_equal(str(t, s.object), objects[i]);
        assert_int_equal(s.label, TRACE_NONE);
    }
    trace_free(t);
}

/* A declared semaphore's signal sets a value, its await waits for one; an
 * undeclared name stays a flag, and set= on a flag's signal is metadata as
 * it always was (older traces keep their meaning). */
static void test_text_value_semaphores(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "semaphore S\ns signal S set=3\nh await S >=0x2\n"
                                "h signal f set=3\ns await f\n");
    assert_int_equal(t->n_stmts, 4);
    trace_stmt a = stmt_at(t, 0), b = stmt_at(t, 1), c = stmt_at(t, 2), d = stmt_at(t, 3);
    assert_true(a.sem && a.kind == TRACE_SIGNAL && a.count == 3);
    assert_true(b.sem && b.kind == TRACE_AWAIT && b.count == 2);
    assert_string_equal(str(t, b.object), "S");
    assert_false(c.sem);
    assert_int_equal(c.count, 0);
    assert_string_equal(attr_value(t, &c, "set"), "3");
    assert_false(d.sem);
    trace_free(t);
    /* a queue named semaphore keeps its statements */
    t = parse_ok(PRELUDE "queue semaphore host\nsemaphore op think\ns op k w:A by=h\n");
    assert_int_equal(t->n_stmts, 2);
    trace_free(t);
}

static void test_text_sync_targets(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "queue all stream device=1\n"
                                "h sync s\nh sync device=0\nh sync all\nh sync \"all\"\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.sync_scope, TRACE_SYNC_QUEUE);
    assert_int_equal(s.object, 1);
    s = stmt_at(t, 1);
    assert_int_equal(s.sync_scope, TRACE_SYNC_DEVICE);
    assert_string_equal(str(t, s.object), "0");
    s = stmt_at(t, 2);
    assert_int_equal(s.sync_scope, TRACE_SYNC_ALL);
    assert_int_equal(s.object, TRACE_NONE);
    s = stmt_at(t, 3);
    assert_int_equal(s.sync_scope, TRACE_SYNC_QUEUE);
    assert_int_equal(s.object, 2);
    trace_free(t);
}

static void test_text_barrier_has_name_and_count(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "h barrier b0 count=3\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.kind, TRACE_BARRIER);
    assert_string_equal(str(t, s.object), "b0");
    assert_int_equal(s.count, 3);
    trace_free(t);
}

static void test_text_collective_fields(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "s collective world allreduce size=2 rw:A label=ar0 tag=x\n"
                                "s collective world allgather size=2\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.kind, TRACE_COLLECTIVE);
    assert_string_equal(str(t, s.object), "world");
    assert_string_equal(str(t, s.coll_kind), "allreduce");
    assert_int_equal(s.count, 2);
    assert_int_equal(s.n_access, 1);
    assert_int_equal(s.access[0].mode, TRACE_RW);
    assert_string_equal(str(t, s.label), "ar0");
    assert_int_equal(s.n_attr, 1);
    s = stmt_at(t, 1);
    assert_int_equal(s.label, TRACE_NONE);
    assert_int_equal(s.n_access, 0);
    trace_free(t);
}

static void test_text_alloc_free_name_root_buffers(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "s alloc A\ns free A\nh free X\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.kind, TRACE_ALLOC);
    assert_int_equal(s.object, 0);
    s = stmt_at(t, 2);
    assert_int_equal(s.kind, TRACE_FREE);
    assert_int_equal(s.object, 1);
    trace_free(t);
}

static void test_text_attributes_fill_fields_and_keep_order(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "queue h2 host\n"
                                "s op k w:A split=3 by=h2 t=100 node=\"mm 12\" dur=0x10 backend=CUDA0\n"
                                "h op j w:X t=5\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.by, 2);
    assert_int_equal(s.t, 100);
    assert_int_equal(s.dur, 16);
    assert_int_equal(s.n_attr, 3);
    assert_string_equal(str(t, s.attr[0].key), "split");
    assert_string_equal(str(t, s.attr[0].value), "3");
    assert_string_equal(str(t, s.attr[1].key), "node");
    assert_string_equal(str(t, s.attr[1].value), "mm 12");
    assert_string_equal(attr_value(t, &s, "backend"), "CUDA0");
    s = stmt_at(t, 1);
    assert_int_equal(s.by, TRACE_NONE);
    assert_int_equal(s.t, 5);
    assert_int_equal(s.dur, TRACE_TIME_NONE);
    trace_free(t);
}

static void test_text_quoted_names_and_escapes(void **state)
{
    (void)state;
    trace *t = parse_ok("syncsim-trace 1\n"
                        "queue \"queue\" host\n"
                        "buffer \"my buf\" size=8\n"
                        "\"queue\" op \"layer \\\"3\\\" \\\\ attn\" rw:\"my buf\"[2:4] w:\"my buf\"\n");
    trace_stmt s = stmt_at(t, 0);
    assert_string_equal(str(t, t->queues[s.queue].name), "queue");
    assert_string_equal(str(t, s.label), "layer \"3\" \\ attn");
    assert_int_equal(s.access[0].lo, 2);
    assert_int_equal(s.access[1].form, TRACE_REF_WHOLE);
    trace_free(t);
}

static void test_text_expect_forms(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "s record e\n"
                                "expect clean\n"
                                "expect race type=RAW first=a second=s@6 buffer=A\n"
                                "expect wait-unrecorded event=e\n"
                                "expect hang queue=h queue=s\n"
                                "expect collective-mismatch comm=world\n"
                                "expect use-after-free buffer=A second=b\n"
                                "expect redundant-sync line=6\n");
    assert_int_equal(t->n_expects, 7);
    assert_int_equal(t->expects[0].kind, TRACE_FINDING_CLEAN);
    assert_int_equal(t->expects[0].n_kv, 0);
    assert_int_equal(t->expects[1].kind, TRACE_FINDING_RACE);
    assert_int_equal(t->expects[1].line, 8);
    assert_int_equal(t->expects[1].n_kv, 4);
    assert_string_equal(str(t, t->expects[1].kv[2].value), "s@6");
    assert_int_equal(t->expects[3].n_kv, 2);
    assert_string_equal(str(t, t->expects[3].kv[1].value), "s");
    assert_int_equal(t->expects[6].kind, TRACE_FINDING_REDUNDANT_SYNC);
    assert_string_equal(str(t, t->expects[6].kv[0].value), "6");
    trace_free(t);
}

static void test_text_seq_counts_statements_and_line_counts_lines(void **state)
{
    (void)state;
    trace *t = parse_ok(PRELUDE "\n# c\ns record e\nqueue s2 stream device=0\ns2 wait e\n");
    trace_stmt s = stmt_at(t, 0);
    assert_int_equal(s.seq, 0);
    assert_int_equal(s.line, 8);
    s = stmt_at(t, 1);
    assert_int_equal(s.seq, 1);
    assert_int_equal(s.line, 10);
    trace_free(t);
}

static void test_text_litmus_files_parse(void **state)
{
    (void)state;
    const char *dir = SYNCSIM_SHARED_DIR "/litmus";
    DIR *d = opendir(dir);
    if (!d) {
        printf("skipped: %s is missing\n", dir);
        skip();
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        trace *t = NULL;
        trace_error err = { 0 };
        if (trace_text_parse_file(path, &t, &err) != 0)
            fail_msg("%s", err.msg);
        assert_true(t->n_stmts > 0);
        assert_true(t->n_expects > 0);
        trace_free(t);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

/* ------------------------------------------------------------------ */
/* Errors.                                                             */

typedef struct bad_input {
    const char *text;
    unsigned line, col;
    const char *says;       /* a part of the message after FILE:LINE:COL: */
} bad_input;

static const bad_input bad_inputs[] = {
    { "queue h host\n", 1, 1, "expected the header 'syncsim-trace 1', found 'queue'" },
    { "", 1, 1, "found end of file" },
    { "# only\n\n", 3, 1, "found end of file" },
    { "syncsim-trace 2\n", 1, 15, "version 2 is not supported; this build reads version 1" },
    { "syncsim-trace\n", 1, 14, "expected a version number after syncsim-trace, found end of line" },
    { "syncsim-trace 1 x\n", 1, 17, "expected end of line after the header, found 'x'" },
    { "syncsim-trace one\n", 1, 15, "expected a version number, found 'one'" },
    { PRELUDE "syncsim-trace 1\n", 6, 1, "the header may appear only once" },
    { PRELUDE "s launch k\n", 6, 3, "expected a verb (op, copy, record" },
    { PRELUDE "s\n", 6, 2, "expected a verb (op, copy, record, wait, sync, barrier, signal, await, "
                           "collective, alloc, free, send or recv), found end of line" },
    { PRELUDE "s \"op\" k\n", 6, 3, "expected a verb" },
    { PRELUDE "q op k\n", 6, 1, "undeclared queue 'q'" },
    { PRELUDE "s op k r:B\n", 6, 10, "undeclared buffer 'B'" },
    { PRELUDE "queue s host\n", 6, 7, "queue 's' is already declared (line 3)" },
    { PRELUDE "buffer A size=1\n", 6, 8, "buffer 'A' is already declared (line 4)" },
    { PRELUDE "queue\n", 6, 6, "expected a queue name, found end of line" },
    { PRELUDE "queue s2 stream\n", 6, 16, "expected device=D (a stream needs its device), found end of line" },
    { PRELUDE "queue s2 stream device=\n", 6, 24, "expected a device after device=" },
    { PRELUDE "queue h2 host device=0\n", 6, 15, "device= applies only to stream queues" },
    { PRELUDE "queue h2 host pinned\n", 6, 15, "expected end of line, found 'pinned'" },
    { PRELUDE "queue q thread\n", 6, 9, "expected 'host' or 'stream', found 'thread'" },
    { PRELUDE "buffer B size=0\n", 6, 15, "size must be at least 1" },
    { PRELUDE "buffer B host\n", 6, 14, "expected size=N, found end of line" },
    { PRELUDE "buffer v in=A offset=60 size=8\n", 6, 15, "view 'v' [60, 60 + 8) lies outside its parent 'A' of size 64" },
    { PRELUDE "buffer v in=A offset=0 size=65\n", 6, 24, "lies outside its parent 'A'" },
    { PRELUDE "buffer v in=A offset=0x7fffffffffffffff size=2\n", 6, 15, "lies outside its parent" },
    { PRELUDE "buffer v in=Z offset=0 size=1\n", 6, 13, "undeclared buffer 'Z'" },
    { PRELUDE "buffer v in=A offset=0 size=1 host\n", 6, 31, "a view takes its place from its root" },
    { PRELUDE "buffer v in=A size=1\n", 6, 21, "expected offset=O (a view needs its offset), found end of line" },
    { PRELUDE "buffer B size=4 offset=1\n", 6, 17, "offset= applies only to views" },
    { PRELUDE "buffer B size=4 host device=0\n", 6, 22, "a buffer is on device=D or host, not both" },
    { PRELUDE "buffer B size=4 shared\n", 6, 17, "unknown buffer option 'shared'" },
    { PRELUDE "buffer B size=4 size=5\n", 6, 17, "duplicate buffer option 'size='" },
    { PRELUDE "buffer B size=12k\n", 6, 15, "expected a size in bytes, found '12k'" },
    { PRELUDE "buffer B size=-1\n", 6, 15, "expected a size in bytes, found '-1'" },
    { PRELUDE "buffer B size=9223372036854775808\n", 6, 15, "number '9223372036854775808' is larger than 2^63-1" },
    { PRELUDE "buffer B size=0x8000000000000000\n", 6, 15, "is larger than 2^63-1" },
    { PRELUDE "buffer B size=99999999999999999999999\n", 6, 15, "is larger than 2^63-1" },
    { PRELUDE "buffer B size=0x\n", 6, 15, "expected a size in bytes, found '0x'" },
    { PRELUDE "s op k r:A[0:65]\n", 6, 11, "range [0:65] lies outside buffer 'A' of size 64" },
    { PRELUDE "s op k r:A[9:3]\n", 6, 11, "range [9:3] has LO > HI" },
    { PRELUDE "s op k w:A[65:]\n", 6, 11, "lies outside buffer 'A'" },
    { PRELUDE "s op k r:A[1-2]\n", 6, 13, "expected ':' in NAME[LO:HI], found '-2]'" },
    { PRELUDE "s op k r:A[1:2\n", 6, 15, "expected ']' in NAME[LO:HI], found end of line" },
    { PRELUDE "s op k r:A[1:2]x\n", 6, 16, "expected a blank after ']', found 'x'" },
    { PRELUDE "s op k r:A[:2]\n", 6, 12, "expected a byte offset LO" },
    { PRELUDE "s op k r:\n", 6, 10, "expected a buffer name, found end of line" },
    { PRELUDE "s op \"k r:A\n", 6, 6, "unterminated quoted string" },
    { PRELUDE "s op \"k\\n\" r:A\n", 6, 8, "unknown escape '\\n'" },
    { PRELUDE "s op k\001\n", 6, 7, "unexpected control character 0x01" },
    { PRELUDE "s op k\rx\n", 6, 7, "unexpected control character 0x0d" },
    { PRELUDE "s op k\0 w:A\n", 6, 7, "unexpected control character 0x00" },
    { PRELUDE "h record e\n", 6, 1, "record needs a stream queue; 'h' is a host queue" },
    { PRELUDE "s sync all\n", 6, 1, "sync needs a host queue; 's' is a stream" },
    { PRELUDE "h sync h\n", 6, 8, "sync target 'h' is a host queue; expected a stream queue, device=D or all" },
    { PRELUDE "h sync q\n", 6, 8, "undeclared queue 'q'" },
    { PRELUDE "h sync\n", 6, 7, "expected a sync target (a stream queue, device=D or all), found end of line" },
    { PRELUDE "buffer B size=32 device=0\ns copy c A B\n", 7, 12, "copy source is 64 bytes but destination is 32 bytes" },
    { PRELUDE "s copy c A\n", 6, 11, "expected a destination REF, found end of line" },
    { PRELUDE "s copy c A X by=h x\n", 6, 19, "expected an attribute key=value or end of line, found 'x'" },
    { PRELUDE "buffer v in=A offset=0 size=8\ns alloc v\n", 7, 9, "alloc of view 'v': only root buffers" },
    { PRELUDE "s free Z\n", 6, 8, "undeclared buffer 'Z'" },
    { PRELUDE "queue h2 host\ns op k w:A\n", 7, 1, "by=HOST required: the trace declares more than one host queue" },
    { PRELUDE "s op k w:A\nqueue h2 host\n", 7, 7, "a second host queue declared after line 6 relied on the only one" },
    { PRELUDE "queue s2 stream device=1\ns op k w:A by=s2\n", 7, 15, "by= must name a host queue; 's2' is a stream" },
    { PRELUDE "h op k w:X by=h\n", 6, 12, "by= applies only to stream statements; 'h' is a host queue" },
    { PRELUDE "s op k by=zz\n", 6, 11, "undeclared queue 'zz'" },
    { PRELUDE "s op k by=h by=h\n", 6, 13, "duplicate attribute 'by='" },
    { PRELUDE "expect race first=a second=b\n", 6, 8, "expect race needs type=" },
    { PRELUDE "expect race type=RAR first=a second=b\n", 6, 18, "expected RAW, WAR or WAW, found 'RAR'" },
    { PRELUDE "expect race type=RAW first=a\n", 6, 8, "expect race needs second=" },
    { PRELUDE "expect crash\n", 6, 8, "unknown finding 'crash'" },
    { PRELUDE "expect\n", 6, 7, "expected a finding kind" },
    { PRELUDE "expect hang queue=h thread=x\n", 6, 21, "unknown key 'thread' for expect hang" },
    { PRELUDE "expect hang\n", 6, 8, "expect hang needs queue=" },
    { PRELUDE "expect clean x=1\n", 6, 14, "expected end of line (expect clean takes no keys), found 'x=1'" },
    { PRELUDE "expect wait-unrecorded event=a event=b\n", 6, 32, "duplicate key 'event=' in expect wait-unrecorded" },
    { PRELUDE "expect redundant-sync line=x\n", 6, 28, "expected a line number, found 'x'" },
    { PRELUDE "expect use-after-free buffer=A\n", 6, 8, "expect use-after-free needs second=" },
    { PRELUDE "expect collective-mismatch world\n", 6, 28, "expected key=value, found 'world'" },
    { PRELUDE "s record e\nexpect race type=RAW first=s@7 second=s@6\n", 7, 28,
      "line 7 holds no statement" },
    { PRELUDE "expect redundant-sync line=3\n", 6, 28, "line 3 holds no statement" },
    /* fuzz: a dangling line=04 was kept, then named a statement once rewritten */
    { "syncsim-trace 1\n#\nqueue h host\n#\nh wait e\nh wait e\nexpect redundant-sync line=04\n", 7, 28,
      "line 4 holds no statement" },
    { PRELUDE "s record e\nexpect use-after-free buffer=A second=s@99999999999\n", 7, 39,
      "line 99999999999 holds no statement" },
    { PRELUDE "s op k x:A\n", 6, 8, "expected an access r:REF, w:REF or rw:REF, found 'x:A'" },
    { PRELUDE "s op k w:A n=1 r:A\n", 6, 16, "expected an attribute key=value or end of line, found 'r:A'" },
    { PRELUDE "s op r:A\n", 6, 6, "expected a label before the accesses, found 'r:A'" },
    { PRELUDE "s op\n", 6, 5, "expected a label, found end of line" },
    { PRELUDE "h barrier b\n", 6, 12, "expected count=N, found end of line" },
    { PRELUDE "h barrier b count=0\n", 6, 19, "count must be at least 1" },
    { PRELUDE "h barrier b n=2\n", 6, 13, "expected count=N, found 'n=2'" },
    { PRELUDE "s collective w allreduce size=0\n", 6, 31, "size must be at least 1" },
    { PRELUDE "s collective w allreduce r:A\n", 6, 26, "expected size=N, found 'r:A'" },
    { PRELUDE "s op k t=1 t=2\n", 6, 12, "duplicate attribute 't='" },
    { PRELUDE "s op k t=soon\n", 6, 10, "expected a number of nanoseconds, found 'soon'" },
    { PRELUDE "s record e extra\n", 6, 12, "expected an attribute key=value or end of line, found 'extra'" },
    { PRELUDE "s op \"\" w:A\n", 6, 6, "expected a label, found empty quotes" },
    { PRELUDE "s op k n=a\"b\"\n", 6, 11, "unexpected '\"' inside a value" },
    { PRELUDE "s op k! w:A\n", 6, 6, "expected a label, found 'k!'" },
    { PRELUDE "s op k n=\n", 6, 10, "expected a value after '=', found end of line" },
    { PRELUDE "s wait\n", 6, 7, "expected an event name, found end of line" },
    { PRELUDE "s op \"k\"x w:A\n", 6, 6, "expected a label, found '\"k\"x'" },
    { PRELUDE "h signal 3\n", 6, 10, "expected a flag or semaphore name, found '3'" },
    { PRELUDE "semaphore S\nh signal S\n", 7, 11,
      "'S' is a semaphore: expected set=V (the value it sets) after its name, found end of line" },
    { PRELUDE "semaphore S\ns await S 2\n", 7, 11,
      "'S' is a semaphore: expected >=V (the value it waits for) after its name, found '2'" },
    { PRELUDE "semaphore S\ns await S >=x\n", 7, 13, "expected a number" },
    { PRELUDE "h signal f\ns await f >=1\n", 7, 11, "'f' is a flag, which takes no value" },
    { PRELUDE "h signal f\nsemaphore f\n", 7, 11,
      "'f' is a flag (signalled or awaited at line 6); declare a semaphore before" },
    { PRELUDE "semaphore S\nsemaphore S\n", 7, 11, "semaphore 'S' is already declared (line 6)" },
    { PRELUDE "semaphore S x\n", 6, 13, "expected end of line, found 'x'" },
};

static void test_text_errors_name_line_and_column(void **state)
{
    (void)state;
    size_t n = sizeof bad_inputs / sizeof bad_inputs[0];
    for (size_t i = 0; i < n; i++) {
        const bad_input *b = &bad_inputs[i];
        /* texts with a NUL byte: the table entry's length is up to the final newline */
        size_t len = strlen(b->text);
        if (strstr(b->says, "0x00"))
            len += strlen(b->text + len + 1) + 1;
        trace *t = NULL;
        trace_error err = { 0 };
        int rc = trace_text_parse_string("t.trace", b->text, len, &t, &err);
        char want[64];
        snprintf(want, sizeof want, "t.trace:%u:%u: ", b->line, b->col);
        if (rc != -1 || err.status != TRACE_ESYNTAX || strncmp(err.msg, want, strlen(want)) != 0 ||
            !strstr(err.msg, b->says))
            fail_msg("case %zu: rc %d, got '%s', want '%s...%s'", i, rc, err.msg, want, b->says);
        assert_null(t);
    }
    assert_true(n >= 20);
}

static void test_text_reader_stops_after_an_error(void **state)
{
    (void)state;
    const char *text = PRELUDE "s op k w:A\nq op z\ns op k w:A\n";
    trace_reader r;
    trace_error err = { 0 };
    trace_stmt s;
    assert_int_equal(trace_text_open_string("t.trace", text, strlen(text), &r, &err), 0);
    assert_int_equal(trace_reader_next(&r, &s, &err), 1);
    assert_int_equal(trace_reader_next(&r, &s, &err), -1);
    assert_string_equal(err.msg, "t.trace:7:1: undeclared queue 'q'");
    memset(&err, 0, sizeof err);
    assert_int_equal(trace_reader_next(&r, &s, &err), -1);
    assert_int_equal(err.status, TRACE_ESYNTAX);
    assert_string_equal(err.msg, "t.trace:7:1: undeclared queue 'q'");
    trace_reader_close(&r);
}

static void test_text_missing_file_is_an_io_error(void **state)
{
    (void)state;
    trace *t = NULL;
    trace_error err = { 0 };
    assert_int_equal(trace_text_parse_file("no/such/file.trace", &t, &err), -1);
    assert_int_equal(err.status, TRACE_EIO);
    assert_non_null(strstr(err.msg, "no/such/file.trace"));
    assert_int_equal(trace_text_parse_file(".", &t, &err), -1);
    assert_int_equal(err.status, TRACE_EIO);
    assert_null(t);
}

/* ------------------------------------------------------------------ */
/* Writer and round trips.                                             */

static const char every_construct[] =
    "syncsim-trace 1\n"
    "# every construct of the format\n"
    "queue host host\n"
    "queue \"queue\" stream device=\"GPU 0\"\n"
    "queue s1 stream device=cuda:1\n"
    "queue all stream device=1\n"
    "buffer arena size=0x10000 host pinned\n"
    "buffer t_kv in=arena offset=0 size=32768\n"
    "buffer \"t tmp\" in=t_kv offset=16384 size=16384\n"
    "buffer d0 size=4096 device=\"GPU 0\"\n"
    "buffer u size=7\n"
    "\n"
    "host op fill w:arena[0:4096] node=\"mm 12\" split=3\n"
    "\"queue\" copy up arena[0:4096] d0 t=10 dur=5\n"
    "\"queue\" op \"r:x\" r:d0 rw:\"t tmp\"[8:] w:t_kv[0:0]\n"
    "\"queue\" record e0\n"
    "s1 wait e0 by=host\n"
    "host wait e0\n"
    "host sync s1\n"
    "host sync device=\"GPU 0\"\n"
    "host sync all\n"
    "host sync \"all\"\n"
    "host barrier b count=1\n"
    "s1 signal f\n"
    "host await f\n"
    "s1 collective world allreduce size=2 rw:d0 label=ar0 tag=\"a\\\"b\\\\c\"\n"
    "all collective world allreduce size=2\n"
    "host alloc u\n"
    "host free u\n"
    "buffer late size=1\n"
    "host op uses_late w:late k=\"\"\n"
    "semaphore \"sem 1\"\n"
    "s1 signal \"sem 1\" set=0x10\n"
    "host await \"sem 1\" >=16 t=3\n"
    "host signal \"sem 1\" set=0\n"
    "expect clean\n"
    "expect race type=WAW first=fill second=queue@15 buffer=arena\n"
    "expect wait-unrecorded event=e0\n"
    "expect hang queue=host queue=s1\n"
    "expect collective-mismatch comm=world\n"
    "expect use-after-free buffer=u second=host@28\n"
    "expect redundant-sync line=19\n"
    "expect semaphore-race semaphore=\"sem 1\"\n";

static void test_text_round_trip_every_construct(void **state)
{
    (void)state;
    assert_round_trip(every_construct);
}

static void test_text_round_trip_litmus_files(void **state)
{
    (void)state;
    const char *dir = SYNCSIM_SHARED_DIR "/litmus";
    DIR *d = opendir(dir);
    if (!d) {
        printf("skipped: %s is missing\n", dir);
        skip();
    }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char *text = NULL;
        size_t cap = 0;
        ssize_t got = getdelim(&text, &cap, '\0', f);
        fclose(f);
        assert_true(got > 0);
        assert_round_trip(text);
        free(text);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

static void test_text_write_renumbers_statement_lines(void **state)
{
    (void)state;
    trace *t = parse_ok("syncsim-trace 1\n"                 /* 1 */
                        "# comment\n"                       /* 2 */
                        "queue h host\n"                    /* 3 */
                        "\n"                                /* 4 */
                        "queue s stream device=0\n"         /* 5 */
                        "s record e\n"                      /* 6 */
                        "# comment\n"                       /* 7 */
                        "h sync s\n"                        /* 8 */
                        "expect redundant-sync line=8\n"
                        "expect race type=RAW first=s@6 second=h@8 buffer=x\n"
                        "expect race type=RAW first=\"s@6\" second=x@y\n");
    char *out = write_trace(t);
    assert_string_equal(out, "syncsim-trace 1\n"
                             "queue h host\n"
                             "queue s stream device=0\n"
                             "s record e\n"
                             "h sync s\n"
                             "expect redundant-sync line=5\n"
                             "expect race type=RAW first=s@4 second=h@5 buffer=x\n"
                             "expect race type=RAW first=s@4 second=x@y\n");
    free(out);
    trace_free(t);
}

static void test_text_write_declares_just_before_first_use(void **state)
{
    (void)state;
    /* h2 and B are declared after statements that do not use them: the
     * writer keeps them there. */
    const char *text = "syncsim-trace 1\n"
                       "queue h host\n"
                       "queue s stream device=0\n"
                       "buffer A size=8 device=0\n"
                       "s op k w:A by=h\n"
                       "queue h2 host\n"
                       "buffer B size=8 device=0\n"
                       "s op j w:B by=h2\n";
    trace *t = parse_ok(text);
    char *out = write_trace(t);
    assert_string_equal(out, text);
    free(out);
    trace_free(t);
    assert_round_trip(text);
}

/* Run metadata is written as `meta KEY=VALUE` lines and read back: a
 * control character becomes '?', a value with blanks is quoted, and a key
 * that is not a name stays a comment. */
static void test_text_write_meta_reads_back(void **state)
{
    (void)state;
    trace *t = parse_ok("syncsim-trace 1\n");
    assert_int_equal(trace_set_meta(t, "producer", "sim\nx"), 0);
    assert_int_equal(trace_set_meta(t, "status", "incomplete"), 0);
    assert_int_equal(trace_set_meta(t, "dropped.no-ts", "3"), 0);
    assert_int_equal(trace_set_meta(t, "model", "tp:a b"), 0);
    assert_int_equal(trace_set_meta(t, "bad key", "v"), 0);
    char *out = write_trace(t);
    assert_string_equal(out, "syncsim-trace 1\nmeta producer=\"sim?x\"\nmeta status=incomplete\n"
                             "meta dropped.no-ts=3\nmeta model=\"tp:a b\"\n# meta bad key=v\n");
    trace *back = parse_ok(out);
    assert_string_equal(trace_get_meta(back, "status"), "incomplete");
    assert_string_equal(trace_get_meta(back, "dropped.no-ts"), "3");
    assert_string_equal(trace_get_meta(back, "model"), "tp:a b");
    assert_null(trace_get_meta(back, "bad key"));
    free(out);
    trace_free(back);
    trace_free(t);
}

/* `meta` is a keyword only where no queue is named meta, and needs a
 * KEY=VALUE. */
static void test_text_meta_line(void **state)
{
    (void)state;
    trace *t = parse_ok("syncsim-trace 1\nqueue meta host\nbuffer X size=4\nmeta op k w:X\n");
    assert_int_equal(t->n_stmts, 1);
    trace_free(t);
    t = parse_ok("syncsim-trace 1\nmeta a=1 b=\"x y\"\nmeta a=2\n");
    assert_string_equal(trace_get_meta(t, "a"), "2");
    assert_string_equal(trace_get_meta(t, "b"), "x y");
    trace_free(t);
    parse_fails("syncsim-trace 1\nmeta\n", "t.trace:2:5: expected KEY=VALUE after meta");
    parse_fails("syncsim-trace 1\nmeta x\n", "t.trace:2:6: expected KEY=VALUE");
}

static void test_text_write_refuses_unwritable_names(void **state)
{
    (void)state;
    trace *t = trace_new();
    trace_add_queue(t, trace_intern_cstr(t, "bad\nname"), TRACE_QUEUE_HOST, TRACE_NONE);
    trace_reader r;
    trace_reader_memory(&r, t);
    FILE *f = tmpfile();
    trace_error err = { 0 };
    assert_int_equal(trace_text_write(f, &r, &err), -1);
    assert_int_equal(err.status, TRACE_EUSAGE);
    assert_non_null(strstr(err.msg, "control character"));
    fclose(f);
    trace_reader_close(&r);
    trace_free(t);
}

/* ------------------------------------------------------------------ */
/* Streaming.                                                          */

static void test_text_streams_200k_statements_in_constant_memory(void **state)
{
    (void)state;
    enum { N = 200000 };
    char path[] = "test_text_stream_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(PRELUDE, f);
    for (int i = 0; i < N; i++)
        fprintf(f, "s op k%d r:A[%d:64] w:X t=%d\n", i % 4, i % 64, i);
    fclose(f);

    trace_reader r;
    trace_error err = { 0 };
    trace_stmt s;
    assert_int_equal(trace_text_open(path, &r, &err), 0);
    uint64_t n = 0;
    uint32_t strings = 0;
    int rc;
    while ((rc = trace_reader_next(&r, &s, &err)) == 1) {
        if (s.seq != n || s.line != n + 6 || s.t != (int64_t)n || s.access[0].lo != n % 64)
            fail_msg("statement %llu out of order", (unsigned long long)n);
        if (n == 8)
            strings = r.trace->n_strs;
        if (n > 8 && r.trace->n_strs != strings)
            fail_msg("the string table grew at statement %llu", (unsigned long long)n);
        if (r.trace->n_stmts != 0)
            fail_msg("the reader keeps statements");
        n++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(n, N);
    trace_reader_close(&r);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_header_comments_and_blank_lines),
        cmocka_unit_test(test_text_queue_declarations),
        cmocka_unit_test(test_text_buffer_declarations),
        cmocka_unit_test(test_text_op_accesses_and_ref_forms),
        cmocka_unit_test(test_text_copy_is_read_then_write),
        cmocka_unit_test(test_text_record_wait_signal_await),
        cmocka_unit_test(test_text_value_semaphores),
        cmocka_unit_test(test_text_sync_targets),
        cmocka_unit_test(test_text_barrier_has_name_and_count),
        cmocka_unit_test(test_text_collective_fields),
        cmocka_unit_test(test_text_alloc_free_name_root_buffers),
        cmocka_unit_test(test_text_attributes_fill_fields_and_keep_order),
        cmocka_unit_test(test_text_quoted_names_and_escapes),
        cmocka_unit_test(test_text_expect_forms),
        cmocka_unit_test(test_text_seq_counts_statements_and_line_counts_lines),
        cmocka_unit_test(test_text_litmus_files_parse),
        cmocka_unit_test(test_text_errors_name_line_and_column),
        cmocka_unit_test(test_text_reader_stops_after_an_error),
        cmocka_unit_test(test_text_missing_file_is_an_io_error),
        cmocka_unit_test(test_text_round_trip_every_construct),
        cmocka_unit_test(test_text_round_trip_litmus_files),
        cmocka_unit_test(test_text_write_renumbers_statement_lines),
        cmocka_unit_test(test_text_write_declares_just_before_first_use),
        cmocka_unit_test(test_text_write_meta_reads_back),
        cmocka_unit_test(test_text_meta_line),
        cmocka_unit_test(test_text_write_refuses_unwritable_names),
        cmocka_unit_test(test_text_streams_200k_statements_in_constant_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
