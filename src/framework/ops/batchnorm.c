/* batch_norm2d over (N, C, H, W) (or NHWC).
 *
 * Training: batch statistics through cml_batchnorm_fwd (which also updates the
 * running statistics in place), backward through cml_batchnorm_bwd for x,
 * gamma and beta. Eval: the running statistics are constants, so the op is
 * the affine map y = x * scale + shift with scale = gamma / sqrt(var + eps)
 * and shift = beta - mean * scale, built from differentiable ops: gradients
 * reach x, gamma and beta exactly as they do in PyTorch's eval mode. */
#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* Input slots of the training node: x, then gamma and beta when given. */
typedef struct bn_slots {
    int gamma, beta; /* -1 when absent */
} bn_slots;

static cml_status bn_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0];
    bool cl = node->ints[0] != 0;
    int gi = (int)node->ints[1], bi = (int)node->ints[2];
    int64_t N = x->shape[0], C = cl ? x->shape[3] : x->shape[1], HW = x->shape[1] * x->shape[2] * x->shape[3] / C;
    const cml_tensor *gamma = gi >= 0 ? node->inputs[gi] : NULL;
    bool want_x = cml__wants_grad(node, 0), want_g = gi >= 0 && cml__wants_grad(node, gi);
    bool want_b = bi >= 0 && cml__wants_grad(node, bi);
    cml_device dev = x->storage->device;
    cml_tensor *gc = cml_contiguous(g), *xc = cml_contiguous(x), *gmc = gamma ? cml_contiguous(gamma) : NULL;
    cml_tensor *dx = cml__tensor_new(4, x->shape, x->dtype, dev);
    cml_tensor *dg = want_g ? cml__tensor_new(1, &C, CML_F32, dev) : NULL;
    cml_tensor *db = want_b ? cml__tensor_new(1, &C, CML_F32, dev) : NULL;
    cml_status s = CML_OK;
    if (!gc || !xc || (gamma && !gmc) || !dx || (want_g && !dg) || (want_b && !db)) {
        s = cml_last_status();
    } else {
        s = cml_batchnorm_bwd(cml__ctx(x), cml_tensor_data(dx), dg ? cml_tensor_data(dg) : NULL,
                              db ? cml_tensor_data(db) : NULL, cml_tensor_data(gc), cml_tensor_data(xc),
                              gmc ? cml_tensor_data(gmc) : NULL, cml_tensor_data(node->saved[0]),
                              cml_tensor_data(node->saved[1]), N, C, HW, cl, x->dtype);
    }
    if (s == CML_OK) {
        if (want_x) grads[0] = cml_tensor_retain(dx);
        if (want_g) grads[gi] = cml_tensor_retain(dg);
        if (want_b) grads[bi] = cml_tensor_retain(db);
    }
    cml_tensor_release_all((cml_tensor *[]){gc, xc, gmc, dx, dg, db}, 6);
    return s;
}

static cml_tensor *bn_train(const cml_tensor *x, const cml_tensor *gamma, const cml_tensor *beta, cml_tensor *rm,
                            cml_tensor *rv, float momentum, float eps, bool cl, int64_t N, int64_t C, int64_t HW) {
    cml_device dev = x->storage->device;
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *xc = cml_contiguous(x), *gc = gamma ? cml_contiguous(gamma) : NULL;
    cml_tensor *bc = beta ? cml_contiguous(beta) : NULL;
    cml_set_grad_enabled(prev);
    cml_tensor *out = cml__tensor_new(4, x->shape, x->dtype, dev);
    cml_tensor *mean = cml__tensor_new(1, &C, CML_F32, dev), *rstd = cml__tensor_new(1, &C, CML_F32, dev);
    cml_status s = CML_OK;
    if (!xc || (gamma && !gc) || (beta && !bc) || !out || !mean || !rstd)
        s = cml_last_status();
    else
        s = cml_batchnorm_fwd(cml__ctx(x), cml_tensor_data(out), cml_tensor_data(mean), cml_tensor_data(rstd),
                              rm ? cml_tensor_data(rm) : NULL, rv ? cml_tensor_data(rv) : NULL, cml_tensor_data(xc),
                              gc ? cml_tensor_data(gc) : NULL, bc ? cml_tensor_data(bc) : NULL, N, C, HW, cl, true,
                              momentum, eps, x->dtype);
    const cml_tensor *in[3] = {x, NULL, NULL};
    int n = 1;
    bn_slots slots = {-1, -1};
    if (gamma) slots.gamma = n, in[n++] = gamma;
    if (beta) slots.beta = n, in[n++] = beta;
    if (s == CML_OK && cml__should_record(n, in)) {
        cml_node *node = cml__record(out, "batch_norm2d", bn_backward, n, in);
        if (!node) s = cml_last_status();
        if (s == CML_OK) s = cml__save(node, 0, mean);
        if (s == CML_OK) s = cml__save(node, 1, rstd);
        if (node) {
            node->ints[0] = cl;
            node->ints[1] = slots.gamma;
            node->ints[2] = slots.beta;
        }
    }
    cml_tensor_release_all((cml_tensor *[]){xc, gc, bc, mean, rstd}, 5);
    if (s != CML_OK) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}

/* y = x * scale + shift, per channel, from ops (so autograd sees it). */
static cml_tensor *bn_eval(const cml_tensor *x, const cml_tensor *gamma, const cml_tensor *beta,
                           const cml_tensor *rm, const cml_tensor *rv, float eps, bool cl, int64_t C) {
    cml_tensor *rm_d = cml_detach(rm), *rv_d = cml_detach(rv);
    cml_tensor *ve = cml_add_scalar(rv_d, (double)eps);
    cml_tensor *inv = cml_pow_scalar(ve, -0.5);
    cml_tensor *scale = gamma ? cml_mul(gamma, inv) : cml_tensor_retain(inv);
    cml_tensor *ms = cml_mul(rm_d, scale);
    cml_tensor *shift = beta ? cml_sub(beta, ms) : cml_neg(ms);
    cml_tensor_release_all((cml_tensor *[]){rm_d, rv_d, ve, inv, ms}, 5);
    /* (C) broadcasts against the last dim (NHWC); NCHW needs (C, 1, 1) */
    int64_t shape3[3] = {C, 1, 1};
    cml_tensor *sc = scale && !cl ? cml_reshape(scale, 3, shape3) : (scale ? cml_tensor_retain(scale) : NULL);
    cml_tensor *sh = shift && !cl ? cml_reshape(shift, 3, shape3) : (shift ? cml_tensor_retain(shift) : NULL);
    cml_tensor_release_all((cml_tensor *[]){scale, shift}, 2);
    if (sc && x->dtype != CML_F32) {
        cml_tensor *t = cml_to_dtype(sc, x->dtype);
        cml_tensor_release(sc);
        sc = t;
    }
    if (sh && x->dtype != CML_F32) {
        cml_tensor *t = cml_to_dtype(sh, x->dtype);
        cml_tensor_release(sh);
        sh = t;
    }
    cml_tensor *xs = sc ? cml_mul(x, sc) : NULL;
    cml_tensor *y = xs && sh ? cml_add(xs, sh) : NULL;
    cml_tensor_release_all((cml_tensor *[]){sc, sh, xs}, 3);
    return y;
}

/* A per-channel parameter or statistic: NULL, or f32 (C) on x's device. */
static cml_status check_channel_vec(const char *who, const char *name, const cml_tensor *t, const cml_tensor *x,
                                    int64_t C, bool contiguous) {
    if (!t) return CML_OK;
    char a[160];
    CML_TRY(cml__check_same_device(who, x, t));
    if (t->dtype != CML_F32)
        return cml__error(CML_ERR_DTYPE, "%s: %s must be f32, got %s", who, name, cml_dtype_name(t->dtype));
    if (t->ndim != 1 || t->shape[0] != C)
        return cml__error(CML_ERR_SHAPE, "%s: %s must be (C) with C=%lld channels, got %s", who, name, (long long)C,
                          cml__shape_str(t->ndim, t->shape, a, sizeof a));
    if (contiguous && !cml_tensor_is_contiguous(t))
        return cml__error(CML_ERR_INVALID_ARG, "%s: %s must be contiguous (it is updated in place)", who, name);
    return CML_OK;
}

cml_tensor *cml_batch_norm2d(const cml_tensor *x, const cml_tensor *gamma, const cml_tensor *beta,
                             cml_tensor *running_mean, cml_tensor *running_var, bool training, float momentum,
                             float eps, bool channels_last) {
    const char *who = "cml_batch_norm2d";
    if (cml__any_null(who, 1, &x)) return NULL;
    if (cml__check_float(who, "x", x) != CML_OK) return NULL;
    char a[160];
    if (x->ndim != 4) {
        cml__error(CML_ERR_SHAPE, "%s: x must be 4-d %s, got %s", who, channels_last ? "(N, H, W, C)" : "(N, C, H, W)",
                   cml__shape_str(x->ndim, x->shape, a, sizeof a));
        return NULL;
    }
    int64_t N = x->shape[0], C = channels_last ? x->shape[3] : x->shape[1];
    int64_t HW = channels_last ? x->shape[1] * x->shape[2] : x->shape[2] * x->shape[3];
    if (check_channel_vec(who, "gamma", gamma, x, C, false) != CML_OK ||
        check_channel_vec(who, "beta", beta, x, C, false) != CML_OK ||
        check_channel_vec(who, "running_mean", running_mean, x, C, true) != CML_OK ||
        check_channel_vec(who, "running_var", running_var, x, C, true) != CML_OK)
        return NULL;
    if ((running_mean == NULL) != (running_var == NULL)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: running_mean and running_var must both be given or both be NULL", who);
        return NULL;
    }
    if (!(eps >= 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: eps=%g must be >= 0 and momentum=%g in [0, 1]", who, (double)eps,
                   (double)momentum);
        return NULL;
    }
    if (N * C * HW == 0) {
        cml__error(CML_ERR_SHAPE, "%s: x %s is empty", who, cml__shape_str(x->ndim, x->shape, a, sizeof a));
        return NULL;
    }
    if (training) {
        if (N * HW < 2) {
            cml__error(CML_ERR_INVALID_ARG,
                       "%s: training needs more than one value per channel, got x %s (use eval mode for single values)",
                       who, cml__shape_str(x->ndim, x->shape, a, sizeof a));
            return NULL;
        }
        return bn_train(x, gamma, beta, running_mean, running_var, momentum, eps, channels_last, N, C, HW);
    }
    if (!running_mean) {
        cml__error(CML_ERR_INVALID_ARG, "%s: eval mode (training=false) needs running_mean and running_var", who);
        return NULL;
    }
    return bn_eval(x, gamma, beta, running_mean, running_var, eps, channels_last, C);
}
