/*
 * test_examples.c -- every example a user is shown runs as written (issue
 * 10.8): the "Examples:" of each command's --help, the commands of the
 * README's tour (and the output it shows, line for line), and the command
 * lines of the docs (docs, every .md).
 *
 * All run in one fresh directory, as a user following the help would:
 * the commands in the order below (`syncsim examples` first: it writes the
 * traces the others use), then the docs; the README's tour, which starts
 * from nothing, in a fresh directory of its own. `syncsim` is
 * found on PATH (a link to the binary under test). An example that is
 * meant to fail says so with "# exit N" ("# exit 0 or 1" where the
 * outcome depends on timing); a line with an UPPERCASE word for
 * a file of the user's (REPORT.sqlite) is a synopsis and is not run.
 * Nothing of the repository is at hand: the traces, captures and graph
 * files the examples use are those `syncsim examples` writes. capture's
 * examples need a CUDA build and a GPU; without them they are skipped with
 * a line saying why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tmpdir.h"

/* The order a user meets the commands in: each may use what the ones
 * before it wrote. Every command `syncsim help` lists must be here (the
 * test says which is not). */
static const char *const tour[] = {
    "examples", "run", "info", "runs", "sql", "check", "export", "import", "merge", "minimize", "replay",
    "advise", "calibrate", "timeline", "graph", "report", "generate", "cluster", "capture",
};

/* Why capture's examples cannot run here (no CUDA build, no GPU), or NULL. */
static const char *capture_missing(const fixture *f)
{
    static char out[4096];
    if (tmpdir_sh(f, out, sizeof out, "%s capture -o probe.db -- true", SYNCSIM_BINARY) != 0 &&
        strstr(out, "without the CUDA toolkit"))
        return "this build has no CUDA toolkit (libsyncsim_inject.so)";
    if (tmpdir_sh(f, NULL, 0, "nvidia-smi -L >/dev/null 2>&1") != 0)
        return "no NVIDIA GPU here (nvidia-smi -L)";
    return NULL;
}

typedef struct example {
    char cmd[2048];
    unsigned want;          /* exit statuses allowed, as bits */
    char shown[4096];       /* README: the output it shows, lines joined by \n */
} example;

static void trim_right(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
}

/* "# exit N" (or "# exit N or M": a run on real devices whose outcome
 * depends on timing) in the line's comment, as bits; exit 0 when none. */
static unsigned wanted_exit(const char *cmd)
{
    const char *c = strstr(cmd, "# exit ");
    if (!c)
        return 1u;
    unsigned bits = 1u << atoi(c + 7);
    const char *alt = strstr(c, " or ");
    if (alt && isdigit((unsigned char)alt[4]))
        bits |= 1u << atoi(alt + 4);
    return bits;
}

/* A synopsis names a file of the user's in UPPERCASE: not run. */
static bool is_synopsis(const char *cmd)
{
    const char *p = cmd;
    while (*p) {
        while (*p == ' ')
            p++;
        if (*p == '#')
            return false;
        size_t n = strcspn(p, " ");
        size_t upper = 0;
        while (upper < n && (isupper((unsigned char)p[upper]) || p[upper] == '_'))
            upper++;
        if (upper >= 2 && (upper == n || p[upper] == '.'))
            return true;
        p += n;
    }
    return false;
}

/* Appends line to e->cmd; returns true when it continues (ends in '\'). */
static bool add_line(example *e, const char *line)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", line);
    trim_right(buf);
    size_t n = strlen(buf);
    bool more = n && buf[n - 1] == '\\';
    if (more)
        buf[n - 1] = ' ';
    const char *s = buf;
    while (*s == ' ')
        s++;
    size_t have = strlen(e->cmd);
    snprintf(e->cmd + have, sizeof e->cmd - have, "%s", s);
    return more;
}

/* Runs e in the fixture's directory with syncsim on PATH; fails the test
 * with what it printed when the exit status is not the one wanted or
 * (README) a line it shows is not in its output. */
static void run_example(const fixture *f, const char *subdir, const char *where,
                        const example *e)
{
    static char out[1 << 16];
    int rc = tmpdir_sh(f, out, sizeof out, "PATH=\"%s/bin:$PATH\"; mkdir -p %s && cd %s && %s",
                       f->dir, subdir, subdir, e->cmd);
    if (rc < 0 || rc > 31 || !(e->want & (1u << rc)))
        fail_msg("%s: `%s` exited %d, not as its comment says (# exit N, else 0):\n%s", where,
                 e->cmd, rc, out);
    char shown[sizeof e->shown];
    snprintf(shown, sizeof shown, "%s", e->shown);
    for (char *save = NULL, *l = strtok_r(shown, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (!strstr(out, l))
            fail_msg("%s: `%s` no longer prints\n  %s\nit printed:\n%s", where, e->cmd, l, out);
}

/* The examples of `syncsim help cmd`. */
static int help_examples(const fixture *f, const char *cmd, example *ex, int cap)
{
    static char help[1 << 15];
    if (tmpdir_sh(f, help, sizeof help, "%s help %s", SYNCSIM_BINARY, cmd) != 0)
        fail_msg("syncsim help %s failed:\n%s", cmd, help);
    char *p = strstr(help, "\nExamples:\n");
    if (!p)
        fail_msg("syncsim help %s has no Examples", cmd);
    p += strlen("\nExamples:\n");
    int n = 0;
    bool more = false;
    for (char *save = NULL, *l = strtok_r(p, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "  ", 2) != 0)
            break;
        if (!more) {
            if (n == cap)
                break;
            memset(&ex[n++], 0, sizeof *ex);
        }
        more = add_line(&ex[n - 1], l);
    }
    for (int i = 0; i < n; i++)
        ex[i].want = wanted_exit(ex[i].cmd);
    return n;
}

/* Command lines of a markdown file: in ``` blocks or indented blocks,
 * "$ syncsim ..." lines (then the lines after it, to a blank line or the
 * next "$", are its output: shown is filled when want_shown), else lines
 * that start with "syncsim COMMAND". */
static int md_examples(const char *path, example *ex, int cap, bool want_shown)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[2048];
    int n = 0;
    bool fenced = false, more = false, in_output = false;
    while (fgets(line, sizeof line, fp)) {
        trim_right(line);
        if (strncmp(line, "```", 3) == 0) {
            fenced = !fenced;
            in_output = false;
            continue;
        }
        bool indented = strncmp(line, "    ", 4) == 0;
        if (!fenced && !indented) {
            in_output = more = false;
            continue;
        }
        const char *s = line;
        while (*s == ' ')
            s++;
        if (more) {
            more = add_line(&ex[n - 1], s);
            continue;
        }
        bool dollar = strncmp(s, "$ syncsim ", 10) == 0;
        bool bare = strncmp(s, "syncsim ", 8) == 0 && islower((unsigned char)s[8]) &&
                    !strchr(s, ':');  /* "syncsim run: message" is output */
        if ((dollar || (bare && !in_output)) && n < cap) {
            memset(&ex[n], 0, sizeof *ex);
            more = add_line(&ex[n++], dollar ? s + 2 : s);
            in_output = dollar;
            continue;
        }
        if (in_output && want_shown && *s && n) {
            char *sh = ex[n - 1].shown;
            size_t have = strlen(sh);
            snprintf(sh + have, sizeof ex[n - 1].shown - have, "%s\n", s);
        } else if (!*s) {
            in_output = false;
        }
    }
    fclose(fp);
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (!is_synopsis(ex[i].cmd)) {
            ex[i].want = wanted_exit(ex[i].cmd);
            ex[kept++] = ex[i];
        }
    return kept;
}

static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    fixture *f = *state;
    /* no link to the repository: what an example needs, `syncsim examples`
     * writes */
    return tmpdir_sh(f, NULL, 0, "mkdir bin && ln -s %s bin/syncsim", SYNCSIM_BINARY);
}

static void test_examples_of_help_readme_and_docs_run(void **state)
{
    fixture *f = *state;
    static example ex[64];
    char where[128];
    /* the tour covers every command */
    static char list[8192];
    assert_int_equal(tmpdir_sh(f, list, sizeof list, "%s help", SYNCSIM_BINARY), 0);
    char *p = strstr(list, "Commands:\n");
    assert_non_null(p);
    for (p = strchr(p, '\n') + 1; strncmp(p, "  ", 2) == 0; p = strchr(p, '\n') + 1) {
        char cmd[32];
        assert_int_equal(sscanf(p, " %31s", cmd), 1);
        bool in_tour = false;
        for (size_t c = 0; c < sizeof tour / sizeof *tour; c++)
            in_tour |= strcmp(tour[c], cmd) == 0;
        if (!in_tour)
            fail_msg("syncsim help lists '%s', whose examples this test does not run: add it "
                     "to tour[]", cmd);
    }
    for (size_t c = 0; c < sizeof tour / sizeof *tour; c++) {
        const char *missing = strcmp(tour[c], "capture") == 0 ? capture_missing(f) : NULL;
        if (missing) {
            fprintf(stderr, "test_examples: syncsim help capture: examples skipped: %s\n",
                    missing);
            continue;
        }
        int n = help_examples(f, tour[c], ex, 64);
        assert_true(n > 0);
        snprintf(where, sizeof where, "syncsim help %s", tour[c]);
        for (int i = 0; i < n; i++)
            run_example(f, ".", where, &ex[i]);
    }
    int n = md_examples(SYNCSIM_SOURCE_DIR "/README.md", ex, 64, true);
    assert_true(n >= 4);
    for (int i = 0; i < n; i++)
        run_example(f, "readme", "README.md", &ex[i]);     /* a tour from scratch */
    DIR *d = opendir(SYNCSIM_SOURCE_DIR "/docs");
    assert_non_null(d);
    struct dirent *de;
    int docs = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".md") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, SYNCSIM_SOURCE_DIR "/docs/%s", de->d_name);
        n = md_examples(path, ex, 64, false);
        snprintf(where, sizeof where, "docs/%s", de->d_name);
        for (int i = 0; i < n; i++, docs++)
            run_example(f, ".", where, &ex[i]);
    }
    closedir(d);
    assert_true(docs >= 5);
}

/* A mistyped command is one line with the nearest name, not the help. */
static void test_examples_unknown_command_is_one_line(void **state)
{
    fixture *f = *state;
    char out[1024];
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s chek x.trace", SYNCSIM_BINARY), 2);
    assert_string_equal(out, "syncsim: unknown command 'chek'; did you mean 'check'? "
                             "('syncsim help' lists them)\n");
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "%s frobnicate", SYNCSIM_BINARY), 2);
    assert_string_equal(out, "syncsim: unknown command 'frobnicate' ('syncsim help' lists the "
                             "commands)\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_examples_unknown_command_is_one_line, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_examples_of_help_readme_and_docs_run, setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
