/* CUDA scaled fp8 conversions (cml_convert_scaled), bit for bit the CPU's
 * (src/kernels/cpu/convert.c):
 *   to fp8:   y = saturate(x * scale), round to nearest even;
 *   from fp8: y = x * scale, rounded to f32/f16/bf16;
 * a NaN product becomes the quiet NaN with sign(x) ^ sign(scale).
 *
 * The scale is read on the device (no host round trip). A thread moves 16
 * elements per step with 16-byte accesses (16 fp8 bytes = one word; 16 wide
 * elements = 2 or 4 words) in a grid-stride loop when both buffers are 16-byte
 * aligned, one element per step otherwise. fp8 codes are produced by the
 * hardware conversion (cvt.rn.satfinite, two elements per instruction) after
 * an explicit clamp to the largest finite value, so that saturation, infinite
 * inputs included, does not rest on the instruction's overflow rules; NaN
 * codes are then set to the CPU's encoding. The optional amax = max |x| is
 * reduced without float atomics: each block's maximum goes to the workspace
 * and the block that arrives last takes the maximum of those
 * (common/last_arrival.cuh; a maximum does not depend on the order; a NaN
 * anywhere gives the canonical NaN). */
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdio.h>

#include "kernels/cuda/common/block_reduce.cuh"
#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/last_arrival.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define BLOCK 256
#define GROUP 16 /* elements per thread per step of the vectorized kernel */

/* ---- element conversions ---------------------------------------------------------------------- */

template <int DT> struct fp8_traits;
template <> struct fp8_traits<CML_F8E4M3> {
    static constexpr __nv_fp8_interpretation_t kind = __NV_E4M3;
    static constexpr float max_finite = 448.0f;
    static constexpr unsigned nan_code = 0x7Fu;
};
template <> struct fp8_traits<CML_F8E5M2> {
    static constexpr __nv_fp8_interpretation_t kind = __NV_E5M2;
    static constexpr float max_finite = 57344.0f;
    static constexpr unsigned nan_code = 0x7Eu;
};

static __device__ __forceinline__ constexpr bool is_fp8(int dt) { return dt == CML_F8E4M3 || dt == CML_F8E5M2; }

/* Bytes per element of a dtype known at compile time. */
template <int DT> static __device__ __host__ constexpr int elem_bytes() { return is_fp8(DT) ? 1 : DT == CML_F32 ? 4 : 2; }

/* Two fp8 codes (low byte first) as f32; a NaN code keeps its sign bit (exactly, unlike a
 * NaN's sign through the hardware conversion). */
template <int DT> static __device__ __forceinline__ float2 fp8x2_to_f32(unsigned codes) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)codes, fp8_traits<DT>::kind);
    float2 f = make_float2(__half2float(__half(__half_raw{h.x})), __half2float(__half(__half_raw{h.y})));
    if (f.x != f.x) f.x = __uint_as_float(0x7FC00000u | (codes & 0x80u) << 24);
    if (f.y != f.y) f.y = __uint_as_float(0x7FC00000u | (codes & 0x8000u) << 16);
    return f;
}

/* Two (already scaled) values as fp8 codes, low byte first: clamp, RNE, the CPU's NaN code. */
template <int DT> static __device__ __forceinline__ unsigned f32x2_to_fp8(float a, float b) {
    constexpr float m = fp8_traits<DT>::max_finite;
    const float2 c = make_float2(fminf(fmaxf(a, -m), m), fminf(fmaxf(b, -m), m));
    unsigned codes = (unsigned)__nv_cvt_float2_to_fp8x2(c, __NV_SATFINITE, fp8_traits<DT>::kind);
    if (a != a) codes = (codes & 0xFF00u) | (__float_as_uint(a) >> 24 & 0x80u) | fp8_traits<DT>::nan_code;
    if (b != b) codes = (codes & 0x00FFu) | ((__float_as_uint(b) >> 24 & 0x80u) | fp8_traits<DT>::nan_code) << 8;
    return codes;
}

/* x * s; a NaN product as the quiet NaN with sign(x) ^ sign(s). */
static __device__ __forceinline__ float scaled(float x, float s) {
    const float p = x * s;
    return p == p ? p : __uint_as_float(0x7FC00000u | ((__float_as_uint(x) ^ __float_as_uint(s)) & 0x80000000u));
}

/* Element i of x (f16 through the exact conversion of dtype.cuh, which keeps a NaN's sign). */
template <int DT> static __device__ __forceinline__ float load_one(const void *x, long long i) {
    if constexpr (is_fp8(DT)) return fp8x2_to_f32<DT>(((const unsigned char *)x)[i]).x;
    else if constexpr (DT == CML_F16) return cml__f16_to_f32(((const uint16_t *)x)[i]);
    else return cml__ld<DT>(x, i);
}

template <int DT> static __device__ __forceinline__ void store_one(void *y, long long i, float p) {
    if constexpr (is_fp8(DT)) ((unsigned char *)y)[i] = (unsigned char)f32x2_to_fp8<DT>(p, 0.0f);
    else cml__st<DT>(y, i, p);
}

/* Elements [16 g, 16 g + 16) of x as f32 (16-byte loads). */
template <int DT> static __device__ __forceinline__ void load_group(const void *x, long long g, float (&v)[GROUP]) {
    constexpr int NW = GROUP * elem_bytes<DT>() / 16;
    uint4 w[NW];
#pragma unroll
    for (int k = 0; k < NW; k++) w[k] = __ldg((const uint4 *)x + g * NW + k);
    if constexpr (is_fp8(DT)) {
        const unsigned u[4] = {w[0].x, w[0].y, w[0].z, w[0].w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 lo = fp8x2_to_f32<DT>(u[k] & 0xFFFFu), hi = fp8x2_to_f32<DT>(u[k] >> 16);
            v[4 * k] = lo.x, v[4 * k + 1] = lo.y, v[4 * k + 2] = hi.x, v[4 * k + 3] = hi.y;
        }
    } else if constexpr (DT == CML_F16) {
#pragma unroll
        for (int k = 0; k < NW; k++) {
            const unsigned u[4] = {w[k].x, w[k].y, w[k].z, w[k].w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                v[8 * k + 2 * q] = cml__f16_to_f32((uint16_t)(u[q] & 0xFFFFu));
                v[8 * k + 2 * q + 1] = cml__f16_to_f32((uint16_t)(u[q] >> 16));
            }
        }
    } else {
        constexpr int V = 16 / elem_bytes<DT>();
#pragma unroll
        for (int k = 0; k < NW; k++) cml__unpack16<DT>(w[k], &v[k * V]);
    }
}

/* Elements [16 g, 16 g + 16) of y from (already scaled) f32 values (16-byte stores). */
template <int DT> static __device__ __forceinline__ void store_group(void *y, long long g, const float (&p)[GROUP]) {
    constexpr int NW = GROUP * elem_bytes<DT>() / 16;
    if constexpr (is_fp8(DT)) {
        unsigned u[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            u[k] = f32x2_to_fp8<DT>(p[4 * k], p[4 * k + 1]) | f32x2_to_fp8<DT>(p[4 * k + 2], p[4 * k + 3]) << 16;
        *((uint4 *)y + g) = make_uint4(u[0], u[1], u[2], u[3]);
    } else {
        constexpr int V = 16 / elem_bytes<DT>();
#pragma unroll
        for (int k = 0; k < NW; k++) *((uint4 *)y + g * NW + k) = cml__pack16<DT>(&p[k * V]);
    }
}

/* NaN-propagating max of |v| into a (both >= 0 or NaN). */
static __device__ __forceinline__ float max_abs(float a, float v) { return cml__max_nan(a, fabsf(v)); }

/* Where the amax goes: the blocks' maxima, their arrival counter (0 between launches) and the
 * result. */
struct amax_out {
    float *partial;
    unsigned *arrivals;
    float *amax;
};

/* The block's maximum into partial[blockIdx.x]; the block that arrives last writes the maximum
 * of all blocks' (every thread of the block calls this). */
static __device__ __forceinline__ void block_amax(float a, const amax_out &out) {
    __shared__ float scratch[32];
    __shared__ int last;
    a = cml__group_allreduce(a, blockDim.x, scratch, cml__max_op());
    if (threadIdx.x == 0) out.partial[blockIdx.x] = a;
    if (!cml__block_arrives_last(out.arrivals, gridDim.x, &last)) return;
    a = 0.0f;
    for (unsigned k = threadIdx.x; k < gridDim.x; k += blockDim.x) a = cml__max_nan(a, __ldcg(out.partial + k));
    a = cml__group_allreduce(a, blockDim.x, scratch, cml__max_op());
    if (threadIdx.x == 0) *out.amax = a == a ? a : __uint_as_float(0x7FC00000u);
}

/* ---- kernels ------------------------------------------------------------------------------------ */

/* 16-byte aligned x and y: groups of 16 elements, grid-stride; the last n % 16 one per thread. */
template <int YT, int XT>
static __global__ void __launch_bounds__(BLOCK)
    convert_scaled_vec_kernel(void *y, const void *x, long long n, const float *scale, amax_out out) {
    const float s = scale ? __ldg(scale) : 1.0f;
    const long long groups = n / GROUP, tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    float a = 0.0f;
    for (long long g = tid; g < groups; g += step) {
        float v[GROUP];
        load_group<XT>(x, g, v);
#pragma unroll
        for (int k = 0; k < GROUP; k++) {
            a = max_abs(a, v[k]);
            v[k] = scaled(v[k], s);
        }
        store_group<YT>(y, g, v);
    }
    const long long i = groups * GROUP + tid;
    if (i < n) {
        const float v = load_one<XT>(x, i);
        a = max_abs(a, v);
        store_one<YT>(y, i, scaled(v, s));
    }
    if (out.amax) block_amax(a, out);
}

/* Any alignment: one element per thread per step. */
template <int YT, int XT>
static __global__ void __launch_bounds__(BLOCK)
    convert_scaled_scalar_kernel(void *y, const void *x, long long n, const float *scale, amax_out out) {
    const float s = scale ? __ldg(scale) : 1.0f;
    const long long step = (long long)gridDim.x * blockDim.x;
    float a = 0.0f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const float v = load_one<XT>(x, i);
        a = max_abs(a, v);
        store_one<YT>(y, i, scaled(v, s));
    }
    if (out.amax) block_amax(a, out);
}

/* ---- launch ------------------------------------------------------------------------------------- */

static const char FN[] = "cml_convert_scaled";

template <int YT, int XT>
static cml_status convert_launch(cml_ctx *ctx, void *y, const void *x, long long n, const float *scale, float *amax) {
    cudaStream_t st = cml__stream(ctx);
    const bool vec = (((uintptr_t)x | (uintptr_t)y) & 15u) == 0;
    const unsigned grid = cml__grid_size(ctx, vec ? (n / GROUP > 0 ? n / GROUP : 1) : n, BLOCK);
    amax_out out = {NULL, NULL, amax};
    if (amax) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)grid * sizeof(float)));
        out.partial = (float *)ws;
        CML_TRY(cml__cuda_zeroed(ctx, sizeof(unsigned), FN, (void **)&out.arrivals));
    }
    char dts[32];
    snprintf(dts, sizeof dts, "%s,%s", cml_dtype_name((cml_dtype)YT), cml_dtype_name((cml_dtype)XT));
    if (vec) convert_scaled_vec_kernel<YT, XT><<<grid, BLOCK, 0, st>>>(y, x, n, scale, out);
    else convert_scaled_scalar_kernel<YT, XT><<<grid, BLOCK, 0, st>>>(y, x, n, scale, out);
    return cml__cuda_check_launch(FN, vec ? "convert_scaled_vec_kernel" : "convert_scaled_scalar_kernel", dts, n, grid,
                                  BLOCK);
}

template <int F8>
static cml_status dispatch_fp8(cml_ctx *ctx, void *y, cml_dtype y_dt, const void *x, cml_dtype x_dt, long long n,
                               const float *scale, float *amax) {
    if (y_dt == (cml_dtype)F8) { /* to fp8 */
        switch (x_dt) {
        case CML_F16: return convert_launch<F8, CML_F16>(ctx, y, x, n, scale, amax);
        case CML_BF16: return convert_launch<F8, CML_BF16>(ctx, y, x, n, scale, amax);
        default: return convert_launch<F8, CML_F32>(ctx, y, x, n, scale, amax);
        }
    }
    switch (y_dt) { /* from fp8 */
    case CML_F16: return convert_launch<CML_F16, F8>(ctx, y, x, n, scale, amax);
    case CML_BF16: return convert_launch<CML_BF16, F8>(ctx, y, x, n, scale, amax);
    default: return convert_launch<CML_F32, F8>(ctx, y, x, n, scale, amax);
    }
}

/* ---- entry point (arguments validated by src/kernels/convert.c) ---------------------------------- */

extern "C" cml_status cml__convert_scaled_cuda(cml_ctx *ctx, void *y, cml_dtype y_dtype, const void *x,
                                               cml_dtype x_dtype, int64_t n, const float *scale, float *amax) {
    if (n == 0 && !amax) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    if (y_dtype == CML_F8E4M3 || x_dtype == CML_F8E4M3)
        return dispatch_fp8<CML_F8E4M3>(ctx, y, y_dtype, x, x_dtype, n, scale, amax);
    return dispatch_fp8<CML_F8E5M2>(ctx, y, y_dtype, x, x_dtype, n, scale, amax);
}
