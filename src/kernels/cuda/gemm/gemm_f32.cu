/* Exact f32 GEMM on CUDA cores (no tf32): the path cml__gemm_cuda takes for
 * f32 inputs with CML_GEMM_MATH_DEFAULT when cml__gemm_f32_takes says yes.
 *
 * The main loop is gemm_f32_tile.cuh (register and warp tiling, 16-byte loads,
 * double buffering; bitwise repeatable: K is never split); every output then
 * goes through the shared epilogue (gemm_epilogue.cuh: alpha, scales, beta*C,
 * bias, activations, aux), so D may be f32, f16 or bf16.
 *
 * Tile configurations (BM x BN x BK, results a thread); the measured ladder that
 * led to them is dev/gemm_f32/README.md:
 *   large  128 x 128 x 8, 16 x 8 (128 accumulators, up to 255 registers, as cuBLAS's
 *          own sgemm on Hopper), 128 threads, 2 blocks/SM: 46.8 TFLOP/s at 8192^3
 *   medium 64 x 128 x 8, 8 x 8, 128 threads, 3 blocks/SM: more warps per tile, so
 *          better when the tiles are few (26.9 TFLOP/s at 1024^3 where large gets 19.8)
 *   small  64 x 64 x 8, 8 x 8, 64 threads, 6 blocks/SM
 * pick_config estimates each one's time from its full-occupancy rate, the waves
 * its tiles make on this GPU and how busy the last wave leaves the SMs, and takes
 * the fastest: large problems get large tiles, small M or N smaller ones so that
 * more SMs have work.
 *
 * What the vectorized loads need (else cml__gemm_f32_takes says no and the simt
 * path runs): A and B 16-byte aligned, lda, ldb and (batch > 1) their batch
 * strides multiples of 4 elements, each stored A and B under 2^31 elements, K >= 1.
 * C, D, aux and bias have no alignment rule (the epilogue checks pairs). */
#include <stdio.h>

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

/* Finishes one accumulator row of a thread: columns n .. n+3 and n+32 .. n+35 of row m.
 * Not inlined: one copy of the (branchy) epilogue serves all TM rows of every kernel,
 * instead of TM * 4 inlined copies (which made this file take minutes to compile and
 * the kernels large for the instruction cache). */
static __device__ __noinline__ void f32_store_row(const cml__gemm_epi *epi, long long b, int m, int n, float a0,
                                                  float a1, float a2, float a3, float a4, float a5, float a6,
                                                  float a7) {
    cml__gemm_epi_store2(epi, b, m, n, a0, a1);
    cml__gemm_epi_store2(epi, b, m, n + 2, a2, a3);
    cml__gemm_epi_store2(epi, b, m, n + 32, a4, a5);
    cml__gemm_epi_store2(epi, b, m, n + 34, a6, a7);
}

template <int BM, int BN, int BK, int TM, bool A_T, bool B_T, int MINB>
static __global__ void __launch_bounds__(CML_F32_THREADS(BM, BN, TM), MINB)
    gemm_f32_kernel(const __grid_constant__ f32_operands op, const __grid_constant__ cml__gemm_epi epi) {
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const long long b = op.batch0 + blockIdx.z;
    float acc[TM][8];
    cml__f32_mainloop<BM, BN, BK, TM, A_T, B_T, 2>(acc, op.A + b * op.stride_a, op.lda, op.B + b * op.stride_b, op.ldb,
                                                   op.M, op.N, op.K, m0, n0);
    const cml__f32_thread_pos<BN, TM> pos(threadIdx.x);
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int m = m0 + pos.row0 + (i / 4) * 16 + i % 4;
        f32_store_row(&epi, b, m, n0 + pos.col0, acc[i][0], acc[i][1], acc[i][2], acc[i][3], acc[i][4], acc[i][5],
                      acc[i][6], acc[i][7]);
    }
}

/* ---- configurations ------------------------------------------------------------------------ */

typedef enum f32_config { CFG_LARGE, CFG_MEDIUM, CFG_SMALL, CFG_COUNT } f32_config;

typedef struct f32_config_info {
    int bm, bn, threads, blocks_per_sm;
    double rate; /* TFLOP/s of its main loop at 8192^3 on an H100 (dev/gemm_f32/README.md) */
    const char *name;
} f32_config_info;

static const f32_config_info CONFIGS[CFG_COUNT] = {
    {128, 128, 128, 2, 46.8, "128x128x8"},
    {64, 128, 128, 3, 45.0, "64x128x8"},
    {64, 64, 64, 6, 39.1, "64x64x8"},
};

/* BM, BN, BK, TM (a thread's rows: 16 or 8), blocks per SM (caps registers at 255, 170, 170) */
#define CFG_PARAMS_LARGE 128, 128, 8, 16, 2
#define CFG_PARAMS_MEDIUM 64, 128, 8, 8, 3
#define CFG_PARAMS_SMALL 64, 64, 8, 8, 6

/* Share of an SM's full rate that `warps` resident warps reach (every configuration
 * fills an SM with 8): below 4 some of the 4 schedulers idle; from 4 to 8 the second
 * warp of each scheduler hides the shared-memory and barrier latencies. */
static double warp_share(double warps) {
    const double w = warps < 8 ? warps : 8;
    return (w < 4 ? w : 4) / 4 * (0.75 + 0.25 * (w > 4 ? w - 4 : 0) / 4);
}

/* The configuration with the smallest estimated time: full waves of tiles (every SM
 * holding its blocks_per_sm) at the configuration's rate, then the last, partial wave,
 * whose busiest SM holds ceil(left / SMs) blocks at the rate their warps reach. From
 * the shape and the SM count only, so a given GPU always makes the same choice. */
static f32_config pick_config(const cml_ctx *ctx, const cml_gemm_desc *d) {
    const int sms_read = cml__cuda_sm_count(ctx->device.index);
    const double sms = sms_read > 0 ? sms_read : 132;
    f32_config best = CFG_SMALL; /* always fits (cml__gemm_f32_takes) */
    double best_cost = -1;
    for (int c = 0; c < CFG_COUNT; c++) {
        const f32_config_info *ci = &CONFIGS[c];
        const long long tiles_m = (d->M + ci->bm - 1) / ci->bm, tiles_n = (d->N + ci->bn - 1) / ci->bn;
        if (tiles_m > MAX_GRID_Y) continue;
        const double tiles = (double)tiles_m * (double)tiles_n * (double)d->batch;
        const double per_wave = sms * ci->blocks_per_sm, tile_work = (double)ci->bm * ci->bn;
        const double full = floor(tiles / per_wave), left = tiles - full * per_wave;
        double cost = full * ci->blocks_per_sm * tile_work / ci->rate;
        if (left > 0) {
            const double resident = ceil(left / sms), warps = resident * ci->threads / 32;
            cost += resident * tile_work / (ci->rate * warp_share(warps));
        }
        if (best_cost < 0 || cost < best_cost * 0.999) { /* ties go to the larger tile */
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
    constexpr int smem = cml__f32_smem_bytes<BM, BN, BK, A_T, B_T, 2>();
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
    switch (cfg) {
    case CFG_LARGE: return f32_launch_ops<CFG_PARAMS_LARGE>(ctx, d, &op, &epi, name);
    case CFG_MEDIUM: return f32_launch_ops<CFG_PARAMS_MEDIUM>(ctx, d, &op, &epi, name);
    default: return f32_launch_ops<CFG_PARAMS_SMALL>(ctx, d, &op, &epi, name);
    }
}

extern "C" const char *cml__gemm_f32_config_name(const cml_ctx *ctx, const cml_gemm_desc *d) {
    return CONFIGS[pick_config(ctx, d)].name;
}
