/* softmax / log_softmax along every axis (contiguous and non-contiguous
 * inputs, large logits) and cross-entropy (mean/sum/none, ignore_index, i32
 * targets): forward against float64 references, gradients by finite
 * differences, and the error paths. */
#include "framework_test_util.h"

/* float64 softmax (or log_softmax) of row-major v along dim. */
static double *softmax_reference(const double *v, int ndim, const int64_t *shape, int dim, bool log_) {
    int64_t outer = 1, n = shape[dim], inner = 1;
    for (int d = 0; d < dim; d++) outer *= shape[d];
    for (int d = dim + 1; d < ndim; d++) inner *= shape[d];
    double *out = ft_malloc(sizeof(double) * (size_t)(outer * n * inner));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < n; k++) mx = fmax(mx, v[(o * n + k) * inner + i]);
            for (int64_t k = 0; k < n; k++) sum += exp(v[(o * n + k) * inner + i] - mx);
            for (int64_t k = 0; k < n; k++) {
                double z = v[(o * n + k) * inner + i] - mx;
                out[(o * n + k) * inner + i] = log_ ? z - log(sum) : exp(z) / sum;
            }
        }
    return out;
}

static void test_softmax_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 30);
    static const ft_shape shapes[] = {{3, {3, 4, 5}}, {3, {2, 1, 7}}, {1, {6}}, {2, {1, 1}}, {4, {2, 3, 2, 3}}};
    static const ft_dist dists[] = {FT_UNIFORM(-3, 3), FT_UNIFORM(-80, 80)}; /* the second needs max-subtraction */
    for (int s = 0; s < FT_LEN(shapes); s++) {
        const ft_shape *sh = &shapes[s];
        for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
            for (int di = 0; di < FT_LEN(dists); di++) {
                cml_tensor *x = ft_make(sh->ndim, sh->d, (ft_layout_kind)l, dists[di], &rng);
                double *v = ft_read(x);
                for (int dim = -sh->ndim; dim < sh->ndim; dim++) {
                    int d = dim < 0 ? dim + sh->ndim : dim;
                    for (int lg = 0; lg < 2; lg++) {
                        double *ref = softmax_reference(v, sh->ndim, sh->d, d, lg);
                        cml_tensor *y = lg ? cml_log_softmax(x, dim) : cml_softmax(x, dim);
                        char what[128];
                        snprintf(what, sizeof what, "%s shape %d dim %d %s dist %d", lg ? "log_softmax" : "softmax", s,
                                 dim, ft_layout_name[l], di);
                        FT_CHECK_CLOSE(y, sh->ndim, sh->d, ref, 2e-6, what);
                        free(ref);
                        cml_tensor_release(y);
                    }
                }
                free(v);
                cml_tensor_release(x);
            }
        }
    }
}

typedef struct softmax_gc {
    int dim;
    bool log_, permute;
} softmax_gc;

static cml_tensor *softmax_gc_fn(cml_tensor *const *in, int n, void *user) {
    const softmax_gc *u = user;
    cml_tensor *x = u->permute ? cml_transpose(in[0], 0, 2) : cml_tensor_retain(in[0]);
    cml_tensor *y = u->log_ ? cml_log_softmax(x, u->dim) : cml_softmax(x, u->dim);
    cml_tensor_release(x);
    return y;
}

static void test_softmax_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 31);
    int64_t shape[3] = {3, 4, 5}, tshape[3] = {5, 4, 3};
    for (int dim = -3; dim < 3; dim++)
        for (int lg = 0; lg < 2; lg++)
            for (int p = 0; p < 2; p++) {
                softmax_gc u = {dim, lg, p};
                cml_tensor *x = ft_leaf(3, p ? tshape : shape, FT_UNIFORM(-2, 2), &rng);
                char what[96];
                snprintf(what, sizeof what, "%s dim %d%s", lg ? "log_softmax" : "softmax", dim, p ? " transposed" : "");
                FT_GRADCHECK(softmax_gc_fn, &x, 1, &u, what);
                cml_tensor_release(x);
            }
    /* A composite: sum over an axis of softmax times a weight. */
    int64_t s2[2] = {4, 6};
    softmax_gc u = {1, false, false};
    cml_tensor *x = ft_leaf(2, s2, FT_UNIFORM(-2, 2), &rng);
    FT_GRADCHECK(softmax_gc_fn, &x, 1, &u, "softmax 2-d");
    cml_tensor_release(x);
}

static void test_softmax_errors(void) {
    int64_t s[2] = {2, 3};
    cml_tensor *x = cml_tensor_ones(2, s, CML_F32, CML_DEVICE_CPU), *i = cml_tensor_ones(2, s, CML_I32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_softmax(x, 2) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_softmax: dim=2 out of range");
    cml_clear_error();
    CHECK(cml_log_softmax(x, -3) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_log_softmax: dim=-3");
    cml_clear_error();
    CHECK(cml_softmax(i, 0) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "x has dtype i32");
    FT_RELEASE(x, i);
}

/* ---- cross-entropy --------------------------------------------------------------- */

/* Per-row losses (0 for ignored rows), and the number of rows that count. */
static double *ce_rows(const cml_tensor *logits, const int64_t *t, int64_t ignore, int64_t *counted) {
    int64_t N = cml_tensor_shape(logits)[0], C = cml_tensor_shape(logits)[1];
    double *v = ft_read(logits), *loss = ft_malloc(sizeof(double) * (size_t)N);
    *counted = 0;
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == ignore) {
            loss[r] = 0;
            continue;
        }
        ++*counted;
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; c++) mx = fmax(mx, v[r * C + c]);
        for (int64_t c = 0; c < C; c++) sum += exp(v[r * C + c] - mx);
        loss[r] = mx + log(sum) - v[r * C + t[r]];
    }
    free(v);
    return loss;
}

#define CE_N 7
#define CE_C 5

/* targets for ignore_index -100 and for ignore_index 2 (a valid class id) */
static const int64_t ce_targets[CE_N] = {0, 4, -100, 2, 2, 1, 3};
static const int64_t ce_targets2[CE_N] = {0, 4, 1, 2, 2, 1, 3};

static void test_cross_entropy_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 32);
    int64_t ls[2] = {CE_N, CE_C}, ts[1] = {CE_N};
    static const int64_t ignores[] = {-100, 2};
    static const cml_dtype tdts[] = {CML_I64, CML_I32};
    for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
        cml_tensor *logits = ft_make(2, ls, (ft_layout_kind)l, FT_UNIFORM(-4, 4), &rng);
        for (int ig = 0; ig < FT_LEN(ignores); ig++) {
            int64_t counted;
            const int64_t *tv = ig ? ce_targets2 : ce_targets;
            double *rows = ce_rows(logits, tv, ignores[ig], &counted);
            double total = 0;
            for (int r = 0; r < CE_N; r++) total += rows[r];
            for (int td = 0; td < FT_LEN(tdts); td++) {
                cml_tensor *t64 = ft_from_i64(1, ts, tv);
                cml_tensor *targets = cml_to_dtype(t64, tdts[td]);
                char what[128];
                snprintf(what, sizeof what, "cross_entropy %s ignore %lld targets %s", ft_layout_name[l],
                         (long long)ignores[ig], cml_dtype_name(tdts[td]));
                cml_tensor *none = cml_cross_entropy(logits, targets, ignores[ig], CML_REDUCTION_NONE);
                cml_tensor *sum = cml_cross_entropy(logits, targets, ignores[ig], CML_REDUCTION_SUM);
                cml_tensor *mean = cml_cross_entropy(logits, targets, ignores[ig], CML_REDUCTION_MEAN);
                double want_mean = total / (double)counted;
                FT_CHECK_CLOSE(none, 1, ts, rows, 2e-6, what);
                FT_CHECK_CLOSE(sum, 0, NULL, &total, 2e-6, what);
                FT_CHECK_CLOSE(mean, 0, NULL, &want_mean, 2e-6, what);
                FT_RELEASE(t64, targets, none, sum, mean);
            }
            free(rows);
        }
        cml_tensor_release(logits);
    }
}

typedef struct ce_gc {
    cml_tensor *targets;
    int64_t ignore;
    cml_reduction reduction;
} ce_gc;

static cml_tensor *ce_gc_fn(cml_tensor *const *in, int n, void *user) {
    const ce_gc *u = user;
    return cml_cross_entropy(in[0], u->targets, u->ignore, u->reduction);
}

/* cross-entropy of a transposed (non-contiguous) view of the logits. */
static cml_tensor *ce_transposed_fn(cml_tensor *const *in, int n, void *user) {
    const ce_gc *u = user;
    cml_tensor *x = cml_transpose(in[0], 0, 1);
    cml_tensor *y = cml_cross_entropy(x, u->targets, u->ignore, u->reduction);
    cml_tensor_release(x);
    return y;
}

static void test_cross_entropy_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 33);
    int64_t ls[2] = {CE_N, CE_C}, lts[2] = {CE_C, CE_N}, ts[1] = {CE_N};
    cml_tensor *t64 = ft_from_i64(1, ts, ce_targets);
    cml_tensor *t2 = ft_from_i64(1, ts, ce_targets2);
    cml_tensor *t32 = cml_to_dtype(t2, CML_I32);
    static const cml_reduction reds[] = {CML_REDUCTION_MEAN, CML_REDUCTION_SUM, CML_REDUCTION_NONE};
    static const char *const red_names[] = {"mean", "sum", "none"};
    for (int r = 0; r < 3; r++) {
        for (int ig = 0; ig < 2; ig++) {
            ce_gc u = {ig ? t32 : t64, ig ? 2 : -100, reds[r]};
            cml_tensor *x = ft_leaf(2, ls, FT_UNIFORM(-3, 3), &rng);
            char what[96];
            snprintf(what, sizeof what, "cross_entropy %s ignore %lld", red_names[r], (long long)u.ignore);
            FT_GRADCHECK(ce_gc_fn, &x, 1, &u, what);
            cml_tensor_release(x);
            cml_tensor *xt = ft_leaf(2, lts, FT_UNIFORM(-3, 3), &rng);
            FT_GRADCHECK(ce_transposed_fn, &xt, 1, &u, what);
            cml_tensor_release(xt);
        }
    }
    /* Ignored rows get exactly zero gradient. */
    cml_tensor *x = ft_leaf(2, ls, FT_UNIFORM(-3, 3), &rng);
    cml_tensor *loss = cml_cross_entropy(x, t64, -100, CML_REDUCTION_MEAN);
    CHECK_OK(cml_backward(loss, NULL));
    if (cml_tensor_grad(x)) {
        double *g = ft_read(cml_tensor_grad(x));
        for (int c = 0; c < CE_C; c++) CHECK(g[2 * CE_C + c] == 0.0);
        double row_sum = 0; /* softmax - onehot sums to 0 over a row */
        for (int c = 0; c < CE_C; c++) row_sum += g[c];
        CHECK_NEAR(row_sum, 0.0, 1e-6);
        free(g);
    }
    FT_RELEASE(x, loss, t64, t2, t32);
}

static void test_cross_entropy_low_precision(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 34);
    int64_t ls[2] = {CE_N, CE_C}, ts[1] = {CE_N};
    cml_tensor *x32 = ft_make(2, ls, FT_CONTIG, FT_UNIFORM(-3, 3), &rng);
    cml_tensor *x = cml_to_dtype(x32, CML_BF16);
    cml_tensor *t = ft_from_i64(1, ts, ce_targets);
    int64_t counted;
    double *rows = ce_rows(x, ce_targets, -100, &counted);
    cml_tensor *none = cml_cross_entropy(x, t, -100, CML_REDUCTION_NONE);
    FT_CHECK_CLOSE(none, 1, ts, rows, 1e-2, "cross_entropy bf16");
    if (none) CHECK(cml_tensor_dtype(none) == CML_BF16);
    free(rows);
    FT_RELEASE(x32, x, t, none);
}

static void test_cross_entropy_errors(void) {
    int64_t ls[2] = {3, 4}, ts[1] = {3}, t4[1] = {4};
    cml_tensor *x = cml_tensor_zeros(2, ls, CML_F32, CML_DEVICE_CPU);
    const int64_t bad_hi[3] = {0, 4, 1}, bad_neg[3] = {0, -1, 1};
    cml_tensor *thi = ft_from_i64(1, ts, bad_hi), *tneg = ft_from_i64(1, ts, bad_neg);
    cml_tensor *tf = cml_tensor_zeros(1, ts, CML_F32, CML_DEVICE_CPU);
    cml_tensor *tlong = cml_tensor_zeros(1, t4, CML_I64, CML_DEVICE_CPU);
    cml_tensor *x1 = cml_tensor_zeros(1, t4, CML_F32, CML_DEVICE_CPU);
    cml_tensor *xi = cml_tensor_zeros(2, ls, CML_I32, CML_DEVICE_CPU);
    cml_tensor *tok = cml_tensor_zeros(1, ts, CML_I64, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_cross_entropy(x, thi, -100, CML_REDUCTION_MEAN) == NULL);
    CHECK(cml_last_status() == CML_ERR_INVALID_ARG);
    cml_clear_error();
    CHECK(cml_cross_entropy(x, tneg, -100, CML_REDUCTION_NONE) == NULL);
    CHECK(cml_last_status() == CML_ERR_INVALID_ARG);
    /* -1 is fine when it is the ignore_index */
    cml_tensor *ok = cml_cross_entropy(x, tneg, -1, CML_REDUCTION_SUM);
    double want = 2 * log(4.0);
    FT_CHECK_CLOSE(ok, 0, NULL, &want, 1e-6, "cross_entropy ignoring -1");
    cml_clear_error();
    CHECK(cml_cross_entropy(x, tf, -100, CML_REDUCTION_MEAN) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "targets have dtype f32");
    cml_clear_error();
    CHECK(cml_cross_entropy(x, tlong, -100, CML_REDUCTION_MEAN) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "expected logits (N, C) and targets (N)");
    cml_clear_error();
    CHECK(cml_cross_entropy(x1, tlong, -100, CML_REDUCTION_MEAN) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "expected logits (N, C)");
    cml_clear_error();
    CHECK(cml_cross_entropy(xi, tok, -100, CML_REDUCTION_MEAN) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "logits has dtype i32");
    cml_clear_error();
    CHECK(cml_cross_entropy(x, tok, -100, (cml_reduction)9) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "unknown reduction 9");
    cml_clear_error();
    CHECK(cml_cross_entropy(NULL, tok, -100, CML_REDUCTION_MEAN) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "input 0 is NULL");
    FT_RELEASE(x, thi, tneg, tf, tlong, x1, xi, tok, ok);
}

int main(void) {
    RUN(test_softmax_forward);
    RUN(test_softmax_gradients);
    RUN(test_softmax_errors);
    RUN(test_cross_entropy_forward);
    RUN(test_cross_entropy_gradients);
    RUN(test_cross_entropy_low_precision);
    RUN(test_cross_entropy_errors);
    return th_finish();
}
