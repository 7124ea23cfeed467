/* CUDA error checks for kernel files: every CUDA call and every launch is
 * checked, and a failure becomes CML_ERR_CUDA naming the public function,
 * the call (or the kernel and its shape) and CUDA's error string. */
#ifndef CML_KERNELS_CUDA_COMMON_CHECK_CUH
#define CML_KERNELS_CUDA_COMMON_CHECK_CUH

#include <cuda_runtime.h>

#include "camel/dtype.h"
#include "runtime/cuda_backend.h"
#include "runtime/ctx_impl.h"
#include "runtime/error.h"

/* Returns from the enclosing function with CML_ERR_CUDA when a CUDA runtime call fails. */
#define CML_CUDA_TRY(fn, call)                                           \
    do {                                                                 \
        cudaError_t cml_cuda_err_ = (call);                              \
        if (cml_cuda_err_ != cudaSuccess)                                \
            return cml__cuda_error((int)cml_cuda_err_, (fn), #call);     \
    } while (0)

/* After a <<<...>>> launch: returns CML_ERR_CUDA naming the kernel, its dtypes
 * and what it was launched on ("cml_unary: launching unary_dense_kernel<bf16>
 * (n=4097, grid=3, block=256) failed: ...") when the launch failed. */
static inline cml_status cml__cuda_check_launch(const char *fn, const char *kernel, const char *dtypes, long long n,
                                                unsigned grid, unsigned block) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CML_OK;
    return cml__error(CML_ERR_CUDA, "%s: launching %s<%s> (n=%lld, grid=%u, block=%u) failed: %s (%s)", fn, kernel,
                      dtypes, n, grid, block, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The storage dtypes the CUDA elementwise kernels compute on (f32 math): f32, f16, bf16. */
static inline bool cml__cuda_float_dtype(cml_dtype dt) { return dt == CML_F32 || dt == CML_F16 || dt == CML_BF16; }

static inline cml_status cml__cuda_check_float_dtype(const char *fn, const char *arg, cml_dtype dt) {
    if (cml__cuda_float_dtype(dt)) return CML_OK;
    return cml__error(CML_ERR_UNSUPPORTED, "%s: %s=%s is not supported on CUDA yet (f32, f16 and bf16 are)", fn, arg,
                      cml_dtype_name(dt));
}

/* Outputs of f32-math kernels may also be u8 (comparison masks), stored like the CPU stores them. */
static inline cml_status cml__cuda_check_out_dtype(const char *fn, const char *arg, cml_dtype dt) {
    if (cml__cuda_float_dtype(dt) || dt == CML_U8) return CML_OK;
    return cml__error(CML_ERR_UNSUPPORTED, "%s: %s=%s is not supported on CUDA yet (f32, f16, bf16 and u8 are)", fn,
                      arg, cml_dtype_name(dt));
}

static inline cudaStream_t cml__stream(const cml_ctx *ctx) { return (cudaStream_t)ctx->stream; }

/* Blocks for a grid-stride loop over `work` items with `block` threads each:
 * enough to fill every multiprocessor (full occupancy at 256 threads), no more. */
static inline unsigned cml__grid_size(const cml_ctx *ctx, long long work, unsigned block) {
    long long want = (work + block - 1) / block;
    int sms = cml__cuda_sm_count(ctx->device.index);
    long long cap = (long long)(sms > 0 ? sms : 132) * (2048 / block);
    if (want > cap) want = cap;
    return (unsigned)(want > 0 ? want : 1);
}

#endif
