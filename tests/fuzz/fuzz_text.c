/* fuzz_text.c -- libFuzzer harness for the text trace parser and writer.
 *
 * Each input is parsed. A rejected input must give a syntax error that
 * names the place ("fuzz:LINE:COL: ..."). An accepted one is written,
 * the output parsed again, and the round trip checked: the same
 * declarations, statements and expectations (Q@LINE references renumbered
 * to the written lines), and writing again gives the same text. Writing
 * straight from a streaming reader must give that text too. Any mismatch
 * aborts, which libFuzzer reports as a crash. See README.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace.h"

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz_text: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                \
        }                                                                           \
    } while (0)

static char *write_text(trace_reader *r)
{
    char *buf = NULL;
    size_t len = 0;
    trace_error err;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    int rc = trace_text_write(f, r, &err);
    fclose(f);
    if (rc != 0)
        fprintf(stderr, "fuzz_text: write failed: %s\n", err.msg);
    CHECK(rc == 0);
    return buf;
}

static const char *str(const trace *t, uint32_t id)
{
    return trace_str(t, id);
}

static int64_t stmt_of_line(const trace *t, uint64_t line)
{
    trace_stmt s;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt_at(t, i, &s);
        if (s.line == line)
            return (int64_t)i;
    }
    return -1;
}

static uint32_t line_of_stmt(const trace *t, int64_t i)
{
    trace_stmt s;
    trace_stmt_at(t, (uint64_t)i, &s);
    return s.line;
}

/* b's value of an expect key, given a's and the renumbering of lines. */
static void check_expect_value(const trace *a, const trace_expect *e, const trace_attr *kva,
                               const trace *b, const trace_attr *kvb)
{
    const char *key = str(a, kva->key), *va = str(a, kva->value), *vb = str(b, kvb->value);
    if (e->kind == TRACE_FINDING_REDUNDANT_SYNC && strcmp(key, "line") == 0) {
        int64_t i = stmt_of_line(a, strtoull(va, NULL, 0));
        if (i >= 0) {
            CHECK(strtoull(vb, NULL, 10) == line_of_stmt(b, i));
            return;
        }
    } else if (strcmp(key, "first") == 0 || strcmp(key, "second") == 0) {
        const char *at = strrchr(va, '@');
        if (at && at > va && at[1] && strlen(at + 1) <= 10 &&
            strspn(at + 1, "0123456789") == strlen(at + 1)) {
            int64_t i = stmt_of_line(a, strtoull(at + 1, NULL, 10));
            if (i >= 0) {
                const char *bt = strrchr(vb, '@');
                CHECK(bt && bt - vb == at - va && memcmp(va, vb, (size_t)(at - va)) == 0);
                CHECK(strtoull(bt + 1, NULL, 10) == line_of_stmt(b, i));
                return;
            }
        }
    }
    CHECK(strcmp(va, vb) == 0);
}

static void check_equal(const trace *a, const trace *b)
{
    CHECK(a->n_queues == b->n_queues && a->n_buffers == b->n_buffers);
    for (uint32_t i = 0; i < a->n_queues; i++) {
        CHECK(strcmp(str(a, a->queues[i].name), str(b, b->queues[i].name)) == 0);
        CHECK(a->queues[i].kind == b->queues[i].kind);
        CHECK(strcmp(str(a, a->queues[i].device), str(b, b->queues[i].device)) == 0);
    }
    for (uint32_t i = 0; i < a->n_buffers; i++) {
        const trace_buffer *x = &a->buffers[i], *y = &b->buffers[i];
        CHECK(strcmp(str(a, x->name), str(b, y->name)) == 0);
        CHECK(x->size == y->size && x->parent == y->parent && x->offset == y->offset);
        CHECK(x->loc == y->loc && x->pinned == y->pinned);
        CHECK(strcmp(str(a, x->device), str(b, y->device)) == 0);
    }
    CHECK(a->n_stmts == b->n_stmts);
    for (uint64_t i = 0; i < a->n_stmts; i++) {
        trace_stmt x, y;
        trace_stmt_at(a, i, &x);
        trace_stmt_at(b, i, &y);
        CHECK(trace_stmt_equal(a, &x, b, &y));
    }
    CHECK(a->n_expects == b->n_expects);
    for (uint32_t i = 0; i < a->n_expects; i++) {
        const trace_expect *x = &a->expects[i], *y = &b->expects[i];
        CHECK(x->kind == y->kind && x->n_kv == y->n_kv);
        for (uint32_t k = 0; k < x->n_kv; k++) {
            CHECK(strcmp(str(a, x->kv[k].key), str(b, y->kv[k].key)) == 0);
            check_expect_value(a, x, &x->kv[k], b, &y->kv[k]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    trace *a = NULL, *b = NULL;
    trace_error err;
    if (trace_text_parse_string("fuzz", (const char *)data, size, &a, &err) != 0) {
        CHECK(a == NULL);
        CHECK(err.status == TRACE_ESYNTAX);
        CHECK(strncmp(err.msg, "fuzz:", 5) == 0);
        return 0;
    }
    trace_reader r;
    trace_reader_memory(&r, a);
    char *out1 = write_text(&r);
    trace_reader_close(&r);

    if (trace_text_parse_string("out", out1, strlen(out1), &b, &err) != 0) {
        fprintf(stderr, "fuzz_text: the output does not parse: %s\n--- output\n%s---\n", err.msg,
                out1);
        abort();
    }
    check_equal(a, b);
    trace_reader_memory(&r, b);
    char *out2 = write_text(&r);
    trace_reader_close(&r);
    CHECK(strcmp(out1, out2) == 0);

    CHECK(trace_text_open_string("fuzz", (const char *)data, size, &r, &err) == 0);
    char *out3 = write_text(&r);
    trace_reader_close(&r);
    CHECK(strcmp(out1, out3) == 0);

    free(out1);
    free(out2);
    free(out3);
    trace_free(a);
    trace_free(b);
    return 0;
}
