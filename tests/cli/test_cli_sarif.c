/* test_cli_sarif.c -- `check --format sarif` is a SARIF 2.1.0 log that
 * validates against the OASIS schema (tests/data/sarif, its source and
 * licence in SOURCES.md there), with python3's jsonschema (Debian:
 * python3-jsonschema), and that passes the rules Microsoft's SARIF validator
 * (Sarif.Multitool `validate`, microsoft/sarif-sdk) applies for GitHub code
 * scanning, encoded below; on a log of every finding kind, from text traces
 * and databases, with the notifications of a partial, an incomplete and an
 * unreadable check; and its fixes, applied to the trace, remove the finding.
 * Skipped, with a line, where python3 or jsonschema is absent. */
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

/*
 * validate.py LOG: validates LOG against the OASIS schema, then applies
 * these rules of Sarif.Multitool (src/Sarif.Multitool.Library/Rules: the
 * GitHub Advanced Security set, "GH", and the SARIF rules they lean on),
 * each as the validator states it; a violation is printed with its rule id
 * and the script exits 1:
 *   GH1011/Base1011 ReferenceFinalSchema: $schema names the final 2.1.0 schema
 *   GH1013 ProvideRequiredSarifLogProperties: version, runs
 *   GH1014 ProvideRequiredRunProperties: results, tool
 *   GH1018 ProvideRequiredToolProperties: driver, driver.name, driver.rules
 *   GH2012 ProvideRequiredReportingDescriptorProperties: each rule's id,
 *          shortDescription, fullDescription and help (with text)
 *   GH1015 ProvideRequiredResultProperties: message.text, a non-empty
 *          locations array, partialFingerprints
 *   GH1007 ProvideFullyFormattedMessageStrings: message.text
 *   GH1016 ProvideRequiredLocationProperties: each location a physicalLocation
 *   GH1001 ProvideRequiredLocationProperties: physicalLocation.artifactLocation.uri
 *   GH1017 ProvideRequiredPhysicalLocationProperties: artifactLocation and
 *          region, with SARIF1007's consistency (startLine, endLine >=
 *          startLine, endColumn >= startColumn on one line)
 *   GH1003 ProvideRequiredRegionProperties: region.startLine in every result
 *          location
 *   GH1004 ReviewArraysThatExceedConfigurableDefaults: runs <= 5, rules <=
 *          1000, results <= 1000, locations per result <= 10
 *   GH1005 LocationsMustBeRelativeUrisOrFilePaths: no absolute URI of another
 *          scheme than file
 *   GH1006 ProvideCheckoutPath: an absolute file URI only under an
 *          invocation's workingDirectory
 *   SARIF1004 ExpressUriBaseIdsCorrectly: a URI with a uriBaseId is relative;
 *          each originalUriBaseIds entry absolute and ending in '/'
 *   SARIF1007 RegionPropertiesMustBeConsistent: every region of the log
 *          (fixes' too)
 *   SARIF1009 IndexPropertiesMustBeConsistentWithArrays: ruleIndex,
 *          notification descriptor indexes
 *   SARIF1010 RuleIdMustBeConsistent: ruleId is rules[ruleIndex].id
 * Then syncsim's own promises: a database's statement has a logical
 * location "seq N"; it prints "ok RESULTS RULE,RULE,... NOTICE,NOTICE EXIT".
 */
static const char *validate =
    "import json, sys, copy, re, jsonschema\n"
    "schema = json.load(open('" SCHEMA "'))\n"
    "log = json.load(open(sys.argv[1]))\n"
    "v = jsonschema.Draft4Validator(schema)\n"
    "errs = sorted(v.iter_errors(log), key=str)\n"
    "if errs: print('invalid:', errs[0].message, list(errs[0].path)); sys.exit(1)\n"
    "bad = copy.deepcopy(log); del bad['version']\n"
    "if v.is_valid(bad): print('the validator accepts anything'); sys.exit(1)\n"
    "def fail(rule, what): print(rule, what); sys.exit(1)\n"
    "def blank(s): return not isinstance(s, str) or not s.strip()\n"
    "if not re.search(r'2\\.1\\.0(-rtm\\.\\d+)?(\\.json)?$', log.get('$schema', '')): fail('GH1011', log.get('$schema'))\n"
    "if log.get('version') != '2.1.0' or not log.get('runs'): fail('GH1013', 'version, runs')\n"
    "if len(log['runs']) > 5: fail('GH1004', 'runs')\n"
    "def regions(o, path=''):\n"
    "    if isinstance(o, dict):\n"
    "        for k, x in o.items():\n"
    "            if k in ('region', 'deletedRegion', 'contextRegion'): yield path + '/' + k, x\n"
    "            yield from regions(x, path + '/' + k)\n"
    "    elif isinstance(o, list):\n"
    "        for i, x in enumerate(o): yield from regions(x, '%s/%d' % (path, i))\n"
    "for where, r in regions(log):\n"
    "    if 'startLine' not in r and 'charOffset' not in r and 'byteOffset' not in r: fail('SARIF1007', where)\n"
    "    if 'endLine' in r and r['endLine'] < r['startLine']: fail('SARIF1007', where)\n"
    "    if r.get('endLine', r.get('startLine')) == r.get('startLine') and r.get('endColumn', 1 << 30) < r.get('startColumn', 1): fail('SARIF1007', where)\n"
    "rules_seen, notices = [], []\n"
    "for run in log['runs']:\n"
    "    if 'results' not in run or 'tool' not in run: fail('GH1014', 'results, tool')\n"
    "    d = run['tool'].get('driver')\n"
    "    if not d or blank(d.get('name')) or 'rules' not in d: fail('GH1018', d)\n"
    "    rules = d['rules']\n"
    "    if len(rules) > 1000: fail('GH1004', 'rules')\n"
    "    for r in rules:\n"
    "        for k in ('shortDescription', 'fullDescription', 'help'):\n"
    "            if blank(r.get('id')) or blank(r.get(k, {}).get('text')): fail('GH2012', (r.get('id'), k))\n"
    "    bases = run.get('originalUriBaseIds', {})\n"
    "    for k, b in bases.items():\n"
    "        if not re.match(r'^[a-z][a-z0-9+.-]*:', b['uri']) or not b['uri'].endswith('/'): fail('SARIF1004', (k, b))\n"
    "    work = [i['workingDirectory']['uri'] for i in run.get('invocations', []) if 'workingDirectory' in i]\n"
    "    def artifact(a, where):\n"
    "        u = a.get('uri')\n"
    "        if u is None: fail('GH1001', where)\n"
    "        absolute = re.match(r'^[a-z][a-z0-9+.-]*:', u)\n"
    "        if 'uriBaseId' in a:\n"
    "            if absolute or a['uriBaseId'] not in bases: fail('SARIF1004', (where, a))\n"
    "        elif absolute and not u.startswith('file:'): fail('GH1005', (where, u))\n"
    "        elif absolute and not any(u.startswith(w) for w in work): fail('GH1006', (where, u))\n"
    "    if len(run['results']) > 1000: fail('GH1004', 'results')\n"
    "    for n, res in enumerate(run['results']):\n"
    "        where = 'result %d' % n\n"
    "        if blank(res.get('message', {}).get('text')): fail('GH1015/GH1007', where)\n"
    "        if not res.get('locations'): fail('GH1015', where)\n"
    "        if 'partialFingerprints' not in res: fail('GH1015', where)\n"
    "        if len(res['locations']) > 10: fail('GH1004', where)\n"
    "        i = res.get('ruleIndex')\n"
    "        if i is None or not 0 <= i < len(rules): fail('SARIF1009', where)\n"
    "        if rules[i]['id'] != res['ruleId']: fail('SARIF1010', where)\n"
    "        rules_seen.append(res['ruleId'])\n"
    "        for loc in res['locations'] + res.get('relatedLocations', []):\n"
    "            p = loc.get('physicalLocation')\n"
    "            if not p: fail('GH1016', where)\n"
    "            if 'artifactLocation' not in p or 'region' not in p: fail('GH1017', (where, p))\n"
    "            if p['region'].get('startLine', 0) < 1: fail('GH1003', (where, p))\n"
    "            artifact(p['artifactLocation'], where)\n"
    "            if p['artifactLocation']['uri'].endswith('.db'):\n"
    "                ll = loc.get('logicalLocations') or [{}]\n"
    "                if not re.match(r'^seq \\d+$', ll[0].get('name', '')): fail('syncsim: a database statement has no logical location', where)\n"
    "        for fx in res.get('fixes', []):\n"
    "            for ch in fx['artifactChanges']: artifact(ch['artifactLocation'], where + ' fix')\n"
    "    for inv in run.get('invocations', []):\n"
    "        for no in inv.get('toolExecutionNotifications', []):\n"
    "            dd = no['descriptor']\n"
    "            if not 0 <= dd['index'] < len(d.get('notifications', [])) or d['notifications'][dd['index']]['id'] != dd['id']: fail('SARIF1009', dd)\n"
    "            for loc in no.get('locations', []): artifact(loc['physicalLocation']['artifactLocation'], 'notification')\n"
    "            notices.append(dd['id'])\n"
    "print('ok', len(rules_seen), ','.join(sorted(set(rules_seen))), ','.join(notices),\n"
    "      log['runs'][0]['invocations'][0]['exitCode'])\n";

/* apply.py LOG SYNCSIM: applies each fix of LOG that edits a text trace to
 * a copy of it, checks the copy, and asserts the finding (by fingerprint)
 * is gone; prints "fixed N". */
static const char *apply =
    "import json, sys, subprocess, os\n"
    "log = json.load(open(sys.argv[1]))\n"
    "run = log['runs'][0]\n"
    "bases = {k: b['uri'] for k, b in run['originalUriBaseIds'].items()}\n"
    "n = 0\n"
    "for res in run['results']:\n"
    "    for fx in res.get('fixes', []):\n"
    "        ch, = fx['artifactChanges']\n"
    "        a = ch['artifactLocation']\n"
    "        path = (bases[a['uriBaseId']] + a['uri']).replace('file://', '').replace('%20', ' ')\n"
    "        lines = open(path).read().split('\\n')\n"
    "        for rep in sorted(ch['replacements'], key=lambda r: -r['deletedRegion']['startLine']):\n"
    "            r = rep['deletedRegion']; at = r['startLine'] - 1\n"
    "            end = r.get('endLine', r['startLine']) - 1\n"
    "            if r.get('endColumn') == 1 and end > at: del lines[at:end]\n"
    "            ins = rep.get('insertedContent', {}).get('text', '')\n"
    "            if ins: lines[at:at] = ins.rstrip('\\n').split('\\n')\n"
    "        open('fixed.trace', 'w').write('\\n'.join(lines))\n"
    "        out = subprocess.run([sys.argv[2], 'check', 'fixed.trace', '--format', 'sarif'],\n"
    "                             capture_output=True, text=True).stdout\n"
    "        left = [r['partialFingerprints']['syncsim/v1'] for r in json.loads(out)['runs'][0]['results']]\n"
    "        fp = res['partialFingerprints']['syncsim/v1']\n"
    "        assert fp not in left, ('still there after', fx, path)\n"
    "        n += 1\n"
    "print('fixed', n)\n";

/* Runs validate.py on log (in the fixture's directory) into out; fails
 * the test with what it says unless it passes. */
static void validated(const fixture *f, const char *log, char *out, size_t cap)
{
    assert_int_equal(tmpdir_write(f, "validate.py", validate), 0);
    if (tmpdir_sh(f, out, cap, "python3 validate.py %s", log) != 0)
        fail_msg("%s: %s", log, out);
}

/* Every finding kind, from text traces (one named with a space, one by an
 * absolute path outside the working directory) and databases (imported,
 * their text there or moved away); then the notifications. */
static void test_cli_sarif_every_kind_passes_the_rules(void **state)
{
    fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s examples >/dev/null && cp examples/event-missing-wait.trace "
                               "'two races.trace' && L=%s/tests/litmus && "
                               "for t in rule3-host-wait-unrecorded collective-mismatch-kind "
                               "barrier-mismatch-count rule6-sem-unordered-sets uaf-double-free "
                               "uaf-stream-after-free; do cp $L/$t.trace .; done && "
                               "cp uaf-stream-after-free.trace gone.trace && "
                               "%s import examples/event-missing-wait.trace -o r.db >/dev/null && "
                               "%s import gone.trace -o g.db >/dev/null && rm gone.trace",
                               SYNCSIM_BINARY, SYNCSIM_SOURCE_DIR, SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ %s check 'two races.trace' examples/flag-deadlock.trace "
                               "examples/rank-0.trace rule3-host-wait-unrecorded.trace "
                               "collective-mismatch-kind.trace barrier-mismatch-count.trace "
                               "rule6-sem-unordered-sets.trace uaf-double-free.trace "
                               "uaf-stream-after-free.trace r.db g.db "
                               "%s/tests/litmus/minimize-keeps-submitted-await.trace "
                               "--redundant --format sarif > log.sarif; } 2>&1",
                               SYNCSIM_BINARY, SYNCSIM_SOURCE_DIR),
                     1);
    assert_string_equal(out, "");       /* standard output held the log alone */
    validated(f, "log.sarif", out, sizeof out);
    assert_non_null(strstr(out, " barrier-mismatch,collective-mismatch,hang,race,redundant-sync,"
                                "semaphore-race,unmatched-send,use-after-free,wait-unrecorded  1\n"));
    /* relative URIs under a base; the space encoded; outside the working
     * directory, under ROOT */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c '\"uri\": \"two%%20races.trace\", "
                                                   "\"uriBaseId\": \"SRCROOT\"' log.sarif"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'minimize-keeps-submitted-await.trace\", "
                                                   "\"uriBaseId\": \"ROOT\"' log.sarif"),
                     0);
    /* the database whose text is gone: line 1 of it, and its seq */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c '\"uri\": \"g.db\", \"uriBaseId\": "
                                                   "\"SRCROOT\"}, \"region\": {\"startLine\": 1}}' "
                                                   "log.sarif"),
                     0);
}

/* A partial, an incomplete and an unreadable check are notifications of
 * the invocation: such a log never looks clean. */
static void test_cli_sarif_notifications(void **state)
{
    fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s examples >/dev/null && printf 'syncsim-trace 1\\nqueue h host\\n"
                               "h op a bogus:X\\n' > bad.trace && "
                               "printf 'syncsim-trace 1\\nmeta status=recording\\nqueue h host\\n"
                               "h op a\\n' > cut.trace",
                               SYNCSIM_BINARY),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s check examples/kineto-missing-wait.json --format sarif > p.sarif",
                               SYNCSIM_BINARY),
                     4);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s check cut.trace --format sarif > i.sarif",
                               SYNCSIM_BINARY),
                     3);
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "{ %s check examples/event-chain-clean.trace bad.trace --format "
                               "sarif > u.sarif; } 2>/dev/null",
                               SYNCSIM_BINARY),
                     2);
    validated(f, "p.sarif", out, sizeof out);
    assert_string_equal(out, "ok 0  partial-coverage 4\n");
    validated(f, "i.sarif", out, sizeof out);
    assert_string_equal(out, "ok 0  incomplete-run 3\n");
    validated(f, "u.sarif", out, sizeof out);
    assert_string_equal(out, "ok 0  unreadable-input 2\n");
    /* the error line itself is the message */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'bad.trace:3:8: error: expected an "
                                                   "access' u.sarif"),
                     0);
}

/* Each fix, applied to its trace, removes its finding: the missing edge is
 * inserted (an event, a sync, a flag), a second free deleted. */
static void test_cli_sarif_fixes_insert_the_sync(void **state)
{
    fixture *f = *state;
    char out[16384];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s examples >/dev/null && cp %s/tests/litmus/uaf-double-free.trace "
                               "%s/tests/litmus/uaf-unordered-alloc-does-not-hide.trace . && "
                               "%s import examples/host-read-without-sync.trace -o h.db >/dev/null",
                               SYNCSIM_BINARY, SYNCSIM_SOURCE_DIR, SYNCSIM_SOURCE_DIR,
                               SYNCSIM_BINARY),
                     0);
    /* events between streams, host syncs, a flag between two hosts, a
     * double free, and a database imported from text */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s check examples/event-missing-wait.trace "
                               "examples/pipeline-async-user-input.trace uaf-double-free.trace "
                               "uaf-unordered-alloc-does-not-hide.trace h.db --format sarif "
                               "> log.sarif",
                               SYNCSIM_BINARY),
                     1);
    validated(f, "log.sarif", out, sizeof out);
    assert_int_equal(tmpdir_write(f, "apply.py", apply), 0);
    int rc = tmpdir_sh(f, out, sizeof out, "python3 apply.py log.sarif %s", SYNCSIM_BINARY);
    if (rc != 0)
        fail_msg("%s", out);
    int fixed = 0;
    assert_int_equal(sscanf(out, "fixed %d", &fixed), 1);
    assert_true(fixed >= 7);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'insertedContent' log.sarif"), 0);
}

/* A clean check is a valid log with no results and no notification. */
static void test_cli_sarif_clean_has_no_results(void **state)
{
    fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "%s examples >/dev/null && %s check examples/event-chain-clean.trace "
                               "--format sarif > log.sarif",
                               SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    validated(f, "log.sarif", out, sizeof out);
    assert_string_equal(out, "ok 0   0\n");
}

int main(void)
{
    if (system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0) {
        printf("skipped: python3 with jsonschema is not installed (python3-jsonschema)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_sarif_every_kind_passes_the_rules, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sarif_notifications, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sarif_fixes_insert_the_sync, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_sarif_clean_has_no_results, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
