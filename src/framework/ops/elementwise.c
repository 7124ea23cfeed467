/* Elementwise ops (broadcasting binary, unary, scalar, comparisons) and their
 * backward rules. */
#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* ---- forward helpers ----------------------------------------------------------- */

static cml_tensor *binary_forward(const char *who, cml_binary_op op, const cml_tensor *a, const cml_tensor *b,
                                  bool compare) {
    const cml_tensor *in[2] = {a, b};
    if (cml__any_null(who, 2, in)) return NULL;
    if (cml__check_same_device(who, a, b) != CML_OK) return NULL;
    if (a->dtype != b->dtype) {
        cml__error(CML_ERR_DTYPE, "%s: dtypes differ (%s and %s); convert one with cml_to_dtype", who,
                   cml_dtype_name(a->dtype), cml_dtype_name(b->dtype));
        return NULL;
    }
    if (!compare && cml__check_float(who, "a", a) != CML_OK) return NULL;
    int nd;
    int64_t shape[CML_MAX_DIMS];
    if (cml__broadcast_shapes(who, a->ndim, a->shape, b->ndim, b->shape, &nd, shape) != CML_OK) return NULL;
    cml_tensor *out = cml__tensor_new(nd, shape, compare ? CML_U8 : a->dtype, a->storage->device);
    if (!out) return NULL;
    cml_layout ol = cml_tensor_layout(out), al = cml__broadcast_layout(a, nd, shape),
               bl = cml__broadcast_layout(b, nd, shape);
    if (cml_binary(cml__ctx(a), op, cml_tensor_data(out), &ol, out->dtype, cml_tensor_data(a), &al, a->dtype,
                   cml_tensor_data(b), &bl, b->dtype) != CML_OK) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}

static cml_tensor *unary_forward(const char *who, cml_unary_op op, float param, const cml_tensor *x) {
    if (cml__any_null(who, 1, &x)) return NULL;
    if (cml__check_float(who, "x", x) != CML_OK) return NULL;
    cml_tensor *out = cml__tensor_new(x->ndim, x->shape, x->dtype, x->storage->device);
    if (!out) return NULL;
    cml_layout ol = cml_tensor_layout(out), xl = cml_tensor_layout(x);
    if (cml_unary(cml__ctx(x), op, param, cml_tensor_data(out), &ol, out->dtype, cml_tensor_data(x), &xl,
                  x->dtype) != CML_OK) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}

/* Records a node; on failure releases out and returns NULL. */
static cml_node *record_or_drop(cml_tensor **out, const char *name, cml__backward_fn fn, int n,
                                const cml_tensor *const *ins) {
    cml_node *node = cml__record(*out, name, fn, n, ins);
    if (!node) {
        cml_tensor_release(*out);
        *out = NULL;
    }
    return node;
}

/* ---- binary backward rules ------------------------------------------------------ */

/* grads[i] = sum_to_shape(g_i) for each input that wants a gradient; consumes g0/g1. */
static cml_status finish_binary(cml_node *node, cml_tensor *g0, cml_tensor *g1, cml_tensor **grads) {
    cml_tensor *g[2] = {g0, g1};
    cml_status s = CML_OK;
    for (int i = 0; i < 2; i++) {
        if (cml__wants_grad(node, i) && s == CML_OK) {
            const cml_tensor *in = node->inputs[i];
            grads[i] = g[i] ? cml__sum_to_shape(g[i], in->ndim, in->shape) : NULL;
            if (!grads[i]) s = cml_last_status();
        }
        cml_tensor_release(g[i]);
    }
    return s;
}

static cml_tensor *retained(const cml_tensor *t) { return cml_tensor_retain((cml_tensor *)t); }

static cml_status add_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    return finish_binary(node, retained(g), retained(g), grads);
}

static cml_status sub_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    return finish_binary(node, retained(g), cml__wants_grad(node, 1) ? cml_neg(g) : NULL, grads);
}

static cml_status mul_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *a = node->inputs[0], *b = node->inputs[1];
    return finish_binary(node, cml__wants_grad(node, 0) ? cml_mul(g, b) : NULL,
                         cml__wants_grad(node, 1) ? cml_mul(g, a) : NULL, grads);
}

static cml_status div_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *b = node->inputs[1], *out = node->saved[0];
    cml_tensor *ga = cml_div(g, b), *gb = NULL;
    if (cml__wants_grad(node, 1)) { /* d(a/b)/db = -out / b */
        cml_tensor *t = cml_mul(ga, out);
        gb = cml_neg(t);
        cml_tensor_release(t);
    }
    return finish_binary(node, ga, gb, grads);
}

/* d(a^b)/da = b a^(b-1) and d(a^b)/db = a^b log(a), with PyTorch's values where those
 * forms give NaN: 0 for da where b == 0 and 0 for db where a == 0. */
static cml_status pow_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *a = node->inputs[0], *b = node->inputs[1], *out = node->saved[0];
    cml_tensor *zero = cml_tensor_scalar(0.0, a->dtype, a->storage->device);
    cml_tensor *ga = NULL, *gb = NULL;
    if (cml__wants_grad(node, 0)) {
        cml_tensor *bm1 = cml_add_scalar(b, -1.0);
        cml_tensor *p = cml_pow(a, bm1);
        cml_tensor *bp = cml_mul(b, p);
        cml_tensor *b_zero = cml_eq(b, zero);
        cml_tensor *safe = cml_where(b_zero, zero, bp);
        ga = cml_mul(g, safe);
        cml_tensor_release_all((cml_tensor *[]){bm1, p, bp, b_zero, safe}, 5);
    }
    if (cml__wants_grad(node, 1)) {
        cml_tensor *la = cml_log(a);
        cml_tensor *ol = cml_mul(out, la);
        cml_tensor *a_zero = cml_eq(a, zero);
        cml_tensor *safe = cml_where(a_zero, zero, ol);
        gb = cml_mul(g, safe);
        cml_tensor_release_all((cml_tensor *[]){la, ol, a_zero, safe}, 4);
    }
    cml_tensor_release(zero);
    return finish_binary(node, ga, gb, grads);
}

/* maximum/minimum: the gradient goes to a where a wins (ties go to a). */
static cml_status extremum_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *a = node->inputs[0], *b = node->inputs[1];
    bool is_max = node->ints[0] != 0;
    cml_tensor *b_wins = is_max ? cml_gt(b, a) : cml_gt(a, b);
    cml_tensor *zero = cml_tensor_scalar(0.0, g->dtype, g->storage->device);
    cml_tensor *ga = cml__wants_grad(node, 0) ? cml_where(b_wins, zero, g) : NULL;
    cml_tensor *gb = cml__wants_grad(node, 1) ? cml_where(b_wins, g, zero) : NULL;
    cml_tensor_release_all((cml_tensor *[]){b_wins, zero}, 2);
    return finish_binary(node, ga, gb, grads);
}

static cml_tensor *binary_op(const char *who, const char *name, cml_binary_op op, cml__backward_fn fn,
                             bool save_out, const cml_tensor *a, const cml_tensor *b) {
    cml_tensor *out = binary_forward(who, op, a, b, false);
    const cml_tensor *in[2] = {a, b};
    if (out && cml__should_record(2, in)) {
        cml_node *node = record_or_drop(&out, name, fn, 2, in);
        if (node) {
            node->ints[0] = op == CML_BINARY_MAX;
            if (save_out && cml__save(node, 0, out) != CML_OK) {
                cml_tensor_release(out);
                return NULL;
            }
        }
    }
    return out;
}

cml_tensor *cml_add(const cml_tensor *a, const cml_tensor *b) {
    return binary_op("cml_add", "add", CML_BINARY_ADD, add_backward, false, a, b);
}
cml_tensor *cml_sub(const cml_tensor *a, const cml_tensor *b) {
    return binary_op("cml_sub", "sub", CML_BINARY_SUB, sub_backward, false, a, b);
}
cml_tensor *cml_mul(const cml_tensor *a, const cml_tensor *b) {
    return binary_op("cml_mul", "mul", CML_BINARY_MUL, mul_backward, false, a, b);
}
cml_tensor *cml_div(const cml_tensor *a, const cml_tensor *b) {
    return binary_op("cml_div", "div", CML_BINARY_DIV, div_backward, true, a, b);
}
cml_tensor *cml_pow(const cml_tensor *a, const cml_tensor *b) {
    return binary_op("cml_pow", "pow", CML_BINARY_POW, pow_backward, true, a, b);
}
cml_tensor *cml_maximum(const cml_tensor *a, const cml_tensor *b) {
    return binary_op("cml_maximum", "maximum", CML_BINARY_MAX, extremum_backward, false, a, b);
}
cml_tensor *cml_minimum(const cml_tensor *a, const cml_tensor *b) {
    return binary_op("cml_minimum", "minimum", CML_BINARY_MIN, extremum_backward, false, a, b);
}

cml_tensor *cml_eq(const cml_tensor *a, const cml_tensor *b) {
    return binary_forward("cml_eq", CML_BINARY_EQ, a, b, true);
}
cml_tensor *cml_gt(const cml_tensor *a, const cml_tensor *b) {
    return binary_forward("cml_gt", CML_BINARY_GT, a, b, true);
}

/* ---- unary ops --------------------------------------------------------------------- */

/* dx = g * op'(x) through the fused kernel; node->ints[0] = op, reals[0] = param,
 * saved[0] = output (for ops whose derivative reads it). */
static cml_status unary_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0];
    cml_tensor *gc = cml_contiguous(g), *xc = cml_contiguous(x);
    cml_tensor *yc = node->saved[0] ? cml_contiguous(node->saved[0]) : NULL;
    cml_tensor *dx = cml__tensor_new(x->ndim, x->shape, x->dtype, x->storage->device);
    cml_status s = (gc && xc && dx && (yc || !node->saved[0])) ? CML_OK : cml_last_status();
    if (s == CML_OK)
        s = cml_unary_bwd(cml__ctx(x), (cml_unary_op)node->ints[0], (float)node->reals[0], cml_tensor_data(dx),
                          cml_tensor_data(gc), cml_tensor_data(xc), yc ? cml_tensor_data(yc) : NULL,
                          cml_tensor_numel(x), x->dtype);
    cml_tensor_release_all((cml_tensor *[]){gc, xc, yc}, 3);
    if (s != CML_OK) {
        cml_tensor_release(dx);
        return s;
    }
    grads[0] = dx;
    return CML_OK;
}

static bool derivative_reads_output(cml_unary_op op) {
    return op == CML_UNARY_EXP || op == CML_UNARY_TANH || op == CML_UNARY_SIGMOID || op == CML_UNARY_SQRT;
}

static cml_tensor *unary_op(const char *who, const char *name, cml_unary_op op, double param,
                            const cml_tensor *x) {
    cml_tensor *out = unary_forward(who, op, (float)param, x);
    if (out && cml__should_record(1, &x)) {
        cml_node *node = record_or_drop(&out, name, unary_backward, 1, &x);
        if (node) {
            node->ints[0] = op;
            node->reals[0] = param;
            if (derivative_reads_output(op) && cml__save(node, 0, out) != CML_OK) {
                cml_tensor_release(out);
                return NULL;
            }
        }
    }
    return out;
}

cml_tensor *cml_neg(const cml_tensor *x) { return unary_op("cml_neg", "neg", CML_UNARY_NEG, 0, x); }
cml_tensor *cml_exp(const cml_tensor *x) { return unary_op("cml_exp", "exp", CML_UNARY_EXP, 0, x); }
cml_tensor *cml_log(const cml_tensor *x) { return unary_op("cml_log", "log", CML_UNARY_LOG, 0, x); }
cml_tensor *cml_sqrt(const cml_tensor *x) { return unary_op("cml_sqrt", "sqrt", CML_UNARY_SQRT, 0, x); }
cml_tensor *cml_abs(const cml_tensor *x) { return unary_op("cml_abs", "abs", CML_UNARY_ABS, 0, x); }
cml_tensor *cml_tanh(const cml_tensor *x) { return unary_op("cml_tanh", "tanh", CML_UNARY_TANH, 0, x); }
cml_tensor *cml_sigmoid(const cml_tensor *x) { return unary_op("cml_sigmoid", "sigmoid", CML_UNARY_SIGMOID, 0, x); }
cml_tensor *cml_relu(const cml_tensor *x) { return unary_op("cml_relu", "relu", CML_UNARY_RELU, 0, x); }

cml_tensor *cml_gelu(const cml_tensor *x, cml_gelu_approx approx) {
    if (approx != CML_GELU_ERF && approx != CML_GELU_TANH) {
        cml__error(CML_ERR_INVALID_ARG, "cml_gelu: approx=%d must be CML_GELU_ERF or CML_GELU_TANH", (int)approx);
        return NULL;
    }
    return unary_op("cml_gelu", "gelu", approx == CML_GELU_TANH ? CML_UNARY_GELU_TANH : CML_UNARY_GELU_ERF, 0, x);
}

cml_tensor *cml_add_scalar(const cml_tensor *a, double s) {
    return unary_op("cml_add_scalar", "add_scalar", CML_UNARY_ADD_SCALAR, s, a);
}
cml_tensor *cml_mul_scalar(const cml_tensor *a, double s) {
    return unary_op("cml_mul_scalar", "mul_scalar", CML_UNARY_SCALE, s, a);
}
cml_tensor *cml_pow_scalar(const cml_tensor *a, double p) {
    return unary_op("cml_pow_scalar", "pow_scalar", CML_UNARY_POW_SCALAR, p, a);
}
