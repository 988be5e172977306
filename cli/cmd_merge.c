/*
 * cmd_merge.c -- `syncsim merge TRACE... [-o OUT] [--format db|trace]`: one
 * trace per rank of a multi-process job becomes one trace of the job
 * (traces/merge.c does the merging; docs/multi-rank.md the rules).
 */
#include "cli.h"
#include "traces/trace.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cmd_merge_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim merge [--partial] [--force] [--run N] TRACE [--run N] TRACE... [-o OUT]\n"
            "                     [--format db|trace]\n"
            "\n"
            "Merges one trace per rank (process) of a job into one trace that `check` reads\n"
            "as a whole: cross-rank races, collectives a rank skips or reorders, sends no rank\n"
            "receives. Inputs are databases (their latest run, or --run N given before the\n"
            "file), text traces or captures syncsim reads, one file per rank.\n"
            "\n"
            "  - Queues, buffers, devices, events, flags, semaphores and barriers are each\n"
            "    process's own: they are renamed r<rank>.<name> (host -> r1.host).\n"
            "    Communicators are shared: collectives pair by each queue's k-th arrival on a\n"
            "    communicator, send/recv by (communicator, from, to, tag) in each rank's order.\n"
            "  - A file's rank is its run metadata rank= (every input has one, or none does),\n"
            "    else its place in the list: the first file is rank 0. world_size=, where\n"
            "    given, must agree and equal the number of files.\n"
            "  - Statements are interleaved by time when every input is timed (t=), else\n"
            "    rank by rank. The inputs' expect lines are kept (they name merged names).\n"
            "  - Profiles of some ranks of a larger job (PyTorch profiles ranks 0 and 1 of\n"
            "    128) merge with --partial: ranks keep their numbers, and a collective\n"
            "    larger than the ranks given, or a message to or from an absent rank,\n"
            "    becomes an op of its queue, ordering nothing across ranks.\n"
            "  - Ranks of different jobs are refused: inputs whose run metadata disagrees on\n"
            "    the job (a profile's distributed backend, process-group config, NCCL version\n"
            "    or job id; a syncsim run's parallelism, model or policy), or of which some\n"
            "    say it and others do not, name both files and the key. --force merges them\n"
            "    and says so (run metadata forced=): the job's check is then never clean.\n"
            "  - The job keeps the inputs' import ledgers (summed, events read and ignored\n"
            "    too) and what they know of byte ranges, so `check` of the job says what\n"
            "    could not be judged.\n"
            "\n"
            "Options:\n"
            "  -o, --output OUT   where to write (default ./" CLI_DEFAULT_DB ", or standard output\n"
            "                     with --format trace; - is standard output)\n"
            "  -f, --format FMT   db: a new run of the database OUT (default); trace: text\n"
            "  -n, --name NAME    the run's name in the database (default: merged)\n"
            "  -r, --run N        the run of the database that follows (default: its latest)\n"
            "      --partial      the inputs are some ranks of a larger world (world_size=)\n"
            "      --force        merge ranks whose run metadata names different jobs, or\n"
            "                     does not show them to be one (recorded: forced=)\n"
            "\n"
            "Examples:\n"
            "  syncsim examples    # rank-0.trace, rank-1.trace: two ranks of one job\n"
            "  syncsim merge examples/rank-0.trace examples/rank-1.trace -o job.db\n"
            "  syncsim check job.db                                   # exit 1: a race across ranks\n"
            "  syncsim merge examples/rank-0.trace examples/rank-1.trace --format trace -o job.trace\n"
            "  syncsim import examples/rank-0.trace -o r0.db && syncsim import examples/rank-1.trace -o r1.db\n"
            "  syncsim merge --run 1 r0.db --run 1 r1.db -o job2.db\n"
            "  syncsim merge examples/kineto-rank0-nccl.json examples/kineto-rank1-nccl.json -o nccl.db\n"
            "  syncsim merge --partial examples/kineto-rank0-of-4.json -o part.db   # 1 rank of 4\n");
}

int cmd_merge(int argc, char **argv)
{
    const char *output = NULL, *format = "db", *name = "merged";
    const char **paths = calloc((size_t)argc, sizeof *paths);
    int64_t *runs = calloc((size_t)argc, sizeof *runs);
    trace_source *src = NULL;
    trace_reader **readers = NULL;
    uint32_t n = 0, opened = 0;
    cli_progress *prog = NULL;
    int rc = 2;
    if (!paths || !runs) {
        rc = cli_error("merge", "out of memory");
        goto out;
    }
    int64_t next_run = 0;
    bool partial = false, force = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool takes = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "-f") ||
                     !strcmp(a, "--format") || !strcmp(a, "-n") || !strcmp(a, "--name") ||
                     !strcmp(a, "-r") || !strcmp(a, "--run");
        if (takes && i + 1 >= argc) {
            rc = cli_usage_error("merge", "option '%s' needs a value", a);
            goto out;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            output = argv[++i];
        } else if (!strcmp(a, "-f") || !strcmp(a, "--format")) {
            format = argv[++i];
        } else if (!strcmp(a, "-n") || !strcmp(a, "--name")) {
            name = argv[++i];
        } else if (!strcmp(a, "-r") || !strcmp(a, "--run")) {
            unsigned long long r;
            if (cli_parse_run("merge", argv[++i], &r) != 0)
                goto out;
            next_run = (int64_t)r;
        } else if (!strcmp(a, "--partial")) {
            partial = true;
        } else if (!strcmp(a, "--force")) {
            force = true;
        } else if (a[0] == '-' && a[1]) {
            rc = cli_usage_error("merge", "unknown option '%s'", a);
            goto out;
        } else {
            paths[n] = a;
            runs[n++] = next_run;
            next_run = 0;
        }
    }
    if (next_run) {
        rc = cli_usage_error("merge", "--run %lld names no database: give it before the file",
                             (long long)next_run);
        goto out;
    }
    bool text = !strcmp(format, "trace");
    if (!text && strcmp(format, "db") != 0) {
        rc = cli_usage_error("merge", "unknown format '%s' (expected: db or trace)", format);
        goto out;
    }
    if (n < 1) {
        rc = cli_usage_error("merge", "missing traces: give one per rank");
        goto out;
    }
    if (!output)
        output = text ? "-" : CLI_DEFAULT_DB;
    for (uint32_t i = 0; i < n; i++) {
        if (!strcmp(paths[i], "-")) {
            rc = cli_usage_error("merge", "standard input cannot be one of the ranks: give files");
            goto out;
        }
        if (!strcmp(paths[i], output) || cli_same_file(paths[i], output)) {
            rc = cli_error("merge", "%s: is an input; write the job elsewhere (-o)", output);
            goto out;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        struct stat a, b;
        for (uint32_t j = 0; j < i; j++)
            if (runs[i] == runs[j] && stat(paths[i], &a) == 0 && stat(paths[j], &b) == 0 &&
                a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                rc = cli_error("merge", "%s: given twice (as ranks %u and %u); give each rank's "
                                        "trace once", paths[i], j, i);
                goto out;
            }
    }
    if (text && cli_output_check("merge", output, paths[0]) != 0)
        goto out;
    src = calloc(n, sizeof *src);
    readers = calloc(n, sizeof *readers);
    if (!src || !readers) {
        rc = cli_error("merge", "out of memory");
        goto out;
    }
    for (; opened < n; opened++) {
        trace_source_opts so = { .run = runs[opened], .as_recorded = true };
        if (cli_open("merge", paths[opened], &so, &src[opened]) != 0)
            goto out;
        readers[opened] = &src[opened].reader;
    }
    trace_error err = { 0 };
    trace_reader job;
    trace_merge_opts mo = { .partial = partial, .force = force };
    if (trace_merge_open_opts(readers, n, &mo, &job, &err) != 0) {
        rc = cli_error("merge", "%s", err.msg);
        goto out;
    }
    /* the job's statements as they are merged, of the inputs' statements
     * (a database's run says), or lines (a text trace: an estimate) */
    uint64_t total = 0;
    bool lines = false;
    for (uint32_t i = 0; i < n && (i == 0 || total); i++) {
        bool l;
        uint64_t k = cli_source_size(&src[i], &l);
        total = k ? total + k : 0;
        lines |= l;
    }
    prog = cli_progress_start("merge", "statements");
    if (lines)
        cli_progress_estimate(prog, total);
    else
        cli_progress_total(prog, total);
    cli_progress_reader(prog, &job);
    if (text) {
        char *tmp = NULL;
        FILE *f = cli_output_open("merge", output, &tmp);
        if (!f) {
            trace_reader_close(&job);
            goto out;
        }
        bool ok = trace_text_write(f, &job, &err) == 0;
        if (!ok)
            cli_error("merge", "%s", err.msg);
        trace_reader_close(&job);
        rc = cli_output_close("merge", f, output, tmp, ok) != 0 ? 2 : 0;
    } else {
        uint64_t n_stmts = 0;
        int64_t run = trace_store_import(output, &job, name, &n_stmts, &err);
        trace_reader_close(&job);
        cli_progress_end(prog);     /* the bar goes before the result */
        prog = NULL;
        if (run < 0) {
            rc = cli_error("merge", "%s", err.msg);
            goto out;
        }
        printf("merged %u rank%s as run %lld: %llu statements in %s\n", n, n == 1 ? "" : "s",
               (long long)run, (unsigned long long)n_stmts, output);
        rc = 0;
    }
out:
    cli_progress_end(prog);     /* job is closed: its reader counted into prog */
    for (uint32_t i = 0; i < opened; i++)
        trace_source_close(&src[i]);
    free(src);
    free(readers);
    free(paths);
    free(runs);
    return rc;
}
