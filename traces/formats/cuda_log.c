/*
 * cuda_log.c -- the event log of `syncsim capture` (the CUPTI injection
 * library real/cuda/inject.c and its cuBLAS/NCCL shim) as a capture.
 *
 * The log is plain text, one record a line, appended as the program runs
 * (a crash loses at most the line being written). It says what the CUDA
 * calls were and with which arguments; it decides nothing. This file
 * parses it into a `capture` and the shared mapping of traces/formats/capture.c
 * writes the trace: which call synchronises (capture_call), which
 * allocates or frees (capture_memcall), how memory becomes buffers
 * (capture_buffer), submission, order, events, the legacy default stream.
 * No CUDA header is needed: the module is tested on synthetic logs
 * (tests/traces/test_cuda_log.c).
 *
 *   syncsim-cuda-log 1
 *   stream pid=P dev=D stream=S kind=blocking|nonblocking|legacy|per-thread
 *   api    pid=P tid=T t0=NS t1=NS corr=C [dev=D] [stream=S] [event=E]
 *          [ptr=ADDR] [size=N] [src=ADDR] [dst=ADDR] [bytes=N]
 *          [site=ADDR,ADDR,...] [py=FILE:LINE] name=CALL
 *   gpu    pid=P corr=C kind=kernel|memcpy|memset dev=D stream=S t0=NS t1=NS
 *          [bytes=N] [srcmem=M] [dstmem=M] [srcdev=D] [dstdev=D] [node=N] name=NAME
 *   param  pid=P corr=C [dcorr=C2] [node=N] (idx=I [word=W] ptr=ADDR [mode=r|rw]
 *          | refused=STATUS)
 *   range  pid=P tid=T t0=NS t1=NS name=NAME
 *   host   pid=P tid=T t0=NS t1=NS mode=r|w|rw ptr=ADDR size=N name=LABEL
 *   lib    pid=P tid=T t0=NS t1=NS dev=D stream=S [acc=ADDR:LEN:r|w|rw ...]
 *          [gemm=TA,TB,M,N,K,LDA,LDB,LDC,ELEM,BETA a=ADDR b=ADDR c=ADDR]
 *          [nccl=COUNT,ELEM send=ADDR recv=ADDR] [comm=ID ranks=N]
 *          [coll=KIND bytes=N] name=CALL
 *   block  pid=P dev=D stream=S (t0=NS | us=US) action=ACTION ptr=ADDR size=N
 *          [py=FILE:LINE] [name=FRAME]
 *   clock  pid=P t0=NS unix=NS
 *   module pid=P base=ADDR lo=ADDR hi=ADDR name=PATH
 *   sym    pid=P addr=ADDR name=FILE:LINE
 *   note   pid=P what=WORD n=N [name=TEXT]
 *
 * Numbers are decimal, addresses hexadecimal (0x...); name= takes the rest
 * of the line. Memory kinds M: pageable, pinned, device, managed, host.
 *
 *   stream  how a stream was created (the legacy default stream and
 *           per-thread default streams: kind legacy / per-thread; a
 *           per-thread default stream behaves as a blocking stream).
 *   api     a runtime or driver call at its exit, with the arguments that
 *           matter: an allocation's ptr= and size=, a free's ptr=, a copy's
 *           src=/dst=/bytes=, a memset's ptr=/bytes=, a record's or wait's
 *           stream= and event=, a synchronise's stream= or dev=.
 *   gpu     CUPTI activity: when the work of call corr ran. A CUDA graph
 *           launch has one per node (node=), all with the launch's corr;
 *           capture.graph_kernels counts those that are kernels and
 *           capture.graph_kernels_accessing those of them with an access
 *           (the corpus asks that graph replays are seen).
 *   param   parameter I (from 0) of the kernel(s) of call corr (and node),
 *           a pointer-sized value: read-only when the kernel's demangled
 *           name (its gpu record) says the pointee is const
 *           (capture_param_const), else read and write; mode= overrides.
 *           word=W: the W-th 8-byte word of parameter I, a structure passed
 *           by value, in increasing W (PyTorch's TensorIterator kernels:
 *           std::array<char*, N> or at::detail::Array<char*, N>, whose first
 *           word is the output, written, and the others inputs, read; the
 *           closure of its broadcasting kernel, whose first word into an
 *           allocation is the output; another structure's words are read
 *           and written: aggregate_kind).
 *           It becomes an access from the pointer to the end of its
 *           allocation; a value that points into no allocation is not a
 *           pointer the log knows and is counted (the ledger's unresolved-param).
 *           refused=STATUS: the driver refused the kernel's parameter layout
 *           (cuFuncGetParamInfo's CUresult): the launch is counted in the
 *           ledger's param-layout unless its kernel takes no parameters
 *           (a demangled name ending in "()").
 *   range   an NVTX range (push/pop or start/end): iteration marks.
 *   host    a host thread's own access, made known with an NVTX mark
 *           "syncsim:r PTR SIZE" (or w, rw): CUPTI cannot see loads.
 *   block   an allocator block (PyTorch's caching allocator: a tensor's
 *           bytes inside a cudaMalloc segment), from its memory history
 *           (action alloc, free_requested, free_completed, segment_alloc,
 *           segment_free, segment_map; others are read and unused). A
 *           segment (segment_alloc, segment_map) at an address the log saw
 *           no allocation of (expandable segments are mapped with cuMemMap,
 *           which the injection library does not record) becomes device
 *           memory of its size. A kernel parameter
 *           that points into the latest block allocated over its bytes (at
 *           or before the launch) becomes an access from the pointer to the
 *           end of that block, not of the segment. Reuse needs no rule of
 *           its own: a block reused on another stream is the same bytes of
 *           the segment, so the old user's kernel and the new user's race
 *           unless something orders them (record_stream makes the allocator
 *           record an event on the user's stream and reuse the block only
 *           after a query of it answered complete: a synchronise, below).
 *           us= is microseconds of the epoch (PyTorch's clock), turned into
 *           the log's clock through the process's clock records.
 *   clock   the log's clock (t0) and the epoch (unix, ns) read together, at
 *           the start, every 100 ms and at exit: an epoch time between two
 *           pairs is interpolated between them (the clocks drift apart by
 *           tens of microseconds over a run), beyond them along the nearest
 *           two.
 *   module  an object loaded in process P at exit: where the return
 *           addresses of site= lie (lo..hi), and its load address.
 *   sym     a return address of site= resolved after the run (file:line,
 *           `syncsim capture`); "??:0" when unknown.
 *   note    what the injection library counted and could not record, by
 *           WORD (malformed-mark: NVTX marks starting "syncsim:" that do not
 *           read MODE PTR SIZE; TEXT is the first): into the ledger. Other
 *           words are read and unused.
 *
 * A call's site (its Python line py=, else the first of its return
 * addresses with a source line, else OBJECT+0xOFFSET) is shown as the
 * attribute site= of the statements it becomes: its host statement and
 * its GPU work, matched by time. A param's dcorr= is the driver call's
 * own id when the launch was taken inside a runtime call: activity filed
 * under it belongs to corr. A query (cudaEventQuery) in the log succeeded:
 * it is a synchronise of its event, named CALL(complete).
 *   lib     a cuBLAS or NCCL call, recorded by the shim at the library call
 *           with its documented read/write set (acc=, or a GEMM's arguments,
 *           whose set capture_gemm_spans computes, or an NCCL call's, whose
 *           set and KIND capture_nccl_spans gives): one statement on its stream
 *           (an op, or for NCCL a `collective` of communicator comm=) in
 *           place of the kernels the thread launched inside the call.
 *
 * The log is read line by line (getline): progress, in bytes of the file, is
 * said every CUDALOG_PROGRESS_BYTES of lines (trace_progress); then, as a
 * second pass, in the records translate() matches (calls, library calls,
 * host accesses, blocks), which takes longer than the reading.
 */
#include "formats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CUDALOG_MAGIC "syncsim-cuda-log"
#define LIB_CORR_BASE (INT64_C(1) << 60)  /* synthetic call ids of library calls */

/* One record (a line). A log of 10^6 launches holds 3 * 10^6 of them:
 * what only library calls carry is in a table of its own (lib_args). */
typedef struct rec {
    char kind;                  /* a api, s stream, g gpu, p param, r range, h host, l lib,
                                 * b block, c clock, m module, y sym, n note */
    uint8_t action;             /* block: block_action */
    uint8_t mode;
    uint8_t gkind;              /* cap_gpu_kind */
    bool has_ptr, has_src, has_dst;
    uint8_t refused;            /* param: refused= (the driver refused the layout) */
    int64_t pid, tid, t0, t1, corr, dev, stream, event, node, idx;
    int64_t dcorr, us, word;    /* us: block; clock: unix= */
    uint64_t base;              /* module: load address */
    uint32_t py;                /* py=FILE:LINE (string id) */
    uint32_t site_first, n_site;/* api: site= addresses in log.sites */
    int64_t srcdev, dstdev;
    uint64_t ptr, size, src, dst, bytes;
    cap_mem srcmem, dstmem;
    cap_stream_kind skind;
    uint32_t name;
    uint32_t what;              /* note: what= (string id) */
    uint32_t lib;               /* its lib_args (TRACE_NONE: none) */
    uint32_t line;
} rec;

/* What a library call (a `lib` record) says besides its times and stream. */
typedef struct lib_args {
    bool has_gemm, has_nccl;
    uint64_t nccl[2];           /* COUNT ELEM (send= recv= in the record's src, dst) */
    int64_t gemm[10];           /* TA TB M N K LDA LDB LDC ELEM BETA */
    uint64_t abc[3];            /* a= b= c= */
    uint64_t ranks;
    uint32_t comm, coll;
    uint32_t acc_first, n_acc;  /* its accesses in log.accs */
} lib_args;

/* What a `block` record says the caching allocator did. */
typedef enum {
    BLOCK_OTHER = 0, BLOCK_ALLOC, BLOCK_FREE_REQUESTED, BLOCK_FREE_COMPLETED, BLOCK_SEGMENT_ALLOC,
    BLOCK_SEGMENT_FREE, BLOCK_SEGMENT_MAP,
} block_action;

typedef struct lib_acc {
    uint64_t ptr, len;
    uint8_t mode;
} lib_acc;

typedef struct cudalog {
    const char *path;
    trace *t;
    capture *c;
    rec *recs;
    uint64_t n, cap;
    lib_args *libargs;
    uint64_t n_libargs, cap_libargs;
    lib_acc *accs;
    uint64_t n_accs, cap_accs;
    uint64_t *sites;            /* api site= addresses */
    uint64_t n_sites, cap_sites;
    int64_t *site_t;            /* statement time -> site (string id): open addressing, */
    uint32_t *site_v;           /* empty keys TRACE_TIME_NONE */
    uint64_t site_n, site_cap;
    uint64_t unresolved, lib_kernels, truncated, refused, malformed_marks;
    uint64_t graph_kernels, graph_kernels_accessing;
    uint64_t lookups;           /* steps of the searches that match records to
                                 * records (capture.log_lookups: the reader's
                                 * work, linear in the log's records) */
    trace_error *err;
    const trace_progress *progress; /* told the bytes read of the file's */
} cudalog;

/* Bytes of lines, and records translated, between two reports of
 * progress (the records: a power of two). */
#define CUDALOG_PROGRESS_BYTES (1u << 20)
#define CUDALOG_PROGRESS_RECORDS 4096

static int64_t push_rec(cudalog *l)
{
    return capture_push((void **)&l->recs, &l->n, &l->cap, sizeof *l->recs);
}

static int oom(cudalog *l)
{
    trace_error_set(l->err, TRACE_ENOMEM, "%s: out of memory", l->path);
    return -1;
}

static int bad(cudalog *l, uint32_t line, const char *what, const char *word, size_t len)
{
    trace_error_set(l->err, TRACE_ESYNTAX, "%s:%u: %s '%.*s'", l->path, line, what,
                    (int)(len > 60 ? 60 : len), word);
    return -1;
}

/* Word s[0..n) as a NUL-terminated number text in buf; false when empty
 * or too long to be one. */
static bool number_text(const char *s, size_t n, char buf[32])
{
    if (n == 0 || n >= 32)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    return true;
}

static bool parse_u64(const char *s, size_t n, uint64_t *out)
{
    char buf[32], *end;
    if (!number_text(s, n, buf))
        return false;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno || *end || buf[0] == '-')
        return false;
    *out = v;
    return true;
}

static bool parse_i64(const char *s, size_t n, int64_t *out)
{
    char buf[32], *end;
    if (!number_text(s, n, buf))
        return false;
    long long v = strtoll(buf, &end, 0);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool is(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

static bool parse_mode(const char *s, size_t n, uint8_t *mode)
{
    *mode = is(s, n, "r") ? TRACE_R : is(s, n, "w") ? TRACE_W : is(s, n, "rw") ? TRACE_RW : 0;
    return *mode != 0;
}

static bool parse_mem(const char *s, size_t n, cap_mem *m)
{
    static const struct { const char *w; cap_mem m; } mems[] = {
        { "pageable", CAP_MEM_PAGEABLE }, { "pinned", CAP_MEM_PINNED },
        { "device", CAP_MEM_DEVICE }, { "managed", CAP_MEM_MANAGED }, { "host", CAP_MEM_HOST },
        { "unknown", CAP_MEM_UNKNOWN },
    };
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (is(s, n, mems[i].w)) {
            *m = mems[i].m;
            return true;
        }
    return false;
}

/* The library arguments of record i, made when first asked; NULL: out of
 * memory. */
static lib_args *lib_args_of(cudalog *l, int64_t i)
{
    if (l->recs[i].lib != TRACE_NONE)
        return &l->libargs[l->recs[i].lib];
    int64_t j = capture_push((void **)&l->libargs, &l->n_libargs, &l->cap_libargs,
                             sizeof *l->libargs);
    if (j < 0 || j >= TRACE_NONE)
        return NULL;
    l->libargs[j] = (lib_args){ .comm = TRACE_NONE, .coll = TRACE_NONE };
    l->recs[i].lib = (uint32_t)j;
    return &l->libargs[j];
}

/* One record line (without its newline). */
static int parse_line(cudalog *l, char *line, size_t len, uint32_t no)
{
    if (len == 0 || line[0] == '#')
        return 0;
    static const struct { const char *w; char k; } kinds[] = {
        { "api", 'a' }, { "stream", 's' }, { "gpu", 'g' }, { "param", 'p' },
        { "range", 'r' }, { "host", 'h' }, { "lib", 'l' }, { "block", 'b' },
        { "clock", 'c' }, { "module", 'm' }, { "sym", 'y' }, { "note", 'n' },
    };
    size_t wl = strcspn(line, " ");
    char k = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && !k; i++)
        if (is(line, wl, kinds[i].w))
            k = kinds[i].k;
    if (!k)
        return bad(l, no, "unknown record (expected api, stream, gpu, param, range, host, lib, "
                          "block, clock, module, sym or note):", line, wl);
    int64_t i = push_rec(l);
    if (i < 0)
        return oom(l);
    rec *r = &l->recs[i];
    *r = (rec){ .kind = k, .pid = 0, .tid = 0, .t0 = CAP_NONE, .t1 = CAP_NONE, .corr = CAP_NONE,
                .dev = CAP_NONE, .stream = CAP_NONE, .event = CAP_NONE, .node = CAP_NONE,
                .idx = CAP_NONE,
                .srcdev = CAP_NONE, .dstdev = CAP_NONE, .name = TRACE_NONE, .lib = TRACE_NONE,
                .what = TRACE_NONE,
                .line = no, .dcorr = CAP_NONE, .us = CAP_NONE, .word = CAP_NONE,
                .py = TRACE_NONE, .site_first = (uint32_t)l->n_sites };
    char *p = line + wl;
    bool has_name = false, has_t = false;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        char *eq = p;
        while (*eq && *eq != '=' && *eq != ' ')
            eq++;
        if (*eq != '=')
            return bad(l, no, "expected KEY=VALUE, got", p, strcspn(p, " "));
        const char *key = p;
        size_t kl = (size_t)(eq - p);
        const char *v = eq + 1;
        if (is(key, kl, "name")) {
            r->name = trace_intern(l->t, v, strlen(v));
            if (r->name == TRACE_NONE)
                return oom(l);
            has_name = true;
            break;
        }
        size_t vl = strcspn(v, " ");
        p = (char *)v + vl;
        bool ok = true;
        if (is(key, kl, "pid"))
            ok = parse_i64(v, vl, &r->pid);
        else if (is(key, kl, "tid"))
            ok = parse_i64(v, vl, &r->tid);
        else if (is(key, kl, "t0"))
            ok = parse_i64(v, vl, &r->t0), has_t = true;
        else if (is(key, kl, "t1"))
            ok = parse_i64(v, vl, &r->t1);
        else if (is(key, kl, "corr"))
            ok = parse_i64(v, vl, &r->corr);
        else if (is(key, kl, "word"))
            ok = parse_i64(v, vl, &r->word) && r->word >= 0;
        else if (is(key, kl, "dcorr"))
            ok = parse_i64(v, vl, &r->dcorr);
        else if (is(key, kl, "refused") && k == 'p') {
            int64_t status;
            ok = parse_i64(v, vl, &status);
            r->refused = 1;
        } else if (is(key, kl, "what") && k == 'n') {
            if ((r->what = trace_intern(l->t, v, vl)) == TRACE_NONE)
                return oom(l);
        } else if (is(key, kl, "n") && k == 'n')
            ok = parse_u64(v, vl, &r->size);
        else if (is(key, kl, "us"))
            ok = parse_i64(v, vl, &r->us), has_t = true;
        else if (is(key, kl, "unix"))
            ok = parse_i64(v, vl, &r->us);
        else if (is(key, kl, "base"))
            ok = parse_u64(v, vl, &r->base);
        else if (is(key, kl, "lo") && k == 'm')
            ok = parse_u64(v, vl, &r->src);
        else if (is(key, kl, "hi") && k == 'm')
            ok = parse_u64(v, vl, &r->dst);
        else if (is(key, kl, "addr"))
            ok = parse_u64(v, vl, &r->ptr), r->has_ptr = true;
        else if (is(key, kl, "py")) {
            if ((r->py = trace_intern(l->t, v, vl)) == TRACE_NONE)
                return oom(l);
        } else if (is(key, kl, "action") && k == 'b') {
            static const char *const actions[] = { "", "alloc", "free_requested",
                                                   "free_completed", "segment_alloc",
                                                   "segment_free", "segment_map" };
            r->action = BLOCK_OTHER;    /* segment_map, oom, snapshot, ...: kept, unused */
            for (uint8_t j = 1; j < sizeof actions / sizeof actions[0]; j++)
                if (is(v, vl, actions[j]))
                    r->action = j;
        } else if (is(key, kl, "site")) {
            /* ADDR,ADDR,...: return addresses, innermost first */
            const char *q = v, *e = v + vl;
            while (ok && q < e) {
                const char *comma = memchr(q, ',', (size_t)(e - q));
                const char *end = comma ? comma : e;
                uint64_t a;
                ok = parse_u64(q, (size_t)(end - q), &a);
                int64_t j = ok ? capture_push((void **)&l->sites, &l->n_sites, &l->cap_sites,
                                              sizeof *l->sites)
                               : 0;
                if (j < 0)
                    return oom(l);
                if (ok) {
                    l->sites[j] = a;
                    l->recs[i].n_site++;
                }
                q = comma ? comma + 1 : e;
            }
            r = &l->recs[i];
        }
        else if (is(key, kl, "dev"))
            ok = parse_i64(v, vl, &r->dev);
        else if (is(key, kl, "stream"))
            ok = parse_i64(v, vl, &r->stream);
        else if (is(key, kl, "event"))
            ok = parse_i64(v, vl, &r->event);
        else if (is(key, kl, "idx"))
            ok = parse_i64(v, vl, &r->idx) && r->idx >= 0;
        else if (is(key, kl, "node"))
            ok = parse_i64(v, vl, &r->node);
        else if (is(key, kl, "srcdev"))
            ok = parse_i64(v, vl, &r->srcdev);
        else if (is(key, kl, "dstdev"))
            ok = parse_i64(v, vl, &r->dstdev);
        else if (is(key, kl, "ptr"))
            ok = parse_u64(v, vl, &r->ptr), r->has_ptr = true;
        else if (is(key, kl, "size"))
            ok = parse_u64(v, vl, &r->size);
        else if (is(key, kl, "src"))
            ok = parse_u64(v, vl, &r->src), r->has_src = true;
        else if (is(key, kl, "dst"))
            ok = parse_u64(v, vl, &r->dst), r->has_dst = true;
        else if (is(key, kl, "ranks")) {
            lib_args *la = lib_args_of(l, i);
            r = &l->recs[i];
            ok = la && parse_u64(v, vl, &la->ranks);
        }
        else if (is(key, kl, "bytes"))
            ok = parse_u64(v, vl, &r->bytes);
        else if (is(key, kl, "srcmem"))
            ok = parse_mem(v, vl, &r->srcmem);
        else if (is(key, kl, "dstmem"))
            ok = parse_mem(v, vl, &r->dstmem);
        else if (is(key, kl, "mode"))
            ok = parse_mode(v, vl, &r->mode);
        else if (is(key, kl, "kind") && k == 'g') {
            ok = is(v, vl, "kernel") || is(v, vl, "memcpy") || is(v, vl, "memset");
            r->gkind = is(v, vl, "memcpy") ? CAP_MEMCPY : is(v, vl, "memset") ? CAP_MEMSET
                                                                             : CAP_KERNEL;
        } else if (is(key, kl, "kind") && k == 's') {
            r->skind = is(v, vl, "blocking") || is(v, vl, "per-thread") ? CAP_STREAM_BLOCKING
                       : is(v, vl, "nonblocking")                      ? CAP_STREAM_NONBLOCKING
                       : is(v, vl, "legacy")                           ? CAP_STREAM_LEGACY
                                                                       : CAP_STREAM_UNKNOWN;
            ok = r->skind != CAP_STREAM_UNKNOWN;
        } else if (is(key, kl, "comm") || is(key, kl, "coll")) {
            uint32_t id = trace_intern(l->t, v, vl);
            if (id == TRACE_NONE)
                return oom(l);
            lib_args *la = lib_args_of(l, i);
            if (!la)
                return oom(l);
            r = &l->recs[i];
            *(is(key, kl, "comm") ? &la->comm : &la->coll) = id;
        } else if (is(key, kl, "gemm")) {
            int64_t g[10];
            int got = 0;
            const char *q = v, *e = v + vl;
            while (ok && got < 10 && q < e) {
                const char *comma = memchr(q, ',', (size_t)(e - q));
                const char *end = comma ? comma : e;
                ok = parse_i64(q, (size_t)(end - q), &g[got++]);
                q = comma ? comma + 1 : e;
            }
            ok = ok && got == 10 && q >= e;
            lib_args *la = ok ? lib_args_of(l, i) : NULL;
            r = &l->recs[i];
            if (ok && !la)
                return oom(l);
            for (int j = 0; ok && j < 10; j++)
                la->gemm[j] = g[j];
            if (ok)
                la->has_gemm = true;
        } else if (is(key, kl, "nccl")) {
            const char *comma = memchr(v, ',', vl);
            lib_args *la = lib_args_of(l, i);
            if (!la)
                return oom(l);
            r = &l->recs[i];
            ok = comma && parse_u64(v, (size_t)(comma - v), &la->nccl[0]) &&
                 parse_u64(comma + 1, (size_t)(v + vl - comma - 1), &la->nccl[1]);
            la->has_nccl = ok;
        } else if (is(key, kl, "send")) {
            ok = parse_u64(v, vl, &r->src);
        } else if (is(key, kl, "recv")) {
            ok = parse_u64(v, vl, &r->dst);
        } else if (is(key, kl, "a") || is(key, kl, "b") || is(key, kl, "c")) {
            lib_args *la = lib_args_of(l, i);
            if (!la)
                return oom(l);
            r = &l->recs[i];
            ok = parse_u64(v, vl, &la->abc[key[0] - 'a']);
        } else if (is(key, kl, "acc")) {
            /* ADDR:LEN:MODE */
            const char *c1 = memchr(v, ':', vl);
            const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(v + vl - c1 - 1)) : NULL;
            lib_acc a;
            ok = c1 && c2 && parse_u64(v, (size_t)(c1 - v), &a.ptr) &&
                 parse_u64(c1 + 1, (size_t)(c2 - c1 - 1), &a.len) &&
                 parse_mode(c2 + 1, (size_t)(v + vl - c2 - 1), &a.mode);
            if (ok) {
                lib_args *la = lib_args_of(l, i);
                int64_t j = la ? capture_push((void **)&l->accs, &l->n_accs, &l->cap_accs,
                                              sizeof *l->accs)
                               : -1;
                if (j < 0)
                    return oom(l);
                l->accs[j] = a;
                r = &l->recs[i];
                la = &l->libargs[r->lib];
                if (!la->n_acc)
                    la->acc_first = (uint32_t)j;
                la->n_acc++;
            }
        } else {
            return bad(l, no, "unknown key", key, kl);
        }
        if (!ok)
            return bad(l, no, "bad value of", key, (size_t)(v + vl - key));
    }
    r = &l->recs[i];
    bool named = k != 's' && k != 'p' && k != 'b' && k != 'c' && k != 'y' && k != 'n';
    bool timed = k != 's' && k != 'p' && k != 'm' && k != 'y' && k != 'n';
    if (!has_name && (named || k == 'y'))
        return bad(l, no, "record without its name= (last field):", line, wl);
    if (!has_t && timed)
        return bad(l, no, "record without its time t0=:", line, wl);
    if (k == 'b' && (!r->has_ptr || r->dev == CAP_NONE))
        return bad(l, no, "block record without its ptr= and dev=:", line, wl);
    if (k == 'c' && (r->t0 == CAP_NONE || r->us == CAP_NONE))
        return bad(l, no, "clock record without its t0= and unix=:", line, wl);
    if (k == 'y' && !r->has_ptr)
        return bad(l, no, "sym record without its addr=:", line, wl);
    if ((k == 'a' || k == 'g' || k == 'p') && r->corr == CAP_NONE)
        return bad(l, no, "record without its correlation id corr=:", line, wl);
    if ((k == 'g' || k == 's' || k == 'l') && (r->dev == CAP_NONE || r->stream == CAP_NONE))
        return bad(l, no, "record without its dev= and stream=:", line, wl);
    if (r->t1 == CAP_NONE)
        r->t1 = r->t0;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Translation: the calls in time order, so that a pointer resolves to  */
/* the allocation that held it when the work was launched.              */

static const cudalog *sort_log;

static int by_time(const void *pa, const void *pb)
{
    const rec *a = &sort_log->recs[*(const uint64_t *)pa], *b = &sort_log->recs[*(const uint64_t *)pb];
    if (a->t0 != b->t0)
        return a->t0 < b->t0 ? -1 : 1;
    /* a library call encloses the calls it makes: it comes first; an
     * allocator block at the same time comes before the launch that uses it */
    if ((a->kind == 'l') != (b->kind == 'l'))
        return a->kind == 'l' ? -1 : 1;
    if ((a->kind == 'b') != (b->kind == 'b'))
        return a->kind == 'b' ? -1 : 1;
    if (a->corr != b->corr)
        return a->corr < b->corr ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

static int by_corr(const void *pa, const void *pb)
{
    const rec *a = &sort_log->recs[*(const uint64_t *)pa], *b = &sort_log->recs[*(const uint64_t *)pb];
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->corr != b->corr)
        return a->corr < b->corr ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

/* The first index in idx[0..n) (sorted by_corr) of records with (pid, corr). */
static uint64_t find_corr(const cudalog *l, const uint64_t *idx, uint64_t n, int64_t pid,
                          int64_t corr)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const rec *r = &l->recs[idx[mid]];
        if (r->pid < pid || (r->pid == pid && r->corr < corr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A library call while it runs: its accesses resolved when it was made,
 * and the span of the kernels it launched. */
typedef struct open_lib {
    uint64_t rec;
    uint32_t host;
    int64_t k0, k1;
    uint64_t acc_first, n_acc;  /* in the resolved list */
    int64_t around;             /* the call of its thread it is inside of, or -1 */
} open_lib;

typedef struct res_acc {
    uint32_t buf;
    uint64_t lo, hi;
    uint8_t mode;
} res_acc;

/* An allocator block (PyTorch's caching allocator: a tensor's bytes
 * inside a cudaMalloc segment), the latest allocated over its bytes. */
typedef struct live_block {
    int64_t pid;
    uint64_t lo, hi;
} live_block;

typedef struct xlate {
    cudalog *l;
    live_block *blocks;         /* sorted by (pid, lo), disjoint */
    uint64_t n_blocks, cap_blocks;
    uint64_t *gpus, n_gpus;     /* gpu records by corr */
    uint64_t *params, n_params; /* param records by corr */
    open_lib *libs;
    uint64_t n_libs, cap_libs;
    trace_u64map lib_latest;    /* (pid, tid) -> its latest library call */
    trace_u64map py_block;      /* pid -> its latest allocator block with a Python line */
    trace_u64map work_end;      /* (pid, tid) -> the end of its latest work call */
    res_acc *res;
    uint64_t n_res, cap_res;
    bool *gpu_done;
} xlate;

/* The buffer and offset of addr: a known allocation, else (host memory
 * CUDA never allocated) the bytes [addr, addr + len) as a pageable buffer. */
static uint32_t resolve(cudalog *l, int64_t pid, uint64_t addr, uint64_t len, bool host_ok,
                        uint64_t *off)
{
    uint64_t base;
    uint32_t b = capture_buffer_at(l->c, pid, addr, &base);
    if (b != TRACE_NONE) {
        *off = addr - base;
        return b;
    }
    if (!host_ok || len == 0)
        return TRACE_NONE;
    *off = 0;
    return capture_buffer(l->c, pid, CAP_MEM_PAGEABLE, -1, addr, len);
}

/* The index of the first block of x at or after (pid, addr). */
static uint64_t block_index(const xlate *x, int64_t pid, uint64_t addr)
{
    uint64_t lo = 0, hi = x->n_blocks;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const live_block *b = &x->blocks[mid];
        if (b->pid < pid || (b->pid == pid && b->lo < addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Block [lo, hi) of pid was allocated: it owns those bytes now, and the
 * blocks it overlaps (freed, split or merged since) are forgotten. */
static int block_alloc(xlate *x, int64_t pid, uint64_t lo, uint64_t hi)
{
    uint64_t first = block_index(x, pid, lo), end = first;
    if (first > 0 && x->blocks[first - 1].pid == pid && x->blocks[first - 1].hi > lo)
        first--;
    while (end < x->n_blocks && x->blocks[end].pid == pid && x->blocks[end].lo < hi)
        end++;
    if (first == end) {         /* nothing replaced: make room */
        if (capture_push((void **)&x->blocks, &x->n_blocks, &x->cap_blocks,
                         sizeof *x->blocks) < 0)
            return oom(x->l);
        memmove(&x->blocks[first + 1], &x->blocks[first],
                (x->n_blocks - 1 - first) * sizeof *x->blocks);
        end = first + 1;
    } else if (end - first > 1) {
        memmove(&x->blocks[first + 1], &x->blocks[end], (x->n_blocks - end) * sizeof *x->blocks);
        x->n_blocks -= end - first - 1;
    }
    x->blocks[first] = (live_block){ pid, lo, hi };
    return 0;
}

/* The block of pid that holds addr, or NULL. */
static const live_block *block_at(const xlate *x, int64_t pid, uint64_t addr)
{
    uint64_t i = block_index(x, pid, addr + 1);
    if (i == 0)
        return NULL;
    const live_block *b = &x->blocks[i - 1];
    return b->pid == pid && addr >= b->lo && addr < b->hi ? b : NULL;
}

/* What a structure passed by value holds (parameter idx of a kernel whose
 * demangled signature is sig), as far as its type says:
 *   AGG_OPERANDS  PyTorch's TensorIterator operands, std::array<char*, N>
 *                 (PyTorch 2.x) or at::detail::Array<char*, N> (before):
 *                 word 0 is the output, written; the others inputs, read;
 *   AGG_CLOSURE   the closure of gpu_kernel_impl's legacy (broadcasting)
 *                 elementwise kernel, "gpu_kernel_impl...::{lambda(int)#1}":
 *                 it holds the same std::array after its offset calculator,
 *                 so its first word that points into an allocation is the
 *                 output and the later ones inputs;
 *   AGG_OTHER     anything else (a reduction's ReduceOp, cuBLASLt's
 *                 parameters): its addresses are read and written. */
typedef enum { AGG_OTHER, AGG_OPERANDS, AGG_CLOSURE } agg_kind;

static agg_kind aggregate_kind(const char *sig, int64_t idx)
{
    size_t len;
    const char *p = idx >= 0 ? capture_param_text(sig, (unsigned)idx, &len) : NULL;
    static const char *const operands[] = { "std::array<char*,", "at::detail::Array<char*," };
    for (size_t i = 0; p && i < sizeof operands / sizeof operands[0]; i++)
        if (len > strlen(operands[i]) && strncmp(p, operands[i], strlen(operands[i])) == 0)
            return AGG_OPERANDS;
    static const char closure[] = "at::native::gpu_kernel_impl", lambda[] = "::{lambda(int)#";
    if (p && len > sizeof closure && strncmp(p, closure, sizeof closure - 1) == 0 &&
        memmem(p, len, lambda, sizeof lambda - 1))
        return AGG_CLOSURE;
    return AGG_OTHER;
}

static int gpu_of(xlate *x, uint64_t gi, const rec *call)
{
    cudalog *l = x->l;
    const rec *g = &l->recs[x->gpus[gi]];
    uint32_t st = capture_stream(l->c, g->pid, g->dev, g->stream);
    if (st == TRACE_NONE)
        return oom(l);
    cap_gpu cg = { .stream = st, .kind = (cap_gpu_kind)g->gkind, .t0 = g->t0, .t1 = g->t1,
                   .corr = g->corr, .name = g->name, .bytes = g->bytes, .src = g->srcmem,
                   .dst = g->dstmem, .src_device = g->srcdev, .dst_device = g->dstdev,
                   .comm = TRACE_NONE, .coll = TRACE_NONE };
    if (capture_gpu(l->c, &cg) != 0)
        return oom(l);
    if (g->gkind == CAP_MEMCPY && call && (call->has_src || call->has_dst)) {
        uint64_t n = call->bytes ? call->bytes : g->bytes, off;
        bool sh = g->srcmem == CAP_MEM_PAGEABLE || g->srcmem == CAP_MEM_HOST;
        bool dh = g->dstmem == CAP_MEM_PAGEABLE || g->dstmem == CAP_MEM_HOST;
        uint32_t b;
        if (call->has_src) {
            if ((b = resolve(l, g->pid, call->src, n, sh, &off)) != TRACE_NONE) {
                if (capture_gpu_access(l->c, b, off, off + n, TRACE_R) != 0)
                    return oom(l);
            } else {
                l->unresolved++;
            }
        }
        if (call->has_dst) {
            if ((b = resolve(l, g->pid, call->dst, n, dh, &off)) != TRACE_NONE) {
                if (capture_gpu_access(l->c, b, off, off + n, TRACE_W) != 0)
                    return oom(l);
            } else {
                l->unresolved++;
            }
        }
    } else if (g->gkind == CAP_MEMSET && call && call->has_ptr) {
        uint64_t n = call->bytes ? call->bytes : g->bytes, off;
        uint32_t b = resolve(l, g->pid, call->ptr, n, false, &off);
        if (b == TRACE_NONE)
            l->unresolved++;
        else if (capture_gpu_access(l->c, b, off, off + n, TRACE_W) != 0)
            return oom(l);
    } else if (g->gkind == CAP_KERNEL) {
        /* each pointer parameter: from the pointer to the end of its
         * allocator block when the log has blocks, else of its allocation */
        const char *sig = trace_str(l->t, g->name);
        int64_t output_given = CAP_NONE;   /* the closure whose output word was seen */
        bool refused = false, accessed = false;
        for (uint64_t k = find_corr(l, x->params, x->n_params, g->pid, g->corr);
             k < x->n_params; k++) {
            const rec *p = &l->recs[x->params[k]];
            if (p->pid != g->pid || p->corr != g->corr)
                break;
            if (p->node != g->node)
                continue;
            if (p->refused) {   /* once a launch; a kernel without parameters has none */
                size_t n = strlen(sig);
                l->refused += !refused && !(n >= 2 && strcmp(sig + n - 2, "()") == 0);
                refused = true;
                continue;
            }
            uint64_t off;
            uint32_t b = resolve(l, p->pid, p->ptr, 0, false, &off);
            if (b == TRACE_NONE) {
                l->unresolved++;
                continue;
            }
            uint8_t mode = p->mode;
            if (!mode && p->word != CAP_NONE) {
                /* words come in increasing order (the injection writes them so) */
                switch (aggregate_kind(sig, p->idx)) {
                case AGG_OPERANDS: mode = p->word == 0 ? TRACE_W : TRACE_R; break;
                case AGG_CLOSURE:
                    mode = output_given == p->idx ? TRACE_R : TRACE_W;
                    output_given = p->idx;
                    break;
                default: mode = TRACE_RW; break;
                }
            }
            if (!mode)
                mode = p->idx != CAP_NONE &&
                               capture_param_const(sig, (unsigned)p->idx)
                           ? TRACE_R
                           : TRACE_RW;
            uint64_t end = UINT64_MAX;     /* cut to the buffer's size */
            const live_block *blk = block_at(x, p->pid, p->ptr);
            if (blk && p->ptr - blk->lo <= off)
                end = off + (blk->hi - p->ptr);
            if (capture_gpu_access(l->c, b, off, end, mode) != 0)
                return oom(l);
            accessed = true;
        }
        if (g->node != CAP_NONE) {      /* what the corpus asks of graph replays */
            l->graph_kernels++;
            l->graph_kernels_accessing += accessed;
        }
    }
    return 0;
}

static uint64_t thread_key(int64_t pid, int64_t tid)
{
    return (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
}

/* The index of the library call open on (pid, tid) at time t, or -1: the
 * thread's latest, else the call it is inside of, and so on (library calls
 * come in time order, so this is O(nesting)). */
static int64_t lib_around(xlate *x, int64_t pid, int64_t tid, int64_t t)
{
    const uint64_t *latest = trace_u64map_get(&x->lib_latest, thread_key(pid, tid));
    for (int64_t i = latest ? (int64_t)*latest : -1; i >= 0; i = x->libs[i].around) {
        x->l->lookups++;
        const rec *r = &x->l->recs[x->libs[i].rec];
        if (r->pid != pid || r->tid != tid)
            return -1;          /* another thread under the same key: none known */
        if (t >= r->t0 && t <= r->t1)
            return i;
    }
    return -1;
}

/* Whether call `name` launches, copies or sets memory. */
static bool work_call(const char *name)
{
    static const char *const words[] = { "Launch", "Memcpy", "Memset" };
    if (strncmp(name, "cu", 2) != 0)
        return false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(name, words[i]))
            return true;
    return false;
}

/* The Python line of work call a (record ri) when it has none of its own.
 * PyTorch's bindings release the GIL around every op, so the injection can
 * rarely read the interpreter's frame at a launch; but the caching
 * allocator takes the GIL to record the Python stack of every allocation
 * (its memory history, the `block` records' py=), and an op allocates its
 * outputs right before launching its kernels. So: the line of the latest
 * block of a's process allocated since the thread's previous work call
 * ended. An op that allocates nothing (in place: fill_, add_) gets none
 * and keeps the addresses of its site=. */
static int op_line(xlate *x, uint64_t ri)
{
    cudalog *l = x->l;
    rec *a = &l->recs[ri];
    if (!work_call(trace_str(l->t, a->name)))
        return 0;
    uint64_t *end = trace_u64map_put(&x->work_end, thread_key(a->pid, a->tid), (uint64_t)INT64_MIN);
    if (!end)
        return oom(l);
    const uint64_t *b = trace_u64map_get(&x->py_block, (uint64_t)a->pid);
    if (a->py == TRACE_NONE && b && l->recs[*b].pid == a->pid && l->recs[*b].t0 > (int64_t)*end)
        a->py = l->recs[*b].py;
    *end = (uint64_t)a->t1;
    return 0;
}

static int on_api(xlate *x, const rec *a)
{
    cudalog *l = x->l;
    capture *c = l->c;
    uint32_t host = capture_host(c, a->pid, a->tid);
    const char *name = trace_str(l->t, a->name);
    uint32_t call = a->name;
    if (capture_call(name) == CAP_CALL_QUERY && a->event != CAP_NONE) {
        /* a query the log holds answered "complete": a synchronise of its
         * event (the role table's queries block nothing), named apart */
        char buf[96];
        int n = snprintf(buf, sizeof buf, "%.80s(complete)", name);
        call = trace_intern(l->t, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : 0);
        if (call == TRACE_NONE)
            return oom(l);
        name = trace_str(l->t, a->name);
    }
    if (host == TRACE_NONE || capture_api(c, host, a->pid, a->t0, a->t1, a->corr, call) != 0)
        return oom(l);
    cap_mem mem;
    cap_memcall mc = capture_memcall(name, &mem);
    uint32_t st = TRACE_NONE;
    if (a->stream != CAP_NONE && a->dev != CAP_NONE &&
        (st = capture_stream(c, a->pid, a->dev, a->stream)) == TRACE_NONE)
        return oom(l);
    switch (mc) {
    case CAP_MEMCALL_ALLOC:
    case CAP_MEMCALL_ALLOC_ASYNC: {
        if (!a->has_ptr)
            break;
        uint32_t b = capture_buffer(c, a->pid, mem, mem == CAP_MEM_PINNED ? -1 : a->dev, a->ptr,
                                    a->size);
        if (b == TRACE_NONE ||
            capture_lifetime(c, b, true, host, a->pid, a->t0, a->t1, a->corr,
                             mc == CAP_MEMCALL_ALLOC_ASYNC ? st : TRACE_NONE) != 0)
            return oom(l);
        break;
    }
    case CAP_MEMCALL_FREE:
    case CAP_MEMCALL_FREE_NOSYNC:
    case CAP_MEMCALL_FREE_ASYNC: {
        uint64_t base;
        uint32_t b = a->has_ptr ? capture_buffer_at(c, a->pid, a->ptr, &base) : TRACE_NONE;
        if (b == TRACE_NONE || base != a->ptr)
            break;              /* freeing NULL, or what the log never saw allocated */
        if (capture_lifetime(c, b, false, host, a->pid, a->t0, a->t1, a->corr,
                             mc == CAP_MEMCALL_FREE_ASYNC ? st : TRACE_NONE) != 0)
            return oom(l);
        break;
    }
    default:
        break;
    }
    cap_sync s = { .proc = a->pid, .corr = a->corr, .device = a->dev, .stream = a->stream,
                   .event = a->event, .record_stream = CAP_NONE, .record_corr = CAP_NONE,
                   .t0 = a->t0, .t1 = a->t1 };
    switch (capture_call(name)) {
    case CAP_CALL_RECORD:
        if (capture_record(c, a->pid, a->corr, a->dev, a->stream, a->event) != 0)
            return oom(l);
        break;
    case CAP_CALL_STREAM_WAIT:
        s.kind = CAP_SYNC_STREAM_WAIT;
        break;
    case CAP_CALL_EVENT_SYNC:
        s.kind = CAP_SYNC_EVENT;
        s.stream = CAP_NONE;
        break;
    case CAP_CALL_QUERY:
        /* the log keeps only calls that succeeded: a query of an event
         * that answered "complete" orders what the event covers before the
         * host's next statement, as a synchronise does (PyTorch's caching
         * allocator reuses a record_stream block after such a query) */
        if (a->event != CAP_NONE) {
            s.kind = CAP_SYNC_EVENT;
            s.stream = CAP_NONE;
        }
        break;
    case CAP_CALL_STREAM_SYNC:
        s.kind = CAP_SYNC_STREAM;
        break;
    case CAP_CALL_DEVICE_SYNC:
        s.kind = CAP_SYNC_CONTEXT;
        s.stream = CAP_NONE;
        break;
    default:
        break;
    }
    if (s.kind != CAP_SYNC_UNKNOWN && capture_sync(c, &s) != 0)
        return oom(l);
    /* the work it launched: kernels inside a library call are the call's */
    int64_t around = lib_around(x, a->pid, a->tid, a->t0);
    open_lib *lib = around >= 0 ? &x->libs[around] : NULL;
    for (uint64_t k = find_corr(l, x->gpus, x->n_gpus, a->pid, a->corr); k < x->n_gpus; k++) {
        const rec *g = &l->recs[x->gpus[k]];
        if (g->pid != a->pid || g->corr != a->corr)
            break;
        x->gpu_done[k] = true;
        if (lib && g->gkind == CAP_KERNEL) {
            lib->k0 = lib->k0 == CAP_NONE || g->t0 < lib->k0 ? g->t0 : lib->k0;
            lib->k1 = lib->k1 == CAP_NONE || g->t1 > lib->k1 ? g->t1 : lib->k1;
            l->lib_kernels++;
            continue;
        }
        if (gpu_of(x, k, a) != 0)
            return -1;
    }
    return 0;
}

/* Open library call i reads or writes [ptr, ptr + len) of process pid:
 * an access of the buffer it falls in, or one more unresolved pointer. */
static int lib_access(xlate *x, int64_t i, int64_t pid, uint64_t ptr, uint64_t len, uint8_t mode)
{
    cudalog *l = x->l;
    uint64_t off;
    uint32_t b = resolve(l, pid, ptr, len, false, &off);
    if (b == TRACE_NONE) {
        l->unresolved++;
        return 0;
    }
    int64_t j = capture_push((void **)&x->res, &x->n_res, &x->cap_res, sizeof *x->res);
    if (j < 0)
        return oom(l);
    x->res[j] = (res_acc){ b, off, off + len, mode };
    x->libs[i].n_acc++;
    return 0;
}

static int on_lib(xlate *x, uint64_t ri)
{
    cudalog *l = x->l;
    const rec *r = &l->recs[ri];
    int64_t i = capture_push((void **)&x->libs, &x->n_libs, &x->cap_libs, sizeof *x->libs);
    if (i < 0)
        return oom(l);
    int64_t around = lib_around(x, r->pid, r->tid, r->t0);
    open_lib *o = &x->libs[i];
    *o = (open_lib){ ri, capture_host(l->c, r->pid, r->tid), CAP_NONE, CAP_NONE, x->n_res, 0,
                     around };
    uint64_t *latest = trace_u64map_put(&x->lib_latest, thread_key(r->pid, r->tid), 0);
    if (o->host == TRACE_NONE || !latest)
        return oom(l);
    *latest = (uint64_t)i;
    if (r->lib == TRACE_NONE)
        return 0;
    lib_args *la = &l->libargs[r->lib];
    if (la->has_nccl) {
        cap_span sp[2];
        unsigned n = 0;
        const char *kind = capture_nccl_spans(trace_str(l->t, r->name), r->src, r->dst,
                                              la->nccl[0], (unsigned)la->nccl[1], la->ranks, sp,
                                              &n);
        if (kind && la->coll == TRACE_NONE) {
            uint32_t id = trace_intern_cstr(l->t, kind);
            if (id == TRACE_NONE)
                return oom(l);
            la->coll = id;
            l->recs[ri].bytes = n == 2 ? sp[1].len : sp[0].len;
        }
        for (unsigned k = 0; k < n; k++)
            if (lib_access(x, i, r->pid, sp[k].ptr, sp[k].len, sp[k].mode) != 0)
                return -1;
    }
    if (la->has_gemm) {
        const int64_t *g = la->gemm;
        cap_span sp[3];
        if (capture_gemm_spans(g[0] != 0, g[1] != 0, g[2], g[3], g[4], g[5], g[6], g[7],
                               (unsigned)g[8], g[9] != 0, la->abc[0], la->abc[1], la->abc[2],
                               sp)) {
            for (int k = 0; k < 3; k++)
                if (lib_access(x, i, r->pid, sp[k].ptr, sp[k].len, sp[k].mode) != 0)
                    return -1;
        }
    }
    for (uint32_t k = 0; k < la->n_acc; k++) {
        const lib_acc *a = &l->accs[la->acc_first + k];
        if (lib_access(x, i, r->pid, a->ptr, a->len, a->mode) != 0)
            return -1;
    }
    return 0;
}

/* Each library call as one statement on its stream, submitted by its
 * thread: an op, or a collective of its communicator. */
static int finish_libs(xlate *x)
{
    cudalog *l = x->l;
    for (uint64_t i = 0; i < x->n_libs; i++) {
        const open_lib *o = &x->libs[i];
        const rec *r = &l->recs[o->rec];
        int64_t corr = LIB_CORR_BASE + (int64_t)o->rec;
        uint32_t st = capture_stream(l->c, r->pid, r->dev, r->stream);
        if (st == TRACE_NONE ||
            capture_api(l->c, o->host, r->pid, r->t0, r->t1, corr, r->name) != 0)
            return oom(l);
        static const lib_args none = { .comm = TRACE_NONE, .coll = TRACE_NONE };
        const lib_args *la = r->lib != TRACE_NONE ? &l->libargs[r->lib] : &none;
        bool coll = la->comm != TRACE_NONE && la->coll != TRACE_NONE && la->ranks > 0;
        cap_gpu g = { .stream = st, .kind = coll ? CAP_COLLECTIVE : CAP_KERNEL,
                      .t0 = o->k0 != CAP_NONE ? o->k0 : r->t0,
                      .t1 = o->k1 != CAP_NONE ? o->k1 : r->t1, .corr = corr, .name = r->name,
                      .bytes = r->bytes, .src_device = CAP_NONE, .dst_device = CAP_NONE,
                      .comm = la->comm, .coll = la->coll, .ranks = la->ranks };
        if (capture_gpu(l->c, &g) != 0)
            return oom(l);
        for (uint64_t k = 0; k < o->n_acc; k++) {
            const res_acc *a = &x->res[o->acc_first + k];
            if (capture_gpu_access(l->c, a->buf, a->lo, a->hi, a->mode) != 0)
                return oom(l);
        }
    }
    return 0;
}

/* A process's clock pair: its log clock t and the epoch (unix ns) read
 * together (`clock` records: at the start, every 100 ms, at exit). */
typedef struct clock_pair {
    int64_t pid, unix_ns, t;
} clock_pair;

/* A driver call's own id (dcorr) and the call the program made (corr). */
typedef struct alias_pair {
    int64_t pid, dcorr, corr;
} alias_pair;

static int by_clock(const void *pa, const void *pb)
{
    const clock_pair *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->unix_ns < b->unix_ns ? -1 : a->unix_ns > b->unix_ns;
}

static int by_alias(const void *pa, const void *pb)
{
    const alias_pair *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->dcorr < b->dcorr ? -1 : a->dcorr > b->dcorr;
}

/* The log's time of epoch time u (ns) in process pid, from its clock pairs
 * c[0..n) (sorted by_clock): interpolated between the two pairs around u,
 * beyond them along the nearest two, so that the drift between the clocks
 * (tens of microseconds over a run: the order of the gap between an
 * allocation and its launch) is followed; one pair: its offset; none: the
 * clocks are taken to agree. O(log n). */
static int64_t log_time(cudalog *l, const clock_pair *c, uint64_t n, int64_t pid, int64_t u)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {           /* the first pair at or after (pid, u) */
        uint64_t mid = lo + (hi - lo) / 2;
        l->lookups++;
        if (c[mid].pid < pid || (c[mid].pid == pid && c[mid].unix_ns < u))
            lo = mid + 1;
        else
            hi = mid;
    }
    bool before = lo > 0 && c[lo - 1].pid == pid, after = lo < n && c[lo].pid == pid;
    const clock_pair *a, *b;
    if (before && after) {
        a = &c[lo - 1];
        b = &c[lo];
    } else if (before) {        /* past the last pair: the last two */
        b = &c[lo - 1];
        a = lo > 1 && c[lo - 2].pid == pid ? &c[lo - 2] : b;
    } else if (after) {         /* before the first: the first two */
        a = &c[lo];
        b = lo + 1 < n && c[lo + 1].pid == pid ? &c[lo + 1] : a;
    } else {
        return u;
    }
    if (b->unix_ns == a->unix_ns)
        return u - (a->unix_ns - a->t);
    __int128 d = (__int128)(u - a->unix_ns) * (b->t - a->t) / (b->unix_ns - a->unix_ns);
    return a->t + (int64_t)d;
}

/* Before the translation: block times on the log's clock (a block timed
 * in microseconds of the epoch, as PyTorch's allocator history is, goes
 * through its process's `clock` pairs: log_time), and activity records
 * filed under a driver call's own id (dcorr) moved to the call the program
 * made. O(n log n). */
static int prepare(cudalog *l)
{
    clock_pair *clocks = NULL;
    alias_pair *alias = NULL;
    uint64_t n_clocks = 0, cap_clocks = 0, n_alias = 0, cap_alias = 0;
    for (uint64_t i = 0; i < l->n; i++) {
        const rec *r = &l->recs[i];
        int64_t j = -1;
        if (r->kind == 'c')
            j = capture_push((void **)&clocks, &n_clocks, &cap_clocks, sizeof *clocks);
        else if (r->kind == 'p' && r->dcorr != CAP_NONE && r->dcorr != r->corr)
            j = capture_push((void **)&alias, &n_alias, &cap_alias, sizeof *alias);
        else
            continue;
        if (j < 0) {
            free(clocks);
            free(alias);
            return oom(l);
        }
        if (r->kind == 'c')
            clocks[j] = (clock_pair){ r->pid, r->us, r->t0 };
        else
            alias[j] = (alias_pair){ r->pid, r->dcorr, r->corr };
    }
    if (n_clocks)
        qsort(clocks, n_clocks, sizeof *clocks, by_clock);
    if (n_alias)
        qsort(alias, n_alias, sizeof *alias, by_alias);
    for (uint64_t i = 0; i < l->n; i++) {
        rec *r = &l->recs[i];
        if (r->kind == 'b' && r->t0 == CAP_NONE)
            r->t0 = r->t1 = log_time(l, clocks, n_clocks, r->pid, r->us * 1000);
        if (r->kind != 'g' || !n_alias)
            continue;
        uint64_t lo = 0, hi = n_alias;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            l->lookups++;
            if (alias[mid].pid < r->pid || (alias[mid].pid == r->pid && alias[mid].dcorr < r->corr))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n_alias && alias[lo].pid == r->pid && alias[lo].dcorr == r->corr)
            r->corr = alias[lo].corr;
    }
    free(clocks);
    free(alias);
    return 0;
}

static uint64_t site_slot(const int64_t *keys, uint64_t cap, int64_t t)
{
    uint64_t h = (uint64_t)t * UINT64_C(0x9e3779b97f4a7c15);
    uint64_t i = (h >> 17) & (cap - 1);
    while (keys[i] != TRACE_TIME_NONE && keys[i] != t)
        i = (i + 1) & (cap - 1);
    return i;
}

/* Statements at time t show site `site` (the first call to claim t keeps it). */
static int site_put(cudalog *l, int64_t t, uint32_t site)
{
    if (t == TRACE_TIME_NONE)
        return 0;
    if (2 * (l->site_n + 1) > l->site_cap) {
        uint64_t cap = l->site_cap ? 2 * l->site_cap : 1024;
        int64_t *keys = malloc(cap * sizeof *keys);
        uint32_t *vals = malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return -1;
        }
        for (uint64_t i = 0; i < cap; i++)
            keys[i] = TRACE_TIME_NONE;
        for (uint64_t i = 0; i < l->site_cap; i++)
            if (l->site_t[i] != TRACE_TIME_NONE) {
                uint64_t j = site_slot(keys, cap, l->site_t[i]);
                keys[j] = l->site_t[i];
                vals[j] = l->site_v[i];
            }
        free(l->site_t);
        free(l->site_v);
        l->site_t = keys;
        l->site_v = vals;
        l->site_cap = cap;
    }
    uint64_t i = site_slot(l->site_t, l->site_cap, t);
    if (l->site_t[i] == TRACE_TIME_NONE) {
        l->site_t[i] = t;
        l->site_v[i] = site;
        l->site_n++;
    }
    return 0;
}

/* Whether a symboliser's answer names a source line ("file.c:12"), not
 * "??:0" or "file.c:?". */
static bool has_line(const char *at)
{
    const char *colon = at ? strrchr(at, ':') : NULL;
    return colon && colon != at && at[0] != '?' && colon[1] >= '1' && colon[1] <= '9';
}

/* The site of api record a: its Python line, else the first of its return
 * addresses that the `sym` records put on a source line, else the first as
 * OBJECT+0xOFFSET of its `module`. TRACE_NONE: none known. syms are sorted
 * by_addr, mods by_module: O(log n) per address. */
static uint32_t site_of(cudalog *l, const rec *a, const uint64_t *syms, uint64_t n_syms,
                        const uint64_t *mods, uint64_t n_mods)
{
    if (a->py != TRACE_NONE)
        return a->py;
    for (uint32_t k = 0; k < a->n_site; k++) {
        uint64_t addr = l->sites[a->site_first + k];
        uint64_t lo = 0, hi = n_syms;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            const rec *y = &l->recs[syms[mid]];
            if (y->pid < a->pid || (y->pid == a->pid && y->ptr < addr))
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < n_syms; lo++) {
            const rec *y = &l->recs[syms[lo]];
            if (y->pid != a->pid || y->ptr != addr)
                break;
            if (has_line(trace_str(l->t, y->name)))
                return y->name;
        }
    }
    for (uint32_t k = 0; k < a->n_site; k++) {
        uint64_t addr = l->sites[a->site_first + k];
        uint64_t lo = 0, hi = n_mods;  /* the last object of pid starting at or below addr */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            const rec *m = &l->recs[mods[mid]];
            l->lookups++;
            if (m->pid < a->pid || (m->pid == a->pid && m->src <= addr))
                lo = mid + 1;
            else
                hi = mid;
        }
        for (uint64_t i = lo; i-- > 0;) {
            const rec *m = &l->recs[mods[i]];
            if (m->pid != a->pid || addr < m->src || addr >= m->dst)
                break;
            const char *path = trace_str(l->t, m->name), *slash = strrchr(path, '/');
            char buf[300];
            int n = snprintf(buf, sizeof buf, "%s+0x%llx", slash ? slash + 1 : path,
                             (unsigned long long)(addr - m->base));
            return trace_intern(l->t, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : 0);
        }
    }
    return TRACE_NONE;
}

static int by_addr(const void *pa, const void *pb)
{
    const rec *a = &sort_log->recs[*(const uint64_t *)pa], *b = &sort_log->recs[*(const uint64_t *)pb];
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

/* Module records by process and start (src: lo=). */
static int by_module(const void *pa, const void *pb)
{
    const rec *a = &sort_log->recs[*(const uint64_t *)pa], *b = &sort_log->recs[*(const uint64_t *)pb];
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->src < b->src ? -1 : a->src > b->src;
}

/* The site of each call, by the time of the statements it becomes: the
 * call's own (host side) and its GPU work's (device side). */
static int site_map(xlate *x)
{
    cudalog *l = x->l;
    uint64_t *syms = malloc((l->n + 1) * sizeof *syms), n_syms = 0;
    uint64_t *mods = malloc((l->n + 1) * sizeof *mods), n_mods = 0;
    if (!syms || !mods)
        goto fail;
    bool any = false;
    for (uint64_t i = 0; i < l->n; i++) {
        if (l->recs[i].kind == 'y')
            syms[n_syms++] = i;
        if (l->recs[i].kind == 'm')
            mods[n_mods++] = i;
        any |= l->recs[i].kind == 'a' && (l->recs[i].n_site || l->recs[i].py != TRACE_NONE);
    }
    sort_log = l;
    qsort(syms, n_syms, sizeof *syms, by_addr);
    qsort(mods, n_mods, sizeof *mods, by_module);
    for (uint64_t i = 0; any && i < l->n; i++) {
        const rec *a = &l->recs[i];
        if (a->kind != 'a' || (!a->n_site && a->py == TRACE_NONE))
            continue;
        uint32_t site = site_of(l, a, syms, n_syms, mods, n_mods);
        if (site == TRACE_NONE)
            continue;
        if (site_put(l, a->t0, site) != 0)
            goto fail;
        for (uint64_t k = find_corr(l, x->gpus, x->n_gpus, a->pid, a->corr); k < x->n_gpus; k++) {
            const rec *g = &l->recs[x->gpus[k]];
            if (g->pid != a->pid || g->corr != a->corr)
                break;
            if (site_put(l, g->t0, site) != 0)
                goto fail;
        }
    }
    free(syms);
    free(mods);
    return 0;
fail:
    free(syms);
    free(mods);
    return oom(l);
}

static int translate(cudalog *l)
{
    if (prepare(l) != 0)
        return -1;
    xlate x = { .l = l };
    uint64_t *order = malloc((l->n + 1) * sizeof *order);
    x.gpus = malloc((l->n + 1) * sizeof *x.gpus);
    x.params = malloc((l->n + 1) * sizeof *x.params);
    x.gpu_done = calloc(l->n + 1, sizeof *x.gpu_done);
    uint64_t n_order = 0;
    int rc = -1;
    if (!order || !x.gpus || !x.params || !x.gpu_done) {
        oom(l);
        goto done;
    }
    for (uint64_t i = 0; i < l->n; i++) {
        const rec *r = &l->recs[i];
        switch (r->kind) {
        case 'a': case 'l': case 'h': case 'b': order[n_order++] = i; break;
        case 'g': x.gpus[x.n_gpus++] = i; break;
        case 'p': x.params[x.n_params++] = i; break;
        case 's':
            if (capture_stream_kind(l->c, r->pid, r->dev, r->stream, r->skind) != 0) {
                oom(l);
                goto done;
            }
            break;
        case 'n':
            if (r->what != TRACE_NONE && strcmp(trace_str(l->t, r->what), "malformed-mark") == 0)
                l->malformed_marks += r->size;
            break;
        case 'r': {
            uint32_t h = capture_host(l->c, r->pid, r->tid);
            if (h == TRACE_NONE ||
                capture_range(l->c, h, r->t0, r->t1, r->name, CAP_NONE, false) != 0) {
                oom(l);
                goto done;
            }
            break;
        }
        default: break;
        }
    }
    /* matching calls to their work takes longer than reading the lines:
     * a pass of its own, in the records it goes through */
    trace_progress_say(l->progress, "records", 0, n_order);
    sort_log = l;
    qsort(order, n_order, sizeof *order, by_time);
    qsort(x.gpus, x.n_gpus, sizeof *x.gpus, by_corr);
    qsort(x.params, x.n_params, sizeof *x.params, by_corr);
    for (uint64_t i = 0; i < n_order; i++) {
        const rec *r = &l->recs[order[i]];
        if (i && (i & (CUDALOG_PROGRESS_RECORDS - 1)) == 0)
            trace_progress_say(l->progress, "records", i, n_order);
        if (r->kind == 'a' && (op_line(&x, order[i]) != 0 || on_api(&x, r) != 0))
            goto done;
        if (r->kind == 'b' && r->action == BLOCK_ALLOC && r->py != TRACE_NONE) {
            uint64_t *b = trace_u64map_put(&x.py_block, (uint64_t)r->pid, 0);
            if (!b) {
                oom(l);
                goto done;
            }
            *b = order[i];
        }
        if (r->kind == 'l' && on_lib(&x, order[i]) != 0)
            goto done;
        if (r->kind == 'b' && r->action == BLOCK_ALLOC && r->size &&
            block_alloc(&x, r->pid, r->ptr, r->ptr + r->size) != 0)
            goto done;
        /* a segment the log saw no cudaMalloc of (expandable segments are
         * mapped with cuMemMap): device memory all the same */
        uint64_t base;
        if (r->kind == 'b' && (r->action == BLOCK_SEGMENT_ALLOC || r->action == BLOCK_SEGMENT_MAP) &&
            r->size && capture_buffer_at(l->c, r->pid, r->ptr, &base) == TRACE_NONE &&
            capture_buffer(l->c, r->pid, CAP_MEM_DEVICE, r->dev, r->ptr, r->size) == TRACE_NONE) {
            oom(l);
            goto done;
        }
        if (r->kind == 'h') {
            uint32_t host = capture_host(l->c, r->pid, r->tid);
            uint64_t off;
            uint32_t b = resolve(l, r->pid, r->ptr, r->size, true, &off);
            if (host == TRACE_NONE || b == TRACE_NONE ||
                capture_host_access(l->c, host, r->t0, r->t1, r->name, b, off, off + r->size,
                                    r->mode ? r->mode : TRACE_RW) != 0) {
                oom(l);
                goto done;
            }
        }
    }
    trace_progress_say(l->progress, "records", n_order, n_order);
    /* work whose call the log lacks (the program died before its exit) */
    for (uint64_t k = 0; k < x.n_gpus; k++)
        if (!x.gpu_done[k] && gpu_of(&x, k, NULL) != 0)
            goto done;
    if (finish_libs(&x) != 0 || site_map(&x) != 0)
        goto done;
    rc = 0;
done:
    free(x.blocks);
    free(order);
    free(x.gpus);
    free(x.params);
    free(x.gpu_done);
    free(x.libs);
    free(x.res);
    trace_u64map_free(&x.lib_latest);
    trace_u64map_free(&x.py_block);
    trace_u64map_free(&x.work_end);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Call sites on statements: a reader over the capture's that adds       */
/* site=FILE:LINE to each statement whose time is a call's or its work's. */

typedef struct site_reader {
    trace_reader_iface iface;   /* the inner's members, wrapped where present */
    const trace_reader_iface *inner;
    void *inner_ctx;
    int64_t *keys;
    uint32_t *vals;
    uint64_t cap;
    uint32_t key;               /* "site" */
    trace_attr *attrs;
    uint32_t cap_attrs;
    const trace *t;
    trace_u64map given;         /* seq -> the site (string id) it was given: the capture
                                 * reader cannot read a statement again, and a finding's
                                 * sides show their sites after the check (attr_text) */
} site_reader;

/* Statement seq shows site `site` (for site_attr_text). 0 or -1. */
static int site_given(site_reader *w, uint64_t seq, uint32_t site, trace_error *err)
{
    uint64_t *v = trace_u64map_put(&w->given, seq, site);
    if (!v)
        return trace_error_set(err, TRACE_ENOMEM, "out of memory"), -1;
    *v = site;
    return 0;
}

static int site_next(void *ctx, trace_stmt *out, trace_error *err)
{
    site_reader *w = ctx;
    int rc = w->inner->next(w->inner_ctx, out, err);
    if (rc != 1)
        return rc;
    for (uint32_t k = 0; k < out->n_attr; k++)
        if (out->attr[k].key == w->key)  /* a site of its own */
            return site_given(w, out->seq, out->attr[k].value, err) == 0 ? rc : -1;
    if (out->t == TRACE_TIME_NONE)
        return rc;
    uint64_t i = site_slot(w->keys, w->cap, out->t);
    if (w->keys[i] != out->t)
        return rc;
    if (site_given(w, out->seq, w->vals[i], err) != 0)
        return -1;
    if (out->n_attr + 1 > w->cap_attrs) {
        uint32_t cap = 2 * (out->n_attr + 1);
        trace_attr *a = realloc(w->attrs, cap * sizeof *a);
        if (!a) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            return -1;
        }
        w->attrs = a;
        w->cap_attrs = cap;
    }
    if (out->n_attr)
        memcpy(w->attrs, out->attr, out->n_attr * sizeof *w->attrs);
    w->attrs[out->n_attr] = (trace_attr){ w->key, w->vals[i] };
    out->attr = w->attrs;
    out->n_attr++;
    return rc;
}

static void site_close(void *ctx)
{
    site_reader *w = ctx;
    if (w->inner->close)
        w->inner->close(w->inner_ctx);
    free(w->keys);
    free(w->vals);
    free(w->attrs);
    trace_u64map_free(&w->given);
    free(w);
}

static int site_rewind(void *ctx, trace_error *err)
{
    site_reader *w = ctx;
    return w->inner->rewind(w->inner_ctx, err);
}

static int site_label_text(void *ctx, uint64_t seq, const char **text, size_t *len,
                           trace_error *err)
{
    site_reader *w = ctx;
    return w->inner->label_text(w->inner_ctx, seq, text, len, err);
}

/* The site a statement was given, from the map; other attributes from the
 * inner reader, where it can look back. */
static int site_attr_text(void *ctx, uint64_t seq, const char *key, const char **text,
                          size_t *len, trace_error *err)
{
    site_reader *w = ctx;
    const uint64_t *v = strcmp(key, TRACE_ATTR_SITE) == 0 ? trace_u64map_get(&w->given, seq)
                                                          : NULL;
    if (v) {
        *text = trace_str(w->t, (uint32_t)*v);
        *len = strlen(*text);
        return 0;
    }
    if (w->inner->attr_text)
        return w->inner->attr_text(w->inner_ctx, seq, key, text, len, err);
    *text = NULL;
    *len = 0;
    return 0;
}

/* Puts the site reader around r, taking over l's site map. 0 or -1 (out
 * of memory: r is left as it was). */
static int wrap_sites(cudalog *l, trace_reader *r, uint32_t key)
{
    site_reader *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->inner = r->iface;
    w->inner_ctx = r->ctx;
    w->iface.next = site_next;
    w->iface.close = site_close;
    w->iface.rewind = r->iface->rewind ? site_rewind : NULL;
    w->iface.label_text = r->iface->label_text ? site_label_text : NULL;
    w->iface.attr_text = site_attr_text;
    w->t = r->trace;
    w->keys = l->site_t;
    w->vals = l->site_v;
    w->cap = l->site_cap;
    w->key = key;
    l->site_t = NULL;
    l->site_v = NULL;
    r->iface = &w->iface;
    r->ctx = w;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The format.                                                         */

static bool cudalog_sniff(const char *path, const unsigned char *head, size_t n)
{
    (void)path;
    size_t m = strlen(CUDALOG_MAGIC);
    return n >= m && memcmp(head, CUDALOG_MAGIC, m) == 0;
}

static int cudalog_read(cudalog *l, FILE *f)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint32_t no = 0;
    int rc = 0;
    struct stat sb;
    uint64_t size = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
    uint64_t bytes = 0, say_at = CUDALOG_PROGRESS_BYTES;
    trace_progress_say(l->progress, "bytes", 0, size);
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        no++;
        if ((bytes += (uint64_t)len) >= say_at) {
            trace_progress_say(l->progress, "bytes", bytes, size);
            say_at = bytes + CUDALOG_PROGRESS_BYTES;
        }
        if (len == 0 || line[len - 1] != '\n') {
            l->truncated++;     /* the last line of a program that died writing it */
            break;
        }
        line[--len] = '\0';
        if (len && line[len - 1] == '\r')
            line[--len] = '\0';
        if (no == 1) {
            if (strcmp(line, CUDALOG_MAGIC " 1") != 0)
                rc = bad(l, no, "expected the header 'syncsim-cuda-log 1', got", line,
                         (size_t)len);
            continue;
        }
        rc = parse_line(l, line, (size_t)len, no);
    }
    free(line);
    if (rc == 0 && ferror(f))
        rc = (trace_error_set(l->err, TRACE_EIO, "%s: read error", l->path), -1);
    if (rc == 0)
        trace_progress_say(l->progress, "bytes", size, size);
    return rc;
}

static int cudalog_open(trace_source *src, const char *path, const trace_source_opts *o,
                        trace_error *err)
{
    cudalog l = { .path = path, .err = err, .progress = &o->progress };
    l.t = trace_new();
    l.c = l.t ? capture_new(l.t, path) : NULL;
    FILE *f = NULL;
    if (!l.t || !l.c) {
        oom(&l);
        goto fail;
    }
    if (!(f = fopen(path, "r"))) {
        trace_error_set(err, TRACE_EIO, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if (cudalog_read(&l, f) != 0 || translate(&l) != 0)
        goto fail;
    fclose(f);
    f = NULL;
    if (trace_set_meta(l.t, "capture.format", "cuda-log") != 0 ||
        trace_set_meta(l.t, "capture.schema", "1") != 0 ||
        capture_drop(l.c, CAP_DROP_UNRESOLVED_PARAM, l.unresolved) != 0 ||
        capture_count(l.c, "capture.library_kernels", l.lib_kernels) != 0 ||
        capture_count(l.c, "capture.log_records", l.n) != 0 ||
        capture_count(l.c, "capture.graph_kernels", l.graph_kernels) != 0 ||
        capture_count(l.c, "capture.graph_kernels_accessing", l.graph_kernels_accessing) != 0 ||
        capture_count(l.c, "capture.log_lookups", l.lookups) != 0 ||
        capture_drop(l.c, CAP_DROP_TRUNCATED_LINE, l.truncated) != 0 ||
        capture_drop(l.c, CAP_DROP_PARAM_LAYOUT, l.refused) != 0 ||
        capture_drop(l.c, CAP_DROP_MALFORMED_MARK, l.malformed_marks) != 0) {
        oom(&l);
        goto fail;
    }
    uint32_t site_key = l.site_n ? trace_intern_cstr(l.t, "site") : TRACE_NONE;
    if (l.site_n && site_key == TRACE_NONE) {
        oom(&l);
        goto fail;
    }
    free(l.recs);
    free(l.accs);
    free(l.sites);
    free(l.libargs);
    l.recs = NULL;
    l.libargs = NULL;
    l.accs = NULL;
    l.sites = NULL;
    if (capture_open_reader(l.c, NULL, &src->reader, path, err) != 0)
        goto fail;              /* nothing was taken over */
    if (l.site_n && wrap_sites(&l, &src->reader, site_key) != 0) {
        trace_reader_close(&src->reader);
        free(l.site_t);
        free(l.site_v);
        trace_error_set(err, TRACE_ENOMEM, "%s: out of memory", path);
        return -1;
    }
    free(l.site_t);
    free(l.site_v);
    return 0;
fail:
    if (f)
        fclose(f);
    free(l.recs);
    free(l.accs);
    free(l.sites);
    free(l.libargs);
    free(l.site_t);
    free(l.site_v);
    capture_free(l.c);
    trace_free(l.t);
    return -1;
}

const trace_format trace_format_cuda_log = {
    "cuda-log", "the event log of `syncsim capture` (a CUDA program recorded through CUPTI)",
    false, cudalog_sniff, cudalog_open,
};
