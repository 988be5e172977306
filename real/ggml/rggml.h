/*
 * rggml.h -- ggml's own scheduler as a real backend family: `syncsim ggml`.
 *
 * The user points at a ggml source tree (any commit, a branch, llama.cpp's
 * ggml/). syncsim compiles its recording harness (harness/syncsim_ggml.c,
 * installed as share/syncsim/ggml/) with ggml's scheduler and allocator
 * from that tree, runs it on scripts that drive ggml as llama.cpp does, and
 * gets back a trace of what ggml's real code did (every statement at the
 * line of ggml-backend.cpp that made it) and the same calls in the twin
 * comparison's vocabulary. One concept a file:
 *
 *   tree.c    the tree: where its sources are, what it is (commit), what
 *             its ggml-cuda does (copy_from_host), the content key of a
 *             build; the build itself, with the system's compilers, into a
 *             cache directory (one program per copy count);
 *   script.c  a configuration (GPUs, family, copies, micro-batches, model,
 *             fallback, the drive) as a script: the graphs from sched/'s
 *             generators or a graph file, the calls llama.cpp makes; its
 *             text for the harness, and running the harness on it;
 *   twin.c    the same script through the twin (sched/, a ggml-* policy)
 *             on recording test backends of the same machine, as a call
 *             log; comparing two call logs (named differences left out).
 *
 * Layering: real/ggml -> sched (the twin), traces (the trace it reads
 * back). Checking the traces is the command's (cli/cmd_ggml.c).
 */
#ifndef SYNCSIM_REAL_GGML_H
#define SYNCSIM_REAL_GGML_H

#include "sched/sched.h"
#include "traces/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------ */
/* The tree and its builds (tree.c).                                   */

typedef struct rggml_tree {
    char root[4096];                /* the ggml root: src/ggml-backend.cpp is under it */
    char describe[128];             /* "commit d99724f2" or "not a git checkout" */
    char key[17];                   /* hex of the content of what is compiled */
    /* ggml-cuda's cpy_tensor_async at this tree takes host memory
     * (llama.cpp #17795, #20793); read from src/ggml-cuda/ggml-cuda.cu,
     * with the line that says so (0: no such file, or it does not). */
    bool cuda_copy_from_host;
    int cuda_copy_from_host_line;
    char sources[12][64];           /* src/ files compiled (those the tree has) */
    int n_sources;
} rggml_tree;

/* Finds the tree at path (a ggml root, or a tree with ggml/ in it:
 * llama.cpp) and reads what it is. Returns 0, or -1 with err (one line
 * naming path and what is missing). */
int rggml_tree_open(const char *path, rggml_tree *t, trace_error *err);

typedef struct rggml_build_opts {
    const char *cc, *cxx;           /* NULL: $CC / $CXX, else cc / c++ */
    const char *cache;              /* NULL: $SYNCSIM_CACHE_DIR, $XDG_CACHE_HOME/syncsim,
                                     * ~/.cache/syncsim */
    const char *harness;            /* the harness source; NULL: rggml_harness_path */
    /* Progress: told each step ("compiling ggml.c"), i of n. NULL: none. */
    void (*progress)(void *ctx, const char *step, int i, int n);
    void *progress_ctx;
} rggml_build_opts;

/* The harness program for `copies` slots (GGML_SCHED_MAX_COPIES; 2 to 4:
 * one copy is any build with parallel off), built once per tree content,
 * harness source, compilers and copy count into the cache:
 * CACHE/ggml/KEY/syncsim_ggml-cN. Writes its path into out. Returns 0, or
 * -1 with err (the compiler's first error line and the log's path). */
int rggml_build(const rggml_tree *t, int copies, const rggml_build_opts *o, char *out,
                size_t cap, trace_error *err);

/* Where the harness source is: $SYNCSIM_DATA_DIR/ggml/syncsim_ggml.c, else
 * share/syncsim/ggml beside the binary's prefix (an install), else the
 * source tree's real/ggml/harness (a build tree). 0, or -1 with err. */
int rggml_harness_path(char *out, size_t cap, trace_error *err);

/* A patched copy of the tree: the files of src/ copied into
 * CACHE/ggml/patched/KEY and the patch applied with `patch -p1` (the
 * patch's own text names the files). t_out describes the copy. 0, or -1
 * with err (the patch does not apply: patch's first line). */
int rggml_tree_patch(const rggml_tree *t, const char *patch, const rggml_build_opts *o,
                     rggml_tree *t_out, trace_error *err);

/* ------------------------------------------------------------------ */
/* Configurations and scripts (script.c).                              */

/* The GPU families the harness implements, each with its own semantics
 * (its head comment): words of sched/'s ggml backend families
 * (sched_copy_family, whose summary says what each one's interface does):
 * cuda, sycl, noasync. */
bool rggml_family_known(const char *word);
/* Their words, "cuda, sycl or noasync", and word i of them (NULL past the
 * last). */
const char *rggml_family_names(void);
const char *rggml_family_at(int i);

/* One configuration of the sweep: the machine, the model, the drive. */
typedef struct rggml_config {
    int n_gpus;                     /* 1..8 */
    int copies;                     /* 1..4 (1: parallel off) */
    int ubatches;                   /* prompt micro-batches in one llama_decode, 0..8 */
    int tokens;                     /* decode tokens after the prompt */
    const char *family;             /* the GPUs' (rggml_family_known); NULL: cuda */
    const char *model;              /* "llama:..." or "moe:..." (a generator spec) */
    const char *graph_file;         /* or a graph file (decode graph only) */
    const char *fallback;           /* an op the GPUs decline (CPU fallback splits); NULL */
    bool cuda_copy_from_host;       /* the tree's ggml-cuda (rggml_tree) */
    /* The drive (script.c says what each one is in llama.cpp):
     *   graph_reuse   decode tokens after the first reuse the graph: they
     *                 compute it again, still allocated (no reset, no
     *                 alloc); llama.cpp does unless it pipelines (#20463)
     *   end_reset     a reset at the end of each llama_decode (llama.cpp
     *                 before set_rows: a synchronize then sends the slot
     *                 back to 0)
     *   compute_sync  every evaluation by ggml_backend_sched_graph_compute
     *                 (a synchronize while the graph is allocated) */
    bool graph_reuse, end_reset, compute_sync;
} rggml_config;

/* "llama, 2 GPUs (cuda), 4 copies, 6 micro-batches[, rope on the CPU]". */
void rggml_config_describe(const rggml_config *c, char *buf, size_t cap);

typedef enum {
    RGGML_EVAL = 0,                 /* arg: the evaluation (token= of what follows) */
    RGGML_BUILD,                    /* arg: graph 0 (prompt) or 1 (decode): a new ggml graph */
    RGGML_RESET,
    RGGML_ALLOC,
    RGGML_SET_INPUTS,               /* the user writes the inputs (the MoE ids: arg's) */
    RGGML_COMPUTE,                  /* ggml_backend_sched_graph_compute_async */
    RGGML_COMPUTE_SYNC,             /* ggml_backend_sched_graph_compute */
    RGGML_OUTPUT,                   /* get_async of the outputs (llama.cpp's logits) */
    RGGML_SYNC,                     /* ggml_backend_sched_synchronize */
    RGGML_READ_OUTPUT,              /* the host reads them */
} rggml_step_kind;

typedef struct rggml_step {
    rggml_step_kind kind;
    int arg;
} rggml_step;

typedef struct rggml_script {
    rggml_config cfg;
    sched_model_params p;           /* the model's (when a generator) */
    sched_graph *graph[2];          /* prompt (NULL: none), decode; before planning */
    rggml_step *steps;
    int n_steps, cap_steps;
} rggml_script;

/* Builds the script of c: its graphs and the calls llama.cpp makes (the
 * prompt's micro-batches with no sync between them, a reset and a
 * synchronize at the end of each llama_decode, decode tokens, graph
 * reuse). NULL with err on bad input (a model spec, a graph file). */
rggml_script *rggml_script_new(const rggml_config *c, trace_error *err);
void rggml_script_free(rggml_script *s);
/* The i32 values the user writes into input t at evaluation eval (the
 * MoE expert ids: sched_moe_ids; other inputs 0). */
int32_t rggml_input_value(const rggml_script *s, const sched_tensor *t, int eval, int64_t i);
/* Writes the script's text (the harness's grammar, script.c). 0 or -1. */
int rggml_script_write(const rggml_script *s, FILE *out);

/* What one run of the harness gave back: the trace text's path, the call
 * log (owned lines), how long it took. */
typedef struct rggml_calls {
    char **line;
    int n, cap;
    long long unrecorded_waits;     /* waits on never-recorded events left out */
} rggml_calls;

/* Appends a copy of line. 0, or -1 when out of memory. */
int rggml_calls_add(rggml_calls *c, const char *line);
void rggml_calls_free(rggml_calls *c);
/* Runs harness on script s in dir: writes dir/NAME.script, the harness
 * writes dir/NAME.trace and its calls, read into *calls. Returns 0, or -1
 * with err (the harness's exit, its last line of standard error: ggml's
 * abort message). */
int rggml_run(const char *harness, const rggml_script *s, const char *dir, const char *name,
              char *trace_path, size_t cap, rggml_calls *calls, trace_error *err);

/* ------------------------------------------------------------------ */
/* The twin (twin.c).                                                  */

/* Runs s through the twin (policy: a ggml-* policy) on recording test
 * backends, as the call log the harness writes. 0, or -1 with err. */
int rggml_twin(const rggml_script *s, const char *policy, rggml_calls *out, trace_error *err);

/* How two call logs compare. */
typedef struct rggml_diff {
    bool same;
    long long calls;                /* calls compared (ggml's side) */
    int eval;                       /* the first evaluation that differs */
    char what[512];                 /* its first differing call, both sides */
    /* ggml-alloc's placements ("place" lines): compared apart (alloc_same)
     * or not at all where the twin's differ by a named difference. */
    bool alloc_same;
    long long places;
    char alloc_what[512];
} rggml_diff;

/* Compares a (ggml) with b (the twin), evaluation by evaluation. With
 * print, both sequences of the first differing evaluation go there. */
void rggml_compare(const rggml_calls *a, const rggml_calls *b, rggml_diff *d, FILE *print);

#endif
