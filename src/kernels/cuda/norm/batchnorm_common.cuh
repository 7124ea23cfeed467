/* Internal to norm/batchnorm_fwd.cu and norm/batchnorm_bwd.cu: the per-channel
 * coefficient block and the elementwise pass both directions share.
 * coef (f32, 4 C) holds m, k1, k0, k2 per channel:
 *   forward   y  = (x - m) k1 + k0
 *   backward  dx = k1 dy + k0 - k2 (x - m)      (the CPU's formulas, src/kernels/cpu/batchnorm.c) */
#ifndef CML_KERNELS_CUDA_NORM_BATCHNORM_COMMON_CUH
#define CML_KERNELS_CUDA_NORM_BATCHNORM_COMMON_CUH

#include "kernels/cuda/common/channel_sums.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define BN_BLOCK 256

/* out = the forward (b == NULL: a is x) or the backward (a is dy, b is x) over N C HW elements. */
template <int DT>
static __global__ void bn_apply_kernel(void *out, const void *a, const void *b, const float *coef, long long n,
                                       long long C, long long HW, bool cl) {
    cml__pdl_entry();
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        const long long c = cl ? e - cml__div(e, C) * C : cml__div(e, HW) - cml__div(e, C * HW) * C;
        const float m = coef[c], k1 = coef[C + c], k0 = coef[2 * C + c];
        const float va = cml__ld<DT>(a, e);
        float v;
        if (b) v = k1 * va + k0 - coef[3 * C + c] * (cml__ld<DT>(b, e) - m);
        else v = (va - m) * k1 + k0;
        cml__st<DT>(out, e, v);
    }
}

template <int DT>
static cml_status bn_apply_launch(cml_ctx *ctx, const char *fn, void *out, const void *a, const void *b,
                                  const float *coef, long long N, long long C, long long HW, bool cl) {
    const long long n = N * C * HW;
    const unsigned grid = cml__grid_size(ctx, n, BN_BLOCK);
    cml__launch(bn_apply_kernel<DT>, grid, BN_BLOCK, 0, cml__stream(ctx), out, a, b, coef, n, C, HW, cl);
    return cml__cuda_check_launch(fn, "bn_apply_kernel", cml_dtype_name((cml_dtype)DT), n, grid, BN_BLOCK);
}

/* The workspace: coef (4 C floats) then the partial sums (float2, splits x C) when nparts > 0. */
static inline cml_status bn_workspace(cml_ctx *ctx, long long C, int splits, int nparts, float **coef, float2 **part) {
    const size_t coef_bytes = ((size_t)(4 * C) * sizeof(float) + 255) & ~(size_t)255;
    const size_t part_bytes = (size_t)splits * (size_t)C * sizeof(float2);
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, coef_bytes + (size_t)nparts * ((part_bytes + 255) & ~(size_t)255)));
    *coef = (float *)ws;
    *part = (float2 *)((char *)ws + coef_bytes);
    return CML_OK;
}

#endif
