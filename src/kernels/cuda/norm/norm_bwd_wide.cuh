/* LayerNorm / RMSNorm backward over 16-byte aligned rows of 257..1024 words
 * (16-bit: 2056..8192 columns; f32: 1028..4096), shared by layernorm_bwd.cu and
 * rmsnorm_bwd.cu: nbr_kernel's schedule (norm_bwd_rows.cuh) with KW words of x
 * and dy per thread and row instead of one ("nbw", wide rows).
 *
 * Why: bf16 4096-column rows went to the register-row kernels (ln/rms_bwd_rows_kernel,
 * G = 512, R = 2): one 1024-thread block an SM, one word a thread and tensor,
 * the whole block through two barriers a row and no load in flight during the
 * reduction (ncu, session 8: 40.2 / 30.8 instructions an element at IPC 2.0 /
 * 1.7, DRAM 57 / 62%; 73 / 80% of the same-size copy). Here a block holds R
 * groups of G threads; each group walks its own rows gid, gid + groups, ...
 * with the next row's KW words in flight while it reduces the current one
 * (named barrier of the group's G threads, as nbr_kernel), so the per-row
 * costs (reduction, barrier, mean/rstd, addressing) are spread over KW x 8
 * 16-bit elements a thread instead of 8, and the SM's other groups keep loading.
 *
 * Forms (nbw_geometry): KW = 2, G = 256, R = 4 (1024 threads, 64 registers:
 * rows of <= 512 words, bf16 4096 columns); KW = 4, G = 256 (or 128), 512
 * threads, 128 registers (rows of <= 1024 words). One block an SM in both, so
 * the partial rows are as many as the register-row kernels wrote (132 on an
 * H100). The dgamma (dy xhat) and dbeta (dy) terms of a thread's columns add
 * up over the group's rows in row order in thread-private float4s in dynamic
 * shared memory ([a][k V / 4 + j][thread]: a conflict-free 16-byte access per
 * four columns, no barrier); at the end the block's R groups are added in group
 * order straight from those accumulators into one partial row per block
 * (part[(block, LN ? 2 : 1, C)]), which nb_partial_sum_kernel adds in block
 * order: every sum has a fixed order, results are bitwise repeatable. dx may
 * alias dy: a group reads a row before it writes it, and no other group
 * touches that row.
 *
 * CML_NORM_BWD_WIDE (read once): 0 = never (the previous paths, for A/B runs);
 * unset or 1 = 16-bit rows of 257..512 words in the KW 2 form; all = every
 * dtype, 257..1024 words (KW 2 up to 512 words, KW 4 beyond); k4 = every dtype,
 * 257..1024 words, always the 512-thread KW 4 form. Measured (session 16, H100,
 * 3 rounds in turns against the tree without this file, by time): bf16 4096x4096
 * LayerNorm 1.17x steady / 1.15x cold, RMSNorm 1.10x / 1.10x; "all" and "k4" lost
 * 4-7% at f32 4096x4096 and bf16 16384x8192, hence the 16-bit, <= 512-word default
 * (dev/membound/s16_nbrwide_results/summary.txt). */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_WIDE_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_WIDE_CUH

#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/norm/norm_bwd_partial.cuh"
#include "kernels/cuda/norm/norm_bwd_rows.cuh"

#define NBW_MAX_WORDS 1024

/* Threads of a block: 1024 at KW <= 2 (64 registers), 512 at KW 4 (128 registers). */
template <int KW> struct nbw_dims {
    static constexpr int THREADS = KW <= 2 ? 1024 : 512;
};

/* Dynamic shared memory: the accumulators, (LN ? 2 : 1) x KW words x V floats per thread, then the stage of
 * the next row, KW words of x and of dy per thread, then gamma's words of a row (up to KW x 256: the widest
 * group); LN bf16 at KW 2: 128 + 64 + 8 KB. */
template <int DT, bool LN, int KW> static inline size_t nbw_smem(void) {
    return ((size_t)(LN ? 2 : 1) * KW * cml__words<DT>::V * sizeof(float) + (size_t)2 * KW * sizeof(uint4)) *
               nbw_dims<KW>::THREADS +
           (size_t)KW * 256 * sizeof(uint4);
}

/* Two f32 as one 32-bit word of 16-bit storage (lo in the low half), rounded as cml__pack16_fast does
 * (cvt.rn.*x2.f32: NaN as the canonical NaN); f32: unused. Packing each pair as soon as it is computed
 * keeps 4 registers of a word's dx live instead of 8 floats. */
template <int DT> static __device__ __forceinline__ unsigned nbw_pack2(float lo, float hi) {
    unsigned u;
    if constexpr (DT == CML_BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    return u;
}

/* A 16-byte copy global -> shared that bypasses registers (cp.async.cg: L2 only), and the wait for all of
 * the thread's copies in flight; the thread then reads what it copied (thread-private slots: no barrier). */
static __device__ __forceinline__ void nbw_cp16(void *smem, const void *gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(smem)),
                 "l"(gmem)
                 : "memory");
}

static __device__ __forceinline__ void nbw_cp_wait(void) { asm volatile("cp.async.wait_all;" ::: "memory"); }

/* 0, computed from v: an address offset that makes a later instruction wait until v's load has returned.
 * The stage slots are read (ld.shared into the row's words) and then overwritten by the next cp.async of
 * the same thread; PTX does not order a cp.async after the thread's earlier loads of the same address, so
 * each copy's shared address carries this dependency on the words last read from the stage. */
static __device__ __forceinline__ unsigned nbw_dep(unsigned v) {
    unsigned z;
    asm volatile("and.b32 %0, %1, 0;" : "=r"(z) : "r"(v));
    return z;
}

/* Block (G, R); part (f32, (gridDim.x, LN ? 2 : 1, C)), NULL when no dgamma/dbeta is wanted;
 * mean is read only for LN. Thread t of a group owns the words k G + t, k < KW, of every row
 * of its group (zero past the row: they add nothing to the sums and are not stored). */
template <int DT, bool LN, int KW, int G>
static __global__ void __launch_bounds__(nbw_dims<KW>::THREADS, 1)
    nbw_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
               const float *rstd, long long rows, int C, int pre) {
    typedef typename cml__elem<DT>::type T;
    constexpr int V = cml__words<DT>::V, V4 = V / 4, NA = LN ? 2 : 1;
    constexpr int NT = nbw_dims<KW>::THREADS, R = NT / G;
    static_assert(R >= 1 && R <= NBR_MAX_BARRIER_GROUPS && G >= 32, "groups of whole warps, named barriers 1..8");
    __shared__ float2 red[2][NT / 32];
    /* [a][k V4 + j][thread] float4: accumulator a (0 dgamma, 1 dbeta) of the thread's columns 4j .. 4j + 3
     * of word k */
    extern __shared__ float4 nbw_acc[];
    const int t = threadIdx.x, lin = threadIdx.y * G + t;
    float4 *const acc = nbw_acc + lin;
    /* [k][x, dy][thread] uint4: the group's next row, copied in while this row is reduced */
    uint4 *const stage = (uint4 *)(nbw_acc + NA * KW * V4 * NT) + lin;
    /* gamma's words, copied once: read from global memory on every row, gamma's loads queued behind the row's
     * copies and the first use of each waited for them (ncu, session 18: 27% of the warps' stall samples at
     * bf16 4096 x 4096); a word read from shared memory is ready in tens of cycles */
    uint4 *const gsm = (uint4 *)(nbw_acc + NA * KW * V4 * NT) + 2 * KW * NT;
    const bool has_g = gamma != nullptr;
    const nb_div div(C);
#pragma unroll
    for (int j = 0; j < NA * KW * V4; j++) acc[j * NT] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const int step = (int)gridDim.x * R, nrows = (int)rows; /* rows < 2^31 (host) */
    int row = (int)blockIdx.x * R + (int)threadIdx.y;
    /* element offset of the thread's first word in the current row, and from a row to the group's next */
    const size_t soff = (size_t)step * (size_t)C;
    size_t off = (size_t)row * (size_t)C + (size_t)t * V;
    const T *const xe = (const T *)x, *const dye = (const T *)dy;
    if (pre && row < nrows) { /* the group's first row into L2 while the grid before may run (cml__pdl_prefetch) */
        cml__prefetch_words_l2<KW, V>(xe + (size_t)row * C, C, G, t);
        cml__prefetch_words_l2<KW, V>(dye + (size_t)row * C, C, G, t);
    }
    cml__pdl_wait(); /* PDL: before the first load (the trigger stays after the loads, below) */
    uint4 wx[KW], wd[KW];
    float m = 0.0f, r = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const bool in = row < nrows && (k * G + t) * V < C;
        wx[k] = in ? __ldg((const uint4 *)(xe + off + (size_t)k * G * V)) : zero;
        wd[k] = in ? __ldg((const uint4 *)(dye + off + (size_t)k * G * V)) : zero;
    }
    if (row < nrows) {
        if (LN) m = mean[row];
        r = rstd[row];
    }
    if (has_g) { /* uniform; after the first row's loads are on their way */
        for (int w = lin; w < C / V; w += NT) gsm[w] = __ldg((const uint4 *)gamma + w);
        __syncthreads();
    }
    int parity = 0;
    for (; row < nrows; row += step, off += soff) {
        const int nrow = row + step;
        float nm = 0.0f, nr = 0.0f;
        unsigned z = 0; /* 0, once this row's words have left the stage (nbw_dep) */
#pragma unroll
        for (int k = 0; k < KW; k++) z |= nbw_dep(wx[k].x) | nbw_dep(wd[k].x);
#pragma unroll
        for (int k = 0; k < KW; k++) /* the group's next row: in flight through this row, outside the registers */
            if (nrow < nrows && (k * G + t) * V < C) {
                nbw_cp16(stage + (2 * k) * NT + z, xe + off + soff + (size_t)k * G * V);
                nbw_cp16(stage + (2 * k + 1) * NT + z, dye + off + soff + (size_t)k * G * V);
            }
        if (nrow < nrows) {
            if (LN) nm = mean[nrow];
            nr = rstd[nrow];
        }
        /* pass 1: the row sums, and the dgamma / dbeta terms of the thread's columns (words past the row are
         * zero: they add g = 0 to the sums; their accumulators are never read) */
        float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const bool in = (k * G + t) * V < C;
            const uint4 wg = has_g && in ? gsm[k * G + t] : zero;
#pragma unroll
            for (int j = 0; j < V4; j++) {
                float ag[4], ab[4];
                *(float4 *)ag = acc[(k * V4 + j) * NT];
                if (LN) *(float4 *)ab = acc[(KW * V4 + k * V4 + j) * NT];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int u = 4 * j + i;
                    const float gv = nbr_elem<DT>(wd[k], u), xh = (nbr_elem<DT>(wx[k], u) - m) * r;
                    const float g = has_g ? gv * nbr_elem<DT>(wg, u) : gv;
                    if (LN) s.x += g;
                    s.y += g * xh;
                    ag[i] += gv * xh;
                    if (LN) ab[i] += gv;
                }
                acc[(k * V4 + j) * NT] = *(const float4 *)ag;
                if (LN) acc[(KW * V4 + k * V4 + j) * NT] = *(const float4 *)ab;
            }
        }
        s = nbr_group_sum<LN>(s, G, red[parity]);
        parity ^= 1; /* alternate scratch arrays: the next row's barrier orders the reuse */
        const float mg = div(s.x), mgx = div(s.y);
        /* pass 2: dx, word by word */
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const bool in = (k * G + t) * V < C;
            if (!in) continue;
            const uint4 wg = has_g ? gsm[k * G + t] : zero;
            unsigned o[4]; /* the word of dx: 4 f32, or 4 packed pairs */
#pragma unroll
            for (int j = 0; j < V4; j++) {
                float oj[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int u = 4 * j + i;
                    const float gv = nbr_elem<DT>(wd[k], u), xh = (nbr_elem<DT>(wx[k], u) - m) * r;
                    const float g = has_g ? gv * nbr_elem<DT>(wg, u) : gv;
                    oj[i] = LN ? r * (g - mg - xh * mgx) : r * (g - xh * mgx);
                }
                if constexpr (DT == CML_F32) {
#pragma unroll
                    for (int i = 0; i < 4; i++) o[i] = __float_as_uint(oj[i]);
                } else {
                    o[2 * j] = nbw_pack2<DT>(oj[0], oj[1]);
                    o[2 * j + 1] = nbw_pack2<DT>(oj[2], oj[3]);
                }
            }
            cml__st16((T *)dx + off + (size_t)k * G * V, make_uint4(o[0], o[1], o[2], o[3]));
        }
        nbw_cp_wait(); /* the next row's words are in the stage */
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const bool in = nrow < nrows && (k * G + t) * V < C;
            wx[k] = in ? stage[(2 * k) * NT] : zero;
            wd[k] = in ? stage[(2 * k + 1) * NT] : zero;
        }
        m = nm, r = nr;
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    if (!part) return;            /* uniform across the grid */
    __syncthreads();              /* every group's accumulators are final */
    float *out = part + (size_t)blockIdx.x * NA * (size_t)C;
    const float *af = (const float *)nbw_acc;
    for (int a = 0; a < NA; a++)
        for (int cc = lin; cc < C; cc += NT) {
            /* column cc: element u of word w = k G + tt, i.e. float (a KW V4 + k V4 + u / 4, q G + tt) of group q */
            const int w = cc / V, u = cc % V, k = w / G, tt = w % G;
            const float *p = af + ((size_t)(a * KW * V4 + k * V4 + u / 4) * NT + tt) * 4 + u % 4;
            float v = p[0];
            for (int q = 1; q < R; q++) v += p[(size_t)q * G * 4];
            out[(size_t)a * C + cc] = v;
        }
}

/* CML_NORM_BWD_WIDE (read once; see the top): 0 never, 1 default, 2 "all", 3 "k4". Tests force it
 * in-process through cml__norm_bwd_wide_force (layernorm_bwd.cu); an inline function's static is one
 * object across the two translation units. */
inline int &nbw_forced(void) {
    static int mode = -1; /* -1: the environment's */
    return mode;
}

inline unsigned long long &nbw_launch_count(void) {
    static unsigned long long n;
    return n;
}

inline int &nbw_cap_blocks(void) { /* tests: at most this many blocks (0: no cap), so few rows still walk several a group */
    static int cap = 0;
    return cap;
}

static inline int nbw_mode(void) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("CML_NORM_BWD_WIDE");
        env = !e ? 1 : strcmp(e, "0") == 0 ? 0 : strcmp(e, "all") == 0 ? 2 : strcmp(e, "k4") == 0 ? 3 : 1;
    }
    return nbw_forced() >= 0 ? nbw_forced() : env;
}

/* A launch of the kernel: words per thread, group width, groups per block, blocks. */
struct nbw_plan {
    int kw, G, R, nb;
};

template <int DT, bool LN> static inline decltype(&nbw_kernel<DT, LN, 2, 256>) nbw_pick(int kw, int G) {
    return kw == 2 ? nbw_kernel<DT, LN, 2, 256> : G == 256 ? nbw_kernel<DT, LN, 4, 256> : nbw_kernel<DT, LN, 4, 128>;
}

template <int DT, bool LN> static inline size_t nbw_plan_smem(const nbw_plan &p) {
    return p.kw == 2 ? nbw_smem<DT, LN, 2>() : nbw_smem<DT, LN, 4>();
}

/* Host: whether rows of C elements (16-byte aligned, C a multiple of a word) go here, and the
 * geometry (one block an SM when it fits: nb = min(rows / R rounded up, resident blocks)). Sets the
 * kernel's shared-memory limit (on the current device). */
template <int DT, bool LN> static inline bool nbw_geometry(long long rows, long long C, int sms, nbw_plan *p) {
    constexpr int V = cml__words<DT>::V;
    const int mode = nbw_mode();
    const long long W = C / V;
    if (mode == 0 || W <= NBR_MAX_WORDS || W > NBW_MAX_WORDS || rows < 1 ||
        rows >= (1ll << 31) - 2 * (long long)sms * 1024)
        return false;
    if (mode == 1 && (sizeof(typename cml__elem<DT>::type) != 2 || W > 512)) return false;
    p->kw = mode == 3 || W > 512 ? 4 : 2;
    p->G = p->kw == 4 && W <= 512 ? 128 : 256;
    p->R = (p->kw == 2 ? nbw_dims<2>::THREADS : nbw_dims<4>::THREADS) / p->G;
    const size_t smem = nbw_plan_smem<DT, LN>(*p);
    const auto kern = nbw_pick<DT, LN>(p->kw, p->G);
    int per_sm = 0;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, p->G * p->R, smem) != cudaSuccess ||
        per_sm < 1) {
        (void)cudaGetLastError();
        return false;
    }
    const long long blocks = (rows + p->R - 1) / p->R, resident = (long long)sms * per_sm;
    p->nb = (int)(blocks < resident ? blocks : resident);
    if (nbw_cap_blocks() > 0 && p->nb > nbw_cap_blocks()) p->nb = nbw_cap_blocks();
    return true;
}

/* Launches the kernel as planned (LN reads mean; part NULL when no dgamma/dbeta is wanted); the
 * launch error, if any. */
template <int DT, bool LN>
static inline cudaError_t nbw_launch(const nbw_plan &p, cudaStream_t st, void *dx, float *part, const void *dy,
                                     const void *x, const void *gamma, const float *mean, const float *rstd,
                                     long long rows, long long C) {
    const cudaError_t e = cml__launch(nbw_pick<DT, LN>(p.kw, p.G), p.nb, dim3(p.G, p.R), nbw_plan_smem<DT, LN>(p), st,
                                      dx, part, dy, x, gamma, mean, rstd, rows, (int)C, cml__pdl_prefetch() ? 1 : 0);
    if (e == cudaSuccess) __atomic_fetch_add(&nbw_launch_count(), 1ull, __ATOMIC_RELAXED);
    return e;
}

#endif
