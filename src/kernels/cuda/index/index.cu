/* CUDA index_select and gather along the middle axis of (outer, n, inner),
 * forward and backward.
 *
 * Forwards copy raw elements (exact for every dtype), one thread per output
 * element. Backwards are deterministic without float atomics: one thread per
 * destination (outer, row of dx, inner column) for index_select — it scans
 * idx in increasing j and adds the dy rows that land on its row — and one
 * thread per (outer, inner column) for gather, which walks j in increasing
 * order (a column only ever receives from itself). The order of additions is
 * the CPU's, so results match it bit for bit in f32.
 * Index values live on the device: a bad one is skipped and the lowest
 * flat position holding one is recorded in a workspace flag (integer
 * atomicMin: the same answer whatever the order); the entry point copies the
 * flag back (waiting for the stream) and returns CML_ERR_INVALID_ARG naming
 * it, as the CPU does. Unlike the CPU, outputs are written then for the good
 * indices. */
#include <stdint.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define BLOCK 256
#define NO_BAD 0xFFFFFFFFFFFFFFFFull

template <int ES> struct bytes_of { unsigned char b[ES]; };

static __device__ __forceinline__ bool bad_index(long long v, long long n_src) { return v < 0 || v >= n_src; }

template <int ES>
static __global__ void index_select_fwd_kernel(void *y, const void *x, const int64_t *idx, long long outer,
                                               long long n_src, long long n_idx, long long inner,
                                               unsigned long long *bad) {
    typedef bytes_of<ES> E;
    const long long total = outer * n_idx * inner;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long i = e % inner, j = (e / inner) % n_idx, o = e / (inner * n_idx);
        long long src = idx[j];
        if (bad_index(src, n_src)) {
            atomicMin(bad, (unsigned long long)j);
            continue;
        }
        ((E *)y)[e] = ((const E *)x)[(o * n_src + src) * inner + i];
    }
}

/* v rounded to dtype dt's precision (the CPU stores after every add). */
static __device__ __forceinline__ float round_dt(float v, int dt) {
    if (dt == CML_F16) return cml__f16_to_f32(cml__f32_to_f16(v));
    if (dt == CML_BF16) return cml__bf16_to_f32(cml__f32_to_bf16(v));
    return v;
}

/* One thread per dx element (o, r, i): dx += the dy[o, j, i] with idx[j] == r, in increasing j. */
static __global__ void index_select_bwd_kernel(void *dx, const void *dy, const int64_t *idx, int dt, long long outer,
                                               long long n_src, long long n_idx, long long inner,
                                               unsigned long long *bad) {
    const long long total = outer * n_src * inner;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long i = e % inner, r = (e / inner) % n_src, o = e / (inner * n_src);
        float acc = 0.0f;
        bool any = false;
        for (long long j = 0; j < n_idx; j++) {
            long long v = idx[j];
            if (bad_index(v, n_src)) {
                if (e == 0) atomicMin(bad, (unsigned long long)j);
                continue;
            }
            if (v != r) continue;
            if (!any) acc = cml__load_f32(dx, dt, e);
            any = true;
            acc = round_dt(acc + cml__load_f32(dy, dt, (o * n_idx + j) * inner + i), dt);
        }
        if (any) cml__store_f32(dx, dt, e, acc);
    }
}

template <int ES>
static __global__ void gather_fwd_kernel(void *y, const void *x, const int64_t *idx, long long outer, long long n_src,
                                         long long n_idx, long long inner, unsigned long long *bad) {
    typedef bytes_of<ES> E;
    const long long total = outer * n_idx * inner;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long i = e % inner, o = e / (inner * n_idx);
        long long src = idx[e];
        if (bad_index(src, n_src)) {
            atomicMin(bad, (unsigned long long)e);
            continue;
        }
        ((E *)y)[e] = ((const E *)x)[(o * n_src + src) * inner + i];
    }
}

/* One thread per (o, i) column: dx[o, idx[o,j,i], i] += dy[o,j,i] for j in increasing order. */
static __global__ void gather_bwd_kernel(void *dx, const void *dy, const int64_t *idx, int dt, long long outer,
                                         long long n_src, long long n_idx, long long inner, unsigned long long *bad) {
    const long long total = outer * inner;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < total;
         c += (long long)gridDim.x * blockDim.x) {
        long long i = c % inner, o = c / inner;
        for (long long j = 0; j < n_idx; j++) {
            long long s = (o * n_idx + j) * inner + i, v = idx[s];
            if (bad_index(v, n_src)) {
                atomicMin(bad, (unsigned long long)s);
                continue;
            }
            long long d = (o * n_src + v) * inner + i;
            cml__store_f32(dx, dt, d, cml__load_f32(dx, dt, d) + cml__load_f32(dy, dt, s));
        }
    }
}

/* ---- launches and entry points (arguments validated by src/kernels/index.c) ---- */

static cml_status flag_init(cml_ctx *ctx, const char *fn, unsigned long long **bad) {
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, sizeof(unsigned long long)));
    *bad = (unsigned long long *)ws;
    CML_CUDA_TRY(fn, cudaMemsetAsync(ws, 0xFF, sizeof(unsigned long long), cml__stream(ctx)));
    return CML_OK;
}

/* Copies the flag back (waits for the stream); CML_ERR_INVALID_ARG naming the first bad position. */
static cml_status flag_check(cml_ctx *ctx, const char *fn, const unsigned long long *bad_dev, const int64_t *idx,
                             int64_t n_src) {
    unsigned long long bad = 0;
    CML_TRY(cml__cuda_memcpy(ctx, &bad, bad_dev, sizeof bad, true, fn));
    if (bad == NO_BAD) return CML_OK;
    int64_t v = 0;
    CML_TRY(cml__cuda_memcpy(ctx, &v, idx + bad, sizeof v, true, fn));
    return cml__error(CML_ERR_INVALID_ARG, "%s: idx[%lld]=%lld must be in [0, n_src=%lld)", fn, (long long)bad,
                      (long long)v, (long long)n_src);
}

static cml_status index_cuda(cml_ctx *ctx, const char *fn, bool gather, bool backward, void *out, const void *in,
                             const int64_t *idx, int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                             cml_dtype dtype) {
    if (outer * inner * n_idx == 0) return CML_OK;
    if (backward) CML_TRY(cml__cuda_check_float_dtype(fn, "dtype", dtype));
    CML_TRY(cml__cuda_activate(ctx));
    unsigned long long *bad = NULL;
    CML_TRY(flag_init(ctx, fn, &bad));
    cudaStream_t s = cml__stream(ctx);
    const char *kernel;
    long long work;
    unsigned grid;
    if (backward) {
        work = gather ? outer * inner : outer * n_src * inner;
        grid = cml__grid_size(ctx, work, BLOCK);
        kernel = gather ? "gather_bwd_kernel" : "index_select_bwd_kernel";
        if (gather) gather_bwd_kernel<<<grid, BLOCK, 0, s>>>(out, in, idx, (int)dtype, outer, n_src, n_idx, inner, bad);
        else index_select_bwd_kernel<<<grid, BLOCK, 0, s>>>(out, in, idx, (int)dtype, outer, n_src, n_idx, inner, bad);
    } else {
        work = outer * n_idx * inner;
        grid = cml__grid_size(ctx, work, BLOCK);
        kernel = gather ? "gather_fwd_kernel" : "index_select_fwd_kernel";
#define FWD(ES)                                                                                                   \
    (gather ? gather_fwd_kernel<ES><<<grid, BLOCK, 0, s>>>(out, in, idx, outer, n_src, n_idx, inner, bad)          \
            : index_select_fwd_kernel<ES><<<grid, BLOCK, 0, s>>>(out, in, idx, outer, n_src, n_idx, inner, bad))
        switch (cml_dtype_size(dtype)) {
        case 1: FWD(1); break;
        case 2: FWD(2); break;
        case 4: FWD(4); break;
        default: FWD(8); break;
        }
#undef FWD
    }
    CML_TRY(cml__cuda_check_launch(fn, kernel, cml_dtype_name(dtype), work, grid, BLOCK));
    return flag_check(ctx, fn, bad, idx, n_src);
}

extern "C" cml_status cml__index_select_fwd_cuda(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                                                 int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                                 cml_dtype dtype) {
    return index_cuda(ctx, "cml_index_select_fwd", false, false, y, x, idx, outer, n_src, n_idx, inner, dtype);
}

extern "C" cml_status cml__index_select_bwd_cuda(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                                                 int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                                 cml_dtype dtype) {
    return index_cuda(ctx, "cml_index_select_bwd", false, true, dx, dy, idx, outer, n_src, n_idx, inner, dtype);
}

extern "C" cml_status cml__gather_fwd_cuda(cml_ctx *ctx, void *y, const void *x, const int64_t *idx, int64_t outer,
                                           int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype) {
    return index_cuda(ctx, "cml_gather_fwd", true, false, y, x, idx, outer, n_src, n_idx, inner, dtype);
}

extern "C" cml_status cml__gather_bwd_cuda(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                                           int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                           cml_dtype dtype) {
    return index_cuda(ctx, "cml_gather_bwd", true, true, dx, dy, idx, outer, n_src, n_idx, inner, dtype);
}
