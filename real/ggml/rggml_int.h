/*
 * rggml_int.h -- what the files of real/ggml share beyond rggml.h.
 */
#ifndef SYNCSIM_REAL_GGML_INT_H
#define SYNCSIM_REAL_GGML_INT_H

#include <stdbool.h>
#include <stddef.h>

/* snprintf into buf for paths and commands, whose parts come from the
 * user: returns 0, or -1 when the text does not fit (buf then holds a
 * prefix, never to be used). */
int rggml_strf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Runs argv[0] (found on PATH) with standard output and error into log
 * (appended, each command after a line "$ ARGV", or truncated) and waits
 * for it. Returns its wait status (sys/wait.h), or -1 when it could not
 * start. */
int rggml_spawn(char *const argv[], const char *log, bool append);
/* The line of a log that says why a command failed: the first after the
 * last "$ ARGV" line that says error (a compiler's, ggml's GGML_ASSERT or
 * GGML_ABORT), else its last non-empty line; "" without one. */
void rggml_log_line(const char *log, char *out, size_t cap);

#endif
