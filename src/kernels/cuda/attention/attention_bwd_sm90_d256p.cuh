/* The Hopper (sm_90a) attention backward for head dim D = 256 (issue 6): the main kernel, "pair-K"
 * 2-CTA clusters; prep, convert, the dQ writers and the dQ order are attention_bwd_sm90.cuh's, the
 * launch attention_bwd_sm90.cu's. History: a one-CTA kernel (sessions 6-11, in git up to commit
 * 52fc679 as attention_bwd_sm90_d256.cuh) ran the same consumer step; this one (plan A of
 * dev/attention_sm90/README.md, "Plan (session 10 study, helper h10d)", built in session 11 by helper
 * h11d, made the library's in session 12) takes 0.87-0.90x its time at S = 2k-16k. The README
 * section "Session 11 (helper h11d, ...): pair-K D = 256 backward" has the protocol table and desk
 * check.
 *
 * Why a kernel of its own: the D = 64 / 128 consumers each hold dK and dV of their 64 keys in
 * registers (2 x 64 x D f32); at D = 256 that is 256 registers a thread. Here a CTA's block is
 * BN = 64 keys, a step BM = 64 queries, and the two consumer warpgroups split the step by ROLE
 * instead of by keys, so that each holds ONE 64 x 256 accumulator (128 registers):
 *   consumer 0: S^T = K Q^T (both operands in shared memory), P^T = exp2(S^T scale log2e - lse2)
 *     (masked by position), P^T to shared memory as f32 (for consumer 1), dV += P^T dO (P^T from
 *     registers);
 *   consumer 1: dP^T = V dO^T, then dS^T = P^T (dP^T - Di), dS^T to shared memory (16-bit,
 *     128-byte swizzle, stmatrix), dK += dS^T Q (dS^T from registers).
 * The step is the D = 64 / 128 kernel's instruction diet: decoded step descriptions from the
 * producer, an unmasked and a masked P^T copy chosen by the uniform mask flag, wgmma descriptor low
 * words built once.
 *
 * Why pairs: with one CTA a block, each consumer added a 64 x 128 dQ half per key block and query
 * tile in a fixed descending key-block order; block n + 1 reaches a query tile one step before
 * block n, so each link of the chain had one step of slack, and session 11 measured the turn wait
 * costing 4-8% of the backward. Here a cluster of two CTAs takes the key blocks 2p (rank 0) and
 * 2p + 1 (rank 1) of a kv head together, in lockstep over the same steps (query tiles from block
 * 2p's first, every head of the group). Each CTA computes dK, dV of its own block (rank 1's extra
 * leading steps are fully masked and add exact zeros) and sends its dS^T (8 KB a step) into the
 * peer's shared memory (one cp.async.bulk shared::cluster). Then each consumer c of rank r
 * computes the dQ QUARTER q = 2 r + c (64 queries x 64 columns 64 q ..) over BOTH key blocks:
 * dQ[:, q] = [dS_2p | dS_2p+1] [K_2p[:, q] ; K_2p+1[:, q]] (k = 128: block 2p's four k-steps
 * first, then block 2p + 1's, summed inside the wgmma accumulator). So one ordered add per pair,
 * query tile and quarter: half the adds and bytes, chains of pairs (two steps of slack), and 32
 * dQ registers a consumer instead of 64.
 * Deterministic: each dQ element is one wgmma sum over the pair's 128 keys in a fixed k order,
 * then added to the accumulator in descending PAIR order (semaphore 4 tile + q counts the pairs
 * that have added; rank = last pair that sees the tile - p).
 * Forward progress: units (g, p) numbered like the D = 64 / 128 kernel's tiles with pairs for key blocks
 * (cml__att90b256p_unit_pos: (g, p + 1) before (g, p)); rank 0 claims them from the counter and
 * hands each to rank 1 (a one-slot mailbox in rank 1's shared memory); a unit waits only on the
 * semaphores of pairs p + 1 .. of its head, claimed earlier; a cluster that claimed a unit is
 * resident (both CTAs: cluster launch). The header argument of attention_bwd_sm90.cuh applies with
 * units for tiles; inside a cluster the two CTAs wait on each other only for the same step.
 * Shared memory (214,728 bytes): K, V (32 KB each), Q, dO (one stage, 32 KB each), the peer block's
 * K columns 128 r .. 128 r + 127 (16 KB, loaded with K), two dQ quarter buffers (16 KB each, one per
 * consumer, each with two dQ writers taking its partials in turns: cml__att90b_write_dq), dS^T own
 * and the peer's (8 KB each), P^T (f32, 16 KB), lse2, Di, step descriptions, the mailbox, 17
 * barriers. */
#ifndef CML_KERNELS_CUDA_ATTENTION_ATTENTION_BWD_SM90_D256P_CUH
#define CML_KERNELS_CUDA_ATTENTION_ATTENTION_BWD_SM90_D256P_CUH

#include "kernels/cuda/attention/attention_bwd_sm90.cuh"

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

/* The layout, under the field names cml__att90b_write_dq reads (its barrier positions: dq_full at
 * 1 + 3 ST = 4, dq_empty at 6, the second writers' full barriers last).
 * Barriers (arrival counts): 0 kv_full (1 + tx), 1 q_full (1 + tx), 2 do_full (1 + tx), 3 qd_empty
 * (256), 4-5 dq_full[c] (4), 6-7 dq_empty[c] (1), 8 p_full (128), 9 p_empty (128), 10 ds_full
 * (128: consumer 1's threads wrote dS^T), 11 ds_empty (4: this CTA's two consumers and the peer's
 * two read the pair's dS^T of the step), 12 dsx_full (1 + 8192 tx: the peer's dS^T arrived in
 * dsx; the peer's sender arrives), 13 unit_full (rank 1: 1, rank 0's producer), 14 unit_empty
 * (rank 0: 1, rank 1's producer), 15-16 dq_full2[c] (4). */
struct cml__att90b256p_sm {
    enum {
        BN = 64,
        kv_bytes = 64 * 256 * 2,
        qd_bytes = 64 * 256 * 2,
        kx_bytes = 64 * 128 * 2, /* the peer block's K, this rank's 128 columns */
        dq_bytes = 64 * 64 * 4,  /* one consumer's dQ quarter */
        ds_bytes = 64 * 64 * 2,
        p_bytes = 64 * 64 * 4,
        off_k = 0,
        off_v = kv_bytes,
        off_q = 2 * kv_bytes,
        off_do = off_q + qd_bytes,
        off_kx = off_do + qd_bytes,
        off_dq = off_kx + kx_bytes,
        off_ds = off_dq + 2 * dq_bytes, /* 1024-byte aligned (swizzle), as dsx and kx */
        off_dsx = off_ds + ds_bytes,
        off_p = off_dsx + ds_bytes,
        off_lse = off_p + p_bytes,
        off_di = off_lse + 64 * 4,
        off_meta = off_di + 64 * 4,
        off_dqmeta = off_meta + 16,
        off_unit = off_dqmeta + 2 * 16,
        off_bar = off_unit + 16,
        n_bars = 17,
        total = 1024 + off_bar + 8 * n_bars
    };
};

/* Unit -> (pair pr, kv head g): cml__att90b_tile_pos with n_pairs key-block pairs for key blocks. */
static __device__ __forceinline__ void cml__att90b256p_unit_pos(const cml__att90b_params &p, int n_pairs, int unit,
                                                                int &pr, int &g) {
    const int u = unit >> p.hshift, grp = u / n_pairs;
    pr = n_pairs - 1 - (u - grp * n_pairs);
    g = grp << p.hshift | (unit & ((1 << p.hshift) - 1));
}

/* The rank of pair pr among the pairs that add to query tile m: the last pair that sees the tile
 * adds first (cml__att90b_rank with pairs of 128 keys; a pair sees the tile when block 2 pr does). */
static __device__ __forceinline__ int cml__att90b256p_rank(const cml__att90b_params &p, int m, int pr) {
    int last = (p.n_kb + 1) / 2 - 1;
    if (p.causal) {
        const int i_last = ((m + 1) * 64 < p.Sq ? (m + 1) * 64 : p.Sq) - 1;
        const int seen = (i_last + p.Sk - p.Sq) / 128;
        last = seen < last ? seen : last;
    }
    return last - pr;
}

/* dQ quarter (64 queries x 64) = dS_2p K_2p[:, q] + dS_2p+1 K_2p+1[:, q]: a0 / b0 the descriptor low
 * words of block 2p's dS^T (M-major) and K quarter (N-major), a1 / b1 block 2p + 1's. */
template <int DT>
static __device__ __forceinline__ void cml__att90b256p_mma_dq(float *acc, uint32_t a0, uint32_t b0, uint32_t a1,
                                                              uint32_t b1) {
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
        const uint32_t a = kk < 4 ? a0 : a1, b = kk < 4 ? b0 : b1;
        const uint64_t da = cml__att90b_desc_at(a, (kk % 4) * 16 * 128), db = cml__att90b_desc_at(b, (kk % 4) * 16 * 128);
        if (DT == CML_ATT90_BF16) cml__wgmma_m64n64k16_bf16<1, 1>(acc, da, db, kk > 0);
        else cml__wgmma_m64n64k16_f16<1, 1>(acc, da, db, kk > 0);
    }
}

/* Producer (thread 0 of each CTA): rank 0 claims units and hands each to rank 1 (mailbox: rank 0
 * waits unit_empty for claim j - 1, stores the claim into rank 1's slot and arrives on its unit_full
 * (release.cluster); rank 1 waits unit_full (acquire.cluster), reads, arrives on rank 0's
 * unit_empty); both load K, V of their own block 2 pr + r, the peer block's K columns 128 r .., and
 * the same steps as the D = 64 / 128 producer (every head of the group, query tiles from block 2 pr's
 * first up), flags and mask of the own block. */
template <int VAR>
static __device__ __forceinline__ void cml__att90b256p_produce(const CUtensorMap *map_q, const CUtensorMap *map_k,
                                                               const CUtensorMap *map_v, const CUtensorMap *map_do,
                                                               const cml__att90b_params &p, uint8_t *smem) {
    typedef cml__att90b256p_sm sm;
    const int BN = 64, BM = 64;
    uint64_t *bars = (uint64_t *)(smem + sm::off_bar);
    uint64_t *kv_full = bars, *q_full = bars + 1, *do_full = bars + 2, *qd_empty = bars + 3;
    const uint32_t unit_full = cml__smem_addr(bars + 13), unit_empty = cml__smem_addr(bars + 14);
    const uint32_t slot = cml__smem_addr(smem + sm::off_unit);
    int4 *meta = (int4 *)(smem + sm::off_meta);
    float *lse_s = (float *)(smem + sm::off_lse), *di_s = (float *)(smem + sm::off_di);
    cml__tma_prefetch_map(map_q);
    cml__tma_prefetch_map(map_k);
    cml__tma_prefetch_map(map_v);
    cml__tma_prefetch_map(map_do);
    int it = 0;
    for (int j = 0;; j++) {
        /* the rank read where it is used (volatile: not kept in one of the 24 registers across the loop) */
        int unit;
        if (cml__cluster_rank() == 0) {
            unit = atomicAdd(p.tile_counter, 1);
            if (j > 0) cml__mbar_wait_cluster_at(unit_empty, (j - 1) & 1); /* rank 1 read claim j - 1 */
            cml__st_cluster_u32(slot, 1, (uint32_t)unit);
            cml__mbar_arrive_cluster_rel_at(unit_full, 1);
        } else {
            cml__mbar_wait_cluster_at(unit_full, j & 1);
            unit = *(volatile int *)(smem + sm::off_unit);
            cml__mbar_arrive_cluster_rel_at(unit_empty, 0);
        }
        if (unit >= p.total_tiles) break; /* total_tiles: units (B H_kv n_pairs) for this kernel */
        int pr, g;
        cml__att90b256p_unit_pos(p, (p.n_kb + 1) / 2, unit, pr, g);
        const int r = (int)cml__cluster_rank();
        const int b = g / p.Hkv, hk = g % p.Hkv;
        /* own block 2 pr + r; rank 1's of an odd n_kb's last pair lies past S_kv: TMA fills zeros and
         * the mask zeroes every P (its dS^T is 0, it stores no dK / dV row) */
        const int j0 = (2 * pr + r) * BN, jx = (2 * pr + 1 - r) * BN;
        const int m_first = cml__att90b_first_qtile<BM>(p, 2 * pr * BN);
        if (it > 0) cml__mbar_wait(qd_empty, (it - 1) & 1); /* the last unit's K, V, K half are read */
        cml__mbar_arrive_expect_tx(kv_full, 2 * sm::kv_bytes + sm::kx_bytes);
        cml__att90_load<256>(smem + sm::off_k, map_k, kv_full, j0, hk, b, BN);
        cml__att90_load<256>(smem + sm::off_v, map_v, kv_full, j0, hk, b, BN);
        for (int c = 0; c < 2; c++)
            cml__tma_load_4d(smem + sm::off_kx + c * BN * 128, map_k, kv_full, 128 * r + 64 * c, hk, jx, b);
        const int h_end = (hk + 1) * p.group;
        int flags = CML_ATT90B_FIRST;
        for (int h = hk * p.group; h < h_end; h++) {
            for (int m = m_first; m < p.n_qt; m++, it++) {
                if (it > 0) cml__mbar_wait(qd_empty, (it - 1) & 1); /* step it - 1 is done with the stage */
                if (h == h_end - 1 && m == p.n_qt - 1) flags |= CML_ATT90B_LAST;
                const int idx = (b * p.Hq + h) * p.n_qt + m, i0 = m * BM, off = p.Sk - p.Sq;
                const bool mask = j0 + BN > p.Sk || (p.causal && i0 < j0 + BN - 1 - off);
                meta[0] = make_int4(idx, j0, m, flags | (mask ? CML_ATT90B_MASK : 0));
                flags = 0;
                const int row = idx * BM;
                cml__mbar_arrive_expect_tx(q_full, sm::qd_bytes + BM * 4);
                cml__att90_load<256>(smem + sm::off_q, map_q, q_full, m * BM, h, b, BM);
                cml__bulk_load(lse_s, p.lse2 + row, BM * 4, q_full);
                cml__mbar_arrive_expect_tx(do_full, sm::qd_bytes + BM * 4);
                cml__att90_load<256>(smem + sm::off_do, map_do, do_full, m * BM, h, b, BM);
                cml__bulk_load(di_s, p.di + row, BM * 4, do_full);
            }
        }
    }
    if (it > 0) cml__mbar_wait(qd_empty, (it - 1) & 1);
    meta[0] = make_int4(-1, 0, 0, 0);
    cml__mbar_arrive(q_full);
}

/* One consumer warpgroup of rank r: the D = 256 step (header; ROLE 0: S^T, P^T, dV; ROLE 1: dP^T,
 * dS^T, dK) up to dS^T; consumer 1's thread 0 sends dS^T to the peer; then each consumer computes
 * dQ quarter 2 r + ROLE over both blocks and hands it to its buffer's writers. */
template <int DT, int ROLE, int VAR>
static __device__ __forceinline__ void cml__att90b256p_consume(const cml__att90b_params &p, uint8_t *smem, int r) {
    typedef cml__att90b256p_sm sm;
    const int BN = 64, BM = 64;
    const uint32_t peer = (uint32_t)(r ^ 1);
    uint64_t *bars = (uint64_t *)(smem + sm::off_bar);
    uint64_t *kv_full = bars, *q_full = bars + 1, *do_full = bars + 2, *qd_empty = bars + 3;
    uint64_t *dq_full = bars + 4 + ROLE, *dq_empty = bars + 6 + ROLE, *dq_full2 = bars + 15 + ROLE;
    uint64_t *p_full = bars + 8, *p_empty = bars + 9, *ds_full = bars + 10, *ds_empty = bars + 11;
    uint64_t *dsx_full = bars + 12;
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const int key_loc = 16 * warp + lane / 4;
    const int qcol0 = 2 * (lane % 4);
    const int off = p.Sk - p.Sq;
    const uint32_t k_addr = cml__smem_addr(smem + sm::off_k), v_addr = cml__smem_addr(smem + sm::off_v);
    const uint32_t q_addr = cml__smem_addr(smem + sm::off_q), do_addr = cml__smem_addr(smem + sm::off_do);
    const uint32_t ds_addr = cml__smem_addr(smem + sm::off_ds), dsx_addr = cml__smem_addr(smem + sm::off_dsx);
    const uint32_t kx_addr = cml__smem_addr(smem + sm::off_kx);
    const uint32_t nt_a_lo = cml__att90b_desc_lo(ROLE == 0 ? k_addr : v_addr, 16);
    const uint32_t nt_b_lo = cml__att90b_desc_lo(ROLE == 0 ? q_addr : do_addr, 16);
    const uint32_t rs_b_lo = cml__att90b_desc_lo(ROLE == 0 ? do_addr : q_addr, BM * 128);
    /* the dQ quarter's operands: own dS^T with own K's column block 2 r + ROLE, the peer's dS^T with
     * the peer block's K (column block ROLE of this rank's half); block 2p (rank 0's) first */
    const uint32_t own_a = cml__att90b_desc_lo(ds_addr, BN * 128);
    const uint32_t own_b = cml__att90b_desc_lo(k_addr + (2 * r + ROLE) * BN * 128, BN * 128);
    const uint32_t px_a = cml__att90b_desc_lo(dsx_addr, BN * 128);
    const uint32_t px_b = cml__att90b_desc_lo(kx_addr + ROLE * BN * 128, BN * 128);
    const uint32_t a0 = r == 0 ? own_a : px_a, b0 = r == 0 ? own_b : px_b;
    const uint32_t a1 = r == 0 ? px_a : own_a, b1 = r == 0 ? px_b : own_b;
    const int4 *meta = (const int4 *)(smem + sm::off_meta);
    int4 *dq_meta = (int4 *)(smem + sm::off_dqmeta) + ROLE;
    const float *lse_s = (const float *)(smem + sm::off_lse), *di_s = (const float *)(smem + sm::off_di);
    float4 *pbuf = (float4 *)(smem + sm::off_p);
    float4 *dqs = (float4 *)(smem + sm::off_dq + ROLE * sm::dq_bytes);
    float acc[128]; /* dV (ROLE 0) or dK (ROLE 1) of the block's 64 keys, all 256 columns */
    int tcount = 0;
    cml__att90b_prof<VAR> pf; /* slots 20 ROLE + 0 .. 17 (7: the ds_full + dsx_full wait) */
    pf.init(t == 0 ? p.prof : NULL);
    const int ps = 20 * ROLE;
    for (int it = 0;; it++) {
        const uint32_t ph = it & 1;
        cml__mbar_wait(q_full, ph);
        pf.lap(ps + 0);
        int4 mt = make_int4(0, 0, 0, 0);
        if (lane == 0) mt = meta[0];
        const int tile = __shfl_sync(0xffffffffu, mt.x, 0), h = __shfl_sync(0xffffffffu, mt.y, 0);
        const int m = __shfl_sync(0xffffffffu, mt.z, 0), flags = __shfl_sync(0xffffffffu, mt.w, 0);
        if (tile < 0) { /* pass the end on to this consumer's dQ writers */
            if (it > 0) cml__mbar_wait(dq_empty, (it - 1) & 1);
            if (t == 0) *dq_meta = make_int4(-1, 0, 0, 0);
            __syncwarp();
            if (lane == 0) cml__mbar_arrive(it & 1 ? dq_full2 : dq_full);
            break;
        }
        const int j0 = h, i0 = m * BM;
        const bool mask = (flags & CML_ATT90B_MASK) != 0;
        const bool last = (flags & CML_ATT90B_LAST) != 0;
        if (flags & CML_ATT90B_FIRST) {
            cml__mbar_wait(kv_full, tcount & 1); /* K, V, the peer block's K half */
#pragma unroll
            for (int i = 0; i < 128; i++) acc[i] = 0.0f;
        }
        float sp[32];
        uint32_t frag[16];
        if (ROLE == 1) cml__mbar_wait(do_full, ph);
        pf.lap(ps + 1);
        cml__wgmma_fence();
        cml__att90b_mma_nt_lo<DT, 256, 64, 64>(sp, nt_a_lo, nt_b_lo);
        cml__wgmma_commit();
        cml__wgmma_wait<0>();
        cml__wgmma_reg_fence<32>(sp);
        pf.lap(ps + 2);
        if (ROLE == 0) {
            if (mask)
                cml__att90b256_p<DT, 1>(sp, frag, lse_s, qcol0, j0 + key_loc - i0, p.Sk - i0, p.causal, off,
                                        p.scale_log2);
            else
                cml__att90b256_p<DT, 0>(sp, frag, lse_s, qcol0, 0, 0, 0, 0, p.scale_log2);
            pf.lap(ps + 3);
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
                for (int rr = 0; rr < 2; rr++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int idx = 4 * q + 2 * rr + e;
                        sp[idx] = pp[idx] * (sp[idx] - (e ? dd.y : dd.x));
                    }
                frag[2 * q] = cml__att90_pack<DT>(sp[4 * q], sp[4 * q + 1]);
                frag[2 * q + 1] = cml__att90_pack<DT>(sp[4 * q + 2], sp[4 * q + 3]);
            }
            pf.lap(ps + 4);
            /* dS^T of step it, once the pair's four dQ products of step it - 1 read both CTAs' dS^T
             * (ds_empty counts the peer's two too: then the copy of step it - 1 out of this buffer is
             * complete and the peer's dsx is free for this step's) */
            if (it > 0) cml__mbar_wait(ds_empty, (it - 1) & 1);
            pf.lap(ps + 5);
            cml__att90b_store_ds_stsm<64>(smem + sm::off_ds, frag, key_loc, lane);
            cml__fence_proxy_async_smem();
            __syncwarp();
            cml__mbar_arrive(ds_full);
            cml__wgmma_fence();
            cml__att90b_mma_rs_lo<DT, 256, 64>(acc, frag, rs_b_lo); /* dK += dS^T Q */
            cml__wgmma_commit();
            pf.lap(ps + 6);
        }
        float dq[32];
        cml__mbar_wait(ds_full, ph); /* every row of this CTA's dS^T is written */
        if (ROLE == 1 && t == 0) { /* to the peer's dsx, completing on its dsx_full (phase it) */
            const uint32_t dsx_full_a = cml__smem_addr(dsx_full);
            cml__mbar_arrive_expect_tx_cluster_at(dsx_full_a, peer, sm::ds_bytes);
            cml__bulk_copy_cluster_at(dsx_addr, ds_addr, sm::ds_bytes, dsx_full_a, peer);
        }
        cml__mbar_wait(dsx_full, ph); /* the peer's dS^T of this step */
        pf.lap(ps + 7);
        cml__wgmma_fence();
        cml__att90b256p_mma_dq<DT>(dq, a0, b0, a1, b1);
        cml__wgmma_commit();
        if (!last) {
            cml__wgmma_wait<1>();
            cml__mbar_arrive(qd_empty);
        }
        pf.lap(ps + 8);
        cml__wgmma_wait<0>();
        cml__wgmma_reg_fence<128>(acc);
        cml__wgmma_reg_fence<32>(dq);
        cml__att90_keep<16>(frag);
        if (t == 0) { /* this consumer's reads of dS^T and dsx are done: here and in the peer */
            cml__mbar_arrive(ds_empty);
            cml__mbar_arrive_cluster(ds_empty, peer);
        }
        if (last) cml__mbar_arrive(qd_empty);
        pf.lap(ps + 9);
        if (it > 0) cml__mbar_wait(dq_empty, (it - 1) & 1);
        pf.lap(ps + 10);
        /* the quarter contiguous: float4 q * 128 + t (the convert's QUART layout) */
#pragma unroll
        for (int q = 0; q < 8; q++) dqs[q * 128 + t] = make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
        if (t == 0) *dq_meta = make_int4(tile * 4 + 2 * r + ROLE, cml__att90b256p_rank(p, m, j0 / 128), 0, 0);
        cml__fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) cml__mbar_arrive(it & 1 ? dq_full2 : dq_full);
        pf.lap(ps + 11);
        pf.count(ps + 17);
        if (last) {
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
}

/* Launched in clusters of (2, 1, 1) (cudaLaunchKernelEx, cudaLaunchAttributeClusterDimension), a
 * grid of 2 x clusters, p.total_tiles = B H_kv ceil(n_kb / 2) units. */
template <int DT, int VAR = 0>
static __global__ void __launch_bounds__(CML_ATT90B_THREADS, 1)
    cml__att90b256p_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                           const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                           const __grid_constant__ cml__att90b_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef cml__att90b256p_sm sm;
    extern __shared__ uint8_t cml__att90b256p_smem_raw[];
    /* the same padding in both CTAs (same kernel, same static shared memory): mapa's same offset */
    uint8_t *smem = cml__att90b256p_smem_raw + ((1024u - (cml__smem_addr(cml__att90b256p_smem_raw) & 1023u)) & 1023u);
    uint64_t *bars = (uint64_t *)(smem + sm::off_bar);
    if (threadIdx.x == 0) {
        cml__mbar_init(&bars[0], 1);   /* kv_full */
        cml__mbar_init(&bars[1], 1);   /* q_full */
        cml__mbar_init(&bars[2], 1);   /* do_full */
        cml__mbar_init(&bars[3], 256); /* qd_empty */
        for (int c = 0; c < 2; c++) {
            cml__mbar_init(&bars[4 + c], 4);  /* dq_full */
            cml__mbar_init(&bars[6 + c], 1);  /* dq_empty */
            cml__mbar_init(&bars[15 + c], 4); /* dq_full2 */
        }
        cml__mbar_init(&bars[8], 128);  /* p_full */
        cml__mbar_init(&bars[9], 128);  /* p_empty */
        cml__mbar_init(&bars[10], 128); /* ds_full */
        cml__mbar_init(&bars[11], 4);   /* ds_empty: both consumers here and both in the peer */
        cml__mbar_init(&bars[12], 1);   /* dsx_full: the peer's sender (+ 8192 bytes) */
        cml__mbar_init(&bars[13], 1);   /* unit_full (rank 1): rank 0's producer */
        cml__mbar_init(&bars[14], 1);   /* unit_empty (rank 0): rank 1's producer */
        cml__mbar_init_fence();
    }
    /* both CTAs' barriers initialized before any remote arrival or copy */
    cml__cluster_sync();
    cml__pdl_launch_dependents();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        cml__regs_dealloc<CML_ATT90B_PRODUCER_REGS>();
        if (threadIdx.x == 0) cml__att90b256p_produce<VAR>(&map_q, &map_k, &map_v, &map_do, p, smem);
        else if (threadIdx.x % 32 == 0 && threadIdx.x / 32 <= 2)
            cml__att90b_write_dq<256, 64, 1, 2, VAR, 4, cml__att90b256p_sm>(p, smem, threadIdx.x / 32 - 1);
        else if ((threadIdx.x & ~16u) == 96)
            cml__att90b_write_dq<256, 64, 1, 2, VAR, 4, cml__att90b256p_sm>(p, smem, threadIdx.x % 32 / 16, 1);
    } else {
        cml__regs_alloc<CML_ATT90B_CONSUMER_REGS>();
        const int r = (int)cml__cluster_rank();
        if (__shfl_sync(0xffffffffu, wg, 0) == 1) cml__att90b256p_consume<DT, 0, VAR>(p, smem, r);
        else cml__att90b256p_consume<DT, 1, VAR>(p, smem, r);
    }
    /* no CTA leaves while its peer may still arrive on its barriers, copy into its dsx or write its
     * mailbox: every remote operation is issued before its thread reaches this barrier, and every
     * copy into a CTA has completed on a barrier that CTA's consumers waited for */
    __syncwarp();
    cml__cluster_sync();
#endif
}

#endif
