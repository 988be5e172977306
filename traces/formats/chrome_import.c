/*
 * chrome_import.c -- reads back syncsim's own Chrome trace (the format is
 * described at the top of chrome_export.c): the declarations from the
 * thread_name and syncsim_buffer metadata events, each statement from its
 * event's args, the run metadata and expectations from the members after
 * traceEvents. Flows, track names and findings are for viewers and are
 * skipped. Statements come in the order their events
 * are written in (seq order: one that is not is refused). A Chrome trace
 * written by another program is not this format
 * (a Kineto trace is read by kineto.c).
 */
#include "formats.h"

#include <stdlib.h>
#include <string.h>

typedef struct chrome_rd {
    trace *t;
    trace *body;
    const char *path;
    bool versioned;
    uint64_t next_seq;
} chrome_rd;

static int bad(chrome_rd *c, trace_error *err, const char *what)
{
    return trace_error_set(err, TRACE_ESYNTAX, "%s: statement %llu: %s", c->path,
                           (unsigned long long)c->next_seq, what),
           -1;
}

static uint32_t intern_json(trace *t, const json_val *v)
{
    return v && v->type == JSON_STRING ? trace_intern(t, v->s, v->len) : TRACE_NONE;
}

static uint32_t find_by(const trace *t, const json_val *v, bool queue)
{
    if (!v || v->type != JSON_STRING)
        return TRACE_NONE;
    return queue ? trace_find_queue(t, v->s, v->len) : trace_find_buffer(t, v->s, v->len);
}

static int chrome_member(void *ctx, const json_val *v, trace_error *err)
{
    chrome_rd *c = ctx;
    if (v->key_len == 7 && memcmp(v->key, "syncsim", 7) == 0) {
        if (!json_is(v, "chrome-trace 1"))
            return trace_error_set(err, TRACE_EVERSION,
                                   "%s: syncsim Chrome trace version %.*s, this build reads "
                                   "\"chrome-trace 1\"",
                                   c->path, (int)(v->len > 40 ? 40 : v->len), v->s ? v->s : "?"),
                   -1;
        c->versioned = true;
    } else if (v->key_len == 11 && memcmp(v->key, "syncsimMeta", 11) == 0 &&
               v->type == JSON_OBJECT) {
        for (const json_val *m = v->child; m; m = m->next) {
            if (m->type != JSON_STRING)
                continue;
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)m->key_len, m->key);
            if (trace_set_meta(c->t, key, m->s) != 0)
                return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", c->path), -1;
        }
    } else if (v->key_len == 14 && memcmp(v->key, "syncsimExpects", 14) == 0 &&
               v->type == JSON_ARRAY) {
        for (const json_val *e = v->child; e; e = e->next) {
            const json_val *kind = json_get(e, "kind"), *kv = json_get(e, "kv");
            int k = kind && kind->type == JSON_STRING ? trace_finding_parse(kind->s, kind->len)
                                                      : -1;
            int64_t line = 0;
            json_int(json_get(e, "line"), &line);
            if (k < 0 || !kv || kv->type != JSON_ARRAY || kv->n_child > 1024 || line < 0 ||
                line > UINT32_MAX)
                return trace_error_set(err, TRACE_ESYNTAX, "%s: syncsimExpects: a malformed "
                                       "expectation", c->path), -1;
            trace_attr pairs[1024];
            uint32_t n = 0;
            for (const json_val *p = kv->child; p; p = p->next) {
                if (p->type != JSON_ARRAY || p->n_child != 2)
                    return trace_error_set(err, TRACE_ESYNTAX, "%s: syncsimExpects: a "
                                           "malformed key/value", c->path), -1;
                pairs[n].key = intern_json(c->t, p->child);
                pairs[n].value = intern_json(c->t, p->child->next);
                if (pairs[n].key == TRACE_NONE || pairs[n].value == TRACE_NONE)
                    return trace_error_set(err, TRACE_ESYNTAX, "%s: syncsimExpects: a "
                                           "malformed key/value", c->path), -1;
                n++;
            }
            if (trace_add_expect(c->t, (trace_finding_kind)k, (uint32_t)line, pairs, n) != 0)
                return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", c->path), -1;
        }
    }
    return 0;
}

static int declare_queue(chrome_rd *c, const json_val *args, trace_error *err)
{
    const json_val *name = json_get(args, "name"), *decl = json_get(args, "syncsim");
    if (!decl)
        return 0;
    const json_val *kind = json_get(decl, "kind");
    bool host = json_is(kind, "host");
    if (!name || name->type != JSON_STRING || (!host && !json_is(kind, "stream")))
        return trace_error_set(err, TRACE_ESYNTAX, "%s: a malformed queue declaration",
                               c->path), -1;
    uint32_t n = intern_json(c->t, name);
    uint32_t dev = host ? TRACE_NONE : intern_json(c->t, json_get(decl, "device"));
    if (n == TRACE_NONE || (!host && dev == TRACE_NONE) ||
        trace_find_queue(c->t, name->s, name->len) != TRACE_NONE ||
        trace_add_queue(c->t, n, host ? TRACE_QUEUE_HOST : TRACE_QUEUE_STREAM, dev) == TRACE_NONE)
        return trace_error_set(err, TRACE_ESYNTAX, "%s: queue %.*s declared twice or malformed",
                               c->path, (int)(name->len > 80 ? 80 : name->len), name->s), -1;
    return 0;
}

static int declare_buffer(chrome_rd *c, const json_val *args, trace_error *err)
{
    const json_val *name = json_get(args, "name");
    int64_t size, offset = 0;
    if (!name || name->type != JSON_STRING || !json_int(json_get(args, "size"), &size) ||
        size < 1 || trace_find_buffer(c->t, name->s, name->len) != TRACE_NONE)
        goto malformed;
    uint32_t n = intern_json(c->t, name), b;
    if (n == TRACE_NONE)
        goto malformed;
    const json_val *parent = json_get(args, "parent");
    if (parent) {
        uint32_t p = find_by(c->t, parent, false);
        if (p == TRACE_NONE || !json_int(json_get(args, "offset"), &offset) || offset < 0 ||
            (uint64_t)offset > c->t->buffers[p].size ||
            (uint64_t)size > c->t->buffers[p].size - (uint64_t)offset)
            goto malformed;
        b = trace_add_view(c->t, n, p, (uint64_t)offset, (uint64_t)size);
    } else {
        const json_val *loc = json_get(args, "loc");
        trace_loc l = json_is(loc, "host")     ? TRACE_LOC_HOST
                      : json_is(loc, "device") ? TRACE_LOC_DEVICE
                                               : TRACE_LOC_UNSPECIFIED;
        uint32_t dev = l == TRACE_LOC_DEVICE ? intern_json(c->t, json_get(args, "device"))
                                             : TRACE_NONE;
        if (l == TRACE_LOC_DEVICE && dev == TRACE_NONE)
            goto malformed;
        const json_val *pinned = json_get(args, "pinned");
        b = trace_add_root_buffer(c->t, n, (uint64_t)size, l, dev,
                                  pinned && pinned->type == JSON_TRUE);
    }
    if (b == TRACE_NONE)
        goto malformed;
    return 0;
malformed:
    return trace_error_set(err, TRACE_ESYNTAX, "%s: a malformed buffer declaration", c->path), -1;
}

static int read_stmt(chrome_rd *c, const json_val *args, trace_error *err)
{
    trace *t = c->t;
    trace_stmt s;
    trace_stmt_init(&s);
    const json_val *kind = json_get(args, "kind");
    int k = kind && kind->type == JSON_STRING ? trace_kind_parse(kind->s, kind->len) : -1;
    int64_t seq;
    if (k < 0 || !json_int(json_get(args, "seq"), &seq))
        return bad(c, err, "no statement kind or seq");
    if ((uint64_t)seq != c->next_seq)
        return bad(c, err, "out of order: statements are written in seq order, from 0");
    c->next_seq++;
    s.seq = (uint64_t)seq;
    s.kind = (trace_kind)k;
    s.queue = find_by(t, json_get(args, "queue"), true);
    if (s.queue == TRACE_NONE)
        return bad(c, err, "an undeclared queue");
    const json_val *label = json_get(args, "label");
    if (label && (s.label = intern_json(t, label)) == TRACE_NONE)
        return bad(c, err, "a label that is not a string");
    const json_val *by = json_get(args, "by");
    if (by && (s.by = find_by(t, by, true)) == TRACE_NONE)
        return bad(c, err, "by= names an undeclared queue");
    int64_t v;
    if (json_get(args, "t") && json_int(json_get(args, "t"), &v))
        s.t = v;
    if (json_get(args, "dur") && json_int(json_get(args, "dur"), &v))
        s.dur = v;
    if (json_get(args, "count") && json_int(json_get(args, "count"), &v) && v >= 0)
        s.count = (uint64_t)v;
    if (json_get(args, "sem") && (s.kind == TRACE_SIGNAL || s.kind == TRACE_AWAIT))
        s.sem = json_get(args, "sem")->type == JSON_TRUE;
    if (json_get(args, "coll"))
        s.coll_kind = intern_json(t, json_get(args, "coll"));
    if (s.kind == TRACE_SEND || s.kind == TRACE_RECV) {
        int64_t rank, peer;
        if (!json_int(json_get(args, "rank"), &rank) || !json_int(json_get(args, "peer"), &peer) ||
            rank < 0 || peer < 0 || rank >= TRACE_NONE - 1 || peer >= TRACE_NONE - 1 ||
            s.count > UINT32_MAX)
            return bad(c, err, "a send or recv without its ranks or tag");
        s.rank = (uint32_t)rank;
        s.peer = (uint32_t)peer;
    }
    switch (s.kind) {
    case TRACE_SYNC: {
        const json_val *tg = json_get(args, "target");
        if (!tg || tg->type != JSON_STRING)
            return bad(c, err, "a sync without its target");
        if (json_is(tg, "all")) {
            s.sync_scope = TRACE_SYNC_ALL;
        } else if (tg->len > 7 && memcmp(tg->s, "device=", 7) == 0) {
            s.sync_scope = TRACE_SYNC_DEVICE;
            s.object = trace_intern(t, tg->s + 7, tg->len - 7);
        } else {
            s.sync_scope = TRACE_SYNC_QUEUE;
            s.object = find_by(t, tg, true);
        }
        if (s.sync_scope != TRACE_SYNC_ALL && s.object == TRACE_NONE)
            return bad(c, err, "a sync whose target is not declared");
        break;
    }
    case TRACE_ALLOC:
    case TRACE_FREE:
        if ((s.object = find_by(t, json_get(args, "object"), false)) == TRACE_NONE)
            return bad(c, err, "alloc/free of an undeclared buffer");
        break;
    case TRACE_OP:
    case TRACE_COPY:
        break;
    default:
        if ((s.object = intern_json(t, json_get(args, "object"))) == TRACE_NONE)
            return bad(c, err, "a statement without its object");
    }
    trace_access acc[256];
    trace_attr attr[256];
    const json_val *al = json_get(args, "access"), *tl = json_get(args, "attr");
    for (const json_val *a = al && al->type == JSON_ARRAY ? al->child : NULL; a; a = a->next) {
        const json_val *m = a->child;
        int64_t lo, hi, form;
        if (s.n_access == 256 || a->type != JSON_ARRAY || a->n_child != 5 || !m)
            return bad(c, err, "a malformed access");
        const json_val *buf = m->next;
        uint32_t b = find_by(t, buf, false);
        uint8_t mode = json_is(m, "r") ? TRACE_R : json_is(m, "w") ? TRACE_W
                       : json_is(m, "rw") ? TRACE_RW : 0;
        if (!mode || b == TRACE_NONE || !json_int(buf->next, &lo) ||
            !json_int(buf->next->next, &hi) || !json_int(buf->next->next->next, &form) ||
            lo < 0 || hi < lo || (uint64_t)hi > t->buffers[b].size || form < 0 || form > 2)
            return bad(c, err, "a malformed access");
        acc[s.n_access++] = (trace_access){ b, mode, (uint8_t)form, (uint64_t)lo, (uint64_t)hi };
    }
    if (s.kind == TRACE_COPY && s.n_access != 2)
        return bad(c, err, "a copy without its two accesses");
    for (const json_val *a = tl && tl->type == JSON_ARRAY ? tl->child : NULL; a; a = a->next) {
        if (s.n_attr == 256 || a->type != JSON_ARRAY || a->n_child != 2)
            return bad(c, err, "a malformed attribute");
        attr[s.n_attr].key = intern_json(t, a->child);
        attr[s.n_attr].value = intern_json(t, a->child->next);
        if (attr[s.n_attr].key == TRACE_NONE || attr[s.n_attr].value == TRACE_NONE)
            return bad(c, err, "a malformed attribute");
        s.n_attr++;
    }
    s.access = acc;
    s.attr = attr;
    if (trace_append(c->body, &s) != 0)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", c->path), -1;
    return 0;
}

static int chrome_event(void *ctx, const json_val *e, trace_error *err)
{
    chrome_rd *c = ctx;
    if (e->type != JSON_OBJECT)
        return 0;
    const json_val *ph = json_get(e, "ph"), *name = json_get(e, "name"),
                   *args = json_get(e, "args");
    if (json_is(ph, "M")) {
        if (json_is(name, "thread_name"))
            return declare_queue(c, args, err);
        if (json_is(name, "syncsim_buffer"))
            return declare_buffer(c, args, err);
        return 0;
    }
    if ((json_is(ph, "X") || json_is(ph, "i")) && !json_is(json_get(e, "cat"), "finding") &&
        json_get(args, "seq"))
        return read_stmt(c, args, err);
    return 0;
}

static bool chrome_sniff(const char *path, const unsigned char *head, size_t n)
{
    (void)path;
    char text[256];
    json_sniff_text(head, n, text, sizeof text);
    const char *p = text;
    if (*p++ != '{')
        return false;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return strncmp(p, "\"syncsim\"", 9) == 0;
}

static int chrome_open(trace_source *src, const char *path, const trace_source_opts *o,
                       trace_error *err)
{
    trace *t = trace_new(), *body = trace_new();
    chrome_rd c = { .t = t, .body = body, .path = path };
    if (!t || !body) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    json_handler h = { "traceEvents", chrome_member, chrome_event, &c, &o->progress };
    if (json_stream(path, &h, err) != 0)
        goto fail;
    if (!c.versioned) {
        trace_error_set(err, TRACE_ENOTTRACE, "%s: not a syncsim Chrome trace", path);
        goto fail;
    }
    if (capture_body_reader(&src->reader, t, body, path) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    return 0;
fail:
    trace_free(t);
    trace_free(body);
    return -1;
}

const trace_format trace_format_chrome = {
    "chrome", "a Chrome trace written by syncsim export --format chrome (read back exactly)",
    false, chrome_sniff, chrome_open,
};
