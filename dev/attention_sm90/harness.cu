/* DRAFT harness for dev/attention_sm90/fwd_kernel.cuh (not yet run on a GPU): bf16 Q, K, V in
 * the [B, S, H, D] layout, random in [-1, 1); checks O and lse on sampled rows against a float64
 * reference, times the kernel (median of reps, L2 flushed before each) and prints TFLOP/s
 * (4 B H Sq Sk D, halved when causal).
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc \
 *        dev/attention_sm90/harness.cu -lcuda -o build-lead/att
 *   build-lead/att B S H D causal(0|1) [Hkv] [Sk] [reps] */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwd_kernel.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static float bf2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t f2bf(float f) { uint32_t u; memcpy(&u, &f, 4); u += 0x7FFF + ((u >> 16) & 1); return (uint16_t)(u >> 16); }
static int cmp_float(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return x < y ? -1 : x > y; }

/* A 4-D map (D, H, S, B) over a [B, S, H, D] tensor, boxes of 64 x 1 x rows x 1. */
static void make_map(CUtensorMap *m, void *p, int B, int S, int H, int D, int rows) {
    cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)H, (cuuint64_t)S, (cuuint64_t)B};
    cuuint64_t strides[3] = {(cuuint64_t)D * 2, (cuuint64_t)H * D * 2, (cuuint64_t)S * H * D * 2};
    cuuint32_t box[4] = {64, 1, (cuuint32_t)rows, 1}, es[4] = {1, 1, 1, 1};
    CUresult r = cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, p, dims, strides, box, es,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { printf("encode failed %d\n", (int)r); exit(1); }
}

template <int D>
static void launch(const CUtensorMap &mq, const CUtensorMap &mk, const CUtensorMap &mv, const att_params &p) {
    static bool set;
    if (!set) {
        CK(cudaFuncSetAttribute(att_fwd_sm90_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, att_smem<D>::total));
        set = true;
    }
    dim3 grid((p.Sq + ATT_BM - 1) / ATT_BM, p.B * p.Hq);
    att_fwd_sm90_kernel<D><<<grid, ATT_THREADS, att_smem<D>::total>>>(mq, mk, mv, p);
}

int main(int argc, char **argv) {
    if (argc < 6) { printf("usage: att B S H D causal [Hkv] [Sk] [reps]\n"); return 2; }
    int B = atoi(argv[1]), Sq = atoi(argv[2]), H = atoi(argv[3]), D = atoi(argv[4]), causal = atoi(argv[5]);
    int Hkv = argc > 6 ? atoi(argv[6]) : H, Sk = argc > 7 ? atoi(argv[7]) : Sq, reps = argc > 8 ? atoi(argv[8]) : 20;
    if (D != 64 && D != 128) { printf("D must be 64 or 128\n"); return 2; }
    size_t nq = (size_t)B * Sq * H * D, nk = (size_t)B * Sk * Hkv * D;
    uint16_t *hq = (uint16_t *)malloc(nq * 2), *hk = (uint16_t *)malloc(nk * 2), *hv = (uint16_t *)malloc(nk * 2),
             *ho = (uint16_t *)malloc(nq * 2);
    float *hl = (float *)malloc((size_t)B * H * Sq * 4);
    srand(1);
    for (size_t i = 0; i < nq; i++) hq[i] = f2bf((float)rand() / RAND_MAX * 2 - 1);
    for (size_t i = 0; i < nk; i++) hk[i] = f2bf((float)rand() / RAND_MAX * 2 - 1);
    for (size_t i = 0; i < nk; i++) hv[i] = f2bf((float)rand() / RAND_MAX * 2 - 1);
    void *dq, *dk, *dv, *dout, *flush;
    float *dl;
    CK(cudaMalloc(&dq, nq * 2)); CK(cudaMalloc(&dk, nk * 2)); CK(cudaMalloc(&dv, nk * 2)); CK(cudaMalloc(&dout, nq * 2));
    CK(cudaMalloc(&dl, (size_t)B * H * Sq * 4)); CK(cudaMalloc(&flush, 256 << 20));
    CK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dk, hk, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, hv, nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xFF, nq * 2)); /* poison: NaN */
    CUtensorMap mq, mk, mv;
    make_map(&mq, dq, B, Sq, H, D, ATT_BM);
    make_map(&mk, dk, B, Sk, Hkv, D, ATT_BN);
    make_map(&mv, dv, B, Sk, Hkv, D, ATT_BN);
    att_params p;
    memset(&p, 0, sizeof p);
    p.B = B; p.Hq = H; p.Hkv = Hkv; p.Sq = Sq; p.Sk = Sk; p.causal = causal;
    const float scale = 1.0f / sqrtf((float)D);
    p.scale_log2 = scale * 1.4426950408889634f;
    p.O = (__nv_bfloat16 *)dout;
    p.o_sb = (long long)Sq * H * D; p.o_ss = (long long)H * D; p.o_sh = D;
    p.lse = dl;
    auto run = [&]() { if (D == 128) launch<128>(mq, mk, mv, p); else launch<64>(mq, mk, mv, p); };
    run();
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ho, dout, nq * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl, dl, (size_t)B * H * Sq * 4, cudaMemcpyDeviceToHost));
    /* float64 reference on sampled (b, h, row) */
    double num = 0, den = 0, lse_err = 0;
    size_t nan = 0;
    for (size_t i = 0; i < nq; i++) if (ho[i] != ho[i] || (ho[i] & 0x7FFF) > 0x7F80) nan++;
    double *srow = (double *)malloc((size_t)Sk * 8);
    for (int t = 0; t < 256; t++) {
        int b = rand() % B, h = rand() % H, i = t < 2 ? (t == 0 ? 0 : Sq - 1) : rand() % Sq, hk2 = h / (H / Hkv);
        double mx = -INFINITY;
        for (int j = 0; j < Sk; j++) {
            bool ok = !causal || j <= i + (Sk - Sq);
            double s = 0;
            for (int d = 0; d < D; d++)
                s += (double)bf2f(hq[(((size_t)b * Sq + i) * H + h) * D + d]) * bf2f(hk[(((size_t)b * Sk + j) * Hkv + hk2) * D + d]);
            srow[j] = ok ? s * scale : -INFINITY;
            if (srow[j] > mx) mx = srow[j];
        }
        double l = 0;
        for (int j = 0; j < Sk; j++) l += mx == -INFINITY ? 0 : exp(srow[j] - mx);
        for (int d = 0; d < D; d++) {
            double o = 0;
            for (int j = 0; j < Sk; j++)
                if (l > 0) o += exp(srow[j] - mx) / l * bf2f(hv[(((size_t)b * Sk + j) * Hkv + hk2) * D + d]);
            double got = bf2f(ho[(((size_t)b * Sq + i) * H + h) * D + d]);
            num += (got - o) * (got - o);
            den += o * o;
        }
        double lse_ref = l > 0 ? mx + log(l) : -INFINITY, lse_got = hl[((size_t)b * H + h) * Sq + i];
        if (!(lse_ref == -INFINITY && lse_got == -INFINITY)) lse_err = fmax(lse_err, fabs(lse_got - lse_ref));
    }
    /* timing */
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    float *t = (float *)malloc(reps * 4);
    for (int w = 0; w < 3; w++) run();
    for (int r = 0; r < reps; r++) {
        CK(cudaMemsetAsync(flush, r & 0xFF, 256 << 20));
        cudaEventRecord(e0); run(); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
        cudaEventElapsedTime(&t[r], e0, e1);
    }
    CK(cudaGetLastError());
    qsort(t, reps, 4, cmp_float);
    double flop = 4.0 * B * H * (double)Sq * Sk * D * (causal ? 0.5 : 1.0), ms = t[reps / 2];
    double rel = sqrt(num / (den > 0 ? den : 1));
    printf("B=%d S=%d/%d H=%d/%d D=%d causal=%d | %.3f ms %.1f TFLOP/s | rel.err %.2e lse.err %.2e nan %zu\n", B, Sq, Sk,
           H, Hkv, D, causal, ms, flop / ms / 1e9, rel, lse_err, nan);
    return (nan || rel > 1e-2 || lse_err > 1e-2) ? 1 : 0;
}
