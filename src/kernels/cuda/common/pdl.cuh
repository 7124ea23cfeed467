/* Programmatic dependent launch (sm_90): a kernel launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization (cml__pdl_config) may be scheduled before
 * the kernel ahead of it on the stream has finished: once every CTA of that one has executed
 * cml__pdl_launch_dependents (or exited). Its blocks then start on SMs the first kernel's tail
 * leaves idle and must wait (cml__pdl_wait) before they read what the first one writes; after
 * a plain launch both calls are no-ops. Used where a small kernel follows a big one whose tail
 * idles most SMs: the norm backward's partial sum, the attention backward's dQ conversion. */
#ifndef CML_KERNELS_CUDA_COMMON_PDL_CUH
#define CML_KERNELS_CUDA_COMMON_PDL_CUH

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

/* Waits until the grid this one was launched after has completed and its writes are visible. */
static __device__ __forceinline__ void cml__pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the grid launched after this one be scheduled (it still waits in cml__pdl_wait for this
 * grid to complete before reading its results). */
static __device__ __forceinline__ void cml__pdl_launch_dependents(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The entry of every kernel that cml__launch (launch.cuh) may launch with PDL: lets the grid after
 * this one be scheduled, then waits for the grid before this one to complete. The first statement of
 * the kernel body: no global memory access (load, store, atomic; user buffers or workspace) may come
 * before it. After a plain launch it costs nothing and changes nothing. */
static __device__ __forceinline__ void cml__pdl_entry(void) {
    cml__pdl_launch_dependents();
    cml__pdl_wait();
}

/* The configuration of a programmatic dependent launch on st, for cudaLaunchKernelEx; attr is
 * the caller's, alive until the launch. */
static inline cudaLaunchConfig_t cml__pdl_config(dim3 grid, dim3 block, cudaStream_t st, cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.stream = st;
    attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr->val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

/* An on/off switch for A/B runs: false only when the environment variable `name` is "0"; read
 * once into *cache (a static int of the caller's, -1 before). */
static inline bool cml__env_switch(const char *name, int *cache) {
    if (*cache < 0) {
        const char *e = getenv(name);
        *cache = e && strcmp(e, "0") == 0 ? 0 : 1;
    }
    return *cache == 1;
}

/* L2 prefetch before the wait: a kernel launched with PDL may sit at its entry while the grid before it still runs
 * (in a run of norm backward calls, the previous call's partial sum, which leaves DRAM nearly idle), and may ask the
 * first data it will read into L2 meanwhile: `prefetch.global.L2` returns nothing to the thread, and L2 is where device
 * memory is coherent, so a line the grid before still writes is updated there and every read of it comes after the
 * wait; no value can change. cml__pdl_prefetch says whether the kernels do (CML_PDL_PREFETCH=0: no, for A/B runs;
 * session 32, dev/membound/README.md: LayerNorm backward bf16 4096 x 4096 1.051x). */
static inline bool cml__pdl_prefetch(void) {
    static int cache = -1;
    return cml__env_switch("CML_PDL_PREFETCH", &cache);
}

/* The calling thread's words of a chunk of n elements (of V a word) that `threads` threads read word t, t + threads,
 * ... (KW at most), asked into L2. */
template <int KW, int V, typename T>
static __device__ __forceinline__ void cml__prefetch_words_l2(const T *p, long long n, int threads, int t) {
#pragma unroll
    for (int k = 0; k < KW; k++) {
        const long long c = (long long)(k * threads + t) * V;
        if (c < n) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + c));
    }
}

#endif
