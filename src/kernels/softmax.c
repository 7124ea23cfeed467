/* Softmax / log-softmax over the middle axis of (outer, n, inner): argument
 * validation and device dispatch (CUDA: src/kernels/cuda/softmax/softmax.cu). */
#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_sizes(const char *fn, int64_t outer, int64_t n, int64_t inner, cml_dtype dtype) {
    CML_TRY(cml__check_size(fn, "outer", outer, 0));
    CML_TRY(cml__check_size(fn, "n", n, 1));
    CML_TRY(cml__check_size(fn, "inner", inner, 0));
    CML_TRY(cml__check_product(fn, outer, n, inner));
    return cml__check_dtype_float(fn, "dtype", dtype);
}

cml_status cml_softmax_fwd(cml_ctx *ctx, void *y, const void *x, int64_t outer, int64_t n,
                           int64_t inner, cml_dtype dtype, bool log) {
    static const char fn[] = "cml_softmax_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_sizes(fn, outer, n, inner, dtype));
    if (outer * inner > 0) {
        CML__CHECK_NOT_NULL(fn, y);
        CML__CHECK_NOT_NULL(fn, x);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__softmax_fwd_cuda(ctx, y, x, outer, n, inner, dtype, log);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__softmax_fwd_cpu(ctx, y, x, outer, n, inner, dtype, log);
}

cml_status cml_softmax_bwd(cml_ctx *ctx, void *dx, const void *dy, const void *y, int64_t outer,
                           int64_t n, int64_t inner, cml_dtype dtype, bool log) {
    static const char fn[] = "cml_softmax_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_sizes(fn, outer, n, inner, dtype));
    if (outer * inner > 0) {
        CML__CHECK_NOT_NULL(fn, dx);
        CML__CHECK_NOT_NULL(fn, dy);
        CML__CHECK_NOT_NULL(fn, y);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__softmax_bwd_cuda(ctx, dx, dy, y, outer, n, inner, dtype, log);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__softmax_bwd_cpu(ctx, dx, dy, y, outer, n, inner, dtype, log);
}
