/* Pieces shared by the softmax and cross-entropy kernels: the arithmetic on
 * rows held as packed 16-byte words (max on packed pairs, sums of exps, the
 * hardware's packing conversion), the online (max, sum of exp) state, the
 * register-row geometry, and the chunk-statistics kernel of the long-row path.
 *
 * Long unaligned rows (aligned ones go in one pass: common/row_sync.cuh) take
 * two passes over row chunks of CHUNK elements, one block each: pass 1 writes each
 * chunk's (max, sum) to the workspace, pass 2 merges a row's chunk states in
 * chunk order (every block of the row the same way, so they agree bit for
 * bit) and writes the outputs. Rows go in batches of about half the L2, so
 * that pass 2 finds the input that pass 1 just read still in L2 and DRAM sees
 * it once. */
#ifndef CML_KERNELS_CUDA_SOFTMAX_SOFTMAX_COMMON_CUH
#define CML_KERNELS_CUDA_SOFTMAX_SOFTMAX_COMMON_CUH

#include <math.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/common/launch.cuh"

#define CML__SM_CHUNK 8192  /* elements per block in the long-row path (32 per thread) */
#define CML__SM_THREADS 256 /* threads per block in the long-row path */
#define CML__SM_UNROLL 4       /* 16-byte words in flight per thread and input in the apply passes */
#define CML__SM_STATS_UNROLL 8 /* ... and in the one-input statistics pass */
#define CML__SM_ONEPASS_KW 8   /* 16-byte words per thread of a one-pass chunk (row_sync.cuh) */

/* e^x through the SFU (ex2.approx.ftz): the exponent is <= 0 everywhere it is used, where its
 * error (a few ulp) is far below the f32 tolerance, and it keeps the kernels memory-bound. The
 * .ftz form is one instruction (plain ex2.approx adds a range fix-up of three for denormal
 * results, which only changes values below 2^-126). */
static __device__ __forceinline__ float cml__fexp(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
    return y;
}

/* NaN-propagating max in one instruction (cml__max_nan takes three). */
static __device__ __forceinline__ float cml__fmax_nan(float a, float b) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

/* ---- packed 16-byte words of a row (bf16/f16: two elements per 32-bit lane) ---------------------
 *
 * A bf16 word carries twice the elements of an f32 word for the same bytes, so per byte the
 * bf16 kernels do twice the arithmetic; with a per-element max of three instructions, two exps
 * with range fix-ups and a software round-to-nearest pack (nine) they were issue-bound, not
 * memory-bound (about 30 instructions per element in the softmax forward). Here: the max on
 * packed pairs (max.NaN.bf16x2: exact, half an instruction per element), one exp per element
 * where the row's exps fit in registers, and the hardware's packing conversion
 * (cml__pack16_fast, block_reduce.cuh). */

/* NaN-propagating max of two packed pairs. */
template <int DT> static __device__ __forceinline__ unsigned cml__max2_nan(unsigned a, unsigned b) {
    unsigned r;
    if constexpr (DT == CML_BF16) asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* This thread's max over the words of a row it holds (KW words, thread t of a group of G, nn
 * valid elements; -inf if it holds none). NaN anywhere gives NaN. */
template <int DT, int KW>
static __device__ __forceinline__ float cml__words_max(const uint4 (&w)[KW], int nn, int t, int G) {
    constexpr int V = cml__words<DT>::V;
    if constexpr (DT == CML_F32) {
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < KW; k++)
            if ((k * G + t) * V < nn)
                m = cml__fmax_nan(cml__fmax_nan(m, cml__fmax_nan(__uint_as_float(w[k].x), __uint_as_float(w[k].y))),
                                  cml__fmax_nan(__uint_as_float(w[k].z), __uint_as_float(w[k].w)));
        return m;
    } else {
        unsigned m2 = DT == CML_BF16 ? 0xFF80FF80u : 0xFC00FC00u; /* (-inf, -inf) */
#pragma unroll
        for (int k = 0; k < KW; k++)
            if ((k * G + t) * V < nn)
                m2 = cml__max2_nan<DT>(m2, cml__max2_nan<DT>(cml__max2_nan<DT>(w[k].x, w[k].y),
                                                             cml__max2_nan<DT>(w[k].z, w[k].w)));
        float v[2];
        if constexpr (DT == CML_BF16) {
            v[0] = __uint_as_float(m2 << 16);
            v[1] = __uint_as_float(m2 & 0xFFFF0000u);
        } else {
            v[0] = __half2float(__ushort_as_half((unsigned short)(m2 & 0xFFFFu)));
            v[1] = __half2float(__ushort_as_half((unsigned short)(m2 >> 16)));
        }
        return cml__fmax_nan(v[0], v[1]);
    }
}

/* This thread's sum of exp(x - m) over the valid words it holds; with KEEP, e[] gets each
 * exp (word k's in e[k V .. k V + V)) so that the outputs need no second exp. m = -inf (all
 * of the row or chunk -inf) counts as 0: the exps and the sum are 0, not NaN, so that a chunk
 * of -inf merged into a finite row gives 0s (a whole row of -inf still ends NaN: 0 / 0). */
template <int DT, int KW, bool KEEP>
static __device__ __forceinline__ float cml__words_sumexp(const uint4 (&w)[KW], int nn, int t, int G, float m,
                                                          float (&e)[KW * cml__words<DT>::V]) {
    constexpr int V = cml__words<DT>::V;
    if (m == -INFINITY) m = 0.0f;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        if ((k * G + t) * V < nn) {
            float v[V];
            cml__unpack16<DT>(w[k], v);
#pragma unroll
            for (int u = 0; u < V; u++) {
                const float x = cml__fexp(v[u] - m);
                if constexpr (KEEP) e[k * V + u] = x;
                s += x;
            }
        } else if constexpr (KEEP) {
#pragma unroll
            for (int u = 0; u < V; u++) e[k * V + u] = 0.0f;
        }
    }
    return s;
}

/* Element `col` of the row if this thread holds it (thread t of G, a power of two), else 0. */
template <int DT, int KW>
static __device__ __forceinline__ float cml__words_pick(const uint4 (&w)[KW], int col, int t, int G) {
    constexpr int V = cml__words<DT>::V;
    const int wi = col / V, lg = __ffs(G) - 1;
    float r = 0.0f;
    if ((wi & (G - 1)) == t) {
        const int kk = wi >> lg, uu = col % V;
#pragma unroll
        for (int k = 0; k < KW; k++)
            if (k == kk) {
                float v[V];
                cml__unpack16<DT>(w[k], v);
#pragma unroll
                for (int u = 0; u < V; u++)
                    if (u == uu) r = v[u];
            }
    }
    return r;
}

/* Running max m and s = sum of exp(x - m) over the elements seen. */
struct cml__ms {
    float m, s;
};

static __device__ __forceinline__ cml__ms cml__ms_init() { return {-INFINITY, 0.0f}; }

static __device__ __forceinline__ void cml__ms_push(cml__ms &a, float x) {
    if (x > a.m) {
        a.s = a.s * cml__fexp(a.m - x) + 1.0f;
        a.m = x;
    } else {
        a.s += x == a.m ? 1.0f : cml__fexp(x - a.m); /* x == m also covers -inf, where x - m is NaN */
    }
}

static __device__ __forceinline__ cml__ms cml__ms_merge(cml__ms a, cml__ms b) {
    const float m = cml__max_nan(a.m, b.m);
    const float sa = a.m == m ? a.s : a.s * cml__fexp(a.m - m);
    const float sb = b.m == m ? b.s : b.s * cml__fexp(b.m - m);
    return {m, sa + sb};
}

/* V values at once: one rescale for the word's max, then V independent exps (no
 * per-element branch or dependent chain, which made the per-element update compute-bound). */
template <int V> static __device__ __forceinline__ void cml__ms_push_word(cml__ms &a, const float *v) {
    float bm = v[0];
#pragma unroll
    for (int k = 1; k < V; k++) bm = cml__fmax_nan(bm, v[k]);
    if (bm == -INFINITY) return; /* adds exp(-inf - m) = 0 each (and keeps m = -inf out of x - m) */
    if (!(bm <= a.m)) {          /* a larger max, or a NaN, which then sticks */
        a.s *= cml__fexp(a.m - bm);
        a.m = bm;
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) s += cml__fexp(v[k] - a.m);
    a.s += s;
}

struct cml__ms_merge_fn {
    __device__ __forceinline__ cml__ms operator()(cml__ms a, cml__ms b) const { return cml__ms_merge(a, b); }
};

/* The merge of partial[0 .. splits), in order. */
static __device__ __forceinline__ cml__ms cml__ms_merge_all(const cml__ms *partial, int splits) {
    cml__ms a = partial[0];
    for (int k = 1; k < splits; k++) a = cml__ms_merge(a, partial[k]);
    return a;
}

/* Pass 1 of the long-row path: block b reduces chunk b % splits of row row0 + b / splits
 * of x (rows of n) into partial[(b / splits) * splits + b % splits] (batch-relative). */
template <int DT>
static __global__ void __launch_bounds__(CML__SM_THREADS)
    cml__softmax_stats_kernel(cml__ms *partial, const void *x, long long row0, long long n, int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ cml__ms scratch[32];
    const long long b = blockIdx.x, row = row0 + b / splits;
    const long long lo = (b % splits) * (long long)CML__SM_CHUNK;
    const long long hi = lo + CML__SM_CHUNK < n ? lo + CML__SM_CHUNK : n;
    cml__ms a = cml__ms_init();
    cml__stream_words<DT, CML__SM_STATS_UNROLL>(
        (const T *)x + row * n, lo, hi, threadIdx.x, CML__SM_THREADS, [&](float v) { cml__ms_push(a, v); },
        [&](const float *v) { cml__ms_push_word<cml__words<DT>::V>(a, v); });
    a = cml__group_reduce_t(a, CML__SM_THREADS, scratch, cml__ms_merge_fn());
    if (threadIdx.x == 0) partial[b] = a;
}

/* Rows per batch of the long-row path: about half the L2 of input bytes (at least 1). */
static inline long long cml__sm_batch_rows(const cml_ctx *ctx, long long row_bytes) {
    const long long b = cml__cuda_l2_bytes(ctx->device.index) / 2 / (row_bytes > 0 ? row_bytes : 1);
    return b > 0 ? b : 1;
}

/* Register-row geometry: G threads per row (a power of two, E elements each), R rows per
 * block of max(G, 256) threads. */
static inline void cml__reg_rows_geometry(long long n, int E, int *G, int *R) {
    *G = cml__pow2_at_least((n + E - 1) / E, 1024);
    *R = *G >= 256 ? 1 : 256 / *G;
}

/* Blocks for a grid-stride loop over `items` of R rows: at most what fits the grid. */
static inline unsigned cml__row_blocks(long long rows, int R) {
    const long long b = (rows + R - 1) / R;
    return (unsigned)(b < (1ll << 30) ? b : (1ll << 30));
}

#endif
