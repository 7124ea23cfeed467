/* CUDA attention forward on CUDA cores, exact f32 math, every dtype and head dim
 * up to 256: the path that is always correct (f32 inputs, and whatever the
 * tensor-core path does not take).
 *
 * FlashAttention-2 tiling: a block of 256 threads owns BQ = 64 query rows of one
 * (b, h) and walks the keys in tiles of BK, keeping a running row maximum m,
 * row sum l and the unnormalized output in registers (online softmax); scores
 * never leave the chip. Per key tile:
 *   1. K and V tiles to shared memory (f32, zero-padded);
 *   2. S = Q K^T: thread (rg, cg) of the 16 x 16 grid computes rows rg*TM + i
 *      and keys cg + 16 t (float4 loads along D; K rows padded by 4 floats so
 *      the 16 keys of a half warp hit distinct banks);
 *   3. the scaled, masked scores update m and l (half-warp butterflies), the
 *      output is rescaled, and P = exp2(S - m) goes to shared memory;
 *   4. O += P V, the thread's columns cg*CW + 16*CW*c.
 * Causal key tiles past the last row's diagonal are skipped (by position, not
 * data), and the grid starts with the longest (bottom) query tiles.
 * Determinism: every sum runs in a fixed order set by the thread layout alone. */
#include "kernels/cuda/attention/attention_common.cuh"

#define NT 256

template <int DP, int BQ, int BK> struct fwd_simt_cfg {
    static constexpr int TM = BQ / 16, TN = BK / 16, LD = DP + 4, LDP = BK + 4;
    static constexpr int CW = DP % 64 == 0 ? 4 : 2; /* output columns per chunk */
    static constexpr int NC = DP / (16 * CW);        /* chunks per thread */
    static constexpr size_t smem = sizeof(float) * ((size_t)(BQ + 2 * BK) * LD + (size_t)BQ * LDP);
};

template <int DT, int DP, int BQ, int BK>
static __global__ void __launch_bounds__(NT, DP >= 128 ? 1 : 2) attn_fwd_simt_kernel(const __grid_constant__ cml__attn_params pg) {
    typedef fwd_simt_cfg<DP, BQ, BK> C;
    constexpr int TM = C::TM, TN = C::TN, LD = C::LD, LDP = C::LDP, CW = C::CW, NC = C::NC;
    typedef typename cml__elem<DT>::type T;
    extern __shared__ float4 smem_f4[];
    float *Qs = (float *)smem_f4, *Ks = Qs + BQ * LD, *Vs = Ks + BK * LD, *Ps = Vs + BK * LD;
    const int tid = threadIdx.x, cg = tid % 16, rg = tid / 16;
    const int bh = blockIdx.x, b = bh / pg.H_q, h = bh % pg.H_q, hk = h / pg.group;
    const cml__attn_params p = cml__attn_bind(pg, b);
    const cml__attn_slices sl = cml__attn_slices_of(p, b, h, hk);
    const int n_tiles = (p.S_q + BQ - 1) / BQ;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int i0 = (n_tiles - 1 - t_) * BQ; /* longest causal tiles first */
        __syncthreads(); /* the previous tile's reads of Qs are done */
        cml__attn_load_f32<DT, DP, BQ, NT>(Qs, p.Q, sl.q, p.qs[1], i0, p.S_q - i0, p.D, p.vec);
        float o[TM][NC * CW], m[TM], l[TM];
        int vend[TM];
#pragma unroll
        for (int i = 0; i < TM; i++) {
            m[i] = CML_ATTN_NEG_INF;
            l[i] = 0.0f;
            vend[i] = cml__attn_visible_end(p, (long long)i0 + rg * TM + i);
#pragma unroll
            for (int e = 0; e < NC * CW; e++) o[i][e] = 0.0f;
        }
        const int last = (i0 + BQ < p.S_q ? i0 + BQ : p.S_q) - 1;
        const int kv_end = cml__attn_visible_end(p, last);
        for (int j0 = 0; j0 < kv_end; j0 += BK) {
            __syncthreads(); /* Ks, Vs, Ps free; Qs written */
            cml__attn_load_f32<DT, DP, BK, NT>(Ks, p.K, sl.k, p.ks[1], j0, p.S_kv - j0, p.D, p.vec);
            cml__attn_load_f32<DT, DP, BK, NT>(Vs, p.V, sl.v, p.vs[1], j0, p.S_kv - j0, p.D, p.vec);
            __syncthreads();
            float s[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int t = 0; t < TN; t++) s[i][t] = 0.0f;
#pragma unroll 4
            for (int d = 0; d < DP; d += 4) {
                float4 qv[TM], kv[TN];
#pragma unroll
                for (int i = 0; i < TM; i++) qv[i] = *(const float4 *)(Qs + (rg * TM + i) * LD + d);
#pragma unroll
                for (int t = 0; t < TN; t++) kv[t] = *(const float4 *)(Ks + (cg + 16 * t) * LD + d);
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int t = 0; t < TN; t++) {
                        float a = s[i][t];
                        a = fmaf(qv[i].x, kv[t].x, a);
                        a = fmaf(qv[i].y, kv[t].y, a);
                        a = fmaf(qv[i].z, kv[t].z, a);
                        s[i][t] = fmaf(qv[i].w, kv[t].w, a);
                    }
            }
            /* online softmax in the exp2 domain: scores * scale * log2(e) */
#pragma unroll
            for (int i = 0; i < TM; i++) {
                float mx = CML_ATTN_NEG_INF;
#pragma unroll
                for (int t = 0; t < TN; t++) {
                    s[i][t] = j0 + cg + 16 * t < vend[i] ? s[i][t] * p.scale_log2 : CML_ATTN_NEG_INF;
                    mx = fmaxf(mx, s[i][t]);
                }
                mx = cml__attn_max16(mx);
                const float m_new = fmaxf(m[i], mx);
                const float base = m_new == CML_ATTN_NEG_INF ? 0.0f : m_new; /* a row that sees nothing yet */
                const float alpha = exp2f(m[i] - base);
                float rs = 0.0f;
#pragma unroll
                for (int t = 0; t < TN; t++) {
                    s[i][t] = exp2f(s[i][t] - base);
                    rs += s[i][t];
                }
                rs = cml__attn_sum16(rs);
                l[i] = l[i] * alpha + rs;
                m[i] = m_new;
#pragma unroll
                for (int e = 0; e < NC * CW; e++) o[i][e] *= alpha;
#pragma unroll
                for (int t = 0; t < TN; t++) Ps[(rg * TM + i) * LDP + cg + 16 * t] = s[i][t];
            }
            __syncthreads();
            /* O += P V over the tile's keys, four at a time */
#pragma unroll 2
            for (int k = 0; k < BK; k += 4) {
                float4 pv[TM];
#pragma unroll
                for (int i = 0; i < TM; i++) pv[i] = *(const float4 *)(Ps + (rg * TM + i) * LDP + k);
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    float vv[NC * CW];
                    const float *vrow = Vs + (k + kk) * LD + cg * CW;
#pragma unroll
                    for (int c = 0; c < NC; c++) {
                        if constexpr (CW == 4) {
                            const float4 x = *(const float4 *)(vrow + c * 16 * CW);
                            vv[c * 4] = x.x, vv[c * 4 + 1] = x.y, vv[c * 4 + 2] = x.z, vv[c * 4 + 3] = x.w;
                        } else {
                            const float2 x = *(const float2 *)(vrow + c * 16 * CW);
                            vv[c * 2] = x.x, vv[c * 2 + 1] = x.y;
                        }
                    }
#pragma unroll
                    for (int i = 0; i < TM; i++) {
                        const float pk = kk == 0 ? pv[i].x : kk == 1 ? pv[i].y : kk == 2 ? pv[i].z : pv[i].w;
#pragma unroll
                        for (int e = 0; e < NC * CW; e++) o[i][e] = fmaf(pk, vv[e], o[i][e]);
                    }
                }
            }
        }
        /* O = acc / l; a row that saw no key gets O = 0 and lse = -inf */
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int qi = i0 + rg * TM + i;
            if (qi >= p.S_q) continue;
            const float li = l[i];
            T *orow = (T *)p.O + sl.o + (long long)qi * p.os[1];
#pragma unroll
            for (int c = 0; c < NC; c++)
#pragma unroll
                for (int e = 0; e < CW; e++) {
                    const int col = c * 16 * CW + cg * CW + e;
                    if (col < p.D) orow[col] = cml__from_f32<DT>(li > 0.0f ? o[i][c * CW + e] / li : 0.0f);
                }
            if (cg == 0 && p.lse_out)
                p.lse_out[sl.row + qi] =
                    li > 0.0f ? (m[i] + log2f(li)) * CML_ATTN_LN2 : CML_ATTN_NEG_INF;
        }
    }
}

template <int DT, int DP, int BQ, int BK>
static cml_status fwd_simt_launch(cml_ctx *ctx, const cml__attn_params &p) {
    static const char fn[] = "cml_attention_fwd";
    const size_t smem = fwd_simt_cfg<DP, BQ, BK>::smem;
    CML_CUDA_TRY(fn, cudaFuncSetAttribute(attn_fwd_simt_kernel<DT, DP, BQ, BK>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const long long bh = (long long)p.B * p.H_q, tiles = (p.S_q + BQ - 1) / BQ;
    const dim3 grid = cml__attn_grid(bh, tiles);
    attn_fwd_simt_kernel<DT, DP, BQ, BK><<<grid, NT, smem, cml__stream(ctx)>>>(p);
    return cml__cuda_check_launch(fn, "attn_fwd_simt_kernel", cml_dtype_name((cml_dtype)DT), bh * tiles,
                                  grid.x * grid.y, NT);
}

template <int DT> static cml_status fwd_simt_dtype(cml_ctx *ctx, const cml__attn_params &p) {
    switch (cml__attn_dp(p.D)) {
    case 32: return fwd_simt_launch<DT, 32, 64, 64>(ctx, p);
    case 64: return fwd_simt_launch<DT, 64, 64, 64>(ctx, p);
    case 128: return fwd_simt_launch<DT, 128, 64, 64>(ctx, p);
    default: return fwd_simt_launch<DT, 256, 64, 32>(ctx, p);
    }
}

extern "C" cml_status cml__attention_fwd_simt(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                              const void *Q, const void *K, const void *V) {
    cml__attn_params p;
    const void *ptrs[4] = {O, Q, K, V};
    CML_TRY(cml__attn_setup("cml_attention_fwd", ctx, desc, &p, ptrs, 4));
    if (p.B == 0) return CML_OK;
    p.Q = Q, p.K = K, p.V = V, p.O = O, p.lse_out = lse;
    if (p.dtype == CML_F16) return fwd_simt_dtype<CML_F16>(ctx, p);
    if (p.dtype == CML_BF16) return fwd_simt_dtype<CML_BF16>(ctx, p);
    return fwd_simt_dtype<CML_F32>(ctx, p);
}
