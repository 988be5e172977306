/*
 * pipe.h -- statements handed from a producer thread to the consumer in
 * batches (traces/pipe.c). The lazy store reader reads and decodes rows on
 * one while its consumer checks; import parses text on one while the
 * calling thread writes SQLite.
 *
 * The producer fills a batch through the fill callback (stmt_batch_push for
 * each statement), the consumer takes statements one at a time with
 * stmt_pipe_next. Three batches circulate: while the consumer works through
 * one, the producer fills the next. Pointers a statement carries (accesses,
 * attributes, label text) stay valid until the consumer moves past the
 * batch. Errors travel in the batch, at their place in the stream.
 */
#ifndef SYNCSIM_TRACES_PIPE_H
#define SYNCSIM_TRACES_PIPE_H

#include "trace.h"

#define STMT_BATCH 4096

typedef struct stmt_batch {
    trace_stmt *stmts;          /* STMT_BATCH of them */
    uint64_t *label_at;         /* offset of each one's label text, UINT64_MAX: none */
    uint32_t n, pos;
    trace_access *acc;
    uint64_t n_acc, cap_acc;
    trace_attr *attr;
    uint64_t n_attr, cap_attr;
    char *text;                 /* label texts, NUL-terminated */
    uint64_t n_text, cap_text;
    int status;                 /* after the last statement: 1 more, 0 end, -1 err */
    trace_error err;
} stmt_batch;

/* Appends s (its accesses and attributes copied) and, when label is not
 * NULL, its label text (len < 4 GiB bytes). The caller checks
 * b->n < STMT_BATCH.
 * Returns 0, or -1 when out of memory. */
int stmt_batch_push(stmt_batch *b, const trace_stmt *s, const char *label, size_t len);

/* Fills b, empty on entry, with up to STMT_BATCH statements; on the
 * producer thread. Returns 1 when more may follow, 0 at the end, -1 on an
 * error (b->err filled). */
typedef int (*stmt_pipe_fill)(void *ctx, stmt_batch *b);

typedef struct stmt_pipe stmt_pipe;

/* Starts the producer thread. With hold, the producer stops after each
 * batch until the consumer calls stmt_pipe_resume: in between, the consumer
 * may read what the producer writes (the declarations of a text reader's
 * trace). Returns NULL when out of memory or when no thread could be
 * started: the caller then reads on its own thread. */
stmt_pipe *stmt_pipe_start(stmt_pipe_fill fill, void *ctx, bool hold);

/* The next statement: 1 (with *label and *len its label text, NULL and 0
 * when none was pushed; *fresh true when it opens a batch, which with hold
 * means that the producer is waiting for stmt_pipe_resume), 0 at the end,
 * -1 on the producer's error (err filled). fresh and label may be NULL. */
int stmt_pipe_next(stmt_pipe *pp, trace_stmt *s, const char **label, size_t *len, bool *fresh,
                   trace_error *err);

/* Lets a held producer fill its next batch. */
void stmt_pipe_resume(stmt_pipe *pp);

/* Stops and joins the producer, frees the pipe. NULL is fine. */
void stmt_pipe_stop(stmt_pipe *pp);

#endif
