/* CUDA attention backward on mma.sync tensor cores (f16/bf16, sm_80+, D <= 256),
 * FlashAttention-2 style and deterministic without atomics (the math is in
 * attention_bwd_simt.cu; fragments in attention_mma.cuh).
 *
 * dkv kernel: a block of 4 warps owns BK = 64 keys of one (b, kv head), 16 per
 * warp, with dK and dV in registers, and walks every query head of the group
 * and every query tile (BQ) in order. Working transposed keeps everything in
 * registers: S^T = K Q^T and dP^T = V dO^T come out with keys as rows, so
 * P^T and dS^T = P^T (dP^T - Di) are directly the A operands of
 * dV += P^T dO and dK += dS^T Q (dO and Q as B through ldmatrix.trans).
 * dq kernel: a block of 4 warps owns BQ = 64 queries, 16 per warp, and walks
 * the key tiles (BK) in order: S = Q K^T, dP = dO V^T, dS = P (dP - Di), and
 * dQ += dS K.
 * P and dS are rounded to 16 bits as tensor-core operands; row statistics,
 * scores and accumulators are f32.
 * D = 256 (the "2" kernels below): 16 x 256 f32 accumulators for both dK and dV
 * do not fit a thread's registers, so those blocks have 8 warps and split the
 * head dim of the outputs in two halves, and P^T, dS^T (dS) go through shared
 * memory. */
#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_mma.cuh"

#define NT 128

template <int DP, int BR, int BC> struct bwd_mma_cfg {
    static constexpr int LD = DP + 8;
    /* two tiles of BR rows and two of BC rows (16-bit), plus lse and Di for BC rows (dkv) */
    static constexpr size_t smem = sizeof(uint16_t) * (size_t)(2 * BR + 2 * BC) * LD + 2 * sizeof(float) * BC;
};

/* ---- steps of both variants ------------------------------------------------------------------ */

/* s1 = A1 B1^T and s2 = A2 B2^T over the head dim, rows r0 .. r0+15 of A1, A2 against rows
 * n0 .. n0 + 8N - 1 of B1, B2: S^T and dP^T (dkv), S and dP (dq). The two products share the
 * loop so each B fragment pair is loaded once per k step. */
template <int DT, int LD, int DP, int N, int UNROLL>
static __device__ __forceinline__ void bwd_scores(float (&s1)[N][4], float (&s2)[N][4], const uint16_t *A1,
                                                  const uint16_t *A2, const uint16_t *B1, const uint16_t *B2, int r0,
                                                  int n0, int lane) {
    cml__mma_zero(s1);
    cml__mma_zero(s2);
#pragma unroll UNROLL
    for (int k0 = 0; k0 < DP; k0 += 16) {
        uint32_t a1[4], a2[4];
        cml__load_a<LD>(a1, A1, r0, k0, lane);
        cml__load_a<LD>(a2, A2, r0, k0, lane);
#pragma unroll
        for (int n = 0; n < N; n += 2) {
            uint32_t b1[4], b2[4];
            cml__load_bt<LD>(b1, B1, n0 + n * 8, k0, lane);
            cml__load_bt<LD>(b2, B2, n0 + n * 8, k0, lane);
            cml__mma_16816<DT>(s1[n], a1, b1[0], b1[1]);
            cml__mma_16816<DT>(s1[n + 1], a1, b1[2], b1[3]);
            cml__mma_16816<DT>(s2[n], a2, b2[0], b2[1]);
            cml__mma_16816<DT>(s2[n + 1], a2, b2[2], b2[3]);
        }
    }
}

/* One n-tile of S^T, dP^T into P^T, dS^T in place: element e is key key0 + 8 (e / 2) and query
 * i0 + q + e % 2 (q: the n-tile's column 2c in the query tile). */
static __device__ __forceinline__ void bwd_pt_dst(const cml__attn_params &p, float (&st)[4], float (&dpt)[4],
                                                  const float *Ls, const float *Dis, int i0, int q, int key0) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int qe = q + (e & 1);
        const bool sees = cml__attn_sees(p, (long long)i0 + qe, key0 + 8 * (e / 2));
        const float pij = sees ? exp2f(st[e] * p.scale_log2 - Ls[qe]) : 0.0f;
        st[e] = pij;
        dpt[e] = sees ? pij * (dpt[e] - Dis[qe]) : 0.0f;
    }
}

/* One n-tile of S, dP into dS (in s): element e is row e / 2 of the lane's two, key key + e % 2. */
static __device__ __forceinline__ void bwd_ds(const cml__attn_params &p, float (&s)[4], const float (&dp)[4],
                                              const int (&vend)[2], const float (&L2)[2], const float (&Dr)[2],
                                              int key) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int r = e / 2;
        const bool sees = key + (e & 1) < vend[r];
        const float pij = sees ? exp2f(s[e] * p.scale_log2 - L2[r]) : 0.0f;
        s[e] = sees ? pij * (dp[e] - Dr[r]) : 0.0f;
    }
}

/* dV += P^T dO and dK += dS^T Q for one 16-query k step, on head-dim cols n0 .. n0 + 8N - 1. */
template <int DT, int LD, int N>
static __device__ __forceinline__ void bwd_dkv_step(float (&dv)[N][4], float (&dk)[N][4], const uint32_t (&ap)[4],
                                                    const uint32_t (&as)[4], const uint16_t *dOs, const uint16_t *Qs,
                                                    int k0, int n0, int lane) {
#pragma unroll
    for (int n = 0; n < N; n += 2) {
        uint32_t bo[4], bq[4];
        cml__load_bn<LD>(bo, dOs, k0, n0 + n * 8, lane);
        cml__load_bn<LD>(bq, Qs, k0, n0 + n * 8, lane);
        cml__mma_16816<DT>(dv[n], ap, bo[0], bo[1]);
        cml__mma_16816<DT>(dv[n + 1], ap, bo[2], bo[3]);
        cml__mma_16816<DT>(dk[n], as, bq[0], bq[1]);
        cml__mma_16816<DT>(dk[n + 1], as, bq[2], bq[3]);
    }
}

/* The lane's keys key0 and key0 + 8, head-dim cols d0 .. d0 + 8N - 1, of dK (times scale) and dV. */
template <int DT, int N>
static __device__ __forceinline__ void bwd_store_dkv(const cml__attn_params &p, const cml__attn_slices &kv,
                                                     const float (&dk)[N][4], const float (&dv)[N][4], int key0,
                                                     int d0, int c) {
    typedef typename cml__elem<DT>::type T;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int key = key0 + 8 * r;
        if (key >= p.S_kv) continue;
        T *dkrow = (T *)p.dK + kv.k + (long long)key * p.ks[1];
        T *dvrow = (T *)p.dV + kv.v + (long long)key * p.vs[1];
#pragma unroll
        for (int n = 0; n < N; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = d0 + 8 * n + 2 * c + e;
                if (col >= p.D) continue;
                dkrow[col] = cml__from_f32<DT>(dk[n][2 * r + e] * p.scale);
                dvrow[col] = cml__from_f32<DT>(dv[n][2 * r + e]);
            }
    }
}

/* The lane's query rows row0 and row0 + 8, head-dim cols d0 .. d0 + 8N - 1, of dQ (times scale). */
template <int DT, int N>
static __device__ __forceinline__ void bwd_store_dq(const cml__attn_params &p, const cml__attn_slices &sl,
                                                    const float (&dq)[N][4], int row0, int d0, int c) {
    typedef typename cml__elem<DT>::type T;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int qi = row0 + 8 * r;
        if (qi >= p.S_q) continue;
        T *row = (T *)p.dQ + sl.q + (long long)qi * p.qs[1];
#pragma unroll
        for (int n = 0; n < N; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = d0 + 8 * n + 2 * c + e;
                if (col < p.D) row[col] = cml__from_f32<DT>(dq[n][2 * r + e] * p.scale);
            }
    }
}

/* ---- dK, dV ------------------------------------------------------------------------------ */

template <int DT, int DP, int BQ>
static __global__ void __launch_bounds__(NT) attn_bwd_dkv_mma_kernel(const __grid_constant__ cml__attn_params pg) {
    constexpr int BK = 64, LD = bwd_mma_cfg<DP, BK, BQ>::LD;
    constexpr int NQT = BQ / 8, NDT = DP / 8;
    extern __shared__ uint4 smem_u4[];
    uint16_t *Ks = (uint16_t *)smem_u4, *Vs = Ks + BK * LD, *Qs = Vs + BK * LD, *dOs = Qs + BQ * LD;
    float *Ls = (float *)(dOs + BQ * LD), *Dis = Ls + BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int bh = blockIdx.x, b = bh / pg.H_kv, hk = bh % pg.H_kv;
    const cml__attn_params p = cml__attn_bind(pg, b);
    const cml__attn_slices kv = cml__attn_slices_of(p, b, hk * p.group, hk); /* K, V of this kv head */
    const int n_tiles = (p.S_kv + BK - 1) / BK;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int j0 = t_ * BK;
        const int key0 = j0 + warp * 16 + g; /* this lane's keys: key0 and key0 + 8 */
        __syncthreads();
        cml__attn_load_kv<DP, BK, NT>(Ks, Vs, p, kv, j0);
        float dk[NDT][4], dv[NDT][4];
        cml__mma_zero(dk);
        cml__mma_zero(dv);
        const int i_first = cml__attn_first_query(p, j0);
        for (int h = hk * p.group; h < (hk + 1) * p.group; h++) {
            const cml__attn_slices sl = cml__attn_slices_of(p, b, h, hk);
            for (int i0 = i_first; i0 < p.S_q; i0 += BQ) {
                __syncthreads();
                cml__attn_load_qdo<DP, BQ, NT>(Qs, dOs, p, sl, i0);
                cml__attn_load_lse_di<BQ, NT>(Ls, Dis, p, sl, i0);
                __syncthreads();
                float st[NQT][4], dpt[NQT][4];
                bwd_scores<DT, LD, DP, NQT, DP / 16>(st, dpt, Ks, Vs, Qs, dOs, warp * 16, 0, lane);
#pragma unroll
                for (int n = 0; n < NQT; n++) bwd_pt_dst(p, st[n], dpt[n], Ls, Dis, i0, 8 * n + 2 * c, key0);
                /* dV += P^T dO, dK += dS^T Q over the tile's queries */
#pragma unroll
                for (int k = 0; k < NQT; k += 2) {
                    uint32_t ap[4], as[4];
                    cml__acc_to_a<DT>(ap, st[k], st[k + 1]);
                    cml__acc_to_a<DT>(as, dpt[k], dpt[k + 1]);
                    bwd_dkv_step<DT, LD>(dv, dk, ap, as, dOs, Qs, k * 8, 0, lane);
                }
            }
        }
        bwd_store_dkv<DT>(p, kv, dk, dv, key0, 0, c);
    }
}

/* ---- dQ ---------------------------------------------------------------------------------- */

template <int DT, int DP, int BK>
static __global__ void __launch_bounds__(NT) attn_bwd_dq_mma_kernel(const __grid_constant__ cml__attn_params pg) {
    constexpr int BQ = 64, LD = bwd_mma_cfg<DP, BQ, BK>::LD;
    constexpr int NKT = BK / 8, NDT = DP / 8;
    extern __shared__ uint4 smem_u4[];
    uint16_t *Qs = (uint16_t *)smem_u4, *dOs = Qs + BQ * LD, *Ks = dOs + BQ * LD, *Vs = Ks + BK * LD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const cml__attn_params p = cml__attn_bind(pg, blockIdx.x / pg.H_q);
    const cml__attn_slices sl = cml__attn_slices_of_bh(p, blockIdx.x);
    const int n_tiles = (p.S_q + BQ - 1) / BQ;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int i0 = (n_tiles - 1 - t_) * BQ;
        __syncthreads();
        cml__attn_load_qdo<DP, BQ, NT>(Qs, dOs, p, sl, i0);
        const int row0 = i0 + warp * 16 + g;
        int vend[2];
        float L2[2], Dr[2];
#pragma unroll
        for (int r = 0; r < 2; r++) vend[r] = cml__attn_bwd_row(p, sl, row0 + 8 * r, L2[r], Dr[r]);
        float dq[NDT][4];
        cml__mma_zero(dq);
        const int kv_end = cml__attn_tile_kv_end(p, i0, BQ);
        for (int j0 = 0; j0 < kv_end; j0 += BK) {
            __syncthreads();
            cml__attn_load_kv<DP, BK, NT>(Ks, Vs, p, sl, j0);
            __syncthreads();
            float s[NKT][4], dp[NKT][4];
            bwd_scores<DT, LD, DP, NKT, DP / 16>(s, dp, Qs, dOs, Ks, Vs, warp * 16, 0, lane);
#pragma unroll
            for (int n = 0; n < NKT; n++) bwd_ds(p, s[n], dp[n], vend, L2, Dr, j0 + 8 * n + 2 * c);
#pragma unroll
            for (int k = 0; k < NKT; k += 2) {
                uint32_t a[4];
                cml__acc_to_a<DT>(a, s[k], s[k + 1]);
                cml__mma_bn<DT, LD>(dq, a, Ks, k * 8, 0, lane);
            }
        }
        bwd_store_dq<DT>(p, sl, dq, row0, 0, c);
    }
}

/* ---- D = 256: 8 warps, the outputs' head dim split in two halves -------------------------------
 * Warp w owns rows 16 (w % 4) .. + 15 of the tile and head-dim half w / 4 of its outputs (64 f32
 * accumulators a thread for dK and dV each, 64 for dQ). The scores are split by columns instead:
 * warp w computes rows 16 (w % 4) and column half w / 4 of S^T, dP^T (S, dP) over the whole head
 * dim, and writes P^T and dS^T (dS), rounded to 16 bits as before, to shared memory, whence
 * they are the A operands of the second products. Same sums in the same order for any
 * launch: deterministic. */

#define NT2 256

template <int DP, int BR, int BC> struct bwd_mma2_cfg {
    static constexpr int LD = DP + 8, LDP = BC + 8;
    /* bwd_mma_cfg's tiles, plus two 16-bit BR x BC tiles (P^T and dS^T; dS) */
    static constexpr size_t smem = bwd_mma_cfg<DP, BR, BC>::smem + sizeof(uint16_t) * (size_t)2 * BR * LDP;
};

/* Rows r (g) and r + 8 (g + 8) of an accumulator n-tile pair, as 16-bit pairs into a tile. */
template <int DT, int LDP>
static __device__ __forceinline__ void bwd_store_b16(uint16_t *tile, const float (&acc)[4], int r, int col) {
    *(uint32_t *)(tile + r * LDP + col) = cml__pack2<DT>(acc[0], acc[1]);
    *(uint32_t *)(tile + (r + 8) * LDP + col) = cml__pack2<DT>(acc[2], acc[3]);
}

template <int DT, int DP, int BQ>
static __global__ void __launch_bounds__(NT2) attn_bwd_dkv_mma2_kernel(const __grid_constant__ cml__attn_params pg) {
    constexpr int BK = 64, LD = bwd_mma2_cfg<DP, BK, BQ>::LD, LDP = bwd_mma2_cfg<DP, BK, BQ>::LDP;
    constexpr int NQT = BQ / 16, NDT = DP / 16; /* n-tiles of a warp's scores, of its dK and dV halves */
    extern __shared__ uint4 smem_u4[];
    uint16_t *Ks = (uint16_t *)smem_u4, *Vs = Ks + BK * LD, *Qs = Vs + BK * LD, *dOs = Qs + BQ * LD;
    uint16_t *Ps = dOs + BQ * LD, *dSs = Ps + BK * LDP;
    float *Ls = (float *)(dSs + BK * LDP), *Dis = Ls + BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int r0 = (warp % 4) * 16, q0 = (warp / 4) * (BQ / 2), d0 = (warp / 4) * (DP / 2);
    const int bh = blockIdx.x, b = bh / pg.H_kv, hk = bh % pg.H_kv;
    const cml__attn_params p = cml__attn_bind(pg, b);
    const cml__attn_slices kv = cml__attn_slices_of(p, b, hk * p.group, hk); /* K, V of this kv head */
    const int n_tiles = (p.S_kv + BK - 1) / BK;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int j0 = t_ * BK;
        const int key0 = j0 + r0 + g; /* this lane's keys: key0 and key0 + 8 */
        __syncthreads();
        cml__attn_load_kv<DP, BK, NT2>(Ks, Vs, p, kv, j0);
        float dk[NDT][4], dv[NDT][4];
        cml__mma_zero(dk);
        cml__mma_zero(dv);
        const int i_first = cml__attn_first_query(p, j0);
        for (int h = hk * p.group; h < (hk + 1) * p.group; h++) {
            const cml__attn_slices sl = cml__attn_slices_of(p, b, h, hk);
            for (int i0 = i_first; i0 < p.S_q; i0 += BQ) {
                __syncthreads();
                cml__attn_load_qdo<DP, BQ, NT2>(Qs, dOs, p, sl, i0);
                cml__attn_load_lse_di<BQ, NT2>(Ls, Dis, p, sl, i0);
                __syncthreads();
                float st[NQT][4], dpt[NQT][4];
                /* unrolled by 4 only: fully unrolled, ptxas keeps too many fragments live and spills */
                bwd_scores<DT, LD, DP, NQT, 4>(st, dpt, Ks, Vs, Qs, dOs, r0, q0, lane);
#pragma unroll
                for (int n = 0; n < NQT; n++) {
                    bwd_pt_dst(p, st[n], dpt[n], Ls, Dis, i0, q0 + 8 * n + 2 * c, key0);
                    bwd_store_b16<DT, LDP>(Ps, st[n], r0 + g, q0 + 8 * n + 2 * c);
                    bwd_store_b16<DT, LDP>(dSs, dpt[n], r0 + g, q0 + 8 * n + 2 * c);
                }
                __syncthreads();
                /* dV += P^T dO, dK += dS^T Q over the tile's queries, on this warp's head-dim half */
#pragma unroll
                for (int k = 0; k < BQ; k += 16) {
                    uint32_t ap[4], as[4];
                    cml__load_a<LDP>(ap, Ps, r0, k, lane);
                    cml__load_a<LDP>(as, dSs, r0, k, lane);
                    bwd_dkv_step<DT, LD>(dv, dk, ap, as, dOs, Qs, k, d0, lane);
                }
            }
        }
        bwd_store_dkv<DT>(p, kv, dk, dv, key0, d0, c);
    }
}

template <int DT, int DP, int BK>
static __global__ void __launch_bounds__(NT2) attn_bwd_dq_mma2_kernel(const __grid_constant__ cml__attn_params pg) {
    constexpr int BQ = 64, LD = bwd_mma2_cfg<DP, BQ, BK>::LD, LDP = bwd_mma2_cfg<DP, BQ, BK>::LDP;
    constexpr int NKT = BK / 16, NDT = DP / 16; /* n-tiles of a warp's scores and of its dQ half */
    extern __shared__ uint4 smem_u4[];
    uint16_t *Qs = (uint16_t *)smem_u4, *dOs = Qs + BQ * LD, *Ks = dOs + BQ * LD, *Vs = Ks + BK * LD;
    uint16_t *dSs = Vs + BK * LD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int r0 = (warp % 4) * 16, kc = (warp / 4) * (BK / 2), d0 = (warp / 4) * (DP / 2);
    const cml__attn_params p = cml__attn_bind(pg, blockIdx.x / pg.H_q);
    const cml__attn_slices sl = cml__attn_slices_of_bh(p, blockIdx.x);
    const int n_tiles = (p.S_q + BQ - 1) / BQ;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int i0 = (n_tiles - 1 - t_) * BQ;
        __syncthreads();
        cml__attn_load_qdo<DP, BQ, NT2>(Qs, dOs, p, sl, i0);
        const int row0 = i0 + r0 + g;
        int vend[2];
        float L2[2], Dr[2];
#pragma unroll
        for (int r = 0; r < 2; r++) vend[r] = cml__attn_bwd_row(p, sl, row0 + 8 * r, L2[r], Dr[r]);
        float dq[NDT][4];
        cml__mma_zero(dq);
        const int kv_end = cml__attn_tile_kv_end(p, i0, BQ);
        for (int j0 = 0; j0 < kv_end; j0 += BK) {
            __syncthreads();
            cml__attn_load_kv<DP, BK, NT2>(Ks, Vs, p, sl, j0);
            __syncthreads();
            float s[NKT][4], dp[NKT][4];
            bwd_scores<DT, LD, DP, NKT, DP / 16>(s, dp, Qs, dOs, Ks, Vs, r0, kc, lane);
#pragma unroll
            for (int n = 0; n < NKT; n++) {
                bwd_ds(p, s[n], dp[n], vend, L2, Dr, j0 + kc + 8 * n + 2 * c);
                bwd_store_b16<DT, LDP>(dSs, s[n], r0 + g, kc + 8 * n + 2 * c);
            }
            __syncthreads();
            /* dQ += dS K over the tile's keys, on this warp's head-dim half */
#pragma unroll
            for (int k = 0; k < BK; k += 16) {
                uint32_t a[4];
                cml__load_a<LDP>(a, dSs, r0, k, lane);
                cml__mma_bn<DT, LD>(dq, a, Ks, k, d0, lane);
            }
        }
        bwd_store_dq<DT>(p, sl, dq, row0, d0, c);
    }
}

/* ---- launches ------------------------------------------------------------------------------ */

typedef void (*bwd_kernel)(const cml__attn_params);

/* The dkv kernel over (B H_kv) x key tiles, then the dq kernel over (B H_q) x query tiles (64 rows each),
 * nt threads a block. */
static cml_status bwd_mma_run(cml_ctx *ctx, const cml__attn_params &p, int nt, bwd_kernel dkv, const char *dkv_name,
                              size_t smem_dkv, bwd_kernel dq, const char *dq_name, size_t smem_dq) {
    static const char fn[] = "cml_attention_bwd";
    cudaStream_t s = cml__stream(ctx);
    CML_CUDA_TRY(fn, cudaFuncSetAttribute(dkv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_dkv));
    CML_CUDA_TRY(fn, cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_dq));
    const long long bkv = (long long)p.B * p.H_kv, ktiles = (p.S_kv + 63) / 64;
    const dim3 g1 = cml__attn_grid(bkv, ktiles);
    dkv<<<g1, nt, smem_dkv, s>>>(p);
    CML_TRY(cml__cuda_check_launch(fn, dkv_name, cml_dtype_name((cml_dtype)p.dtype), bkv * ktiles, g1.x * g1.y, nt));
    const long long bq = (long long)p.B * p.H_q, qtiles = (p.S_q + 63) / 64;
    const dim3 g2 = cml__attn_grid(bq, qtiles);
    dq<<<g2, nt, smem_dq, s>>>(p);
    return cml__cuda_check_launch(fn, dq_name, cml_dtype_name((cml_dtype)p.dtype), bq * qtiles, g2.x * g2.y, nt);
}

/* BQ (dkv) and BK (dq) per head dim: 64, and 32 for D > 64 to stay in registers. */
template <int DT, int DP, int BT> static cml_status bwd_mma_launch(cml_ctx *ctx, const cml__attn_params &p) {
    const size_t smem = bwd_mma_cfg<DP, 64, BT>::smem;
    return bwd_mma_run(ctx, p, NT, attn_bwd_dkv_mma_kernel<DT, DP, BT>, "attn_bwd_dkv_mma_kernel", smem,
                       attn_bwd_dq_mma_kernel<DT, DP, BT>, "attn_bwd_dq_mma_kernel", smem);
}

/* D = 256: BQ (dkv) and BK (dq) as below; BK (dkv) and BQ (dq) are 64. */
#define BQ2 64
#define BK2 64

template <int DT, int DP> static cml_status bwd_mma2_launch(cml_ctx *ctx, const cml__attn_params &p) {
    return bwd_mma_run(ctx, p, NT2, attn_bwd_dkv_mma2_kernel<DT, DP, BQ2>, "attn_bwd_dkv_mma2_kernel",
                       bwd_mma2_cfg<DP, 64, BQ2>::smem, attn_bwd_dq_mma2_kernel<DT, DP, BK2>,
                       "attn_bwd_dq_mma2_kernel", bwd_mma2_cfg<DP, 64, BK2>::smem);
}

extern "C" size_t cml__attention_bwd_mma_smem(int64_t D) {
    if (cml__attn_dp(D) <= 128) return bwd_mma_cfg<128, 64, 32>::smem;
    const size_t a = bwd_mma2_cfg<256, 64, BQ2>::smem, b = bwd_mma2_cfg<256, 64, BK2>::smem;
    return a > b ? a : b;
}

template <int DT> static cml_status bwd_mma_dtype(cml_ctx *ctx, const cml__attn_params &p) {
    switch (cml__attn_dp(p.D)) {
    case 32: return bwd_mma_launch<DT, 32, 64>(ctx, p);
    case 64: return bwd_mma_launch<DT, 64, 64>(ctx, p);
    case 128: return bwd_mma_launch<DT, 128, 32>(ctx, p);
    default: return bwd_mma2_launch<DT, 256>(ctx, p);
    }
}

static long long bwd_mma_runs;

extern "C" long long cml__attention_bwd_mma_runs(void) { return __atomic_load_n(&bwd_mma_runs, __ATOMIC_RELAXED); }

extern "C" cml_status cml__attention_bwd_mma(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK,
                                             void *dV, const void *dO, const void *Q, const void *K, const void *V,
                                             const void *O, const float *lse) {
    static const char fn[] = "cml_attention_bwd";
    if (!cml__attention_mma_takes(ctx, desc, true))
        return cml__error(CML_ERR_UNSUPPORTED, "%s: the tensor-core path takes f16/bf16 with D <= 256 on sm_80+, "
                                               "D > 128 where a block may have %zu bytes of shared memory "
                                               "(got %s, D=%lld)",
                          fn, cml__attention_bwd_mma_smem(desc->D), cml_dtype_name(desc->dtype),
                          (long long)desc->D);
    cml__attn_params p;
    const void *ptrs[7] = {dQ, dK, dV, dO, Q, K, V};
    CML_TRY(cml__attn_setup(fn, ctx, desc, &p, ptrs, 7));
    if (p.B == 0) return CML_OK;
    p.Q = Q, p.K = K, p.V = V, p.dO = dO, p.O = (void *)O, p.lse = lse;
    p.dQ = dQ, p.dK = dK, p.dV = dV;
    CML_TRY(cml__attn_bwd_prep(ctx, &p));
    const cml_status st = p.dtype == CML_F16 ? bwd_mma_dtype<CML_F16>(ctx, p) : bwd_mma_dtype<CML_BF16>(ctx, p);
    if (st == CML_OK) __atomic_add_fetch(&bwd_mma_runs, 1, __ATOMIC_RELAXED);
    return st;
}
