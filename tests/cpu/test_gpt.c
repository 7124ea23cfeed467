/* GPT: presets and config checks, parameter names and count, forward shapes and
 * errors, GPT-2 initialization, the tied head, a finite-difference check of the
 * whole model's loss, overfitting one batch, key/value-cache generation against
 * recomputing the prefix, and checkpoints (round trip and bitwise resume). */
#include "framework/models/gpt_internal.h"
#include "harness.h"

static cml_gpt_config cfg_of(int64_t L, int64_t H, int64_t C, int64_t T, int64_t V, float dropout) {
    cml_gpt_config c = {L, H, C, T, V, dropout};
    return c;
}

static int64_t expected_params(const cml_gpt_config *c) {
    int64_t C = c->n_embd;
    return c->vocab_size * C + c->block_size * C + c->n_layer * (12 * C * C + 13 * C) + 2 * C;
}

/* Every parameter N(0, std) (LayerNorm gains and biases included), so that no
 * path of the model is trivially zero or identity. */
static void randomize(cml_module *m, float std, uint64_t seed) {
    cml_rng rng;
    cml_rng_init(&rng, seed);
    cml_param ps[256];
    int n = cml_module_parameters(m, ps, 256);
    for (int i = 0; i < n; i++) cml_init_normal_(ps[i].tensor, 0.0f, std, &rng);
}

static cml_tensor *ids_tensor(const int64_t *ids, int64_t B, int64_t T) {
    return cml_tensor_from_host(ids, 2, (const int64_t[]){B, T}, CML_I64, CML_DEVICE_CPU);
}

static void test_presets(void) {
    cml_gpt_config c;
    CHECK_OK(cml_gpt_preset("char-mini", &c));
    CHECK(c.n_layer == 6 && c.n_head == 6 && c.n_embd == 384 && c.block_size == 256 && c.vocab_size == 65);
    CHECK(c.dropout == 0.2f);
    CHECK_OK(cml_gpt_preset("gpt2-124m", &c));
    CHECK(c.n_layer == 12 && c.n_head == 12 && c.n_embd == 768 && c.block_size == 1024 && c.vocab_size == 50257);
    CHECK(expected_params(&c) == 124439808); /* GPT-2 small, tied head */
    CHECK_OK(cml_gpt_preset("char-tiny", &c));
    CHECK_OK(cml_gpt_config_check(&c));
    CHECK_STATUS(cml_gpt_preset("gpt5", &c), CML_ERR_INVALID_ARG, "unknown preset \"gpt5\"");
    c = cfg_of(2, 3, 16, 8, 10, 0);
    CHECK_STATUS(cml_gpt_config_check(&c), CML_ERR_INVALID_ARG, "divisible by n_head=3");
    c = cfg_of(0, 1, 16, 8, 10, 0);
    CHECK_STATUS(cml_gpt_config_check(&c), CML_ERR_INVALID_ARG, "n_layer=0");
    c = cfg_of(1, 1, 16, 8, 10, 1.0f);
    CHECK_STATUS(cml_gpt_config_check(&c), CML_ERR_INVALID_ARG, "dropout=1");
    cml_rng rng;
    cml_rng_init(&rng, 0);
    cml_clear_error();
    CHECK(cml_gpt_create(&c, &rng) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "dropout");
}

static void test_names_and_count(void) {
    cml_gpt_config c = cfg_of(2, 2, 16, 8, 11, 0.1f);
    cml_rng rng;
    cml_rng_init(&rng, 1);
    cml_module *m = cml_gpt_create(&c, &rng);
    CHECK_NOT_NULL(m);
    if (!m) return;
    CHECK(cml_module_num_elements(m) == expected_params(&c));
    const char *want[] = {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias",
                          "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight",
                          "h.0.attn.c_proj.bias", "h.0.ln_2.weight", "h.0.ln_2.bias", "h.0.mlp.c_fc.weight",
                          "h.0.mlp.c_fc.bias", "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias"};
    cml_param ps[64];
    int n = cml_module_parameters(m, ps, 64);
    CHECK(n == 2 + 12 * 2 + 2);
    for (int i = 0; i < 14 && i < n; i++) CHECK_MSG(strcmp(ps[i].name, want[i]) == 0, "param %d: %s", i, ps[i].name);
    CHECK(n >= 2 && strcmp(ps[n - 2].name, "ln_f.weight") == 0 && strcmp(ps[n - 1].name, "ln_f.bias") == 0);
    CHECK(strcmp(ps[14].name, "h.1.ln_1.weight") == 0);
    const cml_gpt_config *got = cml_gpt_config_of(m);
    CHECK(got && got->n_layer == 2 && got->vocab_size == 11 && got->dropout == 0.1f);
    CHECK(cml_gpt_dropout_rng(m) != NULL);
    cml_module *lin = cml_linear_create(2, 2, true, &rng);
    cml_clear_error();
    CHECK(cml_gpt_config_of(lin) == NULL);
    CHECK_ERROR(CML_ERR_INVALID_ARG, "must be a GPT");
    cml_module_destroy(lin);
    cml_module_destroy(m);
}

/* GPT-2 initialization statistics on a model large enough to measure them. */
static void test_init(void) {
    cml_gpt_config c = cfg_of(3, 2, 64, 16, 50, 0);
    cml_rng rng;
    cml_rng_init(&rng, 2);
    cml_module *m = cml_gpt_create(&c, &rng);
    CHECK_NOT_NULL(m);
    if (!m) return;
    cml_param ps[64];
    int n = cml_module_parameters(m, ps, 64);
    double proj_std = 0.02 / sqrt(6.0);
    for (int i = 0; i < n; i++) {
        const float *d = cml_tensor_data(ps[i].tensor);
        int64_t k = cml_tensor_numel(ps[i].tensor);
        double s = 0, ss = 0;
        for (int64_t j = 0; j < k; j++) {
            s += d[j];
            ss += (double)d[j] * d[j];
        }
        double mean = s / (double)k, std = sqrt(ss / (double)k - mean * mean);
        const char *name = ps[i].name;
        size_t len = strlen(name);
        if (len > 5 && strcmp(name + len - 5, ".bias") == 0) {
            CHECK_MSG(ss == 0, "%s must be zero", name);
        } else if (strstr(name, "ln_")) {
            CHECK_MSG(mean == 1 && std == 0, "%s must be ones", name);
        } else if (strstr(name, "c_proj.weight")) {
            CHECK_MSG(fabs(std - proj_std) < 0.1 * proj_std, "%s: std %g, want %g", name, std, proj_std);
        } else {
            CHECK_MSG(fabs(std - 0.02) < 0.002 && fabs(mean) < 0.002, "%s: mean %g std %g, want N(0, 0.02)", name,
                      mean, std);
        }
    }
    /* Same seed, same weights. */
    cml_rng_init(&rng, 2);
    cml_module *m2 = cml_gpt_create(&c, &rng);
    cml_param ps2[64];
    cml_module_parameters(m2, ps2, 64);
    for (int i = 0; i < n; i++)
        CHECK(memcmp(cml_tensor_data(ps[i].tensor), cml_tensor_data(ps2[i].tensor),
                     (size_t)cml_tensor_numel(ps[i].tensor) * sizeof(float)) == 0);
    cml_module_destroy(m2);
    cml_module_destroy(m);
}

static void test_forward(void) {
    cml_gpt_config c = cfg_of(2, 2, 16, 8, 11, 0);
    cml_rng rng;
    cml_rng_init(&rng, 3);
    cml_module *m = cml_gpt_create(&c, &rng);
    if (!m) {
        CHECK_NOT_NULL(m);
        return;
    }
    int64_t ids[2 * 5] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    cml_tensor *x = ids_tensor(ids, 2, 5);
    cml_tensor *y = cml_module_forward(m, x);
    CHECK_NOT_NULL(y);
    CHECK(y && cml_tensor_ndim(y) == 3 && cml_tensor_size(y, 0) == 2 && cml_tensor_size(y, 1) == 5 &&
          cml_tensor_size(y, 2) == 11);
    /* Causality: changing the last token leaves the earlier positions' logits alone. */
    ids[4] = 10;
    cml_tensor *x2 = ids_tensor(ids, 2, 5), *y2 = cml_module_forward(m, x2);
    if (y && y2) {
        const float *a = cml_tensor_data(y), *b = cml_tensor_data(y2);
        CHECK(memcmp(a, b, 4 * 11 * sizeof(float)) == 0);
        CHECK(memcmp(a + 4 * 11, b + 4 * 11, 11 * sizeof(float)) != 0);
    }
    /* The head is tied: zeroing wte's row 10 zeroes logit 10 where token 10 is not an input. */
    cml_param ps[64];
    cml_module_parameters(m, ps, 64);
    float *wte = cml_tensor_data(ps[0].tensor);
    for (int k = 0; k < 16; k++) wte[10 * 16 + k] = 0.0f;
    cml_tensor *y3 = cml_module_forward(m, x);
    if (y3) {
        const float *d = cml_tensor_data(y3);
        for (int r = 0; r < 10; r++) CHECK(d[r * 11 + 10] == 0.0f);
    }
    cml_tensor_release_all((cml_tensor *[]){x, y, x2, y2, y3}, 5);

    int64_t long_ids[9] = {0};
    cml_tensor *xl = ids_tensor(long_ids, 1, 9);
    cml_clear_error();
    CHECK(cml_module_forward(m, xl) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "block_size=8");
    cml_tensor *xf = cml_tensor_zeros(2, (const int64_t[]){1, 4}, CML_F32, CML_DEVICE_CPU);
    cml_clear_error();
    CHECK(cml_module_forward(m, xf) == NULL);
    CHECK_ERROR(CML_ERR_DTYPE, "i64 or i32");
    cml_tensor *t1 = ids_tensor(long_ids, 1, 4), *t2 = ids_tensor(long_ids, 2, 2);
    cml_clear_error();
    CHECK(cml_gpt_loss(m, t1, t2) == NULL);
    CHECK_ERROR(CML_ERR_SHAPE, "must both be (B, T)");
    cml_tensor_release_all((cml_tensor *[]){xl, xf, t1, t2}, 4);
    cml_module_destroy(m);
}

typedef struct loss_ctx {
    cml_module *m;
    cml_tensor *x, *y;
} loss_ctx;

/* The model reads its parameters, which cml_gradcheck perturbs in place. */
static cml_tensor *loss_fn(cml_tensor *const *inputs, int n, void *user) {
    loss_ctx *l = user;
    return cml_gpt_loss(l->m, l->x, l->y);
}

static void test_gradcheck(void) {
    cml_gpt_config c = cfg_of(1, 2, 8, 4, 5, 0);
    cml_rng rng;
    cml_rng_init(&rng, 4);
    cml_module *m = cml_gpt_create(&c, &rng);
    if (!m) {
        CHECK_NOT_NULL(m);
        return;
    }
    randomize(m, 0.5f, 40);
    int64_t xs[8] = {0, 1, 2, 3, 4, 4, 1, 0}, ys[8] = {1, 2, 3, 4, 4, 1, 0, 2};
    loss_ctx l = {m, ids_tensor(xs, 2, 4), ids_tensor(ys, 2, 4)};
    cml_param ps[64];
    int n = cml_module_parameters(m, ps, 64);
    cml_tensor *inputs[64];
    for (int i = 0; i < n; i++) inputs[i] = ps[i].tensor;
    cml_gradcheck_opts o = {.eps = 1e-2, .atol = 2e-3, .rtol = 2e-2, .seed = 1};
    CHECK_OK(cml_gradcheck(loss_fn, inputs, n, &l, &o));
    /* Every parameter gets a gradient. */
    for (int i = 0; i < n; i++) {
        const cml_tensor *g = cml_tensor_grad(ps[i].tensor);
        double ss = 0;
        for (int64_t k = 0; g && k < cml_tensor_numel(g); k++) ss += fabs(((const float *)cml_tensor_data(g))[k]);
        CHECK_MSG(g && ss > 0, "no gradient for %s", ps[i].name);
    }
    cml_tensor_release_all((cml_tensor *[]){l.x, l.y}, 2);
    cml_module_destroy(m);
}

static void test_overfit(void) {
    cml_gpt_config c = cfg_of(2, 2, 32, 16, 12, 0);
    cml_rng rng;
    cml_rng_init(&rng, 5);
    cml_module *m = cml_gpt_create(&c, &rng);
    if (!m) {
        CHECK_NOT_NULL(m);
        return;
    }
    int64_t toks[4 * 17];
    for (int i = 0; i < 4 * 17; i++) toks[i] = cml_rng_below(&rng, 12);
    int64_t xs[64], ys[64];
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < 16; t++) {
            xs[b * 16 + t] = toks[b * 17 + t];
            ys[b * 16 + t] = toks[b * 17 + t + 1];
        }
    cml_tensor *x = ids_tensor(xs, 4, 16), *y = ids_tensor(ys, 4, 16);
    cml_param ps[64];
    int n = cml_module_parameters(m, ps, 64);
    cml_optim *opt = cml_adamw_create(ps, n, (cml_adam_opts){3e-3f, 0.9f, 0.99f, 1e-8f, 0.0f});
    double first = NAN, last = NAN;
    for (int step = 0; step < 300 && opt; step++) {
        cml_tensor *loss = cml_gpt_loss(m, x, y);
        if (!loss || cml_backward(loss, NULL) != CML_OK || cml_optim_step(opt) != CML_OK) {
            CHECK_OK(cml_last_status());
            cml_tensor_release(loss);
            break;
        }
        last = cml_tensor_item(loss);
        if (step == 0) first = last;
        cml_optim_zero_grad(opt);
        cml_tensor_release(loss);
    }
    CHECK_MSG(fabs(first - log(12.0)) < 0.2, "initial loss %g, want about ln 12 = %g", first, log(12.0));
    CHECK_MSG(last < 0.05, "loss after 300 steps: %g (want < 0.05)", last);
    cml_optim_destroy(opt);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);
    cml_module_destroy(m);
}

/* Generation with the cache against recomputing the window with the forward:
 * the same tokens, and logits equal to f32 rounding. */
static void check_generate(cml_module *m, const int64_t *prompt, int64_t n_prompt, int64_t n_new, float temp,
                           int64_t top_k) {
    int64_t V = cml_gpt_config_of(m)->vocab_size;
    int64_t *a = calloc((size_t)(n_prompt + n_new), sizeof *a), *b = calloc((size_t)(n_prompt + n_new), sizeof *b);
    float *la = calloc((size_t)(n_new * V), sizeof *la), *lb = calloc((size_t)(n_new * V), sizeof *lb);
    cml_rng ra, rb;
    cml_rng_init(&ra, 77);
    cml_rng_init(&rb, 77);
    CHECK_OK(cml__gpt_generate_ex(m, prompt, n_prompt, n_new, temp, top_k, &ra, a, true, la));
    CHECK_OK(cml__gpt_generate_ex(m, prompt, n_prompt, n_new, temp, top_k, &rb, b, false, lb));
    CHECK(memcmp(a, b, (size_t)(n_prompt + n_new) * sizeof *a) == 0);
    CHECK(memcmp(a, prompt, (size_t)n_prompt * sizeof *a) == 0);
    double max_diff = 0, max_abs = 0;
    for (int64_t i = 0; i < n_new * V; i++) {
        max_diff = fmax(max_diff, fabs((double)la[i] - lb[i]));
        max_abs = fmax(max_abs, fabs((double)lb[i]));
    }
    CHECK_MSG(max_diff <= 1e-5 * fmax(1.0, max_abs), "cached vs recomputed logits differ by %g (max |logit| %g)",
              max_diff, max_abs);
    CHECK_MSG(max_abs > 0.5, "logits too small (%g) for a meaningful comparison", max_abs);
    /* The public entry point is the cached path. */
    cml_rng_init(&ra, 77);
    CHECK_OK(cml_gpt_generate(m, prompt, n_prompt, n_new, temp, top_k, &ra, b));
    CHECK(memcmp(a, b, (size_t)(n_prompt + n_new) * sizeof *a) == 0);
    free(a);
    free(b);
    free(la);
    free(lb);
}

static void test_generate_cache(void) {
    cml_gpt_config c = cfg_of(2, 2, 16, 8, 7, 0.3f);
    cml_rng rng;
    cml_rng_init(&rng, 6);
    cml_module *m = cml_gpt_create(&c, &rng);
    if (!m) {
        CHECK_NOT_NULL(m);
        return;
    }
    randomize(m, 0.6f, 60);
    int64_t prompt[11] = {1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4};
    check_generate(m, prompt, 3, 5, 1.0f, 0);   /* within one window */
    check_generate(m, prompt, 1, 30, 1.0f, 0);  /* re-windowing several times */
    check_generate(m, prompt, 11, 12, 0.7f, 3); /* prompt longer than the context, top-k */
    check_generate(m, prompt, 8, 1, 2.0f, 1);   /* a full window; top-1 is greedy */
    /* Generation leaves the module in training mode and records no graph. */
    CHECK(m->training);
    /* Greedy (top_k = 1) picks the argmax of the forward's last logits. */
    int64_t out[4];
    CHECK_OK(cml_gpt_generate(m, prompt, 3, 1, 1.0f, 1, &rng, out));
    cml_module_train(m, false);
    cml_tensor *x = ids_tensor(prompt, 1, 3), *y = cml_module_forward(m, x);
    cml_module_train(m, true);
    if (y) {
        const float *l = (const float *)cml_tensor_data(y) + 2 * 7;
        int64_t best = 0;
        for (int v = 1; v < 7; v++)
            if (l[v] > l[best]) best = v;
        CHECK(out[3] == best);
    }
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);

    CHECK_STATUS(cml_gpt_generate(m, prompt, 3, 2, 0.0f, 0, &rng, out), CML_ERR_INVALID_ARG, "temperature=0");
    int64_t bad[2] = {1, 7};
    CHECK_STATUS(cml_gpt_generate(m, bad, 2, 1, 1.0f, 0, &rng, out), CML_ERR_INVALID_ARG, "prompt[1]=7");
    CHECK_STATUS(cml_gpt_generate(m, prompt, 0, 1, 1.0f, 0, &rng, out), CML_ERR_INVALID_ARG, "n_prompt=0");
    CHECK_STATUS(cml_gpt_generate(m, prompt, 1, 1, 1.0f, -1, &rng, out), CML_ERR_INVALID_ARG, "top_k=-1");
    cml_module_destroy(m);
}

/* ---- checkpoints -------------------------------------------------------------------- */

static bool params_equal(cml_module *a, cml_module *b) {
    cml_param pa[256], pb[256];
    int n = cml_module_parameters(a, pa, 256), k = cml_module_parameters(b, pb, 256);
    if (n != k) return false;
    for (int i = 0; i < n; i++)
        if (memcmp(cml_tensor_data(pa[i].tensor), cml_tensor_data(pb[i].tensor),
                   (size_t)cml_tensor_numel(pa[i].tensor) * sizeof(float)) != 0)
            return false;
    return true;
}

typedef struct run {
    cml_module *m;
    cml_param ps[256];
    int n;
    cml_optim *opt;
    cml_rng data;
} run;

static bool run_init(run *r, const cml_gpt_config *c) {
    cml_rng rng;
    cml_rng_init(&rng, 9);
    cml_rng_init(&r->data, 10);
    r->m = cml_gpt_create(c, &rng);
    r->n = r->m ? cml_module_parameters(r->m, r->ps, 256) : 0;
    r->opt = r->m ? cml_adamw_create(r->ps, r->n, (cml_adam_opts){1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f}) : NULL;
    return r->opt != NULL;
}

static void run_steps(run *r, const int64_t *tokens, int64_t n_tokens, int steps) {
    for (int s = 0; s < steps; s++) {
        cml_tensor *x = NULL, *y = NULL, *loss = NULL;
        CHECK_OK(cml_token_windows(tokens, n_tokens, 3, 6, &r->data, &x, &y));
        loss = cml_gpt_loss(r->m, x, y);
        CHECK_OK(loss ? cml_backward(loss, NULL) : cml_last_status());
        CHECK_OK(cml_clip_grad_norm(r->ps, r->n, 1.0, NULL));
        CHECK_OK(cml_optim_step(r->opt));
        cml_optim_zero_grad(r->opt);
        cml_tensor_release_all((cml_tensor *[]){x, y, loss}, 3);
    }
}

static void run_free(run *r) {
    cml_optim_destroy(r->opt);
    cml_module_destroy(r->m);
}

/* Training 8 steps straight equals 4 steps, a checkpoint, a fresh process state
 * loaded from it, and 4 more steps, bit for bit (dropout on, so the dropout
 * generator is part of the state). */
static void test_checkpoint_resume(void) {
    cml_gpt_config c = cfg_of(2, 2, 16, 6, 9, 0.2f);
    int64_t tokens[200];
    for (int i = 0; i < 200; i++) tokens[i] = (i * 7 + i / 3) % 9;
    run a, b, r;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&r, 0, sizeof r);
    if (!run_init(&a, &c) || !run_init(&b, &c) || !run_init(&r, &c)) {
        CHECK_OK(cml_last_status());
        goto done;
    }
    run_steps(&a, tokens, 200, 8);
    run_steps(&b, tokens, 200, 4);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/gpt_resume_ckpt", CML_TEST_TMP);
    const char *keys[] = {"note"}, *values[] = {"test"};
    CHECK_OK(cml_checkpoint_save(dir, b.m, b.opt, &b.data, 4, (cml_checkpoint_meta){keys, values, 1}));
    cml_rng drop = *cml_gpt_dropout_rng(b.m);
    /* r: built from scratch with another seed's weights, then loaded. */
    randomize(r.m, 0.1f, 123);
    cml_rng_init(&r.data, 999);
    int64_t step = -1;
    CHECK_OK(cml_checkpoint_load(dir, r.m, r.opt, &r.data, &step));
    CHECK(step == 4);
    CHECK(params_equal(r.m, b.m));
    *cml_gpt_dropout_rng(r.m) = drop;
    run_steps(&r, tokens, 200, 4);
    CHECK_MSG(params_equal(r.m, a.m), "resumed training differs from the uninterrupted run");
    run_steps(&b, tokens, 200, 4);
    CHECK(params_equal(b.m, a.m));
done:
    run_free(&a);
    run_free(&b);
    run_free(&r);
}

int main(void) {
    cml_set_cpu_threads(1);
    RUN(test_presets);
    RUN(test_names_and_count);
    RUN(test_init);
    RUN(test_forward);
    RUN(test_gradcheck);
    RUN(test_overfit);
    RUN(test_generate_cache);
    RUN(test_checkpoint_resume);
    return th_finish();
}
