/* GPU tests of the convolution kernels (src/kernels/cuda/conv/): forward,
 * backward-data and backward-filter (with and without bias) against the CPU
 * reference on random inputs, in NCHW and NHWC, f32 (every shape) and
 * bf16/f16 (a subset). The shapes cover 1x1 images, odd sizes, stride 2 with
 * padding, dilation 2, groups, depthwise, the direct 1x1 path, N = 1 and 7,
 * more images than filter-gradient chunks (several images per chunk and a
 * short last chunk) and images whose column matrices take several passes.
 * Every output is poisoned before each run, two runs must be bitwise
 * identical, and results are within the dtype's norm-wise tolerance.
 * Exits 77 ("skipped") without a GPU. */
#include "gpu_row_util.h"

typedef struct conv_case {
    int64_t N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, G;
    bool big; /* left out under compute-sanitizer */
} conv_case;

static const conv_case CASES[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},       /* a 1x1 image, 1x1 kernel (direct) */
    {7, 3, 1, 1, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},       /* 1x1 images, 3x3 kernel all padding but the centre */
    {7, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},       /* odd sizes, N = 7 */
    {2, 4, 9, 11, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},      /* stride 2 with padding */
    {3, 2, 10, 9, 3, 3, 2, 1, 1, 2, 1, 2, 2, 1, false},      /* dilation 2 */
    {2, 6, 8, 8, 9, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},       /* groups 3 */
    {7, 8, 6, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8, false},       /* depthwise, stride 2 */
    {1, 5, 9, 9, 10, 3, 3, 1, 1, 1, 1, 2, 2, 5, false},      /* depthwise x2 multiplier, dilation 2, N = 1 */
    {5, 16, 7, 7, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},     /* 1x1: the direct path */
    {3, 6, 7, 7, 6, 1, 1, 1, 1, 0, 0, 1, 1, 3, false},       /* 1x1 with groups */
    {2, 4, 13, 7, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},      /* 1x1, stride 2 (not direct) */
    {2, 3, 6, 17, 4, 1, 5, 1, 3, 0, 2, 1, 1, 1, false},      /* 1x5 kernel, stride 1x3 */
    {2, 3, 5, 5, 4, 5, 5, 1, 1, 0, 0, 1, 1, 1, false},       /* kernel as large as the input: P = Q = 1 */
    {64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 1, 1, 1, false},    /* LeNet conv1 */
    {64, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 1, 1, 1, false},   /* LeNet conv2 */
    {16, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  /* CIFAR stage 2 */
    {257, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},     /* 2 images per filter chunk, a short last one */
    {301, 4, 64, 64, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},    /* chunks over several passes */
    {3, 16, 256, 256, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},   /* one image per pass */
    {300, 16, 8, 8, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},   /* 1x1 with several images per chunk */
};
enum { N_CASES = (int)(sizeof CASES / sizeof CASES[0]) };

static bool failed_setup;

/* Runs `call` twice with the outputs poisoned before each; both runs' outputs must be bitwise equal.
 * The first run's outputs end up in got_a / got_b (got_b and out_b may be NULL). */
#define TWICE2(what, out_a, bytes_a, got_a, out_b, bytes_b, got_b, call)                          \
    do {                                                                                          \
        void *oa_ = (out_a), *ob_ = (out_b);                                                      \
        unsigned char *ga_ = (unsigned char *)(got_a), *gb_ = (unsigned char *)(got_b);            \
        const size_t na_ = (bytes_a), nb_ = (bytes_b);                                            \
        unsigned char *ra_ = malloc(na_), *rb_ = malloc(nb_ ? nb_ : 1);                           \
        for (int rep_ = 0; rep_ < 2; rep_++) {                                                    \
            poison(oa_, na_);                                                                     \
            if (ob_) poison(ob_, nb_);                                                            \
            CHECK_OK(call);                                                                       \
            download(rep_ ? ra_ : ga_, oa_, na_);                                                 \
            if (ob_) download(rep_ ? rb_ : gb_, ob_, nb_);                                        \
        }                                                                                         \
        CHECK_MSG(memcmp(ra_, ga_, na_) == 0, "%s: a repeat run differs", (what));                 \
        if (ob_) CHECK_MSG(memcmp(rb_, gb_, nb_) == 0, "%s: a repeat run's bias gradient differs", (what)); \
        free(ra_);                                                                                \
        free(rb_);                                                                                \
    } while (0)

static void run_conv(const conv_case *k, bool cl, cml_dtype dt, bool with_bias) {
    cml_conv2d_desc d = {k->N, k->C, k->H, k->W, k->K, k->R, k->S, k->sh, k->sw, k->ph, k->pw, k->dh, k->dw, k->G,
                         cl, dt};
    int64_t P = 0, Q = 0;
    CHECK_OK(cml_conv2d_output_size(&d, &P, &Q));
    char what[200];
    snprintf(what, sizeof what, "conv %s %s N=%lld C=%lld %lldx%lld K=%lld %lldx%lld s=%lld,%lld p=%lld,%lld d=%lld,%lld g=%lld%s",
             cml_dtype_name(dt), cl ? "NHWC" : "NCHW", (long long)k->N, (long long)k->C, (long long)k->H,
             (long long)k->W, (long long)k->K, (long long)k->R, (long long)k->S, (long long)k->sh, (long long)k->sw,
             (long long)k->ph, (long long)k->pw, (long long)k->dh, (long long)k->dw, (long long)k->G,
             with_bias ? " bias" : "");
    const size_t es = cml_dtype_size(dt);
    const int64_t nx = k->N * k->C * k->H * k->W, nw = k->K * (k->C / k->G) * k->R * k->S, ny = k->N * k->K * P * Q;
    const size_t bx = (size_t)nx * es, bw = (size_t)nw * es, by = (size_t)ny * es, bb = (size_t)k->K * es;
    unsigned char *hx = malloc(bx), *hw = malloc(bw), *hb = malloc(bb), *hdy = malloc(by);
    unsigned char *want_y = malloc(by), *got_y = malloc(by), *want_dx = malloc(bx), *got_dx = malloc(bx);
    unsigned char *want_dw = malloc(bw), *got_dw = malloc(bw), *want_db = malloc(bb), *got_db = malloc(bb);
    void *dx_ = dev_alloc(bx), *dw_ = dev_alloc(bw), *db_ = dev_alloc(bb), *ddy = dev_alloc(by), *dy_out = dev_alloc(by),
         *ddx = dev_alloc(bx), *ddw = dev_alloc(bw), *ddb = dev_alloc(bb);
    bool ok = hx && hw && hb && hdy && want_y && got_y && want_dx && got_dx && want_dw && got_dw && want_db &&
              got_db && dx_ && dw_ && db_ && ddy && dy_out && ddx && ddw && ddb;
    CHECK(ok);
    if (!ok) failed_setup = true;
    if (ok) {
        random_fill(hx, dt, nx, -1.0f, 1.0f);
        random_fill(hw, dt, nw, -0.5f, 0.5f);
        random_fill(hb, dt, k->K, -0.5f, 0.5f);
        random_fill(hdy, dt, ny, -1.0f, 1.0f);
        upload(dx_, hx, bx);
        upload(dw_, hw, bw);
        upload(db_, hb, bb);
        upload(ddy, hdy, by);
        const void *bias_h = with_bias ? hb : NULL, *bias_d = with_bias ? db_ : NULL;
        const double tol = tol_for(dt);
        char w2[240];

        memset(want_y, 0xFF, by);
        CHECK_OK(cml_conv2d_fwd(cctx, &d, want_y, hx, hw, bias_h));
        snprintf(w2, sizeof w2, "%s fwd", what);
        TWICE2(w2, dy_out, by, got_y, NULL, 0, NULL, cml_conv2d_fwd(gctx, &d, dy_out, dx_, dw_, bias_d));
        compare_tol(w2, got_y, want_y, dt, ny, tol, false);

        memset(want_dx, 0xFF, bx);
        CHECK_OK(cml_conv2d_bwd_data(cctx, &d, want_dx, hdy, hw));
        snprintf(w2, sizeof w2, "%s bwd_data", what);
        TWICE2(w2, ddx, bx, got_dx, NULL, 0, NULL, cml_conv2d_bwd_data(gctx, &d, ddx, ddy, dw_));
        compare_tol(w2, got_dx, want_dx, dt, nx, tol, false);

        memset(want_dw, 0xFF, bw);
        memset(want_db, 0xFF, bb);
        CHECK_OK(cml_conv2d_bwd_filter(cctx, &d, want_dw, with_bias ? want_db : NULL, hdy, hx));
        snprintf(w2, sizeof w2, "%s bwd_filter", what);
        void *db_out = with_bias ? ddb : NULL;
        TWICE2(w2, ddw, bw, got_dw, db_out, bb, got_db,
               cml_conv2d_bwd_filter(gctx, &d, ddw, db_out, ddy, dx_));
        compare_tol(w2, got_dw, want_dw, dt, nw, tol, false);
        if (with_bias) compare_tol(w2, got_db, want_db, dt, k->K, tol, false);
    }
    free(hx), free(hw), free(hb), free(hdy), free(want_y), free(got_y), free(want_dx), free(got_dx);
    free(want_dw), free(got_dw), free(want_db), free(got_db);
    dev_free(dx_, bx), dev_free(dw_, bw), dev_free(db_, bb), dev_free(ddy, by), dev_free(dy_out, by);
    dev_free(ddx, bx), dev_free(ddw, bw), dev_free(ddb, bb);
}

static void test_f32_shapes(void) {
    for (int i = 0; i < N_CASES && !failed_setup; i++) {
        if (CASES[i].big && under_sanitizer()) continue;
        for (int cl = 0; cl < 2; cl++) run_conv(&CASES[i], cl, CML_F32, (i + cl) % 2 == 0);
    }
}

/* The narrow dtypes share the f32 GEMMs; they differ in the conversions on the way in and out. */
static void test_narrow_dtypes(void) {
    static const int subset[] = {2, 3, 5, 6, 8, 13, 16};
    for (int d = 1; d < n_test_dtypes(); d++)
        for (size_t i = 0; i < sizeof subset / sizeof subset[0]; i++)
            for (int cl = 0; cl < 2; cl++) run_conv(&CASES[subset[i]], cl, TEST_DTYPES[d], cl == 0);
}

/* No images: the filter and bias gradients are sums over nothing, so they are overwritten with zeros. */
static void test_no_images(void) {
    cml_conv2d_desc d = {0, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, false, CML_F32};
    const size_t bw = 6 * 2 * 9 * sizeof(float), bb = 6 * sizeof(float);
    void *dw = dev_alloc(bw), *db = dev_alloc(bb), *p = dev_alloc(64);
    poison(dw, bw);
    poison(db, bb);
    CHECK_OK(cml_conv2d_bwd_filter(gctx, &d, dw, db, p, p));
    float hw[6 * 2 * 9], hb[6];
    download(hw, dw, bw);
    download(hb, db, bb);
    for (int i = 0; i < 6 * 2 * 9; i++) CHECK(hw[i] == 0.0f);
    for (int i = 0; i < 6; i++) CHECK(hb[i] == 0.0f);
    CHECK_OK(cml_conv2d_fwd(gctx, &d, p, p, p, NULL));
    dev_free(dw, bw), dev_free(db, bb), dev_free(p, 64);
}

/* fp8 storage has no CUDA convolution: a clear CML_ERR_UNSUPPORTED, not a wrong answer. */
static void test_unsupported_dtype(void) {
    cml_conv2d_desc d = {1, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, CML_F8E4M3};
    void *p = dev_alloc(1024);
    CHECK_STATUS(cml_conv2d_fwd(gctx, &d, p, p, p, NULL), CML_ERR_UNSUPPORTED, "cml_conv2d_fwd: dtype=f8e4m3");
    CHECK_STATUS(cml_conv2d_bwd_data(gctx, &d, p, p, p), CML_ERR_UNSUPPORTED, "cml_conv2d_bwd_data: dtype=f8e4m3");
    CHECK_STATUS(cml_conv2d_bwd_filter(gctx, &d, p, NULL, p, p), CML_ERR_UNSUPPORTED,
                 "cml_conv2d_bwd_filter: dtype=f8e4m3");
    dev_free(p, 1024);
}

int main(void) {
    int rc = gpu_test_init(97531);
    if (rc) return rc;
    RUN(test_f32_shapes);
    RUN(test_narrow_dtypes);
    RUN(test_no_images);
    RUN(test_unsupported_dtype);
    return th_finish();
}
