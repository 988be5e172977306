/* test_merge.c -- multi-rank traces: send/recv in the model, the text format
 * and the store; trace_merge_open (names by rank, ranks from metadata or
 * order, its errors, the order it yields); and the checker on merged jobs
 * (rule 9 matching whatever the interleaving, unmatched sends, races through
 * another rank). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "tests/tmpdir.h"
#include "traces/trace.h"

static trace *parse(const char *name, const char *text)
{
    trace *t = NULL;
    trace_error err = { 0 };
    if (trace_text_parse_string(name, text, strlen(text), &t, &err) != 0)
        fail_msg("%s", err.msg);
    return t;
}

/* The ranks of a job: in-memory traces and readers over them. */
typedef struct job {
    trace *t[4];
    trace_reader r[4], *p[4];
    uint32_t n;
} job;

static void job_add(job *j, const char *text, const char *rank)
{
    char name[32];
    snprintf(name, sizeof name, "rank%u.trace", j->n);
    trace *t = parse(name, text);
    if (rank)
        assert_int_equal(trace_set_meta(t, "rank", rank), 0);
    j->t[j->n] = t;
    trace_reader_memory(&j->r[j->n], t);
    j->r[j->n].source = strdup(name);
    j->p[j->n] = &j->r[j->n];
    j->n++;
}

static void job_free(job *j)
{
    for (uint32_t i = 0; i < j->n; i++) {
        trace_reader_close(&j->r[i]);
        trace_free(j->t[i]);
    }
}

/* Merges j into an in-memory trace (the caller frees it). */
static trace *merge_load(job *j)
{
    trace_reader m;
    trace_error err = { 0 };
    if (trace_merge_open(j->p, j->n, &m, &err) != 0)
        fail_msg("%s", err.msg);
    trace *out = NULL;
    if (trace_reader_load(&m, &out, &err) != 0)
        fail_msg("%s", err.msg);
    return out;
}

static const char *rank0 =
    "syncsim-trace 1\n"
    "queue host host\n"
    "queue s0 stream device=0\n"
    "buffer x size=64 device=0\n"
    "s0 op produce w:x\n"
    "s0 record e\n"
    "host wait e\n"
    "host send pp from=0 to=1 tag=3 r:x label=put\n";
static const char *rank1 =
    "syncsim-trace 1\n"
    "queue host host\n"
    "buffer x size=64 host\n"
    "host recv pp from=0 to=1 tag=3 w:x label=get\n"
    "host op consume r:x\n";

static size_t check_count(trace *t, trace_finding_kind kind, char *text, size_t cap)
{
    trace_reader r;
    trace_reader_memory(&r, t);
    check_options opt = { 0 };
    check_report *rep;
    trace_error err = { 0 };
    if (check_trace(&r, &opt, &rep, &err) != 0)
        fail_msg("%s", err.msg);
    trace_reader_close(&r);
    size_t n = check_report_count_kind(rep, kind);
    if (text && cap) {
        text[0] = '\0';
        for (size_t i = 0; i < check_report_count(rep); i++) {
            const trace_finding *f = check_report_finding(rep, i);
            if (f->kind == kind && f->text)
                snprintf(text, cap, "%s", f->text);
        }
    }
    size_t all = check_report_count(rep);
    check_report_free(rep);
    return kind == TRACE_FINDING_CLEAN ? all : n;
}

/* Each process's names get its rank; communicators, labels and the implied
 * submitter (made explicit) survive. */
static void test_merge_names_by_rank(void **state)
{
    (void)state;
    job j = { 0 };
    job_add(&j, rank0, NULL);
    job_add(&j, rank1, NULL);
    trace *t = merge_load(&j);
    assert_int_not_equal(trace_find_queue(t, "r0.host", 7), TRACE_NONE);
    assert_int_not_equal(trace_find_queue(t, "r1.host", 7), TRACE_NONE);
    assert_int_not_equal(trace_find_buffer(t, "r1.x", 4), TRACE_NONE);
    uint32_t s0 = trace_find_queue(t, "r0.s0", 5);
    assert_string_equal(trace_str(t, t->queues[s0].device), "r0.0");
    assert_string_equal(trace_get_meta(t, "world_size"), "2");
    assert_int_equal(t->n_stmts, 6);
    trace_stmt s;
    trace_stmt_at(t, 0, &s);                        /* r0.s0 op produce */
    assert_int_equal(s.by, trace_find_queue(t, "r0.host", 7));
    trace_stmt_at(t, 1, &s);                        /* record e -> r0.e */
    assert_string_equal(trace_str(t, s.object), "r0.e");
    trace_stmt_at(t, 3, &s);                        /* the send */
    assert_int_equal(s.kind, TRACE_SEND);
    assert_string_equal(trace_str(t, s.object), "pp");
    assert_string_equal(trace_str(t, s.label), "put");
    assert_int_equal(s.rank, 0);
    assert_int_equal(s.peer, 1);
    assert_int_equal(s.count, 3);
    assert_int_equal(check_count(t, TRACE_FINDING_CLEAN, NULL, 0), 0);
    trace_free(t);
    job_free(&j);
}

/* rank= metadata decides the rank when every input has it; duplicates, a
 * partial set and a world_size that disagrees are errors naming files. */
static void test_merge_ranks_from_metadata(void **state)
{
    (void)state;
    job j = { 0 };
    job_add(&j, rank1, "1");
    job_add(&j, rank0, "0");
    trace *t = merge_load(&j);
    trace_stmt s;
    trace_stmt_at(t, 0, &s);    /* untimed: rank by rank, in the list's order */
    assert_string_equal(trace_str(t, t->queues[s.queue].name), "r1.host");
    assert_int_equal(check_count(t, TRACE_FINDING_CLEAN, NULL, 0), 0);
    trace_free(t);
    job_free(&j);

    trace_reader m;
    trace_error err = { 0 };
    job d = { 0 };
    job_add(&d, rank0, "0");
    job_add(&d, rank1, "0");
    assert_int_equal(trace_merge_open(d.p, d.n, &m, &err), -1);
    assert_non_null(strstr(err.msg, "rank0.trace and rank1.trace are both rank 0"));
    job_free(&d);

    job p = { 0 };
    job_add(&p, rank0, "0");
    job_add(&p, rank1, NULL);
    assert_int_equal(trace_merge_open(p.p, p.n, &m, &err), -1);
    assert_non_null(strstr(err.msg, "1 of 2 inputs give their rank"));
    job_free(&p);

    job w = { 0 };
    job_add(&w, rank0, NULL);
    job_add(&w, rank1, NULL);
    assert_int_equal(trace_set_meta(w.t[0], "world_size", "2"), 0);
    assert_int_equal(trace_set_meta(w.t[1], "world_size", "4"), 0);
    assert_int_equal(trace_merge_open(w.p, w.n, &m, &err), -1);
    assert_non_null(strstr(err.msg, "world_size=4, but rank0.trace says world_size=2"));
    job_free(&w);
}

/* A send in the file of another rank is an error of the read. */
static void test_merge_send_in_wrong_file(void **state)
{
    (void)state;
    job j = { 0 };
    job_add(&j, rank1, NULL);       /* rank 0 by order, but it receives as rank 1 */
    job_add(&j, rank0, NULL);
    trace_reader m;
    trace_error err = { 0 };
    assert_int_equal(trace_merge_open(j.p, j.n, &m, &err), 0);
    trace *out = NULL;
    assert_int_equal(trace_reader_load(&m, &out, &err), -1);
    assert_non_null(strstr(err.msg, "rank0.trace:4: a recv to rank 1 in the trace of rank 0"));
    job_free(&j);
}

/* Timed inputs interleave by t (ties by rank); each rank's order stays. */
static void test_merge_interleaves_by_time(void **state)
{
    (void)state;
    job j = { 0 };
    job_add(&j,
            "syncsim-trace 1\nqueue h host\n"
            "h op a0 t=0\nh op a1 t=20\nh op a2 t=40\n", NULL);
    job_add(&j,
            "syncsim-trace 1\nqueue h host\n"
            "h op b0 t=10\nh op b1 t=20\nh op b2 t=50\n", NULL);
    trace *t = merge_load(&j);
    static const char *order[] = { "a0", "b0", "a1", "b1", "a2", "b2" };
    for (uint64_t i = 0; i < 6; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        assert_string_equal(trace_str(t, s.label), order[i]);
        assert_int_equal(s.seq, i);
    }
    trace_free(t);
    job_free(&j);
}

/* Rule 9 pairs by channel and each rank's order: a ping-pong merged rank by
 * rank (every recv of rank 0 fed before the send it waits for) is clean,
 * and the same job with rank 1's reply on another tag is one unmatched send
 * (named by its ranks) and a hang. */
static void test_merge_ping_pong_any_interleaving(void **state)
{
    (void)state;
    const char *ping =
        "syncsim-trace 1\nqueue h host\nbuffer b size=8 host\n"
        "h op fill w:b\n"
        "h send c from=0 to=1 tag=0 r:b\n"
        "h recv c from=1 to=0 tag=0 w:b\n"
        "h op use r:b\n"
        "h send c from=0 to=1 tag=0 r:b\n";
    static const char pong[] =
        "syncsim-trace 1\nqueue h host\nbuffer b size=8 host\n"
        "h recv c from=0 to=1 tag=0 w:b\n"
        "h send c from=1 to=0 tag=%d r:b\n"
        "h recv c from=0 to=1 tag=0 w:b\n";
    char text[512];
    for (int bad = 0; bad < 2; bad++) {
        char buf[512];
        snprintf(buf, sizeof buf, pong, bad ? 7 : 0);
        job j = { 0 };
        job_add(&j, ping, NULL);
        job_add(&j, buf, NULL);
        trace *t = merge_load(&j);
        assert_int_equal(check_count(t, TRACE_FINDING_UNMATCHED_SEND, text, sizeof text), bad);
        assert_int_equal(check_count(t, TRACE_FINDING_HANG, NULL, 0), bad);
        assert_int_equal(check_count(t, TRACE_FINDING_CLEAN, NULL, 0), bad ? 2 : 0);
        if (bad)
            assert_non_null(strstr(text, "rank 1 sends to rank 0 (tag 7 on c"));
        trace_free(t);
        job_free(&j);
    }
}

/* send/recv survive the text writer and the store; old-style errors name
 * what is wrong. */
static void test_merge_p2p_round_trips(void **state)
{
    fixture *f = *state;
    job j = { 0 };
    job_add(&j, rank0, NULL);
    job_add(&j, rank1, NULL);
    trace_reader m;
    trace_error err = { 0 };
    assert_int_equal(trace_merge_open(j.p, j.n, &m, &err), 0);
    assert_true(trace_store_import(f->db, &m, "job", NULL, &err) > 0);
    trace_reader_close(&m);
    trace_reader r;
    assert_int_equal(trace_store_open_reader(f->db, 0, &r, &err), 0);
    trace *back = NULL;
    assert_int_equal(trace_reader_load(&r, &back, &err), 0);
    for (uint32_t i = 0; i < j.n; i++)
        assert_int_equal(trace_reader_rewind(&j.r[i], &err), 0);
    trace *direct = merge_load(&j);
    assert_int_equal(back->n_stmts, 6);
    assert_int_equal(back->n_stmts, direct->n_stmts);
    for (uint64_t i = 0; i < back->n_stmts; i++) {
        trace_stmt a, b;
        trace_stmt_at(back, i, &a);
        trace_stmt_at(direct, i, &b);
        assert_true(trace_stmt_equal(back, &a, direct, &b));
    }
    /* text: write, parse, write again: the same */
    char *t1 = NULL, *t2 = NULL;
    size_t l1 = 0, l2 = 0;
    FILE *o = open_memstream(&t1, &l1);
    trace_reader_memory(&r, direct);
    assert_int_equal(trace_text_write(o, &r, &err), 0);
    trace_reader_close(&r);
    fclose(o);
    assert_non_null(strstr(t1, "r0.host send pp from=0 to=1 tag=3 r:r0.x label=put"));
    assert_non_null(strstr(t1, "r1.host recv pp from=0 to=1 tag=3 w:r1.x label=get"));
    trace *again = parse("again", t1);
    o = open_memstream(&t2, &l2);
    trace_reader_memory(&r, again);
    assert_int_equal(trace_text_write(o, &r, &err), 0);
    trace_reader_close(&r);
    fclose(o);
    /* the run's metadata is written as comments, not read back */
    assert_string_equal(strstr(t1, "queue "), strstr(t2, "queue "));
    free(t1);
    free(t2);
    trace_free(again);
    trace_free(back);
    trace_free(direct);
    job_free(&j);

    static const struct {
        const char *line, *msg;
    } bad[] = {
        { "h send c from=0 to=1 tag=0 w:b", "p:4:28: a send reads what it sends: expected r:REF" },
        { "h recv c from=0 to=1 r:b", "p:4:22: expected tag=T" },
        { "h send c to=1 from=0 tag=0 r:b", "p:4:10: expected from=RANK" },
        { "h recv c from=0 to=1 tag=4294967296 w:b", "p:4:26: a tag must be below 2^32" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[300];
        snprintf(text, sizeof text, "syncsim-trace 1\nqueue h host\nbuffer b size=8\n%s\n",
                 bad[i].line);
        trace *t = NULL;
        assert_int_equal(trace_text_parse_string("p", text, strlen(text), &t, &err), -1);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("%s: got '%s', want '%s'", bad[i].line, err.msg, bad[i].msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_names_by_rank),
        cmocka_unit_test(test_merge_ranks_from_metadata),
        cmocka_unit_test(test_merge_send_in_wrong_file),
        cmocka_unit_test(test_merge_interleaves_by_time),
        cmocka_unit_test(test_merge_ping_pong_any_interleaving),
        cmocka_unit_test_setup_teardown(test_merge_p2p_round_trips, tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
