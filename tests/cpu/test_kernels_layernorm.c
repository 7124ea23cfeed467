/* LayerNorm forward and backward against float64 references: shapes from 1x1
 * to multi-chunk rows, f32/bf16/f16, gamma/beta present or NULL, a large mean
 * offset (Welford), determinism across runs and thread counts, error paths. */
#include "kernel_test_util.h"

static const int64_t shapes[][2] = {{1, 1}, {7, 127}, {3, 1025}, {2, 2500}, {64, 768}, {300, 5}, {0, 4}};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

typedef struct ln_case {
    int64_t rows, C;
    cml_dtype dt;
    bool gamma, beta;
    float lo, hi; /* range of x */
} ln_case;

static void run_case(ln_case c, cml_rng *rng) {
    int64_t rows = c.rows, C = c.C, n = rows * C;
    cml_dtype dt = c.dt;
    cml_layout l = kt_layout(1, &n), lc = kt_layout(1, &C);
    kt_view x = kt_view_alloc(l, dt), y = kt_view_alloc(l, dt), dy = kt_view_alloc(l, dt), dx = kt_view_alloc(l, dt);
    kt_view g = kt_view_alloc(lc, dt), be = kt_view_alloc(lc, dt), dg = kt_view_alloc(lc, dt), db = kt_view_alloc(lc, dt);
    kt_fill_uniform(&x, c.lo, c.hi, rng);
    kt_fill_uniform(&dy, -1, 1, rng);
    kt_fill_uniform(&g, 0.5f, 1.5f, rng);
    kt_fill_uniform(&be, -1, 1, rng);
    float *mean = kt_malloc((size_t)(rows + 1) * 4), *rstd = kt_malloc((size_t)(rows + 1) * 4);
    th_poison(mean, (size_t)(rows + 1) * 4);
    th_poison(rstd, (size_t)(rows + 1) * 4);
    const float eps = 1e-5f;
    const void *gp = c.gamma ? g.data : NULL, *bp = c.beta ? be.data : NULL;
    CHECK_OK(cml_layernorm_fwd(kt_ctx(), y.data, mean, rstd, x.data, gp, bp, rows, C, eps, dt));
    CHECK_OK(cml_layernorm_bwd(kt_ctx(), dx.data, dg.data, db.data, dy.data, x.data, gp, mean, rstd, rows, C, dt));

    double *yr = kt_malloc((size_t)(n + 1) * 8), *dxr = kt_malloc((size_t)(n + 1) * 8);
    double *mr = kt_malloc((size_t)(rows + 1) * 8), *rr = kt_malloc((size_t)(rows + 1) * 8);
    double *dgr = kt_malloc((size_t)C * 8), *dbr = kt_malloc((size_t)C * 8);
    float *yo = kt_malloc((size_t)(n + 1) * 4), *dxo = kt_malloc((size_t)(n + 1) * 4);
    float *dgo = kt_malloc((size_t)C * 4), *dbo = kt_malloc((size_t)C * 4);
    for (int64_t k = 0; k < C; k++) dgr[k] = dbr[k] = 0;
    for (int64_t r = 0; r < rows; r++) {
        double s = 0, v = 0, sg = 0, sgx = 0;
        for (int64_t k = 0; k < C; k++) s += kt_get(&x, r * C + k);
        double m = s / (double)C;
        for (int64_t k = 0; k < C; k++) v += (kt_get(&x, r * C + k) - m) * (kt_get(&x, r * C + k) - m);
        double rs = 1.0 / sqrt(v / (double)C + (double)eps);
        mr[r] = m;
        rr[r] = rs;
        for (int64_t k = 0; k < C; k++) {
            double xh = (kt_get(&x, r * C + k) - m) * rs, gk = c.gamma ? kt_get(&g, k) : 1.0;
            double gy = kt_get(&dy, r * C + k) * gk;
            yr[r * C + k] = xh * gk + (c.beta ? kt_get(&be, k) : 0.0);
            sg += gy;
            sgx += gy * xh;
            dgr[k] += kt_get(&dy, r * C + k) * xh;
            dbr[k] += kt_get(&dy, r * C + k);
        }
        for (int64_t k = 0; k < C; k++) {
            double xh = (kt_get(&x, r * C + k) - m) * rs, gk = c.gamma ? kt_get(&g, k) : 1.0;
            dxr[r * C + k] = rs * (kt_get(&dy, r * C + k) * gk - sg / (double)C - xh * sgx / (double)C);
        }
    }
    for (int64_t k = 0; k < n; k++) {
        yo[k] = (float)kt_get(&y, k);
        dxo[k] = (float)kt_get(&dx, k);
    }
    for (int64_t k = 0; k < C; k++) {
        dgo[k] = (float)kt_get(&dg, k);
        dbo[k] = (float)kt_get(&db, k);
    }
    /* A mean far from 0 loses digits in (x - mean) with an f32 mean: looser there. */
    double tol = kt_tol(dt) * (fabs((double)c.lo) > 100 ? 100 : 1);
    const char *dn = cml_dtype_name(dt);
    KT_CHECK_CLOSE(yo, yr, n, tol, "layernorm y (%lld, %lld) %s g=%d b=%d", (long long)rows, (long long)C, dn,
                   c.gamma, c.beta);
    KT_CHECK_CLOSE(mean, mr, rows, 1e-6, "layernorm mean (%lld, %lld) %s", (long long)rows, (long long)C, dn);
    KT_CHECK_CLOSE(rstd, rr, rows, 1e-5, "layernorm rstd (%lld, %lld) %s", (long long)rows, (long long)C, dn);
    if (C > 1)
        KT_CHECK_CLOSE(dxo, dxr, n, 2 * tol, "layernorm dx (%lld, %lld) %s g=%d", (long long)rows, (long long)C, dn,
                       c.gamma);
    else /* one column: x - mean = 0, dx is exactly 0 */
        for (int64_t k = 0; k < n; k++) CHECK(dxo[k] == 0);
    KT_CHECK_CLOSE(dgo, dgr, C, 2 * tol, "layernorm dgamma (%lld, %lld) %s", (long long)rows, (long long)C, dn);
    KT_CHECK_CLOSE(dbo, dbr, C, tol, "layernorm dbeta (%lld, %lld) %s", (long long)rows, (long long)C, dn);
    free(yr), free(dxr), free(mr), free(rr), free(dgr), free(dbr);
    free(yo), free(dxo), free(dgo), free(dbo), free(mean), free(rstd);
    kt_view *vs[] = {&x, &y, &dy, &dx, &g, &be, &dg, &db};
    for (int k = 0; k < 8; k++) kt_view_free(vs[k]);
}

static void test_layernorm(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 40);
    for (int s = 0; s < NSHAPES; s++) {
        ln_case c = {shapes[s][0], shapes[s][1], CML_F32, true, true, -2, 3};
        run_case(c, &rng);
        c.dt = CML_BF16;
        run_case(c, &rng);
    }
    run_case((ln_case){7, 127, CML_F16, true, true, -2, 3}, &rng);
    run_case((ln_case){7, 127, CML_F32, false, false, -2, 3}, &rng);
    run_case((ln_case){7, 127, CML_F32, true, false, -2, 3}, &rng);
    run_case((ln_case){7, 127, CML_F32, false, true, -2, 3}, &rng);
    run_case((ln_case){5, 300, CML_F32, true, true, 1000, 1001}, &rng); /* Welford: large mean, small variance */
    run_case((ln_case){3, 1025, CML_BF16, false, true, -2, 3}, &rng);
}

/* NULL outputs are allowed for mean/rstd (forward) and dgamma/dbeta (backward). */
static void test_optional_outputs(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 41);
    float x[24], y1[24], y2[24], dy[24], dx1[24], dx2[24], g[8], m[3], r[3], dg[8];
    th_fill_uniform(x, 24, -1, 1, &rng);
    th_fill_uniform(dy, 24, -1, 1, &rng);
    th_fill_uniform(g, 8, 0.5f, 1.5f, &rng);
    CHECK_OK(cml_layernorm_fwd(kt_ctx(), y1, m, r, x, g, NULL, 3, 8, 1e-5f, CML_F32));
    CHECK_OK(cml_layernorm_fwd(kt_ctx(), y2, NULL, NULL, x, g, NULL, 3, 8, 1e-5f, CML_F32));
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
    CHECK_OK(cml_layernorm_bwd(kt_ctx(), dx1, dg, NULL, dy, x, g, m, r, 3, 8, CML_F32));
    CHECK_OK(cml_layernorm_bwd(kt_ctx(), dx2, NULL, NULL, dy, x, g, m, r, 3, 8, CML_F32));
    CHECK(memcmp(dx1, dx2, sizeof dx1) == 0);
    /* dx may alias dy */
    memcpy(dx2, dy, sizeof dy);
    CHECK_OK(cml_layernorm_bwd(kt_ctx(), dx2, dg, NULL, dx2, x, g, m, r, 3, 8, CML_F32));
    CHECK(memcmp(dx1, dx2, sizeof dx1) == 0);
}

/* Repeated runs, and runs with 1 and 2 threads, are bitwise identical. */
static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 42);
    const int64_t rows = 257, C = 300, n = rows * C;
    float *x = kt_malloc((size_t)n * 4), *dy = kt_malloc((size_t)n * 4), *g = kt_malloc((size_t)C * 4);
    float *b = kt_malloc((size_t)C * 4), *m = kt_malloc((size_t)rows * 4), *r = kt_malloc((size_t)rows * 4);
    float *out[2][4];
    th_fill_uniform(x, n, -3, 3, &rng);
    th_fill_uniform(dy, n, -1, 1, &rng);
    th_fill_uniform(g, C, 0.5f, 1.5f, &rng);
    th_fill_uniform(b, C, -1, 1, &rng);
    int threads = cml_cpu_threads();
    for (int run = 0; run < 2; run++) {
        cml_set_cpu_threads(run == 0 ? threads : 1);
        out[run][0] = kt_malloc((size_t)n * 4);
        out[run][1] = kt_malloc((size_t)n * 4);
        out[run][2] = kt_malloc((size_t)C * 4);
        out[run][3] = kt_malloc((size_t)C * 4);
        for (int k = 0; k < 4; k++) th_poison(out[run][k], (size_t)(k < 2 ? n : C) * 4);
        CHECK_OK(cml_layernorm_fwd(kt_ctx(), out[run][0], m, r, x, g, b, rows, C, 1e-5f, CML_F32));
        CHECK_OK(cml_layernorm_bwd(kt_ctx(), out[run][1], out[run][2], out[run][3], dy, x, g, m, r, rows, C, CML_F32));
    }
    cml_set_cpu_threads(threads);
    for (int k = 0; k < 4; k++) CHECK(memcmp(out[0][k], out[1][k], (size_t)(k < 2 ? n : C) * 4) == 0);
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 4; k++) free(out[run][k]);
    free(x), free(dy), free(g), free(b), free(m), free(r);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float x[8] = {0}, y[8], m[2], r[2];
    CHECK_STATUS(cml_layernorm_fwd(ctx, y, m, r, x, NULL, NULL, 2, 0, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_layernorm_fwd: C=0 must be >= 1");
    CHECK_STATUS(cml_layernorm_fwd(ctx, y, m, r, x, NULL, NULL, -1, 4, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_layernorm_fwd: rows=-1 must be >= 0");
    CHECK_STATUS(cml_layernorm_fwd(ctx, y, m, r, x, NULL, NULL, 2, 4, 1e-5f, CML_I32), CML_ERR_DTYPE,
                 "cml_layernorm_fwd: dtype=i32 must be a floating-point dtype");
    CHECK_STATUS(cml_layernorm_fwd(ctx, y, m, r, x, NULL, NULL, 2, 4, -1.0f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_layernorm_fwd: eps=-1 must be finite and >= 0");
    CHECK_STATUS(cml_layernorm_fwd(ctx, y, m, r, NULL, NULL, NULL, 2, 4, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_layernorm_fwd: x must not be NULL");
    CHECK_STATUS(cml_layernorm_fwd(NULL, y, m, r, x, NULL, NULL, 2, 4, 1e-5f, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_layernorm_fwd: ctx must not be NULL");
    CHECK_STATUS(cml_layernorm_bwd(ctx, y, NULL, NULL, x, x, NULL, NULL, r, 2, 4, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_layernorm_bwd: mean must not be NULL");
    CHECK_STATUS(cml_layernorm_bwd(ctx, NULL, NULL, NULL, x, x, NULL, m, r, 2, 4, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_layernorm_bwd: dx must not be NULL");
    CHECK_STATUS(cml_layernorm_bwd(ctx, y, NULL, NULL, x, x, NULL, m, r, 2, 4, CML_U8), CML_ERR_DTYPE,
                 "cml_layernorm_bwd: dtype=u8");
    CHECK_OK(cml_layernorm_fwd(ctx, NULL, NULL, NULL, NULL, NULL, NULL, 0, 4, 1e-5f, CML_F32)); /* empty */
}

int main(void) {
    RUN(test_layernorm);
    RUN(test_optional_outputs);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
