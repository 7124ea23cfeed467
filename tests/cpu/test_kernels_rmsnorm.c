/* RMSNorm forward and backward (CPU) against float64 references: shapes from
 * 1x1 to multi-chunk rows (C = 1, 7, 1025, 2500, 32768), f32/bf16/f16, gamma
 * present or NULL, inputs with a large common offset, dx aliasing dy,
 * determinism across runs and thread counts, the CUDA dispatch, error paths. */
#include "kernel_test_util.h"

typedef struct rms_case {
    int64_t rows, C;
    cml_dtype dt;
    bool gamma;
    float lo, hi; /* range of x */
} rms_case;

static void run_case(rms_case c, cml_rng *rng) {
    const int64_t rows = c.rows, C = c.C, n = rows * C;
    const cml_dtype dt = c.dt;
    const float eps = 1e-5f;
    cml_layout l = kt_layout(1, &n), lc = kt_layout(1, &C);
    kt_view x = kt_view_alloc(l, dt), y = kt_view_alloc(l, dt), dy = kt_view_alloc(l, dt), dx = kt_view_alloc(l, dt);
    kt_view g = kt_view_alloc(lc, dt), dg = kt_view_alloc(lc, dt);
    kt_fill_uniform(&x, c.lo, c.hi, rng);
    kt_fill_uniform(&dy, -1, 1, rng);
    kt_fill_uniform(&g, 0.5f, 1.5f, rng);
    float *rstd = kt_malloc((size_t)(rows + 1) * 4);
    th_poison(rstd, (size_t)(rows + 1) * 4);
    const void *gp = c.gamma ? g.data : NULL;
    CHECK_OK(cml_rmsnorm_fwd(kt_ctx(), y.data, rstd, x.data, gp, rows, C, eps, dt));
    CHECK_OK(cml_rmsnorm_bwd(kt_ctx(), dx.data, dg.data, dy.data, x.data, gp, rstd, rows, C, dt));

    /* float64 references, from the inputs as stored */
    double *yr = kt_malloc((size_t)(n + 1) * 8), *dxr = kt_malloc((size_t)(n + 1) * 8);
    double *rr = kt_malloc((size_t)(rows + 1) * 8), *dgr = kt_malloc((size_t)C * 8);
    float *yo = kt_malloc((size_t)(n + 1) * 4), *dxo = kt_malloc((size_t)(n + 1) * 4), *dgo = kt_malloc((size_t)C * 4);
    for (int64_t k = 0; k < C; k++) dgr[k] = 0;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0, sgx = 0;
        for (int64_t k = 0; k < C; k++) ss += kt_get(&x, r * C + k) * kt_get(&x, r * C + k);
        const double rs = 1.0 / sqrt(ss / (double)C + (double)eps);
        rr[r] = rs;
        for (int64_t k = 0; k < C; k++) {
            const double xh = kt_get(&x, r * C + k) * rs, gk = c.gamma ? kt_get(&g, k) : 1.0;
            yr[r * C + k] = xh * gk;
            sgx += kt_get(&dy, r * C + k) * gk * xh;
            dgr[k] += kt_get(&dy, r * C + k) * xh;
        }
        for (int64_t k = 0; k < C; k++) {
            const double xh = kt_get(&x, r * C + k) * rs, gk = c.gamma ? kt_get(&g, k) : 1.0;
            dxr[r * C + k] = rs * (kt_get(&dy, r * C + k) * gk - xh * sgx / (double)C);
        }
    }
    for (int64_t k = 0; k < n; k++) {
        yo[k] = (float)kt_get(&y, k);
        dxo[k] = (float)kt_get(&dx, k);
    }
    for (int64_t k = 0; k < C; k++) dgo[k] = (float)kt_get(&dg, k);
    const double tol = kt_tol(dt);
    const char *dn = cml_dtype_name(dt);
    KT_CHECK_CLOSE(yo, yr, n, tol, "rmsnorm y (%lld, %lld) %s g=%d", (long long)rows, (long long)C, dn, c.gamma);
    KT_CHECK_CLOSE(rstd, rr, rows, 1e-6, "rmsnorm rstd (%lld, %lld) %s", (long long)rows, (long long)C, dn);
    /* dx is a difference of two terms of similar size (it vanishes when C = 1): its error
     * is relative to the larger term, rstd * dy * gamma, so compare with that norm too */
    double num = 0, den = 0;
    for (int64_t k = 0; k < n; k++) {
        if (isnan(dxo[k])) num = INFINITY;
        const double t = rr[k / C] * kt_get(&dy, k) * (c.gamma ? kt_get(&g, k % C) : 1.0);
        num += ((double)dxo[k] - dxr[k]) * ((double)dxo[k] - dxr[k]);
        den += t * t;
    }
    CHECK_MSG(n == 0 || sqrt(num / den) <= 2 * tol, "rmsnorm dx (%lld, %lld) %s g=%d: error %.3g", (long long)rows,
              (long long)C, dn, c.gamma, sqrt(num / den));
    KT_CHECK_CLOSE(dgo, dgr, C, 2 * tol, "rmsnorm dgamma (%lld, %lld) %s", (long long)rows, (long long)C, dn);
    free(yr), free(dxr), free(rr), free(dgr), free(yo), free(dxo), free(dgo), free(rstd);
    kt_view *vs[] = {&x, &y, &dy, &dx, &g, &dg};
    for (int k = 0; k < 6; k++) kt_view_free(vs[k]);
}

static void test_rmsnorm(void) {
    static const int64_t shapes[][2] = {{1, 1}, {5, 1}, {9, 7}, {7, 127}, {3, 1025}, {2, 2500}, {64, 768},
                                        {300, 5}, {2, 32768}, {0, 4}};
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 60);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        rms_case c = {shapes[s][0], shapes[s][1], CML_F32, true, -2, 3};
        run_case(c, &rng);
        c.dt = CML_BF16;
        run_case(c, &rng);
        c.dt = CML_F16;
        run_case(c, &rng);
    }
    run_case((rms_case){7, 127, CML_F32, false, -2, 3}, &rng);
    run_case((rms_case){3, 1025, CML_BF16, false, -2, 3}, &rng);
    run_case((rms_case){5, 300, CML_F32, true, 1000, 1001}, &rng); /* a large common offset */
    run_case((rms_case){5, 300, CML_F32, true, -1e-3f, 1e-3f}, &rng); /* mean(x^2) near eps */
}

/* A hand-computed case: x = (3, 4), eps = 0: rstd = 1 / sqrt(12.5). */
static void test_known_values(void) {
    const float x[2] = {3, 4}, g[2] = {2, 0.5f}, dy[2] = {1, 1};
    float y[2], r, dx[2], dg[2];
    CHECK_OK(cml_rmsnorm_fwd(kt_ctx(), y, &r, x, g, 1, 2, 0.0f, CML_F32));
    const double rs = 1.0 / sqrt(12.5);
    CHECK_NEAR(r, rs, 1e-7);
    CHECK_NEAR(y[0], 3 * rs * 2, 1e-6);
    CHECK_NEAR(y[1], 4 * rs * 0.5, 1e-6);
    CHECK_OK(cml_rmsnorm_bwd(kt_ctx(), dx, dg, dy, x, g, &r, 1, 2, CML_F32));
    const double mgx = (2 * 3 * rs + 0.5 * 4 * rs) / 2;
    CHECK_NEAR(dx[0], rs * (2 - 3 * rs * mgx), 1e-6);
    CHECK_NEAR(dx[1], rs * (0.5 - 4 * rs * mgx), 1e-6);
    CHECK_NEAR(dg[0], 3 * rs, 1e-6);
    CHECK_NEAR(dg[1], 4 * rs, 1e-6);
}

/* rstd may be NULL (forward), dgamma may be NULL, dx may alias dy. */
static void test_optional_outputs(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 61);
    float x[24], y1[24], y2[24], dy[24], dx1[24], dx2[24], g[8], r[3], dg[8];
    th_fill_uniform(x, 24, -1, 1, &rng);
    th_fill_uniform(dy, 24, -1, 1, &rng);
    th_fill_uniform(g, 8, 0.5f, 1.5f, &rng);
    CHECK_OK(cml_rmsnorm_fwd(kt_ctx(), y1, r, x, g, 3, 8, 1e-5f, CML_F32));
    CHECK_OK(cml_rmsnorm_fwd(kt_ctx(), y2, NULL, x, g, 3, 8, 1e-5f, CML_F32));
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
    CHECK_OK(cml_rmsnorm_bwd(kt_ctx(), dx1, dg, dy, x, g, r, 3, 8, CML_F32));
    CHECK_OK(cml_rmsnorm_bwd(kt_ctx(), dx2, NULL, dy, x, g, r, 3, 8, CML_F32));
    CHECK(memcmp(dx1, dx2, sizeof dx1) == 0);
    float dg2[8];
    memcpy(dx2, dy, sizeof dy);
    CHECK_OK(cml_rmsnorm_bwd(kt_ctx(), dx2, dg2, dx2, x, g, r, 3, 8, CML_F32));
    CHECK(memcmp(dx1, dx2, sizeof dx1) == 0);
    CHECK(memcmp(dg, dg2, sizeof dg) == 0);
}

/* Repeated runs, and runs with 1 and 2 threads, are bitwise identical. */
static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 62);
    const int64_t rows = 257, C = 300, n = rows * C;
    float *x = kt_malloc((size_t)n * 4), *dy = kt_malloc((size_t)n * 4), *g = kt_malloc((size_t)C * 4);
    float *r = kt_malloc((size_t)rows * 4);
    float *out[2][3];
    th_fill_uniform(x, n, -3, 3, &rng);
    th_fill_uniform(dy, n, -1, 1, &rng);
    th_fill_uniform(g, C, 0.5f, 1.5f, &rng);
    const int threads = cml_cpu_threads();
    for (int run = 0; run < 2; run++) {
        cml_set_cpu_threads(run == 0 ? threads : 1);
        for (int k = 0; k < 3; k++) {
            out[run][k] = kt_malloc((size_t)(k < 2 ? n : C) * 4);
            th_poison(out[run][k], (size_t)(k < 2 ? n : C) * 4);
        }
        CHECK_OK(cml_rmsnorm_fwd(kt_ctx(), out[run][0], r, x, g, rows, C, 1e-5f, CML_F32));
        CHECK_OK(cml_rmsnorm_bwd(kt_ctx(), out[run][1], out[run][2], dy, x, g, r, rows, C, CML_F32));
    }
    cml_set_cpu_threads(threads);
    for (int k = 0; k < 3; k++) CHECK(memcmp(out[0][k], out[1][k], (size_t)(k < 2 ? n : C) * 4) == 0);
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 3; k++) free(out[run][k]);
    free(x), free(dy), free(g), free(r);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float x[8] = {0}, y[8], r[2];
    CHECK_STATUS(cml_rmsnorm_fwd(ctx, y, r, x, NULL, 2, 0, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_fwd: C=0 must be >= 1");
    CHECK_STATUS(cml_rmsnorm_fwd(ctx, y, r, x, NULL, -1, 4, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_fwd: rows=-1 must be >= 0");
    CHECK_STATUS(cml_rmsnorm_fwd(ctx, y, r, x, NULL, 2, 4, 1e-5f, CML_I64), CML_ERR_DTYPE,
                 "cml_rmsnorm_fwd: dtype=i64 must be a floating-point dtype");
    CHECK_STATUS(cml_rmsnorm_fwd(ctx, y, r, x, NULL, 2, 4, NAN, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_fwd: eps=nan must be finite and >= 0");
    CHECK_STATUS(cml_rmsnorm_fwd(ctx, NULL, r, x, NULL, 2, 4, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_fwd: y must not be NULL");
    CHECK_STATUS(cml_rmsnorm_fwd(NULL, y, r, x, NULL, 2, 4, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_fwd: ctx must not be NULL");
    CHECK_STATUS(cml_rmsnorm_fwd(ctx, y, r, x, NULL, INT64_MAX, 4, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "overflow int64");
    CHECK_STATUS(cml_rmsnorm_bwd(ctx, y, NULL, x, x, NULL, NULL, 2, 4, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_bwd: rstd must not be NULL");
    CHECK_STATUS(cml_rmsnorm_bwd(ctx, NULL, NULL, x, x, NULL, r, 2, 4, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_bwd: dx must not be NULL");
    CHECK_STATUS(cml_rmsnorm_bwd(ctx, y, NULL, x, NULL, NULL, r, 2, 4, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_rmsnorm_bwd: x must not be NULL");
    CHECK_STATUS(cml_rmsnorm_bwd(ctx, y, NULL, x, x, NULL, r, 2, 4, CML_U8), CML_ERR_DTYPE, "cml_rmsnorm_bwd: dtype=u8");
    CHECK_OK(cml_rmsnorm_fwd(ctx, NULL, NULL, NULL, NULL, 0, 4, 1e-5f, CML_F32)); /* empty */
    /* rows == 0: dgamma is a sum over no rows */
    float dg[4] = {1, 2, 3, 4};
    CHECK_OK(cml_rmsnorm_bwd(ctx, NULL, dg, NULL, NULL, NULL, NULL, 0, 4, CML_F32));
    for (int k = 0; k < 4; k++) CHECK(dg[k] == 0.0f);
    /* a CUDA context goes to the CUDA implementation, never to the CPU path */
    cml_ctx fake = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_rmsnorm_fwd(&fake, y, r, x, NULL, 2, 4, 1e-5f, CML_F32));
    KT_CHECK_CUDA_DISPATCH(cml_rmsnorm_bwd(&fake, y, NULL, x, x, NULL, r, 2, 4, CML_F32));
}

int main(void) {
    RUN(test_rmsnorm);
    RUN(test_known_values);
    RUN(test_optional_outputs);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
