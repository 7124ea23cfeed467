/* The optimizers' fused path on the CPU: cml_optim_clip_grad_norm folded into
 * cml_optim_step against cml_clip_grad_norm (grads scaled in place) followed by
 * a step, for AdamW and SGD with momentum, over parameters of odd sizes, with a
 * parameter that misses its grad on the first step (two groups of step counts);
 * grads changed between clip and step; zero_grad cancelling a clip; and the
 * argument errors. */
#include "harness.h"

#define NP 3
static const int64_t SIZES[NP] = {7, 1025, 20000};

typedef struct fixture {
    cml_tensor *t[NP];
    cml_param params[NP];
} fixture;

static void fixture_init(fixture *f, uint64_t seed) {
    cml_rng r;
    cml_rng_init(&r, seed);
    for (int i = 0; i < NP; i++) {
        f->t[i] = cml_tensor_rand(1, &SIZES[i], -1.0f, 1.0f, &r, CML_F32, CML_DEVICE_CPU);
        cml_tensor_set_requires_grad(f->t[i], true);
        snprintf(f->params[i].name, CML_NAME_MAX, "p%d", i);
        f->params[i].tensor = f->t[i];
    }
}

static void fixture_free(fixture *f) { cml_tensor_release_all(f->t, NP); }

/* Accumulates g (n floats) into p's grad through backward of sum(p * g). */
static void add_grad(cml_tensor *p, const float *g) {
    cml_tensor *gt = cml_tensor_from_host(g, 1, cml_tensor_shape(p), CML_F32, CML_DEVICE_CPU);
    cml_tensor *pg = cml_mul(p, gt);
    cml_tensor *l = cml_sum(pg, NULL, 0, false);
    CHECK_OK(cml_backward(l, NULL));
    cml_tensor_release_all((cml_tensor *[]){gt, pg, l}, 3);
}

/* The same random grads (scaled by `scale`) for the params of both fixtures flagged in `which`. */
static void set_grads(fixture *a, fixture *b, const bool *which, uint64_t seed, float scale) {
    cml_rng r;
    cml_rng_init(&r, seed);
    for (int i = 0; i < NP; i++) {
        cml_tensor_clear_grad(a->t[i]);
        if (b) cml_tensor_clear_grad(b->t[i]);
        if (!which[i]) continue;
        float *g = malloc(sizeof(float) * (size_t)SIZES[i]);
        th_fill_uniform(g, SIZES[i], -scale, scale, &r);
        add_grad(a->t[i], g);
        if (b) add_grad(b->t[i], g);
        free(g);
    }
}

/* Params of a and b: bitwise equal when `exact`, else within 1e-6 (norm-wise). */
static void compare_params(const char *what, int step, const fixture *a, const fixture *b, bool exact) {
    for (int i = 0; i < NP; i++) {
        float *x = malloc(sizeof(float) * (size_t)SIZES[i]), *y = malloc(sizeof(float) * (size_t)SIZES[i]);
        CHECK_OK(cml_tensor_to_host(a->t[i], x, sizeof(float) * (size_t)SIZES[i]));
        CHECK_OK(cml_tensor_to_host(b->t[i], y, sizeof(float) * (size_t)SIZES[i]));
        if (exact) {
            CHECK_MSG(memcmp(x, y, sizeof(float) * (size_t)SIZES[i]) == 0, "%s step %d: param %d differs", what, step,
                      i);
        } else {
            double num = 0, den = 0;
            for (int64_t j = 0; j < SIZES[i]; j++) {
                num += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
                den += (double)x[j] * x[j];
            }
            CHECK_MSG(sqrt(num / den) <= 1e-6, "%s step %d: param %d relative error %.3g", what, step, i,
                      sqrt(num / den));
        }
        free(x), free(y);
    }
}

static cml_optim *make_opt(int alg, const fixture *f) {
    if (alg == 0) return cml_adamw_create(f->params, NP, (cml_adam_opts){.lr = 1e-2f, .weight_decay = 0.1f});
    return cml_sgd_create(f->params, NP, (cml_sgd_opts){.lr = 0.05f, .momentum = 0.9f, .nesterov = true});
}

/* Three steps; param 1 has no grad on the first (so steps 2 and 3 have two step counts). */
static void test_clip_matches_clip_then_step(void) {
    for (int alg = 0; alg < 2; alg++) {
        const char *what = alg ? "sgd" : "adamw";
        fixture a, b;
        fixture_init(&a, 10);
        fixture_init(&b, 10);
        cml_optim *oa = make_opt(alg, &a), *ob = make_opt(alg, &b);
        CHECK(oa && ob);
        for (int step = 0; oa && ob && step < 3; step++) {
            set_grads(&a, &b, (const bool[]){true, step > 0, true}, 100 + (uint64_t)step, 2.0f);
            const double max_norm = 3.0 + step; /* below the norms (about 80): clipping happens */
            double na = 0, nb = 0;
            CHECK_OK(cml_clip_grad_norm(a.params, NP, max_norm, &na));
            CHECK_OK(cml_optim_step(oa));
            CHECK_OK(cml_optim_clip_grad_norm(ob, max_norm));
            CHECK_OK(cml_optim_grad_norm(ob, &nb));
            CHECK_OK(cml_optim_step(ob));
            CHECK_MSG(fabs(na - nb) <= 1e-12 * na, "%s step %d: norm %.17g, cml_clip_grad_norm's %.17g", what, step, nb,
                      na);
            /* The two norms are summed in different orders; when their f32 coefficients agree the
             * results must be the same bits (and they do for these inputs). */
            const bool same_coef = (float)(max_norm / (na + 1e-6)) == (float)(max_norm / (nb + 1e-6));
            CHECK(same_coef);
            compare_params(what, step, &a, &b, same_coef);
            /* the fused step left b's grads unscaled */
            float g0a[7], g0b[7];
            CHECK_OK(cml_tensor_to_host(cml_tensor_grad(a.t[0]), g0a, sizeof g0a));
            CHECK_OK(cml_tensor_to_host(cml_tensor_grad(b.t[0]), g0b, sizeof g0b));
            CHECK(fabsf(g0b[0]) > fabsf(g0a[0]));
        }
        CHECK(cml_optim_steps(ob) == 3);
        cml_param st[16];
        CHECK(cml_optim_state(ob, st, 16) == cml_optim_state(oa, NULL, 0));
        cml_optim_destroy(oa), cml_optim_destroy(ob);
        fixture_free(&a), fixture_free(&b);
    }
}

static void test_grads_changed_after_clip(void) {
    fixture a, b;
    fixture_init(&a, 20);
    fixture_init(&b, 20);
    cml_optim *o = make_opt(0, &a);
    set_grads(&a, NULL, (const bool[]){true, true, true}, 5, 1.0f);
    CHECK_OK(cml_optim_clip_grad_norm(o, 1.0));
    cml_tensor_clear_grad(a.t[1]);
    CHECK_STATUS(cml_optim_step(o), CML_ERR_INVALID_ARG,
                 "cml_optim_step: the parameters' grads changed after cml_optim_clip_grad_norm");
    compare_params("after the refused step", 0, &a, &b, true); /* nothing was updated */
    CHECK(cml_optim_steps(o) == 0);
    CHECK_OK(cml_optim_step(o)); /* the clip is gone: a plain step */
    CHECK(cml_optim_steps(o) == 1);
    cml_optim_destroy(o);
    fixture_free(&a), fixture_free(&b);
}

/* clip, zero_grad, new grads accumulated into the same buffers, step == an unclipped step. */
static void test_zero_grad_cancels_clip(void) {
    fixture a, b;
    fixture_init(&a, 30);
    fixture_init(&b, 30);
    cml_optim *oa = make_opt(0, &a), *ob = make_opt(0, &b);
    set_grads(&a, &b, (const bool[]){true, true, true}, 6, 1.0f);
    CHECK_OK(cml_optim_clip_grad_norm(oa, 1e-3));
    cml_optim_zero_grad(oa);
    cml_optim_zero_grad(ob);
    cml_rng r;
    cml_rng_init(&r, 7);
    for (int i = 0; i < NP; i++) {
        float *g = malloc(sizeof(float) * (size_t)SIZES[i]);
        th_fill_uniform(g, SIZES[i], -1.0f, 1.0f, &r);
        add_grad(a.t[i], g);
        add_grad(b.t[i], g);
        free(g);
    }
    CHECK_OK(cml_optim_step(oa));
    CHECK_OK(cml_optim_step(ob));
    compare_params("zero_grad after clip", 0, &a, &b, true);
    cml_optim_destroy(oa), cml_optim_destroy(ob);
    fixture_free(&a), fixture_free(&b);
}

static void test_errors(void) {
    fixture f;
    fixture_init(&f, 40);
    cml_optim *o = make_opt(0, &f);
    double norm;
    CHECK_STATUS(cml_optim_grad_norm(o, &norm), CML_ERR_INVALID_ARG, "no norm yet");
    CHECK_STATUS(cml_optim_grad_norm(o, NULL), CML_ERR_INVALID_ARG, "opt and norm must not be NULL");
    CHECK_STATUS(cml_optim_clip_grad_norm(NULL, 1.0), CML_ERR_INVALID_ARG, "opt must not be NULL");
    CHECK_STATUS(cml_optim_clip_grad_norm(o, -1.0), CML_ERR_INVALID_ARG, "max_norm=-1 must be finite and >= 0");
    CHECK_STATUS(cml_optim_clip_grad_norm(o, INFINITY), CML_ERR_INVALID_ARG, "max_norm=inf");
    /* no grads at all: norm 0, and the step changes nothing */
    CHECK_OK(cml_optim_clip_grad_norm(o, 1.0));
    CHECK_OK(cml_optim_grad_norm(o, &norm));
    CHECK(norm == 0.0);
    CHECK_OK(cml_optim_step(o));
    cml_optim_destroy(o);
    fixture_free(&f);
}

int main(void) {
    RUN(test_clip_matches_clip_then_step);
    RUN(test_grads_changed_after_clip);
    RUN(test_zero_grad_cancels_clip);
    RUN(test_errors);
    return th_finish();
}
