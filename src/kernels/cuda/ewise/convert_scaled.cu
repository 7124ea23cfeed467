/* CUDA scaled fp8 conversions (cml_convert_scaled), bit for bit the CPU's
 * (src/kernels/cpu/convert.c):
 *   to fp8:   y = saturate(x * scale), round to nearest even;
 *   from fp8: y = x * scale, rounded to f32/f16/bf16;
 * a NaN product becomes the quiet NaN with sign(x) ^ sign(scale).
 *
 * The scale is read on the device (no host round trip). When both buffers are
 * 16-byte aligned a warp moves 512 elements per step in a grid-stride loop,
 * each of its load and store instructions one contiguous range (16-byte words
 * of the wider buffer, 4 / 8 bytes of fp8 codes: the slices below); one
 * element per thread per step otherwise. fp8 codes are produced by the
 * hardware conversion (cvt.rn.satfinite, two elements per instruction); NaN
 * codes are set to the CPU's encoding. The vectorized kernel tests a thread's
 * 16 products for NaN once and takes the exact per-element path (an explicit
 * clamp, the NaN fix-ups) only for a warp that has one (a NaN-free product
 * needs neither: see f32x2_to_fp8_nonan). The optional amax = max |x| is
 * reduced without float atomics: each block's maximum goes into one word with
 * an integer atomic max on its bits (exact, the order does not matter), and
 * the block that arrives last reads that word (block_amax; a NaN anywhere
 * gives the canonical NaN). */
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdio.h>

#include "kernels/cuda/common/block_reduce.cuh" /* also cml__ld / cml__st, cml__unpack16 / cml__pack16 */
#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/launch.cuh"
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

/* Two (already scaled) values of which neither is NaN as fp8 codes, low byte first: the
 * conversion alone, equal to f32x2_to_fp8's codes for every such pair. cvt.rn.satfinite gives
 * the largest finite code, with the value's sign, to every value at or beyond the format's
 * overflow threshold (max finite + half an ulp), infinities included (PTX ISA, cvt: .satfinite;
 * cuda_fp8.hpp's host emulation, __nv_cvt_double_to_fp8, says the same), and rounds the values
 * between max finite and that threshold down to max finite: both what the clamp to
 * +-max_finite followed by the same conversion gives. test_gpu_convert's edges (448 .. 3.4e38,
 * +-inf, six scales) compare every code with the CPU's. */
template <int DT> static __device__ __forceinline__ unsigned f32x2_to_fp8_nonan(float a, float b) {
    return (unsigned)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, fp8_traits<DT>::kind);
}

/* Whether any of 16 values is NaN: setp.nan tests two operands at once (true if either is
 * NaN), chained through one predicate: 8 instructions (written as C, ptxas paired a few). */
static __device__ __forceinline__ bool any_nan16(const float (&p)[16]) {
    unsigned r;
    asm("{\n\t.reg .pred q;\n\t"
        "setp.nan.f32 q, %1, %2;\n\t"
        "setp.nan.or.f32 q, %3, %4, q;\n\t"
        "setp.nan.or.f32 q, %5, %6, q;\n\t"
        "setp.nan.or.f32 q, %7, %8, q;\n\t"
        "setp.nan.or.f32 q, %9, %10, q;\n\t"
        "setp.nan.or.f32 q, %11, %12, q;\n\t"
        "setp.nan.or.f32 q, %13, %14, q;\n\t"
        "setp.nan.or.f32 q, %15, %16, q;\n\t"
        "selp.u32 %0, 1, 0, q;\n\t}"
        : "=r"(r)
        : "f"(p[0]), "f"(p[1]), "f"(p[2]), "f"(p[3]), "f"(p[4]), "f"(p[5]), "f"(p[6]), "f"(p[7]), "f"(p[8]),
          "f"(p[9]), "f"(p[10]), "f"(p[11]), "f"(p[12]), "f"(p[13]), "f"(p[14]), "f"(p[15]));
    return r != 0;
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

/* ---- the vectorized kernel's slices ------------------------------------------------------------
 *
 * A warp converts 32 x 16 = 512 consecutive elements per step (a warp group) as NS slices per
 * thread of L elements each: one 16-byte word of the wider buffer (L = 4 for f32, 8 for f16 /
 * bf16) and the L bytes it maps to in the fp8 buffer. Thread t takes slices t, t + 32, ... of
 * the warp group, so each load and each store instruction of the warp covers one contiguous
 * range (512 B of the wide buffer, 128 / 256 B of the fp8 one). The earlier layout (a thread's
 * 16 elements contiguous) spread each 16-byte load of a warp over 16 (f32) / 8 (bf16) lines. */
template <int YT, int XT> struct slices {
    static constexpr int WIDE = elem_bytes<YT>() > elem_bytes<XT>() ? elem_bytes<YT>() : elem_bytes<XT>();
    static constexpr int L = 16 / WIDE;  /* elements per slice */
    static constexpr int NS = GROUP / L; /* slices per thread per step */
};

/* Slice s (elements [s L, s L + L)) of x, raw: a 16-byte word, or the 4 / 8 bytes of L fp8 codes. */
template <int XT, int L> static __device__ __forceinline__ uint4 load_slice(const void *x, long long s) {
    if constexpr (!is_fp8(XT)) {
        return __ldg((const uint4 *)x + s);
    } else if constexpr (L == 4) {
        return make_uint4(__ldg((const unsigned *)x + s), 0u, 0u, 0u);
    } else {
        const uint2 u = __ldg((const uint2 *)x + s);
        return make_uint4(u.x, u.y, 0u, 0u);
    }
}

/* The L elements of a raw slice as f32 (f16 through the exact conversion of dtype.cuh, which
 * keeps a NaN's sign; fp8 NaN codes keep theirs too). */
template <int XT, int L> static __device__ __forceinline__ void unpack_slice(uint4 w, float (&v)[L]) {
    if constexpr (is_fp8(XT)) {
        const unsigned u[2] = {w.x, w.y};
#pragma unroll
        for (int k = 0; k < L / 4; k++) {
            const float2 lo = fp8x2_to_f32<XT>(u[k] & 0xFFFFu), hi = fp8x2_to_f32<XT>(u[k] >> 16);
            v[4 * k] = lo.x, v[4 * k + 1] = lo.y, v[4 * k + 2] = hi.x, v[4 * k + 3] = hi.y;
        }
    } else if constexpr (XT == CML_F16) {
        const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
            v[2 * q] = cml__f16_to_f32((uint16_t)(u[q] & 0xFFFFu));
            v[2 * q + 1] = cml__f16_to_f32((uint16_t)(u[q] >> 16));
        }
    } else {
        cml__unpack16<XT>(w, v);
    }
}

/* Slice s of y from L (already scaled) f32 values. */
template <int YT, int L> static __device__ __forceinline__ void store_slice(void *y, long long s, const float (&p)[L]) {
    if constexpr (is_fp8(YT)) {
        unsigned u[L / 4];
#pragma unroll
        for (int k = 0; k < L / 4; k++)
            u[k] = f32x2_to_fp8<YT>(p[4 * k], p[4 * k + 1]) | f32x2_to_fp8<YT>(p[4 * k + 2], p[4 * k + 3]) << 16;
        if constexpr (L == 4) ((unsigned *)y)[s] = u[0];
        else ((uint2 *)y)[s] = make_uint2(u[0], u[1]);
    } else {
        ((uint4 *)y)[s] = cml__pack16<YT>(p);
    }
}

/* |v| into the NaN-propagating running maximum a (>= 0 or NaN): one max.NaN with |v| as an
 * operand modifier (cml__max_nan and fabsf took three instructions). The maximum is exact and
 * does not depend on the order; a NaN comes out as the canonical NaN, and the amax written is
 * the canonical NaN whenever any partial is NaN (block_amax), as before. */
static __device__ __forceinline__ float max_abs(float a, float v) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(fabsf(v)));
    return r;
}

/* Where the amax goes: words[0] counts the blocks that have published, words[AMAX_WORD] holds
 * the bits of the largest |x| published so far (both in the context's zeroed words, 0 between
 * launches: the last block sets them back), amax the result. The two words are 256 bytes apart,
 * in different L2 lines, so that the two streams of same-address atomics (one of each per
 * block, all near the end of the kernel) do not queue at one line. (Session 10 measured this
 * against per-block words merged by the last block: dev/membound/README.md.) */
#define AMAX_WORD 64
struct amax_out {
    unsigned *words;
    float *amax;
};

/* The unsigned maximum of the block's u, valid in thread 0 (every thread calls it: a barrier).
 * One redux.sync per warp (REDUX.MAX) instead of a 5-step shuffle butterfly. */
static __device__ __forceinline__ unsigned block_max_u32(unsigned u, unsigned *warp_max) {
    u = __reduce_max_sync(0xFFFFFFFFu, u);
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = u;
    __syncthreads();
    if (threadIdx.x != 0) return 0u;
    unsigned m = warp_max[0];
#pragma unroll
    for (int k = 1; k < BLOCK / 32; k++) m = max(m, warp_max[k]);
    return m;
}

/* The block's maximum into words[AMAX_WORD], and the block that arrives last writes the maximum
 * of all blocks' (every thread of the block calls this, with a >= +0 or NaN: max_abs's).
 *
 * Exactness: a non-negative float orders like its bit pattern as an unsigned integer, so the
 * unsigned maximum of the bits of values in [+0, +inf] is the bits of their maximum (a is never
 * -0 or negative: max_abs starts from +0 and takes |v|); a NaN's bits, of either sign (max.NaN
 * gives the canonical 0x7FFFFFFF), are above +inf's 0x7F800000, so a NaN anywhere wins. The
 * result is therefore the largest |x| when no element is NaN and some bits > 0x7F800000 when one
 * is, written as the canonical 0x7FC00000: the values the previous merge (max.NaN over per-block
 * partials, then the same canonicalization) wrote, for any grid and any arrival order.
 *
 * Ordering (the PTX memory model argument of common/last_arrival.cuh, with one thread doing all
 * of it): thread 0 of each block makes its atomic max, then takes a ticket with
 * atom.add.acq_rel.gpu, whose release half orders its own earlier max before the ticket; the
 * block drawing the last ticket has observed every earlier ticket through the counter's atomic
 * chain, and the acquire half makes each releasing block's max precede the exchange that reads
 * (and clears) the max word (one atom rather than atom.release + fence.acq_rel in the last block:
 * the fence is a second MEMBAR.ALL.GPU on the critical path; see common/last_arrival.cuh). No
 * thread reads anything else of another block's, so no other thread needs a fence or a second
 * barrier. */
static __device__ __forceinline__ void block_amax(float a, const amax_out &out) {
    __shared__ unsigned warp_max[BLOCK / 32];
    const unsigned m = block_max_u32(__float_as_uint(a), warp_max);
    if (threadIdx.x == 0) {
        atomicMax(out.words + AMAX_WORD, m);
        unsigned ticket;
        asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(out.words) : "memory");
        if (ticket == gridDim.x - 1u) {
            out.words[0] = 0u;
            const unsigned all = atomicExch(out.words + AMAX_WORD, 0u);
            *out.amax = __uint_as_float(all > 0x7F800000u ? 0x7FC00000u : all);
        }
    }
}

/* ---- kernels ------------------------------------------------------------------------------------ */

/* 16-byte aligned x and y: warp groups of 512 elements (slices above), grid-stride over the
 * grid's warps; the last n % 512 elements one per thread. AMAX: whether amax is wanted (the
 * kernel without it does no max work at all). */
template <int YT, int XT, bool AMAX>
static __global__ void __launch_bounds__(BLOCK)
    convert_scaled_vec_kernel(void *y, const void *x, long long n, const float *scale, amax_out out) {
    cml__pdl_entry();
    constexpr int L = slices<YT, XT>::L, NS = slices<YT, XT>::NS;
    const float s = scale ? __ldg(scale) : 1.0f;
    const int lane = threadIdx.x & 31;
    const long long wgroups = n / (32 * GROUP), tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    float a = 0.0f;
    /* 32-bit warp-group indices (n < 2^41 elements): 64-bit ones took two registers more, past
     * the 32 that 8 blocks per SM allow */
    const unsigned nwg = (unsigned)wgroups, wstep = (unsigned)(step >> 5);
    for (unsigned q = (unsigned)(tid >> 5); q < nwg; q += wstep) {
        const long long s0 = (long long)q * (32 * NS) + lane; /* this thread's first slice */
        uint4 w[NS];
#pragma unroll
        for (int k = 0; k < NS; k++) w[k] = load_slice<XT, L>(x, s0 + 32 * k);
        if constexpr (is_fp8(YT)) {
            /* to fp8: the 16 products, one NaN test for all of them, and for a warp without a
             * NaN product the conversion alone (f32x2_to_fp8_nonan); with one, the exact path on
             * the slices loaded again (rare: a NaN input, or 0 x inf) */
            float p[GROUP];
#pragma unroll
            for (int k = 0; k < NS; k++) {
                float v[L];
                /* f16: the hardware conversion, exact but for a NaN's payload and sign; a NaN
                 * input makes a NaN product, which sends the warp down the exact path; its
                 * |v| into amax gives a NaN there too, so the canonical NaN as before */
                if constexpr (XT == CML_F16) cml__unpack16<CML_F16>(w[k], v);
                else unpack_slice<XT, L>(w[k], v);
#pragma unroll
                for (int e = 0; e < L; e++) {
                    if constexpr (AMAX) a = max_abs(a, v[e]);
                    p[k * L + e] = v[e] * s;
                }
            }
            if (!__any_sync(0xFFFFFFFFu, any_nan16(p))) {
#pragma unroll
                for (int k = 0; k < NS; k++) {
                    const float *q = p + k * L;
                    unsigned u[L / 4];
#pragma unroll
                    for (int j = 0; j < L / 4; j++)
                        u[j] = f32x2_to_fp8_nonan<YT>(q[4 * j], q[4 * j + 1]) |
                               f32x2_to_fp8_nonan<YT>(q[4 * j + 2], q[4 * j + 3]) << 16;
                    if constexpr (L == 4) ((unsigned *)y)[s0 + 32 * k] = u[0];
                    else ((uint2 *)y)[s0 + 32 * k] = make_uint2(u[0], u[1]);
                }
            } else {
#pragma unroll 1
                for (int k = 0; k < NS; k++) {
                    float v[L];
                    unpack_slice<XT, L>(load_slice<XT, L>(x, s0 + 32 * k), v);
#pragma unroll
                    for (int e = 0; e < L; e++) v[e] = scaled(v[e], s);
                    store_slice<YT, L>(y, s0 + 32 * k, v);
                }
            }
        } else {
#pragma unroll
            for (int k = 0; k < NS; k++) {
                float v[L];
                unpack_slice<XT, L>(w[k], v);
#pragma unroll
                for (int e = 0; e < L; e++) {
                    if constexpr (AMAX) a = max_abs(a, v[e]);
                    v[e] = scaled(v[e], s);
                }
                store_slice<YT, L>(y, s0 + 32 * k, v);
            }
        }
    }
    /* the tail's start from n again (n >= 0: n rounded down to whole warp groups) rather than
     * from wgroups, which would stay live across the loop (a 4-byte spill at 32 registers) */
    for (long long i = (n & ~(long long)(32 * GROUP - 1)) + tid; i < n; i += step) {
        const float v = load_one<XT>(x, i);
        if constexpr (AMAX) a = max_abs(a, v);
        store_one<YT>(y, i, scaled(v, s));
    }
    if constexpr (AMAX) block_amax(a, out);
}

/* Any alignment: one element per thread per step. */
template <int YT, int XT, bool AMAX>
static __global__ void __launch_bounds__(BLOCK)
    convert_scaled_scalar_kernel(void *y, const void *x, long long n, const float *scale, amax_out out) {
    cml__pdl_entry();
    const float s = scale ? __ldg(scale) : 1.0f;
    const long long step = (long long)gridDim.x * blockDim.x;
    float a = 0.0f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const float v = load_one<XT>(x, i);
        if constexpr (AMAX) a = max_abs(a, v);
        store_one<YT>(y, i, scaled(v, s));
    }
    if constexpr (AMAX) block_amax(a, out);
}

/* ---- launch ------------------------------------------------------------------------------------- */

static const char FN[] = "cml_convert_scaled";

typedef void (*convert_kernel_fn)(void *, const void *, long long, const float *, amax_out);

/* Blocks of one kernel that fit an SM at once (asked once per kernel: it depends on the kernel's
 * registers alone). */
static int resident_per_sm(convert_kernel_fn k) {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, BLOCK, 0) != cudaSuccess || per_sm < 1) {
        (void)cudaGetLastError();
        per_sm = 1;
    }
    return per_sm;
}

template <int YT, int XT>
static cml_status convert_launch(cml_ctx *ctx, void *y, const void *x, long long n, const float *scale, float *amax) {
    cudaStream_t st = cml__stream(ctx);
    /* the vector kernel counts warp groups in 32 bits (n < 2^41; 2^40 leaves q + step room) */
    const bool vec = (((uintptr_t)x | (uintptr_t)y) & 15u) == 0 && n < (1LL << 40);
    const convert_kernel_fn k = vec ? (amax ? convert_scaled_vec_kernel<YT, XT, true>
                                           : convert_scaled_vec_kernel<YT, XT, false>)
                                    : (amax ? convert_scaled_scalar_kernel<YT, XT, true>
                                            : convert_scaled_scalar_kernel<YT, XT, false>);
    /* One wave of resident blocks at most, whatever the kernel's registers (with 34, as the amax
     * kernels from f32 have, 6 blocks fit an SM, not 8: an 8-block grid made 1.33 waves of equal
     * work). Asked once per kernel, cached as cml__cuda_l2_bytes does (a repeated store of the
     * same value; libcamel is built without thread-safe statics). */
    static int per_sm[4];
    const int ki = (vec ? 0 : 2) + (amax ? 1 : 0);
    if (per_sm[ki] == 0) per_sm[ki] = resident_per_sm(k);
    const int sms = cml__cuda_sm_count(ctx->device.index) > 0 ? cml__cuda_sm_count(ctx->device.index) : 132;
    const long long threads = vec ? (n / GROUP > 0 ? n / GROUP : 1) : (n > 0 ? n : 1);
    /* The vectorized conversion to fp8: at most 4 blocks per SM without amax, 6 with (measured, H100,
     * session 9: bf16 -> e4m3 at 8 blocks per SM ran 4% below the previous layout in steady mode at
     * 16384x8192 and 256x262144; 4 blocks: +7% over 8 there, f32 +0-2%, no shape below 0.999x;
     * 6 blocks: +0-1%. The amax kernels lost 2-8% at 4 blocks. Their registers are now down to 32,
     * so 8 would fit: not measured.) */
    const int cap_ps = vec && is_fp8(YT) ? (amax ? 6 : 4) : 0;
    const int ps = cap_ps > 0 && per_sm[ki] > cap_ps ? cap_ps : per_sm[ki];
    const long long want = (threads + BLOCK - 1) / BLOCK, cap = (long long)sms * ps;
    const unsigned grid = (unsigned)(want < cap ? want : cap);
    amax_out out = {NULL, amax};
    if (amax) CML_TRY(cml__cuda_zeroed(ctx, (AMAX_WORD + 1) * sizeof(unsigned), FN, (void **)&out.words));
    char dts[32];
    snprintf(dts, sizeof dts, "%s,%s", cml_dtype_name((cml_dtype)YT), cml_dtype_name((cml_dtype)XT));
    /* PDL, except with amax at >= 64 MiB moved: there it ran 0.95-0.975x from f32 (session 14) and
     * 0.99-1.01x from bf16, while below it gained 4-13% (session 15; dev/membound/README.md) */
    const long long moved = n * (long long)(cml_dtype_size((cml_dtype)XT) + cml_dtype_size((cml_dtype)YT));
    if (amax && moved >= (64ll << 20)) k<<<grid, BLOCK, 0, st>>>(y, x, n, scale, out);
    else cml__launch(k, grid, BLOCK, 0, st, y, x, n, scale, out);
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
