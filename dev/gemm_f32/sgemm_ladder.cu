/* The ladder of exact-f32 GEMM versions behind src/kernels/cuda/gemm/gemm_f32.cu,
 * each timed against cublasSgemm (CUBLAS_DEFAULT_MATH: no tf32) in the same
 * process on the same buffers. Versions 1-3 live here; 4 and up are the
 * library's own main loop (gemm_f32_tile.cuh) in different configurations,
 * writing D plainly (alpha 1, beta 0) instead of through the epilogue.
 *
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src -lineinfo \
 *        -Xptxas=-v dev/gemm_f32/sgemm_ladder.cu -lcublas -o sgemm_ladder
 *   ./sgemm_ladder [--sizes 1024,2048,4096,8192] [--reps 15] [--versions 1,2,...]
 *
 * Method: random inputs in [-1, 1); 2 warm-up calls; median of --reps calls
 * timed with CUDA events, each after an untimed 256 MiB memset (L2 flush);
 * every version's output is compared with cuBLAS's (norm-wise relative
 * difference) at every size, and checked again on odd shapes (all four
 * transposes) before timing. See README.md for the measured numbers. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gemm/gemm_f32_tile.cuh"

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* ---- v1: shared-memory tiles of 32 x 32, one output per thread ---------------------------- */
__global__ void v1_kernel(int M, int N, int K, const float *A, const float *B, float *D) {
    __shared__ float As[32][33], Bs[32][33];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int m = blockIdx.y * 32 + ty, n = blockIdx.x * 32 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 32) {
        As[ty][tx] = m < M && k0 + tx < K ? A[(long long)m * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = k0 + ty < K && n < N ? B[(long long)(k0 + ty) * N + n] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 32; k++) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (m < M && n < N) D[(long long)m * N + n] = acc;
}

/* ---- v2: 128 x 128 x 8 tiles, 8 x 8 contiguous outputs per thread, scalar loads ----------- */
/* ---- v3: v2 with float4 global loads (A stored transposed) and float4 fragment reads ------ */
template <bool VEC> __global__ void __launch_bounds__(256, 2) v23_kernel(int M, int N, int K, const float *A,
                                                                         const float *B, float *D) {
    __shared__ __align__(16) float As[8][128 + 4], Bs[8][128];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 128;
    float acc[8][8] = {};
    for (int k0 = 0; k0 < K; k0 += 8) { /* sizes here are multiples of the tile */
        if (VEC) {
            const int ar = tid / 2, ak = (tid % 2) * 4, bk = tid / 32, bn = (tid % 32) * 4;
            float4 a = *(const float4 *)&A[(long long)(m0 + ar) * K + k0 + ak];
            As[ak + 0][ar] = a.x, As[ak + 1][ar] = a.y, As[ak + 2][ar] = a.z, As[ak + 3][ar] = a.w;
            *(float4 *)&Bs[bk][bn] = *(const float4 *)&B[(long long)(k0 + bk) * N + n0 + bn];
        } else {
            for (int i = tid; i < 1024; i += 256) {
                const int ar = i / 8, ak = i % 8, bk = i / 128, bn = i % 128;
                As[ak][ar] = A[(long long)(m0 + ar) * K + k0 + ak];
                Bs[bk][bn] = B[(long long)(k0 + bk) * N + n0 + bn];
            }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float a[8], b[8];
            if (VEC) {
                *(float4 *)&a[0] = *(const float4 *)&As[k][ty * 8];
                *(float4 *)&a[4] = *(const float4 *)&As[k][ty * 8 + 4];
                *(float4 *)&b[0] = *(const float4 *)&Bs[k][tx * 8];
                *(float4 *)&b[4] = *(const float4 *)&Bs[k][tx * 8 + 4];
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) a[i] = As[k][ty * 8 + i], b[i] = Bs[k][tx * 8 + i];
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j += 4)
            *(float4 *)&D[(long long)(m0 + ty * 8 + i) * N + n0 + tx * 8 + j] =
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}

/* ---- v4+: the library's main loop (warp tiling; STAGES 1 or 2; TM x 8 results a thread) ---- */
template <int BM, int BN, int BK, int TM, bool A_T, bool B_T, int STAGES, int MINB>
__global__ void __launch_bounds__(CML_F32_THREADS(BM, BN, TM), MINB)
    tile_kernel(int M, int N, int K, const float *A, long long lda, const float *B, long long ldb, float *D,
                long long ldd) {
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][8];
    cml__f32_mainloop<BM, BN, BK, TM, A_T, B_T, STAGES>(acc, A, (int)lda, B, (int)ldb, M, N, K, m0, n0);
    const cml__f32_thread_pos<BN, TM> pos(threadIdx.x);
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int m = m0 + pos.row0 + (i / 4) * 16 + i % 4;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int n = n0 + pos.col0 + (j / 4) * 32 + j % 4;
            if (m < M && n < N) D[(long long)m * ldd + n] = acc[i][j];
        }
    }
}

/* ---- driver ---------------------------------------------------------------------------- */
typedef struct prob {
    int M, N, K;
    bool a_t, b_t;
    long long lda, ldb, ldd;
    const float *A, *B;
    float *D;
} prob;

typedef struct version {
    const char *name;
    bool general; /* handles any shape, transposes and ld; else square NN multiples of 128 only */
    void (*launch)(const prob *p);
} version;

static void launch_v1(const prob *p) {
    dim3 grid((p->N + 31) / 32, (p->M + 31) / 32);
    v1_kernel<<<grid, 1024>>>(p->M, p->N, p->K, p->A, p->B, p->D);
}
template <bool VEC> static void launch_v23(const prob *p) {
    dim3 grid(p->N / 128, p->M / 128);
    v23_kernel<VEC><<<grid, 256>>>(p->M, p->N, p->K, p->A, p->B, p->D);
}
/* Default blocks per SM: TM = 8 keeps a thread at <= 128 registers (2 blocks of 256),
 * TM = 16 (128 accumulators) lets it take up to 255. */
#define DEFAULT_MINB(BM, BN, TM) ((TM) == 8 ? 65536 / (CML_F32_THREADS(BM, BN, TM) * 128) : 256 / CML_F32_THREADS(BM, BN, TM))

template <int BM, int BN, int BK, int TM, bool AT, bool BT, int STAGES, int MINB>
static void launch_one(const prob *p) {
    constexpr int smem = cml__f32_smem_bytes<BM, BN, BK, AT, BT, STAGES>();
    static bool attr_set = false;
    if (smem > 48 * 1024 && !attr_set) {
        CK(cudaFuncSetAttribute(tile_kernel<BM, BN, BK, TM, AT, BT, STAGES, MINB>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        attr_set = true;
    }
    dim3 grid((p->N + BN - 1) / BN, (p->M + BM - 1) / BM);
    tile_kernel<BM, BN, BK, TM, AT, BT, STAGES, MINB><<<grid, CML_F32_THREADS(BM, BN, TM), smem>>>(
        p->M, p->N, p->K, p->A, p->lda, p->B, p->ldb, p->D, p->ldd);
}

template <int BM, int BN, int BK, int TM, int STAGES, int MINB = DEFAULT_MINB(BM, BN, TM)>
static void launch_tile(const prob *p) {
    if (!p->a_t && !p->b_t) launch_one<BM, BN, BK, TM, false, false, STAGES, MINB>(p);
    else if (!p->a_t) launch_one<BM, BN, BK, TM, false, true, STAGES, MINB>(p);
    else if (!p->b_t) launch_one<BM, BN, BK, TM, true, false, STAGES, MINB>(p);
    else launch_one<BM, BN, BK, TM, true, true, STAGES, MINB>(p);
}

/* -DLADDER_FAST compiles only the library's configurations (and v6 for reference): a
 * quicker build when device time is short. */
static const version VERSIONS[] = {
#ifndef LADDER_FAST
    {"v1 smem 32x32, 1 out/thread", false, launch_v1},
    {"v2 128x128x8, 8x8/thread, scalar", false, launch_v23<false>},
    {"v3 + float4 loads, LDS.128", false, launch_v23<true>},
    {"v4 + warp tiling (1 stage)", true, launch_tile<128, 128, 8, 8, 1>},
    {"v5 + double buffer (2 stages)", true, launch_tile<128, 128, 8, 8, 2>},
#endif
    {"v6 BK=16", true, launch_tile<128, 128, 16, 8, 2>},
#ifndef LADDER_FAST
    {"v7 128x128x16 1 stage", true, launch_tile<128, 128, 16, 8, 1>},
#endif
    {"v8 256x128x8 16x8/thr 2st", true, launch_tile<256, 128, 8, 16, 2>},
#ifndef LADDER_FAST
    {"v9 256x128x16 16x8/thr 2st", true, launch_tile<256, 128, 16, 16, 2>},
    {"v10 256x128x8 16x8/thr 1st", true, launch_tile<256, 128, 8, 16, 1>},
    {"v11 128x256x8 16x8/thr 2st", true, launch_tile<128, 256, 8, 16, 2>},
#endif
    {"v12 128x128x8 16x8/thr 2st", true, launch_tile<128, 128, 8, 16, 2>},
#ifndef LADDER_FAST
    {"v13 128x128x16 16x8/thr 2st", true, launch_tile<128, 128, 16, 16, 2>},
    {"c 64x128x8 8x8/thr", true, launch_tile<64, 128, 8, 8, 2>},
    {"c 64x128x16 8x8/thr", true, launch_tile<64, 128, 16, 8, 2>},
    {"c 128x64x8 8x8/thr", true, launch_tile<128, 64, 8, 8, 2>},
    {"c 64x64x8 8x8/thr", true, launch_tile<64, 64, 8, 8, 2>},
#endif
    {"c 64x128x8 16x8/thr (64 thr)", true, launch_tile<64, 128, 8, 16, 2>},
#ifndef LADDER_FAST
    {"c 128x64x8 16x8/thr (64 thr)", true, launch_tile<128, 64, 8, 16, 2>},
#endif
    {"c 64x64x8 16x8/thr (32 thr)", true, launch_tile<64, 64, 8, 16, 2>},
};
enum { N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0] };

static cublasHandle_t handle;

static void ref_gemm(const prob *p) { /* row-major D = op(A) op(B) is column-major D^T = op(B)^T op(A)^T */
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasSgemm(handle, p->b_t ? CUBLAS_OP_T : CUBLAS_OP_N, p->a_t ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    p->N, p->M, p->K, &one, p->B, (int)p->ldb, p->A, (int)p->lda, &zero, p->D,
                                    (int)p->ldd);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasSgemm failed: %d\n", (int)st);
        exit(1);
    }
}

static void fill(float *d, long long n, unsigned seed) {
    float *h = (float *)malloc(sizeof(float) * (size_t)n);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (long long i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        h[i] = (float)((s * 0x2545F4914F6CDD1Dull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
    CK(cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
    free(h);
}

/* ||x - y|| / ||y|| over an M x N matrix with row stride ld (NaN anywhere: inf). */
static double rel_diff(const float *dx, const float *dy, int M, int N, long long ld) {
    size_t n = (size_t)M * (size_t)ld;
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    CK(cudaMemcpy(x, dx, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (int m = 0; m < M; m++)
        for (int c = 0; c < N; c++) {
            double a = x[(size_t)m * ld + c], b = y[(size_t)m * ld + c];
            if (isnan(a) || isnan(b)) {
                free(x), free(y);
                return INFINITY;
            }
            num += (a - b) * (a - b), den += b * b;
        }
    free(x), free(y);
    return sqrt(num / den);
}

static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float *flush_buf;
static cudaEvent_t ev0, ev1;

static float time_median(void (*launch)(const prob *), const prob *p, int reps) {
    float t[1000];
    for (int i = 0; i < 2; i++) launch(p);
    CK(cudaGetLastError());
    for (int r = 0; r < reps; r++) {
        CK(cudaMemsetAsync(flush_buf, r & 0xFF, (size_t)256 << 20));
        CK(cudaEventRecord(ev0));
        launch(p);
        CK(cudaEventRecord(ev1));
        CK(cudaEventSynchronize(ev1));
        CK(cudaEventElapsedTime(&t[r], ev0, ev1));
    }
    CK(cudaGetLastError());
    qsort(t, (size_t)reps, sizeof t[0], cmpf);
    return reps % 2 ? t[reps / 2] : 0.5f * (t[reps / 2 - 1] + t[reps / 2]);
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        out[n++] = (int)strtol(s, (char **)&s, 10);
        if (*s == ',') s++;
    }
    return n;
}

/* The general versions on odd shapes, all four transposes, leading dimensions padded to 4. */
static int check_odd_shapes(const bool *use) {
    static const int shapes[][3] = {{1, 1, 1}, {7, 127, 5}, {127, 1025, 9}, {1025, 130, 1023}, {300, 77, 4095}, {129, 255, 17}};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            prob p;
            p.M = shapes[s][0], p.N = shapes[s][1], p.K = shapes[s][2];
            p.a_t = t & 1, p.b_t = t & 2;
            const long long pad4 = 4;
            p.lda = ((p.a_t ? p.M : p.K) + pad4 + 3) / 4 * 4; /* padded, multiple of 4 */
            p.ldb = ((p.b_t ? p.K : p.N) + 3) / 4 * 4;
            p.ldd = p.N + 3;
            const long long na = p.lda * (p.a_t ? p.K : p.M), nb = p.ldb * (p.b_t ? p.N : p.K), nd = p.ldd * p.M;
            float *A, *B, *D, *R;
            CK(cudaMalloc(&A, na * 4)); CK(cudaMalloc(&B, nb * 4)); CK(cudaMalloc(&D, nd * 4)); CK(cudaMalloc(&R, nd * 4));
            fill(A, na, 11 + (unsigned)s), fill(B, nb, 17 + (unsigned)t);
            p.A = A, p.B = B;
            p.D = R;
            ref_gemm(&p);
            for (int v = 0; v < N_VERSIONS; v++) {
                if (!use[v] || !VERSIONS[v].general) continue;
                CK(cudaMemset(D, 0xFF, nd * 4));
                p.D = D;
                VERSIONS[v].launch(&p);
                CK(cudaGetLastError());
                double e = rel_diff(D, R, p.M, p.N, p.ldd);
                if (!(e < 1e-5)) {
                    printf("  WRONG: %s on %dx%dx%d a_t=%d b_t=%d: rel diff %.3g\n", VERSIONS[v].name, p.M, p.N, p.K,
                           p.a_t, p.b_t, e);
                    bad++;
                }
            }
            CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D)); CK(cudaFree(R));
        }
    printf("odd shapes x 4 transposes: %s\n", bad ? "FAILED" : "all versions match cuBLAS (rel diff < 1e-5)");
    return bad;
}

int main(int argc, char **argv) {
    int sizes[16] = {1024, 2048, 4096, 8192}, n_sizes = 4, reps = 15, once = 0;
    bool use[N_VERSIONS];
    for (int v = 0; v < N_VERSIONS; v++) use[v] = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes")) n_sizes = parse_list(argv[i + 1], sizes, 16);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--once")) once = atoi(argv[i + 1]); /* for ncu: cuBLAS and version N once */
        else if (!strcmp(argv[i], "--versions")) {
            int list[64], n = parse_list(argv[i + 1], list, 64);
            for (int v = 0; v < N_VERSIONS; v++) use[v] = false;
            for (int k = 0; k < n; k++)
                if (list[k] >= 1 && list[k] <= N_VERSIONS) use[list[k] - 1] = true;
        }
    }
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
    cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    CK(cudaEventCreate(&ev0)); CK(cudaEventCreate(&ev1));
    CK(cudaMalloc(&flush_buf, (size_t)256 << 20));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    printf("%s, %d SMs, max SM clock %d MHz\n", prop.name, prop.multiProcessorCount, clock_khz / 1000);
    if (once >= 1 && once <= N_VERSIONS) {
        const int n = sizes[0];
        const long long nn = (long long)n * n;
        float *A, *B, *D;
        CK(cudaMalloc(&A, nn * 4)); CK(cudaMalloc(&B, nn * 4)); CK(cudaMalloc(&D, nn * 4));
        fill(A, nn, 1), fill(B, nn, 2);
        prob p = {n, n, n, false, false, n, n, n, A, B, D};
        ref_gemm(&p);
        VERSIONS[once - 1].launch(&p);
        CK(cudaDeviceSynchronize());
        printf("ran cuBLAS and %s once at %d\n", VERSIONS[once - 1].name, n);
        return 0;
    }
    int bad = check_odd_shapes(use);

    printf("\n%-36s %6s %9s %9s %7s %9s\n", "version (NN, square)", "n", "ms", "TFLOP/s", "ratio", "rel diff");
    for (int s = 0; s < n_sizes; s++) {
        const int n = sizes[s];
        const long long nn = (long long)n * n;
        float *A, *B, *D, *R;
        CK(cudaMalloc(&A, nn * 4)); CK(cudaMalloc(&B, nn * 4)); CK(cudaMalloc(&D, nn * 4)); CK(cudaMalloc(&R, nn * 4));
        fill(A, nn, 1), fill(B, nn, 2);
        prob p = {n, n, n, false, false, n, n, n, A, B, R};
        const double flop = 2.0 * n * (double)n * n;
        const float t_ref = time_median(ref_gemm, &p, reps);
        printf("%-36s %6d %9.3f %9.2f %7.3f %9s\n", "cuBLAS sgemm (default math)", n, t_ref, flop / t_ref * 1e-9, 1.0, "-");
        for (int v = 0; v < N_VERSIONS; v++) {
            if (!use[v]) continue;
            if (!VERSIONS[v].general && n % 128) continue;
            /* the slow early versions: fewer reps at the large sizes */
            const bool early = VERSIONS[v].name[0] == 'v' && VERSIONS[v].name[1] >= '1' && VERSIONS[v].name[1] <= '3' &&
                               VERSIONS[v].name[2] == ' ';
            const int r = (early && n >= 4096) ? 3 : reps;
            if (VERSIONS[v].launch == launch_v1 && n > 4096) continue;
            p.D = D;
            CK(cudaMemset(D, 0xFF, nn * 4));
            const float t = time_median(VERSIONS[v].launch, &p, r);
            const double e = rel_diff(D, R, n, n, n);
            if (!(e < 1e-5)) bad++;
            printf("%-36s %6d %9.3f %9.2f %7.3f %9.2g\n", VERSIONS[v].name, n, t, flop / t * 1e-9, t_ref / t, e);
            fflush(stdout);
        }
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D)); CK(cudaFree(R));
    }
    printf("%s\n", bad ? "SOME OUTPUTS DIFFER FROM cuBLAS" : "all outputs match cuBLAS");
    return bad ? 1 : 0;
}
