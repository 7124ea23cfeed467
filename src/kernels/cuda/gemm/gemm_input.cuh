/* Reading GEMM inputs whose dtype is known only at run time (f32, f16, bf16,
 * fp8 e4m3/e5m2) as f32, exactly: bit-for-bit the CPU's conversions
 * (src/runtime/dtype.c), so the simt path and the dbias reduction see the
 * values the CPU reference sees. */
#ifndef CML_KERNELS_CUDA_GEMM_GEMM_INPUT_CUH
#define CML_KERNELS_CUDA_GEMM_GEMM_INPUT_CUH

#include <stdint.h>

#include "camel/dtype.h"
#include "kernels/cuda/common/dtype.cuh"

/* OCP e4m3fn: bias 7, no infinities, S.1111.111 is NaN. */
static __device__ __forceinline__ float cml__f8e4m3_to_f32(uint32_t v) {
    uint32_t sign = (v & 0x80u) << 24, e = (v >> 3) & 0xFu, m = v & 7u;
    if (e == 15u && m == 7u) return __uint_as_float(sign | 0x7FC00000u);
    if (e == 0u) {
        float f = (float)m * 0.001953125f; /* subnormal: m * 2^-9 */
        return sign ? -f : f;
    }
    return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}

/* e5m2 is the upper byte of an f16. */
static __device__ __forceinline__ float cml__f8e5m2_to_f32(uint32_t v) { return cml__f16_to_f32((uint16_t)(v << 8)); }

/* Element i of an input buffer of dtype dt (uniform across the warp). */
static __device__ __forceinline__ float cml__gemm_load_input(const void *p, int dt, long long i) {
    switch (dt) {
    case CML_F32: return ((const float *)p)[i];
    case CML_F16: return cml__f16_to_f32(((const uint16_t *)p)[i]);
    case CML_BF16: return cml__bf16_to_f32(((const uint16_t *)p)[i]);
    case CML_F8E4M3: return cml__f8e4m3_to_f32(((const uint8_t *)p)[i]);
    default: return cml__f8e5m2_to_f32(((const uint8_t *)p)[i]);
    }
}

#endif
