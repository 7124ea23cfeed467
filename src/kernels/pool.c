/* 2-d max / average pooling (NCHW or NHWC): argument validation and device dispatch
 * (CUDA: src/kernels/cuda/pool/pool.cu). */
#include "camel/kernels.h"
#include "kernels/cpu/cpu_vision.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_desc(const char *fn, const cml_pool2d_desc *d, int64_t *P, int64_t *Q) {
    CML_CHECK_ARG(d != NULL, "%s: desc must not be NULL", fn);
    CML_CHECK_ARG(d->mode == CML_POOL_MAX || d->mode == CML_POOL_AVG, "%s: mode=%d must be CML_POOL_MAX or CML_POOL_AVG",
                  fn, (int)d->mode);
    CML_TRY(cml__check_size(fn, "N", d->N, 0));
    CML_TRY(cml__check_size(fn, "C", d->C, 1));
    CML_TRY(cml__check_size(fn, "H", d->H, 1));
    CML_TRY(cml__check_size(fn, "W", d->W, 1));
    CML_TRY(cml__check_size(fn, "R", d->R, 1));
    CML_TRY(cml__check_size(fn, "S", d->S, 1));
    CML_TRY(cml__check_size(fn, "stride_h", d->stride_h, 1));
    CML_TRY(cml__check_size(fn, "stride_w", d->stride_w, 1));
    CML_TRY(cml__check_size(fn, "pad_h", d->pad_h, 0));
    CML_TRY(cml__check_size(fn, "pad_w", d->pad_w, 0));
    CML_TRY(cml__check_dtype_float(fn, "dtype", d->dtype));
    const int64_t lim = (int64_t)1 << 31;
    if (d->H > lim || d->W > lim || d->R > lim || d->S > lim || d->stride_h > lim || d->stride_w > lim)
        return cml__error(CML_ERR_INVALID_ARG, "%s: H, W, R, S and strides must be <= 2^31", fn);
    /* as in PyTorch: every window then overlaps the input */
    if (d->pad_h > d->R / 2)
        return cml__error(CML_ERR_INVALID_ARG, "%s: pad_h=%lld must be <= R/2=%lld", fn, (long long)d->pad_h,
                          (long long)(d->R / 2));
    if (d->pad_w > d->S / 2)
        return cml__error(CML_ERR_INVALID_ARG, "%s: pad_w=%lld must be <= S/2=%lld", fn, (long long)d->pad_w,
                          (long long)(d->S / 2));
    if (d->R > d->H + 2 * d->pad_h)
        return cml__error(CML_ERR_SHAPE, "%s: window height R=%lld exceeds the padded input height H+2*pad_h=%lld", fn,
                          (long long)d->R, (long long)(d->H + 2 * d->pad_h));
    if (d->S > d->W + 2 * d->pad_w)
        return cml__error(CML_ERR_SHAPE, "%s: window width S=%lld exceeds the padded input width W+2*pad_w=%lld", fn,
                          (long long)d->S, (long long)(d->W + 2 * d->pad_w));
    *P = (d->H + 2 * d->pad_h - d->R) / d->stride_h + 1;
    *Q = (d->W + 2 * d->pad_w - d->S) / d->stride_w + 1;
    CML_TRY(cml__check_product(fn, d->N, d->C, d->H * d->W));
    return CML_OK;
}

cml_status cml_pool2d_output_size(const cml_pool2d_desc *desc, int64_t *P, int64_t *Q) {
    static const char fn[] = "cml_pool2d_output_size";
    CML__CHECK_NOT_NULL(fn, P);
    CML__CHECK_NOT_NULL(fn, Q);
    return check_desc(fn, desc, P, Q);
}

cml_status cml_pool2d_fwd(cml_ctx *ctx, const cml_pool2d_desc *desc, void *y, int64_t *indices, const void *x) {
    static const char fn[] = "cml_pool2d_fwd";
    int64_t P, Q;
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_desc(fn, desc, &P, &Q));
    if (desc->N > 0) {
        CML__CHECK_NOT_NULL(fn, y);
        CML__CHECK_NOT_NULL(fn, x);
    }
    if (desc->N == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__pool2d_fwd_cuda(ctx, desc, P, Q, y, desc->mode == CML_POOL_MAX ? indices : NULL, x);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__pool2d_fwd_cpu(ctx, desc, P, Q, y, desc->mode == CML_POOL_MAX ? indices : NULL, x);
}

cml_status cml_pool2d_bwd(cml_ctx *ctx, const cml_pool2d_desc *desc, void *dx, const void *dy,
                          const int64_t *indices) {
    static const char fn[] = "cml_pool2d_bwd";
    int64_t P, Q;
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_desc(fn, desc, &P, &Q));
    if (desc->N > 0) {
        CML__CHECK_NOT_NULL(fn, dx);
        CML__CHECK_NOT_NULL(fn, dy);
        if (desc->mode == CML_POOL_MAX)
            CML_CHECK_ARG(indices != NULL, "%s: indices must not be NULL for CML_POOL_MAX (pass the forward's)", fn);
    }
    if (desc->N == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__pool2d_bwd_cuda(ctx, desc, P, Q, dx, dy, desc->mode == CML_POOL_MAX ? indices : NULL);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__pool2d_bwd_cpu(ctx, desc, P, Q, dx, dy, desc->mode == CML_POOL_MAX ? indices : NULL);
}
