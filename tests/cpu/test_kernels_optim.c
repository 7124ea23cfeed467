/* Multi-tensor (fused) optimizers on the CPU: cml_adam_update_multi and
 * cml_sgd_update_multi against the single-tensor updates slice by slice (must be
 * bitwise identical) and against float64 update equations, over many slices of
 * odd sizes (0, 1, 7, 127, 1025, chunk boundaries +-1, several chunks, one slice
 * one float off 16-byte alignment); the global gradient norm against float64 and
 * against an independent emulation of the documented fixed order (bitwise: the
 * GPU test then holds the GPU to the same bits); clipping folded into the update
 * vs clipping the grads first; guard elements around every buffer; the list's
 * upload-on-change; and the argument errors. */
#include "kernel_test_util.h"

#define GUARD 8
#define GUARD_VALUE 12345.0f

static const int64_t SIZES[] = {1, 7, 0, 127, 1025, 4, 16383, 16384, 16385, 3, 40001, 65536 + 5};
enum { NS = sizeof SIZES / sizeof SIZES[0] };

/* Every slice's four buffers, each with GUARD sentinel floats on both sides. */
typedef struct model {
    int k;
    int64_t n[NS];
    float *buf[NS][4]; /* param, grad, m, v including guards */
    int shift[NS];     /* 1 for the slice placed one float off alignment */
} model;

static float *arr(const model *md, int s, int which) { return md->buf[s][which] + GUARD + md->shift[s]; }

static void model_init(model *md, uint64_t seed) {
    cml_rng r;
    cml_rng_init(&r, seed);
    md->k = NS;
    for (int s = 0; s < NS; s++) {
        md->n[s] = SIZES[s];
        md->shift[s] = s == 4; /* n = 1025, unaligned */
        for (int w = 0; w < 4; w++) {
            const int64_t total = md->n[s] + 2 * GUARD + 1;
            md->buf[s][w] = kt_malloc(sizeof(float) * (size_t)total);
            for (int64_t i = 0; i < total; i++) md->buf[s][w][i] = GUARD_VALUE;
        }
        th_fill_uniform(arr(md, s, 0), md->n[s], -1.0f, 1.0f, &r);
        th_fill_uniform(arr(md, s, 1), md->n[s], -2.0f, 2.0f, &r);
        th_fill_uniform(arr(md, s, 2), md->n[s], -0.1f, 0.1f, &r);
        th_fill_uniform(arr(md, s, 3), md->n[s], 0.0f, 0.01f, &r);
    }
}

static void model_clone(model *dst, const model *src) {
    *dst = *src;
    for (int s = 0; s < NS; s++)
        for (int w = 0; w < 4; w++) {
            const size_t bytes = sizeof(float) * (size_t)(src->n[s] + 2 * GUARD + 1);
            dst->buf[s][w] = kt_malloc(bytes);
            memcpy(dst->buf[s][w], src->buf[s][w], bytes);
        }
}

static void model_free(model *md) {
    for (int s = 0; s < NS; s++)
        for (int w = 0; w < 4; w++) free(md->buf[s][w]);
}

static int model_slices(const model *md, cml_param_slice *out, bool use_m, bool use_v) {
    for (int s = 0; s < md->k; s++)
        out[s] = (cml_param_slice){arr(md, s, 0), arr(md, s, 1), use_m ? arr(md, s, 2) : NULL,
                                   use_v ? arr(md, s, 3) : NULL, md->n[s]};
    return md->k;
}

/* Every buffer, guards included, bitwise equal. */
static void check_same_bits(const char *what, const model *a, const model *b) {
    static const char *names[4] = {"param", "grad", "m", "v"};
    for (int s = 0; s < NS; s++)
        for (int w = 0; w < 4; w++) {
            const size_t bytes = sizeof(float) * (size_t)(a->n[s] + 2 * GUARD + 1);
            CHECK_MSG(memcmp(a->buf[s][w], b->buf[s][w], bytes) == 0, "%s: slice %d (n=%lld) %s differs", what, s,
                      (long long)a->n[s], names[w]);
        }
}

static void check_guards(const char *what, const model *md) {
    for (int s = 0; s < NS; s++)
        for (int w = 0; w < 4; w++) {
            const float *b = md->buf[s][w];
            const int64_t total = md->n[s] + 2 * GUARD + 1, lo = GUARD + md->shift[s], hi = lo + md->n[s];
            for (int64_t i = 0; i < total; i++)
                if ((i < lo || i >= hi) && b[i] != GUARD_VALUE) {
                    CHECK_MSG(false, "%s: slice %d buffer %d: guard element %lld was written", what, s, w, (long long)i);
                    return;
                }
        }
}

static cml_param_list *make_list(const model *md, bool use_m, bool use_v) {
    cml_param_slice sl[NS];
    cml_param_list *list = NULL;
    CHECK_OK(cml_param_list_create(kt_ctx(), &list));
    if (list) CHECK_OK(cml_param_list_set(list, sl, model_slices(md, sl, use_m, use_v), NULL));
    return list;
}

/* ---- float64 references ------------------------------------------------------------------- */

typedef struct hyper {
    float lr, b1, b2, eps, wd, momentum;
    bool decoupled, nesterov, first_step;
    int64_t step;
} hyper;

/* Norm-wise relative error of every param after one Adam step from `before`, with grads scaled by c. */
static double adam_ref_error(const model *before, const model *after, hyper h, float c) {
    double num = 0, den = 0;
    const double bc1 = 1 - pow(h.b1, (double)h.step), bc2 = 1 - pow(h.b2, (double)h.step);
    for (int s = 0; s < NS; s++)
        for (int64_t i = 0; i < before->n[s]; i++) {
            double p = arr(before, s, 0)[i], g = (double)(arr(before, s, 1)[i] * c);
            double m = arr(before, s, 2)[i], v = arr(before, s, 3)[i];
            if (h.decoupled) p *= 1.0 - (double)h.lr * h.wd;
            else g += (double)h.wd * arr(before, s, 0)[i];
            m = h.b1 * m + (1.0 - h.b1) * g;
            v = h.b2 * v + (1.0 - h.b2) * g * g;
            p -= (double)h.lr / bc1 * m / (sqrt(v) / sqrt(bc2) + h.eps);
            const double d = arr(after, s, 0)[i] - p;
            num += d * d;
            den += p * p;
        }
    return sqrt(num / den);
}

static double sgd_ref_error(const model *before, const model *after, hyper h) {
    double num = 0, den = 0;
    for (int s = 0; s < NS; s++)
        for (int64_t i = 0; i < before->n[s]; i++) {
            double p = arr(before, s, 0)[i], g = arr(before, s, 1)[i] + (double)h.wd * p;
            if (h.momentum > 0) {
                double b = h.first_step ? g : h.momentum * (double)arr(before, s, 2)[i] + g;
                g = h.nesterov ? g + h.momentum * b : b;
            }
            p -= (double)h.lr * g;
            const double d = arr(after, s, 0)[i] - p;
            num += d * d;
            den += p * p;
        }
    return sqrt(num / den);
}

/* The documented fixed order, written independently of the library: each warp
 * combines with shfl_down semantics (every lane reads its partner's old value;
 * lanes whose partner is out of the warp keep their own). */
static double emulate_warp(const double *in) {
    double a[32], b[32];
    memcpy(a, in, sizeof a);
    for (int off = 16; off > 0; off /= 2) {
        for (int l = 0; l < 32; l++) b[l] = l + off < 32 ? a[l] + a[l + off] : a[l];
        memcpy(a, b, sizeof a);
    }
    return a[0];
}

static double emulate_block(const double *lanes) {
    double w[32] = {0};
    for (int k = 0; k < 8; k++) w[k] = emulate_warp(lanes + 32 * k);
    return emulate_warp(w);
}

static double emulate_norm(const model *md) {
    double partial_lanes[256] = {0};
    int64_t chunk = 0;
    for (int s = 0; s < NS; s++)
        for (int64_t lo = 0; lo < md->n[s]; lo += CML_PARAM_CHUNK, chunk++) {
            const int64_t len = md->n[s] - lo < CML_PARAM_CHUNK ? md->n[s] - lo : CML_PARAM_CHUNK;
            double lanes[256] = {0};
            for (int t = 0; t < 256; t++)
                for (int64_t k = 0; 4 * (t + 256 * k) < len; k++)
                    for (int q = 0; q < 4; q++) {
                        const int64_t e = 4 * (t + 256 * k) + q;
                        if (e < len) lanes[t] += (double)arr(md, s, 1)[lo + e] * (double)arr(md, s, 1)[lo + e];
                    }
            partial_lanes[chunk % 256] += emulate_block(lanes);
        }
    return sqrt(emulate_block(partial_lanes));
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_adam_matches_single(void) {
    for (int dec = 0; dec < 2; dec++)
        for (int64_t step = 1; step <= 7; step += 6) {
            char what[64];
            snprintf(what, sizeof what, "%s step %lld", dec ? "adamw" : "adam", (long long)step);
            hyper h = {.lr = 3e-3f, .b1 = 0.9f, .b2 = 0.95f, .eps = 1e-8f, .wd = 0.1f, .decoupled = dec, .step = step};
            model ref, a, b;
            model_init(&ref, 100 + (uint64_t)(dec * 10 + step));
            model_clone(&a, &ref);
            model_clone(&b, &ref);
            for (int s = 0; s < NS; s++)
                CHECK_OK(cml_adam_update(kt_ctx(), arr(&a, s, 0), arr(&a, s, 1), arr(&a, s, 2), arr(&a, s, 3), a.n[s],
                                         h.lr, h.b1, h.b2, h.eps, h.wd, h.decoupled, h.step));
            cml_param_list *list = make_list(&b, true, true);
            CHECK_OK(cml_adam_update_multi(kt_ctx(), list, h.lr, h.b1, h.b2, h.eps, h.wd, h.decoupled, h.step, NULL));
            check_same_bits(what, &a, &b);
            check_guards(what, &b);
            const double err = adam_ref_error(&ref, &b, h, 1.0f);
            CHECK_MSG(err < 1e-6, "%s: relative error %.3g vs float64", what, err);
            cml_param_list_destroy(list);
            model_free(&ref), model_free(&a), model_free(&b);
        }
}

static void test_sgd_matches_single(void) {
    static const hyper cases[] = {
        {.lr = 0.1f},
        {.lr = 0.05f, .wd = 0.01f},
        {.lr = 0.1f, .momentum = 0.9f, .first_step = true},
        {.lr = 0.1f, .momentum = 0.9f},
        {.lr = 0.1f, .momentum = 0.8f, .nesterov = true, .wd = 1e-3f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const hyper h = cases[c];
        char what[64];
        snprintf(what, sizeof what, "sgd case %zu", c);
        model ref, a, b;
        model_init(&ref, 200 + c);
        model_clone(&a, &ref);
        model_clone(&b, &ref);
        const bool use_m = h.momentum > 0;
        for (int s = 0; s < NS; s++)
            CHECK_OK(cml_sgd_update(kt_ctx(), arr(&a, s, 0), arr(&a, s, 1), use_m ? arr(&a, s, 2) : NULL, a.n[s], h.lr,
                                    h.momentum, h.nesterov, h.wd, h.first_step));
        cml_param_list *list = make_list(&b, use_m, false);
        CHECK_OK(cml_sgd_update_multi(kt_ctx(), list, h.lr, h.momentum, h.nesterov, h.wd, h.first_step, NULL));
        check_same_bits(what, &a, &b);
        check_guards(what, &b);
        const double err = sgd_ref_error(&ref, &b, h);
        CHECK_MSG(err < 1e-6, "%s: relative error %.3g vs float64", what, err);
        cml_param_list_destroy(list);
        model_free(&ref), model_free(&a), model_free(&b);
    }
}

static void test_norm(void) {
    model md;
    model_init(&md, 300);
    cml_param_list *list = make_list(&md, true, true);
    double norm = 0, seq = 0;
    CHECK_STATUS(cml_param_list_read_norm(kt_ctx(), list, &norm), CML_ERR_INVALID_ARG, "no norm yet");
    CHECK(*cml_param_list_clip_coef(list) == 1.0f);
    CHECK_OK(cml_param_list_grad_norm(kt_ctx(), list, 1.0));
    CHECK_OK(cml_param_list_read_norm(kt_ctx(), list, &norm));
    for (int s = 0; s < NS; s++)
        for (int64_t i = 0; i < md.n[s]; i++) seq += (double)arr(&md, s, 1)[i] * arr(&md, s, 1)[i];
    seq = sqrt(seq);
    CHECK_MSG(fabs(norm - seq) <= 1e-12 * seq, "norm %.17g vs float64 sequential %.17g", norm, seq);
    const double emu = emulate_norm(&md);
    CHECK_MSG(memcmp(&norm, &emu, sizeof norm) == 0, "norm %.17g is not the fixed order's %.17g", norm, emu);
    CHECK(*cml_param_list_clip_coef(list) == (float)(1.0 / (norm + 1e-6)));
    /* repeat: the same bits */
    double again = 0;
    CHECK_OK(cml_param_list_grad_norm(kt_ctx(), list, 1.0));
    CHECK_OK(cml_param_list_read_norm(kt_ctx(), list, &again));
    CHECK(memcmp(&norm, &again, sizeof norm) == 0);
    /* max_norm above the norm: coefficient 1; max_norm = 0: 0 */
    CHECK_OK(cml_param_list_grad_norm(kt_ctx(), list, 2 * norm));
    CHECK(*cml_param_list_clip_coef(list) == 1.0f);
    CHECK_OK(cml_param_list_grad_norm(kt_ctx(), list, 0.0));
    CHECK(*cml_param_list_clip_coef(list) == 0.0f);
    /* a NaN grad: the norm says so, the coefficient leaves the grads alone */
    arr(&md, 5, 1)[2] = NAN;
    CHECK_OK(cml_param_list_grad_norm(kt_ctx(), list, 1.0));
    CHECK_OK(cml_param_list_read_norm(kt_ctx(), list, &norm));
    CHECK(isnan(norm) && *cml_param_list_clip_coef(list) == 1.0f);
    /* an empty list: norm 0 */
    CHECK_OK(cml_param_list_set(list, NULL, 0, NULL));
    CHECK_OK(cml_param_list_grad_norm(kt_ctx(), list, 1.0));
    CHECK_OK(cml_param_list_read_norm(kt_ctx(), list, &norm));
    CHECK(norm == 0.0);
    check_guards("norm", &md);
    cml_param_list_destroy(list);
    model_free(&md);
}

/* Clipping in the update == scaling the grads in place, then the single-tensor updates. */
static void test_clip_in_update(void) {
    for (int alg = 0; alg < 2; alg++) {
        const char *what = alg ? "sgd+clip" : "adamw+clip";
        model ref, a, b;
        model_init(&ref, 400 + (uint64_t)alg);
        model_clone(&a, &ref);
        model_clone(&b, &ref);
        cml_param_list *list = make_list(&b, true, alg == 0);
        CHECK_OK(cml_param_list_grad_norm(kt_ctx(), list, 0.5));
        const float c = *cml_param_list_clip_coef(list);
        CHECK(c > 0.0f && c < 1.0f);
        hyper h = {.lr = 1e-2f, .b1 = 0.8f, .b2 = 0.99f, .eps = 1e-6f, .wd = 0.05f, .decoupled = true, .step = 3,
                   .momentum = 0.9f};
        for (int s = 0; s < NS; s++) {
            for (int64_t i = 0; i < a.n[s]; i++) arr(&a, s, 1)[i] *= c;
            if (alg == 0)
                CHECK_OK(cml_adam_update(kt_ctx(), arr(&a, s, 0), arr(&a, s, 1), arr(&a, s, 2), arr(&a, s, 3), a.n[s],
                                         h.lr, h.b1, h.b2, h.eps, h.wd, true, h.step));
            else
                CHECK_OK(cml_sgd_update(kt_ctx(), arr(&a, s, 0), arr(&a, s, 1), arr(&a, s, 2), a.n[s], h.lr,
                                        h.momentum, false, h.wd, false));
        }
        const float *coef = cml_param_list_clip_coef(list);
        if (alg == 0)
            CHECK_OK(cml_adam_update_multi(kt_ctx(), list, h.lr, h.b1, h.b2, h.eps, h.wd, true, h.step, coef));
        else
            CHECK_OK(cml_sgd_update_multi(kt_ctx(), list, h.lr, h.momentum, false, h.wd, false, coef));
        /* the fused update leaves the grads as they were: put a's back before comparing */
        for (int s = 0; s < NS; s++) memcpy(a.buf[s][1], ref.buf[s][1], sizeof(float) * (size_t)(a.n[s] + 2 * GUARD + 1));
        check_same_bits(what, &a, &b);
        if (alg == 0) {
            const double err = adam_ref_error(&ref, &b, h, c);
            CHECK_MSG(err < 1e-6, "%s: relative error %.3g vs float64", what, err);
        }
        cml_param_list_destroy(list);
        model_free(&ref), model_free(&a), model_free(&b);
    }
}

static void test_list_set(void) {
    model md;
    model_init(&md, 500);
    cml_param_slice sl[NS];
    const int k = model_slices(&md, sl, true, true);
    cml_param_list *list = NULL;
    bool changed = false;
    CHECK_OK(cml_param_list_create(kt_ctx(), &list));
    CHECK(cml_param_list_count(list) == 0);
    CHECK_OK(cml_param_list_set(list, sl, k, &changed));
    CHECK(changed && cml_param_list_count(list) == k);
    CHECK_OK(cml_param_list_set(list, sl, k, &changed));
    CHECK(!changed);
    sl[3].grad = arr(&md, 3, 2); /* another buffer */
    CHECK_OK(cml_param_list_set(list, sl, k, &changed));
    CHECK(changed);
    CHECK_OK(cml_param_list_set(list, sl, k - 1, &changed));
    CHECK(changed && cml_param_list_count(list) == k - 1);
    cml_param_list_destroy(list);
    cml_param_list_destroy(NULL);
    CHECK(cml_param_list_count(NULL) == 0 && cml_param_list_clip_coef(NULL) == NULL);
    model_free(&md);
}

static void test_errors(void) {
    model md;
    model_init(&md, 600);
    cml_param_slice sl[NS];
    const int k = model_slices(&md, sl, true, false);
    cml_param_list *list = NULL, *dummy = NULL;
    cml_ctx *ctx = kt_ctx();
    CHECK_STATUS(cml_param_list_create(NULL, &list), CML_ERR_INVALID_ARG, "ctx must not be NULL");
    CHECK_STATUS(cml_param_list_create(ctx, NULL), CML_ERR_INVALID_ARG, "out must not be NULL");
    cml_ctx fake = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_param_list_create(&fake, &dummy));
    CHECK(dummy == NULL);
    CHECK_OK(cml_param_list_create(ctx, &list));
    CHECK_STATUS(cml_param_list_set(NULL, sl, k, NULL), CML_ERR_INVALID_ARG, "list must not be NULL");
    CHECK_STATUS(cml_param_list_set(list, sl, -1, NULL), CML_ERR_INVALID_ARG, "count=-1 must be >= 0");
    CHECK_STATUS(cml_param_list_set(list, NULL, 2, NULL), CML_ERR_INVALID_ARG, "slices must not be NULL when count=2");
    cml_param_slice bad[2] = {sl[0], sl[1]};
    bad[1].n = -3;
    CHECK_STATUS(cml_param_list_set(list, bad, 2, NULL), CML_ERR_INVALID_ARG, "slices[1].n=-3 must be >= 0");
    bad[1] = sl[1];
    bad[1].grad = NULL;
    CHECK_STATUS(cml_param_list_set(list, bad, 2, NULL), CML_ERR_INVALID_ARG,
                 "slices[1].param and .grad must not be NULL (n=7)");
    bad[1].n = 0; /* an empty slice may have no buffers */
    CHECK_OK(cml_param_list_set(list, bad, 2, NULL));
    CHECK_OK(cml_param_list_set(list, sl, k, NULL)); /* m set, v NULL */
    CHECK_STATUS(cml_adam_update_multi(ctx, list, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, true, 1, NULL), CML_ERR_INVALID_ARG,
                 "slice 0 has v = NULL (n=1); Adam needs m and v");
    CHECK_STATUS(cml_adam_update_multi(ctx, list, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, true, 0, NULL), CML_ERR_INVALID_ARG,
                 "step=0 must be >= 1");
    CHECK_STATUS(cml_adam_update_multi(ctx, list, 1e-3f, 1.0f, 0.999f, 1e-8f, 0, true, 1, NULL), CML_ERR_INVALID_ARG,
                 "beta1=1 must be in [0, 1)");
    CHECK_STATUS(cml_adam_update_multi(ctx, NULL, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, true, 1, NULL), CML_ERR_INVALID_ARG,
                 "list must not be NULL");
    CHECK_STATUS(cml_sgd_update_multi(ctx, list, -1.0f, 0, false, 0, false, NULL), CML_ERR_INVALID_ARG,
                 "lr=-1 must be >= 0");
    CHECK_STATUS(cml_sgd_update_multi(ctx, list, 0.1f, 0, true, 0, false, NULL), CML_ERR_INVALID_ARG,
                 "nesterov=true needs momentum > 0");
    cml_param_slice no_m[2] = {sl[0], sl[1]};
    no_m[1].m = NULL;
    CHECK_OK(cml_param_list_set(list, no_m, 2, NULL));
    CHECK_STATUS(cml_sgd_update_multi(ctx, list, 0.1f, 0.9f, false, 0, false, NULL), CML_ERR_INVALID_ARG,
                 "slice 1 has m = NULL (n=7); SGD with momentum > 0 needs it");
    CHECK_OK(cml_sgd_update_multi(ctx, list, 0.1f, 0.0f, false, 0, false, NULL)); /* plain SGD needs no m */
    CHECK_STATUS(cml_param_list_grad_norm(ctx, list, -1.0), CML_ERR_INVALID_ARG, "max_norm=-1 must be finite");
    CHECK_STATUS(cml_param_list_grad_norm(ctx, list, NAN), CML_ERR_INVALID_ARG, "max_norm=nan must be finite");
    double norm;
    CHECK_STATUS(cml_param_list_read_norm(ctx, list, NULL), CML_ERR_INVALID_ARG, "norm must not be NULL");
    /* a list belongs to the context it was made for */
    cml_ctx *other = NULL;
    CHECK_OK(cml_ctx_create(&other, CML_DEVICE_CPU));
    CHECK_STATUS(cml_param_list_grad_norm(other, list, 1.0), CML_ERR_INVALID_ARG,
                 "list was created for another context (on cpu); ctx is on cpu");
    CHECK_STATUS(cml_sgd_update_multi(other, list, 0.1f, 0, false, 0, false, NULL), CML_ERR_INVALID_ARG,
                 "list was created for another context");
    CHECK_STATUS(cml_param_list_read_norm(other, list, &norm), CML_ERR_INVALID_ARG, "another context");
    cml_ctx_destroy(other);
    cml_param_list_destroy(list);
    model_free(&md);
}

int main(void) {
    RUN(test_adam_matches_single);
    RUN(test_sgd_matches_single);
    RUN(test_norm);
    RUN(test_clip_in_update);
    RUN(test_list_set);
    RUN(test_errors);
    return kt_finish();
}
