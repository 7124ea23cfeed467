/* Session 18: is synccheck's "Missing wait" in nbc_kernel (clusters of 9..16 CTAs, four CTAs an SM, always the
 * CTA of cluster rank 8; dev/membound/README.md, "Session 17: synccheck") a real ordering bug or a limit of the
 * tool? This is nbc_xchg's row-sum exchange alone (norm_bwd_cluster.cuh): per row, a block barrier, thread 0 arms
 * its own mbarrier set n % 4 for `splits` x 8 bytes and pushes its (x, y) into slot [n % 4][rank] of every CTA of
 * the cluster with st.async; every thread waits on its set's phase and adds the slots in rank order. The result
 * of each row is checked on the host (x = splits n + splits (splits - 1) / 2, y = splits).
 * Variants (argv): splits (cluster size), CTAs an SM (1 or 4, set by the dynamic shared memory), strong (1: a
 * cluster barrier after every row, so that no CTA can ever be a row ahead: an exchange whose order is beyond doubt).
 *   nvcc -std=c++17 -O2 -lineinfo -arch=sm_90a -o /tmp/xchg dev/membound/xchg_synccheck.cu
 *   compute-sanitizer --tool synccheck /tmp/xchg 9 4 0 */
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>

#define MAXS 16
#define THREADS 256

static __device__ __forceinline__ uint32_t saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

template <bool STRONG>
__global__ void __launch_bounds__(THREADS) xchg(float2 *out, int rows, int splits) {
    extern __shared__ float4 pad[]; /* occupancy only */
    __shared__ float2 slot[4][MAXS];
    __shared__ __align__(8) uint64_t bar[4];
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const int q = blockIdx.x / splits;
    if (threadIdx.x == 0) {
        for (int i = 0; i < 4; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(bar + i)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (threadIdx.x == 1) pad[0] = make_float4(0, 0, 0, 0);
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    for (int n = 0; n < rows; n++) {
        __syncthreads(); /* nbc's block sum */
        const int set = n & 3;
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(bar + set)),
                         "r"((uint32_t)splits * 8u)
                         : "memory");
            const uint32_t ls = saddr(&slot[set][rank]), lb = saddr(bar + set);
            const float sx = (float)(rank + n), sy = 1.0f;
            for (int k = 0; k < splits; k++) {
                uint32_t rs, rb;
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rs) : "r"(ls), "r"((uint32_t)k));
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(lb), "r"((uint32_t)k));
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(rs),
                             "f"(sx), "f"(sy), "r"(rb)
                             : "memory");
            }
        }
        uint32_t done;
        do {
            asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, "
                         "p;\n}\n"
                         : "=r"(done)
                         : "r"(saddr(bar + set)), "r"((uint32_t)(n >> 2) & 1u)
                         : "memory");
        } while (!done);
        float2 a = slot[set][0];
        for (int k = 1; k < splits; k++) a.x += slot[set][k].x, a.y += slot[set][k].y;
        if (threadIdx.x == 0) out[((size_t)q * rows + n) * splits + rank] = a;
        if (STRONG) {
            asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
            asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        }
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            printf("%s: %s\n", #x, cudaGetErrorString(e_));                                                     \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)

template <bool STRONG> static int run(int splits, int per_sm, int clusters, int rows) {
    auto k = xchg<STRONG>;
    const size_t smem = per_sm == 1 ? 160 * 1024 : 48 * 1024;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    cfg.gridDim = dim3(splits * clusters);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = splits;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int active = 0;
    CK(cudaOccupancyMaxActiveClusters(&active, k, &cfg));
    int bps = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, THREADS, smem));
    float2 *d;
    const size_t n = (size_t)clusters * rows * splits;
    CK(cudaMalloc(&d, n * sizeof(float2)));
    CK(cudaMemset(d, 0xff, n * sizeof(float2)));
    CK(cudaLaunchKernelEx(&cfg, k, d, rows, splits));
    CK(cudaDeviceSynchronize());
    float2 *h = (float2 *)malloc(n * sizeof(float2));
    CK(cudaMemcpy(h, d, n * sizeof(float2), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int q = 0; q < clusters; q++)
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < splits; c++) {
                const float2 v = h[((size_t)q * rows + r) * splits + c];
                if (v.x != (float)(splits * r + splits * (splits - 1) / 2) || v.y != (float)splits) bad++;
            }
    printf("splits %d, %d CTAs an SM (occupancy %d, resident clusters %d), strong %d, %d clusters x %d rows: %ld wrong\n",
           splits, per_sm, bps, active, (int)STRONG, clusters, rows, bad);
    free(h);
    cudaFree(d);
    return bad != 0;
}

int main(int argc, char **argv) {
    const int splits = argc > 1 ? atoi(argv[1]) : 9, per_sm = argc > 2 ? atoi(argv[2]) : 4,
              strong = argc > 3 ? atoi(argv[3]) : 0, clusters = argc > 4 ? atoi(argv[4]) : 24,
              rows = argc > 5 ? atoi(argv[5]) : 40;
    if (splits < 1 || splits > MAXS || (per_sm != 1 && per_sm != 4)) {
        printf("usage: xchg SPLITS(1..16) PER_SM(1|4) STRONG(0|1) [CLUSTERS ROWS]\n");
        return 2;
    }
    return strong ? run<true>(splits, per_sm, clusters, rows) : run<false>(splits, per_sm, clusters, rows);
}
