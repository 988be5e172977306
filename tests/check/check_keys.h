/*
 * check_keys.h -- a report's findings as a set of keys (check_finding_key),
 * to compare verdicts the way the minimiser does: a removal is kept when
 * the findings without it are a subset of those with it. Header-only, for
 * the minimiser's tests.
 */
#ifndef SYNCSIM_CHECK_KEYS_H
#define SYNCSIM_CHECK_KEYS_H

#include <stdbool.h>
#include <stdlib.h>

#include "check/internal.h"

typedef struct keyset {
    check_fkey *k;
    size_t n;
} keyset;

/* The keys of rep's findings (free k). */
static inline keyset keyset_of(const check_report *rep)
{
    keyset s = { calloc(check_report_count(rep) + 1, sizeof(check_fkey)), 0 };
    for (size_t i = 0; s.k && i < check_report_count(rep); i++)
        s.k[s.n++] = check_finding_key(check_report_finding(rep, i));
    return s;
}

/* Whether every key of a is in b. */
static inline bool keyset_subset(const keyset *a, const keyset *b)
{
    for (size_t i = 0; i < a->n; i++) {
        bool found = false;
        for (size_t j = 0; j < b->n && !found; j++)
            found = a->k[i].a == b->k[j].a && a->k[i].b == b->k[j].b && a->k[i].c == b->k[j].c;
        if (!found)
            return false;
    }
    return true;
}

#endif
