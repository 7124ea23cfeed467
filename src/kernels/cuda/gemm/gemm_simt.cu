/* The always-correct CUDA GEMM path: any input dtypes (f32, f16, bf16, fp8
 * e4m3/e5m2; A and B may differ), op N/T, any leading dimensions and
 * alignment, strided batches (stride 0 broadcasts), K = 0, every epilogue
 * (gemm_epilogue.cuh). f32 accumulation with one fused multiply-add per
 * product in k order, so results are deterministic.
 *
 * Tiling: a block of 256 threads owns a 64 x 64 tile of D and walks K in
 * slices of 16: each slice of op(A) (64 x 16) and op(B) (16 x 64) is read with
 * scalar loads (coalesced along whichever dim is contiguous in memory),
 * converted to f32 (and rounded to tf32 under CML_GEMM_MATH_TF32, with
 * cvt.rna.tf32.f32 as tensor cores see it) and stored k-major in shared
 * memory; each thread then accumulates a 4 x 4 sub-tile, rows ty + 16 i and
 * columns tx + 16 j, so a warp reads shared memory conflict-free (B) or as a
 * broadcast (A) and stores 16 consecutive columns of D per row. Blocks walk
 * the tiles (n fastest, then m, then batch) with a grid-stride loop. */
#include <stdio.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm/gemm_epilogue.cuh"
#include "kernels/cuda/gemm/gemm_input.cuh"

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define THREADS 256
#define LOADS_PER_THREAD (TILE_M * TILE_K / THREADS) /* 4, the same for both operands */

typedef struct simt_params {
    const void *A, *B;
    int a_dtype, b_dtype;
    int a_trans, b_trans;
    int tf32;
    long long lda, ldb, stride_a, stride_b;
    long long M, N, K, batch, tiles_m, tiles_n;
    cml__gemm_epi epi;
} simt_params;

static __device__ __forceinline__ float round_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}

/* Element e (< 1024) of a 16-deep slice of an operand seen as a rows x 16 tile
 * (rows = 64 of op(A)'s M or op(B)'s N): its row and k, ordered so that
 * consecutive e are consecutive in memory (k fastest when k is contiguous). */
static __device__ __forceinline__ void slice_coords(int e, bool k_contiguous, int *row, int *k) {
    if (k_contiguous) {
        *row = e / TILE_K;
        *k = e % TILE_K;
    } else {
        *k = e / TILE_M;
        *row = e % TILE_M;
    }
}

static __global__ void __launch_bounds__(THREADS) gemm_simt_kernel(const __grid_constant__ simt_params p) {
    __shared__ float a_tile[TILE_K][TILE_M + 1]; /* [k][m]; +1: the scattered stores spread over banks */
    __shared__ float b_tile[TILE_K][TILE_N + 1]; /* [k][n] */
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const bool a_k_contig = !p.a_trans, b_k_contig = p.b_trans; /* A stored M x K (N) or K x M (T); B K x N or N x K */
    const long long tiles = p.tiles_m * p.tiles_n * p.batch;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long tn = t % p.tiles_n, tm = (t / p.tiles_n) % p.tiles_m, b = t / (p.tiles_n * p.tiles_m);
        const long long m0 = tm * TILE_M, n0 = tn * TILE_N;
        const long long a_base = b * p.stride_a, b_base = b * p.stride_b;
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
        for (long long k0 = 0; k0 < p.K; k0 += TILE_K) {
#pragma unroll
            for (int l = 0; l < LOADS_PER_THREAD; l++) {
                int row, k;
                slice_coords(tid + l * THREADS, a_k_contig, &row, &k);
                long long g_row = m0 + row, g_k = k0 + k;
                float v = 0.0f;
                if (g_row < p.M && g_k < p.K)
                    v = cml__gemm_load_input(p.A, p.a_dtype, a_base + (p.a_trans ? g_k * p.lda + g_row : g_row * p.lda + g_k));
                a_tile[k][row] = p.tf32 ? round_tf32(v) : v;
                slice_coords(tid + l * THREADS, b_k_contig, &row, &k);
                g_row = n0 + row;
                g_k = k0 + k;
                v = 0.0f;
                if (g_row < p.N && g_k < p.K)
                    v = cml__gemm_load_input(p.B, p.b_dtype, b_base + (p.b_trans ? g_row * p.ldb + g_k : g_k * p.ldb + g_row));
                b_tile[k][row] = p.tf32 ? round_tf32(v) : v;
            }
            __syncthreads();
#pragma unroll
            for (int k = 0; k < TILE_K; k++) {
                float a[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; i++) a[i] = a_tile[k][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; j++) bv[j] = b_tile[k][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
            }
            __syncthreads(); /* the slice is consumed before the next one overwrites it */
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) cml__gemm_epi_store(&p.epi, b, m0 + ty + 16 * i, n0 + tx + 16 * j, acc[i][j]);
    }
}

static cml_status gemm_simt_launch(cml_ctx *ctx, const simt_params *p) {
    const long long tiles = p->tiles_m * p->tiles_n * p->batch;
    /* enough blocks for every SM (8 resident blocks of 256 threads each), no more: the rest loop */
    const unsigned grid = cml__grid_size(ctx, tiles * THREADS, THREADS);
    gemm_simt_kernel<<<grid, THREADS, 0, cml__stream(ctx)>>>(*p);
    char dtypes[48];
    snprintf(dtypes, sizeof dtypes, "%s*%s->%s", cml_dtype_name((cml_dtype)p->a_dtype),
             cml_dtype_name((cml_dtype)p->b_dtype), cml_dtype_name((cml_dtype)p->epi.d_dtype));
    return cml__cuda_check_launch("cml_gemm", "gemm_simt_kernel", dtypes, tiles, grid, THREADS);
}

extern "C" cml_status cml__gemm_simt(cml_ctx *ctx, const cml_gemm_desc *d, void *D, const void *A, const void *B,
                                     const void *C) {
    simt_params p;
    p.A = A;
    p.B = B;
    p.a_dtype = (int)d->a_dtype;
    p.b_dtype = (int)d->b_dtype;
    p.a_trans = d->op_a == CML_OP_T;
    p.b_trans = d->op_b == CML_OP_T;
    p.tf32 = d->math == CML_GEMM_MATH_TF32;
    p.lda = d->lda;
    p.ldb = d->ldb;
    p.stride_a = d->stride_a;
    p.stride_b = d->stride_b;
    p.M = d->M;
    p.N = d->N;
    p.K = d->K;
    p.batch = d->batch;
    p.tiles_m = (d->M + TILE_M - 1) / TILE_M;
    p.tiles_n = (d->N + TILE_N - 1) / TILE_N;
    p.epi = cml__gemm_epi_make(d, D, C);
    return gemm_simt_launch(ctx, &p);
}
