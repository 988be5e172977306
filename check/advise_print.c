/*
 * advise_print.c -- the advice (check/advise.c) for people and programs.
 * The JSON form, format syncsim-advice version 1, is written here and
 * nowhere else; docs/advise.md describes its fields.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

const char *check_safety_str(check_safety s)
{
    static const char *const words[] = { "safe", "some", "unsafe", "unjudged" };
    return (unsigned)s < 4 ? words[s] : "?";
}

/* ns as milliseconds, 3 decimals. */
static double ms(int64_t ns)
{
    return (double)ns / 1e6;
}

static double pct(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

/* "14.594 -> 14.102 ms (-3.37 %)[, 0.683 -> 0.652 ms per iteration]" */
static void print_change(FILE *out, const check_timing *base, const check_timing *with)
{
    if (with->makespan_ns < 0) {
        fputs("the replay hangs", out);
        return;
    }
    fprintf(out, "%.3f -> %.3f ms (%+.2f %%)", ms(base->makespan_ns), ms(with->makespan_ns),
            -pct(base->makespan_ns - with->makespan_ns, base->makespan_ns));
    if (base->per_iter_ns >= 0 && with->per_iter_ns >= 0)
        fprintf(out, ", %.3f -> %.3f ms per iteration", ms(base->per_iter_ns),
                ms(with->per_iter_ns));
}

void check_advice_print(FILE *out, const trace *t, const char *name, const check_pricer *pr,
                        const check_advice *a, size_t max_items)
{
    fprintf(out, "advice for %s: %llu statements, replayed by %s: makespan %.3f ms", name,
            (unsigned long long)a->n_stmts, pr && pr->name ? pr->name : "the pricer",
            ms(a->base.makespan_ns));
    if (a->base.per_iter_ns >= 0)
        fprintf(out, ", %.3f ms per iteration (token=/iter=)", ms(a->base.per_iter_ns));
    fprintf(out, "\n%s", a->coverage);
    if (a->ordering_only)
        fputs(" -- ordering only: no race can be judged, so no sync is called safe", out);
    if (a->n_findings)
        fprintf(out, "; the trace has %zu finding%s of its own (safe means: no new reported "
                     "finding)",
                a->n_findings, a->n_findings == 1 ? "" : "s");
    fprintf(out, "\nthe minimiser removes %llu of %llu synchronisations", (unsigned long long)a->n_removable,
            (unsigned long long)a->n_candidates);
    if (a->n_removable) {
        fputs("; all together: ", out);
        print_change(out, &a->base, &a->all_safe);
    }
    fputc('\n', out);
    if (a->n_copies) {
        fprintf(out, "%llu blocking cop%s (the host copies between host and device memory); "
                     "all asynchronous: ",
                (unsigned long long)a->n_copies, a->n_copies == 1 ? "y" : "ies");
        print_change(out, &a->base, &a->all_async);
        if (a->all_async_new)
            fprintf(out, "; unsafe: %llu finding%s, e.g. %s", (unsigned long long)a->all_async_new,
                    a->all_async_new == 1 ? "" : "s",
                    a->all_async_finding ? a->all_async_finding : "(no text)");
        else
            fputs("; safe: no new finding", out);
        fputc('\n', out);
    }
    size_t n = max_items && max_items < a->n ? max_items : a->n;
    for (size_t i = 0; i < n; i++) {
        const check_advice_item *it = &a->items[i];
        fprintf(out, "\n%2zu. %s", i + 1, it->what);
        if (it->where[0])
            fprintf(out, "   %s", it->where);
        char holder[96];
        if (it->kind == TRACE_BARRIER)
            snprintf(holder, sizeof holder, "its participants");
        else
            snprintf(holder, sizeof holder, "%s", check_queue_name(t, it->queue));
        fprintf(out, "\n    %llu %s, holding %s %.3f ms in all (%s); %.3f ms of it on the "
                     "critical path (%.1f %% of the makespan)\n",
                (unsigned long long)it->count,
                it->kind == TRACE_BARRIER ? (it->count == 1 ? "generation" : "generations")
                                          : (it->count == 1 ? "occurrence" : "occurrences"),
                holder, ms(it->held_ns),
                it->held_recorded ? "the trace's times" : "replayed", ms(it->critical_ns),
                pct(it->critical_ns, a->base.makespan_ns));
        fputs("    without them: ", out);
        print_change(out, &a->base, &it->without);
        fputc('\n', out);
        switch (it->safety) {
        case CHECK_SAFE_ALL:
            fputs(it->kind == TRACE_COPY
                      ? "    safe: asynchronous, they let in no finding\n"
                      : "    safe: the minimiser removes every one\n",
                  out);
            break;
        case CHECK_SAFE_SOME:
            fprintf(out, "    safe: %llu of %llu can go; without those: ",
                    (unsigned long long)it->n_safe, (unsigned long long)it->count);
            print_change(out, &a->base, &it->without_safe);
            fputc('\n', out);
            break;
        case CHECK_SAFE_NONE:
            fputs("    safe: no\n", out);
            break;
        case CHECK_SAFE_UNJUDGED:
            fprintf(out, "    safe: not judged (ordering only; %llu of %llu add no hang or "
                         "ordering finding)\n",
                    (unsigned long long)it->n_safe, (unsigned long long)it->count);
            break;
        }
        if (it->n_new) {
            fprintf(out, "    removing them all lets in %llu finding%s, e.g. %s\n",
                    (unsigned long long)it->n_new, it->n_new == 1 ? "" : "s",
                    it->finding ? it->finding : "(no text)");
            if (it->fix)
                fprintf(out, "      fix: %s\n", it->fix);
            if (it->replacement) {
                fprintf(out, "    instead: %s\n      buys: ", it->replacement);
                print_change(out, &a->base, &it->with_replacement);
                fputc('\n', out);
            } else
                fputs("    instead: no replacement found that checks clean\n", out);
        }
    }
    if (n < a->n)
        fprintf(out, "\n... and %zu more groups (--all lists them)\n", a->n - n);
}

static void json_timing(FILE *out, const char *key, const check_timing *x, const check_timing *base)
{
    fprintf(out, "\"%s\": {\"makespan_ns\": %lld", key, (long long)x->makespan_ns);
    if (x->per_iter_ns >= 0)
        fprintf(out, ", \"per_iteration_ns\": %lld", (long long)x->per_iter_ns);
    if (base && x->makespan_ns >= 0 && base->makespan_ns >= 0)
        fprintf(out, ", \"gain_ns\": %lld", (long long)(base->makespan_ns - x->makespan_ns));
    fputc('}', out);
}

void check_advice_print_json(FILE *out, const trace *t, const char *name,
                             const check_pricer *pr, const check_advice *a)
{
    fputs("{\"format\": \"syncsim-advice\", \"version\": 1, \"trace\": ", out);
    trace_json_str(out, name);
    fputs(", \"pricer\": ", out);
    trace_json_str(out, pr && pr->name ? pr->name : "");
    fprintf(out, ", \"statements\": %llu, ", (unsigned long long)a->n_stmts);
    json_timing(out, "base", &a->base, NULL);
    fputs(", \"coverage\": ", out);
    trace_json_str(out, a->coverage);
    fprintf(out, ", \"ordering_only\": %s, \"findings\": %zu, \"minimiser\": {\"removable\": "
                 "%llu, \"candidates\": %llu, ",
            a->ordering_only ? "true" : "false", a->n_findings,
            (unsigned long long)a->n_removable, (unsigned long long)a->n_candidates);
    json_timing(out, "all_removed", &a->all_safe, &a->base);
    fputs("}", out);
    if (a->n_copies) {
        fprintf(out, ", \"blocking_copies\": {\"count\": %llu, \"new_findings\": %llu, ",
                (unsigned long long)a->n_copies, (unsigned long long)a->all_async_new);
        if (a->all_async_finding) {
            fputs("\"finding\": ", out);
            trace_json_str(out, a->all_async_finding);
            fputs(", ", out);
        }
        json_timing(out, "all_async", &a->all_async, &a->base);
        fputc('}', out);
    }
    fputs(", \"groups\": [", out);
    for (size_t i = 0; i < a->n; i++) {
        const check_advice_item *it = &a->items[i];
        fputs(i ? ",\n  {" : "\n  {", out);
        fputs("\"kind\": ", out);
        trace_json_str(out, it->kind == TRACE_COPY ? "blocking-copy" : trace_kind_str(it->kind));
        fputs(", \"queue\": ", out);
        trace_json_str(out, check_queue_name(t, it->queue));
        fputs(", \"what\": ", out);
        trace_json_str(out, it->what);
        fputs(", \"where\": ", out);
        trace_json_str(out, it->where);
        fprintf(out, ", \"count\": %llu, \"first_seq\": %llu, \"held_ns\": %lld, "
                     "\"held_from\": \"%s\", \"critical_ns\": %lld, \"critical_share\": %.4f, "
                     "\"safe\": \"%s\", \"removable\": %llu, ",
                (unsigned long long)it->count, (unsigned long long)it->first_seq,
                (long long)it->held_ns, it->held_recorded ? "trace" : "replay",
                (long long)it->critical_ns, pct(it->critical_ns, a->base.makespan_ns) / 100.0,
                check_safety_str(it->safety), (unsigned long long)it->n_safe);
        json_timing(out, "without", &it->without, &a->base);
        if (it->safety == CHECK_SAFE_SOME) {
            fputs(", ", out);
            json_timing(out, "without_removable", &it->without_safe, &a->base);
        }
        fprintf(out, ", \"new_findings\": %llu", (unsigned long long)it->n_new);
        if (it->finding) {
            fputs(", \"finding\": ", out);
            trace_json_str(out, it->finding);
        }
        if (it->fix) {
            fputs(", \"fix\": ", out);
            trace_json_str(out, it->fix);
        }
        if (it->replacement) {
            fputs(", \"replacement\": {\"what\": ", out);
            trace_json_str(out, it->replacement);
            fputs(", ", out);
            json_timing(out, "with", &it->with_replacement, &a->base);
            fputc('}', out);
        }
        fprintf(out, ", \"buys_ns\": %lld}", (long long)it->buys_ns);
    }
    fputs("\n]}\n", out);
}
