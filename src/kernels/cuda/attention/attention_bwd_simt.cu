/* CUDA attention backward on CUDA cores, exact f32 math, every dtype and head
 * dim up to 256 (the always-correct path; see attention_fwd_simt.cu for the
 * thread layout). FlashAttention-2's backward, deterministic without atomics:
 *
 *   P_ij = exp(scale q_i.k_j - lse_i),  dS_ij = P_ij (dO_i.v_j - Di),  Di = rowsum(dO_i * O_i)
 *   dkv kernel: a block per (b, kv head, BK keys) keeps dK and dV in registers and
 *               walks every query head of its group and every query tile in
 *               order: dV += P^T dO, dK += dS^T Q (then dK *= scale);
 *   dq kernel:  a block per (b, head, BQ queries) walks the key tiles in order:
 *               dQ += dS K (then dQ *= scale).
 * Scores are recomputed in both (nothing of size S x S is stored). Causal tiles
 * wholly above the diagonal are skipped by position. Di comes from
 * cml__attn_bwd_prep (attention_cuda.cu). */
#include "kernels/cuda/attention/attention_common.cuh"

#define NT 256

/* Rows are the thread grid's 16 row groups x TM, columns its 16 column groups (x TN
 * for scores, chunks of CW for D-wide accumulators). */
template <int DP, int BR, int BC> struct bwd_simt_cfg {
    static constexpr int TM = BR / 16, TN = BC / 16, LD = DP + 4, LDP = BC + 4;
    static constexpr int CW = DP % 64 == 0 ? 4 : 2, NC = DP / (16 * CW);
    /* dkv: K, V (BR rows), Q, dO (BC rows), P^T, dS^T (BR x BC), lse, Di (BC) */
    static constexpr size_t smem_dkv = sizeof(float) * ((size_t)(2 * BR + 2 * BC) * LD + 2 * (size_t)BR * LDP + 2 * BC);
    /* dq: Q, dO (BR rows), K, V (BC rows), dS (BR x BC) */
    static constexpr size_t smem_dq = sizeof(float) * ((size_t)(2 * BR + 2 * BC) * LD + (size_t)BR * LDP);
};

/* The D-wide row chunk of the calling thread's column group at row r of a tile. */
template <int CW, int NC>
static __device__ __forceinline__ void load_cols(float *out, const float *row, int cg) {
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if constexpr (CW == 4) {
            const float4 x = *(const float4 *)(row + c * 16 * CW + cg * CW);
            out[c * 4] = x.x, out[c * 4 + 1] = x.y, out[c * 4 + 2] = x.z, out[c * 4 + 3] = x.w;
        } else {
            const float2 x = *(const float2 *)(row + c * 16 * CW + cg * CW);
            out[c * 2] = x.x, out[c * 2 + 1] = x.y;
        }
    }
}

static __device__ __forceinline__ float comp(const float4 &v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

/* acc (TM x TN) += A_rows . B_rows over DP, twice at once: (A1, B1) and (A2, B2). */
template <int TM, int TN, int DP, int LD>
static __device__ __forceinline__ void dot_tiles2(float (&s1)[TM][TN], float (&s2)[TM][TN], const float *A1,
                                                  const float *B1, const float *A2, const float *B2, int rg, int cg) {
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int t = 0; t < TN; t++) s1[i][t] = s2[i][t] = 0.0f;
#pragma unroll 2
    for (int d = 0; d < DP; d += 4) {
        float4 a1[TM], a2[TM], b1[TN], b2[TN];
#pragma unroll
        for (int i = 0; i < TM; i++) {
            a1[i] = *(const float4 *)(A1 + (rg * TM + i) * LD + d);
            a2[i] = *(const float4 *)(A2 + (rg * TM + i) * LD + d);
        }
#pragma unroll
        for (int t = 0; t < TN; t++) {
            b1[t] = *(const float4 *)(B1 + (cg + 16 * t) * LD + d);
            b2[t] = *(const float4 *)(B2 + (cg + 16 * t) * LD + d);
        }
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int t = 0; t < TN; t++) {
                float x = s1[i][t], y = s2[i][t];
                x = fmaf(a1[i].x, b1[t].x, x), y = fmaf(a2[i].x, b2[t].x, y);
                x = fmaf(a1[i].y, b1[t].y, x), y = fmaf(a2[i].y, b2[t].y, y);
                x = fmaf(a1[i].z, b1[t].z, x), y = fmaf(a2[i].z, b2[t].z, y);
                s1[i][t] = fmaf(a1[i].w, b1[t].w, x), s2[i][t] = fmaf(a2[i].w, b2[t].w, y);
            }
    }
}

/* ---- dK, dV ---------------------------------------------------------------------------- */

template <int DT, int DP, int BK, int BQ>
static __global__ void __launch_bounds__(NT, DP >= 64 ? 1 : 2) attn_bwd_dkv_simt_kernel(const __grid_constant__ cml__attn_params pg) {
    typedef bwd_simt_cfg<DP, BK, BQ> C;
    constexpr int TM = C::TM, TN = C::TN, LD = C::LD, LDP = C::LDP, CW = C::CW, NC = C::NC;
    typedef typename cml__elem<DT>::type T;
    extern __shared__ float4 smem_f4[];
    float *Ks = (float *)smem_f4, *Vs = Ks + BK * LD, *Qs = Vs + BK * LD, *dOs = Qs + BQ * LD;
    float *Pt = dOs + BQ * LD, *dSt = Pt + BK * LDP, *Ls = dSt + BK * LDP, *Dis = Ls + BQ;
    const int tid = threadIdx.x, cg = tid % 16, rg = tid / 16;
    const int bh = blockIdx.x, b = bh / pg.H_kv, hk = bh % pg.H_kv;
    const cml__attn_params p = cml__attn_bind(pg, b);
    const cml__attn_slices kv = cml__attn_slices_of(p, b, hk * p.group, hk); /* K, V of this kv head */
    const int n_tiles = (p.S_kv + BK - 1) / BK;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int j0 = t_ * BK;
        __syncthreads();
        cml__attn_load_f32<DT, DP, BK, NT>(Ks, p.K, kv.k, p.ks[1], j0, p.S_kv - j0, p.D, p.vec);
        cml__attn_load_f32<DT, DP, BK, NT>(Vs, p.V, kv.v, p.vs[1], j0, p.S_kv - j0, p.D, p.vec);
        float dk[TM][NC * CW], dv[TM][NC * CW];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int e = 0; e < NC * CW; e++) dk[i][e] = dv[i][e] = 0.0f;
        const int i_first = cml__attn_first_query(p, j0);
        for (int h = hk * p.group; h < (hk + 1) * p.group; h++) {
            const cml__attn_slices sl = cml__attn_slices_of(p, b, h, hk);
            for (int i0 = i_first; i0 < p.S_q; i0 += BQ) {
                __syncthreads(); /* Qs, dOs, Pt, dSt, Ls, Dis free; Ks, Vs written */
                cml__attn_load_f32<DT, DP, BQ, NT>(Qs, p.Q, sl.q, p.qs[1], i0, p.S_q - i0, p.D, p.vec);
                cml__attn_load_f32<DT, DP, BQ, NT>(dOs, p.dO, sl.o, p.os[1], i0, p.S_q - i0, p.D, p.vec);
                cml__attn_load_lse_di<BQ, NT>(Ls, Dis, p, sl, i0);
                __syncthreads();
                float st[TM][TN], dpt[TM][TN]; /* S^T = K Q^T, dP^T = V dO^T */
                dot_tiles2<TM, TN, DP, LD>(st, dpt, Ks, Qs, Vs, dOs, rg, cg);
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int t = 0; t < TN; t++) {
                        const int key = j0 + rg * TM + i, q = cg + 16 * t;
                        const bool sees = cml__attn_sees(p, (long long)i0 + q, key);
                        const float pij = sees ? exp2f(st[i][t] * p.scale_log2 - Ls[q]) : 0.0f;
                        Pt[(rg * TM + i) * LDP + q] = pij;
                        dSt[(rg * TM + i) * LDP + q] = sees ? pij * (dpt[i][t] - Dis[q]) : 0.0f;
                    }
                __syncthreads();
                /* dV += P^T dO, dK += dS^T Q, four query rows at a time */
#pragma unroll 2
                for (int q = 0; q < BQ; q += 4) {
                    float4 pv[TM], sv[TM];
#pragma unroll
                    for (int i = 0; i < TM; i++) {
                        pv[i] = *(const float4 *)(Pt + (rg * TM + i) * LDP + q);
                        sv[i] = *(const float4 *)(dSt + (rg * TM + i) * LDP + q);
                    }
#pragma unroll
                    for (int qq = 0; qq < 4; qq++) {
                        float orow[NC * CW], qrow[NC * CW];
                        load_cols<CW, NC>(orow, dOs + (q + qq) * LD, cg);
                        load_cols<CW, NC>(qrow, Qs + (q + qq) * LD, cg);
#pragma unroll
                        for (int i = 0; i < TM; i++) {
                            const float pk = comp(pv[i], qq), sk = comp(sv[i], qq);
#pragma unroll
                            for (int e = 0; e < NC * CW; e++) {
                                dv[i][e] = fmaf(pk, orow[e], dv[i][e]);
                                dk[i][e] = fmaf(sk, qrow[e], dk[i][e]);
                            }
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int key = j0 + rg * TM + i;
            if (key >= p.S_kv) continue;
            T *dkrow = (T *)p.dK + kv.k + (long long)key * p.ks[1];
            T *dvrow = (T *)p.dV + kv.v + (long long)key * p.vs[1];
#pragma unroll
            for (int c = 0; c < NC; c++)
#pragma unroll
                for (int e = 0; e < CW; e++) {
                    const int col = c * 16 * CW + cg * CW + e;
                    if (col >= p.D) continue;
                    dkrow[col] = cml__from_f32<DT>(dk[i][c * CW + e] * p.scale);
                    dvrow[col] = cml__from_f32<DT>(dv[i][c * CW + e]);
                }
        }
    }
}

/* ---- dQ ---------------------------------------------------------------------------------- */

template <int DT, int DP, int BQ, int BK>
static __global__ void __launch_bounds__(NT, DP >= 64 ? 1 : 2) attn_bwd_dq_simt_kernel(const __grid_constant__ cml__attn_params pg) {
    typedef bwd_simt_cfg<DP, BQ, BK> C;
    constexpr int TM = C::TM, TN = C::TN, LD = C::LD, LDP = C::LDP, CW = C::CW, NC = C::NC;
    typedef typename cml__elem<DT>::type T;
    extern __shared__ float4 smem_f4[];
    float *Qs = (float *)smem_f4, *dOs = Qs + BQ * LD, *Ks = dOs + BQ * LD, *Vs = Ks + BK * LD, *dSs = Vs + BK * LD;
    const int tid = threadIdx.x, cg = tid % 16, rg = tid / 16;
    const cml__attn_params p = cml__attn_bind(pg, blockIdx.x / pg.H_q);
    const cml__attn_slices sl = cml__attn_slices_of_bh(p, blockIdx.x);
    const int n_tiles = (p.S_q + BQ - 1) / BQ;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int i0 = (n_tiles - 1 - t_) * BQ;
        __syncthreads();
        cml__attn_load_f32<DT, DP, BQ, NT>(Qs, p.Q, sl.q, p.qs[1], i0, p.S_q - i0, p.D, p.vec);
        cml__attn_load_f32<DT, DP, BQ, NT>(dOs, p.dO, sl.o, p.os[1], i0, p.S_q - i0, p.D, p.vec);
        float dq[TM][NC * CW], L2[TM], Dr[TM];
        int vend[TM];
#pragma unroll
        for (int i = 0; i < TM; i++) {
            vend[i] = cml__attn_bwd_row(p, sl, i0 + rg * TM + i, L2[i], Dr[i]);
#pragma unroll
            for (int e = 0; e < NC * CW; e++) dq[i][e] = 0.0f;
        }
        const int kv_end = cml__attn_tile_kv_end(p, i0, BQ);
        for (int j0 = 0; j0 < kv_end; j0 += BK) {
            __syncthreads();
            cml__attn_load_f32<DT, DP, BK, NT>(Ks, p.K, sl.k, p.ks[1], j0, p.S_kv - j0, p.D, p.vec);
            cml__attn_load_f32<DT, DP, BK, NT>(Vs, p.V, sl.v, p.vs[1], j0, p.S_kv - j0, p.D, p.vec);
            __syncthreads();
            float s[TM][TN], dp[TM][TN]; /* S = Q K^T, dP = dO V^T */
            dot_tiles2<TM, TN, DP, LD>(s, dp, Qs, Ks, dOs, Vs, rg, cg);
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int t = 0; t < TN; t++) {
                    const bool sees = j0 + cg + 16 * t < vend[i];
                    const float pij = sees ? exp2f(s[i][t] * p.scale_log2 - L2[i]) : 0.0f;
                    dSs[(rg * TM + i) * LDP + cg + 16 * t] = sees ? pij * (dp[i][t] - Dr[i]) : 0.0f;
                }
            __syncthreads();
#pragma unroll 2
            for (int k = 0; k < BK; k += 4) {
                float4 sv[TM];
#pragma unroll
                for (int i = 0; i < TM; i++) sv[i] = *(const float4 *)(dSs + (rg * TM + i) * LDP + k);
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    float krow[NC * CW];
                    load_cols<CW, NC>(krow, Ks + (k + kk) * LD, cg);
#pragma unroll
                    for (int i = 0; i < TM; i++) {
                        const float sk = comp(sv[i], kk);
#pragma unroll
                        for (int e = 0; e < NC * CW; e++) dq[i][e] = fmaf(sk, krow[e], dq[i][e]);
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int qi = i0 + rg * TM + i;
            if (qi >= p.S_q) continue;
            T *row = (T *)p.dQ + sl.q + (long long)qi * p.qs[1];
#pragma unroll
            for (int c = 0; c < NC; c++)
#pragma unroll
                for (int e = 0; e < CW; e++) {
                    const int col = c * 16 * CW + cg * CW + e;
                    if (col < p.D) row[col] = cml__from_f32<DT>(dq[i][c * CW + e] * p.scale);
                }
        }
    }
}

/* ---- launches ------------------------------------------------------------------------------ */

template <int DT, int DP, int BK, int BQ>
static cml_status bwd_simt_launch(cml_ctx *ctx, const cml__attn_params &p) {
    static const char fn[] = "cml_attention_bwd";
    cudaStream_t s = cml__stream(ctx);
    const size_t smem_dkv = bwd_simt_cfg<DP, BK, BQ>::smem_dkv, smem_dq = bwd_simt_cfg<DP, BQ, BK>::smem_dq;
    CML_CUDA_TRY(fn, cudaFuncSetAttribute(attn_bwd_dkv_simt_kernel<DT, DP, BK, BQ>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_dkv));
    CML_CUDA_TRY(fn, cudaFuncSetAttribute(attn_bwd_dq_simt_kernel<DT, DP, BQ, BK>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_dq));
    const long long bkv = (long long)p.B * p.H_kv, ktiles = (p.S_kv + BK - 1) / BK;
    const dim3 g1 = cml__attn_grid(bkv, ktiles);
    attn_bwd_dkv_simt_kernel<DT, DP, BK, BQ><<<g1, NT, smem_dkv, s>>>(p);
    CML_TRY(cml__cuda_check_launch(fn, "attn_bwd_dkv_simt_kernel", cml_dtype_name((cml_dtype)DT), bkv * ktiles,
                                   g1.x * g1.y, NT));
    const long long bq = (long long)p.B * p.H_q, qtiles = (p.S_q + BQ - 1) / BQ;
    const dim3 g2 = cml__attn_grid(bq, qtiles);
    attn_bwd_dq_simt_kernel<DT, DP, BQ, BK><<<g2, NT, smem_dq, s>>>(p);
    return cml__cuda_check_launch(fn, "attn_bwd_dq_simt_kernel", cml_dtype_name((cml_dtype)DT), bq * qtiles,
                                  g2.x * g2.y, NT);
}

/* Tiles (BK keys, BQ queries) per head dim: shared memory 72 KB (D <= 32) to 142 KB (D <= 256). */
template <int DT> static cml_status bwd_simt_dtype(cml_ctx *ctx, const cml__attn_params &p) {
    switch (cml__attn_dp(p.D)) {
    case 32: return bwd_simt_launch<DT, 32, 64, 64>(ctx, p);
    case 64: return bwd_simt_launch<DT, 64, 64, 64>(ctx, p);
    case 128: return bwd_simt_launch<DT, 128, 64, 32>(ctx, p);
    default: return bwd_simt_launch<DT, 256, 32, 32>(ctx, p);
    }
}

extern "C" cml_status cml__attention_bwd_simt(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK,
                                              void *dV, const void *dO, const void *Q, const void *K, const void *V,
                                              const void *O, const float *lse) {
    cml__attn_params p;
    const void *ptrs[7] = {dQ, dK, dV, dO, Q, K, V};
    CML_TRY(cml__attn_setup("cml_attention_bwd", ctx, desc, &p, ptrs, 7));
    if (p.B == 0) return CML_OK;
    p.Q = Q, p.K = K, p.V = V, p.dO = dO, p.O = (void *)O, p.lse = lse;
    p.dQ = dQ, p.dK = dK, p.dV = dV;
    CML_TRY(cml__attn_bwd_prep(ctx, &p));
    if (p.dtype == CML_F16) return bwd_simt_dtype<CML_F16>(ctx, p);
    if (p.dtype == CML_BF16) return bwd_simt_dtype<CML_BF16>(ctx, p);
    return bwd_simt_dtype<CML_F32>(ctx, p);
}
