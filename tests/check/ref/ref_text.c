/*
 * ref_text.c -- the reference's own model of a trace: building it, writing
 * it as text for the checker, and reading the litmus traces.
 *
 * The writer prints only what the contract's grammar needs and always
 * writes by= on stream statements that have a submitter, so what the
 * checker reads means exactly what the model says even after the shrinker
 * deleted every statement of a host. The parser reads the subset of the
 * format the litmus traces use (whole quoted tokens at most); it is written
 * from the grammar in the contract, not from traces/.
 */
#include "ref.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_words[REF_KIND_COUNT] = {
    "op", "record", "wait", "sync", "barrier", "signal", "await",
    "collective", "alloc", "free", "send", "recv",
};

void ref_init(ref_trace *t)
{
    t->n_names = 0;
    t->n_queues = 0;
    t->n_bufs = 0;
    t->n_sems = 0;
    t->n = 0;
    t->n_expect = 0;
}

uint16_t ref_find_name(const ref_trace *t, const char *s)
{
    for (uint16_t i = 0; i < t->n_names; i++)
        if (strcmp(t->names[i], s) == 0)
            return i;
    return REF_NONE;
}

uint16_t ref_name(ref_trace *t, const char *s)
{
    uint16_t id = ref_find_name(t, s);
    if (id != REF_NONE)
        return id;
    if (t->n_names >= REF_MAX_NAMES || strlen(s) >= REF_NAME_LEN)
        return REF_NONE;
    snprintf(t->names[t->n_names], REF_NAME_LEN, "%s", s);
    return t->n_names++;
}

/* `rN.` at the start of a queue name: the rank of a merged job (ruling 4). */
static int16_t rank_of(const char *name)
{
    if (name[0] != 'r' || !isdigit((unsigned char)name[1]))
        return -1;
    int r = 0;
    const char *p = name + 1;
    while (isdigit((unsigned char)*p) && r < 10000)
        r = r * 10 + (*p++ - '0');
    return *p == '.' ? (int16_t)r : -1;
}

static uint16_t add_queue(ref_trace *t, const char *name, bool host, const char *device)
{
    if (t->n_queues >= REF_MAX_QUEUES)
        return REF_NONE;
    ref_queue *q = &t->q[t->n_queues];
    q->name = ref_name(t, name);
    q->host = host;
    q->device = device ? ref_name(t, device) : REF_NONE;
    q->rank = rank_of(name);
    return t->n_queues++;
}

uint16_t ref_add_host(ref_trace *t, const char *name)
{
    return add_queue(t, name, true, NULL);
}

uint16_t ref_add_stream(ref_trace *t, const char *name, const char *device)
{
    return add_queue(t, name, false, device);
}

uint16_t ref_add_buffer(ref_trace *t, const char *name, uint32_t size)
{
    if (t->n_bufs >= REF_MAX_BUFS)
        return REF_NONE;
    uint16_t i = t->n_bufs++;
    t->b[i] = (ref_buffer){ .name = ref_name(t, name), .size = size, .parent = REF_NONE,
                            .offset = 0, .root = i, .root_off = 0 };
    return i;
}

uint16_t ref_add_view(ref_trace *t, const char *name, uint16_t parent, uint32_t offset,
                      uint32_t size)
{
    if (t->n_bufs >= REF_MAX_BUFS)
        return REF_NONE;
    uint16_t i = t->n_bufs++;
    const ref_buffer *p = &t->b[parent];
    t->b[i] = (ref_buffer){ .name = ref_name(t, name), .size = size, .parent = parent,
                            .offset = offset, .root = p->root,
                            .root_off = p->root_off + offset };
    return i;
}

void ref_add_sem(ref_trace *t, uint16_t name)
{
    if (!ref_is_sem(t, name) && t->n_sems < 16)
        t->sems[t->n_sems++] = name;
}

bool ref_is_sem(const ref_trace *t, uint16_t name)
{
    for (uint16_t i = 0; i < t->n_sems; i++)
        if (t->sems[i] == name)
            return true;
    return false;
}

uint16_t ref_find_queue(const ref_trace *t, const char *name)
{
    for (uint16_t i = 0; i < t->n_queues; i++)
        if (strcmp(t->names[t->q[i].name], name) == 0)
            return i;
    return REF_NONE;
}

uint16_t ref_find_buffer(const ref_trace *t, const char *name)
{
    for (uint16_t i = 0; i < t->n_bufs; i++)
        if (strcmp(t->names[t->b[i].name], name) == 0)
            return i;
    return REF_NONE;
}

ref_stmt ref_stmt_new(uint16_t queue, ref_kind kind)
{
    ref_stmt s;
    memset(&s, 0, sizeof s);
    s.kind = (uint8_t)kind;
    s.queue = queue;
    s.by = REF_NONE;
    s.label = REF_NONE;
    s.obj = REF_NONE;
    s.coll_kind = REF_NONE;
    return s;
}

ref_stmt *ref_push(ref_trace *t, const ref_stmt *s)
{
    if (t->n >= REF_MAX_STMTS)
        return NULL;
    t->s[t->n] = *s;
    return &t->s[t->n++];
}

void ref_delete(ref_trace *t, uint16_t i)
{
    memmove(&t->s[i], &t->s[i + 1], (size_t)(t->n - i - 1) * sizeof t->s[0]);
    t->n--;
}

/* ------------------------------------------------------------------ */
/* Writer.                                                             */

void ref_bprintf(ref_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->buf + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n;
}

static void out_access(ref_buf *o, const ref_trace *t, const ref_access *a)
{
    static const char *const modes[4] = { "?", "r", "w", "rw" };
    const ref_buffer *b = &t->b[a->buf];
    if (a->lo == 0 && a->hi == b->size)
        ref_bprintf(o, " %s:%s", modes[a->mode], t->names[b->name]);
    else
        ref_bprintf(o, " %s:%s[%u:%u]", modes[a->mode], t->names[b->name], a->lo, a->hi);
}

const char *ref_stmt_name(const ref_trace *t, uint16_t i, char *buf, size_t cap)
{
    const ref_stmt *s = &t->s[i];
    if (s->label != REF_NONE)
        snprintf(buf, cap, "%s", t->names[s->label]);
    else
        snprintf(buf, cap, "%s@%u", t->names[t->q[s->queue].name], s->line);
    return buf;
}

size_t ref_print(ref_trace *t, char *buf, size_t cap)
{
    ref_buf o = { buf, cap, 0 };
    if (cap)
        buf[0] = '\0';
    bool qused[REF_MAX_QUEUES] = { 0 }, bused[REF_MAX_BUFS] = { 0 };
    bool nsem[REF_MAX_NAMES] = { 0 };
    for (uint16_t i = 0; i < t->n; i++) {
        const ref_stmt *s = &t->s[i];
        qused[s->queue] = true;
        if (s->by != REF_NONE)
            qused[s->by] = true;
        if (s->kind == REF_SYNC && s->scope == REF_SYNC_QUEUE)
            qused[s->obj] = true;
        if (s->kind == REF_ALLOC || s->kind == REF_FREE)
            bused[s->obj] = true;
        if ((s->kind == REF_SIGNAL || s->kind == REF_AWAIT) && ref_is_sem(t, s->obj))
            nsem[s->obj] = true;
        for (uint8_t k = 0; k < s->n_acc; k++)
            bused[s->acc[k].buf] = true;
    }
    for (int i = t->n_bufs - 1; i >= 0; i--)
        if (bused[i] && t->b[i].parent != REF_NONE)
            bused[t->b[i].parent] = true;
    ref_bprintf(&o, "syncsim-trace 1\n");
    for (uint16_t i = 0; i < t->n_queues; i++) {
        if (!qused[i])
            continue;
        if (t->q[i].host)
            ref_bprintf(&o, "queue %s host\n", t->names[t->q[i].name]);
        else
            ref_bprintf(&o, "queue %s stream device=%s\n", t->names[t->q[i].name],
                t->names[t->q[i].device]);
    }
    for (uint16_t i = 0; i < t->n_bufs; i++) {
        const ref_buffer *b = &t->b[i];
        if (!bused[i])
            continue;
        if (b->parent == REF_NONE)
            ref_bprintf(&o, "buffer %s size=%u\n", t->names[b->name], b->size);
        else
            ref_bprintf(&o, "buffer %s in=%s offset=%u size=%u\n", t->names[b->name],
                t->names[t->b[b->parent].name], b->offset, b->size);
    }
    for (uint16_t i = 0; i < t->n_sems; i++)
        if (nsem[t->sems[i]])
            ref_bprintf(&o, "semaphore %s\n", t->names[t->sems[i]]);
    uint32_t line = 1;
    for (size_t k = 0; k < o.len && k < o.cap; k++)
        line += buf[k] == '\n';
    for (uint16_t i = 0; i < t->n; i++) {
        ref_stmt *s = &t->s[i];
        s->line = line++;
        const char *q = t->names[t->q[s->queue].name];
        const char *obj = s->obj != REF_NONE && s->kind != REF_ALLOC && s->kind != REF_FREE &&
                                  !(s->kind == REF_SYNC && s->scope != REF_SYNC_DEVICE)
                              ? t->names[s->obj]
                              : "";
        ref_bprintf(&o, "%s %s", q, kind_words[s->kind]);
        switch (s->kind) {
        case REF_OP:
            if (s->label != REF_NONE)
                ref_bprintf(&o, " %s", t->names[s->label]);
            else
                ref_bprintf(&o, " op%u", i);
            break;
        case REF_RECORD:
        case REF_WAIT:
            ref_bprintf(&o, " %s", obj);
            break;
        case REF_SYNC:
            if (s->scope == REF_SYNC_QUEUE)
                ref_bprintf(&o, " %s", t->names[t->q[s->obj].name]);
            else if (s->scope == REF_SYNC_DEVICE)
                ref_bprintf(&o, " device=%s", obj);
            else
                ref_bprintf(&o, " all");
            break;
        case REF_BARRIER:
            ref_bprintf(&o, " %s count=%u", obj, s->count);
            break;
        case REF_SIGNAL:
            ref_bprintf(&o, " %s", obj);
            if (ref_is_sem(t, s->obj))
                ref_bprintf(&o, " set=%u", s->count);
            break;
        case REF_AWAIT:
            ref_bprintf(&o, " %s", obj);
            if (ref_is_sem(t, s->obj))
                ref_bprintf(&o, " >=%u", s->count);
            break;
        case REF_COLLECTIVE:
            ref_bprintf(&o, " %s %s size=%u", obj, t->names[s->coll_kind], s->count);
            break;
        case REF_ALLOC:
        case REF_FREE:
            ref_bprintf(&o, " %s", t->names[t->b[s->obj].name]);
            break;
        case REF_SEND:
        case REF_RECV:
            ref_bprintf(&o, " %s from=%u to=%u tag=%u", obj, s->from, s->to, s->count);
            break;
        default:
            break;
        }
        for (uint8_t k = 0; k < s->n_acc; k++)
            out_access(&o, t, &s->acc[k]);
        if (s->kind != REF_OP && s->label != REF_NONE)
            ref_bprintf(&o, " label=%s", t->names[s->label]);
        if (s->by != REF_NONE && !t->q[s->queue].host)
            ref_bprintf(&o, " by=%s", t->names[t->q[s->by].name]);
        ref_bprintf(&o, "\n");
    }
    for (uint16_t i = 0; i < t->n_expect; i++) {
        const ref_expect *e = &t->e[i];
        ref_bprintf(&o, "expect %s", e->kind);
        for (uint8_t k = 0; k < e->n_kv; k++)
            ref_bprintf(&o, " %s=%s", e->key[k], e->val[k]);
        ref_bprintf(&o, "\n");
    }
    return o.len;
}

/* ------------------------------------------------------------------ */
/* Parser.                                                             */

#define MAX_WORDS 24

typedef struct parser {
    ref_trace *t;
    const char *file;
    uint32_t line;
    char *err;
    size_t cap;
} parser;

static int fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *p, const char *fmt, ...)
{
    int n = snprintf(p->err, p->cap, "%s:%u: ", p->file, p->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < p->cap)
        vsnprintf(p->err + n, p->cap - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Splits a line into words (blanks separate; `#` at a word's start ends the
 * line; a whole word may be quoted). Words point into line, which is
 * modified. */
static int split(char *line, char **w)
{
    int n = 0;
    char *c = line;
    while (*c && n < MAX_WORDS) {
        while (*c == ' ' || *c == '\t' || *c == '\r')
            c++;
        if (!*c || *c == '#')
            break;
        if (*c == '"') {
            w[n++] = ++c;
            while (*c && *c != '"')
                c++;
        } else {
            w[n++] = c;
            while (*c && *c != ' ' && *c != '\t' && *c != '\r')
                c++;
        }
        if (*c)
            *c++ = '\0';
    }
    return n;
}

static bool number(const char *s, uint32_t *v)
{
    char *end;
    unsigned long long x = strtoull(s, &end, 0);
    if (end == s || *end || x > UINT32_MAX)
        return false;
    *v = (uint32_t)x;
    return true;
}

/* The value of `key=` among words[from..n), or NULL. */
static const char *kv(char **w, int from, int n, const char *key)
{
    size_t kl = strlen(key);
    for (int i = from; i < n; i++)
        if (strncmp(w[i], key, kl) == 0 && w[i][kl] == '=')
            return w[i] + kl + 1;
    return NULL;
}

/* NAME, NAME[LO:HI] or NAME[LO:] with r:/w:/rw: in front. 1: an access,
 * 0: not an access word, -1: error. */
static int access_word(parser *p, const char *word, ref_access *a)
{
    const char *c;
    if (strncmp(word, "r:", 2) == 0) {
        a->mode = REF_R;
        c = word + 2;
    } else if (strncmp(word, "w:", 2) == 0) {
        a->mode = REF_W;
        c = word + 2;
    } else if (strncmp(word, "rw:", 3) == 0) {
        a->mode = REF_RW;
        c = word + 3;
    } else {
        return 0;
    }
    char name[REF_NAME_LEN];
    size_t n = strcspn(c, "[");
    if (n >= sizeof name)
        return fail(p, "buffer name too long");
    memcpy(name, c, n);
    name[n] = '\0';
    a->buf = ref_find_buffer(p->t, name);
    if (a->buf == REF_NONE)
        return fail(p, "undeclared buffer '%s'", name);
    uint32_t size = p->t->b[a->buf].size;
    a->lo = 0;
    a->hi = size;
    if (c[n] == '[') {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s", c + n + 1);
        char *colon = strchr(tmp, ':'), *close = strchr(tmp, ']');
        if (!colon || !close || close < colon)
            return fail(p, "bad range in '%s'", word);
        *colon = '\0';
        *close = '\0';
        if (!number(tmp, &a->lo))
            return fail(p, "bad range start in '%s'", word);
        if (colon[1] && !number(colon + 1, &a->hi))
            return fail(p, "bad range end in '%s'", word);
        if (a->lo > a->hi || a->hi > size)
            return fail(p, "range of '%s' outside the buffer", word);
    }
    return 1;
}

/* Accesses from words[i..), up to the first key=value word. */
static int accesses(parser *p, ref_stmt *s, char **w, int i, int n)
{
    for (; i < n; i++) {
        if (s->n_acc >= REF_MAX_ACC)
            return fail(p, "more than %d accesses", REF_MAX_ACC);
        int r = access_word(p, w[i], &s->acc[s->n_acc]);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        s->n_acc++;
    }
    return 0;
}

static int declare(parser *p, char **w, int n)
{
    ref_trace *t = p->t;
    if (strcmp(w[0], "queue") == 0) {
        if (n < 3)
            return fail(p, "short queue declaration");
        bool host = strcmp(w[2], "host") == 0;
        const char *dev = host ? NULL : kv(w, 3, n, "device");
        if (!host && !dev)
            return fail(p, "a stream needs device=");
        if (add_queue(t, w[1], host, dev) == REF_NONE)
            return fail(p, "too many queues");
        return 0;
    }
    if (strcmp(w[0], "buffer") == 0) {
        uint32_t size = 0, off = 0;
        const char *in = kv(w, 2, n, "in");
        if (n < 3 || !kv(w, 2, n, "size") || !number(kv(w, 2, n, "size"), &size))
            return fail(p, "buffer needs size=");
        if (in) {
            uint16_t parent = ref_find_buffer(t, in);
            if (parent == REF_NONE || !kv(w, 2, n, "offset") ||
                !number(kv(w, 2, n, "offset"), &off))
                return fail(p, "bad view");
            if (ref_add_view(t, w[1], parent, off, size) == REF_NONE)
                return fail(p, "too many buffers");
        } else if (ref_add_buffer(t, w[1], size) == REF_NONE) {
            return fail(p, "too many buffers");
        }
        return 0;
    }
    if (strcmp(w[0], "semaphore") == 0) {
        if (n != 2)
            return fail(p, "semaphore takes a name");
        ref_add_sem(t, ref_name(t, w[1]));
        return 0;
    }
    if (strcmp(w[0], "expect") == 0) {
        if (n < 2 || t->n_expect >= REF_MAX_EXPECT)
            return fail(p, "bad or too many expect lines");
        ref_expect *e = &t->e[t->n_expect++];
        snprintf(e->kind, sizeof e->kind, "%s", w[1]);
        e->n_kv = 0;
        for (int i = 2; i < n && e->n_kv < REF_MAX_KV; i++) {
            char *eq = strchr(w[i], '=');
            if (!eq)
                return fail(p, "expected key=value in expect, found '%s'", w[i]);
            *eq = '\0';
            snprintf(e->key[e->n_kv], sizeof e->key[0], "%s", w[i]);
            snprintf(e->val[e->n_kv], sizeof e->val[0], "%s", eq + 1);
            e->n_kv++;
        }
        return 0;
    }
    return 1;   /* not a declaration */
}

static int statement(parser *p, char **w, int n)
{
    ref_trace *t = p->t;
    uint16_t q = ref_find_queue(t, w[0]);
    if (q == REF_NONE)
        return fail(p, "undeclared queue '%s'", w[0]);
    if (n < 2)
        return fail(p, "expected a verb");
    int kind = -1;
    for (int k = 0; k < REF_KIND_COUNT; k++)
        if (strcmp(w[1], kind_words[k]) == 0)
            kind = k;
    bool copy = strcmp(w[1], "copy") == 0;
    if (kind < 0 && !copy)
        return fail(p, "unknown verb '%s'", w[1]);
    ref_stmt s = ref_stmt_new(q, copy ? REF_OP : (ref_kind)kind);
    s.line = p->line;
    int rest = 3;   /* first word after the positional ones */
    if (n < 3)
        return fail(p, "'%s' needs more words", w[1]);
    switch (copy ? -1 : kind) {
    case -1: {
        if (n < 5)
            return fail(p, "copy LABEL SRC DST");
        s.label = ref_name(t, w[2]);
        char src[64], dst[64];
        snprintf(src, sizeof src, "r:%s", w[3]);
        snprintf(dst, sizeof dst, "w:%s", w[4]);
        if (access_word(p, src, &s.acc[0]) < 0 || access_word(p, dst, &s.acc[1]) < 0)
            return -1;
        s.n_acc = 2;
        rest = 5;
        break;
    }
    case REF_OP:
        s.label = ref_name(t, w[2]);
        if (accesses(p, &s, w, 3, n) < 0)
            return -1;
        rest = 3 + s.n_acc;
        break;
    case REF_RECORD:
    case REF_WAIT:
        s.obj = ref_name(t, w[2]);
        break;
    case REF_SYNC:
        if (strcmp(w[2], "all") == 0) {
            s.scope = REF_SYNC_ALL;
        } else if (strncmp(w[2], "device=", 7) == 0) {
            s.scope = REF_SYNC_DEVICE;
            s.obj = ref_name(t, w[2] + 7);
        } else {
            s.scope = REF_SYNC_QUEUE;
            s.obj = ref_find_queue(t, w[2]);
            if (s.obj == REF_NONE)
                return fail(p, "undeclared queue '%s'", w[2]);
        }
        break;
    case REF_BARRIER:
        s.obj = ref_name(t, w[2]);
        if (!kv(w, 3, n, "count") || !number(kv(w, 3, n, "count"), &s.count))
            return fail(p, "barrier needs count=");
        break;
    case REF_SIGNAL:
    case REF_AWAIT:
        s.obj = ref_name(t, w[2]);
        if (ref_is_sem(t, s.obj)) {
            const char *v = kind == REF_SIGNAL ? kv(w, 3, n, "set") : NULL;
            if (kind == REF_AWAIT && n > 3 && strncmp(w[3], ">=", 2) == 0)
                v = w[3] + 2;
            if (!v || !number(v, &s.count))
                return fail(p, "semaphore '%s' needs its value", w[2]);
        }
        break;
    case REF_COLLECTIVE:
        if (n < 5)
            return fail(p, "collective COMM KIND size=N");
        s.obj = ref_name(t, w[2]);
        s.coll_kind = ref_name(t, w[3]);
        if (strncmp(w[4], "size=", 5) != 0 || !number(w[4] + 5, &s.count))
            return fail(p, "collective needs size=");
        if (accesses(p, &s, w, 5, n) < 0)
            return -1;
        rest = 5 + s.n_acc;
        break;
    case REF_ALLOC:
    case REF_FREE:
        s.obj = ref_find_buffer(t, w[2]);
        if (s.obj == REF_NONE || t->b[s.obj].parent != REF_NONE)
            return fail(p, "alloc/free needs a root buffer");
        break;
    case REF_SEND:
    case REF_RECV: {
        s.obj = ref_name(t, w[2]);
        if (n < 6 || !kv(w, 3, 6, "from") || !kv(w, 3, 6, "to") || !kv(w, 3, 6, "tag") ||
            !number(kv(w, 3, 6, "from"), &s.from) || !number(kv(w, 3, 6, "to"), &s.to) ||
            !number(kv(w, 3, 6, "tag"), &s.count))
            return fail(p, "send/recv COMM from=R to=P tag=T");
        if (accesses(p, &s, w, 6, n) < 0)
            return -1;
        rest = 6 + s.n_acc;
        break;
    }
    default:
        return fail(p, "unhandled verb");
    }
    const char *by = kv(w, rest, n, "by");
    if (by) {
        s.by = ref_find_queue(t, by);
        if (s.by == REF_NONE || !t->q[s.by].host)
            return fail(p, "by= must name a host queue");
    }
    const char *label = kv(w, rest, n, "label");
    if (label)
        s.label = ref_name(t, label);
    if (s.label == REF_NONE && (s.kind == REF_OP))
        return fail(p, "name table full");
    if (!ref_push(t, &s))
        return fail(p, "more than %d statements", REF_MAX_STMTS);
    return 0;
}

int ref_parse(ref_trace *t, const char *name, const char *text, char *err, size_t cap)
{
    parser p = { t, name, 0, err, cap };
    ref_init(t);
    bool header = false;
    const char *c = text;
    while (*c) {
        const char *nl = strchr(c, '\n');
        size_t len = nl ? (size_t)(nl - c) : strlen(c);
        char line[512];
        p.line++;
        if (len >= sizeof line)
            return fail(&p, "line too long");
        memcpy(line, c, len);
        line[len] = '\0';
        c += len + (nl != NULL);
        char *w[MAX_WORDS];
        int n = split(line, w);
        if (n == 0)
            continue;
        if (!header) {
            if (n != 2 || strcmp(w[0], "syncsim-trace") != 0 || strcmp(w[1], "1") != 0)
                return fail(&p, "expected the header 'syncsim-trace 1'");
            header = true;
            continue;
        }
        if (strcmp(w[0], "meta") == 0 && ref_find_queue(t, "meta") == REF_NONE)
            continue;
        int r = declare(&p, w, n);
        if (r < 0)
            return -1;
        if (r == 1 && statement(&p, w, n) < 0)
            return -1;
    }
    if (!header)
        return fail(&p, "no header");
    /* Rule 2: with exactly one host queue, it submitted every stream statement. */
    uint16_t only = REF_NONE, hosts = 0;
    for (uint16_t i = 0; i < t->n_queues; i++)
        if (t->q[i].host) {
            only = i;
            hosts++;
        }
    for (uint16_t i = 0; i < t->n; i++)
        if (hosts == 1 && !t->q[t->s[i].queue].host && t->s[i].by == REF_NONE)
            t->s[i].by = only;
    return 0;
}

int ref_parse_file(ref_trace *t, const char *path, char *err, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: cannot open", path);
        return -1;
    }
    enum { CAP = 1 << 16 };
    char *text = malloc(CAP);
    if (!text) {
        fclose(f);
        snprintf(err, cap, "%s: out of memory", path);
        return -1;
    }
    size_t n = fread(text, 1, CAP - 1, f);
    fclose(f);
    text[n] = '\0';
    int rc = n == CAP - 1 ? (snprintf(err, cap, "%s: too long", path), -1)
                          : ref_parse(t, path, text, err, cap);
    free(text);
    return rc;
}
