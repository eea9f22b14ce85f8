/* test_window.c -- the collision window posterior on synthetic telemetry
 * with a known window, and the Beta rate estimate. */
#include "chaossloth.h"
#include "ctest.h"

#include <math.h>

static uint64_t lcg = 12345;
static double unif(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg >> 11) * (1.0 / 9007199254740992.0);
}

/* n offsets log-uniform on [1e-6, 1e-1]; fails iff inside w, flipped with
 * probability eps. */
static void synth(double *x, uint8_t *y, size_t n, double w, double eps) {
    for (size_t i = 0; i < n; i++) {
        x[i] = exp(log(1e-6) + unif() * (log(1e-1) - log(1e-6)));
        int inside = x[i] < w;
        y[i] = (uint8_t)(unif() < eps ? !inside : inside);
    }
}

static void test_interval_contains_truth_and_narrows(void) {
    static double x[4000];
    static uint8_t y[4000];
    const double truths[] = {3e-5, 2e-3};
    for (size_t t = 0; t < 2; t++) {
        /* nested prefixes of one telemetry stream */
        lcg = 777 + t;
        synth(x, y, 4000, truths[t], 0.05);
        const size_t ns[] = {30, 300, 4000};
        double widths[3];
        for (size_t k = 0; k < 3; k++) {
            cs_window *w = NULL;
            CHECK_EQ(cs_window_fit(x, y, ns[k], NULL, &w), CS_OK);
            cs_window_summary s;
            cs_window_get_summary(w, &s);
            widths[k] = log(s.hi / s.lo);
            printf("w=%.0e n=%4zu: median %.3g mean %.3g 95%% [%.3g, %.3g] eps %.3f\n",
                   truths[t], ns[k], s.median, s.mean, s.lo, s.hi, s.eps_mean);
            CHECK(s.lo <= truths[t] && truths[t] <= s.hi);
            CHECK(s.lo <= s.median && s.median <= s.hi);
            CHECK_EQ(s.n, ns[k]);
            if (ns[k] >= 1000) {
                CHECK(fabs(log(s.median / truths[t])) < log(1.1));
                CHECK(fabs(s.eps_mean - 0.05) < 0.02);
                CHECK(cs_window_p_fail(w, truths[t] / 10) > 0.9);
                CHECK(cs_window_p_fail(w, truths[t] * 10) < 0.1);
            }
            cs_window_free(w);
        }
        CHECK(widths[1] < widths[0]);
        CHECK(widths[2] < widths[1] / 3);
    }
}

/* Calibration: over many independent telemetry sets, the 95% interval
 * covers the true window in about 95% of them. */
static void test_interval_coverage(void) {
    static double x[150];
    static uint8_t y[150];
    int covered = 0;
    const int sets = 200;
    lcg = 4242;
    for (int i = 0; i < sets; i++) {
        double truth = exp(log(1e-5) + unif() * (log(1e-2) - log(1e-5)));
        synth(x, y, 150, truth, 0.05);
        cs_window *w = NULL;
        CHECK_EQ(cs_window_fit(x, y, 150, NULL, &w), CS_OK);
        cs_window_summary s;
        cs_window_get_summary(w, &s);
        covered += s.lo <= truth && truth <= s.hi;
        cs_window_free(w);
    }
    printf("95%% interval covered the true window in %d of %d sets\n", covered, sets);
    CHECK(covered >= (int)(0.88 * sets));
}

static void test_prior_only_and_one_sided_data(void) {
    cs_window *w = NULL;
    cs_window_summary s;
    CHECK_EQ(cs_window_fit(NULL, NULL, 0, NULL, &w), CS_OK);
    cs_window_get_summary(w, &s);
    /* log-uniform on [1e-7, 10]: median at the geometric centre 1e-3,
     * 2.5% quantile at 10^(-7 + 0.2) */
    CHECK(fabs(log10(s.median) + 3) < 0.01);
    CHECK(fabs(log10(s.lo) + 6.8) < 0.01);
    cs_window_free(w);
    /* every run failed at offsets up to 1 ms: the window is at least about
     * that wide, and nothing bounds it from above but the prior */
    double x[50];
    uint8_t y[50];
    for (int i = 0; i < 50; i++) {
        x[i] = 1e-3 * (i + 1) / 50.0;
        y[i] = 1;
    }
    CHECK_EQ(cs_window_fit(x, y, 50, NULL, &w), CS_OK);
    cs_window_get_summary(w, &s);
    CHECK(s.lo > 5e-4);
    CHECK(s.hi > 1.0);
    cs_window_free(w);
}

static void test_bad_input(void) {
    cs_window *w = NULL;
    double x[2] = {0.1, -1};
    uint8_t y[2] = {0, 1};
    CHECK_EQ(cs_window_fit(x, y, 2, NULL, &w), CS_EINVAL);
    x[1] = NAN;
    CHECK_EQ(cs_window_fit(x, y, 2, NULL, &w), CS_EINVAL);
    x[1] = 0;
    y[1] = 2;
    CHECK_EQ(cs_window_fit(x, y, 2, NULL, &w), CS_EINVAL);
    y[1] = 1;
    cs_window_prior p;
    cs_window_prior_init(&p);
    p.w_max = p.w_min;
    CHECK_EQ(cs_window_fit(x, y, 2, &p, &w), CS_EINVAL);
    CHECK(w == NULL);
    CHECK_EQ(cs_window_fit(x, y, 2, NULL, &w), CS_OK);
    CHECK(isnan(cs_window_p_fail(w, -1)));
    cs_window_free(w);
}

static void test_beta_and_rate(void) {
    CHECK(fabs(cs_beta_cdf(0.5, 2, 2) - 0.5) < 1e-12);
    for (double x = 0.05; x < 1; x += 0.1) {
        CHECK(fabs(cs_beta_cdf(x, 1, 7) - (1 - pow(1 - x, 7))) < 1e-12);
        CHECK(fabs(cs_beta_cdf(x, 3, 1) - pow(x, 3)) < 1e-12);
    }
    CHECK(fabs(cs_beta_quantile(0.3, 1, 1) - 0.3) < 1e-12);
    cs_rate_summary r;
    CHECK_EQ(cs_rate_estimate(0, 0, &r), CS_OK);
    CHECK(fabs(r.mean - 0.5) < 1e-12 && fabs(r.lo - 0.025) < 1e-9 && fabs(r.hi - 0.975) < 1e-9);
    CHECK_EQ(cs_rate_estimate(0, 100, &r), CS_OK);
    /* Beta(1, 101): upper quantile 1 - 0.025^(1/101) */
    CHECK(fabs(r.hi - (1 - pow(0.025, 1.0 / 101))) < 1e-9);
    CHECK(r.lo > 0 && r.lo < 1e-3);
    CHECK_EQ(cs_rate_estimate(30, 1000000, &r), CS_OK);
    CHECK(r.lo < 3.1e-5 && 3.1e-5 < r.hi && r.hi < 5e-5 && r.lo > 1.8e-5);
    CHECK_EQ(cs_rate_estimate(5, 4, &r), CS_EINVAL);
}

#define TESTS(X)                                                               \
    X(test_interval_contains_truth_and_narrows)                                \
    X(test_interval_coverage)                                                  \
    X(test_prior_only_and_one_sided_data)                                      \
    X(test_bad_input)                                                          \
    X(test_beta_and_rate)
CTEST_MAIN()
