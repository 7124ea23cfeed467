/* CUDA attention forward on mma.sync tensor cores (f16/bf16, sm_80+, D <= 256):
 * FlashAttention-2 tiling with the S and P tiles in registers.
 *
 * A block of 4 warps owns BQ = 64 query rows of one (b, h), 16 per warp, and
 * walks the key tiles (BK keys) in order:
 *   1. K and V tiles into shared memory as they are (16-bit, zero-padded);
 *   2. S (16 x BK per warp) = Q K^T on the tensor cores, f32 accumulators;
 *   3. online softmax on the accumulators in the exp2 domain: row max and sum
 *      over the 4 lanes of a quad, rescale of the output accumulators;
 *   4. P packed to 16 bits is the A operand of O += P V directly (see
 *      attention_mma.cuh), V's B fragments by ldmatrix.trans.
 * Row statistics and the output stay in f32; only P is rounded to 16 bits for
 * the product, as in FlashAttention. Causal key tiles past the tile's last
 * diagonal are skipped by position; the longest query tiles start first.
 * Deterministic: every accumulation has a fixed order. */
#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_mma.cuh"

#define NT 128
#define BQ 64

template <int DP, int BK> struct fwd_mma_cfg {
    static constexpr int LD = DP + 8;
    static constexpr size_t smem = sizeof(uint16_t) * (size_t)(BQ + 2 * BK) * LD;
};

template <int DT, int DP, int BK>
static __global__ void __launch_bounds__(NT) attn_fwd_mma_kernel(const __grid_constant__ cml__attn_params pg) {
    constexpr int LD = fwd_mma_cfg<DP, BK>::LD;
    constexpr int NKT = BK / 8, NDT = DP / 8; /* n-tiles of S and of O */
    typedef typename cml__elem<DT>::type T;
    extern __shared__ uint4 smem_u4[];
    uint16_t *Qs = (uint16_t *)smem_u4, *Ks = Qs + BQ * LD, *Vs = Ks + BK * LD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const cml__attn_params p = cml__attn_bind(pg, blockIdx.x / pg.H_q);
    const cml__attn_slices sl = cml__attn_slices_of_bh(p, blockIdx.x);
    const int n_tiles = (p.S_q + BQ - 1) / BQ;
    for (int t_ = blockIdx.y; t_ < n_tiles; t_ += gridDim.y) {
        const int i0 = (n_tiles - 1 - t_) * BQ;
        __syncthreads();
        cml__attn_load_b16<DP, BQ, NT>(Qs, p.Q, sl.q, p.qs[1], i0, p.S_q - i0, p.D, p.vec);
        /* this lane's rows: r[0] = row g, r[1] = row g + 8 of the warp's 16 */
        const int row0 = i0 + warp * 16 + g;
        const int vend[2] = {cml__attn_visible_end(p, row0), cml__attn_visible_end(p, row0 + 8)};
        float o[NDT][4], m[2] = {CML_ATTN_NEG_INF, CML_ATTN_NEG_INF}, l[2] = {0.0f, 0.0f};
        cml__mma_zero(o);
        const int kv_end = cml__attn_tile_kv_end(p, i0, BQ);
        for (int j0 = 0; j0 < kv_end; j0 += BK) {
            __syncthreads();
            cml__attn_load_kv<DP, BK, NT>(Ks, Vs, p, sl, j0);
            __syncthreads();
            float s[NKT][4];
            cml__mma_zero(s);
#pragma unroll
            for (int k0 = 0; k0 < DP; k0 += 16) {
                uint32_t a[4];
                cml__load_a<LD>(a, Qs, warp * 16, k0, lane);
#pragma unroll
                for (int n = 0; n < NKT; n += 2) {
                    uint32_t bk[4];
                    cml__load_bt<LD>(bk, Ks, n * 8, k0, lane);
                    cml__mma_16816<DT>(s[n], a, bk[0], bk[1]);
                    cml__mma_16816<DT>(s[n + 1], a, bk[2], bk[3]);
                }
            }
            /* mask and scale; element e of n-tile n is row r = e / 2, key j0 + 8n + 2c + e % 2 */
            float mx[2] = {CML_ATTN_NEG_INF, CML_ATTN_NEG_INF};
#pragma unroll
            for (int n = 0; n < NKT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = j0 + 8 * n + 2 * c + (e & 1);
                    s[n][e] = key < vend[e / 2] ? s[n][e] * p.scale_log2 : CML_ATTN_NEG_INF;
                    mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
                }
            float base[2], alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float m_new = fmaxf(m[r], cml__attn_max4(mx[r]));
                base[r] = m_new == CML_ATTN_NEG_INF ? 0.0f : m_new;
                alpha[r] = exp2f(m[r] - base[r]);
                m[r] = m_new;
            }
#pragma unroll
            for (int n = 0; n < NKT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    s[n][e] = exp2f(s[n][e] - base[e / 2]);
                    rs[e / 2] += s[n][e];
                }
#pragma unroll
            for (int r = 0; r < 2; r++) l[r] = l[r] * alpha[r] + cml__attn_sum4(rs[r]);
#pragma unroll
            for (int n = 0; n < NDT; n++) {
                o[n][0] *= alpha[0], o[n][1] *= alpha[0];
                o[n][2] *= alpha[1], o[n][3] *= alpha[1];
            }
            /* O += P V */
#pragma unroll
            for (int k = 0; k < NKT; k += 2) {
                uint32_t a[4];
                cml__acc_to_a<DT>(a, s[k], s[k + 1]);
                cml__mma_bn<DT, LD>(o, a, Vs, k * 8, 0, lane);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int qi = row0 + 8 * r;
            if (qi >= p.S_q) continue;
            const float lr = l[r];
            T *orow = (T *)p.O + sl.o + (long long)qi * p.os[1];
#pragma unroll
            for (int n = 0; n < NDT; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int col = 8 * n + 2 * c + e;
                    if (col < p.D) orow[col] = cml__from_f32<DT>(lr > 0.0f ? o[n][2 * r + e] / lr : 0.0f);
                }
            if (c == 0 && p.lse_out)
                p.lse_out[sl.row + qi] = lr > 0.0f ? (m[r] + log2f(lr)) * CML_ATTN_LN2 : CML_ATTN_NEG_INF;
        }
    }
}

template <int DT, int DP, int BK> static cml_status fwd_mma_launch(cml_ctx *ctx, const cml__attn_params &p) {
    static const char fn[] = "cml_attention_fwd";
    const size_t smem = fwd_mma_cfg<DP, BK>::smem;
    CML_CUDA_TRY(fn, cudaFuncSetAttribute(attn_fwd_mma_kernel<DT, DP, BK>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const long long bh = (long long)p.B * p.H_q, tiles = (p.S_q + BQ - 1) / BQ;
    const dim3 grid = cml__attn_grid(bh, tiles);
    attn_fwd_mma_kernel<DT, DP, BK><<<grid, NT, smem, cml__stream(ctx)>>>(p);
    return cml__cuda_check_launch(fn, "attn_fwd_mma_kernel", cml_dtype_name((cml_dtype)DT), bh * tiles,
                                  grid.x * grid.y, NT);
}

template <int DT> static cml_status fwd_mma_dtype(cml_ctx *ctx, const cml__attn_params &p) {
    switch (cml__attn_dp(p.D)) {
    case 32: return fwd_mma_launch<DT, 32, 64>(ctx, p);
    case 64: return fwd_mma_launch<DT, 64, 64>(ctx, p);
    case 128: return fwd_mma_launch<DT, 128, 64>(ctx, p);
    default: return fwd_mma_launch<DT, 256, 32>(ctx, p);
    }
}

extern "C" cml_status cml__attention_fwd_mma(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                             const void *Q, const void *K, const void *V) {
    static const char fn[] = "cml_attention_fwd";
    if (!cml__attention_mma_takes(ctx, desc, false))
        return cml__error(CML_ERR_UNSUPPORTED, "%s: the tensor-core path takes f16/bf16 with D <= 256 on sm_80+ "
                                               "(got %s, D=%lld)",
                          fn, cml_dtype_name(desc->dtype), (long long)desc->D);
    cml__attn_params p;
    const void *ptrs[4] = {O, Q, K, V};
    CML_TRY(cml__attn_setup(fn, ctx, desc, &p, ptrs, 4));
    if (p.B == 0) return CML_OK;
    p.Q = Q, p.K = K, p.V = V, p.O = O, p.lse_out = lse;
    if (p.dtype == CML_F16) return fwd_mma_dtype<CML_F16>(ctx, p);
    return fwd_mma_dtype<CML_BF16>(ctx, p);
}
