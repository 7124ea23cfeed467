/* LayerNorm / RMSNorm backward over long 16-byte aligned rows, in one
 * kernel that reads x and dy once and writes dx once, dgamma/dbeta included
 * (layernorm_bwd.cu, rmsnorm_bwd.cu).
 *
 * Each row is cut into chunks of 256 threads x KW words (KW = 4: 4096 f32 /
 * 8192 bf16/f16 columns; KW = 2: half that, four blocks per SM instead of
 * two, for rows of at most 32 half chunks: nbl_geometry), one block per chunk. Blocks come in Q groups of `splits`
 * blocks (one per chunk), each group walking its rows q, q + Q, q + 2Q, ... in
 * lock step: for every row a block adds its chunk's dgamma (dy xhat) and
 * dbeta (dy) terms into per-thread accumulators in shared memory (a thread
 * owns the same columns in every row), reduces the chunk's row sums
 * (LayerNorm: sum g and sum g xhat with g = dy gamma; RMSNorm: sum g xhat),
 * issues the loads of its next row, publishes the sums, waits for the row's
 * other chunks and merges them in a fixed order (common/row_sync.cuh), then
 * writes dx from registers; the next row's x and dy arrive meanwhile (with
 * CML_NORM_BWD_DEFER=1, rows of several full chunks: dx one row behind, the row's
 * words parked in shared memory, so that a row's merge comes a whole row after
 * its sums went out and rarely waits; the same arithmetic and bits). At the
 * end each block writes its accumulators as one partial row of its group,
 * (Q, 2, C) for LayerNorm, (Q, C) for RMSNorm, which the files' partial-sum
 * kernels add in group order. Q is what fits on the GPU at once (two blocks
 * per SM over splits), so the partials add 8 Q C bytes (LayerNorm), a few
 * percent of the traffic, where the previous column pass read x and dy a
 * second time (5 streams instead of 3: at most 60% of the copy bandwidth,
 * measured 35-45%). A row of one chunk (splits = 1) needs no row sync. Rows of 3..16 half
 * chunks (longer than one full chunk) take the cluster kernel instead (norm_bwd_cluster.cuh:
 * the chunks of a row exchange their sums through distributed shared memory), unless
 * CML_NORM_BWD_CLUSTER=0; so do rows of more than 32 half chunks up to 16 x 16384 columns (nbx_kernel
 * there: one cluster of <= 16 CTAs of 512 threads a row), unless CML_NORM_BWD_LONGCLUSTER=0.
 *
 * Blocks take their (group, chunk) from a ticket in start order, so a group's
 * blocks are consecutive tickets and every group whose tickets are all out
 * runs to its end without waiting on another group: the grid makes progress
 * whenever one group fits (the host checks 2 x splits <= resident blocks;
 * row_sync.cuh). Deterministic: every sum has a fixed order (the per-thread
 * accumulators add rows in row order, the merges follow row_sync.cuh, the
 * partials are added in group order), whatever block got whichever ticket.
 * dx may alias dy: a block reads its chunk of a row before writing it, and no
 * other block touches that chunk. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_LONG_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_LONG_CUH

#include "kernels/cuda/common/row_sync.cuh"
#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/norm/norm_bwd_partial.cuh"

#define NBL_THREADS 256

/* KW: 16-byte words per thread, tensor and row (4: chunks of 4096 f32 / 8192 bf16 columns, two
 * blocks per SM; 2: half the chunk, four blocks per SM). Columns per block (chunk) and
 * dgamma/dbeta accumulator bytes (shared memory) per block. */
template <int DT, int KW> struct nbl_dims {
    static constexpr int V = cml__words<DT>::V, E = KW * V, CH = NBL_THREADS * E;
};
/* DEFER adds the stage of the deferred dx: the row's 2 KW words of x and dy per thread (32 KB at
 * KW 4: LayerNorm bf16 64 + 32 KB a block, two blocks per SM still fit). */
template <int DT, bool LN, int KW, bool DEFER = false> static inline size_t nbl_smem(void) {
    return (size_t)(LN ? 2 : 1) * nbl_dims<DT, KW>::E * NBL_THREADS * sizeof(float) +
           (DEFER ? (size_t)2 * KW * NBL_THREADS * sizeof(uint4) : 0);
}

struct nbl_sum2 {
    __device__ __forceinline__ float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); }
};

/* dx of one 16-byte word (columns c .. c + V - 1 of the block's chunk) of a row with mean m, rstd
 * r and row means mg (of g) and mgx (of g xhat): one text for both schedules of nbl_kernel, so
 * that both round alike. */
template <int DT, bool LN>
static __device__ __forceinline__ uint4 nbl_dx_word(uint4 wx, uint4 wd, const typename cml__elem<DT>::type *gw, int c,
                                                    float m, float r, float mg, float mgx) {
    constexpr int V = cml__words<DT>::V;
    float xv[V], gv[V], gm[V];
    cml__unpack16<DT>(wx, xv);
    cml__unpack16<DT>(wd, gv);
    if (gw) cml__unpack16<DT>(__ldg((const uint4 *)(gw + c)), gm);
#pragma unroll
    for (int u = 0; u < V; u++) {
        const float xh = (xv[u] - m) * r, g = gw ? gv[u] * gm[u] : gv[u];
        if (LN) xv[u] = r * __fmaf_rn(-xh, mgx, g - mg);
        else xv[u] = r * (gw ? __fmaf_rn(gv[u], gm[u], -__fmul_rn(xh, mgx)) : __fmaf_rn(-xh, mgx, g));
    }
    return cml__pack16_fast<DT>(xv);
}

/* Block-wide, for the deferred schedule: the row means (mean g, mean g xhat) of a row whose block
 * sums this block published earlier (cml__row_publish): merged by warp 0 in the order of
 * cml__row_merge, through stat (the caller keeps a barrier between two calls' reads and writes). */
static __device__ __forceinline__ float2 nbl_row_means(unsigned *sync, unsigned long long *states, long long row,
                                                       int splits, const nb_div &div, float2 &stat) {
    if (threadIdx.x < 32) {
        bool ok;
        const float2 a = cml__row_gather(sync, states, row, splits, make_float2(0.0f, 0.0f), nbl_sum2(), ok);
        if (threadIdx.x == 0) stat = ok ? make_float2(div(a.x), div(a.y)) : make_float2(NAN, NAN);
    }
    __syncthreads();
    return stat;
}

/* Registers: the current row's x and dy (2 x 4 words) and the next row's (prefetched while the
 * row's chunks meet), under 128 (2 blocks per SM: 128 KB of loads in flight per SM). The
 * dgamma/dbeta accumulators live in shared memory, thread-private, four columns per float4
 * ([j][thread]: one 16-byte access per four columns, conflict-free, no barrier; each column
 * still adds its rows in row order), gamma is re-read per row from L1. dx is packed by the
 * hardware (cml__pack16_fast: NaN comes out as the canonical NaN). The products are fused into
 * their sums explicitly (__fmaf_rn, __fmul_rn), the way the compiler fused them before the float4
 * accumulators (RMSNorm's dx with gamma: dy gamma fused, xhat mgx rounded first): left to it,
 * the new code fused other products (f32 rows without gamma: g xhat once for two sums), which
 * changed the last bits of dgamma and dx. */
template <int DT, bool LN, int KW, bool DEFER>
static __global__ void __launch_bounds__(NBL_THREADS, 8 / KW)
    nbl_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, unsigned *sync, unsigned long long *states, long long rows, long long C, int splits,
               int groups) {
    cml__pdl_wait(); /* PDL: first (the trigger stays after the loads, below) */
    typedef typename cml__elem<DT>::type T;
    constexpr int V = nbl_dims<DT, KW>::V, E = nbl_dims<DT, KW>::E, CH = nbl_dims<DT, KW>::CH, V4 = V / 4;
    static_assert(!DEFER || KW == 4, "the deferred schedule is built at KW 4 (at KW 2 it spilled)");
    /* [LN ? 2 : 1][E / 4][NBL_THREADS]: dgamma terms (columns 4j .. 4j + 3 of the thread's E), then dbeta
     * terms; with DEFER then the stage [KW][2][NBL_THREADS] of uint4: the previous row's x and dy words */
    extern __shared__ float4 nbl_acc[];
    __shared__ float2 red[2][32];
    __shared__ float2 stat;
    const int t = threadIdx.x;
    uint4 *const stage = (uint4 *)(nbl_acc + (E / 4) * (LN ? 2 : 1) * NBL_THREADS) + t;
    /* one chunk a row: no block waits for another, so blockIdx serves (and the host skips the reset) */
    const unsigned b = splits == 1 ? blockIdx.x : cml__take_ticket(sync);
    const int q = (int)(b / (unsigned)splits), chunk = (int)(b % (unsigned)splits);
    const long long lo = (long long)chunk * CH;
    const int nn = (int)(C - lo < CH ? C - lo : CH);
    const T *gw = gamma ? (const T *)gamma + lo : nullptr;
    const nb_div div(C);
#pragma unroll
    for (int j = 0; j < (E / 4) * (LN ? 2 : 1); j++) nbl_acc[j * NBL_THREADS + t] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    uint4 wx[KW], wd[KW];
    long long row = q;
    cml__words_load<DT, KW>(wx, (const T *)x + (size_t)row * (size_t)C + lo, row < rows ? nn : 0, t, NBL_THREADS);
    cml__words_load<DT, KW>(wd, (const T *)dy + (size_t)row * (size_t)C + lo, row < rows ? nn : 0, t, NBL_THREADS);
    int parity = 0;
    /* the deferred schedule (rows of one chunk never wait: they keep dx right after the row sums);
     * then the previous row, row - groups (none at row q), waits in the stage for its dx (its mean
     * and rstd are read again, from L1: registers are at 124-128 of 128) */
    const bool defer = DEFER && splits > 1;
    for (; row < rows; row += groups) {
        const float m = LN ? mean[row] : 0.0f, r = rstd[row];
        float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * NBL_THREADS + t) * V;
            if (c < nn) {
                float xv[V], gv[V], gm[V];
                cml__unpack16<DT>(wx[k], xv);
                cml__unpack16<DT>(wd[k], gv);
                if (gw) cml__unpack16<DT>(__ldg((const uint4 *)(gw + c)), gm);
                float4 *pg = nbl_acc + k * V4 * NBL_THREADS + t, *pb = pg + (E / 4) * NBL_THREADS;
#pragma unroll
                for (int j = 0; j < V4; j++) { /* four columns at a time, in column order */
                    float ag[4], ab[4];
                    *(float4 *)ag = pg[j * NBL_THREADS];
                    if (LN) *(float4 *)ab = pb[j * NBL_THREADS];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int u = 4 * j + i;
                        const float xh = (xv[u] - m) * r, g = gw ? gv[u] * gm[u] : gv[u];
                        s.x += g;
                        s.y = __fmaf_rn(g, xh, s.y);
                        ag[i] = __fmaf_rn(gv[u], xh, ag[i]);
                        if (LN) ab[i] += gv[u];
                    }
                    pg[j * NBL_THREADS] = *(const float4 *)ag;
                    if (LN) pb[j * NBL_THREADS] = *(const float4 *)ab;
                }
            }
        }
        if (LN) {
            s = cml__group_allreduce_sum2(s, NBL_THREADS, red[parity]);
        } else {
            s.y = cml__group_allreduce(s.y, NBL_THREADS, (float *)red[parity], cml__sum_op());
            s.x = 0.0f;
        }
        parity ^= 1;
        /* the next row of this group: its loads fly while the row's chunks meet and dx is written */
        const long long nrow = row + groups;
        const size_t noff = (size_t)(nrow < rows ? nrow : row) * (size_t)C + lo;
        uint4 nx[KW], nd[KW];
        if (!defer) {
            cml__words_load<DT, KW>(nx, (const T *)x + noff, nrow < rows ? nn : 0, t, NBL_THREADS);
            cml__words_load<DT, KW>(nd, (const T *)dy + noff, nrow < rows ? nn : 0, t, NBL_THREADS);
            float mg, mgx;
            if (splits == 1) {
                mg = div(s.x);
                mgx = div(s.y);
            } else {
                if (t < 32) {
                    bool ok;
                    const float2 a = cml__row_merge(sync, states, row, chunk, splits, s, make_float2(0.0f, 0.0f),
                                                    nbl_sum2(), ok);
                    if (t == 0) stat = ok ? make_float2(div(a.x), div(a.y)) : make_float2(NAN, NAN);
                }
                __syncthreads();
                mg = stat.x;
                mgx = stat.y;
            }
#pragma unroll
            for (int k = 0; k < KW; k++) {
                const int c = (k * NBL_THREADS + t) * V;
                if (c < nn)
                    cml__st16((T *)dx + (size_t)row * (size_t)C + lo + c,
                              nbl_dx_word<DT, LN>(wx[k], wd[k], gw, c, m, r, mg, mgx));
            }
        } else {
            /* publish this row; swap its words into the stage for the previous row's (the thread's own
             * slots: no barrier), so that the next row's loads go out before any wait and two rows of
             * words are in registers, as in the other schedule; then the previous row's merge (its
             * sums went out a whole row ago: it rarely waits) and its dx */
            if (t < 32) cml__row_publish(sync, states, row, chunk, splits, s);
            uint4 ox[KW], od[KW]; /* the previous row's words (unset at row q, which has none) */
#pragma unroll
            for (int k = 0; k < KW; k++)
                if ((k * NBL_THREADS + t) * V < nn) {
                    ox[k] = stage[(2 * k) * NBL_THREADS], od[k] = stage[(2 * k + 1) * NBL_THREADS];
                    stage[(2 * k) * NBL_THREADS] = wx[k], stage[(2 * k + 1) * NBL_THREADS] = wd[k];
                }
            cml__words_load<DT, KW>(nx, (const T *)x + noff, nrow < rows ? nn : 0, t, NBL_THREADS);
            cml__words_load<DT, KW>(nd, (const T *)dy + noff, nrow < rows ? nn : 0, t, NBL_THREADS);
            if (row != q) {
                const long long prow = row - groups;
                const float pm = LN ? mean[prow] : 0.0f, pr = rstd[prow];
                const float2 mm = nbl_row_means(sync, states, prow, splits, div, stat);
#pragma unroll
                for (int k = 0; k < KW; k++) {
                    const int c = (k * NBL_THREADS + t) * V;
                    if (c < nn)
                        cml__st16((T *)dx + (size_t)prow * (size_t)C + lo + c,
                                  nbl_dx_word<DT, LN>(ox[k], od[k], gw, c, pm, pr, mm.x, mm.y));
                }
            }
        }
#pragma unroll
        for (int k = 0; k < KW; k++) wx[k] = nx[k], wd[k] = nd[k];
    }
    if (defer) { /* the last row's dx (every block has one: q < rows) */
        const long long prow = row - groups;
        const float pm = LN ? mean[prow] : 0.0f, pr = rstd[prow];
        __syncthreads(); /* every thread has read stat for the row before (warp 0 rewrites it) */
        const float2 mm = nbl_row_means(sync, states, prow, splits, div, stat);
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * NBL_THREADS + t) * V;
            if (c < nn)
                cml__st16((T *)dx + (size_t)prow * (size_t)C + lo + c,
                          nbl_dx_word<DT, LN>(stage[(2 * k) * NBL_THREADS], stage[(2 * k + 1) * NBL_THREADS], gw, c,
                                              pm, pr, mm.x, mm.y));
        }
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    if (!part) return;
    /* the partial row: 16-byte aligned (C a multiple of 4, lo of CH, c of V, part 256-byte aligned) */
    float *pg = part + (size_t)q * (LN ? 2 : 1) * (size_t)C + lo;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * NBL_THREADS + t) * V;
        if (c < nn)
#pragma unroll
            for (int j = 0; j < V4; j++) {
                const float4 a = nbl_acc[(k * V4 + j) * NBL_THREADS + t];
                cml__st16(pg + c + 4 * j, make_uint4(__float_as_uint(a.x), __float_as_uint(a.y), __float_as_uint(a.z),
                                                     __float_as_uint(a.w)));
                if (LN) {
                    const float4 d = nbl_acc[(E / 4 + k * V4 + j) * NBL_THREADS + t];
                    cml__st16(pg + C + c + 4 * j, make_uint4(__float_as_uint(d.x), __float_as_uint(d.y),
                                                             __float_as_uint(d.z), __float_as_uint(d.w)));
                }
            }
    }
}

/* CML_NORM_BWD_FUSED (read once): 0 = never this kernel (the previous paths, for A/B runs),
 * all = also for rows the register-row kernels take; otherwise (default) rows longer than those. */
static inline int nbl_mode(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("CML_NORM_BWD_FUSED");
        mode = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "all") == 0 ? 2 : 1;
    }
    return mode;
}

/* CML_NORM_BWD_KW (read once): 16-byte words per thread and tensor, 2 or 4, for A/B runs;
 * 0 (unset) = the default choice of nbl_geometry. */
static inline int nbl_kw(void) {
    static int kw = -1;
    if (kw < 0) {
        const char *e = getenv("CML_NORM_BWD_KW");
        kw = e && strcmp(e, "2") == 0 ? 2 : e && strcmp(e, "4") == 0 ? 4 : 0;
    }
    return kw;
}

/* The deferred schedule (dx one row behind the row sums, from a shared-memory stage) for rows of
 * several chunks, or dx right after its row's merge (the schedule through session 11). Same
 * arithmetic and merge order: the same bits either way. Measured at 256x262144 (session 12,
 * dev/membound/README.md, three rounds in turns): LayerNorm f32 1.19x, RMSNorm f32 1.13x, RMSNorm
 * bf16 1.07x, LayerNorm bf16 0.96x; so by default every f32 norm and the 16-bit RMSNorm (f16 taken
 * like bf16, not measured). CML_NORM_BWD_DEFER (read once): 0 = never, 1 = always (A/B runs).
 * Tests set it in-process through cml__norm_bwd_defer_force (layernorm_bwd.cu); an inline
 * function's static is one object across the two translation units. */
inline int &nbl_defer_forced(void) {
    static int mode = -1; /* -1: the environment's */
    return mode;
}

inline unsigned long long &nbl_defer_launch_count(void) {
    static unsigned long long n;
    return n;
}

template <int DT, bool LN> static inline bool nbl_defer(void) {
    static int env = -2;
    if (env == -2) {
        const char *e = getenv("CML_NORM_BWD_DEFER");
        env = e && strcmp(e, "1") == 0 ? 1 : e && strcmp(e, "0") == 0 ? 0 : -1;
    }
    const int mode = nbl_defer_forced() >= 0 ? nbl_defer_forced() : env;
    return mode >= 0 ? mode == 1 : DT == CML_F32 || !LN;
}

/* A launch of the kernel: words per thread, chunks per row, groups of blocks, the schedule. */
struct nbl_plan {
    int kw, splits, groups;
    bool defer;
};

/* Blocks of the kernel per SM, after setting its shared-memory limit; 0 when it cannot run. */
template <int DT, bool LN, int KW, bool DEFER> static inline int nbl_per_sm(void) {
    const size_t smem = nbl_smem<DT, LN, KW, DEFER>();
    int per_sm = 0;
    if (cudaFuncSetAttribute(nbl_kernel<DT, LN, KW, DEFER>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, nbl_kernel<DT, LN, KW, DEFER>, NBL_THREADS, smem) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return per_sm;
}

/* Whether a launch of sp chunks a row at per_sm blocks per SM takes the deferred schedule: where
 * a row waits on other chunks, at KW 4 only (at KW 2, 64 registers, the deferred kernel spilled),
 * and only with the same residency: the same groups, so the same partial rows and dgamma/dbeta
 * bits (rows of one chunk never wait: deferring would only add the stage's traffic). */
template <int DT, bool LN, int KW> static inline bool nbl_defer_geometry(long long sp, int per_sm) {
    return KW == 4 && sp > 1 && nbl_defer<DT, LN>() && nbl_per_sm<DT, LN, 4, true>() >= per_sm;
}

template <int DT, bool LN, int KW> static inline bool nbl_geometry_kw(long long rows, long long C, int sms, nbl_plan *p) {
    const size_t smem = nbl_smem<DT, LN, KW>();
    if (cudaFuncSetAttribute(nbl_kernel<DT, LN, KW, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    const long long CH = nbl_dims<DT, KW>::CH;
    if (C > CH * 65535 || rows <= 0) return false;
    const long long sp = (C + CH - 1) / CH;
    if (!cml__row_sync_fits((const void *)nbl_kernel<DT, LN, KW, false>, NBL_THREADS, (int)sp, sms, smem)) return false;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, nbl_kernel<DT, LN, KW, false>, NBL_THREADS, smem) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    long long q = (long long)per_sm * sms / sp;
    if (q < 1) q = 1;
    if (q > rows) q = rows;
    if (q * sp >= (1ll << 31)) return false;
    p->kw = KW;
    p->splits = (int)sp;
    p->groups = (int)q;
    /* the deferred schedule where a row waits on other chunks, and only with the same residency:
     * the same groups, so the same partial rows and dgamma/dbeta bits (rows of one chunk never
     * wait: deferring would only add the stage's traffic) */
    p->defer = nbl_defer_geometry<DT, LN, KW>(sp, per_sm);
    return true;
}

/* Host: the launch geometry, or false when the kernel cannot be used (a group of splits blocks
 * does not fit twice on the GPU). groups = Q (at most rows). Sets the kernel's shared-memory
 * limit (on the current device). */
template <int DT, bool LN> static inline bool nbl_geometry(long long rows, long long C, int sms, nbl_plan *p) {
    /* Half chunks (KW 2, four blocks per SM) while a row has at most 32 of them (one slot per
     * lane in the merge) and one full chunk would not do (nbl_short rows keep one chunk and no
     * row sync): 1024x32768 LN f32 2331 -> 2416 GB/s, bf16 1306 -> 1393, RMS bf16
     * 1849 -> 1997; at 256x262144 (64-128 half chunks) they were 1-3% slower (session 5). */
    const long long ch2 = nbl_dims<DT, 2>::CH;
    const int kw = nbl_kw() ? nbl_kw() : C > nbl_dims<DT, 4>::CH && (C + ch2 - 1) / ch2 <= 32 ? 2 : 4;
    return kw == 2 ? nbl_geometry_kw<DT, LN, 2>(rows, C, sms, p) : nbl_geometry_kw<DT, LN, 4>(rows, C, sms, p);
}

/* Launches the kernel as planned (LN reads mean; part NULL when no dgamma/dbeta is wanted). */
template <int DT, bool LN, int KW, bool DEFER>
static inline void nbl_launch_kw(const nbl_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                 const void *x, const void *gamma, const float *mean, const float *rstd, void *ws,
                                 long long rows, long long C) {
    const unsigned grid = (unsigned)p.groups * (unsigned)p.splits;
    cml__launch(nbl_kernel<DT, LN, KW, DEFER>, grid, NBL_THREADS, nbl_smem<DT, LN, KW, DEFER>(), st, dx, part, dy, x,
                gamma, mean, rstd, (unsigned *)ws, cml__row_sync_slots(ws, rows), rows, C, p.splits, p.groups);
}

template <int DT, bool LN>
static inline void nbl_launch(const nbl_plan &p, cudaStream_t st, void *dx, float *part, const void *dy, const void *x,
                              const void *gamma, const float *mean, const float *rstd, void *ws, long long rows,
                              long long C) {
    if (p.defer) { /* KW 4 only (nbl_defer_geometry) */
        nbl_launch_kw<DT, LN, 4, true>(p, st, dx, part, dy, x, gamma, mean, rstd, ws, rows, C);
        __atomic_fetch_add(&nbl_defer_launch_count(), 1ull, __ATOMIC_RELAXED);
    } else if (p.kw == 2) {
        nbl_launch_kw<DT, LN, 2, false>(p, st, dx, part, dy, x, gamma, mean, rstd, ws, rows, C);
    } else {
        nbl_launch_kw<DT, LN, 4, false>(p, st, dx, part, dy, x, gamma, mean, rstd, ws, rows, C);
    }
}

/* Whether rows short enough for the register-row kernels still go here: 16-bit rows of
 * 4097..8192 elements, one chunk (no row sync), where the register-row kernels hold one 16-byte
 * word per thread and tensor and reached 60-66% at 16384x8192 against 70-86% here (device
 * run 2; at 4096 columns, half a chunk, the register rows were faster: 1451 vs 1132 GB/s).
 * (norm_bwd_rows.cuh takes these rows first unless CML_NORM_BWD_ROWS=0.) */
template <int DT> static inline bool nbl_short(long long C) {
    return sizeof(typename cml__elem<DT>::type) == 2 && C > 4096 && C <= 8192;
}

/* Workspace: the row-sync area (row_sync.cuh), then (at this offset) the partial rows. */
static inline size_t nbl_part_off(long long rows, int splits) {
    return (cml__row_sync_bytes(rows, splits) + 255) / 256 * 256;
}

#endif
