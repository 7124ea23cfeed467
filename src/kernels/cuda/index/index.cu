/* CUDA index_select and gather along the middle axis of (outer, n, inner),
 * forward and backward.
 *
 * Forwards copy raw elements (exact for every dtype), one thread per output
 * element. Backwards are deterministic without float atomics, and add in the
 * CPU's order (per destination element, increasing j, rounded to the dtype
 * after every add), so results match it bit for bit in f32:
 *   - index_select (the embedding backward): the positions j are sorted by
 *     idx[j] with a stable radix sort (one block; ties keep increasing j), then
 *     one warp per run of equal indices adds that run's dy rows, in order, into
 *     its dx row. O(n_idx * inner) work instead of a scan of all indices per
 *     source row; problems whose sizes do not fit 32-bit keys use that scan
 *     (one thread per dx element), which needs no workspace;
 *   - gather: one thread per (outer, inner column), walking j in increasing
 *     order (a column only ever receives from itself).
 * Index values live on the device: a bad one is skipped (its output
 * elements are left as they were) and the lowest flat position holding one is
 * flagged in the context's bad-index word (runtime/cuda_index_check.h: an
 * integer atomicMin, the same answer whatever the order). The call returns
 * without waiting; the next wait for the stream (cml_ctx_synchronize, a
 * synchronous copy) returns CML_ERR_INVALID_ARG naming the position and the
 * value, with the CPU's message (CML_SYNC_CHECKS=1: the call itself waits and
 * returns it). Unlike the CPU, the good indices' outputs are written. */
#include <stdint.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda_index_check.h"

#define BLOCK 256
#define SORT_THREADS 256 /* the radix sort's one block */
#define RADIX_BITS 4
#define RADIX_BUCKETS 16
#define RUN_COLS 64 /* columns per warp in the sorted backward: 2 per lane */

template <int ES> struct bytes_of { unsigned char b[ES]; };

static __device__ __forceinline__ bool bad_index(long long v, long long n_src) { return v < 0 || v >= n_src; }

template <int ES>
static __global__ void index_select_fwd_kernel(void *y, const void *x, const int64_t *idx, long long outer,
                                               long long n_src, long long n_idx, long long inner,
                                               cml__index_flag bad) {
    cml__pdl_entry();
    typedef bytes_of<ES> E;
    const long long total = outer * n_idx * inner;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long i = e % inner, j = (e / inner) % n_idx, o = e / (inner * n_idx);
        long long src = idx[j];
        if (bad_index(src, n_src)) {
            cml__index_flag_bad(bad, j);
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

/* One thread per dx element (o, r, i): dx += the dy[o, j, i] with idx[j] == r, in increasing j
 * (O(n_src n_idx inner): only for sizes the sorted path cannot index with 32 bits). */
static __global__ void index_select_bwd_kernel(void *dx, const void *dy, const int64_t *idx, int dt, long long outer,
                                               long long n_src, long long n_idx, long long inner,
                                               cml__index_flag bad) {
    cml__pdl_entry();
    const long long total = outer * n_src * inner;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long i = e % inner, r = (e / inner) % n_src, o = e / (inner * n_src);
        float acc = 0.0f;
        bool any = false;
        for (long long j = 0; j < n_idx; j++) {
            long long v = idx[j];
            if (bad_index(v, n_src)) {
                if (e == 0) cml__index_flag_bad(bad, j);
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

/* Stable LSD radix sort (RADIX_BITS per pass) of the positions j by key = idx[j]
 * (n_src for a bad index, which is flagged), in one block: each thread counts
 * the digits of its contiguous chunk, a scan over (digit, thread) gives every
 * chunk its output offsets, and each thread scatters its chunk in order, so
 * equal keys keep increasing j. Passes alternate between the (keys, vals) buffers
 * a and b; the result is in a after an even number of passes, else in b. */
static __global__ void __launch_bounds__(SORT_THREADS)
    index_sort_kernel(const int64_t *idx, long long n_idx, long long n_src, int bits, unsigned *keys_a,
                      unsigned *vals_a, unsigned *keys_b, unsigned *vals_b, cml__index_flag bad) {
    cml__pdl_entry();
    __shared__ unsigned hist[RADIX_BUCKETS * SORT_THREADS]; /* (digit, thread), digit-major */
    __shared__ unsigned warp_total[SORT_THREADS / 32];
    const int t = threadIdx.x, lane = t % 32, w = t / 32;
    for (long long j = t; j < n_idx; j += SORT_THREADS) {
        const long long v = idx[j];
        const bool is_bad = bad_index(v, n_src);
        if (is_bad) cml__index_flag_bad(bad, j);
        keys_a[j] = is_bad ? (unsigned)n_src : (unsigned)v;
        vals_a[j] = (unsigned)j;
    }
    const long long per = (n_idx + SORT_THREADS - 1) / SORT_THREADS;
    const long long lo = t * per < n_idx ? t * per : n_idx, hi = lo + per < n_idx ? lo + per : n_idx;
    unsigned *ks = keys_a, *vs = vals_a, *kd = keys_b, *vd = vals_b;
    for (int shift = 0; shift < bits; shift += RADIX_BITS) {
#pragma unroll
        for (int d = 0; d < RADIX_BUCKETS; d++) hist[d * SORT_THREADS + t] = 0;
        __syncthreads(); /* keys of the previous pass (or the initial fill) are visible */
        for (long long j = lo; j < hi; j++) hist[((ks[j] >> shift) & (RADIX_BUCKETS - 1)) * SORT_THREADS + t]++;
        __syncthreads();
        /* exclusive scan of hist in its flat order: RADIX_BUCKETS entries per thread, then across threads */
        unsigned local[RADIX_BUCKETS], run = 0;
#pragma unroll
        for (int k = 0; k < RADIX_BUCKETS; k++) {
            local[k] = run;
            run += hist[t * RADIX_BUCKETS + k];
        }
        unsigned incl = run;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        if (lane == 31) warp_total[w] = incl;
        __syncthreads();
        unsigned before = incl - run;
        for (int k = 0; k < w; k++) before += warp_total[k];
#pragma unroll
        for (int k = 0; k < RADIX_BUCKETS; k++) hist[t * RADIX_BUCKETS + k] = local[k] + before;
        __syncthreads();
        /* scatter the chunk in order; hist (digit, t) is this thread's cursor for the digit */
        for (long long j = lo; j < hi; j++) {
            const unsigned key = ks[j];
            const unsigned dst = hist[((key >> shift) & (RADIX_BUCKETS - 1)) * SORT_THREADS + t]++;
            kd[dst] = key;
            vd[dst] = vs[j];
        }
        __syncthreads(); /* the scatter is done before hist and warp_total are reused */
        unsigned *tk = ks, *tv = vs;
        ks = kd, vs = vd, kd = tk, vd = tv;
    }
}

/* One warp per sorted position that starts a run of equal keys r (< n_src): for its
 * RUN_COLS-column chunks (blockIdx.y strides over (outer, chunk)), dx[o, r, :] += the
 * dy[o, j, :] of the run, in increasing j (the sort kept that order), rounded to the
 * dtype after every add like the CPU. */
static __global__ void index_select_bwd_runs_kernel(void *dx, const void *dy, const unsigned *keys,
                                                    const unsigned *vals, int dt, long long outer, long long n_src,
                                                    long long n_idx, long long inner) {
    cml__pdl_entry();
    const long long pos = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (pos >= n_idx) return;
    const unsigned key = keys[pos];
    if (key >= n_src || (pos > 0 && keys[pos - 1] == key)) return;
    long long end = pos + 1;
    while (end < n_idx && keys[end] == key) end++;
    const long long chunks = (inner + RUN_COLS - 1) / RUN_COLS;
    for (long long oc = blockIdx.y; oc < outer * chunks; oc += gridDim.y) {
        const long long o = oc / chunks, i0 = (oc % chunks) * RUN_COLS + lane;
        const long long dst = (o * n_src + key) * inner;
        float acc[RUN_COLS / 32];
#pragma unroll
        for (int k = 0; k < RUN_COLS / 32; k++)
            acc[k] = i0 + 32 * k < inner ? cml__load_f32(dx, dt, dst + i0 + 32 * k) : 0.0f;
        for (long long q = pos; q < end; q++) {
            const long long src = (o * n_idx + vals[q]) * inner;
#pragma unroll
            for (int k = 0; k < RUN_COLS / 32; k++)
                if (i0 + 32 * k < inner) acc[k] = round_dt(acc[k] + cml__load_f32(dy, dt, src + i0 + 32 * k), dt);
        }
#pragma unroll
        for (int k = 0; k < RUN_COLS / 32; k++)
            if (i0 + 32 * k < inner) cml__store_f32(dx, dt, dst + i0 + 32 * k, acc[k]);
    }
}

template <int ES>
static __global__ void gather_fwd_kernel(void *y, const void *x, const int64_t *idx, long long outer, long long n_src,
                                         long long n_idx, long long inner, cml__index_flag bad) {
    cml__pdl_entry();
    typedef bytes_of<ES> E;
    const long long total = outer * n_idx * inner;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long i = e % inner, o = e / (inner * n_idx);
        long long src = idx[e];
        if (bad_index(src, n_src)) {
            cml__index_flag_bad(bad, e);
            continue;
        }
        ((E *)y)[e] = ((const E *)x)[(o * n_src + src) * inner + i];
    }
}

/* One thread per (o, i) column: dx[o, idx[o,j,i], i] += dy[o,j,i] for j in increasing order. */
static __global__ void gather_bwd_kernel(void *dx, const void *dy, const int64_t *idx, int dt, long long outer,
                                         long long n_src, long long n_idx, long long inner, cml__index_flag bad) {
    cml__pdl_entry();
    const long long total = outer * inner;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < total;
         c += (long long)gridDim.x * blockDim.x) {
        long long i = c % inner, o = c / inner;
        for (long long j = 0; j < n_idx; j++) {
            long long s = (o * n_idx + j) * inner + i, v = idx[s];
            if (bad_index(v, n_src)) {
                cml__index_flag_bad(bad, s);
                continue;
            }
            long long d = (o * n_src + v) * inner + i;
            cml__store_f32(dx, dt, d, cml__load_f32(dx, dt, d) + cml__load_f32(dy, dt, s));
        }
    }
}

/* ---- launches and entry points (arguments validated by src/kernels/index.c) ---- */

/* Registers the call with the context's bad-index check (runtime/cuda_index_check.h). */
static cml_status flag_begin(cml_ctx *ctx, const char *fn, const int64_t *idx, int64_t n_src, int64_t positions,
                             cml__index_flag *bad) {
    const cml__index_call call = {fn, "idx", idx, n_src, "n_src=", false, 0};
    return cml__index_check_begin(ctx, &call, positions, bad);
}

/* The index_select backward through the sort (see the top of the file). */
static cml_status index_select_bwd_sorted(cml_ctx *ctx, const char *fn, void *dx, const void *dy, const int64_t *idx,
                                          int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                          cml_dtype dtype) {
    const size_t arr = (size_t)n_idx * sizeof(unsigned);
    void *bufs = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &bufs, 4 * arr));
    cml__index_flag bad;
    CML_TRY(flag_begin(ctx, fn, idx, n_src, n_idx, &bad));
    unsigned *ka = (unsigned *)bufs, *va = ka + n_idx, *kb = va + n_idx, *vb = kb + n_idx;
    int bits = 0; /* keys go up to n_src (a bad index) */
    while (bits < 32 && (1ull << bits) <= (unsigned long long)n_src) bits++;
    const int passes = (bits + RADIX_BITS - 1) / RADIX_BITS;
    cudaStream_t s = cml__stream(ctx);
    cml__launch(index_sort_kernel, 1, SORT_THREADS, 0, s, idx, n_idx, n_src, bits, ka, va, kb, vb, bad);
    CML_TRY(cml__cuda_check_launch(fn, "index_sort_kernel", "i64", n_idx, 1, SORT_THREADS));
    const unsigned *keys = passes % 2 ? kb : ka, *vals = passes % 2 ? vb : va;
    const long long warps = BLOCK / 32, pairs = outer * ((inner + RUN_COLS - 1) / RUN_COLS);
    const dim3 grid((unsigned)((n_idx + warps - 1) / warps), (unsigned)(pairs < 65535 ? pairs : 65535));
    cml__launch(index_select_bwd_runs_kernel, grid, BLOCK, 0, s, dx, dy, keys, vals, (int)dtype, outer, n_src, n_idx,
                inner);
    CML_TRY(cml__cuda_check_launch(fn, "index_select_bwd_runs_kernel", cml_dtype_name(dtype), n_idx * inner,
                                   grid.x * grid.y, BLOCK));
    return cml__index_check_end(ctx, fn);
}

static cml_status index_cuda(cml_ctx *ctx, const char *fn, bool gather, bool backward, void *out, const void *in,
                             const int64_t *idx, int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                             cml_dtype dtype) {
    if (outer * inner * n_idx == 0) return CML_OK;
    if (backward) CML_TRY(cml__cuda_check_float_dtype(fn, "dtype", dtype));
    CML_TRY(cml__cuda_activate(ctx));
    if (backward && !gather && n_src < UINT32_MAX && n_idx <= UINT32_MAX)
        return index_select_bwd_sorted(ctx, fn, out, in, idx, outer, n_src, n_idx, inner, dtype);
    cml__index_flag bad;
    CML_TRY(flag_begin(ctx, fn, idx, n_src, gather ? outer * n_idx * inner : n_idx, &bad));
    cudaStream_t s = cml__stream(ctx);
    const char *kernel;
    long long work;
    unsigned grid;
    if (backward) {
        work = gather ? outer * inner : outer * n_src * inner;
        grid = cml__grid_size(ctx, work, BLOCK);
        kernel = gather ? "gather_bwd_kernel" : "index_select_bwd_kernel";
        if (gather) cml__launch(gather_bwd_kernel, grid, BLOCK, 0, s, out, in, idx, (int)dtype, outer, n_src, n_idx,
                                inner, bad);
        else cml__launch(index_select_bwd_kernel, grid, BLOCK, 0, s, out, in, idx, (int)dtype, outer, n_src, n_idx,
                         inner, bad);
    } else {
        work = outer * n_idx * inner;
        grid = cml__grid_size(ctx, work, BLOCK);
        kernel = gather ? "gather_fwd_kernel" : "index_select_fwd_kernel";
#define FWD(ES)                                                                                                   \
    (gather ? cml__launch(gather_fwd_kernel<ES>, grid, BLOCK, 0, s, out, in, idx, outer, n_src, n_idx, inner, bad) \
            : cml__launch(index_select_fwd_kernel<ES>, grid, BLOCK, 0, s, out, in, idx, outer, n_src, n_idx, inner, \
                          bad))
        switch (cml_dtype_size(dtype)) {
        case 1: FWD(1); break;
        case 2: FWD(2); break;
        case 4: FWD(4); break;
        default: FWD(8); break;
        }
#undef FWD
    }
    CML_TRY(cml__cuda_check_launch(fn, kernel, cml_dtype_name(dtype), work, grid, BLOCK));
    return cml__index_check_end(ctx, fn);
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
