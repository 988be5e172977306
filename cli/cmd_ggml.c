/*
 * cmd_ggml.c -- `syncsim ggml PATH [sweep options]`: ggml's own scheduler,
 * from the user's tree, checked across the configurations users run.
 *
 * The work is real/ggml's (rggml.h): build the recording harness against
 * the tree (cached), turn each configuration of the sweep into a script of
 * the calls llama.cpp makes, run it, and run the same script through the
 * twin. This file checks each recorded trace (check/), compares the calls
 * with the twin's, and prints one line per configuration, then per
 * configuration with findings a table of them -- each side at the line of
 * ggml-backend.cpp whose call made it, and the fix -- and the fixes, each
 * once. Exit status as `check`: 0 clean (and the twin agrees), 1 findings
 * or a difference from the twin, 2 bad input or usage (a tree that does
 * not build, a patch that does not apply), 3 a configuration ggml itself
 * stopped in (its abort message is shown).
 */
#include "check/check.h"
#include "cli.h"
#include "real/ggml/rggml.h"
#include "traces/trace.h"

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_VALUES 16
#define LLAMA_SPEC "llama:n_layer=4,n_embd=64,n_head=4,n_head_kv=2,n_ff=128,n_vocab=100,n_ctx=512,ubatch=32"
#define MOE_SPEC "moe:n_layer=4,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=512,ubatch=32,n_expert=16"
/* The fix shipped with the harness (the slot-reuse race), by its name. */
#define SOURCE_WAIT_PATCH "source-stream-wait"

void cmd_ggml_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim ggml PATH [--gpus LIST] [--copies LIST] [--ubatches LIST]\n"
            "                    [--model LIST | --graph FILE] [--fallback LIST] [--family LIST]\n"
            "                    [--tokens N] [--twin POLICY|none] [--patch NAME|FILE]\n"
            "                    [--cc CC] [--cxx CXX] [--cache DIR] [--keep DIR] [-o DB]\n"
            "                    [--list] [--quiet]\n"
            "\n"
            "Checks ggml's own backend scheduler -- the ggml-backend.cpp and ggml-alloc.c of\n"
            "the tree at PATH (a ggml checkout at any commit, a branch, or llama.cpp, whose\n"
            "ggml/ is used) -- for missing synchronisation, across the configurations users\n"
            "run. Nothing of ggml is shipped or fetched: the tree is yours.\n"
            "\n"
            "How: syncsim compiles its recording harness (share/syncsim/ggml/syncsim_ggml.c)\n"
            "with ggml's scheduler and allocator from PATH, with -O0 -g, once per copy\n"
            "count (GGML_SCHED_MAX_COPIES is fixed when ggml-backend.cpp is compiled), into\n"
            "a cache keyed by the content of what is compiled (--cache; $SYNCSIM_CACHE_DIR,\n"
            "else ~/.cache/syncsim). The compilers are $CC and $CXX, else cc and c++, or\n"
            "--cc and --cxx. The harness plugs recording devices into ggml's backend\n"
            "interface, each GPU family with its own semantics:\n");
    for (int f = 0; rggml_family_at(f); f++) {
        fprintf(out, "  %-9s ", rggml_family_at(f));
        cli_wrapped(out, sched_copy_family(rggml_family_at(f))->summary, 12);
    }
    fprintf(out,
            "and the CPU, synchronous. (cuda copies from host memory asynchronously when the\n"
            "tree's ggml-cuda.cu does: llama.cpp #17795, #20793.) It drives ggml as\n"
            "llama.cpp does: a prompt of micro-batches in one llama_decode with no\n"
            "synchronize between them, then decode tokens, one llama_decode each (the logits\n"
            "read after a synchronize), the tokens after the first reusing their graph unless\n"
            "the configuration pipelines (llama.cpp #20463). Every call ggml makes\n"
            "becomes a statement of a trace, at the line of ggml-backend.cpp that made it\n"
            "(backtrace() and addr2line on the -g build); each trace is checked as `syncsim\n"
            "check` does, and the same script runs through syncsim's twin of ggml (`syncsim\n"
            "run --policy ggml-...`), whose calls must agree with ggml's, call for call.\n"
            "\n"
            "The sweep: every combination of the lists (LIST: 2, 1-4, 1,3,5-8):\n"
            "  -g, --gpus LIST       GPUs, 1-8 (default 1-4)\n"
            "  -c, --copies LIST     pipeline slots, GGML_SCHED_MAX_COPIES, 1-4 (default 1-4;\n"
            "                        1: the scheduler without pipeline parallelism)\n"
            "  -u, --ubatches LIST   prompt micro-batches of one llama_decode, 1-8 (default 1-8)\n"
            "  -m, --model LIST      llama, moe (MoE with real expert ids, the weights on the\n"
            "                        CPU as --cpu-moe), or a generator spec (docs/scheduler.md);\n"
            "                        default llama,moe\n"
            "  -G, --graph FILE      a graph file (docs/graph-format.md) instead of a model: its\n"
            "                        graph is evaluated --tokens times (no prompt)\n"
            "  -F, --fallback LIST   none, or an op the GPUs decline, which makes CPU fallback\n"
            "                        splits (rope, softmax, mul, ...); default none\n"
            "  -f, --family LIST     the GPUs' family (above); default cuda\n"
            "  -t, --tokens N        decode tokens after the prompt (default 2)\n"
            "Other options:\n"
            "      --twin POLICY     the twin's policy (default ggml-head: ggml at the commit\n"
            "                        syncsim pins; with --patch " SOURCE_WAIT_PATCH ",\n"
            "                        ggml-source-wait); none: no comparison\n"
            "  -p, --patch NAME|FILE  apply a patch to a copy of the tree first (patch -p1);\n"
            "                        NAME " SOURCE_WAIT_PATCH " is the fix of the slot-reuse race\n"
            "                        (docs/ggml-slot-race.md), shipped with the harness\n"
            "      --cc CC, --cxx CXX  the compilers\n"
            "      --cache DIR       where builds are kept\n"
            "      --keep DIR        keep each configuration's script, trace and calls in DIR\n"
            "  -o, --output DB       record each configuration's trace as a run of DB (named\n"
            "                        'ggml: CONFIGURATION'), for check, timeline, report\n"
            "  -l, --list            print the configurations of the sweep and stop (no tree)\n"
            "  -q, --quiet           the summary and the findings only (no line per\n"
            "                        configuration)\n"
            "\n"
            "Output: one line per configuration (its statements, the twin's verdict, the\n"
            "check's); then, per configuration with findings, a table: each finding's kind,\n"
            "its two sides -- the queue, the call (cpy_tensor_async, graph_compute, ...)\n"
            "and ggml-backend.cpp:LINE in the ggml_backend_sched_* function that made it --\n"
            "and a letter naming its fix; then the fixes. A side the driver made (the\n"
            "user's inputs and reads) says llama.cpp/STEP.\n"
            "\n"
            "Exit status: 0 clean and the twin agrees everywhere; 1 findings, or a call\n"
            "where the twin differs from ggml; 2 bad input or usage (no tree at PATH, a tree\n"
            "that does not build: the compiler's first error and the log); 3 ggml stopped\n"
            "in a configuration (its message is shown).\n"
            "\n"
            "In the examples $SYNCSIM_GGML_DIR is your ggml tree; docs/ggml-check.md shows\n"
            "them on ggml's history.\n"
            "\n"
            "Examples:\n"
            "  syncsim ggml --list --gpus 2 --copies 4 --ubatches 3-6\n"
            "  syncsim ggml \"$SYNCSIM_GGML_DIR\" --gpus 2 --copies 4 --ubatches 4,6 --model llama  # exit 1\n"
            "  syncsim ggml \"$SYNCSIM_GGML_DIR\" --gpus 2 --copies 4 --ubatches 6 --model llama \\\n"
            "      --patch " SOURCE_WAIT_PATCH "  # exit 0: the fix\n");
}

/* ------------------------------------------------------------------ */
/* Options.                                                            */

typedef struct int_list { int v[MAX_VALUES]; int n; } int_list;
typedef struct word_list { const char *v[MAX_VALUES]; int n; } word_list;

/* "1-4,6" within [lo, hi]; 0, or the usage error (2). */
static int parse_ints(const char *opt, const char *s, int lo, int hi, int_list *out)
{
    out->n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        char *end;
        long a = strtol(w, &end, 10), b = a;
        if (end != w && *end == '-')
            b = strtol(end + 1, &end, 10);
        if (end == w || *end || a < lo || b > hi || a > b)
            return cli_usage_error("ggml", "--%s expects numbers %d to %d (2, 1-4, 1,3), got '%s'",
                                   opt, lo, hi, s);
        for (long v = a; v <= b; v++) {
            bool seen = false;
            for (int i = 0; i < out->n; i++)
                seen |= out->v[i] == v;
            if (!seen && out->n < MAX_VALUES)
                out->v[out->n++] = (int)v;
        }
    }
    if (out->n == 0)
        return cli_usage_error("ggml", "--%s: an empty list", opt);
    return 0;
}

static int parse_words(const char *opt, char *s, word_list *out)
{
    out->n = 0;
    char *save = NULL;
    for (char *w = strtok_r(s, ",", &save); w && out->n < MAX_VALUES; w = strtok_r(NULL, ",", &save))
        out->v[out->n++] = w;
    if (out->n == 0)
        return cli_usage_error("ggml", "--%s: an empty list", opt);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Findings at ggml's lines.                                           */

/* One side of a finding, read from its statement's attributes. */
typedef struct side {
    char queue[32], label[128], site[128], fn[96], call[48];
    int token, split;
} side;

static const char *stmt_attr(const trace *t, const trace_stmt *s, const char *key)
{
    for (uint32_t i = 0; i < s->n_attr; i++)
        if (strcmp(trace_str(t, s->attr[i].key), key) == 0)
            return trace_str(t, s->attr[i].value);
    return "";
}

static void side_of(const trace *t, uint64_t seq, side *out)
{
    memset(out, 0, sizeof *out);
    if (seq == TRACE_NO_SEQ || seq >= t->n_stmts)
        return;
    trace_stmt s;
    trace_stmt_at(t, seq, &s);
    snprintf(out->queue, sizeof out->queue, "%s", trace_str(t, t->queues[s.queue].name));
    if (s.label != TRACE_NONE)
        snprintf(out->label, sizeof out->label, "%s", trace_str(t, s.label));
    else
        snprintf(out->label, sizeof out->label, "%s", trace_kind_str(s.kind));
    snprintf(out->site, sizeof out->site, "%s", stmt_attr(t, &s, "site"));
    snprintf(out->fn, sizeof out->fn, "%s", stmt_attr(t, &s, "fn"));
    snprintf(out->call, sizeof out->call, "%s", stmt_attr(t, &s, "call"));
    out->token = atoi(stmt_attr(t, &s, "token"));
    out->split = atoi(stmt_attr(t, &s, "split"));
}

/* The fixes a finding can point to: ggml's two known races, else the
 * checker's own fix for that finding. */
enum { FIX_SLOT_REUSE, FIX_HOST_ASYNC, FIX_CHECKER };

static const char *const fix_text[] = {
    "the copy into the slot runs on the SOURCE's stream (ggml-cuda's cpy_tensor_async), "
    "and only the destination's stream waits for the slot's event: the source's stream is "
    "held back by nothing, so micro-batch k+copies overwrites the slot micro-batch k may "
    "still read. Make the input's backend wait for the slot's event too, before the copy: "
    "ggml_backend_event_wait(input_backend, sched->events[split_backend_id][sched->cur_copy]) "
    "in ggml_backend_sched_compute_splits (--patch " SOURCE_WAIT_PATCH ": "
    "docs/ggml-slot-race.md)",
    "a copy reads host memory asynchronously (ggml-cuda's cpy_tensor_async with "
    "copy_from_host) and nothing orders the host's next write of that memory after it: "
    "copy host memory blocking (ggml_backend_tensor_copy), or synchronize the split's "
    "backend before the host writes it again (llama.cpp #20793's sync before the launch)",
};

static int fix_of(const trace *t, const trace_finding *f, const side *a, const side *b)
{
    if (f->kind != TRACE_FINDING_RACE)
        return FIX_CHECKER;
    const char *buf = f->buffer != TRACE_NONE ? trace_str(t, t->buffers[f->buffer].name) : "";
    if (strcmp(b->call, "cpy_tensor_async") == 0 && strchr(buf, '#') &&
        strcmp(a->queue, b->queue) != 0 && strcmp(a->queue, "host") != 0)
        return FIX_SLOT_REUSE;
    const side *copy = strcmp(a->call, "cpy_tensor_async") == 0 ? a : b;
    const side *other = copy == a ? b : a;
    if (strcmp(copy->call, "cpy_tensor_async") == 0 && strcmp(copy->queue, "host") != 0 &&
        strcmp(other->queue, "host") == 0)
        return FIX_HOST_ASYNC;
    return FIX_CHECKER;
}

/* A group of findings of one configuration: the same kind and the same
 * two sites (the same missing order, met again and again). */
typedef struct finding_row {
    char kind[48];
    side a, b;
    char buffer[128];
    int fix;                        /* FIX_*, or FIX_CHECKER + index into fixes */
    int count;
} finding_row;

/* The fixes printed at the end, each once. */
typedef struct fix_list { char *text[64]; int n; } fix_list;

static int fix_index(fix_list *l, const char *text)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->text[i], text) == 0)
            return i;
    if (l->n == 64)
        return 63;
    l->text[l->n] = strdup(text ? text : "");
    return l->n++;
}

typedef struct config_result {
    rggml_config cfg;
    char desc[160];
    bool ran;                       /* ggml ran it (else error says why) */
    char error[800];
    uint64_t statements;
    long long calls, places, unrecorded;
    bool twin_ran, twin_same;
    char twin_what[800];
    size_t n_findings;
    char summary[160];              /* "clean", "12 races" */
    finding_row *rows;
    int n_rows;
    size_t cap_rows;
} config_result;

static void add_row(config_result *r, const finding_row *row)
{
    for (int i = 0; i < r->n_rows; i++) {
        finding_row *x = &r->rows[i];
        if (strcmp(x->kind, row->kind) == 0 && strcmp(x->a.site, row->a.site) == 0 &&
            strcmp(x->b.site, row->b.site) == 0 && strcmp(x->a.call, row->a.call) == 0 &&
            strcmp(x->b.call, row->b.call) == 0 && x->fix == row->fix) {
            x->count++;
            return;
        }
    }
    if (trace_grow((void **)&r->rows, &r->cap_rows, (size_t)r->n_rows + 1, sizeof *r->rows) != 0)
        return;
    r->rows[r->n_rows] = *row;
    r->rows[r->n_rows++].count = 1;
}

/* Checks the trace at path into r (rows of findings). 0, or -1 with err. */
static int check_config(const char *path, config_result *r, fix_list *fixes, trace_error *err)
{
    trace *t = NULL;
    if (trace_text_parse_file(path, &t, err) != 0)
        return -1;
    trace_reader rd;
    trace_reader_memory(&rd, t);
    check_options opt = { 0 };
    check_report *rep = NULL;
    int rc = check_trace(&rd, &opt, &rep, err);
    trace_reader_close(&rd);
    if (rc != 0) {
        trace_free(t);
        return -1;
    }
    r->statements = t->n_stmts;
    size_t n = check_report_count(rep);
    r->n_findings = n;
    const trace_finding *f = check_report_findings(rep);
    size_t races = check_report_count_kind(rep, TRACE_FINDING_RACE);
    if (n == 0)
        snprintf(r->summary, sizeof r->summary, "clean");
    else if (races == n)
        snprintf(r->summary, sizeof r->summary, "%zu race%s", n, n == 1 ? "" : "s");
    else
        snprintf(r->summary, sizeof r->summary, "%zu finding%s (%zu race%s)", n,
                 n == 1 ? "" : "s", races, races == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        finding_row row = { 0 };
        if (f[i].kind == TRACE_FINDING_RACE)
            snprintf(row.kind, sizeof row.kind, "race %s", check_race_word(f[i].race_type));
        else
            snprintf(row.kind, sizeof row.kind, "%s", trace_finding_str(f[i].kind));
        side_of(t, f[i].first.seq, &row.a);
        side_of(t, f[i].second.seq, &row.b);
        if (f[i].buffer != TRACE_NONE)
            snprintf(row.buffer, sizeof row.buffer, "%s",
                     trace_str(t, t->buffers[f[i].buffer].name));
        row.fix = fix_of(t, &f[i], &row.a, &row.b);
        if (row.fix == FIX_CHECKER)
            row.fix = FIX_CHECKER + fix_index(fixes, f[i].fix);
        add_row(r, &row);
    }
    check_report_free(rep);
    trace_free(t);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Printing.                                                           */

static char fix_letter(int fix) { return (char)('A' + (fix < 26 ? fix : 25)); }

static void print_side(const side *s, const char *role)
{
    char at[300];
    if (s->fn[0])
        snprintf(at, sizeof at, "%s (%s in %s)", s->site, s->call,
                 strncmp(s->fn, "ggml_backend_sched_", 19) == 0 ? s->fn + 19 : s->fn);
    else
        snprintf(at, sizeof at, "%s (%s)", s->site[0] ? s->site : "?", s->call);
    printf("      %-6s %-5s %-34.34s eval %-3d split %-2d at %s\n", role, s->queue, s->label,
           s->token, s->split, at);
}

static void print_findings(const config_result *r, int index)
{
    printf("\n  [%d] %s: %s\n", index, r->desc, r->summary);
    for (int i = 0; i < r->n_rows; i++) {
        const finding_row *x = &r->rows[i];
        if (x->count > 1)
            printf("    %s, %d alike, the first on %s (fix %c)\n", x->kind, x->count,
                   x->buffer[0] ? x->buffer : "-", fix_letter(x->fix));
        else
            printf("    %s on %s (fix %c)\n", x->kind, x->buffer[0] ? x->buffer : "-",
                   fix_letter(x->fix));
        print_side(&x->a, "first");
        print_side(&x->b, "second");
    }
}

/* ------------------------------------------------------------------ */
/* The sweep.                                                          */

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

typedef struct build_progress { bool said; } build_progress;

static void on_build(void *ctx, const char *step, int i, int n)
{
    build_progress *b = ctx;
    b->said = true;
    fprintf(stderr, "syncsim ggml: %s (%d/%d)\n", step, i + 1 > n ? n : i + 1, n);
}

static const char *model_spec(const char *word)
{
    if (strcmp(word, "llama") == 0)
        return LLAMA_SPEC;
    if (strcmp(word, "moe") == 0)
        return MOE_SPEC;
    return word;
}

/* The patch NAME shipped with the harness, or a file. */
static int patch_path(const char *arg, char *out, size_t cap, trace_error *err)
{
    if (strchr(arg, '/') || access(arg, R_OK) == 0) {
        snprintf(out, cap, "%s", arg);
        return 0;
    }
    char harness[PATH_MAX];
    if (rggml_harness_path(harness, sizeof harness, err) != 0)
        return -1;
    char *slash = strrchr(harness, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, cap, "%.*s/%.64s.patch", (int)(cap > 80 ? cap - 80 : 0), harness, arg);
    if (access(out, R_OK) != 0) {
        trace_error_set(err, TRACE_EUSAGE, "--patch %s: no such file, nor a patch shipped with the "
                        "harness (%s)", arg, SOURCE_WAIT_PATCH);
        return -1;
    }
    return 0;
}

int cmd_ggml(int argc, char **argv)
{
    enum { OPT_TWIN = 256, OPT_CC, OPT_CXX, OPT_CACHE, OPT_KEEP };
    static const struct option longopts[] = {
        { "gpus", required_argument, NULL, 'g' },   { "copies", required_argument, NULL, 'c' },
        { "ubatches", required_argument, NULL, 'u' }, { "model", required_argument, NULL, 'm' },
        { "fallback", required_argument, NULL, 'F' }, { "family", required_argument, NULL, 'f' },
        { "tokens", required_argument, NULL, 't' }, { "twin", required_argument, NULL, OPT_TWIN },
        { "patch", required_argument, NULL, 'p' },  { "cc", required_argument, NULL, OPT_CC },
        { "cxx", required_argument, NULL, OPT_CXX }, { "cache", required_argument, NULL, OPT_CACHE },
        { "keep", required_argument, NULL, OPT_KEEP }, { "output", required_argument, NULL, 'o' },
        { "list", no_argument, NULL, 'l' },         { "quiet", no_argument, NULL, 'q' },
        { "graph", required_argument, NULL, 'G' },
        { NULL, 0, NULL, 0 },
    };
    int_list gpus = { { 1, 2, 3, 4 }, 4 }, copies = { { 1, 2, 3, 4 }, 4 },
             ubatches = { { 1, 2, 3, 4, 5, 6, 7, 8 }, 8 };
    char model_arg[256] = "llama,moe", fallback_arg[256] = "none", family_arg[256] = "cuda";
    const char *twin = NULL, *patch = NULL, *keep = NULL, *db = NULL, *graph = NULL;
    bool model_given = false;
    rggml_build_opts bo = { 0 };
    bool list = false, quiet = false;
    unsigned long long tokens = 2;
    int c;
    while ((c = cli_getopt("ggml", argc, argv, "g:c:u:m:F:f:t:p:o:lqG:", longopts)) != -1) {
        switch (c) {
        case 'g':
            if (parse_ints("gpus", optarg, 1, 8, &gpus) != 0)
                return 2;
            break;
        case 'c':
            if (parse_ints("copies", optarg, 1, 4, &copies) != 0)
                return 2;
            break;
        case 'u':
            if (parse_ints("ubatches", optarg, 1, 8, &ubatches) != 0)
                return 2;
            break;
        case 'm':
            snprintf(model_arg, sizeof model_arg, "%s", optarg);
            model_given = true;
            break;
        case 'G': graph = optarg; break;
        case 'F': snprintf(fallback_arg, sizeof fallback_arg, "%s", optarg); break;
        case 'f': snprintf(family_arg, sizeof family_arg, "%s", optarg); break;
        case 't':
            if (cli_parse_u64(optarg, &tokens) != 0 || tokens > 64)
                return cli_usage_error("ggml", "--tokens expects 0 to 64, got '%s'", optarg);
            break;
        case OPT_TWIN: twin = optarg; break;
        case 'p': patch = optarg; break;
        case OPT_CC: bo.cc = optarg; break;
        case OPT_CXX: bo.cxx = optarg; break;
        case OPT_CACHE: bo.cache = optarg; break;
        case OPT_KEEP: keep = optarg; break;
        case 'o': db = optarg; break;
        case 'l': list = true; break;
        case 'q': quiet = true; break;
        default: return 2;      /* CLI_OPT_ERROR: said */
        }
    }
    if (graph && model_given)
        return cli_usage_error("ggml", "--graph and --model: give one");
    if (graph) {
        trace_error gerr = { 0 };
        sched_graph *g = sched_graph_parse_file(graph, &gerr);
        if (!g)
            return cli_error("ggml", "%s", gerr.msg);
        sched_graph_free(g);
        snprintf(model_arg, sizeof model_arg, "graph");
        ubatches = (int_list){ { 0 }, 1 };
    }
    word_list models, fallbacks, families;
    if (parse_words("model", model_arg, &models) != 0 ||
        parse_words("fallback", fallback_arg, &fallbacks) != 0 ||
        parse_words("family", family_arg, &families) != 0)
        return 2;
    for (int i = 0; i < families.n; i++)
        if (!rggml_family_known(families.v[i]))
            return cli_usage_error("ggml", "--family: unknown family '%s' (expected %s)",
                                   families.v[i], rggml_family_names());
    for (int i = 0; i < fallbacks.n; i++)
        if (strcmp(fallbacks.v[i], "none") != 0 && sched_op_parse(fallbacks.v[i]) < 0)
            return cli_usage_error("ggml", "--fallback: '%s' is no op (expected none or an op: "
                                   "rope, softmax, mul, ...)", fallbacks.v[i]);
    for (int i = 0; i < models.n && !graph; i++) {
        sched_model_params p;
        char e[256];
        if (sched_model_parse(model_spec(models.v[i]), &p, e, sizeof e) != 0)
            return cli_usage_error("ggml", "--model: %s", e);
        if (strcmp(p.kind, "llama") != 0 && strcmp(p.kind, "moe") != 0)
            return cli_usage_error("ggml", "--model: '%s' is no llama or moe model (tp runs in "
                                   "ggml's meta backend, which this does not drive)", models.v[i]);
    }
    /* The shipped fix has a twin of its own: compare with it unless told. */
    if (!twin)
        twin = patch && strcmp(patch, SOURCE_WAIT_PATCH) == 0 ? "ggml-source-wait" : "ggml-head";
    if (strcmp(twin, "none") != 0 && !sched_policy_find(twin))
        return cli_usage_error("ggml", "--twin: unknown policy '%s' (expected none or %s)", twin,
                               sched_policy_names());

    /* The configurations, in sweep order. */
    int n_cfg = 0, cap_cfg = gpus.n * copies.n * ubatches.n * models.n * fallbacks.n * families.n;
    config_result *res = calloc((size_t)cap_cfg + 1, sizeof *res);
    if (!res)
        return cli_error("ggml", "out of memory");
    for (int fa = 0; fa < families.n; fa++)
        for (int mo = 0; mo < models.n; mo++)
            for (int fb = 0; fb < fallbacks.n; fb++)
                for (int g = 0; g < gpus.n; g++)
                    for (int cp = 0; cp < copies.n; cp++)
                        for (int u = 0; u < ubatches.n; u++) {
                            rggml_config *x = &res[n_cfg].cfg;
                            x->n_gpus = gpus.v[g];
                            x->copies = copies.v[cp];
                            x->ubatches = ubatches.v[u];
                            x->tokens = (int)tokens;
                            x->graph_reuse = x->copies == 1;   /* #20463 */
                            x->family = families.v[fa];
                            x->model = graph ? NULL : model_spec(models.v[mo]);
                            x->graph_file = graph;
                            x->fallback = strcmp(fallbacks.v[fb], "none") ? fallbacks.v[fb] : NULL;
                            rggml_config_describe(x, res[n_cfg].desc, sizeof res[n_cfg].desc);
                            n_cfg++;
                        }
    if (list) {
        for (int i = 0; i < n_cfg; i++)
            printf("%4d  %s\n", i + 1, res[i].desc);
        printf("%d configuration%s\n", n_cfg, n_cfg == 1 ? "" : "s");
        free(res);
        return 0;
    }
    if (optind >= argc) {
        free(res);
        return cli_usage_error("ggml", "missing PATH, a ggml source tree");
    }
    if (optind + 1 < argc) {
        free(res);
        return cli_usage_error("ggml", "one PATH only (got '%s' too)", argv[optind + 1]);
    }
    const char *path = argv[optind];
    trace_error err = { 0 };
    rggml_tree tree, patched;
    if (rggml_tree_open(path, &tree, &err) != 0) {
        free(res);
        return cli_error("ggml", "%s", err.msg);
    }
    if (patch) {
        char pp[PATH_MAX];
        if (patch_path(patch, pp, sizeof pp, &err) != 0 ||
            rggml_tree_patch(&tree, pp, &bo, &patched, &err) != 0) {
            free(res);
            return cli_error("ggml", "%s", err.msg);
        }
        tree = patched;
    }
    printf("ggml at %s (%s), cuda copies from host memory: %s", tree.root, tree.describe,
           tree.cuda_copy_from_host ? "yes" : "no");
    if (tree.cuda_copy_from_host)
        printf(" (src/ggml-cuda/ggml-cuda.cu:%d)", tree.cuda_copy_from_host_line);
    printf("\n");

    /* One harness per copy count the sweep uses. */
    build_progress bp = { false };
    bo.progress = on_build;
    bo.progress_ctx = &bp;
    char harness[5][PATH_MAX];
    for (int i = 0; i < copies.n; i++)
        if (rggml_build(&tree, copies.v[i], &bo, harness[copies.v[i]], sizeof harness[0], &err) != 0) {
            free(res);
            return cli_error("ggml", "%s", err.msg);
        }

    char dir[PATH_MAX];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            free(res);
            return cli_error("ggml", "--keep %s: %s", keep, strerror(errno));
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/syncsim-ggml-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            free(res);
            return cli_error("ggml", "cannot create a temporary directory: %s", strerror(errno));
        }
    }
    fix_list fixes = { { 0 }, 0 };
    for (int k = 0; k < 2; k++)
        fixes.text[fixes.n++] = strdup(fix_text[k]);
    cli_progress *prog = cli_progress_start("ggml", "configurations");
    cli_progress_total(prog, (uint64_t)n_cfg);
    int status = 0, n_find = 0, n_differ = 0, n_stopped = 0, n_twin = 0;
    size_t all_findings = 0;
    for (int i = 0; i < n_cfg; i++) {
        config_result *r = &res[i];
        r->cfg.cuda_copy_from_host = tree.cuda_copy_from_host;
        rggml_script *s = rggml_script_new(&r->cfg, &err);
        if (!s) {
            snprintf(r->error, sizeof r->error, "%s", err.msg);
            status = 2;
            break;
        }
        char name[32], trace_path[PATH_MAX];
        snprintf(name, sizeof name, "config-%d", i + 1);
        rggml_calls calls = { 0 }, tcalls = { 0 };
        if (rggml_run(harness[r->cfg.copies], s, dir, name, trace_path, sizeof trace_path, &calls,
                      &err) != 0) {
            snprintf(r->error, sizeof r->error, "%s", err.msg);
            n_stopped++;
        } else if (check_config(trace_path, r, &fixes, &err) != 0) {
            snprintf(r->error, sizeof r->error, "reading the trace: %.700s", err.msg);
            n_stopped++;
        } else {
            r->ran = true;
            r->unrecorded = calls.unrecorded_waits;
            if (r->n_findings) {
                n_find++;
                all_findings += r->n_findings;
            }
            if (db) {
                trace_reader rd;
                trace *t = NULL;
                char run_name[200];
                snprintf(run_name, sizeof run_name, "ggml: %s", r->desc);
                if (trace_text_parse_file(trace_path, &t, &err) == 0) {
                    trace_reader_memory(&rd, t);
                    uint64_t n = 0;
                    if (trace_store_import(db, &rd, run_name, &n, &err) < 0)
                        fprintf(stderr, "syncsim ggml: %s: not recorded: %s\n", db, err.msg);
                    trace_reader_close(&rd);
                    trace_free(t);
                }
            }
        }
        if (strcmp(twin, "none") != 0 && r->ran) {
            r->twin_ran = true;
            n_twin++;
            if (rggml_twin(s, twin, &tcalls, &err) != 0) {
                snprintf(r->twin_what, sizeof r->twin_what, "the twin failed: %.700s", err.msg);
                n_differ++;
            } else {
                rggml_diff d;
                rggml_compare(&calls, &tcalls, &d, getenv("SYNCSIM_GGML_DEBUG") ? stderr : NULL);
                r->calls = d.calls;
                r->places = d.places;
                r->twin_same = d.same && d.alloc_same;
                if (!d.same)
                    snprintf(r->twin_what, sizeof r->twin_what, "%s", d.what);
                else if (!d.alloc_same)
                    snprintf(r->twin_what, sizeof r->twin_what, "ggml-alloc placed a tensor "
                             "elsewhere: %.700s", d.alloc_what);
                n_differ += !r->twin_same;
            }
        }
        rggml_calls_free(&calls);
        rggml_calls_free(&tcalls);
        rggml_script_free(s);
        cli_progress_set(prog, (uint64_t)i + 1);
    }
    cli_progress_end(prog);
    if (!keep)
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (status == 2) {
        for (int i = 0; i < n_cfg; i++)
            if (res[i].error[0])
                cli_error("ggml", "%s: %s", res[i].desc, res[i].error);
        goto done;
    }

    if (!quiet) {
        printf("\n%4s  %-62s %6s %6s %6s  %-8s %s\n", "#", "configuration", "stmts", "calls",
               "places", strcmp(twin, "none") ? "twin" : "", "check");
        for (int i = 0; i < n_cfg; i++) {
            const config_result *r = &res[i];
            if (!r->ran) {
                printf("%4d  %-62s %s\n", i + 1, r->desc, r->error);
                continue;
            }
            const char *tw = !r->twin_ran ? "" : r->twin_same ? "agrees" : "DIFFERS";
            printf("%4d  %-62s %6llu %6lld %6lld  %-8s %s\n", i + 1, r->desc,
                   (unsigned long long)r->statements, r->calls, r->places, tw, r->summary);
        }
    }
    for (int i = 0; quiet && i < n_cfg; i++)
        if (!res[i].ran)
            printf("\n  [%d] %s: %s\n", i + 1, res[i].desc, res[i].error);
    for (int i = 0; i < n_cfg; i++)
        if (res[i].twin_ran && !res[i].twin_same)
            printf("\n  [%d] %s: the twin (%s) differs from ggml: %s\n", i + 1, res[i].desc, twin,
                   res[i].twin_what);
    if (n_find) {
        printf("\nfindings, per configuration (each side: queue, statement, evaluation, split, "
               "and the line of ggml's scheduler whose call made it):\n");
        for (int i = 0; i < n_cfg; i++)
            if (res[i].n_findings)
                print_findings(&res[i], i + 1);
        printf("\nfixes:\n");
        bool used[64] = { false };
        for (int i = 0; i < n_cfg; i++)
            for (int k = 0; k < res[i].n_rows; k++)
                used[res[i].rows[k].fix < 64 ? res[i].rows[k].fix : 63] = true;
        for (int k = 0; k < fixes.n; k++) {
            if (!used[k])
                continue;
            printf("  %c: ", fix_letter(k));
            cli_wrapped(stdout, fixes.text[k], 5);
        }
    }
    long long unrecorded = 0;
    for (int i = 0; i < n_cfg; i++)
        unrecorded += res[i].unrecorded;
    printf("\n%d configuration%s: %d with findings (%zu in all), %d clean", n_cfg,
           n_cfg == 1 ? "" : "s", n_find, all_findings, n_cfg - n_find - n_stopped);
    if (n_stopped)
        printf(", %d where ggml stopped", n_stopped);
    if (n_twin)
        printf("; the twin (%s) agrees call for call in %d of %d", twin, n_twin - n_differ, n_twin);
    printf("\n");
    if (unrecorded)
        printf("(left out of the traces and of the comparison: %lld waits on events never "
               "recorded, which ggml makes in the first evaluations and CUDA treats as done)\n",
               unrecorded);
    status = n_stopped ? 3 : (n_find || n_differ) ? 1 : 0;
    if (db)
        printf("traces recorded in %s, one run per configuration\n", db);
done:
    for (int i = 0; i < n_cfg; i++)
        free(res[i].rows);
    for (int k = 0; k < fixes.n; k++)
        free(fixes.text[k]);
    free(res);
    return status;
}
