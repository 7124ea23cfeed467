/* N-d strided elementwise loops on the GPU.
 *
 * The host coalesces the operands' layouts with the CPU engine's
 * cml__ew_iter_init (size-1 dims dropped, dims contiguous in every operand
 * merged), so a contiguous or merely broadcast loop usually becomes 1 or 2
 * dims; the kernel then maps a flat element index to each operand's offset.
 * The geometry is a __grid_constant__ kernel parameter indexed only with
 * compile-time constants (unrolled over CML_MAX_DIMS), so it never goes
 * through local memory. */
#ifndef CML_KERNELS_CUDA_COMMON_STRIDED_CUH
#define CML_KERNELS_CUDA_COMMON_STRIDED_CUH

#include <stdint.h>

extern "C" {
#include "kernels/cpu/strided.h"
}

#define CML__GPU_EW_MAX_OPS 4 /* where: y, cond, a, b */

typedef struct cml__ew_geom {
    int ndim;
    long long numel;
    long long shape[CML_MAX_DIMS];
    long long stride[CML__GPU_EW_MAX_OPS][CML_MAX_DIMS];
} cml__ew_geom;

/* layouts[0] is the output; all share its shape (checked by the public entry point). */
static inline void cml__ew_geom_init(cml__ew_geom *g, int nops, const cml_layout *const *layouts) {
    cml__ew_iter it;
    cml__ew_iter_init(&it, nops, layouts);
    *g = cml__ew_geom{};
    g->ndim = it.ndim;
    g->numel = it.numel;
    for (int d = 0; d < it.ndim; d++) {
        g->shape[d] = it.shape[d];
        for (int k = 0; k < nops; k++) g->stride[k][d] = it.stride[k][d];
    }
}

/* Whether every operand is one dense, unit-stride run (the vectorized fast path's condition). */
static inline bool cml__ew_geom_dense(const cml__ew_geom *g, int nops) {
    if (g->numel <= 1) return true;
    if (g->ndim != 1) return false;
    for (int k = 0; k < nops; k++)
        if (g->stride[k][0] != 1) return false;
    return true;
}

static inline bool cml__aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* off[k] = offset in elements of flat element i (row-major over g's shape) in operand k. */
template <int NOPS>
static __device__ __forceinline__ void cml__ew_offsets(const cml__ew_geom &g, long long i, long long off[NOPS]) {
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    if (g.ndim == 1) {
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] = i * g.stride[k][0];
        return;
    }
#pragma unroll
    for (int j = 0; j < CML_MAX_DIMS; j++) {
        const int d = CML_MAX_DIMS - 1 - j; /* innermost first */
        if (d < g.ndim) {
            long long n = g.shape[d];
            long long idx = i % n;
            i /= n;
#pragma unroll
            for (int k = 0; k < NOPS; k++) off[k] += idx * g.stride[k][d];
        }
    }
}

#endif
