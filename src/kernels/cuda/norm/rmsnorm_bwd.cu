/* CUDA RMSNorm backward over contiguous (rows, C); f32/f16/bf16 storage, f32 math.
 * With xhat = x rstd and g = dy gamma (as on the CPU):
 *   dx = rstd (g - xhat mean(g xhat)),  dgamma[c] = sum_r dy[r,c] xhat[r,c].
 *
 * The paths of the LayerNorm backward (layernorm_bwd.cu), with one row sum
 * instead of two and no dbeta:
 * - 16-byte aligned rows of up to 1024 f32 / 2048 bf16 elements: row groups
 *   that each walk their own rows with the next row in flight
 *   (norm_bwd_rows.cuh, shared with the LayerNorm backward);
 * - other rows of up to 8192 elements (4096 unaligned): blocks of 1024 threads (512
 *   unaligned) hold R rows at a time in registers (8 elements per thread),
 *   each block walking rows blockIdx.x, blockIdx.x + gridDim.x, ... (the grid
 *   is what fits on the GPU at once). A thread owns the same columns in every
 *   row, so it accumulates its dgamma terms in registers over the block's
 *   rows; at the end the block's R groups are merged in order through shared
 *   memory into one partial row per block, and a second kernel sums the
 *   partial rows in block order, per column. x and dy are read once, dx
 *   written once.
 * - longer 16-byte aligned rows: one kernel reads x and dy once and writes dx
 *   once, dgamma included (norm_bwd_long.cuh, shared with the LayerNorm
 *   backward: per-thread dgamma accumulators, one partial row per group of
 *   blocks, summed in order by the same second kernel; rows of 3..16 half chunks
 *   as thread-block clusters exchanging their row sums through distributed
 *   shared memory: norm_bwd_cluster.cuh), unless the staged kernel plans
 *   them (norm_bwd_staged.cuh: rows longer than one chunk staged in shared
 *   memory by bulk copies, as for the LayerNorm backward);
 * - longer unaligned rows: dx in two passes over chunks (L2-batched); dgamma
 *   through a column kernel (32 columns x 8 row phases per block, rows split
 *   into ranges whose partial rows the second kernel sums in order), which
 *   reads x and dy once more.
 * Deterministic throughout: every sum has a fixed order, no float atomics. */
#include <math.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/row_sync.cuh"
#include "kernels/cuda/common/rows.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/norm/norm_bwd_cluster.cuh"
#include "kernels/cuda/norm/norm_bwd_long.cuh"
#include "kernels/cuda/norm/norm_bwd_partial.cuh"
#include "kernels/cuda/norm/norm_bwd_rows.cuh"
#include "kernels/cuda/norm/norm_bwd_staged.cuh"
#include "kernels/cuda/norm/norm_bwd_wide.cuh"

#define E_ROW 8
#define COMBINE_FLOATS (1024 * E_ROW) /* R groups x C columns of one block */
#define CHUNK 8192
#define THREADS 256
#define UNROLL 2 /* 16-byte loads in flight per thread and input (three inputs) */

/* ---- rows held in registers ------------------------------------------------------------------------ */

/* part (f32, (gridDim.x, C)): the block's dgamma terms; NULL when dgamma is not wanted.
 * GT: G as a compile-time constant (32 .. 1024, aligned rows; 0: G = blockDim.x), so that the
 * row reduction is unrolled with constant masks and widths. */
template <int DT, bool VEC, int GT>
static __global__ void __launch_bounds__(VEC ? 1024 : 512)
    rms_bwd_rows_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *rstd,
                        long long rows, int C) {
    cml__pdl_wait(); /* PDL: first (the trigger stays after the loads, below) */
    typedef typename cml__elem<DT>::type T;
    __shared__ float red[2][32];
    __shared__ float combine[COMBINE_FLOATS];
    const int G = GT > 0 ? GT : (int)blockDim.x, R = blockDim.y, t = threadIdx.x;
    const nb_div div(C);
    float dg[E_ROW];
#pragma unroll
    for (int e = 0; e < E_ROW; e++) dg[e] = 0.0f;
    int parity = 0; /* alternate scratch arrays: consecutive rows need no extra barrier */
    for (long long r0 = (long long)blockIdx.x * R; r0 < rows; r0 += (long long)gridDim.x * R) {
        const long long row = r0 + threadIdx.y;
        const bool valid = row < rows;
        const size_t off = (size_t)(valid ? row : 0) * (size_t)C;
        float xv[E_ROW], gv[E_ROW];
        cml__row_load<DT, VEC, E_ROW>(xv, (const T *)x + off, valid ? C : 0, t, G, 0.0f);
        cml__row_load<DT, VEC, E_ROW>(gv, (const T *)dy + off, valid ? C : 0, t, G, 0.0f); /* dy; 0 past the row */
        float gm[E_ROW]; /* gamma, re-read per row from L1 rather than held: registers are the limit here */
        cml__row_load<DT, VEC, E_ROW>(gm, gamma ? gamma : x, gamma ? C : 0, t, G, 1.0f);
        const float r = valid ? rstd[row] : 0.0f;
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < E_ROW; e++) s += gv[e] * gm[e] * (xv[e] * r);
        s = cml__group_allreduce(s, G, red[parity], cml__sum_op());
        parity ^= 1;
        const float mgx = div(s);
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const float xh = xv[e] * r;
            dg[e] += gv[e] * xh;
            xv[e] = r * (gv[e] * gm[e] - xh * mgx);
        }
        if (valid) cml__row_store<DT, VEC, E_ROW, true>((T *)dx + off, xv, C, t, G);
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    if (!part) return;      /* uniform across the grid */
    /* Merge the R groups' terms in group order. */
    float *out = part + (size_t)blockIdx.x * C;
    if (R == 1) {
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const int c = cml__row_col<DT, VEC>(e, t, G);
            if (c < C) out[c] = dg[e];
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < E_ROW; e++) {
        const int c = cml__row_col<DT, VEC>(e, t, G);
        if (c < C) combine[threadIdx.y * C + c] = dg[e];
    }
    __syncthreads();
    for (int c = threadIdx.y * G + t; c < C; c += G * R) {
        float a = combine[c];
        for (int q = 1; q < R; q++) a += combine[q * C + c];
        out[c] = a;
    }
}

/* The register-row kernel for groups of G threads: G a compile-time constant for aligned rows
 * from a warp up (the reductions unrolled), else read from blockDim. */
template <int DT> static inline decltype(&rms_bwd_rows_kernel<DT, true, 0>) rows_pick(bool vec, int G) {
    if (!vec) return rms_bwd_rows_kernel<DT, false, 0>;
    switch (G) {
    case 32: return rms_bwd_rows_kernel<DT, true, 32>;
    case 64: return rms_bwd_rows_kernel<DT, true, 64>;
    case 128: return rms_bwd_rows_kernel<DT, true, 128>;
    case 256: return rms_bwd_rows_kernel<DT, true, 256>;
    case 512: return rms_bwd_rows_kernel<DT, true, 512>;
    case 1024: return rms_bwd_rows_kernel<DT, true, 1024>;
    default: return rms_bwd_rows_kernel<DT, true, 0>;
    }
}

/* ---- long rows ---------------------------------------------------------------------------------------- */

/* Long unaligned rows, pass 1: partial[b] = sum of g xhat over block b's chunk of row row0 + b / splits. */
template <int DT>
static __global__ void __launch_bounds__(THREADS)
    rms_bwd_stats_kernel(float *partial, const void *dy, const void *x, const void *gamma, const float *rstd,
                         long long row0, long long C, int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float red[32];
    const long long b = blockIdx.x, row = row0 + b / splits;
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    const float r = rstd[row];
    float s = 0.0f;
    /* gamma as a third 16-byte stream (dy again, from L1, when there is none) */
    const T *dyr = (const T *)dy + row * C;
    const bool has_g = gamma != nullptr;
    cml__stream<DT, 3, false, UNROLL>(
        nullptr, dyr, (const T *)x + row * C, lo, hi, threadIdx.x, THREADS,
        [&](const float *v, long long) {
            s += v[0] * (has_g ? v[2] : 1.0f) * (v[1] * r);
            return 0.0f;
        },
        has_g ? gamma : (const void *)dyr);
    s = cml__group_allreduce(s, THREADS, red, cml__sum_op());
    if (threadIdx.x == 0) partial[b] = s;
}

template <int DT>
static __global__ void __launch_bounds__(THREADS)
    rms_bwd_apply_kernel(void *dx, const void *dy, const void *x, const void *gamma, const float *rstd,
                         const float *partial, long long row0, long long C, int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float stat;
    const long long b = blockIdx.x, row = row0 + b / splits;
    if (threadIdx.x == 0) {
        const float *p = partial + (b / splits) * splits;
        float a = p[0];
        for (int k = 1; k < splits; k++) a += p[k];
        stat = a / (float)C;
    }
    __syncthreads();
    const float mgx = stat, r = rstd[row];
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    const T *dyr = (const T *)dy + row * C;
    const bool has_g = gamma != nullptr;
    cml__stream<DT, 3, true, UNROLL>(
        (T *)dx + row * C, dyr, (const T *)x + row * C, lo, hi, threadIdx.x, THREADS,
        [&](const float *v, long long) { return r * (v[0] * (has_g ? v[2] : 1.0f) - (v[1] * r) * mgx); },
        has_g ? gamma : (const void *)dyr);
}

/* dgamma terms of columns [tile * 32, +32) over rows [lo, hi) of split blockIdx.y, the 8 row
 * phases added in order, into part[(blockIdx.y, C)]. */
template <int DT>
static __global__ void __launch_bounds__(256)
    rms_bwd_cols_kernel(float *part, const void *dy, const void *x, const float *rstd, long long rows, long long C,
                        long long rchunk) {
    cml__pdl_entry();
    __shared__ float sm[8][32];
    const long long c = (long long)blockIdx.x * 32 + threadIdx.x;
    const long long lo = (long long)blockIdx.y * rchunk, hi = lo + rchunk < rows ? lo + rchunk : rows;
    float a = 0.0f;
    if (c < C)
        for (long long j = lo + threadIdx.y; j < hi; j += 8)
            a += cml__ld<DT>(dy, j * C + c) * (cml__ld<DT>(x, j * C + c) * rstd[j]);
    sm[threadIdx.y][threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int k = 1; k < 8; k++) a += sm[k][threadIdx.x];
        part[(size_t)blockIdx.y * C + c] = a;
    }
}

/* ---- launch -------------------------------------------------------------------------------------------- */

static const char FN[] = "cml_rmsnorm_bwd";

static cml_status launched(const char *kernel, int dt, long long n, unsigned grid, unsigned block) {
    return cml__cuda_check_launch(FN, kernel, cml_dtype_name((cml_dtype)dt), n, grid, block);
}

template <int DT>
static cml_status partial_sum_launch(cml_ctx *ctx, void *dgamma, float *part, int nb, long long C) {
    CML_CUDA_TRY(FN, (nb_partial_sum_launch<DT, 1>(cml__stream(ctx), dgamma, nullptr, part, nb, C)));
    return CML_OK;
}

template <int DT>
static cml_status rows_launch(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x, const void *gamma,
                              const float *rstd, long long rows, long long C, bool vec, int sms) {
    const int threads = vec ? 1024 : 512;
    const int G = cml__pow2_at_least((C + E_ROW - 1) / E_ROW, threads), R = threads / G;
    int per_sm = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rows_pick<DT>(vec, G), threads, 0);
    if (e != cudaSuccess || per_sm < 1) {
        (void)cudaGetLastError();
        per_sm = 1;
    }
    const long long row_blocks = (rows + R - 1) / R, resident = (long long)sms * per_sm;
    const int nb = (int)(row_blocks < resident ? row_blocks : resident);
    void *part = NULL;
    if (dgamma) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)nb * (size_t)C * sizeof(float)));
    cudaStream_t st = cml__stream(ctx);
    cml__launch(rows_pick<DT>(vec, G), nb, dim3(G, R), 0, st, dx, (float *)part, dy, x, gamma, rstd, rows, (int)C);
    CML_TRY(launched("rms_bwd_rows_kernel", DT, rows * C, (unsigned)nb, (unsigned)threads));
    return dgamma ? partial_sum_launch<DT>(ctx, dgamma, (float *)part, nb, C) : CML_OK;
}

template <int DT>
static cml_status bwd_launch(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x, const void *gamma,
                             const float *rstd, long long rows, long long C) {
    typedef typename cml__elem<DT>::type T;
    cudaStream_t st = cml__stream(ctx);
    const int sms = cml__cuda_sm_count(ctx->device.index) > 0 ? cml__cuda_sm_count(ctx->device.index) : 132;
    const bool vec = cml__rows_vec_ok(C, sizeof(T), dx, dy, x) && (!gamma || ((uintptr_t)gamma & 15u) == 0);
    nbs_plan sp; /* rows staged by bulk copies: norm_bwd_staged.cuh */
    if (vec && nbs_geometry<DT, false>(ctx->device.index, sms, rows, C, &sp)) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, nbs_workspace<false>(sp, rows, C, dgamma != NULL)));
        CML_CUDA_TRY(FN, (nbs_launch<DT, false>(sp, st, ws, dgamma != NULL, dx, dy, x, gamma, nullptr, rstd, rows, C)));
        CML_TRY(launched("nbs_kernel", DT, rows * C, (unsigned)sp.groups * (unsigned)sp.splits, NBS_THREADS));
        return dgamma ? partial_sum_launch<DT>(ctx, dgamma, (float *)((char *)ws + nbs_part_off(sp, rows)), sp.groups,
                                               C)
                      : CML_OK;
    }
    int G = 0, R = 0, nb = 0;
    if (vec && nbl_mode() != 2 && nbr_geometry<DT, false>(rows, C, sms, &G, &R, &nb)) { /* norm_bwd_rows.cuh */
        void *part = NULL;
        if (dgamma) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)nb * (size_t)C * sizeof(float)));
        cml__launch(nbr_pick<DT, false>(G), nb, dim3(G, R), 0, st, dx, (float *)part, dy, x, gamma, nullptr, rstd, rows,
                    (int)C);
        CML_TRY(launched("nbr_kernel", DT, rows * C, (unsigned)nb, (unsigned)(G * R)));
        return dgamma ? partial_sum_launch<DT>(ctx, dgamma, (float *)part, nb, C) : CML_OK;
    }
    nbw_plan wp;
    if (vec && nbl_mode() != 2 && nbw_geometry<DT, false>(rows, C, sms, &wp)) { /* norm_bwd_wide.cuh */
        void *part = NULL;
        if (dgamma) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)wp.nb * (size_t)C * sizeof(float)));
        CML_CUDA_TRY(FN, (nbw_launch<DT, false>(wp, st, dx, (float *)part, dy, x, gamma, nullptr, rstd, rows, C)));
        CML_TRY(launched("nbw_kernel", DT, rows * C, (unsigned)wp.nb, (unsigned)(wp.G * wp.R)));
        return dgamma ? partial_sum_launch<DT>(ctx, dgamma, (float *)part, wp.nb, C) : CML_OK;
    }
    nbx_plan xp;
    if (vec && nbl_mode() != 0 && (C > 1024ll * E_ROW || nbl_mode() == 2) &&
        nbx_geometry<DT, false>(ctx->device.index, rows, C, &xp)) { /* one cluster a row: norm_bwd_cluster.cuh */
        void *part = NULL;
        if (dgamma) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)xp.groups * (size_t)C * sizeof(float)));
        CML_CUDA_TRY(FN, (nbx_launch<DT, false>(xp, st, dx, (float *)part, dy, x, gamma, nullptr, rstd, rows, C)));
        CML_TRY(launched("nbx_kernel", DT, rows * C, (unsigned)xp.groups * (unsigned)xp.splits, NBX_THREADS));
        return dgamma ? partial_sum_launch<DT>(ctx, dgamma, (float *)part, xp.groups, C) : CML_OK;
    }
    nbc_plan cp;
    if (vec && nbl_mode() != 0 && (C > 1024ll * E_ROW || nbl_mode() == 2) &&
        nbc_geometry<DT, false>(ctx->device.index, rows, C, &cp)) { /* rows of 3..16 half chunks: norm_bwd_cluster.cuh */
        void *part = NULL;
        if (dgamma) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)cp.groups * (size_t)C * sizeof(float)));
        CML_CUDA_TRY(FN, (nbc_launch<DT, false>(cp, st, dx, (float *)part, dy, x, gamma, nullptr, rstd, rows, C)));
        CML_TRY(launched("nbc_kernel", DT, rows * C, (unsigned)cp.groups * (unsigned)cp.splits, NBL_THREADS));
        return dgamma ? partial_sum_launch<DT>(ctx, dgamma, (float *)part, cp.groups, C) : CML_OK;
    }
    nbl_plan fp;
    if (vec && nbl_mode() != 0 && (C > 1024ll * E_ROW || nbl_mode() == 2 || nbl_short<DT>(C)) &&
        nbl_geometry<DT, false>(rows, C, sms, &fp)) { /* one kernel: norm_bwd_long.cuh */
        const size_t part_off = nbl_part_off(rows, fp.splits);
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, part_off + (dgamma ? (size_t)fp.groups * (size_t)C * sizeof(float) : 0)));
        float *part = (float *)((char *)ws + part_off);
        if (fp.splits > 1) /* rows of one chunk take no ticket and wait for no block: no reset */
            CML_CUDA_TRY(FN, cml__row_sync_reset(ws, rows, fp.splits, st));
        nbl_launch<DT, false>(fp, st, dx, dgamma ? part : NULL, dy, x, gamma, nullptr, rstd, ws, rows, C);
        CML_TRY(launched("nbl_kernel", DT, rows * C, (unsigned)fp.groups * (unsigned)fp.splits, NBL_THREADS));
        return dgamma ? partial_sum_launch<DT>(ctx, dgamma, part, fp.groups, C) : CML_OK;
    }
    if (C <= (long long)(vec ? 1024 : 512) * E_ROW)
        return rows_launch<DT>(ctx, dx, dgamma, dy, x, gamma, rstd, rows, C, vec, sms);
    /* long rows that the fused kernel does not take (unaligned): dx through chunks, L2-batched */
    const int splits = (int)((C + CHUNK - 1) / CHUNK);
    long long nbr = cml__cuda_l2_bytes(ctx->device.index) / 2 / (2 * C * (long long)sizeof(T));
    if (nbr < 1) nbr = 1;
    if (nbr > rows) nbr = rows;
    /* dgamma: 32-column tiles x row ranges, enough blocks to fill the GPU */
    const long long tiles = (C + 31) / 32;
    long long rsplits = dgamma ? ((long long)sms * 8 + tiles - 1) / tiles : 0;
    if (rsplits > rows / 8) rsplits = rows / 8;
    if (rsplits < 1) rsplits = 1;
    if (rsplits > 65535) rsplits = 65535;
    const long long rchunk = (rows + rsplits - 1) / rsplits;
    rsplits = (rows + rchunk - 1) / rchunk;
    const size_t stat_bytes = (size_t)(nbr * splits) * sizeof(float);
    const size_t part_off = (stat_bytes + 255) / 256 * 256;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, part_off + (dgamma ? (size_t)rsplits * (size_t)C * sizeof(float) : 0)));
    float *part = (float *)((char *)ws + part_off);
    if (dgamma) { /* first: dx may alias dy, so dy is read for dgamma before dx is written */
        cml__launch(rms_bwd_cols_kernel<DT>, dim3((unsigned)tiles, (unsigned)rsplits), dim3(32, 8), 0, st, part, dy, x,
                    rstd, rows, C, rchunk);
        CML_TRY(launched("rms_bwd_cols_kernel", DT, rows * C, (unsigned)(tiles * rsplits), 256));
    }
    for (long long r0 = 0; r0 < rows; r0 += nbr) {
        const unsigned grid = (unsigned)((rows - r0 < nbr ? rows - r0 : nbr) * splits);
        cml__launch(rms_bwd_stats_kernel<DT>, grid, THREADS, 0, st, (float *)ws, dy, x, gamma, rstd, r0, C, splits);
        CML_TRY(launched("rms_bwd_stats_kernel", DT, rows * C, grid, THREADS));
        cml__launch(rms_bwd_apply_kernel<DT>, grid, THREADS, 0, st, dx, dy, x, gamma, rstd, (const float *)ws, r0, C,
                    splits);
        CML_TRY(launched("rms_bwd_apply_kernel", DT, rows * C, grid, THREADS));
    }
    return dgamma ? partial_sum_launch<DT>(ctx, dgamma, part, (int)rsplits, C) : CML_OK;
}

/* ---- entry point (arguments validated by src/kernels/rmsnorm.c) ---------------------------------------- */

extern "C" cml_status cml__rmsnorm_bwd_cuda(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x,
                                            const void *gamma, const float *rstd, int64_t rows, int64_t C,
                                            cml_dtype dtype) {
    CML_TRY(cml__cuda_check_float_dtype(FN, "dtype", dtype));
    CML_TRY(cml__cuda_activate(ctx));
    if (rows == 0) { /* dgamma is overwritten: a sum over no rows */
        if (dgamma) CML_CUDA_TRY(FN, cudaMemsetAsync(dgamma, 0, (size_t)C * cml_dtype_size(dtype), cml__stream(ctx)));
        return CML_OK;
    }
    switch (dtype) {
    case CML_F16: return bwd_launch<CML_F16>(ctx, dx, dgamma, dy, x, gamma, rstd, rows, C);
    case CML_BF16: return bwd_launch<CML_BF16>(ctx, dx, dgamma, dy, x, gamma, rstd, rows, C);
    default: return bwd_launch<CML_F32>(ctx, dx, dgamma, dy, x, gamma, rstd, rows, C);
    }
}
