/*
 * pattern.c -- the sync pattern of a trace: what each host thread did, per
 * iteration, as one letter per call. One alphabet for every command that
 * prints a pattern (run, minimize, report):
 *
 *   s  the host blocks: a host `sync`, `wait` (an event synchronize),
 *      `await` or `barrier`
 *   c  a blocking copy: a `copy` the host performs itself
 *   a  an asynchronous copy the host submits to a stream
 *   g  a graph launch: the ops and collectives a host submits back to back
 *      to one stream are one g (ggml launches a split's graph at once)
 *   r  an event record the host submits
 *   w  a device-side wait the host submits: a stream `wait`, `await` or
 *      `barrier` (the host does not block)
 *   |  a new split begins (statements carry split=)
 *
 * So ggml's synchronous scheduler reads `sassassasg`, its relaxed one
 * `saaasg`, and its event-based one `waaag r`-like sequences: the host
 * never blocks inside an evaluation.
 *
 * Iterations: a statement carrying token= or iter= starts (or continues)
 * that iteration for its host (the host that executes it, or the host that
 * submitted it); statements without one follow their host's latest. Calls
 * before a host's first iteration are not part of any pattern.
 *
 * A pattern has two strings: `before` (every statement) and `after` (only
 * those fed with keep = true), so that the minimiser shows what removing
 * synchronisations does to it.
 */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

const char trace_pattern_legend[] =
    "s = the host blocks (sync, event wait, await, barrier), c = blocking copy by the host, "
    "a = async copy, g = graph launch (ops queued back to back on one stream), r = event "
    "record, w = device-side wait, | = next split";

typedef struct letters {
    char *s;
    size_t n, cap;
    uint32_t g_queue;           /* stream of a trailing g, else TRACE_NONE */
    uint32_t split;             /* split= value string id of the last letter */
} letters;

typedef struct pattern_iter {
    uint32_t host;
    char *iter;                 /* the iteration value (copied) */
    letters before, after;
} pattern_iter;

/* Per host queue: its current iteration (index into iters) and value. */
typedef struct host_state {
    uint32_t iter_value;        /* string id, TRACE_NONE before the first */
    size_t iter;                /* index into iters */
} host_state;

struct trace_pattern {
    pattern_iter *iters;
    size_t n, cap;
    host_state *hosts;
    uint32_t n_hosts;
    const trace *t;             /* whose string ids k_token... belong to */
    uint32_t k_token, k_iter, k_split;
};

trace_pattern *trace_pattern_new(void)
{
    return calloc(1, sizeof(trace_pattern));
}

void trace_pattern_free(trace_pattern *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->iters[i].iter);
        free(p->iters[i].before.s);
        free(p->iters[i].after.s);
    }
    free(p->iters);
    free(p->hosts);
    free(p);
}

/* The letter of s and the host it belongs to; 0 when s makes none. */
static char letter_of(const trace *t, const trace_stmt *s, uint32_t *host)
{
    if (t->queues[s->queue].kind == TRACE_QUEUE_HOST) {
        *host = s->queue;
        switch (s->kind) {
        case TRACE_SYNC:
        case TRACE_WAIT:
        case TRACE_AWAIT:
        case TRACE_BARRIER:
            return 's';
        case TRACE_COPY:
            return 'c';
        default:
            return 0;
        }
    }
    *host = trace_submitter(t, s);
    if (*host == TRACE_NONE)
        return 0;
    switch (s->kind) {
    case TRACE_COPY:
        return 'a';
    case TRACE_OP:
    case TRACE_COLLECTIVE:
        return 'g';
    case TRACE_RECORD:
        return 'r';
    case TRACE_WAIT:
    case TRACE_AWAIT:
    case TRACE_BARRIER:
        return 'w';
    default:
        return 0;
    }
}

static int push_char(letters *l, char ch)
{
    if (l->n + 2 > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char *s = realloc(l->s, cap);
        if (!s)
            return -1;
        l->s = s;
        l->cap = cap;
    }
    l->s[l->n++] = ch;
    l->s[l->n] = '\0';
    return 0;
}

/* Adds ch (of a statement on `queue` in split `split`) to l. */
static int add_letter(letters *l, char ch, uint32_t queue, uint32_t split)
{
    if (split != TRACE_NONE && l->split != TRACE_NONE && split != l->split && l->n &&
        push_char(l, '|') != 0)
        return -1;
    if (split != TRACE_NONE)
        l->split = split;
    if (ch == 'g' && l->n && l->s[l->n - 1] == 'g' && l->g_queue == queue)
        return 0;               /* the same graph launch */
    if (push_char(l, ch) != 0)
        return -1;
    l->g_queue = ch == 'g' ? queue : TRACE_NONE;
    return 0;
}

static int ensure_hosts(trace_pattern *p, uint32_t n)
{
    if (n <= p->n_hosts)
        return 0;
    host_state *h = realloc(p->hosts, n * sizeof *h);
    if (!h)
        return -1;
    for (uint32_t i = p->n_hosts; i < n; i++)
        h[i] = (host_state){ TRACE_NONE, 0 };
    p->hosts = h;
    p->n_hosts = n;
    return 0;
}

int trace_pattern_feed(trace_pattern *p, const trace *t, const trace_stmt *s, bool keep)
{
    if (p->t != t) {
        /* attribute keys are string ids of t: look them up once per trace */
        p->t = t;
        p->k_token = trace_str_find(t, "token", 5);
        p->k_iter = trace_str_find(t, "iter", 4);
        p->k_split = trace_str_find(t, "split", 5);
    }
    uint32_t host = TRACE_NONE;
    char ch = letter_of(t, s, &host);
    if (host == TRACE_NONE)
        return 0;
    if (ensure_hosts(p, t->n_queues) != 0)
        return -1;
    uint32_t split = TRACE_NONE;
    host_state *h = &p->hosts[host];
    for (uint32_t a = 0; a < s->n_attr; a++) {
        uint32_t k = s->attr[a].key;
        if (k == TRACE_NONE)
            continue;
        if (k == p->k_split)
            split = s->attr[a].value;
        else if ((k == p->k_token || k == p->k_iter) && s->attr[a].value != h->iter_value) {
            if (p->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 16;
                pattern_iter *n = realloc(p->iters, cap * sizeof *n);
                if (!n)
                    return -1;
                p->iters = n;
                p->cap = cap;
            }
            pattern_iter *it = &p->iters[p->n];
            memset(it, 0, sizeof *it);
            it->host = host;
            it->before.g_queue = it->after.g_queue = TRACE_NONE;
            it->before.split = it->after.split = TRACE_NONE;
            if (!(it->iter = strdup(trace_str(t, s->attr[a].value))))
                return -1;
            h->iter = p->n++;
            h->iter_value = s->attr[a].value;
        }
    }
    if (!ch || h->iter_value == TRACE_NONE)
        return 0;
    pattern_iter *it = &p->iters[h->iter];
    if (add_letter(&it->before, ch, s->queue, split) != 0)
        return -1;
    return keep ? add_letter(&it->after, ch, s->queue, split) : 0;
}

size_t trace_pattern_count(const trace_pattern *p)
{
    return p->n;
}

trace_pattern_iter trace_pattern_at(const trace_pattern *p, size_t i)
{
    const pattern_iter *it = &p->iters[i];
    return (trace_pattern_iter){ it->host, it->iter, it->before.s ? it->before.s : "",
                                 it->after.s ? it->after.s : "" };
}

int trace_pattern_last(const trace_pattern *p, uint32_t host, trace_pattern_iter *out)
{
    for (size_t i = p->n; i-- > 0;)
        if (p->iters[i].host == host) {
            *out = trace_pattern_at(p, i);
            return 0;
        }
    return -1;
}

void trace_pattern_print(FILE *out, const trace *t, const trace_pattern *p, bool with_after)
{
    if (!p->n)
        return;
    fprintf(out, "sync pattern per host iteration (%s):\n", trace_pattern_legend);
    bool *done = calloc(p->n, sizeof *done);
    if (!done)
        return;
    for (size_t i = 0; i < p->n; i++) {
        if (done[i])
            continue;
        trace_pattern_iter a = trace_pattern_at(p, i);
        size_t same = 0;
        for (size_t j = i + 1; j < p->n; j++) {
            trace_pattern_iter b = trace_pattern_at(p, j);
            if (!done[j] && b.host == a.host && strcmp(a.before, b.before) == 0 &&
                (!with_after || strcmp(a.after, b.after) == 0)) {
                done[j] = true;
                same++;
            }
        }
        fprintf(out, "  %s iteration %s: %s", trace_str(t, t->queues[a.host].name), a.iter,
                a.before);
        if (with_after)
            fprintf(out, " -> %s", a.after);
        if (same)
            fprintf(out, "  (and %zu more iteration%s alike)", same, same == 1 ? "" : "s");
        fputc('\n', out);
    }
    free(done);
}
