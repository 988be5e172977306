/*
 * graph_file.c -- the graph file format (docs/graph-format.md).
 *
 *   syncsim-graph 1
 *   leaf NAME DTYPE SHAPE [input] [output] [weight] [cache] [home=D] [backend=B]
 *   op   NAME OP SRC... [output] [backend=B] [param=N]
 *   view NAME VIEWOP SRC DTYPE SHAPE [offset=BYTES]
 *
 * One statement a line, `#` comments, blank lines ignored. SHAPE is
 * N[xN[xN[xN]]] with the row length first. Sources are names defined on
 * earlier lines; an op's shape is inferred from its sources. Every error
 * names the file, line and column and what was expected.
 */
#include "sched.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_TOKENS 16

typedef struct tok { const char *s; size_t len; unsigned col; } tok;

static int tokenize(char *line, tok *out)
{
    int n = 0;
    char *p = line;
    while (*p && n < MAX_TOKENS) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (!*p || *p == '#')
            break;
        out[n].s = p;
        out[n].col = (unsigned)(p - line) + 1;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '#')
            p++;
        out[n].len = (size_t)(p - out[n].s);
        n++;
        if (*p == '#')
            break;
        if (*p)
            *p++ = '\0';
    }
    if (n > 0)
        ((char *)out[n - 1].s)[out[n - 1].len] = '\0';
    return n;
}

static int parse_shape(const char *s, int64_t *ne)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        if (n == SCHED_MAX_DIMS || !isdigit((unsigned char)*p))
            return -1;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || v < 1)
            return -1;
        ne[n++] = v;
        p = end;
        if (*p == 'x')
            p++;
        else if (*p)
            return -1;
    }
    return n;
}

static bool key_value(const tok *t, const char *key, long long *out)
{
    size_t kl = strlen(key);
    if (t->len <= kl + 1 || strncmp(t->s, key, kl) != 0 || t->s[kl] != '=')
        return false;
    char *end;
    errno = 0;
    *out = strtoll(t->s + kl + 1, &end, 10);
    return !errno && *end == '\0' && *out >= 0;
}

#define FAIL(col, ...)                                                        \
    do {                                                                      \
        char _m[512];                                                         \
        snprintf(_m, sizeof _m, __VA_ARGS__);                                 \
        trace_error_set(err, TRACE_ESYNTAX, "%s:%u:%u: %s", name, line, (col), _m); \
        goto fail;                                                            \
    } while (0)

sched_graph *sched_graph_parse_string(const char *name, const char *text, trace_error *err)
{
    sched_graph *g = sched_graph_new(name);
    char *copy = strdup(text);
    if (!g || !copy) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto fail;
    }
    unsigned line = 0;
    bool header = false;
    char *save = NULL, *cur = copy;
    while (cur) {
        char *nl = strchr(cur, '\n');
        if (nl)
            *nl = '\0';
        char *ln = cur;
        cur = nl ? nl + 1 : NULL;
        line++;
        tok t[MAX_TOKENS];
        int n = tokenize(ln, t);
        if (n == 0)
            continue;
        if (!header) {
            if (n != 2 || strcmp(t[0].s, "syncsim-graph") != 0)
                FAIL(t[0].col, "expected the header 'syncsim-graph 1'");
            if (strcmp(t[1].s, "1") != 0)
                FAIL(t[1].col, "graph format version %s is not supported (this build reads 1)", t[1].s);
            header = true;
            continue;
        }
        if (n < 3)
            FAIL(t[0].col, "expected 'leaf', 'op' or 'view' followed by a name and more");
        if (strlen(t[1].s) >= SCHED_NAME_MAX)
            FAIL(t[1].col, "name longer than %d bytes", SCHED_NAME_MAX - 1);
        if (sched_graph_find(g, t[1].s) >= 0)
            FAIL(t[1].col, "'%s' is already defined", t[1].s);
        int32_t id = -1;
        int first_opt;
        if (strcmp(t[0].s, "leaf") == 0) {
            if (n < 4)
                FAIL(t[0].col, "expected: leaf NAME DTYPE SHAPE [flags]");
            int dt = sched_dtype_parse(t[2].s);
            if (dt < 0)
                FAIL(t[2].col, "unknown dtype '%s' (expected f32, f16, bf16 or i32)", t[2].s);
            int64_t ne[SCHED_MAX_DIMS];
            int nd = parse_shape(t[3].s, ne);
            if (nd < 1)
                FAIL(t[3].col, "expected a shape like 4096x32 (1 to 4 positive sizes), got '%s'", t[3].s);
            id = sched_graph_leaf(g, t[1].s, (sched_dtype)dt, nd, ne, 0);
            first_opt = 4;
        } else if (strcmp(t[0].s, "op") == 0) {
            int op = sched_op_parse(t[2].s);
            if (op < 0 || sched_op_is_view((sched_op)op)) {
                char ops[400] = "";
                for (int k = 1; k < SCHED_OP_COUNT; k++)
                    if (!sched_op_is_view((sched_op)k))
                        snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s",
                                 k > 1 ? ", " : "", sched_op_str((sched_op)k));
                FAIL(t[2].col, "unknown op '%s' (expected one of %s)", t[2].s, ops);
            }
            /* Exactly the op's sources (softmax: 1 or 2), then flags: so a
             * tensor may be named like a flag ("output"). */
            int32_t srcs[SCHED_MAX_SRC];
            int want = sched_op_n_src((sched_op)op);
            int min = want > 0 ? want : 1, max = want > 0 ? want : 2;
            int ns = 0, k = 3;
            for (; k < n && ns < max && !strchr(t[k].s, '='); k++) {
                int32_t src = sched_graph_find(g, t[k].s);
                if (src < 0 && ns >= min)
                    break;
                if (src < 0)
                    FAIL(t[k].col, "unknown source '%s' (sources must be defined before use)", t[k].s);
                srcs[ns++] = src;
            }
            if (ns < min)
                FAIL(t[2].col, "%s takes %s source%s, got %d", t[2].s,
                     want == 1 ? "1" : want == 2 ? "2" : want == 3 ? "3" : "1 or 2", want == 1 ? "" : "s", ns);
            id = sched_graph_op(g, t[1].s, (sched_op)op, srcs, ns);
            if (id < 0)
                FAIL(t[3].col, "the shapes of the sources do not fit %s", t[2].s);
            first_opt = k;
        } else if (strcmp(t[0].s, "view") == 0) {
            if (n < 6)
                FAIL(t[0].col, "expected: view NAME VIEWOP SRC DTYPE SHAPE [offset=BYTES]");
            int op = sched_op_parse(t[2].s);
            if (op < 0 || !sched_op_is_view((sched_op)op))
                FAIL(t[2].col, "unknown view op '%s' (expected view, reshape or permute)", t[2].s);
            int32_t src = sched_graph_find(g, t[3].s);
            if (src < 0)
                FAIL(t[3].col, "unknown source '%s'", t[3].s);
            int dt = sched_dtype_parse(t[4].s);
            if (dt < 0)
                FAIL(t[4].col, "unknown dtype '%s' (expected f32, f16, bf16 or i32)", t[4].s);
            int64_t ne[SCHED_MAX_DIMS];
            int nd = parse_shape(t[5].s, ne);
            if (nd < 1)
                FAIL(t[5].col, "expected a shape like 4096x32, got '%s'", t[5].s);
            long long offs = 0;
            first_opt = 6;
            if (n > 6 && key_value(&t[6], "offset", &offs))
                first_opt = 7;
            id = sched_graph_view(g, t[1].s, (sched_op)op, src, (sched_dtype)dt, nd, ne,
                                  (uint64_t)offs);
            if (id < 0)
                FAIL(t[5].col, "the view does not fit inside '%s'", t[3].s);
        } else {
            FAIL(t[0].col, "expected 'leaf', 'op' or 'view', got '%s'", t[0].s);
        }
        sched_tensor *tt = &g->tensors[id];
        for (int k = first_opt; k < n; k++) {
            long long v;
            if (strcmp(t[k].s, "input") == 0 && tt->op == SCHED_OP_NONE)
                tt->flags |= SCHED_FLAG_INPUT;
            else if (strcmp(t[k].s, "output") == 0)
                tt->flags |= SCHED_FLAG_OUTPUT;
            else if (strcmp(t[k].s, "weight") == 0 && tt->op == SCHED_OP_NONE)
                tt->flags |= SCHED_FLAG_WEIGHT;
            else if (strcmp(t[k].s, "cache") == 0 && tt->op == SCHED_OP_NONE)
                tt->flags |= SCHED_FLAG_CACHE;
            else if (key_value(&t[k], "home", &v) && v < 16)
                tt->home = (int)v;
            else if (key_value(&t[k], "backend", &v) && v < 16)
                tt->user_backend = (int)v;
            else if (key_value(&t[k], "param", &v))
                tt->param = (int32_t)v;
            else
                FAIL(t[k].col, "unexpected '%s' (expected input, output, weight, cache, home=D, "
                     "backend=B or param=N)", t[k].s);
        }
    }
    (void)save;
    if (!header) {
        trace_error_set(err, TRACE_ESYNTAX, "%s:1:1: expected the header 'syncsim-graph 1'", name);
        goto fail;
    }
    if (g->n_tensors == 0) {
        trace_error_set(err, TRACE_ESYNTAX, "%s:%u:1: the graph has no tensors", name, line);
        goto fail;
    }
    free(copy);
    return g;
fail:
    free(copy);
    sched_graph_free(g);
    return NULL;
}

sched_graph *sched_graph_parse_file(const char *path, trace_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        trace_error_set(err, TRACE_EIO, "%s: is a directory, not a graph file", path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        trace_error_set(err, TRACE_EIO, "%s: cannot open the graph file (%s)", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[8192];
    size_t got;
    while (mem && (got = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, got, mem);
    fclose(f);
    if (!mem) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        return NULL;
    }
    fclose(mem);
    if (memchr(text, '\0', len)) {
        free(text);
        trace_error_set(err, TRACE_ESYNTAX, "%s:1:1: not a text graph file (NUL byte)", path);
        return NULL;
    }
    sched_graph *g = sched_graph_parse_string(path, text, err);
    free(text);
    return g;
}

int sched_graph_write(FILE *out, const sched_graph *g)
{
    fprintf(out, "syncsim-graph 1\n");
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (t->flags & SCHED_FLAG_COPY)
            continue;
        char shape[64] = "";
        for (int d = 0; d < t->n_dims; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "x" : "",
                     (long long)t->ne[d]);
        if (t->op == SCHED_OP_NONE) {
            fprintf(out, "leaf %s %s %s", t->name, sched_dtype_str(t->type), shape);
            if (t->flags & SCHED_FLAG_INPUT) fprintf(out, " input");
            if (t->flags & SCHED_FLAG_WEIGHT) fprintf(out, " weight");
            if (t->flags & SCHED_FLAG_CACHE) fprintf(out, " cache");
            if (t->home >= 0) fprintf(out, " home=%d", t->home);
        } else if (sched_op_is_view(t->op)) {
            /* Offsets are relative to the source named. */
            uint64_t base = g->tensors[t->src[0]].view_src >= 0 ? g->tensors[t->src[0]].view_offs : 0;
            fprintf(out, "view %s %s %s %s %s", t->name, sched_op_str(t->op),
                    g->tensors[t->src[0]].name, sched_dtype_str(t->type), shape);
            if (t->view_offs - base)
                fprintf(out, " offset=%llu", (unsigned long long)(t->view_offs - base));
        } else {
            fprintf(out, "op %s %s", t->name, sched_op_str(t->op));
            for (int k = 0; k < SCHED_MAX_SRC; k++)
                if (t->src[k] >= 0)
                    fprintf(out, " %s", g->tensors[t->src[k]].name);
            if (t->param)
                fprintf(out, " param=%d", t->param);
        }
        if (t->flags & SCHED_FLAG_OUTPUT) fprintf(out, " output");
        if (t->user_backend >= 0) fprintf(out, " backend=%d", t->user_backend);
        fprintf(out, "\n");
    }
    return ferror(out) ? -1 : 0;
}
