/* The Hopper GEMM kernel: D tile = op(A) tile x op(B) tile on wgmma tensor cores.
 *
 * Structure (one CTA per SM, persistent):
 *   warpgroup 0   producer: one thread issues TMA loads of A and B tiles into a ring of
 *                 STAGES shared-memory stages; full[s] completes when a stage's bytes land.
 *   warpgroups 1,2 consumers: each owns 64 rows of the 128-row tile and BN columns; per
 *                 stage it issues 4 wgmmas (each eats 32 bytes of K per row), keeps one
 *                 stage's wgmmas in flight, and frees the stage before it (empty[s]).
 *   setmaxnreg moves registers from the producer (40) to the consumers (232): a consumer
 *   holds a 64 x BN f32 accumulator (BN/2 registers per thread).
 * Tiles are visited in a grouped order (group_m tile rows at a time) so that the CTAs
 * running together share A and B tiles in L2. Every K-block of a tile is accumulated in
 * the same order, whatever the grid: results are bitwise reproducible.
 *
 * Shared-memory layout of a stage, written by TMA in the 128-byte swizzle (rows of 128
 * bytes, 8-row atoms of 1024 bytes):
 *   K-major operand (A with op N, B with op T): rows = M (or N) index, 128 bytes of K each.
 *   M/N-major operand (16-bit only: A with op T, B with op N): 64-element column blocks of
 *   BK_ROWS K rows each, one block after another (lbo = block size). tf32 with TRANS_A: 32-element
 *   column blocks of the kernel's A, read into registers (the RS launch, cml__sm90_rs_chunk).
 * KIND selects the input type; the epilogue (gemm_epilogue.cuh) does alpha, scales, beta*C,
 * bias, activation and the store in D's dtype. */
#ifndef CML_KERNELS_CUDA_GEMM_GEMM_SM90_KERNEL_CUH
#define CML_KERNELS_CUDA_GEMM_GEMM_SM90_KERNEL_CUH

#include <stdint.h>

#include "kernels/cuda/common/fast_div.h"
#include "kernels/cuda/common/hopper.cuh"
#include "kernels/cuda/common/wgmma_ops.cuh"
#include "kernels/cuda/gemm/gemm_epilogue.cuh"

/* Dev builds only (dev/gemm_sm90/epilogue_probe.sh) set CML_SM90_DEV_EPI to time parts of
 * the epilogue: 1 none at all (ptxas then reduces the wgmmas to empty ones, as nothing reads the
 * accumulators: it times the loads and barriers only), 2 the shared-memory staging without the TMA
 * stores, 3 the TMA stores without the staging, 6 none at run time but compiled in (the real main
 * loop). The library is built with
 * 0, the real epilogue. */
#ifndef CML_SM90_DEV_EPI
#define CML_SM90_DEV_EPI 0
#endif

/* Dev builds only (dev/gemm_sm90/harness.cu, README "Session 8, part 3") set CML_SM90_DEV_PRODUCER_SPIN to N > 0:
 * the producer then spins N clocks after each empty-barrier wait, before it issues the stage's
 * loads, to measure how much issue latency the main loop hides (the producer's headroom). The
 * library is built with 0 (compiled out). */
#ifndef CML_SM90_DEV_PRODUCER_SPIN
#define CML_SM90_DEV_PRODUCER_SPIN 0
#endif

/* Dev builds only (dev/gemm_sm90/timeline.py) set CML_SM90_DEV_TIMELINE to 1: each CTA of the first
 * CML_SM90_TL_CTAS records clock64 stamps of its first CML_SM90_TL_SLOTS - 1 tiles in cml__sm90_tl
 * (CML_SM90_TL_EV words a tile: consumer 0's tile start, first stage landed, main loop end,
 * epilogue end; consumer 1's main loop end and epilogue end; the producer's first and last load
 * issue) and in its last slot the start / end clock64, start / end %globaltimer, %smid, its tile count, the
 * clock64 at entry (before the barriers' init) and the producer's after its first tile's place is known; the host
 * (gemm_sm90.cu) writes them out after the launch. The library is built with 0 (compiled out). */
#ifndef CML_SM90_DEV_TIMELINE
#define CML_SM90_DEV_TIMELINE 0
#endif
#ifndef CML_SM90_EARLY /* 0: no early issue of the first stages (session 29 A/B builds only) */
#define CML_SM90_EARLY 1
#endif
#if CML_SM90_DEV_TIMELINE
#define CML_SM90_TL_CTAS 264
#define CML_SM90_TL_SLOTS 16
#define CML_SM90_TL_EV 8
static __device__ unsigned long long cml__sm90_tl[CML_SM90_TL_CTAS * CML_SM90_TL_SLOTS * CML_SM90_TL_EV];
static __device__ __forceinline__ unsigned long long cml__sm90_gtimer(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define CML_SM90_TL(slot, ev, value)                                                                                 \
    do {                                                                                                             \
        if (blockIdx.x < CML_SM90_TL_CTAS && (slot) < CML_SM90_TL_SLOTS - 1)                                         \
            cml__sm90_tl[(blockIdx.x * CML_SM90_TL_SLOTS + (slot)) * CML_SM90_TL_EV + (ev)] = (value);               \
    } while (0)
#define CML_SM90_TL_META(ev, value)                                                                                  \
    do {                                                                                                             \
        if (blockIdx.x < CML_SM90_TL_CTAS)                                                                           \
            cml__sm90_tl[(blockIdx.x * CML_SM90_TL_SLOTS + CML_SM90_TL_SLOTS - 1) * CML_SM90_TL_EV + (ev)] = (value); \
    } while (0)
#else
#define CML_SM90_TL(slot, ev, value) ((void)0)
#define CML_SM90_TL_META(ev, value) ((void)0)
#endif

#define CML_SM90_BM 128      /* tile rows: two consumer warpgroups of 64 */
#define CML_SM90_THREADS 384 /* producer + two consumers */
#define CML_SM90_ROW_BYTES 128
/* setmaxnreg after the launch's registers (65536 / 384 rounded down to 8: 168 a thread): the CTA keeps the
 * 168 x 384 it was given, so the consumers' increase (2 x 128 x (232 - 168)) can only come from what the
 * producer's decrease frees (128 x (168 - 40)); a producer at 48 left the consumers waiting forever
 * (dev/gemm_sm90/README.md, session 19). */
#define CML_SM90_PRODUCER_REGS 40
#define CML_SM90_CONSUMER_REGS 232
#define CML_SM90_LAUNCH_REGS ((65536 / CML_SM90_THREADS) & ~7)
static_assert(2 * (CML_SM90_CONSUMER_REGS - CML_SM90_LAUNCH_REGS) <= CML_SM90_LAUNCH_REGS - CML_SM90_PRODUCER_REGS,
              "the consumers' extra registers must come from the producer's");

enum { CML_SM90_BF16 = 0, CML_SM90_F16 = 1, CML_SM90_TF32 = 2, CML_SM90_E4M3 = 3, CML_SM90_E5M2 = 4 };

/* One problem of a grouped launch, in global memory (its maps 64-byte aligned, as TMA needs). */
typedef struct cml__sm90_group { /* 64-byte aligned through CUtensorMap */
    CUtensorMap map_a, map_b, map_d;
    cml__gemm_epi epi;
    int tma_store; /* D through map_d, as cml__sm90_problem's tma_store */
    int cluster_rows, tiles_n, k_blocks;
    int tile_end; /* cluster tiles of problems 0..this one */
} cml__sm90_group;

/* A grouped launch of at most CML_SM90_PARAM_GROUPS problems passes them in the kernel's parameters: maps a TMA may use
 * as they are (no acquire fence), fields read through the constant cache. More problems go to global memory
 * (cml__sm90_problem's groups). The grouped set (8 problems) measured 1.005-1.016x against the same in global memory
 * (e4m3 1.016x; dev/gemm_sm90/README.md, session 30). 16 problems are ~9 KB of parameters. */
#define CML_SM90_PARAM_GROUPS 16
template <int N>
struct cml__sm90_param_groups {
    cml__sm90_group g[N];
};
template <>
struct cml__sm90_param_groups<0> { /* the launches that are not grouped */
    int none;
};

/* The tile grid and how operands map onto it; passed by value. With n_groups > 0 the
 * launch is grouped: the problems' maps, epilogues and grids come from groups[] (NULL: from
 * the kernel's cml__sm90_param_groups parameter) and the fields above group_m are unused. */
typedef struct cml__sm90_problem {
    int tiles_m, tiles_n, batch;
    int cluster_rows; /* ceil(tiles_m / (CLUSTER / CN)): the rows of cluster tiles */
    int k_blocks;      /* ceil(K / elements per 128-byte row) */
    int group_m;       /* tile rows visited together */
    int a_batch_fixed; /* stride_a == 0: every batch reads matrix 0 */
    int b_batch_fixed;
    const cml__sm90_group *groups;
    int n_groups;
    int tma_store; /* the register epilogue and TMA stores through map_d (cml__sm90_tma_store_ok) */
    /* split K (splits > 1; 0 or 1: none): K blocks [s * split_kb, (s + 1) * split_kb) of every
     * tile go to split s (tile index b * splits + s in the batch dimension). Each 64-row half
     * tile h has `splits` f32 partials (partials + (h * splits + s) * 64 * BN) and an arrival
     * counter (arrivals[h], zero before the launch, and zero again after it: the last arriver
     * resets it): every split stores its partial and counts itself in; the one that arrives
     * last adds all partials in split order and runs the epilogue. Nobody waits (no co-residency needed) and the sum's order is fixed whoever
     * arrives last: bitwise reproducible. */
    int splits, split_kb;
    float *partials;
    int *arrivals;
    /* not grouped: the divisors of cml__sm90_tile_fast -- cluster tiles a batch, a group of group_m tile rows, group_m,
     * the last group's rows (cluster_rows % group_m, or group_m) -- and splits, as multiplies (common/fast_div.h:
     * five divisions held a CTA's first load ~300 clocks; 1.006-1.008x, dev/gemm_sm90/README.md, session 27) */
    cml__fast_div div_batch, div_group, div_group_m, div_last_m, div_splits;
} cml__sm90_problem;

/* Bytes of one element of KIND. */
template <int KIND>
struct cml__sm90_kind {
    enum { bytes = KIND == CML_SM90_TF32 ? 4 : (KIND >= CML_SM90_E4M3 ? 1 : 2) };
};

/* A grouped launch's producer hands each tile's place to the consumers with the tile's first stage: a slot of 32
 * bytes a stage after the barriers (g, tm, tn, k_blocks; the epilogue's cml__sm90_head), stored by st.async that completes on the stage's full
 * barrier as the stage's loads do, and read once the consumers' wait on it returns. The consumers then never walk the
 * problems' table at a tile's start, where the producer has its stages ready and any wait is the tensor cores'
 * (dev/gemm_sm90/README.md, session 30). CML_SM90_GROUP_SLOT=0 (dev builds) gives the consumers' own walk. */
#ifndef CML_SM90_GROUP_SLOT
#define CML_SM90_GROUP_SLOT 1
#endif
#define CML_SM90_SLOT_BYTES(stages) ((stages) * 32)

/* The epilogue hands accumulators to global memory through shared memory, 32 columns at
 * a time per consumer: rows of 32 floats padded to 40 so that the fragment's 8-byte
 * writes hit every bank once per half-warp. */
#define CML_SM90_EPI_COLS 32
#define CML_SM90_EPI_STRIDE 40

/* The TMA-store epilogue stages 64 x 64 blocks of 16-bit D (rows of 128 bytes, 128-byte
 * swizzle), out_bufs per consumer (cml__sm90_smem); a round waits until the earlier stores
 * have read their blocks before writing them again. */
#define CML_SM90_OUT_COLS 64
#define CML_SM90_OUT_BYTES (64 * CML_SM90_OUT_COLS * 2)

/* Dynamic shared memory a configuration needs: 1024 bytes of alignment slack, the stages,
 * the two consumers' epilogue buffers, then the barriers. The TMA-store epilogue stages every
 * 64-column block of a tile at once where that fits the 227 KB a block may have (out_bufs =
 * BN / 64 blocks a consumer), else 2 at a time, else 1 (the 5-stage 192-wide ring: its
 * epilogue region is the general path's 2 x 10 KB staging). */
#define CML_SM90_SMEM_MAX 232448
template <int BN, int STAGES, int BM = CML_SM90_BM, int B_BYTES = BN * CML_SM90_ROW_BYTES>
struct cml__sm90_smem {
    enum {
        a_bytes = BM * CML_SM90_ROW_BYTES,
        b_bytes = B_BYTES, /* cml__sm90_b_blocks::stage_bytes */
        epi_bytes = 64 * CML_SM90_EPI_STRIDE * 4,
        /* the stages, then (after the epilogue region) the barriers and one word per consumer
         * (split K: "arrived last") */
        fixed = 1024 + STAGES * (a_bytes + b_bytes) + 2 * STAGES * 8 + 16,
        all_blocks = 2 * (BN / CML_SM90_OUT_COLS) * CML_SM90_OUT_BYTES,
        two_blocks = 2 * 2 * CML_SM90_OUT_BYTES,
        out_bufs = fixed + (all_blocks > 2 * epi_bytes ? all_blocks : 2 * epi_bytes) <= CML_SM90_SMEM_MAX
                       ? BN / CML_SM90_OUT_COLS
                   : fixed + (two_blocks > 2 * epi_bytes ? two_blocks : 2 * epi_bytes) <= CML_SM90_SMEM_MAX ? 2
                                                                                                           : 1,
        /* both consumers' epilogue space: the general path's staging or the TMA path's blocks */
        epi_region = 2 * epi_bytes > 2 * out_bufs * CML_SM90_OUT_BYTES ? 2 * epi_bytes
                                                                        : 2 * out_bufs * CML_SM90_OUT_BYTES,
        total = fixed + epi_region
    };
    static_assert(total <= CML_SM90_SMEM_MAX, "the stages and the epilogue region fit a block's shared memory");
};

/* B in a stage: BN K-major rows of 128 bytes, or (TRANS_B: N-major, 16-bit) blocks of `cols` columns x 64 K rows one
 * after another, 64 columns in the 128-byte swizzle -- the 160-wide tile's last block half unused -- or, for the
 * 160-wide tile in a column of CTAs (CN = 1), 32 in the 64-byte swizzle: B exactly, 1.008-1.014x on 3072 x 768 x 8192
 * TN; in 2 x 2 clusters the same read 0.85-0.90x (dev/gemm_sm90/README.md, session 27). The wgmma descriptor: lbo = a
 * block's bytes, sbo = 8 K rows, a 16-deep K step = 16 rows. */
template <int BN, int TRANS_B, int CN>
struct cml__sm90_b_blocks {
    enum {
        cols = BN % 64 == 0 || !TRANS_B || CN != 1 ? 64 : 32,
        count = (BN + cols - 1) / cols,
        row_bytes = cols * 2,
        bytes = 64 * row_bytes,
        stage_bytes = TRANS_B ? count * bytes : BN * CML_SM90_ROW_BYTES,
        swizzle = row_bytes == 128 ? 1 : 2 /* the descriptor's layout field: 128- or 64-byte swizzle */
    };
};

/* One wgmma of 32 bytes of K: dispatch on the input kind and tile width. */
template <int BN, int KIND, int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void cml__sm90_mma(float *acc, uint64_t da, uint64_t db) {
    if (KIND == CML_SM90_BF16) {
        if (BN == 256) cml__wgmma_m64n256k16_bf16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else if (BN == 192) cml__wgmma_m64n192k16_bf16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else if (BN == 160) cml__wgmma_m64n160k16_bf16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else if (BN == 128) cml__wgmma_m64n128k16_bf16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else cml__wgmma_m64n64k16_bf16<TRANS_A, TRANS_B>(acc, da, db, 1);
    } else if (KIND == CML_SM90_F16) {
        if (BN == 256) cml__wgmma_m64n256k16_f16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else if (BN == 192) cml__wgmma_m64n192k16_f16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else if (BN == 160) cml__wgmma_m64n160k16_f16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else if (BN == 128) cml__wgmma_m64n128k16_f16<TRANS_A, TRANS_B>(acc, da, db, 1);
        else cml__wgmma_m64n64k16_f16<TRANS_A, TRANS_B>(acc, da, db, 1);
    } else if (KIND == CML_SM90_TF32) {
        if (BN == 256) cml__wgmma_m64n256k8_tf32(acc, da, db, 1);
        else if (BN == 128) cml__wgmma_m64n128k8_tf32(acc, da, db, 1);
        else cml__wgmma_m64n64k8_tf32(acc, da, db, 1);
    } else if (KIND == CML_SM90_E4M3) {
        if (BN == 256) cml__wgmma_m64n256k32_e4m3(acc, da, db, 1);
        else if (BN == 128) cml__wgmma_m64n128k32_e4m3(acc, da, db, 1);
        else cml__wgmma_m64n64k32_e4m3(acc, da, db, 1);
    } else {
        if (BN == 256) cml__wgmma_m64n256k32_e5m2(acc, da, db, 1);
        else if (BN == 128) cml__wgmma_m64n128k32_e5m2(acc, da, db, 1);
        else cml__wgmma_m64n64k32_e5m2(acc, da, db, 1);
    }
}

/* Synchronizes the 128 threads of one consumer warpgroup (barrier 1 or 2; 0 is __syncthreads). */
static __device__ __forceinline__ void cml__sm90_consumer_sync(int consumer) {
    asm volatile("bar.sync %0, 128;" ::"r"(consumer + 1) : "memory");
}

/* Ping-pong order (barriers 3 and 4, both consumers: 256 threads): a consumer starts the main
 * loop of a tile only after the other consumer's main loop of the previous tile has passed all
 * its full[] waits. Without it a consumer that skipped the other's stages could wait on fill r
 * of a stage before fill r - 1 completed, and try_wait.parity would take the older phase of the
 * same parity as done (wrong data, stray empty[] arrivals). */
static __device__ __forceinline__ void cml__sm90_order_wait(int consumer) {
    asm volatile("bar.sync %0, 256;" ::"r"(consumer + 3) : "memory");
}
static __device__ __forceinline__ void cml__sm90_order_signal(int consumer) {
    asm volatile("bar.arrive %0, 256;" ::"r"(consumer + 3) : "memory");
}

/* True when the epilogue is only D = alpha * acc in D's dtype (the common forward GEMM). */
static __device__ __forceinline__ bool cml__sm90_plain_epilogue(const cml__gemm_epi *e) {
    return e->act == CML_EPILOGUE_NONE && e->beta == 0.0f && !e->bias && e->a_scale_mode == CML_SCALE_NONE &&
           e->b_scale_mode == CML_SCALE_NONE;
}

/* Stores one 64 x 32 block of finished accumulators from the staging buffer: thread t
 * takes 4 neighbouring columns of rows t / 8, t / 8 + 16, ... so that 8 threads write
 * one row's 32 columns together. Not inlined: one copy of the (branchy) general epilogue
 * serves every block, which keeps the kernel small enough for the instruction cache.
 * The plain epilogue writes 4 elements with one 8- or 16-byte store when they are inside
 * D and aligned, and one at a time (without the general code) when D's rows are not. */
static __device__ __noinline__ void cml__sm90_store_block(const cml__gemm_epi *e, const float *stage, int batch,
                                                          long long row0, long long col0, int t) {
    /* the plain path's fields, read once: stores through D could alias *e, so the
     * compiler would otherwise reload each one (through L1) after every store */
    const long long M = e->M, N = e->N, ldd = e->ldd, base = batch * e->stride_d;
    const int d_dtype = e->d_dtype;
    const float alpha = e->alpha;
    void *const D = e->D;
    const bool plain = cml__sm90_plain_epilogue(e);
    const int c = 4 * (t % 8);
    const long long n = col0 + c;
    for (int r = t / 8; r < 64; r += 16) {
        const long long m = row0 + r;
        if (m >= M) break;
        if (plain && n + 3 < N) {
            float4 v = *(const float4 *)(stage + r * CML_SM90_EPI_STRIDE + c);
            const long long i = base + m * ldd + n;
            if (d_dtype == CML_F32 && ((uintptr_t)((float *)D + i) & 15u) == 0) {
                *(float4 *)((float *)D + i) = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
                continue;
            }
            if (d_dtype != CML_F32 && ((uintptr_t)((uint16_t *)D + i) & 7u) == 0) {
                bool bf = d_dtype == CML_BF16;
                uint16_t h0 = bf ? cml__f32_to_bf16(alpha * v.x) : cml__f32_to_f16(alpha * v.x);
                uint16_t h1 = bf ? cml__f32_to_bf16(alpha * v.y) : cml__f32_to_f16(alpha * v.y);
                uint16_t h2 = bf ? cml__f32_to_bf16(alpha * v.z) : cml__f32_to_f16(alpha * v.z);
                uint16_t h3 = bf ? cml__f32_to_bf16(alpha * v.w) : cml__f32_to_f16(alpha * v.w);
                *(uint2 *)((uint16_t *)D + i) =
                    make_uint2((uint32_t)h0 | ((uint32_t)h1 << 16), (uint32_t)h2 | ((uint32_t)h3 << 16));
                continue;
            }
            const float z[4] = {alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w}; /* unaligned D */
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (d_dtype == CML_F32) ((float *)D)[i + j] = z[j];
                else ((uint16_t *)D)[i + j] = d_dtype == CML_BF16 ? cml__f32_to_bf16(z[j]) : cml__f32_to_f16(z[j]);
            }
            continue;
        }
        /* the general epilogue: one scalar copy of its code, looped (code size is what
         * matters here: every tile runs this once, often with a cold instruction cache) */
#pragma unroll 1
        for (int j = 0; j < 4; j++) cml__gemm_epi_store(e, batch, m, n + j, stage[r * CML_SM90_EPI_STRIDE + c + j]);
    }
}

/* Two f32 values as D's 16-bit type, packed (x in the low half): one cvt for the pair.
 * Finite values and infinities round as the CPU does (nearest even); NaNs come out as the
 * hardware's canonical NaN (still NaN, possibly other payload bits than the CPU's). */
static __device__ __forceinline__ uint32_t cml__sm90_pack2(bool bf, float x, float y) {
    uint32_t r;
    if (bf) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(y), "f"(x));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(y), "f"(x));
    return r;
}

/* The register epilogue beyond alpha for a fragment quad (rows m, m + 8; columns n, n + 1, in that order):
 * z = s * acc + bias (cml__gemm_epi_z's order), then the activation. */
static __device__ __forceinline__ void cml__sm90_finish4(const cml__gemm_epi *e, float s, float a0, float a1, float a2,
                                                         float a3, long long m, long long n, float z[4]) {
    z[0] = s * a0, z[1] = s * a1, z[2] = s * a2, z[3] = s * a3;
    if (e->bias) {
        const bool per_row = e->bias_axis == CML_BIAS_PER_ROW;
        for (int j = 0; j < 4; j++) {
            const long long i = per_row ? m + (j >> 1) * 8 : n + (j & 1);
            if (i < (per_row ? e->M : e->N)) z[j] += cml__gemm_ld(e->bias, e->d_dtype, i);
        }
    }
    for (int j = 0; j < 4; j++) z[j] = cml__gemm_epi_act(e->act, z[j], 0.0f);
}

/* cml__sm90_finish4 packed as two pairs of 16-bit D. Not inlined: one copy serves all BN / 2 quads of a tile
 * (code size is what matters). COPY 1: the 128-row ping-pong kernels' own copy (a routine's registers are
 * allocated for its tightest caller; theirs hold BN accumulators across the call, and would make the shared copy
 * spill). */
template <int COPY>
static __device__ __noinline__ uint2 cml__sm90_finish_quad(const cml__gemm_epi *e, float s, float a0, float a1,
                                                           float a2, float a3, long long m, long long n) {
    float z[4];
    cml__sm90_finish4(e, s, a0, a1, a2, a3, m, n, z);
    const bool bf = e->d_dtype == CML_BF16;
    return make_uint2(cml__sm90_pack2(bf, z[0], z[1]), cml__sm90_pack2(bf, z[2], z[3]));
}

/* What a fragment quad of the TMA epilogue becomes (cml__sm90_tma_epilogue), decided once a tile:
 * the plain z = s * acc (no bias, no activation) into bf16 with s == 1 (GPT-2's GEMMs: no
 * multiply), into bf16 with s != 1, into f16; or everything else (bias, ReLU/GELU) through
 * cml__sm90_finish_quad. */
enum { CML_SM90_Z_BF16 = 0, CML_SM90_Z_BF16_SCALED, CML_SM90_Z_F16_SCALED, CML_SM90_Z_FINISH };

/* One round's blocks c0.. of the TMA epilogue into shared memory (stmatrix; OC = 64 columns a block in the 128-byte
 * swizzle, see cml__sm90_tma_epilogue, or 32 in the 64-byte one), each quad as Z (CML_SM90_Z_*) says: a compile-time
 * choice, so a quad is its few conversions and one stmatrix, with no branch and no code of the other kinds. */
template <int BN, int NBUF, int Z, int COPY, int OC = CML_SM90_OUT_COLS>
static __device__ __forceinline__ void cml__sm90_stage_blocks(const cml__gemm_epi *e, const float *acc,
                                                              uint8_t *blocks, int c0, int warp, int lane, int row0,
                                                              int col0, float s) {
    constexpr int NB = BN / OC;
    /* the fragment quad a thread holds: rows frag_row and + 8; stmatrix: lane l addresses row
     * l % 8 of matrix l / 8 (matrices 0, 1: rows 0-7, 8-15 of the warp's 16 at 8 columns;
     * 2, 3: the same rows at the next 8 columns) */
    const int frag_row = 16 * warp + lane / 4, mi = lane / 8, st_row = 16 * warp + lane % 8 + 8 * (mi & 1);
    /* OC = 64: rows of 128 bytes, 16-byte chunk j of row R at j ^ (R % 8) (the 128-byte swizzle); OC = 32: rows of
     * 64 bytes, chunk j at j ^ (R / 2 % 4) (the 64-byte swizzle: address bits 7-8 into bits 4-5) */
    const uint32_t swz = (uint32_t)(OC == 64 ? st_row & 7 : (st_row >> 1) & 3);
#pragma unroll
    for (int c = c0; c < (c0 + NBUF < NB ? c0 + NBUF : NB); c++) {
        const uint32_t row_addr = cml__smem_addr(blocks + (c - c0) * (64 * OC * 2) + st_row * (OC * 2));
#pragma unroll
        for (int j = 0; j < OC / 16; j++) {
#if CML_SM90_DEV_EPI == 3 /* dev only: the TMA stores without the staging writes (D gets stale bytes) */
            break;
#endif
            const int q = c * (OC / 8) + 2 * j, r = 4 * q; /* quads q and q + 1 */
            uint2 lo, hi;
            if (Z == CML_SM90_Z_BF16) { /* s == 1: acc itself (cml__sm90_tma_epilogue says why exact) */
                lo = make_uint2(cml__sm90_pack2(true, acc[r], acc[r + 1]),
                                cml__sm90_pack2(true, acc[r + 2], acc[r + 3]));
                hi = make_uint2(cml__sm90_pack2(true, acc[r + 4], acc[r + 5]),
                                cml__sm90_pack2(true, acc[r + 6], acc[r + 7]));
            } else if (Z == CML_SM90_Z_BF16_SCALED || Z == CML_SM90_Z_F16_SCALED) {
                const bool bf = Z == CML_SM90_Z_BF16_SCALED;
                lo = make_uint2(cml__sm90_pack2(bf, s * acc[r], s * acc[r + 1]),
                                cml__sm90_pack2(bf, s * acc[r + 2], s * acc[r + 3]));
                hi = make_uint2(cml__sm90_pack2(bf, s * acc[r + 4], s * acc[r + 5]),
                                cml__sm90_pack2(bf, s * acc[r + 6], s * acc[r + 7]));
            } else {
                const long long m = (long long)row0 + frag_row, n = (long long)col0 + 8 * q + 2 * (lane % 4);
                lo = cml__sm90_finish_quad<COPY>(e, s, acc[r], acc[r + 1], acc[r + 2], acc[r + 3], m, n);
                hi = cml__sm90_finish_quad<COPY>(e, s, acc[r + 4], acc[r + 5], acc[r + 6], acc[r + 7], m, n + 8);
            }
            /* 16-byte chunk 2j (+1 for matrices 2, 3) of the row, XOR the row's index in its 8-row atom */
            const uint32_t a = row_addr + ((((uint32_t)(2 * j + (mi >> 1))) ^ swz) << 4);
            asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(lo.x),
                         "r"(lo.y), "r"(hi.x), "r"(hi.y)
                         : "memory");
        }
    }
}

/* cml__sm90_finish4 for f32 D. Not inlined (code size). */
static __device__ __noinline__ float4 cml__sm90_finish_quad_f32(const cml__gemm_epi *e, float s, float a0, float a1,
                                                                float a2, float a3, long long m, long long n) {
    float z[4];
    cml__sm90_finish4(e, s, a0, a1, a2, a3, m, n, z);
    return make_float4(z[0], z[1], z[2], z[3]);
}

/* Block c (columns 32c..32c + 31 of this consumer's 64 x BN) of f32 D into the 64 x 32 staging block at
 * shared address blk (rows of 128 bytes, 128-byte swizzle: 16-byte chunk j of row R at chunk j ^ (R % 8)).
 * Fragment quad q = 4c + i holds rows frag_row (+8), columns 8i + 2 (lane % 4) (+1) of the block: one
 * 8-byte store a row, chunk 2i + (lane % 4) / 2, half lane % 2. A warp's store covers 8 rows x 32 bytes:
 * two wavefronts, the least for 256 bytes. Z: CML_SM90_Z_BF16_SCALED (z = s * acc; also for s == 1, so
 * that D's bits are the general path's alpha * acc whatever the accumulator holds) or CML_SM90_Z_FINISH. */
template <int Z>
static __device__ __forceinline__ void cml__sm90_stage_f32(const cml__gemm_epi *e, const float *acc, uint32_t blk,
                                                           int c, int warp, int lane, int row0, int col0, float s) {
    const int frag_row = 16 * warp + lane / 4;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int q = 4 * c + i, r = 4 * q;
        float4 z;
        if (Z == CML_SM90_Z_FINISH)
            z = cml__sm90_finish_quad_f32(e, s, acc[r], acc[r + 1], acc[r + 2], acc[r + 3], (long long)row0 + frag_row,
                                          (long long)col0 + 8 * q + 2 * (lane % 4));
        else z = make_float4(s * acc[r], s * acc[r + 1], s * acc[r + 2], s * acc[r + 3]);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t R = (uint32_t)(frag_row + 8 * h), chunk = (uint32_t)(2 * i + (lane % 4) / 2);
            const uint32_t a = blk + R * 128 + ((chunk ^ (R & 7)) << 4) + 8 * (lane & 1);
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(a), "f"(h ? z.z : z.x), "f"(h ? z.w : z.y)
                         : "memory");
        }
    }
}

template <int Z>
static __device__ __forceinline__ void cml__sm90_stage_f32p(const cml__gemm_epi *e, const float *acc, uint32_t blk,
                                                            int c, int warp, int lane, int row0, int col0, float s);

/* The TMA-store epilogue for f32 D (tf32 launches): BN / 32 blocks of 64 x 32 f32
 * (8 KB each, the 16-bit path's block size) through two of this consumer's staging buffers in turn:
 * a block is written while the store of the one before still reads its buffer (bulk_wait_read<1>
 * waits only for the store two blocks back, which used the same buffer; BN / 32 is even, so a tile's
 * first block finds the last tile's second-to-last store done too). PERM: the non-transposed RS launch's
 * fragment rows, permuted (cml__sm90_stage_f32p). */
template <int BN, int NBUF, bool PERM = false>
static __device__ __forceinline__ void cml__sm90_tma_epilogue_f32(const cml__gemm_epi *e, const CUtensorMap *map_d,
                                                                  const float *acc, uint8_t *blocks, int consumer,
                                                                  bool leader, int warp, int lane, int row0, int col0,
                                                                  int batch) {
    static_assert(NBUF >= 2 && (BN / 32) % 2 == 0, "two 8 KB staging buffers a consumer, an even block count");
    constexpr int NB = BN / 32;
    float s = e->alpha;
    if (e->a_scale_mode == CML_SCALE_TENSOR) s *= e->a_scale[0];
    if (e->b_scale_mode == CML_SCALE_TENSOR) s *= e->b_scale[0];
    const bool finish = e->bias || e->act != CML_EPILOGUE_NONE;
    const uint32_t base = cml__smem_addr(blocks);
#pragma unroll
    for (int c = 0; c < NB; c++) {
        const uint32_t blk = base + (uint32_t)(c & 1) * CML_SM90_OUT_BYTES;
        if (leader) cml__bulk_wait_read<1>(); /* the store of block c - 2 (same buffer) is done reading */
        cml__sm90_consumer_sync(consumer);
        if constexpr (PERM) {
            if (finish) cml__sm90_stage_f32p<CML_SM90_Z_FINISH>(e, acc, blk, c, warp, lane, row0, col0, s);
            else cml__sm90_stage_f32p<CML_SM90_Z_BF16_SCALED>(e, acc, blk, c, warp, lane, row0, col0, s);
        } else {
            if (finish) cml__sm90_stage_f32<CML_SM90_Z_FINISH>(e, acc, blk, c, warp, lane, row0, col0, s);
            else cml__sm90_stage_f32<CML_SM90_Z_BF16_SCALED>(e, acc, blk, c, warp, lane, row0, col0, s);
        }
        cml__fence_proxy_async_smem();
        cml__sm90_consumer_sync(consumer);
        if (leader) {
            cml__tma_store_3d(map_d, blocks + (c & 1) * CML_SM90_OUT_BYTES, col0 + 32 * c, row0, batch);
            cml__bulk_commit();
        }
    }
}

/* What the TMA epilogue of 16-bit D decides once a tile: the scale s (alpha times the tensor scales) and flags (1: a
 * bias or an activation to apply, 2: f16 D). A grouped launch's producer works it out ahead, off the consumers' path
 * (the tile slots), where its loads of the problem's fields and scales would otherwise wait at the tile's end. */
typedef struct {
    float s;
    int flags;
} cml__sm90_head;

static __device__ __forceinline__ cml__sm90_head cml__sm90_head_of(const cml__gemm_epi *e) {
    float s = e->alpha;
    if (e->a_scale_mode == CML_SCALE_TENSOR) s *= e->a_scale[0];
    if (e->b_scale_mode == CML_SCALE_TENSOR) s *= e->b_scale[0];
    return {s, (e->bias || e->act != CML_EPILOGUE_NONE ? 1 : 0) | (e->d_dtype != CML_BF16 ? 2 : 0)};
}

/* Stores this consumer's finished 64 x BN block of D (rows row0.., columns col0..) from the
 * accumulators, 64 columns a block: the values go (in D's dtype) into shared memory in the
 * 128-byte swizzle by stmatrix (four 8 x 8 matrices of 16-bit values a warp instruction), then
 * one thread hands the blocks to TMA stores, which run on under the next tile's main loop. The
 * blocks go NBUF at a time (every block of the tile at once where shared memory allows,
 * cml__sm90_smem::out_bufs): one barrier pair and one proxy fence a round, because the
 * epilogue runs while the tensor cores idle (on 8192 x 768 x 768 the tile's epilogue costs
 * about as much as a third of its main loop: dev/gemm_sm90/README.md, session 5). Rows and
 * columns outside D are dropped by TMA. The host takes this path only for z = alpha * sa * sb
 * * acc (+ bias) with ReLU/GELU or none, and 16-bit D (cml__sm90_tma_store_ok).
 * What a quad becomes (CML_SM90_Z_*) is decided once, before the rounds; a round takes one branch
 * to its copy of the staging code (one copy of the whole round loop per kind instead cost the
 * k-block loop its uniform registers: 41 -> 57 instructions, dev/gemm_sm90/README.md, session 10).
 * With s == 1, bf16 stores cvt(acc) instead of
 * cvt(1.0f * acc), the same bits: x * 1.0f == x exactly for every x that is not NaN (this library
 * is built without flush to zero, so subnormals stay), and the accumulators never hold a
 * signalling NaN (the one input a multiply by 1 would change, by quieting it): they are results of
 * the tensor cores' arithmetic (wgmma from zero) or of the split-K gather's adds, and arithmetic
 * returns only quiet NaNs (the canonical one on this hardware), which the multiply passes through;
 * the conversion then sees the same bits either way. */
template <int BN, int NBUF, int KIND, int COPY = 0, int OC = CML_SM90_OUT_COLS>
static __device__ __forceinline__ void cml__sm90_tma_epilogue(const cml__gemm_epi *e, const CUtensorMap *map_d,
                                                              const float *acc, uint8_t *blocks, int consumer,
                                                              bool leader, int warp, int lane, int row0, int col0,
                                                              int batch, cml__sm90_head given = {0.0f, -1}) {
    if constexpr (KIND == CML_SM90_TF32)
        if (e->d_dtype == CML_F32) { /* tf32 with f32 D (gemm_sm90.cu) */
            cml__sm90_tma_epilogue_f32<BN, NBUF>(e, map_d, acc, blocks, consumer, leader, warp, lane, row0, col0,
                                                 batch);
            return;
        }
    constexpr int NB = BN / OC;
    const cml__sm90_head h = given.flags >= 0 ? given : cml__sm90_head_of(e);
    const float s = h.s;
    /* flags, not a kind number (which ptxas turns into a jump table: a constant load a round); the
     * GPT-2 kind first, so that a round's staging is one test away */
    const bool finish = h.flags & 1, f16 = h.flags & 2;
    const bool copy = !finish && !f16 && s == 1.0f;
#pragma unroll
    for (int c0 = 0; c0 < NB; c0 += NBUF) {
        if (leader) cml__bulk_wait_read<0>(); /* every earlier store is done reading its block */
        cml__sm90_consumer_sync(consumer);
        if (copy)
            cml__sm90_stage_blocks<BN, NBUF, CML_SM90_Z_BF16, COPY, OC>(e, acc, blocks, c0, warp, lane, row0, col0, s);
        else if (finish)
            cml__sm90_stage_blocks<BN, NBUF, CML_SM90_Z_FINISH, COPY, OC>(e, acc, blocks, c0, warp, lane, row0, col0, s);
        else if (f16)
            cml__sm90_stage_blocks<BN, NBUF, CML_SM90_Z_F16_SCALED, COPY, OC>(e, acc, blocks, c0, warp, lane, row0, col0,
                                                                              s);
        else
            cml__sm90_stage_blocks<BN, NBUF, CML_SM90_Z_BF16_SCALED, COPY, OC>(e, acc, blocks, c0, warp, lane, row0,
                                                                               col0, s);
        cml__fence_proxy_async_smem();
        cml__sm90_consumer_sync(consumer);
#if CML_SM90_DEV_EPI != 2 /* dev only (2): the staging writes without the TMA stores */
        if (leader) {
#pragma unroll
            for (int c = c0; c < (c0 + NBUF < NB ? c0 + NBUF : NB); c++)
                cml__tma_store_3d(map_d, blocks + (c - c0) * (64 * OC * 2), col0 + c * OC, row0, batch);
            cml__bulk_commit();
        }
#endif
    }
}

/* Split K: this consumer's 64 x BN partial goes to its slot (float4 i of thread t at i * 128 + t:
 * a warp's stores are contiguous); returns, the same in every thread, whether this split arrived
 * last, and then leaves in acc the sum of all splits' partials in split order. */
template <int BN>
static __device__ __forceinline__ bool cml__sm90_split_gather(float *acc, float *slots, int split, int splits,
                                                              int *arrival, int *last_word, int consumer, bool leader) {
    const int t = threadIdx.x % 128;
    float4 *mine = (float4 *)(slots + (size_t)split * 64 * BN);
#pragma unroll
    for (int i = 0; i < BN / 8; i++) __stcg(&mine[i * 128 + t], make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
    cml__sm90_consumer_sync(consumer); /* every thread's partial is written */
    if (leader) {
        /* one acquire-release count-in: releases the warpgroup's partial (its stores are ordered
         * before it by the barrier above) and acquires the partials of the splits counted in before
         * (two __threadfence around a plain atomicAdd cost a MEMBAR.ALL.GPU each: session 20) */
        int before;
        asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;" : "=r"(before) : "l"(arrival) : "memory");
        *last_word = before == splits - 1;
        if (before == splits - 1) *arrival = 0; /* every split has counted in: 0 for the next launch */
    }
    cml__sm90_consumer_sync(consumer);
    const bool last = __shfl_sync(0xffffffffu, *(volatile int *)last_word, 0) != 0; /* warp-uniform */
    if (!last) return false;
#pragma unroll
    for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
    for (int s = 0; s < splits; s++) {
        const float4 *p = (const float4 *)(slots + (size_t)s * 64 * BN);
#pragma unroll
        for (int i = 0; i < BN / 8; i++) {
            const float4 v = __ldcg(&p[i * 128 + t]);
            acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
        }
    }
    return true;
}

/* Frees a stage: one arrival on its empty barrier (32-bit shared address) in every CTA of the cluster. */
static __device__ __forceinline__ void cml__sm90_release_at(uint32_t empty, int cluster) {
    if (cluster == 1) {
        cml__mbar_arrive_at(empty);
        return;
    }
    for (int cta = 0; cta < cluster; cta++) cml__mbar_arrive_cluster_at(empty, (uint32_t)cta);
}

/* The consumers' wgmma descriptors from low words. cml__wgmma_desc(addr, lbo, 1024) is
 * lo | hi << 32 with lo = addr / 16 | (lbo / 16) << 16 (start address in bits 0-13) and hi the
 * same for every operand (sbo = 1024, the 128-byte swizzle), for any shared address addr < 2^18
 * (228 KB of shared memory). Stage bases and k offsets are multiples of 16, so lo(addr) + off / 16
 * = lo(addr + off) while addr + off < 2^18 (the start field never carries into lbo's): the
 * descriptor of stage s, k-step k is cml__sm90_desc(lo(base) + (s * stage_bytes + k_off) / 16),
 * the same 64 bits as cml__wgmma_desc(base + s * stage_bytes + k_off, lbo, 1024). */
static __device__ __forceinline__ uint32_t cml__sm90_desc_lo(uint32_t addr, uint32_t lbo) {
    return (uint32_t)cml__wgmma_desc(addr, lbo, 1024);
}
static __device__ __forceinline__ uint64_t cml__sm90_desc(uint32_t lo) {
    return (cml__wgmma_desc(0, 0, 1024) & 0xFFFFFFFF00000000ull) | lo;
}
/* B's descriptor: the same, or for 32-column N-major blocks sbo = 8 rows of 64 bytes, the 64-byte swizzle */
template <int BN, int TRANS_B, int CN>
static __device__ __forceinline__ uint64_t cml__sm90_desc_b(uint32_t lo) {
    if constexpr (cml__sm90_b_blocks<BN, TRANS_B, CN>::swizzle == 2)
        return ((uint64_t)(8 * 64 / 16) << 32) | ((uint64_t)2 << 62) | lo;
    return cml__sm90_desc(lo);
}

/* The cluster tile a linear index names, in grouped order (group_m tile rows at a time):
 * tile row tm of the cluster tile (the kernel places its CTAs in it),
 * column tn, batch b. */
static __device__ __forceinline__ void cml__sm90_tile(int cluster_rows, int tiles_n, int group_m, int tile, int *tm,
                                                      int *tn, int *b) {
    int per_batch = cluster_rows * tiles_n;
    *b = tile / per_batch;
    int t = tile - *b * per_batch;
    int group_size = group_m * tiles_n;
    int first_m = (t / group_size) * group_m;
    int rows = min(cluster_rows - first_m, group_m);
    int in_group = t % group_size;
    *tm = first_m + in_group % rows;
    *tn = in_group / rows;
}

/* cml__sm90_tile for a launch that is not grouped (tiles_n: the cluster tiles' columns), by the host's divisors. */
static __device__ __forceinline__ void cml__sm90_tile_fast(const cml__sm90_problem *p, int tiles_n, int tile, int *tm,
                                                           int *tn, int *b) {
    *b = cml__fast_div_q(tile, p->div_batch);
    const int t = tile - *b * p->cluster_rows * tiles_n;
    const int group = cml__fast_div_q(t, p->div_group);
    const int first_m = group * p->group_m, in_group = t - group * p->group_m * tiles_n;
    const bool last = p->cluster_rows - first_m < p->group_m;
    const int rows = last ? p->cluster_rows - first_m : p->group_m;
    *tn = cml__fast_div_q(in_group, last ? p->div_last_m : p->div_group_m);
    *tm = first_m + in_group - *tn * rows;
}

/* Stores 16 bytes into this CTA's shared memory at p as an asynchronous write that completes on the mbarrier at
 * 32-bit shared address bar (its 16 bytes counted by the barrier's expect-tx), as the TMA loads do. */
static __device__ __forceinline__ void cml__st_async_v4(void *p, int x, int y, int z, int w, uint32_t bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                     cml__smem_addr(p)),
                 "r"(x), "r"(y), "r"(z), "r"(w), "r"(bar)
                 : "memory");
}

/* The producer, at a grouped launch's switch to problem q: the lines of q's epilogue and tile fields, and of its
 * tensor scales, into this SM's L1, so that the consumers' reads of them at the tile's end hit there. */
static __device__ __forceinline__ void cml__sm90_prefetch_epi(const cml__sm90_group *q) {
    const char *first = (const char *)&q->epi, *last = (const char *)(&q->tile_end + 1);
    for (const char *p = first; p < last; p += 64) asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
    asm volatile("prefetch.global.L1 [%0];" ::"l"(last - 1));
    if (q->epi.a_scale) asm volatile("prefetch.global.L1 [%0];" ::"l"(q->epi.a_scale));
    if (q->epi.b_scale) asm volatile("prefetch.global.L1 [%0];" ::"l"(q->epi.b_scale));
}

/* Where linear cluster tile `tile` lies: its problem *g (grouped launches; tiles are visited
 * in increasing order, so *g only moves forward), tile coordinates, the batch index of its
 * output (with split K: batch * splits + split), and its K blocks [*k_first, + *k_blocks). GROUPED: the launch's
 * problems are `groups` (the grouped launch's kernel instance). */
template <int CN, bool GROUPED>
static __device__ __forceinline__ void cml__sm90_locate(const cml__sm90_problem *p, const cml__sm90_group *groups,
                                                        int tile, int *g, int *tm, int *tn, int *b, int *k_first,
                                                        int *k_blocks) {
    *k_first = 0;
    if constexpr (!GROUPED) {
        cml__sm90_tile_fast(p, (p->tiles_n + CN - 1) / CN, tile, tm, tn, b);
        *k_blocks = p->k_blocks;
        if (p->splits > 1) {
            *k_first = (*b - cml__fast_div_q(*b, p->div_splits) * p->splits) * p->split_kb;
            *k_blocks = min(p->split_kb, p->k_blocks - *k_first);
        }
    } else {
        while (groups[*g].tile_end <= tile) (*g)++;
        const cml__sm90_group *q = &groups[*g];
        const int start = *g > 0 ? groups[*g - 1].tile_end : 0;
        cml__sm90_tile(q->cluster_rows, q->tiles_n, p->group_m, tile - start, tm, tn, b);
        *k_blocks = q->k_blocks;
    }
}

/* ---- tf32 NN: the N-major operand from registers (wgmma RS), D^T = B^T A^T (dev/gemm_sm90/README.md,
 * "Session 13 (helper h13b)") ----
 * wgmma reads tf32 from shared memory only K-major. For D = A B with B stored K x N (N-major) the host
 * launches the swapped problem D^T = B^T A^T: the kernel's "A" (rows = N of D) is B's tile, loaded by TMA
 * as stored (BM / 32 boxes of 32 N columns x 32 K rows, 128-byte swizzle: K row k of box j at j * 4096 +
 * k * 128, N column n's 16-byte chunk n / 4 at chunk ^ (k % 8)), read into the tf32 m64k8 register
 * fragment by each consumer (a[0] row g, K t; a[1] row g + 8, K t; a[2] row g, K t + 4; a[3] row g + 8,
 * K t + 4 of its warp's 16 rows; g = lane / 4, t = lane % 4); the kernel's "B" (rows = M of D) is A's tile,
 * K-major as stored. No workspace transpose. The tensor cores multiply the same tf32 pairs and every
 * output's K blocks are added in the same order as with B transposed first.
 * Which N column a fragment row holds is ours to choose (the accumulator's rows follow it, and the
 * epilogue writes them back where they belong): warp w takes the 32-column box 2 * consumer + w / 2 and,
 * in it, 16-byte chunks {x, x ^ 5} for lanes 0-15 and {x + 1, (x + 1) ^ 5} for lanes 16-31 (x = 2 (w % 2));
 * lane g's rows g and g + 8 are the neighbouring columns 4 chunk + 2 (g % 2) and + 1, so a[0], a[1] (and
 * a[2], a[3]) are one 8-byte load. Conflict-free: a half warp's 16 loads hit chunks {x, x ^ 5} ^ t for
 * t = 0..3 (K row t, or t + 4 for a[2], a[3]: ^ 4), all 8 chunks, 2 lanes' 8 bytes in each; and in the
 * epilogue's transposed staging (row m with m % 8 = 2t + e, the same chunks ^ (2t + e)) likewise. */

/* The 16-byte chunk (0..7) of its 32-column box that lane g = lane / 4 of warp `warp` reads (above). */
static __device__ __forceinline__ uint32_t cml__sm90_rs_chunk(int warp, int g) {
    const uint32_t pair = (uint32_t)(g >> 1), x = 2u * (uint32_t)(warp & 1) + (pair >> 1);
    return (pair & 1u) ? x ^ 5u : x;
}

/* One tf32 wgmma of K 8 with A from registers. */
template <int BN>
static __device__ __forceinline__ void cml__sm90_mma_rs(float *acc, const uint32_t *a, uint64_t db) {
    if (BN == 256) cml__wgmma_m64n256k8_tf32_rs(acc, a, db, 1);
    else cml__wgmma_m64n128k8_tf32_rs(acc, a, db, 1);
}

/* The consumer's ring position (cml__sm90_gemm_kernel's k-block loop: stage s, parity, prev, it). */
typedef struct cml__sm90_ring {
    int s, prev, it;
    uint32_t parity;
} cml__sm90_ring;

/* One k-block of the RS loop into fragment set f (16 registers: 4 wgmmas of 4). The caller alternates
 * two sets: a set is written again only after the k-block that read it has retired (wgmma_wait<1> of
 * the k-block after it), as wgmma's A registers must not change while it runs. frag0 / frag1: this
 * thread's shared addresses of a[0..1] / a[2..3] in stage 0, k-step 0 (+1024 bytes a k-step of 8 K rows). */
template <int BN, int STAGES, int CLUSTER, bool WRAP, int A_BYTES, int B_BYTES>
static __device__ __forceinline__ void cml__sm90_rs_kblock(float *acc, uint32_t *f, cml__sm90_ring *r, bool first,
                                                           uint32_t full0, uint32_t empty0, uint32_t frag0,
                                                           uint32_t frag1, uint32_t b_lo, bool leader) {
    if constexpr (!WRAP) r->s = r->it % STAGES, r->parity = (uint32_t)(r->it / STAGES) & 1u;
    cml__mbar_wait_at(full0 + 8 * r->s, r->parity);
    const uint32_t off = (uint32_t)r->s * A_BYTES;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(f[4 * k]), "=r"(f[4 * k + 1]) : "r"(frag0 + off + 1024 * k));
        asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];"
                     : "=r"(f[4 * k + 2]), "=r"(f[4 * k + 3])
                     : "r"(frag1 + off + 1024 * k));
    }
    const uint32_t db = b_lo + (uint32_t)r->s * (B_BYTES >> 4);
    cml__wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; k++) cml__sm90_mma_rs<BN>(acc, &f[4 * k], cml__sm90_desc(db + k * (32 >> 4)));
    cml__wgmma_commit();
    cml__wgmma_wait<1>();
    cml__wgmma_reg_fence<BN / 2>(acc);
    if (!first && leader) cml__sm90_release_at(empty0 + 8 * r->prev, CLUSTER);
    r->prev = r->s;
    r->it++;
    if (WRAP && ++r->s == STAGES) {
        r->s = 0;
        r->parity ^= 1;
    }
}

/* z for D(m, n) and D(m, n + 1) of f32 D (cml__sm90_finish_quad_f32's arithmetic: s * acc, bias, activation).
 * Not inlined (code size). */
static __device__ __noinline__ float2 cml__sm90_finish_pair_f32t(const cml__gemm_epi *e, float s, float a0, float a1,
                                                                 long long m, long long n) {
    float z[2] = {s * a0, s * a1};
    if (e->bias) {
        const bool per_row = e->bias_axis == CML_BIAS_PER_ROW;
        for (int j = 0; j < 2; j++) {
            const long long i = per_row ? m : n + j;
            if (i < (per_row ? e->M : e->N)) z[j] += cml__gemm_ld(e->bias, e->d_dtype, i);
        }
    }
    for (int j = 0; j < 2; j++) z[j] = cml__gemm_epi_act(e->act, z[j], 0.0f);
    return make_float2(z[0], z[1]);
}

/* Block c of the transposed epilogue: D rows m0 + 32c.. + 31 (the accumulators' columns 32c..) x this consumer's
 * 64 D columns n0.. (its accumulator rows), as two 32 x 32 f32 sub-blocks at blk (columns n0..n0 + 31) and blk +
 * 4096 (n0 + 32..), rows of 128 bytes in the 128-byte swizzle. Warp w writes sub-block w / 2: for quad q and
 * e, D(m, n), D(m, n + 1) with m = 32c + 8 (q - 4c) + 2t + e, n = its fragment rows' columns: one 8-byte store. */
template <int Z>
static __device__ __forceinline__ void cml__sm90_stage_f32t(const cml__gemm_epi *e, const float *acc, uint32_t blk,
                                                            int c, int warp, int lane, long long m0, long long n,
                                                            float s) {
    const int g = lane >> 2, t = lane & 3;
    const uint32_t chunk = cml__sm90_rs_chunk(warp, g);
    const uint32_t sub = blk + 4096u * (uint32_t)(warp >> 1) + 8u * (uint32_t)(g & 1);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int q = 4 * c + i;
#pragma unroll
        for (int x = 0; x < 2; x++) {
            const int row = 8 * i + 2 * t + x; /* row % 8 == 2t + x */
            float2 z;
            if (Z == CML_SM90_Z_FINISH)
                z = cml__sm90_finish_pair_f32t(e, s, acc[4 * q + x], acc[4 * q + 2 + x], m0 + 32 * c + row, n);
            else z = make_float2(s * acc[4 * q + x], s * acc[4 * q + 2 + x]);
            const uint32_t a = sub + (uint32_t)row * 128 + ((chunk ^ (uint32_t)(2 * t + x)) << 4);
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(a), "f"(z.x), "f"(z.y) : "memory");
        }
    }
}

/* Block c (columns 32c..32c + 31 of this consumer's 64 x BN) of the non-transposed RS launch (A from registers,
 * D = A B): cml__sm90_stage_f32 with the fragment rows permuted as cml__sm90_rs_chunk says (row g -> R0, g + 8 ->
 * R0 + 1). Stores stay conflict-free: a half warp's rows have (R % 8) / 2 = 2 (chunk % 2) + g % 2: four values, each with 2 chunks. */
template <int Z>
static __device__ __forceinline__ void cml__sm90_stage_f32p(const cml__gemm_epi *e, const float *acc, uint32_t blk,
                                                            int c, int warp, int lane, int row0, int col0, float s) {
    const int g = lane >> 2, t = lane & 3;
    const int R0 = 32 * (warp >> 1) + 4 * (int)cml__sm90_rs_chunk(warp, g) + 2 * (g & 1);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int q = 4 * c + i, r = 4 * q;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t R = (uint32_t)(R0 + h), chunk = (uint32_t)(2 * i + t / 2);
            float2 z;
            if (Z == CML_SM90_Z_FINISH)
                z = cml__sm90_finish_pair_f32t(e, s, acc[r + 2 * h], acc[r + 2 * h + 1], (long long)row0 + R,
                                               (long long)col0 + 8 * q + 2 * t);
            else z = make_float2(s * acc[r + 2 * h], s * acc[r + 2 * h + 1]);
            const uint32_t a = blk + R * 128 + ((chunk ^ (R & 7)) << 4) + 8 * (t & 1);
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(a), "f"(z.x), "f"(z.y) : "memory");
        }
    }
}

/* The TMA-store epilogue of the swapped (RS) launch: this consumer's accumulators are D^T's rows n0.. (64 D
 * columns, in the fragment order above) x BN columns m0.. (D rows). BN / 32 blocks of 32 D rows x 64 D
 * columns (8 KB, two 32 x 32 boxes of map_d) alternate between two staging buffers as in
 * cml__sm90_tma_epilogue_f32 (one bulk group a block). */
template <int BN, int NBUF>
static __device__ __forceinline__ void cml__sm90_tma_epilogue_f32t(const cml__gemm_epi *e, const CUtensorMap *map_d,
                                                                   const float *acc, uint8_t *blocks, int consumer,
                                                                   bool leader, int warp, int lane, int n0, int m0,
                                                                   int batch) {
    static_assert(NBUF >= 2 && (BN / 32) % 2 == 0, "two 8 KB staging buffers a consumer, an even block count");
    constexpr int NB = BN / 32;
    float s = e->alpha;
    if (e->a_scale_mode == CML_SCALE_TENSOR) s *= e->a_scale[0];
    if (e->b_scale_mode == CML_SCALE_TENSOR) s *= e->b_scale[0];
    const bool finish = e->bias || e->act != CML_EPILOGUE_NONE;
    const uint32_t base = cml__smem_addr(blocks);
    const int g = lane >> 2;
    const long long n = (long long)n0 + 32 * (warp >> 1) + 4 * cml__sm90_rs_chunk(warp, g) + 2 * (g & 1);
#pragma unroll
    for (int c = 0; c < NB; c++) {
        const uint32_t blk = base + (uint32_t)(c & 1) * CML_SM90_OUT_BYTES;
        if (leader) cml__bulk_wait_read<1>(); /* the stores of block c - 2 (same buffer) are done reading */
        cml__sm90_consumer_sync(consumer);
        if (finish) cml__sm90_stage_f32t<CML_SM90_Z_FINISH>(e, acc, blk, c, warp, lane, m0, n, s);
        else cml__sm90_stage_f32t<CML_SM90_Z_BF16_SCALED>(e, acc, blk, c, warp, lane, m0, n, s);
        cml__fence_proxy_async_smem();
        cml__sm90_consumer_sync(consumer);
        if (leader) {
            uint8_t *b = blocks + (c & 1) * CML_SM90_OUT_BYTES;
            cml__tma_store_3d(map_d, b, n0, m0 + 32 * c, batch);
            cml__tma_store_3d(map_d, b + 4096, n0 + 32, m0 + 32 * c, batch);
            cml__bulk_commit();
        }
    }
}

/* One k-block's loads: A's and B's boxes at K element k0 of the tile whose first row and column are m0 and n0 (batch
 * ba of A, bb of B) into the stage at shared addresses sa and sb, completing on the barrier at fb; block_bytes is
 * one 64-column block of an M/N-major operand. In a cluster each CTA loads its share of the blocks that the CTAs of
 * a tile row (A) or column (B) have in common and multicasts it to them. Used by the producer's loop and by the
 * first stages' early issue (gemm_sm90_kernel). */
template <int BN, int BM, int KIND, int TRANS_A, int TRANS_B, int CLUSTER, int CN>
static __device__ __forceinline__ void cml__sm90_load_kblock(const CUtensorMap *ma, const CUtensorMap *mb, uint32_t sa,
                                                             uint32_t sb, uint32_t fb, uint32_t block_bytes, int m0,
                                                             int n0, int k0, int ba, int bb, int rank, int rm, int rn) {
    constexpr int CM = CLUSTER / CN;
    if (TRANS_A) { /* A stored K x M: 128-byte column blocks (64 16-bit, 32 tf32) of elems_per_row K rows */
        constexpr int MN = KIND == CML_SM90_TF32 ? 32 : 64; /* tf32: the RS launch (cml__sm90_rs_chunk) */
#pragma unroll
        for (int j = 0; j < BM / MN; j++) {
            if (CN == 1) cml__tma_load_3d_at(sa + j * block_bytes, ma, fb, m0 + MN * j, k0, ba);
            else if (j % CN == rn) /* the tile row's CTAs: rm, rm + CM */
                cml__tma_load_3d_multicast_at(sa + j * block_bytes, ma, fb, m0 + MN * j, k0, ba,
                                              (1u << rm) | (1u << (rm + CM)));
        }
    } else {
        cml__tma_load_3d_at(sa, ma, fb, k0, m0, ba);
    }
    if (TRANS_B) { /* B stored K x N (op N): N-major blocks (cml__sm90_b_blocks), shared round-robin */
        typedef cml__sm90_b_blocks<BN, TRANS_B, CN> bb_t;
#pragma unroll
        for (int j = 0; j < bb_t::count; j++) {
            if (j % CM != rm) continue;
            if (CLUSTER > 1) /* the tile column's CTAs */
                cml__tma_load_3d_multicast_at(sb + j * bb_t::bytes, mb, fb, n0 + bb_t::cols * j, k0, bb,
                                              ((1u << CM) - 1) << (rn * CM));
            else cml__tma_load_3d_at(sb + j * bb_t::bytes, mb, fb, n0 + bb_t::cols * j, k0, bb);
        }
    } else if (CLUSTER > 1) { /* K-major: this CTA's share of the B rows */
        const int rows = BN / CLUSTER;
        cml__tma_load_3d_multicast_at(sb + rank * rows * CML_SM90_ROW_BYTES, mb, fb, k0,
                                      n0 + rank * rows, bb, (1u << CLUSTER) - 1);
    } else {
        cml__tma_load_3d_at(sb, mb, fb, k0, n0, bb);
    }
}

/* TRANS_A / TRANS_B: 0 = the operand K-major in shared memory, 1 = M- or N-major (wgmma's transpose, 16-bit).
 * tf32 with TRANS_A (the RS kernels: A from registers, cml__sm90_rs_chunk; TRANS_B = 0): 1 = the launch computes
 * D^T = B^T A^T (its A is D's B: the transposed epilogue), 2 = D itself (its A is D's A stored K x M).
 * PINGPONG = 0 (cooperative): both consumers share each 128-row tile, 64 rows each.
 * PINGPONG = 1: tiles of 64 rows; the consumers take alternate tiles, so that one's
 * epilogue overlaps the other's main loop (the stages of a tile belong to one consumer).
 * PINGPONG = 2: the same with tiles of 128 rows: a consumer issues two m64 wgmmas a K step into two
 * 64 x BN accumulator halves (BN registers a thread: BN <= 192; tf32 only without TRANS_A, RS) and stores both. The producer's
 * loads are the cooperative kernel's. Launched only without split K and with TMA stores of D (gemm_sm90.cu,
 * sm90_run): its general epilogue is not compiled, so that the shared store routine keeps its registers.
 * GROUPED: the grouped launch's instance (prob.groups); the others compile that code out (instruction fetch). */
template <int BN, int STAGES, int KIND, int TRANS_A, int TRANS_B, int CLUSTER, int PINGPONG = 0, int CN = 1,
          bool GROUPED = false>
static __global__ void __launch_bounds__(CML_SM90_THREADS, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const __grid_constant__ CUtensorMap map_d, const __grid_constant__ cml__gemm_epi epi,
                     const __grid_constant__ cml__sm90_problem prob,
                     const __grid_constant__ cml__sm90_param_groups<GROUPED ? CML_SM90_PARAM_GROUPS : 0> pg) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int BM = PINGPONG == 1 ? 64 : CML_SM90_BM; /* rows of a tile */
    typedef cml__sm90_smem<BN, STAGES, PINGPONG == 1 ? 64 : CML_SM90_BM, cml__sm90_b_blocks<BN, TRANS_B, CN>::stage_bytes>
        smem_t;
    static_assert(PINGPONG != 2 || BN <= 192, "128-row ping-pong tiles hold BN accumulators a thread");
    constexpr int ACC = PINGPONG == 2 ? BN : BN / 2; /* accumulators a thread */
    const int elems_per_row = CML_SM90_ROW_BYTES / cml__sm90_kind<KIND>::bytes; /* K elements per stage */
    /* a grouped launch's instance reads its problems from its parameters or global memory; every other instance has
     * that code compiled out, so that the producer's path to its first load holds no jumps over it
     * (dev/gemm_sm90/README.md, session 28) */
    const int n_groups = GROUPED ? prob.n_groups : 0;
    const cml__sm90_group *groups = NULL; /* in the parameters (pg) or in global memory (prob.groups) */
    if constexpr (GROUPED) groups = prob.groups ? prob.groups : pg.g;
    const bool global_groups = GROUPED && prob.groups;
    extern __shared__ uint8_t cml__sm90_smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)cml__sm90_smem_raw + 1023) & ~(uintptr_t)1023);
    uint8_t *stage_a = smem;
    uint8_t *stage_b = smem + STAGES * smem_t::a_bytes;
    float *epi_stage = (float *)(stage_b + STAGES * smem_t::b_bytes);
    uint64_t *full = (uint64_t *)((uint8_t *)epi_stage + smem_t::epi_region);
    uint64_t *empty = full + STAGES;
    int *split_last = (int *)(empty + STAGES); /* one word per consumer */
    int4 *slots = (int4 *)(split_last + 4);      /* GROUPED: two a stage (CML_SM90_SLOT_BYTES) */
    static_assert(!GROUPED || smem_t::total + CML_SM90_SLOT_BYTES(STAGES) <= CML_SM90_SMEM_MAX, "the slots fit");
    /* A cluster's CTAs take a block of CM x CN tiles (CN = 1: CLUSTER vertically adjacent tiles; CN = 2: 2 x 2,
     * the 160-wide tile with M-major A and N-major B only, gemm_sm90.cu's config_valid), rank = rn * CM + rm for
     * tile row rm and column rn of the block. The CTAs of a tile column share their B tile, those of a tile row
     * their A tile: each loads its share of the blocks and multicasts them to the others, so a stage may be refilled
     * only when the consumers of every CTA are done with it (all of them release it everywhere). */
    static_assert(CN == 1 || (CN == 2 && CLUSTER == 4 && TRANS_A && TRANS_B), "2 x 2 clusters: TN, 4 CTAs");
    constexpr int CM = CLUSTER / CN;
    const int rank = CLUSTER > 1 ? (int)cml__cluster_rank() : 0, rm = rank % CM, rn = rank / CM;

#if CML_SM90_DEV_TIMELINE
    if (threadIdx.x == 0) CML_SM90_TL_META(6, clock64());
#endif
    const int total = n_groups ? groups[n_groups - 1].tile_end
                               : prob.cluster_rows * ((prob.tiles_n + CN - 1) / CN) * prob.batch * max(prob.splits, 1);
    const int first = blockIdx.x / CLUSTER, step = gridDim.x / CLUSTER;
    /* EARLY: the thread that initializes the barriers also issues the first tile's first stages, before the CTA's
     * barrier and the warp roles' setup: a launch's first loads go out ~780 clocks sooner (the code on that path
     * comes from DRAM after an L2 flush; 1024^3 1.01-1.04x; dev/gemm_sm90/README.md, session 29). Single CTAs only:
     * a multicast into a peer needs the peer's barriers initialized, which only the cluster barrier below tells (each
     * CTA of a cluster loading its first stages whole instead measured 0.99-1.00x). */
    constexpr bool EARLY = CML_SM90_EARLY && CLUSTER == 1 && !GROUPED;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            cml__mbar_init(&full[s], 1);
            /* one arrival per consumer warpgroup that reads the stage, in every CTA of the cluster */
            cml__mbar_init(&empty[s], (PINGPONG ? 1 : 2) * CLUSTER);
        }
        cml__mbar_init_fence();
        if (EARLY && first < total) {
            cml__fence_proxy_async_smem(); /* the barriers' init before the bulk copies complete on them */
            int g = 0, tm, tn, b, k_first, k_blocks;
            cml__sm90_locate<CN, GROUPED>(&prob, groups, first, &g, &tm, &tn, &b, &k_first, &k_blocks);
            if (prob.splits > 1) b = cml__fast_div_q(b, prob.div_splits); /* the operands' batch */
#if CML_SM90_DEV_TIMELINE
            CML_SM90_TL_META(7, clock64());
            CML_SM90_TL(0, 6, clock64());
#endif
            const int ba = prob.a_batch_fixed ? 0 : b, bb = prob.b_batch_fixed ? 0 : b;
            const uint32_t a0 = cml__smem_addr(stage_a), b0 = cml__smem_addr(stage_b), full0 = cml__smem_addr(full);
            for (int kb = 0; kb < STAGES && kb < k_blocks; kb++) { /* the producer's loop goes on from there */
                cml__mbar_arrive_expect_tx_at(full0 + 8 * kb, smem_t::a_bytes + smem_t::b_bytes);
                cml__sm90_load_kblock<BN, BM, KIND, TRANS_A, TRANS_B, CLUSTER, CN>(
                    &map_a, &map_b, a0 + kb * smem_t::a_bytes, b0 + kb * smem_t::b_bytes, full0 + 8 * kb,
                    elems_per_row * CML_SM90_ROW_BYTES, tm * BM, tn * BN, (k_first + kb) * elems_per_row, ba, bb, 0, 0,
                    0);
            }
        }
    }
    /* the peer's barriers are initialized before anyone multicasts or arrives on them (relaxed: the
     * init fence publishes them; a release barrier would cost ~0.7 us a launch, session 20) */
    if (CLUSTER > 1) cml__cluster_sync_relaxed();
    else __syncthreads();
#if CML_SM90_DEV_TIMELINE
    if (threadIdx.x == 0) {
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        CML_SM90_TL_META(0, clock64());
        CML_SM90_TL_META(2, cml__sm90_gtimer());
        CML_SM90_TL_META(4, smid);
    }
#endif

    const int warpgroup = threadIdx.x / 128;
#if CML_SM90_DEV_TIMELINE /* the start-up in parts, slot 14 (dev/gemm_sm90/startup_parts.py) */
    if (threadIdx.x == 0) CML_SM90_TL(14, 0, clock64());
#endif
    if (warpgroup == 0) {
        cml__regs_dealloc<CML_SM90_PRODUCER_REGS>();
#if CML_SM90_DEV_TIMELINE
        if (threadIdx.x == 0) CML_SM90_TL(14, 1, clock64());
#endif
        /* one lane of warp 0 issues every load; elected rather than `threadIdx.x == 0` so that
         * ptxas knows only one lane runs the TMAs (cml__elect_one) */
        if (threadIdx.x < 32 && cml__elect_one()) {
            if (!n_groups) {
                cml__tma_prefetch_map(&map_a);
                cml__tma_prefetch_map(&map_b);
            }
#if CML_SM90_DEV_TIMELINE
            CML_SM90_TL(14, 2, clock64());
#endif
            /* the k-block path is the producer's throughput limit on the narrow TN tiles
             * (dev/gemm_sm90/README.md, "the TN producer"): 32-bit shared addresses computed
             * here once, and the ring position (stage s, the parity of empty[s]'s phase to wait
             * for) wrapped by compare instead of it % STAGES and it / STAGES. The loads, the
             * layout and the barriers are the same as the consumers expect. */
            const uint32_t full0 = cml__smem_addr(full), empty0 = cml__smem_addr(empty);
            const uint32_t a0 = cml__smem_addr(stage_a), b0 = cml__smem_addr(stage_b);
            const uint32_t block_bytes = elems_per_row * CML_SM90_ROW_BYTES; /* one 64-column block */
            /* round r of a stage waits for the consumers' release of round r - 1, parity (r - 1) & 1;
             * round 0 waits for parity 1, which a fresh barrier reports done at once */
            int s = 0;
            uint32_t parity = 1;
            int g = 0, acquired = -1;
#if CML_SM90_DEV_TIMELINE
            int tl_tile = 0;
#endif
            for (int tile = first; tile < total; tile += step) {
#if CML_SM90_DEV_TIMELINE
                const int tl_slot = tl_tile++;
#endif
                int tm, tn, b, k_first, k_blocks;
                cml__sm90_locate<CN, GROUPED>(&prob, groups, tile, &g, &tm, &tn, &b, &k_first, &k_blocks);
                if (prob.splits > 1) b = cml__fast_div_q(b, prob.div_splits); /* the operands' batch */
#if CML_SM90_DEV_TIMELINE
                if (tl_slot == 0 && !EARLY) CML_SM90_TL_META(7, clock64());
#endif
                const CUtensorMap *ma = n_groups ? &groups[g].map_a : &map_a;
                const CUtensorMap *mb = n_groups ? &groups[g].map_b : &map_b;
                if (n_groups && g != acquired) {
                    if (global_groups) { /* maps copied into global memory by the host */
                        cml__tma_map_acquire(ma);
                        cml__tma_map_acquire(mb);
                        if (CML_SM90_GROUP_SLOT) cml__sm90_prefetch_epi(&groups[g]);
                    }
                    acquired = g;
                }
                const int m0 = (tm * CM + rm) * BM, n0 = (tn * CN + rn) * BN;
                const int ba = prob.a_batch_fixed ? 0 : b, bb = prob.b_batch_fixed ? 0 : b;
                int kb = 0;
                if (EARLY && tile == first) { /* its first stages went out with the barriers' init */
                    kb = min(STAGES, k_blocks);
                    if (kb == STAGES) parity ^= 1;
                    else s = kb;
                }
                int k0 = (k_first + kb) * elems_per_row;
                for (; kb < k_blocks; kb++, k0 += elems_per_row) {
                    const uint32_t fb = full0 + 8 * s;
                    cml__mbar_wait_at(empty0 + 8 * s, parity);
#if CML_SM90_DEV_TIMELINE
                    if (kb == 0) CML_SM90_TL(tl_slot, 6, clock64());
#endif
#if CML_SM90_DEV_PRODUCER_SPIN > 0 /* dev builds only: producer headroom sweep (E1) */
                    for (const long long t0 = clock64(); clock64() - t0 < CML_SM90_DEV_PRODUCER_SPIN;) {
                    }
#endif
                    constexpr bool SLOT = GROUPED && CML_SM90_GROUP_SLOT;
                    cml__mbar_arrive_expect_tx_at(fb, smem_t::a_bytes + smem_t::b_bytes + (SLOT && kb == 0 ? 32 : 0));
                    if (SLOT && kb == 0) { /* the tile's place (its batch is 0) and epilogue head, for the consumers */
                        const cml__sm90_head h = cml__sm90_head_of(&groups[g].epi);
                        cml__st_async_v4(&slots[2 * s], g, tm, tn, k_blocks, fb);
                        cml__st_async_v4(&slots[2 * s + 1], __float_as_int(h.s), h.flags, 0, 0, fb);
                    }
                    cml__sm90_load_kblock<BN, BM, KIND, TRANS_A, TRANS_B, CLUSTER, CN>(
                        ma, mb, a0 + s * smem_t::a_bytes, b0 + s * smem_t::b_bytes, fb, block_bytes, m0, n0, k0, ba, bb,
                        rank, rm, rn);
#if CML_SM90_DEV_TIMELINE
                    if (kb == k_blocks - 1) CML_SM90_TL(tl_slot, 7, clock64());
#endif
                    if (++s == STAGES) {
                        s = 0;
                        parity ^= 1;
                    }
                }
            }
            /* No CTA may leave while its peer can still arrive on its barriers (its multicast into this
             * CTA's stages ends before: this CTA's consumers wait for every stage they read). Every
             * consumer frees every stage it read, so once the last fill of each stage has been freed by
             * the whole cluster, nothing more will come: wait for that here instead of a cluster barrier
             * at the end (whose release costs ~0.7 us a launch; session 20). */
            if (CLUSTER > 1)
#pragma unroll 1
                for (int i = 0; i < STAGES; i++) {
                    cml__mbar_wait_at(empty0 + 8 * s, parity);
                    if (++s == STAGES) {
                        s = 0;
                        parity ^= 1;
                    }
                }
        }
    } else {
        cml__regs_alloc<CML_SM90_CONSUMER_REGS>();
#if CML_SM90_DEV_TIMELINE
        if (threadIdx.x == 128) CML_SM90_TL(14, 3, clock64());
#endif
        const int consumer = warpgroup - 1;
        const bool leader = (threadIdx.x % 128) == 0;
        const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
        float acc[ACC];
        int g = 0, mine = 0, d_acquired = -1;
        /* The k-block path is on the critical path (dev/gemm_sm90/README.md, "the consumer loop"):
         * the barriers by 32-bit shared addresses, each wgmma's descriptors a low word built here once
         * plus constants (cml__sm90_desc), and the consumer index shuffled from lane 0, so that ptxas
         * sees it warp-uniform and keeps the descriptor words in uniform registers (no per-wgmma
         * R2UR). The ring position: stage s of the next k-block and the parity of the fill of full[s]
         * to wait for, wrapped by compare where STAGES is not a power of 2 (it % STAGES, it / STAGES
         * would be multiply-high divisions: measured 2-4% at 5 and 6 stages, session 9), else a mask
         * and a shift of the k-block count it (at 4 stages the wrap is 2 instructions shorter but
         * spills 4 bytes in the 256-wide cluster-2 kernels); prev, the stage of the k-block before,
         * is freed one k-block late. */
        constexpr bool WRAP = (STAGES & (STAGES - 1)) != 0;
        int s = 0, prev = STAGES - 1, it = 0;
        uint32_t parity = 0;
        const int cw = __shfl_sync(0xffffffffu, consumer, 0);
        const uint32_t full0 = cml__smem_addr(full), empty0 = cml__smem_addr(empty);
        const uint32_t block_bytes = elems_per_row * CML_SM90_ROW_BYTES; /* one M/N-major 64-column block */
        const uint32_t a_lo = cml__sm90_desc_lo(cml__smem_addr(stage_a) + (PINGPONG ? 0 : cw * 64 * CML_SM90_ROW_BYTES),
                                                TRANS_A ? block_bytes : 16);
        /* shuffled too: ptxas would otherwise rebuild it from the shared base every k-block (3 more) */
        const uint32_t b_lo = __shfl_sync(
            0xffffffffu, cml__sm90_desc_lo(cml__smem_addr(stage_b), TRANS_B ? cml__sm90_b_blocks<BN, TRANS_B, CN>::bytes : 16), 0);
        /* 32 bytes of K a wgmma: +32 bytes along a K-major row, or +16 K rows in an M/N-major block */
        const uint32_t step_a = (TRANS_A ? 16 * CML_SM90_ROW_BYTES : 32) >> 4;
        const uint32_t step_b = (TRANS_B ? 16 * cml__sm90_b_blocks<BN, TRANS_B, CN>::row_bytes : 32) >> 4;
        /* tf32 with A stored K x M: the swapped NN launch, A from registers (cml__sm90_rs_chunk) */
        constexpr bool RS = KIND == CML_SM90_TF32 && TRANS_A && !PINGPONG;
        uint32_t frag0 = 0, frag1 = 0;
        if constexpr (RS) {
            const int g = lane >> 2, t = lane & 3;
            const uint32_t chunk = cml__sm90_rs_chunk(warp, g);
            const uint32_t box = cml__smem_addr(stage_a) + (uint32_t)(2 * consumer + (warp >> 1)) * 4096u +
                                 8u * (uint32_t)(g & 1);
            frag0 = box + 128u * (uint32_t)t + ((chunk ^ (uint32_t)t) << 4);
            frag1 = box + 128u * (uint32_t)(t + 4) + ((chunk ^ (uint32_t)(t + 4)) << 4);
        }
        for (int tile = first; tile < total; tile += step, mine++) {
            int tm, tn, b, k_first, k_blocks;
            cml__sm90_head head = {0.0f, -1}; /* -1: the epilogue works it out */
            if (GROUPED && CML_SM90_GROUP_SLOT) { /* from the tile's first stage (the main loop's wait returns at once) */
                const int s0 = WRAP ? s : it % STAGES;
                cml__mbar_wait_at(full0 + 8 * s0, WRAP ? parity : (uint32_t)(it / STAGES) & 1u);
                const int4 place = slots[2 * s0], epi_head = slots[2 * s0 + 1];
                g = place.x, tm = place.y, tn = place.z, k_blocks = place.w, b = 0, k_first = 0;
                if constexpr (KIND != CML_SM90_TF32) /* its f32 D's epilogue works out its own (registers) */
                    head = {__int_as_float(epi_head.x), epi_head.y};
            } else {
                cml__sm90_locate<CN, GROUPED>(&prob, groups, tile, &g, &tm, &tn, &b, &k_first, &k_blocks);
            }
            if (PINGPONG && (mine & 1) != consumer) { /* the other consumer's tile: skip its stages */
                it += k_blocks;
                const int n = s + k_blocks;
                parity ^= (uint32_t)(n / STAGES) & 1u;
                s = n % STAGES;
                prev = (s + STAGES - 1) % STAGES;
                continue;
            }
            const cml__gemm_epi *ep = n_groups ? &groups[g].epi : &epi;
            const bool tma_store = n_groups ? groups[g].tma_store : prob.tma_store;
            const CUtensorMap *md = n_groups ? &groups[g].map_d : &map_d;
            if (n_groups && tma_store && leader && g != d_acquired) { /* the leader issues the stores */
                if (global_groups) cml__tma_map_acquire(md);
                d_acquired = g;
            }
            if (PINGPONG && mine > 0) cml__sm90_order_wait(consumer); /* tile mine - 1's main loop is done */
#pragma unroll
            for (int i = 0; i < ACC; i++) acc[i] = 0.0f;
            if constexpr (RS) { /* two fragment sets in turn (cml__sm90_rs_kblock) */
                uint32_t f0[16], f1[16];
                cml__sm90_ring r = {s, prev, it, parity};
                int kb = 0;
                for (; kb + 2 <= k_blocks; kb += 2) {
                    cml__sm90_rs_kblock<BN, STAGES, CLUSTER, WRAP, smem_t::a_bytes, smem_t::b_bytes>(
                        acc, f0, &r, kb == 0, full0, empty0, frag0, frag1, b_lo, leader);
                    cml__sm90_rs_kblock<BN, STAGES, CLUSTER, WRAP, smem_t::a_bytes, smem_t::b_bytes>(
                        acc, f1, &r, false, full0, empty0, frag0, frag1, b_lo, leader);
                }
                if (kb < k_blocks)
                    cml__sm90_rs_kblock<BN, STAGES, CLUSTER, WRAP, smem_t::a_bytes, smem_t::b_bytes>(
                        acc, f0, &r, kb == 0, full0, empty0, frag0, frag1, b_lo, leader);
                s = r.s, prev = r.prev, it = r.it, parity = r.parity;
            } else {
#if CML_SM90_DEV_TIMELINE
                if (leader && consumer == 0) CML_SM90_TL(mine, 0, clock64());
#endif
                for (int kb = 0; kb < k_blocks; kb++, it++) {
                    if constexpr (!WRAP) s = it % STAGES, parity = (uint32_t)(it / STAGES) & 1u;
                    cml__mbar_wait_at(full0 + 8 * s, parity);
#if CML_SM90_DEV_TIMELINE
                    if (kb == 0 && leader && consumer == 0) CML_SM90_TL(mine, 1, clock64());
#endif
                    const uint32_t da = a_lo + s * (smem_t::a_bytes >> 4), db = b_lo + s * (smem_t::b_bytes >> 4);
                    cml__wgmma_fence();
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        cml__sm90_mma<BN, KIND, TRANS_A, TRANS_B>(acc, cml__sm90_desc(da + k * step_a),
                                                                  cml__sm90_desc_b<BN, TRANS_B, CN>(db + k * step_b));
                        if constexpr (PINGPONG == 2) /* rows 64..127: the next 8 KB of the A stage, either layout */
                            cml__sm90_mma<BN, KIND, TRANS_A, TRANS_B>(
                                acc + BN / 2, cml__sm90_desc(da + ((64 * CML_SM90_ROW_BYTES) >> 4) + k * step_a),
                                cml__sm90_desc_b<BN, TRANS_B, CN>(db + k * step_b));
                    }
                    cml__wgmma_commit();
                    /* keep this stage's wgmmas in flight; the previous stage's are done: free it */
                    cml__wgmma_wait<1>();
                    cml__wgmma_reg_fence<ACC>(acc);
                    if (kb > 0 && leader) cml__sm90_release_at(empty0 + 8 * prev, CLUSTER);
                    prev = s;
                    if (WRAP && ++s == STAGES) {
                        s = 0;
                        parity ^= 1;
                    }
                }
            }
            cml__wgmma_wait<0>();
            cml__wgmma_reg_fence<ACC>(acc);
            if (leader) cml__sm90_release_at(empty0 + 8 * prev, CLUSTER);
#if CML_SM90_DEV_TIMELINE
            if (leader) CML_SM90_TL(mine, consumer == 0 ? 2 : 4, clock64());
#endif
            if (PINGPONG && tile + step < total) cml__sm90_order_signal(1 - consumer); /* the next tile's owner */
#if CML_SM90_DEV_EPI == 1 /* dev/gemm_sm90/harness.cu only: time the main loop without any epilogue */
            continue;
#elif CML_SM90_DEV_EPI == 6 /* dev only: no epilogue at run time, its code still compiled in */
            if (epi.alpha != 12345.0f) continue;
#endif
            tm = tm * CM + rm, tn = tn * CN + rn;
            if (PINGPONG != 2 && prob.splits > 1) { /* only the split that arrives last stores D (cml__sm90_problem) */
                const int split = b - cml__fast_div_q(b, prob.div_splits) * prob.splits;
                b = cml__fast_div_q(b, prob.div_splits);
                if (tm >= prob.tiles_m) continue; /* the odd cluster row past M: nothing to store */
                const long long half = (((long long)b * prob.tiles_m + tm) * prob.tiles_n + tn) * (PINGPONG ? 1 : 2) +
                                       (PINGPONG ? 0 : consumer);
                if (!cml__sm90_split_gather<BN>(acc, prob.partials + half * prob.splits * 64 * BN, split, prob.splits,
                                                &prob.arrivals[half], &split_last[consumer], consumer, leader))
                    continue;
            }
            if constexpr (RS) { /* the host launches RS only with TMA stores of f32 D (gemm_sm90.cu, rs_plan) */
                uint8_t *blocks = (uint8_t *)epi_stage + consumer * (smem_t::epi_region / 2);
                if constexpr (TRANS_A == 1) /* D^T = B^T A^T: the tile's rows are D's columns */
                    cml__sm90_tma_epilogue_f32t<BN, smem_t::out_bufs>(ep, md, acc, blocks, consumer, leader, warp, lane,
                                                                      tm * BM + consumer * 64, tn * BN, b);
                else
                    cml__sm90_tma_epilogue_f32<BN, smem_t::out_bufs, true>(ep, md, acc, blocks, consumer, leader, warp,
                                                                           lane, tm * BM + consumer * 64, tn * BN, b);
                continue;
            }
            if (tma_store) {
                /* 64-column blocks; the 160-wide tile's in 32 columns (64 bytes, the 64-byte swizzle), twice as many a
                 * buffer */
                constexpr int OC = BN % 64 == 0 ? 64 : 32;
#pragma unroll
                for (int h = 0; h < (PINGPONG == 2 ? 2 : 1); h++) /* 128-row ping-pong: the two 64-row halves */
                    cml__sm90_tma_epilogue<BN, smem_t::out_bufs * 64 / OC, KIND, PINGPONG == 2, OC>(
                        ep, md, acc + h * (BN / 2), (uint8_t *)epi_stage + consumer * (smem_t::epi_region / 2),
                        consumer, leader, warp, lane, tm * BM + (PINGPONG ? 64 * h : consumer * 64), tn * BN, b, head);
#if CML_SM90_DEV_TIMELINE
                if (leader) CML_SM90_TL(mine, consumer == 0 ? 3 : 5, clock64());
#endif
                continue;
            }

            /* accumulator fragment: register 4q + 2h + e holds row 16 * warp + lane / 4 + 8h,
             * column 8q + 2 (lane % 4) + e of this consumer's 64 x BN block */
            /* each consumer its own half of the epilogue region on both paths (a grouped launch
             * mixes them, and the consumers may be a tile apart); before the first
             * consumer_sync below lets anyone write, the leader waits until this consumer's
             * earlier TMA stores have read their blocks */
            if constexpr (PINGPONG != 2) { /* the 128-row ping-pong kernel always stores by TMA (above) */
                float *stage = (float *)((uint8_t *)epi_stage + consumer * (smem_t::epi_region / 2));
                if (leader) cml__bulk_wait_read<0>();
                const int frag_row = 16 * warp + lane / 4, frag_col = 2 * (lane % 4);
                const long long row0 = (long long)tm * BM + (PINGPONG ? 0 : consumer * 64);
#pragma unroll
                for (int blk = 0; blk < BN / CML_SM90_EPI_COLS; blk++) {
                    cml__sm90_consumer_sync(consumer); /* the previous block has been read */
#pragma unroll
                    for (int q = 0; q < CML_SM90_EPI_COLS / 8; q++) {
                        const int r = 4 * (blk * CML_SM90_EPI_COLS / 8 + q);
                        float *p = stage + frag_row * CML_SM90_EPI_STRIDE + 8 * q + frag_col;
                        *(float2 *)p = make_float2(acc[r], acc[r + 1]);
                        *(float2 *)(p + 8 * CML_SM90_EPI_STRIDE) = make_float2(acc[r + 2], acc[r + 3]);
                    }
                    cml__sm90_consumer_sync(consumer);
                    cml__sm90_store_block(ep, stage, b, row0, (long long)tn * BN + blk * CML_SM90_EPI_COLS,
                                          threadIdx.x % 128);
                }
            }
        }
        if (leader) cml__bulk_wait<0>(); /* any TMA stores' reads of shared memory are done */
#if CML_SM90_DEV_TIMELINE
        if (leader && consumer == 0) {
            CML_SM90_TL_META(1, clock64());
            CML_SM90_TL_META(3, cml__sm90_gtimer());
            CML_SM90_TL_META(5, (unsigned long long)mine);
        }
#endif
    }
#endif
}

#endif
