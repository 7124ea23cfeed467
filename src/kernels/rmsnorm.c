/* RMSNorm over the last dim of contiguous (rows, C): argument validation and
 * device dispatch (CUDA: src/kernels/cuda/norm/rmsnorm_{fwd,bwd}.cu). */
#include <math.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_transformer.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_sizes(const char *fn, int64_t rows, int64_t C, cml_dtype dtype) {
    CML_TRY(cml__check_size(fn, "rows", rows, 0));
    CML_TRY(cml__check_size(fn, "C", C, 1));
    CML_TRY(cml__check_product(fn, rows, C, 1));
    return cml__check_dtype_float(fn, "dtype", dtype);
}

cml_status cml_rmsnorm_fwd(cml_ctx *ctx, void *y, float *rstd, const void *x, const void *gamma, int64_t rows,
                           int64_t C, float eps, cml_dtype dtype) {
    static const char fn[] = "cml_rmsnorm_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_sizes(fn, rows, C, dtype));
    CML_CHECK_ARG(isfinite(eps) && eps >= 0.0f, "%s: eps=%g must be finite and >= 0", fn, (double)eps);
    if (rows > 0) {
        CML__CHECK_NOT_NULL(fn, y);
        CML__CHECK_NOT_NULL(fn, x);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__rmsnorm_fwd_cuda(ctx, y, rstd, x, gamma, rows, C, eps, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__rmsnorm_fwd_cpu(ctx, y, rstd, x, gamma, rows, C, eps, dtype);
}

cml_status cml_rmsnorm_bwd(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x, const void *gamma,
                           const float *rstd, int64_t rows, int64_t C, cml_dtype dtype) {
    static const char fn[] = "cml_rmsnorm_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_sizes(fn, rows, C, dtype));
    if (rows > 0) {
        CML__CHECK_NOT_NULL(fn, dx);
        CML__CHECK_NOT_NULL(fn, dy);
        CML__CHECK_NOT_NULL(fn, x);
        CML__CHECK_NOT_NULL(fn, rstd);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__rmsnorm_bwd_cuda(ctx, dx, dgamma, dy, x, gamma, rstd, rows, C, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__rmsnorm_bwd_cpu(ctx, dx, dgamma, dy, x, gamma, rstd, rows, C, dtype);
}
