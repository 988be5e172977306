/*
 * cmd_runs.c -- `syncsim runs [DB] [--name RUN TEXT] [--delete RUN]
 * [--json]`: the runs of a trace database, to list, name and delete, so
 * that "the latest run" is one the user chose. A run is named by its id or
 * its name wherever --run is taken (cli_resolve_run).
 */
#include "cli.h"
#include "traces/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cmd_runs_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim runs [DB] [--name RUN TEXT]... [--delete RUN]... [--json]\n"
            "\n"
            "Lists the runs of a trace database: id, kind (what made it: sim, import,\n"
            "replay, capture, ...), status (complete; recording while its producer is\n"
            "alive and writes it; died when it was left recording by a producer that\n"
            "ended; incomplete for an import of an unfinished run), statements, name,\n"
            "and when it was created (UTC).\n"
            "The last one listed is the latest, the one commands read when given no --run.\n"
            "RUN is a run id or a run's name (unique in the database); so is the value of\n"
            "--run in every command.\n"
            "\n"
            "Options:\n"
            "  -n, --name RUN TEXT  rename run RUN to TEXT\n"
            "  -d, --delete RUN     delete run RUN and all of it (statements, strings,\n"
            "                       metadata, checks and findings, its split graph);\n"
            "                       refused for a run whose producer died, unless --force,\n"
            "                       and always for a run being written (its producer is\n"
            "                       alive and holds the run's lock). A deleted run's id is\n"
            "                       never given to another run\n"
            "      --force          delete a run whose producer died\n"
            "  -j, --json           the list as one JSON object\n"
            "Renames and deletions are done in the order given, then the list is printed.\n"
            "\n"
            "Exit status: 0 done, 2 bad input or usage (no such run, a name that two runs\n"
            "share, a database that cannot be written, a run being written).\n"
            "\n"
            "Examples:\n"
            "  syncsim run --tokens 2 -o runs.db && syncsim run --policy full --tokens 2 -o runs.db\n"
            "  syncsim runs runs.db --name 1 baseline --name 2 full-sync\n"
            "  syncsim check runs.db --run baseline\n"
            "  syncsim runs runs.db --delete full-sync\n");
}

/* One edit to make, in the order given. */
typedef struct edit {
    const char *run;        /* id or name */
    const char *name;       /* NULL: delete */
} edit;

/* A run's status as the list shows it: a run left 'recording' is
 * "recording" while its producer is alive, "died" once it is gone. */
static const char *shown_status(const trace_run_info *r)
{
    return strcmp(r->status, "recording") != 0 ? r->status : r->live ? "recording" : "died";
}

static void print_list(FILE *out, const char *path, const trace_run_info *r, size_t n, bool json)
{
    if (json) {
        fputs("{\"database\": ", out);
        trace_json_str(out, path);
        fputs(", \"runs\": [", out);
    } else {
        fprintf(out, "%s: %zu run%s\n", path, n, n == 1 ? "" : "s");
        if (n)
            fprintf(out, "%6s  %-9s %-10s %11s  %-20s  %s\n", "id", "kind", "status", "statements",
                    "created (UTC)", "name");
    }
    for (size_t i = 0; i < n; i++) {
        char when[32] = "?";
        time_t t = (time_t)r[i].created;
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, json ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S", &tm);
        if (json) {
            fprintf(out, "%s\n  {\"id\": %lld, \"kind\": ", i ? "," : "", (long long)r[i].id);
            trace_json_str(out, r[i].source);
            fputs(", \"status\": ", out);
            trace_json_str(out, shown_status(&r[i]));
            fprintf(out, ", \"statements\": %llu, \"name\": ", (unsigned long long)r[i].n_stmts);
            trace_json_str(out, r[i].name);
            fprintf(out, ", \"created\": \"%s\"}", when);
        } else {
            fprintf(out, "%6lld  %-9s %-10s %11llu  %-20s  %s\n", (long long)r[i].id, r[i].source,
                    shown_status(&r[i]), (unsigned long long)r[i].n_stmts, when, r[i].name);
        }
    }
    if (json)
        fputs("]}\n", out);
}

int cmd_runs(int argc, char **argv)
{
    enum { OPT_FORCE = 256 };
    static const struct option longopts[] = {
        { "name", required_argument, NULL, 'n' },
        { "delete", required_argument, NULL, 'd' },
        { "force", no_argument, NULL, OPT_FORCE },
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    edit *edits = calloc((size_t)argc, sizeof *edits);
    size_t n_edits = 0;
    bool json = false, force = false;
    int c, status = 2;
    if (!edits)
        return cli_error("runs", "out of memory");
    while ((c = cli_getopt("runs", argc, argv, "n:d:j", longopts)) != -1) {
        switch (c) {
        case 'n':
            /* --name RUN TEXT: TEXT is the next argument */
            if (optind >= argc) {
                free(edits);
                return cli_usage_error("runs", "--name %s needs the new name after it", optarg);
            }
            edits[n_edits++] = (edit){ optarg, argv[optind++] };
            break;
        case 'd':
            edits[n_edits++] = (edit){ optarg, NULL };
            break;
        case OPT_FORCE:
            force = true;
            break;
        case 'j':
            json = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            free(edits);
            return 2;
        }
    }
    const char *path = cli_trace_arg("runs", argc, argv, optind);
    if (!path) {
        free(edits);
        return 2;
    }
    trace_error err = { 0 };
    trace_store *st = NULL;
    trace_run_info *runs = NULL;
    size_t n = 0;
    if (access(path, F_OK) != 0) {
        cli_error("runs", "%s: no such file", path);
        goto out;
    }
    st = trace_store_open_mode(path, n_edits ? TRACE_STORE_WRITE : TRACE_STORE_READ, &err);
    if (!st) {
        cli_error("runs", "%s", err.msg);
        goto out;
    }
    for (size_t i = 0; i < n_edits; i++) {
        int64_t id;
        if (cli_resolve_run_in("runs", st, path, edits[i].run, &id) != 0)
            goto out;
        if (edits[i].name) {
            if (!*edits[i].name || strspn(edits[i].name, "0123456789") == strlen(edits[i].name)) {
                cli_usage_error("runs", "--name %s: '%s' cannot name a run (a name is not empty "
                                "and not a number, which --run reads as an id)", edits[i].run,
                                edits[i].name);
                goto out;
            }
            int64_t other;
            trace_error quiet = { 0 };
            if (cli_find_run_name(st, edits[i].name, &other, &quiet) == 1 && other != id) {
                cli_error("runs", "%s: run %lld is already named '%s'; names are unique", path,
                          (long long)other, edits[i].name);
                goto out;
            }
            if (trace_store_rename_run(st, id, edits[i].name, &err) != 0) {
                cli_error("runs", "%s", err.msg);
                goto out;
            }
            if (!json)
                printf("run %lld: named '%s'\n", (long long)id, edits[i].name);
        } else {
            trace_run_info *ri = NULL;
            if (trace_store_run(st, id, &ri, &err) != 0) {
                cli_error("runs", "%s", err.msg);
                goto out;
            }
            bool unfinished = strcmp(ri->status, "complete") != 0, live = ri->live;
            if (unfinished && !live && !force) {
                cli_error("runs", "%s: run %lld is unfinished (status '%s') and its producer "
                          "is gone: it died, or was stopped; --force deletes it", path,
                          (long long)id, ri->status);
                trace_run_info_free(ri, 1);
                goto out;
            }
            trace_run_info_free(ri, 1);
            /* a live run is refused by the store, --force or not */
            if (trace_store_delete_run(st, id, &err) != 0) {
                cli_error("runs", "%s", err.msg);
                goto out;
            }
            if (!json)
                printf("run %lld: deleted\n", (long long)id);
        }
    }
    if (trace_store_runs(st, &runs, &n, &err) != 0) {
        cli_error("runs", "%s", err.msg);
        goto out;
    }
    print_list(stdout, path, runs, n, json);
    status = 0;
out:
    trace_run_info_free(runs, n);
    if (st)
        trace_store_close(st);
    free(edits);
    return status;
}
