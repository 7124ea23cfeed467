/* Session 12 (helper h12c): the f32 GEMM's old main loop (CML_F32_ASYNC=0) against the cp.async
 * one (CML_F32_ASYNC=1) in one binary. gemm_f32.cu is compiled twice with its entry points
 * renamed (_old / _new suffixes, see run_s12c.sh) and linked here with the few runtime functions
 * it calls stubbed (as f32_check.cu does).
 *   1. correctness, both builds, the estimate's configuration and every one forced, and 2 / 5
 *      K splits forced: odd shapes (1, 7, 127, 1025, ...), all four transposes, padded leading
 *      dimensions, a batch; D poisoned first; each element against a float64 host reference
 *      within the sequential-summation bound K * 2^-23 * sum_k |a_k b_k|; padding untouched;
 *      new run twice (bitwise repeatable) and bitwise equal to old (same summation order);
 *   2. timing: old, new, cublasSgemm in turns (each call after a 256 MiB memset: L2 flushed),
 *      `--rounds` rounds of `--reps` calls each (the order rotates every round), medians; the
 *      squares also with 128x128x16/16x8 forced in both builds.
 * The summary (ratio to cuBLAS per shape) is printed last. */
#include <cublas_v2.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "runtime/ctx_impl.h"

#define DECL(S)                                                                                                       \
    extern "C" bool cml__gemm_f32_takes##S(const cml_ctx *, const cml_gemm_desc *, const void *, const void *,          \
                                          const void *, const void *);                                               \
    extern "C" cml_status cml__gemm_f32##S(cml_ctx *, const cml_gemm_desc *, void *, const void *, const void *,       \
                                          const void *);                                                             \
    extern "C" const char *cml__gemm_f32_config_name##S(const cml_ctx *, const cml_gemm_desc *);                      \
    extern "C" const char *cml__gemm_f32_config_at##S(int);                                                           \
    extern "C" bool cml__gemm_f32_force_config##S(const char *);                                                      \
    extern "C" bool cml__gemm_f32_force_splits##S(int);                                                               \
    extern "C" int cml__gemm_f32_splits##S(const cml_ctx *, const cml_gemm_desc *);
DECL(_old)
DECL(_new)

typedef struct impl {
    const char *name;
    bool (*takes)(const cml_ctx *, const cml_gemm_desc *, const void *, const void *, const void *, const void *);
    cml_status (*run)(cml_ctx *, const cml_gemm_desc *, void *, const void *, const void *, const void *);
    const char *(*config_name)(const cml_ctx *, const cml_gemm_desc *);
    const char *(*config_at)(int);
    bool (*force_config)(const char *);
    bool (*force_splits)(int);
    int (*splits)(const cml_ctx *, const cml_gemm_desc *);
} impl;
#define IMPL(S, N)                                                                                                    \
    {N, cml__gemm_f32_takes##S, cml__gemm_f32##S, cml__gemm_f32_config_name##S, cml__gemm_f32_config_at##S,          \
     cml__gemm_f32_force_config##S, cml__gemm_f32_force_splits##S, cml__gemm_f32_splits##S}
static const impl IMPLS[2] = {IMPL(_old, "old"), IMPL(_new, "new")};

/* ---- stubs of the runtime functions gemm_f32.cu calls (as in f32_check.cu) ---- */
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
static unsigned long long seed_state;

/* fresh random data every call: the seed moves on */
static void fill(float *d, size_t n) {
    float *h = (float *)malloc(n * sizeof(float));
    unsigned long long s = (seed_state += 0x9E3779B97F4A7C15ull);
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        h[i] = (float)((s * 0x2545F4914F6CDD1Dull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
    CK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
}

static cml_gemm_desc make_desc(bool a_t, bool b_t, long long M, long long N, long long K, long long batch) {
    cml_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.op_a = a_t ? CML_OP_T : CML_OP_N, d.op_b = b_t ? CML_OP_T : CML_OP_N;
    d.M = M, d.N = N, d.K = K, d.batch = batch;
    d.a_dtype = d.b_dtype = d.c_dtype = d.d_dtype = CML_F32;
    d.lda = a_t ? M : K, d.ldb = b_t ? K : N, d.ldc = d.ldd = d.ldaux = N;
    d.stride_a = M * K, d.stride_b = K * N, d.stride_c = d.stride_d = d.stride_aux = M * N;
    d.alpha = 1.0f;
    return d;
}

/* One shape with one forced configuration (NULL: the estimate's) and forced splits (0: the
 * estimate's), both builds. Returns the number of failures. */
static int check_case(int M, int N, int K, int batch, bool a_t, bool b_t, int pad, const char *cfg, int splits) {
    cml_gemm_desc d = make_desc(a_t, b_t, M, N, K, batch);
    const int a_rows = a_t ? K : M, a_cols = a_t ? M : K, b_rows = b_t ? N : K, b_cols = b_t ? K : N;
    d.lda = (a_cols + 3) / 4 * 4 + 4 * pad;
    d.ldb = (b_cols + 3) / 4 * 4 + 4 * pad;
    d.ldd = N + pad;
    d.stride_a = (long long)a_rows * d.lda + 8;
    d.stride_b = (long long)b_rows * d.ldb + 4;
    d.stride_d = (long long)M * d.ldd + 3;
    const size_t na = d.stride_a * batch, nb = d.stride_b * batch, nd = d.stride_d * batch;
    float *A, *B, *D;
    CK(cudaMalloc(&A, na * 4));
    CK(cudaMalloc(&B, nb * 4));
    CK(cudaMalloc(&D, nd * 4));
    fill(A, na), fill(B, nb);
    float *ha = (float *)malloc(na * 4), *hb = (float *)malloc(nb * 4), *out[3];
    CK(cudaMemcpy(ha, A, na * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb, B, nb * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int r = 0; r < 3; r++) { /* old, new, new again */
        const impl *im = &IMPLS[r == 0 ? 0 : 1];
        out[r] = (float *)malloc(nd * 4);
        if (!im->force_config(cfg) || !im->force_splits(splits)) {
            printf("  cannot force %s / %d splits\n", cfg ? cfg : "pick", splits);
            bad++;
        }
        if (!im->takes(&ctx, &d, D, A, B, NULL)) {
            printf("  NOT TAKEN (%s): %dx%dx%d\n", im->name, M, N, K);
            bad++;
            continue;
        }
        CK(cudaMemset(D, 0xFF, nd * 4)); /* poison: NaN */
        if (im->run(&ctx, &d, D, A, B, NULL) != CML_OK) {
            printf("  FAILED (%s): %s\n", im->name, last_error);
            bad++;
        }
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(out[r], D, nd * 4, cudaMemcpyDeviceToHost));
        im->force_config(NULL), im->force_splits(0);
    }
    /* float64 reference for every element, sequential-summation error bound */
    long long wrong = 0, touched = 0;
    double worst = 0;
    for (int bt = 0; bt < batch; bt++)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double s = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    const double a = ha[bt * d.stride_a + (a_t ? (size_t)k * d.lda + m : (size_t)m * d.lda + k)];
                    const double b = hb[bt * d.stride_b + (b_t ? (size_t)n * d.ldb + k : (size_t)k * d.ldb + n)];
                    s += a * b, mag += fabs(a * b);
                }
                const double got = out[1][bt * d.stride_d + (size_t)m * d.ldd + n];
                const double err = fabs(got - s), bound = K * ldexp(1.0, -23) * mag + 1e-30;
                if (!(err <= bound)) wrong++; /* NaN (untouched poison) fails too */
                if (err / bound > worst) worst = err / bound;
            }
    for (size_t i = 0; i < nd; i++) { /* padding after rows and between batches still poison */
        const size_t bt = i / d.stride_d, r = i % d.stride_d;
        const bool inside = bt < (size_t)batch && r / d.ldd < (size_t)M && r % d.ldd < (size_t)N;
        unsigned u;
        memcpy(&u, &out[1][i], 4);
        if (!inside && u != 0xFFFFFFFFu) touched++;
    }
    const bool repeat = memcmp(out[1], out[2], nd * 4) == 0, same_as_old = memcmp(out[0], out[1], nd * 4) == 0;
    if (wrong || touched || !repeat || !same_as_old) {
        printf("  WRONG %dx%dx%d b=%d %c%c cfg=%s splits=%d: %lld elements outside the bound (worst %.2f x bound), "
               "%lld padding written, repeat %s, %s old\n",
               M, N, K, batch, a_t ? 'T' : 'N', b_t ? 'T' : 'N', cfg ? cfg : "pick", splits, wrong, worst, touched,
               repeat ? "bitwise" : "DIFFERS", same_as_old ? "bitwise equal to" : "DIFFERS from");
        bad++;
    }
    for (int r = 0; r < 3; r++) free(out[r]);
    free(ha), free(hb);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D));
    return bad;
}

static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct shape {
    const char *name;
    bool a_t, b_t;
    int M, N, K;
    bool square;
} shape;
static const shape SHAPES[] = {
    {"2048^3", 0, 0, 2048, 2048, 2048, 1},          {"4096^3", 0, 0, 4096, 4096, 4096, 1},
    {"8192^3", 0, 0, 8192, 8192, 8192, 1},          {"qkv fwd 8192x2304x768", 0, 1, 8192, 2304, 768, 0},
    {"fc fwd 8192x3072x768", 0, 1, 8192, 3072, 768, 0}, {"fc dx 8192x768x3072", 0, 0, 8192, 768, 3072, 0},
    {"proj dw 768x768x8192", 1, 0, 768, 768, 8192, 0},
};

static float *flush_buf;
static cudaEvent_t e0, e1;
static cudaStream_t stream;

/* ms of one call after an L2 flush; side 0 old, 1 new, 2 cuBLAS */
static float time_once(int side, const cml_gemm_desc *d, float *D, const float *A, const float *B, int salt) {
    CK(cudaMemsetAsync(flush_buf, salt & 0xFF, 256 << 20, stream));
    CK(cudaEventRecord(e0, stream));
    if (side < 2) {
        if (IMPLS[side].run(&ctx, d, D, A, B, NULL) != CML_OK) {
            printf("FAILED: %s\n", last_error);
            exit(1);
        }
    } else {
        const float one = 1.0f, zero = 0.0f;
        cublasSgemm(blas, d->op_b == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N, d->op_a == CML_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N,
                    (int)d->N, (int)d->M, (int)d->K, &one, B, (int)d->ldb, A, (int)d->lda, &zero, D, (int)d->ldd);
    }
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
}

int main(int argc, char **argv) {
    int reps = 9, rounds = 2;
    bool check = true, timing = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-check")) check = false;
        else if (!strcmp(argv[i], "--no-timing")) timing = false;
    }
    if (reps < 1 || reps > 64) reps = 9;
    if (rounds < 1 || rounds > 8) rounds = 2;
    seed_state = 12345;
    ctx.device.type = CML_CUDA;
    ctx.device.index = 0;
    CK(cudaStreamCreate(&stream));
    ctx.stream = stream;
    cublasCreate(&blas);
    cublasSetStream(blas, stream);
    cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);

    int bad = 0, cases = 0;
    if (check) {
        static const int shapes[][4] = {{1, 1, 1, 1},     {7, 127, 5, 1},    {127, 1025, 9, 1}, {1025, 130, 1023, 1},
                                        {300, 77, 4095, 1}, {70, 90, 50, 3}, {129, 257, 127, 1}, {1, 2049, 33, 1},
                                        {2049, 1, 17, 1}, {257, 129, 1025, 2}, {64, 64, 16, 1}, {131, 67, 4097, 1}};
        int n_cfg = 0;
        while (IMPLS[1].config_at(n_cfg)) n_cfg++;
        for (int c = -1; c < n_cfg; c++)
            for (int sp = 0; sp < (c < 0 ? 3 : 1); sp++) { /* the pick also with 2 and 5 splits forced */
                const char *cfg = c < 0 ? NULL : IMPLS[1].config_at(c);
                const int splits = sp == 0 ? 0 : (sp == 1 ? 2 : 5);
                int bad_c = 0, n = 0;
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                    for (int t = 0; t < 4; t++, n++)
                        bad_c += check_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], t & 1, t & 2,
                                            (int)(s % 3), cfg, splits);
                printf("correctness (%s, splits %s): %d of %d cases wrong\n", cfg ? cfg : "pick",
                       splits ? (splits == 2 ? "2" : "5") : "estimate", bad_c, n);
                fflush(stdout);
                bad += bad_c, cases += n;
            }
    }

    char summary[4096] = "";
    if (timing) {
        float *A, *B, *D;
        const size_t most = 8192ull * 8192;
        CK(cudaMalloc(&flush_buf, 256 << 20));
        CK(cudaMalloc(&A, most * 4));
        CK(cudaMalloc(&B, most * 4));
        CK(cudaMalloc(&D, most * 4));
        fill(A, most), fill(B, most);
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        printf("\ntiming: TFLOP/s (median of %d calls a round, L2 flushed; old, new, cuBLAS in turns)\n", reps);
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
            const shape *x = &SHAPES[s];
            const cml_gemm_desc d = make_desc(x->a_t, x->b_t, x->M, x->N, x->K, 1);
            const double flop = 2.0 * x->M * (double)x->N * x->K;
            for (int f = 0; f < (x->square ? 2 : 1); f++) {
                const char *cfg = f ? "128x128x16/16x8" : NULL;
                for (int i = 0; i < 2; i++) IMPLS[i].force_config(cfg);
                float *all[3];
                for (int side = 0; side < 3; side++) all[side] = (float *)malloc(sizeof(float) * reps * rounds);
                for (int r = 0; r < rounds; r++) {
                    for (int i = -1; i < reps; i++)
                        for (int o = 0; o < 3; o++) {
                            const int side = (o + r) % 3; /* the order rotates each round */
                            const float ms = time_once(side, &d, D, A, B, i + 7 * r);
                            if (i >= 0) all[side][r * reps + i] = ms;
                        }
                    double tf[3];
                    for (int side = 0; side < 3; side++) {
                        float t[64];
                        memcpy(t, all[side] + r * reps, sizeof(float) * reps);
                        qsort(t, reps, 4, cmpf);
                        tf[side] = flop / t[reps / 2] * 1e-9;
                    }
                    printf("%-24s %-16s round %d: cuBLAS %6.2f  old %6.2f (%.3f)  new %6.2f (%.3f)  new/old %.3f\n",
                           x->name, cfg ? cfg : IMPLS[1].config_name(&ctx, &d), r, tf[2], tf[0], tf[0] / tf[2], tf[1],
                           tf[1] / tf[2], tf[1] / tf[0]);
                    fflush(stdout);
                }
                double med[3];
                for (int side = 0; side < 3; side++) {
                    qsort(all[side], reps * rounds, 4, cmpf);
                    med[side] = flop / all[side][reps * rounds / 2] * 1e-9;
                    free(all[side]);
                }
                char line[256];
                char cfg_name[64];
                snprintf(cfg_name, sizeof cfg_name, "%s%s", cfg ? cfg : IMPLS[1].config_name(&ctx, &d),
                         !cfg && IMPLS[1].splits(&ctx, &d) > 1 ? "/split" : "");
                snprintf(line, sizeof line, "%-24s %-22s cuBLAS %6.2f | old %6.2f %.3f | new %6.2f %.3f | new/old %.3f\n",
                         x->name, cfg_name, med[2], med[0], med[0] / med[2], med[1], med[1] / med[2], med[1] / med[0]);
                strncat(summary, line, sizeof summary - strlen(summary) - 1);
                for (int i = 0; i < 2; i++) IMPLS[i].force_config(NULL);
            }
        }
    }
    printf("\n== s12c summary: correctness %d of %d cases wrong (new vs float64 bound, repeat, bitwise = old)\n", bad,
           cases);
    printf("shape                    config                 TFLOP/s & ratio to cuBLAS (median of all rounds)\n%s",
           summary);
    return bad ? 1 : 0;
}
