/* Harness for the two small kernels around the Hopper attention backward (attention_bwd_sm90.cuh):
 * prep (Di, lse2, semaphores) and convert (f32 dQ accumulator -> 16-bit dQ). Runs the library's
 * kernels and the pre-session-6 ones (bwd_edge_old.cuh) on the same random inputs, checks every
 * output byte equal (dQ with its padding, Di, lse2, semaphores; outputs poisoned with 0xFF before
 * each run; also with a 3-block grid, the grid-stride path), and times both with L2 flushed
 * (median of 20), next to a device-to-device copy for the bandwidth ceiling.
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc \
 *        dev/attention_sm90/bwd_edge_harness.cu -o build-att/bwd_edge
 *   bwd_edge [check|perf|ncu]   (no argument: check and perf) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/status.h"
#include "kernels/cuda/attention/attention_bwd_sm90.cuh"

#include "bwd_edge_old.cuh"

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                              \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

static int g_sms;

static __device__ uint32_t mix(uint64_t i, uint32_t seed) {
    uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 32) * 2246822519u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    return h;
}

/* 16-bit values in [-1, 1) */
template <int DT>
__global__ void fill16(uint16_t *x, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float f = (float)(mix(i, seed) >> 8) / 16777216.0f * 2.0f - 1.0f;
        if (DT == CML_ATT90_F16) {
            const __half hv = __float2half(f);
            x[i] = *(const uint16_t *)&hv;
        } else {
            x[i] = (uint16_t)(__float_as_uint(f) >> 16);
        }
    }
}

/* f32 over a wide range of magnitudes (2^-30 .. 2^30, some zeros and denormal-range values), or
 * lse-like values in [-8, 8) with every 13th -inf */
__global__ void fill32(float *x, size_t n, uint32_t seed, int lse_like) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = mix(i, seed);
        float f = (float)(h >> 8) / 16777216.0f * 2.0f - 1.0f;
        if (lse_like) f = i % 13 == 5 ? -INFINITY : 8.0f * f;
        else f = h % 61 == 0 ? 0.0f : h % 67 == 0 ? 1e-39f * f : ldexpf(f, (int)(mix(i, seed ^ 77u) % 61) - 30);
        x[i] = f;
    }
}

struct problem {
    const char *name;
    int dt, D, B, Sq, Sk, H, causal, layout; /* layout 0 [B,S,H,D], 1 [B,H,S,D], 2 [B,S,H,D] rows padded */
    float scale;
};

struct bufs {
    uint16_t *dO, *O, *dQ;
    float *lse, *acc, *lse2, *di;
    int *sem;
};

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* launches one version; grid 0: the library's grid (or the old launcher's for the old version) */
template <int DT, int D>
static void launch(const problem &pb, const bufs &bf, const long long st[3], int which, int kernel, unsigned grid) {
    enum { BM = D == 64 ? 128 : 64 };
    const int n_qt = (pb.Sq + BM - 1) / BM;
    const long long rows_pad = (long long)pb.B * pb.H * n_qt * BM, n_sem = (long long)pb.B * pb.H * n_qt,
                    n4 = rows_pad * D / 4;
    const long long cap = (long long)g_sms * 8;
    if (kernel == 0) {
        long long want = which ? rows_pad / cml__att90b_prep_cfg<D>::UNIT : rows_pad * 8 / 256;
        const unsigned g = grid ? grid : (unsigned)(want < cap ? want : cap);
        if (which)
            cml__att90b_prep_kernel<DT, D><<<g, 256>>>(bf.dO, bf.O, st[0], st[1], st[2], bf.lse, pb.H, pb.Sq, n_qt * BM,
                                                       rows_pad, bf.lse2, bf.di, bf.sem, (int)n_sem);
        else
            old_att90b_prep_kernel<DT, D><<<g, 256>>>(bf.dO, bf.O, st[0], st[1], st[2], bf.lse, pb.H, pb.Sq, n_qt * BM,
                                                      rows_pad, bf.lse2, bf.di, bf.sem, (int)n_sem);
    } else {
        long long want = which ? n4 / 1024 : (n4 + 255) / 256;
        const unsigned g = grid ? grid : (unsigned)(want < cap ? want : cap);
        if (which)
            cml__att90b_dq_kernel<DT, D, BM><<<g, 256>>>((const float4 *)bf.acc, bf.dQ, st[0], st[1], st[2], pb.H, pb.Sq,
                                                         n_qt, pb.causal, pb.Sk - pb.Sq, pb.scale, n4);
        else
            old_att90b_dq_kernel<DT, D, BM><<<g, 256>>>((const float4 *)bf.acc, bf.dQ, st[0], st[1], st[2], pb.H, pb.Sq,
                                                        n_qt, pb.causal, pb.Sk - pb.Sq, pb.scale, n4);
    }
    CK(cudaGetLastError());
}

template <int DT, int D>
static int run(const problem &pb, int do_check, int do_perf) {
    enum { BM = D == 64 ? 128 : 64 };
    const int n_qt = (pb.Sq + BM - 1) / BM;
    const long long rows_pad = (long long)pb.B * pb.H * n_qt * BM, n_sem = (long long)pb.B * pb.H * n_qt;
    long long st[3];
    if (pb.layout == 1) st[2] = (long long)pb.Sq * D, st[1] = D, st[0] = (long long)pb.H * pb.Sq * D;
    else {
        const long long row = (long long)pb.H * D + (pb.layout == 2 ? 24 : 0);
        st[2] = D + (pb.layout == 2 ? 8 : 0), st[1] = row + (pb.layout == 2 ? 8 * pb.H : 0), st[0] = st[1] * pb.Sq + 16;
    }
    const size_t n16 = (size_t)(st[0] * (pb.B - 1) + st[1] * (pb.Sq - 1) + st[2] * (pb.H - 1) + D);
    const size_t nq = (size_t)pb.B * pb.H * pb.Sq;
    bufs bf;
    CK(cudaMalloc(&bf.dO, n16 * 2));
    CK(cudaMalloc(&bf.O, n16 * 2));
    CK(cudaMalloc(&bf.dQ, n16 * 2));
    CK(cudaMalloc(&bf.lse, nq * 4));
    CK(cudaMalloc(&bf.acc, rows_pad * D * 4));
    CK(cudaMalloc(&bf.lse2, rows_pad * 4));
    CK(cudaMalloc(&bf.di, rows_pad * 4));
    CK(cudaMalloc(&bf.sem, (n_sem + 1) * 4));
    static uint32_t seed = 12345;
    fill16<DT><<<1024, 256>>>(bf.dO, n16, seed++ * 0x9E3779B9u);
    fill16<DT><<<1024, 256>>>(bf.O, n16, seed++ * 0x9E3779B9u);
    fill32<<<1024, 256>>>(bf.lse, nq, seed++ * 0x9E3779B9u, 1);
    fill32<<<1024, 256>>>(bf.acc, rows_pad * D, seed++ * 0x9E3779B9u, 0);
    CK(cudaGetLastError());
    int fail = 0;
    if (do_check) {
        const size_t sz[4] = {n16 * 2, (size_t)rows_pad * 4, (size_t)rows_pad * 4, (size_t)(n_sem + 1) * 4};
        void *dev[4] = {bf.dQ, bf.di, bf.lse2, bf.sem};
        const char *names[4] = {"dQ", "Di", "lse2", "sem"};
        unsigned char *ref[4], *got[4];
        for (int a = 0; a < 4; a++) ref[a] = (unsigned char *)malloc(sz[a]), got[a] = (unsigned char *)malloc(sz[a]);
        for (int v = 0; v < 3; v++) { /* old, new (library grid), new (3 blocks) */
            for (int a = 0; a < 4; a++) CK(cudaMemset(dev[a], 0xFF, sz[a]));
            launch<DT, D>(pb, bf, st, v > 0, 0, v == 2 ? 3 : 0);
            launch<DT, D>(pb, bf, st, v > 0, 1, v == 2 ? 3 : 0);
            CK(cudaDeviceSynchronize());
            for (int a = 0; a < 4; a++) CK(cudaMemcpy(v ? got[a] : ref[a], dev[a], sz[a], cudaMemcpyDeviceToHost));
            if (v == 0) continue;
            for (int a = 0; a < 4; a++) {
                size_t diff = 0, first = 0;
                for (size_t i = 0; i < sz[a]; i++)
                    if (ref[a][i] != got[a][i]) first = diff++ ? first : i;
                if (diff) fail = 1;
                if (diff || a == 0)
                    printf("check %-28s %s grid %s: %s %s (%zu bytes%s)\n", pb.name, v == 1 ? "lib" : "3  ", names[a],
                           diff ? "DIFFERS: FAIL" : "bitwise equal", a == 0 ? "+ Di, lse2, sem" : "", sz[a],
                           diff ? ", see first" : "");
                if (diff) printf("   %zu bytes differ, first at %zu\n", diff, first);
            }
        }
        size_t poisoned = 0; /* padding of dQ left alone (both versions): count bytes still 0xFF */
        for (size_t i = 0; i < sz[0]; i++) poisoned += got[0][i] == 0xFF;
        printf("   dQ bytes still 0xFF (layout padding): %zu of %zu\n", poisoned, sz[0]);
        for (int a = 0; a < 4; a++) free(ref[a]), free(got[a]);
    }
    if (do_perf) {
        const int reps = 20;
        size_t flush_n = 256u << 20;
        void *flush;
        CK(cudaMalloc(&flush, flush_n));
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        const double n_el = (double)pb.B * pb.Sq * pb.H * D;
        const double bytes_prep = n_el * 2 * 2 + (double)nq * 4 + rows_pad * 8.0;
        const double bytes_conv = (double)rows_pad * D * 4 + n_el * 2;
        float t[3][2][reps];
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < 3; k++)
                for (int w = 0; w < 2; w++) {
                    CK(cudaMemsetAsync(flush, r & 1, flush_n));
                    cudaEventRecord(e0);
                    if (k < 2) launch<DT, D>(pb, bf, st, w, k, 0);
                    else if (w == 0) CK(cudaMemcpyAsync(bf.acc, bf.acc + rows_pad * D / 2, rows_pad * D * 2, cudaMemcpyDeviceToDevice));
                    cudaEventRecord(e1);
                    CK(cudaEventSynchronize(e1));
                    cudaEventElapsedTime(&t[k][w][r], e0, e1);
                }
        const char *kn[3] = {"prep", "convert", "d2d copy"};
        for (int k = 0; k < 3; k++)
            for (int w = 0; w < (k < 2 ? 2 : 1); w++) {
                qsort(t[k][w], reps, 4, cmp_float);
                const double ms = t[k][w][reps / 2];
                const double by = k == 0 ? bytes_prep : k == 1 ? bytes_conv : (double)rows_pad * D * 4;
                printf("perf %-28s %-8s %s: %.4f ms  %.0f GB/s  (%.1f MB; min %.4f)\n", pb.name, kn[k],
                       k == 2 ? "   " : w ? "new" : "old", ms, by / ms / 1e6, by / 1e6, t[k][w][0]);
            }
        CK(cudaFree(flush));
    }
    if (!do_check && !do_perf) { /* ncu: each version once */
        for (int w = 0; w < 2; w++)
            for (int k = 0; k < 2; k++) launch<DT, D>(pb, bf, st, w, k, 0);
        CK(cudaDeviceSynchronize());
    }
    void *all[] = {bf.dO, bf.O, bf.dQ, bf.lse, bf.acc, bf.lse2, bf.di, bf.sem};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CK(cudaFree(all[i]));
    fflush(stdout);
    return fail;
}

static int dispatch(const problem &pb, int c, int p) {
    if (pb.dt == CML_ATT90_F16) return pb.D == 64 ? run<CML_ATT90_F16, 64>(pb, c, p) : run<CML_ATT90_F16, 128>(pb, c, p);
    return pb.D == 64 ? run<CML_ATT90_BF16, 64>(pb, c, p) : run<CML_ATT90_BF16, 128>(pb, c, p);
}

int main(int argc, char **argv) {
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
    const char *mode = argc > 1 ? argv[1] : "all";
    const int B = CML_ATT90_BF16, F = CML_ATT90_F16;
    const float s64 = 0.125f, s128 = 0.08838834764831845f;
    /* the bench problem (B S = 16k, hidden 2048) and awkward ones: S not a tile multiple, causal
     * tiles no key touches (S_kv < S_q), [B,H,S,D] and padded strides, negative scale, f16 */
    const problem checks[] = {
        {"bf16 D64 S2048 full", B, 64, 8, 2048, 2048, 32, 0, 0, s64},
        {"bf16 D128 S2048 causal", B, 128, 8, 2048, 2048, 16, 1, 0, s128},
        {"bf16 D64 S777/300 causal BHSD", B, 64, 3, 777, 300, 5, 1, 1, s64},
        {"bf16 D128 S1025/77 causal pad", B, 128, 2, 1025, 77, 3, 1, 2, -s128},
        {"f16 D64 S1/1 pad", F, 64, 5, 1, 1, 7, 0, 2, s64},
        {"f16 D128 S4097/4000 causal", F, 128, 1, 4097, 4000, 2, 1, 0, s128},
        {"f16 D64 S127/513 causal BHSD", F, 64, 2, 127, 513, 3, 1, 1, -s64},
    };
    const problem perfs[] = {
        {"bf16 D64 S512 (16k tok)", B, 64, 32, 512, 512, 32, 0, 0, s64},
        {"bf16 D64 S8192 (16k tok)", B, 64, 2, 8192, 8192, 32, 0, 0, s64},
        {"bf16 D128 S512 (16k tok)", B, 128, 32, 512, 512, 16, 0, 0, s128},
        {"bf16 D128 S8192 (16k tok)", B, 128, 2, 8192, 8192, 16, 0, 0, s128},
    };
    int fails = 0;
    if (!strcmp(mode, "ncu")) {
        dispatch(perfs[0], 0, 0);
        dispatch(perfs[2], 0, 0);
        return 0;
    }
    if (!strcmp(mode, "all") || !strcmp(mode, "check"))
        for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) fails += dispatch(checks[i], 1, 0);
    if (!strcmp(mode, "all") || !strcmp(mode, "perf"))
        for (size_t i = 0; i < sizeof perfs / sizeof perfs[0]; i++) fails += dispatch(perfs[i], 0, 1);
    printf("bwd_edge: %d failures\n", fails);
    return fails != 0;
}
