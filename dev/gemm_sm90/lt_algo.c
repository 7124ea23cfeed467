/* Which cuBLASLt algorithm the heuristic picks for bf16 GEMMs (row-major D = op(A) op(B), as
 * camel bench gemm asks): algo id, tile, stages, split K, swizzle, cluster shape, as numbers of
 * cublasLt.h's enums (decode them with that header). Dev tool, not part of the build:
 *   nvcc -O2 dev/gemm_sm90/lt_algo.c -lcublasLt -o /tmp/lt_algo && /tmp/lt_algo M N K opa opb ... */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static void show(cublasLtHandle_t lt, int M, int N, int K, char opa, char opb) {
    /* row-major D (M x N) = column-major D^T (N x M) = op(B)^T op(A)^T: Lt's A is our B */
    cublasOperation_t ta = opb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N, tb = opa == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDesc_t md;
    cublasLtMatmulDescCreate(&md, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ta == CUBLAS_OP_N ? N : K, ta == CUBLAS_OP_N ? K : N, opb == 'T' ? K : N);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, tb == CUBLAS_OP_N ? K : M, tb == CUBLAS_OP_N ? M : K, opa == 'T' ? M : K);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = 32u << 20;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t r[4];
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, md, la, lb, lc, lc, pref, 4, r, &found);
    for (int i = 0; i < found && i < 2; i++) {
        int id = 0, tile = 0, splitk = 0, red = 0, swz = 0, stages = 0, cluster = 0, inner = 0;
        size_t w;
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof inner, &w);
        printf("%5d %5d %5d %c%c #%d algo %d tile %d stages %d splitk %d red %d swizzle %d cluster %d inner %d ws %zu\n",
               M, N, K, opa, opb, i, id, tile, stages, splitk, red, swz, cluster, inner, r[i].workspaceSize);
    }
}

int main(int argc, char **argv) {
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    for (int i = 1; i + 4 < argc; i += 5) show(lt, atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2]), argv[i + 3][0], argv[i + 4][0]);
    return 0;
}
