/* Checkpoints: round trips of an MLP with AdamW and SGD-momentum state, module
 * buffers, metadata before building the model, bitwise resume of a training
 * run with dropout, and rejection of mismatched or mixed checkpoints. */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include <sys/stat.h>

#include "harness.h"

#define TMP CML_TEST_TMP "/test_checkpoint_tmp"

static char dir_buf[512];
static const char *tmp_dir(const char *name) {
    snprintf(dir_buf, sizeof dir_buf, "%s/%s", TMP, name);
    return dir_buf;
}

/* ---- a small training setup -------------------------------------------------------------- */

#define IN 6
#define HID 24
#define OUT 4
#define BATCH 8

typedef struct trainer {
    cml_module *model;
    cml_optim *opt;
    cml_rng data; /* draws the batches */
    cml_param params[16];
    int n;
} trainer;

typedef enum opt_kind { USE_ADAMW, USE_SGD } opt_kind;

/* init_seed only changes the initial weights (a resumed run must not depend on them). */
static bool trainer_init(trainer *t, int64_t hidden, float dropout, opt_kind kind, uint64_t init_seed) {
    memset(t, 0, sizeof *t);
    cml_rng init;
    cml_rng_init(&init, init_seed);
    t->model = cml_mlp_create((int64_t[]){IN, hidden, hidden, OUT}, 4, CML_ACT_GELU, dropout, &init);
    CHECK_NOT_NULL(t->model);
    if (!t->model) return false;
    t->n = cml_module_parameters(t->model, t->params, 16);
    CHECK(t->n == 6);
    if (kind == USE_ADAMW)
        t->opt = cml_adamw_create(t->params, t->n, (cml_adam_opts){.lr = 1e-2f, .weight_decay = 0.05f});
    else
        t->opt = cml_sgd_create(t->params, t->n, (cml_sgd_opts){.lr = 0.05f, .momentum = 0.9f, .nesterov = true});
    CHECK_NOT_NULL(t->opt);
    cml_rng_init(&t->data, 1234);
    return t->opt != NULL;
}

static void trainer_free(trainer *t) {
    cml_optim_destroy(t->opt);
    cml_module_destroy(t->model);
    memset(t, 0, sizeof *t);
}

/* One step at 0-based `step`: a cosine lr, a random batch, forward, backward, update. */
static void train_step(trainer *t, int64_t step) {
    cml_lr_schedule sched = {.kind = CML_LR_COSINE, .base_lr = 1e-2, .warmup_steps = 2, .total_steps = 20,
                             .min_lr = 1e-3};
    cml_optim_set_lr(t->opt, (float)cml_lr_at(&sched, step));
    cml_tensor *x = cml_tensor_randn(2, (int64_t[]){BATCH, IN}, 0.0f, 1.0f, &t->data, CML_F32, CML_DEVICE_CPU);
    int64_t labels[BATCH];
    for (int i = 0; i < BATCH; i++) labels[i] = cml_rng_below(&t->data, OUT);
    cml_tensor *y = cml_tensor_from_host(labels, 1, (int64_t[]){BATCH}, CML_I64, CML_DEVICE_CPU);
    cml_optim_zero_grad(t->opt);
    cml_tensor *logits = cml_module_forward(t->model, x);
    cml_tensor *loss = cml_cross_entropy(logits, y, -100, CML_REDUCTION_MEAN);
    CHECK_NOT_NULL(loss);
    CHECK_OK(cml_backward(loss, NULL));
    CHECK_OK(cml_optim_step(t->opt));
    cml_tensor_release_all((cml_tensor *[]){x, y, logits, loss}, 4);
}

/* All parameters' bytes, concatenated (caller frees). */
static unsigned char *snapshot(const trainer *t, size_t *n) {
    size_t total = 0;
    for (int i = 0; i < t->n; i++) total += (size_t)cml_tensor_numel(t->params[i].tensor) * sizeof(float);
    unsigned char *buf = malloc(total), *p = buf;
    for (int i = 0; i < t->n; i++) {
        size_t k = (size_t)cml_tensor_numel(t->params[i].tensor) * sizeof(float);
        memcpy(p, cml_tensor_data(t->params[i].tensor), k);
        p += k;
    }
    *n = total;
    return buf;
}

/* Every optimizer state tensor of a equals b's, byte for byte. */
static bool same_optim_state(const cml_optim *a, const cml_optim *b) {
    cml_param sa[64], sb[64];
    int na = cml_optim_state(a, sa, 64), nb = cml_optim_state(b, sb, 64);
    if (na != nb || na <= 0 || na > 64) return false;
    for (int i = 0; i < na; i++) {
        const cml_tensor *x = sa[i].tensor, *y = sb[i].tensor;
        size_t k = (size_t)cml_tensor_numel(x) * cml_dtype_size(cml_tensor_dtype(x));
        if (strcmp(sa[i].name, sb[i].name) != 0 || cml_tensor_numel(x) != cml_tensor_numel(y) ||
            memcmp(cml_tensor_data(x), cml_tensor_data(y), k) != 0) {
            fprintf(stderr, "  optimizer state \"%s\" differs\n", sa[i].name);
            return false;
        }
    }
    return true;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_optim_state_names(void) {
    trainer t;
    if (!trainer_init(&t, HID, 0.0f, USE_ADAMW, 1)) {
        trainer_free(&t);
        return;
    }
    cml_param s[64];
    int n = cml_optim_state(t.opt, s, 64);
    CHECK(n == 2 + 3 * 6);
    CHECK(n > 5 && strcmp(s[0].name, "lr") == 0 && strcmp(s[1].name, "steps") == 0 &&
          strcmp(s[2].name, "step.0.weight") == 0 && strcmp(s[3].name, "exp_avg.0.weight") == 0 &&
          strcmp(s[4].name, "exp_avg_sq.0.weight") == 0);
    CHECK(cml_optim_state(t.opt, NULL, 0) == n && cml_optim_state(t.opt, s, 3) == n);
    CHECK(strcmp(cml_optim_name(t.opt), "AdamW") == 0);
    train_step(&t, 0);
    CHECK(*(const int64_t *)cml_tensor_data(s[1].tensor) == 1 && *(const int64_t *)cml_tensor_data(s[2].tensor) == 1);
    CHECK(*(const float *)cml_tensor_data(s[0].tensor) == cml_optim_lr(t.opt));
    CHECK(cml_optim_state(NULL, s, 1) == -1);
    trainer_free(&t);

    if (!trainer_init(&t, HID, 0.0f, USE_SGD, 1)) {
        trainer_free(&t);
        return;
    }
    n = cml_optim_state(t.opt, s, 64);
    CHECK(n == 2 + 2 * 6 && strcmp(s[3].name, "momentum_buffer.0.weight") == 0);
    CHECK(strcmp(cml_optim_name(t.opt), "SGD") == 0);
    trainer_free(&t);
}

/* Save after some steps, load into a differently initialized copy: everything equal. */
static void roundtrip(opt_kind kind, const char *dir) {
    trainer a, b;
    bool ok = trainer_init(&a, HID, 0.1f, kind, 1) & trainer_init(&b, HID, 0.1f, kind, 2);
    if (ok) {
        for (int s = 0; s < 5; s++) train_step(&a, s);
        const char *keys[] = {"config", "vocab"}, *vals[] = {"{\"hidden\": 24}", "a b c\n"};
        CHECK_OK(cml_checkpoint_save(dir, a.model, a.opt, &a.data, 5, (cml_checkpoint_meta){keys, vals, 2}));
        int64_t step = -1;
        CHECK_OK(cml_checkpoint_load(dir, b.model, b.opt, &b.data, &step));
        CHECK(step == 5);
        CHECK(a.data.seed == b.data.seed && a.data.offset == b.data.offset);
        size_t na, nb;
        unsigned char *pa = snapshot(&a, &na), *pb = snapshot(&b, &nb);
        CHECK(na == nb && memcmp(pa, pb, na) == 0);
        free(pa);
        free(pb);
        CHECK(same_optim_state(a.opt, b.opt));
        CHECK(cml_optim_steps(b.opt) == 5 && cml_optim_lr(b.opt) == cml_optim_lr(a.opt));

        cml_safetensors *f = NULL;
        CHECK_OK(cml_checkpoint_open_model(dir, &f));
        if (f) {
            const char *v = cml_safetensors_meta(f, "config");
            CHECK(v && strcmp(v, vals[0]) == 0);
            v = cml_safetensors_meta(f, "vocab");
            CHECK(v && strcmp(v, vals[1]) == 0);
            CHECK(cml_safetensors_count(f) >= 6);
            cml_safetensors_close(f);
        }
    }
    trainer_free(&a);
    trainer_free(&b);
}

static void test_roundtrip_adamw(void) { roundtrip(USE_ADAMW, tmp_dir("adamw")); }
static void test_roundtrip_sgd_momentum(void) { roundtrip(USE_SGD, tmp_dir("sgd")); }

/* A module with a parameter and a buffer, to check buffers are saved and restored. */
static cml_tensor *identity_forward(cml_module *m, const cml_tensor *x) {
    (void)m;
    return cml_tensor_retain((cml_tensor *)x);
}
static const cml_module_ops buffered_ops = {"Buffered", identity_forward, NULL};

static cml_module *buffered_create(float w, int64_t count) {
    cml_module *m = calloc(1, sizeof *m);
    m->ops = &buffered_ops;
    m->training = true;
    CHECK_OK(cml_module_add_param(m, "w", cml_tensor_full(1, (int64_t[]){3}, w, CML_F32, CML_DEVICE_CPU)));
    CHECK_OK(cml_module_add_buffer(m, "count", cml_tensor_full(0, NULL, (double)count, CML_I64, CML_DEVICE_CPU)));
    CHECK_OK(cml_module_add_buffer(m, "stats", cml_tensor_full(2, (int64_t[]){2, 2}, w, CML_BF16, CML_DEVICE_CPU)));
    return m;
}

static void test_buffers_and_model_only(void) {
    const char *dir = tmp_dir("buffers");
    cml_module *a = buffered_create(1.5f, 77), *b = buffered_create(0.0f, 0);
    CHECK_OK(cml_checkpoint_save(dir, a, NULL, NULL, 3, (cml_checkpoint_meta){0}));
    int64_t step = 0;
    CHECK_OK(cml_checkpoint_load(dir, b, NULL, NULL, &step));
    CHECK(step == 3);
    CHECK(cml_tensor_item(b->buffers[0]) == 77.0 && cml_tensor_item_at(b->buffers[1], (int64_t[]){1, 1}) == 1.5);
    CHECK(cml_tensor_item_at(b->params[0], (int64_t[]){2}) == 1.5f);
    CHECK_OK(cml_checkpoint_load(dir, b, NULL, NULL, NULL));

    /* Saved without an optimizer or rng: asking for them is an error. */
    trainer t;
    cml_rng rng;
    cml_rng_init(&rng, 1);
    CHECK_STATUS(cml_checkpoint_load(dir, b, NULL, &rng, NULL), CML_ERR_CORRUPT, "without an rng");
    if (trainer_init(&t, HID, 0.0f, USE_ADAMW, 1)) {
        CHECK_OK(cml_checkpoint_save(dir, t.model, NULL, NULL, 0, (cml_checkpoint_meta){0}));
        CHECK_STATUS(cml_checkpoint_load(dir, t.model, t.opt, NULL, NULL), CML_ERR_CORRUPT, "without an optimizer");
    }
    trainer_free(&t);
    cml_module_destroy(a);
    cml_module_destroy(b);
}

/* Trains 2N steps in one go, and N steps + save + destroy + rebuild + load + N
 * steps: the final parameters must be identical bit for bit. Dropout makes the
 * result depend on the RNG state, the cosine lr on the restored step. */
static void test_bitwise_resume(void) {
    enum { N = 6 };
    const char *dir = tmp_dir("resume");
    trainer a;
    if (!trainer_init(&a, HID, 0.25f, USE_ADAMW, 7)) {
        trainer_free(&a);
        return;
    }
    for (int s = 0; s < 2 * N; s++) train_step(&a, s);
    size_t n_ref;
    unsigned char *ref = snapshot(&a, &n_ref);
    trainer_free(&a);

    trainer b;
    if (trainer_init(&b, HID, 0.25f, USE_ADAMW, 7)) {
        for (int s = 0; s < N; s++) train_step(&b, s);
        CHECK_OK(cml_checkpoint_save(dir, b.model, b.opt, &b.data, N, (cml_checkpoint_meta){0}));
    }
    trainer_free(&b);

    trainer c; /* other initial weights and data stream: the checkpoint must overwrite them */
    if (trainer_init(&c, HID, 0.25f, USE_ADAMW, 99)) {
        cml_rng_init(&c.data, 5);
        int64_t step = 0;
        CHECK_OK(cml_checkpoint_load(dir, c.model, c.opt, &c.data, &step));
        CHECK(step == N);
        for (int64_t s = step; s < 2 * N; s++) train_step(&c, s);
        size_t n;
        unsigned char *got = snapshot(&c, &n);
        CHECK(n == n_ref);
        CHECK_MSG(memcmp(got, ref, n) == 0, "resumed parameters differ from the uninterrupted run");
        free(got);

        /* The dropout generators are module buffers ("2.rng", "5.rng"), saved with the model. */
        cml_param bufs[4];
        CHECK(cml_module_buffers(c.model, bufs, 4) == 2 && strcmp(bufs[0].name, "2.rng") == 0);

        /* The test can see a difference: without the data RNG, or with the dropout
         * generators reset to their initial state, the resumed run diverges. */
        for (int variant = 0; variant < 2; variant++) {
            trainer d;
            if (trainer_init(&d, HID, 0.25f, USE_ADAMW, 7)) {
                cml_param fresh[4];
                CHECK(cml_module_buffers(d.model, fresh, 4) == 2);
                int64_t initial[2][2];
                for (int i = 0; i < 2; i++) memcpy(initial[i], cml_tensor_data(fresh[i].tensor), sizeof initial[i]);
                CHECK_OK(cml_checkpoint_load(dir, d.model, d.opt, variant ? &d.data : NULL, NULL));
                if (variant)
                    for (int i = 0; i < 2; i++) memcpy(cml_tensor_data(fresh[i].tensor), initial[i], sizeof initial[i]);
                for (int64_t s = N; s < 2 * N; s++) train_step(&d, s);
                got = snapshot(&d, &n);
                CHECK_MSG(memcmp(got, ref, n) != 0, "variant %d did not diverge", variant);
                free(got);
            }
            trainer_free(&d);
        }
    }
    trainer_free(&c);
    free(ref);
}

static void test_mismatches_rejected(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tmp_dir("mismatch"));
    trainer a, wide, sgd;
    bool ok = trainer_init(&a, HID, 0.0f, USE_ADAMW, 1) & trainer_init(&wide, 2 * HID, 0.0f, USE_ADAMW, 1) &
              trainer_init(&sgd, HID, 0.0f, USE_SGD, 1);
    if (ok) {
        train_step(&a, 0);
        CHECK_OK(cml_checkpoint_save(dir, a.model, a.opt, &a.data, 1, (cml_checkpoint_meta){0}));
        size_t n0;
        unsigned char *before = snapshot(&wide, &n0);
        CHECK_STATUS(cml_checkpoint_load(dir, wide.model, wide.opt, NULL, NULL), CML_ERR_CORRUPT,
                     "\"0.weight\" is f32 [24, 6] in the file but f32 [48, 6] here");
        CHECK(strstr(cml_last_error(), "model.safetensors") != NULL);
        size_t n1;
        unsigned char *after = snapshot(&wide, &n1);
        CHECK(n0 == n1 && memcmp(before, after, n0) == 0); /* untouched */
        free(before);
        free(after);
        CHECK_STATUS(cml_checkpoint_load(dir, sgd.model, sgd.opt, NULL, NULL), CML_ERR_CORRUPT,
                     "holds AdamW state, but the optimizer is SGD");

        /* A model with fewer parameters than the file (the same first layer). */
        cml_rng init;
        cml_rng_init(&init, 3);
        cml_module *first = cml_linear_create(IN, HID, true, &init);
        cml_module *small = cml_sequential_create(&first, 1);
        CHECK_STATUS(cml_checkpoint_load(dir, small, NULL, NULL, NULL), CML_ERR_CORRUPT, "that the model does not have");
        cml_module_destroy(small);

        /* state.safetensors from another save. */
        char other[512], from[600], to[600];
        snprintf(other, sizeof other, "%s", tmp_dir("mismatch_other"));
        CHECK_OK(cml_checkpoint_save(other, a.model, a.opt, &a.data, 1, (cml_checkpoint_meta){0}));
        snprintf(from, sizeof from, "%s/state.safetensors", other);
        snprintf(to, sizeof to, "%s/state.safetensors", dir);
        CHECK(rename(from, to) == 0);
        CHECK_STATUS(cml_checkpoint_load(dir, a.model, a.opt, NULL, NULL), CML_ERR_CORRUPT, "different saves");
        CHECK_OK(cml_checkpoint_load(dir, a.model, NULL, NULL, NULL)); /* the model alone is fine */

        /* Corrupt model file. */
        snprintf(to, sizeof to, "%s/model.safetensors", dir);
        FILE *fp = fopen(to, "r+b");
        CHECK(fp != NULL);
        if (fp) {
            fseek(fp, 9, SEEK_SET);
            fputc('#', fp);
            fclose(fp);
        }
        CHECK_STATUS(cml_checkpoint_load(dir, a.model, NULL, NULL, NULL), CML_ERR_CORRUPT, "model.safetensors");
        CHECK_STATUS(cml_checkpoint_load(tmp_dir("nothing-here"), a.model, NULL, NULL, NULL), CML_ERR_IO,
                     "No such file");

        /* Arguments. */
        CHECK_STATUS(cml_checkpoint_save(dir, a.model, NULL, NULL, 0,
                                         (cml_checkpoint_meta){(const char *[]){"camel.save_id"},
                                                               (const char *[]){"x"}, 1}),
                     CML_ERR_INVALID_ARG, "reserved");
        CHECK_STATUS(cml_checkpoint_save(NULL, a.model, NULL, NULL, 0, (cml_checkpoint_meta){0}), CML_ERR_INVALID_ARG,
                     "dir");
        CHECK_STATUS(cml_checkpoint_load(dir, NULL, NULL, NULL, NULL), CML_ERR_INVALID_ARG, "model");
        snprintf(to, sizeof to, "%s/model.safetensors", dir);
        CHECK_STATUS(cml_checkpoint_save(to, a.model, NULL, NULL, 0, (cml_checkpoint_meta){0}), CML_ERR_IO,
                     "not a directory");
    }
    trainer_free(&a);
    trainer_free(&wide);
    trainer_free(&sgd);
}

int main(void) {
    mkdir(TMP, 0755);
    RUN(test_optim_state_names);
    RUN(test_roundtrip_adamw);
    RUN(test_roundtrip_sgd_momentum);
    RUN(test_buffers_and_model_only);
    RUN(test_bitwise_resume);
    RUN(test_mismatches_rejected);
    return th_finish();
}
