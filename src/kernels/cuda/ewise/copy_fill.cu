/* CUDA copy (with f32/f16/bf16 conversion) and fill.
 *
 * Like the CPU versions (src/kernels/cpu/ewise_copy.c) these move elements
 * rather than compute on them: a same-dtype copy moves raw element bytes
 * (any dtype, exact, NaN payloads included; a dense one is a single
 * cudaMemcpyAsync), a fill writes the element's bytes as the CPU encodes them
 * (any dtype), and a converting copy goes through f32 with the CPU's rounding
 * (dtype.cuh). Dense, 16-byte aligned operands take a vectorized grid-stride
 * kernel; any other layout the strided one. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/strided.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"

extern "C" {
#include "kernels/cpu/cpu_kernels.h"
}

#define BLOCK 256

/* ---- kernels ------------------------------------------------------------------------ */

/* y = x converted from dtype XT to YT, n dense elements (8 per thread per step). */
template <int YT, int XT>
static __global__ void convert_dense_kernel(void *y, const void *x, long long n) {
    cml__pdl_entry();
    typedef typename cml__elem<YT>::type TY;
    typedef typename cml__elem<XT>::type TX;
    const long long nvec = n / CML__VEC;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long vi = tid; vi < nvec; vi += step) {
        float v[CML__VEC];
        cml__load_vec<XT>(x, vi, v);
        cml__store_vec<YT>(y, vi, v);
    }
    const long long i = nvec * CML__VEC + tid;
    if (i < n) ((TY *)y)[i] = cml__from_f32<YT>(cml__to_f32<XT>(((const TX *)x)[i]));
}

static __global__ void convert_strided_kernel(const __grid_constant__ cml__ew_geom g, void *y, int y_dt,
                                              const void *x, int x_dt) {
    cml__pdl_entry();
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < g.numel; i += step) {
        long long off[2];
        cml__ew_offsets<2>(g, i, off);
        cml__store_f32(y, y_dt, off[0], cml__load_f32(x, x_dt, off[1]));
    }
}

/* Raw elements of sizeof(T) bytes, any layout (same-dtype copies that are not dense). */
template <typename T>
static __global__ void copy_strided_kernel(const __grid_constant__ cml__ew_geom g, T *y, const T *x) {
    cml__pdl_entry();
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < g.numel; i += step) {
        long long off[2];
        cml__ew_offsets<2>(g, i, off);
        y[off[0]] = x[off[1]];
    }
}

/* n dense elements of sizeof(T) bytes set to `value`: 16-byte stores of `pattern`
 * (value repeated), then the remaining elements one per thread. */
template <typename T>
static __global__ void fill_dense_kernel(T *y, long long n, uint4 pattern, T value) {
    cml__pdl_entry();
    constexpr int per_vec = 16 / (int)sizeof(T);
    const long long nvec = n / per_vec;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long vi = tid; vi < nvec; vi += step) ((uint4 *)y)[vi] = pattern;
    const long long i = nvec * per_vec + tid;
    if (i < n) y[i] = value;
}

template <typename T>
static __global__ void fill_strided_kernel(const __grid_constant__ cml__ew_geom g, T *y, T value) {
    cml__pdl_entry();
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < g.numel; i += step) {
        long long off[1];
        cml__ew_offsets<1>(g, i, off);
        y[off[0]] = value;
    }
}

/* ---- launches ------------------------------------------------------------------------- */

template <int YT, int XT>
static cml_status convert_dense_launch(cml_ctx *ctx, void *y, const void *x, long long n) {
    const long long nvec = n / CML__VEC;
    const unsigned grid = cml__grid_size(ctx, nvec > 0 ? nvec : 1, BLOCK);
    cml__launch(convert_dense_kernel<YT, XT>, grid, BLOCK, 0, cml__stream(ctx), y, x, n);
    char dts[32];
    snprintf(dts, sizeof dts, "%s,%s", cml_dtype_name((cml_dtype)YT), cml_dtype_name((cml_dtype)XT));
    return cml__cuda_check_launch("cml_copy", "convert_dense_kernel", dts, n, grid, BLOCK);
}

template <int YT>
static cml_status convert_dense_dispatch(cml_ctx *ctx, void *y, const void *x, cml_dtype x_dt, long long n) {
    switch (x_dt) {
    case CML_F16: return convert_dense_launch<YT, CML_F16>(ctx, y, x, n);
    case CML_BF16: return convert_dense_launch<YT, CML_BF16>(ctx, y, x, n);
    default: return convert_dense_launch<YT, CML_F32>(ctx, y, x, n);
    }
}

static cml_status convert_strided_launch(cml_ctx *ctx, const cml__ew_geom *g, void *y, cml_dtype y_dt,
                                         const void *x, cml_dtype x_dt) {
    const unsigned grid = cml__grid_size(ctx, g->numel, BLOCK);
    cml__launch(convert_strided_kernel, grid, BLOCK, 0, cml__stream(ctx), *g, y, (int)y_dt, x, (int)x_dt);
    char dts[32];
    snprintf(dts, sizeof dts, "%s,%s", cml_dtype_name(y_dt), cml_dtype_name(x_dt));
    return cml__cuda_check_launch("cml_copy", "convert_strided_kernel", dts, g->numel, grid, BLOCK);
}

template <typename T>
static cml_status copy_strided_launch(cml_ctx *ctx, const cml__ew_geom *g, void *y, const void *x, cml_dtype dt) {
    const unsigned grid = cml__grid_size(ctx, g->numel, BLOCK);
    cml__launch(copy_strided_kernel<T>, grid, BLOCK, 0, cml__stream(ctx), *g, (T *)y, (const T *)x);
    return cml__cuda_check_launch("cml_copy", "copy_strided_kernel", cml_dtype_name(dt), g->numel, grid, BLOCK);
}

template <typename T>
static cml_status fill_launch(cml_ctx *ctx, const cml__ew_geom *g, void *y, const unsigned char *bytes,
                              cml_dtype dt) {
    T value;
    memcpy(&value, bytes, sizeof value);
    if (cml__ew_geom_dense(g, 1) && cml__aligned16(y)) {
        uint4 pattern;
        unsigned char rep[16];
        for (int k = 0; k < 16; k++) rep[k] = bytes[k % sizeof(T)];
        memcpy(&pattern, rep, sizeof pattern);
        const long long nvec = g->numel / (16 / (long long)sizeof(T));
        const unsigned grid = cml__grid_size(ctx, nvec > 0 ? nvec : 1, BLOCK);
        cml__launch(fill_dense_kernel<T>, grid, BLOCK, 0, cml__stream(ctx), (T *)y, g->numel, pattern, value);
        return cml__cuda_check_launch("cml_fill", "fill_dense_kernel", cml_dtype_name(dt), g->numel, grid, BLOCK);
    }
    const unsigned grid = cml__grid_size(ctx, g->numel, BLOCK);
    cml__launch(fill_strided_kernel<T>, grid, BLOCK, 0, cml__stream(ctx), *g, (T *)y, value);
    return cml__cuda_check_launch("cml_fill", "fill_strided_kernel", cml_dtype_name(dt), g->numel, grid, BLOCK);
}

/* ---- entry points (arguments validated by src/kernels/ewise.c) ---------------------------- */

extern "C" cml_status cml__copy_cuda(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                                     const void *x, const cml_layout *x_layout, cml_dtype x_dtype) {
    static const char fn[] = "cml_copy";
    const cml_layout *layouts[2] = {y_layout, x_layout};
    cml__ew_geom g;
    cml__ew_geom_init(&g, 2, layouts);
    if (g.numel == 0) return CML_OK;
    if (y_dtype == x_dtype) {
        size_t es = cml_dtype_size(y_dtype);
        if (cml__ew_geom_dense(&g, 2)) {
            if (y == x) return CML_OK; /* the same view: nothing to move */
            CML_TRY(cml__cuda_activate(ctx));
            CML_CUDA_TRY(fn, cudaMemcpyAsync(y, x, (size_t)g.numel * es, cudaMemcpyDeviceToDevice, cml__stream(ctx)));
            return CML_OK;
        }
        CML_TRY(cml__cuda_activate(ctx));
        switch (es) {
        case 1: return copy_strided_launch<uint8_t>(ctx, &g, y, x, y_dtype);
        case 2: return copy_strided_launch<uint16_t>(ctx, &g, y, x, y_dtype);
        case 4: return copy_strided_launch<uint32_t>(ctx, &g, y, x, y_dtype);
        default: return copy_strided_launch<unsigned long long>(ctx, &g, y, x, y_dtype);
        }
    }
    /* u8 (masks, as in dropout's backward) to a float dtype: exact, through the strided kernel */
    const bool from_u8 = x_dtype == CML_U8 && cml__cuda_float_dtype(y_dtype);
    if (!from_u8 && (!cml__cuda_float_dtype(y_dtype) || !cml__cuda_float_dtype(x_dtype)))
        return cml__error(CML_ERR_UNSUPPORTED,
                          "%s: converting %s to %s is not supported on CUDA yet (conversions among f32, f16 and "
                          "bf16 are, u8 to them, and same-dtype copies of any dtype)",
                          fn, cml_dtype_name(x_dtype), cml_dtype_name(y_dtype));
    CML_TRY(cml__cuda_activate(ctx));
    if (!from_u8 && cml__ew_geom_dense(&g, 2) && cml__aligned16(y) && cml__aligned16(x)) {
        switch (y_dtype) {
        case CML_F16: return convert_dense_dispatch<CML_F16>(ctx, y, x, x_dtype, g.numel);
        case CML_BF16: return convert_dense_dispatch<CML_BF16>(ctx, y, x, x_dtype, g.numel);
        default: return convert_dense_dispatch<CML_F32>(ctx, y, x, x_dtype, g.numel);
        }
    }
    return convert_strided_launch(ctx, &g, y, y_dtype, x, x_dtype);
}

extern "C" cml_status cml__fill_cuda(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype,
                                     double value) {
    const cml_layout *layouts[1] = {y_layout};
    cml__ew_geom g;
    cml__ew_geom_init(&g, 1, layouts);
    if (g.numel == 0) return CML_OK;
    /* Encode the element exactly as the CPU does, by running the CPU fill on one host element. */
    unsigned char bytes[8] = {0};
    cml_layout one = {1, {1}, {1}};
    CML_TRY(cml__fill_cpu(ctx, bytes, &one, dtype, value));
    CML_TRY(cml__cuda_activate(ctx));
    switch (cml_dtype_size(dtype)) {
    case 1: return fill_launch<uint8_t>(ctx, &g, y, bytes, dtype);
    case 2: return fill_launch<uint16_t>(ctx, &g, y, bytes, dtype);
    case 4: return fill_launch<uint32_t>(ctx, &g, y, bytes, dtype);
    default: return fill_launch<unsigned long long>(ctx, &g, y, bytes, dtype);
    }
}
