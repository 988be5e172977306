/*
 * twin.c -- a script through the twin, as the call log the harness writes.
 *
 * The twin is sched/ under a ggml-* policy (docs/scheduler.md). It runs on
 * recording test backends of the machine the harness gives ggml: GPUs of
 * the script's family, a synchronous CPU. Each call the twin makes on them
 * becomes one line of the comparison's vocabulary, the harness's own
 * (harness/syncsim_ggml.c writes ggml's side):
 *
 *   sync B                          a backend synchronize
 *   record B D.c                    backend B records the event of (D, slot c)
 *   wait B D.c                      B's stream waits for it
 *   evsync D.c                      the host waits for it (event_synchronize, or
 *                                   a sycl event_wait: it blocks the host)
 *   copy async|sync ROOT[lo:hi] -> B.c   a split input's copy: the bytes of ROOT
 *                                   (the tensor a view names) into backend B's
 *                                   copy of slot c (NAME@B.c for copies)
 *   setasync ROOT[lo:hi] -> B.c     an expert range of a MoE weight
 *   getasync B ROOT[lo:hi] | get ROOT[lo:hi]   a read-back (the MoE ids)
 *   compute B FIRST n=K             a split's launch: its first op, K ops
 *   eval E                          the evaluation the lines after belong to
 *
 * Named difference, left out of both: waits for (and synchronizes on)
 * events never recorded -- the first evaluations' slots -- which ggml
 * makes and the twin does not (CUDA treats them as complete; the checker
 * would report a wait on an unrecorded event). The harness counts them.
 *
 * The driver's own calls (the user's inputs and outputs) are no
 * scheduler's and are in neither log.
 */
#include "rggml.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 9
#define BE_MAX 80

typedef struct twin_run twin_run;

typedef struct tctx {
    char name[16];
    bool cpu;
    twin_run *run;
} tctx;

typedef struct tevent { char backend[16]; int slot; bool internal; } tevent;

struct twin_run {
    const rggml_script *script;
    rggml_calls *out;
    tctx ctx[MAX_DEV];
    sched_backend be[MAX_DEV];
    sched_backend *ptr[MAX_DEV];
    const sched_graph *graph;       /* the graph being run */
    const sched_tensor *ids;        /* an ids input (MoE): their values */
    int eval;
    bool failed;
};

static void logf_(twin_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(twin_run *r, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (rggml_calls_add(r->out, line) != 0)
        r->failed = true;
}

static tctx *ctx_of(sched_backend *b) { return b->ctx; }
static const char *t_name(sched_backend *b) { return ctx_of(b)->name; }
static sched_device_kind t_kind(sched_backend *b)
{
    return ctx_of(b)->cpu ? SCHED_DEVICE_CPU : SCHED_DEVICE_GPU;
}
static bool t_supports_op(sched_backend *b, const sched_graph *g, const sched_tensor *t)
{
    (void)g;
    const char *fb = ctx_of(b)->run->script->cfg.fallback;
    return ctx_of(b)->cpu || !fb || strcmp(fb, sched_op_str(t->op)) != 0;
}
static bool t_supports_buffer(sched_backend *b, const sched_buffer *buf) { return buf->backend == b; }
static sched_buffer *t_alloc(sched_backend *b, const char *name, uint64_t size, sched_buffer_usage u)
{
    sched_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return NULL;
    buf->backend = b;
    buf->size = size;
    buf->usage = u;
    buf->host = ctx_of(b)->cpu;
    snprintf(buf->name, sizeof buf->name, "%s", name);
    return buf;
}
static void t_free(sched_backend *b, sched_buffer *buf) { (void)b, free(buf); }

/* NAME@B.c for a twin copy "NAME#B#c" (the name ggml's copies get there). */
static void t_norm(char *buf, size_t cap)
{
    char *a = strchr(buf, '#'), *b = a ? strchr(a + 1, '#') : NULL, *br = strchr(buf, '[');
    if (!a || !b || (br && br < b))
        return;
    char out[256];
    snprintf(out, sizeof out, "%.*s@%.*s.%s", (int)(a - buf), buf, (int)(b - a - 1), a + 1, b + 1);
    snprintf(buf, cap, "%.150s", out);
}

/* ROOT[lo:hi] of a twin tensor: a graph tensor (a view names its root),
 * or a MoE range "W[off]". */
static void t_range(const twin_run *r, const sched_tensor *t, char *buf, size_t cap)
{
    const sched_graph *g = r->graph;
    uint64_t n = sched_tensor_nbytes(t);
    if (t >= g->tensors && t < g->tensors + g->n_tensors) {
        const sched_tensor *root = t->view_src >= 0 ? &g->tensors[t->view_src] : t;
        uint64_t lo = t->view_src >= 0 ? t->view_offs : 0;
        snprintf(buf, cap, "%s[%llu:%llu]", root->name, (unsigned long long)lo,
                 (unsigned long long)(lo + n));
        t_norm(buf, cap);
        return;
    }
    const char *br = strrchr(t->name, '[');
    unsigned long long off = br ? strtoull(br + 1, NULL, 10) : 0;
    snprintf(buf, cap, "%.*s[%llu:%llu]", br ? (int)(br - t->name) : (int)strlen(t->name), t->name,
             off, off + (unsigned long long)n);
    t_norm(buf, cap);
}

/* B.c of a twin copy tensor (or of a MoE range of one: "W#B#c[off]"). */
static void t_dest(const twin_run *r, const sched_tensor *t, char *buf, size_t cap)
{
    const sched_graph *g = r->graph;
    if (t >= g->tensors && t < g->tensors + g->n_tensors && (t->flags & SCHED_FLAG_COPY)) {
        snprintf(buf, cap, "%s.%d", r->ctx[t->backend].name, t->copy_slot);
        return;
    }
    const char *a = strchr(t->name, '#'), *b = a ? strchr(a + 1, '#') : NULL;
    if (a && b)
        snprintf(buf, cap, "%.*s.%d", (int)(b - a - 1), a + 1, atoi(b + 1));
    else
        snprintf(buf, cap, "?%.40s", t->name);
}

static int t_copy(twin_run *r, const char *mode, const sched_tensor *src, const sched_tensor *dst)
{
    char range[160], dest[BE_MAX];
    t_range(r, src, range, sizeof range);
    if (!(dst->flags & SCHED_FLAG_COPY) && !strchr(dst->name, '#')) {
        logf_(r, "get %s", range);     /* a read-back into the host (the MoE ids) */
        return 0;
    }
    t_dest(r, dst, dest, sizeof dest);
    logf_(r, "copy %s %s -> %s", mode, range, dest);
    return 0;
}

static int t_set_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    twin_run *r = ctx_of(b)->run;
    /* A graph tensor (a user input) is a copy, as ggml's cpy_tensor_async. */
    if (src >= r->graph->tensors && src < r->graph->tensors + r->graph->n_tensors)
        return t_copy(r, "async", src, dst);
    char range[160], dest[BE_MAX];
    t_range(r, src, range, sizeof range);
    t_dest(r, dst, dest, sizeof dest);
    logf_(r, "setasync %s -> %s", range, dest);
    return 0;
}
static int t_get_async(sched_backend *b, sched_tensor *src, sched_tensor *dst)
{
    (void)dst;
    char range[160];
    t_range(ctx_of(b)->run, src, range, sizeof range);
    logf_(ctx_of(b)->run, "getasync %s %s", t_name(b), range);
    return 0;
}
static int t_copy_async(sched_backend *b, sched_backend *o, sched_tensor *s, sched_tensor *d)
{
    (void)o;
    t_copy(ctx_of(b)->run, "async", s, d);
    return 1;
}
static int t_copy_sync(sched_backend *b, sched_tensor *s, sched_tensor *d)
{
    return t_copy(ctx_of(b)->run, "sync", s, d);
}
static int t_sync(sched_backend *b)
{
    logf_(ctx_of(b)->run, "sync %s", t_name(b));
    return 0;
}
static int t_compute(sched_backend *b, const sched_exec *x)
{
    int k = 0;
    const char *first = "-";
    for (int i = 0; i < x->n_nodes; i++) {
        const sched_tensor *t = &x->graph->tensors[x->nodes[i]];
        if (sched_op_is_view(t->op) || t->op == SCHED_OP_NONE)
            continue;
        if (k++ == 0)
            first = t->name;
    }
    logf_(ctx_of(b)->run, "compute %s %s n=%d", t_name(b), first, k);
    return 0;
}
/* Slot events are "NAME.ev.B.c"; the hand-over events of a copy between
 * devices ("NAME.xfer.A>B") are inside ggml-cuda's cpy_tensor_async. */
static sched_event *t_event_new(sched_backend *b, const char *name)
{
    sched_event *ev = calloc(1, sizeof *ev);
    tevent *te = calloc(1, sizeof *te);
    if (!ev || !te) {
        free(ev);
        free(te);
        return NULL;
    }
    ev->backend = b;
    ev->ctx = te;
    snprintf(te->backend, sizeof te->backend, "%s", t_name(b));
    const char *dot = strrchr(name, '.');
    te->internal = strstr(name, ".xfer.") != NULL;
    te->slot = dot ? atoi(dot + 1) : 0;
    return ev;
}
static void t_event_free(sched_backend *b, sched_event *ev)
{
    (void)b;
    free(ev->ctx);
    free(ev);
}
static int t_record(sched_backend *b, sched_event *ev)
{
    tevent *te = ev->ctx;
    ev->n_records++;
    if (!te->internal)
        logf_(ctx_of(b)->run, "record %s %s.%d", t_name(b), te->backend, te->slot);
    return 0;
}
static int t_wait(sched_backend *b, sched_event *ev)
{
    tevent *te = ev->ctx;
    if (!te->internal)
        logf_(ctx_of(b)->run, "wait %s %s.%d", t_name(b), te->backend, te->slot);
    return 0;
}
static int t_evsync(sched_backend *b, sched_event *ev)
{
    tevent *te = ev->ctx;
    logf_(ctx_of(b)->run, "evsync %s.%d", te->backend, te->slot);
    return 0;
}

static const sched_backend_iface t_gpu_iface = {
    .get_name = t_name, .device_kind = t_kind, .supports_op = t_supports_op,
    .supports_buffer = t_supports_buffer, .buffer_alloc = t_alloc, .buffer_free = t_free,
    .set_async = t_set_async, .get_async = t_get_async, .copy_async = t_copy_async,
    .copy_sync = t_copy_sync, .synchronize = t_sync, .graph_compute = t_compute,
    .event_new = t_event_new, .event_free = t_event_free, .event_record = t_record,
    .event_wait = t_wait, .event_synchronize = t_evsync,
};

static const sched_backend_iface t_cpu_iface = {
    .get_name = t_name, .device_kind = t_kind, .supports_op = t_supports_op,
    .supports_buffer = t_supports_buffer, .buffer_alloc = t_alloc, .buffer_free = t_free,
    .copy_sync = t_copy_sync, .graph_compute = t_compute,
};

/* The ids the host reads back: the script's, for this evaluation. */
static int t_read_ids(void *c, const sched_tensor *t, int32_t *out, int64_t n)
{
    (void)t;
    twin_run *r = c;
    if (!r->ids)
        return -1;
    for (int64_t i = 0; i < n; i++)
        out[i] = rggml_input_value(r->script, r->ids, r->eval, i);
    return 0;
}

/* "place B NAME OFFSET SIZE" of every tensor the twin's allocator placed
 * in an arena, as the harness lists ggml-alloc's: by backend, then name. */
typedef struct place_line { int backend; char name[SCHED_NAME_MAX + 24]; uint64_t off, size; } place_line;

static int place_cmp(const void *a, const void *b)
{
    const place_line *x = a, *y = b;
    if (x->backend != y->backend)
        return x->backend < y->backend ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void log_places(twin_run *r, const sched *x, const sched_graph *g)
{
    int slots = sched_n_copies(x), cur = sched_cur_copy(x);
    place_line *p = calloc((size_t)g->n_tensors * (size_t)slots + 1, sizeof *p);
    if (!p) {
        r->failed = true;
        return;
    }
    int n = 0;
    /* the user inputs' other slots, named as ggml names its copies there */
    for (int32_t i = 0; i < g->n_tensors; i++)
        for (int c = 0; c < slots; c++) {
            uint64_t off = sched_input_slot_offset(x, i, c);
            if (off == UINT64_MAX || c == cur)
                continue;
            p[n].backend = g->tensors[i].backend;
            snprintf(p[n].name, sizeof p[n].name, "%s@%s.%d", g->tensors[i].name,
                     r->ctx[g->tensors[i].backend].name, c);
            p[n].off = off;
            p[n].size = sched_tensor_nbytes(&g->tensors[i]);
            n++;
        }
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const sched_tensor *t = &g->tensors[i];
        if (!t->buffer || t->buffer->usage != SCHED_BUFFER_COMPUTE || t->view_src >= 0 ||
            sched_op_is_view(t->op))
            continue;
        p[n].backend = t->backend;
        snprintf(p[n].name, sizeof p[n].name, "%s", t->name);
        t_norm(p[n].name, sizeof p[n].name);
        p[n].off = t->offset;
        p[n].size = sched_tensor_nbytes(t);
        n++;
    }
    qsort(p, (size_t)n, sizeof *p, place_cmp);
    for (int i = 0; i < n; i++)
        logf_(r, "place %s %s %llu %llu", r->ctx[p[i].backend].name, p[i].name,
              (unsigned long long)p[i].off, (unsigned long long)p[i].size);
    free(p);
}

static uint32_t null_view(void *c, const char *n, uint32_t p, uint64_t o, uint64_t s)
{
    (void)c, (void)n, (void)p, (void)o, (void)s;
    return 0;
}
static const sched_sink_iface null_sink_iface = { .view = null_view };

int rggml_twin(const rggml_script *s, const char *policy, rggml_calls *out, trace_error *err)
{
    const sched_policy *pol = sched_policy_find(policy);
    if (!pol) {
        trace_error_set(err, TRACE_EUSAGE, "twin policy '%s': unknown (expected %s)", policy,
                        sched_policy_names());
        return -1;
    }
    twin_run *r = calloc(1, sizeof *r);
    sched_graph *g[2] = { NULL, NULL };
    sched *ts[2] = { NULL, NULL };
    sched_weights *w = NULL;
    int rc = -1;
    if (!r)
        goto oom;
    memset(out, 0, sizeof *out);
    r->script = s;
    r->out = out;
    const rggml_config *c = &s->cfg;
    int nb = c->n_gpus + 1;
    for (int i = 0; i < nb; i++) {
        tctx *x = &r->ctx[i];
        x->cpu = i == c->n_gpus;
        x->run = r;
        snprintf(x->name, sizeof x->name, x->cpu ? "CPU" : "GPU%d", i);
        r->be[i] = (sched_backend){ x->cpu ? &t_cpu_iface : &t_gpu_iface, x, NULL };
        r->ptr[i] = &r->be[i];
    }
    for (int k = 0; k < 2; k++)
        if (s->graph[k] && !(g[k] = sched_graph_copy(s->graph[k])))
            goto oom;
    for (int32_t i = 0; i < g[1]->n_tensors && !r->ids; i++)
        if ((g[1]->tensors[i].flags & SCHED_FLAG_INPUT) && strstr(g[1]->tensors[i].name, "ffn_ids"))
            r->ids = &s->graph[1]->tensors[i];
    sched_sink sink = { &null_sink_iface, NULL };
    if (!(w = sched_weights_new(r->ptr, nb, g[1], &sink)))
        goto oom;
    const sched_copy_traits *traits[MAX_DEV + 1] = { 0 };
    for (int i = 0; i < nb; i++)
        traits[i] = sched_copy_family(i + 1 < nb ? (c->family ? c->family : "cuda") : "cpu");
    for (int k = 0; k < 2; k++) {
        if (!g[k])
            continue;
        if (sched_weights_bind(w, g[k]) != 0) {
            trace_error_set(err, TRACE_EUSAGE, "twin: a weight of the %s graph is not in the decode "
                            "graph", k ? "decode" : "prompt");
            goto done;
        }
        sched_options so = { .policy = pol, .n_copies = c->copies, .copy_traits = traits,
                             .sink = &sink, .name = k ? "d" : "p", .read_ids = t_read_ids,
                             .read_ids_ctx = r, .share = k == 1 ? ts[0] : NULL };
        char e[256];
        if (!(ts[k] = sched_new(r->ptr, nb, &so)))
            goto oom;
        if (sched_plan(ts[k], g[k], e, sizeof e) != SCHED_OK) {
            trace_error_set(err, TRACE_EUSAGE, "twin: %s", e);
            goto done;
        }
    }
    int cur = -1;
    sched_status st = SCHED_OK;
    for (int i = 0; i < s->n_steps && st == SCHED_OK && !r->failed; i++) {
        const rggml_step *sp = &s->steps[i];
        sched *x = cur >= 0 ? ts[cur] : NULL;
        if (!x && sp->kind != RGGML_EVAL && sp->kind != RGGML_BUILD && sp->kind != RGGML_RESET) {
            trace_error_set(err, TRACE_EUSAGE, "twin: step %d needs a graph built first", i);
            goto done;
        }
        switch (sp->kind) {
        case RGGML_EVAL:
            r->eval = sp->arg;
            logf_(r, "eval %d", sp->arg);
            break;
        case RGGML_BUILD:
            if (sp->arg != cur) {
                if (cur >= 0)
                    sched_handover(ts[sp->arg], ts[cur]);
                cur = sp->arg;
                r->graph = g[cur];
            }
            break;
        case RGGML_RESET:
            if (x)
                sched_reset(x);
            break;
        case RGGML_ALLOC:
            /* placements where the twin laid the graph out (compared) */
            if ((st = sched_alloc_graph(x)) == SCHED_OK && sched_alloc_reserved(x))
                log_places(r, x, g[cur]);
            break;
        case RGGML_COMPUTE:
            st = sched_graph_compute(x, (uint64_t)r->eval);
            break;
        case RGGML_COMPUTE_SYNC:
            if ((st = sched_graph_compute(x, (uint64_t)r->eval)) == SCHED_OK)
                st = sched_synchronize(x);
            break;
        case RGGML_SYNC:
            st = sched_synchronize(x);
            break;
        case RGGML_SET_INPUTS:
        case RGGML_OUTPUT:
        case RGGML_READ_OUTPUT:
            break;              /* the driver's own: in neither log */
        }
    }
    if (r->failed)
        goto oom;
    if (st != SCHED_OK) {
        trace_error_set(err, TRACE_EUSAGE, "twin: %s", sched_status_str(st));
        goto done;
    }
    rc = 0;
    goto done;
oom:
    trace_error_set(err, TRACE_ENOMEM, "out of memory");
done:
    sched_free(ts[1]);
    sched_free(ts[0]);
    sched_weights_free(w);
    sched_graph_free(g[0]);
    sched_graph_free(g[1]);
    free(r);
    if (rc != 0)
        rggml_calls_free(out);
    return rc;
}

/* The lines of evaluation block k: [*lo, *hi) of c, from position *at. */
static bool next_block(const rggml_calls *c, int *at, int *lo, int *hi, int *eval)
{
    if (*at >= c->n)
        return false;
    *eval = -1;
    if (strncmp(c->line[*at], "eval ", 5) == 0)
        *eval = atoi(c->line[(*at)++] + 5);
    *lo = *at;
    while (*at < c->n && strncmp(c->line[*at], "eval ", 5) != 0)
        (*at)++;
    *hi = *at;
    return true;
}

static bool is_place(const char *l) { return strncmp(l, "place ", 6) == 0; }

/* The k-th line of [lo, hi) that is (or is not) a place line; NULL past the end. */
static const char *nth(const rggml_calls *c, int lo, int hi, int k, bool place)
{
    for (int i = lo; i < hi; i++)
        if (is_place(c->line[i]) == place && k-- == 0)
            return c->line[i];
    return NULL;
}

static void print_block(FILE *out, const rggml_calls *a, int alo, int ahi, const rggml_calls *b,
                        int blo, int bhi, int first, bool place)
{
    fprintf(out, "  %-58s | %s\n", "ggml", "twin");
    for (int i = 0;; i++) {
        const char *x = nth(a, alo, ahi, i, place), *y = nth(b, blo, bhi, i, place);
        if (!x && !y)
            break;
        fprintf(out, "%c %-58s | %s\n", i == first ? '>' : ' ', x ? x : "", y ? y : "");
    }
}

void rggml_compare(const rggml_calls *a, const rggml_calls *b, rggml_diff *d, FILE *print)
{
    memset(d, 0, sizeof *d);
    d->same = d->alloc_same = true;
    d->eval = -1;
    int at = 0, bt = 0, alo = 0, ahi = 0, blo = 0, bhi = 0, ae = 0, be = 0;
    while (true) {
        bool ha = next_block(a, &at, &alo, &ahi, &ae), hb = next_block(b, &bt, &blo, &bhi, &be);
        if (!ha && !hb)
            break;
        if (ha != hb || ae != be) {
            if (d->same) {
                d->same = false;
                d->eval = ha ? ae : be;
                snprintf(d->what, sizeof d->what, "evaluation %d is in %s only", d->eval,
                         ha ? "ggml's calls" : "the twin's calls");
            }
            break;
        }
        for (int pass = 0; pass < 2; pass++) {
            bool place = pass == 1;
            bool *same = place ? &d->alloc_same : &d->same;
            /* placements only where the twin laid the graph out anew: ggml
             * lists its offsets at every allocation, which are another
             * graph's layout when the graph fits the one reserved before */
            if (place && !nth(b, blo, bhi, 0, true))
                continue;
            for (int i = 0;; i++) {
                const char *x = ha ? nth(a, alo, ahi, i, place) : NULL;
                const char *y = hb ? nth(b, blo, bhi, i, place) : NULL;
                if (!x && !y)
                    break;
                if (x)
                    (*(place ? &d->places : &d->calls))++;
                if (*same && (!x || !y || strcmp(x, y) != 0)) {
                    *same = false;
                    if (!place)
                        d->eval = ae;
                    snprintf(place ? d->alloc_what : d->what, sizeof d->what,
                             "evaluation %d, %s %d: ggml '%.200s', twin '%.200s'", ae,
                             place ? "placement" : "call", i, x ? x : "(none)", y ? y : "(none)");
                    if (print) {
                        fprintf(print, "DIFFERENCE in evaluation %d at %s %d\n", ae,
                                place ? "placement" : "call", i);
                        print_block(print, a, alo, ahi, b, blo, bhi, i, place);
                    }
                }
            }
        }
    }
}
