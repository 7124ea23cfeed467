/* Scaled dot-product attention over (B, S, H, D) tensors, with its backward
 * (cml_attention_bwd). Memory is linear in S: the forward saves O and the
 * per-row log-sum-exp (B, H_q, S_q), never the S_q x S_kv probabilities. */
#include <math.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* t itself (retained) when its last dim is contiguous and its strides are >= 0,
 * else a contiguous copy: what the kernel can read directly. */
static cml_tensor *kernel_readable(const cml_tensor *t) {
    bool ok = t->shape[3] == 1 || t->stride[3] == 1;
    for (int d = 0; d < 3; d++) ok = ok && t->stride[d] >= 0;
    if (ok) return cml_tensor_retain((cml_tensor *)t);
    return cml_contiguous(t);
}

static cml_attention_desc make_desc(const cml_tensor *q, const cml_tensor *k, const cml_tensor *v,
                                    const cml_tensor *o, bool causal, float scale) {
    cml_attention_desc d = cml_attention_desc_bshd(q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2],
                                                   q->shape[3], causal, q->dtype);
    d.scale = scale;
    for (int i = 0; i < 3; i++) {
        d.q_stride[i] = q->stride[i];
        d.k_stride[i] = k->stride[i];
        d.v_stride[i] = v->stride[i];
        d.o_stride[i] = o->stride[i];
    }
    return d;
}

/* inputs: q, k, v; saved: O (contiguous), lse; ints: causal; reals: scale.
 * dQ/dK/dV are written laid out like Q/K/V, so those are made contiguous here
 * (the copies are O(S), the attention itself O(S^2)). */
static cml_status attention_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *o = node->saved[0], *lse = node->saved[1];
    cml_tensor *q = cml_contiguous(node->inputs[0]), *k = cml_contiguous(node->inputs[1]);
    cml_tensor *v = cml_contiguous(node->inputs[2]), *gc = cml_contiguous(g);
    cml_device dev = o->storage->device;
    cml_tensor *dq = q ? cml__tensor_new(4, q->shape, q->dtype, dev) : NULL;
    cml_tensor *dk = k ? cml__tensor_new(4, k->shape, k->dtype, dev) : NULL;
    cml_tensor *dv = v ? cml__tensor_new(4, v->shape, v->dtype, dev) : NULL;
    cml_status s;
    if (!q || !k || !v || !gc || !dq || !dk || !dv) {
        s = cml_last_status();
    } else {
        cml_attention_desc d = make_desc(q, k, v, o, node->ints[0] != 0, (float)node->reals[0]);
        s = cml_attention_bwd(cml__ctx(o), &d, cml_tensor_data(dq), cml_tensor_data(dk), cml_tensor_data(dv),
                              cml_tensor_data(gc), cml_tensor_data(q), cml_tensor_data(k), cml_tensor_data(v),
                              cml_tensor_data(o), cml_tensor_data(lse));
    }
    cml_tensor_release_all((cml_tensor *[]){q, k, v, gc}, 4);
    cml_tensor *out[3] = {dq, dk, dv};
    for (int i = 0; i < 3; i++) {
        if (s == CML_OK && cml__wants_grad(node, i)) grads[i] = out[i];
        else cml_tensor_release(out[i]);
    }
    return s;
}

cml_tensor *cml_attention(const cml_tensor *q, const cml_tensor *k, const cml_tensor *v, bool causal, float scale) {
    const char *who = "cml_attention";
    const cml_tensor *in[3] = {q, k, v};
    if (cml__any_null(who, 3, in)) return NULL;
    if (cml__check_float(who, "q", q) != CML_OK || cml__check_same_device(who, q, k) != CML_OK ||
        cml__check_same_device(who, q, v) != CML_OK)
        return NULL;
    if (k->dtype != q->dtype || v->dtype != q->dtype) {
        cml__error(CML_ERR_DTYPE, "%s: q, k and v must share a dtype; got %s, %s and %s", who, cml_dtype_name(q->dtype),
                   cml_dtype_name(k->dtype), cml_dtype_name(v->dtype));
        return NULL;
    }
    char a[160], b[160], c[160];
    bool fits = q->ndim == 4 && k->ndim == 4 && v->ndim == 4;
    for (int d = 0; fits && d < 4; d++) fits = k->shape[d] == v->shape[d] && q->shape[d] >= 1 && k->shape[d] >= 1;
    fits = fits && k->shape[0] == q->shape[0] && k->shape[3] == q->shape[3] && q->shape[2] % k->shape[2] == 0;
    if (!fits) {
        cml__error(CML_ERR_SHAPE,
                   "%s: expected q (B, S_q, H_q, D), k and v (B, S_kv, H_kv, D) with sizes >= 1 and H_q a multiple "
                   "of H_kv; got q %s, k %s, v %s",
                   who, cml__shape_str(q->ndim, q->shape, a, sizeof a), cml__shape_str(k->ndim, k->shape, b, sizeof b),
                   cml__shape_str(v->ndim, v->shape, c, sizeof c));
        return NULL;
    }
    if (!isfinite(scale)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: scale=%g must be finite", who, (double)scale);
        return NULL;
    }
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *qr = kernel_readable(q), *kr = kernel_readable(k), *vr = kernel_readable(v);
    cml_set_grad_enabled(prev);
    cml_device dev = q->storage->device;
    int64_t lse_shape[3] = {q->shape[0], q->shape[2], q->shape[1]};
    cml_tensor *out = cml__tensor_new(4, q->shape, q->dtype, dev);
    cml_tensor *lse = cml__tensor_new(3, lse_shape, CML_F32, dev);
    bool ok = qr && kr && vr && out && lse;
    if (ok) {
        cml_attention_desc d = make_desc(qr, kr, vr, out, causal, scale);
        ok = cml_attention_fwd(cml__ctx(q), &d, cml_tensor_data(out), cml_tensor_data(lse), cml_tensor_data(qr),
                               cml_tensor_data(kr), cml_tensor_data(vr)) == CML_OK;
    }
    cml_tensor_release_all((cml_tensor *[]){qr, kr, vr}, 3);
    if (ok && cml__should_record(3, in)) {
        cml_node *node = cml__record(out, "attention", attention_backward, 3, in);
        ok = node && cml__save(node, 0, out) == CML_OK && cml__save(node, 1, lse) == CML_OK;
        if (node) {
            node->ints[0] = causal;
            node->reals[0] = scale;
        }
    }
    cml_tensor_release(lse);
    if (!ok) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}
