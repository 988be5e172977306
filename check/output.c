/*
 * output.c -- findings for people and programs, and the comparison with a
 * trace's `expect` lines.
 *
 * Every output works on trace_finding (traces/trace.h), the typed finding
 * the checker makes and the store keeps, so that `check --json`, the text
 * verdict and the pictures say the same thing whether the findings come
 * from a check just run or from a database. The JSON form is written here
 * and nowhere else; nothing reads it back. Which fields each kind has, and
 * which key names its object, come from TRACE_FINDING_MAP.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t check_errors_of(const trace_finding *f, size_t n, uint64_t dropped)
{
    uint64_t errors = dropped;      /* a finding not kept is of a kind not known here */
    for (size_t i = 0; i < n; i++)
        errors += check_finding_is_error(&f[i]);
    return errors;
}

check_status check_status_of(uint64_t findings, bool incomplete, const check_coverage *cov)
{
    if (findings)
        return CHECK_FINDINGS;
    if (incomplete)
        return CHECK_INCOMPLETE;
    return cov && !check_coverage_full(cov) ? CHECK_PARTIAL : CHECK_CLEAN;
}

const char *check_status_str(check_status st)
{
    static const char *const words[] = { "clean", "findings", "incomplete", "partial" };
    return (unsigned)st < 4 ? words[st] : "?";
}

int check_exit_status(check_status st)
{
    static const int codes[] = { 0, 1, 3, 4 };
    return (unsigned)st < 4 ? codes[st] : 2;
}

const check_coverage *check_report_coverage(const check_report *rep)
{
    return &rep->cov;
}

/* ------------------------------------------------------------------ */
/* JSON.                                                               */

static void json_ref(FILE *out, const trace *t, const trace_stmt_ref *r, bool with_label)
{
    fputs("{\"queue\": ", out);
    trace_json_str(out, check_queue_name(t, r->queue));
    if (with_label && r->label != TRACE_NONE) {
        fputs(", \"label\": ", out);
        trace_json_str(out, trace_str(t, r->label));
    }
    if (r->line)
        fprintf(out, ", \"line\": %u", r->line);
    if (r->site != TRACE_NONE) {
        fputs(", \"site\": ", out);
        trace_json_str(out, trace_str(t, r->site));
    }
    fprintf(out, ", \"seq\": %llu}", (unsigned long long)r->seq);
}

/* The parts of role `role` as a JSON array. */
static void json_parts(FILE *out, const trace *t, const trace_finding *f, trace_part_role role,
                       const char *count_key)
{
    fputc('[', out);
    bool any = false;
    for (uint32_t i = 0; i < f->n_parts; i++) {
        const trace_finding_part *p = &f->parts[i];
        if (p->role != role)
            continue;
        fputs(any ? ", " : "", out);
        any = true;
        if (role == TRACE_PART_CYCLE) {
            trace_json_str(out, check_queue_name(t, p->queue));
            continue;
        }
        fputs("{\"queue\": ", out);
        trace_json_str(out, check_queue_name(t, p->queue));
        if (p->text) {
            fputs(", \"waits_for\": ", out);
            trace_json_str(out, p->text);
        }
        if (p->kind != TRACE_NONE) {
            fputs(", \"kind\": ", out);
            trace_json_str(out, trace_str(t, p->kind));
        }
        if (p->count)
            fprintf(out, ", \"%s\": %llu", count_key, (unsigned long long)p->count);
        if (p->line)
            fprintf(out, ", \"line\": %u", p->line);
        if (p->site != TRACE_NONE) {
            fputs(", \"site\": ", out);
            trace_json_str(out, trace_str(t, p->site));
        }
        if (p->seq != TRACE_NO_SEQ)
            fprintf(out, ", \"seq\": %llu", (unsigned long long)p->seq);
        if (p->extra)
            fputs(", \"extra\": true", out);
        fputc('}', out);
    }
    fputc(']', out);
}

static bool has_part(const trace_finding *f, trace_part_role role)
{
    for (uint32_t i = 0; i < f->n_parts; i++)
        if (f->parts[i].role == role)
            return true;
    return false;
}

void check_finding_print_json(FILE *out, const trace *t, const trace_finding *f)
{
    const trace_finding_info *about = trace_finding_about(f->kind);
    fputs("{\"kind\": ", out);
    trace_json_str(out, about->word);
    switch (f->kind) {
    case TRACE_FINDING_RACE:
    case TRACE_FINDING_USE_AFTER_FREE:
        if (f->kind == TRACE_FINDING_RACE)
            fprintf(out, ", \"type\": \"%s\"", check_race_word(f->race_type));
        fputs(", \"buffer\": ", out);
        trace_json_str(out, trace_str(t, t->buffers[f->buffer != TRACE_NONE ? f->buffer : f->root].name));
        fputs(", \"root\": ", out);
        trace_json_str(out, trace_str(t, t->buffers[f->root].name));
        fprintf(out, ", \"range\": [%llu, %llu]", (unsigned long long)f->lo,
                (unsigned long long)f->hi);
        fputs(",\n   \"first\": ", out);
        json_ref(out, t, &f->first, true);
        fputs(",\n   \"second\": ", out);
        json_ref(out, t, &f->second, true);
        break;
    case TRACE_FINDING_WAIT_UNRECORDED:
        fprintf(out, ", \"%s\": ", about->object);
        trace_json_str(out, trace_str(t, f->object));
        fputs(", \"at\": ", out);
        json_ref(out, t, &f->second, false);
        break;
    case TRACE_FINDING_HANG:
        fputs(", \"blocked\": ", out);
        json_parts(out, t, f, TRACE_PART_BLOCKED, "count");
        if (has_part(f, TRACE_PART_CYCLE)) {
            fputs(", \"cycle\": ", out);
            json_parts(out, t, f, TRACE_PART_CYCLE, "count");
        }
        break;
    case TRACE_FINDING_COLLECTIVE_MISMATCH:
    case TRACE_FINDING_BARRIER_MISMATCH:
        fprintf(out, ", \"%s\": ", about->object);
        trace_json_str(out, trace_str(t, f->object));
        fprintf(out, ", \"generation\": %llu, \"participants\": ",
                (unsigned long long)f->generation);
        json_parts(out, t, f, TRACE_PART_PARTICIPANT,
                   f->kind == TRACE_FINDING_BARRIER_MISMATCH ? "count" : "size");
        break;
    case TRACE_FINDING_SEMAPHORE_RACE:
        fprintf(out, ", \"%s\": ", about->object);
        trace_json_str(out, trace_str(t, f->object));
        fputs(",\n   \"first\": ", out);
        json_ref(out, t, &f->first, false);
        fputs(",\n   \"second\": ", out);
        json_ref(out, t, &f->second, false);
        break;
    case TRACE_FINDING_REDUNDANT_SYNC:
        fputs(", \"sync\": ", out);
        trace_json_str(out, trace_kind_str(f->second.kind));
        fputs(", \"at\": ", out);
        json_ref(out, t, &f->second, false);
        break;
    default:                    /* a kind without fields of its own */
        if (about->object && f->object != TRACE_NONE) {
            fprintf(out, ", \"%s\": ", about->object);
            trace_json_str(out, trace_str(t, f->object));
        }
        if (f->second.seq != TRACE_NO_SEQ) {
            fputs(", \"at\": ", out);
            json_ref(out, t, &f->second, true);
        }
        break;
    }
    if (f->text) {
        fputs(",\n   \"text\": ", out);
        trace_json_str(out, f->text);
    }
    if (f->fix) {
        fputs(",\n   \"fix\": ", out);
        trace_json_str(out, f->fix);
    }
    fputc('}', out);
}

void check_print_json(FILE *out, const trace *t, const char *trace_name, uint64_t statements,
                      bool incomplete, const check_coverage *cov, const trace_finding *f,
                      size_t n, uint64_t dropped)
{
    check_status st = check_status_of(check_errors_of(f, n, dropped), incomplete, cov);
    fputs("{\"format\": \"syncsim-findings\", \"version\": 1,\n \"trace\": ", out);
    trace_json_str(out, trace_name ? trace_name : "");
    fprintf(out, ", \"status\": \"%s\", \"exit\": %d, \"complete\": %s, \"races_checked\": %s, "
                 "\"ops\": %llu,\n",
            check_status_str(st), check_exit_status(st), incomplete ? "false" : "true",
            check_sees_races(t) ? "true" : "false", (unsigned long long)statements);
    if (cov) {
        fputs(" \"coverage\": ", out);
        check_coverage_print_json(out, cov, t);
        fputs(",\n", out);
    }
    fputs(" \"findings\": [", out);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n  " : "\n  ", out);
        check_finding_print_json(out, t, &f[i]);
    }
    fputs("],\n \"summary\": {", out);
    bool any = false;
    for (int k = 0; k < TRACE_FINDING_COUNT; k++) {
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            c += f[i].kind == (trace_finding_kind)k;
        if (!c)
            continue;
        fprintf(out, "%s\"%s\": %zu", any ? ", " : "", trace_finding_str((trace_finding_kind)k), c);
        any = true;
    }
    if (dropped)
        fprintf(out, "%s\"dropped\": %llu", any ? ", " : "", (unsigned long long)dropped);
    fputs("}}\n", out);
}

void check_report_print_json(FILE *out, const check_report *rep, const char *trace_name,
                             bool incomplete)
{
    check_print_json(out, rep->t, trace_name, rep->ops, incomplete, &rep->cov, rep->f, rep->n,
                     rep->dropped);
}

/* ------------------------------------------------------------------ */
/* For people.                                                         */

/* Races are grouped by cause: the queue pair, hence the missing edge. */
static bool same_group(const trace_finding *a, const trace_finding *b)
{
    return a->kind == TRACE_FINDING_RACE && b->kind == TRACE_FINDING_RACE &&
           a->first.queue == b->first.queue && a->second.queue == b->second.queue;
}

bool check_sees_races(const trace *t)
{
    const char *a = t ? trace_get_meta(t, "accesses") : NULL;
    return !a || strcmp(a, "none") != 0;
}

const char *check_verdict(char *buf, size_t cap, const trace *t, uint64_t statements,
                          uint64_t found, bool incomplete, const check_coverage *cov,
                          const trace_finding *f, size_t n)
{
    size_t len = 0;
#define ADD(...) (len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, __VA_ARGS__))
    /* Without a coverage (a check stored before coverage was), the
     * metadata alone says what is known: byte ranges or none, drops, ranks. */
    check_coverage meta_only;
    if (!cov) {
        check_coverage_init(&meta_only, t);
        meta_only.captured = !check_sees_races(t);
        meta_only.device = meta_only.captured;  /* "none of them had ranges" */
        cov = &meta_only;
    }
    bool full = check_coverage_full(cov);
    /* warnings alone (redundant syncs) leave a trace clean of errors */
    uint64_t warnings = (uint64_t)n == found ? found - check_errors_of(f, n, 0) : 0;
    if (found == 0 || warnings == found) {
        const char *none = found ? "errors" : "findings";
        if (incomplete)
            ADD("incomplete: %llu statements checked, no %s among them; the run is still "
                "recording or was interrupted, so it is not known to be clean",
                (unsigned long long)statements, none);
        else if (!full)
            ADD("no %s, partial coverage: %llu statements; not judged: ", none,
                (unsigned long long)statements);
        else
            ADD("clean: %llu statements, no %s", (unsigned long long)statements, none);
        if (warnings)
            ADD("%s%llu warning%s (%s %llu)", !full && !incomplete ? "" : "; ",
                (unsigned long long)warnings, warnings == 1 ? "" : "s",
                trace_finding_str(TRACE_FINDING_REDUNDANT_SYNC), (unsigned long long)warnings);
    } else {
        /* Kind words are the spec's ("wait-unrecorded"), so they are counted
         * rather than pluralised: "3 findings in 27 statements (race 2, hang 1)". */
        ADD("%llu finding%s in %llu statements", (unsigned long long)found, found == 1 ? "" : "s",
            (unsigned long long)statements);
        if ((uint64_t)n < found)
            ADD("; %zu of %llu shown (--max-findings)", n, (unsigned long long)found);
        const char *sep = (uint64_t)n < found ? ": " : " (";
        for (int k = 0; k < TRACE_FINDING_COUNT; k++) {
            size_t c = 0;
            for (size_t i = 0; i < n; i++)
                c += f[i].kind == (trace_finding_kind)k;
            if (c) {
                ADD("%s%s %zu", sep, trace_finding_str((trace_finding_kind)k), c);
                sep = ", ";
            }
        }
        if ((uint64_t)n >= found)
            ADD(")");
        if (incomplete)
            ADD("; the run is incomplete (still recording or interrupted)");
    }
    if (found == 0 && !incomplete && !full) {
        len += check_coverage_missing(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,
                                      cov, t);
    } else if (!full || cov->captured) {
        ADD("; ");
        len += check_coverage_describe(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,
                                       cov, t);
    }
#undef ADD
    if (cap && len >= cap)
        buf[cap - 1] = '\0';
    return buf;
}

void check_report_print(FILE *out, const check_report *rep, bool incomplete)
{
    const trace *t = rep->t;
    char verdict[1024];
    uint64_t found = rep->n + rep->dropped;
    fprintf(out, "%s\n", check_verdict(verdict, sizeof verdict, t, rep->ops, found, incomplete,
                                       &rep->cov, rep->f, rep->n));
    if (found == 0)
        return;
    bool *shown = calloc(rep->n ? rep->n : 1, sizeof *shown);
    if (!shown)
        return;
    for (size_t i = 0; i < rep->n; i++) {
        if (shown[i])
            continue;
        const trace_finding *f = &rep->f[i];
        size_t more = 0;
        if (f->kind == TRACE_FINDING_RACE)
            for (size_t j = i + 1; j < rep->n; j++)
                if (!shown[j] && same_group(f, &rep->f[j])) {
                    shown[j] = true;
                    more++;
                }
        fprintf(out, "\n%s", trace_finding_str(f->kind));
        const trace_stmt_ref *r = f->second.seq != TRACE_NO_SEQ ? &f->second : &f->first;
        if (r->seq != TRACE_NO_SEQ) {
            if (r->line)
                fprintf(out, " (line %u, seq %llu)", r->line, (unsigned long long)r->seq);
            else
                fprintf(out, " (seq %llu)", (unsigned long long)r->seq);
        }
        fprintf(out, ": %s\n", f->text ? f->text : "");
        if (f->fix)
            fprintf(out, "  fix: %s\n", f->fix);
        if (more)
            fprintf(out, "  ... and %zu more race%s between %s and %s with the same missing "
                         "edge\n",
                    more, more == 1 ? "" : "s", check_queue_name(t, f->first.queue),
                    check_queue_name(t, f->second.queue));
    }
    free(shown);
}

/* ------------------------------------------------------------------ */
/* Compiler-style lines.                                               */

bool check_finding_is_error(const trace_finding *f)
{
    return f->kind != TRACE_FINDING_REDUNDANT_SYNC;
}

static size_t add_place(check_place *out, size_t cap, size_t n, check_place place)
{
    if (n < cap)
        out[n] = place;
    return n + 1;
}

/* A side of a finding as a place. */
static check_place ref_place(const char *role, const trace_stmt_ref *r)
{
    return (check_place){ role, NULL, r->queue, r->line, r->seq, r->label, r->site };
}

size_t check_finding_places(const trace_finding *f, check_place *out, size_t cap)
{
    size_t n = 0;
    const char *other = f->kind == TRACE_FINDING_RACE             ? "the other access"
                        : f->kind == TRACE_FINDING_USE_AFTER_FREE ? "the free"
                        : f->kind == TRACE_FINDING_SEMAPHORE_RACE ? "the other set"
                                                                  : "the other statement";
    bool two = f->first.seq != TRACE_NO_SEQ && f->second.seq != TRACE_NO_SEQ;
    if (f->second.seq != TRACE_NO_SEQ)
        n = add_place(out, cap, n, ref_place(two ? "the later statement" : "here", &f->second));
    if (f->first.seq != TRACE_NO_SEQ)
        n = add_place(out, cap, n, ref_place(two ? other : "here", &f->first));
    for (uint32_t i = 0; i < f->n_parts; i++) {
        const trace_finding_part *p = &f->parts[i];
        if (p->role == TRACE_PART_CYCLE || p->seq == TRACE_NO_SEQ)
            continue;
        const char *role = p->role == TRACE_PART_BLOCKED ? "blocked here"
                           : p->extra                    ? "one arrival too many"
                                                         : "a participant";
        n = add_place(out, cap, n,
                      (check_place){ role, p->text, p->queue, p->line, p->seq, TRACE_NONE,
                                     p->site });
    }
    return n;
}

uint32_t check_site_line(const char *site, size_t *file_len)
{
    const char *colon = strrchr(site, ':');
    if (!colon || colon == site || !colon[1])
        return 0;
    uint64_t line = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9' || line > UINT32_MAX / 10)
            return 0;
        line = line * 10 + (uint64_t)(*p - '0');
    }
    *file_len = (size_t)(colon - site);
    return line <= UINT32_MAX ? (uint32_t)line : 0;
}

/* path relative to the working directory when it lies under it, else as
 * given; malloc'd. */
static char *relative_to_cwd(const char *path)
{
    char cwd[4096];
    if (path[0] == '/' && getcwd(cwd, sizeof cwd)) {
        size_t n = strlen(cwd);
        if (n > 1 && strncmp(path, cwd, n) == 0 && path[n] == '/')
            return strdup(path + n + 1);
    }
    return strdup(path);
}

check_loc check_place_locate(const trace *t, const char *path, bool in_db, const check_place *s,
                             bool prefer_site, char **file, uint32_t *line)
{
    *line = 1;
    if (s) {
        const char *site = s->site != TRACE_NONE ? trace_str(t, s->site) : NULL;
        size_t site_len = 0;
        uint32_t site_line = site ? check_site_line(site, &site_len) : 0;
        /* the text the statement's line counts in */
        const char *text = in_db ? trace_get_meta(t, "source_file") : path;
        bool own = s->line && text && (!in_db || access(text, R_OK) == 0);
        if (site_line && (prefer_site || !own)) {
            *file = strndup(site, site_len);
            *line = site_line;
            return CHECK_LOC_SITE;
        }
        if (own) {
            *file = in_db ? relative_to_cwd(text) : strdup(path);
            *line = s->line;
            return CHECK_LOC_TEXT;
        }
    }
    *file = strdup(path);
    return CHECK_LOC_WHOLE;
}

/* "FILE:LINE:1: " as check_place_locate says; true when the line stands
 * for the whole trace, so that the seq must be named. */
static bool print_place(FILE *out, const trace *t, const char *path, bool in_db,
                        const check_place *s)
{
    char *file = NULL;
    uint32_t line;
    check_loc loc = check_place_locate(t, path, in_db, s, false, &file, &line);
    fprintf(out, "%s:%u:1: ", file ? file : path, line);
    free(file);
    return loc == CHECK_LOC_WHOLE && s && s->seq != TRACE_NO_SEQ;
}

/* "note: ROLE (QUEUE)[: DETAIL]"; with a call site "note: ROLE: LABEL
 * (QUEUE) at SITE[: DETAIL]" (without a label "ROLE (QUEUE) at SITE"); a
 * statement without a line of its own "(QUEUE, seq N)". */
static void print_place_note(FILE *out, const trace *t, const char *path, bool in_db,
                             const check_place *s)
{
    bool name_seq = print_place(out, t, path, in_db, s);
    bool labelled = s->site != TRACE_NONE && s->label != TRACE_NONE &&
                    s->label != TRACE_LABEL_LAZY;
    fprintf(out, "note: %s%s%s (%s", s->role, labelled ? ": " : "",
            labelled ? trace_str(t, s->label) : "", check_queue_name(t, s->queue));
    if (name_seq)
        fprintf(out, ", seq %llu", (unsigned long long)s->seq);
    fputc(')', out);
    if (s->site != TRACE_NONE)
        fprintf(out, " at %s", trace_str(t, s->site));
    fprintf(out, "%s%s\n", s->detail ? ": " : "", s->detail ? s->detail : "");
}

void check_print_diagnostics(FILE *out, const trace *t, const char *path, bool in_db,
                             const trace_finding *f, size_t n)
{
    bool *shown = calloc(n ? n : 1, sizeof *shown);
    if (!shown)
        return;
    for (size_t i = 0; i < n; i++) {
        if (shown[i])
            continue;
        const trace_finding *x = &f[i];
        size_t more = 0;
        if (x->kind == TRACE_FINDING_RACE)
            for (size_t j = i + 1; j < n; j++)
                if (!shown[j] && same_group(x, &f[j])) {
                    shown[j] = true;
                    more++;
                }
        check_place sites[16];
        size_t ns = check_finding_places(x, sites, 16);
        const check_place *at = ns ? &sites[0] : NULL;
        bool name_seq = print_place(out, t, path, in_db, at);
        fprintf(out, "%s: %s: %s", check_finding_is_error(x) ? "error" : "warning",
                trace_finding_str(x->kind), x->text ? x->text : trace_finding_about(x->kind)->summary);
        if (name_seq)
            fprintf(out, " (seq %llu)", (unsigned long long)at->seq);
        fputc('\n', out);
        if (x->fix) {
            print_place(out, t, path, in_db, at);
            fprintf(out, "note: fix: %s\n", x->fix);
        }
        /* the statement the error names has a note only for its call site */
        for (size_t k = at && at->site != TRACE_NONE ? 0 : 1; k < ns && k < 16; k++)
            print_place_note(out, t, path, in_db, &sites[k]);
        if (more) {
            print_place(out, t, path, in_db, at);
            fprintf(out, "note: and %zu more race%s between %s and %s with the same missing "
                         "edge\n",
                    more, more == 1 ? "" : "s", check_queue_name(t, x->first.queue),
                    check_queue_name(t, x->second.queue));
        }
    }
    free(shown);
}

/* ------------------------------------------------------------------ */
/* Expectations.                                                       */

static bool name_matches(const trace *t, const trace_stmt_ref *r, const char *want)
{
    if (r->seq == TRACE_NO_SEQ)
        return false;
    if (r->label != TRACE_NONE && strcmp(trace_str(t, r->label), want) == 0)
        return true;
    const char *at = strrchr(want, '@');
    const char *q = check_queue_name(t, r->queue);
    size_t ql = strlen(q);
    if (at && (size_t)(at - want) == ql && memcmp(want, q, ql) == 0) {
        char *end;
        unsigned long line = strtoul(at + 1, &end, 10);
        return *end == '\0' && r->line && line == r->line;
    }
    const char *hash = strrchr(want, '#');
    if (hash && (size_t)(hash - want) == ql && memcmp(want, q, ql) == 0) {
        char *end;
        unsigned long long seq = strtoull(hash + 1, &end, 10);
        return *end == '\0' && seq == r->seq;
    }
    return false;
}

static bool buffer_matches(const trace *t, const trace_finding *f, const char *want)
{
    if (f->buffer != TRACE_NONE && strcmp(trace_str(t, t->buffers[f->buffer].name), want) == 0)
        return true;
    return f->root != TRACE_NONE && strcmp(trace_str(t, t->buffers[f->root].name), want) == 0;
}

static uint32_t blocked_queues(const trace_finding *f)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < f->n_parts; i++)
        n += f->parts[i].role == TRACE_PART_BLOCKED;
    return n;
}

static bool expect_matches(const trace *t, const trace_expect *x, const trace_finding *f)
{
    if (x->kind != f->kind)
        return false;
    const char *object = trace_finding_about(f->kind)->object;
    uint32_t n_queue = 0;
    for (uint32_t i = 0; i < x->n_kv; i++) {
        const char *k = trace_str(t, x->kv[i].key), *v = trace_str(t, x->kv[i].value);
        if (strcmp(k, "type") == 0) {
            uint8_t want = strcmp(v, "RAW") == 0   ? TRACE_RACE_RAW
                           : strcmp(v, "WAR") == 0 ? TRACE_RACE_WAR
                           : strcmp(v, "WAW") == 0 ? TRACE_RACE_WAW
                                                   : 0;
            if (!(f->race_types & want))
                return false;
        } else if (strcmp(k, "first") == 0) {
            if (!name_matches(t, &f->first, v))
                return false;
        } else if (strcmp(k, "second") == 0) {
            if (!name_matches(t, &f->second, v))
                return false;
        } else if (strcmp(k, "buffer") == 0) {
            if (!buffer_matches(t, f, v))
                return false;
        } else if (object && strcmp(k, object) == 0) {
            if (f->object == TRACE_NONE || strcmp(trace_str(t, f->object), v) != 0)
                return false;
        } else if (strcmp(k, "queue") == 0) {
            bool found = false;
            for (uint32_t j = 0; j < f->n_parts && !found; j++)
                found = f->parts[j].role == TRACE_PART_BLOCKED &&
                        strcmp(check_queue_name(t, f->parts[j].queue), v) == 0;
            if (!found)
                return false;
            n_queue++;
        } else if (strcmp(k, "line") == 0) {
            char *end;
            unsigned long line = strtoul(v, &end, 0);
            if (*end || f->second.line != line)
                return false;
        }
        /* unknown keys are metadata: they do not take part */
    }
    if (f->kind == TRACE_FINDING_HANG && n_queue != blocked_queues(f))
        return false;   /* a hang names exactly the blocked queues */
    return true;
}

static void print_expect(FILE *out, const trace *t, const trace_expect *x)
{
    fprintf(out, "expect %s", trace_finding_str(x->kind));
    for (uint32_t i = 0; i < x->n_kv; i++)
        fprintf(out, " %s=%s", trace_str(t, x->kv[i].key), trace_str(t, x->kv[i].value));
    if (x->line)
        fprintf(out, "  (line %u)", x->line);
    fputc('\n', out);
}

/* A finding as the expect line that would match it. */
static void print_as_expect(FILE *out, const check_report *rep, const trace_finding *f)
{
    const trace *t = rep->t;
    const char *object = trace_finding_about(f->kind)->object;
    char a[256], b[256];
    fputs(trace_finding_str(f->kind), out);
    switch (f->kind) {
    case TRACE_FINDING_RACE:
        fprintf(out, " type=%s first=%s second=%s buffer=%s", check_race_word(f->race_type),
                check_ref_name(t, &f->first, a, sizeof a),
                check_ref_name(t, &f->second, b, sizeof b),
                trace_str(t, t->buffers[f->buffer != TRACE_NONE ? f->buffer : f->root].name));
        break;
    case TRACE_FINDING_HANG:
        for (uint32_t i = 0; i < f->n_parts; i++)
            if (f->parts[i].role == TRACE_PART_BLOCKED)
                fprintf(out, " queue=%s", check_queue_name(t, f->parts[i].queue));
        break;
    case TRACE_FINDING_USE_AFTER_FREE:
        fprintf(out, " buffer=%s second=%s", trace_str(t, t->buffers[f->root].name),
                check_ref_name(t, &f->second, b, sizeof b));
        break;
    case TRACE_FINDING_REDUNDANT_SYNC:
        fprintf(out, " line=%u", f->second.line);
        break;
    default:
        if (object)
            fprintf(out, " %s=%s", object, trace_str(t, f->object));
    }
    if (f->text)
        fprintf(out, "   # %s", f->text);
    fputc('\n', out);
}

bool check_report_expect(FILE *out, const check_report *rep)
{
    const trace *t = rep->t;
    if (t->n_expects == 0) {
        fprintf(out, "the trace has no expect lines: nothing to compare with\n");
        return false;
    }
    bool *used = calloc(rep->n ? rep->n : 1, sizeof *used);
    bool *met = calloc(t->n_expects, sizeof *met);
    if (!used || !met) {
        free(used);
        free(met);
        return false;
    }
    bool ok = true;
    bool want_clean = false;
    /* Specific expectations first, so that a loose one cannot take the
     * finding a specific one needs: two passes, most keys first. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < t->n_expects; i++) {
            const trace_expect *x = &t->expects[i];
            if (met[i])
                continue;
            if (x->kind == TRACE_FINDING_CLEAN) {
                want_clean = true;
                met[i] = true;
                continue;
            }
            bool has_pair = false;
            for (uint32_t k = 0; k < x->n_kv; k++) {
                const char *key = trace_str(t, x->kv[k].key);
                has_pair |= strcmp(key, "first") == 0 || strcmp(key, "second") == 0;
            }
            if (pass == 0 && !has_pair && x->kind == TRACE_FINDING_RACE)
                continue;
            for (size_t j = 0; j < rep->n; j++) {
                if (!used[j] && expect_matches(t, x, &rep->f[j])) {
                    used[j] = met[i] = true;
                    break;
                }
            }
        }
    }
    size_t n_missing = 0, n_unexpected = 0;
    for (uint32_t i = 0; i < t->n_expects; i++)
        n_missing += !met[i];
    for (size_t j = 0; j < rep->n; j++)
        n_unexpected += !used[j];
    if (want_clean && rep->n)
        ok = false;
    if (n_missing || n_unexpected)
        ok = false;
    if (!ok) {
        if (n_missing) {
            fprintf(out, "missing (expected, not found):\n");
            for (uint32_t i = 0; i < t->n_expects; i++)
                if (!met[i]) {
                    fputs("  ", out);
                    print_expect(out, t, &t->expects[i]);
                }
        }
        if (n_unexpected) {
            fprintf(out, "unexpected (found, not expected%s):\n",
                    want_clean ? "; the trace expects clean" : "");
            for (size_t j = 0; j < rep->n; j++)
                if (!used[j]) {
                    fputs("  expect ", out);
                    print_as_expect(out, rep, &rep->f[j]);
                }
        }
        if (rep->dropped)
            fprintf(out, "(%llu findings were not kept: --max-findings)\n",
                    (unsigned long long)rep->dropped);
    }
    free(used);
    free(met);
    return ok;
}
