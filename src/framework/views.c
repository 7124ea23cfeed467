/* Views (share storage, copy nothing), contiguous, dtype/device copies, with
 * their backward rules. */
#include <string.h>

#include "framework/tensor_impl.h"

/* ---- reshape / view ----------------------------------------------------------- */

/* Resolves one -1 entry and checks the element count. */
static cml_status resolve_shape(const char *who, const cml_tensor *t, int ndim, const int64_t *shape,
                                int64_t *out) {
    if (ndim < 0 || ndim > CML_MAX_DIMS)
        return cml__error(CML_ERR_SHAPE, "%s: ndim=%d must be in [0, %d]", who, ndim, CML_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) return cml__error(CML_ERR_SHAPE, "%s: only one dim may be -1", who);
            infer = i;
        } else if (shape[i] < 0) {
            return cml__error(CML_ERR_SHAPE, "%s: shape[%d]=%lld must be >= 0 or -1", who, i, (long long)shape[i]);
        } else {
            if (shape[i] > 0 && known > INT64_MAX / shape[i])
                return cml__error(CML_ERR_SHAPE, "%s: shape[%d]=%lld makes the element count overflow", who, i,
                                  (long long)shape[i]);
            known *= shape[i];
        }
        out[i] = shape[i];
    }
    int64_t n = cml_tensor_numel(t);
    if (infer >= 0) {
        if (known == 0 || n % known != 0)
            return cml__error(CML_ERR_SHAPE, "%s: cannot infer dim %d: %lld elements do not divide by %lld",
                              who, infer, (long long)n, (long long)known);
        out[infer] = n / known;
        known *= out[infer];
    }
    if (known != n) {
        char a[160], b[160];
        return cml__error(CML_ERR_SHAPE, "%s: shape %s has %lld elements; the tensor %s has %lld", who,
                          cml__shape_str(ndim, out, a, sizeof a), (long long)known,
                          cml__shape_str(t->ndim, t->shape, b, sizeof b), (long long)n);
    }
    return CML_OK;
}

/* Strides for viewing t as `shape` without a copy, if possible (the NumPy
 * algorithm: each run of merged old dims must be contiguous within itself). */
static bool view_strides(const cml_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
    if (cml_tensor_numel(t) == 0 || cml_tensor_is_contiguous(t)) {
        cml__contiguous_strides(ndim, shape, stride);
        return true;
    }
    /* Size-1 old dims carry arbitrary strides: drop them first. */
    int64_t oshape[CML_MAX_DIMS], ostride[CML_MAX_DIMS];
    int on = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) {
            oshape[on] = t->shape[i];
            ostride[on++] = t->stride[i];
        }
    int oi = 0, ni = 0;
    while (ni < ndim) {
        if (shape[ni] == 1) { stride[ni++] = 1; continue; } /* any stride works */
        if (oi >= on) return false;
        int64_t np = shape[ni], op = oshape[oi];
        int n0 = ni, o0 = oi;
        while (np != op) {
            if (np < op) np *= shape[++ni];
            else op *= oshape[++oi];
        }
        for (int k = o0; k < oi; k++) /* the merged old dims must be contiguous among themselves */
            if (ostride[k] != ostride[k + 1] * oshape[k + 1]) return false;
        int64_t st = ostride[oi];
        for (int k = ni; k >= n0; k--) {
            stride[k] = st;
            st *= shape[k];
        }
        ni++;
        oi++;
    }
    return true;
}

static cml_status reshape_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *in = node->inputs[0];
    grads[0] = cml_reshape(g, in->ndim, in->shape);
    return grads[0] ? CML_OK : cml_last_status();
}

static cml_tensor *reshape_impl(const char *who, const cml_tensor *t, int ndim, const int64_t *shape,
                                bool allow_copy) {
    if (cml__any_null(who, 1, &t)) return NULL;
    int64_t out_shape[CML_MAX_DIMS], stride[CML_MAX_DIMS];
    if (ndim > 0 && !shape) {
        cml__error(CML_ERR_INVALID_ARG, "%s: shape must not be NULL", who);
        return NULL;
    }
    if (resolve_shape(who, t, ndim, shape, out_shape) != CML_OK) return NULL;
    cml_tensor *out;
    if (view_strides(t, ndim, out_shape, stride)) {
        out = cml__tensor_alias(t, ndim, out_shape, stride, t->offset);
    } else if (allow_copy) {
        cml_tensor *c = cml_contiguous(t);
        if (!c) return NULL;
        cml__contiguous_strides(ndim, out_shape, stride);
        out = cml__tensor_alias(c, ndim, out_shape, stride, c->offset);
        cml_tensor_release(c);
    } else {
        cml__error(CML_ERR_SHAPE, "%s: the strides of this tensor do not allow a view; use cml_reshape "
                                  "(which copies) or cml_contiguous first", who);
        return NULL;
    }
    if (out && cml__should_record(1, &t) && !cml__record(out, "reshape", reshape_backward, 1, &t)) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}

cml_tensor *cml_reshape(const cml_tensor *t, int ndim, const int64_t *shape) {
    return reshape_impl("cml_reshape", t, ndim, shape, true);
}

cml_tensor *cml_view(const cml_tensor *t, int ndim, const int64_t *shape) {
    return reshape_impl("cml_view", t, ndim, shape, false);
}

cml_tensor *cml_unsqueeze(const cml_tensor *t, int dim) {
    if (cml__any_null("cml_unsqueeze", 1, &t)) return NULL;
    int d = cml__norm_dim(dim, t->ndim + 1);
    if (d < 0 || t->ndim >= CML_MAX_DIMS) {
        cml__error(CML_ERR_SHAPE, "cml_unsqueeze: dim=%d out of range for a %d-d tensor", dim, t->ndim);
        return NULL;
    }
    int64_t shape[CML_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) shape[i] = (i == d) ? 1 : t->shape[j++];
    return cml_reshape(t, t->ndim + 1, shape);
}

cml_tensor *cml_squeeze(const cml_tensor *t, int dim) {
    if (cml__any_null("cml_squeeze", 1, &t)) return NULL;
    int d = cml__norm_dim(dim, t->ndim);
    if (d < 0 || t->shape[d] != 1) {
        cml__error(CML_ERR_SHAPE, "cml_squeeze: dim=%d must name a size-1 dim of a %d-d tensor", dim, t->ndim);
        return NULL;
    }
    int64_t shape[CML_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++)
        if (i != d) shape[j++] = t->shape[i];
    return cml_reshape(t, t->ndim - 1, shape);
}

cml_tensor *cml_flatten(const cml_tensor *t, int start_dim, int end_dim) {
    if (cml__any_null("cml_flatten", 1, &t)) return NULL;
    if (t->ndim == 0) return cml_reshape(t, 1, (int64_t[]){1});
    int s = cml__norm_dim(start_dim, t->ndim), e = cml__norm_dim(end_dim, t->ndim);
    if (s < 0 || e < 0 || s > e) {
        cml__error(CML_ERR_SHAPE, "cml_flatten: start_dim=%d, end_dim=%d invalid for a %d-d tensor", start_dim,
                   end_dim, t->ndim);
        return NULL;
    }
    int64_t shape[CML_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < s; i++) shape[n++] = t->shape[i];
    int64_t merged = 1;
    for (int i = s; i <= e; i++) merged *= t->shape[i];
    shape[n++] = merged;
    for (int i = e + 1; i < t->ndim; i++) shape[n++] = t->shape[i];
    return cml_reshape(t, n, shape);
}

/* ---- permute / transpose ------------------------------------------------------- */

static cml_status permute_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    int inverse[CML_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) inverse[node->ints[i]] = i;
    grads[0] = cml_permute(g, inverse);
    return grads[0] ? CML_OK : cml_last_status();
}

cml_tensor *cml_permute(const cml_tensor *t, const int *dims) {
    if (cml__any_null("cml_permute", 1, &t)) return NULL;
    if (!dims && t->ndim > 0) {
        cml__error(CML_ERR_INVALID_ARG, "cml_permute: dims must not be NULL");
        return NULL;
    }
    int64_t shape[CML_MAX_DIMS], stride[CML_MAX_DIMS];
    int norm[CML_MAX_DIMS];
    bool seen[CML_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = cml__norm_dim(dims[i], t->ndim);
        if (d < 0 || seen[d]) {
            cml__error(CML_ERR_INVALID_ARG, "cml_permute: dims[%d]=%d must be a distinct dim of a %d-d tensor", i,
                       dims[i], t->ndim);
            return NULL;
        }
        seen[d] = true;
        norm[i] = d;
        shape[i] = t->shape[d];
        stride[i] = t->stride[d];
    }
    cml_tensor *out = cml__tensor_alias(t, t->ndim, shape, stride, t->offset);
    if (out && cml__should_record(1, &t)) {
        cml_node *n = cml__record(out, "permute", permute_backward, 1, &t);
        if (!n) {
            cml_tensor_release(out);
            return NULL;
        }
        for (int i = 0; i < t->ndim; i++) n->ints[i] = norm[i];
    }
    return out;
}

cml_tensor *cml_transpose(const cml_tensor *t, int dim0, int dim1) {
    if (cml__any_null("cml_transpose", 1, &t)) return NULL;
    int a = cml__norm_dim(dim0, t->ndim), b = cml__norm_dim(dim1, t->ndim);
    if (a < 0 || b < 0) {
        cml__error(CML_ERR_INVALID_ARG, "cml_transpose: dims (%d, %d) out of range for a %d-d tensor", dim0, dim1,
                   t->ndim);
        return NULL;
    }
    int dims[CML_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) dims[i] = i;
    dims[a] = b;
    dims[b] = a;
    return cml_permute(t, dims);
}

/* ---- slice -------------------------------------------------------------------- */

static cml_status slice_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *in = node->inputs[0];
    cml_tensor *z = cml_tensor_zeros(in->ndim, in->shape, g->dtype, in->storage->device);
    if (!z) return cml_last_status();
    cml_tensor *dst = cml_slice(z, (int)node->ints[0], node->ints[1], node->ints[2], node->ints[3]);
    cml_status s = dst ? cml_tensor_copy_(dst, g) : cml_last_status();
    cml_tensor_release(dst);
    if (s != CML_OK) {
        cml_tensor_release(z);
        return s;
    }
    grads[0] = z;
    return CML_OK;
}

cml_tensor *cml_slice(const cml_tensor *t, int dim, int64_t start, int64_t stop, int64_t step) {
    if (cml__any_null("cml_slice", 1, &t)) return NULL;
    int d = cml__norm_dim(dim, t->ndim);
    if (d < 0) {
        cml__error(CML_ERR_INVALID_ARG, "cml_slice: dim=%d out of range for a %d-d tensor", dim, t->ndim);
        return NULL;
    }
    if (step < 1) {
        cml__error(CML_ERR_INVALID_ARG, "cml_slice: step=%lld must be >= 1", (long long)step);
        return NULL;
    }
    int64_t n = t->shape[d];
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    start = start < 0 ? 0 : (start > n ? n : start);
    stop = stop < start ? start : (stop > n ? n : stop);
    int64_t shape[CML_MAX_DIMS], stride[CML_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(stride, t->stride, sizeof stride);
    shape[d] = stop > start ? (stop - start - 1) / step + 1 : 0; /* no overflow for any step */
    stride[d] = shape[d] > 1 ? t->stride[d] * step : t->stride[d];
    cml_tensor *out = cml__tensor_alias(t, t->ndim, shape, stride, t->offset + start * t->stride[d]);
    if (out && cml__should_record(1, &t)) {
        cml_node *node = cml__record(out, "slice", slice_backward, 1, &t);
        if (!node) {
            cml_tensor_release(out);
            return NULL;
        }
        node->ints[0] = d;
        node->ints[1] = start;
        node->ints[2] = stop;
        node->ints[3] = step;
    }
    return out;
}

/* ---- expand --------------------------------------------------------------------- */

static cml_status expand_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *in = node->inputs[0];
    grads[0] = cml__sum_to_shape(g, in->ndim, in->shape);
    return grads[0] ? CML_OK : cml_last_status();
}

cml_tensor *cml_expand(const cml_tensor *t, int ndim, const int64_t *shape) {
    if (cml__any_null("cml_expand", 1, &t)) return NULL;
    if (ndim < t->ndim || ndim > CML_MAX_DIMS || !shape) {
        cml__error(CML_ERR_SHAPE, "cml_expand: ndim=%d must be in [%d, %d]", ndim, t->ndim, CML_MAX_DIMS);
        return NULL;
    }
    int64_t out_shape[CML_MAX_DIMS], stride[CML_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int64_t want = shape[i];
        if (i < lead) {
            if (want < 0) goto bad;
            out_shape[i] = want;
            stride[i] = 0;
            continue;
        }
        int64_t have = t->shape[i - lead];
        if (want == -1) want = have;
        if (have == want) {
            out_shape[i] = have;
            stride[i] = t->stride[i - lead];
        } else if (have == 1 && want >= 0) {
            out_shape[i] = want;
            stride[i] = 0;
        } else {
            goto bad;
        }
    }
    cml_tensor *out = cml__tensor_alias(t, ndim, out_shape, stride, t->offset);
    if (out && cml__should_record(1, &t) && !cml__record(out, "expand", expand_backward, 1, &t)) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
bad:;
    char a[160], b[160];
    cml__error(CML_ERR_SHAPE, "cml_expand: cannot expand %s to %s (only size-1 dims expand)",
               cml__shape_str(t->ndim, t->shape, a, sizeof a), cml__shape_str(ndim, shape, b, sizeof b));
    return NULL;
}

/* ---- copies: contiguous, dtype, device, clone --------------------------------------- */

static cml_status copy_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    grads[0] = cml_to_dtype(g, node->inputs[0]->dtype);
    return grads[0] ? CML_OK : cml_last_status();
}

/* A contiguous copy of t with dtype dt, recorded as "name". */
static cml_tensor *copy_as(const char *name, const cml_tensor *t, cml_dtype dt) {
    cml_tensor *out = cml__tensor_new(t->ndim, t->shape, dt, t->storage->device);
    if (!out) return NULL;
    if (cml_tensor_copy_(out, t) != CML_OK) {
        cml_tensor_release(out);
        return NULL;
    }
    if (cml__should_record(1, &t) && cml_dtype_is_float(dt) && !cml__record(out, name, copy_backward, 1, &t)) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}

cml_tensor *cml_contiguous(const cml_tensor *t) {
    if (cml__any_null("cml_contiguous", 1, &t)) return NULL;
    if (cml_tensor_is_contiguous(t)) return cml_tensor_retain((cml_tensor *)t);
    return copy_as("contiguous", t, t->dtype);
}

cml_tensor *cml_to_dtype(const cml_tensor *t, cml_dtype dt) {
    if (cml__any_null("cml_to_dtype", 1, &t)) return NULL;
    if (!cml_dtype_valid(dt)) {
        cml__error(CML_ERR_DTYPE, "cml_to_dtype: invalid dtype %d", (int)dt);
        return NULL;
    }
    if (dt == t->dtype) return cml_tensor_retain((cml_tensor *)t);
    return copy_as("to_dtype", t, dt);
}

cml_tensor *cml_clone(const cml_tensor *t) {
    if (cml__any_null("cml_clone", 1, &t)) return NULL;
    return copy_as("clone", t, t->dtype);
}

/* The gradient of a device move is the incoming gradient moved back. */
static cml_status to_device_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    grads[0] = cml_tensor_to(g, node->inputs[0]->storage->device);
    return grads[0] ? CML_OK : cml_last_status();
}

cml_tensor *cml_tensor_to(const cml_tensor *t, cml_device dev) {
    if (cml__any_null("cml_tensor_to", 1, &t)) return NULL;
    if (cml_device_equal(dev, t->storage->device)) return cml_tensor_retain((cml_tensor *)t);
    if (!cml_ctx_default(dev)) return NULL; /* fails with the reason the device is unusable */
    cml_tensor *out = cml__tensor_new(t->ndim, t->shape, t->dtype, dev);
    if (!out) return NULL;
    if (cml_tensor_copy_(out, t) != CML_OK) { /* synchronous host<->device copy (staged when not contiguous) */
        cml_tensor_release(out);
        return NULL;
    }
    if (cml__should_record(1, &t) && cml_dtype_is_float(t->dtype) &&
        !cml__record(out, "to_device", to_device_backward, 1, &t)) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}
