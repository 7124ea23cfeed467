/* Internal: the CUDA side of the runtime (contexts' streams, the caching
 * device allocator, host<->device copies, error reporting).
 *
 * Every function here exists in every build: without CUDA (no nvcc at
 * configure time) they fail with CML_ERR_CUDA saying so, so that callers
 * need no #ifdef. The framework reaches the device only through these and
 * the kernel layer; it never calls CUDA itself. */
#ifndef CML_RUNTIME_CUDA_BACKEND_H
#define CML_RUNTIME_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "camel/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device ordinals beyond this are refused (default contexts and allocators are per-device tables). */
#define CML__MAX_CUDA_DEVICES 64

/* Records CML_ERR_CUDA "fn: call failed: <CUDA error string> (<error name>)" and returns it.
 * err is a cudaError_t. Clears CUDA's last-error state (non-sticky errors such as
 * an allocation failure then leave the process usable). */
cml_status cml__cuda_error(int err, const char *fn, const char *call);

/* Makes ctx's device the calling thread's current device (cudaSetDevice when it is not). */
cml_status cml__cuda_activate(const cml_ctx *ctx);

/* Number of multiprocessors of a device (cached); 0 when it cannot be read. */
int cml__cuda_sm_count(int device);
/* Compute capability major * 10 + minor of a device (cached; 90 for Hopper); 0 when unknown. */
int cml__cuda_arch(int device);

/* Context set-up for a CUDA device: selects it and creates ctx->stream (non-blocking). */
cml_status cml__cuda_ctx_init(cml_ctx *ctx);
/* Destroys ctx->stream (pending work completes first). Errors are ignored. */
void cml__cuda_ctx_fini(cml_ctx *ctx);
/* Waits for the work queued on ctx's stream; fn names the caller in errors. Then reports (once)
 * a bad index that a queued kernel found (cuda_index_check.h). */
cml_status cml__cuda_stream_sync(cml_ctx *ctx, const char *fn);

/* The built-in caching, stream-ordered allocator of a CUDA device: a
 * cudaMemPool with an unlimited release threshold, so freed blocks stay
 * cached and are reused without cudaMalloc. Created on first use; NULL with
 * the error set when the device cannot be used. A NULL stream in alloc/free
 * means "not stream-ordered": free then synchronizes (cudaFree). */
const cml_allocator *cml__cuda_allocator(int device);

/* Bytes the built-in pool of a device holds from the driver (reserved) and
 * hands out now (used), and the peak of used. */
cml_status cml__cuda_pool_stats(int device, size_t *reserved, size_t *used, size_t *used_peak);

/* Copies nbytes between any two of host memory and device memory (unified
 * addressing decides the direction) on ctx's stream; when sync is true,
 * waits until the copy is done, then reports a bad index as cml__cuda_stream_sync
 * does (the copy has been made). fn names the caller in errors. */
cml_status cml__cuda_memcpy(cml_ctx *ctx, void *dst, const void *src, size_t nbytes, bool sync, const char *fn);

/* Sets nbytes of device memory to `byte` on ctx's stream (no synchronization). */
cml_status cml__cuda_memset(cml_ctx *ctx, void *dst, int byte, size_t nbytes);
/* At least `bytes` of device memory that holds zeros for the next kernel on ctx's stream: the
 * context's zeroed block (ctx->zeroed), set to 0 once when it is (re)allocated. Every kernel that
 * uses words of it leaves them 0 when it ends (the arrival counters of split reductions and split-K
 * GEMMs: the last arriver resets its counter), so no call needs a memset of its own. Grown on
 * demand, the old block freed in stream order. fn names the caller in errors. */
cml_status cml__cuda_zeroed(cml_ctx *ctx, size_t bytes, const char *fn, void **out);

#ifdef __cplusplus
}
#endif
#endif
