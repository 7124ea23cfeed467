/* CUDA LayerNorm backward over contiguous (rows, C); f32/f16/bf16 storage, f32 math.
 * With xhat = (x - mean) rstd and g = dy gamma (as on the CPU):
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)),
 *   dgamma[c] = sum_r dy[r,c] xhat[r,c],  dbeta[c] = sum_r dy[r,c].
 *
 * 16-byte aligned rows of up to 1024 f32 / 2048 bf16 elements: row groups that
 * each walk their own rows with the next row in flight (norm_bwd_rows.cuh).
 * Other rows of up to 8192 elements (4096 unaligned): blocks of 1024 threads (512
 * unaligned) hold R rows at a time in registers (8 elements per thread), each
 * block walking rows blockIdx.x, blockIdx.x + gridDim.x, ... (the grid is what
 * fits on the GPU at once). A thread owns the same columns in every row, so it
 * accumulates its dgamma/dbeta terms in registers over the block's rows; at the
 * end the block's R groups are merged in order through shared memory into one
 * partial row per block, and a second kernel sums the partial rows of all
 * blocks in block order, per column. x and dy are read once, dx written once;
 * the partials add 8 bytes per column per block.
 * Longer 16-byte aligned rows: one kernel reads x and dy once and writes dx
 * once, dgamma/dbeta included (norm_bwd_long.cuh: chunks of 4096 columns per
 * block, groups of blocks walking rows in lock step, per-thread dgamma/dbeta
 * accumulators written as one partial row per group, which the same second
 * kernel sums in order; rows of 3..16 half chunks as thread-block clusters whose
 * chunks exchange their row sums through distributed shared memory instead of
 * waiting on each other through L2: norm_bwd_cluster.cuh; rows of more than 32 half
 * chunks and up to 16 x 16384 columns, 16-bit storage, as ONE cluster of 512-thread CTAs a row,
 * nbx_kernel there, unless CML_NORM_BWD_LONGCLUSTER=0). Before all of these,
 * rows longer than one chunk (16384 16-bit / 8192 f32 columns) staged in shared
 * memory by bulk copies where norm_bwd_staged.cuh plans them: 16-bit rows of
 * 2..16 chunks as clusters, rows of more than 16 chunks (f32 too) with their
 * row sums through L2. Longer unaligned
 * rows: dx in two passes over chunks
 * (L2-batched); dgamma/dbeta through a column kernel (32 columns x 8 row
 * phases per block, rows split into ranges whose partial rows the second
 * kernel sums in order), which reads x and dy once more. Deterministic
 * throughout. */
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

/* part (f32, (gridDim.x, 2, C)): the block's dgamma terms then its dbeta terms; NULL when neither is wanted.
 * GT: G as a compile-time constant (32 .. 1024, aligned rows; 0: G = blockDim.x), so that the
 * row reductions are unrolled with constant masks and widths. */
template <int DT, bool VEC, int GT>
static __global__ void __launch_bounds__(VEC ? 1024 : 512)
    ln_bwd_rows_kernel(void *dx, float *part, const void *dy, const void *x, const void *gamma, const float *mean,
                       const float *rstd, long long rows, int C) {
    cml__pdl_wait(); /* PDL: first (the trigger stays after the loads, below) */
    typedef typename cml__elem<DT>::type T;
    __shared__ float2 red[2][32];
    __shared__ float combine[COMBINE_FLOATS];
    const int G = GT > 0 ? GT : (int)blockDim.x, R = blockDim.y, t = threadIdx.x;
    const nb_div div(C);
    float dg[E_ROW], db[E_ROW];
#pragma unroll
    for (int e = 0; e < E_ROW; e++) dg[e] = db[e] = 0.0f;
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
        const float m = valid ? mean[row] : 0.0f, r = valid ? rstd[row] : 0.0f;
        float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const float xh = (xv[e] - m) * r, g = gv[e] * gm[e];
            s.x += g;
            s.y += g * xh;
        }
        s = cml__group_allreduce_sum2(s, G, red[parity]);
        parity ^= 1;
        const float mg = div(s.x), mgx = div(s.y);
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const float xh = (xv[e] - m) * r, g = gv[e] * gm[e];
            dg[e] += gv[e] * xh;
            db[e] += gv[e];
            xv[e] = r * (g - mg - xh * mgx);
        }
        if (valid) cml__row_store<DT, VEC, E_ROW, true>((T *)dx + off, xv, C, t, G);
    }
    cml__pdl_launch_dependents(); /* the partial-sum kernel may be scheduled: it waits for this grid to end */
    if (!part) return;      /* uniform across the grid */
    /* Merge the R groups' terms in group order (dgamma, then dbeta through the same buffer). */
    float *out = part + (size_t)blockIdx.x * 2 * C;
    for (int k = 0; k < 2; k++) {
        if (R == 1) {
#pragma unroll
            for (int e = 0; e < E_ROW; e++) {
                const int c = cml__row_col<DT, VEC>(e, t, G);
                if (c < C) out[(size_t)k * C + c] = k == 0 ? dg[e] : db[e];
            }
            continue;
        }
        __syncthreads(); /* the previous round's reads are done */
#pragma unroll
        for (int e = 0; e < E_ROW; e++) {
            const int c = cml__row_col<DT, VEC>(e, t, G);
            if (c < C) combine[threadIdx.y * C + c] = k == 0 ? dg[e] : db[e];
        }
        __syncthreads();
        for (int c = threadIdx.y * G + t; c < C; c += G * R) {
            float a = combine[c];
            for (int q = 1; q < R; q++) a += combine[q * C + c];
            out[(size_t)k * C + c] = a;
        }
    }
}

/* The register-row kernel for groups of G threads: G a compile-time constant for aligned rows
 * from a warp up (the reductions unrolled), else read from blockDim. */
template <int DT> static inline decltype(&ln_bwd_rows_kernel<DT, true, 0>) rows_pick(bool vec, int G) {
    if (!vec) return ln_bwd_rows_kernel<DT, false, 0>;
    switch (G) {
    case 32: return ln_bwd_rows_kernel<DT, true, 32>;
    case 64: return ln_bwd_rows_kernel<DT, true, 64>;
    case 128: return ln_bwd_rows_kernel<DT, true, 128>;
    case 256: return ln_bwd_rows_kernel<DT, true, 256>;
    case 512: return ln_bwd_rows_kernel<DT, true, 512>;
    case 1024: return ln_bwd_rows_kernel<DT, true, 1024>;
    default: return ln_bwd_rows_kernel<DT, true, 0>;
    }
}

/* ---- long rows ---------------------------------------------------------------------------------------- */

/* Long unaligned rows, pass 1: partial[b] = (sum g, sum g xhat) over block b's chunk of row row0 + b / splits. */
template <int DT>
static __global__ void __launch_bounds__(THREADS)
    ln_bwd_stats_kernel(float2 *partial, const void *dy, const void *x, const void *gamma, const float *mean,
                        const float *rstd, long long row0, long long C, int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float2 scratch[32];
    const long long b = blockIdx.x, row = row0 + b / splits;
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    const float m = mean[row], r = rstd[row];
    float2 s = make_float2(0.0f, 0.0f);
    /* gamma as a third 16-byte stream (dy again, from L1, when there is none) */
    const T *dyr = (const T *)dy + row * C;
    const bool has_g = gamma != nullptr;
    cml__stream<DT, 3, false, UNROLL>(
        nullptr, dyr, (const T *)x + row * C, lo, hi, threadIdx.x, THREADS,
        [&](const float *v, long long) {
            const float g = v[0] * (has_g ? v[2] : 1.0f);
            s.x += g;
            s.y += g * ((v[1] - m) * r);
            return 0.0f;
        },
        has_g ? gamma : (const void *)dyr);
    s = cml__group_allreduce_sum2(s, THREADS, scratch);
    if (threadIdx.x == 0) partial[b] = s;
}

template <int DT>
static __global__ void __launch_bounds__(THREADS)
    ln_bwd_apply_kernel(void *dx, const void *dy, const void *x, const void *gamma, const float *mean,
                        const float *rstd, const float2 *partial, long long row0, long long C, int splits) {
    cml__pdl_entry();
    typedef typename cml__elem<DT>::type T;
    __shared__ float stat[2];
    const long long b = blockIdx.x, row = row0 + b / splits;
    if (threadIdx.x == 0) {
        const float2 *p = partial + (b / splits) * splits;
        float2 s = p[0];
        for (int k = 1; k < splits; k++) s.x += p[k].x, s.y += p[k].y;
        stat[0] = s.x / (float)C;
        stat[1] = s.y / (float)C;
    }
    __syncthreads();
    const float mg = stat[0], mgx = stat[1], m = mean[row], r = rstd[row];
    const long long lo = (b % splits) * (long long)CHUNK, hi = lo + CHUNK < C ? lo + CHUNK : C;
    const T *dyr = (const T *)dy + row * C;
    const bool has_g = gamma != nullptr;
    cml__stream<DT, 3, true, UNROLL>(
        (T *)dx + row * C, dyr, (const T *)x + row * C, lo, hi, threadIdx.x, THREADS,
        [&](const float *v, long long) {
            const float g = v[0] * (has_g ? v[2] : 1.0f);
            return r * (g - mg - ((v[1] - m) * r) * mgx);
        },
        has_g ? gamma : (const void *)dyr);
}

/* dgamma/dbeta terms of columns [tile * 32, +32) over rows [lo, hi) of split blockIdx.y,
 * the 8 row phases merged in order, into part[(blockIdx.y, 2, C)]. */
template <int DT>
static __global__ void __launch_bounds__(256)
    ln_bwd_cols_kernel(float *part, const void *dy, const void *x, const float *mean, const float *rstd,
                       long long rows, long long C, long long rchunk) {
    cml__pdl_entry();
    __shared__ float sm[2][8][32];
    const long long c = (long long)blockIdx.x * 32 + threadIdx.x;
    const long long lo = (long long)blockIdx.y * rchunk, hi = lo + rchunk < rows ? lo + rchunk : rows;
    float a = 0.0f, b = 0.0f;
    if (c < C)
        for (long long j = lo + threadIdx.y; j < hi; j += 8) {
            const float g = cml__ld<DT>(dy, j * C + c);
            a += g * ((cml__ld<DT>(x, j * C + c) - mean[j]) * rstd[j]);
            b += g;
        }
    sm[0][threadIdx.y][threadIdx.x] = a;
    sm[1][threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int k = 1; k < 8; k++) a += sm[0][k][threadIdx.x], b += sm[1][k][threadIdx.x];
        part[((size_t)blockIdx.y * 2) * C + c] = a;
        part[((size_t)blockIdx.y * 2 + 1) * C + c] = b;
    }
}

/* ---- launch -------------------------------------------------------------------------------------------- */

static const char FN[] = "cml_layernorm_bwd";

/* For tests (cuda_kernels.h): the cluster kernel's launches, LayerNorm and RMSNorm together. */
extern "C" unsigned long long cml__norm_bwd_cluster_launches(void) {
    return __atomic_load_n(&nbc_launch_count(), __ATOMIC_RELAXED);
}

/* For tests (cuda_kernels.h): CML_NORM_BWD_DEFER set in-process (1 / 0; -1: back to the
 * environment's), and the deferred nbl_kernel launches so far, LayerNorm and RMSNorm together. */
extern "C" void cml__norm_bwd_defer_force(int mode) {
    nbl_defer_forced() = mode;
}

extern "C" unsigned long long cml__norm_bwd_defer_launches(void) {
    return __atomic_load_n(&nbl_defer_launch_count(), __ATOMIC_RELAXED);
}

/* For tests (cuda_kernels.h): the one-cluster-a-row kernel (nbx_kernel, norm_bwd_cluster.cuh) forced
 * (-1: CML_NORM_BWD_LONGCLUSTER's setting; 0 never, 1 the default rows, 2 wherever it fits), its launches
 * (LayerNorm and RMSNorm together) and the clusters of its last launch. */
extern "C" void cml__norm_bwd_longcluster_force(int mode) {
    nbx_forced() = mode;
}

extern "C" unsigned long long cml__norm_bwd_longcluster_launches(void) {
    return __atomic_load_n(&nbx_launch_count(), __ATOMIC_RELAXED);
}

extern "C" int cml__norm_bwd_longcluster_last_groups(void) {
    return nbx_last_groups();
}

/* For tests (cuda_kernels.h): the staged kernel (nbs_kernel, norm_bwd_staged.cuh) forced (-1: CML_NORM_BWD_STAGED's
 * setting; 0 never, 1 the cluster form only, 2 also the row-sync form for rows of more than 16 chunks, 3 the
 * row-sync form for every long row), its launches and those of its row-sync form (LayerNorm and RMSNorm together). */
extern "C" void cml__norm_bwd_staged_force(int mode) {
    nbs_forced() = mode;
}

extern "C" unsigned long long cml__norm_bwd_staged_launches(void) {
    return __atomic_load_n(&nbs_launch_count(), __ATOMIC_RELAXED);
}

extern "C" unsigned long long cml__norm_bwd_staged_rows_launches(void) {
    return __atomic_load_n(&nbg_launch_count(), __ATOMIC_RELAXED);
}

/* For tests (cuda_kernels.h): the wide-row kernel (nbw_kernel, norm_bwd_wide.cuh) forced (-1:
 * CML_NORM_BWD_WIDE's setting; 0 never, 1 the default rows, 2 every dtype up to 1024 words, 3 the
 * 512-thread form of 4 words a thread wherever it fits), its launches (LayerNorm and RMSNorm together), and
 * a cap on its blocks (0: none; a few blocks make few rows walk several rows a group). */
extern "C" void cml__norm_bwd_wide_force(int mode) {
    nbw_forced() = mode;
}

extern "C" unsigned long long cml__norm_bwd_wide_launches(void) {
    return __atomic_load_n(&nbw_launch_count(), __ATOMIC_RELAXED);
}

extern "C" void cml__norm_bwd_wide_cap_blocks(int blocks) {
    nbw_cap_blocks() = blocks;
}

static cml_status launched(const char *kernel, cml_dtype dt, long long n, unsigned grid, unsigned block) {
    return cml__cuda_check_launch(FN, kernel, cml_dtype_name(dt), n, grid, block);
}

template <int DT>
static cml_status partial_sum_launch(cml_ctx *ctx, void *dgamma, void *dbeta, float *part, int nb, long long C) {
    CML_CUDA_TRY(FN, (nb_partial_sum_launch<DT, 2>(cml__stream(ctx), dgamma, dbeta, part, nb, C)));
    return CML_OK;
}

template <int DT>
static cml_status bwd_launch(cml_ctx *ctx, void *dx, void *dgamma, void *dbeta, const void *dy, const void *x,
                             const void *gamma, const float *mean, const float *rstd, long long rows, long long C) {
    typedef typename cml__elem<DT>::type T;
    cudaStream_t st = cml__stream(ctx);
    const bool want = dgamma || dbeta;
    const int sms = cml__cuda_sm_count(ctx->device.index) > 0 ? cml__cuda_sm_count(ctx->device.index) : 132;
    const bool vec = cml__rows_vec_ok(C, sizeof(T), dx, dy, x) && (!gamma || ((uintptr_t)gamma & 15u) == 0);
    const int threads = vec ? 1024 : 512;
    nbs_plan sp; /* rows staged by bulk copies: norm_bwd_staged.cuh */
    if (vec && nbs_geometry<DT, true>(ctx->device.index, sms, rows, C, &sp)) {
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, nbs_workspace<true>(sp, rows, C, want)));
        CML_CUDA_TRY(FN, (nbs_launch<DT, true>(sp, st, ws, want, dx, dy, x, gamma, mean, rstd, rows, C)));
        CML_TRY(launched("nbs_kernel", (cml_dtype)DT, rows * C, (unsigned)sp.groups * (unsigned)sp.splits,
                         NBS_THREADS));
        return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, (float *)((char *)ws + nbs_part_off(sp, rows)),
                                             sp.groups, C)
                    : CML_OK;
    }
    int G = 0, R = 0, nb = 0;
    if (vec && nbl_mode() != 2 && nbr_geometry<DT, true>(rows, C, sms, &G, &R, &nb)) { /* norm_bwd_rows.cuh */
        void *part = NULL;
        if (want) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)nb * 2 * (size_t)C * sizeof(float)));
        cml__launch(nbr_pick<DT, true>(G), nb, dim3(G, R), 0, st, dx, (float *)part, dy, x, gamma, mean, rstd, rows,
                    (int)C);
        CML_TRY(launched("nbr_kernel", (cml_dtype)DT, rows * C, (unsigned)nb, (unsigned)(G * R)));
        return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, (float *)part, nb, C) : CML_OK;
    }
    nbw_plan wp;
    if (vec && nbl_mode() != 2 && nbw_geometry<DT, true>(rows, C, sms, &wp)) { /* norm_bwd_wide.cuh */
        void *part = NULL;
        if (want) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)wp.nb * 2 * (size_t)C * sizeof(float)));
        CML_CUDA_TRY(FN, (nbw_launch<DT, true>(wp, st, dx, (float *)part, dy, x, gamma, mean, rstd, rows, C)));
        CML_TRY(launched("nbw_kernel", (cml_dtype)DT, rows * C, (unsigned)wp.nb, (unsigned)(wp.G * wp.R)));
        return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, (float *)part, wp.nb, C) : CML_OK;
    }
    nbx_plan xp;
    if (vec && nbl_mode() != 0 && (C > (long long)threads * E_ROW || nbl_mode() == 2) &&
        nbx_geometry<DT, true>(ctx->device.index, rows, C, &xp)) { /* one cluster a row: norm_bwd_cluster.cuh */
        void *part = NULL;
        if (want) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)xp.groups * 2 * (size_t)C * sizeof(float)));
        CML_CUDA_TRY(FN, (nbx_launch<DT, true>(xp, st, dx, (float *)part, dy, x, gamma, mean, rstd, rows, C)));
        CML_TRY(launched("nbx_kernel", (cml_dtype)DT, rows * C, (unsigned)xp.groups * (unsigned)xp.splits,
                         NBX_THREADS));
        return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, (float *)part, xp.groups, C) : CML_OK;
    }
    nbc_plan cp;
    if (vec && nbl_mode() != 0 && (C > (long long)threads * E_ROW || nbl_mode() == 2) &&
        nbc_geometry<DT, true>(ctx->device.index, rows, C, &cp)) { /* rows of 3..16 half chunks: norm_bwd_cluster.cuh */
        void *part = NULL;
        if (want) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)cp.groups * 2 * (size_t)C * sizeof(float)));
        CML_CUDA_TRY(FN, (nbc_launch<DT, true>(cp, st, dx, (float *)part, dy, x, gamma, mean, rstd, rows, C)));
        CML_TRY(launched("nbc_kernel", (cml_dtype)DT, rows * C, (unsigned)cp.groups * (unsigned)cp.splits,
                         NBL_THREADS));
        return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, (float *)part, cp.groups, C) : CML_OK;
    }
    nbl_plan fp;
    if (vec && nbl_mode() != 0 && (C > (long long)threads * E_ROW || nbl_mode() == 2 || nbl_short<DT>(C)) &&
        nbl_geometry<DT, true>(rows, C, sms, &fp)) { /* one kernel: norm_bwd_long.cuh */
        const size_t part_off = nbl_part_off(rows, fp.splits);
        void *ws = NULL;
        CML_TRY(cml_ctx_workspace(ctx, &ws, part_off + (want ? (size_t)fp.groups * 2 * (size_t)C * sizeof(float) : 0)));
        float *part = (float *)((char *)ws + part_off);
        if (fp.splits > 1) /* rows of one chunk take no ticket and wait for no block: no reset */
            CML_CUDA_TRY(FN, cml__row_sync_reset(ws, rows, fp.splits, st));
        nbl_launch<DT, true>(fp, st, dx, want ? part : NULL, dy, x, gamma, mean, rstd, ws, rows, C);
        CML_TRY(launched("nbl_kernel", (cml_dtype)DT, rows * C, (unsigned)fp.groups * (unsigned)fp.splits, NBL_THREADS));
        return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, part, fp.groups, C) : CML_OK;
    }
    if (C <= (long long)threads * E_ROW) {
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
        if (want) CML_TRY(cml_ctx_workspace(ctx, &part, (size_t)nb * 2 * (size_t)C * sizeof(float)));
        cml__launch(rows_pick<DT>(vec, G), nb, dim3(G, R), 0, st, dx, (float *)part, dy, x, gamma, mean, rstd, rows,
                    (int)C);
        CML_TRY(launched("ln_bwd_rows_kernel", (cml_dtype)DT, rows * C, (unsigned)nb, (unsigned)threads));
        return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, (float *)part, nb, C) : CML_OK;
    }
    /* long rows that the fused kernel does not take (unaligned): dx through chunks, L2-batched */
    const int splits = (int)((C + CHUNK - 1) / CHUNK);
    long long nbr = cml__cuda_l2_bytes(ctx->device.index) / 2 / (2 * C * (long long)sizeof(T));
    if (nbr < 1) nbr = 1;
    if (nbr > rows) nbr = rows;
    /* dgamma/dbeta: 32-column tiles x row ranges, enough blocks to fill the GPU */
    const long long tiles = (C + 31) / 32;
    long long rsplits = want ? ((long long)sms * 8 + tiles - 1) / tiles : 0;
    if (rsplits > rows / 8) rsplits = rows / 8;
    if (rsplits < 1) rsplits = 1;
    if (rsplits > 65535) rsplits = 65535;
    const long long rchunk = (rows + rsplits - 1) / rsplits;
    rsplits = (rows + rchunk - 1) / rchunk;
    const size_t stat_bytes = (size_t)(nbr * splits) * sizeof(float2);
    const size_t part_off = (stat_bytes + 255) / 256 * 256;
    void *ws = NULL;
    CML_TRY(cml_ctx_workspace(ctx, &ws, part_off + (want ? (size_t)rsplits * 2 * (size_t)C * sizeof(float) : 0)));
    float *part = (float *)((char *)ws + part_off);
    if (want) { /* first: dx may alias dy, so dy is read for these before dx is written */
        cml__launch(ln_bwd_cols_kernel<DT>, dim3((unsigned)tiles, (unsigned)rsplits), dim3(32, 8), 0, st, part, dy, x,
                    mean, rstd, rows, C, rchunk);
        CML_TRY(launched("ln_bwd_cols_kernel", (cml_dtype)DT, rows * C, (unsigned)(tiles * rsplits), 256));
    }
    for (long long r0 = 0; r0 < rows; r0 += nbr) {
        const unsigned grid = (unsigned)((rows - r0 < nbr ? rows - r0 : nbr) * splits);
        cml__launch(ln_bwd_stats_kernel<DT>, grid, THREADS, 0, st, (float2 *)ws, dy, x, gamma, mean, rstd, r0, C,
                    splits);
        CML_TRY(launched("ln_bwd_stats_kernel", (cml_dtype)DT, rows * C, grid, THREADS));
        cml__launch(ln_bwd_apply_kernel<DT>, grid, THREADS, 0, st, dx, dy, x, gamma, mean, rstd, (const float2 *)ws, r0,
                    C, splits);
        CML_TRY(launched("ln_bwd_apply_kernel", (cml_dtype)DT, rows * C, grid, THREADS));
    }
    return want ? partial_sum_launch<DT>(ctx, dgamma, dbeta, part, (int)rsplits, C) : CML_OK;
}

/* ---- entry point (arguments validated by src/kernels/layernorm.c) ---------------------------------------- */

extern "C" cml_status cml__layernorm_bwd_cuda(cml_ctx *ctx, void *dx, void *dgamma, void *dbeta, const void *dy,
                                              const void *x, const void *gamma, const float *mean, const float *rstd,
                                              int64_t rows, int64_t C, cml_dtype dtype) {
    CML_TRY(cml__cuda_check_float_dtype(FN, "dtype", dtype));
    CML_TRY(cml__cuda_activate(ctx));
    if (rows == 0) { /* dgamma/dbeta are overwritten: sums over no rows */
        const size_t bytes = (size_t)C * cml_dtype_size(dtype);
        if (dgamma) CML_CUDA_TRY(FN, cudaMemsetAsync(dgamma, 0, bytes, cml__stream(ctx)));
        if (dbeta) CML_CUDA_TRY(FN, cudaMemsetAsync(dbeta, 0, bytes, cml__stream(ctx)));
        return CML_OK;
    }
    switch (dtype) {
    case CML_F16: return bwd_launch<CML_F16>(ctx, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, C);
    case CML_BF16: return bwd_launch<CML_BF16>(ctx, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, C);
    default: return bwd_launch<CML_F32>(ctx, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, C);
    }
}
