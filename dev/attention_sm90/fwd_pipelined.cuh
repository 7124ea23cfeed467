/* The v8 forward kernel (dev/attention_sm90/README.md, forward ladder): the persistent kernel of
 * src/kernels/cuda/attention/attention_fwd_sm90.cuh with its work tiles chained. Measured slower
 * than the library's v6 (1-5%, fwd_harness.cu "turns"), so it is kept here for the record and the
 * harness, not in the library. Include after attention_fwd_sm90.cuh. */
#ifndef CML_DEV_ATTENTION_SM90_FWD_PIPELINED_CUH
#define CML_DEV_ATTENTION_SM90_FWD_PIPELINED_CUH

#include "kernels/cuda/attention/attention_fwd_sm90.cuh"

/* Pipelined persistent variant (v8): the persistent kernel with the work tiles chained. A
 * tile's last O += P V is issued together with the next tile's first S = Q K^T (one ping-pong
 * turn), the next tile's first softmax runs under it, and the finished tile's epilogue (O / l
 * into the O buffer, TMA store, lse) runs after that softmax, in the consumer's softmax slot
 * (the other consumer's GEMMs run meanwhile). So a tile boundary costs no serialized GEMM
 * (before: the last P V alone, then the next tile's first Q K^T alone, each waited on). Two Q
 * buffers (the next tile's Q lands while the current one is still read) and its own O buffer.
 * The next tile id is claimed by the producer when the current tile's Q is issued (the atomic's
 * latency hides under the K/V loads). Results are bitwise those of the other variants' math
 * (same per-row operation order) and reproducible. */
template <int D, int BN, int STAGES>
struct cml__att90_xsmem {
    enum {
        q_bytes = CML_ATT90_BM * D * 2, /* per Q buffer */
        o_bytes = CML_ATT90_BM * D * 2,
        kv_bytes = BN * D * 2,
        total = 1024 + 2 * q_bytes + o_bytes + 2 * STAGES * kv_bytes + 8 * (4 + 4 * STAGES) + 16
    };
};

/* A consumer's view of one work tile. */
struct cml__att90_ctile {
    int q0, b, h, n, qb; /* qb: the Q buffer it sits in */
    int row_a, row_b, mask_from;
    int end[2];
};

/* A finished tile: O / l (l the per-thread partial sums, reduced here) into this consumer's 64
 * rows of the O buffer (128-byte swizzle), one TMA store per 64 columns, lse (-inf and O = 0 for
 * a row that saw no key). */
template <int DT, int D>
static __device__ __forceinline__ void cml__att90_epilogue(const float *o, float l0, float l1, float m0, float m1,
                                                           const cml__att90_ctile &c, uint8_t *so,
                                                           const CUtensorMap *map_o, const cml__att90_params &p,
                                                           int consumer, int r_loc, int lane, bool leader) {
    const int BM = CML_ATT90_BM;
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv_a = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv_b = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    if (leader) cml__bulk_wait_read<0>(); /* the last tile's store has read the buffer */
    cml__att90_bar_sync(3 + consumer, 128);
#pragma unroll
    for (int q = 0; q < D / 8; q++) {
        uint8_t *blk = so + (q / 8) * BM * 128;
        const int chunk = ((q % 8) ^ (r_loc % 8)) * 16 + (lane % 4) * 4;
        *(uint32_t *)(blk + r_loc * 128 + chunk) =
            cml__att90_pack<DT>(o[4 * q] * inv_a, o[4 * q + 1] * inv_a);
        *(uint32_t *)(blk + (r_loc + 8) * 128 + chunk) =
            cml__att90_pack<DT>(o[4 * q + 2] * inv_b, o[4 * q + 3] * inv_b);
    }
    cml__fence_proxy_async_smem();
    cml__att90_bar_sync(3 + consumer, 128);
    if (leader && c.q0 + consumer * 64 < p.Sq) {
#pragma unroll
        for (int k = 0; k < D / 64; k++) cml__tma_store_4d(map_o, so + k * BM * 128, k * 64, c.h, c.q0 + consumer * 64, c.b);
        cml__bulk_commit();
    }
    if (p.lse && lane % 4 == 0) {
        const float ln2 = 0.6931471805599453f, ninf = __int_as_float(0xff800000);
        float *lse = p.lse + ((long long)c.b * p.Hq + c.h) * p.Sq;
        if (c.row_a < p.Sq) lse[c.row_a] = l0 > 0.0f ? (m0 * p.scale_log2 + log2f(l0)) * ln2 : ninf;
        if (c.row_b < p.Sq) lse[c.row_b] = l1 > 0.0f ? (m1 * p.scale_log2 + log2f(l1)) * ln2 : ninf;
    }
}

/* Waits for the next work tile's Q buffer and reads its id (lane 0, shuffled: warp-uniform for
 * the compiler); returns false at the end sentinel. */
template <int BN>
static __device__ __forceinline__ bool cml__att90_fetch(cml__att90_ctile &c, int &round_q, uint64_t *q_full,
                                                        volatile int *tile_id, const cml__att90_params &p,
                                                        int consumer, int r_loc, int lane) {
    const int qb = round_q & 1;
    cml__mbar_wait(&q_full[qb], (round_q >> 1) & 1);
    round_q++;
    const int tile = __shfl_sync(0xffffffffu, lane == 0 ? tile_id[qb] : 0, 0);
    if (tile < 0) return false;
    const cml__att90_tile t = cml__att90_decode<BN>(p, tile);
    const int off = p.Sk - p.Sq;
    /* a tile whose rows see no key (causal, S_q > S_kv) still computes key tile 0, fully masked:
     * P = 0, l = 0, so O = 0 and lse = -inf come out of the usual epilogue (a separate path for it
     * made ptxas serialize the wgmmas, C7520) */
    c.q0 = t.q0, c.b = t.b, c.h = t.h, c.n = max(1, t.n_tiles), c.qb = qb;
    c.row_a = t.q0 + consumer * 64 + r_loc;
    c.row_b = c.row_a + 8;
    c.end[0] = p.Sk, c.end[1] = p.Sk;
    if (p.causal) {
        c.end[0] = min(p.Sk, max(0, c.row_a + off + 1));
        c.end[1] = min(p.Sk, max(0, c.row_b + off + 1));
    }
    const int first_masked = p.Sk / BN;
    const int diag = p.causal ? (t.q0 + off + 1 > 0 ? (t.q0 + off + 1) / BN : 0) : first_masked;
    c.mask_from = min(first_masked, diag);
    return true;
}

template <int DT, int D, int BN, int STAGES, int EARLY_CLAIM = 1, int MERGE = 1>
static __global__ void __launch_bounds__(CML_ATT90_THREADS, 1)
    cml__att90_fwd_pipelined_kernel(const __grid_constant__ CUtensorMap map_q,
                                    const __grid_constant__ CUtensorMap map_k,
                                    const __grid_constant__ CUtensorMap map_v,
                                    const __grid_constant__ CUtensorMap map_o,
                                    const __grid_constant__ cml__att90_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef cml__att90_xsmem<D, BN, STAGES> sm;
    const int BM = CML_ATT90_BM;
    extern __shared__ uint8_t cml__att90_smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)cml__att90_smem_raw + 1023) & ~(uintptr_t)1023);
    uint8_t *sq = smem; /* two Q buffers */
    uint8_t *so_all = sq + 2 * sm::q_bytes;
    uint8_t *sk = so_all + sm::o_bytes;
    uint8_t *sv = sk + STAGES * sm::kv_bytes;
    uint64_t *q_full = (uint64_t *)(sv + STAGES * sm::kv_bytes);
    uint64_t *q_empty = q_full + 2;
    uint64_t *k_full = q_empty + 2, *v_full = k_full + STAGES;
    uint64_t *k_empty = v_full + STAGES, *v_empty = k_empty + STAGES;
    volatile int *tile_id = (volatile int *)(v_empty + STAGES); /* one per Q buffer */

    if (threadIdx.x == 0) {
        for (int i = 0; i < 2; i++) {
            cml__mbar_init(&q_full[i], 1);
            cml__mbar_init(&q_empty[i], 8); /* one arrival per consumer warp */
        }
        for (int s = 0; s < STAGES; s++) {
            cml__mbar_init(&k_full[s], 1);
            cml__mbar_init(&v_full[s], 1);
            cml__mbar_init(&k_empty[s], 2);
            cml__mbar_init(&v_empty[s], 2);
        }
        cml__mbar_init_fence();
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        cml__regs_dealloc<CML_ATT90_PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            cml__tma_prefetch_map(&map_q);
            cml__tma_prefetch_map(&map_k);
            cml__tma_prefetch_map(&map_v);
            int it = 0, round_q = 0;
            for (int tile = blockIdx.x; tile < p.total_tiles; round_q++) {
                const cml__att90_tile t = cml__att90_decode<BN>(p, tile);
                const int hk = t.h / p.group, qb = round_q & 1, n_kv = max(1, t.n_tiles); /* see fetch */
                if (round_q >= 2) cml__mbar_wait(&q_empty[qb], ((round_q >> 1) - 1) & 1); /* read two tiles ago */
                tile_id[qb] = tile;
                cml__mbar_arrive_expect_tx(&q_full[qb], sm::q_bytes); /* releases tile_id with the phase */
                cml__att90_load<D>(sq + qb * sm::q_bytes, &map_q, &q_full[qb], t.q0, t.h, t.b, BM);
                int next = EARLY_CLAIM ? atomicAdd(p.tile_counter, 1) + (int)gridDim.x : 0; /* used after the K/V loads */
                for (int j = 0; j < n_kv; j++, it++) {
                    const int s = it % STAGES, round = it / STAGES;
                    if (round > 0) cml__mbar_wait(&k_empty[s], (round - 1) & 1);
                    cml__mbar_arrive_expect_tx(&k_full[s], sm::kv_bytes);
                    cml__att90_load<D>(sk + s * sm::kv_bytes, &map_k, &k_full[s], j * BN, hk, t.b, BN);
                    if (round > 0) cml__mbar_wait(&v_empty[s], (round - 1) & 1);
                    cml__mbar_arrive_expect_tx(&v_full[s], sm::kv_bytes);
                    cml__att90_load<D>(sv + s * sm::kv_bytes, &map_v, &v_full[s], j * BN, hk, t.b, BN);
                }
                if (!EARLY_CLAIM) next = atomicAdd(p.tile_counter, 1) + (int)gridDim.x;
                tile = next;
            }
            /* no more work: tile_id -1 through a plain arrival */
            const int qb = round_q & 1;
            if (round_q >= 2) cml__mbar_wait(&q_empty[qb], ((round_q >> 1) - 1) & 1);
            tile_id[qb] = -1;
            cml__mbar_arrive(&q_full[qb]);
        }
    } else {
        cml__regs_alloc<CML_ATT90_CONSUMER_REGS>();
        const int consumer = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
        const bool leader = threadIdx.x % 128 == 0;
        const int r_loc = 16 * warp + lane / 4, key_lane = 2 * (lane % 4);
        const uint32_t q_base = cml__smem_addr(sq) + consumer * 64 * 128;
        uint8_t *so = so_all + consumer * 64 * 128;
        const float ninf = __int_as_float(0xff800000);
        float o[D / 2];
        float sc[BN / 2];
        uint32_t pa[BN / 4];
        float m[2] = {ninf, ninf}, l[2] = {0.0f, 0.0f}, corr[2];
        if (consumer == 1) cml__att90_bar_arrive(1, 256); /* ping-pong: consumer 0 issues first */
        int it = 0, round_q = 0;
        bool headed = false; /* the current tile's first S is already in pa (issued at the boundary) */
        cml__att90_ctile cur;
        bool have = cml__att90_fetch<BN>(cur, round_q, q_full, tile_id, p, consumer, r_loc, lane);
        while (have) {
            const uint32_t q_addr = q_base + cur.qb * sm::q_bytes;
            const int n = cur.n;
            if (!headed) { /* key tile 0: S only */
                const int s = it % STAGES;
                m[0] = m[1] = ninf;
                l[0] = l[1] = 0.0f;
#pragma unroll
                for (int i = 0; i < D / 2; i++) o[i] = 0.0f;
                cml__mbar_wait(&k_full[s], (it / STAGES) & 1);
                cml__att90_bar_sync(1 + consumer, 256);
                cml__wgmma_fence();
                cml__att90_qk<DT, D, BN>(sc, q_addr, cml__smem_addr(sk + s * sm::kv_bytes));
                cml__wgmma_commit();
                cml__att90_bar_arrive(2 - consumer, 256);
                cml__wgmma_wait<0>();
                cml__wgmma_reg_fence<BN / 2>(sc);
                if (leader) cml__mbar_arrive(&k_empty[s]);
                if (n == 1) { /* the tile's last Q K^T is done */
                    __syncwarp();
                    if (lane == 0) cml__mbar_arrive(&q_empty[cur.qb]);
                }
                cml__att90_softmax<BN>(sc, m, l, corr, 0 >= cur.mask_from, key_lane, cur.end, p.scale_log2);
                cml__att90_to_p<DT, BN>(pa, sc);
            }
            for (int j = 1; j < n; j++) {
                const int g = it + j, s = g % STAGES, sp = (g - 1) % STAGES;
                cml__mbar_wait(&k_full[s], (g / STAGES) & 1);
                cml__att90_bar_sync(1 + consumer, 256);
                cml__wgmma_fence();
                cml__att90_qk<DT, D, BN>(sc, q_addr, cml__smem_addr(sk + s * sm::kv_bytes));
                cml__wgmma_commit();
                cml__mbar_wait(&v_full[sp], ((g - 1) / STAGES) & 1);
                cml__att90_pv<DT, D, BN>(o, pa, cml__smem_addr(sv + sp * sm::kv_bytes));
                cml__wgmma_commit();
                cml__att90_bar_arrive(2 - consumer, 256);
                cml__wgmma_wait<1>();
                cml__wgmma_reg_fence<BN / 2>(sc);
                if (leader) cml__mbar_arrive(&k_empty[s]);
                if (j == n - 1) { /* the tile's last Q K^T is done */
                    __syncwarp();
                    if (lane == 0) cml__mbar_arrive(&q_empty[cur.qb]);
                }
                cml__att90_softmax<BN>(sc, m, l, corr, j >= cur.mask_from, j * BN + key_lane, cur.end, p.scale_log2);
                cml__wgmma_wait<0>();
                cml__wgmma_reg_fence<D / 2>(o);
                cml__att90_keep<BN / 4>(pa);
                if (leader) cml__mbar_arrive(&v_empty[sp]);
                cml__att90_rescale<D>(o, corr);
                cml__att90_to_p<DT, BN>(pa, sc);
            }
            /* the boundary: this tile's last P V, chained with the next tile's first Q K^T if there is one */
            cml__att90_ctile nxt;
            const bool have_n = cml__att90_fetch<BN>(nxt, round_q, q_full, tile_id, p, consumer, r_loc, lane);
            const int gl = it + n - 1, sl = gl % STAGES;
            if (MERGE && have_n) {
                const int g0 = it + n, s0 = g0 % STAGES;
                cml__mbar_wait(&k_full[s0], (g0 / STAGES) & 1);
                cml__att90_bar_sync(1 + consumer, 256);
                cml__wgmma_fence();
                cml__att90_qk<DT, D, BN>(sc, q_base + nxt.qb * sm::q_bytes, cml__smem_addr(sk + s0 * sm::kv_bytes));
                cml__wgmma_commit();
                cml__mbar_wait(&v_full[sl], (gl / STAGES) & 1);
                cml__att90_pv<DT, D, BN>(o, pa, cml__smem_addr(sv + sl * sm::kv_bytes));
                cml__wgmma_commit();
                cml__att90_bar_arrive(2 - consumer, 256);
                cml__wgmma_wait<1>();
                cml__wgmma_reg_fence<BN / 2>(sc);
                if (leader) cml__mbar_arrive(&k_empty[s0]);
                if (nxt.n == 1) {
                    __syncwarp();
                    if (lane == 0) cml__mbar_arrive(&q_empty[nxt.qb]);
                }
                const float m0 = m[0], m1 = m[1], l0 = l[0], l1 = l[1];
                m[0] = m[1] = ninf;
                l[0] = l[1] = 0.0f;
                cml__att90_softmax<BN>(sc, m, l, corr, 0 >= nxt.mask_from, key_lane, nxt.end, p.scale_log2);
                cml__wgmma_wait<0>();
                cml__wgmma_reg_fence<D / 2>(o);
                cml__att90_keep<BN / 4>(pa);
                if (leader) cml__mbar_arrive(&v_empty[sl]);
                cml__att90_epilogue<DT, D>(o, l0, l1, m0, m1, cur, so, &map_o, p, consumer, r_loc, lane, leader);
#pragma unroll
                for (int i = 0; i < D / 2; i++) o[i] = 0.0f;
                cml__att90_to_p<DT, BN>(pa, sc);
                headed = true;
            } else {
                cml__mbar_wait(&v_full[sl], (gl / STAGES) & 1);
                cml__wgmma_fence();
                cml__att90_pv<DT, D, BN>(o, pa, cml__smem_addr(sv + sl * sm::kv_bytes));
                cml__wgmma_commit();
                cml__wgmma_wait<0>();
                cml__wgmma_reg_fence<D / 2>(o);
                cml__att90_keep<BN / 4>(pa);
                if (leader) cml__mbar_arrive(&v_empty[sl]);
                cml__att90_epilogue<DT, D>(o, l[0], l[1], m[0], m[1], cur, so, &map_o, p, consumer, r_loc, lane,
                                              leader);
                headed = false;
            }
            it += n;
            cur = nxt;
            have = have_n;
        }
        if (consumer == 0) cml__att90_bar_sync(1, 256); /* consumer 1's extra arrival */
        if (leader) cml__bulk_wait_read<0>();
    }
#endif
}

#endif
