/*
 * test_readme.c -- every command of the README's `sh` blocks runs as
 * written (issue 34: its Installing list did not build, libgraphviz-dev was
 * missing). The tour's `text` block is test_examples.c's.
 *
 * Each command line of an `sh` block must be one this test knows, or it
 * fails saying which, so that a command added to the README is a command
 * tested. The Installing commands run in order in a fresh copy of the tree
 * (the tracked and untracked files, no build folder):
 *   sudo apt-get install ... $(scripts/setup --packages build)
 *       as `apt-get -s install ...` (a simulation, which needs no root): the
 *       packages the one list names exist and are installed here;
 *   cmake -S . -B build ...      as written (a fresh configure: seconds);
 * and with SYNCSIM_TEST_LONG=1 (scripts/setup --test sets it for the
 * plain build's tests: CI) the rest, as written:
 *   cmake --build build -j       a fresh build (about 2 minutes on 2 cores);
 *   cmake --install build --prefix ~/.local   (its comment's form: the
 *       `sudo` form needs root) with HOME a temporary folder;
 *   scripts/setup --demo         in the copy, then the copy is removed and
 *       the installed syncsim runs from another folder with no tree at all.
 * `scripts/setup --test` is CI itself: .ci/run must run exactly it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tmpdir.h"

/* The command lines of the README's ```sh blocks, in order, each with its
 * comment (after "  #") cut off into comment[]. */
typedef struct readme_cmd {
    char cmd[512];
    char comment[256];
} readme_cmd;

static int readme_commands(readme_cmd *out, int cap)
{
    FILE *fp = fopen(SYNCSIM_SOURCE_DIR "/README.md", "r");
    assert_non_null(fp);
    char line[1024];
    int n = 0;
    bool in_sh = false;
    while (fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "```", 3) == 0) {
            in_sh = !in_sh && strcmp(line + 3, "sh") == 0;
            continue;
        }
        if (!in_sh || !line[0] || line[0] == '#')
            continue;
        assert_true(n < cap);
        char *hash = strstr(line, "  #");
        out[n].comment[0] = '\0';
        if (hash) {
            const char *c = hash + 3;
            while (*c == ' ')
                c++;
            snprintf(out[n].comment, sizeof out[n].comment, "%s", c);
            *hash = '\0';
        }
        size_t len = strlen(line);
        while (len && line[len - 1] == ' ')
            line[--len] = '\0';
        snprintf(out[n].cmd, sizeof out[n].cmd, "%s", line);
        n++;
    }
    fclose(fp);
    return n;
}

static bool long_mode(void)
{
    const char *e = getenv("SYNCSIM_TEST_LONG");
    return e && strcmp(e, "1") == 0;
}

/* Runs cmd in the fixture's copy of the tree; fails with its output unless
 * it exits `want`. */
static void in_tree(const fixture *f, const char *cmd, int want, char *out, size_t cap)
{
    /* HOME exported before the command, whose ~ the shell expands */
    int rc = tmpdir_sh(f, out, cap, "cd tree && export HOME=\"%s/home\" && %s", f->dir, cmd);
    if (rc != want)
        fail_msg("README: `%s` exited %d, not %d:\n%.4000s", cmd, rc, want, out);
}

static void test_readme_every_command_runs_as_written(void **state)
{
    fixture *f = *state;
    static char out[1 << 16];
    readme_cmd cmds[32];
    int n = readme_commands(cmds, 32);
    assert_true(n >= 6);
    /* a fresh copy of the tree, without the builds */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "mkdir tree home && tar -C '%s' --exclude='./build*' "
                               "--exclude=./.git --exclude=./syncsim.db -cf - . | tar -C tree -xf -",
                               SYNCSIM_SOURCE_DIR),
                     0);
    bool built = false, installed = false;
    for (int i = 0; i < n; i++) {
        const char *c = cmds[i].cmd;
        if (strcmp(c, "scripts/setup --test") == 0) {
            /* CI itself */
            assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c '^exec scripts/setup --test$' "
                                                           "tree/.ci/run"),
                             0);
        } else if (strcmp(c, "scripts/setup --demo") == 0) {
            continue;   /* after the install, below */
        } else if (strncmp(c, "sudo apt-get install ", 21) == 0) {
            assert_non_null(strstr(c, "$(scripts/setup --packages build)"));
            if (tmpdir_sh(f, NULL, 0, "command -v apt-get >/dev/null") != 0) {
                fprintf(stderr, "test_readme: `%s` not simulated: no apt-get here\n", c);
                continue;
            }
            char sim[600];
            snprintf(sim, sizeof sim, "apt-get -s %s", c + strlen("sudo apt-get "));
            in_tree(f, sim, 0, out, sizeof out);
            if (!strstr(out, " 0 newly installed"))
                fail_msg("README: `%s`: a package of the list is not installed here:\n%.4000s",
                         c, out);
        } else if (strncmp(c, "cmake -S . -B build ", 20) == 0) {
            in_tree(f, c, 0, out, sizeof out);
        } else if (strcmp(c, "cmake --build build -j") == 0) {
            if (!long_mode())
                continue;
            in_tree(f, c, 0, out, sizeof out);
            built = true;
        } else if (strcmp(c, "sudo cmake --install build") == 0) {
            assert_string_equal(cmds[i].comment, "or: cmake --install build --prefix ~/.local");
            if (!long_mode())
                continue;
            in_tree(f, cmds[i].comment + 4, 0, out, sizeof out);
            installed = true;
        } else {
            fail_msg("README: a command this test does not run: `%s`", c);
        }
    }
    /* the Installing commands name no package themselves: one list */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "grep -c 'libsqlite3-dev' tree/README.md"), 1);
    if (!long_mode()) {
        fprintf(stderr, "test_readme: the build and the install are run with "
                        "SYNCSIM_TEST_LONG=1 (scripts/setup --test)\n");
        return;
    }
    assert_true(built && installed);
    in_tree(f, "scripts/setup --demo", 0, out, sizeof out);
    assert_non_null(strstr(out, "syncsim check syncsim.db"));
    /* the installed copy, with the tree gone */
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "rm -rf tree && mkdir elsewhere && cd elsewhere && "
                               "S=../home/.local/bin/syncsim && $S --version && $S examples "
                               ">/dev/null && test -f ../home/.local/share/doc/syncsim/docs/"
                               "checker.md && $S check examples/event-missing-wait.trace"),
                     1);
    assert_non_null(strstr(out, "examples/event-missing-wait.trace:18:1: error: race: "));
}

/* The one list: scripts/setup prints it, and what configure requires is in
 * it (the package that was missing: libgraphviz-dev, for libgvc). */
static void test_readme_packages_from_one_place(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s/scripts/setup --packages build",
                               SYNCSIM_SOURCE_DIR),
                     0);
    static const char *const needed[] = { "build-essential", "cmake", "pkg-config",
                                          "libsqlite3-dev", "zlib1g-dev", "libyajl-dev",
                                          "libgraphviz-dev" };
    for (size_t i = 0; i < sizeof needed / sizeof *needed; i++) {
        char word[64];
        snprintf(word, sizeof word, " %s ", needed[i]);
        char padded[4200];
        snprintf(padded, sizeof padded, " %.*s ", (int)strcspn(out, "\n"), out);
        if (!strstr(padded, word))
            fail_msg("scripts/setup --packages build lacks %s: %s", needed[i], out);
    }
    /* and, where dpkg can say, every package that owns what configure
     * requires: the REQUIRED pkg-config modules of the CMakeLists, and the
     * headers of find_package(SQLite3) and find_package(ZLIB) */
    if (tmpdir_sh(f, NULL, 0, "command -v dpkg && command -v pkg-config") == 0) {
        int rc = tmpdir_sh(f, out, sizeof out,
                           "cd '%s' && list=\" $(scripts/setup --packages build) \" && "
                           "for m in $(grep -ho 'pkg_check_modules([A-Z]* REQUIRED IMPORTED_TARGET "
                           "[^)]*' CMakeLists.txt */CMakeLists.txt | sed 's/.*IMPORTED_TARGET //'); "
                           "do echo \"$(pkg-config --variable=pcfiledir $m)/$m.pc\"; done > "
                           "%s/needs && echo /usr/include/sqlite3.h /usr/include/zlib.h | "
                           "tr ' ' '\\n' >> %s/needs && test $(wc -l < %s/needs) -ge 5 && "
                           "for p in $(dpkg -S $(cat %s/needs) | cut -d: -f1 | sort -u); do "
                           "case \"$list\" in *\" $p \"*) ;; *) echo \"missing: $p\"; exit 1;; esac; "
                           "done",
                           SYNCSIM_SOURCE_DIR, f->dir, f->dir, f->dir, f->dir);
        if (rc != 0)
            fail_msg("scripts/setup --packages build lacks what configure requires: %s", out);
    } else {
        fprintf(stderr, "test_readme: no dpkg here: the packages of what configure requires "
                        "are not looked up\n");
    }
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s/scripts/setup --packages all",
                               SYNCSIM_SOURCE_DIR),
                     0);
    assert_non_null(strstr(out, "libcmocka-dev"));
    assert_non_null(strstr(out, "libgraphviz-dev"));
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s/scripts/setup --packages nothing",
                               SYNCSIM_SOURCE_DIR),
                     2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_readme_packages_from_one_place, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_readme_every_command_runs_as_written, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
