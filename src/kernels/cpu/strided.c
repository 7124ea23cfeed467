/* The CPU strided-loop engine and row load/store helpers (see strided.h). */
#include "kernels/cpu/strided.h"

#include <omp.h>

void cml__ew_iter_init(cml__ew_iter *it, int nops, const cml_layout *const *layouts) {
    const cml_layout *shape_src = layouts[0];
    it->nops = nops;
    it->numel = 1;
    int nd = 0;
    /* Size-1 dims contribute nothing to addressing: drop them. */
    for (int d = 0; d < shape_src->ndim; d++) {
        it->numel *= shape_src->shape[d];
        if (shape_src->shape[d] == 1) continue;
        it->shape[nd] = shape_src->shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][nd] = layouts[k]->stride[d];
        nd++;
    }
    if (nd == 0 || it->numel == 0) {
        it->ndim = 1;
        it->shape[0] = it->numel; /* 0 or 1 */
        for (int k = 0; k < nops; k++) it->stride[k][0] = 0;
        return;
    }
    /* Merge dim d into the one before it when that is contiguous in every operand,
     * so that e.g. a contiguous (B, T, C) loop becomes one long row. */
    int w = 0;
    for (int d = 1; d < nd; d++) {
        bool mergeable = true;
        for (int k = 0; k < nops; k++)
            if (it->stride[k][w] != it->stride[k][d] * it->shape[d]) mergeable = false;
        if (mergeable) {
            it->shape[w] *= it->shape[d];
            for (int k = 0; k < nops; k++) it->stride[k][w] = it->stride[k][d];
        } else {
            w++;
            it->shape[w] = it->shape[d];
            for (int k = 0; k < nops; k++) it->stride[k][w] = it->stride[k][d];
        }
    }
    it->ndim = w + 1;
}

/* Runs tasks [t0, t1): task t is piece (t % pieces_per_row) of row (t / pieces_per_row),
 * rows being the multi-indices of all dims but the last, in row-major order. */
static void run_pieces(const cml__ew_iter *it, cml__ew_piece_fn fn, void *job, int64_t t0, int64_t t1) {
    int last = it->ndim - 1;
    int64_t inner = it->shape[last];
    int64_t pieces_per_row = (inner + CML__EW_PIECE - 1) / CML__EW_PIECE;
    int64_t row = t0 / pieces_per_row, piece = t0 % pieces_per_row;
    int64_t idx[CML_MAX_DIMS] = {0};
    int64_t base[CML__EW_MAX_OPERANDS] = {0};
    int64_t inner_stride[CML__EW_MAX_OPERANDS] = {0};
    int64_t rem = row;
    for (int d = last - 1; d >= 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    for (int k = 0; k < it->nops; k++) {
        inner_stride[k] = it->stride[k][last];
        for (int d = 0; d < last; d++) base[k] += idx[d] * it->stride[k][d];
    }
    for (int64_t t = t0; t < t1; t++) {
        int64_t start = piece * CML__EW_PIECE;
        int64_t len = inner - start < CML__EW_PIECE ? inner - start : CML__EW_PIECE;
        int64_t offset[CML__EW_MAX_OPERANDS];
        for (int k = 0; k < it->nops; k++) offset[k] = base[k] + start * inner_stride[k];
        fn(job, offset, inner_stride, len);
        if (++piece < pieces_per_row) continue;
        piece = 0;
        /* Odometer step to the next row. */
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < it->nops; k++) base[k] += it->stride[k][d];
            if (idx[d] < it->shape[d]) break;
            for (int k = 0; k < it->nops; k++) base[k] -= it->stride[k][d] * it->shape[d];
            idx[d] = 0;
        }
    }
}

void cml__ew_for_each_piece(const cml__ew_iter *it, cml__ew_piece_fn fn, void *job) {
    if (it->numel == 0) return;
    int64_t inner = it->shape[it->ndim - 1];
    int64_t tasks = (it->numel / inner) * ((inner + CML__EW_PIECE - 1) / CML__EW_PIECE);
    if (it->numel < CML__PARALLEL_MIN || omp_get_max_threads() == 1 || tasks == 1) {
        run_pieces(it, fn, job, 0, tasks);
        return;
    }
    /* Each thread takes one contiguous range of tasks: one unravel per thread. */
#pragma omp parallel
    {
        int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
        int64_t t0 = tasks * tid / nt, t1 = tasks * (tid + 1) / nt;
        if (t0 < t1) run_pieces(it, fn, job, t0, t1);
    }
}

void cml__load_f32(float *dst, const void *base, cml_dtype dt, int64_t offset, int64_t stride, int64_t n) {
    switch (dt) {
    case CML_F32: {
        const float *p = (const float *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case CML_BF16: {
        const uint16_t *p = (const uint16_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = cml_bf16_to_f32(p[i * stride]);
        break;
    }
    case CML_F16: {
        const uint16_t *p = (const uint16_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = cml_f16_to_f32(p[i * stride]);
        break;
    }
    case CML_I32: {
        const int32_t *p = (const int32_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = (float)p[i * stride];
        break;
    }
    case CML_I64: {
        const int64_t *p = (const int64_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = (float)p[i * stride];
        break;
    }
    case CML_U8: {
        const uint8_t *p = (const uint8_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = (float)p[i * stride];
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) dst[i] = cml_dtype_load(base, dt, offset + i * stride);
        break;
    }
}

void cml__store_f32(void *base, cml_dtype dt, int64_t offset, int64_t stride, const float *src, int64_t n) {
    switch (dt) {
    case CML_F32: {
        float *p = (float *)base + offset;
        for (int64_t i = 0; i < n; i++) p[i * stride] = src[i];
        break;
    }
    case CML_BF16: {
        uint16_t *p = (uint16_t *)base + offset;
        for (int64_t i = 0; i < n; i++) p[i * stride] = cml_f32_to_bf16(src[i]);
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) cml_dtype_store(base, dt, offset + i * stride, src[i]);
        break;
    }
}

void cml__load_i64(int64_t *dst, const void *base, cml_dtype dt, int64_t offset, int64_t stride, int64_t n) {
    if (dt == CML_I64) {
        const int64_t *p = (const int64_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
    } else if (dt == CML_I32) {
        const int32_t *p = (const int32_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
    } else {
        const uint8_t *p = (const uint8_t *)base + offset;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
    }
}

void cml__store_i64(void *base, cml_dtype dt, int64_t offset, int64_t stride, const int64_t *src, int64_t n) {
    if (dt == CML_I64) {
        int64_t *p = (int64_t *)base + offset;
        for (int64_t i = 0; i < n; i++) p[i * stride] = src[i];
    } else if (dt == CML_I32) {
        int32_t *p = (int32_t *)base + offset;
        for (int64_t i = 0; i < n; i++)
            p[i * stride] = src[i] > INT32_MAX ? INT32_MAX : src[i] < INT32_MIN ? INT32_MIN : (int32_t)src[i];
    } else {
        uint8_t *p = (uint8_t *)base + offset;
        for (int64_t i = 0; i < n; i++) p[i * stride] = src[i] > 255 ? 255 : src[i] < 0 ? 0 : (uint8_t)src[i];
    }
}
