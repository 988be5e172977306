/* test_cli_sites.c -- a finding shows each side's call site (site=):
 * in the compiler-style notes, in --json and in SARIF, from a text trace
 * and from a database, and with the findings a database stores. The race's
 * sides lie more than MARK_EVERY (1024) statements apart, so the text
 * reader reads the first again from one mark and the second from another;
 * the statements between carry sites of their own, so a wrong statement
 * read again would show a wrong site. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

#define N_FILL 1500

/* kernel_a (line 7, seq 0) writes x on s7; N_FILL ops on s7 write y, each
 * at site fill.py:N; kernel_b (line 8 + N_FILL, seq 1 + N_FILL) reads x
 * on s8 without a wait. */
static char *race_trace(void)
{
    size_t cap = 256 + (size_t)N_FILL * 48;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    size_t n = (size_t)snprintf(t, cap,
                                "syncsim-trace 1\n"
                                "queue h host\n"
                                "queue s7 stream device=gpu0\n"
                                "queue s8 stream device=gpu0\n"
                                "buffer x size=64 device=gpu0\n"
                                "buffer y size=64 device=gpu0\n"
                                "s7 op kernel_a w:x site=train.py:42\n");
    for (int i = 0; i < N_FILL; i++)
        n += (size_t)snprintf(t + n, cap - n, "s7 op fill%d w:y site=fill.py:%d\n", i, i + 1);
    snprintf(t + n, cap - n, "s8 op kernel_b r:x site=train.py:57\nh sync all\n");
    return t;
}

static void write_race(fixture *f)
{
    char *t = race_trace();
    assert_non_null(t);
    assert_int_equal(tmpdir_write(f, "race.trace", t), 0);
    free(t);
}

/* The notes: each side "ROLE: LABEL (QUEUE) at SITE" at its own line. */
static void test_cli_sites_text_notes_show_both_sites(void **state)
{
    fixture *f = *state;
    char out[8192];
    write_race(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check race.trace", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "race.trace:1508:1: note: the later statement: kernel_b (s8) at "
                                "train.py:57\n"));
    assert_non_null(strstr(out, "race.trace:7:1: note: the other access: kernel_a (s7) at "
                                "train.py:42\n"));
}

/* --json: "site" inside each side's object. */
static void test_cli_sites_json_has_a_site_per_side(void **state)
{
    fixture *f = *state;
    char out[8192];
    write_race(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --json race.trace", SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "\"first\": {\"queue\": \"s7\", \"label\": \"kernel_a\", "
                                "\"line\": 7, \"site\": \"train.py:42\", \"seq\": 0}"));
    assert_non_null(strstr(out, "\"second\": {\"queue\": \"s8\", \"label\": \"kernel_b\", "
                                "\"line\": 1508, \"site\": \"train.py:57\", \"seq\": 1501}"));
}

/* sarif.py: both locations of the race are the sites' files and lines,
 * the trace's line in their messages; an OBJECT+0xOFF site stays in the
 * trace, named in the message. Validated against the schema where python3
 * has jsonschema. Prints "ok" or what is wrong. */
static const char *sarif_py =
    "import json, sys\n"
    "log = json.load(open(sys.argv[1]))\n"
    "try:\n"
    "    import jsonschema\n"
    "    schema = json.load(open('" SYNCSIM_SOURCE_DIR
    "/tests/data/sarif/sarif-schema-2.1.0.json'))\n"
    "    jsonschema.Draft4Validator(schema).validate(log)\n"
    "except ImportError:\n"
    "    pass\n"
    "res = log['runs'][0]['results']\n"
    "assert len(res) == 1, res\n"
    "locs = res[0]['locations']\n"
    "got = [(l['physicalLocation']['artifactLocation']['uri'],\n"
    "        l['physicalLocation'].get('region', {}).get('startLine'),\n"
    "        l['message']['text']) for l in locs]\n"
    "print(got)\n";

static void test_cli_sites_sarif_locates_in_the_source(void **state)
{
    fixture *f = *state;
    char out[8192];
    write_race(f);
    assert_int_equal(tmpdir_write(f, "sarif.py", sarif_py), 0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --format sarif race.trace > a.sarif",
                               SYNCSIM_BINARY),
                     1);
    int rc = tmpdir_sh(f, out, sizeof out, "python3 sarif.py a.sarif");
    if (rc != 0)
        fail_msg("%s", out);
    assert_string_equal(out, "[('train.py', 57, 'the later statement (s8) at train.py:57, trace "
                             "line 1508'), ('train.py', 42, 'the other access (s7) at "
                             "train.py:42, trace line 7')]\n");
    /* a site that is no FILE:LINE: the trace's place, the site in the message */
    assert_int_equal(tmpdir_write(f, "obj.trace",
                                  "syncsim-trace 1\n"
                                  "queue h host\n"
                                  "queue s stream device=0\n"
                                  "buffer X size=8\n"
                                  "s op fill w:X site=libapp.so+0x1f30\n"
                                  "h op use r:X\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --format sarif obj.trace > b.sarif",
                               SYNCSIM_BINARY),
                     1);
    rc = tmpdir_sh(f, out, sizeof out, "python3 sarif.py b.sarif");
    if (rc != 0)
        fail_msg("%s", out);
    assert_string_equal(out, "[('obj.trace', 6, 'the later statement (h)'), ('obj.trace', 5, "
                             "'the other access (s) at libapp.so+0x1f30')]\n");
}

/* From a database: the same sites, in text and JSON; the findings it
 * stores keep them (export --format chrome writes the stored findings). */
static void test_cli_sites_database_and_stored_findings(void **state)
{
    fixture *f = *state;
    char out[8192];
    write_race(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s import race.trace -o r.db >/dev/null",
                               SYNCSIM_BINARY),
                     0);
    /* at the lines of the trace it was imported from, as the trace's own */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check r.db", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "race.trace:1508:1: note: the later statement: kernel_b (s8) at "
                                "train.py:57\n"));
    assert_non_null(strstr(out, "race.trace:7:1: note: the other access: kernel_a (s7) at "
                                "train.py:42\n"));
    /* without that file: at the call sites */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "mv race.trace moved.trace && %s check r.db",
                               SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "train.py:57:1: error: race: RAW race on x[0:64]"));
    assert_non_null(strstr(out, "train.py:57:1: note: the later statement: kernel_b (s8) at "
                                "train.py:57\n"));
    assert_non_null(strstr(out, "train.py:42:1: note: the other access: kernel_a (s7) at "
                                "train.py:42\n"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --json r.db", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "\"site\": \"train.py:42\", \"seq\": 0}"));
    assert_non_null(strstr(out, "\"site\": \"train.py:57\", \"seq\": 1501}"));
    /* the finding's sides, as the stored finding gives them (statement
     * attributes are written as ["site", "..."] pairs, not like this) */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s export r.db --format chrome -o r.json && grep -c "
                               "'\"site\": \"train.py:57\", \"seq\": 1501}' r.json",
                               SYNCSIM_BINARY),
                     0);
    assert_string_equal(out, "1\n");
}

/* The in-memory reader (--redundant loads the trace), a hang's blocked
 * part, and a side without a site (its note as before). */
static void test_cli_sites_memory_reader_and_parts(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_write(f, "h.trace",
                                  "syncsim-trace 1\n"
                                  "queue h host\n"
                                  "queue s stream device=0\n"
                                  "buffer X size=8\n"
                                  "s op fill w:X\n"
                                  "h op use r:X site=app.py:9\n"
                                  "h await f site=app.py:10\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --redundant h.trace", SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "h.trace:6:1: note: the later statement: use (h) at app.py:9\n"));
    assert_non_null(strstr(out, "h.trace:5:1: note: the other access (s)\n"));
    assert_non_null(strstr(out, "h.trace:7:1: note: blocked here (h) at app.py:10: flag f\n"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check --json h.trace", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "\"waits_for\": \"flag f\", \"line\": 7, \"site\": \"app.py:10\""));
}

/* A pipe cannot be read again: no site, and no error. (Standard input
 * redirected from a file can, and shows them.) */
static void test_cli_sites_pipe_shows_none(void **state)
{
    fixture *f = *state;
    char out[8192];
    write_race(f);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cat race.trace | %s check -", SYNCSIM_BINARY),
                     1);
    assert_non_null(strstr(out, "<stdin>:7:1: note: the other access (s7)\n"));
    assert_null(strstr(out, " at train.py"));
}

/* A capture's event log checked as it is: the capture reader cannot read
 * a statement again, so the sites it was given are remembered (a return
 * address resolved by a sym record; a Python line). */
static void test_cli_sites_cuda_log(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(
        tmpdir_write(f, "app.log",
                     "syncsim-cuda-log 1\n"
                     "stream pid=1 dev=0 stream=13 kind=nonblocking\n"
                     "stream pid=1 dev=0 stream=14 kind=nonblocking\n"
                     "api pid=1 tid=1 t0=100 t1=200 corr=1 dev=0 ptr=0x7000 size=4096 "
                     "name=cudaMalloc\n"
                     "api pid=1 tid=1 t0=300 t1=400 corr=2 dev=0 stream=13 site=0x402000 "
                     "name=cudaLaunchKernel\n"
                     "param pid=1 corr=2 idx=0 ptr=0x7000 mode=w\n"
                     "gpu pid=1 corr=2 kind=kernel dev=0 stream=13 t0=500 t1=900 name=produce\n"
                     "api pid=1 tid=1 t0=410 t1=420 corr=4 dev=0 stream=14 site=0x401000 "
                     "py=/w/train.py:12 name=cudaLaunchKernel\n"
                     "param pid=1 corr=4 idx=0 ptr=0x7000 mode=r\n"
                     "gpu pid=1 corr=4 kind=kernel dev=0 stream=14 t0=950 t1=990 name=consume\n"
                     "api pid=1 tid=1 t0=1000 t1=1100 corr=6 dev=0 name=cudaDeviceSynchronize\n"
                     "sym pid=1 addr=0x401000 name=??:0\n"
                     "sym pid=1 addr=0x402000 name=/src/main.cu:42\n"),
        0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check app.log", SYNCSIM_BINARY), 1);
    assert_non_null(strstr(out, "note: the later statement: consume (gpu0.s14) at "
                                "/w/train.py:12\n"));
    assert_non_null(strstr(out, "note: the other access: produce (gpu0.s13) at "
                                "/src/main.cu:42\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_sites_text_notes_show_both_sites, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sites_json_has_a_site_per_side, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sites_sarif_locates_in_the_source, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sites_database_and_stored_findings, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sites_memory_reader_and_parts, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sites_pipe_shows_none, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sites_cuda_log, tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
