/* The Hopper attention backward behind cml_attention_bwd (see attention_sm90.h): which problems
 * it takes, the workspace, tensor maps, per-head-dim configuration and the three launches
 * (prep, main, convert; the convert a programmatic dependent launch: att90b_pdl_enabled). The
 * kernels and the argument for deterministic dQ and forward progress are in
 * attention_bwd_sm90.cuh; dev/attention_sm90/README.md ("Backward") has the measurements. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cuda/common/tma_map.h"

#include "kernels/cuda/attention/attention_bwd_sm90.cuh"
#include "kernels/cuda/attention/attention_bwd_sm90_d256p.cuh"
#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_sm90.h"

static const char att90b_fn[] = "cml_attention_bwd";
static long long att90b_asc_runs; /* main-kernel launches with ascending claims (tests) */

/* Per head dim: query rows per step BM (D = 64 / 128: BM * D = 8192, each consumer's dQ block is
 * 64 x 64), Q/dO stages, dQ partial buffers (as many as fit in 227 KB of shared memory), keys per
 * work tile BN, dQ parts per query tile PARTS, each with its own semaphore (D = 256: four 64 x 64
 * quarters, one per consumer of a 2-CTA cluster; attention_bwd_sm90_d256p.cuh), the kernel variant VAR (session 7,
 * dev/attention_sm90/README.md: at D = 128 EARLYREL, the Q / dO stage released as soon as dV and dK
 * are done, so that the producer refills it under the dQ hand-off: 0-6% faster, 2% on average;
 * at D = 64 it measured between 1% faster and 12% slower, so D = 64 keeps the session-6 step).
 * Every head dim runs the consumer step's instruction diet (same bits; main kernel 3-9% faster at
 * D = 128, 1-9% at D = 64; at D = 256 the whole backward 0.95-0.99 of before together with its head
 * interleave, cml__attention_bwd_sm90) and, at D = 256, two dQ writers per buffer (same bits; whole
 * backward 0.94-0.99): both are the kernels' only code path (session 9, dev/attention_sm90/README.md). */
template <int D> struct att90b_cfg;
template <> struct att90b_cfg<64> {
    enum { BM = 128, ST = 2, NDQ = 1, BN = CML_ATT90B_BN, PARTS = 1, VAR = 0 };
};
template <> struct att90b_cfg<128> {
    enum { BM = 64, ST = 2, NDQ = 2, BN = CML_ATT90B_BN, PARTS = 1, VAR = CML_ATT90B_V_EARLYREL };
};
template <> struct att90b_cfg<256> { enum { BM = 64, ST = 1, NDQ = 2, BN = 64, PARTS = 4, VAR = 0 }; };

static int att90b_bm(int64_t D) { return D == 64 ? (int)att90b_cfg<64>::BM : (int)att90b_cfg<128>::BM; }
static int att90b_bn(int64_t D) { return D == 256 ? (int)att90b_cfg<256>::BN : CML_ATT90B_BN; }

/* The main kernel of a head dim: D = 64 / 128 share one persistent kernel, one CTA a SM; D = 256
 * runs the pair-K kernel in 2-CTA clusters (session 12: the whole backward 0.87-0.90x the time of
 * the one-CTA D = 256 kernel it replaced), as many clusters as fit at once. Units (tiles, or key-block pairs) are claimed from a
 * counter by running CTAs, so neither grid has to fit at once for progress. */
template <int DT, int D> struct att90b_main {
    typedef att90b_cfg<D> cfg;
    typedef cml__att90b_smem<D, cfg::BM, cfg::ST, cfg::NDQ> sm;
    static_assert(sm::total <= 232448, "shared memory above the 227 KB a block may have");
    static cml_status launch(cml_ctx *ctx, const CUtensorMap maps[4], cml__att90b_params p, const char *dtn) {
        auto kern = cml__att90b_kernel<DT, D, cfg::BM, cfg::ST, cfg::NDQ, cfg::VAR>;
        CML_CUDA_TRY(att90b_fn, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm::total));
        const int sms = cml__cuda_sm_count(ctx->device.index);
        const unsigned grid = (unsigned)(p.total_tiles < sms || sms <= 0 ? p.total_tiles : sms);
        p.asc = p.asc && p.n_kb <= (int)grid; /* the progress argument needs n_kb <= the CTAs (header) */
        if (p.asc) { /* cooperative: every CTA resident at once, or refused (then descending, below) */
            cudaLaunchConfig_t lc;
            memset(&lc, 0, sizeof lc);
            lc.gridDim = dim3(grid);
            lc.blockDim = dim3(CML_ATT90B_THREADS);
            lc.dynamicSmemBytes = sm::total;
            lc.stream = cml__stream(ctx);
            cudaLaunchAttribute at;
            at.id = cudaLaunchAttributeCooperative;
            at.val.cooperative = 1;
            lc.attrs = &at;
            lc.numAttrs = 1;
            if (cudaLaunchKernelEx(&lc, kern, maps[0], maps[1], maps[2], maps[3], p) == cudaSuccess) {
                __atomic_add_fetch(&att90b_asc_runs, 1, __ATOMIC_RELAXED);
                return cml__cuda_check_launch(att90b_fn, "cml__att90b_kernel", dtn, p.total_tiles, grid,
                                              CML_ATT90B_THREADS);
            }
            (void)cudaGetLastError();
            p.asc = 0;
        }
        kern<<<grid, CML_ATT90B_THREADS, sm::total, cml__stream(ctx)>>>(maps[0], maps[1], maps[2], maps[3], p);
        return cml__cuda_check_launch(att90b_fn, "cml__att90b_kernel", dtn, p.total_tiles, grid, CML_ATT90B_THREADS);
    }
};
template <int DT> struct att90b_main<DT, 256> {
    typedef cml__att90b256p_sm sm;
    static_assert(sm::total <= 232448, "shared memory above the 227 KB a block may have");
    static cudaLaunchConfig_t config(unsigned clusters, cudaStream_t s, cudaLaunchAttribute *at) {
        cudaLaunchConfig_t lc;
        memset(&lc, 0, sizeof lc);
        lc.gridDim = dim3(2 * clusters);
        lc.blockDim = dim3(CML_ATT90B_THREADS);
        lc.dynamicSmemBytes = sm::total;
        lc.stream = s;
        at->id = cudaLaunchAttributeClusterDimension;
        at->val.clusterDim.x = 2, at->val.clusterDim.y = 1, at->val.clusterDim.z = 1;
        lc.attrs = at;
        lc.numAttrs = 1;
        return lc;
    }
    static cml_status launch(cml_ctx *ctx, const CUtensorMap maps[4], const cml__att90b_params &p, const char *dtn) {
        auto kern = cml__att90b256p_kernel<DT, att90b_cfg<256>::VAR>;
        CML_CUDA_TRY(att90b_fn, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm::total));
        /* clusters resident at once, per device (the SMs' pairing into GPCs decides, not SMs / 2) */
        static int cache[16];
        const int dev = ctx->device.index;
        int fit = dev >= 0 && dev < 16 ? cache[dev] : 0;
        if (fit == 0) {
            cudaLaunchAttribute at;
            const cudaLaunchConfig_t lc = config(1, cml__stream(ctx), &at);
            if (cudaOccupancyMaxActiveClusters(&fit, kern, &lc) != cudaSuccess || fit < 1) {
                (void)cudaGetLastError();
                const int sms = cml__cuda_sm_count(dev);
                fit = sms >= 2 ? sms / 2 : 1;
            }
            if (dev >= 0 && dev < 16) cache[dev] = fit;
        }
        const unsigned clusters = (unsigned)(p.total_tiles < fit ? p.total_tiles : fit);
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t lc = config(clusters, cml__stream(ctx), &at);
        CML_CUDA_TRY(att90b_fn, cudaLaunchKernelEx(&lc, kern, maps[0], maps[1], maps[2], maps[3], p));
        return cml__cuda_check_launch(att90b_fn, "cml__att90b256p_kernel", dtn, p.total_tiles, 2 * clusters,
                                      CML_ATT90B_THREADS);
    }
};

extern "C" bool cml__attention_bwd_sm90_takes(const cml_ctx *ctx, const cml_attention_desc *d, const void *dQ,
                                              const void *dK, const void *dV, const void *dO, const void *Q,
                                              const void *K, const void *V, const void *O) {
    if (d->dtype != CML_BF16 && d->dtype != CML_F16) return false;
    if (d->D != 64 && d->D != 128 && d->D != 256) return false;
    if (d->B < 1 || d->S_q < 1 || d->S_kv < 1 || d->H_q < 1 || d->H_kv < 1 || d->H_q % d->H_kv != 0) return false;
    if (cml__attn_desc_varlen(d)) return false; /* the maps address (b, s): fixed lengths only */
    if (!isfinite(d->scale)) return false;
    /* sizes in int: query-tile rows (semaphores), padded rows, tiles */
    const int64_t BM = att90b_bm(d->D), BN = att90b_bn(d->D), n_qt = (d->S_q + BM - 1) / BM, n_kb = (d->S_kv + BN - 1) / BN;
    if (d->S_q > INT_MAX - 1024 || d->S_kv > INT_MAX - 1024 || d->B * d->H_q > INT_MAX / (n_qt * BM) ||
        d->B * d->H_kv > INT_MAX / n_kb)
        return false;
    if (!cml__att90_tensor_ok(Q, d->q_stride, d->B, d->S_q, d->H_q) || !cml__att90_tensor_ok(dQ, d->q_stride, d->B, d->S_q, d->H_q) ||
        !cml__att90_tensor_ok(O, d->o_stride, d->B, d->S_q, d->H_q) || !cml__att90_tensor_ok(dO, d->o_stride, d->B, d->S_q, d->H_q) ||
        !cml__att90_tensor_ok(K, d->k_stride, d->B, d->S_kv, d->H_kv) ||
        !cml__att90_tensor_ok(dK, d->k_stride, d->B, d->S_kv, d->H_kv) ||
        !cml__att90_tensor_ok(V, d->v_stride, d->B, d->S_kv, d->H_kv) ||
        !cml__att90_tensor_ok(dV, d->v_stride, d->B, d->S_kv, d->H_kv))
        return false;
    return cml__cuda_arch(ctx->device.index) == 90;
}

static long long att90b_runs;

extern "C" long long cml__attention_bwd_sm90_runs(void) { return __atomic_load_n(&att90b_runs, __ATOMIC_RELAXED); }
extern "C" long long cml__attention_bwd_sm90_asc_runs(void) { return __atomic_load_n(&att90b_asc_runs, __ATOMIC_RELAXED); }

/* Causal problems may claim each head's key blocks longest first (p.asc; the progress argument in
 * attention_bwd_sm90.cuh): block 0, which sees every query tile, no longer runs alone at the
 * kernel's end, but a CTA claims its next tile only once its last one's dQ adds are done, and each
 * link of the add chain keeps less slack. Measured (session 12, dev/attention_sm90/README.md, whole
 * backward asc / descending): D = 128 causal 16k 0.97, 8k 0.99-1.01, 4k 1.06; D = 64 8k 1.03, 16k
 * 1.21 (one step of slack a link at BM = BN = 128). So D = 128 from ASC_MIN_KB key blocks on, and
 * only while the CTAs can all be resident (n_kb <= the grid; the launch is cooperative): on the
 * H100 S_kv 16k-16.9k. CML_ATT_BWD_ASC=0 (read once) never, =1 every causal D = 64 / 128 problem
 * where it is safe (A/B runs and tests). The bits are the same either way. */
enum { ASC_MIN_KB = 128 };
static bool att90b_asc_wanted(const cml_attention_desc *d, int n_kb) {
    static int cache = -2;
    if (cache == -2) {
        const char *e = getenv("CML_ATT_BWD_ASC");
        cache = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "1") == 0 ? 1 : -1;
    }
    if (!d->causal || d->D == 256 || cache == 0) return false;
    return cache == 1 || (d->D == 128 && n_kb >= ASC_MIN_KB);
}

static size_t round256(size_t n) { return (n + 255) & ~(size_t)255; }

/* The convert kernel as a programmatic dependent launch of the main kernel (session 8, part 2,
 * dev/attention_sm90/README.md): it converts query tiles as they complete, on the SMs the main
 * kernel's tail leaves idle, instead of after the whole main kernel. CML_ATT_BWD_PDL=0 (read once)
 * launches it plainly after the main kernel, as before, for A/B runs; a PDL launch the runtime
 * refuses falls back to that too. The bits are the same either way (an elementwise conversion). */
static bool att90b_pdl_enabled(void) {
    static int cache = -1;
    return cml__env_switch("CML_ATT_BWD_PDL", &cache);
}

template <int DT, int D>
static cml_status att90b_launch(cml_ctx *ctx, const cml_attention_desc *d, void *dQ, const void *dO, const void *O,
                                const float *lse, const CUtensorMap maps[4], cml__att90b_params p) {
    typedef att90b_cfg<D> cfg;
    const int BM = cfg::BM;
    const long long bh = d->B * d->H_q, rows_pad = bh * p.n_qt * BM, n_sem = bh * p.n_qt * cfg::PARTS;
    /* one request: lse2, Di, the dQ accumulator, the semaphores, the tile and unit counters */
    const size_t o_lse = 0, o_di = round256(rows_pad * 4), o_acc = o_di + round256(rows_pad * 4),
                 o_sem = o_acc + round256((size_t)rows_pad * D * 4), total = o_sem + round256((n_sem + 2) * 4);
    uint8_t *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, (void **)&ws, total));
    p.lse2 = (const float *)(ws + o_lse);
    p.di = (const float *)(ws + o_di);
    p.dq_acc = (float *)(ws + o_acc);
    p.dq_sem = (int *)(ws + o_sem);
    p.tile_counter = p.dq_sem + n_sem;
    int *unit_counter = p.dq_sem + n_sem + 1; /* the convert kernel's (PDL); prep zeroes it too */
    cudaStream_t s = cml__stream(ctx);
    const char *dtn = cml_dtype_name(DT == CML_ATT90_F16 ? CML_F16 : CML_BF16);

    /* grid-stride kernels sized to one full wave of 256-thread blocks (cml__grid_size; the prep
     * kernel's __launch_bounds__ allow 8 a SM, 4 at D = 256: the grid strides either way) */
    const unsigned pgrid = cml__grid_size(ctx, rows_pad / cml__att90b_prep_cfg<D>::UNIT * 256, 256);
    cml__att90b_prep_kernel<DT, D><<<pgrid, 256, 0, s>>>(
        (const uint16_t *)dO, (const uint16_t *)O, d->o_stride[0], d->o_stride[1], d->o_stride[2], lse, p.Hq, p.Sq,
        p.n_qt * BM, rows_pad, (float *)p.lse2, (float *)p.di, p.dq_sem, (int)n_sem);
    CML_TRY(cml__cuda_check_launch(att90b_fn, "cml__att90b_prep_kernel", dtn, rows_pad, pgrid, 256));

    const cml_status main_st = att90b_main<DT, D>::launch(ctx, maps, p, dtn);
    if (main_st != CML_OK) return main_st;

    /* QUART: the pair-K kernel's accumulator (64 x 64 quarters, semaphores counting key-block pairs) */
    enum { QUART = D == 256 };
    const long long n4 = rows_pad * D / 4;
    const unsigned cgrid = cml__grid_size(ctx, n4 / 1024 * 256, 256); /* units of 64 x 64: 1024 float4 */
    const float4 *acc = (const float4 *)p.dq_acc;
    const int off = p.Sk - p.Sq, adders = QUART ? (p.n_kb + 1) / 2 : p.n_kb;
    if (att90b_pdl_enabled()) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t lc = cml__pdl_config(dim3(cgrid), dim3(256), s, &at);
        const cudaError_t e = cudaLaunchKernelEx(&lc, cml__att90b_dq_kernel<DT, D, cfg::BM, true, QUART>, acc,
                                                 (uint16_t *)dQ, (long long)d->q_stride[0], (long long)d->q_stride[1],
                                                 (long long)d->q_stride[2], p.Hq, p.Sq, p.n_qt, p.causal, off, p.scale,
                                                 n4, (const int *)p.dq_sem, unit_counter, adders);
        if (e == cudaSuccess) return CML_OK;
        (void)cudaGetLastError(); /* refused: the plain launch below reports what persists */
    }
    cml__att90b_dq_kernel<DT, D, cfg::BM, false, QUART><<<cgrid, 256, 0, s>>>(
        acc, (uint16_t *)dQ, d->q_stride[0], d->q_stride[1], d->q_stride[2], p.Hq, p.Sq, p.n_qt, p.causal, off, p.scale,
        n4, (const int *)NULL, (int *)NULL, 0);
    return cml__cuda_check_launch(att90b_fn, "cml__att90b_dq_kernel", dtn, n4, cgrid, 256);
}

extern "C" cml_status cml__attention_bwd_sm90(cml_ctx *ctx, const cml_attention_desc *d, void *dQ, void *dK, void *dV,
                                              const void *dO, const void *Q, const void *K, const void *V,
                                              const void *O, const float *lse, bool *taken) {
    *taken = false;
    if (!cml__attention_bwd_sm90_takes(ctx, d, dQ, dK, dV, dO, Q, K, V, O)) return CML_OK;
    const int D = (int)d->D, BM = att90b_bm(D), BN = att90b_bn(D);
    *taken = true; /* takes() checked TMA's rules: a refused map is an error, not a reason to fall back */
    CUtensorMap maps[4];
    CML_TRY(cml__att90_map(&maps[0], Q, d->dtype, d->B, d->S_q, d->H_q, D, d->q_stride, BM, att90b_fn));
    CML_TRY(cml__att90_map(&maps[1], K, d->dtype, d->B, d->S_kv, d->H_kv, D, d->k_stride, BN, att90b_fn));
    CML_TRY(cml__att90_map(&maps[2], V, d->dtype, d->B, d->S_kv, d->H_kv, D, d->v_stride, BN, att90b_fn));
    CML_TRY(cml__att90_map(&maps[3], dO, d->dtype, d->B, d->S_q, d->H_q, D, d->o_stride, BM, att90b_fn));
    CML_TRY(cml__cuda_activate(ctx));
    cml__att90b_params p;
    memset(&p, 0, sizeof p);
    p.Hq = (int)d->H_q;
    p.Hkv = (int)d->H_kv;
    p.group = (int)(d->H_q / d->H_kv);
    p.Sq = (int)d->S_q;
    p.Sk = (int)d->S_kv;
    p.causal = d->causal ? 1 : 0;
    p.n_qt = (int)((d->S_q + BM - 1) / BM);
    p.n_kb = (int)((d->S_kv + BN - 1) / BN);
    /* work units: key blocks, or at D = 256 pairs of them (the pair-K kernel) */
    p.total_tiles = (int)(d->B * d->H_kv * (D == 256 ? (p.n_kb + 1) / 2 : p.n_kb));
    /* Tile order (dev/attention_sm90/README.md, "Backward", v4): without the causal mask, every
     * key block of a head starts at query tile 0, and head-major tiles that start together wait on
     * each other's dQ adds down the key-block chain; interleaving heads removes that (+10-30% at
     * S = 2k). Measured best: 8 heads up to 16 key blocks, 4 beyond (8 lost L2 reuse at S = 8k).
     * Causal tiles already start staggered; interleaving them only cost L2 reuse (up to -20%). */
    p.hshift = 0;
    if (!p.causal) {
        /* D = 256 (BN 64): 4 heads up to 32 key blocks, 2 up to 64, 1 beyond: with 4 heads its (faster,
         * session-9) consumers queue on the ordered dQ adds from S = 8k on (dev/attention_sm90/README.md,
         * "Session 9 (helper h9a)" and "Session 9: the D = 256 diet confirmed") */
        const int want = D == 256 ? (p.n_kb <= 32 ? 2 : p.n_kb <= 64 ? 1 : 0) : p.n_kb <= 16 ? 3 : 2;
        while (p.hshift < want && (d->B * d->H_kv) % (2 << p.hshift) == 0) p.hshift++;
    }
    p.asc = p.hshift == 0 && att90b_asc_wanted(d, p.n_kb);
    p.scale = d->scale;
    p.scale_log2 = d->scale * CML_ATTN_LOG2E;
    p.dK = dK;
    p.dV = dV;
    for (int i = 0; i < 3; i++) p.dk_s[i] = d->k_stride[i], p.dv_s[i] = d->v_stride[i];
    cml_status st;
    if (d->dtype == CML_F16)
        st = D == 64    ? att90b_launch<CML_ATT90_F16, 64>(ctx, d, dQ, dO, O, lse, maps, p)
             : D == 128 ? att90b_launch<CML_ATT90_F16, 128>(ctx, d, dQ, dO, O, lse, maps, p)
                        : att90b_launch<CML_ATT90_F16, 256>(ctx, d, dQ, dO, O, lse, maps, p);
    else
        st = D == 64    ? att90b_launch<CML_ATT90_BF16, 64>(ctx, d, dQ, dO, O, lse, maps, p)
             : D == 128 ? att90b_launch<CML_ATT90_BF16, 128>(ctx, d, dQ, dO, O, lse, maps, p)
                        : att90b_launch<CML_ATT90_BF16, 256>(ctx, d, dQ, dO, O, lse, maps, p);
    if (st == CML_OK) __atomic_add_fetch(&att90b_runs, 1, __ATOMIC_RELAXED);
    return st;
}
