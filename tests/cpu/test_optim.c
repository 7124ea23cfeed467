/* optim: SGD/Adam/AdamW vs float64 PyTorch update equations, skipped params,
 * gradient clipping, learning-rate schedules, validation and a convergence run. */
#include "harness.h"

#define NP 2 /* parameters per test */
#define NE 6 /* elements per parameter */

typedef struct ref_state {
    double p[NP][NE], buf[NP][NE], m[NP][NE], v[NP][NE];
    int steps[NP];
} ref_state;

typedef struct fixture {
    cml_tensor *t[NP];
    cml_param params[NP];
    ref_state ref;
    cml_rng rng;
} fixture;

static void fixture_init(fixture *f, uint64_t seed) {
    memset(f, 0, sizeof *f);
    cml_rng_init(&f->rng, seed);
    for (int i = 0; i < NP; i++) {
        float v[NE];
        th_fill_uniform(v, NE, -1.0f, 1.0f, &f->rng);
        f->t[i] = cml_tensor_from_host(v, 2, (const int64_t[]){2, 3}, CML_F32, CML_DEVICE_CPU);
        cml_tensor_set_requires_grad(f->t[i], true);
        snprintf(f->params[i].name, CML_NAME_MAX, "layer%d.weight", i);
        f->params[i].tensor = f->t[i];
        for (int j = 0; j < NE; j++) f->ref.p[i][j] = v[j];
    }
}

static void fixture_free(fixture *f) { cml_tensor_release_all(f->t, NP); }

/* Sets param i's grad to g (through backward of sum(p * g); grads are cleared first). */
static void set_grad(cml_tensor *p, const float *g) {
    cml_tensor_clear_grad(p);
    cml_tensor *gt = cml_tensor_from_host(g, cml_tensor_ndim(p), cml_tensor_shape(p), CML_F32, CML_DEVICE_CPU);
    cml_tensor *pg = cml_mul(p, gt);
    cml_tensor *l = cml_sum(pg, NULL, 0, false);
    CHECK_OK(cml_backward(l, NULL));
    cml_tensor_release_all((cml_tensor *[]){gt, pg, l}, 3);
}

/* Draws random grads for the params flagged in `which`, stores them in g. */
static void draw_grads(fixture *f, const bool *which, float g[NP][NE]) {
    for (int i = 0; i < NP; i++) {
        cml_tensor_clear_grad(f->t[i]);
        if (!which[i]) continue;
        th_fill_uniform(g[i], NE, -2.0f, 2.0f, &f->rng);
        set_grad(f->t[i], g[i]);
    }
}

typedef enum algo { ALG_SGD, ALG_ADAM, ALG_ADAMW } algo;

typedef struct hyper {
    double lr, momentum, wd, b1, b2, eps;
    bool nesterov;
} hyper;

/* torch.optim.SGD / Adam / AdamW for one parameter, in float64. */
static void ref_step(ref_state *r, int i, const float *grad, algo a, hyper h) {
    r->steps[i]++;
    int t = r->steps[i];
    for (int j = 0; j < NE; j++) {
        double p = r->p[i][j], g = grad[j];
        if (a == ALG_SGD) {
            g += h.wd * p;
            if (h.momentum > 0) {
                r->buf[i][j] = t == 1 ? g : h.momentum * r->buf[i][j] + g;
                g = h.nesterov ? g + h.momentum * r->buf[i][j] : r->buf[i][j];
            }
            p -= h.lr * g;
        } else {
            if (a == ALG_ADAMW) p *= 1.0 - h.lr * h.wd;
            else g += h.wd * p;
            r->m[i][j] = h.b1 * r->m[i][j] + (1 - h.b1) * g;
            r->v[i][j] = h.b2 * r->v[i][j] + (1 - h.b2) * g * g;
            double bc1 = 1 - pow(h.b1, t), bc2 = 1 - pow(h.b2, t);
            p -= h.lr / bc1 * r->m[i][j] / (sqrt(r->v[i][j]) / sqrt(bc2) + h.eps);
        }
        r->p[i][j] = p;
    }
}

static void compare(const fixture *f, const char *what, int step) {
    for (int i = 0; i < NP; i++) {
        float v[NE];
        CHECK_OK(cml_tensor_to_host(f->t[i], v, sizeof v));
        double worst = 0;
        for (int j = 0; j < NE; j++) worst = fmax(worst, fabs((double)v[j] - f->ref.p[i][j]));
        CHECK_MSG(worst < 2e-6, "%s step %d param %d: max |diff| %g", what, step, i, worst);
    }
}

/* Runs `steps` steps with random grads (param 1 has none on the first step). */
static void run_case(const char *what, algo a, hyper h, int steps) {
    fixture f;
    fixture_init(&f, 1000 + (uint64_t)a * 10 + (uint64_t)(h.momentum * 7) + (h.nesterov ? 3 : 0));
    cml_optim *opt = NULL;
    if (a == ALG_SGD) {
        cml_sgd_opts o = {(float)h.lr, (float)h.momentum, h.nesterov, (float)h.wd};
        opt = cml_sgd_create(f.params, NP, o);
    } else {
        cml_adam_opts o = {(float)h.lr, (float)h.b1, (float)h.b2, (float)h.eps, (float)h.wd};
        opt = a == ALG_ADAM ? cml_adam_create(f.params, NP, o) : cml_adamw_create(f.params, NP, o);
        /* The reference uses the float values the optimizer sees. */
        h.b1 = (float)h.b1;
        h.b2 = (float)h.b2;
        h.eps = (float)h.eps;
    }
    h.lr = (float)h.lr;
    h.momentum = (float)h.momentum;
    h.wd = (float)h.wd;
    CHECK_NOT_NULL(opt);
    if (!opt) {
        fixture_free(&f);
        return;
    }
    for (int s = 0; s < steps; s++) {
        float g[NP][NE];
        bool which[NP] = {true, s > 0};
        draw_grads(&f, which, g);
        CHECK_OK(cml_optim_step(opt));
        for (int i = 0; i < NP; i++)
            if (which[i]) ref_step(&f.ref, i, g[i], a, h);
        compare(&f, what, s);
    }
    CHECK(cml_optim_steps(opt) == steps);
    cml_optim_destroy(opt);
    fixture_free(&f);
}

static void test_sgd(void) {
    run_case("sgd", ALG_SGD, (hyper){.lr = 0.1}, 3);
    run_case("sgd+wd", ALG_SGD, (hyper){.lr = 0.05, .wd = 0.1}, 3);
    run_case("sgd+momentum", ALG_SGD, (hyper){.lr = 0.1, .momentum = 0.9}, 3);
    run_case("sgd+nesterov+wd", ALG_SGD, (hyper){.lr = 0.1, .momentum = 0.8, .nesterov = true, .wd = 0.01}, 3);
}

static void test_adam(void) {
    run_case("adam", ALG_ADAM, (hyper){.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8}, 3);
    run_case("adam+wd", ALG_ADAM, (hyper){.lr = 0.1, .b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .wd = 0.05}, 3);
    run_case("adamw", ALG_ADAMW, (hyper){.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.1}, 3);
    run_case("adamw b1=0", ALG_ADAMW, (hyper){.lr = 0.05, .b1 = 0.0, .b2 = 0.95, .eps = 1e-8, .wd = 0.01}, 3);
}

static void test_defaults_and_lr(void) {
    fixture f;
    fixture_init(&f, 5);
    /* beta1 = beta2 = 0 and eps = 0 select 0.9, 0.999, 1e-8. */
    cml_optim *opt = cml_adam_create(f.params, NP, (cml_adam_opts){.lr = 0.01f});
    CHECK_NOT_NULL(opt);
    if (opt) {
        float g[NP][NE];
        draw_grads(&f, (const bool[]){true, true}, g);
        CHECK_OK(cml_optim_step(opt));
        hyper h = {.lr = 0.01f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f};
        for (int i = 0; i < NP; i++) ref_step(&f.ref, i, g[i], ALG_ADAM, h);
        compare(&f, "adam defaults", 0);

        CHECK(cml_optim_lr(opt) == 0.01f);
        cml_optim_set_lr(opt, 0.5f);
        CHECK(cml_optim_lr(opt) == 0.5f);
        cml_clear_error();
        cml_optim_set_lr(opt, -1.0f);
        CHECK_ERROR(CML_ERR_INVALID_ARG, "lr=-1");
        CHECK(cml_optim_lr(opt) == 0.5f);

        /* zero_grad keeps the grads, zeroed; a step with zero grads still updates Adam's state. */
        cml_optim_zero_grad(opt);
        for (int i = 0; i < NP; i++) {
            cml_tensor *gr = cml_tensor_grad(f.t[i]);
            CHECK(gr != NULL);
            float v[NE];
            if (gr && cml_tensor_to_host(gr, v, sizeof v) == CML_OK)
                for (int j = 0; j < NE; j++) CHECK(v[j] == 0.0f);
        }
        float zero[NE] = {0};
        h.lr = 0.5f;
        CHECK_OK(cml_optim_step(opt));
        for (int i = 0; i < NP; i++) ref_step(&f.ref, i, zero, ALG_ADAM, h);
        compare(&f, "adam zero grad", 1);
        CHECK(cml_optim_steps(opt) == 2);
    }
    cml_optim_destroy(opt);

    /* Parameters without a grad are left alone (and so is their state). */
    float before[NE], after[NE];
    for (int i = 0; i < NP; i++) cml_tensor_clear_grad(f.t[i]);
    CHECK_OK(cml_tensor_to_host(f.t[1], before, sizeof before));
    cml_optim *sgd = cml_sgd_create(f.params, NP, (cml_sgd_opts){.lr = 1.0f, .momentum = 0.5f});
    float g0[NE] = {1, 1, 1, 1, 1, 1};
    set_grad(f.t[0], g0);
    CHECK_OK(cml_optim_step(sgd));
    CHECK_OK(cml_tensor_to_host(f.t[1], after, sizeof after));
    CHECK(memcmp(before, after, sizeof before) == 0);
    cml_optim_destroy(sgd);
    cml_optim_destroy(NULL);
    fixture_free(&f);
}

static void test_validation(void) {
    fixture f;
    fixture_init(&f, 9);
    cml_optim *o;
#define CHECK_CREATE_FAILS(expr, status, substr) \
    do {                                          \
        cml_clear_error();                        \
        o = (expr);                               \
        CHECK(o == NULL);                         \
        cml_optim_destroy(o);                     \
        CHECK_ERROR(status, substr);              \
    } while (0)
    CHECK_CREATE_FAILS(cml_sgd_create(f.params, NP, (cml_sgd_opts){.lr = -0.1f}), CML_ERR_INVALID_ARG,
                       "cml_sgd_create: lr=-0.1 must be finite and >= 0");
    CHECK_CREATE_FAILS(cml_sgd_create(f.params, NP, (cml_sgd_opts){.lr = 0.1f, .momentum = 1.0f}), CML_ERR_INVALID_ARG,
                       "momentum=1 must be in [0, 1)");
    CHECK_CREATE_FAILS(cml_sgd_create(f.params, NP, (cml_sgd_opts){.lr = 0.1f, .nesterov = true}), CML_ERR_INVALID_ARG,
                       "nesterov requires momentum > 0");
    CHECK_CREATE_FAILS(cml_sgd_create(f.params, NP, (cml_sgd_opts){.lr = 0.1f, .weight_decay = -1.0f}),
                       CML_ERR_INVALID_ARG, "weight_decay=-1");
    CHECK_CREATE_FAILS(cml_sgd_create(f.params, 0, (cml_sgd_opts){.lr = 0.1f}), CML_ERR_INVALID_ARG, "n=0");
    CHECK_CREATE_FAILS(cml_sgd_create(NULL, 2, (cml_sgd_opts){.lr = 0.1f}), CML_ERR_INVALID_ARG,
                       "params must not be NULL");
    CHECK_CREATE_FAILS(cml_adam_create(f.params, NP, (cml_adam_opts){.lr = 0.1f, .beta1 = 1.0f, .beta2 = 0.9f}),
                       CML_ERR_INVALID_ARG, "beta1=1 and beta2=0.9 must be in [0, 1)");
    CHECK_CREATE_FAILS(cml_adamw_create(f.params, NP, (cml_adam_opts){.lr = 0.1f, .beta1 = 0.9f, .beta2 = -0.5f}),
                       CML_ERR_INVALID_ARG, "cml_adamw_create: beta1=0.9 and beta2=-0.5");
    CHECK_CREATE_FAILS(cml_adam_create(f.params, NP, (cml_adam_opts){.lr = 0.1f, .eps = -1e-8f}), CML_ERR_INVALID_ARG,
                       "eps=-1e-08 must be finite and > 0");
    CHECK_CREATE_FAILS(cml_adamw_create(f.params, NP, (cml_adam_opts){.lr = 0.1f, .weight_decay = -0.01f}),
                       CML_ERR_INVALID_ARG, "weight_decay=-0.01");
    CHECK_CREATE_FAILS(cml_adam_create(f.params, NP, (cml_adam_opts){.lr = NAN}), CML_ERR_INVALID_ARG, "lr=nan");

    /* Parameters must be distinct contiguous f32 leaves; messages name them. */
    cml_param bad[2] = {f.params[0], f.params[1]};
    cml_tensor *h = cml_tensor_zeros(2, (const int64_t[]){2, 3}, CML_BF16, CML_DEVICE_CPU);
    bad[1].tensor = h;
    CHECK_CREATE_FAILS(cml_sgd_create(bad, 2, (cml_sgd_opts){.lr = 0.1f}), CML_ERR_DTYPE,
                       "parameter 1 ('layer1.weight') has dtype bf16; expected f32");
    cml_tensor *tr = cml_transpose(f.t[1], 0, 1);
    bad[1].tensor = tr;
    CHECK_CREATE_FAILS(cml_adam_create(bad, 2, (cml_adam_opts){.lr = 0.1f}), CML_ERR_INVALID_ARG,
                       "parameter 1 ('layer1.weight') must be contiguous");
    bad[1].tensor = f.t[0];
    CHECK_CREATE_FAILS(cml_adamw_create(bad, 2, (cml_adam_opts){.lr = 0.1f}), CML_ERR_INVALID_ARG,
                       "is the same tensor as parameter 0");
    cml_tensor *nonleaf = cml_mul_scalar(f.t[1], 2.0);
    bad[1].tensor = nonleaf;
    CHECK_CREATE_FAILS(cml_sgd_create(bad, 2, (cml_sgd_opts){.lr = 0.1f}), CML_ERR_INVALID_ARG, "must be a leaf");
    bad[1].tensor = NULL;
    CHECK_CREATE_FAILS(cml_sgd_create(bad, 2, (cml_sgd_opts){.lr = 0.1f}), CML_ERR_INVALID_ARG,
                       "parameter 1 ('layer1.weight') is NULL");
#undef CHECK_CREATE_FAILS
    CHECK_STATUS(cml_optim_step(NULL), CML_ERR_INVALID_ARG, "opt must not be NULL");
    cml_tensor_release_all((cml_tensor *[]){h, tr, nonleaf}, 3);
    fixture_free(&f);
}

static double grad_norm(const fixture *f) {
    double s = 0;
    for (int i = 0; i < NP; i++) {
        cml_tensor *g = cml_tensor_grad(f->t[i]);
        if (!g) continue;
        float v[NE];
        if (cml_tensor_to_host(g, v, sizeof v) != CML_OK) return NAN;
        for (int j = 0; j < NE; j++) s += (double)v[j] * v[j];
    }
    return sqrt(s);
}

static void test_clip_grad_norm(void) {
    fixture f;
    fixture_init(&f, 17);
    float g[NP][NE];
    draw_grads(&f, (const bool[]){true, true}, g);
    double want = 0;
    for (int i = 0; i < NP; i++)
        for (int j = 0; j < NE; j++) want += (double)g[i][j] * g[i][j];
    want = sqrt(want);

    /* Below the limit: reported, grads untouched. */
    double norm = -1;
    CHECK_OK(cml_clip_grad_norm(f.params, NP, want * 2, &norm));
    CHECK_NEAR(norm, want, 1e-12 * want);
    float v[NE];
    CHECK_OK(cml_tensor_to_host(cml_tensor_grad(f.t[1]), v, sizeof v));
    CHECK(memcmp(v, g[1], sizeof v) == 0);

    /* Above: scaled to max_norm / (norm + 1e-6), direction kept. */
    double max_norm = want / 3;
    CHECK_OK(cml_clip_grad_norm(f.params, NP, max_norm, &norm));
    CHECK_NEAR(norm, want, 1e-12 * want);
    CHECK_NEAR(grad_norm(&f), max_norm, 1e-6 * max_norm);
    double coef = max_norm / (want + 1e-6);
    CHECK_OK(cml_tensor_to_host(cml_tensor_grad(f.t[0]), v, sizeof v));
    for (int j = 0; j < NE; j++) CHECK_NEAR(v[j], g[0][j] * coef, 1e-6);
    CHECK_OK(cml_clip_grad_norm(f.params, NP, max_norm * 2, NULL));

    /* A parameter without a grad does not count. */
    cml_tensor_clear_grad(f.t[1]);
    double only0 = grad_norm(&f);
    CHECK_OK(cml_clip_grad_norm(f.params, NP, 1e9, &norm));
    CHECK_NEAR(norm, only0, 1e-6 * only0);

    /* Non-finite norm: reported, nothing scaled. */
    float gn[NE] = {1, 2, NAN, 4, 5, 6};
    set_grad(f.t[1], gn);
    CHECK_OK(cml_clip_grad_norm(f.params, NP, 1.0, &norm));
    CHECK(isnan(norm));
    CHECK_OK(cml_tensor_to_host(cml_tensor_grad(f.t[1]), v, sizeof v));
    CHECK(v[0] == 1.0f && v[5] == 6.0f);

    CHECK_STATUS(cml_clip_grad_norm(f.params, NP, -1.0, &norm), CML_ERR_INVALID_ARG, "max_norm=-1");
    CHECK_STATUS(cml_clip_grad_norm(NULL, 2, 1.0, &norm), CML_ERR_INVALID_ARG, "params must not be NULL");
    CHECK_OK(cml_clip_grad_norm(NULL, 0, 1.0, &norm));
    CHECK(norm == 0.0);
    fixture_free(&f);
}

static void test_schedules(void) {
    cml_lr_schedule c = {.kind = CML_LR_CONSTANT, .base_lr = 0.1, .warmup_steps = 10};
    CHECK_NEAR(cml_lr_at(&c, 0), 0.01, 1e-15);
    CHECK_NEAR(cml_lr_at(&c, 4), 0.05, 1e-15);
    CHECK_NEAR(cml_lr_at(&c, 9), 0.1, 1e-15);
    CHECK_NEAR(cml_lr_at(&c, 1000), 0.1, 1e-15);
    c.warmup_steps = 0;
    CHECK(cml_lr_at(&c, 0) == 0.1);

    cml_lr_schedule s = {.kind = CML_LR_STEP, .base_lr = 1.0, .step_size = 30, .gamma = 0.1};
    CHECK_NEAR(cml_lr_at(&s, 0), 1.0, 1e-15);
    CHECK_NEAR(cml_lr_at(&s, 29), 1.0, 1e-15);
    CHECK_NEAR(cml_lr_at(&s, 30), 0.1, 1e-15);
    CHECK_NEAR(cml_lr_at(&s, 65), 0.01, 1e-15);
    s.warmup_steps = 5;
    CHECK_NEAR(cml_lr_at(&s, 1), 0.4, 1e-15);
    CHECK_NEAR(cml_lr_at(&s, 31), 0.1, 1e-15);

    cml_lr_schedule k = {.kind = CML_LR_COSINE, .base_lr = 1e-3, .warmup_steps = 100, .total_steps = 1000,
                         .min_lr = 1e-5};
    const double pi = 3.14159265358979323846;
    CHECK_NEAR(cml_lr_at(&k, 0), 1e-5, 1e-18);
    CHECK_NEAR(cml_lr_at(&k, 49), 5e-4, 1e-18);
    CHECK_NEAR(cml_lr_at(&k, 100), 1e-3, 1e-18);
    CHECK_NEAR(cml_lr_at(&k, 550), 1e-5 + (1e-3 - 1e-5) * 0.5, 1e-15);
    CHECK_NEAR(cml_lr_at(&k, 325), 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + cos(pi * 0.25)), 1e-15);
    CHECK_NEAR(cml_lr_at(&k, 1000), 1e-5, 1e-18);
    CHECK_NEAR(cml_lr_at(&k, 5000), 1e-5, 1e-18);
    /* Monotone after warm-up. */
    bool mono = true;
    for (int64_t t = 101; t <= 1000; t++) mono = mono && cml_lr_at(&k, t) <= cml_lr_at(&k, t - 1);
    CHECK(mono);

    cml_clear_error();
    CHECK(isnan(cml_lr_at(NULL, 0)));
    CHECK_ERROR(CML_ERR_INVALID_ARG, "s must not be NULL");
    s.step_size = 0;
    CHECK(isnan(cml_lr_at(&s, 3)));
    CHECK_ERROR(CML_ERR_INVALID_ARG, "step_size=0");
    CHECK(isnan(cml_lr_at(&c, -1)));
    CHECK_ERROR(CML_ERR_INVALID_ARG, "step=-1");
    cml_lr_schedule bad = {.kind = (cml_lr_kind)7, .base_lr = 1};
    CHECK(isnan(cml_lr_at(&bad, 0)));
    CHECK_ERROR(CML_ERR_INVALID_ARG, "kind=7");
}

/* AdamW on sum((w - target)^2) with a cosine schedule reaches 1e-4. */
static void test_adamw_converges(void) {
    enum { N = 16 };
    cml_rng rng;
    cml_rng_init(&rng, 2024);
    float tv[N];
    th_fill_uniform(tv, N, -1.0f, 1.0f, &rng);
    cml_tensor *target = cml_tensor_from_host(tv, 1, (const int64_t[]){N}, CML_F32, CML_DEVICE_CPU);
    cml_tensor *w = cml_tensor_zeros(1, (const int64_t[]){N}, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(w, true);
    cml_param p = {"w", w};
    cml_optim *opt = cml_adamw_create(&p, 1, (cml_adam_opts){.lr = 0.05f, .weight_decay = 1e-4f});
    CHECK_NOT_NULL(opt);
    cml_lr_schedule sched = {.kind = CML_LR_COSINE, .base_lr = 0.05, .warmup_steps = 10, .total_steps = 500};
    double loss_v = INFINITY;
    for (int64_t step = 0; opt && step < 500; step++) {
        cml_optim_set_lr(opt, (float)cml_lr_at(&sched, step));
        cml_optim_zero_grad(opt);
        cml_tensor *d = cml_sub(w, target);
        cml_tensor *sq = cml_mul(d, d);
        cml_tensor *loss = cml_sum(sq, NULL, 0, false);
        cml_status s = loss ? cml_backward(loss, NULL) : cml_last_status();
        if (s == CML_OK) s = cml_optim_step(opt);
        loss_v = loss ? cml_tensor_item(loss) : NAN;
        cml_tensor_release_all((cml_tensor *[]){d, sq, loss}, 3);
        CHECK_OK(s);
        if (s != CML_OK) break;
    }
    float wv[N];
    CHECK_OK(cml_tensor_to_host(w, wv, sizeof wv));
    double final = 0;
    for (int i = 0; i < N; i++) final += ((double)wv[i] - tv[i]) * ((double)wv[i] - tv[i]);
    CHECK_MSG(final < 1e-4, "final loss %g (last computed %g)", final, loss_v);
    cml_optim_destroy(opt);
    cml_tensor_release_all((cml_tensor *[]){w, target}, 2);
}

int main(void) {
    RUN(test_sgd);
    RUN(test_adam);
    RUN(test_defaults_and_lr);
    RUN(test_validation);
    RUN(test_clip_grad_norm);
    RUN(test_schedules);
    RUN(test_adamw_converges);
    return th_finish();
}
