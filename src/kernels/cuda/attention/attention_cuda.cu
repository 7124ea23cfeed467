/* CUDA attention: path selection, launch parameters, and the backward's
 * preprocessing Di = rowsum(dO * O).
 *
 * Paths (each handles the whole problem, bitwise deterministic, never an
 * S_q x S_kv matrix in memory):
 *   - sm90 (attention_fwd_sm90.cu, attention_bwd_sm90.cu): wgmma + TMA, FlashAttention-3
 *     style, on sm_90 for f16/bf16, D = 64, 128, 256 (the D = 256 backward kernel in
 *     attention_bwd_sm90_d256p.cuh) and TMA-compatible strides and pointers
 *     (attention_sm90.h); everything else goes on down this list;
 *   - mma (attention_fwd_mma.cu, attention_bwd_mma.cu): FlashAttention-2 tiling
 *     on mma.sync m16n8k16 tensor cores, for f16/bf16 on sm_80 and later,
 *     D <= 256 (the backward at D > 128 where the device has the shared memory it takes);
 *   - simt (attention_fwd_simt.cu, attention_bwd_simt.cu): the same tiling in
 *     exact f32 on CUDA cores, for every dtype and D <= 256: f32 inputs, and
 *     whatever the mma path does not take.
 */
#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_mma.cuh"
#include "kernels/cuda/attention/attention_sm90.h"

#include <limits.h>

#define PREP_BLOCK 256

extern "C" dim3 cml__attn_grid(long long bh, long long tiles) {
    return dim3((unsigned)bh, (unsigned)(tiles < 65535 ? (tiles > 0 ? tiles : 1) : 65535), 1);
}

static bool aligned16(const void *ptr) { return ((uintptr_t)ptr & 15u) == 0; }

static bool strides_by8(const int64_t s[3]) { return s[0] % 8 == 0 && s[1] % 8 == 0 && s[2] % 8 == 0; }

extern "C" cml_status cml__attn_params_init(const char *fn, const cml_ctx *ctx, const cml_attention_desc *d,
                                            cml__attn_params *p) {
    if (cml__attn_dp(d->D) == 0)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: desc->D=%lld is not supported on CUDA (head dims up to 256 are)",
                          fn, (long long)d->D);
    CML_TRY(cml__cuda_check_float_dtype(fn, "desc->dtype", d->dtype));
    /* sequence lengths keep a margin: the kernels form i0 + BQ, j0 + BK, row + 8 ... in int */
    if (d->S_q > INT_MAX - 1024 || d->S_kv > INT_MAX - 1024 || d->B > INT_MAX || d->H_q > INT_MAX ||
        d->B * d->H_q > INT_MAX)
        return cml__error(CML_ERR_UNSUPPORTED,
                          "%s: sizes above 2^31-1 (sequences above 2^31-1025) are not supported on CUDA "
                          "(S_q=%lld, S_kv=%lld, B*H_q=%lld)", fn,
                          (long long)d->S_q, (long long)d->S_kv, (long long)(d->B * d->H_q));
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 3; i++) {
        p->qs[i] = d->q_stride[i];
        p->ks[i] = d->k_stride[i];
        p->vs[i] = d->v_stride[i];
        p->os[i] = d->o_stride[i];
    }
    p->B = (int)d->B;
    p->H_q = (int)d->H_q;
    p->H_kv = (int)d->H_kv;
    p->S_q = (int)d->S_q;
    p->S_kv = (int)d->S_kv;
    p->D = (int)d->D;
    p->group = (int)(d->H_q / d->H_kv);
    p->dtype = (int)d->dtype;
    p->causal = d->causal ? 1 : 0;
    p->scale = d->scale;
    p->scale_log2 = d->scale * CML_ATTN_LOG2E;
    p->lse_ld = (int)d->S_q;
    p->cu_q = d->cu_seqlens_q, p->cu_kv = d->cu_seqlens_kv; /* both or neither (checked by the caller) */
    p->total_q = d->total_q, p->total_kv = d->total_kv;
    p->vec = d->D % 8 == 0 && strides_by8(d->q_stride) && strides_by8(d->k_stride) && strides_by8(d->v_stride) &&
             strides_by8(d->o_stride);
    (void)ctx; /* the arch does not change the parameters */
    return CML_OK;
}

/* Also 16-byte aligned pointers, once they are known. */
static void check_vec_pointers(cml__attn_params *p, const void *const *ptrs, int n) {
    for (int i = 0; i < n; i++)
        if (ptrs[i] && !aligned16(ptrs[i])) p->vec = 0;
}

/* ---- Di = rowsum(dO * O): one warp per row, a fixed butterfly ---------------------------- */

template <int DT>
static __global__ void attn_bwd_prep_kernel(const __grid_constant__ cml__attn_params p, float *Di) {
    typedef typename cml__elem<DT>::type T;
    const long long rows = (long long)p.B * p.H_q * p.S_q;
    const int lane = threadIdx.x % 32;
    for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows;
         row += (long long)gridDim.x * blockDim.x / 32) {
        const long long i = row % p.S_q, bh = row / p.S_q, b = bh / p.H_q, h = bh % p.H_q;
        long long q0 = 0; /* varlen: rows past the sequence's end have no Di (nothing reads it) */
        if (p.cu_q && i >= cml__attn_seq_rows(p.cu_q, (int)b, p.total_q, p.S_q, q0)) continue;
        const long long off = b * p.os[0] + (q0 + i) * p.os[1] + h * p.os[2];
        float acc = 0.0f;
        for (int d = lane; d < p.D; d += 32)
            acc = fmaf(cml__to_f32<DT>(((const T *)p.dO)[off + d]), cml__to_f32<DT>(((const T *)p.O)[off + d]), acc);
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) Di[row] = acc;
    }
}

extern "C" cml_status cml__attn_bwd_prep(cml_ctx *ctx, cml__attn_params *p) {
    static const char fn[] = "cml_attention_bwd";
    const long long rows = (long long)p->B * p->H_q * p->S_q;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)rows * sizeof(float)));
    p->Di = (const float *)ws;
    const unsigned grid = cml__grid_size(ctx, rows * 32, PREP_BLOCK);
    cudaStream_t s = cml__stream(ctx);
    if (p->dtype == CML_F16) attn_bwd_prep_kernel<CML_F16><<<grid, PREP_BLOCK, 0, s>>>(*p, (float *)ws);
    else if (p->dtype == CML_BF16) attn_bwd_prep_kernel<CML_BF16><<<grid, PREP_BLOCK, 0, s>>>(*p, (float *)ws);
    else attn_bwd_prep_kernel<CML_F32><<<grid, PREP_BLOCK, 0, s>>>(*p, (float *)ws);
    return cml__cuda_check_launch(fn, "attn_bwd_prep_kernel", cml_dtype_name((cml_dtype)p->dtype), rows, grid,
                                  PREP_BLOCK);
}

/* ---- entry points --------------------------------------------------------------------- */

extern "C" cml_status cml__attn_setup(const char *fn, cml_ctx *ctx, const cml_attention_desc *d,
                                      cml__attn_params *p, const void *const *ptrs, int n_ptrs) {
    CML_TRY(cml__attn_params_init(fn, ctx, d, p));
    check_vec_pointers(p, ptrs, n_ptrs);
    return cml__cuda_activate(ctx);
}

extern "C" bool cml__attention_mma_takes(const cml_ctx *ctx, const cml_attention_desc *d, bool backward) {
    if (d->dtype != CML_F16 && d->dtype != CML_BF16) return false;
    if (d->D > 256 || cml__cuda_arch(ctx->device.index) < 80) return false;
    if (!backward || d->D <= 128) return true;
    int smem = 0; /* D > 128: the backward's larger tiles (sm_86/89 have 99 KB a block, sm_80 163 KB) */
    if (cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device.index) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return (size_t)smem >= cml__attention_bwd_mma_smem(d->D);
}

extern "C" const char *cml__attention_fwd_cuda_path_name(const cml_ctx *ctx, const cml_attention_desc *desc,
                                                         const void *O, const void *Q, const void *K, const void *V) {
    if (cml__attention_fwd_sm90_takes(ctx, desc, O, Q, K, V)) return "sm90";
    return cml__attention_mma_takes(ctx, desc, false) ? "mma" : "simt";
}

extern "C" cml_status cml__attention_fwd_cuda(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                              const void *Q, const void *K, const void *V) {
    bool taken = false;
    cml_status st = cml__attention_fwd_sm90(ctx, desc, O, lse, Q, K, V, &taken);
    if (taken || st != CML_OK) return st;
    if (cml__attention_mma_takes(ctx, desc, false)) return cml__attention_fwd_mma(ctx, desc, O, lse, Q, K, V);
    return cml__attention_fwd_simt(ctx, desc, O, lse, Q, K, V);
}

extern "C" const char *cml__attention_bwd_cuda_path_name(const cml_ctx *ctx, const cml_attention_desc *desc,
                                                         const void *dQ, const void *dK, const void *dV,
                                                         const void *dO, const void *Q, const void *K, const void *V,
                                                         const void *O) {
    if (cml__attention_bwd_sm90_takes(ctx, desc, dQ, dK, dV, dO, Q, K, V, O)) return "sm90";
    return cml__attention_mma_takes(ctx, desc, true) ? "mma" : "simt";
}

extern "C" cml_status cml__attention_bwd_cuda(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK,
                                              void *dV, const void *dO, const void *Q, const void *K, const void *V,
                                              const void *O, const float *lse) {
    bool taken = false;
    cml_status st = cml__attention_bwd_sm90(ctx, desc, dQ, dK, dV, dO, Q, K, V, O, lse, &taken);
    if (taken || st != CML_OK) return st;
    if (cml__attention_mma_takes(ctx, desc, true))
        return cml__attention_bwd_mma(ctx, desc, dQ, dK, dV, dO, Q, K, V, O, lse);
    return cml__attention_bwd_simt(ctx, desc, dQ, dK, dV, dO, Q, K, V, O, lse);
}
