/* The second kernel of the LayerNorm / RMSNorm backward (layernorm_bwd.cu,
 * rmsnorm_bwd.cu): dgamma (and dbeta) as the sums, in a fixed order, of the
 * per-block partial rows the first kernel wrote, part[(k, NOUT, C)] for
 * k = 0 .. nb-1 (output o of block k at part[(k NOUT + o) C + c]).
 *
 * Blocks of 32 columns x PH row phases (8, or 32 from 128 partial rows on:
 * nb_phases): phase p adds the partial rows p, p + PH, ... in order, then the
 * PH phases are added in phase order. The previous kernel
 * gave each column one thread that walked all nb partial rows, so a row of
 * 1024 columns ran in 4 blocks, each thread waiting on nb dependent L2 loads
 * (132 for the register-row kernels): microseconds on calls of 10-30 us.
 *
 * The kernel is launched as a programmatic dependent launch: it may be
 * scheduled while the first kernel's last blocks run, and waits for that
 * kernel's completion (and its memory) at griddepcontrol.wait before reading
 * anything, so the launch latency overlaps the first kernel's tail.
 * CML_NORM_BWD_PDL=0 (read once) launches it plainly, for A/B runs. */
#ifndef CML_KERNELS_CUDA_NORM_NORM_BWD_PARTIAL_CUH
#define CML_KERNELS_CUDA_NORM_NORM_BWD_PARTIAL_CUH

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/dtype.cuh"
#include "kernels/cuda/common/pdl.cuh"

#define NBP_COLS 32
#define NBP_PHASES 8

/* x / C for the first kernels' row means, as one multiply where that is bitwise the same:
 * for C a power of two 1/C is exact, so x * (1/C) rounds the same real number as x / C. Other
 * C keep the IEEE division (x times a rounded 1/C can differ in the last bit); the choice is
 * uniform across the grid. */
struct nb_div {
    float inv, c;
    bool pow2;
    __device__ __forceinline__ explicit nb_div(long long C)
        : inv(1.0f / (float)C), c((float)C), pow2((C & (C - 1)) == 0) {}
    __device__ __forceinline__ float operator()(float x) const { return pow2 ? x * inv : x / c; }
};

/* out_o[c] = sum over k = 0 .. nb-1, in order, of part[(k NOUT + o) C + c] (an output may be NULL).
 * discard (C a multiple of 32, part 128-byte aligned): each warp then drops the 128-byte lines it
 * has read from L2 (discard.global.L2), so that the partial rows, dirty in L2 and never read
 * again, are not written back to DRAM when evicted (up to 8% of the traffic: 17 MB at LayerNorm
 * 1024x32768). */
template <int DT, int NOUT, int PH>
static __global__ void __launch_bounds__(NBP_COLS * PH)
    nb_partial_sum_kernel(void *out0, void *out1, float *part, int nb, long long C, bool discard) {
    __shared__ float sm[NOUT][PH][NBP_COLS + 1];
    cml__pdl_entry(); /* launched with PDL by its own switch (CML_NORM_BWD_PDL, below), not cml__launch */
    const long long c = (long long)blockIdx.x * NBP_COLS + threadIdx.x;
    float a[NOUT];
#pragma unroll
    for (int o = 0; o < NOUT; o++) a[o] = 0.0f;
    if (c < C) {
#pragma unroll 4
        for (int k = threadIdx.y; k < nb; k += PH)
#pragma unroll
            for (int o = 0; o < NOUT; o++) a[o] += part[((size_t)k * NOUT + o) * (size_t)C + c];
    }
    if (discard) {
        __syncwarp(); /* the warp's loads of these lines come first */
        const int lines = (nb - (int)threadIdx.y + PH - 1) / PH * NOUT;
        for (int i = threadIdx.x; i < lines; i += 32) {
            const int k = (int)threadIdx.y + i / NOUT * PH, o = i % NOUT;
            const float *line = part + ((size_t)k * NOUT + o) * (size_t)C + (size_t)blockIdx.x * NBP_COLS;
            asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
        }
    }
#pragma unroll
    for (int o = 0; o < NOUT; o++) sm[o][threadIdx.y][threadIdx.x] = a[o];
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
#pragma unroll
    for (int o = 0; o < NOUT; o++) {
        float v = sm[o][0][threadIdx.x];
        for (int p = 1; p < PH; p++) v += sm[o][p][threadIdx.x];
        void *out = o == 0 ? out0 : out1;
        if (out) cml__st<DT>(out, c, v);
    }
}

/* The same sums for few partial rows (nb <= NBP4_MAX_ROWS: the 7-8 groups of the kernels for the longest rows), C a
 * multiple of 4: a thread takes 4 columns and adds its nb float4 per output in order k = 0 .. nb-1, all loads issued up
 * front. The kernel above runs a block per 32 columns with one load a thread at nb = 7 (8192 blocks of short
 * lives at 262144 columns: ~10 us, against ~3 us for the bytes); this one reads the 15 MB (LayerNorm 256 x 262144)
 * in 256 blocks. Another fixed order (one chain instead of 8 phases): other bits than the kernel above, the same on
 * every run. discard as above: lanes 0, 8, 16, 24 drop the warp's four 128-byte lines of each partial row. */
#define NBP4_MAX_ROWS 8
#define NBP4_THREADS 256

template <int DT, int NOUT>
static __global__ void __launch_bounds__(NBP4_THREADS)
    nb_partial_sum4_kernel(void *out0, void *out1, const float *part, int nb, long long C, bool discard) {
    cml__pdl_entry(); /* launched like nb_partial_sum_kernel */
    const long long c = ((long long)blockIdx.x * NBP4_THREADS + threadIdx.x) * 4;
    const bool in = c < C; /* no early exit: the discard below syncs the warp */
    float4 a[NOUT], v[NBP4_MAX_ROWS][NOUT];
#pragma unroll
    for (int k = 0; k < NBP4_MAX_ROWS; k++)
#pragma unroll
        for (int o = 0; o < NOUT; o++)
            if (in && k < nb) v[k][o] = __ldcg((const float4 *)(part + ((size_t)k * NOUT + o) * (size_t)C + c));
#pragma unroll
    for (int o = 0; o < NOUT; o++) {
        a[o] = v[0][o];
#pragma unroll
        for (int k = 1; k < NBP4_MAX_ROWS; k++)
            if (k < nb) a[o].x += v[k][o].x, a[o].y += v[k][o].y, a[o].z += v[k][o].z, a[o].w += v[k][o].w;
    }
    if (discard) { /* C % 32 == 0: a warp's 128 columns are 4 whole lines of each partial row */
        __syncwarp();
        if (in && (threadIdx.x & 7) == 0)
            for (int i = 0; i < nb * NOUT; i++)
                asm volatile("discard.global.L2 [%0], 128;" ::"l"(part + (size_t)i * (size_t)C + c) : "memory");
    }
#pragma unroll
    for (int o = 0; o < NOUT && in; o++) {
        void *out = o == 0 ? out0 : out1;
        if (out) {
            cml__st<DT>(out, c, a[o].x);
            cml__st<DT>(out, c + 1, a[o].y);
            cml__st<DT>(out, c + 2, a[o].z);
            cml__st<DT>(out, c + 3, a[o].w);
        }
    }
}

/* CML_NORM_BWD_DISCARD=0 keeps the partial rows in L2 after their sum, CML_NORM_BWD_PDL=0 launches
 * the partial sum plainly, CML_NORM_BWD_PSUM4=0 never takes nb_partial_sum4_kernel: switches for A/B runs. */
static inline bool nb_discard_enabled(void) {
    static int cache = -1;
    return cml__env_switch("CML_NORM_BWD_DISCARD", &cache);
}

static inline bool nb_pdl_enabled(void) {
    static int cache = -1;
    return cml__env_switch("CML_NORM_BWD_PDL", &cache);
}

static inline bool nb_psum4_enabled(void) {
    static int cache = -1;
    return cml__env_switch("CML_NORM_BWD_PSUM4", &cache);
}

/* Row phases of nb_partial_sum_kernel: 8, or 32 from 128 partial rows on (the register, wide and one-chunk long
 * rows' 132 / 264 blocks), so that a thread adds 4-9 rows in two or three rounds of loads instead of 17-33 in five to
 * nine (session 21, `dev/membound/run_s21_phases.sh`: LayerNorm bf16 16384 x 8192 1.023x, RMSNorm 1.029x, f32 4096 x
 * 1024 1.02-1.04x; 16 phases at 66 partial rows measured 0.99, so fewer rows keep 8). CML_NORM_BWD_PHASES=0 (read
 * once) keeps 8 for every nb: A/B runs. */
static inline int nb_phases(int nb) {
    static int cache = -1;
    return nb >= 128 && cml__env_switch("CML_NORM_BWD_PHASES", &cache) ? 32 : NBP_PHASES;
}

/* Launches the sum of nb partial rows of NOUT outputs on the stream; the launch error, if any. */
template <int DT, int NOUT>
static inline cudaError_t nb_partial_sum_launch(cudaStream_t st, void *out0, void *out1, float *part, int nb,
                                                long long C) {
    const bool discard = nb_discard_enabled() && C % NBP_COLS == 0 && ((uintptr_t)part & 127u) == 0;
    if (nb >= 1 && nb <= NBP4_MAX_ROWS && C % 4 == 0 && ((uintptr_t)part & 15u) == 0 && nb_psum4_enabled()) {
        const unsigned grid4 = (unsigned)((C / 4 + NBP4_THREADS - 1) / NBP4_THREADS);
        if (!nb_pdl_enabled()) {
            nb_partial_sum4_kernel<DT, NOUT><<<grid4, NBP4_THREADS, 0, st>>>(out0, out1, part, nb, C, discard);
            return cudaGetLastError();
        }
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = cml__pdl_config(dim3(grid4), dim3(NBP4_THREADS), st, &attr);
        return cudaLaunchKernelEx(&cfg, nb_partial_sum4_kernel<DT, NOUT>, out0, out1, (const float *)part, nb, C,
                                  discard);
    }
    const int ph = nb_phases(nb);
    const auto kern = ph == 32 ? nb_partial_sum_kernel<DT, NOUT, 32> : nb_partial_sum_kernel<DT, NOUT, NBP_PHASES>;
    const unsigned grid = (unsigned)((C + NBP_COLS - 1) / NBP_COLS);
    const dim3 block(NBP_COLS, ph);
    if (!nb_pdl_enabled()) {
        kern<<<grid, block, 0, st>>>(out0, out1, part, nb, C, discard);
        return cudaGetLastError();
    }
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = cml__pdl_config(dim3(grid), block, st, &attr);
    return cudaLaunchKernelEx(&cfg, kern, out0, out1, part, nb, C, discard);
}

#endif
