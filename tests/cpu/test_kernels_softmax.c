/* Softmax / log-softmax forward and backward, and cross-entropy, against
 * float64 references; rows, column blocks, large logits, NaN, ignore_index,
 * cross-entropy rows of -inf logits and -inf targets. */
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
    CHECK_OK(cml_cross_entropy_fwd(kt_ctx(), loss, NULL, logits.data, t, rows, classes, dt, ignore_index));
    CHECK_OK(cml_cross_entropy_bwd(kt_ctx(), dlogits.data, dloss, logits.data, NULL, t, rows, classes, dt,
                                   ignore_index));
    double *ref = kt_malloc((size_t)rows * 8), *dref = kt_malloc((size_t)total * 8), *p = kt_malloc((size_t)classes * 8);
    double *lse_ref = kt_malloc((size_t)rows * 8);
    float *dout = kt_malloc((size_t)total * 4);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < classes; c++) p[c] = kt_get(&logits, r * classes + c);
        bool ignored = t[r] == ignore_index;
        const double x0 = p[0];
        ref_softmax(p, classes, true, p); /* log-probabilities */
        lse_ref[r] = x0 - p[0];
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
    /* with the forward's logsumexp as (max, log-sum) pairs: the same losses, pairs that sum to the
     * row's logsumexp (NaN for ignored rows), and the backward from them */
    float *lse = kt_malloc((size_t)rows * 8), *loss2 = kt_malloc((size_t)rows * 4);
    th_poison(lse, (size_t)rows * 8);
    th_poison(loss2, (size_t)rows * 4);
    CHECK_OK(cml_cross_entropy_fwd(kt_ctx(), loss2, lse, logits.data, t, rows, classes, dt, ignore_index));
    CHECK_MSG(memcmp(loss2, loss, (size_t)rows * 4) == 0, "cross_entropy_fwd: the losses changed with lse asked for");
    for (int64_t r = 0; r < rows; r++) {
        const double got = (double)lse[2 * r] + lse[2 * r + 1];
        if (t[r] == ignore_index) CHECK_MSG(isnan(got), "lse of ignored row %lld is %g", (long long)r, got);
        else CHECK_MSG(fabs(got - lse_ref[r]) <= 1e-5 * (1 + fabs(lse_ref[r])), "lse row %lld: %.9g, want %.9g",
                       (long long)r, got, lse_ref[r]);
    }
    th_poison(dlogits.data, (size_t)total * cml_dtype_size(dt));
    CHECK_OK(cml_cross_entropy_bwd(kt_ctx(), dlogits.data, dloss, logits.data, lse, t, rows, classes, dt,
                                   ignore_index));
    for (int64_t i = 0; i < total; i++) dout[i] = (float)kt_get(&dlogits, i);
    KT_CHECK_CLOSE(dout, dref, total, kt_tol(dt), "cross_entropy_bwd (lse) rows=%lld classes=%lld %s",
                   (long long)rows, (long long)classes, cml_dtype_name(dt));
    free(lse);
    free(loss2);
    free(lse_ref);
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

/* -inf logits are classes of probability 0. Rows (classes = C, target 2 unless said): 0 all -inf;
 * 1 the target's logit -inf; 2 some -inf, not the target; 3 all -inf and ignored; 4 a NaN;
 * 5 all -inf, target C - 1 (in the second chunk of the CPU's 1024-column chunks when C > 1024). */
/* with_lse: the forward saves its (max, log-sum) pairs and the backward runs from them. */
static void run_ce_infinities(int64_t C, cml_dtype dt, bool with_lse, cml_rng *rng) {
    enum { R = 6, T = 2, IGN = -100 };
    const int64_t total = R * C;
    cml_layout l = kt_layout(1, &total);
    kt_view x = kt_view_alloc(l, dt), dx = kt_view_alloc(l, dt);
    kt_fill_uniform(&x, -3, 3, rng);
    for (int64_t j = 0; j < C; j++) {
        cml_dtype_store(x.data, dt, 0 * C + j, -INFINITY);
        if (j % 3 == 0 && j != T) cml_dtype_store(x.data, dt, 2 * C + j, -INFINITY);
        cml_dtype_store(x.data, dt, 3 * C + j, -INFINITY);
        cml_dtype_store(x.data, dt, 5 * C + j, -INFINITY);
    }
    cml_dtype_store(x.data, dt, 1 * C + T, -INFINITY);
    cml_dtype_store(x.data, dt, 4 * C + C / 2, NAN);
    const int64_t t[R] = {T, T, T, IGN, T, C - 1};
    const float dloss[R] = {0.75f, 1.25f, 0.5f, 2.0f, 1.0f, 1.5f};
    float loss[R], pairs[2 * R], *lse = with_lse ? pairs : NULL;
    th_poison(loss, sizeof loss);
    th_poison(pairs, sizeof pairs);
    th_poison(dx.data, (size_t)total * cml_dtype_size(dt));
    CHECK_OK(cml_cross_entropy_fwd(kt_ctx(), loss, lse, x.data, t, R, C, dt, IGN));
    CHECK_OK(cml_cross_entropy_bwd(kt_ctx(), dx.data, dloss, x.data, lse, t, R, C, dt, IGN));
    if (with_lse) /* rows 0 and 5 all -inf, 3 ignored, 4 with a NaN */
        CHECK_MSG(pairs[0] == -INFINITY && pairs[1] == 0 && pairs[10] == -INFINITY && pairs[11] == 0 &&
                      isnan(pairs[6]) && (isnan(pairs[8]) || isnan(pairs[9])),
                  "C=%lld %s: lse pairs of -inf / ignored / NaN rows (%g, %g) (%g, %g) (%g) (%g, %g)", (long long)C,
                  cml_dtype_name(dt), pairs[0], pairs[1], pairs[10], pairs[11], pairs[6], pairs[8], pairs[9]);
    CHECK_MSG(loss[0] == INFINITY && loss[1] == INFINITY && loss[5] == INFINITY,
              "C=%lld %s: losses of -inf rows / a -inf target %g %g %g, want +inf", (long long)C, cml_dtype_name(dt),
              loss[0], loss[1], loss[5]);
    CHECK(loss[3] == 0 && isnan(loss[4]));
    /* row 2 and row 1's gradient against float64 softmax over the finite logits */
    double *p = kt_malloc((size_t)C * 8), want_loss = 0;
    float *got = kt_malloc((size_t)2 * C * 4);
    double *ref = kt_malloc((size_t)2 * C * 8);
    for (int r = 1; r <= 2; r++) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < C; j++) m = fmax(m, kt_get(&x, r * C + j));
        for (int64_t j = 0; j < C; j++) sum += exp(kt_get(&x, r * C + j) - m);
        for (int64_t j = 0; j < C; j++) {
            p[j] = exp(kt_get(&x, r * C + j) - m) / sum;
            ref[(r - 1) * C + j] = dloss[r] * (p[j] - (j == T));
            got[(r - 1) * C + j] = (float)kt_get(&dx, r * C + j);
        }
        if (r == 2) want_loss = -log(p[T]);
    }
    KT_CHECK_CLOSE(&loss[2], &want_loss, 1, kt_tol(CML_F32), "cross_entropy_fwd -inf columns C=%lld %s", (long long)C,
                   cml_dtype_name(dt));
    KT_CHECK_CLOSE(got, ref, 2 * C, kt_tol(dt), "cross_entropy_bwd -inf target / columns C=%lld %s", (long long)C,
                   cml_dtype_name(dt));
    /* rows of -inf: softmax taken as all 0, so -dloss at the target and 0 elsewhere, exactly */
    int wrong = 0;
    for (int64_t j = 0; j < C; j++) {
        wrong += kt_get(&dx, 0 * C + j) != (j == T ? -(double)dloss[0] : 0.0);
        wrong += kt_get(&dx, 3 * C + j) != 0.0; /* ignored */
        wrong += !isnan(kt_get(&dx, 4 * C + j));
        wrong += kt_get(&dx, 5 * C + j) != (j == C - 1 ? -(double)dloss[5] : 0.0);
    }
    wrong += kt_get(&dx, 1 * C + T) != -(double)dloss[1]; /* a -inf target: p = 0, minus the one-hot term */
    CHECK_MSG(wrong == 0, "C=%lld %s: %d wrong gradient values in rows of -inf / NaN", (long long)C,
              cml_dtype_name(dt), wrong);
    free(p);
    free(got);
    free(ref);
    kt_view_free(&x);
    kt_view_free(&dx);
}

static void test_cross_entropy_infinities(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 23);
    static const int64_t classes[] = {3, 10, 1025, 2500};
    for (int c = 0; c < 4; c++) {
        for (int with_lse = 0; with_lse < 2; with_lse++) {
            run_ce_infinities(classes[c], CML_F32, with_lse, &rng);
            run_ce_infinities(classes[c], CML_BF16, with_lse, &rng);
        }
    }
    run_ce_infinities(1025, CML_F16, false, &rng);
    run_ce_infinities(1025, CML_F16, true, &rng);
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
    CHECK_STATUS(cml_cross_entropy_fwd(ctx, loss, NULL, x, t, 4, 10, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "cml_cross_entropy_fwd: targets[2]=12 must be in [0, 10)");
    CHECK_STATUS(cml_cross_entropy_bwd(ctx, y, loss, x, NULL, t, 4, 10, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "cml_cross_entropy_bwd: targets[2]=12");
    CHECK_STATUS(cml_cross_entropy_fwd(ctx, loss, NULL, x, t, 4, 0, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "classes=0 must be >= 1");
    CHECK_STATUS(cml_cross_entropy_bwd(ctx, y, NULL, x, NULL, t, 4, 10, CML_F32, -100), CML_ERR_INVALID_ARG,
                 "dloss must not be NULL");
    t[2] = 12;
    CHECK_OK(cml_cross_entropy_fwd(ctx, loss, NULL, x, t, 4, 10, CML_F32, 12)); /* now it is ignored */
    CHECK(loss[2] == 0);
}

int main(void) {
    RUN(test_softmax);
    RUN(test_softmax_specials);
    RUN(test_cross_entropy);
    RUN(test_cross_entropy_infinities);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
