/* The caching, stream-ordered device allocator: one cudaMemPool per device.
 *
 * Blocks come from cudaMallocFromPoolAsync and go back with cudaFreeAsync on
 * the stream they were used on, so a block freed by one step of a training
 * loop is handed to the next allocation on that stream without waiting and
 * without cudaMalloc: the pool's release threshold is UINT64_MAX, so memory
 * it once reserved stays reserved (cached) until the process ends or an
 * allocation fails, when the pool is trimmed and the allocation retried once.
 * Out of memory is CML_ERR_OOM with the sizes involved; the CUDA error is
 * cleared, so the process stays usable. */
#include "runtime/cuda_backend.h"

#include "runtime/error.h"

#ifdef CML_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct cuda_pool {
    cml_allocator iface; /* state points back at this struct */
    int device;
    cudaMemPool_t pool;
} cuda_pool;

static cuda_pool *pools[CML__MAX_CUDA_DEVICES];

#define GIB(x) ((double)(x) / (1024.0 * 1024.0 * 1024.0))

static size_t pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr) {
    uint64_t v = 0;
    if (cudaMemPoolGetAttribute(pool, attr, &v) != cudaSuccess) (void)cudaGetLastError();
    return (size_t)v;
}

/* Total memory of a device (0 when it cannot be read); a request beyond it is out of memory
 * whatever error the driver gives for it. */
static size_t device_total(int device) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return SIZE_MAX;
    }
    return prop.totalGlobalMem;
}

static cml_status out_of_memory(const cuda_pool *p, size_t nbytes, cudaError_t e) {
    size_t free_b = 0, total_b = 0;
    int current = -1;
    /* cudaMemGetInfo reports the current device: make it this pool's for the query. */
    if (cudaGetDevice(&current) == cudaSuccess && current != p->device) cudaSetDevice(p->device);
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) free_b = total_b = 0;
    if (current >= 0 && current != p->device) cudaSetDevice(current);
    (void)cudaGetLastError();
    return cml__error(CML_ERR_OOM,
                      "out of memory on cuda:%d allocating %zu bytes (%.2f GiB): the device has %.2f GiB free of "
                      "%.2f GiB, and camel's pool holds %.2f GiB, %.2f GiB of it in use "
                      "(cudaMallocFromPoolAsync: %s)",
                      p->device, nbytes, GIB(nbytes), GIB(free_b), GIB(total_b),
                      GIB(pool_attr(p->pool, cudaMemPoolAttrReservedMemCurrent)),
                      GIB(pool_attr(p->pool, cudaMemPoolAttrUsedMemCurrent)), cudaGetErrorString(e));
}

static cml_status pool_alloc(void *state, void **ptr, size_t nbytes, void *stream) {
    static const char fn[] = "cuda allocator";
    cuda_pool *p = state;
    cudaStream_t s = (cudaStream_t)stream;
    *ptr = NULL;
    if (nbytes == 0) return CML_OK;
    cudaError_t e = cudaMallocFromPoolAsync(ptr, nbytes, p->pool, s);
    if (e == cudaErrorMemoryAllocation) {
        /* Cached blocks may be free but not fit: wait for pending frees, give
         * the cache back to the driver and try once more. */
        (void)cudaGetLastError();
        if (cudaStreamSynchronize(s) != cudaSuccess) (void)cudaGetLastError();
        if (cudaMemPoolTrimTo(p->pool, 0) != cudaSuccess) (void)cudaGetLastError();
        e = cudaMallocFromPoolAsync(ptr, nbytes, p->pool, s);
    }
    if (e == cudaErrorMemoryAllocation || (e != cudaSuccess && nbytes > device_total(p->device))) {
        *ptr = NULL;
        return out_of_memory(p, nbytes, e);
    }
    if (e != cudaSuccess) {
        *ptr = NULL;
        return cml__cuda_error((int)e, fn, "cudaMallocFromPoolAsync");
    }
    if (!s) { /* not stream-ordered: make the block valid on every stream */
        e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) return cml__cuda_error((int)e, fn, "cudaStreamSynchronize");
    }
    return CML_OK;
}

static void pool_free(void *state, void *ptr, size_t nbytes, void *stream) {
    if (!ptr) return;
    cudaStream_t s = (cudaStream_t)stream;
    /* Without a stream the block may still be in use anywhere on the device: wait for all of it. */
    if (!s && cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
    /* A void function cannot report: a failure here means the context is already lost. */
    if (cudaFreeAsync(ptr, s) != cudaSuccess) (void)cudaGetLastError();
}

const cml_allocator *cml__cuda_allocator(int device) {
    static const char fn[] = "cuda allocator";
    if (device < 0 || device >= CML__MAX_CUDA_DEVICES) {
        cml__error(CML_ERR_INVALID_ARG, "%s: device %d is out of range", fn, device);
        return NULL;
    }
    if (pools[device]) return &pools[device]->iface;
    const char *why = NULL;
    if (!cml_cuda_available(&why)) {
        cml__error(CML_ERR_CUDA, "%s: cannot use cuda:%d: %s", fn, device, why);
        return NULL;
    }
    int supported = 0;
    cudaError_t e = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device);
    if (e != cudaSuccess) {
        cml__cuda_error((int)e, fn, "cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)");
        return NULL;
    }
    if (!supported) {
        cml__error(CML_ERR_CUDA, "%s: cuda:%d does not support stream-ordered memory pools", fn, device);
        return NULL;
    }
    cuda_pool *p = calloc(1, sizeof *p);
    if (!p) {
        cml__error(CML_ERR_OOM, "%s: out of host memory", fn);
        return NULL;
    }
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    e = cudaMemPoolCreate(&p->pool, &props);
    if (e != cudaSuccess) {
        free(p);
        cml__cuda_error((int)e, fn, "cudaMemPoolCreate");
        return NULL;
    }
    uint64_t keep_everything = UINT64_MAX;
    e = cudaMemPoolSetAttribute(p->pool, cudaMemPoolAttrReleaseThreshold, &keep_everything);
    if (e != cudaSuccess) {
        cudaMemPoolDestroy(p->pool);
        free(p);
        cml__cuda_error((int)e, fn, "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
        return NULL;
    }
    p->device = device;
    p->iface = (cml_allocator){"cuda-pool", {CML_CUDA, device}, p, pool_alloc, pool_free};
    pools[device] = p; /* lives until the process ends, like the driver's own pools */
    return &p->iface;
}

cml_status cml__cuda_pool_stats(int device, size_t *reserved, size_t *used, size_t *used_peak) {
    CML_CHECK_ARG(device >= 0 && device < CML__MAX_CUDA_DEVICES && pools[device],
                  "cml__cuda_pool_stats: cuda:%d has no pool yet", device);
    cudaMemPool_t pool = pools[device]->pool;
    if (reserved) *reserved = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent);
    if (used) *used = pool_attr(pool, cudaMemPoolAttrUsedMemCurrent);
    if (used_peak) *used_peak = pool_attr(pool, cudaMemPoolAttrUsedMemHigh);
    return CML_OK;
}

#else /* no CUDA in this build */

const cml_allocator *cml__cuda_allocator(int device) {
    const char *why = NULL;
    cml_cuda_available(&why);
    cml__error(CML_ERR_CUDA, "cuda allocator: cannot use cuda:%d: %s", device, why);
    return NULL;
}

cml_status cml__cuda_pool_stats(int device, size_t *reserved, size_t *used, size_t *used_peak) {
    return cml__error(CML_ERR_CUDA, "cml__cuda_pool_stats: this build has no CUDA backend");
}

#endif
