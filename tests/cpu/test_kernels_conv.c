/* Convolution, pooling and batch normalization kernels against float64
 * references written here (direct convolution, window scans, two-pass
 * statistics), in NCHW and NHWC; outputs poisoned before every run, repeated
 * runs (and runs with 1 and 2 threads) bitwise identical; error paths. */
#include "kernel_test_util.h"

/* ---- convolution ------------------------------------------------------------- */

typedef struct conv_case {
    int64_t N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, G;
} conv_case;

static const conv_case conv_cases[] = {
    {1, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},     /* N=1, padding */
    {2, 4, 13, 13, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1},   /* 1x1: the image is its own column matrix */
    {2, 4, 13, 7, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1},    /* 1x1, stride 2 */
    {3, 3, 13, 13, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1},   /* stride 2 */
    {2, 4, 13, 13, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1},   /* dilation 2 */
    {2, 4, 7, 13, 6, 3, 5, 1, 2, 1, 2, 1, 1, 2},    /* groups 2, rectangular kernel and strides */
    {2, 6, 13, 13, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},   /* depthwise */
    {2, 6, 9, 9, 6, 1, 1, 1, 1, 0, 0, 1, 1, 3},     /* 1x1 with groups */
    {2, 3, 5, 5, 4, 5, 5, 1, 1, 0, 0, 1, 1, 1},     /* kernel as large as the input: P = Q = 1 */
    {1, 2, 7, 7, 3, 3, 3, 3, 3, 2, 2, 1, 1, 1},     /* stride 3, padding 2 */
    {1, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 1, 1, 1},   /* LeNet conv1 */
    {11, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 1, 1, 1}, /* LeNet conv2, more images than filter chunks */
    {5, 8, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1, 4},    /* groups 4 */
};
#define N_CONV_CASES (int)(sizeof conv_cases / sizeof conv_cases[0])

static cml_conv2d_desc conv_desc(const conv_case *c, bool cl, cml_dtype dt) {
    cml_conv2d_desc d = {c->N, c->C, c->H, c->W, c->K, c->R, c->S, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw,
                         c->G, cl, dt};
    return d;
}

static int64_t x_at(const cml_conv2d_desc *d, int64_t n, int64_t c, int64_t h, int64_t w) {
    return d->channels_last ? ((n * d->H + h) * d->W + w) * d->C + c : ((n * d->C + c) * d->H + h) * d->W + w;
}
static int64_t w_at(const cml_conv2d_desc *d, int64_t k, int64_t c, int64_t r, int64_t s) {
    int64_t Cg = d->C / d->groups;
    return d->channels_last ? ((k * d->R + r) * d->S + s) * Cg + c : ((k * Cg + c) * d->R + r) * d->S + s;
}
static int64_t y_at(const cml_conv2d_desc *d, int64_t P, int64_t Q, int64_t n, int64_t k, int64_t p, int64_t q) {
    return d->channels_last ? ((n * P + p) * Q + q) * d->K + k : ((n * d->K + k) * P + p) * Q + q;
}

/* Direct convolution in float64: y (with bias), and from dy: dx, dw, dbias. */
static void conv_ref(const cml_conv2d_desc *d, int64_t P, int64_t Q, const double *x, const double *w,
                     const double *bias, const double *dy, double *y, double *dx, double *dw, double *db) {
    int64_t Cg = d->C / d->groups, Kg = d->K / d->groups;
    memset(dx, 0, sizeof(double) * (size_t)(d->N * d->C * d->H * d->W));
    memset(dw, 0, sizeof(double) * (size_t)(d->K * Cg * d->R * d->S));
    memset(db, 0, sizeof(double) * (size_t)d->K);
    for (int64_t n = 0; n < d->N; n++)
        for (int64_t k = 0; k < d->K; k++)
            for (int64_t p = 0; p < P; p++)
                for (int64_t q = 0; q < Q; q++) {
                    int64_t yi = y_at(d, P, Q, n, k, p, q);
                    double acc = bias[k], g = dy[yi];
                    db[k] += g;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t r = 0; r < d->R; r++)
                            for (int64_t s = 0; s < d->S; s++) {
                                int64_t ih = p * d->stride_h - d->pad_h + r * d->dil_h;
                                int64_t iw = q * d->stride_w - d->pad_w + s * d->dil_w;
                                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                                int64_t xi = x_at(d, n, (k / Kg) * Cg + c, ih, iw), wi = w_at(d, k, c, r, s);
                                acc += x[xi] * w[wi];
                                dx[xi] += w[wi] * g;
                                dw[wi] += x[xi] * g;
                            }
                    y[yi] = acc;
                }
}

static double *to_double(const kt_view *v, int64_t n) {
    double *r = kt_malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) r[i] = kt_get(v, i);
    return r;
}

static float *to_float(const kt_view *v, int64_t n) {
    float *r = kt_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) r[i] = (float)kt_get(v, i);
    return r;
}

/* Runs all three kernels twice (poisoned outputs in between) and compares. */
static void run_conv(const conv_case *cc, bool cl, cml_dtype dt, cml_rng *rng) {
    cml_conv2d_desc d = conv_desc(cc, cl, dt);
    int64_t P = -1, Q = -1;
    CHECK_OK(cml_conv2d_output_size(&d, &P, &Q));
    int64_t Cg = d.C / d.groups;
    int64_t nx = d.N * d.C * d.H * d.W, nw = d.K * Cg * d.R * d.S, ny = d.N * d.K * P * Q;
    kt_view x = kt_view_alloc(kt_layout(1, &nx), dt), w = kt_view_alloc(kt_layout(1, &nw), dt);
    kt_view b = kt_view_alloc(kt_layout(1, &d.K), dt), dy = kt_view_alloc(kt_layout(1, &ny), dt);
    kt_view y = kt_view_alloc(kt_layout(1, &ny), dt), dx = kt_view_alloc(kt_layout(1, &nx), dt);
    kt_view dw = kt_view_alloc(kt_layout(1, &nw), dt), db = kt_view_alloc(kt_layout(1, &d.K), dt);
    kt_fill_uniform(&x, -1, 1, rng);
    kt_fill_uniform(&w, -1, 1, rng);
    kt_fill_uniform(&b, -1, 1, rng);
    kt_fill_uniform(&dy, -1, 1, rng);
    double *xr = to_double(&x, nx), *wr = to_double(&w, nw), *br = to_double(&b, d.K), *dyr = to_double(&dy, ny);
    double *yref = kt_malloc((size_t)ny * 8), *dxref = kt_malloc((size_t)nx * 8), *dwref = kt_malloc((size_t)nw * 8);
    double *dbref = kt_malloc((size_t)d.K * 8);
    conv_ref(&d, P, Q, xr, wr, br, dyr, yref, dxref, dwref, dbref);
    size_t es = cml_dtype_size(dt);
    void *first[4] = {kt_malloc((size_t)ny * es), kt_malloc((size_t)nx * es), kt_malloc((size_t)nw * es),
                      kt_malloc((size_t)d.K * es)};
    char what[200];
    snprintf(what, sizeof what, "conv N=%lld C=%lld H=%lld W=%lld K=%lld R=%lld S=%lld stride=%lld,%lld pad=%lld,%lld "
             "dil=%lld,%lld groups=%lld %s %s", (long long)d.N, (long long)d.C, (long long)d.H, (long long)d.W,
             (long long)d.K, (long long)d.R, (long long)d.S, (long long)d.stride_h, (long long)d.stride_w,
             (long long)d.pad_h, (long long)d.pad_w, (long long)d.dil_h, (long long)d.dil_w, (long long)d.groups,
             cl ? "NHWC" : "NCHW", cml_dtype_name(dt));
    for (int run = 0; run < 2; run++) {
        th_poison(y.data, (size_t)ny * es);
        th_poison(dx.data, (size_t)nx * es);
        th_poison(dw.data, (size_t)nw * es);
        th_poison(db.data, (size_t)d.K * es);
        CHECK_OK(cml_conv2d_fwd(kt_ctx(), &d, y.data, x.data, w.data, b.data));
        CHECK_OK(cml_conv2d_bwd_data(kt_ctx(), &d, dx.data, dy.data, w.data));
        CHECK_OK(cml_conv2d_bwd_filter(kt_ctx(), &d, dw.data, db.data, dy.data, x.data));
        if (run == 0) {
            double tol = dt == CML_F32 ? 1e-5 : kt_tol(dt);
            float *o;
            o = to_float(&y, ny);
            KT_CHECK_CLOSE(o, yref, ny, tol, "fwd %s", what);
            free(o);
            o = to_float(&dx, nx);
            KT_CHECK_CLOSE(o, dxref, nx, tol, "bwd_data %s", what);
            free(o);
            o = to_float(&dw, nw);
            KT_CHECK_CLOSE(o, dwref, nw, tol, "bwd_filter dw %s", what);
            free(o);
            o = to_float(&db, d.K);
            KT_CHECK_CLOSE(o, dbref, d.K, tol, "bwd_filter dbias %s", what);
            free(o);
            memcpy(first[0], y.data, (size_t)ny * es);
            memcpy(first[1], dx.data, (size_t)nx * es);
            memcpy(first[2], dw.data, (size_t)nw * es);
            memcpy(first[3], db.data, (size_t)d.K * es);
        } else {
            CHECK_MSG(memcmp(first[0], y.data, (size_t)ny * es) == 0, "fwd not repeatable: %s", what);
            CHECK_MSG(memcmp(first[1], dx.data, (size_t)nx * es) == 0, "bwd_data not repeatable: %s", what);
            CHECK_MSG(memcmp(first[2], dw.data, (size_t)nw * es) == 0, "bwd_filter not repeatable: %s", what);
            CHECK_MSG(memcmp(first[3], db.data, (size_t)d.K * es) == 0, "dbias not repeatable: %s", what);
        }
    }
    /* no bias: y is the product alone; no dbias requested */
    th_poison(y.data, (size_t)ny * es);
    CHECK_OK(cml_conv2d_fwd(kt_ctx(), &d, y.data, x.data, w.data, NULL));
    CHECK_OK(cml_conv2d_bwd_filter(kt_ctx(), &d, dw.data, NULL, dy.data, x.data));
    float *o = to_float(&y, ny);
    for (int64_t i = 0; i < ny; i++) yref[i] -= br[cl ? i % d.K : (i / (P * Q)) % d.K];
    KT_CHECK_CLOSE(o, yref, ny, dt == CML_F32 ? 1e-5 : kt_tol(dt), "fwd without bias %s", what);
    free(o);
    for (int i = 0; i < 4; i++) free(first[i]);
    free(xr), free(wr), free(br), free(dyr), free(yref), free(dxref), free(dwref), free(dbref);
    kt_view *views[] = {&x, &w, &b, &dy, &y, &dx, &dw, &db};
    for (int i = 0; i < 8; i++) kt_view_free(views[i]);
}

static void test_conv(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 70);
    for (int i = 0; i < N_CONV_CASES; i++)
        for (int cl = 0; cl < 2; cl++) run_conv(&conv_cases[i], cl, CML_F32, &rng);
    run_conv(&conv_cases[5], false, CML_BF16, &rng);
    run_conv(&conv_cases[6], true, CML_F16, &rng);
}

/* The same results with one thread and with the default count. */
static void test_conv_threads(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 71);
    int threads = cml_cpu_threads();
    conv_case cc = {13, 8, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    for (int cl = 0; cl < 2; cl++) {
        cml_conv2d_desc d = conv_desc(&cc, cl, CML_F32);
        int64_t P, Q;
        CHECK_OK(cml_conv2d_output_size(&d, &P, &Q));
        int64_t nx = d.N * d.C * d.H * d.W, nw = d.K * d.C * 9, ny = d.N * d.K * P * Q;
        float *x = kt_malloc((size_t)nx * 4), *w = kt_malloc((size_t)nw * 4), *dy = kt_malloc((size_t)ny * 4);
        th_fill_uniform(x, nx, -1, 1, &rng);
        th_fill_uniform(w, nw, -1, 1, &rng);
        th_fill_uniform(dy, ny, -1, 1, &rng);
        float *out[2][3];
        for (int run = 0; run < 2; run++) {
            cml_set_cpu_threads(run == 0 ? threads : 1);
            out[run][0] = kt_malloc((size_t)ny * 4);
            out[run][1] = kt_malloc((size_t)nx * 4);
            out[run][2] = kt_malloc((size_t)nw * 4);
            th_poison(out[run][0], (size_t)ny * 4);
            th_poison(out[run][1], (size_t)nx * 4);
            th_poison(out[run][2], (size_t)nw * 4);
            CHECK_OK(cml_conv2d_fwd(kt_ctx(), &d, out[run][0], x, w, NULL));
            CHECK_OK(cml_conv2d_bwd_data(kt_ctx(), &d, out[run][1], dy, w));
            CHECK_OK(cml_conv2d_bwd_filter(kt_ctx(), &d, out[run][2], NULL, dy, x));
        }
        cml_set_cpu_threads(threads);
        CHECK_MSG(memcmp(out[0][0], out[1][0], (size_t)ny * 4) == 0, "fwd differs between %d and 1 threads", threads);
        CHECK_MSG(memcmp(out[0][1], out[1][1], (size_t)nx * 4) == 0, "bwd_data differs between %d and 1 threads",
                  threads);
        CHECK_MSG(memcmp(out[0][2], out[1][2], (size_t)nw * 4) == 0, "bwd_filter differs between %d and 1 threads",
                  threads);
        for (int run = 0; run < 2; run++)
            for (int i = 0; i < 3; i++) free(out[run][i]);
        free(x), free(w), free(dy);
    }
}

/* ---- pooling ------------------------------------------------------------------- */

typedef struct pool_case {
    int64_t N, C, H, W, R, S, sh, sw, ph, pw;
} pool_case;

static const pool_case pool_cases[] = {
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0},   /* the common 2x2 / 2 */
    {1, 2, 7, 7, 3, 3, 2, 2, 1, 1},   /* overlapping windows with padding, N=1, odd size */
    {2, 4, 13, 13, 3, 3, 1, 1, 1, 1}, /* stride 1: heavy overlap */
    {3, 5, 13, 7, 3, 2, 2, 1, 1, 0},  /* rectangular */
    {2, 3, 5, 5, 5, 5, 1, 1, 2, 2},   /* large window and pad */
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0},   /* trivial */
    {4, 16, 16, 16, 2, 2, 2, 2, 0, 0} /* parallel */
};
#define N_POOL_CASES (int)(sizeof pool_cases / sizeof pool_cases[0])

static void run_pool(const pool_case *pc, cml_pool_mode mode, bool cl, cml_dtype dt, cml_rng *rng) {
    cml_pool2d_desc d = {pc->N, pc->C, pc->H, pc->W, pc->R, pc->S, pc->sh, pc->sw, pc->ph, pc->pw, mode, cl, dt};
    int64_t P = -1, Q = -1;
    CHECK_OK(cml_pool2d_output_size(&d, &P, &Q));
    int64_t nx = d.N * d.C * d.H * d.W, ny = d.N * d.C * P * Q;
    kt_view x = kt_view_alloc(kt_layout(1, &nx), dt), y = kt_view_alloc(kt_layout(1, &ny), dt);
    kt_view dy = kt_view_alloc(kt_layout(1, &ny), dt), dx = kt_view_alloc(kt_layout(1, &nx), dt);
    kt_fill_uniform(&x, -1, 1, rng);
    kt_fill_uniform(&dy, -1, 1, rng);
    if (nx > 4) { /* a tie: the first maximum wins */
        cml_dtype_store(x.data, dt, 1, 5.0f);
        cml_dtype_store(x.data, dt, 0, 5.0f);
    }
    int64_t *idx = kt_malloc((size_t)ny * 8), *idx_ref = kt_malloc((size_t)ny * 8);
    double *yref = kt_malloc((size_t)ny * 8), *dxref = kt_malloc((size_t)nx * 8);
    memset(dxref, 0, (size_t)nx * 8);
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t p = 0; p < P; p++)
                for (int64_t q = 0; q < Q; q++) {
                    int64_t yi = cl ? ((n * P + p) * Q + q) * d.C + c : ((n * d.C + c) * P + p) * Q + q;
                    double best = -INFINITY, sum = 0;
                    int64_t bi = -1;
                    for (int64_t r = 0; r < d.R; r++)
                        for (int64_t s = 0; s < d.S; s++) {
                            int64_t h = p * d.stride_h - d.pad_h + r, w = q * d.stride_w - d.pad_w + s;
                            if (h < 0 || h >= d.H || w < 0 || w >= d.W) continue;
                            int64_t xi = cl ? ((n * d.H + h) * d.W + w) * d.C + c : ((n * d.C + c) * d.H + h) * d.W + w;
                            double v = kt_get(&x, xi);
                            sum += v;
                            if (v > best) {
                                best = v;
                                bi = h * d.W + w;
                            }
                        }
                    yref[yi] = mode == CML_POOL_MAX ? best : sum / (double)(d.R * d.S);
                    idx_ref[yi] = bi;
                    double g = kt_get(&dy, yi);
                    for (int64_t r = 0; r < d.R; r++)
                        for (int64_t s = 0; s < d.S; s++) {
                            int64_t h = p * d.stride_h - d.pad_h + r, w = q * d.stride_w - d.pad_w + s;
                            if (h < 0 || h >= d.H || w < 0 || w >= d.W) continue;
                            if (mode == CML_POOL_MAX && h * d.W + w != bi) continue;
                            int64_t xi = cl ? ((n * d.H + h) * d.W + w) * d.C + c : ((n * d.C + c) * d.H + h) * d.W + w;
                            dxref[xi] += mode == CML_POOL_MAX ? g : g / (double)(d.R * d.S);
                        }
                }
    char what[160];
    snprintf(what, sizeof what, "%s pool N=%lld C=%lld H=%lld W=%lld R=%lld S=%lld stride=%lld,%lld pad=%lld,%lld %s %s",
             mode == CML_POOL_MAX ? "max" : "avg", (long long)d.N, (long long)d.C, (long long)d.H, (long long)d.W,
             (long long)d.R, (long long)d.S, (long long)d.stride_h, (long long)d.stride_w, (long long)d.pad_h,
             (long long)d.pad_w, cl ? "NHWC" : "NCHW", cml_dtype_name(dt));
    size_t es = cml_dtype_size(dt);
    void *y1 = kt_malloc((size_t)ny * es), *dx1 = kt_malloc((size_t)nx * es);
    for (int run = 0; run < 2; run++) {
        th_poison(y.data, (size_t)ny * es);
        th_poison(dx.data, (size_t)nx * es);
        th_poison(idx, (size_t)ny * 8);
        CHECK_OK(cml_pool2d_fwd(kt_ctx(), &d, y.data, mode == CML_POOL_MAX ? idx : NULL, x.data));
        CHECK_OK(cml_pool2d_bwd(kt_ctx(), &d, dx.data, dy.data, mode == CML_POOL_MAX ? idx : NULL));
        if (run == 0) {
            float *o = to_float(&y, ny);
            KT_CHECK_CLOSE(o, yref, ny, kt_tol(dt), "fwd %s", what);
            free(o);
            o = to_float(&dx, nx);
            KT_CHECK_CLOSE(o, dxref, nx, kt_tol(dt), "bwd %s", what);
            free(o);
            if (mode == CML_POOL_MAX && dt == CML_F32)
                CHECK_MSG(memcmp(idx, idx_ref, (size_t)ny * 8) == 0, "indices differ: %s", what);
            memcpy(y1, y.data, (size_t)ny * es);
            memcpy(dx1, dx.data, (size_t)nx * es);
        } else {
            CHECK_MSG(memcmp(y1, y.data, (size_t)ny * es) == 0 && memcmp(dx1, dx.data, (size_t)nx * es) == 0,
                      "not repeatable: %s", what);
        }
    }
    if (mode == CML_POOL_MAX) { /* indices are optional in the forward */
        th_poison(y.data, (size_t)ny * es);
        CHECK_OK(cml_pool2d_fwd(kt_ctx(), &d, y.data, NULL, x.data));
        CHECK(memcmp(y1, y.data, (size_t)ny * es) == 0);
    }
    free(y1), free(dx1), free(idx), free(idx_ref), free(yref), free(dxref);
    kt_view_free(&x), kt_view_free(&y), kt_view_free(&dy), kt_view_free(&dx);
}

static void test_pool(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 72);
    for (int i = 0; i < N_POOL_CASES; i++)
        for (int mode = 0; mode < 2; mode++)
            for (int cl = 0; cl < 2; cl++) run_pool(&pool_cases[i], (cml_pool_mode)mode, cl, CML_F32, &rng);
    run_pool(&pool_cases[1], CML_POOL_AVG, true, CML_BF16, &rng);
    run_pool(&pool_cases[2], CML_POOL_MAX, false, CML_F16, &rng);
}

static void test_pool_nan(void) {
    float x[4] = {1, NAN, 3, 2}, y[1], dx[4], dy[1] = {1};
    int64_t idx[1];
    cml_pool2d_desc d = {1, 1, 2, 2, 2, 2, 2, 2, 0, 0, CML_POOL_MAX, false, CML_F32};
    CHECK_OK(cml_pool2d_fwd(kt_ctx(), &d, y, idx, x));
    CHECK(isnan(y[0]) && idx[0] == 1); /* NaN propagates, as in PyTorch */
    CHECK_OK(cml_pool2d_bwd(kt_ctx(), &d, dx, dy, idx));
    CHECK(dx[0] == 0 && dx[1] == 1 && dx[2] == 0 && dx[3] == 0);
}

/* ---- batch normalization ----------------------------------------------------------- */

static void run_batchnorm(int64_t N, int64_t C, int64_t HW, bool cl, cml_dtype dt, bool affine, cml_rng *rng) {
    int64_t n = N * C * HW;
    kt_view x = kt_view_alloc(kt_layout(1, &n), dt), y = kt_view_alloc(kt_layout(1, &n), dt);
    kt_view dy = kt_view_alloc(kt_layout(1, &n), dt), dx = kt_view_alloc(kt_layout(1, &n), dt);
    kt_fill_uniform(&x, -2, 3, rng);
    kt_fill_uniform(&dy, -1, 1, rng);
    float *gamma = kt_malloc((size_t)C * 4), *beta = kt_malloc((size_t)C * 4), *rm = kt_malloc((size_t)C * 4);
    float *rv = kt_malloc((size_t)C * 4), *smean = kt_malloc((size_t)C * 4), *srstd = kt_malloc((size_t)C * 4);
    float *dg = kt_malloc((size_t)C * 4), *dbt = kt_malloc((size_t)C * 4);
    th_fill_uniform(gamma, C, 0.5f, 1.5f, rng);
    th_fill_uniform(beta, C, -1, 1, rng);
    th_fill_uniform(rm, C, -0.5f, 0.5f, rng);
    th_fill_uniform(rv, C, 0.5f, 2.0f, rng);
    double *yref = kt_malloc((size_t)n * 8), *dxref = kt_malloc((size_t)n * 8), *yeval = kt_malloc((size_t)n * 8);
    double *rm_ref = kt_malloc((size_t)C * 8), *rv_ref = kt_malloc((size_t)C * 8), *dg_ref = kt_malloc((size_t)C * 8);
    double *db_ref = kt_malloc((size_t)C * 8), *mean_ref = kt_malloc((size_t)C * 8), *rstd_ref = kt_malloc((size_t)C * 8);
    const float eps = 1e-5f, mom = 0.1f;
    double M = (double)(N * HW);
    for (int64_t c = 0; c < C; c++) {
        double s = 0, ss = 0, sdy = 0, sdyx = 0;
        for (int64_t i = 0; i < N * HW; i++) {
            int64_t e = cl ? i * C + c : ((i / HW) * C + c) * HW + i % HW;
            s += kt_get(&x, e);
        }
        double mean = s / M;
        for (int64_t i = 0; i < N * HW; i++) {
            int64_t e = cl ? i * C + c : ((i / HW) * C + c) * HW + i % HW;
            ss += (kt_get(&x, e) - mean) * (kt_get(&x, e) - mean);
        }
        double var = ss / M, rstd = 1 / sqrt(var + eps), gm = affine ? gamma[c] : 1, bt = affine ? beta[c] : 0;
        double erstd = 1 / sqrt((double)rv[c] + eps);
        for (int64_t i = 0; i < N * HW; i++) {
            int64_t e = cl ? i * C + c : ((i / HW) * C + c) * HW + i % HW;
            double xh = (kt_get(&x, e) - mean) * rstd;
            yref[e] = xh * gm + bt;
            yeval[e] = (kt_get(&x, e) - rm[c]) * erstd * gm + bt;
            sdy += kt_get(&dy, e);
            sdyx += kt_get(&dy, e) * xh;
        }
        for (int64_t i = 0; i < N * HW; i++) {
            int64_t e = cl ? i * C + c : ((i / HW) * C + c) * HW + i % HW;
            double xh = (kt_get(&x, e) - mean) * rstd;
            dxref[e] = gm * rstd / M * (M * kt_get(&dy, e) - sdy - xh * sdyx);
        }
        mean_ref[c] = mean;
        rstd_ref[c] = rstd;
        rm_ref[c] = (1 - mom) * rm[c] + mom * mean;
        rv_ref[c] = (1 - mom) * rv[c] + mom * var * M / (M - 1);
        dg_ref[c] = sdyx;
        db_ref[c] = sdy;
    }
    char what[120];
    snprintf(what, sizeof what, "batchnorm N=%lld C=%lld HW=%lld %s %s%s", (long long)N, (long long)C, (long long)HW,
             cl ? "NHWC" : "NCHW", cml_dtype_name(dt), affine ? "" : " (no gamma/beta)");
    const float *g = affine ? gamma : NULL, *bt = affine ? beta : NULL;
    double tol = kt_tol(dt);
    /* eval first (it must leave the running stats alone) */
    float *rm0 = kt_malloc((size_t)C * 4), *rv0 = kt_malloc((size_t)C * 4);
    memcpy(rm0, rm, (size_t)C * 4);
    memcpy(rv0, rv, (size_t)C * 4);
    th_poison(y.data, (size_t)n * cml_dtype_size(dt));
    CHECK_OK(cml_batchnorm_fwd(kt_ctx(), y.data, NULL, NULL, rm, rv, x.data, g, bt, N, C, HW, cl, false, mom, eps, dt));
    float *o = to_float(&y, n);
    KT_CHECK_CLOSE(o, yeval, n, tol, "eval fwd %s", what);
    free(o);
    CHECK(memcmp(rm0, rm, (size_t)C * 4) == 0 && memcmp(rv0, rv, (size_t)C * 4) == 0);
    size_t nb = (size_t)n * cml_dtype_size(dt);
    void *y1 = kt_malloc(nb), *dx1 = kt_malloc(nb);
    for (int run = 0; run < 2; run++) {
        memcpy(rm, rm0, (size_t)C * 4);
        memcpy(rv, rv0, (size_t)C * 4);
        th_poison(y.data, nb);
        th_poison(dx.data, nb);
        th_poison(smean, (size_t)C * 4);
        th_poison(srstd, (size_t)C * 4);
        th_poison(dg, (size_t)C * 4);
        th_poison(dbt, (size_t)C * 4);
        CHECK_OK(cml_batchnorm_fwd(kt_ctx(), y.data, smean, srstd, rm, rv, x.data, g, bt, N, C, HW, cl, true, mom, eps,
                                   dt));
        CHECK_OK(cml_batchnorm_bwd(kt_ctx(), dx.data, dg, dbt, dy.data, x.data, g, smean, srstd, N, C, HW, cl, dt));
        if (run == 0) {
            o = to_float(&y, n);
            KT_CHECK_CLOSE(o, yref, n, tol, "train fwd %s", what);
            free(o);
            o = to_float(&dx, n);
            KT_CHECK_CLOSE(o, dxref, n, tol * 2, "bwd dx %s", what);
            free(o);
            KT_CHECK_CLOSE(smean, mean_ref, C, 1e-6, "save_mean %s", what);
            KT_CHECK_CLOSE(srstd, rstd_ref, C, dt == CML_F32 ? 1e-6 : tol, "save_rstd %s", what);
            KT_CHECK_CLOSE(rm, rm_ref, C, 1e-6, "running_mean %s", what);
            KT_CHECK_CLOSE(rv, rv_ref, C, dt == CML_F32 ? 1e-6 : tol, "running_var %s", what);
            KT_CHECK_CLOSE(dg, dg_ref, C, tol, "dgamma %s", what);
            KT_CHECK_CLOSE(dbt, db_ref, C, tol, "dbeta %s", what);
            memcpy(y1, y.data, nb);
            memcpy(dx1, dx.data, nb);
        } else {
            CHECK_MSG(memcmp(y1, y.data, nb) == 0 && memcmp(dx1, dx.data, nb) == 0, "not repeatable: %s", what);
        }
    }
    /* training without running stats and without dgamma/dbeta */
    CHECK_OK(cml_batchnorm_fwd(kt_ctx(), y.data, smean, srstd, NULL, NULL, x.data, g, bt, N, C, HW, cl, true, mom, eps,
                               dt));
    CHECK_OK(cml_batchnorm_bwd(kt_ctx(), dx.data, NULL, NULL, dy.data, x.data, g, smean, srstd, N, C, HW, cl, dt));
    CHECK(memcmp(y1, y.data, nb) == 0 && memcmp(dx1, dx.data, nb) == 0);
    free(y1), free(dx1), free(rm0), free(rv0);
    free(gamma), free(beta), free(rm), free(rv), free(smean), free(srstd), free(dg), free(dbt);
    free(yref), free(dxref), free(yeval), free(rm_ref), free(rv_ref), free(dg_ref), free(db_ref), free(mean_ref),
        free(rstd_ref);
    kt_view_free(&x), kt_view_free(&y), kt_view_free(&dy), kt_view_free(&dx);
}

static void test_batchnorm(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 73);
    static const int64_t sizes[][3] = {{2, 3, 7}, {1, 5, 13}, {4, 1, 1}, {8, 37, 49}, {16, 64, 64}, {3, 17, 2}};
    for (int i = 0; i < 6; i++)
        for (int cl = 0; cl < 2; cl++)
            for (int affine = 0; affine < 2; affine++)
                run_batchnorm(sizes[i][0], sizes[i][1], sizes[i][2], cl, CML_F32, affine, &rng);
    run_batchnorm(4, 6, 25, false, CML_BF16, true, &rng);
    run_batchnorm(4, 6, 25, true, CML_F16, true, &rng);
}

/* ---- errors ------------------------------------------------------------------------- */

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float buf[4096];
    int64_t idx[64], P, Q;
    cml_conv2d_desc d = {2, 4, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, CML_F32};
    cml_conv2d_desc e = d;
    e.groups = 3;
    CHECK_STATUS(cml_conv2d_output_size(&e, &P, &Q), CML_ERR_SHAPE, "cml_conv2d_output_size: C=4 must be a multiple of groups=3");
    e = d, e.groups = 4;
    CHECK_STATUS(cml_conv2d_fwd(ctx, &e, buf, buf, buf, NULL), CML_ERR_SHAPE, "cml_conv2d_fwd: K=6 must be a multiple of groups=4");
    e = d, e.stride_h = 0;
    CHECK_STATUS(cml_conv2d_fwd(ctx, &e, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_conv2d_fwd: stride_h=0 must be >= 1");
    e = d, e.dil_w = 0;
    CHECK_STATUS(cml_conv2d_bwd_data(ctx, &e, buf, buf, buf), CML_ERR_INVALID_ARG, "cml_conv2d_bwd_data: dil_w=0 must be >= 1");
    e = d, e.pad_h = -1;
    CHECK_STATUS(cml_conv2d_bwd_filter(ctx, &e, buf, NULL, buf, buf), CML_ERR_INVALID_ARG,
                 "cml_conv2d_bwd_filter: pad_h=-1 must be >= 0");
    e = d, e.R = 11;
    CHECK_STATUS(cml_conv2d_output_size(&e, &P, &Q), CML_ERR_SHAPE,
                 "dilated kernel height dil_h*(R-1)+1=11 exceeds the padded input height H+2*pad_h=10");
    e = d, e.dtype = CML_I32;
    CHECK_STATUS(cml_conv2d_fwd(ctx, &e, buf, buf, buf, NULL), CML_ERR_DTYPE, "cml_conv2d_fwd: dtype=i32 must be a floating-point");
    CHECK_STATUS(cml_conv2d_fwd(ctx, &d, buf, NULL, buf, NULL), CML_ERR_INVALID_ARG, "cml_conv2d_fwd: x must not be NULL");
    CHECK_STATUS(cml_conv2d_bwd_filter(ctx, &d, NULL, NULL, buf, buf), CML_ERR_INVALID_ARG, "cml_conv2d_bwd_filter: dw must not be NULL");
    CHECK_STATUS(cml_conv2d_output_size(NULL, &P, &Q), CML_ERR_INVALID_ARG, "cml_conv2d_output_size: desc must not be NULL");
    CHECK_OK(cml_conv2d_output_size(&d, &P, &Q));
    CHECK(P == 8 && Q == 8);
    d.N = 0; /* an empty batch is fine: nothing to do, dw = 0 */
    buf[0] = 7;
    CHECK_OK(cml_conv2d_fwd(ctx, &d, NULL, NULL, NULL, NULL));
    CHECK_OK(cml_conv2d_bwd_filter(ctx, &d, buf, NULL, NULL, NULL));
    CHECK(buf[0] == 0);
    d.N = 2;

    cml_pool2d_desc p = {1, 2, 6, 6, 2, 2, 2, 2, 0, 0, CML_POOL_MAX, false, CML_F32}, f = p;
    f.pad_h = 2;
    CHECK_STATUS(cml_pool2d_output_size(&f, &P, &Q), CML_ERR_INVALID_ARG, "cml_pool2d_output_size: pad_h=2 must be <= R/2=1");
    f = p, f.mode = (cml_pool_mode)7;
    CHECK_STATUS(cml_pool2d_fwd(ctx, &f, buf, idx, buf), CML_ERR_INVALID_ARG, "cml_pool2d_fwd: mode=7 must be CML_POOL_MAX or CML_POOL_AVG");
    f = p, f.R = 7;
    CHECK_STATUS(cml_pool2d_fwd(ctx, &f, buf, idx, buf), CML_ERR_SHAPE,
                 "cml_pool2d_fwd: window height R=7 exceeds the padded input height H+2*pad_h=6");
    f = p, f.S = 0;
    CHECK_STATUS(cml_pool2d_fwd(ctx, &f, buf, idx, buf), CML_ERR_INVALID_ARG, "cml_pool2d_fwd: S=0 must be >= 1");
    CHECK_STATUS(cml_pool2d_bwd(ctx, &p, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_pool2d_bwd: indices must not be NULL for CML_POOL_MAX");
    for (int i = 0; i < 18; i++) idx[i] = i;
    idx[5] = 36;
    CHECK_STATUS(cml_pool2d_bwd(ctx, &p, buf, buf, idx), CML_ERR_INVALID_ARG, "cml_pool2d_bwd: indices[5]=36 must be in [0, H*W=36)");

    float g[4] = {1, 1, 1, 1}, m[4] = {0}, r[4] = {1, 1, 1, 1};
    CHECK_STATUS(cml_batchnorm_fwd(ctx, buf, m, r, NULL, NULL, buf, g, g, 1, 4, 1, false, true, 0.1f, 1e-5f, CML_F32),
                 CML_ERR_INVALID_ARG, "cml_batchnorm_fwd: training needs more than one value per channel (N*HW=1)");
    CHECK_STATUS(cml_batchnorm_fwd(ctx, buf, m, r, NULL, NULL, buf, g, g, 2, 4, 3, false, false, 0.1f, 1e-5f, CML_F32),
                 CML_ERR_INVALID_ARG, "running_mean and running_var must not be NULL in eval mode");
    CHECK_STATUS(cml_batchnorm_fwd(ctx, buf, m, r, m, NULL, buf, g, g, 2, 4, 3, false, true, 0.1f, 1e-5f, CML_F32),
                 CML_ERR_INVALID_ARG, "both be given or both be NULL");
    CHECK_STATUS(cml_batchnorm_fwd(ctx, buf, m, r, NULL, NULL, buf, g, g, 2, 4, 3, false, true, 1.5f, 1e-5f, CML_F32),
                 CML_ERR_INVALID_ARG, "momentum=1.5 must be in [0, 1]");
    CHECK_STATUS(cml_batchnorm_fwd(ctx, buf, m, r, NULL, NULL, buf, g, g, 2, 0, 3, false, true, 0.1f, 1e-5f, CML_F32),
                 CML_ERR_INVALID_ARG, "cml_batchnorm_fwd: C=0 must be >= 1");
    CHECK_STATUS(cml_batchnorm_bwd(ctx, buf, NULL, NULL, buf, buf, g, NULL, r, 2, 4, 3, false, CML_F32),
                 CML_ERR_INVALID_ARG, "cml_batchnorm_bwd: save_mean must not be NULL");
    CHECK_STATUS(cml_batchnorm_bwd(ctx, buf, NULL, NULL, buf, buf, g, m, r, 2, 4, 3, false, CML_U8), CML_ERR_DTYPE,
                 "cml_batchnorm_bwd: dtype=u8 must be a floating-point");
    /* the CUDA kernels are tested in tests/gpu; here only that a CUDA context reaches them */
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_conv2d_fwd(&cuda, &d, buf, buf, buf, NULL));
    KT_CHECK_CUDA_DISPATCH(cml_conv2d_bwd_data(&cuda, &d, buf, buf, buf));
    KT_CHECK_CUDA_DISPATCH(cml_conv2d_bwd_filter(&cuda, &d, buf, NULL, buf, buf));
    KT_CHECK_CUDA_DISPATCH(cml_pool2d_fwd(&cuda, &p, buf, idx, buf));
    KT_CHECK_CUDA_DISPATCH(cml_pool2d_bwd(&cuda, &p, buf, buf, idx));
    KT_CHECK_CUDA_DISPATCH(cml_batchnorm_fwd(&cuda, buf, m, r, NULL, NULL, buf, g, g, 2, 4, 3, false, true, 0.1f, 1e-5f,
                                             CML_F32));
    KT_CHECK_CUDA_DISPATCH(cml_batchnorm_bwd(&cuda, buf, NULL, NULL, buf, buf, g, m, r, 2, 4, 3, false, CML_F32));
}

int main(void) {
    RUN(test_conv);
    RUN(test_conv_threads);
    RUN(test_pool);
    RUN(test_pool_nan);
    RUN(test_batchnorm);
    RUN(test_errors);
    return kt_finish();
}
