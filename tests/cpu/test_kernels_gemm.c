/* cml_gemm on the CPU against a float64 reference (tests/gemm_ref.h): every
 * transpose combination, odd shapes and leading dims, strided batches with
 * broadcast (stride 0) operands, beta*C separate or aliasing D, K = 0; every
 * epilogue (ReLU, GELU, GELU saving its pre-activation, the GELU backward)
 * with bias per column and per row; per-tensor and per-row/column scales;
 * f32, f16, bf16, fp8 e4m3/e5m2 inputs and f32/f16/bf16 outputs; tf32 math
 * (inputs rounded to tf32, checked against a reference that rounds the same
 * way and against the exact one); the bias-gradient output; the GELU
 * backward against finite differences of the GELU epilogue; grouped GEMM;
 * the workspace query; determinism; and every validation message. */
#include "gemm_ref.h"
#include "kernel_test_util.h"

/* Runs one case on the CPU and checks D (and aux, dbias) against the reference. */
static void run_case(const gemm_case *g, cml_rng *rng) {
    char what[320];
    gemm_case_str(g, what, sizeof what);
    gemm_data x;
    gemm_data_make(&x, g, rng);
    const int64_t total = g->batch * g->M * g->N;
    const bool tf32 = g->math == CML_GEMM_MATH_TF32;
    double *ref = kt_malloc(sizeof(double) * (size_t)total), *ref_aux = kt_malloc(sizeof(double) * (size_t)total);
    double *ref_exact = kt_malloc(sizeof(double) * (size_t)total);
    double *ref_dbias = kt_malloc(sizeof(double) * (size_t)(g->batch * g->M));
    float *out = kt_malloc(sizeof(float) * (size_t)total), *out_dbias = kt_malloc(sizeof(float) * (size_t)(g->batch * g->M));
    gemm_reference(&x, 1, tf32, ref, ref_aux, ref_dbias);
    if (tf32) gemm_reference(&x, 1, false, ref_exact, NULL, NULL);
    CHECK_OK(cml_gemm(kt_ctx(), &x.desc, x.D.data, x.A.data, x.B.data, gemm_data_c(&x)));
    gemm_unpack(out, x.D.data, g->d_dtype, g->batch, g->M, g->N, x.desc.ldd, x.desc.stride_d);
    KT_CHECK_CLOSE(out, ref, total, gemm_tol(g->d_dtype, g->a_dtype, g->math, true), "D of %s", what);
    if (tf32) KT_CHECK_CLOSE(out, ref_exact, total, gemm_tol(g->d_dtype, g->a_dtype, g->math, false), "D (exact ref) of %s", what);
    if (g->epilogue == CML_EPILOGUE_GELU_TANH_AUX) {
        gemm_unpack(out, x.aux.data, g->d_dtype, g->batch, g->M, g->N, x.desc.ldaux, x.desc.stride_aux);
        KT_CHECK_CLOSE(out, ref_aux, total, kt_tol(g->d_dtype), "aux of %s", what);
    }
    if (g->dbias) {
        for (int64_t i = 0; i < g->batch * g->M; i++) out_dbias[i] = cml_dtype_load(x.dbias.data, g->d_dtype, i);
        KT_CHECK_CLOSE(out_dbias, ref_dbias, g->batch * g->M, kt_tol(g->d_dtype), "dbias of %s", what);
    }
    free(ref);
    free(ref_aux);
    free(ref_exact);
    free(ref_dbias);
    free(out);
    free(out_dbias);
    gemm_data_free(&x);
}

static void test_transposes_and_shapes(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 40);
    static const int64_t mnk[][3] = {{1, 1, 1}, {7, 5, 3}, {127, 33, 65}, {64, 1025, 17}, {1, 127, 1025}, {33, 1, 7}};
    for (int s = 0; s < 6; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int pad = 0; pad <= 3; pad += 3) {
                    gemm_case g = gemm_case_make((cml_op)ta, (cml_op)tb, mnk[s][0], mnk[s][1], mnk[s][2], 1);
                    g.ld_pad = pad;
                    g.offset = pad; /* unaligned data too */
                    run_case(&g, &rng);
                }
}

static void test_batched_beta_and_k0(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 41);
    gemm_case g = gemm_case_make(CML_OP_N, CML_OP_T, 17, 9, 13, 3); /* broadcast A, odd leading dims */
    g.ld_pad = 1;
    g.broadcast_a = true;
    run_case(&g, &rng);
    g = gemm_case_make(CML_OP_T, CML_OP_N, 5, 31, 8, 4); /* broadcast B, alpha */
    g.ld_pad = 2;
    g.broadcast_b = true;
    g.alpha = 0.5f;
    run_case(&g, &rng);
    g = gemm_case_make(CML_OP_N, CML_OP_N, 33, 65, 17, 2); /* beta * C, separate */
    g.alpha = 1.5f;
    g.beta = -0.75f;
    run_case(&g, &rng);
    g = gemm_case_make(CML_OP_T, CML_OP_T, 33, 65, 17, 2); /* in place */
    g.ld_pad = 3;
    g.beta = 1.0f;
    g.c_aliases_d = true;
    run_case(&g, &rng);
    g = gemm_case_make(CML_OP_N, CML_OP_N, 7, 9, 0, 2); /* K = 0: D = beta * C + bias */
    g.beta = 2.0f;
    g.bias = true;
    run_case(&g, &rng);
    g = gemm_case_make(CML_OP_T, CML_OP_N, 7, 9, 0, 1); /* K = 0, beta 0: zeros (+ dbias 0) */
    g.dbias = true;
    run_case(&g, &rng);
    g = gemm_case_make(CML_OP_N, CML_OP_N, 33, 17, 65, 2); /* in place, narrow: C == D in bf16 */
    g.beta = 0.5f;
    g.c_aliases_d = true;
    g.bias = true;
    g.d_dtype = CML_BF16;
    run_case(&g, &rng);
}

/* Every epilogue x bias (none, per column, per row) x output dtype, with beta and batches. */
static void test_epilogues(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 42);
    static const cml_dtype outs[] = {CML_F32, CML_BF16, CML_F16};
    for (int epi = 0; epi <= CML_EPILOGUE_DGELU_TANH; epi++)
        for (int bias = 0; bias < 3; bias++)
            for (int o = 0; o < 3; o++) {
                gemm_case g = gemm_case_make((cml_op)(bias & 1), (cml_op)(o & 1), 23, 37, 45, 2);
                g.ld_pad = 1;
                g.epilogue = (cml_epilogue)epi;
                g.bias = bias > 0;
                g.bias_axis = bias == 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
                g.a_dtype = g.b_dtype = outs[o] == CML_F32 ? CML_F32 : CML_BF16;
                g.c_dtype = outs[(o + 1) % 3];
                g.d_dtype = outs[o];
                g.beta = o == 1 ? 0.0f : 0.5f;
                g.alpha = 1.25f;
                run_case(&g, &rng);
            }
}

/* Scale modes x input dtypes (fp8 included) x outputs. */
static void test_scales_and_dtypes(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 43);
    static const cml_dtype ins[] = {CML_F32, CML_F16, CML_BF16, CML_F8E4M3, CML_F8E5M2};
    static const cml_dtype outs[] = {CML_F32, CML_F16, CML_BF16};
    for (int i = 0; i < 5; i++)
        for (int sa = 0; sa < 3; sa++)
            for (int sb = 0; sb < 3; sb++) {
                gemm_case g = gemm_case_make((cml_op)(sa & 1), (cml_op)(sb & 1), 19, 29, 67, 2);
                g.a_dtype = ins[i];
                g.b_dtype = ins[(i + sa) % 5]; /* mixed input dtypes too */
                g.d_dtype = outs[(i + sb) % 3];
                g.a_scale_mode = (cml_scale_mode)sa;
                g.b_scale_mode = (cml_scale_mode)sb;
                g.bias = sb == 1;
                g.epilogue = sa == 2 ? CML_EPILOGUE_GELU_TANH : CML_EPILOGUE_NONE;
                g.ld_pad = sa;
                g.broadcast_b = sb == 2;
                run_case(&g, &rng);
            }
}

static void test_tf32(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 44);
    for (int t = 0; t < 4; t++) {
        gemm_case g = gemm_case_make((cml_op)(t & 1), (cml_op)(t >> 1), 65, 33, 129, 2);
        g.math = CML_GEMM_MATH_TF32;
        g.ld_pad = t;
        g.bias = t == 1;
        g.beta = t == 2 ? 1.0f : 0.0f;
        g.epilogue = t == 3 ? CML_EPILOGUE_RELU : CML_EPILOGUE_NONE;
        g.d_dtype = t == 3 ? CML_BF16 : CML_F32;
        run_case(&g, &rng);
    }
    /* the rounding itself: 1 + 2^-11 is a tie (rounds away, to 1 + 2^-10), 1 + 2^-12 rounds down */
    float a[2] = {1.0f + 0x1p-11f, 1.0f + 0x1p-12f}, b[2] = {1.0f, 1.0f}, d[2];
    cml_gemm_desc desc = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 2, 1, 1, 1);
    desc.math = CML_GEMM_MATH_TF32;
    CHECK_OK(cml_gemm(kt_ctx(), &desc, d, a, b, NULL));
    CHECK(d[0] == 1.0f + 0x1p-10f && d[1] == 1.0f);
    desc.math = CML_GEMM_MATH_DEFAULT;
    CHECK_OK(cml_gemm(kt_ctx(), &desc, d, a, b, NULL));
    CHECK(d[0] == a[0] && d[1] == a[1]);
}

static void test_dbias(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 45);
    for (int t = 0; t < 6; t++) {
        /* the Linear weight gradient: dW (out x in) = dY^T (out x tokens) X (tokens x in) */
        gemm_case g = gemm_case_make(t & 1 ? CML_OP_N : CML_OP_T, CML_OP_N, 31, 17, 257, t < 3 ? 1 : 3);
        g.dbias = true;
        g.a_dtype = g.b_dtype = t == 2 ? CML_BF16 : t == 4 ? CML_F8E4M3 : CML_F32;
        g.d_dtype = t == 2 ? CML_BF16 : CML_F32;
        g.a_scale_mode = (cml_scale_mode)(t % 3);
        g.broadcast_a = t == 5;
        g.ld_pad = t;
        run_case(&g, &rng);
    }
}

/* D = dY * gelu'(u) from the DGELU epilogue must match central differences of
 * the GELU epilogue: a K = 1 GEMM with A = u +- h and B = 1 produces gelu(u +- h). */
static void test_dgelu_finite_differences(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 46);
    enum { M = 64 };
    const double h = 1e-2;
    float u[M], up[M], um[M], dy[M], one = 1.0f, gp[M], gm[M], dgelu[M];
    for (int i = 0; i < M; i++) {
        u[i] = -4.0f + 8.0f * (float)i / (M - 1);
        up[i] = (float)(u[i] + h);
        um[i] = (float)(u[i] - h);
        dy[i] = 0.5f + cml_rng_uniform(&rng);
    }
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, M, 1, 1, 1);
    d.epilogue = CML_EPILOGUE_GELU_TANH;
    CHECK_OK(cml_gemm(kt_ctx(), &d, gp, up, &one, NULL));
    CHECK_OK(cml_gemm(kt_ctx(), &d, gm, um, &one, NULL));
    d.epilogue = CML_EPILOGUE_DGELU_TANH; /* D = dy * gelu'(aux) with aux = u */
    d.aux = u;
    d.ldaux = 1;
    CHECK_OK(cml_gemm(kt_ctx(), &d, dgelu, dy, &one, NULL));
    for (int i = 0; i < M; i++) {
        double fd = dy[i] * ((double)up[i] - um[i] > 0 ? ((double)gp[i] - gm[i]) / ((double)up[i] - um[i]) : 0);
        double e = fabs(dgelu[i] - fd);
        CHECK_MSG(e <= 1e-4, "u=%g: dgelu epilogue %g, finite difference %g", (double)u[i], (double)dgelu[i], fd);
    }
    /* and GELU_TANH_AUX saves exactly the z that the DGELU epilogue later reads */
    float aux[M], y[M];
    d.epilogue = CML_EPILOGUE_GELU_TANH_AUX;
    d.aux = aux;
    CHECK_OK(cml_gemm(kt_ctx(), &d, y, u, &one, NULL));
    CHECK(memcmp(aux, u, sizeof aux) == 0);
    for (int i = 0; i < M; i++) CHECK_NEAR(y[i], gemm_ref_gelu(u[i]), 1e-6);
}

static void test_grouped(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 47);
    enum { G = 4 };
    static const int64_t sizes[G][3] = {{1, 7, 5}, {127, 33, 65}, {17, 1025, 9}, {64, 64, 0}};
    gemm_data x[G];
    cml_gemm_desc descs[G];
    void *Ds[G];
    const void *As[G], *Bs[G], *Cs[G];
    for (int i = 0; i < G; i++) {
        gemm_case g = gemm_case_make(CML_OP_N, CML_OP_T, sizes[i][0], sizes[i][1], sizes[i][2], 1);
        g.a_dtype = g.b_dtype = CML_BF16;
        g.epilogue = CML_EPILOGUE_GELU_TANH_AUX;
        g.bias = i != 1;
        g.beta = i == 2 ? 0.5f : 0.0f;
        g.ld_pad = i;
        gemm_data_make(&x[i], &g, &rng);
        descs[i] = x[i].desc;
        Ds[i] = x[i].D.data;
        As[i] = x[i].A.data;
        Bs[i] = x[i].B.data;
        Cs[i] = gemm_data_c(&x[i]);
    }
    CHECK_OK(cml_gemm_grouped(kt_ctx(), descs, G, Ds, As, Bs, Cs));
    for (int i = 0; i < G; i++) {
        int64_t n = x[i].g.M * x[i].g.N;
        double *ref = kt_malloc(sizeof(double) * (size_t)n), *ref_aux = kt_malloc(sizeof(double) * (size_t)n);
        float *out = kt_malloc(sizeof(float) * (size_t)n);
        gemm_reference(&x[i], 1, false, ref, ref_aux, NULL);
        gemm_unpack(out, x[i].D.data, CML_F32, 1, x[i].g.M, x[i].g.N, descs[i].ldd, 0);
        KT_CHECK_CLOSE(out, ref, n, 1e-5, "grouped problem %d D", i);
        gemm_unpack(out, x[i].aux.data, CML_F32, 1, x[i].g.M, x[i].g.N, descs[i].ldaux, 0);
        KT_CHECK_CLOSE(out, ref_aux, n, 1e-5, "grouped problem %d aux", i);
        free(ref);
        free(ref_aux);
        free(out);
    }
    /* errors name the problem */
    cml_gemm_desc bad[G];
    memcpy(bad, descs, sizeof bad);
    bad[2].op_a = CML_OP_T;
    CHECK_STATUS(cml_gemm_grouped(kt_ctx(), bad, G, Ds, As, Bs, Cs), CML_ERR_INVALID_ARG, "descs[2].op_a=1 differs");
    memcpy(bad, descs, sizeof bad);
    bad[1].batch = 2;
    CHECK_STATUS(cml_gemm_grouped(kt_ctx(), bad, G, Ds, As, Bs, Cs), CML_ERR_INVALID_ARG,
                 "cml_gemm_grouped: descs[1].batch=2 must be 1");
    memcpy(bad, descs, sizeof bad);
    bad[3].ldd = 3;
    CHECK_STATUS(cml_gemm_grouped(kt_ctx(), bad, G, Ds, As, Bs, Cs), CML_ERR_INVALID_ARG,
                 "cml_gemm_grouped: descs[3]: ldd=3 must be >= N=64");
    memcpy(bad, descs, sizeof bad);
    bad[0].d_dtype = CML_BF16;
    CHECK_STATUS(cml_gemm_grouped(kt_ctx(), bad, G, Ds, As, Bs, Cs), CML_ERR_INVALID_ARG, "descs[1].d_dtype=f32 differs");
    CHECK_STATUS(cml_gemm_grouped(kt_ctx(), descs, G, Ds, As, Bs, NULL), CML_ERR_INVALID_ARG,
                 "C (the array) must not be NULL when descs[2].beta=0.5");
    CHECK_STATUS(cml_gemm_grouped(kt_ctx(), descs, -1, Ds, As, Bs, Cs), CML_ERR_INVALID_ARG, "count=-1 must be >= 0");
    CHECK_OK(cml_gemm_grouped(kt_ctx(), descs, 0, NULL, NULL, NULL, NULL));
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    KT_CHECK_CUDA_DISPATCH(cml_gemm_grouped(&cuda, descs, G, Ds, As, Bs, Cs));
    for (int i = 0; i < G; i++) gemm_data_free(&x[i]);
}

/* The query covers what a call takes: a fresh context's workspace never grows past it. */
static void test_workspace_size(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 48);
    size_t bytes = 1;
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 64, 32, 16, 2);
    CHECK_OK(cml_gemm_workspace_size(kt_ctx(), &d, &bytes));
    CHECK(bytes == 0); /* plain f32: conv's im2col GEMMs rely on this */
    gemm_case g = gemm_case_make(CML_OP_T, CML_OP_N, 65, 33, 47, 2);
    g.a_dtype = g.b_dtype = CML_F8E5M2;
    g.d_dtype = CML_BF16;
    g.epilogue = CML_EPILOGUE_DGELU_TANH;
    g.bias = true;
    g.a_scale_mode = CML_SCALE_VECTOR;
    gemm_data x;
    gemm_data_make(&x, &g, &rng);
    cml_ctx *ctx = NULL;
    CHECK_OK(cml_ctx_create(&ctx, CML_DEVICE_CPU));
    if (ctx) {
        CHECK_OK(cml_gemm_workspace_size(ctx, &x.desc, &bytes));
        CHECK(bytes > 0);
        CHECK_OK(cml_gemm(ctx, &x.desc, x.D.data, x.A.data, x.B.data, NULL));
        CHECK_MSG(ctx->workspace_size <= bytes, "workspace grew to %zu > the %zu bytes reported", ctx->workspace_size,
                  bytes);
        cml_ctx_destroy(ctx);
    }
    gemm_data_free(&x);
    d.lda = 3;
    CHECK_STATUS(cml_gemm_workspace_size(kt_ctx(), &d, &bytes), CML_ERR_INVALID_ARG,
                 "cml_gemm_workspace_size: lda=3 must be >= K=16");
    CHECK_STATUS(cml_gemm_workspace_size(kt_ctx(), &d, NULL), CML_ERR_INVALID_ARG, "bytes must not be NULL");
}

static void test_desc_init(void) {
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_T, CML_OP_N, 3, 5, 7, 2);
    CHECK(d.lda == 3 && d.ldb == 5 && d.ldc == 5 && d.ldd == 5 && d.ldaux == 5);
    CHECK(d.stride_a == 21 && d.stride_b == 35 && d.stride_c == 15 && d.stride_d == 15 && d.stride_aux == 15);
    CHECK(d.alpha == 1.0f && d.beta == 0.0f && d.bias == NULL && d.epilogue == CML_EPILOGUE_NONE);
    CHECK(d.a_dtype == CML_F32 && d.d_dtype == CML_F32 && d.batch == 2);
    CHECK(d.a_scale_mode == CML_SCALE_NONE && d.b_scale_mode == CML_SCALE_NONE && d.math == CML_GEMM_MATH_DEFAULT);
    CHECK(d.aux == NULL && d.dbias == NULL && d.a_scale == NULL && d.b_scale == NULL);
    d = cml_gemm_desc_init(CML_OP_N, CML_OP_T, 3, 5, 7, 1, CML_F8E4M3, CML_BF16);
    CHECK(d.lda == 7 && d.ldb == 7 && d.a_dtype == CML_F8E4M3 && d.b_dtype == CML_F8E4M3);
    CHECK(d.c_dtype == CML_BF16 && d.d_dtype == CML_BF16);
}

static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 49);
    const int64_t M = 200, N = 300, K = 257, nd = K * N; /* K > M: the D buffers fit both runs */
    float *A = kt_malloc(M * K * 4), *B = kt_malloc(K * N * 4), *D1 = kt_malloc(nd * 4), *D2 = kt_malloc(nd * 4);
    float *b1 = kt_malloc(K * 4), *b2 = kt_malloc(K * 4), *Bk = kt_malloc(M * N * 4);
    th_fill_uniform(A, M * K, -1, 1, &rng);
    th_fill_uniform(B, K * N, -1, 1, &rng);
    th_fill_uniform(Bk, M * N, -1, 1, &rng);
    th_poison(D1, nd * 4);
    th_poison(D2, nd * 4);
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, M, N, K, 1);
    CHECK_OK(cml_gemm(kt_ctx(), &d, D1, A, B, NULL));
    CHECK_OK(cml_gemm(kt_ctx(), &d, D2, A, B, NULL));
    CHECK(memcmp(D1, D2, M * N * 4) == 0);
    d = cml_gemm_desc_f32(CML_OP_T, CML_OP_N, K, N, M, 1); /* op(A) = A^T (K x M); dbias[k] = sum_m A[m,k] */
    d.epilogue = CML_EPILOGUE_GELU_TANH;
    d.dbias = b1;
    CHECK_OK(cml_gemm(kt_ctx(), &d, D1, A, Bk, NULL));
    d.dbias = b2;
    CHECK_OK(cml_gemm(kt_ctx(), &d, D2, A, Bk, NULL));
    CHECK(memcmp(D1, D2, nd * 4) == 0 && memcmp(b1, b2, K * 4) == 0);
    free(A);
    free(B);
    free(Bk);
    free(D1);
    free(D2);
    free(b1);
    free(b2);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float buf[128 * 4] = {0}, other[64] = {0}, scale = 1.0f;
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 128, 1);
    d.lda = 100;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: lda=100 must be >= K=128");
    d = cml_gemm_desc_f32(CML_OP_T, CML_OP_N, 4, 4, 8, 1);
    d.lda = 3;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: lda=3 must be >= M=4");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_T, 4, 4, 8, 1);
    d.ldb = 7;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: ldb=7 must be >= K=8");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 0, 4, 8, 1);
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: M=0 must be >= 1");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 0);
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: batch=0 must be >= 1");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    d.a_dtype = CML_I32;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_DTYPE, "cml_gemm: a_dtype=i32 must be a floating-point");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    d.d_dtype = CML_F8E4M3;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_DTYPE,
                 "cml_gemm: d_dtype=f8e4m3 must be f32, f16 or bf16 (fp8 is an input dtype only)");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    d.beta = 1.0f;
    d.c_dtype = CML_F8E5M2;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, other), CML_ERR_DTYPE, "cml_gemm: c_dtype=f8e5m2 must be f32");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    d.beta = 1.0f;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: C must not be NULL when beta=1");
    d.ldc = 5;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, buf), CML_ERR_INVALID_ARG,
                 "cml_gemm: C aliases D, so ldc=5, stride_c=16, c_dtype=f32 must equal ldd=4");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 2);
    d.stride_d = 8;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: stride_d=8 must be >= (M-1)*ldd+N=16");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    CHECK_STATUS(cml_gemm(ctx, NULL, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: desc must not be NULL");
    CHECK_STATUS(cml_gemm(ctx, &d, buf, NULL, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: A must not be NULL");
    d.epilogue = (cml_epilogue)7;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "epilogue=7 is not a cml_epilogue");
    d.epilogue = CML_EPILOGUE_NONE;
    d.bias_axis = (cml_bias_axis)2;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG,
                 "bias_axis=2 must be CML_BIAS_PER_COLUMN or CML_BIAS_PER_ROW");
    d.bias_axis = CML_BIAS_PER_COLUMN;
    d.math = (cml_gemm_math)5;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "math=5 must be");
    d = cml_gemm_desc_init(CML_OP_N, CML_OP_N, 4, 4, 8, 1, CML_BF16, CML_F32);
    d.math = CML_GEMM_MATH_TF32;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG,
                 "math=CML_GEMM_MATH_TF32 needs a_dtype=f32 and b_dtype=f32 (got bf16 and bf16)");
    /* scales */
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    d.a_scale_mode = CML_SCALE_TENSOR;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG,
                 "cml_gemm: a_scale must not be NULL when a_scale_mode=CML_SCALE_TENSOR");
    d.a_scale = &scale;
    d.b_scale_mode = CML_SCALE_VECTOR;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG,
                 "cml_gemm: b_scale must not be NULL when b_scale_mode=CML_SCALE_VECTOR");
    d.b_scale_mode = (cml_scale_mode)3;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "b_scale_mode=3 is not a cml_scale_mode");
    /* aux */
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 2);
    d.epilogue = CML_EPILOGUE_GELU_TANH_AUX;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG,
                 "cml_gemm: aux must not be NULL when epilogue=CML_EPILOGUE_GELU_TANH_AUX");
    d.epilogue = CML_EPILOGUE_DGELU_TANH;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG,
                 "cml_gemm: aux must not be NULL when epilogue=CML_EPILOGUE_DGELU_TANH");
    d.aux = other;
    d.ldaux = 3;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: ldaux=3 must be >= N=4");
    d.ldaux = 4;
    d.stride_aux = 0; /* read: a broadcast saved pre-activation is fine */
    float dst[32];
    CHECK_OK(cml_gemm(ctx, &d, dst, buf, buf, NULL));
    d.epilogue = CML_EPILOGUE_GELU_TANH_AUX; /* written: batches must not overlap */
    CHECK_STATUS(cml_gemm(ctx, &d, dst, buf, buf, NULL), CML_ERR_INVALID_ARG,
                 "cml_gemm: stride_aux=0 must be >= (M-1)*ldaux+N=16 when batch=2 > 1");
    d.stride_aux = 16;
    d.aux = dst;
    CHECK_STATUS(cml_gemm(ctx, &d, dst, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: aux must not alias D");
    d = cml_gemm_desc_f32(CML_OP_T, CML_OP_N, 4, 4, 8, 1);
    d.dbias = dst;
    CHECK_STATUS(cml_gemm(ctx, &d, dst, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: dbias must not alias D");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, (int64_t)1 << 40, (int64_t)1 << 40, 8, 1 << 20);
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "overflow int64");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 3);
    d.ldd = INT64_MAX / 2;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: D's leading dim and batch stride address past int64");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 3);
    d.stride_a = INT64_MAX / 2;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: A's leading dim and batch stride");
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    KT_CHECK_CUDA_DISPATCH(cml_gemm(&cuda, &d, buf, buf, buf, NULL));
}

int main(void) {
    RUN(test_transposes_and_shapes);
    RUN(test_batched_beta_and_k0);
    RUN(test_epilogues);
    RUN(test_scales_and_dtypes);
    RUN(test_tf32);
    RUN(test_dbias);
    RUN(test_dgelu_finite_differences);
    RUN(test_grouped);
    RUN(test_workspace_size);
    RUN(test_desc_init);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
