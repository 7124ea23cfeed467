/* Elementwise kernels: argument validation and device dispatch.
 *
 * Every operand is an N-d view (cml_layout) with the output's shape; inputs
 * broadcast with stride 0 and may have negative strides. Outputs must not
 * overlap themselves (a stride-0 output dim of size > 1 would write one element
 * from several threads), which is checked; overlap between an input and the
 * output is allowed only when they are the same view (in-place ops).
 * CUDA contexts run every op here on the GPU (src/kernels/cuda/ewise/). */
#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_layout(const char *fn, const char *name, const cml_layout *l) {
    if (l == NULL) return cml__error(CML_ERR_INVALID_ARG, "%s: %s must not be NULL", fn, name);
    if (l->ndim < 0 || l->ndim > CML_MAX_DIMS)
        return cml__error(CML_ERR_INVALID_ARG, "%s: %s->ndim=%d must be in [0, %d]", fn, name, l->ndim,
                          CML_MAX_DIMS);
    for (int d = 0; d < l->ndim; d++)
        if (l->shape[d] < 0)
            return cml__error(CML_ERR_INVALID_ARG, "%s: %s->shape[%d]=%lld must be >= 0", fn, name, d,
                              (long long)l->shape[d]);
    return CML_OK;
}

static int64_t layout_numel(const cml_layout *l) {
    int64_t n = 1;
    for (int d = 0; d < l->ndim; d++) n *= l->shape[d];
    return n;
}

static cml_status check_output_layout(const char *fn, const char *name, const cml_layout *l) {
    CML_TRY(check_layout(fn, name, l));
    for (int d = 0; d < l->ndim; d++)
        if (l->stride[d] == 0 && l->shape[d] > 1)
            return cml__error(CML_ERR_INVALID_ARG,
                              "%s: %s->stride[%d]=0 with shape[%d]=%lld: output elements must not overlap", fn,
                              name, d, d, (long long)l->shape[d]);
    return CML_OK;
}

/* An input view must have exactly y's shape (broadcasting is done by the caller with stride 0). */
static cml_status check_input_layout(const char *fn, const char *name, const cml_layout *l, const cml_layout *y) {
    CML_TRY(check_layout(fn, name, l));
    if (l->ndim != y->ndim)
        return cml__error(CML_ERR_SHAPE, "%s: %s->ndim=%d must equal y_layout->ndim=%d (broadcast with stride 0)",
                          fn, name, l->ndim, y->ndim);
    for (int d = 0; d < l->ndim; d++)
        if (l->shape[d] != y->shape[d])
            return cml__error(CML_ERR_SHAPE, "%s: %s->shape[%d]=%lld must equal y_layout->shape[%d]=%lld", fn,
                              name, d, (long long)l->shape[d], d, (long long)y->shape[d]);
    return CML_OK;
}

/* Data pointers may be NULL only for empty views. */
static cml_status check_data(const char *fn, const char *name, const void *p, int64_t numel) {
    if (p == NULL && numel > 0) return cml__error(CML_ERR_INVALID_ARG, "%s: %s must not be NULL", fn, name);
    return CML_OK;
}

cml_status cml_unary(cml_ctx *ctx, cml_unary_op op, float param,
                     void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                     const void *x, const cml_layout *x_layout, cml_dtype x_dtype) {
    static const char fn[] = "cml_unary";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_CHECK_ARG((int)op >= 0 && op < CML_UNARY_OP_COUNT, "%s: op=%d must be a cml_unary_op", fn, (int)op);
    CML_TRY(check_output_layout(fn, "y_layout", y_layout));
    CML_TRY(check_input_layout(fn, "x_layout", x_layout, y_layout));
    CML_TRY(cml__check_dtype_valid(fn, "y_dtype", y_dtype));
    CML_TRY(cml__check_dtype_valid(fn, "x_dtype", x_dtype));
    int64_t numel = layout_numel(y_layout);
    CML_TRY(check_data(fn, "y", y, numel));
    CML_TRY(check_data(fn, "x", x, numel));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__unary_cuda(ctx, op, param, y, y_layout, y_dtype, x, x_layout, x_dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__unary_cpu(ctx, op, param, y, y_layout, y_dtype, x, x_layout, x_dtype);
}

/* Which saved tensor each op's derivative reads: x, y (from the forward), either, or none. */
typedef enum bwd_needs { NEEDS_NOTHING, NEEDS_X, NEEDS_X_OR_Y } bwd_needs;

static bwd_needs unary_bwd_needs(cml_unary_op op) {
    switch (op) {
    case CML_UNARY_IDENTITY:
    case CML_UNARY_NEG:
    case CML_UNARY_SCALE:
    case CML_UNARY_ADD_SCALAR: return NEEDS_NOTHING;
    case CML_UNARY_EXP:
    case CML_UNARY_SQRT:
    case CML_UNARY_TANH:
    case CML_UNARY_SIGMOID:
    case CML_UNARY_RELU: return NEEDS_X_OR_Y;
    default: return NEEDS_X;
    }
}

cml_status cml_unary_bwd(cml_ctx *ctx, cml_unary_op op, float param,
                         void *dx, const void *dy, const void *x, const void *y,
                         int64_t n, cml_dtype dtype) {
    static const char fn[] = "cml_unary_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_CHECK_ARG((int)op >= 0 && op < CML_UNARY_OP_COUNT, "%s: op=%d must be a cml_unary_op", fn, (int)op);
    CML_TRY(cml__check_size(fn, "n", n, 0));
    CML_TRY(cml__check_dtype_float(fn, "dtype", dtype));
    CML_TRY(check_data(fn, "dx", dx, n));
    CML_TRY(check_data(fn, "dy", dy, n));
    bwd_needs needs = unary_bwd_needs(op);
    if (n > 0 && needs == NEEDS_X && x == NULL)
        return cml__error(CML_ERR_INVALID_ARG, "%s: x must not be NULL for op=%d (its derivative needs the input)",
                          fn, (int)op);
    if (n > 0 && needs == NEEDS_X_OR_Y && x == NULL && y == NULL)
        return cml__error(CML_ERR_INVALID_ARG, "%s: x and y are both NULL for op=%d (one of them is needed)", fn,
                          (int)op);
    /* Pass only what the derivative reads, so the backends never touch the rest. */
    if (needs == NEEDS_NOTHING) x = y = NULL;
    if (needs == NEEDS_X) y = NULL;
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__unary_bwd_cuda(ctx, op, param, dx, dy, x, y, n, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__unary_bwd_cpu(ctx, op, param, dx, dy, x, y, n, dtype);
}

cml_status cml_binary(cml_ctx *ctx, cml_binary_op op,
                      void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                      const void *a, const cml_layout *a_layout, cml_dtype a_dtype,
                      const void *b, const cml_layout *b_layout, cml_dtype b_dtype) {
    static const char fn[] = "cml_binary";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_CHECK_ARG((int)op >= 0 && op < CML_BINARY_OP_COUNT, "%s: op=%d must be a cml_binary_op", fn, (int)op);
    CML_TRY(check_output_layout(fn, "y_layout", y_layout));
    CML_TRY(check_input_layout(fn, "a_layout", a_layout, y_layout));
    CML_TRY(check_input_layout(fn, "b_layout", b_layout, y_layout));
    CML_TRY(cml__check_dtype_valid(fn, "y_dtype", y_dtype));
    CML_TRY(cml__check_dtype_valid(fn, "a_dtype", a_dtype));
    CML_TRY(cml__check_dtype_valid(fn, "b_dtype", b_dtype));
    int64_t numel = layout_numel(y_layout);
    CML_TRY(check_data(fn, "y", y, numel));
    CML_TRY(check_data(fn, "a", a, numel));
    CML_TRY(check_data(fn, "b", b, numel));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__binary_cuda(ctx, op, y, y_layout, y_dtype, a, a_layout, a_dtype, b, b_layout, b_dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__binary_cpu(ctx, op, y, y_layout, y_dtype, a, a_layout, a_dtype, b, b_layout, b_dtype);
}

cml_status cml_where_fwd(cml_ctx *ctx,
                         void *y, const cml_layout *y_layout, cml_dtype dtype,
                         const uint8_t *cond, const cml_layout *cond_layout,
                         const void *a, const cml_layout *a_layout,
                         const void *b, const cml_layout *b_layout) {
    static const char fn[] = "cml_where_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_output_layout(fn, "y_layout", y_layout));
    CML_TRY(check_input_layout(fn, "cond_layout", cond_layout, y_layout));
    CML_TRY(check_input_layout(fn, "a_layout", a_layout, y_layout));
    CML_TRY(check_input_layout(fn, "b_layout", b_layout, y_layout));
    CML_TRY(cml__check_dtype_valid(fn, "dtype", dtype));
    int64_t numel = layout_numel(y_layout);
    CML_TRY(check_data(fn, "y", y, numel));
    CML_TRY(check_data(fn, "cond", cond, numel));
    CML_TRY(check_data(fn, "a", a, numel));
    CML_TRY(check_data(fn, "b", b, numel));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__where_fwd_cuda(ctx, y, y_layout, dtype, cond, cond_layout, a, a_layout, b, b_layout);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__where_fwd_cpu(ctx, y, y_layout, dtype, cond, cond_layout, a, a_layout, b, b_layout);
}

cml_status cml_copy(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                    const void *x, const cml_layout *x_layout, cml_dtype x_dtype) {
    static const char fn[] = "cml_copy";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_output_layout(fn, "y_layout", y_layout));
    CML_TRY(check_input_layout(fn, "x_layout", x_layout, y_layout));
    CML_TRY(cml__check_dtype_valid(fn, "y_dtype", y_dtype));
    CML_TRY(cml__check_dtype_valid(fn, "x_dtype", x_dtype));
    int64_t numel = layout_numel(y_layout);
    CML_TRY(check_data(fn, "y", y, numel));
    CML_TRY(check_data(fn, "x", x, numel));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__copy_cuda(ctx, y, y_layout, y_dtype, x, x_layout, x_dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__copy_cpu(ctx, y, y_layout, y_dtype, x, x_layout, x_dtype);
}

cml_status cml_fill(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype, double value) {
    static const char fn[] = "cml_fill";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_output_layout(fn, "y_layout", y_layout));
    CML_TRY(cml__check_dtype_valid(fn, "dtype", dtype));
    CML_TRY(check_data(fn, "y", y, layout_numel(y_layout)));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__fill_cuda(ctx, y, y_layout, dtype, value);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__fill_cpu(ctx, y, y_layout, dtype, value);
}
