/* CUDA unary backward (dx = dy * op'(x)) and where (y = cond ? a : b).
 *
 * unary_bwd: n contiguous elements, f32/f16/bf16 storage, f32 math with the
 * CPU's formulas (src/kernels/cpu/ewise.c unary_bwd_apply), one thread per
 * element in a grid-stride loop. where: any layout (strided.cuh), elements
 * copied as raw bytes (exact for every dtype). Each output element is written
 * by one thread: deterministic. */
#include <math.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/strided.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define BLOCK 256
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f
#define INV_SQRT_2PI 0.3989422804014327
#define SQRT_HALF 0.70710678118654752440

/* x or y may be NULL (the entry point passes only what the derivative reads). */
static __device__ __forceinline__ float unary_bwd_op(int op, float p, float dy, const void *x, const void *y, int dt,
                                                     long long i) {
    switch (op) {
    case CML_UNARY_IDENTITY:
    case CML_UNARY_ADD_SCALAR: return dy;
    case CML_UNARY_NEG: return -dy;
    case CML_UNARY_SCALE: return dy * p;
    case CML_UNARY_EXP: return y ? dy * cml__load_f32(y, dt, i) : dy * expf(cml__load_f32(x, dt, i));
    case CML_UNARY_LOG: return dy / cml__load_f32(x, dt, i);
    case CML_UNARY_SQRT:
        return y ? __fdiv_rn(__fmul_rn(dy, 0.5f), cml__load_f32(y, dt, i))
                 : __fdiv_rn(__fmul_rn(dy, 0.5f), sqrtf(cml__load_f32(x, dt, i)));
    case CML_UNARY_TANH: {
        float t = y ? cml__load_f32(y, dt, i) : tanhf(cml__load_f32(x, dt, i));
        return __fmul_rn(dy, __fsub_rn(1.0f, __fmul_rn(t, t)));
    }
    case CML_UNARY_SIGMOID: {
        float s = y ? cml__load_f32(y, dt, i) : 1.0f / (1.0f + expf(-cml__load_f32(x, dt, i)));
        return __fmul_rn(__fmul_rn(dy, s), __fsub_rn(1.0f, s));
    }
    case CML_UNARY_RELU: return (x ? cml__load_f32(x, dt, i) : cml__load_f32(y, dt, i)) > 0.0f ? dy : 0.0f;
    case CML_UNARY_GELU_TANH: {
        float v = cml__load_f32(x, dt, i);
        float v3 = __fmul_rn(__fmul_rn(__fmul_rn(GELU_CUBIC, v), v), v);
        float s = 1.0f / (1.0f + expf(__fmul_rn(-2.0f * SQRT_2_OVER_PI, __fadd_rn(v, v3))));
        float du = __fmul_rn(SQRT_2_OVER_PI, __fadd_rn(1.0f, __fmul_rn(__fmul_rn(3.0f * GELU_CUBIC, v), v)));
        float t = __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(2.0f, v), s), __fsub_rn(1.0f, s)), du);
        return __fmul_rn(dy, __fadd_rn(s, t));
    }
    case CML_UNARY_GELU_ERF: {
        double v = cml__load_f32(x, dt, i);
        double d = 0.5 * (1.0 + erf(v * SQRT_HALF)) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
        return (float)(dy * d);
    }
    case CML_UNARY_ABS: {
        float v = cml__load_f32(x, dt, i);
        return v > 0.0f ? dy : v < 0.0f ? -dy : 0.0f * dy;
    }
    case CML_UNARY_POW_SCALAR:
        if (p == 0.0f) return 0.0f * dy;
        return __fmul_rn(__fmul_rn(dy, p), powf(cml__load_f32(x, dt, i), p - 1.0f));
    default: return dy;
    }
}

static __global__ void unary_bwd_kernel(int op, float p, void *dx, const void *dy, const void *x, const void *y,
                                        int dt, long long n) {
    cml__pdl_entry();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        cml__store_f32(dx, dt, i, unary_bwd_op(op, p, cml__load_f32(dy, dt, i), x, y, dt, i));
}

extern "C" cml_status cml__unary_bwd_cuda(cml_ctx *ctx, cml_unary_op op, float param, void *dx, const void *dy,
                                          const void *x, const void *y, int64_t n, cml_dtype dtype) {
    static const char fn[] = "cml_unary_bwd";
    CML_TRY(cml__cuda_check_float_dtype(fn, "dtype", dtype));
    if (n == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    const unsigned grid = cml__grid_size(ctx, n, BLOCK);
    cml__launch(unary_bwd_kernel, grid, BLOCK, 0, cml__stream(ctx), (int)op, param, dx, dy, x, y, (int)dtype, n);
    return cml__cuda_check_launch(fn, "unary_bwd_kernel", cml_dtype_name(dtype), n, grid, BLOCK);
}

template <int ES> struct bytes_of { unsigned char b[ES]; };

template <int ES>
static __global__ void where_kernel(cml__ew_geom g, void *y, const uint8_t *cond, const void *a, const void *b) {
    cml__pdl_entry();
    typedef bytes_of<ES> E;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < g.numel;
         i += (long long)gridDim.x * blockDim.x) {
        long long off[4];
        cml__ew_offsets<4>(g, i, off);
        ((E *)y)[off[0]] = cond[off[1]] ? ((const E *)a)[off[2]] : ((const E *)b)[off[3]];
    }
}

extern "C" cml_status cml__where_fwd_cuda(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype,
                                          const uint8_t *cond, const cml_layout *cond_layout, const void *a,
                                          const cml_layout *a_layout, const void *b, const cml_layout *b_layout) {
    static const char fn[] = "cml_where_fwd";
    const cml_layout *layouts[4] = {y_layout, cond_layout, a_layout, b_layout};
    cml__ew_geom g;
    cml__ew_geom_init(&g, 4, layouts);
    if (g.numel == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    const unsigned grid = cml__grid_size(ctx, g.numel, BLOCK);
    cudaStream_t s = cml__stream(ctx);
    switch (cml_dtype_size(dtype)) {
    case 1: cml__launch(where_kernel<1>, grid, BLOCK, 0, s, g, y, cond, a, b); break;
    case 2: cml__launch(where_kernel<2>, grid, BLOCK, 0, s, g, y, cond, a, b); break;
    case 4: cml__launch(where_kernel<4>, grid, BLOCK, 0, s, g, y, cond, a, b); break;
    default: cml__launch(where_kernel<8>, grid, BLOCK, 0, s, g, y, cond, a, b); break;
    }
    return cml__cuda_check_launch(fn, "where_kernel", cml_dtype_name(dtype), g.numel, grid, BLOCK);
}
