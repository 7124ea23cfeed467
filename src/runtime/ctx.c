/* Contexts: a device, its stream and a workspace. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "runtime/ctx_impl.h"
#include "runtime/cuda_backend.h"
#include "runtime/error.h"

cml_status cml_ctx_create(cml_ctx **out, cml_device d) {
    CML_CHECK_ARG(out, "cml_ctx_create: out must not be NULL");
    *out = NULL;
    if (d.type == CML_CUDA) {
        const char *why = NULL;
        if (!cml_cuda_available(&why))
            return cml__error(CML_ERR_CUDA, "cml_ctx_create: cannot use %s: %s", cml_device_name(d), why);
    } else if (d.type != CML_CPU) {
        return cml__error(CML_ERR_INVALID_ARG, "cml_ctx_create: unknown device type %d", (int)d.type);
    }
    cml_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return cml__error(CML_ERR_OOM, "cml_ctx_create: out of memory");
    ctx->device = d;
    if (d.type == CML_CUDA) {
        cml_status s = cml__cuda_ctx_init(ctx); /* selects the device, creates the stream */
        if (s != CML_OK) {
            free(ctx);
            return s;
        }
    }
    ctx->alloc = cml_allocator_default(d);
    if (!ctx->alloc) {
        cml_status s = cml_last_status() != CML_OK ? cml_last_status() : CML_ERR_INTERNAL;
        cml__cuda_ctx_fini(ctx);
        free(ctx);
        return s; /* the allocator set the error */
    }
    *out = ctx;
    return CML_OK;
}

void cml_ctx_destroy(cml_ctx *ctx) {
    if (!ctx) return;
    if (ctx->workspace) ctx->alloc->free(ctx->alloc->state, ctx->workspace, ctx->workspace_size, ctx->stream);
    if (ctx->zeroed) ctx->alloc->free(ctx->alloc->state, ctx->zeroed, ctx->zeroed_size, ctx->stream);
    if (ctx->device.type == CML_CUDA) cml__cuda_ctx_fini(ctx);
    free(ctx);
}

cml_device cml_ctx_device(const cml_ctx *ctx) { return ctx->device; }

void *cml_ctx_stream(const cml_ctx *ctx) { return ctx ? ctx->stream : NULL; }

cml_status cml_ctx_synchronize(cml_ctx *ctx) {
    CML_CHECK_ARG(ctx, "cml_ctx_synchronize: ctx must not be NULL");
    if (ctx->device.type == CML_CUDA) return cml__cuda_stream_sync(ctx, "cml_ctx_synchronize");
    return CML_OK;
}

cml_status cml_ctx_workspace(cml_ctx *ctx, void **ptr, size_t nbytes) {
    CML_CHECK_ARG(ctx && ptr, "cml_ctx_workspace: ctx and ptr must not be NULL");
    if (nbytes > ctx->workspace_size) {
        void *p = NULL;
        CML_TRY(ctx->alloc->alloc(ctx->alloc->state, &p, nbytes, ctx->stream));
        /* Stream-ordered: kernels already queued on ctx's stream finish with the old block first. */
        if (ctx->workspace) ctx->alloc->free(ctx->alloc->state, ctx->workspace, ctx->workspace_size, ctx->stream);
        ctx->workspace = p;
        ctx->workspace_size = nbytes;
    }
    *ptr = ctx->workspace;
    return CML_OK;
}

/* Default contexts, one per device, created on first use and destroyed at exit. */
static cml_ctx *default_cpu_ctx;
static cml_ctx *default_cuda_ctx[CML__MAX_CUDA_DEVICES];
static bool defaults_registered;

static void destroy_default_contexts(void) {
    cml_ctx_destroy(default_cpu_ctx);
    default_cpu_ctx = NULL;
    for (int i = 0; i < CML__MAX_CUDA_DEVICES; i++) {
        cml_ctx_destroy(default_cuda_ctx[i]);
        default_cuda_ctx[i] = NULL;
    }
}

cml_ctx *cml_ctx_default(cml_device d) {
    cml_ctx **slot = NULL;
    if (d.type == CML_CPU) {
        slot = &default_cpu_ctx;
    } else if (d.type == CML_CUDA && d.index >= 0 && d.index < CML__MAX_CUDA_DEVICES) {
        slot = &default_cuda_ctx[d.index];
    } else {
        cml__error(CML_ERR_INVALID_ARG, "cml_ctx_default: %s is not a usable device", cml_device_name(d));
        return NULL;
    }
    if (!*slot) {
        if (cml_ctx_create(slot, d) != CML_OK) return NULL;
        if (!defaults_registered) {
            defaults_registered = true;
            atexit(destroy_default_contexts);
        }
    }
    return *slot;
}

cml_ctx *cml__ctx_default_existing(cml_device d) {
    if (d.type == CML_CPU) return default_cpu_ctx;
    if (d.type == CML_CUDA && d.index >= 0 && d.index < CML__MAX_CUDA_DEVICES) return default_cuda_ctx[d.index];
    return NULL;
}

int cml_cpu_threads(void) { return omp_get_max_threads(); }

void cml_set_cpu_threads(int n) {
    if (n < 1) return;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}
