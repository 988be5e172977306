/*
 * store.c -- the SQLite trace store: schema, opening and validation, runs,
 * the writer used by import and by the recorder. The streaming reader is in
 * store_read.c, the split graph and findings in store_graph.c, the recorder
 * in recorder.c. docs/trace-schema.md is the user's version of this comment.
 *
 * Schema, version 3
 * -----------------
 * One database holds any number of runs. Every table but `meta`, `kinds`
 * and `runs` is keyed by run first.
 *
 *   meta(key, value)           'application' = 'syncsim-trace' marks the file
 *                              as ours; 'schema_version' = '3'. Also
 *                              PRAGMA application_id = 0x53594e43 ("SYNC")
 *                              and user_version = 3 for file(1) and friends.
 *                              'last_run': the highest id a deleted run had
 *                              (absent until a run is deleted): a new run's
 *                              id is above it and above every run's, so an
 *                              id is never given twice.
 *   kinds(id, word)            statement kind numbers -> verbs (op, copy, ...)
 *   runs(id, name, source, status, created, n_stmts, n_queues, n_buffers,
 *        body_version)         status is 'recording' until the producer
 *                              closed the run, then 'complete'; while it
 *                              writes, the producer holds the run's lock
 *                              (store_owner.c), which a run whose producer
 *                              died has lost. Counts are
 *                              updated in the same transaction as the rows
 *                              they count, so a run killed mid-way reports
 *                              exactly what it holds. body_version: where
 *                              its statements are and how their bodies are
 *                              laid out (1 or 2: rows of `statements`; 3:
 *                              stmt_blocks, bodies as in 2; below).
 *   run_meta(run, key, value, pos)  run-level metadata (text), pos = order
 *   strings(run, id, text)     the run's string table. Ids are dense from 0,
 *                              texts unique in a run: reading them back in id
 *                              order through trace_intern() reproduces the
 *                              same ids, so no other table needs translating.
 *   queues(run, idx, name, kind, device)         name, device: string ids;
 *                                                kind 'host' | 'stream'
 *   buffers(run, idx, name, size, parent, offset, loc, device, pinned)
 *                              parent NULL for a root, else a smaller idx
 *                              (declared before its views); loc 'host' |
 *                              'device' | NULL
 *   expectations(run, idx, kind, line), expectation_kv(run, expect, pos, key, value)
 *   statements(id, queue, kind, label, object, t, dur, body)   runs of
 *                              body_version 1 and 2, a row per statement
 *   stmt_blocks(id, n, t_lo, t_hi, data), stmt_times(id, t, dur)
 *                              runs of body_version 3: see below
 *   graph_nodes, graph_edges, graph_splits   the split graph (plain text columns)
 *   checks(run, id, version, created, status, statements, findings, stored)
 *                              each time `check` looked at the run: the
 *                              syncsim version, whether the run was complete
 *                              then, how many statements it read, the
 *                              findings it found and how many of them are
 *                              stored. A run with no row was never checked.
 *   findings(run, idx, check, kind, ...)      the latest check's findings,
 *   finding_parts(run, finding, pos, ...)     typed (store_findings.c)
 *
 * Statements are the bulk (millions of rows), so their table is shaped for
 * size and speed: a rowid table whose rowid is run << 40 | seq, so that a
 * run's statements are one contiguous, append-only key range (inserts go to
 * the rightmost leaf, pages end up full, no secondary index). Each SQLite
 * column costs the reader a call per row, so only the fields people query
 * by hand are columns, NULL where absent (a NULL costs one header byte):
 *
 *   statements(id, queue, kind, label, object, t, dur, body)
 *     queue   queue index            kind   kinds.id (trace_kind)
 *     label   string id              object string id; queue index for
 *     t, dur  nanoseconds                   `sync S`; buffer index for
 *                                           alloc/free; NULL for `sync all`
 *
 * Everything else is packed into one blob, NULL when there is nothing:
 *
 *   body   := varint(header) [varint(by)] [varint(count)] [varint(arg)]
 *             [varint(line)] [largs] access{n_access} attr*
 *   header := n_access << 5 | 1 by follows | 2 count follows
 *             | 4 arg follows | 8 line follows | 16 largs follow
 *             (body_version 1: n_access << 4, no largs)
 *             by: queue index; count: barrier count or collective size;
 *             arg: sync scope (1 device, 2 all; absent = a queue) or
 *             collective KIND string id + 1, or 1 on a signal/await of a
 *             value semaphore (count = its value; absent: a flag, as in
 *             every run written before semaphores), or for send/recv
 *             (rank << 32 | peer) + 1 (count: the tag); line: source line
 *   largs  := varint(n) varint{n}: the numbers of a label template (the
 *             label string holds one \x01 where each goes; see
 *             store_label.c)
 *   access := varint(buffer) flags [varint(lo)] [varint(hi - lo)]
 *   flags  := mode (bits 0-1: 1 r, 2 w, 3 rw) | form << 2 (0 whole, 1 range,
 *             2 from) | 0x10 when lo follows (else lo = 0) | 0x20 when
 *             hi - lo follows (else hi = the buffer's size)
 *   attr   := varint(key string id) varint(value string id)   (to the end)
 *
 * varint is LEB128: 7 bits a byte, least significant first, high bit set on
 * every byte but the last. A whole-buffer access costs 3 bytes.
 *
 * Blocks (schema 3, body_version 3). A row per statement cost ~190 ns to
 * read back and ~700 ns to write, the most of `check` and of every import,
 * so a run's statements go in blocks of consecutive seqs instead:
 *
 *   stmt_blocks(id, n, t_lo, t_hi, data)
 *     id      run << 40 | the seq of the block's first statement
 *     n       statements in the block (at most STORE_BLOCK_STMTS; a block
 *             closes once its bodies reach STORE_BLOCK_BYTES, and at every
 *             commit of the recorder)
 *     t_lo, t_hi  earliest start and latest end of the block's times
 *   data   := varint(times) stmt{n}
 *   times  := 0 no statement has t or dur, 1 all have both, 2 each says
 *   stmt   := varint(head) varint(queue) [varint(label)] [varint(object)]
 *             [varint(zigzag(t - the previous t of the block, 0 first))]
 *             [varint(zigzag(dur))] [varint(len) body{len}]
 *   head   := kind | 0x10 label | 0x20 object | 0x40 body
 *             | 0x80 t | 0x100 dur (the last two only when times = 2)
 *
 * with label, object and body exactly as the columns above. zigzag maps
 * 0, -1, 1, -2 ... to 0, 1, 2, 3 ... . stmt_times(id, t, dur) holds the
 * times a recorder learnt after the statement's block was written; a
 * reader takes them over the block's.
 *
 * Invariants the reader checks (a violation is ECORRUPT, never a crash):
 * every index and string id a row holds is below the run's counts, kinds
 * and modes are in range, every access lies inside its buffer, the body
 * decodes exactly to its end.
 *
 * Writing: WAL mode, synchronous=NORMAL, inserts through prepared
 * statements in transactions (the recorder: one per batch; import: one for
 * the whole run, so that a failed import leaves nothing behind).
 * Statements go in blocks (the writer queues them and flushes before it
 * updates a run row, so before every commit).
 * The views (statements_v, syncs_v, queues_v, buffers_v, strings_v,
 * expectations_v) resolve ids to names for people who query by hand (see
 * docs/trace-schema.md).
 */
#include "store_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bytes 0x00..0x7f: instr(HEADER_BYTES, one byte) - 1 is that byte's value,
 * which lets SQL read the body's first byte (the header, when below 0x80). */
#define HEADER_BYTES "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D7E7F"

/* The statement views, made again when a version-1 database is migrated.
 * A label template shows its numbers as '#' (L#.qkv.k#: a family of
 * labels); `syncsim export` gives labels whole. */
#define STATEMENTS_VIEWS_SQL \
    "CREATE VIEW statements_v AS SELECT s.id >> 40 AS run, s.id & 1099511627775 AS seq," \
    " qn.text AS queue, k.word AS kind, replace(l.text, char(1), '#') AS label," \
    " CASE WHEN s.kind IN (9, 10) THEN (SELECT bs.text FROM buffers b JOIN strings bs" \
    "   ON bs.run = b.run AND bs.id = b.name WHERE b.run = s.id >> 40 AND b.idx = s.object)" \
    "  WHEN s.kind = 4 AND s.object IS NULL THEN 'all'" \
    /* sync S (no ARG flag in the body's first byte): object is a queue index */ \
    "  WHEN s.kind = 4 AND ((coalesce(instr(X'" HEADER_BYTES "', substr(s.body, 1, 1)), 1) - 1) & 4) = 0" \
    "   THEN (SELECT os.text FROM queues oq JOIN strings os ON os.run = oq.run" \
    "   AND os.id = oq.name WHERE oq.run = s.id >> 40 AND oq.idx = s.object)" \
    "  ELSE (SELECT o.text FROM strings o WHERE o.run = s.id >> 40 AND o.id = s.object) END" \
    "  AS object," \
    " s.t, s.dur, length(s.body) AS body_bytes" \
    " FROM statements s JOIN kinds k ON k.id = s.kind" \
    " LEFT JOIN queues q ON q.run = s.id >> 40 AND q.idx = s.queue" \
    " LEFT JOIN strings qn ON qn.run = q.run AND qn.id = q.name" \
    " LEFT JOIN strings l ON l.run = s.id >> 40 AND l.id = s.label;" \
    "CREATE VIEW syncs_v AS SELECT * FROM statements_v WHERE kind IN" \
    " ('record', 'wait', 'sync', 'barrier', 'signal', 'await', 'collective');"

/* The tables of schema 3: statements in blocks, and the times that came
 * after their block was written. blocks_v shows the blocks to people. */
#define STMT_BLOCKS_SQL \
    "CREATE TABLE stmt_blocks(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, t_lo INTEGER," \
    " t_hi INTEGER, data BLOB NOT NULL);" \
    "CREATE TABLE stmt_times(id INTEGER PRIMARY KEY, t INTEGER, dur INTEGER);" \
    "CREATE VIEW blocks_v AS SELECT id >> 40 AS run, id & 1099511627775 AS first_seq, n," \
    " t_lo, t_hi, length(data) AS bytes FROM stmt_blocks;"

static const char schema_sql[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
    "CREATE TABLE kinds(id INTEGER PRIMARY KEY, word TEXT NOT NULL);"
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT NOT NULL, source TEXT,"
    " status TEXT NOT NULL, created INTEGER, n_stmts INTEGER NOT NULL DEFAULT 0,"
    " n_queues INTEGER NOT NULL DEFAULT 0, n_buffers INTEGER NOT NULL DEFAULT 0,"
    " body_version INTEGER NOT NULL DEFAULT 3);"
    "CREATE TABLE run_meta(run INTEGER, key TEXT, value TEXT, pos INTEGER,"
    " PRIMARY KEY(run, key)) WITHOUT ROWID;"
    "CREATE TABLE strings(run INTEGER, id INTEGER, text TEXT NOT NULL,"
    " PRIMARY KEY(run, id)) WITHOUT ROWID;"
    "CREATE TABLE queues(run INTEGER, idx INTEGER, name INTEGER NOT NULL, kind TEXT NOT NULL,"
    " device INTEGER, PRIMARY KEY(run, idx)) WITHOUT ROWID;"
    "CREATE TABLE buffers(run INTEGER, idx INTEGER, name INTEGER NOT NULL, size INTEGER NOT NULL,"
    " parent INTEGER, offset INTEGER, loc TEXT, device INTEGER, pinned INTEGER,"
    " PRIMARY KEY(run, idx)) WITHOUT ROWID;"
    "CREATE TABLE expectations(run INTEGER, idx INTEGER, kind TEXT NOT NULL, line INTEGER,"
    " PRIMARY KEY(run, idx)) WITHOUT ROWID;"
    "CREATE TABLE expectation_kv(run INTEGER, expect INTEGER, pos INTEGER, key INTEGER NOT NULL,"
    " value INTEGER NOT NULL, PRIMARY KEY(run, expect, pos)) WITHOUT ROWID;"
    "CREATE TABLE statements(id INTEGER PRIMARY KEY, queue INTEGER, kind INTEGER, label INTEGER,"
    " object INTEGER, t INTEGER, dur INTEGER, body BLOB);"
    STMT_BLOCKS_SQL
    "CREATE TABLE graph_nodes(run INTEGER, id INTEGER, name TEXT, op TEXT, shape TEXT,"
    " backend TEXT, split INTEGER, cause TEXT, copy_slot INTEGER, flags INTEGER,"
    " PRIMARY KEY(run, id)) WITHOUT ROWID;"
    "CREATE TABLE graph_edges(run INTEGER, idx INTEGER, src INTEGER, dst INTEGER, kind TEXT,"
    " PRIMARY KEY(run, idx)) WITHOUT ROWID;"
    "CREATE TABLE graph_splits(run INTEGER, id INTEGER, backend TEXT, first_node INTEGER,"
    " n_nodes INTEGER, inputs TEXT, PRIMARY KEY(run, id)) WITHOUT ROWID;"
    STORE_RESULTS_SQL
    /* Views for people: names instead of ids. */
    "CREATE VIEW strings_v AS SELECT run, id, text FROM strings;"
    "CREATE VIEW queues_v AS SELECT q.run, q.idx, n.text AS name, q.kind, d.text AS device"
    " FROM queues q JOIN strings n ON n.run = q.run AND n.id = q.name"
    " LEFT JOIN strings d ON d.run = q.run AND d.id = q.device;"
    "CREATE VIEW buffers_v AS SELECT b.run, b.idx, n.text AS name, b.size, p.text AS parent,"
    " b.offset, b.loc, d.text AS device, b.pinned FROM buffers b"
    " JOIN strings n ON n.run = b.run AND n.id = b.name"
    " LEFT JOIN buffers pb ON pb.run = b.run AND pb.idx = b.parent"
    " LEFT JOIN strings p ON p.run = b.run AND p.id = pb.name"
    " LEFT JOIN strings d ON d.run = b.run AND d.id = b.device;"
    "CREATE VIEW expectations_v AS SELECT e.run, e.idx, e.kind, e.line,"
    " (SELECT group_concat(k.text || '=' || v.text, ' ') FROM (SELECT * FROM expectation_kv x"
    "   WHERE x.run = e.run AND x.expect = e.idx ORDER BY x.pos) kv"
    "  JOIN strings k ON k.run = kv.run AND k.id = kv.key"
    "  JOIN strings v ON v.run = kv.run AND v.id = kv.value) AS args"
    " FROM expectations e;"
    STATEMENTS_VIEWS_SQL;

/* Tables the code relies on: their absence in a marked database is corruption. */
static const char *const required_tables[] = {
    "meta", "kinds", "runs", "run_meta", "strings", "queues", "buffers", "expectations",
    "expectation_kv", "statements", "graph_nodes", "graph_edges", "graph_splits", "findings",
    "finding_parts", "checks", "stmt_blocks", "stmt_times",
};
/* ... of which a version-1 database lacks the last four, a version-2 one
 * the last two (it gains them when it is first opened to be written:
 * migrate_v1, migrate_v2). */
#define N_REQUIRED_V1 14
#define N_REQUIRED_V2 16

/* ------------------------------------------------------------------ */
/* Errors.                                                             */

trace_status store_status_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
        return TRACE_ECORRUPT;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
        return TRACE_EIO;
    case SQLITE_NOMEM:
        return TRACE_ENOMEM;
    default:
        return TRACE_EDB;
    }
}

int store_fail(trace_store *st, int rc, const char *table, const char *what, trace_error *err)
{
    const char *msg = st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
    if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB)
        msg = "database disk image is malformed";
    /* PATH: [table T: ][WHAT: ]MESSAGE */
    trace_error_set(err, store_status_of(rc), "%s: %s%s%s%s%s%s", st ? st->path : "database",
                    table ? "table " : "", table ? table : "", table ? ": " : "",
                    what ? what : "", what ? ": " : "", msg);
    if (err && (rc & 0xff) == SQLITE_FULL)
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (no space left where it is written)");
    if (err && (rc & 0xff) == SQLITE_READONLY)
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (the file, or the folder it is in, cannot be written here)");
    return -1;
}

int store_exec(trace_store *st, const char *sql, const char *table, trace_error *err)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, table, NULL, err);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Varints.                                                            */

size_t store_varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

int store_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t x = 0;
    for (unsigned shift = 0; q < end && shift < 64; shift += 7) {
        uint8_t b = *q++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* Opening.                                                            */

/* Checks the file before SQLite sees it: not ours at all, or truncated.
 * Returns 0, 1 when the file is missing or empty, or -1 with err. */
static int check_file(const char *path, trace_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return 1;
        trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(sb.st_mode)) {
        trace_error_set(err, TRACE_EIO, "%s: is a directory, expected a trace database", path);
        return -1;
    }
    if (sb.st_size == 0)
        return 1;
    unsigned char head[100];
    FILE *f = fopen(path, "rb");
    if (!f) {
        trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n < 16 || memcmp(head, "SQLite format 3", 16) != 0) {
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: not a SQLite database (expected a syncsim trace database)", path);
        return -1;
    }
    if (n < sizeof head) {
        trace_error_set(err, TRACE_ECORRUPT, "%s: truncated database (%zu bytes)", path, n);
        return -1;
    }
    /* The header's page count is valid when the change counter (24) equals
     * the version-valid-for number (92). A live WAL may hold the newest
     * pages (a checkpoint interrupted mid-way), so only check without one. */
    uint32_t page_size = (uint32_t)head[16] << 8 | head[17];
    if (page_size == 1)
        page_size = 65536;
    uint32_t pages = (uint32_t)head[28] << 24 | (uint32_t)head[29] << 16 |
                     (uint32_t)head[30] << 8 | head[31];
    char wal[4096];
    struct stat wb;
    snprintf(wal, sizeof wal, "%s-wal", path);
    bool live_wal = stat(wal, &wb) == 0 && wb.st_size > 0;
    if (!live_wal && memcmp(head + 24, head + 92, 4) == 0 && page_size >= 512 &&
        (uint64_t)sb.st_size < (uint64_t)pages * page_size) {
        trace_error_set(err, TRACE_ECORRUPT,
                        "%s: truncated database (%lld bytes, its header says %llu)", path,
                        (long long)sb.st_size, (unsigned long long)pages * page_size);
        return -1;
    }
    return 0;
}

static int create_schema(trace_store *st, trace_error *err)
{
    char sql[256];
    if (store_exec(st, "PRAGMA page_size=8192; PRAGMA journal_mode=WAL;", NULL, err) != 0 ||
        store_exec(st, "BEGIN IMMEDIATE", NULL, err) != 0)
        return -1;
    /* Another process may have created it between our check and the lock. */
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_master", -1, &q, NULL);
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) > 0) {
        sqlite3_finalize(q);
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return 1;
    }
    sqlite3_finalize(q);
    if (store_exec(st, schema_sql, NULL, err) != 0)
        goto fail;
    for (int k = 0; k < TRACE_KIND_COUNT; k++) {
        snprintf(sql, sizeof sql, "INSERT INTO kinds VALUES(%d, '%s')", k, trace_kind_str(k));
        if (store_exec(st, sql, "kinds", err) != 0)
            goto fail;
    }
    snprintf(sql, sizeof sql,
             "INSERT INTO meta VALUES('application', '" STORE_APPLICATION "'),"
             "('schema_version', '%d'), ('created_by', 'syncsim " SYNCSIM_VERSION "');"
             "PRAGMA application_id=%d; PRAGMA user_version=%d;",
             TRACE_SCHEMA_VERSION, STORE_APPLICATION_ID, TRACE_SCHEMA_VERSION);
    if (store_exec(st, sql, "meta", err) != 0 || store_exec(st, "COMMIT", NULL, err) != 0)
        goto fail;
    return 0;
fail:
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* Checks the marker, the version and the tables. Returns 0, 1 when the
 * database holds no table at all, or -1 with err. */
static int check_schema(trace_store *st, trace_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "SELECT key, value FROM meta", -1, &q, NULL);
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_NOTADB) {
            return trace_error_set(err, TRACE_ENOTTRACE,
                                   "%s: not a SQLite database (expected a syncsim trace database)",
                                   st->path), -1;
        }
        if ((rc & 0xff) != SQLITE_ERROR)
            return store_fail(st, rc, "meta", NULL, err);
        /* No meta table: empty, or somebody else's database. */
        sqlite3_stmt *c = NULL;
        int n = -1;
        rc = sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_master", -1, &c, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(c)) == SQLITE_ROW)
            n = sqlite3_column_int(c, 0);
        sqlite3_finalize(c);
        if (n < 0)
            return store_fail(st, rc, "sqlite_master", NULL, err);
        if (n == 0)
            return 1;
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: a SQLite database but not a syncsim trace database (no table meta)",
                        st->path);
        return -1;
    }
    bool marked = false;
    long version = -1;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(q, 0);
        const char *v = (const char *)sqlite3_column_text(q, 1);
        if (!k || !v)
            continue;
        if (strcmp(k, "application") == 0)
            marked = strcmp(v, STORE_APPLICATION) == 0;
        else if (strcmp(k, "schema_version") == 0) {
            char *end;
            version = strtol(v, &end, 10);
            if (*end || version < 1)
                version = 0;
        }
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, "meta", NULL, err);
    if (!marked) {
        trace_error_set(err, TRACE_ENOTTRACE,
                        "%s: table meta: no application marker '" STORE_APPLICATION
                        "', not a syncsim trace database",
                        st->path);
        return -1;
    }
    if (version < 1 || version > TRACE_SCHEMA_VERSION) {
        trace_error_set(err, version > TRACE_SCHEMA_VERSION ? TRACE_EVERSION : TRACE_ECORRUPT,
                        "%s: table meta: schema version %ld, this build reads versions 1 to %d",
                        st->path, version, TRACE_SCHEMA_VERSION);
        return -1;
    }
    st->schema = (int)version;
    rc = sqlite3_prepare_v2(st->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                            -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "sqlite_master", NULL, err);
    size_t n_required = st->schema == 1   ? N_REQUIRED_V1
                        : st->schema == 2 ? N_REQUIRED_V2
                                          : sizeof required_tables / sizeof required_tables[0];
    for (size_t i = 0; i < n_required; i++) {
        sqlite3_bind_text(q, 1, required_tables[i], -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
        sqlite3_reset(q);
        if (rc != SQLITE_ROW) {
            sqlite3_finalize(q);
            if (rc != SQLITE_DONE)
                return store_fail(st, rc, "sqlite_master", NULL, err);
            trace_error_set(err, TRACE_ECORRUPT, "%s: table %s is missing", st->path,
                            required_tables[i]);
            return -1;
        }
    }
    sqlite3_finalize(q);
    return 0;
}

/* Runs sql in one transaction; the database is then of version `to`. */
static int migrate(trace_store *st, const char *sql, int to, trace_error *err)
{
    if (store_exec(st, "BEGIN IMMEDIATE", NULL, err) != 0)
        return -1;
    if (store_exec(st, sql, "meta", err) != 0 || store_exec(st, "COMMIT", NULL, err) != 0) {
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    st->schema = to;
    return 0;
}

/* Brings a version-1 database to version 2 in one transaction: its runs
 * keep their body layout (body_version 1), its findings -- stored as JSON
 * text, which nothing reads any more -- are dropped (`check` remakes them),
 * and the result tables of version 2 are added. */
static int migrate_v1(trace_store *st, trace_error *err)
{
    return migrate(st,
                   "ALTER TABLE runs ADD COLUMN body_version INTEGER NOT NULL DEFAULT 1;"
                   "DROP TABLE findings;" STORE_RESULTS_SQL
                   "DROP VIEW syncs_v; DROP VIEW statements_v;" STATEMENTS_VIEWS_SQL ";"
                   "UPDATE meta SET value = '2' WHERE key = 'schema_version';"
                   "PRAGMA user_version=2;",
                   2, err);
}

/* Brings a version-2 database to version 3: the tables of statement blocks.
 * Its runs keep their rows in `statements` (body_version 1 or 2, which the
 * reader tells apart); new runs go into blocks. */
static int migrate_v2(trace_store *st, trace_error *err)
{
    return migrate(st,
                   STMT_BLOCKS_SQL "UPDATE meta SET value = '3' WHERE key = 'schema_version';"
                                   "PRAGMA user_version=3;",
                   3, err);
}

int store_body_version(trace_store *st, int64_t run)
{
    if (st->schema == 1)
        return 1;
    sqlite3_stmt *q = NULL;
    int v = STORE_BODY_VERSION;
    if (sqlite3_prepare_v2(st->db, "SELECT body_version FROM runs WHERE id = ?1", -1, &q, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_int64(q, 1, run);
        if (sqlite3_step(q) == SQLITE_ROW)
            v = sqlite3_column_int(q, 0);
    }
    sqlite3_finalize(q);
    return v;
}

/* Whether this process may write path and create files beside it (the
 * -wal and -shm files a writing connection needs). */
static bool can_write_beside(const char *path)
{
    if (access(path, W_OK) != 0)
        return false;
    char *dir = strdup(path);
    if (!dir)
        return false;
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    bool ok = access(d, W_OK | X_OK) == 0;
    free(dir);
    return ok;
}

static bool exists_beside(const char *path, const char *suffix)
{
    char p[4096];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return access(p, F_OK) == 0;
}

/* Opens path read-only without creating any file beside it: immutable when
 * no -wal or -shm file says a writer may be live, else read-only through
 * them. Returns SQLite's result code (*db set either way). */
static int open_quietly(const char *path, sqlite3 **db)
{
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
    if (exists_beside(path, "-wal") || exists_beside(path, "-shm"))
        return sqlite3_open_v2(path, db, flags, NULL);
    /* file:PATH?immutable=1, with the characters a URI gives meaning to escaped */
    size_t n = strlen(path);
    char *uri = malloc(3 * n + 32);
    if (!uri) {
        *db = NULL;
        return SQLITE_NOMEM;
    }
    size_t k = (size_t)sprintf(uri, "file:");
    for (size_t i = 0; i < n; i++)
        k += (size_t)(strchr("?#%", path[i]) ? sprintf(uri + k, "%%%02X", (unsigned char)path[i])
                                             : sprintf(uri + k, "%c", path[i]));
    sprintf(uri + k, "?immutable=1");
    int rc = sqlite3_open_v2(uri, db, flags | SQLITE_OPEN_URI, NULL);
    free(uri);
    return rc;
}

/*
 * Before the first connection: SQLite's memory statistics (no one reads
 * them) take a global mutex on every allocation, which the writer and the
 * reader of a pipeline, each on its own connection, then contend for.
 * Turning them off is allowed only before SQLite initialises; later it
 * fails harmlessly.
 */
static void sqlite_setup(void)
{
    static bool done;
    if (!done) {
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
        done = true;
    }
}

/*
 * The sniffing connection. Deciding what a file is asks it for tables more
 * than once (a syncsim database: `meta` and `statements`; a Nsight Systems
 * export: up to four names), and then the store opens it for good; with a
 * connection per question a command opened its database five times
 * (issue 25). So the first question opens one connection, exactly as
 * store_open() would for reading (read-write with nothing written where
 * the file and its directory are writable, else quietly read-only), later
 * questions about the same file reuse it, and store_open() adopts it
 * instead of opening another. It is closed when a question is about
 * another file, and at exit. There is one per process, unlocked: sources
 * are opened on one thread (the recorder's and the pipeline's threads use
 * stores already open).
 */
static struct {
    char *path;
    dev_t dev;
    ino_t ino;
    sqlite3 *db;
    bool writable;          /* opened read-write (can_write_beside) */
} sniffed;

static void sniffed_close(void)
{
    sqlite3_close_v2(sniffed.db);
    free(sniffed.path);
    memset(&sniffed, 0, sizeof sniffed);
}

/* The file at path, as stat() names it. */
static bool file_id(const char *path, dev_t *dev, ino_t *ino)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return false;
    *dev = sb.st_dev;
    *ino = sb.st_ino;
    return true;
}

/* The sniffing connection to path, opened if needed (a file that is not
 * SQLite fails at the first query, not here); NULL when it cannot be. */
static sqlite3 *sniffed_db(const char *path)
{
    dev_t dev;
    ino_t ino;
    if (!file_id(path, &dev, &ino))
        return NULL;
    sqlite_setup();
    if (sniffed.db && strcmp(sniffed.path, path) == 0 && sniffed.dev == dev && sniffed.ino == ino)
        return sniffed.db;
    static bool registered;
    if (!registered && atexit(sniffed_close) == 0)
        registered = true;
    sniffed_close();
    bool writable = can_write_beside(path);
    sqlite3 *db = NULL;
    int rc = writable ? sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                                        NULL)
                      : open_quietly(path, &db);
    if (rc != SQLITE_OK || !(sniffed.path = strdup(path))) {
        sqlite3_close_v2(db);
        return NULL;
    }
    sniffed.db = db;
    sniffed.dev = dev;
    sniffed.ino = ino;
    sniffed.writable = writable;
    return db;
}

/* The sniffing connection to path, handed over to the caller, when it was
 * opened the way `writable` says; else NULL (the caller opens its own). */
static sqlite3 *sniffed_take(const char *path, bool writable)
{
    dev_t dev;
    ino_t ino;
    if (!sniffed.db || strcmp(sniffed.path, path) != 0 || !file_id(path, &dev, &ino) ||
        dev != sniffed.dev || ino != sniffed.ino || writable != sniffed.writable)
        return NULL;
    sqlite3 *db = sniffed.db;
    sniffed.db = NULL;
    sniffed_close();
    return db;
}

/*
 * How a connection is opened (mode):
 *   WRITE    read-write, created when missing.
 *   RESULTS  read-write when this process can write the file and its
 *            directory (to store findings), else as READ.
 *   READ     where the file and its directory are writable: read-write with
 *            query_only, so that the last connection to close removes the
 *            -wal and -shm files (a read-only connection cannot). Elsewhere
 *            (a read-only file, directory or mount): with no -wal or -shm
 *            beside it nothing is writing it, so it is opened immutable, which
 *            needs and creates no file at all; with them, a writer may be
 *            live, so it is opened read-only through them.
 */
static trace_store *store_open(const char *path, trace_store_mode mode, trace_error *err)
{
    sqlite_setup();
    trace_store *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    bool create = mode == TRACE_STORE_WRITE;
    bool writable = create || can_write_beside(path);
    if (mode == TRACE_STORE_RESULTS && !writable)
        mode = TRACE_STORE_READ;
    int rc;
    /* the connection that found out what the file is, when it fits */
    if ((st->db = sniffed_take(path, writable))) {
        st->readonly = mode == TRACE_STORE_READ;
        st->can_write = mode != TRACE_STORE_READ;
        goto opened;
    }
    int missing = check_file(path, err);
    if (missing < 0)
        goto fail;
    if (missing && !create) {
        if (access(path, F_OK) != 0) {
            trace_error_set(err, TRACE_EIO, "%s: no such file", path);
            goto fail;
        }
        trace_error_set(err, TRACE_ENOTTRACE, "%s: empty file, not a syncsim trace database", path);
        goto fail;
    }
    st->readonly = mode == TRACE_STORE_READ;
    st->can_write = mode != TRACE_STORE_READ;
    if (writable || mode != TRACE_STORE_READ) {
        int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
        rc = sqlite3_open_v2(path, &st->db, flags, NULL);
    } else {
        rc = open_quietly(path, &st->db);
    }
    if (rc != SQLITE_OK) {
        store_fail(st, rc, NULL, "cannot open", err);
        goto fail;
    }
opened:
    sqlite3_extended_result_codes(st->db, 0);
    sqlite3_busy_timeout(st->db, 10000);
    int s = check_schema(st, err);
    if (s < 0) {
        if (!writable && mode == TRACE_STORE_READ && (err->status == TRACE_EIO || err->status == TRACE_EDB))
            trace_error_set(err, TRACE_EIO,
                            "%s: cannot be read from here: it is being written, or was left "
                            "open by a process that died (%s-wal is beside it), and this "
                            "process cannot write its directory to share the -shm file; copy "
                            "it somewhere writable",
                            path, path);
        goto fail;
    }
    if (s == 1) {
        if (!create) {
            trace_error_set(err, TRACE_ENOTTRACE, "%s: empty database, not a syncsim trace database",
                            path);
            goto fail;
        }
        s = create_schema(st, err);
        if (s < 0 || (s == 1 && check_schema(st, err) != 0))
            goto fail;
    }
    if ((st->schema == 1 && st->can_write && migrate_v1(st, err) != 0) ||
        (st->schema == 2 && st->can_write && migrate_v2(st, err) != 0))
        goto fail;
    /* Verbs added since the database was made (send, recv): their rows in
     * `kinds`, so that the views show them. */
    for (int k = 0; st->can_write && !st->readonly && k < TRACE_KIND_COUNT; k++) {
        char sql[96];
        snprintf(sql, sizeof sql, "INSERT OR IGNORE INTO kinds VALUES(%d, '%s')", k,
                 trace_kind_str(k));
        if (store_exec(st, sql, "kinds", err) != 0)
            goto fail;
    }
    if (store_exec(st,
                   st->readonly ? "PRAGMA query_only=1; PRAGMA mmap_size=1073741824;"
                                : "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-16384;"
                                  /* a checkpoint syncs the file: every 128 MiB of
                                   * WAL, not every 8 (a recorder commits often) */
                                  " PRAGMA wal_autocheckpoint=16384;",
                   NULL, err) != 0)
        goto fail;
    return st;
fail:
    trace_store_close(st);
    return NULL;
}

int trace_sqlite_has_table(const char *path, const char *table)
{
    sqlite3 *db = sniffed_db(path);
    sqlite3_stmt *q = NULL;
    int found = -1;
    if (db &&
        sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                           -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC);
        int rc = sqlite3_step(q);
        found = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    }
    sqlite3_finalize(q);
    if (found < 0)
        sniffed_close();    /* not readable: ask afresh next time */
    return found;
}

trace_store *trace_store_open_mode(const char *path, trace_store_mode mode, trace_error *err)
{
    return store_open(path, mode, err);
}

trace_store *trace_store_open(const char *path, bool create, trace_error *err)
{
    return store_open(path, create ? TRACE_STORE_WRITE : TRACE_STORE_RESULTS, err);
}

/* For store_read.c: read-only opening. */
trace_store *store_open_readonly(const char *path, trace_error *err);
trace_store *store_open_readonly(const char *path, trace_error *err)
{
    return store_open(path, TRACE_STORE_READ, err);
}

bool trace_store_writable(const trace_store *st)
{
    return st->can_write;
}

void trace_store_close(trace_store *st)
{
    if (!st)
        return;
    if (st->db)
        sqlite3_close_v2(st->db);
    store_release_runs(st);
    free(st->path);
    free(st);
}

struct sqlite3 *trace_store_db(trace_store *st)
{
    return st->db;
}

/* ------------------------------------------------------------------ */
/* Runs.                                                               */

static char *dup_col(sqlite3_stmt *q, int col)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    return strdup(s ? (const char *)s : "");
}

/* The runs whose id satisfies `where` (an SQL condition on id, ?1 bound to
 * arg), in id order. */
static int query_runs(trace_store *st, const char *where, int64_t arg, trace_run_info **out,
                      size_t *n, trace_error *err)
{
    sqlite3_stmt *q = NULL;
    trace_run_info *runs = NULL;
    size_t count = 0, cap = 0;
    *out = NULL;
    *n = 0;
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT id, name, source, status, created, n_stmts, n_queues, n_buffers FROM runs"
             " WHERE %s ORDER BY id",
             where);
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "runs", NULL, err);
    sqlite3_bind_int64(q, 1, arg);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (count == cap) {
            cap = cap ? cap * 2 : 8;
            trace_run_info *nr = realloc(runs, cap * sizeof *nr);
            if (!nr)
                goto nomem;
            runs = nr;
        }
        trace_run_info *ri = &runs[count++];
        memset(ri, 0, sizeof *ri);
        ri->id = sqlite3_column_int64(q, 0);
        ri->name = dup_col(q, 1);
        ri->source = dup_col(q, 2);
        ri->status = dup_col(q, 3);
        ri->created = sqlite3_column_int64(q, 4);
        ri->n_stmts = (uint64_t)sqlite3_column_int64(q, 5);
        ri->n_queues = (uint32_t)sqlite3_column_int64(q, 6);
        ri->n_buffers = (uint32_t)sqlite3_column_int64(q, 7);
        if (!ri->name || !ri->source || !ri->status)
            goto nomem;
        ri->live = strcmp(ri->status, "recording") == 0 && store_run_live(st, ri->id);
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        trace_run_info_free(runs, count);
        return store_fail(st, rc, "runs", NULL, err);
    }
    *out = runs;
    *n = count;
    return 0;
nomem:
    sqlite3_finalize(q);
    trace_run_info_free(runs, count);
    trace_error_set(err, TRACE_ENOMEM, "%s: out of memory listing runs", st->path);
    return -1;
}

int trace_store_runs(trace_store *st, trace_run_info **out, size_t *n, trace_error *err)
{
    return query_runs(st, "1", 0, out, n, err);
}

int trace_store_no_run(trace_store *st, const char *what, trace_error *err)
{
    char ids[160] = "";
    size_t len = 0, shown = 0;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT id FROM runs ORDER BY id", -1, &q, NULL) == SQLITE_OK)
        while (sqlite3_step(q) == SQLITE_ROW && len < sizeof ids) {
            if (shown == 12) {
                snprintf(ids + len, sizeof ids - len, ", ...");
                break;
            }
            len += (size_t)snprintf(ids + len, sizeof ids - len, "%s%lld", shown ? ", " : "",
                                    (long long)sqlite3_column_int64(q, 0));
            shown++;
        }
    sqlite3_finalize(q);
    trace_error_set(err, TRACE_ENORUN, "%s: no run %s (%s%s)", st->path, what,
                    shown ? "its runs: " : "it holds none", ids);
    return -1;
}

int trace_store_run(trace_store *st, int64_t run, trace_run_info **out, trace_error *err)
{
    size_t n = 0;
    if (query_runs(st, "id = ?1", run, out, &n, err) != 0)
        return -1;
    if (n == 1)
        return 0;
    trace_run_info_free(*out, n);
    *out = NULL;
    char what[32];
    snprintf(what, sizeof what, "%lld", (long long)run);
    return trace_store_no_run(st, what, err);
}

int trace_store_rename_run(trace_store *st, int64_t run, const char *name, trace_error *err)
{
    trace_run_info *ri = NULL;
    if (trace_store_run(st, run, &ri, err) != 0)
        return -1;
    trace_run_info_free(ri, 1);
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "UPDATE runs SET name = ?2 WHERE id = ?1", -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, run);
        sqlite3_bind_text(q, 2, name, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, "runs", "renaming a run", err);
}

/* Every table of the database with a `run` column: those the schema lists
 * and any a module added, so that deleting a run leaves nothing of it. */
static int delete_run_rows(trace_store *st, int64_t run, trace_error *err)
{
    sqlite3_stmt *tables = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c"
                                " WHERE m.type = 'table' AND c.name = 'run'",
                                -1, &tables, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(tables)) == SQLITE_ROW) {
        char *sql = sqlite3_mprintf("DELETE FROM \"%w\" WHERE run = ?1",
                                    (const char *)sqlite3_column_text(tables, 0));
        sqlite3_stmt *q = NULL;
        int qrc = sql ? sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) : SQLITE_NOMEM;
        sqlite3_free(sql);
        if (qrc == SQLITE_OK) {
            sqlite3_bind_int64(q, 1, run);
            qrc = sqlite3_step(q);
        }
        sqlite3_finalize(q);
        if (qrc != SQLITE_DONE) {
            sqlite3_finalize(tables);
            return store_fail(st, qrc, NULL, "deleting a run", err);
        }
        rc = SQLITE_OK;
    }
    sqlite3_finalize(tables);
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, NULL, "deleting a run", err);
    /* statements carry their run in the top bits of their id */
    static const char *const by_id[] = { "statements", "stmt_blocks", "stmt_times" };
    sqlite3_stmt *q = NULL;
    for (int i = 0; i < (st->schema >= 3 ? 3 : 1); i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id >= ?1 AND id < ?2", by_id[i]);
        rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(q, 1, run << STORE_SEQ_BITS);
            sqlite3_bind_int64(q, 2, (run + 1) << STORE_SEQ_BITS);
            rc = sqlite3_step(q);
        }
        sqlite3_finalize(q);
        if (rc != SQLITE_DONE)
            return store_fail(st, rc, by_id[i], "deleting a run", err);
    }
    rc = sqlite3_prepare_v2(st->db, "DELETE FROM runs WHERE id = ?1", -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, run);
        rc = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, "runs", "deleting a run", err);
}

/* Raises meta 'last_run' to run (the high-water mark of deleted ids). */
static int keep_last_run(trace_store *st, int64_t run, trace_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "INSERT OR REPLACE INTO meta VALUES('last_run', CAST(max(?1,"
                                " coalesce((SELECT CAST(value AS INTEGER) FROM meta"
                                " WHERE key = 'last_run'), 0)) AS TEXT))",
                                -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, run);
        rc = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, "meta", "deleting a run", err);
}

int trace_store_delete_run(trace_store *st, int64_t run, trace_error *err)
{
    /* looked up inside the transaction: no producer can add rows between */
    if (store_exec(st, "BEGIN IMMEDIATE", NULL, err) != 0)
        return -1;
    trace_run_info *ri = NULL;
    if (trace_store_run(st, run, &ri, err) != 0)
        goto fail;
    bool live = ri->live;
    trace_run_info_free(ri, 1);
    if (live) {
        trace_error_set(err, TRACE_EBUSY,
                        "%s: run %lld is being written: the process recording it is alive and "
                        "holds the run's lock",
                        st->path, (long long)run);
        goto fail;
    }
    if (delete_run_rows(st, run, err) != 0 || keep_last_run(st, run, err) != 0)
        goto fail;
    return store_exec(st, "COMMIT", NULL, err);
fail:
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

void trace_run_info_free(trace_run_info *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(runs[i].name);
        free(runs[i].source);
        free(runs[i].status);
    }
    free(runs);
}

int trace_store_derived(trace_store *st, int64_t run, trace_derived_run **out, size_t *n,
                        trace_error *err)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT run, min(key) FROM run_meta WHERE key IN ('source_run',"
                                " 'replay_of') AND CAST(value AS INTEGER) = ?1 AND run <> ?1"
                                " GROUP BY run ORDER BY run",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "run_meta", NULL, err);
    sqlite3_bind_int64(q, 1, run);
    size_t cap = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            trace_derived_run *p = realloc(*out, cap * sizeof *p);
            if (!p) {
                sqlite3_finalize(q);
                free(*out);
                *out = NULL;
                *n = 0;
                return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path), -1;
            }
            *out = p;
        }
        (*out)[*n].id = sqlite3_column_int64(q, 0);
        snprintf((*out)[*n].key, sizeof (*out)[*n].key, "%s",
                 sqlite3_column_text(q, 1) ? (const char *)sqlite3_column_text(q, 1) : "");
        (*n)++;
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return store_fail(st, rc, "run_meta", NULL, err);
    }
    return 0;
}

int64_t trace_store_latest_run(trace_store *st)
{
    sqlite3_stmt *q = NULL;
    int64_t id = -1;
    if (sqlite3_prepare_v2(st->db, "SELECT max(id) FROM runs", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL)
        id = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return id;
}

int64_t store_resolve_run(trace_store *st, int64_t run, trace_error *err)
{
    if (run <= 0) {
        int64_t id = trace_store_latest_run(st);
        if (id < 0)
            trace_store_no_run(st, "to read", err);
        return id;
    }
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "SELECT 1 FROM runs WHERE id = ?1", -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "runs", NULL, err);
    sqlite3_bind_int64(q, 1, run);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc == SQLITE_ROW)
        return run;
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, "runs", NULL, err);
    char what[32];
    snprintf(what, sizeof what, "%lld", (long long)run);
    return trace_store_no_run(st, what, err);
}

int64_t store_new_run(trace_store *st, const char *name, const char *source, trace_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "INSERT INTO runs(id, name, source, status, created, body_version)"
                                " VALUES(max(coalesce((SELECT max(id) FROM runs), 0),"
                                " coalesce((SELECT CAST(value AS INTEGER) FROM meta"
                                " WHERE key = 'last_run'), 0)) + 1, ?1, ?2, 'recording', ?3, ?4)",
                                -1, &q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "runs", NULL, err);
    sqlite3_bind_text(q, 1, name ? name : "run", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 2, source ? source : "recorder", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 3, (int64_t)time(NULL));
    sqlite3_bind_int(q, 4, STORE_BODY_VERSION);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, "runs", "cannot add a run", err);
    int64_t id = sqlite3_last_insert_rowid(st->db);
    if (id >= (INT64_C(1) << (63 - STORE_SEQ_BITS))) {
        trace_error_set(err, TRACE_EDB, "%s: table runs: run ids exhausted", st->path);
        return -1;
    }
    return store_claim_run(st, id, err) == 0 ? id : -1;
}

void store_remove_files(const char *path)
{
    char side[4096];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-journal", path);
    unlink(side);
}

/* ------------------------------------------------------------------ */
/* The writer.                                                         */

static int prep(store_writer *w, sqlite3_stmt **q, const char *sql, const char *table,
                trace_error *err)
{
    int rc = sqlite3_prepare_v3(w->st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, q, NULL);
    if (rc != SQLITE_OK)
        return store_fail(w->st, rc, table, NULL, err);
    return 0;
}

/* A statement row waiting for its INSERT (store_writer_flush). */
typedef struct store_pending {
    int64_t id, t, dur;
    uint32_t queue, kind, label, object;
    size_t body_at, body_len;
} store_pending;

int store_writer_init(store_writer *w, trace_store *st, int64_t run, trace_error *err)
{
    memset(w, 0, sizeof *w);
    w->st = st;
    w->run = run;
    if (!(w->pend = malloc(STORE_BLOCK_STMTS * sizeof *w->pend)))
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path), -1;
    if (prep(w, &w->ins_stmt, "INSERT INTO stmt_blocks VALUES(?1, ?2, ?3, ?4, ?5)",
             "stmt_blocks", err) ||
        prep(w, &w->ins_str, "INSERT INTO strings VALUES(?1, ?2, ?3)", "strings", err) ||
        prep(w, &w->ins_queue, "INSERT INTO queues VALUES(?1, ?2, ?3, ?4, ?5)", "queues", err) ||
        prep(w, &w->ins_buffer, "INSERT INTO buffers VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
             "buffers", err) ||
        prep(w, &w->ins_expect, "INSERT INTO expectations VALUES(?1, ?2, ?3, ?4)", "expectations",
             err) ||
        prep(w, &w->ins_expect_kv, "INSERT INTO expectation_kv VALUES(?1, ?2, ?3, ?4, ?5)",
             "expectation_kv", err) ||
        prep(w, &w->del_meta, "DELETE FROM run_meta WHERE run = ?1", "run_meta", err) ||
        prep(w, &w->ins_meta, "INSERT OR REPLACE INTO run_meta VALUES(?1, ?2, ?3, ?4)", "run_meta",
             err) ||
        prep(w, &w->ins_time, "INSERT OR REPLACE INTO stmt_times VALUES(?1, ?2, ?3)",
             "stmt_times", err) ||
        prep(w, &w->upd_run,
             "UPDATE runs SET n_stmts = ?2, n_queues = ?3, n_buffers = ?4,"
             " status = coalesce(?5, status) WHERE id = ?1",
             "runs", err)) {
        store_writer_fini(w);
        return -1;
    }
    if (!(w->db = trace_new())) {
        store_writer_fini(w);
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", st->path), -1;
    }
    return 0;
}

void store_writer_fini(store_writer *w)
{
    sqlite3_stmt *all[] = { w->ins_stmt,   w->ins_str,       w->ins_queue, w->ins_buffer,
                            w->ins_expect, w->ins_expect_kv, w->del_meta,  w->ins_meta,
                            w->ins_time,   w->upd_run };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sqlite3_finalize(all[i]);
    free(w->pend);
    free(w->pend_body);
    free(w->blk);
    free(w->sizes);
    free(w->body);
    trace_free(w->db);
    free(w->str_map);
    free(w->tpl_map);
    free(w->largs_map);
    free(w->lpool);
    free(w->tpl_buf);
    free(w->src);
    free(w->src_len);
    memset(w, 0, sizeof *w);
}

/* Steps a bound insert and resets it. */
static int step_reset(store_writer *w, sqlite3_stmt *q, const char *table, trace_error *err)
{
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc != SQLITE_DONE)
        return store_fail(w->st, rc, table, "cannot write", err);
    return 0;
}

static void bind_id(sqlite3_stmt *q, int col, uint32_t id)
{
    if (id == TRACE_NONE)
        sqlite3_bind_null(q, col);
    else
        sqlite3_bind_int64(q, col, id);
}

/* The strings table's id of s (len bytes), writing its row when it is new. */
static uint32_t db_intern(store_writer *w, const char *s, size_t len, trace_error *err)
{
    uint32_t id = trace_intern(w->db, s, len);
    if (id == TRACE_NONE)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), TRACE_NONE;
    if (id < w->n_db_written)
        return id;
    sqlite3_bind_int64(w->ins_str, 1, w->run);
    sqlite3_bind_int64(w->ins_str, 2, id);
    sqlite3_bind_text(w->ins_str, 3, s, (int)len, SQLITE_STATIC);
    if (step_reset(w, w->ins_str, "strings", err))
        return TRACE_NONE;
    w->n_db_written = id + 1;
    return id;
}

static int ensure_maps(store_writer *w, uint32_t n, trace_error *err)
{
    if (n <= w->cap_map)
        return 0;
    uint32_t cap = w->cap_map ? w->cap_map : 256;
    while (cap < n)
        cap *= 2;
    uint32_t *a = realloc(w->str_map, cap * sizeof *a);
    if (a)
        w->str_map = a;
    uint32_t *b = realloc(w->tpl_map, cap * sizeof *b);
    if (b)
        w->tpl_map = b;
    uint64_t *c = realloc(w->largs_map, cap * sizeof *c);
    if (c)
        w->largs_map = c;
    if (!a || !b || !c)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), -1;
    memset(w->str_map + w->cap_map, 0xff, (cap - w->cap_map) * sizeof *a);
    memset(w->tpl_map + w->cap_map, 0xff, (cap - w->cap_map) * sizeof *b);
    memset(w->largs_map + w->cap_map, 0xff, (cap - w->cap_map) * sizeof *c);
    w->cap_map = cap;
    return 0;
}

/* Whether source string `id` can be mapped: not TRACE_NONE, known from
 * store_writer_decls, and the maps hold it. Sets *failed on error. */
static bool src_known(store_writer *w, uint32_t id, bool *failed, trace_error *err)
{
    if (id == TRACE_NONE || *failed)
        return false;
    if (id >= w->n_src || ensure_maps(w, id + 1, err) != 0) {
        if (id >= w->n_src)
            trace_error_set(err, TRACE_EUSAGE, "%s: string id %u of no string", w->st->path, id);
        *failed = true;
        return false;
    }
    return true;
}

/* The strings table's id of t's string `id` (TRACE_NONE stays so). Sets
 * *failed on error. */
static uint32_t db_str(store_writer *w, const trace *t, uint32_t id, bool *failed,
                       trace_error *err)
{
    (void)t;
    if (!src_known(w, id, failed, err))
        return TRACE_NONE;
    if (w->str_map[id] == UINT32_MAX) {
        uint32_t d = db_intern(w, w->src[id], w->src_len[id], err);
        if (d == TRACE_NONE) {
            *failed = true;
            return TRACE_NONE;
        }
        w->str_map[id] = d;
    }
    return w->str_map[id];
}

/* A label given as text (len bytes) as the body stores it: its template's
 * strings id, *largs and *n_largs the numbers (0 when the label is kept
 * whole). Sets *failed on error. */
static uint32_t db_label_text(store_writer *w, const char *text, size_t len, uint64_t *largs,
                              uint32_t *n_largs, bool *failed, trace_error *err)
{
    size_t tpl_len;
    int n = store_label_split(text, len, &w->tpl_buf, &w->cap_tpl, &tpl_len, largs,
                              STORE_MAX_LARGS);
    if (n < 0) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path);
        *failed = true;
        return TRACE_NONE;
    }
    uint32_t d = n ? db_intern(w, w->tpl_buf, tpl_len, err) : db_intern(w, text, len, err);
    if (d == TRACE_NONE) {
        *failed = true;
        return TRACE_NONE;
    }
    *n_largs = (uint32_t)n;
    return d;
}

/* A label of t as the body stores it (see db_label_text); the template of
 * each string is found once. */
static uint32_t db_label(store_writer *w, const trace *t, uint32_t id, uint64_t *largs,
                         uint32_t *n_largs, bool *failed, trace_error *err)
{
    *n_largs = 0;
    (void)t;
    if (!src_known(w, id, failed, err))
        return TRACE_NONE;
    uint32_t known = w->tpl_map[id];
    if (known != UINT32_MAX && !(known & STORE_TPL_ARGS))
        return known;           /* kept whole */
    if (known != UINT32_MAX) {  /* a label seen before: its numbers too */
        const uint64_t *p = w->lpool + w->largs_map[id];
        *n_largs = (uint32_t)p[0];
        memcpy(largs, p + 1, *n_largs * sizeof *largs);
        return known & ~STORE_TPL_ARGS;
    }
    uint32_t d = db_label_text(w, w->src[id], w->src_len[id], largs, n_largs, failed, err);
    if (d == TRACE_NONE || *n_largs == 0) {
        if (d != TRACE_NONE)
            w->tpl_map[id] = d;
        return d;
    }
    if (w->n_lpool + 1 + *n_largs > w->cap_lpool) {
        size_t cap = w->cap_lpool ? w->cap_lpool * 2 : 4096;
        while (cap < w->n_lpool + 1 + *n_largs)
            cap *= 2;
        uint64_t *np = realloc(w->lpool, cap * sizeof *np);
        if (!np) {
            trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path);
            *failed = true;
            return TRACE_NONE;
        }
        w->lpool = np;
        w->cap_lpool = cap;
    }
    w->largs_map[id] = w->n_lpool;
    w->lpool[w->n_lpool] = *n_largs;
    memcpy(w->lpool + w->n_lpool + 1, largs, *n_largs * sizeof *largs);
    w->n_lpool += 1 + *n_largs;
    w->tpl_map[id] = d | STORE_TPL_ARGS;
    return d;
}

int store_writer_decls(store_writer *w, const trace *t, trace_error *err)
{
    bool failed = false;
    if (t->n_strs > w->n_src) {
        if (t->n_strs > w->cap_src) {
            uint32_t cap = w->cap_src ? w->cap_src : 256;
            while (cap < t->n_strs)
                cap = cap * 2 > cap ? cap * 2 : t->n_strs;
            const char **src = realloc(w->src, cap * sizeof *src);
            if (src)
                w->src = src;
            uint32_t *len = realloc(w->src_len, cap * sizeof *len);
            if (len)
                w->src_len = len;
            if (!src || !len)
                return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), -1;
            w->cap_src = cap;
        }
        memcpy(w->src + w->n_src, t->strs + w->n_src, (t->n_strs - w->n_src) * sizeof *w->src);
        memcpy(w->src_len + w->n_src, t->str_len + w->n_src,
               (t->n_strs - w->n_src) * sizeof *w->src_len);
        w->n_src = t->n_strs;
    }
    for (; w->n_queues < t->n_queues; w->n_queues++) {
        const trace_queue *q = &t->queues[w->n_queues];
        sqlite3_bind_int64(w->ins_queue, 1, w->run);
        sqlite3_bind_int64(w->ins_queue, 2, w->n_queues);
        uint32_t name = db_str(w, t, q->name, &failed, err);
        uint32_t device = db_str(w, t, q->device, &failed, err);
        if (failed)
            return -1;
        sqlite3_bind_int64(w->ins_queue, 3, name);
        sqlite3_bind_text(w->ins_queue, 4, q->kind == TRACE_QUEUE_HOST ? "host" : "stream", -1,
                          SQLITE_STATIC);
        bind_id(w->ins_queue, 5, device);
        if (step_reset(w, w->ins_queue, "queues", err))
            return -1;
    }
    if (t->n_buffers > w->cap_sizes) {
        uint32_t cap = w->cap_sizes ? w->cap_sizes : 64;
        while (cap < t->n_buffers)
            cap *= 2;
        uint64_t *ns = realloc(w->sizes, cap * sizeof *ns);
        if (!ns)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), -1;
        w->sizes = ns;
        w->cap_sizes = cap;
    }
    for (; w->n_buffers < t->n_buffers; w->n_buffers++) {
        const trace_buffer *b = &t->buffers[w->n_buffers];
        sqlite3_stmt *q = w->ins_buffer;
        w->sizes[w->n_buffers] = b->size;
        uint32_t name = db_str(w, t, b->name, &failed, err);
        uint32_t device = db_str(w, t, b->device, &failed, err);
        if (failed)
            return -1;
        sqlite3_bind_int64(q, 1, w->run);
        sqlite3_bind_int64(q, 2, w->n_buffers);
        sqlite3_bind_int64(q, 3, name);
        sqlite3_bind_int64(q, 4, (int64_t)b->size);
        if (b->parent != TRACE_NONE) {
            sqlite3_bind_int64(q, 5, b->parent);
            sqlite3_bind_int64(q, 6, (int64_t)b->offset);
        } else {
            if (b->loc != TRACE_LOC_UNSPECIFIED)
                sqlite3_bind_text(q, 7, b->loc == TRACE_LOC_HOST ? "host" : "device", -1,
                                  SQLITE_STATIC);
            bind_id(q, 8, device);
            sqlite3_bind_int(q, 9, b->pinned);
        }
        if (step_reset(w, q, "buffers", err))
            return -1;
    }
    for (; w->n_expects < t->n_expects; w->n_expects++) {
        const trace_expect *e = &t->expects[w->n_expects];
        sqlite3_bind_int64(w->ins_expect, 1, w->run);
        sqlite3_bind_int64(w->ins_expect, 2, w->n_expects);
        sqlite3_bind_text(w->ins_expect, 3, trace_finding_str(e->kind), -1, SQLITE_STATIC);
        if (e->line)
            sqlite3_bind_int64(w->ins_expect, 4, e->line);
        if (step_reset(w, w->ins_expect, "expectations", err))
            return -1;
        for (uint32_t i = 0; i < e->n_kv; i++) {
            sqlite3_stmt *q = w->ins_expect_kv;
            sqlite3_bind_int64(q, 1, w->run);
            sqlite3_bind_int64(q, 2, w->n_expects);
            sqlite3_bind_int64(q, 3, i);
            uint32_t key = db_str(w, t, e->kv[i].key, &failed, err);
            uint32_t value = db_str(w, t, e->kv[i].value, &failed, err);
            if (failed)
                return -1;
            sqlite3_bind_int64(q, 4, key);
            sqlite3_bind_int64(q, 5, value);
            if (step_reset(w, q, "expectation_kv", err))
                return -1;
        }
    }
    return 0;
}

int store_writer_meta(store_writer *w, const trace *t, trace_error *err)
{
    sqlite3_bind_int64(w->del_meta, 1, w->run);
    if (step_reset(w, w->del_meta, "run_meta", err))
        return -1;
    for (uint32_t i = 0; i < t->n_meta; i++) {
        sqlite3_bind_int64(w->ins_meta, 1, w->run);
        sqlite3_bind_text(w->ins_meta, 2, trace_str(t, t->meta[i].key), -1, SQLITE_STATIC);
        sqlite3_bind_text(w->ins_meta, 3, trace_str(t, t->meta[i].value), -1, SQLITE_STATIC);
        sqlite3_bind_int64(w->ins_meta, 4, i);
        if (step_reset(w, w->ins_meta, "run_meta", err))
            return -1;
    }
    return 0;
}

/* The body's header varint: n_access << 5 | which optional fields follow. */
static uint64_t body_header(const trace_stmt *s, uint32_t coll_kind, uint32_t n_largs,
                            uint64_t *arg)
{
    uint64_t h = (uint64_t)s->n_access << STORE_BODY_SHIFT(STORE_BODY_VERSION);
    *arg = 0;
    if (n_largs)
        h |= STORE_BODY_LARGS;
    if (s->by != TRACE_NONE)
        h |= STORE_BODY_BY;
    if (s->count)
        h |= STORE_BODY_COUNT;
    if (s->kind == TRACE_SYNC && s->sync_scope != TRACE_SYNC_QUEUE)
        *arg = s->sync_scope;
    else if (s->kind == TRACE_COLLECTIVE && coll_kind != TRACE_NONE)
        *arg = (uint64_t)coll_kind + 1;
    else if ((s->kind == TRACE_SIGNAL || s->kind == TRACE_AWAIT) && s->sem)
        *arg = STORE_ARG_SEM;
    else if (s->kind == TRACE_SEND || s->kind == TRACE_RECV)
        *arg = ((uint64_t)s->rank << 32 | s->peer) + 1;
    if (*arg)
        h |= STORE_BODY_ARG;
    if (s->line)
        h |= STORE_BODY_LINE;
    return h;
}

/* Packs s's optional fields, label numbers, accesses and attributes (string
 * ids already the table's: coll_kind, attr) into w->body (see the top of
 * this file); *len = 0 when there is nothing to pack. */
static int encode_body(store_writer *w, const trace_stmt *s, uint32_t coll_kind,
                       const uint64_t *largs, uint32_t n_largs, const trace_attr *attr,
                       size_t *len, trace_error *err)
{
    uint64_t arg, h = body_header(s, coll_kind, n_largs, &arg);
    *len = 0;
    if (h == 0 && s->n_attr == 0)
        return 0;
    size_t need = 60 + (size_t)s->n_access * 31 + (size_t)s->n_attr * 10 + (size_t)n_largs * 10;
    if (need > w->cap_body) {
        size_t cap = w->cap_body ? w->cap_body : 256;
        while (cap < need)
            cap *= 2;
        uint8_t *nb = realloc(w->body, cap);
        if (!nb)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), -1;
        w->body = nb;
        w->cap_body = cap;
    }
    uint8_t *p = w->body;
    p += store_varint_put(p, h);
    if (h & STORE_BODY_BY)
        p += store_varint_put(p, s->by);
    if (h & STORE_BODY_COUNT)
        p += store_varint_put(p, s->count);
    if (h & STORE_BODY_ARG)
        p += store_varint_put(p, arg);
    if (h & STORE_BODY_LINE)
        p += store_varint_put(p, s->line);
    if (h & STORE_BODY_LARGS) {
        p += store_varint_put(p, n_largs);
        for (uint32_t i = 0; i < n_largs; i++)
            p += store_varint_put(p, largs[i]);
    }
    for (uint32_t i = 0; i < s->n_access; i++) {
        const trace_access *a = &s->access[i];
        uint64_t size = a->buffer < w->n_buffers ? w->sizes[a->buffer] : UINT64_MAX;
        uint8_t flags = (uint8_t)((a->mode & STORE_ACC_MODE) |
                                  ((a->form << STORE_ACC_FORM_SHIFT) & STORE_ACC_FORM));
        if (a->lo != 0)
            flags |= STORE_ACC_LO;
        if (a->hi != size || a->hi < a->lo)
            flags |= STORE_ACC_LEN;
        p += store_varint_put(p, a->buffer);
        *p++ = flags;
        if (flags & STORE_ACC_LO)
            p += store_varint_put(p, a->lo);
        if (flags & STORE_ACC_LEN)
            p += store_varint_put(p, a->hi - a->lo);
    }
    for (uint32_t i = 0; i < s->n_attr; i++) {
        p += store_varint_put(p, attr[i].key);
        p += store_varint_put(p, attr[i].value);
    }
    *len = (size_t)(p - w->body);
    return 0;
}

int store_writer_stmt(store_writer *w, const trace *t, uint64_t seq, const trace_stmt *s,
                      const char *label_text, size_t label_len, trace_error *err)
{
    size_t len;
    if (seq > STORE_SEQ_MASK)
        return trace_error_set(err, TRACE_EDB, "%s: table statements: too many statements",
                               w->st->path), -1;
    /* string ids of t become the table's */
    bool failed = false;
    uint64_t largs[STORE_MAX_LARGS];
    uint32_t n_largs = 0;
    uint32_t label;
    if (s->label == TRACE_LABEL_LAZY && label_text) {
        label = db_label_text(w, label_text, label_len, largs, &n_largs, &failed, err);
    } else if (s->label == TRACE_LABEL_LAZY) {
        trace_error_set(err, TRACE_EUSAGE, "%s: a lazy label without its text", w->st->path);
        return -1;
    } else {
        label = db_label(w, t, s->label, largs, &n_largs, &failed, err);
    }
    bool object_is_str = s->kind == TRACE_RECORD || s->kind == TRACE_WAIT ||
                         s->kind == TRACE_BARRIER || s->kind == TRACE_SIGNAL ||
                         s->kind == TRACE_AWAIT || s->kind == TRACE_COLLECTIVE ||
                         s->kind == TRACE_SEND || s->kind == TRACE_RECV ||
                         (s->kind == TRACE_SYNC && s->sync_scope == TRACE_SYNC_DEVICE);
    uint32_t object = object_is_str ? db_str(w, t, s->object, &failed, err) : s->object;
    uint32_t coll_kind = db_str(w, t, s->coll_kind, &failed, err);
    trace_attr attr_local[8], *attr = attr_local;
    if (s->n_attr > 8 && !(attr = malloc(s->n_attr * sizeof *attr)))
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), -1;
    for (uint32_t i = 0; i < s->n_attr; i++)
        attr[i] = (trace_attr){ db_str(w, t, s->attr[i].key, &failed, err),
                                db_str(w, t, s->attr[i].value, &failed, err) };
    int rc = failed ? -1 : encode_body(w, s, coll_kind, largs, n_largs, attr, &len, err);
    if (attr != attr_local)
        free(attr);
    if (rc != 0)
        return -1;
    /* a block holds consecutive seqs (its statements' seqs are its first
     * one's plus their place) */
    if (w->n_pend && (int64_t)((uint64_t)w->run << STORE_SEQ_BITS | seq) !=
                         w->pend[w->n_pend - 1].id + 1 &&
        store_writer_flush(w, err) != 0)
        return -1;
    /* queued; its body copied, as w->body is the next statement's */
    if (w->n_pend_body + len > w->cap_pend_body) {
        size_t cap = w->cap_pend_body ? w->cap_pend_body : 4096;
        while (cap < w->n_pend_body + len)
            cap *= 2;
        uint8_t *nb = realloc(w->pend_body, cap);
        if (!nb)
            return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), -1;
        w->pend_body = nb;
        w->cap_pend_body = cap;
    }
    if (len)
        memcpy(w->pend_body + w->n_pend_body, w->body, len);
    w->pend[w->n_pend++] = (store_pending){
        .id = (int64_t)((uint64_t)w->run << STORE_SEQ_BITS | seq), .t = s->t, .dur = s->dur,
        .queue = s->queue, .kind = s->kind, .label = label, .object = object,
        .body_at = w->n_pend_body, .body_len = len,
    };
    w->n_pend_body += len;
    w->n_stmts++;
    bool full = w->n_pend == STORE_BLOCK_STMTS ||
                w->n_pend_body + (size_t)w->n_pend * 8 >= STORE_BLOCK_BYTES;
    return full ? store_writer_flush(w, err) : 0;
}

_Static_assert(TRACE_KIND_COUNT <= STORE_STMT_KIND + 1, "a kind fits a block statement's head");

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* The pending statements encoded as one block into w->blk (the layout at
 * the top of this file); its length, or 0 when out of memory. *t_lo and
 * *t_hi: the earliest start and the latest end of the observed times,
 * TRACE_TIME_NONE when none is. */
static size_t encode_block(store_writer *w, int64_t *t_lo, int64_t *t_hi)
{
    size_t need = 10 + w->n_pend_body + (size_t)w->n_pend * (3 + 5 + 5 + 5 + 10 + 10 + 5);
    if (need > w->cap_blk) {
        size_t cap = w->cap_blk ? w->cap_blk : 16384;
        while (cap < need)
            cap *= 2;
        uint8_t *nb = realloc(w->blk, cap);
        if (!nb)
            return 0;
        w->blk = nb;
        w->cap_blk = cap;
    }
    uint32_t n_both = 0, n_none = 0;
    for (uint32_t i = 0; i < w->n_pend; i++) {
        bool t = w->pend[i].t != TRACE_TIME_NONE, d = w->pend[i].dur != TRACE_TIME_NONE;
        n_both += t && d;
        n_none += !t && !d;
    }
    uint64_t times = n_none == w->n_pend ? STORE_TIMES_NONE
                   : n_both == w->n_pend ? STORE_TIMES_ALL : STORE_TIMES_EACH;
    uint8_t *p = w->blk;
    p += store_varint_put(p, times);
    int64_t prev = 0;
    *t_lo = *t_hi = TRACE_TIME_NONE;
    for (uint32_t i = 0; i < w->n_pend; i++) {
        const store_pending *sp = &w->pend[i];
        uint64_t head = sp->kind;
        if (sp->label != TRACE_NONE)
            head |= STORE_STMT_LABEL;
        if (sp->object != TRACE_NONE)
            head |= STORE_STMT_OBJECT;
        if (sp->body_len)
            head |= STORE_STMT_BODY;
        bool has_t = sp->t != TRACE_TIME_NONE, has_d = sp->dur != TRACE_TIME_NONE;
        if (times == STORE_TIMES_EACH)
            head |= (has_t ? STORE_STMT_T : 0) | (has_d ? STORE_STMT_DUR : 0);
        p += store_varint_put(p, head);
        p += store_varint_put(p, sp->queue);
        if (sp->label != TRACE_NONE)
            p += store_varint_put(p, sp->label);
        if (sp->object != TRACE_NONE)
            p += store_varint_put(p, sp->object);
        if (has_t) {
            p += store_varint_put(p, zigzag((int64_t)((uint64_t)sp->t - (uint64_t)prev)));
            prev = sp->t;
            if (*t_lo == TRACE_TIME_NONE || sp->t < *t_lo)
                *t_lo = sp->t;
            int64_t end = sp->t + (has_d && sp->dur > 0 ? sp->dur : 0);
            if (*t_hi == TRACE_TIME_NONE || end > *t_hi)
                *t_hi = end;
        }
        if (has_d)
            p += store_varint_put(p, zigzag(sp->dur));
        if (sp->body_len) {
            p += store_varint_put(p, sp->body_len);
            memcpy(p, w->pend_body + sp->body_at, sp->body_len);
            p += sp->body_len;
        }
    }
    return (size_t)(p - w->blk);
}

int store_writer_flush(store_writer *w, trace_error *err)
{
    if (w->n_pend == 0)
        return 0;
    int64_t t_lo, t_hi;
    size_t len = encode_block(w, &t_lo, &t_hi);
    if (len == 0)
        return trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", w->st->path), -1;
    sqlite3_stmt *q = w->ins_stmt;
    sqlite3_bind_int64(q, 1, w->pend[0].id);
    sqlite3_bind_int64(q, 2, w->n_pend);
    if (t_lo != TRACE_TIME_NONE) {
        sqlite3_bind_int64(q, 3, t_lo);
        sqlite3_bind_int64(q, 4, t_hi);
    } else {
        sqlite3_bind_null(q, 3);
        sqlite3_bind_null(q, 4);
    }
    sqlite3_bind_blob(q, 5, w->blk, (int)len, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    w->n_pend = 0;
    w->n_pend_body = 0;
    if (rc != SQLITE_DONE)
        return store_fail(w->st, rc, "stmt_blocks", "cannot write", err);
    return 0;
}

int store_writer_time(store_writer *w, uint64_t seq, int64_t t, int64_t dur, trace_error *err)
{
    int64_t id = (int64_t)((uint64_t)w->run << STORE_SEQ_BITS | seq);
    if (w->n_pend && id >= w->pend[0].id && id <= w->pend[w->n_pend - 1].id) {
        store_pending *p = &w->pend[id - w->pend[0].id];   /* pending ids are dense */
        p->t = t;
        p->dur = dur;
        return 0;
    }
    sqlite3_stmt *q = w->ins_time;
    sqlite3_bind_int64(q, 1, id);
    if (t != TRACE_TIME_NONE)
        sqlite3_bind_int64(q, 2, t);
    if (dur != TRACE_TIME_NONE)
        sqlite3_bind_int64(q, 3, dur);
    return step_reset(w, q, "stmt_times", err);
}

int store_writer_run_row(store_writer *w, const char *status, trace_error *err)
{
    if (w->n_pend && store_writer_flush(w, err) != 0)
        return -1;
    sqlite3_stmt *q = w->upd_run;
    sqlite3_bind_int64(q, 1, w->run);
    sqlite3_bind_int64(q, 2, (int64_t)w->n_stmts);
    sqlite3_bind_int64(q, 3, w->n_queues);
    sqlite3_bind_int64(q, 4, w->n_buffers);
    if (status)
        sqlite3_bind_text(q, 5, status, -1, SQLITE_STATIC);
    if (step_reset(w, q, "runs", err) != 0)
        return -1;
    /* the row is gone: the run was deleted under its producer (by a syncsim
     * without run locks, or by hand); its rows must not outlive it */
    if (sqlite3_changes(w->st->db) == 0)
        return trace_error_set(err, TRACE_EBUSY,
                               "%s: table runs: run %lld was deleted while it was being "
                               "written; nothing more of it is written",
                               w->st->path, (long long)w->run), -1;
    return 0;
}
