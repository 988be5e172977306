/*
 * cmd_advise.c -- `syncsim advise TRACE|DB`: the price of every sync. The
 * advice itself is check/advise.c; this plugs sim/'s replay into it as the
 * pricer (check/ knows traces only; `report --advise` uses the same
 * pricer) and writes it as text, JSON or a timeline with the advised syncs
 * marked.
 */
#include "check/check.h"
#include "cli.h"
#include "sim/sim.h"
#include "viz/viz.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Groups listed without --all. */
#define ADVISE_LIST 12

void cmd_advise_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim advise TRACE|DB [--run N] [--devices MODEL] [--durations recorded|model]\n"
            "                      [--json] [--all] [--max-groups N] [--no-replacements]\n"
            "                      [--timeline OUT]\n"
            "\n"
            "Prices every synchronisation of a run or capture: each wait, host sync, await,\n"
            "barrier and blocking copy, grouped by its place in its host's iteration pattern\n"
            "(the letters 'syncsim run' prints) and its call site, with\n"
            "  - how often it runs and how long it holds the host or a stream (the trace's\n"
            "    own times when it has them, else a replay's), and its share of the replay's\n"
            "    critical path;\n"
            "  - the run replayed without it (makespan, and the time per iteration when\n"
            "    statements carry token= or iter=); a blocking copy is submitted to a\n"
            "    stream instead (asynchronous);\n"
            "  - whether it is safe to remove: the minimiser's answer ('syncsim minimize');\n"
            "  - where it is not, the first finding removing it creates and the cheapest\n"
            "    replacement that keeps the order (a sync of one stream instead of 'sync\n"
            "    all', an event record and wait instead of a host sync), checked and\n"
            "    replayed, with what it buys.\n"
            "Groups are sorted by what the advice buys. A trace whose coverage is partial\n"
            "(an ordering-only capture) gets no 'safe'. Replays use the run's device model\n"
            "(else h100-pcie; --devices names one) and its recorded durations.\n"
            "\n"
            "Options:\n"
            "  -r, --run N          the run of DB (default: the latest)\n"
            "  -d, --devices MODEL  the device model that prices syncs and API calls\n"
            "      --durations D    recorded (default) or model, as for 'syncsim replay'\n"
            "      --json           one JSON object (format syncsim-advice, docs/advise.md)\n"
            "      --all            list every group (default: the first %d)\n"
            "      --max-groups N   coarsen the grouping beyond N groups (default 128; 24 for\n"
            "                       traces of more than 200 000 statements)\n"
            "      --no-replacements  do not look for replacements (faster)\n"
            "      --timeline OUT   also draw the timeline (gnuplot; .svg or .png) with the\n"
            "                       advised syncs marked\n"
            "\n"
            "Exit status: 0 done, 2 bad input or usage, or a replay that hangs.\n"
            "\n"
            "Examples:\n"
            "  syncsim advise examples/sync-pattern-full.trace\n"
            "  syncsim advise syncsim.db --run 1 --json\n",
            ADVISE_LIST);
}

/* The pricer: sim_replay of a trace in memory, on the device model named
 * (--devices), else the trace's own (run metadata devices=), else
 * h100-pcie -- chosen at the first replay, when the trace is known. */
static int replay_price(void *ctx, const trace *t, const bool *drop, int64_t *makespan,
                        int64_t *start, int64_t *end, bool *critical, trace_error *err)
{
    cli_pricer *rp = ctx;
    if (!rp->loaded) {
        const char *spec = rp->devices ? rp->devices : trace_get_meta(t, "devices");
        if (!spec || sim_model_load(spec, &rp->model, err) != 0) {
            if (rp->devices)
                return -1;
            if (spec)
                fprintf(stderr, "note: the trace was recorded on '%s', which is no device "
                                "model: syncs and API calls are priced by h100-pcie "
                                "(--devices names another)\n",
                        spec);
            if (sim_model_load("h100-pcie", &rp->model, err) != 0)
                return -1;
        }
        rp->loaded = true;
        snprintf(rp->name, sizeof rp->name, "replay on %s, durations %s", rp->model.name,
                 rp->recorded ? "recorded" : "model");
    }
    int64_t *s = start;
    bool own_start = false;
    if (end && !start) {        /* ends are asked alone: starts are the replay's to fill */
        if (!(s = malloc((t->n_stmts ? t->n_stmts : 1) * sizeof *s)))
            return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
        own_start = true;
    }
    sim_replay_opts o = { .model = &rp->model, .durations_recorded = rp->recorded, .drop = drop,
                          .start = end ? s : NULL, .end = end, .critical = critical };
    sim_replay_result res;
    trace_reader r;
    trace_reader_memory(&r, (trace *)t);
    int rc = sim_replay(&r, &o, &res, err);
    if (own_start)
        free(s);
    if (rc != 0)
        return strstr(err->msg, "hangs") ? 1 : -1;
    *makespan = res.makespan_ns;
    return 0;
}

int cli_pricer_init(const char *cmd, cli_pricer *p, const char *devices, bool recorded)
{
    memset(p, 0, sizeof *p);
    p->devices = devices;
    p->recorded = recorded;
    snprintf(p->name, sizeof p->name, "replay");
    p->pricer = (check_pricer){ replay_price, p, p->name };
    if (devices) {              /* a bad name is bad usage, said now */
        trace_error err = { 0 };
        if (sim_model_load(devices, &p->model, &err) != 0)
            return cli_error(cmd, "%s", err.msg);
    }
    return 0;
}

int cmd_advise(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "devices", required_argument, NULL, 'd' },
        { "durations", required_argument, NULL, 'D' },
        { "json", no_argument, NULL, 'J' },
        { "all", no_argument, NULL, 'A' },
        { "max-groups", required_argument, NULL, 'G' },
        { "no-replacements", no_argument, NULL, 'N' },
        { "timeline", required_argument, NULL, 'T' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0, max_groups = 0;
    const char *devices = NULL, *timeline = NULL;
    bool json = false, all = false, no_repl = false, recorded = true;
    int c;
    while ((c = cli_getopt("advise", argc, argv, ":r:d:", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("advise", optarg, &run) != 0)
                return 2;
            break;
        case 'd':
            devices = optarg;
            break;
        case 'D':
            if (strcmp(optarg, "recorded") == 0)
                recorded = true;
            else if (strcmp(optarg, "model") == 0)
                recorded = false;
            else
                return cli_usage_error("advise", "--durations expects recorded or model, got '%s'",
                                       optarg);
            break;
        case 'J':
            json = true;
            break;
        case 'A':
            all = true;
            break;
        case 'G':
            if (cli_parse_u64(optarg, &max_groups) != 0 || max_groups == 0)
                return cli_usage_error("advise", "--max-groups expects a positive number, got "
                                       "'%s'", optarg);
            break;
        case 'N':
            no_repl = true;
            break;
        case 'T':
            timeline = optarg;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *path = cli_trace_arg("advise", argc, argv, optind);
    if (!path)
        return 2;
    cli_pricer rp;
    if (cli_pricer_init("advise", &rp, devices, recorded) != 0)
        return 2;
    if (timeline) {
        if (!viz_timeline_format_of(timeline))
            return cli_usage_error("advise", "%s: the picture's name must end in .svg or .png",
                                   timeline);
        if (cli_output_check("advise", timeline, path) != 0)
            return 2;
        if (!viz_gnuplot_available())
            return cli_error("advise", "gnuplot is not installed (Debian: apt-get install "
                             "gnuplot-nox); --timeline draws with it");
    }
    trace_error err = { 0 };
    trace_source src;
    trace_source_opts so = { .run = (int64_t)run };
    trace *t = NULL;
    if (cli_open("advise", path, &so, &src) != 0)
        return 2;
    int lrc = trace_source_load(&src, &t, &err);
    trace_source_close(&src);
    if (lrc != 0)
        return cli_error("advise", "%s", err.msg);

    cli_progress *prog = cli_progress_start("advise", "");
    check_advise_opts ao = { .pricer = &rp.pricer, .max_groups = (size_t)max_groups,
                             .no_replacements = no_repl, .progress = cli_progress_hook(prog) };
    check_advice adv;
    int arc = check_advise(t, &ao, &adv, &err);
    cli_progress_end(prog);
    if (arc != 0) {
        trace_free(t);
        return cli_error("advise", "%s", err.msg);
    }
    if (json)
        check_advice_print_json(stdout, t, path, &rp.pricer, &adv);
    else
        check_advice_print(stdout, t, path, &rp.pricer, &adv, all ? 0 : ADVISE_LIST);
    int status = 0;
    if (timeline) {
        trace_reader r;
        trace_reader_memory(&r, t);
        char title[600];
        snprintf(title, sizeof title, "syncsim advise %s: green, a sync that can go; orange, "
                 "one to replace", path);
        viz_timeline_opts to = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE,
                                 .no_findings = true, .title = title };
        viz_timeline *tl = NULL;
        if (viz_timeline_collect(&r, &to, &tl, &err) != 0 ||
            viz_timeline_add_advice(tl, &adv) != 0 ||
            viz_timeline_render(tl, viz_timeline_format_of(timeline), timeline, NULL, NULL,
                                &err) != 0)
            status = cli_error("advise", "%s", err.msg[0] ? err.msg : "out of memory");
        else if (!json)
            printf("wrote %s\n", timeline);
        trace_reader_close(&r);
        viz_timeline_free(tl);
    }
    check_advice_free(&adv);
    trace_free(t);
    return status;
}
