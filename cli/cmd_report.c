/*
 * cmd_report.c -- `syncsim report DB [--run N] -o report.html`: one
 * self-contained HTML page about a run (viz/report.c).
 */
#include "cli.h"
#include "viz/viz.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void cmd_report_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim report DB [--run N] -o FILE.html [--no-timeline]\n"
            "                      [--advise [--devices MODEL]]\n"
            "\n"
            "Writes one self-contained HTML page about run N of DB (default: the latest):\n"
            "the run and its metadata, the findings with their fixes (stored by 'syncsim\n"
            "check DB', else found now), the split graph and the timeline as inline SVG,\n"
            "the sync pattern per iteration (the letters of 'syncsim help run'; when\n"
            "statements carry token= or iter=), and the replays and what-ifs\n"
            "recorded from this run (runs whose run_meta names it as source_run or\n"
            "replay_of). The page refers to no other file and runs no script.\n"
            "\n"
            "Options:\n"
            "  -r, --run N         the run to report on (default: the latest)\n"
            "  -o, --output FILE   the page (default report.html)\n"
            "      --no-timeline   leave the timeline out (it needs gnuplot)\n"
            "      --advise        add the price of every sync ('syncsim help advise'): a\n"
            "                      section, and the advised syncs marked on the timeline\n"
            "      --devices MODEL with --advise: the device model of its replays\n"
            "\n"
            "Examples:\n"
            "  syncsim run -o run.db && syncsim check run.db && \\\n"
            "      syncsim report run.db -o report.html\n"
            "  syncsim import examples/event-missing-wait.trace -o bug.db && \\\n"
            "      syncsim report bug.db -o bug.html\n"
            "  syncsim report run.db --advise -o advice.html\n");
}

/* viz_report_opts.watch: the report's passes over the run counted into the
 * progress ctx, of the run's statements. */
static void watch(void *ctx, trace_reader *r, uint64_t n_stmts)
{
    cli_progress_total(ctx, n_stmts);
    cli_progress_reader(ctx, r);
}

int cmd_report(int argc, char **argv)
{
    enum { OPT_NO_TIMELINE = 256, OPT_ADVISE, OPT_DEVICES };
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "output", required_argument, NULL, 'o' },
        { "no-timeline", no_argument, NULL, OPT_NO_TIMELINE },
        { "advise", no_argument, NULL, OPT_ADVISE },
        { "devices", required_argument, NULL, OPT_DEVICES },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0;
    const char *output = "report.html";
    viz_report_opts opts = { 0 };
    bool advise = false;
    const char *devices = NULL;
    int c;
    while ((c = cli_getopt("report", argc, argv, ":r:o:", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("report", optarg, &run) != 0)
                return 2;
            opts.run = (int64_t)run;
            break;
        case 'o':
            output = optarg;
            break;
        case OPT_NO_TIMELINE:
            opts.no_timeline = true;
            break;
        case OPT_ADVISE:
            advise = true;
            break;
        case OPT_DEVICES:
            devices = optarg;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *db = cli_trace_arg("report", argc, argv, optind);
    if (!db)
        return 2;
    if (cli_output_check("report", output, db) != 0)
        return 2;
    const char *ext = strrchr(output, '.');
    if (!ext || (strcasecmp(ext, ".html") != 0 && strcasecmp(ext, ".htm") != 0))
        return cli_usage_error("report", "%s: the page is HTML; its name must end in .html",
                               output);
    if (!opts.no_timeline && !viz_gnuplot_available())
        return cli_error("report", "gnuplot is not installed (Debian: apt-get install "
                         "gnuplot-nox); it draws the timeline (or pass --no-timeline)");
    if (devices && !advise)
        return cli_usage_error("report", "--devices prices the advice: give --advise too");
    if (cli_run_resolve("report", db, &opts.run) != 0)
        return 2;
    cli_pricer pricer;
    if (advise) {
        if (cli_pricer_init("report", &pricer, devices, true) != 0)
            return 2;
        opts.pricer = &pricer.pricer;
    }
    trace_error err = { 0 };
    cli_progress *prog = cli_progress_start("report", "statements");
    opts.watch = watch;
    opts.watch_ctx = prog;
    int wrc = viz_report_write(db, &opts, output, &err);
    cli_progress_end(prog);     /* the run's reader, closed, counted into it */
    if (wrc != 0)
        return cli_error("report", "%s", err.msg);
    printf("%s\n", output);
    return 0;
}
