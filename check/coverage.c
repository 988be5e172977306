/*
 * coverage.c -- what a check could judge, so that "clean" means "looked,
 * and found nothing".
 *
 * A verdict is only as good as what the trace holds. Three things can be
 * missing, and each is counted here, once, for every command that gives a
 * verdict (check, minimize, replay --drop-sync, report):
 *
 *   byte ranges   A captured trace (run metadata accesses=: none, pointers,
 *                 execution-trace; traces/formats/capture.c sets it) knows
 *                 which bytes a device statement touched only where its
 *                 source said so. A device statement that computes or moves
 *                 data (op, copy, collective, send, recv on a stream) with
 *                 no non-empty byte range cannot race, so its races and
 *                 uses after free were not checked. In a trace written by
 *                 hand or recorded by syncsim, accesses are declared: an op
 *                 without one touches nothing, and is judged as such. A
 *                 capture that yields no device statement at all is never
 *                 full either: nothing on a device was seen.
 *   import drops  What an importer read and did not import (the ledger,
 *                 trace_ledger): an event the checker never saw may be the
 *                 one that races. The ledger also counts every ordering
 *                 the importer assumed where the capture is silent (a stream
 *                 sync widened to its device, an event record placed before
 *                 its wait, a wait taken as one on an idle stream) and every
 *                 refusal a user forced (run metadata forced= says which):
 *                 an assumed order adds or moves a happens-before edge, and
 *                 so can hide a race. They are named apart, as "ordering
 *                 assumptions". A capture that records no host access has
 *                 each copy that does not block the host counted too
 *                 (host-unrecorded): a host read racing with it is unseen.
 *   absent ranks  Some ranks of a larger job (merge --partial, or one rank's
 *                 trace alone): what needs an absent rank was made local.
 *
 * Host accesses are counted and shown. Their absence alone does not make
 * coverage partial (a host that only launches and syncs has none); a
 * capture without any, whose copies do not block the host, has those copies
 * in its ledger (above).
 *
 * Coverage is full when none of the three is missing. A check without
 * findings is then "clean" (exit 0); with partial coverage it is "no
 * findings, partial coverage" (exit 4), and the minimiser and replay's
 * --drop-sync refuse to call a sync removable unless asked for the weaker,
 * ordering-only promise.
 *
 * Cost: one test per access of each statement (streaming, no memory).
 */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void check_coverage_init(check_coverage *c, const trace *t)
{
    memset(c, 0, sizeof *c);
    if (!t)
        return;
    c->dropped = trace_ledger(t, NULL, NULL);
    const char *acc = trace_get_meta(t, "accesses");
    c->captured = acc != NULL;
    const char *p = trace_get_meta(t, "partial");
    unsigned given, world;
    if (p && sscanf(p, "%u/%u", &given, &world) == 2 && given < world) {
        c->ranks_given = given;
        c->ranks_world = world;
    }
}

/* Statements that compute or move data: where byte ranges matter. */
static bool moves_data(trace_kind k)
{
    return k == TRACE_OP || k == TRACE_COPY || k == TRACE_COLLECTIVE || k == TRACE_SEND ||
           k == TRACE_RECV;
}

void check_coverage_stmt(check_coverage *c, const trace *t, const trace_stmt *s)
{
    if (!moves_data(s->kind) || s->queue >= t->n_queues)
        return;
    bool ranged = false;
    for (uint32_t i = 0; i < s->n_access && !ranged; i++)
        ranged = s->access[i].hi > s->access[i].lo;
    if (t->queues[s->queue].kind == TRACE_QUEUE_HOST) {
        c->host_accesses += ranged;
        return;
    }
    c->device++;
    c->device_ranged += ranged;
}

void check_coverage_of(check_coverage *c, const trace *t)
{
    check_coverage_init(c, t);
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        check_coverage_stmt(c, t, &s);
    }
}

/* Device statements whose races were not checked. */
static uint64_t unranged(const check_coverage *c)
{
    return c->captured ? c->device - c->device_ranged : 0;
}

bool check_coverage_full(const check_coverage *c)
{
    return unranged(c) == 0 && !(c->captured && c->device == 0) && c->dropped == 0 &&
           c->ranks_world == 0 && c->uaf_unjudged == 0;
}

typedef struct text_buf {
    char *buf;
    size_t cap, len;
} text_buf;

static void add(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool room = b->buf && b->len < b->cap;
    int n = vsnprintf(room ? b->buf + b->len : NULL, room ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n;
}

/* The ledger's reasons of one kind (ordering assumptions or data dropped),
 * as "word N, word N", and their total. */
typedef struct ledger_text {
    text_buf *b;            /* NULL: only count */
    bool assumed;
    unsigned shown;
    uint64_t total;
} ledger_text;

static void add_reason(void *ctx, const char *reason, uint64_t n)
{
    ledger_text *lt = ctx;
    if (trace_ledger_assumed(reason) != lt->assumed)
        return;
    lt->total += n;
    if (lt->b)
        add(lt->b, "%s%s %" PRIu64, lt->shown++ ? ", " : "", reason, n);
}

/* "N WHATs WHERE (reason n, ...)" for the ledger's reasons of one kind
 * (assumed or not), after sep; false (nothing added) when there are none. */
static bool add_reasons(text_buf *b, const trace *t, bool assumed, const char *sep,
                        const char *what, const char *where)
{
    ledger_text lt = { NULL, assumed, 0, 0 };
    trace_ledger(t, add_reason, &lt);
    if (!lt.total)
        return false;
    add(b, "%s%" PRIu64 " %s%s %s (", sep, lt.total, what, lt.total == 1 ? "" : "s", where);
    lt.b = b;
    trace_ledger(t, add_reason, &lt);
    add(b, ")");
    return true;
}

size_t check_coverage_missing(char *buf, size_t cap, const check_coverage *c, const trace *t)
{
    text_buf b = { buf, cap, 0 };
    if (buf && cap)
        buf[0] = '\0';
    const char *sep = "";
    if (c->captured && c->device == 0) {
        add(&b, "the capture holds no device statement (no kernel, copy or memset was imported)");
        sep = "; ";
    } else if (unranged(c)) {
        add(&b, "%" PRIu64 " of %" PRIu64 " device statements have no byte ranges, so their races "
                "and uses after free were not checked",
            unranged(c), c->device);
        const char *acc = t ? trace_get_meta(t, "accesses") : NULL;
        const char *fmt = t ? trace_get_meta(t, "capture.format") : NULL;
        if (acc && strcmp(acc, "none") == 0 && fmt && strcmp(fmt, "kineto") == 0)
            add(&b, " (a PyTorch profile gets them from its execution trace: import --et)");
        else if (acc && strcmp(acc, "none") == 0 && fmt && strcmp(fmt, "nsys") == 0)
            add(&b, " (Nsight Systems records no addresses: `syncsim capture` records each "
                    "kernel's pointers)");
        sep = "; ";
    }
    if (c->dropped && !t) {
        add(&b, "%s%" PRIu64 " event%s dropped or placed by assumption at import", sep,
            c->dropped, c->dropped == 1 ? "" : "s");
        sep = "; ";
    } else if (c->dropped) {
        /* An ordering assumption is named apart from data dropped: it is why
         * a capture that lost nothing still cannot check clean. */
        if (add_reasons(&b, t, false, sep, "event", "dropped at import"))
            sep = "; ";
        if (add_reasons(&b, t, true, sep, "ordering assumption", "at import")) {
            const char *forced = trace_get_meta(t, "forced");
            add(&b, "%s%s: a guessed order can hide a race", forced ? "; forced: " : "",
                forced ? forced : "");
            sep = "; ";
        }
    }
    if (c->ranks_world) {
        const char *absent = t ? trace_get_meta(t, "ranks.absent") : NULL;
        add(&b, "%s%u of %u ranks absent%s%s%s: collectives and messages that need them were "
                "made local",
            sep, c->ranks_world - c->ranks_given, c->ranks_world, absent ? " (" : "",
            absent ? absent : "", absent ? ")" : "");
        sep = "; ";
    }
    if (c->uaf_unjudged)
        add(&b, "%s%" PRIu64 " access%s not judged for use after free (the checker keeps %d "
                "frees and allocs per byte range, and %s needed an older one)",
            sep, c->uaf_unjudged, c->uaf_unjudged == 1 ? "" : "es", CHECK_LIFE_MAX,
            c->uaf_unjudged == 1 ? "it" : "they");
    return b.len;
}

size_t check_coverage_describe(char *buf, size_t cap, const check_coverage *c, const trace *t)
{
    text_buf b = { buf, cap, 0 };
    if (buf && cap)
        buf[0] = '\0';
    if (!check_coverage_full(c)) {
        add(&b, "coverage partial: ");
        bool room = buf && b.len < cap;
        size_t n = check_coverage_missing(room ? buf + b.len : NULL, room ? cap - b.len : 0, c, t);
        b.len += n;
        return b.len;
    }
    add(&b, "coverage full");
    if (c->captured)
        add(&b, ": %" PRIu64 " of %" PRIu64 " device statements with byte ranges, host accesses "
                "%s",
            c->device_ranged, c->device, c->host_accesses ? "recorded" : "none recorded");
    return b.len;
}

void check_coverage_print_json(FILE *out, const check_coverage *c, const trace *t)
{
    fprintf(out,
            "{\"full\": %s, \"captured\": %s, \"device_statements\": %" PRIu64
            ", \"with_byte_ranges\": %" PRIu64 ", \"host_accesses\": %" PRIu64
            ", \"dropped\": %" PRIu64 ", \"dropped_by_reason\": ",
            check_coverage_full(c) ? "true" : "false", c->captured ? "true" : "false", c->device,
            c->device_ranged, c->host_accesses, c->dropped);
    if (t)
        trace_ledger_print_json(out, t);
    else
        fputs("{}", out);
    fprintf(out, ", \"uaf_unjudged\": %" PRIu64, c->uaf_unjudged);
    if (c->ranks_world) {
        const char *absent = t ? trace_get_meta(t, "ranks.absent") : NULL;
        fprintf(out, ", \"ranks\": {\"given\": %u, \"world\": %u, \"absent\": ", c->ranks_given,
                c->ranks_world);
        trace_json_str(out, absent ? absent : "");
        fputs("}", out);
    }
    fputs("}", out);
}

void check_coverage_to_info(const check_coverage *c, trace_check_info *info)
{
    info->has_coverage = true;
    info->captured = c->captured;
    info->device = c->device;
    info->device_ranged = c->device_ranged;
    info->host_accesses = c->host_accesses;
    info->dropped = c->dropped;
    info->ranks_given = c->ranks_given;
    info->ranks_world = c->ranks_world;
    info->uaf_unjudged = c->uaf_unjudged;
}

const check_coverage *check_coverage_from_info(check_coverage *c, const trace_check_info *info)
{
    if (!info || !info->has_coverage)
        return NULL;
    *c = (check_coverage){ info->device,  info->device_ranged, info->host_accesses,
                           info->dropped, info->captured,      info->ranks_given,
                           info->ranks_world, info->uaf_unjudged };
    return c;
}
