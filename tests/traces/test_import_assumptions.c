/*
 * test_import_assumptions.c -- issue 31: no importer makes a silent
 * assumption, and a guessed order never yields "clean".
 *
 * Every input is built at test time from the public captures
 * (../shared/external-traces, tests/data/external) by
 * tests/traces/derive_captures.py: events removed, duplicated or reshaped,
 * older Kineto shapes, ranks without their metadata, other processors. And
 * every ledger is compared with tests/traces/ledger_count.py, which counts
 * the same classes in the raw file without syncsim's code.
 *
 * Each test names the class of the issue it covers; each fails on the code
 * before the issue (SYNCSIM_TEST_BINARY=/path/to/old/syncsim runs the
 * commands with another build). The tests need python3 and the shared
 * captures: without them they are skipped, saying why.
 *
 * SYNCSIM_SWEEP=full sweeps every single change of the three bases with a
 * finding (890 inputs, about half a minute); the default sweeps a part of
 * their reshapes (the other shapes have a test of their own).
 */
#include "../tmpdir.h"
#include "import_test_util.h"

#include <unistd.h>

#define SHARED SYNCSIM_SHARED_DIR "/external-traces/"
#define EXTERNAL SYNCSIM_SOURCE_DIR "/tests/data/external/"
#define SCRIPTS SYNCSIM_SOURCE_DIR "/tests/traces/"
#define ET SHARED "hta-simple-add-et.json.gz"

/* The derived inputs, made once for all tests (group setup). */
static char derived[64];
static char why_skipped[256];

/* The syncsim under test: SYNCSIM_TEST_BINARY (to run the tests against
 * another build), else this build's. */
static const char *bin(void)
{
    const char *b = getenv("SYNCSIM_TEST_BINARY");
    return b && *b ? b : SYNCSIM_BINARY;
}

static int derive(void **state)
{
    (void)state;
    if (system("python3 -c 'import json, gzip, sqlite3' >/dev/null 2>&1") != 0) {
        snprintf(why_skipped, sizeof why_skipped, "python3 with json, gzip, sqlite3 is absent");
        return 0;
    }
    if (access(SHARED "hta-simple-add-et-kineto.json.gz", R_OK) != 0) {
        snprintf(why_skipped, sizeof why_skipped, "the public captures (%s) are absent", SHARED);
        return 0;
    }
    snprintf(derived, sizeof derived, "/tmp/syncsim-derived-XXXXXX");
    if (!mkdtemp(derived))
        return -1;
    const char *sweep = getenv("SYNCSIM_SWEEP");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 %sderive_captures.py %s %s %s %s >&2", SCRIPTS, SHARED,
             EXTERNAL, derived, sweep && !strcmp(sweep, "full") ? "sweep-full" : "sweep");
    return system(cmd) == 0 ? 0 : -1;
}

/* The test's directory: tmpdir.h's, in /dev/shm where it can be (these
 * tests write a few hundred small databases, and a disk's fsync would make
 * that minutes). */
static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    char shm[64];
    snprintf(shm, sizeof shm, "/dev/shm/syncsim-test-XXXXXX");
    if (access("/dev/shm", W_OK) == 0 && mkdtemp(shm)) {
        rmdir(f->dir);
        snprintf(f->dir, sizeof f->dir, "%s", shm);
        snprintf(f->db, sizeof f->db, "%s/" TMPDIR_DB_NAME, f->dir);
    }
    return 0;
}

static int derived_free(void **state)
{
    (void)state;
    char cmd[128];
    if (!derived[0])
        return 0;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", derived);
    return system(cmd) == 0 ? 0 : -1;
}

/* Skips the test when the inputs could not be made. */
#define NEED_INPUTS()                                                                              \
    do {                                                                                           \
        if (why_skipped[0]) {                                                                      \
            print_message("skipped: %s\n", why_skipped);                                           \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

#define SH(out, ...) tmpdir_sh(f, out, sizeof out, __VA_ARGS__)

/* Imports capture (with an execution trace: et, else none) into DB as a new
 * database; returns import's exit status, its output in out. */
static int import_into(fixture *f, const char *db, const char *capture, const char *et, char *out,
                       size_t cap)
{
    char with[600] = "";
    if (et)
        snprintf(with, sizeof with, " --et %s", et);
    return tmpdir_sh(f, out, cap, "rm -f %s && %s import %s%s -o %s", db, bin(), capture, with,
                     db);
}

/* The derived input NAME's file (DERIVED/NAME.json). */
static const char *input(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.json", derived, name);
    return buf;
}

/* Imports derived input name (with the ET pair's execution trace when
 * et_pair, with its own NAME.et.json when own_et) and checks it; returns
 * check's exit status, its output in out (the import must succeed). */
static int check_input(fixture *f, const char *name, int et, char *out, size_t cap)
{
    char path[256], own[256];
    snprintf(own, sizeof own, "%s/%s.et.json", derived, name);
    const char *companion = et == 2 ? own : et == 1 ? ET : NULL;
    int rc = import_into(f, "c.db", input(name, path, sizeof path), companion, out, cap);
    if (rc != 0)
        fail_msg("import of %s exited %d:\n%s", name, rc, out);
    return tmpdir_sh(f, out, cap, "%s check c.db", bin());
}
enum { NO_ET = 0, ET_PAIR = 1, OWN_ET = 2 };

/* The ledgers of captures[i] (imported with ets[i], NULL for none) equal
 * the independent count: events read, ignored, and each reason; and read =
 * imported + ignored + every reason but forced (one reason per event). One
 * python3 counts them all (it starts slowly). */
static void ledgers_add_up(fixture *f, const char *const *captures, const char *const *ets,
                           size_t n)
{
    char out[32768];
    FILE *list = NULL, *got = NULL;
    char path[256];
    snprintf(path, sizeof path, "%s/list", f->dir);
    assert_non_null(list = fopen(path, "w"));
    snprintf(path, sizeof path, "%s/got", f->dir);
    assert_non_null(got = fopen(path, "w"));
    for (size_t i = 0; i < n; i++) {
        int rc = import_into(f, "l.db", captures[i], ets[i], out, sizeof out);
        if (rc != 0)
            fail_msg("import of %s exited %d:\n%s", captures[i], rc, out);
        assert_int_equal(SH(out, "%s info --json l.db | tr -d '\\n'", bin()), 0);
        fprintf(got, "%s\n", out);
        fprintf(list, "%s %s\n", captures[i], ets[i] ? ets[i] : "-");
    }
    fclose(list);
    fclose(got);
    int rc = SH(out, "python3 %sledger_count.py --list list > want && python3 -c '\n"
                     "import json\n"
                     "bad = 0\n"
                     "for line, g, w in zip(open(\"list\"), open(\"got\"), open(\"want\")):\n"
                     "    got, want = json.loads(g)[\"import\"], json.loads(w)\n"
                     "    forced = got[\"dropped\"].get(\"forced\", 0)\n"
                     "    adds = got[\"read\"] == got[\"imported\"] + got[\"ignored\"] + "
                     "got[\"dropped_total\"] - forced and got[\"imported\"] >= 0\n"
                     "    same = (got[\"read\"], got[\"ignored\"], got[\"dropped\"]) == "
                     "(want[\"read\"], want[\"ignored\"], want[\"counted\"])\n"
                     "    if not adds or not same or \"unaccounted\" in got[\"dropped\"]:\n"
                     "        bad += 1\n"
                     "        print(line.strip(), \"\\n  syncsim\", got, \"\\n  script \", want)\n"
                     "raise SystemExit(bad)\n"
                     "'",
                SCRIPTS);
    if (rc != 0)
        fail_msg("ledgers that are not the independent count:\n%s", out);
}

/* The ledger of the last import (l.db, c.db) has reason = n. */
static void ledger_says(fixture *f, const char *db, const char *reason, long n)
{
    char out[16384];
    assert_int_equal(SH(out, "%s info --json %s", bin(), db), 0);
    char want[128];
    snprintf(want, sizeof want, "\"%s\": %ld", reason, n);
    if (!strstr(out, want))
        fail_msg("%s: the ledger lacks %s:\n%.3000s", db, want, out);
}

/* ------------------------------------------------------------------ */

/* Done when: for every public capture the ledger adds up and equals an
 * independent count of each class. */
static void test_import_assumptions_public_captures_add_up(void **state)
{
    fixture *f = *state;
    NEED_INPUTS();
    static const char *const captures[] = {
        SHARED "hta-event-sync-multi-stream.json.gz", SHARED "hta-simple-add.json.gz",
        SHARED "hta-simple-add-et-kineto.json.gz",    SHARED "pipit-cloverleaf-nsys.sqlite",
        EXTERNAL "sampled_rank-0.json.gz",            EXTERNAL "sampled_rank-1.json.gz",
        SHARED "hta-simple-add-et-kineto.json.gz",
    };
    static const char *const ets[] = { NULL, NULL, NULL, NULL, NULL, NULL, ET };
    ledgers_add_up(f, captures, ets, sizeof captures / sizeof captures[0]);
}

/* The same for every derived input that imports. */
static void test_import_assumptions_derived_inputs_add_up(void **state)
{
    fixture *f = *state;
    NEED_INPUTS();
    static const struct {
        const char *name;
        int et;
    } inputs[] = {
        { "race-wrong-stream-sync", ET_PAIR },
        { "race-record-too-early", ET_PAIR },
        { "race-host-read", OWN_ET },
        { "launch-without-kernel", ET_PAIR },
        { "kernel-ph-x", ET_PAIR },
        { "kernel-ph-i", ET_PAIR },
        { "kernel-ph-Z", ET_PAIR },
        { "kernel-cat-gpu_user_annotation", ET_PAIR },
        { "kernel-cat-python_function", ET_PAIR },
        { "race-wrong-stream-sync-no-row", ET_PAIR },
        { "race-record-too-early-no-record-corr", ET_PAIR },
        { "race-record-too-early-no-record-call", ET_PAIR },
        { "simple-add-no-stream-sync-rows", NO_ET },
        { "simple-add-five-wait-rows-removed", NO_ET },
        { "gpu-events-twice", ET_PAIR },
        { "kernel-ts-twice", ET_PAIR },
        { "kernel-fractional-correlation", ET_PAIR },
        { "kernel-negative-device", ET_PAIR },
        { "et-negative-offset", OWN_ET },
        { "rank0-no-world-size", NO_ET },
        { "rank0-launch-removed", NO_ET },
        { "pair-array", ET_PAIR },
        { "pair-ts-past-2-62", NO_ET },
    };
    enum { N = sizeof inputs / sizeof inputs[0] };
    static char paths[N + 2][256], own[N][256];
    const char *captures[N + 2], *ets[N + 2];
    for (size_t i = 0; i < N; i++) {
        snprintf(own[i], sizeof own[i], "%s/%s.et.json", derived, inputs[i].name);
        captures[i] = input(inputs[i].name, paths[i], sizeof paths[i]);
        ets[i] = inputs[i].et == OWN_ET ? own[i] : inputs[i].et == ET_PAIR ? ET : NULL;
    }
    snprintf(paths[N], sizeof paths[N], "%s/cloverleaf-nameless-open-nvtx.sqlite", derived);
    captures[N] = paths[N];
    ets[N] = NULL;
    snprintf(paths[N + 1], sizeof paths[N + 1], "%s/pair-bom.json", derived);
    captures[N + 1] = paths[N + 1];
    ets[N + 1] = ET;
    ledgers_add_up(f, captures, ets, N + 2);
}

/* A launch whose kernel is missing is counted: with an ET, the capture
 * without the add kernel was "clean, coverage full: 3 of 3". */
static void test_import_assumptions_launch_without_kernel(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(check_input(f, "launch-without-kernel", ET_PAIR, out, sizeof out), 4);
    assert_non_null(strstr(out, "launch-without-work 1"));
    ledger_says(f, "c.db", "launch-without-work", 1);
}

/* GPU work under an ignored shape (ph x, i, Z; categories
 * gpu_user_annotation, python_function) is counted, and --strict refuses
 * it; it was "ignored by design" and --strict took it. */
static void test_import_assumptions_gpu_work_in_ignored_shapes(void **state)
{
    fixture *f = *state;
    char out[16384], path[256];
    NEED_INPUTS();
    static const char *const shapes[] = { "kernel-ph-x", "kernel-ph-i", "kernel-ph-Z",
                                          "kernel-cat-gpu_user_annotation",
                                          "kernel-cat-python_function" };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        assert_int_equal(check_input(f, shapes[i], ET_PAIR, out, sizeof out), 4);
        ledger_says(f, "c.db", "ignored-gpu-work", 1);
        int rc = SH(out, "rm -f s.db && %s import --strict %s --et %s -o s.db", bin(),
                    input(shapes[i], path, sizeof path), ET);
        if (rc != 2 || !strstr(out, "ignored-gpu-work"))
            fail_msg("%s: import --strict exited %d:\n%s", shapes[i], rc, out);
    }
}

/* A cudaStreamSynchronize without its "Stream Sync" row (older Kineto) was
 * widened to the device and hid the race of a sync of the wrong stream. */
static void test_import_assumptions_widened_stream_sync(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(check_input(f, "race-wrong-stream-sync", ET_PAIR, out, sizeof out), 1);
    assert_int_equal(check_input(f, "race-wrong-stream-sync-no-row", ET_PAIR, out, sizeof out), 4);
    assert_non_null(strstr(out, "1 ordering assumption at import (widened-sync 1)"));
    assert_null(strstr(out, "clean"));
}

/* A wait row without wait_on_cuda_event_record_corr_id: its record stands
 * at the cudaEventRecord call before the wait (the race of a record made too
 * early is still found), and is counted; without that call it stands right
 * before the wait and hides the race: never clean. Both were "clean". */
static void test_import_assumptions_record_at_its_call(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(check_input(f, "race-record-too-early", ET_PAIR, out, sizeof out), 1);
    assert_int_equal(
        check_input(f, "race-record-too-early-no-record-corr", ET_PAIR, out, sizeof out), 1);
    assert_non_null(strstr(out, "race"));
    assert_non_null(strstr(out, "assumed-record 1"));
    assert_int_equal(
        check_input(f, "race-record-too-early-no-record-call", ET_PAIR, out, sizeof out), 4);
    assert_non_null(strstr(out, "assumed-record 1"));
}

/* Rows removed from the real capture: the stream syncs without rows are
 * widened (16), the waits without rows taken as idle (14 + 5), every one
 * counted; hta-simple-add's own 20 rows without a record call are assumed. */
static void test_import_assumptions_older_shapes_of_a_real_capture(void **state)
{
    fixture *f = *state;
    char out[16384], path[256];
    NEED_INPUTS();
    assert_int_equal(import_into(f, "c.db", input("simple-add-no-stream-sync-rows", path,
                                                  sizeof path), NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "warning: 16 ordering assumptions: widened-sync"));
    ledger_says(f, "c.db", "widened-sync", 16);
    assert_int_equal(import_into(f, "c.db", input("simple-add-five-wait-rows-removed", path,
                                                  sizeof path), NULL, out, sizeof out), 0);
    ledger_says(f, "c.db", "idle-stream-wait", 19);
    ledger_says(f, "c.db", "assumed-record", 15);
}

/* Every GPU event twice doubled the device's work; a member named twice took
 * the first value. Both are counted now, and not imported. */
static void test_import_assumptions_duplicates(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(check_input(f, "gpu-events-twice", ET_PAIR, out, sizeof out), 4);
    assert_non_null(strstr(out, "duplicate 4"));
    /* the statements of the capture itself, no device work doubled */
    assert_non_null(strstr(out, "partial coverage: 36 statements"));
    assert_int_equal(check_input(f, "kernel-ts-twice", ET_PAIR, out, sizeof out), 4);
    assert_non_null(strstr(out, "duplicate-key 1"));
}

/* Values no capture holds: a fractional correlation (was cut), a negative
 * device, an ET tensor with a negative offset (both accepted). */
static void test_import_assumptions_values(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(check_input(f, "kernel-fractional-correlation", ET_PAIR, out, sizeof out), 4);
    assert_non_null(strstr(out, "bad-number 1"));
    assert_int_equal(check_input(f, "kernel-negative-device", ET_PAIR, out, sizeof out), 4);
    assert_non_null(strstr(out, "bad-number 1"));
    assert_int_equal(check_input(f, "et-negative-offset", OWN_ET, out, sizeof out), 4);
    assert_non_null(strstr(out, "bad-number 1"));
}

/* An XPU-style profile (its calls xpu_runtime, its kernels "kernel") and a
 * profile holding the calls of two processes are refused in one line; both
 * were imported. */
static void test_import_assumptions_refused_profiles(void **state)
{
    fixture *f = *state;
    char out[16384], path[256];
    NEED_INPUTS();
    assert_int_equal(import_into(f, "c.db", input("xpu-style", path, sizeof path), NULL, out,
                                 sizeof out),
                     2);
    assert_non_null(
        strstr(out, "a profile without CUDA or ROCm activity (it holds 39 xpu_runtime"));
    assert_int_equal(import_into(f, "c.db", input("two-processes", path, sizeof path), NULL, out,
                                 sizeof out),
                     2);
    assert_non_null(strstr(out, "CUDA calls of two processes"));
    assert_int_equal(SH(out, "test ! -e c.db"), 0);
}

/* Nsight Systems: a runtime row whose name id names no string, an NVTX
 * range still open at the end: both counted (were imported as "" and left
 * out unread). */
static void test_import_assumptions_nsys_rows(void **state)
{
    fixture *f = *state;
    char out[16384], path[256];
    NEED_INPUTS();
    snprintf(path, sizeof path, "%s/cloverleaf-nameless-open-nvtx.sqlite", derived);
    assert_int_equal(import_into(f, "c.db", path, NULL, out, sizeof out), 0);
    ledger_says(f, "c.db", "missing-field", 1);
    ledger_says(f, "c.db", "no-dur", 1);
}

/* Item 2: an ET's host ops are host accesses. A host read of a
 * non_blocking D2H copy before the sync races; after it, minimize keeps
 * that sync and replay --drop-sync calls dropping it unsafe. Before, the
 * read was clean and the sync removable. */
static void test_import_assumptions_host_read_of_an_async_copy(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(check_input(f, "race-host-read", OWN_ET, out, sizeof out), 1);
    assert_non_null(strstr(out, "race"));
    assert_non_null(strstr(out, "aten::sum"));
    assert_int_equal(check_input(f, "host-read-synced", OWN_ET, out, sizeof out), 0);
    assert_non_null(strstr(out, "host accesses recorded"));
    assert_int_equal(SH(out, "%s minimize c.db", bin()), 0);
    assert_non_null(strstr(out, "5 of 6 candidate synchronisations can go"));
    /* the sync that protects the read: the cudaDeviceSynchronize at 134.999 ms */
    assert_int_equal(SH(out, "%s sql c.db --csv \"SELECT seq FROM stmts WHERE kind = 'sync' AND "
                             "t = 1689360808134999000\" | tail -1",
                        bin()),
                     0);
    long seq = strtol(out, NULL, 10);
    char listed[32];
    snprintf(listed, sizeof listed, "seq %ld ", seq);
    assert_int_equal(SH(out, "%s minimize c.db", bin()), 0);
    if (strstr(out, listed))
        fail_msg("minimize calls the protecting sync (seq %ld) removable:\n%s", seq, out);
    assert_int_equal(SH(out, "%s replay c.db --drop-sync %ld", bin(), seq), 1);
    assert_non_null(strstr(out, "unsafe"));
}

/* Item 2, the other half: a capture with no host access at all has its
 * copies that do not block the host counted (host-unrecorded): the real
 * ranks' 8 async copies each. */
static void test_import_assumptions_no_host_access_recorded(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(import_into(f, "c.db", EXTERNAL "sampled_rank-0.json.gz", NULL, out,
                                 sizeof out),
                     0);
    ledger_says(f, "c.db", "host-unrecorded", 8);
    assert_int_equal(SH(out, "%s check c.db", bin()), 4);
    assert_non_null(strstr(out, "host-unrecorded 8"));
}

/* Item 3: one rank of the real 128-rank job without world_size (its NCCL
 * kernels saying "Group size 128"), or with rank -1, is a partial job, not a
 * false hang. */
static void test_import_assumptions_rank_without_world_size_or_number(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(check_input(f, "rank0-no-world-size", NO_ET, out, sizeof out), 4);
    assert_non_null(strstr(out, "127 of 128 ranks absent"));
    assert_null(strstr(out, "hang"));
    assert_int_equal(SH(out, "%s info c.db", bin()), 0);
    assert_non_null(strstr(out, "world_size.from = nccl-group-size"));
    assert_int_equal(check_input(f, "rank0-rank-minus-one", NO_ET, out, sizeof out), 4);
    assert_null(strstr(out, "hang"));
}

/* Item 3: merge refuses two ranks whose job keys differ or are on one side
 * only, naming the key; merge --force says so in the job's verdict; the
 * merged ledger sums its inputs'. */
static void test_import_assumptions_merging_ranks(void **state)
{
    fixture *f = *state;
    char out[16384], path[256];
    NEED_INPUTS();
    int rc = SH(out, "%s merge --partial %ssampled_rank-0.json.gz %s -o j.db", bin(), EXTERNAL,
                input("rank1-with-pg-config", path, sizeof path));
    if (rc != 2 || !strstr(out, "has no dist.pg_config"))
        fail_msg("a key on one side only: merge exited %d:\n%s", rc, out);
    assert_int_equal(SH(out, "%s merge --partial %ssampled_rank-0.json.gz "
                             "%ssampled_rank-1.json.gz -o j.db",
                        bin(), EXTERNAL, EXTERNAL),
                     0);
    assert_int_equal(SH(out, "%s info --json j.db", bin()), 0);
    assert_non_null(strstr(out, "\"read\": 9575"));      /* 4855 + 4720 */
    assert_non_null(strstr(out, "\"ignored\": 90"));
    assert_int_equal(SH(out, "rm -f j.db && %s merge --partial --force "
                             "%ssampled_rank-0.json.gz %s -o j.db",
                        bin(), EXTERNAL, input("rank1-other-backend", path, sizeof path)),
                     0);
    assert_int_equal(SH(out, "%s check j.db", bin()), 4);
    assert_non_null(strstr(out, "forced 1"));
    assert_non_null(strstr(out, "forced: merge --force"));
}

/* Item 3: import --force-et is recorded in the run and shown in the verdict. */
static void test_import_assumptions_forced_et_shows(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(SH(out, "%s import %shta-event-sync-multi-stream.json.gz --et %s --force-et "
                             "-o c.db",
                        bin(), SHARED, ET),
                     0);
    assert_int_equal(SH(out, "%s check c.db", bin()), 4);
    assert_non_null(strstr(out, "forced: import --force-et"));
}

/* Item 4: files told as what they are. */
static void test_import_assumptions_files_told_as_what_they_are(void **state)
{
    fixture *f = *state;
    char out[16384], path[256];
    NEED_INPUTS();
    /* a BOM, and the Chrome trace's array form: read, as the file itself */
    snprintf(path, sizeof path, "%s/pair-bom.json", derived);
    assert_int_equal(import_into(f, "c.db", path, ET, out, sizeof out), 0);
    assert_non_null(strstr(out, "36 statements"));
    assert_int_equal(check_input(f, "pair-array", ET_PAIR, out, sizeof out), 0);
    assert_non_null(strstr(out, "clean: 36 statements"));
    /* an empty file */
    assert_int_equal(SH(out, "%s check %s", bin(), input("empty", path, sizeof path)), 2);
    assert_non_null(strstr(out, "empty.json: empty file, expected a trace"));
    /* a truncated gzip: how far it inflates, as zlib itself says */
    snprintf(path, sizeof path, "%s/simple-add-truncated.json.gz", derived);
    assert_int_equal(SH(out, "python3 -c 'import zlib; d = zlib.decompressobj(31); "
                             "print(len(d.decompress(open(\"%s\", \"rb\").read())))'",
                        path),
                     0);
    char want[160];
    snprintf(want, sizeof want, "truncated gzip data: the file ends after %ld decompressed bytes",
             strtol(out, NULL, 10));
    assert_int_equal(SH(out, "%s check %s", bin(), path), 2);
    if (!strstr(out, want))
        fail_msg("want '%s':\n%s", want, out);
    /* a truncated nsys export */
    snprintf(path, sizeof path, "%s/cloverleaf-truncated.sqlite", derived);
    assert_int_equal(SH(out, "%s check %s", bin(), path), 2);
    assert_non_null(strstr(out, "a SQLite file that cannot be read"));
    /* timestamps past 2^62 ns: counted, not "a profile without CUDA" */
    assert_int_equal(SH(out, "%s check %s", bin(), input("pair-ts-past-2-62", path, sizeof path)),
                     4);
    assert_non_null(strstr(out, "bad-ts 65"));
}

/* Item 4: every text export reads back, and checks as its source: GPU work
 * whose call is missing, in a capture of two host threads, too (it said
 * "by=HOST required"). */
static void test_import_assumptions_text_exports_read_back(void **state)
{
    fixture *f = *state;
    char out[16384], path[256];
    NEED_INPUTS();
    static const char *const inputs[] = {
        "rank0-launch-removed", "launch-without-kernel", "gpu-events-twice",
        "race-record-too-early-no-record-call", "kernel-ph-i",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        int rc = SH(out, "rm -f c.db && %s import %s -o c.db >/dev/null && %s check c.db "
                         "> a.txt; a=$?; %s export c.db -o c.trace && %s check c.trace > b.txt; "
                         "b=$?; echo $a $b; grep -o '[0-9]* statements' a.txt b.txt",
                    bin(), input(inputs[i], path, sizeof path), bin(), bin(), bin());
        char a[16], b[16];
        if (rc != 0 || sscanf(out, "%15s %15s", a, b) != 2 || strcmp(a, b) != 0)
            fail_msg("%s: the text export does not check as its source:\n%s", inputs[i], out);
        const char *sa = strstr(out, "a.txt:"), *sb = strstr(out, "b.txt:");
        if (!sa || !sb || strtol(sa + 6, NULL, 10) != strtol(sb + 6, NULL, 10))
            fail_msg("%s: statements differ:\n%s", inputs[i], out);
    }
}

/* Item 4: replay of a partial capture is never "clean", --ordering-only
 * included. */
static void test_import_assumptions_replay_of_a_partial_capture(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    assert_int_equal(SH(out, "%s replay %shta-simple-add.json.gz --drop-sync 3 --ordering-only",
                        bin(), SHARED),
                     0);
    assert_non_null(strstr(out, "check of the replay: no findings, partial coverage"));
    assert_null(strstr(out, "check of the replay: clean"));
}

/* Item 4: a full disk (a small tmpfs; skipped where none can be mounted):
 * export names its file, run leaves no database behind. */
static void test_import_assumptions_full_disk(void **state)
{
    fixture *f = *state;
    char out[16384];
    NEED_INPUTS();
    if (SH(out, "mkdir -p small && mount -t tmpfs -o size=256k tmpfs small 2>&1") != 0) {
        print_message("skipped: cannot mount a small tmpfs here (needs root): %s", out);
        skip();
    }
    SH(out, "dd if=/dev/zero of=small/fill bs=1k count=248 2>/dev/null");
    int ex = SH(out, "%s export %shta-simple-add.json.gz -o small/out.trace", bin(), SHARED);
    char ex_out[16384];
    memcpy(ex_out, out, sizeof out);
    int run = SH(out, "%s run --tokens 4 -o small/new.db", bin());
    char run_out[16384];
    memcpy(run_out, out, sizeof out);
    int left = SH(out, "ls small");
    char ls_out[16384];
    memcpy(ls_out, out, sizeof out);
    SH(out, "umount small");
    if (ex != 2 || !strstr(ex_out, "small/out.trace: ") || !strstr(ex_out, "No space left"))
        fail_msg("export on a full disk: exit %d\n%s", ex, ex_out);
    if (run != 2 || !strstr(run_out, "small/new.db"))
        fail_msg("run on a full disk: exit %d\n%s", run, run_out);
    assert_int_equal(left, 0);
    if (strstr(ls_out, "new.db") || strstr(ls_out, "out.trace"))
        fail_msg("a full disk leaves files behind: %s", ls_out);
}

/* Done when: no input made by one change of a capture with a finding
 * checks clean. The bases are the ET pair reshaped to race three ways (a
 * sync of the wrong stream, a record made too early, a host read of an
 * async copy); each change: a GPU event as ph i or a gpu_user_annotation,
 * a sync row's field removed, GPU events twice, the sync rows of older
 * Kineto removed (SYNCSIM_SWEEP=full: also ph x, Z, B and python_function,
 * every event removed or duplicated, every ET node removed). */
static void test_import_assumptions_no_change_checks_clean(void **state)
{
    fixture *f = *state;
    char out[65536];
    NEED_INPUTS();
    int rc = SH(out, "python3 -c '\n"
                     "import json\n"
                     "m = json.load(open(\"%s/sweep/manifest.json\"))\n"
                     "for k, v in sorted(m.items()): print(k, v[\"trace\"], v[\"et\"])\n"
                     "' > list && n=0; clean=0; while read name t et; do n=$((n+1)); "
                     "rm -f s.db; %s import $t --et $et -o s.db >/dev/null 2>&1 || continue; "
                     "%s check s.db >/dev/null 2>&1; if [ $? -eq 0 ]; then clean=$((clean+1)); "
                     "echo \"clean: $name\"; fi; done < list; echo \"tried $n clean $clean\"",
                derived, bin(), bin());
    assert_int_equal(rc, 0);
    const char *t = strstr(out, "tried ");
    long tried = t ? strtol(t + 6, NULL, 10) : 0;
    print_message("%ld inputs derived from 3 bases with a finding; %s\n", tried, t ? t : out);
    assert_true(tried > 0);
    if (!strstr(out, " clean 0\n"))
        fail_msg("inputs that check clean while their base has a finding:\n%s", out);
}

#define T(fn) cmocka_unit_test_setup_teardown(test_import_assumptions_##fn, setup, tmpdir_teardown)
int main(void)
{
    const struct CMUnitTest tests[] = {
        T(public_captures_add_up),
        T(derived_inputs_add_up),
        T(launch_without_kernel),
        T(gpu_work_in_ignored_shapes),
        T(widened_stream_sync),
        T(record_at_its_call),
        T(older_shapes_of_a_real_capture),
        T(duplicates),
        T(values),
        T(refused_profiles),
        T(nsys_rows),
        T(host_read_of_an_async_copy),
        T(no_host_access_recorded),
        T(rank_without_world_size_or_number),
        T(merging_ranks),
        T(forced_et_shows),
        T(files_told_as_what_they_are),
        T(text_exports_read_back),
        T(replay_of_a_partial_capture),
        T(full_disk),
        T(no_change_checks_clean),
    };
    return cmocka_run_group_tests(tests, derive, derived_free);
}
