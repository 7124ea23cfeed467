/* Reductions over the middle axis of a contiguous (outer, n, inner) buffer:
 * argument validation and device dispatch (CUDA: src/kernels/cuda/reduce/). */
#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static const char *reduce_op_name(cml_reduce_op op) {
    static const char *names[CML_REDUCE_OP_COUNT] = {"SUM", "MEAN", "MAX", "MIN", "VAR", "ARGMAX", "ARGMIN", "SUMSQ"};
    return names[op];
}

cml_status cml_reduce(cml_ctx *ctx, cml_reduce_op op, void *y, cml_dtype y_dtype,
                      const void *x, cml_dtype x_dtype,
                      int64_t outer, int64_t n, int64_t inner, int correction) {
    static const char fn[] = "cml_reduce";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_CHECK_ARG((int)op >= 0 && op < CML_REDUCE_OP_COUNT, "%s: op=%d must be a cml_reduce_op", fn, (int)op);
    CML_TRY(cml__check_size(fn, "outer", outer, 0));
    CML_TRY(cml__check_size(fn, "n", n, 1));
    CML_TRY(cml__check_size(fn, "inner", inner, 0));
    CML_TRY(cml__check_product(fn, outer, n, inner));
    CML_TRY(cml__check_dtype_valid(fn, "x_dtype", x_dtype));
    CML_TRY(cml__check_dtype_valid(fn, "y_dtype", y_dtype));
    bool is_arg = op == CML_REDUCE_ARGMAX || op == CML_REDUCE_ARGMIN;
    if (is_arg && y_dtype != CML_I64)
        return cml__error(CML_ERR_DTYPE, "%s: y_dtype=%s must be i64 for %s", fn, cml_dtype_name(y_dtype),
                          reduce_op_name(op));
    if (!is_arg && y_dtype != x_dtype)
        return cml__error(CML_ERR_DTYPE, "%s: y_dtype=%s must equal x_dtype=%s for %s", fn, cml_dtype_name(y_dtype),
                          cml_dtype_name(x_dtype), reduce_op_name(op));
    if (outer * inner > 0) {
        CML__CHECK_NOT_NULL(fn, y);
        CML__CHECK_NOT_NULL(fn, x);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__reduce_cuda(ctx, op, y, y_dtype, x, x_dtype, outer, n, inner, correction);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__reduce_cpu(ctx, op, y, y_dtype, x, x_dtype, outer, n, inner, correction);
}
