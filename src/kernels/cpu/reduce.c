/* CPU reductions over the middle axis of a contiguous (outer, n, inner) buffer.
 *
 * Work is split into tasks that each own a set of outputs, so results do not
 * depend on the thread count: with inner == 1 a task reduces one contiguous
 * row; otherwise it reduces a block of up to COLUMN_BLOCK adjacent columns,
 * walking the rows in order so that memory is read sequentially and the
 * per-column updates vectorize. Sums accumulate in double in a fixed order;
 * VAR uses Welford's update in double. NaN wins in MAX/MIN/ARGMAX/ARGMIN. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"

#define COLUMN_BLOCK 256
#define ROW_CHUNK 1024

typedef struct reduce_job {
    cml_reduce_op op;
    void *y;
    cml_dtype y_dtype;
    const void *x;
    cml_dtype x_dtype;
    int64_t n, inner;
    int correction;
} reduce_job;

/* Whether v should replace the current best: strictly better, or the first NaN. */
static inline bool beats(float v, float best, bool want_max) {
    if (best != best) return false;
    if (v != v) return true;
    return want_max ? v > best : v < best;
}

static double var_denominator(int64_t n, int correction) { return (double)(n - correction); }

/* One output from the contiguous row x[0..n). */
static void reduce_row(const reduce_job *job, int64_t row, double *value, int64_t *index) {
    float buf[ROW_CHUNK];
    int64_t base = row * job->n;
    cml_reduce_op op = job->op;
    bool want_max = op == CML_REDUCE_MAX || op == CML_REDUCE_ARGMAX;
    /* 8 partial sums in a fixed pattern: vectorizable and still deterministic */
    double lanes[8] = {0};
    double mean = 0, m2 = 0;
    float best = 0;
    int64_t best_j = 0;
    for (int64_t j0 = 0; j0 < job->n; j0 += ROW_CHUNK) {
        int64_t len = job->n - j0 < ROW_CHUNK ? job->n - j0 : ROW_CHUNK;
        const float *v = cml__f32_view(buf, job->x, job->x_dtype, base + j0, 1, len);
        switch (op) {
        case CML_REDUCE_SUM:
        case CML_REDUCE_MEAN:
            for (int64_t j = 0; j < len; j++) lanes[(j0 + j) & 7] += (double)v[j];
            break;
        case CML_REDUCE_SUMSQ:
            for (int64_t j = 0; j < len; j++) lanes[(j0 + j) & 7] += (double)v[j] * (double)v[j];
            break;
        case CML_REDUCE_VAR:
            for (int64_t j = 0; j < len; j++) {
                double d = (double)v[j] - mean;
                mean += d / (double)(j0 + j + 1);
                m2 += d * ((double)v[j] - mean);
            }
            break;
        default: /* MAX, MIN, ARGMAX, ARGMIN */
            if (j0 == 0) best = v[0];
            for (int64_t j = 0; j < len; j++)
                if (beats(v[j], best, want_max)) {
                    best = v[j];
                    best_j = j0 + j;
                }
            break;
        }
    }
    double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    switch (op) {
    case CML_REDUCE_SUM:
    case CML_REDUCE_SUMSQ: *value = sum; break;
    case CML_REDUCE_MEAN: *value = sum / (double)job->n; break;
    case CML_REDUCE_VAR: *value = m2 / var_denominator(job->n, job->correction); break;
    default: *value = best; break;
    }
    *index = best_j;
}

/* Outputs for columns [c0, c0 + len) of outer slice o: rows are walked in order. */
static void reduce_columns(const reduce_job *job, int64_t o, int64_t c0, int64_t len, double *value,
                           int64_t *index) {
    float buf[COLUMN_BLOCK];
    double acc[COLUMN_BLOCK], mean[COLUMN_BLOCK];
    float best[COLUMN_BLOCK];
    cml_reduce_op op = job->op;
    bool want_max = op == CML_REDUCE_MAX || op == CML_REDUCE_ARGMAX;
    for (int64_t c = 0; c < len; c++) {
        acc[c] = 0;
        mean[c] = 0;
        index[c] = 0;
    }
    for (int64_t j = 0; j < job->n; j++) {
        int64_t offset = (o * job->n + j) * job->inner + c0;
        const float *v = cml__f32_view(buf, job->x, job->x_dtype, offset, 1, len);
        switch (op) {
        case CML_REDUCE_SUM:
        case CML_REDUCE_MEAN:
            for (int64_t c = 0; c < len; c++) acc[c] += (double)v[c];
            break;
        case CML_REDUCE_SUMSQ:
            for (int64_t c = 0; c < len; c++) acc[c] += (double)v[c] * (double)v[c];
            break;
        case CML_REDUCE_VAR: {
            double inv_count = 1.0 / (double)(j + 1);
            for (int64_t c = 0; c < len; c++) {
                double d = (double)v[c] - mean[c];
                mean[c] += d * inv_count;
                acc[c] += d * ((double)v[c] - mean[c]);
            }
            break;
        }
        default:
            if (j == 0) {
                for (int64_t c = 0; c < len; c++) best[c] = v[c];
                break;
            }
            for (int64_t c = 0; c < len; c++)
                if (beats(v[c], best[c], want_max)) {
                    best[c] = v[c];
                    index[c] = j;
                }
            break;
        }
    }
    for (int64_t c = 0; c < len; c++) {
        switch (op) {
        case CML_REDUCE_SUM:
        case CML_REDUCE_SUMSQ: value[c] = acc[c]; break;
        case CML_REDUCE_MEAN: value[c] = acc[c] / (double)job->n; break;
        case CML_REDUCE_VAR: value[c] = acc[c] / var_denominator(job->n, job->correction); break;
        default: value[c] = best[c]; break;
        }
    }
}

static void store_outputs(const reduce_job *job, int64_t offset, const double *value, const int64_t *index,
                          int64_t len) {
    if (job->op == CML_REDUCE_ARGMAX || job->op == CML_REDUCE_ARGMIN) {
        for (int64_t c = 0; c < len; c++) ((int64_t *)job->y)[offset + c] = index[c];
        return;
    }
    float out[COLUMN_BLOCK];
    for (int64_t c = 0; c < len; c++) out[c] = (float)value[c];
    cml__store_f32(job->y, job->y_dtype, offset, 1, out, len);
}

cml_status cml__reduce_cpu(cml_ctx *ctx, cml_reduce_op op, void *y, cml_dtype y_dtype,
                           const void *x, cml_dtype x_dtype,
                           int64_t outer, int64_t n, int64_t inner, int correction) {
    reduce_job job = {op, y, y_dtype, x, x_dtype, n, inner, correction};
    if (outer == 0 || inner == 0) return CML_OK;
    int64_t blocks_per_outer = (inner + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    /* inner == 1: a task reduces a group of whole rows (up to COLUMN_BLOCK, fewer when
     * there are few rows so that threads still get work; each row's result does not
     * depend on the grouping) */
    int64_t rows_per_task = outer / 64 < 1 ? 1 : outer / 64 > COLUMN_BLOCK ? COLUMN_BLOCK : outer / 64;
    int64_t tasks = inner == 1 ? (outer + rows_per_task - 1) / rows_per_task : outer * blocks_per_outer;
    bool parallel = outer * n * inner >= CML__PARALLEL_MIN && tasks > 1;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tasks; t++) {
        double value[COLUMN_BLOCK];
        int64_t index[COLUMN_BLOCK];
        if (inner == 1) {
            int64_t r0 = t * rows_per_task;
            int64_t len = outer - r0 < rows_per_task ? outer - r0 : rows_per_task;
            for (int64_t r = 0; r < len; r++) reduce_row(&job, r0 + r, &value[r], &index[r]);
            store_outputs(&job, r0, value, index, len);
        } else {
            int64_t o = t / blocks_per_outer, c0 = (t % blocks_per_outer) * COLUMN_BLOCK;
            int64_t len = inner - c0 < COLUMN_BLOCK ? inner - c0 : COLUMN_BLOCK;
            reduce_columns(&job, o, c0, len, value, index);
            store_outputs(&job, o * inner + c0, value, index, len);
        }
    }
    return CML_OK;
}
