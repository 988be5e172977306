/* TEMPORARY placeholder: the store helper replaces this file. */
#include "cli.h"
int cmd_import(int argc, char **argv) { (void)argc; (void)argv; return cli_error("import", "not built yet"); }
void cmd_import_help(FILE *out) { fprintf(out, "usage: syncsim import ...\n"); }
