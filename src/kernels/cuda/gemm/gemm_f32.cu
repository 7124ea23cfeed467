/* Exact f32 GEMM on CUDA cores (no tf32): the path cml__gemm_cuda takes for
 * f32 inputs with CML_GEMM_MATH_DEFAULT when cml__gemm_f32_takes says yes.
 *
 * The main loop is gemm_f32_tile.cuh (register and warp tiling, 16-byte loads,
 * double buffering); the results then leave through shared memory, a row of D at a
 * time, and the shared epilogue (gemm_epilogue.cuh: alpha, scales, beta*C, bias,
 * activations, aux), so D may be f32, f16 or bf16.
 *
 * Split K, for few tiles and long K (the weight gradients, 768 x 768 x 8192: 36 tiles of
 * 128 x 128 for 132 SMs): split s of a tile sums k in [s * k_chunk, (s + 1) * k_chunk) and
 * stores its plain f32 partial to the context's workspace (the same shared-memory store
 * path, through an epilogue that only copies); a second kernel adds the partials of each
 * element in split order and applies the whole epilogue. Every split sums its k in order and
 * the partials are added in one fixed order, so results are bitwise repeatable (no float
 * atomics); they differ in rounding from the unsplit sum. Two kernels rather than one whose
 * last-arriving split adds the others (the sm90 path's way): no arrival counters to zero
 * per launch and no epilogue inside the main kernel's template; the partials are small next
 * to the GEMM (768 x 768 x 8 splits: 19 MB written and read, ~15 us at 2.5 TB/s, against
 * ~200 us of arithmetic at 48 TFLOP/s), and the cost estimate counts them.
 *
 * Tile configurations (F32_CONFIGS below: BM x BN x BK, results a thread, blocks per SM);
 * the measured ladder that led to them is dev/gemm_f32/README.md. pick_plan estimates
 * each one's time from its full-occupancy rate, the waves its tiles (times the K splits)
 * make on this GPU, how busy the last wave leaves the SMs and the partials' traffic, and
 * takes the fastest: large problems get large tiles, small M or N smaller ones so that more
 * SMs have work, few tiles over a long K are also split along K.
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
    int splits, k_chunk; /* split K: blockIdx.z = batch * splits + split; split s takes k in
                            [s * k_chunk, min(K, (s + 1) * k_chunk)); k_chunk a multiple of 16 */
    long long batch0; /* the batch of blockIdx.z / splits == 0 (launches cover at most 65535 / splits batches) */
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

/* SPLIT: split K (op.splits > 1). A template flag, not a runtime test, so that the unsplit
 * kernels stay exactly as they were: the split's K range held in registers through the main loop
 * made ptxas spill (~56 bytes) in the 128 x 128 x 16 / 8 x 8 tile, which sits at the 128-register
 * cap of 2 blocks x 256 threads. */
/* PHASES: > 0, cml__f32_mainloop_phased with that many staging phases; 0, cml__f32_mainloop. The
 * same results bit for bit (gemm_f32_tile.cuh; f32_loop_phases below says which configuration runs
 * which). */
template <int BM, int BN, int BK, int TM, bool A_T, bool B_T, int PHASES>
static __device__ __forceinline__ void f32_mainloop(float (&acc)[TM][8], const float *A, int lda, const float *B,
                                                    int ldb, int M, int N, int K, int m0, int n0) {
    if constexpr (PHASES > 0)
        cml__f32_mainloop_phased<BM, BN, BK, TM, A_T, B_T, PHASES>(acc, A, lda, B, ldb, M, N, K, m0, n0);
    else
        cml__f32_mainloop<BM, BN, BK, TM, A_T, B_T, 2>(acc, A, lda, B, ldb, M, N, K, m0, n0);
}

template <int BM, int BN, int BK, int TM, bool A_T, bool B_T, int MINB, bool SPLIT, int PHASES>
static __global__ void __launch_bounds__(CML_F32_THREADS(BM, BN, TM), MINB)
    gemm_f32_kernel(const __grid_constant__ f32_operands op, const __grid_constant__ cml__gemm_epi epi) {
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][8];
    if constexpr (!SPLIT) {
        const long long b = op.batch0 + blockIdx.z;
        f32_mainloop<BM, BN, BK, TM, A_T, B_T, PHASES>(acc, op.A + b * op.stride_a, op.lda, op.B + b * op.stride_b,
                                                       op.ldb, op.M, op.N, op.K, m0, n0);
        f32_epilogue<BM, BN, TM>(acc, epi, b, m0, n0);
    } else {
        const int split = (int)(blockIdx.z % (unsigned)op.splits);
        const long long b = op.batch0 + blockIdx.z / (unsigned)op.splits;
        /* this split's K range: A's (B's) rows of k when stored K x M (K x N), else its columns; k0
         * is a multiple of 16, so the shifted operands keep the 16-byte alignment the loads need */
        const int k0 = split * op.k_chunk, k_len = min(op.K - k0, op.k_chunk);
        const float *A = op.A + b * op.stride_a + (A_T ? (long long)k0 * op.lda : (long long)k0);
        const float *B = op.B + b * op.stride_b + (B_T ? (long long)k0 : (long long)k0 * op.ldb);
        f32_mainloop<BM, BN, BK, TM, A_T, B_T, PHASES>(acc, A, op.lda, B, op.ldb, op.M, op.N, k_len, m0, n0);
        /* epi is the copy into the partials, whose "batch" index is batch * splits + split */
        f32_epilogue<BM, BN, TM>(acc, epi, (op.batch0 + blockIdx.z / (unsigned)op.splits) * op.splits +
                                               (int)(blockIdx.z % (unsigned)op.splits), m0, n0);
    }
}

/* ---- split K: the partials' sum in split order, then the whole epilogue ------------------------ */

#define F32_FINISH_THREADS 256

typedef struct f32_split_sum {
    const float *partials; /* [batch][splits][M][ldp] */
    long long M, ldp, batch;
    int splits;
} f32_split_sum;

/* Four neighbouring elements a thread: (((p0 + p1) + p2) + ...) in split order, then f32_store4
 * (every epilogue option, any D dtype). Columns N .. ldp-1 of a partial row are written too (the
 * main kernel's tile covers them: finite values of clamped or zero-filled operand rows), so every
 * float4 read here is initialized; f32_store4 drops them. */
static __global__ void __launch_bounds__(F32_FINISH_THREADS)
    gemm_f32_split_sum_kernel(const __grid_constant__ f32_split_sum p, const __grid_constant__ cml__gemm_epi epi) {
    const long long q = p.ldp / 4, per_batch = p.M * q, total = p.batch * per_batch, plane = p.M * p.ldp;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long b = i / per_batch, r = i - b * per_batch, m = r / q, n = (r - m * q) * 4;
        const float *src = p.partials + b * p.splits * plane + m * p.ldp + n;
        float4 v = __ldcs((const float4 *)src); /* read once: streaming */
#pragma unroll 4
        for (int s = 1; s < p.splits; s++) {
            const float4 w = __ldcs((const float4 *)(src + s * plane));
            v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
        }
        f32_store4(epi, b, (int)m, (int)n, v);
    }
}

/* ---- configurations ------------------------------------------------------------------------ */

/* X(id, BM, BN, BK, TM (a thread's rows: 16, 8 or 4), blocks per SM (the register cap:
 * 65536 / (blocks x threads)), rates: TFLOP/s with every SM full, by how many operands are
 * stored contiguous along K: 0 (op TN), 1 (NN, TT), 2 (NT)), largest tiles first. The rates
 * and warp_share below are fitted (dev/gemm_f32/fit_pick.py) to every configuration timed
 * on the 20 shapes of `camel bench gemm --dtype f32 --set square,gpt2,batched` (run 3 in
 * dev/gemm_f32/README.md; refitted to run 4; V6's NN / NT rates raised by the phased loop's measured
 * +2.3% / +5.3% in session 14). Why these five:
 *   L16  128x128x16, 16x8, 128 threads, 2/SM (8 warps): the best TN rate with many tiles (lm dW)
 *   V6   128x128x16,  8x8, 256 threads, 2/SM (16 warps): the best on squares, NN and NT (both
 *        operands loaded along K), and a last partial wave of 8-warp blocks
 *   M     64x128x8,   8x8, 128 threads, 3/SM; S 64x64x8, 8x8, 64 threads, 6/SM; T16
 *        32x64x16, 4x8, 64 threads, 8/SM: more, smaller tiles when the tiles are few
 *        (the K = 8192 weight gradients, which pick_plan may also split along K) */
#define F32_CONFIGS(X)                                \
    X(L16, 128, 128, 16, 16, 2, 45.6, 41.8, 41.3)     \
    X(V6, 128, 128, 16, 8, 2, 44.8, 46.6, 44.9)       \
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
static int forced_splits = 0; /* 0: the estimate's */

/* Each configuration's main loop (session 14, helpers h14b / h14c; dev/gemm_f32/README.md): the
 * staging phases of cml__f32_mainloop_phased (fragments double-buffered, serpentine FFMA order; a
 * thread's float4 shares of A / B: V6 2 / 2, L16 4 / 4, S 2 / 2), or 0 = cml__f32_mainloop. Measured
 * against the old loop in turns: V6 at 2 phases +2-5%, L16 at 2 +2.7% (lm dW) to +5.5%, S at 1 +5-10%;
 * M and T16 keep the old loop (M split 3 ways on qkv dW ran 0.92x with the new one, T16 +1.4%). Every
 * loop gives the same D bit for bit. */
static constexpr int f32_loop_phases(int bm, int bn, int bk, int tm) {
    return bm == 128 && bn == 128 && bk == 16 && tm == 8 ? 2   /* V6 */
           : bm == 128 && bn == 128 && tm == 16          ? 2   /* L16 */
           : bm == 64 && bn == 64                        ? 1   /* S */
                                                         : 0;  /* M, T16 */
}

/* Share of an SM's full rate that `warps` resident warps of a last, partial wave reach:
 * with 4 or fewer each scheduler has at most one warp and stalls on every shared-memory
 * load and barrier; 8 hide most of it. Fitted with the rates above (dev/gemm_f32/fit_pick.py). */
static double warp_share(double warps) {
    const double w = warps < 8 ? warps : 8;
    return w <= 4 ? 0.56 * w / 4 : 0.56 + 0.39 * (w - 4) / 4;
}

/* How much faster a smaller tile must be estimated to be taken. */
#define F32_SMALLER_TILE_MARGIN 0.08

/* Split K: at most 16 splits, each at least 512 deep (shorter ones would spend too much on the
 * partials and the per-tile prologue and epilogue; the estimate never considers them, forcing
 * may); k chunks are multiples of 16 (both BK; keeps the shifted operands 16-byte aligned).
 * The partials cost their bytes twice (written, read back) at ~2.5 TB/s (mostly L2: 768 x 768 x
 * 8 splits is 19 MB), plus the second launch. */
#define F32_MAX_SPLITS 16
#define F32_SPLIT_MIN_K 512
#define F32_SPLIT_GRANULE 16
#define F32_SPLIT_BYTES_PER_S 2.5e12
#define F32_SPLIT_LAUNCH_S 3e-6
#define F32_SPLIT_MAX_BYTES (256ll << 20) /* of partials; the estimate goes no higher */
#define F32_SPLIT_MARGIN 0.10 /* how much faster than unsplit a split must be estimated */

/* How a problem runs: a tile configuration and K split into `splits` chunks of k_chunk. */
typedef struct f32_plan {
    f32_config cfg;
    int splits, k_chunk;
} f32_plan;

/* The k chunk of `want` splits (rounded up to the granule) and the splits it really makes
 * (fewer when K is short: K = 7 asked for 4 splits makes one chunk of 16). */
static f32_plan split_plan(f32_config cfg, long long K, int want) {
    f32_plan p;
    p.cfg = cfg;
    p.splits = 1;
    p.k_chunk = K > 0 ? (int)K : 0;
    if (K < 1 || want <= 1) return p; /* K < 1: the path declines it; names may still be asked for */
    const long long per = (K + want - 1) / want;
    p.k_chunk = (int)((per + F32_SPLIT_GRANULE - 1) / F32_SPLIT_GRANULE * F32_SPLIT_GRANULE);
    p.splits = (int)((K + p.k_chunk - 1) / p.k_chunk);
    if (p.splits <= 1) p.k_chunk = (int)K, p.splits = 1;
    return p;
}

/* Row length of a partial (16-byte rows) and the partials' bytes. */
static long long partial_ld(const cml_gemm_desc *d) { return (d->N + 3) / 4 * 4; }
static long long partial_bytes(const cml_gemm_desc *d, int splits) {
    return splits > 1 ? (long long)splits * d->batch * d->M * partial_ld(d) * (long long)sizeof(float) : 0;
}

static bool config_fits(const f32_config_info *ci, const cml_gemm_desc *d) {
    return (d->M + ci->bm - 1) / ci->bm <= MAX_GRID_Y;
}

/* Estimated seconds of configuration ci with plan p: full waves of tiles x splits blocks (every SM
 * holding its blocks_per_sm) at the configuration's rate for this layout, then the last, partial
 * wave, whose busiest SM holds ceil(left / SMs) blocks at the share of the rate their warps
 * reach; each block's work is its tile over k_chunk. With splits, plus the partials' traffic. */
static double estimate_seconds(const f32_config_info *ci, const cml_gemm_desc *d, const f32_plan *p, double sms) {
    const int k_contiguous = (d->op_a == CML_OP_N) + (d->op_b == CML_OP_T);
    const long long tiles_m = (d->M + ci->bm - 1) / ci->bm, tiles_n = (d->N + ci->bn - 1) / ci->bn;
    const double blocks = (double)tiles_m * (double)tiles_n * (double)d->batch * p->splits;
    const double per_wave = sms * ci->blocks_per_sm, tile_work = (double)ci->bm * ci->bn;
    const double full = floor(blocks / per_wave), left = blocks - full * per_wave;
    const double rate = ci->rate[k_contiguous];
    double cost = full * ci->blocks_per_sm * tile_work / rate; /* x 2 k_chunk SMs / 1e12: seconds */
    if (left > 0) {
        const double resident = ceil(left / sms), warps = resident * ci->threads / 32;
        cost += resident * tile_work / (rate * warp_share(warps));
    }
    double seconds = cost * 2.0 * p->k_chunk * sms * 1e-12;
    if (p->splits > 1) seconds += 2.0 * (double)partial_bytes(d, p->splits) / F32_SPLIT_BYTES_PER_S + F32_SPLIT_LAUNCH_S;
    return seconds;
}

/* The estimate's choice among the configurations (the forced one only, when forced) for `want`
 * splits: candidates largest tile first, a smaller tile taken only when estimated clearly faster
 * (the estimate is good to ~6%; a smaller tile moves more bytes per flop and leaves fewer warps a
 * tile for the partial wave), one of the same size when estimated faster at all (V6 over L16: the
 * GPT-2 NT forwards 8192 x 3072 / 50304 x 768 ran 9% faster on V6, session 14). *cost: its
 * estimated seconds. */
static f32_plan pick_tile(const cml_gemm_desc *d, double sms, int want, double *cost) {
    const bool cfg_forced = forced_config >= 0 && config_fits(&CONFIGS[forced_config], d);
    f32_plan best = split_plan(cfg_forced ? (f32_config)forced_config : CFG_FALLBACK, d->K, want);
    double best_cost = -1;
    for (int c = 0; c < CFG_COUNT; c++) {
        if (!config_fits(&CONFIGS[c], d) || (cfg_forced && c != forced_config)) continue;
        const f32_plan p = split_plan((f32_config)c, d->K, want);
        const double t = estimate_seconds(&CONFIGS[c], d, &p, sms);
        const bool smaller = CONFIGS[c].bm * CONFIGS[c].bn < CONFIGS[best.cfg].bm * CONFIGS[best.cfg].bn;
        if (best_cost < 0 || t < best_cost * (1.0 - (smaller ? F32_SMALLER_TILE_MARGIN : 0.0))) {
            best = p;
            best_cost = t;
        }
    }
    *cost = best_cost;
    return best;
}

/* The plan for d: the unsplit choice (pick_tile), unless K split 2..16 ways (each split at least
 * F32_SPLIT_MIN_K deep) with some configuration is estimated F32_SPLIT_MARGIN faster; among the
 * split candidates the fastest estimate. Kept apart from the unsplit choice so that splitting
 * never changes the tile of a problem it does not split. From the shape and the SM count only,
 * so a given GPU always makes the same choice (and the same summation order). On the 20 shapes
 * of `camel bench gemm --set square,gpt2,batched` the unsplit choice is the fastest
 * configuration or one within 3% of it (dev/gemm_f32/README.md), and only the four K = 8192
 * weight gradients with few tiles are split. */
static f32_plan pick_plan(const cml_ctx *ctx, const cml_gemm_desc *d) {
    const int sms_read = cml__cuda_sm_count(ctx->device.index);
    const double sms = sms_read > 0 ? sms_read : 132;
    double unsplit_cost = 0;
    if (forced_splits > 0) return pick_tile(d, sms, forced_splits, &unsplit_cost);
    const f32_plan unsplit = pick_tile(d, sms, 1, &unsplit_cost);
    const bool cfg_forced = forced_config >= 0 && config_fits(&CONFIGS[forced_config], d);
    f32_plan best = unsplit;
    double best_cost = unsplit_cost * (1.0 - F32_SPLIT_MARGIN);
    for (int s = 2; s <= F32_MAX_SPLITS && d->K / s >= F32_SPLIT_MIN_K; s++) {
        if (partial_bytes(d, s) > F32_SPLIT_MAX_BYTES) break;
        for (int c = 0; c < CFG_COUNT; c++) {
            if (!config_fits(&CONFIGS[c], d) || (cfg_forced && c != forced_config)) continue;
            const f32_plan p = split_plan((f32_config)c, d->K, s);
            if (p.splits != s) continue;
            const double t = estimate_seconds(&CONFIGS[c], d, &p, sms);
            if (t < best_cost) {
                best = p;
                best_cost = t;
            }
        }
    }
    return best;
}

/* ---- launch ---------------------------------------------------------------------------------- */

template <int BM, int BN, int BK, int TM, int MINB, bool A_T, bool B_T, bool SPLIT, int PHASES>
static cml_status f32_launch(cml_ctx *ctx, long long batch, const f32_operands *op, const cml__gemm_epi *epi,
                             const char *cfg_name) {
    static const char fn[] = "cml_gemm";
    constexpr int threads = CML_F32_THREADS(BM, BN, TM);
    constexpr int smem_loop = cml__f32_smem_bytes<BM, BN, BK, A_T, B_T, 2>();
    constexpr int smem_epi = F32_EPI_ROWS(BM, TM) * BN * (int)sizeof(float);
    constexpr int smem = smem_loop > smem_epi ? smem_loop : smem_epi;
    auto kernel = gemm_f32_kernel<BM, BN, BK, TM, A_T, B_T, MINB, SPLIT, PHASES>;
    if (smem > 48 * 1024) /* cheap; a static flag would not know the device */
        CML_CUDA_TRY(fn, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    f32_operands part = *op;
    const long long per_launch = MAX_GRID_Z / op->splits; /* batches: grid.z = batches x splits */
    for (part.batch0 = 0; part.batch0 < batch; part.batch0 += per_launch) {
        const long long left = batch - part.batch0;
        dim3 grid((unsigned)((op->N + BN - 1) / BN), (unsigned)((op->M + BM - 1) / BM),
                  (unsigned)((left < per_launch ? left : per_launch) * op->splits));
        kernel<<<grid, threads, smem, cml__stream(ctx)>>>(part, *epi);
        char what[64];
        snprintf(what, sizeof what, "f32 %s %c%c splits=%d phases=%d", cfg_name, A_T ? 'T' : 'N', B_T ? 'T' : 'N',
                 op->splits, PHASES);
        CML_TRY(cml__cuda_check_launch(fn, "gemm_f32_kernel", what, (long long)op->M * op->N * grid.z,
                                       grid.x * grid.y * grid.z, threads));
    }
    return CML_OK;
}

template <int BM, int BN, int BK, int TM, int MINB, int PHASES>
static cml_status f32_launch_ops(cml_ctx *ctx, const cml_gemm_desc *d, const f32_operands *op,
                                 const cml__gemm_epi *epi, const char *cfg_name) {
    const bool a_t = d->op_a == CML_OP_T, b_t = d->op_b == CML_OP_T;
    if (op->splits > 1) {
        if (!a_t && !b_t) return f32_launch<BM, BN, BK, TM, MINB, false, false, true, PHASES>(ctx, d->batch, op, epi, cfg_name);
        if (!a_t) return f32_launch<BM, BN, BK, TM, MINB, false, true, true, PHASES>(ctx, d->batch, op, epi, cfg_name);
        if (!b_t) return f32_launch<BM, BN, BK, TM, MINB, true, false, true, PHASES>(ctx, d->batch, op, epi, cfg_name);
        return f32_launch<BM, BN, BK, TM, MINB, true, true, true, PHASES>(ctx, d->batch, op, epi, cfg_name);
    }
    if (!a_t && !b_t) return f32_launch<BM, BN, BK, TM, MINB, false, false, false, PHASES>(ctx, d->batch, op, epi, cfg_name);
    if (!a_t) return f32_launch<BM, BN, BK, TM, MINB, false, true, false, PHASES>(ctx, d->batch, op, epi, cfg_name);
    if (!b_t) return f32_launch<BM, BN, BK, TM, MINB, true, false, false, PHASES>(ctx, d->batch, op, epi, cfg_name);
    return f32_launch<BM, BN, BK, TM, MINB, true, true, false, PHASES>(ctx, d->batch, op, epi, cfg_name);
}

/* The main kernel's epilogue with split K: a plain copy of each accumulator (alpha 1, nothing
 * added, f32) into the split's partial, [batch][split][M][ldp]; columns up to ldp (N rounded up
 * to 4) so that every partial row is whole float4s. */
static cml__gemm_epi partial_epi(const cml_gemm_desc *d, float *partials) {
    cml__gemm_epi e;
    memset(&e, 0, sizeof e);
    e.alpha = 1.0f;
    e.beta = 0.0f;
    e.act = CML_EPILOGUE_NONE;
    e.bias_axis = CML_BIAS_PER_COLUMN;
    e.c_dtype = e.d_dtype = CML_F32;
    e.a_scale_mode = e.b_scale_mode = CML_SCALE_NONE;
    e.M = d->M;
    e.N = partial_ld(d);
    e.D = partials;
    e.ldd = partial_ld(d);
    e.stride_d = d->M * partial_ld(d);
    return e;
}

static cml_status split_sum_launch(cml_ctx *ctx, const cml_gemm_desc *d, const float *partials, int splits,
                                   const cml__gemm_epi *epi) {
    f32_split_sum p;
    p.partials = partials;
    p.M = d->M;
    p.ldp = partial_ld(d);
    p.batch = d->batch;
    p.splits = splits;
    const long long work = d->batch * d->M * (p.ldp / 4);
    const unsigned grid = cml__grid_size(ctx, work, F32_FINISH_THREADS);
    gemm_f32_split_sum_kernel<<<grid, F32_FINISH_THREADS, 0, cml__stream(ctx)>>>(p, *epi);
    return cml__cuda_check_launch("cml_gemm", "gemm_f32_split_sum_kernel", "f32", work, grid, F32_FINISH_THREADS);
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
    const f32_plan plan = pick_plan(ctx, d);
    op.splits = plan.splits;
    op.k_chunk = plan.k_chunk;
    const cml__gemm_epi epi = cml__gemm_epi_make(d, D, C);
    cml__gemm_epi main_epi = epi;
    float *partials = NULL;
    if (plan.splits > 1) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)partial_bytes(d, plan.splits)));
        partials = (float *)ws;
        main_epi = partial_epi(d, partials); /* indexed by batch * splits + split */
    }
    const char *name = CONFIGS[plan.cfg].name;
    cml_status st = CML_ERR_INTERNAL;
#define F32_CASE(id, bm, bn, bk, tm, minb, r0, r1, r2) \
    case CFG_##id:                                                                                         \
        st = f32_launch_ops<bm, bn, bk, tm, minb, f32_loop_phases(bm, bn, bk, tm)>(ctx, d, &op, &main_epi, name); \
        break;
    switch (plan.cfg) {
        F32_CONFIGS(F32_CASE)
    default: return cml__error(CML_ERR_INTERNAL, "cml_gemm: f32 configuration %d out of range", (int)plan.cfg);
    }
    if (st != CML_OK || plan.splits == 1) return st;
    return split_sum_launch(ctx, d, partials, plan.splits, &epi);
}

extern "C" const char *cml__gemm_f32_config_name(const cml_ctx *ctx, const cml_gemm_desc *d) {
    return CONFIGS[pick_plan(ctx, d).cfg].name;
}

extern "C" int cml__gemm_f32_splits(const cml_ctx *ctx, const cml_gemm_desc *d) {
    return d->K >= 1 ? pick_plan(ctx, d).splits : 1;
}

extern "C" size_t cml__gemm_f32_workspace_size(const cml_ctx *ctx, const cml_gemm_desc *d) {
    if (d->a_dtype != CML_F32 || d->b_dtype != CML_F32 || d->math != CML_GEMM_MATH_DEFAULT || d->K < 1) return 0;
    return (size_t)partial_bytes(d, pick_plan(ctx, d).splits);
}

extern "C" bool cml__gemm_f32_force_splits(int splits) {
    const bool ok = splits >= 0 && splits <= F32_MAX_SPLITS;
    forced_splits = ok ? splits : 0;
    return ok;
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
