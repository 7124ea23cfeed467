/* Softmax / log-softmax forward and backward, and cross-entropy, against
 * float64 references; rows, column blocks, large logits, NaN, ignore_index. */
#include "kernel_test_util.h"

static const int64_t shapes[][3] = {
    {1, 1, 1}, {1, 7, 1}, {3, 127, 1}, {2, 1025, 1}, {5, 1, 7}, {4, 33, 127}, {1, 1025, 300}, {64, 1000, 1}, {2, 5, 1025},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

/* Reference forward over one column v[0..n) into out. */
static void ref_softmax(const double *v, int64_t n, bool log_form, double *out) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; j++) m = v[j] > m ? v[j] : m;
    for (int64_t j = 0; j < n; j++) s += exp(v[j] - m);
    for (int64_t j = 0; j < n; j++) out[j] = log_form ? v[j] - m - log(s) : exp(v[j] - m) / s;
}

static void run_softmax(const int64_t *shape, cml_dtype dt, bool log_form, float lo, float hi, cml_rng *rng) {
    int64_t outer = shape[0], n = shape[1], inner = shape[2], total = outer * n * inner;
    cml_layout l = kt_layout(1, &total);
    kt_view x = kt_view_alloc(l, dt), y = kt_view_alloc(l, dt), dy = kt_view_alloc(l, dt), dx = kt_view_alloc(l, dt);
    kt_fill_uniform(&x, lo, hi, rng);
    kt_fill_uniform(&dy, -1, 1, rng);
    CHECK_OK(cml_softmax_fwd(kt_ctx(), y.data, x.data, outer, n, inner, dt, log_form));
    CHECK_OK(cml_softmax_bwd(kt_ctx(), dx.data, dy.data, y.data, outer, n, inner, dt, log_form));
    float *out = kt_malloc((size_t)total * 4), *dout = kt_malloc((size_t)total * 4);
    double *ref = kt_malloc((size_t)total * 8), *dref = kt_malloc((size_t)total * 8);
    double *col = kt_malloc((size_t)n * 8), *ycol = kt_malloc((size_t)n * 8), *dycol = kt_malloc((size_t)n * 8);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++) {
                int64_t k = (o * n + j) * inner + i;
                col[j] = kt_get(&x, k);
                ycol[j] = kt_get(&y, k); /* backward is checked against the y it was given */
                dycol[j] = kt_get(&dy, k);
            }
            double dot = 0, sum_dy = 0;
            for (int64_t j = 0; j < n; j++) {
                dot += dycol[j] * ycol[j];
                sum_dy += dycol[j];
            }
            ref_softmax(col, n, log_form, col);
            for (int64_t j = 0; j < n; j++) {
                int64_t k = (o * n + j) * inner + i;
                ref[k] = col[j];
                out[k] = (float)kt_get(&y, k);
                dref[k] = log_form ? dycol[j] - exp(ycol[j]) * sum_dy : ycol[j] * (dycol[j] - dot);
                dout[k] = (float)kt_get(&dx, k);
            }
        }
    KT_CHECK_CLOSE(out, ref, total, kt_tol(dt), "softmax_fwd log=%d shape=(%lld,%lld,%lld) %s", log_form,
                   (long long)outer, (long long)n, (long long)inner, cml_dtype_name(dt));
    /* n == 1 softmax: dx is exactly 0 up to rounding, so compare absolutely */
    if (n > 1 || log_form)
        KT_CHECK_CLOSE(dout, dref, total, kt_tol(dt) * 2, "softmax_bwd log=%d shape=(%lld,%lld,%lld) %s", log_form,
                       (long long)outer, (long long)n, (long long)inner, cml_dtype_name(dt));
    free(out);
    free(dout);
    free(ref);
    free(dref);
    free(col);
    free(ycol);
    free(dycol);
    kt_view_free(&x);
    kt_view_free(&y);
    kt_view_free(&dy);
    kt_view_free(&dx);
}

static void test_softmax(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 20);
    for (int log_form = 0; log_form < 2; log_form++) {
        for (int s = 0; s < NSHAPES; s++) run_softmax(shapes[s], CML_F32, log_form, -4, 4, &rng);
        run_softmax(shapes[5], CML_BF16, log_form, -4, 4, &rng);
        run_softmax(shapes[3], CML_F16, log_form, -4, 4, &rng);
        run_softmax(shapes[3], CML_F32, log_form, 1000, 1010, &rng); /* stable for large logits */
    }
}

static void test_softmax_specials(void) {
    float x[6] = {1, NAN, 2, /* row 2 */ -INFINITY, 0, -INFINITY}, y[6];
    CHECK_OK(cml_softmax_fwd(kt_ctx(), y, x, 2, 3, 1, CML_F32, false));
    CHECK(isnan(y[0]) && isnan(y[1]) && isnan(y[2])); /* NaN propagates through the row */
    CHECK(y[3] == 0 && y[4] == 1 && y[5] == 0);       /* -inf logits get probability 0 */
}

static void run_cross_entropy(int64_t rows, int64_t classes, cml_dtype dt, int64_t ignore_index, cml_rng *rng) {
    int64_t total = rows * classes;
    cml_layout l = kt_layout(1, &total);
    kt_view logits = kt_view_alloc(l, dt), dlogits = kt_view_alloc(l, dt);
    kt_fill_uniform(&logits, -5, 5, rng);
    int64_t *t = kt_malloc((size_t)rows * 8);
    float *loss = kt_malloc((size_t)rows * 4), *dloss = kt_malloc((size_t)rows * 4);
    for (int64_t r = 0; r < rows; r++) {
        t[r] = (r % 5 == 3) ? ignore_index : (int64_t)cml_rng_below(rng, (uint32_t)classes);
        dloss[r] = 0.5f + cml_rng_uniform(rng);
    }
    th_poison(loss, (size_t)rows * 4);
    CHECK_OK(cml_cross_entropy_fwd(kt_ctx(), loss, logits.data, t, rows, classes, dt, ignore_index));
    CHECK_OK(cml_cross_entropy_bwd(kt_ctx(), dlogits.data, dloss, logits.data, t, rows, classes, dt, ignore_index));
    double *ref = kt_malloc((size_t)rows * 8), *dref = kt_malloc((size_t)total * 8), *p = kt_malloc((size_t)classes * 8);
    float *dout = kt_malloc((size_t)total * 4);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < classes; c++) p[c] = kt_get(&logits, r * classes + c);
        bool ignored = t[r] == ignore_index;
        ref_softmax(p, classes, true, p); /* log-probabilities */
        ref[r] = ignored ? 0 : -p[t[r]];
        for (int64_t c = 0; c < classes; c++) {
            dref[r * classes + c] = ignored ? 0 : dloss[r] * (exp(p[c]) - (c == t[r]));
            dout[r * classes + c] = (float)kt_get(&dlogits, r * classes + c);
        }
    }
    KT_CHECK_CLOSE(loss, ref, rows, kt_tol(CML_F32), "cross_entropy_fwd rows=%lld classes=%lld %s", (long long)rows,
                   (long long)classes, cml_dtype_name(dt));
    KT_CHECK_CLOSE(dout, dref, total, kt_tol(dt), "cross_entropy_bwd rows=%lld classes=%lld %s", (long long)rows,
                   (long long)classes, cml_dtype_name(dt));
    int ignored_nonzero = 0;
    for (int64_t r = 0; r < rows; r++)
        if (t[r] == ignore_index) {
            ignored_nonzero += loss[r] != 0;
            for (int64_t c = 0; c < classes; c++) ignored_nonzero += kt_get(&dlogits, r * classes + c) != 0;
        }
    CHECK_MSG(ignored_nonzero == 0, "ignored rows must give 0 loss and 0 gradient (%d nonzero)", ignored_nonzero);
    free(t);
    free(loss);
    free(dloss);
    free(ref);
    free(dref);
    free(p);
    free(dout);
    kt_view_free(&logits);
    kt_view_free(&dlogits);
}

static void test_cross_entropy(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 21);
    static const int64_t sizes[][2] = {{1, 1}, {7, 7}, {127, 10}, {5, 1025}, {300, 127}, {9, 5000}};
    for (int s = 0; s < 6; s++) run_cross_entropy(sizes[s][0], sizes[s][1], CML_F32, -100, &rng);
    run_cross_entropy(127, 10, CML_BF16, -100, &rng);
    run_cross_entropy(33, 1025, CML_F16, 2, &rng); /* ignore_index may also be a class id */
}

static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 22);
    int64_t n = 64 * 1000 * 3;
    float *x = kt_malloc((size_t)n * 4), *y1 = kt_malloc((size_t)n * 4), *y2 = kt_malloc((size_t)n * 4);
    th_fill_uniform(x, n, -3, 3, &rng);
    for (int inner = 1; inner <= 3; inner += 2) {
        CHECK_OK(cml_softmax_fwd(kt_ctx(), y1, x, 64000 / inner / 100, 100, inner, CML_F32, false));
        CHECK_OK(cml_softmax_fwd(kt_ctx(), y2, x, 64000 / inner / 100, 100, inner, CML_F32, false));
        CHECK(memcmp(y1, y2, (size_t)64000 * 4) == 0);
    }
    free(x);
    free(y1);
    free(y2);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float x[40] = {0}, y[40], loss[4];
    int64_t t[4] = {0, 1, 12, 2};
    CHECK_STATUS(cml_softmax_fwd(ctx, y, x, 2, 0, 1, CML_F32, false), CML_ERR_INVALID_ARG,
                 "cml_softmax_fwd: n=0 must be >= 1");
    CHECK_STATUS(cml_softmax_fwd(ctx, y, x, 2, 4, 1, CML_I32, false), CML_ERR_DTYPE,
                 "cml_softmax_fwd: dtype=i32 must be a floating-point dtype");
    CHECK_STATUS(cml_softmax_bwd(ctx, y, x, NULL, 2, 4, 1, CML_F32, true), CML_ERR_INVALID_ARG,
                 "cml_softmax_bwd: y must not be NULL");
    CHECK_STATUS(cml_cross_entropy_fwd(ctx, loss, x, t, 4, 10, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "cml_cross_entropy_fwd: targets[2]=12 must be in [0, 10)");
    CHECK_STATUS(cml_cross_entropy_bwd(ctx, y, loss, x, t, 4, 10, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "cml_cross_entropy_bwd: targets[2]=12");
    CHECK_STATUS(cml_cross_entropy_fwd(ctx, loss, x, t, 4, 0, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "classes=0 must be >= 1");
    CHECK_STATUS(cml_cross_entropy_bwd(ctx, y, NULL, x, t, 4, 10, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "dloss must not be NULL");
    t[2] = 12;
    CHECK_OK(cml_cross_entropy_fwd(ctx, loss, x, t, 4, 10, CML_F32, 12)); /* now it is ignored */
    CHECK(loss[2] == 0);
}

int main(void) {
    RUN(test_softmax);
    RUN(test_softmax_specials);
    RUN(test_cross_entropy);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
