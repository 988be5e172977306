/*
 * examples.h -- the example traces and captures that `syncsim examples`
 * writes and that every example of the help texts and docs uses (the
 * build embeds the .trace files of cli/examples and two synthetic captures of
 * tests/data/captures: cli/examples/embed.cmake).
 */
#ifndef SYNCSIM_CLI_EXAMPLES_H
#define SYNCSIM_CLI_EXAMPLES_H

typedef struct cli_example {
    const char *name;       /* file name, e.g. "flag-deadlock.trace"; NULL ends the list */
    const char *text;
} cli_example;

extern const cli_example cli_examples[];

#endif
