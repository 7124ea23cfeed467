/* LayerNorm / RMSNorm backward over long 16-byte aligned rows of 2..8 chunks, the row's chunks
 * as one thread-block cluster (layernorm_bwd.cu, rmsnorm_bwd.cu).
 *
 * The same work as nbl_kernel (norm_bwd_long.cuh: chunks of 256 threads x KW words, a group of
 * blocks per row walking rows q, q + Q, ..., per-thread dgamma/dbeta accumulators in shared
 * memory written as one partial row per group, summed by nb_partial_sum_kernel), but a group is
 * a cluster of `splits` CTAs (rank = chunk) and the row's chunk sums meet in distributed shared
 * memory instead of L2: each CTA's thread 0 stores its chunk's (sum g, sum g xhat) into its own
 * shared memory, every thread arrives on the cluster barrier with release semantics, and waits
 * (acquire) only just before the dx pass, then reads the `splits` sums of the row from its
 * peers' shared memory and adds them in rank order (every CTA alike: the same bits in every
 * chunk, whatever the timing). No ticket, no row-sync workspace, no memset launch, no L2 round
 * trips: nbl's merge (publish, reduction on a counter, poll, read the slots through L2) held
 * the block for several L2 latencies per row, and the blocks of a row in lock step; ncu put
 * 46% of the stalls of the row-sync shapes at that wait (session 5, f32).
 *
 * Two orders (PIPE):
 *  0: pass 1 of row i, publish, arrive; issue the loads of row i + Q; wait; merge; dx of row i
 *     (nbl's order, the wait after the next row's loads): two rows of registers.
 *  1: pass 1 of row i + Q runs between the arrive for row i and its wait (the loads of row
 *     i + 2Q in flight meanwhile), so the barrier's skew is covered by useful work: three rows
 *     of registers (KW = 2 only, three blocks per SM).
 * The shared sums are double-buffered by row parity: a CTA writes the slot of row i + 2 only
 * after its wait for row i + 1, which every peer passes only after reading row i's slot.
 * A CTA leaves only after a last cluster barrier, so no peer reads the shared memory of a CTA
 * that has exited. Clusters never wait on each other: the grid needs no co-residency argument
 * (Q is what fits at once, from cudaOccupancyMaxActiveClusters, for one wave).
 *
 * The arithmetic per element is nbl_kernel's (the same fused products); the chunk sums are
 * added in rank order after one block reduction each, where nbl folded them through a shuffle
 * tree: new bits for dx, dgamma/dbeta unchanged. dx may alias dy: a CTA reads its chunk of a row
 * before writing it, and no other CTA touches that chunk. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_CLUSTER_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_CLUSTER_CUH

#include "kernels/cuda/common/hopper.cuh"
#include "kernels/cuda/norm/norm_bwd_long.cuh"

#define NBC_MAX_SPLITS 16 /* non-portable cluster size (CML_NORM_BWD_CLUSTER=16); 8 by default */

static __device__ __forceinline__ void nbc_arrive(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

static __device__ __forceinline__ void nbc_wait(void) {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* The float2 at p's offset in the shared memory of cluster rank `rank`. */
static __device__ __forceinline__ float2 nbc_peer_load(const float2 *p, int rank) {
    uint32_t a;
    float2 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(cml__smem_addr(p)), "r"((uint32_t)rank));
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a) : "memory");
    return v;
}

/* The row's sums: the `splits` CTAs' slots at p, added in rank order (loads four at a time:
 * all sixteen at once held 32 registers and spilled). */
static __device__ __forceinline__ float2 nbc_merge(const float2 *p, int splits) {
    float2 a = nbc_peer_load(p, 0);
    for (int k0 = 0; k0 < splits; k0 += 4) {
        float2 v[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (k0 + i > 0 && k0 + i < splits) v[i] = nbc_peer_load(p, k0 + i);
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (k0 + i > 0 && k0 + i < splits) a.x += v[i].x, a.y += v[i].y;
    }
    return a;
}

/* Pass 1 of a row held in (wx, wd): adds the row's dgamma/dbeta terms into the thread's
 * accumulators (acc: nbl_kernel's layout) and returns the thread's (sum g, sum g xhat). */
template <int DT, bool LN, int KW>
static __device__ __forceinline__ float2 nbc_pass1(const uint4 (&wx)[KW], const uint4 (&wd)[KW],
                                                   const typename cml__elem<DT>::type *gw, int nn, float m, float r,
                                                   float4 *acc, int t) {
    constexpr int V = nbl_dims<DT, KW>::V, E = nbl_dims<DT, KW>::E, V4 = V / 4;
    float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * NBL_THREADS + t) * V;
        if (c < nn) {
            float xv[V], gv[V], gm[V];
            cml__unpack16<DT>(wx[k], xv);
            cml__unpack16<DT>(wd[k], gv);
            if (gw) cml__unpack16<DT>(__ldg((const uint4 *)(gw + c)), gm);
            float4 *pg = acc + k * V4 * NBL_THREADS + t, *pb = pg + (E / 4) * NBL_THREADS;
#pragma unroll
            for (int j = 0; j < V4; j++) {
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
    return s;
}

/* The block's sums (LayerNorm: both; RMSNorm: sum g xhat in .y), in every thread. */
template <bool LN> static __device__ __forceinline__ float2 nbc_block_sum(float2 s, float2 *red) {
    if (LN) return cml__group_allreduce_sum2(s, NBL_THREADS, red);
    return make_float2(0.0f, cml__group_allreduce(s.y, NBL_THREADS, (float *)red, cml__sum_op()));
}

/* dx of the thread's words of a row (dxr: the chunk's start in dx). */
template <int DT, bool LN, int KW>
static __device__ __forceinline__ void nbc_dx(typename cml__elem<DT>::type *dxr, const uint4 (&wx)[KW],
                                              const uint4 (&wd)[KW], const typename cml__elem<DT>::type *gw, int nn,
                                              float m, float r, float mg, float mgx, int t) {
    constexpr int V = nbl_dims<DT, KW>::V;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const int c = (k * NBL_THREADS + t) * V;
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

/* One row's words of this chunk and its mean / rstd (row clamped to a valid one: past the last
 * row no word is loaded and the values are not used). STATS: mean / rstd loaded with the words
 * (PIPE), else at the row's pass 1 (two registers fewer: the plain order spilled with them). */
template <int DT, bool LN, int KW> struct nbc_row {
    uint4 x[KW], d[KW];
    float m, r;
    template <bool STATS>
    __device__ __forceinline__ void load(const void *X, const void *dY, const float *mean, const float *rstd,
                                         long long row, long long rows, long long C, long long lo, int nn, int t) {
        typedef typename cml__elem<DT>::type T;
        const long long rr = row < rows ? row : rows - 1;
        const int n = row < rows ? nn : 0;
        cml__words_load<DT, KW>(x, (const T *)X + (size_t)rr * (size_t)C + lo, n, t, NBL_THREADS);
        cml__words_load<DT, KW>(d, (const T *)dY + (size_t)rr * (size_t)C + lo, n, t, NBL_THREADS);
        if (STATS) stats(mean, rstd, rr);
    }
    __device__ __forceinline__ void stats(const float *mean, const float *rstd, long long row) {
        m = LN ? mean[row] : 0.0f;
        r = rstd[row];
    }
};

/* The exchange of the row sums between the cluster's CTAs, for the n-th row of the group's
 * walk (n = 0, 1, ...). Every thread calls each member (publish after the block sum).
 * ASYNC = false (the plan's): thread 0 stores the sums into its own slot (row parity), every
 * thread arrives on the cluster barrier (release) and waits on it (acquire) before reading the
 * peers' slots through DSMEM. ptxas makes the release a MEMBAR.ALL.GPU in every thread (it
 * waits for the thread's outstanding global stores and loads) and the acquire a CCTL.IVALL (L1,
 * where gamma is re-read from, invalidated every row).
 * ASYNC = true: thread 0 pushes the sums into slot [n % 4][chunk] of every CTA of the cluster
 * with st.async, which completes 8 bytes of transaction on that CTA's mbarrier n % 4; a CTA
 * arms its own mbarrier (one arrival expecting splits x 8 bytes) and its threads wait on it
 * (a local shared-memory poll), then add the slots in rank order from their own shared memory.
 * No fence, no cluster barrier per row. Four sets: a peer can be at most two rows ahead (it
 * needs this CTA's sums of row n + 1 before it sends row n + 2), and this CTA's threads may
 * still read set n % 4 while thread 0 already sent row n + 1 (PIPE order: no block barrier in
 * between); a set is rewritten (row n + 4) only after this CTA has sent row n + 3, which follows
 * a block barrier that all its threads pass after reading row n. */
template <bool ASYNC> struct nbc_xchg {
    float2 *slot;  /* ASYNC: [4][NBC_MAX_SPLITS]; else [2] */
    uint64_t *bar; /* ASYNC: [4] */
    int chunk, splits;
    __device__ __forceinline__ void init(void) const {
        if (!ASYNC) return;
        if (threadIdx.x == 0) {
#pragma unroll
            for (int i = 0; i < 4; i++) cml__mbar_init(bar + i, 1);
            cml__mbar_init_fence();
        }
        asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
        nbc_wait(); /* every CTA's barriers initialized before any st.async reaches them */
    }
    __device__ __forceinline__ void publish(int n, float2 s) const {
        if (!ASYNC) {
            if (threadIdx.x == 0) slot[n & 1] = s;
            nbc_arrive();
            return;
        }
        if (threadIdx.x == 0) {
            const int set = n & 3;
            cml__mbar_arrive_expect_tx(bar + set, (uint32_t)splits * 8u);
            const uint32_t ls = cml__smem_addr(slot + set * NBC_MAX_SPLITS + chunk), lb = cml__smem_addr(bar + set);
            for (int k = 0; k < splits; k++) {
                uint32_t rs, rb;
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rs) : "r"(ls), "r"((uint32_t)k));
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(lb), "r"((uint32_t)k));
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(rs),
                             "f"(s.x), "f"(s.y), "r"(rb)
                             : "memory");
            }
        }
    }
    __device__ __forceinline__ float2 collect(int n) const {
        if (!ASYNC) {
            nbc_wait();
            return nbc_merge(slot + (n & 1), splits);
        }
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
    /* After the last collect (arrive) and before the CTA exits (wait): no CTA leaves while a peer
     * may still read (ASYNC: write) its shared memory. */
    __device__ __forceinline__ void finish_arrive(void) const {
        if (ASYNC) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
        else nbc_arrive();
    }
    __device__ __forceinline__ void finish_wait(void) const { nbc_wait(); }
};

template <int DT, bool LN, int KW, bool PIPE, bool ASYNC>
static __global__ void __launch_bounds__(NBL_THREADS, PIPE ? 3 : 8 / KW)
    nbc_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, long long rows, long long C, int splits, int groups) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = nbl_dims<DT, KW>::V, E = nbl_dims<DT, KW>::E, CH = nbl_dims<DT, KW>::CH, V4 = V / 4;
    extern __shared__ float4 nbc_acc[]; /* nbl_kernel's accumulator layout */
    __shared__ float2 red[2][32];
    __shared__ float2 slots[ASYNC ? 4 * NBC_MAX_SPLITS : 2];
    __shared__ uint64_t bars[4];
    const int t = threadIdx.x;
    const int chunk = (int)cml__cluster_rank(), q = (int)(blockIdx.x / (unsigned)splits);
    const nbc_xchg<ASYNC> xc = {slots, bars, chunk, splits};
    const long long lo = (long long)chunk * CH;
    const int nn = (int)(C - lo < CH ? C - lo : CH);
    const T *gw = gamma ? (const T *)gamma + lo : nullptr;
    const nb_div div(C);
#pragma unroll
    for (int j = 0; j < (E / 4) * (LN ? 2 : 1); j++) nbc_acc[j * NBL_THREADS + t] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    xc.init();
    long long row = q;
    nbc_row<DT, LN, KW> a, b;
    a.template load<PIPE>(x, dy, mean, rstd, row, rows, C, lo, nn, t);
    int n = 0; /* the row's index in this group's walk */
    if (!PIPE) {
        for (; row < rows; row += groups, n++) {
            a.stats(mean, rstd, row);
            xc.publish(n, nbc_block_sum<LN>(nbc_pass1<DT, LN, KW>(a.x, a.d, gw, nn, a.m, a.r, nbc_acc, t), red[n & 1]));
            b.template load<false>(x, dy, mean, rstd, row + groups, rows, C, lo, nn, t); /* through the wait and dx */
            const float2 m2 = xc.collect(n);
            nbc_dx<DT, LN, KW>((T *)dx + (size_t)row * (size_t)C + lo, a.x, a.d, gw, nn, a.m, a.r, div(m2.x),
                               div(m2.y), t);
            a = b;
        }
    } else {
        b.template load<true>(x, dy, mean, rstd, row + groups, rows, C, lo, nn, t);
        if (row < rows)
            xc.publish(0, nbc_block_sum<LN>(nbc_pass1<DT, LN, KW>(a.x, a.d, gw, nn, a.m, a.r, nbc_acc, t), red[0]));
        for (; row < rows; row += groups, n++) {
            const long long nrow = row + groups; /* uniform across the cluster, as every row is */
            nbc_row<DT, LN, KW> c;
            c.template load<true>(x, dy, mean, rstd, nrow + groups, rows, C, lo, nn, t);
            float2 sb = make_float2(0.0f, 0.0f);
            if (nrow < rows)
                sb = nbc_block_sum<LN>(nbc_pass1<DT, LN, KW>(b.x, b.d, gw, nn, b.m, b.r, nbc_acc, t), red[(n + 1) & 1]);
            const float2 m2 = xc.collect(n);
            nbc_dx<DT, LN, KW>((T *)dx + (size_t)row * (size_t)C + lo, a.x, a.d, gw, nn, a.m, a.r, div(m2.x),
                               div(m2.y), t);
            if (nrow < rows) xc.publish(n + 1, sb);
            a = b;
            b = c;
        }
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    xc.finish_arrive();
    if (part) {
        float *pg = part + (size_t)q * (LN ? 2 : 1) * (size_t)C + lo;
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const int c = (k * NBL_THREADS + t) * V;
            if (c < nn)
#pragma unroll
                for (int j = 0; j < V4; j++) {
                    const float4 g = nbc_acc[(k * V4 + j) * NBL_THREADS + t];
                    cml__st16(pg + c + 4 * j, make_uint4(__float_as_uint(g.x), __float_as_uint(g.y),
                                                         __float_as_uint(g.z), __float_as_uint(g.w)));
                    if (LN) {
                        const float4 d = nbc_acc[(E / 4 + k * V4 + j) * NBL_THREADS + t];
                        cml__st16(pg + C + c + 4 * j, make_uint4(__float_as_uint(d.x), __float_as_uint(d.y),
                                                                 __float_as_uint(d.z), __float_as_uint(d.w)));
                    }
                }
        }
    }
    xc.finish_wait();
}

/* CML_NORM_BWD_CLUSTER (read once): 0 = never this kernel (nbl_kernel's row sync through L2,
 * for A/B runs); 16 = clusters of up to 16 CTAs (non-portable size); otherwise (default) 8. */
static inline int nbc_max_cluster(void) {
    static int maxc = -1;
    if (maxc < 0) {
        const char *e = getenv("CML_NORM_BWD_CLUSTER");
        maxc = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "16") == 0 ? 16 : 8;
    }
    return maxc;
}

/* CML_NORM_BWD_PIPE (read once): 1 = the PIPE order at KW = 2, 0 (default) = the plain order. */
static inline int nbc_pipe(void) {
    static int pipe = -1;
    if (pipe < 0) {
        const char *e = getenv("CML_NORM_BWD_PIPE");
        pipe = e && strcmp(e, "1") == 0 ? 1 : 0;
    }
    return pipe;
}

/* CML_NORM_BWD_ASYNC (read once): 0 = the sums through the cluster barrier, 1 (default) =
 * st.async + mbarriers (nbc_xchg). */
static inline int nbc_async(void) {
    static int async = -1;
    if (async < 0) {
        const char *e = getenv("CML_NORM_BWD_ASYNC");
        async = e && strcmp(e, "0") == 0 ? 0 : 1;
    }
    return async;
}

struct nbc_plan {
    int kw, splits, groups, pipe, async;
};

template <int DT, bool LN, int KW>
static inline cudaLaunchConfig_t nbc_config(unsigned grid, int splits, cudaStream_t st, cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(NBL_THREADS);
    cfg.dynamicSmemBytes = nbl_smem<DT, LN, KW>();
    cfg.stream = st;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)splits;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

/* Clusters of `splits` CTAs resident at once on device `dev` (0 when none fits or on error);
 * cached per device and size (sets the kernel's shared-memory and cluster-size attributes). */
template <int DT, bool LN, int KW, bool PIPE, bool ASYNC> static inline int nbc_clusters(int dev, int splits) {
    static int cache[16][NBC_MAX_SPLITS + 1];
    if (dev < 0 || dev >= 16 || splits < 2 || splits > NBC_MAX_SPLITS) return 0;
    int &n = cache[dev][splits];
    if (n == 0) {
        const void *k = (const void *)nbc_kernel<DT, LN, KW, PIPE, ASYNC>;
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = nbc_config<DT, LN, KW>((unsigned)splits, splits, 0, &attr);
        int c = 0;
        if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg.dynamicSmemBytes) !=
                cudaSuccess ||
            (splits > 8 && cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) ||
            cudaOccupancyMaxActiveClusters(&c, k, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();
            c = 0;
        }
        n = c > 0 ? c : -1;
    }
    return n > 0 ? n : 0;
}

template <int DT, bool LN, int KW, bool PIPE, bool ASYNC>
static inline bool nbc_geometry_kw(int dev, long long rows, long long C, nbc_plan *p) {
    const long long CH = nbl_dims<DT, KW>::CH, sp = (C + CH - 1) / CH;
    if (sp < 2 || sp > nbc_max_cluster() || rows <= 0) return false;
    long long g = nbc_clusters<DT, LN, KW, PIPE, ASYNC>(dev, (int)sp);
    if (g < 1) return false;
    if (g > rows) g = rows;
    *p = nbc_plan{KW, (int)sp, (int)g, PIPE, ASYNC};
    return true;
}

template <int DT, bool LN, bool ASYNC> static inline bool nbc_geometry_sync(int dev, long long rows, long long C, nbc_plan *p) {
    if (nbc_pipe() ? nbc_geometry_kw<DT, LN, 2, true, ASYNC>(dev, rows, C, p)
                   : nbc_geometry_kw<DT, LN, 2, false, ASYNC>(dev, rows, C, p))
        return true;
    return nbc_geometry_kw<DT, LN, 4, false, ASYNC>(dev, rows, C, p);
}

/* Host: the cluster launch for rows of 2 .. 8 (16) chunks, or false (then nbl_kernel's path):
 * half chunks (KW 2) where they make at most the cluster size, else full ones (KW 4). Rows of
 * one chunk (C <= the KW 4 chunk) keep nbl_kernel, which needs no sync there. */
template <int DT, bool LN> static inline bool nbc_geometry(int dev, long long rows, long long C, nbc_plan *p) {
    if (!nbc_max_cluster() || C <= nbl_dims<DT, 4>::CH) return false;
    return nbc_async() ? nbc_geometry_sync<DT, LN, true>(dev, rows, C, p) : nbc_geometry_sync<DT, LN, false>(dev, rows, C, p);
}

template <int DT, bool LN, int KW, bool PIPE, bool ASYNC>
static inline cudaError_t nbc_launch_kw(const nbc_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                        const void *x, const void *gamma, const float *mean, const float *rstd,
                                        long long rows, long long C) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = nbc_config<DT, LN, KW>((unsigned)p.groups * (unsigned)p.splits, p.splits, st, &attr);
    return cudaLaunchKernelEx(&cfg, nbc_kernel<DT, LN, KW, PIPE, ASYNC>, dx, part, dy, x, gamma, mean, rstd, rows, C,
                              p.splits, p.groups);
}

template <int DT, bool LN, bool ASYNC>
static inline cudaError_t nbc_launch_sync(const nbc_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                          const void *x, const void *gamma, const float *mean, const float *rstd,
                                          long long rows, long long C) {
    if (p.kw == 4) return nbc_launch_kw<DT, LN, 4, false, ASYNC>(p, st, dx, part, dy, x, gamma, mean, rstd, rows, C);
    if (p.pipe) return nbc_launch_kw<DT, LN, 2, true, ASYNC>(p, st, dx, part, dy, x, gamma, mean, rstd, rows, C);
    return nbc_launch_kw<DT, LN, 2, false, ASYNC>(p, st, dx, part, dy, x, gamma, mean, rstd, rows, C);
}

/* Launches the kernel as planned (LN reads mean; part NULL when no dgamma/dbeta is wanted:
 * otherwise (groups, LN ? 2 : 1, C) floats, 16-byte aligned). */
template <int DT, bool LN>
static inline cudaError_t nbc_launch(const nbc_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                     const void *x, const void *gamma, const float *mean, const float *rstd,
                                     long long rows, long long C) {
    return p.async ? nbc_launch_sync<DT, LN, true>(p, st, dx, part, dy, x, gamma, mean, rstd, rows, C)
                   : nbc_launch_sync<DT, LN, false>(p, st, dx, part, dy, x, gamma, mean, rstd, rows, C);
}

#endif
