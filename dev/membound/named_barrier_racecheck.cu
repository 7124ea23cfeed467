// Session 21: does compute-sanitizer racecheck model named barriers (bar.sync id, count) whose groups run different
// numbers of rounds? nbr_kernel (src/kernels/cuda/norm/norm_bwd_rows.cuh) is reported with shared-memory hazards
// between its row loop's thread-private accumulator writes and the reads after the loop, which a __syncthreads
// separates, but only where the block's row groups walk different numbers of rows (test_partial_phases: 40 / 100 /
// 300 x 1024 bf16; never 64 x 1024, one row a group). This kernel has nbr's barrier structure and nothing else:
// R groups of G threads; group y runs rounds[y] rounds of (write its own slot, bar.sync 1 + y, G, read a neighbour's
// slot of the same group, bar.sync 1 + y, G); then __syncthreads, every thread reads a slot of another group,
// __syncthreads, writes its own slot again. By the PTX barrier rules every cross-group access is ordered by barrier 0,
// so a racecheck report here is the tool's, not the code's.
//   nvcc -arch=sm_90a -O2 -o /tmp/nbrc dev/membound/named_barrier_racecheck.cu
//   compute-sanitizer --tool racecheck /tmp/nbrc equal; compute-sanitizer --tool racecheck /tmp/nbrc unequal
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

constexpr int G = 128, R = 8;

__global__ void __launch_bounds__(G * R) groups_kernel(const int *rounds, float *out) {
    __shared__ float slot[G * R];
    const int t = threadIdx.x, y = threadIdx.y, lin = y * G + t;
    float acc = 0.0f;
    slot[lin] = 0.0f;
    __syncthreads();
    for (int i = 0; i < rounds[y]; i++) {
        slot[lin] += 1.0f; /* thread-private, as nbr's dbeta accumulators */
        asm volatile("bar.sync %0, %1;" ::"r"(1 + y), "r"(G) : "memory");
        acc += slot[y * G + (t + 1) % G]; /* a neighbour in the group, as nbr's group sums */
        asm volatile("bar.sync %0, %1;" ::"r"(1 + y), "r"(G) : "memory");
    }
    __syncthreads();
    acc += slot[((y + 1) % R) * G + t]; /* another group's slot, as nbr's merge after the loop */
    __syncthreads();
    slot[lin] = acc;
    __syncthreads();
    out[blockIdx.x * G * R + lin] = slot[(lin + 1) % (G * R)];
}

int main(int argc, char **argv) {
    const bool unequal = argc > 1 && strcmp(argv[1], "unequal") == 0;
    int h_rounds[R];
    for (int y = 0; y < R; y++) h_rounds[y] = unequal ? (y < 3 ? 2 : 1) : 2;
    int *rounds;
    float *out;
    cudaMalloc(&rounds, sizeof h_rounds);
    cudaMalloc(&out, sizeof(float) * G * R * 4);
    cudaMemcpy(rounds, h_rounds, sizeof h_rounds, cudaMemcpyHostToDevice);
    groups_kernel<<<4, dim3(G, R)>>>(rounds, out);
    const cudaError_t e = cudaDeviceSynchronize();
    printf("%s rounds: %s\n", unequal ? "unequal" : "equal", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
