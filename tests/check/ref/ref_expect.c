/*
 * ref_expect.c -- the reference's verdict against a trace's `expect` lines.
 *
 * The expect lines of the litmus traces are the contract's (derived by hand),
 * so agreeing with them shows the reference right without the checker. A
 * race line names one pair; the contract lets the checker choose which pair
 * it names ("it need not list every older pair"), so a race line is checked
 * for what it claims (the two statements ran, are not ordered, and the type
 * is one the contract lets a checker name for them: ref_race_type_ok) and the
 * lines together must cover every byte the reference finds racy. Every other
 * kind is compared as a set.
 */
#include "ref.h"

#include <stdlib.h>
#include <string.h>


static const char *kv_get(const ref_expect *e, const char *key, unsigned nth)
{
    for (uint8_t k = 0; k < e->n_kv; k++)
        if (strcmp(e->key[k], key) == 0 && nth-- == 0)
            return e->val[k];
    return NULL;
}

/* The statement an expect line names: a label, or Q@LINE. */
static uint16_t stmt_named(const ref_trace *t, const char *name)
{
    const char *at = strrchr(name, '@');
    unsigned line = at ? (unsigned)strtoul(at + 1, NULL, 10) : 0;
    for (uint16_t i = 0; i < t->n; i++) {
        const ref_stmt *s = &t->s[i];
        if (s->label != REF_NONE && strcmp(t->names[s->label], name) == 0)
            return i;
        if (at && s->line == line)
            return i;
    }
    return REF_NONE;
}

static uint8_t type_bit(const char *w)
{
    return strcmp(w, "RAW") == 0 ? 1 : strcmp(w, "WAR") == 0 ? 2 : strcmp(w, "WAW") == 0 ? 4 : 0;
}

/* The name set an expect kind with one object key compares with. */
static ref_names *object_set(ref_names sets[4], const char *kind, const char **key)
{
    static const char *const kinds[4] = { "barrier-mismatch", "collective-mismatch",
                                          "unmatched-send", "semaphore-race" };
    static const char *const keys[4] = { "barrier", "comm", "comm", "semaphore" };
    for (int i = 0; i < 4; i++)
        if (strcmp(kind, kinds[i]) == 0) {
            *key = keys[i];
            return &sets[i];
        }
    return NULL;
}

bool ref_expect_agrees(const ref_trace *t, const ref_verdict *v, char *why, size_t cap)
{
    ref_buf m = { why, why ? cap : 0, 0 };
    if (why && cap)
        why[0] = '\0';
    static ref_ivset covered[REF_MAX_BUFS];
    for (uint16_t r = 0; r < t->n_bufs; r++)
        ref_iv_clear(&covered[r]);
    uint32_t blocked = 0;
    ref_names sets[4];
    memset(sets, 0, sizeof sets);
    bool unrecorded[REF_MAX_NAMES] = { 0 };
    ref_uaf uaf[REF_MAX_EXPECT];
    unsigned n_uaf = 0;
    bool ok = true;

    for (uint16_t i = 0; i < t->n_expect; i++) {
        const ref_expect *e = &t->e[i];
        const char *key = NULL;
        ref_names *set = object_set(sets, e->kind, &key);
        if (strcmp(e->kind, "clean") == 0 || strcmp(e->kind, "redundant-sync") == 0) {
            continue;
        } else if (set) {
            const char *name = kv_get(e, key, 0);
            uint16_t id = name ? ref_find_name(t, name) : REF_NONE;
            if (id == REF_NONE) {
                ref_bprintf(&m, "expect %s names nothing known\n", e->kind);
                ok = false;
            } else {
                set->w[id / 64] |= 1ull << (id % 64);
            }
        } else if (strcmp(e->kind, "hang") == 0) {
            const char *q;
            for (unsigned k = 0; (q = kv_get(e, "queue", k)) != NULL; k++) {
                uint16_t qi = ref_find_queue(t, q);
                if (qi == REF_NONE) {
                    ref_bprintf(&m, "expect hang names unknown queue %s\n", q);
                    ok = false;
                } else {
                    blocked |= 1u << qi;
                }
            }
        } else if (strcmp(e->kind, "wait-unrecorded") == 0) {
            const char *ev = kv_get(e, "event", 0);
            uint16_t id = ev ? ref_find_name(t, ev) : REF_NONE;
            if (id != REF_NONE)
                unrecorded[id] = true;
        } else if (strcmp(e->kind, "use-after-free") == 0) {
            const char *bn = kv_get(e, "buffer", 0), *sn = kv_get(e, "second", 0);
            uint16_t b = bn ? ref_find_buffer(t, bn) : REF_NONE;
            uint16_t s = sn ? stmt_named(t, sn) : REF_NONE;
            if (b == REF_NONE || s == REF_NONE || n_uaf >= REF_MAX_EXPECT) {
                ref_bprintf(&m, "expect use-after-free names nothing known\n");
                ok = false;
                continue;
            }
            uaf[n_uaf++] = (ref_uaf){ s, t->b[b].root };
        } else if (strcmp(e->kind, "race") == 0) {
            const char *fn = kv_get(e, "first", 0), *sn = kv_get(e, "second", 0);
            const char *ty = kv_get(e, "type", 0), *bn = kv_get(e, "buffer", 0);
            uint16_t a = fn ? stmt_named(t, fn) : REF_NONE;
            uint16_t b = sn ? stmt_named(t, sn) : REF_NONE;
            uint16_t root = REF_NONE;
            if (bn) {
                uint16_t bi = ref_find_buffer(t, bn);
                root = bi == REF_NONE ? REF_NONE : t->b[bi].root;
            }
            if (a == REF_NONE || b == REF_NONE || a >= b || !ty || !type_bit(ty)) {
                ref_bprintf(&m, "expect race %s/%s: statements not found or not in file order\n",
                    fn ? fn : "?", sn ? sn : "?");
                ok = false;
                continue;
            }
            bool ordered = ref_hb(v, a, b) || ref_hb(v, b, a);
            bool type_ok = false;
            for (uint16_t r = 0; r < t->n_bufs; r++) {
                if (t->b[r].parent != REF_NONE || (root != REF_NONE && r != root))
                    continue;
                ref_ivset bytes;
                uint8_t types, need;
                if (ref_conflict(t, a, b, r, NULL, &bytes, &types) == REF_NONE)
                    continue;
                type_ok |= ref_race_type_ok(t, v, a, b, r, type_bit(ty), &need);
                ref_iv_union(&covered[r], &bytes);
            }
            if (!v->ran[a] || !v->ran[b] || ordered || !type_ok) {
                ref_bprintf(&m, "expected race %s %s/%s: reference has %s\n", ty, fn, sn,
                    !v->ran[a] || !v->ran[b] ? "a statement that never runs"
                    : ordered                 ? "them ordered"
                                              : "no such conflict, or a less telling type than the "
                                                "contract obliges");
                ok = false;
            }
        } else {
            ref_bprintf(&m, "unknown expect kind %s\n", e->kind);
            ok = false;
        }
    }

    if (blocked != v->blocked) {
        ref_bprintf(&m, "hang: expected queues mask %#x, reference blocks %#x\n", blocked, v->blocked);
        ok = false;
    }
    for (uint16_t i = 0; i < v->n_uaf; i++) {
        bool found = false;
        for (unsigned k = 0; k < n_uaf; k++)
            found |= uaf[k].stmt == v->uaf[i].stmt && uaf[k].root == v->uaf[i].root;
        if (!found) {
            char nb[64];
            ref_bprintf(&m, "reference finds use-after-free at %s (root %s), not expected\n",
                ref_stmt_name(t, v->uaf[i].stmt, nb, sizeof nb),
                t->names[t->b[v->uaf[i].root].name]);
            ok = false;
        }
    }
    for (unsigned k = 0; k < n_uaf; k++) {
        bool found = false;
        for (uint16_t i = 0; i < v->n_uaf; i++)
            found |= uaf[k].stmt == v->uaf[i].stmt && uaf[k].root == v->uaf[i].root;
        if (!found) {
            ref_bprintf(&m, "expected use-after-free %u not found by the reference\n", k);
            ok = false;
        }
    }
    for (uint16_t r = 0; r < t->n_bufs; r++) {
        uint32_t lo, hi;
        if (ref_iv_minus_first(&v->racy[r], &covered[r], &lo, &hi)) {
            ref_bprintf(&m, "reference finds bytes [%u, %u) of %s racy; no expected race covers them\n",
                lo, hi, t->names[t->b[r].name]);
            ok = false;
        }
    }
    bool found_unrec[REF_MAX_NAMES] = { 0 };
    for (uint16_t i = 0; i < t->n; i++)
        if (v->wait_unrecorded[i])
            found_unrec[t->s[i].obj] = true;
    for (uint16_t id = 0; id < t->n_names; id++)
        if (found_unrec[id] != unrecorded[id]) {
            ref_bprintf(&m, "wait-unrecorded %s: expected %d, reference %d\n", t->names[id],
                unrecorded[id], found_unrec[id]);
            ok = false;
        }
    const ref_names *found_sets[4] = { &v->barrier_mismatch, &v->coll_mismatch,
                                       &v->unmatched_send, &v->sem_race };
    static const char *const set_words[4] = { "barrier-mismatch", "collective-mismatch",
                                              "unmatched-send", "semaphore-race" };
    for (int k = 0; k < 4; k++)
        if (memcmp(&sets[k], found_sets[k], sizeof sets[k]) != 0) {
            ref_bprintf(&m, "%s findings differ\n", set_words[k]);
            ok = false;
        }
    return ok;
}
