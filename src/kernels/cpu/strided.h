/* Internal: the CPU engine for strided N-d elementwise loops and the row
 * load/store helpers (any dtype <-> f32 or i64) shared by CPU kernels.
 *
 * An elementwise kernel describes up to CML__EW_MAX_OPERANDS views of the same
 * shape; cml__ew_iter_init() drops size-1 dims and merges dims that are
 * contiguous in every operand, and cml__ew_for_each_piece() calls back on
 * pieces of the innermost dim (at most CML__EW_PIECE elements), in parallel
 * when the loop is large. Pieces let a kernel convert into small f32 stack
 * buffers and run plain, vectorizable loops on them. */
#ifndef CML_KERNELS_CPU_STRIDED_H
#define CML_KERNELS_CPU_STRIDED_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/kernels.h"

#define CML__EW_MAX_OPERANDS 4
#define CML__EW_PIECE 1024
/* Below this many elements a loop runs on the calling thread (threads cost more). */
#define CML__PARALLEL_MIN 32768

typedef struct cml__ew_iter {
    int ndim; /* >= 1 after coalescing */
    int nops;
    int64_t numel;
    int64_t shape[CML_MAX_DIMS];
    int64_t stride[CML__EW_MAX_OPERANDS][CML_MAX_DIMS];
} cml__ew_iter;

/* layouts[k] describes operand k; all share layouts[0]'s shape (checked by the caller). */
void cml__ew_iter_init(cml__ew_iter *it, int nops, const cml_layout *const *layouts);

/* Called with the element offset of the piece's first element in each operand,
 * the innermost stride of each operand, and the piece length. */
typedef void (*cml__ew_piece_fn)(void *job, const int64_t *offset, const int64_t *inner_stride, int64_t len);

void cml__ew_for_each_piece(const cml__ew_iter *it, cml__ew_piece_fn fn, void *job);

/* dst[i] = element (offset + i*stride) of base as f32, i < n. */
void cml__load_f32(float *dst, const void *base, cml_dtype dt, int64_t offset, int64_t stride, int64_t n);
/* Stores src[i] (RNE for narrow floats, rounding + saturation for integers). */
void cml__store_f32(void *base, cml_dtype dt, int64_t offset, int64_t stride, const float *src, int64_t n);
/* Integer operands: exact loads, saturating stores. Only for i32/i64/u8. */
void cml__load_i64(int64_t *dst, const void *base, cml_dtype dt, int64_t offset, int64_t stride, int64_t n);
void cml__store_i64(void *base, cml_dtype dt, int64_t offset, int64_t stride, const int64_t *src, int64_t n);

/* Points at the f32 data itself when it is contiguous f32, else loads it into buf. */
static inline const float *cml__f32_view(float *buf, const void *base, cml_dtype dt, int64_t offset,
                                         int64_t stride, int64_t n) {
    if (dt == CML_F32 && stride == 1) return (const float *)base + offset;
    cml__load_f32(buf, base, dt, offset, stride, n);
    return buf;
}

static inline bool cml__dtype_is_int(cml_dtype dt) { return dt == CML_I32 || dt == CML_I64 || dt == CML_U8; }

#endif
