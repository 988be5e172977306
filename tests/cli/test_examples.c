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
 * examples, and the docs' commands on `cuda:` devices, need a CUDA build and
 * a GPU; without them they are skipped with a line saying why; so are the
 * examples that name a ggml tree ($SYNCSIM_GGML_DIR) where none is given.
 * Every other command line of the docs runs (a line "syncsim WORD: ..." is
 * output), a shell loop as a whole, each document in a folder of its own,
 * and the output quoted under a "$ syncsim ..." line is checked as the
 * README's is ("..." in it stands for what differs from run to run).
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
    "advise", "calibrate", "timeline", "graph", "report", "generate", "cluster", "capture", "ggml",
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

/* Whether out has a line that reads as `line` does: its text in order,
 * where a " ... " (or a "..." at either end) in `line` stands for what
 * varies from run to run (a real run's statement count, its times). */
static bool shows(const char *out, const char *line)
{
    if (!strstr(line, "..."))
        return strstr(out, line) != NULL;
    for (const char *l = out; *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        char have[4096], want[4096];
        snprintf(have, sizeof have, "%.*s", (int)len, l);
        snprintf(want, sizeof want, "%s", line);
        const char *at = have;
        bool ok = true;
        for (char *save = NULL, *piece = strtok_r(want, ".", &save); piece && ok;
             piece = strtok_r(NULL, ".", &save)) {
            /* pieces between runs of dots; a dot inside a word ("0.5 s",
             * "r.db") splits it too, in order, which still matches */
            const char *hit = strstr(at, piece);
            ok = hit != NULL;
            if (hit)
                at = hit + strlen(piece);
        }
        if (ok)
            return true;
        l += len + (eol != NULL);
    }
    return false;
}

/* Runs e in the fixture's directory with syncsim on PATH; fails the test
 * with what it printed when the exit status is not the one wanted or
 * (README) a line it shows is not in its output. */
static void run_example(const fixture *f, const char *subdir, const char *where,
                        const example *e)
{
    static char out[1 << 16];
    /* on a line of its own: its comment ("# exit 2") must not swallow what
     * tmpdir_sh appends (2>&1) */
    int rc = tmpdir_sh(f, out, sizeof out, "PATH=\"%s/bin:$PATH\"; mkdir -p %s && cd %s && { %s\n}",
                       f->dir, subdir, subdir, e->cmd);
    if (rc < 0 || rc > 31 || !(e->want & (1u << rc)))
        fail_msg("%s: `%s` exited %d, not as its comment says (# exit N, else 0):\n%s", where,
                 e->cmd, rc, out);
    char shown[sizeof e->shown];
    snprintf(shown, sizeof shown, "%s", e->shown);
    for (char *save = NULL, *l = strtok_r(shown, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (!shows(out, l))
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

/* Whether s starts a command line: "syncsim COMMAND ..." (not the output
 * "syncsim COMMAND: message") or "syncsim-mpirun N ...". */
static bool is_command(const char *s)
{
    if (strncmp(s, "syncsim-mpirun ", 15) == 0)
        return true;
    if (strncmp(s, "syncsim ", 8) != 0 || !islower((unsigned char)s[8]))
        return false;
    size_t word = strcspn(s + 8, " ");
    return s[8 + word - 1] != ':';
}

/* Command lines of a markdown file: in ``` blocks or indented blocks,
 * "$ syncsim ..." lines (then the lines after it, to a blank line or the
 * next "$", are its output: shown is filled when want_shown; a "..." line
 * stands for lines left out), else lines that start with "syncsim COMMAND"
 * (is_command), and shell loops ("for ...; do" to "done") as one example. */
static int md_examples(const char *path, example *ex, int cap, bool want_shown)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[2048];
    int n = 0;
    bool fenced = false, more = false, in_output = false, in_loop = false;
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
        if (in_loop) {
            size_t have = strlen(ex[n - 1].cmd);
            snprintf(ex[n - 1].cmd + have, sizeof ex[n - 1].cmd - have, "\n%s", s);
            in_loop = strcmp(s, "done") != 0;
            continue;
        }
        if (strncmp(s, "for ", 4) == 0 && strstr(s, "; do") && n < cap) {
            memset(&ex[n], 0, sizeof *ex);
            add_line(&ex[n++], s);
            in_loop = true;
            continue;
        }
        bool dollar = strncmp(s, "$ ", 2) == 0 && is_command(s + 2);
        bool bare = is_command(s);
        if ((dollar || (bare && !in_output)) && n < cap) {
            memset(&ex[n], 0, sizeof *ex);
            more = add_line(&ex[n++], dollar ? s + 2 : s);
            in_output = dollar;
            continue;
        }
        if (in_output && want_shown && *s && n && strcmp(s, "...") != 0) {
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
    return tmpdir_sh(f, NULL, 0, "mkdir bin && ln -s %s bin/syncsim && "
                     "ln -s %s/scripts/mpirun bin/syncsim-mpirun",
                     SYNCSIM_BINARY, SYNCSIM_SOURCE_DIR);
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
        const char *ggml = getenv("SYNCSIM_GGML_DIR");
        for (int i = 0; i < n; i++) {
            if (strstr(ex[i].cmd, "$SYNCSIM_GGML_DIR") && !(ggml && *ggml)) {
                fprintf(stderr, "test_examples: %s: `%s` skipped: no ggml tree "
                        "($SYNCSIM_GGML_DIR)\n", where, ex[i].cmd);
                continue;
            }
            run_example(f, ".", where, &ex[i]);
        }
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
        n = md_examples(path, ex, 64, true);
        snprintf(where, sizeof where, "docs/%s", de->d_name);
        /* each document from a folder of its own: a copy of what the help's
         * examples left (./examples, ./syncsim.db, ...), as a user who read
         * the help first has it, untouched by the other documents */
        char sub[300];
        snprintf(sub, sizeof sub, "doc-%.*s", (int)len - 3, de->d_name);
        assert_int_equal(tmpdir_sh(f, NULL, 0, "mkdir %s && for x in * .[!.]*; do case $x in "
                                               "bin|readme|doc-*|'.[!.]*') ;; *) cp -r \"$x\" %s/ ;; "
                                               "esac; done",
                                   sub, sub),
                         0);
        for (int i = 0; i < n; i++, docs++) {
            /* a GPU's commands need a CUDA build and a GPU, as capture's;
             * syncsim-mpirun's need mpirun */
            const char *missing = strstr(ex[i].cmd, "cuda:") || strstr(ex[i].cmd, "syncsim capture")
                                      ? capture_missing(f)
                                      : NULL;
            if (!missing && strncmp(ex[i].cmd, "syncsim-mpirun ", 15) == 0 &&
                tmpdir_sh(f, NULL, 0, "command -v mpirun >/dev/null") != 0)
                missing = "no mpirun here (Debian: openmpi-bin)";
            /* a command its comment says takes "about N s" (N >= 10) runs in
             * the long mode only (SYNCSIM_TEST_LONG=1: scripts/setup --test) */
            const char *about = strstr(ex[i].cmd, "# about ");
            const char *lng = getenv("SYNCSIM_TEST_LONG");
            if (!missing && about && atoi(about + 8) >= 10 && !(lng && strcmp(lng, "1") == 0))
                missing = "it takes long: run with SYNCSIM_TEST_LONG=1 (scripts/setup --test)";
            if (missing) {
                fprintf(stderr, "test_examples: %s: `%s` skipped: %s\n", where, ex[i].cmd, missing);
                continue;
            }
            if (strncmp(ex[i].cmd, "syncsim-mpirun ", 15) == 0) {
                /* as tests/mpi runs its jobs: under AddressSanitizer, what
                 * OpenMPI keeps until exit is not ours (lsan-mpi.supp) */
                example mpi = ex[i];
                snprintf(mpi.cmd, sizeof mpi.cmd,
                         "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 LSAN_OPTIONS="
                         "suppressions=%.300s/tests/mpi/lsan-mpi.supp:print_suppressions=0 %.1500s",
                         SYNCSIM_SOURCE_DIR, ex[i].cmd);
                run_example(f, sub, where, &mpi);
                continue;
            }
            run_example(f, sub, where, &ex[i]);
        }
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
