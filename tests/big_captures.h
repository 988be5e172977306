/*
 * big_captures.h -- captures in the foreign formats, written at test time
 * as large as a test asks, for the tests of how far their reading has got
 * (tests/traces/test_source_progress.c, tests/cli/test_cli_progress.c):
 * LAUNCHES kernel launches on one host thread and 4 streams, every 64th
 * followed by a stream synchronisation, as
 *
 *   a PyTorch profiler (Kineto) trace   a launch and its kernel (2 events),
 *                                       plain JSON or gzipped
 *   an Nsight Systems export (3.x)      a runtime and a kernel row
 *   a `syncsim capture` CUDA log        an api and a gpu record
 *
 * Each returns 0, or -1 when the file cannot be written.
 */
#ifndef SYNCSIM_TESTS_BIG_CAPTURES_H
#define SYNCSIM_TESTS_BIG_CAPTURES_H

#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <zlib.h>

/* Writes through stdio or zlib. */
typedef struct big_sink {
    FILE *f;
    gzFile gz;
    bool failed;
} big_sink;

static inline void big_put(big_sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void big_put(big_sink *s, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bool ok = s->gz ? gzwrite(s->gz, buf, (unsigned)n) == n
                    : fwrite(buf, 1, (size_t)n, s->f) == (size_t)n;
    s->failed |= !ok;
}

/* The Kineto trace of `launches` launches at path, gzipped when gz. */
static inline int big_kineto(const char *path, uint64_t launches, bool gz)
{
    big_sink s = { 0 };
    if (gz)
        s.gz = gzopen(path, "wb1");
    else
        s.f = fopen(path, "w");
    if (!s.f && !s.gz)
        return -1;
    big_put(&s, "{\"schemaVersion\": 1, \"traceEvents\": [\n");
    for (uint64_t i = 0; i < launches; i++) {
        long long ts = 1000000 + 10 * (long long)i, corr = (long long)i + 1;
        int stream = 7 + (int)(i % 4);
        big_put(&s, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                    "\"pid\": 1, \"tid\": 100, \"ts\": %lld, \"dur\": 4, \"args\": "
                    "{\"correlation\": %lld}},\n", ts, corr);
        big_put(&s, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"kernel_%d\", \"pid\": 0, "
                    "\"tid\": %d, \"ts\": %lld, \"dur\": 5, \"args\": {\"device\": 0, "
                    "\"stream\": %d, \"correlation\": %lld}},\n",
                (int)(i % 40), stream, ts + 6, stream, corr);
        if (i % 64 == 63) {
            long long sc = (long long)(launches + i + 1);
            big_put(&s, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                        "\"cudaStreamSynchronize\", \"pid\": 1, \"tid\": 100, \"ts\": %lld, "
                        "\"dur\": 3, \"args\": {\"correlation\": %lld}},\n", ts + 5, sc);
            big_put(&s, "{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"Stream Sync\", "
                        "\"pid\": 0, \"tid\": %d, \"ts\": %lld, \"dur\": 2, \"args\": "
                        "{\"cuda_sync_kind\": \"Stream Sync\", \"stream\": %d, \"device\": 0, "
                        "\"correlation\": %lld}},\n", stream, ts + 5, stream, sc);
        }
    }
    big_put(&s, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"tid\": 0, \"args\": "
                "{\"name\": \"gpu\"}}\n]}\n");
    int rc = gz ? gzclose(s.gz) : fclose(s.f);
    return rc != 0 || s.failed ? -1 : 0;
}

/* The Nsight Systems export (schema 3.x) of `launches` launches at path;
 * *rows gets the rows the importer reads. */
static inline int big_nsys(const char *path, uint64_t launches, uint64_t *rows)
{
    unlink(path);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return sqlite3_close(db), -1;
    int rc = sqlite3_exec(
        db,
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
        "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
        "INSERT INTO META_DATA_EXPORT VALUES('EXPORT_SCHEMA_VERSION', '3.13.2');"
        "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO StringIds VALUES(1, 'cudaLaunchKernel_v7000'), (2, 'kernel_0');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,"
        " eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,"
        " nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,"
        " deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,"
        " correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,"
        " shortName INTEGER NOT NULL);",
        NULL, NULL, NULL);
    char sql[512];
    /* pid 10, tid 11: globalTid (1 << 56) | pid << 24 | tid */
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %llu) "
             "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT 1000 + 10 * i, 1004 + 10 * i, 0, "
             "%lld, i + 1, 1, 0, NULL FROM n",
             (unsigned long long)launches, (1LL << 56) | (10LL << 24) | 11);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %llu) "
             "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT 1006 + 10 * i, 1009 + 10 * i, 0, 1, "
             "7 + i %% 4, i + 1, %lld, 2, 2 FROM n",
             (unsigned long long)launches, (1LL << 56) | (10LL << 24));
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    *rows = 2 * launches;
    return rc == SQLITE_OK ? 0 : -1;
}

/* The CUDA log of `launches` launches at path. */
static inline int big_cuda_log(const char *path, uint64_t launches)
{
    big_sink s = { .f = fopen(path, "w") };
    if (!s.f)
        return -1;
    big_put(&s, "syncsim-cuda-log 1\n");
    for (int k = 0; k < 4; k++)
        big_put(&s, "stream pid=1 dev=0 stream=%d kind=nonblocking\n", 13 + k);
    for (uint64_t i = 0; i < launches; i++) {
        long long t = 1000 + 10 * (long long)i, corr = (long long)i + 1;
        int stream = 13 + (int)(i % 4);
        big_put(&s, "api pid=1 tid=1 t0=%lld t1=%lld corr=%lld dev=0 stream=%d "
                    "name=cudaLaunchKernel\n", t, t + 4, corr, stream);
        big_put(&s, "gpu pid=1 corr=%lld kind=kernel dev=0 stream=%d t0=%lld t1=%lld "
                    "name=kernel_%d\n", corr, stream, t + 6, t + 9, (int)(i % 40));
    }
    return fclose(s.f) != 0 || s.failed ? -1 : 0;
}

#endif
