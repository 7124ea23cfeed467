/* LayerNorm / RMSNorm backward over rows longer than one chunk, staged in shared memory by bulk copies rows ahead
 * (nbs_kernel; layernorm_bwd.cu, rmsnorm_bwd.cu). Two forms: the cluster form (16-bit rows of 2..16 chunks of 16384
 * columns, since session 18) and the row-sync form (rows of more than 16 chunks, f32 ones too: f32 beyond 131072
 * columns, since session 22).
 *
 * Why: the register-row kernels (nbx, nbc, nbl) hold a row's words in registers and issue the next row's loads in
 * one burst after pass 1; at rows of 16k+ columns an SM's share of DRAM (~25 GB/s) needs longer than the rest of the
 * row to bring them, and during pass 1 nothing of the SM is in flight. ncu (session 17, dev/membound/README.md):
 * nbx at bf16 256 x 262144 issued in 51% of the cycles at 63% of DRAM, stalled on long-scoreboard loads. Here one
 * thread issues cp.async.bulk copies of the CTA's chunk of x and dy, a row at a time, into a ring of stages, so that
 * bytes are in flight all the time; the registers the rows no longer take hold the dgamma / dbeta accumulators (up to
 * 32 columns a thread) and gamma's words. Measured against the kernels before (same binary, in turns, steady):
 * the cluster form, LayerNorm bf16 256 x 262144 1.18x, 1024 x 32768 1.05x; RMSNorm 1.13x / 1.01x; the row-sync form
 * (against nbl), f32 256 x 262144 LayerNorm 1.135x (80.0 -> 90.7% of a same-size copy), RMSNorm 1.12x (81.7 ->
 * 91.5%).
 *
 * Shape of the work: a row is `splits` CTAs of NBS_THREADS threads, one CTA per SM, CTA `chunk` owning `ch` columns
 * (balanced chunks of whole words, the last shorter); thread t owns the words t, t + NBS_THREADS, ... of the chunk
 * (kw of them). Q groups of `splits` CTAs walk rows q, q + Q, ... Per row n: wait for its stage, pass 1 (the chunk's
 * sums, dgamma / dbeta terms), block sum, publish the sums to the row's other CTAs; then, D rows behind, collect row
 * n - D's sums, its dx from its stage, and refill that stage with row n - D + nst. The cluster form: a group is a
 * cluster (chunk = rank), the sums go by DSMEM (nbc_xchg: st.async + mbarrier), D = 1, chunks of 16384 columns in 3
 * stages of 64 KB. The row-sync form: a ticket gives a CTA its group and chunk (row_sync.cuh's progress argument),
 * the sums go through L2 (nbs_xc_rows), D = 2 (so that a row's sums went out a whole row before they are merged: with
 * D = 1 the f32 rows ran 1.09x the kernel before, with D = 2 1.135x), at most 3 words a thread so that 4..8 stages
 * fit. Smaller chunks than these lost in either form (session 22): a row costs a CTA ~1.6 us of fixed work.
 *
 * Arithmetic: nbc's per-element formulas (the same products, fused the same way), so dx and dgamma / dbeta match
 * nbc_kernel's up to the order of the row's chunk sums; deterministic (fixed orders; every CTA of a row adds the
 * same sums in the same order). dx may alias dy: a row's dx is written after its stage holds the row, and the copies
 * in flight read other rows. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_STAGED_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_STAGED_CUH

#include <type_traits>

#include "kernels/cuda/norm/norm_bwd_cluster.cuh"

#define NBS_THREADS 512
#define NBS_KW 4 /* most words a thread and tensor: chunks of up to 512 x 4 x 8 = 16384 16-bit / 8192 f32 columns */
#define NBS_STAGES 3 /* the cluster form: x and dy of a chunk, 64 KB a stage, 192 KB (+ ~1 KB static): one CTA an SM */
#define NBS_RING_BYTES (3 * 2 * NBS_KW * NBS_THREADS * 16) /* the ring's bytes at most (either form) */
#define NBG_KW 3 /* the row-sync form: at most 3 words a thread and tensor, so that 4 stages fit (nbg_plan) */
#define NBG_MAX_STAGES 8 /* the row-sync form: stages of 2 x kw x 8 KB, as many as fit the ring, at most this */
#define NBG_LANE_SLOTS 2 /* the row-sync form: a row's chunk sums, at most 2 a lane of the merging warp */
#define NBG_MAX_SPLITS (32 * NBG_LANE_SLOTS)

/* Thread 0: the copies of row `row`'s chunk of x and dy into stage `stage` (x at its start, dy dyw words on; none
 * past the last row). */
template <int DT>
static __device__ __forceinline__ void nbs_fill(uint4 *stage, int dyw, uint64_t *full, const void *x, const void *dy,
                                                long long row, long long rows, long long C, long long lo, int nn) {
    typedef typename cml__elem<DT>::type T;
    if (row >= rows) return;
    const uint32_t bytes = (uint32_t)nn * (uint32_t)sizeof(T);
    cml__mbar_arrive_expect_tx(full, 2 * bytes);
    const size_t off = (size_t)row * (size_t)C + (size_t)lo;
    cml__bulk_load(stage, (const T *)x + off, bytes, full);
    cml__bulk_load(stage + dyw, (const T *)dy + off, bytes, full);
}

/* The row sums' exchange, two forms with one interface (every thread calls each member; n is the row's index in the
 * walk, row the row itself; prefetch and collect are for the row D rows behind):
 * - nbs_xc_cluster: the CTAs of a row are one cluster (nbc_xchg: st.async into every peer's shared memory);
 * - nbs_xc_rows: any number of CTAs a row (up to NBG_MAX_SPLITS), through L2: thread 0 stores the chunk's sums in
 *   its slot of the row-sync workspace (common/row_sync.cuh: slots start all-ones, a state never is, so a slot
 *   tells by itself that it is filled: no counter, no fence); warp 0 merges a row: lane l folds slots l and l + 32
 *   in order, then the shfl-down tree (every CTA of the row alike: the same bits), and hands the sums to the
 *   block through shared memory. Its loads of row n - D's slots go out at the start of row n (prefetch), so the
 *   L2 round trip runs under pass 1 and the block sum; a slot still empty then is polled. */
struct nbs_pre_none {};

struct nbs_xc_cluster {
    typedef nbs_pre_none pre_t;
    nbc_xchg c;
    __device__ __forceinline__ void prefetch(long long, pre_t &) const {}
    __device__ __forceinline__ void publish(int n, long long, float2 s) const { c.publish(n, s); }
    __device__ __forceinline__ float2 collect(int n, long long, const pre_t &) const { return c.collect(n); }
    __device__ __forceinline__ void finish_arrive(void) const { c.finish_arrive(); }
    __device__ __forceinline__ void finish_wait(void) const { c.finish_wait(); }
};

struct nbs_pre_rows {
    unsigned long long u[NBG_LANE_SLOTS];
};

struct nbs_xc_rows {
    typedef nbs_pre_rows pre_t;
    unsigned long long *slots; /* rows x splits */
    float2 *bc;                /* shared: the merged sums for the block */
    int chunk, splits;
    __device__ __forceinline__ void prefetch(long long prow, pre_t &p) const {
        if (threadIdx.x >= 32) return;
        const unsigned long long *rs = slots + prow * (long long)splits;
#pragma unroll
        for (int i = 0; i < NBG_LANE_SLOTS; i++) {
            const int k = (int)threadIdx.x + 32 * i;
            p.u[i] = CML__ROW_SYNC_EMPTY;
            if (k < splits) asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(p.u[i]) : "l"(rs + k));
        }
    }
    __device__ __forceinline__ void publish(int, long long row, float2 s) const {
        if (threadIdx.x == 0)
            *(volatile unsigned long long *)(slots + row * (long long)splits + chunk) = cml__state_pack(s);
    }
    __device__ __forceinline__ float2 collect(int, long long prow, const pre_t &p) const {
        if (threadIdx.x < 32) {
            const unsigned long long *rs = slots + prow * (long long)splits;
            float2 a = make_float2(0.0f, 0.0f);
            bool good = true;
#pragma unroll
            for (int i = 0; i < NBG_LANE_SLOTS; i++) {
                const int k = (int)threadIdx.x + 32 * i;
                if (k < splits) {
                    unsigned long long u = p.u[i];
                    if (u == CML__ROW_SYNC_EMPTY)
                        good = cml__spin_while_eq((const volatile unsigned long long *)(rs + k), CML__ROW_SYNC_EMPTY,
                                                  u) &&
                               good;
                    const float2 v = cml__state_unpack<float2>(u);
                    a.x += v.x, a.y += v.y;
                }
            }
            const bool ok = __all_sync(CML__FULL_MASK, good);
            for (int off = 16; off > 0; off >>= 1) {
                const float2 o = cml__shfl_down_t(a, off);
                a.x += o.x, a.y += o.y;
            }
            if (threadIdx.x == 0) *bc = ok ? a : make_float2(NAN, NAN); /* a broken wait shows as NaN, not a hang */
        }
        __syncthreads(); /* the previous row's readers are past the barrier that ends its dx (nbs_dx_prev) */
        return *bc;
    }
    __device__ __forceinline__ void finish_arrive(void) const {}
    __device__ __forceinline__ void finish_wait(void) const {}
};

/* Row np of the walk (row prow, mean m, rstd r), D rows behind pass 1: its sums from the exchange, its dx from its
 * stage; then, once every thread has read the stage, thread 0 refills it with the row nst further on. */
template <int DT, bool LN, int KW, typename XC>
static __device__ __forceinline__ void nbs_dx_prev(void *dx, const void *gamma, const uint4 (&gw)[KW],
                                                   const XC &xc, const typename XC::pre_t &pre, int np, long long prow,
                                                   float m, float r, uint4 *ring, int kw, int nst, uint64_t *full,
                                                   const void *x, const void *dy, long long rows, long long C,
                                                   long long lo, int nn, const nb_div &div, int groups) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, TH = NBS_THREADS;
    const int t = threadIdx.x, dyw = kw * TH, sl = np % nst;
    const float2 sums = xc.collect(np, prow, pre);
    const float mg = div(sums.x), mgx = div(sums.y);
    uint4 *sx = ring + sl * 2 * dyw;
    const uint4 *sd = sx + dyw;
    T *dxr = (T *)dx + (size_t)prow * (size_t)C + lo;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * TH + t) * V;
        if (c < nn) {
            float xv[V], gv[V], gm[V];
            cml__unpack16<DT>(sx[k * TH + t], xv);
            cml__unpack16<DT>(sd[k * TH + t], gv);
            if (gamma) cml__unpack16<DT>(gw[k], gm);
#pragma unroll
            for (int u = 0; u < V; u++) {
                const float xh = (xv[u] - m) * r, g = gamma ? gv[u] * gm[u] : gv[u];
                if (LN) xv[u] = r * __fmaf_rn(-xh, mgx, g - mg);
                else xv[u] = r * (gamma ? __fmaf_rn(gv[u], gm[u], -__fmul_rn(xh, mgx)) : __fmaf_rn(-xh, mgx, g));
            }
            cml__st16(dxr + c, cml__pack16_fast<DT>(xv));
        }
    }
    __syncthreads(); /* the stage is read: the copy may overwrite it */
    if (t == 0) nbs_fill<DT>(sx, dyw, &full[sl], x, dy, prow + (long long)nst * groups, rows, C, lo, nn);
}

/* RX: the row-sync form (nbs_xc_rows; a ticket gives the CTA its group and chunk, launched with PDL after the
 * workspace's reset) or the cluster form (nbs_xc_cluster; the cluster rank is the chunk). kw: words a thread and
 * tensor that the chunk needs (the stage's x and dy are kw x NBS_THREADS words each), nst: stages in the ring. */
template <int DT, bool LN, bool RX>
static __global__ void __launch_bounds__(NBS_THREADS, 1)
    nbs_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, unsigned *sync, unsigned long long *states, long long rows, long long C, int ch,
               int splits, int groups, int kw, int nst, int pre) {
    typedef typename cml__elem<DT>::type T;
    typedef typename std::conditional<RX, nbs_xc_rows, nbs_xc_cluster>::type XC;
    constexpr int V = cml__words<DT>::V, TH = NBS_THREADS, KW = RX ? NBG_KW : NBS_KW; /* kw <= KW */
    extern __shared__ uint4 nbs_ring[]; /* [nst][x: kw * TH words, dy: kw * TH words] */
    __shared__ float2 red[2][32];
    __shared__ float2 slots[RX ? 1 : 4 * NBC_MAX_SPLITS];
    __shared__ uint64_t bars[4], full[NBG_MAX_STAGES];
    if constexpr (RX)
        if (pre) { /* the chunk of the first row that this CTA's ticket will likely give it (tickets go out in about
                      block order) into L2 while the grids before may still run (cml__pdl_prefetch; a wrong guess costs
                      only bandwidth) */
            const long long lo = (long long)(blockIdx.x % (unsigned)splits) * ch, q0 = blockIdx.x / (unsigned)splits;
            const long long nn0 = C - lo < ch ? C - lo : ch, off = q0 * C + lo;
            if (q0 < rows) {
                cml__prefetch_words_l2<KW, V>((const T *)x + off, nn0, TH, (int)threadIdx.x);
                cml__prefetch_words_l2<KW, V>((const T *)dy + off, nn0, TH, (int)threadIdx.x);
            }
        }
    cml__pdl_wait(); /* the row-sync form runs after its workspace's reset; the cluster form after the grid before */
    const int t = threadIdx.x, sw = 2 * kw * TH;
    int chunk, q;
    XC xc;
    if constexpr (RX) {
        const unsigned b = cml__take_ticket(sync);
        q = (int)(b / (unsigned)splits), chunk = (int)(b % (unsigned)splits);
        xc = XC{states, slots, chunk, splits};
    } else {
        chunk = (int)cml__cluster_rank(), q = (int)(blockIdx.x / (unsigned)splits);
        xc = XC{nbc_xchg{slots, bars, chunk, splits}};
    }
    const long long lo = (long long)chunk * ch;
    const int nn = (int)(C - lo < ch ? C - lo : ch);
    const nb_div div(C);
    if (t == 0)
        for (int s = 0; s < nst; s++) cml__mbar_init(&full[s], 1);
    if constexpr (RX) {
        if (t == 0) cml__mbar_init_fence();
        __syncthreads();
    } else {
        xc.c.init(); /* the cluster barrier also orders the stage barriers' init before their first use */
    }
    if (t == 0)
        for (int s = 0; s < nst; s++)
            nbs_fill<DT>(nbs_ring + s * sw, kw * TH, &full[s], x, dy, q + (long long)s * groups, rows, C, lo, nn);
    uint4 gw[KW]; /* gamma's words of the thread's columns (unused without gamma) */
    float ag[KW * V], ab[KW * V];
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * TH + t) * V;
        gw[k] = gamma && c < nn ? __ldg((const uint4 *)((const T *)gamma + lo + c)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < V; u++) ag[k * V + u] = ab[k * V + u] = 0.0f;
    }
    /* D: rows from a row's pass 1 to its dx (the row-sync form: two, so that its chunks' sums went out a whole row
     * before they are merged); mean / rstd are loaded a row ahead of pass 1 and with the slots for dx */
    constexpr int D = RX ? 2 : 1;
    long long row = q;
    int n = 0;
    float m = LN ? mean[row] : 0.0f, r = rstd[row]; /* q < rows: the host plans at most `rows` groups */
    for (; row < rows; row += groups, n++) { /* n: the row's index in this group's walk */
        typename XC::pre_t pre;
        const long long prow = row - (long long)D * groups, nrow = row + groups;
        float pm = 0.0f, pr = 0.0f, nm = 0.0f, nr = 0.0f;
        if (n >= D) {
            xc.prefetch(prow, pre);
            pm = LN ? mean[prow] : 0.0f, pr = rstd[prow];
        }
        if (nrow < rows) nm = LN ? mean[nrow] : 0.0f, nr = rstd[nrow];
        const uint4 *sx = nbs_ring + (n % nst) * sw, *sd = sx + kw * TH;
        cml__mbar_wait(&full[n % nst], (uint32_t)(n / nst) & 1u);
        float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * TH + t) * V;
            if (c < nn) {
                float xv[V], gv[V], gm[V];
                cml__unpack16<DT>(sx[k * TH + t], xv);
                cml__unpack16<DT>(sd[k * TH + t], gv);
                if (gamma) cml__unpack16<DT>(gw[k], gm);
#pragma unroll
                for (int u = 0; u < V; u++) {
                    const float xh = (xv[u] - m) * r, g = gamma ? gv[u] * gm[u] : gv[u];
                    s.x += g;
                    s.y = __fmaf_rn(g, xh, s.y);
                    ag[k * V + u] = __fmaf_rn(gv[u], xh, ag[k * V + u]);
                    if (LN) ab[k * V + u] += gv[u];
                }
            }
        }
        xc.publish(n, row, nbc_block_sum<LN, TH>(s, red[n & 1]));
        if (n >= D)
            nbs_dx_prev<DT, LN, KW>(dx, gamma, gw, xc, pre, n - D, prow, pm, pr, nbs_ring, kw, nst, full, x, dy,
                                    rows, C, lo, nn, div, groups);
        m = nm, r = nr;
    }
    for (int j = n > D ? n - D : 0; j < n; j++) { /* the walk's last rows' dx */
        typename XC::pre_t pre;
        const long long prow = q + (long long)j * groups;
        xc.prefetch(prow, pre);
        nbs_dx_prev<DT, LN, KW>(dx, gamma, gw, xc, pre, j, prow, LN ? mean[prow] : 0.0f, rstd[prow], nbs_ring, kw, nst,
                            full, x, dy, rows, C, lo, nn, div, groups);
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    xc.finish_arrive();
    if (part) {
        float *pg = part + (size_t)q * (LN ? 2 : 1) * (size_t)C + lo;
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * TH + t) * V;
            if (c < nn)
#pragma unroll
                for (int j = 0; j < V; j += 4) {
                    cml__st16(pg + c + j, make_uint4(__float_as_uint(ag[k * V + j]), __float_as_uint(ag[k * V + j + 1]),
                                                     __float_as_uint(ag[k * V + j + 2]),
                                                     __float_as_uint(ag[k * V + j + 3])));
                    if (LN)
                        cml__st16(pg + C + c + j,
                                  make_uint4(__float_as_uint(ab[k * V + j]), __float_as_uint(ab[k * V + j + 1]),
                                             __float_as_uint(ab[k * V + j + 2]), __float_as_uint(ab[k * V + j + 3])));
                }
        }
    }
    xc.finish_wait();
}

/* ---- host ---------------------------------------------------------------------------------------------------- */

/* CML_NORM_BWD_STAGED (read once): 0 = never nbs_kernel (the dispatch before it, for A/B runs); 1 = the cluster form
 * only: 16-bit rows of 2..16 chunks of 16384 columns (16384 < C <= 262144); 2 (default) = also the row-sync form for
 * rows of more than 16 chunks (f32 too: C > 131072); 3 = the row-sync form for every row of more than one chunk
 * (tests, A/B runs). nbs_geometry. Rows of one chunk are not taken: there (4096 /
 * 8192 columns, a CTA a row at a time) it measured 0.72-0.95x the register-row kernels (dev/membound/README.md,
 * "Session 17"). Tests force a mode in-process: cml__norm_bwd_staged_force (layernorm_bwd.cu; -1 = the
 * environment's). */
inline int &nbs_forced(void) {
    static int mode = -1;
    return mode;
}

inline unsigned long long &nbs_launch_count(void) {
    static unsigned long long n;
    return n;
}

/* The launches of the row-sync form (counted in nbs_launch_count too). */
inline unsigned long long &nbg_launch_count(void) {
    static unsigned long long n;
    return n;
}

static inline int nbs_mode(void) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("CML_NORM_BWD_STAGED");
        env = e && (strcmp(e, "0") == 0 || strcmp(e, "1") == 0 || strcmp(e, "3") == 0) ? atoi(e) : 2;
    }
    return nbs_forced() >= 0 ? nbs_forced() : env;
}

/* The least bytes of x, dy and dx a CTA of the row-sync form moves per row (its fixed costs a row, a block sum and
 * the merge, hide under its copies): 12, 24 and 48 KB measured alike at f32 256 x 262144; the 16-bit rows, which
 * keep the cluster form, ran 0.58-0.9x at the smaller sizes (dev/membound/README.md, "Session 22"). */
#define NBG_MIN_ROW_BYTES (48 * 1024)

/* rows: the row-sync form; kw, nst: the stage's words a thread and tensor, the ring's stages. */
struct nbs_plan {
    int ch, splits, groups, kw, nst;
    bool rows;
};

static inline size_t nbs_smem(const nbs_plan &p) {
    return (size_t)p.nst * 2 * (size_t)p.kw * NBS_THREADS * sizeof(uint4);
}

static inline cudaLaunchConfig_t nbs_config(unsigned grid, int splits, cudaStream_t st, cudaLaunchAttribute *attr) {
    return nb_cluster_config(grid, NBS_THREADS, NBS_RING_BYTES, splits, st, attr);
}

/* Clusters of `splits` CTAs (2..16) resident at once on device `dev`; 0 when none fits or on error; cached. */
template <int DT, bool LN> static inline int nbs_clusters(int dev, int splits) {
    static int cache[16][NBC_MAX_SPLITS + 1];
    if (dev < 0 || dev >= 16 || splits < 2 || splits > NBC_MAX_SPLITS) return 0;
    int &n = cache[dev][splits];
    if (n == 0) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = nbs_config((unsigned)splits, splits, 0, &attr);
        const int c = nbc_resident_clusters((const void *)nbs_kernel<DT, LN, false>, cfg, splits);
        n = c > 0 ? c : -1;
    }
    return n > 0 ? n : 0;
}

/* CTAs of the row-sync form resident at once on a GPU of `sms` SMs (its whole ring's shared memory); 0 on error. */
template <int DT, bool LN> static inline int nbg_resident(int sms) {
    static int per_sm = -1;
    if (per_sm < 0) {
        const void *k = (const void *)nbs_kernel<DT, LN, true>;
        if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, NBS_RING_BYTES) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, NBS_THREADS, NBS_RING_BYTES) != cudaSuccess) {
            (void)cudaGetLastError();
            per_sm = 0;
        }
    }
    return per_sm * sms;
}

/* The row-sync form's plan: `splits` CTAs a row (2 .. NBG_MAX_SPLITS, at most half the resident CTAs: row_sync.cuh's
 * progress argument) of balanced chunks of whole words, at most 3 words a thread (so that 4 stages fit: D = 2 rows
 * wait for their dx while the next is in flight) and each moving at least NBG_MIN_ROW_BYTES a row; `groups` of them
 * walking the rows, as many as fit (at most `rows`); the one that moves the fewest bytes (the rows of the busiest
 * group times the groups, as a group short of a row idles, plus the partial rows written and read back: 8 or 4
 * bytes a column and group) over the fraction of the resident CTAs it keeps busy. */
template <int DT, bool LN> static inline bool nbg_plan(int sms, long long rows, long long C, nbs_plan *p) {
    constexpr long long V = cml__words<DT>::V, CAP = (long long)NBG_KW * NBS_THREADS * V;
    constexpr long long B = 3 * (long long)sizeof(typename cml__elem<DT>::type), PB = LN ? 8 : 4;
    const long long res = nbg_resident<DT, LN>(sms), most = res / 2 < NBG_MAX_SPLITS ? res / 2 : NBG_MAX_SPLITS;
    if (rows <= 0 || res < 4) return false;
    double best = 0.0;
    bool found = false;
    for (long long want = 2; want <= most; want++) {
        const long long ch = ((C + want - 1) / want + V - 1) / V * V, sp = (C + ch - 1) / ch;
        if (sp != want || ch > CAP || ch * B < NBG_MIN_ROW_BYTES) continue;
        const long long g = rows < res / sp ? rows : res / sp;
        const double bytes = (double)((rows + g - 1) / g * g) * (double)(C * B) + 2.0 * (double)(g * C * PB);
        const double cost = bytes * (double)res / (double)(g * sp);
        if (!found || cost < best) {
            const int kw = (int)((ch / V + NBS_THREADS - 1) / NBS_THREADS);
            const long long nst = NBS_RING_BYTES / (2ll * kw * NBS_THREADS * (long long)sizeof(uint4));
            *p = nbs_plan{(int)ch, (int)sp, (int)g, kw, (int)(nst < NBG_MAX_STAGES ? nst : NBG_MAX_STAGES), true};
            best = cost, found = true;
        }
    }
    return found;
}

/* Host: the staged launch for these rows, or false (then the other kernels). 16-byte aligned rows (the caller's
 * vec) longer than one chunk. The cluster form (modes 1 and 2): 16-bit storage, rows of 2..16 chunks, balanced, whole
 * words (so each holds more than 8192 columns: NBS_KW words a thread, none idle). The row-sync form: rows of more than
 * 16 chunks (mode 2; f32 too) or of more than one (mode 3). Smaller chunks than the cluster form's, in either form,
 * measured slower (dev/membound/README.md, "Session 22"): a row costs a CTA ~1.6 us whatever its size. */
template <int DT, bool LN>
static inline bool nbs_geometry(int dev, int sms, long long rows, long long C, nbs_plan *p) {
    constexpr long long V = cml__words<DT>::V, CAP = (long long)NBS_KW * NBS_THREADS * V;
    const int mode = nbs_mode();
    if (!mode || rows <= 0 || C <= CAP) return false;
    if (mode == 3 || (mode == 2 && C > NBC_MAX_SPLITS * CAP)) return nbg_plan<DT, LN>(sms, rows, C, p);
    if (DT == CML_F32 || C > NBC_MAX_SPLITS * CAP) return false;
    long long sp = (C + CAP - 1) / CAP;
    const long long ch = ((C + sp - 1) / sp + V - 1) / V * V;
    sp = (C + ch - 1) / ch;
    long long g = nbs_clusters<DT, LN>(dev, (int)sp);
    if (g < 1) return false;
    if (g > rows) g = rows;
    *p = nbs_plan{(int)ch, (int)sp, (int)g, NBS_KW, NBS_STAGES, false};
    return true;
}

/* Workspace bytes of a plan: the row-sync words (the row-sync form), then at nbs_part_off the partial rows
 * ((groups, LN ? 2 : 1, C) floats) where dgamma / dbeta are wanted. */
static inline size_t nbs_part_off(const nbs_plan &p, long long rows) {
    return p.rows ? nbl_part_off(rows, p.splits) : 0;
}
template <bool LN> static inline size_t nbs_workspace(const nbs_plan &p, long long rows, long long C, bool want) {
    return nbs_part_off(p, rows) + (want ? (size_t)p.groups * (LN ? 2 : 1) * (size_t)C * sizeof(float) : 0);
}

/* Launches the kernel as planned (LN reads mean; ws: nbs_workspace's bytes, 256-byte aligned; want: write the partial
 * rows). The row-sync form resets its words first (a kernel, with PDL) and runs with PDL; the cluster form runs with
 * PDL too (cluster and programmatic-serialization attributes). */
template <int DT, bool LN>
static inline cudaError_t nbs_launch(const nbs_plan &p, cudaStream_t st, void *ws, bool want, void *dx, const void *dy,
                                     const void *x, const void *gamma, const float *mean, const float *rstd,
                                     long long rows, long long C) {
    float *part = want ? (float *)((char *)ws + nbs_part_off(p, rows)) : nullptr;
    const unsigned grid = (unsigned)p.groups * (unsigned)p.splits;
    cudaError_t e;
    if (p.rows) {
        e = cml__row_sync_reset(ws, rows, p.splits, st);
        if (e == cudaSuccess)
            e = cml__launch(nbs_kernel<DT, LN, true>, dim3(grid), dim3(NBS_THREADS), nbs_smem(p), st, dx, part, dy, x,
                            gamma, mean, rstd, (unsigned *)ws, cml__row_sync_slots(ws, rows), rows, C, p.ch, p.splits,
                            p.groups, p.kw, p.nst, cml__pdl_prefetch() ? 1 : 0);
        if (e == cudaSuccess) __atomic_fetch_add(&nbg_launch_count(), 1ull, __ATOMIC_RELAXED);
    } else {
        cudaLaunchAttribute attr[2];
        cudaLaunchConfig_t cfg = nbs_config(grid, p.splits, st, attr);
        cfg.dynamicSmemBytes = nbs_smem(p);
        if (cml__pdl_use()) { /* with PDL: the clusters can be scheduled while the grid before ends (session 32: RMSNorm
                                 bf16 1024 x 32768 1.023x, the rest 0.98-1.01x). An L2 prefetch of the first row before
                                 the wait, as in nbw_kernel, spilled LayerNorm's registers (its 128 are all used). */
            attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[1].val.programmaticStreamSerializationAllowed = 1;
            cfg.numAttrs = 2;
        }
        e = cudaLaunchKernelEx(&cfg, nbs_kernel<DT, LN, false>, dx, part, dy, x, gamma, mean, rstd, (unsigned *)nullptr,
                               (unsigned long long *)nullptr, rows, C, p.ch, p.splits, p.groups, p.kw, p.nst, 0);
    }
    if (e == cudaSuccess) __atomic_fetch_add(&nbs_launch_count(), 1ull, __ATOMIC_RELAXED);
    return e;
}

#endif
