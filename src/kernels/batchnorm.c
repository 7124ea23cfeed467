/* Batch normalization over (N, C, HW) (NCHW) or (N, HW, C) (NHWC): argument
 * validation and device dispatch (CUDA: src/kernels/cuda/norm/batchnorm_*.cu). */
#include <math.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_vision.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_sizes(const char *fn, int64_t N, int64_t C, int64_t HW, cml_dtype dtype) {
    CML_TRY(cml__check_size(fn, "N", N, 1));
    CML_TRY(cml__check_size(fn, "C", C, 1));
    CML_TRY(cml__check_size(fn, "HW", HW, 1));
    CML_TRY(cml__check_product(fn, N, C, HW));
    return cml__check_dtype_float(fn, "dtype", dtype);
}

cml_status cml_batchnorm_fwd(cml_ctx *ctx, void *y, float *save_mean, float *save_rstd, float *running_mean,
                             float *running_var, const void *x, const float *gamma, const float *beta, int64_t N,
                             int64_t C, int64_t HW, bool channels_last, bool training, float momentum, float eps,
                             cml_dtype dtype) {
    static const char fn[] = "cml_batchnorm_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_sizes(fn, N, C, HW, dtype));
    CML__CHECK_NOT_NULL(fn, y);
    CML__CHECK_NOT_NULL(fn, x);
    CML_CHECK_ARG(isfinite(eps) && eps >= 0.0f, "%s: eps=%g must be finite and >= 0", fn, (double)eps);
    if (training) {
        CML_CHECK_ARG(momentum >= 0.0f && momentum <= 1.0f, "%s: momentum=%g must be in [0, 1]", fn, (double)momentum);
        CML_CHECK_ARG(N * HW > 1, "%s: training needs more than one value per channel (N*HW=%lld)", fn,
                      (long long)(N * HW));
        CML_CHECK_ARG((running_mean == NULL) == (running_var == NULL),
                      "%s: running_mean and running_var must both be given or both be NULL", fn);
    } else {
        CML_CHECK_ARG(running_mean != NULL && running_var != NULL,
                      "%s: running_mean and running_var must not be NULL in eval mode (training=false)", fn);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__batchnorm_fwd_cuda(ctx, y, save_mean, save_rstd, running_mean, running_var, x, gamma, beta, N, C,
                                       HW, channels_last, training, momentum, eps, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__batchnorm_fwd_cpu(ctx, y, save_mean, save_rstd, running_mean, running_var, x, gamma, beta, N, C, HW,
                                  channels_last, training, momentum, eps, dtype);
}

cml_status cml_batchnorm_bwd(cml_ctx *ctx, void *dx, float *dgamma, float *dbeta, const void *dy, const void *x,
                             const float *gamma, const float *save_mean, const float *save_rstd, int64_t N, int64_t C,
                             int64_t HW, bool channels_last, cml_dtype dtype) {
    static const char fn[] = "cml_batchnorm_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_sizes(fn, N, C, HW, dtype));
    CML__CHECK_NOT_NULL(fn, dx);
    CML__CHECK_NOT_NULL(fn, dy);
    CML__CHECK_NOT_NULL(fn, x);
    CML__CHECK_NOT_NULL(fn, save_mean);
    CML__CHECK_NOT_NULL(fn, save_rstd);
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__batchnorm_bwd_cuda(ctx, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_rstd, N, C, HW,
                                       channels_last, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__batchnorm_bwd_cpu(ctx, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_rstd, N, C, HW,
                                  channels_last, dtype);
}
