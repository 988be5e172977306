/*
 * inject_log.c -- the event log of libsyncsim_inject.so: what the
 * callbacks record, written as the lines traces/formats/cuda_log.c reads.
 *
 * A launch-bound program makes a CUDA call every microsecond or two, so the
 * thread that makes it must not pay for a system call, a lock or printf.
 * The design:
 *
 *   - Each thread appends fixed-layout binary events (an API call, the
 *     words of a launch's parameters, a line already formatted for the rare
 *     records) to a ring of its own: a list of 256 KiB chunks it alone
 *     writes. An event is published by a release store of the chunk's
 *     `committed` count; a full chunk is sealed by a release store of its
 *     `next` (after its last commit), so a reader that loads `next` first
 *     and `committed` second knows it sees a chunk's final count when `next`
 *     is set. A new chunk is one malloc per 256 KiB of events.
 *   - One writer thread (started by ilog_open) walks every ring every
 *     ILOG_PERIOD_MS, formats what was committed since its last visit and
 *     writes it with one write(2) per 1 MiB, freeing the chunks it is done
 *     with. It also writes a clock pair (CUPTI's clock and the epoch) every
 *     ILOG_CLOCK_MS, which the reader interpolates between. Rings are
 *     registered once per thread in a list that only grows at its head; a
 *     ring whose thread ended is unlinked by the writer once drained.
 *   - The writer, ilog_flush, the exit and a fatal signal drain under one
 *     lock (the drain lock, never taken by a producing thread). A fatal
 *     signal writes what is committed (it waits up to 100 ms for a drain
 *     in progress elsewhere); a program killed outright (SIGKILL) loses
 *     what the writer had not drained: at most ILOG_PERIOD_MS of calls,
 *     plus the activity CUPTI had not delivered yet.
 *   - fork: the child starts with no rings and no writer (its parent's
 *     events are the parent's); what the child records is written at its
 *     exit.
 *
 * Lines are whole: the log is opened O_APPEND and every write(2) holds
 * whole lines, so the shim's and sitecustomize.py's lines never interleave
 * with ours.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "inject.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BYTES (256u << 10)
#define OUT_BYTES (1u << 20)

/* ------------------------------------------------------------------ */
/* Events.                                                             */

enum { EV_API = 1, EV_PARAMS, EV_REFUSED, EV_TEXT };

typedef struct ev_head {
    uint32_t size;              /* bytes of the event, header included, a multiple of 8 */
    uint16_t kind;
    uint16_t n;                 /* EV_API: return addresses; EV_PARAMS: words */
} ev_head;

typedef struct ev_api {
    ev_head h;
    int64_t tid;
    ilog_api a;
    uint64_t site[ILOG_SITE_FRAMES];
    uint32_t py_len;            /* bytes of the Python line after the event, 0: none */
    uint32_t pad;
} ev_api;

typedef struct ev_params {
    ev_head h;
    int64_t corr, dcorr, node, status;   /* status: EV_REFUSED's CUresult */
} ev_params;

typedef struct ev_text {
    ev_head h;
    uint32_t len;
    uint32_t pad;
} ev_text;

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* ------------------------------------------------------------------ */
/* Rings: one per thread, chunks in a list (see the head comment).     */

typedef struct chunk {
    _Atomic(struct chunk *) next;   /* set once, after the last commit */
    _Atomic size_t committed;       /* bytes of whole events */
    size_t cap;
    _Alignas(8) unsigned char data[];
} chunk;

typedef struct ring {
    struct ring *next_ring;     /* the list (written before publication, then by the writer) */
    chunk *head;                /* the writer's: the chunk it reads */
    size_t consumed;            /* the writer's: bytes of head formatted */
    chunk *tail;                /* the thread's: the chunk it appends to */
    _Atomic(chunk *) spare;     /* a drained chunk the writer hands back for reuse */
    _Atomic int dead;           /* its thread ended */
} ring;

static _Atomic(ring *) rings;
static __thread ring *my_ring;
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static _Atomic int log_fd = -1;
static uint64_t (*log_clock)(void);
static int cached_pid;
static __thread long cached_tid;

int ilog_pid(void)
{
    return cached_pid;
}

long ilog_tid(void)
{
    if (!cached_tid)
        cached_tid = (long)syscall(SYS_gettid);
    return cached_tid;
}

int ilog_on(void)
{
    return atomic_load_explicit(&log_fd, memory_order_relaxed) >= 0;
}

static chunk *chunk_new(size_t need)
{
    size_t cap = need > CHUNK_BYTES ? round8(need) : CHUNK_BYTES;
    chunk *c = malloc(sizeof *c + cap);
    if (!c)
        return NULL;
    atomic_init(&c->next, NULL);
    atomic_init(&c->committed, 0);
    c->cap = cap;
    return c;
}

/* The thread ended: its ring is the writer's to drain and free. */
static void ring_dead(void *p)
{
    ring *r = p;
    if (my_ring == r)
        my_ring = NULL;
    atomic_store_explicit(&r->dead, 1, memory_order_release);
}

static void make_key(void)
{
    pthread_key_create(&ring_key, ring_dead);
}

static ring *ring_new(void)
{
    ring *r = calloc(1, sizeof *r);
    chunk *c = chunk_new(0);
    if (!r || !c) {
        free(r);
        free(c);
        return NULL;
    }
    r->head = r->tail = c;
    atomic_init(&r->dead, 0);
    pthread_once(&key_once, make_key);
    pthread_setspecific(ring_key, r);
    ring *old = atomic_load_explicit(&rings, memory_order_relaxed);
    do
        r->next_ring = old;
    while (!atomic_compare_exchange_weak_explicit(&rings, &old, r, memory_order_release,
                                                  memory_order_relaxed));
    my_ring = r;
    return r;
}

/* Room for an event of size bytes in this thread's ring, or NULL (the log
 * is off, or out of memory). Nothing is published until commit(). */
static unsigned char *reserve(size_t size)
{
    if (!ilog_on())
        return NULL;
    ring *r = my_ring ? my_ring : ring_new();
    if (!r)
        return NULL;
    chunk *c = r->tail;
    size_t at = atomic_load_explicit(&c->committed, memory_order_relaxed);
    if (at + size > c->cap) {
        /* a chunk the writer is done with (no malloc, no page faults), else a new one */
        chunk *n = size <= CHUNK_BYTES ? atomic_exchange_explicit(&r->spare, NULL,
                                                                  memory_order_acquire)
                                       : NULL;
        if (n) {
            atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
            atomic_store_explicit(&n->committed, 0, memory_order_relaxed);
        } else if (!(n = chunk_new(size))) {
            return NULL;
        }
        atomic_store_explicit(&c->next, n, memory_order_release);   /* c is sealed */
        r->tail = c = n;
        at = 0;
    }
    return c->data + at;
}

/* Publishes the event reserve() gave room for, size bytes. */
static void commit(size_t size)
{
    chunk *c = my_ring->tail;
    size_t at = atomic_load_explicit(&c->committed, memory_order_relaxed);
    atomic_store_explicit(&c->committed, at + size, memory_order_release);
}

void ilog_api_call(const ilog_api *a, const uint64_t *site, int n_site, const char *py)
{
    size_t py_len = py ? strnlen(py, ILOG_PY_MAX) : 0;
    size_t size = sizeof(ev_api) + round8(py_len ? py_len + 1 : 0);
    ev_api *e = (ev_api *)reserve(size);
    if (!e)
        return;
    if (n_site > ILOG_SITE_FRAMES)
        n_site = ILOG_SITE_FRAMES;
    e->h = (ev_head){ (uint32_t)size, EV_API, (uint16_t)(n_site > 0 ? n_site : 0) };
    e->tid = ilog_tid();
    e->a = *a;
    for (int i = 0; i < n_site; i++)
        e->site[i] = site[i];
    e->py_len = (uint32_t)py_len;
    if (py_len) {
        memcpy(e + 1, py, py_len);
        ((char *)(e + 1))[py_len] = '\0';
    }
    commit(size);
}

static __thread ev_params *open_params;

ilog_word *ilog_params_begin(int64_t corr, int64_t dcorr, int64_t node, size_t n)
{
    ev_params *e = (ev_params *)reserve(sizeof(ev_params) + n * sizeof(ilog_word));
    if (!e)
        return NULL;
    *e = (ev_params){ { 0, EV_PARAMS, 0 }, corr, dcorr, node, 0 };
    open_params = e;
    return (ilog_word *)(e + 1);
}

void ilog_params_end(size_t used)
{
    ev_params *e = open_params;
    open_params = NULL;
    if (!e || !used)
        return;                 /* nothing to say: nothing published */
    if (used > UINT16_MAX)
        used = UINT16_MAX;
    e->h.n = (uint16_t)used;
    e->h.size = (uint32_t)(sizeof *e + used * sizeof(ilog_word));
    commit(e->h.size);
}

void ilog_params_refused(int64_t corr, int64_t dcorr, int64_t node, int status)
{
    ev_params *e = (ev_params *)reserve(sizeof(ev_params));
    if (!e)
        return;
    *e = (ev_params){ { sizeof *e, EV_REFUSED, 0 }, corr, dcorr, node, status };
    commit(sizeof *e);
}

void ilog_line(const char *fmt, ...)
{
    char small[512], *buf = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof small) {    /* a long kernel name: never cut */
        if (!(buf = malloc((size_t)n + 1)))
            return;
        va_start(ap, fmt);
        vsnprintf(buf, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    for (int i = 0; i < n; i++)         /* a record is one line */
        if (buf[i] == '\n' || buf[i] == '\r')
            buf[i] = ' ';
    size_t size = sizeof(ev_text) + round8((size_t)n);
    ev_text *e = (ev_text *)reserve(size);
    if (e) {
        e->h = (ev_head){ (uint32_t)size, EV_TEXT, 0 };
        e->len = (uint32_t)n;
        memcpy(e + 1, buf, (size_t)n);
        commit(size);
    }
    if (buf != small)
        free(buf);
}

/* ------------------------------------------------------------------ */
/* The writer: formats events into lines.                              */

static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static char out[OUT_BYTES];     /* under drain_lock */
static size_t out_len;
static _Atomic uint64_t n_lines;

static void write_all(const char *p, size_t n)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    while (n && fd >= 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        n -= (size_t)w;
    }
}

static void out_flush(void)
{
    write_all(out, out_len);
    out_len = 0;
}

/* Room for a line of at most n bytes in out. */
static char *out_room(size_t n)
{
    if (out_len + n > sizeof out)
        out_flush();
    return out + out_len;
}

static void out_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out_printf(const char *fmt, ...)
{
    va_list ap;
    char *at = out_room(1024);
    va_start(ap, fmt);
    int n = vsnprintf(at, sizeof out - out_len, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof out - out_len)
        out_len += (size_t)n;
}

/* Number formatting without printf: the writer formats a few million
 * lines a second. */
static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, 0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

static char *put_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    int n = 0;
    *p++ = '0';
    *p++ = 'x';
    do
        tmp[n++] = digits[v & 15];
    while ((v >>= 4));
    while (n)
        *p++ = tmp[--n];
    return p;
}

static void format_api(const ev_api *e)
{
    const ilog_api *a = &e->a;
    const char *name = a->name ? a->name : "?";
    size_t name_len = strnlen(name, 512);
    char *start = out_room(512 + ILOG_PY_MAX + name_len), *p = start;
    p = put_str(p, "api pid=");
    p = put_i64(p, cached_pid);
    p = put_str(p, " tid=");
    p = put_i64(p, e->tid);
    p = put_str(p, " t0=");
    p = put_u64(p, a->t0);
    p = put_str(p, " t1=");
    p = put_u64(p, a->t1);
    p = put_str(p, " corr=");
    p = put_i64(p, a->corr);
    p = put_str(p, " dev=");
    p = put_i64(p, a->dev);
    if (a->has & ILOG_PTR)
        p = put_hex(put_str(p, " ptr="), a->ptr);
    if (a->has & ILOG_SIZE)
        p = put_u64(put_str(p, " size="), a->size);
    if (a->has & ILOG_SRC)
        p = put_hex(put_str(p, " src="), a->src);
    if (a->has & ILOG_DST)
        p = put_hex(put_str(p, " dst="), a->dst);
    if (a->has & ILOG_BYTES)
        p = put_u64(put_str(p, " bytes="), a->bytes);
    if (a->has & ILOG_STREAM)
        p = put_i64(put_str(p, " stream="), a->stream);
    if (a->has & ILOG_EVENT)
        p = put_u64(put_str(p, " event="), a->event);
    for (int i = 0; i < e->h.n; i++)
        p = put_hex(put_str(p, i ? "," : " site="), e->site[i]);
    if (e->py_len) {
        p = put_str(p, " py=");
        memcpy(p, e + 1, e->py_len);
        p += e->py_len;
    }
    p = put_str(p, " name=");
    memcpy(p, name, name_len);
    p += name_len;
    *p++ = '\n';
    out_len += (size_t)(p - start);
}

static void format_params(const ev_params *e)
{
    char head[128], *h = head;
    h = put_str(h, "param pid=");
    h = put_i64(h, cached_pid);
    h = put_i64(put_str(h, " corr="), e->corr);
    if (e->dcorr >= 0 && e->dcorr != e->corr)
        h = put_i64(put_str(h, " dcorr="), e->dcorr);
    if (e->node >= 0)
        h = put_i64(put_str(h, " node="), e->node);
    size_t hn = (size_t)(h - head);
    if (e->h.kind == EV_REFUSED) {
        char *start = out_room(hn + 40), *p = start;
        memcpy(p, head, hn);
        p = put_i64(put_str(p + hn, " refused="), e->status);
        *p++ = '\n';
        out_len += (size_t)(p - start);
        return;
    }
    const ilog_word *w = (const ilog_word *)(e + 1);
    for (uint16_t i = 0; i < e->h.n; i++) {
        char *start = out_room(hn + 80), *p = start;
        memcpy(p, head, hn);
        p = put_u64(put_str(p + hn, " idx="), w[i].idx);
        if (w[i].word)
            p = put_u64(put_str(p, " word="), w[i].word - 1u);
        p = put_hex(put_str(p, " ptr="), w[i].v);
        *p++ = '\n';
        out_len += (size_t)(p - start);
    }
}

static void format_text(const ev_text *e)
{
    if (e->len + 1 > sizeof out) {     /* longer than the buffer: on its own */
        out_flush();
        write_all((const char *)(e + 1), e->len);
        write_all("\n", 1);
        return;
    }
    char *at = out_room(e->len + 1);
    memcpy(at, e + 1, e->len);
    at[e->len] = '\n';
    out_len += e->len + 1;
}

static void format_event(const ev_head *h)
{
    switch (h->kind) {
    case EV_API: format_api((const ev_api *)h); break;
    case EV_PARAMS:
    case EV_REFUSED: format_params((const ev_params *)h); break;
    case EV_TEXT: format_text((const ev_text *)h); break;
    default: return;
    }
    atomic_fetch_add_explicit(&n_lines, h->kind == EV_PARAMS ? h->n : 1, memory_order_relaxed);
}

/* Formats what ring r committed since the last visit, freeing the chunks
 * done with. Returns whether r is dead and fully drained. Under drain_lock. */
static int drain_ring(ring *r)
{
    int dead = atomic_load_explicit(&r->dead, memory_order_acquire);
    for (;;) {
        chunk *c = r->head;
        chunk *next = atomic_load_explicit(&c->next, memory_order_acquire);
        size_t end = atomic_load_explicit(&c->committed, memory_order_acquire);
        while (r->consumed < end) {
            const ev_head *h = (const ev_head *)(c->data + r->consumed);
            format_event(h);
            r->consumed += h->size;
        }
        if (!next)
            return dead;
        chunk *none = NULL;     /* back to the thread for reuse, or freed */
        if (c->cap != CHUNK_BYTES ||
            !atomic_compare_exchange_strong_explicit(&r->spare, &none, c, memory_order_release,
                                                     memory_order_relaxed))
            free(c);
        r->head = next;
        r->consumed = 0;
    }
}

static void drain_all_locked(void)
{
    ring *prev = NULL;
    for (ring *r = atomic_load_explicit(&rings, memory_order_acquire); r;) {
        ring *next = r->next_ring;
        if (drain_ring(r) && prev) {    /* the head stays: threads push there */
            prev->next_ring = next;
            free(r->head);
            free(atomic_load(&r->spare));
            free(r);
        } else {
            prev = r;
        }
        r = next;
    }
    out_flush();
}

static void clock_pair_locked(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = log_clock ? log_clock() : 0;
    out_printf("clock pid=%d t0=%llu unix=%llu\n", cached_pid, (unsigned long long)t,
               (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    atomic_fetch_add_explicit(&n_lines, 1, memory_order_relaxed);
}

void ilog_flush(void)
{
    pthread_mutex_lock(&drain_lock);
    drain_all_locked();
    pthread_mutex_unlock(&drain_lock);
}

static pthread_t writer;
static int writer_running;      /* in this process (not a fork's child) */
static _Atomic int writer_stop;
static _Atomic uint64_t writer_ns;

static uint64_t mono_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *writer_main(void *arg)
{
    (void)arg;
    uint64_t last_clock = mono_ns(CLOCK_MONOTONIC);
    const struct timespec period = { 0, ILOG_PERIOD_MS * 1000000L };
    while (!atomic_load_explicit(&writer_stop, memory_order_acquire)) {
        nanosleep(&period, NULL);
        pthread_mutex_lock(&drain_lock);
        uint64_t now = mono_ns(CLOCK_MONOTONIC);
        if (now - last_clock >= ILOG_CLOCK_MS * 1000000ull) {
            clock_pair_locked();
            last_clock = now;
        }
        drain_all_locked();
        pthread_mutex_unlock(&drain_lock);
        atomic_store_explicit(&writer_ns, mono_ns(CLOCK_THREAD_CPUTIME_ID), memory_order_relaxed);
    }
    return NULL;
}

uint64_t ilog_writer_ns(void)
{
    return atomic_load_explicit(&writer_ns, memory_order_relaxed);
}

uint64_t ilog_lines(void)
{
    return atomic_load_explicit(&n_lines, memory_order_relaxed);
}

/* fork: the child must not inherit a drain in progress (prepare waits for
 * it); it starts with no rings and no writer. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&drain_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&drain_lock);
}

static ring *volatile parent_rings;  /* a child's copy of its parent's rings: never written */

static void fork_child(void)
{
    pthread_mutex_init(&drain_lock, NULL);
    parent_rings = atomic_exchange(&rings, NULL);   /* the parent's: not ours to write */
    my_ring = NULL;
    cached_tid = 0;
    cached_pid = getpid();
    writer_running = 0;
    out_len = 0;
}

static void register_atfork(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int ilog_open(const char *path, uint64_t (*clock)(void))
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    pthread_once(&atfork_once, register_atfork);
    log_clock = clock;
    cached_pid = getpid();
    atomic_store(&log_fd, fd);
    if (lseek(fd, 0, SEEK_END) == 0)
        write_all("syncsim-cuda-log 1\n", 19);
    pthread_mutex_lock(&drain_lock);
    clock_pair_locked();
    out_flush();
    pthread_mutex_unlock(&drain_lock);
    atomic_store(&writer_stop, 0);
    writer_running = pthread_create(&writer, NULL, writer_main, NULL) == 0;
    return 0;
}

void ilog_close(void)
{
    if (!ilog_on())
        return;
    if (writer_running) {
        atomic_store_explicit(&writer_stop, 1, memory_order_release);
        pthread_join(writer, NULL);
        writer_running = 0;
    }
    pthread_mutex_lock(&drain_lock);
    clock_pair_locked();
    drain_all_locked();
    int fd = atomic_exchange(&log_fd, -1);
    pthread_mutex_unlock(&drain_lock);
    if (fd >= 0)
        close(fd);
}

void ilog_on_fatal(void)
{
    if (!ilog_on())
        return;
    /* a drain elsewhere ends within a few ms; one on this thread never will */
    for (int i = 0; i < 100; i++) {
        if (pthread_mutex_trylock(&drain_lock) == 0) {
            drain_all_locked();
            pthread_mutex_unlock(&drain_lock);
            return;
        }
        const struct timespec ms = { 0, 1000000L };
        nanosleep(&ms, NULL);
    }
}
