/* CUDA cross-entropy straight from logits (rows, classes), forward and
 * backward, never materializing probabilities; f32/f16/bf16 logits, f32 math.
 *
 * Forward: loss[r] = logsumexp(row) - row[t]. 16-byte aligned rows that fit
 * on chip are held in registers as packed words (up to 32768 f32 / 65536
 * bf16 classes): the max, then the sum of exps, in fixed-order group
 * reductions; unaligned rows are streamed once with the online (max, sum of
 * exp) update, one rescale per 16-byte word, the group's states merged in a
 * fixed order; a few long rows are split into chunks instead: aligned ones in
 * one kernel of long-lived chunk blocks whose last block per row merges the
 * chunk states in order (ce_fwd_split.cuh), unaligned ones through pass 1 of
 * softmax_common.cuh, then one thread per row merging the chunk states in
 * order. Ignored rows are not read, except in split rows.
 * Backward: dlogits[r] = dloss[r] (softmax(row) - onehot(t)). Given the forward's
 * (max, log-sum) pairs (lse), one elementwise pass over every row (ce_bwd_lse_kernel). Without
 * them: rows that fit on
 * chip stay in registers (16-byte aligned rows as packed words: up to 32768
 * f32 / 65536 bf16 classes; others up to 16384 as floats), read once and
 * written once; longer aligned rows go in one pass, a chunk per block
 * (common/row_sync.cuh), unaligned ones through the two-pass chunk path.
 *
 * A -inf logit is a class of probability 0 (a mask), as on the CPU: a row whose
 * target's logit is -inf has loss +inf; a row of -inf logits only has loss +inf
 * (where logsumexp - x_t would be -inf - -inf) and softmax taken as all 0, so its
 * dlogits are -dloss at the target and 0 elsewhere (cml__ce_empty).
 *
 * Targets are data on the device. A kernel that meets a target outside
 * [0, classes) that is not ignore_index writes NaN for that row (its loss, or
 * its whole dlogits row) and flags the row in the context's bad-index word
 * (runtime/cuda_index_check.h: an integer atomicMin, the same answer whatever
 * the order); the other rows are computed as usual. The call returns without
 * waiting: the next wait for the stream (cml_ctx_synchronize, a synchronous
 * copy) returns CML_ERR_INVALID_ARG naming the row and the value, with the
 * CPU's message; CML_SYNC_CHECKS=1 makes the call itself wait and return it. */
#include <limits.h>

#include <type_traits>

#include "kernels/cuda/common/row_sync.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/softmax/softmax_common.cuh"
#include "runtime/cuda_index_check.h"

#define E_ROW 32

static __device__ __forceinline__ bool bad_target(long long t, long long n, long long ignore) {
    return t != ignore && (t < 0 || t >= n);
}

/* Whether a row's merged (max, sum of exp) says its logits are all -inf: max -inf, and no NaN
 * met (a NaN seen by the scalar online update leaves the max alone but makes the sum NaN). */
static __device__ __forceinline__ bool cml__ce_empty(float m, float s) { return m == -INFINITY && s == s; }

/* loss from the row's max m, sum of exp(x - m) s and target logit x_t: +inf for a row of -inf
 * logits (a target of probability 0), not (-inf - -inf) + log(s). */
static __device__ __forceinline__ float ce_loss(float m, float s, float x_t) {
    return cml__ce_empty(m, s) ? INFINITY : (m - x_t) + logf(s);
}

/* Row r's logsumexp for the backward, as the pair (m, log(s)) (include/camel/kernels.h): (-inf, 0)
 * for a row of -inf logits, (NaN, NaN) for a row not computed (skip); a NaN logit leaves a NaN in
 * the pair (the scalar online update may keep m = -inf and make s NaN: ce_bwd_lse_kernel tests
 * emptiness as cml__ce_empty does). */
static __device__ __forceinline__ void ce_store_lse(float *lse, long long r, bool skip, float m, float s) {
    const bool empty = cml__ce_empty(m, s);
    ((float2 *)lse)[r] = skip ? make_float2(NAN, NAN) : make_float2(m, empty ? 0.0f : logf(s));
}

/* the long-row split forward (uses ce_loss above) */
#include "kernels/cuda/softmax/ce_fwd_split.cuh"

/* ---- forward ------------------------------------------------------------------------------------ */

template <int DT>
static __global__ void __launch_bounds__(256, 3) ce_fwd_rows_kernel(float *loss, float *lse, const void *logits,
                                                                 const int64_t *targets, long long rows, long long n,
                                                                 long long ignore, cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ cml__ms scratch[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const long long tgt = valid ? (long long)targets[row] : ignore;
        const bool skip = tgt == ignore || bad_target(tgt, n, ignore);
        cml__ms a = cml__ms_init();
        if (!skip)
            cml__stream_words<DT, CML__SM_STATS_UNROLL>(
                (const T *)logits + row * n, 0, n, t, G, [&](float v) { cml__ms_push(a, v); },
                [&](const float *v) { cml__ms_push_word<cml__words<DT>::V>(a, v); });
        a = cml__group_reduce_t(a, G, scratch, cml__ms_merge_fn());
        if (t == 0 && valid) {
            if (tgt == ignore) {
                loss[row] = 0.0f;
            } else if (skip) {
                loss[row] = NAN;
                cml__index_flag_bad(bad, row);
            } else {
                loss[row] = ce_loss(a.m, a.s, cml__ld<DT>(logits, row * n + tgt));
            }
            if (lse) ce_store_lse(lse, row, skip, a.m, a.s);
        }
        if (G > 32) __syncthreads(); /* scratch is reused by the next row */
    }
}

/* The row max for every thread of a group of G threads (G = GT when GT > 0): the max.NaN
 * butterfly inside warps, then each thread folds the warp maxima. The values are the threads'
 * cml__words_max, already max.NaN results (NaN as the canonical NaN), so one max.NaN per step
 * gives the bits cml__group_allreduce with cml__max_op gave, in a third of the instructions. */
template <int GT>
static __device__ __forceinline__ float ce_group_max(float v, int G, float *scratch) {
    const int width = G < 32 ? G : 32;
#pragma unroll
    for (int off = width / 2; off > 0; off >>= 1) v = cml__fmax_nan(v, __shfl_xor_sync(CML__FULL_MASK, v, off));
    if (G <= 32) return v;
    const int nw = G / 32;
    float *s = scratch + threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) s[threadIdx.x / 32] = v;
    __syncthreads();
    float r = s[0];
#pragma unroll
    for (int w = 1; w < nw; w++) r = cml__fmax_nan(r, s[w]);
    return r;
}

/* The group's two sums, valid in its first thread only (the one that writes the loss): the same
 * butterfly and warp-order fold as cml__group_allreduce_sum2, so the same bits, but the other
 * threads skip the fold. */
static __device__ __forceinline__ float2 ce_group_sum2_first(float2 v, int G, float2 *scratch) {
    const int width = G < 32 ? G : 32;
#pragma unroll
    for (int off = width / 2; off > 0; off >>= 1) {
        v.x += __shfl_xor_sync(CML__FULL_MASK, v.x, off);
        v.y += __shfl_xor_sync(CML__FULL_MASK, v.y, off);
    }
    if (G <= 32) return v;
    const int nw = G / 32;
    float2 *s = scratch + threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) s[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        v = s[0];
#pragma unroll
        for (int w = 1; w < nw; w++) {
            v.x += s[w].x;
            v.y += s[w].y;
        }
    }
    return v;
}

/* 16-byte aligned rows that fit on chip: KW packed words per thread (rows.cuh), all of a
 * thread's loads in flight at once; the max on packed pairs, then the sum of exps, and the
 * target's logit from the registers of the thread that holds it (summed with the exps: the
 * others add 0), so no dependent load follows the row. GT: the group width G as a constant
 * (32 .. 512: immediate load offsets, unrolled reductions), or 0 for G = blockDim.x < 32. */
template <int KW, int GT> struct ce_words_bounds {
    static constexpr int threads = GT > 256 ? GT : 256;                   /* a block: max(G, 256) threads */
    static constexpr int blocks = (KW == 4 ? 2048 : 1024) / threads; /* 32 / 64 registers a thread */
};

template <int DT, int KW, int GT>
static __global__ void __launch_bounds__(ce_words_bounds<KW, GT>::threads, ce_words_bounds<KW, GT>::blocks)
    ce_fwd_words_kernel(float *loss, float *lse, const void *logits, const int64_t *targets, long long rows, int n,
                        long long ignore, cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float red_max[32];
    __shared__ float2 red_sum[32];
    const int G = GT > 0 ? GT : (int)blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const long long tgt = valid ? (long long)targets[row] : ignore;
        const bool skip = tgt == ignore || bad_target(tgt, n, ignore);
        const int nn = skip ? 0 : n; /* ignored and bad rows are not read */
        uint4 w[KW];
        cml__words_load<DT, KW>(w, (const T *)logits + (size_t)(valid ? row : 0) * (size_t)n, nn, t, G);
        const float m = ce_group_max<GT>(cml__words_max<DT, KW>(w, nn, t, G), G, red_max);
        float e[KW * cml__words<DT>::V];
        const float2 sx = ce_group_sum2_first(make_float2(cml__words_sumexp<DT, KW, false>(w, nn, t, G, m, e),
                                                          nn ? cml__words_pick<DT, KW>(w, (int)tgt, t, G) : 0.0f),
                                              G, red_sum);
        if (t == 0 && valid) {
            if (tgt == ignore) {
                loss[row] = 0.0f;
            } else if (skip) {
                loss[row] = NAN;
                cml__index_flag_bad(bad, row);
            } else {
                loss[row] = ce_loss(m, sx.x, sx.y); /* sx.x = 0 for a row of -inf: exps taken from 0 */
            }
            if (lse) ce_store_lse(lse, row, skip, m, sx.x);
        }
    }
}

/* ce_fwd_words_kernel<DT, KW, G> for G = 32 .. 512, <DT, KW, 0> for narrower groups. */
template <int DT, int KW>
static void ce_fwd_words_launch(unsigned grid, dim3 block, cudaStream_t st, float *loss, float *lse,
                                const void *logits, const int64_t *targets, long long rows, int n, long long ignore,
                                cml__index_flag bad) {
    void (*k)(float *, float *, const void *, const int64_t *, long long, int, long long, cml__index_flag);
    switch (block.x) {
    case 32: k = ce_fwd_words_kernel<DT, KW, 32>; break;
    case 64: k = ce_fwd_words_kernel<DT, KW, 64>; break;
    case 128: k = ce_fwd_words_kernel<DT, KW, 128>; break;
    case 256: k = ce_fwd_words_kernel<DT, KW, 256>; break;
    case 512: k = ce_fwd_words_kernel<DT, KW, 512>; break;
    default: k = ce_fwd_words_kernel<DT, KW, 0>;
    }
    cml__launch(k, grid, block, 0, st, loss, lse, logits, targets, rows, n, ignore, bad);
}

/* After cml__softmax_stats_kernel over all rows: one thread per row. */
template <int DT>
static __global__ void ce_fwd_finalize_kernel(float *loss, float *lse, const cml__ms *partial, const void *logits,
                                              const int64_t *targets, long long rows, long long n, int splits,
                                              long long ignore, cml__index_flag bad) {
    cml__pdl_entry();
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const long long tgt = targets[row];
    if (tgt == ignore) {
        loss[row] = 0.0f;
    } else if (bad_target(tgt, n, ignore)) {
        loss[row] = NAN;
        cml__index_flag_bad(bad, row);
    } else {
        const cml__ms a = cml__ms_merge_all(partial + row * splits, splits);
        loss[row] = ce_loss(a.m, a.s, cml__ld<DT>(logits, row * n + tgt));
        if (lse) ce_store_lse(lse, row, false, a.m, a.s);
        return;
    }
    if (lse) ce_store_lse(lse, row, true, 0.0f, 0.0f);
}

/* ---- backward ----------------------------------------------------------------------------------- */

/* dlogits of a row (or chunk, its columns from lo) held as KW packed words per thread: word k
 * gets g exp(x - M) / S - g [col == tgt] with ge = g exp(m - M) / S (e[] holds exp(x - m)
 * when KEEP; m = M otherwise); ignored rows get 0, bad ones NaN (fill). The one-hot element
 * is stored again, alone, after its word (the same thread, so the second store wins): writing
 * it into the word's array at a run-time position put the array in local memory. */
template <int DT, int KW, bool KEEP>
static __device__ __forceinline__ void ce_bwd_store_words(void *out, const uint4 (&w)[KW],
                                                          const float (&e)[KW * cml__words<DT>::V], int nn, int t,
                                                          int G, long long lo, long long tgt, float M, float ge,
                                                          float g, bool fill, float fill_value) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    int hot_c = -1; /* the target's column in this chunk, if this thread holds it */
    float hot = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * G + t) * V;
        if (c < nn) {
            float v[V];
            if (fill) {
#pragma unroll
                for (int u = 0; u < V; u++) v[u] = fill_value;
            } else {
                if constexpr (KEEP) {
#pragma unroll
                    for (int u = 0; u < V; u++) v[u] = e[k * V + u] * ge;
                } else {
                    cml__unpack16<DT>(w[k], v);
#pragma unroll
                    for (int u = 0; u < V; u++) v[u] = cml__fexp(v[u] - M) * ge;
                }
                const long long rel = tgt - (lo + c);
                if (rel >= 0 && rel < V) {
                    hot_c = c + (int)rel;
#pragma unroll
                    for (int u = 0; u < V; u++)
                        if (u == (int)rel) hot = v[u];
                }
            }
            cml__st16((T *)out + c, cml__pack16_fast<DT>(v));
        }
    }
    if (hot_c >= 0) ((T *)out)[hot_c] = cml__from_f32<DT>(hot - g); /* the one-hot term */
}

/* 16-byte aligned rows: KW packed words per thread (rows.cuh); at 4 words the exps stay in
 * registers for the outputs (one exp per element). */
template <int DT, int KW>
static __global__ void __launch_bounds__(1024) ce_bwd_words_kernel(void *dlogits, const float *dloss,
                                                                   const void *logits, const int64_t *targets,
                                                                   long long rows, int n, long long ignore,
                                                                   cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    constexpr bool KEEP = KW == 4; /* f32 at 8 words too would spill (64 registers at most) */
    __shared__ float red_max[32], red_sum[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const long long tgt = valid ? (long long)targets[row] : ignore;
        const bool ignored = tgt == ignore, is_bad = bad_target(tgt, n, ignore);
        const int nn = valid && !ignored && !is_bad ? n : 0; /* ignored and bad rows are not read */
        const size_t off = (size_t)(valid ? row : 0) * (size_t)n;
        const float g = nn ? dloss[row] : 0.0f; /* loaded before the row: the latencies overlap */
        uint4 w[KW];
        cml__words_load<DT, KW>(w, (const T *)logits + off, nn, t, G);
        const float m = cml__group_allreduce(cml__words_max<DT, KW>(w, nn, t, G), G, red_max, cml__max_op());
        float e[KW * V];
        const float s = cml__group_allreduce(cml__words_sumexp<DT, KW, KEEP>(w, nn, t, G, m, e), G, red_sum,
                                             cml__sum_op());
        const bool empty = m == -INFINITY; /* all -inf: the exps from 0 (all 0), scaled by 0, not g / 0 */
        if (valid)
            ce_bwd_store_words<DT, KW, KEEP>((T *)dlogits + off, w, e, n, t, G, 0, tgt, empty ? 0.0f : m,
                                             empty ? 0.0f : g / s, g, nn == 0, ignored ? 0.0f : NAN);
        if (valid && is_bad && t == 0) cml__index_flag_bad(bad, row);
    }
}

/* Unaligned rows: E floats per thread, scalar accesses (more registers for addresses: 512
 * threads at most). */
template <int DT, bool VEC>
static __global__ void __launch_bounds__(VEC ? 1024 : 512) ce_bwd_rows_kernel(void *dlogits, const float *dloss,
                                                                  const void *logits, const int64_t *targets,
                                                                  long long rows, int n, long long ignore,
                                                                  cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float red_max[32], red_sum[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const long long tgt = valid ? (long long)targets[row] : ignore;
        const bool ignored = tgt == ignore, is_bad = bad_target(tgt, n, ignore);
        const size_t off = (size_t)(valid ? row : 0) * (size_t)n;
        float v[E_ROW];
        cml__row_load<DT, VEC, E_ROW>(v, (const T *)logits + off, valid && !ignored && !is_bad ? n : 0, t, G,
                                      -INFINITY);
        float m = -INFINITY;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) m = cml__max_nan(m, v[e]);
        m = cml__group_allreduce(m, G, red_max, cml__max_op());
        const bool empty = m == -INFINITY; /* all -inf (or no row): softmax taken as all 0 */
        if (empty) m = 0.0f;               /* exp(-inf - 0) = 0, where exp(-inf - -inf) is NaN */
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) s += cml__fexp(v[e] - m);
        s = cml__group_allreduce(s, G, red_sum, cml__sum_op());
        const float ls = logf(s), g = valid && !ignored && !is_bad ? dloss[row] : 0.0f;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            float d = empty ? 0.0f : g * cml__fexp((v[e] - m) - ls);
            if (cml__row_col<DT, VEC>(e, t, G) == tgt) d -= g; /* the one-hot term */
            v[e] = ignored ? 0.0f : is_bad ? NAN : d;
        }
        if (valid) {
            cml__row_store<DT, VEC, E_ROW>((T *)dlogits + off, v, n, t, G);
            if (is_bad && t == 0) cml__index_flag_bad(bad, row);
        }
    }
}

/* Long aligned rows in one pass (row_sync.cuh): a chunk of 256 threads x 8 words per block. */
template <int DT>
static __global__ void __launch_bounds__(CML__SM_THREADS, 4)
    ce_bwd_onepass_kernel(void *dlogits, const float *dloss, const void *logits, const int64_t *targets,
                          unsigned *sync, unsigned long long *states, long long n, int splits, long long ignore,
                          cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, KW = CML__SM_ONEPASS_KW;
    constexpr bool KEEP = false; /* the exps again after the merge, as in softmax_fwd_onepass_kernel */
    constexpr long long CH = (long long)CML__SM_THREADS * KW * V;
    __shared__ float red_max[32], red_sum[32], stat[3];
    const int t = threadIdx.x;
    const unsigned b = cml__take_ticket(sync);
    const long long row = b / splits, lo = (b % splits) * CH;
    const int nn = (int)(n - lo < CH ? n - lo : CH);
    const size_t off = (size_t)row * (size_t)n + (size_t)lo;
    const long long tgt = targets[row];
    const bool ignored = tgt == ignore, is_bad = bad_target(tgt, n, ignore);
    const int nl = ignored || is_bad ? 0 : nn; /* ignored and bad rows are not read */
    uint4 w[KW];
    cml__words_load<DT, KW>(w, (const T *)logits + off, nl, t, CML__SM_THREADS);
    const float m = cml__group_allreduce(cml__words_max<DT, KW>(w, nl, t, CML__SM_THREADS), CML__SM_THREADS, red_max,
                                         cml__max_op());
    float e[KW * V];
    const float s = cml__group_allreduce(cml__words_sumexp<DT, KW, KEEP>(w, nl, t, CML__SM_THREADS, m, e),
                                         CML__SM_THREADS, red_sum, cml__sum_op());
    if (t < 32) {
        bool ok;
        cml__ms a = cml__row_merge(sync, states, row, (int)(b % splits), splits, cml__ms{m, s}, cml__ms_init(),
                                   cml__ms_merge_fn(), ok);
        if (!ok) a = cml__ms{NAN, NAN};
        if (t == 0) {
            const float g = ignored ? 0.0f : is_bad ? NAN : dloss[row];
            const bool empty = cml__ce_empty(a.m, a.s); /* all -inf: exps from 0 (all 0), scaled by 0 */
            stat[0] = empty ? 0.0f : a.m;
            stat[1] = empty ? 0.0f : g / a.s;
            stat[2] = g;
            if (is_bad && b % splits == 0) cml__index_flag_bad(bad, row);
        }
    }
    __syncthreads();
    ce_bwd_store_words<DT, KW, KEEP>((T *)dlogits + off, w, e, nn, t, CML__SM_THREADS, lo, tgt, stat[0], stat[1],
                                     stat[2], nl == 0, ignored ? 0.0f : NAN);
}

/* Long unaligned rows: pass 2 after cml__softmax_stats_kernel. */
template <int DT>
static __global__ void __launch_bounds__(CML__SM_THREADS)
    ce_bwd_apply_kernel(void *dlogits, const float *dloss, const void *logits, const int64_t *targets,
                        const cml__ms *partial, long long row0, long long n, int splits, long long ignore,
                        cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float stat[3];
    __shared__ long long stat_t;
    __shared__ bool stat_ignored;
    const long long b = blockIdx.x, row = row0 + b / splits;
    if (threadIdx.x == 0) {
        const long long tgt = targets[row];
        const cml__ms a = cml__ms_merge_all(partial + (b / splits) * splits, splits);
        const bool ignored = tgt == ignore, is_bad = bad_target(tgt, n, ignore);
        const bool empty = cml__ce_empty(a.m, a.s); /* all -inf: exp(-inf - 0 - 0) = 0 */
        stat[0] = empty ? 0.0f : a.m;
        stat[1] = empty ? 0.0f : logf(a.s);
        stat[2] = ignored ? 0.0f : is_bad ? NAN : dloss[row];
        stat_t = tgt;
        stat_ignored = ignored;
        if (is_bad && b % splits == 0) cml__index_flag_bad(bad, row);
    }
    __syncthreads();
    const float m = stat[0], ls = stat[1], g = stat[2];
    const long long tgt = stat_t;
    const bool ignored = stat_ignored;
    const long long lo = (b % splits) * (long long)CML__SM_CHUNK;
    const long long hi = lo + CML__SM_CHUNK < n ? lo + CML__SM_CHUNK : n;
    cml__stream<DT, 1, true, CML__SM_UNROLL>((T *)dlogits + row * n, (const T *)logits + row * n, nullptr, lo, hi,
                                             threadIdx.x, CML__SM_THREADS, [&](const float *v, long long j) {
                                                 if (ignored) return 0.0f; /* even for inf/NaN logits */
                                                 const float d = g * cml__fexp((v[0] - m) - ls);
                                                 return j == tgt ? d - g : d;
                                             });
}

/* With the forward's logsumexp (m, ls): dlogits = dloss[r] (exp((x - m) - ls) - onehot(t)), elementwise, so
 * rows of every length stream like a copy: no row reduction, one read of the logits. Flat over
 * units of U elements (a 16-byte word where the rows and pointers allow, else one element), UNROLL
 * units a thread in flight, held packed until their turn; a unit's row by 32-bit division (the
 * caller keeps units < 2^31). The
 * logits of ignored and bad rows are read too (keeping the loads independent of the targets) and
 * not used: 0 / NaN as in the other kernels. dlogits may alias logits (each unit is read, then
 * written, by one thread). */
template <int DT, bool VEC, int UNROLL>
static __global__ void __launch_bounds__(256) ce_bwd_lse_kernel(void *dlogits, const float *dloss, const void *logits,
                                                                   const float *lse, const int64_t *targets,
                                                                   unsigned units, unsigned row_units, long long n,
                                                                   long long ignore, cml__index_flag bad) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int U = VEC ? cml__words<DT>::V : 1;
    typedef typename std::conditional<VEC, uint4, T>::type Unit; /* held packed until its turn */
    const unsigned step = gridDim.x * blockDim.x * UNROLL;
    for (unsigned base = blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < units; base += step) {
        Unit w[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const unsigned u = base + k * blockDim.x;
            if (u < units) w[k] = __ldcs((const Unit *)logits + u);
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const unsigned u = base + k * blockDim.x;
            if (u >= units) break;
            const unsigned row = u / row_units;
            const long long c0 = (long long)(u - row * row_units) * U, tgt = targets[row];
            const bool ignored = tgt == ignore, is_bad = bad_target(tgt, n, ignore);
            const float2 L = ((const float2 *)lse)[row];
            const float g = ignored ? 0.0f : is_bad ? NAN : dloss[row];
            /* a row of -inf logits: softmax taken as all 0; not a row whose NaN left the scalar online
             * update's max at -inf (its log-sum is NaN, and so are its gradients, as on the CPU) */
            const bool empty = cml__ce_empty(L.x, L.y);
            const int hot = tgt >= c0 && tgt < c0 + U ? (int)(tgt - c0) : -1; /* the one-hot element */
            float v[U];
            if constexpr (VEC) cml__unpack16<DT>(w[k], v);
            else v[0] = cml__to_f32<DT>(w[k]);
#pragma unroll
            for (int e = 0; e < U; e++) {
                float d = empty ? 0.0f : g * cml__fexp((v[e] - L.x) - L.y);
                if (e == hot) d -= g;
                v[e] = ignored ? 0.0f : d;
            }
            if constexpr (VEC) cml__st16((uint4 *)dlogits + u, cml__pack16_fast<DT>(v));
            else ((T *)dlogits)[u] = cml__from_f32<DT>(v[0]);
            if (is_bad && c0 == 0) cml__index_flag_bad(bad, row);
        }
    }
}

/* ---- launches ------------------------------------------------------------------------------------ */

static cml_status launched(const char *fn, const char *kernel, cml_dtype dt, long long n, unsigned grid,
                           unsigned block) {
    return cml__cuda_check_launch(fn, kernel, cml_dtype_name(dt), n, grid, block);
}

/* Registers the call with the context's bad-index check (runtime/cuda_index_check.h). */
static cml_status ce_begin(cml_ctx *ctx, const char *fn, const int64_t *targets, long long rows, long long n,
                           long long ignore, cml__index_flag *bad) {
    const cml__index_call call = {fn, "targets", targets, n, "", true, ignore};
    return cml__index_check_begin(ctx, &call, rows, bad);
}

/* Chunk states in the workspace. */
static cml_status ce_states(cml_ctx *ctx, size_t bytes, cml__ms **states) {
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, bytes > 0 ? bytes : 1));
    *states = (cml__ms *)ws;
    return CML_OK;
}

/* Blocks of the split forward that fit an SM at once. */
static int ce_split_per_sm(void (*k)(float *, float *, cml__ms *, unsigned *, const void *, const int64_t *,
                                     long long, int, long long, long long, cml__index_flag)) {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, CE_SPLIT_THREADS, 0) != cudaSuccess || per_sm < 1) {
        (void)cudaGetLastError();
        per_sm = 1;
    }
    return per_sm;
}

static int sm_count(const cml_ctx *ctx) {
    const int s = cml__cuda_sm_count(ctx->device.index);
    return s > 0 ? s : 132;
}

template <int DT>
static cml_status fwd_launch(cml_ctx *ctx, float *loss, float *lse, const void *logits, const int64_t *targets,
                             long long rows, long long n, long long ignore) {
    static const char fn[] = "cml_cross_entropy_fwd";
    cudaStream_t st = cml__stream(ctx);
    const int splits = (int)((n + CML__SM_CHUNK - 1) / CML__SM_CHUNK);
    const bool split = rows < 4ll * sm_count(ctx) && splits >= 2;
    cml__index_flag bad;
    cml__ms *states = NULL;
    int KW, G, R;
    /* aligned long rows: one wave of long-lived chunk blocks, finished by each row's last block */
    const long long nw = n / (16 / (long long)sizeof(typename cml__elem<DT>::type));
    long long wsplits = 0;
    if (split && cml__rows_vec_ok(n, sizeof(typename cml__elem<DT>::type), logits, logits, logits)) {
        static int per_sm; /* cached as cml__cuda_l2_bytes does (no thread-safe statics in libcamel) */
        if (per_sm == 0) per_sm = ce_split_per_sm(ce_fwd_split_kernel<DT>);
        wsplits = (long long)sm_count(ctx) * per_sm / rows;
        if (wsplits > nw / CE_SPLIT_MIN_WORDS) wsplits = nw / CE_SPLIT_MIN_WORDS;
    }
    if (wsplits >= 2) {
        const long long cw = (nw + wsplits - 1) / wsplits;
        unsigned *arrivals = NULL;
        CML_TRY(ce_states(ctx, (size_t)(rows * wsplits) * sizeof(cml__ms), &states));
        CML_TRY(cml__cuda_zeroed(ctx, (size_t)rows * sizeof(unsigned), fn, (void **)&arrivals));
        CML_TRY(ce_begin(ctx, fn, targets, rows, n, ignore, &bad));
        const unsigned grid = (unsigned)(rows * wsplits);
        cml__launch(ce_fwd_split_kernel<DT>, grid, CE_SPLIT_THREADS, 0, st, loss, lse, states, arrivals, logits,
                    targets, n, (int)wsplits, cw, ignore, bad);
        CML_TRY(launched(fn, "ce_fwd_split_kernel", (cml_dtype)DT, rows * n, grid, CE_SPLIT_THREADS));
        return cml__index_check_end(ctx, fn);
    }
    if (split) CML_TRY(ce_states(ctx, (size_t)(rows * splits) * sizeof(cml__ms), &states));
    CML_TRY(ce_begin(ctx, fn, targets, rows, n, ignore, &bad));
    if (split) {
        const unsigned grid = (unsigned)(rows * splits);
        cml__launch(cml__softmax_stats_kernel<DT>, grid, CML__SM_THREADS, 0, st, states, logits, 0, n, splits);
        CML_TRY(launched(fn, "cml__softmax_stats_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
        const unsigned grid2 = (unsigned)((rows + 255) / 256);
        cml__launch(ce_fwd_finalize_kernel<DT>, grid2, 256, 0, st, loss, lse, states, logits, targets, rows, n, splits,
                    ignore, bad);
        CML_TRY(launched(fn, "ce_fwd_finalize_kernel", (cml_dtype)DT, rows, grid2, 256));
    } else if (cml__rows_vec_ok(n, sizeof(typename cml__elem<DT>::type), logits, logits, logits) &&
               cml__words_geometry(n, sizeof(typename cml__elem<DT>::type), &KW, &G, &R) && G <= 512 &&
               (KW == 4 || G == 512)) {
        /* (rows of 1024 threads leave one block per SM, idle through its reductions: 1024x32768
         * f32 went from 2584 to 1996 GB/s that way; the streaming kernel below takes them) */
        const unsigned grid = cml__row_blocks(rows, R);
        const dim3 block(G, R);
        /* (KW = 8 only for rows of more than 4 x 512 words, so G = 512 there; checked above) */
        if (KW == 4) ce_fwd_words_launch<DT, 4>(grid, block, st, loss, lse, logits, targets, rows, (int)n, ignore, bad);
        else cml__launch(ce_fwd_words_kernel<DT, 8, 512>, grid, block, 0, st, loss, lse, logits, targets, rows,
                         (int)n, ignore, bad);
        CML_TRY(launched(fn, "ce_fwd_words_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R)));
    } else {
        /* other rows: ~128 bytes per thread (one batch of 8 words in flight), 32..256 threads per row: the
         * batch takes ~75 registers, so small blocks let 3 share an SM */
        G = cml__pow2_at_least((n * (long long)sizeof(typename cml__elem<DT>::type) + 127) / 128, 256);
        if (G < 32) G = 32;
        R = 256 / G;
        const unsigned grid = cml__row_blocks(rows, R);
        cml__launch(ce_fwd_rows_kernel<DT>, grid, dim3(G, R), 0, st, loss, lse, logits, targets, rows, n, ignore, bad);
        CML_TRY(launched(fn, "ce_fwd_rows_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R)));
    }
    return cml__index_check_end(ctx, fn);
}

template <int DT>
static cml_status bwd_launch(cml_ctx *ctx, void *dlogits, const float *dloss, const void *logits, const float *lse,
                             const int64_t *targets, long long rows, long long n, long long ignore) {
    static const char fn[] = "cml_cross_entropy_bwd";
    cudaStream_t st = cml__stream(ctx);
    typedef typename cml__elem<DT>::type T;
    cml__index_flag bad;
    cml__ms *states = NULL;
    int KW, G, R;
    const bool vec = cml__rows_vec_ok(n, sizeof(T), dlogits, logits, logits);
    const long long units = vec ? rows * n / (16 / (long long)sizeof(T)) : rows * n;
    if (lse && units < (1ll << 31)) { /* one pass with the forward's logsumexp */
        CML_TRY(ce_begin(ctx, fn, targets, rows, n, ignore, &bad));
        /* 4 words a thread (16-bit: 48 registers, 5 blocks an SM; 8 words took 80 and measured 2-17%
         * slower in session 15), 8 elements unaligned; one pass of the kernel's loop a block */
        const long long per_block = 256ll * (vec ? 4 : 8);
        const unsigned grid = (unsigned)((units + per_block - 1) / per_block), ru = (unsigned)(units / rows);
        if (vec)
            cml__launch(ce_bwd_lse_kernel<DT, true, 4>, grid, 256, 0, st, dlogits, dloss, logits, lse, targets,
                        (unsigned)units, ru, n, ignore, bad);
        else
            cml__launch(ce_bwd_lse_kernel<DT, false, 8>, grid, 256, 0, st, dlogits, dloss, logits, lse, targets,
                        (unsigned)units, ru, n, ignore, bad);
        CML_TRY(launched(fn, "ce_bwd_lse_kernel", (cml_dtype)DT, rows * n, grid, 256));
        return cml__index_check_end(ctx, fn);
    }
    if (vec && cml__words_geometry(n, sizeof(T), &KW, &G, &R)) {
        CML_TRY(ce_begin(ctx, fn, targets, rows, n, ignore, &bad));
        const unsigned grid = cml__row_blocks(rows, R);
        if (KW == 4)
            cml__launch(ce_bwd_words_kernel<DT, 4>, grid, dim3(G, R), 0, st, dlogits, dloss, logits, targets, rows,
                        (int)n, ignore, bad);
        else
            cml__launch(ce_bwd_words_kernel<DT, 8>, grid, dim3(G, R), 0, st, dlogits, dloss, logits, targets, rows,
                        (int)n, ignore, bad);
        CML_TRY(launched(fn, "ce_bwd_words_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R)));
        return cml__index_check_end(ctx, fn);
    }
    if (n <= 512 * E_ROW) {
        CML_TRY(ce_begin(ctx, fn, targets, rows, n, ignore, &bad));
        cml__reg_rows_geometry(n, E_ROW, &G, &R);
        const unsigned grid = cml__row_blocks(rows, R);
        cml__launch(ce_bwd_rows_kernel<DT, false>, grid, dim3(G, R), 0, st, dlogits, dloss, logits, targets, rows,
                    (int)n, ignore, bad);
        CML_TRY(launched(fn, "ce_bwd_rows_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R)));
        return cml__index_check_end(ctx, fn);
    }
    const long long ch1 = (long long)CML__SM_THREADS * CML__SM_ONEPASS_KW * (16 / (long long)sizeof(T));
    const long long osplits = (n + ch1 - 1) / ch1;
    if (cml__rows_vec_ok(n, sizeof(T), dlogits, logits, logits) && rows * osplits < (1ll << 31) &&
        cml__row_sync_fits((const void *)ce_bwd_onepass_kernel<DT>, CML__SM_THREADS, (int)osplits, sm_count(ctx))) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, cml__row_sync_bytes(rows, osplits)));
        CML_TRY(ce_begin(ctx, fn, targets, rows, n, ignore, &bad));
        CML_CUDA_TRY(fn, cml__row_sync_reset(ws, rows, osplits, st));
        const unsigned grid = (unsigned)(rows * osplits);
        cml__launch(ce_bwd_onepass_kernel<DT>, grid, CML__SM_THREADS, 0, st, dlogits, dloss, logits, targets,
                    (unsigned *)ws, cml__row_sync_slots(ws, rows), n, (int)osplits, ignore, bad);
        CML_TRY(launched(fn, "ce_bwd_onepass_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
        return cml__index_check_end(ctx, fn);
    }
    const int splits = (int)((n + CML__SM_CHUNK - 1) / CML__SM_CHUNK);
    const long long batch = cml__sm_batch_rows(ctx, n * (long long)sizeof(T));
    const long long nb = batch < rows ? batch : rows;
    CML_TRY(ce_states(ctx, (size_t)(nb * splits) * sizeof(cml__ms), &states));
    CML_TRY(ce_begin(ctx, fn, targets, rows, n, ignore, &bad));
    for (long long r0 = 0; r0 < rows; r0 += nb) {
        const unsigned grid = (unsigned)((rows - r0 < nb ? rows - r0 : nb) * splits);
        cml__launch(cml__softmax_stats_kernel<DT>, grid, CML__SM_THREADS, 0, st, states, logits, r0, n, splits);
        CML_TRY(launched(fn, "cml__softmax_stats_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
        cml__launch(ce_bwd_apply_kernel<DT>, grid, CML__SM_THREADS, 0, st, dlogits, dloss, logits, targets, states, r0,
                    n, splits, ignore, bad);
        CML_TRY(launched(fn, "ce_bwd_apply_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
    }
    return cml__index_check_end(ctx, fn);
}

/* ---- entry points (arguments validated by src/kernels/cross_entropy.c) ------------------------------ */

extern "C" cml_status cml__cross_entropy_fwd_cuda(cml_ctx *ctx, float *loss, float *lse, const void *logits,
                                                  const int64_t *targets, int64_t rows, int64_t classes,
                                                  cml_dtype dtype, int64_t ignore_index) {
    CML_TRY(cml__cuda_check_float_dtype("cml_cross_entropy_fwd", "dtype", dtype));
    if (rows == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16: return fwd_launch<CML_F16>(ctx, loss, lse, logits, targets, rows, classes, ignore_index);
    case CML_BF16: return fwd_launch<CML_BF16>(ctx, loss, lse, logits, targets, rows, classes, ignore_index);
    default: return fwd_launch<CML_F32>(ctx, loss, lse, logits, targets, rows, classes, ignore_index);
    }
}

extern "C" cml_status cml__cross_entropy_bwd_cuda(cml_ctx *ctx, void *dlogits, const float *dloss,
                                                  const void *logits, const float *lse, const int64_t *targets,
                                                  int64_t rows, int64_t classes, cml_dtype dtype,
                                                  int64_t ignore_index) {
    CML_TRY(cml__cuda_check_float_dtype("cml_cross_entropy_bwd", "dtype", dtype));
    if (rows == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16: return bwd_launch<CML_F16>(ctx, dlogits, dloss, logits, lse, targets, rows, classes, ignore_index);
    case CML_BF16:
        return bwd_launch<CML_BF16>(ctx, dlogits, dloss, logits, lse, targets, rows, classes, ignore_index);
    default: return bwd_launch<CML_F32>(ctx, dlogits, dloss, logits, lse, targets, rows, classes, ignore_index);
    }
}
