/* 2-d convolution (NCHW or NHWC; stride, padding, dilation, groups): argument
 * validation and device dispatch (CUDA: src/kernels/cuda/conv/). */
#include "camel/kernels.h"
#include "kernels/cpu/cpu_vision.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

/* Validates every field of the descriptor and computes the output size. */
static cml_status check_desc(const char *fn, const cml_conv2d_desc *d, int64_t *P, int64_t *Q) {
    CML_CHECK_ARG(d != NULL, "%s: desc must not be NULL", fn);
    CML_TRY(cml__check_size(fn, "N", d->N, 0));
    CML_TRY(cml__check_size(fn, "C", d->C, 1));
    CML_TRY(cml__check_size(fn, "H", d->H, 1));
    CML_TRY(cml__check_size(fn, "W", d->W, 1));
    CML_TRY(cml__check_size(fn, "K", d->K, 1));
    CML_TRY(cml__check_size(fn, "R", d->R, 1));
    CML_TRY(cml__check_size(fn, "S", d->S, 1));
    CML_TRY(cml__check_size(fn, "stride_h", d->stride_h, 1));
    CML_TRY(cml__check_size(fn, "stride_w", d->stride_w, 1));
    CML_TRY(cml__check_size(fn, "pad_h", d->pad_h, 0));
    CML_TRY(cml__check_size(fn, "pad_w", d->pad_w, 0));
    CML_TRY(cml__check_size(fn, "dil_h", d->dil_h, 1));
    CML_TRY(cml__check_size(fn, "dil_w", d->dil_w, 1));
    CML_TRY(cml__check_size(fn, "groups", d->groups, 1));
    CML_TRY(cml__check_dtype_float(fn, "dtype", d->dtype));
    if (d->C % d->groups != 0)
        return cml__error(CML_ERR_SHAPE, "%s: C=%lld must be a multiple of groups=%lld", fn, (long long)d->C,
                          (long long)d->groups);
    if (d->K % d->groups != 0)
        return cml__error(CML_ERR_SHAPE, "%s: K=%lld must be a multiple of groups=%lld", fn, (long long)d->K,
                          (long long)d->groups);
    /* sizes are bounded so that the products below cannot overflow */
    const int64_t lim = (int64_t)1 << 31;
    if (d->H > lim || d->W > lim || d->R > lim || d->S > lim || d->pad_h > lim || d->pad_w > lim || d->dil_h > lim ||
        d->dil_w > lim || d->stride_h > lim || d->stride_w > lim)
        return cml__error(CML_ERR_INVALID_ARG, "%s: H, W, R, S, strides, pads and dilations must be <= 2^31", fn);
    int64_t eff_h = d->dil_h * (d->R - 1) + 1, eff_w = d->dil_w * (d->S - 1) + 1;
    if (eff_h > d->H + 2 * d->pad_h)
        return cml__error(CML_ERR_SHAPE,
                          "%s: the dilated kernel height dil_h*(R-1)+1=%lld exceeds the padded input height "
                          "H+2*pad_h=%lld (the output would be empty)",
                          fn, (long long)eff_h, (long long)(d->H + 2 * d->pad_h));
    if (eff_w > d->W + 2 * d->pad_w)
        return cml__error(CML_ERR_SHAPE,
                          "%s: the dilated kernel width dil_w*(S-1)+1=%lld exceeds the padded input width "
                          "W+2*pad_w=%lld (the output would be empty)",
                          fn, (long long)eff_w, (long long)(d->W + 2 * d->pad_w));
    *P = (d->H + 2 * d->pad_h - eff_h) / d->stride_h + 1;
    *Q = (d->W + 2 * d->pad_w - eff_w) / d->stride_w + 1;
    CML_TRY(cml__check_product(fn, d->N, d->C, d->H * d->W));
    CML_TRY(cml__check_product(fn, d->N, d->K, *P * *Q));
    CML_TRY(cml__check_product(fn, d->K, d->C / d->groups, d->R * d->S));
    /* one image's column matrix: (C R S) x (P Q) */
    CML_TRY(cml__check_product(fn, d->C * d->R * d->S, *P, *Q));
    return CML_OK;
}

cml_status cml_conv2d_output_size(const cml_conv2d_desc *desc, int64_t *P, int64_t *Q) {
    static const char fn[] = "cml_conv2d_output_size";
    CML__CHECK_NOT_NULL(fn, P);
    CML__CHECK_NOT_NULL(fn, Q);
    return check_desc(fn, desc, P, Q);
}

cml_status cml_conv2d_fwd(cml_ctx *ctx, const cml_conv2d_desc *desc, void *y, const void *x, const void *w,
                          const void *bias) {
    static const char fn[] = "cml_conv2d_fwd";
    int64_t P, Q;
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_desc(fn, desc, &P, &Q));
    if (desc->N > 0) {
        CML__CHECK_NOT_NULL(fn, y);
        CML__CHECK_NOT_NULL(fn, x);
        CML__CHECK_NOT_NULL(fn, w);
    }
    if (desc->N == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__conv2d_fwd_cuda(ctx, desc, P, Q, y, x, w, bias);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__conv2d_fwd_cpu(ctx, desc, P, Q, y, x, w, bias);
}

cml_status cml_conv2d_bwd_data(cml_ctx *ctx, const cml_conv2d_desc *desc, void *dx, const void *dy,
                               const void *w) {
    static const char fn[] = "cml_conv2d_bwd_data";
    int64_t P, Q;
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_desc(fn, desc, &P, &Q));
    if (desc->N > 0) {
        CML__CHECK_NOT_NULL(fn, dx);
        CML__CHECK_NOT_NULL(fn, dy);
        CML__CHECK_NOT_NULL(fn, w);
    }
    if (desc->N == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__conv2d_bwd_data_cuda(ctx, desc, P, Q, dx, dy, w);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__conv2d_bwd_data_cpu(ctx, desc, P, Q, dx, dy, w);
}

cml_status cml_conv2d_bwd_filter(cml_ctx *ctx, const cml_conv2d_desc *desc, void *dw, void *dbias,
                                 const void *dy, const void *x) {
    static const char fn[] = "cml_conv2d_bwd_filter";
    int64_t P, Q;
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_desc(fn, desc, &P, &Q));
    CML__CHECK_NOT_NULL(fn, dw);
    if (desc->N > 0) {
        CML__CHECK_NOT_NULL(fn, dy);
        CML__CHECK_NOT_NULL(fn, x);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__conv2d_bwd_filter_cuda(ctx, desc, P, Q, dw, dbias, dy, x);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__conv2d_bwd_filter_cpu(ctx, desc, P, Q, dw, dbias, dy, x);
}
