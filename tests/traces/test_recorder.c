/* test_recorder.c -- the thread-safe recorder: concurrent appends, times
 * patched before and after a flush, declarations, the split graph, run
 * status, and a writer process killed mid-run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "traces/trace.h"

/* The status and statement count of run `run`. */
static void run_state(const char *db, int64_t run, char *status, size_t cap, uint64_t *n_stmts)
{
    trace_error err = { 0 };
    trace_store *st = trace_store_open(db, false, &err);
    assert_non_null(st);
    trace_run_info *runs;
    size_t n;
    assert_int_equal(trace_store_runs(st, &runs, &n, &err), 0);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        if (runs[i].id == run) {
            snprintf(status, cap, "%s", runs[i].status);
            *n_stmts = runs[i].n_stmts;
            found = true;
        }
    assert_true(found);
    trace_run_info_free(runs, n);
    trace_store_close(st);
}

/* ------------------------------------------------------------------ */

#define N_THREADS 4
#define PER_THREAD 20000

typedef struct producer {
    trace_recorder *rec;
    int id;
    uint32_t queue, buffer;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    char name[32];
    snprintf(name, sizeof name, "t%d", p->id);
    uint32_t label = trace_recorder_intern(p->rec, name);
    uint32_t key = trace_recorder_intern(p->rec, "i");
    for (int i = 0; i < PER_THREAD; i++) {
        char v[32];
        snprintf(v, sizeof v, "%d", i % 50);
        trace_attr at = { key, trace_recorder_intern(p->rec, v) };
        trace_access acc = { p->buffer, TRACE_W, TRACE_REF_RANGE, (uint64_t)i % 64, 64 };
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = p->queue;
        s.kind = TRACE_OP;
        s.label = label;
        s.access = &acc;
        s.n_access = 1;
        s.attr = &at;
        s.n_attr = 1;
        s.t = i;
        trace_recorder_append(p->rec, &s);
    }
    return NULL;
}

static void test_recorder_threads_append_all_land(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace_recorder_opts o = { .run_name = "threads", .batch_stmts = 1000, .flush_ms = 5 };
    trace_recorder *rec = trace_recorder_open(f->db, &o, &err);
    assert_non_null(rec);
    producer p[N_THREADS];
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        char name[32];
        snprintf(name, sizeof name, "h%d", i);
        p[i] = (producer){ .rec = rec, .id = i };
        p[i].queue = trace_recorder_queue(rec, name, TRACE_QUEUE_HOST, NULL);
        p[i].buffer = trace_recorder_buffer(rec, name, 64, TRACE_LOC_HOST, NULL, false);
        assert_int_not_equal(p[i].queue, TRACE_NONE);
        pthread_create(&th[i], NULL, produce, &p[i]);
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    int64_t run = trace_recorder_run(rec);
    assert_int_equal(trace_recorder_close(rec, &err), 0);

    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, run, &r, &err), 0);
    trace_stmt s;
    uint64_t n = 0;
    int64_t next_t[N_THREADS] = { 0 };
    while (trace_reader_next(&r, &s, &err) == 1) {
        assert_int_equal(s.seq, n); /* dense and unique */
        int q = (int)s.queue;
        assert_true(q < N_THREADS);
        char want[32];
        snprintf(want, sizeof want, "t%d", q);
        assert_string_equal(trace_str(r.trace, s.label), want);
        assert_int_equal(s.t, next_t[q]); /* each thread's appends in its order */
        snprintf(want, sizeof want, "%d", (int)(next_t[q] % 50));
        assert_string_equal(trace_str(r.trace, s.attr[0].value), want);
        assert_int_equal(s.access[0].lo, (uint64_t)next_t[q] % 64);
        next_t[q]++;
        n++;
    }
    assert_int_equal(n, N_THREADS * PER_THREAD);
    trace_reader_close(&r);
    char status[32];
    uint64_t n_stmts;
    run_state(f->db, run, status, sizeof status, &n_stmts);
    assert_string_equal(status, "complete");
    assert_int_equal(n_stmts, N_THREADS * PER_THREAD);
}

static uint64_t append_op(trace_recorder *rec, uint32_t q, const char *label)
{
    trace_stmt s;
    trace_stmt_init(&s);
    s.queue = q;
    s.kind = TRACE_OP;
    s.label = trace_recorder_intern(rec, label);
    return trace_recorder_append(rec, &s);
}

static void test_recorder_set_time_before_and_after_flush(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace_recorder *rec = trace_recorder_open(f->db, NULL, &err);
    assert_non_null(rec);
    uint32_t q = trace_recorder_queue(rec, "h", TRACE_QUEUE_HOST, NULL);
    uint64_t a = append_op(rec, q, "a");
    uint64_t b = append_op(rec, q, "b");
    append_op(rec, q, "c");
    trace_recorder_set_time(rec, a, 100, 10); /* still pending */
    assert_int_equal(trace_recorder_flush(rec, &err), 0);
    trace_recorder_set_time(rec, b, 200, 20); /* already in the database */
    trace_recorder_set_time(rec, 999, 1, 1);  /* never appended: ignored */
    assert_int_equal(trace_recorder_close(rec, &err), 0);
    trace *t;
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 0, &r, &err), 0);
    assert_int_equal(trace_reader_load(&r, &t, &err), 0);
    assert_int_equal(t->n_stmts, 3);
    trace_stmt s;
    trace_stmt_at(t, 0, &s);
    assert_int_equal(s.t, 100);
    assert_int_equal(s.dur, 10);
    trace_stmt_at(t, 1, &s);
    assert_int_equal(s.t, 200);
    assert_int_equal(s.dur, 20);
    trace_stmt_at(t, 2, &s);
    assert_int_equal(s.t, TRACE_TIME_NONE);
    trace_free(t);
}

static void test_recorder_declarations_reach_store(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace_recorder_opts o = { .run_name = "decls", .source = "sim" };
    trace_recorder *rec = trace_recorder_open(f->db, &o, &err);
    assert_non_null(rec);
    uint32_t h = trace_recorder_queue(rec, "host", TRACE_QUEUE_HOST, NULL);
    uint32_t s0 = trace_recorder_queue(rec, "s0", TRACE_QUEUE_STREAM, "CUDA0");
    assert_int_equal(trace_recorder_queue(rec, "s0", TRACE_QUEUE_STREAM, "CUDA0"), TRACE_NONE);
    uint32_t arena = trace_recorder_buffer(rec, "arena", 1 << 16, TRACE_LOC_DEVICE, "CUDA0", false);
    uint32_t v = trace_recorder_view(rec, "slot0", arena, 4096, 1024);
    assert_int_equal(trace_recorder_view(rec, "bad", arena, 65000, 1024), TRACE_NONE);
    trace_attr kv = { trace_recorder_intern(rec, "event"), trace_recorder_intern(rec, "e1") };
    assert_int_equal(trace_recorder_expect(rec, TRACE_FINDING_WAIT_UNRECORDED, &kv, 1), 0);
    assert_int_equal(trace_recorder_meta(rec, "policy", "events"), 0);
    assert_int_equal(trace_recorder_flush(rec, &err), 0);
    assert_int_equal(trace_recorder_meta(rec, "policy", "relaxed"), 0); /* replaced */
    trace_access acc = { v, TRACE_RW, TRACE_REF_WHOLE, 0, 1024 };
    trace_stmt s;
    trace_stmt_init(&s);
    s.queue = s0;
    s.kind = TRACE_OP;
    s.by = h;
    s.label = trace_recorder_intern(rec, "mm");
    s.access = &acc;
    s.n_access = 1;
    trace_recorder_append(rec, &s);
    assert_int_equal(trace_recorder_close(rec, &err), 0);

    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 0, &r, &err), 0);
    trace *t = r.trace;
    assert_int_equal(t->n_queues, 2);
    assert_string_equal(trace_str(t, t->queues[1].device), "CUDA0");
    assert_int_equal(t->n_buffers, 2);
    assert_int_equal(t->buffers[1].parent, 0);
    assert_int_equal(t->buffers[1].root_offset, 4096);
    assert_int_equal(t->n_expects, 1);
    assert_int_equal(t->expects[0].kind, TRACE_FINDING_WAIT_UNRECORDED);
    assert_string_equal(trace_get_meta(t, "policy"), "relaxed");
    trace_stmt out;
    assert_int_equal(trace_reader_next(&r, &out, &err), 1);
    assert_int_equal(out.by, 0);
    assert_int_equal(out.access[0].hi, 1024);
    assert_int_equal(trace_reader_next(&r, &out, &err), 0);
    trace_reader_close(&r);
}

static void test_recorder_run_recording_until_close(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace_recorder *rec = trace_recorder_open(f->db, NULL, &err);
    assert_non_null(rec);
    uint32_t q = trace_recorder_queue(rec, "h", TRACE_QUEUE_HOST, NULL);
    for (int i = 0; i < 10; i++)
        append_op(rec, q, "x");
    assert_int_equal(trace_recorder_flush(rec, &err), 0);
    char status[32];
    uint64_t n;
    run_state(f->db, trace_recorder_run(rec), status, sizeof status, &n);
    assert_string_equal(status, "recording");
    assert_int_equal(n, 10);
    int64_t run = trace_recorder_run(rec);
    assert_int_equal(trace_recorder_close(rec, &err), 0);
    run_state(f->db, run, status, sizeof status, &n);
    assert_string_equal(status, "complete");
}

static void test_recorder_graph_round_trip(void **state)
{
    fixture *f = *state;
    trace_error err = { 0 };
    trace_recorder *rec = trace_recorder_open(f->db, NULL, &err);
    assert_non_null(rec);
    trace_graph_node n0 = { 0, "inp", "none", NULL, "CPU", -1, "pass 1: graph input", -1,
                            TRACE_NODE_INPUT };
    trace_graph_node n1 = { 1, "mm", "mul_mat", "4096x32 f16", "CUDA0", 0, "pass 1: weight", -1, 0 };
    trace_graph_node n2 = { 2, "inp#copy", "cpy", NULL, "CUDA0", 0, "split input", 1,
                            TRACE_NODE_COPY };
    trace_graph_edge e0 = { 0, 2, "copy" }, e1 = { 2, 1, "data" };
    trace_graph_split s0 = { 0, "CUDA0", 1, 2, "0" };
    assert_int_equal(trace_recorder_graph_node(rec, &n2), 0);
    assert_int_equal(trace_recorder_graph_node(rec, &n0), 0);
    assert_int_equal(trace_recorder_graph_node(rec, &n1), 0);
    assert_int_equal(trace_recorder_graph_edge(rec, &e0), 0);
    assert_int_equal(trace_recorder_graph_edge(rec, &e1), 0);
    assert_int_equal(trace_recorder_graph_split(rec, &s0), 0);
    int64_t run = trace_recorder_run(rec);
    assert_int_equal(trace_recorder_close(rec, &err), 0);
    trace_store *st = trace_store_open(f->db, false, &err);
    trace_graph g;
    assert_int_equal(trace_store_graph(st, run, &g, &err), 0);
    assert_int_equal(g.n_nodes, 3);
    assert_int_equal(g.nodes[0].id, 0); /* by id */
    assert_string_equal(g.nodes[1].shape, "4096x32 f16");
    assert_null(g.nodes[0].shape);
    assert_int_equal(g.nodes[0].split, -1);
    assert_int_equal(g.nodes[2].copy_slot, 1);
    assert_int_equal(g.nodes[2].flags, TRACE_NODE_COPY);
    assert_string_equal(g.nodes[2].cause, "split input");
    assert_int_equal(g.n_edges, 2);
    assert_int_equal(g.edges[0].src, 0);
    assert_string_equal(g.edges[1].kind, "data");
    assert_int_equal(g.n_splits, 1);
    assert_string_equal(g.splits[0].inputs, "0");
    assert_int_equal(g.splits[0].n_nodes, 2);
    trace_graph_free(&g);
    trace_store_close(st);
}

/* The child: records batches of 100 statements, flushes after each and
 * reports the count flushed through the pipe, forever. */
static void killed_child(const char *db, int fd)
{
    trace_error err = { 0 };
    trace_recorder_opts o = { .run_name = "doomed", .batch_stmts = 64, .flush_ms = 1000 };
    trace_recorder *rec = trace_recorder_open(db, &o, &err);
    if (!rec)
        _exit(3);
    uint32_t q = trace_recorder_queue(rec, "h", TRACE_QUEUE_HOST, NULL);
    uint32_t b = trace_recorder_buffer(rec, "X", 1 << 20, TRACE_LOC_HOST, NULL, false);
    for (uint64_t i = 0;; i++) {
        char label[32];
        snprintf(label, sizeof label, "op%llu", (unsigned long long)(i % 1000));
        trace_access acc = { b, TRACE_RW, TRACE_REF_RANGE, i % 4096, i % 4096 + 8 };
        trace_stmt s;
        trace_stmt_init(&s);
        s.queue = q;
        s.kind = TRACE_OP;
        s.label = trace_recorder_intern(rec, label);
        s.access = &acc;
        s.n_access = 1;
        s.t = (int64_t)i;
        trace_recorder_append(rec, &s);
        if (i % 100 == 99) {
            if (trace_recorder_flush(rec, &err) != 0)
                _exit(4);
            uint64_t n = i + 1;
            if (write(fd, &n, sizeof n) != sizeof n)
                _exit(5);
        }
    }
}

static void test_recorder_killed_writer_keeps_flushed(void **state)
{
    fixture *f = *state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        killed_child(f->db, fds[1]);
    }
    close(fds[1]);
    uint64_t flushed = 0, n;
    while (flushed < 3000 && read(fds[0], &n, sizeof n) == sizeof n)
        flushed = n;
    kill(pid, SIGKILL);
    int wst;
    waitpid(pid, &wst, 0);
    assert_true(WIFSIGNALED(wst));
    while (read(fds[0], &n, sizeof n) == sizeof n) /* reports written before the kill */
        flushed = n;
    close(fds[0]);
    assert_true(flushed >= 3000);

    char status[32];
    uint64_t n_stmts;
    run_state(f->db, 1, status, sizeof status, &n_stmts);
    assert_string_equal(status, "recording");
    assert_true(n_stmts >= flushed);
    trace_error err = { 0 };
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 1, &r, &err), 0);
    trace_stmt s;
    uint64_t i = 0;
    int rc;
    while ((rc = trace_reader_next(&r, &s, &err)) == 1) {
        char label[32];
        snprintf(label, sizeof label, "op%llu", (unsigned long long)(i % 1000));
        assert_int_equal(s.seq, i);
        assert_string_equal(trace_str(r.trace, s.label), label);
        assert_int_equal(s.t, (int64_t)i);
        assert_int_equal(s.access[0].lo, i % 4096);
        assert_int_equal(s.access[0].hi, i % 4096 + 8);
        i++;
    }
    assert_int_equal(rc, 0);
    assert_true(i >= flushed);
    assert_int_equal(i, n_stmts);
    trace_reader_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_recorder_threads_append_all_land, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_recorder_set_time_before_and_after_flush, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_recorder_declarations_reach_store, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_recorder_run_recording_until_close, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_recorder_graph_round_trip, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_recorder_killed_writer_keeps_flushed, tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
