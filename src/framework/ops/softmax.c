/* softmax / log_softmax along any axis and cross-entropy from logits. */
#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* (outer, n, inner) of a contiguous tensor around axis d. */
static void split_at(const cml_tensor *x, int d, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < d; i++) *outer *= x->shape[i];
    *n = x->shape[d];
    for (int i = d + 1; i < x->ndim; i++) *inner *= x->shape[i];
}

static cml_status softmax_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *y = node->saved[0];
    int64_t outer, n, inner;
    split_at(y, (int)node->ints[0], &outer, &n, &inner);
    cml_tensor *gc = cml_contiguous(g);
    cml_tensor *dx = cml__tensor_new(y->ndim, y->shape, y->dtype, y->storage->device);
    cml_status s = gc && dx ? cml_softmax_bwd(cml__ctx(y), cml_tensor_data(dx), cml_tensor_data(gc), cml_tensor_data(y),
                                              outer, n, inner, y->dtype, node->ints[1] != 0)
                            : cml_last_status();
    cml_tensor_release(gc);
    if (s != CML_OK) {
        cml_tensor_release(dx);
        return s;
    }
    grads[0] = dx;
    return CML_OK;
}

static cml_tensor *softmax_op(const char *who, const cml_tensor *x, int dim, bool log) {
    if (cml__any_null(who, 1, &x)) return NULL;
    if (cml__check_float(who, "x", x) != CML_OK) return NULL;
    int d = cml__norm_dim(dim, x->ndim);
    if (d < 0) {
        cml__error(CML_ERR_INVALID_ARG, "%s: dim=%d out of range for a %d-d tensor", who, dim, x->ndim);
        return NULL;
    }
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *xc = cml_contiguous(x);
    cml_set_grad_enabled(prev);
    cml_tensor *out = xc ? cml__tensor_new(x->ndim, x->shape, x->dtype, x->storage->device) : NULL;
    int64_t outer, n, inner;
    split_at(x, d, &outer, &n, &inner);
    if (out && cml_tensor_numel(out) > 0 &&
        cml_softmax_fwd(cml__ctx(x), cml_tensor_data(out), cml_tensor_data(xc), outer, n, inner, x->dtype, log) != CML_OK) {
        cml_tensor_release(out);
        out = NULL;
    }
    cml_tensor_release(xc);
    if (out && cml__should_record(1, &x)) {
        cml_node *node = cml__record(out, log ? "log_softmax" : "softmax", softmax_backward, 1, &x);
        if (!node || cml__save(node, 0, out) != CML_OK) {
            cml_tensor_release(out);
            return NULL;
        }
        node->ints[0] = d;
        node->ints[1] = log;
    }
    return out;
}

cml_tensor *cml_softmax(const cml_tensor *x, int dim) { return softmax_op("cml_softmax", x, dim, false); }
cml_tensor *cml_log_softmax(const cml_tensor *x, int dim) { return softmax_op("cml_log_softmax", x, dim, true); }

/* ---- cross-entropy ---------------------------------------------------------------- */

/* Backward from the per-row losses: dlogits = dloss[r] * (softmax - onehot), softmax from the
 * forward's per-row logsumexp (saved[1]): one read of the logits. */
static cml_status cross_entropy_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *logits = node->inputs[0], *targets = node->saved[0], *lse = node->saved[1];
    int64_t rows = logits->shape[0], classes = logits->shape[1];
    cml_tensor *dloss = cml_to_dtype(g, CML_F32);
    cml_tensor *dl = cml_contiguous(dloss);
    cml_tensor *lc = cml_contiguous(logits);
    cml_tensor *dx = cml__tensor_new(2, logits->shape, logits->dtype, logits->storage->device);
    cml_status s = dl && lc && dx ? cml_cross_entropy_bwd(cml__ctx(logits), cml_tensor_data(dx), cml_tensor_data(dl),
                                                          cml_tensor_data(lc), cml_tensor_data(lse),
                                                          cml_tensor_data(targets), rows, classes, logits->dtype,
                                                          node->ints[0])
                                  : cml_last_status();
    cml_tensor_release_all((cml_tensor *[]){dloss, dl, lc}, 3);
    if (s != CML_OK) {
        cml_tensor_release(dx);
        return s;
    }
    grads[0] = dx;
    return CML_OK;
}

/* Per-row losses (N) as a recorded op; mean/sum are ordinary reductions on top. */
static cml_tensor *cross_entropy_rows(const cml_tensor *logits, const cml_tensor *t64, int64_t ignore_index) {
    int64_t rows = logits->shape[0], classes = logits->shape[1];
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *lc = cml_contiguous(logits);
    cml_set_grad_enabled(prev);
    const bool record = cml__should_record(1, &logits);
    cml_tensor *loss = lc ? cml__tensor_new(1, &rows, CML_F32, logits->storage->device) : NULL;
    const int64_t lse_shape[2] = {rows, 2}; /* (max, log-sum) a row: include/camel/kernels.h */
    cml_tensor *lse = loss && record ? cml__tensor_new(2, lse_shape, CML_F32, logits->storage->device) : NULL;
    if (loss && (record && !lse ? cml_last_status()
                                : cml_cross_entropy_fwd(cml__ctx(logits), cml_tensor_data(loss),
                                                        lse ? cml_tensor_data(lse) : NULL, cml_tensor_data(lc),
                                                        cml_tensor_data(t64), rows, classes, logits->dtype,
                                                        ignore_index)) != CML_OK) {
        cml_tensor_release(loss);
        loss = NULL;
    }
    cml_tensor_release(lc);
    if (loss && logits->dtype != CML_F32) { /* losses come out in f32; give them the logits' dtype */
        cml_tensor *c = cml_to_dtype(loss, logits->dtype);
        cml_tensor_release(loss);
        loss = c;
    }
    if (loss && record) {
        cml_node *node = cml__record(loss, "cross_entropy", cross_entropy_backward, 1, &logits);
        if (!node || cml__save(node, 0, t64) != CML_OK || cml__save(node, 1, lse) != CML_OK) {
            cml_tensor_release(loss);
            loss = NULL;
        } else {
            node->ints[0] = ignore_index;
        }
    }
    cml_tensor_release(lse);
    return loss;
}

cml_tensor *cml_cross_entropy(const cml_tensor *logits, const cml_tensor *targets, int64_t ignore_index,
                              cml_reduction reduction) {
    const char *who = "cml_cross_entropy";
    const cml_tensor *in[2] = {logits, targets};
    if (cml__any_null(who, 2, in)) return NULL;
    if (cml__check_float(who, "logits", logits) != CML_OK || cml__check_same_device(who, logits, targets) != CML_OK)
        return NULL;
    char a[160], b[160];
    if (logits->ndim != 2 || targets->ndim != 1 || targets->shape[0] != logits->shape[0]) {
        cml__error(CML_ERR_SHAPE, "%s: expected logits (N, C) and targets (N); got %s and %s", who,
                   cml__shape_str(logits->ndim, logits->shape, a, sizeof a),
                   cml__shape_str(targets->ndim, targets->shape, b, sizeof b));
        return NULL;
    }
    if (targets->dtype != CML_I64 && targets->dtype != CML_I32) {
        cml__error(CML_ERR_DTYPE, "%s: targets have dtype %s; expected i64 or i32 class indices", who,
                   cml_dtype_name(targets->dtype));
        return NULL;
    }
    if (reduction != CML_REDUCTION_MEAN && reduction != CML_REDUCTION_SUM && reduction != CML_REDUCTION_NONE) {
        cml__error(CML_ERR_INVALID_ARG, "%s: unknown reduction %d", who, (int)reduction);
        return NULL;
    }
    cml_tensor *t64 = cml_to_dtype(targets, CML_I64);
    cml_tensor *tc = cml_contiguous(t64);
    cml_tensor_release(t64);
    if (!tc) return NULL;
    cml_tensor *rows = cross_entropy_rows(logits, tc, ignore_index);
    cml_tensor *out = NULL;
    if (rows && reduction == CML_REDUCTION_NONE) {
        out = cml_tensor_retain(rows);
    } else if (rows) {
        cml_tensor *total = cml_sum(rows, NULL, 0, false);
        if (reduction == CML_REDUCTION_SUM) {
            out = cml_tensor_retain(total);
        } else if (total) { /* mean over the targets that count */
            int64_t counted = 0;
            /* the targets are counted on the host: a device tensor is copied back first (waits for the stream) */
            cml_tensor *th = cml_tensor_to(tc, CML_DEVICE_CPU);
            const int64_t *t = th ? cml_tensor_data(th) : NULL;
            for (int64_t i = 0; t && i < th->shape[0]; i++) counted += t[i] != ignore_index;
            if (th) out = cml_mul_scalar(total, counted > 0 ? 1.0 / (double)counted : 0.0);
            cml_tensor_release(th);
        }
        cml_tensor_release(total);
    }
    cml_tensor_release_all((cml_tensor *[]){rows, tc}, 2);
    return out;
}
