/* CUDA softmax / log-softmax, forward and backward, over the middle axis of a
 * contiguous (outer, n, inner) buffer; f32/f16/bf16 storage, f32 math.
 *
 * Rows (inner == 1):
 * - rows that fit on chip are held in the registers of one row group each
 *   (block_reduce.cuh), so the input is read once and the output written once:
 *   the max, then the sum of exp, then the outputs, with group reductions in a
 *   fixed order. Forward: 16-byte aligned rows as packed words (4 or 8 per
 *   thread: up to 32768 f32 or 65536 bf16/f16 elements; the exps kept for the
 *   outputs where they fit in 32 registers), other rows up to 16384
 *   as floats; backward (two rows, dy and y): aligned rows as 4 words each (up
 *   to 16384 f32 or 32768 bf16/f16), others up to 16384 as 16 floats each;
 * - longer aligned rows: one pass, a chunk per block, the chunks' statistics
 *   merged in a fixed order by each of the row's blocks (common/row_sync.cuh);
 * - longer unaligned rows: the two-pass chunk path of softmax_common.cuh.
 * Columns (inner > 1): one thread per (outer, column), walking the column in
 * order (coalesced across columns), three passes like the CPU.
 * Math matches the CPU's formulas (src/kernels/cpu/softmax.c):
 *   softmax y = exp(x - max) / sum,  log_softmax y = (x - max) - log(sum),
 *   dx = y (dy - sum(dy y))  or  dx = dy - exp(y) sum(dy);
 * a NaN anywhere in a row makes the row NaN. */
#include "kernels/cuda/common/row_sync.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/softmax/softmax_common.cuh"

#define E_FWD 32
#define E_BWD 16

/* ---- rows held in registers ------------------------------------------------------------------ */

/* The outputs of a row (or chunk) held as KW packed words per thread, given its max m and
 * a = 1 / sum (LOG: log(sum)); e[] holds the exps when KEEP (softmax_common.cuh). */
template <int DT, int KW, bool LOG, bool KEEP>
static __device__ __forceinline__ void fwd_store_words(void *y, const uint4 (&w)[KW],
                                                       const float (&e)[KW * cml__words<DT>::V], int nn, int t, int G,
                                                       float m, float a) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * G + t) * V;
        if (c < nn) {
            float v[V];
            if constexpr (KEEP && !LOG) {
#pragma unroll
                for (int u = 0; u < V; u++) v[u] = e[k * V + u] * a;
            } else {
                cml__unpack16<DT>(w[k], v);
#pragma unroll
                for (int u = 0; u < V; u++) v[u] = LOG ? (v[u] - m) - a : cml__fexp(v[u] - m) * a;
            }
            cml__st16((T *)y + c, cml__pack16_fast<DT>(v));
        }
    }
}

/* 16-byte aligned rows: KW packed words per thread (block_reduce.cuh / rows.cuh). The exps stay
 * in registers for the outputs when they take at most 32 (KEEP): f32 always, bf16/f16 at 4
 * words; at 8 bf16 words they are computed again (64 more registers would halve the blocks per SM). */
template <int DT, int KW, bool LOG>
static __global__ void __launch_bounds__(1024) softmax_fwd_words_kernel(void *y, const void *x, long long rows, int n) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    constexpr bool KEEP = !LOG && KW * V <= 32;
    __shared__ float red_max[32], red_sum[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const int nn = valid ? n : 0;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)n;
        uint4 w[KW];
        cml__words_load<DT, KW>(w, (const T *)x + off, nn, t, G);
        const float m = cml__group_allreduce(cml__words_max<DT, KW>(w, nn, t, G), G, red_max, cml__max_op());
        float e[KW * V];
        const float s = cml__group_allreduce(cml__words_sumexp<DT, KW, KEEP>(w, nn, t, G, m, e), G, red_sum,
                                             cml__sum_op());
        fwd_store_words<DT, KW, LOG, KEEP>((T *)y + off, w, e, nn, t, G, m, LOG ? logf(s) : 1.0f / s);
    }
}

/* Unaligned rows: E floats per thread, scalar accesses. */

/* Unaligned rows (scalar accesses) need more registers for addresses: 512 threads at most. */
template <int DT, bool VEC>
static __global__ void __launch_bounds__(VEC ? 1024 : 512) softmax_fwd_rows_kernel(void *y, const void *x, long long rows, int n,
                                                                       bool log) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float red_max[32], red_sum[32];
    const int G = blockDim.x, t = threadIdx.x;
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)n;
        float v[E_FWD];
        cml__row_load<DT, VEC, E_FWD>(v, (const T *)x + off, valid ? n : 0, t, G, -INFINITY);
        float m = -INFINITY;
#pragma unroll
        for (int e = 0; e < E_FWD; e++) m = cml__max_nan(m, v[e]);
        m = cml__group_allreduce(m, G, red_max, cml__max_op());
        float s = 0.0f;
        if (!log) {
#pragma unroll
            for (int e = 0; e < E_FWD; e++) {
                v[e] = cml__fexp(v[e] - m); /* padding: exp(-inf) = 0 */
                s += v[e];
            }
        } else {
#pragma unroll
            for (int e = 0; e < E_FWD; e++) s += cml__fexp(v[e] - m);
        }
        s = cml__group_allreduce(s, G, red_sum, cml__sum_op());
        if (!log) {
            const float inv = 1.0f / s;
#pragma unroll
            for (int e = 0; e < E_FWD; e++) v[e] *= inv;
        } else {
            const float ls = logf(s);
#pragma unroll
            for (int e = 0; e < E_FWD; e++) v[e] = (v[e] - m) - ls;
        }
        if (valid) cml__row_store<DT, VEC, E_FWD>((T *)y + off, v, n, t, G);
    }
}

template <int DT, bool VEC>
static __global__ void __launch_bounds__(1024) softmax_bwd_rows_kernel(void *dx, const void *dy, const void *y,
                                                                       long long rows, int n, bool log) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float red[2][32];
    const int G = blockDim.x, t = threadIdx.x;
    int parity = 0; /* alternate scratch arrays: consecutive rows need no extra barrier */
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)n;
        float g[E_BWD], p[E_BWD];
        cml__row_load<DT, VEC, E_BWD>(g, (const T *)dy + off, valid ? n : 0, t, G, 0.0f);
        cml__row_load<DT, VEC, E_BWD>(p, (const T *)y + off, valid ? n : 0, t, G, 0.0f);
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < E_BWD; e++) d += log ? g[e] : g[e] * p[e];
        d = cml__group_allreduce(d, G, red[parity], cml__sum_op());
        parity ^= 1;
#pragma unroll
        for (int e = 0; e < E_BWD; e++) g[e] = log ? g[e] - expf(p[e]) * d : p[e] * (g[e] - d);
        if (valid) cml__row_store<DT, VEC, E_BWD>((T *)dx + off, g, n, t, G);
    }
}

/* 16-byte aligned rows: dy and y as 4 packed words per thread each (up to 16384 f32 or 32768
 * bf16/f16 elements per row). */
template <int DT>
static __global__ void __launch_bounds__(1024) softmax_bwd_words_kernel(void *dx, const void *dy, const void *y,
                                                                        long long rows, int n, bool log) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, KW = 4;
    __shared__ float red[2][32];
    const int G = blockDim.x, t = threadIdx.x;
    int parity = 0; /* alternate scratch arrays: consecutive rows need no extra barrier */
    for (long long r0 = (long long)blockIdx.x * blockDim.y; r0 < rows; r0 += (long long)gridDim.x * blockDim.y) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const int nn = valid ? n : 0;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)n;
        uint4 wg[KW], wp[KW];
        cml__words_load<DT, KW>(wg, (const T *)dy + off, nn, t, G);
        cml__words_load<DT, KW>(wp, (const T *)y + off, nn, t, G);
        float d = 0.0f;
#pragma unroll
        for (int k = 0; k < KW; k++) { /* words past the row are zero: they add nothing */
            float g[V], p[V];
            cml__unpack16<DT>(wg[k], g);
            cml__unpack16<DT>(wp[k], p);
#pragma unroll
            for (int u = 0; u < V; u++) d += log ? g[u] : g[u] * p[u];
        }
        d = cml__group_allreduce(d, G, red[parity], cml__sum_op());
        parity ^= 1;
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * G + t) * V;
            if (c < nn) {
                float g[V], p[V];
                cml__unpack16<DT>(wg[k], g);
                cml__unpack16<DT>(wp[k], p);
#pragma unroll
                for (int u = 0; u < V; u++) g[u] = log ? g[u] - expf(p[u]) * d : p[u] * (g[u] - d);
                cml__st16((T *)dx + off + c, cml__pack16_fast<DT>(g));
            }
        }
    }
}

/* ---- long aligned rows: one pass, a chunk per block (row_sync.cuh) ------------------------------ */

/* Chunk = 256 threads x KW words. Forward: the chunk's (max, sum of exp), merged over the row. */
template <int DT, bool LOG>
static __global__ void __launch_bounds__(CML__SM_THREADS, 4)
    softmax_fwd_onepass_kernel(void *y, const void *x, unsigned *sync, unsigned long long *states, long long n,
                               int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, KW = CML__SM_ONEPASS_KW;
    /* the exps are taken again after the row's merge: keeping f32's 32 in registers through the
     * wait measured 14% slower at 256x262144 (2001 vs 2317 GB/s); bf16's 64 would not fit */
    constexpr bool KEEP = false;
    constexpr long long CH = (long long)CML__SM_THREADS * KW * V;
    __shared__ float red_max[32], red_sum[32], stat[2];
    const int t = threadIdx.x;
    const unsigned b = cml__take_ticket(sync);
    const long long row = b / splits, lo = (b % splits) * CH;
    const int nn = (int)(n - lo < CH ? n - lo : CH);
    const size_t off = (size_t)row * (size_t)n + (size_t)lo;
    uint4 w[KW];
    cml__words_load<DT, KW>(w, (const T *)x + off, nn, t, CML__SM_THREADS);
    const float m = cml__group_allreduce(cml__words_max<DT, KW>(w, nn, t, CML__SM_THREADS), CML__SM_THREADS, red_max,
                                         cml__max_op());
    float e[KW * V];
    const float s = cml__group_allreduce(cml__words_sumexp<DT, KW, KEEP>(w, nn, t, CML__SM_THREADS, m, e),
                                         CML__SM_THREADS, red_sum, cml__sum_op());
    if (t < 32) {
        bool ok;
        cml__ms a = cml__row_merge(sync, states, row, (int)(b % splits), splits,
                                   cml__ms{m, m == -INFINITY ? 0.0f : s} /* an all -inf chunk adds 0 */,
                                   cml__ms_init(), cml__ms_merge_fn(), ok);
        if (!ok) a = cml__ms{NAN, NAN};
        if (t == 0) {
            stat[0] = a.m;
            stat[1] = LOG ? logf(a.s) : 1.0f / a.s;
        }
    }
    __syncthreads();
    fwd_store_words<DT, KW, LOG, KEEP>((T *)y + off, w, e, nn, t, CML__SM_THREADS, stat[0], stat[1]);
}

/* Backward: dy and y as 4 words per thread each; the chunk's sum(dy y) (log: sum(dy)). */
template <int DT>
static __global__ void __launch_bounds__(CML__SM_THREADS, 4)
    softmax_bwd_onepass_kernel(void *dx, const void *dy, const void *y, unsigned *sync, unsigned long long *states,
                               long long n,
                               int splits, bool log) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, KW = 4;
    constexpr long long CH = (long long)CML__SM_THREADS * KW * V;
    __shared__ float red[32], stat;
    const int t = threadIdx.x;
    const unsigned b = cml__take_ticket(sync);
    const long long row = b / splits, lo = (b % splits) * CH;
    const int nn = (int)(n - lo < CH ? n - lo : CH);
    const size_t off = (size_t)row * (size_t)n + (size_t)lo;
    uint4 wg[KW], wp[KW];
    cml__words_load<DT, KW>(wg, (const T *)dy + off, nn, t, CML__SM_THREADS);
    cml__words_load<DT, KW>(wp, (const T *)y + off, nn, t, CML__SM_THREADS);
    float d = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++) { /* words past the row are zero: they add nothing */
        float g[V], p[V];
        cml__unpack16<DT>(wg[k], g);
        cml__unpack16<DT>(wp[k], p);
#pragma unroll
        for (int u = 0; u < V; u++) d += log ? g[u] : g[u] * p[u];
    }
    d = cml__group_allreduce(d, CML__SM_THREADS, red, cml__sum_op());
    if (t < 32) {
        bool ok;
        const float a = cml__row_merge(sync, states, row, (int)(b % splits), splits, d, 0.0f, cml__sum_op(), ok);
        if (t == 0) stat = ok ? a : NAN;
    }
    __syncthreads();
    const float D = stat;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * CML__SM_THREADS + t) * V;
        if (c < nn) {
            float g[V], p[V];
            cml__unpack16<DT>(wg[k], g);
            cml__unpack16<DT>(wp[k], p);
#pragma unroll
            for (int u = 0; u < V; u++) g[u] = log ? g[u] - expf(p[u]) * D : p[u] * (g[u] - D);
            cml__st16((T *)dx + off + c, cml__pack16_fast<DT>(g));
        }
    }
}

/* ---- long unaligned rows: pass 2 (pass 1 is cml__softmax_stats_kernel) ------------------------- */

template <int DT>
static __global__ void __launch_bounds__(CML__SM_THREADS)
    softmax_fwd_apply_kernel(void *y, const void *x, const cml__ms *partial, long long row0, long long n, int splits,
                             bool log) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float stat[2];
    const long long b = blockIdx.x, row = row0 + b / splits;
    if (threadIdx.x == 0) {
        const cml__ms a = cml__ms_merge_all(partial + (b / splits) * splits, splits);
        stat[0] = a.m;
        stat[1] = log ? logf(a.s) : 1.0f / a.s;
    }
    __syncthreads();
    const float m = stat[0], k = stat[1];
    const long long lo = (b % splits) * (long long)CML__SM_CHUNK;
    const long long hi = lo + CML__SM_CHUNK < n ? lo + CML__SM_CHUNK : n;
    cml__stream<DT, 1, true, CML__SM_UNROLL>((T *)y + row * n, (const T *)x + row * n, nullptr, lo, hi, threadIdx.x,
                                             CML__SM_THREADS, [&](const float *v, long long) {
                                                 return log ? (v[0] - m) - k : cml__fexp(v[0] - m) * k;
                                             });
}

/* Backward pass 1: partial[b] = sum over the chunk of dy * y (log: of dy). */
template <int DT>
static __global__ void __launch_bounds__(CML__SM_THREADS)
    softmax_bwd_dot_kernel(float *partial, const void *dy, const void *y, long long row0, long long n, int splits,
                           bool log) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float scratch[32];
    const long long b = blockIdx.x, row = row0 + b / splits;
    const long long lo = (b % splits) * (long long)CML__SM_CHUNK;
    const long long hi = lo + CML__SM_CHUNK < n ? lo + CML__SM_CHUNK : n;
    float d = 0.0f;
    cml__stream<DT, 2, false, CML__SM_UNROLL>(nullptr, (const T *)dy + row * n, (const T *)y + row * n, lo, hi,
                                              threadIdx.x, CML__SM_THREADS, [&](const float *v, long long) {
                                                  d += log ? v[0] : v[0] * v[1];
                                                  return 0.0f;
                                              });
    d = cml__group_allreduce(d, CML__SM_THREADS, scratch, cml__sum_op());
    if (threadIdx.x == 0) partial[b] = d;
}

template <int DT>
static __global__ void __launch_bounds__(CML__SM_THREADS)
    softmax_bwd_apply_kernel(void *dx, const void *dy, const void *y, const float *partial, long long row0,
                             long long n, int splits, bool log) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float stat;
    const long long b = blockIdx.x, row = row0 + b / splits;
    if (threadIdx.x == 0) {
        const float *p = partial + (b / splits) * splits;
        float d = p[0];
        for (int k = 1; k < splits; k++) d += p[k];
        stat = d;
    }
    __syncthreads();
    const float d = stat;
    const long long lo = (b % splits) * (long long)CML__SM_CHUNK;
    const long long hi = lo + CML__SM_CHUNK < n ? lo + CML__SM_CHUNK : n;
    cml__stream<DT, 2, true, CML__SM_UNROLL>((T *)dx + row * n, (const T *)dy + row * n, (const T *)y + row * n, lo,
                                             hi, threadIdx.x, CML__SM_THREADS, [&](const float *v, long long) {
                                                 return log ? v[0] - expf(v[1]) * d : v[1] * (v[0] - d);
                                             });
}

/* ---- columns (inner > 1): one thread per (outer, column) ------------------------------------------ */

template <int DT>
static __global__ void softmax_fwd_cols_kernel(void *y, const void *x, long long outer, long long n, long long inner,
                                               bool log) {
    cml__pdl_entry();
    const long long total = outer * inner, step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long base = (i / inner) * n * inner + i % inner;
        float m = -INFINITY, s = 0.0f;
        for (long long j = 0; j < n; j++) m = cml__max_nan(m, cml__ld<DT>(x, base + j * inner));
        for (long long j = 0; j < n; j++) s += cml__fexp(cml__ld<DT>(x, base + j * inner) - m);
        const float k = log ? logf(s) : 1.0f / s;
        for (long long j = 0; j < n; j++) {
            const float v = cml__ld<DT>(x, base + j * inner);
            cml__st<DT>(y, base + j * inner, log ? (v - m) - k : cml__fexp(v - m) * k);
        }
    }
}

template <int DT>
static __global__ void softmax_bwd_cols_kernel(void *dx, const void *dy, const void *y, long long outer, long long n,
                                               long long inner, bool log) {
    cml__pdl_entry();
    const long long total = outer * inner, step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long base = (i / inner) * n * inner + i % inner;
        float d = 0.0f;
        for (long long j = 0; j < n; j++) {
            const float g = cml__ld<DT>(dy, base + j * inner);
            d += log ? g : g * cml__ld<DT>(y, base + j * inner);
        }
        for (long long j = 0; j < n; j++) {
            const long long k = base + j * inner;
            const float g = cml__ld<DT>(dy, k), p = cml__ld<DT>(y, k);
            cml__st<DT>(dx, k, log ? g - expf(p) * d : p * (g - d));
        }
    }
}

/* ---- launches --------------------------------------------------------------------------------- */

static int sm_count(const cml_ctx *ctx) {
    const int s = cml__cuda_sm_count(ctx->device.index);
    return s > 0 ? s : 132;
}

static cml_status launched(const char *fn, const char *kernel, cml_dtype dt, long long n, unsigned grid,
                           unsigned block) {
    return cml__cuda_check_launch(fn, kernel, cml_dtype_name(dt), n, grid, block);
}

template <int DT>
static cml_status fwd_launch(cml_ctx *ctx, void *y, const void *x, long long outer, long long n, long long inner,
                             bool log) {
    static const char fn[] = "cml_softmax_fwd";
    cudaStream_t st = cml__stream(ctx);
    if (inner > 1) {
        const unsigned grid = cml__grid_size(ctx, outer * inner, 256);
        cml__launch(softmax_fwd_cols_kernel<DT>, grid, 256, 0, st, y, x, outer, n, inner, log);
        return launched(fn, "softmax_fwd_cols_kernel", (cml_dtype)DT, outer * n * inner, grid, 256);
    }
    const long long rows = outer;
    const bool vec = cml__rows_vec_ok(n, sizeof(typename cml__elem<DT>::type), x, y, x);
    int KW, G, R;
    if (vec && cml__words_geometry(n, sizeof(typename cml__elem<DT>::type), &KW, &G, &R)) {
        const unsigned grid = cml__row_blocks(rows, R);
        const dim3 block(G, R);
        if (KW == 4 && !log) cml__launch(softmax_fwd_words_kernel<DT, 4, false>, grid, block, 0, st, y, x, rows,
                                         (int)n);
        else if (KW == 4) cml__launch(softmax_fwd_words_kernel<DT, 4, true>, grid, block, 0, st, y, x, rows, (int)n);
        else if (!log) cml__launch(softmax_fwd_words_kernel<DT, 8, false>, grid, block, 0, st, y, x, rows, (int)n);
        else cml__launch(softmax_fwd_words_kernel<DT, 8, true>, grid, block, 0, st, y, x, rows, (int)n);
        return launched(fn, "softmax_fwd_words_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R));
    }
    if (n <= 512 * E_FWD) {
        cml__reg_rows_geometry(n, E_FWD, &G, &R);
        const unsigned grid = cml__row_blocks(rows, R);
        cml__launch(softmax_fwd_rows_kernel<DT, false>, grid, dim3(G, R), 0, st, y, x, rows, (int)n, log);
        return launched(fn, "softmax_fwd_rows_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R));
    }
    const long long ch1 = (long long)CML__SM_THREADS * CML__SM_ONEPASS_KW * (16 / (long long)sizeof(typename cml__elem<DT>::type));
    const long long osplits = (n + ch1 - 1) / ch1;
    if (vec && rows * osplits < (1ll << 31) &&
        cml__row_sync_fits(log ? (const void *)softmax_fwd_onepass_kernel<DT, true>
                               : (const void *)softmax_fwd_onepass_kernel<DT, false>,
                           CML__SM_THREADS, (int)osplits, sm_count(ctx))) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, cml__row_sync_bytes(rows, osplits)));
        CML_CUDA_TRY(fn, cml__row_sync_reset(ws, rows, osplits, st));
        const unsigned grid = (unsigned)(rows * osplits);
        if (log)
            cml__launch(softmax_fwd_onepass_kernel<DT, true>, grid, CML__SM_THREADS, 0, st, y, x, (unsigned *)ws,
                        cml__row_sync_slots(ws, rows), n, (int)osplits);
        else
            cml__launch(softmax_fwd_onepass_kernel<DT, false>, grid, CML__SM_THREADS, 0, st, y, x, (unsigned *)ws,
                        cml__row_sync_slots(ws, rows), n, (int)osplits);
        return launched(fn, "softmax_fwd_onepass_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS);
    }
    const int splits = (int)((n + CML__SM_CHUNK - 1) / CML__SM_CHUNK);
    const long long batch = cml__sm_batch_rows(ctx, n * (long long)sizeof(typename cml__elem<DT>::type));
    const long long nb = batch < rows ? batch : rows;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(nb * splits) * sizeof(cml__ms)));
    for (long long r0 = 0; r0 < rows; r0 += nb) {
        const unsigned grid = (unsigned)((rows - r0 < nb ? rows - r0 : nb) * splits);
        cml__launch(cml__softmax_stats_kernel<DT>, grid, CML__SM_THREADS, 0, st, (cml__ms *)ws, x, r0, n, splits);
        CML_TRY(launched(fn, "cml__softmax_stats_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
        cml__launch(softmax_fwd_apply_kernel<DT>, grid, CML__SM_THREADS, 0, st, y, x, (const cml__ms *)ws, r0, n,
                    splits, log);
        CML_TRY(launched(fn, "softmax_fwd_apply_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
    }
    return CML_OK;
}

template <int DT>
static cml_status bwd_launch(cml_ctx *ctx, void *dx, const void *dy, const void *y, long long outer, long long n,
                             long long inner, bool log) {
    static const char fn[] = "cml_softmax_bwd";
    cudaStream_t st = cml__stream(ctx);
    if (inner > 1) {
        const unsigned grid = cml__grid_size(ctx, outer * inner, 256);
        cml__launch(softmax_bwd_cols_kernel<DT>, grid, 256, 0, st, dx, dy, y, outer, n, inner, log);
        return launched(fn, "softmax_bwd_cols_kernel", (cml_dtype)DT, outer * n * inner, grid, 256);
    }
    const long long rows = outer;
    const long long V = 16 / (long long)sizeof(typename cml__elem<DT>::type);
    int G, R;
    if (cml__rows_vec_ok(n, sizeof(typename cml__elem<DT>::type), dx, dy, y) && n <= 4 * V * 1024) {
        G = cml__pow2_at_least((n + 4 * V - 1) / (4 * V), 1024);
        R = G >= 256 ? 1 : 256 / G;
        const unsigned grid = cml__row_blocks(rows, R);
        cml__launch(softmax_bwd_words_kernel<DT>, grid, dim3(G, R), 0, st, dx, dy, y, rows, (int)n, log);
        return launched(fn, "softmax_bwd_words_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R));
    }
    if (n <= 1024 * E_BWD && !cml__rows_vec_ok(n, sizeof(typename cml__elem<DT>::type), dx, dy, y)) {
        cml__reg_rows_geometry(n, E_BWD, &G, &R);
        const unsigned grid = cml__row_blocks(rows, R);
        cml__launch(softmax_bwd_rows_kernel<DT, false>, grid, dim3(G, R), 0, st, dx, dy, y, rows, (int)n, log);
        return launched(fn, "softmax_bwd_rows_kernel", (cml_dtype)DT, rows * n, grid, (unsigned)(G * R));
    }
    const long long ch1 = (long long)CML__SM_THREADS * 4 * V, osplits = (n + ch1 - 1) / ch1;
    if (cml__rows_vec_ok(n, sizeof(typename cml__elem<DT>::type), dx, dy, y) && rows * osplits < (1ll << 31) &&
        cml__row_sync_fits((const void *)softmax_bwd_onepass_kernel<DT>, CML__SM_THREADS, (int)osplits, sm_count(ctx))) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, cml__row_sync_bytes(rows, osplits)));
        CML_CUDA_TRY(fn, cml__row_sync_reset(ws, rows, osplits, st));
        const unsigned grid = (unsigned)(rows * osplits);
        cml__launch(softmax_bwd_onepass_kernel<DT>, grid, CML__SM_THREADS, 0, st, dx, dy, y, (unsigned *)ws,
                    cml__row_sync_slots(ws, rows), n, (int)osplits, log);
        return launched(fn, "softmax_bwd_onepass_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS);
    }
    const int splits = (int)((n + CML__SM_CHUNK - 1) / CML__SM_CHUNK);
    const long long batch = cml__sm_batch_rows(ctx, 2 * n * (long long)sizeof(typename cml__elem<DT>::type));
    const long long nb = batch < rows ? batch : rows;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, (size_t)(nb * splits) * sizeof(float)));
    for (long long r0 = 0; r0 < rows; r0 += nb) {
        const unsigned grid = (unsigned)((rows - r0 < nb ? rows - r0 : nb) * splits);
        cml__launch(softmax_bwd_dot_kernel<DT>, grid, CML__SM_THREADS, 0, st, (float *)ws, dy, y, r0, n, splits, log);
        CML_TRY(launched(fn, "softmax_bwd_dot_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
        cml__launch(softmax_bwd_apply_kernel<DT>, grid, CML__SM_THREADS, 0, st, dx, dy, y, (const float *)ws, r0, n,
                    splits, log);
        CML_TRY(launched(fn, "softmax_bwd_apply_kernel", (cml_dtype)DT, rows * n, grid, CML__SM_THREADS));
    }
    return CML_OK;
}

/* ---- entry points (arguments validated by src/kernels/softmax.c) ------------------------------------ */

extern "C" cml_status cml__softmax_fwd_cuda(cml_ctx *ctx, void *y, const void *x, int64_t outer, int64_t n,
                                            int64_t inner, cml_dtype dtype, bool log) {
    CML_TRY(cml__cuda_check_float_dtype("cml_softmax_fwd", "dtype", dtype));
    if (outer == 0 || inner == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16: return fwd_launch<CML_F16>(ctx, y, x, outer, n, inner, log);
    case CML_BF16: return fwd_launch<CML_BF16>(ctx, y, x, outer, n, inner, log);
    default: return fwd_launch<CML_F32>(ctx, y, x, outer, n, inner, log);
    }
}

extern "C" cml_status cml__softmax_bwd_cuda(cml_ctx *ctx, void *dx, const void *dy, const void *y, int64_t outer,
                                            int64_t n, int64_t inner, cml_dtype dtype, bool log) {
    CML_TRY(cml__cuda_check_float_dtype("cml_softmax_bwd", "dtype", dtype));
    if (outer == 0 || inner == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16: return bwd_launch<CML_F16>(ctx, dx, dy, y, outer, n, inner, log);
    case CML_BF16: return bwd_launch<CML_BF16>(ctx, dx, dy, y, outer, n, inner, log);
    default: return bwd_launch<CML_F32>(ctx, dx, dy, y, outer, n, inner, log);
    }
}
