/* Indexing along the middle axis: index_select and gather, forward and
 * backward. Argument validation and device dispatch; index values are data
 * on the device and are range-checked by the backend. */
#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_index_args(const char *fn, const void *out, const void *in, const int64_t *idx,
                                   int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype,
                                   bool backward) {
    CML_TRY(cml__check_size(fn, "outer", outer, 0));
    CML_TRY(cml__check_size(fn, "n_src", n_src, 0));
    CML_TRY(cml__check_size(fn, "n_idx", n_idx, 0));
    CML_TRY(cml__check_size(fn, "inner", inner, 0));
    CML_TRY(cml__check_product(fn, outer, n_src > n_idx ? n_src : n_idx, inner));
    /* forward copies elements (any dtype); backward adds them (float math) */
    CML_TRY(backward ? cml__check_dtype_float(fn, "dtype", dtype) : cml__check_dtype_valid(fn, "dtype", dtype));
    if (outer * inner > 0 && n_idx > 0) {
        if (backward) {
            CML_CHECK_ARG(out, "%s: dx must not be NULL", fn);
            CML_CHECK_ARG(in, "%s: dy must not be NULL", fn);
        } else {
            CML_CHECK_ARG(out, "%s: y must not be NULL", fn);
            CML_CHECK_ARG(in, "%s: x must not be NULL", fn);
        }
        CML__CHECK_NOT_NULL(fn, idx);
    }
    return CML_OK;
}

cml_status cml_index_select_fwd(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                                int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                cml_dtype dtype) {
    static const char fn[] = "cml_index_select_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_index_args(fn, y, x, idx, outer, n_src, n_idx, inner, dtype, false));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__index_select_fwd_cuda(ctx, y, x, idx, outer, n_src, n_idx, inner, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__index_select_fwd_cpu(ctx, y, x, idx, outer, n_src, n_idx, inner, dtype);
}

cml_status cml_index_select_bwd(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                                int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                cml_dtype dtype) {
    static const char fn[] = "cml_index_select_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_index_args(fn, dx, dy, idx, outer, n_src, n_idx, inner, dtype, true));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__index_select_bwd_cuda(ctx, dx, dy, idx, outer, n_src, n_idx, inner, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__index_select_bwd_cpu(ctx, dx, dy, idx, outer, n_src, n_idx, inner, dtype);
}

cml_status cml_gather_fwd(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                          int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype) {
    static const char fn[] = "cml_gather_fwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_index_args(fn, y, x, idx, outer, n_src, n_idx, inner, dtype, false));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__gather_fwd_cuda(ctx, y, x, idx, outer, n_src, n_idx, inner, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__gather_fwd_cpu(ctx, y, x, idx, outer, n_src, n_idx, inner, dtype);
}

cml_status cml_gather_bwd(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                          int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                          cml_dtype dtype) {
    static const char fn[] = "cml_gather_bwd";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_index_args(fn, dx, dy, idx, outer, n_src, n_idx, inner, dtype, true));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__gather_bwd_cuda(ctx, dx, dy, idx, outer, n_src, n_idx, inner, dtype);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__gather_bwd_cpu(ctx, dx, dy, idx, outer, n_src, n_idx, inner, dtype);
}
