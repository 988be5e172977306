/*
 * json.c -- streaming JSON for the importers, plain or gzipped.
 *
 * Captures are large (a Kineto trace of a training step holds millions of
 * events), so no importer may hold a document. zlib's gzread inflates the
 * file in 256 KiB chunks (a plain file passes through gzread unchanged) and
 * yajl's callbacks parse them; this file turns the callbacks into one small
 * tree per element of the streamed array ("traceEvents", "nodes") and per
 * other top-level member, built in an arena that is reset after each. Memory
 * is therefore bounded by the largest element, whatever the document's size.
 *
 * Every byte is untrusted: nesting is bounded (JSON_MAX_DEPTH), a tree's
 * arena is bounded (JSON_MAX_ELEMENT), and every failure -- a truncated or
 * corrupt gzip stream, invalid JSON, a callback's refusal -- ends in one
 * line that names the file and the byte offset.
 *
 * Progress (json_handler.progress) is said once a chunk is parsed, in bytes
 * of the file: of a gzip file, the compressed bytes inflate has taken, so
 * that the total is the file's size, known before a byte is inflated.
 */
#include "formats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#define JSON_CHUNK (256u * 1024u)
#define JSON_MAX_DEPTH 64
#define JSON_MAX_ELEMENT (64u * 1024u * 1024u)
/* Objects with more members than this are not searched for duplicate
 * names (each new member is compared with those before it). */
#define JSON_MAX_KEY_SCAN 256

/* A bump allocator in blocks; reset keeps the first block. */
typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    char data[];
} arena_block;

typedef struct arena {
    arena_block *head;
    size_t total;
} arena;

static void *arena_alloc(arena *a, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (!a->head || a->head->used + n > a->head->cap) {
        size_t cap = n > 65536 ? n : 65536;
        if (a->total + cap > JSON_MAX_ELEMENT)
            return NULL;
        arena_block *b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        a->total += cap;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static void arena_reset(arena *a)
{
    while (a->head && a->head->next) {
        arena_block *n = a->head->next;
        a->total -= a->head->cap;
        free(a->head);
        a->head = n;
    }
    if (a->head)
        a->head->used = 0;
}

static void arena_free(arena *a)
{
    while (a->head) {
        arena_block *n = a->head->next;
        free(a->head);
        a->head = n;
    }
    a->total = 0;
}

/* The parser's state: where in the document the next value goes. */
typedef struct json_parse {
    const json_handler *h;
    trace_error *err;
    bool failed;                /* err is filled */
    arena ar;
    int depth;                  /* containers open around the next value */
    bool top_is_array;          /* the document is an array of elements */
    bool in_stream;             /* inside the streamed array */
    const char *pending_key;    /* the member name for the next value */
    size_t pending_len;
    bool top_key_streamed;      /* the pending top-level member is array_key */
    json_val *stack[JSON_MAX_DEPTH]; /* open containers of the current tree */
    int tree_base;              /* depth at which the current tree starts */
    json_val *root;             /* the tree being built */
    const char *path;
} json_parse;

static int fail_oom(json_parse *p)
{
    if (!p->failed)
        trace_error_set(p->err, TRACE_ENOMEM,
                        "%s: an element larger than %u MiB, or out of memory", p->path,
                        JSON_MAX_ELEMENT >> 20);
    p->failed = true;
    return 0;
}

/* Hands over a finished tree: an element of the streamed array, or a
 * top-level member. */
static int deliver(json_parse *p, json_val *v)
{
    int rc = 0;
    if (p->in_stream) {
        if (p->h->on_element)
            rc = p->h->on_element(p->h->ctx, v, p->err);
    } else if (p->h->on_member) {
        rc = p->h->on_member(p->h->ctx, v, p->err);
    }
    p->root = NULL;
    arena_reset(&p->ar);
    if (rc != 0) {
        p->failed = true;
        return 0;
    }
    return 1;
}

/* Adds a scalar or a new container to the current tree; returns it. */
static json_val *add_value(json_parse *p, json_type type, const char *s, size_t len)
{
    json_val *v = arena_alloc(&p->ar, sizeof *v);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    v->type = type;
    if (s) {
        char *copy = arena_alloc(&p->ar, len + 1);
        if (!copy)
            return NULL;
        memcpy(copy, s, len);
        copy[len] = '\0';
        v->s = copy;
        v->len = len;
    }
    v->key = p->pending_key;
    v->key_len = p->pending_len;
    p->pending_key = NULL;
    if (p->root && p->depth > p->tree_base) {
        json_val *parent = p->stack[p->depth - 1];
        /* a member named twice: which value holds is not said (RFC 8259) */
        if (v->key && parent->n_child <= JSON_MAX_KEY_SCAN)
            for (const json_val *c = parent->child; c && !p->root->dup_key; c = c->next)
                p->root->dup_key = c->key_len == v->key_len &&
                                   memcmp(c->key, v->key, v->key_len) == 0;
        if (parent->last)
            parent->last->next = v;
        else
            parent->child = v;
        parent->last = v;
        parent->n_child++;
    } else {
        p->root = v;
    }
    return v;
}

static int on_scalar(json_parse *p, json_type type, const char *s, size_t len)
{
    if (p->failed)
        return 0;
    if (p->depth == 0)
        return 1;           /* a document that is a scalar: the handler finds nothing */
    bool starts = !p->root;
    if (starts)
        p->tree_base = p->depth;
    json_val *v = add_value(p, type, s, len);
    if (!v)
        return fail_oom(p);
    return starts ? deliver(p, v) : 1;
}

static int cb_null(void *ctx) { return on_scalar(ctx, JSON_NULL, NULL, 0); }
static int cb_bool(void *ctx, int b) { return on_scalar(ctx, b ? JSON_TRUE : JSON_FALSE, NULL, 0); }
static int cb_number(void *ctx, const char *s, size_t len)
{
    return on_scalar(ctx, JSON_NUMBER, s, len);
}
static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
    return on_scalar(ctx, JSON_STRING, (const char *)s, len);
}

/* Depths: 0 outside everything; the document's object or array is opened
 * at depth 0. The streamed array's elements start at depth 2 (depth 1 for a
 * document that is an array), other top-level members at depth 1. */
static int open_container(json_parse *p, json_type type)
{
    if (p->failed)
        return 0;
    if (p->depth >= JSON_MAX_DEPTH - 1) {
        trace_error_set(p->err, TRACE_ESYNTAX, "%s: JSON nested deeper than %d levels", p->path,
                        JSON_MAX_DEPTH);
        p->failed = true;
        return 0;
    }
    if (p->depth == 0) {
        p->top_is_array = type == JSON_ARRAY;
        p->in_stream = p->top_is_array;
        p->depth = 1;
        return 1;
    }
    if (!p->top_is_array && p->depth == 1 && !p->root && type == JSON_ARRAY &&
        p->top_key_streamed) {
        p->in_stream = true;
        p->pending_key = NULL;
        p->depth = 2;
        return 1;
    }
    if (!p->root)
        p->tree_base = p->depth;
    json_val *v = add_value(p, type, NULL, 0);
    if (!v)
        return fail_oom(p);
    p->stack[p->depth++] = v;
    return 1;
}

static int close_container(json_parse *p)
{
    if (p->failed)
        return 0;
    p->depth--;
    if (p->depth == 0)
        return 1;           /* the document */
    if (p->in_stream && !p->top_is_array && p->depth == 1 && !p->root) {
        p->in_stream = false;   /* the streamed array ends */
        return 1;
    }
    if (p->root && p->depth == p->tree_base)
        return deliver(p, p->stack[p->depth]);
    return 1;
}

static int cb_start_map(void *ctx) { return open_container(ctx, JSON_OBJECT); }
static int cb_end_map(void *ctx) { return close_container(ctx); }
static int cb_start_array(void *ctx) { return open_container(ctx, JSON_ARRAY); }
static int cb_end_array(void *ctx) { return close_container(ctx); }

static int cb_map_key(void *ctx, const unsigned char *key, size_t len)
{
    json_parse *p = ctx;
    if (p->failed)
        return 0;
    if (!p->top_is_array && p->depth == 1) {
        const char *ak = p->h->array_key;
        p->top_key_streamed = ak && strlen(ak) == len && memcmp(ak, key, len) == 0;
    }
    char *copy = arena_alloc(&p->ar, len + 1);
    if (!copy)
        return fail_oom(p);
    memcpy(copy, key, len);
    copy[len] = '\0';
    p->pending_key = copy;
    p->pending_len = len;
    return 1;
}

static const yajl_callbacks callbacks = {
    cb_null, cb_bool, NULL, NULL, cb_number, cb_string, cb_start_map,
    cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

/* One line from yajl's message: no newlines, no caret. */
static void yajl_message(yajl_handle y, const unsigned char *buf, size_t n, char *out, size_t cap)
{
    unsigned char *m = yajl_get_error(y, 0, buf, n);
    snprintf(out, cap, "%s", m ? (const char *)m : "parse error");
    if (m)
        yajl_free_error(y, m);
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    size_t l = strlen(out);
    while (l && out[l - 1] == ' ')
        out[--l] = '\0';
}

/* The bytes of a file, inflated when it is gzip (by its magic bytes; one
 * member after another, as gzip writes them). zlib's inflate is driven by
 * hand, not through gzread, so that a failure is placed exactly: gzread
 * hands back nothing of the chunk in which it fails. */
typedef struct json_input {
    FILE *f;
    bool gz, eof, zdone, zopen;
    z_stream z;
    unsigned char *in;
    uint64_t produced;          /* bytes handed out so far */
    uint64_t file_read;         /* bytes of the file read (gzip: into `in`) */
    uint64_t size;              /* the file's size, for progress; 0 unknown */
    int zerr;                   /* a failure to report once the bytes before it are parsed */
    const char *zmsg;
} json_input;

static void input_close(json_input *in);

static int input_open(json_input *in, const char *path, trace_error *err)
{
    memset(in, 0, sizeof *in);
    in->f = fopen(path, "rb");
    if (!in->f)
        return trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno)), -1;
    struct stat sb;
    if (fstat(fileno(in->f), &sb) == 0 && S_ISREG(sb.st_mode))
        in->size = (uint64_t)sb.st_size;
    unsigned char magic[3];
    size_t n = fread(magic, 1, 3, in->f);
    in->gz = n == 3 && magic[0] == 0x1f && magic[1] == 0x8b && magic[2] == 8;
    rewind(in->f);
    if (!in->gz)
        return 0;
    in->in = malloc(JSON_CHUNK);
    if (!in->in || inflateInit2(&in->z, 16 + MAX_WBITS) != Z_OK) {
        input_close(in);
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path), -1;
    }
    in->zopen = true;
    return 0;
}

static void input_close(json_input *in)
{
    if (in->zopen)
        inflateEnd(&in->z);
    if (in->f)
        fclose(in->f);
    free(in->in);
}

/* Up to cap bytes into out: the count, 0 at the end, -1 with err. A gzip
 * stream that fails hands out what it inflated before failing first; the
 * next call reports the failure, with the count of bytes before it. */
static long input_read(json_input *in, unsigned char *out, size_t cap, const char *path,
                       trace_error *err)
{
    if (!in->gz) {
        size_t n = fread(out, 1, cap, in->f);
        if (n == 0 && ferror(in->f))
            return trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno)), -1;
        in->produced += n;
        return (long)n;
    }
    if (in->zerr) {
        if (in->zerr == Z_BUF_ERROR)
            trace_error_set(err, TRACE_ECORRUPT,
                            "%s: truncated gzip data: the file ends after %llu decompressed "
                            "bytes",
                            path, (unsigned long long)in->produced);
        else
            trace_error_set(err, TRACE_ECORRUPT,
                            "%s: corrupt gzip data after %llu decompressed bytes (%s)", path,
                            (unsigned long long)in->produced,
                            in->zmsg ? in->zmsg : "invalid compressed data");
        return -1;
    }
    in->z.next_out = out;
    in->z.avail_out = (uInt)cap;
    while (in->z.avail_out && !in->zdone) {
        if (!in->z.avail_in && !in->eof) {
            size_t n = fread(in->in, 1, JSON_CHUNK, in->f);
            if (n == 0 && ferror(in->f))
                return trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno)), -1;
            in->file_read += n;
            in->eof = n < JSON_CHUNK;
            in->z.next_in = in->in;
            in->z.avail_in = (uInt)n;
        }
        int rc = inflate(&in->z, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            /* another member follows, or the data ends (what follows the last
             * member that is not gzip is ignored, as gzip -d does) */
            if (!in->z.avail_in && !in->eof) {
                size_t n = fread(in->in, 1, JSON_CHUNK, in->f);
                in->file_read += n;
                in->eof = n < JSON_CHUNK;
                in->z.next_in = in->in;
                in->z.avail_in = (uInt)n;
            }
            if (in->z.avail_in >= 2 && in->z.next_in[0] == 0x1f && in->z.next_in[1] == 0x8b)
                inflateReset(&in->z);
            else
                in->zdone = true;
        } else if (rc == Z_BUF_ERROR && !in->z.avail_in && in->eof) {
            in->zerr = Z_BUF_ERROR;     /* the file ends inside the stream */
            break;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            in->zerr = rc == Z_MEM_ERROR ? Z_MEM_ERROR : Z_DATA_ERROR;
            in->zmsg = in->z.msg;
            break;
        }
    }
    size_t got = cap - in->z.avail_out;
    in->produced += got;
    if (!got && in->zerr)
        return input_read(in, out, cap, path, err);
    return (long)got;
}

/* The bytes of the file consumed so far: what was handed out of a plain
 * file, what inflate took of a gzip one. */
static uint64_t input_consumed(const json_input *in)
{
    return in->gz ? in->file_read - in->z.avail_in : in->produced;
}

int json_stream(const char *path, const json_handler *h, trace_error *err)
{
    json_parse p = { .h = h, .err = err, .path = path };
    unsigned char *buf = malloc(JSON_CHUNK);
    json_input in = { 0 };
    bool in_open = false;
    yajl_handle y = NULL;
    int rc = -1;
    if (!buf) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (input_open(&in, path, err) != 0)
        goto done;
    in_open = true;
    y = yajl_alloc(&callbacks, NULL, &p);
    if (!y) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    uint64_t offset = 0;
    trace_progress_say(h->progress, "bytes", 0, in.size);
    for (;;) {
        long n = input_read(&in, buf, JSON_CHUNK, path, err);
        if (n < 0)
            goto done;
        if (n == 0)
            break;
        size_t skip = 0;
        if (offset == 0 && n >= 3 && buf[0] == 0xef && buf[1] == 0xbb && buf[2] == 0xbf)
            skip = 3;           /* a UTF-8 byte order mark: not JSON, but harmless */
        yajl_status st = yajl_parse(y, buf + skip, (size_t)n - skip);
        if (st != yajl_status_ok) {
            if (!p.failed) {
                char m[256];
                yajl_message(y, buf + skip, (size_t)n - skip, m, sizeof m);
                trace_error_set(err, TRACE_ESYNTAX, "%s: invalid JSON at byte %llu: %s", path,
                                (unsigned long long)(offset + skip +
                                                     yajl_get_bytes_consumed(y)), m);
            }
            goto done;
        }
        offset += (uint64_t)n;
        trace_progress_say(h->progress, "bytes", input_consumed(&in), in.size);
    }
    if (offset == 0) {
        trace_error_set(err, TRACE_ESYNTAX, "%s: empty file, expected JSON", path);
        goto done;
    }
    if (yajl_complete_parse(y) != yajl_status_ok) {
        if (!p.failed)
            trace_error_set(err, TRACE_ESYNTAX, "%s: invalid JSON: the document ends early, "
                            "after %llu bytes (a truncated file?)", path,
                            (unsigned long long)offset);
        goto done;
    }
    trace_progress_say(h->progress, "bytes", in.size, in.size);
    rc = 0;
done:
    if (y)
        yajl_free(y);
    if (in_open)
        input_close(&in);
    free(buf);
    arena_free(&p.ar);
    return rc;
}

const json_val *json_get(const json_val *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    size_t len = strlen(key);
    for (const json_val *c = obj->child; c; c = c->next)
        if (c->key_len == len && memcmp(c->key, key, len) == 0)
            return c;
    return NULL;
}

bool json_is(const json_val *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && memcmp(v->s, s, v->len) == 0;
}

/* The digits of a number (or of a string holding one) after its sign:
 * NULL when v is neither or no digit follows the sign. */
static const char *num_digits(const json_val *v, bool *neg)
{
    if (!v || (v->type != JSON_NUMBER && v->type != JSON_STRING) || !v->len)
        return NULL;
    const char *s = v->s;
    *neg = *s == '-';
    s += *neg;
    return *s >= '0' && *s <= '9' ? s : NULL;
}

bool json_int(const json_val *v, int64_t *out)
{
    bool neg;
    const char *s = num_digits(v, &neg);
    if (!s)
        return false;
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (n > (UINT64_MAX - 9) / 10)
            return false;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    if (*s == '.') {            /* a fraction of zeros is fine; another is no integer */
        s++;
        while (*s == '0')
            s++;
    }
    if (*s)
        return false;
    if (neg) {
        if (n > (uint64_t)INT64_MAX + 1)
            return false;
        *out = n == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n;
    } else {
        /* 18446744073709551615 and the like: unsigned -1 in some captures */
        *out = n > (uint64_t)INT64_MAX ? (int64_t)(n - (uint64_t)INT64_MAX - 1) + INT64_MIN
                                       : (int64_t)n;
    }
    return true;
}

bool json_us_to_ns(const json_val *v, int64_t *out)
{
    bool neg;
    const char *s = num_digits(v, &neg);
    if (!s)
        return false;
    int64_t us = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (us > (INT64_MAX / 1000 - 9) / 10)
            return false;
        us = us * 10 + (*s - '0');
    }
    int64_t frac = 0;
    int digits = 0;
    if (*s == '.') {
        s++;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (digits < 3)
                frac = frac * 10 + (*s - '0');
            else if (digits == 3 && *s >= '5')
                frac++;         /* round to the nanosecond */
            digits++;
        }
        for (int d = digits; d < 3; d++)
            frac *= 10;
    }
    if (*s == 'e' || *s == 'E') {   /* 1.7e+15: rare; take it through a double */
        double d = strtod(v->s, NULL);
        if (!(d > -9.2e15 && d < 9.2e15))
            return false;
        *out = (int64_t)(d * 1000.0 + (d < 0 ? -0.5 : 0.5));
        return true;
    }
    if (*s)
        return false;
    int64_t ns = us * 1000 + frac;
    *out = neg ? -ns : ns;
    return true;
}

size_t json_gunzip_head(const unsigned char *head, size_t n, unsigned char *out, size_t cap)
{
    if (n < 3 || head[0] != 0x1f || head[1] != 0x8b || head[2] != 8)
        return 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return 0;
    z.next_in = (unsigned char *)head;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    inflate(&z, Z_SYNC_FLUSH);  /* as much as the head gives; errors leave what was made */
    size_t got = cap - z.avail_out;
    inflateEnd(&z);
    return got;
}

size_t json_sniff_text(const unsigned char *head, size_t n, char *text, size_t cap)
{
    unsigned char *tmp = malloc(cap);
    if (!tmp || cap < 2) {
        free(tmp);
        if (cap)
            text[0] = '\0';
        return 0;
    }
    size_t got = json_gunzip_head(head, n, tmp, cap - 1);
    const unsigned char *src = got ? tmp : head;
    size_t len = got ? got : (n < cap - 1 ? n : cap - 1);
    size_t i = 0;
    if (len >= 3 && src[0] == 0xef && src[1] == 0xbb && src[2] == 0xbf)
        i = 3;                  /* a UTF-8 byte order mark */
    while (i < len && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r'))
        i++;
    size_t k = 0;
    for (; i < len; i++)
        text[k++] = src[i] ? (char)src[i] : ' ';
    text[k] = '\0';
    free(tmp);
    return k;
}
