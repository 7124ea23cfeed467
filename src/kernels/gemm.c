/* GEMM: D = act(alpha * op(A) op(B) + beta * C + bias), strided batches.
 * Descriptor helper, argument validation and device dispatch. */
#include <string.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

cml_gemm_desc cml_gemm_desc_init(cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K, int64_t batch,
                                 cml_dtype ab_dtype, cml_dtype cd_dtype) {
    cml_gemm_desc d;
    memset(&d, 0, sizeof d); /* every option off: no bias, scales, aux, dbias */
    d.op_a = op_a;
    d.op_b = op_b;
    d.M = M;
    d.N = N;
    d.K = K;
    d.a_dtype = d.b_dtype = ab_dtype;
    d.c_dtype = d.d_dtype = cd_dtype;
    d.lda = op_a == CML_OP_N ? K : M; /* A stored M x K, or K x M when transposed */
    d.ldb = op_b == CML_OP_N ? N : K; /* B stored K x N, or N x K when transposed */
    d.ldc = N;
    d.ldd = N;
    d.ldaux = N;
    d.batch = batch;
    d.stride_a = M * K;
    d.stride_b = K * N;
    d.stride_c = M * N;
    d.stride_d = M * N;
    d.stride_aux = M * N;
    d.alpha = 1.0f;
    d.beta = 0.0f;
    d.epilogue = CML_EPILOGUE_NONE;
    d.bias_axis = CML_BIAS_PER_COLUMN;
    d.math = CML_GEMM_MATH_DEFAULT;
    d.a_scale_mode = d.b_scale_mode = CML_SCALE_NONE;
    return d;
}

cml_gemm_desc cml_gemm_desc_f32(cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K,
                                int64_t batch) {
    return cml_gemm_desc_init(op_a, op_b, M, N, K, batch, CML_F32, CML_F32);
}

/* ld is the row stride of a stored rows x cols matrix: it must be >= cols. */
static cml_status check_ld(const char *fn, const char *ld_name, int64_t ld, const char *cols_name, int64_t cols) {
    if (ld < cols || ld < 1)
        return cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= %s=%lld (and >= 1)", fn, ld_name, (long long)ld,
                          cols_name, (long long)cols);
    return CML_OK;
}

static cml_status check_batch_stride(const char *fn, const char *name, int64_t stride) {
    if (stride < 0)
        return cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= 0 (0 broadcasts one matrix)", fn, name,
                          (long long)stride);
    return CML_OK;
}

static cml_status check_desc(const char *fn, const cml_gemm_desc *d, const void *D, const void *A, const void *B,
                             const void *C) {
    CML_CHECK_ARG(d->op_a == CML_OP_N || d->op_a == CML_OP_T, "%s: op_a=%d must be CML_OP_N or CML_OP_T", fn, (int)d->op_a);
    CML_CHECK_ARG(d->op_b == CML_OP_N || d->op_b == CML_OP_T, "%s: op_b=%d must be CML_OP_N or CML_OP_T", fn, (int)d->op_b);
    CML_CHECK_ARG((int)d->epilogue >= 0 && d->epilogue <= CML_EPILOGUE_GELU_TANH, "%s: epilogue=%d is not a cml_epilogue",
                  fn, (int)d->epilogue);
    CML_TRY(cml__check_size(fn, "M", d->M, 1));
    CML_TRY(cml__check_size(fn, "N", d->N, 1));
    CML_TRY(cml__check_size(fn, "K", d->K, 0));
    CML_TRY(cml__check_size(fn, "batch", d->batch, 1));
    CML_TRY(cml__check_dtype_float(fn, "a_dtype", d->a_dtype));
    CML_TRY(cml__check_dtype_float(fn, "b_dtype", d->b_dtype));
    CML_TRY(cml__check_dtype_float(fn, "d_dtype", d->d_dtype));
    bool uses_c = d->beta != 0.0f;
    if (uses_c) CML_TRY(cml__check_dtype_float(fn, "c_dtype", d->c_dtype));
    if (d->K > 0) {
        if (d->op_a == CML_OP_N) CML_TRY(check_ld(fn, "lda", d->lda, "K", d->K));
        else CML_TRY(check_ld(fn, "lda", d->lda, "M", d->M));
        if (d->op_b == CML_OP_N) CML_TRY(check_ld(fn, "ldb", d->ldb, "N", d->N));
        else CML_TRY(check_ld(fn, "ldb", d->ldb, "K", d->K));
        CML_TRY(check_batch_stride(fn, "stride_a", d->stride_a));
        CML_TRY(check_batch_stride(fn, "stride_b", d->stride_b));
        CML__CHECK_NOT_NULL(fn, A);
        CML__CHECK_NOT_NULL(fn, B);
    }
    if (uses_c) {
        CML_TRY(check_ld(fn, "ldc", d->ldc, "N", d->N));
        CML_TRY(check_batch_stride(fn, "stride_c", d->stride_c));
        CML_CHECK_ARG(C != NULL, "%s: C must not be NULL when beta=%g != 0", fn, (double)d->beta);
    }
    CML_TRY(check_ld(fn, "ldd", d->ldd, "N", d->N));
    CML_TRY(check_batch_stride(fn, "stride_d", d->stride_d));
    /* batches of D must not overlap: they are written independently */
    int64_t d_extent = (d->M - 1) * d->ldd + d->N;
    if (d->batch > 1 && d->stride_d < d_extent)
        return cml__error(CML_ERR_INVALID_ARG, "%s: stride_d=%lld must be >= (M-1)*ldd+N=%lld when batch=%lld > 1", fn,
                          (long long)d->stride_d, (long long)d_extent, (long long)d->batch);
    CML__CHECK_NOT_NULL(fn, D);
    return CML_OK;
}

cml_status cml_gemm(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A,
                    const void *B, const void *C) {
    static const char fn[] = "cml_gemm";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML__CHECK_NOT_NULL(fn, desc);
    CML_TRY(check_desc(fn, desc, D, A, B, C));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__gemm_cuda(ctx, desc, D, A, B, C) /* TEMPORARY cuBLAS stand-in */;
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__gemm_cpu(ctx, desc, D, A, B, C);
}
