/* The second kernel of the LayerNorm / RMSNorm backward (layernorm_bwd.cu,
 * rmsnorm_bwd.cu): dgamma (and dbeta) as the sums, in a fixed order, of the
 * per-block partial rows the first kernel wrote, part[(k, NOUT, C)] for
 * k = 0 .. nb-1 (output o of block k at part[(k NOUT + o) C + c]).
 *
 * Blocks of 32 columns x 8 row phases: phase p adds the partial rows p, p + 8,
 * ... in order, then the 8 phases are added in phase order. The previous kernel
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
template <int DT, int NOUT>
static __global__ void __launch_bounds__(NBP_COLS * NBP_PHASES)
    nb_partial_sum_kernel(void *out0, void *out1, float *part, int nb, long long C, bool discard) {
    __shared__ float sm[NOUT][NBP_PHASES][NBP_COLS + 1];
    cml__pdl_entry(); /* launched with PDL by its own switch (CML_NORM_BWD_PDL, below), not cml__launch */
    const long long c = (long long)blockIdx.x * NBP_COLS + threadIdx.x;
    float a[NOUT];
#pragma unroll
    for (int o = 0; o < NOUT; o++) a[o] = 0.0f;
    if (c < C) {
#pragma unroll 4
        for (int k = threadIdx.y; k < nb; k += NBP_PHASES)
#pragma unroll
            for (int o = 0; o < NOUT; o++) a[o] += part[((size_t)k * NOUT + o) * (size_t)C + c];
    }
    if (discard) {
        __syncwarp(); /* the warp's loads of these lines come first */
        const int lines = (nb - (int)threadIdx.y + NBP_PHASES - 1) / NBP_PHASES * NOUT;
        for (int i = threadIdx.x; i < lines; i += 32) {
            const int k = (int)threadIdx.y + i / NOUT * NBP_PHASES, o = i % NOUT;
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
        for (int p = 1; p < NBP_PHASES; p++) v += sm[o][p][threadIdx.x];
        void *out = o == 0 ? out0 : out1;
        if (out) cml__st<DT>(out, c, v);
    }
}

/* CML_NORM_BWD_DISCARD=0 keeps the partial rows in L2 after their sum, CML_NORM_BWD_PDL=0 launches
 * the partial sum plainly: switches for A/B runs. */
static inline bool nb_discard_enabled(void) {
    static int cache = -1;
    return cml__env_switch("CML_NORM_BWD_DISCARD", &cache);
}

static inline bool nb_pdl_enabled(void) {
    static int cache = -1;
    return cml__env_switch("CML_NORM_BWD_PDL", &cache);
}

/* Launches the sum of nb partial rows of NOUT outputs on the stream; the launch error, if any. */
template <int DT, int NOUT>
static inline cudaError_t nb_partial_sum_launch(cudaStream_t st, void *out0, void *out1, float *part, int nb,
                                                long long C) {
    const unsigned grid = (unsigned)((C + NBP_COLS - 1) / NBP_COLS);
    const dim3 block(NBP_COLS, NBP_PHASES);
    const bool discard = nb_discard_enabled() && C % NBP_COLS == 0 && ((uintptr_t)part & 127u) == 0;
    if (!nb_pdl_enabled()) {
        nb_partial_sum_kernel<DT, NOUT><<<grid, block, 0, st>>>(out0, out1, part, nb, C, discard);
        return cudaGetLastError();
    }
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = cml__pdl_config(dim3(grid), block, st, &attr);
    return cudaLaunchKernelEx(&cfg, nb_partial_sum_kernel<DT, NOUT>, out0, out1, part, nb, C, discard);
}

#endif
