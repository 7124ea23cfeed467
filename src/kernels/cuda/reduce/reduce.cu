/* CUDA reductions over the middle axis of a contiguous (outer, n, inner) buffer:
 * SUM, MEAN, SUMSQ, MAX, MIN, VAR (Welford), ARGMAX, ARGMIN; f32/f16/bf16
 * storage, f32 math.
 *
 * Row path (inner == 1): a group of G threads per row streams it with 16-byte
 * loads, 8 in flight per thread (G = 32 .. 512: about 128 bytes of the row per
 * thread). When there are too few rows to
 * fill the GPU, each row is split into chunks reduced by separate blocks into
 * partial states in the context's workspace; a second kernel merges each
 * row's partials in chunk order. Column path (inner > 1): a block of 32
 * columns x 8 row phases, threads walking rows in order (coalesced across
 * columns), the 8 phases merged in order; long columns split the same way.
 *
 * Deterministic: which thread sees which element and the order of every merge
 * depend only on the shapes, the buffer's alignment and the device's SM
 * count, never on timing; no atomics. ARGMAX/ARGMIN compare (value, index)
 * under a total order (NaN first, then the larger/smaller value, then the
 * lower index), so merge order cannot change the answer, which is the CPU's:
 * the first extreme, or the first NaN. */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define COL_TX 32
#define COL_TY 8
#define UNROLL 8 /* 16-byte loads in flight per thread: 128 bytes */

/* ---- per-op state ------------------------------------------------------------------------ */

struct st_sum { float s; };
struct st_ext { float v; };
struct st_var { long long n; float mean, m2; int pad; };
struct st_arg { float v; int pad; long long i; };

template <int OP> struct rop;

template <> struct rop<CML_REDUCE_SUM> {
    typedef st_sum S;
    static __device__ __forceinline__ S init() { return {0.0f}; }
    static __device__ __forceinline__ void push(S &a, float x, long long) { a.s += x; }
    static __device__ __forceinline__ S merge(S a, S b) { return {a.s + b.s}; }
    static __device__ __forceinline__ float result(S a, long long, int) { return a.s; }
};
template <> struct rop<CML_REDUCE_SUMSQ> : rop<CML_REDUCE_SUM> {
    static __device__ __forceinline__ void push(st_sum &a, float x, long long) { a.s += x * x; }
};
template <> struct rop<CML_REDUCE_MEAN> : rop<CML_REDUCE_SUM> {
    static __device__ __forceinline__ float result(st_sum a, long long n, int) { return a.s / (float)n; }
};

template <int OP> struct rop_ext {
    typedef st_ext S;
    static constexpr bool is_max = OP == CML_REDUCE_MAX;
    static __device__ __forceinline__ S init() { return {is_max ? -INFINITY : INFINITY}; }
    static __device__ __forceinline__ void push(S &a, float x, long long) {
        a.v = is_max ? cml__max_nan(a.v, x) : cml__min_nan(a.v, x);
    }
    static __device__ __forceinline__ S merge(S a, S b) {
        return {is_max ? cml__max_nan(a.v, b.v) : cml__min_nan(a.v, b.v)};
    }
    static __device__ __forceinline__ float result(S a, long long, int) { return a.v; }
};
template <> struct rop<CML_REDUCE_MAX> : rop_ext<CML_REDUCE_MAX> {};
template <> struct rop<CML_REDUCE_MIN> : rop_ext<CML_REDUCE_MIN> {};

/* Welford: each element updates (count, mean, M2); states merge with Chan et al.'s formula. */
template <> struct rop<CML_REDUCE_VAR> {
    typedef st_var S;
    static __device__ __forceinline__ S init() { return {0, 0.0f, 0.0f, 0}; }
    static __device__ __forceinline__ void push(S &a, float x, long long) {
        a.n++;
        const float d = x - a.mean;
        a.mean += d / (float)a.n;
        a.m2 += d * (x - a.mean);
    }
    static __device__ __forceinline__ S merge(S a, S b) {
        if (b.n == 0) return a;
        if (a.n == 0) return b;
        const long long n = a.n + b.n;
        const float fb = (float)b.n / (float)n, d = b.mean - a.mean;
        S r;
        r.n = n;
        r.mean = a.mean + d * fb;
        r.m2 = a.m2 + b.m2 + d * d * (float)a.n * fb;
        r.pad = 0;
        return r;
    }
    static __device__ __forceinline__ float result(S a, long long n, int correction) {
        return a.m2 / (float)(n - correction);
    }
};

/* (value, index) under a total order, so the result never depends on the merge order. */
template <int OP> struct rop_arg {
    typedef st_arg S;
    static constexpr bool is_max = OP == CML_REDUCE_ARGMAX;
    static __device__ __forceinline__ S init() { return {is_max ? -INFINITY : INFINITY, 0, LLONG_MAX}; }
    static __device__ __forceinline__ bool better(float x, long long j, float v, long long i) {
        const bool xn = x != x, vn = v != v;
        if (xn || vn) return xn && (!vn || j < i);
        if (x != v) return is_max ? x > v : x < v;
        return j < i;
    }
    static __device__ __forceinline__ void push(S &a, float x, long long j) {
        if (better(x, j, a.v, a.i)) {
            a.v = x;
            a.i = j;
        }
    }
    static __device__ __forceinline__ S merge(S a, S b) { return better(b.v, b.i, a.v, a.i) ? b : a; }
    static __device__ __forceinline__ float result(S a, long long, int) { return a.v; }
};
template <> struct rop<CML_REDUCE_ARGMAX> : rop_arg<CML_REDUCE_ARGMAX> {};
template <> struct rop<CML_REDUCE_ARGMIN> : rop_arg<CML_REDUCE_ARGMIN> {};

/* Merges as a functor, so the group reductions inline it. */
template <int OP> struct merge_fn {
    __device__ __forceinline__ typename rop<OP>::S operator()(typename rop<OP>::S a, typename rop<OP>::S b) const {
        return rop<OP>::merge(a, b);
    }
};

template <int OP> struct is_arg_op { static constexpr bool value = OP == CML_REDUCE_ARGMAX || OP == CML_REDUCE_ARGMIN; };

template <int DT, int OP>
static __device__ __forceinline__ void store_result(void *y, long long idx, typename rop<OP>::S a, long long n,
                                                    int correction) {
    if constexpr (is_arg_op<OP>::value) ((long long *)y)[idx] = a.i;
    else cml__st<DT>(y, idx, rop<OP>::result(a, n, correction));
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* Group g = (row, chunk) of a (G, R) block reduces x[row, chunk range); the result goes to
 * y[row] when splits == 1, else to partial[row * splits + chunk]. Grid-stride over groups. */
template <int DT, int OP>
static __global__ void __launch_bounds__(512) reduce_rows_kernel(void *y, typename rop<OP>::S *partial,
                                                                 const void *x, long long groups, long long n,
                                                                 long long chunk, int splits, int correction) {
    typedef typename rop<OP>::S S;
    typedef typename cml__elem<DT>::type T;
    __shared__ S scratch[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long g0 = (long long)blockIdx.x * blockDim.y; g0 < groups; g0 += (long long)gridDim.x * blockDim.y) {
        const long long g = g0 + threadIdx.y;
        S a = rop<OP>::init();
        if (g < groups) {
            const long long row = g / splits, lo = (g % splits) * chunk, hi = lo + chunk < n ? lo + chunk : n;
            const T *xr = (const T *)x + row * n;
            cml__stream<DT, 1, false, UNROLL>(nullptr, xr, nullptr, lo, hi, t, G, [&](const float *v, long long j) {
                rop<OP>::push(a, v[0], j);
                return 0.0f;
            });
        }
        a = cml__group_reduce_t(a, G, scratch, merge_fn<OP>());
        if (t == 0 && g < groups) {
            if (splits == 1) store_result<DT, OP>(y, g, a, n, correction);
            else partial[g] = a;
        }
        if (G > 32) __syncthreads(); /* scratch is reused by the next iteration */
    }
}

/* Block (32, 8): columns [tile*32, +32) of outer slice o, rows [lo, hi) of the chunk
 * blockIdx.y, the 8 row phases merged in order. */
template <int DT, int OP>
static __global__ void __launch_bounds__(COL_TX *COL_TY)
    reduce_cols_kernel(void *y, typename rop<OP>::S *partial, const void *x, long long n, long long inner,
                       long long tiles, long long rchunk, int splits, int correction) {
    typedef typename rop<OP>::S S;
    __shared__ S sm[COL_TY][COL_TX];
    const long long o = blockIdx.x / tiles, c = (blockIdx.x % tiles) * COL_TX + threadIdx.x;
    const long long lo = (long long)blockIdx.y * rchunk, hi = lo + rchunk < n ? lo + rchunk : n;
    S a = rop<OP>::init();
    if (c < inner) {
        const long long base = o * n * inner + c;
#pragma unroll 4
        for (long long j = lo + threadIdx.y; j < hi; j += COL_TY) rop<OP>::push(a, cml__ld<DT>(x, base + j * inner), j);
    }
    sm[threadIdx.y][threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.y == 0 && c < inner) {
        for (int k = 1; k < COL_TY; k++) a = rop<OP>::merge(a, sm[k][threadIdx.x]);
        const long long out = o * inner + c;
        if (splits == 1) store_result<DT, OP>(y, out, a, n, correction);
        else partial[out * splits + blockIdx.y] = a;
    }
}

/* One warp per output: lanes merge partials lane, lane + 32, ... in order, then the warp's
 * 32 states pairwise (block (32, 8)). */
template <int DT, int OP>
static __global__ void __launch_bounds__(256) reduce_finalize_kernel(void *y, const typename rop<OP>::S *partial,
                                                                     long long outputs, int splits, long long n,
                                                                     int correction) {
    typedef typename rop<OP>::S S;
    const long long out = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    S a = rop<OP>::init();
    if (out < outputs)
        for (int s = threadIdx.x; s < splits; s += 32) a = rop<OP>::merge(a, partial[out * splits + s]);
    a = cml__group_reduce_t(a, 32, (S *)nullptr, merge_fn<OP>());
    if (threadIdx.x == 0 && out < outputs) store_result<DT, OP>(y, out, a, n, correction);
}

/* ---- launches ------------------------------------------------------------------------------ */

static const char FN[] = "cml_reduce";

static cml_status launched(const char *kernel, cml_dtype dt, long long n, unsigned grid, unsigned block) {
    return cml__cuda_check_launch(FN, kernel, cml_dtype_name(dt), n, grid, block);
}

template <int DT, int OP>
static cml_status finalize_launch(cml_ctx *ctx, void *y, const void *partial, long long outputs, int splits,
                                  long long n, int correction) {
    typedef typename rop<OP>::S S;
    const unsigned grid = (unsigned)((outputs + 7) / 8);
    reduce_finalize_kernel<DT, OP><<<grid, dim3(32, 8), 0, cml__stream(ctx)>>>(y, (const S *)partial, outputs,
                                                                              splits, n, correction);
    return launched("reduce_finalize_kernel", (cml_dtype)DT, outputs * splits, grid, 256);
}

template <int DT, int OP>
static cml_status rows_launch(cml_ctx *ctx, void *y, const void *x, long long rows, long long n, int correction) {
    typedef typename rop<OP>::S S;
    const int sms = cml__cuda_sm_count(ctx->device.index) > 0 ? cml__cuda_sm_count(ctx->device.index) : 132;
    /* ~128 bytes per thread (one batch of loads), 32..512 threads per row, blocks of >= 256 threads */
    int G = cml__pow2_at_least((n * (long long)sizeof(typename cml__elem<DT>::type) + 127) / 128, 512);
    if (G < 32) G = 32;
    const int R = G >= 256 ? 1 : 256 / G;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reduce_rows_kernel<DT, OP>, G * R, 0) != cudaSuccess ||
        per_sm < 1) {
        (void)cudaGetLastError();
        per_sm = 1;
    }
    const long long resident = (long long)sms * per_sm; /* blocks that run at once */
    /* Few long rows: split them so that one wave of blocks fills the GPU. */
    long long splits = 1, chunk = n;
    if (R == 1 && rows < resident && n >= 4 * 4096) {
        splits = (resident + rows - 1) / rows;
        if (splits > n / 4096) splits = n / 4096;
        chunk = ((n + splits - 1) / splits + 63) / 64 * 64; /* chunks start on 16-byte boundaries */
        splits = (n + chunk - 1) / chunk;
    }
    void *ws = NULL;
    if (splits > 1) CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(rows * splits) * sizeof(S)));
    const long long groups = rows * splits, blocks = (groups + R - 1) / R;
    const unsigned grid = (unsigned)(blocks < resident * 8 ? blocks : resident * 8);
    reduce_rows_kernel<DT, OP><<<grid, dim3(G, R), 0, cml__stream(ctx)>>>(y, (S *)ws, x, groups, n, chunk,
                                                                         (int)splits, correction);
    CML_TRY(launched("reduce_rows_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R)));
    if (splits == 1) return CML_OK;
    return finalize_launch<DT, OP>(ctx, y, ws, rows, (int)splits, n, correction);
}

template <int DT, int OP>
static cml_status cols_launch(cml_ctx *ctx, void *y, const void *x, long long outer, long long n, long long inner,
                              int correction) {
    typedef typename rop<OP>::S S;
    const int sms = cml__cuda_sm_count(ctx->device.index) > 0 ? cml__cuda_sm_count(ctx->device.index) : 132;
    const long long tiles = (inner + COL_TX - 1) / COL_TX, blocks = outer * tiles;
    if (blocks > INT_MAX)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: %lld column tiles exceed the CUDA grid", FN, blocks);
    const long long want = (long long)sms * 8; /* 8 blocks of 256 threads fill an SM */
    long long splits = 1, rchunk = n;
    if (blocks < want && n >= 2 * 64) {
        splits = (want + blocks - 1) / blocks;
        if (splits > n / 64) splits = n / 64;
        if (splits > 65535) splits = 65535;
        rchunk = (n + splits - 1) / splits;
        splits = (n + rchunk - 1) / rchunk;
    }
    void *ws = NULL;
    if (splits > 1) CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(outer * inner * splits) * sizeof(S)));
    const dim3 grid((unsigned)blocks, (unsigned)splits);
    reduce_cols_kernel<DT, OP><<<grid, dim3(COL_TX, COL_TY), 0, cml__stream(ctx)>>>(y, (S *)ws, x, n, inner, tiles,
                                                                                   rchunk, (int)splits, correction);
    CML_TRY(launched("reduce_cols_kernel", (cml_dtype)DT, outer * n * inner, (unsigned)(blocks * splits), 256));
    if (splits == 1) return CML_OK;
    return finalize_launch<DT, OP>(ctx, y, ws, outer * inner, (int)splits, n, correction);
}

template <int DT, int OP>
static cml_status reduce_launch(cml_ctx *ctx, void *y, const void *x, long long outer, long long n, long long inner,
                                int correction) {
    if (inner == 1) return rows_launch<DT, OP>(ctx, y, x, outer, n, correction);
    return cols_launch<DT, OP>(ctx, y, x, outer, n, inner, correction);
}

template <int DT>
static cml_status reduce_dispatch(cml_ctx *ctx, cml_reduce_op op, void *y, const void *x, long long outer,
                                  long long n, long long inner, int correction) {
    switch (op) {
    case CML_REDUCE_SUM: return reduce_launch<DT, CML_REDUCE_SUM>(ctx, y, x, outer, n, inner, correction);
    case CML_REDUCE_MEAN: return reduce_launch<DT, CML_REDUCE_MEAN>(ctx, y, x, outer, n, inner, correction);
    case CML_REDUCE_SUMSQ: return reduce_launch<DT, CML_REDUCE_SUMSQ>(ctx, y, x, outer, n, inner, correction);
    case CML_REDUCE_MAX: return reduce_launch<DT, CML_REDUCE_MAX>(ctx, y, x, outer, n, inner, correction);
    case CML_REDUCE_MIN: return reduce_launch<DT, CML_REDUCE_MIN>(ctx, y, x, outer, n, inner, correction);
    case CML_REDUCE_VAR: return reduce_launch<DT, CML_REDUCE_VAR>(ctx, y, x, outer, n, inner, correction);
    case CML_REDUCE_ARGMAX: return reduce_launch<DT, CML_REDUCE_ARGMAX>(ctx, y, x, outer, n, inner, correction);
    default: return reduce_launch<DT, CML_REDUCE_ARGMIN>(ctx, y, x, outer, n, inner, correction);
    }
}

/* ---- entry point (arguments validated by src/kernels/reduce.c) ----------------------------- */

extern "C" cml_status cml__reduce_cuda(cml_ctx *ctx, cml_reduce_op op, void *y, cml_dtype y_dtype, const void *x,
                                       cml_dtype x_dtype, int64_t outer, int64_t n, int64_t inner, int correction) {
    CML_TRY(cml__cuda_check_float_dtype(FN, "x_dtype", x_dtype));
    if (outer == 0 || inner == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    switch (x_dtype) {
    case CML_F16: return reduce_dispatch<CML_F16>(ctx, op, y, x, outer, n, inner, correction);
    case CML_BF16: return reduce_dispatch<CML_BF16>(ctx, op, y, x, outer, n, inner, correction);
    default: return reduce_dispatch<CML_F32>(ctx, op, y, x, outer, n, inner, correction);
    }
}
