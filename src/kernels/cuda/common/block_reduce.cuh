/* Deterministic reductions among the threads of a row group, and 16-byte
 * vector (un)packing, for the memory-bound kernels (reduce, softmax,
 * cross-entropy, layernorm).
 *
 * A row group is G consecutive threads of a block of (G, R) threads (G a power
 * of two, up to 1024; R groups per block, one row each). Every reduction here
 * combines in an order fixed by the thread layout alone, so repeated runs give
 * bitwise identical results; no atomics are used.
 * - cml__group_allreduce: an xor butterfly inside warps. For a commutative op
 *   (a + b, max) both partners of a step compute op(x, y) and op(y, x), which
 *   IEEE arithmetic rounds identically, so every thread of the group ends with
 *   the same bits, which is what lets each thread use the row statistic.
 * - cml__group_reduce_t: shfl_down into the group's first thread, for states
 *   whose merge is not symmetric (Welford, arg-max with indices).
 * Groups wider than a warp go through shared memory: every thread of the block
 * must call these then (they contain a barrier), and two calls in a row need
 * distinct scratch arrays (32 entries each), or a barrier in between. */
#ifndef CML_KERNELS_CUDA_COMMON_BLOCK_REDUCE_CUH
#define CML_KERNELS_CUDA_COMMON_BLOCK_REDUCE_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/common/dtype.cuh"

#define CML__FULL_MASK 0xffffffffu

/* NaN-propagating max / min: a NaN anywhere wins, as on the CPU. */
static __device__ __forceinline__ float cml__max_nan(float a, float b) { return (a != a || b <= a) ? a : b; }
static __device__ __forceinline__ float cml__min_nan(float a, float b) { return (a != a || b >= a) ? a : b; }

struct cml__sum_op {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct cml__max_op {
    __device__ __forceinline__ float operator()(float a, float b) const { return cml__max_nan(a, b); }
};

/* Every thread of the group gets op over the group's values (see above). */
template <typename Op>
static __device__ __forceinline__ float cml__group_allreduce(float v, int G, float *scratch, Op op) {
    const int width = G < 32 ? G : 32;
    for (int off = width / 2; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(CML__FULL_MASK, v, off));
    if (G <= 32) return v;
    const int nw = G / 32;
    float *s = scratch + threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) s[threadIdx.x / 32] = v;
    __syncthreads();
    float r = s[0];
    for (int w = 1; w < nw; w++) r = op(r, s[w]);
    return r;
}

/* Two sums at once (one barrier instead of two). */
static __device__ __forceinline__ float2 cml__group_allreduce_sum2(float2 v, int G, float2 *scratch) {
    const int width = G < 32 ? G : 32;
    for (int off = width / 2; off > 0; off >>= 1) {
        v.x += __shfl_xor_sync(CML__FULL_MASK, v.x, off);
        v.y += __shfl_xor_sync(CML__FULL_MASK, v.y, off);
    }
    if (G <= 32) return v;
    const int nw = G / 32;
    float2 *s = scratch + threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) s[threadIdx.x / 32] = v;
    __syncthreads();
    float2 r = s[0];
    for (int w = 1; w < nw; w++) {
        r.x += s[w].x;
        r.y += s[w].y;
    }
    return r;
}

/* A trivially copyable state moved through shuffles word by word. */
template <typename T> static __device__ __forceinline__ T cml__shfl_down_t(T v, int off) {
    static_assert(sizeof(T) % 4 == 0, "shuffled states are made of 4-byte words");
    unsigned w[sizeof(T) / 4];
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 4); i++) w[i] = __shfl_down_sync(CML__FULL_MASK, w[i], off);
    memcpy(&v, w, sizeof(T));
    return v;
}

/* The merge of the group's states, valid in the group's first thread (threadIdx.x == 0):
 * pairwise within each warp (lane i takes lane i + off), then warp results in order. */
template <typename T, typename Merge>
static __device__ __forceinline__ T cml__group_reduce_t(T v, int G, T *scratch, Merge merge) {
    const int width = G < 32 ? G : 32;
    for (int off = width / 2; off > 0; off >>= 1) {
        T o = cml__shfl_down_t(v, off);
        v = merge(v, o);
    }
    if (G <= 32) return v;
    const int nw = G / 32;
    T *s = scratch + threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) s[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < nw; w++) v = merge(v, s[w]);
    return v;
}

/* ---- 16-byte words <-> f32 ----------------------------------------------------------- */

/* Elements per 16-byte word. */
template <int DT> struct cml__words {
    typedef typename cml__elem<DT>::type T;
    static constexpr int V = 16 / (int)sizeof(T);
};

template <int DT> static __device__ __forceinline__ void cml__unpack16(uint4 w, float *out) {
    if constexpr (DT == CML_F32) {
        out[0] = __uint_as_float(w.x);
        out[1] = __uint_as_float(w.y);
        out[2] = __uint_as_float(w.z);
        out[3] = __uint_as_float(w.w);
    } else {
        const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if constexpr (DT == CML_F16) {
                /* the hardware conversion: exact like dtype.cuh's, which also keeps NaN payloads
                 * bit for bit for copies at the cost of branches these kernels do not need */
                out[2 * k] = __half2float(__ushort_as_half((unsigned short)(u[k] & 0xFFFFu)));
                out[2 * k + 1] = __half2float(__ushort_as_half((unsigned short)(u[k] >> 16)));
            } else {
                out[2 * k] = cml__to_f32<DT>((uint16_t)(u[k] & 0xFFFFu));
                out[2 * k + 1] = cml__to_f32<DT>((uint16_t)(u[k] >> 16));
            }
        }
    }
}

template <int DT> static __device__ __forceinline__ uint4 cml__pack16(const float *in) {
    uint4 w;
    if constexpr (DT == CML_F32) {
        w.x = __float_as_uint(in[0]);
        w.y = __float_as_uint(in[1]);
        w.z = __float_as_uint(in[2]);
        w.w = __float_as_uint(in[3]);
    } else {
        unsigned u[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            u[k] = (unsigned)cml__from_f32<DT>(in[2 * k]) | ((unsigned)cml__from_f32<DT>(in[2 * k + 1]) << 16);
        w = make_uint4(u[0], u[1], u[2], u[3]);
    }
    return w;
}

/* The same word through the hardware's round-to-nearest-even pack (cvt.rn.bf16x2.f32 /
 * cvt.rn.f16x2.f32: one instruction per two elements, where cml__pack16's software rounding
 * of dtype.cuh takes about nine per element). Bit for bit cml__pack16's result except for NaN,
 * which comes out as the canonical NaN (0x7FFF) instead of the CPU's quiet NaN with the sign
 * and payload kept: for kernel outputs (softmax, cross-entropy, norm backward), not for copies
 * and conversions, which must give the CPU's bytes. */
template <int DT> static __device__ __forceinline__ uint4 cml__pack16_fast(const float *in) {
    if constexpr (DT == CML_F32) {
        return cml__pack16<DT>(in);
    } else {
        unsigned u[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if constexpr (DT == CML_BF16)
                asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u[k]) : "f"(in[2 * k + 1]), "f"(in[2 * k]));
            else
                asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u[k]) : "f"(in[2 * k + 1]), "f"(in[2 * k]));
        }
        return make_uint4(u[0], u[1], u[2], u[3]);
    }
}

/* Stores a 16-byte word to global memory p (16-byte aligned) with one st.global.v4. A plain
 * `*(uint4 *)p = w` became four 4-byte stores in nbl_kernel and every row-sync one-pass
 * kernel (nvcc 13, session 7): four times the store instructions and L1->L2 write requests.
 * The "memory" clobber keeps it in program order with the thread's other accesses (a later
 * 2-byte store into the same word, reads of an aliased input). */
static __device__ __forceinline__ void cml__st16(void *p, uint4 w) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w)
                 : "memory");
}

/* Elements of one buffer, f32/f16/bf16 known at compile time. */
template <int DT> static __device__ __forceinline__ float cml__ld(const void *p, long long i) {
    return cml__to_f32<DT>(((const typename cml__elem<DT>::type *)p)[i]);
}
template <int DT> static __device__ __forceinline__ void cml__st(void *p, long long i, float v) {
    ((typename cml__elem<DT>::type *)p)[i] = cml__from_f32<DT>(v);
}

/* Elements before the first 16-byte boundary at or after element lo of p (at most len). */
template <int DT> static __device__ __forceinline__ long long cml__head_len(const void *p, long long lo, long long len) {
    typedef typename cml__elem<DT>::type T;
    const uintptr_t a = (uintptr_t)((const T *)p + lo);
    const long long h = (long long)(((16u - (a & 15u)) & 15u) / sizeof(T));
    return h < len ? h : len;
}

#endif
