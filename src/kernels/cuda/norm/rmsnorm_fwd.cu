/* CUDA RMSNorm forward over the last dim of contiguous (rows, C); f32/f16/bf16
 * storage, f32 math:
 *   y = x * rstd * gamma,  rstd = 1 / sqrt(mean(x^2) + eps).
 *
 * The same four paths as the LayerNorm forward (layernorm_fwd.cu), with one
 * statistic (the sum of squares) instead of two:
 * - 16-byte aligned rows up to 32768 f32 / 65536 bf16 elements stay in the
 *   registers of a row group as packed words (4 or 8 per thread): read once,
 *   one group-wide sum, written once;
 * - unaligned rows up to 8192 elements: 16 floats per thread, scalar accesses;
 * - longer aligned rows in one pass: a chunk of 256 threads x 8 words per
 *   block, the chunks' sums of squares added over the row in a fixed order by
 *   every block of the row alike (common/row_sync.cuh), y written from
 *   registers;
 * - longer unaligned rows in two passes over chunks of 8192 elements, rows in
 *   batches of about half the L2 so that the second read hits L2.
 * Every sum has a fixed order, so repeated runs are bitwise identical. */
#include <math.h>

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
#define APPLY_UNROLL 4 /* ... per input in the output pass (two inputs) */
#define ONEPASS_KW 8   /* 16-byte words per thread of a one-pass chunk */

/* y = v * r * gamma for one 16-byte word of y at column c (gamma by words from L1/L2: every row re-reads it).
 * FAST: packed by the hardware (norm_fwd_v2.cuh). */
template <int DT, bool FAST>
static __device__ __forceinline__ uint4 scale_word(uint4 w, float r, const void *gamma, long long c) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    float v[V], g[V];
    cml__unpack16<DT>(w, v);
    if (gamma) {
        cml__unpack16<DT>(__ldg((const uint4 *)((const T *)gamma + c)), g);
#pragma unroll
        for (int u = 0; u < V; u++) v[u] = v[u] * r * g[u];
    } else {
#pragma unroll
        for (int u = 0; u < V; u++) v[u] = v[u] * r;
    }
    return FAST ? cml__pack16_fast<DT>(v) : cml__pack16<DT>(v);
}

/* Sum of squares of KW packed words (words past the row are zero and add nothing). */
template <int DT, int KW> static __device__ __forceinline__ float words_sumsq(const uint4 (&w)[KW]) {
    constexpr int V = cml__words<DT>::V;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        float v[V];
        cml__unpack16<DT>(w[k], v);
#pragma unroll
        for (int u = 0; u < V; u++) q += v[u] * v[u];
    }
    return q;
}

/* ---- rows held in registers ---------------------------------------------------------------------- */

/* MODE (norm_fwd_v2.cuh): 0 = the software pack; 1 = the hardware pack; 2 = the hardware pack in
 * blocks of at most 256 threads, 5 of them per SM. */
template <int DT, int KW, int MODE>
static __global__ void __launch_bounds__(NFV2_THREADS(MODE), NFV2_MINB(MODE, 5, 1))
    rms_fwd_words_kernel(void *y, float *rstd, const void *x, const void *gamma, long long rows, int C, float eps) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    __shared__ float red[2][32];
    const int G = blockDim.x, t = threadIdx.x;
    int parity = 0; /* alternate scratch arrays: consecutive rows need no extra barrier */
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const int nn = valid ? C : 0;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)C;
        uint4 w[KW];
        cml__words_load<DT, KW>(w, (const T *)x + off, nn, t, G);
        const float q = cml__group_allreduce(words_sumsq<DT, KW>(w), G, red[parity], cml__sum_op());
        parity ^= 1;
        const float r = 1.0f / sqrtf(q / (float)C + eps);
        if (valid && t == 0 && rstd) rstd[row] = r;
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * G + t) * V;
            if (c < nn) cml__st16((T *)y + off + c, scale_word<DT, MODE != 0>(w[k], r, gamma, c));
        }
    }
}

/* Unaligned rows: E_ROW floats per thread, scalar accesses. */
template <int DT>
static __global__ void __launch_bounds__(512)
    rms_fwd_rows_kernel(void *y, float *rstd, const void *x, const void *gamma, long long rows, int C, float eps) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float red[2][32];
    const int G = blockDim.x, t = threadIdx.x;
    int parity = 0;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)C;
        float v[E_ROW];
        cml__row_load<DT, false, E_ROW>(v, (const T *)x + off, valid ? C : 0, t, G, 0.0f);
        float q = 0.0f;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) q += v[e] * v[e];
        q = cml__group_allreduce(q, G, red[parity], cml__sum_op());
        parity ^= 1;
        const float r = 1.0f / sqrtf(q / (float)C + eps);
        if (valid && t == 0 && rstd) rstd[row] = r;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const int c = e * G + t;
            v[e] = v[e] * r * (c < C && gamma ? cml__ld<DT>(gamma, c) : 1.0f);
        }
        if (valid) cml__row_store<DT, false, E_ROW>((T *)y + off, v, C, t, G);
    }
}

/* ---- long rows ------------------------------------------------------------------------------------ */

/* Long aligned rows in one pass (row_sync.cuh): a chunk of THREADS x ONEPASS_KW words per block.
 * FAST: y packed by the hardware (modes 1 and 2 of norm_fwd_v2.cuh). */
template <int DT, bool FAST>
static __global__ void __launch_bounds__(THREADS, 4)
    rms_fwd_onepass_kernel(void *y, float *rstd, const void *x, const void *gamma, unsigned *sync,
                           unsigned long long *states,
                           long long C, int splits, float eps) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, KW = ONEPASS_KW;
    constexpr long long CH = (long long)THREADS * KW * V;
    __shared__ float red[32], stat;
    const int t = threadIdx.x;
    const unsigned b = cml__take_ticket(sync);
    const long long row = b / splits, lo = (b % splits) * CH;
    const int nn = (int)(C - lo < CH ? C - lo : CH);
    const size_t off = (size_t)row * (size_t)C + (size_t)lo;
    uint4 w[KW];
    cml__words_load<DT, KW>(w, (const T *)x + off, nn, t, THREADS);
    const float q = cml__group_allreduce(words_sumsq<DT, KW>(w), THREADS, red, cml__sum_op());
    if (t < 32) {
        bool ok;
        const float a = cml__row_merge(sync, states, row, (int)(b % splits), splits, q, 0.0f, cml__sum_op(), ok);
        if (t == 0) {
            stat = ok ? 1.0f / sqrtf(a / (float)C + eps) : NAN; /* a broken co-residency assumption: NaN, not a hang */
            if (b % splits == 0 && rstd) rstd[row] = stat;
        }
    }
    __syncthreads();
    const float r = stat;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * THREADS + t) * V;
        if (c < nn) cml__st16((T *)y + off + c, scale_word<DT, FAST>(w[k], r, gamma, lo + c));
    }
}

/* Long unaligned rows, pass 1: block b's chunk of row row0 + b / splits -> partial[b] (sum of squares). */
template <int DT>
static __global__ void __launch_bounds__(THREADS)
    rms_fwd_stats_kernel(float *partial, const void *x, long long row0, long long C, int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    __shared__ float red[32];
    const long long b = blockIdx.x, row = row0 + b / splits;
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    float q = 0.0f;
    cml__stream_words<DT, STATS_UNROLL>(
        (const T *)x + row * C, lo, hi, threadIdx.x, THREADS, [&](float v) { q += v * v; },
        [&](const float *v) {
#pragma unroll
            for (int k = 0; k < V; k++) q += v[k] * v[k];
        });
    q = cml__group_allreduce(q, THREADS, red, cml__sum_op());
    if (threadIdx.x == 0) partial[b] = q;
}

/* Pass 2: the row's chunk sums added in order, y written for block b's chunk (rstd by the row's first chunk). */
template <int DT>
static __global__ void __launch_bounds__(THREADS)
    rms_fwd_apply_kernel(void *y, float *rstd, const void *x, const void *gamma, const float *partial, long long row0,
                         long long C, int splits, float eps) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float stat;
    const long long b = blockIdx.x, row = row0 + b / splits;
    if (threadIdx.x == 0) {
        const float *p = partial + (b / splits) * splits;
        float a = p[0];
        for (int k = 1; k < splits; k++) a += p[k];
        stat = 1.0f / sqrtf(a / (float)C + eps);
        if (b % splits == 0 && rstd) rstd[row] = stat;
    }
    __syncthreads();
    const float r = stat;
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    /* gamma streams beside x (x again, from L1, when there is none, and is ignored) */
    const T *xr = (const T *)x + row * C;
    const bool has_g = gamma != nullptr;
    cml__stream<DT, 2, true, APPLY_UNROLL>((T *)y + row * C, xr, has_g ? gamma : (const void *)xr, lo, hi,
                                           threadIdx.x, THREADS,
                                           [&](const float *v, long long) { return v[0] * r * (has_g ? v[1] : 1.0f); });
}

/* ---- launch ---------------------------------------------------------------------------------------- */

static const char FN[] = "cml_rmsnorm_fwd";

static cml_status launched(const char *kernel, int dt, long long n, unsigned grid, unsigned block) {
    return cml__cuda_check_launch(FN, kernel, cml_dtype_name((cml_dtype)dt), n, grid, block);
}

template <int DT>
static cml_status fwd_launch(cml_ctx *ctx, void *y, float *rstd, const void *x, const void *gamma, long long rows,
                             long long C, float eps) {
    typedef typename cml__elem<DT>::type T;
    cudaStream_t st = cml__stream(ctx);
    const bool vec = cml__rows_vec_ok(C, sizeof(T), x, y, gamma ? gamma : x);
    /* v2 (norm_fwd_v2.cuh): 16-bit rows on chip with the hardware pack; f32 has nothing to pack */
    const int mode = DT == CML_F32 ? 0 : nfv2_mode();
    int KW, G, R;
    if (vec && cml__words_geometry(C, sizeof(T), &KW, &G, &R)) {
        const long long nb = (rows + R - 1) / R;
        const unsigned grid = (unsigned)(nb < (1ll << 30) ? nb : (1ll << 30));
        const dim3 block(G, R);
        if (mode == 0) {
            if (KW == 4) cml__launch(rms_fwd_words_kernel<DT, 4, 0>, grid, block, 0, st, y, rstd, x, gamma, rows,
                                     (int)C, eps);
            else cml__launch(rms_fwd_words_kernel<DT, 8, 0>, grid, block, 0, st, y, rstd, x, gamma, rows, (int)C, eps);
        } else if constexpr (DT != CML_F32) { /* no f32 instantiations of the v2 kernels */
            const bool occ = KW == 4 && mode == 2 && G * R <= NFV2_OCC_THREADS;
            nfv2_count(occ ? 2 : 1);
            if (occ) cml__launch(rms_fwd_words_kernel<DT, 4, 2>, grid, block, 0, st, y, rstd, x, gamma, rows, (int)C,
                                 eps);
            else if (KW == 4) cml__launch(rms_fwd_words_kernel<DT, 4, 1>, grid, block, 0, st, y, rstd, x, gamma, rows,
                                          (int)C, eps);
            else cml__launch(rms_fwd_words_kernel<DT, 8, 1>, grid, block, 0, st, y, rstd, x, gamma, rows, (int)C, eps);
        }
        return launched("rms_fwd_words_kernel", DT, rows * C, grid, (unsigned)(G * R));
    }
    if (!vec && C <= 512 * E_ROW) {
        G = cml__pow2_at_least((C + E_ROW - 1) / E_ROW, 512);
        R = G >= 256 ? 1 : 256 / G;
        const long long nb = (rows + R - 1) / R;
        const unsigned grid = (unsigned)(nb < (1ll << 30) ? nb : (1ll << 30));
        cml__launch(rms_fwd_rows_kernel<DT>, grid, dim3(G, R), 0, st, y, rstd, x, gamma, rows, (int)C, eps);
        return launched("rms_fwd_rows_kernel", DT, rows * C, grid, (unsigned)(G * R));
    }
    const long long ch1 = (long long)THREADS * ONEPASS_KW * (16 / (long long)sizeof(T)), osplits = (C + ch1 - 1) / ch1;
    const int sms = cml__cuda_sm_count(ctx->device.index) > 0 ? cml__cuda_sm_count(ctx->device.index) : 132;
    /* mode 2 is mode 1 here: this kernel already runs 4 blocks per SM */
    const void *onepass = mode == 0 ? (const void *)rms_fwd_onepass_kernel<DT, false>
                                    : (const void *)rms_fwd_onepass_kernel<DT, DT != CML_F32>;
    if (vec && rows * osplits < (1ll << 31) && cml__row_sync_fits(onepass, THREADS, (int)osplits, sms)) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, cml__row_sync_bytes(rows, osplits)));
        CML_CUDA_TRY(FN, cml__row_sync_reset(ws, rows, osplits, st));
        const unsigned grid = (unsigned)(rows * osplits);
        unsigned *sync = (unsigned *)ws;
        unsigned long long *slots = cml__row_sync_slots(ws, rows);
        if (mode == 0) {
            cml__launch(rms_fwd_onepass_kernel<DT, false>, grid, THREADS, 0, st, y, rstd, x, gamma, sync, slots, C,
                        (int)osplits, eps);
        } else if constexpr (DT != CML_F32) {
            nfv2_count(1);
            cml__launch(rms_fwd_onepass_kernel<DT, true>, grid, THREADS, 0, st, y, rstd, x, gamma, sync, slots, C,
                        (int)osplits, eps);
        }
        return launched("rms_fwd_onepass_kernel", DT, rows * C, grid, THREADS);
    }
    const int splits = (int)((C + CHUNK - 1) / CHUNK);
    long long nb = cml__cuda_l2_bytes(ctx->device.index) / 2 / (C * (long long)sizeof(T));
    if (nb < 1) nb = 1;
    if (nb > rows) nb = rows;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(nb * splits) * sizeof(float)));
    for (long long r0 = 0; r0 < rows; r0 += nb) {
        const unsigned grid = (unsigned)((rows - r0 < nb ? rows - r0 : nb) * splits);
        cml__launch(rms_fwd_stats_kernel<DT>, grid, THREADS, 0, st, (float *)ws, x, r0, C, splits);
        CML_TRY(launched("rms_fwd_stats_kernel", DT, rows * C, grid, THREADS));
        cml__launch(rms_fwd_apply_kernel<DT>, grid, THREADS, 0, st, y, rstd, x, gamma, (const float *)ws, r0, C, splits,
                    eps);
        CML_TRY(launched("rms_fwd_apply_kernel", DT, rows * C, grid, THREADS));
    }
    return CML_OK;
}

/* ---- entry point (arguments validated by src/kernels/rmsnorm.c) -------------------------------------- */

extern "C" cml_status cml__rmsnorm_fwd_cuda(cml_ctx *ctx, void *y, float *rstd, const void *x, const void *gamma,
                                            int64_t rows, int64_t C, float eps, cml_dtype dtype) {
    CML_TRY(cml__cuda_check_float_dtype(FN, "dtype", dtype));
    if (rows == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16: return fwd_launch<CML_F16>(ctx, y, rstd, x, gamma, rows, C, eps);
    case CML_BF16: return fwd_launch<CML_BF16>(ctx, y, rstd, x, gamma, rows, C, eps);
    default: return fwd_launch<CML_F32>(ctx, y, rstd, x, gamma, rows, C, eps);
    }
}
