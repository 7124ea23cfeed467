/* Cross-entropy from logits (rows, classes) with i64 targets: argument
 * validation and device dispatch. Target values are data on the device, so
 * they are checked by the backend (CML_ERR_INVALID_ARG naming the row; on CUDA
 * through a device flag and one small copy, see src/kernels/cuda/softmax/). */
#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_ce(const char *fn, int64_t rows, int64_t classes, cml_dtype dtype) {
    CML_TRY(cml__check_size(fn, "rows", rows, 0));
    CML_TRY(cml__check_size(fn, "classes", classes, 1));
    CML_TRY(cml__check_product(fn, rows, classes, 1));
    return cml__check_dtype_float(fn, "dtype", dtype);
}

#ifdef CML_HAVE_CUDA
/* The CUDA kernels move the (max, log-sum) pairs as one 8-byte word. */
static cml_status check_lse_aligned(const char *fn, const float *lse) {
    if (((uintptr_t)lse & 7u) == 0) return CML_OK;
    return cml__error(CML_ERR_INVALID_ARG, "%s: lse=%p must be 8-byte aligned on CUDA (one float2 a row)", fn,
                      (const void *)lse);
}
#endif

cml_status cml_cross_entropy_fwd(cml_ctx *ctx, float *loss, float *lse, const void *logits,
                                 const int64_t *targets, int64_t rows, int64_t classes,
                                 cml_dtype dtype, int64_t ignore_index) {
    static const char fn[] = "cml_cross_entropy_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_ce(fn, rows, classes, dtype));
    if (rows > 0) {
        CML__CHECK_NOT_NULL(fn, loss);
        CML__CHECK_NOT_NULL(fn, logits);
        CML__CHECK_NOT_NULL(fn, targets);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) {
        CML_TRY(check_lse_aligned(fn, lse));
        return cml__cross_entropy_fwd_cuda(ctx, loss, lse, logits, targets, rows, classes, dtype, ignore_index);
    }
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__cross_entropy_fwd_cpu(ctx, loss, lse, logits, targets, rows, classes, dtype, ignore_index);
}

cml_status cml_cross_entropy_bwd(cml_ctx *ctx, void *dlogits, const float *dloss,
                                 const void *logits, const float *lse, const int64_t *targets,
                                 int64_t rows, int64_t classes, cml_dtype dtype, int64_t ignore_index) {
    static const char fn[] = "cml_cross_entropy_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_ce(fn, rows, classes, dtype));
    if (rows > 0) {
        CML__CHECK_NOT_NULL(fn, dlogits);
        CML__CHECK_NOT_NULL(fn, dloss);
        CML__CHECK_NOT_NULL(fn, logits);
        CML__CHECK_NOT_NULL(fn, targets);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) {
        CML_TRY(check_lse_aligned(fn, lse));
        return cml__cross_entropy_bwd_cuda(ctx, dlogits, dloss, logits, lse, targets, rows, classes, dtype,
                                           ignore_index);
    }
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__cross_entropy_bwd_cpu(ctx, dlogits, dloss, logits, lse, targets, rows, classes, dtype, ignore_index);
}
