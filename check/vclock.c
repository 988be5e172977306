/*
 * vclock.c -- sparse, reference-counted vector clocks.
 *
 * A trace may have thousands of queues (ranks x streams), but a queue only
 * learns about the queues it synchronises with, directly or transitively.
 * So a clock stores only the entries it has, sorted by queue: a lookup is a
 * binary search, a join a merge of two sorted arrays, and a clock that
 * never synchronised is NULL and costs nothing.
 *
 * Clocks are shared: a snapshot (an event record, a host's state at a
 * submission, a barrier's release) takes a reference instead of a copy.
 * A shared clock is immutable; mutators copy it first (copy-on-write), and
 * mutate in place when they hold the only reference. Joining a clock that
 * is already below the destination costs one comparison pass and no copy.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static check_vc *vc_alloc(uint32_t cap)
{
    if (cap < 4)
        cap = 4;
    check_vc *v = malloc(sizeof *v + (size_t)cap * sizeof v->e[0]);
    if (!v)
        return NULL;
    v->refs = 1;
    v->n = 0;
    v->cap = cap;
    return v;
}

check_vc *check_vc_ref(check_vc *v)
{
    if (v)
        v->refs++;
    return v;
}

void check_vc_unref(check_vc *v)
{
    if (v && --v->refs == 0)
        free(v);
}

static uint32_t vc_find(const check_vc *v, uint32_t q)
{
    uint32_t lo = 0, hi = v->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (v->e[mid].queue < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint32_t check_vc_get(const check_vc *v, uint32_t q)
{
    if (!v)
        return 0;
    if (v->n <= 8) {
        for (uint32_t i = 0; i < v->n; i++)
            if (v->e[i].queue == q)
                return v->e[i].time;
        return 0;
    }
    uint32_t i = vc_find(v, q);
    return i < v->n && v->e[i].queue == q ? v->e[i].time : 0;
}

bool check_vc_leq(const check_vc *a, const check_vc *b)
{
    if (!a || a == b)
        return true;
    if (!b)
        return a->n == 0;
    uint32_t j = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        while (j < b->n && b->e[j].queue < a->e[i].queue)
            j++;
        if (j == b->n || b->e[j].queue != a->e[i].queue) {
            if (a->e[i].time)
                return false;
            continue;
        }
        if (a->e[i].time > b->e[j].time)
            return false;
    }
    return true;
}

bool check_vc_equal(const check_vc *a, const check_vc *b)
{
    return check_vc_leq(a, b) && check_vc_leq(b, a);
}

int check_vc_join(check_vc **dst, const check_vc *src)
{
    check_vc *d = *dst;
    if (!src || src->n == 0 || d == src || check_vc_leq(src, d))
        return 0;
    uint32_t dn = d ? d->n : 0;
    check_vc *out = vc_alloc(dn + src->n);
    if (!out)
        return -1;
    uint32_t i = 0, j = 0, k = 0;
    while (i < dn || j < src->n) {
        if (j == src->n || (i < dn && d->e[i].queue < src->e[j].queue))
            out->e[k++] = d->e[i++];
        else if (i == dn || src->e[j].queue < d->e[i].queue)
            out->e[k++] = src->e[j++];
        else {
            check_vc_entry x = d->e[i++];
            if (src->e[j].time > x.time)
                x.time = src->e[j].time;
            j++;
            out->e[k++] = x;
        }
    }
    out->n = k;
    check_vc_unref(d);
    *dst = out;
    return 0;
}

int check_vc_raise(check_vc **dst, uint32_t q, uint32_t t)
{
    check_vc *d = *dst;
    uint32_t i = d ? vc_find(d, q) : 0;
    bool present = d && i < d->n && d->e[i].queue == q;
    if (present && d->e[i].time >= t)
        return 0;
    if (t == 0)
        return 0;
    if (d && d->refs == 1 && (present || d->n < d->cap)) {
        if (!present) {
            memmove(&d->e[i + 1], &d->e[i], (d->n - i) * sizeof d->e[0]);
            d->e[i].queue = q;
            d->n++;
        }
        d->e[i].time = t;
        return 0;
    }
    uint32_t dn = d ? d->n : 0;
    check_vc *out = vc_alloc(dn + 1 + dn / 2);
    if (!out)
        return -1;
    if (dn)
        memcpy(out->e, d->e, i * sizeof d->e[0]);
    out->e[i].queue = q;
    out->e[i].time = t;
    uint32_t rest = present ? dn - i - 1 : dn - i;
    if (rest)
        memcpy(&out->e[i + 1], &d->e[present ? i + 1 : i], rest * sizeof d->e[0]);
    out->n = i + 1 + rest;
    check_vc_unref(d);
    *dst = out;
    return 0;
}
