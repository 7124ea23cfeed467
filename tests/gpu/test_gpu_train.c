/* GPU tests of the kernels the training path needs beyond the element-wise,
 * reduction and softmax families: cml_gemm (f32: the exact CUDA-core path),
 * cml_unary_bwd, cml_where_fwd, cml_index_select_fwd/bwd, cml_gather_fwd/bwd,
 * cml_sgd_update, cml_adam_update and cml_dropout_fwd, each against the CPU on
 * random inputs (outputs poisoned, or reset for the accumulating ones, before
 * each run; two runs bitwise identical), then a small MLP trained for a few
 * steps on the GPU and on the CPU from the same initial weights (cml_module_to)
 * giving the same losses within 1e-4, without and with dropout. Exits 77 ("skipped") without a GPU. */
#include "gpu_row_util.h"

/* Runs call twice with out reset from init (or poisoned when init is NULL) and downloads into got;
 * the two runs must be bitwise equal. */
#define GPU_TWICE_FROM(what, out, init, nbytes, got, call)                                   \
    do {                                                                                     \
        const size_t nb_ = (nbytes);                                                         \
        void *again_ = malloc(nb_ > 0 ? nb_ : 1);                                            \
        for (int run_ = 0; run_ < 2; run_++) {                                               \
            if (init) upload((out), (init), nb_);                                            \
            else poison((out), nb_);                                                         \
            CHECK_OK(call);                                                                  \
            download(run_ ? again_ : (void *)(got), (out), nb_);                             \
        }                                                                                    \
        CHECK_MSG(memcmp((got), again_, nb_) == 0, "%s: a repeat run differs", (what));      \
        free(again_);                                                                        \
    } while (0)

static void *dev_copy_of(const void *h, size_t n) {
    void *d = dev_alloc(n);
    if (d) upload(d, h, n);
    return d;
}

/* ---- gemm ------------------------------------------------------------------------- */

static void run_gemm(int64_t M, int64_t N, int64_t K, cml_op oa, cml_op ob, int64_t batch, float alpha, float beta,
                     bool bias, cml_epilogue epi) {
    char what[160];
    snprintf(what, sizeof what, "gemm M=%lld N=%lld K=%lld op=%d%d batch=%lld alpha=%g beta=%g bias=%d epi=%d",
             (long long)M, (long long)N, (long long)K, (int)oa, (int)ob, (long long)batch, (double)alpha,
             (double)beta, (int)bias, (int)epi);
    cml_gemm_desc d = cml_gemm_desc_f32(oa, ob, M, N, K, batch);
    d.lda += 3; /* unaligned leading dimensions */
    d.ldb += 1;
    d.ldc = N + 2;
    d.stride_a = (oa == CML_OP_N ? M : K) * d.lda + 5;
    d.stride_b = (ob == CML_OP_N ? K : N) * d.ldb + 1;
    d.stride_c = M * d.ldc;
    d.alpha = alpha;
    d.beta = beta;
    d.epilogue = epi;
    const int64_t na = batch * d.stride_a, nb = batch * d.stride_b, nc = batch * d.stride_c, nd = batch * d.stride_d;
    float *a = malloc((size_t)na * 4), *b = malloc((size_t)nb * 4), *c = malloc((size_t)nc * 4), *bs = malloc((size_t)N * 4);
    float *want = malloc((size_t)nd * 4), *got = malloc((size_t)nd * 4);
    random_fill(a, CML_F32, na, -1, 1);
    random_fill(b, CML_F32, nb, -1, 1);
    random_fill(c, CML_F32, nc, -1, 1);
    random_fill(bs, CML_F32, N, -1, 1);
    void *da = dev_copy_of(a, (size_t)na * 4), *db = dev_copy_of(b, (size_t)nb * 4), *dc = dev_copy_of(c, (size_t)nc * 4);
    void *dbias = dev_copy_of(bs, (size_t)N * 4), *dd = dev_alloc((size_t)nd * 4);
    d.bias = bias ? bs : NULL;
    memset(want, 0xFF, (size_t)nd * 4);
    CHECK_OK(cml_gemm(cctx, &d, want, a, b, c));
    d.bias = bias ? dbias : NULL;
    GPU_TWICE(what, dd, (size_t)nd * 4, got, cml_gemm(gctx, &d, dd, da, db, dc));
    compare_tol(what, got, want, CML_F32, nd, 1e-5, false);
    free(a), free(b), free(c), free(bs), free(want), free(got);
    dev_free(da, (size_t)na * 4), dev_free(db, (size_t)nb * 4), dev_free(dc, (size_t)nc * 4);
    dev_free(dbias, (size_t)N * 4), dev_free(dd, (size_t)nd * 4);
}

static void test_gemm(void) {
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {65, 33, 129}, {128, 512, 784}, {3, 5, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int oa = 0; oa < 2 && !(under_sanitizer() && shapes[s][2] > 500); oa++)
            for (int ob = 0; ob < 2; ob++)
                run_gemm(shapes[s][0], shapes[s][1], shapes[s][2], (cml_op)oa, (cml_op)ob, 1, 1.0f, 0.0f, false,
                         CML_EPILOGUE_NONE);
    run_gemm(33, 17, 65, CML_OP_N, CML_OP_T, 3, 0.5f, 0.25f, true, CML_EPILOGUE_RELU);
    run_gemm(9, 130, 31, CML_OP_T, CML_OP_N, 2, 1.0f, 1.0f, true, CML_EPILOGUE_GELU_TANH);
    run_gemm(128, 10, 512, CML_OP_N, CML_OP_T, 1, 1.0f, 0.0f, true, CML_EPILOGUE_NONE);
}

/* ---- unary backward and where ------------------------------------------------------ */

static void test_unary_bwd(void) {
    const int64_t n = 4099;
    for (int di = 0; di < 2; di++) {
        cml_dtype dt = TEST_DTYPES[di];
        size_t es = cml_dtype_size(dt), nb = (size_t)n * es;
        void *x = malloc(nb), *y = malloc(nb), *dy = malloc(nb), *want = malloc(nb), *got = malloc(nb);
        random_fill(x, dt, n, 0.1f, 2.0f); /* positive: log, sqrt and pow are defined */
        random_fill(dy, dt, n, -1, 1);
        for (int op = 0; op < CML_UNARY_OP_COUNT; op++) {
            char what[96];
            snprintf(what, sizeof what, "unary_bwd op=%d %s", op, cml_dtype_name(dt));
            float param = op == CML_UNARY_POW_SCALAR ? 2.5f : 0.75f;
            cml_layout l = {1, {n}, {1}};
            if (op == CML_UNARY_RELU) random_fill(x, dt, n, -1, 1);
            CHECK_OK(cml_unary(cctx, (cml_unary_op)op, param, y, &l, dt, x, &l, dt));
            void *gx = dev_copy_of(x, nb), *gy = dev_copy_of(y, nb), *gdy = dev_copy_of(dy, nb), *gdx = dev_alloc(nb);
            CHECK_OK(cml_unary_bwd(cctx, (cml_unary_op)op, param, want, dy, x, y, n, dt));
            GPU_TWICE(what, gdx, nb, got, cml_unary_bwd(gctx, (cml_unary_op)op, param, gdx, gdy, gx, gy, n, dt));
            compare_tol(what, got, want, dt, n, tol_for(dt), false);
            dev_free(gx, nb), dev_free(gy, nb), dev_free(gdy, nb), dev_free(gdx, nb);
            if (op == CML_UNARY_RELU) random_fill(x, dt, n, 0.1f, 2.0f);
        }
        free(x), free(y), free(dy), free(want), free(got);
    }
}

static void test_where(void) {
    /* y (5, 7, 33); b broadcast along dim 1; cond transposed */
    const int64_t n = 5 * 7 * 33;
    cml_layout yl = {3, {5, 7, 33}, {231, 33, 1}}, cl = {3, {5, 7, 33}, {1, 5, 35}}, al = yl,
               bl = {3, {5, 7, 33}, {33, 0, 1}};
    for (int di = 0; di < 2; di++) {
        cml_dtype dt = TEST_DTYPES[di];
        size_t es = cml_dtype_size(dt);
        uint8_t cond[5 * 7 * 33];
        for (int64_t i = 0; i < n; i++) cond[i] = uniform(0, 1) < 0.5f;
        void *a = malloc((size_t)n * es), *b = malloc((size_t)n * es), *want = malloc((size_t)n * es),
             *got = malloc((size_t)n * es);
        random_fill(a, dt, n, -1, 1);
        random_fill(b, dt, n, -1, 1);
        CHECK_OK(cml_where_fwd(cctx, want, &yl, dt, cond, &cl, a, &al, b, &bl));
        void *gc = dev_copy_of(cond, (size_t)n), *ga = dev_copy_of(a, (size_t)n * es),
             *gb = dev_copy_of(b, (size_t)n * es), *gy = dev_alloc((size_t)n * es);
        GPU_TWICE("where", gy, (size_t)n * es, got, cml_where_fwd(gctx, gy, &yl, dt, gc, &cl, ga, &al, gb, &bl));
        CHECK_MSG(memcmp(got, want, (size_t)n * es) == 0, "where %s: differs from the CPU", cml_dtype_name(dt));
        dev_free(gc, (size_t)n), dev_free(ga, (size_t)n * es), dev_free(gb, (size_t)n * es), dev_free(gy, (size_t)n * es);
        free(a), free(b), free(want), free(got);
    }
}

/* ---- indexing ----------------------------------------------------------------------- */

static void run_index(bool gather, cml_dtype dt, int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner) {
    char what[128];
    snprintf(what, sizeof what, "%s %s (%lld, %lld->%lld, %lld)", gather ? "gather" : "index_select",
             cml_dtype_name(dt), (long long)outer, (long long)n_src, (long long)n_idx, (long long)inner);
    size_t es = cml_dtype_size(dt);
    int64_t nx = outer * n_src * inner, ny = outer * n_idx * inner, ni = gather ? ny : n_idx;
    int64_t *idx = malloc((size_t)ni * 8);
    for (int64_t i = 0; i < ni; i++) idx[i] = (int64_t)(uniform(0, 1) * (float)n_src) % n_src; /* repeats */
    void *x = malloc((size_t)nx * es), *dx0 = malloc((size_t)nx * es), *y = malloc((size_t)ny * es);
    void *want = malloc((size_t)(nx > ny ? nx : ny) * es), *got = malloc((size_t)(nx > ny ? nx : ny) * es);
    random_fill(x, dt, nx, -1, 1);
    random_fill(dx0, dt, nx, -1, 1);
    random_fill(y, dt, ny, -1, 1);
    void *gidx = dev_copy_of(idx, (size_t)ni * 8), *gx = dev_copy_of(x, (size_t)nx * es),
         *gdy = dev_copy_of(y, (size_t)ny * es), *gout = dev_alloc((size_t)(nx > ny ? nx : ny) * es);
    /* forward */
    CHECK_OK(gather ? cml_gather_fwd(cctx, want, x, idx, outer, n_src, n_idx, inner, dt)
                    : cml_index_select_fwd(cctx, want, x, idx, outer, n_src, n_idx, inner, dt));
    GPU_TWICE(what, gout, (size_t)ny * es, got,
              gather ? cml_gather_fwd(gctx, gout, gx, gidx, outer, n_src, n_idx, inner, dt)
                     : cml_index_select_fwd(gctx, gout, gx, gidx, outer, n_src, n_idx, inner, dt));
    CHECK_MSG(memcmp(got, want, (size_t)ny * es) == 0, "%s fwd: differs from the CPU", what);
    /* backward (float dtypes): accumulates into dx0 */
    if (cml_dtype_is_float(dt)) {
        memcpy(want, dx0, (size_t)nx * es);
        CHECK_OK(gather ? cml_gather_bwd(cctx, want, y, idx, outer, n_src, n_idx, inner, dt)
                        : cml_index_select_bwd(cctx, want, y, idx, outer, n_src, n_idx, inner, dt));
        GPU_TWICE_FROM(what, gout, dx0, (size_t)nx * es, got,
                       gather ? cml_gather_bwd(gctx, gout, gdy, gidx, outer, n_src, n_idx, inner, dt)
                              : cml_index_select_bwd(gctx, gout, gdy, gidx, outer, n_src, n_idx, inner, dt));
        if (dt == CML_F32) CHECK_MSG(memcmp(got, want, (size_t)nx * es) == 0, "%s bwd: differs from the CPU", what);
        else compare_tol(what, got, want, dt, nx, tol_for(dt), false);
    }
    /* a bad index is reported with the CPU's message at the next wait for the stream */
    int64_t bad = n_src;
    upload(gidx, &bad, 8);
    CHECK_OK(gather ? cml_gather_fwd(gctx, gout, gx, gidx, outer, n_src, n_idx, inner, dt)
                    : cml_index_select_fwd(gctx, gout, gx, gidx, outer, n_src, n_idx, inner, dt));
    CHECK_STATUS(cml_ctx_synchronize(gctx), CML_ERR_INVALID_ARG, "must be in [0, n_src=");
    dev_free(gidx, (size_t)ni * 8), dev_free(gx, (size_t)nx * es), dev_free(gdy, (size_t)ny * es);
    dev_free(gout, (size_t)(nx > ny ? nx : ny) * es);
    free(idx), free(x), free(dx0), free(y), free(want), free(got);
}

static void test_index(void) {
    for (int g = 0; g < 2; g++)
        for (int di = 0; di < 2; di++) {
            run_index(g, TEST_DTYPES[di], 3, 11, 17, 33);
            run_index(g, TEST_DTYPES[di], 1, 1000, 128, 1);
            run_index(g, TEST_DTYPES[di], 2, 7, 300, 5);
        }
    run_index(false, CML_I64, 1, 60000, 128, 1); /* the training loop's labels */
}

/* ---- optimizers and dropout -------------------------------------------------------- */

static void test_optim(void) {
    const int64_t n = 10007;
    const size_t nb = (size_t)n * 4;
    float *p0 = malloc(nb), *g = malloc(nb), *m0 = malloc(nb), *v0 = malloc(nb);
    float *p = malloc(nb), *m = malloc(nb), *v = malloc(nb), *got = malloc(nb);
    random_fill(p0, CML_F32, n, -1, 1);
    random_fill(g, CML_F32, n, -1, 1);
    random_fill(m0, CML_F32, n, -0.1f, 0.1f);
    random_fill(v0, CML_F32, n, 0, 0.01f);
    void *gp = dev_alloc(nb), *gg = dev_copy_of(g, nb), *gm = dev_alloc(nb), *gv = dev_alloc(nb);
    for (int dec = 0; dec < 2; dec++) {
        memcpy(p, p0, nb), memcpy(m, m0, nb), memcpy(v, v0, nb);
        CHECK_OK(cml_adam_update(cctx, p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, dec, 7));
        /* two runs from the same param, m and v must give the same bits */
        for (int run = 0; run < 2; run++) {
            upload(gm, m0, nb), upload(gv, v0, nb), upload(gp, p0, nb);
            CHECK_OK(cml_adam_update(gctx, gp, gg, gm, gv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, dec, 7));
            download(run ? m : got, gp, nb); /* m (the CPU's) is not needed any more: holds run 2 */
        }
        CHECK_MSG(memcmp(got, m, nb) == 0, "adam: a repeat run differs");
        compare_tol("adam param", got, p, CML_F32, n, 1e-6, false);
        download(got, gv, nb);
        compare_tol("adam v", got, v, CML_F32, n, 1e-6, false);
    }
    for (int nest = 0; nest < 2; nest++) {
        memcpy(p, p0, nb), memcpy(m, m0, nb);
        CHECK_OK(cml_sgd_update(cctx, p, g, m, n, 0.1f, 0.9f, nest, 1e-4f, false));
        upload(gm, m0, nb), upload(gp, p0, nb);
        CHECK_OK(cml_sgd_update(gctx, gp, gg, gm, n, 0.1f, 0.9f, nest, 1e-4f, false));
        download(got, gp, nb);
        compare_tol("sgd param", got, p, CML_F32, n, 1e-6, false);
        download(got, gm, nb);
        compare_tol("sgd momentum", got, m, CML_F32, n, 1e-6, false);
    }
    dev_free(gp, nb), dev_free(gg, nb), dev_free(gm, nb), dev_free(gv, nb);
    free(p0), free(g), free(m0), free(v0), free(p), free(m), free(v), free(got);
}

static void test_dropout(void) {
    const int64_t n = 100003;
    for (int di = 0; di < 2; di++) {
        cml_dtype dt = TEST_DTYPES[di];
        size_t nb = (size_t)n * cml_dtype_size(dt);
        void *x = malloc(nb), *want = malloc(nb), *got = malloc(nb);
        uint8_t *mw = malloc((size_t)n), *mg = malloc((size_t)n);
        random_fill(x, dt, n, -1, 1);
        CHECK_OK(cml_dropout_fwd(cctx, want, mw, x, n, dt, 0.3f, 0x1234567890ull, 77));
        void *gx = dev_copy_of(x, nb), *gy = dev_alloc(nb), *gmask = dev_alloc((size_t)n);
        GPU_TWICE("dropout", gy, nb, got, cml_dropout_fwd(gctx, gy, gmask, gx, n, dt, 0.3f, 0x1234567890ull, 77));
        download(mg, gmask, (size_t)n);
        CHECK_MSG(memcmp(mg, mw, (size_t)n) == 0, "dropout %s: the mask differs from the CPU's", cml_dtype_name(dt));
        compare_tol("dropout", got, want, dt, n, tol_for(dt), false);
        dev_free(gx, nb), dev_free(gy, nb), dev_free(gmask, (size_t)n);
        free(x), free(want), free(got), free(mw), free(mg);
    }
}

/* ---- a small MLP: the same training steps on both devices ------------------------------- */

static void train_losses(cml_device dev, double *losses, int steps, float dropout) {
    cml_rng r;
    cml_rng_init(&r, 99);
    const int64_t sizes[] = {20, 64, 32, 10};
    cml_module *model = cml_mlp_create(sizes, 4, CML_ACT_RELU, dropout, &r);
    CHECK(model != NULL);
    if (!model) return;
    CHECK_OK(cml_module_to(model, dev));
    cml_param params[16];
    int np = cml_module_parameters(model, params, 16);
    cml_optim *opt = cml_adam_create(params, np, (cml_adam_opts){1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f});
    CHECK(opt != NULL);
    const int64_t xs[2] = {64, 20}, n_all = 200;
    cml_rng dr;
    cml_rng_init(&dr, 7);
    cml_tensor *x_all = cml_tensor_randn(2, (int64_t[]){n_all, 20}, 0, 1, &dr, CML_F32, CML_DEVICE_CPU);
    int64_t labels[200];
    for (int i = 0; i < n_all; i++) labels[i] = (int64_t)(cml_rng_uniform(&dr) * 10) % 10;
    cml_tensor *y_all = cml_tensor_from_host(labels, 1, (int64_t[]){n_all}, CML_I64, CML_DEVICE_CPU);
    cml_tensor *xd = cml_tensor_to(x_all, dev), *yd = cml_tensor_to(y_all, dev);
    for (int s = 0; s < steps && opt && xd && yd; s++) {
        int64_t idx_h[64];
        for (int i = 0; i < xs[0]; i++) idx_h[i] = (i * 7 + s * 13) % n_all;
        cml_tensor *idx_c = cml_tensor_from_host(idx_h, 1, xs, CML_I64, CML_DEVICE_CPU);
        cml_tensor *idx = cml_tensor_to(idx_c, dev);
        cml_tensor *xb = cml_index_select(xd, 0, idx), *yb = cml_index_select(yd, 0, idx);
        cml_tensor *logits = cml_module_forward(model, xb);
        cml_tensor *loss = cml_cross_entropy(logits, yb, -100, CML_REDUCTION_MEAN);
        CHECK(loss != NULL);
        losses[s] = loss ? cml_tensor_item(loss) : NAN;
        if (loss) CHECK_OK(cml_backward(loss, NULL));
        CHECK_OK(cml_clip_grad_norm(params, np, 0.5, NULL));
        CHECK_OK(cml_optim_step(opt));
        cml_optim_zero_grad(opt);
        cml_tensor_release_all((cml_tensor *[]){idx_c, idx, xb, yb, logits, loss}, 6);
    }
    cml_tensor_release_all((cml_tensor *[]){x_all, y_all, xd, yd}, 4);
    cml_optim_destroy(opt);
    cml_module_destroy(model);
}

static void mlp_steps(float dropout) {
    enum { STEPS = 10 };
    double cpu[STEPS], gpu_l[STEPS];
    train_losses(CML_DEVICE_CPU, cpu, STEPS, dropout);
    train_losses(gpu, gpu_l, STEPS, dropout);
    for (int s = 0; s < STEPS; s++)
        CHECK_MSG(fabs(cpu[s] - gpu_l[s]) <= 1e-4, "MLP step %d: loss %.7f on the GPU, %.7f on the CPU", s, gpu_l[s],
                  cpu[s]);
    printf("MLP (dropout %g) losses: step 0 cpu %.6f gpu %.6f; step %d cpu %.6f gpu %.6f\n", (double)dropout, cpu[0],
           gpu_l[0], STEPS - 1, cpu[STEPS - 1], gpu_l[STEPS - 1]);
}

static void test_mlp_steps(void) { mlp_steps(0.0f); }

/* Dropout layers keep their generator words on the host (cml_module_to leaves integer buffers):
 * the same masks on both devices, and the backward converts the u8 mask on the GPU. */
static void test_mlp_dropout_steps(void) { mlp_steps(0.2f); }

int main(void) {
    int rc = gpu_test_init(2468);
    if (rc) return rc;
    RUN(test_gemm);
    RUN(test_unary_bwd);
    RUN(test_where);
    RUN(test_index);
    RUN(test_optim);
    RUN(test_dropout);
    RUN(test_mlp_steps);
    RUN(test_mlp_dropout_steps);
    return th_finish();
}
