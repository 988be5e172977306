/*
 * sarif.c -- findings as SARIF 2.1.0, the format code-review and
 * code-scanning tools read, and the fingerprint that names a finding across
 * edits of its trace.
 *
 * The log: one run (one `check`, however many traces it was given) whose
 * tool.driver lists every finding kind of TRACE_FINDING_MAP as a rule (id:
 * the kind's word, ruleIndex: its row less one, level: "error", "warning"
 * for redundant-sync; shortDescription the kind's summary, fullDescription
 * and help from rule_text below) and the notifications below, and one
 * result per finding:
 *
 *   message      the finding's text (what happened)
 *   locations    both sides (check_finding_places: the statement reported,
 *                then the other access, the free, the other set), each a
 *                physical location where check_place_locate puts it --
 *                the statement's call site when FILE:LINE (what a reviewer
 *                opens), else its line in the text trace (a database's: the
 *                text it was imported from), else line 1 of the trace --
 *                always with a region, and a logical location naming the
 *                queue and the seq; the message names the trace line or
 *                the seq where the region is not the statement's own line
 *   relatedLocations  the parts that name a statement (a hang's blocked
 *                queues, a mismatch's participants)
 *   fixes        where the change can be written into a text trace: the
 *                statements of a race's missing edge inserted at the lines
 *                where they go (check_edge_of: a sync, an event record and
 *                wait, a flag signal and await, named anew), the line of a
 *                redundant sync or of a second free deleted; otherwise the
 *                fix's words in properties.fix
 *   partialFingerprints  {"syncsim/v1": check_finding_fingerprint, hex}
 *
 * URIs are relative, under SRCROOT (the working directory, given in
 * originalUriBaseIds and as the invocation's workingDirectory) or, for a
 * file elsewhere, ROOT (file:///): code scanning shows no absolute path.
 * At the end, one invocation with the command's exit status and a
 * notification for each trace whose check is not a verdict to trust whole
 * (incomplete, partial coverage, unreadable), so that such a log never
 * looks clean.
 * tests/cli/test_cli_sarif.c validates the output against the OASIS schema
 * (tests/data/sarif) and the rules Microsoft's validator applies for GitHub
 * code scanning, and applies the fixes. Written here and nowhere else;
 * nothing reads it back.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The log.                                                            */

/* What each rule (finding kind) is and how it is fixed, for people reading
 * a code-scanning alert: fullDescription and help. The short description
 * is the kind's summary in TRACE_FINDING_MAP. */
static const struct {
    const char *full, *help;
} rule_text[TRACE_FINDING_COUNT] = {
    [TRACE_FINDING_RACE] = {
        "Two accesses to overlapping bytes of a buffer, at least one of them a write, that no "
        "synchronisation orders: on real hardware either may happen first, so what is read or "
        "left in the buffer depends on timing.",
        "Order the earlier access before the later one. The fix names the synchronisation to "
        "add -- an event recorded after the one and waited for before the other (two streams), "
        "a host sync (a stream, then the host), or a flag signalled and awaited (from a host) "
        "-- and, for a text trace, inserts those statements. docs/semantics.md gives the rules "
        "of what orders what." },
    [TRACE_FINDING_WAIT_UNRECORDED] = {
        "A wait on an event that no earlier statement, in submission order, records: the wait "
        "binds to nothing and orders nothing.",
        "Record the event before the wait in submission order (a wait binds to the most recent "
        "earlier record), or remove the wait." },
    [TRACE_FINDING_HANG] = {
        "Queues that can never advance: each waits for something -- an event, a flag, a "
        "barrier generation, a message -- that never comes; a cycle of them is a deadlock.",
        "Supply what is waited for, or break the cycle: the fix names the statement to move or "
        "add. The related locations are the other blocked queues." },
    [TRACE_FINDING_COLLECTIVE_MISMATCH] = {
        "The participants of one generation of a collective on a communicator disagree on its "
        "kind or size, or more of them arrive than the communicator has.",
        "Make every rank call the same collectives, of the same kind and size, in the same "
        "order. The related locations are the participants." },
    [TRACE_FINDING_BARRIER_MISMATCH] = {
        "More queues than count= arrive at one generation of a barrier, or they disagree on "
        "count=.",
        "Give every participant the same count, and let exactly that many arrive at each "
        "generation. The related locations are the participants." },
    [TRACE_FINDING_SEMAPHORE_RACE] = {
        "Two sets of a value semaphore that are not ordered: the value its awaits see depends "
        "on timing.",
        "Order the two sets (a flag, an event or a sync between them), so that each await sees "
        "one defined value." },
    [TRACE_FINDING_UNMATCHED_SEND] = {
        "A send that no rank receives: its peer posts no recv of the same channel and tag in "
        "order.",
        "Post the matching recv on the peer rank, or remove the send." },
    [TRACE_FINDING_USE_AFTER_FREE] = {
        "An access ordered after a free of its buffer with no alloc in between, or a buffer "
        "freed twice.",
        "Free the buffer only after its last use, ordered after it, or alloc it again before "
        "the use; free a buffer once (the fix of a double free deletes the second free)." },
    [TRACE_FINDING_REDUNDANT_SYNC] = {
        "A synchronisation whose removal adds no finding to this trace (check --redundant): "
        "the minimiser found it unnecessary here.",
        "Remove it, if the trace stands for every way the program runs: the fix deletes its "
        "line. A warning, never an error." },
};

/* Why a check of one trace did not give a verdict that can be trusted
 * whole: the invocation's notifications, listed in tool.driver. */
static const struct {
    const char *id, *summary, *full;
} notice_text[] = {
    [CHECK_SARIF_INCOMPLETE] = { "incomplete-run",
        "the run is incomplete: no finding, but not known to be clean",
        "The run was still recording, or its producer died: only the statements written "
        "so far were checked (exit status 3)." },
    [CHECK_SARIF_PARTIAL] = { "partial-coverage",
        "coverage is partial: no finding, but not known to be clean",
        "Some accesses could not be judged (statements without byte ranges, events an importer "
        "dropped, ranks absent from a job): no finding among what was judged (exit status 4)." },
    [CHECK_SARIF_UNREADABLE] = { "unreadable-input",
        "the trace could not be read",
        "The trace is malformed, corrupt, or not a trace: nothing of it was checked (exit "
        "status 2)." },
};
#define N_NOTICES (sizeof notice_text / sizeof notice_text[0])

struct check_sarif {
    FILE *out;
    size_t results;
    char *cwd;                  /* the working directory (SRCROOT), NULL when unknown */
    char **notices;             /* rendered notification objects, for the invocation */
    size_t n_notices;
    uint64_t fix_names;         /* events and flags a fix has named */
};

/* prefix, then path as a URI reference: every byte of path outside RFC
 * 3986's unreserved characters and '/' percent-encoded; malloc'd. */
static char *uri_of(const char *prefix, const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path), k = strlen(prefix);
    char *u = malloc(k + 3 * n + 1), *p = u;
    if (!u)
        return NULL;
    memcpy(p, prefix, k);
    p += k;
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
    return u;
}

/* path as a JSON string of its URI reference (uri_of). */
static void json_uri(FILE *out, const char *path)
{
    char *u = uri_of("", path);
    trace_json_str(out, u ? u : path);
    free(u);
}

/* The working directory as an absolute file URI, ending in '/' (as SARIF
 * wants a base); malloc'd. */
static char *dir_uri(const char *dir)
{
    char *slash = check_strf("%s%s", dir, strcmp(dir, "/") ? "/" : "");
    char *u = slash ? uri_of("file://", slash) : NULL;
    free(slash);
    return u;
}

/* The artifactLocation of path: a relative URI under a base id, never an
 * absolute one (GitHub code scanning shows only relative paths, or absolute
 * ones under a checkout path it knows): SRCROOT, the working directory, for
 * a file under it (or a relative name of no file here: a call site of a
 * program run elsewhere); ROOT, the file system's root, for any other. */
static void artifact(FILE *out, const check_sarif *w, const char *path)
{
    char *abs = realpath(path, NULL);
    const char *rel = path, *base = "SRCROOT";
    size_t n = w->cwd ? strlen(w->cwd) : 0;
    if (abs && n > 1 && strncmp(abs, w->cwd, n) == 0 && abs[n] == '/')
        rel = abs + n + 1;
    else if (abs || path[0] == '/') {
        rel = (abs ? abs : path) + 1;
        base = "ROOT";
    }
    while (rel[0] == '.' && rel[1] == '/')
        rel += 2;
    fputs("{\"uri\": ", out);
    json_uri(out, rel);
    fprintf(out, ", \"uriBaseId\": \"%s\"}", base);
    free(abs);
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
    w->cwd = getcwd(NULL, 0);
    fputs("{\"$schema\": \"https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
          "sarif-schema-2.1.0.json\",\n \"version\": \"2.1.0\",\n \"runs\": [{\n"
          "  \"tool\": {\"driver\": {\"name\": \"syncsim\", \"version\": \"" SYNCSIM_VERSION "\","
          " \"semanticVersion\": \"" SYNCSIM_VERSION "\",\n"
          "   \"rules\": [",
          out);
    for (int k = 1; k < TRACE_FINDING_COUNT; k++) {
        const trace_finding_info *about = trace_finding_about((trace_finding_kind)k);
        fputs(k > 1 ? ",\n    {\"id\": " : "\n    {\"id\": ", out);
        trace_json_str(out, about->word);
        fputs(", \"shortDescription\": {\"text\": ", out);
        trace_json_str(out, about->summary);
        fputs("},\n     \"fullDescription\": {\"text\": ", out);
        trace_json_str(out, rule_text[k].full ? rule_text[k].full : about->summary);
        fputs("},\n     \"help\": {\"text\": ", out);
        trace_json_str(out, rule_text[k].help ? rule_text[k].help : about->summary);
        fprintf(out, "},\n     \"defaultConfiguration\": {\"level\": \"%s\"}}",
                level_of((trace_finding_kind)k));
    }
    fputs("],\n   \"notifications\": [", out);
    for (size_t i = 0; i < N_NOTICES; i++) {
        fputs(i ? ",\n    {\"id\": " : "\n    {\"id\": ", out);
        trace_json_str(out, notice_text[i].id);
        fputs(", \"shortDescription\": {\"text\": ", out);
        trace_json_str(out, notice_text[i].summary);
        fputs("}, \"fullDescription\": {\"text\": ", out);
        trace_json_str(out, notice_text[i].full);
        fputs("}}", out);
    }
    fputs("]}},\n  \"originalUriBaseIds\": {\"SRCROOT\": {\"uri\": ", out);
    char *root = w->cwd ? dir_uri(w->cwd) : NULL;
    trace_json_str(out, root ? root : "file:///");
    free(root);
    fputs(", \"description\": {\"text\": \"the working directory of check\"}},\n"
          "   \"ROOT\": {\"uri\": \"file:///\"}},\n  \"results\": [",
          out);
    return w;
}

/* A place as the check_place of a side of a finding. */
static check_place side_place(const trace_stmt_ref *r)
{
    return (check_place){ NULL, NULL, r->queue, r->line, r->seq, r->label, r->site };
}

/* One location object: the statement where check_place_locate puts it (its
 * call site first: what a reviewer wants to open), with a region always
 * (line 1 standing for a trace whose statement has no line), a logical
 * location naming its queue and seq, and a message saying what it is --
 * the trace's line or the seq where the place is not that line. */
static void location(FILE *out, const check_sarif *w, const trace *t, const char *path,
                     bool in_db, const check_place *s, int id)
{
    char *file = NULL;
    uint32_t line;
    check_loc loc = check_place_locate(t, path, in_db, s, true, &file, &line);
    fputc('{', out);
    if (id >= 0)
        fprintf(out, "\"id\": %d, ", id);
    fputs("\"physicalLocation\": {\"artifactLocation\": ", out);
    artifact(out, w, file ? file : path);
    fprintf(out, ", \"region\": {\"startLine\": %u%s}}", line,
            loc == CHECK_LOC_TEXT ? ", \"startColumn\": 1" : "");
    free(file);
    if (!s) {
        fputc('}', out);
        return;
    }
    fputs(", \"logicalLocations\": [{\"name\": ", out);
    char name[64];
    snprintf(name, sizeof name, "seq %llu", (unsigned long long)s->seq);
    trace_json_str(out, name);
    fputs(", \"fullyQualifiedName\": ", out);
    char *fq = check_strf("%s/%s", check_queue_name(t, s->queue), name);
    trace_json_str(out, fq ? fq : name);
    free(fq);
    fputs(", \"kind\": \"statement\"}], \"message\": {\"text\": ", out);
    const char *site = s->site != TRACE_NONE ? trace_str(t, s->site) : NULL;
    char where[64] = "";
    if (loc == CHECK_LOC_SITE && s->line && !in_db)
        snprintf(where, sizeof where, ", trace line %u", s->line);
    else if (loc != CHECK_LOC_TEXT)
        snprintf(where, sizeof where, ", seq %llu", (unsigned long long)s->seq);
    char *text = check_strf("%s (%s)%s%s%s%s%s", s->role, check_queue_name(t, s->queue),
                            site ? " at " : "", site ? site : "", where,
                            s->detail ? ": " : "", s->detail ? s->detail : "");
    trace_json_str(out, text ? text : s->role);
    free(text);
    fputs("}}", out);
}

/* An event or flag name for a fix, used by no string of t. */
static void fresh_name(check_sarif *w, const trace *t, char *buf, size_t cap)
{
    do
        snprintf(buf, cap, "syncsim_fix%llu", (unsigned long long)++w->fix_names);
    while (trace_str_find(t, buf, strlen(buf)) != TRACE_NONE);
}

/* One replacement: text inserted at the start of `line` (an empty region),
 * or, with text NULL, the whole of `line` deleted. */
static void replacement(FILE *out, bool first, uint32_t line, const char *text)
{
    fputs(first ? "" : ", ", out);
    if (text) {
        fprintf(out, "{\"deletedRegion\": {\"startLine\": %u, \"startColumn\": 1, "
                     "\"endColumn\": 1}, \"insertedContent\": {\"text\": ",
                line);
        trace_json_str(out, text);
        fputs("}}", out);
    } else {
        fprintf(out, "{\"deletedRegion\": {\"startLine\": %u, \"startColumn\": 1, "
                     "\"endLine\": %u, \"endColumn\": 1}}",
                line, line + 1);
    }
}

/* The fix object of finding f, when its change can be written: the edit of
 * the trace's text that makes the fix -- a race's missing edge
 * (check_edge_of) inserted as statements at the lines where they go, a
 * redundant sync's or a second free's line deleted. Both statements must
 * have lines of their own in one text trace (a database's: the text it was
 * imported from). Returns false, having written nothing, otherwise. */
static bool fix_object(FILE *out, check_sarif *w, const trace *t, const char *path, bool in_db,
                       const trace_finding *f)
{
    bool insert = f->kind == TRACE_FINDING_RACE && f->first.seq != TRACE_NO_SEQ;
    bool remove = f->kind == TRACE_FINDING_REDUNDANT_SYNC ||
                  (f->kind == TRACE_FINDING_USE_AFTER_FREE && f->second.kind == TRACE_FREE);
    if (!f->fix || (!insert && !remove) || f->second.seq == TRACE_NO_SEQ)
        return false;
    check_place x = side_place(&f->first), y = side_place(&f->second);
    char *xfile = NULL, *yfile = NULL;
    uint32_t xl = 0, yl = 0;
    bool ok = check_place_locate(t, path, in_db, &y, false, &yfile, &yl) == CHECK_LOC_TEXT && yfile;
    if (ok && insert)
        ok = check_place_locate(t, path, in_db, &x, false, &xfile, &xl) == CHECK_LOC_TEXT &&
             xfile && strcmp(xfile, yfile) == 0 && xl < yl;
    if (ok) {
        fputs(",\n    \"fixes\": [{\"description\": {\"text\": ", out);
        trace_json_str(out, f->fix);
        fputs("}, \"artifactChanges\": [{\"artifactLocation\": ", out);
        artifact(out, w, yfile);
        fputs(", \"replacements\": [", out);
        if (remove) {
            replacement(out, true, yl, NULL);
        } else {
            check_edge e = check_edge_of(t, &f->first, &f->second);
            const char *from = check_queue_name(t, e.from), *to = check_queue_name(t, e.to);
            char name[64], *before = NULL, *after = NULL;
            if (e.kind == CHECK_EDGE_SYNC) {
                before = check_strf("%s sync %s\n", to, from);
            } else {
                fresh_name(w, t, name, sizeof name);
                bool event = e.kind == CHECK_EDGE_EVENT;
                after = check_strf("%s %s %s\n", from, event ? "record" : "signal", name);
                before = check_strf("%s %s %s\n", to, event ? "wait" : "await", name);
            }
            if (after && before && xl + 1 == yl) {
                char *both = check_strf("%s%s", after, before);
                replacement(out, true, yl, both ? both : "");
                free(both);
            } else {
                if (after)
                    replacement(out, true, xl + 1, after);
                replacement(out, !after, yl, before ? before : "");
            }
            free(after);
            free(before);
        }
        fputs("]}]}]", out);
    }
    free(xfile);
    free(yfile);
    return ok;
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
            location(out, w, t, path, in_db, &sites[k], -1);
        }
        if (!sides)
            location(out, w, t, path, in_db, NULL, -1);
        fputc(']', out);
        if (ns > sides) {
            fputs(",\n    \"relatedLocations\": [", out);
            for (size_t k = sides; k < ns; k++) {
                fputs(k > sides ? ", " : "", out);
                location(out, w, t, path, in_db, &sites[k], (int)(k - sides + 1));
            }
            fputc(']', out);
        }
        if (!fix_object(out, w, t, path, in_db, x) && x->fix) {
            fputs(",\n    \"properties\": {\"fix\": ", out);
            trace_json_str(out, x->fix);
            fputc('}', out);
        }
        fprintf(out, ",\n    \"partialFingerprints\": {\"syncsim/v1\": \"%016llx\"}}",
                (unsigned long long)check_finding_fingerprint(t, x));
    }
}

void check_sarif_notify(check_sarif *w, const char *path, check_sarif_notice kind,
                        const char *text)
{
    if ((unsigned)kind >= N_NOTICES)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return;
    fprintf(m, "{\"level\": \"%s\", \"descriptor\": {\"id\": \"%s\", \"index\": %d},\n"
               "     \"message\": {\"text\": ",
            kind == CHECK_SARIF_UNREADABLE ? "error" : "warning", notice_text[kind].id, (int)kind);
    trace_json_str(m, text);
    fputs("},\n     \"locations\": [{\"physicalLocation\": {\"artifactLocation\": ", m);
    artifact(m, w, path);
    fputs(", \"region\": {\"startLine\": 1}}}]}", m);
    if (fclose(m) != 0) {
        free(buf);
        return;
    }
    char **nn = realloc(w->notices, (w->n_notices + 1) * sizeof *nn);
    if (!nn) {
        free(buf);
        return;
    }
    w->notices = nn;
    w->notices[w->n_notices++] = buf;
}

void check_sarif_end(check_sarif *w, int exit_status)
{
    bool ok = exit_status != 2;
    FILE *out = w->out;
    fprintf(out, "],\n  \"invocations\": [{\"executionSuccessful\": %s, \"exitCode\": %d",
            ok ? "true" : "false", exit_status);
    if (w->cwd) {
        char *dir = dir_uri(w->cwd);
        fputs(", \"workingDirectory\": {\"uri\": ", out);
        trace_json_str(out, dir ? dir : "file:///");
        fputc('}', out);
        free(dir);
    }
    if (w->n_notices) {
        fputs(",\n    \"toolExecutionNotifications\": [", out);
        for (size_t i = 0; i < w->n_notices; i++) {
            fprintf(out, "%s\n     %s", i ? "," : "", w->notices[i]);
            free(w->notices[i]);
        }
        fputc(']', out);
    }
    fputs("}]\n }]}\n", out);
    free(w->notices);
    free(w->cwd);
    free(w);
}
