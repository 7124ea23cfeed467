/* CUDA unary and binary elementwise ops (f32, f16, bf16 storage; f32 math).
 *
 * Two kernels per family: a dense one for the common case (every operand one
 * unit-stride run of the same dtype, 16-byte aligned) that moves 8 elements
 * per thread per step with 16-byte loads/stores in a grid-stride loop, and a
 * strided one for everything else (any layout up to 8 dims, broadcasting by
 * stride 0, negative strides, mixed dtypes, u8 outputs for comparison
 * masks). Both compute every element with
 * the same device function, written to match the CPU definitions in
 * src/kernels/cpu/ewise.c (same formulas, NaN propagation, GELU forms; GELU
 * erf in double like the CPU), so they agree with each other bit for bit and
 * with the CPU to the last ulp or two of the math library. Each output
 * element is written by exactly one thread: results are deterministic. */
#include <math.h>
#include <stdio.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/strided.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define BLOCK 256
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f
#define SQRT_HALF 0.70710678118654752440

/* ---- the math (one definition for both kernels) ---------------------------------- */

static __device__ __forceinline__ float unary_op(int op, float p, float v) {
    switch (op) {
    case CML_UNARY_IDENTITY: return v;
    case CML_UNARY_NEG: return -v;
    case CML_UNARY_EXP: return expf(v);
    case CML_UNARY_LOG: return logf(v);
    case CML_UNARY_SQRT: return sqrtf(v);
    case CML_UNARY_TANH: return tanhf(v);
    case CML_UNARY_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case CML_UNARY_RELU: return (v > 0.0f || v != v) ? v : 0.0f; /* NaN propagates, like torch.relu */
    case CML_UNARY_GELU_TANH: {
        /* Rounded step by step like the CPU's C (no fused multiply-adds). */
        float v3 = __fmul_rn(__fmul_rn(__fmul_rn(GELU_CUBIC, v), v), v);
        float t = tanhf(__fmul_rn(SQRT_2_OVER_PI, __fadd_rn(v, v3)));
        return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, t));
    }
    case CML_UNARY_GELU_ERF: return (float)(0.5 * (double)v * (1.0 + erf((double)v * SQRT_HALF)));
    case CML_UNARY_ABS: return fabsf(v);
    case CML_UNARY_SCALE: return v * p;
    case CML_UNARY_ADD_SCALAR: return v + p;
    case CML_UNARY_POW_SCALAR: return powf(v, p);
    default: return v;
    }
}

static __device__ __forceinline__ float binary_op(int op, float a, float b) {
    switch (op) {
    case CML_BINARY_ADD: return a + b;
    case CML_BINARY_SUB: return a - b;
    case CML_BINARY_MUL: return a * b;
    case CML_BINARY_DIV: return a / b;
    case CML_BINARY_POW: return powf(a, b);
    case CML_BINARY_MAX: return (a > b || a != a) ? a : b; /* NaN propagates (torch.maximum) */
    case CML_BINARY_MIN: return (a < b || a != a) ? a : b;
    case CML_BINARY_EQ: return a == b ? 1.0f : 0.0f;
    case CML_BINARY_GT: return a > b ? 1.0f : 0.0f;
    default: return a;
    }
}

/* One switch per vector, each case an unrolled loop with the op fixed at compile time. */
static __device__ __forceinline__ void unary_vec(int op, float p, float v[CML__VEC]) {
    switch (op) {
#define UNARY_CASE(OP)                                             \
    case OP:                                                       \
        _Pragma("unroll") for (int k = 0; k < CML__VEC; k++) v[k] = unary_op(OP, p, v[k]); \
        break;
        UNARY_CASE(CML_UNARY_IDENTITY)
        UNARY_CASE(CML_UNARY_NEG)
        UNARY_CASE(CML_UNARY_EXP)
        UNARY_CASE(CML_UNARY_LOG)
        UNARY_CASE(CML_UNARY_SQRT)
        UNARY_CASE(CML_UNARY_TANH)
        UNARY_CASE(CML_UNARY_SIGMOID)
        UNARY_CASE(CML_UNARY_RELU)
        UNARY_CASE(CML_UNARY_GELU_TANH)
        UNARY_CASE(CML_UNARY_GELU_ERF)
        UNARY_CASE(CML_UNARY_ABS)
        UNARY_CASE(CML_UNARY_SCALE)
        UNARY_CASE(CML_UNARY_ADD_SCALAR)
        UNARY_CASE(CML_UNARY_POW_SCALAR)
#undef UNARY_CASE
    default: break;
    }
}

static __device__ __forceinline__ void binary_vec(int op, float a[CML__VEC], const float b[CML__VEC]) {
    switch (op) {
#define BINARY_CASE(OP)                                            \
    case OP:                                                       \
        _Pragma("unroll") for (int k = 0; k < CML__VEC; k++) a[k] = binary_op(OP, a[k], b[k]); \
        break;
        BINARY_CASE(CML_BINARY_ADD)
        BINARY_CASE(CML_BINARY_SUB)
        BINARY_CASE(CML_BINARY_MUL)
        BINARY_CASE(CML_BINARY_DIV)
        BINARY_CASE(CML_BINARY_POW)
        BINARY_CASE(CML_BINARY_MAX)
        BINARY_CASE(CML_BINARY_MIN)
        BINARY_CASE(CML_BINARY_EQ)
        BINARY_CASE(CML_BINARY_GT)
#undef BINARY_CASE
    default: break;
    }
}

/* ---- kernels ------------------------------------------------------------------------ */

/* y = op(x) over n dense elements of dtype DT: vectors of 8 in a grid-stride loop,
 * then the last n % 8 elements, one per thread of the first threads. */
template <int DT>
static __global__ void unary_dense_kernel(int op, float p, void *y, const void *x, long long n) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    const long long nvec = n / CML__VEC;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long vi = tid; vi < nvec; vi += step) {
        float v[CML__VEC];
        cml__load_vec<DT>(x, vi, v);
        unary_vec(op, p, v);
        cml__store_vec<DT>(y, vi, v);
    }
    const long long i = nvec * CML__VEC + tid;
    if (i < n) ((T *)y)[i] = cml__from_f32<DT>(unary_op(op, p, cml__to_f32<DT>(((const T *)x)[i])));
}

static __global__ void unary_strided_kernel(const __grid_constant__ cml__ew_geom g, int op, float p, void *y,
                                            int y_dt, const void *x, int x_dt) {
    cml__pdl_entry();
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < g.numel; i += step) {
        long long off[2];
        cml__ew_offsets<2>(g, i, off);
        cml__store_f32(y, y_dt, off[0], unary_op(op, p, cml__load_f32(x, x_dt, off[1])));
    }
}

template <int DT>
static __global__ void binary_dense_kernel(int op, void *y, const void *a, const void *b, long long n) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    const long long nvec = n / CML__VEC;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long vi = tid; vi < nvec; vi += step) {
        float va[CML__VEC], vb[CML__VEC];
        cml__load_vec<DT>(a, vi, va);
        cml__load_vec<DT>(b, vi, vb);
        binary_vec(op, va, vb);
        cml__store_vec<DT>(y, vi, va);
    }
    const long long i = nvec * CML__VEC + tid;
    if (i < n)
        ((T *)y)[i] = cml__from_f32<DT>(
            binary_op(op, cml__to_f32<DT>(((const T *)a)[i]), cml__to_f32<DT>(((const T *)b)[i])));
}

static __global__ void binary_strided_kernel(const __grid_constant__ cml__ew_geom g, int op, void *y, int y_dt,
                                             const void *a, int a_dt, const void *b, int b_dt) {
    cml__pdl_entry();
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < g.numel; i += step) {
        long long off[3];
        cml__ew_offsets<3>(g, i, off);
        cml__store_f32(y, y_dt, off[0], binary_op(op, cml__load_f32(a, a_dt, off[1]), cml__load_f32(b, b_dt, off[2])));
    }
}

/* ---- launches ------------------------------------------------------------------------- */

template <int DT>
static cml_status unary_dense_launch(cml_ctx *ctx, int op, float p, void *y, const void *x, long long n) {
    const long long nvec = n / CML__VEC;
    const unsigned grid = cml__grid_size(ctx, nvec > 0 ? nvec : 1, BLOCK);
    cml__launch(unary_dense_kernel<DT>, grid, BLOCK, 0, cml__stream(ctx), op, p, y, x, n);
    return cml__cuda_check_launch("cml_unary", "unary_dense_kernel", cml_dtype_name((cml_dtype)DT), n, grid, BLOCK);
}

static cml_status unary_strided_launch(cml_ctx *ctx, const cml__ew_geom *g, int op, float p, void *y,
                                       cml_dtype y_dt, const void *x, cml_dtype x_dt) {
    const unsigned grid = cml__grid_size(ctx, g->numel, BLOCK);
    cml__launch(unary_strided_kernel, grid, BLOCK, 0, cml__stream(ctx), *g, op, p, y, (int)y_dt, x, (int)x_dt);
    char dts[32];
    snprintf(dts, sizeof dts, "%s,%s", cml_dtype_name(y_dt), cml_dtype_name(x_dt));
    return cml__cuda_check_launch("cml_unary", "unary_strided_kernel", dts, g->numel, grid, BLOCK);
}

template <int DT>
static cml_status binary_dense_launch(cml_ctx *ctx, int op, void *y, const void *a, const void *b, long long n) {
    const long long nvec = n / CML__VEC;
    const unsigned grid = cml__grid_size(ctx, nvec > 0 ? nvec : 1, BLOCK);
    cml__launch(binary_dense_kernel<DT>, grid, BLOCK, 0, cml__stream(ctx), op, y, a, b, n);
    return cml__cuda_check_launch("cml_binary", "binary_dense_kernel", cml_dtype_name((cml_dtype)DT), n, grid, BLOCK);
}

static cml_status binary_strided_launch(cml_ctx *ctx, const cml__ew_geom *g, int op, void *y, cml_dtype y_dt,
                                        const void *a, cml_dtype a_dt, const void *b, cml_dtype b_dt) {
    const unsigned grid = cml__grid_size(ctx, g->numel, BLOCK);
    cml__launch(binary_strided_kernel, grid, BLOCK, 0, cml__stream(ctx), *g, op, y, (int)y_dt, a, (int)a_dt, b,
                (int)b_dt);
    char dts[48];
    snprintf(dts, sizeof dts, "%s,%s,%s", cml_dtype_name(y_dt), cml_dtype_name(a_dt), cml_dtype_name(b_dt));
    return cml__cuda_check_launch("cml_binary", "binary_strided_kernel", dts, g->numel, grid, BLOCK);
}

/* ---- entry points (arguments validated by src/kernels/ewise.c) ---------------------------- */

extern "C" cml_status cml__unary_cuda(cml_ctx *ctx, cml_unary_op op, float param,
                                      void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                                      const void *x, const cml_layout *x_layout, cml_dtype x_dtype) {
    static const char fn[] = "cml_unary";
    CML_TRY(cml__cuda_check_out_dtype(fn, "y_dtype", y_dtype));
    CML_TRY(cml__cuda_check_float_dtype(fn, "x_dtype", x_dtype));
    const cml_layout *layouts[2] = {y_layout, x_layout};
    cml__ew_geom g;
    cml__ew_geom_init(&g, 2, layouts);
    if (g.numel == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    if (y_dtype == x_dtype && cml__ew_geom_dense(&g, 2) && cml__aligned16(y) && cml__aligned16(x)) {
        switch (y_dtype) {
        case CML_F16: return unary_dense_launch<CML_F16>(ctx, (int)op, param, y, x, g.numel);
        case CML_BF16: return unary_dense_launch<CML_BF16>(ctx, (int)op, param, y, x, g.numel);
        default: return unary_dense_launch<CML_F32>(ctx, (int)op, param, y, x, g.numel);
        }
    }
    return unary_strided_launch(ctx, &g, (int)op, param, y, y_dtype, x, x_dtype);
}

extern "C" cml_status cml__binary_cuda(cml_ctx *ctx, cml_binary_op op,
                                       void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                                       const void *a, const cml_layout *a_layout, cml_dtype a_dtype,
                                       const void *b, const cml_layout *b_layout, cml_dtype b_dtype) {
    static const char fn[] = "cml_binary";
    CML_TRY(cml__cuda_check_out_dtype(fn, "y_dtype", y_dtype));
    CML_TRY(cml__cuda_check_float_dtype(fn, "a_dtype", a_dtype));
    CML_TRY(cml__cuda_check_float_dtype(fn, "b_dtype", b_dtype));
    const cml_layout *layouts[3] = {y_layout, a_layout, b_layout};
    cml__ew_geom g;
    cml__ew_geom_init(&g, 3, layouts);
    if (g.numel == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    if (y_dtype == a_dtype && y_dtype == b_dtype && cml__ew_geom_dense(&g, 3) && cml__aligned16(y) &&
        cml__aligned16(a) && cml__aligned16(b)) {
        switch (y_dtype) {
        case CML_F16: return binary_dense_launch<CML_F16>(ctx, (int)op, y, a, b, g.numel);
        case CML_BF16: return binary_dense_launch<CML_BF16>(ctx, (int)op, y, a, b, g.numel);
        default: return binary_dense_launch<CML_F32>(ctx, (int)op, y, a, b, g.numel);
        }
    }
    return binary_strided_launch(ctx, &g, (int)op, y, y_dtype, a, a_dtype, b, b_dtype);
}
