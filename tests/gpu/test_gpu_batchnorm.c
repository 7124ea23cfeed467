/* GPU tests of BatchNorm2d (src/kernels/cuda/norm/batchnorm_{fwd,bwd}.cu)
 * against the CPU reference on random inputs, NCHW and NHWC, f32/bf16/f16:
 * training forward (y, save_mean, save_rstd, and the running statistics
 * updated on the device), eval forward, and the backward (dx, dgamma, dbeta),
 * with and without gamma/beta/running statistics. Shapes: HW = 1, N = 1 and 7,
 * odd channel counts, more than 128 channels, and channels long enough to be
 * split over many blocks. Outputs are poisoned before each run, two runs must
 * be bitwise identical, results within the dtype's norm-wise tolerance (f32
 * statistics 1e-5). Exits 77 without a GPU. */
#include "gpu_row_util.h"

typedef struct bn_case {
    int64_t N, C, HW;
} bn_case;

static const bn_case CASES[] = {
    {1, 1, 5},      /* one image, one channel (with 2 values dx is pure rounding noise: xhat = +-1 whatever x) */
    {7, 3, 1},      /* 1x1 images: statistics over the batch alone */
    {2, 5, 35},     /* odd sizes */
    {64, 6, 784},   /* LeNet-sized */
    {7, 130, 17},   /* more channels than a block row */
    {1, 4, 40000},  /* long channels: many partial sums per channel */
    {128, 32, 256}, /* a CIFAR stage */
};
enum { N_CASES = (int)(sizeof CASES / sizeof CASES[0]) };

typedef struct bn_opts {
    bool affine, running, training;
} bn_opts;

/* n f32 values from the device. */
static void fetch(float *dst, const void *src, int64_t n) { download(dst, src, (size_t)n * sizeof(float)); }

static void run_bn(const bn_case *k, bool cl, cml_dtype dt, bn_opts o) {
    char what[200];
    snprintf(what, sizeof what, "batchnorm %s %s N=%lld C=%lld HW=%lld %s%s%s", cml_dtype_name(dt),
             cl ? "NHWC" : "NCHW", (long long)k->N, (long long)k->C, (long long)k->HW,
             o.training ? "train" : "eval", o.affine ? " affine" : "", o.running ? " running" : "");
    const size_t es = cml_dtype_size(dt);
    const int64_t n = k->N * k->C * k->HW, C = k->C;
    const size_t bx = (size_t)n * es, bc = (size_t)C * sizeof(float);
    unsigned char *hx = malloc(bx), *hdy = malloc(bx), *want = malloc(bx), *got = malloc(bx), *again = malloc(bx);
    float *hg = malloc(bc), *hb = malloc(bc), *rm0 = malloc(bc), *rv0 = malloc(bc);
    float *w_rm = malloc(bc), *w_rv = malloc(bc), *w_m = malloc(bc), *w_r = malloc(bc), *w_dg = malloc(bc), *w_db = malloc(bc);
    float *g_rm = malloc(bc), *g_rv = malloc(bc), *g_m = malloc(bc), *g_r = malloc(bc), *g_dg = malloc(bc), *g_db = malloc(bc);
    float *a_m = malloc(bc), *a_r = malloc(bc), *a_dg = malloc(bc), *a_db = malloc(bc), *a_rm = malloc(bc), *a_rv = malloc(bc);
    void *dx = dev_alloc(bx), *ddy = dev_alloc(bx), *dout = dev_alloc(bx), *dg = dev_alloc(bc), *db = dev_alloc(bc);
    void *drm = dev_alloc(bc), *drv = dev_alloc(bc), *dm = dev_alloc(bc), *dr = dev_alloc(bc), *ddg = dev_alloc(bc),
         *ddb = dev_alloc(bc);
    bool ok = hx && hdy && want && got && again && hg && hb && rm0 && rv0 && w_rm && w_rv && w_m && w_r && w_dg &&
              w_db && g_rm && g_rv && g_m && g_r && g_dg && g_db && a_m && a_r && a_dg && a_db && a_rm && a_rv && dx && ddy &&
              dout && dg && db && drm && drv && dm && dr && ddg && ddb;
    CHECK(ok);
    if (ok) {
        random_fill(hx, dt, n, -0.5f, 1.5f); /* a mean of ~0.5 that the statistics must remove */
        random_fill(hdy, dt, n, -1.0f, 1.0f);
        random_fill(hg, CML_F32, C, 0.5f, 1.5f);
        random_fill(hb, CML_F32, C, -0.5f, 0.5f);
        random_fill(rm0, CML_F32, C, -0.2f, 0.2f);
        random_fill(rv0, CML_F32, C, 0.5f, 2.0f);
        upload(dx, hx, bx);
        upload(ddy, hdy, bx);
        upload(dg, hg, bc);
        upload(db, hb, bc);
        const float *cg = o.affine ? hg : NULL, *cb = o.affine ? hb : NULL;
        const float *gg = o.affine ? dg : NULL, *gb = o.affine ? db : NULL;
        const bool run = o.running || !o.training;
        memcpy(w_rm, rm0, bc);
        memcpy(w_rv, rv0, bc);
        memset(want, 0xFF, bx);
        CHECK_OK(cml_batchnorm_fwd(cctx, want, w_m, w_r, run ? w_rm : NULL, run ? w_rv : NULL, hx, cg, cb, k->N, C,
                                   k->HW, cl, o.training, 0.1f, 1e-5f, dt));
        for (int rep = 0; rep < 2; rep++) {
            upload(drm, rm0, bc); /* updated in place: the same starting point for both runs */
            upload(drv, rv0, bc);
            poison(dout, bx);
            poison(dm, bc);
            poison(dr, bc);
            CHECK_OK(cml_batchnorm_fwd(gctx, dout, dm, dr, run ? drm : NULL, run ? drv : NULL, dx, gg, gb, k->N, C,
                                       k->HW, cl, o.training, 0.1f, 1e-5f, dt));
            download(rep ? again : got, dout, bx);
            fetch(rep ? a_m : g_m, dm, C);
            fetch(rep ? a_r : g_r, dr, C);
            fetch(rep ? a_rm : g_rm, drm, C);
            fetch(rep ? a_rv : g_rv, drv, C);
        }
        CHECK_MSG(memcmp(got, again, bx) == 0 && memcmp(g_m, a_m, bc) == 0 && memcmp(g_r, a_r, bc) == 0 &&
                      memcmp(g_rm, a_rm, bc) == 0 && memcmp(g_rv, a_rv, bc) == 0,
                  "%s fwd: a repeat run differs", what);
        compare_tol(what, got, want, dt, n, tol_for(dt), false);
        compare_tol(what, g_m, w_m, CML_F32, C, 1e-5, false);
        compare_tol(what, g_r, w_r, CML_F32, C, 1e-5, false);
        if (run) {
            compare_tol(what, g_rm, w_rm, CML_F32, C, 1e-5, false);
            compare_tol(what, g_rv, w_rv, CML_F32, C, 1e-5, false);
        }
        if (!o.training) goto done;
        /* backward from the CPU's saved statistics */
        upload(dm, w_m, bc);
        upload(dr, w_r, bc);
        memset(want, 0xFF, bx);
        CHECK_OK(cml_batchnorm_bwd(cctx, want, w_dg, w_db, hdy, hx, cg, w_m, w_r, k->N, C, k->HW, cl, dt));
        for (int rep = 0; rep < 2; rep++) {
            poison(dout, bx);
            poison(ddg, bc);
            poison(ddb, bc);
            CHECK_OK(cml_batchnorm_bwd(gctx, dout, ddg, ddb, ddy, dx, gg, dm, dr, k->N, C, k->HW, cl, dt));
            download(rep ? again : got, dout, bx);
            fetch(rep ? a_dg : g_dg, ddg, C);
            fetch(rep ? a_db : g_db, ddb, C);
        }
        char w2[220];
        snprintf(w2, sizeof w2, "%s bwd", what);
        CHECK_MSG(memcmp(got, again, bx) == 0 && memcmp(g_dg, a_dg, bc) == 0 && memcmp(g_db, a_db, bc) == 0,
                  "%s: a repeat run differs", w2);
        compare_tol(w2, got, want, dt, n, tol_for(dt), false);
        compare_tol(w2, g_dg, w_dg, CML_F32, C, 1e-5, false);
        compare_tol(w2, g_db, w_db, CML_F32, C, 1e-5, false);
    }
done:
    free(hx), free(hdy), free(want), free(got), free(again), free(hg), free(hb), free(rm0), free(rv0);
    free(w_rm), free(w_rv), free(w_m), free(w_r), free(w_dg), free(w_db);
    free(g_rm), free(g_rv), free(g_m), free(g_r), free(g_dg), free(g_db);
    free(a_m), free(a_r), free(a_dg), free(a_db), free(a_rm), free(a_rv);
    dev_free(dx, bx), dev_free(ddy, bx), dev_free(dout, bx), dev_free(dg, bc), dev_free(db, bc);
    dev_free(drm, bc), dev_free(drv, bc), dev_free(dm, bc), dev_free(dr, bc), dev_free(ddg, bc), dev_free(ddb, bc);
}

static void test_training(void) {
    for (int i = 0; i < N_CASES; i++)
        for (int d = 0; d < n_test_dtypes(); d++)
            for (int cl = 0; cl < 2; cl++) run_bn(&CASES[i], cl, TEST_DTYPES[d], (bn_opts){true, true, true});
}

static void test_options(void) {
    for (int cl = 0; cl < 2; cl++)
        for (int i = 2; i < 5; i++) {
            run_bn(&CASES[i], cl, CML_F32, (bn_opts){false, true, true});  /* no gamma/beta */
            run_bn(&CASES[i], cl, CML_F32, (bn_opts){true, false, true});  /* no running statistics */
            run_bn(&CASES[i], cl, CML_F32, (bn_opts){true, true, false});  /* eval */
            run_bn(&CASES[i], cl, CML_BF16, (bn_opts){false, true, false}); /* eval, no gamma/beta */
        }
}

static void test_unsupported_dtype(void) {
    void *p = dev_alloc(1024);
    CHECK_STATUS(cml_batchnorm_fwd(gctx, p, NULL, NULL, NULL, NULL, p, NULL, NULL, 2, 2, 2, false, true, 0.1f, 1e-5f,
                                   CML_F8E4M3),
                 CML_ERR_UNSUPPORTED, "cml_batchnorm_fwd: dtype=f8e4m3");
    dev_free(p, 1024);
}

int main(void) {
    int rc = gpu_test_init(24680);
    if (rc) return rc;
    RUN(test_training);
    RUN(test_options);
    RUN(test_unsupported_dtype);
    return th_finish();
}
