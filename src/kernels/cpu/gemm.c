/* CPU GEMM, the reference for every GPU path: OpenBLAS cblas_sgemm (row-major),
 * one call per batch, then the epilogue in f32, row by row.
 *
 * Inputs: f32 operands are passed to sgemm in place; other dtypes (f16, bf16,
 * fp8) are converted to packed f32 in the context's workspace, exactly (every
 * narrow value is an f32). Under CML_GEMM_MATH_TF32 f32 inputs are rounded
 * to tf32 (10 mantissa bits, round to nearest with ties away from zero, as
 * the GPU's cvt.rna.tf32.f32 does) before the product, so the CPU computes
 * what tensor cores compute, with exact products and f32 sums of them.
 *
 * Two ways to the pre-activation z = alpha * sa * sb * P + beta * C + bias:
 * - direct (f32 D, no per-row/column scale): sgemm writes alpha*sa*sb * P +
 *   beta * D into D itself, C first copied into D unless it already is D;
 * - tile (narrow D or a VECTOR scale): sgemm writes P into an f32 tile, and
 *   each row is finished as ((alpha * sa[m]) * sb[n]) * P + beta * C, the
 *   order the CUDA epilogue uses.
 * Then bias, the activation and aux (GELU_TANH_AUX stores z into aux in d_dtype
 * and D = gelu(z); DGELU_TANH reads u = aux and D = z * gelu'(u)).
 *
 * dbias[b*M + m] = sa * sum_k op(A)[m,k] over the stored A values (not
 * tf32-rounded), summed in order in double, stored in d_dtype.
 *
 * Workspace: none when every operand is f32 with default math and neither a
 * VECTOR scale nor DGELU (conv's im2col GEMMs rely on that). */
#include <limits.h>
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"
#include "runtime/error.h"

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

/* What one call needs beyond the caller's buffers, from the descriptor alone. */
typedef struct gemm_plan {
    bool tf32, convert_a, convert_b, tile, row_scratch;
    size_t a_elems, b_elems, tile_elems, bias_elems, row_elems;
} gemm_plan;

static gemm_plan make_plan(const cml_gemm_desc *d) {
    gemm_plan p;
    memset(&p, 0, sizeof p);
    p.tf32 = d->math == CML_GEMM_MATH_TF32;
    p.convert_a = d->K > 0 && (d->a_dtype != CML_F32 || p.tf32);
    p.convert_b = d->K > 0 && (d->b_dtype != CML_F32 || p.tf32);
    bool vec_scale = d->a_scale_mode == CML_SCALE_VECTOR || d->b_scale_mode == CML_SCALE_VECTOR;
    p.tile = d->d_dtype != CML_F32 || vec_scale;
    p.row_scratch = p.tile || d->epilogue == CML_EPILOGUE_DGELU_TANH;
    p.a_elems = p.convert_a ? (size_t)(d->M * d->K) : 0;
    p.b_elems = p.convert_b ? (size_t)(d->K * d->N) : 0;
    p.tile_elems = p.tile ? (size_t)(d->M * d->N) : 0;
    p.bias_elems = d->bias && d->d_dtype != CML_F32 ? (size_t)(d->bias_axis == CML_BIAS_PER_ROW ? d->M : d->N) : 0;
    p.row_elems = p.row_scratch ? (size_t)(2 * d->N) : 0; /* a C row and an aux row */
    return p;
}

size_t cml__gemm_cpu_workspace_size(const cml_gemm_desc *d) {
    gemm_plan p = make_plan(d);
    return (p.a_elems + p.b_elems + p.tile_elems + p.bias_elems + p.row_elems) * sizeof(float);
}

/* Round to nearest tf32, ties away from zero (cvt.rna.tf32.f32); inf and NaN kept. */
static float round_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7F800000u) != 0x7F800000u) u = (u + 0x1000u) & 0xFFFFE000u;
    memcpy(&x, &u, 4);
    return x;
}

/* Converts a stored rows x cols matrix (row stride ld, any dtype) to packed f32. */
static void to_packed_f32(float *dst, const void *src, cml_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                          bool tf32) {
    for (int64_t r = 0; r < rows; r++) {
        cml__load_f32(dst + r * cols, src, dt, r * ld, 1, cols);
        if (tf32)
            for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = round_tf32(dst[r * cols + c]);
    }
}

static float gelu_tanh(float v) { return 0.5f * v * (1.0f + tanhf(SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v))); }

/* d/du of gelu_tanh. */
static float dgelu_tanh(float u) {
    float t = tanhf(SQRT_2_OVER_PI * (u + GELU_CUBIC * u * u * u));
    return 0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * u * u);
}

static float scale_at(cml_scale_mode mode, const float *s, int64_t i) {
    return mode == CML_SCALE_TENSOR ? s[0] : mode == CML_SCALE_VECTOR ? s[i] : 1.0f;
}

/* The epilogue after z: bias, aux, activation, in place on one row of N. */
typedef struct epi_row {
    const float *bias; /* f32, N or M by axis; NULL when none */
    cml_bias_axis bias_axis;
    cml_epilogue act;
    void *aux;
    cml_dtype aux_dtype;
    float *aux_row; /* scratch for DGELU */
} epi_row;

static void finish_row(float *z, int64_t m, int64_t N, const epi_row *e, int64_t aux_off) {
    if (e->bias) {
        if (e->bias_axis == CML_BIAS_PER_ROW)
            for (int64_t n = 0; n < N; n++) z[n] += e->bias[m];
        else
            for (int64_t n = 0; n < N; n++) z[n] += e->bias[n];
    }
    switch (e->act) {
    case CML_EPILOGUE_RELU:
        for (int64_t n = 0; n < N; n++) z[n] = (z[n] > 0.0f || z[n] != z[n]) ? z[n] : 0.0f;
        break;
    case CML_EPILOGUE_GELU_TANH_AUX: /* aux = z, D = gelu(z) */
        cml__store_f32(e->aux, e->aux_dtype, aux_off, 1, z, N);
        for (int64_t n = 0; n < N; n++) z[n] = gelu_tanh(z[n]);
        break;
    case CML_EPILOGUE_GELU_TANH:
        for (int64_t n = 0; n < N; n++) z[n] = gelu_tanh(z[n]);
        break;
    case CML_EPILOGUE_DGELU_TANH:
        cml__load_f32(e->aux_row, e->aux, e->aux_dtype, aux_off, 1, N);
        for (int64_t n = 0; n < N; n++) z[n] = z[n] * dgelu_tanh(e->aux_row[n]);
        break;
    default:
        break;
    }
}

/* dbias[b*M + m] = sa(m) * sum_k op(A)[m,k] of batch b. */
static void bias_grad(const cml_gemm_desc *d, const void *A, int64_t bi) {
    size_t a_es = cml_dtype_size(d->a_dtype);
    const char *a = d->K > 0 ? (const char *)A + (size_t)(bi * d->stride_a) * a_es : NULL;
    int64_t sm = d->op_a == CML_OP_N ? d->lda : 1, sk = d->op_a == CML_OP_N ? 1 : d->lda;
    for (int64_t m = 0; m < d->M; m++) {
        double acc = 0;
        for (int64_t k = 0; k < d->K; k++) acc += cml_dtype_load(a, d->a_dtype, m * sm + k * sk);
        acc *= scale_at(d->a_scale_mode, d->a_scale, m);
        cml_dtype_store(d->dbias, d->d_dtype, bi * d->M + m, (float)acc);
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
    const gemm_plan p = make_plan(d);
    const bool uses_c = d->beta != 0.0f;
    const bool c_is_d = uses_c && C == D; /* validated: same ld, stride and dtype then */
    float *ws = NULL;
    size_t ws_bytes = cml__gemm_cpu_workspace_size(d);
    if (ws_bytes) CML_TRY(cml_ctx_workspace(ctx, (void **)&ws, ws_bytes));
    float *a_f32 = ws, *b_f32 = a_f32 + p.a_elems, *tile = b_f32 + p.b_elems, *bias_f32 = tile + p.tile_elems;
    float *c_row = bias_f32 + p.bias_elems, *aux_row = c_row + (p.row_scratch ? N : 0);

    epi_row e = {NULL, d->bias_axis, d->epilogue, d->aux, d->d_dtype, aux_row};
    if (d->bias && d->d_dtype == CML_F32) e.bias = (const float *)d->bias;
    else if (d->bias) {
        cml__load_f32(bias_f32, d->bias, d->d_dtype, 0, 1, (int64_t)p.bias_elems);
        e.bias = bias_f32;
    }
    /* per-tensor scale factors fold into sgemm's alpha (vector ones go to the tile path) */
    const float s_tensor = d->alpha * (d->a_scale_mode == CML_SCALE_TENSOR ? d->a_scale[0] : 1.0f) *
                           (d->b_scale_mode == CML_SCALE_TENSOR ? d->b_scale[0] : 1.0f);

    size_t a_es = cml_dtype_size(d->a_dtype), b_es = cml_dtype_size(d->b_dtype);
    size_t c_es = cml_dtype_size(d->c_dtype), d_es = cml_dtype_size(d->d_dtype);
    /* stored shapes: A is M x K (op N) or K x M (op T); B is K x N or N x K */
    int64_t a_rows = d->op_a == CML_OP_N ? M : K, a_cols = d->op_a == CML_OP_N ? K : M;
    int64_t b_rows = d->op_b == CML_OP_N ? K : N, b_cols = d->op_b == CML_OP_N ? N : K;
    for (int64_t bi = 0; bi < d->batch; bi++) {
        if (d->dbias) bias_grad(d, A, bi);
        const char *a_ptr = K > 0 ? (const char *)A + (size_t)(bi * d->stride_a) * a_es : NULL;
        const char *b_ptr = K > 0 ? (const char *)B + (size_t)(bi * d->stride_b) * b_es : NULL;
        const char *c_ptr = uses_c ? (const char *)C + (size_t)(bi * d->stride_c) * c_es : NULL;
        char *d_ptr = (char *)D + (size_t)(bi * d->stride_d) * d_es;
        const int64_t aux_base = bi * d->stride_aux;
        const float *a_op = (const float *)a_ptr, *b_op = (const float *)b_ptr;
        int64_t lda = d->lda, ldb = d->ldb;
        /* a broadcast (stride 0) operand needs converting only once */
        if (p.convert_a && (bi == 0 || d->stride_a != 0))
            to_packed_f32(a_f32, a_ptr, d->a_dtype, a_rows, a_cols, d->lda, p.tf32);
        if (p.convert_b && (bi == 0 || d->stride_b != 0))
            to_packed_f32(b_f32, b_ptr, d->b_dtype, b_rows, b_cols, d->ldb, p.tf32);
        if (p.convert_a) {
            a_op = a_f32;
            lda = a_cols;
        }
        if (p.convert_b) {
            b_op = b_f32;
            ldb = b_cols;
        }
        CBLAS_TRANSPOSE ta = d->op_a == CML_OP_N ? CblasNoTrans : CblasTrans;
        CBLAS_TRANSPOSE tb = d->op_b == CML_OP_N ? CblasNoTrans : CblasTrans;
        if (!p.tile) {
            /* direct: D (f32) = s_tensor * P + beta * C, then the epilogue in place */
            float *out = (float *)d_ptr;
            const int64_t ldo = d->ldd;
            if (uses_c && !c_is_d)
                for (int64_t m = 0; m < M; m++) cml__load_f32(out + m * ldo, c_ptr, d->c_dtype, m * d->ldc, 1, N);
            float beta = uses_c ? d->beta : 0.0f;
            if (K > 0) {
                cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, s_tensor, a_op, (int)lda, b_op, (int)ldb,
                            beta, out, (int)ldo);
            } else { /* the product is empty: D = beta * C */
                for (int64_t m = 0; m < M; m++)
                    for (int64_t n = 0; n < N; n++) out[m * ldo + n] = uses_c ? beta * out[m * ldo + n] : 0.0f;
            }
            for (int64_t m = 0; m < M; m++) finish_row(out + m * ldo, m, N, &e, aux_base + m * d->ldaux);
            continue;
        }
        /* tile: P into the f32 tile, then each row finished and stored in d_dtype */
        if (K > 0)
            cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0f, a_op, (int)lda, b_op, (int)ldb, 0.0f,
                        tile, (int)N);
        else
            memset(tile, 0, sizeof(float) * (size_t)(M * N));
        for (int64_t m = 0; m < M; m++) {
            float *z = tile + m * N;
            const float s_row = d->alpha * scale_at(d->a_scale_mode, d->a_scale, m);
            if (d->b_scale_mode == CML_SCALE_NONE)
                for (int64_t n = 0; n < N; n++) z[n] *= s_row;
            else
                for (int64_t n = 0; n < N; n++) z[n] *= s_row * scale_at(d->b_scale_mode, d->b_scale, n);
            if (uses_c) { /* C's row is read before D's row is written: C may be D */
                cml__load_f32(c_row, c_ptr, d->c_dtype, m * d->ldc, 1, N);
                for (int64_t n = 0; n < N; n++) z[n] += d->beta * c_row[n];
            }
            finish_row(z, m, N, &e, aux_base + m * d->ldaux);
            cml__store_f32(d_ptr, d->d_dtype, m * d->ldd, 1, z, N);
        }
    }
    return CML_OK;
}
