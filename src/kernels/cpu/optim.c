/* CPU optimizer updates (PyTorch semantics), one pass over the buffers.
 *
 * SGD:  g = grad + wd * param; with momentum: buf = first_step ? g : momentum * buf + g,
 *       g = nesterov ? g + momentum * buf : buf; param -= lr * g.
 * Adam: (AdamW: param *= 1 - lr * wd; Adam: g = grad + wd * param)
 *       m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 *       param -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * The bias corrections are computed once in double; the per-element
 * arithmetic follows torch.optim's order of operations. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided.h"

cml_status cml__sgd_update_cpu(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf,
                               int64_t n, float lr, float momentum, bool nesterov,
                               float weight_decay, bool first_step) {
    bool use_momentum = momentum != 0.0f;
#pragma omp parallel for schedule(static) if (n >= CML__PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i];
        if (weight_decay != 0.0f) g += weight_decay * param[i];
        if (use_momentum) {
            float buf = first_step ? g : momentum * momentum_buf[i] + g;
            momentum_buf[i] = buf;
            g = nesterov ? g + momentum * buf : buf;
        }
        param[i] -= lr * g;
    }
    return CML_OK;
}

cml_status cml__adam_update_cpu(cml_ctx *ctx, float *param, const float *grad, float *m, float *v,
                                int64_t n, float lr, float beta1, float beta2, float eps,
                                float weight_decay, bool decoupled, int64_t step) {
    double bias1 = 1.0 - pow((double)beta1, (double)step);
    double bias2 = 1.0 - pow((double)beta2, (double)step);
    const float step_size = (float)((double)lr / bias1);
    const float sqrt_bias2 = (float)sqrt(bias2);
    const float decay = decoupled ? 1.0f - lr * weight_decay : 1.0f;
    const float l2 = decoupled ? 0.0f : weight_decay;
#pragma omp parallel for schedule(static) if (n >= CML__PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float p = param[i] * decay;
        float g = grad[i] + l2 * param[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = p - step_size * mi / (sqrtf(vi) / sqrt_bias2 + eps);
    }
    return CML_OK;
}
