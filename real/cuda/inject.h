/*
 * inject.h -- the parts of libsyncsim_inject.so, the CUPTI injection
 * library of `syncsim capture`, and what the unit test
 * (tests/cuda/test_inject.c) and the benchmark (bench/bench_inject.c) drive
 * of them with a stand-in CUDA driver and CUPTI (tests/cuda/fake_cupti.c).
 * Not installed; nothing here is syncsim's public interface.
 *
 * The files stand in layers, each calling only those below it:
 *
 *   inject.c         the callbacks: runtime and driver API, resources,
 *                    NVTX, activity; streams, events, call sites
 *   inject_params.c  kernel parameters: layouts, the addresses the library
 *                    has seen allocated, graphs snapshotted at instantiation
 *   inject_log.c     the event log: per-thread rings of binary events, one
 *                    writer thread that formats and writes them
 *
 * The cost model (bench/bench_inject.c measures it): a launch costs the
 * calling thread a few table look-ups and two binary events appended to
 * its own ring: no system call, no lock, no formatting. The writer thread
 * turns events into lines of the log (traces/formats/cuda_log.c's format)
 * every ILOG_PERIOD_MS, and symbolisation happens after the run.
 */
#ifndef SYNCSIM_REAL_CUDA_INJECT_H
#define SYNCSIM_REAL_CUDA_INJECT_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* inject_log.c: the event log.                                        */

#define ILOG_PERIOD_MS 2        /* the writer drains the rings this often */
#define ILOG_CLOCK_MS 100       /* and writes a clock pair this often */
#define ILOG_SITE_FRAMES 4      /* return addresses kept per call */
#define ILOG_PY_MAX 200         /* bytes of a Python line kept */

/* Which optional arguments of an API call are there. */
enum {
    ILOG_STREAM = 1 << 0, ILOG_EVENT = 1 << 1, ILOG_PTR = 1 << 2, ILOG_SIZE = 1 << 3,
    ILOG_SRC = 1 << 4, ILOG_DST = 1 << 5, ILOG_BYTES = 1 << 6,
};

/* A runtime or driver API call at its exit (an `api` record). */
typedef struct ilog_api {
    uint64_t t0, t1;
    int64_t corr, dev, stream;
    uint64_t event, ptr, size, src, dst, bytes;
    uint32_t has;               /* ILOG_* bits */
    const char *name;           /* CUPTI's function name: a constant string */
} ilog_api;

/* A pointer-sized value of a kernel's parameters (a `param` record): the
 * whole parameter idx (word 0), or word (word - 1) of a structure passed
 * by value. */
typedef struct ilog_word {
    uint16_t idx, word;
    uint32_t pad;
    uint64_t v;
} ilog_word;

/* Opens the log at path (appending), writes its first clock pair, starts
 * the writer thread. clock: the log's clock (CUPTI's). 0, or -1 with
 * errno set. */
int ilog_open(const char *path, uint64_t (*clock)(void));
/* Whether the log is open (events are dropped while it is not). */
int ilog_on(void);
/* One api record; site: n return addresses; py: "FILE:LINE" or NULL. */
void ilog_api_call(const ilog_api *a, const uint64_t *site, int n_site, const char *py);
/* Room for n words of the param record of launch corr (dcorr: the driver
 * call's own id when it differs, else -1; node: a graph node's id or -1);
 * fill some and pass how many to ilog_params_end. NULL: the log is off. */
ilog_word *ilog_params_begin(int64_t corr, int64_t dcorr, int64_t node, size_t n);
void ilog_params_end(size_t used);
/* A launch whose parameter layout the driver refused (CUresult status). */
void ilog_params_refused(int64_t corr, int64_t dcorr, int64_t node, int status);
/* One record formatted here (rare records: streams, host marks, ranges,
 * activity, modules, notes); a line without its newline. */
void ilog_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Formats and writes every event so far (the writer does it every
 * ILOG_PERIOD_MS; tests and the exit call it). */
void ilog_flush(void);
/* Stops the writer, writes a last clock pair and everything left, closes. */
void ilog_close(void);
/* From a fatal signal's handler: what is in the rings, written as it can. */
void ilog_on_fatal(void);
/* The calling process's id and thread's id, cached (no system call). */
int ilog_pid(void);
long ilog_tid(void);
/* CPU time the writer thread has used, in ns (the benchmark). */
uint64_t ilog_writer_ns(void);
/* Lines written so far (the tests). */
uint64_t ilog_lines(void);

/* ------------------------------------------------------------------ */
/* inject_params.c: kernel parameters.                                  */

#include <cuda.h>

/* Depth of syncsim's own driver calls on this thread: the callbacks they
 * cause are not the program's and are not logged. */
extern __thread int inject_glue;

/* Resolves the driver functions newer than CUDA 12.0 (cuFuncGetParamInfo,
 * cuKernelGetParamInfo: 12.4) through cuGetProcAddress, so that an older
 * driver still loads the library; says in one line on stderr when they
 * are missing (launches then carry no accesses and are counted). */
void iparam_init(void);
/* Bytes [ptr, ptr + size) hold memory the program allocated, mapped or
 * registered (device, pinned, managed): words of structures passed by
 * value are kept only when they point into such memory. */
void iparam_known(uint64_t ptr, uint64_t size);
/* The program's modules changed (unloaded): parameter layouts are asked
 * again (a new function may take an unloaded one's handle). */
void iparam_modules_changed(void);
/* Writes the param record of a launch of f (args: kernelParams, else the
 * packed buffer of extra). corr/dcorr as for ilog_params_begin. */
void iparam_launch(CUfunction f, void **args, void **extra, int64_t corr, int64_t dcorr);
/* A graph node was cloned (CUPTI's resource callback) on this thread. */
void iparam_node_cloned(uint64_t orig_id, uint64_t clone_id);
/* exec was instantiated from graph: its kernel nodes and their parameters
 * are kept now (PyTorch destroys the graph right after instantiation). */
void iparam_graph_instantiated(CUgraphExec exec, CUgraph graph);
/* exec was destroyed: its snapshot goes. */
void iparam_graph_destroyed(CUgraphExec exec);
/* A launch of exec: the param records of its kernel nodes, from the
 * snapshot. */
void iparam_graph_launch(CUgraphExec exec, int64_t corr, int64_t dcorr);
/* Functions whose layout the driver refused so far (the exit's note). */
uint64_t iparam_refused(void);

#endif
