/*
 * text_parse.c -- the streaming parser of the text trace format, version 1
 * (docs/trace-format.md; the contract is spec/trace-text-format.md).
 *
 * The parser is a trace_reader. Each call to next() reads lines (getline on
 * a FILE, or a cursor over a copied string) until one holds a statement,
 * and returns it; declarations and `expect` lines met on the way go into
 * the reader's own trace. Nothing per statement is kept: the statement's
 * accesses and attributes live in two arrays of the parser that the next
 * call overwrites, so memory grows with declarations and distinct strings
 * (every name and attribute value is interned), never with the number of
 * statements.
 *
 * Labels. Captured traces carry a distinct label on nearly every statement;
 * interning them would make memory grow with the trace. Opened with lazy
 * labels (trace_text_open_lazy), the parser gives TRACE_LABEL_LAZY and
 * resolves a label only when asked (label_text): the current statement's
 * from its line, any earlier one by reading its line again. For that it
 * keeps a mark (byte offset and line) every MARK_EVERY statements, and a
 * second parser, `look`, over the same file, which seeks to the mark
 * before the statement and reads forward; the main parser's position is
 * restored afterwards. Only a regular file gives lazy labels. Its marks
 * are kept with eager labels too, so that an attribute of a statement read
 * so far can be read again the same way (attr_text: a reported
 * statement's site=, which the checker does not keep).
 *
 * A line goes through two steps:
 *
 *   1. Lexing (lex_line) splits it into words at blanks (space, tab). A
 *      quoted segment ("...", with \" and \\ as its only escapes) may hold
 *      blanks and may stand anywhere in a word (r:"my buf"[0:4],
 *      node="layer 3"). A `#` that begins a word starts a comment, so
 *      `#` inside a name (a#1) is part of the name. Control characters
 *      other than tab are refused anywhere; one '\r' before the newline is
 *      dropped (CRLF files).
 *   2. Parsing (parse_line) reads the words by position: a word is taken
 *      apart with a cursor (text_cursor) that reads names, numbers and
 *      values. Keywords (queue, buffer, expect, semaphore, meta, host, stream, pinned, all,
 *      device=, count=, ...) are recognised only unquoted, so a quoted word
 *      is always a name: `"queue" op x` is an op on a queue named queue.
 *
 * Every error is one line `FILE:LINE:COL: message`, status TRACE_ESYNTAX,
 * with COL the 1-based byte column of the offending part: the word, or the
 * name, number or '[' inside it; a missing word is reported just past the
 * line's last word ("found end of line"). After an error the reader
 * repeats it and yields nothing more.
 */
#include "trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Bytes of a name or token shown in a message. */
#define SHOW_MAX 64
#define SHOW(len) (int)((len) > SHOW_MAX ? SHOW_MAX : (len))

typedef struct text_word {
    const char *s;          /* into the current line */
    uint32_t len;
    uint32_t col;           /* 1-based column of s[0] */
} text_word;

/* A position inside one word. */
typedef struct text_cursor {
    const char *s, *end;
    uint32_t col;           /* column of *s */
    uint32_t word;          /* index of the word */
} text_cursor;

/* A name or value as read, unescaped (into the line or the scratch). */
typedef struct text_str {
    const char *s;
    size_t len;
    uint32_t col;
    bool quoted;
} text_str;

/* Statements stand on lines [start, start + n) (runs of adjacent lines). */
typedef struct stmt_line_run {
    uint32_t start, n;
} stmt_line_run;

typedef struct stmt_lines {
    stmt_line_run *runs;
    uint32_t n, cap;
} stmt_lines;

/* Where statement k * MARK_EVERY starts: its line's byte offset and number. */
#define MARK_EVERY 1024

typedef struct stmt_mark {
    uint64_t offset;
    uint32_t line;
} stmt_mark;

/* An expect value that names a statement by its line (Q@LINE, line=N). */
typedef struct line_ref {
    uint32_t expect_line, col;
    uint64_t target;
} line_ref;

typedef struct text_parser {
    trace *t;
    char *name;                 /* file name for messages; owned */
    FILE *f;                    /* NULL when reading a string */
    bool close_f;
    char *text;                 /* a copy of the string input; owned */
    size_t text_len, text_pos;
    char *linebuf;              /* getline's buffer */
    size_t linebuf_cap;
    const char *line;           /* the current line, without its newline */
    size_t line_len;
    uint32_t lineno;
    uint64_t pos;               /* byte offset just past the current line */
    uint64_t line_start;        /* byte offset of the current line */
    /* Line of the first stream statement whose submitter was implied (no
     * by=), 0 when none: a second host queue may not be declared after it. */
    uint32_t implied_by_line;

    text_word *words;
    uint32_t n_words, cap_words;
    uint32_t eol_col;           /* column just past the last word */
    char *scratch;              /* unescaped quoted strings of this line */
    size_t scratch_len, scratch_cap;

    trace_access *acc;          /* the current statement's accesses */
    uint32_t n_acc, cap_acc;
    trace_attr *attr;           /* its attributes, or an expect's keys */
    uint32_t n_attr, cap_attr;

    uint32_t *queue_line;       /* declaration line of each queue */
    uint32_t cap_queue_line;
    uint32_t *buffer_line;      /* of each buffer */
    uint32_t cap_buffer_line;

    uint64_t n_stmts;
    uint64_t n_first;           /* statements of the first pass, after a rewind */
    stmt_lines stmt_lines;      /* lines that hold statements, as runs */
    line_ref *refs;             /* expect references, checked at the end */
    uint32_t n_refs, cap_refs;
    uint32_t header_line;       /* 0 until the header is read */
    bool replay;                /* read again after a rewind: statements only */
    /* Flags and semaphores by name (string id): line of the semaphore's
     * declaration or of the flag's first use << 1 | 1 for a semaphore.
     * Shared with the look parser (own_sync_objs: this parser frees it). */
    trace_u64map *sync_objs;
    bool own_sync_objs;

    /* Lazy labels (see the top of the file). */
    bool lazy;
    bool marked;                /* a regular file: marks kept, statements can be read
                                 * again (lazy labels, attr_text) */
    char *cur_label;            /* the label of the statement given last */
    size_t cur_len, cap_cur;
    uint64_t cur_seq;
    bool has_cur;
    trace_stmt peek;            /* the first statement, read at open (text_next) */
    int peek_rc;                /* what reading it returned: 1, 0 or -1 */
    bool has_peek;              /* peek not yet handed out */
    stmt_mark *marks;           /* marks[k]: statement k * MARK_EVERY */
    uint32_t n_marks, cap_marks;
    struct text_parser *look;   /* reads earlier lines again; shares t and f */
    trace_stmt again;           /* look parser: the statement it read again last */
    bool has_again;
    bool done, failed;
    trace_error err;            /* the error, repeated after a failure */
} text_parser;

/* ------------------------------------------------------------------ */
/* Errors.                                                             */

static int perr(text_parser *p, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records a syntax error at col of the current line; returns -1. */
static int perr(text_parser *p, uint32_t col, const char *fmt, ...)
{
    char what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    trace_error_set(&p->err, TRACE_ESYNTAX, "%s:%u:%u: %s", p->name, p->lineno, col, what);
    p->failed = true;
    return -1;
}

static int nomem(text_parser *p)
{
    trace_error_set(&p->err, TRACE_ENOMEM, "%s:%u: out of memory", p->name, p->lineno);
    p->failed = true;
    return -1;
}

/* "expected WHAT, found ..." for the rest of a word from c (or the end). */
static int expected_at(text_parser *p, const text_cursor *c, const char *what)
{
    if (c->s < c->end)
        return perr(p, c->col, "expected %s, found '%.*s'", what, SHOW(c->end - c->s), c->s);
    return perr(p, c->col, "expected %s, found %s", what,
                c->word + 1 >= p->n_words ? "end of line" : "a blank");
}

/* "expected WHAT, found ..." for word i, or end of line when there is none. */
static int expected_word(text_parser *p, uint32_t i, const char *what)
{
    if (i >= p->n_words)
        return perr(p, p->eol_col, "expected %s, found end of line", what);
    const text_word *w = &p->words[i];
    return perr(p, w->col, "expected %s, found '%.*s'", what, SHOW(w->len), w->s);
}

/* ------------------------------------------------------------------ */
/* Growing arrays.                                                     */


/* ------------------------------------------------------------------ */
/* Lines and words.                                                    */

/* Reads the next line into p->line. Returns 1, 0 at the end, -1 on a read
 * error. */
static int read_line(text_parser *p)
{
    size_t len;
    if (p->f) {
        errno = 0;
        ssize_t n = getline(&p->linebuf, &p->linebuf_cap, p->f);
        if (n < 0) {
            if (ferror(p->f)) {
                trace_error_set(&p->err, TRACE_EIO, "%s:%u: read error: %s", p->name,
                                p->lineno + 1, strerror(errno ? errno : EIO));
                p->failed = true;
                return -1;
            }
            return 0;
        }
        p->line = p->linebuf;
        len = (size_t)n;
        p->line_start = p->pos;
        p->pos += (uint64_t)n;
    } else {
        if (p->text_pos >= p->text_len)
            return 0;
        const char *s = p->text + p->text_pos;
        const char *nl = memchr(s, '\n', p->text_len - p->text_pos);
        len = nl ? (size_t)(nl - s) + 1 : p->text_len - p->text_pos;
        p->line_start = p->text_pos;
        p->text_pos += len;
        p->pos = p->text_pos;
        p->line = s;
    }
    if (len && p->line[len - 1] == '\n')
        len--;
    if (len && p->line[len - 1] == '\r')
        len--;
    p->line_len = len;
    p->lineno++;
    return 1;
}

static inline bool is_blank(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static inline bool is_control(unsigned char c)
{
    return (c < 0x20 && c != '\t') || c == 0x7f;
}

/* Splits the current line into words (see the top of the file). */
static int lex_line(text_parser *p)
{
    const char *s = p->line;
    size_t n = p->line_len, i = 0;
    if (n >= UINT32_MAX)
        return perr(p, 1, "line is longer than 4 GiB");
    /* The format is UTF-8 text; anything else would reach JSON and SQLite. */
    size_t bad = trace_utf8_check(s, n);
    if (bad < n)
        return perr(p, (uint32_t)bad + 1, "invalid UTF-8 (byte 0x%02x); a trace is UTF-8 text",
                    (unsigned char)s[bad]);
    p->n_words = 0;
    p->eol_col = 1;
    p->scratch_len = 0;
    if (p->scratch_cap < n + 1) {
        char *ns = realloc(p->scratch, n + 1);
        if (!ns)
            return nomem(p);
        p->scratch = ns;
        p->scratch_cap = n + 1;
    }
    for (;;) {
        while (i < n && is_blank((unsigned char)s[i]))
            i++;
        if (i >= n || s[i] == '#')
            break;
        size_t start = i;
        while (i < n && !is_blank((unsigned char)s[i])) {
            unsigned char c = (unsigned char)s[i];
            if (c == '"') {
                size_t open = i++;
                for (;;) {
                    if (i >= n)
                        return perr(p, (uint32_t)open + 1, "unterminated quoted string");
                    c = (unsigned char)s[i];
                    if (c == '"')
                        break;
                    if (c == '\\') {
                        if (i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\')) {
                            i += 2;
                            continue;
                        }
                        if (i + 1 < n && !is_control((unsigned char)s[i + 1]))
                            return perr(p, (uint32_t)i + 1,
                                        "unknown escape '\\%c'; only \\\" and \\\\ escape inside quotes",
                                        s[i + 1]);
                        return perr(p, (uint32_t)i + 1,
                                    "unknown escape; only \\\" and \\\\ escape inside quotes");
                    }
                    if (is_control(c))
                        return perr(p, (uint32_t)i + 1, "unexpected control character 0x%02x", c);
                    i++;
                }
                i++;
                continue;
            }
            if (is_control(c))
                return perr(p, (uint32_t)i + 1, "unexpected control character 0x%02x", c);
            i++;
        }
        if (trace_grow32((void **)&p->words, &p->cap_words, (uint64_t)p->n_words + 1, sizeof *p->words) != 0)
            return nomem(p);
        p->words[p->n_words++] = (text_word){ s + start, (uint32_t)(i - start), (uint32_t)start + 1 };
        p->eol_col = (uint32_t)i + 1;
    }
    return 0;
}

static text_cursor cursor(const text_parser *p, uint32_t i)
{
    const text_word *w = &p->words[i];
    return (text_cursor){ w->s, w->s + w->len, w->col, i };
}

static void advance(text_cursor *c, size_t n)
{
    c->s += n;
    c->col += (uint32_t)n;
}

/* Word i is exactly kw, unquoted. */
static bool word_is(const text_parser *p, uint32_t i, const char *kw)
{
    size_t n = strlen(kw);
    return i < p->n_words && p->words[i].len == n && memcmp(p->words[i].s, kw, n) == 0;
}

/* Word i starts with prefix (unquoted), e.g. "count=". */
static bool word_starts(const text_parser *p, uint32_t i, const char *prefix)
{
    size_t n = strlen(prefix);
    return i < p->n_words && p->words[i].len >= n && memcmp(p->words[i].s, prefix, n) == 0;
}

/* ------------------------------------------------------------------ */
/* Names, values, numbers.                                             */

static inline bool is_name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static inline bool is_name_char(unsigned char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '#' || c == ':' ||
           c == '/' || c == '-';
}

/* Reads a quoted segment at c (c->s points at '"') into the scratch. */
static void unquote(text_parser *p, text_cursor *c, text_str *out)
{
    const char *s = c->s + 1;
    char *dst = p->scratch + p->scratch_len;
    size_t n = 0;
    out->col = c->col;
    out->quoted = true;
    /* The lexer checked the escapes and the closing quote. */
    while (s < c->end && *s != '"') {
        if (*s == '\\' && s + 1 < c->end)
            s++;
        dst[n++] = *s++;
    }
    if (s < c->end)
        s++;
    p->scratch_len += n;
    out->s = dst;
    out->len = n;
    advance(c, (size_t)(s - c->s));
}

/* Reads a name (bare or quoted) at c. Returns false, with nothing read and
 * no error, when no name starts there. */
static bool read_name(text_parser *p, text_cursor *c, text_str *out)
{
    if (c->s < c->end && *c->s == '"') {
        unquote(p, c, out);
        return true;
    }
    if (c->s >= c->end || !is_name_start((unsigned char)*c->s))
        return false;
    const char *e = c->s + 1;
    while (e < c->end && is_name_char((unsigned char)*e))
        e++;
    *out = (text_str){ c->s, (size_t)(e - c->s), c->col, false };
    advance(c, (size_t)(e - c->s));
    return true;
}

/* Reads a name that must be the whole of the rest of the word. */
static int name_rest(text_parser *p, text_cursor *c, text_str *out, const char *what)
{
    text_cursor start = *c;
    if (!read_name(p, c, out) || c->s != c->end)
        return expected_at(p, &start, what);
    if (out->len == 0)
        return perr(p, out->col, "expected %s, found empty quotes", what);
    return 0;
}

/* Reads word i, which must be one name. */
static int name_word(text_parser *p, uint32_t i, text_str *out, const char *what)
{
    if (i >= p->n_words)
        return expected_word(p, i, what);
    text_cursor c = cursor(p, i);
    return name_rest(p, &c, out, what);
}

/* Reads a value (bare: any bytes but '"'; or quoted) to the end of the word. */
static int value_rest(text_parser *p, text_cursor *c, text_str *out, const char *what)
{
    if (c->s < c->end && *c->s == '"') {
        unquote(p, c, out);
        if (c->s != c->end)
            return perr(p, c->col, "expected a blank after the quoted value, found '%.*s'",
                        SHOW(c->end - c->s), c->s);
        return 0;
    }
    if (c->s >= c->end)
        return expected_at(p, c, what);
    const char *q = memchr(c->s, '"', (size_t)(c->end - c->s));
    if (q)
        return perr(p, c->col + (uint32_t)(q - c->s),
                    "unexpected '\"' inside a value; quote the whole value");
    *out = (text_str){ c->s, (size_t)(c->end - c->s), c->col, false };
    advance(c, out->len);
    return 0;
}

/* Reads a number (decimal or 0x hex, at most 2^63-1) at c; stops at the
 * first byte that is not a digit. */
static int read_number(text_parser *p, text_cursor *c, uint64_t *out, const char *what)
{
    const char *s = c->s, *e = c->end;
    uint64_t v = 0;
    bool overflow = false;
    if (e - s >= 3 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') &&
        strchr("0123456789abcdefABCDEF", s[2]) && s[2]) {
        s += 2;
        while (s < e && *s && strchr("0123456789abcdefABCDEF", *s)) {
            unsigned d = (unsigned)(*s <= '9' ? *s - '0' : (*s | 0x20) - 'a' + 10);
            if (v > ((uint64_t)INT64_MAX >> 4))
                overflow = true;
            v = (v << 4) | d;
            s++;
        }
    } else if (s < e && *s >= '0' && *s <= '9') {
        while (s < e && *s >= '0' && *s <= '9') {
            unsigned d = (unsigned)(*s - '0');
            if (v > ((uint64_t)INT64_MAX - d) / 10)
                overflow = true;
            v = v * 10 + d;
            s++;
        }
    } else {
        return expected_at(p, c, what);
    }
    if (overflow || v > (uint64_t)INT64_MAX)
        return perr(p, c->col, "number '%.*s' is larger than 2^63-1", SHOW(s - c->s), c->s);
    *out = v;
    advance(c, (size_t)(s - c->s));
    return 0;
}

/* Reads a number that must be the whole rest of the word. */
static int number_rest(text_parser *p, text_cursor *c, uint64_t *out, const char *what)
{
    text_cursor start = *c;
    if (read_number(p, c, out, what) != 0)
        return -1;
    if (c->s != c->end)
        return expected_at(p, &start, what);
    return 0;
}

/* Word i is `key=NUMBER` with the given key prefix ("count="); reads it. */
static int keyed_number(text_parser *p, uint32_t i, const char *prefix, uint64_t *out,
                        const char *what)
{
    if (!word_starts(p, i, prefix))
        return expected_word(p, i, what);
    text_cursor c = cursor(p, i);
    advance(&c, strlen(prefix));
    return number_rest(p, &c, out, "a number");
}

static uint32_t intern(text_parser *p, const text_str *s)
{
    return trace_intern(p->t, s->s, s->len);
}

/* Looks up a declared queue; error when undeclared. */
static int find_queue(text_parser *p, const text_str *name, uint32_t *q)
{
    *q = trace_find_queue(p->t, name->s, name->len);
    if (*q == TRACE_NONE)
        return perr(p, name->col, "undeclared queue '%.*s'", SHOW(name->len), name->s);
    return 0;
}

static int find_buffer(text_parser *p, const text_str *name, uint32_t *b)
{
    *b = trace_find_buffer(p->t, name->s, name->len);
    if (*b == TRACE_NONE)
        return perr(p, name->col, "undeclared buffer '%.*s'", SHOW(name->len), name->s);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Declarations.                                                       */

static int remember_line(text_parser *p, uint32_t **lines, uint32_t *cap, uint32_t index)
{
    if (trace_grow32((void **)lines, cap, (uint64_t)index + 1, sizeof **lines) != 0)
        return nomem(p);
    (*lines)[index] = p->lineno;
    return 0;
}

/* queue NAME host | queue NAME stream device=D */
static int parse_queue_decl(text_parser *p)
{
    text_str name, dev;
    if (name_word(p, 1, &name, "a queue name") != 0)
        return -1;
    uint32_t q = trace_find_queue(p->t, name.s, name.len);
    if (q != TRACE_NONE)
        return perr(p, name.col, "queue '%.*s' is already declared (line %u)", SHOW(name.len),
                    name.s, p->queue_line[q]);
    trace_queue_kind kind;
    uint32_t device = TRACE_NONE;
    if (word_is(p, 2, "host")) {
        kind = TRACE_QUEUE_HOST;
        /* The implied by= of earlier statements named the only host: a second
         * one would silently change what they meant. */
        if (p->t->n_host_queues == 1 && p->implied_by_line)
            return perr(p, name.col,
                        "a second host queue declared after line %u relied on the only one "
                        "(by= implied): declare every host queue first, or write by=",
                        p->implied_by_line);
        if (word_starts(p, 3, "device="))
            return perr(p, p->words[3].col, "device= applies only to stream queues");
        if (p->n_words > 3)
            return expected_word(p, 3, "end of line");
    } else if (word_is(p, 2, "stream")) {
        kind = TRACE_QUEUE_STREAM;
        if (!word_starts(p, 3, "device="))
            return expected_word(p, 3, "device=D (a stream needs its device)");
        text_cursor c = cursor(p, 3);
        advance(&c, 7);
        if (value_rest(p, &c, &dev, "a device after device=") != 0)
            return -1;
        if (p->n_words > 4)
            return expected_word(p, 4, "end of line");
        if ((device = intern(p, &dev)) == TRACE_NONE)
            return nomem(p);
    } else {
        return expected_word(p, 2, "'host' or 'stream'");
    }
    uint32_t id = intern(p, &name);
    if (id == TRACE_NONE || (q = trace_add_queue(p->t, id, kind, device)) == TRACE_NONE)
        return nomem(p);
    return remember_line(p, &p->queue_line, &p->cap_queue_line, q);
}

/* A flag's or semaphore's entry in p->sync_objs (NULL when not yet used). */
static uint64_t *sync_obj(text_parser *p, uint32_t name)
{
    return p->sync_objs ? trace_u64map_get(p->sync_objs, name) : NULL;
}

static int sync_obj_put(text_parser *p, uint32_t name, bool sem)
{
    if (!p->sync_objs) {
        if (!(p->sync_objs = calloc(1, sizeof *p->sync_objs)))
            return nomem(p);
        p->own_sync_objs = true;
    }
    uint64_t *v = trace_u64map_put(p->sync_objs, name, (uint64_t)p->lineno << 1 | (sem ? 1u : 0u));
    return v ? 0 : nomem(p);
}

/* semaphore NAME: a value semaphore (its signals set a value, its awaits
 * wait for one); declared before its first signal or await. */
static int parse_semaphore_decl(text_parser *p)
{
    text_str name;
    if (name_word(p, 1, &name, "a semaphore name") != 0)
        return -1;
    if (p->n_words > 2)
        return expected_word(p, 2, "end of line");
    uint32_t id = intern(p, &name);
    if (id == TRACE_NONE)
        return nomem(p);
    const uint64_t *o = sync_obj(p, id);
    if (o && (*o & 1))
        return perr(p, name.col, "semaphore '%.*s' is already declared (line %llu)",
                    SHOW(name.len), name.s, (unsigned long long)(*o >> 1));
    if (o)
        return perr(p, name.col,
                    "'%.*s' is a flag (signalled or awaited at line %llu); declare a semaphore "
                    "before its first signal or await",
                    SHOW(name.len), name.s, (unsigned long long)(*o >> 1));
    return sync_obj_put(p, id, true);
}

/* The value word of a semaphore's signal (`set=V`) or await (`>=V`). */
static int parse_sem_value(text_parser *p, trace_stmt *s, const text_str *name)
{
    bool set = s->kind == TRACE_SIGNAL;
    const char *prefix = set ? "set=" : ">=";
    if (!word_starts(p, 3, prefix))
        return perr(p, 3 < p->n_words ? p->words[3].col : p->eol_col,
                    "'%.*s' is a semaphore: expected %s after its name, found %s%.*s%s",
                    SHOW(name->len), name->s, set ? "set=V (the value it sets)" : ">=V (the value it waits for)",
                    3 < p->n_words ? "'" : "end of line",
                    3 < p->n_words ? SHOW(p->words[3].len) : 0, 3 < p->n_words ? p->words[3].s : "",
                    3 < p->n_words ? "'" : "");
    text_cursor c = cursor(p, 3);
    advance(&c, strlen(prefix));
    s->sem = true;
    return number_rest(p, &c, &s->count, "a number");
}

/* signal/await F: a flag, or a declared semaphore with its value. */
static int parse_signal_await(text_parser *p, trace_stmt *s, uint32_t *i)
{
    text_str name;
    if (name_word(p, 2, &name, "a flag or semaphore name") != 0)
        return -1;
    if ((s->object = intern(p, &name)) == TRACE_NONE)
        return nomem(p);
    const uint64_t *o = sync_obj(p, s->object);
    if (o && (*o & 1)) {
        *i = 4;
        return parse_sem_value(p, s, &name);
    }
    if (word_starts(p, 3, ">="))
        return perr(p, p->words[3].col,
                    "'%.*s' is a flag, which takes no value; declare `semaphore %.*s` before its "
                    "first use to wait for a value",
                    SHOW(name.len), name.s, SHOW(name.len), name.s);
    return o || p->replay ? 0 : sync_obj_put(p, s->object, false);
}

/* The options of a buffer declaration: column of each, 0 when absent. */
typedef struct buffer_opts {
    uint32_t size_col, device_col, host_col, pinned_col, in_col, offset_col;
    uint64_t size, offset;
    text_str device, parent;
} buffer_opts;

static int parse_buffer_option(text_parser *p, uint32_t i, buffer_opts *o)
{
    const text_word *w = &p->words[i];
    static const char *const keys[] = { "size=", "device=", "in=", "offset=" };
    if (word_is(p, i, "host") || word_is(p, i, "pinned")) {
        uint32_t *col = word_is(p, i, "host") ? &o->host_col : &o->pinned_col;
        if (*col)
            return perr(p, w->col, "duplicate buffer option '%.*s'", SHOW(w->len), w->s);
        *col = w->col;
        return 0;
    }
    for (int k = 0; k < 4; k++) {
        if (!word_starts(p, i, keys[k]))
            continue;
        uint32_t *col = k == 0 ? &o->size_col : k == 1 ? &o->device_col
                      : k == 2 ? &o->in_col : &o->offset_col;
        if (*col)
            return perr(p, w->col, "duplicate buffer option '%s'", keys[k]);
        *col = w->col;
        text_cursor c = cursor(p, i);
        advance(&c, strlen(keys[k]));
        switch (k) {
        case 0:
            if (number_rest(p, &c, &o->size, "a size in bytes") != 0)
                return -1;
            if (o->size == 0)
                return perr(p, w->col + 5, "size must be at least 1");
            return 0;
        case 1:
            return value_rest(p, &c, &o->device, "a device after device=");
        case 2:
            return name_rest(p, &c, &o->parent, "a parent buffer name after in=");
        default:
            return number_rest(p, &c, &o->offset, "an offset in bytes");
        }
    }
    return perr(p, w->col,
                "unknown buffer option '%.*s'; expected size=N, device=D, host, pinned, "
                "in=PARENT or offset=O", SHOW(w->len), w->s);
}

/* buffer NAME size=N [device=D | host] [pinned] | buffer NAME in=P offset=O size=N */
static int parse_buffer_decl(text_parser *p)
{
    text_str name;
    buffer_opts o;
    memset(&o, 0, sizeof o);
    if (name_word(p, 1, &name, "a buffer name") != 0)
        return -1;
    uint32_t b = trace_find_buffer(p->t, name.s, name.len);
    if (b != TRACE_NONE)
        return perr(p, name.col, "buffer '%.*s' is already declared (line %u)", SHOW(name.len),
                    name.s, p->buffer_line[b]);
    for (uint32_t i = 2; i < p->n_words; i++)
        if (parse_buffer_option(p, i, &o) != 0)
            return -1;
    if (!o.size_col)
        return expected_word(p, p->n_words, "size=N");
    uint32_t id = intern(p, &name);
    if (id == TRACE_NONE)
        return nomem(p);
    if (o.in_col) {
        uint32_t bad = o.device_col ? o.device_col : o.host_col ? o.host_col : o.pinned_col;
        if (bad)
            return perr(p, bad, "a view takes its place from its root: device=, host and "
                                "pinned are not allowed with in=");
        if (!o.offset_col)
            return expected_word(p, p->n_words, "offset=O (a view needs its offset)");
        uint32_t parent;
        if (find_buffer(p, &o.parent, &parent) != 0)
            return -1;
        uint64_t psize = p->t->buffers[parent].size;
        if (o.size > psize || o.offset > psize - o.size)
            return perr(p, o.size > psize ? o.size_col : o.offset_col,
                        "view '%.*s' [%llu, %llu + %llu) lies outside its parent '%.*s' of size %llu",
                        SHOW(name.len), name.s, (unsigned long long)o.offset,
                        (unsigned long long)o.offset, (unsigned long long)o.size,
                        SHOW(o.parent.len), o.parent.s, (unsigned long long)psize);
        b = trace_add_view(p->t, id, parent, o.offset, o.size);
    } else {
        if (o.offset_col)
            return perr(p, o.offset_col, "offset= applies only to views (with in=PARENT)");
        if (o.device_col && o.host_col)
            return perr(p, o.device_col > o.host_col ? o.device_col : o.host_col,
                        "a buffer is on device=D or host, not both");
        uint32_t device = TRACE_NONE;
        trace_loc loc = TRACE_LOC_UNSPECIFIED;
        if (o.device_col) {
            loc = TRACE_LOC_DEVICE;
            if ((device = intern(p, &o.device)) == TRACE_NONE)
                return nomem(p);
        } else if (o.host_col) {
            loc = TRACE_LOC_HOST;
        }
        b = trace_add_root_buffer(p->t, id, o.size, loc, device, o.pinned_col != 0);
    }
    if (b == TRACE_NONE)
        return nomem(p);
    return remember_line(p, &p->buffer_line, &p->cap_buffer_line, b);
}

/* ------------------------------------------------------------------ */
/* Expectations.                                                       */

/* The keys an expect line of one kind takes, read from the finding table
 * (trace.h: "type=RAW|WAR|WAW first=LABEL [buffer=NAME]"): required unless
 * in brackets; a key the table names twice may repeat. */
#define EXPECT_KEYS 4

typedef struct expect_rule {
    const char *key[EXPECT_KEYS];
    size_t len[EXPECT_KEYS];
    uint32_t n;
    unsigned required, repeat;      /* bit k: key k */
    char usage[160];                /* "expect race type=... first=..." */
} expect_rule;

static void expect_rule_of(trace_finding_kind kind, expect_rule *r)
{
    const char *e = trace_finding_about(kind)->expect;
    memset(r, 0, sizeof *r);
    snprintf(r->usage, sizeof r->usage, "expect %s%s%s", trace_finding_str(kind), *e ? " " : "",
             e);
    while (*e) {
        while (*e == ' ')
            e++;
        bool optional = *e == '[';
        e += optional;
        const char *eq = e;
        while (*eq && *eq != '=' && *eq != ' ')
            eq++;
        if (*eq == '=') {
            size_t len = (size_t)(eq - e);
            uint32_t k = 0;
            while (k < r->n && !(r->len[k] == len && memcmp(r->key[k], e, len) == 0))
                k++;
            if (k < r->n) {
                r->repeat |= 1u << k;
            } else if (r->n < EXPECT_KEYS) {
                r->key[r->n] = e;
                r->len[r->n] = len;
                r->required |= optional ? 0 : 1u << r->n;
                r->n++;
            }
        }
        while (*e && *e != ' ')
            e++;
    }
}

static int push_attr(text_parser *p, uint32_t key, uint32_t value)
{
    if (key == TRACE_NONE || value == TRACE_NONE)
        return nomem(p);
    if (trace_grow32((void **)&p->attr, &p->cap_attr, (uint64_t)p->n_attr + 1, sizeof *p->attr) != 0)
        return nomem(p);
    p->attr[p->n_attr++] = (trace_attr){ key, value };
    return 0;
}

/* Reads word i as KEY=VALUE. */
static int key_value(text_parser *p, uint32_t i, text_str *key, text_str *value,
                     text_cursor *vc, const char *what)
{
    text_cursor c = cursor(p, i);
    if (!read_name(p, &c, key) || c.s >= c.end || *c.s != '=' || key->len == 0)
        return expected_word(p, i, what);
    advance(&c, 1);
    *vc = c;
    return value_rest(p, &c, value, "a value after '='");
}

/* A statement reference Q@LINE (a name, '@', decimal digits): its line. */
static bool parse_line_ref(const text_str *v, uint64_t *line)
{
    const char *at = NULL;
    for (size_t i = 0; i < v->len; i++)
        if (v->s[i] == '@')
            at = v->s + i;
    if (!at || at == v->s)
        return false;
    size_t n = v->len - (size_t)(at + 1 - v->s);
    uint64_t x = 0;
    if (n == 0 || n > 12)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (at[1 + i] < '0' || at[1 + i] > '9')
            return false;
        x = x * 10 + (uint64_t)(at[1 + i] - '0');
    }
    *line = x;
    return true;
}

/* expect KIND key=value... */
static int parse_expect(text_parser *p)
{
    if (p->n_words < 2 || (p->words[1].len && p->words[1].s[0] == '"'))
    {
        char what[600];
        snprintf(what, sizeof what, "a finding kind (%s)", trace_finding_list());
        return expected_word(p, 1, what);
    }
    const text_word *kw = &p->words[1];
    int kind = trace_finding_parse(kw->s, kw->len);
    if (kind < 0)
        return perr(p, kw->col, "unknown finding '%.*s'; expected %s", SHOW(kw->len), kw->s,
                    trace_finding_list());
    expect_rule rule_of, *rule = &rule_of;
    expect_rule_of((trace_finding_kind)kind, rule);
    unsigned seen = 0;
    p->n_attr = 0;
    for (uint32_t i = 2; i < p->n_words; i++) {
        text_str key, value;
        text_cursor vc;
        if (kind == TRACE_FINDING_CLEAN)
            return expected_word(p, i, "end of line (expect clean takes no keys)");
        if (key_value(p, i, &key, &value, &vc, "key=value") != 0)
            return -1;
        int k = -1;
        for (uint32_t j = 0; j < rule->n; j++)
            if (rule->len[j] == key.len && memcmp(rule->key[j], key.s, key.len) == 0)
                k = (int)j;
        if (k < 0)
            return perr(p, key.col, "unknown key '%.*s' for expect %s; usage: %s", SHOW(key.len),
                        key.s, trace_finding_str(kind), rule->usage);
        if ((seen & (1u << k)) && !(rule->repeat & (1u << k)))
            return perr(p, key.col, "duplicate key '%.*s=' in expect %s", (int)rule->len[k],
                        rule->key[k], trace_finding_str(kind));
        seen |= 1u << k;
        if (kind == TRACE_FINDING_RACE && k == 0 && !value.quoted &&
            !(value.len == 3 && (memcmp(value.s, "RAW", 3) == 0 || memcmp(value.s, "WAR", 3) == 0 ||
                                 memcmp(value.s, "WAW", 3) == 0)))
            return perr(p, value.col, "expected RAW, WAR or WAW, found '%.*s'", SHOW(value.len),
                        value.s);
        if (kind == TRACE_FINDING_RACE && k == 0 && value.quoted)
            return perr(p, value.col, "expected RAW, WAR or WAW, found a quoted value");
        uint64_t target;
        bool is_ref = false;
        if (kind == TRACE_FINDING_REDUNDANT_SYNC) {
            if (value.quoted)
                return perr(p, value.col, "expected a line number, found a quoted value");
            if (number_rest(p, &vc, &target, "a line number") != 0)
                return -1;
            is_ref = true;
        } else if ((kind == TRACE_FINDING_RACE && (k == 1 || k == 2)) ||
                   (kind == TRACE_FINDING_USE_AFTER_FREE && k == 1)) {
            is_ref = parse_line_ref(&value, &target);
        }
        if (is_ref) {
            if (trace_grow32((void **)&p->refs, &p->cap_refs, (uint64_t)p->n_refs + 1, sizeof *p->refs) != 0)
                return nomem(p);
            p->refs[p->n_refs++] = (line_ref){ p->lineno, value.col, target };
        }
        if (value.len == 0)
            return perr(p, value.col, "expected a value after '=', found empty quotes");
        if (push_attr(p, intern(p, &key), intern(p, &value)) != 0)
            return -1;
    }
    for (uint32_t j = 0; j < rule->n; j++)
        if ((rule->required & (1u << j)) && !(seen & (1u << j)))
            return perr(p, kw->col, "expect %s needs %.*s=; usage: %s", trace_finding_str(kind),
                        (int)rule->len[j], rule->key[j], rule->usage);
    if (trace_add_expect(p->t, kind, p->lineno, p->attr, p->n_attr) != 0)
        return nomem(p);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Statements.                                                         */

/* A REF at c (NAME, NAME[LO:HI], NAME[LO:]) to the end of the word. */
static int parse_ref(text_parser *p, text_cursor *c, trace_access *a, const char *what)
{
    text_str name;
    text_cursor start = *c;
    if (!read_name(p, c, &name) || (c->s < c->end && *c->s != '['))
        return expected_at(p, &start, what);
    if (name.len == 0)
        return perr(p, name.col, "expected %s, found empty quotes", what);
    if (find_buffer(p, &name, &a->buffer) != 0)
        return -1;
    uint64_t size = p->t->buffers[a->buffer].size;
    a->form = TRACE_REF_WHOLE;
    a->lo = 0;
    a->hi = size;
    if (c->s == c->end)
        return 0;
    uint32_t bracket = c->col;
    advance(c, 1);
    if (read_number(p, c, &a->lo, "a byte offset LO in NAME[LO:HI]") != 0)
        return -1;
    if (c->s >= c->end || *c->s != ':')
        return expected_at(p, c, "':' in NAME[LO:HI]");
    advance(c, 1);
    if (c->s < c->end && *c->s == ']') {
        a->form = TRACE_REF_FROM;
    } else {
        a->form = TRACE_REF_RANGE;
        if (read_number(p, c, &a->hi, "a byte offset HI in NAME[LO:HI]") != 0)
            return -1;
        if (c->s >= c->end || *c->s != ']')
            return expected_at(p, c, "']' in NAME[LO:HI]");
    }
    advance(c, 1);
    if (c->s != c->end)
        return expected_at(p, c, "a blank after ']'");
    if (a->lo > a->hi && a->form == TRACE_REF_RANGE)
        return perr(p, bracket, "range [%llu:%llu] has LO > HI", (unsigned long long)a->lo,
                    (unsigned long long)a->hi);
    if (a->form == TRACE_REF_FROM && a->lo > size)
        return perr(p, bracket, "range [%llu:] lies outside buffer '%.*s' of size %llu",
                    (unsigned long long)a->lo, SHOW(name.len), name.s, (unsigned long long)size);
    if (a->hi > size)
        return perr(p, bracket, "range [%llu:%llu] lies outside buffer '%.*s' of size %llu",
                    (unsigned long long)a->lo, (unsigned long long)a->hi, SHOW(name.len), name.s,
                    (unsigned long long)size);
    return 0;
}

static trace_access *new_access(text_parser *p)
{
    if (trace_grow32((void **)&p->acc, &p->cap_acc, (uint64_t)p->n_acc + 1, sizeof *p->acc) != 0)
        return NULL;
    return &p->acc[p->n_acc++];
}

/* Word i as `r:REF`, `w:REF` or `rw:REF`. */
static int parse_access(text_parser *p, uint32_t i)
{
    text_cursor c = cursor(p, i);
    uint8_t mode;
    if (word_starts(p, i, "r:")) {
        mode = TRACE_R;
        advance(&c, 2);
    } else if (word_starts(p, i, "w:")) {
        mode = TRACE_W;
        advance(&c, 2);
    } else if (word_starts(p, i, "rw:")) {
        mode = TRACE_RW;
        advance(&c, 3);
    } else {
        return expected_word(p, i, "an access r:REF, w:REF or rw:REF");
    }
    trace_access *a = new_access(p);
    if (!a)
        return nomem(p);
    a->mode = mode;
    return parse_ref(p, &c, a, "a buffer name");
}

/* Word i is an attribute: it starts with a name followed by '='. */
static bool is_attr_word(text_parser *p, uint32_t i)
{
    text_cursor c = cursor(p, i);
    text_str key;
    size_t mark = p->scratch_len;
    bool yes = read_name(p, &c, &key) && c.s < c.end && *c.s == '=';
    p->scratch_len = mark;
    return yes;
}

/* s's label: interned, or with lazy labels kept as text until asked for. */
static int set_label(text_parser *p, const text_str *label, trace_stmt *s)
{
    if (p->lazy) {
        /* copied: a quoted label lives in the scratch, which may move */
        if (label->len >= p->cap_cur) {
            size_t cap = p->cap_cur ? p->cap_cur : 64;
            while (cap <= label->len)
                cap *= 2;
            char *nb = realloc(p->cur_label, cap);
            if (!nb)
                return nomem(p);
            p->cur_label = nb;
            p->cap_cur = cap;
        }
        memcpy(p->cur_label, label->s, label->len);
        p->cur_label[label->len] = '\0';
        p->cur_len = label->len;
        p->has_cur = true;
        s->label = TRACE_LABEL_LAZY;
        return 0;
    }
    if ((s->label = intern(p, label)) == TRACE_NONE)
        return nomem(p);
    return 0;
}

/* Word i is a label: a name that does not look like an access. */
static int label_word(text_parser *p, uint32_t i, trace_stmt *s)
{
    text_str label;
    if (word_starts(p, i, "r:") || word_starts(p, i, "w:") || word_starts(p, i, "rw:"))
        return expected_word(p, i, "a label before the accesses");
    if (name_word(p, i, &label, "a label") != 0)
        return -1;
    return set_label(p, &label, s);
}

/* Accesses from word i until the first attribute; returns the next word. */
static int parse_accesses(text_parser *p, uint32_t *i)
{
    while (*i < p->n_words && !is_attr_word(p, *i)) {
        if (parse_access(p, *i) != 0)
            return -1;
        (*i)++;
    }
    return 0;
}

static int time_value(text_parser *p, text_cursor *vc, const text_str *value, int64_t *out,
                      const text_str *key)
{
    uint64_t v;
    if (value->quoted)
        return perr(p, value->col, "expected a number of nanoseconds after %.*s=, found a quoted "
                                   "value", SHOW(key->len), key->s);
    if (number_rest(p, vc, &v, "a number of nanoseconds") != 0)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* Attributes key=value from word i to the end of the line. */
static int parse_attrs(text_parser *p, uint32_t i, trace_stmt *s)
{
    const trace_queue *q = &p->t->queues[s->queue];
    for (; i < p->n_words; i++) {
        text_str key, value;
        text_cursor vc;
        if (key_value(p, i, &key, &value, &vc, "an attribute key=value or end of line") != 0)
            return -1;
        uint32_t kcol = p->words[i].col;
        if (key.len == 2 && memcmp(key.s, "by", 2) == 0) {
            if (s->by != TRACE_NONE)
                return perr(p, kcol, "duplicate attribute 'by='");
            if (q->kind != TRACE_QUEUE_STREAM)
                return perr(p, kcol, "by= applies only to stream statements; '%s' is a host queue",
                            trace_str(p->t, q->name));
            if (value.len == 0)
                return perr(p, value.col, "expected a host queue after by=, found empty quotes");
            if (find_queue(p, &value, &s->by) != 0)
                return -1;
            if (p->t->queues[s->by].kind != TRACE_QUEUE_HOST)
                return perr(p, value.col, "by= must name a host queue; '%.*s' is a stream",
                            SHOW(value.len), value.s);
        } else if ((key.len == 1 && key.s[0] == 't') || (key.len == 3 && memcmp(key.s, "dur", 3) == 0)) {
            int64_t *field = key.len == 1 ? &s->t : &s->dur;
            if (*field != TRACE_TIME_NONE)
                return perr(p, kcol, "duplicate attribute '%.*s='", SHOW(key.len), key.s);
            if (time_value(p, &vc, &value, field, &key) != 0)
                return -1;
        } else if ((s->kind == TRACE_COLLECTIVE || s->kind == TRACE_SEND || s->kind == TRACE_RECV) &&
                   key.len == 5 && memcmp(key.s, "label", 5) == 0) {
            if (s->label != TRACE_NONE)
                return perr(p, kcol, "duplicate attribute 'label='");
            if (value.len == 0)
                return perr(p, value.col, "expected a label after label=, found empty quotes");
            if (set_label(p, &value, s) != 0)
                return -1;
        } else if (push_attr(p, intern(p, &key), intern(p, &value)) != 0) {
            return -1;
        }
    }
    if (q->kind == TRACE_QUEUE_STREAM && s->by == TRACE_NONE && p->t->n_host_queues > 1)
        return perr(p, p->words[0].col,
                    "by=HOST required: the trace declares more than one host queue");
    if (q->kind == TRACE_QUEUE_STREAM && s->by == TRACE_NONE && p->t->n_host_queues == 1 &&
        !p->implied_by_line)
        p->implied_by_line = p->lineno;
    return 0;
}

/* `sync TARGET`: a stream queue name, device=D or all. */
static int parse_sync_target(text_parser *p, trace_stmt *s)
{
    if (word_is(p, 2, "all")) {
        s->sync_scope = TRACE_SYNC_ALL;
        return 0;
    }
    if (word_starts(p, 2, "device=")) {
        text_str dev;
        text_cursor c = cursor(p, 2);
        advance(&c, 7);
        if (value_rest(p, &c, &dev, "a device after device=") != 0)
            return -1;
        s->sync_scope = TRACE_SYNC_DEVICE;
        if ((s->object = intern(p, &dev)) == TRACE_NONE)
            return nomem(p);
        return 0;
    }
    text_str target;
    if (name_word(p, 2, &target, "a sync target (a stream queue, device=D or all)") != 0)
        return -1;
    s->sync_scope = TRACE_SYNC_QUEUE;
    if (find_queue(p, &target, &s->object) != 0)
        return -1;
    if (p->t->queues[s->object].kind != TRACE_QUEUE_STREAM)
        return perr(p, target.col, "sync target '%.*s' is a host queue; expected a stream "
                                   "queue, device=D or all", SHOW(target.len), target.s);
    return 0;
}

/* Word i names an object (event, flag, barrier, communicator): interned. */
static int object_word(text_parser *p, uint32_t i, uint32_t *out, const char *what)
{
    text_str name;
    if (name_word(p, i, &name, what) != 0)
        return -1;
    if ((*out = intern(p, &name)) == TRACE_NONE)
        return nomem(p);
    return 0;
}

/* `send COMM from=R to=P tag=T r:REF...` and `recv COMM from=P to=R tag=T
 * w:REF...`: point to point between ranks. A send only reads, a recv only
 * writes (what the message carries). */
static int parse_p2p(text_parser *p, trace_stmt *s, uint32_t *i)
{
    bool send = s->kind == TRACE_SEND;
    uint64_t from, to, tag;
    if (object_word(p, 2, &s->object, "a communicator name") != 0 ||
        keyed_number(p, 3, "from=", &from, "from=RANK") != 0 ||
        keyed_number(p, 4, "to=", &to, "to=RANK") != 0 ||
        keyed_number(p, 5, "tag=", &tag, "tag=T") != 0)
        return -1;
    if (from >= TRACE_NONE - 1 || to >= TRACE_NONE - 1)
        return perr(p, p->words[from >= TRACE_NONE - 1 ? 3 : 4].col,
                    "a rank must be below %u", TRACE_NONE - 1);
    if (tag > UINT32_MAX)
        return perr(p, p->words[5].col + 4, "a tag must be below 2^32");
    s->rank = (uint32_t)(send ? from : to);
    s->peer = (uint32_t)(send ? to : from);
    s->count = tag;
    *i = 6;
    uint32_t first = p->n_acc;
    if (parse_accesses(p, i) != 0)
        return -1;
    for (uint32_t k = first; k < p->n_acc; k++)
        if (p->acc[k].mode != (send ? TRACE_R : TRACE_W))
            return perr(p, p->words[6 + k - first].col,
                        send ? "a send reads what it sends: expected r:REF"
                             : "a recv writes what it receives: expected w:REF");
    return 0;
}

/* Adds the current line to the statement lines. */
static int note_stmt_line(text_parser *p)
{
    stmt_lines *l = &p->stmt_lines;
    if (l->n && l->runs[l->n - 1].start + l->runs[l->n - 1].n == p->lineno) {
        l->runs[l->n - 1].n++;
        return 0;
    }
    if (trace_grow32((void **)&l->runs, &l->cap, (uint64_t)l->n + 1, sizeof *l->runs) != 0)
        return nomem(p);
    l->runs[l->n++] = (stmt_line_run){ p->lineno, 1 };
    return 0;
}

static bool is_stmt_line(const stmt_lines *l, uint64_t line)
{
    uint32_t lo = 0, hi = l->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (line < l->runs[mid].start)
            hi = mid;
        else if (line >= (uint64_t)l->runs[mid].start + l->runs[mid].n)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* At the end of the input: every Q@LINE and line=N of an expect line must
 * name a line that holds a statement. */
static int check_line_refs(text_parser *p)
{
    for (uint32_t i = 0; i < p->n_refs; i++) {
        const line_ref *r = &p->refs[i];
        if (!is_stmt_line(&p->stmt_lines, r->target)) {
            p->lineno = r->expect_line;
            return perr(p, r->col, "line %llu holds no statement; an expect names an unlabelled "
                                   "statement as Q@LINE with the line of that statement",
                        (unsigned long long)r->target);
        }
    }
    return 0;
}

/* Q VERB ...: fills s and returns 0. */
static int parse_statement(text_parser *p, trace_stmt *s)
{
    text_str qname;
    trace_stmt_init(s);
    p->n_acc = 0;
    p->n_attr = 0;
    p->has_cur = false;
    if (name_word(p, 0, &qname, "a declaration, an expect line or a queue name") != 0)
        return -1;
    if (find_queue(p, &qname, &s->queue) != 0)
        return -1;
    const trace_queue *q = &p->t->queues[s->queue];
    bool host = q->kind == TRACE_QUEUE_HOST;
    static const char verbs[] = "a verb (op, copy, record, wait, sync, barrier, signal, await, "
                                "collective, alloc, free, send or recv)";
    if (p->n_words < 2 || p->words[1].s[0] == '"')
        return expected_word(p, 1, verbs);
    int kind = trace_kind_parse(p->words[1].s, p->words[1].len);
    if (kind < 0)
        return expected_word(p, 1, verbs);
    s->kind = (trace_kind)kind;
    uint32_t i = 3;
    switch (s->kind) {
    case TRACE_OP:
        if (label_word(p, 2, s) != 0 || parse_accesses(p, &i) != 0)
            return -1;
        break;
    case TRACE_COPY: {
        if (label_word(p, 2, s) != 0)
            return -1;
        trace_access *src = new_access(p), *dst = new_access(p);
        if (!src || !dst)
            return nomem(p);
        for (uint32_t k = 0; k < 2; k++) {
            const char *what = k ? "a destination REF" : "a source REF";
            if (3 + k >= p->n_words)
                return expected_word(p, 3 + k, what);
            text_cursor c = cursor(p, 3 + k);
            if (parse_ref(p, &c, &p->acc[k], what) != 0)
                return -1;
            p->acc[k].mode = k ? TRACE_W : TRACE_R;
        }
        src = &p->acc[0];
        dst = &p->acc[1];
        if (src->hi - src->lo != dst->hi - dst->lo)
            return perr(p, p->words[4].col, "copy source is %llu bytes but destination is %llu "
                                            "bytes; SRC and DST must be the same size",
                        (unsigned long long)(src->hi - src->lo),
                        (unsigned long long)(dst->hi - dst->lo));
        i = 5;
        break;
    }
    case TRACE_RECORD:
        if (host)
            return perr(p, qname.col, "record needs a stream queue; '%.*s' is a host queue",
                        SHOW(qname.len), qname.s);
        if (object_word(p, 2, &s->object, "an event name") != 0)
            return -1;
        break;
    case TRACE_WAIT:
        if (object_word(p, 2, &s->object, "an event name") != 0)
            return -1;
        break;
    case TRACE_SYNC:
        if (!host)
            return perr(p, qname.col, "sync needs a host queue; '%.*s' is a stream",
                        SHOW(qname.len), qname.s);
        if (parse_sync_target(p, s) != 0)
            return -1;
        break;
    case TRACE_BARRIER:
        if (object_word(p, 2, &s->object, "a barrier name") != 0 ||
            keyed_number(p, 3, "count=", &s->count, "count=N") != 0)
            return -1;
        if (s->count == 0)
            return perr(p, p->words[3].col + 6, "count must be at least 1");
        i = 4;
        break;
    case TRACE_SIGNAL:
    case TRACE_AWAIT:
        if (parse_signal_await(p, s, &i) != 0)
            return -1;
        break;
    case TRACE_COLLECTIVE:
        if (object_word(p, 2, &s->object, "a communicator name") != 0 ||
            object_word(p, 3, &s->coll_kind, "a collective kind (allreduce, allgather, ...)") != 0 ||
            keyed_number(p, 4, "size=", &s->count, "size=N") != 0)
            return -1;
        if (s->count == 0)
            return perr(p, p->words[4].col + 5, "size must be at least 1");
        i = 5;
        if (parse_accesses(p, &i) != 0)
            return -1;
        break;
    case TRACE_SEND:
    case TRACE_RECV:
        if (parse_p2p(p, s, &i) != 0)
            return -1;
        break;
    case TRACE_ALLOC:
    case TRACE_FREE: {
        text_str buf;
        if (name_word(p, 2, &buf, "a buffer name") != 0 || find_buffer(p, &buf, &s->object) != 0)
            return -1;
        if (p->t->buffers[s->object].parent != TRACE_NONE)
            return perr(p, buf.col, "%s of view '%.*s': only root buffers are allocated and freed",
                        trace_kind_str(s->kind), SHOW(buf.len), buf.s);
        break;
    }
    default:
        return expected_word(p, 1, verbs);
    }
    if (parse_attrs(p, i, s) != 0)
        return -1;
    s->n_access = p->n_acc;
    s->access = p->n_acc ? p->acc : NULL;
    s->n_attr = p->n_attr;
    s->attr = p->n_attr ? p->attr : NULL;
    s->seq = p->n_stmts++;
    s->line = p->lineno;
    p->cur_seq = s->seq;
    if (p->marked && !p->replay && s->seq % MARK_EVERY == 0) {
        if (trace_grow32((void **)&p->marks, &p->cap_marks, (uint64_t)p->n_marks + 1,
                 sizeof *p->marks) != 0)
            return nomem(p);
        p->marks[p->n_marks++] = (stmt_mark){ p->line_start, p->lineno };
    }
    return p->replay ? 0 : note_stmt_line(p);
}

/* syncsim-trace VERSION */
static int parse_header(text_parser *p)
{
    if (!word_is(p, 0, "syncsim-trace"))
        return expected_word(p, 0, "the header 'syncsim-trace 1'");
    if (p->n_words < 2)
        return expected_word(p, 1, "a version number after syncsim-trace");
    uint64_t version;
    text_cursor c = cursor(p, 1);
    if (number_rest(p, &c, &version, "a version number") != 0)
        return -1;
    if (version != TRACE_TEXT_VERSION)
        return perr(p, p->words[1].col, "version %llu is not supported; this build reads version %d",
                    (unsigned long long)version, TRACE_TEXT_VERSION);
    if (p->n_words > 2)
        return expected_word(p, 2, "end of line after the header");
    p->header_line = p->lineno;
    return 0;
}

/* An unquoted `meta` first word is run metadata, unless a queue is named
 * meta (as for `semaphore` below). */
static bool is_meta_line(const text_parser *p)
{
    return word_is(p, 0, "meta") && trace_find_queue(p->t, "meta", 4) == TRACE_NONE;
}

/* meta KEY=VALUE...: run metadata (docs/trace-format.md), so that what a
 * database knows of a run beyond its statements -- that it is incomplete,
 * an importer's ledger, where accesses came from -- survives export and
 * re-import. A later value of a key replaces an earlier one. */
static int parse_meta(text_parser *p)
{
    if (p->n_words < 2)
        return expected_word(p, 1, "KEY=VALUE after meta");
    for (uint32_t i = 1; i < p->n_words; i++) {
        text_str key, value;
        text_cursor vc;
        if (key_value(p, i, &key, &value, &vc, "KEY=VALUE") != 0)
            return -1;
        char *k = strndup(key.s, key.len), *v = strndup(value.s, value.len);
        int rc = k && v ? trace_set_meta(p->t, k, v) : -1;
        free(k);
        free(v);
        if (rc != 0)
            return nomem(p);
    }
    return 0;
}

/* An unquoted `semaphore` first word declares one, unless a queue is named
 * semaphore (traces older than the keyword keep their meaning). */
static bool is_semaphore_decl(const text_parser *p)
{
    return word_is(p, 0, "semaphore") && trace_find_queue(p->t, "semaphore", 9) == TRACE_NONE;
}

/* One non-empty line: returns 1 when it held a statement (in *s), 0 for
 * anything else, -1 on error. */
static int parse_line(text_parser *p, trace_stmt *s)
{
    if (p->replay && (word_is(p, 0, "syncsim-trace") || word_is(p, 0, "queue") ||
                      word_is(p, 0, "buffer") || word_is(p, 0, "expect") ||
                      is_semaphore_decl(p) || is_meta_line(p)))
        return 0;               /* read the first time */
    if (!p->header_line)
        return parse_header(p);
    if (word_is(p, 0, "queue"))
        return parse_queue_decl(p);
    if (word_is(p, 0, "buffer"))
        return parse_buffer_decl(p);
    if (word_is(p, 0, "expect"))
        return parse_expect(p);
    if (is_semaphore_decl(p))
        return parse_semaphore_decl(p);
    if (is_meta_line(p))
        return parse_meta(p);
    if (word_is(p, 0, "syncsim-trace"))
        return perr(p, p->words[0].col, "the header may appear only once (it is on line %u)",
                    p->header_line);
    return parse_statement(p, s) == 0 ? 1 : -1;
}

/* ------------------------------------------------------------------ */
/* The reader.                                                         */

static int parse_next(text_parser *p, trace_stmt *out, trace_error *err)
{
    while (!p->failed && !p->done) {
        int rc = read_line(p);
        if (rc == 0) {
            if (!p->header_line) {
                p->lineno++;
                perr(p, 1, "expected the header 'syncsim-trace 1', found end of file");
                break;
            }
            if (!p->replay && check_line_refs(p) != 0)
                break;
            p->done = true;
            return 0;
        }
        if (rc < 0 || lex_line(p) != 0)
            break;
        if (p->n_words == 0)
            continue;
        rc = parse_line(p, out);
        if (rc == 1)
            return 1;
    }
    if (p->done)
        return 0;
    if (err)
        *err = p->err;
    return -1;
}

/* The first statement is read when the reader opens (peek), so that what
 * comes before it -- the header, run metadata, declarations -- is known to
 * whoever opens a file: the rank and job of a trace, its status. */
static int text_next(void *ctx, trace_stmt *out, trace_error *err)
{
    text_parser *p = ctx;
    if (p->has_peek) {
        p->has_peek = false;
        if (p->peek_rc == 1)
            *out = p->peek;
        else if (p->peek_rc < 0 && err)
            *err = p->err;
        return p->peek_rc;
    }
    return parse_next(p, out, err);
}

static void text_close(void *ctx)
{
    text_parser *p = ctx;
    if (!p)
        return;
    text_close(p->look);
    if (p->close_f && p->f)
        fclose(p->f);
    free(p->name);
    free(p->text);
    free(p->cur_label);
    free(p->marks);
    free(p->linebuf);
    free(p->words);
    free(p->scratch);
    free(p->acc);
    free(p->attr);
    free(p->queue_line);
    free(p->buffer_line);
    free(p->stmt_lines.runs);
    free(p->refs);
    if (p->own_sync_objs) {
        trace_u64map_free(p->sync_objs);
        free(p->sync_objs);
    }
    free(p);
}

static int text_rewind(void *ctx, trace_error *err)
{
    text_parser *p = ctx;
    if (p->failed) {
        if (err)
            *err = p->err;
        return -1;
    }
    if (p->f) {
        if (fseeko(p->f, 0, SEEK_SET) != 0)
            return trace_error_set(err, TRACE_EUSAGE,
                                   "%s: cannot be read twice (a pipe?); write the trace to a "
                                   "file first",
                                   p->name),
                   -1;
        clearerr(p->f);
    } else {
        p->text_pos = 0;
    }
    p->lineno = 0;
    p->pos = 0;
    if (!p->replay)
        p->n_first = p->n_stmts;
    p->n_stmts = 0;
    p->has_cur = false;
    p->has_peek = false;
    p->done = false;
    p->replay = true;
    return 0;
}

/* The parser that reads earlier lines again for label_text: p's trace and
 * input, its own buffers, statements only. */
static text_parser *look_parser(text_parser *p)
{
    if (p->look) {
        p->look->sync_objs = p->sync_objs; /* allocated since, perhaps */
        return p->look;
    }
    text_parser *l = calloc(1, sizeof *l);
    if (!l || !(l->name = strdup(p->name))) {
        free(l);
        return NULL;
    }
    l->t = p->t;
    l->f = p->f;                /* not closed by l */
    l->header_line = p->header_line;
    l->replay = true;
    l->lazy = true;
    l->sync_objs = p->sync_objs; /* not freed by l */
    return p->look = l;
}

/* Statement seq, read again from its line into *s (the look parser's
 * buffers): the look parser seeks to the mark before it and parses
 * forward, or, when it stopped between that mark and seq, reads on from
 * there (callers that ask in seq order read the file once); asked again
 * for the statement it read last, it gives that. p's input position is
 * put back. p must be marked and seq read already. */
static int stmt_again(text_parser *p, uint64_t seq, trace_stmt *s, trace_error *err)
{
    uint64_t k = seq / MARK_EVERY;
    text_parser *l = look_parser(p);
    if (!l)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", p->name), -1;
    if (l->has_again && l->again.seq == seq) {
        *s = l->again;
        return 0;
    }
    bool onward = l->has_again && l->again.seq < seq && l->again.seq >= k * MARK_EVERY;
    l->has_again = false;
    if (!onward) {
        const stmt_mark *m = &p->marks[k];
        l->lineno = m->line - 1;
        l->n_stmts = k * MARK_EVERY;
        l->failed = l->done = false;
        l->pos = m->offset;
    }
    if (fseeko(p->f, (off_t)l->pos, SEEK_SET) != 0)
        return trace_error_set(err, TRACE_EIO, "%s: cannot read statement %llu again: %s",
                               p->name, (unsigned long long)seq, strerror(errno)),
               -1;
    int rc;
    while ((rc = text_next(l, s, err)) == 1 && s->seq < seq)
        ;
    if (fseeko(p->f, (off_t)p->pos, SEEK_SET) != 0)
        return trace_error_set(err, TRACE_EIO,
                               "%s: cannot seek back after reading a statement again: %s",
                               p->name, strerror(errno)),
               -1;
    if (rc < 0)
        return -1;
    if (rc == 0 || s->seq != seq)
        return trace_error_set(err, TRACE_ECORRUPT, "%s: statement %llu is not where it was: "
                               "did the file change while it was read?",
                               p->name, (unsigned long long)seq),
               -1;
    l->again = *s;
    l->has_again = true;
    return 0;
}

/* Statement seq's label, read again from its line. */
static int label_again(text_parser *p, uint64_t seq, const char **text, size_t *len,
                       trace_error *err)
{
    trace_stmt s;
    if (stmt_again(p, seq, &s, err) != 0)
        return -1;
    if (!p->look->has_cur)
        return trace_error_set(err, TRACE_ECORRUPT, "%s: statement %llu is not where it was: "
                               "did the file change while it was read?",
                               p->name, (unsigned long long)seq),
               -1;
    *text = p->look->cur_label;
    *len = p->look->cur_len;
    return 0;
}

static int text_label_text(void *ctx, uint64_t seq, const char **text, size_t *len,
                           trace_error *err)
{
    text_parser *p = ctx;
    if (p->has_cur && seq == p->cur_seq) {
        *text = p->cur_label;
        *len = p->cur_len;
        return 0;
    }
    if (!p->lazy || seq >= (p->replay ? p->n_first : p->n_stmts))
        return trace_error_set(err, TRACE_EUSAGE, "%s: statement %llu has no label to give "
                               "(not read yet)",
                               p->name, (unsigned long long)seq),
               -1;
    return label_again(p, seq, text, len, err);
}

/* An attribute of statement seq, read again from its line; nothing when
 * the input cannot be read again (not lazy: standard input, a string).
 * Attribute keys and values were interned when first read. */
static int text_attr_text(void *ctx, uint64_t seq, const char *key, const char **text,
                          size_t *len, trace_error *err)
{
    text_parser *p = ctx;
    *text = NULL;
    *len = 0;
    uint32_t k = trace_str_find(p->t, key, strlen(key));
    if (k == TRACE_NONE || !p->marked || seq >= (p->replay ? p->n_first : p->n_stmts))
        return 0;
    trace_stmt s;
    if (stmt_again(p, seq, &s, err) != 0)
        return -1;
    for (uint32_t i = 0; i < s.n_attr; i++)
        if (s.attr[i].key == k) {
            *text = trace_str(p->t, s.attr[i].value);
            *len = p->t->str_len[s.attr[i].value];
            break;
        }
    return 0;
}

static const trace_reader_iface text_iface = { text_next, text_close, text_rewind,
                                               text_label_text, text_attr_text };

/* Makes the reader and its parser around an opened input (the parser owns
 * p's input from here on, even on failure). */
static int start_reader(text_parser *p, const char *source, trace_reader *r, trace_error *err)
{
    p->t = trace_new();
    r->source = strdup(source);
    if (!p->t || !p->name || !r->source) {
        trace_free(p->t);
        free(r->source);
        r->source = NULL;
        text_close(p);
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", source);
        return -1;
    }
    r->iface = &text_iface;
    r->ctx = p;
    r->trace = p->t;
    r->owns_trace = true;
    p->peek_rc = parse_next(p, &p->peek, NULL);
    p->has_peek = true;
    return 0;
}

int trace_text_open(const char *path, trace_reader *r, trace_error *err)
{
    return trace_text_open_lazy(path, false, r, err);
}

int trace_text_open_lazy(const char *path, bool lazy, trace_reader *r, trace_error *err)
{
    memset(r, 0, sizeof *r);
    text_parser *p = calloc(1, sizeof *p);
    if (!p)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path), -1;
    if (strcmp(path, "-") == 0) {
        p->f = stdin;
        p->name = strdup("<stdin>");
    } else {
        struct stat sb;
        p->f = fopen(path, "r");
        if (!p->f) {
            trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno));
            goto fail;
        }
        p->close_f = true;
        if (fstat(fileno(p->f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
            trace_error_set(err, TRACE_EIO, "%s: is a directory, expected a trace file", path);
            goto fail;
        }
        p->name = strdup(path);
    }
    /* A label is read again from its line: only a file that can seek back. */
    struct stat sb;
    p->marked = fstat(fileno(p->f), &sb) == 0 && S_ISREG(sb.st_mode) && ftello(p->f) == 0;
    p->lazy = lazy && p->marked;
    return start_reader(p, path, r, err);
fail:
    text_close(p);
    return -1;
}

int trace_text_open_string(const char *name, const char *text, size_t len, trace_reader *r,
                           trace_error *err)
{
    memset(r, 0, sizeof *r);
    text_parser *p = calloc(1, sizeof *p);
    if (!p)
        goto fail;
    p->text = malloc(len ? len : 1);
    p->name = strdup(name);
    if (!p->text || !p->name)
        goto fail;
    if (len)
        memcpy(p->text, text, len);
    p->text_len = len;
    return start_reader(p, name, r, err);
fail:
    text_close(p);
    trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", name);
    return -1;
}

int trace_text_parse_file(const char *path, trace **out, trace_error *err)
{
    trace_reader r;
    *out = NULL;
    if (trace_text_open(path, &r, err) != 0)
        return -1;
    return trace_reader_load(&r, out, err);
}

int trace_text_parse_string(const char *name, const char *text, size_t len, trace **out,
                            trace_error *err)
{
    trace_reader r;
    *out = NULL;
    if (trace_text_open_string(name, text, len, &r, err) != 0)
        return -1;
    return trace_reader_load(&r, out, err);
}
