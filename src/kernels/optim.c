/* Optimizer updates over contiguous f32 buffers: validation and dispatch.
 * Hyperparameter ranges follow PyTorch's checks (lr, momentum, weight decay,
 * eps >= 0; betas in [0, 1); Nesterov needs momentum > 0). */
#include <math.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_nonneg(const char *fn, const char *name, float v) {
    if (!(v >= 0.0f)) return cml__error(CML_ERR_INVALID_ARG, "%s: %s=%g must be >= 0", fn, name, (double)v);
    return CML_OK;
}

cml_status cml_sgd_update(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf,
                          int64_t n, float lr, float momentum, bool nesterov,
                          float weight_decay, bool first_step) {
    static const char fn[] = "cml_sgd_update";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(cml__check_size(fn, "n", n, 0));
    CML_TRY(check_nonneg(fn, "lr", lr));
    CML_TRY(check_nonneg(fn, "momentum", momentum));
    CML_TRY(check_nonneg(fn, "weight_decay", weight_decay));
    CML_CHECK_ARG(!nesterov || momentum > 0.0f, "%s: nesterov=true needs momentum > 0 (got %g)", fn, (double)momentum);
    if (n > 0) {
        CML__CHECK_NOT_NULL(fn, param);
        CML__CHECK_NOT_NULL(fn, grad);
        CML_CHECK_ARG(momentum == 0.0f || momentum_buf != NULL, "%s: momentum_buf must not be NULL when momentum=%g", fn,
                      (double)momentum);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__sgd_update_cuda(ctx, param, grad, momentum_buf, n, lr, momentum, nesterov, weight_decay, first_step);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__sgd_update_cpu(ctx, param, grad, momentum_buf, n, lr, momentum, nesterov, weight_decay, first_step);
}

cml_status cml_adam_update(cml_ctx *ctx, float *param, const float *grad, float *m, float *v,
                           int64_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, bool decoupled, int64_t step) {
    static const char fn[] = "cml_adam_update";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(cml__check_size(fn, "n", n, 0));
    CML_TRY(cml__check_size(fn, "step", step, 1));
    CML_TRY(check_nonneg(fn, "lr", lr));
    CML_TRY(check_nonneg(fn, "eps", eps));
    CML_TRY(check_nonneg(fn, "weight_decay", weight_decay));
    CML_CHECK_ARG(beta1 >= 0.0f && beta1 < 1.0f, "%s: beta1=%g must be in [0, 1)", fn, (double)beta1);
    CML_CHECK_ARG(beta2 >= 0.0f && beta2 < 1.0f, "%s: beta2=%g must be in [0, 1)", fn, (double)beta2);
    if (n > 0) {
        CML__CHECK_NOT_NULL(fn, param);
        CML__CHECK_NOT_NULL(fn, grad);
        CML__CHECK_NOT_NULL(fn, m);
        CML__CHECK_NOT_NULL(fn, v);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__adam_update_cuda(ctx, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__adam_update_cpu(ctx, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step);
}
