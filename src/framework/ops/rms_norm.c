/* rms_norm over the last dim, with its backward (cml_rmsnorm_bwd). */
#include <math.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* inputs: x, gamma (may be NULL); saved: contiguous x, rstd. */
static cml_status rms_norm_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->saved[0], *rstd = node->saved[1];
    const cml_tensor *gamma = node->inputs[1];
    int64_t C = x->shape[x->ndim - 1], rows = C > 0 ? cml_tensor_numel(x) / C : 0;
    bool want_g = cml__wants_grad(node, 1);
    cml_tensor *gc = cml_contiguous(g);
    cml_tensor *gam = gamma ? cml_contiguous(gamma) : NULL;
    cml_tensor *dx = cml__tensor_new(x->ndim, x->shape, x->dtype, x->storage->device);
    cml_tensor *dg = want_g ? cml__tensor_new(1, &C, x->dtype, x->storage->device) : NULL;
    cml_status s = CML_OK;
    if (!gc || !dx || (gamma && !gam) || (want_g && !dg)) s = cml_last_status();
    else
        s = cml_rmsnorm_bwd(cml__ctx(x), cml_tensor_data(dx), dg ? cml_tensor_data(dg) : NULL, cml_tensor_data(gc),
                            cml_tensor_data(x), gam ? cml_tensor_data(gam) : NULL, cml_tensor_data(rstd), rows, C,
                            x->dtype);
    cml_tensor_release_all((cml_tensor *[]){gc, gam}, 2);
    if (s != CML_OK) {
        cml_tensor_release_all((cml_tensor *[]){dx, dg}, 2);
        return s;
    }
    if (cml__wants_grad(node, 0)) grads[0] = dx;
    else cml_tensor_release(dx);
    grads[1] = dg;
    return CML_OK;
}

cml_tensor *cml_rms_norm(const cml_tensor *x, const cml_tensor *gamma, float eps) {
    const char *who = "cml_rms_norm";
    if (cml__any_null(who, 1, &x)) return NULL;
    if (cml__check_float(who, "x", x) != CML_OK) return NULL;
    char a[160];
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1) {
        cml__error(CML_ERR_SHAPE, "%s: x %s must have at least one dim and a last dim >= 1", who,
                   cml__shape_str(x->ndim, x->shape, a, sizeof a));
        return NULL;
    }
    int64_t C = x->shape[x->ndim - 1], rows = cml_tensor_numel(x) / C;
    if (gamma) {
        if (gamma->ndim != 1 || gamma->shape[0] != C) {
            cml__error(CML_ERR_SHAPE, "%s: gamma has shape %s; expected (%lld), the last dim of x", who,
                       cml__shape_str(gamma->ndim, gamma->shape, a, sizeof a), (long long)C);
            return NULL;
        }
        if (gamma->dtype != x->dtype) {
            cml__error(CML_ERR_DTYPE, "%s: gamma has dtype %s; expected x's dtype %s", who,
                       cml_dtype_name(gamma->dtype), cml_dtype_name(x->dtype));
            return NULL;
        }
        if (cml__check_same_device(who, x, gamma) != CML_OK) return NULL;
    }
    if (!(isfinite(eps) && eps >= 0.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: eps=%g must be finite and >= 0", who, (double)eps);
        return NULL;
    }
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *xc = cml_contiguous(x);
    cml_tensor *gc = gamma ? cml_contiguous(gamma) : NULL;
    cml_set_grad_enabled(prev);
    cml_device dev = x->storage->device;
    cml_tensor *out = cml__tensor_new(x->ndim, x->shape, x->dtype, dev);
    cml_tensor *rstd = cml__tensor_new(1, &rows, CML_F32, dev);
    bool ok = xc && out && rstd && (!gamma || gc);
    if (ok && rows > 0)
        ok = cml_rmsnorm_fwd(cml__ctx(x), cml_tensor_data(out), cml_tensor_data(rstd), cml_tensor_data(xc),
                             gc ? cml_tensor_data(gc) : NULL, rows, C, eps, x->dtype) == CML_OK;
    const cml_tensor *in[2] = {x, gamma};
    if (ok && cml__should_record(2, in)) {
        cml_node *node = cml__record(out, "rms_norm", rms_norm_backward, 2, in);
        ok = node && cml__save(node, 0, xc) == CML_OK && cml__save(node, 1, rstd) == CML_OK;
    }
    cml_tensor_release_all((cml_tensor *[]){xc, gc, rstd}, 3);
    if (!ok) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}
