/* The switch of programmatic dependent launch for the memory-bound kernels (launch.cuh):
 * CML_PDL=0 turns it off (plain launches, the behaviour before session 14), anything else or unset
 * leaves it on; tests flip it in-process with cml__pdl_force. Only sm_90+ devices get it. */
#include <cuda_runtime.h>

#include "kernels/cuda/common/pdl.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda_backend.h"

static int pdl_env = -1;       /* CML_PDL, read once */
static int pdl_forced = -1;    /* cml__pdl_force: 1 on, 0 off, -1 the environment's */
static unsigned long long pdl_count; /* launches with the attribute */

extern "C" bool cml__pdl_use(void) {
    const bool on = pdl_forced >= 0 ? pdl_forced == 1 : cml__env_switch("CML_PDL", &pdl_env);
    if (!on) return false;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (cml__cuda_arch(dev) < 90) return false;
    __atomic_add_fetch(&pdl_count, 1ULL, __ATOMIC_RELAXED);
    return true;
}

extern "C" void cml__pdl_force(int mode) { pdl_forced = mode; }

extern "C" unsigned long long cml__pdl_launches(void) { return __atomic_load_n(&pdl_count, __ATOMIC_RELAXED); }
