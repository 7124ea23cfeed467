/* Contexts: a device, its stream and a workspace. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "runtime/ctx_impl.h"
#include "runtime/error.h"

cml_status cml_ctx_create(cml_ctx **out, cml_device d) {
    CML_CHECK_ARG(out, "cml_ctx_create: out must not be NULL");
    *out = NULL;
    if (d.type == CML_CUDA) {
        const char *why = NULL;
        if (!cml_cuda_available(&why))
            return cml__error(CML_ERR_CUDA, "cml_ctx_create: cannot use %s: %s", cml_device_name(d), why);
        return cml__error(CML_ERR_UNSUPPORTED,
                          "cml_ctx_create: the CUDA backend is not implemented yet; use the cpu device");
    }
    cml_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return cml__error(CML_ERR_OOM, "cml_ctx_create: out of memory");
    ctx->device = d;
    ctx->alloc = cml_allocator_default(d);
    *out = ctx;
    return CML_OK;
}

void cml_ctx_destroy(cml_ctx *ctx) {
    if (!ctx) return;
    if (ctx->workspace) ctx->alloc->free(ctx->alloc->state, ctx->workspace, ctx->workspace_size, ctx->stream);
    free(ctx);
}

cml_device cml_ctx_device(const cml_ctx *ctx) { return ctx->device; }

cml_status cml_ctx_synchronize(cml_ctx *ctx) {
    CML_CHECK_ARG(ctx, "cml_ctx_synchronize: ctx must not be NULL");
    return CML_OK;
}

cml_status cml_ctx_workspace(cml_ctx *ctx, void **ptr, size_t nbytes) {
    CML_CHECK_ARG(ctx && ptr, "cml_ctx_workspace: ctx and ptr must not be NULL");
    if (nbytes > ctx->workspace_size) {
        void *p = NULL;
        CML_TRY(ctx->alloc->alloc(ctx->alloc->state, &p, nbytes, ctx->stream));
        if (ctx->workspace) ctx->alloc->free(ctx->alloc->state, ctx->workspace, ctx->workspace_size, ctx->stream);
        ctx->workspace = p;
        ctx->workspace_size = nbytes;
    }
    *ptr = ctx->workspace;
    return CML_OK;
}

static cml_ctx *default_cpu_ctx;

static void destroy_default_contexts(void) {
    cml_ctx_destroy(default_cpu_ctx);
    default_cpu_ctx = NULL;
}

cml_ctx *cml_ctx_default(cml_device d) {
    if (d.type == CML_CPU) {
        if (!default_cpu_ctx) {
            if (cml_ctx_create(&default_cpu_ctx, d) != CML_OK) return NULL;
            atexit(destroy_default_contexts);
        }
        return default_cpu_ctx;
    }
    cml_ctx *ctx = NULL;
    cml_ctx_create(&ctx, d); /* sets the error: CUDA contexts come with the CUDA backend */
    return ctx;
}

int cml_cpu_threads(void) { return omp_get_max_threads(); }

void cml_set_cpu_threads(int n) {
    if (n < 1) return;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}
