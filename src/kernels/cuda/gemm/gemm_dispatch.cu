/* cml__gemm_cuda: the CUDA GEMM dispatcher, and the bias-gradient reduction.
 *
 * Path order (each *_takes says, without launching, whether it handles desc):
 *   1. cml__gemm_sm90 (gemm_sm90.cu, Hopper wgmma + TMA) when cml__gemm_sm90_takes;
 *   2. cml__gemm_f32 (gemm_f32.cu, exact f32 on CUDA cores) for f32 inputs with
 *      default math when cml__gemm_f32_takes;
 *   3. cml__gemm_simt (gemm_simt.cu): everything else, always correct.
 *
 * dbias (dbias[b*M + m] = sa * sum_k op(A)[m,k]) runs first, as two small
 * kernels with a fixed summation order (no atomics, so bitwise repeatable):
 * the K range is cut into `splits` chunks chosen from the shape alone (never
 * from the GPU), each block sums 32 rows of one chunk into an f32 partial in
 * the workspace, and a second kernel adds the chunks in order, applies sa and
 * stores d_dtype. A's row m is strided when op_a = T (the backward's dY^T):
 * then a warp reads 32 consecutive m of one k; when op_a = N a warp reads 32
 * consecutive k of one row and reduces with a fixed shuffle tree. */
#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm/gemm_epilogue.cuh"
#include "kernels/cuda/gemm/gemm_input.cuh"

#define DBIAS_ROWS 32          /* rows m of one block */
#define DBIAS_THREADS 256      /* 8 warps */
#define DBIAS_MIN_CHUNK 256    /* k per split, at least */
#define DBIAS_TARGET_BLOCKS 264 /* about two blocks per SM of an H100; a constant, so the order is the device's */

typedef struct dbias_params {
    const void *A;
    int a_dtype, a_trans;
    long long lda, stride_a, M, K, batch, splits, chunk;
    float *partial; /* [batch][splits][M] */
} dbias_params;

/* partial[b][s][m] = sum over k in chunk s of op(A)[m,k], for 32 rows m per block. */
static __global__ void __launch_bounds__(DBIAS_THREADS) dbias_partial_kernel(const __grid_constant__ dbias_params p) {
    __shared__ float lanes[DBIAS_THREADS / 32][33];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long m0 = (long long)blockIdx.x * DBIAS_ROWS, s = blockIdx.y;
    const long long k_begin = s * p.chunk, k_end = min(p.K, k_begin + p.chunk);
    for (long long b = blockIdx.z; b < p.batch; b += gridDim.z) {
        const long long base = b * p.stride_a;
        float *out = p.partial + (b * p.splits + s) * p.M;
        if (p.a_trans) {
            /* A stored K x M: lane -> m, warp -> every 8th k of the chunk; then warps added in order */
            const long long m = m0 + lane;
            float acc = 0.0f;
            if (m < p.M)
                for (long long k = k_begin + warp; k < k_end; k += DBIAS_THREADS / 32)
                    acc += cml__gemm_load_input(p.A, p.a_dtype, base + k * p.lda + m);
            lanes[warp][lane] = acc;
            __syncthreads();
            if (warp == 0 && m < p.M) {
                float sum = 0.0f;
                for (int w = 0; w < DBIAS_THREADS / 32; w++) sum += lanes[w][lane];
                out[m] = sum;
            }
            __syncthreads();
        } else {
            /* A stored M x K: warp -> rows warp, warp + 8, ...; lane -> every 32nd k; fixed shuffle tree */
            for (int r = warp; r < DBIAS_ROWS; r += DBIAS_THREADS / 32) {
                const long long m = m0 + r;
                if (m >= p.M) break;
                float acc = 0.0f;
                for (long long k = k_begin + lane; k < k_end; k += 32) acc += cml__gemm_load_input(p.A, p.a_dtype, base + m * p.lda + k);
#pragma unroll
                for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, off);
                if (lane == 0) out[m] = acc;
            }
        }
    }
}

/* dbias[b*M + m] = sa(m) * sum over splits in order of partial[b][s][m], stored in d_dtype. */
static __global__ void dbias_finish_kernel(void *dbias, int d_dtype, const float *partial, long long M, long long batch,
                                           long long splits, int a_scale_mode, const float *a_scale) {
    const long long total = batch * M;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long b = i / M, m = i % M;
        float sum = 0.0f;
        for (long long s = 0; s < splits; s++) sum += partial[(b * splits + s) * M + m];
        if (a_scale_mode == CML_SCALE_TENSOR) sum *= a_scale[0];
        else if (a_scale_mode == CML_SCALE_VECTOR) sum *= a_scale[m];
        cml__gemm_st(dbias, d_dtype, i, sum);
    }
}

/* K chunks for the dbias partial sums: from the shape alone. */
static long long dbias_splits(const cml_gemm_desc *d) {
    const long long row_blocks = (d->M + DBIAS_ROWS - 1) / DBIAS_ROWS * d->batch;
    long long want = (DBIAS_TARGET_BLOCKS + row_blocks - 1) / row_blocks;
    long long most = (d->K + DBIAS_MIN_CHUNK - 1) / DBIAS_MIN_CHUNK;
    if (want > most) want = most;
    if (want > 65535) want = 65535; /* gridDim.y */
    return want > 0 ? want : 1;
}

static size_t dbias_workspace(const cml_gemm_desc *d) {
    if (!d->dbias) return 0;
    return sizeof(float) * (size_t)(d->batch * dbias_splits(d) * d->M);
}

static cml_status dbias_launch(cml_ctx *ctx, const cml_gemm_desc *d, const void *A) {
    static const char fn[] = "cml_gemm";
    dbias_params p;
    p.A = A;
    p.a_dtype = (int)d->a_dtype;
    p.a_trans = d->op_a == CML_OP_T;
    p.lda = d->lda;
    p.stride_a = d->stride_a;
    p.M = d->M;
    p.K = d->K;
    p.batch = d->batch;
    p.splits = dbias_splits(d);
    p.chunk = (d->K + p.splits - 1) / p.splits;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, dbias_workspace(d)));
    p.partial = (float *)ws;
    const long long row_blocks = (d->M + DBIAS_ROWS - 1) / DBIAS_ROWS;
    if (row_blocks > 0x7FFFFFFFll)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: dbias with M=%lld rows is too large", fn, (long long)d->M);
    dim3 grid((unsigned)row_blocks, (unsigned)p.splits, (unsigned)(d->batch < 65535 ? d->batch : 65535));
    dbias_partial_kernel<<<grid, DBIAS_THREADS, 0, cml__stream(ctx)>>>(p);
    CML_TRY(cml__cuda_check_launch(fn, "dbias_partial_kernel", cml_dtype_name(d->a_dtype), d->batch * d->M * d->K,
                                   grid.x * grid.y * grid.z, DBIAS_THREADS));
    const long long total = d->batch * d->M;
    const unsigned fgrid = cml__grid_size(ctx, total, 256);
    dbias_finish_kernel<<<fgrid, 256, 0, cml__stream(ctx)>>>(d->dbias, (int)d->d_dtype, p.partial, d->M, d->batch,
                                                             p.splits, (int)d->a_scale_mode, d->a_scale);
    return cml__cuda_check_launch(fn, "dbias_finish_kernel", cml_dtype_name(d->d_dtype), total, fgrid, 256);
}

/* The path for desc; 0 sm90, 1 f32, 2 simt. */
static int pick_path(const cml_ctx *ctx, const cml_gemm_desc *d, const void *D, const void *A, const void *B,
                     const void *C) {
    if (cml__gemm_sm90_takes(ctx, d, D, A, B, C)) return 0;
    if (d->a_dtype == CML_F32 && d->b_dtype == CML_F32 && d->math == CML_GEMM_MATH_DEFAULT &&
        cml__gemm_f32_takes(ctx, d, D, A, B, C))
        return 1;
    return 2;
}

extern "C" const char *cml__gemm_cuda_path_name(const cml_ctx *ctx, const cml_gemm_desc *d, const void *D,
                                                const void *A, const void *B, const void *C) {
    static const char *const names[] = {"sm90", "f32", "simt"};
    return names[pick_path(ctx, d, D, A, B, C)];
}

extern "C" cml_status cml__gemm_cuda(cml_ctx *ctx, const cml_gemm_desc *d, void *D, const void *A, const void *B,
                                     const void *C) {
    CML_TRY(cml__cuda_activate(ctx));
    /* dbias first: the GEMM may then reuse the workspace (same stream, so in order) */
    if (d->dbias) CML_TRY(dbias_launch(ctx, d, A));
    switch (pick_path(ctx, d, D, A, B, C)) {
    case 0: return cml__gemm_sm90(ctx, d, D, A, B, C);
    case 1: return cml__gemm_f32(ctx, d, D, A, B, C);
    default: return cml__gemm_simt(ctx, d, D, A, B, C);
    }
}

extern "C" size_t cml__gemm_cuda_workspace_size(const cml_ctx *ctx, const cml_gemm_desc *d) {
    /* dbias and the GEMM's own use (sm90: repacks and split-K partials; f32: split-K partials;
     * simt: none) take the workspace one after the other (same stream). The path is not known
     * without the pointers: the larger of sm90's and f32's (each 0 for inputs it never takes). */
    size_t dbias = dbias_workspace(d), gemm = cml__gemm_sm90_workspace_size(ctx, d);
    const size_t f32 = cml__gemm_f32_workspace_size(ctx, d);
    if (f32 > gemm) gemm = f32;
    return dbias > gemm ? dbias : gemm;
}

/* One persistent launch for all problems when the sm90 path takes every one of them
 * (their dbias reductions first); otherwise each problem through the dispatcher above. */
extern "C" cml_status cml__gemm_grouped_cuda(cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                                             const void *const *A, const void *const *B, const void *const *C) {
    CML_TRY(cml__cuda_activate(ctx));
    if (cml__gemm_sm90_grouped_takes(ctx, descs, count, D, A, B, C)) {
        for (int64_t i = 0; i < count; i++)
            if (descs[i].dbias) CML_TRY(dbias_launch(ctx, &descs[i], A[i]));
        return cml__gemm_sm90_grouped(ctx, descs, count, D, A, B, C);
    }
    for (int64_t i = 0; i < count; i++) CML_TRY(cml__gemm_cuda(ctx, &descs[i], D[i], A[i], B[i], C ? C[i] : NULL));
    return CML_OK;
}
