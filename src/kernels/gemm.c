/* GEMM: D = act(alpha * sa * op(A) op(B) * sb + beta * C + bias), strided
 * batches and grouped problems. Descriptor helpers, argument validation
 * (every field, with messages naming it and the expected value), the
 * workspace query and device dispatch. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

/* a * b for the default strides; saturates (and 0 for sizes < 1) so that absurd
 * sizes reach validation, which names them, instead of overflowing here. */
static int64_t stride_of(int64_t a, int64_t b) {
    if (a <= 0 || b <= 0) return 0;
    return a > INT64_MAX / b ? INT64_MAX : a * b;
}

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
    d.stride_a = stride_of(M, K);
    d.stride_b = stride_of(K, N);
    d.stride_c = stride_of(M, N);
    d.stride_d = stride_of(M, N);
    d.stride_aux = stride_of(M, N);
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

static const char *epilogue_name(cml_epilogue e) {
    static const char *const names[] = {"CML_EPILOGUE_NONE", "CML_EPILOGUE_RELU", "CML_EPILOGUE_GELU_TANH",
                                        "CML_EPILOGUE_GELU_TANH_AUX", "CML_EPILOGUE_DGELU_TANH"};
    return (int)e >= 0 && e <= CML_EPILOGUE_DGELU_TANH ? names[e] : "?";
}

static const char *scale_mode_name(cml_scale_mode m) {
    return m == CML_SCALE_TENSOR ? "CML_SCALE_TENSOR" : m == CML_SCALE_VECTOR ? "CML_SCALE_VECTOR" : "CML_SCALE_NONE";
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

/* An output written once per batch must not have batches that overlap. */
static cml_status check_out_stride(const char *fn, const char *stride_name, int64_t stride, const char *ld_name,
                                   int64_t M, int64_t ld, int64_t N, int64_t batch) {
    int64_t extent = (M - 1) * ld + N;
    if (batch > 1 && stride < extent)
        return cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= (M-1)*%s+N=%lld when batch=%lld > 1", fn,
                          stride_name, (long long)stride, ld_name, (long long)extent, (long long)batch);
    return CML_OK;
}

/* The last element of a strided batch of rows x cols matrices, (batch-1)*stride +
 * (rows-1)*ld + cols - 1, must be addressable: absurd strides are errors, not overflow. */
static cml_status check_extent(const char *fn, const char *what, int64_t batch, int64_t stride, int64_t rows,
                               int64_t ld, int64_t cols) {
    int64_t room = INT64_MAX - cols;
    bool ok = rows <= 1 || ld <= room / (rows - 1);
    if (ok) room -= (rows - 1) * ld;
    ok = ok && (batch <= 1 || stride <= room / (batch - 1));
    if (!ok)
        return cml__error(CML_ERR_INVALID_ARG, "%s: %s's leading dim and batch stride address past int64 (rows=%lld, "
                          "ld=%lld, batch=%lld, stride=%lld)", fn, what, (long long)rows, (long long)ld,
                          (long long)batch, (long long)stride);
    return CML_OK;
}

/* C, D, aux and bias are stored as f32, f16 or bf16; fp8 is an input format only. */
static cml_status check_out_dtype(const char *fn, const char *arg, cml_dtype dt) {
    CML_TRY(cml__check_dtype_float(fn, arg, dt));
    if (dt != CML_F32 && dt != CML_F16 && dt != CML_BF16)
        return cml__error(CML_ERR_DTYPE, "%s: %s=%s must be f32, f16 or bf16 (fp8 is an input dtype only)", fn, arg,
                          cml_dtype_name(dt));
    return CML_OK;
}

static cml_status check_scale(const char *fn, const char *mode_name, cml_scale_mode mode, const char *ptr_name,
                              const float *ptr) {
    CML_CHECK_ARG(mode == CML_SCALE_NONE || mode == CML_SCALE_TENSOR || mode == CML_SCALE_VECTOR,
                  "%s: %s=%d is not a cml_scale_mode", fn, mode_name, (int)mode);
    CML_CHECK_ARG(mode == CML_SCALE_NONE || ptr != NULL, "%s: %s must not be NULL when %s=%s", fn, ptr_name, mode_name,
                  scale_mode_name(mode));
    return CML_OK;
}

/* The fields of a descriptor, independent of the data pointers. */
static cml_status check_fields(const char *fn, const cml_gemm_desc *d) {
    CML_CHECK_ARG(d->op_a == CML_OP_N || d->op_a == CML_OP_T, "%s: op_a=%d must be CML_OP_N or CML_OP_T", fn, (int)d->op_a);
    CML_CHECK_ARG(d->op_b == CML_OP_N || d->op_b == CML_OP_T, "%s: op_b=%d must be CML_OP_N or CML_OP_T", fn, (int)d->op_b);
    CML_CHECK_ARG((int)d->epilogue >= 0 && d->epilogue <= CML_EPILOGUE_DGELU_TANH,
                  "%s: epilogue=%d is not a cml_epilogue (0..%d)", fn, (int)d->epilogue, (int)CML_EPILOGUE_DGELU_TANH);
    CML_CHECK_ARG(d->bias_axis == CML_BIAS_PER_COLUMN || d->bias_axis == CML_BIAS_PER_ROW,
                  "%s: bias_axis=%d must be CML_BIAS_PER_COLUMN or CML_BIAS_PER_ROW", fn, (int)d->bias_axis);
    CML_CHECK_ARG(d->math == CML_GEMM_MATH_DEFAULT || d->math == CML_GEMM_MATH_TF32,
                  "%s: math=%d must be CML_GEMM_MATH_DEFAULT or CML_GEMM_MATH_TF32", fn, (int)d->math);
    CML_TRY(cml__check_size(fn, "M", d->M, 1));
    CML_TRY(cml__check_size(fn, "N", d->N, 1));
    CML_TRY(cml__check_size(fn, "K", d->K, 0));
    CML_TRY(cml__check_size(fn, "batch", d->batch, 1));
    CML_TRY(cml__check_product(fn, d->batch, d->M, d->N));
    CML_TRY(cml__check_product(fn, d->M, d->K, 1));
    CML_TRY(cml__check_product(fn, d->K, d->N, 1));
    CML_TRY(cml__check_dtype_float(fn, "a_dtype", d->a_dtype));
    CML_TRY(cml__check_dtype_float(fn, "b_dtype", d->b_dtype));
    CML_TRY(check_out_dtype(fn, "d_dtype", d->d_dtype));
    bool uses_c = d->beta != 0.0f;
    if (uses_c) CML_TRY(check_out_dtype(fn, "c_dtype", d->c_dtype));
    if (d->math == CML_GEMM_MATH_TF32 && (d->a_dtype != CML_F32 || d->b_dtype != CML_F32))
        return cml__error(CML_ERR_INVALID_ARG,
                          "%s: math=CML_GEMM_MATH_TF32 needs a_dtype=f32 and b_dtype=f32 (got %s and %s); narrower "
                          "inputs already run on tensor cores with CML_GEMM_MATH_DEFAULT",
                          fn, cml_dtype_name(d->a_dtype), cml_dtype_name(d->b_dtype));
    CML_TRY(check_scale(fn, "a_scale_mode", d->a_scale_mode, "a_scale", d->a_scale));
    CML_TRY(check_scale(fn, "b_scale_mode", d->b_scale_mode, "b_scale", d->b_scale));
    if (d->K > 0) {
        if (d->op_a == CML_OP_N) CML_TRY(check_ld(fn, "lda", d->lda, "K", d->K));
        else CML_TRY(check_ld(fn, "lda", d->lda, "M", d->M));
        if (d->op_b == CML_OP_N) CML_TRY(check_ld(fn, "ldb", d->ldb, "N", d->N));
        else CML_TRY(check_ld(fn, "ldb", d->ldb, "K", d->K));
        CML_TRY(check_batch_stride(fn, "stride_a", d->stride_a));
        CML_TRY(check_batch_stride(fn, "stride_b", d->stride_b));
        bool an = d->op_a == CML_OP_N, bn = d->op_b == CML_OP_N;
        CML_TRY(check_extent(fn, "A", d->batch, d->stride_a, an ? d->M : d->K, d->lda, an ? d->K : d->M));
        CML_TRY(check_extent(fn, "B", d->batch, d->stride_b, bn ? d->K : d->N, d->ldb, bn ? d->N : d->K));
    }
    if (uses_c) {
        CML_TRY(check_ld(fn, "ldc", d->ldc, "N", d->N));
        CML_TRY(check_batch_stride(fn, "stride_c", d->stride_c));
        CML_TRY(check_extent(fn, "C", d->batch, d->stride_c, d->M, d->ldc, d->N));
    }
    CML_TRY(check_ld(fn, "ldd", d->ldd, "N", d->N));
    CML_TRY(check_batch_stride(fn, "stride_d", d->stride_d));
    CML_TRY(check_extent(fn, "D", d->batch, d->stride_d, d->M, d->ldd, d->N));
    CML_TRY(check_out_stride(fn, "stride_d", d->stride_d, "ldd", d->M, d->ldd, d->N, d->batch));
    if (d->epilogue == CML_EPILOGUE_GELU_TANH_AUX || d->epilogue == CML_EPILOGUE_DGELU_TANH) {
        CML_CHECK_ARG(d->aux != NULL, "%s: aux must not be NULL when epilogue=%s", fn, epilogue_name(d->epilogue));
        CML_TRY(check_ld(fn, "ldaux", d->ldaux, "N", d->N));
        CML_TRY(check_batch_stride(fn, "stride_aux", d->stride_aux));
        CML_TRY(check_extent(fn, "aux", d->batch, d->stride_aux, d->M, d->ldaux, d->N));
        if (d->epilogue == CML_EPILOGUE_GELU_TANH_AUX) /* written: batches must not overlap */
            CML_TRY(check_out_stride(fn, "stride_aux", d->stride_aux, "ldaux", d->M, d->ldaux, d->N, d->batch));
    }
    return CML_OK;
}

static cml_status check_desc(const char *fn, const cml_gemm_desc *d, const void *D, const void *A, const void *B,
                             const void *C) {
    CML_TRY(check_fields(fn, d));
    if (d->K > 0) {
        CML__CHECK_NOT_NULL(fn, A);
        CML__CHECK_NOT_NULL(fn, B);
    }
    if (d->beta != 0.0f) {
        CML_CHECK_ARG(C != NULL, "%s: C must not be NULL when beta=%g != 0", fn, (double)d->beta);
        /* in place (C == D) works element by element: both must address elements alike */
        if (C == D && (d->ldc != d->ldd || d->stride_c != d->stride_d || d->c_dtype != d->d_dtype))
            return cml__error(CML_ERR_INVALID_ARG,
                              "%s: C aliases D, so ldc=%lld, stride_c=%lld, c_dtype=%s must equal ldd=%lld, "
                              "stride_d=%lld, d_dtype=%s",
                              fn, (long long)d->ldc, (long long)d->stride_c, cml_dtype_name(d->c_dtype),
                              (long long)d->ldd, (long long)d->stride_d, cml_dtype_name(d->d_dtype));
    }
    CML__CHECK_NOT_NULL(fn, D);
    if (d->epilogue == CML_EPILOGUE_GELU_TANH_AUX)
        CML_CHECK_ARG(d->aux != D, "%s: aux must not alias D (aux keeps the pre-activation, D the activation)", fn);
    CML_CHECK_ARG(d->dbias == NULL || d->dbias != D, "%s: dbias must not alias D", fn);
    return CML_OK;
}

cml_status cml_gemm(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A,
                    const void *B, const void *C) {
    static const char fn[] = "cml_gemm";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML__CHECK_NOT_NULL(fn, desc);
    CML_TRY(check_desc(fn, desc, D, A, B, C));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__gemm_cuda(ctx, desc, D, A, B, C);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__gemm_cpu(ctx, desc, D, A, B, C);
}

cml_status cml_gemm_workspace_size(cml_ctx *ctx, const cml_gemm_desc *desc, size_t *bytes) {
    static const char fn[] = "cml_gemm_workspace_size";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML__CHECK_NOT_NULL(fn, desc);
    CML__CHECK_NOT_NULL(fn, bytes);
    *bytes = 0;
    CML_TRY(check_fields(fn, desc));
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) {
        *bytes = cml__gemm_cuda_workspace_size(ctx, desc);
        return CML_OK;
    }
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    *bytes = cml__gemm_cpu_workspace_size(desc);
    return CML_OK;
}

/* Problem i must share with problem 0 what one grouped launch specializes on. */
static cml_status check_same_kind(const char *fn, const cml_gemm_desc *d0, const cml_gemm_desc *d, int64_t i) {
#define SAME(field, fmt, conv)                                                                                        \
    if (d->field != d0->field)                                                                                       \
        return cml__error(CML_ERR_INVALID_ARG,                                                                       \
                          "%s: descs[%lld]." #field "=" fmt " differs from descs[0]." #field "=" fmt                 \
                          " (every problem must share op_a, op_b, dtypes, math, scale modes and epilogue)",          \
                          fn, (long long)i, conv(d->field), conv(d0->field));
    SAME(op_a, "%d", (int))
    SAME(op_b, "%d", (int))
    SAME(a_dtype, "%s", cml_dtype_name)
    SAME(b_dtype, "%s", cml_dtype_name)
    SAME(d_dtype, "%s", cml_dtype_name)
    SAME(math, "%d", (int))
    SAME(a_scale_mode, "%d", (int))
    SAME(b_scale_mode, "%d", (int))
    SAME(epilogue, "%s", epilogue_name)
#undef SAME
    /* c_dtype matters only where C is read */
    if (d->beta != 0.0f && d0->beta != 0.0f && d->c_dtype != d0->c_dtype)
        return cml__error(CML_ERR_INVALID_ARG, "%s: descs[%lld].c_dtype=%s differs from descs[0].c_dtype=%s", fn,
                          (long long)i, cml_dtype_name(d->c_dtype), cml_dtype_name(d0->c_dtype));
    return CML_OK;
}

cml_status cml_gemm_grouped(cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                            const void *const *A, const void *const *B, const void *const *C) {
    static const char fn[] = "cml_gemm_grouped";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(cml__check_size(fn, "count", count, 0));
    if (count == 0) return CML_OK;
    CML__CHECK_NOT_NULL(fn, descs);
    CML__CHECK_NOT_NULL(fn, D);
    CML__CHECK_NOT_NULL(fn, A);
    CML__CHECK_NOT_NULL(fn, B);
    for (int64_t i = 0; i < count; i++) {
        char where[64];
        snprintf(where, sizeof where, "%s: descs[%lld]", fn, (long long)i);
        CML_CHECK_ARG(descs[i].batch == 1, "%s.batch=%lld must be 1 (grouped problems are single matrices)", where,
                      (long long)descs[i].batch);
        CML_TRY(check_same_kind(fn, &descs[0], &descs[i], i));
        CML_CHECK_ARG(descs[i].beta == 0.0f || C != NULL,
                      "%s: C (the array) must not be NULL when descs[%lld].beta=%g != 0", fn, (long long)i,
                      (double)descs[i].beta);
        CML_TRY(check_desc(where, &descs[i], D[i], A[i], B[i], C ? C[i] : NULL));
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA) return cml__gemm_grouped_cuda(ctx, descs, count, D, A, B, C);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    for (int64_t i = 0; i < count; i++) CML_TRY(cml__gemm_cpu(ctx, &descs[i], D[i], A[i], B[i], C ? C[i] : NULL));
    return CML_OK;
}
