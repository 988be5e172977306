/*
 * nsys.c -- Nsight Systems captures, as `nsys export --type sqlite`
 * writes them.
 *
 * The tables read (columns looked up by name, so that both schemas work):
 *
 *   StringIds(id, value)                       every name is a StringId
 *   CUPTI_ACTIVITY_KIND_RUNTIME(start, end, globalTid, correlationId,
 *       nameId)                                runtime and driver calls;
 *       globalTid packs the process and thread: pid = (globalTid >> 24) &
 *       0xFFFFFF, tid = globalTid & 0xFFFFFF
 *   CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId, streamId,
 *       correlationId, globalPid, shortName|demangledName)
 *   CUPTI_ACTIVITY_KIND_MEMCPY(..., bytes, copyKind, srcKind, dstKind,
 *       srcDeviceId, dstDeviceId)              copyKind and the memory kinds
 *       are CUPTI's enums (the ENUM_CUDA_MEMCPY_OPER and ENUM_CUDA_MEM_KIND
 *       tables of 3.x repeat them)
 *   CUPTI_ACTIVITY_KIND_MEMSET(..., bytes)
 *   CUPTI_ACTIVITY_KIND_SYNCHRONIZATION(..., syncType, eventId)
 *   CUPTI_ACTIVITY_KIND_CUDA_EVENT(deviceId, streamId, correlationId,
 *       globalPid, eventId)                    event records (only with CUDA
 *       event tracing on)
 *   TARGET_INFO_CUDA_STREAM(streamId, processId, flag),
 *   TARGET_INFO_CUDA_NULL_STREAM(streamId, processId, deviceId)
 *                                              how streams were created
 *   NVTX_EVENTS(start, end, eventType, text, textId, globalTid)
 *                                              push/pop and start/end ranges
 *
 * Schema 2.x (Nsight Systems 2021-2022; its metadata table is
 * EXPORT_META_DATA) lists each runtime call twice, an outer unversioned row
 * (cudaMalloc) and a nested versioned one (cudaMalloc_v3020) with the same
 * correlation id, and adds an empty `name` column; capture_api() keeps the
 * enclosing row of one correlation. Schema 3.x (2023 on; META_DATA_EXPORT)
 * has one versioned row per call and ENUM_* tables. Other major versions
 * are refused. Missing optional tables (no MEMSET, no NVTX, no events) are
 * fine; an export without StringIds, the runtime table or any GPU activity
 * table is not a capture of CUDA work, and says which table is missing.
 *
 * Some CUPTI versions label every cudaDeviceSynchronize's row as an event
 * synchronisation (syncType 1, stream and event -1); capture.c trusts the
 * call's name over the sync type.
 *
 * Every row read is an event of the import ledger (formats.h). Number cells
 * are read by col_int alone, which counts text or a fraction (bad-number:
 * SQLite would read 'banana' as 0); a row without a start (no-ts), a GPU row
 * without device or stream, a call or range without a thread
 * (missing-field), an unknown copyKind or stream flag (unknown-kind) are
 * counted too.
 *
 * Progress is said in rows, of the rows the same queries give, which SQLite
 * counts first (SELECT count(*) FROM (query)) when the opener wants progress
 * at all: a count walks the tables' pages without handing out a row.
 */
#include "formats.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

typedef struct nsys {
    sqlite3 *db;
    const char *path;
    capture *c;
    trace *t;
    trace_error *err;
    sqlite3_stmt *str_q;        /* SELECT value FROM StringIds WHERE id = ? */
    uint32_t *str_cache;        /* StringId -> string id + 1, for small ids */
    int64_t n_cache;
    int64_t only_pid;           /* the one process of the runtime calls, or CAP_NONE */
    uint64_t rows;
    uint64_t bad_cells;         /* number cells that held no integer (counted) */
    const trace_progress *progress; /* told rows read of `total` */
    bool counting;              /* each_row counts the rows into `total`, reads none */
    uint64_t total;             /* the rows read_tables reads: counted when progress has a
                                 * hook, else 0 */
} nsys;

/* Rows between two reports of progress: a power of two. */
#define NSYS_PROGRESS_ROWS 4096

static int db_fail(nsys *n, const char *table)
{
    trace_error_set(n->err, TRACE_ECORRUPT, "%s: table %s: %s", n->path, table,
                    sqlite3_errmsg(n->db));
    return -1;
}

static bool has_table(nsys *n, const char *table)
{
    sqlite3_stmt *q;
    bool found = false;
    if (sqlite3_prepare_v2(n->db, "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') "
                           "AND name = ?1", -1, &q, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC);
    found = sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    return found;
}

static bool has_column(nsys *n, const char *table, const char *column)
{
    sqlite3_stmt *q;
    bool found = false;
    if (sqlite3_prepare_v2(n->db, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", -1, &q,
                           NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, column, -1, SQLITE_STATIC);
    found = sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    return found;
}

/* The string id of StringId sid (cached); "" when unknown. */
static uint32_t str_of(nsys *n, int64_t sid)
{
    if (sid >= 0 && sid < n->n_cache && n->str_cache[sid])
        return n->str_cache[sid] - 1;
    const unsigned char *v = NULL;
    int len = 0;
    sqlite3_reset(n->str_q);
    sqlite3_bind_int64(n->str_q, 1, sid);
    if (sqlite3_step(n->str_q) == SQLITE_ROW) {
        v = sqlite3_column_text(n->str_q, 0);
        len = sqlite3_column_bytes(n->str_q, 0);
    }
    uint32_t id = trace_intern(n->t, v ? (const char *)v : "", v ? (size_t)len : 0);
    if (id != TRACE_NONE && sid >= 0 && sid < (int64_t)1 << 24) {
        if (sid >= n->n_cache) {
            int64_t cap = n->n_cache ? n->n_cache : 4096;
            while (cap <= sid)
                cap *= 2;
            uint32_t *c = realloc(n->str_cache, (size_t)cap * sizeof *c);
            if (!c)
                return id;
            memset(c + n->n_cache, 0, (size_t)(cap - n->n_cache) * sizeof *c);
            n->str_cache = c;
            n->n_cache = cap;
        }
        n->str_cache[sid] = id + 1;
    }
    return id;
}

/* An integer cell: CAP_NONE when NULL. Every number column is read here,
 * so that text in one ("start='banana'", which SQLite would read as 0) or a
 * fraction is counted in the ledger (bad-number) and read as absent. */
static int64_t col_int(nsys *n, sqlite3_stmt *q, int i)
{
    switch (sqlite3_column_type(q, i)) {
    case SQLITE_NULL:
        return CAP_NONE;
    case SQLITE_INTEGER:
        return sqlite3_column_int64(q, i);
    case SQLITE_FLOAT: {
        double d = sqlite3_column_double(q, i);
        if (d == (double)(int64_t)d && d > -9.2e18 && d < 9.2e18)
            return (int64_t)d;
        break;
    }
    default:
        break;
    }
    n->bad_cells++;
    capture_drop(n->c, CAP_DROP_BAD_NUMBER, 1);
    return CAP_NONE;
}

/* The start and end of a row (columns i, i + 1): false when the row cannot be
 * placed in time (counted: a bad number, or no-ts). */
static bool row_times(nsys *n, sqlite3_stmt *q, int i, int64_t *t0, int64_t *t1)
{
    uint64_t bad = n->bad_cells;
    *t0 = col_int(n, q, i);
    *t1 = col_int(n, q, i + 1);
    if (n->bad_cells != bad)
        return false;
    if (*t0 == CAP_NONE)
        return capture_drop(n->c, CAP_DROP_NO_TS, 1), false;
    return true;
}

static int64_t pid_of(int64_t global)
{
    return global == CAP_NONE ? CAP_NONE : (global >> 24) & 0xFFFFFF;
}

/* Runs sql and calls row() for each row; when n->counting, only adds how
 * many rows it gives to n->total (the same query, counted by SQLite). */
static int each_row(nsys *n, const char *table, const char *sql,
                    int (*row)(nsys *n, sqlite3_stmt *q))
{
    sqlite3_stmt *q;
    int rc;
    if (n->counting) {
        char count[1100];
        snprintf(count, sizeof count, "SELECT count(*) FROM (%s)", sql);
        if (sqlite3_prepare_v2(n->db, count, -1, &q, NULL) != SQLITE_OK)
            return db_fail(n, table);
        if ((rc = sqlite3_step(q)) == SQLITE_ROW)
            n->total += (uint64_t)sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
        return rc == SQLITE_ROW ? 0 : db_fail(n, table);
    }
    if (sqlite3_prepare_v2(n->db, sql, -1, &q, NULL) != SQLITE_OK)
        return db_fail(n, table);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if ((++n->rows & (NSYS_PROGRESS_ROWS - 1)) == 0)
            trace_progress_say(n->progress, "rows", n->rows, n->total);
        capture_read(n->c);
        if (row(n, q) != 0) {
            sqlite3_finalize(q);
            return -1;
        }
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE)
        return db_fail(n, table);
    return 0;
}

static int oom(nsys *n)
{
    trace_error_set(n->err, TRACE_ENOMEM, "%s: out of memory", n->path);
    return -1;
}

/* start, end, globalTid, correlationId, nameId[, name] */
static int runtime_row(nsys *n, sqlite3_stmt *q)
{
    int64_t gtid = col_int(n, q, 2), t0, t1;
    if (!row_times(n, q, 0, &t0, &t1))
        return 0;
    if (gtid == CAP_NONE)
        return capture_drop(n->c, CAP_DROP_MISSING_FIELD, 1);
    int64_t pid = pid_of(gtid), tid = gtid & 0xFFFFFF;
    uint32_t name = str_of(n, col_int(n, q, 4));
    if (name != TRACE_NONE && !*trace_str(n->t, name) && sqlite3_column_count(q) > 5 &&
        sqlite3_column_type(q, 5) == SQLITE_TEXT)
        name = trace_intern_cstr(n->t, (const char *)sqlite3_column_text(q, 5));
    if (name != TRACE_NONE && !*trace_str(n->t, name))
        return capture_drop(n->c, CAP_DROP_MISSING_FIELD, 1);  /* a call of no known name */
    uint32_t host = capture_host(n->c, pid, tid);
    if (name == TRACE_NONE || host == TRACE_NONE ||
        capture_api(n->c, host, pid, t0, t1, col_int(n, q, 3), name) != 0)
        return oom(n);
    if (n->only_pid == CAP_NONE)
        n->only_pid = pid;
    else if (n->only_pid != pid)
        n->only_pid = -2;
    return 0;
}

/* The process of a GPU row: its globalPid, else the only process. */
static int64_t gpu_proc(nsys *n, int64_t global)
{
    int64_t p = pid_of(global);
    if (p != CAP_NONE)
        return p;
    return n->only_pid >= 0 ? n->only_pid : 0;
}

/* The stream of a GPU row (deviceId, streamId at i, i + 1; globalPid at
 * pid_col): TRACE_NONE with *dropped when the row names none (counted). */
static uint32_t gpu_stream(nsys *n, sqlite3_stmt *q, int i, int pid_col, bool *dropped)
{
    int64_t dev = col_int(n, q, i), stream = col_int(n, q, i + 1);
    *dropped = dev == CAP_NONE || stream == CAP_NONE;
    if (*dropped) {
        capture_drop(n->c, CAP_DROP_MISSING_FIELD, 1);
        return TRACE_NONE;
    }
    return capture_stream(n->c, gpu_proc(n, col_int(n, q, pid_col)), dev, stream);
}

/* A GPU row was read (correlationId at corr_col, globalPid at pid_col),
 * whatever becomes of it: its launch call is not launch-without-work. Read
 * without counting: the row's own cells are counted where they are used. */
static int note_work(nsys *n, sqlite3_stmt *q, int corr_col, int pid_col)
{
    if (sqlite3_column_type(q, corr_col) != SQLITE_INTEGER)
        return 0;
    int64_t pid = sqlite3_column_type(q, pid_col) == SQLITE_INTEGER
                      ? sqlite3_column_int64(q, pid_col)
                      : CAP_NONE;
    return capture_work_seen(n->c, gpu_proc(n, pid), sqlite3_column_int64(q, corr_col));
}

/* start, end, deviceId, streamId, correlationId, globalPid, name id */
static int kernel_row(nsys *n, sqlite3_stmt *q)
{
    int64_t t0, t1;
    bool dropped;
    if (note_work(n, q, 4, 5) != 0)
        return oom(n);
    if (!row_times(n, q, 0, &t0, &t1))
        return 0;
    uint32_t st = gpu_stream(n, q, 2, 5, &dropped);
    if (dropped)
        return 0;
    uint32_t name = str_of(n, col_int(n, q, 6));
    if (st == TRACE_NONE || name == TRACE_NONE)
        return oom(n);
    cap_gpu g = { .stream = st, .kind = CAP_KERNEL, .t0 = t0, .t1 = t1,
                  .corr = col_int(n, q, 4), .name = name, .src_device = CAP_NONE,
                  .dst_device = CAP_NONE, .comm = TRACE_NONE, .coll = TRACE_NONE };
    return capture_gpu(n->c, &g) != 0 ? oom(n) : 0;
}

static cap_mem mem_kind(int64_t k, bool host_side)
{
    switch (k) {
    case 0: return CAP_MEM_PAGEABLE;
    case 1: return CAP_MEM_PINNED;
    case 2: case 3: case 4: case 5: case 6: return CAP_MEM_DEVICE;
    default: return host_side ? CAP_MEM_HOST : CAP_MEM_DEVICE;
    }
}

/* start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind,
 * srcKind, dstKind, srcDeviceId, dstDeviceId */
static int memcpy_row(nsys *n, sqlite3_stmt *q)
{
    static const char *const kinds[] = { "Memcpy", "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
                                         "Memcpy AtoH", "Memcpy AtoA", "Memcpy AtoD",
                                         "Memcpy DtoA", "Memcpy DtoD", "Memcpy HtoH",
                                         "Memcpy PtoP", "Memcpy HtoD (unified)",
                                         "Memcpy DtoH (unified)", "Memcpy DtoD (unified)" };
    int64_t t0, t1;
    bool dropped;
    if (note_work(n, q, 4, 5) != 0)
        return oom(n);
    if (!row_times(n, q, 0, &t0, &t1))
        return 0;
    int64_t ck = col_int(n, q, 7);
    if (ck < 0 || ck > 13) {    /* the direction is not said: a copy of unknown kind */
        capture_drop(n->c, CAP_DROP_UNKNOWN_KIND, 1);
        ck = 0;
    }
    bool src_host = ck == 1 || ck == 3 || ck == 9 || ck == 11;
    bool dst_host = ck == 2 || ck == 4 || ck == 9 || ck == 12;
    uint32_t st = gpu_stream(n, q, 2, 5, &dropped);
    if (dropped)
        return 0;
    uint32_t name = trace_intern_cstr(n->t, kinds[ck]);
    if (st == TRACE_NONE || name == TRACE_NONE)
        return oom(n);
    int64_t bytes = col_int(n, q, 6), sk = col_int(n, q, 8), dk = col_int(n, q, 9);
    cap_gpu g = { .stream = st, .kind = CAP_MEMCPY, .t0 = t0, .t1 = t1,
                  .corr = col_int(n, q, 4), .name = name, .bytes = bytes > 0 ? (uint64_t)bytes : 0,
                  .src = sk == CAP_NONE ? (src_host ? CAP_MEM_HOST : CAP_MEM_DEVICE)
                                        : mem_kind(sk, src_host),
                  .dst = dk == CAP_NONE ? (dst_host ? CAP_MEM_HOST : CAP_MEM_DEVICE)
                                        : mem_kind(dk, dst_host),
                  .src_device = col_int(n, q, 10), .dst_device = col_int(n, q, 11) };
    if (g.src_device != CAP_NONE && (g.src_device < 0 || g.src_device > 4096))
        g.src_device = CAP_NONE;
    if (g.dst_device != CAP_NONE && (g.dst_device < 0 || g.dst_device > 4096))
        g.dst_device = CAP_NONE;
    return capture_gpu(n->c, &g) != 0 ? oom(n) : 0;
}

/* start, end, deviceId, streamId, correlationId, globalPid, bytes */
static int memset_row(nsys *n, sqlite3_stmt *q)
{
    int64_t t0, t1;
    bool dropped;
    if (note_work(n, q, 4, 5) != 0)
        return oom(n);
    if (!row_times(n, q, 0, &t0, &t1))
        return 0;
    uint32_t st = gpu_stream(n, q, 2, 5, &dropped);
    if (dropped)
        return 0;
    uint32_t name = trace_intern_cstr(n->t, "Memset");
    if (st == TRACE_NONE || name == TRACE_NONE)
        return oom(n);
    int64_t bytes = col_int(n, q, 6);
    cap_gpu g = { .stream = st, .kind = CAP_MEMSET, .t0 = t0, .t1 = t1,
                  .corr = col_int(n, q, 4), .name = name, .bytes = bytes > 0 ? (uint64_t)bytes : 0,
                  .src_device = CAP_NONE, .dst_device = CAP_NONE };
    return capture_gpu(n->c, &g) != 0 ? oom(n) : 0;
}

/* start, end, deviceId, streamId, correlationId, globalPid, syncType, eventId */
static int sync_row(nsys *n, sqlite3_stmt *q)
{
    int64_t type = col_int(n, q, 6), t0, t1;
    if (!row_times(n, q, 0, &t0, &t1))
        return 0;
    cap_sync s = { .proc = gpu_proc(n, col_int(n, q, 5)), .corr = col_int(n, q, 4),
                   .kind = type >= 1 && type <= 4 ? (cap_sync_kind)type : CAP_SYNC_UNKNOWN,
                   .device = col_int(n, q, 2), .stream = col_int(n, q, 3),
                   .event = col_int(n, q, 7), .record_stream = CAP_NONE,
                   .record_corr = CAP_NONE, .t0 = t0, .t1 = t1 };
    return capture_sync(n->c, &s) != 0 ? oom(n) : 0;
}

/* deviceId, streamId, correlationId, globalPid, eventId */
static int event_row(nsys *n, sqlite3_stmt *q)
{
    return capture_record(n->c, gpu_proc(n, col_int(n, q, 3)), col_int(n, q, 2),
                          col_int(n, q, 0), col_int(n, q, 1), col_int(n, q, 4)) != 0
               ? oom(n)
               : 0;
}

/* streamId, processId, flag */
static int stream_row(nsys *n, sqlite3_stmt *q)
{
    static const cap_stream_kind kinds[] = { CAP_STREAM_UNKNOWN, CAP_STREAM_BLOCKING,
                                             CAP_STREAM_NONBLOCKING, CAP_STREAM_LEGACY };
    int64_t flag = col_int(n, q, 2);
    if (flag < 0 || flag > 3)   /* how it was created is not said: left unknown */
        return capture_drop(n->c, CAP_DROP_UNKNOWN_KIND, 1);
    return capture_stream_kind(n->c, col_int(n, q, 1), CAP_NONE, col_int(n, q, 0), kinds[flag]);
}

/* streamId, processId */
static int null_stream_row(nsys *n, sqlite3_stmt *q)
{
    return capture_stream_kind(n->c, col_int(n, q, 1), CAP_NONE, col_int(n, q, 0),
                               CAP_STREAM_LEGACY);
}

/* start, end, text, textId, globalTid */
static int nvtx_row(nsys *n, sqlite3_stmt *q)
{
    int64_t gtid = col_int(n, q, 4), t0, t1;
    if (!row_times(n, q, 0, &t0, &t1))
        return 0;
    if (gtid == CAP_NONE)
        return capture_drop(n->c, CAP_DROP_MISSING_FIELD, 1);
    uint32_t name;
    if (sqlite3_column_type(q, 2) == SQLITE_TEXT)
        name = trace_intern(n->t, (const char *)sqlite3_column_text(q, 2),
                            (size_t)sqlite3_column_bytes(q, 2));
    else if (col_int(n, q, 3) != CAP_NONE)
        name = str_of(n, col_int(n, q, 3));
    else
        return capture_drop(n->c, CAP_DROP_MISSING_FIELD, 1);
    uint32_t host = capture_host(n->c, pid_of(gtid), gtid & 0xFFFFFF);
    if (name == TRACE_NONE || host == TRACE_NONE ||
        capture_range(n->c, host, t0, t1, name, CAP_NONE, false) != 0)
        return oom(n);
    return 0;
}

/* A column if the table has it, else NULL. */
static const char *opt(nsys *n, const char *table, const char *column)
{
    return has_column(n, table, column) ? column : "NULL";
}

/* The schema version: 2.x and 3.x are read. */
static int check_version(nsys *n, char *version, size_t cap)
{
    snprintf(version, cap, "unknown");
    const char *table = has_table(n, "META_DATA_EXPORT")   ? "META_DATA_EXPORT"
                        : has_table(n, "EXPORT_META_DATA") ? "EXPORT_META_DATA"
                                                           : NULL;
    if (!table)
        return 0;
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT value FROM %s WHERE name = 'EXPORT_SCHEMA_VERSION'", table);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(n->db, sql, -1, &q, NULL) != SQLITE_OK)
        return db_fail(n, table);
    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) == SQLITE_TEXT)
        snprintf(version, cap, "%s", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    if (strcmp(version, "unknown") == 0)
        return 0;
    long major = strtol(version, NULL, 10);
    if (major != 2 && major != 3) {
        trace_error_set(n->err, TRACE_EVERSION,
                        "%s: table %s: Nsight Systems export schema %.40s, this build reads "
                        "schemas 2.x and 3.x",
                        n->path, table, version);
        return -1;
    }
    return 0;
}

static const char *const required[] = { "StringIds", "CUPTI_ACTIVITY_KIND_RUNTIME" };
static const char *const gpu_tables[] = { "CUPTI_ACTIVITY_KIND_KERNEL",
                                          "CUPTI_ACTIVITY_KIND_MEMCPY",
                                          "CUPTI_ACTIVITY_KIND_MEMSET" };

/* Refuses an export that holds no capture of CUDA work; prepares str_q. */
static int check_tables(nsys *n)
{
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!has_table(n, required[i]))
            return trace_error_set(n->err, TRACE_ENOTTRACE,
                                   "%s: an Nsight Systems export without table %s: not a capture "
                                   "of CUDA work (profile with --trace=cuda)",
                                   n->path, required[i]),
                   -1;
    bool any_gpu = false;
    for (size_t i = 0; i < sizeof gpu_tables / sizeof gpu_tables[0]; i++)
        any_gpu |= has_table(n, gpu_tables[i]);
    if (!any_gpu)
        return trace_error_set(n->err, TRACE_ENOTTRACE,
                               "%s: an Nsight Systems export without table "
                               "CUPTI_ACTIVITY_KIND_KERNEL (nor MEMCPY, MEMSET): no GPU work "
                               "was captured",
                               n->path),
               -1;
    if (sqlite3_prepare_v2(n->db, "SELECT value FROM StringIds WHERE id = ?1", -1, &n->str_q,
                           NULL) != SQLITE_OK)
        return db_fail(n, "StringIds");
    return 0;
}

/* Reads every table the capture model takes, row by row (or, counting,
 * counts their rows). */
static int read_tables(nsys *n)
{
    char sql[1024];
    const char *rt = "CUPTI_ACTIVITY_KIND_RUNTIME";
    snprintf(sql, sizeof sql, "SELECT start, end, globalTid, correlationId, nameId, %s FROM %s",
             opt(n, rt, "name"), rt);
    if (each_row(n, rt, sql, runtime_row) != 0)
        return -1;
    const char *k = "CUPTI_ACTIVITY_KIND_KERNEL";
    if (has_table(n, k)) {
        snprintf(sql, sizeof sql, "SELECT start, end, deviceId, streamId, correlationId, %s, %s "
                 "FROM %s", opt(n, k, "globalPid"),
                 has_column(n, k, "shortName") ? "shortName" : opt(n, k, "demangledName"), k);
        if (each_row(n, k, sql, kernel_row) != 0)
            return -1;
    }
    const char *m = "CUPTI_ACTIVITY_KIND_MEMCPY";
    if (has_table(n, m)) {
        snprintf(sql, sizeof sql, "SELECT start, end, deviceId, streamId, correlationId, %s, "
                 "bytes, copyKind, %s, %s, %s, %s FROM %s", opt(n, m, "globalPid"),
                 opt(n, m, "srcKind"), opt(n, m, "dstKind"), opt(n, m, "srcDeviceId"),
                 opt(n, m, "dstDeviceId"), m);
        if (each_row(n, m, sql, memcpy_row) != 0)
            return -1;
    }
    const char *ms = "CUPTI_ACTIVITY_KIND_MEMSET";
    if (has_table(n, ms)) {
        snprintf(sql, sizeof sql, "SELECT start, end, deviceId, streamId, correlationId, %s, "
                 "bytes FROM %s", opt(n, ms, "globalPid"), ms);
        if (each_row(n, ms, sql, memset_row) != 0)
            return -1;
    }
    const char *sy = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
    if (has_table(n, sy)) {
        snprintf(sql, sizeof sql, "SELECT start, end, deviceId, streamId, correlationId, %s, "
                 "syncType, eventId FROM %s", opt(n, sy, "globalPid"), sy);
        if (each_row(n, sy, sql, sync_row) != 0)
            return -1;
    }
    const char *ev = "CUPTI_ACTIVITY_KIND_CUDA_EVENT";
    if (has_table(n, ev)) {
        snprintf(sql, sizeof sql, "SELECT deviceId, streamId, correlationId, %s, eventId FROM %s",
                 opt(n, ev, "globalPid"), ev);
        if (each_row(n, ev, sql, event_row) != 0)
            return -1;
    }
    const char *ts = "TARGET_INFO_CUDA_STREAM";
    if (has_table(n, ts) && each_row(n, ts, "SELECT streamId, processId, flag FROM "
                                     "TARGET_INFO_CUDA_STREAM", stream_row) != 0)
        return -1;
    const char *tn = "TARGET_INFO_CUDA_NULL_STREAM";
    if (has_table(n, tn) && each_row(n, tn, "SELECT streamId, processId FROM "
                                     "TARGET_INFO_CUDA_NULL_STREAM", null_stream_row) != 0)
        return -1;
    const char *nv = "NVTX_EVENTS";
    if (has_table(n, nv)) {
        /* push/pop (59) and start/end (60) ranges, NVTX and NVTXt; one still
         * open when the capture ended has no end (no-dur: kept as a point) */
        snprintf(sql, sizeof sql, "SELECT start, end, text, %s, globalTid FROM NVTX_EVENTS "
                 "WHERE eventType IN (59, 60, 70, 71)", opt(n, nv, "textId"));
        if (each_row(n, nv, sql, nvtx_row) != 0)
            return -1;
    }
    return 0;
}

/* Whether the file's schema cannot be read (a truncated or corrupt SQLite
 * file): says so in n->err. */
static bool damaged(nsys *n)
{
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(n->db, "SELECT name FROM sqlite_master", -1, &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
        rc = SQLITE_OK;
    if (rc == SQLITE_OK || rc == SQLITE_DONE) {
        sqlite3_finalize(q);
        return false;
    }
    trace_error_set(n->err, TRACE_ECORRUPT,
                    "%s: a SQLite file that cannot be read (%s): truncated or corrupt; an Nsight "
                    "Systems export or a syncsim database must be whole",
                    n->path, sqlite3_errmsg(n->db));
    sqlite3_finalize(q);
    return true;
}

/* An SQLite URI for path that opens it read-only and immutable: a capture
 * is not written while we read it, and its directory may be read-only. */
static char *uri_of(const char *path)
{
    size_t n = strlen(path);
    char *u = malloc(n * 3 + 32);
    if (!u)
        return NULL;
    char *o = u + sprintf(u, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p == '%' || *p == '?' || *p == '#' || *p < 0x21 || *p >= 0x7f)
            o += sprintf(o, "%%%02X", *p);
        else
            *o++ = (char)*p;
    }
    strcpy(o, "?mode=ro&immutable=1");
    return u;
}

/* A SQLite file with a table only Nsight Systems exports have. The syncsim
 * database format comes first in the table, so ours are never claimed. A
 * SQLite file whose tables cannot be read (truncated, corrupt) is claimed
 * too, so that nsys_open says so. */
static bool nsys_sniff(const char *path, const unsigned char *head, size_t n)
{
    if (n < 16 || memcmp(head, "SQLite format 3", 16) != 0)
        return false;
    int meta = trace_sqlite_has_table(path, "META_DATA_EXPORT");
    return meta != 0 ||
           trace_sqlite_has_table(path, "EXPORT_META_DATA") == 1 ||
           trace_sqlite_has_table(path, "TARGET_INFO_SESSION_START_TIME") == 1 ||
           trace_sqlite_has_table(path, "CUPTI_ACTIVITY_KIND_RUNTIME") == 1;
}

static int nsys_open(trace_source *src, const char *path, const trace_source_opts *o,
                     trace_error *err)
{
    trace *t = trace_new();
    nsys n = { .path = path, .t = t, .err = err, .only_pid = CAP_NONE, .progress = &o->progress };
    char *uri = uri_of(path);
    char version[64];
    int rc = -1;
    if (!t || !uri || !(n.c = capture_new(t, path))) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (sqlite3_open_v2(uri, &n.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        trace_error_set(err, TRACE_EIO, "%s: %s", path,
                        n.db ? sqlite3_errmsg(n.db) : "cannot open");
        goto done;
    }
    if (damaged(&n) || check_version(&n, version, sizeof version) != 0 || check_tables(&n) != 0)
        goto done;
    if (o->progress.fn) {
        /* a total for the progress: SQLite counts rows faster than we read them */
        n.counting = true;
        if (read_tables(&n) != 0)
            goto done;
        n.counting = false;
    }
    trace_progress_say(n.progress, "rows", 0, n.total);
    if (read_tables(&n) != 0)
        goto done;
    trace_progress_say(n.progress, "rows", n.total, n.total);
    if (trace_set_meta(t, "capture.format", "nsys") != 0 ||
        trace_set_meta(t, "capture.schema", version) != 0 ||
        capture_count(n.c, "capture.rows", n.rows) != 0) {
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    sqlite3_finalize(n.str_q);  /* the tables are read: close before building */
    n.str_q = NULL;
    sqlite3_close(n.db);
    n.db = NULL;
    if (capture_open_reader(n.c, NULL, &src->reader, path, err) != 0)
        goto done;
    n.c = NULL;
    t = NULL;                   /* the reader owns them */
    rc = 0;
done:
    sqlite3_finalize(n.str_q);
    if (n.db)
        sqlite3_close(n.db);
    capture_free(n.c);
    free(n.str_cache);
    free(uri);
    trace_free(t);
    return rc;
}

const trace_format trace_format_nsys = {
    "nsys", "an Nsight Systems export (nsys export --type sqlite; schemas 2.x and 3.x)", false,
    nsys_sniff, nsys_open,
};
