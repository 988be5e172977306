/* test_cli_sarif.c -- `check --format sarif` is a SARIF 2.1.0 log that
 * validates against the OASIS schema (tests/data/sarif, its source and
 * licence in SOURCES.md there), with python3's jsonschema (Debian:
 * python3-jsonschema); skipped, with a line, where that is absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

#define SCHEMA SYNCSIM_SOURCE_DIR "/tests/data/sarif/sarif-schema-2.1.0.json"

/* validate.py: validates log.sarif in the fixture's directory and checks its shape
 * against what the text output of the same check says. The script prints
 * "ok N" (N results), else what is wrong; and it shows that the validator
 * rejects a log without its version, so that it cannot pass by accident. */
static const char *validate =
    "import json, sys, copy, jsonschema\n"
    "schema = json.load(open('" SCHEMA "'))\n"
    "log = json.load(open('log.sarif'))\n"
    "v = jsonschema.Draft4Validator(schema)\n"
    "errs = sorted(v.iter_errors(log), key=str)\n"
    "if errs: print('invalid:', errs[0].message, list(errs[0].path)); sys.exit(1)\n"
    "bad = copy.deepcopy(log); del bad['version']\n"
    "if v.is_valid(bad): print('the validator accepts anything'); sys.exit(1)\n"
    "run = log['runs'][0]\n"
    "rules = [r['id'] for r in run['tool']['driver']['rules']]\n"
    "res = run['results']\n"
    "for r in res:\n"
    "    assert rules[r['ruleIndex']] == r['ruleId'], r\n"
    "    assert r['message']['text'], r\n"
    "    assert 'syncsim/v1' in r['partialFingerprints'], r\n"
    "    if r['ruleId'] == 'race':\n"
    "        assert len(r['locations']) == 2, r\n"
    "    uri = r['locations'][0]['physicalLocation']['artifactLocation']['uri']\n"
    "    if uri.endswith('.trace'):\n"
    "        assert r['locations'][0]['physicalLocation']['region']['startLine'] > 0, r\n"
    "        fix = r['fixes'][0]\n"
    "        assert fix['description']['text'], r\n"
    "        assert fix['artifactChanges'][0]['artifactLocation']['uri'] == uri, r\n"
    "    else:\n"
    "        assert 'region' not in r['locations'][0]['physicalLocation'], r\n"
    "        assert r['locations'][0]['logicalLocations'][0]['name'].startswith('seq '), r\n"
    "print('ok', len(res), ','.join(r['ruleId'] for r in res),\n"
    "      run['invocations'][0]['exitCode'])\n";

static void test_cli_sarif_validates_against_the_schema(void **state)
{
    fixture *f = *state;
    char out[8192];
    /* races (one with a space in its file name), a hang, a database */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s examples >/dev/null && cp examples/event-missing-wait.trace "
                               "'two races.trace' && %s import examples/event-missing-wait.trace "
                               "-o r.db >/dev/null",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ %s check 'two races.trace' examples/flag-deadlock.trace r.db "
                               "--format sarif > log.sarif; } 2>&1",
                               SYNCSIM_BINARY),
                     1);
    assert_string_equal(out, "");       /* standard output held the log alone */
    assert_int_equal(tmpdir_write(f, "validate.py", validate), 0);
    int rc = tmpdir_sh(f, out, sizeof out, "python3 validate.py");
    if (rc != 0)
        fail_msg("%s", out);
    /* two races in each copy of the trace, one hang; exit status 1 */
    assert_string_equal(out, "ok 5 race,race,hang,race,race 1\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'two%%20races.trace' log.sarif"), 0);
}

/* A clean check is a valid log with no results. */
static void test_cli_sarif_clean_has_no_results(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s examples >/dev/null && %s check examples/event-chain-clean.trace "
                               "--format sarif > log.sarif",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_write(f, "validate.py", validate), 0);
    int rc = tmpdir_sh(f, out, sizeof out, "python3 validate.py");
    if (rc != 0)
        fail_msg("%s", out);
    assert_string_equal(out, "ok 0  0\n");
}

int main(void)
{
    if (system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0) {
        printf("skipped: python3 with jsonschema is not installed (python3-jsonschema)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_sarif_validates_against_the_schema,
                                        tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sarif_clean_has_no_results, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
