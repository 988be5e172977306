/*
 * cmd_generate.c -- `syncsim generate SCENARIO ...`: writes the trace of a
 * known multi-rank scenario at any size, for check, minimize, replay and
 * the pictures. Today one scenario: nvFuser's host-IR ring pipeline
 * (sched/ring.c), with the variants that reproduce its known bugs.
 */
#include "cli.h"
#include "sched/sched.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cmd_generate_help(FILE *out)
{
    fprintf(out,
            "usage: syncsim generate nvfuser-ring [--ranks R] [--streams K] [--iters N]\n"
            "                        [--chunks C] [--chunk-bytes B] [--variant V] [-o FILE]\n"
            "\n"
            "Writes, as a text trace, nvFuser's host-IR ring pipeline: a ring all-gather\n"
            "overlapped with a matmul per chunk, across R ranks (one host process and one\n"
            "device each), K streams per rank (the work of loop index streamIdx goes to\n"
            "stream streamIdx %% K), N calls that reuse the slices and the IPC semaphores,\n"
            "and the CUDA-IPC handle exchange before each call: a rank whose handle cache\n"
            "misses puts its handle into the key-value store, gets its neighbours' handles\n"
            "(a blocking get: it waits for their put), meets the others at a barrier and\n"
            "deletes its key (a write); a rank that hits reads its cache. Each transfer\n"
            "(get protocol) has two value semaphores: the sender sets in-use, the receiver\n"
            "waits for it, copies and sets ready, the sender waits for ready before it\n"
            "overwrites the slice in the next call. Check the result with `syncsim check`.\n"
            "\n"
            "Options:\n"
            "  --ranks R          ranks in the ring, 2 to 1024 (default 4)\n"
            "  --streams K        streams per rank, 1 to 256 (default 2)\n"
            "  --iters N          calls of the pipeline, 1 to 100000 (default 2)\n"
            "  --chunks C         chunks per slice, each its own streamIdx, 1 to 1024 (default 1)\n"
            "  --chunk-bytes B    bytes of a chunk, 1 to 2^40 (default 1024)\n"
            "  --variant V        which exchange and protocol (default correct):\n");
    for (int v = 0; v < SCHED_RING_VARIANT_COUNT; v++) {
        fprintf(out, "    %-20s", sched_ring_variant_str((sched_ring_variant)v));
        cli_wrapped(out, sched_ring_variant_about((sched_ring_variant)v), 24);
    }
    fprintf(out,
            "  -o, --output FILE  write to FILE instead of standard output\n"
            "\n"
            "Examples:\n"
            "  syncsim generate nvfuser-ring --ranks 4 --streams 2 --iters 3 -o ring.trace\n"
            "  syncsim check ring.trace                                   # clean\n"
            "  syncsim generate nvfuser-ring --variant uneven-cache-hits -o uneven.trace\n"
            "  syncsim check uneven.trace                                 # exit 1: a hang\n"
            "  syncsim generate nvfuser-ring --variant no-barrier | syncsim check -  # exit 1: races\n");
}

/* Parses the value of option name into *out (min .. max; why: what the
 * lower bound is for, or ""). 0, or 2 (printed). */
static int parse_count(const char *name, const char *arg, unsigned long long min,
                       unsigned long long max, const char *why, unsigned long long *out)
{
    if (cli_parse_u64(arg, out) != 0 || *out < min || *out > max)
        return cli_usage_error("generate", "%s takes a number from %llu to %llu%s, not '%s'", name,
                               min, max, why, arg);
    return 0;
}

int cmd_generate(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "ranks", required_argument, NULL, 'R' },
        { "streams", required_argument, NULL, 'K' },
        { "iters", required_argument, NULL, 'N' },
        { "chunks", required_argument, NULL, 'C' },
        { "chunk-bytes", required_argument, NULL, 'B' },
        { "variant", required_argument, NULL, 'v' },
        { "output", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long ranks = 4, streams = 2, iters = 2, chunks = 1, bytes = 1024;
    const char *variant = "correct", *output = NULL;
    int c;
    while ((c = cli_getopt("generate", argc, argv, ":o:", longopts)) != -1) {
        int rc = 0;
        switch (c) {
        case 'R':
            rc = parse_count("--ranks", optarg, 2, 1024, " (a ring needs two ranks)", &ranks);
            break;
        case 'K':
            rc = parse_count("--streams", optarg, 1, 256, "", &streams);
            break;
        case 'N':
            rc = parse_count("--iters", optarg, 1, 100000, "", &iters);
            break;
        case 'C':
            rc = parse_count("--chunks", optarg, 1, 1024, "", &chunks);
            break;
        case 'B':
            rc = parse_count("--chunk-bytes", optarg, 1, 1ull << 40, "", &bytes);
            break;
        case 'v':
            variant = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        default: /* CLI_OPT_ERROR: said */
            return 2;
        }
        if (rc)
            return rc;
    }
    if (optind >= argc)
        return cli_usage_error("generate", "which scenario? (expected: nvfuser-ring)");
    if (strcmp(argv[optind], "nvfuser-ring") != 0)
        return cli_usage_error("generate", "unknown scenario '%s' (expected: nvfuser-ring)",
                               argv[optind]);
    if (optind + 1 < argc)
        return cli_usage_error("generate", "too many arguments ('%s')", argv[optind + 1]);
    int v = sched_ring_variant_parse(variant);
    if (v < 0) {
        char list[256] = "";
        for (int k = 0; k < SCHED_RING_VARIANT_COUNT; k++) {
            strncat(list, k ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, sched_ring_variant_str((sched_ring_variant)k),
                    sizeof list - strlen(list) - 1);
        }
        return cli_usage_error("generate", "unknown variant '%s' (expected: %s)", variant, list);
    }
    if (output && cli_output_check("generate", output, NULL) != 0)
        return 2;
    sched_ring_opts o = { .ranks = (uint32_t)ranks, .streams = (uint32_t)streams,
                          .iters = (uint32_t)iters, .chunks = (uint32_t)chunks,
                          .chunk_bytes = bytes, .variant = (sched_ring_variant)v };
    trace_error err = { 0 };
    trace *t;
    if (sched_ring_generate(&o, &t, &err) != 0)
        return err.status == TRACE_EUSAGE ? cli_usage_error("generate", "%s", err.msg)
                                          : cli_error("generate", "%s", err.msg);
    char *tmp;
    FILE *out = cli_output_open("generate", output, &tmp);
    if (!out) {
        trace_free(t);
        return 2;
    }
    trace_reader r;
    trace_reader_memory(&r, t);
    int rc = trace_text_write(out, &r, &err);
    uint64_t n = t->n_stmts;
    trace_reader_close(&r);
    trace_free(t);
    if (rc != 0)
        cli_error("generate", "%s: %s", output ? output : "standard output", err.msg);
    rc = cli_output_close("generate", out, output, tmp, rc == 0);
    if (rc == 0 && output)
        fprintf(stderr, "wrote %s: nvfuser-ring, %s, %llu ranks x %llu streams, %llu calls, "
                        "%llu statements\n",
                output, variant, ranks, streams, iters, (unsigned long long)n);
    return rc;
}
