/*
 * et.c -- the PyTorch execution trace (ET): which bytes each op
 * read and wrote, joined to a Kineto trace by record-function id.
 *
 * An ET is one JSON object, {"schema": "1.0.1", "pid": ..., "nodes": [...]};
 * the nodes are streamed. A node is an op: its "rf_id" (a top-level key in
 * schema 1.0.x, an entry of "attrs" in later ones) equals the Kineto
 * cpu_op's "Record function id" (or "External id" in older traces); its
 * "op_schema" marks the arguments it mutates with an alias annotation
 * ("aten::add_(Tensor(a!) self, ...)"); its "inputs" and "outputs" (arrays,
 * or objects with "values" in later schemas) hold tensors as
 * [tensor id, storage id, offset, numel, itemsize, device], alone or in
 * lists.
 *
 * The rule (issue 11): an op writes a tensor that is one of its outputs or
 * that its schema marks mutable (kept as rw: a mutating op reads too), and
 * reads its other tensor inputs. A tensor's bytes are [offset * itemsize,
 * (offset + numel) * itemsize) of its storage: contiguous. A strided view
 * spans more than numel elements; its range here is the contiguous one
 * (docs/importers.md says so). The result is a map rf_id -> tensors that
 * capture.c gives to the kernels and copies the op launched.
 *
 * An op is joined (cap_accesses_join) only to a capture op of its rf_id and
 * its name: rf_ids are small counters that an ET of another program shares
 * by coincidence, names are not. Only joined ops give byte ranges. A value
 * that its "types" entry calls a tensor, or that has a tensor's six fields,
 * but whose fields have the wrong types is counted in the ledger (bad-type):
 * its bytes would otherwise be lost without a word.
 */
#include "formats.h"

#include <stdlib.h>
#include <string.h>

typedef struct et_op {
    int64_t rf;
    uint64_t first;             /* into tensors */
    uint32_t n;
    bool joined;                /* an op of the capture of this rf_id and name */
    bool counted;               /* its node is counted in the ledger already */
    uint64_t name_hash;         /* of its "name" */
} et_op;

struct cap_accesses {
    et_op *ops;                 /* open-addressing table on rf (rf + 1; 0 = empty) */
    uint64_t cap_ops, n_ops, n_joined;
    cap_tensor *tensors;
    uint64_t n_tensors, cap_tensors;
    int64_t pid;                /* the top-level "pid"; CAP_NONE */
};

typedef struct et_parse {
    cap_accesses *a;
    capture *c;
    const char *path;
    bool have_schema;
    uint64_t n_nodes;
} et_parse;

/* FNV-1a of a name: ops are joined on rf_id and name. */
static uint64_t name_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t rf_slot(const cap_accesses *a, int64_t rf)
{
    uint64_t h = (uint64_t)rf * 0x9e3779b97f4a7c15ull;
    return (h ^ (h >> 29)) & (a->cap_ops - 1);
}

static et_op *op_of(const cap_accesses *a, int64_t rf)
{
    if (!a || !a->cap_ops)
        return NULL;
    for (uint64_t i = rf_slot(a, rf);; i = (i + 1) & (a->cap_ops - 1)) {
        et_op *o = &a->ops[i];
        if (o->rf == 0)
            return NULL;
        if (o->rf == rf + 1)
            return o;
    }
}

const cap_tensor *cap_accesses_of(const cap_accesses *a, int64_t rf, uint32_t *n)
{
    *n = 0;
    const et_op *o = op_of(a, rf);
    if (!o || !o->joined)
        return NULL;
    *n = o->n;
    return a->tensors + o->first;
}

bool cap_accesses_join(cap_accesses *a, int64_t rf, const char *name, size_t len)
{
    et_op *o = op_of(a, rf);
    if (!o || o->name_hash != name_hash(name, len))
        return false;
    if (!o->joined)
        a->n_joined++;
    o->joined = true;
    return true;
}

uint64_t cap_accesses_ops(const cap_accesses *a)
{
    return a ? a->n_ops : 0;
}

uint64_t cap_accesses_joined(const cap_accesses *a)
{
    return a ? a->n_joined : 0;
}

uint64_t cap_accesses_count_unjoined(cap_accesses *a, capture *c)
{
    uint64_t n = 0;
    for (uint64_t i = 0; a && i < a->cap_ops; i++) {
        et_op *o = &a->ops[i];
        if (!o->rf || o->joined || !o->n)
            continue;
        n++;
        if (!o->counted) {
            o->counted = true;
            capture_drop(c, CAP_DROP_UNJOINED_ET_OP, 1);
        }
    }
    return n;
}

int64_t cap_accesses_pid(const cap_accesses *a)
{
    return a ? a->pid : CAP_NONE;
}

static int ops_grow(cap_accesses *a)
{
    uint64_t ncap = a->cap_ops ? a->cap_ops * 2 : 1024;
    et_op *n = calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    et_op *old = a->ops;
    uint64_t ocap = a->cap_ops;
    a->ops = n;
    a->cap_ops = ncap;
    for (uint64_t i = 0; i < ocap; i++) {
        if (!old[i].rf)
            continue;
        uint64_t j = rf_slot(a, old[i].rf - 1);
        while (a->ops[j].rf)
            j = (j + 1) & (ncap - 1);
        a->ops[j] = old[i];
    }
    free(old);
    return 0;
}

/* Bit k set: schema argument k is mutated (an alias annotation with '!'). */
static uint64_t mutable_args(const json_val *schema)
{
    if (!schema || schema->type != JSON_STRING)
        return 0;
    const char *s = memchr(schema->s, '(', schema->len), *end = schema->s + schema->len;
    if (!s)
        return 0;
    uint64_t mask = 0;
    int arg = 0, depth = 0;
    bool bang = false, star_only = true;
    for (s++; s < end && arg < 64; s++) {
        char ch = *s;
        if ((ch == ',' || ch == ')') && depth == 0) {
            if (bang)
                mask |= 1ull << arg;
            if (!star_only)
                arg++;          /* the keyword-only marker "*" is no argument */
            bang = false;
            star_only = true;
            if (ch == ')')
                break;
            continue;
        }
        if (ch == '(' || ch == '[')
            depth++;
        else if ((ch == ')' || ch == ']') && depth > 0)
            depth--;
        else if (ch == '!')
            bang = true;
        if (ch != ' ' && ch != '*')
            star_only = false;
    }
    return mask;
}

/* A tensor value: [tensor id, storage id, offset, numel, itemsize, device].
 * *bad is set when v is one (its "types" entry says Tensor: typed; or it has
 * six fields, the last a device) whose fields have the wrong types
 * (CAP_DROP_BAD_TYPE) or values no tensor has: a negative offset, numel or
 * itemsize, a range past 2^62 (CAP_DROP_BAD_NUMBER): a tensor whose bytes are
 * lost. */
static bool tensor_of(const json_val *v, bool typed, cap_tensor *out, cap_drop *bad)
{
    *bad = CAP_DROP_COUNT;
    if (!v || v->type != JSON_ARRAY)
        return false;           /* a scalar: an undefined tensor, or no tensor */
    if (v->n_child < 6) {
        if (typed && v->n_child > 0)
            *bad = CAP_DROP_BAD_TYPE;
        return false;
    }
    const json_val *dev = v->child;
    for (int i = 0; i < 5; i++)
        dev = dev->next;
    bool looks = typed || (v->n_child == 6 && dev->type == JSON_STRING && dev->len >= 3 &&
                           (memcmp(dev->s, "cuda", dev->len < 4 ? dev->len : 4) == 0 ||
                            memcmp(dev->s, "cpu", 3) == 0));
    int64_t f[5];
    const json_val *c = v->child;
    for (int i = 0; i < 5; i++, c = c->next)
        if (c->type != JSON_NUMBER || !json_int(c, &f[i])) {
            if (looks)
                *bad = c->type == JSON_NUMBER ? CAP_DROP_BAD_NUMBER : CAP_DROP_BAD_TYPE;
            return false;
        }
    if (c->type != JSON_STRING) {
        if (looks)
            *bad = CAP_DROP_BAD_TYPE;
        return false;
    }
    if (f[2] < 0 || f[3] < 0 || f[4] < 0) {
        *bad = CAP_DROP_BAD_NUMBER;
        return false;
    }
    if (f[1] < 0 || f[3] == 0 || f[4] == 0)
        return false;           /* no storage, or nothing in it */
    uint64_t lo, hi, span;
    if (__builtin_mul_overflow((uint64_t)f[2], (uint64_t)f[4], &lo) ||
        __builtin_mul_overflow((uint64_t)f[3], (uint64_t)f[4], &span) ||
        __builtin_add_overflow(lo, span, &hi) || hi > (UINT64_C(1) << 62)) {
        *bad = CAP_DROP_BAD_NUMBER;
        return false;
    }
    int64_t device;
    if (c->len >= 4 && memcmp(c->s, "cuda", 4) == 0) {
        device = 0;
        if (c->len > 5 && c->s[4] == ':') {
            device = 0;
            for (size_t i = 5; i < c->len; i++) {
                if (c->s[i] < '0' || c->s[i] > '9' || device > 1000000)
                    return false;
                device = device * 10 + (c->s[i] - '0');
            }
        }
    } else if (c->len == 3 && memcmp(c->s, "cpu", 3) == 0) {
        device = -1;
    } else {
        return false;           /* meta, or a device syncsim does not model */
    }
    *out = (cap_tensor){ .storage = f[1], .tensor = f[0], .lo = lo, .hi = hi,
                         .device = device, .mode = 0 };
    return true;
}

/* Adds a tensor to the op being read (tensors[first..]), merging modes of
 * one byte range. */
static int add_tensor(cap_accesses *a, uint64_t first, const cap_tensor *t, uint8_t mode)
{
    for (uint64_t i = first; i < a->n_tensors; i++) {
        cap_tensor *o = &a->tensors[i];
        if (o->storage == t->storage && o->lo == t->lo && o->hi == t->hi) {
            o->mode |= mode;
            return 0;
        }
    }
    if (a->n_tensors == a->cap_tensors) {
        uint64_t cap = a->cap_tensors ? a->cap_tensors * 2 : 4096;
        cap_tensor *n = realloc(a->tensors, cap * sizeof *n);
        if (!n)
            return -1;
        a->tensors = n;
        a->cap_tensors = cap;
    }
    a->tensors[a->n_tensors] = *t;
    a->tensors[a->n_tensors++].mode = mode;
    return 0;
}

/* Whether a "types" entry says the value holds tensors ("Tensor(float)",
 * "GenericList[Tensor(float),Tensor(float)]"); false when not said. */
static bool typed_tensor(const json_val *type)
{
    return type && type->type == JSON_STRING && memmem(type->s, type->len, "Tensor(", 7);
}

/* The tensors of one value (a tensor, or a list of them); a tensor that is
 * malformed is counted (bad-type). */
static int add_value(et_parse *p, uint64_t first, const json_val *v, const json_val *type,
                     uint8_t mode)
{
    bool typed = typed_tensor(type);
    bool list = type && type->type == JSON_STRING && type->len > 11 &&
                memcmp(type->s, "GenericList", 11) == 0;
    cap_tensor t;
    cap_drop bad;
    if (!list) {
        if (tensor_of(v, typed, &t, &bad))
            return add_tensor(p->a, first, &t, mode);
        if (bad != CAP_DROP_COUNT)
            capture_drop(p->c, bad, 1);
        if (bad != CAP_DROP_COUNT || typed || !v || v->type != JSON_ARRAY)
            return 0;
        /* an untyped list: its tensors, if any (schemas without types) */
    }
    for (const json_val *c = v ? v->child : NULL; c; c = c->next) {
        if (tensor_of(c, typed, &t, &bad)) {
            if (add_tensor(p->a, first, &t, mode) != 0)
                return -1;
        } else if (bad != CAP_DROP_COUNT) {
            capture_drop(p->c, bad, 1);
        }
    }
    return 0;
}

/* The "types" list beside "inputs"/"outputs" (input_types, or "types" in
 * {"values", "types"} objects of later schemas). */
static const json_val *types_of(const json_val *node, const char *key)
{
    const json_val *v = json_get(node, key);
    if (v && v->type == JSON_OBJECT)
        v = json_get(v, "types");
    else
        v = json_get(node, strcmp(key, "inputs") == 0 ? "input_types" : "output_types");
    return v && v->type == JSON_ARRAY ? v : NULL;
}

/* The values of "inputs"/"outputs": an array, or {"values": [...]}. */
static const json_val *values_of(const json_val *node, const char *key)
{
    const json_val *v = json_get(node, key);
    if (v && v->type == JSON_OBJECT)
        v = json_get(v, "values");
    return v && v->type == JSON_ARRAY ? v : NULL;
}

/* A node attribute: a top-level key, or an entry of "attrs". */
static const json_val *attr_of(const json_val *node, const char *key)
{
    const json_val *v = json_get(node, key);
    if (v)
        return v;
    const json_val *attrs = json_get(node, "attrs");
    if (!attrs || attrs->type != JSON_ARRAY)
        return NULL;
    for (const json_val *c = attrs->child; c; c = c->next)
        if (json_is(json_get(c, "name"), key))
            return json_get(c, "value");
    return NULL;
}

static int et_member(void *ctx, const json_val *v, trace_error *err)
{
    et_parse *p = ctx;
    if (v->key_len == 3 && memcmp(v->key, "pid", 3) == 0) {
        if (!json_int(v, &p->a->pid))
            p->a->pid = CAP_NONE;
        return 0;
    }
    if (v->key_len != 6 || memcmp(v->key, "schema", 6) != 0)
        return 0;
    p->have_schema = true;
    if (v->type != JSON_STRING || v->len < 4 || v->s[0] != '1' || v->s[1] != '.' ||
        (v->s[2] != '0' && v->s[2] != '1') || v->s[3] != '.')
        return trace_error_set(err, TRACE_EVERSION,
                               "%s: execution trace schema \"%.*s\", this build reads 1.0.x and "
                               "1.1.x",
                               p->path, (int)(v->len > 40 ? 40 : v->len), v->s ? v->s : ""),
               -1;
    return 0;
}

/* One node: an event of the import ledger. An op with tensors waits for
 * the capture's join (joined: imported; else unjoined-et-op, counted by
 * cap_accesses_count_unjoined); a node without tensors holds no byte range
 * (ignored); a second node of an rf_id with tensors is a duplicate. */
static int et_node(void *ctx, const json_val *node, trace_error *err)
{
    et_parse *p = ctx;
    cap_accesses *a = p->a;
    capture_read(p->c);
    if (node->type != JSON_OBJECT)
        return capture_drop(p->c, CAP_DROP_BAD_TYPE, 1);
    p->n_nodes++;
    if (node->dup_key)
        return capture_drop(p->c, CAP_DROP_DUPLICATE_KEY, 1);
    int64_t rf;
    if (!json_int(attr_of(node, "rf_id"), &rf) || rf < 0 || rf == INT64_MAX) {
        capture_ignore(p->c);   /* no op a capture can name */
        return 0;
    }
    if ((a->n_ops + 1) * 4 > a->cap_ops * 3 && ops_grow(a) != 0)
        goto oom;
    uint64_t first = a->n_tensors;
    uint64_t mut = mutable_args(attr_of(node, "op_schema"));
    bool allocates = json_get(node, "name") && json_get(node, "name")->type == JSON_STRING &&
                     strncmp(json_get(node, "name")->s, "aten::empty", 11) == 0;
    const json_val *in = values_of(node, "inputs"), *out = values_of(node, "outputs");
    const json_val *in_t = types_of(node, "inputs"), *out_t = types_of(node, "outputs");
    if (!allocates) {           /* an allocation writes nothing */
        int k = 0;
        const json_val *ty = in_t ? in_t->child : NULL;
        for (const json_val *v = in ? in->child : NULL; v; v = v->next, k++) {
            if (add_value(p, first, v, ty, k < 64 && (mut >> k & 1) ? TRACE_RW : TRACE_R) != 0)
                goto oom;
            ty = ty ? ty->next : NULL;
        }
        ty = out_t ? out_t->child : NULL;
        for (const json_val *v = out ? out->child : NULL; v; v = v->next) {
            if (add_value(p, first, v, ty, TRACE_W) != 0)
                goto oom;
            ty = ty ? ty->next : NULL;
        }
    }
    uint32_t n_tensors = (uint32_t)(a->n_tensors - first);
    if (op_of(a, rf)) {         /* one op per rf_id: the first */
        a->n_tensors = first;
        if (n_tensors)
            return capture_drop(p->c, CAP_DROP_DUPLICATE, 1);
        capture_ignore(p->c);
        return 0;
    }
    const json_val *nm = json_get(node, "name");
    uint64_t i = rf_slot(a, rf);
    while (a->ops[i].rf)
        i = (i + 1) & (a->cap_ops - 1);
    a->ops[i] = (et_op){ rf + 1, first, n_tensors, false, capture_event_counted(p->c),
                         nm && nm->type == JSON_STRING ? name_hash(nm->s, nm->len)
                                                       : name_hash("", 0) };
    a->n_ops++;
    if (n_tensors)
        capture_use(p->c);      /* imported once joined */
    else
        capture_ignore(p->c);
    return 0;
oom:
    return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", p->path), -1;
}

cap_accesses *et_load(const char *path, capture *c, const trace_progress *progress,
                      trace_error *err)
{
    cap_accesses *a = calloc(1, sizeof *a);
    et_parse p = { .a = a, .c = c, .path = path };
    if (!a) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    a->pid = CAP_NONE;
    json_handler h = { "nodes", et_member, et_node, &p, progress };
    if (json_stream(path, &h, err) != 0)
        goto fail;
    if (!p.have_schema || !p.n_nodes) {
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: not a PyTorch execution trace (expected an object with \"schema\" "
                        "and \"nodes\")", path);
        goto fail;
    }
    return a;
fail:
    et_free(a);
    return NULL;
}

void et_free(cap_accesses *a)
{
    if (!a)
        return;
    free(a->ops);
    free(a->tensors);
    free(a);
}
