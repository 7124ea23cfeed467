/* The CUDA side of contexts: errors, device selection, streams and copies.
 * Without CUDA in the build every entry point fails with CML_ERR_CUDA. */
#include "runtime/cuda_backend.h"

#include "runtime/ctx_impl.h"
#include "runtime/cuda_index_check.h"
#include "runtime/error.h"

#ifdef CML_HAVE_CUDA
#include <cuda_runtime_api.h>

/* Returns from the enclosing function with CML_ERR_CUDA when a CUDA call fails. */
#define CUDA_TRY(fn, call)                                            \
    do {                                                              \
        cudaError_t cuda_try_err_ = (call);                           \
        if (cuda_try_err_ != cudaSuccess)                             \
            return cml__cuda_error((int)cuda_try_err_, (fn), #call);  \
    } while (0)

cml_status cml__cuda_error(int err, const char *fn, const char *call) {
    cudaError_t e = (cudaError_t)err;
    (void)cudaGetLastError(); /* clears a non-sticky error; a sticky one stays (the context is lost) */
    return cml__error(CML_ERR_CUDA, "%s: %s failed: %s (%s)", fn, call, cudaGetErrorString(e), cudaGetErrorName(e));
}

cml_status cml__cuda_activate(const cml_ctx *ctx) {
    int current = -1;
    CUDA_TRY("cml_ctx", cudaGetDevice(&current));
    if (current != ctx->device.index) CUDA_TRY("cml_ctx", cudaSetDevice(ctx->device.index));
    return CML_OK;
}

int cml__cuda_sm_count(int device) {
    static int cached[CML__MAX_CUDA_DEVICES];
    if (device < 0 || device >= CML__MAX_CUDA_DEVICES) return 0;
    if (cached[device] == 0) {
        int n = 0;
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        cached[device] = n;
    }
    return cached[device];
}

int cml__cuda_arch(int device) {
    static int cached[CML__MAX_CUDA_DEVICES];
    if (device < 0 || device >= CML__MAX_CUDA_DEVICES) return 0;
    if (cached[device] == 0) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        cached[device] = major * 10 + minor;
    }
    return cached[device];
}

cml_status cml__cuda_ctx_init(cml_ctx *ctx) {
    static const char fn[] = "cml_ctx_create";
    int n = 0;
    CUDA_TRY(fn, cudaGetDeviceCount(&n));
    if (ctx->device.index < 0 || ctx->device.index >= n || ctx->device.index >= CML__MAX_CUDA_DEVICES)
        return cml__error(CML_ERR_CUDA, "%s: %s does not exist (the driver reports %d CUDA device%s)", fn,
                          cml_device_name(ctx->device), n, n == 1 ? "" : "s");
    CUDA_TRY(fn, cudaSetDevice(ctx->device.index));
    cudaStream_t s = NULL;
    CUDA_TRY(fn, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ctx->stream = s;
    cml_status st = cml__index_check_init(ctx);
    if (st != CML_OK) {
        if (cudaStreamDestroy(s) != cudaSuccess) (void)cudaGetLastError();
        ctx->stream = NULL;
    }
    return st;
}

void cml__cuda_ctx_fini(cml_ctx *ctx) {
    cml__index_check_fini(ctx); /* an unreported bad index is dropped with the context */
    if (!ctx->stream) return;
    /* At process exit the CUDA runtime may already be unloading: nothing to report then. */
    if (cudaStreamDestroy((cudaStream_t)ctx->stream) != cudaSuccess) (void)cudaGetLastError();
    ctx->stream = NULL;
}

cml_status cml__cuda_stream_sync(cml_ctx *ctx, const char *fn) {
    CUDA_TRY(fn, cudaStreamSynchronize((cudaStream_t)ctx->stream));
    return cml__index_check_report(ctx, fn); /* a bad index a queued kernel found (cuda_index_check.h) */
}

cml_status cml__cuda_memcpy(cml_ctx *ctx, void *dst, const void *src, size_t nbytes, bool sync, const char *fn) {
    if (nbytes == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    cudaStream_t s = (cudaStream_t)ctx->stream;
    CUDA_TRY(fn, cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, s));
    if (!sync) return CML_OK;
    CUDA_TRY(fn, cudaStreamSynchronize(s));
    return cml__index_check_report(ctx, fn); /* the copy is done; a queued kernel's bad index is reported now */
}

cml_status cml__cuda_memset(cml_ctx *ctx, void *dst, int byte, size_t nbytes) {
    if (nbytes == 0) return CML_OK;
    CML_TRY(cml__cuda_activate(ctx));
    CUDA_TRY("cml__cuda_memset", cudaMemsetAsync(dst, byte, nbytes, (cudaStream_t)ctx->stream));
    return CML_OK;
}

cml_status cml__cuda_zeroed(cml_ctx *ctx, size_t bytes, const char *fn, void **out) {
    if (bytes > ctx->zeroed_size) {
        const size_t want = bytes > 16384 ? bytes : 16384;
        void *p = NULL;
        CML_TRY(ctx->alloc->alloc(ctx->alloc->state, &p, want, ctx->stream));
        const cudaError_t e = cudaMemsetAsync(p, 0, want, (cudaStream_t)ctx->stream);
        if (e != cudaSuccess) {
            ctx->alloc->free(ctx->alloc->state, p, want, ctx->stream);
            return cml__cuda_error((int)e, fn, "cudaMemsetAsync (the context's zeroed words)");
        }
        if (ctx->zeroed) ctx->alloc->free(ctx->alloc->state, ctx->zeroed, ctx->zeroed_size, ctx->stream);
        ctx->zeroed = p;
        ctx->zeroed_size = want;
    }
    *out = ctx->zeroed;
    return CML_OK;
}

#else /* no CUDA in this build */

static cml_status no_cuda(const char *fn) {
    const char *why = NULL;
    cml_cuda_available(&why);
    return cml__error(CML_ERR_CUDA, "%s: %s", fn, why);
}

cml_status cml__cuda_error(int err, const char *fn, const char *call) {
    return cml__error(CML_ERR_CUDA, "%s: %s failed (CUDA error %d)", fn, call, err);
}
cml_status cml__cuda_activate(const cml_ctx *ctx) { return no_cuda("cml_ctx"); }
int cml__cuda_sm_count(int device) { return 0; }
int cml__cuda_arch(int device) { return 0; }
cml_status cml__cuda_ctx_init(cml_ctx *ctx) { return no_cuda("cml_ctx_create"); }
void cml__cuda_ctx_fini(cml_ctx *ctx) {}
cml_status cml__cuda_stream_sync(cml_ctx *ctx, const char *fn) { return no_cuda(fn); }
cml_status cml__cuda_memcpy(cml_ctx *ctx, void *dst, const void *src, size_t nbytes, bool sync, const char *fn) {
    return no_cuda(fn);
}
cml_status cml__cuda_memset(cml_ctx *ctx, void *dst, int byte, size_t nbytes) { return no_cuda("cml__cuda_memset"); }
cml_status cml__cuda_zeroed(cml_ctx *ctx, size_t bytes, const char *fn, void **out) { return no_cuda(fn); }

#endif
