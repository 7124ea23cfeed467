/* GPU tests of the multi-tensor optimizers (src/kernels/cuda/optim/optim_multi.cu,
 * param_list.cu) against the CPU's: AdamW, Adam (L2), SGD (plain, momentum on its
 * first step, Nesterov with weight decay), each with and without clipping folded
 * into the update, over slices of odd sizes (0, 1, 3, 7, 127, 1025, chunk
 * boundaries +-1, several chunks, a 1M+3 and a 12M slice), one slice whose four
 * buffers are one float off 16-byte alignment and one where only the grad is.
 * Every buffer has guard floats on both sides. The results must be BITWISE equal
 * to the CPU's (same per-element arithmetic with explicitly rounded operations,
 * and the norm's documented fixed order on both sides), guards included; the norm
 * also within 1e-12 of a float64 sequential sum; a repeat run bitwise identical;
 * a changed list re-uploaded. Framework: cml_optim_clip_grad_norm + cml_optim_step
 * on the GPU give the CPU's bits and return while the stream is still busy (no
 * host synchronization); mixed devices are grouped or refused with a message.
 * Exits 77 ("skipped") without a GPU. */
#include <time.h>

#include "gpu_row_util.h"

#define GUARD 8
#define GUARD_VALUE 12345.0f
#define MAX_SLICES 16

typedef struct model {
    int k;
    int64_t n[MAX_SLICES];
    int shift[MAX_SLICES][4]; /* floats off alignment, per buffer (param, grad, m, v) */
    float *h[MAX_SLICES][4];  /* host buffers, guards included */
    float *d[MAX_SLICES][4];  /* device copies */
} model;

static int64_t total_of(const model *md, int s) { return md->n[s] + 2 * GUARD + 1; }
static float *at(float *base, const model *md, int s, int w) { return base + GUARD + md->shift[s][w]; }

static void model_init(model *md, const int64_t *sizes, int k, uint64_t seed) {
    memset(md, 0, sizeof *md);
    cml_rng_init(&rng, seed);
    md->k = k;
    static const float lo[4] = {-1.0f, -2.0f, -0.1f, 0.0f}, hi[4] = {1.0f, 2.0f, 0.1f, 0.01f};
    for (int s = 0; s < k; s++) {
        md->n[s] = sizes[s];
        for (int w = 0; w < 4; w++) {
            md->shift[s][w] = s == 5 || (s == 9 && w == 1); /* all four off / only the grad off */
            const int64_t total = total_of(md, s);
            md->h[s][w] = malloc(sizeof(float) * (size_t)total);
            md->d[s][w] = dev_alloc(sizeof(float) * (size_t)total);
            for (int64_t i = 0; i < total; i++) md->h[s][w][i] = GUARD_VALUE;
            random_fill(at(md->h[s][w], md, s, w), CML_F32, md->n[s], lo[w], hi[w]);
        }
    }
}

/* (Re)copies the host buffers to the device. */
static void model_upload(model *md) {
    for (int s = 0; s < md->k; s++)
        for (int w = 0; w < 4; w++) upload(md->d[s][w], md->h[s][w], sizeof(float) * (size_t)total_of(md, s));
}

static void model_free(model *md) {
    for (int s = 0; s < md->k; s++)
        for (int w = 0; w < 4; w++) {
            free(md->h[s][w]);
            dev_free(md->d[s][w], sizeof(float) * (size_t)total_of(md, s));
        }
}

static int slices_of(model *md, bool dev, cml_param_slice *out, int first, bool use_m, bool use_v) {
    int c = 0;
    for (int s = first; s < md->k; s++, c++) {
        float *b[4];
        for (int w = 0; w < 4; w++) b[w] = at(dev ? md->d[s][w] : md->h[s][w], md, s, w);
        out[c] = (cml_param_slice){b[0], b[1], use_m ? b[2] : NULL, use_v ? b[3] : NULL, md->n[s]};
    }
    return c;
}

/* The device buffers (guards included) must equal the host's bit for bit. */
static void check_same(const char *what, const model *md) {
    static const char *names[4] = {"param", "grad", "m", "v"};
    for (int s = 0; s < md->k; s++)
        for (int w = 0; w < 4; w++) {
            const size_t bytes = sizeof(float) * (size_t)total_of(md, s);
            float *got = malloc(bytes);
            download(got, md->d[s][w], bytes);
            if (memcmp(got, md->h[s][w], bytes) != 0) {
                int64_t i = 0;
                while (memcmp(&got[i], &md->h[s][w][i], sizeof(float)) == 0) i++;
                CHECK_MSG(false, "%s: slice %d (n=%lld) %s: element %lld (guards counted) is %.9g on the GPU, %.9g on "
                          "the CPU", what, s, (long long)md->n[s], names[w], (long long)i, got[i], md->h[s][w][i]);
            }
            free(got);
        }
}

typedef struct algo {
    const char *name;
    int kind; /* 0 Adam(W), 1 SGD */
    float lr, b1, b2, eps, wd, momentum;
    bool decoupled, nesterov, first_step;
    int64_t step;
} algo;

static const algo ALGOS[] = {
    {"adamw", 0, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0, true, false, false, 5},
    {"adam", 0, 1e-2f, 0.8f, 0.999f, 1e-6f, 0.01f, 0, false, false, false, 1},
    {"sgd", 1, 0.1f, 0, 0, 0, 0, 0, false, false, false, 1},
    {"sgd momentum first step", 1, 0.1f, 0, 0, 0, 0, 0.9f, false, false, true, 1},
    {"sgd nesterov wd", 1, 0.05f, 0, 0, 0, 1e-3f, 0.8f, false, true, false, 1},
};

static cml_status run_update(cml_ctx *ctx, const cml_param_list *list, const algo *a, const float *coef) {
    if (a->kind == 0)
        return cml_adam_update_multi(ctx, list, a->lr, a->b1, a->b2, a->eps, a->wd, a->decoupled, a->step, coef);
    return cml_sgd_update_multi(ctx, list, a->lr, a->momentum, a->nesterov, a->wd, a->first_step, coef);
}

/* One step on both devices: optional norm + clip, then the update; everything compared. */
static void step_both(model *md, const algo *a, bool clip, int first, const char *what, cml_param_list *cl,
                      cml_param_list *gl) {
    cml_param_slice hs[MAX_SLICES], ds[MAX_SLICES];
    const bool use_m = a->kind == 0 || a->momentum > 0, use_v = a->kind == 0;
    const int k = slices_of(md, false, hs, first, use_m, use_v);
    slices_of(md, true, ds, first, use_m, use_v);
    CHECK_OK(cml_param_list_set(cl, hs, k, NULL));
    CHECK_OK(cml_param_list_set(gl, ds, k, NULL));
    const double max_norm = 5.0;
    if (clip) {
        CHECK_OK(cml_param_list_grad_norm(cctx, cl, max_norm));
        CHECK_OK(cml_param_list_grad_norm(gctx, gl, max_norm));
        double nc = 0, ng = 0, seq = 0;
        CHECK_OK(cml_param_list_read_norm(cctx, cl, &nc));
        CHECK_OK(cml_param_list_read_norm(gctx, gl, &ng));
        CHECK_MSG(memcmp(&nc, &ng, sizeof nc) == 0, "%s: norm %.17g on the GPU, %.17g on the CPU", what, ng, nc);
        double comp = 0; /* Neumaier-compensated: a plain sequential float64 sum of 13M squares is off by ~1e-12 */
        for (int s = 0; s < k; s++)
            for (int64_t i = 0; i < hs[s].n; i++) {
                const double x = (double)hs[s].grad[i] * hs[s].grad[i], t = seq + x;
                comp += fabs(seq) >= fabs(x) ? (seq - t) + x : (x - t) + seq;
                seq = t;
            }
        seq = sqrt(seq + comp);
        CHECK_MSG(fabs(ng - seq) <= 1e-12 * seq, "%s: norm %.17g vs compensated float64 %.17g", what, ng, seq);
        float gcoef = 0;
        download(&gcoef, cml_param_list_clip_coef(gl), sizeof gcoef);
        CHECK_MSG(gcoef == *cml_param_list_clip_coef(cl) && gcoef < 1.0f, "%s: clip coefficient %.9g on the GPU, "
                  "%.9g on the CPU", what, gcoef, *cml_param_list_clip_coef(cl));
    }
    CHECK_OK(run_update(cctx, cl, a, clip ? cml_param_list_clip_coef(cl) : NULL));
    CHECK_OK(run_update(gctx, gl, a, clip ? cml_param_list_clip_coef(gl) : NULL));
    check_same(what, md);
}

static const int64_t SIZES[] = {1, 7, 0, 127, 16383, 1025, 16384, 16385, 3, 40001, 65541, (1 << 20) + 3, 12000000};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

static void test_updates_match_cpu(void) {
    const int k = under_sanitizer() ? N_SIZES - 2 : N_SIZES;
    cml_param_list *cl = NULL, *gl = NULL;
    CHECK_OK(cml_param_list_create(cctx, &cl));
    CHECK_OK(cml_param_list_create(gctx, &gl));
    for (size_t a = 0; cl && gl && a < sizeof ALGOS / sizeof ALGOS[0]; a++)
        for (int clip = 0; clip < 2; clip++) {
            char what[96];
            snprintf(what, sizeof what, "%s%s", ALGOS[a].name, clip ? " + clip" : "");
            model md;
            model_init(&md, SIZES, k, 1000 + a * 2 + (uint64_t)clip);
            model_upload(&md);
            step_both(&md, &ALGOS[a], clip, 0, what, cl, gl);
            model_free(&md);
        }
    cml_param_list_destroy(cl);
    cml_param_list_destroy(gl);
}

/* Two runs from the same inputs: the same bits; then a smaller list (re-uploaded) still right. */
static void test_repeat_and_relist(void) {
    const int k = under_sanitizer() ? N_SIZES - 2 : N_SIZES - 1;
    model md;
    model_init(&md, SIZES, k, 77);
    cml_param_list *cl = NULL, *gl = NULL;
    CHECK_OK(cml_param_list_create(cctx, &cl));
    CHECK_OK(cml_param_list_create(gctx, &gl));
    model_upload(&md);
    step_both(&md, &ALGOS[0], true, 0, "adamw + clip, first run", cl, gl);
    /* run the GPU again from the same starting point: compare with the first run's result */
    model again;
    model_init(&again, SIZES, k, 77);
    cml_param_slice ds[MAX_SLICES];
    const int n = slices_of(&again, true, ds, 0, true, true);
    model_upload(&again);
    bool changed = false;
    CHECK_OK(cml_param_list_set(gl, ds, n, &changed));
    CHECK(changed);
    CHECK_OK(cml_param_list_grad_norm(gctx, gl, 5.0));
    CHECK_OK(run_update(gctx, gl, &ALGOS[0], cml_param_list_clip_coef(gl)));
    for (int s = 0; s < k; s++)
        for (int w = 0; w < 4; w++) { /* the first run's results are md's host buffers */
            free(again.h[s][w]);
            again.h[s][w] = malloc(sizeof(float) * (size_t)total_of(&md, s));
            memcpy(again.h[s][w], md.h[s][w], sizeof(float) * (size_t)total_of(&md, s));
        }
    check_same("adamw + clip, repeat run", &again);
    model_free(&again);
    /* a second step over slices 3.. only (the list changes and is re-uploaded) */
    step_both(&md, &ALGOS[4], true, 3, "sgd nesterov + clip over a shorter list", cl, gl);
    step_both(&md, &ALGOS[4], false, 3, "sgd nesterov, same list again", cl, gl);
    /* an empty list */
    double norm = -1;
    CHECK_OK(cml_param_list_set(gl, NULL, 0, NULL));
    CHECK_OK(cml_param_list_grad_norm(gctx, gl, 1.0));
    CHECK_OK(cml_param_list_read_norm(gctx, gl, &norm));
    CHECK(norm == 0.0);
    CHECK_OK(run_update(gctx, gl, &ALGOS[0], cml_param_list_clip_coef(gl)));
    model_free(&md);
    cml_param_list_destroy(cl);
    cml_param_list_destroy(gl);
}

/* ---- framework ---------------------------------------------------------------------------- */

#define FP 4
static const int64_t FSIZES[FP] = {5, 1025, 30000, 70001};

/* Params on dev with the same values for every dev; grads through backward of sum(p * g). */
static void make_params(cml_tensor **t, cml_param *params, cml_device dev, uint64_t seed) {
    cml_rng r;
    cml_rng_init(&r, seed);
    for (int i = 0; i < FP; i++) {
        cml_tensor *h = cml_tensor_rand(1, &FSIZES[i], -1.0f, 1.0f, &r, CML_F32, CML_DEVICE_CPU);
        t[i] = cml_tensor_to(h, dev);
        cml_tensor_release(h);
        cml_tensor_set_requires_grad(t[i], true);
        snprintf(params[i].name, CML_NAME_MAX, "p%d", i);
        params[i].tensor = t[i];
    }
}

static void set_grads(cml_tensor **t, uint64_t seed) {
    cml_rng r;
    cml_rng_init(&r, seed);
    for (int i = 0; i < FP; i++) {
        cml_tensor_zero_grad(t[i]);
        cml_tensor *gh = cml_tensor_rand(1, &FSIZES[i], -2.0f, 2.0f, &r, CML_F32, CML_DEVICE_CPU);
        cml_tensor *g = cml_tensor_to(gh, cml_tensor_device(t[i]));
        cml_tensor *pg = cml_mul(t[i], g);
        cml_tensor *l = cml_sum(pg, NULL, 0, false);
        CHECK_OK(cml_backward(l, NULL));
        cml_tensor_release_all((cml_tensor *[]){gh, g, pg, l}, 4);
    }
}

static void compare_tensors(const char *what, cml_tensor **a, cml_tensor **b) {
    for (int i = 0; i < FP; i++) {
        const size_t bytes = sizeof(float) * (size_t)FSIZES[i];
        float *x = malloc(bytes), *y = malloc(bytes);
        CHECK_OK(cml_tensor_to_host(a[i], x, bytes));
        CHECK_OK(cml_tensor_to_host(b[i], y, bytes));
        CHECK_MSG(memcmp(x, y, bytes) == 0, "%s: param %d differs between the CPU and the GPU", what, i);
        free(x), free(y);
    }
}

/* A burst of device work (about 15 ms) queued on the GPU context's stream. */
static void keep_stream_busy(void *buf, int64_t n) {
    cml_layout l = {1, {n}, {1}};
    for (int i = 0; i < 40; i++) CHECK_OK(cml_fill(gctx, buf, &l, CML_F32, (double)i));
}

static double now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void test_framework_clip_step(void) {
    cml_tensor *tc[FP], *tg[FP];
    cml_param pc[FP], pg[FP];
    make_params(tc, pc, CML_DEVICE_CPU, 5);
    make_params(tg, pg, gpu, 5);
    cml_optim *oc = cml_adamw_create(pc, FP, (cml_adam_opts){.lr = 1e-2f, .weight_decay = 0.1f});
    cml_optim *og = cml_adamw_create(pg, FP, (cml_adam_opts){.lr = 1e-2f, .weight_decay = 0.1f});
    const int64_t busy_n = (int64_t)1 << 28; /* 1 GiB of f32 */
    void *busy = dev_alloc(sizeof(float) * (size_t)busy_n);
    CHECK(oc && og && busy);
    for (int step = 0; oc && og && busy && step < 4; step++) {
        set_grads(tc, 50 + (uint64_t)step);
        set_grads(tg, 50 + (uint64_t)step);
        CHECK_OK(cml_optim_clip_grad_norm(oc, 20.0));
        CHECK_OK(cml_optim_step(oc));
        if (step >= 1) { /* steady state (the lists exist): clip + step only queue work */
            CHECK_OK(cml_ctx_synchronize(gctx));
            const double t0 = now_ms();
            keep_stream_busy(busy, busy_n);
            const double t1 = now_ms();
            CHECK_OK(cml_optim_clip_grad_norm(og, 20.0));
            CHECK_OK(cml_optim_step(og));
            const double t2 = now_ms();
            CHECK_OK(cml_ctx_synchronize(gctx));
            const double t3 = now_ms();
            /* had clip + step waited for the device, they would have lasted until the burst ended */
            CHECK_MSG(t3 - t0 > 4.0 && t2 - t1 < 0.25 * (t3 - t1),
                      "step %d: clip + step took %.3f ms on the host while the device was busy for %.3f ms: they "
                      "waited for it", step, t2 - t1, t3 - t0);
            if (step == 1) printf("clip + step: %.3f ms on the host, device busy %.3f ms\n", t2 - t1, t3 - t0);
        } else {
            CHECK_OK(cml_optim_clip_grad_norm(og, 20.0));
            CHECK_OK(cml_optim_step(og));
        }
        double nc = 0, ng = 0;
        CHECK_OK(cml_optim_grad_norm(oc, &nc));
        CHECK_OK(cml_optim_grad_norm(og, &ng));
        CHECK_MSG(memcmp(&nc, &ng, sizeof nc) == 0 && nc > 20.0, "step %d: norm %.17g on the GPU, %.17g on the CPU",
                  step, ng, nc);
        char what[32];
        snprintf(what, sizeof what, "adamw + clip step %d", step);
        compare_tensors(what, tc, tg);
    }
    dev_free(busy, sizeof(float) * (size_t)busy_n);
    cml_optim_destroy(oc), cml_optim_destroy(og);
    cml_tensor_release_all(tc, FP), cml_tensor_release_all(tg, FP);
}

/* Parameters on two devices: the step groups them; clipping in the step refuses. */
static void test_framework_mixed_devices(void) {
    cml_tensor *tc[FP], *tg[FP], *th[FP], *mixed[FP];
    cml_param pc[FP], pg[FP], ph[FP], pm[FP];
    make_params(tc, pc, CML_DEVICE_CPU, 9);
    make_params(tg, pg, gpu, 9);
    make_params(th, ph, CML_DEVICE_CPU, 9);
    for (int i = 0; i < FP; i++) { /* the odd ones on the GPU */
        pm[i] = i % 2 ? pg[i] : ph[i];
        mixed[i] = pm[i].tensor;
    }
    cml_optim *oc = cml_sgd_create(pc, FP, (cml_sgd_opts){.lr = 0.1f, .momentum = 0.9f});
    cml_optim *om = cml_sgd_create(pm, FP, (cml_sgd_opts){.lr = 0.1f, .momentum = 0.9f});
    CHECK(oc && om);
    for (int step = 0; oc && om && step < 2; step++) {
        set_grads(tc, 60 + (uint64_t)step);
        set_grads(mixed, 60 + (uint64_t)step);
        CHECK_OK(cml_optim_step(oc));
        CHECK_OK(cml_optim_step(om));
        compare_tensors("sgd over two devices", tc, mixed);
    }
    CHECK_STATUS(cml_optim_clip_grad_norm(om, 1.0), CML_ERR_UNSUPPORTED,
                 "clipping in the step needs every grad on one device");
    cml_optim_destroy(oc), cml_optim_destroy(om);
    cml_tensor_release_all(tc, FP), cml_tensor_release_all(tg, FP), cml_tensor_release_all(th, FP);
}

static void test_errors(void) {
    cml_param_list *gl = NULL;
    CHECK_OK(cml_param_list_create(gctx, &gl));
    double norm;
    CHECK_STATUS(cml_param_list_read_norm(gctx, gl, &norm), CML_ERR_INVALID_ARG, "no norm yet");
    CHECK_STATUS(cml_param_list_grad_norm(cctx, gl, 1.0), CML_ERR_INVALID_ARG,
                 "list was created for another context (on cuda:0); ctx is on cpu");
    float one = 0;
    download(&one, cml_param_list_clip_coef(gl), sizeof one);
    CHECK(one == 1.0f);
    cml_param_list_destroy(gl);
}

int main(void) {
    int rc = gpu_test_init(4242);
    if (rc) return rc;
    RUN(test_updates_match_cpu);
    RUN(test_repeat_and_relist);
    RUN(test_framework_clip_step);
    RUN(test_framework_mixed_devices);
    RUN(test_errors);
    return th_finish();
}
