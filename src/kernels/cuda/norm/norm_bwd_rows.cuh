/* LayerNorm / RMSNorm backward over 16-byte aligned rows of up to 256 words
 * (1024 f32 / 2048 bf16/f16 columns; NBR_MAX_WORDS says why not longer),
 * shared by layernorm_bwd.cu and rmsnorm_bwd.cu: one word of x and of dy per
 * thread and row.
 *
 * A block of 1024 threads (512 for rows of 33-64 words) holds R row groups of
 * G threads (G a power of two >= the row's words); each group walks its own
 * rows, gid, gid + groups, ... and moves on without waiting for the block's
 * other groups: its row sums are merged through shared memory behind a named
 * barrier of the group's G threads (bar.sync 1 + group, G), or by shuffles
 * alone when G <= 32. A group loads its next row (x, dy, mean, rstd) before it
 * reduces the current one, so while a group waits in its reduction its next
 * row is on the way and the SM's other groups keep loading. The register-row
 * kernels (layernorm_bwd.cu, rmsnorm_bwd.cu) synchronize the whole block once
 * per row and load nothing during the reductions.
 *
 * A thread owns the same columns in every row: gamma comes from L1, and the
 * dgamma (dy xhat) and dbeta (dy) terms of its columns add up (registers and
 * thread-private shared memory) over the group's rows, in row order. At the end the block's R groups are
 * merged in group order through shared memory into one partial row per block
 * (part[(block, LN ? 2 : 1, C)], dgamma terms then dbeta terms), which
 * nb_partial_sum_kernel (norm_bwd_partial.cuh) adds in block order: every
 * sum has a fixed order, results are bitwise repeatable. x and dy are read
 * once and dx written once; dx may alias dy (a group reads a row before it
 * writes it, and no other group touches that row).
 *
 * CML_NORM_BWD_ROWS=0 (read once) leaves these rows to the previous kernels,
 * for A/B runs. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_ROWS_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_ROWS_CUH

#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/norm/norm_bwd_partial.cuh"

#define NBR_THREADS 1024
#define NBR_MAX_BARRIER_GROUPS 8 /* named barriers 1..8 (0 is __syncthreads) */
/* Rows of up to 256 words (1024 f32 / 2048 bf16 columns: at least 4 groups per block) come here.
 * Longer rows stay with the register-row kernels of layernorm_bwd.cu / rmsnorm_bwd.cu and
 * norm_bwd_long.cuh: with one or two groups per block this kernel measured slower (device run
 * of session 5: f32 4096x4096 2464 -> 1865 GB/s, bf16 16384x8192 2244 -> 1631; bf16 4096x4096
 * LN 1568 -> 1532, RMS 1722 -> 1825), against bf16 4096x1024 LN 1048 -> 1167, RMS 1224 -> 1410,
 * f32 4096x1024 unchanged (1746). */
#define NBR_MAX_WORDS 256

/* The group's sums (LN: sum g and sum g xhat; RMSNorm: sum g xhat in .y) in every thread of
 * the group, in a fixed order: an xor butterfly inside warps, then the warps in order. */
template <bool LN>
static __device__ __forceinline__ float2 nbr_group_sum(float2 s, int G, float2 *scratch) {
    const int lin = threadIdx.y * G + threadIdx.x;
    const int width = G < 32 ? G : 32;
    /* groups narrower than a warp share it and may run different numbers of rows */
    const unsigned mask = G >= 32 ? CML__FULL_MASK : ((1u << G) - 1u) << (lin & 31 & ~(G - 1));
    for (int off = width / 2; off > 0; off >>= 1) {
        if (LN) s.x += __shfl_xor_sync(mask, s.x, off);
        s.y += __shfl_xor_sync(mask, s.y, off);
    }
    if (G <= 32) return s;
    const int nw = G / 32;
    float2 *w = scratch + threadIdx.y * nw;
    if ((threadIdx.x & 31) == 0) w[threadIdx.x / 32] = s;
    asm volatile("bar.sync %0, %1;" ::"r"(1 + (int)threadIdx.y), "r"(G) : "memory");
    float2 r = w[0];
    for (int k = 1; k < nw; k++) {
        if (LN) r.x += w[k].x;
        r.y += w[k].y;
    }
    return r;
}

/* Element u of a 16-byte word, as f32 (u a compile-time index after unrolling). */
template <int DT> static __device__ __forceinline__ float nbr_elem(const uint4 &w, int u) {
    const unsigned q = u / (16 / (int)sizeof(typename cml__elem<DT>::type) / 4) == 0 ? w.x
                       : u / (16 / (int)sizeof(typename cml__elem<DT>::type) / 4) == 1 ? w.y
                       : u / (16 / (int)sizeof(typename cml__elem<DT>::type) / 4) == 2 ? w.z
                                                                                       : w.w;
    if constexpr (DT == CML_F32) return __uint_as_float(q);
    else if constexpr (DT == CML_F16) return __half2float(__ushort_as_half((unsigned short)(u & 1 ? q >> 16 : q & 0xFFFFu)));
    else return cml__to_f32<DT>((uint16_t)(u & 1 ? q >> 16 : q & 0xFFFFu));
}

/* Block (G, R); part (f32, (gridDim.x, LN ? 2 : 1, C)), NULL when no dgamma/dbeta is wanted;
 * mean is read only for LN. GT: G as a compile-time constant (32 .. 256; 0: G = blockDim.x,
 * for groups narrower than a warp), so that the group's reduction is unrolled with a constant
 * mask instead of a loop of run-time width. */
template <int DT, bool LN, int GT>
static __global__ void __launch_bounds__(NBR_THREADS, 1)
    nbr_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, long long rows, int C) {
    cml__pdl_wait(); /* PDL: first (the trigger stays after the loads, below) */
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    __shared__ float2 red[2][NBR_THREADS / 32];
    /* LN: dbeta accumulators, four columns per float4 ([u / 4][thread]); then the merges */
    __shared__ __align__(16) float combine[NBR_THREADS * V];
    const int G = GT > 0 ? GT : (int)blockDim.x, R = blockDim.y, t = threadIdx.x;
    const int c = t * V;
    const bool mine = c < C; /* this thread's word lies inside the row */
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    /* gamma: this thread's word, re-read from L1 where used (registers are the limit at 1024 threads) */
    const uint4 *gw = gamma && mine ? (const uint4 *)((const T *)gamma + c) : nullptr;
    const bool has_g = gamma != nullptr;
    /* dgamma terms in registers; LN's dbeta terms in shared memory, thread-private ([u / 4][thread]
     * float4s: one conflict-free 16-byte access per four columns, no barrier), which keeps the
     * kernel within 64 registers for 16-bit rows */
    const int nthr = G * R, lin = threadIdx.y * G + t;
    float4 *const db4 = (float4 *)combine + lin;
    const nb_div div(C);
    float dg[V];
#pragma unroll
    for (int u = 0; u < V; u++) dg[u] = 0.0f;
    if (LN)
#pragma unroll
        for (int j = 0; j < V / 4; j++) db4[j * nthr] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int step = (int)gridDim.x * R, nrows = (int)rows; /* rows < 2^31 (host) */
    int row = (int)blockIdx.x * R + (int)threadIdx.y;
    /* element offsets of this thread's word in the current and the next row */
    const size_t soff = (size_t)step * (size_t)C;
    size_t off = (size_t)row * (size_t)C + (size_t)c;
    const uint4 *xw = (const uint4 *)((const T *)x), *dyw = (const uint4 *)((const T *)dy);
    uint4 wx = zero, wd = zero;
    float m = 0.0f, r = 0.0f;
    if (row < nrows) {
        if (mine) {
            wx = __ldg((const uint4 *)((const T *)x + off));
            wd = __ldg((const uint4 *)((const T *)dy + off));
        }
        if (LN) m = mean[row];
        r = rstd[row];
    }
    int parity = 0;
    /* Groups with named barriers (G > 32) all run as many rounds as the block's first group (the most rows): a
     * group past its last row runs on zeros (no loads, +0 terms, no store). Only for compute-sanitizer racecheck,
     * which reports races where the groups of a block pass their named barriers different numbers of times
     * (dev/membound/named_barrier_racecheck.cu); the group would otherwise wait at the __syncthreads below. */
    constexpr bool EVEN = GT > 32;
    const int rounds = EVEN && (int)blockIdx.x * R < nrows ? (nrows - (int)blockIdx.x * R + step - 1) / step : 0;
    for (int round = 0; EVEN ? round < rounds : row < nrows; round++, row += step, off += soff) {
        const int nrow = row + step;
        uint4 nx = zero, nd = zero;
        float nm = 0.0f, nr = 0.0f;
        if (nrow < nrows) { /* the group's next row: in flight through this row's reduction */
            if (mine) {
                nx = __ldg(xw + (off + soff) / V);
                nd = __ldg(dyw + (off + soff) / V);
            }
            if (LN) nm = mean[nrow];
            nr = rstd[nrow];
        }
        /* elements are unpacked where used (twice: before and after the reduction), so only the
         * packed words stay live: registers are the limit at 1024 threads */
        float2 s = make_float2(0.0f, 0.0f);
        uint4 wg = gw ? __ldg(gw) : zero;
#pragma unroll
        for (int u = 0; u < V; u++) {
            const float gv = nbr_elem<DT>(wd, u), xh = (nbr_elem<DT>(wx, u) - m) * r;
            const float g = has_g ? gv * nbr_elem<DT>(wg, u) : gv;
            if (LN) s.x += g;
            s.y += g * xh;
        }
        s = nbr_group_sum<LN>(s, G, red[parity]);
        parity ^= 1; /* alternate scratch arrays: the next row's barrier orders the reuse */
        const float mg = div(s.x), mgx = div(s.y);
        float o[V];
        wg = gw ? __ldg(gw) : zero;
#pragma unroll
        for (int j = 0; j < V / 4; j++) {
            float b[4];
            if (LN) *(float4 *)b = db4[j * nthr];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int u = 4 * j + i;
                const float gv = nbr_elem<DT>(wd, u), xh = (nbr_elem<DT>(wx, u) - m) * r;
                const float g = has_g ? gv * nbr_elem<DT>(wg, u) : gv;
                dg[u] += gv * xh;
                if (LN) b[i] += gv;
                o[u] = LN ? r * (g - mg - xh * mgx) : r * (g - xh * mgx);
            }
            if (LN) db4[j * nthr] = *(const float4 *)b;
        }
        if (mine && (!EVEN || row < nrows)) cml__st16((T *)dx + off, cml__pack16_fast<DT>(o));
        wx = nx, wd = nd, m = nm, r = nr;
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    if (!part) return;      /* uniform across the grid */
    float *out = part + (size_t)blockIdx.x * (LN ? 2 : 1) * (size_t)C;
    if (LN) { /* dbeta: the groups' terms in group order, straight from the accumulators */
        __syncthreads();
        for (int cc = lin; cc < C; cc += nthr) { /* column cc: element cc % V of thread cc / V of each group */
            const float *a = combine + ((cc % V / 4) * nthr + cc / V) * 4 + cc % 4;
            float v = a[0];
            for (int q = 1; q < R; q++) v += a[q * G * 4];
            out[(size_t)C + cc] = v;
        }
    }
    if (R == 1) {
        if (mine)
#pragma unroll
            for (int u = 0; u < V; u++) out[c + u] = dg[u];
        return;
    }
    __syncthreads(); /* the accumulators are read */
    if (mine)
#pragma unroll
        for (int u = 0; u < V; u++) combine[threadIdx.y * G * V + c + u] = dg[u];
    __syncthreads();
    for (int cc = lin; cc < C; cc += nthr) { /* the groups in group order */
        float a = combine[cc];
        for (int q = 1; q < R; q++) a += combine[q * G * V + cc];
        out[cc] = a;
    }
}

/* CML_NORM_BWD_ROWS=0: never the register-row kernel (A/B runs). */
static inline bool nbr_enabled(void) {
    static int cache = -1;
    return cml__env_switch("CML_NORM_BWD_ROWS", &cache);
}

/* Host: the kernel instance for groups of G threads (G constant from a warp up). */
template <int DT, bool LN> static inline decltype(&nbr_kernel<DT, LN, 0>) nbr_pick(int G) {
    switch (G) {
    case 32: return nbr_kernel<DT, LN, 32>;
    case 64: return nbr_kernel<DT, LN, 64>;
    case 128: return nbr_kernel<DT, LN, 128>;
    case 256: return nbr_kernel<DT, LN, 256>;
    default: return nbr_kernel<DT, LN, 0>;
    }
}

/* Host: whether rows of C elements (16-byte aligned, C a multiple of a word) go here, and the
 * geometry: block (G, R), nb blocks (what fits on the GPU at once, at most one per R rows). */
template <int DT, bool LN>
static inline bool nbr_geometry(long long rows, long long C, int sms, int *G, int *R, int *nb) {
    constexpr int V = cml__words<DT>::V;
    const long long W = C / V;
    if (!nbr_enabled() || W > NBR_MAX_WORDS || W < 1 || rows < 1 || rows >= (1ll << 31) - 2 * (long long)sms * NBR_THREADS)
        return false;
    *G = cml__pow2_at_least(W, NBR_THREADS);
    *R = NBR_THREADS / *G;
    if (*G > 32 && *R > NBR_MAX_BARRIER_GROUPS) *R = NBR_MAX_BARRIER_GROUPS; /* G = 64: 512 threads */
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, nbr_pick<DT, LN>(*G), *G * *R, 0) != cudaSuccess ||
        per_sm < 1) {
        (void)cudaGetLastError();
        return false;
    }
    const long long blocks = (rows + *R - 1) / *R, resident = (long long)sms * per_sm;
    *nb = (int)(blocks < resident ? blocks : resident);
    return true;
}

#endif
