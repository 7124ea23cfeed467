/* CPU index_select and gather along the middle axis of (outer, n, inner).
 *
 * Forward passes copy raw elements (exact for every dtype). Backward passes
 * accumulate with a fixed order per destination element — contributions are
 * added in increasing j — so they are deterministic without atomics: the
 * work is split by destination (dx rows for index_select, dx columns for
 * gather), never by source. Index values are range-checked up front so that
 * a bad index changes no output. */
#include <string.h>

#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"
#include "runtime/error.h"

#define COLUMN_BLOCK 256

static cml_status check_indices(const char *fn, const int64_t *idx, int64_t count, int64_t n_src) {
    for (int64_t k = 0; k < count; k++)
        if (idx[k] < 0 || idx[k] >= n_src)
            return cml__error(CML_ERR_INVALID_ARG, "%s: idx[%lld]=%lld must be in [0, n_src=%lld)", fn,
                              (long long)k, (long long)idx[k], (long long)n_src);
    return CML_OK;
}

/* dst[0..n) += src[0..n) in f32 math, stored back in dtype. */
static void add_row(void *dst, int64_t dst_off, const void *src, int64_t src_off, int64_t n, cml_dtype dt) {
    if (dt == CML_F32) {
        float *d = (float *)dst + dst_off;
        const float *s = (const float *)src + src_off;
        for (int64_t i = 0; i < n; i++) d[i] += s[i];
        return;
    }
    float dbuf[COLUMN_BLOCK], sbuf[COLUMN_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += COLUMN_BLOCK) {
        int64_t len = n - i0 < COLUMN_BLOCK ? n - i0 : COLUMN_BLOCK;
        cml__load_f32(dbuf, dst, dt, dst_off + i0, 1, len);
        cml__load_f32(sbuf, src, dt, src_off + i0, 1, len);
        for (int64_t i = 0; i < len; i++) dbuf[i] += sbuf[i];
        cml__store_f32(dst, dt, dst_off + i0, 1, dbuf, len);
    }
}

cml_status cml__index_select_fwd_cpu(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                                     int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                     cml_dtype dtype) {
    if (outer * inner * n_idx == 0) return CML_OK;
    CML_TRY(check_indices("cml_index_select_fwd", idx, n_idx, n_src));
    size_t row_bytes = (size_t)inner * cml_dtype_size(dtype);
    int64_t rows = outer * n_idx;
#pragma omp parallel for schedule(static) if (rows * inner >= CML__PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r / n_idx, j = r % n_idx;
        memcpy((char *)y + (size_t)r * row_bytes, (const char *)x + (size_t)(o * n_src + idx[j]) * row_bytes,
               row_bytes);
    }
    return CML_OK;
}

cml_status cml__index_select_bwd_cpu(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                                     int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                     cml_dtype dtype) {
    if (outer * inner * n_idx == 0) return CML_OK;
    CML_TRY(check_indices("cml_index_select_bwd", idx, n_idx, n_src));
    /* Split each outer slice's destination rows into ranges; a task scans all j
     * in order and adds the ones that land in its range (embedding backward:
     * outer = 1, so the ranges are what spreads the work over threads). */
    bool parallel = outer * n_idx * inner >= CML__PARALLEL_MIN;
    int64_t ranges = parallel && outer < omp_get_max_threads() ? omp_get_max_threads() : 1;
    if (ranges > n_src) ranges = n_src;
    int64_t tasks = outer * ranges;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / ranges, part = t % ranges;
        int64_t lo = n_src * part / ranges, hi = n_src * (part + 1) / ranges;
        for (int64_t j = 0; j < n_idx; j++)
            if (idx[j] >= lo && idx[j] < hi)
                add_row(dx, (o * n_src + idx[j]) * inner, dy, (o * n_idx + j) * inner, inner, dtype);
    }
    return CML_OK;
}

cml_status cml__gather_fwd_cpu(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                               int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype) {
    if (outer * inner * n_idx == 0) return CML_OK;
    CML_TRY(check_indices("cml_gather_fwd", idx, outer * n_idx * inner, n_src));
    size_t es = cml_dtype_size(dtype);
    int64_t rows = outer * n_idx;
#pragma omp parallel for schedule(static) if (rows * inner >= CML__PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r / n_idx;
        const int64_t *row_idx = idx + r * inner;
        char *dst = (char *)y + (size_t)(r * inner) * es;
        const char *src = (const char *)x + (size_t)(o * n_src * inner) * es;
        for (int64_t i = 0; i < inner; i++)
            memcpy(dst + (size_t)i * es, src + (size_t)(row_idx[i] * inner + i) * es, es);
    }
    return CML_OK;
}

cml_status cml__gather_bwd_cpu(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                               int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                               cml_dtype dtype) {
    if (outer * inner * n_idx == 0) return CML_OK;
    CML_TRY(check_indices("cml_gather_bwd", idx, outer * n_idx * inner, n_src));
    /* Column i of slice o only ever receives from column i: tasks own column blocks. */
    int64_t blocks = (inner + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    int64_t tasks = outer * blocks;
#pragma omp parallel for schedule(static) if (outer * n_idx * inner >= CML__PARALLEL_MIN)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / blocks, c0 = (t % blocks) * COLUMN_BLOCK;
        int64_t c1 = inner - c0 < COLUMN_BLOCK ? inner : c0 + COLUMN_BLOCK;
        for (int64_t j = 0; j < n_idx; j++) {
            int64_t src_row = (o * n_idx + j) * inner;
            for (int64_t i = c0; i < c1; i++) {
                int64_t d = (o * n_src + idx[src_row + i]) * inner + i;
                if (dtype == CML_F32) ((float *)dx)[d] += ((const float *)dy)[src_row + i];
                else cml_dtype_store(dx, dtype, d, cml_dtype_load(dx, dtype, d) + cml_dtype_load(dy, dtype, src_row + i));
            }
        }
    }
    return CML_OK;
}
