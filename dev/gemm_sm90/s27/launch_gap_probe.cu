/* Session 27: what a launch costs around its CTAs. The 1024^3 GEMM's CTAs span 6.4 us (timeline build) but ncu
 * times the kernel at 9.1 us and cuBLASLt's at 7.4 us. This times a frame kernel (384 threads, one CTA an SM or
 * less, a spin of SPIN clocks) for several dynamic shared-memory sizes: the event time of a launch after a 256 MiB
 * memset (as camel bench gemm) and back to back, and the span of its CTAs by %globaltimer (first start to last
 * end, atomicMin / atomicMax), so that event - span is what the launch adds outside its CTAs.
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a dev/gemm_sm90/s27/launch_gap_probe.cu -o /tmp/lgp
 *   /tmp/lgp [reps] */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static __device__ __forceinline__ unsigned long long gtimer(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void __launch_bounds__(384, 1) frame_kernel(unsigned long long *span, long long spin) {
    if (threadIdx.x == 0) atomicMin(&span[0], gtimer());
    __syncthreads();
    const long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&span[1], gtimer());
}

static float median(float *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) { float t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 40;
    CK(cudaFuncSetAttribute(frame_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    unsigned long long *span;
    void *flush;
    const size_t flush_bytes = 256u << 20;
    CK(cudaMalloc(&span, 16));
    CK(cudaMalloc(&flush, flush_bytes));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int smems[] = {0, 16 << 10, 100 << 10, 200 << 10, 227 << 10};
    const long long spins[] = {0, 8000};
    float *te = (float *)malloc(sizeof(float) * reps), *ts = (float *)malloc(sizeof(float) * reps);
    printf("grid 128 x 384 threads; median of %d launches; us: event time of the launch, its CTAs' span, the difference\n", reps);
    for (int si = 0; si < 2; si++)
        for (int mode = 0; mode < 3; mode++) /* 0: after a memset, 1: after a memset + a 0-smem launch, 2: back to back */
            for (int k = 0; k < 5; k++) {
                for (int i = -3; i < reps; i++) {
                    if (mode < 2) CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, st));
                    if (mode == 1) frame_kernel<<<128, 384, 0, st>>>(span, 0);
                    if (mode == 2) frame_kernel<<<128, 384, smems[k], st>>>(span, spins[si]);
                    unsigned long long init[2] = {~0ull, 0};
                    CK(cudaMemcpyAsync(span, init, 16, cudaMemcpyHostToDevice, st));
                    CK(cudaEventRecord(e0, st));
                    frame_kernel<<<128, 384, smems[k], st>>>(span, spins[si]);
                    CK(cudaEventRecord(e1, st));
                    unsigned long long h[2];
                    CK(cudaMemcpyAsync(h, span, 16, cudaMemcpyDeviceToHost, st));
                    CK(cudaStreamSynchronize(st));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    if (i >= 0) te[i] = ms * 1000.0f, ts[i] = (float)(h[1] - h[0]) * 1e-3f;
                }
                const float a = median(te, reps), b = median(ts, reps);
                printf("spin %5lld  smem %6d  %-34s event %6.2f  span %6.2f  outside %5.2f\n", spins[si], smems[k],
                       mode == 0 ? "after a memset" : mode == 1 ? "after a memset and a 0-smem launch" : "after the same launch",
                       a, b, a - b);
            }
    return 0;
}
