/*
 * progress.c -- how far long work has got, on standard error, the same
 * way for every command (run, check, import, merge, ...).
 *
 * The work only counts: it stores how much is done (and, when known, of
 * how much) in atomics, at whatever pace its steps have. A timer thread
 * prints, so the promise holds however long one step takes:
 *
 *   on a terminal  a bar redrawn in place -- "syncsim check: [#####    ]
 *                  47% 1234567/2600000 statements, 5.1 s, ETA 5.7 s" --
 *                  from one second in (shorter work shows nothing; from
 *                  one interval in when $SYNCSIM_PROGRESS_MS is set), five
 *                  times a second, erased at the end;
 *   otherwise      (a log, a pipe) a line every interval, the first once
 *                  one interval has passed -- "syncsim check: 1234567 of
 *                  2600000 statements (47%), 5.0 s, ETA 5.6 s" -- and one
 *                  last line with the total if any line was printed.
 *
 * Work that cannot be counted from here (a simulation, the minimiser, a
 * report) gives no unit: its lines say "working, 35.0 s" and at the end
 * "done, 36.2 s", so that a log is never silent for long.
 *
 * The interval is 5 s, or $SYNCSIM_PROGRESS_MS milliseconds when set.
 * $SYNCSIM_PROGRESS=bar|lines|off chooses the form whatever standard error
 * is. The ETA is the time so far scaled by what is left, shown once 1 % is
 * done; with no total there is no percentage and no ETA, only the count
 * and the rate.
 */
#include "cli.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cli_progress {
    char cmd[32];
    char unit[32];
    bool bar;
    bool interval_set;          /* $SYNCSIM_PROGRESS_MS was given */
    int64_t every_ns;
    int64_t t0;
    _Atomic uint64_t done, total;
    _Atomic unsigned pass;
    bool shown;                 /* a line or the bar was printed */
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    /* the reader wrapped by cli_progress_reader */
    trace_reader_iface iface;
    const trace_reader_iface *inner;
    void *inner_ctx;
    /* Statements the reader gave and `done` does not count yet: the reading
     * thread's own, added to `done` every PROGRESS_BATCH statements and when
     * the input ends, rewinds or is unwrapped: a locked add per statement
     * is a cost the checker's reading loop need not pay, and the bar,
     * redrawn 5 times a second, never shows 4096 statements of lag. */
    uint64_t unpublished;
};

#define PROGRESS_BATCH 4096

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "5.1 s", "2 min 05 s", "1 h 02 min". */
static void fmt_time(char *buf, size_t cap, double s)
{
    if (s < 60)
        snprintf(buf, cap, "%.1f s", s);
    else if (s < 3600)
        snprintf(buf, cap, "%d min %02d s", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, cap, "%d h %02d min", (int)s / 3600, (int)s % 3600 / 60);
}

static void print_state(cli_progress *p, bool last)
{
    uint64_t done = atomic_load(&p->done), total = atomic_load(&p->total);
    unsigned pass = atomic_load(&p->pass);
    double elapsed = (double)(mono_ns() - p->t0) / 1e9;
    char took[32], eta[64] = "", pass_s[24] = "";
    fmt_time(took, sizeof took, elapsed);
    if (pass > 1)
        snprintf(pass_s, sizeof pass_s, "pass %u: ", pass);
    if (total && done < total && done * 100 >= total && !last) {
        char left[32];
        fmt_time(left, sizeof left, elapsed * (double)(total - done) / (double)done);
        snprintf(eta, sizeof eta, ", ETA %s", left);
    }
    if (!p->unit[0]) {
        /* nothing counted: the work only says it goes on */
        if (p->bar)
            fprintf(stderr, "\rsyncsim %s: working, %s\033[K", p->cmd, took);
        else
            fprintf(stderr, "syncsim %s: %s, %s\n", p->cmd, last ? "done" : "working", took);
    } else if (p->bar) {
        enum { WIDTH = 30 };
        int fill = total ? (int)(done >= total ? WIDTH : done * WIDTH / total) : 0;
        if (total)
            fprintf(stderr, "\rsyncsim %s: %s[%.*s%*s] %3d%% %llu/%llu %s, %s%s\033[K", p->cmd,
                    pass_s, fill, "##############################", WIDTH - fill, "",
                    (int)(done >= total ? 100 : done * 100 / total), (unsigned long long)done,
                    (unsigned long long)total, p->unit, took, eta);
        else
            fprintf(stderr, "\rsyncsim %s: %s%llu %s, %s\033[K", p->cmd, pass_s,
                    (unsigned long long)done, p->unit, took);
    } else if (total) {
        fprintf(stderr, "syncsim %s: %s%s%llu of %llu %s (%d%%), %s%s\n", p->cmd, pass_s,
                last ? "done, " : "", (unsigned long long)done, (unsigned long long)total,
                p->unit, (int)(done >= total ? 100 : done * 100 / total), took, eta);
    } else {
        fprintf(stderr, "syncsim %s: %s%s%llu %s, %s (%.0f/s)\n", p->cmd, pass_s,
                last ? "done, " : "", (unsigned long long)done, p->unit, took,
                elapsed > 0 ? (double)done / elapsed : 0.0);
    }
    fflush(stderr);
    p->shown = true;
}

/* Adds the statements counted since the last publication to `done`. */
static void publish(cli_progress *p)
{
    if (p->unpublished) {
        atomic_fetch_add_explicit(&p->done, p->unpublished, memory_order_relaxed);
        p->unpublished = 0;
    }
}

static void *ticker(void *arg)
{
    cli_progress *p = arg;
    /* a bar from 1 s in (or one interval, when one is set), 5 times a
     * second at most; lines once an interval has passed */
    int64_t first = p->every_ns, step = p->every_ns;
    if (p->bar && !p->interval_set)
        first = 1000000000;
    if (p->bar && step > 200000000)
        step = 200000000;
    int64_t next = p->t0 + first;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until = { .tv_sec = 0 };
        /* CLOCK_MONOTONIC deadline: the condition variable uses it (below) */
        until.tv_sec = (time_t)(next / 1000000000);
        until.tv_nsec = (long)(next % 1000000000);
        if (pthread_cond_timedwait(&p->wake, &p->lock, &until) != 0 && !p->stop) {
            print_state(p, false);
            next += step;
            int64_t t = mono_ns();
            if (next < t)       /* a stalled machine: no burst of late lines */
                next = t + step;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

cli_progress *cli_progress_start(const char *cmd, const char *unit)
{
    const char *form = getenv("SYNCSIM_PROGRESS");
    if (form && strcmp(form, "off") == 0)
        return NULL;
    cli_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->cmd, sizeof p->cmd, "%s", cmd);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->bar = form ? strcmp(form, "bar") == 0 : isatty(2);
    unsigned long long ms = 5000;
    const char *every = getenv("SYNCSIM_PROGRESS_MS");
    if (every && (cli_parse_u64(every, &ms) != 0 || ms == 0 || ms > 86400000))
        ms = 5000;
    else if (every)
        p->interval_set = true;
    p->every_ns = (int64_t)ms * 1000000;
    p->t0 = mono_ns();
    atomic_store(&p->pass, 1);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&p->thread, NULL, ticker, p) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void cli_progress_total(cli_progress *p, uint64_t total)
{
    if (p)
        atomic_store(&p->total, total);
}

void cli_progress_set(cli_progress *p, uint64_t done)
{
    if (p)
        atomic_store(&p->done, done);
}

void cli_progress_add(cli_progress *p, uint64_t n)
{
    if (p)
        atomic_fetch_add(&p->done, n);
}

void cli_progress_end(cli_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    publish(p);                 /* the reader's thread has finished with it */
    if (p->shown && p->bar)
        fputs("\r\033[K", stderr);      /* the bar goes; the command's output stays */
    else if (p->shown)
        print_state(p, true);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* ------------------------------------------------------------------ */
/* A reader that counts what it gives.                                 */

static int counting_next(void *ctx, trace_stmt *out, trace_error *err)
{
    cli_progress *p = ctx;
    int rc = p->inner->next(p->inner_ctx, out, err);
    if (rc == 1 && ++p->unpublished < PROGRESS_BATCH)
        return rc;
    publish(p);                 /* a batch is full, or the input ended */
    return rc;
}

static void counting_close(void *ctx)
{
    cli_progress *p = ctx;
    publish(p);
    if (p->inner->close)
        p->inner->close(p->inner_ctx);
}

static int counting_rewind(void *ctx, trace_error *err)
{
    cli_progress *p = ctx;
    int rc = p->inner->rewind(p->inner_ctx, err);
    publish(p);
    if (rc == 0) {
        atomic_store(&p->done, 0);
        atomic_fetch_add(&p->pass, 1);
    }
    return rc;
}

static int counting_label(void *ctx, uint64_t seq, const char **text, size_t *len,
                          trace_error *err)
{
    cli_progress *p = ctx;
    return p->inner->label_text(p->inner_ctx, seq, text, len, err);
}

static int counting_attr(void *ctx, uint64_t seq, const char *key, const char **text,
                         size_t *len, trace_error *err)
{
    cli_progress *p = ctx;
    return p->inner->attr_text(p->inner_ctx, seq, key, text, len, err);
}

void cli_progress_reader(cli_progress *p, trace_reader *r)
{
    if (!p || p->inner)
        return;
    p->inner = r->iface;
    p->inner_ctx = r->ctx;
    p->iface = (trace_reader_iface){
        .next = counting_next,
        .close = counting_close,
        .rewind = r->iface->rewind ? counting_rewind : NULL,
        .label_text = r->iface->label_text ? counting_label : NULL,
        .attr_text = r->iface->attr_text ? counting_attr : NULL,
    };
    r->iface = &p->iface;
    r->ctx = p;
}

void cli_progress_unwrap(cli_progress *p, trace_reader *r)
{
    if (!p || !p->inner || r->ctx != p)
        return;
    publish(p);
    r->iface = p->inner;
    r->ctx = p->inner_ctx;
    p->inner = NULL;
}
