/*
 * sarif.c -- findings as SARIF 2.1.0, the format code-review and
 * code-scanning tools read, and the fingerprint that names a finding across
 * edits of its trace.
 *
 * The log: one run (one `check`, however many traces it was given) whose
 * tool.driver lists every finding kind of TRACE_FINDING_MAP as a rule (id:
 * the kind's word, ruleIndex: its row less one, level: "error", "warning"
 * for redundant-sync), and one result per finding:
 *
 *   message      the finding's text (what happened)
 *   locations    both sides (check_finding_places: the statement reported,
 *                then the other access, the free, the other set), each a
 *                physical location -- the trace's URI and, for a text
 *                trace, the region {startLine, startColumn 1}; or, for a
 *                statement whose call site (site=) is FILE:LINE, that
 *                file and {startLine} in the program's source, the trace
 *                line or seq then in the message -- with a logical
 *                location naming the queue and the statement's seq (all
 *                there is for a database, whose statements have no line of
 *                their own); a site that is not FILE:LINE
 *                (OBJECT+0xOFF) is named in the message
 *   relatedLocations  the parts that name a statement (a hang's blocked
 *                queues, a mismatch's participants)
 *   fixes        where the statement has a line: one fix whose description
 *                is the concrete fix and whose artifactChange marks where
 *                it goes -- an empty region at the start of the statement's
 *                line (SARIF requires a replacement; the fixes syncsim
 *                words name statements to add, which the text describes),
 *                or, for a redundant sync, the deletion of its line
 *   partialFingerprints  {"syncsim/v1": check_finding_fingerprint, hex}
 *
 * and, at the end, one invocation with the command's exit status.
 * tests/cli/test_cli_sarif.c validates the output against the OASIS schema
 * (tests/data/sarif). Written here and nowhere else; nothing reads it back.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Fingerprints.                                                       */

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;      /* a separator: "ab","c" != "a","bc" */
}

/* A side of a finding by name: its queue, and its label or statement kind. */
static uint64_t fnv_ref(uint64_t h, const trace *t, const trace_stmt_ref *r)
{
    if (r->seq == TRACE_NO_SEQ)
        return fnv(h, "-");
    h = fnv(h, check_queue_name(t, r->queue));
    return fnv(h, r->label != TRACE_NONE && r->label != TRACE_LABEL_LAZY ? trace_str(t, r->label)
                                                                         : trace_kind_str(r->kind));
}

uint64_t check_finding_fingerprint(const trace *t, const trace_finding *f)
{
    uint64_t h = fnv(1469598103934665603ULL, trace_finding_str(f->kind));
    if (f->kind == TRACE_FINDING_RACE)
        h = fnv(h, check_race_word(f->race_type));
    if (f->kind == TRACE_FINDING_RACE || f->kind == TRACE_FINDING_USE_AFTER_FREE)
        h = fnv(h, f->root < t->n_buffers ? trace_str(t, t->buffers[f->root].name) : "?");
    if (trace_finding_about(f->kind)->object && f->object != TRACE_NONE)
        h = fnv(h, trace_str(t, f->object));
    h = fnv_ref(h, t, &f->first);
    h = fnv_ref(h, t, &f->second);
    /* parts by queue name, in any order (a hang is the set of its queues) */
    uint64_t parts = 0;
    for (uint32_t i = 0; i < f->n_parts; i++)
        parts += fnv(fnv(1469598103934665603ULL, f->parts[i].role == TRACE_PART_CYCLE ? "c" : "p"),
                     check_queue_name(t, f->parts[i].queue));
    return h ^ parts;
}

/* ------------------------------------------------------------------ */
/* The log.                                                            */

struct check_sarif {
    FILE *out;
    size_t results;
};

/* A path as a URI reference: every byte outside RFC 3986's unreserved
 * characters and '/' percent-encoded. */
static void json_uri(FILE *out, const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    char *u = malloc(3 * n + 1), *p = u;
    if (!u) {
        trace_json_str(out, path);
        return;
    }
    for (const unsigned char *s = (const unsigned char *)path; *s; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
            strchr("-._~/", *s)) {
            *p++ = (char)*s;
        } else {
            *p++ = '%';
            *p++ = hex[*s >> 4];
            *p++ = hex[*s & 15];
        }
    }
    *p = '\0';
    trace_json_str(out, u);
    free(u);
}

static const char *level_of(trace_finding_kind k)
{
    trace_finding probe = { .kind = k };
    return check_finding_is_error(&probe) ? "error" : "warning";
}

check_sarif *check_sarif_begin(FILE *out)
{
    check_sarif *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->out = out;
    fputs("{\"$schema\": \"https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
          "sarif-schema-2.1.0.json\",\n \"version\": \"2.1.0\",\n \"runs\": [{\n"
          "  \"tool\": {\"driver\": {\"name\": \"syncsim\", \"version\": \"" SYNCSIM_VERSION "\",\n"
          "   \"rules\": [",
          out);
    for (int k = 1; k < TRACE_FINDING_COUNT; k++) {
        const trace_finding_info *about = trace_finding_about((trace_finding_kind)k);
        fputs(k > 1 ? ",\n    {\"id\": " : "\n    {\"id\": ", out);
        trace_json_str(out, about->word);
        fputs(", \"shortDescription\": {\"text\": ", out);
        trace_json_str(out, about->summary);
        fprintf(out, "}, \"defaultConfiguration\": {\"level\": \"%s\"}}",
                level_of((trace_finding_kind)k));
    }
    fputs("]}},\n  \"results\": [", out);
    return w;
}

/* One location object: the statement in its trace, with a message saying
 * what it is. A statement whose call site is FILE:LINE is located there,
 * in the program's source (what a reviewer wants to open); the message
 * then names the place in the trace. Another site is named in the
 * message only. */
static void location(FILE *out, const trace *t, const char *path, bool in_db,
                     const check_place *s, int id)
{
    const char *site = s->site != TRACE_NONE ? trace_str(t, s->site) : NULL;
    size_t file_len = 0;
    uint32_t src_line = site ? check_site_line(site, &file_len) : 0;
    fputc('{', out);
    if (id >= 0)
        fprintf(out, "\"id\": %d, ", id);
    fputs("\"physicalLocation\": {\"artifactLocation\": {\"uri\": ", out);
    char *file = src_line ? check_strf("%.*s", (int)file_len, site) : NULL;
    json_uri(out, file ? file : path);
    fputc('}', out);
    if (file)
        fprintf(out, ", \"region\": {\"startLine\": %u}", src_line);
    else if (s->line && !in_db)
        fprintf(out, ", \"region\": {\"startLine\": %u, \"startColumn\": 1}", s->line);
    fputs("}, \"logicalLocations\": [{\"name\": ", out);
    char name[64];
    snprintf(name, sizeof name, "seq %llu", (unsigned long long)s->seq);
    trace_json_str(out, name);
    fputs(", \"fullyQualifiedName\": ", out);
    char *fq = check_strf("%s/%s", check_queue_name(t, s->queue), name);
    trace_json_str(out, fq ? fq : name);
    free(fq);
    fputs(", \"kind\": \"statement\"}], \"message\": {\"text\": ", out);
    char where[64] = "";
    if (file && s->line && !in_db)
        snprintf(where, sizeof where, ", trace line %u", s->line);
    else if (file)
        snprintf(where, sizeof where, ", trace seq %llu", (unsigned long long)s->seq);
    char *text = check_strf("%s (%s)%s%s%s%s%s", s->role, check_queue_name(t, s->queue),
                            site ? " at " : "", site ? site : "", where,
                            s->detail ? ": " : "", s->detail ? s->detail : "");
    trace_json_str(out, text ? text : s->role);
    free(text);
    free(file);
    fputs("}}", out);
}

/* The fix object of finding f reported at site s (which has a line). */
static void fix_object(FILE *out, const char *path, const trace_finding *f, const check_place *s)
{
    fputs(",\n    \"fixes\": [{\"description\": {\"text\": ", out);
    trace_json_str(out, f->fix);
    fputs("}, \"artifactChanges\": [{\"artifactLocation\": {\"uri\": ", out);
    json_uri(out, path);
    if (f->kind == TRACE_FINDING_REDUNDANT_SYNC)
        fprintf(out, "}, \"replacements\": [{\"deletedRegion\": {\"startLine\": %u, "
                     "\"startColumn\": 1, \"endLine\": %u, \"endColumn\": 1}}]}]}]",
                s->line, s->line + 1);
    else
        fprintf(out, "}, \"replacements\": [{\"deletedRegion\": {\"startLine\": %u, "
                     "\"startColumn\": 1, \"endColumn\": 1}}]}]}]",
                s->line);
}

void check_sarif_add(check_sarif *w, const trace *t, const char *path, bool in_db,
                     const trace_finding *f, size_t n)
{
    FILE *out = w->out;
    for (size_t i = 0; i < n; i++) {
        const trace_finding *x = &f[i];
        check_place sites[16];
        size_t ns = check_finding_places(x, sites, 16);
        if (ns > 16)
            ns = 16;
        fputs(w->results++ ? ",\n   {" : "\n   {", out);
        fputs("\"ruleId\": ", out);
        trace_json_str(out, trace_finding_str(x->kind));
        fprintf(out, ", \"ruleIndex\": %d, \"level\": \"%s\",\n    \"message\": {\"text\": ",
                (int)x->kind - 1, check_finding_is_error(x) ? "error" : "warning");
        trace_json_str(out, x->text ? x->text : trace_finding_about(x->kind)->summary);
        fputs("},\n    \"locations\": [", out);
        /* both sides (check_finding_places lists them first, parts after);
         * a hang's first blocked queue stands for it; without any statement,
         * the trace itself */
        size_t sides = (x->second.seq != TRACE_NO_SEQ) + (x->first.seq != TRACE_NO_SEQ);
        if (!sides && ns)
            sides = 1;
        for (size_t k = 0; k < sides; k++) {
            fputs(k ? ", " : "", out);
            location(out, t, path, in_db, &sites[k], -1);
        }
        if (!sides) {
            fputs("{\"physicalLocation\": {\"artifactLocation\": {\"uri\": ", out);
            json_uri(out, path);
            fputs("}}}", out);
        }
        fputc(']', out);
        if (ns > sides) {
            fputs(",\n    \"relatedLocations\": [", out);
            for (size_t k = sides; k < ns; k++) {
                fputs(k > sides ? ", " : "", out);
                location(out, t, path, in_db, &sites[k], (int)(k - sides + 1));
            }
            fputc(']', out);
        }
        if (x->fix && sides && sites[0].line && !in_db)
            fix_object(out, path, x, &sites[0]);
        else if (x->fix) {
            fputs(",\n    \"properties\": {\"fix\": ", out);
            trace_json_str(out, x->fix);
            fputc('}', out);
        }
        fprintf(out, ",\n    \"partialFingerprints\": {\"syncsim/v1\": \"%016llx\"}}",
                (unsigned long long)check_finding_fingerprint(t, x));
    }
}

void check_sarif_end(check_sarif *w, int exit_status)
{
    bool ok = exit_status != 2;
    fprintf(w->out,
            "],\n  \"invocations\": [{\"executionSuccessful\": %s, \"exitCode\": %d}]\n }]}\n",
            ok ? "true" : "false", exit_status);
    free(w);
}
