/* Elementwise ops (binary with NumPy broadcasting, unary, scalar, comparisons):
 * forward against float64 references over shapes with size-1 dims, 0-d
 * tensors and non-contiguous views, gradients by finite differences, and the
 * error paths. */
#include "framework_test_util.h"

/* ---- binary ops ------------------------------------------------------------------ */

typedef cml_tensor *(*binary_fn)(const cml_tensor *, const cml_tensor *);

static double ref_add(double a, double b) { return a + b; }
static double ref_sub(double a, double b) { return a - b; }
static double ref_mul(double a, double b) { return a * b; }
static double ref_div(double a, double b) { return a / b; }
static double ref_pow(double a, double b) { return pow(a, b); }
static double ref_max(double a, double b) { return a > b ? a : b; }
static double ref_min(double a, double b) { return a < b ? a : b; }

typedef struct binary_case {
    const char *name;
    binary_fn fn;
    double (*ref)(double, double);
    ft_dist da, db; /* inputs away from poles, branch cuts and ties */
} binary_case;

static const binary_case binary_ops[] = {
    {"add", cml_add, ref_add, FT_UNIFORM(-2, 2), FT_UNIFORM(-2, 2)},
    {"sub", cml_sub, ref_sub, FT_UNIFORM(-2, 2), FT_UNIFORM(-2, 2)},
    {"mul", cml_mul, ref_mul, FT_UNIFORM(-2, 2), FT_UNIFORM(-2, 2)},
    {"div", cml_div, ref_div, FT_UNIFORM(-2, 2), FT_AWAY_FROM_ZERO(0.5, 2)},
    {"pow", cml_pow, ref_pow, FT_UNIFORM(0.5, 2), FT_UNIFORM(-2, 2)},
    /* a on the grid -1.875 + k/4, b on -2 + k/4: never closer than 1/8 */
    {"maximum", cml_maximum, ref_max, FT_GRID(-1.875, 2, 0.25), FT_GRID(-2, 2, 0.25)},
    {"minimum", cml_minimum, ref_min, FT_GRID(-1.875, 2, 0.25), FT_GRID(-2, 2, 0.25)},
};

/* Shape pairs: equal, NumPy broadcasting on both sides, 0-d, size-1 dims. */
static const struct {
    ft_shape a, b;
} binary_shapes[] = {
    {{2, {3, 4}}, {2, {3, 4}}},
    {{3, {3, 1, 5}}, {2, {4, 1}}},
    {{0, {0}}, {2, {2, 3}}},
    {{2, {2, 3}}, {0, {0}}},
    {{0, {0}}, {0, {0}}},
    {{1, {1}}, {1, {3}}},
    {{3, {2, 1, 3}}, {3, {1, 4, 1}}},
    {{1, {5}}, {3, {2, 1, 5}}},
};

/* The float64 reference of op over a and b broadcast together (row-major). */
static double *binary_reference(const binary_case *op, const cml_tensor *a, const cml_tensor *b, int *nd,
                                int64_t *shape) {
    int na = cml_tensor_ndim(a), nb = cml_tensor_ndim(b);
    const int64_t *sa = cml_tensor_shape(a), *sb = cml_tensor_shape(b);
    *nd = ft_broadcast_shape(na, sa, nb, sb, shape);
    double *va = ft_read(a), *vb = ft_read(b);
    int64_t n = ft_numel(*nd, shape);
    double *ref = ft_malloc((size_t)n * sizeof *ref);
    int64_t idx[CML_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        ref[k] = op->ref(va[ft_bcast(*nd, idx, na, sa)], vb[ft_bcast(*nd, idx, nb, sb)]);
        ft_next(*nd, shape, idx);
    }
    free(va);
    free(vb);
    return ref;
}

static void test_binary_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED);
    for (int o = 0; o < FT_LEN(binary_ops); o++) {
        const binary_case *op = &binary_ops[o];
        for (int s = 0; s < FT_LEN(binary_shapes); s++) {
            const ft_shape *sa = &binary_shapes[s].a, *sb = &binary_shapes[s].b;
            for (int la = 0; la < FT_LAYOUT_COUNT; la++) {
                for (int lb = 0; lb < FT_LAYOUT_COUNT; lb++) {
                    cml_tensor *a = ft_make(sa->ndim, sa->d, (ft_layout_kind)la, op->da, &rng);
                    cml_tensor *b = ft_make(sb->ndim, sb->d, (ft_layout_kind)lb, op->db, &rng);
                    CHECK_NOT_NULL(a);
                    CHECK_NOT_NULL(b);
                    if (!a || !b) {
                        FT_RELEASE(a, b);
                        continue;
                    }
                    int nd;
                    int64_t shape[CML_MAX_DIMS];
                    double *ref = binary_reference(op, a, b, &nd, shape);
                    cml_tensor *y = op->fn(a, b);
                    char what[160];
                    snprintf(what, sizeof what, "%s case %d (%s, %s)", op->name, s, ft_layout_name[la],
                             ft_layout_name[lb]);
                    FT_CHECK_CLOSE(y, nd, shape, ref, 1e-6, what);
                    if (y) {
                        CHECK(cml_tensor_dtype(y) == CML_F32);
                        CHECK(cml_tensor_is_contiguous(y));
                        CHECK(!cml_tensor_requires_grad(y));
                    }
                    free(ref);
                    FT_RELEASE(a, b, y);
                }
            }
        }
    }
}

typedef struct binary_gc {
    binary_fn fn;
    bool permute_a; /* a is stored transposed and permuted inside f (gradient through a view) */
} binary_gc;

static cml_tensor *binary_gc_fn(cml_tensor *const *in, int n, void *user) {
    const binary_gc *u = user;
    if (!u->permute_a) return u->fn(in[0], in[1]);
    int nd = cml_tensor_ndim(in[0]);
    int perm[CML_MAX_DIMS];
    for (int d = 0; d < nd; d++) perm[d] = nd - 1 - d;
    cml_tensor *av = cml_permute(in[0], perm);
    cml_tensor *y = u->fn(av, in[1]);
    cml_tensor_release(av);
    return y;
}

static void test_binary_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 1);
    for (int o = 0; o < FT_LEN(binary_ops); o++) {
        const binary_case *op = &binary_ops[o];
        for (int s = 0; s < FT_LEN(binary_shapes); s++) {
            const ft_shape *sa = &binary_shapes[s].a, *sb = &binary_shapes[s].b;
            for (int which = 0; which < 4; which++) {
                /* which: 0 both inputs need grads, 1 only a, 2 only b, 3 a through a transposed view */
                binary_gc u = {op->fn, which == 3};
                int64_t ashape[CML_MAX_DIMS];
                for (int d = 0; d < sa->ndim; d++) ashape[d] = u.permute_a ? sa->d[sa->ndim - 1 - d] : sa->d[d];
                cml_tensor *in[2] = {ft_leaf(sa->ndim, ashape, op->da, &rng), ft_leaf(sb->ndim, sb->d, op->db, &rng)};
                if (which == 2) cml_tensor_set_requires_grad(in[0], false);
                if (which == 1) cml_tensor_set_requires_grad(in[1], false);
                char what[160];
                snprintf(what, sizeof what, "%s case %d variant %d", op->name, s, which);
                FT_GRADCHECK(binary_gc_fn, in, 2, &u, what);
                if (which == 1) CHECK(cml_tensor_grad(in[1]) == NULL);
                if (which == 2) CHECK(cml_tensor_grad(in[0]) == NULL);
                FT_RELEASE(in[0], in[1]);
            }
        }
    }
}

/* f16 / bf16: computed in f32, stored narrow; norm-wise error ~1e-2. */
static void test_binary_low_precision(void) {
    static const cml_dtype dts[] = {CML_F16, CML_BF16};
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 2);
    for (int t = 0; t < FT_LEN(dts); t++) {
        for (int o = 0; o < FT_LEN(binary_ops); o++) {
            const binary_case *op = &binary_ops[o];
            int64_t sa[3] = {3, 1, 5}, sb[2] = {4, 1};
            cml_tensor *a32 = ft_make(3, sa, FT_PERMUTED, op->da, &rng), *b32 = ft_make(2, sb, FT_CONTIG, op->db, &rng);
            cml_tensor *a = cml_to_dtype(a32, dts[t]), *b = cml_to_dtype(b32, dts[t]);
            CHECK_NOT_NULL(a);
            CHECK_NOT_NULL(b);
            if (a && b) {
                int nd;
                int64_t shape[CML_MAX_DIMS];
                double *ref = binary_reference(op, a, b, &nd, shape); /* from the rounded inputs */
                cml_tensor *y = op->fn(a, b);
                char what[96];
                snprintf(what, sizeof what, "%s %s", op->name, cml_dtype_name(dts[t]));
                FT_CHECK_CLOSE(y, nd, shape, ref, 1e-2, what);
                if (y) CHECK(cml_tensor_dtype(y) == dts[t]);
                free(ref);
                cml_tensor_release(y);
            }
            FT_RELEASE(a32, b32, a, b);
        }
    }
}

/* ---- unary and scalar ops ---------------------------------------------------------- */

enum {
    U_NEG, U_EXP, U_LOG, U_SQRT, U_ABS, U_TANH, U_SIGMOID, U_RELU, U_GELU_ERF, U_GELU_TANH,
    U_ADD_SCALAR, U_MUL_SCALAR, U_POW2, U_POW3, U_POW_HALF, U_POW_NEG
};

typedef struct unary_case {
    const char *name;
    int op;
    ft_dist dist;
} unary_case;

static const unary_case unary_ops[] = {
    {"neg", U_NEG, FT_UNIFORM(-2, 2)},
    {"exp", U_EXP, FT_UNIFORM(-2, 2)},
    {"log", U_LOG, FT_UNIFORM(0.2, 3)},
    {"sqrt", U_SQRT, FT_UNIFORM(0.2, 3)},
    {"abs", U_ABS, FT_AWAY_FROM_ZERO(0.1, 2)},
    {"tanh", U_TANH, FT_UNIFORM(-2, 2)},
    {"sigmoid", U_SIGMOID, FT_UNIFORM(-3, 3)},
    {"relu", U_RELU, FT_AWAY_FROM_ZERO(0.1, 2)},
    {"gelu_erf", U_GELU_ERF, FT_UNIFORM(-3, 3)},
    {"gelu_tanh", U_GELU_TANH, FT_UNIFORM(-3, 3)},
    {"add_scalar", U_ADD_SCALAR, FT_UNIFORM(-2, 2)},
    {"mul_scalar", U_MUL_SCALAR, FT_UNIFORM(-2, 2)},
    {"pow_scalar 2", U_POW2, FT_UNIFORM(-2, 2)},
    {"pow_scalar 3", U_POW3, FT_UNIFORM(-2, 2)},
    {"pow_scalar 0.5", U_POW_HALF, FT_UNIFORM(0.2, 3)},
    {"pow_scalar -1.5", U_POW_NEG, FT_UNIFORM(0.3, 3)},
};

static cml_tensor *unary_apply(int op, const cml_tensor *x) {
    switch (op) {
    case U_NEG: return cml_neg(x);
    case U_EXP: return cml_exp(x);
    case U_LOG: return cml_log(x);
    case U_SQRT: return cml_sqrt(x);
    case U_ABS: return cml_abs(x);
    case U_TANH: return cml_tanh(x);
    case U_SIGMOID: return cml_sigmoid(x);
    case U_RELU: return cml_relu(x);
    case U_GELU_ERF: return cml_gelu(x, CML_GELU_ERF);
    case U_GELU_TANH: return cml_gelu(x, CML_GELU_TANH);
    case U_ADD_SCALAR: return cml_add_scalar(x, 0.75);
    case U_MUL_SCALAR: return cml_mul_scalar(x, -1.5);
    case U_POW2: return cml_pow_scalar(x, 2.0);
    case U_POW3: return cml_pow_scalar(x, 3.0);
    case U_POW_HALF: return cml_pow_scalar(x, 0.5);
    default: return cml_pow_scalar(x, -1.5);
    }
}

static double unary_ref(int op, double x) {
    switch (op) {
    case U_NEG: return -x;
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_ABS: return fabs(x);
    case U_TANH: return tanh(x);
    case U_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case U_RELU: return x > 0 ? x : 0;
    case U_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case U_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / FT_PI) * (x + 0.044715 * x * x * x)));
    case U_ADD_SCALAR: return x + 0.75;
    case U_MUL_SCALAR: return x * -1.5;
    case U_POW2: return x * x;
    case U_POW3: return x * x * x;
    case U_POW_HALF: return sqrt(x);
    default: return pow(x, -1.5);
    }
}

static const ft_shape unary_shapes[] = {
    {0, {0}}, {1, {1}}, {1, {7}}, {3, {3, 1, 4}}, {4, {2, 3, 4, 5}},
};

static void test_unary_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 3);
    for (int o = 0; o < FT_LEN(unary_ops); o++) {
        const unary_case *op = &unary_ops[o];
        for (int s = 0; s < FT_LEN(unary_shapes); s++) {
            const ft_shape *sh = &unary_shapes[s];
            for (int l = 0; l < FT_LAYOUT_COUNT; l++) {
                cml_tensor *x = ft_make(sh->ndim, sh->d, (ft_layout_kind)l, op->dist, &rng);
                CHECK_NOT_NULL(x);
                if (!x) continue;
                double *ref = ft_read(x);
                int64_t n = ft_numel(sh->ndim, sh->d);
                for (int64_t i = 0; i < n; i++) ref[i] = unary_ref(op->op, ref[i]);
                cml_tensor *y = unary_apply(op->op, x);
                char what[128];
                snprintf(what, sizeof what, "%s shape %d %s", op->name, s, ft_layout_name[l]);
                FT_CHECK_CLOSE(y, sh->ndim, sh->d, ref, 2e-6, what);
                free(ref);
                FT_RELEASE(x, y);
            }
        }
    }
}

typedef struct unary_gc {
    int op;
    bool transpose; /* apply the op to a transposed view */
} unary_gc;

static cml_tensor *unary_gc_fn(cml_tensor *const *in, int n, void *user) {
    const unary_gc *u = user;
    if (!u->transpose) return unary_apply(u->op, in[0]);
    cml_tensor *v = cml_transpose(in[0], 0, -1);
    cml_tensor *y = unary_apply(u->op, v);
    cml_tensor_release(v);
    return y;
}

static void test_unary_gradients(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 4);
    for (int o = 0; o < FT_LEN(unary_ops); o++) {
        const unary_case *op = &unary_ops[o];
        for (int s = 0; s < 4; s++) {
            const ft_shape *sh = &unary_shapes[s == 3 ? 3 : s];
            unary_gc u = {op->op, s == 3};
            cml_tensor *x = ft_leaf(sh->ndim, sh->d, op->dist, &rng);
            char what[128];
            snprintf(what, sizeof what, "%s shape %d%s", op->name, s, u.transpose ? " (transposed)" : "");
            FT_GRADCHECK(unary_gc_fn, &x, 1, &u, what);
            cml_tensor_release(x);
        }
    }
}

/* A chain of elementwise ops with broadcasting: a*b + exp(a)/b - sigmoid(b). */
static cml_tensor *chain_fn(cml_tensor *const *in, int n, void *user) {
    cml_tensor *ab = cml_mul(in[0], in[1]);
    cml_tensor *ea = cml_exp(in[0]);
    cml_tensor *q = cml_div(ea, in[1]);
    cml_tensor *s = cml_sigmoid(in[1]);
    cml_tensor *t = cml_add(ab, q);
    cml_tensor *y = cml_sub(t, s);
    FT_RELEASE(ab, ea, q, s, t);
    return y;
}

static void test_chain_gradient(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 5);
    int64_t sa[3] = {2, 1, 3}, sb[2] = {4, 1};
    cml_tensor *in[2] = {ft_leaf(3, sa, FT_UNIFORM(-1, 1), &rng), ft_leaf(2, sb, FT_AWAY_FROM_ZERO(0.5, 2), &rng)};
    FT_GRADCHECK(chain_fn, in, 2, NULL, "mul/exp/div/sigmoid/add/sub chain");
    FT_RELEASE(in[0], in[1]);
}

/* maximum/minimum send the gradient of a tie to a. */
static void test_extremum_ties(void) {
    int64_t s3[1] = {3};
    const float av[3] = {1, 2, 3}, bv[3] = {1, 0, 3};
    cml_tensor *a = ft_from(1, s3, av), *b = ft_from(1, s3, bv);
    cml_tensor_set_requires_grad(a, true);
    cml_tensor_set_requires_grad(b, true);
    cml_tensor *mx = cml_maximum(a, b), *mn = cml_minimum(b, a);
    cml_tensor *s = cml_add(mx, mn), *l = cml_sum(s, NULL, 0, false);
    CHECK_OK(cml_backward(l, NULL));
    /* maximum(a, b): a gets 1, 1, 1; minimum(b, a): b (its a) gets 1, 1, 1 where b <= a */
    const double ga[3] = {1, 1, 1}, gb[3] = {1, 1, 1};
    FT_CHECK_EQUAL(cml_tensor_grad(a), 1, s3, ga, "maximum ties go to a");
    FT_CHECK_EQUAL(cml_tensor_grad(b), 1, s3, gb, "minimum ties go to its first argument");
    FT_RELEASE(a, b, mx, mn, s, l);
}

/* Broadcasting against empty tensors, forward and backward. */
static void test_empty_broadcast(void) {
    int64_t s03[2] = {0, 3}, s13[2] = {1, 3};
    cml_tensor *a = cml_tensor_ones(2, s03, CML_F32, CML_DEVICE_CPU), *b = cml_tensor_ones(2, s13, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(a, true);
    cml_tensor_set_requires_grad(b, true);
    cml_tensor *y = cml_mul(a, b);
    CHECK(y && cml_tensor_ndim(y) == 2 && cml_tensor_size(y, 0) == 0 && cml_tensor_size(y, 1) == 3);
    cml_tensor *e = cml_exp(y), *l = cml_sum(e, NULL, 0, false);
    CHECK(l && cml_tensor_item(l) == 0.0);
    CHECK_OK(cml_backward(l, NULL));
    const double zeros[3] = {0};
    FT_CHECK_EQUAL(cml_tensor_grad(b), 2, s13, zeros, "gradient of the non-empty operand");
    CHECK(cml_tensor_grad(a) && cml_tensor_numel(cml_tensor_grad(a)) == 0);
    FT_RELEASE(a, b, y, e, l);
}

/* ---- comparisons ---------------------------------------------------------------------- */

static void test_comparisons(void) {
    cml_rng rng;
    cml_rng_init(&rng, FT_SEED + 6);
    static const cml_dtype dts[] = {CML_F32, CML_I32, CML_BF16};
    for (int t = 0; t < FT_LEN(dts); t++) {
        for (int s = 0; s < FT_LEN(binary_shapes); s++) {
            const ft_shape *sa = &binary_shapes[s].a, *sb = &binary_shapes[s].b;
            /* a coarse grid, so that ties (eq) happen often */
            cml_tensor *a32 = ft_make(sa->ndim, sa->d, FT_PERMUTED, FT_GRID(-1, 1.01, 0.5), &rng);
            cml_tensor *b32 = ft_make(sb->ndim, sb->d, FT_STRIDED, FT_GRID(-1, 1.01, 0.5), &rng);
            cml_tensor *a = cml_to_dtype(a32, dts[t]), *b = cml_to_dtype(b32, dts[t]);
            cml_tensor_set_requires_grad(a32, true);
            int nd;
            int64_t shape[CML_MAX_DIMS];
            nd = ft_broadcast_shape(sa->ndim, sa->d, sb->ndim, sb->d, shape);
            int64_t n = ft_numel(nd, shape);
            double *va = ft_read(a), *vb = ft_read(b);
            double *req = ft_malloc((size_t)n * sizeof *req), *rgt = ft_malloc((size_t)n * sizeof *rgt);
            int64_t idx[CML_MAX_DIMS] = {0};
            for (int64_t k = 0; k < n; k++) {
                double x = va[ft_bcast(nd, idx, sa->ndim, sa->d)], y = vb[ft_bcast(nd, idx, sb->ndim, sb->d)];
                req[k] = x == y;
                rgt[k] = x > y;
                ft_next(nd, shape, idx);
            }
            cml_tensor *eq = cml_eq(a, b), *gt = cml_gt(a, b);
            char what[96];
            snprintf(what, sizeof what, "eq %s case %d", cml_dtype_name(dts[t]), s);
            FT_CHECK_EQUAL(eq, nd, shape, req, what);
            snprintf(what, sizeof what, "gt %s case %d", cml_dtype_name(dts[t]), s);
            FT_CHECK_EQUAL(gt, nd, shape, rgt, what);
            if (eq && gt) CHECK(cml_tensor_dtype(eq) == CML_U8 && cml_tensor_dtype(gt) == CML_U8);
            free(va);
            free(vb);
            free(req);
            free(rgt);
            FT_RELEASE(a, b, eq, gt);
            /* comparisons are not differentiable: no node even when an input requires grad */
            cml_tensor *g = cml_gt(a32, b32);
            CHECK_NOT_NULL(g);
            if (g) CHECK(!cml_tensor_requires_grad(g) && !cml_tensor_has_grad_fn(g));
            FT_RELEASE(a32, b32, g);
        }
    }
}

/* ---- recording and errors ------------------------------------------------------------- */

static void test_grad_fn_names(void) {
    int64_t shape[1] = {3};
    cml_tensor *a = cml_tensor_ones(1, shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_tensor_full(1, shape, 2.0, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(a, true);
    static const struct {
        binary_fn fn;
        const char *name;
    } cases[] = {{cml_add, "add"}, {cml_sub, "sub"}, {cml_mul, "mul"}, {cml_div, "div"},
                 {cml_pow, "pow"}, {cml_maximum, "maximum"}, {cml_minimum, "minimum"}};
    for (int i = 0; i < FT_LEN(cases); i++) {
        cml_tensor *y = cases[i].fn(b, a);
        CHECK(y && cml_tensor_requires_grad(y) && cml_tensor_grad_fn_name(y) &&
              strcmp(cml_tensor_grad_fn_name(y), cases[i].name) == 0);
        cml_tensor_release(y);
    }
    cml_tensor *y = cml_gelu(a, CML_GELU_TANH);
    CHECK(y && strcmp(cml_tensor_grad_fn_name(y), "gelu") == 0);
    cml_tensor_release(y);
    y = cml_exp(b); /* b does not require grad */
    CHECK(y && !cml_tensor_requires_grad(y) && cml_tensor_grad_fn_name(y) == NULL);
    FT_RELEASE(a, b, y);
}

static void test_errors(void) {
    int64_t s34[2] = {3, 4}, s5[1] = {5};
    cml_tensor *a = cml_tensor_ones(2, s34, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_tensor_ones(1, s5, CML_F32, CML_DEVICE_CPU);
    cml_tensor *h = cml_tensor_ones(2, s34, CML_F16, CML_DEVICE_CPU);
    cml_tensor *i = cml_tensor_ones(2, s34, CML_I32, CML_DEVICE_CPU);

    cml_clear_error();
    CHECK(cml_add(a, b) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "do not broadcast");
    CHECK_ERROR(CML_ERR_SHAPE, "cml_add");
    cml_clear_error();
    CHECK(cml_mul(a, h) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "dtypes differ");
    cml_clear_error();
    CHECK(cml_div(i, i) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "floating-point");
    cml_clear_error();
    CHECK(cml_exp(i) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_exp: x has dtype i32");
    cml_clear_error();
    CHECK(cml_gelu(a, (cml_gelu_approx)7) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "approx=7");
    cml_clear_error();
    CHECK(cml_eq(a, h) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "cml_eq");
    cml_clear_error();
    CHECK(cml_gt(a, b) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "cml_gt");

    /* NULL inputs: a fresh error names the input; an earlier error is kept. */
    cml_clear_error();
    CHECK(cml_sub(a, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_sub: input 1 is NULL");
    cml_clear_error();
    CHECK(cml_add(a, b) == NULL); /* sets a shape error */
    cml_tensor *chained = cml_tanh(cml_exp(NULL));
    CHECK(chained == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "do not broadcast");
    FT_RELEASE(a, b, h, i);
}

/* pow at a = 0: PyTorch's gradients (0 for da where b == 0, 0 for db where a == 0), not NaN/-inf. */
static void test_pow_gradient_at_zero(void) {
    const float av[3] = {0, 0, 2}, bv[3] = {0, 2, 3};
    cml_tensor *a = cml_tensor_from_host(av, 1, (int64_t[]){3}, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_tensor_from_host(bv, 1, (int64_t[]){3}, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(a, true);
    cml_tensor_set_requires_grad(b, true);
    cml_tensor *p = cml_pow(a, b);
    cml_tensor *s = cml_sum(p, NULL, 0, false);
    CHECK_OK(cml_backward(s, NULL));
    const float *ga = cml_tensor_data(cml_tensor_grad(a)), *gb = cml_tensor_data(cml_tensor_grad(b));
    const double want_a[3] = {0, 0, 3 * 4}, want_b[3] = {0, 0, 8 * log(2.0)};
    for (int i = 0; i < 3; i++) {
        CHECK_NEAR(ga[i], want_a[i], 1e-5);
        CHECK_NEAR(gb[i], want_b[i], 1e-5);
    }
    cml_tensor_release_all((cml_tensor *[]){a, b, p, s}, 4);
}

int main(void) {
    RUN(test_pow_gradient_at_zero);
    RUN(test_binary_forward);
    RUN(test_binary_gradients);
    RUN(test_binary_low_precision);
    RUN(test_unary_forward);
    RUN(test_unary_gradients);
    RUN(test_chain_gradient);
    RUN(test_extremum_ties);
    RUN(test_empty_broadcast);
    RUN(test_comparisons);
    RUN(test_grad_fn_names);
    RUN(test_errors);
    return th_finish();
}
