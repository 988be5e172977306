/* test_hb.c -- the happens-before engine, rule by rule, and every finding
 * kind, on in-memory traces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check_test_util.h"

/* host + two streams on device 0 + buffers A, B, X */
static trace *basic(void)
{
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "s0", "0");
    tb_stream(t, "s1", "0");
    tb_buf(t, "A", 4096);
    tb_buf(t, "B", 4096);
    tb_buf(t, "X", 4096);
    return t;
}

static void test_hb_rule1_queue_order_is_clean(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "s0", "mm", "w:A");
    tb_op(t, "s0", "softmax", "r:A w:A");
    tb_op(t, "host", "fill", "w:X");
    tb_op(t, "host", "check", "r:X");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule1_two_streams_race(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "s0", "produce", "w:A");
    tb_op(t, "s1", "consume", "r:A w:B");
    tb_sync(t, "host", "all");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    const trace_finding *f = tb_race(rep, t, "produce", "consume");
    assert_non_null(f);
    assert_int_equal(f->race_type, TRACE_RACE_RAW);
    assert_string_equal(f->fix, "record an event on s0 after produce and wait for it on s1 before consume");
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule2_submission_orders_earlier_host_work(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "host", "fill", "w:X");
    tb_op(t, "s0", "upload", "r:X w:A");
    tb_op(t, "host", "refill", "w:X");      /* after the submit: WAR */
    tb_sync(t, "host", "s0");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    const trace_finding *f = tb_race(rep, t, "upload", "refill");
    assert_non_null(f);
    assert_int_equal(f->race_type, TRACE_RACE_WAR);
    assert_string_equal(f->fix, "add \"host sync s0\" before refill");
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule2_other_host_does_not_order(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h0");
    uint32_t h1 = tb_host(t, "h1");
    tb_stream(t, "s0", "0");
    tb_buf(t, "X", 64);
    tb_buf(t, "A", 64);
    tb_op(t, "h0", "prepare", "w:X");
    tb_by_host = h1;
    tb_op(t, "s0", "upload", "r:X w:A");
    tb_sync(t, "h1", "s0");
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_race(rep, t, "prepare", "upload");
    assert_non_null(f);
    assert_int_equal(check_report_count(rep), 1);
    /* host -> stream submitted by another host: a flag to the submitter */
    assert_non_null(strstr(f->fix, "signal a flag on h0 after prepare and await it on h1"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule3_wait_binds_most_recent_record(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "s0", "k1", "w:A");
    tb_record(t, "s0", "e");
    tb_op(t, "s0", "k2", "w:B");
    tb_record(t, "s0", "e");       /* the wait binds to this one: after k2 */
    tb_wait(t, "s1", "e");
    tb_record(t, "s0", "e");       /* a later re-record changes nothing */
    tb_op(t, "s1", "use", "r:A r:B");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule3_wait_before_record_orders_nothing(void **state)
{
    (void)state;
    trace *t = basic();
    tb_wait(t, "s1", "ready");
    tb_op(t, "s0", "produce", "w:A");
    tb_record(t, "s0", "ready");
    tb_op(t, "s1", "consume", "r:A");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 2);
    const trace_finding *w = tb_find(rep, TRACE_FINDING_WAIT_UNRECORDED);
    assert_non_null(w);
    assert_string_equal(trace_str(t, w->object), "ready");
    assert_int_equal(w->second.line, 1);
    assert_non_null(tb_race(rep, t, "produce", "consume"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule3_host_wait_orders_host(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "s0", "d2h", "r:A w:X");
    tb_record(t, "s0", "done");
    tb_wait(t, "host", "done");
    tb_op(t, "host", "print", "r:X");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule4_sync_covers_only_earlier_submissions(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "s0", "k1", "w:A");
    tb_sync(t, "host", "s0");
    tb_op(t, "s0", "k2", "w:B");
    tb_op(t, "host", "readA", "r:A");      /* covered */
    tb_op(t, "host", "readB", "r:B");      /* k2 came after the sync: race */
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    assert_non_null(tb_race(rep, t, "k2", "readB"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule4_sync_device_and_all(void **state)
{
    (void)state;
    trace *t = basic();
    tb_stream(t, "g1", "1");
    tb_op(t, "s0", "k0", "w:A");
    tb_op(t, "g1", "k1", "w:B");
    tb_sync(t, "host", "device=0");
    tb_op(t, "host", "readA", "r:A");
    tb_op(t, "host", "readB", "r:B");      /* device 1 not covered */
    tb_op(t, "g1", "k2", "w:X");
    tb_sync(t, "host", "all");
    tb_op(t, "host", "readX", "r:X");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    assert_non_null(tb_race(rep, t, "k1", "readB"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule5_barrier_generations(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "t0");
    tb_host(t, "t1");
    tb_buf(t, "rows", 2048);
    tb_op(t, "t0", "w0", "w:rows[0:1024]");
    tb_op(t, "t1", "w1", "w:rows[1024:2048]");
    tb_barrier(t, "t0", "b", 2);
    tb_barrier(t, "t1", "b", 2);
    tb_op(t, "t0", "r0", "r:rows");
    tb_op(t, "t1", "r1", "r:rows");
    tb_op(t, "t1", "w1b", "w:rows[1024:2048]"); /* races with r0: no barrier since */
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    const trace_finding *f = tb_race(rep, t, "r0", "w1b");
    assert_non_null(f);
    assert_int_equal(f->race_type, TRACE_RACE_WAR);
    assert_int_equal(f->lo, 1024);
    assert_int_equal(f->hi, 2048);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule6_await_before_signal_in_file(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_host(t, "h1");
    tb_buf(t, "H", 64);
    tb_await(t, "h1", "ready");            /* submitted before the signal */
    tb_op(t, "h1", "use", "r:H");
    tb_op(t, "h0", "publish", "w:H");
    tb_signal(t, "h0", "ready");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule7_collective_accesses_inside(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "host");
    tb_stream(t, "r0", "0");
    tb_stream(t, "r1", "1");
    tb_buf(t, "a0", 64);
    tb_buf(t, "a1", 64);
    tb_op(t, "r0", "k0", "w:a0");
    tb_op(t, "r1", "k1", "w:a1");
    tb_coll(t, "r0", "world", "allreduce", 2, "ar0", "rw:a0 r:a1");
    tb_coll(t, "r1", "world", "allreduce", 2, "ar1", "rw:a1 r:a0");
    tb_op(t, "r0", "next0", "w:a1");   /* after the collective: ordered after ar1 */
    tb_sync(t, "host", "all");
    check_report *rep = tb_check(t);
    /* ar0 writes a0 while ar1 reads it: both inside, concurrent */
    assert_non_null(tb_race(rep, t, "ar0", "ar1"));
    assert_null(tb_race(rep, t, "ar1", "next0"));
    assert_null(tb_race(rep, t, "k1", "ar0"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule7_collective_mismatch_once_per_comm(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_stream(t, "r0", "0");
    tb_stream(t, "r1", "1");
    tb_buf(t, "a", 64);
    tb_buf(t, "b", 64);
    tb_coll(t, "r0", "world", "allreduce", 2, NULL, "rw:a");
    tb_coll(t, "r0", "world", "allgather", 2, NULL, "rw:a");
    tb_coll(t, "r1", "world", "allgather", 2, NULL, "rw:b");
    tb_coll(t, "r1", "world", "allreduce", 2, NULL, "rw:b");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_COLLECTIVE_MISMATCH);
    assert_non_null(f);
    assert_string_equal(trace_str(t, f->object), "world");
    assert_int_equal(f->generation, 1);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_rule8_host_copy_completes(void **state)
{
    (void)state;
    trace *t = basic();
    tb_stmt(t, "host", TRACE_COPY, "stage", NULL, "r:X w:A");
    tb_op(t, "host", "reuse", "w:X");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_blocking_barrier_orders_later_submissions(void **state)
{
    (void)state;
    trace *t = tb_new();
    uint32_t h0 = tb_host(t, "h0");
    uint32_t h1 = tb_host(t, "h1");
    tb_stream(t, "s1", "1");
    tb_buf(t, "H", 64);
    tb_op(t, "h0", "write", "w:H");
    tb_barrier(t, "h0", "b", 2);
    tb_barrier(t, "h1", "b", 2);
    tb_by_host = h1;
    tb_op(t, "s1", "read", "r:H");          /* submitted by h1 after the barrier */
    tb_by_host = h0;
    (void)h0;
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_hang_names_every_blocked_queue(void **state)
{
    (void)state;
    trace *t = basic();
    tb_await(t, "host", "never");
    tb_op(t, "s0", "k", "w:A");            /* submitted behind the blocked host */
    tb_op(t, "host", "after", "r:A");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_HANG);
    assert_non_null(f);
    assert_int_equal(tb_parts(f, TRACE_PART_BLOCKED, NULL), 2);
    assert_int_equal(tb_parts(f, TRACE_PART_BLOCKED, "flag never"), 1);
    assert_int_equal(tb_parts(f, TRACE_PART_BLOCKED, "submission by host"), 1);
    check_options opt = { .ignore_hangs = true };
    check_report *r2 = tb_check_opt(t, &opt);
    assert_int_equal(check_report_count(r2), 0);
    check_report_free(r2);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_hang_cycle_is_explained(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "rank0");
    tb_host(t, "rank1");
    tb_await(t, "rank0", "r1");
    tb_signal(t, "rank0", "r0");
    tb_await(t, "rank1", "r0");
    tb_signal(t, "rank1", "r1");
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_HANG);
    assert_non_null(f);
    assert_int_equal(tb_parts(f, TRACE_PART_CYCLE, NULL), 2);
    assert_non_null(strstr(f->fix, "move `rank0 signal r0`"));
    check_report_free(rep);
    trace_free(t);
}

/* `h await f` and a signal of f that h submits after it: the await is never
 * released (ruling 1), both queues hang, and the fix says why -- not that
 * nothing signals f. */
static void test_hb_hang_only_signal_after_await(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h");
    tb_stream(t, "s", "0");
    tb_await(t, "h", "f");
    tb_signal(t, "s", "f");
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_HANG);
    assert_non_null(f);
    assert_int_equal(tb_parts(f, TRACE_PART_BLOCKED, NULL), 2);
    assert_non_null(strstr(f->fix, "every signal of f (s@2 (s)) can only run after the await"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_hang_sync_on_blocked_stream(void **state)
{
    (void)state;
    trace *t = basic();
    tb_await(t, "s0", "go");
    tb_sync(t, "host", "s0");
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_find(rep, TRACE_FINDING_HANG);
    assert_non_null(f);
    assert_int_equal(tb_parts(f, TRACE_PART_BLOCKED, NULL), 2);
    assert_int_equal(tb_parts(f, TRACE_PART_BLOCKED, "stream s0"), 1);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_use_after_free_and_free_race(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "s0", "k1", "w:A");
    tb_alloc_free(t, "s0", TRACE_FREE, "A");
    tb_op(t, "s0", "k2", "r:A");           /* ordered after the free */
    tb_op(t, "s1", "k3", "w:B");
    tb_alloc_free(t, "host", TRACE_FREE, "B"); /* not ordered after k3: race */
    check_report *rep = tb_check(t);
    const trace_finding *u = tb_find(rep, TRACE_FINDING_USE_AFTER_FREE);
    assert_non_null(u);
    assert_string_equal(trace_str(t, u->second.label), "k2");
    assert_string_equal(trace_str(t, t->buffers[u->root].name), "A");
    const trace_finding *r = tb_race(rep, t, "k3", "host@5");
    assert_non_null(r);
    assert_int_equal(r->race_type, TRACE_RACE_WAW);
    assert_int_equal(check_report_count(rep), 2);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_alloc_ends_free(void **state)
{
    (void)state;
    trace *t = basic();
    tb_alloc_free(t, "s0", TRACE_FREE, "A");
    tb_alloc_free(t, "s0", TRACE_ALLOC, "A");
    tb_op(t, "s0", "k", "w:A");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_views_resolve_to_root(void **state)
{
    (void)state;
    trace *t = basic();
    tb_buf(t, "arena", 65536);
    tb_view(t, "kv", "arena", 0, 32768);
    tb_view(t, "tmp", "arena", 16384, 16384);
    tb_view(t, "far", "arena", 49152, 1024);
    tb_op(t, "s0", "attn", "r:kv");
    tb_op(t, "s1", "fill", "w:tmp");
    tb_op(t, "s1", "other", "w:far");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    const trace_finding *f = tb_race(rep, t, "attn", "fill");
    assert_non_null(f);
    assert_int_equal(f->lo, 16384);
    assert_int_equal(f->hi, 32768);
    assert_string_equal(trace_str(t, t->buffers[f->root].name), "arena");
    check_report_free(rep);
    trace_free(t);
}

/* The type of a race between two rw accesses comes from what each does, the
 * one earlier in the file first (RAW, and also WAR and WAW): the same
 * whichever the engine runs first. Here the await holds k1 (earlier in the
 * file) back until after k0 ran; in the second trace k0 comes first in the
 * file and runs first. Both: RAW, with WAR and WAW seen. */
static void test_hb_race_type_rw_pair_from_file_order(void **state)
{
    (void)state;
    for (int held = 0; held < 2; held++) {
        trace *t = basic();
        if (held) {
            tb_await(t, "s1", "f");
            tb_op(t, "s1", "first", "rw:A");
            tb_op(t, "s0", "second", "rw:A");
            tb_signal(t, "host", "f");
        } else {
            tb_op(t, "s1", "first", "rw:A");
            tb_op(t, "s0", "second", "rw:A");
        }
        tb_sync(t, "host", "all");
        check_report *rep = tb_check(t);
        const trace_finding *f = tb_race(rep, t, "first", "second");
        assert_non_null(f);
        assert_int_equal(f->race_type, TRACE_RACE_RAW);
        assert_int_equal(f->race_types, TRACE_RACE_RAW | TRACE_RACE_WAR | TRACE_RACE_WAW);
        check_report_free(rep);
        trace_free(t);
    }
}

/* A read earlier in the file than the write it races with is a WAR even
 * when the engine runs the write first, and a write earlier than an rw
 * access is RAW and WAW. */
static void test_hb_race_type_held_read_is_war(void **state)
{
    (void)state;
    static const char *const modes[][3] = { { "r:A", "w:A", "WAR" }, { "w:A", "rw:A", "RAW WAW" } };
    for (int k = 0; k < 2; k++) {
        trace *t = basic();
        tb_await(t, "s1", "f");
        tb_op(t, "s1", "first", modes[k][0]);
        tb_op(t, "s0", "second", modes[k][1]);
        tb_signal(t, "host", "f");
        tb_sync(t, "host", "all");
        check_report *rep = tb_check(t);
        const trace_finding *f = tb_race(rep, t, "first", "second");
        assert_non_null(f);
        uint8_t want = k == 0 ? TRACE_RACE_WAR : TRACE_RACE_RAW | TRACE_RACE_WAW;
        assert_int_equal(f->race_types, want);
        check_report_free(rep);
        trace_free(t);
    }
}

/* A statement with two accesses to overlapping bytes does both to them:
 * k11 writes A and reads A[0:16], so on A[12:16], which k8 (earlier in the
 * file) wrote, it reads after a write: RAW, whichever of its accesses the
 * engine took first. */
static void test_hb_race_type_joins_a_statements_accesses(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_host(t, "h1");
    tb_stream(t, "s0", "1");
    tb_buf(t, "A", 64);
    tb_by_host = tb_q(t, "h0");
    tb_op(t, "h1", "k8", "r:A[24:36] w:A[12:24]");
    tb_op(t, "s0", "k11", "w:A r:A[0:16]");
    tb_by_host = TRACE_NONE;
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_race(rep, t, "k8", "k11");
    assert_non_null(f);
    assert_int_equal(f->race_type, TRACE_RACE_RAW);
    assert_int_equal(f->race_types, TRACE_RACE_RAW | TRACE_RACE_WAR | TRACE_RACE_WAW);
    check_report_free(rep);
    trace_free(t);
}

/* The pieces of a statement whose accesses overlap keep their own modes in
 * the shadow: k9 reads and writes A[0:42] and only writes A[42:64]. k2
 * (earlier in the file, met later: it waits for h1's await) shares A[44:59]
 * with k9 and reads and writes it: WAW and WAR, and no RAW, since k9 reads
 * none of it (tests/litmus/race-type-pieces-keep-their-modes.trace). */
static void test_hb_race_type_from_each_piece_mode(void **state)
{
    (void)state;
    trace *t = tb_new();
    tb_host(t, "h0");
    tb_host(t, "h1");
    tb_stream(t, "s1", "1");
    tb_buf(t, "A", 64);
    tb_await(t, "h1", "f1");
    tb_signal(t, "h0", "f1");
    tb_by_host = tb_q(t, "h1");
    tb_op(t, "s1", "k2", "rw:A[44:59]");
    tb_by_host = TRACE_NONE;
    tb_op(t, "h0", "k9", "w:A r:A[0:42]");
    tb_by_host = tb_q(t, "h1");
    tb_signal(t, "s1", "f1");
    tb_by_host = TRACE_NONE;
    check_report *rep = tb_check(t);
    const trace_finding *f = tb_race(rep, t, "k2", "k9");
    assert_non_null(f);
    assert_int_equal(f->race_type, TRACE_RACE_WAW);
    assert_int_equal(f->race_types, TRACE_RACE_WAW | TRACE_RACE_WAR);
    check_report_free(rep);
    trace_free(t);
}

/* h1 learns of h0 just after h0's first free, then h0 frees and allocs X
 * nine times more (more marks than a range keeps): h1's read could need
 * the forgotten first marks, so it is not judged for use after free, and
 * the coverage says so (never clean); h0's own read after its last alloc
 * is judged: no use after free. */
static void test_hb_unjudged_use_after_free_in_coverage(void **state)
{
    (void)state;
    trace *t = tb_more_marks_than_kept();
    tb_op(t, "h0", "mine", "r:X");
    tb_op(t, "h1", "stale", "r:X");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count_kind(rep, TRACE_FINDING_USE_AFTER_FREE), 0);
    assert_int_equal(check_report_coverage(rep)->uaf_unjudged, 1);
    assert_false(check_coverage_full(check_report_coverage(rep)));
    char buf[512];
    check_coverage_missing(buf, sizeof buf, check_report_coverage(rep), t);
    assert_non_null(strstr(buf, "1 access not judged for use after free"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_reports_last_write_only(void **state)
{
    (void)state;
    trace *t = basic();
    tb_op(t, "s0", "w1", "w:A");
    tb_op(t, "s0", "w2", "w:A");
    tb_op(t, "s1", "r", "r:A");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 1);
    assert_non_null(tb_race(rep, t, "w2", "r"));
    check_report_free(rep);
    trace_free(t);
}

static void test_hb_many_queues_stay_sparse(void **state)
{
    (void)state;
    /* 2000 streams, each hands over to the next through an event: clean,
     * and the last one may read what the first wrote. */
    trace *t = tb_new();
    tb_host(t, "host");
    tb_buf(t, "A", 64);
    char name[32], prev[32], ev[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(name, sizeof name, "s%d", i);
        tb_stream(t, name, "0");
    }
    tb_op(t, "s0", "first", "w:A");
    for (int i = 1; i < 2000; i++) {
        snprintf(prev, sizeof prev, "s%d", i - 1);
        snprintf(name, sizeof name, "s%d", i);
        snprintf(ev, sizeof ev, "e%d", i);
        tb_record(t, prev, ev);
        tb_wait(t, name, ev);
    }
    tb_op(t, "s1999", "last", "r:A");
    tb_sync(t, "host", "all");
    tb_op(t, "host", "read", "r:A");
    check_report *rep = tb_check(t);
    assert_int_equal(check_report_count(rep), 0);
    check_report_free(rep);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hb_rule1_queue_order_is_clean),
        cmocka_unit_test(test_hb_rule1_two_streams_race),
        cmocka_unit_test(test_hb_rule2_submission_orders_earlier_host_work),
        cmocka_unit_test(test_hb_rule2_other_host_does_not_order),
        cmocka_unit_test(test_hb_rule3_wait_binds_most_recent_record),
        cmocka_unit_test(test_hb_rule3_wait_before_record_orders_nothing),
        cmocka_unit_test(test_hb_rule3_host_wait_orders_host),
        cmocka_unit_test(test_hb_rule4_sync_covers_only_earlier_submissions),
        cmocka_unit_test(test_hb_rule4_sync_device_and_all),
        cmocka_unit_test(test_hb_rule5_barrier_generations),
        cmocka_unit_test(test_hb_rule6_await_before_signal_in_file),
        cmocka_unit_test(test_hb_rule7_collective_accesses_inside),
        cmocka_unit_test(test_hb_rule7_collective_mismatch_once_per_comm),
        cmocka_unit_test(test_hb_rule8_host_copy_completes),
        cmocka_unit_test(test_hb_blocking_barrier_orders_later_submissions),
        cmocka_unit_test(test_hb_hang_names_every_blocked_queue),
        cmocka_unit_test(test_hb_hang_cycle_is_explained),
        cmocka_unit_test(test_hb_hang_only_signal_after_await),
        cmocka_unit_test(test_hb_hang_sync_on_blocked_stream),
        cmocka_unit_test(test_hb_use_after_free_and_free_race),
        cmocka_unit_test(test_hb_alloc_ends_free),
        cmocka_unit_test(test_hb_views_resolve_to_root),
        cmocka_unit_test(test_hb_race_type_rw_pair_from_file_order),
        cmocka_unit_test(test_hb_race_type_held_read_is_war),
        cmocka_unit_test(test_hb_race_type_joins_a_statements_accesses),
        cmocka_unit_test(test_hb_unjudged_use_after_free_in_coverage),
        cmocka_unit_test(test_hb_race_type_from_each_piece_mode),
        cmocka_unit_test(test_hb_reports_last_write_only),
        cmocka_unit_test(test_hb_many_queues_stay_sparse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
