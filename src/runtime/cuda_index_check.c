/* Deferred reports of bad device-resident indices (see cuda_index_check.h). */
#include "runtime/cuda_index_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ctx_impl.h"
#include "runtime/cuda_backend.h"
#include "runtime/error.h"

#ifdef CML_HAVE_CUDA
#include <cuda_runtime_api.h>

#define POS_MASK ((1ull << CML__INDEX_POS_BITS) - 1)

struct cml__index_errors {
    bool sync_checks;         /* CML_SYNC_CHECKS: every call checks at once */
    unsigned long long *word; /* device: lowest (call << 40 | position); NULL until the first call */
    unsigned *seen_host;      /* mapped pinned word a flagging kernel sets; NULL without mapped memory */
    unsigned *seen_dev;       /* its device address */
    bool dirty;               /* word holds a reported error: reset it before the next call's kernels */
    int calls;                /* calls registered since the last check, at most CML__INDEX_CALLS */
    long long later;          /* calls beyond those, sharing the last call number */
    cml__index_call rec[CML__INDEX_CALLS + 1]; /* rec[CML__INDEX_CALLS]: the first of the later calls */
};

cml_status cml__index_check_init(cml_ctx *ctx) {
    struct cml__index_errors *e = calloc(1, sizeof *e);
    if (!e) return cml__error(CML_ERR_OOM, "cml_ctx_create: out of host memory");
    const char *v = getenv("CML_SYNC_CHECKS");
    e->sync_checks = v && *v && strcmp(v, "0") != 0;
    ctx->index_errors = e;
    return CML_OK;
}

void cml__index_check_fini(cml_ctx *ctx) {
    struct cml__index_errors *e = ctx->index_errors;
    if (!e) return;
    /* At process exit the CUDA runtime may already be unloading: nothing to report then. */
    if (e->word && cudaFree(e->word) != cudaSuccess) (void)cudaGetLastError();
    if (e->seen_host && cudaFreeHost(e->seen_host) != cudaSuccess) (void)cudaGetLastError();
    free(e);
    ctx->index_errors = NULL;
}

/* The device word and the mapped host word, once per context (cudaMalloc: a one-time cost). */
static cml_status alloc_words(struct cml__index_errors *e, const char *fn) {
    cudaError_t err = cudaMalloc((void **)&e->word, sizeof *e->word);
    if (err != cudaSuccess) {
        e->word = NULL;
        return cml__cuda_error((int)err, fn, "cudaMalloc (the bad-index word)");
    }
    e->dirty = true; /* not yet set to "no bad index" */
    unsigned *h = NULL;
    if (cudaHostAlloc((void **)&h, sizeof *h, cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess &&
        cudaHostGetDevicePointer((void **)&e->seen_dev, h, 0) == cudaSuccess) {
        *(volatile unsigned *)h = 0u;
        e->seen_host = h;
    } else { /* no mapped memory: a check copies the device word back after every registered call */
        (void)cudaGetLastError();
        if (h) (void)cudaFreeHost(h);
        e->seen_host = e->seen_dev = NULL;
    }
    return CML_OK;
}

cml_status cml__index_check_begin(cml_ctx *ctx, const cml__index_call *call, int64_t positions,
                                  cml__index_flag *flag) {
    struct cml__index_errors *e = ctx->index_errors;
    CML_ASSERT(e != NULL);
    if (positions < 0 || (unsigned long long)positions > POS_MASK)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: %s has %lld elements; at most 2^%d can be checked on CUDA",
                          call->fn, call->arg, (long long)positions, CML__INDEX_POS_BITS);
    if (!e->word) CML_TRY(alloc_words(e, call->fn));
    if (e->dirty) {
        cudaError_t err = cudaMemsetAsync(e->word, 0xFF, sizeof *e->word, (cudaStream_t)ctx->stream);
        if (err != cudaSuccess) return cml__cuda_error((int)err, call->fn, "cudaMemsetAsync (the bad-index word)");
        e->dirty = false;
    }
    unsigned long long number;
    if (e->calls < CML__INDEX_CALLS) {
        number = (unsigned long long)e->calls;
        e->rec[e->calls++] = *call;
    } else {
        number = CML__INDEX_CALLS;
        if (e->later++ == 0) e->rec[CML__INDEX_CALLS] = *call;
    }
    flag->word = e->word;
    flag->seen = e->seen_dev;
    flag->call = number << CML__INDEX_POS_BITS;
    return CML_OK;
}

cml_status cml__index_check_end(cml_ctx *ctx, const char *fn) {
    const struct cml__index_errors *e = ctx->index_errors;
    return e && e->sync_checks ? cml__cuda_stream_sync(ctx, fn) : CML_OK;
}

cml_status cml__index_check_report(cml_ctx *ctx, const char *reporter) {
    struct cml__index_errors *e = ctx->index_errors;
    if (!e || e->calls == 0) return CML_OK;
    const long long later = e->later;
    e->calls = 0;
    e->later = 0;
    if (e->seen_host) {
        if (*(volatile unsigned *)e->seen_host == 0u) return CML_OK;
        *(volatile unsigned *)e->seen_host = 0u;
    }
    /* The stream is idle (the caller waited), so this copy waits for nothing else. */
    cudaStream_t s = (cudaStream_t)ctx->stream;
    unsigned long long key = CML__INDEX_NO_BAD;
    cudaError_t err = cudaMemcpyAsync(&key, e->word, sizeof key, cudaMemcpyDeviceToHost, s);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) {
        e->dirty = true;
        return cml__cuda_error((int)err, reporter, "cudaMemcpyAsync (the bad-index word)");
    }
    if (key == CML__INDEX_NO_BAD) return CML_OK;
    e->dirty = true;
    const unsigned long long number = key >> CML__INDEX_POS_BITS;
    const long long pos = (long long)(key & POS_MASK);
    if (number > CML__INDEX_CALLS) /* cannot happen: the word only ever holds what begin handed out */
        return cml__error(CML_ERR_INTERNAL, "%s: bad-index word 0x%llx holds an unknown call", reporter, key);
    const cml__index_call *c = &e->rec[number];
    const bool exact = number < CML__INDEX_CALLS || later == 1;
    char range[160];
    if (c->has_ignore)
        snprintf(range, sizeof range, "must be in [0, %s%lld) or equal ignore_index=%lld", c->bound_name,
                 (long long)c->bound, (long long)c->ignore);
    else
        snprintf(range, sizeof range, "must be in [0, %s%lld)", c->bound_name, (long long)c->bound);
    char where[200] = "";
    if (strcmp(reporter, c->fn) != 0) snprintf(where, sizeof where, " (found on the GPU; reported by %s)", reporter);
    if (!exact)
        return cml__error(CML_ERR_INVALID_ARG,
                          "%s: %s[%lld] %s in one of the %lld index-checked calls queued after the first %d since "
                          "the last check (this is the first of them; the position may belong to another: set "
                          "CML_SYNC_CHECKS=1 to have every call check itself)%s",
                          c->fn, c->arg, pos, range, later, CML__INDEX_CALLS, where);
    /* The value, from the caller's buffer (it must still be alive); omitted when it cannot be read. */
    int64_t v = 0;
    err = cudaMemcpyAsync(&v, c->idx + pos, sizeof v, cudaMemcpyDeviceToHost, s);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return cml__error(CML_ERR_INVALID_ARG, "%s: %s[%lld] %s (its value could not be read back)%s", c->fn,
                          c->arg, pos, range, where);
    }
    return cml__error(CML_ERR_INVALID_ARG, "%s: %s[%lld]=%lld %s%s", c->fn, c->arg, pos, (long long)v, range, where);
}

#else /* no CUDA in this build: no CUDA context can exist, so there is never anything to report */

cml_status cml__index_check_init(cml_ctx *ctx) { return CML_OK; }
void cml__index_check_fini(cml_ctx *ctx) {}
cml_status cml__index_check_begin(cml_ctx *ctx, const cml__index_call *call, int64_t positions,
                                  cml__index_flag *flag) {
    return cml__error(CML_ERR_CUDA, "%s: this build has no CUDA", call->fn);
}
cml_status cml__index_check_end(cml_ctx *ctx, const char *fn) { return CML_OK; }
cml_status cml__index_check_report(cml_ctx *ctx, const char *reporter) { return CML_OK; }

#endif
