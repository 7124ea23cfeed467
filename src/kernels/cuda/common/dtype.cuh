/* Device-side element conversions (f32 <-> f16/bf16) and 16-byte vector
 * loads/stores, bit-for-bit the same as the CPU's (src/runtime/dtype.c):
 * round to nearest even, and the same NaN encodings, so that copies and
 * conversions on the GPU give exactly the CPU's bytes. */
#ifndef CML_KERNELS_CUDA_COMMON_DTYPE_CUH
#define CML_KERNELS_CUDA_COMMON_DTYPE_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "camel/dtype.h"

static __device__ __forceinline__ float cml__bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

static __device__ __forceinline__ uint16_t cml__f32_to_bf16(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN, sign kept */
    u += 0x7FFFu + ((u >> 16) & 1u);                                           /* RNE; carries into inf */
    return (uint16_t)(u >> 16);
}

static __device__ __forceinline__ float cml__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp_field = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp_field == 0x1F) return __uint_as_float(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp_field == 0) {
        float v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24, exact */
        return sign ? -v : v;
    }
    return __uint_as_float(sign | ((exp_field + 112u) << 23) | (mant << 13));
}

static __device__ __forceinline__ uint16_t cml__f32_to_f16(float x) {
    if (x != x) return (uint16_t)(((__float_as_uint(x) >> 16) & 0x8000u) | 0x7E00u); /* the CPU's quiet NaN */
    return __half_as_ushort(__float2half_rn(x)); /* IEEE RNE, overflow to inf, like the CPU */
}

/* The storage type of a dtype known at compile time (f32, f16 or bf16). */
template <int DT> struct cml__elem { typedef float type; };
template <> struct cml__elem<CML_F16> { typedef uint16_t type; };
template <> struct cml__elem<CML_BF16> { typedef uint16_t type; };

template <int DT> static __device__ __forceinline__ float cml__to_f32(typename cml__elem<DT>::type v) {
    if constexpr (DT == CML_F16) return cml__f16_to_f32(v);
    else if constexpr (DT == CML_BF16) return cml__bf16_to_f32(v);
    else return v;
}

template <int DT> static __device__ __forceinline__ typename cml__elem<DT>::type cml__from_f32(float v) {
    if constexpr (DT == CML_F16) return cml__f32_to_f16(v);
    else if constexpr (DT == CML_BF16) return cml__f32_to_bf16(v);
    else return v;
}

/* Element i of a buffer whose dtype is known only at run time (f32, f16, bf16; u8 masks too). */
static __device__ __forceinline__ float cml__load_f32(const void *base, int dt, long long i) {
    if (dt == CML_U8) return (float)((const uint8_t *)base)[i];
    if (dt == CML_F16) return cml__f16_to_f32(((const uint16_t *)base)[i]);
    if (dt == CML_BF16) return cml__bf16_to_f32(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}

/* Stores into f32, f16, bf16, or u8 (comparison results: round to nearest even, saturate, NaN -> 0, like the CPU). */
static __device__ __forceinline__ void cml__store_f32(void *base, int dt, long long i, float v) {
    if (dt == CML_F16) ((uint16_t *)base)[i] = cml__f32_to_f16(v);
    else if (dt == CML_BF16) ((uint16_t *)base)[i] = cml__f32_to_bf16(v);
    else if (dt == CML_U8) ((uint8_t *)base)[i] = v != v ? 0 : (uint8_t)fminf(fmaxf(rintf(v), 0.0f), 255.0f);
    else ((float *)base)[i] = v;
}

/* Vectors of CML__VEC elements, moved with 16-byte accesses (one for 2-byte
 * types, two for f32). Vector vi covers elements [vi*8, vi*8 + 8); the buffer
 * must be 16-byte aligned. */
#define CML__VEC 8

template <int DT> struct cml__vec {
    typedef typename cml__elem<DT>::type T;
    static constexpr int NV = CML__VEC * (int)sizeof(T) / 16; /* 16-byte words per vector */
    union {
        uint4 words[NV];
        T e[CML__VEC];
    };
};

template <int DT> static __device__ __forceinline__ void cml__load_vec(const void *base, long long vi, float out[CML__VEC]) {
    cml__vec<DT> v;
    const uint4 *p = (const uint4 *)base + vi * cml__vec<DT>::NV;
#pragma unroll
    for (int k = 0; k < cml__vec<DT>::NV; k++) v.words[k] = p[k];
#pragma unroll
    for (int k = 0; k < CML__VEC; k++) out[k] = cml__to_f32<DT>(v.e[k]);
}

template <int DT> static __device__ __forceinline__ void cml__store_vec(void *base, long long vi, const float in[CML__VEC]) {
    cml__vec<DT> v;
#pragma unroll
    for (int k = 0; k < CML__VEC; k++) v.e[k] = cml__from_f32<DT>(in[k]);
    uint4 *p = (uint4 *)base + vi * cml__vec<DT>::NV;
#pragma unroll
    for (int k = 0; k < cml__vec<DT>::NV; k++) p[k] = v.words[k];
}

#endif
