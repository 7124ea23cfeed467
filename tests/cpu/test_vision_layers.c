/* Vision ops and modules: conv2d forward against a float64 direct
 * convolution (NCHW, and NHWC through permutations, non-contiguous inputs),
 * gradient checks of conv2d (x, w, bias), max/avg pooling and batch_norm2d
 * (training: x, gamma, beta; eval: the affine map), module parameters and
 * buffers, BatchNorm running statistics and eval mode, error paths. */
#include "framework_test_util.h"

static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};

static cml_tensor *permuted_contiguous(const cml_tensor *t, const int *perm) {
    cml_tensor *p = cml_permute(t, perm);
    cml_tensor *c = cml_contiguous(p);
    cml_tensor_release(p);
    return c;
}

/* Direct NCHW convolution of x (N,C,H,W), w (K,C/g,R,S), bias (K) or NULL, in float64. */
static double *conv_reference(const cml_tensor *x, const cml_tensor *w, const cml_tensor *bias, cml_conv2d_params p,
                              int64_t *P_out, int64_t *Q_out) {
    const int64_t *xs = cml_tensor_shape(x), *ws = cml_tensor_shape(w);
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], K = ws[0], Cg = ws[1], R = ws[2], S = ws[3];
    int64_t sh = p.stride_h ? p.stride_h : 1, sw = p.stride_w ? p.stride_w : 1, dh = p.dil_h ? p.dil_h : 1;
    int64_t dw = p.dil_w ? p.dil_w : 1, G = p.groups ? p.groups : 1;
    int64_t P = (H + 2 * p.pad_h - dh * (R - 1) - 1) / sh + 1, Q = (W + 2 * p.pad_w - dw * (S - 1) - 1) / sw + 1;
    double *xv = ft_read(x), *wv = ft_read(w), *bv = bias ? ft_read(bias) : NULL;
    double *y = ft_malloc(sizeof(double) * (size_t)(N * K * P * Q));
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < P; oh++)
                for (int64_t ow = 0; ow < Q; ow++) {
                    double acc = bv ? bv[k] : 0.0;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t r = 0; r < R; r++)
                            for (int64_t s = 0; s < S; s++) {
                                int64_t ih = oh * sh - p.pad_h + r * dh, iw = ow * sw - p.pad_w + s * dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int64_t ci = (k / (K / G)) * Cg + c;
                                acc += xv[((n * C + ci) * H + ih) * W + iw] * wv[((k * Cg + c) * R + r) * S + s];
                            }
                    y[((n * K + k) * P + oh) * Q + ow] = acc;
                }
    free(xv), free(wv), free(bv);
    *P_out = P;
    *Q_out = Q;
    (void)C;
    return y;
}

typedef struct conv_op_case {
    int64_t N, C, H, W, K, R, S;
    cml_conv2d_params p;
} conv_op_case;

static const conv_op_case conv_op_cases[] = {
    {2, 3, 7, 7, 4, 3, 3, {0, 0, 1, 1, 0, 0, 0, false}},
    {1, 4, 9, 13, 6, 3, 3, {2, 2, 1, 1, 0, 0, 2, false}},
    {2, 4, 7, 7, 4, 3, 3, {1, 1, 2, 2, 2, 2, 4, false}}, /* depthwise, dilation 2 */
    {2, 6, 5, 5, 3, 1, 1, {0, 0, 0, 0, 0, 0, 0, false}},
    {1, 2, 6, 5, 3, 2, 3, {2, 1, 0, 1, 1, 2, 1, false}},
};

static void test_conv2d_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 80);
    for (int i = 0; i < FT_LEN(conv_op_cases); i++) {
        const conv_op_case *c = &conv_op_cases[i];
        int64_t G = c->p.groups ? c->p.groups : 1;
        int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->K, c->C / G, c->R, c->S};
        for (int l = 0; l < FT_LAYOUT_COUNT; l++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                cml_tensor *x = ft_make(4, xs, (ft_layout_kind)l, FT_UNIFORM(-1, 1), &rng);
                cml_tensor *w = ft_make(4, ws, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
                cml_tensor *b = with_bias ? ft_make(1, &c->K, FT_CONTIG, FT_UNIFORM(-1, 1), &rng) : NULL;
                int64_t P, Q;
                double *ref = conv_reference(x, w, b, c->p, &P, &Q);
                int64_t ys[4] = {c->N, c->K, P, Q};
                char what[96];
                snprintf(what, sizeof what, "conv2d case %d %s bias=%d NCHW", i, ft_layout_name[l], with_bias);
                cml_tensor *y = cml_conv2d(x, w, b, c->p);
                FT_CHECK_CLOSE(y, 4, ys, ref, 1e-5, what);
                /* NHWC: the same convolution on permuted tensors */
                cml_tensor *xn = permuted_contiguous(x, to_nhwc), *wn = permuted_contiguous(w, to_nhwc);
                cml_conv2d_params pn = c->p;
                pn.channels_last = true;
                cml_tensor *yn = cml_conv2d(xn, wn, b, pn);
                cml_tensor *yb = yn ? cml_permute(yn, to_nchw) : NULL;
                snprintf(what, sizeof what, "conv2d case %d %s bias=%d NHWC", i, ft_layout_name[l], with_bias);
                FT_CHECK_CLOSE(yb, 4, ys, ref, 1e-5, what);
                free(ref);
                FT_RELEASE(x, w, b, y, xn, wn, yn, yb);
            }
    }
}

/* ---- gradient checks ------------------------------------------------------------- */

static cml_tensor *conv_gc_fn(cml_tensor *const *in, int n, void *user) {
    return cml_conv2d(in[0], in[1], n > 2 ? in[2] : NULL, *(const cml_conv2d_params *)user);
}

static void test_conv2d_grad(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 81);
    for (int i = 0; i < FT_LEN(conv_op_cases); i++) {
        const conv_op_case *c = &conv_op_cases[i];
        for (int cl = 0; cl < 2; cl++) {
            cml_conv2d_params p = c->p;
            p.channels_last = cl;
            int64_t G = p.groups ? p.groups : 1;
            int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->K, c->C / G, c->R, c->S};
            if (cl) {
                int64_t xn[4] = {c->N, c->H, c->W, c->C}, wn[4] = {c->K, c->R, c->S, c->C / G};
                memcpy(xs, xn, sizeof xs);
                memcpy(ws, wn, sizeof ws);
            }
            cml_tensor *in[3] = {ft_leaf(4, xs, FT_UNIFORM(-1, 1), &rng), ft_leaf(4, ws, FT_UNIFORM(-1, 1), &rng),
                                 ft_leaf(1, &c->K, FT_UNIFORM(-1, 1), &rng)};
            char what[64];
            snprintf(what, sizeof what, "conv2d case %d %s", i, cl ? "NHWC" : "NCHW");
            FT_GRADCHECK(conv_gc_fn, in, 3, &p, what);
            /* without bias, and with x constant (only dw wanted) */
            cml_tensor_set_requires_grad(in[0], false);
            snprintf(what, sizeof what, "conv2d case %d %s, no bias, x constant", i, cl ? "NHWC" : "NCHW");
            FT_GRADCHECK(conv_gc_fn, in, 2, &p, what);
            FT_RELEASE(in[0], in[1], in[2]);
        }
    }
    /* only the bias requires grad */
    cml_conv2d_params p = {0};
    int64_t xs[4] = {2, 2, 4, 4}, ws[4] = {3, 2, 3, 3}, K = 3;
    cml_tensor *in[3] = {ft_make(4, xs, FT_CONTIG, FT_UNIFORM(-1, 1), &rng), ft_make(4, ws, FT_CONTIG, FT_UNIFORM(-1, 1), &rng),
                         ft_leaf(1, &K, FT_UNIFORM(-1, 1), &rng)};
    FT_GRADCHECK(conv_gc_fn, in, 3, &p, "conv2d, only bias");
    FT_RELEASE(in[0], in[1], in[2]);
}

typedef struct pool_gc {
    int64_t R, S, sh, sw, ph, pw;
    bool cl, max;
} pool_gc;

static cml_tensor *pool_gc_fn(cml_tensor *const *in, int n, void *user) {
    const pool_gc *u = user;
    (void)n;
    return u->max ? cml_max_pool2d(in[0], u->R, u->S, u->sh, u->sw, u->ph, u->pw, u->cl)
                  : cml_avg_pool2d(in[0], u->R, u->S, u->sh, u->sw, u->ph, u->pw, u->cl);
}

static void test_pool_grad(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 82);
    static const pool_gc cases[] = {
        {2, 2, 0, 0, 0, 0, false, false}, /* stride 0 = window */
        {3, 3, 2, 2, 1, 1, false, false}, /* overlapping, padded */
        {3, 2, 1, 2, 1, 0, false, false},
        {2, 2, 1, 1, 1, 1, false, false},
    };
    for (int i = 0; i < FT_LEN(cases); i++)
        for (int cl = 0; cl < 2; cl++)
            for (int mx = 0; mx < 2; mx++) {
                pool_gc u = cases[i];
                u.cl = cl;
                u.max = mx;
                int64_t shape[4] = {2, 3, 7, 6};
                if (cl) shape[1] = 7, shape[2] = 6, shape[3] = 3;
                /* distinct values 0.01 apart: a +-1e-3 step never changes which element is the maximum */
                cml_tensor *x = mx ? ft_make_distinct(4, shape, 0.01, &rng) : ft_make(4, shape, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
                cml_tensor_set_requires_grad(x, true);
                char what[64];
                snprintf(what, sizeof what, "%s_pool2d case %d %s", mx ? "max" : "avg", i, cl ? "NHWC" : "NCHW");
                FT_GRADCHECK(pool_gc_fn, &x, 1, &u, what);
                cml_tensor_release(x);
            }
}

static void test_pool_forward(void) {
    /* 4x4 -> 2x2 by hand */
    float v[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    int64_t s[4] = {1, 1, 4, 4}, o[4] = {1, 1, 2, 2};
    cml_tensor *x = ft_from(4, s, v);
    cml_tensor *mx = cml_max_pool2d(x, 2, 2, 0, 0, 0, 0, false), *av = cml_avg_pool2d(x, 2, 2, 2, 2, 0, 0, false);
    FT_CHECK_EQUAL(mx, 4, o, ((const double[]){6, 8, 14, 16}), "max_pool2d 2x2");
    FT_CHECK_CLOSE(av, 4, o, ((const double[]){3.5, 5.5, 11.5, 13.5}), 1e-7, "avg_pool2d 2x2");
    /* padding counts in the average (count_include_pad) */
    cml_tensor *ap = cml_avg_pool2d(x, 3, 3, 2, 2, 1, 1, false);
    FT_CHECK_CLOSE(ap, 4, o, ((const double[]){(1 + 2 + 5 + 6) / 9.0, (2 + 3 + 4 + 6 + 7 + 8) / 9.0,
                                               (5 + 6 + 9 + 10 + 13 + 14) / 9.0,
                                               (6 + 7 + 8 + 10 + 11 + 12 + 14 + 15 + 16) / 9.0}),
                   1e-7, "avg_pool2d 3x3 pad 1");
    FT_RELEASE(x, mx, av, ap);
}

/* ---- batch norm ----------------------------------------------------------------------- */

typedef struct bn_gc {
    bool cl, training;
    cml_tensor *rm, *rv;
} bn_gc;

static cml_tensor *bn_gc_fn(cml_tensor *const *in, int n, void *user) {
    const bn_gc *u = user;
    return cml_batch_norm2d(in[0], n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, u->training ? NULL : u->rm,
                            u->training ? NULL : u->rv, u->training, 0.1f, 1e-5f, u->cl);
}

static void test_batchnorm_grad(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 83);
    int64_t C = 3;
    for (int cl = 0; cl < 2; cl++)
        for (int training = 0; training < 2; training++) {
            int64_t shape[4] = {3, C, 3, 2};
            if (cl) shape[1] = 3, shape[2] = 2, shape[3] = C;
            bn_gc u = {cl, training, ft_make(1, &C, FT_CONTIG, FT_UNIFORM(-0.5, 0.5), &rng),
                       ft_make(1, &C, FT_CONTIG, FT_UNIFORM(0.5, 2), &rng)};
            cml_tensor *in[3] = {ft_leaf(4, shape, FT_UNIFORM(-2, 2), &rng), ft_leaf(1, &C, FT_UNIFORM(0.5, 1.5), &rng),
                                 ft_leaf(1, &C, FT_UNIFORM(-1, 1), &rng)};
            char what[64];
            snprintf(what, sizeof what, "batch_norm2d %s %s", training ? "train" : "eval", cl ? "NHWC" : "NCHW");
            FT_GRADCHECK(bn_gc_fn, in, 3, &u, what);
            snprintf(what, sizeof what, "batch_norm2d %s %s, no gamma/beta", training ? "train" : "eval", cl ? "NHWC" : "NCHW");
            FT_GRADCHECK(bn_gc_fn, in, 1, &u, what);
            cml_tensor_set_requires_grad(in[0], false); /* gamma and beta only */
            snprintf(what, sizeof what, "batch_norm2d %s %s, x constant", training ? "train" : "eval", cl ? "NHWC" : "NCHW");
            FT_GRADCHECK(bn_gc_fn, in, 3, &u, what);
            FT_RELEASE(in[0], in[1], in[2], u.rm, u.rv);
        }
}

/* ---- modules --------------------------------------------------------------------------- */

static cml_tensor *named(const cml_module *m, const char *name, bool buffer) {
    cml_param ps[32];
    int n = buffer ? cml_module_buffers(m, ps, 32) : cml_module_parameters(m, ps, 32);
    for (int i = 0; i < n && i < 32; i++)
        if (strcmp(ps[i].name, name) == 0) return ps[i].tensor;
    return NULL;
}

static void test_conv_module(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 84);
    for (int cl = 0; cl < 2; cl++) {
        cml_conv2d_params p = {1, 1, 1, 1, 1, 1, 2, (bool)cl};
        cml_module *conv = cml_conv2d_create(4, 6, 3, 5, p, true, &rng);
        CHECK_NOT_NULL(conv);
        if (!conv) return;
        CHECK(strcmp(conv->ops->type, "Conv2d") == 0);
        CHECK(cml_module_parameters(conv, NULL, 0) == 2 && cml_module_buffers(conv, NULL, 0) == 0);
        cml_tensor *w = named(conv, "weight", false), *b = named(conv, "bias", false);
        int64_t ws[4] = {6, 2, 3, 5};
        if (cl) ws[1] = 3, ws[2] = 5, ws[3] = 2;
        CHECK(w && ft_same_shape(w, 4, ws) && cml_tensor_requires_grad(w));
        CHECK(b && cml_tensor_ndim(b) == 1 && cml_tensor_size(b, 0) == 6 && cml_tensor_requires_grad(b));
        CHECK(cml_module_num_elements(conv) == 6 * 2 * 15 + 6);
        /* PyTorch's default: uniform in +-1/sqrt(fan_in), fan_in = C/groups * R * S = 30 */
        double bound = 1 / sqrt(30.0), *wv = ft_read(w), *bv = ft_read(b), wmax = 0, bmax = 0;
        for (int i = 0; i < 180; i++) wmax = fmax(wmax, fabs(wv[i]));
        for (int i = 0; i < 6; i++) bmax = fmax(bmax, fabs(bv[i]));
        CHECK(wmax <= bound && wmax > 0.8 * bound && bmax <= bound);
        free(wv), free(bv);
        int64_t xs[4] = {2, 4, 9, 8};
        if (cl) xs[1] = 9, xs[2] = 8, xs[3] = 4;
        cml_tensor *x = ft_make(4, xs, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
        cml_tensor *y = cml_module_forward(conv, x), *y2 = cml_conv2d(x, w, b, p);
        double *yv = y2 ? ft_read(y2) : NULL;
        if (yv) FT_CHECK_EQUAL(y, 4, cml_tensor_shape(y2), yv, "Conv2d forward = cml_conv2d");
        free(yv);
        int64_t bad_shape[4] = {2, 3, 9, 8};
        if (cl) bad_shape[1] = 9, bad_shape[2] = 8, bad_shape[3] = 3;
        cml_tensor *bad = ft_make(4, bad_shape, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
        cml_clear_error();
        CHECK(cml_module_forward(conv, bad) == NULL);
        CHECK_ERROR(CML_ERR_SHAPE, "cml_conv2d_forward: input");
        CHECK_ERROR(CML_ERR_SHAPE, "with C=4 channels");
        FT_RELEASE(x, y, y2, bad);
        cml_module_destroy(conv);
    }
    cml_module *nb = cml_conv2d_create(3, 8, 3, 3, (cml_conv2d_params){0}, false, &rng);
    CHECK(nb && cml_module_parameters(nb, NULL, 0) == 1);
    cml_module_destroy(nb);
    cml_clear_error();
    CHECK(cml_conv2d_create(3, 8, 3, 3, (cml_conv2d_params){.groups = 2}, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "must be multiples of groups=2");
    CHECK(cml_conv2d_create(3, 0, 3, 3, (cml_conv2d_params){0}, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "out_channels=0 must be >= 1");
}

static void test_pool_modules(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 85);
    int64_t s[4] = {2, 3, 8, 6};
    cml_tensor *x = ft_make(4, s, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    cml_module *mp = cml_maxpool2d_create(2, 0, 0, false), *ap = cml_avgpool2d_create(3, 2, 1, false);
    cml_module *gap = cml_global_avgpool_create(false), *gapn = cml_global_avgpool_create(true);
    CHECK(mp && ap && gap && gapn);
    CHECK(strcmp(mp->ops->type, "MaxPool2d") == 0 && strcmp(ap->ops->type, "AvgPool2d") == 0 &&
          strcmp(gap->ops->type, "GlobalAvgPool") == 0);
    cml_tensor *y1 = cml_module_forward(mp, x), *r1 = cml_max_pool2d(x, 2, 2, 2, 2, 0, 0, false);
    cml_tensor *y2 = cml_module_forward(ap, x), *r2 = cml_avg_pool2d(x, 3, 3, 2, 2, 1, 1, false);
    double *v1 = ft_read(r1), *v2 = ft_read(r2);
    FT_CHECK_EQUAL(y1, 4, cml_tensor_shape(r1), v1, "MaxPool2d module");
    FT_CHECK_EQUAL(y2, 4, cml_tensor_shape(r2), v2, "AvgPool2d module");
    free(v1), free(v2);
    /* global average pool: (N, C) means, both layouts */
    double *xv = ft_read(x), ref[6] = {0};
    for (int64_t i = 0; i < 2 * 3 * 48; i++) ref[i / 48] += xv[i] / 48.0;
    free(xv);
    cml_tensor *g = cml_module_forward(gap, x);
    int64_t gs[2] = {2, 3};
    FT_CHECK_CLOSE(g, 2, gs, ref, 1e-6, "GlobalAvgPool NCHW");
    cml_tensor *xn = permuted_contiguous(x, to_nhwc), *gn = cml_module_forward(gapn, xn);
    FT_CHECK_CLOSE(gn, 2, gs, ref, 1e-6, "GlobalAvgPool NHWC");
    cml_clear_error();
    CHECK(cml_maxpool2d_create(2, 0, 2, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "pad=2 in [0, kernel/2]");
    int64_t s3[3] = {3, 8, 6};
    cml_tensor *x3 = ft_make(3, s3, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    CHECK(cml_module_forward(gap, x3) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_global_avgpool_forward: input [3, 8, 6] must be 4-d (N, C, H, W)");
    FT_RELEASE(x, y1, r1, y2, r2, g, xn, gn, x3);
    cml_module_destroy(mp), cml_module_destroy(ap), cml_module_destroy(gap), cml_module_destroy(gapn);
}

static void test_batchnorm_module(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 86);
    for (int cl = 0; cl < 2; cl++) {
        cml_module *bn = cml_batchnorm2d_create(3, 0.1f, 1e-5f, cl);
        CHECK_NOT_NULL(bn);
        if (!bn) return;
        CHECK(strcmp(bn->ops->type, "BatchNorm2d") == 0 && bn->training);
        cml_param ps[4];
        CHECK(cml_module_parameters(bn, ps, 4) == 2 && strcmp(ps[0].name, "weight") == 0 &&
              strcmp(ps[1].name, "bias") == 0);
        CHECK(cml_module_buffers(bn, ps, 4) == 2 && strcmp(ps[0].name, "running_mean") == 0 &&
              strcmp(ps[1].name, "running_var") == 0);
        cml_tensor *gamma = named(bn, "weight", false), *beta = named(bn, "bias", false);
        cml_tensor *rm = named(bn, "running_mean", true), *rv = named(bn, "running_var", true);
        CHECK(cml_tensor_requires_grad(gamma) && cml_tensor_requires_grad(beta));
        CHECK(!cml_tensor_requires_grad(rm) && !cml_tensor_requires_grad(rv));
        FT_CHECK_EQUAL(gamma, 1, ((const int64_t[]){3}), ((const double[]){1, 1, 1}), "BatchNorm2d weight init");
        FT_CHECK_EQUAL(beta, 1, ((const int64_t[]){3}), ((const double[]){0, 0, 0}), "BatchNorm2d bias init");
        FT_CHECK_EQUAL(rm, 1, ((const int64_t[]){3}), ((const double[]){0, 0, 0}), "running_mean init");
        FT_CHECK_EQUAL(rv, 1, ((const int64_t[]){3}), ((const double[]){1, 1, 1}), "running_var init");

        int64_t s[4] = {4, 3, 5, 2};
        cml_tensor *xc = ft_make(4, s, FT_CONTIG, FT_UNIFORM(-1, 3), &rng);
        cml_tensor *x = cl ? permuted_contiguous(xc, to_nhwc) : cml_tensor_retain(xc);
        double *v = ft_read(xc), mean[3] = {0}, var[3] = {0};
        int64_t M = 4 * 10;
        for (int64_t i = 0; i < 120; i++) mean[(i / 10) % 3] += v[i] / (double)M;
        for (int64_t i = 0; i < 120; i++) var[(i / 10) % 3] += (v[i] - mean[(i / 10) % 3]) * (v[i] - mean[(i / 10) % 3]);
        /* two training steps: r = 0.9 r + 0.1 batch, var unbiased */
        double rm_ref[3], rv_ref[3], y_ref[120];
        for (int c = 0; c < 3; c++) {
            rm_ref[c] = 0.19 * mean[c];
            rv_ref[c] = 0.81 + 0.19 * var[c] / (double)(M - 1);
        }
        for (int64_t i = 0; i < 120; i++) {
            int c = (int)((i / 10) % 3);
            y_ref[i] = (v[i] - mean[c]) / sqrt(var[c] / (double)M + 1e-5);
        }
        cml_tensor *y = NULL;
        for (int step = 0; step < 2; step++) {
            cml_tensor_release(y);
            y = cml_module_forward(bn, x);
        }
        CHECK(cml_tensor_has_grad_fn(y));
        cml_tensor *yc = cl && y ? permuted_contiguous(y, to_nchw) : cml_tensor_retain(y);
        FT_CHECK_CLOSE(yc, 4, s, y_ref, 1e-5, cl ? "BatchNorm2d train NHWC" : "BatchNorm2d train NCHW");
        FT_CHECK_CLOSE(rm, 1, ((const int64_t[]){3}), rm_ref, 1e-6, "running_mean after two steps");
        FT_CHECK_CLOSE(rv, 1, ((const int64_t[]){3}), rv_ref, 1e-6, "running_var after two steps");
        /* eval: uses (and keeps) the running statistics; gradients still reach x, gamma and beta */
        cml_module_train(bn, false);
        cml_tensor *ye = cml_module_forward(bn, x);
        double ye_ref[120];
        for (int64_t i = 0; i < 120; i++) {
            int c = (int)((i / 10) % 3);
            ye_ref[i] = (v[i] - rm_ref[c]) / sqrt(rv_ref[c] + 1e-5);
        }
        cml_tensor *yec = cl && ye ? permuted_contiguous(ye, to_nchw) : cml_tensor_retain(ye);
        FT_CHECK_CLOSE(yec, 4, s, ye_ref, 1e-5, cl ? "BatchNorm2d eval NHWC" : "BatchNorm2d eval NCHW");
        FT_CHECK_CLOSE(rm, 1, ((const int64_t[]){3}), rm_ref, 1e-6, "running_mean unchanged in eval");
        cml_tensor *loss = ye ? cml_sum(ye, NULL, 0, false) : NULL;
        CHECK_OK(cml_backward(loss, NULL));
        double dbeta_ref[3] = {40, 40, 40};
        FT_CHECK_CLOSE(cml_tensor_grad(beta), 1, ((const int64_t[]){3}), dbeta_ref, 1e-6, "eval dbeta");
        CHECK(cml_tensor_grad(gamma) != NULL);
        free(v);
        FT_RELEASE(xc, x, y, yc, ye, yec, loss);
        cml_module_destroy(bn);
    }
    cml_clear_error();
    CHECK(cml_batchnorm2d_create(0, 0.1f, 1e-5f, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "channels=0 must be >= 1");
}

/* A small CNN as a Sequential: dotted names reach the BatchNorm buffers; one SGD-free step trains. */
static void test_sequential_cnn(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 87);
    cml_module *mods[] = {cml_conv2d_create(3, 4, 3, 3, (cml_conv2d_params){.pad_h = 1, .pad_w = 1}, false, &rng),
                          cml_batchnorm2d_create(4, 0.1f, 1e-5f, false), cml_relu_create(),
                          cml_maxpool2d_create(2, 0, 0, false), cml_global_avgpool_create(false),
                          cml_linear_create(4, 2, true, &rng)};
    cml_module *net = cml_sequential_create(mods, 6);
    CHECK_NOT_NULL(net);
    if (!net) return;
    cml_param ps[16];
    int n = cml_module_parameters(net, ps, 16);
    CHECK(n == 5 && strcmp(ps[0].name, "0.weight") == 0 && strcmp(ps[1].name, "1.weight") == 0 &&
          strcmp(ps[2].name, "1.bias") == 0 && strcmp(ps[3].name, "5.weight") == 0);
    CHECK(cml_module_buffers(net, ps, 16) == 2 && strcmp(ps[0].name, "1.running_mean") == 0 &&
          strcmp(ps[1].name, "1.running_var") == 0);
    int64_t s[4] = {3, 3, 8, 8};
    cml_tensor *x = ft_make(4, s, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    cml_tensor *y = cml_module_forward(net, x);
    CHECK(y && cml_tensor_ndim(y) == 2 && cml_tensor_size(y, 0) == 3 && cml_tensor_size(y, 1) == 2);
    cml_tensor *loss = y ? cml_sum(y, NULL, 0, false) : NULL;
    CHECK_OK(cml_backward(loss, NULL));
    n = cml_module_parameters(net, ps, 16);
    for (int i = 0; i < n; i++) CHECK_MSG(cml_tensor_grad(ps[i].tensor) != NULL, "no gradient for %s", ps[i].name);
    FT_RELEASE(x, y, loss);
    cml_module_destroy(net);
}

static void test_errors(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 88);
    int64_t xs[4] = {2, 4, 6, 6}, ws[4] = {4, 2, 3, 3}, w3[3] = {3, 4, 3}, K = 5;
    cml_tensor *x = ft_make(4, xs, FT_CONTIG, FT_UNIFORM(-1, 1), &rng), *w = ft_make(4, ws, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    cml_tensor *wbad = ft_make(3, w3, FT_CONTIG, FT_UNIFORM(-1, 1), &rng), *b = ft_make(1, &K, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
    cml_conv2d_params p = {0};
    cml_clear_error();
    CHECK(cml_conv2d(x, w, NULL, p) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_conv2d: w [4, 2, 3, 3] has 2 input channels per group, but x [2, 4, 6, 6] has C=4");
    p.groups = 2;
    cml_tensor *ok = cml_conv2d(x, w, NULL, p);
    CHECK_NOT_NULL(ok);
    cml_tensor_release(ok);
    cml_clear_error();
    CHECK(cml_conv2d(x, w, NULL, (cml_conv2d_params){.groups = 2, .pad_h = -1}) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_conv2d: pad_h=-1 must be >= 0");
    CHECK(cml_conv2d(x, wbad, NULL, p) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_conv2d: w must be 4-d (K, C/groups, R, S)");
    CHECK(cml_conv2d(x, w, b, p) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_conv2d: bias must be (K) with K=4 output channels, got [5]");
    CHECK(cml_conv2d(x, w, NULL, (cml_conv2d_params){.groups = 2, .dil_h = 4}) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_conv2d: cml_conv2d_output_size: the dilated kernel height");
    cml_clear_error();
    CHECK(cml_conv2d(NULL, w, NULL, p) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_conv2d: input 0 is NULL");
    cml_tensor *xi = cml_tensor_zeros(4, xs, CML_I32, CML_DEVICE_CPU);
    CHECK(cml_conv2d(xi, w, NULL, p) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_conv2d");
    CHECK(cml_max_pool2d(x, 2, 2, 0, 0, 2, 0, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_max_pool2d: cml_pool2d_output_size: pad_h=2 must be <= R/2=1");
    CHECK(cml_avg_pool2d(wbad, 2, 2, 0, 0, 0, 0, false) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_avg_pool2d: x must be 4-d (N, C, H, W), got [3, 4, 3]");
    CHECK(cml_avg_pool2d(x, 2, 2, -1, 0, 0, 0, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "stride_h=-1");
    int64_t C = 4, one[4] = {1, 4, 1, 1};
    cml_tensor *g = cml_tensor_ones(1, &C, CML_F32, CML_DEVICE_CPU), *x1 = cml_tensor_ones(4, one, CML_F32, CML_DEVICE_CPU);
    CHECK(cml_batch_norm2d(x, b, NULL, NULL, NULL, true, 0.1f, 1e-5f, false) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_batch_norm2d: gamma must be (C) with C=4 channels, got [5]");
    CHECK(cml_batch_norm2d(x, g, NULL, NULL, NULL, false, 0.1f, 1e-5f, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "eval mode (training=false) needs running_mean and running_var");
    CHECK(cml_batch_norm2d(x1, g, NULL, NULL, NULL, true, 0.1f, 1e-5f, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "training needs more than one value per channel");
    CHECK(cml_batch_norm2d(x, g, NULL, g, NULL, true, 0.1f, 1e-5f, false) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "running_mean and running_var must both be given");
    FT_RELEASE(x, w, wbad, b, xi, g, x1);
}

int main(void) {
    RUN(test_conv2d_forward);
    RUN(test_conv2d_grad);
    RUN(test_pool_forward);
    RUN(test_pool_grad);
    RUN(test_batchnorm_grad);
    RUN(test_conv_module);
    RUN(test_pool_modules);
    RUN(test_batchnorm_module);
    RUN(test_sequential_cnn);
    RUN(test_errors);
    return th_finish();
}
