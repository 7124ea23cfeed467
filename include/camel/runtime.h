/* Runtime: devices, contexts, allocators and the counter-based RNG. */
#ifndef CAMEL_RUNTIME_H
#define CAMEL_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "camel/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices ------------------------------------------------------------ */

typedef enum cml_device_type { CML_CPU = 0, CML_CUDA = 1 } cml_device_type;

typedef struct cml_device {
    cml_device_type type;
    int index; /* CUDA ordinal; 0 for the CPU */
} cml_device;

#define CML_DEVICE_CPU ((cml_device){CML_CPU, 0})

const char *cml_device_name(cml_device d); /* "cpu", "cuda:0" */
bool cml_device_equal(cml_device a, cml_device b);

/* Parses "cpu", "cuda" or "cuda:N". */
cml_status cml_device_parse(const char *text, cml_device *out);

/* Whether CUDA devices can be used. When they cannot, *reason (if not NULL)
 * is set to a static sentence saying why ("built without CUDA", "no CUDA
 * driver found (cudaGetDeviceCount: ...)"). */
bool cml_cuda_available(const char **reason);
int cml_cuda_device_count(void);

/* ---- allocators ------------------------------------------------------- */

/* An allocator hands out device (or host) memory. A CUDA caching allocator
 * implements the same interface; `stream` is the stream the memory will be
 * used on (NULL on the CPU) so that stream-ordered reuse is possible. */
typedef struct cml_allocator {
    const char *name;
    cml_device device;
    void *state;
    /* Returns CML_OK and *ptr, or CML_ERR_OOM with a message naming the size. */
    cml_status (*alloc)(void *state, void **ptr, size_t nbytes, void *stream);
    void (*free)(void *state, void *ptr, size_t nbytes, void *stream);
} cml_allocator;

/* The default allocator of a device (64-byte aligned host memory on the CPU). */
const cml_allocator *cml_allocator_default(cml_device d);

/* Replaces the default allocator of a device (NULL restores the built-in one).
 * Memory must be freed by the allocator that allocated it: swap only when
 * no tensors of that device are alive. */
void cml_allocator_set_default(cml_device d, const cml_allocator *a);

/* Statistics of the built-in CPU allocator: bytes in use now and at peak. */
size_t cml_cpu_bytes_in_use(void);
size_t cml_cpu_bytes_peak(void);

/* ---- contexts ---------------------------------------------------------- */

/* A context binds a device, its stream and a workspace. Kernel-layer calls
 * take one and queue their work on its stream; they never synchronize.
 *
 * Indices that live on the device (cross-entropy targets, index_select /
 * gather indices, max-pool indices in the backward) are checked by the CUDA
 * kernels that read them, as CUDA reports asynchronous errors: a bad index is
 * skipped (a NaN loss / gradient row for a bad target; nothing read or
 * written through a bad index), the call returns CML_OK, and the next call
 * that waits for the context's stream (cml_ctx_synchronize, a synchronous
 * copy such as cml_tensor_to_host) returns CML_ERR_INVALID_ARG with the CPU's
 * message ("cml_cross_entropy_fwd: targets[12]=70000 must be in [0, 50304) or
 * equal ignore_index=-100 (found on the GPU; reported by ...)"). It is reported
 * once; when several calls met bad indices since the last wait, the first of
 * them is reported. The value is read back from the caller's index buffer at
 * that wait, so keep it alive until then (if it cannot be read, the message
 * leaves the value out). Set CML_SYNC_CHECKS=1 in the environment before a
 * context is created to make its calls wait and return the error themselves
 * (for debugging; it costs a stream wait per call). CPU calls always return
 * the error themselves. */
typedef struct cml_ctx cml_ctx;

/* Creates a context on device d. The caller owns it: cml_ctx_destroy. */
cml_status cml_ctx_create(cml_ctx **out, cml_device d);
void cml_ctx_destroy(cml_ctx *ctx);
cml_device cml_ctx_device(const cml_ctx *ctx);
/* Waits until all work queued on the context is done (a no-op on the CPU). */
cml_status cml_ctx_synchronize(cml_ctx *ctx);
/* The context's stream: a cudaStream_t on CUDA (NULL on the CPU), for working with other
 * CUDA code in stream order, e.g. torch.cuda.ExternalStream in PyTorch or cuBLAS's
 * cublasSetStream. The context owns it: do not destroy it. */
void *cml_ctx_stream(const cml_ctx *ctx);
/* Returns a workspace of at least nbytes owned by the context (valid until the
 * next call that asks for more, or until the context is destroyed). */
cml_status cml_ctx_workspace(cml_ctx *ctx, void **ptr, size_t nbytes);

/* The process-wide default context of a device, created on first use and owned
 * by the library. Used by the framework. NULL (with the error set) on failure. */
cml_ctx *cml_ctx_default(cml_device d);

/* Number of CPU threads used by CPU kernels (OpenMP and OpenBLAS). */
int cml_cpu_threads(void);
void cml_set_cpu_threads(int n);

/* ---- RNG: Philox 4x32-10 ------------------------------------------------ */

/* Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so any
 * element of a stream can be computed independently, on the CPU or the GPU.
 * Element i of a stream (seed, offset) comes from counter (offset + i/4) and
 * word i%4, which is how both backends draw numbers for the same tensor. */
typedef struct cml_rng {
    uint64_t seed;
    uint64_t offset; /* blocks of 4 words consumed so far */
} cml_rng;

void cml_rng_init(cml_rng *rng, uint64_t seed);

/* The raw block function: 4 words for (key, counter). */
void cml_philox4x32(uint32_t out[4], const uint32_t counter[4], const uint32_t key[2]);

/* Word i of the stream starting at block offset `offset` of seed `seed`. */
uint32_t cml_philox_word(uint64_t seed, uint64_t offset, uint64_t i);

/* Reserves n words of the stream and returns the block offset they start at;
 * the generator advances by ceil(n/4) blocks. */
uint64_t cml_rng_reserve(cml_rng *rng, uint64_t n);

uint32_t cml_rng_u32(cml_rng *rng);
float cml_rng_uniform(cml_rng *rng);             /* [0, 1), 24 random bits */
float cml_rng_normal(cml_rng *rng);              /* N(0, 1) by Box-Muller */
uint32_t cml_rng_below(cml_rng *rng, uint32_t n); /* uniform in [0, n), unbiased */

/* word -> float in [0, 1) (top 24 bits), used identically by every backend. */
static inline float cml_u32_to_unit(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

#ifdef __cplusplus
}
#endif
#endif
