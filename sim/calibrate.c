/*
 * calibrate.c -- fitting a device model to a recorded run.
 *
 * `syncsim calibrate` reads a trace whose statements carry observed times
 * (a real run, a simulated one, an imported capture) and fits the numbers
 * of the cost model (cost.c) that the trace can show, keeping every other
 * number of a base model, so that `replay --durations model` with the
 * result prices the program the way it ran. In numbered passes:
 *
 *   1. Samples, in submission order. Per host queue, the gap between two
 *      of its timed statements and the submissions it made in between,
 *      counted by the class sim_cost_submit prices them by (a launch, an
 *      event record, any other call). Per blocking statement (a host sync,
 *      a host or stream wait), its tail: its end minus the later of its
 *      start and the end of what it waited for (the covered streams' last
 *      timed statements; the work before the record a wait binds to, as
 *      traces/bind.c binds it). Per copy on a stream with a byte count and
 *      a link (h2d, d2h, p2p), (bytes, dur); per blocking copy by the
 *      host, the same, for host_copy_ns. Per op, (family, FLOPs, bytes,
 *      dur), with families named by sim_op_family (`host.` in front on a
 *      host queue); ops that name their own cost (overhead_ns=) are
 *      priced by it and not sampled.
 *   2. Submission costs: launch_ns, api_call_ns and event_record_ns by
 *      least squares without intercept, gap = sum of count x cost, no cost
 *      negative (a negative one is dropped to 0 and the rest refitted);
 *      a gap far above its fit is host work the trace does not show and is
 *      left out. A capture's host ops already hold its API calls' time (the
 *      importers fold a launch into the host time around it), so there
 *      the gaps are zero and so are the fitted costs: replay must not
 *      charge them twice.
 *   3. Blocking tails: sync_ns, event_sync_ns, event_wait_device_ns, each
 *      the mean of its tails (what replay adds after the wait ends).
 *   4. Copies: dur = copy_latency_ns + bytes / bw_direction, least squares
 *      over every copy at once with one latency (the model has one) and a
 *      bandwidth per direction. Then host_copy_ns, the mean of what a
 *      blocking host copy took beyond that.
 *   5. Kernel families: per family, dur = fixed + amount / rate by least
 *      squares over the amounts its ops have (f32 FLOPs, f16 FLOPs, bytes),
 *      no part negative; a line that would start below zero goes through
 *      zero and is scaled to keep the family's total time. A captured
 *      kernel with neither FLOPs nor bytes gets its mean time per launch
 *      (the honest answer when nobody knows what it computed), and so does
 *      a family whose sizes never vary.
 *   Reported besides, not a key: the delay from the submitting host's last
 *   statement to the start of work that found its stream idle.
 *
 * Every fitted number reports its samples and its fit (R^2 where a line
 * was fitted, the RMS residual always); a number without samples keeps the
 * base's value and says why.
 */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Samples.                                                            */

typedef struct xy {
    double x, y;
    uint8_t cls;            /* copies: sim_path; families: unused */
    double amount[3];       /* families: flops=, flops_f16=, bytes (FAM_*) */
} xy;

/* The amounts a family's price may grow with, in [kernels] order. */
enum { FAM_FLOPS, FAM_FLOPS_F16, FAM_BYTES, N_FAM };

typedef struct series {
    xy *v;
    size_t n, cap;
} series;

static int series_add(series *s, xy p)
{
    if (trace_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v) != 0)
        return -1;
    s->v[s->n++] = p;
    return 0;
}

/* Submission classes: what sim_cost_submit charges a statement kind by. */
enum { SUB_LAUNCH, SUB_RECORD, SUB_API, N_SUB };

typedef struct gap_row {
    double count[N_SUB];
    double gap;
    bool outlier;           /* left out of the fit (pass 2) */
} gap_row;

typedef struct family_samples {
    char key[SIM_FAMILY_MAX];
    bool host;
    series s;
} family_samples;

typedef struct samples {
    gap_row *gaps;
    size_t n_gaps, cap_gaps;
    double host_gap_ns;         /* every gap between timed host statements, summed */
    series sync_tail, host_wait_tail, stream_wait_tail;
    series start_latency;       /* idle-stream work: start - its host's last statement end */
    series copies;              /* x bytes, y dur, cls path */
    series host_copies;
    family_samples *fam;
    size_t n_fam, cap_fam;
} samples;

static void samples_free(samples *sm)
{
    free(sm->gaps);
    free(sm->sync_tail.v);
    free(sm->start_latency.v);
    free(sm->host_wait_tail.v);
    free(sm->stream_wait_tail.v);
    free(sm->copies.v);
    free(sm->host_copies.v);
    for (size_t i = 0; i < sm->n_fam; i++)
        free(sm->fam[i].s.v);
    free(sm->fam);
}

static series *family_series(samples *sm, const char *family, bool host)
{
    char key[SIM_FAMILY_MAX];
    snprintf(key, sizeof key, "%s%s", host ? "host." : "", family);
    for (size_t i = 0; i < sm->n_fam; i++)
        if (!strcmp(sm->fam[i].key, key))
            return &sm->fam[i].s;
    if (sm->n_fam == SIM_MAX_KERNELS)
        return NULL;            /* more families than a model holds: the rest keep the roofline */
    if (trace_grow((void **)&sm->fam, &sm->cap_fam, sm->n_fam + 1, sizeof *sm->fam) != 0)
        return NULL;
    family_samples *f = &sm->fam[sm->n_fam++];
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", key);
    f->host = host;
    return &f->s;
}

static bool timed(const trace_stmt *s)
{
    return s->t != TRACE_TIME_NONE && s->dur != TRACE_TIME_NONE;
}

/* Pass 1. */
static int collect(const trace *t, samples *sm, trace_error *err)
{
    uint32_t nq = t->n_queues;
    int64_t *last_end = malloc(((size_t)nq + 1) * sizeof *last_end);
    int64_t *host_end = malloc(((size_t)nq + 1) * sizeof *host_end);
    double (*counts)[N_SUB] = calloc((size_t)nq + 1, sizeof *counts);
    int64_t *record_end = malloc((t->n_stmts + 1) * sizeof *record_end);
    trace_binder *bind = trace_binder_new(0);
    int rc = -1;
    if (!last_end || !host_end || !counts || !record_end || !bind) {
        trace_error_set(err, TRACE_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t q = 0; q < nq; q++)
        last_end[q] = host_end[q] = INT64_MIN;
    /* Unit models: sim_cost_submit of each says which class a kind is. */
    sim_model unit[N_SUB];
    memset(unit, 0, sizeof unit);
    unit[SUB_LAUNCH].launch_ns = 1;
    unit[SUB_RECORD].event_record_ns = 1;
    unit[SUB_API].api_call_ns = 1;
    for (uint64_t i = 0; i < t->n_stmts; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        s.seq = i;
        record_end[i] = INT64_MIN;
        bool host = t->queues[s.queue].kind == TRACE_QUEUE_HOST;
        trace_bind bd;
        if (trace_binder_feed(bind, &s, &bd) != 0) {
            trace_error_set(err, TRACE_ENOMEM, "out of memory");
            goto done;
        }
        int64_t end = timed(&s) ? s.t + s.dur : INT64_MIN;
        if (!host) {
            uint32_t h = trace_submitter(t, &s);
            if (h != TRACE_NONE)
                for (int k = 0; k < N_SUB; k++)
                    counts[h][k] += (double)sim_cost_submit(&unit[k], s.kind);
            /* Work that found its stream idle started this long after its
             * host's last statement ended (a capture: after the call). */
            if (h != TRACE_NONE && timed(&s) && (s.kind == TRACE_OP || s.kind == TRACE_COPY) &&
                host_end[h] != INT64_MIN && last_end[s.queue] <= host_end[h] &&
                series_add(&sm->start_latency, (xy){ .y = (double)(s.t - host_end[h]) }))
                goto oom;
        } else if (timed(&s)) {
            /* A gap of this host and the submissions made in it. */
            if (host_end[s.queue] != INT64_MIN) {
                gap_row row = { .gap = (double)(s.t - host_end[s.queue]) };
                if (row.gap > 0)
                    sm->host_gap_ns += row.gap;
                bool any = false;
                for (int k = 0; k < N_SUB; k++)
                    any |= (row.count[k] = counts[s.queue][k]) > 0;
                if (any && trace_grow((void **)&sm->gaps, &sm->cap_gaps, sm->n_gaps + 1,
                                      sizeof *sm->gaps) != 0)
                    goto oom;
                if (any)
                    sm->gaps[sm->n_gaps++] = row;
            }
            for (int k = 0; k < N_SUB; k++)
                counts[s.queue][k] = 0;
            host_end[s.queue] = end;
        }
        sim_stmt_cost c;
        sim_stmt_cost_of(t, &s, &c);
        if (timed(&s)) {
            switch (s.kind) {
            case TRACE_SYNC: {
                int64_t covered = INT64_MIN;
                for (uint32_t q = 0; q < nq; q++)
                    if (last_end[q] > covered && trace_sync_covers(t, &s, q))
                        covered = last_end[q];
                int64_t from = covered > s.t ? covered : s.t;
                if (end >= from && series_add(&sm->sync_tail, (xy){ .y = (double)(end - from) }))
                    goto oom;
                break;
            }
            case TRACE_WAIT: {
                if (bd.record == TRACE_NO_SEQ)
                    break;      /* binds to nothing: orders nothing, nothing to measure */
                int64_t dep = record_end[bd.record];
                int64_t from = dep > s.t ? dep : s.t;
                if (end >= from &&
                    series_add(host ? &sm->host_wait_tail : &sm->stream_wait_tail,
                               (xy){ .y = (double)(end - from) }))
                    goto oom;
                break;
            }
            case TRACE_COPY:
                if (c.path != SIM_PATH_NONE && c.bytes > 0 &&
                    series_add(host ? &sm->host_copies : &sm->copies,
                               (xy){ .x = (double)c.bytes, .y = (double)s.dur, .cls = (uint8_t)c.path }))
                    goto oom;
                break;
            case TRACE_OP: {
                if (c.overhead_ns >= 0)
                    break;      /* names its own cost */
                series *fs = family_series(sm, c.family, host);
                if (fs && series_add(fs, (xy){ .y = (double)s.dur,
                                               .amount = { (double)c.flops, (double)c.flops_half,
                                                           (double)c.bytes } }))
                    goto oom;
                break;
            }
            default:
                break;
            }
        }
        if (s.kind == TRACE_RECORD)
            record_end[i] = end != INT64_MIN ? end : last_end[s.queue];
        if (end != INT64_MIN && end > last_end[s.queue])
            last_end[s.queue] = end;
    }
    rc = 0;
    goto done;
oom:
    trace_error_set(err, TRACE_ENOMEM, "out of memory");
done:
    trace_binder_free(bind);
    free(last_end);
    free(host_end);
    free(counts);
    free(record_end);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Least squares.                                                      */

/* Solves a[n][n] x = b by Gaussian elimination with partial pivoting
 * (n <= 8). Returns 0, or -1 when the system is singular. */
static int solve(double a[8][8], double *b, int n, double *x)
{
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r][c]) > fabs(a[p][c]))
                p = r;
        double scale = 0;
        for (int r = 0; r < n; r++)
            scale = fmax(scale, fabs(a[r][c]));
        if (fabs(a[p][c]) <= 1e-12 * (scale > 0 ? scale : 1))
            return -1;
        if (p != c) {
            for (int k = 0; k < n; k++) {
                double tmp = a[c][k];
                a[c][k] = a[p][k];
                a[p][k] = tmp;
            }
            double tmp = b[c];
            b[c] = b[p];
            b[p] = tmp;
        }
        for (int r = c + 1; r < n; r++) {
            double f = a[r][c] / a[c][c];
            for (int k = c; k < n; k++)
                a[r][k] -= f * a[c][k];
            b[r] -= f * b[c];
        }
    }
    for (int r = n - 1; r >= 0; r--) {
        double v = b[r];
        for (int k = r + 1; k < n; k++)
            v -= a[r][k] * x[k];
        x[r] = v / a[r][r];
    }
    return 0;
}

/* R^2 and the RMS residual of y ~ a + s x over v. */
static void fit_quality(const xy *v, size_t n, double a, double s, double *r2, double *rms)
{
    double my = 0, ss_res = 0, ss_tot = 0;
    for (size_t i = 0; i < n; i++)
        my += v[i].y;
    my /= n ? (double)n : 1;
    for (size_t i = 0; i < n; i++) {
        double e = v[i].y - (a + s * v[i].x);
        ss_res += e * e;
        ss_tot += (v[i].y - my) * (v[i].y - my);
    }
    *rms = n ? sqrt(ss_res / (double)n) : NAN;
    *r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : NAN;
}

static double mean_y(const series *s, double *rms)
{
    double m = 0, e = 0;
    for (size_t i = 0; i < s->n; i++)
        m += s->v[i].y;
    m /= s->n ? (double)s->n : 1;
    for (size_t i = 0; i < s->n; i++)
        e += (s->v[i].y - m) * (s->v[i].y - m);
    *rms = s->n ? sqrt(e / (double)s->n) : NAN;
    return m;
}

/* ------------------------------------------------------------------ */
/* The result.                                                         */

static sim_calib_param *add_param(sim_calib *c, const char *key, const char *unit)
{
    if (trace_grow32((void **)&c->params, &c->cap_params, c->n_params + 1, sizeof *c->params))
        return NULL;
    sim_calib_param *p = &c->params[c->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->key, sizeof p->key, "%s", key);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->r2 = p->rms_ns = NAN;
    return p;
}

static void kept(sim_calib_param *p, double value, const char *base, const char *why)
{
    p->value = value;
    p->fitted = false;
    snprintf(p->note, sizeof p->note, "from %s: %s", base, why);
}

static void fitted(sim_calib_param *p, double value, uint64_t n, double r2, double rms)
{
    p->value = value;
    p->fitted = true;
    p->samples = n;
    p->r2 = r2;
    p->rms_ns = rms;
    if (isnan(r2))
        snprintf(p->note, sizeof p->note, "fitted: %llu samples, RMS residual %.0f ns",
                 (unsigned long long)n, rms);
    else
        snprintf(p->note, sizeof p->note, "fitted: %llu samples, R2 %.4f, RMS residual %.0f ns",
                 (unsigned long long)n, r2, rms);
}

/* One row of a least-squares system: the coefficients of the variables
 * and the observed value; false when the row is left out. */
typedef bool (*ls_row)(const void *ctx, size_t r, double *coef, double *y);

/* When the normal equations of the active variables idx[0..n) are
 * singular: mend them and return 1 to refit (a variable dropped from
 * active), 0 with sol[0..n) the answer, -1 to stop. */
typedef int (*ls_singular)(const void *ctx, size_t n_rows, ls_row row, const int *idx, int n,
                           bool *active, double *sol);

/* Least squares over the active variables of x[0..n_vars) (n_vars <= 8)
 * with no value negative: the most negative is set to 0, dropped, and the
 * rest refitted; inactive variables stay 0. */
static void fit_nonnegative(const void *ctx, size_t n_rows, ls_row row, int n_vars, bool *active,
                            ls_singular singular, double *x)
{
    for (int k = 0; k < n_vars; k++)
        x[k] = 0;
    for (int round = 0; round < 2 * n_vars; round++) {
        int idx[8], n = 0;
        for (int k = 0; k < n_vars; k++)
            if (active[k])
                idx[n++] = k;
        if (!n)
            break;
        double a[8][8] = { { 0 } }, b[8] = { 0 }, sol[8], coef[8], y;
        for (size_t r = 0; r < n_rows; r++) {
            if (!row(ctx, r, coef, &y))
                continue;
            for (int i = 0; i < n; i++) {
                b[i] += coef[idx[i]] * y;
                for (int j = 0; j < n; j++)
                    a[i][j] += coef[idx[i]] * coef[idx[j]];
            }
        }
        if (solve(a, b, n, sol) != 0) {
            int mend = singular(ctx, n_rows, row, idx, n, active, sol);
            if (mend < 0)
                break;
            if (mend > 0)
                continue;
        }
        for (int k = 0; k < n_vars; k++)
            x[k] = 0;
        int worst = -1;
        for (int i = 0; i < n; i++) {
            x[idx[i]] = sol[i];
            if (sol[i] < 0 && (worst < 0 || sol[i] < x[worst]))
                worst = idx[i];
        }
        if (worst < 0)
            break;
        active[worst] = false;
        x[worst] = 0;
    }
}

static int64_t ns_round(double v)
{
    return v <= 0 ? 0 : v > 1e15 ? (int64_t)1e15 : (int64_t)llround(v);
}

/* A gap not left out: the launches, records and API calls before it. */
static bool gap_row_of(const void *ctx, size_t r, double *coef, double *y)
{
    const gap_row *g = &((const samples *)ctx)->gaps[r];
    if (g->outlier)
        return false;
    for (int k = 0; k < N_SUB; k++)
        coef[k] = g->count[k];
    *y = g->gap;
    return true;
}

/* Classes always submitted together: give them one cost. */
static int shared_cost(const void *ctx, size_t n_rows, ls_row row, const int *idx, int n,
                       bool *active, double *sol)
{
    (void)active;
    double num = 0, den = 0, coef[8], y;
    for (size_t r = 0; r < n_rows; r++) {
        if (!row(ctx, r, coef, &y))
            continue;
        double cnt = 0;
        for (int i = 0; i < n; i++)
            cnt += coef[idx[i]];
        num += cnt * y;
        den += cnt * cnt;
    }
    for (int i = 0; i < n; i++)
        sol[i] = den > 0 ? num / den : 0;
    return 0;
}

/* Least squares without intercept of the gaps not left out, no cost
 * negative; x gets the costs of the classes in active (0 for others). */
static void fit_submit_costs(const samples *sm, const bool *active_in, double *x)
{
    bool active[N_SUB];
    memcpy(active, active_in, sizeof active);
    fit_nonnegative(sm, sm->n_gaps, gap_row_of, N_SUB, active, shared_cost, x);
}

static double gap_residual(const gap_row *g, const double *x)
{
    double e = g->gap;
    for (int k = 0; k < N_SUB; k++)
        e -= g->count[k] * x[k];
    return e;
}

static int cmp_xy_y(const void *a, const void *b)
{
    double x = ((const xy *)a)->y, y = ((const xy *)b)->y;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Host time between timed host statements beyond what submissions at
 * costs x explain. */
static double unpriced(const samples *sm, const double *x)
{
    double priced = 0;
    for (size_t r = 0; r < sm->n_gaps; r++)
        for (int k = 0; k < N_SUB; k++)
            priced += sm->gaps[r].count[k] * x[k];
    return sm->host_gap_ns > priced ? sm->host_gap_ns - priced : 0;
}

/* Pass 2: submission costs. A gap far above what its submissions cost
 * (more than 5 times the median residual and 5 us) is host work the trace
 * does not show (a thread descheduled, the program's own code between
 * calls): it is left out of the fit, twice at most, and counted. */
static int fit_submits(sim_calib *c, samples *sm, const char *base)
{
    static const char *const keys[N_SUB] = { "launch_ns", "event_record_ns", "api_call_ns" };
    int64_t *fields[N_SUB] = { &c->model.launch_ns, &c->model.event_record_ns,
                               &c->model.api_call_ns };
    static const char *const what[N_SUB] = { "kernel launches", "event records",
                                             "other stream calls" };
    bool active[N_SUB];
    uint64_t used[N_SUB] = { 0 };
    for (size_t r = 0; r < sm->n_gaps; r++)
        for (int k = 0; k < N_SUB; k++)
            used[k] += sm->gaps[r].count[k] > 0;
    for (int k = 0; k < N_SUB; k++)
        active[k] = used[k] > 0;
    double x[N_SUB];
    fit_submit_costs(sm, active, x);
    double *res = malloc((sm->n_gaps ? sm->n_gaps : 1) * sizeof *res);
    if (!res)
        return -1;
    for (int pass = 0; pass < 2 && sm->n_gaps; pass++) {
        size_t n = 0;
        for (size_t r = 0; r < sm->n_gaps; r++)
            if (!sm->gaps[r].outlier)
                res[n++] = fabs(gap_residual(&sm->gaps[r], x));
        if (!n)
            break;
        qsort(res, n, sizeof *res, cmp_double);
        double limit = fmax(5 * res[n / 2], 5000);
        bool more = false;
        for (size_t r = 0; r < sm->n_gaps; r++)
            if (!sm->gaps[r].outlier && gap_residual(&sm->gaps[r], x) > limit)
                more = sm->gaps[r].outlier = true;
        if (!more)
            break;
        fit_submit_costs(sm, active, x);
    }
    free(res);
    double ss = 0;
    uint64_t n_fit = 0, n_out = 0;
    for (size_t r = 0; r < sm->n_gaps; r++) {
        double e = gap_residual(&sm->gaps[r], x);
        if (sm->gaps[r].outlier) {
            n_out++;
            continue;
        }
        ss += e * e;
        n_fit++;
    }
    c->host_unpriced_ns = unpriced(sm, x);
    c->gaps_left_out = n_out;
    double rms = n_fit ? sqrt(ss / (double)n_fit) : NAN;
    for (int k = 0; k < N_SUB; k++) {
        sim_calib_param *p = add_param(c, keys[k], "ns");
        if (!p)
            return -1;
        if (!used[k]) {
            char why[96];
            snprintf(why, sizeof why, "no %s between timed host statements", what[k]);
            kept(p, (double)*fields[k], base, why);
            continue;
        }
        *fields[k] = ns_round(x[k]);
        fitted(p, (double)*fields[k], used[k], NAN, rms);
        if (n_out)
            snprintf(p->note + strlen(p->note), sizeof p->note - strlen(p->note),
                     "; %llu of %llu host gaps left out as host work the trace does not show",
                     (unsigned long long)n_out, (unsigned long long)(n_out + n_fit));
    }
    return 0;
}

/* Pass 3: what a blocking statement costs after what it waits for ended. */
static int fit_tail(sim_calib *c, const series *s, const char *key, int64_t *field,
                    const char *what, const char *base)
{
    sim_calib_param *p = add_param(c, key, "ns");
    if (!p)
        return -1;
    if (!s->n) {
        char why[96];
        snprintf(why, sizeof why, "no timed %s in the trace", what);
        kept(p, (double)*field, base, why);
        return 0;
    }
    double rms, m = mean_y(s, &rms);
    *field = ns_round(m);
    fitted(p, (double)*field, s->n, NAN, rms);
    return 0;
}

/* Pass 4: copies, one latency and a bandwidth per direction. */
static int fit_copies(sim_calib *c, const samples *sm, const char *base)
{
    static const struct { sim_path path; const char *key, *name; } dirs[] = {
        { SIM_PATH_H2D, "h2d_gbps", "host-to-device" },
        { SIM_PATH_D2H, "d2h_gbps", "device-to-host" },
        { SIM_PATH_P2P, "p2p_gbps", "device-to-device (peer)" },
    };
    double *bw[] = { &c->model.h2d_gbps, &c->model.d2h_gbps, &c->model.p2p_gbps };
    const series *cp = &sm->copies;
    uint64_t n_dir[3] = { 0 };
    int col[3], n = 1;          /* column 0: the latency */
    for (size_t i = 0; i < cp->n; i++)
        for (int d = 0; d < 3; d++)
            n_dir[d] += cp->v[i].cls == dirs[d].path;
    for (int d = 0; d < 3; d++)
        col[d] = n_dir[d] ? n++ : -1;
    double sol[8] = { 0 };
    bool ok = false;
    const char *how = "";
    if (cp->n) {
        double a[8][8] = { { 0 } }, b[8] = { 0 };
        for (size_t i = 0; i < cp->n; i++) {
            double row[8] = { 1 };
            for (int d = 0; d < 3; d++)
                if (col[d] > 0 && cp->v[i].cls == dirs[d].path)
                    row[col[d]] = cp->v[i].x;
            for (int r = 0; r < n; r++) {
                b[r] += row[r] * cp->v[i].y;
                for (int k = 0; k < n; k++)
                    a[r][k] += row[r] * row[k];
            }
        }
        bool solved = solve(a, b, n, sol) == 0;
        ok = solved && sol[0] >= 0;
        /* A negative latency: none, each direction's rate through zero.
         * Sizes that never vary: the base's latency, capped by the fastest
         * copy, and each direction's rate through it. */
        if (!ok) {
            double lat = 0;
            if (!solved) {
                lat = (double)c->model.copy_latency_ns;
                for (size_t i = 0; i < cp->n; i++)
                    lat = fmin(lat, cp->v[i].y);
            }
            how = solved ? "; the line would start below zero: no latency"
                         : "; sizes never vary: latency from the base, capped by the fastest copy";
            sol[0] = lat;
            for (int d = 0; d < 3; d++) {
                if (col[d] < 0)
                    continue;
                double num = 0, den = 0;
                for (size_t i = 0; i < cp->n; i++)
                    if (cp->v[i].cls == dirs[d].path) {
                        num += cp->v[i].x * (cp->v[i].y - lat);
                        den += cp->v[i].x * cp->v[i].x;
                    }
                sol[col[d]] = den > 0 ? num / den : 0;
            }
        }
    }
    sim_calib_param *p = add_param(c, "copy_latency_ns", "ns");
    if (!p)
        return -1;
    if (!cp->n) {
        kept(p, (double)c->model.copy_latency_ns, base, "no timed copy with a byte count");
    } else {
        c->model.copy_latency_ns = ns_round(sol[0]);
        double ss = 0;
        for (size_t i = 0; i < cp->n; i++) {
            double pred = sol[0];
            for (int d = 0; d < 3; d++)
                if (col[d] > 0 && cp->v[i].cls == dirs[d].path)
                    pred += sol[col[d]] * cp->v[i].x;
            ss += (cp->v[i].y - pred) * (cp->v[i].y - pred);
        }
        fitted(p, (double)c->model.copy_latency_ns, cp->n, NAN, sqrt(ss / (double)cp->n));
        snprintf(p->note + strlen(p->note), sizeof p->note - strlen(p->note), "%s", how);
    }
    for (int d = 0; d < 3; d++) {
        p = add_param(c, dirs[d].key, "GB/s");
        if (!p)
            return -1;
        char why[128];
        if (col[d] < 0 || sol[col[d]] <= 0) {
            snprintf(why, sizeof why, col[d] < 0 ? "no %s copy with a byte count in the trace"
                                                 : "the %s copies fit no positive bandwidth",
                     dirs[d].name);
            kept(p, *bw[d], base, why);
            continue;
        }
        *bw[d] = 1.0 / sol[col[d]];
        /* This direction's quality under the joint fit. */
        series one = { 0 };
        for (size_t i = 0; i < cp->n; i++)
            if (cp->v[i].cls == dirs[d].path && series_add(&one, cp->v[i]) != 0) {
                free(one.v);
                return -1;
            }
        double r2, rms;
        fit_quality(one.v, one.n, sol[0], sol[col[d]], &r2, &rms);
        free(one.v);
        fitted(p, *bw[d], n_dir[d], r2, rms);
        if (dirs[d].path == SIM_PATH_P2P && !c->model.nvlink &&
            *bw[d] > fmin(c->model.h2d_gbps, c->model.d2h_gbps))
            snprintf(p->note + strlen(p->note), sizeof p->note - strlen(p->note),
                     "; above the PCIe links, which cap peer copies while nvlink = 0");
    }
    /* host_copy_ns: what a blocking host copy takes beyond its transfer. */
    p = add_param(c, "host_copy_ns", "ns");
    if (!p)
        return -1;
    const series *hc = &sm->host_copies;
    if (!hc->n) {
        kept(p, (double)c->model.host_copy_ns, base,
             "no timed blocking copy by the host with a byte count");
        return 0;
    }
    series extra = { 0 };
    for (size_t i = 0; i < hc->n; i++) {
        double tr = (double)sim_cost_copy(&c->model, false, (sim_path)hc->v[i].cls,
                                          (uint64_t)hc->v[i].x);
        if (series_add(&extra, (xy){ .y = hc->v[i].y - tr }) != 0) {
            free(extra.v);
            return -1;
        }
    }
    double rms, m = mean_y(&extra, &rms);
    free(extra.v);
    c->model.host_copy_ns = ns_round(m);
    fitted(p, (double)c->model.host_copy_ns, hc->n, NAN, rms);
    return 0;
}

/* An op of a family: 1 (its fixed cost) and its amounts. */
static bool family_row(const void *ctx, size_t r, double *coef, double *y)
{
    const series *s = ctx;
    coef[0] = 1;
    for (int k = 0; k < N_FAM; k++)
        coef[1 + k] = s->v[r].amount[k];
    *y = s->v[r].y;
    return true;
}

/* Drops an amount that cannot be told apart: bytes, f16, f32. */
static int drop_amount(const void *ctx, size_t n_rows, ls_row row, const int *idx, int n,
                       bool *active, double *sol)
{
    (void)ctx, (void)n_rows, (void)row, (void)idx, (void)n, (void)sol;
    for (int k = N_FAM; k >= 1; k--)
        if (active[k]) {
            active[k] = false;
            return 1;
        }
    return -1;
}

/* Pass 5: one [kernels] line per family: dur = fixed + sum of amount x
 * cost over the amounts any of its ops has, least squares with no part
 * negative (the most negative is dropped and the rest refitted); amounts
 * that never vary apart from each other or from 1 cannot be told apart
 * and are dropped, bytes first. */
static int fit_family(sim_calib *c, const family_samples *f)
{
    const series *s = &f->s;
    bool active[1 + N_FAM] = { true };
    for (size_t i = 0; i < s->n; i++)
        for (int k = 0; k < N_FAM; k++)
            active[1 + k] |= s->v[i].amount[k] > 0;
    bool known = active[1] || active[2] || active[3];
    double x[1 + N_FAM];
    fit_nonnegative(s, s->n, family_row, 1 + N_FAM, active, drop_amount, x);
    /* Through zero (the line would start below it), least squares favours
     * the largest ops; scaled so the family's total time is kept (with one
     * amount, the ratio estimator sum(y) / sum(amount)). */
    if (x[0] == 0) {
        double sum_y = 0, sum_pred = 0;
        for (size_t i = 0; i < s->n; i++) {
            sum_y += s->v[i].y;
            for (int j = 0; j < N_FAM; j++)
                sum_pred += x[1 + j] * s->v[i].amount[j];
        }
        for (int j = 0; j < N_FAM && sum_pred > 0; j++)
            x[1 + j] *= sum_y / sum_pred;
    }
    sim_kernel_rate k = { .fixed_ns = ns_round(x[0]) };
    snprintf(k.family, sizeof k.family, "%s", f->key);
    double *rate[N_FAM] = { &k.gflops, &k.gflops_f16, &k.gbps };
    bool any_rate = false;
    for (int j = 0; j < N_FAM; j++)
        if (x[1 + j] > 0) {
            *rate[j] = 1.0 / x[1 + j];
            any_rate = true;
        }
    /* Quality: residuals of the line as priced. */
    double my = 0, ss_res = 0, ss_tot = 0;
    for (size_t i = 0; i < s->n; i++)
        my += s->v[i].y;
    my /= s->n ? (double)s->n : 1;
    for (size_t i = 0; i < s->n; i++) {
        double pred = x[0];
        for (int j = 0; j < N_FAM; j++)
            pred += x[1 + j] * s->v[i].amount[j];
        ss_res += (s->v[i].y - pred) * (s->v[i].y - pred);
        ss_tot += (s->v[i].y - my) * (s->v[i].y - my);
    }
    double rms = s->n ? sqrt(ss_res / (double)s->n) : NAN;
    double r2 = any_rate && ss_tot > 0 ? 1 - ss_res / ss_tot : NAN;
    sim_kernel_rate *old = (sim_kernel_rate *)sim_model_kernel(&c->model, k.family, false);
    if (old)
        *old = k;
    else if (c->model.n_kernels < SIM_MAX_KERNELS)
        c->model.kernels[c->model.n_kernels++] = k;
    sim_calib_param *p = add_param(c, k.family, any_rate ? "" : "ns/op");
    if (!p)
        return -1;
    p->family = true;
    p->rate = k;
    fitted(p, (double)k.fixed_ns, s->n, r2, rms);
    const char *how = any_rate ? ""
                      : !known ? "; neither FLOPs nor bytes known: mean time per op"
                               : "; no rate fits (sizes do not vary, or time does not grow "
                                 "with them): mean time per op";
    snprintf(p->note + strlen(p->note), sizeof p->note - strlen(p->note), "%s", how);
    return 0;
}

int sim_calibrate(const trace *t, const sim_model *base, sim_calib *out, trace_error *err)
{
    memset(out, 0, sizeof *out);
    out->model = *base;
    out->model.path[0] = '\0';
    const char *bname = base->name;
    samples sm = { 0 };
    int rc = -1;
    if (collect(t, &sm, err) != 0)
        goto done;
    bool any_time = false;
    for (uint64_t i = 0; i < t->n_stmts && !any_time; i++) {
        trace_stmt s;
        trace_stmt_at(t, i, &s);
        any_time = timed(&s);
    }
    if (!any_time) {
        trace_error_set(err, TRACE_EUSAGE, "no statement has an observed time (t= and dur=): "
                        "nothing to calibrate from");
        goto done;
    }
    if (fit_submits(out, &sm, bname) != 0 ||
        fit_tail(out, &sm.sync_tail, "sync_ns", &out->model.sync_ns, "host sync", bname) ||
        fit_tail(out, &sm.host_wait_tail, "event_sync_ns", &out->model.event_sync_ns,
                 "host event wait", bname) ||
        fit_tail(out, &sm.stream_wait_tail, "event_wait_device_ns",
                 &out->model.event_wait_device_ns, "stream event wait", bname) ||
        fit_copies(out, &sm, bname) != 0)
        goto oom;
    for (size_t f = 0; f < sm.n_fam; f++)
        if (fit_family(out, &sm.fam[f]) != 0)
            goto oom;
    if (sm.start_latency.n) {
        /* Reported, not a key: replay starts such work at launch_ns after
         * its host's statement, which is host time too. */
        sim_calib_param *p = add_param(out, "(start latency)", "ns");
        if (!p)
            goto oom;
        series *sl = &sm.start_latency;
        double rms, m = mean_y(sl, &rms);
        qsort(sl->v, sl->n, sizeof *sl->v, cmp_xy_y);
        fitted(p, sl->v[sl->n / 2].y, sl->n, NAN, rms);
        p->info = true;
        snprintf(p->note, sizeof p->note, "not a model key: median of %llu starts on an idle "
                 "stream after the submitting host's last statement (mean %.0f ns)",
                 (unsigned long long)sl->n, m);
    }
    rc = 0;
    goto done;
oom:
    trace_error_set(err, TRACE_ENOMEM, "out of memory");
done:
    samples_free(&sm);
    if (rc != 0)
        sim_calib_free(out);
    return rc;
}

double sim_calib_host_unpriced(const trace *t, const sim_model *m, trace_error *err)
{
    samples sm = { 0 };
    double x[N_SUB] = { [SUB_LAUNCH] = (double)m->launch_ns,
                        [SUB_RECORD] = (double)m->event_record_ns,
                        [SUB_API] = (double)m->api_call_ns };
    double v = collect(t, &sm, err) == 0 ? unpriced(&sm, x) : -1;
    samples_free(&sm);
    return v;
}

void sim_calib_free(sim_calib *c)
{
    free(c->params);
    c->params = NULL;
    c->n_params = c->cap_params = 0;
}

const sim_calib_param *sim_calib_find(const sim_calib *c, const char *key)
{
    for (uint32_t i = 0; i < c->n_params; i++)
        if (!strcmp(c->params[i].key, key))
            return &c->params[i];
    return NULL;
}
