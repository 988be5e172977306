/*
 * viz_test_util.h -- fixtures for the viz tests: a database holding the
 * timed two-device pipeline trace (tests/viz/pipeline-2dev-timed.trace)
 * together with a small split graph, written through the recorder the way
 * `syncsim run` writes its runs; temporary directories; running syncsim.
 */
#ifndef SYNCSIM_TESTS_VIZ_UTIL_H
#define SYNCSIM_TESTS_VIZ_UTIL_H

#include "traces/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIPELINE_TRACE SYNCSIM_SOURCE_DIR "/tests/viz/pipeline-2dev-timed.trace"
#define PIPELINE_LITMUS SYNCSIM_SOURCE_DIR "/tests/litmus/bug-pipeline-async-user-input-2slots.trace"

/* Maps a string id of `from` to one of the recorder. */
static inline uint32_t vt_str(trace_recorder *rec, const trace *from, uint32_t id)
{
    return id == TRACE_NONE ? TRACE_NONE : trace_recorder_intern(rec, trace_str(from, id));
}

/* The split graph of the pipeline: split 0 on GPU0 (set by a user input
 * copied in two slots), split 1 on GPU1 fed by a copy of split 0's
 * activations, and a CPU split for the output. */
static inline int vt_record_graph(trace_recorder *rec)
{
    static const trace_graph_node nodes[] = {
        { 1, "inp", "input", "512 f32", "CPU", -1, "pass 1: graph input on the CPU", -1, TRACE_NODE_INPUT },
        { 2, "w_a", "leaf", "512x512 f16", "GPU0", 0, "pass 1: lives in a buffer of the backend", -1, TRACE_NODE_WEIGHT },
        { 3, "inp#GPU0#0", "cpy", "512 f32", "GPU0", 0, "pass 1: copy of a split input", 0, TRACE_NODE_COPY },
        { 4, "inp#GPU0#1", "cpy", "512 f32", "GPU0", 0, "pass 1: copy of a split input", 1, TRACE_NODE_COPY },
        { 5, "layers_a", "mul_mat", "512 f32", "GPU0", 0, "pass 1: op follows its weight", -1, 0 },
        { 6, "act#GPU1#0", "cpy", "512 f32", "GPU1", 1, "pass 1: copy of a split input", 0, TRACE_NODE_COPY },
        { 7, "layers_b", "mul_mat", "512 f32", "GPU1", 1, "pass 2: expanded down from the previous node", -1, 0 },
        { 8, "out", "add", "512 f32", "CPU", 2, "pass 4: first backend that supports it", -1, TRACE_NODE_OUTPUT },
    };
    static const trace_graph_edge edges[] = {
        { 1, 3, "copy" }, { 1, 4, "copy" }, { 3, 5, "input" }, { 2, 5, "data" },
        { 5, 6, "copy" }, { 6, 7, "input" }, { 7, 8, "input" },
    };
    static const trace_graph_split splits[] = {
        { 0, "GPU0", 2, 4, "1" }, { 1, "GPU1", 6, 2, "5" }, { 2, "CPU", 8, 1, "7" },
    };
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        if (trace_recorder_graph_node(rec, &nodes[i]) != 0)
            return -1;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        if (trace_recorder_graph_edge(rec, &edges[i]) != 0)
            return -1;
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++)
        if (trace_recorder_graph_split(rec, &splits[i]) != 0)
            return -1;
    return 0;
}

/* Records the text trace at `trace_path` as a new run of db (with the split
 * graph when graph is true and run_meta pairs meta[0..2n)). Returns the run id
 * or -1. */
static inline int64_t vt_record_trace(const char *db, const char *trace_path, bool graph,
                                      const char *const *meta, size_t n_meta)
{
    trace *t = NULL;
    trace_error err = { 0 };
    if (trace_text_parse_file(trace_path, &t, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    trace_recorder_opts o = { .run_name = "pipeline", .source = "test" };
    trace_recorder *rec = trace_recorder_open(db, &o, &err);
    if (!rec) {
        fprintf(stderr, "%s\n", err.msg);
        trace_free(t);
        return -1;
    }
    int64_t run = trace_recorder_run(rec);
    for (uint32_t q = 0; q < t->n_queues; q++)
        trace_recorder_queue(rec, trace_str(t, t->queues[q].name), t->queues[q].kind,
                             t->queues[q].device == TRACE_NONE ? NULL
                                                               : trace_str(t, t->queues[q].device));
    for (uint32_t b = 0; b < t->n_buffers; b++) {
        const trace_buffer *x = &t->buffers[b];
        if (x->parent == TRACE_NONE)
            trace_recorder_buffer(rec, trace_str(t, x->name), x->size, x->loc,
                                  x->device == TRACE_NONE ? NULL : trace_str(t, x->device), x->pinned);
        else
            trace_recorder_view(rec, trace_str(t, x->name), x->parent, x->offset, x->size);
    }
    for (size_t i = 0; i < n_meta; i++)
        trace_recorder_meta(rec, meta[2 * i], meta[2 * i + 1]);
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        trace_attr attrs[16];
        for (uint32_t a = 0; a < s.n_attr && a < 16; a++)
            attrs[a] = (trace_attr){ vt_str(rec, t, s.attr[a].key), vt_str(rec, t, s.attr[a].value) };
        s.attr = attrs;
        s.label = vt_str(rec, t, s.label);
        s.coll_kind = vt_str(rec, t, s.coll_kind);
        if (s.kind == TRACE_RECORD || s.kind == TRACE_WAIT || s.kind == TRACE_BARRIER ||
            s.kind == TRACE_SIGNAL || s.kind == TRACE_AWAIT || s.kind == TRACE_COLLECTIVE ||
            (s.kind == TRACE_SYNC && s.sync_scope == TRACE_SYNC_DEVICE))
            s.object = vt_str(rec, t, s.object);
        s.line = 0;
        trace_recorder_append(rec, &s);
    }
    if (graph && vt_record_graph(rec) != 0)
        run = -1;
    if (trace_recorder_close(rec, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        run = -1;
    }
    trace_free(t);
    return run;
}

/* A fresh temporary directory (caller frees the string; removes it with vt_rmdir). */
static inline char *vt_tmpdir(void)
{
    char *d = strdup("/tmp/syncsim-viz-test-XXXXXX");
    return d && mkdtemp(d) ? d : NULL;
}

static inline void vt_rmdir(char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
}

/* Runs a shell command; returns its exit status (-1 when it did not exit). */
static inline int vt_sh(const char *cmd)
{
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Reads a whole file (NULL when missing); caller frees. */
static inline char *vt_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Occurrences of needle in hay. */
static inline size_t vt_count(const char *hay, const char *needle)
{
    size_t n = 0, len = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)); p += len)
        n++;
    return n;
}

#endif
