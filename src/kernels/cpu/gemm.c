/* CPU GEMM through OpenBLAS cblas_sgemm (row-major), one call per batch.
 *
 * f32 operands are passed to sgemm in place. Other input dtypes are first
 * converted to packed f32 in the context's workspace. The product goes
 * straight into D when D is f32, else into an f32 workspace tile that the
 * epilogue converts. beta*C is folded into sgemm's beta: C is copied into the
 * output first unless it already is D (in-place accumulate). The epilogue
 * (+bias, then relu / gelu-tanh) runs on the f32 result row by row. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"
#include "runtime/error.h"

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

/* Converts a stored rows x cols matrix (row stride ld, any dtype) to packed f32. */
static void to_packed_f32(float *dst, const void *src, cml_dtype dt, int64_t offset, int64_t rows, int64_t cols,
                          int64_t ld) {
    for (int64_t r = 0; r < rows; r++) cml__load_f32(dst + r * cols, src, dt, offset + r * ld, 1, cols);
}

static void epilogue_row(float *row, const float *bias, cml_epilogue act, int64_t n) {
    if (bias)
        for (int64_t j = 0; j < n; j++) row[j] += bias[j];
    if (act == CML_EPILOGUE_RELU) {
        for (int64_t j = 0; j < n; j++) row[j] = (row[j] > 0.0f || row[j] != row[j]) ? row[j] : 0.0f;
    } else if (act == CML_EPILOGUE_GELU_TANH) {
        for (int64_t j = 0; j < n; j++) {
            float v = row[j];
            row[j] = 0.5f * v * (1.0f + tanhf(SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v)));
        }
    }
}

static bool fits_blas_int(const cml_gemm_desc *d) {
    return d->M <= INT_MAX && d->N <= INT_MAX && d->K <= INT_MAX && d->lda <= INT_MAX && d->ldb <= INT_MAX &&
           d->ldc <= INT_MAX && d->ldd <= INT_MAX;
}

cml_status cml__gemm_cpu(cml_ctx *ctx, const cml_gemm_desc *d, void *D, const void *A,
                         const void *B, const void *C) {
    if (!fits_blas_int(d))
        return cml__error(CML_ERR_UNSUPPORTED, "cml_gemm: M=%lld N=%lld K=%lld (or a leading dim) exceed the 32-bit "
                          "BLAS int range", (long long)d->M, (long long)d->N, (long long)d->K);
    const int64_t M = d->M, N = d->N, K = d->K;
    bool uses_c = d->beta != 0.0f;
    bool c_is_d = uses_c && C == D && d->ldc == d->ldd && d->stride_c == d->stride_d && d->c_dtype == d->d_dtype;
    bool convert_a = d->a_dtype != CML_F32 && K > 0, convert_b = d->b_dtype != CML_F32 && K > 0;
    bool d_is_f32 = d->d_dtype == CML_F32;
    /* workspace: [A as f32][B as f32][f32 output tile][bias as f32] */
    size_t a_elems = convert_a ? (size_t)(M * K) : 0, b_elems = convert_b ? (size_t)(K * N) : 0;
    size_t out_elems = d_is_f32 ? 0 : (size_t)(M * N), bias_elems = d->bias ? (size_t)N : 0;
    float *ws = NULL;
    size_t ws_elems = a_elems + b_elems + out_elems + bias_elems;
    if (ws_elems) CML_TRY(cml_ctx_workspace(ctx, (void **)&ws, ws_elems * sizeof(float)));
    float *a_f32 = ws, *b_f32 = ws + a_elems, *out_tile = b_f32 + b_elems, *bias_f32 = out_tile + out_elems;
    if (d->bias) cml__load_f32(bias_f32, d->bias, d->d_dtype, 0, 1, N);

    size_t a_es = cml_dtype_size(d->a_dtype), b_es = cml_dtype_size(d->b_dtype);
    size_t c_es = cml_dtype_size(d->c_dtype), d_es = cml_dtype_size(d->d_dtype);
    /* stored shapes: A is M x K (op N) or K x M (op T); B is K x N or N x K */
    int64_t a_rows = d->op_a == CML_OP_N ? M : K, a_cols = d->op_a == CML_OP_N ? K : M;
    int64_t b_rows = d->op_b == CML_OP_N ? K : N, b_cols = d->op_b == CML_OP_N ? N : K;
    for (int64_t bi = 0; bi < d->batch; bi++) {
        const char *a_ptr = K > 0 ? (const char *)A + (size_t)(bi * d->stride_a) * a_es : NULL;
        const char *b_ptr = K > 0 ? (const char *)B + (size_t)(bi * d->stride_b) * b_es : NULL;
        const char *c_ptr = uses_c ? (const char *)C + (size_t)(bi * d->stride_c) * c_es : NULL;
        char *d_ptr = (char *)D + (size_t)(bi * d->stride_d) * d_es;
        const float *a_op = (const float *)a_ptr, *b_op = (const float *)b_ptr;
        int64_t lda = d->lda, ldb = d->ldb;
        /* a broadcast (stride 0) operand needs converting only once */
        if (convert_a && (bi == 0 || d->stride_a != 0)) to_packed_f32(a_f32, a_ptr, d->a_dtype, 0, a_rows, a_cols, d->lda);
        if (convert_b && (bi == 0 || d->stride_b != 0)) to_packed_f32(b_f32, b_ptr, d->b_dtype, 0, b_rows, b_cols, d->ldb);
        if (convert_a) {
            a_op = a_f32;
            lda = a_cols;
        }
        if (convert_b) {
            b_op = b_f32;
            ldb = b_cols;
        }
        float *out = d_is_f32 ? (float *)d_ptr : out_tile;
        int64_t ldo = d_is_f32 ? d->ldd : N;
        /* out <- C so that sgemm's beta applies to it, unless C already is the output */
        float beta = 0.0f;
        if (uses_c) {
            beta = d->beta;
            if (!(c_is_d && d_is_f32))
                for (int64_t m = 0; m < M; m++) cml__load_f32(out + m * ldo, c_ptr, d->c_dtype, m * d->ldc, 1, N);
        }
        if (K > 0) {
            cblas_sgemm(CblasRowMajor, d->op_a == CML_OP_N ? CblasNoTrans : CblasTrans,
                        d->op_b == CML_OP_N ? CblasNoTrans : CblasTrans, (int)M, (int)N, (int)K, d->alpha, a_op,
                        (int)lda, b_op, (int)ldb, beta, out, (int)ldo);
        } else {
            /* K == 0: the product is empty, D = beta * C (+ bias) */
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) out[m * ldo + n] = uses_c ? beta * out[m * ldo + n] : 0.0f;
        }
        for (int64_t m = 0; m < M; m++) {
            epilogue_row(out + m * ldo, d->bias ? bias_f32 : NULL, d->epilogue, N);
            if (!d_is_f32) cml__store_f32(d_ptr, d->d_dtype, m * d->ldd, 1, out + m * ldo, N);
        }
    }
    return CML_OK;
}
