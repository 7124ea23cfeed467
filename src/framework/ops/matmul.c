/* matmul with torch.matmul semantics (1-d promotion, broadcast batch dims),
 * lowered to one strided-batched cml_gemm call, and its backward rule; and
 * linear (y = x W^T + b) as one GEMM with the bias in its epilogue, whose
 * backward computes dW and the bias gradient in one GEMM (dbias). */
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

/* How a (batch..., rows, cols) view reaches the GEMM without a copy: op N when
 * rows are contiguous, op T when columns are, and one stride for the
 * flattened batch. */
typedef struct gemm_operand {
    cml_tensor *t; /* the tensor read (a view or a contiguous copy); owned */
    cml_op op;
    int64_t ld, batch_stride;
} gemm_operand;

static bool try_describe(const cml_tensor *t, int nb, const int64_t *batch_shape, gemm_operand *g) {
    int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1];
    int64_t sr = t->stride[t->ndim - 2], sc = t->stride[t->ndim - 1];
    if ((sc == 1 || c == 1) && sr >= c && sr >= 1) {
        g->op = CML_OP_N;
        g->ld = sr;
    } else if ((sr == 1 || r == 1) && sc >= r && sc >= 1) {
        g->op = CML_OP_T;
        g->ld = sc;
    } else {
        return false;
    }
    /* The broadcast batch dims must collapse to one stride: all stride 0, or row-major nested. */
    int64_t stride = -1, expect = 0;
    for (int i = nb - 1; i >= 0; i--) {
        if (batch_shape[i] == 1) continue;
        int ti = i - (nb - (t->ndim - 2));
        int64_t s = ti >= 0 && t->shape[ti] != 1 ? t->stride[ti] : 0;
        if (stride < 0) {
            stride = s;
            expect = s * batch_shape[i];
        } else if (s != expect || (s == 0) != (stride == 0)) {
            return false;
        } else {
            expect = s * batch_shape[i];
        }
    }
    g->batch_stride = stride < 0 ? 0 : stride;
    return true;
}

static cml_status describe(const cml_tensor *t, int nb, const int64_t *batch_shape, gemm_operand *g) {
    if (try_describe(t, nb, batch_shape, g)) {
        g->t = cml_tensor_retain((cml_tensor *)t);
        return CML_OK;
    }
    int64_t shape[CML_MAX_DIMS];
    memcpy(shape, batch_shape, sizeof(int64_t) * (size_t)nb);
    shape[nb] = t->shape[t->ndim - 2];
    shape[nb + 1] = t->shape[t->ndim - 1];
    cml_tensor *e = cml_expand(t, nb + 2, shape);
    g->t = cml_contiguous(e);
    cml_tensor_release(e);
    if (!g->t) return cml_last_status();
    CML_ASSERT(try_describe(g->t, nb, batch_shape, g));
    return CML_OK;
}

static cml_tensor *matmul_core(const cml_tensor *a, const cml_tensor *b);

static cml_status matmul_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *a = node->inputs[0], *b = node->inputs[1];
    for (int i = 0; i < 2; i++) {
        if (!cml__wants_grad(node, i)) continue;
        const cml_tensor *other = node->inputs[1 - i];
        cml_tensor *ot = cml_transpose(other, -1, -2);
        cml_tensor *full = i == 0 ? matmul_core(g, ot) : matmul_core(ot, g); /* dA = g B^T, dB = A^T g */
        const cml_tensor *in = i == 0 ? a : b;
        grads[i] = cml__sum_to_shape(full, in->ndim, in->shape);
        cml_tensor_release_all((cml_tensor *[]){ot, full}, 2);
        if (!grads[i]) return cml_last_status();
    }
    return CML_OK;
}

/* a (..., M, K) @ b (..., K, N), both at least 2-d. */
static cml_tensor *matmul_core(const cml_tensor *a, const cml_tensor *b) {
    int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int64_t K2 = b->shape[b->ndim - 2], N = b->shape[b->ndim - 1];
    char sa[160], sb[160];
    if (K != K2) {
        cml__error(CML_ERR_SHAPE, "cml_matmul: inner dims differ: %s @ %s", cml__shape_str(a->ndim, a->shape, sa, sizeof sa),
                   cml__shape_str(b->ndim, b->shape, sb, sizeof sb));
        return NULL;
    }
    int nb;
    int64_t out_shape[CML_MAX_DIMS];
    if (cml__broadcast_shapes("cml_matmul (batch dims)", a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nb,
                              out_shape) != CML_OK)
        return NULL;
    if (nb + 2 > CML_MAX_DIMS) {
        cml__error(CML_ERR_SHAPE, "cml_matmul: result would have more than %d dims", CML_MAX_DIMS);
        return NULL;
    }
    int64_t batch = cml__numel(nb, out_shape);
    out_shape[nb] = M;
    out_shape[nb + 1] = N;
    cml_tensor *out = cml__tensor_new(nb + 2, out_shape, a->dtype, a->storage->device);
    if (!out) return NULL;
    if (batch * M * N > 0) {
        gemm_operand ga = {0}, gb = {0};
        bool prev = cml_set_grad_enabled(false);
        cml_status s = describe(a, nb, out_shape, &ga);
        if (s == CML_OK) s = describe(b, nb, out_shape, &gb);
        cml_set_grad_enabled(prev);
        if (s == CML_OK) {
            cml_gemm_desc d = cml_gemm_desc_f32(ga.op, gb.op, M, N, K, batch);
            d.a_dtype = d.b_dtype = d.c_dtype = d.d_dtype = a->dtype;
            d.lda = ga.ld;
            d.ldb = gb.ld;
            d.stride_a = ga.batch_stride;
            d.stride_b = gb.batch_stride;
            s = cml_gemm(cml__ctx(a), &d, cml_tensor_data(out), cml_tensor_data(ga.t), cml_tensor_data(gb.t), NULL);
        }
        cml_tensor_release_all((cml_tensor *[]){ga.t, gb.t}, 2);
        if (s != CML_OK) {
            cml_tensor_release(out);
            return NULL;
        }
    } else if (cml_tensor_fill_(out, 0.0) != CML_OK) {
        cml_tensor_release(out);
        return NULL;
    }
    const cml_tensor *in[2] = {a, b};
    if (cml__should_record(2, in) && !cml__record(out, "matmul", matmul_backward, 2, in)) {
        cml_tensor_release(out);
        return NULL;
    }
    return out;
}

cml_tensor *cml_matmul(const cml_tensor *a, const cml_tensor *b) {
    const cml_tensor *in[2] = {a, b};
    if (cml__any_null("cml_matmul", 2, in)) return NULL;
    if (cml__check_same_device("cml_matmul", a, b) != CML_OK || cml__check_float("cml_matmul", "a", a) != CML_OK)
        return NULL;
    if (a->dtype != b->dtype) {
        cml__error(CML_ERR_DTYPE, "cml_matmul: dtypes differ (%s and %s)", cml_dtype_name(a->dtype),
                   cml_dtype_name(b->dtype));
        return NULL;
    }
    if (a->ndim == 0 || b->ndim == 0) {
        cml__error(CML_ERR_SHAPE, "cml_matmul: operands must be at least 1-d (use cml_mul for scalars)");
        return NULL;
    }
    /* Promote 1-d operands, multiply, then drop the added dims again. */
    cml_tensor *a2 = a->ndim == 1 ? cml_unsqueeze(a, 0) : cml_tensor_retain((cml_tensor *)a);
    cml_tensor *b2 = b->ndim == 1 ? cml_unsqueeze(b, 1) : cml_tensor_retain((cml_tensor *)b);
    cml_tensor *out = a2 && b2 ? matmul_core(a2, b2) : NULL;
    cml_tensor_release_all((cml_tensor *[]){a2, b2}, 2);
    if (out && b->ndim == 1) {
        cml_tensor *s = cml_squeeze(out, -1);
        cml_tensor_release(out);
        out = s;
    }
    if (out && a->ndim == 1) {
        /* a's added dim was second to last before b's was dropped, and is last after it */
        cml_tensor *s = cml_squeeze(out, b->ndim == 1 ? -1 : -2);
        cml_tensor_release(out);
        out = s;
    }
    return out;
}

/* ---- linear ------------------------------------------------------------------ */

static cml_op flip(cml_op op) { return op == CML_OP_N ? CML_OP_T : CML_OP_N; }

/* A 2-d tensor as a GEMM operand (a contiguous copy only when neither its rows nor its columns are). */
static cml_status describe_2d(const cml_tensor *t, gemm_operand *g) {
    const int64_t no_batch[1] = {1};
    bool prev = cml_set_grad_enabled(false);
    cml_status s = describe(t, 0, no_batch, g);
    cml_set_grad_enabled(prev);
    return s;
}

/* One GEMM D (M x N, new, contiguous) = op(a) op(b) [+ bias per column], with
 * dbias (M, may be NULL) = the row sums of op(a); the operands are 2-d tensors
 * described by ga and gb, op_a/op_b possibly flipped by the caller. */
static cml_status gemm_2d(cml_tensor *out, const gemm_operand *ga, cml_op op_a, const gemm_operand *gb, cml_op op_b,
                          int64_t K, const cml_tensor *bias, cml_tensor *dbias) {
    int64_t M = out->shape[0], N = out->shape[1];
    if (M * N == 0) return CML_OK; /* (a dbias then has M = 0 elements too) */
    cml_gemm_desc d = cml_gemm_desc_init(op_a, op_b, M, N, K, 1, out->dtype, out->dtype);
    d.lda = ga->ld;
    d.ldb = gb->ld;
    d.bias = bias ? cml_tensor_data(bias) : NULL;
    d.dbias = dbias ? cml_tensor_data(dbias) : NULL;
    return cml_gemm(cml__ctx(out), &d, cml_tensor_data(out), cml_tensor_data(ga->t), cml_tensor_data(gb->t), NULL);
}

/* dx = g W, dW = g^T x with db = column sums of g in the same GEMM (when dW is
 * wanted and not empty; else db is a plain reduction). */
static cml_status linear_backward(cml_node *node, const cml_tensor *g, cml_tensor **grads) {
    const cml_tensor *x = node->inputs[0], *w = node->inputs[1];
    const int64_t rows = x->shape[0], in = x->shape[1], out = w->shape[0];
    const bool want_x = cml__wants_grad(node, 0), want_w = cml__wants_grad(node, 1);
    const bool want_b = node->n_inputs == 3 && cml__wants_grad(node, 2);
    const bool fused_db = want_b && want_w && in > 0;
    gemm_operand gg = {0}, gx = {0}, gw = {0};
    cml_status s = describe_2d(g, &gg);
    if (s == CML_OK && want_x) s = describe_2d(w, &gw);
    if (s == CML_OK && want_w) s = describe_2d(x, &gx);
    if (s == CML_OK && want_x) {
        grads[0] = cml__tensor_new(2, x->shape, x->dtype, x->storage->device);
        s = grads[0] ? gemm_2d(grads[0], &gg, gg.op, &gw, gw.op, out, NULL, NULL) : cml_last_status();
    }
    if (s == CML_OK && want_b) {
        grads[2] = fused_db ? cml__tensor_new(1, &out, node->inputs[2]->dtype, x->storage->device)
                            : cml__sum_to_shape(g, 1, &out);
        if (!grads[2]) s = cml_last_status();
    }
    if (s == CML_OK && want_w) {
        grads[1] = cml__tensor_new(2, w->shape, w->dtype, w->storage->device);
        /* (out x in) = g^T (out x rows) x (rows x in); dbias sums op(A)'s rows, i.e. g's columns */
        s = grads[1] ? gemm_2d(grads[1], &gg, flip(gg.op), &gx, gx.op, rows, NULL, fused_db ? grads[2] : NULL)
                     : cml_last_status();
    }
    cml_tensor_release_all((cml_tensor *[]){gg.t, gx.t, gw.t}, 3);
    return s;
}

/* x (rows, in), w (out, in), b (out) or NULL, all checked. */
static cml_tensor *linear_core(const cml_tensor *x, const cml_tensor *w, const cml_tensor *b) {
    const int64_t shape[2] = {x->shape[0], w->shape[0]};
    cml_tensor *y = cml__tensor_new(2, shape, x->dtype, x->storage->device);
    if (!y) return NULL;
    gemm_operand gx = {0}, gw = {0};
    cml_tensor *bc = NULL;
    cml_status s = describe_2d(x, &gx);
    if (s == CML_OK) s = describe_2d(w, &gw);
    if (s == CML_OK && b) {
        bool prev = cml_set_grad_enabled(false);
        bc = cml_contiguous(b); /* the epilogue reads bias[n] densely */
        cml_set_grad_enabled(prev);
        if (!bc) s = cml_last_status();
    }
    /* (rows x out) = x (rows x in) W^T (in x out) + b */
    if (s == CML_OK) s = gemm_2d(y, &gx, gx.op, &gw, flip(gw.op), x->shape[1], bc, NULL);
    cml_tensor_release_all((cml_tensor *[]){gx.t, gw.t, bc}, 3);
    const cml_tensor *in[3] = {x, w, b};
    int n_in = b ? 3 : 2;
    if (s != CML_OK || (cml__should_record(n_in, in) && !cml__record(y, "linear", linear_backward, n_in, in))) {
        cml_tensor_release(y);
        return NULL;
    }
    return y;
}

cml_tensor *cml_linear(const cml_tensor *x, const cml_tensor *weight, const cml_tensor *bias) {
    static const char who[] = "cml_linear";
    const cml_tensor *req[2] = {x, weight};
    if (cml__any_null(who, 2, req)) return NULL;
    if (cml__check_same_device(who, x, weight) != CML_OK || cml__check_float(who, "x", x) != CML_OK) return NULL;
    char sx[160], sw[160];
    if (weight->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != weight->shape[1]) {
        cml__error(CML_ERR_SHAPE, "%s: x %s must end in in_features and weight %s must be (out_features, in_features)",
                   who, cml__shape_str(x->ndim, x->shape, sx, sizeof sx),
                   cml__shape_str(weight->ndim, weight->shape, sw, sizeof sw));
        return NULL;
    }
    if (x->dtype != weight->dtype || (bias && bias->dtype != x->dtype)) {
        cml__error(CML_ERR_DTYPE, "%s: x (%s), weight (%s) and bias (%s) must share one dtype", who,
                   cml_dtype_name(x->dtype), cml_dtype_name(weight->dtype), bias ? cml_dtype_name(bias->dtype) : "none");
        return NULL;
    }
    if (bias && (cml__check_same_device(who, x, bias) != CML_OK)) return NULL;
    if (bias && (bias->ndim != 1 || bias->shape[0] != weight->shape[0])) {
        cml__error(CML_ERR_SHAPE, "%s: bias %s must be (out_features) = (%lld)", who,
                   cml__shape_str(bias->ndim, bias->shape, sx, sizeof sx), (long long)weight->shape[0]);
        return NULL;
    }
    /* leading dims fold into the GEMM's rows: one product, and dW needs no per-batch partial sums */
    const int64_t in = weight->shape[1], out = weight->shape[0];
    const int64_t rows = in > 0 ? cml_tensor_numel(x) / in : cml__numel(x->ndim - 1, x->shape);
    cml_tensor *x2 = x->ndim == 2 ? cml_tensor_retain((cml_tensor *)x) : cml_reshape(x, 2, (const int64_t[]){rows, in});
    cml_tensor *y2 = x2 ? linear_core(x2, weight, bias) : NULL;
    cml_tensor_release(x2);
    if (!y2 || x->ndim == 2) return y2;
    int64_t shape[CML_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = out;
    cml_tensor *y = cml_reshape(y2, x->ndim, shape);
    cml_tensor_release(y2);
    return y;
}
