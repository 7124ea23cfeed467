/* GPU tests of cml_gemm (src/kernels/cuda/gemm/): every case runs through the
 * dispatcher (whichever path it picks: sm90, f32 or simt) and, when that is
 * not the simt path, through cml__gemm_simt as well, each against the float64
 * reference of tests/gemm_ref.h computed from the same quantized inputs.
 *
 * Covered: shapes with 1, 7, 127, 1025, 4095 and K not a multiple of 64; odd
 * leading dims and data one element off alignment; all four op combinations;
 * f32, f32 with tf32 math, f16, bf16, e4m3, e5m2 inputs (and mixed ones) into
 * f32, f16 and bf16 outputs; every epilogue with bias per column and per row;
 * per-tensor and per-row/column scales; batches with a broadcast (stride 0)
 * operand; beta * C with C separate or in place; K = 0; the GELU pre-activation
 * saved by one GEMM and read back by the GELU-backward epilogue of the next;
 * dbias; grouped GEMM; and large shapes that the Hopper path takes (bf16
 * 1024^3, 4096 x 4096 x 512 with op_b N and T, 1025^3), checked against the
 * float64 reference on every 16th row and against the CPU path everywhere; and
 * shapes where that path splits K (few tiles, long K).
 *
 * Before every run the outputs are poisoned (0xFF: NaN), afterwards every
 * element outside the output matrices (padding, batch gaps, the elements
 * before an unaligned start) must still hold its old bytes, and a second run
 * must be bitwise identical. Bounds (norm-wise): f32 1e-5; f32 output from
 * 16-bit inputs 1e-4 (tensor cores add in f32 but not always with round to
 * nearest); tf32 1e-3; 16-bit outputs and fp8 inputs 1e-2. Exits 77
 * ("skipped") without a GPU. */
#include "gemm_ref.h"
#include "gpu_row_util.h"

#ifndef CML_HAVE_CUDA
int main(void) {
    printf("skipped: built without CUDA\n");
    return 77;
}
#else
#include "kernels/cuda/cuda_kernels.h"

static int path_counts[3];      /* sm90, f32, simt: what the dispatcher picked */
static double path_worst[3];    /* worst error / bound seen per path */
static int64_t cases_run;

static int path_index(const char *name) { return name[0] == 's' ? (name[1] == 'm' ? 0 : 2) : 1; }

static bool is_fp8(cml_dtype dt) { return dt == CML_F8E4M3 || dt == CML_F8E5M2; }

static double bound_for(const gemm_case *g) {
    if (g->d_dtype != CML_F32 || is_fp8(g->a_dtype) || is_fp8(g->b_dtype)) return 1e-2;
    /* tf32: the tensor cores keep 10 of an f32 operand's 23 mantissa bits (truncated), so one product can be off by
     * up to 2^-9 relative; over K >= 8 random terms the norm-wise error averages below 1e-3, a 1 x 1 x 1 product
     * measured 1.06e-3 (session 13) */
    if (g->math == CML_GEMM_MATH_TF32) return g->K < 8 ? 2e-3 : 1e-3;
    if (g->a_dtype != CML_F32 || g->b_dtype != CML_F32) return 1e-4;
    return 1e-5;
}

/* A device copy of a host buffer's whole storage (offset included). */
typedef struct dev_buf {
    void *storage, *data;
    size_t bytes;
} dev_buf;

static dev_buf dev_copy(const gemm_buf *h) {
    dev_buf d;
    d.bytes = h->bytes;
    d.storage = dev_alloc(h->bytes);
    CHECK(d.storage != NULL);
    if (d.storage) upload(d.storage, h->storage, h->bytes);
    d.data = d.storage ? (char *)d.storage + ((char *)h->data - (char *)h->storage) : NULL;
    return d;
}

/* Every element of buf outside its batch x M x N matrix (row stride ld, batch
 * stride stride) must still have the bytes of `before`. */
static void check_untouched(const char *what, const char *name, const gemm_buf *h, const void *after,
                            const void *before, int64_t batch, int64_t M, int64_t N, int64_t ld, int64_t stride) {
    const size_t es = cml_dtype_size(h->dtype);
    const int64_t off = (int64_t)(((const char *)h->data - (const char *)h->storage) / (ptrdiff_t)es);
    const int64_t total = (int64_t)(h->bytes / es);
    for (int64_t i = 0; i < total; i++) {
        int64_t idx = i - off;
        bool inside = false;
        if (idx >= 0) {
            int64_t b = stride > 0 ? idx / stride : 0, r = idx - b * stride;
            inside = b < batch && r / ld < M && r % ld < N;
        }
        if (!inside && memcmp((const char *)after + i * es, (const char *)before + i * es, es) != 0) {
            CHECK_MSG(false, "%s: %s element %lld (outside the matrix) was written", what, name, (long long)idx);
            return;
        }
    }
}

static void compare(const char *what, const char *name, const float *out, const double *ref, int64_t batch,
                    int64_t M, int64_t N, int64_t row_step, double bound, int path) {
    double err = gemm_rel_error_rows(out, ref, batch, M, N, row_step);
    if (path >= 0 && err / bound > path_worst[path]) path_worst[path] = err / bound;
    CHECK_MSG(err <= bound, "%s: %s relative error %.3g > %.3g", what, name, err, bound);
}

/* Runs x on the GPU twice, through the dispatcher or (direct_simt) cml__gemm_simt,
 * and checks D, aux and dbias against ref_* (from gemm_reference). D of the
 * first run goes to out_d (batch*M*N, packed). Returns the path index taken. */
static int run_on_gpu(gemm_data *x, const char *desc_str, bool direct_simt, int64_t row_step, const double *ref,
                      const double *ref_aux, const double *ref_dbias, float *out_d) {
    const gemm_case *g = &x->g;
    dev_buf A = dev_copy(&x->A), B = dev_copy(&x->B), C = dev_copy(&x->C), D = dev_copy(&x->D);
    dev_buf bias = dev_copy(&x->bias), aux = dev_copy(&x->aux), sa = dev_copy(&x->a_scale), sb = dev_copy(&x->b_scale);
    dev_buf dbias = dev_copy(&x->dbias);
    cml_gemm_desc d = x->desc;
    d.bias = d.bias ? bias.data : NULL;
    d.a_scale = d.a_scale ? (const float *)sa.data : NULL;
    d.b_scale = d.b_scale ? (const float *)sb.data : NULL;
    d.aux = d.aux ? aux.data : NULL;
    d.dbias = d.dbias && !direct_simt ? dbias.data : NULL; /* the dispatcher computes dbias, not the paths */
    const bool writes_aux = g->epilogue == CML_EPILOGUE_GELU_TANH_AUX;
    const void *c_arg = g->beta == 0.0f ? NULL : g->c_aliases_d ? D.data : C.data;
    const int path = direct_simt ? 2 : path_index(cml__gemm_cuda_path_name(gctx, &d, D.data, A.data, B.data, c_arg));
    char what[400];
    snprintf(what, sizeof what, "[%s] %s", direct_simt ? "simt direct" : path == 0 ? "sm90" : path == 1 ? "f32" : "simt",
             desc_str);
    const size_t es = cml_dtype_size(g->d_dtype);
    unsigned char *got[2][3]; /* [run][D, aux, dbias] */
    const gemm_buf *hb[3] = {&x->D, &x->aux, &x->dbias};
    const dev_buf *db[3] = {&D, &aux, &dbias};
    for (int run = 0; run < 2; run++) {
        /* poison what is written; D keeps C's values when they alias (restored each run) */
        if (g->c_aliases_d) upload(D.storage, x->D.storage, D.bytes);
        else poison(D.data, (size_t)x->D.elems * es);
        if (writes_aux) poison(aux.data, (size_t)x->aux.elems * es);
        if (d.dbias) poison(dbias.data, (size_t)x->dbias.elems * es);
        if (direct_simt) CHECK_OK(cml__gemm_simt(gctx, &d, D.data, A.data, B.data, c_arg));
        else CHECK_OK(cml_gemm(gctx, &d, D.data, A.data, B.data, c_arg));
        for (int k = 0; k < 3; k++) {
            got[run][k] = malloc(hb[k]->bytes);
            CHECK(got[run][k] != NULL);
            download(got[run][k], db[k]->storage, hb[k]->bytes);
        }
    }
    const double bound = bound_for(g);
    const size_t offb = (size_t)((char *)x->D.data - (char *)x->D.storage);
    gemm_unpack(out_d, got[0][0] + offb, g->d_dtype, g->batch, g->M, g->N, d.ldd, d.stride_d);
    compare(what, "D", out_d, ref, g->batch, g->M, g->N, row_step, bound, path);
    CHECK_MSG(memcmp(got[0][0], got[1][0], x->D.bytes) == 0, "%s: a repeat run's D differs", what);
    /* outside D: the poison (or, in place, the original bytes; the unaligned head is never poisoned) must survive */
    unsigned char *before = malloc(x->D.bytes);
    CHECK(before != NULL);
    memcpy(before, x->D.storage, x->D.bytes);
    if (!g->c_aliases_d) memset(before + offb, 0xFF, x->D.bytes - offb);
    check_untouched(what, "D", &x->D, got[0][0], before, g->batch, g->M, g->N, d.ldd, d.stride_d);
    free(before);
    if (writes_aux) {
        const size_t offa = (size_t)((char *)x->aux.data - (char *)x->aux.storage);
        float *o = malloc(sizeof(float) * (size_t)(g->batch * g->M * g->N));
        gemm_unpack(o, got[0][1] + offa, g->d_dtype, g->batch, g->M, g->N, d.ldaux, d.stride_aux);
        compare(what, "aux", o, ref_aux, g->batch, g->M, g->N, row_step, bound, path);
        CHECK_MSG(memcmp(got[0][1], got[1][1], x->aux.bytes) == 0, "%s: a repeat run's aux differs", what);
        free(o);
    }
    if (d.dbias) {
        const size_t offd = (size_t)((char *)x->dbias.data - (char *)x->dbias.storage);
        float *o = malloc(sizeof(float) * (size_t)(g->batch * g->M));
        for (int64_t i = 0; i < g->batch * g->M; i++) o[i] = cml_dtype_load(got[0][2] + offd, g->d_dtype, i);
        /* dbias sums the stored A values exactly: the f32 bound unless stored narrow */
        compare(what, "dbias", o, ref_dbias, g->batch, g->M, 1, row_step, g->d_dtype == CML_F32 ? 1e-5 : 1e-2, -1);
        CHECK_MSG(memcmp(got[0][2], got[1][2], x->dbias.bytes) == 0, "%s: a repeat run's dbias differs", what);
        free(o);
    }
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 3; k++) free(got[run][k]);
    dev_buf *all[] = {&A, &B, &C, &D, &bias, &aux, &sa, &sb, &dbias};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(all[i]->storage, all[i]->bytes);
    return path;
}

/* The whole check of one prepared case: the dispatcher, then cml__gemm_simt when
 * the dispatcher chose another path; with row_step > 1 (the float64 reference
 * on a subset of rows) every element is also compared with the CPU path. */
static void run_data(gemm_data *x, int64_t row_step) {
    const gemm_case *g = &x->g;
    char desc_str[320];
    gemm_case_str(g, desc_str, sizeof desc_str);
    const int64_t total = g->batch * g->M * g->N;
    double *ref = malloc(sizeof(double) * (size_t)total), *ref_aux = malloc(sizeof(double) * (size_t)total);
    double *ref_dbias = malloc(sizeof(double) * (size_t)(g->batch * g->M));
    float *out = malloc(sizeof(float) * (size_t)total);
    CHECK(ref && ref_aux && ref_dbias && out);
    gemm_reference(x, row_step, false, ref, ref_aux, ref_dbias);
    const int path = run_on_gpu(x, desc_str, false, row_step, ref, ref_aux, ref_dbias, out);
    path_counts[path]++;
    cases_run++;
    if (row_step > 1) {
        /* the CPU path (exact f32 products through OpenBLAS) on host copies; it writes aux and dbias of x */
        gemm_buf dcopy = gemm_buf_alloc(x->D.elems, 0, g->d_dtype);
        memcpy(dcopy.data, x->D.data, (size_t)x->D.elems * cml_dtype_size(g->d_dtype));
        const void *c = g->beta == 0 ? NULL : g->c_aliases_d ? dcopy.data : x->C.data;
        CHECK_OK(cml_gemm(cctx, &x->desc, dcopy.data, x->A.data, x->B.data, c));
        double *cpu = malloc(sizeof(double) * (size_t)total);
        for (int64_t b = 0; b < g->batch; b++)
            for (int64_t m = 0; m < g->M; m++)
                for (int64_t n = 0; n < g->N; n++)
                    cpu[(b * g->M + m) * g->N + n] =
                        cml_dtype_load(dcopy.data, g->d_dtype, b * x->desc.stride_d + m * x->desc.ldd + n);
        double err = th_rel_error(out, cpu, total);
        CHECK_MSG(err <= bound_for(g), "[vs CPU] %s: relative error %.3g > %.3g", desc_str, err, bound_for(g));
        free(cpu);
        gemm_buf_free(&dcopy);
    }
    if (path != 2) run_on_gpu(x, desc_str, true, row_step, ref, ref_aux, NULL, out);
    free(ref);
    free(ref_aux);
    free(ref_dbias);
    free(out);
}

static void run_case(const gemm_case *g, int64_t row_step) {
    gemm_data x;
    gemm_data_make(&x, g, &rng);
    run_data(&x, row_step);
    gemm_data_free(&x);
}

static void test_shapes(void) {
    static const int64_t mnk[][3] = {{1, 1, 1},      {7, 5, 3},     {1, 127, 1025}, {127, 33, 65},
                                     {64, 1025, 17}, {1025, 127, 129}, {4095, 7, 63}, {7, 4095, 200},
                                     {127, 129, 4095}, {33, 1, 7}};
    for (int s = 0; s < 10; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                gemm_case g = gemm_case_make((cml_op)ta, (cml_op)tb, mnk[s][0], mnk[s][1], mnk[s][2], 1);
                g.ld_pad = (s + ta) % 2 ? 3 : 0;
                g.offset = (s + tb) % 2;
                run_case(&g, 1);
            }
}

/* Every input dtype (and tf32) into every output dtype, all op combinations,
 * aligned (the fast paths can take it) and not. */
static void test_dtypes(void) {
    static const cml_dtype ins[] = {CML_F32, CML_F32, CML_F16, CML_BF16, CML_F8E4M3, CML_F8E5M2};
    static const cml_dtype outs[] = {CML_F32, CML_F16, CML_BF16};
    const int n_out = under_sanitizer() ? 1 : 3;
    for (int i = 0; i < 6; i++)
        for (int o = 0; o < n_out; o++)
            for (int ops = 0; ops < 4; ops++)
                for (int aligned = 0; aligned < 2; aligned++) {
                    gemm_case g = aligned ? gemm_case_make((cml_op)(ops & 1), (cml_op)(ops >> 1), 256, 264, 144, 1)
                                          : gemm_case_make((cml_op)(ops & 1), (cml_op)(ops >> 1), 129, 65, 77, 1);
                    g.a_dtype = g.b_dtype = ins[i];
                    g.math = i == 1 ? CML_GEMM_MATH_TF32 : CML_GEMM_MATH_DEFAULT;
                    g.d_dtype = outs[o];
                    g.ld_pad = aligned ? 0 : 1;
                    g.offset = aligned ? 0 : 1;
                    run_case(&g, 1);
                }
    /* mixed input dtypes (only the simt path takes them) */
    gemm_case g = gemm_case_make(CML_OP_T, CML_OP_N, 77, 91, 133, 2);
    g.a_dtype = CML_F8E4M3;
    g.b_dtype = CML_BF16;
    g.d_dtype = CML_BF16;
    run_case(&g, 1);
    g.a_dtype = CML_F32;
    g.b_dtype = CML_F16;
    g.d_dtype = CML_F32;
    run_case(&g, 1);
}

/* Every epilogue x bias (none, per column, per row) x output, with beta; bf16 aligned and f32 odd. */
static void test_epilogues(void) {
    static const cml_dtype outs[] = {CML_F32, CML_BF16, CML_F16};
    for (int epi = 0; epi <= CML_EPILOGUE_DGELU_TANH; epi++)
        for (int bias = 0; bias < 3; bias++)
            for (int o = 0; o < 3; o++)
                for (int aligned = 0; aligned < 2; aligned++) {
                    gemm_case g = aligned ? gemm_case_make(CML_OP_N, CML_OP_T, 192, 136, 200, 2)
                                          : gemm_case_make(CML_OP_T, CML_OP_N, 67, 45, 31, 2);
                    g.a_dtype = g.b_dtype = aligned ? CML_BF16 : CML_F32;
                    g.epilogue = (cml_epilogue)epi;
                    g.bias = bias > 0;
                    g.bias_axis = bias == 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
                    g.d_dtype = outs[o];
                    g.c_dtype = outs[(o + 1) % 3];
                    g.beta = o == 0 ? 0.0f : 0.5f;
                    g.alpha = 1.25f;
                    g.offset = aligned ? 0 : 1;
                    g.ld_pad = aligned ? 8 : 1; /* 8 bf16 = 16 bytes: still TMA-aligned */
                    run_case(&g, 1);
                }
}

/* The sm90 path's register epilogue with TMA stores takes 16-bit D with beta 0 and decides once a
 * tile what a fragment becomes (cml__sm90_tma_epilogue): bf16 with alpha 1 (no multiply), bf16 or
 * f16 scaled, or bias / ReLU / GELU. Each kind, with edge tiles, against the reference; on Hopper
 * each must have run on the sm90 path. */
static void test_tma_epilogues(void) {
    static const cml_epilogue acts[] = {CML_EPILOGUE_NONE, CML_EPILOGUE_RELU, CML_EPILOGUE_GELU_TANH};
    for (int o = 0; o < 2; o++)
        for (int a = 0; a < 2; a++)
            for (int act = 0; act < 3; act++)
                for (int bias = 0; bias < 3; bias++) {
                    if (under_sanitizer() && (act + bias) % 3 != 0) continue;
                    gemm_case g = gemm_case_make(CML_OP_N, CML_OP_T, 200, 264, 136, 1);
                    g.a_dtype = g.b_dtype = CML_BF16;
                    g.d_dtype = o ? CML_F16 : CML_BF16;
                    g.alpha = a ? -0.75f : 1.0f;
                    g.epilogue = acts[act];
                    g.bias = bias > 0;
                    g.bias_axis = bias == 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
                    const int before = path_counts[0];
                    run_case(&g, 1);
                    if (cml__cuda_arch(0) == 90)
                        CHECK_MSG(path_counts[0] == before + 1, "TMA epilogue case (D %s, alpha %g, act %d, bias %d) "
                                  "did not run on sm90", cml_dtype_name(g.d_dtype), (double)g.alpha, act, bias);
                }
}

/* D with room after each row (ldd > N): nothing past N may be written. The sm90 path stores D through TMA
 * (tf32 with f32 D, bf16 / f16 D) only where a row ends on 16 bytes, since TMA stores write whole 16-byte
 * chunks (session 13: f32 rows of N = 127 had element 127 overwritten); other N take the general epilogue.
 * Both kinds of N, every operand layout, the epilogue kinds, a K split with a cluster forced on one case. */
static void test_tma_store_padding(void) {
    static const int64_t shapes[][3] = {{7, 124, 3},     {127, 1028, 33}, {1025, 8, 127},  {129, 516, 2049},
                                        {200, 264, 136}, {64, 40, 1000},  {7, 127, 3},     {127, 1025, 33},
                                        {1025, 7, 127},  {129, 513, 2049}};
    static const cml_epilogue acts[] = {CML_EPILOGUE_NONE, CML_EPILOGUE_RELU, CML_EPILOGUE_GELU_TANH};
    const int n = under_sanitizer() ? 2 : (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < n; s++)
        for (int bf16 = 0; bf16 < 2; bf16++)
            for (int ops = 0; ops < 3; ops++) {
                gemm_case g = gemm_case_make(ops == 2 ? CML_OP_T : CML_OP_N, ops == 1 ? CML_OP_T : CML_OP_N,
                                             shapes[s][0], shapes[s][1], shapes[s][2], 1);
                if (bf16) g.a_dtype = g.b_dtype = g.d_dtype = CML_BF16;
                else g.math = CML_GEMM_MATH_TF32;
                const int64_t align = bf16 ? 8 : 4; /* elements in 16 bytes */
                g.ld_pad = align - g.N % align;     /* 1..align after each row: ldd stays a multiple of 16 bytes */
                g.alpha = s % 2 ? -0.75f : 1.0f;
                g.epilogue = acts[(s + ops) % 3];
                g.bias = (s + ops) % 2 == 1;
                g.bias_axis = s % 3 == 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
                if (s == 3 && ops == 0) {
                    const cml__gemm_sm90_config cfg = {256, 3, 2, 4, 128, 0, 0}; /* K split 3, cluster 2 */
                    cml__gemm_sm90_force_config(&cfg);
                }
                run_case(&g, 1);
                cml__gemm_sm90_force_config(NULL);
            }
}

static void test_scales(void) {
    static const cml_dtype ins[] = {CML_F8E4M3, CML_F8E5M2, CML_BF16, CML_F32};
    for (int i = 0; i < 4; i++)
        for (int sa = 0; sa < 3; sa++)
            for (int sb = 0; sb < 3; sb++) {
                gemm_case g = gemm_case_make(CML_OP_N, CML_OP_T, 128, 200, 256, 1); /* fp8's K-major layout */
                g.a_dtype = g.b_dtype = ins[i];
                g.d_dtype = (sa + sb) % 2 ? CML_BF16 : CML_F32;
                g.a_scale_mode = (cml_scale_mode)sa;
                g.b_scale_mode = (cml_scale_mode)sb;
                g.bias = sa == 1;
                g.epilogue = sb == 2 ? CML_EPILOGUE_GELU_TANH : CML_EPILOGUE_NONE;
                run_case(&g, 1);
            }
}

static void test_batched_beta_k0(void) {
    for (int t = 0; t < 8; t++) {
        gemm_case g = gemm_case_make((cml_op)(t & 1), (cml_op)((t >> 1) & 1), 96, 80, 64, 3);
        g.a_dtype = g.b_dtype = t < 4 ? CML_BF16 : CML_F32;
        g.broadcast_a = t % 3 == 0;
        g.broadcast_b = t % 3 == 1;
        g.beta = t % 2 ? 1.0f : -0.5f;
        g.c_aliases_d = t >= 4;
        g.offset = t == 7;
        g.ld_pad = t == 6 ? 5 : 0;
        run_case(&g, 1);
    }
    gemm_case g = gemm_case_make(CML_OP_N, CML_OP_N, 7, 9, 0, 2); /* K = 0: beta * C + bias */
    g.beta = 2.0f;
    g.bias = true;
    g.dbias = true;
    run_case(&g, 1);
    g = gemm_case_make(CML_OP_T, CML_OP_T, 130, 70, 0, 1); /* K = 0, beta 0: zeros through GELU */
    g.epilogue = CML_EPILOGUE_GELU_TANH;
    g.d_dtype = CML_BF16;
    run_case(&g, 1);
}

/* The forward saves z in aux; the backward GEMM reads it with DGELU. */
static void test_aux_round_trip(void) {
    for (int t = 0; t < 2; t++) {
        gemm_case fwd = gemm_case_make(CML_OP_N, CML_OP_T, 256, 192, 128, 1);
        fwd.a_dtype = fwd.b_dtype = t ? CML_F32 : CML_BF16;
        fwd.d_dtype = t ? CML_F32 : CML_BF16;
        fwd.epilogue = CML_EPILOGUE_GELU_TANH_AUX;
        fwd.bias = true;
        gemm_data x;
        gemm_data_make(&x, &fwd, &rng);
        /* run the forward on the GPU and keep its aux */
        dev_buf A = dev_copy(&x.A), B = dev_copy(&x.B), D = dev_copy(&x.D), bias = dev_copy(&x.bias),
                aux = dev_copy(&x.aux);
        cml_gemm_desc d = x.desc;
        d.bias = bias.data;
        d.aux = aux.data;
        poison(aux.data, (size_t)x.aux.elems * cml_dtype_size(fwd.d_dtype));
        CHECK_OK(cml_gemm(gctx, &d, D.data, A.data, B.data, NULL));
        gemm_case bwd = fwd;
        bwd.epilogue = CML_EPILOGUE_DGELU_TANH;
        bwd.bias = false;
        bwd.op_a = CML_OP_T; /* a different product of the same M x N */
        gemm_data y;
        gemm_data_make(&y, &bwd, &rng);
        CHECK(y.aux.bytes == x.aux.bytes);
        download(y.aux.storage, aux.storage, y.aux.bytes);
        run_data(&y, 1);
        /* and the saved z matches the forward's reference */
        double *ref = malloc(sizeof(double) * 256 * 192), *ref_aux = malloc(sizeof(double) * 256 * 192);
        float *out = malloc(sizeof(float) * 256 * 192);
        gemm_reference(&x, 1, false, ref, ref_aux, NULL);
        gemm_unpack(out, y.aux.data, fwd.d_dtype, 1, 256, 192, x.desc.ldaux, x.desc.stride_aux);
        double err = th_rel_error(out, ref_aux, 256 * 192);
        CHECK_MSG(err <= bound_for(&fwd), "aux round trip (%s): saved z relative error %.3g", cml_dtype_name(fwd.d_dtype), err);
        free(ref);
        free(ref_aux);
        free(out);
        dev_buf *all[] = {&A, &B, &D, &bias, &aux};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(all[i]->storage, all[i]->bytes);
        gemm_data_free(&x);
        gemm_data_free(&y);
    }
}

/* The Linear backward: dW = dY^T X with dbias = column sums of dY. */
static void test_dbias(void) {
    static const int64_t shapes[][3] = {{768, 256, 8192}, {33, 17, 1025}, {1, 5, 7}, {300, 64, 4095}};
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 3; t++) {
            if (under_sanitizer() && s == 0) continue;
            gemm_case g = gemm_case_make(t == 2 ? CML_OP_N : CML_OP_T, CML_OP_N, shapes[s][0], shapes[s][1], shapes[s][2],
                                         s == 1 ? 3 : 1);
            g.dbias = true;
            g.a_dtype = g.b_dtype = t == 1 ? CML_F32 : CML_BF16;
            g.d_dtype = t == 1 ? CML_F32 : CML_BF16;
            g.a_scale_mode = s == 3 ? CML_SCALE_VECTOR : CML_SCALE_NONE;
            g.broadcast_a = s == 1 && t == 0;
            g.offset = s == 1;
            run_case(&g, s == 0 ? 16 : 1);
        }
}

enum { G = 5, G_MAX = 20 };

/* One grouped launch of `count` problems of proto's types, scales, math and epilogue (problem 1 without a bias,
 * problem 2 with beta = 0.5: the TMA-store and general epilogues side by side), each checked against the float64
 * reference, its D poisoned first and a repeat run bitwise equal. */
static void run_grouped(const int64_t (*sizes)[3], int count, const gemm_case *proto) {
    gemm_data x[G_MAX];
    cml_gemm_desc descs[G_MAX];
    void *Ds[G_MAX];
    const void *As[G_MAX], *Bs[G_MAX], *Cs[G_MAX];
    dev_buf dA[G_MAX], dB[G_MAX], dC[G_MAX], dD[G_MAX], dbias[G_MAX], dsa[G_MAX], dsb[G_MAX];
    for (int i = 0; i < count; i++) {
        gemm_case g = *proto;
        g.M = sizes[i][0], g.N = sizes[i][1], g.K = sizes[i][2], g.batch = 1;
        g.bias = i != 1;
        g.beta = i == 2 ? 0.5f : 0.0f;
        gemm_data_make(&x[i], &g, &rng);
        dA[i] = dev_copy(&x[i].A);
        dB[i] = dev_copy(&x[i].B);
        dC[i] = dev_copy(&x[i].C);
        dD[i] = dev_copy(&x[i].D);
        dbias[i] = dev_copy(&x[i].bias);
        dsa[i] = dev_copy(&x[i].a_scale);
        dsb[i] = dev_copy(&x[i].b_scale);
        descs[i] = x[i].desc;
        descs[i].bias = g.bias ? dbias[i].data : NULL;
        descs[i].a_scale = descs[i].a_scale ? (const float *)dsa[i].data : NULL;
        descs[i].b_scale = descs[i].b_scale ? (const float *)dsb[i].data : NULL;
        Ds[i] = dD[i].data;
        As[i] = dA[i].data;
        Bs[i] = dB[i].data;
        Cs[i] = g.beta != 0 ? dC[i].data : NULL;
    }
    unsigned char *first[G_MAX];
    for (int run = 0; run < 2; run++) {
        for (int i = 0; i < count; i++) poison(dD[i].data, (size_t)x[i].D.elems * cml_dtype_size(proto->d_dtype));
        CHECK_OK(cml_gemm_grouped(gctx, descs, count, Ds, As, Bs, Cs));
        for (int i = 0; i < count; i++) {
            unsigned char *h = malloc(x[i].D.bytes);
            CHECK(h != NULL);
            download(h, dD[i].storage, x[i].D.bytes);
            if (run == 0) {
                first[i] = h;
                continue;
            }
            CHECK_MSG(memcmp(h, first[i], x[i].D.bytes) == 0, "grouped problem %d: a repeat run's D differs", i);
            free(h);
        }
    }
    char desc_str[320];
    for (int i = 0; i < count; i++) {
        const gemm_case *g = &x[i].g;
        int64_t n = g->M * g->N;
        double *ref = malloc(sizeof(double) * (size_t)n);
        float *out = malloc(sizeof(float) * (size_t)n);
        gemm_reference(&x[i], 1, false, ref, NULL, NULL);
        gemm_unpack(out, first[i] + ((char *)x[i].D.data - (char *)x[i].D.storage), g->d_dtype, 1, g->M, g->N,
                    descs[i].ldd, 0);
        double err = th_rel_error(out, ref, n), bound = bound_for(g);
        CHECK_MSG(err <= bound, "grouped problem %d of %d (%s): relative error %.3g > %.3g", i, count,
                  gemm_case_str(g, desc_str, sizeof desc_str), err, bound);
        free(ref);
        free(out);
        free(first[i]);
        dev_buf *all[] = {&dA[i], &dB[i], &dC[i], &dD[i], &dbias[i], &dsa[i], &dsb[i]};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) dev_free(all[k]->storage, all[k]->bytes);
        gemm_data_free(&x[i]);
    }
}

static void test_grouped(void) {
    gemm_case bf16 = gemm_case_make(CML_OP_N, CML_OP_T, 1, 1, 1, 1);
    bf16.a_dtype = bf16.b_dtype = bf16.d_dtype = CML_BF16;
    bf16.epilogue = CML_EPILOGUE_RELU;
    /* K = 5 (lda not 16-byte aligned) and K = 0 send every problem through cml_gemm one by one */
    static const int64_t mixed[G][3] = {{256, 128, 64}, {1, 7, 5}, {127, 1025, 65}, {512, 512, 512}, {64, 64, 0}};
    /* every problem taken by the sm90 path (K a multiple of 8): one grouped launch on Hopper, with
     * different k_blocks per problem, odd tile rows (cluster pairs half outside M) and N tails */
    static const int64_t hopper[G][3] = {{256, 128, 64}, {1, 8, 8}, {127, 1025, 72}, {512, 512, 512}, {300, 700, 1000}};
    /* more cluster tiles (107) than clusters (66) and short main loops: a CTA runs a tile of problem
     * 0 (TMA-store epilogue) and then one of problem 2 (beta = 0.5: the general epilogue), which
     * must not write its staging over blocks the first tile's stores still read */
    static const int64_t paths[G][3] = {{2048, 2048, 64}, {1, 8, 8}, {1024, 2048, 64}, {512, 512, 64}, {300, 700, 72}};
    /* one K for all: the balanced grid (108 cluster tiles in 2 rounds: 54 clusters, not 66) */
    static const int64_t same_k[G][3] = {{2048, 2048, 64}, {256, 512, 64}, {1024, 2048, 64}, {512, 512, 64}, {300, 700, 64}};
    run_grouped(mixed, G, &bf16);
    run_grouped(hopper, G, &bf16);
    run_grouped(paths, G, &bf16);
    run_grouped(same_k, G, &bf16);
    /* more problems than the kernel's parameters hold (16): the problems' table in global memory; sizes in no order,
     * so that the launch's largest-first order differs from the caller's */
    int64_t many[G_MAX][3];
    for (int i = 0; i < G_MAX; i++) {
        many[i][0] = 64 + 97 * ((i * 7) % G_MAX);
        many[i][1] = 128 + 64 * (i % 3);
        many[i][2] = 64 * (1 + i % 4);
    }
    run_grouped((const int64_t(*)[3])many, G_MAX, &bf16);
    run_grouped((const int64_t(*)[3])many, 16, &bf16); /* exactly the parameters' 16 */
    /* fp8 with tensor scales (the epilogue's scale worked out by the grouped kernel's producer) into bf16 and f16, and
     * tf32 into f32: K a multiple of 16, N = 1032 (its rows not 16-byte aligned for f16 / bf16 D: the general
     * epilogue) beside TMA-stored ones */
    static const int64_t fp8[G][3] = {{256, 128, 64}, {1, 16, 16}, {127, 1032, 80}, {512, 512, 512}, {300, 704, 1008}};
    gemm_case e4m3 = gemm_case_make(CML_OP_N, CML_OP_T, 1, 1, 1, 1);
    e4m3.a_dtype = e4m3.b_dtype = CML_F8E4M3;
    e4m3.a_scale_mode = e4m3.b_scale_mode = CML_SCALE_TENSOR;
    e4m3.d_dtype = CML_BF16;
    run_grouped(fp8, G, &e4m3);
    run_grouped((const int64_t(*)[3])many, G_MAX, &e4m3);
    e4m3.d_dtype = CML_F16;
    e4m3.epilogue = CML_EPILOGUE_RELU;
    run_grouped(fp8, G, &e4m3);
    gemm_case tf32 = gemm_case_make(CML_OP_N, CML_OP_T, 1, 1, 1, 1);
    tf32.math = CML_GEMM_MATH_TF32;
    run_grouped(fp8, G, &tf32);
}

/* Shapes the Hopper path takes: checked on every 16th row against float64 and everywhere against the CPU. */
static void test_large(void) {
    if (under_sanitizer()) return;
    gemm_case g = gemm_case_make(CML_OP_N, CML_OP_T, 1024, 1024, 1024, 1);
    g.a_dtype = g.b_dtype = g.d_dtype = CML_BF16;
    run_case(&g, 16);
    g.op_b = CML_OP_N;
    run_case(&g, 16);
    for (int tb = 0; tb < 2; tb++) {
        g = gemm_case_make(CML_OP_N, (cml_op)tb, 4096, 4096, 512, 1);
        g.a_dtype = g.b_dtype = CML_BF16;
        g.d_dtype = CML_BF16;
        g.bias = true;
        g.epilogue = CML_EPILOGUE_GELU_TANH;
        run_case(&g, 16);
    }
    g = gemm_case_make(CML_OP_N, CML_OP_T, 1025, 1025, 1025, 1);
    g.a_dtype = g.b_dtype = CML_BF16;
    run_case(&g, 16);
    g = gemm_case_make(CML_OP_N, CML_OP_N, 1024, 1024, 1024, 1);
    g.a_dtype = g.b_dtype = CML_F32;
    run_case(&g, 16);
    g.math = CML_GEMM_MATH_TF32; /* tf32 op_b N: B is transposed to K-major first */
    run_case(&g, 16);
    g.op_b = CML_OP_T;
    run_case(&g, 16);
    g = gemm_case_make(CML_OP_N, CML_OP_T, 2048, 2048, 2048, 1);
    g.a_dtype = g.b_dtype = CML_F8E4M3;
    g.d_dtype = CML_BF16;
    g.a_scale_mode = g.b_scale_mode = CML_SCALE_TENSOR;
    run_case(&g, 32);
}

/* Shapes with too few tiles to fill the GPU, where the Hopper path splits K and adds the f32
 * partials in a second kernel; every epilogue the second kernel applies (bias, GELU with the
 * saved pre-activation, beta * C, scales, dbias beside it). Fails if the sm90 path is there
 * but split none of them. */
static void test_split_k(void) {
    int split = 0;
    for (int c = 0; c < 5; c++) {
        if (under_sanitizer() && c == 0) continue;
        gemm_case g;
        if (c == 0) { /* a GPT-2 weight gradient: dW = dY^T X with dbias */
            g = gemm_case_make(CML_OP_T, CML_OP_N, 768, 768, 8192, 1);
            g.dbias = true;
        } else if (c == 1) {
            g = gemm_case_make(CML_OP_N, CML_OP_T, 200, 136, 4095, 1);
            g.bias = true;
            g.epilogue = CML_EPILOGUE_GELU_TANH;
        } else if (c == 2) {
            g = gemm_case_make(CML_OP_T, CML_OP_N, 7, 9, 3000, 3);
            g.bias = true;
            g.bias_axis = CML_BIAS_PER_ROW;
            g.beta = 0.5f;
            g.c_dtype = CML_F32;
        } else if (c == 3) {
            g = gemm_case_make(CML_OP_N, CML_OP_N, 64, 96, 1000, 2);
            g.epilogue = CML_EPILOGUE_GELU_TANH_AUX;
        } else {
            g = gemm_case_make(CML_OP_N, CML_OP_T, 128, 128, 2048, 1);
            g.a_dtype = g.b_dtype = CML_F8E4M3;
            g.a_scale_mode = g.b_scale_mode = CML_SCALE_TENSOR;
        }
        if (c < 4) g.a_dtype = g.b_dtype = CML_BF16;
        g.d_dtype = c == 2 ? CML_F32 : CML_BF16;
        cml_gemm_desc d = cml_gemm_desc_init(g.op_a, g.op_b, g.M, g.N, g.K, g.batch, g.a_dtype, g.d_dtype);
        if (cml__gemm_sm90_workspace_size(gctx, &d) > 0) split++;
        run_case(&g, c == 0 ? 16 : 1);
    }
    printf("  %d cases split K\n", split);
    if (cml__cuda_arch(0) == 90) CHECK_MSG(split >= 3, "the sm90 path split K in %d of the cases", split);
}

/* Every configuration the tuned table may name (tile widths, K splits, tile orders), forced
 * through cml__gemm_sm90_force_config on shapes with edge tiles; and 16-bit operands that break
 * TMA's rules (odd leading dimensions, offset pointers), which the path repacks K-major. */
static void test_sm90_configs(void) {
    if (cml__cuda_arch(0) != 90) {
        printf("  (not an sm_90 device: skipped)\n");
        return;
    }
    static const int widths[] = {256, 192, 160, 128}, splits[] = {1, 2, 3, 7}, group_ms[] = {1, 4}, clusters[] = {1, 2};
    int forced = 0;
    for (int s = 0; s < 3; s++) {
        gemm_case g = s == 0   ? gemm_case_make(CML_OP_N, CML_OP_T, 200, 450, 640, 1)
                      : s == 1 ? gemm_case_make(CML_OP_T, CML_OP_N, 257, 130, 520, 2)
                               : gemm_case_make(CML_OP_N, CML_OP_N, 130, 200, 1000, 1);
        g.a_dtype = g.b_dtype = s == 2 ? CML_F32 : CML_BF16;
        g.math = s == 2 ? CML_GEMM_MATH_TF32 : CML_GEMM_MATH_DEFAULT;
        g.d_dtype = s == 2 ? CML_F32 : CML_BF16;
        if (s == 0) {
            g.bias = true;
            g.epilogue = CML_EPILOGUE_GELU_TANH;
        }
        const cml_gemm_desc d = cml_gemm_desc_init(g.op_a, g.op_b, g.M, g.N, g.K, g.batch, g.a_dtype, g.d_dtype);
        cml_gemm_desc dm = d;
        dm.math = g.math;
        for (int w = 0; w < 4; w++)
            for (int k = 0; k < 4; k++)
                for (int m = 0; m < 2; m++) {
                    /* 64-row tiles (16-bit only) with the second cluster/group choice */
                    const cml__gemm_sm90_config cfg = {widths[w], splits[k], clusters[m], group_ms[m], m ? 64 : 128, 0, 0};
                    if (!cml__gemm_sm90_config_valid(&dm, &cfg) || (under_sanitizer() && (k > 1 || m > 0))) continue;
                    cml__gemm_sm90_force_config(&cfg);
                    const int before = path_counts[0];
                    run_case(&g, 1);
                    CHECK_MSG(path_counts[0] == before + 1, "forced config %dx%dx%d c%d g%d did not run on sm90",
                              cfg.rows, cfg.bn, cfg.splits, cfg.cluster, cfg.group_m);
                    forced++;
                    if (cfg.bn == 192 && cfg.rows == 128) { /* these few tiles take the 5-stage ring: also 4 */
                        cml__gemm_sm90_force_deep(0);
                        const unsigned long long deep_before = cml__gemm_sm90_deep_launches();
                        run_case(&g, 1);
                        CHECK_MSG(cml__gemm_sm90_deep_launches() == deep_before,
                                  "forced config %dx%dx%d: the 5-stage ring ran while forced off", cfg.rows, cfg.bn,
                                  cfg.splits);
                        cml__gemm_sm90_force_deep(-1);
                        forced++;
                    }
                }
        cml__gemm_sm90_force_config(NULL);
    }
    printf("  %d forced configurations\n", forced);
    CHECK_MSG(forced >= (under_sanitizer() ? 8 : 40), "only %d configurations were valid", forced);
    /* the 192-wide tile's 5-stage ring (at most 2 tiles a CTA, gemm_sm90.cu) with long K: every op
     * pair (TMA-aligned, so none is repacked), clusters of 1 and 2, a K split, edge tiles, a batch,
     * bias + GELU; each must have launched it */
    static const int64_t deep[][7] = {/* op_a, op_b, M, N, K, splits, cluster */
                                      {0, 1, 200, 450, 2104, 1, 1},
                                      {1, 0, 264, 400, 2600, 1, 2},
                                      {0, 0, 300, 200, 4104, 2, 1},
                                      {1, 1, 136, 392, 2056, 1, 2}};
    for (int i = 0; i < 4; i++) {
        if (under_sanitizer() && i > 1) continue;
        gemm_case g = gemm_case_make((cml_op)deep[i][0], (cml_op)deep[i][1], deep[i][2], deep[i][3], deep[i][4],
                                     i == 1 ? 2 : 1);
        g.a_dtype = g.b_dtype = g.d_dtype = CML_BF16;
        if (i == 0) {
            g.bias = true;
            g.epilogue = CML_EPILOGUE_GELU_TANH;
        }
        const cml__gemm_sm90_config cfg = {192, (int)deep[i][5], (int)deep[i][6], 16, 128, 0, 0};
        cml__gemm_sm90_force_config(&cfg);
        const unsigned long long before = cml__gemm_sm90_deep_launches();
        run_case(&g, 1);
        CHECK_MSG(cml__gemm_sm90_deep_launches() > before,
                  "%lldx%lldx%lld (192 wide, %lld splits, c%lld) did not run the 5-stage ring", (long long)g.M,
                  (long long)g.N, (long long)g.K, (long long)deep[i][5], (long long)deep[i][6]);
    }
    cml__gemm_sm90_force_config(NULL);
    /* the balanced persistent grid (gemm_sm90.cu, balanced_grid): 67 problems of one cluster tile each (128 x 256
     * tiles, clusters of 2, M = 256) on at most sms / 2 clusters take the fewest clusters that keep the rounds (68
     * CTAs in 2 rounds on 132 SMs, not 132 CTAs); every problem's D still checked against the CPU */
    {
        gemm_case g = gemm_case_make(CML_OP_N, CML_OP_N, 256, 256, 72, 67);
        g.a_dtype = g.b_dtype = g.d_dtype = CML_BF16;
        const cml__gemm_sm90_config cfg = {256, 1, 2, 8, 128, 0, 0};
        cml__gemm_sm90_force_config(&cfg);
        run_case(&g, 1);
        cml__gemm_sm90_force_config(NULL);
        const char *mode = getenv("CML_SM90_GRID"); /* "full": the grid before session 29 */
        const int most = cml__cuda_sm_count(0) / 2, rounds = (67 + most - 1) / most;
        const int expected = 2 * (mode && strcmp(mode, "full") == 0 ? (67 < most ? 67 : most) : (67 + rounds - 1) / rounds);
        int grid = 0, cluster = 0, cluster_n = 0;
        cml__gemm_sm90_last_launch(&grid, &cluster, &cluster_n);
        CHECK_MSG(cluster == 2 && grid == expected,
                  "67 cluster tiles on %d clusters at most: launched %d CTAs in clusters of %d, expected %d", most, grid,
                  cluster, expected);
    }
    for (int ops = 0; ops < 4; ops++) { /* repacked operands: still the sm90 path */
        gemm_case g = gemm_case_make((cml_op)(ops & 1), (cml_op)(ops >> 1), 129, 65, 77, 2);
        g.a_dtype = g.b_dtype = g.d_dtype = CML_BF16;
        g.ld_pad = 1;
        g.offset = 1;
        const int before = path_counts[0];
        run_case(&g, 1);
        CHECK_MSG(path_counts[0] == before + 1, "unaligned bf16 ops %d did not run on sm90", ops);
    }
}

/* The 128-row ping-pong schedule (cml__gemm_sm90_config.pingpong; gemm_sm90_kernel.cuh PINGPONG = 2): each consumer
 * warpgroup a whole tile, the two alternating, one's epilogue under the other's main loop. Forced 192 and 128 wide,
 * clusters of 1 and 2, every op pair, over batches of 4 so that each CTA's consumers take several turns (2-6 tiles a
 * CTA on 132 SMs), with edge tiles, K not a multiple of 64, bias + GELU and fp16; each must have run that kernel
 * (its launch counter); tf32 NT (K-major operands) 128 wide likewise. f32 D with beta * C (no TMA stores) must run
 * the cooperative kernel instead. A K split, 256-wide or 64-row tiles and 192-wide tf32 must be refused. */
static void test_sm90_pingpong(void) {
    if (cml__cuda_arch(0) != 90) {
        printf("  (not an sm_90 device: skipped)\n");
        return;
    }
    static const int64_t cases[][5] = {/* op_a, op_b, M, N, K */
                                       {0, 1, 1100, 1032, 136},
                                       {1, 0, 700, 904, 200},
                                       {0, 0, 610, 1000, 72},
                                       {1, 1, 900, 520, 264}};
    static const int widths[] = {192, 128};
    int forced = 0;
    for (int i = 0; i < 4; i++)
        for (int w = 0; w < 2; w++)
            for (int cl = 1; cl <= 2; cl++) {
                if (under_sanitizer() && (i + w + cl) % 2 != 0) continue;
                gemm_case g = gemm_case_make((cml_op)cases[i][0], (cml_op)cases[i][1], cases[i][2], cases[i][3],
                                             cases[i][4], 4);
                g.a_dtype = g.b_dtype = g.d_dtype = i == 3 ? CML_F16 : CML_BF16;
                g.tma_strides = true;
                if (i == 0) {
                    g.bias = true;
                    g.epilogue = CML_EPILOGUE_GELU_TANH;
                }
                if (i == 2) {
                    g.d_dtype = g.c_dtype = CML_F32;
                    g.beta = 0.5f;
                }
                const cml_gemm_desc d =
                    cml_gemm_desc_init(g.op_a, g.op_b, g.M, g.N, g.K, g.batch, g.a_dtype, g.d_dtype);
                const cml__gemm_sm90_config cfg = {widths[w], 1, cl, 8, 128, 1, 0};
                CHECK_MSG(cml__gemm_sm90_config_valid(&d, &cfg), "ping-pong %d wide, c%d refused", widths[w], cl);
                cml__gemm_sm90_force_config(&cfg);
                const int before = path_counts[0];
                const unsigned long long pp_before = cml__gemm_sm90_pingpong_launches();
                run_case(&g, 5);
                CHECK_MSG(path_counts[0] == before + 1, "ping-pong %d wide c%d: case %d did not run on sm90",
                          widths[w], cl, i);
                /* run_case launches twice (a repeat run checks the bits) */
                const unsigned long long pp_runs = cml__gemm_sm90_pingpong_launches() - pp_before;
                CHECK_MSG(i == 2 ? pp_runs == 0 : pp_runs == 2, "ping-pong %d wide c%d, case %d: %llu launches of it",
                          widths[w], cl, i, pp_runs);
                forced++;
            }
    for (int cl = 1; cl <= 2; cl++) { /* tf32, K-major operands as stored: no transposes, no register operand */
        gemm_case g = gemm_case_make(CML_OP_N, CML_OP_T, 900, 1000, 200, 4);
        g.math = CML_GEMM_MATH_TF32;
        g.tma_strides = true;
        g.bias = cl == 2;
        const cml__gemm_sm90_config cfg = {128, 1, cl, 8, 128, 1, 0};
        cml__gemm_sm90_force_config(&cfg);
        const unsigned long long pp_before = cml__gemm_sm90_pingpong_launches();
        run_case(&g, 5);
        CHECK_MSG(cml__gemm_sm90_pingpong_launches() - pp_before == 2, "tf32 ping-pong c%d did not run it", cl);
        forced++;
    }
    cml__gemm_sm90_force_config(NULL);
    printf("  %d forced ping-pong configurations\n", forced);
    const cml_gemm_desc d = cml_gemm_desc_init(CML_OP_N, CML_OP_T, 1024, 1024, 1024, 1, CML_BF16, CML_BF16);
    static const cml__gemm_sm90_config refused[] = {
        {192, 2, 1, 8, 128, 1, 0}, {256, 1, 1, 8, 128, 1, 0}, {128, 1, 1, 8, 64, 1, 0}, {128, 1, 1, 8, 128, 2, 0}};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(!cml__gemm_sm90_config_valid(&d, &refused[i]), "ping-pong configuration %d accepted", i);
    cml_gemm_desc f = cml_gemm_desc_f32(CML_OP_N, CML_OP_T, 1024, 1024, 1024, 1);
    f.math = CML_GEMM_MATH_TF32;
    const cml__gemm_sm90_config tf = {128, 1, 1, 8, 128, 1, 0}, tf192 = {192, 1, 1, 8, 128, 1, 0};
    CHECK_MSG(cml__gemm_sm90_config_valid(&f, &tf), "tf32 ping-pong refused");
    CHECK_MSG(!cml__gemm_sm90_config_valid(&f, &tf192), "192-wide tf32 ping-pong accepted");
}

/* The 160-wide tile (16-bit, 128 rows, cooperative; the MLP weight gradients' 120-SM form): wgmma n160, an N-major B
 * loaded as three 64-column blocks (the third one half past the tile), D stored by TMA in 32-column blocks (64-byte
 * swizzle) or by elements. Forced for every op pair, clusters of 1 and 2, clusters of 4 as a column of tiles (N-major
 * B shared four ways) and as a 2 x 2 block (TN: A shared along the tile row too), with edge tiles in M and N (cluster
 * tiles past M or N), K not a multiple of 64, a batch, bias + GELU, fp16, f32 D with beta * C, a K split, and D rows
 * that TMA cannot store (N = 150, 777). */
static void test_sm90_wide160(void) {
    if (cml__cuda_arch(0) != 90) {
        printf("  (not an sm_90 device: skipped)\n");
        return;
    }
    static const int64_t cases[][7] = {/* op_a, op_b, M, N, K, batch, splits */
                                       {1, 0, 304, 1000, 1000, 1, 1},
                                       {0, 1, 257, 150, 520, 2, 1},
                                       {0, 0, 130, 330, 2100, 1, 3},
                                       {1, 1, 200, 480, 72, 1, 1},
                                       {1, 0, 696, 3000, 1000, 1, 1},
                                       {0, 0, 520, 800, 300, 2, 1},
                                       {1, 0, 1000, 776, 200, 1, 1},
                                       {1, 0, 300, 777, 200, 1, 1}};
    static const int clusters[][2] = {{1, 0}, {2, 0}, {4, 0}, {4, 2}}; /* CTAs, cluster_n */
    int forced = 0;
    for (int i = 0; i < 8; i++)
        for (int cl = 0; cl < 4; cl++) {
            if (under_sanitizer() && (i + cl) % 2 != 0) continue;
            if (clusters[cl][0] == 4 && (cases[i][1] != 0 || cases[i][6] != 1)) continue; /* N-major B, no split */
            if (clusters[cl][1] == 2 && cases[i][0] != 1) continue;                         /* 2 x 2: TN */
            gemm_case g = gemm_case_make((cml_op)cases[i][0], (cml_op)cases[i][1], cases[i][2], cases[i][3],
                                         cases[i][4], cases[i][5]);
            g.a_dtype = g.b_dtype = g.d_dtype = i == 3 || i == 6 ? CML_F16 : CML_BF16;
            g.tma_strides = true;
            if (i == 0) {
                g.bias = true;
                g.epilogue = CML_EPILOGUE_GELU_TANH;
            } else if (i == 2) {
                g.d_dtype = g.c_dtype = CML_F32;
                g.beta = 0.5f;
            } else if (i == 6) { /* beta * C: D stored by elements */
                g.c_dtype = CML_F16;
                g.beta = -0.5f;
            }
            const cml__gemm_sm90_config cfg = {160, (int)cases[i][6], clusters[cl][0], 8, 128, 0, clusters[cl][1]};
            const cml_gemm_desc d = cml_gemm_desc_init(g.op_a, g.op_b, g.M, g.N, g.K, g.batch, g.a_dtype, g.d_dtype);
            CHECK_MSG(cml__gemm_sm90_config_valid(&d, &cfg), "160 wide, case %d, cluster %d refused", i, cl);
            cml__gemm_sm90_force_config(&cfg);
            const int before = path_counts[0];
            run_case(&g, 1);
            CHECK_MSG(path_counts[0] == before + 1, "160 wide, cluster %d: case %d did not run on sm90", cl, i);
            /* case 7's operands are repacked for TMA (M, N not multiples of 8): K-major, so clusters of 4 fall back
             * to a column of 4 (2 x 2 needs an M-major A) or to single CTAs (a K-major B) */
            const int want = i == 7 && clusters[cl][0] == 4 ? 1 : clusters[cl][0];
            const int want_n = want == 4 && clusters[cl][1] == 2 ? 2 : 1;
            int grid = 0, cluster = 0, cluster_n = 0;
            cml__gemm_sm90_last_launch(&grid, &cluster, &cluster_n);
            CHECK_MSG(cluster == want && cluster_n == want_n && grid > 0 && grid % cluster == 0 &&
                          grid <= cml__cuda_sm_count(0),
                      "160 wide, case %d: launched %d CTAs in clusters of %d (%d columns), expected %d (%d)", i, grid,
                      cluster, cluster_n, want, want_n);
            forced++;
        }
    cml__gemm_sm90_force_config(NULL);
    printf("  %d forced 160-wide cases\n", forced);
    /* the estimate takes the form for GPT-2's MLP weight gradients at any token count, and nowhere else here */
    if (cml__cuda_sm_count(0) >= 132) {
        static const int64_t picks[][5] = {/* op_a, M, N, K, expected cluster_n (0: not 160 wide) */
                                           {1, 3072, 768, 8192, 1}, {1, 768, 3072, 8192, 2}, {1, 3072, 768, 1024, 1},
                                           {1, 768, 3072, 4096, 2},  {1, 2304, 768, 8192, 0}, {1, 768, 768, 8192, 0},
                                           {0, 3072, 768, 8192, 0},  {1, 4096, 1024, 8192, 0}};
        for (int i = 0; i < 8; i++) {
            const cml_gemm_desc e = cml_gemm_desc_init((cml_op)picks[i][0], CML_OP_N, picks[i][1], picks[i][2],
                                                       picks[i][3], 1, CML_BF16, CML_BF16);
            const cml__gemm_sm90_config c = cml__gemm_sm90_estimate_config(gctx, &e);
            const int got = c.bn == 160 && c.cluster == 4 ? (c.cluster_n == 2 ? 2 : 1) : 0;
            CHECK_MSG(got == picks[i][4], "estimate for %c%c %lldx%lldx%lld: %d wide, cluster %d (%d columns)",
                      picks[i][0] ? 'T' : 'N', 'N', (long long)picks[i][1], (long long)picks[i][2],
                      (long long)picks[i][3], c.bn, c.cluster, c.cluster_n);
        }
    }
    const cml_gemm_desc nt = cml_gemm_desc_init(CML_OP_N, CML_OP_T, 1024, 1024, 1024, 1, CML_BF16, CML_BF16);
    const cml_gemm_desc nn = cml_gemm_desc_init(CML_OP_N, CML_OP_N, 1024, 1024, 1024, 1, CML_BF16, CML_BF16);
    const cml_gemm_desc tn = cml_gemm_desc_init(CML_OP_T, CML_OP_N, 1024, 1024, 1024, 1, CML_BF16, CML_BF16);
    static const cml__gemm_sm90_config refused_nt[] = {{160, 1, 1, 8, 64, 0, 0}, {160, 1, 1, 8, 128, 1, 0},
                                                       {160, 1, 4, 8, 128, 0, 0}};
    for (int i = 0; i < 3; i++)
        CHECK_MSG(!cml__gemm_sm90_config_valid(&nt, &refused_nt[i]), "NT 160-wide configuration %d accepted", i);
    static const cml__gemm_sm90_config refused_tn[] = {{160, 2, 4, 8, 128, 0, 0}, {192, 1, 4, 8, 128, 0, 0},
                                                       {160, 1, 3, 8, 128, 0, 0}, {160, 1, 2, 8, 128, 0, 2}};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(!cml__gemm_sm90_config_valid(&tn, &refused_tn[i]), "TN configuration %d accepted", i);
    const cml__gemm_sm90_config square = {160, 1, 4, 8, 128, 0, 2};
    CHECK_MSG(!cml__gemm_sm90_config_valid(&nn, &square), "2 x 2 cluster accepted for NN");
    cml_gemm_desc f = cml_gemm_desc_f32(CML_OP_N, CML_OP_T, 1024, 1024, 1024, 1);
    f.math = CML_GEMM_MATH_TF32;
    const cml__gemm_sm90_config tf = {160, 1, 1, 8, 128, 0, 0};
    CHECK_MSG(!cml__gemm_sm90_config_valid(&f, &tf), "160-wide tf32 accepted");
}

/* 128 x 256 tiles in a column of 4 CTAs sharing B (cluster 4, cluster_n 0; 16-bit): forced for every op pair, with
 * cluster tiles past M (M = 300: one tile row of four, three past it; 1100: the last cluster row half empty), edge
 * tiles in N, K not a multiple of 64, a batch, bias + GELU, fp16, f32 D with beta * C (stored by elements) and operands
 * repacked for TMA (M, N, K odd); each must run in clusters of 4. The estimate takes it where clusters of 4 need no
 * more rounds than pairs (3000 x 5000 x 1000 on 132 SMs) and not elsewhere (4096^3, 8192^3, batched 64 x 1024^3). */
static void test_sm90_column4(void) {
    if (cml__cuda_arch(0) != 90) {
        printf("  (not an sm_90 device: skipped)\n");
        return;
    }
    static const int64_t cases[][6] = {/* op_a, op_b, M, N, K, batch */
                                       {0, 0, 1100, 1000, 1000, 1},
                                       {0, 1, 300, 600, 136, 3},
                                       {1, 0, 777, 520, 72, 1},
                                       {1, 1, 530, 344, 264, 2},
                                       {0, 0, 610, 1000, 200, 1},
                                       {0, 1, 257, 301, 77, 1}};
    int forced = 0;
    for (int i = 0; i < 6; i++) {
        if (under_sanitizer() && i % 2 != 0) continue;
        gemm_case g = gemm_case_make((cml_op)cases[i][0], (cml_op)cases[i][1], cases[i][2], cases[i][3], cases[i][4],
                                     cases[i][5]);
        g.a_dtype = g.b_dtype = g.d_dtype = i == 3 ? CML_F16 : CML_BF16;
        g.tma_strides = i != 5;
        if (i == 0) {
            g.bias = true;
            g.epilogue = CML_EPILOGUE_GELU_TANH;
        } else if (i == 4) {
            g.d_dtype = g.c_dtype = CML_F32;
            g.beta = 0.5f;
        }
        const cml_gemm_desc d = cml_gemm_desc_init(g.op_a, g.op_b, g.M, g.N, g.K, g.batch, g.a_dtype, g.d_dtype);
        const cml__gemm_sm90_config cfg = {256, 1, 4, 8, 128, 0, 0};
        CHECK_MSG(cml__gemm_sm90_config_valid(&d, &cfg), "256 wide in clusters of 4, case %d refused", i);
        cml__gemm_sm90_force_config(&cfg);
        const int before = path_counts[0];
        run_case(&g, 1);
        CHECK_MSG(path_counts[0] == before + 1, "256 wide in clusters of 4: case %d did not run on sm90", i);
        int grid = 0, cluster = 0, cluster_n = 0;
        cml__gemm_sm90_last_launch(&grid, &cluster, &cluster_n);
        CHECK_MSG(cluster == 4 && cluster_n == 1 && grid > 0 && grid % 4 == 0 && grid <= cml__cuda_sm_count(0),
                  "256 wide, case %d: launched %d CTAs in clusters of %d (%d columns), expected 4 (1)", i, grid, cluster,
                  cluster_n);
        forced++;
    }
    cml__gemm_sm90_force_config(NULL);
    printf("  %d forced cases\n", forced);
    if (cml__cuda_sm_count(0) == 132) {
        static const int64_t picks[][6] = {/* op_a, op_b, M, N, K, batch; the expected cluster after them */
                                           {0, 0, 3000, 5000, 1000, 1}, {1, 1, 3000, 5000, 1000, 1},
                                           {0, 1, 4096, 4096, 4096, 1}, {0, 0, 8192, 8192, 8192, 1},
                                           {0, 0, 1024, 1024, 1024, 64}};
        static const int want[] = {4, 4, 2, 2, 2};
        for (int i = 0; i < 5; i++) {
            const cml_gemm_desc e = cml_gemm_desc_init((cml_op)picks[i][0], (cml_op)picks[i][1], picks[i][2],
                                                       picks[i][3], picks[i][4], picks[i][5], CML_BF16, CML_BF16);
            const cml__gemm_sm90_config c = cml__gemm_sm90_estimate_config(gctx, &e);
            CHECK_MSG(c.bn == 256 && c.cluster == want[i], "estimate for %lldx%lldx%lld x %lld: %d wide, cluster %d",
                      (long long)picks[i][2], (long long)picks[i][3], (long long)picks[i][4], (long long)picks[i][5],
                      c.bn, c.cluster);
        }
    }
    const cml_gemm_desc nn = cml_gemm_desc_init(CML_OP_N, CML_OP_N, 1024, 1024, 1024, 1, CML_BF16, CML_BF16);
    static const cml__gemm_sm90_config refused[] = {{256, 2, 4, 8, 128, 0, 0}, {256, 1, 4, 8, 64, 0, 0},
                                                    {256, 1, 4, 8, 128, 1, 0}, {256, 1, 4, 8, 128, 0, 2},
                                                    {192, 1, 4, 8, 128, 0, 0}, {128, 1, 4, 8, 128, 0, 0}};
    for (int i = 0; i < 6; i++)
        CHECK_MSG(!cml__gemm_sm90_config_valid(&nn, &refused[i]), "cluster-4 configuration %d accepted", i);
    cml_gemm_desc f = cml_gemm_desc_f32(CML_OP_N, CML_OP_T, 1024, 1024, 1024, 1);
    f.math = CML_GEMM_MATH_TF32;
    const cml__gemm_sm90_config c4 = {256, 1, 4, 8, 128, 0, 0};
    CHECK_MSG(!cml__gemm_sm90_config_valid(&f, &c4), "tf32 in clusters of 4 accepted");
}

/* tf32 NN, TN and TT with TMA-aligned D take the launch that reads one M/N-major operand into registers
 * instead of transposing it (gemm_sm90.cu, rs_plan: NN D^T = B^T A^T; TT D = A B with A from registers; TN either,
 * repacking the smaller operand): awkward shapes (1, 7, 127, 1025; K not a multiple of 32; padded leading
 * dimensions, multiples of 16 bytes as TMA needs, or for TN's A not: then the other operand's form), batches
 * (one with B broadcast), alpha, bias per column and per row, ReLU and GELU, forced tile widths, K splits and
 * clusters. Each must have run that launch (its counter), and the same case with the launch switched off (both
 * transposed first) must have run without it; both against the float64 reference, poisoned, repeated bitwise.
 * Whether the two give the same bits is printed (the same tf32 products in the same K-block order: expected
 * equal; not a requirement). An operand TMA cannot read in place must not take it, nor TN when forced to NN,
 * nor 16-bit D. */
static void test_tf32_rs(void) {
    if (cml__cuda_arch(0) != 90) {
        printf("  (not an sm_90 device: skipped)\n");
        return;
    }
    /* N % 4 == 0 where the RS launch is to run (D's rows end on 16 bytes: TMA stores, tma_store_ok); the first and
     * the last two shapes have N % 4 != 0 and must take the transposing path with the general epilogue */
    static const int64_t shapes[][5] = {/* M, N, K, batch, row_step */
                                        {1, 1, 1, 1, 1},         {7, 124, 3, 1, 1},       {127, 1028, 33, 1, 1},
                                        {1025, 8, 127, 1, 1},    {1025, 128, 1031, 1, 1}, {129, 516, 2049, 1, 1},
                                        {4, 1000, 20, 1, 1},     {2048, 36, 500, 1, 4},   {300, 260, 96, 3, 1},
                                        {264, 136, 200, 2, 1},   {1024, 1024, 1024, 1, 16}, {7, 127, 3, 1, 1},
                                        {129, 513, 2049, 1, 1}};
    static const cml_epilogue acts[] = {CML_EPILOGUE_NONE, CML_EPILOGUE_RELU, CML_EPILOGUE_GELU_TANH};
    const int n_shapes = under_sanitizer() ? 4 : (int)(sizeof shapes / sizeof shapes[0]);
    int same = 0, cases = 0;
    for (int c = 0; c < 3 * (n_shapes + 2); c++) {
        /* NN; TN on every other shape; TT where M = N mod 4 (one pad aligns A's and D's leading dimensions) on
         * every third; the last two shapes: forced plans (a K split with a cluster; the 128-wide tile) */
        const int s = c / 3, op = c % 3, i = s < n_shapes ? s : 8 + (s - n_shapes);
        if (op == 1 && s < n_shapes && s % 2 == 0) continue;
        if (op == 2 && ((shapes[i][0] - shapes[i][1]) % 4 != 0 || (s < n_shapes && s % 3 != 0))) continue;
        gemm_case g = gemm_case_make(op ? CML_OP_T : CML_OP_N, op == 2 ? CML_OP_T : CML_OP_N, shapes[i][0],
                                     shapes[i][1], shapes[i][2], shapes[i][3]);
        g.math = CML_GEMM_MATH_TF32;
        g.ld_pad = 4 - g.N % 4; /* B (K x N) and D aligned, 1-4 floats after each row (they must survive); A
                                   (K x M) aligned too where M = N mod 4 */
        g.broadcast_b = i == 9;
        g.tma_strides = true;
        g.alpha = s % 2 ? -0.75f : 1.0f;
        g.epilogue = acts[s % 3];
        g.bias = s % 4 != 0;
        g.bias_axis = s % 4 == 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
        if (s >= n_shapes) {
            const cml__gemm_sm90_config cfg = s == n_shapes ? (cml__gemm_sm90_config){256, 3, 2, 4, 128, 0, 0}
                                                            : (cml__gemm_sm90_config){128, 1, 2, 1, 128, 0, 0};
            cml__gemm_sm90_force_config(&cfg);
        }
        char desc_str[320];
        gemm_case_str(&g, desc_str, sizeof desc_str);
        gemm_data x;
        gemm_data_make(&x, &g, &rng);
        const int64_t total = g.batch * g.M * g.N, row_step = shapes[i][4];
        double *ref = malloc(sizeof(double) * (size_t)total), *ref_aux = malloc(sizeof(double) * (size_t)total);
        double *ref_dbias = malloc(sizeof(double) * (size_t)(g.batch * g.M));
        float *out[2] = {malloc(sizeof(float) * (size_t)total), malloc(sizeof(float) * (size_t)total)};
        CHECK(ref && ref_aux && ref_dbias && out[0] && out[1]);
        gemm_reference(&x, row_step, false, ref, ref_aux, ref_dbias);
        for (int off = 0; off < 2; off++) { /* the RS launch, then B transposed first */
            cml__gemm_sm90_force_rs(off ? 0 : 2);
            const unsigned long long before = cml__gemm_sm90_rs_launches();
            const int path = run_on_gpu(&x, desc_str, false, row_step, ref, ref_aux, ref_dbias, out[off]);
            const unsigned long long ran = cml__gemm_sm90_rs_launches() - before;
            CHECK_MSG(path == 0, "tf32 %s: not the sm90 path", desc_str);
            const unsigned long long want = off || g.N % 4 != 0 ? 0 : 2;
            CHECK_MSG(ran == want, "tf32 %s: %llu RS launches with RS %s (expected %llu)", desc_str, ran,
                      off ? "off" : "on", want);
            path_counts[path]++;
            cases_run++;
        }
        cml__gemm_sm90_force_rs(-1);
        cml__gemm_sm90_force_config(NULL);
        same += memcmp(out[0], out[1], sizeof(float) * (size_t)total) == 0;
        cases++;
        free(ref);
        free(ref_aux);
        free(ref_dbias);
        free(out[0]);
        free(out[1]);
        gemm_data_free(&x);
    }
    printf("  tf32 NN/TN/TT: RS launch vs transposed first: D bitwise equal in %d of %d cases\n", same, cases);
    /* a B TMA cannot read in place (odd leading dimension, offset pointer): transposed first, as before; NN only
     * when forced to 1 */
    gemm_case g = gemm_case_make(CML_OP_N, CML_OP_N, 129, 65, 77, 1);
    g.math = CML_GEMM_MATH_TF32;
    g.ld_pad = 1;
    g.offset = 1;
    unsigned long long before = cml__gemm_sm90_rs_launches();
    run_case(&g, 1);
    CHECK_MSG(cml__gemm_sm90_rs_launches() == before, "unaligned tf32 NN took the RS launch");
    g = gemm_case_make(CML_OP_T, CML_OP_N, 200, 136, 300, 1);
    g.math = CML_GEMM_MATH_TF32;
    cml__gemm_sm90_force_rs(1);
    before = cml__gemm_sm90_rs_launches();
    run_case(&g, 1);
    CHECK_MSG(cml__gemm_sm90_rs_launches() == before, "tf32 TN took the RS launch with RS forced to NN only");
    cml__gemm_sm90_force_rs(-1);
    g = gemm_case_make(CML_OP_N, CML_OP_N, 200, 136, 300, 1); /* bf16 D: the RS epilogues store f32 only */
    g.math = CML_GEMM_MATH_TF32;
    g.d_dtype = CML_BF16;
    before = cml__gemm_sm90_rs_launches();
    run_case(&g, 1);
    CHECK_MSG(cml__gemm_sm90_rs_launches() == before, "tf32 NN with bf16 D took the RS launch");
}

static void test_report(void) {
    printf("  %lld cases; dispatcher picked sm90 %d, f32 %d, simt %d times; worst error/bound: sm90 %.3g, f32 %.3g, "
           "simt %.3g\n",
           (long long)cases_run, path_counts[0], path_counts[1], path_counts[2], path_worst[0], path_worst[1],
           path_worst[2]);
}

int main(void) {
    int rc = gpu_test_init(13579);
    if (rc) return rc;
    RUN(test_shapes);
    RUN(test_dtypes);
    RUN(test_epilogues);
    RUN(test_tma_epilogues);
    RUN(test_tma_store_padding);
    RUN(test_scales);
    RUN(test_batched_beta_k0);
    RUN(test_aux_round_trip);
    RUN(test_dbias);
    RUN(test_grouped);
    RUN(test_large);
    RUN(test_split_k);
    RUN(test_sm90_configs);
    RUN(test_sm90_pingpong);
    RUN(test_sm90_wide160);
    RUN(test_sm90_column4);
    RUN(test_tf32_rs);
    RUN(test_report);
    return th_finish();
}
#endif
