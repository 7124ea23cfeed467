/* Session 27 (from s26/wgmma_rate.cu): the same loop with one consumer warpgroup (a 64-row tile, as the 64-row
 * ping-pong tile runs 1024^3: one tile a CTA, so one consumer busy) against two, and N = 64 with two.
 * Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I src -o wgmma_rate_wg dev/gemm_sm90/s27/wgmma_rate_wg.cu
 *
 * Session 26: the tensor cores' issue rate for the GEMM's consumer loop shapes, with no loads at all.
 *
 * Question (README "Session 24", item 2): the 160-wide tile ran the weight gradients at 81 us against 64 us for
 * 128 x 192; the note inferred that "the tensor cores take n160 at the cost of n256". cuBLASLt's
 * nvjet_sm90_tst_128x160_64x5_2x4 runs n160 on an M/N-major operand at ~684 clk a k-block (session 19), so the
 * inference is tested here directly: two consumer warpgroups (m64 each, a 128-row tile) issue 4 wgmmas (one 64-deep
 * k-block) a stage, keep one stage in flight (wait_group 1), cycling over 4 stages of random bf16 in shared memory --
 * the library's consumer loop without the barriers. Clocks a k-block, per CTA, one CTA per SM on every SM at once.
 *
 * Variants: N in {128, 160, 192, 256}; both operands K-major (NT) or both M/N-major (TN: the weight gradients); the
 * M/N-major B in the 128-byte swizzle (64-column blocks, as the library loads it) or the 64-byte swizzle (32-column
 * blocks: 160 = 5 whole blocks).
 *
 * Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I src -o wgmma_rate dev/gemm_sm90/s26/wgmma_rate.cu */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/common/hopper.cuh"
#include "kernels/cuda/common/wgmma_ops.cuh"

#define STAGES 4
#define A_BYTES (128 * 128)     /* 128 rows x 64 bf16 of K */
#define B_MAX_BYTES (256 * 128) /* up to 256 columns x 64 of K */
#define STAGE_BYTES (A_BYTES + B_MAX_BYTES)

static __device__ __forceinline__ uint64_t desc_swz(uint32_t addr, uint32_t lbo, uint32_t sbo, int swz) {
    uint64_t d = (uint64_t)((addr & 0x3FFFFu) >> 4);
    d |= (uint64_t)((lbo & 0x3FFFFu) >> 4) << 16;
    d |= (uint64_t)((sbo & 0x3FFFFu) >> 4) << 32;
    d |= (uint64_t)(swz == 128 ? 1 : swz == 64 ? 2 : 3) << 62;
    return d;
}

template <int N, int T>
static __device__ __forceinline__ void mma(float *acc, uint64_t da, uint64_t db) {
    if constexpr (N == 64) cml__wgmma_m64n64k16_bf16<T, T>(acc, da, db, 1);
    else if constexpr (N == 128) cml__wgmma_m64n128k16_bf16<T, T>(acc, da, db, 1);
    else if constexpr (N == 160) cml__wgmma_m64n160k16_bf16<T, T>(acc, da, db, 1);
    else if constexpr (N == 192) cml__wgmma_m64n192k16_bf16<T, T>(acc, da, db, 1);
    else cml__wgmma_m64n256k16_bf16<T, T>(acc, da, db, 1);
}

/* T = 0: A and B K-major (rows of 128 bytes, 128-byte swizzle). T = 1: both M/N-major; A as two 64-column blocks of
 * 64 K rows (one a consumer), B as column blocks of SWZ bytes (64 or 32 columns) of 64 K rows. */
template <int N, int T, int SWZ>
__global__ void __launch_bounds__(256, 1) rate_kernel(const uint4 *src, float *sink, long long *clocks, int iters) {
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    for (int i = threadIdx.x; i < STAGES * STAGE_BYTES / 16; i += blockDim.x) ((uint4 *)smem)[i] = src[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const int wg = threadIdx.x / 128;
    const uint32_t base = cml__smem_addr(smem);
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) acc[i] = 0.0f;
    const uint32_t a_off = T ? wg * 64 * 128 : wg * 64 * 128; /* block wg, or rows 64 wg.. */
    const uint32_t a_lbo = T ? 64 * 128 : 16, b_lbo = T ? 64 * SWZ : 16;
    const uint32_t b_sbo = T ? 8 * SWZ : 1024;
    const uint32_t a_step = T ? 16 * 128 : 32, b_step = T ? 16 * SWZ : 32;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
        const uint32_t st = base + (it % STAGES) * STAGE_BYTES;
        cml__wgmma_fence();
#pragma unroll
        for (int k = 0; k < 4; k++)
            mma<N, T>(acc, desc_swz(st + a_off + k * a_step, a_lbo, 1024, 128),
                      desc_swz(st + A_BYTES + k * b_step, b_lbo, b_sbo, T ? SWZ : 128));
        cml__wgmma_commit();
        cml__wgmma_wait<1>();
        cml__wgmma_reg_fence<N / 2>(acc);
    }
    cml__wgmma_wait<0>();
    cml__wgmma_reg_fence<N / 2>(acc);
    const long long t1 = clock64();
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < N / 2; i++) s += acc[i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

template <int N, int T, int SWZ>
static void run(const char *name, const uint4 *src, float *sink, long long *clocks, int sms, int wgs) {
    const int smem = STAGES * STAGE_BYTES + 1024, iters = 4096;
    cudaFuncSetAttribute(rate_kernel<N, T, SWZ>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    long long h[1024];
    double best = 1e30, med_of_best = 0;
    float best_ms = 0;
    for (int rep = 0; rep < 5; rep++) {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        cudaEventRecord(e0);
        rate_kernel<N, T, SWZ><<<sms, 128 * wgs, smem>>>(src, sink, clocks, iters);
        cudaEventRecord(e1);
        cudaError_t err = cudaEventSynchronize(e1);
        if (err != cudaSuccess) {
            printf("%s: %s\n", name, cudaGetErrorString(err));
            exit(1);
        }
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaMemcpy(h, clocks, sms * sizeof(long long), cudaMemcpyDeviceToHost);
        qsort(h, sms, sizeof(long long), cmp_ll);
        const double med = (double)h[sms / 2] / iters;
        if (med < best) best = med, med_of_best = (double)h[sms - 1] / iters, best_ms = ms;
        cudaEventDestroy(e0), cudaEventDestroy(e1);
    }
    const double ideal = 2.0 * N * wgs; /* 64 wgs x N x 64 FMAs at 2048 a clock */
    printf("%-22s wg %d %4d  %8.1f  %8.1f  %6.3f  %8.3f ms  %7.1f TF/s\n", name, wgs, N, best, med_of_best,
           ideal / best, best_ms, 2.0 * 64 * wgs * N * 64 * (double)iters * sms / (best_ms * 1e-3) / 1e12);
}

int main(void) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const size_t words = STAGES * STAGE_BYTES / 16;
    uint16_t *h = (uint16_t *)malloc(words * 16);
    srand(26);
    for (size_t i = 0; i < words * 8; i++) { /* bf16 in [-1, 1): sign, exponent 126 or 127, random mantissa */
        const uint16_t sign = (uint16_t)(rand() & 1) << 15, exp = (uint16_t)(126 + (rand() & 1)) << 7;
        h[i] = sign | exp | (uint16_t)(rand() & 0x7F);
    }
    uint4 *src;
    float *sink;
    long long *clocks;
    cudaMalloc(&src, words * 16);
    cudaMalloc(&sink, (size_t)sms * 256 * sizeof(float));
    cudaMalloc(&clocks, (size_t)sms * sizeof(long long));
    cudaMemcpy(src, h, words * 16, cudaMemcpyHostToDevice);
    printf("%d SMs; clk a k-block (64 wg x N x 64): median CTA, slowest CTA; ideal 2N wg / median; wall; rate\n", sms);
    for (int pass = 0; pass < 2; pass++) {
        const int n = pass == 0 ? 1 : sms;
        printf("-- %d CTA%s\n", n, n > 1 ? "s" : "");
        for (int wgs = 1; wgs <= 2; wgs++) {
            run<64, 0, 128>("K-major (NT)", src, sink, clocks, n, wgs);
            run<128, 0, 128>("K-major (NT)", src, sink, clocks, n, wgs);
            run<256, 0, 128>("K-major (NT)", src, sink, clocks, n, wgs);
            run<64, 1, 128>("MN-major (TN) swz128", src, sink, clocks, n, wgs);
            run<128, 1, 128>("MN-major (TN) swz128", src, sink, clocks, n, wgs);
            run<256, 1, 128>("MN-major (TN) swz128", src, sink, clocks, n, wgs);
        }
    }
    return 0;
}
