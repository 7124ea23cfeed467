/* Gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_). */
#include <math.h>

#include "camel/autograd.h"
#include "camel/kernels.h"
#include "camel/optim.h"
#include "framework/tensor_impl.h"

cml_status cml_clip_grad_norm(const cml_param *params, int n, double max_norm, double *total_norm) {
    const char *who = "cml_clip_grad_norm";
    if (total_norm) *total_norm = 0.0;
    CML_CHECK_ARG(n >= 0, "%s: n=%d must be >= 0", who, n);
    CML_CHECK_ARG(n == 0 || params, "%s: params must not be NULL when n=%d", who, n);
    CML_CHECK_ARG(isfinite(max_norm) && max_norm >= 0.0, "%s: max_norm=%g must be finite and >= 0", who, max_norm);
    for (int i = 0; i < n; i++) {
        const cml_tensor *t = params[i].tensor;
        CML_CHECK_ARG(t, "%s: parameter %d ('%s') is NULL", who, i, params[i].name);
        const cml_tensor *g = t->grad;
        if (!g) continue;
        if (g->dtype != CML_F32)
            return cml__error(CML_ERR_DTYPE, "%s: the grad of parameter %d ('%s') has dtype %s; expected f32", who, i,
                              params[i].name, cml_dtype_name(g->dtype));
        CML_CHECK_ARG(cml_tensor_is_contiguous(g), "%s: the grad of parameter %d ('%s') must be contiguous", who, i,
                      params[i].name);
    }
    /* Sum of squares in float64, parameter by parameter in order: deterministic. */
    double sumsq = 0.0;
    for (int i = 0; i < n; i++) {
        const cml_tensor *g = params[i].tensor->grad;
        if (!g) continue;
        /* a device gradient is copied to the host (waits for the stream), so that the sum is the CPU's */
        cml_tensor *gh = cml_tensor_to(g, CML_DEVICE_CPU);
        if (!gh) return cml_last_status();
        const float *v = cml_tensor_data(gh);
        int64_t m = cml_tensor_numel(gh);
        for (int64_t j = 0; j < m; j++) sumsq += (double)v[j] * (double)v[j];
        cml_tensor_release(gh);
    }
    double norm = sqrt(sumsq);
    if (total_norm) *total_norm = norm;
    if (!isfinite(norm)) return CML_OK; /* reported, gradients left as they are */
    /* PyTorch: coef = max_norm / (norm + 1e-6), clamped to 1, applied in f32. */
    double coef = max_norm / (norm + 1e-6);
    if (coef >= 1.0) return CML_OK;
    float c = (float)coef;
    for (int i = 0; i < n; i++) {
        cml_tensor *g = params[i].tensor->grad;
        if (!g) continue;
        int64_t m = cml_tensor_numel(g);
        if (g->storage->device.type != CML_CPU) { /* in place on the device: the same f32 multiply */
            cml_layout l = {1, {m}, {1}};
            CML_TRY(cml_unary(cml__ctx(g), CML_UNARY_SCALE, c, cml_tensor_data(g), &l, CML_F32, cml_tensor_data(g),
                              &l, CML_F32));
            continue;
        }
        float *v = cml_tensor_data(g);
        for (int64_t j = 0; j < m; j++) v[j] *= c;
    }
    return CML_OK;
}
