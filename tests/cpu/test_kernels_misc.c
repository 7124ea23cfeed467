/* Dropout (mask bits against cml_philox_word, scaling, keep rate) and the
 * SGD / Adam / AdamW updates against float64 re-implementations of PyTorch's
 * update rules over several steps. */
#include "kernel_test_util.h"

static void run_dropout(int64_t n, float p, cml_dtype dt, uint64_t seed, uint64_t offset, cml_rng *rng) {
    cml_layout l = kt_layout(1, &n);
    kt_view x = kt_view_alloc(l, dt), y = kt_view_alloc(l, dt);
    kt_fill_uniform(&x, -2, 2, rng);
    uint8_t *mask = kt_malloc((size_t)n);
    memset(mask, 0xAB, (size_t)n);
    CHECK_OK(cml_dropout_fwd(kt_ctx(), y.data, mask, x.data, n, dt, p, seed, offset));
    float *out = kt_malloc((size_t)n * 4);
    double *ref = kt_malloc((size_t)n * 8);
    int64_t wrong_mask = 0, kept = 0;
    for (int64_t i = 0; i < n; i++) {
        bool keep = cml_u32_to_unit(cml_philox_word(seed, offset, (uint64_t)i)) >= p;
        wrong_mask += mask[i] != keep;
        kept += keep;
        ref[i] = keep ? kt_get(&x, i) / (1.0 - p) : 0.0;
        out[i] = (float)kt_get(&y, i);
    }
    CHECK_MSG(wrong_mask == 0, "dropout n=%lld p=%g: %lld mask bits differ from cml_philox_word", (long long)n,
              (double)p, (long long)wrong_mask);
    KT_CHECK_CLOSE(out, ref, n, kt_tol(dt), "dropout n=%lld p=%g %s", (long long)n, (double)p, cml_dtype_name(dt));
    if (n >= 10000) { /* the keep rate is 1 - p within 5 standard deviations */
        double sd = sqrt(n * p * (1 - p));
        CHECK_MSG(fabs((double)kept - n * (1.0 - p)) <= 5 * sd + 1, "kept %lld of %lld at p=%g", (long long)kept,
                  (long long)n, (double)p);
    }
    free(mask);
    free(out);
    free(ref);
    kt_view_free(&x);
    kt_view_free(&y);
}

static void test_dropout(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 50);
    static const int64_t sizes[] = {1, 7, 1025, 100003};
    static const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
    for (int s = 0; s < 4; s++)
        for (int k = 0; k < 4; k++) run_dropout(sizes[s], ps[k], CML_F32, 42 + (uint64_t)s, 7 * (uint64_t)k, &rng);
    run_dropout(1025, 0.3f, CML_BF16, 0xFFFFFFFF12345678ull, 0x100000000ull, &rng); /* both halves of seed/offset */
    run_dropout(127, 0.3f, CML_F16, 3, 5, &rng);
    /* determinism and offset: the same (seed, offset) gives the same mask; another offset does not */
    enum { N = 4096 };
    float x[N], y[N];
    uint8_t m1[N], m2[N], m3[N];
    th_fill_uniform(x, N, -1, 1, &rng);
    CHECK_OK(cml_dropout_fwd(kt_ctx(), y, m1, x, N, CML_F32, 0.5f, 9, 100));
    CHECK_OK(cml_dropout_fwd(kt_ctx(), y, m2, x, N, CML_F32, 0.5f, 9, 100));
    CHECK_OK(cml_dropout_fwd(kt_ctx(), y, m3, x, N, CML_F32, 0.5f, 9, 101));
    CHECK(memcmp(m1, m2, N) == 0 && memcmp(m1, m3, N) != 0);
    CHECK(memcmp(m1 + 4, m3, N - 4) == 0); /* offset counts blocks of 4 words */
    CHECK_OK(cml_dropout_fwd(kt_ctx(), y, NULL, x, N, CML_F32, 0.5f, 9, 100)); /* the mask is optional */
}

static void ref_sgd(double *p, const double *g0, double *buf, int64_t n, double lr, double mom, bool nesterov,
                    double wd, bool first) {
    for (int64_t i = 0; i < n; i++) {
        double g = g0[i] + wd * p[i];
        if (mom != 0) {
            buf[i] = first ? g : mom * buf[i] + g;
            g = nesterov ? g + mom * buf[i] : buf[i];
        }
        p[i] -= lr * g;
    }
}

static void ref_adam(double *p, const double *g0, double *m, double *v, int64_t n, double lr, double b1, double b2,
                     double eps, double wd, bool decoupled, int64_t step) {
    double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step);
    for (int64_t i = 0; i < n; i++) {
        double g = g0[i];
        if (decoupled) p[i] *= 1 - lr * wd;
        else g += wd * p[i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

static void to_double(double *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

static void run_optimizer(bool adam, int64_t n, float momentum, bool nesterov, float wd, bool decoupled, cml_rng *rng) {
    float *p = kt_malloc((size_t)n * 4), *g = kt_malloc((size_t)n * 4), *s1 = kt_malloc((size_t)n * 4),
          *s2 = kt_malloc((size_t)n * 4);
    double *rp = kt_malloc((size_t)n * 8), *rg = kt_malloc((size_t)n * 8), *r1 = kt_malloc((size_t)n * 8),
           *r2 = kt_malloc((size_t)n * 8);
    th_fill_uniform(p, n, -1, 1, rng);
    to_double(rp, p, n);
    th_poison(s1, (size_t)n * 4); /* momentum buffer: written before it is read on the first step */
    memset(s2, 0, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++) r1[i] = r2[i] = 0;
    if (adam) memset(s1, 0, (size_t)n * 4);
    for (int step = 1; step <= 4; step++) {
        th_fill_uniform(g, n, -1, 1, rng);
        to_double(rg, g, n);
        if (adam) {
            CHECK_OK(cml_adam_update(kt_ctx(), p, g, s1, s2, n, 1e-2f, 0.9f, 0.999f, 1e-8f, wd, decoupled, step));
            /* the kernel sees the hyperparameters rounded to f32 (1 - 0.999f is 1.3e-5 off 0.001) */
            ref_adam(rp, rg, r1, r2, n, 1e-2f, 0.9f, 0.999f, 1e-8f, wd, decoupled, step);
        } else {
            CHECK_OK(cml_sgd_update(kt_ctx(), p, g, momentum != 0 ? s1 : NULL, n, 0.1f, momentum, nesterov, wd, step == 1));
            ref_sgd(rp, rg, r1, n, 0.1f, momentum, nesterov, wd, step == 1);
        }
    }
    KT_CHECK_CLOSE(p, rp, n, 1e-5, "%s n=%lld momentum=%g nesterov=%d wd=%g decoupled=%d", adam ? "adam" : "sgd",
                   (long long)n, (double)momentum, nesterov, (double)wd, decoupled);
    if (adam) {
        KT_CHECK_CLOSE(s1, r1, n, 1e-5, "adam m");
        KT_CHECK_CLOSE(s2, r2, n, 1e-5, "adam v");
    } else if (momentum != 0) {
        KT_CHECK_CLOSE(s1, r1, n, 1e-5, "sgd momentum buffer");
    }
    free(p);
    free(g);
    free(s1);
    free(s2);
    free(rp);
    free(rg);
    free(r1);
    free(r2);
}

static void test_sgd(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 51);
    static const int64_t sizes[] = {1, 7, 1025, 40000};
    for (int s = 0; s < 4; s++) {
        run_optimizer(false, sizes[s], 0.0f, false, 0.0f, false, &rng);
        run_optimizer(false, sizes[s], 0.9f, false, 1e-2f, false, &rng);
        run_optimizer(false, sizes[s], 0.9f, true, 1e-2f, false, &rng);
    }
}

static void test_adam(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 52);
    static const int64_t sizes[] = {1, 7, 1025, 40000};
    for (int s = 0; s < 4; s++) {
        run_optimizer(true, sizes[s], 0, false, 0.0f, false, &rng);
        run_optimizer(true, sizes[s], 0, false, 0.1f, false, &rng); /* Adam: L2 into the gradient */
        run_optimizer(true, sizes[s], 0, false, 0.1f, true, &rng);  /* AdamW: decoupled decay */
    }
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float a[4] = {0}, b[4] = {0}, c[4] = {0}, d[4] = {0};
    uint8_t mask[4];
    CHECK_STATUS(cml_dropout_fwd(ctx, a, mask, b, 4, CML_F32, 1.0f, 1, 0), CML_ERR_INVALID_ARG,
                 "cml_dropout_fwd: p=1 must be in [0, 1)");
    CHECK_STATUS(cml_dropout_fwd(ctx, a, mask, b, 4, CML_F32, NAN, 1, 0), CML_ERR_INVALID_ARG, "must be in [0, 1)");
    CHECK_STATUS(cml_dropout_fwd(ctx, a, mask, b, -2, CML_F32, 0.5f, 1, 0), CML_ERR_INVALID_ARG,
                 "cml_dropout_fwd: n=-2 must be >= 0");
    CHECK_STATUS(cml_dropout_fwd(ctx, a, mask, b, 4, CML_I64, 0.5f, 1, 0), CML_ERR_DTYPE, "dtype=i64");
    CHECK_STATUS(cml_sgd_update(ctx, a, b, NULL, 4, 0.1f, 0.9f, false, 0, true), CML_ERR_INVALID_ARG,
                 "cml_sgd_update: momentum_buf must not be NULL when momentum=0.9");
    CHECK_STATUS(cml_sgd_update(ctx, a, b, c, 4, 0.1f, 0.0f, true, 0, true), CML_ERR_INVALID_ARG,
                 "nesterov=true needs momentum > 0");
    CHECK_STATUS(cml_sgd_update(ctx, a, b, c, 4, -0.1f, 0.0f, false, 0, true), CML_ERR_INVALID_ARG,
                 "cml_sgd_update: lr=-0.1 must be >= 0");
    CHECK_STATUS(cml_adam_update(ctx, a, b, c, d, 4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, false, 0), CML_ERR_INVALID_ARG,
                 "cml_adam_update: step=0 must be >= 1");
    CHECK_STATUS(cml_adam_update(ctx, a, b, c, d, 4, 1e-3f, 1.0f, 0.999f, 1e-8f, 0, false, 1), CML_ERR_INVALID_ARG,
                 "cml_adam_update: beta1=1 must be in [0, 1)");
    CHECK_STATUS(cml_adam_update(ctx, a, b, NULL, d, 4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, false, 1), CML_ERR_INVALID_ARG,
                 "cml_adam_update: m must not be NULL");
    CHECK_STATUS(cml_adam_update(NULL, a, b, c, d, 4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, false, 1), CML_ERR_INVALID_ARG,
                 "ctx must not be NULL");
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_dropout_fwd(&cuda, a, mask, b, 4, CML_F32, 0.5f, 1, 0));
    KT_CHECK_CUDA_DISPATCH(cml_adam_update(&cuda, a, b, c, d, 4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, false, 1));
}

int main(void) {
    RUN(test_dropout);
    RUN(test_sgd);
    RUN(test_adam);
    RUN(test_errors);
    return kt_finish();
}
