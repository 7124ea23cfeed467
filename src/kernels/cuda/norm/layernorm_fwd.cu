/* CUDA LayerNorm forward over the last dim of contiguous (rows, C);
 * f32/f16/bf16 storage, f32 math:
 *   y = (x - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(var + eps)  (biased var).
 *
 * Rows that fit on chip stay in the registers of a row group: 16-byte aligned
 * rows as packed words (4 or 8 per thread, groups of up to 512 threads: up to
 * 16384 f32 or 32768 bf16/f16 elements; the 1024-thread form, to 32768 / 65536,
 * only with CML_LN_FWD_ONEPASS_G=0, see ln_fwd_onepass_g), other rows up to
 * 8192 as 16 floats per thread. The row is read
 * once, its mean taken, then the sum of squared deviations from that mean (an
 * exact two-pass variance, as good as Welford's and cheaper when the row is on
 * chip), then y is written once. Longer aligned rows go in one pass, a chunk
 * of 256 threads x 8 words per block: each chunk's exact (count, mean, M2) is
 * merged over the row in a fixed order with Chan et al.'s formula by every block
 * of the row alike (common/row_sync.cuh), then y is written from registers.
 * Longer unaligned rows take two passes over chunks of 8192 elements (Welford
 * states per thread, each 16-byte word's exact statistics merged in), rows in
 * batches of about half the L2 so that the second read hits L2. Every
 * reduction has a fixed order. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/row_sync.cuh"
#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/norm/norm_fwd_v2.cuh"

#define E_ROW 16
#define CHUNK 8192
#define THREADS 256
#define STATS_UNROLL 8 /* 16-byte loads in flight per thread in the statistics pass */
#define APPLY_UNROLL 2 /* ... per input in the output pass (three inputs) */
#define ONEPASS_KW 8   /* 16-byte words per thread of a one-pass chunk */

/* ---- rows held in registers ---------------------------------------------------------------------- */

/* y of KW packed words (thread t of G owns words t, t + G, ...; n columns from yr / gr / br) with both
 * gamma and beta given, packed by the hardware: the v2 kernels' output loop for the common case. The
 * same arithmetic as the general loop, (v - mu) * r * gamma + beta, so the same bits, without its
 * per-word defaults and null tests (16 moves and 6 tests a word of 8 bf16). */
template <int DT, int KW>
static __device__ __forceinline__ void ln_store_affine(void *yr, const uint4 (&w)[KW], int n, int t, int G,
                                                       const void *gr, const void *br, float mu, float r) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * G + t) * V;
        if (c < n) {
            float v[V], gw[V], bw[V];
            cml__unpack16<DT>(w[k], v);
            cml__unpack16<DT>(__ldg((const uint4 *)((const T *)gr + c)), gw);
            cml__unpack16<DT>(__ldg((const uint4 *)((const T *)br + c)), bw);
#pragma unroll
            for (int u = 0; u < V; u++) v[u] = (v[u] - mu) * r * gw[u] + bw[u];
            cml__st16((T *)yr + c, cml__pack16_fast<DT>(v));
        }
    }
}

/* 16-byte aligned rows: KW packed words per thread (rows.cuh); gamma/beta by words too
 * (re-read by every row, from L1/L2). MODE (norm_fwd_v2.cuh): 0 = the software pack; 1 = the
 * hardware pack; 2 = the hardware pack in blocks of at most 256 threads, 6 of them per SM. */
template <int DT, int KW, int MODE>
static __global__ void __launch_bounds__(NFV2_THREADS(MODE), NFV2_MINB(MODE, 6, 0))
    ln_fwd_words_kernel(void *y, float *mean, float *rstd, const void *x, const void *gamma, const void *beta,
                        long long rows, int C, float eps) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    __shared__ float red_a[32], red_b[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const int nn = valid ? C : 0;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)C;
        uint4 w[KW];
        cml__words_load<DT, KW>(w, (const T *)x + off, nn, t, G);
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < KW; k++) { /* words past the row are zero */
            float v[V];
            cml__unpack16<DT>(w[k], v);
#pragma unroll
            for (int u = 0; u < V; u++) s += v[u];
        }
        const float mu = cml__group_allreduce(s, G, red_a, cml__sum_op()) / (float)C;
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < KW; k++)
            if ((k * G + t) * V < nn) {
                float v[V];
                cml__unpack16<DT>(w[k], v);
#pragma unroll
                for (int u = 0; u < V; u++) q += (v[u] - mu) * (v[u] - mu);
            }
        const float var = cml__group_allreduce(q, G, red_b, cml__sum_op()) / (float)C;
        const float r = 1.0f / sqrtf(var + eps);
        if (valid && t == 0) {
            if (mean) mean[row] = mu;
            if (rstd) rstd[row] = r;
        }
        if (MODE && gamma && beta) {
            ln_store_affine<DT, KW>((T *)y + off, w, nn, t, G, gamma, beta, mu, r);
            continue;
        }
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * G + t) * V;
            if (c < nn) {
                float v[V], gw[V], bw[V];
                cml__unpack16<DT>(w[k], v);
#pragma unroll
                for (int u = 0; u < V; u++) gw[u] = 1.0f, bw[u] = 0.0f;
                if (gamma) cml__unpack16<DT>(__ldg((const uint4 *)((const T *)gamma + c)), gw);
                if (beta) cml__unpack16<DT>(__ldg((const uint4 *)((const T *)beta + c)), bw);
#pragma unroll
                for (int u = 0; u < V; u++) v[u] = (v[u] - mu) * r * gw[u] + bw[u];
                cml__st16((T *)y + off + c, MODE ? cml__pack16_fast<DT>(v) : cml__pack16<DT>(v));
            }
        }
    }
}

/* Unaligned rows: E floats per thread, scalar accesses. */

template <int DT, bool VEC>
static __global__ void __launch_bounds__(VEC ? 1024 : 512)
    ln_fwd_rows_kernel(void *y, float *mean, float *rstd, const void *x, const void *gamma, const void *beta,
                       long long rows, int C, float eps) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float red_a[32], red_b[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)C;
        float v[E_ROW];
        cml__row_load<DT, VEC, E_ROW>(v, (const T *)x + off, valid ? C : 0, t, G, 0.0f);
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) s += v[e];
        const float mu = cml__group_allreduce(s, G, red_a, cml__sum_op()) / (float)C;
        float q = 0.0f;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const float d = cml__row_col<DT, VEC>(e, t, G) < C ? v[e] - mu : 0.0f;
            q += d * d;
        }
        const float var = cml__group_allreduce(q, G, red_b, cml__sum_op()) / (float)C;
        const float r = 1.0f / sqrtf(var + eps);
        if (valid && t == 0) {
            if (mean) mean[row] = mu;
            if (rstd) rstd[row] = r;
        }
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const int c = cml__row_col<DT, VEC>(e, t, G);
            const float gv = c < C && gamma ? cml__ld<DT>(gamma, c) : 1.0f;
            const float bv = c < C && beta ? cml__ld<DT>(beta, c) : 0.0f;
            v[e] = (v[e] - mu) * r * gv + bv;
        }
        if (valid) cml__row_store<DT, VEC, E_ROW>((T *)y + off, v, C, t, G);
    }
}

/* ---- long rows ------------------------------------------------------------------------------------ */

struct wf {
    float n, mean, m2; /* n is exact: a chunk has at most CHUNK elements */
};

static __device__ __forceinline__ wf wf_merge(wf a, wf b) {
    if (b.n == 0.0f) return a;
    if (a.n == 0.0f) return b;
    const float n = a.n + b.n, fb = b.n / n, d = b.mean - a.mean;
    return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

struct wf_merge_fn {
    __device__ __forceinline__ wf operator()(wf a, wf b) const { return wf_merge(a, b); }
};

/* Chunk k's published (mean, M2) with its count: chunks of ch elements, the last one shorter. */
struct wf_chunk {
    long long C, ch;
    __device__ __forceinline__ wf operator()(float2 v, int k) const {
        const long long lo = (long long)k * ch;
        return {(float)(C - lo < ch ? C - lo : ch), v.x, v.y};
    }
};

/* Long aligned rows in one pass (row_sync.cuh): a chunk of 256 threads x 8 words per block, its
 * exact (count, mean, M2) merged over the row in a fixed order (row_sync.cuh) with Chan et al.'s formula.
 * MODE (norm_fwd_v2.cuh): 0 = the software pack, 3 blocks per SM (at 4, 64 registers, it spilled);
 * 1 = the hardware pack, 3 blocks per SM; 2 = the hardware pack at 4 blocks per SM (fits without
 * spilling): 128 KB of loads in flight per SM instead of 96. */
template <int DT, int MODE>
static __global__ void __launch_bounds__(THREADS, MODE == 2 ? 4 : 3)
    ln_fwd_onepass_kernel(void *y, float *mean, float *rstd, const void *x, const void *gamma, const void *beta,
                          unsigned *sync, unsigned long long *states, long long C, int splits, float eps, int pre) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, KW = ONEPASS_KW;
    constexpr long long CH = (long long)THREADS * KW * V;
    cml__pdl_launch_dependents();
    if (pre) { /* the chunk the ticket will likely give this block (tickets go out in about block order) into L2 while
                  the grids before may still run (cml__pdl_prefetch; a wrong guess costs only bandwidth) */
        const long long lo = (long long)(blockIdx.x % (unsigned)splits) * CH;
        cml__prefetch_words_l2<KW, V>((const T *)x + (long long)(blockIdx.x / (unsigned)splits) * C + lo, C - lo,
                                      THREADS, (int)threadIdx.x);
    }
    cml__pdl_wait();
    __shared__ float red_a[32], red_b[32], stat[2];
    const int t = threadIdx.x;
    const unsigned b = cml__take_ticket(sync);
    const long long row = b / splits, lo = (b % splits) * CH;
    const int nn = (int)(C - lo < CH ? C - lo : CH);
    const size_t off = (size_t)row * (size_t)C + (size_t)lo;
    uint4 w[KW];
    cml__words_load<DT, KW>(w, (const T *)x + off, nn, t, THREADS);
    float s = 0.0f, q = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++) { /* words past the row are zero */
        float v[V];
        cml__unpack16<DT>(w[k], v);
#pragma unroll
        for (int u = 0; u < V; u++) s += v[u];
    }
    const float mc = cml__group_allreduce(s, THREADS, red_a, cml__sum_op()) / (float)nn;
#pragma unroll
    for (int k = 0; k < KW; k++)
        if ((k * THREADS + t) * V < nn) {
            float v[V];
            cml__unpack16<DT>(w[k], v);
#pragma unroll
            for (int u = 0; u < V; u++) q += (v[u] - mc) * (v[u] - mc);
        }
    q = cml__group_allreduce(q, THREADS, red_b, cml__sum_op());
    if (t < 32) {
        bool ok;
        /* published: (mean, M2) of the chunk; its count follows from its index */
        wf a = cml__row_merge_up(sync, states, row, (int)(b % splits), splits, make_float2(mc, q),
                                 wf{0.0f, 0.0f, 0.0f}, wf_chunk{C, CH}, wf_merge_fn(), ok);
        if (!ok) a = wf{NAN, NAN, NAN};
        if (t == 0) {
            stat[0] = a.mean;
            stat[1] = 1.0f / sqrtf(a.m2 / (float)C + eps);
            if (b % splits == 0) {
                if (mean) mean[row] = stat[0];
                if (rstd) rstd[row] = stat[1];
            }
        }
    }
    __syncthreads();
    const float mu = stat[0], r = stat[1];
    if (MODE && gamma && beta) {
        ln_store_affine<DT, KW>((T *)y + off, w, nn, t, THREADS, (const T *)gamma + lo, (const T *)beta + lo, mu, r);
        return;
    }
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * THREADS + t) * V;
        if (c < nn) {
            float v[V], gw[V], bw[V];
            cml__unpack16<DT>(w[k], v);
#pragma unroll
            for (int u = 0; u < V; u++) gw[u] = 1.0f, bw[u] = 0.0f;
            if (gamma) cml__unpack16<DT>(__ldg((const uint4 *)((const T *)gamma + lo + c)), gw);
            if (beta) cml__unpack16<DT>(__ldg((const uint4 *)((const T *)beta + lo + c)), bw);
#pragma unroll
            for (int u = 0; u < V; u++) v[u] = (v[u] - mu) * r * gw[u] + bw[u];
            cml__st16((T *)y + off + c, MODE ? cml__pack16_fast<DT>(v) : cml__pack16<DT>(v));
        }
    }
}

/* Long unaligned rows, pass 1: block b's chunk of row row0 + b / splits -> partial[b] (count, mean, M2). */
template <int DT>
static __global__ void __launch_bounds__(THREADS) ln_fwd_stats_kernel(wf *partial, const void *x, long long row0,
                                                                      long long C, int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ wf scratch[32];
    const long long b = blockIdx.x, row = row0 + b / splits;
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    constexpr int V = cml__words<DT>::V;
    wf a = {0.0f, 0.0f, 0.0f};
    cml__stream_words<DT, STATS_UNROLL>(
        (const T *)x + row * C, lo, hi, threadIdx.x, THREADS,
        [&](float v) { /* Welford's update, for the scalar head and tail */
            a.n += 1.0f;
            const float d = v - a.mean;
            a.mean += d / a.n;
            a.m2 += d * (v - a.mean);
        },
        [&](const float *v) { /* a word's exact (count, mean, M2), merged in: one division per word */
            float s = 0.0f, q = 0.0f;
#pragma unroll
            for (int k = 0; k < V; k++) s += v[k];
            const float mb = s * (1.0f / V);
#pragma unroll
            for (int k = 0; k < V; k++) q += (v[k] - mb) * (v[k] - mb);
            a = wf_merge(a, {(float)V, mb, q});
        });
    a = cml__group_reduce_t(a, THREADS, scratch, wf_merge_fn());
    if (threadIdx.x == 0) partial[b] = a;
}

/* Pass 2: merge the row's chunk states in order, write y for block b's chunk (and
 * mean/rstd from the row's first chunk). */
template <int DT>
static __global__ void __launch_bounds__(THREADS)
    ln_fwd_apply_kernel(void *y, float *mean, float *rstd, const void *x, const void *gamma, const void *beta,
                        const wf *partial, long long row0, long long C, int splits, float eps) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float stat[2];
    const long long b = blockIdx.x, row = row0 + b / splits;
    if (threadIdx.x == 0) {
        const wf *p = partial + (b / splits) * splits;
        wf a = p[0];
        for (int k = 1; k < splits; k++) a = wf_merge(a, p[k]);
        stat[0] = a.mean;
        stat[1] = 1.0f / sqrtf(a.m2 / (float)C + eps);
        if (b % splits == 0) {
            if (mean) mean[row] = stat[0];
            if (rstd) rstd[row] = stat[1];
        }
    }
    __syncthreads();
    const float mu = stat[0], r = stat[1];
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    /* gamma and beta come in as 16-byte streams beside x (a missing one streams x again, from L1,
     * and is ignored): per-element loads of them would cost 8-16 load instructions per word of x */
    const T *xr = (const T *)x + row * C;
    const bool has_g = gamma != nullptr, has_b = beta != nullptr;
    cml__stream<DT, 3, true, APPLY_UNROLL>(
        (T *)y + row * C, xr, has_g ? gamma : (const void *)xr, lo, hi, threadIdx.x, THREADS,
        [&](const float *v, long long) { return (v[0] - mu) * r * (has_g ? v[1] : 1.0f) + (has_b ? v[2] : 0.0f); },
        has_b ? beta : (const void *)xr);
}

/* ---- launch ---------------------------------------------------------------------------------------- */

static const char FN[] = "cml_layernorm_fwd";

/* Aligned rows whose register form needs at least this many threads a row (default 1024: one block
 * an SM, idle through its two reductions) take the one-pass chunk kernel instead, several 256-thread
 * blocks an SM: f32 1024 x 32768 1.067x in session 15 (83.5 -> 89.3% of the copy), no other bench
 * shape moved. CML_LN_FWD_ONEPASS_G (read once) sets it, 0 = never. */
static int ln_fwd_onepass_g(void) {
    static int g = -1;
    if (g < 0) {
        const char *e = getenv("CML_LN_FWD_ONEPASS_G");
        g = e ? atoi(e) : 1024;
        if (g < 0) g = 0;
    }
    return g;
}

template <int DT>
static cml_status fwd_launch(cml_ctx *ctx, void *y, float *mean, float *rstd, const void *x, const void *gamma,
                             const void *beta, long long rows, long long C, float eps) {
    typedef typename cml__elem<DT>::type T;
    cudaStream_t st = cml__stream(ctx);
    const bool vec = cml__rows_vec_ok(C, sizeof(T), x, y, gamma ? gamma : x) && (!beta || ((uintptr_t)beta & 15u) == 0);
    /* v2 (norm_fwd_v2.cuh): 16-bit rows on chip with the hardware pack; f32 has nothing to pack */
    const int mode = DT == CML_F32 ? 0 : nfv2_mode();
    int KW, G, R;
    if (vec && cml__words_geometry(C, sizeof(T), &KW, &G, &R) && !(ln_fwd_onepass_g() && G >= ln_fwd_onepass_g())) {
        const long long b = (rows + R - 1) / R;
        const unsigned grid = (unsigned)(b < (1ll << 30) ? b : (1ll << 30));
        const dim3 block(G, R);
        if (mode == 0) {
            if (KW == 4) cml__launch(ln_fwd_words_kernel<DT, 4, 0>, grid, block, 0, st, y, mean, rstd, x, gamma, beta,
                                     rows, (int)C, eps);
            else cml__launch(ln_fwd_words_kernel<DT, 8, 0>, grid, block, 0, st, y, mean, rstd, x, gamma, beta, rows,
                             (int)C, eps);
        } else if constexpr (DT != CML_F32) { /* no f32 instantiations of the v2 kernels */
            const bool occ = KW == 4 && mode == 2 && G * R <= NFV2_OCC_THREADS;
            nfv2_count(occ ? 2 : 1);
            if (occ)
                cml__launch(ln_fwd_words_kernel<DT, 4, 2>, grid, block, 0, st, y, mean, rstd, x, gamma, beta, rows,
                            (int)C, eps);
            else if (KW == 4)
                cml__launch(ln_fwd_words_kernel<DT, 4, 1>, grid, block, 0, st, y, mean, rstd, x, gamma, beta, rows,
                            (int)C, eps);
            else
                cml__launch(ln_fwd_words_kernel<DT, 8, 1>, grid, block, 0, st, y, mean, rstd, x, gamma, beta, rows,
                            (int)C, eps);
        }
        return cml__cuda_check_launch(FN, "ln_fwd_words_kernel", cml_dtype_name((cml_dtype)DT), rows * C, grid,
                                      (unsigned)(G * R));
    }
    if (!vec && C <= 512 * E_ROW) {
        G = cml__pow2_at_least((C + E_ROW - 1) / E_ROW, 1024);
        R = G >= 256 ? 1 : 256 / G;
        const long long b = (rows + R - 1) / R;
        const unsigned grid = (unsigned)(b < (1ll << 30) ? b : (1ll << 30));
        cml__launch(ln_fwd_rows_kernel<DT, false>, grid, dim3(G, R), 0, st, y, mean, rstd, x, gamma, beta, rows, (int)C,
                    eps);
        return cml__cuda_check_launch(FN, "ln_fwd_rows_kernel", cml_dtype_name((cml_dtype)DT), rows * C, grid,
                                      (unsigned)(G * R));
    }
    const long long ch1 = (long long)THREADS * ONEPASS_KW * (16 / (long long)sizeof(T)), osplits = (C + ch1 - 1) / ch1;
    const int sms = cml__cuda_sm_count(ctx->device.index) > 0 ? cml__cuda_sm_count(ctx->device.index) : 132;
    const void *onepass = mode == 0 ? (const void *)ln_fwd_onepass_kernel<DT, 0>
                          : mode == 1 ? (const void *)ln_fwd_onepass_kernel<DT, DT == CML_F32 ? 0 : 1>
                                      : (const void *)ln_fwd_onepass_kernel<DT, DT == CML_F32 ? 0 : 2>;
    if (vec && rows * osplits < (1ll << 31) && cml__row_sync_fits(onepass, THREADS, (int)osplits, sms)) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, cml__row_sync_bytes(rows, osplits)));
        CML_CUDA_TRY(FN, cml__row_sync_reset(ws, rows, osplits, st));
        const unsigned grid = (unsigned)(rows * osplits);
        unsigned *sync = (unsigned *)ws;
        unsigned long long *slots = cml__row_sync_slots(ws, rows);
        /* the kernel whose residency cml__row_sync_fits checked (the ticket scheme needs it) */
        if (mode == 0) {
            cml__launch(ln_fwd_onepass_kernel<DT, 0>, grid, THREADS, 0, st, y, mean, rstd, x, gamma, beta, sync, slots,
                        C, (int)osplits, eps, cml__pdl_prefetch() ? 1 : 0);
        } else if constexpr (DT != CML_F32) {
            nfv2_count(mode);
            if (mode == 1)
                cml__launch(ln_fwd_onepass_kernel<DT, 1>, grid, THREADS, 0, st, y, mean, rstd, x, gamma, beta, sync,
                            slots, C, (int)osplits, eps, cml__pdl_prefetch() ? 1 : 0);
            else
                cml__launch(ln_fwd_onepass_kernel<DT, 2>, grid, THREADS, 0, st, y, mean, rstd, x, gamma, beta, sync,
                            slots, C, (int)osplits, eps, cml__pdl_prefetch() ? 1 : 0);
        }
        return cml__cuda_check_launch(FN, "ln_fwd_onepass_kernel", cml_dtype_name((cml_dtype)DT), rows * C, grid,
                                      THREADS);
    }
    const int splits = (int)((C + CHUNK - 1) / CHUNK);
    long long nb = cml__cuda_l2_bytes(ctx->device.index) / 2 / (C * (long long)sizeof(T));
    if (nb < 1) nb = 1;
    if (nb > rows) nb = rows;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(nb * splits) * sizeof(wf)));
    for (long long r0 = 0; r0 < rows; r0 += nb) {
        const unsigned grid = (unsigned)((rows - r0 < nb ? rows - r0 : nb) * splits);
        cml__launch(ln_fwd_stats_kernel<DT>, grid, THREADS, 0, st, (wf *)ws, x, r0, C, splits);
        CML_TRY(cml__cuda_check_launch(FN, "ln_fwd_stats_kernel", cml_dtype_name((cml_dtype)DT), rows * C, grid,
                                       THREADS));
        cml__launch(ln_fwd_apply_kernel<DT>, grid, THREADS, 0, st, y, mean, rstd, x, gamma, beta, (const wf *)ws, r0, C,
                    splits, eps);
        CML_TRY(cml__cuda_check_launch(FN, "ln_fwd_apply_kernel", cml_dtype_name((cml_dtype)DT), rows * C, grid,
                                       THREADS));
    }
    return CML_OK;
}

/* For tests (cuda_kernels.h): CML_NORM_FWD_V2 set in-process (0, 1, 2; -1: back to the environment's),
 * and the launches so far of the forward kernels of mode 1 or 2 (norm_fwd_v2.cuh), LayerNorm and
 * RMSNorm together. */
extern "C" void cml__norm_fwd_v2_force(int mode) {
    nfv2_forced() = mode;
}

extern "C" unsigned long long cml__norm_fwd_v2_launches(int mode) {
    return mode >= 1 && mode <= 2 ? __atomic_load_n(&nfv2_launch_counts()[mode], __ATOMIC_RELAXED) : 0;
}

/* ---- entry point (arguments validated by src/kernels/layernorm.c) -------------------------------------- */

extern "C" cml_status cml__layernorm_fwd_cuda(cml_ctx *ctx, void *y, float *mean, float *rstd, const void *x,
                                              const void *gamma, const void *beta, int64_t rows, int64_t C, float eps,
                                              cml_dtype dtype) {
    CML_TRY(cml__cuda_check_float_dtype(FN, "dtype", dtype));
    if (rows == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16: return fwd_launch<CML_F16>(ctx, y, mean, rstd, x, gamma, beta, rows, C, eps);
    case CML_BF16: return fwd_launch<CML_BF16>(ctx, y, mean, rstd, x, gamma, beta, rows, C, eps);
    default: return fwd_launch<CML_F32>(ctx, y, mean, rstd, x, gamma, beta, rows, C, eps);
    }
}
