/* CPU LayerNorm over the last dim of a contiguous (rows, C) buffer.
 *
 * Forward: per row, Welford statistics in double, computed chunk by chunk
 * (each chunk of up to ROW_CHUNK elements gets an exact two-pass mean and M2
 * in double, merged with Chan et al.'s parallel update), then
 * y = (x - mean) * rstd * gamma + beta in f32 from the f32 mean and rstd that
 * are also written for the backward. Rows are independent: OpenMP over rows.
 *
 * Backward, with xhat = (x - mean) rstd and g = dy * gamma:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (row sums in double)
 *   dgamma[c] = sum_r dy[r,c] xhat[r,c],  dbeta[c] = sum_r dy[r,c]
 * dgamma/dbeta are summed in double over rows in increasing order by whichever
 * thread owns a block of COLUMN_BLOCK columns, so the result does not depend on
 * the number of threads. They are computed before dx, so dx may alias dy. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_transformer.h"
#include "kernels/cpu/strided.h"

#define ROW_CHUNK 1024
#define COLUMN_BLOCK 64

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

typedef struct ln_job {
    void *out;                      /* y or dx */
    const void *x, *dy, *gamma, *beta;
    float *mean_out, *rstd_out;     /* forward (may be NULL) */
    const float *mean, *rstd;       /* backward */
    int64_t C;
    float eps;
    cml_dtype dtype;
} ln_job;

/* Mean and rstd of one row (Welford merge of exact per-chunk statistics). */
static void row_stats(const ln_job *job, int64_t row, float *mean_f, float *rstd_f) {
    float buf[ROW_CHUNK];
    double n_a = 0, mean_a = 0, m2_a = 0;
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK);
        const float *x = cml__f32_view(buf, job->x, job->dtype, row * job->C + j0, 1, len);
        double sum = 0;
        for (int64_t j = 0; j < len; j++) sum += (double)x[j];
        double mean_b = sum / (double)len, m2_b = 0;
        for (int64_t j = 0; j < len; j++) {
            double d = (double)x[j] - mean_b;
            m2_b += d * d;
        }
        double n_b = (double)len, n = n_a + n_b, delta = mean_b - mean_a;
        mean_a += delta * (n_b / n);
        m2_a += m2_b + delta * delta * (n_a * n_b / n);
        n_a = n;
    }
    double var = m2_a / (double)job->C;
    *mean_f = (float)mean_a;
    *rstd_f = (float)(1.0 / sqrt(var + (double)job->eps));
}

static void fwd_row(const ln_job *job, int64_t row) {
    float xbuf[ROW_CHUNK], gbuf[ROW_CHUNK], bbuf[ROW_CHUNK], ybuf[ROW_CHUNK];
    float m, r;
    row_stats(job, row, &m, &r);
    if (job->mean_out) job->mean_out[row] = m;
    if (job->rstd_out) job->rstd_out[row] = r;
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK), off = row * job->C + j0;
        const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
        float *y = job->dtype == CML_F32 ? (float *)job->out + off : ybuf;
        if (job->gamma && job->beta) {
            const float *g = cml__f32_view(gbuf, job->gamma, job->dtype, j0, 1, len);
            const float *b = cml__f32_view(bbuf, job->beta, job->dtype, j0, 1, len);
            for (int64_t j = 0; j < len; j++) y[j] = (x[j] - m) * r * g[j] + b[j];
        } else if (job->gamma) {
            const float *g = cml__f32_view(gbuf, job->gamma, job->dtype, j0, 1, len);
            for (int64_t j = 0; j < len; j++) y[j] = (x[j] - m) * r * g[j];
        } else if (job->beta) {
            const float *b = cml__f32_view(bbuf, job->beta, job->dtype, j0, 1, len);
            for (int64_t j = 0; j < len; j++) y[j] = (x[j] - m) * r + b[j];
        } else {
            for (int64_t j = 0; j < len; j++) y[j] = (x[j] - m) * r;
        }
        if (y == ybuf) cml__store_f32(job->out, job->dtype, off, 1, y, len);
    }
}

/* g = dy * gamma into out (gamma NULL: 1). */
static const float *load_g(float *out, float *gbuf, const float *dy, const ln_job *job, int64_t j0, int64_t len) {
    if (!job->gamma) return dy;
    const float *g = cml__f32_view(gbuf, job->gamma, job->dtype, j0, 1, len);
    for (int64_t j = 0; j < len; j++) out[j] = dy[j] * g[j];
    return out;
}

static void bwd_row(const ln_job *job, int64_t row) {
    float xbuf[ROW_CHUNK], dybuf[ROW_CHUNK], gbuf[ROW_CHUNK], prod[ROW_CHUNK], dxbuf[ROW_CHUNK];
    float m = job->mean[row], r = job->rstd[row];
    double sum_g = 0, sum_gx = 0;
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK), off = row * job->C + j0;
        const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
        const float *dy = cml__f32_view(dybuf, job->dy, job->dtype, off, 1, len);
        const float *g = load_g(prod, gbuf, dy, job, j0, len);
        for (int64_t j = 0; j < len; j++) {
            sum_g += (double)g[j];
            sum_gx += (double)g[j] * (double)((x[j] - m) * r);
        }
    }
    float mean_g = (float)(sum_g / (double)job->C), mean_gx = (float)(sum_gx / (double)job->C);
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK), off = row * job->C + j0;
        const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
        const float *dy = cml__f32_view(dybuf, job->dy, job->dtype, off, 1, len);
        const float *g = load_g(prod, gbuf, dy, job, j0, len);
        float *dx = job->dtype == CML_F32 ? (float *)job->out + off : dxbuf;
        for (int64_t j = 0; j < len; j++) dx[j] = r * (g[j] - mean_g - (x[j] - m) * r * mean_gx);
        if (dx == dxbuf) cml__store_f32(job->out, job->dtype, off, 1, dx, len);
    }
}

/* dgamma / dbeta for columns [c0, c0 + len), summed over all rows in order. */
static void bwd_columns(const ln_job *job, int64_t rows, int64_t c0, int64_t len, void *dgamma, void *dbeta) {
    float xbuf[COLUMN_BLOCK], dybuf[COLUMN_BLOCK], out[COLUMN_BLOCK];
    double dg[COLUMN_BLOCK], db[COLUMN_BLOCK];
    for (int64_t c = 0; c < len; c++) dg[c] = db[c] = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = r * job->C + c0;
        const float *dy = cml__f32_view(dybuf, job->dy, job->dtype, off, 1, len);
        if (dbeta)
            for (int64_t c = 0; c < len; c++) db[c] += (double)dy[c];
        if (dgamma) {
            const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
            float m = job->mean[r], rs = job->rstd[r];
            for (int64_t c = 0; c < len; c++) dg[c] += (double)dy[c] * (double)((x[c] - m) * rs);
        }
    }
    if (dgamma) {
        for (int64_t c = 0; c < len; c++) out[c] = (float)dg[c];
        cml__store_f32(dgamma, job->dtype, c0, 1, out, len);
    }
    if (dbeta) {
        for (int64_t c = 0; c < len; c++) out[c] = (float)db[c];
        cml__store_f32(dbeta, job->dtype, c0, 1, out, len);
    }
}

cml_status cml__layernorm_fwd_cpu(cml_ctx *ctx, void *y, float *mean, float *rstd, const void *x,
                                  const void *gamma, const void *beta, int64_t rows, int64_t C, float eps,
                                  cml_dtype dtype) {
    ln_job job = {y, x, NULL, gamma, beta, mean, rstd, NULL, NULL, C, eps, dtype};
    bool parallel = rows > 1 && rows * C >= CML__PARALLEL_MIN;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; r++) fwd_row(&job, r);
    return CML_OK;
}

cml_status cml__layernorm_bwd_cpu(cml_ctx *ctx, void *dx, void *dgamma, void *dbeta, const void *dy,
                                  const void *x, const void *gamma, const float *mean, const float *rstd,
                                  int64_t rows, int64_t C, cml_dtype dtype) {
    ln_job job = {dx, x, dy, gamma, NULL, NULL, NULL, mean, rstd, C, 0.0f, dtype};
    bool big = rows * C >= CML__PARALLEL_MIN;
    if (dgamma || dbeta) {
        int64_t blocks = (C + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if (big && blocks > 1)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t c0 = b * COLUMN_BLOCK;
            bwd_columns(&job, rows, c0, min64(C - c0, COLUMN_BLOCK), dgamma, dbeta);
        }
    }
#pragma omp parallel for schedule(static) if (big && rows > 1)
    for (int64_t r = 0; r < rows; r++) bwd_row(&job, r);
    return CML_OK;
}
