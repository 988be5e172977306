/*
 * rggml_int.h -- what the files of real/ggml share beyond rggml.h.
 */
#ifndef SYNCSIM_REAL_GGML_INT_H
#define SYNCSIM_REAL_GGML_INT_H

#include <stddef.h>

/* snprintf into buf for paths and commands, whose parts come from the
 * user: returns 0, or -1 when the text does not fit (buf then holds a
 * prefix, never to be used). */
int rggml_strf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
