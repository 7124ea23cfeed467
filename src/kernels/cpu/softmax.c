/* CPU softmax / log-softmax, forward and backward, over the middle axis of a
 * contiguous (outer, n, inner) buffer.
 *
 * Numerically stable: the maximum is subtracted before exponentiating, and
 * sums accumulate in double. Rows of any length are handled in chunks (no
 * row-sized scratch): pass 1 finds the max (backward: the dot product), pass 2
 * sums, pass 3 writes. With inner == 1 a task owns whole contiguous rows;
 * otherwise a block of up to COLUMN_BLOCK adjacent columns walked row by row. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"

#define COLUMN_BLOCK 256
#define ROW_CHUNK 1024

typedef struct softmax_job {
    void *out;              /* y (forward) or dx (backward) */
    const void *in, *in2;   /* x (forward) or dy and y (backward) */
    int64_t n, inner;
    cml_dtype dtype;
    bool log;
} softmax_job;

/* NaN-propagating max (a NaN anywhere makes the whole row NaN, as in PyTorch). */
static inline float max_nan(float m, float v) { return (m != m || v <= m) ? m : v; }

static void fwd_row(const softmax_job *job, int64_t row) {
    float in_buf[ROW_CHUNK], out_buf[ROW_CHUNK];
    int64_t base = row * job->n;
    float m = -INFINITY;
    for (int64_t j0 = 0; j0 < job->n; j0 += ROW_CHUNK) {
        int64_t len = job->n - j0 < ROW_CHUNK ? job->n - j0 : ROW_CHUNK;
        const float *x = cml__f32_view(in_buf, job->in, job->dtype, base + j0, 1, len);
        for (int64_t j = 0; j < len; j++) m = max_nan(m, x[j]);
    }
    double sum = 0;
    for (int64_t j0 = 0; j0 < job->n; j0 += ROW_CHUNK) {
        int64_t len = job->n - j0 < ROW_CHUNK ? job->n - j0 : ROW_CHUNK;
        const float *x = cml__f32_view(in_buf, job->in, job->dtype, base + j0, 1, len);
        for (int64_t j = 0; j < len; j++) sum += (double)expf(x[j] - m);
    }
    float inv_sum = (float)(1.0 / sum), log_sum = (float)log(sum);
    for (int64_t j0 = 0; j0 < job->n; j0 += ROW_CHUNK) {
        int64_t len = job->n - j0 < ROW_CHUNK ? job->n - j0 : ROW_CHUNK;
        const float *x = cml__f32_view(in_buf, job->in, job->dtype, base + j0, 1, len);
        float *y = job->dtype == CML_F32 ? (float *)job->out + base + j0 : out_buf;
        if (job->log) for (int64_t j = 0; j < len; j++) y[j] = x[j] - m - log_sum;
        else for (int64_t j = 0; j < len; j++) y[j] = expf(x[j] - m) * inv_sum;
        if (y == out_buf) cml__store_f32(job->out, job->dtype, base + j0, 1, y, len);
    }
}

static void fwd_columns(const softmax_job *job, int64_t o, int64_t c0, int64_t len) {
    float in_buf[COLUMN_BLOCK], out_buf[COLUMN_BLOCK], m[COLUMN_BLOCK], scale[COLUMN_BLOCK];
    double sum[COLUMN_BLOCK];
    for (int64_t c = 0; c < len; c++) {
        m[c] = -INFINITY;
        sum[c] = 0;
    }
    for (int64_t j = 0; j < job->n; j++) {
        const float *x = cml__f32_view(in_buf, job->in, job->dtype, (o * job->n + j) * job->inner + c0, 1, len);
        for (int64_t c = 0; c < len; c++) m[c] = max_nan(m[c], x[c]);
    }
    for (int64_t j = 0; j < job->n; j++) {
        const float *x = cml__f32_view(in_buf, job->in, job->dtype, (o * job->n + j) * job->inner + c0, 1, len);
        for (int64_t c = 0; c < len; c++) sum[c] += (double)expf(x[c] - m[c]);
    }
    for (int64_t c = 0; c < len; c++) scale[c] = job->log ? (float)log(sum[c]) : (float)(1.0 / sum[c]);
    for (int64_t j = 0; j < job->n; j++) {
        int64_t offset = (o * job->n + j) * job->inner + c0;
        const float *x = cml__f32_view(in_buf, job->in, job->dtype, offset, 1, len);
        float *y = job->dtype == CML_F32 ? (float *)job->out + offset : out_buf;
        if (job->log) for (int64_t c = 0; c < len; c++) y[c] = x[c] - m[c] - scale[c];
        else for (int64_t c = 0; c < len; c++) y[c] = expf(x[c] - m[c]) * scale[c];
        if (y == out_buf) cml__store_f32(job->out, job->dtype, offset, 1, y, len);
    }
}

/* softmax:     dx = y * (dy - sum(dy * y))
 * log_softmax: dx = dy - exp(y) * sum(dy)      */
static void bwd_row(const softmax_job *job, int64_t row) {
    float dy_buf[ROW_CHUNK], y_buf[ROW_CHUNK], dx_buf[ROW_CHUNK];
    int64_t base = row * job->n;
    double acc = 0;
    for (int64_t j0 = 0; j0 < job->n; j0 += ROW_CHUNK) {
        int64_t len = job->n - j0 < ROW_CHUNK ? job->n - j0 : ROW_CHUNK;
        const float *dy = cml__f32_view(dy_buf, job->in, job->dtype, base + j0, 1, len);
        if (job->log) {
            for (int64_t j = 0; j < len; j++) acc += (double)dy[j];
        } else {
            const float *y = cml__f32_view(y_buf, job->in2, job->dtype, base + j0, 1, len);
            for (int64_t j = 0; j < len; j++) acc += (double)dy[j] * (double)y[j];
        }
    }
    float s = (float)acc;
    for (int64_t j0 = 0; j0 < job->n; j0 += ROW_CHUNK) {
        int64_t len = job->n - j0 < ROW_CHUNK ? job->n - j0 : ROW_CHUNK;
        const float *dy = cml__f32_view(dy_buf, job->in, job->dtype, base + j0, 1, len);
        const float *y = cml__f32_view(y_buf, job->in2, job->dtype, base + j0, 1, len);
        float *dx = job->dtype == CML_F32 ? (float *)job->out + base + j0 : dx_buf;
        if (job->log) for (int64_t j = 0; j < len; j++) dx[j] = dy[j] - expf(y[j]) * s;
        else for (int64_t j = 0; j < len; j++) dx[j] = y[j] * (dy[j] - s);
        if (dx == dx_buf) cml__store_f32(job->out, job->dtype, base + j0, 1, dx, len);
    }
}

static void bwd_columns(const softmax_job *job, int64_t o, int64_t c0, int64_t len) {
    float dy_buf[COLUMN_BLOCK], y_buf[COLUMN_BLOCK], dx_buf[COLUMN_BLOCK], s[COLUMN_BLOCK];
    double acc[COLUMN_BLOCK];
    for (int64_t c = 0; c < len; c++) acc[c] = 0;
    for (int64_t j = 0; j < job->n; j++) {
        int64_t offset = (o * job->n + j) * job->inner + c0;
        const float *dy = cml__f32_view(dy_buf, job->in, job->dtype, offset, 1, len);
        if (job->log) {
            for (int64_t c = 0; c < len; c++) acc[c] += (double)dy[c];
        } else {
            const float *y = cml__f32_view(y_buf, job->in2, job->dtype, offset, 1, len);
            for (int64_t c = 0; c < len; c++) acc[c] += (double)dy[c] * (double)y[c];
        }
    }
    for (int64_t c = 0; c < len; c++) s[c] = (float)acc[c];
    for (int64_t j = 0; j < job->n; j++) {
        int64_t offset = (o * job->n + j) * job->inner + c0;
        const float *dy = cml__f32_view(dy_buf, job->in, job->dtype, offset, 1, len);
        const float *y = cml__f32_view(y_buf, job->in2, job->dtype, offset, 1, len);
        float *dx = job->dtype == CML_F32 ? (float *)job->out + offset : dx_buf;
        if (job->log) for (int64_t c = 0; c < len; c++) dx[c] = dy[c] - expf(y[c]) * s[c];
        else for (int64_t c = 0; c < len; c++) dx[c] = y[c] * (dy[c] - s[c]);
        if (dx == dx_buf) cml__store_f32(job->out, job->dtype, offset, 1, dx, len);
    }
}

/* Runs the row or column-block variant over all tasks, in parallel when large. */
static void run(const softmax_job *job, int64_t outer, bool backward) {
    if (outer == 0 || job->inner == 0) return;
    int64_t blocks = (job->inner + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    int64_t tasks = job->inner == 1 ? outer : outer * blocks;
    bool parallel = outer * job->n * job->inner >= CML__PARALLEL_MIN && tasks > 1;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tasks; t++) {
        if (job->inner == 1) {
            if (backward) bwd_row(job, t);
            else fwd_row(job, t);
        } else {
            int64_t o = t / blocks, c0 = (t % blocks) * COLUMN_BLOCK;
            int64_t len = job->inner - c0 < COLUMN_BLOCK ? job->inner - c0 : COLUMN_BLOCK;
            if (backward) bwd_columns(job, o, c0, len);
            else fwd_columns(job, o, c0, len);
        }
    }
}

cml_status cml__softmax_fwd_cpu(cml_ctx *ctx, void *y, const void *x, int64_t outer, int64_t n,
                                int64_t inner, cml_dtype dtype, bool log) {
    softmax_job job = {y, x, NULL, n, inner, dtype, log};
    run(&job, outer, false);
    return CML_OK;
}

cml_status cml__softmax_bwd_cpu(cml_ctx *ctx, void *dx, const void *dy, const void *y, int64_t outer,
                                int64_t n, int64_t inner, cml_dtype dtype, bool log) {
    softmax_job job = {dx, dy, y, n, inner, dtype, log};
    run(&job, outer, true);
    return CML_OK;
}
