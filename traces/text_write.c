/*
 * text_write.c -- writes any trace_reader as a text trace, version 1
 * (docs/trace-format.md).
 *
 * The output is canonical: one blank between words, names bare when they
 * match [A-Za-z_][A-Za-z0-9_.#:/-]* and quoted otherwise, attributes after
 * the positional words in the order by=, t=, dur=, then the rest as read.
 * Parsing the output gives back the same statements, declarations and
 * expectations (text -> model -> text round-trips, comments and spacing
 * aside; `Q@LINE` references are renumbered, see below).
 *
 * Declarations are written lazily, just before the first statement that
 * needs them: before each statement the writer emits the queues and
 * buffers of the reader's trace up to the highest index the statement
 * refers to (queues first, then buffers, in index order; a view's parent
 * has a lower index than the view). Indices grow in declaration order, so
 * this never writes a declaration earlier than the source had it, which
 * keeps the "by= required once a second host queue is declared" rule true
 * of the output. It also works for streaming readers, whose trace grows
 * while they are read. Whatever is left is written after the statements,
 * then the expectations.
 *
 * Expectations may name a statement as `Q@LINE` (first=, second=) or by
 * its line (redundant-sync line=N). The writer maps each statement's source
 * line to its written line and rewrites those references. The map is kept
 * as runs of consecutive lines (source and output both step by one), so a
 * generated trace with declarations at the top costs one run, and memory
 * grows only with the gaps (comments, blank lines) of the source.
 */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Statements with source lines [src, src + n) were written at [out, out + n). */
typedef struct line_run {
    uint32_t src, out, n;
} line_run;

typedef struct text_writer {
    FILE *out;
    const trace *t;
    trace_error *err;
    uint32_t queues_written, buffers_written;
    uint32_t line;              /* lines written so far */
    line_run *runs;
    size_t n_runs, cap_runs;
    trace_u64map sems;          /* semaphores declared so far (string ids) */
    bool failed;
} text_writer;

static int werr(text_writer *w, trace_status st, const char *msg, const char *what)
{
    if (!w->failed)
        trace_error_set(w->err, st, "text writer: %s%s", msg, what ? what : "");
    w->failed = true;
    return -1;
}

/* The output refused a write (a full disk): the error names the cause. */
static int write_failed(text_writer *w)
{
    return werr(w, TRACE_EIO, "cannot write: ", strerror(errno));
}

static inline bool is_name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static inline bool is_name_char(unsigned char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '#' || c == ':' ||
           c == '/' || c == '-';
}

/* Bytes a bare attribute value is written with; others get quotes. */
static inline bool is_value_char(unsigned char c)
{
    return is_name_char(c) || c == '@' || c == '+';
}

static bool is_bare_name(const char *s)
{
    if (!is_name_start((unsigned char)s[0]))
        return false;
    for (s++; *s; s++)
        if (!is_name_char((unsigned char)*s))
            return false;
    return true;
}

static int put_quoted(text_writer *w, const char *s)
{
    for (const char *c = s; *c; c++)
        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
            return werr(w, TRACE_EUSAGE, "cannot write a string holding a control character: ", s);
    putc('"', w->out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putc('\\', w->out);
        putc(*s, w->out);
    }
    putc('"', w->out);
    return 0;
}

/* A name; quoted when it is not a bare name or when force_quote is set
 * (a keyword in a place where it would be read as one). */
static int put_name_str(text_writer *w, const char *s, bool force_quote)
{
    if (!*s)
        return werr(w, TRACE_EUSAGE, "cannot write an empty name", NULL);
    if (!force_quote && is_bare_name(s))
        return fputs(s, w->out) < 0 ? write_failed(w) : 0;
    return put_quoted(w, s);
}

static int put_name(text_writer *w, uint32_t id)
{
    return put_name_str(w, trace_str(w->t, id), false);
}

static int put_value_str(text_writer *w, const char *s)
{
    bool bare = *s != '\0';
    for (const char *c = s; *c && bare; c++)
        bare = is_value_char((unsigned char)*c);
    if (bare)
        return fputs(s, w->out) < 0 ? write_failed(w) : 0;
    return put_quoted(w, s);
}

static int put_value(text_writer *w, uint32_t id)
{
    return put_value_str(w, trace_str(w->t, id));
}

static void end_line(text_writer *w)
{
    putc('\n', w->out);
    w->line++;
}

static int put_u64(text_writer *w, const char *prefix, uint64_t v)
{
    fprintf(w->out, "%s%llu", prefix, (unsigned long long)v);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Declarations.                                                       */

static int write_queue(text_writer *w, uint32_t q)
{
    const trace_queue *tq = &w->t->queues[q];
    fputs("queue ", w->out);
    if (put_name(w, tq->name) != 0)
        return -1;
    if (tq->kind == TRACE_QUEUE_HOST) {
        fputs(" host", w->out);
    } else {
        fputs(" stream device=", w->out);
        if (put_value(w, tq->device) != 0)
            return -1;
    }
    end_line(w);
    return 0;
}

static int write_buffer(text_writer *w, uint32_t b)
{
    const trace_buffer *tb = &w->t->buffers[b];
    fputs("buffer ", w->out);
    if (put_name(w, tb->name) != 0)
        return -1;
    if (tb->parent != TRACE_NONE) {
        if (tb->parent >= b)
            return werr(w, TRACE_EUSAGE, "a view is declared before its parent: ",
                        trace_str(w->t, tb->name));
        fputs(" in=", w->out);
        if (put_name(w, w->t->buffers[tb->parent].name) != 0)
            return -1;
        put_u64(w, " offset=", tb->offset);
        put_u64(w, " size=", tb->size);
    } else {
        put_u64(w, " size=", tb->size);
        if (tb->loc == TRACE_LOC_DEVICE) {
            fputs(" device=", w->out);
            if (put_value(w, tb->device) != 0)
                return -1;
        } else if (tb->loc == TRACE_LOC_HOST) {
            fputs(" host", w->out);
        }
        if (tb->pinned)
            fputs(" pinned", w->out);
    }
    end_line(w);
    return 0;
}

/* Writes the queues [queues_written, nq) and buffers [buffers_written, nb). */
static int write_decls(text_writer *w, uint32_t nq, uint32_t nb)
{
    for (; w->queues_written < nq; w->queues_written++)
        if (write_queue(w, w->queues_written) != 0)
            return -1;
    for (; w->buffers_written < nb; w->buffers_written++)
        if (write_buffer(w, w->buffers_written) != 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Statements.                                                         */

/* Raises *count so that index i is below it. */
static void need_index(uint32_t i, uint32_t *count)
{
    if (i != TRACE_NONE && i + 1 > *count)
        *count = i + 1;
}

/* The declarations s needs: queues [0, *nq), buffers [0, *nb). Returns -1
 * when s refers to one the trace does not have. */
static int stmt_needs(text_writer *w, const trace_stmt *s, uint32_t *nq, uint32_t *nb)
{
    *nq = 0;
    *nb = 0;
    need_index(s->queue, nq);
    need_index(s->by, nq);
    if (s->kind == TRACE_SYNC && s->sync_scope == TRACE_SYNC_QUEUE)
        need_index(s->object, nq);
    if (s->kind == TRACE_ALLOC || s->kind == TRACE_FREE)
        need_index(s->object, nb);
    for (uint32_t i = 0; i < s->n_access; i++)
        need_index(s->access[i].buffer, nb);
    if (s->queue == TRACE_NONE || *nq > w->t->n_queues || *nb > w->t->n_buffers)
        return werr(w, TRACE_EUSAGE, "a statement refers to an undeclared queue or buffer", NULL);
    return 0;
}

/* Statement heads that would read as a keyword are quoted. */
static bool is_head_keyword(const char *s)
{
    return !strcmp(s, "queue") || !strcmp(s, "buffer") || !strcmp(s, "expect") ||
           !strcmp(s, "syncsim-trace") || !strcmp(s, "semaphore");
}

static bool looks_like_access(const char *s)
{
    return !strncmp(s, "r:", 2) || !strncmp(s, "w:", 2) || !strncmp(s, "rw:", 3);
}

static int put_label(text_writer *w, const trace_stmt *s)
{
    char fallback[96];
    const char *label = s->label != TRACE_NONE ? trace_str(w->t, s->label) : "";
    if (!*label) {
        /* ops from producers that gave no label: name them as the spec does */
        trace_stmt unnamed = *s;
        unnamed.label = TRACE_NONE;
        unnamed.line = 0;
        label = trace_stmt_name(w->t, &unnamed, fallback, sizeof fallback);
    }
    putc(' ', w->out);
    return put_name_str(w, label, looks_like_access(label));
}

static int put_ref(text_writer *w, const trace_access *a)
{
    if (put_name(w, w->t->buffers[a->buffer].name) != 0)
        return -1;
    if (a->form == TRACE_REF_RANGE)
        fprintf(w->out, "[%llu:%llu]", (unsigned long long)a->lo, (unsigned long long)a->hi);
    else if (a->form == TRACE_REF_FROM)
        fprintf(w->out, "[%llu:]", (unsigned long long)a->lo);
    return 0;
}

static int put_accesses(text_writer *w, const trace_stmt *s)
{
    static const char *const modes[] = { "?", "r:", "w:", "rw:" };
    for (uint32_t i = 0; i < s->n_access; i++) {
        const trace_access *a = &s->access[i];
        if (a->mode < TRACE_R || a->mode > TRACE_RW)
            return werr(w, TRACE_EUSAGE, "an access has no mode", NULL);
        fprintf(w->out, " %s", modes[a->mode]);
        if (put_ref(w, a) != 0)
            return -1;
    }
    return 0;
}

static int put_object(text_writer *w, uint32_t id)
{
    putc(' ', w->out);
    return put_name(w, id);
}

/* A collective's or a message's accesses, then its label= (they have no
 * place for a label before their attributes). */
static int put_accesses_label(text_writer *w, const trace_stmt *s)
{
    if (put_accesses(w, s) != 0)
        return -1;
    if (s->label != TRACE_NONE) {
        fputs(" label=", w->out);
        return put_value(w, s->label);
    }
    return 0;
}

static int put_positional(text_writer *w, const trace_stmt *s)
{
    switch (s->kind) {
    case TRACE_OP:
        return put_label(w, s) != 0 ? -1 : put_accesses(w, s);
    case TRACE_COPY:
        if (s->n_access != 2)
            return werr(w, TRACE_EUSAGE, "a copy needs exactly two accesses", NULL);
        if (put_label(w, s) != 0)
            return -1;
        putc(' ', w->out);
        if (put_ref(w, &s->access[0]) != 0)
            return -1;
        putc(' ', w->out);
        return put_ref(w, &s->access[1]);
    case TRACE_RECORD:
    case TRACE_WAIT:
        return put_object(w, s->object);
    case TRACE_SIGNAL:
    case TRACE_AWAIT:
        if (put_object(w, s->object) != 0)
            return -1;
        return s->sem ? put_u64(w, s->kind == TRACE_SIGNAL ? " set=" : " >=", s->count) : 0;
    case TRACE_SYNC:
        if (s->sync_scope == TRACE_SYNC_ALL) {
            fputs(" all", w->out);
            return 0;
        }
        if (s->sync_scope == TRACE_SYNC_DEVICE) {
            fputs(" device=", w->out);
            return put_value(w, s->object);
        }
        putc(' ', w->out);
        {
            const char *q = trace_str(w->t, w->t->queues[s->object].name);
            return put_name_str(w, q, strcmp(q, "all") == 0);
        }
    case TRACE_BARRIER:
        if (put_object(w, s->object) != 0)
            return -1;
        return put_u64(w, " count=", s->count);
    case TRACE_COLLECTIVE:
        if (put_object(w, s->object) != 0 || put_object(w, s->coll_kind) != 0)
            return -1;
        put_u64(w, " size=", s->count);
        return put_accesses_label(w, s);
    case TRACE_SEND:
    case TRACE_RECV: {
        bool send = s->kind == TRACE_SEND;
        if (put_object(w, s->object) != 0)
            return -1;
        put_u64(w, " from=", send ? s->rank : s->peer);
        put_u64(w, " to=", send ? s->peer : s->rank);
        put_u64(w, " tag=", s->count);
        return put_accesses_label(w, s);
    }
    case TRACE_ALLOC:
    case TRACE_FREE:
        return put_object(w, w->t->buffers[s->object].name);
    default:
        return werr(w, TRACE_EUSAGE, "a statement of unknown kind", NULL);
    }
}

static int put_attrs(text_writer *w, const trace_stmt *s)
{
    if (s->by != TRACE_NONE) {
        fputs(" by=", w->out);
        if (put_value(w, w->t->queues[s->by].name) != 0)
            return -1;
    }
    if (s->t != TRACE_TIME_NONE)
        fprintf(w->out, " t=%lld", (long long)s->t);
    if (s->dur != TRACE_TIME_NONE)
        fprintf(w->out, " dur=%lld", (long long)s->dur);
    for (uint32_t i = 0; i < s->n_attr; i++) {
        putc(' ', w->out);
        if (put_name(w, s->attr[i].key) != 0)
            return -1;
        putc('=', w->out);
        if (put_value(w, s->attr[i].value) != 0)
            return -1;
    }
    return 0;
}

/* Remembers that the statement of source line src was written at line out. */
static int map_line(text_writer *w, uint32_t src, uint32_t out)
{
    if (w->n_runs) {
        line_run *last = &w->runs[w->n_runs - 1];
        if (last->src + last->n == src && last->out + last->n == out) {
            last->n++;
            return 0;
        }
    }
    if (w->n_runs == w->cap_runs) {
        size_t ncap = w->cap_runs ? w->cap_runs * 2 : 64;
        line_run *nr = realloc(w->runs, ncap * sizeof *nr);
        if (!nr)
            return werr(w, TRACE_ENOMEM, "out of memory", NULL);
        w->runs = nr;
        w->cap_runs = ncap;
    }
    w->runs[w->n_runs++] = (line_run){ src, out, 1 };
    return 0;
}

/* The written line of the statement at source line src, or 0. */
static uint32_t mapped_line(const text_writer *w, uint64_t src)
{
    for (size_t i = 0; i < w->n_runs; i++)
        if (src >= w->runs[i].src && src < (uint64_t)w->runs[i].src + w->runs[i].n)
            return w->runs[i].out + (uint32_t)(src - w->runs[i].src);
    return 0;
}

/* The statement's line, without its newline. */
static int put_stmt(text_writer *w, const trace_stmt *s)
{
    const char *q = trace_str(w->t, w->t->queues[s->queue].name);
    if (put_name_str(w, q, is_head_keyword(q)) != 0)
        return -1;
    putc(' ', w->out);
    fputs(trace_kind_str(s->kind), w->out);
    return put_positional(w, s) != 0 || put_attrs(w, s) != 0 ? -1 : 0;
}

static int write_stmt(text_writer *w, const trace_stmt *s)
{
    uint32_t nq, nb;
    if (stmt_needs(w, s, &nq, &nb) != 0 || write_decls(w, nq, nb) != 0)
        return -1;
    if (s->sem && !trace_u64map_get(&w->sems, s->object)) {
        /* a value semaphore is declared before its first signal or await */
        if (!trace_u64map_put(&w->sems, s->object, 1))
            return werr(w, TRACE_ENOMEM, "out of memory", NULL);
        fputs("semaphore ", w->out);
        if (put_name_str(w, trace_str(w->t, s->object), false) != 0)
            return -1;
        end_line(w);
    }
    if (put_stmt(w, s) != 0)
        return -1;
    end_line(w);
    if (s->line && map_line(w, s->line, w->line) != 0)
        return -1;
    return 0;
}

int trace_text_stmt(FILE *out, const trace *t, const trace_stmt *s, trace_error *err)
{
    text_writer w = { .out = out, .t = t, .err = err };
    return put_stmt(&w, s);
}

/* ------------------------------------------------------------------ */
/* Expectations.                                                       */

/* Parses decimal digits s[0..len) (at least one, no overflow past 2^32). */
static bool parse_line_number(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 10)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* Writes an expect value, renumbering Q@LINE (statement keys) or a line
 * number (redundant-sync line=). */
static int put_expect_value(text_writer *w, const trace_expect *e, const trace_attr *kv)
{
    const char *key = trace_str(w->t, kv->key);
    const char *v = trace_str(w->t, kv->value);
    uint64_t src;
    uint32_t out;
    if (e->kind == TRACE_FINDING_REDUNDANT_SYNC && !strcmp(key, "line")) {
        char *end;
        unsigned long long n = strtoull(v, &end, 0);
        if (*v && !*end && (out = mapped_line(w, n)) != 0) {
            fprintf(w->out, "%u", out);
            return 0;
        }
    } else if (!strcmp(key, "first") || !strcmp(key, "second")) {
        const char *at = strrchr(v, '@');
        if (at && at > v && parse_line_number(at + 1, strlen(at + 1), &src) &&
            (out = mapped_line(w, src)) != 0) {
            /* Q@LINE: the queue part is kept as written */
            size_t qlen = (size_t)(at - v);
            char *nv = malloc(qlen + 16);
            if (!nv)
                return werr(w, TRACE_ENOMEM, "out of memory", NULL);
            memcpy(nv, v, qlen);
            snprintf(nv + qlen, 16, "@%u", out);
            int rc = put_value_str(w, nv);
            free(nv);
            return rc;
        }
    }
    return put_value(w, kv->value);
}

static int write_expect(text_writer *w, const trace_expect *e)
{
    fprintf(w->out, "expect %s", trace_finding_str(e->kind));
    for (uint32_t i = 0; i < e->n_kv; i++) {
        putc(' ', w->out);
        if (put_name(w, e->kv[i].key) != 0)
            return -1;
        putc('=', w->out);
        if (put_expect_value(w, e, &e->kv[i]) != 0)
            return -1;
    }
    end_line(w);
    return 0;
}

/* Run metadata as `meta KEY=VALUE` lines, read back by the parser. A key
 * that is not a bare name (none syncsim writes) stays a comment. */
static void write_meta(text_writer *w)
{
    for (uint32_t i = 0; i < w->t->n_meta; i++) {
        const char *key = trace_str(w->t, w->t->meta[i].key);
        const char *value = trace_str(w->t, w->t->meta[i].value);
        if (is_bare_name(key)) {
            /* a control character cannot be written: it becomes '?' */
            char *clean = strdup(value);
            for (char *c = clean; c && *c; c++)
                if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
                    *c = '?';
            fprintf(w->out, "meta %s=", key);
            put_value_str(w, clean ? clean : "?");
            free(clean);
            end_line(w);
            continue;
        }
        fputs("# meta ", w->out);
        for (int part = 0; part < 2; part++) {
            const char *s = part ? value : key;
            for (; *s; s++)
                putc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, w->out);
            if (!part)
                putc('=', w->out);
        }
        end_line(w);
    }
}

int trace_text_write(FILE *out, trace_reader *r, trace_error *err)
{
    text_writer w = { .out = out, .t = r->trace, .err = err };
    trace_stmt s;
    int rc;
    fprintf(out, "syncsim-trace %d", TRACE_TEXT_VERSION);
    end_line(&w);
    write_meta(&w);
    while ((rc = trace_reader_next(r, &s, err)) == 1) {
        w.t = r->trace;
        if (write_stmt(&w, &s) != 0)
            goto fail;
    }
    if (rc < 0) {
        w.failed = true;
        goto fail;
    }
    w.t = r->trace;
    if (write_decls(&w, w.t->n_queues, w.t->n_buffers) != 0)
        goto fail;
    for (uint32_t i = 0; i < w.t->n_expects; i++)
        if (write_expect(&w, &w.t->expects[i]) != 0)
            goto fail;
    if (fflush(out) != 0 || ferror(out)) {
        write_failed(&w);
        goto fail;
    }
    free(w.runs);
    trace_u64map_free(&w.sems);
    return 0;
fail:
    free(w.runs);
    trace_u64map_free(&w.sems);
    return -1;
}
