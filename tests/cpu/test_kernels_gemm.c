/* cml_gemm against a float64 reference: every transpose combination, odd
 * shapes and leading dims, strided batches with a broadcast (stride 0)
 * operand, beta*C with C separate or aliasing D, bias + relu/gelu epilogues,
 * K = 0, and bf16/f16 storage. */
#include "kernel_test_util.h"

typedef struct gemm_case {
    cml_op op_a, op_b;
    int64_t M, N, K, batch;
    int64_t ld_pad;        /* added to every leading dim */
    bool broadcast_a;      /* stride_a = 0 */
    float alpha, beta;
    bool c_aliases_d, bias;
    cml_epilogue epilogue;
    cml_dtype a_dtype, b_dtype, c_dtype, d_dtype;
} gemm_case;

static double gelu_tanh_ref(double v) {
    return 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
}

static void run_gemm(const gemm_case *g, cml_rng *rng) {
    int64_t M = g->M, N = g->N, K = g->K, B = g->batch;
    cml_gemm_desc d = cml_gemm_desc_f32(g->op_a, g->op_b, M, N, K, B);
    d.a_dtype = g->a_dtype;
    d.b_dtype = g->b_dtype;
    d.c_dtype = g->c_aliases_d ? g->d_dtype : g->c_dtype;
    d.d_dtype = g->d_dtype;
    int64_t a_rows = g->op_a == CML_OP_N ? M : K, b_rows = g->op_b == CML_OP_N ? K : N;
    d.lda += g->ld_pad;
    d.ldb += g->ld_pad;
    d.ldc += g->ld_pad;
    d.ldd += g->ld_pad;
    d.stride_a = g->broadcast_a ? 0 : a_rows * d.lda + 5; /* gaps between batches too */
    d.stride_b = b_rows * d.ldb + 3;
    d.stride_c = M * d.ldc + 1;
    d.stride_d = M * d.ldd + 2;
    if (g->c_aliases_d) {
        d.ldc = d.ldd;
        d.stride_c = d.stride_d;
    }
    d.alpha = g->alpha;
    d.beta = g->beta;
    d.epilogue = g->epilogue;
    int64_t na = g->broadcast_a ? a_rows * d.lda : B * d.stride_a, nb = B * d.stride_b;
    int64_t nc = B * d.stride_c, nd = B * d.stride_d;
    cml_layout la = kt_layout(1, &na), lb = kt_layout(1, &nb), lc = kt_layout(1, &nc), ld = kt_layout(1, &nd);
    int64_t n_bias = N;
    cml_layout lbias = kt_layout(1, &n_bias);
    kt_view A = kt_view_alloc(la, g->a_dtype), Bm = kt_view_alloc(lb, g->b_dtype);
    kt_view C = kt_view_alloc(lc, d.c_dtype), D = kt_view_alloc(ld, g->d_dtype), bias = kt_view_alloc(lbias, g->d_dtype);
    kt_fill_uniform(&A, -1, 1, rng);
    kt_fill_uniform(&Bm, -1, 1, rng);
    kt_fill_uniform(&C, -1, 1, rng);
    kt_fill_uniform(&bias, -1, 1, rng);
    if (g->c_aliases_d) kt_fill_uniform(&D, -1, 1, rng); /* D holds C */
    d.bias = g->bias ? bias.data : NULL;
    /* the reference reads C before the kernel overwrites it */
    kt_view *c_src = g->c_aliases_d ? &D : &C;
    double *ref = kt_malloc((size_t)(B * M * N) * 8);
    float *out = kt_malloc((size_t)(B * M * N) * 4);
    for (int64_t b = 0; b < B; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double acc = 0;
                int64_t a0 = b * d.stride_a, b0 = b * d.stride_b;
                for (int64_t k = 0; k < K; k++) {
                    double av = kt_get(&A, a0 + (g->op_a == CML_OP_N ? m * d.lda + k : k * d.lda + m));
                    double bv = kt_get(&Bm, b0 + (g->op_b == CML_OP_N ? k * d.ldb + n : n * d.ldb + k));
                    acc += av * bv;
                }
                double v = g->alpha * acc;
                if (g->beta != 0) v += g->beta * kt_get(c_src, b * d.stride_c + m * d.ldc + n);
                if (g->bias) v += kt_get(&bias, n);
                if (g->epilogue == CML_EPILOGUE_RELU) v = v > 0 ? v : 0;
                if (g->epilogue == CML_EPILOGUE_GELU_TANH) v = gelu_tanh_ref(v);
                ref[(b * M + m) * N + n] = v;
            }
    const void *c_arg = g->beta == 0 ? NULL : g->c_aliases_d ? D.data : C.data;
    CHECK_OK(cml_gemm(kt_ctx(), &d, D.data, A.data, Bm.data, c_arg));
    for (int64_t b = 0; b < B; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) out[(b * M + m) * N + n] = (float)kt_get(&D, b * d.stride_d + m * d.ldd + n);
    KT_CHECK_CLOSE(out, ref, B * M * N, kt_tol(g->d_dtype),
                   "gemm op=%c%c M=%lld N=%lld K=%lld batch=%lld pad=%lld bcastA=%d beta=%g alias=%d bias=%d epi=%d "
                   "%s*%s->%s",
                   g->op_a == CML_OP_N ? 'N' : 'T', g->op_b == CML_OP_N ? 'N' : 'T', (long long)M, (long long)N,
                   (long long)K, (long long)B, (long long)g->ld_pad, g->broadcast_a, (double)g->beta, g->c_aliases_d,
                   g->bias, (int)g->epilogue, cml_dtype_name(g->a_dtype), cml_dtype_name(g->b_dtype),
                   cml_dtype_name(g->d_dtype));
    free(ref);
    free(out);
    kt_view_free(&A);
    kt_view_free(&Bm);
    kt_view_free(&C);
    kt_view_free(&D);
    kt_view_free(&bias);
}

static void test_transposes_and_shapes(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 40);
    static const int64_t mnk[][3] = {{1, 1, 1}, {7, 5, 3}, {127, 33, 65}, {64, 1025, 17}, {1, 127, 1025}, {33, 1, 7}};
    for (int s = 0; s < 6; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int pad = 0; pad <= 3; pad += 3) {
                    gemm_case g = {(cml_op)ta, (cml_op)tb, mnk[s][0], mnk[s][1], mnk[s][2], 1, pad, false, 1.0f, 0.0f,
                                   false, false, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32};
                    run_gemm(&g, &rng);
                }
}

static void test_batched_and_epilogues(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 41);
    gemm_case cases[] = {
        /* batch with a broadcast A, odd leading dims */
        {CML_OP_N, CML_OP_T, 17, 9, 13, 3, 1, true, 1.0f, 0.0f, false, false, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32},
        {CML_OP_T, CML_OP_N, 5, 31, 8, 4, 2, false, 0.5f, 0.0f, false, false, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32},
        /* beta * C, separate and in place */
        {CML_OP_N, CML_OP_N, 33, 65, 17, 2, 0, false, 1.5f, -0.75f, false, false, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32},
        {CML_OP_T, CML_OP_T, 33, 65, 17, 2, 3, false, 1.0f, 1.0f, true, false, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32},
        /* bias + activations */
        {CML_OP_N, CML_OP_T, 31, 127, 64, 1, 0, false, 1.0f, 0.0f, false, true, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32},
        {CML_OP_N, CML_OP_N, 31, 127, 64, 2, 1, false, 1.0f, 0.5f, false, true, CML_EPILOGUE_RELU, CML_F32, CML_F32, CML_F32, CML_F32},
        {CML_OP_N, CML_OP_T, 31, 127, 64, 1, 0, false, 1.0f, 0.0f, false, true, CML_EPILOGUE_GELU_TANH, CML_F32, CML_F32, CML_F32, CML_F32},
        /* K = 0: D = beta * C + bias */
        {CML_OP_N, CML_OP_N, 7, 9, 0, 2, 0, false, 1.0f, 2.0f, false, true, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32},
        {CML_OP_T, CML_OP_N, 7, 9, 0, 1, 0, false, 1.0f, 0.0f, false, false, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_F32, CML_F32},
        /* narrow storage */
        {CML_OP_N, CML_OP_T, 65, 127, 129, 2, 1, false, 1.0f, 0.0f, false, true, CML_EPILOGUE_GELU_TANH, CML_BF16, CML_BF16, CML_F32, CML_BF16},
        {CML_OP_T, CML_OP_N, 33, 17, 1025, 1, 0, false, 1.0f, 0.0f, false, false, CML_EPILOGUE_NONE, CML_BF16, CML_F16, CML_F32, CML_F32},
        {CML_OP_N, CML_OP_N, 33, 17, 65, 3, 2, true, 1.0f, 1.0f, false, false, CML_EPILOGUE_RELU, CML_F16, CML_F32, CML_BF16, CML_F16},
        {CML_OP_N, CML_OP_N, 33, 17, 65, 2, 0, false, 1.0f, 0.5f, true, true, CML_EPILOGUE_NONE, CML_F32, CML_F32, CML_BF16, CML_BF16},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_gemm(&cases[k], &rng);
}

static void test_desc_f32(void) {
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_T, CML_OP_N, 3, 5, 7, 2);
    CHECK(d.lda == 3 && d.ldb == 5 && d.ldc == 5 && d.ldd == 5);
    CHECK(d.stride_a == 21 && d.stride_b == 35 && d.stride_c == 15 && d.stride_d == 15);
    CHECK(d.alpha == 1.0f && d.beta == 0.0f && d.bias == NULL && d.epilogue == CML_EPILOGUE_NONE);
    CHECK(d.a_dtype == CML_F32 && d.d_dtype == CML_F32 && d.batch == 2);
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_T, 3, 5, 7, 1);
    CHECK(d.lda == 7 && d.ldb == 7);
}

static void test_deterministic(void) {
    cml_rng rng;
    cml_rng_init(&rng, KT_SEED + 42);
    const int64_t M = 200, N = 300, K = 257;
    float *A = kt_malloc(M * K * 4), *B = kt_malloc(K * N * 4), *D1 = kt_malloc(M * N * 4), *D2 = kt_malloc(M * N * 4);
    th_fill_uniform(A, M * K, -1, 1, &rng);
    th_fill_uniform(B, K * N, -1, 1, &rng);
    th_poison(D1, M * N * 4);
    th_poison(D2, M * N * 4);
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, M, N, K, 1);
    CHECK_OK(cml_gemm(kt_ctx(), &d, D1, A, B, NULL));
    CHECK_OK(cml_gemm(kt_ctx(), &d, D2, A, B, NULL));
    CHECK(memcmp(D1, D2, M * N * 4) == 0);
    free(A);
    free(B);
    free(D1);
    free(D2);
}

static void test_errors(void) {
    cml_ctx *ctx = kt_ctx();
    float buf[128 * 4] = {0};
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
    d.beta = 1.0f;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: C must not be NULL when beta=1");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 2);
    d.stride_d = 8;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: stride_d=8 must be >= (M-1)*ldd+N=16");
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, 4, 4, 8, 1);
    CHECK_STATUS(cml_gemm(ctx, NULL, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: desc must not be NULL");
    CHECK_STATUS(cml_gemm(ctx, &d, buf, NULL, buf, NULL), CML_ERR_INVALID_ARG, "cml_gemm: A must not be NULL");
    d.epilogue = (cml_epilogue)7;
    CHECK_STATUS(cml_gemm(ctx, &d, buf, buf, buf, NULL), CML_ERR_INVALID_ARG, "epilogue=7");
    cml_ctx cuda = kt_fake_cuda_ctx_unusable();
    d.epilogue = CML_EPILOGUE_NONE;
    KT_CHECK_CUDA_DISPATCH(cml_gemm(&cuda, &d, buf, buf, buf, NULL));
}

int main(void) {
    RUN(test_transposes_and_shapes);
    RUN(test_batched_and_epilogues);
    RUN(test_desc_f32);
    RUN(test_deterministic);
    RUN(test_errors);
    return kt_finish();
}
