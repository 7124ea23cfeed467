/* Pieces shared by the softmax and cross-entropy kernels: the online
 * (max, sum of exp) state, the register-row geometry, and the chunk-statistics
 * kernel of the long-row path.
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

#define CML__SM_CHUNK 8192  /* elements per block in the long-row path (32 per thread) */
#define CML__SM_THREADS 256 /* threads per block in the long-row path */
#define CML__SM_UNROLL 4       /* 16-byte words in flight per thread and input in the apply passes */
#define CML__SM_STATS_UNROLL 8 /* ... and in the one-input statistics pass */
#define CML__SM_ONEPASS_KW 8   /* 16-byte words per thread of a one-pass chunk (row_sync.cuh) */

/* e^x through the SFU (ex2.approx): the exponent is <= 0 everywhere it is used, where its
 * error (a few ulp) is far below the f32 tolerance, and it keeps the kernels memory-bound. */
static __device__ __forceinline__ float cml__fexp(float x) { return exp2f(x * 1.4426950408889634f); }

/* The max m and s = sum of exp(x - m) over a row (or chunk) held in registers as KW
 * packed 16-byte words per thread (nn valid elements, spread over a group of G
 * threads as cml__words_load left them). Two group-wide reductions, so every thread
 * of the group calls it; all of them get m and s. */
template <int DT, int KW>
static __device__ __forceinline__ void cml__words_max_sumexp(const uint4 (&w)[KW], int nn, int t, int G,
                                                             float *red_max, float *red_sum, float &m_out,
                                                             float &s_out) {
    constexpr int V = cml__words<DT>::V;
    float m = -INFINITY, s = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++)
        if ((k * G + t) * V < nn) {
            float v[V];
            cml__unpack16<DT>(w[k], v);
#pragma unroll
            for (int u = 0; u < V; u++) m = cml__max_nan(m, v[u]);
        }
    m = cml__group_allreduce(m, G, red_max, cml__max_op());
#pragma unroll
    for (int k = 0; k < KW; k++)
        if ((k * G + t) * V < nn) {
            float v[V];
            cml__unpack16<DT>(w[k], v);
#pragma unroll
            for (int u = 0; u < V; u++) s += cml__fexp(v[u] - m);
        }
    m_out = m;
    s_out = cml__group_allreduce(s, G, red_sum, cml__sum_op());
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
    for (int k = 1; k < V; k++) bm = cml__max_nan(bm, v[k]);
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
