/* The CUDA side of camel bench gemm: buffers, cuBLAS / cuBLASLt references,
 * timing, output comparison, the table and the JSON file. The method is in
 * cmd_bench_gemm.c's header comment. CUDA builds only (CML_HAVE_CUDA). */
#define _POSIX_C_SOURCE 200809L
#ifdef CML_HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_WHO "camel bench gemm"
#define BENCH_HINT "choose fewer or smaller cases (--set, --sizes)"
#include "bench_gemm_cuda.h"
#include "camel/camel.h"
#include "cli.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/ctx_impl.h"

/* ---- dtypes ------------------------------------------------------------------------------------ */

static cml_dtype in_dtype(bg_dtype d) {
    return d == BG_BF16 ? CML_BF16 : d == BG_F16 ? CML_F16 : d == BG_E4M3 ? CML_F8E4M3 : CML_F32;
}
static cml_dtype out_dtype(bg_dtype d) {
    return d == BG_BF16 || d == BG_E4M3 ? CML_BF16 : d == BG_F16 ? CML_F16 : CML_F32;
}
static cudaDataType_t cuda_type(cml_dtype d) {
    return d == CML_BF16 ? CUDA_R_16BF : d == CML_F16 ? CUDA_R_16F : d == CML_F8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_32F;
}
static const char *ref_name(bg_dtype d, bool grouped) {
    if (d == BG_F32) return grouped ? "cublasSgemm, one call per problem" : "cuBLAS sgemm (default math)";
    if (grouped) return "cuBLASLt, one cublasLtMatmul per problem";
    return d == BG_TF32 ? "cuBLASLt (COMPUTE_32F_FAST_TF32)" : d == BG_E4M3 ? "cuBLASLt fp8 (tensor scales)" : "cuBLASLt";
}
double bg_diff_bound(bg_dtype d) { return d == BG_F32 ? 1e-5 : d == BG_TF32 ? 1e-3 : 1e-2; }

static size_t round_up(size_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

/* Bytes of A, B and D that a case needs (problems packed one after another, 256-byte aligned). */
static void case_bytes(const bg_case *c, size_t *a, size_t *b, size_t *d) {
    const size_t ei = cml_dtype_size(in_dtype(c->dt)), eo = cml_dtype_size(out_dtype(c->dt));
    *a = *b = *d = 0;
    const int count = c->group_count ? c->group_count : 1;
    for (int i = 0; i < count; i++) {
        const int64_t M = c->group_count ? c->group_m[i] : c->M;
        *a += round_up((size_t)(c->batch * M * c->K) * ei);
        *b += round_up((size_t)(c->batch * c->K * c->N) * ei);
        *d += round_up((size_t)(c->batch * M * c->N) * eo);
    }
}

/* ---- set-up ------------------------------------------------------------------------------------- */

/* Fills bytes of dst with random values of dtype dt (uniform in +-[0.25, 1] for fp8, [-1, 1)
 * otherwise; never zero): a FILL_PERIOD-element block from the host, then doubled on the device. */
static void fill_random(bg_state *s, void *dst, size_t bytes, cml_dtype dt, uint64_t seed) {
    const size_t es = cml_dtype_size(dt);
    const int64_t total = (int64_t)(bytes / es), block = total < FILL_PERIOD ? total : FILL_PERIOD;
    if (block <= 0) return;
    void *h = malloc((size_t)block * es);
    if (!h) {
        fprintf(stderr, "camel bench gemm: out of host memory\n");
        exit(1);
    }
    cml_rng rng;
    cml_rng_init(&rng, seed);
    for (int64_t i = 0; i < block; i++) {
        float u = 2.0f * cml_rng_uniform(&rng) - 1.0f;
        if (dt == CML_F8E4M3) u = (u < 0 ? -1.0f : 1.0f) * (0.25f + 0.75f * fabsf(u));
        else if (u == 0.0f) u = 0.5f;
        cml_dtype_store(h, dt, i, u);
    }
    BENCH_CUDA_OK(cudaMemcpy(dst, h, (size_t)block * es, cudaMemcpyHostToDevice));
    free(h);
    for (int64_t done = block; done < total;) {
        const int64_t n = done < total - done ? done : total - done;
        BENCH_CUDA_OK(cudaMemcpyAsync((char *)dst + done * (int64_t)es, dst, (size_t)n * es, cudaMemcpyDeviceToDevice, s->st));
        done += n;
    }
    BENCH_CUDA_OK(cudaStreamSynchronize(s->st));
}

bool bg_state_open(bg_state *s, const bg_case *cases, int n, int reps) {
    memset(s, 0, sizeof *s);
    s->filled = -1;
    s->reps = reps;
    s->ctx = cml_ctx_default((cml_device){CML_CUDA, 0});
    if (!s->ctx) {
        cli_fail("creating the CUDA context", "is a GPU visible? (nvidia-smi)");
        return false;
    }
    s->st = (cudaStream_t)cml_ctx_stream(s->ctx);
    if (cublasCreate(&s->blas) != CUBLAS_STATUS_SUCCESS || cublasLtCreate(&s->lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "camel bench gemm: cublasCreate / cublasLtCreate failed\n");
        return false;
    }
    cublasSetStream(s->blas, s->st);
    cublasSetMathMode(s->blas, CUBLAS_DEFAULT_MATH); /* exact f32: no tf32 */
    BENCH_CUDA_OK(cudaEventCreate(&s->ev0));
    BENCH_CUDA_OK(cudaEventCreate(&s->ev1));
    s->flush = bench_dmalloc(FLUSH_BYTES);
    s->lt_ws = bench_dmalloc(LT_WORKSPACE);
    size_t max_a = 0, max_b = 0, max_d = 0;
    for (int i = 0; i < n; i++) {
        size_t a, b, d;
        case_bytes(&cases[i], &a, &b, &d);
        max_a = a > max_a ? a : max_a;
        max_b = b > max_b ? b : max_b;
        max_d = d > max_d ? d : max_d;
        /* each dtype fills only what its largest case reads */
        s->fill_a[cases[i].dt] = a > s->fill_a[cases[i].dt] ? a : s->fill_a[cases[i].dt];
        s->fill_b[cases[i].dt] = b > s->fill_b[cases[i].dt] ? b : s->fill_b[cases[i].dt];
    }
    s->A = bench_dmalloc(max_a);
    s->B = bench_dmalloc(max_b);
    s->D_ours = bench_dmalloc(max_d);
    s->D_ref = bench_dmalloc(max_d);
    /* a_scale at [0], b_scale at [4]: each 16-byte aligned (cuBLASLt's fp8 kernels may load them as vectors) */
    const float host_scales[8] = {0.75f, 0, 0, 0, 1.25f, 0, 0, 0};
    s->scales = bench_dmalloc(sizeof host_scales);
    BENCH_CUDA_OK(cudaMemcpy(s->scales, host_scales, sizeof host_scales, cudaMemcpyHostToDevice));
    return true;
}

void bg_state_fill(bg_state *s, bg_dtype dt) {
    if (s->filled == (int)dt) return;
    fill_random(s, s->A, s->fill_a[dt], in_dtype(dt), 1000 + (uint64_t)dt);
    fill_random(s, s->B, s->fill_b[dt], in_dtype(dt), 2000 + (uint64_t)dt);
    s->filled = (int)dt;
}

/* ---- one case: descriptors and the reference's plans ---------------------------------------------- */

static bool lt_plan(bg_state *s, bg_prep *p, int i) {
    const cml_gemm_desc *d = &p->desc[i];
    const bg_dtype dt = p->c->dt;
    const cublasComputeType_t compute = dt == BG_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cudaDataType_t ti = cuda_type(d->a_dtype), to = cuda_type(d->d_dtype);
    /* row-major D = op(A) op(B) is column-major D^T (N x M) = op(B)^T op(A)^T: cuBLASLt's A is our B */
    const cublasOperation_t ta = d->op_b == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = d->op_a == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    bool ok = cublasLtMatmulDescCreate(&p->md[i], compute, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p->md[i], CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == 0;
    ok = ok && cublasLtMatmulDescSetAttribute(p->md[i], CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == 0;
    if (dt == BG_E4M3) {
        const float *sa = s->scales, *sb = s->scales + 4; /* Lt's A is our B: swap the scales too */
        ok = ok && cublasLtMatmulDescSetAttribute(p->md[i], CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb) == 0;
        ok = ok && cublasLtMatmulDescSetAttribute(p->md[i], CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa) == 0;
    }
    const uint64_t M = (uint64_t)d->M, N = (uint64_t)d->N, K = (uint64_t)d->K;
    ok = ok && cublasLtMatrixLayoutCreate(&p->la[i], ti, ta == CUBLAS_OP_N ? N : K, ta == CUBLAS_OP_N ? K : N, d->ldb) == 0;
    ok = ok && cublasLtMatrixLayoutCreate(&p->lb[i], ti, tb == CUBLAS_OP_N ? K : M, tb == CUBLAS_OP_N ? M : K, d->lda) == 0;
    ok = ok && cublasLtMatrixLayoutCreate(&p->lc[i], to, N, M, d->ldd) == 0;
    if (ok && d->batch > 1) {
        const int32_t count = (int32_t)d->batch;
        cublasLtMatrixLayout_t ls[3] = {p->la[i], p->lb[i], p->lc[i]};
        const int64_t strides[3] = {d->stride_b, d->stride_a, d->stride_d};
        for (int k = 0; k < 3 && ok; k++) {
            ok = cublasLtMatrixLayoutSetAttribute(ls[k], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count) == 0;
            ok = ok && cublasLtMatrixLayoutSetAttribute(ls[k], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[k],
                                                        sizeof strides[k]) == 0;
        }
    }
    if (!ok) {
        snprintf(p->ref_error, sizeof p->ref_error, "cuBLASLt descriptor set-up failed");
        return false;
    }
    cublasLtMatmulPreference_t pref;
    const uint64_t ws = LT_WORKSPACE;
    cublasLtMatmulHeuristicResult_t results[8];
    int found = 0;
    ok = cublasLtMatmulPreferenceCreate(&pref) == 0 &&
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == 0;
    cublasStatus_t st = ok ? cublasLtMatmulAlgoGetHeuristic(s->lt, p->md[i], p->la[i], p->lb[i], p->lc[i], p->lc[i],
                                                            pref, 8, results, &found)
                           : CUBLAS_STATUS_NOT_INITIALIZED;
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found < 1) {
        snprintf(p->ref_error, sizeof p->ref_error, "cuBLASLt has no algorithm for this case (%s)",
                 cublasGetStatusString(st));
        return false;
    }
    /* the first algorithm that runs on these buffers (a heuristic's pick can still be refused
     * at run time, as fp8 ones have been here) */
    const float alpha = 1.0f, beta = 0.0f;
    for (int r = 0; r < found; r++) {
        st = cublasLtMatmul(s->lt, p->md[i], &alpha, p->b[i], p->la[i], p->a[i], p->lb[i], &beta, p->d_ref[i], p->lc[i],
                            p->d_ref[i], p->lc[i], &results[r].algo, s->lt_ws, LT_WORKSPACE, s->st);
        if (st == CUBLAS_STATUS_SUCCESS) {
            p->algo[i] = results[r].algo;
            return true;
        }
    }
    snprintf(p->ref_error, sizeof p->ref_error, "cublasLtMatmul refused all %d heuristic algorithms (%s)", found,
             cublasGetStatusString(st));
    return false;
}

void bg_prep_free(bg_prep *p) {
    for (int i = 0; i < p->count; i++) {
        if (p->la[i]) cublasLtMatrixLayoutDestroy(p->la[i]);
        if (p->lb[i]) cublasLtMatrixLayoutDestroy(p->lb[i]);
        if (p->lc[i]) cublasLtMatrixLayoutDestroy(p->lc[i]);
        if (p->md[i]) cublasLtMatmulDescDestroy(p->md[i]);
    }
}

bool bg_prep_case(bg_state *s, const bg_case *c, bg_prep *p) {
    memset(p, 0, sizeof *p);
    p->c = c;
    p->grouped = c->group_count > 0;
    p->count = p->grouped ? c->group_count : 1;
    const size_t ei = cml_dtype_size(in_dtype(c->dt)), eo = cml_dtype_size(out_dtype(c->dt));
    size_t oa = 0, ob = 0, od = 0;
    for (int i = 0; i < p->count; i++) {
        const int64_t M = p->grouped ? c->group_m[i] : c->M;
        cml_gemm_desc *d = &p->desc[i];
        *d = cml_gemm_desc_init(c->op_a, c->op_b, M, c->N, c->K, c->batch, in_dtype(c->dt), out_dtype(c->dt));
        if (c->dt == BG_TF32) d->math = CML_GEMM_MATH_TF32;
        if (c->dt == BG_E4M3) {
            d->a_scale_mode = d->b_scale_mode = CML_SCALE_TENSOR;
            d->a_scale = s->scales;
            d->b_scale = s->scales + 4;
        }
        p->a[i] = (char *)s->A + oa;
        p->b[i] = (char *)s->B + ob;
        p->d_ours[i] = (char *)s->D_ours + od;
        p->d_ref[i] = (char *)s->D_ref + od;
        oa += round_up((size_t)(c->batch * M * c->K) * ei);
        ob += round_up((size_t)(c->batch * c->K * c->N) * ei);
        od += round_up((size_t)(c->batch * M * c->N) * eo);
    }
    if (c->dt == BG_F32) return true;
    for (int i = 0; i < p->count; i++)
        if (!lt_plan(s, p, i)) return false;
    return true;
}

/* ---- the two sides ------------------------------------------------------------------------------ */

static cml_status run_ours(bg_state *s, const bg_prep *p) {
    if (p->grouped) return cml_gemm_grouped(s->ctx, p->desc, p->count, p->d_ours, p->a, p->b, NULL);
    return cml_gemm(s->ctx, &p->desc[0], p->d_ours[0], p->a[0], p->b[0], NULL);
}

static bool run_ref(bg_state *s, bg_prep *p) {
    const float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < p->count; i++) {
        const cml_gemm_desc *d = &p->desc[i];
        cublasStatus_t st;
        if (p->c->dt == BG_F32) {
            st = cublasSgemmStridedBatched(s->blas, d->op_b == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           d->op_a == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N, (int)d->N, (int)d->M,
                                           (int)d->K, &alpha, p->b[i], (int)d->ldb, d->stride_b, p->a[i], (int)d->lda,
                                           d->stride_a, &beta, p->d_ref[i], (int)d->ldd, d->stride_d, (int)d->batch);
        } else {
            st = cublasLtMatmul(s->lt, p->md[i], &alpha, p->b[i], p->la[i], p->a[i], p->lb[i], &beta, p->d_ref[i],
                                p->lc[i], p->d_ref[i], p->lc[i], &p->algo[i], s->lt_ws, LT_WORKSPACE, s->st);
        }
        if (st != CUBLAS_STATUS_SUCCESS) {
            snprintf(p->ref_error, sizeof p->ref_error, "%s failed: %s",
                     p->c->dt == BG_F32 ? "cublasSgemmStridedBatched" : "cublasLtMatmul", cublasGetStatusString(st));
            return false;
        }
    }
    return true;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

float bg_median(float *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

bool bg_time_call(bg_state *s, bg_prep *p, bool ref, int flush_byte, float *ms) {
    BENCH_CUDA_OK(cudaMemsetAsync(s->flush, flush_byte & 0xFF, FLUSH_BYTES, s->st));
    BENCH_CUDA_OK(cudaEventRecord(s->ev0, s->st));
    const bool ok = ref ? run_ref(s, p) : run_ours(s, p) == CML_OK;
    BENCH_CUDA_OK(cudaEventRecord(s->ev1, s->st));
    BENCH_CUDA_OK(cudaEventSynchronize(s->ev1));
    BENCH_CUDA_OK(cudaEventElapsedTime(ms, s->ev0, s->ev1));
    return ok;
}

bool bg_time(bg_state *s, bg_prep *p, bg_result *r, bool ref) {
    static float t_ours[BG_MAX_REPS], t_ref[BG_MAX_REPS];
    bool ref_ok = ref && p->ref_error[0] == '\0';
    for (int w = 0; w < WARMUP; w++) {
        if (run_ours(s, p) != CML_OK) return false;
        ref_ok = ref_ok && run_ref(s, p);
    }
    for (int i = 0; i < s->reps; i++) {
        if (!bg_time_call(s, p, false, i, &t_ours[i])) return false;
        ref_ok = ref_ok && bg_time_call(s, p, true, i, &t_ref[i]);
    }
    const double flop = bg_case_flop(p->c);
    r->ours_ms = bg_median(t_ours, s->reps);
    r->ours_tf = flop / r->ours_ms * 1e-9;
    if (ref_ok) {
        r->ref_ms = bg_median(t_ref, s->reps);
        r->ref_tf = flop / r->ref_ms * 1e-9;
    }
    return true;
}

/* Accumulates ||ours - ref||^2 and ||ref||^2 over sampled rows of one problem's D (rows x N). */
static void compare_rows(const void *d_ours, const void *d_ref, int64_t rows, int64_t N, cml_dtype dt, double *num,
                         double *den) {
    const size_t es = cml_dtype_size(dt);
    int64_t step = rows * N / SAMPLE_ELEMS;
    step = step < 1 ? 1 : step;
    const int64_t n_rows = (rows + step - 1) / step;
    void *ho = malloc((size_t)(n_rows * N) * es), *hr = malloc((size_t)(n_rows * N) * es);
    if (!ho || !hr) {
        *num = NAN;
        free(ho);
        free(hr);
        return;
    }
    BENCH_CUDA_OK(cudaMemcpy2D(ho, (size_t)N * es, d_ours, (size_t)(step * N) * es, (size_t)N * es, (size_t)n_rows,
                         cudaMemcpyDeviceToHost));
    BENCH_CUDA_OK(cudaMemcpy2D(hr, (size_t)N * es, d_ref, (size_t)(step * N) * es, (size_t)N * es, (size_t)n_rows,
                         cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n_rows * N; i++) {
        const double o = cml_dtype_load(ho, dt, i), f = cml_dtype_load(hr, dt, i);
        if (isnan(o) || isnan(f) || isinf(o)) *num = INFINITY; /* unwritten (poisoned) or broken */
        *num += (o - f) * (o - f);
        *den += f * f;
    }
    free(ho);
    free(hr);
}

void bg_check_outputs(bg_state *s, bg_prep *p, bg_result *r) {
    const cml_dtype dt = out_dtype(p->c->dt);
    for (int i = 0; i < p->count; i++) {
        const size_t bytes = (size_t)(p->desc[i].batch * p->desc[i].M * p->desc[i].N) * cml_dtype_size(dt);
        BENCH_CUDA_OK(cudaMemsetAsync(p->d_ours[i], 0xFF, bytes, s->st));
        BENCH_CUDA_OK(cudaMemsetAsync(p->d_ref[i], 0xFF, bytes, s->st));
    }
    if (p->ref_error[0] || run_ours(s, p) != CML_OK || !run_ref(s, p)) return;
    BENCH_CUDA_OK(cudaStreamSynchronize(s->st));
    double num = 0, den = 0;
    for (int i = 0; i < p->count; i++)
        compare_rows(p->d_ours[i], p->d_ref[i], p->desc[i].batch * p->desc[i].M, p->desc[i].N, dt, &num, &den);
    r->rel_diff = den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- output ------------------------------------------------------------------------------------- */

static void print_header(void) {
    printf("%-5s %-8s %-15s %-10s %6s %6s %6s %5s %-3s %-16s %9s %9s %9s %7s %9s\n", "dtype", "set", "op", "name",
           "M", "N", "K", "batch", "ops", "path", "ours ms", "ours TF/s", "ref TF/s", "ratio", "rel diff");
}

/* v with `digits` decimals (sci: in exponent form), or n/a. */
static void fmt_num(char *buf, size_t n, int digits, bool sci, double v) {
    if (isnan(v)) snprintf(buf, n, "n/a");
    else if (sci) snprintf(buf, n, "%.*e", digits, v);
    else snprintf(buf, n, "%.*f", digits, v);
}

static void print_row(const bg_result *r) {
    const bg_case *c = r->c;
    char ms[32], ot[32], rt[32], ratio[32], diff[32];
    fmt_num(ms, sizeof ms, 3, false, r->ours_ms);
    fmt_num(ot, sizeof ot, 1, false, r->ours_tf);
    fmt_num(rt, sizeof rt, 1, false, r->ref_tf);
    fmt_num(ratio, sizeof ratio, 3, false, r->ours_tf / r->ref_tf);
    fmt_num(diff, sizeof diff, 2, true, r->rel_diff);
    const bool flag = !isnan(r->rel_diff) && !(r->rel_diff <= bg_diff_bound(c->dt));
    printf("%-5s %-8s %-15s %-10.10s %6lld %6lld %6lld %5lld %c%c  %-16s %9s %9s %9s %7s %9s%s\n",
           bg_dtype_name(c->dt), bg_set_name(c->set), c->op, c->name, (long long)c->M, (long long)c->N,
           (long long)c->K, (long long)c->batch, c->op_a == CML_OP_T ? 'T' : 'N', c->op_b == CML_OP_T ? 'T' : 'N',
           r->path, ms, ot, rt, ratio, diff, flag ? " FLAG: outputs differ" : "");
    if (r->error[0]) printf("      error: %s\n", r->error);
    fflush(stdout);
}

static void json_num(FILE *f, const char *key, double v) {
    if (isnan(v) || isinf(v)) fprintf(f, ", \"%s\": null", key);
    else fprintf(f, ", \"%s\": %.6g", key, v);
}

/* src without quotes, backslashes and control characters, so that it is a valid JSON string. */
static void json_clean(char *dst, size_t n, const char *src) {
    size_t k = 0;
    for (const char *q = src; *q && k + 1 < n; q++)
        if (*q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) dst[k++] = *q;
    dst[k] = '\0';
}

static void first_line(const char *cmd, char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(buf, (int)n, p)) buf[strcspn(buf, "\n")] = '\0';
    else snprintf(buf, n, "unknown");
    pclose(p);
}

FILE *bg_json_open(const bg_options *o) {
    FILE *f = fopen(o->json_path, "w");
    if (!f) {
        perror(o->json_path);
        return NULL;
    }
    struct cudaDeviceProp prop;
    BENCH_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, rt = 0, drv = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    char commit[64], date[32], smi[160];
    if (o->commit) snprintf(commit, sizeof commit, "%s", o->commit);
    else first_line("git rev-parse --short HEAD 2>/dev/null", commit, sizeof commit);
    first_line("nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,driver_version --format=csv,noheader 2>/dev/null", smi,
               sizeof smi);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char command[sizeof o->command], commit_clean[sizeof commit];
    json_clean(command, sizeof command, o->command);
    json_clean(commit_clean, sizeof commit_clean, commit);
    fprintf(f,
            "{\"meta\": {\"gpu\": \"%s\", \"sms\": %d, \"sm_clock_max_mhz\": %d, \"nvidia_smi_clocks_sm_max_driver\": "
            "\"%s\", \"cuda_runtime\": \"%d.%d\", \"cuda_driver_api\": \"%d.%d\", \"cublaslt_version\": %zu, "
            "\"commit\": \"%s\", \"date\": \"%s\", \"command\": \"%s\", \"reps\": %d, \"warmup\": %d, "
            "\"l2_flush_bytes\": %zu}",
            prop.name, prop.multiProcessorCount, clock_khz / 1000, smi, rt / 1000, rt % 1000 / 10, drv / 1000,
            drv % 1000 / 10, cublasLtGetVersion(), commit_clean, date, command, o->reps, WARMUP, FLUSH_BYTES);
    fprintf(f, ",\n \"results\": [");
    return f;
}

void bg_json_close(FILE *f, const bg_options *o) {
    fprintf(f, "\n]}\n");
    fclose(f);
    printf("wrote %s\n", o->json_path);
}

static void write_json(const bg_options *o, const bg_result *res, int n) {
    FILE *f = bg_json_open(o);
    if (!f) return;
    for (int i = 0; i < n; i++) {
        const bg_result *r = &res[i];
        const bg_case *c = r->c;
        fprintf(f,
                "%s\n  {\"family\": \"gemm\", \"op\": \"%s\", \"dtype\": \"%s\", \"set\": \"%s\", \"name\": \"%s\", "
                "\"shape\": {\"M\": %lld, \"N\": %lld, \"K\": %lld, \"batch\": %lld, \"op_a\": \"%c\", \"op_b\": \"%c\"",
                i ? "," : "", c->op, bg_dtype_name(c->dt), bg_set_name(c->set), c->name, (long long)c->M,
                (long long)c->N, (long long)c->K, (long long)c->batch, c->op_a == CML_OP_T ? 'T' : 'N',
                c->op_b == CML_OP_T ? 'T' : 'N');
        if (c->group_count) {
            fprintf(f, ", \"group_M\": [");
            for (int g = 0; g < c->group_count; g++) fprintf(f, "%s%lld", g ? ", " : "", (long long)c->group_m[g]);
            fprintf(f, "]");
        }
        fprintf(f, "}");
        json_num(f, "ours", r->ours_tf);
        json_num(f, "reference", r->ref_tf);
        fprintf(f, ", \"ref_name\": \"%s\", \"unit\": \"TFLOP/s\"", ref_name(c->dt, c->group_count > 0));
        json_num(f, "ratio", r->ours_tf / r->ref_tf);
        json_num(f, "ours_ms", r->ours_ms);
        json_num(f, "ref_ms", r->ref_ms);
        json_num(f, "rel_diff", r->rel_diff);
        fprintf(f, ", \"path\": \"%s\"", r->path);
        /* batched and grouped: per-problem throughput relative to the same problems as one GEMM (the next record),
         * batched also to one GEMM of the same flops (the one after) */
        if ((strcmp(c->op, "batched") == 0 || strcmp(c->op, "grouped") == 0) && i + 1 < n &&
            strstr(res[i + 1].c->op, "_as_one")) {
            json_num(f, "ours_vs_one_gemm", r->ours_tf / res[i + 1].ours_tf);
            json_num(f, "ref_vs_one_gemm", r->ref_tf / res[i + 1].ref_tf);
            if (i + 2 < n && strcmp(res[i + 2].c->op, "batched_same_flops") == 0) {
                json_num(f, "ours_vs_same_flops", r->ours_tf / res[i + 2].ours_tf);
                json_num(f, "ref_vs_same_flops", r->ref_tf / res[i + 2].ref_tf);
            }
        }
        if (r->error[0]) {
            char clean[sizeof r->error];
            json_clean(clean, sizeof clean, r->error);
            fprintf(f, ", \"error\": \"%s\"", clean);
        }
        fprintf(f, "}");
    }
    bg_json_close(f, o);
}

/* Geometric means of the ratio per dtype and set, and the batched / grouped comparisons. */
static void print_summary(const bg_result *res, int n) {
    printf("\nsummary (geometric mean of ours / reference)\n");
    for (int d = 0; d < BG_DTYPE_COUNT; d++)
        for (int s = 0; s < BG_SET_COUNT; s++) {
            double logsum = 0;
            int count = 0;
            for (int i = 0; i < n; i++) {
                const double ratio = res[i].ours_tf / res[i].ref_tf;
                if ((int)res[i].c->dt == d && (int)res[i].c->set == s && ratio > 0) logsum += log(ratio), count++;
            }
            if (count) printf("  %-5s %-8s %3d cases  %.3fx\n", bg_dtype_name((bg_dtype)d), bg_set_name((bg_set)s), count,
                              exp(logsum / count));
        }
    for (int i = 0; i + 1 < n; i++) {
        const bg_case *c = res[i].c;
        if (strcmp(c->op, "batched") != 0 && strcmp(c->op, "grouped") != 0) continue;
        printf("  %-5s %-8s per-problem throughput / the same problems as one GEMM: ours %.3f, reference %.3f\n",
               bg_dtype_name(c->dt), c->op, res[i].ours_tf / res[i + 1].ours_tf, res[i].ref_tf / res[i + 1].ref_tf);
        if (i + 2 < n && strcmp(res[i + 2].c->op, "batched_same_flops") == 0)
            printf("  %-5s %-8s per-problem throughput / one GEMM of the same flops:   ours %.3f, reference %.3f\n",
                   bg_dtype_name(c->dt), c->op, res[i].ours_tf / res[i + 2].ours_tf, res[i].ref_tf / res[i + 2].ref_tf);
    }
}

/* ---- driver ------------------------------------------------------------------------------------- */

int bg_run(const bg_options *o) {
    static bg_case cases[BG_MAX_CASES];
    static bg_result res[BG_MAX_CASES];
    const int n = bg_make_cases(o, cases, BG_MAX_CASES);
    if (n == 0) {
        fprintf(stderr, "camel bench gemm: no cases selected (check --dtype, --set, --sizes, --max-f32)\n");
        return 2;
    }
    bg_state s;
    if (!bg_state_open(&s, cases, n, o->reps)) return 1;
    struct cudaDeviceProp prop;
    BENCH_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("camel bench gemm on %s (%d SMs): %d cases, median of %d timed calls per side, L2 flushed before each\n",
           prop.name, prop.multiProcessorCount, n, o->reps);
    print_header();
    cli_progress prog;
    cli_progress_start(&prog, "bench gemm", n, "cases");
    int failures = 0;
    for (int i = 0; i < n; i++) {
        bg_result *r = &res[i];
        memset(r, 0, sizeof *r);
        r->c = &cases[i];
        r->ours_ms = r->ref_ms = r->ours_tf = r->ref_tf = r->rel_diff = NAN;
        bg_state_fill(&s, cases[i].dt);
        bg_prep p;
        bg_prep_case(&s, &cases[i], &p);
        const char *path = cml__gemm_cuda_path_name(s.ctx, &p.desc[0], p.d_ours[0], p.a[0], p.b[0], NULL);
        if (strcmp(path, "f32") == 0) {
            snprintf(r->path, sizeof r->path, "f32 %s", cml__gemm_f32_config_name(s.ctx, &p.desc[0]));
        } else if (strcmp(path, "sm90") == 0 && !p.grouped) { /* the plan: rows x width x splits, cluster */
            bool tuned = false;
            const cml__gemm_sm90_config c = cml__gemm_sm90_chosen_config(s.ctx, &p.desc[0], &tuned);
            snprintf(r->path, sizeof r->path, "sm90 %dx%dx%d c%d%s%s", c.rows, c.bn, c.splits, c.cluster,
                     c.pingpong ? " pp" : "", tuned ? " tuned" : "");
        } else {
            snprintf(r->path, sizeof r->path, "%s", path);
        }
        if (!bg_time(&s, &p, r, true)) {
            snprintf(r->error, sizeof r->error, "ours: %s", cml_last_error());
            failures++;
        } else {
            bg_check_outputs(&s, &p, r);
            if (p.ref_error[0]) snprintf(r->error, sizeof r->error, "reference: %s", p.ref_error);
        }
        bg_prep_free(&p);
        cli_progress_finish(&prog);
        print_row(r);
        cli_progress_update(&prog, i + 1, NULL, 0);
    }
    cli_progress_finish(&prog);
    print_summary(res, n);
    if (o->json_path) write_json(o, res, n);
    if (failures) fprintf(stderr, "camel bench gemm: %d case(s) failed on our side (see \"error:\" lines)\n", failures);
    return failures ? 1 : 0;
}
#else
typedef int bench_gemm_run_needs_cuda; /* CPU builds: cmd_bench_gemm.c says that a CUDA build is needed */
#endif
