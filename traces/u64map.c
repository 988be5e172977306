/*
 * u64map.c -- a u64 -> u64 open-addressing hash map (linear probing,
 * backward-shift deletion): the binder's and the checker's tables keyed by
 * names, seqs and generations.
 */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

void trace_u64map_free(trace_u64map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

uint64_t *trace_u64map_get(const trace_u64map *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    uint32_t mask = m->cap - 1, i = (uint32_t)mix64(key) & mask;
    while (m->used[i]) {
        if (m->keys[i] == key)
            return &m->vals[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

static int map_grow(trace_u64map *m)
{
    trace_u64map n = { 0 };
    n.cap = m->cap ? m->cap * 2 : 64;
    n.keys = malloc(n.cap * sizeof *n.keys);
    n.vals = malloc(n.cap * sizeof *n.vals);
    n.used = calloc(n.cap, 1);
    if (!n.keys || !n.vals || !n.used) {
        trace_u64map_free(&n);
        return -1;
    }
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        uint32_t j = (uint32_t)mix64(m->keys[i]) & (n.cap - 1);
        while (n.used[j])
            j = (j + 1) & (n.cap - 1);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
    }
    n.count = m->count;
    trace_u64map_free(m);
    *m = n;
    return 0;
}

uint64_t *trace_u64map_put(trace_u64map *m, uint64_t key, uint64_t def)
{
    uint64_t *v = trace_u64map_get(m, key);
    if (v)
        return v;
    if ((m->count + 1) * 4 > m->cap * 3 && map_grow(m) != 0)
        return NULL;
    uint32_t mask = m->cap - 1, i = (uint32_t)mix64(key) & mask;
    while (m->used[i])
        i = (i + 1) & mask;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = def;
    m->count++;
    return &m->vals[i];
}

void trace_u64map_del(trace_u64map *m, uint64_t key)
{
    if (!m->cap)
        return;
    uint32_t mask = m->cap - 1, i = (uint32_t)mix64(key) & mask;
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    if (!m->used[i])
        return;
    /* backward-shift deletion keeps every probe chain unbroken */
    uint32_t j = i;
    for (;;) {
        m->used[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!m->used[j]) {
                m->count--;
                return;
            }
            uint32_t home = (uint32_t)mix64(m->keys[j]) & mask;
            if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
                continue;
            break;
        }
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->used[i] = 1;
        i = j;
    }
}

int trace_u64map_copy(trace_u64map *dst, const trace_u64map *src)
{
    memset(dst, 0, sizeof *dst);
    if (!src->cap)
        return 0;
    dst->keys = malloc(src->cap * sizeof *dst->keys);
    dst->vals = malloc(src->cap * sizeof *dst->vals);
    dst->used = malloc(src->cap);
    if (!dst->keys || !dst->vals || !dst->used) {
        trace_u64map_free(dst);
        return -1;
    }
    memcpy(dst->keys, src->keys, src->cap * sizeof *dst->keys);
    memcpy(dst->vals, src->vals, src->cap * sizeof *dst->vals);
    memcpy(dst->used, src->used, src->cap);
    dst->cap = src->cap;
    dst->count = src->count;
    return 0;
}
