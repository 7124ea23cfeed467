/* max_pool2d / avg_pool2d (NCHW or NHWC) and their backward rules through
 * cml_pool2d_bwd (max pooling keeps the forward's argmax indices). */
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

static cml_status make_desc(const char *who, const cml_tensor *x, const int64_t *prm, cml_pool2d_desc *d, int64_t *P,
                            int64_t *Q) {
    bool cl = prm[6] != 0;
    char a[160];
    if (x->ndim != 4)
        return cml__error(CML_ERR_SHAPE, "%s: x must be 4-d %s, got %s", who, cl ? "(N, H, W, C)" : "(N, C, H, W)",
                          cml__shape_str(x->ndim, x->shape, a, sizeof a));
    memset(d, 0, sizeof *d);
    d->N = x->shape[0];
    d->C = cl ? x->shape[3] : x->shape[1];
    d->H = cl ? x->shape[1] : x->shape[2];
    d->W = cl ? x->shape[2] : x->shape[3];
    d->R = prm[0], d->S = prm[1], d->stride_h = prm[2], d->stride_w = prm[3], d->pad_h = prm[4], d->pad_w = prm[5];
    d->channels_last = cl;
    d->mode = (cml_pool_mode)prm[7];
    d->dtype = x->dtype;
    cml_status s = cml_pool2d_output_size(d, P, Q);
    if (s != CML_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", cml_last_error());
        return cml__error(s, "%s: %s", who, msg);
    }
    return CML_OK;
}

static cml_status pool_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0];
    cml_pool2d_desc d;
    int64_t P, Q;
    CML_TRY(make_desc("pool2d backward", x, node->ints, &d, &P, &Q));
    cml_tensor *gc = cml_contiguous(g);
    cml_tensor *dx = gc ? cml__tensor_new(4, x->shape, x->dtype, x->storage->device) : NULL;
    const cml_tensor *idx = node->saved[0];
    cml_status s = dx ? cml_pool2d_bwd(cml__ctx(x), &d, cml_tensor_data(dx), cml_tensor_data(gc),
                                       idx ? cml_tensor_data(idx) : NULL)
                      : cml_last_status();
    cml_tensor_release(gc);
    if (s != CML_OK) {
        cml_tensor_release(dx);
        return s;
    }
    grads[0] = dx;
    return CML_OK;
}

static cml_tensor *pool_op(const char *who, const cml_tensor *x, int64_t R, int64_t S, int64_t stride_h,
                           int64_t stride_w, int64_t pad_h, int64_t pad_w, bool cl, cml_pool_mode mode) {
    if (cml__any_null(who, 1, &x)) return NULL;
    if (cml__check_float(who, "x", x) != CML_OK) return NULL;
    if (stride_h < 0 || stride_w < 0) {
        cml__error(CML_ERR_INVALID_ARG, "%s: stride_h=%lld and stride_w=%lld must be >= 0 (0 means the window size)",
                   who, (long long)stride_h, (long long)stride_w);
        return NULL;
    }
    const int64_t prm[8] = {R, S, stride_h ? stride_h : R, stride_w ? stride_w : S, pad_h, pad_w, cl, mode};
    cml_pool2d_desc d;
    int64_t P, Q;
    if (make_desc(who, x, prm, &d, &P, &Q) != CML_OK) return NULL;
    bool record = cml__should_record(1, &x);
    int64_t shape[4] = {d.N, cl ? P : d.C, cl ? Q : P, cl ? d.C : Q};
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *xc = cml_contiguous(x);
    cml_set_grad_enabled(prev);
    cml_tensor *out = xc ? cml__tensor_new(4, shape, x->dtype, x->storage->device) : NULL;
    cml_tensor *idx = out && record && mode == CML_POOL_MAX ? cml__tensor_new(4, shape, CML_I64, x->storage->device)
                                                            : NULL;
    cml_status s = out && (idx || !record || mode != CML_POOL_MAX)
                       ? cml_pool2d_fwd(cml__ctx(x), &d, cml_tensor_data(out), idx ? cml_tensor_data(idx) : NULL,
                                        cml_tensor_data(xc))
                       : cml_last_status();
    cml_tensor_release(xc);
    if (s == CML_OK && record) {
        cml_node *node = cml__record(out, mode == CML_POOL_MAX ? "max_pool2d" : "avg_pool2d", pool_backward, 1, &x);
        if (!node) s = cml_last_status();
        else if (idx) s = cml__save(node, 0, idx);
        if (node) memcpy(node->ints, prm, sizeof prm);
    }
    cml_tensor_release(idx);
    if (s != CML_OK) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}

cml_tensor *cml_max_pool2d(const cml_tensor *x, int64_t R, int64_t S, int64_t stride_h, int64_t stride_w,
                           int64_t pad_h, int64_t pad_w, bool channels_last) {
    return pool_op("cml_max_pool2d", x, R, S, stride_h, stride_w, pad_h, pad_w, channels_last, CML_POOL_MAX);
}

cml_tensor *cml_avg_pool2d(const cml_tensor *x, int64_t R, int64_t S, int64_t stride_h, int64_t stride_w,
                           int64_t pad_h, int64_t pad_w, bool channels_last) {
    return pool_op("cml_avg_pool2d", x, R, S, stride_h, stride_w, pad_h, pad_w, channels_last, CML_POOL_AVG);
}
