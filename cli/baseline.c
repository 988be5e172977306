/*
 * baseline.c -- known findings: the file `check --write-baseline FILE`
 * writes and `check --baseline FILE` reads, so that a team can adopt the
 * checker on traces that already have findings and hear only of new ones.
 *
 * The format (text, UTF-8, one finding a line):
 *
 *   syncsim-baseline 1
 *   # comments and blank lines are ignored
 *   race 9c0f6d2a81e4b377 examples/event-missing-wait.trace: RAW race on X[0:64]: ...
 *
 * After the header, each line is KIND FINGERPRINT, then anything (the
 * writer puts the trace and the finding's text there, for people; the
 * reader ignores it). KIND is a finding word (trace_finding_parse);
 * FINGERPRINT is check_finding_fingerprint in 16 hex digits: the finding's
 * kind and the names it involves, never its lines, so that editing the
 * trace elsewhere keeps it known. A finding is known when a line has its
 * kind and fingerprint, whichever trace it came from; deleting a line makes
 * the finding reported again. Lines are sorted and unique when written.
 */
#include "check/check.h"
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BASELINE_HEADER "syncsim-baseline 1"

typedef struct known {
    uint64_t fingerprint;
    int kind;
} known;

struct cli_baseline {
    known *k;
    size_t n, cap;
};

static int known_cmp(const void *a, const void *b)
{
    const known *x = a, *y = b;
    if (x->fingerprint != y->fingerprint)
        return x->fingerprint < y->fingerprint ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

int cli_baseline_read(const char *cmd, const char *path, cli_baseline **out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return cli_error(cmd, "%s: %s (--baseline names a file written by --write-baseline)",
                         path, strerror(errno));
    cli_baseline *b = calloc(1, sizeof *b);
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int status = 2;
    if (!b) {
        cli_error(cmd, "out of memory");
        goto fail;
    }
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (lineno == 1) {
            if (strcmp(line, BASELINE_HEADER) != 0) {
                cli_error(cmd, "%s:1: expected '" BASELINE_HEADER "' (a baseline file starts "
                               "with it)", path);
                goto fail;
            }
            continue;
        }
        char *p = line + strspn(line, " \t");
        if (!*p || *p == '#')
            continue;
        size_t wl = strcspn(p, " \t");
        int kind = trace_finding_parse(p, wl);
        char *hex = p + wl + strspn(p + wl, " \t"), *end = NULL;
        errno = 0;
        unsigned long long fp = kind > 0 ? strtoull(hex, &end, 16) : 0;
        if (kind <= 0 || errno || end - hex != 16 || (*end && *end != ' ' && *end != '\t')) {
            cli_error(cmd, "%s:%u: expected KIND FINGERPRINT (a finding word, 16 hex digits), "
                           "got '%.40s'", path, lineno, p);
            goto fail;
        }
        if (b->n == b->cap) {
            size_t nc = b->cap ? 2 * b->cap : 64;
            known *nk = realloc(b->k, nc * sizeof *nk);
            if (!nk) {
                cli_error(cmd, "out of memory");
                goto fail;
            }
            b->k = nk;
            b->cap = nc;
        }
        b->k[b->n++] = (known){ fp, kind };
    }
    if (lineno == 0) {
        cli_error(cmd, "%s: empty; expected '" BASELINE_HEADER "'", path);
        goto fail;
    }
    qsort(b->k, b->n, sizeof *b->k, known_cmp);
    *out = b;
    status = 0;
fail:
    free(line);
    fclose(f);
    if (status)
        cli_baseline_free(b);
    return status;
}

bool cli_baseline_has(const cli_baseline *b, const trace *t, const trace_finding *f)
{
    if (!b)
        return false;
    known key = { check_finding_fingerprint(t, f), (int)f->kind };
    return bsearch(&key, b->k, b->n, sizeof *b->k, known_cmp) != NULL;
}

size_t cli_baseline_filter(const cli_baseline *b, const trace *t, trace_finding *f, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (cli_baseline_has(b, t, &f[i])) {
            trace_finding_release(&f[i]);
            continue;
        }
        f[kept++] = f[i];
    }
    return kept;
}

void cli_baseline_free(cli_baseline *b)
{
    if (b)
        free(b->k);
    free(b);
}

/* One line of the file, as it will be sorted. */
typedef struct entry {
    known k;
    char *text;
} entry;

static int entry_cmp(const void *a, const void *b)
{
    return known_cmp(&((const entry *)a)->k, &((const entry *)b)->k);
}

struct cli_baseline_writer {
    entry *e;
    size_t n, cap;
    bool failed;
};

cli_baseline_writer *cli_baseline_writer_new(void)
{
    return calloc(1, sizeof(cli_baseline_writer));
}

void cli_baseline_writer_add(cli_baseline_writer *w, const trace *t, const char *path,
                             const trace_finding *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (w->n == w->cap) {
            size_t nc = w->cap ? 2 * w->cap : 64;
            entry *ne = realloc(w->e, nc * sizeof *ne);
            if (!ne) {
                w->failed = true;
                return;
            }
            w->e = ne;
            w->cap = nc;
        }
        entry *e = &w->e[w->n];
        e->k = (known){ check_finding_fingerprint(t, &f[i]), (int)f[i].kind };
        /* the text is for people: one line, whatever the finding says */
        if (asprintf(&e->text, "%s: %s", path, f[i].text ? f[i].text : "") < 0) {
            w->failed = true;
            return;
        }
        for (char *c = e->text; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        w->n++;
    }
}

void cli_baseline_writer_free(cli_baseline_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].text);
    free(w->e);
    free(w);
}

int cli_baseline_writer_finish(cli_baseline_writer *w, const char *cmd, const char *path)
{
    int status = 2;
    char *tmp = NULL;
    FILE *out = NULL;
    if (w->failed) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    out = cli_output_open(cmd, path, &tmp);
    if (!out)
        goto done;
    qsort(w->e, w->n, sizeof *w->e, entry_cmp);
    fputs(BASELINE_HEADER "\n"
          "# Known findings: `syncsim check --baseline FILE` does not report them.\n"
          "# One a line: KIND FINGERPRINT, then the trace and the finding, for people.\n",
          out);
    for (size_t i = 0; i < w->n; i++)
        if (i == 0 || entry_cmp(&w->e[i - 1], &w->e[i]) != 0)
            fprintf(out, "%s %016llx %s\n", trace_finding_str((trace_finding_kind)w->e[i].k.kind),
                    (unsigned long long)w->e[i].k.fingerprint, w->e[i].text);
    status = cli_output_close(cmd, out, path, tmp, !ferror(out));
done:
    cli_baseline_writer_free(w);
    return status;
}
