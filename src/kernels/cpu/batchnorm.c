/* CPU batch normalization, NCHW and NHWC.
 *
 * Per-channel sums run in a fixed order whatever the thread count: NCHW gives
 * each thread whole channels and sums each image's positions in LANES
 * interleaved f32 accumulators (centred on the mean in the second pass),
 * images in double; NHWC gives each thread blocks of CHANNEL_BLOCK adjacent
 * channels summed in double position by position. Statistics
 * take two passes (the mean, then the centred sum of squares). The
 * elementwise passes are f32:
 *   forward   y  = (x - mean) * (rstd gamma) + beta
 *   backward  dx = k1 dy + k2 - k3 (x - mean), with k1 = gamma rstd,
 *             k2 = -k1 sum(dy) / M, k3 = k1 rstd dgamma / M   (M = N HW). */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_vision.h"
#include "kernels/cpu/strided.h"

#define CHANNEL_BLOCK 16
#define LANES 8

typedef struct bn_geom {
    int64_t N, C, HW;
    bool cl;
} bn_geom;

/* acc1[c] = sum (a - sa[c]); acc2[c] = sum (a - sa[c]) (b - sb[c]) when b is given.
 * sa and sb may be NULL (zero). */
static void channel_sums(const bn_geom *g, const float *a, const double *sa, const float *b, const double *sb,
                         double *acc1, double *acc2) {
    bool par = g->N * g->C * g->HW >= CML__PARALLEL_MIN;
    if (!g->cl) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t c = 0; c < g->C; c++) {
            float ca = sa ? (float)sa[c] : 0.0f, cb = sb ? (float)sb[c] : 0.0f;
            double s1 = 0.0, s2 = 0.0;
            for (int64_t n = 0; n < g->N; n++) {
                int64_t base = (n * g->C + c) * g->HW;
                /* one image's positions: LANES interleaved f32 sums (a fixed order that vectorizes) */
                float l1[LANES] = {0}, l2[LANES] = {0};
                const float *ra = a + base, *rb = b ? b + base : NULL;
                int64_t i = 0;
                if (rb) {
                    for (; i + LANES <= g->HW; i += LANES)
                        for (int j = 0; j < LANES; j++) {
                            float da = ra[i + j] - ca;
                            l1[j] += da;
                            l2[j] += da * (rb[i + j] - cb);
                        }
                    for (; i < g->HW; i++) {
                        float da = ra[i] - ca;
                        l1[0] += da;
                        l2[0] += da * (rb[i] - cb);
                    }
                } else {
                    for (; i + LANES <= g->HW; i += LANES)
                        for (int j = 0; j < LANES; j++) l1[j] += ra[i + j] - ca;
                    for (; i < g->HW; i++) l1[0] += ra[i] - ca;
                }
                for (int j = 0; j < LANES; j++) {
                    s1 += (double)l1[j];
                    s2 += (double)l2[j];
                }
            }
            acc1[c] = s1;
            if (acc2) acc2[c] = s2;
        }
        return;
    }
    int64_t blocks = (g->C + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK, rows = g->N * g->HW;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t c0 = blk * CHANNEL_BLOCK, len = g->C - c0 < CHANNEL_BLOCK ? g->C - c0 : CHANNEL_BLOCK;
        double s1[CHANNEL_BLOCK] = {0}, s2[CHANNEL_BLOCK] = {0}, ca[CHANNEL_BLOCK], cb[CHANNEL_BLOCK];
        for (int64_t j = 0; j < len; j++) {
            ca[j] = sa ? sa[c0 + j] : 0.0;
            cb[j] = sb ? sb[c0 + j] : 0.0;
        }
        for (int64_t r = 0; r < rows; r++) {
            const float *ra = a + r * g->C + c0;
            if (b) {
                const float *rb = b + r * g->C + c0;
                for (int64_t j = 0; j < len; j++) {
                    double da = (double)ra[j] - ca[j];
                    s1[j] += da;
                    s2[j] += da * ((double)rb[j] - cb[j]);
                }
            } else {
                for (int64_t j = 0; j < len; j++) s1[j] += (double)ra[j] - ca[j];
            }
        }
        for (int64_t j = 0; j < len; j++) {
            acc1[c0 + j] = s1[j];
            if (acc2) acc2[c0 + j] = s2[j];
        }
    }
}

/* Per-channel coefficients of an elementwise pass (see channel_affine). */
typedef struct affine {
    const float *m, *k1, *k0, *k2; /* per channel; k2 may be NULL */
} affine;

/* out[e] = k1[c] * a[e] + k0[c] - k2[c] * (b[e] - m[c]) (k2 term only when k2 != NULL),
 * or out[e] = (a[e] - m[c]) * k1[c] + k0[c] when b is NULL. */
static void channel_affine(const bn_geom *g, float *out, const float *a, const float *b, const affine *f) {
    bool par = g->N * g->C * g->HW >= CML__PARALLEL_MIN;
    if (!g->cl) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t pl = 0; pl < g->N * g->C; pl++) {
            int64_t c = pl % g->C, base = pl * g->HW;
            float m = f->m[c], k1 = f->k1[c], k0 = f->k0[c];
            const float *ra = a + base;
            float *ro = out + base;
            if (b) {
                const float *rb = b + base;
                float k2 = f->k2[c];
                for (int64_t i = 0; i < g->HW; i++) ro[i] = k1 * ra[i] + k0 - k2 * (rb[i] - m);
            } else {
                for (int64_t i = 0; i < g->HW; i++) ro[i] = (ra[i] - m) * k1 + k0;
            }
        }
        return;
    }
#pragma omp parallel for schedule(static) if (par)
    for (int64_t r = 0; r < g->N * g->HW; r++) {
        const float *ra = a + r * g->C;
        float *ro = out + r * g->C;
        if (b) {
            const float *rb = b + r * g->C;
            for (int64_t c = 0; c < g->C; c++) ro[c] = f->k1[c] * ra[c] + f->k0[c] - f->k2[c] * (rb[c] - f->m[c]);
        } else {
            for (int64_t c = 0; c < g->C; c++) ro[c] = (ra[c] - f->m[c]) * f->k1[c] + f->k0[c];
        }
    }
}

cml_status cml__batchnorm_fwd_cpu(cml_ctx *ctx, void *y, float *save_mean, float *save_rstd, float *running_mean,
                                  float *running_var, const void *x, const float *gamma, const float *beta,
                                  int64_t N, int64_t C, int64_t HW, bool channels_last, bool training,
                                  float momentum, float eps, cml_dtype dtype) {
    bn_geom g = {N, C, HW, channels_last};
    int64_t n = N * C * HW;
    cml__carve cv = {NULL, 0};
    const float *x32 = NULL;
    float *y32 = NULL, *m32 = NULL, *k1 = NULL, *k0 = NULL;
    double *mean = NULL, *var = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) CML_TRY(cml__carve_begin(ctx, &cv));
        x32 = cml__carve_f32(&cv, x, n, dtype, pass == 1);
        y32 = cml__carve_f32(&cv, y, n, dtype, false);
        mean = cml__carve_take(&cv, C, sizeof(double));
        var = cml__carve_take(&cv, C, sizeof(double));
        m32 = cml__carve_take(&cv, C, sizeof(float));
        k1 = cml__carve_take(&cv, C, sizeof(float));
        k0 = cml__carve_take(&cv, C, sizeof(float));
    }
    double M = (double)(N * HW);
    if (training) {
        channel_sums(&g, x32, NULL, NULL, NULL, mean, NULL);
        for (int64_t c = 0; c < C; c++) mean[c] /= M;
        channel_sums(&g, x32, mean, x32, mean, var, var); /* acc1 (sum of x - mean) is overwritten by acc2 */
        for (int64_t c = 0; c < C; c++) var[c] /= M;
    } else {
        for (int64_t c = 0; c < C; c++) {
            mean[c] = running_mean[c];
            var[c] = running_var[c];
        }
    }
    for (int64_t c = 0; c < C; c++) {
        double rstd = 1.0 / sqrt(var[c] + (double)eps);
        m32[c] = (float)mean[c];
        k1[c] = (float)(rstd * (gamma ? (double)gamma[c] : 1.0));
        k0[c] = beta ? beta[c] : 0.0f;
        if (save_mean) save_mean[c] = (float)mean[c];
        if (save_rstd) save_rstd[c] = (float)rstd;
        if (training && running_mean) {
            double unbiased = var[c] * M / (M - 1.0);
            running_mean[c] = (float)((1.0 - momentum) * (double)running_mean[c] + momentum * mean[c]);
            running_var[c] = (float)((1.0 - momentum) * (double)running_var[c] + momentum * unbiased);
        }
    }
    affine f = {m32, k1, k0, NULL};
    channel_affine(&g, y32, x32, NULL, &f);
    if (dtype != CML_F32) cml_dtype_convert(y, dtype, y32, CML_F32, n);
    return CML_OK;
}

cml_status cml__batchnorm_bwd_cpu(cml_ctx *ctx, void *dx, float *dgamma, float *dbeta, const void *dy,
                                  const void *x, const float *gamma, const float *save_mean,
                                  const float *save_rstd, int64_t N, int64_t C, int64_t HW, bool channels_last,
                                  cml_dtype dtype) {
    bn_geom g = {N, C, HW, channels_last};
    int64_t n = N * C * HW;
    cml__carve cv = {NULL, 0};
    const float *x32 = NULL, *dy32 = NULL;
    float *dx32 = NULL, *m32 = NULL, *k1 = NULL, *k0 = NULL, *k2 = NULL;
    double *mean = NULL, *sum_dy = NULL, *sum_dyx = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) CML_TRY(cml__carve_begin(ctx, &cv));
        x32 = cml__carve_f32(&cv, x, n, dtype, pass == 1);
        dy32 = cml__carve_f32(&cv, dy, n, dtype, pass == 1);
        dx32 = cml__carve_f32(&cv, dx, n, dtype, false);
        mean = cml__carve_take(&cv, C, sizeof(double));
        sum_dy = cml__carve_take(&cv, C, sizeof(double));
        sum_dyx = cml__carve_take(&cv, C, sizeof(double));
        k1 = cml__carve_take(&cv, C, sizeof(float));
        k0 = cml__carve_take(&cv, C, sizeof(float));
        k2 = cml__carve_take(&cv, C, sizeof(float));
        m32 = cml__carve_take(&cv, C, sizeof(float));
    }
    for (int64_t c = 0; c < C; c++) {
        mean[c] = save_mean[c];
        m32[c] = save_mean[c];
    }
    channel_sums(&g, dy32, NULL, x32, mean, sum_dy, sum_dyx);
    double M = (double)(N * HW);
    for (int64_t c = 0; c < C; c++) {
        double rstd = save_rstd[c], gm = gamma ? (double)gamma[c] : 1.0;
        double dg = sum_dyx[c] * rstd; /* sum dy * xhat */
        double a = gm * rstd;
        k1[c] = (float)a;
        k0[c] = (float)(-a * sum_dy[c] / M);
        k2[c] = (float)(a * rstd * dg / M);
        if (dgamma) dgamma[c] = (float)dg;
        if (dbeta) dbeta[c] = (float)sum_dy[c];
    }
    affine f = {m32, k1, k0, k2};
    channel_affine(&g, dx32, dy32, x32, &f);
    if (dtype != CML_F32) cml_dtype_convert(dx, dtype, dx32, CML_F32, n);
    return CML_OK;
}
