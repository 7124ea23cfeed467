/* The one launch of the memory-bound kernels (ewise, reduce, softmax, norm, optim, index):
 * cml__launch(kernel, grid, block, smem, stream, args...) in place of kernel<<<grid, block, smem,
 * stream>>>(args...). On an sm_90+ device, unless CML_PDL=0 (or a test forced it off), it launches
 * with cudaLaunchAttributeProgrammaticStreamSerialization: the kernel may then be scheduled while
 * the one before it on the stream still runs, and MUST begin with cml__pdl_entry() (pdl.cuh), before
 * any global memory access (only an L2 prefetch may come first: cml__pdl_prefetch). Otherwise it is a plain launch, as <<<>>> was. A failed launch is CUDA's
 * last error as with <<<>>>: the caller's cml__cuda_check_launch after it reports it (and the
 * cudaError_t is returned too). */
#ifndef CML_KERNELS_CUDA_COMMON_LAUNCH_CUH
#define CML_KERNELS_CUDA_COMMON_LAUNCH_CUH

#include <utility>

#include <cuda_runtime.h>

#include "kernels/cuda/common/pdl.cuh"

extern "C" {
/* pdl.cu: whether the next launch on the calling thread's current device uses PDL (switch on and
 * sm_90+); counts the launches it says yes to (cml__pdl_launches, cuda_kernels.h). */
bool cml__pdl_use(void);
}

template <typename... KArgs, typename... Args>
static inline cudaError_t cml__launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                      cudaStream_t st, Args &&...args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr;
    if (cml__pdl_use()) {
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

#endif
