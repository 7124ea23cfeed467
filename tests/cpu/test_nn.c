/* nn: modules, parameters, layers (vs float64 references and finite
 * differences), initializer statistics and error paths. */
#include "harness.h"

/* A host copy of a tensor's values as f32 (caller frees). */
static float *host_f32(const cml_tensor *t) {
    int64_t n = cml_tensor_numel(t);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (v && cml_tensor_to_host(t, v, (size_t)n * sizeof *v) != CML_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static cml_tensor *param_named(const cml_module *m, const char *name) {
    cml_param ps[16];
    int n = cml_module_parameters(m, ps, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(ps[i].name, name) == 0) return ps[i].tensor;
    return NULL;
}

/* y = x W^T + b in float64 for x (rows, in). */
static void linear_ref(const float *x, const float *w, const float *b, int64_t rows, int64_t in, int64_t out,
                       double *y) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? (double)b[o] : 0.0;
            for (int64_t k = 0; k < in; k++) acc += (double)x[r * in + k] * (double)w[o * in + k];
            y[r * out + o] = acc;
        }
}

static void check_linear(cml_module *lin, int64_t in, int64_t out, bool bias, int ndim, const int64_t *shape,
                         cml_rng *rng) {
    cml_tensor *x = cml_tensor_rand(ndim, shape, -2.0f, 2.0f, rng, CML_F32, CML_DEVICE_CPU);
    cml_tensor *y = cml_module_forward(lin, x);
    CHECK_NOT_NULL(y);
    if (!x || !y) {
        cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
        return;
    }
    CHECK(cml_tensor_ndim(y) == ndim);
    for (int d = 0; d < ndim - 1; d++) CHECK(cml_tensor_size(y, d) == shape[d]);
    CHECK(cml_tensor_size(y, -1) == out);
    int64_t rows = cml_tensor_numel(x) / in;
    float *xv = host_f32(x), *yv = host_f32(y);
    float *wv = host_f32(param_named(lin, "weight"));
    float *bv = bias ? host_f32(param_named(lin, "bias")) : NULL;
    double *ref = malloc((size_t)(rows * out) * sizeof *ref);
    linear_ref(xv, wv, bv, rows, in, out, ref);
    double err = th_rel_error(yv, ref, rows * out);
    CHECK_MSG(err < 1e-5, "relative error %g", err);
    free(xv);
    free(yv);
    free(wv);
    free(bv);
    free(ref);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
}

static void test_linear_forward(void) {
    cml_rng rng;
    cml_rng_init(&rng, 11);
    cml_module *lin = cml_linear_create(7, 5, true, &rng);
    CHECK_NOT_NULL(lin);
    if (!lin) return;
    CHECK(strcmp(lin->ops->type, "Linear") == 0);
    CHECK(cml_module_parameters(lin, NULL, 0) == 2);
    CHECK(cml_module_num_elements(lin) == 7 * 5 + 5);
    /* Default init: W and b uniform in +-1/sqrt(in). */
    cml_tensor *w = param_named(lin, "weight"), *b = param_named(lin, "bias");
    CHECK(w && cml_tensor_ndim(w) == 2 && cml_tensor_size(w, 0) == 5 && cml_tensor_size(w, 1) == 7);
    CHECK(b && cml_tensor_ndim(b) == 1 && cml_tensor_size(b, 0) == 5);
    CHECK(cml_tensor_requires_grad(w) && cml_tensor_requires_grad(b));
    float *wv = host_f32(w);
    double bound = 1.0 / sqrt(7.0);
    for (int i = 0; wv && i < 35; i++) CHECK(fabs(wv[i]) <= bound);
    free(wv);

    check_linear(lin, 7, 5, true, 2, (const int64_t[]){4, 7}, &rng);
    check_linear(lin, 7, 5, true, 3, (const int64_t[]){2, 3, 7}, &rng);
    check_linear(lin, 7, 5, true, 1, (const int64_t[]){7}, &rng);
    cml_module_destroy(lin);

    cml_module *nb = cml_linear_create(6, 4, false, &rng);
    CHECK_NOT_NULL(nb);
    if (nb) {
        CHECK(cml_module_parameters(nb, NULL, 0) == 1);
        check_linear(nb, 6, 4, false, 4, (const int64_t[]){2, 1, 3, 6}, &rng);
    }
    cml_module_destroy(nb);

    /* Same seed, same parameters. */
    cml_rng r1, r2;
    cml_rng_init(&r1, 5);
    cml_rng_init(&r2, 5);
    cml_module *a = cml_linear_create(3, 3, true, &r1), *c = cml_linear_create(3, 3, true, &r2);
    if (a && c) {
        float *av = host_f32(param_named(a, "weight")), *cv = host_f32(param_named(c, "weight"));
        CHECK(av && cv && memcmp(av, cv, 9 * sizeof(float)) == 0);
        free(av);
        free(cv);
    }
    cml_module_destroy(a);
    cml_module_destroy(c);
}

static cml_tensor *linear_fn(cml_tensor *const *inputs, int n, void *user) {
    return cml_module_forward((cml_module *)user, inputs[0]);
}

static void test_linear_gradcheck(void) {
    cml_rng rng;
    cml_rng_init(&rng, 21);
    cml_module *lin = cml_linear_create(4, 3, true, &rng);
    CHECK_NOT_NULL(lin);
    if (!lin) return;
    const int64_t shapes[2][3] = {{5, 4, 0}, {2, 3, 4}};
    for (int k = 0; k < 2; k++) {
        cml_tensor *x = cml_tensor_rand(k == 0 ? 2 : 3, shapes[k], -1.0f, 1.0f, &rng, CML_F32, CML_DEVICE_CPU);
        cml_tensor_set_requires_grad(x, true);
        cml_tensor *inputs[3] = {x, param_named(lin, "weight"), param_named(lin, "bias")};
        cml_gradcheck_opts o = {1e-2, 1e-3, 1e-2, 3};
        CHECK_OK(cml_gradcheck(linear_fn, inputs, 3, lin, &o));
        CHECK(cml_tensor_grad(inputs[1]) != NULL && cml_tensor_grad(inputs[2]) != NULL);
        cml_tensor_release(x);
    }
    cml_module_destroy(lin);
}

/* A custom module: y = Sequential(x) * scale, with a child named "layers". */
typedef struct net_module {
    cml_module base;
    int *destroyed;
} net_module;

static cml_tensor *net_forward(cml_module *m, const cml_tensor *x) {
    cml_tensor *h = cml_module_forward(m->children[0], x);
    cml_tensor *y = cml_mul(h, m->params[0]);
    cml_tensor_release(h);
    return y;
}

static void net_destroy(cml_module *m) { (*((net_module *)m)->destroyed)++; }

static const cml_module_ops net_ops = {"Net", net_forward, net_destroy};

static void test_parameters(void) {
    cml_rng rng;
    cml_rng_init(&rng, 3);
    const int64_t sizes[4] = {4, 8, 8, 3};
    cml_module *mlp = cml_mlp_create(sizes, 4, CML_ACT_RELU, 0.1f, &rng);
    CHECK_NOT_NULL(mlp);
    if (!mlp) return;
    /* Linear ReLU Dropout Linear ReLU Dropout Linear */
    CHECK(mlp->n_children == 7);
    CHECK(cml_module_parameters(mlp, NULL, 0) == 6);
    CHECK(cml_module_num_elements(mlp) == 4 * 8 + 8 + 8 * 8 + 8 + 8 * 3 + 3);
    cml_param ps[8];
    CHECK(cml_module_parameters(mlp, ps, 8) == 6);
    const char *want[6] = {"0.weight", "0.bias", "3.weight", "3.bias", "6.weight", "6.bias"};
    for (int i = 0; i < 6; i++) CHECK_MSG(strcmp(ps[i].name, want[i]) == 0, "param %d is %s", i, ps[i].name);
    CHECK(cml_tensor_size(ps[4].tensor, 0) == 3 && cml_tensor_size(ps[4].tensor, 1) == 8);
    cml_param two[2];
    CHECK(cml_module_parameters(mlp, two, 2) == 6);
    CHECK(strcmp(two[1].name, "0.bias") == 0);

    /* Nest it in a custom module: "scale", "layers.0.weight", ... */
    int destroyed = 0;
    net_module *net = calloc(1, sizeof *net);
    net->base.ops = &net_ops;
    net->base.training = true;
    net->destroyed = &destroyed;
    cml_tensor *scale = cml_tensor_full(0, NULL, 2.0, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(scale, true);
    CHECK_OK(cml_module_add_param(&net->base, "scale", scale));
    CHECK_OK(cml_module_add_child(&net->base, "layers", mlp));
    cml_param all[8];
    CHECK(cml_module_parameters(&net->base, all, 8) == 7);
    CHECK(strcmp(all[0].name, "scale") == 0);
    CHECK(strcmp(all[1].name, "layers.0.weight") == 0);
    CHECK(strcmp(all[4].name, "layers.3.bias") == 0);
    CHECK(strcmp(all[6].name, "layers.6.bias") == 0);
    CHECK(cml_module_num_elements(&net->base) == 1 + 139);

    /* Registration errors (ownership of the tensor passes even then). */
    CHECK_STATUS(cml_module_add_param(&net->base, "scale", cml_tensor_zeros(1, (const int64_t[]){2}, CML_F32,
                                                                          CML_DEVICE_CPU)),
                 CML_ERR_INVALID_ARG, "already exists");
    CHECK_STATUS(cml_module_add_param(&net->base, "a.b", cml_tensor_zeros(1, (const int64_t[]){2}, CML_F32,
                                                                        CML_DEVICE_CPU)),
                 CML_ERR_INVALID_ARG, "must not contain '.'");
    CHECK_STATUS(cml_module_add_param(&net->base, "x", NULL), CML_ERR_INVALID_ARG, "must not be NULL");
    CHECK_STATUS(cml_module_add_child(&net->base, "layers", cml_relu_create()), CML_ERR_INVALID_ARG, "already exists");
    CHECK_STATUS(cml_module_add_child(NULL, "x", cml_relu_create()), CML_ERR_INVALID_ARG, "m must not be NULL");
    CHECK(cml_module_parameters(&net->base, NULL, 0) == 7);
    cml_clear_error();
    CHECK(cml_module_parameters(NULL, NULL, 0) == -1);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_module_parameters");

    /* train() reaches every descendant. */
    cml_module_train(&net->base, false);
    CHECK(!net->base.training && !mlp->training && !mlp->children[2]->training);
    cml_module_train(&net->base, true);
    CHECK(net->base.training && mlp->children[5]->training);

    /* Forward and backward through the whole tree: every parameter gets a grad. */
    cml_tensor *x = cml_tensor_rand(2, (const int64_t[]){5, 4}, -1.0f, 1.0f, &rng, CML_F32, CML_DEVICE_CPU);
    cml_tensor *y = cml_module_forward(&net->base, x);
    CHECK_NOT_NULL(y);
    cml_tensor *loss = cml_sum(y, NULL, 0, false);
    CHECK_OK(cml_backward(loss, NULL));
    for (int i = 0; i < 7; i++) CHECK_MSG(cml_tensor_grad(all[i].tensor) != NULL, "%s has no grad", all[i].name);
    cml_tensor_release_all((cml_tensor *[]){x, y, loss}, 3);

    cml_module_destroy(&net->base);
    CHECK(destroyed == 1);
    cml_module_destroy(NULL);
}

static double mean_of(const float *v, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    return s / (double)n;
}

static double std_of(const float *v, int64_t n) {
    double m = mean_of(v, n), s = 0;
    for (int64_t i = 0; i < n; i++) s += ((double)v[i] - m) * ((double)v[i] - m);
    return sqrt(s / (double)(n - 1));
}

static double maxabs_of(const float *v, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)v[i]));
    return m;
}

typedef cml_status (*init_fn)(cml_tensor *, float, cml_rng *);

static void check_init(init_fn f, bool uniform, double want_std, int ndim, const int64_t *shape, float gain) {
    cml_rng rng;
    cml_rng_init(&rng, 1234);
    cml_tensor *t = cml_tensor_zeros(ndim, shape, CML_F32, CML_DEVICE_CPU);
    CHECK_OK(f(t, gain, &rng));
    int64_t n = cml_tensor_numel(t);
    float *v = host_f32(t);
    if (!v) return;
    double sd = std_of(v, n), mean = mean_of(v, n);
    CHECK_MSG(fabs(sd / want_std - 1.0) < 0.02, "std %g, want %g", sd, want_std);
    CHECK_MSG(fabs(mean) < 0.02 * want_std, "mean %g (std %g)", mean, want_std);
    if (uniform) {
        double bound = sqrt(3.0) * want_std, mx = maxabs_of(v, n);
        CHECK_MSG(mx <= bound * (1 + 1e-6) && mx > 0.99 * bound, "max |v| %g, bound %g", mx, bound);
    }
    /* Deterministic for a seed. */
    cml_tensor *t2 = cml_tensor_zeros(ndim, shape, CML_F32, CML_DEVICE_CPU);
    cml_rng_init(&rng, 1234);
    CHECK_OK(f(t2, gain, &rng));
    float *v2 = host_f32(t2);
    CHECK(v2 && memcmp(v, v2, (size_t)n * sizeof *v) == 0);
    free(v);
    free(v2);
    cml_tensor_release_all((cml_tensor *[]){t, t2}, 2);
}

static void test_init_statistics(void) {
    const int64_t fc[2] = {256, 512};         /* fan_in 512, fan_out 256 */
    const int64_t conv[4] = {64, 32, 3, 3};   /* fan_in 288, fan_out 576 */
    float g = (float)sqrt(2.0);
    check_init(cml_init_kaiming_uniform_, true, (double)g / sqrt(512.0), 2, fc, g);
    check_init(cml_init_kaiming_normal_, false, (double)g / sqrt(512.0), 2, fc, g);
    check_init(cml_init_xavier_uniform_, true, sqrt(2.0 / (512 + 256)), 2, fc, 1.0f);
    check_init(cml_init_xavier_normal_, false, 0.5 * sqrt(2.0 / (512 + 256)), 2, fc, 0.5f);
    check_init(cml_init_kaiming_uniform_, true, 1.0 / sqrt(288.0), 4, conv, 1.0f);
    check_init(cml_init_xavier_normal_, false, sqrt(2.0 / (288 + 576)), 4, conv, 1.0f);

    /* uniform_/normal_ draw exactly what cml_tensor_rand/randn draw. */
    cml_rng r1, r2;
    cml_rng_init(&r1, 77);
    cml_rng_init(&r2, 77);
    const int64_t shape[2] = {33, 17};
    cml_tensor *a = cml_tensor_zeros(2, shape, CML_F32, CML_DEVICE_CPU);
    CHECK_OK(cml_init_uniform_(a, -0.5f, 1.5f, &r1));
    cml_tensor *b = cml_tensor_rand(2, shape, -0.5f, 1.5f, &r2, CML_F32, CML_DEVICE_CPU);
    CHECK_OK(cml_init_normal_(a, 0.25f, 3.0f, &r1));
    cml_tensor *c = cml_tensor_randn(2, shape, 0.25f, 3.0f, &r2, CML_F32, CML_DEVICE_CPU);
    float *av = host_f32(a), *cv = host_f32(c);
    CHECK(av && cv && memcmp(av, cv, 33 * 17 * sizeof(float)) == 0);
    CHECK(r1.offset == r2.offset);
    free(av);
    free(cv);
    cml_tensor_release_all((cml_tensor *[]){a, b, c}, 3);

    /* Refusals. */
    cml_rng rng;
    cml_rng_init(&rng, 1);
    cml_tensor *d = cml_tensor_zeros(2, shape, CML_BF16, CML_DEVICE_CPU);
    CHECK_STATUS(cml_init_uniform_(d, 0.0f, 1.0f, &rng), CML_ERR_DTYPE, "f32");
    cml_tensor *f = cml_tensor_zeros(2, shape, CML_F32, CML_DEVICE_CPU);
    cml_tensor *ft = cml_transpose(f, 0, 1);
    CHECK_STATUS(cml_init_xavier_uniform_(ft, 1.0f, &rng), CML_ERR_INVALID_ARG, "contiguous");
    CHECK_STATUS(cml_init_uniform_(f, 1.0f, 0.0f, &rng), CML_ERR_INVALID_ARG, "low <= high");
    CHECK_STATUS(cml_init_normal_(f, 0.0f, -1.0f, &rng), CML_ERR_INVALID_ARG, "std=-1");
    CHECK_STATUS(cml_init_normal_(NULL, 0.0f, 1.0f, &rng), CML_ERR_INVALID_ARG, "t must not be NULL");
    CHECK_STATUS(cml_init_normal_(f, 0.0f, 1.0f, NULL), CML_ERR_INVALID_ARG, "rng must not be NULL");
    cml_tensor *v1 = cml_tensor_zeros(1, shape, CML_F32, CML_DEVICE_CPU);
    CHECK_STATUS(cml_init_kaiming_normal_(v1, 1.0f, &rng), CML_ERR_SHAPE, "at least 2 dims");
    CHECK_STATUS(cml_init_kaiming_normal_(f, -1.0f, &rng), CML_ERR_INVALID_ARG, "gain=-1");
    cml_tensor_release_all((cml_tensor *[]){d, f, ft, v1}, 4);
}

static void test_activations(void) {
    const float xs[6] = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f};
    cml_tensor *x = cml_tensor_from_host(xs, 2, (const int64_t[]){2, 3}, CML_F32, CML_DEVICE_CPU);
    cml_module *mods[4] = {cml_relu_create(), cml_gelu_create(CML_GELU_ERF), cml_gelu_create(CML_GELU_TANH),
                           cml_tanh_create()};
    for (int k = 0; k < 4; k++) {
        CHECK_NOT_NULL(mods[k]);
        cml_tensor *y = cml_module_forward(mods[k], x);
        CHECK_NOT_NULL(y);
        float *yv = y ? host_f32(y) : NULL;
        for (int i = 0; yv && i < 6; i++) {
            double v = xs[i], want;
            if (k == 0) want = v > 0 ? v : 0;
            else if (k == 1) want = 0.5 * v * (1 + erf(v / sqrt(2.0)));
            else if (k == 2) want = 0.5 * v * (1 + tanh(sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
            else want = tanh(v);
            CHECK_NEAR(yv[i], want, 1e-5);
        }
        free(yv);
        cml_tensor_release(y);
        cml_module_destroy(mods[k]);
    }
    cml_clear_error();
    CHECK(cml_gelu_create((cml_gelu_approx)7) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "approx=7");

    /* Flatten keeps the first dim. */
    cml_module *fl = cml_flatten_create();
    cml_tensor *x3 = cml_tensor_zeros(3, (const int64_t[]){2, 3, 4}, CML_F32, CML_DEVICE_CPU);
    cml_tensor *y3 = cml_module_forward(fl, x3);
    CHECK(y3 && cml_tensor_ndim(y3) == 2 && cml_tensor_size(y3, 0) == 2 && cml_tensor_size(y3, 1) == 12);
    cml_tensor *x1 = cml_tensor_zeros(1, (const int64_t[]){4}, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_module_forward(fl, x1) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "at least 2 dims");
    cml_tensor_release_all((cml_tensor *[]){x, x3, y3, x1}, 4);
    cml_module_destroy(fl);
}

static void test_dropout(void) {
    const int64_t shape[2] = {100, 100};
    cml_tensor *x = cml_tensor_full(2, shape, 3.0, CML_F32, CML_DEVICE_CPU);
    cml_module *d = cml_dropout_create(0.25f, 99), *d2 = cml_dropout_create(0.25f, 99);
    CHECK_NOT_NULL(d);
    CHECK_NOT_NULL(d2);
    if (!d || !d2 || !x) goto done;
    CHECK(d->training);
    cml_tensor *y = cml_module_forward(d, x), *y2 = cml_module_forward(d2, x), *y3 = cml_module_forward(d, x);
    CHECK_NOT_NULL(y);
    float *v = y ? host_f32(y) : NULL, *v2 = y2 ? host_f32(y2) : NULL, *v3 = y3 ? host_f32(y3) : NULL;
    if (v && v2 && v3) {
        int zeros = 0, bad = 0;
        for (int i = 0; i < 10000; i++) {
            if (v[i] == 0.0f) zeros++;
            else if (fabsf(v[i] - 4.0f) > 1e-6f) bad++;
        }
        CHECK_MSG(zeros > 2300 && zeros < 2700, "%d zeros of 10000 at p=0.25", zeros);
        CHECK_MSG(bad == 0, "%d kept values are not x / (1 - p)", bad);
        CHECK(memcmp(v, v2, 10000 * sizeof(float)) == 0);  /* same seed, same mask */
        CHECK(memcmp(v, v3, 10000 * sizeof(float)) != 0);  /* the generator advances */
    }
    free(v);
    free(v2);
    free(v3);
    cml_tensor_release_all((cml_tensor *[]){y, y2, y3}, 3);

    /* Eval mode: identity. */
    cml_module_train(d, false);
    cml_tensor *ye = cml_module_forward(d, x);
    float *ve = ye ? host_f32(ye) : NULL;
    int diff = 0;
    for (int i = 0; ve && i < 10000; i++) diff += ve[i] != 3.0f;
    CHECK(ve && diff == 0);
    free(ve);
    cml_tensor_release(ye);

    cml_clear_error();
    CHECK(cml_dropout_create(1.0f, 0) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "p=1 must be in [0, 1)");
done:
    cml_module_destroy(d);
    cml_module_destroy(d2);
    cml_tensor_release(x);
}

static void test_sequential_errors(void) {
    cml_rng rng;
    cml_rng_init(&rng, 8);
    cml_module *seq = cml_sequential_create(
        (cml_module *[]){cml_linear_create(4, 8, true, &rng), cml_relu_create(), cml_linear_create(7, 2, true, &rng)},
        3);
    CHECK_NOT_NULL(seq);
    if (!seq) return;
    CHECK(strcmp(seq->child_names[2], "2") == 0);
    cml_tensor *bad = cml_tensor_zeros(2, (const int64_t[]){3, 5}, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_module_forward(seq, bad) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "child 0 (Linear)");
    CHECK_ERROR(CML_ERR_SHAPE, "in_features=4");
    /* The mismatch between layers 0 and 2 shows up at child 2. */
    cml_tensor *good = cml_tensor_zeros(2, (const int64_t[]){3, 4}, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_module_forward(seq, good) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "child 2 (Linear)");
    CHECK_ERROR(CML_ERR_SHAPE, "[3, 8]");
    /* NULL propagates without overwriting an earlier error. */
    cml_clear_error();
    CHECK(cml_module_forward(seq, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "x must not be NULL");
    cml_tensor_release_all((cml_tensor *[]){bad, good}, 2);
    cml_module_destroy(seq);

    /* Ownership passes even on failure (ASan reports a leak otherwise). */
    cml_clear_error();
    CHECK(cml_sequential_create((cml_module *[]){cml_relu_create(), NULL, cml_tanh_create()}, 3) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "mods[1] is NULL");
    cml_module *r = cml_relu_create();
    cml_clear_error();
    CHECK(cml_sequential_create((cml_module *[]){r, r}, 2) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "same module");

    /* An empty Sequential is the identity. */
    cml_module *empty = cml_sequential_create(NULL, 0);
    CHECK_NOT_NULL(empty);
    cml_tensor *x = cml_tensor_zeros(1, (const int64_t[]){2}, CML_F32, CML_DEVICE_CPU);
    cml_tensor *y = cml_module_forward(empty, x);
    CHECK(y == x);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
    cml_module_destroy(empty);

    /* Creation errors name the function and the argument. */
    cml_clear_error();
    CHECK(cml_linear_create(0, 3, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "cml_linear_create: in_features=0 must be >= 1");
    CHECK(cml_linear_create(3, -2, true, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "out_features=-2 must be >= 1");
    CHECK(cml_linear_create(3, 2, true, NULL) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "rng must not be NULL");
    CHECK(cml_mlp_create((const int64_t[]){4}, 1, CML_ACT_RELU, 0.0f, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "n_sizes=1");
    CHECK(cml_mlp_create((const int64_t[]){4, 0, 2}, 3, CML_ACT_RELU, 0.0f, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "sizes[1]=0");
    CHECK(cml_mlp_create((const int64_t[]){4, 2}, 2, (cml_activation)9, 0.0f, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "act=9");
    CHECK(cml_mlp_create((const int64_t[]){4, 2}, 2, CML_ACT_TANH, 1.5f, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "dropout=1.5");

    /* A two-layer MLP without dropout: Linear GELU Linear. */
    cml_module *mlp = cml_mlp_create((const int64_t[]){3, 5, 2}, 3, CML_ACT_GELU, 0.0f, &rng);
    CHECK(mlp && mlp->n_children == 3 && strcmp(mlp->children[1]->ops->type, "GELU") == 0);
    cml_module_destroy(mlp);
}

int main(void) {
    RUN(test_linear_forward);
    RUN(test_linear_gradcheck);
    RUN(test_parameters);
    RUN(test_init_statistics);
    RUN(test_activations);
    RUN(test_dropout);
    RUN(test_sequential_errors);
    return th_finish();
}
