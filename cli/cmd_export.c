/* TEMPORARY placeholder: the store helper replaces this file. */
#include "cli.h"
int cmd_export(int argc, char **argv) { (void)argc; (void)argv; return cli_error("export", "not built yet"); }
void cmd_export_help(FILE *out) { fprintf(out, "usage: syncsim export ...\n"); }
