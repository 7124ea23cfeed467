/* CPU RMSNorm over the last dim of a contiguous (rows, C) buffer.
 *
 * Forward: per row, the sum of squares in double, rstd = 1 / sqrt(ss / C + eps)
 * in double, rounded once to the f32 that is also written for the backward;
 * then y = x * rstd * gamma in f32. Rows are independent: OpenMP over rows.
 *
 * Backward, with xhat = x * rstd and g = dy * gamma:
 *   dx = rstd * (g - xhat * mean(g * xhat))      (the row sum in double)
 *   dgamma[c] = sum_r dy[r,c] * xhat[r,c]
 * dgamma is summed in double over rows in increasing order by whichever thread
 * owns a block of COLUMN_BLOCK columns, so the result does not depend on the
 * number of threads. It is computed before dx, so dx may alias dy. */
#include <math.h>

#include "kernels/cpu/cpu_transformer.h"
#include "kernels/cpu/strided.h"

#define ROW_CHUNK 1024
#define COLUMN_BLOCK 64

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

typedef struct rms_job {
    void *out; /* y or dx */
    const void *x, *dy, *gamma;
    float *rstd_out;   /* forward (may be NULL) */
    const float *rstd; /* backward */
    int64_t C;
    float eps;
    cml_dtype dtype;
} rms_job;

static float row_rstd(const rms_job *job, int64_t row) {
    float buf[ROW_CHUNK];
    double ss = 0;
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK);
        const float *x = cml__f32_view(buf, job->x, job->dtype, row * job->C + j0, 1, len);
        for (int64_t j = 0; j < len; j++) ss += (double)x[j] * (double)x[j];
    }
    return (float)(1.0 / sqrt(ss / (double)job->C + (double)job->eps));
}

static void fwd_row(const rms_job *job, int64_t row) {
    float xbuf[ROW_CHUNK], gbuf[ROW_CHUNK], ybuf[ROW_CHUNK];
    const float r = row_rstd(job, row);
    if (job->rstd_out) job->rstd_out[row] = r;
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK), off = row * job->C + j0;
        const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
        float *y = job->dtype == CML_F32 ? (float *)job->out + off : ybuf;
        if (job->gamma) {
            const float *g = cml__f32_view(gbuf, job->gamma, job->dtype, j0, 1, len);
            for (int64_t j = 0; j < len; j++) y[j] = x[j] * r * g[j];
        } else {
            for (int64_t j = 0; j < len; j++) y[j] = x[j] * r;
        }
        if (y == ybuf) cml__store_f32(job->out, job->dtype, off, 1, y, len);
    }
}

/* g = dy * gamma into out (gamma NULL: dy itself). */
static const float *load_g(float *out, float *gbuf, const float *dy, const rms_job *job, int64_t j0, int64_t len) {
    if (!job->gamma) return dy;
    const float *g = cml__f32_view(gbuf, job->gamma, job->dtype, j0, 1, len);
    for (int64_t j = 0; j < len; j++) out[j] = dy[j] * g[j];
    return out;
}

static void bwd_row(const rms_job *job, int64_t row) {
    float xbuf[ROW_CHUNK], dybuf[ROW_CHUNK], gbuf[ROW_CHUNK], prod[ROW_CHUNK], dxbuf[ROW_CHUNK];
    const float r = job->rstd[row];
    double sum_gx = 0;
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK), off = row * job->C + j0;
        const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
        const float *dy = cml__f32_view(dybuf, job->dy, job->dtype, off, 1, len);
        const float *g = load_g(prod, gbuf, dy, job, j0, len);
        for (int64_t j = 0; j < len; j++) sum_gx += (double)g[j] * (double)(x[j] * r);
    }
    const float mean_gx = (float)(sum_gx / (double)job->C);
    for (int64_t j0 = 0; j0 < job->C; j0 += ROW_CHUNK) {
        int64_t len = min64(job->C - j0, ROW_CHUNK), off = row * job->C + j0;
        const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
        const float *dy = cml__f32_view(dybuf, job->dy, job->dtype, off, 1, len);
        const float *g = load_g(prod, gbuf, dy, job, j0, len);
        float *dx = job->dtype == CML_F32 ? (float *)job->out + off : dxbuf;
        for (int64_t j = 0; j < len; j++) dx[j] = r * (g[j] - x[j] * r * mean_gx);
        if (dx == dxbuf) cml__store_f32(job->out, job->dtype, off, 1, dx, len);
    }
}

/* dgamma for columns [c0, c0 + len), summed over all rows in order. */
static void bwd_columns(const rms_job *job, int64_t rows, int64_t c0, int64_t len, void *dgamma) {
    float xbuf[COLUMN_BLOCK], dybuf[COLUMN_BLOCK], out[COLUMN_BLOCK];
    double dg[COLUMN_BLOCK];
    for (int64_t c = 0; c < len; c++) dg[c] = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = r * job->C + c0;
        const float *dy = cml__f32_view(dybuf, job->dy, job->dtype, off, 1, len);
        const float *x = cml__f32_view(xbuf, job->x, job->dtype, off, 1, len);
        const float rs = job->rstd[r];
        for (int64_t c = 0; c < len; c++) dg[c] += (double)dy[c] * (double)(x[c] * rs);
    }
    for (int64_t c = 0; c < len; c++) out[c] = (float)dg[c];
    cml__store_f32(dgamma, job->dtype, c0, 1, out, len);
}

cml_status cml__rmsnorm_fwd_cpu(cml_ctx *ctx, void *y, float *rstd, const void *x, const void *gamma, int64_t rows,
                                int64_t C, float eps, cml_dtype dtype) {
    rms_job job = {y, x, NULL, gamma, rstd, NULL, C, eps, dtype};
    bool parallel = rows > 1 && rows * C >= CML__PARALLEL_MIN;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; r++) fwd_row(&job, r);
    return CML_OK;
}

cml_status cml__rmsnorm_bwd_cpu(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x,
                                const void *gamma, const float *rstd, int64_t rows, int64_t C, cml_dtype dtype) {
    rms_job job = {dx, x, dy, gamma, NULL, rstd, C, 0.0f, dtype};
    bool big = rows * C >= CML__PARALLEL_MIN;
    if (dgamma) {
        int64_t blocks = (C + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if (big && blocks > 1)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t c0 = b * COLUMN_BLOCK;
            bwd_columns(&job, rows, c0, min64(C - c0, COLUMN_BLOCK), dgamma);
        }
    }
#pragma omp parallel for schedule(static) if (big && rows > 1)
    for (int64_t r = 0; r < rows; r++) bwd_row(&job, r);
    return CML_OK;
}
