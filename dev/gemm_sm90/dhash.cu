/* D's bits, for bitwise A/B of two builds of the library (dev/gemm_sm90/consumer_probe.sh).
 *
 * For each of the 15 bf16 GPT-2 GEMMs of `camel bench gemm --set gpt2` (T = 8192 tokens; fwd NT,
 * dx NN, dw TN) it fills A and B with the same pseudo-random bf16 values in every build (a hash of
 * the element index, uniform in [-1, 1)), poisons D with 0xFF bytes (NaN), runs cml_gemm twice
 * (D must repeat bitwise within the build too), and prints one line: the case, the plan-independent
 * FNV-1a hash of D's bytes, and "repeat ok"; then 9 lines of the TMA epilogue's other kinds and
 * of NaN / infinity in A on 2048 x 768 x 768 (session 10: the epilogue's quad kinds, with the
 * counts of NaN and infinite elements of D and the NaN bit patterns seen). Two builds whose kernels
 * compute the same products in the same order print the same lines; any changed bit of any element
 * changes its line.
 *   nvcc -O2 -std=c++17 -arch=sm_90a -Iinclude dev/gemm_sm90/dhash.cu BUILD/src/libcamel.a -Xlinker OPENBLAS \
 *        -lz -lgomp -ldl -lrt -lpthread -o dhash      (OPENBLAS: CML_OPENBLAS_LIB of BUILD/CMakeCache.txt) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "camel/camel.h"

static uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* bf16 of a value uniform in [-1, 1) from a hash of (seed, i): the same in every build */
__global__ void dhash_fill(uint16_t *x, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
        const float v = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
        uint32_t bits;
        memcpy(&bits, &v, 4);
        x[i] = (uint16_t)(bits >> 16); /* truncation: any fixed rule will do */
    }
}

#define CK(x)                                                                                 \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "dhash: %s failed: %s\n", #x, cudaGetErrorString(e_));            \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

int main(void) {
    const int64_t T = 8192;
    const struct { const char *name; int64_t N, K; } lin[] = {
        {"attn_qkv", 2304, 768}, {"attn_proj", 768, 768}, {"mlp_fc", 3072, 768}, {"mlp_proj", 768, 3072},
        {"lm_head", 50304, 768}};
    const size_t max_in = (size_t)T * 50304, max_out = (size_t)T * 50304; /* elements */
    uint16_t *A, *B, *D;
    CK(cudaMalloc(&A, max_in * 2));
    CK(cudaMalloc(&B, max_in * 2));
    CK(cudaMalloc(&D, max_out * 2));
    dhash_fill<<<1024, 256>>>(A, max_in, 0x1234567u);
    dhash_fill<<<1024, 256>>>(B, max_in, 0x7654321u);
    CK(cudaDeviceSynchronize());
    cml_ctx *ctx = NULL;
    cml_device dev;
    dev.type = CML_CUDA;
    dev.index = 0;
    if (cml_ctx_create(&ctx, dev) != CML_OK) {
        fprintf(stderr, "dhash: cml_ctx_create: %s\n", cml_last_error());
        return 1;
    }
    cudaStream_t st = (cudaStream_t)cml_ctx_stream(ctx); /* the poison must land before the GEMM runs */
    uint8_t *h1 = (uint8_t *)malloc(max_out * 2), *h2 = (uint8_t *)malloc(max_out * 2);
    if (!h1 || !h2) {
        fprintf(stderr, "dhash: out of host memory\n");
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        const int64_t N = lin[i].N, K = lin[i].K;
        const struct { const char *op; cml_op oa, ob; int64_t M, N, K; } cs[3] = {
            {"fwd", CML_OP_N, CML_OP_T, T, N, K}, {"dx", CML_OP_N, CML_OP_N, T, K, N}, {"dw", CML_OP_T, CML_OP_N, N, K, T}};
        for (int c = 0; c < 3; c++) {
            const cml_gemm_desc d = cml_gemm_desc_init(cs[c].oa, cs[c].ob, cs[c].M, cs[c].N, cs[c].K, 1, CML_BF16, CML_BF16);
            const size_t bytes = (size_t)cs[c].M * cs[c].N * 2;
            uint64_t h = 0;
            for (int r = 0; r < 2; r++) {
                CK(cudaMemsetAsync(D, 0xFF, bytes, st)); /* poison: NaN wherever the GEMM writes nothing */
                if (cml_gemm(ctx, &d, D, A, B, NULL) != CML_OK || cml_ctx_synchronize(ctx) != CML_OK) {
                    fprintf(stderr, "dhash: cml_gemm %s %s: %s\n", cs[c].op, lin[i].name, cml_last_error());
                    return 1;
                }
                CK(cudaMemcpy(r ? h2 : h1, D, bytes, cudaMemcpyDeviceToHost));
                if (r == 0) h = fnv1a(h1, bytes);
            }
            const bool same = memcmp(h1, h2, bytes) == 0;
            bad += !same;
            printf("dhash %-4s %-10s %5lldx%5lldx%5lld %016llx %s\n", cs[c].op, lin[i].name, (long long)cs[c].M,
                   (long long)cs[c].N, (long long)cs[c].K, (unsigned long long)h, same ? "repeat ok" : "REPEAT DIFFERS");
        }
    }
    /* The TMA epilogue's other kinds (cml__sm90_tma_epilogue), 2048 x 768 x 768 (NT): alpha != 1,
     * f16 D, bias + ReLU/GELU; and NaN / infinity in A (a quiet NaN with a payload, a signalling
     * NaN, +inf and -inf, and +inf with -inf in one row: inf - inf made by the tensor cores), so the
     * rows of D they reach hold NaN and infinities, with alpha 1 (no multiply since session 10) and
     * alpha != 1. Each line must be the same in both builds. */
    const struct { const char *name; cml_dtype d; float alpha; cml_epilogue act; int bias, nan; } ep[] = {
        {"bf16_a1.25", CML_BF16, 1.25f, CML_EPILOGUE_NONE, 0, 0},
        {"f16_a1", CML_F16, 1.0f, CML_EPILOGUE_NONE, 0, 0},
        {"f16_a-0.75", CML_F16, -0.75f, CML_EPILOGUE_NONE, 0, 0},
        {"bf16_bias_gelu", CML_BF16, 1.0f, CML_EPILOGUE_GELU_TANH, 1, 0},
        {"f16_rowbias_relu", CML_F16, 1.25f, CML_EPILOGUE_RELU, 2, 0},
        {"bf16_a1_nan", CML_BF16, 1.0f, CML_EPILOGUE_NONE, 0, 1},
        {"bf16_a1.25_nan", CML_BF16, 1.25f, CML_EPILOGUE_NONE, 0, 1},
        {"f16_a1_nan", CML_F16, 1.0f, CML_EPILOGUE_NONE, 0, 1},
        {"bf16_relu_nan", CML_BF16, 1.0f, CML_EPILOGUE_RELU, 0, 1}};
    const int64_t EM = 2048, EN = 768, EK = 768;
    uint16_t *A2;
    CK(cudaMalloc(&A2, (size_t)EM * EK * 2));
    CK(cudaMemcpy(A2, A, (size_t)EM * EK * 2, cudaMemcpyDeviceToDevice));
    /* (row, k, bf16 bits): A is M x K row-major (op N) */
    const struct { int64_t r, k; uint16_t v; } spec[] = {
        {5, 7, 0x7FC1},    {300, 100, 0x7F81}, {1000, 3, 0xFF80},
        {1500, 700, 0x7F80}, {1600, 10, 0x7F80}, {1600, 11, 0xFF80}};
    for (size_t j = 0; j < sizeof spec / sizeof spec[0]; j++)
        CK(cudaMemcpy(A2 + spec[j].r * EK + spec[j].k, &spec[j].v, 2, cudaMemcpyHostToDevice));
    for (size_t c = 0; c < sizeof ep / sizeof ep[0]; c++) {
        cml_gemm_desc d = cml_gemm_desc_init(CML_OP_N, CML_OP_T, EM, EN, EK, 1, CML_BF16, ep[c].d);
        d.alpha = ep[c].alpha;
        d.epilogue = ep[c].act;
        d.bias = ep[c].bias ? (const void *)B : NULL; /* bias in D's dtype: B's first bits, the same in both builds */
        d.bias_axis = ep[c].bias == 2 ? CML_BIAS_PER_ROW : CML_BIAS_PER_COLUMN;
        const size_t bytes = (size_t)EM * EN * 2;
        uint64_t h = 0;
        for (int r = 0; r < 2; r++) {
            CK(cudaMemsetAsync(D, 0xFF, bytes, st));
            if (cml_gemm(ctx, &d, D, ep[c].nan ? A2 : A, B, NULL) != CML_OK || cml_ctx_synchronize(ctx) != CML_OK) {
                fprintf(stderr, "dhash: cml_gemm %s: %s\n", ep[c].name, cml_last_error());
                return 1;
            }
            CK(cudaMemcpy(r ? h2 : h1, D, bytes, cudaMemcpyDeviceToHost));
            if (r == 0) h = fnv1a(h1, bytes);
        }
        const bool same = memcmp(h1, h2, bytes) == 0;
        bad += !same;
        /* NaN / infinite elements of D and the first two distinct NaN patterns (16-bit) */
        const uint16_t exp_mask = ep[c].d == CML_BF16 ? 0x7F80 : 0x7C00, man_mask = ep[c].d == CML_BF16 ? 0x7F : 0x3FF;
        long long nans = 0, infs = 0;
        unsigned pat[2] = {0, 0};
        for (size_t j = 0; j < (size_t)EM * EN; j++) {
            uint16_t x;
            memcpy(&x, h1 + 2 * j, 2);
            if ((x & exp_mask) != exp_mask) continue;
            if (!(x & man_mask)) {
                infs++;
                continue;
            }
            nans++;
            if (!pat[0]) pat[0] = x;
            else if (!pat[1] && x != pat[0]) pat[1] = x;
        }
        printf("dhash epi  %-18s %5lldx%5lldx%5lld %016llx nan %lld (%04x %04x) inf %lld %s\n", ep[c].name,
               (long long)EM, (long long)EN, (long long)EK, (unsigned long long)h, nans, pat[0], pat[1], infs,
               same ? "repeat ok" : "REPEAT DIFFERS");
    }
    cml_ctx_destroy(ctx);
    return bad ? 2 : 0;
}
