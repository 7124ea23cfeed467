/* CPU optimizer updates (PyTorch semantics), one pass over the buffers.
 *
 * SGD:  g = grad + wd * param; with momentum: buf = first_step ? g : momentum * buf + g,
 *       g = nesterov ? g + momentum * buf : buf; param -= lr * g.
 * Adam: (AdamW: param *= 1 - lr * wd; Adam: g = grad + wd * param)
 *       m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 *       param -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * The bias corrections are computed once in double; the per-element
 * arithmetic follows torch.optim's order of operations. The single-tensor and
 * the multi-tensor loops share the per-element functions, so they give the
 * same bits; the multi-tensor ones first scale the grad by the clip
 * coefficient when one is given (as clipping the grads in place would). The
 * global gradient norm follows the fixed order of kernels/optim_multi.h. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"
#include "kernels/optim_multi.h"

typedef struct sgd_consts {
    float lr, momentum, weight_decay;
    bool nesterov, first_step;
} sgd_consts;

typedef struct adam_consts {
    float beta1, beta2, eps, step_size, sqrt_bias2, decay, l2;
} adam_consts;

static adam_consts adam_consts_of(float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                                  int64_t step) {
    double bias1 = 1.0 - pow((double)beta1, (double)step);
    double bias2 = 1.0 - pow((double)beta2, (double)step);
    adam_consts k = {beta1, beta2, eps, (float)((double)lr / bias1), (float)sqrt(bias2),
                     decoupled ? 1.0f - lr * weight_decay : 1.0f, decoupled ? 0.0f : weight_decay};
    return k;
}

/* One element; g is the (clipped) gradient. */
static inline void sgd_element(const sgd_consts *k, float *param, float g, float *buf) {
    if (k->weight_decay != 0.0f) g += k->weight_decay * *param;
    if (k->momentum != 0.0f) {
        float b = k->first_step ? g : k->momentum * *buf + g;
        *buf = b;
        g = k->nesterov ? g + k->momentum * b : b;
    }
    *param -= k->lr * g;
}

static inline void adam_element(const adam_consts *k, float *param, float grad, float *m, float *v) {
    float p = *param * k->decay;
    float g = grad + k->l2 * *param;
    float mi = k->beta1 * *m + (1.0f - k->beta1) * g;
    float vi = k->beta2 * *v + (1.0f - k->beta2) * g * g;
    *m = mi;
    *v = vi;
    *param = p - k->step_size * mi / (sqrtf(vi) / k->sqrt_bias2 + k->eps);
}

cml_status cml__sgd_update_cpu(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf,
                               int64_t n, float lr, float momentum, bool nesterov,
                               float weight_decay, bool first_step) {
    const sgd_consts k = {lr, momentum, weight_decay, nesterov, first_step};
#pragma omp parallel for schedule(static) if (n >= CML__PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) sgd_element(&k, &param[i], grad[i], momentum_buf ? &momentum_buf[i] : NULL);
    return CML_OK;
}

cml_status cml__adam_update_cpu(cml_ctx *ctx, float *param, const float *grad, float *m, float *v,
                                int64_t n, float lr, float beta1, float beta2, float eps,
                                float weight_decay, bool decoupled, int64_t step) {
    const adam_consts k = adam_consts_of(lr, beta1, beta2, eps, weight_decay, decoupled, step);
#pragma omp parallel for schedule(static) if (n >= CML__PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) adam_element(&k, &param[i], grad[i], &m[i], &v[i]);
    return CML_OK;
}

/* ---- multi-tensor ---------------------------------------------------------------------- */

static int64_t total_elements(const cml_param_list *list) {
    int64_t total = 0;
    for (int s = 0; s < list->count; s++) total += list->slices[s].n;
    return total;
}

/* Elements [*lo, *hi) of chunk c. */
static const cml_param_slice *chunk_range(const cml_param_list *list, int64_t c, int64_t *lo, int64_t *hi) {
    const cml_param_slice *s = &list->slices[list->chunks[c].slice];
    *lo = (int64_t)list->chunks[c].index * CML_PARAM_CHUNK;
    *hi = *lo + CML_PARAM_CHUNK < s->n ? *lo + CML_PARAM_CHUNK : s->n;
    return s;
}

cml_status cml__sgd_update_multi_cpu(const cml_param_list *list, float lr, float momentum, bool nesterov,
                                     float weight_decay, bool first_step, const float *clip_coef) {
    const sgd_consts k = {lr, momentum, weight_decay, nesterov, first_step};
    const bool clip = clip_coef != NULL;
    const float c = clip ? *clip_coef : 1.0f;
#pragma omp parallel for schedule(dynamic, 4) if (total_elements(list) >= CML__PARALLEL_MIN)
    for (int64_t ch = 0; ch < list->nchunks; ch++) {
        int64_t lo, hi;
        const cml_param_slice *s = chunk_range(list, ch, &lo, &hi);
        for (int64_t i = lo; i < hi; i++)
            sgd_element(&k, &s->param[i], clip ? s->grad[i] * c : s->grad[i], s->m ? &s->m[i] : NULL);
    }
    return CML_OK;
}

cml_status cml__adam_update_multi_cpu(const cml_param_list *list, float lr, float beta1, float beta2, float eps,
                                      float weight_decay, bool decoupled, int64_t step, const float *clip_coef) {
    const adam_consts k = adam_consts_of(lr, beta1, beta2, eps, weight_decay, decoupled, step);
    const bool clip = clip_coef != NULL;
    const float c = clip ? *clip_coef : 1.0f;
#pragma omp parallel for schedule(dynamic, 4) if (total_elements(list) >= CML__PARALLEL_MIN)
    for (int64_t ch = 0; ch < list->nchunks; ch++) {
        int64_t lo, hi;
        const cml_param_slice *s = chunk_range(list, ch, &lo, &hi);
        for (int64_t i = lo; i < hi; i++)
            adam_element(&k, &s->param[i], clip ? s->grad[i] * c : s->grad[i], &s->m[i], &s->v[i]);
    }
    return CML_OK;
}

/* The sum of squares of one chunk in the fixed order of optim_multi.h. */
static double chunk_sumsq(const float *g, int64_t len) {
    double lane[CML__NORM_LANES] = {0};
    for (int64_t e = 0; e < len; e++) { /* increasing e visits each lane's (k, q) in order */
        const double x = (double)g[e];
        lane[(e / 4) % CML__NORM_LANES] += x * x;
    }
    return cml__lane_tree(lane);
}

cml_status cml__param_list_grad_norm_cpu(cml_param_list *list, double max_norm) {
#pragma omp parallel for schedule(dynamic, 4) if (total_elements(list) >= CML__PARALLEL_MIN)
    for (int64_t ch = 0; ch < list->nchunks; ch++) {
        int64_t lo, hi;
        const cml_param_slice *s = chunk_range(list, ch, &lo, &hi);
        list->partials[ch] = chunk_sumsq(s->grad + lo, hi - lo);
    }
    double lane[CML__NORM_LANES] = {0};
    for (int64_t ch = 0; ch < list->nchunks; ch++) lane[ch % CML__NORM_LANES] += list->partials[ch];
    const double norm = sqrt(cml__lane_tree(lane));
    const double coef = max_norm / (norm + 1e-6);
    list->result->norm = norm;
    list->result->coef = isfinite(norm) && coef < 1.0 ? (float)coef : 1.0f;
    return CML_OK;
}
