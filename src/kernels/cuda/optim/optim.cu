/* CUDA optimizer updates (SGD, Adam/AdamW) and dropout, one thread per element.
 *
 * The arithmetic (optim_math.cuh) follows the CPU's (src/kernels/cpu/optim.c,
 * dropout.c) step by step with explicitly rounded operations (no fused
 * multiply-adds), and the bias corrections are computed on the host in double
 * exactly as there, so the GPU gives the CPU's bits. Dropout draws word i of
 * the Philox stream (seed, offset) — word i % 4 of block offset + i / 4, keyed
 * by the seed — with the same cml_u32_to_unit as the CPU, so the masks are
 * identical. */
#include <math.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/optim/optim_math.cuh"

#define BLOCK 256

static __global__ void sgd_kernel(float *param, const float *grad, float *buf, long long n,
                                  const cml__sgd_consts k) {
    cml__pdl_entry();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float b = k.momentum != 0.0f ? buf[i] : 0.0f;
        param[i] = cml__sgd_elem(k, param[i], grad[i], b);
        if (k.momentum != 0.0f) buf[i] = b;
    }
}

static __global__ void adam_kernel(float *param, const float *grad, float *m, float *v, long long n,
                                   const cml__adam_consts k) {
    cml__pdl_entry();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i];
        param[i] = cml__adam_elem(k, param[i], grad[i], mi, vi);
        m[i] = mi;
        v[i] = vi;
    }
}

extern "C" cml_status cml__sgd_update_cuda(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf,
                                           int64_t n, float lr, float momentum, bool nesterov, float weight_decay,
                                           bool first_step) {
    if (n == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    const cml__sgd_consts k = {lr, momentum, weight_decay, nesterov, first_step};
    const unsigned grid = cml__grid_size(ctx, n, BLOCK);
    cml__launch(sgd_kernel, grid, BLOCK, 0, cml__stream(ctx), param, grad, momentum_buf, n, k);
    return cml__cuda_check_launch("cml_sgd_update", "sgd_kernel", "f32", n, grid, BLOCK);
}

extern "C" cml_status cml__adam_update_cuda(cml_ctx *ctx, float *param, const float *grad, float *m, float *v,
                                            int64_t n, float lr, float beta1, float beta2, float eps,
                                            float weight_decay, bool decoupled, int64_t step) {
    if (n == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    /* the CPU's host-side constants, computed the same way */
    const cml__adam_consts k = cml__adam_consts_of(lr, beta1, beta2, eps, weight_decay, decoupled, step);
    const unsigned grid = cml__grid_size(ctx, n, BLOCK);
    cml__launch(adam_kernel, grid, BLOCK, 0, cml__stream(ctx), param, grad, m, v, n, k);
    return cml__cuda_check_launch("cml_adam_update", "adam_kernel", "f32", n, grid, BLOCK);
}

/* ---- dropout ---------------------------------------------------------------------- */

static __device__ __forceinline__ void philox4x32(uint32_t out[4], uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                  uint32_t k0, uint32_t k1) {
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* One thread per Philox block (4 elements). */
static __global__ void dropout_kernel(void *y, uint8_t *mask, const void *x, int dt, long long n, float p,
                                      float scale, unsigned long long seed, unsigned long long offset) {
    cml__pdl_entry();
    const long long blocks = (n + 3) / 4;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < blocks;
         b += (long long)gridDim.x * blockDim.x) {
        unsigned long long blk = offset + (unsigned long long)b;
        uint32_t w[4];
        philox4x32(w, (uint32_t)blk, (uint32_t)(blk >> 32), 0, 0, (uint32_t)seed, (uint32_t)(seed >> 32));
        for (int k = 0; k < 4; k++) {
            long long i = b * 4 + k;
            if (i >= n) break;
            bool keep = (float)(w[k] >> 8) * (1.0f / 16777216.0f) >= p;
            cml__store_f32(y, dt, i, keep ? __fmul_rn(cml__load_f32(x, dt, i), scale) : 0.0f);
            if (mask) mask[i] = keep;
        }
    }
}

extern "C" cml_status cml__dropout_fwd_cuda(cml_ctx *ctx, void *y, uint8_t *mask, const void *x, int64_t n,
                                            cml_dtype dtype, float p, uint64_t seed, uint64_t offset) {
    static const char fn[] = "cml_dropout_fwd";
    CML_TRY(cml__cuda_check_float_dtype(fn, "dtype", dtype));
    if (n == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    const float scale = 1.0f / (1.0f - p);
    const unsigned grid = cml__grid_size(ctx, (n + 3) / 4, BLOCK);
    cml__launch(dropout_kernel, grid, BLOCK, 0, cml__stream(ctx), y, mask, x, (int)dtype, n, p, scale, seed, offset);
    return cml__cuda_check_launch(fn, "dropout_kernel", cml_dtype_name(dtype), n, grid, BLOCK);
}
