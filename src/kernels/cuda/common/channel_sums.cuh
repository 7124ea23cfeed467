/* Deterministic per-channel sums over image data, for batch-norm statistics
 * and convolution bias gradients. The data is NCHW, seen as (N, C, HW), or
 * NHWC, seen as (N * HW, C). For channel c, over its M = N * HW elements:
 *   s1[c] = sum (a - ca[c]),   s2[c] = sum (a - ca[c]) (b - cb[c])   (s2 only when b is given)
 * ca and cb (f32, C; the centres) may be NULL (zero).
 *
 * Pass 1 (channel_sums_partial_kernel) splits each channel's elements into a
 * number of ranges that depends on the shape alone; one block sums one range
 * (each thread in a fixed stride order in f32, then a fixed tree) into
 * part[split * C + c]. Pass 2 belongs to the caller's own kernel, which reads
 * a channel's total with channel_sums_total (the ranges added in order, in
 * double). No atomics anywhere: the sums are bitwise repeatable. */
#ifndef CML_KERNELS_CUDA_COMMON_CHANNEL_SUMS_CUH
#define CML_KERNELS_CUDA_COMMON_CHANNEL_SUMS_CUH

#include "kernels/cuda/common/block_reduce.cuh"
#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/launch.cuh"

#define CML__CS_THREADS 256
#define CML__CS_NCHW_PER_BLOCK 8192 /* elements of one channel per block (NCHW) */
#define CML__CS_NHWC_ROWS 512       /* rows per block (NHWC: 32 channels x 8 row phases) */
#define CML__CS_MAX_SPLITS 4096

/* a / b and a % b in 32-bit arithmetic when both fit (several times cheaper than 64-bit division). */
static __device__ __forceinline__ long long cml__div(long long a, long long b) {
    if (((unsigned long long)a | (unsigned long long)b) >> 32 == 0) return (long long)((unsigned)a / (unsigned)b);
    return a / b;
}

typedef struct cml__channel_sums_shape {
    long long N, C, HW; /* elements (N, C, HW), or (N * HW, C) when cl */
    bool cl;
    int splits; /* ranges per channel (channel_sums_splits) */
} cml__channel_sums_shape;

/* The number of ranges per channel: a function of the shape alone, so results do not depend on the GPU. */
static inline cml__channel_sums_shape cml__channel_sums_plan(long long N, long long C, long long HW, bool cl) {
    cml__channel_sums_shape s;
    s.N = N, s.C = C, s.HW = HW, s.cl = cl;
    long long per = cl ? CML__CS_NHWC_ROWS : CML__CS_NCHW_PER_BLOCK, splits = (N * HW + per - 1) / per;
    if (splits < 1) splits = 1;
    if (splits > CML__CS_MAX_SPLITS) splits = CML__CS_MAX_SPLITS;
    s.splits = (int)splits;
    return s;
}

/* Blocks of the partial kernel. */
static inline unsigned cml__channel_sums_blocks(const cml__channel_sums_shape *s) {
    long long per_split = s->cl ? (s->C + 31) / 32 : s->C;
    return (unsigned)(per_split * s->splits);
}

/* part (float2, (splits, C)). Block shape: (256) for NCHW, (32, 8) for NHWC. */
template <int DT>
static __global__ void __launch_bounds__(CML__CS_THREADS)
    channel_sums_partial_kernel(float2 *part, const void *a, const float *ca, const void *b, const float *cb,
                                cml__channel_sums_shape sh) {
    cml__pdl_entry();
    const long long M = sh.N * sh.HW;
    float2 acc = make_float2(0.0f, 0.0f);
    if (!sh.cl) {
        __shared__ float2 scratch[32];
        const long long c = blockIdx.x / sh.splits, split = blockIdx.x % sh.splits;
        const long long len = (M + sh.splits - 1) / sh.splits, lo = split * len, hi = lo + len < M ? lo + len : M;
        const float za = ca ? ca[c] : 0.0f, zb = cb ? cb[c] : 0.0f;
        for (long long j = lo + threadIdx.x; j < hi; j += CML__CS_THREADS) {
            const long long n = cml__div(j, sh.HW), e = (n * sh.C + c) * sh.HW + (j - n * sh.HW);
            const float da = cml__ld<DT>(a, e) - za;
            acc.x += da;
            if (b) acc.y += da * (cml__ld<DT>(b, e) - zb);
        }
        acc = cml__group_allreduce_sum2(acc, CML__CS_THREADS, scratch);
        if (threadIdx.x == 0) part[split * sh.C + c] = acc;
        return;
    }
    __shared__ float2 rows[8][32];
    const long long cblocks = (sh.C + 31) / 32, cb_i = blockIdx.x % cblocks, split = blockIdx.x / cblocks;
    const long long c = cb_i * 32 + threadIdx.x;
    const long long len = (M + sh.splits - 1) / sh.splits, lo = split * len, hi = lo + len < M ? lo + len : M;
    if (c < sh.C) {
        const float za = ca ? ca[c] : 0.0f, zb = cb ? cb[c] : 0.0f;
        for (long long r = lo + threadIdx.y; r < hi; r += 8) {
            const long long e = r * sh.C + c;
            const float da = cml__ld<DT>(a, e) - za;
            acc.x += da;
            if (b) acc.y += da * (cml__ld<DT>(b, e) - zb);
        }
    }
    rows[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < sh.C) {
        for (int k = 1; k < 8; k++) acc.x += rows[k][threadIdx.x].x, acc.y += rows[k][threadIdx.x].y;
        part[split * sh.C + c] = acc;
    }
}

/* Launches pass 1 on ctx's stream; fn names the public function in errors. */
template <int DT>
static cml_status cml__channel_sums_launch(cml_ctx *ctx, const char *fn, float2 *part, const void *a, const float *ca,
                                           const void *b, const float *cb, const cml__channel_sums_shape *sh) {
    const unsigned grid = cml__channel_sums_blocks(sh);
    const dim3 block = sh->cl ? dim3(32, 8) : dim3(CML__CS_THREADS);
    cml__launch(channel_sums_partial_kernel<DT>, grid, block, 0, cml__stream(ctx), part, a, ca, b, cb, *sh);
    return cml__cuda_check_launch(fn, "channel_sums_partial_kernel", cml_dtype_name((cml_dtype)DT),
                                  sh->N * sh->C * sh->HW, grid, CML__CS_THREADS);
}

/* Channel c's (s1, s2): its ranges added in order, in double. */
static __device__ __forceinline__ double2 cml__channel_sums_total(const float2 *part, int splits, long long C,
                                                                  long long c) {
    double2 t = make_double2(0.0, 0.0);
    for (int k = 0; k < splits; k++) {
        const float2 p = part[(long long)k * C + c];
        t.x += (double)p.x;
        t.y += (double)p.y;
    }
    return t;
}

#endif
