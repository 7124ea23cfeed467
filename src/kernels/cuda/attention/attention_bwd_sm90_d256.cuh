/* The Hopper (sm_90a) attention backward for head dim D = 256 (issue 6), one CTA a work tile: its
 * consumer step (cml__att90b256_p, cml__att90b256_store_rows) is also the library's pair-K kernel's
 * (attention_bwd_sm90_d256p.cuh, which the library launches since session 12: 0.87-0.90x the time
 * of the whole backward); this file's kernel stays for dev/attention_sm90's A/B runs ("lib" in the
 * harness's SET 9). The main kernel only;
 * prep, convert, the producer warp, the dQ writers, the tile order and the argument for
 * deterministic dQ and forward progress are the D = 64 / 128 kernel's (attention_bwd_sm90.cuh),
 * host side in attention_bwd_sm90.cu.
 *
 * Why a kernel of its own: the D = 64 / 128 consumers each hold dK and dV of their 64 keys in
 * registers (2 x 64 x D f32); at D = 256 that is 256 registers a thread. Here a work tile is
 * BN = 64 keys, a step BM = 64 queries, and the two consumer warpgroups split the step's work by
 * ROLE instead of by keys, so that each holds ONE 64 x 256 accumulator (128 registers) and no
 * product is computed twice:
 *   consumer 0: S^T = K Q^T (64 keys x 64 queries, both operands in shared memory),
 *     P^T = exp2(S^T scale log2e - lse2) (masked by position), P^T to shared memory as f32 (for
 *     consumer 1), dV += P^T dO (P^T from registers), then dQ[:, 0:128] = dS K[:, 0:128];
 *   consumer 1: dP^T = V dO^T, then (P^T from consumer 0) dS^T = P^T (dP^T - Di), dS^T to
 *     shared memory (16-bit, 128-byte swizzle), dK += dS^T Q (dS^T from registers), then
 *     dQ[:, 128:256] = dS K[:, 128:256] (dS^T read M-major, K N-major).
 * S^T and dP^T run together; consumer 0's dV runs under consumer 1's dS work; the dQ halves run
 * while the next step's Q and dO load (the stage is released as soon as dV and dK are done).
 * Per step 10.5 MFLOP in five products of 2.1 MFLOP (dQ as two halves), as at D = 128.
 *
 * Shared memory (~218 KB): K, V (32 KB each), ONE stage of Q and dO (32 KB each), two dQ half
 * buffers (64 x 128 f32, 32 KB each, one per consumer, each with two dQ writers taking its partials
 * in turns: cml__att90b_write_dq), dS^T (8 KB), P^T (f32, 16 KB). A second Q / dO stage (64 KB)
 * does not fit next to the dQ buffers.
 * The consumers' step is the D = 64 / 128 kernel's instruction diet (same products, same bits): the
 * producer's decoded step description (no division in the step; (b, hk) decoded once a tile, at its
 * end), P^T in an unmasked and a masked copy chosen by the uniform mask flag, every wgmma
 * descriptor's low word built once (one stage: every operand base is fixed), dS^T stored by
 * stmatrix.x4.
 * dQ partials go to the accumulator in halves: semaphore (and accumulator part of 8192 floats)
 * 2 ((b H_q + h) n_qt + m) + half; each half is laid out like a D = 128 tile (the convert kernel
 * reads it so). Both halves of a (query tile, key block) add with the same rank: the fixed
 * descending key-block order per half, so dQ is bitwise reproducible. */
#ifndef CML_KERNELS_CUDA_ATTENTION_ATTENTION_BWD_SM90_D256_CUH
#define CML_KERNELS_CUDA_ATTENTION_ATTENTION_BWD_SM90_D256_CUH

#include "kernels/cuda/attention/attention_bwd_sm90.cuh"

/* The D = 256 layout under the name the shared producer and dQ writers use (BM 64, 1 stage, 2 dQ
 * buffers). Barriers: kv_full, q_full, do_full, qd_empty, dq_full[2], dq_empty[2] (the shared
 * roles' order), then p_full, p_empty, ds_full, ds_empty, dq_full2[2]: the full barriers of the
 * second dQ writers (odd partials). */
template <>
struct cml__att90b_smem<256, 64, 1, 2> {
    enum {
        BN = 64,
        kv_bytes = 64 * 256 * 2,
        qd_bytes = 64 * 256 * 2,
        dq_bytes = 64 * 128 * 4, /* one consumer's half of a dQ partial */
        ds_bytes = 64 * 64 * 2,
        p_bytes = 64 * 64 * 4,
        off_k = 0,
        off_v = kv_bytes,
        off_q = 2 * kv_bytes,
        off_do = off_q + qd_bytes,
        off_dq = off_do + qd_bytes,
        off_ds = off_dq + 2 * dq_bytes, /* 1024-byte aligned: the swizzle */
        off_p = off_ds + ds_bytes,
        off_lse = off_p + p_bytes,
        off_di = off_lse + 64 * 4,
        off_meta = off_di + 64 * 4,
        off_dqmeta = off_meta + 16,
        off_bar = off_dqmeta + 2 * 16,
        n_bars = 14, /* the last two: the second dQ writers' full barriers (cml__att90b_write_dq) */
        total = 1024 + off_bar + 8 * n_bars
    };
};
typedef cml__att90b_smem<256, 64, 1, 2> cml__att90b256_sm;

/* dQ half (64 queries x 128) = dS K[:, half]: dS^T (64 keys x 64 queries) read M-major, K N-major;
 * ds_lo / k_lo the descriptor low words (cml__att90b_desc_lo, leading byte offset 64 128) of dS^T and
 * of the half's first 64-column block of K (blocks 64 x 128 bytes apart). */
template <int DT>
static __device__ __forceinline__ void cml__att90b256_mma_dq_lo(float *acc, uint32_t ds_lo, uint32_t k_lo) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        const uint64_t da = cml__att90b_desc_at(ds_lo, kk * 16 * 128), db = cml__att90b_desc_at(k_lo, kk * 16 * 128);
        if (DT == CML_ATT90_BF16) cml__wgmma_m64n128k16_bf16<1, 1>(acc, da, db, kk > 0);
        else cml__wgmma_m64n128k16_f16<1, 1>(acc, da, db, kk > 0);
    }
}

/* P^T = exp2(S^T scale log2e - lse2) in place (register 4q + 2r + e: key row r of the thread, query
 * 8q + qcol0 + e) and as 16-bit A fragments; MASKED = 1 zeroes keys at or past Sk_rel and, causal,
 * keys above the diagonal (positions relative to the query tile's first row), MASKED = 0 masks
 * nothing (the copy is chosen by the step's warp-uniform mask flag). */
template <int DT, int MASKED>
static __device__ __forceinline__ void cml__att90b256_p(float *sp, uint32_t *frag, const float *lse_s, int qcol0,
                                                        int key_a, int Sk_rel, int causal, int off, float scale_log2) {
#pragma unroll
    for (int q = 0; q < 8; q++) {
        const int col = 8 * q + qcol0;
        const float2 l2 = *(const float2 *)(lse_s + col);
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int idx = 4 * q + 2 * r + e;
                float pv = cml__att90_ex2(fmaf(sp[idx], scale_log2, -(e ? l2.y : l2.x)));
                if (MASKED) {
                    const int key = key_a + 8 * r, qi = col + e;
                    if (key >= Sk_rel || (causal && key > qi + off)) pv = 0.0f;
                }
                sp[idx] = pv;
            }
        frag[2 * q] = cml__att90_pack<DT>(sp[4 * q], sp[4 * q + 1]);
        frag[2 * q + 1] = cml__att90_pack<DT>(sp[4 * q + 2], sp[4 * q + 3]);
    }
}

/* Rows key, key + 8 of a 64 x 256 accumulator (dV, or dK with scale) to 16-bit global memory;
 * rows past S_kv skipped. */
template <int DT>
static __device__ __forceinline__ void cml__att90b256_store_rows(uint16_t *base, long long row_stride, const float *acc,
                                                                 int key, int Sk, int qcol0, float scale) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int j = key + 8 * r;
        if (j >= Sk) continue;
        uint16_t *row = base + (long long)j * row_stride;
#pragma unroll
        for (int q = 0; q < 32; q++)
            *(uint32_t *)(row + 8 * q + qcol0) =
                cml__att90_pack<DT>(acc[4 * q + 2 * r] * scale, acc[4 * q + 2 * r + 1] * scale);
    }
}

/* One consumer warpgroup (ROLE 0: S^T, P^T, dV, dQ half 0; ROLE 1: dP^T, dS^T, dK, dQ half 1); its
 * dQ halves alternate between the two writers of buffer ROLE (even steps: dq_full, odd: dq_full2). */
template <int DT, int ROLE, int VAR>
static __device__ __forceinline__ void cml__att90b256_consume(const cml__att90b_params &p, uint8_t *smem) {
    typedef cml__att90b256_sm sm;
    const int BN = 64, BM = 64;
    uint64_t *bars = (uint64_t *)(smem + sm::off_bar);
    uint64_t *kv_full = bars, *q_full = bars + 1, *do_full = bars + 2, *qd_empty = bars + 3;
    uint64_t *dq_full = bars + 4 + ROLE, *dq_empty = bars + 6 + ROLE;
    uint64_t *dq_full2 = bars + 12 + ROLE; /* odd partials' (the second writer's) full barrier */
    uint64_t *p_full = bars + 8, *p_empty = bars + 9, *ds_full = bars + 10, *ds_empty = bars + 11;
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const int key_loc = 16 * warp + lane / 4; /* this thread's key rows of S^T / dP^T / dK / dV: key_loc, +8 */
    const int qcol0 = 2 * (lane % 4);
    const int off = p.Sk - p.Sq;
    const uint32_t k_addr = cml__smem_addr(smem + sm::off_k), v_addr = cml__smem_addr(smem + sm::off_v);
    const uint32_t q_addr = cml__smem_addr(smem + sm::off_q), do_addr = cml__smem_addr(smem + sm::off_do);
    const uint32_t ds_addr = cml__smem_addr(smem + sm::off_ds);
    /* the descriptor low words of every operand, once (S^T / dP^T: leading byte offset 16; dV / dK's B
     * and the dQ half's operands: 64 128) */
    const uint32_t nt_a_lo = cml__att90b_desc_lo(ROLE == 0 ? k_addr : v_addr, 16);
    const uint32_t nt_b_lo = cml__att90b_desc_lo(ROLE == 0 ? q_addr : do_addr, 16);
    const uint32_t rs_b_lo = cml__att90b_desc_lo(ROLE == 0 ? do_addr : q_addr, BM * 128);
    const uint32_t dq_a_lo = cml__att90b_desc_lo(ds_addr, BN * 128);
    const uint32_t dq_b_lo = cml__att90b_desc_lo(k_addr + ROLE * 2 * BN * 128, BN * 128);
    const int4 *meta = (const int4 *)(smem + sm::off_meta);
    int4 *dq_meta = (int4 *)(smem + sm::off_dqmeta) + ROLE;
    const float *lse_s = (const float *)(smem + sm::off_lse), *di_s = (const float *)(smem + sm::off_di);
    float4 *pbuf = (float4 *)(smem + sm::off_p);
    float4 *dqs = (float4 *)(smem + sm::off_dq + ROLE * sm::dq_bytes);
    float acc[128]; /* dV (ROLE 0) or dK (ROLE 1) of the tile's 64 keys, all 256 columns */
    int tcount = 0;
    cml__att90b_prof<VAR> pf; /* dev VAR PROF: slots 20 ROLE + 0..12 (bwd_harness's SLOT_NAMES at HD 256), 17 steps */
    pf.init(t == 0 ? p.prof : NULL);
    const int ps = 20 * ROLE;
    for (int it = 0;; it++) {
        const uint32_t ph = it & 1; /* one stage: every barrier below completes once per step */
        cml__mbar_wait(q_full, ph); /* Q, lse2 of step it (and its description) */
        pf.lap(ps + 0);
        int4 mt = make_int4(0, 0, 0, 0);
        if (lane == 0) mt = meta[0];
        /* shuffled from lane 0: warp-uniform in the compiler's eyes (no C7520 serialization) */
        const int tile = __shfl_sync(0xffffffffu, mt.x, 0), h = __shfl_sync(0xffffffffu, mt.y, 0);
        const int m = __shfl_sync(0xffffffffu, mt.z, 0), flags = __shfl_sync(0xffffffffu, mt.w, 0);
        if (tile < 0) { /* pass the end on to this consumer's dQ writer */
            if (it > 0) cml__mbar_wait(dq_empty, (it - 1) & 1);
            if (t == 0) *dq_meta = make_int4(-1, 0, 0, 0);
            __syncwarp();
            if (lane == 0) cml__mbar_arrive(it & 1 ? dq_full2 : dq_full);
            break;
        }
        /* the step description, decoded by the producer: tile = the semaphore index, h = j0 */
        const int j0 = h, n = (int)((unsigned)j0 / BN), i0 = m * BM;
        const bool mask = (flags & CML_ATT90B_MASK) != 0;
        const bool last = (flags & CML_ATT90B_LAST) != 0;
        if (flags & CML_ATT90B_FIRST) {
            cml__mbar_wait(kv_full, tcount & 1); /* this tile's K, V */
#pragma unroll
            for (int i = 0; i < 128; i++) acc[i] = 0.0f;
        }
        float sp[32]; /* S^T (ROLE 0) or dP^T (ROLE 1): register 4q + 2r + e = key row r, query 8q + qcol0 + e */
        uint32_t frag[16]; /* P^T or dS^T as 16-bit A fragments */
        if (ROLE == 1) cml__mbar_wait(do_full, ph);
        pf.lap(ps + 1);
        cml__wgmma_fence();
        cml__att90b_mma_nt_lo<DT, 256, 64, 64>(sp, nt_a_lo, nt_b_lo); /* S^T = K Q^T or dP^T = V dO^T */
        cml__wgmma_commit();
        cml__wgmma_wait<0>();
        cml__wgmma_reg_fence<32>(sp);
        pf.lap(ps + 2);
        if (ROLE == 0) {
            if (mask) /* warp-uniform (shuffled): no divergence */
                cml__att90b256_p<DT, 1>(sp, frag, lse_s, qcol0, j0 + key_loc - i0, p.Sk - i0, p.causal, off,
                                        p.scale_log2);
            else
                cml__att90b256_p<DT, 0>(sp, frag, lse_s, qcol0, 0, 0, 0, 0, p.scale_log2);
            pf.lap(ps + 3);
            /* P^T (f32) for consumer 1, in this thread's fragment order (conflict-free float4s) */
            if (it > 0) cml__mbar_wait(p_empty, (it - 1) & 1);
            pf.lap(ps + 4);
#pragma unroll
            for (int q = 0; q < 8; q++) pbuf[q * 128 + t] = make_float4(sp[4 * q], sp[4 * q + 1], sp[4 * q + 2], sp[4 * q + 3]);
            cml__mbar_arrive(p_full);
            cml__mbar_wait(do_full, ph);
            pf.lap(ps + 5);
            cml__wgmma_fence();
            cml__att90b_mma_rs_lo<DT, 256, 64>(acc, frag, rs_b_lo); /* dV += P^T dO */
            cml__wgmma_commit();
            pf.lap(ps + 6);
        } else {
            float pp[32];
            cml__mbar_wait(p_full, ph);
            pf.lap(ps + 3);
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const float4 v = pbuf[q * 128 + t];
                pp[4 * q] = v.x, pp[4 * q + 1] = v.y, pp[4 * q + 2] = v.z, pp[4 * q + 3] = v.w;
            }
            cml__mbar_arrive(p_empty);
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const float2 dd = *(const float2 *)(di_s + 8 * q + qcol0);
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int idx = 4 * q + 2 * r + e;
                        sp[idx] = pp[idx] * (sp[idx] - (e ? dd.y : dd.x));
                    }
                frag[2 * q] = cml__att90_pack<DT>(sp[4 * q], sp[4 * q + 1]);
                frag[2 * q + 1] = cml__att90_pack<DT>(sp[4 * q + 2], sp[4 * q + 3]);
            }
            pf.lap(ps + 4);
            /* dS^T for both dQ halves, once both consumers' dQ products of the last step read it */
            if (it > 0) cml__mbar_wait(ds_empty, (it - 1) & 1);
            pf.lap(ps + 5);
            cml__att90b_store_ds_stsm<64>(smem + sm::off_ds, frag, key_loc, lane);
            cml__fence_proxy_async_smem();
            __syncwarp(); /* the warp's stmatrix wrote other lanes' rows: all fenced first */
            cml__mbar_arrive(ds_full);
            cml__wgmma_fence();
            cml__att90b_mma_rs_lo<DT, 256, 64>(acc, frag, rs_b_lo); /* dK += dS^T Q */
            cml__wgmma_commit();
            pf.lap(ps + 6);
        }
        float dq[64];
        cml__mbar_wait(ds_full, ph); /* every row of dS^T is written */
        pf.lap(ps + 7);
        cml__wgmma_fence();
        cml__att90b256_mma_dq_lo<DT>(dq, dq_a_lo, dq_b_lo);
        cml__wgmma_commit();
        /* Q, dO, lse2, Di are read once dV / dK are done: the next step's loads overlap the dQ
         * product; K (read by it) stays until the tile's last step is released, after it */
        if (!last) {
            cml__wgmma_wait<1>();
            cml__mbar_arrive(qd_empty);
        }
        pf.lap(ps + 8);
        cml__wgmma_wait<0>();
        cml__wgmma_reg_fence<128>(acc);
        cml__wgmma_reg_fence<64>(dq);
        cml__att90_keep<16>(frag);
        if (t == 0) cml__mbar_arrive(ds_empty);
        if (last) cml__mbar_arrive(qd_empty);
        pf.lap(ps + 9);
        /* the dQ half to writer ROLE, in the D = 128 tile's fragment order (float4 q * 256 + c * 128
         * + t: 64-column block c = q / 8 of the half, q % 8 within it) */
        if (it > 0) cml__mbar_wait(dq_empty, (it - 1) & 1);
        pf.lap(ps + 10);
#pragma unroll
        for (int q = 0; q < 16; q++)
            dqs[(q % 8) * 256 + (q / 8) * 128 + t] = make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
        if (t == 0)
            *dq_meta = make_int4(tile * 2 + ROLE, cml__att90b_rank<64, 64>(p, m, n), 0, 0);
        cml__fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) cml__mbar_arrive(it & 1 ? dq_full2 : dq_full);
        pf.lap(ps + 11);
        pf.count(ps + 17);
        if (last) {
            /* once a tile: (b, hk) of the semaphore index (b Hq + h) n_qt + m, h in group hk */
            const int bh = tile / p.n_qt, b = bh / p.Hq, hk = bh % p.Hq / p.group;
            if (ROLE == 0)
                cml__att90b256_store_rows<DT>((uint16_t *)p.dV + b * p.dv_s[0] + hk * p.dv_s[2], p.dv_s[1], acc,
                                              j0 + key_loc, p.Sk, qcol0, 1.0f);
            else
                cml__att90b256_store_rows<DT>((uint16_t *)p.dK + b * p.dk_s[0] + hk * p.dk_s[2], p.dk_s[1], acc,
                                              j0 + key_loc, p.Sk, qcol0, p.scale);
            tcount++;
            pf.lap(ps + 12);
        }
    }
    if ((VAR & CML_ATT90B_V_EXITT) && t == 0) p.prof[64 * blockIdx.x + 61 + ROLE] = cml__att90b_globaltimer();
}

template <int DT, int VAR = 0>
static __global__ void __launch_bounds__(CML_ATT90B_THREADS, 1)
    cml__att90b256_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                          const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                          const __grid_constant__ cml__att90b_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef cml__att90b256_sm sm;
    extern __shared__ uint8_t cml__att90b256_smem_raw[];
    uint8_t *smem = cml__att90b256_smem_raw + ((1024u - (cml__smem_addr(cml__att90b256_smem_raw) & 1023u)) & 1023u);
    uint64_t *bars = (uint64_t *)(smem + sm::off_bar);
    if (threadIdx.x == 0) {
        cml__mbar_init(&bars[0], 1);   /* kv_full */
        cml__mbar_init(&bars[1], 1);   /* q_full */
        cml__mbar_init(&bars[2], 1);   /* do_full */
        cml__mbar_init(&bars[3], 256); /* qd_empty: one arrival per consumer thread */
        for (int c = 0; c < 2; c++) {
            cml__mbar_init(&bars[4 + c], 4); /* dq_full: one arrival per warp of consumer c */
            cml__mbar_init(&bars[6 + c], 1); /* dq_empty: the writer */
        }
        cml__mbar_init(&bars[8], 128);  /* p_full: consumer 0's threads wrote P^T */
        cml__mbar_init(&bars[9], 128);  /* p_empty: consumer 1's threads read it */
        cml__mbar_init(&bars[10], 128); /* ds_full: consumer 1's threads wrote dS^T */
        cml__mbar_init(&bars[11], 2);   /* ds_empty: both consumers' dQ products read it */
        for (int c = 0; c < 2; c++) cml__mbar_init(&bars[12 + c], 4); /* dq_full2: as dq_full, odd partials */
        cml__mbar_init_fence();
    }
    __syncthreads();
    cml__pdl_launch_dependents(); /* the convert kernel may be scheduled (attention_bwd_sm90.cuh) */
    const int wg = threadIdx.x / 128;
    if ((VAR & CML_ATT90B_V_EXITT) && threadIdx.x == 0) p.prof[64 * blockIdx.x + 60] = cml__att90b_globaltimer();
    if (wg == 0) {
        cml__regs_dealloc<CML_ATT90B_PRODUCER_REGS>();
        if (threadIdx.x == 0) cml__att90b_produce<256, 64, 1, 2, VAR>(&map_q, &map_k, &map_v, &map_do, p, smem);
        else if (threadIdx.x % 32 == 0 && threadIdx.x / 32 <= 2)
            cml__att90b_write_dq<256, 64, 1, 2, VAR>(p, smem, threadIdx.x / 32 - 1);
        else if ((threadIdx.x & ~16u) == 96)
            /* the second writers of buffers 0, 1: threads 96, 112 (lanes 0, 16 of warp 3), sharing a warp only
             * with each other (buffer 1's on lane 16 of the producer's warp measured 1.5-6% slower, session 9) */
            cml__att90b_write_dq<256, 64, 1, 2, VAR>(p, smem, threadIdx.x % 32 / 16, 1);
    } else {
        cml__regs_alloc<CML_ATT90B_CONSUMER_REGS>();
        if (__shfl_sync(0xffffffffu, wg, 0) == 1) cml__att90b256_consume<DT, 0, VAR>(p, smem);
        else cml__att90b256_consume<DT, 1, VAR>(p, smem);
    }
#endif
}

#endif
