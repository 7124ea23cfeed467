/* cml_matmul (torch.matmul semantics): 1-d promotion, broadcast batch dims,
 * transposed and sliced operands, against a float64 reference (relative
 * error < 1e-5), gradients by finite differences, and the error paths; and
 * cml_linear (x W^T + b, bias fused into the GEMM, dW and db from one GEMM):
 * values, gradients of every input subset, leading dims and the errors. */
#include "framework_test_util.h"

/* The float64 reference of torch.matmul; returns the values and sets the result shape. */
static double *matmul_reference(const cml_tensor *a, const cml_tensor *b, int *ond, int64_t *oshape) {
    int na = cml_tensor_ndim(a), nb = cml_tensor_ndim(b);
    const int64_t *sa = cml_tensor_shape(a), *sb = cml_tensor_shape(b);
    /* promoted shapes: a (batch_a..., M, K), b (batch_b..., K, N) */
    int64_t pa[CML_MAX_DIMS], pb[CML_MAX_DIMS];
    int pna = na, pnb = nb;
    if (na == 1) {
        pa[0] = 1;
        pa[1] = sa[0];
        pna = 2;
    } else {
        memcpy(pa, sa, sizeof(int64_t) * (size_t)na);
    }
    if (nb == 1) {
        pb[0] = sb[0];
        pb[1] = 1;
        pnb = 2;
    } else {
        memcpy(pb, sb, sizeof(int64_t) * (size_t)nb);
    }
    int64_t M = pa[pna - 2], K = pa[pna - 1], N = pb[pnb - 1];
    int64_t batch_shape[CML_MAX_DIMS];
    int nbatch = ft_broadcast_shape(pna - 2, pa, pnb - 2, pb, batch_shape);
    int64_t batch = ft_numel(nbatch, batch_shape);
    double *va = ft_read(a), *vb = ft_read(b);
    double *out = ft_malloc(sizeof(double) * (size_t)(batch * M * N));
    int64_t bidx[CML_MAX_DIMS] = {0};
    for (int64_t bi = 0; bi < batch; bi++) {
        int64_t ab = ft_bcast(nbatch, bidx, pna - 2, pa), bb = ft_bcast(nbatch, bidx, pnb - 2, pb);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += va[(ab * M + i) * K + k] * vb[(bb * K + k) * N + j];
                out[(bi * M + i) * N + j] = acc;
            }
        ft_next(nbatch, batch_shape, bidx);
    }
    free(va);
    free(vb);
    int n = 0;
    for (int d = 0; d < nbatch; d++) oshape[n++] = batch_shape[d];
    if (na > 1) oshape[n++] = M;
    if (nb > 1) oshape[n++] = N;
    *ond = n;
    return out;
}

typedef struct matmul_case {
    const char *name;
    ft_shape a, b;
} matmul_case;

static const matmul_case cases[] = {
    {"1-d x 1-d", {1, {5}}, {1, {5}}},
    {"1-d x 2-d", {1, {4}}, {2, {4, 3}}},
    {"2-d x 1-d", {2, {3, 4}}, {1, {4}}},
    {"2-d x 2-d", {2, {3, 4}}, {2, {4, 5}}},
    {"1-d x 3-d", {1, {4}}, {3, {2, 4, 3}}},
    {"3-d x 1-d", {3, {2, 3, 4}}, {1, {4}}},
    {"2-d x 3-d", {2, {3, 4}}, {3, {2, 4, 5}}},
    {"3-d x 2-d", {3, {2, 3, 4}}, {2, {4, 5}}},
    {"broadcast batch", {4, {2, 1, 3, 4}}, {3, {5, 4, 2}}},
    {"batch size-1 both", {3, {1, 3, 4}}, {3, {1, 4, 2}}},
    {"outer product", {2, {3, 1}}, {2, {1, 5}}},
    {"row x column", {2, {1, 4}}, {2, {4, 1}}},
    {"odd sizes", {2, {33, 65}}, {2, {65, 17}}},
    {"batched odd", {3, {3, 7, 9}}, {3, {3, 9, 11}}},
};

/* Operand layouts: the ft_make ones, plus the last two dims stored transposed. */
enum { L_CONTIG, L_PERMUTED, L_STRIDED, L_TRANSPOSED, L_COUNT };
static const char *const l_names[L_COUNT] = {"contiguous", "all dims permuted", "strided", "transposed"};

static cml_tensor *make_operand(const ft_shape *s, int layout, cml_rng *rng) {
    if (layout != L_TRANSPOSED || s->ndim < 2) return ft_make(s->ndim, s->d, (ft_layout_kind)(layout % 3),
                                                              FT_UNIFORM(-1, 1), rng);
    int64_t st[CML_MAX_DIMS];
    memcpy(st, s->d, sizeof st);
    st[s->ndim - 1] = s->d[s->ndim - 2];
    st[s->ndim - 2] = s->d[s->ndim - 1];
    cml_tensor *base = ft_make(s->ndim, st, FT_CONTIG, FT_UNIFORM(-1, 1), rng);
    cml_tensor *t = cml_transpose(base, -1, -2);
    cml_tensor_release(base);
    return t;
}

static void test_matmul_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 20);
    for (int c = 0; c < FT_LEN(cases); c++) {
        for (int la = 0; la < L_COUNT; la++) {
            for (int lb = 0; lb < L_COUNT; lb++) {
                cml_tensor *a = make_operand(&cases[c].a, la, &rng), *b = make_operand(&cases[c].b, lb, &rng);
                CHECK_NOT_NULL(a);
                CHECK_NOT_NULL(b);
                if (a && b) {
                    int ond;
                    int64_t oshape[CML_MAX_DIMS];
                    double *ref = matmul_reference(a, b, &ond, oshape);
                    cml_tensor *y = cml_matmul(a, b);
                    char what[128];
                    snprintf(what, sizeof what, "%s (%s @ %s)", cases[c].name, l_names[la], l_names[lb]);
                    FT_CHECK_CLOSE(y, ond, oshape, ref, 1e-5, what);
                    free(ref);
                    cml_tensor_release(y);
                }
                FT_RELEASE(a, b);
            }
        }
    }
}

/* Empty operands: an empty result, or zeros when the inner dim is 0. */
static void test_matmul_empty(void) {
    int64_t s30[2] = {3, 0}, s04[2] = {0, 4}, s05[2] = {0, 5}, s52[2] = {5, 2};
    cml_tensor *a = cml_tensor_ones(2, s30, CML_F32, CML_DEVICE_CPU), *b = cml_tensor_ones(2, s04, CML_F32, CML_DEVICE_CPU);
    cml_tensor *y = cml_matmul(a, b);
    int64_t s34[2] = {3, 4};
    const double zeros[12] = {0};
    FT_CHECK_EQUAL(y, 2, s34, zeros, "(3, 0) @ (0, 4)");
    cml_tensor *c = cml_tensor_ones(2, s05, CML_F32, CML_DEVICE_CPU), *d = cml_tensor_ones(2, s52, CML_F32, CML_DEVICE_CPU);
    cml_tensor *z = cml_matmul(c, d);
    int64_t s02[2] = {0, 2};
    FT_CHECK_EQUAL(z, 2, s02, zeros, "(0, 5) @ (5, 2)");
    FT_RELEASE(a, b, y, c, d, z);
}

static void test_matmul_low_precision(void) {
    static const cml_dtype dts[] = {CML_F16, CML_BF16};
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 21);
    for (int t = 0; t < FT_LEN(dts); t++) {
        for (int c = 0; c < FT_LEN(cases); c++) {
            cml_tensor *a32 = make_operand(&cases[c].a, L_TRANSPOSED, &rng), *b32 = make_operand(&cases[c].b, L_CONTIG, &rng);
            cml_tensor *a = cml_to_dtype(a32, dts[t]), *b = cml_to_dtype(b32, dts[t]);
            if (a && b) {
                int ond;
                int64_t oshape[CML_MAX_DIMS];
                double *ref = matmul_reference(a, b, &ond, oshape);
                cml_tensor *y = cml_matmul(a, b);
                char what[96];
                snprintf(what, sizeof what, "%s %s", cases[c].name, cml_dtype_name(dts[t]));
                FT_CHECK_CLOSE(y, ond, oshape, ref, 1e-2, what);
                if (y) CHECK(cml_tensor_dtype(y) == dts[t]);
                free(ref);
                cml_tensor_release(y);
            } else {
                CHECK_NOT_NULL(a);
                CHECK_NOT_NULL(b);
            }
            FT_RELEASE(a32, b32, a, b);
        }
    }
}

typedef struct matmul_gc {
    bool transpose_a, transpose_b; /* the leaves are stored with the last two dims swapped */
} matmul_gc;

static cml_tensor *matmul_gc_fn(cml_tensor *const *in, int n, void *user) {
    const matmul_gc *u = user;
    cml_tensor *a = u->transpose_a ? cml_transpose(in[0], -1, -2) : cml_tensor_retain(in[0]);
    cml_tensor *b = u->transpose_b ? cml_transpose(in[1], -1, -2) : cml_tensor_retain(in[1]);
    cml_tensor *y = cml_matmul(a, b);
    FT_RELEASE(a, b);
    return y;
}

static void test_matmul_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 22);
    for (int c = 0; c < FT_LEN(cases); c++) {
        if (ft_numel(cases[c].a.ndim, cases[c].a.d) > 1000) continue; /* keep finite differences cheap */
        for (int v = 0; v < 4; v++) {
            matmul_gc u = {(v & 1) && cases[c].a.ndim >= 2, (v & 2) && cases[c].b.ndim >= 2};
            int64_t sa[CML_MAX_DIMS], sb[CML_MAX_DIMS];
            memcpy(sa, cases[c].a.d, sizeof sa);
            memcpy(sb, cases[c].b.d, sizeof sb);
            int na = cases[c].a.ndim, nb = cases[c].b.ndim;
            if (u.transpose_a) {
                sa[na - 1] = cases[c].a.d[na - 2];
                sa[na - 2] = cases[c].a.d[na - 1];
            }
            if (u.transpose_b) {
                sb[nb - 1] = cases[c].b.d[nb - 2];
                sb[nb - 2] = cases[c].b.d[nb - 1];
            }
            cml_tensor *in[2] = {ft_leaf(na, sa, FT_UNIFORM(-1, 1), &rng), ft_leaf(nb, sb, FT_UNIFORM(-1, 1), &rng)};
            if (v == 3 && c % 2) cml_tensor_set_requires_grad(in[0], false); /* only b needs a gradient */
            char what[128];
            snprintf(what, sizeof what, "%s variant %d", cases[c].name, v);
            FT_GRADCHECK(matmul_gc_fn, in, 2, &u, what);
            FT_RELEASE(in[0], in[1]);
        }
    }
}

static void test_matmul_records(void) {
    int64_t s[2] = {2, 2};
    cml_tensor *a = cml_tensor_ones(2, s, CML_F32, CML_DEVICE_CPU), *b = cml_tensor_ones(2, s, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(b, true);
    cml_tensor *y = cml_matmul(a, b);
    CHECK(y && cml_tensor_grad_fn_name(y) && strcmp(cml_tensor_grad_fn_name(y), "matmul") == 0);
    cml_tensor *z = cml_matmul(a, a);
    CHECK(z && !cml_tensor_requires_grad(z));
    FT_RELEASE(a, b, y, z);
}

static void test_matmul_errors(void) {
    int64_t s34[2] = {3, 4}, s54[2] = {5, 4}, s234[3] = {2, 3, 4}, s345[3] = {3, 4, 5}, s45[2] = {4, 5};
    cml_tensor *a = cml_tensor_ones(2, s34, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_tensor_ones(2, s54, CML_F32, CML_DEVICE_CPU);
    cml_tensor *c = cml_tensor_ones(3, s234, CML_F32, CML_DEVICE_CPU);
    cml_tensor *d = cml_tensor_ones(3, s345, CML_F32, CML_DEVICE_CPU);
    cml_tensor *h = cml_tensor_ones(2, s45, CML_F16, CML_DEVICE_CPU);
    cml_tensor *i = cml_tensor_ones(2, s34, CML_I32, CML_DEVICE_CPU);
    cml_tensor *s = cml_tensor_scalar(2.0, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_matmul(a, b) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "inner dims differ: [3, 4] @ [5, 4]");
    cml_clear_error();
    CHECK(cml_matmul(c, d) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "batch dims");
    cml_clear_error();
    CHECK(cml_matmul(a, h) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "dtypes differ");
    cml_clear_error();
    CHECK(cml_matmul(i, i) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_matmul: a has dtype i32");
    cml_clear_error();
    CHECK(cml_matmul(s, a) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "at least 1-d");
    cml_clear_error();
    CHECK(cml_matmul(a, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_matmul: input 1 is NULL");
    FT_RELEASE(a, b, c, d, h, i, s);
}


/* cml_linear: y = x W^T + b against float64, for 1-d, 2-d and 3-d x, a transposed W view, no bias. */
static void test_linear_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 30);
    static const ft_shape xs[] = {{1, {7}}, {2, {5, 7}}, {3, {2, 3, 7}}, {2, {1, 7}}};
    for (int c = 0; c < 4; c++)
        for (int v = 0; v < 3; v++) {
            const int64_t out = 9, ws[2] = {out, 7}, wts[2] = {7, out};
            cml_tensor *x = ft_make(xs[c].ndim, xs[c].d, c == 2 ? FT_PERMUTED : FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
            /* v == 1: W is the transpose of a stored (in, out) matrix */
            cml_tensor *wstore = v == 1 ? ft_make(2, wts, FT_CONTIG, FT_UNIFORM(-1, 1), &rng)
                                        : ft_make(2, ws, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
            cml_tensor *w = v == 1 ? cml_transpose(wstore, 0, 1) : cml_tensor_retain(wstore);
            cml_tensor *b = v == 2 ? NULL : ft_make(1, &out, FT_CONTIG, FT_UNIFORM(-1, 1), &rng);
            cml_tensor *y = cml_linear(x, w, b);
            CHECK_NOT_NULL(y);
            double *vx = ft_read(x), *vw = ft_read(w), *vb = b ? ft_read(b) : NULL;
            int64_t rows = ft_numel(xs[c].ndim, xs[c].d) / 7;
            double *ref = ft_malloc(sizeof(double) * (size_t)(rows * out));
            for (int64_t r = 0; r < rows; r++)
                for (int64_t o = 0; o < out; o++) {
                    double acc = vb ? vb[o] : 0;
                    for (int64_t k = 0; k < 7; k++) acc += vx[r * 7 + k] * vw[o * 7 + k];
                    ref[r * out + o] = acc;
                }
            int64_t yshape[CML_MAX_DIMS];
            memcpy(yshape, xs[c].d, sizeof(int64_t) * (size_t)xs[c].ndim);
            yshape[xs[c].ndim - 1] = out;
            if (y) FT_CHECK_CLOSE(y, xs[c].ndim, yshape, ref, 1e-5, "linear");
            free(vx);
            free(vw);
            free(vb);
            free(ref);
            FT_RELEASE(x, wstore, w, b, y);
        }
}

typedef struct linear_gc {
    bool bias, transpose_w;
} linear_gc;

static cml_tensor *linear_gc_fn(cml_tensor *const *in, int n, void *user) {
    const linear_gc *u = user;
    cml_tensor *w = u->transpose_w ? cml_transpose(in[1], 0, 1) : cml_tensor_retain(in[1]);
    cml_tensor *y = cml_linear(in[0], w, u->bias ? in[2] : NULL);
    FT_RELEASE(w);
    return y;
}

/* Gradients of x, W and b by finite differences; every subset of them wanting a
 * gradient (the fused db needs dW; db alone is a reduction). */
static void test_linear_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 31);
    static const ft_shape xs[] = {{2, {5, 4}}, {3, {2, 3, 4}}, {1, {4}}};
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 8; v++) {
            linear_gc u = {v % 4 != 3, v >= 4};
            const int64_t out = 3, ws[2] = {out, 4}, wts[2] = {4, out};
            cml_tensor *in[3] = {ft_leaf(xs[c].ndim, xs[c].d, FT_UNIFORM(-1, 1), &rng),
                                 ft_leaf(2, u.transpose_w ? wts : ws, FT_UNIFORM(-1, 1), &rng),
                                 ft_leaf(1, &out, FT_UNIFORM(-1, 1), &rng)};
            int mask = (v % 4) == 0 ? 7 : (v % 4) == 1 ? 5 : (v % 4) == 2 ? 6 : 3; /* which inputs want grad */
            for (int i = 0; i < 3; i++) cml_tensor_set_requires_grad(in[i], (mask >> i) & 1);
            char what[96];
            snprintf(what, sizeof what, "linear x%dd variant %d", xs[c].ndim, v);
            FT_GRADCHECK(linear_gc_fn, in, u.bias ? 3 : 2, &u, what);
            FT_RELEASE(in[0], in[1], in[2]);
        }
}

static void test_linear_errors(void) {
    int64_t s34[2] = {3, 4}, s54[2] = {5, 4}, s5[1] = {5}, s6[1] = {6}, s45[2] = {4, 5};
    cml_tensor *x = cml_tensor_ones(2, s34, CML_F32, CML_DEVICE_CPU), *w = cml_tensor_ones(2, s54, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_tensor_ones(1, s5, CML_F32, CML_DEVICE_CPU), *b6 = cml_tensor_ones(1, s6, CML_F32, CML_DEVICE_CPU);
    cml_tensor *wbad = cml_tensor_ones(2, s45, CML_F32, CML_DEVICE_CPU), *bh = cml_tensor_ones(1, s5, CML_BF16, CML_DEVICE_CPU);
    cml_tensor *y = cml_linear(x, w, b);
    CHECK(y && cml_tensor_ndim(y) == 2 && cml_tensor_shape(y)[1] == 5);
    cml_clear_error();
    CHECK(cml_linear(x, wbad, NULL) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_linear: x [3, 4] must end in in_features and weight [4, 5] must be");
    cml_clear_error();
    CHECK(cml_linear(x, w, b6) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_linear: bias [6] must be (out_features) = (5)");
    cml_clear_error();
    CHECK(cml_linear(x, w, bh) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_linear: x (f32), weight (f32) and bias (bf16) must share one dtype");
    cml_clear_error();
    CHECK(cml_linear(NULL, w, b) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_linear: input 0 is NULL");
    FT_RELEASE(x, w, b, b6, wbad, bh, y);
}

int main(void) {
    RUN(test_matmul_forward);
    RUN(test_matmul_empty);
    RUN(test_matmul_low_precision);
    RUN(test_matmul_gradients);
    RUN(test_matmul_records);
    RUN(test_matmul_errors);
    RUN(test_linear_forward);
    RUN(test_linear_gradients);
    RUN(test_linear_errors);
    return th_finish();
}
