/* GPU tests of max / average pooling (src/kernels/cuda/pool/pool.cu) against
 * the CPU reference on random inputs, NCHW and NHWC, f32/bf16/f16: the GPU
 * does the CPU's arithmetic in the CPU's order, so outputs, argmax indices and
 * input gradients must be bitwise equal to the CPU's (NaN and -inf inputs
 * included; a NaN computed from a NaN may differ in payload). Shapes: 1x1
 * images, odd sizes, stride 2 with padding, overlapping windows, windows as
 * large as the input, N = 1 and 7. Outputs are poisoned before each run and
 * two runs must be bitwise identical. A bad index in the backward is
 * reported with the CPU's message (CML_ERR_INVALID_ARG) at the next wait for
 * the stream, once, the good indices' gradients written; or by the call itself
 * on a context created with CML_SYNC_CHECKS=1. Exits 77 without a GPU. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "gpu_row_util.h"

typedef struct pool_case {
    int64_t N, C, H, W, R, S, sh, sw, ph, pw;
} pool_case;

static const pool_case CASES[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0},      /* a 1x1 image */
    {7, 3, 1, 1, 3, 3, 1, 1, 1, 1},      /* 1x1 images in a padded 3x3 window */
    {7, 3, 7, 5, 3, 3, 2, 2, 1, 1},      /* odd sizes, stride 2 with padding */
    {2, 4, 9, 11, 3, 2, 1, 1, 1, 1},     /* overlapping windows: several outputs per input */
    {1, 5, 28, 28, 2, 2, 2, 2, 0, 0},    /* LeNet's 2x2 */
    {3, 2, 13, 13, 5, 3, 3, 2, 2, 1},    /* rectangular window, stride 3x2 */
    {2, 3, 6, 6, 6, 6, 1, 1, 0, 0},      /* window as large as the input */
    {64, 32, 32, 32, 2, 2, 2, 2, 0, 0},  /* a CIFAR stage */
    {5, 17, 15, 9, 4, 4, 3, 1, 2, 2},    /* stride < window < 2 stride, pad = R/2 */
};
enum { N_CASES = (int)(sizeof CASES / sizeof CASES[0]) };

/* Bitwise equal, except that any NaN matches any NaN: arithmetic on a NaN (an average over a
 * window holding one) keeps the input's payload on x86 but gives the canonical NaN on the GPU. */
static bool same_bits(const void *a, const void *b, cml_dtype dt, int64_t n) {
    const size_t es = cml_dtype_size(dt);
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)a + (size_t)i * es, (const char *)b + (size_t)i * es, es) != 0 &&
            !(isnan(cml_dtype_load(a, dt, i)) && isnan(cml_dtype_load(b, dt, i))))
            return false;
    return true;
}

static void run_pool(const pool_case *k, cml_pool_mode mode, bool cl, cml_dtype dt, bool specials) {
    cml_pool2d_desc d = {k->N, k->C, k->H, k->W, k->R, k->S, k->sh, k->sw, k->ph, k->pw, mode, cl, dt};
    int64_t P = 0, Q = 0;
    CHECK_OK(cml_pool2d_output_size(&d, &P, &Q));
    char what[200];
    snprintf(what, sizeof what, "pool %s %s %s N=%lld C=%lld %lldx%lld win %lldx%lld s=%lld,%lld p=%lld,%lld%s",
             mode == CML_POOL_MAX ? "max" : "avg", cml_dtype_name(dt), cl ? "NHWC" : "NCHW", (long long)k->N,
             (long long)k->C, (long long)k->H, (long long)k->W, (long long)k->R, (long long)k->S, (long long)k->sh,
             (long long)k->sw, (long long)k->ph, (long long)k->pw, specials ? " NaN/-inf" : "");
    const size_t es = cml_dtype_size(dt);
    const int64_t nx = k->N * k->C * k->H * k->W, ny = k->N * k->C * P * Q;
    const size_t bx = (size_t)nx * es, by = (size_t)ny * es, bi = (size_t)ny * sizeof(int64_t);
    unsigned char *hx = malloc(bx), *hdy = malloc(by), *want_y = malloc(by), *got_y = malloc(by);
    unsigned char *want_dx = malloc(bx), *got_dx = malloc(bx), *again = malloc(bx > bi ? bx : bi);
    int64_t *want_i = malloc(bi), *got_i = malloc(bi);
    void *dx_ = dev_alloc(bx), *ddy = dev_alloc(by), *dy_out = dev_alloc(by), *di = dev_alloc(bi), *ddx = dev_alloc(bx);
    bool ok = hx && hdy && want_y && got_y && want_dx && got_dx && again && want_i && got_i && dx_ && ddy && dy_out &&
              di && ddx;
    CHECK(ok);
    if (ok) {
        random_fill(hx, dt, nx, -1.0f, 1.0f);
        random_fill(hdy, dt, ny, -1.0f, 1.0f);
        if (specials)
            for (int64_t i = 0; i < nx; i += 7) cml_dtype_store(hx, dt, i, i % 3 == 0 ? NAN : -INFINITY);
        upload(dx_, hx, bx);
        upload(ddy, hdy, by);
        const bool max = mode == CML_POOL_MAX;
        memset(want_y, 0xFF, by);
        memset(want_i, 0xFF, bi);
        CHECK_OK(cml_pool2d_fwd(cctx, &d, want_y, max ? want_i : NULL, hx));
        for (int rep = 0; rep < 2; rep++) {
            poison(dy_out, by);
            poison(di, bi);
            CHECK_OK(cml_pool2d_fwd(gctx, &d, dy_out, max ? di : NULL, dx_));
            download(rep ? again : got_y, dy_out, by);
            if (rep) CHECK_MSG(memcmp(again, got_y, by) == 0, "%s fwd: a repeat run differs", what);
            if (max) {
                download(rep ? (void *)again : (void *)got_i, di, bi);
                if (rep) CHECK_MSG(memcmp(again, got_i, bi) == 0, "%s fwd: a repeat run's indices differ", what);
            }
        }
        CHECK_MSG(same_bits(got_y, want_y, dt, ny), "%s fwd: y differs from the CPU's", what);
        compare_tol(what, got_y, want_y, dt, ny, tol_for(dt), true);
        if (max) CHECK_MSG(memcmp(got_i, want_i, bi) == 0, "%s fwd: indices differ from the CPU's", what);
        /* backward from the CPU's indices */
        if (max) upload(di, want_i, bi);
        memset(want_dx, 0xFF, bx);
        CHECK_OK(cml_pool2d_bwd(cctx, &d, want_dx, hdy, max ? want_i : NULL));
        char w2[220];
        snprintf(w2, sizeof w2, "%s bwd", what);
        GPU_TWICE(w2, ddx, bx, got_dx, cml_pool2d_bwd(gctx, &d, ddx, ddy, max ? di : NULL));
        CHECK_MSG(same_bits(got_dx, want_dx, dt, nx), "%s: dx differs from the CPU's", w2);
        compare_tol(w2, got_dx, want_dx, dt, nx, tol_for(dt), false);
    }
    free(hx), free(hdy), free(want_y), free(got_y), free(want_dx), free(got_dx), free(again), free(want_i), free(got_i);
    dev_free(dx_, bx), dev_free(ddy, by), dev_free(dy_out, by), dev_free(di, bi), dev_free(ddx, bx);
}

static void test_shapes(void) {
    for (int i = 0; i < N_CASES; i++)
        for (int d = 0; d < n_test_dtypes(); d++)
            for (int cl = 0; cl < 2; cl++) {
                if (d > 0 && i == N_CASES - 2 && under_sanitizer()) continue;
                run_pool(&CASES[i], CML_POOL_MAX, cl, TEST_DTYPES[d], false);
                run_pool(&CASES[i], CML_POOL_AVG, cl, TEST_DTYPES[d], false);
            }
}

/* NaN wins the max once seen, -inf never beats a number; averages carry them. */
static void test_special_values(void) {
    for (int d = 0; d < 2; d++)
        for (int cl = 0; cl < 2; cl++) {
            run_pool(&CASES[2], CML_POOL_MAX, cl, TEST_DTYPES[d], true);
            run_pool(&CASES[3], CML_POOL_MAX, cl, TEST_DTYPES[d], true);
            run_pool(&CASES[3], CML_POOL_AVG, cl, TEST_DTYPES[d], true);
        }
}

static void test_bad_indices(void) {
    /* 2x2 windows at stride 2: every input belongs to one window, so dx is dy at the recorded index */
    cml_pool2d_desc d = {2, 3, 6, 6, 2, 2, 2, 2, 0, 0, CML_POOL_MAX, false, CML_F32};
    enum { NY = 2 * 3 * 3 * 3, NX = 2 * 3 * 36 };
    int64_t hidx[NY];
    float hdy[NY], want[NX], got[NX];
    random_fill(hdy, CML_F32, NY, -1.0f, 1.0f);
    for (int64_t o = 0; o < NY; o++) { /* a random element of o's window, as the forward records */
        const int64_t pq = o % 9, p = pq / 3, q = pq % 3;
        hidx[o] = (2 * p + (int64_t)(cml_rng_u32(&rng) % 2)) * 6 + 2 * q + (int64_t)(cml_rng_u32(&rng) % 2);
    }
    hidx[40] = 36; /* one past H*W */
    hidx[50] = -1;
    for (int64_t i = 0; i < NX; i++) want[i] = 0.0f;
    for (int64_t o = 0; o < NY; o++)
        if (o != 40 && o != 50) want[(o / 9) * 36 + hidx[o]] = hdy[o]; /* the bad ones are never followed */
    void *di = dev_alloc(sizeof hidx), *ddy = dev_alloc(sizeof hdy), *ddx = dev_alloc(sizeof got);
    CHECK(di && ddy && ddx);
    if (!(di && ddy && ddx)) return;
    upload(di, hidx, sizeof hidx);
    upload(ddy, hdy, sizeof hdy);
    CHECK_STATUS(cml_pool2d_bwd(cctx, &d, got, hdy, hidx), CML_ERR_INVALID_ARG,
                 "cml_pool2d_bwd: indices[40]=36 must be in [0, H*W=36)");
    /* CUDA: the call returns at once; the next wait reports the error, once */
    poison(ddx, sizeof got);
    CHECK_OK(cml_pool2d_bwd(gctx, &d, ddx, ddy, di));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG,
                 "cml_pool2d_bwd: indices[40]=36 must be in [0, H*W=36) (found on the GPU; reported by "
                 "cml_ctx_synchronize)");
    CHECK_OK(cml_ctx_synchronize(gctx));
    download(got, ddx, sizeof got);
    CHECK_MSG(memcmp(got, want, sizeof got) == 0, "pool2d_bwd with bad indices: dx differs from dy at the good ones");
    /* average pooling checks no indices: nothing to report */
    cml_pool2d_desc avg = d;
    avg.mode = CML_POOL_AVG;
    CHECK_OK(cml_pool2d_bwd(gctx, &avg, ddx, ddy, NULL));
    CHECK_OK(cml_ctx_synchronize(gctx));
    /* CML_SYNC_CHECKS=1: the call itself waits and returns the error */
    setenv("CML_SYNC_CHECKS", "1", 1);
    cml_ctx *sctx = NULL;
    CHECK_OK(cml_ctx_create(&sctx, gpu));
    unsetenv("CML_SYNC_CHECKS");
    if (sctx) {
        CHECK_STATUS(cml_pool2d_bwd(sctx, &d, ddx, ddy, di), CML_ERR_INVALID_ARG,
                     "cml_pool2d_bwd: indices[40]=36 must be in [0, H*W=36)");
        CHECK_MSG(strstr(cml_last_error(), "reported by") == NULL, "%s", cml_last_error());
        CHECK_OK(cml_ctx_synchronize(sctx));
        cml_ctx_destroy(sctx);
    }
    dev_free(di, sizeof hidx), dev_free(ddy, sizeof hdy), dev_free(ddx, sizeof got);
}

static void test_unsupported_dtype(void) {
    cml_pool2d_desc d = {1, 2, 4, 4, 2, 2, 2, 2, 0, 0, CML_POOL_AVG, false, CML_F8E5M2};
    void *p = dev_alloc(1024);
    CHECK_STATUS(cml_pool2d_fwd(gctx, &d, p, NULL, p), CML_ERR_UNSUPPORTED, "cml_pool2d_fwd: dtype=f8e5m2");
    dev_free(p, 1024);
}

int main(void) {
    unsetenv("CML_SYNC_CHECKS"); /* the default context defers its reports: tested here */
    int rc = gpu_test_init(13579);
    if (rc) return rc;
    RUN(test_shapes);
    RUN(test_special_values);
    RUN(test_bad_indices);
    RUN(test_unsupported_dtype);
    return th_finish();
}
