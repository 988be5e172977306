/*
 * cmd_info.c -- `syncsim info DB|FILE [--run N] [--json]`: what a trace
 * holds. For a database: its runs; for the chosen run (or a text file):
 * queues, buffers, statements by kind, synchronisations and the time span,
 * and for a capture its import ledger (what was read, imported, ignored,
 * dropped and assumed, by reason: trace_ledger). Statements are streamed,
 * never loaded.
 */
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_info_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim info [TRACE|DB] [--run N] [--json]\n"
            "\n"
            "Summarises a trace database, a text trace or a capture (docs/importers.md).\n"
            "For a database, lists its runs (id, name, source, status, statements; a run\n"
            "whose producer died stays 'recording'), then describes run N (default: the\n"
            "latest): queues, buffers, statements by kind, synchronisations, and the time\n"
            "span when times exist. For a capture: the events read, imported, ignored by\n"
            "design, dropped by reason, and the orders assumed by reason where the capture\n"
            "does not say them (the import ledger, docs/importers.md); --json adds every\n"
            "run metadata key.\n"
            "\n"
            "Options:\n"
            "  -r, --run N   the run to describe (default: the latest)\n"
            "  -j, --json    one JSON object on standard output\n"
            "\n"
            "Examples:\n"
            "  syncsim info syncsim.db\n"
            "  syncsim info syncsim.db --run 1 --json\n"
            "  syncsim info examples/flag-deadlock.trace\n");
}

typedef struct info_stats {
    uint64_t n_stmts, by_kind[TRACE_KIND_COUNT], n_access, n_timed;
    int64_t t_min, t_max;
} info_stats;


static int collect(trace_reader *r, info_stats *s, trace_error *err)
{
    trace_stmt st;
    int rc;
    memset(s, 0, sizeof *s);
    s->t_min = INT64_MAX;
    s->t_max = INT64_MIN;
    while ((rc = trace_reader_next(r, &st, err)) == 1) {
        s->n_stmts++;
        s->by_kind[st.kind]++;
        s->n_access += st.n_access;
        if (st.t != TRACE_TIME_NONE) {
            int64_t end = st.t + (st.dur != TRACE_TIME_NONE ? st.dur : 0);
            s->n_timed++;
            if (st.t < s->t_min)
                s->t_min = st.t;
            if (end > s->t_max)
                s->t_max = end;
        }
    }
    return rc;
}

static const trace_kind sync_kinds[] = { TRACE_RECORD,     TRACE_WAIT, TRACE_SYNC,
                                         TRACE_BARRIER,    TRACE_SIGNAL, TRACE_AWAIT,
                                         TRACE_COLLECTIVE, TRACE_SEND, TRACE_RECV };

/* The ledger's lines (text): data dropped, then orders assumed. */
static void ledger_line(void *ctx, const char *reason, uint64_t n)
{
    const char *meaning = trace_ledger_meaning(reason);
    fprintf(ctx, "    %-7s %-22s %llu%s%s%s\n",
            trace_ledger_assumed(reason) ? "assumed" : "dropped", reason, (unsigned long long)n,
            meaning ? " (" : "", meaning ? meaning : "", meaning ? ")" : "");
}

/* The ledger's totals: every reason, ordering assumptions, and overridden
 * refusals (counted, but no event). */
typedef struct ledger_sum {
    uint64_t assumed, forced;
} ledger_sum;

static void ledger_add(void *ctx, const char *reason, uint64_t n)
{
    ledger_sum *sum = ctx;
    if (trace_ledger_assumed(reason))
        sum->assumed += n;
    if (strcmp(reason, "forced") == 0)
        sum->forced += n;
}

/* The ledger's assumptions as the members of one JSON object. */
typedef struct json_members {
    FILE *out;
    unsigned shown;
} json_members;

static void assumed_member(void *ctx, const char *reason, uint64_t n)
{
    json_members *j = ctx;
    if (!trace_ledger_assumed(reason))
        return;
    fputs(j->shown++ ? ", " : "", j->out);
    trace_json_str(j->out, reason);
    fprintf(j->out, ": %llu", (unsigned long long)n);
}

/* A metadata count, or -1 when absent. */
static long long meta_count(const trace *t, const char *key)
{
    const char *v = trace_get_meta(t, key);
    return v ? strtoll(v, NULL, 10) : -1;
}

static void print_text(FILE *out, const char *path, const trace_format *fmt,
                       const trace_run_info *runs, size_t n_runs,
                       int64_t run, const trace *t, const info_stats *s)
{
    if (runs) {
        fprintf(out, "%s: trace database, %zu run%s\n", path, n_runs, n_runs == 1 ? "" : "s");
        /* The name goes last: it is free text of any length. */
        fprintf(out, "  %1s %4s  %-10s %-10s %12s  %s\n", "", "id", "source", "status",
                "statements", "name");
        for (size_t i = 0; i < n_runs; i++)
            fprintf(out, "  %1s %4lld  %-10s %-10s %12llu  %s\n", runs[i].id == run ? "*" : "",
                    (long long)runs[i].id, runs[i].source, runs[i].status,
                    (unsigned long long)runs[i].n_stmts, runs[i].name);
        fprintf(out, "  (* = the run shown below; --run N picks another)\n");
        fprintf(out, "run %lld:\n", (long long)run);
    } else {
        fprintf(out, "%s: %s\n", path,
                fmt == &trace_format_text ? "text trace" : fmt->name);
    }
    fprintf(out, "  queues: %u (%u host, %u stream)\n", t->n_queues, t->n_host_queues,
            t->n_queues - t->n_host_queues);
    for (uint32_t q = 0; q < t->n_queues; q++) {
        const trace_queue *qu = &t->queues[q];
        if (qu->kind == TRACE_QUEUE_HOST)
            fprintf(out, "    %-16s host\n", trace_str(t, qu->name));
        else
            fprintf(out, "    %-16s stream device=%s\n", trace_str(t, qu->name),
                    trace_str(t, qu->device));
    }
    uint32_t roots = 0;
    uint64_t root_bytes = 0;
    for (uint32_t b = 0; b < t->n_buffers; b++)
        if (t->buffers[b].parent == TRACE_NONE) {
            roots++;
            root_bytes += t->buffers[b].size;
        }
    fprintf(out, "  buffers: %u (%u root, %u view), %llu bytes in roots\n", t->n_buffers, roots,
            t->n_buffers - roots, (unsigned long long)root_bytes);
    fprintf(out, "  statements: %llu, accesses: %llu\n", (unsigned long long)s->n_stmts,
            (unsigned long long)s->n_access);
    for (int k = 0; k < TRACE_KIND_COUNT; k++)
        if (s->by_kind[k])
            fprintf(out, "    %-12s %llu\n", trace_kind_str(k), (unsigned long long)s->by_kind[k]);
    uint64_t n_sync = 0;
    for (size_t i = 0; i < sizeof sync_kinds / sizeof sync_kinds[0]; i++)
        n_sync += s->by_kind[sync_kinds[i]];
    fprintf(out, "  syncs: %llu (", (unsigned long long)n_sync);
    for (size_t i = 0; i < sizeof sync_kinds / sizeof sync_kinds[0]; i++)
        fprintf(out, "%s%s %llu", i ? ", " : "", trace_kind_str(sync_kinds[i]),
                (unsigned long long)s->by_kind[sync_kinds[i]]);
    fprintf(out, ")\n");
    if (s->n_timed)
        fprintf(out, "  time: %lld .. %lld ns (%lld ns, %llu timed statements)\n",
                (long long)s->t_min, (long long)s->t_max, (long long)(s->t_max - s->t_min),
                (unsigned long long)s->n_timed);
    else
        fprintf(out, "  time: none recorded\n");
    if (t->n_expects)
        fprintf(out, "  expectations: %u\n", t->n_expects);
    ledger_sum sum = { 0, 0 };
    uint64_t counted = trace_ledger(t, ledger_add, &sum);
    long long read = meta_count(t, "import.read"), ignored = meta_count(t, "import.ignored");
    if (read >= 0 || counted) {
        fprintf(out, "  import: ");
        if (read >= 0)
            fprintf(out, "%lld events read, %lld imported, %lld ignored by design, ", read,
                    read - (ignored < 0 ? 0 : ignored) - (long long)(counted - sum.forced),
                    ignored < 0 ? 0 : ignored);
        fprintf(out, "%llu dropped, %llu ordering assumptions%s\n",
                (unsigned long long)(counted - sum.assumed), (unsigned long long)sum.assumed,
                counted ? ":" : " (everything read was imported as captured)");
        trace_ledger(t, ledger_line, out);
        const char *forced = trace_get_meta(t, "forced");
        if (forced)
            fprintf(out, "    forced: %s\n", forced);
    }
    for (uint32_t i = 0; i < t->n_meta; i++)
        fprintf(out, "  meta %s = %s\n", trace_str(t, t->meta[i].key),
                trace_str(t, t->meta[i].value));
}

static void print_json(FILE *out, const char *path, const trace_format *fmt,
                       const trace_run_info *runs, size_t n_runs,
                       int64_t run, const trace *t, const info_stats *s)
{
    fprintf(out, "{\"format\": \"syncsim-info\", \"version\": 1, \"path\": ");
    trace_json_str(out, path);
    fprintf(out, ", \"kind\": \"%s\", \"input_format\": ",
            runs ? "database" : fmt == &trace_format_text ? "text" : "capture");
    trace_json_str(out, fmt->name);
    if (runs) {
        fprintf(out, ", \"runs\": [");
        for (size_t i = 0; i < n_runs; i++) {
            fprintf(out, "%s{\"id\": %lld, \"name\": ", i ? ", " : "", (long long)runs[i].id);
            trace_json_str(out, runs[i].name);
            fprintf(out, ", \"source\": ");
            trace_json_str(out, runs[i].source);
            fprintf(out, ", \"status\": ");
            trace_json_str(out, runs[i].status);
            fprintf(out, ", \"statements\": %llu, \"created\": %lld}",
                    (unsigned long long)runs[i].n_stmts, (long long)runs[i].created);
        }
        fprintf(out, "], \"run\": %lld", (long long)run);
    }
    fprintf(out, ", \"queues\": [");
    for (uint32_t q = 0; q < t->n_queues; q++) {
        const trace_queue *qu = &t->queues[q];
        fprintf(out, "%s{\"name\": ", q ? ", " : "");
        trace_json_str(out, trace_str(t, qu->name));
        fprintf(out, ", \"kind\": \"%s\"", qu->kind == TRACE_QUEUE_HOST ? "host" : "stream");
        if (qu->kind != TRACE_QUEUE_HOST) {
            fprintf(out, ", \"device\": ");
            trace_json_str(out, trace_str(t, qu->device));
        }
        fputc('}', out);
    }
    uint32_t roots = 0;
    for (uint32_t b = 0; b < t->n_buffers; b++)
        roots += t->buffers[b].parent == TRACE_NONE;
    fprintf(out, "], \"buffers\": {\"total\": %u, \"roots\": %u, \"views\": %u}", t->n_buffers,
            roots, t->n_buffers - roots);
    fprintf(out, ", \"statements\": %llu, \"accesses\": %llu, \"by_kind\": {",
            (unsigned long long)s->n_stmts, (unsigned long long)s->n_access);
    for (int k = 0; k < TRACE_KIND_COUNT; k++)
        fprintf(out, "%s\"%s\": %llu", k ? ", " : "", trace_kind_str(k),
                (unsigned long long)s->by_kind[k]);
    fprintf(out, "}, \"syncs\": {");
    for (size_t i = 0; i < sizeof sync_kinds / sizeof sync_kinds[0]; i++)
        fprintf(out, "%s\"%s\": %llu", i ? ", " : "", trace_kind_str(sync_kinds[i]),
                (unsigned long long)s->by_kind[sync_kinds[i]]);
    if (s->n_timed)
        fprintf(out, "}, \"time\": {\"min\": %lld, \"max\": %lld, \"timed\": %llu}",
                (long long)s->t_min, (long long)s->t_max, (unsigned long long)s->n_timed);
    else
        fprintf(out, "}, \"time\": null");
    fprintf(out, ", \"expectations\": %u", t->n_expects);
    /* the import ledger; null members where the trace was not imported.
     * read = imported + ignored + every reason but forced (one per event). */
    long long read = meta_count(t, "import.read"), ignored = meta_count(t, "import.ignored");
    ledger_sum sum = { 0, 0 };
    uint64_t counted = trace_ledger(t, ledger_add, &sum);
    fprintf(out, ", \"import\": {\"read\": ");
    read >= 0 ? fprintf(out, "%lld", read) : fprintf(out, "null");
    fprintf(out, ", \"imported\": ");
    read >= 0 ? fprintf(out, "%lld", read - (ignored < 0 ? 0 : ignored) -
                                         (long long)(counted - sum.forced))
              : fprintf(out, "null");
    fprintf(out, ", \"ignored\": ");
    ignored >= 0 ? fprintf(out, "%lld", ignored) : fprintf(out, "null");
    fprintf(out, ", \"dropped_total\": %llu, \"dropped\": ", (unsigned long long)counted);
    trace_ledger_print_json(out, t);
    json_members members = { out, 0 };
    fprintf(out, ", \"assumed_total\": %llu, \"assumed\": {", (unsigned long long)sum.assumed);
    trace_ledger(t, assumed_member, &members);
    fprintf(out, "}, \"forced\": ");
    if (trace_get_meta(t, "forced"))
        trace_json_str(out, trace_get_meta(t, "forced"));
    else
        fprintf(out, "null");
    fprintf(out, "}, \"meta\": {");
    for (uint32_t i = 0; i < t->n_meta; i++) {
        fprintf(out, "%s", i ? ", " : "");
        trace_json_str(out, trace_str(t, t->meta[i].key));
        fprintf(out, ": ");
        trace_json_str(out, trace_str(t, t->meta[i].value));
    }
    fprintf(out, "}}\n");
}

int cmd_info(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0;
    bool json = false;
    int c;
    while ((c = cli_getopt("info", argc, argv, ":r:j", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("info", optarg, &run) != 0)
                return 2;
            break;
        case 'j':
            json = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *path = cli_trace_arg("info", argc, argv, optind);
    if (!path)
        return 2;
    trace_error err = { 0 };
    trace_run_info *runs = NULL;
    size_t n_runs = 0;
    trace_source src;
    trace_source_opts so = { .run = (int64_t)run, .as_recorded = true };
    if (cli_open("info", path, &so, &src) != 0)
        return 2;
    int status = 2;
    info_stats s;
    if ((src.store && trace_store_runs(src.store, &runs, &n_runs, &err) != 0) ||
        collect(&src.reader, &s, &err) != 0)
        goto fail;
    if (json)
        print_json(stdout, path, src.format, src.store ? runs : NULL, n_runs, src.run, src.reader.trace, &s);
    else
        print_text(stdout, path, src.format, src.store ? runs : NULL, n_runs, src.run, src.reader.trace, &s);
    status = 0;
fail:
    if (status != 0)
        cli_error("info", "%s", err.msg);
    trace_run_info_free(runs, n_runs);
    trace_source_close(&src);
    return status;
}
