/* Harness for the Hopper attention forward (src/kernels/cuda/attention/attention_fwd_sm90.cuh):
 * the kernel variants of the ladder (README.md), checked against a float64 reference and timed.
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v \
 *        dev/attention_sm90/harness.cu -lcuda -o build-att/att
 *   att check [variant...]          correctness sweep (odd S, GQA, S_q != S_kv, causal, BHSD)
 *   att quick [variant...]          small shapes only (for compute-sanitizer)
 *   att perf  [variant...]          TFLOP/s at B*S = 16k tokens, hidden 2048, S in {512, 2k, 8k}
 *   att one V B S H D causal [Hkv] [Sk] [reps]
 * Inputs bf16 random in [-1, 1) (fresh per case); O poisoned (0xFF) before each run, every
 * row < S_q must be written; two runs bitwise identical; O and lse compared on sampled rows
 * (always the first and last ones) with the norm-wise relative error. TFLOP/s = 4 B H Sq Sk D,
 * halved when causal, over the median of `reps` event-timed launches. */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/status.h" /* attention_fwd_sm90.cuh declares the host map helpers */
#include "kernels/cuda/attention/attention_fwd_sm90.cuh"

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                              \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

static float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* ---- variants -------------------------------------------------------------------------------- */

typedef struct variant {
    const char *name;
    int intra, pp, tstore;
    int bn[3], st[3]; /* per D = 64, 128, 256 (bn 0: not built) */
} variant;

static const variant VARIANTS[] = {
    {"v1 draft", 0, 0, 0, {128, 128, 0}, {2, 2, 0}},
    {"v2 intra+tstore", 1, 0, 1, {128, 128, 0}, {2, 2, 0}},
    {"v3 intra+pingpong", 1, 1, 1, {128, 128, 80}, {2, 2, 2}},
    {"v4 v3 BN176/192", 1, 1, 1, {192, 176, 0}, {2, 2, 0}},
    {"v5 v3 stages3/4", 1, 1, 1, {128, 128, 0}, {4, 3, 0}},
    {"v6 persistent", 1, 1, 1, {128, 128, 80}, {4, 2, 2}},
    {"v7 persist BN192/176/64", 1, 1, 1, {192, 176, 64}, {2, 2, 2}},
};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };
static int di(int D) { return D == 64 ? 0 : D == 128 ? 1 : 2; }

struct maps {
    CUtensorMap q, k, v, o;
};

template <int D, int BN, int ST, int INTRA, int PP, int TS>
static void launch_t(const maps &m, const cml__att90_params &p, int BH) {
    static bool set;
    typedef cml__att90_smem<D, BN, ST> sm;
    auto kern = cml__att90_fwd_kernel<CML_ATT90_BF16, D, BN, ST, INTRA, PP, TS>;
    if (!set) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, sm::total));
        set = true;
    }
    kern<<<p.q_tiles * BH, CML_ATT90_THREADS, sm::total>>>(m.q, m.k, m.v, m.o, p);
}

static int g_sms;
static int *g_counter;

template <int D, int BN, int ST, int SEP>
static void launch_p(const maps &m, const cml__att90_params &p0, int BH) {
    static bool set;
    typedef cml__att90_psmem<D, BN, ST, SEP> sm;
    auto kern = cml__att90_fwd_persistent_kernel<CML_ATT90_BF16, D, BN, ST, SEP>;
    if (!set) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, sm::total));
        set = true;
    }
    cml__att90_params p = p0;
    p.total_tiles = p.q_tiles * BH;
    p.tile_counter = g_counter;
    CK(cudaMemsetAsync(g_counter, 0, sizeof(int)));
    kern<<<p.total_tiles < g_sms ? p.total_tiles : g_sms, CML_ATT90_THREADS, sm::total>>>(m.q, m.k, m.v, m.o, p);
}

static bool launch(int v, int D, const maps &m, const cml__att90_params &p, int BH) {
    switch (v * 1000 + D) {
    case 5064: launch_p<64, 128, 4, 1>(m, p, BH); return true;
    case 5128: launch_p<128, 128, 2, 1>(m, p, BH); return true;
    case 5256: launch_p<256, 80, 2, 0>(m, p, BH); return true;
    case 6064: launch_p<64, 192, 2, 1>(m, p, BH); return true;
    case 6128: launch_p<128, 176, 2, 0>(m, p, BH); return true;
    case 6256: launch_p<256, 64, 2, 0>(m, p, BH); return true;
    case 64: launch_t<64, 128, 2, 0, 0, 0>(m, p, BH); return true;
    case 128: launch_t<128, 128, 2, 0, 0, 0>(m, p, BH); return true;
    case 1064: launch_t<64, 128, 2, 1, 0, 1>(m, p, BH); return true;
    case 1128: launch_t<128, 128, 2, 1, 0, 1>(m, p, BH); return true;
    case 2064: launch_t<64, 128, 2, 1, 1, 1>(m, p, BH); return true;
    case 2128: launch_t<128, 128, 2, 1, 1, 1>(m, p, BH); return true;
    case 2256: launch_t<256, 80, 2, 1, 1, 1>(m, p, BH); return true;
    case 3064: launch_t<64, 192, 2, 1, 1, 1>(m, p, BH); return true;
    case 3128: launch_t<128, 176, 2, 1, 1, 1>(m, p, BH); return true;
    case 4064: launch_t<64, 128, 4, 1, 1, 1>(m, p, BH); return true;
    case 4128: launch_t<128, 128, 3, 1, 1, 1>(m, p, BH); return true;
    default: return false;
    }
}

/* A 4-D map (D, H, S, B) over a tensor with element strides st = (batch, seq, head). */
static void make_map(CUtensorMap *m, void *ptr, int B, int S, int H, int D, const long long st[3], int rows) {
    cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)H, (cuuint64_t)S, (cuuint64_t)B};
    cuuint64_t strides[3] = {(cuuint64_t)st[2] * 2, (cuuint64_t)st[1] * 2, (cuuint64_t)st[0] * 2};
    cuuint32_t box[4] = {64, 1, (cuuint32_t)rows, 1}, es[4] = {1, 1, 1, 1};
    CUresult r = cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, ptr, dims, strides, box, es,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        printf("encode failed %d\n", (int)r);
        exit(1);
    }
}

/* ---- one problem ------------------------------------------------------------------------------ */

__global__ void fill_kernel(uint16_t *x, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        float f = (float)(h >> 8) / 16777216.0f * 2.0f - 1.0f;
        uint32_t u = __float_as_uint(f);
        u += 0x7FFF + ((u >> 16) & 1);
        x[i] = (uint16_t)(u >> 16);
    }
}

typedef struct prob {
    int B, Sq, Sk, H, Hkv, D, causal, bhsd;
} prob;

static uint32_t g_seed = 1;

/* Returns 0 on pass. check: reference + repeat; reps > 0: timing. */
static int run(int v, const prob &pb, bool check, int reps, double *tflops) {
    const int B = pb.B, Sq = pb.Sq, Sk = pb.Sk, H = pb.H, Hkv = pb.Hkv, D = pb.D;
    long long sq[3], sk[3];
    if (pb.bhsd) { /* [B, H, S, D] */
        sq[0] = (long long)H * Sq * D, sq[1] = D, sq[2] = (long long)Sq * D;
        sk[0] = (long long)Hkv * Sk * D, sk[1] = D, sk[2] = (long long)Sk * D;
    } else {
        sq[0] = (long long)Sq * H * D, sq[1] = (long long)H * D, sq[2] = D;
        sk[0] = (long long)Sk * Hkv * D, sk[1] = (long long)Hkv * D, sk[2] = D;
    }
    size_t nq = (size_t)B * Sq * H * D, nk = (size_t)B * Sk * Hkv * D, nl = (size_t)B * H * Sq;
    uint16_t *dq, *dk, *dv, *dout;
    float *dl;
    CK(cudaMalloc(&dq, nq * 2));
    CK(cudaMalloc(&dk, nk * 2));
    CK(cudaMalloc(&dv, nk * 2));
    CK(cudaMalloc(&dout, nq * 2));
    CK(cudaMalloc(&dl, nl * 4));
    fill_kernel<<<1024, 256>>>(dq, nq, g_seed++ * 0x9E3779B9u);
    fill_kernel<<<1024, 256>>>(dk, nk, g_seed++ * 0x9E3779B9u);
    fill_kernel<<<1024, 256>>>(dv, nk, g_seed++ * 0x9E3779B9u);
    CK(cudaGetLastError());
    maps m;
    const variant &var = VARIANTS[v];
    const int BN = var.bn[di(D)];
    make_map(&m.q, dq, B, Sq, H, D, sq, CML_ATT90_BM);
    make_map(&m.k, dk, B, Sk, Hkv, D, sk, BN);
    make_map(&m.v, dv, B, Sk, Hkv, D, sk, BN);
    make_map(&m.o, dout, B, Sq, H, D, sq, 64);
    cml__att90_params p;
    memset(&p, 0, sizeof p);
    p.Hq = H, p.group = H / Hkv, p.Sq = Sq, p.Sk = Sk, p.causal = pb.causal;
    p.q_tiles = (Sq + CML_ATT90_BM - 1) / CML_ATT90_BM;
    const float scale = 1.0f / sqrtf((float)D);
    p.scale_log2 = scale * 1.4426950408889634f;
    p.lse = dl;
    p.O = dout, p.o_sb = sq[0], p.o_ss = sq[1], p.o_sh = sq[2];
    int fail = 0;
    char desc[160];
    snprintf(desc, sizeof desc, "%-18s B=%d S=%d/%d H=%d/%d D=%d %s%s", var.name, B, Sq, Sk, H, Hkv, D,
             pb.causal ? "causal" : "full  ", pb.bhsd ? " bhsd" : "");
    if (check) {
        uint16_t *hq = (uint16_t *)malloc(nq * 2), *hk = (uint16_t *)malloc(nk * 2), *hv = (uint16_t *)malloc(nk * 2),
                 *ho = (uint16_t *)malloc(nq * 2), *ho2 = (uint16_t *)malloc(nq * 2);
        float *hl = (float *)malloc(nl * 4), *hl2 = (float *)malloc(nl * 4);
        CK(cudaMemcpy(hq, dq, nq * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hk, dk, nk * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hv, dv, nk * 2, cudaMemcpyDeviceToHost));
        for (int rep = 0; rep < 2; rep++) {
            CK(cudaMemset(dout, 0xFF, nq * 2));
            CK(cudaMemset(dl, 0xFF, nl * 4));
            if (!launch(v, D, m, p, B * H)) {
                printf("%s: not built\n", desc);
                return 0;
            }
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(rep ? ho2 : ho, dout, nq * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(rep ? hl2 : hl, dl, nl * 4, cudaMemcpyDeviceToHost));
        }
        const bool same = memcmp(ho, ho2, nq * 2) == 0 && memcmp(hl, hl2, nl * 4) == 0;
        size_t nan = 0;
        for (size_t i = 0; i < nq; i++)
            if ((ho[i] & 0x7F80) == 0x7F80) nan++;
        for (size_t i = 0; i < nl; i++)
            if (hl[i] != hl[i]) nan++;
        double num = 0, den = 0, lse_err = 0;
        double *srow = (double *)malloc((size_t)Sk * 8);
        const int samples = 96;
        for (int t = 0; t < samples; t++) {
            const int b = rand() % B, h = rand() % H, hk2 = h / (H / Hkv);
            const int i = t == 0 ? 0 : t == 1 ? Sq - 1 : t == 2 ? Sq / 2 : rand() % Sq;
            double mx = -INFINITY;
            for (int j = 0; j < Sk; j++) {
                const bool ok = !pb.causal || j <= i + (Sk - Sq);
                double s = 0;
                for (int d = 0; d < D; d++)
                    s += (double)bf2f(hq[b * sq[0] + i * sq[1] + h * sq[2] + d]) *
                         bf2f(hk[b * sk[0] + j * sk[1] + hk2 * sk[2] + d]);
                srow[j] = ok ? s * scale : -INFINITY;
                if (srow[j] > mx) mx = srow[j];
            }
            double l = 0;
            for (int j = 0; j < Sk; j++) l += mx == -INFINITY ? 0 : exp(srow[j] - mx);
            for (int d = 0; d < D; d++) {
                double o = 0;
                for (int j = 0; j < Sk; j++)
                    if (l > 0) o += exp(srow[j] - mx) / l * bf2f(hv[b * sk[0] + j * sk[1] + hk2 * sk[2] + d]);
                const double got = bf2f(ho[b * sq[0] + i * sq[1] + h * sq[2] + d]);
                num += (got - o) * (got - o);
                den += o * o;
            }
            const double lse_ref = l > 0 ? mx + log(l) : -INFINITY, lse_got = hl[((size_t)b * H + h) * Sq + i];
            if (!(lse_ref == -INFINITY && lse_got == -INFINITY)) lse_err = fmax(lse_err, fabs(lse_got - lse_ref));
            if (lse_got != lse_got) lse_err = INFINITY;
        }
        const double rel = sqrt(num / (den > 0 ? den : 1));
        fail = nan || !same || !(rel <= 1e-2) || !(lse_err <= 1e-3);
        printf("%s | rel.err %.2e lse.err %.2e unwritten %zu repeat %s  %s\n", desc, rel, lse_err, nan,
               same ? "same" : "DIFFERS", fail ? "FAIL" : "ok");
        free(hq), free(hk), free(hv), free(ho), free(ho2), free(hl), free(hl2), free(srow);
    }
    if (reps > 0) {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        float *t = (float *)malloc(reps * 4);
        for (int w = 0; w < 3; w++)
            if (!launch(v, D, m, p, B * H)) return 0;
        for (int r = 0; r < reps; r++) {
            cudaEventRecord(e0);
            launch(v, D, m, p, B * H);
            cudaEventRecord(e1);
            CK(cudaEventSynchronize(e1));
            cudaEventElapsedTime(&t[r], e0, e1);
        }
        CK(cudaGetLastError());
        qsort(t, reps, 4, cmp_float);
        const double flop = 4.0 * B * H * (double)Sq * Sk * D * (pb.causal ? 0.5 : 1.0), ms = t[reps / 2];
        *tflops = flop / ms / 1e9;
        printf("%s | %.3f ms (min %.3f) %.1f TFLOP/s\n", desc, ms, t[0], *tflops);
        free(t);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    CK(cudaFree(dq));
    CK(cudaFree(dk));
    CK(cudaFree(dv));
    CK(cudaFree(dout));
    CK(cudaFree(dl));
    fflush(stdout);
    return fail;
}

static bool built(int v, int D) { return VARIANTS[v].bn[di(D)] != 0; }

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("usage: att check|perf [variant...] | att one V B S H D causal [Hkv] [Sk] [reps]\n");
        return 2;
    }
    srand(7);
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaMalloc(&g_counter, sizeof(int)));
    int vs[N_VARIANTS], nv = 0;
    for (int i = 2; i < argc && strcmp(argv[1], "one"); i++) vs[nv++] = atoi(argv[i]);
    if (!nv)
        for (int i = 0; i < N_VARIANTS; i++) vs[nv++] = i;
    int fails = 0;
    if (!strcmp(argv[1], "check")) {
        static const prob P[] = {
            {1, 1, 1, 2, 2, 0, 0, 0},         {1, 1, 1, 2, 2, 0, 1, 0},      {1, 77, 77, 2, 1, 0, 1, 0},
            {2, 1000, 1000, 4, 2, 0, 0, 0},   {1, 4097, 4097, 2, 1, 0, 1, 0}, {1, 300, 1000, 4, 2, 0, 1, 0},
            {1, 1000, 300, 4, 4, 0, 1, 0},    {2, 256, 129, 4, 1, 0, 0, 0},  {2, 333, 333, 4, 2, 0, 1, 1},
            {1, 2048, 2048, 2, 2, 0, 0, 1},
        };
        for (int a = 0; a < nv; a++)
            for (int D = 64; D <= 256; D *= 2) {
                if (!built(vs[a], D)) continue;
                for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
                    prob pb = P[i];
                    pb.D = D;
                    double tf;
                    fails += run(vs[a], pb, true, 0, &tf);
                }
            }
        printf("check: %d failures\n", fails);
        return fails ? 1 : 0;
    }
    if (!strcmp(argv[1], "quick")) { /* small shapes only: for compute-sanitizer */
        static const prob P[] = {
            {1, 1, 1, 2, 2, 0, 1, 0},   {2, 77, 77, 2, 1, 0, 1, 0},  {1, 300, 200, 2, 2, 0, 0, 0},
            {1, 200, 300, 2, 1, 0, 1, 1}, {1, 333, 77, 2, 2, 0, 1, 0}, {3, 129, 129, 2, 2, 0, 0, 0},
        };
        for (int a = 0; a < nv; a++)
            for (int D = 64; D <= 256; D *= 2) {
                if (!built(vs[a], D)) continue;
                for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
                    prob pb = P[i];
                    pb.D = D;
                    double tf;
                    fails += run(vs[a], pb, true, 0, &tf);
                }
            }
        printf("quick: %d failures\n", fails);
        return fails ? 1 : 0;
    }
    if (!strcmp(argv[1], "perf")) {
        char summary[8192] = "";
        for (int D = 64; D <= 256; D *= 2)
            for (int causal = 0; causal < 2; causal++) {
                for (int a = 0; a < nv; a++) {
                    if (!built(vs[a], D)) continue;
                    char line[256];
                    int n = snprintf(line, sizeof line, "D=%-3d %s %-18s", D, causal ? "causal" : "full  ",
                                     VARIANTS[vs[a]].name);
                    for (int S = 512; S <= 8192; S *= 4) {
                        prob pb = {16384 / S, S, S, 2048 / D, 2048 / D, D, causal, 0};
                        double tf = 0;
                        fails += run(vs[a], pb, false, 15, &tf);
                        n += snprintf(line + n, sizeof line - n, " S=%-4d %6.1f", S, tf);
                    }
                    strncat(summary, line, sizeof summary - strlen(summary) - 2);
                    strcat(summary, "\n");
                }
            }
        printf("---- TFLOP/s (B*S = 16k, hidden 2048)\n%s", summary);
        return fails ? 1 : 0;
    }
    if (!strcmp(argv[1], "one") && argc >= 8) {
        prob pb = {atoi(argv[3]), atoi(argv[4]), 0, atoi(argv[5]), 0, atoi(argv[6]), atoi(argv[7]), 0};
        pb.Hkv = argc > 8 ? atoi(argv[8]) : pb.H;
        pb.Sk = argc > 9 ? atoi(argv[9]) : pb.Sq;
        const int reps = argc > 10 ? atoi(argv[10]) : 20;
        double tf;
        return run(atoi(argv[2]), pb, true, reps, &tf);
    }
    printf("bad arguments\n");
    return 2;
}
