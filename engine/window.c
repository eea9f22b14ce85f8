/*
 * window.c -- the Bayesian collision window, and the natural failure rate.
 *
 * Model (cited by the docs)
 * -------------------------
 * Telemetry from the real event loop: n pairs (x_i, y_i), where x_i >= 0 is
 * the offset in seconds between the starts of two conflicting calls and
 * y_i = 1 if that run failed.
 *
 *   Window.  The race bites when the two calls start less than w apart:
 *            "inside" means x < w.  w is unknown.
 *   Noise.   With probability eps an observation disagrees with the window:
 *            a failure outside it (another cause) or a pass inside it (the
 *            race was harmless this time).  So
 *                P(y = 1 | x, w, eps) = 1 - eps   if x < w
 *                                       eps       otherwise.
 *            eps is restricted to (0, 1/2) (otherwise "inside" and
 *            "outside" swap roles and w is not identifiable).
 *   Priors.  w is log-uniform on [w_min, w_max] (default [1e-7, 10] s: from
 *            sub-microsecond to human scale, every decade equally likely);
 *            eps ~ Beta(eps_a, eps_b) truncated to (0, 1/2), default
 *            Beta(1, 9) (mean 0.1: mostly clean telemetry, heavy tail).
 *
 * With m(w) = #{i : x_i < w, y_i = 0} + #{i : x_i >= w, y_i = 1} (the number
 * of observations the window w gets wrong), the likelihood is
 *     L(w, eps) = eps^m(w) (1 - eps)^(n - m(w)),
 * so the posterior of w is proportional to
 *     sum over eps of prior(eps) L(w, eps)
 * on a grid of `grid` log-spaced cells covering [w_min, w_max] (each cell
 * carries the same prior mass) and `eps_grid` midpoints of (0, 1/2).  m(w)
 * is piecewise constant between sorted offsets and is evaluated at each
 * cell's centre (in log space).
 *
 * Summaries: median and the 95% equal-tailed interval interpolate the
 * cumulative posterior linearly in log w inside a cell; the mean is the sum
 * of cell masses times cell centres.  P(fail | x) is the posterior
 * predictive: sum over cells of mass * (x < w ? 1 - E[eps | w] : E[eps | w]).
 *
 * Natural rate: f failures in n runs, uniform prior on the rate, posterior
 * Beta(1 + f, 1 + n - f); mean (1 + f) / (2 + n), 95% equal-tailed interval
 * from the inverse regularised incomplete beta (continued fraction,
 * modified Lentz, then bisection).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cs_window {
    size_t grid;
    double *w;        /* cell centres (s) */
    double *mass;     /* posterior mass per cell, sums to 1 */
    double *eps_mean; /* E[eps | w] per cell */
    double log_lo, step; /* cell g covers [log_lo + g step, log_lo + (g+1) step] */
    cs_window_summary summary;
};

void cs_window_prior_init(cs_window_prior *prior) {
    prior->w_min = 1e-7;
    prior->w_max = 10.0;
    prior->eps_a = 1.0;
    prior->eps_b = 9.0;
    prior->grid = 2000;
    prior->eps_grid = 64;
}

typedef struct {
    double x;
    uint8_t y;
} obs;

static int cmp_obs(const void *a, const void *b) {
    double x = ((const obs *)a)->x, y = ((const obs *)b)->x;
    return (x > y) - (x < y);
}

static double quantile(const cs_window *w, double q) {
    double cum = 0.0;
    for (size_t g = 0; g < w->grid; g++) {
        double m = w->mass[g];
        if (m > 0 && cum + m >= q) {
            double frac = (q - cum) / m;
            if (frac < 0) frac = 0;
            if (frac > 1) frac = 1;
            return exp(w->log_lo + ((double)g + frac) * w->step);
        }
        cum += m;
    }
    return exp(w->log_lo + (double)w->grid * w->step);
}

int cs_window_fit(const double *offsets, const uint8_t *failed, size_t n,
                  const cs_window_prior *prior, cs_window **out) {
    if (!out || (n && (!offsets || !failed))) return CS_EINVAL;
    *out = NULL;
    cs_window_prior p;
    if (prior) p = *prior;
    else cs_window_prior_init(&p);
    if (!(p.w_min > 0) || !(p.w_max > p.w_min) || !isfinite(p.w_max) || p.grid < 16 ||
        p.eps_grid < 4 || !(p.eps_a > 0) || !(p.eps_b > 0) || !isfinite(p.eps_a) ||
        !isfinite(p.eps_b))
        return CS_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(offsets[i]) || offsets[i] < 0 || failed[i] > 1) return CS_EINVAL;

    int rc = CS_ENOMEM;
    obs *o = malloc((n ? n : 1) * sizeof *o);
    double *log_eps = malloc(p.eps_grid * sizeof *log_eps);
    double *log_1m = malloc(p.eps_grid * sizeof *log_1m);
    double *log_pi = malloc(p.eps_grid * sizeof *log_pi);
    double *tmp = malloc(p.eps_grid * sizeof *tmp);
    double *logpost = malloc(p.grid * sizeof *logpost);
    cs_window *w = calloc(1, sizeof *w);
    if (!o || !log_eps || !log_1m || !log_pi || !tmp || !logpost || !w) goto fail;
    w->grid = p.grid;
    w->w = malloc(p.grid * sizeof *w->w);
    w->mass = malloc(p.grid * sizeof *w->mass);
    w->eps_mean = malloc(p.grid * sizeof *w->eps_mean);
    if (!w->w || !w->mass || !w->eps_mean) goto fail;

    uint64_t failures = 0;
    for (size_t i = 0; i < n; i++) {
        o[i].x = offsets[i];
        o[i].y = failed[i];
        failures += failed[i];
    }
    if (n) qsort(o, n, sizeof *o, cmp_obs);

    /* eps grid: midpoints of (0, 1/2), weights from the Beta density */
    double pi_max = -INFINITY;
    for (uint32_t e = 0; e < p.eps_grid; e++) {
        double eps = 0.5 * ((double)e + 0.5) / (double)p.eps_grid;
        log_eps[e] = log(eps);
        log_1m[e] = log1p(-eps);
        log_pi[e] = (p.eps_a - 1) * log_eps[e] + (p.eps_b - 1) * log_1m[e];
        if (log_pi[e] > pi_max) pi_max = log_pi[e];
    }
    double z = 0;
    for (uint32_t e = 0; e < p.eps_grid; e++) z += exp(log_pi[e] - pi_max);
    for (uint32_t e = 0; e < p.eps_grid; e++) log_pi[e] -= pi_max + log(z);

    w->log_lo = log(p.w_min);
    w->step = (log(p.w_max) - w->log_lo) / (double)p.grid;
    size_t below = 0;
    uint64_t passes_below = 0, fails_below = 0;
    double best = -INFINITY;
    for (size_t g = 0; g < p.grid; g++) {
        double wg = exp(w->log_lo + ((double)g + 0.5) * w->step);
        w->w[g] = wg;
        while (below < n && o[below].x < wg) {
            if (o[below].y) fails_below++;
            else passes_below++;
            below++;
        }
        double m = (double)(passes_below + (failures - fails_below));
        double nm = (double)n - m;
        double mx = -INFINITY;
        for (uint32_t e = 0; e < p.eps_grid; e++) {
            tmp[e] = log_pi[e] + m * log_eps[e] + nm * log_1m[e];
            if (tmp[e] > mx) mx = tmp[e];
        }
        double s = 0, se = 0;
        for (uint32_t e = 0; e < p.eps_grid; e++) {
            double v = exp(tmp[e] - mx);
            s += v;
            se += v * exp(log_eps[e]);
        }
        logpost[g] = mx + log(s);
        w->eps_mean[g] = se / s;
        if (logpost[g] > best) best = logpost[g];
    }
    double total = 0;
    for (size_t g = 0; g < p.grid; g++) {
        w->mass[g] = exp(logpost[g] - best);
        total += w->mass[g];
    }
    double mean = 0, eps_mean = 0;
    for (size_t g = 0; g < p.grid; g++) {
        w->mass[g] /= total;
        mean += w->mass[g] * w->w[g];
        eps_mean += w->mass[g] * w->eps_mean[g];
    }
    w->summary.mean = mean;
    w->summary.eps_mean = eps_mean;
    w->summary.median = quantile(w, 0.5);
    w->summary.lo = quantile(w, 0.025);
    w->summary.hi = quantile(w, 0.975);
    w->summary.n = n;
    w->summary.failures = failures;
    *out = w;
    w = NULL;
    rc = CS_OK;
fail:
    cs_window_free(w);
    free(o);
    free(log_eps);
    free(log_1m);
    free(log_pi);
    free(tmp);
    free(logpost);
    return rc;
}

void cs_window_free(cs_window *w) {
    if (!w) return;
    free(w->w);
    free(w->mass);
    free(w->eps_mean);
    free(w);
}

void cs_window_get_summary(const cs_window *w, cs_window_summary *out) {
    if (!w || !out) return;
    *out = w->summary;
}

double cs_window_p_fail(const cs_window *w, double offset) {
    if (!w || !(offset >= 0)) return NAN;
    double p = 0;
    for (size_t g = 0; g < w->grid; g++)
        p += w->mass[g] * (offset < w->w[g] ? 1.0 - w->eps_mean[g] : w->eps_mean[g]);
    return p;
}

/* ------------------------------------------------------ the Beta law */

/* Continued fraction of I_x(a, b) (modified Lentz). */
static double beta_cf(double x, double a, double b) {
    const double tiny = 1e-300, tol = 1e-15;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 100000; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < tol) break;
    }
    return h;
}

double cs_beta_cdf(double x, double a, double b) {
    if (!(a > 0) || !(b > 0) || isnan(x)) return NAN;
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double lfront = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    /* the fraction converges fast on the side of the mean it is used on */
    if (x < (a + 1) / (a + b + 2)) return exp(lfront) * beta_cf(x, a, b) / a;
    return 1 - exp(lfront) * beta_cf(1 - x, b, a) / b;
}

double cs_beta_quantile(double q, double a, double b) {
    if (!(a > 0) || !(b > 0) || !(q >= 0) || !(q <= 1)) return NAN;
    double lo = 0, hi = 1;
    for (int i = 0; i < 200 && hi - lo > 1e-15 * (lo > 0 ? lo : 1e-300); i++) {
        double mid = 0.5 * (lo + hi);
        if (cs_beta_cdf(mid, a, b) < q) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

int cs_rate_estimate(uint64_t failures, uint64_t runs, cs_rate_summary *out) {
    if (!out || failures > runs) return CS_EINVAL;
    double a = 1.0 + (double)failures, b = 1.0 + (double)(runs - failures);
    out->mean = a / (a + b);
    out->lo = cs_beta_quantile(0.025, a, b);
    out->hi = cs_beta_quantile(0.975, a, b);
    return CS_OK;
}
