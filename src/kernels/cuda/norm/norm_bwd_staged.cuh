/* LayerNorm / RMSNorm backward, 16-bit storage, rows of 2..16 chunks of 16384 columns staged in shared memory by
 * bulk copies rows ahead (nbs_kernel; layernorm_bwd.cu, rmsnorm_bwd.cu).
 *
 * Why: the register-row kernels (nbx, nbc, nbl) hold a row's words in registers and issue the next row's loads in
 * one burst after pass 1; at rows of 16k+ columns an SM's share of DRAM (~25 GB/s) needs longer than the rest of the
 * row to bring them, and during pass 1 nothing of the SM is in flight. ncu (session 17, dev/membound/README.md):
 * nbx at bf16 256 x 262144 issued in 51% of the cycles at 63% of DRAM, stalled on long-scoreboard loads. Here one
 * thread issues cp.async.bulk copies of the CTA's chunk of x and dy, a row at a time, into a ring of NBS_STAGES
 * stages of 64 KB, so that bytes are in flight all the time; the registers the rows no longer take hold the
 * dgamma / dbeta accumulators (32 columns a thread) and gamma's words. Measured against the kernels before (same
 * binary, in turns, steady): LayerNorm bf16 256 x 262144 1.18x, 1024 x 32768 1.05x; RMSNorm 1.13x / 1.01x.
 *
 * Shape of the work: a row is one cluster of `splits` CTAs (2..16) of NBS_THREADS threads, one CTA per SM, CTA
 * `rank` owning `ch` columns (balanced chunks of whole words, the last shorter, each > 8192 columns); thread t owns
 * the words t, t + NBS_THREADS, ... of the chunk (NBS_KW of them). Q clusters walk rows q, q + Q, ... Per row n:
 * wait for its stage, pass 1 (the chunk's sums, dgamma / dbeta terms), block sum, publish the sums to the cluster
 * (nbc_xchg: DSMEM st.async + mbarrier); then, one row behind, collect row n - 1's sums (published a whole row
 * ago, so a peer's skew rarely shows), its dx from the stage, and refill that stage with row n - 1 + NBS_STAGES.
 *
 * Arithmetic: nbc's per-element formulas (the same products, fused the same way), so dx and dgamma / dbeta match
 * nbc_kernel's up to the order of the row's chunk sums; deterministic (fixed orders; every CTA of a row adds the
 * same sums in rank order). dx may alias dy: a row's dx is written after its stage holds the row, and the copies
 * in flight read other rows. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_STAGED_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_STAGED_CUH

#include "kernels/cuda/norm/norm_bwd_cluster.cuh"

#define NBS_THREADS 512
#define NBS_KW 4 /* words a thread and tensor: chunks of up to 512 x 4 x 8 = 16384 columns */
#define NBS_STAGES 3 /* x and dy of a chunk: 64 KB a stage, 192 KB (+ ~1 KB static): one CTA per SM */
#define NBS_STAGE_WORDS (2 * NBS_KW * NBS_THREADS)

/* Thread 0: the copies of row `row`'s chunk of x and dy into stage `st` (none past the last row). */
template <int DT>
static __device__ __forceinline__ void nbs_fill(uint4 *stage, uint64_t *full, const void *x, const void *dy,
                                                long long row, long long rows, long long C, long long lo, int nn) {
    typedef typename cml__elem<DT>::type T;
    if (row >= rows) return;
    const uint32_t bytes = (uint32_t)nn * (uint32_t)sizeof(T);
    cml__mbar_arrive_expect_tx(full, 2 * bytes);
    const size_t off = (size_t)row * (size_t)C + (size_t)lo;
    cml__bulk_load(stage, (const T *)x + off, bytes, full);
    cml__bulk_load(stage + NBS_KW * NBS_THREADS, (const T *)dy + off, bytes, full);
}

/* Row np of the walk (row prow, mean m, rstd r), one row behind pass 1: its sums from the cluster, its dx from its
 * stage; then, once every thread has read the stage, thread 0 refills it with the row NST further on. */
template <int DT, bool LN>
static __device__ __forceinline__ void nbs_dx_prev(void *dx, const void *gamma, const uint4 (&gw)[NBS_KW],
                                                   const nbc_xchg &xc, int np, long long prow, float m, float r,
                                                   uint4 *ring, uint64_t *full, const void *x, const void *dy,
                                                   long long rows, long long C, long long lo, int nn, const nb_div &div,
                                                   int groups) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, TH = NBS_THREADS, KW = NBS_KW, NST = NBS_STAGES, SW = NBS_STAGE_WORDS;
    const int t = threadIdx.x;
    const float2 sums = xc.collect(np);
    const float mg = div(sums.x), mgx = div(sums.y);
    uint4 *sx = ring + (np % NST) * SW;
    const uint4 *sd = sx + KW * TH;
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
    if (t == 0) nbs_fill<DT>(sx, &full[np % NST], x, dy, prow + (long long)NST * groups, rows, C, lo, nn);
}

template <int DT, bool LN>
static __global__ void __launch_bounds__(NBS_THREADS, 1)
    nbs_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, long long rows, long long C, int ch, int splits, int groups) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, TH = NBS_THREADS, KW = NBS_KW, NST = NBS_STAGES, SW = NBS_STAGE_WORDS;
    extern __shared__ uint4 nbs_ring[]; /* [NST][x: KW * TH words, dy: KW * TH words] */
    __shared__ float2 red[2][32];
    __shared__ float2 slots[4 * NBC_MAX_SPLITS];
    __shared__ uint64_t bars[4], full[NST];
    const int t = threadIdx.x;
    const int chunk = (int)cml__cluster_rank(), q = (int)(blockIdx.x / (unsigned)splits);
    const nbc_xchg xc = {slots, bars, chunk, splits};
    const long long lo = (long long)chunk * ch;
    const int nn = (int)(C - lo < ch ? C - lo : ch);
    const nb_div div(C);
    if (t == 0)
        for (int s = 0; s < NST; s++) cml__mbar_init(&full[s], 1);
    xc.init(); /* the cluster barrier also orders the stage barriers' init before their first use */
    if (t == 0)
        for (int s = 0; s < NST; s++)
            nbs_fill<DT>(nbs_ring + s * SW, &full[s], x, dy, q + (long long)s * groups, rows, C, lo, nn);
    uint4 gw[KW]; /* gamma's words of the thread's columns (unused without gamma) */
    float ag[KW * V], ab[KW * V];
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * TH + t) * V;
        gw[k] = gamma && c < nn ? __ldg((const uint4 *)((const T *)gamma + lo + c)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < V; u++) ag[k * V + u] = ab[k * V + u] = 0.0f;
    }
    float pm = 0.0f, pr = 0.0f; /* the previous row's mean and rstd (its dx is one row behind) */
    long long row = q;
    int n = 0;
    for (; row < rows; row += groups, n++) { /* n: the row's index in this cluster's walk */
        const float m = LN ? mean[row] : 0.0f, r = rstd[row];
        const uint4 *sx = nbs_ring + (n % NST) * SW, *sd = sx + KW * TH;
        cml__mbar_wait(&full[n % NST], (uint32_t)(n / NST) & 1u);
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
        xc.publish(n, nbc_block_sum<LN, TH>(s, red[n & 1]));
        if (n > 0) nbs_dx_prev<DT, LN>(dx, gamma, gw, xc, n - 1, row - groups, pm, pr, nbs_ring, full, x, dy,
                                           rows, C, lo, nn, div, groups);
        pm = m, pr = r;
    }
    if (n > 0) nbs_dx_prev<DT, LN>(dx, gamma, gw, xc, n - 1, row - groups, pm, pr, nbs_ring, full, x, dy, rows, C,
                                       lo, nn, div, groups);
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

/* CML_NORM_BWD_STAGED (read once): 0 = never nbs_kernel (the dispatch before it, for A/B runs); otherwise (default)
 * 16-bit rows of 2..16 chunks (16384 < C <= 262144). Rows of one chunk are not taken: there (4096 / 8192 columns,
 * a CTA a row at a time) it measured 0.72-0.95x the register-row kernels (dev/membound/README.md, "Session 17").
 * Tests force a mode in-process: cml__norm_bwd_staged_force (layernorm_bwd.cu; -1 = the environment's). */
inline int &nbs_forced(void) {
    static int mode = -1;
    return mode;
}

inline unsigned long long &nbs_launch_count(void) {
    static unsigned long long n;
    return n;
}

static inline int nbs_mode(void) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("CML_NORM_BWD_STAGED");
        env = e && strcmp(e, "0") == 0 ? 0 : 1;
    }
    return nbs_forced() >= 0 ? nbs_forced() : env;
}

struct nbs_plan {
    int ch, splits, groups;
};

static inline cudaLaunchConfig_t nbs_config(unsigned grid, int splits, cudaStream_t st, cudaLaunchAttribute *attr) {
    return nb_cluster_config(grid, NBS_THREADS, (size_t)NBS_STAGES * NBS_STAGE_WORDS * sizeof(uint4), splits, st,
                             attr);
}

/* Clusters of `splits` CTAs (2..16) resident at once on device `dev`; 0 when none fits or on error; cached. */
template <int DT, bool LN> static inline int nbs_clusters(int dev, int splits) {
    static int cache[16][NBC_MAX_SPLITS + 1];
    if (dev < 0 || dev >= 16 || splits < 2 || splits > NBC_MAX_SPLITS) return 0;
    int &n = cache[dev][splits];
    if (n == 0) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = nbs_config((unsigned)splits, splits, 0, &attr);
        const int c = nbc_resident_clusters((const void *)nbs_kernel<DT, LN>, cfg, splits);
        n = c > 0 ? c : -1;
    }
    return n > 0 ? n : 0;
}

/* Host: the staged launch for these rows, or false (then the other kernels). 16-bit storage and 16-byte aligned
 * rows (the caller's vec) of 2..16 chunks; the chunks balanced, whole words (so each holds more than 8192 columns:
 * NBS_KW words a thread, none idle). */
template <int DT, bool LN> static inline bool nbs_geometry(int dev, long long rows, long long C, nbs_plan *p) {
    constexpr long long V = cml__words<DT>::V, CAP = (long long)NBS_KW * NBS_THREADS * V;
    if (DT == CML_F32 || !nbs_mode() || rows <= 0 || C <= CAP || C > NBC_MAX_SPLITS * CAP) return false;
    long long sp = (C + CAP - 1) / CAP;
    const long long ch = ((C + sp - 1) / sp + V - 1) / V * V;
    sp = (C + ch - 1) / ch;
    long long g = nbs_clusters<DT, LN>(dev, (int)sp);
    if (g < 1) return false;
    if (g > rows) g = rows;
    *p = nbs_plan{(int)ch, (int)sp, (int)g};
    return true;
}

/* Launches the kernel as planned (LN reads mean; part NULL when no dgamma/dbeta is wanted: otherwise
 * (groups, LN ? 2 : 1, C) floats, 16-byte aligned). A plain launch, as nbc's. */
template <int DT, bool LN>
static inline cudaError_t nbs_launch(const nbs_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                     const void *x, const void *gamma, const float *mean, const float *rstd,
                                     long long rows, long long C) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = nbs_config((unsigned)p.groups * (unsigned)p.splits, p.splits, st, &attr);
    const cudaError_t e = cudaLaunchKernelEx(&cfg, nbs_kernel<DT, LN>, dx, part, dy, x, gamma, mean, rstd, rows, C,
                                             p.ch, p.splits, p.groups);
    if (e == cudaSuccess) __atomic_fetch_add(&nbs_launch_count(), 1ull, __ATOMIC_RELAXED);
    return e;
}

#endif
