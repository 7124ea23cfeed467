/* conv2d (NCHW or NHWC; stride, padding, dilation, groups) and its backward
 * rule: dx through cml_conv2d_bwd_data, dw and dbias through
 * cml_conv2d_bwd_filter (one call for both). */
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* Re-reports a kernel-layer validation failure under the op's name. */
static cml_status reword(const char *who, cml_status s) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cml_last_error());
    return cml__error(s, "%s: %s", who, msg);
}

/* The kernel descriptor for x and w (shapes checked, defaults applied). */
static cml_status make_desc(const char *who, const cml_tensor *x, const cml_tensor *w, const int64_t *prm, bool cl,
                            cml_conv2d_desc *d, int64_t *P, int64_t *Q) {
    char a[160], b[160];
    if (x->ndim != 4)
        return cml__error(CML_ERR_SHAPE, "%s: x must be 4-d %s, got %s", who, cl ? "(N, H, W, C)" : "(N, C, H, W)",
                          cml__shape_str(x->ndim, x->shape, a, sizeof a));
    if (w->ndim != 4)
        return cml__error(CML_ERR_SHAPE, "%s: w must be 4-d %s, got %s", who,
                          cl ? "(K, R, S, C/groups)" : "(K, C/groups, R, S)",
                          cml__shape_str(w->ndim, w->shape, a, sizeof a));
    memset(d, 0, sizeof *d);
    d->N = x->shape[0];
    d->C = cl ? x->shape[3] : x->shape[1];
    d->H = cl ? x->shape[1] : x->shape[2];
    d->W = cl ? x->shape[2] : x->shape[3];
    d->K = w->shape[0];
    d->R = cl ? w->shape[1] : w->shape[2];
    d->S = cl ? w->shape[2] : w->shape[3];
    d->stride_h = prm[0], d->stride_w = prm[1], d->pad_h = prm[2], d->pad_w = prm[3];
    d->dil_h = prm[4], d->dil_w = prm[5], d->groups = prm[6];
    d->channels_last = cl;
    d->dtype = x->dtype;
    int64_t cg = cl ? w->shape[3] : w->shape[1];
    if (cg * d->groups != d->C)
        return cml__error(CML_ERR_SHAPE,
                          "%s: w %s has %lld input channels per group, but x %s has C=%lld channels in groups=%lld "
                          "(w must be %s with C/groups=%lld)",
                          who, cml__shape_str(w->ndim, w->shape, a, sizeof a), (long long)cg,
                          cml__shape_str(x->ndim, x->shape, b, sizeof b), (long long)d->C, (long long)d->groups,
                          cl ? "(K, R, S, C/groups)" : "(K, C/groups, R, S)", (long long)(d->C / d->groups));
    cml_status s = cml_conv2d_output_size(d, P, Q);
    return s == CML_OK ? CML_OK : reword(who, s);
}

static cml_status conv2d_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0], *w = node->inputs[1];
    bool has_bias = node->n_inputs == 3;
    cml_conv2d_desc d;
    int64_t P, Q;
    CML_TRY(make_desc("conv2d backward", x, w, node->ints, node->ints[7] != 0, &d, &P, &Q));
    cml_ctx *ctx = cml__ctx(x);
    cml_tensor *gc = cml_contiguous(g);
    if (!gc) return cml_last_status();
    cml_status s = CML_OK;
    if (cml__wants_grad(node, 0)) {
        cml_tensor *wc = cml_contiguous(w);
        cml_tensor *dx = wc ? cml__tensor_new(4, x->shape, x->dtype, x->storage->device) : NULL;
        s = dx ? cml_conv2d_bwd_data(ctx, &d, cml_tensor_data(dx), cml_tensor_data(gc), cml_tensor_data(wc))
               : cml_last_status();
        cml_tensor_release(wc);
        if (s == CML_OK) grads[0] = dx;
        else cml_tensor_release(dx);
    }
    bool want_w = cml__wants_grad(node, 1), want_b = has_bias && cml__wants_grad(node, 2);
    if (s == CML_OK && (want_w || want_b)) {
        cml_tensor *xc = cml_contiguous(x);
        cml_tensor *dw = xc ? cml__tensor_new(4, w->shape, w->dtype, w->storage->device) : NULL;
        cml_tensor *db = dw && want_b ? cml__tensor_new(1, &d.K, w->dtype, w->storage->device) : NULL;
        s = dw && (db || !want_b) ? cml_conv2d_bwd_filter(ctx, &d, cml_tensor_data(dw), db ? cml_tensor_data(db) : NULL,
                                                          cml_tensor_data(gc), cml_tensor_data(xc))
                                  : cml_last_status();
        cml_tensor_release(xc);
        if (s == CML_OK && want_w) grads[1] = cml_tensor_retain(dw);
        if (s == CML_OK && want_b) grads[2] = cml_tensor_retain(db);
        cml_tensor_release_all((cml_tensor *[]){dw, db}, 2);
    }
    cml_tensor_release(gc);
    return s;
}

cml_tensor *cml_conv2d(const cml_tensor *x, const cml_tensor *w, const cml_tensor *bias, cml_conv2d_params p) {
    const char *who = "cml_conv2d";
    const cml_tensor *in[3] = {x, w, bias};
    if (cml__any_null(who, 2, in)) return NULL;
    if (cml__check_float(who, "x", x) != CML_OK || cml__check_same_device(who, x, w) != CML_OK ||
        (bias && cml__check_same_device(who, x, bias) != CML_OK))
        return NULL;
    if (w->dtype != x->dtype || (bias && bias->dtype != x->dtype)) {
        cml__error(CML_ERR_DTYPE, "%s: x (%s), w (%s) and bias (%s) must have the same dtype", who,
                   cml_dtype_name(x->dtype), cml_dtype_name(w->dtype), bias ? cml_dtype_name(bias->dtype) : "none");
        return NULL;
    }
    const int64_t given[7] = {p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w, p.groups};
    static const char *const names[7] = {"stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups"};
    int64_t prm[7];
    for (int i = 0; i < 7; i++) {
        if (given[i] < 0) {
            cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= 0 (0 means the default)", who, names[i],
                       (long long)given[i]);
            return NULL;
        }
        bool is_pad = i == 2 || i == 3;
        prm[i] = given[i] == 0 && !is_pad ? 1 : given[i];
    }
    cml_conv2d_desc d;
    int64_t P, Q;
    if (make_desc(who, x, w, prm, p.channels_last, &d, &P, &Q) != CML_OK) return NULL;
    char a[160];
    if (bias && (bias->ndim != 1 || bias->shape[0] != d.K)) {
        cml__error(CML_ERR_SHAPE, "%s: bias must be (K) with K=%lld output channels, got %s", who, (long long)d.K,
                   cml__shape_str(bias->ndim, bias->shape, a, sizeof a));
        return NULL;
    }
    int64_t shape[4] = {d.N, p.channels_last ? P : d.K, p.channels_last ? Q : P, p.channels_last ? d.K : Q};
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *xc = cml_contiguous(x), *wc = cml_contiguous(w), *bc = bias ? cml_contiguous(bias) : NULL;
    cml_set_grad_enabled(prev);
    cml_tensor *out = xc && wc && (bc || !bias) ? cml__tensor_new(4, shape, x->dtype, x->storage->device) : NULL;
    if (out && cml_conv2d_fwd(cml__ctx(x), &d, cml_tensor_data(out), cml_tensor_data(xc), cml_tensor_data(wc),
                              bc ? cml_tensor_data(bc) : NULL) != CML_OK) {
        cml_tensor_release(out);
        out = NULL;
    }
    cml_tensor_release_all((cml_tensor *[]){xc, wc, bc}, 3);
    int n_in = bias ? 3 : 2;
    if (out && cml__should_record(n_in, in)) {
        cml_node *node = cml__record(out, "conv2d", conv2d_backward, n_in, in);
        if (!node) {
            cml_tensor_release(out);
            return NULL;
        }
        for (int i = 0; i < 7; i++) node->ints[i] = prm[i];
        node->ints[7] = p.channels_last;
    }
    return out;
}
