/* Exact f32 GEMM on CUDA cores (no tf32): the path cml__gemm_cuda takes for
 * f32 inputs with CML_GEMM_MATH_DEFAULT when cml__gemm_f32_takes says yes.
 *
 * The main loop is gemm_f32_tile.cuh (register and warp tiling, 16-byte loads,
 * double buffering; bitwise repeatable: K is never split); the results then leave
 * through shared memory, a row of D at a time, and the shared epilogue
 * (gemm_epilogue.cuh: alpha, scales, beta*C, bias, activations, aux), so D may be f32,
 * f16 or bf16.
 *
 * Tile configurations (F32_CONFIGS below: BM x BN x BK, results a thread, blocks per SM);
 * the measured ladder that led to them is dev/gemm_f32/README.md. pick_config estimates
 * each one's time from its full-occupancy rate, the waves its tiles make on this GPU and
 * how busy the last wave leaves the SMs, and takes the fastest: large problems get large
 * tiles, small M or N smaller ones so that more SMs have work.
 *
 * What the vectorized loads need (else cml__gemm_f32_takes says no and the simt
 * path runs): A and B 16-byte aligned, lda, ldb and (batch > 1) their batch
 * strides multiples of 4 elements, each stored A and B under 2^31 elements, K >= 1.
 * C, D, aux and bias have no alignment rule (the epilogue checks pairs). */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm/gemm_epilogue.cuh"
#include "kernels/cuda/gemm/gemm_f32_tile.cuh"

#define MAX_GRID_Z 65535
#define MAX_GRID_Y 65535

typedef struct f32_operands {
    const float *A, *B;
    int lda, ldb;
    long long stride_a, stride_b;
    int M, N, K;
    long long batch0; /* the batch of blockIdx.z == 0 (launches cover at most 65535 batches) */
} f32_operands;

/* Four neighbouring results of row m (columns n .. n+3), finished and stored. `e` must be the
 * kernel's own parameter (not a copy, not behind a call): then every field read is a uniform
 * constant-bank load. (The first version passed a pointer to it into a non-inlined function:
 * every field became a generic memory load, dozens of dependent ones per row of results, a
 * fixed cost per tile; removing it took the K = 768 GPT-2 forward shapes from 0.68 to 0.75x
 * cuBLAS and K = 1024 from 0.72 to 0.80x, dev/gemm_f32/README.md run 1.) */
static __device__ __forceinline__ void f32_store4(const cml__gemm_epi &e, long long b, int m, int n, float4 v) {
    if (m >= e.M || n >= e.N) return;
    if (e.d_dtype == CML_F32 && e.aux == NULL && n + 3 < e.N) { /* no aux: act is NONE, RELU or GELU */
        float *d = (float *)e.D + (b * e.stride_d + (long long)m * e.ldd + n);
        if (((uintptr_t)d & 15u) == 0) {
            float4 z;
            z.x = cml__gemm_epi_act(e.act, cml__gemm_epi_z(&e, b, m, n + 0, v.x), 0.0f);
            z.y = cml__gemm_epi_act(e.act, cml__gemm_epi_z(&e, b, m, n + 1, v.y), 0.0f);
            z.z = cml__gemm_epi_act(e.act, cml__gemm_epi_z(&e, b, m, n + 2, v.z), 0.0f);
            z.w = cml__gemm_epi_act(e.act, cml__gemm_epi_z(&e, b, m, n + 3, v.w), 0.0f);
            *(float4 *)d = z;
            return;
        }
    }
    cml__gemm_epi_store2(&e, b, m, n, v.x, v.y);
    cml__gemm_epi_store2(&e, b, m, n + 2, v.z, v.w); /* nothing when n + 2 >= N */
}

/* Rows of the tile one epilogue round stages: for each q < TM / 4, every thread's rows
 * row0 + q * 16 + (0..3), i.e. 16 rows of each warp row. */
#define F32_EPI_ROWS(BM, TM) ((BM) / (4 * (TM)) * 16)

/* The accumulators leave through shared memory, TM / 4 rounds of F32_EPI_ROWS x BN: each
 * thread writes its 4 x 4 sub-tiles, then the block reads the round back row by row, four
 * columns a thread, so a warp finishes 512 contiguous bytes of a row of D (whole 128-byte
 * lines) with one copy of the epilogue code a round (a loop), not one per float4.
 * The round fits in the main loop's shared memory (or the launch asks for more).
 * Each float4 written holds its two column pairs swapped, (acc[i][1], acc[i][0], acc[i][3],
 * acc[i][2]), and the reader swaps them back: a float4 store makes ptxas keep its four
 * values in an aligned register quad through the whole main loop, so this puts acc[i][j]
 * in the register bank parity opposite to b[j] (quad-loaded by LDS.128: b[j] at j mod 4),
 * and acc[i][j] += a[i] b[j] reads its two non-reused operands from different banks. In
 * plain order nearly every FFMA of the 16 x 8 tiles had a two-operand bank conflict (static
 * count ~1000 a k-tile, against ~150 now and in the ladder's kernel: 44.3 TFLOP/s at 8192^3
 * where the ladder's same main loop reached 46.8); scalar stores do not help (ptxas merges
 * them back into float4). */
template <int BM, int BN, int TM>
static __device__ __forceinline__ void f32_epilogue(const float (&acc)[TM][8], const cml__gemm_epi &e, long long b,
                                                    int m0, int n0) {
    constexpr int THREADS = CML_F32_THREADS(BM, BN, TM), ROWS = F32_EPI_ROWS(BM, TM), F4 = ROWS * BN / 4;
    static_assert(F4 % THREADS == 0, "every thread stores the same number of float4");
    float *const S = cml__f32_smem; /* [ROWS][BN]; rows of 128 bytes per 8 lanes: no conflicts */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int srow = (warp / (BN / CML_F32_WARP_N)) * 16 + (lane / 8) * 4;
    const int scol = (warp % (BN / CML_F32_WARP_N)) * CML_F32_WARP_N + (lane % 8) * 4;
#pragma unroll
    for (int q = 0; q < TM / 4; q++) {
#pragma unroll
        for (int r = 0; r < 4; r++) { /* pairs swapped: see above */
            const float *a = acc[4 * q + r];
            *(float4 *)&S[(srow + r) * BN + scol] = make_float4(a[1], a[0], a[3], a[2]);
            *(float4 *)&S[(srow + r) * BN + scol + 32] = make_float4(a[5], a[4], a[7], a[6]);
        }
        __syncthreads();
#pragma unroll 1
        for (int i = threadIdx.x; i < F4; i += THREADS) {
            const int row = i / (BN / 4), col = (i % (BN / 4)) * 4;
            /* staged row -> tile row: warp row (row / 16) holds tile rows 4 TM apart, this round's 16 at q * 16 */
            const int m = m0 + (row / 16) * (4 * TM) + q * 16 + row % 16;
            const float4 v = *(const float4 *)&S[row * BN + col];
            f32_store4(e, b, m, n0 + col, make_float4(v.y, v.x, v.w, v.z));
        }
        if (q + 1 < TM / 4) __syncthreads(); /* the next round overwrites S */
    }
}

template <int BM, int BN, int BK, int TM, bool A_T, bool B_T, int MINB>
static __global__ void __launch_bounds__(CML_F32_THREADS(BM, BN, TM), MINB)
    gemm_f32_kernel(const __grid_constant__ f32_operands op, const __grid_constant__ cml__gemm_epi epi) {
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const long long b = op.batch0 + blockIdx.z;
    float acc[TM][8];
    cml__f32_mainloop<BM, BN, BK, TM, A_T, B_T, 2>(acc, op.A + b * op.stride_a, op.lda, op.B + b * op.stride_b, op.ldb,
                                                   op.M, op.N, op.K, m0, n0);
    f32_epilogue<BM, BN, TM>(acc, epi, b, m0, n0);
}

/* ---- configurations ------------------------------------------------------------------------ */

/* X(id, BM, BN, BK, TM (a thread's rows: 16, 8 or 4), blocks per SM (the register cap:
 * 65536 / (blocks x threads)), rates: TFLOP/s with every SM full, by how many operands are
 * stored contiguous along K: 0 (op TN), 1 (NN, TT), 2 (NT)), largest tiles first. The rates
 * and warp_share below are fitted (dev/gemm_f32/fit_pick.py) to every configuration timed
 * on the 20 shapes of `camel bench gemm --dtype f32 --set square,gpt2,batched` (run 3 in
 * dev/gemm_f32/README.md; refitted to run 4). Why these five:
 *   L16  128x128x16, 16x8, 128 threads, 2/SM (8 warps): the best TN rate with many tiles (lm dW)
 *   V6   128x128x16,  8x8, 256 threads, 2/SM (16 warps): the best on squares, NN and NT (both
 *        operands loaded along K), and a last partial wave of 8-warp blocks
 *   M     64x128x8,   8x8, 128 threads, 3/SM; S 64x64x8, 8x8, 64 threads, 6/SM; T16
 *        32x64x16, 4x8, 64 threads, 8/SM: more, smaller tiles when the tiles are few
 *        (the K = 8192 weight gradients: split-K is not used, to keep one summation order) */
#define F32_CONFIGS(X)                                \
    X(L16, 128, 128, 16, 16, 2, 45.6, 41.8, 41.3)     \
    X(V6, 128, 128, 16, 8, 2, 44.8, 45.6, 42.6)       \
    X(M, 64, 128, 8, 8, 3, 45.9, 40.3, 37.0)          \
    X(S, 64, 64, 8, 8, 6, 40.9, 38.0, 36.7)           \
    X(T16, 32, 64, 16, 4, 8, 36.2, 34.5, 30.8)

#define F32_ENUM(id, bm, bn, bk, tm, minb, r0, r1, r2) CFG_##id,
typedef enum f32_config { F32_CONFIGS(F32_ENUM) CFG_COUNT } f32_config;

typedef struct f32_config_info {
    int bm, bn, threads, blocks_per_sm;
    double rate[3]; /* by operands contiguous along K */
    const char *name;
} f32_config_info;

#define F32_INFO(id, bm, bn, bk, tm, minb, r0, r1, r2) \
    {bm, bn, CML_F32_THREADS(bm, bn, tm), minb, {r0, r1, r2}, #bm "x" #bn "x" #bk "/" #tm "x8"},
static const f32_config_info CONFIGS[CFG_COUNT] = {F32_CONFIGS(F32_INFO)};

#define CFG_FALLBACK CFG_S /* BM = 64: fits every problem cml__gemm_f32_takes accepts */

static int forced_config = -1;

/* Share of an SM's full rate that `warps` resident warps of a last, partial wave reach:
 * with 4 or fewer each scheduler has at most one warp and stalls on every shared-memory
 * load and barrier; 8 hide most of it. Fitted with the rates above (dev/gemm_f32/fit_pick.py). */
static double warp_share(double warps) {
    const double w = warps < 8 ? warps : 8;
    return w <= 4 ? 0.56 * w / 4 : 0.56 + 0.39 * (w - 4) / 4;
}

/* How much faster a later (smaller) configuration must be estimated to be taken. */
#define F32_SMALLER_TILE_MARGIN 0.08

static bool config_fits(const f32_config_info *ci, const cml_gemm_desc *d) {
    return (d->M + ci->bm - 1) / ci->bm <= MAX_GRID_Y;
}

/* The configuration with the smallest estimated time: full waves of tiles (every SM
 * holding its blocks_per_sm) at the configuration's rate for this layout, then the last,
 * partial wave, whose busiest SM holds ceil(left / SMs) blocks at the share of the rate
 * their warps reach. From the shape and the SM count only, so a given GPU always makes the
 * same choice. On the 20 shapes of `camel bench gemm --set square,gpt2,batched` it picks
 * the fastest configuration or one within 3% of it (dev/gemm_f32/README.md). */
static f32_config pick_config(const cml_ctx *ctx, const cml_gemm_desc *d) {
    if (forced_config >= 0 && config_fits(&CONFIGS[forced_config], d)) return (f32_config)forced_config;
    const int sms_read = cml__cuda_sm_count(ctx->device.index);
    const double sms = sms_read > 0 ? sms_read : 132;
    f32_config best = CFG_FALLBACK;
    double best_cost = -1;
    const int k_contiguous = (d->op_a == CML_OP_N) + (d->op_b == CML_OP_T);
    for (int c = 0; c < CFG_COUNT; c++) {
        const f32_config_info *ci = &CONFIGS[c];
        if (!config_fits(ci, d)) continue;
        const long long tiles_m = (d->M + ci->bm - 1) / ci->bm, tiles_n = (d->N + ci->bn - 1) / ci->bn;
        const double tiles = (double)tiles_m * (double)tiles_n * (double)d->batch;
        const double per_wave = sms * ci->blocks_per_sm, tile_work = (double)ci->bm * ci->bn;
        const double full = floor(tiles / per_wave), left = tiles - full * per_wave;
        const double rate = ci->rate[k_contiguous];
        double cost = full * ci->blocks_per_sm * tile_work / rate;
        if (left > 0) {
            const double resident = ceil(left / sms), warps = resident * ci->threads / 32;
            cost += resident * tile_work / (rate * warp_share(warps));
        }
        /* a smaller tile must be clearly faster (the estimate is good to ~6%): it moves more
         * bytes per flop and leaves fewer warps a tile for the partial wave */
        if (best_cost < 0 || cost < best_cost * (1.0 - F32_SMALLER_TILE_MARGIN)) {
            best = (f32_config)c;
            best_cost = cost;
        }
    }
    return best;
}

/* ---- launch ---------------------------------------------------------------------------------- */

template <int BM, int BN, int BK, int TM, int MINB, bool A_T, bool B_T>
static cml_status f32_launch(cml_ctx *ctx, long long batch, const f32_operands *op, const cml__gemm_epi *epi,
                             const char *cfg_name) {
    static const char fn[] = "cml_gemm";
    constexpr int threads = CML_F32_THREADS(BM, BN, TM);
    constexpr int smem_loop = cml__f32_smem_bytes<BM, BN, BK, A_T, B_T, 2>();
    constexpr int smem_epi = F32_EPI_ROWS(BM, TM) * BN * (int)sizeof(float);
    constexpr int smem = smem_loop > smem_epi ? smem_loop : smem_epi;
    auto kernel = gemm_f32_kernel<BM, BN, BK, TM, A_T, B_T, MINB>;
    if (smem > 48 * 1024) /* cheap; a static flag would not know the device */
        CML_CUDA_TRY(fn, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    f32_operands part = *op;
    for (part.batch0 = 0; part.batch0 < batch; part.batch0 += MAX_GRID_Z) {
        const long long left = batch - part.batch0;
        dim3 grid((unsigned)((op->N + BN - 1) / BN), (unsigned)((op->M + BM - 1) / BM),
                  (unsigned)(left < MAX_GRID_Z ? left : MAX_GRID_Z));
        kernel<<<grid, threads, smem, cml__stream(ctx)>>>(part, *epi);
        char what[64];
        snprintf(what, sizeof what, "f32 %s %c%c", cfg_name, A_T ? 'T' : 'N', B_T ? 'T' : 'N');
        CML_TRY(cml__cuda_check_launch(fn, "gemm_f32_kernel", what, (long long)op->M * op->N * grid.z,
                                       grid.x * grid.y * grid.z, threads));
    }
    return CML_OK;
}

template <int BM, int BN, int BK, int TM, int MINB>
static cml_status f32_launch_ops(cml_ctx *ctx, const cml_gemm_desc *d, const f32_operands *op,
                                 const cml__gemm_epi *epi, const char *cfg_name) {
    const bool a_t = d->op_a == CML_OP_T, b_t = d->op_b == CML_OP_T;
    if (!a_t && !b_t) return f32_launch<BM, BN, BK, TM, MINB, false, false>(ctx, d->batch, op, epi, cfg_name);
    if (!a_t) return f32_launch<BM, BN, BK, TM, MINB, false, true>(ctx, d->batch, op, epi, cfg_name);
    if (!b_t) return f32_launch<BM, BN, BK, TM, MINB, true, false>(ctx, d->batch, op, epi, cfg_name);
    return f32_launch<BM, BN, BK, TM, MINB, true, true>(ctx, d->batch, op, epi, cfg_name);
}

/* ---- entry points ---------------------------------------------------------------------------- */

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Elements spanned by one stored rows x cols matrix with row stride ld. */
static long long span(long long rows, long long cols, long long ld) { return (rows - 1) * ld + cols; }

extern "C" bool cml__gemm_f32_takes(const cml_ctx *ctx, const cml_gemm_desc *d, const void *D, const void *A,
                                    const void *B, const void *C) {
    (void)ctx, (void)D, (void)C;
    if (d->a_dtype != CML_F32 || d->b_dtype != CML_F32 || d->math != CML_GEMM_MATH_DEFAULT) return false;
    if (d->K < 1 || d->M > INT32_MAX / 2 || d->N > INT32_MAX / 2 || d->K > INT32_MAX / 2) return false;
    if (!aligned16(A) || !aligned16(B) || d->lda % 4 != 0 || d->ldb % 4 != 0) return false;
    if (d->batch > 1 && (d->stride_a % 4 != 0 || d->stride_b % 4 != 0)) return false;
    const long long a_rows = d->op_a == CML_OP_N ? d->M : d->K, a_cols = d->op_a == CML_OP_N ? d->K : d->M;
    const long long b_rows = d->op_b == CML_OP_N ? d->K : d->N, b_cols = d->op_b == CML_OP_N ? d->N : d->K;
    if (span(a_rows, a_cols, d->lda) > INT32_MAX || span(b_rows, b_cols, d->ldb) > INT32_MAX) return false;
    return (d->M + 63) / 64 <= MAX_GRID_Y; /* the small configuration's grid.y */
}

extern "C" cml_status cml__gemm_f32(cml_ctx *ctx, const cml_gemm_desc *d, void *D, const void *A, const void *B,
                                    const void *C) {
    if (!cml__gemm_f32_takes(ctx, d, D, A, B, C))
        return cml__error(CML_ERR_UNSUPPORTED,
                          "cml_gemm: the f32 path needs f32 inputs with default math, K >= 1, 16-byte aligned A "
                          "and B, lda=%lld and ldb=%lld multiples of 4 (got a=%s b=%s K=%lld)",
                          (long long)d->lda, (long long)d->ldb, cml_dtype_name(d->a_dtype),
                          cml_dtype_name(d->b_dtype), (long long)d->K);
    CML_TRY(cml__cuda_activate(ctx));
    f32_operands op;
    op.A = (const float *)A;
    op.B = (const float *)B;
    op.lda = (int)d->lda;
    op.ldb = (int)d->ldb;
    op.stride_a = d->stride_a;
    op.stride_b = d->stride_b;
    op.M = (int)d->M;
    op.N = (int)d->N;
    op.K = (int)d->K;
    op.batch0 = 0;
    const cml__gemm_epi epi = cml__gemm_epi_make(d, D, C);
    const f32_config cfg = pick_config(ctx, d);
    const char *name = CONFIGS[cfg].name;
#define F32_CASE(id, bm, bn, bk, tm, minb, r0, r1, r2) \
    case CFG_##id: return f32_launch_ops<bm, bn, bk, tm, minb>(ctx, d, &op, &epi, name);
    switch (cfg) {
        F32_CONFIGS(F32_CASE)
    default: break;
    }
    return cml__error(CML_ERR_INTERNAL, "cml_gemm: f32 configuration %d out of range", (int)cfg);
}

extern "C" const char *cml__gemm_f32_config_name(const cml_ctx *ctx, const cml_gemm_desc *d) {
    return CONFIGS[pick_config(ctx, d)].name;
}

extern "C" const char *cml__gemm_f32_config_at(int index) {
    return index >= 0 && index < CFG_COUNT ? CONFIGS[index].name : NULL;
}

extern "C" bool cml__gemm_f32_force_config(const char *name) {
    forced_config = -1;
    if (name == NULL) return true;
    for (int c = 0; c < CFG_COUNT; c++)
        if (strcmp(CONFIGS[c].name, name) == 0) forced_config = c;
    return forced_config >= 0;
}
