/* Cross-entropy forward of a few long 16-byte aligned rows (fewer rows than 4 blocks per SM):
 * each row in `splits` chunks of whole words, one long-lived block per chunk and all of them in
 * one wave (splits = resident blocks / rows), the row finished by the block that arrives last
 * (common/last_arrival.cuh): it merges the chunks' (max, sum of exp) states in chunk order and
 * reads the target's logit, so no second kernel runs. The chunking depends on the shapes and the
 * kernel's occupancy only: results repeat bit for bit.
 *
 * The online update takes one rescale per batch of 8 words (cml__ms_push_word: one per word),
 * the batch's max on packed pairs (max.NaN.bf16x2) and each exp as ex2((x log2(e) - mL) - mLlo) with
 * one FFMA and one FADD, where mL + mLlo = m log2(e) exactly (mL rounded, mLlo its exact rounding
 * error, from one more FFMA per rescale): about 5.5 instructions per element instead of 7.5 (unpack,
 * x - m, the scaling, ex2, add), so new last bits against the two-kernel path (a few ulp of each
 * exp). Without mLlo the rounding of mL (half an ulp of |m| log2(e)) would shift every exponent:
 * 3e-4 relative error in each exp at |m| = 1e4 (session 9 review). */
#ifndef CML_KERNELS_CUDA_SOFTMAX_CE_FWD_SPLIT_CUH
#define CML_KERNELS_CUDA_SOFTMAX_CE_FWD_SPLIT_CUH

#include "kernels/cuda/common/last_arrival.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/softmax/softmax_common.cuh"

#define CE_SPLIT_THREADS 256
#define CE_SPLIT_UNROLL 8 /* 16-byte words in flight per thread, one rescale per batch of them */
#define CE_SPLIT_MIN_WORDS 512 /* per chunk: at least 2 words a thread */

static __device__ __forceinline__ float ce_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* The max of the elements of U words (NaN if any is NaN): on packed pairs for bf16 / f16
 * (max.NaN.bf16x2 / .f16x2, exact), one unpack at the end. */
template <int DT, int U> static __device__ __forceinline__ float ce_words_max(const uint4 (&w)[U]) {
    if constexpr (DT == CML_F32) {
        float r = cml__fmax_nan(cml__fmax_nan(__uint_as_float(w[0].x), __uint_as_float(w[0].y)),
                                cml__fmax_nan(__uint_as_float(w[0].z), __uint_as_float(w[0].w)));
#pragma unroll
        for (int u = 1; u < U; u++)
            r = cml__fmax_nan(r, cml__fmax_nan(cml__fmax_nan(__uint_as_float(w[u].x), __uint_as_float(w[u].y)),
                                               cml__fmax_nan(__uint_as_float(w[u].z), __uint_as_float(w[u].w))));
        return r;
    } else {
        unsigned m2 = cml__max2_nan<DT>(cml__max2_nan<DT>(w[0].x, w[0].y), cml__max2_nan<DT>(w[0].z, w[0].w));
#pragma unroll
        for (int u = 1; u < U; u++)
            m2 = cml__max2_nan<DT>(m2, cml__max2_nan<DT>(cml__max2_nan<DT>(w[u].x, w[u].y),
                                                         cml__max2_nan<DT>(w[u].z, w[u].w)));
        if constexpr (DT == CML_BF16)
            return cml__fmax_nan(__uint_as_float(m2 << 16), __uint_as_float(m2 & 0xFFFF0000u));
        else
            return cml__fmax_nan(__half2float(__ushort_as_half((unsigned short)(m2 & 0xFFFFu))),
                                 __half2float(__ushort_as_half((unsigned short)(m2 >> 16))));
    }
}

/* U words into the running (m, s): one rescale for the words' max, then each exp as
 * ex2((x log2(e) - mL) - mLlo) with mL + mLlo = m log2(e), or mL = mLlo = 0 while m = -inf (no
 * finite element yet: words
 * of -inf then add ex2(-inf) = 0 each, with no test). A NaN makes m and s NaN for good. `big` is
 * set when m log2(e) overflows (|m| > 2.3e38): the caller then takes its words again the exact
 * way (cml__ms_push_word). */
template <int DT, int U>
static __device__ __forceinline__ void ce_push_words(float &m, float &mL, float &mLlo, float &s, bool &big,
                                                     const uint4 (&w)[U]) {
    constexpr int V = cml__words<DT>::V;
    constexpr float L2E = 1.4426950408889634f;
    const float bm = ce_words_max<DT, U>(w);
    if (!(bm <= m)) { /* a larger max, or a NaN */
        s *= cml__fexp(m - bm);
        m = bm;
        mL = bm * L2E;
        mLlo = __fmaf_rn(bm, L2E, -mL); /* exact: the rounding error of the product */
        big = big || fabsf(mL) == INFINITY;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        float v[V];
        cml__unpack16<DT>(w[u], v);
        float e = ce_ex2(__fmaf_rn(v[0], L2E, -mL) - mLlo);
#pragma unroll
        for (int k = 1; k < V; k++) e += ce_ex2(__fmaf_rn(v[k], L2E, -mL) - mLlo);
        s += e;
    }
}

/* Block b: chunk b % splits of row b / splits (words [c cw, c cw + cw) of the row's nw words). */
template <int DT>
static __global__ void __launch_bounds__(CE_SPLIT_THREADS, 4)
    ce_fwd_split_kernel(float *loss, float *lse, cml__ms *partial, unsigned *arrivals, const void *logits,
                        const int64_t *targets, long long n, int splits, long long cw, long long ignore,
                        cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    __shared__ cml__ms scratch[32];
    __shared__ int last;
    const long long row = blockIdx.x / splits, c = blockIdx.x % splits, nw = n / V;
    const long long w0 = c * cw, w1 = w0 + cw < nw ? w0 + cw : nw;
    const uint4 *xr = (const uint4 *)((const T *)logits + row * n);
    const int t = threadIdx.x;
    float m = -INFINITY, mL = 0.0f, mLlo = 0.0f, s = 0.0f;
    bool big = false;
    /* whole batches of CE_SPLIT_UNROLL words (all loads in flight, no bounds tests, one rescale),
     * then the thread's last few words one at a time */
    constexpr long long B = (long long)CE_SPLIT_THREADS * CE_SPLIT_UNROLL;
    long long i0 = w0 + t;
    for (; i0 + B - CE_SPLIT_THREADS < w1; i0 += B) {
        uint4 buf[CE_SPLIT_UNROLL];
#pragma unroll
        for (int u = 0; u < CE_SPLIT_UNROLL; u++) buf[u] = __ldg(xr + i0 + (long long)u * CE_SPLIT_THREADS);
        ce_push_words<DT, CE_SPLIT_UNROLL>(m, mL, mLlo, s, big, buf);
    }
    for (; i0 < w1; i0 += CE_SPLIT_THREADS) {
        const uint4 one[1] = {__ldg(xr + i0)};
        ce_push_words<DT, 1>(m, mL, mLlo, s, big, one);
    }
    if (big) { /* logits beyond 2.3e38: this thread's words again, exps as exp(x - m) */
        cml__ms r = cml__ms_init();
        for (long long i = w0 + t; i < w1; i += CE_SPLIT_THREADS) {
            float v[V];
            cml__unpack16<DT>(__ldg(xr + i), v);
            cml__ms_push_word<V>(r, v);
        }
        m = r.m, s = r.s;
    }
    cml__ms a = cml__group_reduce_t(cml__ms{m, s}, CE_SPLIT_THREADS, scratch, cml__ms_merge_fn());
    if (t == 0) partial[blockIdx.x] = a;
    if (!cml__block_arrives_last(arrivals + row, (unsigned)splits, &last) || t != 0) return;
    const cml__ms *p = partial + row * splits;
    float2 q = __ldcg((const float2 *)p);
    a = cml__ms{q.x, q.y};
    for (int k = 1; k < splits; k++) {
        q = __ldcg((const float2 *)(p + k));
        a = cml__ms_merge(a, cml__ms{q.x, q.y});
    }
    const long long tgt = targets[row];
    if (tgt == ignore) {
        loss[row] = 0.0f;
    } else if (tgt < 0 || tgt >= n) {
        loss[row] = NAN;
        cml__index_flag_bad(bad, row);
    } else {
        loss[row] = ce_loss(a.m, a.s, cml__ld<DT>(logits, row * n + tgt));
    }
    if (lse) ce_store_lse(lse, row, tgt == ignore || tgt < 0 || tgt >= n, a.m, a.s);
}

#endif
