/*
 * cmd_timeline.c -- `syncsim timeline DB|TRACE [--run N] [-o FILE]
 * [--from T --to T]`: draws what every queue did, when, with gnuplot
 * (viz/timeline.c, viz/gnuplot.c).
 */
#include "cli.h"
#include "viz/viz.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void cmd_timeline_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim timeline DB|TRACE [--run N] [-o FILE.svg|FILE.png] [--from T] [--to T]\n"
            "\n"
            "Draws a timeline of a text trace or of run N of a database (default: the latest\n"
            "run) with gnuplot: one lane per queue, hosts on top, streams grouped by device;\n"
            "statements as boxes coloured by kind; records, waits, syncs and barriers as\n"
            "marks, with arrows from each record to the waits it releases and from a stream\n"
            "to the host sync that covers it; races in red between the two lanes. Races come\n"
            "from the findings stored in the database ('syncsim check DB'), else the checker\n"
            "is run. Statements without times (t=) are laid out by submission order, and the\n"
            "picture says so. Beyond %d boxes, boxes narrower than a pixel are merged and\n"
            "the default picture is PNG. Needs gnuplot (Debian: gnuplot-nox).\n"
            "\n"
            "Options:\n"
            "  -r, --run N        the run to draw (default: the latest)\n"
            "  -o, --output FILE  the picture, .svg or .png (default timeline.svg, or\n"
            "                     timeline.png beyond %d boxes)\n"
            "      --from T       start of the window: nanoseconds, or with a unit (12us,\n"
            "                     3.5ms, 1s); without times: a submission index\n"
            "      --to T         end of the window, the same way\n"
            "      --width PX     picture width in pixels (default 1400)\n"
            "      --no-races     do not look for races (skips the checker)\n"
            "\n"
            "Examples:\n"
            "  syncsim timeline syncsim.db --run 1 -o timeline.svg\n"
            "  syncsim timeline examples/pipeline-async-user-input.trace -o t.png\n"
            "  syncsim timeline syncsim.db --run 1 --from 1ms --to 1.2ms -o zoom.svg\n",
            VIZ_TIMELINE_MERGE_ABOVE, VIZ_TIMELINE_MERGE_ABOVE);
}

/* "1500", "12us", "3.5ms", "1s", "20ns" -> ns; -1 when malformed. */
static int parse_time(const char *s, int64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mul = 1;
    if (!*end || strcasecmp(end, "ns") == 0)
        mul = 1;
    else if (strcasecmp(end, "us") == 0)
        mul = 1e3;
    else if (strcasecmp(end, "ms") == 0)
        mul = 1e6;
    else if (strcasecmp(end, "s") == 0)
        mul = 1e9;
    else
        return -1;
    if (v * mul > 9e18)
        return -1;
    *out = (int64_t)(v * mul + 0.5);
    return 0;
}

int cmd_timeline(int argc, char **argv)
{
    enum { OPT_FROM = 256, OPT_TO, OPT_WIDTH, OPT_NO_RACES };
    static const struct option longopts[] = {
        { "run", required_argument, NULL, 'r' },
        { "output", required_argument, NULL, 'o' },
        { "from", required_argument, NULL, OPT_FROM },
        { "to", required_argument, NULL, OPT_TO },
        { "width", required_argument, NULL, OPT_WIDTH },
        { "no-races", no_argument, NULL, OPT_NO_RACES },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long run = 0, width = 0;
    const char *output = NULL;
    viz_timeline_opts opts = { .from = TRACE_TIME_NONE, .to = TRACE_TIME_NONE };
    int c;
    while ((c = cli_getopt("timeline", argc, argv, ":r:o:", longopts)) != -1) {
        switch (c) {
        case 'r':
            if (cli_parse_run("timeline", optarg, &run) != 0)
                return 2;
            break;
        case 'o':
            output = optarg;
            break;
        case OPT_FROM:
        case OPT_TO:
            if (parse_time(optarg, c == OPT_FROM ? &opts.from : &opts.to) != 0)
                return cli_usage_error("timeline", "--%s expects a time (1500, 12us, 3.5ms, 1s), "
                                       "got '%s'", c == OPT_FROM ? "from" : "to", optarg);
            break;
        case OPT_WIDTH:
            if (cli_parse_u64(optarg, &width) != 0 || width < 400 || width > 20000)
                return cli_usage_error("timeline", "--width expects 400 to 20000 pixels, got '%s'",
                                       optarg);
            opts.width = (int)width;
            break;
        case OPT_NO_RACES:
            opts.no_findings = true;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
    }
    const char *path = cli_trace_arg("timeline", argc, argv, optind);
    if (!path)
        return 2;
    if (opts.from != TRACE_TIME_NONE && opts.to != TRACE_TIME_NONE && opts.to <= opts.from)
        return cli_usage_error("timeline", "--to must be after --from");
    const char *format = NULL;
    if (output) {
        const char *dot = strrchr(output, '.');
        if (dot && strcasecmp(dot, ".svg") == 0)
            format = "svg";
        else if (dot && strcasecmp(dot, ".png") == 0)
            format = "png";
        else
            return cli_usage_error("timeline", "%s: the picture's name must end in .svg or .png",
                                   output);
        if (cli_output_check("timeline", output, path) != 0)
            return 2;
    }
    /* Say it before reading a large trace. */
    if (!viz_gnuplot_available())
        return cli_error("timeline", "gnuplot is not installed (Debian: apt-get install "
                         "gnuplot-nox); the timeline is drawn by it");
    trace_error err = { 0 };
    viz_timeline *tl = NULL;
    /* through cli_open, which resolves a run's name and shows a capture's parse */
    trace_source src;
    trace_source_opts so = { .run = (int64_t)run };
    if (cli_open("timeline", path, &so, &src) != 0)
        return 2;
    int vrc = viz_timeline_from_source(&src, &opts, &tl, &err);
    trace_source_close(&src);
    if (vrc != 0)
        return cli_error("timeline", "%s", err.msg);
    if (!format)
        format = viz_timeline_default_format(tl);
    char default_out[32];
    if (!output) {
        snprintf(default_out, sizeof default_out, "timeline.%s", format);
        output = default_out;
        if (cli_output_check("timeline", output, path) != 0) {
            viz_timeline_free(tl);
            return 2;
        }
    }
    int rc = viz_timeline_render(tl, format, output, NULL, NULL, &err);
    if (rc == 0)
        printf("%s: %zu boxes%s, %zu race%s drawn%s%s%s\n", output, viz_timeline_boxes(tl),
               viz_timeline_merged(tl) ? " (sub-pixel boxes merged)" : "", viz_timeline_races(tl),
               viz_timeline_races(tl) == 1 ? "" : "s",
               viz_timeline_timed(tl) ? "" : "; no times: laid out by submission order",
               *viz_timeline_verdict(tl) ? "; " : "", viz_timeline_verdict(tl));
    viz_timeline_free(tl);
    if (rc != 0)
        return cli_error("timeline", "%s", err.msg);
    return 0;
}
