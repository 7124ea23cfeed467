/* Dropout with a counter-based (Philox) mask: validation and dispatch. */
#include <math.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

/* mask may be NULL when the caller does not need it (no backward pass). */
cml_status cml_dropout_fwd(cml_ctx *ctx, void *y, uint8_t *mask, const void *x, int64_t n,
                           cml_dtype dtype, float p, uint64_t seed, uint64_t offset) {
    static const char fn[] = "cml_dropout_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(cml__check_size(fn, "n", n, 0));
    CML_TRY(cml__check_dtype_float(fn, "dtype", dtype));
    CML_CHECK_ARG(p >= 0.0f && p < 1.0f, "%s: p=%g must be in [0, 1)", fn, (double)p); /* also rejects NaN */
    if (n > 0) {
        CML__CHECK_NOT_NULL(fn, y);
        CML__CHECK_NOT_NULL(fn, x);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__dropout_fwd_cuda(ctx, y, mask, x, n, dtype, p, seed, offset);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__dropout_fwd_cpu(ctx, y, mask, x, n, dtype, p, seed, offset);
}
