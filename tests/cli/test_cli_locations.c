/* test_cli_locations.c -- every line `check` prints is read right by the
 * tools users read compiler output with (issue 34): Vim's default
 * 'errorformat' and Emacs' compilation mode (its `gnu` rule, which gcc's
 * form also meets) take each error, warning and note line to the file and
 * line meant -- both sides of a race, a hang, a use after free, from a text
 * trace and from a database (imported from text, with the text there or
 * gone; a capture with call sites) -- and a syntax error to its line and
 * column; no verdict line is taken for a place. The patterns are copied
 * into locations.py below; where Vim itself is installed, its quickfix list
 * is compared too. Needs python3 (skipped, with a line, without it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/*
 * locations.py OUT WANT : reads the lines `check` printed (OUT) and
 * checks each with both tools' patterns. A line with ": error: ",
 * ": warning: " or ": note: " is a place: both must parse it, to the file
 * and line it starts with, the severity its word says, and the column;
 * every other line must parse as no place. Each of WANT (one argument,
 * words "FILE:LINE" or "FILE:LINE:COL") must be the place of some line. Prints "ok N" (N places).
 *
 * Vim: the default 'errorformat' of a Unix build (src/optiondefs.h,
 * DFLT_EFM, Vim 9.0), entry by entry, as Vim's efm_to_regpat() makes each a
 * regular expression: the pattern is anchored (^...$), %f before a literal
 * character is ".\{-1,}" (the shortest file name that lets the rest match),
 * %l and %c "\d\+", %m ".\+", %*[^"] "[^"]*", %*\D "\D*", %*[ ] "[ ]*"; the
 * first entry that matches decides; "%-G" entries drop the line.
 *
 * Emacs: compilation-error-regexp-alist-alist's `gnu` entry
 * (lisp/progmodes/compile.el, Emacs 29: emacs-mirror/emacs), its rx form
 * written as a Python regular expression group for group: 1 file, 2 line,
 * 3 column, 6 a warning, 7 an info (a note); neither is an error.
 */
static const char *locations_py =
    "import re, sys, subprocess, shutil\n"
    "VIM_EFM = [  # (regex, ignore?) in DFLT_EFM order; %f, %l, %c, %m as named groups\n"
    "  (r'^[^\"]*\"(?P<f>.+?)\"\\D*(?P<l>\\d+): (?P<m>.+)$', False),   # %*[^\"]\"%f\"%*\\D%l: %m\n"
    "  (r'^\"(?P<f>.+?)\"\\D*(?P<l>\\d+): (?P<m>.+)$', False),         # \"%f\"%*\\D%l: %m\n"
    "  (r'^g?make\\[\\d*\\]: \\*\\*\\* \\[(?P<f>.+?):(?P<l>\\d+):(?P<m>.+)$', True),  # %-Gg%\\?make[%*\\d]: *** [%f:%l:%m\n"
    "  (r'^g?make: \\*\\*\\* \\[(?P<f>.+?):(?P<l>\\d+):(?P<m>.+)$', True),  # %-Gg%\\?make: *** [%f:%l:%m\n"
    "  (r'^(?P<f>.+?):(?P<l>\\d+): \\(Each undeclared identifier is reported only once$', True),\n"
    "  (r'^(?P<f>.+?):(?P<l>\\d+): for each function it appears in\\.\\)$', True),\n"
    "  (r'^In file included from (?P<f>.+?):(?P<l>\\d+):(?P<c>\\d+):$', True),\n"
    "  (r'^In file included from (?P<f>.+?):(?P<l>\\d+):(?P<c>\\d+),$', True),\n"
    "  (r'^In file included from (?P<f>.+?):(?P<l>\\d+):(?P<c>\\d+)$', True),\n"
    "  (r'^In file included from (?P<f>.+?):(?P<l>\\d+)$', True),\n"
    "  (r'^[ ]*from (?P<f>.+?):(?P<l>\\d+):(?P<c>\\d+)$', True),\n"
    "  (r'^[ ]*from (?P<f>.+?):(?P<l>\\d+):$', True),\n"
    "  (r'^[ ]*from (?P<f>.+?):(?P<l>\\d+),$', True),\n"
    "  (r'^[ ]*from (?P<f>.+?):(?P<l>\\d+)$', True),\n"
    "  (r'^(?P<f>.+?):(?P<l>\\d+):(?P<c>\\d+):(?P<m>.+)$', False),    # %f:%l:%c:%m\n"
    "  (r'^(?P<f>.+?)\\((?P<l>\\d+)\\):(?P<m>.+)$', False),             # %f(%l):%m\n"
    "  (r'^(?P<f>.+?):(?P<l>\\d+):(?P<m>.+)$', False),                 # %f:%l:%m\n"
    "  (r'^\"(?P<f>.+?)\", line (?P<l>\\d+)\\D*(?P<c>\\d+)[^ ]* (?P<m>.+)$', False),\n"
    "  (r'^(?P<f>.+?)\\|(?P<l>\\d+)\\| (?P<m>.+)$', False),             # %f|%l| %m\n"
    "]\n"
    "EMACS_GNU = re.compile(\n"
    "  r'^(?:[A-Za-z][-A-Za-z0-9.]+: ?|[ \\t]+(?:in |from))?'\n"
    "  r'(?P<f>[0-9]*[^0-9\\n](?:[^\\n :]| [^-/\\n]|:[^ \\n])*?)'\n"
    "  r': ?(?P<l>[0-9]+)'\n"
    "  r'(?:-(?P<el>[0-9]+)(?:\\.(?P<ec>[0-9]+))?'\n"
    "  r'|[.:](?P<c>[0-9]+)(?:-(?:(?P<el2>[0-9]+)\\.)?(?P<ec2>[0-9]+))?)?'\n"
    "  r':(?: *(?P<warn>FutureWarning|RuntimeWarning|Warning|warning|W:)'\n"
    "  r'| *(?P<info>[Ii]nfo(?:\\b|rmationa?l?)|I:|\\[ skipping .+ \\]|instantiated from|required from|[Nn]ote)'\n"
    "  r'| *[Ee]rror|[0-9]?(?:[^0-9\\n]|$)|[0-9][0-9][0-9])')\n"
    "def vim(line):\n"
    "    for rx, ignore in VIM_EFM:\n"
    "        m = re.match(rx, line)\n"
    "        if m:\n"
    "            if ignore: return None\n"
    "            d = m.groupdict()\n"
    "            return (d['f'], int(d['l']), int(d.get('c') or 0))\n"
    "    return None\n"
    "def emacs(line):\n"
    "    m = EMACS_GNU.search(line)\n"
    "    if not m: return None\n"
    "    kind = 'warning' if m.group('warn') else 'note' if m.group('info') else 'error'\n"
    "    return (m.group('f'), int(m.group('l')), int(m.group('c') or 0), kind)\n"
    "out = open(sys.argv[1]).read().splitlines()\n"
    "want = set(sys.argv[2].split())\n"
    "# Vim itself, when installed: its quickfix list of the same lines\n"
    "real = None\n"
    "if shutil.which('vim'):\n"
    "    subprocess.run(['vim', '-N', '-u', 'NONE', '-i', 'NONE', '-es', '-c', 'cgetfile ' + sys.argv[1],\n"
    "        '-c', 'call writefile(map(getqflist(), {_, e -> e.valid . \"|\" . bufname(e.bufnr) . \"|\" . e.lnum . \"|\" . e.col}), \"vim-qf.txt\")',\n"
    "        '-c', 'qa!'], check=False, stdin=subprocess.DEVNULL, timeout=60)\n"
    "    real = [l.split('|', 3) for l in open('vim-qf.txt').read().splitlines()]\n"
    "    assert len(real) == len(out), ('vim made', len(real), 'entries of', len(out), 'lines')\n"
    "places = 0\n"
    "for i, line in enumerate(out):\n"
    "    m = re.match(r'^(.*?):(\\d+):(\\d+): (error|warning|note): ', line)\n"
    "    v, e = vim(line), emacs(line)\n"
    "    if not m:\n"
    "        assert v is None and e is None, ('taken for a place', line, v, e)\n"
    "        if real: assert real[i][0] == '0', ('vim takes it for a place', line, real[i])\n"
    "        continue\n"
    "    f, l, c, sev = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)\n"
    "    assert v == (f, l, c), ('vim', line, v)\n"
    "    assert e == (f, l, c, sev), ('emacs', line, e)\n"
    "    if real: assert real[i] == ['1', f, str(l), str(c)], ('vim itself', line, real[i])\n"
    "    want.discard('%s:%d' % (f, l)); want.discard('%s:%d:%d' % (f, l, c))\n"
    "    places += 1\n"
    "assert not want, ('no line at', sorted(want))\n"
    "print('ok', places)\n";

/* Runs `check ARGS`, then locations.py over what it printed (standard
 * output and error) with the places wanted; fails with both on error. */
static void check_places(const fixture *f, int want_exit, const char *args, const char *want)
{
    char out[1 << 14];
    int rc = tmpdir_sh(f, out, sizeof out, "%s check %s > out.txt 2>&1", SYNCSIM_BINARY, args);
    if (rc != want_exit) {
        tmpdir_sh(f, out, sizeof out, "cat out.txt");
        fail_msg("check %s exited %d, not %d:\n%s", args, rc, want_exit, out);
    }
    if (tmpdir_sh(f, out, sizeof out, "python3 locations.py out.txt '%s'", want) != 0 ||
        strncmp(out, "ok ", 3) != 0) {
        char printed[1 << 14];
        tmpdir_sh(f, printed, sizeof printed, "cat out.txt");
        fail_msg("check %s:\n%s\nlocations.py: %s", args, printed, out);
    }
}

static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    return tmpdir_write(f, "locations.py", locations_py) == 0 &&
                   tmpdir_sh(f, NULL, 0,
                             "%s examples >/dev/null && cp %s/tests/litmus/uaf-stream-after-free.trace "
                             "uaf.trace",
                             SYNCSIM_BINARY, SYNCSIM_SOURCE_DIR) == 0
               ? 0
               : -1;
}

/* Text traces: both sides of a race, a hang and its blocked queue, a use
 * after free and its free, each at its own line. */
static void test_cli_locations_text_traces(void **state)
{
    fixture *f = *state;
    check_places(f, 1, "examples/event-missing-wait.trace",
                 "examples/event-missing-wait.trace:18 examples/event-missing-wait.trace:15 "
                 "examples/event-missing-wait.trace:21 examples/event-missing-wait.trace:14");
    check_places(f, 1, "examples/flag-deadlock.trace",
                 "examples/flag-deadlock.trace:13 examples/flag-deadlock.trace:15");
    check_places(f, 1, "uaf.trace", "uaf.trace:17 uaf.trace:16");
    /* --redundant: warnings too */
    check_places(f, 0, "examples/sync-pattern-full.trace --redundant", "");
}

/* Databases: at the lines of the text they were imported from; that text
 * gone, at line 1 of the database; a capture's statements at their call
 * sites. */
static void test_cli_locations_databases(void **state)
{
    fixture *f = *state;
    assert_int_equal(tmpdir_sh(f, NULL, 0,
                               "%s import examples/event-missing-wait.trace -o r.db && "
                               "%s import uaf.trace -o u.db && %s import examples/flag-deadlock.trace "
                               "-o h.db",
                               SYNCSIM_BINARY, SYNCSIM_BINARY, SYNCSIM_BINARY),
                     0);
    check_places(f, 1, "r.db",
                 "examples/event-missing-wait.trace:18 examples/event-missing-wait.trace:15");
    check_places(f, 1, "u.db h.db", "uaf.trace:17 uaf.trace:16 examples/flag-deadlock.trace:15");
    assert_int_equal(tmpdir_sh(f, NULL, 0, "mv uaf.trace uaf.moved"), 0);
    check_places(f, 1, "u.db", "u.db:1");
    assert_int_equal(tmpdir_write(f, "sites.trace",
                                  "syncsim-trace 1\nqueue h host\nqueue s7 stream device=0\n"
                                  "queue s8 stream device=0\nbuffer x size=64 device=0\n"
                                  "s7 op kernel_a w:x site=src/train.py:42\n"
                                  "s8 op kernel_b r:x site=src/train.py:57\nh sync all\n"),
                     0);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "%s import sites.trace -o s.db && rm sites.trace",
                               SYNCSIM_BINARY),
                     0);
    check_places(f, 1, "s.db", "src/train.py:57 src/train.py:42");
    /* the database's own runs, simulated: line 1 of it, and the seq named */
    assert_int_equal(tmpdir_sh(f, NULL, 0,
                               "%s run --policy async-user-inputs --tokens 2 -o sim.db >/dev/null",
                               SYNCSIM_BINARY),
                     0);
    check_places(f, 1, "sim.db", "sim.db:1");
}

/* A trace that cannot be read: its line and column, at the start. */
static void test_cli_locations_syntax_errors(void **state)
{
    fixture *f = *state;
    assert_int_equal(tmpdir_write(f, "bad.trace", "syncsim-trace 1\nqueue h host\nh op a bogus:X\n"),
                     0);
    check_places(f, 2, "bad.trace", "bad.trace:3:8");
    check_places(f, 2, "- < bad.trace", "<stdin>:3:8");
    /* with other traces: each says its own */
    check_places(f, 2, "examples/event-missing-wait.trace bad.trace",
                 "bad.trace:3:8 examples/event-missing-wait.trace:18");
}

int main(void)
{
    if (system("python3 -c 'import re' >/dev/null 2>&1") != 0) {
        printf("skipped: python3 is not installed (it runs the patterns of Vim and Emacs)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_locations_text_traces, setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_locations_databases, setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_locations_syntax_errors, setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
