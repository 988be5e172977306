/*
 * test_ggml_diff.c -- the twin against ggml itself (issues 23 and 33).
 *
 * Runs only where a ggml tree is given (never part of this repository,
 * never fetched): $SYNCSIM_GGML_DIR, or the configure option of the same
 * name; without one it says so in one line and exits 77 (skipped). It
 * builds syncsim's recording harness against the tree (real/ggml, as
 * `syncsim ggml` does: GGML_SCHED_MAX_COPIES 1 to 4, cached in the build
 * tree or $SYNCSIM_CACHE_DIR) and, for every copy count and every case below,
 * runs the case's script -- the calls llama.cpp makes -- through ggml's
 * real scheduler and allocator and through the twin (policy ggml-head),
 * and compares, evaluation by evaluation, every call (synchronizes, event
 * records, waits and host waits by (backend, slot), each split input's
 * copy with the bytes it reads and the slot it writes, MoE expert ranges
 * and id read-backs, each split's launch) and every placement ggml-alloc
 * makes (backend, offset, size of each tensor, where the twin laid the
 * graph out anew). The first difference of a case is printed with both
 * sequences; the test fails if any case differs.
 *
 * The cases close the gaps issue 33 lists: a split input that is a
 * partial view; #26040 on a device with events; allocation (in-place
 * pairs, lifetimes and offsets, through the placements); MoE with expert
 * ids other than 0 (the script's, sched_moe_ids); ggml_backend_sched_
 * graph_compute (a synchronize while allocated) and graph reuse without a
 * reset (is_alloc kept after a compute); a split with more than 30 inputs
 * (ggml's capacity grows); a graph that starts with a view; a user input
 * taken in place with one slot; CPU fallback splits; the sycl and noasync
 * families. Not compared: the tensor-parallel `tp` model (ggml runs it in
 * its meta backend; docs/scheduler.md says why).
 *
 * ggml's history (a second test): where $SYNCSIM_GGML_PRE_17795,
 * $SYNCSIM_GGML_17795, $SYNCSIM_GGML_20793 or $SYNCSIM_GGML_PRE_26040 name
 * a tree at that point (docs/scheduler.md lists the commits), the same
 * cases run against it with the twin's policy of that point, copies 1 and
 * 4 (copy_from_host as the tree's ggml-cuda has it), but for the one only
 * the pinned commit can run (diff_case.pin_only).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "real/ggml/rggml.h"

#ifndef SYNCSIM_GGML_DIR_DEFAULT
#define SYNCSIM_GGML_DIR_DEFAULT ""
#endif
#ifndef SYNCSIM_GGML_CACHE_DEFAULT
#define SYNCSIM_GGML_CACHE_DEFAULT NULL
#endif

#define LLAMA "llama:n_layer=2,n_embd=64,n_head=4,n_head_kv=2,n_ff=128,n_vocab=100,n_ctx=512,ubatch=32"
#define MOE "moe:n_layer=2,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=512,ubatch=32,n_expert=16"
#define G(name) SYNCSIM_SOURCE_DIR "/tests/ggml-diff/" name

typedef struct diff_case {
    const char *name;
    rggml_config cfg;
    /* Only at the pinned commit: before ggml's split inputs and graph
     * inputs could grow past GGML_SCHED_MAX_SPLIT_INPUTS (30), more than 30
     * graph inputs with copy slots stop ggml (GGML_ASSERT(n_graph_inputs <
     * GGML_SCHED_MAX_SPLIT_INPUTS), ggml-backend.cpp:1256 at 4b496bb9^). */
    bool pin_only;
} diff_case;

static const diff_case cases[] = {
    { "llama, 1 GPU", { .n_gpus = 1, .ubatches = 2, .tokens = 3, .model = LLAMA } },
    { "llama, 2 GPUs", { .n_gpus = 2, .ubatches = 4, .tokens = 3, .model = LLAMA } },
    { "llama, 2 GPUs, small ubatches", { .n_gpus = 2, .ubatches = 4, .tokens = 2,
                                         .model = LLAMA ",ubatch=8" } },
    { "llama, 3 GPUs", { .n_gpus = 3, .ubatches = 3, .tokens = 2, .model = LLAMA ",n_layer=3" } },
    { "llama, 4 GPUs, 6 ubatches", { .n_gpus = 4, .ubatches = 6, .tokens = 2,
                                     .model = LLAMA ",n_layer=4" } },
    { "llama, 2 GPUs of the sycl family", { .n_gpus = 2, .ubatches = 4, .tokens = 3,
                                            .model = LLAMA, .family = "sycl" } },
    { "llama, 2 GPUs of the noasync family", { .n_gpus = 2, .ubatches = 3, .tokens = 2,
                                               .model = LLAMA, .family = "noasync" } },
    { "llama, 2 GPUs, rope on the CPU", { .n_gpus = 2, .ubatches = 3, .tokens = 2, .model = LLAMA,
                                          .fallback = "rope" } },
    { "llama, 2 GPUs, graph_compute", { .n_gpus = 2, .ubatches = 3, .tokens = 3, .model = LLAMA,
                                        .compute_sync = true } },
    { "llama, 2 GPUs, graph reuse without a reset", { .n_gpus = 2, .ubatches = 2, .tokens = 4,
                                                      .model = LLAMA, .graph_reuse = true } },
    { "llama, 2 GPUs, a reset at each decode's end", { .n_gpus = 2, .ubatches = 3, .tokens = 3,
                                                       .model = LLAMA, .end_reset = true } },
    { "moe, 1 GPU", { .n_gpus = 1, .ubatches = 1, .tokens = 2, .model = MOE } },
    { "moe, 2 GPUs", { .n_gpus = 2, .ubatches = 2, .tokens = 2, .model = MOE } },
    { "ggml-26040.graph", { .n_gpus = 1, .tokens = 3,
                            .graph_file = SYNCSIM_SOURCE_DIR "/tests/sched/ggml-26040.graph" } },
    { "noinput-event.graph (#26040 on a device with events)",
      { .n_gpus = 2, .tokens = 3, .graph_file = G("noinput-event.graph") } },
    { "partial-view.graph", { .n_gpus = 2, .tokens = 3, .graph_file = G("partial-view.graph") } },
    { "leading-view.graph", { .n_gpus = 2, .tokens = 3, .graph_file = G("leading-view.graph") } },
    { "inplace-input.graph", { .n_gpus = 2, .tokens = 2, .graph_file = G("inplace-input.graph") } },
    { "many-inputs.graph (40 inputs)", { .n_gpus = 1, .tokens = 3,
                                         .graph_file = G("many-inputs.graph") }, true },
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static const char *pin_tree(void)
{
    const char *t = env("SYNCSIM_GGML_DIR");
    return t ? t : SYNCSIM_GGML_DIR_DEFAULT[0] ? SYNCSIM_GGML_DIR_DEFAULT : NULL;
}

/* Runs every case against tree with the twin's policy for each copy count
 * of copies; returns the number of (case, copies) that differ. */
static int compare_tree(const char *tree_path, const char *policy, const int *copies, int n_copies,
                        bool pin)
{
    rggml_tree tree;
    trace_error err = { 0 };
    if (rggml_tree_open(tree_path, &tree, &err) != 0)
        fail_msg("%s", err.msg);
    char dir[] = "/tmp/syncsim-ggml-diff-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int failures = 0;
    for (int k = 0; k < n_copies; k++) {
        int c = copies[k];
        char harness[PATH_MAX];
        rggml_build_opts bo = { .cache = env("SYNCSIM_CACHE_DIR") ? NULL : SYNCSIM_GGML_CACHE_DEFAULT };
        if (rggml_build(&tree, c, &bo, harness, sizeof harness, &err) != 0)
            fail_msg("%s", err.msg);
        long long calls = 0, places = 0, evals = 0, unrecorded = 0;
        int graphs = 0, differ = 0;
        size_t n_cases = 0;
        for (size_t i = 0; i < N_CASES; i++) {
            if (cases[i].pin_only && !pin)
                continue;
            n_cases++;
            rggml_config cfg = cases[i].cfg;
            cfg.copies = c;
            cfg.cuda_copy_from_host = tree.cuda_copy_from_host;
            if (!cfg.graph_reuse && !cfg.end_reset)
                cfg.graph_reuse = c == 1;           /* llama.cpp: #20463 */
            rggml_script *s = rggml_script_new(&cfg, &err);
            if (!s)
                fail_msg("%s: %s", cases[i].name, err.msg);
            rggml_calls a = { 0 }, b = { 0 };
            char trace_path[PATH_MAX], name[32];
            snprintf(name, sizeof name, "case-%zu-c%d", i, c);
            if (rggml_run(harness, s, dir, name, trace_path, sizeof trace_path, &a, &err) != 0)
                fail_msg("%s, %d copies: ggml: %s", cases[i].name, c, err.msg);
            if (rggml_twin(s, policy, &b, &err) != 0)
                fail_msg("%s, %d copies: twin: %s", cases[i].name, c, err.msg);
            rggml_diff d;
            rggml_compare(&a, &b, &d, NULL);
            if (!d.same || !d.alloc_same) {
                fprintf(stderr, "%s, %d copies, %s: %s\n", cases[i].name, c, policy,
                        d.same ? d.alloc_what : d.what);
                rggml_compare(&a, &b, &d, stderr);
                differ++;
            }
            calls += d.calls;
            places += d.places;
            unrecorded += a.unrecorded_waits;
            for (int l = 0; l < a.n; l++)
                evals += strncmp(a.line[l], "eval ", 5) == 0;
            graphs += (s->graph[0] != NULL) + 1;
            rggml_calls_free(&a);
            rggml_calls_free(&b);
            rggml_script_free(s);
        }
        printf("ggml-diff, %s at %s, %d cop%s: %zu cases, %d graphs, %lld evaluations, %lld calls "
               "and %lld placements compared, %d cases differ; not compared: %lld waits on "
               "never-recorded events (named difference)\n",
               policy, tree.describe, c, c == 1 ? "y" : "ies", n_cases, graphs, evals, calls,
               places, differ, unrecorded);
        failures += differ;
    }
    char rm[PATH_MAX + 16];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
    return failures;
}

/* The pinned commit: ggml-head, every copy count. */
static void test_ggml_diff_twin_agrees_with_ggml(void **state)
{
    (void)state;
    const char *tree = pin_tree();
    if (!tree) {
        skip();
        return;
    }
    static const int copies[] = { 1, 2, 3, 4 };
    assert_int_equal(compare_tree(tree, "ggml-head", copies, 4, true), 0);
}

/* ggml's history, where the user gives its trees. */
static void test_ggml_diff_history_agrees(void **state)
{
    (void)state;
    static const struct { const char *var, *policy; } points[] = {
        { "SYNCSIM_GGML_PRE_17795", "ggml-pre-17795" },
        { "SYNCSIM_GGML_17795", "ggml-17795" },
        { "SYNCSIM_GGML_20793", "ggml-20793" },
        { "SYNCSIM_GGML_PRE_26040", "ggml-pre-26040" },
    };
    static const int copies[] = { 1, 4 };
    int ran = 0, failures = 0;
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        const char *tree = env(points[i].var);
        if (!tree)
            continue;
        ran++;
        failures += compare_tree(tree, points[i].policy, copies, 2, false);
    }
    if (!ran) {
        skip();
        return;
    }
    assert_int_equal(failures, 0);
}

int main(void)
{
    if (!pin_tree() && !env("SYNCSIM_GGML_PRE_17795") && !env("SYNCSIM_GGML_17795") &&
        !env("SYNCSIM_GGML_20793") && !env("SYNCSIM_GGML_PRE_26040")) {
        printf("test_ggml_diff: skipped: no ggml tree (set SYNCSIM_GGML_DIR, or configure "
               "with -DSYNCSIM_GGML_DIR=PATH)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ggml_diff_twin_agrees_with_ggml),
        cmocka_unit_test(test_ggml_diff_history_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
