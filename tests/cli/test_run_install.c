/*
 * test_run_install.c -- `cmake --install` of the build this test belongs
 * to, into a temporary prefix, and the installed copy run from another
 * directory (issue 10.6: device models were read from the source tree, so
 * a moved clone or a copied binary failed plain `syncsim run`).
 *
 * The installed binary must find its device models under
 * PREFIX/share/syncsim/devices, relative to itself: a model that exists
 * only there runs, and its error for a missing model names that folder.
 * $SYNCSIM_DATA_DIR overrides it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <string.h>
#include <unistd.h>

#include "../tmpdir.h"

static void install(const fixture *f)
{
    char build[512], out[8192];
    snprintf(build, sizeof build, "%s", SYNCSIM_BINARY);
    int rc = tmpdir_sh(f, out, sizeof out, "cmake --install '%s' --prefix '%s/prefix'",
                       dirname(build), f->dir);
    if (rc != 0)
        fail_msg("cmake --install: exit %d:\n%s", rc, out);
    assert_int_equal(tmpdir_sh(f, NULL, 0, "test -x prefix/bin/syncsim && "
                               "test -x prefix/bin/syncsim-mpirun && "
                               "test -f prefix/share/syncsim/devices/h100-pcie.dev"), 0);
}

static void test_run_install_runs_from_another_directory(void **state)
{
    const fixture *f = *state;
    install(f);
    char out[8192];
    /* Plain `syncsim run`, standing somewhere else. */
    int rc = tmpdir_sh(f, out, sizeof out, "mkdir elsewhere && cd elsewhere && "
                       "../prefix/bin/syncsim run --tokens 2 --prompt 8 -o r.db");
    if (rc != 0)
        fail_msg("installed run: exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "on h100-pcie (2 GPUs + CPU)"));
    /* A model only the installed copy has: found there, not in the sources. */
    assert_int_equal(tmpdir_sh(f, NULL, 0, "sed 's/^name = .*/name = installed-only/' "
                               "prefix/share/syncsim/devices/h100-pcie.dev > "
                               "prefix/share/syncsim/devices/installed-only.dev"), 0);
    rc = tmpdir_sh(f, out, sizeof out, "cd elsewhere && ../prefix/bin/syncsim run "
                   "--devices installed-only --tokens 1 --prompt 0 -o r.db");
    if (rc != 0)
        fail_msg("installed-only model: exit %d:\n%s", rc, out);
    rc = tmpdir_sh(f, out, sizeof out, "cd elsewhere && ../prefix/bin/syncsim run "
                   "--devices x:gpus=1 -o r.db");
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "installed-only"));
    assert_non_null(strstr(out, " in "));
    assert_non_null(strstr(out, "/prefix/bin/../share/syncsim/devices, or a .dev file"));
}

static void test_run_install_data_dir_overrides(void **state)
{
    const fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, NULL, 0, "mkdir -p data/devices && "
                               "cp prefix/share/syncsim/devices/h100-sxm.dev data/devices/mine.dev"), 0);
    int rc = tmpdir_sh(f, out, sizeof out, "cd elsewhere && SYNCSIM_DATA_DIR=../data "
                       "../prefix/bin/syncsim run --devices mine --tokens 1 --prompt 0 -o r.db");
    if (rc != 0)
        fail_msg("SYNCSIM_DATA_DIR: exit %d:\n%s", rc, out);
    /* The override replaces the installed folder. */
    rc = tmpdir_sh(f, out, sizeof out, "cd elsewhere && SYNCSIM_DATA_DIR=../data "
                   "../prefix/bin/syncsim run --devices h100-pcie -o r.db");
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "mine"));
}

/* The install carries the documentation the help texts name: the README
 * and docs/ (with its pictures) under PREFIX/share/doc/syncsim; and no help
 * text of the installed binary names a folder of the source tree for its
 * device models. */
static void test_run_install_carries_the_docs(void **state)
{
    const fixture *f = *state;
    char out[8192];
    assert_int_equal(tmpdir_sh(f, out, sizeof out,
                               "cd prefix/share/doc/syncsim && test -f README.md && "
                               "test -f docs/trace-format.md && test -f docs/checker.md && "
                               "test -f docs/img/timeline-pipeline-race.png && "
                               "grep -q 'syncsim check' README.md"),
                     0);
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cd elsewhere && ../prefix/bin/syncsim help "
                               "cluster"),
                     0);
    assert_null(strstr(out, "a name of sim/devices"));
    assert_non_null(strstr(out, "rtx4090-windows"));
    assert_non_null(strstr(out, "/prefix/bin/../share/syncsim/devices"));
    /* the docs a help text names are where the installed copy has them */
    assert_int_equal(tmpdir_sh(f, out, sizeof out, "cd elsewhere && ../prefix/bin/syncsim help "
                               "sql"),
                     0);
    char want[256];
    snprintf(want, sizeof want, "The docs/ named above are in %s/prefix/share/doc/syncsim/docs/\n",
             f->dir);
    assert_non_null(strstr(out, want));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_install_runs_from_another_directory),
        cmocka_unit_test(test_run_install_data_dir_overrides),
        cmocka_unit_test(test_run_install_carries_the_docs),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
