/*
 * model.c -- the in-memory trace: string table, declarations, statements,
 * and the memory reader.
 *
 * Strings are interned once and never move (each is its own allocation), so
 * the string -> id map can point at them. Statements appended in memory keep
 * their accesses and attributes in two pools and refer to them by offset:
 * the pools grow by realloc and pointers handed out by trace_stmt_at() are
 * valid until the next append.
 */
#include "store_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* An in-memory statement: trace_stmt with pool offsets instead of pointers. */
/* A statement as an in-memory trace keeps it: 64 bytes where trace_stmt
 * takes 112 (the seq is its index; kind and scope are bytes; accesses and
 * attributes are offsets into the pools), because the minimiser and the
 * checker's in-memory paths hold millions of them (issue 10: minimize grew
 * by 900 B a statement). trace_stmt_at unpacks one. */
typedef struct trace_stmt_rec {
    int64_t t, dur;
    uint64_t count;
    uint32_t queue, label, object, by, coll_kind, line;
    uint32_t n_access, first_access, first_attr;
    uint8_t kind, sync_scope;
    uint16_t n_attr;
} trace_stmt_rec;
_Static_assert(sizeof(trace_stmt_rec) == 64, "a statement record is 64 bytes");
/* The sync_scope byte's high bit holds trace_stmt.sem (a value semaphore). */
#define REC_SEM 0x80u
/* A send/recv keeps its rank in coll_kind (unused by point to point) and
 * its peer in the high half of count, its tag (below 2^32) in the low half. */
static bool is_p2p(trace_kind k)
{
    return k == TRACE_SEND || k == TRACE_RECV;
}

static const char *const status_msgs[] = {
#define TRACE_STATUS_MSG(name, msg) msg,
    TRACE_STATUS_MAP(TRACE_STATUS_MSG)
#undef TRACE_STATUS_MSG
};

const char *trace_status_str(trace_status st)
{
    if ((unsigned)st >= sizeof status_msgs / sizeof status_msgs[0])
        return "unknown status";
    return status_msgs[st];
}

trace_status trace_error_set(trace_error *err, trace_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->status = st;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

static const char *const kind_words[] = {
#define TRACE_KIND_WORD(name, word) word,
    TRACE_KIND_MAP(TRACE_KIND_WORD)
#undef TRACE_KIND_WORD
};

const char *trace_kind_str(trace_kind k)
{
    return (unsigned)k < TRACE_KIND_COUNT ? kind_words[k] : "?";
}

int trace_kind_parse(const char *word, size_t len)
{
    for (int k = 0; k < TRACE_KIND_COUNT; k++)
        if (strlen(kind_words[k]) == len && memcmp(kind_words[k], word, len) == 0)
            return k;
    return -1;
}

static const trace_finding_info finding_table[] = {
#define TRACE_FINDING_ROW(name, word, object, expect, summary) \
    { word, object, expect, summary },
    TRACE_FINDING_MAP(TRACE_FINDING_ROW)
#undef TRACE_FINDING_ROW
};

const trace_finding_info *trace_finding_about(trace_finding_kind k)
{
    return (unsigned)k < TRACE_FINDING_COUNT ? &finding_table[k] : NULL;
}

const char *trace_finding_str(trace_finding_kind k)
{
    return (unsigned)k < TRACE_FINDING_COUNT ? finding_table[k].word : "?";
}

/* The length of the valid UTF-8 sequence starting at s (n bytes left), or
 * 0 when it is not one: no overlong forms, no surrogates, at most U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4                          ? 4
                                                                    : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

size_t trace_utf8_check(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {      /* ASCII runs are the common case */
            i++;
            continue;
        }
        size_t len = utf8_seq(u + i, n - i);
        if (!len)
            return i;
        i += len;
    }
    return n;
}

void trace_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        switch (c) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        default:
            if (c < 0x20 || c == 0x7f) {
                fprintf(out, "\\u%04x", c);
            } else if (c >= 0x80) {
                size_t len = utf8_seq(p + i, n - i);
                if (!len) {
                    fputs("\\ufffd", out);   /* not UTF-8: the replacement character */
                    i++;
                    continue;
                }
                fwrite(p + i, 1, len, out);
                i += len;
                continue;
            } else {
                fputc((int)c, out);
            }
        }
        i++;
    }
    fputc('"', out);
}

const char *trace_finding_list(void)
{
    /* "clean, race, ..., or redundant-sync": built from the map, so a new
     * kind is listed in every message without editing them. */
    static char list[512];
    if (!list[0]) {
        size_t n = 0, k = TRACE_FINDING_COUNT;
        for (size_t i = 0; i < k; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                                  i == 0 ? "" : i + 1 == k ? " or " : ", ", finding_table[i].word);
    }
    return list;
}

int trace_finding_parse(const char *word, size_t len)
{
    for (int k = 0; k < TRACE_FINDING_COUNT; k++)
        if (strlen(finding_table[k].word) == len && memcmp(finding_table[k].word, word, len) == 0)
            return k;
    return -1;
}

void trace_stmt_init(trace_stmt *s)
{
    memset(s, 0, sizeof *s);
    s->queue = TRACE_NONE;
    s->label = TRACE_NONE;
    s->object = TRACE_NONE;
    s->coll_kind = TRACE_NONE;
    s->by = TRACE_NONE;
    s->rank = TRACE_NONE;
    s->peer = TRACE_NONE;
    s->t = TRACE_TIME_NONE;
    s->dur = TRACE_TIME_NONE;
}

/* ------------------------------------------------------------------ */
/* Growing arrays.                                                     */

/* The growing rule (trace.h): the capacity doubles from 16 until it holds
 * `need`, and stops at `max`. */
static int grow_to(void **arr, uint64_t *cap, uint64_t need, uint64_t max, size_t elem)
{
    if (need <= *cap)
        return 0;
    if (need > max)
        return -1;
    uint64_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap = ncap > max / 2 ? max : ncap * 2;
    if (ncap > SIZE_MAX / elem)
        return -1;
    void *p = realloc(*arr, (size_t)(ncap * elem));
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

int trace_grow64(void **arr, uint64_t *cap, uint64_t need, size_t elem)
{
    return grow_to(arr, cap, need, UINT64_MAX, elem);
}

int trace_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    uint64_t c = *cap;
    if (grow_to(arr, &c, need, SIZE_MAX, elem) != 0)
        return -1;
    *cap = (size_t)c;
    return 0;
}

int trace_grow32(void **arr, uint32_t *cap, uint64_t need, size_t elem)
{
    uint64_t c = *cap;
    if (grow_to(arr, &c, need, UINT32_MAX, elem) != 0)
        return -1;
    *cap = (uint32_t)c;
    return 0;
}

/* ------------------------------------------------------------------ */
/* String map.                                                         */

uint64_t trace_hash(const void *data, size_t len)
{
    /* Eight bytes a step, each word mixed by a multiply (the shape of FNV-1a
     * over words): labels are tens of bytes, and byte-at-a-time hashing
     * showed in every profile of the trace path. */
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, len);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

void trace_strmap_init(trace_strmap *m)
{
    memset(m, 0, sizeof *m);
}

void trace_strmap_free(trace_strmap *m)
{
    free(m->slots);
    free(m->keys);
    free(m->key_len);
    memset(m, 0, sizeof *m);
}

/* A slot holds value + 1 in its low half and the key's hash in its high
 * half, so that a probe compares keys only when the hashes agree. */
#define SLOT_VALUE(x) ((uint32_t)(x))
#define SLOT_HASH(x) ((uint32_t)((x) >> 32))

/* Slot of key (hash h), or of the empty slot where it would go. */
static uint32_t strmap_slot(const trace_strmap *m, const char *key, size_t len, uint32_t h)
{
    uint32_t mask = m->cap - 1;
    uint32_t i = h & mask;
    while (m->slots[i]) {
        if (SLOT_HASH(m->slots[i]) == h && m->key_len[i] == len &&
            memcmp(m->keys[i], key, len) == 0)
            return i;
        i = (i + 1) & mask;
    }
    return i;
}

uint32_t trace_strmap_get(const trace_strmap *m, const char *key, size_t len)
{
    if (m->cap == 0)
        return TRACE_NONE;
    uint32_t i = strmap_slot(m, key, len, (uint32_t)trace_hash(key, len));
    return m->slots[i] ? SLOT_VALUE(m->slots[i]) - 1 : TRACE_NONE;
}

static int strmap_resize(trace_strmap *m, uint32_t ncap)
{
    trace_strmap n = { 0 };
    n.cap = ncap;
    n.slots = calloc(ncap, sizeof *n.slots);
    n.keys = calloc(ncap, sizeof *n.keys);
    n.key_len = calloc(ncap, sizeof *n.key_len);
    if (!n.slots || !n.keys || !n.key_len) {
        trace_strmap_free(&n);
        return -1;
    }
    uint32_t mask = ncap - 1;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->slots[i])
            continue;
        uint32_t j = SLOT_HASH(m->slots[i]) & mask;
        while (n.slots[j])
            j = (j + 1) & mask;
        n.slots[j] = m->slots[i];
        n.keys[j] = m->keys[i];
        n.key_len[j] = m->key_len[i];
    }
    n.count = m->count;
    trace_strmap_free(m);
    *m = n;
    return 0;
}

int trace_strmap_put(trace_strmap *m, const char *key, size_t len, uint32_t value)
{
    if (value == UINT32_MAX || len > UINT32_MAX)
        return -1;
    if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3) {
        uint32_t ncap = m->cap ? m->cap * 2 : 64;
        if (ncap < m->cap || strmap_resize(m, ncap) != 0)
            return -1;
    }
    uint32_t h = (uint32_t)trace_hash(key, len);
    uint32_t i = strmap_slot(m, key, len, h);
    if (!m->slots[i]) {
        m->count++;
        m->keys[i] = key;
        m->key_len[i] = (uint32_t)len;
    }
    m->slots[i] = (uint64_t)h << 32 | (value + 1);
    return 0;
}

/* Copies s (len bytes, NUL added) into t's string arena: chunks that never
 * move, so strs[] may point into them, and one allocation per 64 KiB rather
 * than per string. NULL when out of memory. */
static char *arena_copy(trace *t, const char *s, size_t len)
{
    if (t->arena_used + len + 1 > t->arena_cap) {
        size_t cap = len + 1 > 65536 ? len + 1 : 65536;
        char **chunks = realloc(t->arena_chunks, (t->n_arena_chunks + 1) * sizeof *chunks);
        if (!chunks)
            return NULL;
        t->arena_chunks = chunks;
        char *c = malloc(cap);
        if (!c)
            return NULL;
        t->arena_chunks[t->n_arena_chunks++] = c;
        t->arena_used = 0;
        t->arena_cap = cap;
    }
    char *d = t->arena_chunks[t->n_arena_chunks - 1] + t->arena_used;
    memcpy(d, s, len);
    d[len] = '\0';
    t->arena_used += len + 1;
    return d;
}

/* ------------------------------------------------------------------ */
/* The trace.                                                          */

trace *trace_new(void)
{
    trace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    trace_strmap_init(&t->str_ids);
    trace_strmap_init(&t->queue_ids);
    trace_strmap_init(&t->buffer_ids);
    return t;
}

void trace_free(trace *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n_arena_chunks; i++)
        free(t->arena_chunks[i]);
    free(t->arena_chunks);
    free(t->strs);
    free(t->str_len);
    trace_strmap_free(&t->str_ids);
    trace_strmap_free(&t->queue_ids);
    trace_strmap_free(&t->buffer_ids);
    free(t->queues);
    free(t->buffers);
    for (uint32_t i = 0; i < t->n_expects; i++)
        free(t->expects[i].kv);
    free(t->expects);
    free(t->meta);
    free(t->stmts);
    free(t->access_pool);
    free(t->attr_pool);
    free(t);
}

uint32_t trace_intern(trace *t, const char *s, size_t len)
{
    if (len > UINT32_MAX)
        return TRACE_NONE;
    trace_strmap *m = &t->str_ids;
    uint32_t h = (uint32_t)trace_hash(s, len);
    if (m->cap) {
        uint32_t i = strmap_slot(m, s, len, h);
        if (m->slots[i])
            return SLOT_VALUE(m->slots[i]) - 1;
    }
    if (t->n_strs == UINT32_MAX - 1)
        return TRACE_NONE;
    if (trace_grow32((void **)&t->strs, &t->cap_strs, t->n_strs + 1, sizeof *t->strs) != 0)
        return TRACE_NONE;
    uint32_t cap = t->cap_strs;
    uint32_t *nl = realloc(t->str_len, (size_t)cap * sizeof *nl);
    if (!nl)
        return TRACE_NONE;
    t->str_len = nl;
    char *copy = arena_copy(t, s, len);
    if (!copy)
        return TRACE_NONE;
    uint32_t id = t->n_strs;
    if (trace_strmap_put(m, copy, len, id) != 0)
        return TRACE_NONE;      /* the arena keeps the bytes: freed with t */
    t->strs[id] = copy;
    t->str_len[id] = (uint32_t)len;
    t->n_strs++;
    return id;
}

uint32_t trace_intern_cstr(trace *t, const char *s)
{
    return trace_intern(t, s, strlen(s));
}

const char *trace_str(const trace *t, uint32_t id)
{
    return id < t->n_strs ? t->strs[id] : "";
}

uint32_t trace_str_find(const trace *t, const char *s, size_t len)
{
    return trace_strmap_get(&t->str_ids, s, len);
}

uint32_t trace_add_queue(trace *t, uint32_t name, trace_queue_kind kind, uint32_t device)
{
    if (name >= t->n_strs)
        return TRACE_NONE;
    const char *ns = t->strs[name];
    if (trace_strmap_get(&t->queue_ids, ns, t->str_len[name]) != TRACE_NONE)
        return TRACE_NONE;
    if (trace_grow32((void **)&t->queues, &t->cap_queues, t->n_queues + 1, sizeof *t->queues) != 0)
        return TRACE_NONE;
    uint32_t q = t->n_queues;
    if (trace_strmap_put(&t->queue_ids, ns, t->str_len[name], q) != 0)
        return TRACE_NONE;
    t->queues[q] = (trace_queue){ .name = name, .kind = kind,
                                  .device = kind == TRACE_QUEUE_STREAM ? device : TRACE_NONE };
    t->n_queues++;
    if (kind == TRACE_QUEUE_HOST)
        t->n_host_queues++;
    return q;
}

static uint32_t add_buffer(trace *t, const trace_buffer *b)
{
    if (b->name >= t->n_strs)
        return TRACE_NONE;
    const char *ns = t->strs[b->name];
    if (trace_strmap_get(&t->buffer_ids, ns, t->str_len[b->name]) != TRACE_NONE)
        return TRACE_NONE;
    if (trace_grow32((void **)&t->buffers, &t->cap_buffers, t->n_buffers + 1, sizeof *t->buffers) != 0)
        return TRACE_NONE;
    uint32_t i = t->n_buffers;
    if (trace_strmap_put(&t->buffer_ids, ns, t->str_len[b->name], i) != 0)
        return TRACE_NONE;
    t->buffers[i] = *b;
    t->n_buffers++;
    return i;
}

uint32_t trace_add_root_buffer(trace *t, uint32_t name, uint64_t size, trace_loc loc,
                               uint32_t device, bool pinned)
{
    trace_buffer b = { .name = name, .size = size, .parent = TRACE_NONE, .offset = 0,
                       .loc = loc, .device = loc == TRACE_LOC_DEVICE ? device : TRACE_NONE,
                       .pinned = pinned, .root = t->n_buffers, .root_offset = 0 };
    return add_buffer(t, &b);
}

uint32_t trace_add_view(trace *t, uint32_t name, uint32_t parent, uint64_t offset,
                        uint64_t size)
{
    if (parent >= t->n_buffers)
        return TRACE_NONE;
    const trace_buffer *p = &t->buffers[parent];
    const trace_buffer *r = &t->buffers[p->root];
    trace_buffer b = { .name = name, .size = size, .parent = parent, .offset = offset,
                       .loc = r->loc, .device = r->device, .pinned = r->pinned,
                       .root = p->root, .root_offset = p->root_offset + offset };
    return add_buffer(t, &b);
}

uint32_t trace_find_queue(const trace *t, const char *name, size_t len)
{
    return trace_strmap_get(&t->queue_ids, name, len);
}

uint32_t trace_find_buffer(const trace *t, const char *name, size_t len)
{
    return trace_strmap_get(&t->buffer_ids, name, len);
}

int trace_add_expect(trace *t, trace_finding_kind kind, uint32_t line,
                     const trace_attr *kv, uint32_t n_kv)
{
    if (trace_grow32((void **)&t->expects, &t->cap_expects, t->n_expects + 1, sizeof *t->expects) != 0)
        return -1;
    trace_attr *copy = NULL;
    if (n_kv) {
        copy = malloc(n_kv * sizeof *copy);
        if (!copy)
            return -1;
        memcpy(copy, kv, n_kv * sizeof *copy);
    }
    t->expects[t->n_expects++] = (trace_expect){ .kind = kind, .line = line,
                                                 .n_kv = n_kv, .kv = copy };
    return 0;
}

int trace_set_meta(trace *t, const char *key, const char *value)
{
    uint32_t k = trace_intern_cstr(t, key), v = trace_intern_cstr(t, value);
    if (k == TRACE_NONE || v == TRACE_NONE)
        return -1;
    for (uint32_t i = 0; i < t->n_meta; i++)
        if (t->meta[i].key == k) {
            t->meta[i].value = v;
            return 0;
        }
    if (trace_grow32((void **)&t->meta, &t->cap_meta, t->n_meta + 1, sizeof *t->meta) != 0)
        return -1;
    t->meta[t->n_meta++] = (trace_attr){ k, v };
    return 0;
}

const char *trace_get_meta(const trace *t, const char *key)
{
    uint32_t k = trace_str_find(t, key, strlen(key));
    if (k == TRACE_NONE)
        return NULL;
    for (uint32_t i = 0; i < t->n_meta; i++)
        if (t->meta[i].key == k)
            return trace_str(t, t->meta[i].value);
    return NULL;
}

uint64_t trace_ledger(const trace *t, void (*fn)(void *ctx, const char *reason, uint64_t n),
                      void *ctx)
{
    const size_t plen = strlen(TRACE_LEDGER_PREFIX);
    uint64_t total = 0;
    for (uint32_t i = 0; i < t->n_meta; i++) {
        const char *key = trace_str(t, t->meta[i].key);
        if (strncmp(key, TRACE_LEDGER_PREFIX, plen) != 0 || !key[plen])
            continue;
        char *end;
        unsigned long long n = strtoull(trace_str(t, t->meta[i].value), &end, 10);
        if (*end || n == 0)
            continue;
        total += n;
        if (fn)
            fn(ctx, key + plen, n);
    }
    return total;
}

typedef struct ledger_json {
    FILE *out;
    unsigned n;
} ledger_json;

static void ledger_member(void *ctx, const char *reason, uint64_t n)
{
    ledger_json *j = ctx;
    fputs(j->n++ ? ", " : "", j->out);
    trace_json_str(j->out, reason);
    fprintf(j->out, ": %llu", (unsigned long long)n);
}

void trace_ledger_print_json(FILE *out, const trace *t)
{
    ledger_json j = { out, 0 };
    fputc('{', out);
    trace_ledger(t, ledger_member, &j);
    fputc('}', out);
}

uint32_t trace_submitter(const trace *t, const trace_stmt *s)
{
    if (s->queue >= t->n_queues || t->queues[s->queue].kind == TRACE_QUEUE_HOST)
        return TRACE_NONE;
    if (s->by != TRACE_NONE)
        return s->by;
    if (t->n_host_queues != 1)
        return TRACE_NONE;
    for (uint32_t q = 0; q < t->n_queues; q++)
        if (t->queues[q].kind == TRACE_QUEUE_HOST)
            return q;
    return TRACE_NONE;
}

void trace_access_root(const trace *t, const trace_access *a, uint32_t *root,
                       uint64_t *lo, uint64_t *hi)
{
    const trace_buffer *b = &t->buffers[a->buffer];
    *root = b->root;
    *lo = b->root_offset + a->lo;
    *hi = b->root_offset + a->hi;
}

void trace_set_time(trace *t, uint64_t i, int64_t start, int64_t dur)
{
    if (i >= t->n_stmts)
        return;
    t->stmts[i].t = start;
    t->stmts[i].dur = dur;
}

int trace_append(trace *t, const trace_stmt *s)
{
    /* The record's offsets and counts are 32 and 16 bits wide. */
    if (s->n_attr > UINT16_MAX || t->n_access_pool + s->n_access > UINT32_MAX ||
        t->n_attr_pool + s->n_attr > UINT32_MAX || (unsigned)s->kind > UINT8_MAX ||
        (unsigned)s->sync_scope >= REC_SEM || (is_p2p(s->kind) && s->count > UINT32_MAX))
        return -1;
    if (trace_grow64((void **)&t->stmts, &t->cap_stmts, t->n_stmts + 1, sizeof *t->stmts) != 0)
        return -1;
    if (trace_grow64((void **)&t->access_pool, &t->cap_access_pool, t->n_access_pool + s->n_access,
             sizeof *t->access_pool) != 0)
        return -1;
    if (trace_grow64((void **)&t->attr_pool, &t->cap_attr_pool, t->n_attr_pool + s->n_attr,
             sizeof *t->attr_pool) != 0)
        return -1;
    bool p2p = is_p2p(s->kind);
    t->stmts[t->n_stmts] = (trace_stmt_rec){
        .t = s->t, .dur = s->dur,
        .count = p2p ? (uint64_t)s->peer << 32 | s->count : s->count,
        .queue = s->queue, .label = s->label, .object = s->object, .by = s->by,
        .coll_kind = p2p ? s->rank : s->coll_kind, .line = s->line,
        .n_access = s->n_access, .first_access = (uint32_t)t->n_access_pool,
        .first_attr = (uint32_t)t->n_attr_pool,
        .kind = (uint8_t)s->kind,
        .sync_scope = (uint8_t)(s->sync_scope | (s->sem ? REC_SEM : 0)),
        .n_attr = (uint16_t)s->n_attr,
    };
    if (s->n_access)
        memcpy(t->access_pool + t->n_access_pool, s->access, s->n_access * sizeof *s->access);
    if (s->n_attr)
        memcpy(t->attr_pool + t->n_attr_pool, s->attr, s->n_attr * sizeof *s->attr);
    t->n_access_pool += s->n_access;
    t->n_attr_pool += s->n_attr;
    t->n_stmts++;
    return 0;
}

void trace_stmt_at(const trace *t, uint64_t i, trace_stmt *out)
{
    const trace_stmt_rec *r = &t->stmts[i];
    *out = (trace_stmt){
        .seq = i, .queue = r->queue, .kind = (trace_kind)r->kind, .label = r->label,
        .object = r->object, .sync_scope = (trace_sync_scope)(r->sync_scope & ~REC_SEM),
        .sem = (r->sync_scope & REC_SEM) != 0,
        .coll_kind = r->coll_kind, .count = r->count, .by = r->by, .t = r->t, .dur = r->dur,
        .line = r->line, .n_access = r->n_access,
        .access = r->n_access ? t->access_pool + r->first_access : NULL,
        .n_attr = r->n_attr, .attr = r->n_attr ? t->attr_pool + r->first_attr : NULL,
        .rank = TRACE_NONE, .peer = TRACE_NONE,
    };
    if (is_p2p(out->kind)) {
        out->rank = r->coll_kind;
        out->peer = (uint32_t)(r->count >> 32);
        out->count = r->count & UINT32_MAX;
        out->coll_kind = TRACE_NONE;
    }
}

const char *trace_stmt_name(const trace *t, const trace_stmt *s, char *buf, size_t cap)
{
    const char *q = s->queue < t->n_queues ? trace_str(t, t->queues[s->queue].name) : "?";
    if (s->label != TRACE_NONE)
        snprintf(buf, cap, "%s", trace_str(t, s->label));
    else if (s->line)
        snprintf(buf, cap, "%s@%u", q, s->line);
    else
        snprintf(buf, cap, "%s#%llu", q, (unsigned long long)s->seq);
    return buf;
}

/* Strings of two traces are equal by content; TRACE_NONE only to itself. */
static bool str_eq(const trace *ta, uint32_t a, const trace *tb, uint32_t b)
{
    if (a == TRACE_NONE || b == TRACE_NONE)
        return a == b;
    return strcmp(trace_str(ta, a), trace_str(tb, b)) == 0;
}

static bool queue_eq(const trace *ta, uint32_t a, const trace *tb, uint32_t b)
{
    if (a == TRACE_NONE || b == TRACE_NONE)
        return a == b;
    return str_eq(ta, ta->queues[a].name, tb, tb->queues[b].name);
}

static bool buffer_eq(const trace *ta, uint32_t a, const trace *tb, uint32_t b)
{
    if (a == TRACE_NONE || b == TRACE_NONE)
        return a == b;
    return str_eq(ta, ta->buffers[a].name, tb, tb->buffers[b].name);
}

bool trace_stmt_equal(const trace *ta, const trace_stmt *a, const trace *tb,
                      const trace_stmt *b)
{
    if (a->kind != b->kind || !queue_eq(ta, a->queue, tb, b->queue) ||
        !str_eq(ta, a->label, tb, b->label) || a->count != b->count || a->sem != b->sem ||
        !str_eq(ta, a->coll_kind, tb, b->coll_kind) || !queue_eq(ta, a->by, tb, b->by) ||
        (is_p2p(a->kind) && (a->rank != b->rank || a->peer != b->peer)) ||
        a->t != b->t || a->dur != b->dur || a->n_access != b->n_access ||
        a->n_attr != b->n_attr)
        return false;
    switch (a->kind) {
    case TRACE_ALLOC:
    case TRACE_FREE:
        if (!buffer_eq(ta, a->object, tb, b->object))
            return false;
        break;
    case TRACE_SYNC:
        if (a->sync_scope != b->sync_scope)
            return false;
        if (a->sync_scope == TRACE_SYNC_QUEUE ? !queue_eq(ta, a->object, tb, b->object)
                                              : !str_eq(ta, a->object, tb, b->object))
            return false;
        break;
    default:
        if (!str_eq(ta, a->object, tb, b->object))
            return false;
    }
    for (uint32_t i = 0; i < a->n_access; i++) {
        const trace_access *x = &a->access[i], *y = &b->access[i];
        if (!buffer_eq(ta, x->buffer, tb, y->buffer) || x->mode != y->mode ||
            x->form != y->form || x->lo != y->lo || x->hi != y->hi)
            return false;
    }
    for (uint32_t i = 0; i < a->n_attr; i++)
        if (!str_eq(ta, a->attr[i].key, tb, b->attr[i].key) ||
            !str_eq(ta, a->attr[i].value, tb, b->attr[i].value))
            return false;
    return true;
}

/* ------------------------------------------------------------------ */
/* Readers.                                                            */

int trace_reader_next(trace_reader *r, trace_stmt *out, trace_error *err)
{
    return r->iface->next(r->ctx, out, err);
}

int trace_reader_rewind(trace_reader *r, trace_error *err)
{
    if (!r->iface->rewind)
        return trace_error_set(err, TRACE_EUSAGE, "%s: cannot be read twice",
                               r->source ? r->source : "the trace"),
               -1;
    return r->iface->rewind(r->ctx, err);
}

int trace_reader_label(trace_reader *r, uint64_t seq, uint32_t *label, trace_error *err)
{
    if (*label != TRACE_LABEL_LAZY)
        return 0;
    const char *text;
    size_t len;
    trace_stmt s = { .seq = seq, .label = TRACE_LABEL_LAZY };
    if (trace_reader_label_text(r, &s, &text, &len, err) != 0)
        return -1;
    if ((*label = trace_intern(r->trace, text, len)) == TRACE_NONE)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory",
                               r->source ? r->source : "trace"),
               -1;
    return 0;
}

int trace_reader_label_text(trace_reader *r, const trace_stmt *s, const char **text, size_t *len,
                            trace_error *err)
{
    if (s->label == TRACE_NONE) {
        *text = NULL;
        *len = 0;
        return 0;
    }
    if (s->label != TRACE_LABEL_LAZY) {
        *text = trace_str(r->trace, s->label);
        *len = r->trace->str_len[s->label];
        return 0;
    }
    if (!r->iface->label_text)
        return trace_error_set(err, TRACE_EUSAGE, "%s: a lazy label from a reader that cannot "
                               "resolve it", r->source ? r->source : "trace"),
               -1;
    return r->iface->label_text(r->ctx, s->seq, text, len, err);
}

int trace_reader_attr(trace_reader *r, uint64_t seq, const char *key, uint32_t *value,
                      trace_error *err)
{
    *value = TRACE_NONE;
    if (seq == TRACE_NO_SEQ || !r->iface->attr_text)
        return 0;
    const char *text = NULL;
    size_t len = 0;
    if (r->iface->attr_text(r->ctx, seq, key, &text, &len, err) != 0)
        return -1;
    if (text && (*value = trace_intern(r->trace, text, len)) == TRACE_NONE)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory",
                               r->source ? r->source : "trace"),
               -1;
    return 0;
}

void trace_reader_close(trace_reader *r)
{
    if (r->iface && r->iface->close)
        r->iface->close(r->ctx);
    if (r->owns_trace)
        trace_free(r->trace);
    free(r->source);
    memset(r, 0, sizeof *r);
}

typedef struct memory_reader {
    trace *t;
    uint64_t next;
} memory_reader;

static int memory_next(void *ctx, trace_stmt *out, trace_error *err)
{
    (void)err;
    memory_reader *m = ctx;
    if (m->next >= m->t->n_stmts)
        return 0;
    trace_stmt_at(m->t, m->next++, out);
    return 1;
}

static void memory_close(void *ctx)
{
    free(ctx);
}

static int memory_rewind(void *ctx, trace_error *err)
{
    (void)err;
    ((memory_reader *)ctx)->next = 0;
    return 0;
}

/* Its statements are at hand: attribute key of statement seq, if read. */
static int memory_attr_text(void *ctx, uint64_t seq, const char *key, const char **text,
                            size_t *len, trace_error *err)
{
    (void)err;
    memory_reader *m = ctx;
    *text = NULL;
    *len = 0;
    uint32_t k = trace_str_find(m->t, key, strlen(key));
    if (k == TRACE_NONE || seq >= m->t->n_stmts)
        return 0;
    trace_stmt s;
    trace_stmt_at(m->t, seq, &s);
    for (uint32_t i = 0; i < s.n_attr; i++)
        if (s.attr[i].key == k) {
            *text = trace_str(m->t, s.attr[i].value);
            *len = m->t->str_len[s.attr[i].value];
            break;
        }
    return 0;
}

static const trace_reader_iface memory_iface = { memory_next, memory_close, memory_rewind, NULL,
                                                 memory_attr_text };

void trace_reader_memory(trace_reader *r, trace *t)
{
    memset(r, 0, sizeof *r);
    memory_reader *m = calloc(1, sizeof *m);
    if (!m)
        abort(); /* a few bytes: nothing sensible is left to do */
    m->t = t;
    r->iface = &memory_iface;
    r->ctx = m;
    r->trace = t;
}

int trace_reader_load(trace_reader *r, trace **out, trace_error *err)
{
    trace *t = r->trace;
    int rc;
    trace_stmt s;
    *out = NULL;
    /* Statements are appended to the reader's own trace, which already holds
     * the declarations: the loaded trace is that trace, taken over. */
    trace *dst = t;
    bool take = r->owns_trace;
    if (!take) {
        trace_error_set(err, TRACE_EUSAGE, "%s: cannot load a reader that does not own its trace",
                        r->source ? r->source : "trace");
        trace_reader_close(r);
        return -1;
    }
    if (r->iface == &memory_iface) {
        /* its statements are already in the trace it reads (and appending
         * them to it again would never end) */
        r->owns_trace = false;
        trace_reader_close(r);
        *out = dst;
        return 0;
    }
    while ((rc = trace_reader_next(r, &s, err)) == 1) {
        if (trace_reader_label(r, s.seq, &s.label, err) != 0) {
            rc = -1;
            break;
        }
        if (trace_append(dst, &s) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "%s: out of memory after %llu statements",
                            r->source ? r->source : "trace", (unsigned long long)dst->n_stmts);
            rc = -1;
            break;
        }
    }
    if (rc < 0) {
        trace_reader_close(r);
        return -1;
    }
    r->owns_trace = false;
    trace_reader_close(r);
    *out = dst;
    return 0;
}

int trace_open_any(const char *path, int64_t run, trace_reader *r, trace_error *err)
{
    trace_source src;
    trace_source_opts o = { .run = run };
    if (trace_source_open(&src, path, &o, err) != 0) {
        memset(r, 0, sizeof *r);
        return -1;
    }
    /* the reader takes the database with it */
    *r = src.reader;
    if (src.store)
        store_reader_adopt(r);
    free(src.path);
    return 0;
}

void trace_finding_release(trace_finding *f)
{
    free(f->text);
    free(f->fix);
    for (uint32_t i = 0; i < f->n_parts; i++)
        free(f->parts[i].text);
    free(f->parts);
    f->text = f->fix = NULL;
    f->parts = NULL;
    f->n_parts = 0;
}

void trace_findings_free(trace_finding *f, size_t n)
{
    for (size_t i = 0; f && i < n; i++)
        trace_finding_release(&f[i]);
    free(f);
}
