/*
 * ref_diff.c -- the checker against the reference, on one trace.
 *
 * The checker reads the text ref_print writes, through its public API
 * (trace_text_open_string, check_trace), as `syncsim check` does. What is
 * compared is what the contract determines:
 *
 *   hang            the set of blocked queues, exactly.
 *   race            per root buffer, the set of racy bytes: a byte is racy when
 *                   some pair of statements that ran conflicts on it and HB
 *                   orders them neither way. The checker may name any pair it
 *                   "could be compared with" (FastTrack), but on a linearisation
 *                   consistent with HB the first racing access of every byte
 *                   meets an unordered conflicting access among the latest ones
 *                   it keeps (the last write, the reads since it), so every
 *                   racy byte lies in the bytes of some reported pair, and a
 *                   reported pair's bytes are racy. Both directions are checked:
 *                   racy bytes covered by no reported pair (race-missed), a
 *                   reported pair that is ordered, shares no conflicting byte or
 *                   involves a statement that never runs (race-false). The
 *                   pair's type must be one the contract lets it name
 *                   (race-type, ref_race_type_ok: a type the pair has, at
 *                   least as telling, RAW > WAW > WAR, as its type on the
 *                   bytes where, in every order of execution HB allows,
 *                   each is the most recent access the other could be
 *                   compared with; first = earlier line).
 *   use-after-free  the set of (access statement, root), exactly; the free a
 *                   finding names must be a free that makes it one.
 *   the rest        wait-unrecorded (set of waits), barrier-mismatch,
 *                   collective-mismatch, unmatched-send, semaphore-race (sets
 *                   of names), exactly.
 *
 * Traces where the order of deciding ruling 1's blocked awaits matters are
 * compared in full, with the verdict of the order docs/semantics.md
 * documents (ref_eval.c). Traces with sets of one semaphore that HB does not
 * order (ambiguous_sem, ref.h) compare only the static findings and
 * semaphore-race: which statements run, and so hang, races and uses after
 * free, are not fixed by the contract there.
 */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "traces/trace.h"

static const char *const class_words[REF_CLASS_COUNT] = {
#define REF_CLASS_WORD(name, word, what) word,
    REF_CLASS_MAP(REF_CLASS_WORD)
#undef REF_CLASS_WORD
};
static const char *const class_whats[REF_CLASS_COUNT] = {
#define REF_CLASS_WHAT(name, word, what) what,
    REF_CLASS_MAP(REF_CLASS_WHAT)
#undef REF_CLASS_WHAT
};
static const char *const found_words[REF_FOUND_COUNT] = {
#define REF_FOUND_WORD(name, word) word,
    REF_FOUND_MAP(REF_FOUND_WORD)
#undef REF_FOUND_WORD
};

const char *ref_class_word(int c) { return c >= 0 && c < REF_CLASS_COUNT ? class_words[c] : "?"; }
const char *ref_class_what(int c) { return c >= 0 && c < REF_CLASS_COUNT ? class_whats[c] : "?"; }
const char *ref_found_word(int k) { return k >= 0 && k < REF_FOUND_COUNT ? found_words[k] : "?"; }

static bool names_any(const ref_names *s)
{
    for (unsigned k = 0; k < REF_NAME_WORDS; k++)
        if (s->w[k])
            return true;
    return false;
}

uint32_t ref_found_mask(const ref_trace *t, const ref_verdict *v)
{
    uint32_t m = 0;
    bool unrecorded = false;
    for (uint16_t i = 0; i < t->n; i++)
        unrecorded |= v->wait_unrecorded[i];
    if (v->ambiguous_sem)
        m |= 1u << REF_FOUND_AMBIGUOUS_SEM;
    if (v->order_matters && !v->order_matters_run)
        m |= 1u << REF_FOUND_ORDER_HB;
    if (v->order_matters_run)
        m |= 1u << REF_FOUND_ORDER_RUN;
    if (v->n_race_pairs)
        m |= 1u << REF_FOUND_RACE;
    if (v->blocked)
        m |= 1u << REF_FOUND_HANG;
    if (v->n_uaf)
        m |= 1u << REF_FOUND_UAF;
    if (unrecorded)
        m |= 1u << REF_FOUND_WAIT_UNRECORDED;
    if (names_any(&v->barrier_mismatch))
        m |= 1u << REF_FOUND_BARRIER_MISMATCH;
    if (names_any(&v->coll_mismatch))
        m |= 1u << REF_FOUND_COLL_MISMATCH;
    if (names_any(&v->unmatched_send))
        m |= 1u << REF_FOUND_UNMATCHED_SEND;
    if (names_any(&v->sem_race))
        m |= 1u << REF_FOUND_SEM_RACE;
    if (!(m & ~(7u << REF_FOUND_AMBIGUOUS_SEM)))
        m |= 1u << REF_FOUND_CLEAN;
    return m;
}


/* "q1 q2 ..." for a mask of queues. */
static const char *queue_names(const ref_trace *t, uint32_t mask, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint16_t q = 0; q < t->n_queues && len + 1 < cap; q++)
        if (mask >> q & 1) {
            int n = snprintf(buf + len, cap - len, "%s%s", len ? " " : "", t->names[t->q[q].name]);
            if (n > 0)
                len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
        }
    return buf;
}

static bool is_uaf(const ref_verdict *v, uint16_t stmt, uint16_t root)
{
    for (uint16_t i = 0; i < v->n_uaf; i++)
        if (v->uaf[i].stmt == stmt && v->uaf[i].root == root)
            return true;
    return false;
}

/* Whether free f makes statement b's access to root a use after free. */
static bool uaf_witness(const ref_trace *t, const ref_verdict *v, uint16_t f, uint16_t b,
                        uint16_t root)
{
    if (f >= t->n || t->s[f].kind != REF_FREE || t->s[f].obj != root || !v->ran[f] ||
        !ref_hb(v, f, b))
        return false;
    for (uint16_t a = 0; a < t->n; a++)
        if (t->s[a].kind == REF_ALLOC && t->s[a].obj == root && v->ran[a] && ref_hb(v, f, a) &&
            ref_hb(v, a, b))
            return false;
    return true;
}

/* The reference's index of a name the checker's trace gives. */
static uint16_t my_name(const ref_trace *t, const trace *ct, uint32_t id)
{
    return id == TRACE_NONE ? REF_NONE : ref_find_name(t, trace_str(ct, id));
}

static uint16_t my_root(const ref_trace *t, const trace *ct, uint32_t buf)
{
    if (buf == TRACE_NONE || buf >= ct->n_buffers)
        return REF_NONE;
    uint16_t b = ref_find_buffer(t, trace_str(ct, ct->buffers[buf].name));
    return b == REF_NONE ? REF_NONE : t->b[b].root;
}

static void set_name(ref_names *s, uint16_t id)
{
    if (id < REF_MAX_NAMES)
        s->w[id / 64] |= 1ull << (id % 64);
}

/* The names the reference finds (ref) and those the checker reports (chk)
 * must be the same. */
static void compare_names(ref_buf *m, uint32_t *cls, int c, const ref_trace *t,
                          const ref_names *ref, const ref_names *chk)
{
    for (uint16_t id = 0; id < t->n_names; id++) {
        bool a = ref_names_has(ref, id), b = ref_names_has(chk, id);
        if (a != b) {
            *cls |= 1u << c;
            ref_bprintf(m, "%s %s: reference %s, checker %s\n", class_words[c], t->names[id],
                a ? "finds it" : "does not", b ? "reports it" : "does not");
        }
    }
}

typedef struct seen {
    uint32_t blocked;
    bool hang;
    ref_ivset covered[REF_MAX_BUFS];
    bool uaf[REF_MAX_STMTS][REF_MAX_BUFS];
    bool unrecorded[REF_MAX_STMTS];
    ref_names barrier_mismatch, coll_mismatch, unmatched_send, sem_race;
} seen;

static void take_race(ref_buf *m, uint32_t *cls, const ref_trace *t, const ref_verdict *v,
                      const trace *ct, const trace_finding *f, seen *c)
{
    uint64_t a = f->first.seq, b = f->second.seq;
    uint16_t root = my_root(t, ct, f->root);
    char na[64] = "?", nb[64] = "?";
    if (a < t->n)
        ref_stmt_name(t, (uint16_t)a, na, sizeof na);
    if (b < t->n)
        ref_stmt_name(t, (uint16_t)b, nb, sizeof nb);
    if (a >= t->n || b >= t->n || a >= b || root == REF_NONE) {
        *cls |= 1u << REF_CLASS_RACE_FALSE;
        ref_bprintf(m, "race-false: the checker's race %s/%s is not two statements in file order\n",
            na, nb);
        return;
    }
    if (!v->ran[a] || !v->ran[b]) {
        *cls |= 1u << REF_CLASS_RACE_FALSE;
        ref_bprintf(m, "race-false: race %s/%s, but %s never runs\n", na, nb, v->ran[a] ? nb : na);
        return;
    }
    if (!(v->unordered[b].w[a / 64] >> (a % 64) & 1)) {
        *cls |= 1u << REF_CLASS_RACE_FALSE;
        bool ab = ref_hb(v, (uint16_t)a, (uint16_t)b);
        ref_bprintf(m, "race-false: race %s/%s, but %s HB %s\n", na, nb, ab ? na : nb,
            ab ? nb : na);
        return;
    }
    ref_ivset bytes;
    uint8_t types;
    if (ref_conflict(t, (uint16_t)a, (uint16_t)b, root, NULL, &bytes, &types) == REF_NONE) {
        *cls |= 1u << REF_CLASS_RACE_FALSE;
        ref_bprintf(m, "race-false: race %s/%s on %s, but they share no conflicting byte there\n", na,
            nb, t->names[t->b[root].name]);
        return;
    }
    uint8_t need;
    if (!ref_race_type_ok(t, v, (uint16_t)a, (uint16_t)b, root, f->race_type, &need)) {
        *cls |= 1u << REF_CLASS_RACE_TYPE;
        ref_bprintf(m, "race-type: race %s/%s has types%s%s%s, the contract obliges at least "
                       "%s, the checker says %s\n",
            na, nb, types & 1 ? " RAW" : "", types & 4 ? " WAW" : "", types & 2 ? " WAR" : "",
            need ? check_race_word(need) : "none", check_race_word(f->race_type));
    }
    ref_iv_union(&c->covered[root], &bytes);
}

uint32_t ref_diff(ref_trace *t, const ref_verdict *v, char *why, size_t cap)
{
    ref_buf m = { why, why ? cap : 0, 0 };
    if (why && cap)
        why[0] = '\0';
    static char text[1 << 16];
    static seen c;
    size_t len = ref_print(t, text, sizeof text);
    uint32_t cls = 0;
    if (len >= sizeof text) {
        ref_bprintf(&m, "checker-error: trace text too long\n");
        return 1u << REF_CLASS_CHECKER_ERROR;
    }
    trace_reader r;
    trace_error err = { 0 };
    check_report *rep = NULL;
    check_options opt = { 0 };
    if (trace_text_open_string("ref.trace", text, len, &r, &err) != 0) {
        ref_bprintf(&m, "checker-error: %s\n", err.msg);
        return 1u << REF_CLASS_CHECKER_ERROR;
    }
    if (check_trace(&r, &opt, &rep, &err) != 0) {
        ref_bprintf(&m, "checker-error: %s\n", err.msg);
        trace_reader_close(&r);
        return 1u << REF_CLASS_CHECKER_ERROR;
    }
    const trace *ct = r.trace;
    memset(&c, 0, sizeof c);
    for (uint16_t i = 0; i < REF_MAX_BUFS; i++)
        ref_iv_clear(&c.covered[i]);
    size_t nf = check_report_count(rep);
    const trace_finding *fs = check_report_findings(rep);
    /* Semaphores whose sets HB does not order fix no hang, race or use
     * after free: only the semaphore-race finding is compared there. */
    bool ambiguous = v->ambiguous_sem;
    bool hang_fixed = !ambiguous;
    for (size_t i = 0; i < nf; i++) {
        const trace_finding *f = &fs[i];
        switch (f->kind) {
        case TRACE_FINDING_RACE:
            if (!ambiguous)
                take_race(&m, &cls, t, v, ct, f, &c);
            break;
        case TRACE_FINDING_HANG:
            c.hang = true;
            for (uint32_t p = 0; p < f->n_parts; p++) {
                if (f->parts[p].role != TRACE_PART_BLOCKED)
                    continue;
                uint16_t q = ref_find_queue(t, trace_str(ct, ct->queues[f->parts[p].queue].name));
                if (q != REF_NONE)
                    c.blocked |= 1u << q;
            }
            break;
        case TRACE_FINDING_USE_AFTER_FREE: {
            if (ambiguous)
                break;
            uint64_t b = f->second.seq;
            uint16_t root = my_root(t, ct, f->root);
            char nb[64] = "?";
            if (b < t->n)
                ref_stmt_name(t, (uint16_t)b, nb, sizeof nb);
            if (b >= t->n || root == REF_NONE || !is_uaf(v, (uint16_t)b, root)) {
                cls |= 1u << REF_CLASS_UAF_FALSE;
                ref_bprintf(&m, "uaf-false: the checker reports a use after free at %s; the contract "
                        "finds none there\n", nb);
            } else if (!uaf_witness(t, v, (uint16_t)f->first.seq, (uint16_t)b, root)) {
                cls |= 1u << REF_CLASS_UAF_FALSE;
                ref_bprintf(&m, "uaf-false: use after free at %s names a free that does not make it one\n",
                    nb);
            } else {
                c.uaf[b][root] = true;
            }
            break;
        }
        case TRACE_FINDING_WAIT_UNRECORDED:
            if (f->second.seq < t->n)
                c.unrecorded[f->second.seq] = true;
            break;
        case TRACE_FINDING_BARRIER_MISMATCH:
            set_name(&c.barrier_mismatch, my_name(t, ct, f->object));
            break;
        case TRACE_FINDING_COLLECTIVE_MISMATCH:
            set_name(&c.coll_mismatch, my_name(t, ct, f->object));
            break;
        case TRACE_FINDING_UNMATCHED_SEND:
            set_name(&c.unmatched_send, my_name(t, ct, f->object));
            break;
        case TRACE_FINDING_SEMAPHORE_RACE:
            set_name(&c.sem_race, my_name(t, ct, f->object));
            break;
        default:
            break;
        }
    }

    if (hang_fixed) {
        char qa[256], qb[256];
        if (v->blocked && !c.hang) {
            cls |= 1u << REF_CLASS_HANG_MISSED;
            ref_bprintf(&m, "hang-missed: the contract blocks %s; the checker reports no hang\n",
                queue_names(t, v->blocked, qa, sizeof qa));
        } else if (!v->blocked && c.hang) {
            cls |= 1u << REF_CLASS_HANG_FALSE;
            ref_bprintf(&m, "hang-false: the checker's hang blocks %s; every queue runs\n",
                queue_names(t, c.blocked, qb, sizeof qb));
        } else if (v->blocked != c.blocked) {
            cls |= 1u << REF_CLASS_HANG_QUEUES;
            ref_bprintf(&m, "hang-queues: the contract blocks %s, the checker %s\n",
                queue_names(t, v->blocked, qa, sizeof qa),
                queue_names(t, c.blocked, qb, sizeof qb));
        }
    }
    if (!ambiguous) {
        for (uint16_t root = 0; root < t->n_bufs; root++) {
            uint32_t lo, hi;
            if (ref_iv_minus_first(&v->racy[root], &c.covered[root], &lo, &hi)) {
                cls |= 1u << REF_CLASS_RACE_MISSED;
                ref_bprintf(&m, "race-missed: bytes [%u, %u) of %s race; no reported race covers them\n",
                    lo, hi, t->names[t->b[root].name]);
            }
        }
        /* A checker may leave an access unjudged for use after free when it
         * says so in the check's coverage (issue 30, item 2: "never a false
         * finding, and a coverage note where a verdict could change"); a
         * miss is then no disagreement, but counted (REF_DIFF_UNJUDGED). */
        bool partial = !check_coverage_full(check_report_coverage(rep));
        for (uint16_t i = 0; i < v->n_uaf; i++)
            if (!c.uaf[v->uaf[i].stmt][v->uaf[i].root]) {
                char nb[64];
                cls |= partial ? REF_DIFF_UNJUDGED : 1u << REF_CLASS_UAF_MISSED;
                ref_bprintf(&m, "uaf-missed%s: %s uses %s after a free; not reported\n",
                    partial ? " (the check's coverage is partial: not judged)" : "",
                    ref_stmt_name(t, v->uaf[i].stmt, nb, sizeof nb),
                    t->names[t->b[v->uaf[i].root].name]);
            }
    }
    for (uint16_t i = 0; i < t->n; i++)
        if (v->wait_unrecorded[i] != c.unrecorded[i]) {
            char nb[64];
            cls |= 1u << REF_CLASS_WAIT_UNRECORDED;
            ref_bprintf(&m, "wait-unrecorded at %s: reference %d, checker %d\n",
                ref_stmt_name(t, i, nb, sizeof nb), v->wait_unrecorded[i], c.unrecorded[i]);
        }
    compare_names(&m, &cls, REF_CLASS_BARRIER_MISMATCH, t, &v->barrier_mismatch,
                  &c.barrier_mismatch);
    compare_names(&m, &cls, REF_CLASS_COLL_MISMATCH, t, &v->coll_mismatch, &c.coll_mismatch);
    compare_names(&m, &cls, REF_CLASS_UNMATCHED_SEND, t, &v->unmatched_send, &c.unmatched_send);
    compare_names(&m, &cls, REF_CLASS_SEM_RACE, t, &v->sem_race, &c.sem_race);
    check_report_free(rep);
    trace_reader_close(&r);
    return cls;
}

uint32_t ref_shrink(ref_trace *t, uint32_t want)
{
    static ref_trace copy;
    static ref_verdict v;
    ref_eval(t, &v);
    uint32_t cls = ref_diff(t, &v, NULL, 0);
    if (!(cls & want))
        return cls;
    bool progress = true;
    while (progress) {
        progress = false;
        for (uint16_t i = t->n; i-- > 0;) {
            copy = *t;
            ref_delete(&copy, i);
            ref_eval(&copy, &v);
            uint32_t c = ref_diff(&copy, &v, NULL, 0);
            if (c & want) {
                *t = copy;
                cls = c;
                progress = true;
            }
        }
    }
    ref_eval(t, &v);
    return ref_diff(t, &v, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* Runs and their counts.                                              */

void ref_stats_init(ref_run_stats *st)
{
    memset(st, 0, sizeof *st);
    for (int c = 0; c < REF_CLASS_COUNT; c++)
        st->first_index[c] = UINT64_MAX;
}

void ref_stats_add(ref_run_stats *dst, const ref_run_stats *src)
{
    dst->traces += src->traces;
    dst->unjudged += src->unjudged;
    dst->disagree += src->disagree;
    dst->order_disagree += src->order_disagree;
    for (int g = 0; g < 16; g++) {
        dst->by_gen[g] += src->by_gen[g];
        for (int k = 0; k < REF_FOUND_COUNT; k++)
            dst->found_by_gen[g][k] += src->found_by_gen[g][k];
        for (int c = 0; c < REF_CLASS_COUNT; c++)
            dst->class_by_gen[g][c] += src->class_by_gen[g][c];
    }
    for (int k = 0; k < REF_FOUND_COUNT; k++)
        dst->found[k] += src->found[k];
    for (int c = 0; c < REF_CLASS_COUNT; c++) {
        dst->classes[c] += src->classes[c];
        if (src->first_index[c] < dst->first_index[c])
            dst->first_index[c] = src->first_index[c];
    }
}

uint32_t ref_run_one(uint64_t seed, uint64_t i, ref_run_stats *st)
{
    static ref_trace t;
    static ref_verdict v;
    int g = ref_generate(&t, ref_trace_seed(seed, i));
    ref_eval(&t, &v);
    uint32_t found = ref_found_mask(&t, &v);
    uint32_t cls = ref_diff(&t, &v, NULL, 0);
    st->traces++;
    st->by_gen[g]++;
    if (cls & REF_DIFF_UNJUDGED)
        st->unjudged++;
    cls &= ~REF_DIFF_UNJUDGED;
    for (int k = 0; k < REF_FOUND_COUNT; k++)
        if (found >> k & 1) {
            st->found[k]++;
            st->found_by_gen[g][k]++;
        }
    if (cls)
        st->disagree++;
    if (cls && v.order_matters)
        st->order_disagree++;
    for (int c = 0; c < REF_CLASS_COUNT; c++)
        if (cls >> c & 1) {
            st->classes[c]++;
            st->class_by_gen[g][c]++;
            if (i < st->first_index[c])
                st->first_index[c] = i;
        }
    return cls;
}

void ref_stats_print(FILE *out, const ref_run_stats *st)
{
    fprintf(out, "%llu traces, %llu disagree", (unsigned long long)st->traces,
            (unsigned long long)st->disagree);
    if (st->unjudged)
        fprintf(out, " (and %llu with a use after free the checker's coverage says it "
                     "did not judge)", (unsigned long long)st->unjudged);
    fprintf(out, "\n");
    fprintf(out, "%-12s %8s", "generator", "traces");
    for (int k = 0; k < REF_FOUND_COUNT; k++)
        fprintf(out, " %*.*s", 9, 9, found_words[k]);
    fprintf(out, "\n");
    for (int g = 0; g < ref_gen_count(); g++) {
        fprintf(out, "%-12s %8llu", ref_gen_name(g), (unsigned long long)st->by_gen[g]);
        for (int k = 0; k < REF_FOUND_COUNT; k++)
            fprintf(out, " %9llu", (unsigned long long)st->found_by_gen[g][k]);
        fprintf(out, "\n");
    }
    fprintf(out, "%-12s %8llu", "all", (unsigned long long)st->traces);
    for (int k = 0; k < REF_FOUND_COUNT; k++)
        fprintf(out, " %9llu", (unsigned long long)st->found[k]);
    fprintf(out, "\n(columns: traces where the reference finds each kind: %s",
            found_words[0]);
    for (int k = 1; k < REF_FOUND_COUNT; k++)
        fprintf(out, ", %s", found_words[k]);
    fprintf(out, "; sem-order: sets of one semaphore HB does not order, where only "
                 "semaphore-race is compared; order-hb, order-run: another order of deciding "
                 "ruling 1's blocked awaits gives another HB, or runs other statements)\n");
    uint64_t order = st->found[REF_FOUND_ORDER_HB] + st->found[REF_FOUND_ORDER_RUN];
    fprintf(out, "ruling 1's decision order: %llu traces where another order of deciding the "
                 "blocked awaits gives another HB (%llu of them other statements run), each "
                 "decided in the documented order (in file order) and compared in full: %llu "
                 "disagree\n",
            (unsigned long long)order, (unsigned long long)st->found[REF_FOUND_ORDER_RUN],
            (unsigned long long)st->order_disagree);
    for (int c = 0; c < REF_CLASS_COUNT; c++) {
        if (!st->classes[c])
            continue;
        fprintf(out, "disagreement %-20s %8llu traces (first: trace %llu); by generator:",
                class_words[c], (unsigned long long)st->classes[c],
                (unsigned long long)st->first_index[c]);
        for (int g = 0; g < ref_gen_count(); g++)
            if (st->class_by_gen[g][c])
                fprintf(out, " %s %llu", ref_gen_name(g),
                        (unsigned long long)st->class_by_gen[g][c]);
        fprintf(out, "\n");
    }
}
