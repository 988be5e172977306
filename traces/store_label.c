/*
 * store_label.c -- label templates: how the store keeps labels that differ
 * only by numbers (captured kernel names carry layer and op indices:
 * "L17.qkv.k40213") without one string per statement.
 *
 * A label is split into a template -- the label with STORE_TPL_MARK where
 * each number stood -- and the numbers, which the statement body carries as
 * varints (store.c). A number is a run of decimal digits of at most 18
 * digits (so that it fits a u64) without a leading zero ("0" itself is
 * one): "007" and "000" stay text, because the number could not give them
 * back. A label holding STORE_TPL_MARK already, or with no number, is kept
 * whole. Joining a template with its numbers gives the label back byte for
 * byte.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

static int ensure(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *n = realloc(*buf, c);
    if (!n)
        return -1;
    *buf = n;
    *cap = c;
    return 0;
}

int store_label_split(const char *label, size_t len, char **tpl, size_t *cap, size_t *tpl_len,
                      uint64_t *args, uint32_t max_args)
{
    if (memchr(label, STORE_TPL_MARK, len))
        return 0;
    if (ensure(tpl, cap, len + 1) != 0)
        return -1;
    char *out = *tpl;
    size_t o = 0;
    uint32_t n = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)label[i];
        if (c < '0' || c > '9') {
            out[o++] = (char)c;
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && label[j] >= '0' && label[j] <= '9')
            j++;
        size_t digits = j - i;
        if (n == max_args || digits > 18 || (label[i] == '0' && digits > 1)) {
            memcpy(out + o, label + i, digits);     /* kept as text */
            o += digits;
        } else {
            uint64_t v = 0;
            for (size_t k = i; k < j; k++)
                v = v * 10 + (uint64_t)(label[k] - '0');
            args[n++] = v;
            out[o++] = STORE_TPL_MARK;
        }
        i = j;
    }
    out[o] = '\0';
    *tpl_len = o;
    return (int)n;
}

int64_t store_label_join(const char *tpl, size_t tpl_len, const uint64_t *args, uint32_t n_args,
                         char **buf, size_t *cap)
{
    if (ensure(buf, cap, tpl_len + (size_t)n_args * 20 + 1) != 0)
        return -1;
    char *out = *buf;
    size_t o = 0;
    uint32_t k = 0;
    for (size_t i = 0; i < tpl_len; i++) {
        if (tpl[i] != STORE_TPL_MARK) {
            out[o++] = tpl[i];
            continue;
        }
        if (k == n_args)
            return -1;
        char digits[24];
        int d = 0;
        uint64_t v = args[k++];
        do {
            digits[d++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (d)
            out[o++] = digits[--d];
    }
    if (k != n_args)
        return -1;
    out[o] = '\0';
    return (int64_t)o;
}
