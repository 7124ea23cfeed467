/* Elementwise kernels (unary, unary_bwd, binary, where, copy, fill) against
 * float64 references, over contiguous, transposed, broadcast (stride 0) and
 * reversed (negative stride) views and several storage dtypes. */
#include "kernel_test_util.h"

static const int64_t shapes[][3] = {{1, 1, 1}, {1, 1, 7}, {1, 1, 127}, {1, 1, 1025}, {4, 1, 33}, {3, 127, 129}};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

static double ref_unary(cml_unary_op op, double p, double x) {
    switch (op) {
    case CML_UNARY_IDENTITY: return x;
    case CML_UNARY_NEG: return -x;
    case CML_UNARY_EXP: return exp(x);
    case CML_UNARY_LOG: return log(x);
    case CML_UNARY_SQRT: return sqrt(x);
    case CML_UNARY_TANH: return tanh(x);
    case CML_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CML_UNARY_RELU: return x > 0 ? x : 0;
    case CML_UNARY_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case CML_UNARY_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case CML_UNARY_ABS: return fabs(x);
    case CML_UNARY_SCALE: return x * p;
    case CML_UNARY_ADD_SCALAR: return x + p;
    case CML_UNARY_POW_SCALAR: return pow(x, p);
    default: return NAN;
    }
}

/* d op / dx by central differences in double: independent of the kernel's closed forms. */
static double ref_unary_grad(cml_unary_op op, double p, double x) {
    if (op == CML_UNARY_RELU) return x > 0 ? 1 : 0;
    if (op == CML_UNARY_ABS) return x > 0 ? 1 : x < 0 ? -1 : 0;
    double h = 1e-6 * (fabs(x) > 1 ? fabs(x) : 1);
    return (ref_unary(op, p, x + h) - ref_unary(op, p, x - h)) / (2 * h);
}

static double ref_binary(cml_binary_op op, double a, double b) {
    switch (op) {
    case CML_BINARY_ADD: return a + b;
    case CML_BINARY_SUB: return a - b;
    case CML_BINARY_MUL: return a * b;
    case CML_BINARY_DIV: return a / b;
    case CML_BINARY_POW: return pow(a, b);
    case CML_BINARY_MAX: return a > b ? a : b;
    case CML_BINARY_MIN: return a < b ? a : b;
    case CML_BINARY_EQ: return a == b;
    case CML_BINARY_GT: return a > b;
    default: return NAN;
    }
}

/* Inputs where the op is defined and well conditioned. */
static void unary_domain(cml_unary_op op, float *lo, float *hi) {
    bool positive = op == CML_UNARY_LOG || op == CML_UNARY_SQRT || op == CML_UNARY_POW_SCALAR;
    *lo = positive ? 0.25f : -3.0f;
    *hi = 3.0f;
}

static cml_layout flipped(cml_layout l, int d) {
    l.stride[d] = -l.stride[d];
    return l;
}

static cml_layout broadcast(cml_layout l, int d) {
    l.stride[d] = 0;
    return l;
}

/* The layout variants each case runs over: y and x views of one shape. */
enum { V_CONTIG, V_X_TRANSPOSED, V_X_FLIPPED, V_Y_TRANSPOSED_X_BROADCAST, V_COUNT };

static void make_views(int variant, const int64_t *shape, cml_layout *yl, cml_layout *xl) {
    static const int reversed[3] = {2, 1, 0};
    cml_layout contig = kt_layout(3, shape);
    cml_layout transposed = kt_layout_permuted(3, shape, reversed);
    *yl = contig;
    *xl = contig;
    if (variant == V_X_TRANSPOSED) *xl = transposed;
    if (variant == V_X_FLIPPED) *xl = flipped(flipped(contig, 2), 0);
    if (variant == V_Y_TRANSPOSED_X_BROADCAST) {
        *yl = transposed;
        *xl = broadcast(contig, 1);
    }
}

static void run_unary(cml_unary_op op, float param, int variant, const int64_t *shape, cml_dtype ydt,
                      cml_dtype xdt, cml_rng *rng) {
    cml_layout yl, xl;
    make_views(variant, shape, &yl, &xl);
    kt_view y = kt_view_alloc(yl, ydt), x = kt_view_alloc(xl, xdt);
    float lo, hi;
    unary_domain(op, &lo, &hi);
    kt_fill_uniform(&x, lo, hi, rng);
    CHECK_OK(cml_unary(kt_ctx(), op, param, y.data, &yl, ydt, x.data, &xl, xdt));
    int64_t n = kt_numel(&yl);
    float *out = kt_malloc((size_t)n * sizeof *out);
    double *ref = kt_malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) {
        out[i] = (float)kt_get(&y, i);
        ref[i] = ref_unary(op, param, kt_get(&x, i));
    }
    KT_CHECK_CLOSE(out, ref, n, kt_tol(ydt), "unary op=%d variant=%d shape=(%lld,%lld,%lld) %s<-%s", (int)op,
                   variant, (long long)shape[0], (long long)shape[1], (long long)shape[2], cml_dtype_name(ydt),
                   cml_dtype_name(xdt));
    free(out);
    free(ref);
    kt_view_free(&y);
    kt_view_free(&x);
}

static void test_unary(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED);
    for (int op = 0; op < CML_UNARY_OP_COUNT; op++) {
        float param = op == CML_UNARY_POW_SCALAR ? 2.5f : -1.75f;
        for (int s = 0; s < NSHAPES; s++)
            for (int v = 0; v < V_COUNT; v++) run_unary((cml_unary_op)op, param, v, shapes[s], CML_F32, CML_F32, &rng);
        run_unary((cml_unary_op)op, param, V_X_TRANSPOSED, shapes[4], CML_F16, CML_BF16, &rng);
        run_unary((cml_unary_op)op, param, V_CONTIG, shapes[5], CML_BF16, CML_F32, &rng);
    }
}

static void run_unary_bwd(cml_unary_op op, float param, int64_t n, cml_dtype dt, bool give_x, bool give_y,
                          cml_rng *rng) {
    cml_layout l = kt_layout(1, &n);
    kt_view x = kt_view_alloc(l, dt), y = kt_view_alloc(l, dt), dy = kt_view_alloc(l, dt), dx = kt_view_alloc(l, dt);
    float lo, hi;
    unary_domain(op, &lo, &hi);
    kt_fill_uniform(&x, lo, hi, rng);
    kt_fill_uniform(&dy, -1, 1, rng);
    CHECK_OK(cml_unary(kt_ctx(), op, param, y.data, &l, dt, x.data, &l, dt));
    CHECK_OK(cml_unary_bwd(kt_ctx(), op, param, dx.data, dy.data, give_x ? x.data : NULL, give_y ? y.data : NULL, n, dt));
    float *out = kt_malloc((size_t)n * sizeof *out);
    double *ref = kt_malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) {
        out[i] = (float)kt_get(&dx, i);
        ref[i] = kt_get(&dy, i) * ref_unary_grad(op, param, kt_get(&x, i));
    }
    /* central differences carry ~1e-8 error; the derivative from a rounded y adds dtype error */
    KT_CHECK_CLOSE(out, ref, n, kt_tol(dt) * (dt == CML_F32 ? 10 : 1), "unary_bwd op=%d n=%lld %s x=%d y=%d",
                   (int)op, (long long)n, cml_dtype_name(dt), give_x, give_y);
    free(out);
    free(ref);
    kt_view_free(&x);
    kt_view_free(&y);
    kt_view_free(&dy);
    kt_view_free(&dx);
}

static void test_unary_bwd(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 1);
    static const int64_t sizes[] = {1, 7, 1025, 40000};
    for (int op = 0; op < CML_UNARY_OP_COUNT; op++) {
        float param = op == CML_UNARY_POW_SCALAR ? 2.5f : -1.75f;
        for (int s = 0; s < 4; s++) run_unary_bwd((cml_unary_op)op, param, sizes[s], CML_F32, true, false, &rng);
        run_unary_bwd((cml_unary_op)op, param, 127, CML_BF16, true, true, &rng);
        bool y_suffices = op == CML_UNARY_EXP || op == CML_UNARY_SQRT || op == CML_UNARY_TANH ||
                          op == CML_UNARY_SIGMOID || op == CML_UNARY_RELU;
        if (y_suffices) run_unary_bwd((cml_unary_op)op, param, 1025, CML_F32, false, true, &rng);
    }
    /* Kinks: relu'(0) = 0 and abs'(0) = 0 exactly. */
    float x[4] = {0.0f, -0.0f, 2.0f, -2.0f}, dy[4] = {1, 1, 1, 1}, dx[4];
    CHECK_OK(cml_unary_bwd(kt_ctx(), CML_UNARY_RELU, 0, dx, dy, x, NULL, 4, CML_F32));
    CHECK(dx[0] == 0 && dx[1] == 0 && dx[2] == 1 && dx[3] == 0);
    CHECK_OK(cml_unary_bwd(kt_ctx(), CML_UNARY_ABS, 0, dx, dy, x, NULL, 4, CML_F32));
    CHECK(dx[0] == 0 && dx[1] == 0 && dx[2] == 1 && dx[3] == -1);
}

/* Rounds every stored value to an integer so that EQ/GT see ties. */
static void round_view(kt_view *v) {
    for (int64_t i = 0; i < v->storage_elems; i++)
        cml_dtype_store(v->storage, v->dtype, i, rintf(cml_dtype_load(v->storage, v->dtype, i)));
}

static void run_binary(cml_binary_op op, int variant, const int64_t *shape, cml_dtype ydt, cml_dtype adt, cml_rng *rng) {
    cml_layout yl, al, bl;
    make_views(variant, shape, &yl, &al);
    bl = variant == V_CONTIG ? broadcast(kt_layout(3, shape), 0) : flipped(kt_layout(3, shape), 1);
    kt_view y = kt_view_alloc(yl, ydt), a = kt_view_alloc(al, adt), b = kt_view_alloc(bl, CML_F32);
    bool positive_base = op == CML_BINARY_POW;
    kt_fill_uniform(&a, positive_base ? 0.5f : -3.0f, 3.0f, rng);
    kt_fill_uniform(&b, op == CML_BINARY_DIV ? 0.5f : -2.0f, 2.0f, rng);
    if (op == CML_BINARY_EQ || op == CML_BINARY_GT || op == CML_BINARY_MAX || op == CML_BINARY_MIN) {
        round_view(&a);
        round_view(&b);
    }
    CHECK_OK(cml_binary(kt_ctx(), op, y.data, &yl, ydt, a.data, &al, adt, b.data, &bl, CML_F32));
    int64_t n = kt_numel(&yl);
    float *out = kt_malloc((size_t)n * sizeof *out);
    double *ref = kt_malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) {
        out[i] = (float)kt_get(&y, i);
        ref[i] = ref_binary(op, kt_get(&a, i), kt_get(&b, i));
    }
    KT_CHECK_CLOSE(out, ref, n, ydt == CML_U8 ? 0.0 : kt_tol(ydt), "binary op=%d variant=%d shape=(%lld,%lld,%lld) %s<-%s",
                   (int)op, variant, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                   cml_dtype_name(ydt), cml_dtype_name(adt));
    free(out);
    free(ref);
    kt_view_free(&y);
    kt_view_free(&a);
    kt_view_free(&b);
}

static void test_binary(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 2);
    for (int op = 0; op < CML_BINARY_OP_COUNT; op++) {
        for (int s = 0; s < NSHAPES; s++)
            for (int v = 0; v < V_COUNT; v++) run_binary((cml_binary_op)op, v, shapes[s], CML_F32, CML_F32, &rng);
        run_binary((cml_binary_op)op, V_X_FLIPPED, shapes[4], CML_BF16, CML_F16, &rng);
    }
    run_binary(CML_BINARY_EQ, V_X_TRANSPOSED, shapes[5], CML_U8, CML_F32, &rng);
    run_binary(CML_BINARY_GT, V_Y_TRANSPOSED_X_BROADCAST, shapes[4], CML_U8, CML_BF16, &rng);
    /* NaN wins in max/min. */
    float a[2] = {NAN, 1.0f}, b[2] = {1.0f, NAN}, y[2];
    int64_t two = 2;
    cml_layout l = kt_layout(1, &two);
    CHECK_OK(cml_binary(kt_ctx(), CML_BINARY_MAX, y, &l, CML_F32, a, &l, CML_F32, b, &l, CML_F32));
    CHECK(isnan(y[0]) && isnan(y[1]));
    CHECK_OK(cml_binary(kt_ctx(), CML_BINARY_MIN, y, &l, CML_F32, a, &l, CML_F32, b, &l, CML_F32));
    CHECK(isnan(y[0]) && isnan(y[1]));
}

/* Integer arithmetic stays exact beyond 2^24 (it does not go through f32). */
static void test_binary_int(void) {
    int64_t n = 1025;
    cml_layout l = kt_layout(1, &n);
    int64_t *a = kt_malloc((size_t)n * 8), *b = kt_malloc((size_t)n * 8), *y = kt_malloc((size_t)n * 8);
    int32_t *y32 = kt_malloc((size_t)n * 4);
    uint8_t *eq = kt_malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        a[i] = ((int64_t)1 << 53) + 1 + i;
        b[i] = i % 3 == 0 ? a[i] : 3 * i;
    }
    CHECK_OK(cml_binary(kt_ctx(), CML_BINARY_ADD, y, &l, CML_I64, a, &l, CML_I64, b, &l, CML_I64));
    CHECK_OK(cml_binary(kt_ctx(), CML_BINARY_EQ, eq, &l, CML_U8, a, &l, CML_I64, b, &l, CML_I64));
    CHECK_OK(cml_binary(kt_ctx(), CML_BINARY_SUB, y32, &l, CML_I32, a, &l, CML_I64, b, &l, CML_I64));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bad += y[i] != a[i] + b[i];
        bad += eq[i] != (i % 3 == 0);
        int64_t d = a[i] - b[i];
        bad += y32[i] != (d > INT32_MAX ? INT32_MAX : (int32_t)d); /* saturates into i32 */
    }
    CHECK_MSG(bad == 0, "%d wrong integer results", bad);
    free(a);
    free(b);
    free(y);
    free(y32);
    free(eq);
}

static void test_copy(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 3);
    static const int64_t shape[3] = {5, 1, 131};
    static const int reversed[3] = {2, 1, 0};
    cml_layout yl = kt_layout(3, shape), xl = flipped(kt_layout_permuted(3, shape, reversed), 2);
    for (int ydt = 0; ydt < CML_DTYPE_COUNT; ydt++)
        for (int xdt = 0; xdt < CML_DTYPE_COUNT; xdt++) {
            kt_view y = kt_view_alloc(yl, (cml_dtype)ydt), x = kt_view_alloc(xl, (cml_dtype)xdt);
            kt_fill_uniform(&x, -20.0f, 300.0f, &rng);
            CHECK_OK(cml_copy(kt_ctx(), y.data, &yl, (cml_dtype)ydt, x.data, &xl, (cml_dtype)xdt));
            int bad = 0;
            for (int64_t i = 0; i < kt_numel(&yl); i++) {
                unsigned char want[8];
                cml_dtype_store(want, (cml_dtype)ydt, 0, (float)kt_get(&x, i));
                bad += kt_get(&y, i) != (double)cml_dtype_load(want, (cml_dtype)ydt, 0);
            }
            CHECK_MSG(bad == 0, "copy %s <- %s: %d elements differ from the scalar conversion",
                      cml_dtype_name((cml_dtype)ydt), cml_dtype_name((cml_dtype)xdt), bad);
            kt_view_free(&y);
            kt_view_free(&x);
        }
    /* i64 -> i64 and i32 -> i64 are exact; i64 -> i32 saturates. */
    int64_t n = 4;
    cml_layout l = kt_layout(1, &n);
    int64_t big[4] = {((int64_t)1 << 53) + 1, INT64_MIN, INT64_MAX, -7}, out64[4];
    int32_t in32[4] = {INT32_MAX, INT32_MIN, 16777217, -1}, out32[4];
    CHECK_OK(cml_copy(kt_ctx(), out64, &l, CML_I64, big, &l, CML_I64));
    CHECK(memcmp(out64, big, sizeof big) == 0);
    CHECK_OK(cml_copy(kt_ctx(), out64, &l, CML_I64, in32, &l, CML_I32));
    CHECK(out64[0] == INT32_MAX && out64[1] == INT32_MIN && out64[2] == 16777217 && out64[3] == -1);
    CHECK_OK(cml_copy(kt_ctx(), out32, &l, CML_I32, big, &l, CML_I64));
    CHECK(out32[0] == INT32_MAX && out32[1] == INT32_MIN && out32[2] == INT32_MAX && out32[3] == -7);
    float f[4] = {300.7f, -5.0f, 2.5f, 3.5f};
    uint8_t u[4];
    CHECK_OK(cml_copy(kt_ctx(), u, &l, CML_U8, f, &l, CML_F32));
    CHECK(u[0] == 255 && u[1] == 0 && u[2] == 2 && u[3] == 4);
}

static void test_fill(void) {
    static const int64_t shape[2] = {33, 65};
    static const int reversed[2] = {1, 0};
    cml_layout l = kt_layout_permuted(2, shape, reversed);
    for (int dt = 0; dt < CML_DTYPE_COUNT; dt++) {
        kt_view y = kt_view_alloc(l, (cml_dtype)dt);
        CHECK_OK(cml_fill(kt_ctx(), y.data, &l, (cml_dtype)dt, 2.5));
        double want = cml_dtype_is_float((cml_dtype)dt) ? 2.5 : 2.0; /* integers: ties to even */
        int bad = 0;
        for (int64_t i = 0; i < kt_numel(&l); i++) bad += kt_get(&y, i) != want;
        CHECK_MSG(bad == 0, "fill %s: %d wrong", cml_dtype_name((cml_dtype)dt), bad);
        kt_view_free(&y);
    }
    int64_t v[3], n = 3;
    cml_layout l1 = kt_layout(1, &n);
    CHECK_OK(cml_fill(kt_ctx(), v, &l1, CML_I64, 9007199254740994.0)); /* 2^53 + 2: exact in double, not in f32 */
    CHECK(v[0] == ((int64_t)1 << 53) + 2 && v[2] == ((int64_t)1 << 53) + 2);
}

static void test_where(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 4);
    static const int64_t shape[3] = {3, 127, 129};
    static const cml_dtype dts[3] = {CML_F32, CML_BF16, CML_I64};
    for (int k = 0; k < 3; k++) {
        cml_layout yl = kt_layout(3, shape), cl = broadcast(kt_layout(3, shape), 0);
        cml_layout al = flipped(kt_layout(3, shape), 2), bl = broadcast(kt_layout(3, shape), 2);
        kt_view y = kt_view_alloc(yl, dts[k]), c = kt_view_alloc(cl, CML_U8);
        kt_view a = kt_view_alloc(al, dts[k]), b = kt_view_alloc(bl, dts[k]);
        kt_fill_uniform(&c, 0, 1.99f, &rng); /* rounds to 0, 1 or 2: nonzero is true */
        kt_fill_uniform(&a, -100, 100, &rng);
        kt_fill_uniform(&b, -100, 100, &rng);
        CHECK_OK(cml_where_fwd(kt_ctx(), y.data, &yl, dts[k], c.data, &cl, a.data, &al, b.data, &bl));
        int bad = 0;
        for (int64_t i = 0; i < kt_numel(&yl); i++) bad += kt_get(&y, i) != (kt_get(&c, i) != 0 ? kt_get(&a, i) : kt_get(&b, i));
        CHECK_MSG(bad == 0, "where %s: %d wrong", cml_dtype_name(dts[k]), bad);
        kt_view_free(&y);
        kt_view_free(&c);
        kt_view_free(&a);
        kt_view_free(&b);
    }
}

static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 5);
    static const int64_t shape[3] = {7, 255, 129};
    cml_layout l = kt_layout(3, shape), bl = broadcast(kt_layout(3, shape), 1);
    kt_view a = kt_view_alloc(l, CML_F32), b = kt_view_alloc(bl, CML_F32);
    kt_view y1 = kt_view_alloc(l, CML_BF16), y2 = kt_view_alloc(l, CML_BF16);
    kt_fill_uniform(&a, -2, 2, &rng);
    kt_fill_uniform(&b, -2, 2, &rng);
    CHECK_OK(cml_binary(kt_ctx(), CML_BINARY_MUL, y1.data, &l, CML_BF16, a.data, &l, CML_F32, b.data, &bl, CML_F32));
    CHECK_OK(cml_binary(kt_ctx(), CML_BINARY_MUL, y2.data, &l, CML_BF16, a.data, &l, CML_F32, b.data, &bl, CML_F32));
    CHECK(memcmp(y1.storage, y2.storage, (size_t)kt_numel(&l) * 2) == 0);
    kt_view_free(&a);
    kt_view_free(&b);
    kt_view_free(&y1);
    kt_view_free(&y2);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float buf[12] = {0};
    uint8_t cond[12] = {0};
    int64_t s34[2] = {3, 4}, s33[2] = {3, 3};
    cml_layout l = kt_layout(2, s34), bad_shape = kt_layout(2, s33), zero_stride = broadcast(kt_layout(2, s34), 0);
    cml_layout too_many = l;
    too_many.ndim = 9;
    CHECK_STATUS(cml_unary(NULL, CML_UNARY_EXP, 0, buf, &l, CML_F32, buf, &l, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_unary: ctx must not be NULL");
    CHECK_STATUS(cml_unary(ctx, CML_UNARY_EXP, 0, buf, &l, CML_F32, buf, &bad_shape, CML_F32), CML_ERR_SHAPE,
                 "cml_unary: x_layout->shape[1]=3 must equal y_layout->shape[1]=4");
    CHECK_STATUS(cml_unary(ctx, (cml_unary_op)99, 0, buf, &l, CML_F32, buf, &l, CML_F32), CML_ERR_INVALID_ARG, "op=99");
    CHECK_STATUS(cml_unary(ctx, CML_UNARY_EXP, 0, buf, &l, (cml_dtype)42, buf, &l, CML_F32), CML_ERR_DTYPE,
                 "y_dtype=42 is not a valid dtype");
    CHECK_STATUS(cml_unary_bwd(ctx, CML_UNARY_EXP, 0, buf, buf, buf, buf, -1, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_unary_bwd: n=-1 must be >= 0");
    CHECK_STATUS(cml_unary_bwd(ctx, CML_UNARY_LOG, 0, buf, buf, NULL, buf, 4, CML_F32), CML_ERR_INVALID_ARG,
                 "x must not be NULL");
    CHECK_STATUS(cml_unary_bwd(ctx, CML_UNARY_EXP, 0, buf, buf, buf, NULL, 4, CML_I32), CML_ERR_DTYPE,
                 "dtype=i32 must be a floating-point dtype");
    CHECK_STATUS(cml_binary(ctx, CML_BINARY_ADD, buf, &zero_stride, CML_F32, buf, &l, CML_F32, buf, &l, CML_F32),
                 CML_ERR_INVALID_ARG, "y_layout->stride[0]=0 with shape[0]=3");
    CHECK_STATUS(cml_binary(ctx, CML_BINARY_ADD, buf, &l, CML_F32, buf, &l, CML_F32, NULL, &l, CML_F32),
                 CML_ERR_INVALID_ARG, "cml_binary: b must not be NULL");
    CHECK_STATUS(cml_where_fwd(ctx, buf, &l, CML_F32, NULL, &l, buf, &l, buf, &l), CML_ERR_INVALID_ARG,
                 "cml_where_fwd: cond must not be NULL");
    CHECK_STATUS(cml_where_fwd(ctx, buf, &l, CML_F32, cond, &bad_shape, buf, &l, buf, &l), CML_ERR_SHAPE,
                 "cond_layout->shape[1]=3");
    CHECK_STATUS(cml_copy(ctx, buf, &too_many, CML_F32, buf, &l, CML_F32), CML_ERR_INVALID_ARG,
                 "cml_copy: y_layout->ndim=9 must be in [0, 8]");
    CHECK_STATUS(cml_fill(ctx, NULL, &l, CML_F32, 1.0), CML_ERR_INVALID_ARG, "cml_fill: y must not be NULL");
    CHECK_STATUS(cml_fill(ctx, buf, NULL, CML_F32, 1.0), CML_ERR_INVALID_ARG, "cml_fill: y_layout must not be NULL");
    /* empty views are fine with NULL data */
    int64_t zero = 0;
    cml_layout empty = kt_layout(1, &zero);
    CHECK_OK(cml_fill(ctx, NULL, &empty, CML_F32, 1.0));
    /* copy, fill, unary and binary have CUDA kernels (tested in tests/gpu); these do not yet */
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_unary_bwd(&cuda, CML_UNARY_EXP, 0, buf, buf, buf, buf, 4, CML_F32));
    KT_CHECK_CUDA_DISPATCH(cml_where_fwd(&cuda, buf, &l, CML_F32, cond, &l, buf, &l, buf, &l));
}

int main(void) {
    RUN(test_unary);
    RUN(test_unary_bwd);
    RUN(test_binary);
    RUN(test_binary_int);
    RUN(test_copy);
    RUN(test_fill);
    RUN(test_where);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
