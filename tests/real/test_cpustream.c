/*
 * test_cpustream.c -- the emulated device: commands of one queue run in
 * order (copies with jitter included), a wait makes a queue's later work
 * see what the event's record covered, synchronize and event_synchronize
 * block the host until done, and the recorded trace of a correctly
 * synchronised sequence checks clean. A tensor-split model's all-reduces
 * meet across 2 and 4 devices (real/collective.c) with jittered queues and
 * match the reference, and a rank that never comes times out instead of
 * hanging. Runs under ThreadSanitizer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check/check.h"
#include "real_test_util.h"

#include <stdlib.h>
#include <string.h>

#define NB 4096

typedef struct fixture {
    trace *tr;
    sched_rec *rec;
    sched_backend **inner;          /* the set */
    sched_backend *be[4];           /* recorded: what the tests drive */
    size_t n;
    sched_tensor *t[16];
    int n_t;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->tr = trace_new();
    real_options o;
    real_options_default(&o);
    o.threads = 1;
    char err[256];
    if (real_backends_create("cpustream:2,jitter=2ms,seed=3,cpu", &o, &f->inner, &f->n, err,
                             sizeof err) != 0) {
        print_error("%s\n", err);
        return -1;
    }
    f->rec = real_test_rec(sched_sink_memory(f->tr));
    for (size_t i = 0; i < f->n; i++)
        f->be[i] = sched_rec_wrap(f->rec, f->inner[i]);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < f->n_t; i++) {
        sched_buffer *b = f->t[i]->buffer;
        b->backend->iface->buffer_free(b->backend, b);
        free(f->t[i]);
    }
    real_backends_free(f->inner, f->n);
    sched_rec_free(f->rec);
    trace_free(f->tr);
    free(f);
    return 0;
}

/* A tensor of NB bytes in its own buffer of backend b. */
static sched_tensor *tensor(fixture *f, int b, const char *name)
{
    sched_tensor *t = calloc(1, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = SCHED_I32;
    t->n_dims = 1;
    t->ne[0] = NB / 4;
    t->ne[1] = t->ne[2] = t->ne[3] = 1;
    t->view_src = -1;
    t->buffer = f->be[b]->iface->buffer_alloc(f->be[b], name, NB, SCHED_BUFFER_COMPUTE);
    assert_non_null(t->buffer);
    t->trace_view = t->buffer->trace_id;
    f->t[f->n_t++] = t;
    return t;
}

static void fill(sched_tensor *t, int32_t base)
{
    int32_t *v = real_tensor_data(t);
    for (int i = 0; i < NB / 4; i++)
        v[i] = base + i;
}

static void expect_filled(sched_tensor *t, int32_t base)
{
    int32_t *v = real_tensor_data(t);
    for (int i = 0; i < NB / 4; i++)
        assert_int_equal(v[i], base + i);
}

static void test_cpustream_copies_run_in_queue_order(void **state)
{
    fixture *f = *state;
    sched_backend *cs0 = f->be[0];
    sched_tensor *x1 = tensor(f, 2, "x1"), *x2 = tensor(f, 2, "x2"), *y1 = tensor(f, 2, "y1");
    sched_tensor *y2 = tensor(f, 2, "y2"), *a = tensor(f, 0, "a");
    fill(x1, 100);
    fill(x2, 7000);
    /* One device slot reused: later copies must not overtake earlier ones. */
    assert_int_equal(cs0->iface->set_async(cs0, x1, a), 0);
    assert_int_equal(cs0->iface->get_async(cs0, a, y1), 0);
    assert_int_equal(cs0->iface->set_async(cs0, x2, a), 0);
    assert_int_equal(cs0->iface->get_async(cs0, a, y2), 0);
    assert_int_equal(cs0->iface->synchronize(cs0), 0);
    expect_filled(y1, 100);
    expect_filled(y2, 7000);
}

static void test_cpustream_wait_orders_other_queue(void **state)
{
    fixture *f = *state;
    sched_backend *cs0 = f->be[0], *cs1 = f->be[1];
    sched_tensor *x = tensor(f, 2, "x"), *a = tensor(f, 0, "a0"), *y = tensor(f, 2, "y");
    fill(x, 42);
    sched_event *ev = cs0->iface->event_new(cs0, "e0");
    assert_non_null(ev);
    /* cs0 (2 ms jitter per command) uploads; cs1 copies the result out
     * after waiting for cs0's record. */
    assert_int_equal(cs0->iface->set_async(cs0, x, a), 0);
    assert_int_equal(cs0->iface->event_record(cs0, ev), 0);
    assert_int_equal(ev->n_records, 1);
    assert_int_equal(cs1->iface->event_wait(cs1, ev), 0);
    assert_int_equal(cs1->iface->get_async(cs1, a, y), 0);
    assert_int_equal(cs1->iface->synchronize(cs1), 0);
    expect_filled(y, 42);
    /* event_synchronize: the host sees the record's work. */
    fill(x, 5);
    assert_int_equal(cs0->iface->set_async(cs0, x, a), 0);
    assert_int_equal(cs0->iface->event_record(cs0, ev), 0);
    assert_int_equal(cs0->iface->event_synchronize(cs0, ev), 0);
    expect_filled(a, 5);
    cs0->iface->event_free(cs0, ev);
}

/* A copy between devices the way the scheduler makes it: on the source's
 * queue, after the work that produced it, handed over with an event. */
static void peer_copy(sched_backend *from, sched_backend *to, sched_event *ev, sched_tensor *src,
                      sched_tensor *dst)
{
    assert_int_equal(from->iface->copy_async(from, to, src, dst), 1);
    assert_int_equal(from->iface->event_record(from, ev), 0);
    assert_int_equal(to->iface->event_wait(to, ev), 0);
}

static void test_cpustream_copy_async_between_devices(void **state)
{
    fixture *f = *state;
    sched_backend *cs0 = f->be[0], *cs1 = f->be[1], *cpu = f->be[2];
    sched_tensor *x = tensor(f, 2, "hx"), *a = tensor(f, 0, "da"), *b = tensor(f, 1, "db");
    sched_tensor *z = tensor(f, 2, "hz");
    sched_event *ev = cs0->iface->event_new(cs0, "xfer");
    fill(x, 9);
    assert_int_equal(cs0->iface->set_async(cs0, x, a), 0);
    /* Runs on cs0's queue after the upload (2 ms of jitter per command);
     * cs1 waits for it before reading b. */
    peer_copy(cs0, cs1, ev, a, b);
    assert_int_equal(cs1->iface->get_async(cs1, b, z), 0);
    assert_int_equal(cs1->iface->synchronize(cs1), 0);
    expect_filled(z, 9);
    /* A copy to or from a backend that is not ours is declined. */
    sched_backend alien = { cs0->iface, NULL, NULL };
    assert_int_equal(f->inner[0]->iface->copy_async(f->inner[0], &alien, a, b), 0);
    /* The cpu has no async copies: the scheduler syncs and copies itself. */
    assert_null(cpu->iface->copy_async);
    assert_null(cpu->iface->synchronize);
    cs0->iface->event_free(cs0, ev);
}

static void test_cpustream_trace_of_synchronised_copies_is_clean(void **state)
{
    fixture *f = *state;
    sched_backend *cs0 = f->be[0], *cs1 = f->be[1];
    sched_tensor *x = tensor(f, 2, "tx"), *a = tensor(f, 0, "ta"), *b = tensor(f, 1, "tb");
    sched_tensor *y = tensor(f, 2, "ty");
    sched_event *ev = cs0->iface->event_new(cs0, "xfer");
    fill(x, 1);
    assert_int_equal(cs0->iface->set_async(cs0, x, a), 0);
    peer_copy(cs0, cs1, ev, a, b);
    assert_int_equal(cs1->iface->get_async(cs1, b, y), 0);
    assert_int_equal(cs1->iface->synchronize(cs1), 0);
    assert_int_equal(cs0->iface->synchronize(cs0), 0);
    /* The host reads y: ordered after the syncs. */
    trace_access read = { y->trace_view, TRACE_R, TRACE_REF_WHOLE, 0, NB };
    assert_int_equal(real_read_output(y, (float[NB / 4]){ 0 }), 0);
    assert_int_equal(sched_rec_host_op(f->rec, "read:ty", &read, 1, -1, -1, 0, 0), 0);
    cs0->iface->event_free(cs0, ev);
    sched_rec_flush(f->rec);
    assert_int_equal(f->tr->n_stmts, 8);   /* set, copy, record, wait, get, 2 syncs, read */
    trace_reader r;
    trace_reader_memory(&r, f->tr);
    check_report *rep = NULL;
    trace_error err;
    check_options opt = { 0 };
    assert_int_equal(check_trace(&r, &opt, &rep, &err), 0);
    if (check_report_count(rep))
        check_report_print(stderr, rep, false);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_reader_close(&r);

}

static void test_cpustream_spec_errors_name_the_problem(void **state)
{
    (void)state;
    sched_backend **be;
    size_t n;
    char err[256];
    assert_int_equal(real_backends_create("gpu:2", NULL, &be, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown device 'gpu'"));
    assert_int_equal(real_backends_create("cpustream:2,jitter=fast", NULL, &be, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "jitter"));
    assert_int_equal(real_backends_create("cpu,cpustream", NULL, &be, &n, err, sizeof err), -1);
    assert_int_equal(real_backends_create("cpustream", NULL, &be, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);        /* the cpu is appended */
    assert_string_equal(be[0]->iface->get_name(be[0]), "CS0");
    assert_string_equal(be[1]->iface->get_name(be[1]), "CPU");
    real_backends_free(be, n);
}

#define TP_MODEL "tp:n_layer=2,n_embd=32,n_head=4,n_head_kv=4,n_ff=64,n_vocab=64,n_ctx=16,ubatch=4"

static void test_cpustream_allreduce_rendezvous_matches_reference(void **state)
{
    (void)state;
    const char *devices[] = { "cpustream:2,jitter=200us,seed=3,cpu", "cpustream:4,jitter=200us,seed=4,cpu" };
    const char *strategies[] = { "ring", "bf16" };
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++) {
            sched_option_value opts[] = { { "threads", "2" }, { "seed", "2" } };
            sched_run_opts o = { .model = TP_MODEL, .devices = devices[d], .policy = "events",
                                 .tokens = 3, .prompt = 4, .allreduce = strategies[k],
                                 .bf16_min = 16, .options = opts, .n_options = 2 };
            real_test_outcome out;
            sched_null_sink nulls;
            real_test_run(&o, sched_sink_null(&nulls), &out);
            if (out.rc != 0)
                fail_msg("%s %s: %s", devices[d], strategies[k], out.msg);
            assert_false(out.verdict);
            assert_true(out.n_evals >= 4);
            assert_true(out.err.max_abs == 0.0);
        }
}

/* Rank 1 of the group is never submitted: rank 0 gives up after the
 * timeout, the set fails, and synchronize returns instead of hanging. */
static void test_cpustream_allreduce_missing_rank_times_out(void **state)
{
    (void)state;
    real_options o;
    real_options_default(&o);
    o.allreduce_timeout_ns = 100000000;     /* 0.1 s */
    sched_backend **be;
    size_t nb;
    char err[256];
    assert_int_equal(real_backends_create("cpustream:2,cpu", &o, &be, &nb, err, sizeof err), 0);
    sched_graph *g = sched_graph_new("ar");
    int64_t ne[1] = { 64 };
    int32_t x = sched_graph_leaf(g, "x", SCHED_F32, 1, ne, SCHED_FLAG_INPUT);
    int32_t a0 = sched_graph_op(g, "a0", SCHED_OP_SCALE, (int32_t[]){ x }, 1);
    int32_t r0 = sched_graph_op(g, "r0", SCHED_OP_ALL_REDUCE, (int32_t[]){ a0 }, 1);
    int32_t a1 = sched_graph_op(g, "a1", SCHED_OP_SCALE, (int32_t[]){ x }, 1);
    int32_t r1 = sched_graph_op(g, "r1", SCHED_OP_ALL_REDUCE, (int32_t[]){ a1 }, 1);
    assert_true(r1 >= 0);
    g->tensors[a0].user_backend = g->tensors[r0].user_backend = 0;
    g->tensors[a1].user_backend = g->tensors[r1].user_backend = 1;
    g->tensors[r0].flags |= SCHED_FLAG_OUTPUT;
    g->tensors[r1].flags |= SCHED_FLAG_OUTPUT;
    sched *s = sched_new(be, (int)nb, NULL);
    assert_int_equal(sched_plan(s, g, err, sizeof err), SCHED_OK);
    assert_int_equal(real_set_inputs(be, nb, g, 0, 1), 0);
    /* Launch rank 0's split only (the first split on cs0). */
    int split = -1;
    for (int i = 0; i < sched_n_splits(s) && split < 0; i++)
        if (sched_get_split(s, i)->backend == 0)
            split = i;
    assert_true(split >= 0);
    const sched_split *sp = sched_get_split(s, split);
    sched_exec x0 = { .graph = g, .nodes = sp->nodes, .n_nodes = sp->n_nodes, .split = split,
                      .sched = s, .allreduce = SCHED_ALLREDUCE_RING, .allreduce_bf16_min = 32768 };
    assert_null(real_backends_error(be, nb));
    assert_int_equal(be[0]->iface->graph_compute(be[0], &x0), 0);
    assert_int_equal(be[0]->iface->synchronize(be[0]), -1);
    const char *msg = real_backends_error(be, nb);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "all_reduce group 0: rank 0 waited 0.1s for ranks 1"));
    /* Later work fails at once. */
    assert_int_equal(be[0]->iface->graph_compute(be[0], &x0), -1);
    sched_free(s);
    real_backends_free(be, nb);
    sched_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cpustream_copies_run_in_queue_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpustream_wait_orders_other_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpustream_copy_async_between_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpustream_trace_of_synchronised_copies_is_clean, setup, teardown),
        cmocka_unit_test(test_cpustream_spec_errors_name_the_problem),
        cmocka_unit_test(test_cpustream_allreduce_rendezvous_matches_reference),
        cmocka_unit_test(test_cpustream_allreduce_missing_rank_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
