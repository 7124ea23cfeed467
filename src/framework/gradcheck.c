/* Finite-difference gradient checking. */
#include <math.h>
#include <stdlib.h>

#include "framework/tensor_impl.h"

/* L = sum(w * y) in float64 over y's elements in row-major order. */
static double project(const cml_tensor *y, const float *w) {
    cml_tensor *c = cml_to_dtype(y, CML_F32);
    cml_tensor *cc = cml_contiguous(c);
    double sum = 0;
    if (cc) {
        const float *v = cml_tensor_data(cc);
        for (int64_t i = 0; i < cml_tensor_numel(cc); i++) sum += (double)w[i] * (double)v[i];
    }
    cml_tensor_release(cc);
    cml_tensor_release(c);
    return sum;
}

static cml_status eval_projection(cml_grad_fn f, cml_tensor *const *inputs, int n, void *user, const float *w,
                                  double *out) {
    cml_tensor *y = f(inputs, n, user);
    if (!y) return cml_last_status();
    *out = project(y, w);
    cml_tensor_release(y);
    return CML_OK;
}

cml_status cml_gradcheck(cml_grad_fn f, cml_tensor *const *inputs, int n, void *user,
                         const cml_gradcheck_opts *opts) {
    CML_CHECK_ARG(f && inputs && n > 0, "cml_gradcheck: f, inputs and n > 0 are required");
    double eps = opts && opts->eps > 0 ? opts->eps : 1e-3;
    double atol = opts && opts->atol > 0 ? opts->atol : 1e-3;
    double rtol = opts && opts->rtol > 0 ? opts->rtol : 1e-2;
    uint64_t seed = opts ? opts->seed : 0;
    for (int i = 0; i < n; i++) {
        const cml_tensor *t = inputs[i];
        CML_CHECK_ARG(t, "cml_gradcheck: inputs[%d] is NULL", i);
        if (t->requires_grad && (t->dtype != CML_F32 || t->storage->device.type != CML_CPU ||
                                 !cml_tensor_is_contiguous(t) || t->grad_fn))
            return cml__error(CML_ERR_INVALID_ARG, "cml_gradcheck: inputs[%d] must be a contiguous f32 CPU leaf", i);
        cml_tensor_clear_grad(inputs[i]);
    }

    /* Analytic gradients: backward with grad_root = w. */
    cml_tensor *y = f(inputs, n, user);
    if (!y) return cml_last_status();
    int64_t ny = cml_tensor_numel(y);
    float *w = malloc((size_t)(ny > 0 ? ny : 1) * sizeof *w);
    if (!w) {
        cml_tensor_release(y);
        return cml__error(CML_ERR_OOM, "cml_gradcheck: out of memory");
    }
    cml_rng rng;
    cml_rng_init(&rng, seed ^ 0x9e3779b97f4a7c15ull);
    for (int64_t i = 0; i < ny; i++) w[i] = 2.0f * cml_rng_uniform(&rng) - 1.0f;
    cml_tensor *wt = cml_tensor_from_host(w, y->ndim, y->shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor *wy = cml_to_dtype(wt, y->dtype);
    cml_status s = wy ? cml_backward(y, wy) : cml_last_status();
    cml_tensor_release(wy);
    cml_tensor_release(wt);
    cml_tensor_release(y);

    /* Numeric gradients by central differences, element by element. */
    bool prev = cml_set_grad_enabled(false);
    for (int i = 0; i < n && s == CML_OK; i++) {
        cml_tensor *t = inputs[i];
        if (!t->requires_grad) continue;
        float *x = cml_tensor_data(t);
        const cml_tensor *g = t->grad;
        for (int64_t k = 0; k < cml_tensor_numel(t) && s == CML_OK; k++) {
            float orig = x[k];
            double lp = 0, lm = 0;
            x[k] = (float)(orig + eps);
            double hp = (double)x[k] - orig; /* the step actually taken in f32 */
            s = eval_projection(f, inputs, n, user, w, &lp);
            x[k] = (float)(orig - eps);
            double hm = orig - (double)x[k];
            if (s == CML_OK) s = eval_projection(f, inputs, n, user, w, &lm);
            x[k] = orig;
            if (s != CML_OK) break;
            double numeric = (lp - lm) / (hp + hm);
            double analytic = g ? (double)((const float *)cml_tensor_data(g))[k] : 0.0;
            if (!(fabs(analytic - numeric) <= atol + rtol * fabs(numeric)))
                s = cml__error(CML_ERR_INTERNAL,
                               "cml_gradcheck: input %d element %lld: analytic %.6g vs numeric %.6g", i,
                               (long long)k, analytic, numeric);
        }
    }
    cml_set_grad_enabled(prev);
    free(w);
    return s;
}
