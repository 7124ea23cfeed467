/* Transformer ops and modules: layer_norm, embedding and attention forward
 * against float64 references (contiguous and strided inputs) and gradient
 * checks; Embedding, LayerNorm, CausalSelfAttention (against a manual
 * composition with a naive masked softmax; causality; dropout) and Residual;
 * error paths. */
#include "framework_test_util.h"

/* ---- float64 references ------------------------------------------------------------ */

static double *layer_norm_ref(const double *x, const double *g, const double *b, int64_t rows, int64_t C,
                              double eps) {
    double *y = ft_malloc((size_t)(rows * C) * 8);
    for (int64_t r = 0; r < rows; r++) {
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++) m += x[r * C + c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += (x[r * C + c] - m) * (x[r * C + c] - m);
        double rs = 1.0 / sqrt(v / (double)C + eps);
        for (int64_t c = 0; c < C; c++)
            y[r * C + c] = (x[r * C + c] - m) * rs * (g ? g[c] : 1.0) + (b ? b[c] : 0.0);
    }
    return y;
}

/* Attention over row-major (B, S, H, D) arrays with a naive masked softmax. */
static double *attention_ref(const double *q, const double *k, const double *v, int64_t B, int64_t Sq, int64_t Skv,
                             int64_t Hq, int64_t Hkv, int64_t D, bool causal, double scale) {
    double *o = ft_malloc((size_t)(B * Sq * Hq * D) * 8), *s = ft_malloc((size_t)Skv * 8);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Sq; i++)
            for (int64_t h = 0; h < Hq; h++) {
                int64_t hk = h / (Hq / Hkv);
                double m = -INFINITY, sum = 0;
                double *oi = o + ((b * Sq + i) * Hq + h) * D;
                for (int64_t j = 0; j < Skv; j++) {
                    double acc = 0;
                    for (int64_t c = 0; c < D; c++)
                        acc += q[((b * Sq + i) * Hq + h) * D + c] * k[((b * Skv + j) * Hkv + hk) * D + c];
                    s[j] = causal && j > i + Skv - Sq ? -INFINITY : acc * scale; /* the mask */
                    m = fmax(m, s[j]);
                }
                for (int64_t c = 0; c < D; c++) oi[c] = 0;
                if (m == -INFINITY) continue;
                for (int64_t j = 0; j < Skv; j++) sum += exp(s[j] - m);
                for (int64_t j = 0; j < Skv; j++)
                    for (int64_t c = 0; c < D; c++) oi[c] += exp(s[j] - m) / sum * v[((b * Skv + j) * Hkv + hk) * D + c];
            }
    free(s);
    return o;
}

/* Tighter than FT_GRADCHECK: a step of 1e-2 keeps f32 rounding noise well below
 * the tolerance, so a 1 % error in a gradient is caught. */
static void tight_gradcheck(cml_grad_fn f, cml_tensor *const *in, int n, void *user, const char *what) {
    cml_gradcheck_opts opts = {1e-2, 3e-4, 3e-3, 11};
    cml_clear_error();
    cml_status s = cml_gradcheck(f, in, n, user, &opts);
    CHECK_MSG(s == CML_OK, "gradcheck of %s: %s", what, cml_last_error());
}

/* ---- layer_norm ------------------------------------------------------------------------ */

static void test_layer_norm_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 70);
    const int64_t shape[3] = {2, 3, 6}, C = 6;
    for (int l = 0; l < FT_LAYOUT_COUNT; l++)
        for (int affine = 0; affine < 4; affine++) {
            cml_tensor *x = ft_make(3, shape, (ft_layout_kind)l, FT_UNIFORM(-2, 3), &rng);
            cml_tensor *g = affine & 1 ? ft_make(1, &C, (ft_layout_kind)l, FT_UNIFORM(0.5, 1.5), &rng) : NULL;
            cml_tensor *b = affine & 2 ? ft_make(1, &C, FT_CONTIG, FT_UNIFORM(-1, 1), &rng) : NULL;
            double *xv = ft_read(x), *gv = g ? ft_read(g) : NULL, *bv = b ? ft_read(b) : NULL;
            double *ref = layer_norm_ref(xv, gv, bv, 6, C, 1e-5);
            cml_tensor *y = cml_layer_norm(x, g, b, 1e-5f);
            char what[64];
            snprintf(what, sizeof what, "layer_norm %s affine=%d", ft_layout_name[l], affine);
            FT_CHECK_CLOSE(y, 3, shape, ref, 1e-6, what);
            free(xv), free(gv), free(bv), free(ref);
            FT_RELEASE(x, g, b, y);
        }
}

static cml_tensor *layer_norm_fn(cml_tensor *const *in, int n, void *user) {
    return cml_layer_norm(in[0], n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, 1e-5f);
}

static void test_layer_norm_grad(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 71);
    const int64_t shape[3] = {2, 3, 5}, C = 5;
    cml_tensor *in[3] = {ft_leaf(3, shape, FT_UNIFORM(-2, 2), &rng), ft_leaf(1, &C, FT_UNIFORM(0.5, 1.5), &rng),
                         ft_leaf(1, &C, FT_UNIFORM(-1, 1), &rng)};
    tight_gradcheck(layer_norm_fn, in, 3, NULL, "layer_norm wrt x, gamma, beta");
    tight_gradcheck(layer_norm_fn, in, 1, NULL, "layer_norm wrt x (no affine)");
    cml_tensor_set_requires_grad(in[0], false); /* gamma and beta only */
    tight_gradcheck(layer_norm_fn, in, 3, NULL, "layer_norm wrt gamma, beta");
    cml_tensor_release_all(in, 3);
}

/* ---- embedding ---------------------------------------------------------------------------- */

static void test_embedding_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 72);
    const int64_t wshape[2] = {5, 3}, ishape[2] = {2, 3};
    cml_tensor *w = ft_make(2, wshape, FT_PERMUTED, FT_UNIFORM(-1, 1), &rng);
    double *wv = ft_read(w);
    const int64_t idx[6] = {4, 0, 4, 2, 2, 1};
    const int32_t idx32[6] = {4, 0, 4, 2, 2, 1};
    cml_tensor *i64 = ft_from_i64(2, ishape, idx);
    cml_tensor *i32 = cml_tensor_from_host(idx32, 2, ishape, CML_I32, CML_DEVICE_CPU);
    cml_tensor *i0 = cml_tensor_scalar(3, CML_I64, CML_DEVICE_CPU);
    double ref[18];
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 3; c++) ref[r * 3 + c] = wv[idx[r] * 3 + c];
    const int64_t oshape[3] = {2, 3, 3};
    cml_tensor *y64 = cml_embedding(w, i64), *y32 = cml_embedding(w, i32), *y0 = cml_embedding(w, i0);
    FT_CHECK_EQUAL(y64, 3, oshape, ref, "embedding i64");
    FT_CHECK_EQUAL(y32, 3, oshape, ref, "embedding i32");
    FT_CHECK_EQUAL(y0, 1, &wshape[1], wv + 9, "embedding 0-d index");
    free(wv);
    FT_RELEASE(w, i64, i32, i0, y64, y32, y0);
}

static cml_tensor *embedding_fn(cml_tensor *const *in, int n, void *user) {
    return cml_embedding(in[0], (const cml_tensor *)user);
}

static void test_embedding_grad(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 73);
    const int64_t wshape[2] = {6, 4}, ishape[3] = {2, 2, 3};
    const int64_t idx[12] = {1, 5, 1, 1, 0, 3, 5, 5, 2, 1, 0, 3}; /* repeats accumulate */
    cml_tensor *w = ft_leaf(2, wshape, FT_UNIFORM(-1, 1), &rng), *ind = ft_from_i64(3, ishape, idx);
    FT_GRADCHECK(embedding_fn, &w, 1, ind, "embedding wrt weight");
    /* exact: the gradient of sum(embedding) counts each row's uses; row 4 is unused */
    cml_tensor_clear_grad(w);
    cml_tensor *y = cml_embedding(w, ind), *s = cml_sum(y, NULL, 0, false);
    CHECK_OK(cml_backward(s, NULL));
    double counts[24] = {0};
    for (int i = 0; i < 12; i++)
        for (int c = 0; c < 4; c++) counts[idx[i] * 4 + c] += 1;
    FT_CHECK_EQUAL(cml_tensor_grad(w), 2, wshape, counts, "embedding grad counts");
    FT_RELEASE(w, ind, y, s);
}

/* ---- attention ------------------------------------------------------------------------------- */

typedef struct at_shape {
    int64_t B, Sq, Skv, Hq, Hkv, D;
    bool causal;
} at_shape;

static const at_shape at_shapes[] = {
    {2, 3, 3, 2, 2, 4, true}, {1, 4, 6, 4, 2, 3, true}, {1, 5, 3, 2, 1, 2, true},
    {2, 3, 4, 2, 2, 5, false}, {1, 1, 5, 4, 1, 3, true}, {1, 6, 6, 3, 3, 1, false},
};

static void test_attention_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 74);
    for (int s = 0; s < FT_LEN(at_shapes); s++) {
        at_shape a = at_shapes[s];
        const int64_t qs[4] = {a.B, a.Sq, a.Hq, a.D}, ks[4] = {a.B, a.Skv, a.Hkv, a.D};
        for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
            /* permuted: last dim strided (copied); strided: stride-2 last dim (copied);
             * also a (B, H, S, D) tensor permuted to (B, S, H, D): last dim contiguous, used in place */
            for (int bhsd = 0; bhsd < (l == 0 ? 2 : 1); bhsd++) {
                cml_tensor *t[3];
                for (int i = 0; i < 3; i++) {
                    const int64_t *sh = i == 0 ? qs : ks;
                    if (bhsd) {
                        const int64_t hs[4] = {sh[0], sh[2], sh[1], sh[3]};
                        cml_tensor *base = ft_make(4, hs, FT_CONTIG, FT_UNIFORM(-2, 2), &rng);
                        t[i] = cml_permute(base, (const int[]){0, 2, 1, 3});
                        cml_tensor_release(base);
                    } else {
                        t[i] = ft_make(4, sh, (ft_layout_kind)l, FT_UNIFORM(-2, 2), &rng);
                    }
                }
                double *qv = ft_read(t[0]), *kv = ft_read(t[1]), *vv = ft_read(t[2]);
                double scale = 1.0 / sqrt((double)a.D);
                double *ref = attention_ref(qv, kv, vv, a.B, a.Sq, a.Skv, a.Hq, a.Hkv, a.D, a.causal, scale);
                cml_tensor *y = cml_attention(t[0], t[1], t[2], a.causal, (float)scale);
                char what[96];
                snprintf(what, sizeof what, "attention shape %d %s%s", s, ft_layout_name[l], bhsd ? " bhsd" : "");
                if (FT_CHECK_CLOSE(y, 4, qs, ref, 1e-5, what)) CHECK(cml_tensor_is_contiguous(y));
                free(qv), free(kv), free(vv), free(ref);
                FT_RELEASE(t[0], t[1], t[2], y);
            }
        }
    }
}

typedef struct attn_user {
    bool causal, bhsd; /* bhsd: inputs are (B, H, S, D) leaves, permuted inside */
} attn_user;

static cml_tensor *attention_fn(cml_tensor *const *in, int n, void *user) {
    const attn_user *u = user;
    if (!u->bhsd) return cml_attention(in[0], in[1], in[2], u->causal, 0.7f);
    cml_tensor *p[3];
    for (int i = 0; i < 3; i++) p[i] = cml_permute(in[i], (const int[]){0, 2, 1, 3});
    cml_tensor *y = cml_attention(p[0], p[1], p[2], u->causal, 0.7f);
    cml_tensor_release_all(p, 3);
    return y;
}

static void test_attention_grad(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 75);
    for (int s = 0; s < FT_LEN(at_shapes); s++) {
        at_shape a = at_shapes[s];
        for (int bhsd = 0; bhsd < 2; bhsd++) {
            const int64_t qs[4] = {a.B, bhsd ? a.Hq : a.Sq, bhsd ? a.Sq : a.Hq, a.D};
            const int64_t ks[4] = {a.B, bhsd ? a.Hkv : a.Skv, bhsd ? a.Skv : a.Hkv, a.D};
            cml_tensor *in[3] = {ft_leaf(4, qs, FT_UNIFORM(-1, 1), &rng), ft_leaf(4, ks, FT_UNIFORM(-1, 1), &rng),
                                 ft_leaf(4, ks, FT_UNIFORM(-1, 1), &rng)};
            attn_user u = {a.causal, bhsd};
            char what[64];
            snprintf(what, sizeof what, "attention shape %d%s wrt q, k, v", s, bhsd ? " bhsd" : "");
            tight_gradcheck(attention_fn, in, 3, &u, what);
            cml_tensor_release_all(in, 3);
        }
    }
    /* only k requires grad */
    const int64_t sh[4] = {1, 3, 2, 4};
    cml_tensor *in[3] = {ft_make(4, sh, FT_CONTIG, FT_UNIFORM(-1, 1), &rng), ft_leaf(4, sh, FT_UNIFORM(-1, 1), &rng),
                         ft_make(4, sh, FT_CONTIG, FT_UNIFORM(-1, 1), &rng)};
    attn_user u = {true, false};
    tight_gradcheck(attention_fn, in, 3, &u, "attention wrt k only");
    cml_tensor_release_all(in, 3);
}

static void test_op_errors(void) {
    const int64_t s4[4] = {1, 2, 2, 4}, s3[3] = {1, 2, 8}, k3[4] = {1, 2, 3, 4}, c5 = 5, w1 = 4;
    cml_tensor *q = cml_tensor_zeros(4, s4, CML_F32, CML_DEVICE_CPU), *x3 = cml_tensor_zeros(3, s3, CML_F32, CML_DEVICE_CPU);
    cml_tensor *kbad = cml_tensor_zeros(4, k3, CML_F32, CML_DEVICE_CPU);
    cml_tensor *qi = cml_tensor_zeros(4, s4, CML_I64, CML_DEVICE_CPU), *qh = cml_tensor_zeros(4, s4, CML_BF16, CML_DEVICE_CPU);
    cml_tensor *g5 = cml_tensor_ones(1, &c5, CML_F32, CML_DEVICE_CPU), *w = cml_tensor_zeros(1, &w1, CML_F32, CML_DEVICE_CPU);
    cml_tensor *idx = cml_tensor_full(1, &w1, 9, CML_I64, CML_DEVICE_CPU), *fidx = cml_tensor_zeros(1, &w1, CML_F32, CML_DEVICE_CPU);
    cml_tensor *w2 = cml_tensor_zeros(2, (const int64_t[]){4, 3}, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK((cml_attention(x3, q, q, true, 1.0f)) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_attention: expected q (B, S_q, H_q, D)");
    CHECK((cml_attention(q, kbad, kbad, true, 1.0f)) == NULL); /* H_q=2 not a multiple of H_kv=3 */
    CHECK_ERROR(CML_ERR_SHAPE, "H_q a multiple of H_kv");
    CHECK((cml_attention(q, q, qh, true, 1.0f)) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_attention: q, k and v must share a dtype");
    CHECK((cml_attention(qi, qi, qi, true, 1.0f)) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_attention");
    CHECK((cml_attention(q, q, q, true, NAN)) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_attention: scale=nan must be finite");
    cml_clear_error();
    CHECK((cml_attention(q, NULL, q, true, 1.0f)) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_attention");
    CHECK((cml_layer_norm(x3, g5, NULL, 1e-5f)) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_layer_norm: gamma has shape [5]; expected (8)");
    CHECK((cml_layer_norm(x3, NULL, NULL, -1.0f)) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_layer_norm: eps=-1");
    CHECK((cml_layer_norm(qi, NULL, NULL, 1e-5f)) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_layer_norm");
    CHECK((cml_embedding(w, idx)) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_embedding: weight [4] must be 2-d");
    CHECK((cml_embedding(w2, fidx)) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_embedding: indices have dtype f32; expected i64 or i32");
    CHECK((cml_embedding(w2, idx)) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "idx[0]=9 must be in [0, n_src=4)");
    FT_RELEASE(q, x3, kbad, qi, qh, g5, w, idx, fidx, w2);
}

/* ---- modules ----------------------------------------------------------------------------------- */

static cml_tensor *param_named(const cml_module *m, const char *name) {
    cml_param ps[16];
    int n = cml_module_parameters(m, ps, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(ps[i].name, name) == 0) return ps[i].tensor;
    return NULL;
}

static void test_embedding_layernorm_modules(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 76);
    cml_module *e = cml_embedding_create(1000, 16, &rng);
    CHECK_NOT_NULL(e);
    if (!e) return;
    cml_tensor *w = param_named(e, "weight");
    CHECK(cml_module_parameters(e, NULL, 0) == 1 && w && cml_tensor_size(w, 0) == 1000 && cml_tensor_size(w, 1) == 16);
    double *wv = ft_read(w), mean = 0, var = 0;
    for (int i = 0; i < 16000; i++) mean += wv[i] / 16000;
    for (int i = 0; i < 16000; i++) var += (wv[i] - mean) * (wv[i] - mean) / 16000;
    CHECK_NEAR(mean, 0.0, 0.03);
    CHECK_NEAR(var, 1.0, 0.05);
    const int64_t idx[3] = {999, 0, 7}, ish = 3, osh[2] = {3, 16};
    cml_tensor *ind = ft_from_i64(1, &ish, idx), *y = cml_module_forward(e, ind);
    double ref[48];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 16; c++) ref[r * 16 + c] = wv[idx[r] * 16 + c];
    FT_CHECK_EQUAL(y, 2, osh, ref, "Embedding forward");
    free(wv);
    FT_RELEASE(ind, y);

    cml_module *ln = cml_layernorm_create(16, 1e-5f);
    CHECK_NOT_NULL(ln);
    cml_tensor *lw = param_named(ln, "weight"), *lb = param_named(ln, "bias");
    CHECK(lw && lb && cml_module_parameters(ln, NULL, 0) == 2);
    if (lw && lb) {
        CHECK(cml_tensor_item_at(lw, (const int64_t[]){3}) == 1.0 && cml_tensor_item_at(lb, (const int64_t[]){3}) == 0.0);
        CHECK(cml_tensor_requires_grad(lw) && cml_tensor_requires_grad(lb));
    }
    /* Residual(LayerNorm): x + layer_norm(x), params "inner.weight", "inner.bias" */
    cml_module *res = cml_residual_create(ln);
    CHECK_NOT_NULL(res);
    CHECK(res && param_named(res, "inner.weight") == lw && param_named(res, "inner.bias") == lb);
    const int64_t xs[2] = {4, 16};
    cml_tensor *x = ft_make(2, xs, FT_CONTIG, FT_UNIFORM(-2, 2), &rng);
    cml_tensor *yr = res ? cml_module_forward(res, x) : NULL;
    double *xv = ft_read(x), *lr = layer_norm_ref(xv, NULL, NULL, 4, 16, 1e-5);
    for (int i = 0; i < 64; i++) lr[i] += xv[i];
    FT_CHECK_CLOSE(yr, 2, xs, lr, 1e-6, "Residual(LayerNorm) forward");
    free(xv), free(lr);
    FT_RELEASE(x, yr);
    cml_module_destroy(res);
    cml_module_destroy(e);
}

/* Manual GPT-2 attention in float64: x (B, T, C), c_attn (3C, C) + (3C), c_proj (C, C) + (C). */
static double *csa_ref(const double *x, const double *wa, const double *ba, const double *wp, const double *bp,
                       int64_t B, int64_t T, int64_t C, int64_t H) {
    int64_t D = C / H, rows = B * T;
    double *qkv = ft_malloc((size_t)(rows * 3 * C) * 8), *q = ft_malloc((size_t)(rows * C) * 8);
    double *k = ft_malloc((size_t)(rows * C) * 8), *v = ft_malloc((size_t)(rows * C) * 8);
    double *y = ft_malloc((size_t)(rows * C) * 8);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < 3 * C; o++) {
            double acc = ba[o];
            for (int64_t i = 0; i < C; i++) acc += x[r * C + i] * wa[o * C + i];
            qkv[r * 3 * C + o] = acc;
        }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < C; c++) {
            q[r * C + c] = qkv[r * 3 * C + c];
            k[r * C + c] = qkv[r * 3 * C + C + c];
            v[r * C + c] = qkv[r * 3 * C + 2 * C + c];
        }
    double *att = attention_ref(q, k, v, B, T, T, H, H, D, true, 1.0 / sqrt((double)D)); /* (B, T, H, D) = (B, T, C) */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < C; o++) {
            double acc = bp[o];
            for (int64_t i = 0; i < C; i++) acc += att[r * C + i] * wp[o * C + i];
            y[r * C + o] = acc;
        }
    free(qkv), free(q), free(k), free(v), free(att);
    return y;
}

static cml_tensor *module_fn(cml_tensor *const *in, int n, void *user) { return cml_module_forward(user, in[0]); }

static void test_causal_self_attention(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 77);
    const int64_t B = 2, T = 5, C = 12, H = 3, xs[3] = {B, T, C};
    cml_module *m = cml_causal_self_attention_create(C, H, 0.0f, &rng);
    CHECK_NOT_NULL(m);
    if (!m) return;
    CHECK(cml_module_parameters(m, NULL, 0) == 4);
    cml_tensor *wa = param_named(m, "c_attn.weight"), *ba = param_named(m, "c_attn.bias");
    cml_tensor *wp = param_named(m, "c_proj.weight"), *bp = param_named(m, "c_proj.bias");
    CHECK(wa && ba && wp && bp && cml_tensor_size(wa, 0) == 3 * C && cml_tensor_size(wa, 1) == C &&
          cml_tensor_size(wp, 0) == C);
    if (!(wa && ba && wp && bp)) {
        cml_module_destroy(m);
        return;
    }
    cml_tensor *x = ft_make(3, xs, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    cml_tensor *y = cml_module_forward(m, x);
    double *xv = ft_read(x), *wav = ft_read(wa), *bav = ft_read(ba), *wpv = ft_read(wp), *bpv = ft_read(bp);
    double *ref = csa_ref(xv, wav, bav, wpv, bpv, B, T, C, H);
    FT_CHECK_CLOSE(y, 3, xs, ref, 1e-5, "CausalSelfAttention vs manual composition");

    /* causality: changing the last token changes nothing before it */
    float *xh = ft_malloc((size_t)(B * T * C) * 4);
    CHECK_OK(cml_tensor_to_host(x, xh, (size_t)(B * T * C) * 4));
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) xh[(b * T + T - 1) * C + c] += 0.5f;
    cml_tensor *x2 = cml_tensor_from_host(xh, 3, xs, CML_F32, CML_DEVICE_CPU), *y2 = cml_module_forward(m, x2);
    double *yv = y ? ft_read(y) : NULL, *y2v = y2 ? ft_read(y2) : NULL;
    if (yv && y2v) {
        int64_t same = 0, changed = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t i = (b * T + t) * C + c;
                    if (t < T - 1) same += yv[i] == y2v[i];
                    else changed += yv[i] != y2v[i];
                }
        CHECK_MSG(same == B * (T - 1) * C, "%lld of %lld earlier outputs unchanged", (long long)same,
                  (long long)(B * (T - 1) * C));
        CHECK(changed > 0);
    }

    /* gradients: wrt x by finite differences; every parameter gets a gradient */
    FT_GRADCHECK(module_fn, &x, 1, m, "CausalSelfAttention wrt x");
    cml_tensor *s = y ? cml_sum(y, NULL, 0, false) : NULL;
    CHECK_OK(cml_backward(s, NULL));
    CHECK(cml_tensor_grad(wa) && cml_tensor_grad(ba) && cml_tensor_grad(wp) && cml_tensor_grad(bp));
    free(xv), free(wav), free(bav), free(wpv), free(bpv), free(ref), free(xh), free(yv), free(y2v);
    FT_RELEASE(x, y, x2, y2, s);
    cml_module_destroy(m);
}

/* Dropout on the output: seeded, active only in training mode. */
static void test_attention_dropout(void) {
    const int64_t xs[3] = {2, 4, 8};
    cml_rng r1, r2, r3, rx;
    cml_rng_init(&r1, 5);
    cml_rng_init(&r2, 5);
    cml_rng_init(&r3, 5);
    cml_rng_init(&rx, 6);
    cml_module *a = cml_causal_self_attention_create(8, 2, 0.5f, &r1), *b = cml_causal_self_attention_create(8, 2, 0.5f, &r2);
    cml_module *plain = cml_causal_self_attention_create(8, 2, 0.0f, &r3); /* same weights, no dropout */
    cml_tensor *x = ft_make(3, xs, FT_CONTIG, FT_UNIFORM(-1, 1), &rx);
    cml_tensor *ya = cml_module_forward(a, x), *yb = cml_module_forward(b, x), *yp = cml_module_forward(plain, x);
    double *va = ft_read(ya), *vb = ft_read(yb), *vp = ft_read(yp);
    int zeros = 0, scaled = 0;
    for (int i = 0; i < 64; i++) {
        CHECK(va[i] == vb[i]);
        zeros += va[i] == 0;
        scaled += fabs(va[i] - 2 * vp[i]) <= 1e-6 * (1 + fabs(vp[i]));
    }
    CHECK_MSG(zeros > 10 && zeros < 54 && zeros + scaled == 64, "zeros %d scaled %d", zeros, scaled);
    cml_module_train(a, false);
    cml_tensor *ye = cml_module_forward(a, x);
    FT_CHECK_CLOSE(ye, 3, xs, vp, 1e-7, "eval mode: no dropout");
    free(va), free(vb), free(vp);
    FT_RELEASE(x, ya, yb, yp, ye);
    cml_module_destroy(a);
    cml_module_destroy(b);
    cml_module_destroy(plain);
}

static void test_module_errors(void) {
    cml_rng rng;
    cml_rng_init(&rng, 1);
    cml_clear_error();
    CHECK(cml_causal_self_attention_create(10, 3, 0.0f, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_causal_self_attention_create: dim=10 must be a positive multiple of n_head=3");
    CHECK(cml_causal_self_attention_create(8, 2, 1.0f, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "dropout=1 must be in [0, 1)");
    CHECK(cml_causal_self_attention_create(8, 2, 0.0f, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "rng must not be NULL");
    CHECK(cml_embedding_create(0, 4, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_embedding_create: num=0 must be >= 1");
    CHECK(cml_layernorm_create(0, 1e-5f) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_layernorm_create: dim=0 must be >= 1");
    CHECK(cml_residual_create(NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_residual_create: inner must not be NULL");
    cml_module *m = cml_causal_self_attention_create(8, 2, 0.0f, &rng);
    const int64_t bad[3] = {1, 3, 6};
    cml_tensor *x = cml_tensor_zeros(3, bad, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_module_forward(m, x) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "must be (B, T, C) with C=8");
    cml_tensor_release(x);
    cml_module_destroy(m);
}

int main(void) {
    RUN(test_layer_norm_forward);
    RUN(test_layer_norm_grad);
    RUN(test_embedding_forward);
    RUN(test_embedding_grad);
    RUN(test_attention_forward);
    RUN(test_attention_grad);
    RUN(test_op_errors);
    RUN(test_embedding_layernorm_modules);
    RUN(test_causal_self_attention);
    RUN(test_attention_dropout);
    RUN(test_module_errors);
    return th_finish();
}
