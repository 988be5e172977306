/*
 * syncsim_ggml.c -- syncsim's recording harness for ggml's own scheduler.
 *
 * This file is not part of syncsim's build: `syncsim ggml PATH` (and the
 * differential test, tests/ggml-diff) compiles it with the system's C
 * compiler against the user's ggml tree at PATH -- ggml.c, ggml-alloc.c,
 * ggml-backend.cpp and what they need, built with -O0 -g and
 * GGML_SCHED_MAX_COPIES = the copy count asked for -- and runs it. It is
 * installed as share/syncsim/ggml/syncsim_ggml.c. Nothing of ggml is in
 * it: it plugs recording devices into ggml's backend interface
 * (ggml-backend-impl.h) and drives ggml's real scheduler and allocator with
 * a script, as llama.cpp drives them.
 *
 *   usage: syncsim_ggml SCRIPT TRACE CALLS      (exit 0; 2 bad script;
 *                                               3 ggml refused a graph)
 *          syncsim_ggml --copies                (prints GGML_SCHED_MAX_COPIES)
 *
 * The script (written by syncsim, real/ggml/script.c, whose head comment
 * is its grammar) declares the backends and their families, the graphs
 * (one line per tensor, in execution order) and the calls: a new graph per
 * ubatch, reset, alloc, the user's inputs, compute, outputs, synchronize.
 *
 * The devices record what each backend call does, in two forms:
 *
 *   TRACE  a syncsim text trace (docs/trace-format.md): one stream queue per
 *          GPU, the host; ggml's buffers as buffers, every tensor a view of
 *          its buffer at the bytes ggml-alloc gave it; each node a GPU runs
 *          as an op on its stream (reads of its sources, a write of itself),
 *          a CPU node as a host op; copies as copies on the queue that runs
 *          them; events, waits and synchronizes. Each statement carries
 *          site=FILE:LINE, the line of ggml's scheduler whose call made it
 *          (the innermost frame of a ggml_backend_sched_* function, read
 *          with backtrace() and resolved by addr2line from the -g build at
 *          exit; fn= names the function, call= the backend interface
 *          member). Statements the driver makes (the user's inputs and
 *          reads) say site=llama.cpp/STEP.
 *   CALLS  the same calls in the vocabulary of the twin comparison
 *          (real/ggml/twin.c writes the twin's): one line per call, an
 *          "eval E" line per evaluation, "place" lines for what ggml-alloc
 *          placed after each allocation.
 *
 * Families (what each backend's interface does, as ggml's backends at the
 * commit syncsim pins, docs/scheduler.md):
 *   cuda     a stream; events wait on the stream; cpy_tensor_async between
 *            two GPUs runs on the SOURCE's stream, records the source's
 *            copy event and makes the destination's stream wait for it;
 *            from host memory only when the script says cuda_copy_from_host
 *            (ggml-cuda at llama.cpp #17795 and #20793), on the
 *            destination's stream;
 *   sycl     a stream; event_wait blocks the host (sycl::event::wait); no
 *            cpy_tensor_async;
 *   noasync  a stream; events wait on the stream; no cpy_tensor_async;
 *   cpu      synchronous: graph_compute runs on the host; no events.
 * Buffers hold real memory and copies move real bytes (the MoE ids ggml
 * reads back are the script's); nodes compute nothing.
 */
#define _GNU_SOURCE
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GGML_SCHED_MAX_COPIES
#define GGML_SCHED_MAX_COPIES 4
#endif

#define MAX_DEV 8
#define NAME_CAP 160

static void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "syncsim_ggml: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        die(1, "out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        die(1, "out of memory");
    return p;
}

/* ------------------------------------------------------------------ */
/* Output lines: the trace and the calls, kept until the sites are known. */

typedef struct line_list {
    char **text;
    int *site;                      /* -1: none */
    size_t n, cap;
} line_list;

static line_list trace_lines, call_lines;

static void add_line(line_list *l, int site, const char *fmt, va_list ap)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 1024;
        l->text = realloc(l->text, l->cap * sizeof *l->text);
        l->site = realloc(l->site, l->cap * sizeof *l->site);
        if (!l->text || !l->site)
            die(1, "out of memory");
    }
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        die(1, "out of memory");
    l->text[l->n] = s;
    l->site[l->n++] = site;
}

static void tline(int site, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tline(int site, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(&trace_lines, site, fmt, ap);
    va_end(ap);
}

static void cline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool driver_calls;           /* the driver's own calls: not in the call log */

static void cline(const char *fmt, ...)
{
    if (driver_calls)
        return;
    va_list ap;
    va_start(ap, fmt);
    add_line(&call_lines, -1, fmt, ap);
    va_end(ap);
}

/* A name as a trace token: bare when the text format allows it, else quoted. */
static const char *tok(const char *s, char *buf, size_t cap)
{
    bool bare = (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_';
    for (const char *c = s; *c && bare; c++)
        bare = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
               *c == '_' || *c == '.' || *c == '#' || *c == ':' || *c == '/' || *c == '-';
    if (bare) {
        snprintf(buf, cap, "%s", s);
        return buf;
    }
    size_t k = 0;
    buf[k++] = '"';
    for (const char *c = s; *c && k + 3 < cap; c++) {
        if (*c == '"' || *c == '\\')
            buf[k++] = '\\';
        buf[k++] = (*c >= 0x20 && *c != 0x7f) ? *c : '?';
    }
    buf[k++] = '"';
    buf[k] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ */
/* Call sites: a backtrace per statement, resolved once at exit.       */

#define MAX_FRAMES 16

typedef struct site_rec {
    void *pc[MAX_FRAMES];
    int n;
    const char *call;               /* the backend interface member */
    const char *step;               /* the driver's step when no scheduler frame */
    char text[NAME_CAP];            /* resolved: "FILE:LINE" */
    char fn[NAME_CAP];              /* resolved: the ggml_backend_sched_* function */
} site_rec;

static site_rec *sites;
static int n_sites, cap_sites;
static const char *driver_step = "setup";

/* The site of the backend call in progress (called first thing in it). */
static int site_here(const char *call)
{
    void *pc[MAX_FRAMES];
    int n = backtrace(pc, MAX_FRAMES);
    for (int i = n_sites - 1; i >= 0; i--)
        if (sites[i].n == n && sites[i].call == call && sites[i].step == driver_step &&
            memcmp(sites[i].pc, pc, (size_t)n * sizeof *pc) == 0)
            return i;
    if (n_sites == cap_sites) {
        cap_sites = cap_sites ? cap_sites * 2 : 256;
        sites = realloc(sites, (size_t)cap_sites * sizeof *sites);
        if (!sites)
            die(1, "out of memory");
    }
    site_rec *s = &sites[n_sites];
    memset(s, 0, sizeof *s);
    memcpy(s->pc, pc, (size_t)n * sizeof *pc);
    s->n = n;
    s->call = call;
    s->step = driver_step;
    return n_sites++;
}

static uintptr_t exe_bias;
static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr;
    return 1;                       /* the first object is the program itself */
}

typedef struct frame_info { uintptr_t pc; char fn[NAME_CAP], file[NAME_CAP]; int line; } frame_info;

static int cmp_pc(const void *a, const void *b)
{
    uintptr_t x = ((const frame_info *)a)->pc, y = ((const frame_info *)b)->pc;
    return x < y ? -1 : x > y;
}

/* Every frame's function and line, by addr2line over the -g build (one
 * process for all of them); without addr2line, the function by dladdr. */
static void resolve_sites(void)
{
    size_t n = 0;
    for (int i = 0; i < n_sites; i++)
        n += (size_t)sites[i].n;
    frame_info *f = xcalloc(n, sizeof *f);
    size_t k = 0;
    for (int i = 0; i < n_sites; i++)
        for (int j = 0; j < sites[i].n; j++)
            f[k++].pc = (uintptr_t)sites[i].pc[j];
    qsort(f, n, sizeof *f, cmp_pc);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || f[u - 1].pc != f[i].pc)
            f[u++] = f[i];
    n = u;
    dl_iterate_phdr(first_object, &exe_bias);
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    char tmp[] = "/tmp/syncsim_ggml_pcXXXXXX";
    int fd = mkstemp(tmp);
    FILE *in = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool resolved = false;
    if (in && len > 0) {
        /* return addresses point after the call: one byte back is in it */
        for (size_t i = 0; i < n; i++)
            fprintf(in, "%#lx\n", (unsigned long)(f[i].pc - 1 - exe_bias));
        fclose(in);
        in = NULL;
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "addr2line -f -C -e '%s' < '%s' 2>/dev/null", exe, tmp);
        FILE *p = popen(cmd, "r");
        char fn[1024], loc[1024];
        size_t i = 0;
        while (p && i < n && fgets(fn, sizeof fn, p) && fgets(loc, sizeof loc, p)) {
            fn[strcspn(fn, "\n(")] = '\0';     /* demangled: name(args) */
            loc[strcspn(loc, "\n (")] = '\0';
            snprintf(f[i].fn, sizeof f[i].fn, "%.159s", fn);
            char *colon = strrchr(loc, ':');
            if (colon) {
                *colon = '\0';
                f[i].line = atoi(colon + 1);
            }
            const char *base = strrchr(loc, '/');
            snprintf(f[i].file, sizeof f[i].file, "%.120s", base ? base + 1 : loc);
            i++;
        }
        resolved = p && pclose(p) == 0 && i == n;
    }
    if (in)
        fclose(in);
    if (fd >= 0)
        unlink(tmp);
    if (!resolved)
        for (size_t i = 0; i < n; i++) {
            Dl_info di;
            f[i].line = 0;
            snprintf(f[i].file, sizeof f[i].file, "?");
            snprintf(f[i].fn, sizeof f[i].fn, "%s",
                     dladdr((void *)f[i].pc, &di) && di.dli_sname ? di.dli_sname : "?");
        }
    for (int i = 0; i < n_sites; i++) {
        site_rec *s = &sites[i];
        for (int j = 0; j < s->n; j++) {
            frame_info key = { .pc = (uintptr_t)s->pc[j] };
            frame_info *fi = bsearch(&key, f, n, sizeof *f, cmp_pc);
            if (!fi || strncmp(fi->fn, "ggml_backend_sched_", 19) != 0 ||
                strcmp(fi->fn, "ggml_backend_sched_get_tensor_backend") == 0)
                continue;
            if (fi->line > 0)
                snprintf(s->text, sizeof s->text, "%.120s:%d", fi->file, fi->line);
            else
                snprintf(s->text, sizeof s->text, "%s", fi->fn);
            snprintf(s->fn, sizeof s->fn, "%s", fi->fn);
            break;
        }
        if (!s->text[0])
            snprintf(s->text, sizeof s->text, "llama.cpp/%s", s->step);
    }
    free(f);
}

/* ------------------------------------------------------------------ */
/* Memory: ggml's buffers and host memory, as trace buffers.           */

typedef struct region {
    const char *base;
    size_t size;
    char name[NAME_CAP];
    int dev;                        /* device index of its memory; -1 host */
    bool live, declared;
    ggml_backend_buffer_t buf;      /* NULL: host memory outside ggml's buffers */
} region;

static region *regions;
static int n_regions, cap_regions;

static int region_add(const char *base, size_t size, const char *name, int dev,
                      ggml_backend_buffer_t buf)
{
    if (n_regions == cap_regions) {
        cap_regions = cap_regions ? cap_regions * 2 : 64;
        regions = realloc(regions, (size_t)cap_regions * sizeof *regions);
        if (!regions)
            die(1, "out of memory");
    }
    region *r = &regions[n_regions];
    memset(r, 0, sizeof *r);
    r->base = base;
    r->size = size ? size : 1;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->dev = dev;
    r->live = true;
    r->buf = buf;
    return n_regions++;
}

static int region_of(const void *p)
{
    const char *c = p;
    for (int i = n_regions - 1; i >= 0; i--)
        if (regions[i].live && c >= regions[i].base && c < regions[i].base + regions[i].size)
            return i;
    return -1;
}

static void region_declare(int r)
{
    region *g = &regions[r];
    if (g->declared)
        return;
    g->declared = true;
    if (g->buf && g->buf->usage == GGML_BACKEND_BUFFER_USAGE_COMPUTE && strstr(g->name, ".buf")) {
        /* ggml-alloc's compute buffer: GPU0.compute, GPU0.compute.2, ... */
        char dev[32];
        int k = 1;
        snprintf(dev, sizeof dev, "%.*s", (int)(strstr(g->name, ".buf") - g->name), g->name);
        for (int i = 0; i < n_regions; i++)
            if (regions[i].declared && i != r && regions[i].buf &&
                strncmp(regions[i].name, dev, strlen(dev)) == 0 &&
                strstr(regions[i].name, ".compute"))
                k++;
        snprintf(g->name, sizeof g->name, k > 1 ? "%s.compute.%d" : "%s.compute", dev, k);
    }
    char b[NAME_CAP + 8];
    if (g->dev >= 0)
        tline(-1, "buffer %s size=%zu device=%d", tok(g->name, b, sizeof b), g->size, g->dev);
    else
        tline(-1, "buffer %s size=%zu host", tok(g->name, b, sizeof b), g->size);
}

/* Host memory the harness or ggml owns outside ggml's buffers: a region
 * named name, found again by its address. */
static int host_region(const void *p, size_t size, const char *name)
{
    int r = region_of(p);
    if (r >= 0 && (const char *)p + size <= regions[r].base + regions[r].size)
        return r;
    char nm[NAME_CAP];
    for (int k = 0;; k++) {
        snprintf(nm, sizeof nm, k ? "%s.%d" : "%s", name, k);
        bool used = false;
        for (int i = 0; i < n_regions && !used; i++)
            used = strcmp(regions[i].name, nm) == 0;
        if (!used)
            break;
    }
    return region_add(p, size, nm, -1, NULL);
}

/* Tensor views: "NAME", "NAME~2", ... one per distinct place of a name. */
typedef struct view_decl { char name[NAME_CAP], decl[NAME_CAP + 8]; int region; size_t off, size; } view_decl;
static view_decl *views;
static int n_views, cap_views;

static const char *tensor_view(const struct ggml_tensor *t, int r, size_t off, size_t size)
{
    int same_name = 0;
    for (int i = n_views - 1; i >= 0; i--) {
        if (strcmp(views[i].name, t->name) != 0)
            continue;
        if (views[i].region == r && views[i].off == off && views[i].size == size)
            return views[i].decl;
        same_name++;
    }
    if (n_views == cap_views) {
        cap_views = cap_views ? cap_views * 2 : 256;
        views = realloc(views, (size_t)cap_views * sizeof *views);
        if (!views)
            die(1, "out of memory");
    }
    view_decl *v = &views[n_views++];
    snprintf(v->name, sizeof v->name, "%s", t->name[0] ? t->name : "tensor");
    char raw[NAME_CAP + 8];
    snprintf(raw, sizeof raw, same_name ? "%s~%d" : "%s", v->name, same_name + 1);
    tok(raw, v->decl, sizeof v->decl);
    v->region = r;
    v->off = off;
    v->size = size;
    region_declare(r);
    char rb[NAME_CAP + 8];
    tline(-1, "buffer %s in=%s offset=%zu size=%zu", v->decl, tok(regions[r].name, rb, sizeof rb),
          off, size);
    return v->decl;
}

/* The access reference of bytes [off, off + size) of tensor t ("" when it
 * has none: no memory, or no bytes). */
static const char *tensor_ref(const struct ggml_tensor *t, size_t off, size_t size, char *buf,
                              size_t cap)
{
    size_t whole = ggml_nbytes(t);
    if (!t->data || whole == 0 || size == 0) {
        buf[0] = '\0';
        return buf;
    }
    int r = region_of(t->data);
    if (r < 0) {
        buf[0] = '\0';
        return buf;
    }
    size_t base = (size_t)((const char *)t->data - regions[r].base);
    if (base + whole > regions[r].size)
        whole = regions[r].size - base;
    const char *v = tensor_view(t, r, base, whole);
    if (off == 0 && size >= whole)
        snprintf(buf, cap, "%s", v);
    else
        snprintf(buf, cap, "%s[%zu:%zu]", v, off, off + size < whole ? off + size : whole);
    return buf;
}

/* The reference of raw memory [p, p + size): a region's bytes. */
static const char *mem_ref(const void *p, size_t size, const char *host_name, char *buf, size_t cap)
{
    int r = region_of(p);
    if (r < 0)
        r = host_region(p, size, host_name);
    region_declare(r);
    size_t off = (size_t)((const char *)p - regions[r].base);
    char b[NAME_CAP + 8];
    snprintf(buf, cap, "%s[%zu:%zu]", tok(regions[r].name, b, sizeof b), off, off + size);
    return buf;
}

/* ------------------------------------------------------------------ */
/* Devices, buffers, backends.                                         */

enum family { FAM_CUDA, FAM_SYCL, FAM_NOASYNC, FAM_CPU };
static const char *const family_words[] = { "cuda", "sycl", "noasync", "cpu" };

typedef struct hdev {
    char name[16], queue[16];
    enum family family;
    int index, n_events, n_buffers;
    struct ggml_backend_device dev;
    struct ggml_backend_buffer_type buft;
    ggml_backend_t backend;
    bool copy_declared;
} hdev;

static hdev devs[MAX_DEV];
static int n_devs;
static bool cuda_copy_from_host;
static char unsupported[16][32];
static int n_unsupported;

typedef struct hevent { int dev, slot; bool recorded; char name[48]; } hevent;

static long long n_unrecorded_waits;
static void flush_pending_read(void);
static int cur_eval = -1, cur_split;

static hdev *hdev_of(ggml_backend_dev_t d) { return (hdev *)d->context; }
static hdev *hdev_be(ggml_backend_t b) { return hdev_of(b->device); }
static bool is_host_dev(const hdev *h) { return h->family == FAM_CPU; }

/* " token=E split=K site=... " is appended at the end; this is the rest. */
#define META " token=%d split=%d"
#define META_ARGS cur_eval < 0 ? 0 : cur_eval, cur_split

static void declare_queue(hdev *h)
{
    if (!is_host_dev(h))
        tline(-1, "queue %s stream device=%d", h->queue, h->index);
}

/* The names the call log uses: "B#NAME#c" (ggml's copies) is NAME@B.c. */
static int parse_copy_name(const char *name, char *src, size_t cap, char *backend, int *slot)
{
    const char *a = strchr(name, '#'), *b = a ? strrchr(name, '#') : NULL;
    if (!a || b == a)
        return 0;
    snprintf(backend, 32, "%.*s", (int)(a - name), name);
    snprintf(src, cap, "%.*s", (int)(b - a - 1), a + 1);
    *slot = atoi(b + 1);
    return 1;
}

static struct ggml_context *g_names;    /* the current graph's tensors, by name */
static struct ggml_context *g_wnames;   /* the weights' */

/* ROOT[lo:hi] of the bytes t names (off, size inside t; size 0: all). */
static void c_range(const struct ggml_tensor *t, size_t off, size_t size, char *buf, size_t cap)
{
    const struct ggml_tensor *root = t->view_src ? t->view_src : t;
    size_t lo = (t->view_src ? t->view_offs : 0) + off;
    size_t n = size ? size : ggml_nbytes(t);
    char src[GGML_MAX_NAME], be[32], name[GGML_MAX_NAME + 48];
    int slot;
    if (parse_copy_name(root->name, src, sizeof src, be, &slot))
        snprintf(name, sizeof name, "%s@%s.%d", src, be, slot);
    else
        snprintf(name, sizeof name, "%s", root->name);
    snprintf(buf, cap, "%.100s[%zu:%zu]", name, lo, lo + n);
}

/* The graph tensor a copy was made from (by its name), its backend, slot. */
static const struct ggml_tensor *c_source_of(const struct ggml_tensor *copy, char *backend, int *slot)
{
    char src[GGML_MAX_NAME];
    if (!parse_copy_name(copy->name, src, sizeof src, backend, slot))
        return NULL;
    struct ggml_tensor *t = g_names ? ggml_get_tensor(g_names, src) : NULL;
    return t ? t : g_wnames ? ggml_get_tensor(g_wnames, src) : NULL;
}

static void c_copy(const char *mode, const struct ggml_tensor *src, const struct ggml_tensor *dst)
{
    char be[32], range[160];
    int slot = 0;
    if (!c_source_of(dst, be, &slot))
        snprintf(be, sizeof be, "?%.28s", dst->name);
    c_range(src, 0, 0, range, sizeof range);
    cline("copy %s %s -> %s.%d", mode, range, be, slot);
}

/* What ggml-alloc placed: recorded as it initializes tensors. */
typedef struct placed { char name[GGML_MAX_NAME + 48]; int dev; size_t off, size; } placed;
static placed *placements;
static int n_placed, cap_placed;

/* The scheduler's copies in host memory, by address (the destination of a
 * blocking read-back names the copy only by its bytes). The entries are
 * ggml's tensor structs, which its scheduler makes anew in the same memory
 * for every graph: what one holds now is checked at each look-up. */
static const struct ggml_tensor *host_copies[4096];
static int n_host_copies;

static const struct ggml_tensor *copy_at(const void *data)
{
    for (int i = n_host_copies - 1; i >= 0; i--)
        if (host_copies[i]->data == data && strchr(host_copies[i]->name, '#') &&
            host_copies[i]->buffer && ggml_backend_buffer_is_host(host_copies[i]->buffer))
            return host_copies[i];
    return NULL;
}

static enum ggml_status hbuf_init_tensor(ggml_backend_buffer_t buf, struct ggml_tensor *t)
{
    if (strchr(t->name, '#') && ggml_backend_buffer_is_host(buf) && t->data) {
        int i = 0;
        while (i < n_host_copies && host_copies[i] != t)
            i++;
        if (i == n_host_copies && n_host_copies < (int)(sizeof host_copies / sizeof host_copies[0]))
            host_copies[n_host_copies++] = t;
    }
    if (t->view_src || buf->usage != GGML_BACKEND_BUFFER_USAGE_COMPUTE || !t->data)
        return GGML_STATUS_SUCCESS;
    if (n_placed == cap_placed) {
        cap_placed = cap_placed ? cap_placed * 2 : 256;
        placements = realloc(placements, (size_t)cap_placed * sizeof *placements);
        if (!placements)
            die(1, "out of memory");
    }
    placed *p = &placements[n_placed++];
    char src[GGML_MAX_NAME], be[32];
    int slot;
    if (parse_copy_name(t->name, src, sizeof src, be, &slot))
        snprintf(p->name, sizeof p->name, "%s@%s.%d", src, be, slot);
    else
        snprintf(p->name, sizeof p->name, "%s", t->name);
    p->dev = hdev_of(buf->buft->device)->index;
    p->off = (size_t)((char *)t->data - (char *)buf->context);
    p->size = ggml_nbytes(t);
    return GGML_STATUS_SUCCESS;
}

static void hbuf_free(ggml_backend_buffer_t buf)
{
    for (int i = 0; i < n_regions; i++)
        if (regions[i].buf == buf)
            regions[i].live = false;
    free(buf->context);
}
static void *hbuf_base(ggml_backend_buffer_t buf) { return buf->context; }

static void hbuf_memset(ggml_backend_buffer_t b, struct ggml_tensor *t, uint8_t v, size_t o, size_t n)
{
    (void)b;
    int site = site_here("memset_tensor");
    flush_pending_read();
    char r[NAME_CAP * 2];
    memset((char *)t->data + o, v, n);
    if (*tensor_ref(t, o, n, r, sizeof r))
        tline(site, "host op memset w:%s" META, r, META_ARGS);
}

/* A blocking copy by the host into a buffer: ggml_backend_tensor_set,
 * also as ggml_backend_tensor_copy from host memory. */
static void hbuf_set(ggml_backend_buffer_t b, struct ggml_tensor *t, const void *data, size_t o,
                     size_t n)
{
    (void)b;
    int site = site_here("set_tensor");
    flush_pending_read();
    memcpy((char *)t->data + o, data, n);
    char be[32], range[160], sr[NAME_CAP * 2], dr[NAME_CAP * 2], lab[NAME_CAP + 8];
    int slot = 0;
    const struct ggml_tensor *src = c_source_of(t, be, &slot);
    if (src) {
        c_range(src, o, n == ggml_nbytes(t) && o == 0 ? 0 : n, range, sizeof range);
        cline("copy sync %s -> %s.%d", range, be, slot);
    } else {
        cline("set %s", t->name);
    }
    mem_ref(data, n, "host.ggml", sr, sizeof sr);
    if (*tensor_ref(t, o, n, dr, sizeof dr)) {
        char nm[NAME_CAP];
        snprintf(nm, sizeof nm, "set %s", t->name);
        tline(site, "host copy %s %s %s" META, tok(nm, lab, sizeof lab), sr, dr, META_ARGS);
    }
}

/* A read-back by the host into host memory: ggml_backend_tensor_get. */
static void hbuf_get(ggml_backend_buffer_t b, const struct ggml_tensor *t, void *data, size_t o,
                     size_t n)
{
    (void)b;
    int site = site_here("get_tensor");
    flush_pending_read();
    memcpy(data, (const char *)t->data + o, n);
    /* A copy into a host tensor is found by its bytes (the call log names it). */
    const struct ggml_tensor *copy = copy_at(data);
    bool logged = copy != NULL;
    if (copy)
        c_copy("sync", t, copy);
    char sr[NAME_CAP * 2], dr[NAME_CAP * 2], lab[NAME_CAP + 8], range[160];
    if (!logged) {
        c_range(t, o, n, range, sizeof range);
        cline("get %s", range);
    }
    if (*tensor_ref(t, o, n, sr, sizeof sr)) {
        mem_ref(data, n, "host.ggml", dr, sizeof dr);
        char nm[NAME_CAP];
        snprintf(nm, sizeof nm, "get %s", t->name);
        tline(site, "host copy %s %s %s" META, tok(nm, lab, sizeof lab), sr, dr, META_ARGS);
    }
}

static bool hbuf_cpy(ggml_backend_buffer_t b, const struct ggml_tensor *src, struct ggml_tensor *dst)
{
    (void)b;
    int site = site_here("cpy_tensor");
    flush_pending_read();
    memcpy(dst->data, src->data, ggml_nbytes(src));
    c_copy("sync", src, dst);
    char sr[NAME_CAP * 2], dr[NAME_CAP * 2], lab[NAME_CAP + 8];
    if (*tensor_ref(src, 0, ggml_nbytes(src), sr, sizeof sr) &&
        *tensor_ref(dst, 0, ggml_nbytes(dst), dr, sizeof dr)) {
        char nm[NAME_CAP];
        snprintf(nm, sizeof nm, "cpy %s", dst->name);
        tline(site, "host copy %s %s %s" META, tok(nm, lab, sizeof lab), sr, dr, META_ARGS);
    }
    return true;
}

static void hbuf_clear(ggml_backend_buffer_t b, uint8_t v) { memset(b->context, v, b->size); }

static const struct ggml_backend_buffer_i hbuf_iface = {
    .free_buffer = hbuf_free, .get_base = hbuf_base, .init_tensor = hbuf_init_tensor,
    .memset_tensor = hbuf_memset, .set_tensor = hbuf_set, .get_tensor = hbuf_get,
    .cpy_tensor = hbuf_cpy, .clear = hbuf_clear,
};

static const char *hbuft_name(ggml_backend_buffer_type_t t) { return hdev_of(t->device)->name; }
static ggml_backend_buffer_t hbuft_alloc(ggml_backend_buffer_type_t t, size_t size)
{
    hdev *h = hdev_of(t->device);
    void *mem = xcalloc(1, size ? size : 1);
    ggml_backend_buffer_t buf = ggml_backend_buffer_init(t, hbuf_iface, mem, size);
    char name[NAME_CAP];
    snprintf(name, sizeof name, "%s.buf%d", h->name, ++h->n_buffers);
    region_add(mem, size, name, is_host_dev(h) ? -1 : h->index, buf);
    return buf;
}
static size_t hbuft_align(ggml_backend_buffer_type_t t) { (void)t; return 256; }
static bool hbuft_is_host(ggml_backend_buffer_type_t t) { return is_host_dev(hdev_of(t->device)); }

static const struct ggml_backend_buffer_type_i hbuft_iface = {
    .get_name = hbuft_name, .alloc_buffer = hbuft_alloc, .get_alignment = hbuft_align,
    .is_host = hbuft_is_host,
};

static const char *hbe_name(ggml_backend_t b) { return hdev_be(b)->name; }
static void hbe_free(ggml_backend_t b) { (void)b; }

/* MoE: the host's read of ids ggml got back into its own memory (it
 * reads them right after the get and the synchronize that follows it). */
static char pending_read[NAME_CAP * 2];
static int pending_read_site = -1;

static void flush_pending_read(void)
{
    if (pending_read_site < 0)
        return;
    tline(pending_read_site, "host op \"read ids\" r:%s" META, pending_read, META_ARGS);
    pending_read_site = -1;
}

static void hbe_set_async(ggml_backend_t b, struct ggml_tensor *t, const void *data, size_t o, size_t n)
{
    int site = site_here("set_tensor_async");
    flush_pending_read();
    hdev *h = hdev_be(b);
    memcpy((char *)t->data + o, data, n);
    char be[32], range[160], sr[NAME_CAP * 2], dr[NAME_CAP * 2], lab[NAME_CAP + 8];
    int slot = 0;
    const struct ggml_tensor *src = c_source_of(t, be, &slot);
    if (src) {
        c_range(src, o, n, range, sizeof range);
        cline("setasync %s -> %s.%d", range, be, slot);
    } else {
        cline("setasync %s %s", h->name, t->name);
    }
    mem_ref(data, n, "host.ggml", sr, sizeof sr);
    if (*tensor_ref(t, o, n, dr, sizeof dr)) {
        char nm[NAME_CAP];
        snprintf(nm, sizeof nm, "set_async %s", t->name);
        tline(site, "%s copy %s %s %s" META, h->queue, tok(nm, lab, sizeof lab), sr, dr, META_ARGS);
    }
}

static void hbe_get_async(ggml_backend_t b, const struct ggml_tensor *t, void *data, size_t o, size_t n)
{
    int site = site_here("get_tensor_async");
    flush_pending_read();
    hdev *h = hdev_be(b);
    memcpy(data, (const char *)t->data + o, n);
    char range[160], sr[NAME_CAP * 2], dr[NAME_CAP * 2], lab[NAME_CAP + 8];
    c_range(t, 0, 0, range, sizeof range);
    cline("getasync %s %s", h->name, range);
    int r = region_of(data);
    if (*tensor_ref(t, o, n, sr, sizeof sr)) {
        mem_ref(data, n, "host.ggml", dr, sizeof dr);
        char nm[NAME_CAP];
        snprintf(nm, sizeof nm, "get_async %s", t->name);
        tline(site, "%s copy %s %s %s" META, h->queue, tok(nm, lab, sizeof lab), sr, dr, META_ARGS);
        if (r < 0 || !regions[r].buf) {
            /* into ggml's own memory (a std::vector): ggml reads it next */
            if (r < 0 || strncmp(regions[r].name, "host.ggml", 9) == 0) {
                snprintf(pending_read, sizeof pending_read, "%s", dr);
                pending_read_site = site;
            }
        }
    }
}

/* One copy statement on queue q, with the cuda hand-over when it runs on
 * the source's stream for another device's. */
static void copy_stmt(int site, const char *q, const struct ggml_tensor *src,
                      const struct ggml_tensor *dst)
{
    char sr[NAME_CAP * 2], dr[NAME_CAP * 2], lab[NAME_CAP + 8], nm[NAME_CAP];
    if (*tensor_ref(src, 0, ggml_nbytes(src), sr, sizeof sr) &&
        *tensor_ref(dst, 0, ggml_nbytes(dst), dr, sizeof dr)) {
        snprintf(nm, sizeof nm, "cpy %s", dst->name);
        tline(site, "%s copy %s %s %s" META, q, tok(nm, lab, sizeof lab), sr, dr, META_ARGS);
    }
}

/* ggml-cuda's cpy_tensor_async (see the head comment). */
static bool hbe_cpy_async(ggml_backend_t bs, ggml_backend_t bd, const struct ggml_tensor *src,
                          struct ggml_tensor *dst)
{
    int site = site_here("cpy_tensor_async");
    hdev *hs = hdev_be(bs), *hd = hdev_be(bd);
    const struct ggml_tensor *sr = src->view_src ? src->view_src : src;
    const struct ggml_tensor *dr = dst->view_src ? dst->view_src : dst;
    if (!sr->buffer || !dr->buffer || hd->family != FAM_CUDA ||
        ggml_backend_buffer_is_host(dr->buffer))
        return false;
    bool from_host = ggml_backend_buffer_is_host(sr->buffer);
    if (from_host ? !(cuda_copy_from_host && is_host_dev(hs)) : hs->family != FAM_CUDA)
        return false;
    flush_pending_read();
    memcpy(dst->data, src->data, ggml_nbytes(dst));
    c_copy("async", src, dst);
    if (from_host) {
        copy_stmt(site, hd->queue, src, dst);   /* on the destination's stream */
    } else if (hs != hd) {
        copy_stmt(site, hs->queue, src, dst);   /* on the source's stream */
        char ev[48];
        snprintf(ev, sizeof ev, "copy_event.%s", hs->name);
        tline(site, "%s record %s" META, hs->queue, ev, META_ARGS);
        tline(site, "%s wait %s" META, hd->queue, ev, META_ARGS);
    } else {
        copy_stmt(site, hs->queue, src, dst);
    }
    return true;
}

static void hbe_sync(ggml_backend_t b)
{
    int site = site_here("synchronize");
    hdev *h = hdev_be(b);
    cline("sync %s", h->name);
    if (pending_read_site >= 0) {
        tline(site, "host sync %s" META, h->queue, META_ARGS);
        flush_pending_read();
        return;
    }
    tline(site, "host sync %s" META, h->queue, META_ARGS);
}

static bool is_view_op(enum ggml_op op)
{
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

static enum ggml_status hbe_compute(ggml_backend_t b, struct ggml_cgraph *g)
{
    int site = site_here("graph_compute");
    flush_pending_read();
    hdev *h = hdev_be(b);
    int k = 0;
    const char *first = "-";
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ggml_tensor *t = g->nodes[i];
        if (is_view_op(t->op) || t->op == GGML_OP_NONE)
            continue;
        if (k++ == 0)
            first = t->name;
        /* the node reads its sources and writes itself */
        char acc[4096], r[NAME_CAP * 2], lab[NAME_CAP + 8];
        size_t used = 0;
        acc[0] = '\0';
        for (int j = 0; j < GGML_MAX_SRC; j++)
            if (t->src[j] && *tensor_ref(t->src[j], 0, ggml_nbytes(t->src[j]), r, sizeof r) &&
                used + strlen(r) + 4 < sizeof acc)
                used += (size_t)snprintf(acc + used, sizeof acc - used, " r:%s", r);
        if (*tensor_ref(t, 0, ggml_nbytes(t), r, sizeof r) && used + strlen(r) + 4 < sizeof acc)
            used += (size_t)snprintf(acc + used, sizeof acc - used, " w:%s", r);
        tline(site, "%s op %s%s" META, h->queue, tok(t->name, lab, sizeof lab), acc, META_ARGS);
    }
    cline("compute %s %s n=%d", h->name, first, k);
    cur_split++;
    return GGML_STATUS_SUCCESS;
}

static void hbe_record(ggml_backend_t b, ggml_backend_event_t e)
{
    int site = site_here("event_record");
    flush_pending_read();
    hevent *ev = e->context;
    hdev *h = hdev_be(b);
    ev->recorded = true;
    cline("record %s %s.%d", h->name, devs[ev->dev].name, ev->slot);
    tline(site, "%s record %s" META, h->queue, ev->name, META_ARGS);
}

/* Named difference: a wait for an event never recorded (the first
 * evaluations' slots) waits for nothing in CUDA; it is left out of both
 * outputs (the checker would report a wait on an unrecorded event) and
 * counted. */
static void hbe_wait(ggml_backend_t b, ggml_backend_event_t e)
{
    int site = site_here("event_wait");
    flush_pending_read();
    hevent *ev = e->context;
    hdev *h = hdev_be(b);
    if (!ev->recorded) {
        n_unrecorded_waits++;
        return;
    }
    if (h->family == FAM_SYCL) {
        /* ggml-sycl: sycl::event::wait() -- the host blocks */
        cline("evsync %s.%d", devs[ev->dev].name, ev->slot);
        tline(site, "host wait %s" META, ev->name, META_ARGS);
        return;
    }
    cline("wait %s %s.%d", h->name, devs[ev->dev].name, ev->slot);
    tline(site, "%s wait %s" META, h->queue, ev->name, META_ARGS);
}

static const struct ggml_backend_i cuda_iface = {
    .get_name = hbe_name, .free = hbe_free, .set_tensor_async = hbe_set_async,
    .get_tensor_async = hbe_get_async, .cpy_tensor_async = hbe_cpy_async,
    .synchronize = hbe_sync, .graph_compute = hbe_compute, .event_record = hbe_record,
    .event_wait = hbe_wait,
};

/* sycl and noasync: no cpy_tensor_async (every copy into them is the host's). */
static const struct ggml_backend_i stream_iface = {
    .get_name = hbe_name, .free = hbe_free, .set_tensor_async = hbe_set_async,
    .get_tensor_async = hbe_get_async, .synchronize = hbe_sync, .graph_compute = hbe_compute,
    .event_record = hbe_record, .event_wait = hbe_wait,
};

static const struct ggml_backend_i cpu_iface = {
    .get_name = hbe_name, .free = hbe_free, .graph_compute = hbe_compute,
};

static const char *hdev_name(ggml_backend_dev_t d) { return hdev_of(d)->name; }
static void hdev_memory(ggml_backend_dev_t d, size_t *f, size_t *t) { (void)d; *f = *t = (size_t)1 << 40; }
static enum ggml_backend_dev_type hdev_type(ggml_backend_dev_t d)
{
    return is_host_dev(hdev_of(d)) ? GGML_BACKEND_DEVICE_TYPE_CPU : GGML_BACKEND_DEVICE_TYPE_GPU;
}
static void hdev_props(ggml_backend_dev_t d, struct ggml_backend_dev_props *p)
{
    memset(p, 0, sizeof *p);
    p->name = hdev_name(d);
    p->description = hdev_name(d);
    p->type = hdev_type(d);
    p->caps.async = !is_host_dev(hdev_of(d));
    p->caps.events = !is_host_dev(hdev_of(d));
}
static ggml_backend_buffer_type_t hdev_buft(ggml_backend_dev_t d) { return &hdev_of(d)->buft; }

static const char *op_word(const struct ggml_tensor *op);
static bool hdev_supports_op(ggml_backend_dev_t d, const struct ggml_tensor *op)
{
    if (is_host_dev(hdev_of(d)))
        return true;
    for (int i = 0; i < n_unsupported; i++)
        if (strcmp(unsupported[i], op_word(op)) == 0)
            return false;
    return true;
}
static bool hdev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t t)
{
    return t == &hdev_of(d)->buft;
}

/* ggml-cuda's offload_op: a batch of 32 or more (get_op_batch_size). */
static bool hdev_offload_op(ggml_backend_dev_t d, const struct ggml_tensor *op)
{
    if (is_host_dev(hdev_of(d)))
        return false;
    int64_t batch;
    switch (op->op) {
    case GGML_OP_GET_ROWS: batch = 0; break;
    case GGML_OP_MUL_MAT: batch = op->ne[1]; break;
    case GGML_OP_MUL_MAT_ID:
    case GGML_OP_ROPE: batch = op->ne[2]; break;
    default: batch = ggml_nrows(op); break;
    }
    return batch >= 32;
}

static ggml_backend_event_t hdev_event_new(ggml_backend_dev_t d)
{
    hdev *h = hdev_of(d);
    struct ggml_backend_event *e = xcalloc(1, sizeof *e);
    hevent *ev = xcalloc(1, sizeof *ev);
    ev->dev = (int)(h - devs);
    ev->slot = h->n_events++;
    snprintf(ev->name, sizeof ev->name, "event.%s.%d", h->name, ev->slot);
    e->device = d;
    e->context = ev;
    return e;
}
static void hdev_event_free(ggml_backend_dev_t d, ggml_backend_event_t e)
{
    (void)d;
    free(e->context);
    free(e);
}
static void hdev_event_sync(ggml_backend_dev_t d, ggml_backend_event_t e)
{
    (void)d;
    int site = site_here("event_synchronize");
    hevent *ev = e->context;
    if (!ev->recorded) {
        n_unrecorded_waits++;
        return;
    }
    flush_pending_read();
    cline("evsync %s.%d", devs[ev->dev].name, ev->slot);
    tline(site, "host wait %s" META, ev->name, META_ARGS);
}

static const struct ggml_backend_device_i gpu_dev_iface = {
    .get_name = hdev_name, .get_description = hdev_name, .get_memory = hdev_memory,
    .get_type = hdev_type, .get_props = hdev_props, .get_buffer_type = hdev_buft,
    .supports_op = hdev_supports_op, .supports_buft = hdev_supports_buft,
    .offload_op = hdev_offload_op, .event_new = hdev_event_new, .event_free = hdev_event_free,
    .event_synchronize = hdev_event_sync,
};

static const struct ggml_backend_device_i cpu_dev_iface = {
    .get_name = hdev_name, .get_description = hdev_name, .get_memory = hdev_memory,
    .get_type = hdev_type, .get_props = hdev_props, .get_buffer_type = hdev_buft,
    .supports_op = hdev_supports_op, .supports_buft = hdev_supports_buft,
    .offload_op = hdev_offload_op,
};

static void add_device(const char *name, const char *family, int line)
{
    int fam = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(family, family_words[i]) == 0)
            fam = i;
    if (fam < 0 || n_devs == MAX_DEV)
        die(2, "script line %d: backend %s: unknown family '%s' or too many backends", line, name,
            family);
    hdev *h = &devs[n_devs];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%s", name);
    h->family = (enum family)fam;
    h->index = n_devs++;
    if (is_host_dev(h)) {
        snprintf(h->queue, sizeof h->queue, "host");
    } else {
        snprintf(h->queue, sizeof h->queue, "%s", name);
        for (char *c = h->queue; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
    }
    h->dev.iface = is_host_dev(h) ? cpu_dev_iface : gpu_dev_iface;
    h->dev.context = h;
    h->buft.iface = hbuft_iface;
    h->buft.device = &h->dev;
    h->backend = xcalloc(1, sizeof *h->backend);
    h->backend->iface = is_host_dev(h) ? cpu_iface : h->family == FAM_CUDA ? cuda_iface : stream_iface;
    h->backend->device = &h->dev;
    h->backend->context = h;
    declare_queue(h);
}

/* ------------------------------------------------------------------ */
/* Graphs: the script's tensors as ggml tensors.                       */

typedef struct stensor {
    char name[GGML_MAX_NAME];
    enum ggml_type type;
    int64_t ne[4];
    enum ggml_op op;
    int unary;                      /* -1: none */
    int src[4], view_src;
    size_t view_offs;
    unsigned flags;
    int home, user;
} stensor;

#define FLAG_INPUT 1u
#define FLAG_OUTPUT 2u
#define FLAG_WEIGHT 4u
#define FLAG_CACHE 8u

typedef struct sgraph { stensor *t; int n; } sgraph;
static sgraph graphs[8];

static const struct { const char *word; enum ggml_op op; int unary; } op_table[] = {
    { "leaf", GGML_OP_NONE, -1 },         { "mul_mat", GGML_OP_MUL_MAT, -1 },
    { "add", GGML_OP_ADD, -1 },           { "mul", GGML_OP_MUL, -1 },
    { "scale", GGML_OP_SCALE, -1 },       { "rms_norm", GGML_OP_RMS_NORM, -1 },
    { "softmax", GGML_OP_SOFT_MAX, -1 },  { "silu", GGML_OP_UNARY, GGML_UNARY_OP_SILU },
    { "rope", GGML_OP_ROPE, -1 },         { "get_rows", GGML_OP_GET_ROWS, -1 },
    { "cpy", GGML_OP_CPY, -1 },           { "view", GGML_OP_VIEW, -1 },
    { "reshape", GGML_OP_RESHAPE, -1 },   { "permute", GGML_OP_PERMUTE, -1 },
    { "concat", GGML_OP_CONCAT, -1 },     { "mul_mat_id", GGML_OP_MUL_MAT_ID, -1 },
};

static const char *op_word(const struct ggml_tensor *op)
{
    for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
        if (op_table[i].op == op->op &&
            (op_table[i].unary < 0 || op_table[i].unary == ggml_get_op_params_i32(op, 0)))
            return op_table[i].word;
    return "?";
}

static enum ggml_type type_of(const char *w, int line)
{
    if (strcmp(w, "f32") == 0) return GGML_TYPE_F32;
    if (strcmp(w, "f16") == 0) return GGML_TYPE_F16;
    if (strcmp(w, "bf16") == 0) return GGML_TYPE_BF16;
    if (strcmp(w, "i32") == 0) return GGML_TYPE_I32;
    die(2, "script line %d: unknown type '%s'", line, w);
    return GGML_TYPE_F32;
}

static void parse_tensor(stensor *t, const char *text, int line)
{
    char name[GGML_MAX_NAME + 8], type[16], op[32];
    long long ne[4];
    unsigned long long offs;
    int n = sscanf(text, "t %63s %15s %lld %lld %lld %lld %31s %d %d %d %d %d %llu %u %d %d", name,
                   type, &ne[0], &ne[1], &ne[2], &ne[3], op, &t->src[0], &t->src[1], &t->src[2],
                   &t->src[3], &t->view_src, &offs, &t->flags, &t->home, &t->user);
    if (n != 16)
        die(2, "script line %d: expected 't NAME TYPE NE0 NE1 NE2 NE3 OP S0 S1 S2 S3 VIEW_SRC "
               "VIEW_OFFS FLAGS HOME USER'", line);
    snprintf(t->name, sizeof t->name, "%.63s", name);
    t->type = type_of(type, line);
    for (int i = 0; i < 4; i++)
        t->ne[i] = ne[i];
    t->view_offs = (size_t)offs;
    size_t k;
    for (k = 0; k < sizeof op_table / sizeof op_table[0]; k++)
        if (strcmp(op_table[k].word, op) == 0)
            break;
    if (k == sizeof op_table / sizeof op_table[0])
        die(2, "script line %d: op '%s' is not one the harness builds", line, op);
    t->op = op_table[k].op;
    t->unary = op_table[k].unary;
}

typedef struct weights { struct ggml_context *ctx; ggml_backend_buffer_t buf[MAX_DEV]; } weights;
static weights wts;

/* Weights and caches of graph g, once, on their home backend. */
static void make_weights(const sgraph *g)
{
    struct ggml_init_params ip = { (size_t)(g->n + 16) * ggml_tensor_overhead(), NULL, true };
    wts.ctx = ggml_init(ip);
    size_t need[MAX_DEV] = { 0 };
    struct ggml_tensor **made = xcalloc((size_t)g->n, sizeof *made);
    int *home = xcalloc((size_t)g->n, sizeof *home);
    for (int i = 0; i < g->n; i++) {
        const stensor *t = &g->t[i];
        if (!(t->flags & (FLAG_WEIGHT | FLAG_CACHE)) || t->op != GGML_OP_NONE)
            continue;
        made[i] = ggml_new_tensor(wts.ctx, t->type, 4, t->ne);
        ggml_set_name(made[i], t->name);
        home[i] = t->home >= 0 && t->home < n_devs - 1 ? t->home : n_devs - 1;
        need[home[i]] += GGML_PAD(ggml_nbytes(made[i]), 256);
    }
    size_t at[MAX_DEV] = { 0 };
    for (int b = 0; b < n_devs; b++) {
        wts.buf[b] = ggml_backend_buft_alloc_buffer(&devs[b].buft, need[b] ? need[b] : 256);
        ggml_backend_buffer_set_usage(wts.buf[b], GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        for (int r = 0; r < n_regions; r++)
            if (regions[r].buf == wts.buf[b])
                snprintf(regions[r].name, sizeof regions[r].name, "%s.weights", devs[b].name);
    }
    for (int i = 0; i < g->n; i++) {
        if (!made[i])
            continue;
        char *base = ggml_backend_buffer_get_base(wts.buf[home[i]]);
        ggml_backend_tensor_alloc(wts.buf[home[i]], made[i], base + at[home[i]]);
        at[home[i]] += GGML_PAD(ggml_nbytes(made[i]), 256);
    }
    free(made);
    free(home);
    g_wnames = wts.ctx;
}

/* Graph g as a new ggml graph, as llama.cpp builds one per ubatch. */
static struct ggml_cgraph *build_graph(const sgraph *g, struct ggml_context **ctxp)
{
    struct ggml_init_params ip = {
        (size_t)(g->n + 16) * ggml_tensor_overhead() +
            ggml_graph_overhead_custom((size_t)g->n + 16, false),
        NULL, true };
    struct ggml_context *ctx = ggml_init(ip);
    *ctxp = ctx;
    struct ggml_tensor **m = xcalloc((size_t)g->n, sizeof *m);
    struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, (size_t)g->n + 16, false);
    for (int i = 0; i < g->n; i++) {
        const stensor *t = &g->t[i];
        if ((t->flags & (FLAG_WEIGHT | FLAG_CACHE)) && t->op == GGML_OP_NONE) {
            m[i] = ggml_get_tensor(wts.ctx, t->name);
            if (!m[i])
                die(2, "graph tensor %s: no such weight", t->name);
        } else {
            m[i] = ggml_new_tensor(ctx, t->type, 4, t->ne);
            ggml_set_name(m[i], t->name);
            m[i]->op = t->op;
            if (t->unary >= 0)
                ggml_set_op_params_i32(m[i], 0, t->unary);
            for (int k = 0; k < 4; k++)
                m[i]->src[k] = t->src[k] >= 0 && t->src[k] < i ? m[t->src[k]] : NULL;
            if (t->view_src >= 0 && t->view_src < i) {
                m[i]->view_src = m[t->view_src];
                m[i]->view_offs = t->view_offs;
            }
            if (t->flags & FLAG_INPUT)
                ggml_set_input(m[i]);
            if (t->flags & FLAG_OUTPUT)
                ggml_set_output(m[i]);
        }
        if (t->op == GGML_OP_NONE)
            gf->leafs[gf->n_leafs++] = m[i];
        else
            ggml_graph_add_node(gf, m[i]);
    }
    free(m);
    g_names = ctx;
    return gf;
}

/* ------------------------------------------------------------------ */
/* The driver: the script's calls, as llama.cpp makes them.            */

typedef struct user_mem { char name[GGML_MAX_NAME]; int32_t *values; size_t n_values; char *data; size_t size; int region; } user_mem;
static user_mem inputs[64], outputs[16];
static int n_inputs, n_outputs;

static user_mem *user_slot(user_mem *list, int *n, int cap, const char *name, size_t size,
                           const char *prefix)
{
    user_mem *u = NULL;
    for (int i = 0; i < *n && !u; i++)
        if (strcmp(list[i].name, name) == 0)
            u = &list[i];
    if (!u) {
        if (*n == cap)
            die(2, "too many inputs or outputs");
        u = &list[(*n)++];
        memset(u, 0, sizeof *u);
        snprintf(u->name, sizeof u->name, "%s", name);
    }
    if (u->size < size) {
        if (u->data)
            regions[u->region].live = false;
        char *d = xcalloc(1, size);
        if (u->data)
            memcpy(d, u->data, u->size);
        free(u->data);
        u->data = d;
        u->size = size;
        char rn[NAME_CAP];
        snprintf(rn, sizeof rn, "%s.%s", prefix, name);
        u->region = host_region(d, size, rn);
    }
    return u;
}

static void place_log(void)
{
    /* sorted by device, then name: ggml initializes in its own order */
    for (int i = 1; i < n_placed; i++)
        for (int j = i; j > 0; j--) {
            placed *a = &placements[j - 1], *b = &placements[j];
            if (a->dev < b->dev || (a->dev == b->dev && strcmp(a->name, b->name) <= 0))
                break;
            placed t = *a;
            *a = *b;
            *b = t;
        }
    for (int i = 0; i < n_placed; i++)
        if (i == 0 || strcmp(placements[i].name, placements[i - 1].name) != 0 ||
            placements[i].dev != placements[i - 1].dev)
            cline("place %s %s %zu %zu", devs[placements[i].dev].name, placements[i].name,
                  placements[i].off, placements[i].size);
    n_placed = 0;
}

static void run_script(FILE *f)
{
    char buf[1 << 16];
    int line = 0, graph_fill = -1, graph_left = 0;
    ggml_backend_sched_t sched = NULL;
    struct ggml_context *gctx = NULL;
    struct ggml_cgraph *gf = NULL;
    int cur_graph = -1;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        buf[strcspn(buf, "\n")] = '\0';
        if (!buf[0] || buf[0] == '#')
            continue;
        if (graph_left > 0) {
            sgraph *g = &graphs[graph_fill];
            parse_tensor(&g->t[g->n++], buf, line);
            graph_left--;
            continue;
        }
        driver_calls = false;
        char w[32] = "", a[256] = "", b[256] = "";
        int n = sscanf(buf, "%31s %255s %255s", w, a, b);
        if (line == 1) {
            if (strcmp(buf, "syncsim-ggml-script 1") != 0)
                die(2, "script line 1: expected 'syncsim-ggml-script 1'");
            continue;
        }
        if (strcmp(w, "backend") == 0 && n == 3) {
            add_device(a, b, line);
        } else if (strcmp(w, "cuda_copy_from_host") == 0 && n == 2) {
            cuda_copy_from_host = atoi(a) != 0;
        } else if (strcmp(w, "unsupported") == 0 && n == 2) {
            if (n_unsupported < 16)
                snprintf(unsupported[n_unsupported++], 32, "%.31s", a);
        } else if (strcmp(w, "graph") == 0 && n == 3) {
            graph_fill = atoi(a);
            graph_left = atoi(b);
            if (graph_fill < 0 || graph_fill >= 8 || graph_left < 1)
                die(2, "script line %d: bad graph header", line);
            graphs[graph_fill].t = xcalloc((size_t)graph_left, sizeof(stensor));
            graphs[graph_fill].n = 0;
        } else if (strcmp(w, "weights") == 0 && n == 2) {
            driver_step = "weights";
            make_weights(&graphs[atoi(a)]);
        } else if (strcmp(w, "sched") == 0 && n == 2) {
            driver_step = "sched_new";
            ggml_backend_t be[MAX_DEV];
            for (int i = 0; i < n_devs; i++)
                be[i] = devs[i].backend;
            sched = ggml_backend_sched_new(be, NULL, n_devs, 8192, atoi(a) != 0, true);
        } else if (strcmp(w, "eval") == 0 && n == 2) {
            cur_eval = atoi(a);
            cur_split = 0;
            cline("eval %d", cur_eval);
        } else if (strcmp(w, "build") == 0 && n == 2) {
            driver_step = "build_graph";
            if (gctx)
                ggml_free(gctx);
            cur_graph = atoi(a);
            if (cur_graph < 0 || cur_graph >= 8 || !graphs[cur_graph].t)
                die(2, "script line %d: no graph %s", line, a);
            gf = build_graph(&graphs[cur_graph], &gctx);
        } else if (strcmp(w, "reset") == 0) {
            driver_step = "reset";
            ggml_backend_sched_reset(sched);
        } else if (strcmp(w, "alloc") == 0) {
            driver_step = "alloc_graph";
            /* the user's assignments (a graph file's backend=), after the reset */
            const sgraph *g = &graphs[cur_graph];
            for (int i = 0; i < g->n; i++)
                if (g->t[i].user >= 0 && g->t[i].user < n_devs && g->t[i].op != GGML_OP_NONE) {
                    struct ggml_tensor *t = ggml_get_tensor(gctx, g->t[i].name);
                    if (t)
                        ggml_backend_sched_set_tensor_backend(sched, t, devs[g->t[i].user].backend);
                }
            n_placed = 0;
            if (!ggml_backend_sched_alloc_graph(sched, gf))
                die(3, "ggml_backend_sched_alloc_graph failed (script line %d)", line);
            place_log();
        } else if (strcmp(w, "input") == 0 && n >= 2) {
            /* input NAME v0 v1 ...: the i32 values the next set_inputs writes */
            user_mem *u = user_slot(inputs, &n_inputs, 64, a, 4, "user");
            free(u->values);
            u->n_values = 0;
            u->values = xcalloc(strlen(buf) / 2 + 1, sizeof *u->values);
            const char *p = buf + strlen("input ") + strlen(a);
            char *end;
            for (long v = strtol(p, &end, 10); end != p; v = strtol(p, &end, 10)) {
                u->values[u->n_values++] = (int32_t)v;
                p = end;
            }
        } else if (strcmp(w, "set_inputs") == 0) {
            driver_step = "set_inputs";
            driver_calls = true;
            for (int i = 0; i < ggml_graph_n_nodes(gf) + gf->n_leafs; i++) {
                struct ggml_tensor *t = i < gf->n_leafs ? gf->leafs[i] : ggml_graph_node(gf, i - gf->n_leafs);
                if (!(t->flags & GGML_TENSOR_FLAG_INPUT) || !t->data || strchr(t->name, '#'))
                    continue;
                size_t nb = ggml_nbytes(t);
                user_mem *u = user_slot(inputs, &n_inputs, 64, t->name, nb, "user");
                for (size_t k = 0; k < u->n_values && (k + 1) * 4 <= nb; k++)
                    memcpy(u->data + k * 4, &u->values[k], 4);
                ggml_backend_tensor_set(t, u->data, 0, nb);
            }
        } else if (strcmp(w, "compute") == 0) {
            driver_step = "graph_compute_async";
            n_placed = 0;
            ggml_backend_sched_graph_compute_async(sched, gf);
            if (n_placed)
                place_log();
        } else if (strcmp(w, "compute_sync") == 0) {
            driver_step = "graph_compute";
            n_placed = 0;
            ggml_backend_sched_graph_compute(sched, gf);
            if (n_placed)
                place_log();
        } else if (strcmp(w, "output") == 0) {
            driver_step = "get_output";
            driver_calls = true;
            for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
                struct ggml_tensor *t = ggml_graph_node(gf, i);
                if (!(t->flags & GGML_TENSOR_FLAG_OUTPUT) || t->view_src || !t->data)
                    continue;
                size_t nb = ggml_nbytes(t);
                user_mem *u = user_slot(outputs, &n_outputs, 16, t->name, nb, "user.out");
                ggml_backend_t be = ggml_backend_sched_get_tensor_backend(sched, t);
                ggml_backend_tensor_get_async(be, t, u->data, 0, nb);
            }
        } else if (strcmp(w, "sync") == 0) {
            driver_step = "synchronize";
            ggml_backend_sched_synchronize(sched);
        } else if (strcmp(w, "read_output") == 0) {
            driver_step = "read_output";
            driver_calls = true;
            int site = site_here("read");
            flush_pending_read();
            for (int i = 0; i < n_outputs; i++) {
                char r[NAME_CAP * 2], lab[NAME_CAP + 8], nm[NAME_CAP];
                mem_ref(outputs[i].data, outputs[i].size, "user.out", r, sizeof r);
                snprintf(nm, sizeof nm, "read %s", outputs[i].name);
                tline(site, "host op %s r:%s" META, tok(nm, lab, sizeof lab), r, META_ARGS);
            }
        } else {
            die(2, "script line %d: unknown command '%s'", line, buf);
        }
    }
    if (graph_left > 0)
        die(2, "script: graph %d ends early", graph_fill);
    driver_step = "free";
    if (sched)
        ggml_backend_sched_free(sched);
    if (gctx)
        ggml_free(gctx);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--copies") == 0) {
        printf("%d\n", GGML_SCHED_MAX_COPIES);
        return 0;
    }
    if (argc != 4)
        die(2, "usage: syncsim_ggml SCRIPT TRACE CALLS | --copies");
    FILE *f = fopen(argv[1], "r");
    if (!f)
        die(2, "cannot read %s", argv[1]);
    tline(-1, "syncsim-trace 1");
    tline(-1, "queue host host");
    run_script(f);
    fclose(f);
    flush_pending_read();
    resolve_sites();
    FILE *t = fopen(argv[2], "w"), *c = fopen(argv[3], "w");
    if (!t || !c)
        die(2, "cannot write %s or %s", argv[2], argv[3]);
    for (size_t i = 0; i < trace_lines.n; i++) {
        int s = trace_lines.site[i];
        if (s < 0)
            fprintf(t, "%s\n", trace_lines.text[i]);
        else if (sites[s].fn[0])
            fprintf(t, "%s site=%s fn=%s call=%s\n", trace_lines.text[i], sites[s].text, sites[s].fn,
                    sites[s].call);
        else
            fprintf(t, "%s site=%s call=%s\n", trace_lines.text[i], sites[s].text, sites[s].call);
    }
    for (size_t i = 0; i < call_lines.n; i++)
        fprintf(c, "%s\n", call_lines.text[i]);
    fprintf(c, "unrecorded_waits %lld\n", n_unrecorded_waits);
    if (fclose(t) != 0 || fclose(c) != 0)
        die(2, "cannot write %s or %s", argv[2], argv[3]);
    return 0;
}
