/* Joining and indexing: concat, index_select, gather, where, masked_fill. */
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* ---- concat ------------------------------------------------------------------------- */

static cml_status concat_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    int d = (int)node->ints[0];
    int64_t start = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        int64_t len = node->inputs[i]->shape[d];
        if (cml__wants_grad(node, i)) {
            grads[i] = cml_slice(g, d, start, start + len, 1);
            if (!grads[i]) return cml_last_status();
        }
        start += len;
    }
    return CML_OK;
}

cml_tensor *cml_concat(cml_tensor *const *ts, int n, int dim) {
    const char *who = "cml_concat";
    if (!ts || n < 1) {
        cml__error(CML_ERR_INVALID_ARG, "%s: needs n >= 1 tensors (got n=%d)", who, n);
        return NULL;
    }
    if (cml__any_null(who, n, (const cml_tensor *const *)ts)) return NULL;
    const cml_tensor *t0 = ts[0];
    int d = cml__norm_dim(dim, t0->ndim);
    if (d < 0) {
        cml__error(CML_ERR_INVALID_ARG, "%s: dim=%d out of range for %d-d tensors", who, dim, t0->ndim);
        return NULL;
    }
    int64_t shape[CML_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof shape);
    shape[d] = 0;
    for (int i = 0; i < n; i++) {
        const cml_tensor *t = ts[i];
        if (t->dtype != t0->dtype) { /* a dtype mismatch is CML_ERR_DTYPE, as in the binary ops */
            cml__error(CML_ERR_DTYPE, "%s: tensor %d has dtype %s; tensor 0 has %s", who, i, cml_dtype_name(t->dtype),
                       cml_dtype_name(t0->dtype));
            return NULL;
        }
        bool fits = t->ndim == t0->ndim;
        for (int k = 0; fits && k < t->ndim; k++) fits = k == d || t->shape[k] == t0->shape[k];
        if (!fits) {
            char a[160], b[160];
            cml__error(CML_ERR_SHAPE, "%s: tensor %d (%s %s) does not match tensor 0 (%s %s) outside dim %d", who, i,
                       cml_dtype_name(t->dtype), cml__shape_str(t->ndim, t->shape, a, sizeof a),
                       cml_dtype_name(t0->dtype), cml__shape_str(t0->ndim, t0->shape, b, sizeof b), d);
            return NULL;
        }
        if (cml__check_same_device(who, t0, t) != CML_OK) return NULL;
        shape[d] += t->shape[d];
    }
    cml_tensor *out = cml__tensor_new(t0->ndim, shape, t0->dtype, t0->storage->device);
    int64_t start = 0;
    for (int i = 0; out && i < n; i++) {
        cml_tensor *dst = cml_slice(out, d, start, start + ts[i]->shape[d], 1);
        if (!dst || cml_tensor_copy_(dst, ts[i]) != CML_OK) {
            cml_tensor_release(out);
            out = NULL;
        }
        cml_tensor_release(dst);
        start += ts[i]->shape[d];
    }
    if (out && cml__should_record(n, (const cml_tensor *const *)ts)) {
        cml_node *node = cml__record(out, "concat", concat_backward, n, (const cml_tensor *const *)ts);
        if (!node) {
            cml_tensor_release(out);
            return NULL;
        }
        node->ints[0] = d;
    }
    return out;
}

/* ---- index_select and gather ---------------------------------------------------- */

static cml_tensor *as_index(const char *who, const cml_tensor *index) {
    if (index->dtype != CML_I64 && index->dtype != CML_I32) {
        cml__error(CML_ERR_DTYPE, "%s: index has dtype %s; expected i64 or i32", who, cml_dtype_name(index->dtype));
        return NULL;
    }
    cml_tensor *i64 = cml_to_dtype(index, CML_I64);
    cml_tensor *c = cml_contiguous(i64);
    cml_tensor_release(i64);
    return c;
}

static void split3(const cml_tensor *x, int d, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < d; i++) *outer *= x->shape[i];
    for (int i = d + 1; i < x->ndim; i++) *inner *= x->shape[i];
}

/* Shared backward of index_select (ints[1] = 0) and gather (ints[1] = 1):
 * scatter-add g into zeros of x's shape. */
static cml_status select_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0], *idx = node->saved[0];
    int d = (int)node->ints[0];
    int64_t outer, inner;
    split3(x, d, &outer, &inner);
    int64_t n_idx = node->ints[1] ? idx->shape[d] : idx->shape[0];
    cml_tensor *dx = cml_tensor_zeros(x->ndim, x->shape, x->dtype, x->storage->device);
    cml_tensor *gc = cml_contiguous(g);
    cml_status s = !dx || !gc ? cml_last_status()
                   : node->ints[1]
                       ? cml_gather_bwd(cml__ctx(x), cml_tensor_data(dx), cml_tensor_data(gc), cml_tensor_data(idx),
                                        outer, x->shape[d], n_idx, inner, x->dtype)
                       : cml_index_select_bwd(cml__ctx(x), cml_tensor_data(dx), cml_tensor_data(gc),
                                              cml_tensor_data(idx), outer, x->shape[d], n_idx, inner, x->dtype);
    cml_tensor_release(gc);
    if (s != CML_OK) {
        cml_tensor_release(dx);
        return s;
    }
    grads[0] = dx;
    return CML_OK;
}

static cml_tensor *select_op(const char *who, const cml_tensor *x, int dim, const cml_tensor *index, bool gather) {
    const cml_tensor *in[2] = {x, index};
    if (cml__any_null(who, 2, in) || cml__check_same_device(who, x, index) != CML_OK) return NULL;
    int d = cml__norm_dim(dim, x->ndim);
    if (d < 0) {
        cml__error(CML_ERR_INVALID_ARG, "%s: dim=%d out of range for a %d-d tensor", who, dim, x->ndim);
        return NULL;
    }
    int64_t shape[CML_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    char a[160], b[160];
    if (gather) {
        bool fits = index->ndim == x->ndim;
        for (int k = 0; fits && k < x->ndim; k++) fits = k == d || index->shape[k] == x->shape[k];
        if (!fits) {
            cml__error(CML_ERR_SHAPE, "%s: index %s must have x's shape %s except along dim %d", who,
                       cml__shape_str(index->ndim, index->shape, a, sizeof a),
                       cml__shape_str(x->ndim, x->shape, b, sizeof b), d);
            return NULL;
        }
        shape[d] = index->shape[d];
    } else {
        if (index->ndim != 1) {
            cml__error(CML_ERR_SHAPE, "%s: index must be 1-d; got %s", who,
                       cml__shape_str(index->ndim, index->shape, a, sizeof a));
            return NULL;
        }
        shape[d] = index->shape[0];
    }
    cml_tensor *idx = as_index(who, index);
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *xc = cml_contiguous(x);
    cml_set_grad_enabled(prev);
    cml_tensor *out = idx && xc ? cml__tensor_new(x->ndim, shape, x->dtype, x->storage->device) : NULL;
    int64_t outer, inner;
    split3(x, d, &outer, &inner);
    if (out && cml_tensor_numel(out) > 0) {
        cml_status s = gather ? cml_gather_fwd(cml__ctx(x), cml_tensor_data(out), cml_tensor_data(xc),
                                               cml_tensor_data(idx), outer, x->shape[d], shape[d], inner, x->dtype)
                              : cml_index_select_fwd(cml__ctx(x), cml_tensor_data(out), cml_tensor_data(xc),
                                                     cml_tensor_data(idx), outer, x->shape[d], shape[d], inner,
                                                     x->dtype);
        if (s != CML_OK) {
            cml_tensor_release(out);
            out = NULL;
        }
    }
    cml_tensor_release(xc);
    if (out && cml__should_record(1, &x)) {
        cml_node *node = cml__record(out, gather ? "gather" : "index_select", select_backward, 1, &x);
        if (!node || cml__save(node, 0, idx) != CML_OK) {
            cml_tensor_release(out);
            out = NULL;
        } else {
            node->ints[0] = d;
            node->ints[1] = gather;
        }
    }
    cml_tensor_release(idx);
    return out;
}

cml_tensor *cml_index_select(const cml_tensor *x, int dim, const cml_tensor *index) {
    return select_op("cml_index_select", x, dim, index, false);
}

cml_tensor *cml_gather(const cml_tensor *x, int dim, const cml_tensor *index) {
    return select_op("cml_gather", x, dim, index, true);
}

/* ---- where / masked_fill ------------------------------------------------------------ */

/* cond as u8 0/1 ("nonzero = true" for every dtype). */
static cml_tensor *as_mask(const cml_tensor *cond) {
    if (cond->dtype == CML_U8) return cml_tensor_retain((cml_tensor *)cond);
    cml_tensor *f = cml_to_dtype(cond, CML_F32);
    cml_tensor *zero = cml_tensor_scalar(0.0, CML_F32, cond->storage->device);
    cml_tensor *fa = cml_abs(f);
    cml_tensor *m = cml_gt(fa, zero);
    cml_tensor_release_all((cml_tensor *[]){f, zero, fa}, 3);
    return m;
}

static cml_status where_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *mask = node->saved[0];
    cml_tensor *zero = cml_tensor_scalar(0.0, g->dtype, g->storage->device);
    for (int i = 0; i < 2; i++) {
        const cml_tensor *in = node->inputs[i];
        if (!cml__wants_grad(node, i)) continue;
        cml_tensor *full = i == 0 ? cml_where(mask, g, zero) : cml_where(mask, zero, g);
        grads[i] = cml__sum_to_shape(full, in->ndim, in->shape);
        cml_tensor_release(full);
        if (!grads[i]) {
            cml_tensor_release(zero);
            return cml_last_status();
        }
    }
    cml_tensor_release(zero);
    return CML_OK;
}

cml_tensor *cml_where(const cml_tensor *cond, const cml_tensor *a, const cml_tensor *b) {
    const char *who = "cml_where";
    const cml_tensor *in[3] = {cond, a, b};
    if (cml__any_null(who, 3, in)) return NULL;
    if (cml__check_same_device(who, a, b) != CML_OK || cml__check_same_device(who, a, cond) != CML_OK) return NULL;
    if (a->dtype != b->dtype) {
        cml__error(CML_ERR_DTYPE, "%s: a and b dtypes differ (%s and %s)", who, cml_dtype_name(a->dtype),
                   cml_dtype_name(b->dtype));
        return NULL;
    }
    int n1, nd;
    int64_t s1[CML_MAX_DIMS], shape[CML_MAX_DIMS];
    if (cml__broadcast_shapes(who, a->ndim, a->shape, b->ndim, b->shape, &n1, s1) != CML_OK ||
        cml__broadcast_shapes(who, cond->ndim, cond->shape, n1, s1, &nd, shape) != CML_OK)
        return NULL;
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *mask = as_mask(cond);
    cml_set_grad_enabled(prev);
    cml_tensor *out = mask ? cml__tensor_new(nd, shape, a->dtype, a->storage->device) : NULL;
    if (out) {
        cml_layout ol = cml_tensor_layout(out), ml = cml__broadcast_layout(mask, nd, shape),
                   al = cml__broadcast_layout(a, nd, shape), bl = cml__broadcast_layout(b, nd, shape);
        if (cml_where_fwd(cml__ctx(a), cml_tensor_data(out), &ol, a->dtype, cml_tensor_data(mask), &ml,
                          cml_tensor_data(a), &al, cml_tensor_data(b), &bl) != CML_OK) {
            cml_tensor_release(out);
            out = NULL;
        }
    }
    const cml_tensor *ab[2] = {a, b};
    if (out && cml__should_record(2, ab)) {
        cml_node *node = cml__record(out, "where", where_backward, 2, ab);
        if (!node || cml__save(node, 0, mask) != CML_OK) {
            cml_tensor_release(out);
            out = NULL;
        }
    }
    cml_tensor_release(mask);
    return out;
}

cml_tensor *cml_masked_fill(const cml_tensor *x, const cml_tensor *mask, double value) {
    const cml_tensor *in[2] = {x, mask};
    if (cml__any_null("cml_masked_fill", 2, in)) return NULL;
    cml_tensor *v = cml_tensor_scalar(value, x->dtype, x->storage->device);
    cml_tensor *out = v ? cml_where(mask, v, x) : NULL;
    if (out && (out->ndim != x->ndim || memcmp(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))) {
        cml__error(CML_ERR_SHAPE, "cml_masked_fill: mask must broadcast to x's shape");
        cml_tensor_release(out);
        out = NULL;
    }
    cml_tensor_release(v);
    return out;
}
