/*
 * store_int.h -- what the store's files (store.c, store_read.c,
 * recorder.c) share and nobody else sees. The schema and its invariants are
 * described at the top of store.c.
 */
#ifndef SYNCSIM_STORE_INT_H
#define SYNCSIM_STORE_INT_H

#include "trace.h"

#include <sqlite3.h>

/* statements.id = run << STORE_SEQ_BITS | seq. */
#define STORE_SEQ_BITS 40
#define STORE_SEQ_MASK ((UINT64_C(1) << STORE_SEQ_BITS) - 1)
#define STORE_APPLICATION "syncsim-trace"
#define STORE_APPLICATION_ID 0x53594e43 /* "SYNC", PRAGMA application_id */

/* Optional fields announced by the body's header varint. */
#define STORE_BODY_BY 0x1u
#define STORE_BODY_COUNT 0x2u
#define STORE_BODY_ARG 0x4u
#define STORE_BODY_LINE 0x8u
#define STORE_BODY_LARGS 0x10u  /* body_version 2 */
/* header >> STORE_BODY_SHIFT(v) is n_access */
#define STORE_BODY_SHIFT(version) ((version) >= 2 ? 5 : 4)
/* Runs of schema 3 keep their statements in blocks (stmt_blocks), each
 * statement's body laid out as in body_version 2. */
#define STORE_BODY_VERSION 3
#define STORE_BODY_BLOCKS 3
/* arg of a signal/await: a value semaphore's (count holds its value). */
#define STORE_ARG_SEM 1u

/* The result tables of schema 2 (store_findings.c), also made by the
 * migration of a version-1 database. */
#define STORE_RESULTS_SQL                                                                    \
    "CREATE TABLE checks(run INTEGER, id INTEGER, version TEXT, created INTEGER,"           \
    " status TEXT NOT NULL, statements INTEGER, findings INTEGER, stored INTEGER,"          \
    " PRIMARY KEY(run, id)) WITHOUT ROWID;"                                                 \
    "CREATE TABLE findings(run INTEGER, idx INTEGER, check_id INTEGER, kind TEXT NOT NULL,"  \
    " type TEXT, first_seq INTEGER, first_queue TEXT, first_label TEXT, first_line INTEGER," \
    " second_seq INTEGER, second_queue TEXT, second_label TEXT, second_line INTEGER,"       \
    " buffer TEXT, root TEXT, lo INTEGER, hi INTEGER, object TEXT, generation INTEGER,"     \
    " text TEXT, fix TEXT, PRIMARY KEY(run, idx)) WITHOUT ROWID;"                           \
    "CREATE TABLE finding_parts(run INTEGER, finding INTEGER, pos INTEGER, role TEXT NOT NULL," \
    " queue TEXT, seq INTEGER, line INTEGER, text TEXT, kind TEXT, count INTEGER,"          \
    " extra INTEGER, PRIMARY KEY(run, finding, pos)) WITHOUT ROWID;"

/* Access flag byte of the statement body (see store.c). */
#define STORE_ACC_MODE 0x03u
#define STORE_ACC_FORM_SHIFT 2
#define STORE_ACC_FORM 0x0cu
#define STORE_ACC_LO 0x10u  /* lo follows (else 0) */
#define STORE_ACC_LEN 0x20u /* hi - lo follows (else hi = buffer size) */

struct trace_store {
    sqlite3 *db;
    char *path;
    int schema;             /* the schema version of the file (1 to 3) */
    bool readonly;          /* query_only: a reader */
    bool can_write;         /* results (findings, checks) can be stored */
    bool has_stmts;         /* the stmts table is made on this connection */
};

/* Maps a SQLite result code to a trace status. */
trace_status store_status_of(int rc);
/* Fills err with "DB: table T: what: sqlite message" and the status of rc;
 * returns -1. table may be NULL. */
int store_fail(trace_store *st, int rc, const char *table, const char *what, trace_error *err);
/* Runs sql (no results); returns 0 or -1 with err filled. */
int store_exec(trace_store *st, const char *sql, const char *table, trace_error *err);
/* The body layout of a run's statements (runs.body_version; 1 in a
 * version-1 database). */
int store_body_version(trace_store *st, int64_t run);
/* Resolves run 0 to the latest run and checks that run exists: returns the
 * run id or -1 with err (ENORUN) filled. */
int64_t store_resolve_run(trace_store *st, int64_t run, trace_error *err);

/* LEB128 varints, as in the statement body. */
size_t store_varint_put(uint8_t *p, uint64_t v);
/* Reads a varint from [*p, end); returns 0, or -1 when it runs past end or
 * past 64 bits. */
int store_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v);

/*
 * The writer: inserts one run's declarations and statements through
 * prepared statements, inside a transaction the caller opens. It remembers
 * how much of a trace's declarations it already wrote, so that calling
 * store_writer_decls() again writes only what is new.
 */
typedef struct store_writer {
    trace_store *st;
    int64_t run;
    sqlite3_stmt *ins_stmt, *ins_str, *ins_queue, *ins_buffer, *ins_expect, *ins_expect_kv,
        *del_meta, *ins_meta, *upd_run;
    uint32_t n_queues, n_buffers, n_expects;         /* written so far */
    /* The run's strings table is written on demand: db holds what is in it
     * (ids are the table's), str_map a source string id's db id and
     * tpl_map its label template's (STORE_TPL_ARGS: with numbers); both
     * UINT32_MAX when not known yet. */
    trace *db;
    uint32_t n_db_written;
    uint32_t *str_map, *tpl_map;
    /* A label with numbers: where its numbers are in lpool (the count,
     * then the numbers), UINT64_MAX until first written. */
    uint64_t *largs_map;
    uint64_t *lpool;
    size_t n_lpool, cap_lpool;
    uint32_t cap_map;
    /* The source trace's strings as of the last store_writer_decls (their
     * bytes never move: traces keep them in arenas), so that the recorder's
     * writer thread reads no array that producers may grow meanwhile. */
    const char **src;
    uint32_t *src_len;
    uint32_t n_src, cap_src;
    char *tpl_buf;
    size_t cap_tpl;
    uint64_t n_stmts;                                 /* written so far */
    uint64_t *sizes;                                  /* buffer sizes, for the body encoding */
    uint32_t cap_sizes;
    uint8_t *body;
    size_t cap_body;
    /* Statements wait here until STORE_BLOCK_STMTS of them go in as one
     * row of stmt_blocks (store.c: store_writer_flush); their bodies are in
     * pend_body, the block is encoded in blk. */
    sqlite3_stmt *ins_time;
    struct store_pending *pend;
    uint8_t *blk;
    size_t cap_blk;
    uint32_t n_pend;
    uint8_t *pend_body;
    size_t n_pend_body, cap_pend_body;
} store_writer;

/* A row of stmt_blocks (store.c: the block layout) holds at most
 * STORE_BLOCK_STMTS statements and closes once its bodies reach
 * STORE_BLOCK_BYTES: a row per statement cost ~190 ns to read and ~700 ns
 * to write, most of the time of `check` and of every import. A block
 * larger than a page (8 KiB) spills into overflow pages, which SQLite
 * fills whole; one smaller would leave the rest of its page empty. */
#define STORE_BLOCK_STMTS 1024
#define STORE_BLOCK_BYTES 32768
/* A block's times mode (its first varint) and a statement's head bits
 * (store.c: the block layout). */
#define STORE_TIMES_NONE 0u     /* no statement of the block has times */
#define STORE_TIMES_ALL 1u      /* every one has t and dur */
#define STORE_TIMES_EACH 2u     /* each says in its head */
#define STORE_STMT_KIND 0x0fu
#define STORE_STMT_LABEL 0x10u
#define STORE_STMT_OBJECT 0x20u
#define STORE_STMT_BODY 0x40u
#define STORE_STMT_T 0x80u
#define STORE_STMT_DUR 0x100u

int store_writer_init(store_writer *w, trace_store *st, int64_t run, trace_error *err);
/* Writes the statements that store_writer_stmt queued. store_writer_time and
 * store_writer_run_row flush first, so a run row never counts a statement
 * that is not in the table; call it before anything else reads statements
 * through this connection. Returns 0 or -1. */
int store_writer_flush(store_writer *w, trace_error *err);
void store_writer_fini(store_writer *w);
/* Writes t's queues, buffers and expectations not written yet (and takes
 * note of its new strings: statements may refer to those only after). */
int store_writer_decls(store_writer *w, const trace *t, trace_error *err);
/* Replaces the run's metadata with t's. */
int store_writer_meta(store_writer *w, const trace *t, trace_error *err);
/* Label templates (store_label.c): a label's decimal numbers go into the
 * statement body as varints and its string holds STORE_TPL_MARK where each
 * was, so that labels that differ only by indices ("L17.qkv.k40213") share
 * one string. A run of digits is a number when it has at most 18 digits and
 * no leading zero; a label holding STORE_TPL_MARK itself is kept whole. */
#define STORE_TPL_MARK '\x01'
#define STORE_TPL_ARGS 0x80000000u  /* tpl_map: the template takes numbers */
#define STORE_MAX_LARGS 64
/* Splits label (len bytes) into its template (written to *tpl, *tpl_len; a
 * malloc'd buffer of *cap bytes, grown as needed) and numbers. Returns how
 * many numbers (0: the label is kept whole), or -1 when out of memory. */
int store_label_split(const char *label, size_t len, char **tpl, size_t *cap, size_t *tpl_len,
                      uint64_t *args, uint32_t max_args);
/* Formats a template and its numbers back into the label (NUL-terminated, in
 * *buf of *cap bytes, grown as needed). Returns its length, or -1 when the
 * numbers do not match the marks or memory runs out. */
int64_t store_label_join(const char *tpl, size_t tpl_len, const uint64_t *args, uint32_t n_args,
                         char **buf, size_t *cap);

/* Inserts statement s with sequence number seq (s->seq is ignored); t is
 * the trace its string ids belong to. A TRACE_LABEL_LAZY label is given as
 * label_text (label_len bytes). */
int store_writer_stmt(store_writer *w, const trace *t, uint64_t seq, const trace_stmt *s,
                      const char *label_text, size_t label_len, trace_error *err);
/* Updates the times of a statement written before: in its pending block, or
 * as a row of stmt_times once the block is written. */
int store_writer_time(store_writer *w, uint64_t seq, int64_t t, int64_t dur, trace_error *err);
/* Stores the run's counts (and status when non-NULL). */
int store_writer_run_row(store_writer *w, const char *status, trace_error *err);

/* Makes a reader from trace_store_reader() close its database with it. */
void store_reader_adopt(trace_reader *r);

/* Removes a database file and its -wal, -shm and -journal files (a
 * database this process created and could not fill). */
void store_remove_files(const char *path);

/* Inserts a new run row in status 'recording', inside the caller's
 * transaction, and claims the run for st (store_claim_run) before the
 * caller commits. Its id is above every id the database ever gave (meta
 * 'last_run' keeps the highest a deleted run had), so a deleted run's id is
 * never given again. Returns the id or -1. */
int64_t store_new_run(trace_store *st, const char *name, const char *source, trace_error *err);

/* Run ownership (store_owner.c, whose head comment is the design): a
 * producer's lock on the run it writes. store_claim_run locks run for st
 * (0, or -1 with err); store_release_runs gives back every run st claimed
 * (trace_store_close does); store_run_live says whether another process,
 * or another store of this one, holds run's lock now. */
int store_claim_run(trace_store *st, int64_t run, trace_error *err);
void store_release_runs(trace_store *st);
bool store_run_live(trace_store *st, int64_t run);

/* Graph rows, for the recorder's writer (inside its transaction). */
int store_put_graph_node(trace_store *st, int64_t run, const trace_graph_node *n, trace_error *err);
int store_put_graph_edge(trace_store *st, int64_t run, int64_t idx, const trace_graph_edge *e,
                         trace_error *err);
int store_put_graph_split(trace_store *st, int64_t run, const trace_graph_split *s,
                          trace_error *err);

#endif
