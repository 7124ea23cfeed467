// Session 25: how many clusters of 2 CTAs of nbw_kernel's shape (1024 threads at 64 registers, ~200 KB of dynamic
// shared memory: one CTA an SM) an H100 holds at once (cudaOccupancyMaxActiveClusters), against the SM count.
//   nvcc -arch=sm_90a -o /tmp/cluster_occupancy dev/membound/cluster_occupancy.cu && /tmp/cluster_occupancy
#include <cstdio>
#include <cuda_runtime.h>

__global__ void __launch_bounds__(1024, 1) probe(float *p) {
    extern __shared__ float s[];
    s[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    if (p) p[threadIdx.x] = s[1023 - threadIdx.x];
}

int main() {
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    const size_t smems[] = {100 * 1024, 160 * 1024, 200 * 1024 + 512, 227 * 1024};
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
    for (size_t smem : smems)
        for (int cl = 1; cl <= 4; cl *= 2) {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attr;
            cfg.gridDim = dim3(132);
            cfg.blockDim = dim3(1024);
            cfg.dynamicSmemBytes = smem;
            attr.id = cudaLaunchAttributeClusterDimension;
            attr.val.clusterDim.x = cl;
            attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
            cfg.attrs = &attr;
            cfg.numAttrs = 1;
            int n = -1;
            cudaError_t e = cudaOccupancyMaxActiveClusters(&n, probe, &cfg);
            printf("%s (%d SMs): smem %6zu B, clusters of %d: %d at once (%d CTAs) %s\n", prop.name,
                   prop.multiProcessorCount, smem, cl, n, n * cl, e == cudaSuccess ? "" : cudaGetErrorString(e));
        }
    return 0;
}
