/* Reductions over any set of axes (sum, mean, max, min, var, argmax) and their
 * backward rules. Every reduction is brought to the kernel's (outer, n, inner)
 * form: directly when the reduced axes are one block of a contiguous tensor,
 * otherwise through a contiguous copy with the reduced axes moved last. */
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

typedef struct reduce_plan {
    bool reduced[CML_MAX_DIMS];
    int out_ndim;
    int64_t out_shape[CML_MAX_DIMS];  /* with keepdim applied */
    int64_t keep_shape[CML_MAX_DIMS]; /* x's shape with reduced dims set to 1 */
    int64_t outer, n, inner;
    bool permuted;                    /* xc is x permuted as perm[] and made contiguous */
    int perm[CML_MAX_DIMS];
} reduce_plan;

/* allow_empty: an empty reduced block is fine (sum gives 0, as in NumPy); the
 * other reductions have no value for it. */
static cml_status make_plan(const char *who, const cml_tensor *x, const int *dims, int n_dims, bool keepdim,
                            bool allow_empty, reduce_plan *p) {
    memset(p, 0, sizeof *p);
    if (n_dims < 0 || (n_dims > 0 && !dims))
        return cml__error(CML_ERR_INVALID_ARG, "%s: n_dims=%d needs a dims array", who, n_dims);
    for (int i = 0; i < n_dims; i++) {
        int d = cml__norm_dim(dims[i], x->ndim);
        if (d < 0) return cml__error(CML_ERR_INVALID_ARG, "%s: dims[%d]=%d out of range for a %d-d tensor", who, i,
                                     dims[i], x->ndim);
        if (p->reduced[d]) return cml__error(CML_ERR_INVALID_ARG, "%s: dim %d is listed twice", who, dims[i]);
        p->reduced[d] = true;
    }
    if (n_dims == 0)
        for (int d = 0; d < x->ndim; d++) p->reduced[d] = true;
    int lo = -1, hi = -1, np = 0;
    p->outer = p->n = p->inner = 1;
    for (int d = 0; d < x->ndim; d++) {
        p->keep_shape[d] = p->reduced[d] ? 1 : x->shape[d];
        if (p->reduced[d]) {
            p->n *= x->shape[d];
            if (lo < 0) lo = d;
            hi = d;
        } else {
            p->perm[np++] = d;
        }
        if (!p->reduced[d] || keepdim) p->out_shape[p->out_ndim++] = p->reduced[d] ? 1 : x->shape[d];
    }
    for (int d = 0; d < x->ndim; d++)
        if (p->reduced[d]) p->perm[np++] = d;
    if (p->n == 0 && !allow_empty) return cml__error(CML_ERR_SHAPE, "%s: cannot reduce over an empty dim", who);
    bool block = lo >= 0;
    for (int d = lo; block && d <= hi; d++) block = p->reduced[d];
    if (block && cml_tensor_is_contiguous(x)) {
        for (int d = 0; d < lo; d++) p->outer *= x->shape[d];
        for (int d = hi + 1; d < x->ndim; d++) p->inner *= x->shape[d];
    } else {
        p->permuted = true;
        for (int d = 0; d < x->ndim; d++)
            if (!p->reduced[d]) p->outer *= x->shape[d];
    }
    return CML_OK;
}

/* x in the plan's (outer, n, inner) contiguous form (a new reference). */
static cml_tensor *plan_input(const cml_tensor *x, const reduce_plan *p) {
    if (!p->permuted) return cml_tensor_retain((cml_tensor *)x);
    cml_tensor *v = cml_permute(x, p->perm);
    cml_tensor *c = cml_contiguous(v);
    cml_tensor_release(v);
    return c;
}

static cml_tensor *run_reduce(cml_reduce_op op, const cml_tensor *x, const reduce_plan *p,
                              int correction) {
    cml_dtype out_dt = (op == CML_REDUCE_ARGMAX || op == CML_REDUCE_ARGMIN) ? CML_I64 : x->dtype;
    bool prev = cml_set_grad_enabled(false); /* the copy is an implementation detail */
    cml_tensor *xc = plan_input(x, p);
    cml_set_grad_enabled(prev);
    cml_tensor *out = xc ? cml__tensor_new(p->out_ndim, p->out_shape, out_dt, x->storage->device) : NULL;
    if (out && p->n == 0) { /* an empty sum (the kernel needs n >= 1) */
        if (cml_tensor_fill_(out, 0.0) != CML_OK) {
            cml_tensor_release(out);
            out = NULL;
        }
    } else if (out && cml_reduce(cml__ctx(x), op, cml_tensor_data(out), out_dt, cml_tensor_data(xc), x->dtype,
                                 p->outer, p->n, p->inner, correction) != CML_OK) {
        cml_tensor_release(out);
        out = NULL;
    }
    cml_tensor_release(xc);
    return out;
}

/* Rebuilds the plan of a recorded reduction from its bitmask of reduced dims. */
static cml_status plan_of_node(const cml_node *node, const cml_tensor *x, reduce_plan *p) {
    int dims[CML_MAX_DIMS], n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (node->ints[0] & (1 << d)) dims[n++] = d;
    return make_plan("backward", x, dims, n, true, true, p);
}

/* sum/mean: the gradient is g broadcast back over the reduced dims, times reals[0]. */
static cml_status sum_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0];
    reduce_plan p;
    CML_TRY(plan_of_node(node, x, &p));
    cml_tensor *k = cml_reshape(g, x->ndim, p.keep_shape);
    cml_tensor *e = cml_expand(k, x->ndim, x->shape);
    grads[0] = node->reals[0] == 1.0 ? cml_contiguous(e) : cml_mul_scalar(e, node->reals[0]);
    cml_tensor_release_all((cml_tensor *[]){k, e}, 2);
    return grads[0] ? CML_OK : cml_last_status();
}

/* max/min: g goes to the first extremum, whose index the forward saved. */
static cml_status extremum_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0], *idx = node->saved[0];
    reduce_plan p;
    CML_TRY(plan_of_node(node, x, &p));
    int64_t flat[3] = {p.outer, p.n, p.inner};
    cml_tensor *dxc = cml_tensor_zeros(3, flat, x->dtype, x->storage->device);
    cml_tensor *gc = cml_contiguous(g);
    cml_status s = dxc && gc ? cml_gather_bwd(cml__ctx(x), cml_tensor_data(dxc), cml_tensor_data(gc),
                                              cml_tensor_data(idx), p.outer, p.n, 1, p.inner, x->dtype)
                             : cml_last_status();
    cml_tensor_release(gc);
    if (s != CML_OK) {
        cml_tensor_release(dxc);
        return s;
    }
    if (!p.permuted) {
        grads[0] = cml_reshape(dxc, x->ndim, x->shape);
    } else { /* dxc holds x permuted by p.perm: undo the permutation */
        int64_t pshape[CML_MAX_DIMS];
        int inverse[CML_MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) {
            pshape[i] = x->shape[p.perm[i]];
            inverse[p.perm[i]] = i;
        }
        cml_tensor *r = cml_reshape(dxc, x->ndim, pshape);
        grads[0] = cml_permute(r, inverse);
        cml_tensor_release(r);
    }
    cml_tensor_release(dxc);
    return grads[0] ? CML_OK : cml_last_status();
}

/* var: d/dx = g * 2 (x - mean) / (n - correction). */
static cml_status var_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0];
    reduce_plan p;
    CML_TRY(plan_of_node(node, x, &p));
    int dims[CML_MAX_DIMS], nd = 0;
    for (int d = 0; d < x->ndim; d++)
        if (p.reduced[d]) dims[nd++] = d;
    cml_tensor *mean = cml_mean(x, dims, nd, true);
    cml_tensor *centered = cml_sub(x, mean);
    cml_tensor *k = cml_reshape(g, x->ndim, p.keep_shape);
    cml_tensor *gc = cml_mul(centered, k);
    grads[0] = cml_mul_scalar(gc, node->reals[0]);
    cml_tensor_release_all((cml_tensor *[]){mean, centered, k, gc}, 4);
    return grads[0] ? CML_OK : cml_last_status();
}

static int64_t dims_mask(const reduce_plan *p, int ndim) {
    int64_t mask = 0;
    for (int d = 0; d < ndim; d++)
        if (p->reduced[d]) mask |= (int64_t)1 << d;
    return mask;
}

static cml_tensor *reduce_op(const char *who, const char *name, cml_reduce_op op, const cml_tensor *x,
                             const int *dims, int n_dims, bool keepdim, int correction) {
    if (cml__any_null(who, 1, &x)) return NULL;
    if (cml__check_float(who, "x", x) != CML_OK) return NULL;
    reduce_plan p;
    if (make_plan(who, x, dims, n_dims, keepdim, op == CML_REDUCE_SUM, &p) != CML_OK) return NULL;
    if (op == CML_REDUCE_VAR && p.n - correction <= 0) {
        cml__error(CML_ERR_SHAPE, "%s: %lld elements with correction=%d leave no degrees of freedom", who,
                   (long long)p.n, correction);
        return NULL;
    }
    cml_tensor *out = run_reduce(op, x, &p, correction);
    if (!out || !cml__should_record(1, &x)) return out;
    cml__backward_fn fn = op == CML_REDUCE_SUM || op == CML_REDUCE_MEAN ? sum_backward
                          : op == CML_REDUCE_VAR                        ? var_backward
                                                                        : extremum_backward;
    cml_node *node = cml__record(out, name, fn, 1, &x);
    if (!node) goto fail;
    node->ints[0] = dims_mask(&p, x->ndim);
    node->reals[0] = op == CML_REDUCE_MEAN ? 1.0 / (double)p.n
                     : op == CML_REDUCE_VAR ? 2.0 / (double)(p.n - correction)
                                            : 1.0;
    if (op == CML_REDUCE_MAX || op == CML_REDUCE_MIN) {
        cml_tensor *idx = run_reduce(op == CML_REDUCE_MAX ? CML_REDUCE_ARGMAX : CML_REDUCE_ARGMIN, x, &p, 0);
        cml_status s = idx ? cml__save(node, 0, idx) : cml_last_status();
        cml_tensor_release(idx);
        if (s != CML_OK) goto fail;
    }
    return out;
fail:
    cml_tensor_release(out);
    return NULL;
}

cml_tensor *cml_sum(const cml_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_op("cml_sum", "sum", CML_REDUCE_SUM, x, dims, n_dims, keepdim, 0);
}
cml_tensor *cml_mean(const cml_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_op("cml_mean", "mean", CML_REDUCE_MEAN, x, dims, n_dims, keepdim, 0);
}
cml_tensor *cml_max(const cml_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_op("cml_max", "max", CML_REDUCE_MAX, x, dims, n_dims, keepdim, 0);
}
cml_tensor *cml_min(const cml_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_op("cml_min", "min", CML_REDUCE_MIN, x, dims, n_dims, keepdim, 0);
}
cml_tensor *cml_var(const cml_tensor *x, const int *dims, int n_dims, int correction, bool keepdim) {
    if (correction < 0) {
        cml__error(CML_ERR_INVALID_ARG, "cml_var: correction=%d must be >= 0", correction);
        return NULL;
    }
    return reduce_op("cml_var", "var", CML_REDUCE_VAR, x, dims, n_dims, keepdim, correction);
}

cml_tensor *cml_argmax(const cml_tensor *x, int dim, bool keepdim) {
    if (cml__any_null("cml_argmax", 1, &x)) return NULL;
    reduce_plan p;
    if (make_plan("cml_argmax", x, &dim, 1, keepdim, false, &p) != CML_OK) return NULL;
    return run_reduce(CML_REDUCE_ARGMAX, x, &p, 0);
}
