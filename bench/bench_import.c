/*
 * bench_import.c -- import speed of captured traces, and peak memory.
 *
 *   bench_import [LAUNCHES] [DIR]
 *   bench_import LAUNCHES DIR NSYS_FILE [COPIES]
 *
 * Generates synthetic captures of LAUNCHES kernel launches (default 500000)
 * in DIR (default /tmp) in several shapes, then opens each through the one
 * door (trace_source_open: parse, map, build) and reads every statement, in
 * a child process so that each shape's peak RSS is its own:
 *
 *   typical     1 host thread, 4 streams, 40 kernel names
 *   streams     1 host thread, 64 streams
 *   threads     32 host threads, 2 streams each
 *   names       every kernel a distinct name
 *
 * Kineto: each launch is a cudaLaunchKernel, its kernel and an ac2g flow
 * pair (4 events), every 64th launch adds a cudaStreamSynchronize and its
 * sync row, every 8th a cpu_op; plain JSON and gzipped. nsys: a runtime
 * and a kernel row per launch, sync rows likewise, in the 3.x schema.
 * Prints events (rows) per second and peak RSS; a benchmark, not a test.
 *
 * With NSYS_FILE, a real capture instead (issue 25: the nsys export in
 * /work/shared/external-traces, x300 = 1.79 M rows): its activity rows
 * repeated COPIES times (default 300), read through the door and imported
 * by `syncsim import`; then, when LAUNCHES > 0, a generated Kineto capture
 * of LAUNCHES launches (412500: 1.65 M events) the same way.
 */
#include "traces/trace.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

typedef struct shape {
    const char *name;
    int threads, streams_per_thread, names; /* names 0: every kernel distinct */
} shape;

static const shape shapes[] = {
    { "typical", 1, 4, 40 },
    { "streams", 1, 64, 40 },
    { "threads", 32, 2, 40 },
    { "names", 1, 4, 0 },
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Writes through stdio or gzip. */
typedef struct sink {
    FILE *f;
    gzFile gz;
} sink;

static void put(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sink *s, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (s->gz)
        gzwrite(s->gz, buf, (unsigned)n);
    else
        fwrite(buf, 1, (size_t)n, s->f);
}

/* A Kineto trace; returns its event count. */
static uint64_t write_kineto(const char *path, const shape *sh, uint64_t launches, bool gz)
{
    sink s = { 0 };
    if (gz)
        s.gz = gzopen(path, "wb1");
    else
        s.f = fopen(path, "w");
    if (!s.f && !s.gz) {
        perror(path);
        exit(1);
    }
    uint64_t events = 0;
    put(&s, "{\"schemaVersion\": 1, \"traceEvents\": [\n");
    int64_t *host_t = calloc((size_t)sh->threads, sizeof *host_t);
    for (uint64_t i = 0; i < launches; i++) {
        int th = (int)(i % (uint64_t)sh->threads);
        int stream = 7 + th * sh->streams_per_thread + (int)((i / (uint64_t)sh->threads) %
                                                             (uint64_t)sh->streams_per_thread);
        int64_t ts = 1000000 + host_t[th];
        host_t[th] += 7;
        uint64_t corr = i + 1;
        char name[64];
        if (sh->names)
            snprintf(name, sizeof name, "kernel_%d", (int)(i % (uint64_t)sh->names));
        else
            snprintf(name, sizeof name, "kernel_%llu", (unsigned long long)i);
        if (i % 8 == 0) {
            put(&s, "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op\", \"pid\": 1, "
                    "\"tid\": %d, \"ts\": %lld, \"dur\": 6, \"args\": {\"External id\": %llu, "
                    "\"Record function id\": %llu}},\n", 100 + th, (long long)ts,
                (unsigned long long)corr, (unsigned long long)corr);
            events++;
        }
        put(&s, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                "\"pid\": 1, \"tid\": %d, \"ts\": %lld.250, \"dur\": 4, \"args\": "
                "{\"cbid\": 211, \"correlation\": %llu, \"External id\": %llu}},\n",
            100 + th, (long long)ts, (unsigned long long)corr, (unsigned long long)corr);
        put(&s, "{\"ph\": \"s\", \"id\": %llu, \"pid\": 1, \"tid\": %d, \"ts\": %lld.250, "
                "\"cat\": \"ac2g\", \"name\": \"ac2g\"},\n", (unsigned long long)corr, 100 + th,
            (long long)ts);
        put(&s, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, "
                "\"ts\": %lld, \"dur\": 5, \"args\": {\"queued\": 0, \"device\": 0, "
                "\"context\": 1, \"stream\": %d, \"correlation\": %llu, \"External id\": %llu, "
                "\"registers per thread\": 32, \"grid\": [8, 16, 5], \"block\": [128, 1, 1]}},\n",
            name, stream, (long long)ts + 10, stream, (unsigned long long)corr,
            (unsigned long long)corr);
        put(&s, "{\"ph\": \"f\", \"id\": %llu, \"pid\": 0, \"tid\": %d, \"ts\": %lld, "
                "\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"},\n",
            (unsigned long long)corr, stream, (long long)ts + 10);
        events += 4;
        if (i % 64 == 63) {
            uint64_t sc = launches + i + 1;
            put(&s, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                    "\"cudaStreamSynchronize\", \"pid\": 1, \"tid\": %d, \"ts\": %lld, \"dur\": 3, "
                    "\"args\": {\"correlation\": %llu}},\n", 100 + th, (long long)ts + 5,
                (unsigned long long)sc);
            put(&s, "{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"Stream Sync\", "
                    "\"pid\": 0, \"tid\": %d, \"ts\": %lld, \"dur\": 2, \"args\": "
                    "{\"cuda_sync_kind\": \"Stream Sync\", \"stream\": %d, \"device\": 0, "
                    "\"correlation\": %llu}},\n", stream, (long long)ts + 5, stream,
                (unsigned long long)sc);
            events += 2;
        }
    }
    put(&s, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"tid\": 0, \"args\": "
            "{\"name\": \"gpu\"}}\n]}\n");
    events++;
    free(host_t);
    if (gz)
        gzclose(s.gz);
    else
        fclose(s.f);
    return events;
}

/* An nsys 3.x export; returns its row count (of the tables read). */
static uint64_t write_nsys(const char *path, const shape *sh, uint64_t launches)
{
    unlink(path);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        exit(1);
    sqlite3_exec(db,
                 "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                 "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
                 "INSERT INTO META_DATA_EXPORT VALUES('EXPORT_SCHEMA_VERSION', '3.13.2');"
                 "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
                 "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER "
                 "NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId "
                 "INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId "
                 "INTEGER);"
                 "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER "
                 "NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId "
                 "INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName "
                 "INTEGER NOT NULL, shortName INTEGER NOT NULL);"
                 "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION(start INTEGER NOT NULL, end "
                 "INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
                 "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, syncType "
                 "INTEGER NOT NULL, eventId INTEGER NOT NULL);"
                 "BEGIN;"
                 "INSERT INTO StringIds VALUES(1, 'cudaLaunchKernel_v7000'), "
                 "(2, 'cudaStreamSynchronize_v3020');",
                 NULL, NULL, NULL);
    sqlite3_stmt *str, *rt, *k, *sy;
    sqlite3_prepare_v2(db, "INSERT INTO StringIds VALUES(?1, ?2)", -1, &str, NULL);
    sqlite3_prepare_v2(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(?1, ?2, 0, ?3, ?4, ?5, "
                           "0, NULL)", -1, &rt, NULL);
    sqlite3_prepare_v2(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(?1, ?2, 0, 1, ?3, ?4, "
                           "?5, ?6, ?6)", -1, &k, NULL);
    sqlite3_prepare_v2(db, "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES(?1, ?2, 0, 1, "
                           "?3, ?4, ?5, 3, -1)", -1, &sy, NULL);
    uint64_t rows = 0, n_names = sh->names ? (uint64_t)sh->names : launches;
    for (uint64_t i = 0; i < n_names; i++) {
        char name[64];
        snprintf(name, sizeof name, "kernel_%llu", (unsigned long long)i);
        sqlite3_bind_int64(str, 1, (int64_t)(10 + i));
        sqlite3_bind_text(str, 2, name, -1, SQLITE_TRANSIENT);
        sqlite3_step(str);
        sqlite3_reset(str);
    }
    int64_t gpid = (1LL << 56) | (1234LL << 24);
    for (uint64_t i = 0; i < launches; i++) {
        int th = (int)(i % (uint64_t)sh->threads);
        int stream = 7 + th * sh->streams_per_thread + (int)((i / (uint64_t)sh->threads) %
                                                             (uint64_t)sh->streams_per_thread);
        int64_t ts = 1000000 + (int64_t)(i / (uint64_t)sh->threads) * 7000;
        int64_t corr = (int64_t)i + 1;
        sqlite3_bind_int64(rt, 1, ts);
        sqlite3_bind_int64(rt, 2, ts + 4000);
        sqlite3_bind_int64(rt, 3, gpid | (2000 + th));
        sqlite3_bind_int64(rt, 4, corr);
        sqlite3_bind_int64(rt, 5, 1);
        sqlite3_step(rt);
        sqlite3_reset(rt);
        sqlite3_bind_int64(k, 1, ts + 10000);
        sqlite3_bind_int64(k, 2, ts + 15000);
        sqlite3_bind_int64(k, 3, stream);
        sqlite3_bind_int64(k, 4, corr);
        sqlite3_bind_int64(k, 5, gpid);
        sqlite3_bind_int64(k, 6, (int64_t)(10 + i % n_names));
        sqlite3_step(k);
        sqlite3_reset(k);
        rows += 2;
        if (i % 64 == 63) {
            int64_t sc = (int64_t)(launches + i + 1);
            sqlite3_bind_int64(rt, 1, ts + 5000);
            sqlite3_bind_int64(rt, 2, ts + 6000);
            sqlite3_bind_int64(rt, 3, gpid | (2000 + th));
            sqlite3_bind_int64(rt, 4, sc);
            sqlite3_bind_int64(rt, 5, 2);
            sqlite3_step(rt);
            sqlite3_reset(rt);
            sqlite3_bind_int64(sy, 1, ts + 5000);
            sqlite3_bind_int64(sy, 2, ts + 6000);
            sqlite3_bind_int64(sy, 3, stream);
            sqlite3_bind_int64(sy, 4, sc);
            sqlite3_bind_int64(sy, 5, gpid);
            sqlite3_step(sy);
            sqlite3_reset(sy);
            rows += 2;
        }
    }
    sqlite3_finalize(str);
    sqlite3_finalize(rt);
    sqlite3_finalize(k);
    sqlite3_finalize(sy);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    return rows;
}

/* Opens and reads path in a child; prints the figures. */
static void measure(const char *what, const char *shape_name, const char *path, uint64_t events,
                    const char *unit)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        double t0 = now();
        trace_source src;
        trace_error err = { 0 };
        if (trace_source_open(&src, path, NULL, &err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            _exit(1);
        }
        trace_stmt s;
        uint64_t n = 0;
        while (trace_reader_next(&src.reader, &s, &err) == 1)
            n++;
        double dt = now() - t0;
        trace_source_close(&src);
        printf("%-12s %-8s %10llu %s  %8.3f s  %6.2f M %s/s  %10llu statements", what,
               shape_name, (unsigned long long)events, unit, dt, events / dt / 1e6, unit,
               (unsigned long long)n);
        fflush(stdout);
        _exit(0);
    }
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec * 1e-6;
    /* CPU time too: on a shared machine the wall clock counts other loads */
    printf("  cpu %6.3f s (%5.2f M %s/cpu-s)  peak RSS %6.1f MiB\n", cpu, events / cpu / 1e6,
           unit, ru.ru_maxrss / 1024.0);
}

/*
 * A real Nsight Systems capture made `copies` times longer: dst is a copy
 * of src whose activity tables (runtime, kernel, memcpy, memset,
 * synchronization) are repeated, each copy shifted in time past the
 * capture's span and in correlationId past its largest, so that launches
 * still pair with their kernels. Returns the rows the importer reads, or 0.
 */
static uint64_t dup_nsys(const char *src, const char *dst, int copies)
{
    static const char *const tables[] = {
        "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    };
    unlink(dst);
    sqlite3 *in = NULL, *db = NULL;
    uint64_t rows = 0;
    if (sqlite3_open_v2(src, &in, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_open(dst, &db) != SQLITE_OK)
        goto done;
    sqlite3_backup *b = sqlite3_backup_init(db, "main", in, "main");
    if (!b || sqlite3_backup_step(b, -1) != SQLITE_DONE || sqlite3_backup_finish(b) != SQLITE_OK)
        goto done;
    int64_t t_min = INT64_MAX, t_max = 0, corr_max = 0;
    char sql[4096];
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        sqlite3_stmt *q;
        snprintf(sql, sizeof sql, "SELECT min(start), max(end), max(correlationId) FROM %s",
                 tables[i]);
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
            continue;           /* a table this capture has not */
        if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
            if (sqlite3_column_int64(q, 0) < t_min)
                t_min = sqlite3_column_int64(q, 0);
            if (sqlite3_column_int64(q, 1) > t_max)
                t_max = sqlite3_column_int64(q, 1);
            if (sqlite3_column_int64(q, 2) > corr_max)
                corr_max = sqlite3_column_int64(q, 2);
        }
        sqlite3_finalize(q);
    }
    int64_t span = t_max - t_min + 1000;
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        /* INSERT INTO T(cols) SELECT cols, start and end shifted by ?1 and
         * correlationId by ?2, FROM T WHERE rowid <= the original's last */
        sqlite3_stmt *q;
        snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", tables[i]);
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
            continue;
        char cols[2048] = "", exprs[2048] = "";
        size_t nc = 0, ne = 0;
        while (sqlite3_step(q) == SQLITE_ROW) {
            const char *c = (const char *)sqlite3_column_text(q, 1);
            if (sqlite3_column_int(q, 5))
                continue;       /* a primary key: numbered afresh */
            const char *shift = strcmp(c, "start") == 0 || strcmp(c, "end") == 0 ? " + ?1"
                                : strcmp(c, "correlationId") == 0             ? " + ?2"
                                                                              : "";
            nc += (size_t)snprintf(cols + nc, sizeof cols - nc, "%s\"%s\"", nc ? ", " : "", c);
            ne += (size_t)snprintf(exprs + ne, sizeof exprs - ne, "%s\"%s\"%s", ne ? ", " : "", c,
                                   shift);
        }
        sqlite3_finalize(q);
        if (!nc)
            continue;
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
        sqlite3_prepare_v2(db, sql, -1, &q, NULL);
        int64_t n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
        sqlite3_finalize(q);
        snprintf(sql, sizeof sql, "INSERT INTO %s(%s) SELECT %s FROM %s WHERE rowid <= ?3",
                 tables[i], cols, exprs, tables[i]);
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
            fprintf(stderr, "bench_import: %s: %s\n", tables[i], sqlite3_errmsg(db));
            continue;
        }
        sqlite3_stmt *last;
        snprintf(sql, sizeof sql, "SELECT max(rowid) FROM %s", tables[i]);
        sqlite3_prepare_v2(db, sql, -1, &last, NULL);
        int64_t last_row = sqlite3_step(last) == SQLITE_ROW ? sqlite3_column_int64(last, 0) : 0;
        sqlite3_finalize(last);
        for (int k = 1; k < copies; k++) {
            sqlite3_bind_int64(q, 1, span * k);
            sqlite3_bind_int64(q, 2, (corr_max + 1) * k);
            sqlite3_bind_int64(q, 3, last_row);
            sqlite3_step(q);
            sqlite3_reset(q);
        }
        sqlite3_finalize(q);
        rows += (uint64_t)n * (uint64_t)copies;
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
done:
    sqlite3_close(in);
    sqlite3_close(db);
    return rows;
}

/* `syncsim import path -o DIR/import.db` in a child: wall and CPU time. */
static void measure_import(const char *what, const char *path, const char *dir, uint64_t events,
                           const char *unit)
{
    char db[512];
    snprintf(db, sizeof db, "%s/bench-import-out.db", dir);
    unlink(db);
    fflush(stdout);
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execl(SYNCSIM_BINARY, SYNCSIM_BINARY, "import", path, "-o", db, (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    double dt = now() - t0;
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec * 1e-6;
    printf("%-12s %-8s %10llu %s  %8.3f s  %6.2f M %s/s  syncsim import%s\n", what, "import",
           (unsigned long long)events, unit, dt, events / dt / 1e6, unit,
           WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "" : " (FAILED)");
    printf("  cpu %6.3f s (%5.2f M %s/cpu-s)  peak RSS %6.1f MiB\n", cpu, events / cpu / 1e6,
           unit, ru.ru_maxrss / 1024.0);
    unlink(db);
}

/* Removes a generated capture, unless BENCH_IMPORT_KEEP is set (to profile it). */
static void drop(const char *path)
{
    if (getenv("BENCH_IMPORT_KEEP"))
        printf("  kept %s\n", path);
    else
        unlink(path);
}

int main(int argc, char **argv)
{
    uint64_t launches = argc > 1 ? strtoull(argv[1], NULL, 10) : 500000;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char path[512];
    if (argc > 3) {             /* a real nsys capture, duplicated */
        int copies = argc > 4 ? atoi(argv[4]) : 300;
        snprintf(path, sizeof path, "%s/bench-import-real-x%d.sqlite", dir, copies);
        uint64_t rows = dup_nsys(argv[3], path, copies);
        if (!rows) {
            fprintf(stderr, "bench_import: %s: cannot duplicate it\n", argv[3]);
            return 1;
        }
        printf("import speed, %s x%d (%llu rows the importer reads)\n", argv[3], copies,
               (unsigned long long)rows);
        measure("nsys-real", "read", path, rows, "rows");
        measure_import("nsys-real", path, dir, rows, "rows");
        if (launches) {         /* and a generated Kineto capture of that many launches */
            snprintf(path, sizeof path, "%s/bench-import-kineto.json", dir);
            uint64_t ev = write_kineto(path, &shapes[0], launches, false);
            measure("kineto", "read", path, ev, "events");
            measure_import("kineto", path, dir, ev, "events");
            drop(path);
        }
        snprintf(path, sizeof path, "%s/bench-import-real-x%d.sqlite", dir, copies);
        drop(path);
        return 0;
    }
    printf("import speed, %llu launches per capture (synthetic; see the head comment)\n",
           (unsigned long long)launches);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *sh = &shapes[i];
        snprintf(path, sizeof path, "%s/bench-import-%s.json", dir, sh->name);
        uint64_t ev = write_kineto(path, sh, launches, false);
        measure("kineto", sh->name, path, ev, "events");
        drop(path);
        snprintf(path, sizeof path, "%s/bench-import-%s.json.gz", dir, sh->name);
        ev = write_kineto(path, sh, launches, true);
        measure("kineto-gz", sh->name, path, ev, "events");
        drop(path);
        snprintf(path, sizeof path, "%s/bench-import-%s.sqlite", dir, sh->name);
        uint64_t rows = write_nsys(path, sh, launches);
        measure("nsys", sh->name, path, rows, "rows");
        drop(path);
    }
    return 0;
}
