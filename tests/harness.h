/* A small test harness: CHECK macros that record failures and go on, a runner
 * that prints one line per test, and helpers for comparing against float64
 * references. Exit code: 0 all passed, 1 a failure, 77 skipped (CTest). */
#ifndef CML_TESTS_HARNESS_H
#define CML_TESTS_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/camel.h"

static int th_failed_checks;
static int th_failed_tests;
static int th_ran_tests;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            th_failed_checks++;                                                         \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);  \
        }                                                                               \
    } while (0)

#define CHECK_MSG(cond, ...)                                            \
    do {                                                                \
        if (!(cond)) {                                                  \
            th_failed_checks++;                                         \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                               \
            fputc('\n', stderr);                                        \
        }                                                               \
    } while (0)

/* expr must return CML_OK. */
#define CHECK_OK(expr)                                                                      \
    do {                                                                                    \
        cml_status th_s = (expr);                                                           \
        if (th_s != CML_OK) {                                                               \
            th_failed_checks++;                                                             \
            fprintf(stderr, "  %s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,      \
                    cml_status_name(th_s), cml_last_error());                               \
        }                                                                                   \
    } while (0)

/* A pointer-returning call must succeed. */
#define CHECK_NOT_NULL(ptr)                                                                  \
    do {                                                                                     \
        if ((ptr) == NULL) {                                                                 \
            th_failed_checks++;                                                              \
            fprintf(stderr, "  %s:%d: %s is NULL: %s\n", __FILE__, __LINE__, #ptr,             \
                    cml_last_error());                                                       \
        }                                                                                    \
    } while (0)

/* The last error must have status `want` and a message containing `substr`. */
#define CHECK_ERROR(want, substr)                                                            \
    do {                                                                                     \
        if (cml_last_status() != (want) || strstr(cml_last_error(), (substr)) == NULL) {     \
            th_failed_checks++;                                                              \
            fprintf(stderr, "  %s:%d: expected %s containing \"%s\", got %s: \"%s\"\n",       \
                    __FILE__, __LINE__, cml_status_name(want), (substr),                     \
                    cml_status_name(cml_last_status()), cml_last_error());                   \
        }                                                                                    \
    } while (0)

/* expr must return status `want` with a message containing substr. */
#define CHECK_STATUS(expr, want, substr)                                                     \
    do {                                                                                     \
        cml_clear_error();                                                                   \
        cml_status th_s = (expr);                                                            \
        if (th_s != (want)) {                                                                \
            th_failed_checks++;                                                              \
            fprintf(stderr, "  %s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, \
                    #expr, cml_status_name(th_s), cml_status_name(want), cml_last_error());  \
        } else {                                                                             \
            CHECK_ERROR(want, substr);                                                       \
        }                                                                                    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                \
    do {                                                                                     \
        double th_a = (double)(a), th_b = (double)(b);                                       \
        if (!(fabs(th_a - th_b) <= (tol))) {                                                 \
            th_failed_checks++;                                                              \
            fprintf(stderr, "  %s:%d: %s = %.9g, %s = %.9g, |diff| > %g\n", __FILE__, __LINE__, \
                    #a, th_a, #b, th_b, (double)(tol));                                      \
        }                                                                                    \
    } while (0)

static inline void th_run(const char *name, void (*fn)(void)) {
    int before = th_failed_checks;
    cml_clear_error();
    fn();
    th_ran_tests++;
    if (th_failed_checks != before) {
        th_failed_tests++;
        printf("FAIL %s\n", name);
    } else {
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}
/* CML_TEST_ONLY=name runs only the tests whose names contain it (for slow sanitizer tools). */
#define RUN(fn)                                               \
    do {                                                      \
        const char *th_only_ = getenv("CML_TEST_ONLY");       \
        if (!th_only_ || strstr(#fn, th_only_)) th_run(#fn, fn); \
    } while (0)

static inline int th_finish(void) {
    printf("%d/%d tests passed\n", th_ran_tests - th_failed_tests, th_ran_tests);
    return th_failed_tests ? 1 : 0;
}

/* ---- numeric helpers ------------------------------------------------------ */

/* Norm-wise relative error ||out - ref|| / ||ref|| (inf if any NaN). */
static inline double th_rel_error(const float *out, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(out[i]) || isnan(ref[i])) return INFINITY;
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0) return sqrt(num);
    return sqrt(num / den);
}

/* Fills with uniform values in [lo, hi) from a Philox stream. */
static inline void th_fill_uniform(float *x, int64_t n, float lo, float hi, cml_rng *rng) {
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * cml_rng_uniform(rng);
}

/* A NaN bit pattern to poison outputs before a kernel writes them. */
static inline void th_poison(void *p, size_t nbytes) { memset(p, 0xFF, nbytes); }

#endif
