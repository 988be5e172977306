/* TEMPORARY placeholder: the store helper replaces this file. */
#include "cli.h"
int cmd_info(int argc, char **argv) { (void)argc; (void)argv; return cli_error("info", "not built yet"); }
void cmd_info_help(FILE *out) { fprintf(out, "usage: syncsim info ...\n"); }
