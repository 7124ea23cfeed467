/* Optimizer updates over contiguous f32 buffers: validation and dispatch.
 * Hyperparameter ranges follow PyTorch's checks (lr, momentum, weight decay,
 * eps >= 0; betas in [0, 1); Nesterov needs momentum > 0). The multi-tensor
 * parameter list (kernels/optim_multi.h) is managed here: host copies of the
 * slices and of the chunk table, which the CUDA backend mirrors on the device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "camel/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel_check.h"
#include "kernels/optim_multi.h"
#ifdef CML_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

static cml_status check_nonneg(const char *fn, const char *name, float v) {
    if (!(v >= 0.0f)) return cml__error(CML_ERR_INVALID_ARG, "%s: %s=%g must be >= 0", fn, name, (double)v);
    return CML_OK;
}

static cml_status check_sgd(const char *fn, float lr, float momentum, bool nesterov, float weight_decay) {
    CML_TRY(check_nonneg(fn, "lr", lr));
    CML_TRY(check_nonneg(fn, "momentum", momentum));
    CML_TRY(check_nonneg(fn, "weight_decay", weight_decay));
    CML_CHECK_ARG(!nesterov || momentum > 0.0f, "%s: nesterov=true needs momentum > 0 (got %g)", fn, (double)momentum);
    return CML_OK;
}

static cml_status check_adam(const char *fn, float lr, float beta1, float beta2, float eps, float weight_decay,
                             int64_t step) {
    CML_TRY(cml__check_size(fn, "step", step, 1));
    CML_TRY(check_nonneg(fn, "lr", lr));
    CML_TRY(check_nonneg(fn, "eps", eps));
    CML_TRY(check_nonneg(fn, "weight_decay", weight_decay));
    CML_CHECK_ARG(beta1 >= 0.0f && beta1 < 1.0f, "%s: beta1=%g must be in [0, 1)", fn, (double)beta1);
    CML_CHECK_ARG(beta2 >= 0.0f && beta2 < 1.0f, "%s: beta2=%g must be in [0, 1)", fn, (double)beta2);
    return CML_OK;
}

cml_status cml_sgd_update(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf,
                          int64_t n, float lr, float momentum, bool nesterov,
                          float weight_decay, bool first_step) {
    static const char fn[] = "cml_sgd_update";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(cml__check_size(fn, "n", n, 0));
    CML_TRY(check_sgd(fn, lr, momentum, nesterov, weight_decay));
    if (n > 0) {
        CML__CHECK_NOT_NULL(fn, param);
        CML__CHECK_NOT_NULL(fn, grad);
        CML_CHECK_ARG(momentum == 0.0f || momentum_buf != NULL, "%s: momentum_buf must not be NULL when momentum=%g", fn,
                      (double)momentum);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__sgd_update_cuda(ctx, param, grad, momentum_buf, n, lr, momentum, nesterov, weight_decay, first_step);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__sgd_update_cpu(ctx, param, grad, momentum_buf, n, lr, momentum, nesterov, weight_decay, first_step);
}

cml_status cml_adam_update(cml_ctx *ctx, float *param, const float *grad, float *m, float *v,
                           int64_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, bool decoupled, int64_t step) {
    static const char fn[] = "cml_adam_update";
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(cml__check_size(fn, "n", n, 0));
    CML_TRY(check_adam(fn, lr, beta1, beta2, eps, weight_decay, step));
    if (n > 0) {
        CML__CHECK_NOT_NULL(fn, param);
        CML__CHECK_NOT_NULL(fn, grad);
        CML__CHECK_NOT_NULL(fn, m);
        CML__CHECK_NOT_NULL(fn, v);
    }
#ifdef CML_HAVE_CUDA
    if (cml_ctx_device(ctx).type == CML_CUDA)
        return cml__adam_update_cuda(ctx, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step);
#endif
    if (cml_ctx_device(ctx).type != CML_CPU) return cml__no_device_impl(fn, ctx);
    return cml__adam_update_cpu(ctx, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step);
}

/* ---- multi-tensor parameter lists ----------------------------------------------------- */

static bool on_cuda(const cml_ctx *ctx) { return cml_ctx_device(ctx).type == CML_CUDA; }

/* The device has a backend for lists (the CPU, or CUDA in a CUDA build). */
static cml_status check_list_device(const char *fn, cml_ctx *ctx) {
    const cml_device_type t = cml_ctx_device(ctx).type;
#ifdef CML_HAVE_CUDA
    if (t == CML_CUDA) return CML_OK;
#endif
    if (t != CML_CPU) return cml__no_device_impl(fn, ctx);
    return CML_OK;
}

cml_status cml_param_list_create(cml_ctx *ctx, cml_param_list **out) {
    static const char fn[] = "cml_param_list_create";
    CML__CHECK_NOT_NULL(fn, out);
    *out = NULL;
    CML__CHECK_NOT_NULL(fn, ctx);
    CML_TRY(check_list_device(fn, ctx));
    cml_param_list *list = calloc(1, sizeof *list);
    if (!list) return cml__error(CML_ERR_OOM, "%s: out of host memory", fn);
    list->ctx = ctx;
    cml_status s = CML_OK;
#ifdef CML_HAVE_CUDA
    if (on_cuda(ctx)) s = cml__param_list_init_cuda(list);
#endif
    if (!on_cuda(ctx)) {
        list->result = malloc(sizeof *list->result);
        if (list->result) *list->result = (cml__norm_result){NAN, 1.0f};
        else s = cml__error(CML_ERR_OOM, "%s: out of host memory", fn);
    }
    if (s != CML_OK) {
        cml_param_list_destroy(list);
        return s;
    }
    *out = list;
    return CML_OK;
}

/* Grows a host array to hold `need` elements of `size` bytes (capacity doubles). */
static bool grow(void **arr, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return true;
    int64_t c = *cap > 0 ? *cap : 16;
    while (c < need) c *= 2;
    void *p = realloc(*arr, (size_t)c * size);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

cml_status cml_param_list_set(cml_param_list *list, const cml_param_slice *slices, int count, bool *changed) {
    static const char fn[] = "cml_param_list_set";
    if (changed) *changed = false;
    CML__CHECK_NOT_NULL(fn, list);
    CML_CHECK_ARG(count >= 0, "%s: count=%d must be >= 0", fn, count);
    CML_CHECK_ARG(count == 0 || slices, "%s: slices must not be NULL when count=%d", fn, count);
    int64_t nchunks = 0;
    for (int i = 0; i < count; i++) {
        const cml_param_slice *s = &slices[i];
        CML_CHECK_ARG(s->n >= 0, "%s: slices[%d].n=%lld must be >= 0", fn, i, (long long)s->n);
        CML_CHECK_ARG(s->n == 0 || (s->param && s->grad), "%s: slices[%d].param and .grad must not be NULL (n=%lld)",
                      fn, i, (long long)s->n);
        nchunks += cml__chunks_of(s->n);
        CML_CHECK_ARG(nchunks <= INT32_MAX, "%s: the slices hold more than %lld chunks of %d elements", fn,
                      (long long)INT32_MAX, CML_PARAM_CHUNK);
    }
    if (count == list->count && (count == 0 || memcmp(slices, list->slices, (size_t)count * sizeof *slices) == 0))
        return CML_OK;
    int64_t slice_cap = list->slice_cap;
    bool ok = grow((void **)&list->slices, &slice_cap, count, sizeof *list->slices) &&
              grow((void **)&list->chunks, &list->chunk_cap, nchunks, sizeof *list->chunks);
    list->slice_cap = (int)slice_cap;
    if (ok && !on_cuda(list->ctx)) ok = grow((void **)&list->partials, &list->partials_cap, nchunks, sizeof(double));
    if (!ok) return cml__error(CML_ERR_OOM, "%s: out of host memory for %d slices", fn, count);
    if (count > 0) memcpy(list->slices, slices, (size_t)count * sizeof *slices);
    list->count = count;
    int64_t c = 0;
    for (int i = 0; i < count; i++)
        for (int64_t k = 0; k < cml__chunks_of(slices[i].n); k++) list->chunks[c++] = (cml__chunk){i, (int32_t)k};
    list->nchunks = nchunks;
    if (changed) *changed = true;
#ifdef CML_HAVE_CUDA
    if (on_cuda(list->ctx)) {
        cml_status s = cml__param_list_upload_cuda(list);
        if (s != CML_OK) { /* the device table is stale: empty the list so that the next set uploads */
            list->count = 0;
            list->nchunks = 0;
            return s;
        }
    }
#endif
    return CML_OK;
}

int cml_param_list_count(const cml_param_list *list) { return list ? list->count : 0; }

void cml_param_list_destroy(cml_param_list *list) {
    if (!list) return;
#ifdef CML_HAVE_CUDA
    if (on_cuda(list->ctx)) cml__param_list_free_cuda(list);
#endif
    if (!on_cuda(list->ctx)) {
        free(list->partials);
        free(list->result);
    }
    free(list->slices);
    free(list->chunks);
    free(list);
}

/* ctx must be the list's own context (its table is ordered on that stream). */
static cml_status check_list_ctx(const char *fn, const cml_ctx *ctx, const cml_param_list *list) {
    CML__CHECK_NOT_NULL(fn, ctx);
    CML__CHECK_NOT_NULL(fn, list);
    CML_CHECK_ARG(ctx == list->ctx, "%s: list was created for another context (on %s); ctx is on %s", fn,
                  cml_device_name(cml_ctx_device(list->ctx)), cml_device_name(cml_ctx_device(ctx)));
    return CML_OK;
}

cml_status cml_param_list_grad_norm(cml_ctx *ctx, cml_param_list *list, double max_norm) {
    static const char fn[] = "cml_param_list_grad_norm";
    CML_TRY(check_list_ctx(fn, ctx, list));
    CML_CHECK_ARG(isfinite(max_norm) && max_norm >= 0.0, "%s: max_norm=%g must be finite and >= 0", fn, max_norm);
#ifdef CML_HAVE_CUDA
    if (on_cuda(ctx)) {
        CML_TRY(cml__param_list_grad_norm_cuda(list, max_norm));
        list->has_norm = true;
        return CML_OK;
    }
#endif
    CML_TRY(cml__param_list_grad_norm_cpu(list, max_norm));
    list->has_norm = true;
    return CML_OK;
}

cml_status cml_param_list_read_norm(cml_ctx *ctx, const cml_param_list *list, double *norm) {
    static const char fn[] = "cml_param_list_read_norm";
    CML_TRY(check_list_ctx(fn, ctx, list));
    CML__CHECK_NOT_NULL(fn, norm);
    CML_CHECK_ARG(list->has_norm, "%s: no norm yet (call cml_param_list_grad_norm first)", fn);
#ifdef CML_HAVE_CUDA
    if (on_cuda(ctx)) return cml__param_list_read_norm_cuda(list, norm);
#endif
    *norm = list->result->norm;
    return CML_OK;
}

const float *cml_param_list_clip_coef(const cml_param_list *list) {
    return list && list->result ? &list->result->coef : NULL;
}

/* Every slice has the state buffers the algorithm uses. */
static cml_status check_state(const char *fn, const cml_param_list *list, bool need_m, bool need_v) {
    for (int i = 0; i < list->count; i++) {
        const cml_param_slice *s = &list->slices[i];
        if (s->n == 0) continue;
        CML_CHECK_ARG(!need_m || s->m, "%s: slice %d has m = NULL (n=%lld); %s", fn, i, (long long)s->n,
                      need_v ? "Adam needs m and v" : "SGD with momentum > 0 needs it");
        CML_CHECK_ARG(!need_v || s->v, "%s: slice %d has v = NULL (n=%lld); Adam needs m and v", fn, i,
                      (long long)s->n);
    }
    return CML_OK;
}

cml_status cml_sgd_update_multi(cml_ctx *ctx, const cml_param_list *list, float lr, float momentum, bool nesterov,
                                float weight_decay, bool first_step, const float *clip_coef) {
    static const char fn[] = "cml_sgd_update_multi";
    CML_TRY(check_list_ctx(fn, ctx, list));
    CML_TRY(check_sgd(fn, lr, momentum, nesterov, weight_decay));
    CML_TRY(check_state(fn, list, momentum != 0.0f, false));
    if (list->nchunks == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (on_cuda(ctx))
        return cml__sgd_update_multi_cuda(list, lr, momentum, nesterov, weight_decay, first_step, clip_coef);
#endif
    return cml__sgd_update_multi_cpu(list, lr, momentum, nesterov, weight_decay, first_step, clip_coef);
}

cml_status cml_adam_update_multi(cml_ctx *ctx, const cml_param_list *list, float lr, float beta1, float beta2,
                                 float eps, float weight_decay, bool decoupled, int64_t step,
                                 const float *clip_coef) {
    static const char fn[] = "cml_adam_update_multi";
    CML_TRY(check_list_ctx(fn, ctx, list));
    CML_TRY(check_adam(fn, lr, beta1, beta2, eps, weight_decay, step));
    CML_TRY(check_state(fn, list, true, true));
    if (list->nchunks == 0) return CML_OK;
#ifdef CML_HAVE_CUDA
    if (on_cuda(ctx))
        return cml__adam_update_multi_cuda(list, lr, beta1, beta2, eps, weight_decay, decoupled, step, clip_coef);
#endif
    return cml__adam_update_multi_cpu(list, lr, beta1, beta2, eps, weight_decay, decoupled, step, clip_coef);
}
