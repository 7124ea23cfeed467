/* The Hopper attention forward behind cml_attention_fwd (see attention_sm90.h): tensor maps,
 * the per-head-dim configuration, the launch. The kernels are in attention_fwd_sm90.cuh;
 * dev/attention_sm90/README.md has the measurements behind the configurations.
 *
 * Tensor maps are 4-D, (D, H, S, B) with the descriptor's element strides, so both [B, S, H, D]
 * and [B, H, S, D] (and padded strides) work (common/tma_map.h encodes them). */
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/cuda/common/tma_map.h"

#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_fwd_sm90.cuh"
#include "kernels/cuda/attention/attention_sm90.h"

extern "C" cml_status cml__att90_map(CUtensorMap *map, const void *base, int dtype, int64_t B, int64_t S, int64_t H,
                                     int64_t D, const int64_t st[3], int rows, const char *fn) {
    const uint64_t dims[4] = {(uint64_t)D, (uint64_t)H, (uint64_t)S, (uint64_t)B};
    /* a dimension of size 1 is never stepped: any valid stride does */
    const uint64_t strides[3] = {(uint64_t)(H > 1 ? st[2] : 8) * 2, (uint64_t)(S > 1 ? st[1] : 8) * 2,
                                 (uint64_t)(B > 1 ? st[0] : 8) * 2};
    const uint32_t box[4] = {64, 1, (uint32_t)rows, 1};
    return cml__tma_map(map, base, dtype == CML_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                        4, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B, fn);
}

extern "C" bool cml__att90_tensor_ok(const void *ptr, const int64_t st[3], int64_t B, int64_t S, int64_t H) {
    if (!ptr || ((uintptr_t)ptr & 15u) != 0) return false;
    const int64_t n[3] = {B, S, H};
    for (int i = 0; i < 3; i++)
        if (n[i] > 1 && (st[i] <= 0 || st[i] % 8 != 0 || st[i] >= ((int64_t)1 << 39))) return false;
    return true;
}

extern "C" bool cml__attention_fwd_sm90_takes(const cml_ctx *ctx, const cml_attention_desc *d, const void *O,
                                              const void *Q, const void *K, const void *V) {
    if (d->dtype != CML_BF16 && d->dtype != CML_F16) return false;
    if (d->D != 64 && d->D != 128 && d->D != 256) return false;
    if (d->B < 1 || d->S_q < 1 || d->S_kv < 1 || d->H_q < 1 || d->H_kv < 1 || d->H_q % d->H_kv != 0) return false;
    /* variable-length batches go to the mma path: here the 4-D maps address (b, s) and the
     * TMA-store epilogue writes whole 64-row boxes, which would clobber the next packed sequence */
    if (cml__attn_desc_varlen(d)) return false;
    if (!(d->scale > 0.0f) || !isfinite(d->scale)) return false; /* the row maximum is taken on raw scores */
    /* sizes in int, and the grid's (query tile, head) count too (the smallest tile, 128 rows: the most tiles) */
    const int64_t q_tiles = (d->S_q + CML_ATT90_BM - 1) / CML_ATT90_BM;
    if (d->S_q > INT_MAX - 1024 || d->S_kv > INT_MAX - 1024 || d->B * d->H_q > INT_MAX / q_tiles) return false;
    if (!cml__att90_tensor_ok(Q, d->q_stride, d->B, d->S_q, d->H_q) ||
        !cml__att90_tensor_ok(O, d->o_stride, d->B, d->S_q, d->H_q) ||
        !cml__att90_tensor_ok(K, d->k_stride, d->B, d->S_kv, d->H_kv) ||
        !cml__att90_tensor_ok(V, d->v_stride, d->B, d->S_kv, d->H_kv))
        return false;
    return cml__cuda_arch(ctx->device.index) == 90;
}

static long long att90_runs;
static long long att90_qshift_runs; /* launches of the QSHIFT kernel (tests) */
static long long att90_d256pro_runs; /* launches of the D = 256 PRO kernel (tests) */

/* Causal work order of the persistent kernel (p.head_group): the K / V bytes a group of heads may hold
 * in L2 while its query tiles run longest first (dev/attention_sm90/README.md, session 9 h9f; the
 * order alone, without h9f's half diagonal tiles: "the causal forward order without C7511"). */
#define CML_ATT90_GROUP_MIB 16

extern "C" long long cml__attention_fwd_sm90_runs(void) { return __atomic_load_n(&att90_runs, __ATOMIC_RELAXED); }
extern "C" long long cml__attention_fwd_sm90_qshift_runs(void) {
    return __atomic_load_n(&att90_qshift_runs, __ATOMIC_RELAXED);
}
extern "C" long long cml__attention_fwd_sm90_d256pro_runs(void) {
    return __atomic_load_n(&att90_d256pro_runs, __ATOMIC_RELAXED);
}

/* Per head dim (dev/attention_sm90/README.md, the ladder): key tile BN, K/V stages, consumer
 * warpgroups NC (query tile BM = 64 NC rows), and the kernel: the persistent one with O staged in its
 * own buffer (D = 64, 128: v6; D = 64 with three consumers, 192-row tiles: session 10) or the
 * one-tile-per-CTA kernel with ping-pong and the TMA-store epilogue (D = 256: v3, which measured 1-3% above
 * the persistent kernel there; the persistent one has no room for an O buffer; 128-row tiles). Shared
 * memory at D = 64: Q 24 KiB + O 24 KiB + 4 x (K + V) 32 KiB + 1 KiB alignment + barriers = 177 KiB of 227.
 * D = 256 since session 16: 128-key tiles in ONE stage (Q 64 + K 64 + V 64 KiB), without the intra-warpgroup
 * overlap (its S, P and O do not fit 240 registers at 128 keys: spills and serialized wgmmas), with HALF
 * (the causal diagonal's consumer 0 computes 64 keys). Against 80-key tiles in two stages with INTRA (the
 * v3 ladder's choice, FlashAttention-3's): the causal 512 tiles cover 1,280 key columns a head instead of
 * 1,440, and S = Q K^T runs at N = 128. Measured (dev/attention_sm90/README.md, "Session 16"; H100, 3 rounds
 * in turns, time ratio): causal 512 / 1k / 2k 1.093 / 1.070 / 1.038, full 512 1.053, full 1k / 2k 0.997; where
 * it is taken: cml__attention_fwd_sm90_d256k128 below. */
template <int D> struct att90_cfg;
template <> struct att90_cfg<64> { enum { BN = 128, STAGES = 4, PERSIST = 1, NC = 3 }; };
template <> struct att90_cfg<128> { enum { BN = 128, STAGES = 2, PERSIST = 1, NC = 2 }; };
template <> struct att90_cfg<256> { enum { BN = 128, STAGES = 1, PERSIST = 0, NC = 2 }; };

/* Causal D = 64 (192-row tiles, 3 consumers) with S_q % 64 == 0 and S_q % 192 != 0: the query tiles may be
 * aligned to the END of the sequence (the persistent kernel's QSHIFT, cml__att90_decode), so the partial tile
 * is the first one (one key tile) instead of the last (all key tiles, one or two consumers idle); the same
 * O and lse bit for bit. Measured (session 12, h12e's build where every D = 64 launch used the shifted code,
 * H100, in turns, new / base): causal 1k 1.030 (/FA2 1.504 -> 1.562), causal 512 0.986, causal 2k 1.000. So
 * only where the partial tile holds one consumer's rows, S_q % 192 == 64 (64 rows, 2 of 3 consumers idle on
 * the longest tile); at 512 / 2k it holds two consumers' rows and the shift measured no gain. As its own
 * kernel instantiation (session 13, 3 rounds in turns): causal 1k 1.040 (/FA2 1.485 -> 1.538), 4k 0.990,
 * 16k 1.000 -- the idle tail is a large share of the work only for a few query tiles per head, so the default
 * takes S_q < 2048 (256, 640, 1k, 1.6k). Its own instantiation keeps the unshifted kernel's code (in h12e's
 * build the changed code cost full attention 1-2%). CML_ATT_FWD_QSHIFT (read once): 0 never, 1 every causal
 * D = 64 problem with S_q % 64 == 0 and S_q % 192 != 0 (A/B runs and tests). Returns the shift in rows (0: the
 * base kernel). */
extern "C" int cml__attention_fwd_sm90_q_shift(const cml_attention_desc *d) {
    static int cache = -2;
    if (cache == -2) {
        const char *e = getenv("CML_ATT_FWD_QSHIFT");
        cache = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "1") == 0 ? 1 : -1;
    }
    const int64_t BM = 64 * att90_cfg<64>::NC;
    if (!d->causal || d->D != 64 || cache == 0 || d->S_q % 64 != 0 || d->S_q % BM == 0) return 0;
    if (cache != 1 && (d->S_q % BM != 64 || d->S_q >= 2048)) return 0;
    return (int)(BM - d->S_q % BM);
}

/* D = 256 (the one-tile kernel, 1,024 CTAs at the bench's S = 512, one an SM, 7.76 in sequence) with the PRO
 * prologue (attention_fwd_sm90.cuh: Q in two 64-row halves with their own barriers, the first stages issued
 * before the __syncthreads in the order Q0, K0, Q1, K1, V0, V1 (two stages; one: Q0, K0, Q1, V0), the maps
 * prefetched): a CTA with a few key tiles waits for its first data with the tensor cores idle (session 12
 * h12e's arithmetic, README). Same O and lse bit for bit. Default: causal with S_kv <= CML_ATT90_D256PRO_SK,
 * where it measured >= 1.01x (session 14, 3 rounds in turns: causal 512 1.011x, 1k 1.009x, 2k 1.001x, full
 * 1.000-1.005x; an L2 prefetch of the next wave's first data lost 7%: dev/attention_sm90/README.md, "Session 13
 * (helper h13d)"); measured on the 80-key form, kept with the 128-key one (its session 16 numbers include it).
 * CML_ATT_FWD_D256PRO (read once): 0 never, 1 every D = 256 problem, causal or not (A/B runs and tests). */
#define CML_ATT90_D256PRO_SK 512
#define CML_ATT90_D256_HEADWISE_SK 512 /* causal D = 256: head-by-head order up to this S_kv (below) */
extern "C" bool cml__attention_fwd_sm90_d256pro(const cml_attention_desc *d) {
    static int cache = -2;
    if (cache == -2) {
        const char *e = getenv("CML_ATT_FWD_D256PRO");
        cache = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "1") == 0 ? 1 : -1;
    }
    if (d->D != 256 || cache == 0) return false;
    return cache == 1 || (d->causal && d->S_kv <= CML_ATT90_D256PRO_SK);
}

/* D = 256's key tiles: 128 keys in one stage without INTRA, with HALF (att90_cfg<256>; session 16), or the 80-key
 * form (two stages, INTRA). Measured against each other (session 16, H100, 2 rounds in turns, new / old time
 * ratio): causal 512 / 1k / 2k / 4k / 8k / 16k 1.138 / 1.060 / 1.039 / 1.016 / 1.002 / 0.987, full 512 1.061,
 * full 1k-16k 0.994-0.983 (the one stage shows once a row has many key tiles to stream). Default: the 128-key
 * form for causal S_kv <= CML_ATT90_D256K128_CAUSAL_SK and full S_kv <= CML_ATT90_D256K128_FULL_SK.
 * CML_ATT_FWD_D256K128 (read once): 0 never, 1 every D = 256 problem (A/B runs and tests). */
#define CML_ATT90_D256_BN80 80
#define CML_ATT90_D256K128_CAUSAL_SK 4096
#define CML_ATT90_D256K128_FULL_SK 512
extern "C" bool cml__attention_fwd_sm90_d256k128(const cml_attention_desc *d) {
    static int cache = -2;
    if (cache == -2) {
        const char *e = getenv("CML_ATT_FWD_D256K128");
        cache = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "1") == 0 ? 1 : -1;
    }
    if (d->D != 256 || cache == 0) return false;
    return cache == 1 || d->S_kv <= (d->causal ? CML_ATT90_D256K128_CAUSAL_SK : CML_ATT90_D256K128_FULL_SK);
}

static const char att90_fn[] = "cml_attention_fwd";

static const char *att90_dtype_name(int DT) { return cml_dtype_name(DT == CML_ATT90_F16 ? CML_F16 : CML_BF16); }

template <int DT, int D, int PERSIST> struct att90_launcher;

/* The persistent kernel: at most one CTA per SM, the rest of the tiles claimed from a counter. */
template <int DT, int D, bool QSHIFT> struct att90_persistent {
    static cml_status run(cml_ctx *ctx, const CUtensorMap maps[4], cml__att90_params p) {
        typedef att90_cfg<D> cfg;
        typedef cml__att90_psmem<D, cfg::BN, cfg::STAGES, 1, cfg::NC> sm;
        auto kern = cml__att90_fwd_persistent_kernel<DT, D, cfg::BN, cfg::STAGES, 1, cfg::NC, QSHIFT>;
        const int threads = CML_ATT90_P_THREADS(cfg::NC);
        CML_CUDA_TRY(att90_fn, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm::total));
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, sizeof(int)));
        p.tile_counter = (int *)ws;
        cudaStream_t s = cml__stream(ctx);
        CML_CUDA_TRY(att90_fn, cudaMemsetAsync(ws, 0, sizeof(int), s)); /* the tile counter */
        const int sms = cml__cuda_sm_count(ctx->device.index);
        const unsigned grid = (unsigned)(p.total_tiles < sms || sms <= 0 ? p.total_tiles : sms);
        kern<<<grid, threads, sm::total, s>>>(maps[0], maps[1], maps[2], maps[3], p);
        return cml__cuda_check_launch(att90_fn, "cml__att90_fwd_persistent_kernel", att90_dtype_name(DT), p.total_tiles,
                                      grid, threads);
    }
};

template <int DT, int D> struct att90_launcher<DT, D, 1> {
    static cml_status run(cml_ctx *ctx, const CUtensorMap maps[4], const cml__att90_params &p, bool, bool) {
        /* the shifted kernel is compiled only where it exists (three consumers: D = 64) */
        enum { QS = att90_cfg<D>::NC > 2 };
        if (QS && p.q_shift > 0) {
            const cml_status st = att90_persistent<DT, D, (bool)QS>::run(ctx, maps, p);
            if (st == CML_OK) __atomic_add_fetch(&att90_qshift_runs, 1, __ATOMIC_RELAXED);
            return st;
        }
        return att90_persistent<DT, D, false>::run(ctx, maps, p);
    }
};

/* The one-tile-per-CTA kernel <.., BN, STAGES, INTRA, PINGPONG 1, TSTORE 1, GROUPED, PRO, HALF> (D = 256). */
template <int DT, int D, int BN, int STAGES, int INTRA, bool HALF>
static cml_status att90_onetile(cml_ctx *ctx, const CUtensorMap maps[4], const cml__att90_params &p, bool pro) {
    typedef cml__att90_smem<D, BN, STAGES> sm;
    /* the grouped order only where it differs from head by head (a group of one head is base's order) */
    const bool grouped = p.causal && p.head_group >= 2;
    auto kern = grouped ? cml__att90_fwd_kernel<DT, D, BN, STAGES, INTRA, 1, 1, 1, false, HALF>
                        : cml__att90_fwd_kernel<DT, D, BN, STAGES, INTRA, 1, 1, 0, false, HALF>;
    if (pro)
        kern = grouped ? cml__att90_fwd_kernel<DT, D, BN, STAGES, INTRA, 1, 1, 1, true, HALF>
                       : cml__att90_fwd_kernel<DT, D, BN, STAGES, INTRA, 1, 1, 0, true, HALF>;
    const int smem = (int)sm::total + (pro ? CML_ATT90_PRO_SMEM_EXTRA : 0);
    CML_CUDA_TRY(att90_fn, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const unsigned grid = (unsigned)p.total_tiles;
    kern<<<grid, CML_ATT90_THREADS, smem, cml__stream(ctx)>>>(maps[0], maps[1], maps[2], maps[3], p);
    const cml_status st = cml__cuda_check_launch(att90_fn, "cml__att90_fwd_kernel", att90_dtype_name(DT),
                                                 p.total_tiles, grid, CML_ATT90_THREADS);
    if (st == CML_OK && pro) __atomic_add_fetch(&att90_d256pro_runs, 1, __ATOMIC_RELAXED);
    return st;
}

template <int DT, int D> struct att90_launcher<DT, D, 0> {
    /* pro: the PRO prologue (the Q map's box is then 64 rows); k128: the 128-key form (else the 80-key one) */
    static cml_status run(cml_ctx *ctx, const CUtensorMap maps[4], const cml__att90_params &p, bool pro, bool k128) {
        typedef att90_cfg<D> cfg;
        static_assert(cfg::NC == 2, "the one-tile-per-CTA kernel has two consumers: 128-row tiles");
        if (k128) return att90_onetile<DT, D, cfg::BN, cfg::STAGES, 0, true>(ctx, maps, p, pro);
        return att90_onetile<DT, D, CML_ATT90_D256_BN80, 2, 1, false>(ctx, maps, p, pro);
    }
};

template <int DT, int D>
static cml_status att90_launch(cml_ctx *ctx, const CUtensorMap maps[4], const cml__att90_params &p, bool pro,
                               bool k128) {
    return att90_launcher<DT, D, att90_cfg<D>::PERSIST>::run(ctx, maps, p, pro, k128);
}

extern "C" cml_status cml__attention_fwd_sm90(cml_ctx *ctx, const cml_attention_desc *d, void *O, float *lse,
                                              const void *Q, const void *K, const void *V, bool *taken) {
    *taken = false;
    if (!cml__attention_fwd_sm90_takes(ctx, d, O, Q, K, V)) return CML_OK;
    const int D = (int)d->D;
    /* D = 256: the 128-key form or the 80-key one */
    const bool k128 = D == 256 && cml__attention_fwd_sm90_d256k128(d);
    const int BN = D == 64    ? (int)att90_cfg<64>::BN
                   : D == 128 ? (int)att90_cfg<128>::BN
                   : k128     ? (int)att90_cfg<256>::BN
                              : CML_ATT90_D256_BN80;
    /* query rows per work tile: the Q map's box and the tile count */
    const int BM = 64 * (D == 64 ? (int)att90_cfg<64>::NC : D == 128 ? (int)att90_cfg<128>::NC : (int)att90_cfg<256>::NC);
    /* D = 256 with the PRO prologue: Q in 64-row halves (the map's box) */
    const bool pro = D == 256 && cml__attention_fwd_sm90_d256pro(d);
    CUtensorMap maps[4];
    *taken = true; /* takes() checked TMA's rules: a refused map is an error, not a reason to fall back */
    CML_TRY(cml__att90_map(&maps[0], Q, d->dtype, d->B, d->S_q, d->H_q, D, d->q_stride, pro ? 64 : BM, att90_fn));
    CML_TRY(cml__att90_map(&maps[1], K, d->dtype, d->B, d->S_kv, d->H_kv, D, d->k_stride, BN, att90_fn));
    CML_TRY(cml__att90_map(&maps[2], V, d->dtype, d->B, d->S_kv, d->H_kv, D, d->v_stride, BN, att90_fn));
    CML_TRY(cml__att90_map(&maps[3], O, d->dtype, d->B, d->S_q, d->H_q, D, d->o_stride, 64, att90_fn));
    CML_TRY(cml__cuda_activate(ctx));
    cml__att90_params p;
    memset(&p, 0, sizeof p);
    p.Hq = (int)d->H_q;
    p.group = (int)(d->H_q / d->H_kv);
    p.Sq = (int)d->S_q;
    p.Sk = (int)d->S_kv;
    p.causal = d->causal ? 1 : 0;
    p.q_tiles = (int)((d->S_q + BM - 1) / BM);
    p.total_tiles = (int)(p.q_tiles * d->B * d->H_q);
    p.scale_log2 = d->scale * CML_ATTN_LOG2E;
    p.lse = lse;
    if (D == 64) p.q_shift = cml__attention_fwd_sm90_q_shift(d); /* the rule and its numbers: above */
    /* D = 128 and 256 only: at D = 64 the same order measured 0.97-0.98x full and 0.99x causal at 2k
     * (the kernel's code changes though full attention never takes the branch), so its kernels compile
     * without it (cml__att90_decode's GROUPED); D = 256 runs it in a kernel of its own (GROUPED) */
    if (d->causal && D >= 128) { /* longest query tiles first across heads whose K / V (per query head) fit the budget */
        const double kv_per_head = (double)d->S_kv * D * 2 * 2 * (double)d->H_kv / (double)d->H_q;
        const double g = (double)CML_ATT90_GROUP_MIB * 1048576.0 / kv_per_head;
        const int64_t pairs = d->B * d->H_q;
        p.head_group = g < 1.0 ? 1 : g >= (double)pairs ? (int)pairs : (int)g;
        /* D = 256 up to 512 keys: head by head, each head's query tiles side by side (its K / V read once while
         * they run). Measured on the 128-key kernel (session 16, 3 rounds in turns): causal 512 1.045x over the
         * grouped order (111.0 against 116.0 us), but 1k 0.97x and 2k 0.93x, where the grouped order stays */
        if (k128 && d->S_kv <= CML_ATT90_D256_HEADWISE_SK) p.head_group = 1;
    }
    cml_status st;
    if (d->dtype == CML_F16)
        st = D == 64    ? att90_launch<CML_ATT90_F16, 64>(ctx, maps, p, pro, k128)
             : D == 128 ? att90_launch<CML_ATT90_F16, 128>(ctx, maps, p, pro, k128)
                        : att90_launch<CML_ATT90_F16, 256>(ctx, maps, p, pro, k128);
    else
        st = D == 64    ? att90_launch<CML_ATT90_BF16, 64>(ctx, maps, p, pro, k128)
             : D == 128 ? att90_launch<CML_ATT90_BF16, 128>(ctx, maps, p, pro, k128)
                        : att90_launch<CML_ATT90_BF16, 256>(ctx, maps, p, pro, k128);
    if (st == CML_OK) __atomic_add_fetch(&att90_runs, 1, __ATOMIC_RELAXED);
    return st;
}
