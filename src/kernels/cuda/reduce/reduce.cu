/* CUDA reductions over the middle axis of a contiguous (outer, n, inner) buffer:
 * SUM, MEAN, SUMSQ, MAX, MIN, VAR (Welford), ARGMAX, ARGMIN; f32/f16/bf16
 * storage, f32 math.
 *
 * Row path (inner == 1): a group of G threads per row streams it with 16-byte
 * loads, 8 in flight per thread (G = 32 .. 512: about 128 bytes of the row per
 * thread). When there are too few rows to fill the GPU, each row is split into
 * chunks reduced by separate blocks (more than 2 chunks a row: interleaved
 * tiles, see push_interleaved). Column path (inner > 1): a block of 32
 * columns x 8 row phases, threads walking rows in order (coalesced across
 * columns), the 8 phases merged in order; long columns split the same way.
 *
 * Split outputs are finished in the same kernel by the block that arrives last
 * (common/last_arrival.cuh): it merges all the output's partials, stored in the
 * context's workspace, in chunk order. No memset and no second kernel runs per
 * call (the second, ordering kernel cost about 1% of the 1 GiB flat sum: 356 us).
 *
 * Deterministic: which thread sees which element and the order of every merge
 * depend only on the shapes, the buffer's alignment and the device's SM
 * count, never on timing (which block arrives last decides only who merges,
 * not the order); no float atomics. ARGMAX/ARGMIN compare (value, index)
 * under a total order (NaN first, then the larger/smaller value, then the
 * lower index), so merge order cannot change the answer, which is the CPU's:
 * the first extreme, or the first NaN. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/last_arrival.cuh"
#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/common/launch.cuh"
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
/* States of 16-24 bytes: a register cap for more blocks per SM would make them spill. */
template <int OP> struct big_state { static constexpr bool value = is_arg_op<OP>::value || OP == CML_REDUCE_VAR; };

template <int DT, int OP>
static __device__ __forceinline__ void store_result(void *y, long long idx, typename rop<OP>::S a, long long n,
                                                    int correction) {
    if constexpr (is_arg_op<OP>::value) ((long long *)y)[idx] = a.i;
    else cml__st<DT>(y, idx, rop<OP>::result(a, n, correction));
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* A state loaded past L1 (another SM wrote it during this kernel; an earlier merge on this SM
 * may hold the line in L1 from before it was written). */
template <typename S> static __device__ __forceinline__ S load_cg(const S *p) {
    static_assert(sizeof(S) % 4 == 0, "states are made of 4-byte words");
    unsigned w[sizeof(S) / 4];
#pragma unroll
    for (int i = 0; i < (int)(sizeof(S) / 4); i++) w[i] = __ldcg((const unsigned *)p + i);
    S v;
    memcpy(&v, w, sizeof(S));
    return v;
}

/* The body of a row chunk in the interleaved layout: the row's 16-byte words in tiles of G x U
 * words (one batch of the group), chunk c taking tiles c, c + splits, ...; chunk 0 also takes
 * the scalar head (before the first 16-byte boundary) and tail. The blocks of a row then read
 * neighbouring tiles at any moment, where contiguous chunks have every block at the same offset
 * into its own chunk (1 GiB flat sum, 264 chunks: 3021-3032 GB/s contiguous, 3083-3091
 * interleaved, session 7). */
template <int DT, int OP, int U>
static __device__ __forceinline__ void push_interleaved(typename rop<OP>::S &a, const void *row, long long n, int c,
                                                        int splits, int t, int G) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    const long long head = cml__head_len<DT>(row, 0, n), nw = (n - head) / V;
    if (c == 0) {
        for (long long j = t; j < head; j += G) rop<OP>::push(a, cml__ld<DT>(row, j), j);
        for (long long j = head + nw * V + t; j < n; j += G) rop<OP>::push(a, cml__ld<DT>(row, j), j);
    }
    const uint4 *w = (const uint4 *)((const T *)row + head);
    const long long tile = (long long)G * U;
    for (long long i0 = c * tile + t; i0 < nw; i0 += (long long)splits * tile) {
        uint4 buf[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = i0 + (long long)u * G;
            buf[u] = i < nw ? __ldg(w + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = i0 + (long long)u * G;
            if (i >= nw) break;
            float v[V];
            cml__unpack16<DT>(buf[u], v);
#pragma unroll
            for (int e = 0; e < V; e++) rop<OP>::push(a, v[e], head + i * V + e);
        }
    }
}

/* Group g = (row, chunk) of a (G, R) block reduces chunk g % splits of row g / splits (a range
 * of `chunk` elements, or with ILV the interleaved tiles above); the result goes to y[row] when
 * splits == 1. Split rows (R == 1 then): each block stores its partial and the row's last block
 * merges them. Grid-stride over groups. At most 64 registers (2 blocks of 512 per SM) for the
 * 4-byte states; the 16-24 byte ones would spill under that cap. */
template <int DT, int OP, bool ILV>
static __global__ void __launch_bounds__(512, big_state<OP>::value ? 1 : 2)
    reduce_rows_kernel(void *y, typename rop<OP>::S *partial, unsigned *arrivals, const void *x, long long groups,
                       long long n, long long chunk, int splits, int correction) {
    cml__pdl_entry();
    typedef typename rop<OP>::S S;
    typedef typename cml__elem<DT>::type T;
    __shared__ S scratch[32];
    __shared__ int last;
    const int G = blockDim.x, t = threadIdx.x;
    for (long long g0 = (long long)blockIdx.x * blockDim.y; g0 < groups; g0 += (long long)gridDim.x * blockDim.y) {
        const long long g = g0 + threadIdx.y, row = g / splits;
        S a = rop<OP>::init();
        if (g < groups) {
            const T *xr = (const T *)x + row * n;
            if constexpr (ILV) {
                push_interleaved<DT, OP, UNROLL>(a, xr, n, (int)(g % splits), splits, t, G);
            } else {
                const long long lo = (g % splits) * chunk, hi = lo + chunk < n ? lo + chunk : n;
                cml__stream<DT, 1, false, UNROLL>(nullptr, xr, nullptr, lo, hi, t, G, [&](const float *v, long long j) {
                    rop<OP>::push(a, v[0], j);
                    return 0.0f;
                });
            }
        }
        a = cml__group_reduce_t(a, G, scratch, merge_fn<OP>());
        if (splits == 1) {
            if (t == 0 && g < groups) store_result<DT, OP>(y, g, a, n, correction);
        } else {
            if (t == 0) partial[g] = a;
            if (cml__block_arrives_last(arrivals + row, (unsigned)splits, &last)) {
                /* chunk s to thread s % G, in order, then the group's merge: an order fixed by splits and G */
                S b = rop<OP>::init();
                for (int s = t; s < splits; s += G) b = rop<OP>::merge(b, load_cg(partial + row * splits + s));
                b = cml__group_reduce_t(b, G, scratch, merge_fn<OP>());
                if (t == 0) store_result<DT, OP>(y, row, b, n, correction);
            }
        }
        if (G > 32) __syncthreads(); /* scratch and last are reused by the next iteration */
    }
}

/* Block (32, 8): columns [tile*32, +32) of outer slice o, rows [lo, hi) of the chunk
 * blockIdx.y, the 8 row phases merged in order. Split columns: the partials of the tile's
 * chunks are merged by the tile's last block (phase p takes chunks p, p + 8, ... in order,
 * then the phases in order). */
template <int DT, int OP>
static __global__ void __launch_bounds__(COL_TX *COL_TY)
    reduce_cols_kernel(void *y, typename rop<OP>::S *partial, unsigned *arrivals, const void *x, long long n,
                       long long inner, long long tiles, long long rchunk, int splits, int correction) {
    cml__pdl_entry();
    typedef typename rop<OP>::S S;
    __shared__ S sm[COL_TY][COL_TX];
    __shared__ int last;
    const long long o = blockIdx.x / tiles, c = (blockIdx.x % tiles) * COL_TX + threadIdx.x;
    const long long lo = (long long)blockIdx.y * rchunk, hi = lo + rchunk < n ? lo + rchunk : n;
    const long long out = o * inner + c;
    S a = rop<OP>::init();
    if (c < inner) {
        const long long base = o * n * inner + c;
#pragma unroll 4
        for (long long j = lo + threadIdx.y; j < hi; j += COL_TY) rop<OP>::push(a, cml__ld<DT>(x, base + j * inner), j);
    }
    sm[threadIdx.y][threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.y == 0)
        for (int k = 1; k < COL_TY; k++) a = rop<OP>::merge(a, sm[k][threadIdx.x]);
    if (splits == 1) {
        if (threadIdx.y == 0 && c < inner) store_result<DT, OP>(y, out, a, n, correction);
        return;
    }
    if (threadIdx.y == 0 && c < inner) partial[out * splits + blockIdx.y] = a;
    if (!cml__block_arrives_last(arrivals + blockIdx.x, (unsigned)splits, &last)) return;
    S b = rop<OP>::init();
    if (c < inner)
        for (int s = threadIdx.y; s < splits; s += COL_TY) b = rop<OP>::merge(b, load_cg(partial + out * splits + s));
    sm[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && c < inner) {
        for (int k = 1; k < COL_TY; k++) b = rop<OP>::merge(b, sm[k][threadIdx.x]);
        store_result<DT, OP>(y, out, b, n, correction);
    }
}

/* ---- launches ------------------------------------------------------------------------------ */

static const char FN[] = "cml_reduce";

static cml_status launched(const char *kernel, cml_dtype dt, long long n, unsigned grid, unsigned block) {
    return cml__cuda_check_launch(FN, kernel, cml_dtype_name(dt), n, grid, block);
}

/* `count` arrival counters that are 0 (cml__cuda_zeroed: every kernel leaves them 0). */
static cml_status arrival_counters(cml_ctx *ctx, long long count, unsigned **out) {
    return cml__cuda_zeroed(ctx, (size_t)count * sizeof(unsigned), FN, (void **)out);
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
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reduce_rows_kernel<DT, OP, false>, G * R, 0) !=
            cudaSuccess ||
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
    unsigned *arrivals = NULL;
    if (splits > 1) {
        CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(rows * splits) * sizeof(S)));
        CML_TRY(arrival_counters(ctx, rows, &arrivals));
    }
    const long long groups = rows * splits, blocks = (groups + R - 1) / R;
    const unsigned grid = (unsigned)(blocks < resident * 8 ? blocks : resident * 8);
    /* Interleaved chunks for rows of more than 2 (measured: the 1 GiB flat sum +2%; at 2 chunks a
     * row, 256x262144, -1% f32 and +0% bf16, so those keep one range a chunk). */
    if (splits > 2)
        cml__launch(reduce_rows_kernel<DT, OP, true>, grid, dim3(G, R), 0, cml__stream(ctx), y, (S *)ws, arrivals, x,
                    groups, n, chunk, (int)splits, correction);
    else
        cml__launch(reduce_rows_kernel<DT, OP, false>, grid, dim3(G, R), 0, cml__stream(ctx), y, (S *)ws, arrivals, x,
                    groups, n, chunk, (int)splits, correction);
    return launched("reduce_rows_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R));
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
    unsigned *arrivals = NULL;
    if (splits > 1) {
        CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(outer * inner * splits) * sizeof(S)));
        CML_TRY(arrival_counters(ctx, blocks, &arrivals));
    }
    const dim3 grid((unsigned)blocks, (unsigned)splits);
    cml__launch(reduce_cols_kernel<DT, OP>, grid, dim3(COL_TX, COL_TY), 0, cml__stream(ctx), y, (S *)ws, arrivals, x, n,
                inner, tiles, rchunk, (int)splits, correction);
    return launched("reduce_cols_kernel", (cml_dtype)DT, outer * n * inner, (unsigned)(blocks * splits), 256);
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
