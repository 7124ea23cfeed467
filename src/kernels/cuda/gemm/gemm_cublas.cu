/* CUDA GEMM — TEMPORARY STAND-IN on cuBLAS until the GEMM issue lands our own
 * Hopper (wgmma/TMA) kernel. Do not build on it: it exists so that the
 * framework can train on the GPU now.
 *
 * f32 only (a/b/c/d dtypes all f32), plain FP32 math (no TF32: CUBLAS_DEFAULT_MATH),
 * row-major with op N/T, strided batches, alpha/beta. Row-major D = op(A) op(B)
 * is column-major D^T = op(B)^T op(A)^T, so cuBLAS gets B first. When beta != 0
 * and C is not D, C is copied into D first (a small kernel); then bias and the
 * activation run as a second small kernel over D (one thread per element:
 * deterministic). cuBLAS's sgemm is deterministic for a given shape, GPU and
 * stream (no split-K atomics in its default mode).
 * One cuBLAS handle per device, created on first use and kept for the process. */
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define BLOCK 256
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

static cublasHandle_t handles[CML__MAX_CUDA_DEVICES];

static cml_status cublas_error(cublasStatus_t st, const char *call) {
    return cml__error(CML_ERR_CUDA, "cml_gemm: %s failed: cuBLAS status %d (%s)", call, (int)st,
                      cublasGetStatusString(st));
}

static cml_status get_handle(cml_ctx *ctx, cublasHandle_t *out) {
    int dev = ctx->device.index;
    if (!handles[dev]) {
        cublasStatus_t st = cublasCreate(&handles[dev]);
        if (st != CUBLAS_STATUS_SUCCESS) {
            handles[dev] = NULL;
            return cublas_error(st, "cublasCreate");
        }
        cublasSetMathMode(handles[dev], CUBLAS_DEFAULT_MATH);
    }
    cublasStatus_t st = cublasSetStream(handles[dev], cml__stream(ctx));
    if (st != CUBLAS_STATUS_SUCCESS) return cublas_error(st, "cublasSetStream");
    *out = handles[dev];
    return CML_OK;
}

/* D[b] (M x N, ldd) = C[b] (ldc) for every batch. */
static __global__ void gemm_copy_c_kernel(float *D, const float *C, long long batch, long long M, long long N,
                                          long long ldc, long long ldd, long long sc, long long sd) {
    long long total = batch * M * N;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        long long b = i / (M * N), r = (i / N) % M, c = i % N;
        D[b * sd + r * ldd + c] = C[b * sc + r * ldc + c];
    }
}

/* D = act(D + bias) elementwise, computed as the CPU does (no fused multiply-adds in GELU). */
static __global__ void gemm_epilogue_kernel(float *D, const float *bias, int act, long long batch, long long M,
                                            long long N, long long ldd, long long sd) {
    long long total = batch * M * N;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        long long b = i / (M * N), r = (i / N) % M, c = i % N;
        float *p = D + b * sd + r * ldd + c;
        float v = *p;
        if (bias) v = __fadd_rn(v, bias[c]);
        if (act == CML_EPILOGUE_RELU) v = v > 0.0f ? v : 0.0f;
        else if (act == CML_EPILOGUE_GELU_TANH) {
            float v3 = __fmul_rn(__fmul_rn(__fmul_rn(GELU_CUBIC, v), v), v);
            float t = tanhf(__fmul_rn(SQRT_2_OVER_PI, __fadd_rn(v, v3)));
            v = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, t));
        }
        *p = v;
    }
}

extern "C" cml_status cml__gemm_cuda(cml_ctx *ctx, const cml_gemm_desc *d, void *D, const void *A, const void *B,
                                     const void *C) {
    static const char fn[] = "cml_gemm";
    bool uses_c = d->beta != 0.0f;
    if (d->a_dtype != CML_F32 || d->b_dtype != CML_F32 || d->d_dtype != CML_F32 || (uses_c && d->c_dtype != CML_F32))
        return cml__error(CML_ERR_UNSUPPORTED,
                          "%s: only f32 is supported on CUDA yet (the cuBLAS stand-in); got a=%s b=%s c=%s d=%s", fn,
                          cml_dtype_name(d->a_dtype), cml_dtype_name(d->b_dtype), cml_dtype_name(d->c_dtype),
                          cml_dtype_name(d->d_dtype));
    if (d->M > INT32_MAX || d->N > INT32_MAX || d->K > INT32_MAX || d->lda > INT32_MAX || d->ldb > INT32_MAX ||
        d->ldd > INT32_MAX || d->batch > INT32_MAX)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: sizes above 2^31-1 are not supported on CUDA yet", fn);
    CML_TRY(cml__cuda_activate(ctx));
    cublasHandle_t h;
    CML_TRY(get_handle(ctx, &h));
    const long long total = d->batch * d->M * d->N;
    float beta = d->beta;
    if (uses_c && C != D) {
        unsigned grid = cml__grid_size(ctx, total, BLOCK);
        gemm_copy_c_kernel<<<grid, BLOCK, 0, cml__stream(ctx)>>>((float *)D, (const float *)C, d->batch, d->M, d->N,
                                                                d->ldc, d->ldd, d->stride_c, d->stride_d);
        CML_TRY(cml__cuda_check_launch(fn, "gemm_copy_c_kernel", "f32", total, grid, BLOCK));
    }
    if (uses_c && C == D && (d->ldc != d->ldd || d->stride_c != d->stride_d))
        return cml__error(CML_ERR_UNSUPPORTED, "%s: C aliasing D with other strides is not supported on CUDA", fn);
    /* column-major: D^T (N x M) = op(B)^T (N x K) op(A)^T (K x M) */
    cublasOperation_t tb = d->op_b == CML_OP_N ? CUBLAS_OP_N : CUBLAS_OP_T;
    cublasOperation_t ta = d->op_a == CML_OP_N ? CUBLAS_OP_N : CUBLAS_OP_T;
    const float alpha = d->alpha;
    /* K = 0: cuBLAS scales D by beta (D = beta C), as the definition asks. */
    long long lda = d->lda > 0 ? d->lda : 1, ldb = d->ldb > 0 ? d->ldb : 1;
    if (d->K == 0) { /* no product: leading dimensions only need to be valid for cuBLAS */
        lda = d->op_a == CML_OP_N ? 1 : d->M;
        ldb = d->op_b == CML_OP_N ? d->N : 1;
    }
    cublasStatus_t st = cublasSgemmStridedBatched(
        h, tb, ta, (int)d->N, (int)d->M, (int)d->K, &alpha, (const float *)B, (int)ldb, d->stride_b,
        (const float *)A, (int)lda, d->stride_a, &beta, (float *)D, (int)d->ldd, d->stride_d, (int)d->batch);
    if (st != CUBLAS_STATUS_SUCCESS) return cublas_error(st, "cublasSgemmStridedBatched");
    if (d->bias || d->epilogue != CML_EPILOGUE_NONE) {
        unsigned grid = cml__grid_size(ctx, total, BLOCK);
        gemm_epilogue_kernel<<<grid, BLOCK, 0, cml__stream(ctx)>>>((float *)D, (const float *)d->bias,
                                                                   (int)d->epilogue, d->batch, d->M, d->N, d->ldd,
                                                                   d->stride_d);
        CML_TRY(cml__cuda_check_launch(fn, "gemm_epilogue_kernel", "f32", total, grid, BLOCK));
    }
    return CML_OK;
}
