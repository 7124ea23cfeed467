/* Session 20: what launching as clusters costs by itself. The GEMM kernel at cluster 2 without multicast or
 * coupled stages (CML_SM90_DEV_MC=3, dev/gemm_sm90/s20_mc.patch) is as much slower than cluster 1 as the real
 * cluster-2 kernel, and the same kernel with the cluster-2 tile order launched without clusters (=4) is not. This
 * times a kernel that is only the frame of the GEMM (384 threads, 227 KB of dynamic shared memory, so one CTA an
 * SM; an mbarrier init; a cluster barrier at the start and / or at the end, or none, its arrive .release or
 * .relaxed), optionally spinning SPIN clocks, launched
 * as a plain grid of one CTA an SM, with the cluster attribute at 1 (as the library launches cluster 1), and as
 * clusters of 2, 4, 8 and 16 (as many as can be resident: cudaOccupancyMaxActiveClusters), each launch after a
 * 256 MiB memset (as camel bench gemm) or 8 back to back. Median of reps, microseconds a launch.
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a dev/gemm_sm90/cluster_launch_probe.cu -o /tmp/clp
 *   /tmp/clp [reps] */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

/* bars: 1 = a cluster barrier at the start (else __syncthreads), 2 = one at the end; 4 = their arrive .relaxed
 * (else .release); 8 = a fence.acq_rel.cluster before the end barrier */
__device__ __forceinline__ void cluster_barrier(int bars) {
    if (bars & 4) asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    else asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__global__ void __launch_bounds__(384, 1) frame_kernel(int *out, long long spin, int bars) {
    extern __shared__ unsigned long long smem[];
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(smem)));
    if (bars & 1) cluster_barrier(bars);
    else __syncthreads();
    if (spin) { /* optional busy time, the same in every CTA */
        const long long t0 = clock64();
        while (clock64() - t0 < spin) {
        }
    }
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = (int)spin;
    if (bars & 8) asm volatile("fence.acq_rel.cluster;" ::: "memory");
    if (bars & 2) cluster_barrier(bars);
}

static float median(float *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) { float t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

static const int SMEM = 227 * 1024;

/* cluster 0: a plain launch (no attribute) */
static cudaLaunchConfig_t config(cudaStream_t st, cudaLaunchAttribute *attr, int cluster, int grid) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = SMEM;
    cfg.stream = st;
    if (cluster > 0) {
        attr->id = cudaLaunchAttributeClusterDimension;
        attr->val.clusterDim.x = cluster, attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
        cfg.attrs = attr, cfg.numAttrs = 1;
    }
    return cfg;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 50;
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaFuncSetAttribute(frame_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    CK(cudaFuncSetAttribute(frame_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    int *out;
    void *flush;
    const size_t flush_bytes = 256u << 20;
    CK(cudaMalloc(&out, 4));
    CK(cudaMalloc(&flush, flush_bytes));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int sizes[] = {0, 1, 2, 4, 8, 16};
    const int ns = sizeof sizes / sizeof *sizes;
    int grid[ns];
    for (int c = 0; c < ns; c++) {
        cudaLaunchAttribute attr;
        const int cl = sizes[c] > 0 ? sizes[c] : 1;
        cudaLaunchConfig_t cfg = config(st, &attr, cl, sms / cl * cl);
        int clusters = 0;
        if (cudaOccupancyMaxActiveClusters(&clusters, frame_kernel, &cfg) != cudaSuccess || clusters <= 0) clusters = 0;
        (void)cudaGetLastError();
        grid[c] = sizes[c] == 0 ? sms : clusters * cl;
    }
    float *t = (float *)malloc(sizeof(float) * reps * ns);
    const long long spins[] = {0, 20000}; /* none, ~11 us at 1.75 GHz */
    printf("%d SMs, 384 threads, %d B dynamic shared memory, median of %d launches, us a launch\n", sms, SMEM, reps);
    printf("%-44s", "cluster size (0: plain launch, no attribute)");
    for (int c = 0; c < ns; c++) printf(" %9d", sizes[c]);
    printf("\n%-44s", "resident CTAs launched");
    for (int c = 0; c < ns; c++) printf(" %9d", grid[c]);
    printf("\n");
    const int masks[] = {0, 1, 2, 3, 7, 15, 5};
    for (int mi = 0; mi < (int)(sizeof masks / sizeof *masks); mi++) {
    const int bars = masks[mi];
    printf("cluster barriers:%s%s%s%s%s\n", bars & 1 ? " at the start" : "", bars & 2 ? " at the end" : "",
           bars & 3 ? "" : " none", bars & 4 ? ", arrive.relaxed" : bars & 3 ? ", arrive.release" : "",
           bars & 8 ? ", fence.acq_rel.cluster before the end one" : "");
    for (int si = 0; si < 2; si++)
        for (int mode = 0; mode < 2; mode++) { /* 0: after a memset each, 1: 8 back to back */
            for (int i = -3; i < reps; i++)
                for (int c = 0; c < ns; c++) {
                    if (grid[c] == 0) continue;
                    if (mode == 0) CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, st));
                    CK(cudaEventRecord(e0, st));
                    for (int k = 0; k < (mode ? 8 : 1); k++) {
                        cudaLaunchAttribute attr;
                        cudaLaunchConfig_t cfg = config(st, &attr, sizes[c], grid[c]);
                        CK(cudaLaunchKernelEx(&cfg, frame_kernel, out, spins[si], bars));
                    }
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    if (i >= 0) t[c * reps + i] = ms * 1000.0f / (mode ? 8 : 1);
                }
            printf("spin %5lld clk, %-27s", spins[si], mode ? "8 back to back" : "after a 256 MiB memset");
            for (int c = 0; c < ns; c++)
                if (grid[c]) printf(" %9.2f", median(t + c * reps, reps));
                else printf(" %9s", "-");
            printf("\n");
        }
    }
    return 0;
}
