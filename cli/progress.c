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
 *                  times a second, erased at the end. It fits the
 *                  terminal's width (TIOCGWINSZ, else $COLUMNS, else 80),
 *                  asked at every redraw: a line that wrapped would leave
 *                  a stale line behind at each redraw. Where the width is
 *                  short, the bar goes first, then the counts; the
 *                  percentage and the ETA stay;
 *   otherwise      (a log, a pipe) a line every interval, the first once
 *                  one interval has passed -- "syncsim check: 1234567 of
 *                  2600000 statements (47%), 5.0 s, ETA 5.6 s" -- and one
 *                  last line with the total if any line was printed.
 *
 * Every long command counts against a total, so that it has an ETA: check,
 * import and merge the statements of a database's run, or the lines of a
 * text trace (cli_progress_source: the line of the last statement read,
 * of the file's lines); a simulation its ops, the minimiser its
 * candidates (advise then the groups it prices), a report the statements
 * of its passes. Work with no unit
 * says only "working, 35.0 s" and at the end "done, 36.2 s", so that a
 * log is never silent for long. A total that is only an estimate (merge's
 * text inputs count lines, not statements) shows no count of it at the
 * end.
 *
 * A capture in a foreign format (a Kineto or Chrome JSON, gzipped or not,
 * an Nsight Systems export, a CUDA log) is parsed inside trace_source_open,
 * before a statement can be counted. cli_open shows that reading as a
 * session of its own (cli_progress_open), quiet until the format's reader
 * says how far it is through trace_source_opts.progress: bytes of the file
 * -- "syncsim import: [###    ] 47% 12.3/26.0 MB, 1.2 s, ETA 1.4 s" -- or
 * rows of an export; a second file (an execution trace, then its Kineto
 * trace), or a step after the reading in a unit of its own (the CUDA log's
 * "records"), is a second pass. The session ends before the open returns: the
 * statements are then counted as above, and a failed open ends without a
 * last line (cli_progress_abort).
 *
 * The interval is 5 s, or $SYNCSIM_PROGRESS_MS milliseconds when set.
 * $SYNCSIM_PROGRESS=bar|lines|off chooses the form whatever standard error
 * is; any other value, or an interval that is not a whole number of
 * milliseconds from 1 to 86400000, is refused before the command runs
 * (cli_progress_env_check). The ETA is the time of the current pass so far
 * scaled by what is left, shown once 1 % is done; with no total there is
 * no percentage and no ETA, only the count and the rate. Results go to
 * standard output only after cli_progress_end has erased the bar.
 */
#include "cli.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

struct cli_progress {
    char cmd[32];
    char unit[32];
    bool bar;
    bool interval_set;          /* $SYNCSIM_PROGRESS_MS was given */
    int64_t every_ns;
    int64_t t0;
    _Atomic int64_t pass_t0;    /* when the current pass began: what its ETA scales */
    _Atomic uint64_t done, total;
    _Atomic unsigned pass;
    bool quiet;                 /* nothing is shown until a unit is set (cli_progress_open) */
    bool shown;                 /* a line or the bar was printed */
    bool estimate;              /* total is an estimate: no "of TOTAL" at the end */
    bool by_line;               /* done is the line of the last statement read */
    uint32_t last_line;         /* by_line: the reading thread's, until published */
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

/* "12.3 MB", "1.5 GB", "812 kB", "512 bytes": n bytes in the scale of
 * `scale` bytes (a total, so that done and total read alike). */
static void fmt_bytes(char *buf, size_t cap, uint64_t n, uint64_t scale, bool with_unit)
{
    static const struct { double size; const char *name; } units[] = {
        { 1e9, "GB" }, { 1e6, "MB" }, { 1e3, "kB" },
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if ((double)scale >= units[i].size) {
            snprintf(buf, cap, "%.1f%s%s", (double)n / units[i].size, with_unit ? " " : "",
                     with_unit ? units[i].name : "");
            return;
        }
    snprintf(buf, cap, "%llu%s", (unsigned long long)n, with_unit ? " bytes" : "");
}

/* How much is done, in the session's unit: "1234/2600 statements" (sep
 * "/"), "1234 of 2600 statements" (sep " of "), or "1234 statements" with
 * no total; bytes as "12.3/26.0 MB". */
static void fmt_amount(char *buf, size_t cap, const cli_progress *p, uint64_t done,
                       uint64_t total, const char *sep)
{
    if (strcmp(p->unit, "bytes") == 0) {
        char d[32], t[32];
        fmt_bytes(d, sizeof d, done, total ? total : done, !total);
        fmt_bytes(t, sizeof t, total, total, true);
        if (total)
            snprintf(buf, cap, "%s%s%s", d, sep, t);
        else
            snprintf(buf, cap, "%s", d);
    } else if (total) {
        snprintf(buf, cap, "%llu%s%llu %s", (unsigned long long)done, sep,
                 (unsigned long long)total, p->unit);
    } else {
        snprintf(buf, cap, "%llu %s", (unsigned long long)done, p->unit);
    }
}

/* The width of the terminal on standard error: TIOCGWINSZ, else $COLUMNS,
 * else 80. */
static int columns(void)
{
    struct winsize ws;
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    unsigned long long n;
    if (c && cli_parse_u64(c, &n) == 0 && n > 0 && n < 10000)
        return (int)n;
    return 80;
}

/* The bar: "CMD: [####    ] 47% 1234567/2600000 statements, 5.1 s, ETA 5.7 s"
 * in fewer than `width` columns into buf: as the width asks, the bar is
 * narrowed, then left out, then the counts, then the time so far; the
 * percentage and the ETA stay (cut only on a terminal too narrow even for
 * them). */
static void bar_line(char *buf, size_t cap, int width, const char *head, int pct,
                     const char *counts, const char *took, const char *eta)
{
    for (int form = 0; form < 4; form++) {
        bool with_bar = form == 0, with_counts = form <= 1, with_took = form <= 2;
        char tail[256];
        snprintf(tail, sizeof tail, "%3d%%%s%s%s%s%s", pct, with_counts ? " " : "",
                 with_counts ? counts : "", with_took ? ", " : "", with_took ? took : "", eta);
        if (with_bar) {
            int room = width - 1 - (int)strlen(head) - (int)strlen(tail) - 3;  /* "[" "] " */
            if (room < 5)
                continue;
            int w = room < 30 ? room : 30, fill = pct * w / 100;
            snprintf(buf, cap, "%s[%.*s%*s] %s", head, fill, "##############################",
                     w - fill, "", tail);
            break;
        }
        snprintf(buf, cap, "%s%s", head, tail);
        if ((int)strlen(buf) < width)
            break;
    }
    if (width > 1 && strlen(buf) >= (size_t)width)
        buf[width - 1] = '\0';
}

static void print_state(cli_progress *p, bool last)
{
    if (p->quiet && !p->unit[0])
        return;                 /* nothing was counted yet */
    uint64_t done = atomic_load(&p->done), total = atomic_load(&p->total);
    unsigned pass = atomic_load(&p->pass);
    int64_t now = mono_ns();
    double elapsed = (double)(now - p->t0) / 1e9;
    double in_pass = (double)(now - atomic_load(&p->pass_t0)) / 1e9;
    char took[32], eta[64] = "", head[96];
    fmt_time(took, sizeof took, elapsed);
    snprintf(head, sizeof head, "syncsim %s: ", p->cmd);
    if (pass > 1)
        snprintf(head + strlen(head), sizeof head - strlen(head), "pass %u: ", pass);
    if (total && done < total && done * 100 >= total && !last) {
        char left[32];
        fmt_time(left, sizeof left, in_pass * (double)(total - done) / (double)done);
        snprintf(eta, sizeof eta, ", ETA %s", left);
    }
    int pct = total ? (int)(done >= total ? 100 : done * 100 / total) : 0;
    if (p->estimate && pct == 100 && !last)
        pct = 99;               /* an estimate's end is not known */
    if (!p->unit[0]) {
        /* nothing counted: the work only says it goes on */
        if (p->bar)
            fprintf(stderr, "\r%sworking, %s\033[K", head, took);
        else
            fprintf(stderr, "%s%s, %s\n", head, last ? "done" : "working", took);
    } else if (p->bar) {
        char counts[96], line[512];
        fmt_amount(counts, sizeof counts, p, done, total, "/");
        if (total) {
            bar_line(line, sizeof line, columns(), head, pct, counts, took, eta);
        } else {
            snprintf(line, sizeof line, "%s%s, %s", head, counts, took);
            int width = columns();
            if (width > 1 && strlen(line) >= (size_t)width)
                line[width - 1] = '\0';
        }
        fprintf(stderr, "\r%s\033[K", line);
    } else if (total && !(last && p->estimate)) {
        char counts[96];
        fmt_amount(counts, sizeof counts, p, done, total, " of ");
        fprintf(stderr, "%s%s%s (%d%%), %s%s\n", head, last ? "done, " : "", counts, pct, took,
                eta);
    } else {
        char counts[96], rate[64];
        fmt_amount(counts, sizeof counts, p, done, 0, "");
        uint64_t per_s = in_pass > 0 ? (uint64_t)((double)done / in_pass) : 0;
        if (strcmp(p->unit, "bytes") == 0)
            fmt_bytes(rate, sizeof rate, per_s, per_s, true);
        else
            snprintf(rate, sizeof rate, "%llu", (unsigned long long)per_s);
        fprintf(stderr, "%s%s%s, %s (%s/s)%s\n", head, last ? "done, " : "", counts, took, rate,
                eta);
    }
    fflush(stderr);
    p->shown = true;
}

/* Adds the statements counted since the last publication to `done`. */
static void publish(cli_progress *p)
{
    if (p->by_line)
        atomic_store_explicit(&p->done, p->last_line, memory_order_relaxed);
    else if (p->unpublished)
        atomic_fetch_add_explicit(&p->done, p->unpublished, memory_order_relaxed);
    p->unpublished = 0;
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

int cli_progress_env_check(void)
{
    const char *form = getenv("SYNCSIM_PROGRESS");
    if (form && strcmp(form, "bar") != 0 && strcmp(form, "lines") != 0 &&
        strcmp(form, "off") != 0) {
        fprintf(stderr, "syncsim: $SYNCSIM_PROGRESS is '%s'; expected bar, lines or off\n", form);
        return 2;
    }
    const char *every = getenv("SYNCSIM_PROGRESS_MS");
    unsigned long long ms;
    if (every && (cli_parse_u64(every, &ms) != 0 || ms == 0 || ms > 86400000)) {
        fprintf(stderr, "syncsim: $SYNCSIM_PROGRESS_MS is '%s'; expected milliseconds from 1 to "
                        "86400000\n", every);
        return 2;
    }
    return 0;
}

/* Starts a session (unit NULL: a quiet one, which shows nothing until a
 * unit is set). */
static cli_progress *start(const char *cmd, const char *unit)
{
    const char *form = getenv("SYNCSIM_PROGRESS");
    if (form && strcmp(form, "off") == 0)
        return NULL;
    cli_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->cmd, sizeof p->cmd, "%s", cmd);
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->quiet = !unit;
    p->bar = form ? strcmp(form, "bar") == 0 : isatty(2);
    unsigned long long ms = 5000;
    const char *every = getenv("SYNCSIM_PROGRESS_MS");
    /* cli_progress_env_check refused a bad value before the command ran */
    if (every && cli_parse_u64(every, &ms) == 0 && ms > 0 && ms <= 86400000)
        p->interval_set = true;
    else
        ms = 5000;
    p->every_ns = (int64_t)ms * 1000000;
    p->t0 = mono_ns();
    atomic_store(&p->pass_t0, p->t0);
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

cli_progress *cli_progress_start(const char *cmd, const char *unit)
{
    return start(cmd, unit);
}

/* trace_progress's hook (cli_progress_hook): how far trace_source_open has
 * read its file, or how far a library's passes are. The first call gives
 * the unit (a session started with unit "" shows "working" until then); another unit (a step after the reading) or
 * done going back (a second file: the execution trace read before its
 * Kineto trace; or the same one read again) is a new pass. */
static void read_progress(void *ctx, const char *unit, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    pthread_mutex_lock(&p->lock);     /* the ticker reads the unit under it */
    bool first = !p->unit[0], other_unit = strcmp(p->unit, unit) != 0;
    if (!first && (other_unit || done < atomic_load(&p->done))) {
        atomic_store(&p->pass_t0, mono_ns());
        atomic_fetch_add(&p->pass, 1);
    }
    if (other_unit)
        snprintf(p->unit, sizeof p->unit, "%s", unit);
    atomic_store(&p->total, total);
    atomic_store(&p->done, done);
    pthread_mutex_unlock(&p->lock);
}

trace_progress cli_progress_hook(cli_progress *p)
{
    return p ? (trace_progress){ read_progress, p } : (trace_progress){ NULL, NULL };
}

cli_progress *cli_progress_open(const char *cmd, trace_source_opts *o)
{
    cli_progress *p = start(cmd, NULL);
    if (p)
        o->progress = cli_progress_hook(p);
    return p;
}

void cli_progress_total(cli_progress *p, uint64_t total)
{
    if (p)
        atomic_store(&p->total, total);
}

void cli_progress_estimate(cli_progress *p, uint64_t total)
{
    if (p) {
        p->estimate = true;
        atomic_store(&p->total, total);
    }
}

void cli_progress_callback(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    if (p) {
        atomic_store(&p->total, total);
        atomic_store(&p->done, done);
    }
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

/* Stops the ticker and frees p: the bar is erased; lines end with the
 * last one when `last_line` (the work is done) and lines were printed. */
static void finish(cli_progress *p, bool last_line)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    publish(p);                 /* the reader's thread has finished with it */
    /* Lines are owed once an interval has passed, even when the ticker was
     * never scheduled in it (a loaded machine): the last line says so. */
    if (!p->shown && !p->bar && mono_ns() - p->t0 >= p->every_ns)
        p->shown = true;
    if (p->shown && p->bar)
        fputs("\r\033[K", stderr);      /* the bar goes; the command's output stays */
    else if (p->shown && last_line)
        print_state(p, true);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void cli_progress_end(cli_progress *p)
{
    finish(p, true);
}

void cli_progress_abort(cli_progress *p)
{
    finish(p, false);
}

/* ------------------------------------------------------------------ */
/* A reader that counts what it gives.                                 */

static int counting_next(void *ctx, trace_stmt *out, trace_error *err)
{
    cli_progress *p = ctx;
    int rc = p->inner->next(p->inner_ctx, out, err);
    if (rc == 1 && p->by_line && out->line > p->last_line)
        p->last_line = out->line;
    else if (rc == 0 && p->by_line)
        p->last_line = (uint32_t)atomic_load(&p->total);   /* the lines after the last one read too */
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
        p->last_line = 0;
        atomic_store(&p->done, 0);
        atomic_store(&p->pass_t0, mono_ns());
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

/* ------------------------------------------------------------------ */
/* What a source holds, for a total.                                   */

/* The lines of the text file at path (0 when it cannot be read). */
static uint64_t count_lines(const char *path)
{
    FILE *f = strcmp(path, "-") != 0 ? fopen(path, "rb") : NULL;
    if (!f)
        return 0;
    static char buf[1 << 16];
    uint64_t n = 0;
    size_t got, last = 0;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (const char *q = buf; (q = memchr(q, '\n', (size_t)(buf + got - q))); q++)
            n++;
        last = got;
    }
    fclose(f);
    return n + (last && buf[last - 1] != '\n');       /* a last line without its newline */
}

uint64_t cli_source_size(trace_source *src, bool *lines)
{
    *lines = false;
    if (src->store)
        return cli_source_statements(src);
    if (src->format == &trace_format_text) {
        *lines = true;
        return count_lines(src->path);
    }
    return 0;
}

void cli_progress_source(cli_progress *p, trace_source *src)
{
    if (!p)
        return;
    bool lines;
    uint64_t total = cli_source_size(src, &lines);
    if (lines) {
        /* a text trace: how far the reader is into its lines */
        pthread_mutex_lock(&p->lock);   /* the ticker reads the unit under it */
        snprintf(p->unit, sizeof p->unit, "lines");
        pthread_mutex_unlock(&p->lock);
        p->by_line = true;
    }
    atomic_store(&p->total, total);
    cli_progress_reader(p, &src->reader);
}
