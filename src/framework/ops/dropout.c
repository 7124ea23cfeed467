/* Inverted dropout with a Philox mask (the same mask on every backend for the
 * same generator state). */
#include "camel/ops.h"
#include "framework/tensor_impl.h"

static cml_status dropout_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    cml_tensor *m = cml_to_dtype(node->saved[0], g->dtype);
    cml_tensor *gm = cml_mul(g, m);
    grads[0] = cml_mul_scalar(gm, node->reals[0]);
    cml_tensor_release_all((cml_tensor *[]){m, gm}, 2);
    return grads[0] ? CML_OK : cml_last_status();
}

cml_tensor *cml_dropout(const cml_tensor *x, float p, bool training, cml_rng *rng) {
    const char *who = "cml_dropout";
    if (cml__any_null(who, 1, &x)) return NULL;
    if (!(p >= 0.0f && p < 1.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: p=%g must be in [0, 1)", who, (double)p);
        return NULL;
    }
    if (!training || p == 0.0f) return cml_clone(x);
    if (!rng) {
        cml__error(CML_ERR_INVALID_ARG, "%s: rng must not be NULL in training mode", who);
        return NULL;
    }
    if (cml__check_float(who, "x", x) != CML_OK) return NULL;
    bool prev = cml_set_grad_enabled(false);
    cml_tensor *xc = cml_contiguous(x);
    cml_set_grad_enabled(prev);
    cml_tensor *out = xc ? cml__tensor_new(x->ndim, x->shape, x->dtype, x->storage->device) : NULL;
    cml_tensor *mask = out ? cml__tensor_new(x->ndim, x->shape, CML_U8, x->storage->device) : NULL;
    int64_t n = cml_tensor_numel(x);
    uint64_t offset = cml_rng_reserve(rng, (uint64_t)n);
    cml_status s = mask ? cml_dropout_fwd(cml__ctx(x), cml_tensor_data(out), cml_tensor_data(mask), cml_tensor_data(xc),
                                          n, x->dtype, p, rng->seed, offset)
                        : cml_last_status();
    cml_tensor_release(xc);
    if (s == CML_OK && cml__should_record(1, &x)) {
        cml_node *node = cml__record(out, "dropout", dropout_backward, 1, &x);
        s = node ? cml__save(node, 0, mask) : cml_last_status();
        if (node) node->reals[0] = 1.0 / (1.0 - (double)p);
    }
    cml_tensor_release(mask);
    if (s != CML_OK) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}
