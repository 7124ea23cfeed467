/* LayerNorm / RMSNorm backward over long 16-byte aligned rows of 3..16 half chunks, the row's chunks
 * as one thread-block cluster (layernorm_bwd.cu, rmsnorm_bwd.cu).
 *
 * The same work as nbl_kernel (norm_bwd_long.cuh: chunks of 256 threads x KW words, a group of
 * blocks per row walking rows q, q + Q, ..., per-thread dgamma/dbeta accumulators in shared
 * memory written as one partial row per group, summed by nb_partial_sum_kernel), at half chunks
 * (KW 2), but a group is a cluster of `splits` CTAs (rank = chunk), and the row's chunk sums meet in distributed shared
 * memory instead of L2 (nbc_xchg): no ticket, no row-sync workspace, no memset launch, no L2
 * round trips. nbl's merge (publish, reduction on a counter, poll, read the slots through L2)
 * held each block for several L2 latencies per row with the row's blocks in lock step.
 * Order per row: pass 1 (dgamma/dbeta terms, the chunk's sums), publish, issue the loads of the
 * row Q further on, wait for the row's sums, dx. Clusters never wait on each other: the grid
 * needs no co-residency argument (Q is what fits at once, from cudaOccupancyMaxActiveClusters).
 *
 * Measured (session 9, H100, 1024 x 32768, against nbl_kernel in the same binary; README of
 * dev/membound): bf16 LayerNorm +9.7% steady / +9.2% cold, RMSNorm +8.3% / +6.3%; f32 (16 CTAs
 * of half chunks) +5.5% / +4.2%, +2.7% / +1.8%. Tried and left out (dev/membound/
 * s9n_pipe_barrier.patch): the row sums through the cluster barrier (arrive.release after
 * publishing, wait.acquire before dx: ptxas makes the release a MEMBAR.ALL.GPU in every thread
 * and the acquire a CCTL.IVALL; 9-16% slower than this), and pass 1 of the next row between
 * publish and wait (three rows of registers, three blocks per SM: RMSNorm bf16 3-6% slower,
 * LayerNorm bf16 0.6-1.6% faster).
 *
 * The arithmetic per element is nbl_kernel's (the same fused products); the chunk sums are
 * added in rank order after one block reduction each, where nbl folded them through a shuffle
 * tree: new bits for dx; dgamma/dbeta sum Q partial rows, Q from the cluster occupancy. Every
 * CTA of a row adds the same sums in the same order: deterministic. dx may alias dy: a CTA reads
 * its chunk of a row before writing it, and no other CTA touches that chunk. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_CLUSTER_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_CLUSTER_CUH

#include "kernels/cuda/common/hopper.cuh"
#include "kernels/cuda/norm/norm_bwd_long.cuh"

#define NBC_MAX_SPLITS 16 /* the largest cluster (a non-portable size; nbc_max_cluster) */

static __device__ __forceinline__ void nbc_wait(void) {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* Pass 1 of a row held in (wx, wd): adds the row's dgamma/dbeta terms into the thread's
 * accumulators (acc: nbl_kernel's layout) and returns the thread's (sum g, sum g xhat). */
template <int DT, bool LN, int KW, int TH = NBL_THREADS>
static __device__ __forceinline__ float2 nbc_pass1(const uint4 (&wx)[KW], const uint4 (&wd)[KW],
                                                   const typename cml__elem<DT>::type *gw, int nn, float m, float r,
                                                   float4 *acc, int t) {
    constexpr int V = nbl_dims<DT, KW>::V, E = nbl_dims<DT, KW>::E, V4 = V / 4;
    float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * TH + t) * V;
        if (c < nn) {
            float xv[V], gv[V], gm[V];
            cml__unpack16<DT>(wx[k], xv);
            cml__unpack16<DT>(wd[k], gv);
            if (gw) cml__unpack16<DT>(__ldg((const uint4 *)(gw + c)), gm);
            float4 *pg = acc + k * V4 * TH + t, *pb = pg + (E / 4) * TH;
#pragma unroll
            for (int j = 0; j < V4; j++) {
                float ag[4], ab[4];
                *(float4 *)ag = pg[j * TH];
                if (LN) *(float4 *)ab = pb[j * TH];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int u = 4 * j + i;
                    const float xh = (xv[u] - m) * r, g = gw ? gv[u] * gm[u] : gv[u];
                    s.x += g;
                    s.y = __fmaf_rn(g, xh, s.y);
                    ag[i] = __fmaf_rn(gv[u], xh, ag[i]);
                    if (LN) ab[i] += gv[u];
                }
                pg[j * TH] = *(const float4 *)ag;
                if (LN) pb[j * TH] = *(const float4 *)ab;
            }
        }
    }
    return s;
}

/* The block's sums (LayerNorm: both; RMSNorm: sum g xhat in .y), in every thread. */
template <bool LN, int TH = NBL_THREADS> static __device__ __forceinline__ float2 nbc_block_sum(float2 s, float2 *red) {
    if (LN) return cml__group_allreduce_sum2(s, TH, red);
    return make_float2(0.0f, cml__group_allreduce(s.y, TH, (float *)red, cml__sum_op()));
}

/* The thread's dgamma (and, LN, dbeta) accumulators (acc: nbl_kernel's layout) as its columns of the
 * group's partial row pg (dbeta terms C floats after the dgamma terms). */
template <int DT, bool LN, int KW, int TH = NBL_THREADS>
static __device__ __forceinline__ void nbc_store_partial(float *pg, long long C, int nn, const float4 *acc, int t) {
    constexpr int V = nbl_dims<DT, KW>::V, E = nbl_dims<DT, KW>::E, V4 = V / 4;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * TH + t) * V;
        if (c < nn)
#pragma unroll
            for (int j = 0; j < V4; j++) {
                const float4 g = acc[(k * V4 + j) * TH + t];
                cml__st16(pg + c + 4 * j, make_uint4(__float_as_uint(g.x), __float_as_uint(g.y),
                                                     __float_as_uint(g.z), __float_as_uint(g.w)));
                if (LN) {
                    const float4 d = acc[(E / 4 + k * V4 + j) * TH + t];
                    cml__st16(pg + C + c + 4 * j, make_uint4(__float_as_uint(d.x), __float_as_uint(d.y),
                                                             __float_as_uint(d.z), __float_as_uint(d.w)));
                }
            }
    }
}

/* dx of the thread's words of a row (dxr: the chunk's start in dx). */
template <int DT, bool LN, int KW, int TH = NBL_THREADS>
static __device__ __forceinline__ void nbc_dx(typename cml__elem<DT>::type *dxr, const uint4 (&wx)[KW],
                                              const uint4 (&wd)[KW], const typename cml__elem<DT>::type *gw, int nn,
                                              float m, float r, float mg, float mgx, int t) {
    constexpr int V = nbl_dims<DT, KW>::V;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * TH + t) * V;
        if (c < nn) {
            float xv[V], gv[V], gm[V];
            cml__unpack16<DT>(wx[k], xv);
            cml__unpack16<DT>(wd[k], gv);
            if (gw) cml__unpack16<DT>(__ldg((const uint4 *)(gw + c)), gm);
#pragma unroll
            for (int u = 0; u < V; u++) {
                const float xh = (xv[u] - m) * r, g = gw ? gv[u] * gm[u] : gv[u];
                if (LN) xv[u] = r * __fmaf_rn(-xh, mgx, g - mg);
                else xv[u] = r * (gw ? __fmaf_rn(gv[u], gm[u], -__fmul_rn(xh, mgx)) : __fmaf_rn(-xh, mgx, g));
            }
            cml__st16(dxr + c, cml__pack16_fast<DT>(xv));
        }
    }
}

/* One row's words of this chunk (row clamped to a valid one: past the last row no word is
 * loaded and the values are not used); mean / rstd are read at the row's pass 1 (loaded with
 * the words they took two more registers, and the kernel spilled at its 64). */
template <int DT, bool LN, int KW, int TH = NBL_THREADS> struct nbc_row {
    uint4 x[KW], d[KW];
    float m, r;
    __device__ __forceinline__ void load(const void *X, const void *dY, long long row, long long rows, long long C,
                                         long long lo, int nn, int t) {
        typedef typename cml__elem<DT>::type T;
        const long long rr = row < rows ? row : rows - 1;
        const int n = row < rows ? nn : 0;
        cml__words_load<DT, KW>(x, (const T *)X + (size_t)rr * (size_t)C + lo, n, t, TH);
        cml__words_load<DT, KW>(d, (const T *)dY + (size_t)rr * (size_t)C + lo, n, t, TH);
    }
    __device__ __forceinline__ void stats(const float *mean, const float *rstd, long long row) {
        m = LN ? mean[row] : 0.0f;
        r = rstd[row];
    }
};

/* The exchange of the row sums between the cluster's CTAs, for the n-th row of the group's
 * walk (n = 0, 1, ...); every thread calls each member (publish after the block sum). Thread 0
 * pushes its chunk's sums into slot [n % 4][chunk] of every CTA of the cluster with st.async,
 * which completes 8 bytes of transaction on that CTA's mbarrier n % 4; a CTA arms its own
 * mbarrier (one arrival expecting splits x 8 bytes), and its threads wait on it (a poll of
 * their own shared memory) and add the slots in rank order. No fence and no cluster barrier
 * per row. Four sets: a peer can be at most two rows ahead (it needs this CTA's sums of row
 * n + 1 before it sends row n + 2), and set n % 4 (slots and mbarrier phase) is rewritten
 * (row n + 4) only after this CTA has sent row n + 3, which follows a block barrier (the block
 * sum) that all its threads pass after reading row n. */
struct nbc_xchg {
    float2 *slot;  /* [4][NBC_MAX_SPLITS] */
    uint64_t *bar; /* [4] */
    int chunk, splits;
    __device__ __forceinline__ void init(void) const {
        if (threadIdx.x == 0) {
#pragma unroll
            for (int i = 0; i < 4; i++) cml__mbar_init(bar + i, 1);
            cml__mbar_init_fence();
        }
        asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
        nbc_wait(); /* every CTA's barriers initialized before any st.async reaches them */
    }
    __device__ __forceinline__ void publish(int n, float2 s) const {
        if (threadIdx.x == 0) {
            const int set = n & 3;
            cml__mbar_arrive_expect_tx(bar + set, (uint32_t)splits * 8u);
            const uint32_t ls = cml__smem_addr(slot + set * NBC_MAX_SPLITS + chunk), lb = cml__smem_addr(bar + set);
            for (int k = 0; k < splits; k++) {
                uint32_t rs, rb;
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rs) : "r"(ls), "r"((uint32_t)k));
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(lb), "r"((uint32_t)k));
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
                             ::"r"(rs), "f"(s.x), "f"(s.y), "r"(rb)
                             : "memory");
            }
        }
    }
    /* The row's sums, added in rank order (four slots loaded at a time). */
    __device__ __forceinline__ float2 collect(int n) const {
        const int set = n & 3;
        cml__mbar_wait(bar + set, (uint32_t)(n >> 2) & 1u);
        const float2 *p = slot + set * NBC_MAX_SPLITS;
        float2 a = p[0];
        for (int k0 = 0; k0 < splits; k0 += 4) {
            float2 v[4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (k0 + i > 0 && k0 + i < splits) v[i] = p[k0 + i];
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (k0 + i > 0 && k0 + i < splits) a.x += v[i].x, a.y += v[i].y;
        }
        return a;
    }
    /* After the last collect (arrive) and before the CTA exits (wait): no CTA leaves while a
     * peer's st.async may still be on its way to it. */
    __device__ __forceinline__ void finish_arrive(void) const {
        asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    }
    __device__ __forceinline__ void finish_wait(void) const { nbc_wait(); }
};

template <int DT, bool LN, int KW>
static __global__ void __launch_bounds__(NBL_THREADS, 8 / KW)
    nbc_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, long long rows, long long C, int splits, int groups) {
    typedef typename cml__elem<DT>::type T;
    constexpr int E = nbl_dims<DT, KW>::E, CH = nbl_dims<DT, KW>::CH;
    extern __shared__ float4 nbc_acc[]; /* nbl_kernel's accumulator layout */
    __shared__ float2 red[2][32];
    __shared__ float2 slots[4 * NBC_MAX_SPLITS];
    __shared__ uint64_t bars[4];
    const int t = threadIdx.x;
    const int chunk = (int)cml__cluster_rank(), q = (int)(blockIdx.x / (unsigned)splits);
    const nbc_xchg xc = {slots, bars, chunk, splits};
    const long long lo = (long long)chunk * CH;
    const int nn = (int)(C - lo < CH ? C - lo : CH);
    const T *gw = gamma ? (const T *)gamma + lo : nullptr;
    const nb_div div(C);
#pragma unroll
    for (int j = 0; j < (E / 4) * (LN ? 2 : 1); j++) nbc_acc[j * NBL_THREADS + t] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    xc.init();
    long long row = q;
    nbc_row<DT, LN, KW> a, b;
    a.load(x, dy, row, rows, C, lo, nn, t);
    for (int n = 0; row < rows; row += groups, n++) { /* n: the row's index in this group's walk */
        a.stats(mean, rstd, row);
        xc.publish(n, nbc_block_sum<LN>(nbc_pass1<DT, LN, KW>(a.x, a.d, gw, nn, a.m, a.r, nbc_acc, t), red[n & 1]));
        b.load(x, dy, row + groups, rows, C, lo, nn, t); /* in flight through the wait and dx */
        const float2 m2 = xc.collect(n);
        nbc_dx<DT, LN, KW>((T *)dx + (size_t)row * (size_t)C + lo, a.x, a.d, gw, nn, a.m, a.r, div(m2.x), div(m2.y),
                           t);
        a = b;
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    xc.finish_arrive();
    if (part) nbc_store_partial<DT, LN, KW>(part + (size_t)q * (LN ? 2 : 1) * (size_t)C + lo, C, nn, nbc_acc, t);
    xc.finish_wait();
}

/* CML_NORM_BWD_CLUSTER (read once): the largest cluster: 0 = never this kernel (nbl_kernel's
 * row sync through L2, for A/B runs), 8 = the portable size; otherwise (default) 16 (a
 * non-portable size: where a GPU cannot run it, the occupancy query gives 0 and those rows
 * stay with nbl_kernel). compute-sanitizer synccheck needs 8: it reports a correct exchange in
 * clusters of 9 and faults in clusters of 12-16 when several CTAs share an SM (four here), as
 * dev/membound/xchg_synccheck.cu shows; scripts/gpu-check sets it for synccheck only. */
static inline int nbc_max_cluster(void) {
    static int maxc = -1;
    if (maxc < 0) {
        const char *e = getenv("CML_NORM_BWD_CLUSTER");
        maxc = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "8") == 0 ? 8 : 16;
    }
    return maxc;
}

/* Half chunks only (KW 2: 2048 f32 / 4096 bf16 columns, four CTAs per SM), as nbl_kernel takes
 * rows of up to 32 of them: clusters of 8 full chunks (KW 4, two CTAs per SM) were slower than
 * nbl's 16 half chunks at f32 1024 x 32768 (RMSNorm -1.6% steady, -2.7% cold; LayerNorm +1.2% /
 * -0.2%), where 16 half chunks as a cluster gained 2.7-5.5%. */
#define NBC_KW 2

struct nbc_plan {
    int splits, groups;
};

/* A launch of `grid` CTAs of `threads` threads with `smem` bytes of dynamic shared memory, in clusters of `splits`
 * (nbc, nbx and nbs_kernel: a row's chunks as one cluster). */
static inline cudaLaunchConfig_t nb_cluster_config(unsigned grid, unsigned threads, size_t smem, int splits,
                                                   cudaStream_t st, cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)splits;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

template <int DT, bool LN>
static inline cudaLaunchConfig_t nbc_config(unsigned grid, int splits, cudaStream_t st, cudaLaunchAttribute *attr) {
    return nb_cluster_config(grid, NBL_THREADS, nbl_smem<DT, LN, NBC_KW>(), splits, st, attr);
}

/* Clusters of `splits` CTAs of kernel k, launched as cfg, resident at once; 0 where the attributes or
 * the query are refused (a GPU without clusters that large). */
static inline int nbc_resident_clusters(const void *k, const cudaLaunchConfig_t &cfg, int splits) {
    int c = 0;
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg.dynamicSmemBytes) !=
            cudaSuccess ||
        (splits > 8 && cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) ||
        cudaOccupancyMaxActiveClusters(&c, k, &cfg) != cudaSuccess) {
        (void)cudaGetLastError();
        c = 0;
    }
    return c;
}

/* Clusters of `splits` CTAs resident at once on device `dev` (0 when none fits or on error);
 * cached per device and size (sets the kernel's shared-memory and cluster-size attributes). */
template <int DT, bool LN> static inline int nbc_clusters(int dev, int splits) {
    static int cache[16][NBC_MAX_SPLITS + 1];
    if (dev < 0 || dev >= 16 || splits < 2 || splits > NBC_MAX_SPLITS) return 0;
    int &n = cache[dev][splits];
    if (n == 0) {
        const void *k = (const void *)nbc_kernel<DT, LN, NBC_KW>;
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = nbc_config<DT, LN>((unsigned)splits, splits, 0, &attr);
        const int c = nbc_resident_clusters(k, cfg, splits);
        n = c > 0 ? c : -1;
    }
    return n > 0 ? n : 0;
}

/* Host: the cluster launch for rows of 3 .. 16 half chunks, or false (then nbl_kernel's path).
 * Rows of one full chunk (C <= 4096 f32 / 8192 bf16) keep nbl_kernel, which needs no sync. */
template <int DT, bool LN> static inline bool nbc_geometry(int dev, long long rows, long long C, nbc_plan *p) {
    const long long CH = nbl_dims<DT, NBC_KW>::CH, sp = (C + CH - 1) / CH;
    if (!nbc_max_cluster() || C <= nbl_dims<DT, 4>::CH || sp > nbc_max_cluster() || rows <= 0) return false;
    long long g = nbc_clusters<DT, LN>(dev, (int)sp);
    if (g < 1) return false;
    if (g > rows) g = rows;
    *p = nbc_plan{(int)sp, (int)g};
    return true;
}

/* Cluster launches so far, LayerNorm and RMSNorm together (an inline function's static is one
 * object across translation units), so that tests can tell this kernel ran:
 * cml__norm_bwd_cluster_launches (layernorm_bwd.cu). */
inline unsigned long long &nbc_launch_count(void) {
    static unsigned long long n;
    return n;
}

/* Launches the kernel as planned (LN reads mean; part NULL when no dgamma/dbeta is wanted:
 * otherwise (groups, LN ? 2 : 1, C) floats, 16-byte aligned). */
template <int DT, bool LN>
static inline cudaError_t nbc_launch(const nbc_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                     const void *x, const void *gamma, const float *mean, const float *rstd,
                                     long long rows, long long C) {
    /* A plain launch, not PDL: launched early beside the previous kernel's blocks, the clusters (sized
     * to one wave) ran 0.79x at bf16 1024 x 32768 (session 14, dev/membound/README.md) */
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = nbc_config<DT, LN>((unsigned)p.groups * (unsigned)p.splits, p.splits, st, &attr);
    const cudaError_t e = cudaLaunchKernelEx(&cfg, nbc_kernel<DT, LN, NBC_KW>, dx, part, dy, x, gamma, mean, rstd,
                                             rows, C, p.splits, p.groups);
    if (e == cudaSuccess) __atomic_fetch_add(&nbc_launch_count(), 1ull, __ATOMIC_RELAXED);
    return e;
}

/* ---- rows past nbc's and nbl's half-chunk range: ONE cluster of <= 16 CTAs a row (nbx) ---------------------- */

/* nbx_kernel: nbc_kernel's schedule and exchange for rows of up to 16 x 16384 columns (256x262144: the row as
 * one cluster of 16 CTAs, where nbl_kernel took 32 / 64 chunks in lock step through L2; dev/membound/README.md,
 * "Session 14 (helper h14d)"). A CTA is TH = 512 threads, one per SM (registers: 512 x 128 is the whole file;
 * LayerNorm's accumulators 128 KB), and takes `ch` columns of the row (ch <= TH KW V, a multiple of V, the same
 * for every CTA but the last: the row's chunks balanced). 16-bit: KW 4, the next row's words prefetched into
 * registers through the wait and dx, as nbc (L2PF false). f32: KW 8 (64 registers a row of words: two rows
 * would spill), so one row in registers and the next row's chunk prefetched into L2 at the top of the row
 * (cp.async.bulk.prefetch.L2: value-free, no registers), its loads issued word by word right after each dx word
 * (nbx_dx_reload). The arithmetic per element is nbc's (the same helpers): dx, dgamma, dbeta deterministic. */
#define NBX_THREADS 512

template <int DT> struct nbx_dims {
    static constexpr int V = cml__words<DT>::V, KW = DT == CML_F32 ? 8 : 4, E = KW * V, CAP = NBX_THREADS * E;
    static constexpr bool L2PF = DT == CML_F32;
};

template <int DT, bool LN> static inline size_t nbx_smem(void) {
    return (size_t)(LN ? 2 : 1) * nbx_dims<DT>::E * NBX_THREADS * sizeof(float);
}

/* The next row's chunk of x and dy into L2 (lanes 0..7 of warp 0: four pieces a tensor); nothing past the last row. */
template <int DT>
static __device__ __forceinline__ void nbx_prefetch_l2(const void *x, const void *dy, long long row, long long rows,
                                                       long long C, long long lo, int nn) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    const int l = (int)threadIdx.x;
    if (row >= rows || l >= 8) return;
    const int piece = ((nn + 3) / 4 + V - 1) / V * V, start = (l & 3) * piece;
    const int len = nn - start < piece ? nn - start : piece;
    if (len <= 0) return;
    const T *p = (const T *)(l < 4 ? x : dy) + (size_t)row * (size_t)C + lo + start;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"((uint32_t)(len * (int)sizeof(T)))
                 : "memory");
}

/* nbc_dx, then each word's registers reloaded with the next row's word (row clamped as nbc_row's). */
template <int DT, bool LN, int KW, int TH>
static __device__ __forceinline__ void nbx_dx_reload(typename cml__elem<DT>::type *dxr, nbc_row<DT, LN, KW, TH> &a,
                                                     const typename cml__elem<DT>::type *gw, int nn, float mg,
                                                     float mgx, int t, const void *X, const void *dY, long long nrow,
                                                     long long rows, long long C, long long lo) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V;
    const long long rr = nrow < rows ? nrow : rows - 1;
    const int n = nrow < rows ? nn : 0;
    const T *xr = (const T *)X + (size_t)rr * (size_t)C + lo, *dr = (const T *)dY + (size_t)rr * (size_t)C + lo;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * TH + t) * V;
        if (c < nn) {
            float xv[V], gv[V], gm[V];
            cml__unpack16<DT>(a.x[k], xv);
            cml__unpack16<DT>(a.d[k], gv);
            if (gw) cml__unpack16<DT>(__ldg((const uint4 *)(gw + c)), gm);
#pragma unroll
            for (int u = 0; u < V; u++) {
                const float xh = (xv[u] - a.m) * a.r, g = gw ? gv[u] * gm[u] : gv[u];
                if (LN) xv[u] = a.r * __fmaf_rn(-xh, mgx, g - mg);
                else xv[u] = a.r * (gw ? __fmaf_rn(gv[u], gm[u], -__fmul_rn(xh, mgx)) : __fmaf_rn(-xh, mgx, g));
            }
            cml__st16(dxr + c, cml__pack16_fast<DT>(xv));
        }
        a.x[k] = c < n ? __ldg((const uint4 *)(xr + c)) : make_uint4(0, 0, 0, 0);
        a.d[k] = c < n ? __ldg((const uint4 *)(dr + c)) : make_uint4(0, 0, 0, 0);
    }
}

template <int DT, bool LN>
static __global__ void __launch_bounds__(NBX_THREADS, 1)
    nbx_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, long long rows, long long C, int ch, int splits, int groups) {
    typedef typename cml__elem<DT>::type T;
    constexpr int TH = NBX_THREADS, KW = nbx_dims<DT>::KW, E = nbx_dims<DT>::E;
    constexpr bool L2PF = nbx_dims<DT>::L2PF;
    extern __shared__ float4 nbx_acc[]; /* [LN ? 2 : 1][E / 4][TH]: nbc's layout at TH threads */
    __shared__ float2 red[2][32];
    __shared__ float2 slots[4 * NBC_MAX_SPLITS];
    __shared__ uint64_t bars[4];
    const int t = threadIdx.x;
    const int chunk = (int)cml__cluster_rank(), q = (int)(blockIdx.x / (unsigned)splits);
    const nbc_xchg xc = {slots, bars, chunk, splits};
    const long long lo = (long long)chunk * ch;
    const int nn = (int)(C - lo < ch ? C - lo : ch);
    const T *gw = gamma ? (const T *)gamma + lo : nullptr;
    const nb_div div(C);
#pragma unroll
    for (int j = 0; j < (E / 4) * (LN ? 2 : 1); j++) nbx_acc[j * TH + t] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    xc.init();
    long long row = q;
    nbc_row<DT, LN, KW, TH> a;
    a.load(x, dy, row, rows, C, lo, nn, t);
    for (int n = 0; row < rows; row += groups, n++) { /* n: the row's index in this cluster's walk */
        if (L2PF) nbx_prefetch_l2<DT>(x, dy, row + groups, rows, C, lo, nn);
        a.stats(mean, rstd, row);
        xc.publish(n, nbc_block_sum<LN, TH>(nbc_pass1<DT, LN, KW, TH>(a.x, a.d, gw, nn, a.m, a.r, nbx_acc, t),
                                            red[n & 1]));
        T *dxr = (T *)dx + (size_t)row * (size_t)C + lo;
        if (L2PF) {
            const float2 m2 = xc.collect(n);
            nbx_dx_reload<DT, LN, KW, TH>(dxr, a, gw, nn, div(m2.x), div(m2.y), t, x, dy, row + groups, rows, C, lo);
        } else {
            nbc_row<DT, LN, KW, TH> b;
            b.load(x, dy, row + groups, rows, C, lo, nn, t); /* in flight through the wait and dx */
            const float2 m2 = xc.collect(n);
            nbc_dx<DT, LN, KW, TH>(dxr, a.x, a.d, gw, nn, a.m, a.r, div(m2.x), div(m2.y), t);
            a = b;
        }
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    xc.finish_arrive();
    if (part) nbc_store_partial<DT, LN, KW, TH>(part + (size_t)q * (LN ? 2 : 1) * (size_t)C + lo, C, nn, nbx_acc, t);
    xc.finish_wait();
}

/* CML_NORM_BWD_LONGCLUSTER (read once): 0 = never nbx_kernel (the dispatch before session 14: nbl_kernel for
 * these rows), all = wherever a row fits 2..16 of its CTAs (ahead of nbc_kernel); otherwise (default) the
 * LayerNorm rows of 16-bit storage that nbl_kernel would cut into full chunks (C > 131072) up to 16 CTAs
 * (C <= 262144). Session 15 measured it there at 1.05x nbl_kernel (bf16 256 x 262144); RMSNorm bf16 (0.99x)
 * and f32 (0.80-0.85x: the L2 prefetch of the next row does not hide its reload) lose, so they stay on
 * nbl_kernel unless asked for (dev/membound/README.md, "Session 15"). Tests force a mode in-process:
 * cml__norm_bwd_longcluster_force (layernorm_bwd.cu; -1 = the environment's, 0 / 1 / 2 = off / default /
 * all); an inline function's static is one object across the two
 * translation units. */
inline int &nbx_forced(void) {
    static int mode = -1;
    return mode;
}

inline unsigned long long &nbx_launch_count(void) {
    static unsigned long long n;
    return n;
}

inline int &nbx_last_groups(void) { /* the clusters of the last launch (for the tests' log) */
    static int g;
    return g;
}

static inline int nbx_mode(void) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("CML_NORM_BWD_LONGCLUSTER");
        env = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "all") == 0 ? 2 : 1;
    }
    return nbx_forced() >= 0 ? nbx_forced() : env;
}

struct nbx_plan {
    int ch, splits, groups;
};

template <int DT, bool LN>
static inline cudaLaunchConfig_t nbx_config(unsigned grid, int splits, cudaStream_t st, cudaLaunchAttribute *attr) {
    return nb_cluster_config(grid, NBX_THREADS, nbx_smem<DT, LN>(), splits, st, attr);
}

/* Clusters of `splits` nbx CTAs resident at once on device `dev` (0 when none fits or on error); cached. */
template <int DT, bool LN> static inline int nbx_clusters(int dev, int splits) {
    static int cache[16][NBC_MAX_SPLITS + 1];
    if (dev < 0 || dev >= 16 || splits < 2 || splits > NBC_MAX_SPLITS) return 0;
    int &n = cache[dev][splits];
    if (n == 0) {
        const void *k = (const void *)nbx_kernel<DT, LN>;
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = nbx_config<DT, LN>((unsigned)splits, splits, 0, &attr);
        const int c = nbc_resident_clusters(k, cfg, splits);
        n = c > 0 ? c : -1;
    }
    return n > 0 ? n : 0;
}

/* Host: the cluster launch for these rows, or false (then the paths before session 14). */
template <int DT, bool LN> static inline bool nbx_geometry(int dev, long long rows, long long C, nbx_plan *p) {
    const int mode = nbx_mode();
    constexpr long long CAP = nbx_dims<DT>::CAP, V = nbx_dims<DT>::V;
    if (!mode || rows <= 0 || C <= nbl_dims<DT, 4>::CH) return false;
    if (mode == 1 && (!LN || DT == CML_F32 || C <= 32ll * nbl_dims<DT, 2>::CH)) return false;
    long long sp = (C + CAP - 1) / CAP;
    if (sp < 2 || sp > NBC_MAX_SPLITS) return false;
    const long long ch = ((C + sp - 1) / sp + V - 1) / V * V; /* balanced chunks, whole words */
    sp = (C + ch - 1) / ch;
    if (sp < 2) return false;
    long long g = nbx_clusters<DT, LN>(dev, (int)sp);
    if (g < 1) return false;
    if (g > rows) g = rows;
    *p = nbx_plan{(int)ch, (int)sp, (int)g};
    return true;
}

/* Launches the kernel as planned (LN reads mean; part NULL when no dgamma/dbeta is wanted: otherwise
 * (groups, LN ? 2 : 1, C) floats, 16-byte aligned). A plain launch, as nbc's. */
template <int DT, bool LN>
static inline cudaError_t nbx_launch(const nbx_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                     const void *x, const void *gamma, const float *mean, const float *rstd,
                                     long long rows, long long C) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = nbx_config<DT, LN>((unsigned)p.groups * (unsigned)p.splits, p.splits, st, &attr);
    const cudaError_t e = cudaLaunchKernelEx(&cfg, nbx_kernel<DT, LN>, dx, part, dy, x, gamma, mean, rstd, rows, C,
                                             p.ch, p.splits, p.groups);
    if (e == cudaSuccess) {
        __atomic_fetch_add(&nbx_launch_count(), 1ull, __ATOMIC_RELAXED);
        nbx_last_groups() = p.groups;
    }
    return e;
}

#endif
