/* A standalone check of the library's f32 GEMM file (src/kernels/cuda/gemm/gemm_f32.cu,
 * linked in as an object) against cublasSgemm, for when a full library build does not
 * fit in the device time left: the few runtime functions the file calls are stubbed
 * here. Checks every tile configuration (forced through cml__gemm_f32_force_config, and
 * the cost estimate's own pick) on odd shapes in every transpose, strided batches and one
 * epilogue (alpha, beta * C, column bias, ReLU: the reference applies them to cuBLAS's
 * product on the host), poisons D first and runs twice (bitwise equal); then times
 * cml__gemm_f32 (epilogue included, D = A B) under every configuration against cuBLAS on
 * the shapes of `camel bench gemm --set square,gpt2,batched` (same method: L2 flushed
 * before each call, ours and cuBLAS alternating, median).
 *
 * Split K: --splits 1,2,4,8 also forces each of those K splits (cml__gemm_f32_force_splits)
 * in every timed configuration (a column "config/sN" for N > 1, the plain config column for 1)
 * and runs the correctness cases with the pick's configuration under each split count > 1;
 * --match dw times only the shapes whose name contains "dw". The pick column shows the
 * estimate's choice as config/sN when it splits.
 *
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src -I include \
 *        -Xcompiler=-fno-exceptions,-fno-threadsafe-statics -DCML_HAVE_CUDA=1 \
 *        -c src/kernels/cuda/gemm/gemm_f32.cu -o gemm_f32.o
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src -I include \
 *        dev/gemm_f32/f32_check.cu gemm_f32.o -lcublas -o f32_check
 *   ./f32_check [--reps 11] [--only-pick] [--no-check] [--set square,gpt2,batched] [--match dw]
 *               [--splits 1,2,4,8] */
#include <cublas_v2.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "runtime/ctx_impl.h"

/* ---- stubs of the runtime functions gemm_f32.cu calls ---- */
static char last_error[512];
extern "C" cml_status cml__error(cml_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}
extern "C" cml_status cml__cuda_error(int err, const char *fn, const char *call) {
    return cml__error(CML_ERR_CUDA, "%s: %s failed: %s", fn, call, cudaGetErrorString((cudaError_t)err));
}
extern "C" cml_status cml__cuda_activate(const cml_ctx *ctx) { return CML_OK; }
extern "C" int cml__cuda_sm_count(int device) {
    int n = 0;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    return n;
}
extern "C" const char *cml_dtype_name(cml_dtype dt) { return dt == CML_F32 ? "f32" : "other"; }
/* The split-K partials: one growing device buffer, like the runtime's (freed after a sync, as
 * nothing here overlaps). */
extern "C" cml_status cml_ctx_workspace(cml_ctx *ctx, void **ptr, size_t nbytes) {
    if (nbytes > ctx->workspace_size) {
        if (ctx->workspace) cudaStreamSynchronize((cudaStream_t)ctx->stream), cudaFree(ctx->workspace);
        ctx->workspace = NULL, ctx->workspace_size = 0;
        if (cudaMalloc(&ctx->workspace, nbytes) != cudaSuccess) return cml__error(CML_ERR_OOM, "workspace of %zu bytes", nbytes);
        ctx->workspace_size = nbytes;
    }
    *ptr = ctx->workspace;
    return CML_OK;
}
extern "C" cml_gemm_desc cml_gemm_desc_init(cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K, int64_t batch,
                                            cml_dtype ab, cml_dtype cd) {
    cml_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.op_a = op_a, d.op_b = op_b, d.M = M, d.N = N, d.K = K, d.batch = batch;
    d.a_dtype = d.b_dtype = ab, d.c_dtype = d.d_dtype = cd;
    d.lda = op_a == CML_OP_N ? K : M, d.ldb = op_b == CML_OP_N ? N : K, d.ldc = d.ldd = d.ldaux = N;
    d.stride_a = M * K, d.stride_b = K * N, d.stride_c = d.stride_d = d.stride_aux = M * N;
    d.alpha = 1.0f;
    return d;
}

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static cublasHandle_t blas;
static cml_ctx ctx;

static void fill(float *d, size_t n, unsigned seed) {
    float *h = (float *)malloc(n * sizeof(float));
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        h[i] = (float)((s * 0x2545F4914F6CDD1Dull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
    CK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
}

/* One case: D = relu(alpha A B + beta C + bias) when epi, else A B; ld padded to 4 (+4 * pad). */
static int check_case(int M, int N, int K, int batch, bool a_t, bool b_t, int pad, bool epi) {
    cml_gemm_desc d = cml_gemm_desc_init(a_t ? CML_OP_T : CML_OP_N, b_t ? CML_OP_T : CML_OP_N, M, N, K, batch, CML_F32,
                                         CML_F32);
    const int a_rows = a_t ? K : M, a_cols = a_t ? M : K, b_rows = b_t ? N : K, b_cols = b_t ? K : N;
    d.lda = (a_cols + 3) / 4 * 4 + 4 * pad;
    d.ldb = (b_cols + 3) / 4 * 4 + 4 * pad;
    d.ldd = d.ldc = N + pad;
    d.stride_a = (long long)a_rows * d.lda + 8;
    d.stride_b = (long long)b_rows * d.ldb + 4;
    d.stride_d = d.stride_c = (long long)M * d.ldd + 3;
    const size_t na = d.stride_a * batch, nb = d.stride_b * batch, nd = d.stride_d * batch;
    float *A, *B, *C, *D, *R, *bias;
    CK(cudaMalloc(&A, na * 4));
    CK(cudaMalloc(&B, nb * 4));
    CK(cudaMalloc(&C, nd * 4));
    CK(cudaMalloc(&D, nd * 4));
    CK(cudaMalloc(&R, nd * 4));
    CK(cudaMalloc(&bias, N * 4));
    fill(A, na, M + 7u * K), fill(B, nb, N + 3u * K), fill(C, nd, 5), fill(bias, N, 9);
    if (epi) {
        d.alpha = 0.75f, d.beta = 0.5f, d.bias = bias, d.epilogue = CML_EPILOGUE_RELU;
    }
    int bad = 0;
    if (!cml__gemm_f32_takes(&ctx, &d, D, A, B, C)) {
        printf("  NOT TAKEN: %dx%dx%d b=%d\n", M, N, K, batch);
        return 1;
    }
    float *h1 = (float *)malloc(nd * 4), *h2 = (float *)malloc(nd * 4), *hr = (float *)malloc(nd * 4),
          *hc = (float *)malloc(nd * 4), *hb = (float *)malloc(N * 4);
    for (int run = 0; run < 2; run++) {
        CK(cudaMemset(D, 0xFF, nd * 4));
        cml_status st = cml__gemm_f32(&ctx, &d, D, A, B, epi ? C : NULL);
        if (st != CML_OK) {
            printf("  FAILED: %s\n", last_error);
            return 1;
        }
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(run ? h2 : h1, D, nd * 4, cudaMemcpyDeviceToHost));
    }
    if (memcmp(h1, h2, nd * 4) != 0) printf("  REPEAT DIFFERS\n"), bad++;
    const float one = 1.0f, zero = 0.0f;
    CK(cudaMemset(R, 0, nd * 4));
    cublasSgemmStridedBatched(blas, b_t ? CUBLAS_OP_T : CUBLAS_OP_N, a_t ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B,
                              d.ldb, d.stride_b, A, d.lda, d.stride_a, &zero, R, d.ldd, d.stride_d, batch);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hr, R, nd * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hc, C, nd * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb, bias, N * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (int b = 0; b < batch; b++)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                const size_t i = b * d.stride_d + (size_t)m * d.ldd + n;
                double want = hr[i];
                if (epi) {
                    want = 0.75 * want + 0.5 * hc[i] + hb[n];
                    want = want > 0 ? want : 0;
                }
                const double got = h1[i];
                if (isnan(got)) {
                    num = INFINITY;
                    break;
                }
                num += (got - want) * (got - want), den += want * want;
            }
    const double err = sqrt(num / (den > 0 ? den : 1));
    /* the padding after each row and between batches must still be poison */
    int touched = 0;
    for (size_t i = 0; i < nd; i++) {
        const size_t b = i / d.stride_d, r = i % d.stride_d;
        const bool inside = b < (size_t)batch && r / d.ldd < (size_t)M && r % d.ldd < (size_t)N;
        unsigned u;
        memcpy(&u, &h1[i], 4);
        if (!inside && u != 0xFFFFFFFFu) touched++;
    }
    if (!(err < 1e-5) || touched) {
        printf("  WRONG %dx%dx%d b=%d %c%c epi=%d: rel err %.3g, %d padding elements written (config %s, %d splits)\n",
               M, N, K, batch, a_t ? 'T' : 'N', b_t ? 'T' : 'N', epi, err, touched,
               cml__gemm_f32_config_name(&ctx, &d), cml__gemm_f32_splits(&ctx, &d));
        bad++;
    }
    free(h1), free(h2), free(hr), free(hc), free(hb);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(D)); CK(cudaFree(R)); CK(cudaFree(bias));
    return bad;
}

static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct shape {
    const char *set, *name;
    bool a_t, b_t;
    int M, N, K, batch;
} shape;

/* The cases of `camel bench gemm --dtype f32 --set square,gpt2,batched --sizes 2048,4096,8192`. */
static const shape SHAPES[] = {
    {"square", "2048", 0, 0, 2048, 2048, 2048, 1},        {"square", "4096", 0, 0, 4096, 4096, 4096, 1},
    {"square", "8192", 0, 0, 8192, 8192, 8192, 1},        {"gpt2", "qkv fwd", 0, 1, 8192, 2304, 768, 1},
    {"gpt2", "qkv dx", 0, 0, 8192, 768, 2304, 1},         {"gpt2", "qkv dw", 1, 0, 2304, 768, 8192, 1},
    {"gpt2", "proj fwd", 0, 1, 8192, 768, 768, 1},        {"gpt2", "proj dx", 0, 0, 8192, 768, 768, 1},
    {"gpt2", "proj dw", 1, 0, 768, 768, 8192, 1},         {"gpt2", "fc fwd", 0, 1, 8192, 3072, 768, 1},
    {"gpt2", "fc dx", 0, 0, 8192, 768, 3072, 1},          {"gpt2", "fc dw", 1, 0, 3072, 768, 8192, 1},
    {"gpt2", "mproj fwd", 0, 1, 8192, 768, 3072, 1},      {"gpt2", "mproj dx", 0, 0, 8192, 3072, 768, 1},
    {"gpt2", "mproj dw", 1, 0, 768, 3072, 8192, 1},       {"gpt2", "lm fwd", 0, 1, 8192, 50304, 768, 1},
    {"gpt2", "lm dx", 0, 0, 8192, 768, 50304, 1},         {"gpt2", "lm dw", 1, 0, 50304, 768, 8192, 1},
    {"batched", "64x1024^3", 0, 0, 1024, 1024, 1024, 64}, {"batched", "8192x8192x1024", 0, 0, 8192, 8192, 1024, 1},
};

static float *flush_buf;
static cudaEvent_t e0, e1;
static cudaStream_t stream;

/* ms of one call (L2 flushed first); side 0: ours (config `cfg`, NULL = pick), 1: cuBLAS. */
static float time_once(int side, const cml_gemm_desc *d, float *D, const float *A, const float *B, int flush) {
    CK(cudaMemsetAsync(flush_buf, flush & 0xFF, 256 << 20, stream));
    CK(cudaEventRecord(e0, stream));
    if (side == 0) {
        if (cml__gemm_f32(&ctx, d, D, A, B, NULL) != CML_OK) {
            printf("FAILED: %s\n", last_error);
            exit(1);
        }
    } else {
        const float one = 1.0f, zero = 0.0f;
        cublasSgemmStridedBatched(blas, d->op_b == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  d->op_a == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N, (int)d->N, (int)d->M, (int)d->K,
                                  &one, B, (int)d->ldb, d->stride_b, A, (int)d->lda, d->stride_a, &zero, D,
                                  (int)d->ldd, d->stride_d, (int)d->batch);
    }
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
}

int main(int argc, char **argv) {
    int reps = 11;
    bool only_pick = false, check = true;
    const char *sets = "square,gpt2,batched", *match = "";
    int splits[16] = {1}, n_splits = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only-pick")) only_pick = true;
        else if (!strcmp(argv[i], "--no-check")) check = false;
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets = argv[++i];
        else if (!strcmp(argv[i], "--match") && i + 1 < argc) match = argv[++i];
        else if (!strcmp(argv[i], "--splits") && i + 1 < argc) {
            n_splits = 0;
            for (char *p = argv[++i]; *p && n_splits < 16;) {
                const int v = (int)strtol(p, &p, 10);
                if (!cml__gemm_f32_force_splits(v) || v < 1) {
                    fprintf(stderr, "--splits: %d is not a split count (1..16)\n", v);
                    return 2;
                }
                splits[n_splits++] = v;
                if (*p == ',') p++;
            }
            cml__gemm_f32_force_splits(0);
            if (n_splits == 0) splits[n_splits++] = 1;
        }
    }
    if (reps < 1 || reps > 64) reps = 11;
    ctx.device.type = CML_CUDA;
    ctx.device.index = 0;
    CK(cudaStreamCreate(&stream));
    ctx.stream = stream;
    cublasCreate(&blas);
    cublasSetStream(blas, stream);
    cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);
    int n_cfg = 0;
    while (cml__gemm_f32_config_at(n_cfg)) n_cfg++;

    int bad = 0;
    if (check) {
        static const int shapes[][4] = {{1, 1, 1, 1},       {7, 127, 5, 1},    {127, 1025, 9, 1},  {1025, 130, 1023, 1},
                                        {300, 77, 4095, 1}, {70, 90, 50, 3},   {1920, 1088, 24, 1}, {2048, 2048, 16, 1},
                                        {4100, 4093, 19, 1}, {3, 5, 4, 70000}, {257, 129, 33, 2}};
        for (int c = -1; c < n_cfg; c++) {
            const char *name = c < 0 ? NULL : cml__gemm_f32_config_at(c);
            cml__gemm_f32_force_config(name);
            int bad_c = 0, cases = 0;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int t = 0; t < 4; t++) {
                    bad_c += check_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], t & 1, t & 2,
                                        (int)(s % 3), s % 2 == 1);
                    cases++;
                }
            printf("correctness (%s): %d of %d cases wrong\n", name ? name : "pick", bad_c, cases);
            bad += bad_c;
        }
        cml__gemm_f32_force_config(NULL);
        for (int j = 0; j < n_splits; j++) { /* split K, forced, with the estimate's configuration */
            if (splits[j] == 1) continue;
            cml__gemm_f32_force_splits(splits[j]);
            int bad_c = 0, cases = 0;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int t = 0; t < 4; t++) {
                    bad_c += check_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], t & 1, t & 2,
                                        (int)(s % 3), s % 2 == 0);
                    cases++;
                }
            printf("correctness (pick, %d splits forced): %d of %d cases wrong\n", splits[j], bad_c, cases);
            bad += bad_c;
        }
        cml__gemm_f32_force_splits(0);
    }

    /* timing: D = A B on the bench's shapes, every configuration and the pick, vs cuBLAS */
    size_t max_a = 0, max_b = 0, max_d = 0;
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const shape *x = &SHAPES[s];
        const size_t bt = (size_t)x->batch;
        max_a = max_a > bt * x->M * x->K ? max_a : bt * x->M * x->K;
        max_b = max_b > bt * x->K * x->N ? max_b : bt * x->K * x->N;
        max_d = max_d > bt * x->M * x->N ? max_d : bt * x->M * x->N;
    }
    float *A, *B, *D;
    CK(cudaMalloc(&flush_buf, 256 << 20));
    CK(cudaMalloc(&A, max_a * 4));
    CK(cudaMalloc(&B, max_b * 4));
    CK(cudaMalloc(&D, max_d * 4));
    fill(A, max_a, 1), fill(B, max_b, 2);
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("\ntiming: TFLOP/s, median of %d calls each, L2 flushed; ratio = ours / cuBLAS\n", reps);
    printf("%-8s %-15s %2s %7s", "set", "shape", "op", "cuBLAS");
    printf(" %-22s", "pick");
    if (!only_pick)
        for (int c = 0; c < n_cfg; c++)
            for (int j = 0; j < n_splits; j++) {
                char col[64];
                if (splits[j] == 1) snprintf(col, sizeof col, "%s", cml__gemm_f32_config_at(c));
                else snprintf(col, sizeof col, "%s/s%d", cml__gemm_f32_config_at(c), splits[j]);
                printf(" %14s", col);
            }
    printf("\n");
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const shape *x = &SHAPES[s];
        if (!strstr(sets, x->set) || !strstr(x->name, match)) continue;
        cml_gemm_desc d = cml_gemm_desc_init(x->a_t ? CML_OP_T : CML_OP_N, x->b_t ? CML_OP_T : CML_OP_N, x->M, x->N, x->K,
                                             x->batch, CML_F32, CML_F32);
        const double flop = 2.0 * x->M * (double)x->N * x->K * x->batch;
        float t[2][64];
        /* cuBLAS once per shape, alternating with the pick (as the bench does) */
        cml__gemm_f32_force_config(NULL);
        for (int i = -2; i < reps; i++)
            for (int side = 0; side < 2; side++) {
                const float ms = time_once(side, &d, D, A, B, i);
                if (i >= 0) t[side][i] = ms;
            }
        qsort(t[0], reps, 4, cmpf), qsort(t[1], reps, 4, cmpf);
        const double ref = flop / t[1][reps / 2] * 1e-9, pick = flop / t[0][reps / 2] * 1e-9;
        char pick_name[64];
        const int pick_splits = cml__gemm_f32_splits(&ctx, &d);
        if (pick_splits > 1) snprintf(pick_name, sizeof pick_name, "%s/s%d", cml__gemm_f32_config_name(&ctx, &d), pick_splits);
        else snprintf(pick_name, sizeof pick_name, "%s", cml__gemm_f32_config_name(&ctx, &d));
        printf("%-8s %-15s %c%c %7.2f %6.2f %5.3f %-9s", x->set, x->name, x->a_t ? 'T' : 'N', x->b_t ? 'T' : 'N', ref,
               pick, pick / ref, pick_name);
        if (!only_pick)
            for (int c = 0; c < n_cfg; c++)
                for (int j = 0; j < n_splits; j++) {
                    cml__gemm_f32_force_config(cml__gemm_f32_config_at(c));
                    cml__gemm_f32_force_splits(splits[j]);
                    for (int i = -1; i < reps; i++) {
                        const float ms = time_once(0, &d, D, A, B, i);
                        if (i >= 0) t[0][i] = ms;
                    }
                    qsort(t[0], reps, 4, cmpf);
                    const double ours = flop / t[0][reps / 2] * 1e-9;
                    printf(" %6.2f %5.3f  ", ours, ours / ref);
                }
        cml__gemm_f32_force_config(NULL);
        cml__gemm_f32_force_splits(0);
        printf("\n");
        fflush(stdout);
    }
    return bad ? 1 : 0;
}
