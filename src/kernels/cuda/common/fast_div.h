/* Integer division by a run-time divisor as one 64-bit multiply and a shift. The divisor's multiplier and shift are
 * made once on the host (cml__fast_div_make) and passed to a kernel, which divides with cml__fast_div_q instead of
 * the ~20 dependent instructions ptxas emits for a division (the GEMM locates its tiles with it:
 * gemm_sm90_kernel.cuh). Exact for 0 <= n < 2^31 and 1 <= d < 2^31: with p = ceil(log2 d) and s = 32 + p,
 * mul = ceil(2^s / d) = (2^s + e) / d with 0 <= e < d <= 2^p, so n mul / 2^s = n / d + n e / (d 2^s), and
 * n e / (d 2^s) < 2^31 2^p / (d 2^(32 + p)) < 1 / d: too little to carry n / d past its next integer. n mul < 2^31 2^33
 * fits 64 bits. Plain C as well, so that the CPU tests check it (tests/cpu/test_fast_div.c). */
#ifndef CML_KERNELS_CUDA_COMMON_FAST_DIV_H
#define CML_KERNELS_CUDA_COMMON_FAST_DIV_H

#include <stdint.h>

#ifdef __CUDACC__
#define CML__FAST_DIV_FN static __host__ __device__ __forceinline__
#else
#define CML__FAST_DIV_FN static inline
#endif

typedef struct cml__fast_div {
    uint64_t mul;
    int shift;
} cml__fast_div;

/* d in [1, 2^31) */
CML__FAST_DIV_FN cml__fast_div cml__fast_div_make(int d) {
    int p = 0;
    while (((int64_t)1 << p) < d) p++;
    cml__fast_div v;
    v.mul = (((uint64_t)1 << (32 + p)) + (uint64_t)d - 1) / (uint64_t)d;
    v.shift = 32 + p;
    return v;
}

/* n / d for n in [0, 2^31) */
CML__FAST_DIV_FN int cml__fast_div_q(int n, cml__fast_div v) {
    return (int)(((uint64_t)(uint32_t)n * v.mul) >> v.shift);
}

#endif
