/*
 * test_reference.c -- the independent reference (tests/check/ref/ref.h) and
 * the differential between it and the checker (issue 30, item 3).
 *
 * First the reference is shown right without the checker: the shared and
 * the project's litmus traces (their expect lines are the contract's, derived
 * by hand), the traces issue 30
 * quotes and one small trace per ruling, each with expect lines derived by
 * hand from the contract (the derivation is in the comment above each).
 * Then SYNCSIM_REF_TRACES random traces (default 1000; 100000 in the suite's
 * long mode, SYNCSIM_TEST_LONG=1) from SYNCSIM_REF_SEED (default 1) are
 * checked by both; any disagreement fails, printed shrunk.
 * build/tests/ref_diff runs any count with jobs (docs/checker.md, "The
 * reference").
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/check/ref/ref.h"

static ref_trace T;
static ref_verdict V;
static char WHY[8192];

/* Parses text, evaluates it and compares with its expect lines. */
static bool agrees(const char *name, const char *text)
{
    char err[512];
    if (ref_parse(&T, name, text, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return false;
    }
    ref_eval(&T, &V);
    bool ok = ref_expect_agrees(&T, &V, WHY, sizeof WHY);
    if (!ok)
        fprintf(stderr, "%s:\n%s", name, WHY);
    return ok;
}

/* Whether a statement of text (outside comments) quotes a token. */
static bool quotes_a_token(const char *text)
{
    bool comment = false;
    for (const char *c = text; *c; c++) {
        if (*c == '\n')
            comment = false;
        else if (*c == '#' && (c == text || c[-1] == ' ' || c[-1] == '\t' || c[-1] == '\n'))
            comment = true;
        else if (*c == '"' && !comment)
            return true;
    }
    return false;
}

/* The reference on every trace of dir (their expect lines are derived by
 * hand from the contract), but those that quote a token (the reference's
 * parser reads the format without quotes). Returns how many it read. */
static unsigned litmus_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "no litmus folder at %s\n", dir);
        skip();
    }
    unsigned n = 0, bad = 0;
    struct dirent *e;
    static char text[1 << 16];
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        size_t got = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[got] = '\0';
        if (quotes_a_token(text))
            continue;
        n++;
        if (ref_parse(&T, path, text, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            bad++;
            continue;
        }
        ref_eval(&T, &V);
        if (!ref_expect_agrees(&T, &V, WHY, sizeof WHY)) {
            fprintf(stderr, "%s:\n%s", path, WHY);
            bad++;
        }
    }
    closedir(d);
    assert_int_equal(bad, 0);
    return n;
}

static void test_reference_shared_litmus(void **state)
{
    (void)state;
    assert_true(litmus_dir(SYNCSIM_SHARED_DIR "/litmus") >= 12);
}

/* The project's own litmus traces (tests/litmus), ruling 1's documented
 * decision order among them (rule6-flag-decisions-in-one-round.trace). */
static void test_reference_project_litmus(void **state)
{
    (void)state;
    assert_true(litmus_dir(SYNCSIM_SOURCE_DIR "/tests/litmus") >= 120);
}

/* ------------------------------------------------------------------ */
/* The traces issue 30 quotes.                                         */

/* `h await f` then `s signal f` submitted by h: the only signal of f is
 * submitted after the await by the awaiting host, so it is ordered after the
 * await (ruling 1) and the await is never released; s's signal is work
 * submitted behind a blocked host. */
static const char issue_await_then_submitted_signal[] =
    "syncsim-trace 1\n"
    "queue h host\n"
    "queue s stream device=0\n"
    "h await f\n"
    "s signal f by=h\n"
    "expect hang queue=h queue=s\n";

/* The only signal of f is h1's own, after its await: h1 hangs; get never
 * runs, so it races with nothing; h0 runs. */
static const char issue_await_own_later_signal[] =
    "syncsim-trace 1\n"
    "queue h0 host\n"
    "queue h1 host\n"
    "buffer A size=64\n"
    "h0 op put w:A\n"
    "h1 await f\n"
    "h1 op get r:A\n"
    "h1 signal f\n"
    "expect hang queue=h1\n";

/* h2's signal of f follows h2's await of g, whose only signal is h0's,
 * after h0's await of f: so it is ordered after h0's await, which waits
 * for h1's signal only. prod HB use (through f) and HB use2 (through f, h0,
 * g). Every queue runs. */
static const char issue_signal_behind_other_flag[] =
    "syncsim-trace 1\n"
    "queue h0 host\n"
    "queue h1 host\n"
    "queue h2 host\n"
    "buffer A size=64\n"
    "h1 op prod w:A\n"
    "h1 signal f\n"
    "h0 await f\n"
    "h0 op use r:A\n"
    "h0 signal g\n"
    "h2 await g\n"
    "h2 signal f\n"
    "h2 op use2 r:A\n"
    "expect clean\n";

/* n `free X / alloc X` pairs on one host, then a read: each alloc follows
 * its free on the host, the read follows the last alloc: no use after
 * free, whatever n (ruling 2). */
static void free_alloc_pairs(char *buf, size_t cap, unsigned n)
{
    int len = snprintf(buf, cap, "syncsim-trace 1\nqueue h host\nbuffer X size=64\n");
    for (unsigned i = 0; i < n; i++)
        len += snprintf(buf + len, cap - (size_t)len, "h free X\nh alloc X\n");
    snprintf(buf + len, cap - (size_t)len, "h op read r:X\nexpect clean\n");
}

/* A stream-ordered allocator loop: alloc, kernel, free on one stream, nine
 * times; kernel i follows alloc i, which follows free i-1 (queue order). */
static void allocator_loop(char *buf, size_t cap, unsigned n)
{
    int len = snprintf(buf, cap, "syncsim-trace 1\nqueue h host\nqueue s stream device=0\n"
                                 "buffer X size=64\n");
    for (unsigned i = 0; i < n; i++)
        len += snprintf(buf + len, cap - (size_t)len, "s alloc X\ns op k%u w:X\ns free X\n", i);
    snprintf(buf + len, cap - (size_t)len, "h sync s\nexpect clean\n");
}

/* s0 frees X (line 6); s1, unordered with s0, makes 2n marks; then s0 reads
 * X: ordered after the free (queue order), and no alloc lies between them in
 * HB, so it is a use after free however many marks s1 made. s1's marks race
 * with s0's free and use; the WAW of the free and s1's first alloc covers
 * every byte of X (the contract lets the checker name any of these pairs). */
static void old_free(char *buf, size_t cap, unsigned n)
{
    int len = snprintf(buf, cap, "syncsim-trace 1\nqueue h host\nqueue s0 stream device=0\n"
                                 "queue s1 stream device=1\nbuffer X size=64\ns0 free X\n");
    for (unsigned i = 0; i < n; i++)
        len += snprintf(buf + len, cap - (size_t)len, "s1 alloc X\ns1 free X\n");
    snprintf(buf + len, cap - (size_t)len,
             "s0 op use r:X\nexpect use-after-free buffer=X second=use\n"
             "expect race type=WAW first=s0@6 second=s1@7\n");
}

static void test_reference_issue_traces(void **state)
{
    (void)state;
    static char buf[8192];
    assert_true(agrees("await-then-submitted-signal", issue_await_then_submitted_signal));
    assert_true(agrees("await-own-later-signal", issue_await_own_later_signal));
    assert_true(agrees("signal-behind-other-flag", issue_signal_behind_other_flag));
    assert_false(V.order_matters);
    const unsigned pairs[] = { 1, 8, 9, 20, 40 };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        free_alloc_pairs(buf, sizeof buf, pairs[i]);
        assert_true(agrees("free-alloc-pairs", buf));
        allocator_loop(buf, sizeof buf, pairs[i]);
        assert_true(agrees("allocator-loop", buf));
        old_free(buf, sizeof buf, pairs[i] < 30 ? pairs[i] : 30);
        assert_true(agrees("old-free", buf));
    }
}

/* ------------------------------------------------------------------ */
/* One trace per ruling and extension, derived by hand.                */

static const struct {
    const char *name, *text;
} rulings[] = {
    /* Ruling 1: an await waits for every signal not ordered after it, even
     * those below it in the file: use follows w0 and w1. */
    { "flag-two-signallers-after-await",
      "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h2 host\nbuffer A size=64\n"
      "h2 await f\nh2 op use r:A\nh0 op w0 w:A[0:32]\nh0 signal f\n"
      "h1 op w1 w:A[32:64]\nh1 signal f\nexpect clean\n" },
    /* Ruling 1, its own examples. */
    { "flag-own-later-signal", "syncsim-trace 1\nqueue h0 host\nqueue h1 host\n"
                               "h0 signal f\nh1 await f\nh1 signal f\nexpect clean\n" },
    { "flag-only-own-later-signal", "syncsim-trace 1\nqueue h1 host\n"
                                    "h1 await f\nh1 signal f\nexpect hang queue=h1\n" },
    /* An await also waits for a signal that can never run (g has none). */
    { "flag-waits-for-signal-that-never-runs",
      "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h2 host\n"
      "h0 signal f\nh1 await g\nh1 signal f\nh2 await f\nexpect hang queue=h1 queue=h2\n" },
    /* Ruling 1 through a semaphore wait: h2's signal of f follows h2's await
     * of m >= 1, whose only set reaching 1 follows h0's await of f. */
    { "flag-signal-behind-semaphore-wait",
      "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h2 host\nbuffer A size=64\n"
      "semaphore m\nh1 op prod w:A\nh1 signal f\nh0 await f\nh0 op use r:A\n"
      "h0 signal m set=1\nh2 await m >=1\nh2 signal f\nh2 op use2 r:A\nexpect clean\n" },
    /* Ruling 1 through a semaphore wait whose own later set cannot release
     * it: h1's await of m >= 2 can only be released by h2's set, which
     * follows h2's await of f; so h1's signal of f follows that await, which
     * waits for h2's own signal only. Every queue runs; the two sets are
     * ordered (S, h1's await, h1's set). */
    { "flag-behind-semaphore-wait-own-set",
      "syncsim-trace 1\nqueue h1 host\nqueue h2 host\nsemaphore m\n"
      "h1 await m >=2\nh1 signal m set=2\nh1 signal f\nh2 signal f\nh2 await f\n"
      "h2 signal m set=2\nexpect clean\n" },
    /* Ruling 1 through a generation that never completes: h1's second
     * signal of f follows h1's arrival at a barrier of 3 that also needs
     * h0's arrival, which follows h0's await: so the await waits for h1's
     * first signal only and k8 runs (racing with k3, after that signal on
     * h1); then both block at the short barrier. */
    { "flag-behind-short-generation",
      "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nbuffer B size=64\n"
      "h1 signal f\nh1 op k3 w:B\nh0 await f\nh0 op k8 w:B\nh1 barrier b count=3\n"
      "h1 signal f\nh0 barrier b count=3\n"
      "expect race type=WAW first=k3 second=k8\nexpect hang queue=h0 queue=h1\n" },
    /* An await waits for a signal behind another await that can never be
     * released (its only signal follows it): h3's signal of f is not
     * ordered after h1's await, so h1 waits for it forever; use never
     * runs, so it races with nothing. */
    { "flag-waits-behind-self-deadlocked-await",
      "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h3 host\nbuffer A size=64\n"
      "h3 await g\nh3 signal g\nh3 signal f\nh0 signal f\nh1 await f\nh1 op use r:A\n"
      "h0 op w w:A\nexpect hang queue=h1 queue=h3\n" },
    /* Two awaits of f, each with a later signal behind the other (one
     * through a semaphore): whichever is decided first, the other's later
     * signal follows it, and every queue runs. A deadlock here would wait
     * for a signal that can only run after the await. */
    { "flag-mutual-awaits-all-run",
      "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h2 host\n"
      "queue s1 stream device=1\nsemaphore m1\ns1 signal f1 by=h2\nh2 await m1 >=1\n"
      "h2 signal f1\nh0 await f1\nh1 await f1\nh1 signal m1 set=1\nh0 signal f1\n"
      "expect clean\n" },
    /* Two awaits each behind the other's only signal: a deadlock. */
    { "flag-cycle", "syncsim-trace 1\nqueue h0 host\nqueue h1 host\n"
                    "h0 await g\nh0 signal f\nh1 await f\nh1 signal g\n"
                    "expect hang queue=h0 queue=h1\n" },
    /* Ruling 2: the alloc the use follows is not ordered after the free
     * (s0 frees, h allocates without a sync): a use after free, and the free
     * and the alloc race (both write the whole buffer). Lines: free 5, alloc 6. */
    { "uaf-unordered-alloc-does-not-hide",
      "syncsim-trace 1\nqueue h host\nqueue s0 stream device=0\nbuffer X size=64\n"
      "s0 free X\nh alloc X\ns0 op use r:X\n"
      "expect use-after-free buffer=X second=use\nexpect race type=WAW first=s0@5 second=h@6\n" },
    /* With the sync the alloc follows the free, and the use the alloc. */
    { "uaf-alloc-after-free-clean",
      "syncsim-trace 1\nqueue h host\nqueue s0 stream device=0\nbuffer X size=64\n"
      "s0 free X\nh sync s0\nh alloc X\ns0 op use r:X\nexpect clean\n" },
    /* A second free ordered after the first is a use after free; through a
     * view, the finding names the view. */
    { "uaf-double-free-and-view",
      "syncsim-trace 1\nqueue h host\nbuffer X size=64\nbuffer V in=X offset=8 size=8\n"
      "h free X\nh op peek r:V\nh free X\n"
      "expect use-after-free buffer=V second=peek\nexpect use-after-free buffer=X second=h@7\n" },
    /* Ruling 3: t2 is the third arrival at a barrier of two; it passes
     * without synchronising, so r2 races with a0, while r1 follows it. */
    { "barrier-extra-arrival",
      "syncsim-trace 1\nqueue t0 host\nqueue t1 host\nqueue t2 host\nbuffer A size=64\n"
      "t0 op a0 w:A[0:32]\nt0 barrier b count=2\nt1 barrier b count=2\n"
      "t2 barrier b count=2\nt1 op r1 r:A[0:32]\nt2 op r2 r:A[0:32]\n"
      "expect barrier-mismatch barrier=b\nexpect race type=RAW first=a0 second=r2\n" },
    /* A generation short of its count never completes. */
    { "barrier-short", "syncsim-trace 1\nqueue t0 host\nqueue t1 host\n"
                       "t0 barrier b count=3\nt1 barrier b count=3\nt1 op after\n"
                       "expect hang queue=t0 queue=t1\n" },
    /* Ruling 4: r0's `sync all` covers x (no rank) and not r1.s; r1.h
     * learns of it through a message, so use1 races with k1, usec does not
     * race with kx. */
    { "rank-sync-all",
      "syncsim-trace 1\nqueue r0.h host\nqueue r1.h host\nqueue r1.s stream device=r1.0\n"
      "queue x stream device=x\nbuffer r1.B size=64\nbuffer C size=64\n"
      "r1.s op k1 w:r1.B by=r1.h\nx op kx w:C by=r1.h\nr0.h sync all\nr0.h op usec r:C\n"
      "r0.h send ctl from=0 to=1 tag=0\nr1.h recv ctl from=0 to=1 tag=0\n"
      "r1.h op use1 r:r1.B\nexpect race type=RAW first=k1 second=use1\n" },
    /* Rule 6b: released by the first set that reaches 1, so fill_hi (before
     * set=2) is not ordered before read_all. */
    { "semaphore-first-set-that-reaches",
      "syncsim-trace 1\nqueue h host\nqueue s0 stream device=0\nqueue s1 stream device=1\n"
      "buffer A size=2048\nsemaphore ready\ns0 op fill_lo w:A[0:1024]\n"
      "s0 signal ready set=1\ns0 op fill_hi w:A[1024:2048]\ns0 signal ready set=2\n"
      "s1 await ready >=1\ns1 op read_all r:A\n"
      "expect race type=RAW first=fill_hi second=read_all\n" },
    /* Two unordered sets of a semaphore. */
    { "semaphore-race", "syncsim-trace 1\nqueue h host\nqueue s0 stream device=0\n"
                        "queue s1 stream device=1\nsemaphore step\n"
                        "s0 signal step set=5\ns1 signal step set=2\n"
                        "expect semaphore-race semaphore=step\n" },
    /* Rule 9: a recv standing before its send; a recv no send pairs with
     * hangs; a send no recv pairs with is unmatched. */
    { "messages",
      "syncsim-trace 1\nqueue r0.h host\nqueue r1.h host\nbuffer r0.X size=64\n"
      "buffer r1.Y size=64\nr1.h recv p from=0 to=1 tag=5 w:r1.Y\nr1.h op use r:r1.Y\n"
      "r0.h op make w:r0.X\nr0.h send p from=0 to=1 tag=5 r:r0.X\nr0.h op again w:r0.X\n"
      "r0.h send q from=0 to=1 tag=1\nexpect unmatched-send comm=q\n" },
    { "recv-without-send", "syncsim-trace 1\nqueue r1.h host\n"
                           "r1.h recv p from=0 to=1 tag=0\nexpect hang queue=r1.h\n" },
    /* Rule 7: the collective's accesses happen inside it: after snoop (r1
     * arrived after it), before fetch (r1 continues after it). */
    { "collective-access-inside",
      "syncsim-trace 1\nqueue host host\nqueue r0 stream device=0\nqueue r1 stream device=1\n"
      "buffer x0 size=64\nbuffer x1 size=64\nbuffer t1 size=64\nbuffer t2 size=64\n"
      "r1 copy snoop x0 t1\nr0 collective tp allreduce size=2 rw:x0\n"
      "r1 collective tp allreduce size=2 rw:x1\nr1 copy fetch x0 t2\nexpect clean\n" },
    /* Race type (ref_eval.c, "race type"), the issue's example: k4 (before
     * k5 on s2, unordered with k3) can run between k3 and k5 and writes
     * A[58:63], so k3/k5 need only be WAR (A[1:45]: k3 reads, k5 writes).
     * k3/k4 both read and write A[58:63]: RAW (k5 could run between them
     * too, if k3 ran last, so RAW is allowed there, not obliged). */
    { "race-type-issue-example",
      "syncsim-trace 1\nqueue h0 host\nqueue s1 stream device=1\nqueue s2 stream device=0\n"
      "buffer A size=64\ns1 op k3 r:A[1:45] rw:A[58:63] by=h0\ns2 op k4 rw:A[48:64] by=h0\n"
      "s2 op k5 r:A[42:45] rw:A by=h0\n"
      "expect race type=RAW first=k3 second=k4\nexpect race type=WAR first=k3 second=k5\n" },
    /* ... and RAW for k3/k5 is allowed too (they have it on A[58:63]). */
    { "race-type-issue-example-raw-allowed",
      "syncsim-trace 1\nqueue h0 host\nqueue s1 stream device=1\nqueue s2 stream device=0\n"
      "buffer A size=64\ns1 op k3 r:A[1:45] rw:A[58:63] by=h0\ns2 op k4 rw:A[48:64] by=h0\n"
      "s2 op k5 r:A[42:45] rw:A by=h0\n"
      "expect race type=RAW first=k3 second=k4\nexpect race type=RAW first=k3 second=k5\n" },
    /* s0 waits for h0's signal, which stands after k5: k4 and k6 (after the
     * await) are unordered with k5, k4 HB k6. Nothing stands between k5 and
     * k6 in the file, but k4 can run between them and writes A[0:32]: on
     * A[0:16] k6 may read k4's bytes, so k5/k6 need only be WAW (A[48:64]).
     * k4/k5: WAW on A[0:32]. */
    { "race-type-between-in-execution",
      "syncsim-trace 1\nqueue h0 host\nqueue s0 stream device=0\nqueue s2 stream device=2\n"
      "buffer A size=64\ns0 await f0\ns0 op k4 w:A[16:32] w:A[0:16]\ns2 op k5 w:A\n"
      "s0 op k6 r:A[0:16] w:A[48:64]\nh0 signal f0\n"
      "expect race type=WAW first=k4 second=k5\nexpect race type=WAW first=k5 second=k6\n" },
    /* h0's await waits for h2's signal alone, so a is unordered with b and
     * c on h1. a/b: RAW on X[0:8] (b reads it), WAW on X[8:16]. But c reads
     * X[0:8] after b (b HB c) and can run between a and b: FastTrack keeps
     * c's read, not b's, so a/b need only be WAW; a/c is RAW. */
    { "race-type-later-read-kept",
      "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h2 host\nbuffer X size=16\n"
      "h0 await f\nh0 op a w:X\nh1 op b r:X[0:8] w:X[8:16]\nh1 op c r:X[0:8]\nh2 signal f\n"
      "expect race type=WAW first=a second=b\nexpect race type=RAW first=a second=c\n" },
    /* Rule 3: a host wait on an event never recorded does not block. */
    { "host-wait-unrecorded",
      "syncsim-trace 1\nqueue h host\nqueue s stream device=0\nbuffer y size=64\n"
      "s op mv w:y\nh wait done\nh op print r:y\n"
      "expect wait-unrecorded event=done\nexpect race type=RAW first=mv second=print\n" },
};

static void test_reference_rulings(void **state)
{
    (void)state;
    unsigned bad = 0;
    for (size_t i = 0; i < sizeof rulings / sizeof rulings[0]; i++)
        if (!agrees(rulings[i].name, rulings[i].text))
            bad++;
    assert_int_equal(bad, 0);
}

/* The comparison with expect lines can fail: wrong expectations are caught. */
static void test_reference_rejects_wrong_expectations(void **state)
{
    (void)state;
    static const char *const wrong[] = {
        /* the chain of the issue hangs nobody */
        "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h2 host\nbuffer A size=64\n"
        "h1 op prod w:A\nh1 signal f\nh0 await f\nh0 op use r:A\nh0 signal g\nh2 await g\n"
        "h2 signal f\nh2 op use2 r:A\nexpect hang queue=h0 queue=h2\n",
        /* a race left out: upload/download's bytes are then uncovered */
        "syncsim-trace 1\nqueue host host\nqueue s0 stream device=0\nqueue s1 stream device=1\n"
        "buffer X size=4096 host pinned\nbuffer A size=4096 device=0\n"
        "buffer B size=4096 device=1\nhost op fill w:X\ns0 copy upload X A\ns0 op mm0 r:A w:A\n"
        "s0 record e0\ns1 copy p2p A B\ns1 op mm1 r:B w:B\nhost sync s1\n"
        "host copy download B X\nexpect race type=RAW first=mm0 second=p2p\n",
        /* a type the pair has, but less telling than the contract obliges:
         * nothing else touches A, so the checker must compare all of it: RAW */
        "syncsim-trace 1\nqueue h host\nqueue s0 stream device=0\nqueue s1 stream device=1\n"
        "buffer A size=64\ns0 op a rw:A\ns1 op b rw:A\nexpect race type=WAR first=a second=b\n",
        /* a type the pair does not have: k5 writes what k4 wrote, reads none */
        "syncsim-trace 1\nqueue h0 host\nqueue s0 stream device=0\nqueue s2 stream device=2\n"
        "buffer A size=64\ns0 await f0\ns0 op k4 w:A[16:32] w:A[0:16]\ns2 op k5 w:A\n"
        "s0 op k6 r:A[0:16] w:A[48:64]\nh0 signal f0\n"
        "expect race type=RAW first=k4 second=k5\nexpect race type=WAW first=k5 second=k6\n",
        /* a race of the wrong type */
        "syncsim-trace 1\nqueue h host\nqueue s stream device=0\nbuffer y size=64\n"
        "s op mv w:y\nh op print r:y\nexpect race type=WAR first=mv second=print\n",
        /* nine pairs are no use after free */
        "syncsim-trace 1\nqueue h host\nbuffer X size=64\nh free X\nh alloc X\nh op read r:X\n"
        "expect use-after-free buffer=X second=read\n",
        /* the extra arrival is a mismatch */
        "syncsim-trace 1\nqueue t0 host\nqueue t1 host\nqueue t2 host\n"
        "t0 barrier b count=2\nt1 barrier b count=2\nt2 barrier b count=2\nexpect clean\n",
        /* a deadlock is never clean */
        "syncsim-trace 1\nqueue h host\nqueue s stream device=0\nh await f\ns signal f by=h\n"
        "expect clean\n",
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        char err[512];
        assert_int_equal(ref_parse(&T, "wrong", wrong[i], err, sizeof err), 0);
        ref_eval(&T, &V);
        assert_false(ref_expect_agrees(&T, &V, WHY, sizeof WHY));
    }
}

/* Two awaits each needing a signal behind the other, each with another
 * signal free to run: deciding h0's await first and the converse both run
 * every queue, with different HB, and the reference counts the trace as
 * one where the order matters. Its verdict is the documented order's
 * (docs/semantics.md: the blocked awaits are decided in file order): h0's
 * await (line 5) is decided first and waits for h1's and h3's signals of f;
 * then h1's await of g counts h0's signal of g as ordered after itself (it
 * follows h0's await, which waits for h1's signal of f), so it waits for
 * h2's alone: h2's signal HB h1's signal of f, h0's signal of g HB nothing
 * on h1. */
static void test_reference_decides_in_file_order(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(ref_parse(&T, "order",
                               "syncsim-trace 1\nqueue h0 host\nqueue h1 host\nqueue h2 host\n"
                               "queue h3 host\nh0 await f\nh0 signal g\nh1 await g\n"
                               "h1 signal f\nh2 signal g\nh3 signal f\n",
                               err, sizeof err),
                     0);
    ref_eval(&T, &V);
    assert_true(V.order_matters);
    assert_false(V.order_matters_run);
    assert_int_equal(V.blocked, 0);
    assert_int_equal(V.outcomes, 2);
    assert_true(V.hb[3].w[0] >> 4 & 1);     /* h2 signal g HB h1 signal f */
    assert_false(V.hb[3].w[0] >> 1 & 1);    /* h0 signal g does not */
    assert_true(V.hb[1].w[0] >> 3 & 1);     /* h1 signal f HB h0 signal g */
    assert_true(V.hb[1].w[0] >> 5 & 1);     /* and h3's */
}

static void test_reference_seeds_differ(void **state)
{
    (void)state;
    static ref_trace a, b;
    static char ta[1 << 16], tb[1 << 16];
    assert_true(ref_trace_seed(2, 0) != ref_trace_seed(3, 0));
    unsigned same = 0;
    for (uint64_t i = 0; i < 20; i++) {
        ref_generate(&a, ref_trace_seed(2, i));
        ref_generate(&b, ref_trace_seed(3, i));
        ref_print(&a, ta, sizeof ta);
        ref_print(&b, tb, sizeof tb);
        same += strcmp(ta, tb) == 0;
    }
    assert_true(same < 3);
}

/* ------------------------------------------------------------------ */
/* The differential.                                                   */

static ref_run_stats STATS;
static uint64_t N_TRACES = 1000, SEED = 1;

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    unsigned long long x = strtoull(v, &end, 0);
    return *end ? def : (uint64_t)x;
}

/* Group setup: runs the traces once; the tests below read the counts.
 * 1000 traces, or 100000 in the suite's long mode (SYNCSIM_TEST_LONG=1,
 * scripts/setup --test); SYNCSIM_REF_TRACES overrides both. */
static int run_traces(void **state)
{
    (void)state;
    const char *long_mode = getenv("SYNCSIM_TEST_LONG");
    bool is_long = long_mode && strcmp(long_mode, "1") == 0;
    N_TRACES = env_u64("SYNCSIM_REF_TRACES", is_long ? 100000 : 1000);
    SEED = env_u64("SYNCSIM_REF_SEED", 1);
    ref_stats_init(&STATS);
    for (uint64_t i = 0; i < N_TRACES; i++)
        ref_run_one(SEED, i, &STATS);
    printf("reference differential, seed %llu (SYNCSIM_REF_SEED), %llu traces "
           "(SYNCSIM_REF_TRACES):\n",
           (unsigned long long)SEED, (unsigned long long)N_TRACES);
    ref_stats_print(stdout, &STATS);
    return 0;
}

static void test_reference_checker_agrees(void **state)
{
    (void)state;
    for (int c = 0; c < REF_CLASS_COUNT; c++) {
        if (!STATS.classes[c])
            continue;
        static ref_trace t;
        static ref_verdict v;
        static char text[1 << 16];
        uint64_t i = STATS.first_index[c];
        int g = ref_generate(&t, ref_trace_seed(SEED, i));
        ref_shrink(&t, 1u << c);
        ref_eval(&t, &v);
        ref_diff(&t, &v, WHY, sizeof WHY);
        ref_print(&t, text, sizeof text);
        printf("\nDISAGREEMENT %s (%s): %llu traces; the first, trace %llu of seed %llu "
               "(generator %s), shrunk to %u statements:\n%s-- %s",
               ref_class_word(c), ref_class_what(c), (unsigned long long)STATS.classes[c],
               (unsigned long long)i, (unsigned long long)SEED, ref_gen_name(g), t.n, text, WHY);
    }
    assert_int_equal(STATS.disagree, 0);
}

/* Every finding kind, and clean verdicts, occur in the default run, and
 * every generator is used: the run covers the rulings. */
static void test_reference_generators_reach_every_kind(void **state)
{
    (void)state;
    if (N_TRACES < 1000)
        skip();
    for (int k = 0; k < REF_FOUND_COUNT; k++) {
        if (k >= REF_FOUND_AMBIGUOUS_SEM)
            continue;
        if (STATS.found[k] < N_TRACES / 200)
            fprintf(stderr, "only %llu traces with %s\n", (unsigned long long)STATS.found[k],
                    ref_found_word(k));
        assert_true(STATS.found[k] >= N_TRACES / 200);
    }
    for (int g = 0; g < ref_gen_count(); g++)
        assert_true(STATS.by_gen[g] > 0);
}

int main(void)
{
    const struct CMUnitTest reference[] = {
        cmocka_unit_test(test_reference_shared_litmus),
        cmocka_unit_test(test_reference_project_litmus),
        cmocka_unit_test(test_reference_issue_traces),
        cmocka_unit_test(test_reference_rulings),
        cmocka_unit_test(test_reference_rejects_wrong_expectations),
        cmocka_unit_test(test_reference_decides_in_file_order),
        cmocka_unit_test(test_reference_seeds_differ),
    };
    const struct CMUnitTest differential[] = {
        cmocka_unit_test(test_reference_checker_agrees),
        cmocka_unit_test(test_reference_generators_reach_every_kind),
    };
    int failed = cmocka_run_group_tests(reference, NULL, NULL);
    failed += cmocka_run_group_tests(differential, run_traces, NULL);
    return failed;
}
