/*
 * util.c -- what the pictures and the report share: reading a file whole,
 * HTML escaping, and SVG made fit for inlining in a page (they write their
 * files whole or not at all with trace_out_write).
 *
 * Inlining several SVG documents in one HTML page puts their ids in one
 * namespace: Graphviz names its groups "graph0", "node1", gnuplot its
 * clip paths and point symbols "gpPt0". viz_svg_inline prefixes every
 * id="..." and every reference to one (url(#...), href="#...") so that
 * pictures cannot capture each other's definitions.
 */
#include "viz/viz.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int viz_read_file(const char *path, char **data, size_t *len, trace_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return trace_error_set(err, TRACE_EIO, "%s: cannot read: %s", path, strerror(errno)), -1;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            size_t c = cap ? cap * 2 : 131072;
            char *p = realloc(buf, c);
            if (!p) {
                free(buf);
                fclose(f);
                return trace_error_set(err, TRACE_ENOMEM, "out of memory reading %s", path), -1;
            }
            buf = p;
            cap = c;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got < 65536)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return trace_error_set(err, TRACE_EIO, "%s: read failed", path), -1;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

const char *viz_ns_str(double ns, char *buf, size_t cap)
{
    static const struct { double div; const char *unit; } units[] = {
        { 1e9, "s" }, { 1e6, "ms" }, { 1e3, "µs" }, { 1, "ns" },
    };
    size_t u = 0;
    while (u + 1 < sizeof units / sizeof *units && (ns < 0 ? -ns : ns) < units[u].div)
        u++;
    snprintf(buf, cap, "%.6g %s", ns / units[u].div, units[u].unit);
    return buf;
}

void viz_html_escape(FILE *out, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default: fputc(*s, out);
        }
    }
}

void viz_quote_escape(FILE *out, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        if (*s == '\n')
            fputs("\\n", out);
        else
            fputc(*s, out);
    }
}

static bool starts(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0;
}

void viz_svg_inline(FILE *out, const char *data, size_t len, const char *prefix)
{
    const char *p = data, *end = data + len;
    /* Skip the XML prolog, doctype and comments before the root element. */
    const char *svg = NULL;
    for (const char *q = data; q + 4 <= end; q++)
        if (memcmp(q, "<svg", 4) == 0) {
            svg = q;
            break;
        }
    if (svg)
        p = svg;
    while (p < end) {
        if (starts(p, end, " id=\"") || starts(p, end, " id='")) {
            fwrite(p, 1, 5, out);
            fputs(prefix, out);
            p += 5;
        } else if (starts(p, end, "url(#")) {
            fputs("url(#", out);
            fputs(prefix, out);
            p += 5;
        } else if (starts(p, end, "href=\"#") || starts(p, end, "href='#")) {
            fwrite(p, 1, 7, out);
            fputs(prefix, out);
            p += 7;
        } else {
            fputc(*p++, out);
        }
    }
}
