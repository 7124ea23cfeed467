/* Scaled fp8 conversions (cml_convert_scaled): argument validation and device
 * dispatch (CUDA: src/kernels/cuda/ewise/convert_scaled.cu). */
#include <stdint.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static bool is_fp8(cml_dtype dt) { return dt == CML_F8E4M3 || dt == CML_F8E5M2; }
static bool is_wide(cml_dtype dt) { return dt == CML_F32 || dt == CML_F16 || dt == CML_BF16; }

cml_status cml_convert_scaled(cml_ctx *ctx, void *y, cml_dtype y_dtype, const void *x, cml_dtype x_dtype, int64_t n,
                              const float *scale, float *amax) {
    static const char fn[] = "cml_convert_scaled";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(cml__check_size(fn, "n", n, 0));
    CML_TRY(cml__check_dtype_valid(fn, "y_dtype", y_dtype));
    CML_TRY(cml__check_dtype_valid(fn, "x_dtype", x_dtype));
    if (!((is_fp8(y_dtype) && is_wide(x_dtype)) || (is_wide(y_dtype) && is_fp8(x_dtype))))
        return cml__error(CML_ERR_DTYPE,
                          "%s: x_dtype=%s, y_dtype=%s: one of them must be f8e4m3 or f8e5m2 and the other f32, f16 "
                          "or bf16 (other conversions: cml_copy)",
                          fn, cml_dtype_name(x_dtype), cml_dtype_name(y_dtype));
    if (n > 0) {
        CML__CHECK_NOT_NULL(fn, y);
        CML__CHECK_NOT_NULL(fn, x);
        CML_TRY(cml__check_product(fn, n, (int64_t)cml_dtype_size(x_dtype), 1));
        CML_TRY(cml__check_product(fn, n, (int64_t)cml_dtype_size(y_dtype), 1));
        /* The element sizes differ, so an overlap would read elements already overwritten. */
        const uintptr_t ya = (uintptr_t)y, xa = (uintptr_t)x;
        const uintptr_t yb = ya + (uintptr_t)n * cml_dtype_size(y_dtype), xb = xa + (uintptr_t)n * cml_dtype_size(x_dtype);
        CML_CHECK_ARG(yb <= xa || xb <= ya, "%s: y and x overlap; y must be a separate buffer", fn);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__convert_scaled_cuda(ctx, y, y_dtype, x, x_dtype, n, scale, amax);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__convert_scaled_cpu(ctx, y, y_dtype, x, x_dtype, n, scale, amax);
}
