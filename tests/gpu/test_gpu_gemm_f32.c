/* GPU tests of the exact-f32 GEMM path (src/kernels/cuda/gemm/gemm_f32.cu),
 * called directly (cml__gemm_f32), against the float64 reference of
 * tests/gemm_ref.h on fresh random inputs:
 *  - which problems the path takes (alignment of A/B, leading dimensions and
 *    batch strides multiples of 4, f32 inputs, default math, K >= 1);
 *  - a shape sweep with 1, 7, 127, 1025, 4095, K not a multiple of the k-tile,
 *    padded leading dimensions, all four transposes; the cost estimate must pick
 *    at least three configurations over the sweep, and every tile configuration is
 *    also forced (cml__gemm_f32_force_config) on shapes with partial tiles on every
 *    edge, with and without an epilogue, batched;
 *  - every epilogue option (alpha, beta with C or C aliasing D, row and column
 *    bias, ReLU, GELU, GELU with aux, dGELU, tensor and vector scales) and f16 /
 *    bf16 outputs;
 *  - strided batches with gaps, a broadcast operand (stride 0), and 65537
 *    batches (more than one launch's grid.z);
 *  - split K (cml__gemm_f32_force_splits): K = 1 and 7 (shorter than the splits),
 *    33, 1025, with every epilogue, f16 / bf16 outputs, every tile configuration,
 *    batches (65537 too), dbias and the workspace query through cml_gemm, and the
 *    estimate's own split on a weight-gradient shape.
 * D (and aux) are poisoned (0xFF: NaN) before each run, the padding around
 * them must still be poison afterwards, and two runs must be bitwise identical.
 * Exits 77 ("skipped") without a GPU or in a build without CUDA. */
#include "gemm_ref.h"
#include "gpu_row_util.h"

#ifndef CML_HAVE_CUDA
int main(void) {
    printf("skipped: built without CUDA\n");
    return 77;
}
#else
#include "kernels/cuda/cuda_kernels.h"

/* A case for this path: leading dims padded to multiples of 4 (plus `pad` more
 * groups of 4), batch strides multiples of 4 with gaps, data `offset` elements
 * into each allocation (0 or 4 keep A and B 16-byte aligned). */
typedef struct f32_case {
    gemm_case g;
    int64_t pad4;   /* extra groups of 4 elements on every leading dimension */
    int64_t offset; /* elements */
} f32_case;

static int64_t round4(int64_t v) { return (v + 3) / 4 * 4; }

/* gemm_data for the f32 path (tests/gemm_ref.h's gemm_data_make pads every ld by the
 * same amount and leaves odd batch gaps, which this path declines by design). */
static void f32_data_make(gemm_data *x, const f32_case *c) {
    const gemm_case *g = &c->g;
    memset(x, 0, sizeof *x);
    x->g = *g;
    const int64_t M = g->M, N = g->N, K = g->K, Bt = g->batch;
    cml_gemm_desc d = cml_gemm_desc_init(g->op_a, g->op_b, M, N, K, Bt, CML_F32, g->d_dtype);
    d.c_dtype = g->c_aliases_d ? g->d_dtype : g->c_dtype;
    const int64_t a_rows = g->op_a == CML_OP_N ? M : K, a_cols = g->op_a == CML_OP_N ? K : M;
    const int64_t b_rows = g->op_b == CML_OP_N ? K : N, b_cols = g->op_b == CML_OP_N ? N : K;
    d.lda = round4(a_cols) + 4 * c->pad4;
    d.ldb = round4(b_cols) + 4 * c->pad4;
    d.ldc = N + c->pad4;     /* the epilogue's operands need no alignment: odd on purpose */
    d.ldd = N + 3 * c->pad4;
    d.ldaux = N + 2 * c->pad4;
    d.stride_a = g->broadcast_a ? 0 : a_rows * d.lda + 8;
    d.stride_b = g->broadcast_b ? 0 : b_rows * d.ldb + 4;
    d.stride_c = M * d.ldc + 1;
    d.stride_d = M * d.ldd + 2;
    d.stride_aux = M * d.ldaux + 3;
    if (g->c_aliases_d) {
        d.ldc = d.ldd;
        d.stride_c = d.stride_d;
    }
    d.alpha = g->alpha;
    d.beta = g->beta;
    d.epilogue = g->epilogue;
    d.bias_axis = g->bias_axis;
    d.a_scale_mode = g->a_scale_mode;
    d.b_scale_mode = g->b_scale_mode;
    const int64_t na = (g->broadcast_a ? 0 : (Bt - 1) * d.stride_a) + (a_rows - 1) * d.lda + a_cols;
    const int64_t nb = (g->broadcast_b ? 0 : (Bt - 1) * d.stride_b) + (b_rows - 1) * d.ldb + b_cols;
    const int64_t nc = (Bt - 1) * d.stride_c + (M - 1) * d.ldc + N, nd = (Bt - 1) * d.stride_d + (M - 1) * d.ldd + N;
    const int64_t naux = (Bt - 1) * d.stride_aux + (M - 1) * d.ldaux + N;
    x->A = gemm_buf_alloc(na, c->offset, CML_F32);
    x->B = gemm_buf_alloc(nb, c->offset, CML_F32);
    x->C = gemm_buf_alloc(nc, c->offset, d.c_dtype);
    x->D = gemm_buf_alloc(nd, c->offset, g->d_dtype);
    x->bias = gemm_buf_alloc(g->bias_axis == CML_BIAS_PER_ROW ? M : N, c->offset, g->d_dtype);
    x->aux = gemm_buf_alloc(naux, c->offset, g->d_dtype);
    x->a_scale = gemm_buf_alloc(g->a_scale_mode == CML_SCALE_VECTOR ? M : 1, c->offset, CML_F32);
    x->b_scale = gemm_buf_alloc(g->b_scale_mode == CML_SCALE_VECTOR ? N : 1, c->offset, CML_F32);
    x->dbias = gemm_buf_alloc(g->dbias ? Bt * M : 1, c->offset, g->d_dtype);
    gemm_buf_fill(&x->A, -1, 1, &rng);
    gemm_buf_fill(&x->B, -1, 1, &rng);
    gemm_buf_fill(&x->C, -1, 1, &rng);
    gemm_buf_fill(&x->bias, -1, 1, &rng);
    gemm_buf_fill(&x->a_scale, 0.5f, 2, &rng);
    gemm_buf_fill(&x->b_scale, 0.5f, 2, &rng);
    if (g->epilogue == CML_EPILOGUE_DGELU_TANH) gemm_buf_fill(&x->aux, -3, 3, &rng);
    if (g->c_aliases_d) gemm_buf_fill(&x->D, -1, 1, &rng);
    x->desc = d;
}

/* A device copy of a host buffer (its whole storage, poison included). */
typedef struct dev_buf {
    void *storage, *data;
    size_t bytes;
} dev_buf;

static dev_buf dev_copy(const gemm_buf *h) {
    dev_buf b;
    b.bytes = h->bytes;
    b.storage = dev_alloc(b.bytes);
    CHECK(b.storage != NULL);
    if (b.storage) upload(b.storage, h->storage, b.bytes);
    b.data = b.storage ? (char *)b.storage + ((const char *)h->data - (const char *)h->storage) : NULL;
    return b;
}

static const char *seen_configs[8]; /* names of the tile configurations that ran */
static int n_seen;

static void note_config(const char *name) {
    for (int i = 0; i < n_seen; i++)
        if (strcmp(seen_configs[i], name) == 0) return;
    if (n_seen < 8) seen_configs[n_seen++] = name;
}

/* Every byte of a host copy of an output outside its M x N x batch elements must still be 0xFF. */
static void check_untouched(const char *what, const char *name, const gemm_buf *h, const void *got, int64_t M,
                            int64_t N, int64_t batch, int64_t ld, int64_t stride) {
    const size_t es = cml_dtype_size(h->dtype);
    const size_t off = (size_t)((const char *)h->data - (const char *)h->storage);
    const unsigned char *p = got;
    for (size_t i = 0; i < h->bytes; i++) {
        bool inside = false;
        if (i >= off) {
            const int64_t e = (int64_t)((i - off) / es), b = e / (stride > 0 ? stride : 1), r = e - b * stride;
            inside = b < batch && r / ld < M && r % ld < N;
        }
        if (!inside && p[i] != 0xFF) {
            CHECK_MSG(false, "%s: %s byte %zu (outside the matrix) was written", what, name, i);
            return;
        }
    }
}

/* Runs one case through cml__gemm_f32 (twice) and compares with the float64 reference. */
static void run_case(const f32_case *c, bool expect_takes) {
    char what[400];
    gemm_case_str(&c->g, what, sizeof what);
    gemm_data x;
    f32_data_make(&x, c);
    const gemm_case *g = &c->g;
    const int64_t M = g->M, N = g->N, Bt = g->batch, total = Bt * M * N;
    const int64_t row_step = M * N * g->K > ((int64_t)1 << 27) ? 13 : 1; /* big cases: every 13th row */
    double *ref = malloc(sizeof(double) * (size_t)total), *ref_aux = malloc(sizeof(double) * (size_t)total);
    float *out = malloc(sizeof(float) * (size_t)total);
    unsigned char *got = malloc(x.D.bytes), *again = malloc(x.D.bytes), *got_aux = malloc(x.aux.bytes);
    CHECK(ref && ref_aux && out && got && again && got_aux);
    gemm_reference(&x, row_step, false, ref, ref_aux, NULL);

    dev_buf dA = dev_copy(&x.A), dB = dev_copy(&x.B), dC = dev_copy(&x.C), dD = dev_copy(&x.D),
            dbias = dev_copy(&x.bias), daux = dev_copy(&x.aux), dsa = dev_copy(&x.a_scale), dsb = dev_copy(&x.b_scale);
    cml_gemm_desc d = x.desc;
    d.bias = g->bias ? dbias.data : NULL;
    d.aux = NULL;
    if (g->epilogue == CML_EPILOGUE_GELU_TANH_AUX || g->epilogue == CML_EPILOGUE_DGELU_TANH) d.aux = daux.data;
    d.a_scale = g->a_scale_mode != CML_SCALE_NONE ? dsa.data : NULL;
    d.b_scale = g->b_scale_mode != CML_SCALE_NONE ? dsb.data : NULL;
    d.dbias = NULL;
    const void *dc = g->beta == 0.0f ? NULL : g->c_aliases_d ? dD.data : dC.data;

    const bool takes = cml__gemm_f32_takes(gctx, &d, dD.data, dA.data, dB.data, dc);
    CHECK_MSG(takes == expect_takes, "%s: cml__gemm_f32_takes says %d, expected %d", what, takes, expect_takes);
    if (takes && dA.storage && dB.storage && dC.storage && dD.storage && got && again) {
        note_config(cml__gemm_f32_config_name(gctx, &d));
        for (int run = 0; run < 2; run++) {
            /* fresh D (poison outside, C inside when it aliases) and aux for each run */
            upload(dD.storage, x.D.storage, x.D.bytes);
            if (g->epilogue == CML_EPILOGUE_GELU_TANH_AUX) poison(daux.storage, x.aux.bytes);
            if (!g->c_aliases_d) poison(dD.storage, x.D.bytes);
            CHECK_OK(cml__gemm_f32(gctx, &d, dD.data, dA.data, dB.data, dc));
            download(run == 0 ? got : again, dD.storage, x.D.bytes);
        }
        CHECK_MSG(memcmp(got, again, x.D.bytes) == 0, "%s: a repeat run differs", what);
        const size_t doff = (size_t)((char *)x.D.data - (char *)x.D.storage);
        gemm_unpack(out, got + doff, g->d_dtype, Bt, M, N, d.ldd, d.stride_d);
        const double err = gemm_rel_error_rows(out, ref, Bt, M, N, row_step);
        const double tol = gemm_tol(g->d_dtype, CML_F32, CML_GEMM_MATH_DEFAULT, false);
        CHECK_MSG(err <= tol, "%s: relative error %.3g > %.3g", what, err, tol);
        if (!g->c_aliases_d) check_untouched(what, "D", &x.D, got, M, N, Bt, d.ldd, d.stride_d);
        if (g->epilogue == CML_EPILOGUE_GELU_TANH_AUX) {
            download(got_aux, daux.storage, x.aux.bytes);
            const size_t aoff = (size_t)((char *)x.aux.data - (char *)x.aux.storage);
            gemm_unpack(out, got_aux + aoff, g->d_dtype, Bt, M, N, d.ldaux, d.stride_aux);
            const double aerr = gemm_rel_error_rows(out, ref_aux, Bt, M, N, row_step);
            CHECK_MSG(aerr <= tol, "%s: aux relative error %.3g > %.3g", what, aerr, tol);
            check_untouched(what, "aux", &x.aux, got_aux, M, N, Bt, d.ldaux, d.stride_aux);
        }
    }
    dev_buf bufs[] = {dA, dB, dC, dD, dbias, daux, dsa, dsb};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(bufs[i].storage, bufs[i].bytes);
    free(ref);
    free(ref_aux);
    free(out);
    free(got);
    free(again);
    free(got_aux);
    gemm_data_free(&x);
}

static f32_case plain(cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K, int64_t batch) {
    f32_case c;
    memset(&c, 0, sizeof c);
    c.g = gemm_case_make(op_a, op_b, M, N, K, batch);
    return c;
}

static void test_takes(void) {
    const int64_t M = 33, N = 20, K = 12;
    float *A = dev_alloc(4 * 64 * 64), *B = dev_alloc(4 * 64 * 64), *D = dev_alloc(4 * 64 * 64);
    CHECK(A && B && D);
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, M, N, K, 1);
    CHECK(cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A + 1, B, NULL)); /* A not 16-byte aligned */
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A, B + 2, NULL));
    CHECK(cml__gemm_f32_takes(gctx, &d, D + 1, A, B, NULL)); /* D: no rule */
    d.lda = 13;
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    d.lda = 16;
    d.ldb = 22;
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    d.ldb = 24;
    CHECK(cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    d.batch = 2;
    d.stride_a = 33 * 16 + 2;
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    d.stride_a = 0; /* broadcast */
    CHECK(cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    d.math = CML_GEMM_MATH_TF32;
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    d = cml_gemm_desc_init(CML_OP_N, CML_OP_N, M, N, K, 1, CML_BF16, CML_F32);
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A, B, NULL));
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, M, N, 0, 1);
    CHECK(!cml__gemm_f32_takes(gctx, &d, D, A, B, NULL)); /* K = 0: D = beta C, left to the simt path */
    d = cml_gemm_desc_f32(CML_OP_N, CML_OP_N, M, N, K, 1);
    CHECK_STATUS(cml__gemm_f32(gctx, &d, D, A + 1, B, NULL), CML_ERR_UNSUPPORTED, "16-byte aligned");
    /* a misaligned case through the test's own data: declined, never run */
    f32_case c = plain(CML_OP_N, CML_OP_T, 9, 10, 11, 1);
    c.offset = 1;
    run_case(&c, false);
    dev_free(A, 4 * 64 * 64);
    dev_free(B, 4 * 64 * 64);
    dev_free(D, 4 * 64 * 64);
}

static void test_shapes(void) {
    static const int64_t shapes[][3] = {
        {1, 1, 1},      {7, 127, 5},     {127, 1025, 9},   {1025, 130, 1023}, {300, 77, 4095}, {129, 255, 17},
        {64, 64, 8},    {65, 129, 16},   {4095, 7, 33},    {3, 4095, 127},    {256, 128, 24},  {257, 129, 25},
        {1920, 1088, 24}, {2048, 2048, 16}, /* the small and large tile configurations (by pick_config) */
        {1024, 1024, 64}, {1000, 3000, 100},
    };
    const size_t n_shapes = sizeof shapes / sizeof shapes[0] - (under_sanitizer() ? 2 : 0);
    for (size_t s = 0; s < n_shapes; s++)
        for (int t = 0; t < 4; t++) {
            f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, shapes[s][0], shapes[s][1],
                               shapes[s][2], 1);
            c.pad4 = s % 3;
            c.offset = s % 2 ? 4 : 0;
            run_case(&c, true);
        }
    /* two waves of the large configuration, with every edge of a tile in the second case */
    if (!under_sanitizer()) {
        f32_case big = plain(CML_OP_N, CML_OP_N, 4096, 4096, 36, 1);
        run_case(&big, true);
        big = plain(CML_OP_T, CML_OP_T, 4100, 4093, 19, 1);
        run_case(&big, true);
    }
    printf("  tile configurations run:");
    for (int i = 0; i < n_seen; i++) printf(" %s", seen_configs[i]);
    printf("\n");
    CHECK_MSG(n_seen >= 3, "the cost estimate picked only %d tile configurations", n_seen);
}

/* Every configuration, forced, on partial tiles in m, n and k, all transposes; an epilogue
 * with beta, row bias and GELU + aux (its general, non-vector stores) on odd ld. */
static void test_forced_configs(void) {
    static const int64_t shapes[][4] = {{257, 129, 33, 1}, {33, 200, 17, 2}, {130, 70, 333, 1}};
    int forced = 0;
    for (int i = 0; cml__gemm_f32_config_at(i) != NULL; i++) {
        const char *name = cml__gemm_f32_config_at(i);
        CHECK(cml__gemm_f32_force_config(name));
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 4; t++) {
                f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, shapes[s][0],
                                   shapes[s][1], shapes[s][2], shapes[s][3]);
                c.pad4 = (int64_t)(s + t) % 3;
                c.offset = t % 2 ? 4 : 0;
                if (s == 2) {
                    c.g.beta = 0.5f;
                    c.g.bias = true;
                    c.g.bias_axis = CML_BIAS_PER_ROW;
                    c.g.epilogue = t % 2 ? CML_EPILOGUE_GELU_TANH_AUX : CML_EPILOGUE_RELU;
                }
                cml_gemm_desc d = cml_gemm_desc_f32(c.g.op_a, c.g.op_b, c.g.M, c.g.N, c.g.K, c.g.batch);
                CHECK_MSG(strcmp(cml__gemm_f32_config_name(gctx, &d), name) == 0, "forcing %s ran %s", name,
                          cml__gemm_f32_config_name(gctx, &d));
                run_case(&c, true);
            }
        forced++;
    }
    CHECK(!cml__gemm_f32_force_config("no-such-config"));
    CHECK(cml__gemm_f32_force_config(NULL));
    printf("  %d configurations forced\n", forced);
    CHECK_MSG(forced >= 3, "only %d configurations", forced);
}

static void test_epilogues(void) {
    static const cml_epilogue acts[] = {CML_EPILOGUE_NONE, CML_EPILOGUE_RELU, CML_EPILOGUE_GELU_TANH,
                                        CML_EPILOGUE_GELU_TANH_AUX, CML_EPILOGUE_DGELU_TANH};
    for (int t = 0; t < 4; t++)
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
            f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 67, 131, 45, 2);
            c.pad4 = 1;
            c.g.epilogue = acts[a];
            c.g.alpha = 0.75f;
            c.g.beta = a % 2 ? 0.5f : 0.0f;
            c.g.c_aliases_d = a == 3;
            c.g.bias = a != 0;
            c.g.bias_axis = a % 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
            c.g.a_scale_mode = (cml_scale_mode)(a % 3);
            c.g.b_scale_mode = (cml_scale_mode)((a + t) % 3);
            run_case(&c, true);
        }
    static const cml_dtype outs[] = {CML_F16, CML_BF16};
    for (int o = 0; o < 2; o++)
        for (int t = 0; t < 4; t++) {
            f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 130, 70, 333, 1);
            c.g.d_dtype = c.g.c_dtype = outs[o];
            c.g.beta = 1.0f;
            c.g.bias = true;
            c.g.epilogue = t % 2 ? CML_EPILOGUE_GELU_TANH_AUX : CML_EPILOGUE_RELU;
            run_case(&c, true);
        }
}

static void test_batches(void) {
    for (int t = 0; t < 4; t++) {
        f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 70, 90, 50, 3);
        c.pad4 = 2;
        run_case(&c, true);
        c.g.broadcast_a = t % 2 == 0;
        c.g.broadcast_b = t % 2 == 1;
        c.offset = 4;
        run_case(&c, true);
    }
    /* more batches than one launch's grid.z (65535) */
    f32_case many = plain(CML_OP_N, CML_OP_T, 3, 5, 4, 65537);
    many.g.bias = true;
    run_case(&many, true);
}

/* The splits a forced count makes: chunks of ceil(K / want) rounded up to 16 (gemm_f32.cu). */
static int expected_splits(int64_t K, int want) {
    const int64_t chunk = ((K + want - 1) / want + 15) / 16 * 16;
    return (int)((K + chunk - 1) / chunk);
}

/* With `want` splits forced: c's problem must run with the expected number of them. */
static void check_split_count(const f32_case *c, int want) {
    cml_gemm_desc d = cml_gemm_desc_f32(c->g.op_a, c->g.op_b, c->g.M, c->g.N, c->g.K, c->g.batch);
    const int got = cml__gemm_f32_splits(gctx, &d), expect = expected_splits(c->g.K, want);
    CHECK_MSG(got == expect, "K=%lld, %d splits forced: runs %d, expected %d", (long long)c->g.K, want, got, expect);
}

/* D and dbias through cml_gemm (the dispatcher: dbias's partials, then the split GEMM's, in one
 * workspace) with K split, against the float64 reference; the workspace query must cover the
 * partials; two runs bitwise equal. */
static void run_split_dbias(const f32_case *c, int want) {
    char what[400];
    gemm_case_str(&c->g, what, sizeof what);
    gemm_data x;
    f32_data_make(&x, c);
    const gemm_case *g = &c->g;
    const int64_t M = g->M, N = g->N, Bt = g->batch;
    double *ref = malloc(sizeof(double) * (size_t)(Bt * M * N)), *ref_aux = malloc(sizeof(double) * (size_t)(Bt * M * N));
    double *ref_dbias = malloc(sizeof(double) * (size_t)(Bt * M));
    float *out = malloc(sizeof(float) * (size_t)(Bt * M * N));
    unsigned char *got[2] = {malloc(x.D.bytes), malloc(x.D.bytes)};
    unsigned char *gotb[2] = {malloc(x.dbias.bytes), malloc(x.dbias.bytes)};
    CHECK(ref && ref_aux && ref_dbias && out && got[0] && got[1] && gotb[0] && gotb[1]);
    gemm_reference(&x, 1, false, ref, ref_aux, ref_dbias);
    dev_buf dA = dev_copy(&x.A), dB = dev_copy(&x.B), dC = dev_copy(&x.C), dD = dev_copy(&x.D),
            dbias = dev_copy(&x.bias), ddb = dev_copy(&x.dbias);
    cml_gemm_desc d = x.desc;
    d.bias = g->bias ? dbias.data : NULL;
    d.aux = NULL;
    d.a_scale = d.b_scale = NULL;
    d.dbias = ddb.data;
    const void *dc = g->beta == 0.0f ? NULL : dC.data;
    CHECK(cml__gemm_f32_force_splits(want));
    const char *path = cml__gemm_cuda_path_name(gctx, &d, dD.data, dA.data, dB.data, dc);
    CHECK_MSG(strcmp(path, "f32") == 0, "%s: path %s, expected f32", what, path);
    const int splits = cml__gemm_f32_splits(gctx, &d);
    CHECK_MSG(splits == expected_splits(g->K, want) && splits > 1, "%s: %d splits", what, splits);
    size_t ws = 0;
    CHECK_OK(cml_gemm_workspace_size(gctx, &d, &ws));
    const size_t partials = (size_t)splits * (size_t)(Bt * M * round4(N)) * sizeof(float);
    CHECK_MSG(ws >= partials, "%s: workspace query %zu bytes < %zu of partials", what, ws, partials);
    if (dA.storage && dB.storage && dC.storage && dD.storage && ddb.storage && got[0] && got[1] && gotb[0] &&
        gotb[1]) {
        for (int run = 0; run < 2; run++) {
            poison(dD.storage, x.D.bytes);
            poison(ddb.storage, x.dbias.bytes);
            CHECK_OK(cml_gemm(gctx, &d, dD.data, dA.data, dB.data, dc));
            download(got[run], dD.storage, x.D.bytes);
            download(gotb[run], ddb.storage, x.dbias.bytes);
        }
        CHECK_MSG(memcmp(got[0], got[1], x.D.bytes) == 0, "%s: a repeat run differs", what);
        CHECK_MSG(memcmp(gotb[0], gotb[1], x.dbias.bytes) == 0, "%s: a repeat run's dbias differs", what);
        gemm_unpack(out, got[0] + ((char *)x.D.data - (char *)x.D.storage), g->d_dtype, Bt, M, N, d.ldd, d.stride_d);
        const double err = gemm_rel_error_rows(out, ref, Bt, M, N, 1);
        CHECK_MSG(err <= 1e-5, "%s: relative error %.3g", what, err);
        check_untouched(what, "D", &x.D, got[0], M, N, Bt, d.ldd, d.stride_d);
        gemm_unpack(out, gotb[0] + ((char *)x.dbias.data - (char *)x.dbias.storage), g->d_dtype, 1, Bt, M, M, Bt * M);
        const double errb = gemm_rel_error_rows(out, ref_dbias, 1, Bt, M, 1);
        CHECK_MSG(errb <= 1e-5, "%s: dbias relative error %.3g", what, errb);
    }
    CHECK(cml__gemm_f32_force_splits(0));
    dev_buf bufs[] = {dA, dB, dC, dD, dbias, ddb};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(bufs[i].storage, bufs[i].bytes);
    free(ref);
    free(ref_aux);
    free(ref_dbias);
    free(out);
    for (int i = 0; i < 2; i++) {
        free(got[i]);
        free(gotb[i]);
    }
    gemm_data_free(&x);
}

/* Split K forced (cml__gemm_f32_force_splits): short and odd K, every epilogue, every tile
 * configuration, batches; then through cml_gemm with dbias; then the estimate's own choice. */
static void test_split_k(void) {
    /* K shorter than the splits (one chunk), 33 (chunks of 16, 16, 1), 1025 (the last chunk 17 deep) */
    static const int64_t ks[] = {1, 7, 33, 1025};
    static const int wants[] = {2, 4, 8, 16};
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
        for (size_t w = 0; w < sizeof wants / sizeof wants[0]; w++) {
            CHECK(cml__gemm_f32_force_splits(wants[w]));
            for (int t = 0; t < 4; t++) {
                f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 37, 70, ks[k], 1);
                c.pad4 = (int64_t)(k + (size_t)t) % 3;
                c.offset = t % 2 ? 4 : 0;
                check_split_count(&c, wants[w]);
                run_case(&c, true);
            }
        }
    CHECK(expected_splits(7, 4) == 1 && expected_splits(33, 4) == 3 && expected_splits(1025, 8) == 8);
    /* every epilogue option over 4 splits of K = 1025, 2 batches; then f16 / bf16 outputs */
    static const cml_epilogue acts[] = {CML_EPILOGUE_NONE, CML_EPILOGUE_RELU, CML_EPILOGUE_GELU_TANH,
                                        CML_EPILOGUE_GELU_TANH_AUX, CML_EPILOGUE_DGELU_TANH};
    CHECK(cml__gemm_f32_force_splits(4));
    for (int t = 0; t < 4; t++)
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
            f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 67, 131, 1025, 2);
            c.pad4 = 1;
            c.g.epilogue = acts[a];
            c.g.alpha = 0.75f;
            c.g.beta = a % 2 ? 0.5f : 0.0f;
            c.g.c_aliases_d = a == 3; /* C = D: the sum kernel reads each C element before writing it */
            c.g.bias = a != 0;
            c.g.bias_axis = a % 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
            c.g.a_scale_mode = (cml_scale_mode)(a % 3);
            c.g.b_scale_mode = (cml_scale_mode)((a + (size_t)t) % 3);
            check_split_count(&c, 4);
            run_case(&c, true);
        }
    static const cml_dtype outs[] = {CML_F16, CML_BF16};
    for (int o = 0; o < 2; o++)
        for (int t = 0; t < 4; t++) {
            f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 130, 70, 700, 1);
            c.g.d_dtype = c.g.c_dtype = outs[o];
            c.g.beta = 1.0f;
            c.g.bias = true;
            c.g.epilogue = t % 2 ? CML_EPILOGUE_GELU_TANH_AUX : CML_EPILOGUE_RELU;
            run_case(&c, true);
        }
    /* every tile configuration split in 3, partial tiles on every edge, 2 batches, beta and bias */
    CHECK(cml__gemm_f32_force_splits(3));
    for (int i = 0; cml__gemm_f32_config_at(i) != NULL; i++) {
        CHECK(cml__gemm_f32_force_config(cml__gemm_f32_config_at(i)));
        for (int t = 0; t < 4; t++) {
            f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 257, 129, 333, 2);
            c.pad4 = t % 3;
            c.offset = t % 2 ? 4 : 0;
            c.g.beta = 0.5f;
            c.g.bias = true;
            check_split_count(&c, 3);
            run_case(&c, true);
        }
    }
    CHECK(cml__gemm_f32_force_config(NULL));
    /* batches: gaps and a broadcast operand; more than one launch (65535 / 2 batches each) */
    CHECK(cml__gemm_f32_force_splits(2));
    for (int t = 0; t < 4; t++) {
        f32_case c = plain(t & 1 ? CML_OP_T : CML_OP_N, t & 2 ? CML_OP_T : CML_OP_N, 70, 90, 600, 3);
        c.pad4 = 2;
        c.g.broadcast_a = t % 2 == 0;
        c.g.broadcast_b = t % 2 == 1;
        run_case(&c, true);
    }
    f32_case many = plain(CML_OP_N, CML_OP_T, 3, 5, 40, 65537);
    many.g.bias = true;
    check_split_count(&many, 2);
    run_case(&many, true);
    CHECK(cml__gemm_f32_force_splits(0));
    CHECK(!cml__gemm_f32_force_splits(17) && !cml__gemm_f32_force_splits(-1));
    /* through cml_gemm: dbias (its own partials first, in the same workspace), bias, beta */
    f32_case db = plain(CML_OP_T, CML_OP_N, 260, 132, 2100, 1);
    db.g.dbias = true;
    db.g.bias = true;
    db.g.beta = 0.25f;
    run_split_dbias(&db, 8);
    db = plain(CML_OP_N, CML_OP_N, 100, 36, 999, 1);
    db.g.dbias = true;
    run_split_dbias(&db, 5);
    /* the estimate: the GPT-2 output-projection weight gradient is split, a K = 768 shape never */
    cml_gemm_desc dw = cml_gemm_desc_f32(CML_OP_T, CML_OP_N, 768, 768, 8192, 1);
    cml_gemm_desc fwd = cml_gemm_desc_f32(CML_OP_N, CML_OP_T, 8192, 768, 768, 1);
    const int dw_splits = cml__gemm_f32_splits(gctx, &dw);
    printf("  768x768x8192 TN: %s, %d splits\n", cml__gemm_f32_config_name(gctx, &dw), dw_splits);
    CHECK_MSG(dw_splits > 1, "768x768x8192 TN is not split");
    CHECK(cml__gemm_f32_splits(gctx, &fwd) == 1);
    if (!under_sanitizer()) {
        f32_case c = plain(CML_OP_T, CML_OP_N, 768, 768, 8192, 1);
        run_case(&c, true);
    }
}

int main(void) {
    int rc = gpu_test_init(0x5eed32);
    if (rc) return rc;
    RUN(test_takes);
    RUN(test_shapes);
    RUN(test_forced_configs);
    RUN(test_epilogues);
    RUN(test_batches);
    RUN(test_split_k);
    return th_finish();
}
#endif
