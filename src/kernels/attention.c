/* Scaled dot-product attention: the descriptor helper, argument validation
 * (on the CPU also the varlen offsets, which CUDA cannot read without a sync)
 * and device dispatch (CUDA: src/kernels/cuda/attention/, which picks its own
 * path; see cuda_kernels.h). */
#include <math.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_transformer.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

cml_attention_desc cml_attention_desc_bshd(int64_t B, int64_t S_q, int64_t S_kv, int64_t H_q, int64_t H_kv,
                                           int64_t D, bool causal, cml_dtype dtype) {
    cml_attention_desc d = {0};
    d.B = B;
    d.H_q = H_q;
    d.H_kv = H_kv;
    d.S_q = S_q;
    d.S_kv = S_kv;
    d.D = D;
    d.causal = causal;
    d.scale = D > 0 ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    d.dtype = dtype;
    d.q_stride[0] = d.o_stride[0] = S_q * H_q * D;
    d.q_stride[1] = d.o_stride[1] = H_q * D;
    d.q_stride[2] = d.o_stride[2] = D;
    d.k_stride[0] = d.v_stride[0] = S_kv * H_kv * D;
    d.k_stride[1] = d.v_stride[1] = H_kv * D;
    d.k_stride[2] = d.v_stride[2] = D;
    return d;
}

/* One operand's strides over (B, S, H): non-negative, the farthest element
 * addressable in int64, and, for outputs, no two elements at the same address
 * (sorted by stride, each dim of size > 1 must step over everything below it,
 * starting with the D contiguous elements). */
static cml_status check_strides(const char *fn, const char *name, const int64_t stride[3], int64_t B, int64_t S,
                                int64_t H, int64_t D, bool output) {
    const int64_t size[3] = {B, S, H};
    static const char *const dim_name[3] = {"batch", "seq", "head"};
    int64_t reach = D - 1;
    for (int i = 0; i < 3; i++) {
        if (stride[i] < 0)
            return cml__error(CML_ERR_INVALID_ARG, "%s: desc->%s_stride[%d] (%s)=%lld must be >= 0", fn, name, i,
                              dim_name[i], (long long)stride[i]);
        if (size[i] > 1 && (stride[i] > (INT64_MAX - reach) / (size[i] - 1)))
            return cml__error(CML_ERR_INVALID_ARG, "%s: desc->%s_stride[%d]=%lld overflows int64 offsets", fn, name, i,
                              (long long)stride[i]);
        if (size[i] > 1) reach += stride[i] * (size[i] - 1);
    }
    if (!output) return CML_OK;
    int order[3] = {0, 1, 2};
    for (int i = 1; i < 3; i++) /* insertion sort by stride */
        for (int j = i; j > 0 && stride[order[j]] < stride[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t span = D;
    for (int k = 0; k < 3; k++) {
        int i = order[k];
        if (size[i] <= 1) continue;
        if (stride[i] < span)
            return cml__error(CML_ERR_INVALID_ARG,
                              "%s: desc->%s_stride = {%lld, %lld, %lld} makes output elements overlap: the %s "
                              "stride %lld must be >= %lld (the extent of the dims below it, D=%lld)",
                              fn, name, (long long)stride[0], (long long)stride[1], (long long)stride[2], dim_name[i],
                              (long long)stride[i], (long long)span, (long long)D);
        span = stride[i] * (size[i] - 1) + span;
    }
    return CML_OK;
}

/* Varlen fields: both offset arrays or neither; with them, packed operands (batch strides 0) and
 * row counts >= 0; without them, no row counts. */
static cml_status check_varlen(const char *fn, const cml_attention_desc *d) {
    const bool vq = d->cu_seqlens_q != NULL, vkv = d->cu_seqlens_kv != NULL;
    if (vq != vkv)
        return cml__error(CML_ERR_INVALID_ARG,
                          "%s: desc->%s is NULL but desc->%s is set: a variable-length batch needs both offsets", fn,
                          vq ? "cu_seqlens_kv" : "cu_seqlens_q", vq ? "cu_seqlens_q" : "cu_seqlens_kv");
    if (!vq) {
        CML_CHECK_ARG(d->total_q == 0 && d->total_kv == 0,
                      "%s: desc->total_q=%lld, desc->total_kv=%lld must be 0 without desc->cu_seqlens_q/kv "
                      "(they count the rows of packed variable-length batches)",
                      fn, (long long)d->total_q, (long long)d->total_kv);
        return CML_OK;
    }
    CML_TRY(cml__check_size(fn, "desc->total_q", d->total_q, 0));
    CML_TRY(cml__check_size(fn, "desc->total_kv", d->total_kv, 0));
    const int64_t *const st[4] = {d->q_stride, d->k_stride, d->v_stride, d->o_stride};
    static const char *const name[4] = {"q", "k", "v", "o"};
    for (int i = 0; i < 4; i++)
        CML_CHECK_ARG(st[i][0] == 0,
                      "%s: desc->%s_stride[0] (batch)=%lld must be 0 with desc->cu_seqlens_q/kv (sequences are "
                      "rows of one packed tensor)",
                      fn, name[i], (long long)st[i][0]);
    return CML_OK;
}

/* Varlen offsets on the CPU (host memory): B + 1 entries from 0, non-decreasing, each sequence
 * at most S_max rows, the last within the packed buffer's `total` rows. */
static cml_status check_offsets(const char *fn, const char *name, const int32_t *cu, int64_t B, int64_t S_max,
                                const char *s_name, int64_t total, const char *total_name) {
    CML_CHECK_ARG(cu[0] == 0, "%s: desc->%s[0]=%d must be 0", fn, name, (int)cu[0]);
    for (int64_t b = 0; b < B; b++) {
        CML_CHECK_ARG(cu[b + 1] >= cu[b], "%s: desc->%s[%lld]=%d < desc->%s[%lld]=%d: offsets must be non-decreasing",
                      fn, name, (long long)(b + 1), (int)cu[b + 1], name, (long long)b, (int)cu[b]);
        CML_CHECK_ARG((int64_t)cu[b + 1] - cu[b] <= S_max,
                      "%s: sequence %lld has %lld rows (desc->%s[%lld] - desc->%s[%lld]), more than desc->%s=%lld",
                      fn, (long long)b, (long long)((int64_t)cu[b + 1] - cu[b]), name, (long long)(b + 1), name,
                      (long long)b, s_name, (long long)S_max);
    }
    CML_CHECK_ARG(cu[B] <= total, "%s: desc->%s[%lld]=%d must be <= desc->%s=%lld (the rows of the packed buffer)",
                  fn, name, (long long)B, (int)cu[B], total_name, (long long)total);
    return CML_OK;
}

static cml_status check_offsets_cpu(const char *fn, const cml_attention_desc *d) {
    if (!d->cu_seqlens_q) return CML_OK;
    CML_TRY(check_offsets(fn, "cu_seqlens_q", d->cu_seqlens_q, d->B, d->S_q, "S_q", d->total_q, "total_q"));
    return check_offsets(fn, "cu_seqlens_kv", d->cu_seqlens_kv, d->B, d->S_kv, "S_kv", d->total_kv, "total_kv");
}

/* The descriptor; `backward` also checks that dQ/dK/dV (laid out like Q/K/V) do not overlap.
 * Varlen operands are checked as one batch of total_q (total_kv) rows. */
static cml_status check_desc(const char *fn, const cml_attention_desc *d, bool backward) {
    CML_TRY(cml__check_size(fn, "desc->B", d->B, 0));
    CML_TRY(cml__check_size(fn, "desc->H_q", d->H_q, 1));
    CML_TRY(cml__check_size(fn, "desc->H_kv", d->H_kv, 1));
    CML_TRY(cml__check_size(fn, "desc->S_q", d->S_q, 1));
    CML_TRY(cml__check_size(fn, "desc->S_kv", d->S_kv, 1));
    CML_TRY(cml__check_size(fn, "desc->D", d->D, 1));
    if (d->H_q % d->H_kv != 0)
        return cml__error(CML_ERR_INVALID_ARG, "%s: desc->H_q=%lld must be a multiple of desc->H_kv=%lld", fn,
                          (long long)d->H_q, (long long)d->H_kv);
    CML_TRY(cml__check_product(fn, d->B, d->H_q, d->S_q));
    CML_TRY(cml__check_product(fn, d->B * d->H_q, d->S_q, d->D));
    CML_TRY(cml__check_product(fn, d->S_q, d->S_kv, d->D));
    CML_TRY(cml__check_dtype_float(fn, "desc->dtype", d->dtype));
    CML_CHECK_ARG(isfinite(d->scale), "%s: desc->scale=%g must be finite", fn, (double)d->scale);
    CML_TRY(check_varlen(fn, d));
    const bool varlen = d->cu_seqlens_q != NULL;
    const int64_t nb = varlen ? 1 : d->B, nq = varlen ? d->total_q : d->S_q, nkv = varlen ? d->total_kv : d->S_kv;
    CML_TRY(check_strides(fn, "q", d->q_stride, nb, nq, d->H_q, d->D, backward));
    CML_TRY(check_strides(fn, "k", d->k_stride, nb, nkv, d->H_kv, d->D, backward));
    CML_TRY(check_strides(fn, "v", d->v_stride, nb, nkv, d->H_kv, d->D, backward));
    CML_TRY(check_strides(fn, "o", d->o_stride, nb, nq, d->H_q, d->D, !backward));
    return CML_OK;
}

cml_status cml_attention_fwd(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                             const void *Q, const void *K, const void *V) {
    static const char fn[] = "cml_attention_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML__CHECK_NOT_NULL(fn, desc);
    CML_TRY(check_desc(fn, desc, false));
    if (desc->B > 0) {
        CML__CHECK_NOT_NULL(fn, O);
        CML__CHECK_NOT_NULL(fn, Q);
        CML__CHECK_NOT_NULL(fn, K);
        CML__CHECK_NOT_NULL(fn, V);
    }
    if (desc->B == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__attention_fwd_cuda(ctx, desc, O, lse, Q, K, V);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    CML_TRY(check_offsets_cpu(fn, desc));
    return cml__attention_fwd_cpu(ctx, desc, O, lse, Q, K, V);
}

cml_status cml_attention_bwd(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                             const void *dO, const void *Q, const void *K, const void *V, const void *O,
                             const float *lse) {
    static const char fn[] = "cml_attention_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML__CHECK_NOT_NULL(fn, desc);
    CML_TRY(check_desc(fn, desc, true));
    if (desc->B > 0) {
        CML__CHECK_NOT_NULL(fn, dQ);
        CML__CHECK_NOT_NULL(fn, dK);
        CML__CHECK_NOT_NULL(fn, dV);
        CML__CHECK_NOT_NULL(fn, dO);
        CML__CHECK_NOT_NULL(fn, Q);
        CML__CHECK_NOT_NULL(fn, K);
        CML__CHECK_NOT_NULL(fn, V);
        CML__CHECK_NOT_NULL(fn, O);
        CML__CHECK_NOT_NULL(fn, lse);
    }
    if (desc->B == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__attention_bwd_cuda(ctx, desc, dQ, dK, dV, dO, Q, K, V, O, lse);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    CML_TRY(check_offsets_cpu(fn, desc));
    return cml__attention_bwd_cpu(ctx, desc, dQ, dK, dV, dO, Q, K, V, O, lse);
}
