/* The rms_norm op and the RMSNorm module: forward against a float64 reference
 * (contiguous, transposed and sliced inputs; with and without gamma), gradient
 * checks wrt x and gamma, the backward through cml_backward against the
 * analytic formula, the module's parameter, and error paths. */
#include "framework_test_util.h"

static double *rms_norm_ref(const double *x, const double *g, int64_t rows, int64_t C, double eps) {
    double *y = ft_malloc((size_t)(rows * C) * 8);
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t c = 0; c < C; c++) ss += x[r * C + c] * x[r * C + c];
        const double rs = 1.0 / sqrt(ss / (double)C + eps);
        for (int64_t c = 0; c < C; c++) y[r * C + c] = x[r * C + c] * rs * (g ? g[c] : 1.0);
    }
    return y;
}

static void test_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 90);
    const int64_t shape[3] = {2, 3, 7}, C = 7;
    for (int l = 0; l < FT_LAYOUT_COUNT; l++)
        for (int affine = 0; affine < 2; affine++) {
            cml_tensor *x = ft_make(3, shape, (ft_layout_kind)l, FT_UNIFORM(-2, 3), &rng);
            cml_tensor *g = affine ? ft_make(1, &C, (ft_layout_kind)l, FT_UNIFORM(0.5, 1.5), &rng) : NULL;
            double *xv = ft_read(x), *gv = g ? ft_read(g) : NULL, *ref = rms_norm_ref(xv, gv, 6, C, 1e-5);
            cml_tensor *y = cml_rms_norm(x, g, 1e-5f);
            char what[64];
            snprintf(what, sizeof what, "rms_norm %s affine=%d", ft_layout_name[l], affine);
            FT_CHECK_CLOSE(y, 3, shape, ref, 1e-6, what);
            free(xv), free(gv), free(ref);
            FT_RELEASE(x, g, y);
        }
}

static cml_tensor *rms_norm_fn(cml_tensor *const *in, int n, void *user) {
    return cml_rms_norm(in[0], n > 1 ? in[1] : NULL, 1e-5f);
}

static void test_gradcheck(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 91);
    const int64_t shape[3] = {2, 3, 5}, C = 5;
    cml_tensor *in[2] = {ft_leaf(3, shape, FT_AWAY_FROM_ZERO(0.2, 2), &rng), ft_leaf(1, &C, FT_UNIFORM(0.5, 1.5), &rng)};
    cml_gradcheck_opts opts = {1e-2, 3e-4, 3e-3, 13}; /* tight: a 1% error in a gradient is caught */
    cml_clear_error();
    CHECK_MSG(cml_gradcheck(rms_norm_fn, in, 2, NULL, &opts) == CML_OK, "rms_norm wrt x, gamma: %s", cml_last_error());
    CHECK_MSG(cml_gradcheck(rms_norm_fn, in, 1, NULL, &opts) == CML_OK, "rms_norm wrt x: %s", cml_last_error());
    cml_tensor_set_requires_grad(in[0], false);
    CHECK_MSG(cml_gradcheck(rms_norm_fn, in, 2, NULL, &opts) == CML_OK, "rms_norm wrt gamma: %s", cml_last_error());
    cml_tensor_release_all(in, 2);
    /* one column: y = x / sqrt(x^2 + eps), nearly flat, so dx is small (and curved: a smaller step) */
    const int64_t one[2] = {4, 1};
    cml_tensor *x1 = ft_leaf(2, one, FT_AWAY_FROM_ZERO(0.05, 0.3), &rng);
    cml_gradcheck_opts fine = {1e-3, 3e-4, 3e-3, 13};
    CHECK_MSG(cml_gradcheck(rms_norm_fn, &x1, 1, NULL, &fine) == CML_OK, "rms_norm C = 1: %s", cml_last_error());
    cml_tensor_release(x1);
}

/* dgamma through cml_backward of sum(rms_norm(x, g)) is sum over rows of xhat. */
static void test_backward_gamma(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 92);
    const int64_t shape[2] = {9, 6}, C = 6;
    cml_tensor *x = ft_make(2, shape, FT_CONTIG, FT_UNIFORM(-2, 2), &rng), *g = ft_leaf(1, &C, FT_UNIFORM(0.5, 1.5), &rng);
    cml_tensor *y = cml_rms_norm(x, g, 1e-5f), *s = cml_sum(y, NULL, 0, false);
    CHECK_OK(cml_backward(s, NULL));
    double *xv = ft_read(x), *xh = rms_norm_ref(xv, NULL, 9, C, 1e-5), ref[6] = {0};
    for (int r = 0; r < 9; r++)
        for (int c = 0; c < 6; c++) ref[c] += xh[r * 6 + c];
    FT_CHECK_CLOSE(cml_tensor_grad(g), 1, &C, ref, 1e-6, "dgamma");
    free(xv), free(xh);
    FT_RELEASE(x, g, y, s);
}

static cml_tensor *param_named(const cml_module *m, const char *name) {
    cml_param ps[4];
    int n = cml_module_parameters(m, ps, 4);
    for (int i = 0; i < n && i < 4; i++)
        if (strcmp(ps[i].name, name) == 0) return ps[i].tensor;
    return NULL;
}

static void test_module(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 93);
    cml_module *m = cml_rmsnorm_create(8, 1e-6f);
    CHECK_NOT_NULL(m);
    if (!m) return;
    cml_tensor *w = param_named(m, "weight");
    CHECK(w && cml_module_parameters(m, NULL, 0) == 1 && cml_tensor_size(w, 0) == 8 && cml_tensor_requires_grad(w));
    if (w) CHECK(cml_tensor_item_at(w, (const int64_t[]){5}) == 1.0);
    const int64_t xs[3] = {2, 5, 8};
    cml_tensor *x = ft_make(3, xs, FT_STRIDED, FT_UNIFORM(-3, 3), &rng), *y = cml_module_forward(m, x);
    double *xv = ft_read(x), *ref = rms_norm_ref(xv, NULL, 10, 8, 1e-6);
    FT_CHECK_CLOSE(y, 3, xs, ref, 1e-6, "RMSNorm module forward");
    free(xv), free(ref);
    FT_RELEASE(x, y);
    cml_module_destroy(m);
    CHECK(cml_rmsnorm_create(0, 1e-5f) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_rmsnorm_create: dim=0 must be >= 1");
    CHECK(cml_rmsnorm_create(4, -1.0f) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_rmsnorm_create: eps=-1 must be finite and >= 0");
}

static void test_errors(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 94);
    const int64_t xs[2] = {3, 4}, bad = 5, C = 4;
    cml_tensor *x = ft_make(2, xs, FT_CONTIG, FT_UNIFORM(-1, 1), &rng), *g5 = ft_make(1, &bad, FT_CONTIG, FT_UNIFORM(0, 1), &rng);
    cml_tensor *g16 = cml_tensor_zeros(1, &C, CML_BF16, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_rms_norm(x, g5, 1e-5f) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_rms_norm: gamma has shape [5]; expected (4), the last dim of x");
    CHECK(cml_rms_norm(x, g16, 1e-5f) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_rms_norm: gamma has dtype bf16; expected x's dtype f32");
    CHECK(cml_rms_norm(x, NULL, INFINITY) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_rms_norm: eps=inf must be finite and >= 0");
    cml_clear_error();
    CHECK(cml_rms_norm(NULL, NULL, 1e-5f) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_rms_norm");
    FT_RELEASE(x, g5, g16);
}

int main(void) {
    RUN(test_forward);
    RUN(test_gradcheck);
    RUN(test_backward_gamma);
    RUN(test_module);
    RUN(test_errors);
    return th_finish();
}
