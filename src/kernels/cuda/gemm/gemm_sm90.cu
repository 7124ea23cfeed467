/* The Hopper GEMM path (sm_90a): which problems it takes, its tile configurations,
 * and the launch of gemm_sm90_kernel (gemm_sm90_kernel.cuh) with TMA maps.
 *
 * Taken: Hopper device; A and B of one dtype: bf16 or f16, f32 with
 * CML_GEMM_MATH_TF32, or fp8 e4m3/e5m2, any ops, leading dimensions and alignment; K >= 1.
 * TMA needs 16-byte aligned operands with leading dimensions (and batch strides) that are
 * multiples of 16 bytes, and wgmma reads tf32 and fp8 only K-major (op_a = N, op_b = T) from shared
 * memory: an operand that breaks either rule is first repacked K-major into the context's workspace by
 * a tiled copy (one more pass over it; the fast case is the aligned one), except one M/N-major tf32
 * operand, which the kernel reads into registers instead (rs_plan: B stored K x N for NN, A stored K x M
 * for TT, the larger of the two for TN). M, N and K need not
 * be multiples of the tile: TMA reads zeros past the edges and the epilogue stores only
 * inside D (with TMA stores when D is 16-bit and aligned, element stores otherwise). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/tma_map.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm/gemm_sm90_kernel.cuh"

static const char fn[] = "cml_gemm";

#define CML_SM90_MAX_SPLITS 16

/* The kernel kind for the input dtype and math, or -1 when the path does not take it. */
static int input_kind(const cml_gemm_desc *d) {
    if (d->a_dtype != d->b_dtype) return -1;
    switch (d->a_dtype) {
    case CML_BF16: return CML_SM90_BF16;
    case CML_F16: return CML_SM90_F16;
    case CML_F32: return d->math == CML_GEMM_MATH_TF32 ? CML_SM90_TF32 : -1;
    case CML_F8E4M3: return CML_SM90_E4M3;
    case CML_F8E5M2: return CML_SM90_E5M2;
    default: return -1;
    }
}

static bool tma_ok(const void *p, int64_t ld, int64_t stride, int64_t batch, size_t es) {
    if ((uintptr_t)p % 16 != 0 || ((size_t)ld * es) % 16 != 0) return false;
    return batch == 1 || stride == 0 || ((size_t)stride * es) % 16 == 0;
}

/* Whether A and B can be read in place by TMA. */
static bool operands_tma_ok(const cml_gemm_desc *d, const void *A, const void *B) {
    size_t es = cml_dtype_size(d->a_dtype);
    return tma_ok(A, d->lda, d->stride_a, d->batch, es) && tma_ok(B, d->ldb, d->stride_b, d->batch, es);
}

extern "C" bool cml__gemm_sm90_takes(const cml_ctx *ctx, const cml_gemm_desc *d, const void *D, const void *A,
                                     const void *B, const void *C) {
    (void)D, (void)C;
    if (cml__cuda_arch(ctx->device.index) != 90) return false;
    int kind = input_kind(d);
    if (kind < 0 || d->K < 1) return false;
    /* tile indices and TMA coordinates are 32-bit */
    const int64_t lim = (int64_t)1 << 30;
    if (d->M >= lim || d->N >= lim || d->K >= lim || d->batch >= lim) return false;
    const size_t es = cml_dtype_size(d->a_dtype); /* element-aligned operands (repacking copies elements) */
    return (uintptr_t)A % es == 0 && (uintptr_t)B % es == 0;
}

/* ---- TMA maps ------------------------------------------------------------------------- */

static CUtensorMapDataType tma_dtype(int kind) {
    switch (kind) {
    case CML_SM90_BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case CML_SM90_F16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case CML_SM90_TF32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32; /* the tensor cores read tf32 from f32 words */
    default: return CU_TENSOR_MAP_DATA_TYPE_UINT8;                 /* fp8: bytes */
    }
}

/* The map of one operand stored rows x cols (row stride ld) per batch. K-major operands
 * load boxes of (one 128-byte row of K) x tile_rows; M/N-major ones boxes of 64 x (K rows). */
/* half (M/N-major only): boxes of 64 bytes in the 64-byte swizzle, the 160-wide tile's B (cml__sm90_b_blocks) */
static cml_status operand_map(CUtensorMap *map, const void *p, int kind, int64_t rows, int64_t cols, int64_t ld,
                              int64_t stride, int64_t batch, bool k_major, uint32_t tile_rows, bool half = false) {
    size_t es = cml_dtype_size(kind == CML_SM90_TF32 ? CML_F32 : (kind >= CML_SM90_E4M3 ? CML_U8 : CML_BF16));
    uint32_t row_elems = (uint32_t)(CML_SM90_ROW_BYTES / es);
    bool fixed = batch == 1 || stride == 0;
    uint64_t dims[3] = {(uint64_t)cols, (uint64_t)rows, fixed ? 1u : (uint64_t)batch};
    uint64_t row_bytes = (uint64_t)ld * es;
    /* an unused batch stride still has to be a valid one */
    uint64_t strides[2] = {row_bytes, fixed ? row_bytes * (uint64_t)rows : (uint64_t)stride * es};
    uint32_t box[3] = {row_elems, k_major ? tile_rows : row_elems, 1};
    if (!k_major) box[0] = half ? row_elems / 2 : row_elems; /* 128 bytes of M or N: 64 16-bit or 32 tf32 elements */
    return cml__tma_map(map, p, tma_dtype(kind), 3, dims, strides, box,
                        half ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B, fn);
}

/* Whether D can take the register epilogue with TMA stores (cml__sm90_tma_epilogue): 16-bit
 * D meeting TMA's alignment rules, and an epilogue of alpha, per-tensor scales, bias and
 * ReLU/GELU only (beta * C, aux and per-row/column scales take the general epilogue). */
static bool tma_store_ok(const cml_gemm_desc *d, const void *D) {
    /* f32 D: tf32 launches only (session 13: forward 8192 x 2304 x 768 1.18x; dev/gemm_sm90/README.md) */
    const bool f32 = d->d_dtype == CML_F32 && input_kind(d) == CML_SM90_TF32;
    if (d->d_dtype != CML_BF16 && d->d_dtype != CML_F16 && !f32) return false;
    if (d->beta != 0.0f || d->a_scale_mode == CML_SCALE_VECTOR || d->b_scale_mode == CML_SCALE_VECTOR) return false;
    if (d->epilogue != CML_EPILOGUE_NONE && d->epilogue != CML_EPILOGUE_RELU && d->epilogue != CML_EPILOGUE_GELU_TANH)
        return false;
    /* TMA stores whole 16-byte chunks: a row of D that does not end on one would have the bytes after it, up to
     * the next 16-byte boundary, overwritten (the padding of ldd > N, or another tensor's data when D is a view;
     * measured on the H100 in session 13, test_tf32_tma_store). Such rows take the general epilogue. */
    if (d->N * (f32 ? 4 : 2) % 16 != 0) return false;
    return tma_ok(D, d->ldd, d->stride_d, d->batch, f32 ? 4 : 2);
}

/* The map TMA stores D through: boxes of box_rows (64; 32 for the tf32 RS launch) rows x 128 bytes (64 16-bit
 * or 32 f32 elements; M x N per batch, row stride ldd); half: 64 bytes in the 64-byte swizzle (32 16-bit elements: the
 * 160-wide tile's blocks, cml__sm90_tma_epilogue's OC = 32). */
static cml_status output_map(CUtensorMap *map, const cml_gemm_desc *d, void *D, uint32_t box_rows, bool half = false) {
    const bool f32 = d->d_dtype == CML_F32;
    const uint64_t es = f32 ? 4 : 2;
    bool fixed = d->batch == 1 || d->stride_d == 0;
    uint64_t dims[3] = {(uint64_t)d->N, (uint64_t)d->M, fixed ? 1u : (uint64_t)d->batch};
    uint64_t row_bytes = (uint64_t)d->ldd * es;
    uint64_t strides[2] = {row_bytes, fixed ? row_bytes * (uint64_t)d->M : (uint64_t)d->stride_d * es};
    uint32_t box[3] = {f32 || half ? 32u : (uint32_t)CML_SM90_OUT_COLS, box_rows, 1};
    return cml__tma_map(map, D,
                        f32                        ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                        : d->d_dtype == CML_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                        3, dims, strides, box, half ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B, fn);
}

/* A K split's workspace: per 64-row half tile, `splits` f32 partials of 64 x bn
 * (cml__sm90_problem.partials); its arrival counters (.arrivals, one a half tile) are the
 * context's zeroed words (cml__cuda_zeroed), which the kernel leaves 0. */
static size_t splitk_halves(const cml_gemm_desc *d, const cml__gemm_sm90_config *c) {
    return (size_t)d->batch * (size_t)((d->M + c->rows - 1) / c->rows) * (size_t)((d->N + c->bn - 1) / c->bn) *
           (size_t)(c->rows / 64);
}
static size_t splitk_bytes(const cml_gemm_desc *d, const cml__gemm_sm90_config *c) {
    return c->splits > 1 ? splitk_halves(d, c) * (size_t)c->splits * 64 * (size_t)c->bn * sizeof(float) : 0;
}

/* The tf32 NN problem as the RS kernel runs it (D^T = B^T A^T): M and N swapped, the operands' batch strides
 * swapped with them (sizes of tiles and split-K halves only; the maps are built from d). */
static cml_gemm_desc rs_swapped(const cml_gemm_desc *d) {
    cml_gemm_desc s = *d;
    s.M = d->N, s.N = d->M;
    s.stride_a = d->stride_b, s.stride_b = d->stride_a;
    return s;
}

/* ---- launch ----------------------------------------------------------------------------- */

/* Raises the kernel's dynamic shared-memory limit, once per device. */
template <int BN, int STAGES, int KIND, int TRANS_A, int TRANS_B, int CLUSTER, int PP = 0, int CN = 1,
          bool GROUPED = false>
static cml_status allow_smem(int dev) {
    static bool done[CML__MAX_CUDA_DEVICES];
    if (done[dev]) return CML_OK;
    CML_CUDA_TRY(fn, cudaFuncSetAttribute(gemm_sm90_kernel<BN, STAGES, KIND, TRANS_A, TRANS_B, CLUSTER, PP, CN, GROUPED>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)cml__sm90_smem<BN, STAGES, PP == 1 ? 64 : CML_SM90_BM,
                                                              cml__sm90_b_blocks<BN, TRANS_B, CN>::stage_bytes>::total +
                                              (GROUPED ? CML_SM90_SLOT_BYTES(STAGES) : 0)));
    done[dev] = true;
    return CML_OK;
}

/* The persistent grid: the fewest clusters (of at most `most`) that walk the launch's `work` cluster tiles in as
 * many rounds as `most` clusters would. Tiles of one (not grouped) launch cost the same, so the time is the rounds
 * either way, but with no partial last round each round covers whole runs of the tile order: 64 x 1024^3 batched on
 * 64 clusters of 2 (not 66) runs 4 whole problems a round instead of splitting one problem's tiles over two rounds,
 * which read its A and B from DRAM twice (24 MB of 256, session 29). CML_SM90_GRID (read once, for A/B runs):
 * "full" = min(work, most), as before session 29. */
static long long balanced_grid(long long work, long long most) {
    static int full = -1;
    if (full < 0) {
        const char *e = getenv("CML_SM90_GRID");
        full = e && strcmp(e, "full") == 0;
    }
    if (work <= most) return work;
    if (full) return most;
    const long long rounds = (work + most - 1) / most;
    return (work + rounds - 1) / rounds;
}

/* For tests: the grid and cluster shape of the last non-grouped launch (cml__gemm_sm90_last_launch). */
static struct {
    int grid, cluster, cluster_n;
} last_launch;
extern "C" void cml__gemm_sm90_last_launch(int *grid, int *cluster, int *cluster_n) {
    *grid = last_launch.grid, *cluster = last_launch.cluster, *cluster_n = last_launch.cluster_n;
}

/* A launch of `clusters` clusters of `cluster` CTAs on ctx's stream (attr holds the cluster shape). */
static cudaLaunchConfig_t cluster_launch(cml_ctx *ctx, cudaLaunchAttribute *attr, long long clusters, int cluster,
                                         size_t smem) {
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3((unsigned)(clusters * cluster));
    cfg.blockDim = dim3(CML_SM90_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = cml__stream(ctx);
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)cluster;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

#if CML_SM90_DEV_TIMELINE
/* Dev builds only: after each launch, the kernel's timeline (gemm_sm90_kernel.cuh, cml__sm90_tl) into
 * $CML_SM90_TL_DIR/tl_MxNxK_<ops>.txt (overwritten: the file holds the shape's last launch), then the
 * buffer cleared. The synchronization makes every call slow: time nothing with this build. With
 * CML_SM90_TL_EVERY=N only every N-th launch of the process is synchronized and written, so that the
 * launches between run back to back (the clock under sustained load; every launch rewrites the buffer). */
static void tl_dump(cml_ctx *ctx, const cml_gemm_desc *d, int bn, int stages, int cluster, int splits, int grid) {
    const char *dir = getenv("CML_SM90_TL_DIR");
    if (!dir) return;
    static unsigned long long launches;
    const char *every = getenv("CML_SM90_TL_EVERY");
    if (every && atoi(every) > 1 && ++launches % (unsigned long long)atoi(every) != 0) return;
    static unsigned long long h[CML_SM90_TL_CTAS * CML_SM90_TL_SLOTS * CML_SM90_TL_EV];
    cudaStreamSynchronize((cudaStream_t)cml_ctx_stream(ctx));
    if (cudaMemcpyFromSymbol(h, cml__sm90_tl, sizeof h) != cudaSuccess) return;
    char path[512];
    static unsigned long long seq; /* CML_SM90_TL_SEQ set: every launch its own file, numbered */
    char suffix[32] = "";
    if (getenv("CML_SM90_TL_SEQ")) snprintf(suffix, sizeof suffix, "_%04llu", seq++);
    snprintf(path, sizeof path, "%s/tl_%lldx%lldx%lld_%c%c%s.txt", dir, (long long)d->M, (long long)d->N,
             (long long)d->K, d->op_a == CML_OP_T ? 'T' : 'N', d->op_b == CML_OP_T ? 'T' : 'N', suffix);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "shape %lld %lld %lld bn %d stages %d cluster %d splits %d grid %d\n", (long long)d->M,
                (long long)d->N, (long long)d->K, bn, stages, cluster, splits, grid);
        for (int c = 0; c < grid && c < CML_SM90_TL_CTAS; c++)
            for (int sl = 0; sl < CML_SM90_TL_SLOTS; sl++) {
                const unsigned long long *e = h + ((size_t)c * CML_SM90_TL_SLOTS + sl) * CML_SM90_TL_EV;
                fprintf(f, "%d %d", c, sl == CML_SM90_TL_SLOTS - 1 ? -1 : sl);
                for (int k = 0; k < CML_SM90_TL_EV; k++) fprintf(f, " %llu", e[k]);
                fputc('\n', f);
            }
        fclose(f);
    }
    memset(h, 0, sizeof h);
    cudaMemcpyToSymbol(cml__sm90_tl, h, sizeof h);
}
#endif

/* PP = 1: 64-row tiles, the two consumers on alternate tiles (their epilogues overlap the other's
 * main loop; twice the tiles for shapes that cannot fill the GPU with 128-row ones). */
template <int BN, int STAGES, int KIND, int TRANS_A, int TRANS_B, int CLUSTER, int PP, int CN = 1>
static cml_status sm90_launch(cml_ctx *ctx, const cml_gemm_desc *d, void *D, const void *A, const void *B,
                              const void *C, const cml__gemm_sm90_config *pc, float *ws) {
    const int dev = ctx->device.index, splits = pc->splits, BM = PP == 1 ? 64 : CML_SM90_BM;
    typedef cml__sm90_smem<BN, STAGES, PP == 1 ? 64 : CML_SM90_BM, cml__sm90_b_blocks<BN, TRANS_B, CN>::stage_bytes>
        smem_t;
    CML_TRY((allow_smem<BN, STAGES, KIND, TRANS_A, TRANS_B, CLUSTER, PP, CN>(dev)));
    /* stored shapes: A is M x K (op N) or K x M (op T); B is N x K (op T) or K x N (op N).
     * With a cluster, each CTA loads 1/CLUSTER of a K-major B tile's rows.
     * RS (tf32 with TRANS_A, rs_plan): the kernel's A from registers (gemm_sm90_kernel.cuh, cml__sm90_rs_chunk).
     * d NN (A as stored or repacked): it runs D^T = B^T A^T, its A is B as stored (K x N, N-major), its B is A
     * (M x K, K-major), its tile rows are D's columns; tiles, clusters and the split-K halves follow the swapped
     * shape. TRANS_A 2 (d TT, B as stored or repacked): D itself, A stored K x M in registers, B K-major (the
     * TRANS_A maps). */
    constexpr bool RS = KIND == CML_SM90_TF32 && TRANS_A;
    const bool swap = RS && TRANS_A == 1; /* 2: RS_DIRECT (gemm_sm90_kernel.cuh) */
    const cml_gemm_desc sw = swap ? rs_swapped(d) : *d;
    CUtensorMap map_a, map_b;
    if (swap) {
        CML_TRY(operand_map(&map_a, B, KIND, d->K, d->N, d->ldb, d->stride_b, d->batch, false, 0));
        CML_TRY(operand_map(&map_b, A, KIND, d->M, d->K, d->lda, d->stride_a, d->batch, true, BN / CLUSTER));
    } else {
        if (TRANS_A) CML_TRY(operand_map(&map_a, A, KIND, d->K, d->M, d->lda, d->stride_a, d->batch, false, 0));
        else CML_TRY(operand_map(&map_a, A, KIND, d->M, d->K, d->lda, d->stride_a, d->batch, true, BM));
        if (TRANS_B)
            CML_TRY(operand_map(&map_b, B, KIND, d->K, d->N, d->ldb, d->stride_b, d->batch, false, 0,
                                cml__sm90_b_blocks<BN, TRANS_B, CN>::cols == 32));
        else CML_TRY(operand_map(&map_b, B, KIND, d->N, d->K, d->ldb, d->stride_b, d->batch, true, BN / CLUSTER));
    }

    cml__sm90_problem p;
    const int row_elems = CML_SM90_ROW_BYTES / cml__sm90_kind<KIND>::bytes;
    p.tiles_m = (int)((sw.M + BM - 1) / BM);
    p.cluster_rows = (p.tiles_m + CLUSTER / CN - 1) / (CLUSTER / CN);
    p.tiles_n = (int)((sw.N + BN - 1) / BN);
    p.batch = (int)d->batch;
    p.k_blocks = (int)((d->K + row_elems - 1) / row_elems);
    p.group_m = pc->group_m;
    p.a_batch_fixed = sw.batch == 1 || sw.stride_a == 0;
    p.b_batch_fixed = sw.batch == 1 || sw.stride_b == 0;
    p.groups = NULL;
    p.n_groups = 0;
    p.splits = splits;
    p.split_kb = (p.k_blocks + splits - 1) / splits;
    p.partials = NULL;
    p.arrivals = NULL;
    const int cluster_cols = (p.tiles_n + CN - 1) / CN, last_m = p.cluster_rows % p.group_m;
    p.div_batch = cml__fast_div_make(p.cluster_rows * cluster_cols);
    p.div_group = cml__fast_div_make(p.group_m * cluster_cols);
    p.div_group_m = cml__fast_div_make(p.group_m);
    p.div_last_m = cml__fast_div_make(last_m ? last_m : p.group_m);
    p.div_splits = cml__fast_div_make(splits);
    if (splits > 1) { /* partials in ws (splitk_bytes), counters that are 0 and that the kernel leaves 0 */
        p.partials = ws;
        void *counters = NULL;
        CML_TRY(cml__cuda_zeroed(ctx, splitk_halves(&sw, pc) * sizeof(int), fn, &counters));
        p.arrivals = (int *)counters;
    }
    const cml__gemm_epi epi = cml__gemm_epi_make(d, D, C);
    /* not when D's batches are one matrix (stride_d = 0 would make them race) */
    CUtensorMap map_d;
    memset(&map_d, 0, sizeof map_d);
    p.tma_store = tma_store_ok(d, D) && (d->batch == 1 || d->stride_d != 0);
    if (RS && !p.tma_store) /* rs_plan holds when RS is launched: its only epilogue is the TMA store */
        return cml__error(CML_ERR_INTERNAL, "%s: the tf32 RS launch needs TMA stores of D", fn);
    if (p.tma_store) CML_TRY(output_map(&map_d, d, D, swap ? 32u : 64u, BN == 160));
    long long work = (long long)p.cluster_rows * ((p.tiles_n + CN - 1) / CN) * p.batch * splits; /* cluster tiles */
    int sms = cml__cuda_sm_count(dev);
    long long clusters = balanced_grid(work, sms / CLUSTER);

    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = cluster_launch(ctx, &attr, clusters, CLUSTER, smem_t::total);
    if (CLUSTER > 2) { /* fewer clusters of 4 than sms / 4 fit at once (an H100: 30, whole GPCs): the grid those make */
        static int resident[CML__MAX_CUDA_DEVICES];
        if (resident[dev] == 0) {
            cfg.gridDim = dim3((unsigned)((sms / CLUSTER) * CLUSTER));
            int n = 0;
            CML_CUDA_TRY(fn, cudaOccupancyMaxActiveClusters(
                                 &n, gemm_sm90_kernel<BN, STAGES, KIND, TRANS_A, TRANS_B, CLUSTER, PP, CN>, &cfg));
            if (n < 1)
                return cml__error(CML_ERR_CUDA, "%s: no cluster of %d CTAs of gemm_sm90_kernel (%zu bytes of shared "
                                  "memory each) fits this GPU", fn, CLUSTER, (size_t)smem_t::total);
            resident[dev] = n;
        }
        clusters = balanced_grid(work, resident[dev]);
        cfg.gridDim = dim3((unsigned)(clusters * CLUSTER));
    }
    last_launch.grid = (int)(clusters * CLUSTER), last_launch.cluster = CLUSTER, last_launch.cluster_n = CN;
#if CML_SM90_DEV_TIMELINE /* dev (session 27): CML_SM90_TL_TWICE set: launched once more just before, back to back (the
                           * recorded launch then finds the kernel's code and parameters where the first left them);
                           * D is written twice with the same values (no split K: its counters would count twice) */
    if (getenv("CML_SM90_TL_TWICE") && splits <= 1)
        (void)cudaLaunchKernelEx(&cfg, gemm_sm90_kernel<BN, STAGES, KIND, TRANS_A, TRANS_B, CLUSTER, PP, CN>, map_a, map_b,
                                 map_d, epi, p, cml__sm90_param_groups<0>{0});
#endif
    cudaError_t e = cudaLaunchKernelEx(&cfg, gemm_sm90_kernel<BN, STAGES, KIND, TRANS_A, TRANS_B, CLUSTER, PP, CN>,
                                       map_a, map_b, map_d, epi, p, cml__sm90_param_groups<0>{0});
    if (e != cudaSuccess)
        return cml__error(CML_ERR_CUDA,
                          "%s: launching gemm_sm90_kernel<%s, %dx%d, cluster %d> (M=%lld N=%lld K=%lld batch=%lld, "
                          "grid=%lld) failed: %s",
                          fn, cml_dtype_name(d->a_dtype), BM, BN, CLUSTER, (long long)d->M, (long long)d->N,
                          (long long)d->K, (long long)d->batch, clusters * CLUSTER, cudaGetErrorString(e));
    CML_TRY(cml__cuda_check_launch(fn, "gemm_sm90_kernel", cml_dtype_name(d->a_dtype), work,
                                   (unsigned)(clusters * CLUSTER), CML_SM90_THREADS));
#if CML_SM90_DEV_TIMELINE
    tl_dump(ctx, d, BN, STAGES, CLUSTER, splits, (int)(clusters * CLUSTER));
#endif
    return CML_OK;
}

/* ---- the plan: tile width, K split, tile order ------------------------------------------- */

static long long k_blocks_of(const cml_gemm_desc *d, int kind) {
    const long long row_elems = CML_SM90_ROW_BYTES / (kind == CML_SM90_TF32 ? 4 : kind >= CML_SM90_E4M3 ? 1 : 2);
    return (d->K + row_elems - 1) / row_elems;
}

static bool config_valid(const cml_gemm_desc *d, int kind, const cml__gemm_sm90_config *c) {
    const bool is16 = kind == CML_SM90_BF16 || kind == CML_SM90_F16;
    if (c->bn != 256 && c->bn != 128 && !((c->bn == 192 || c->bn == 160) && is16)) return false;
    /* 160 wide: 128-row cooperative tiles only (the MLP weight gradients, 3072 x 768 and 768 x 3072, in 120 tiles for
     * 120 SMs, where 192 wide leaves 36 of 132 idle) */
    if (c->bn == 160 && (c->rows != 128 || c->pingpong != 0)) return false;
    if (c->group_m < 1 || c->group_m > 64 || c->splits < 1 || c->splits > CML_SM90_MAX_SPLITS) return false;
    if (c->cluster != 1 && c->cluster != 2 && c->cluster != 4) return false;
    /* clusters of 4, no K split: the 160-wide tile with an N-major B (its column blocks shared round-robin:
     * cml__sm90_b_blocks), 2 x 2 with an M-major A too (A's two blocks shared along the tile row); or 16-bit 128 x 256
     * cooperative tiles as a column of 4 sharing B (estimate) */
    if (c->cluster == 4) {
        const bool wide160 = c->bn == 160 && d->op_b == CML_OP_N;
        const bool column256 = c->bn == 256 && is16 && c->rows == 128 && c->pingpong == 0 && c->cluster_n <= 1;
        if (c->splits != 1 || !(wide160 || column256)) return false;
    }
    if (c->cluster_n < 0 || (c->cluster_n > 1 && (c->cluster_n != 2 || c->cluster != 4 || d->op_a != CML_OP_T)))
        return false;
    if (c->rows != 128 && !(c->rows == 64 && is16)) return false;
    /* 128-row ping-pong: a consumer holds a whole tile's accumulators (bn registers a thread); tf32 128 wide (its
     * launches with an operand read into registers run the cooperative kernel instead: sm90_run) */
    if (c->pingpong != 0 && (c->pingpong != 1 || c->rows != 128 || (!is16 && kind != CML_SM90_TF32) || c->bn > 192 ||
                             c->splits != 1))
        return false;
    const long long kb = k_blocks_of(d, kind), per_split = (kb + c->splits - 1) / c->splits;
    return (kb + per_split - 1) / per_split == c->splits; /* no split without K blocks */
}

extern "C" bool cml__gemm_sm90_config_valid(const cml_gemm_desc *d, const cml__gemm_sm90_config *c) {
    const int kind = input_kind(d);
    return kind >= 0 && config_valid(d, kind, c);
}

/* Dev builds only (A/B runs) set CML_SM90_ESTIMATE_PINGPONG to 0: the estimate never picks the 128-row ping-pong. */
#ifndef CML_SM90_ESTIMATE_PINGPONG
#define CML_SM90_ESTIMATE_PINGPONG 1
#endif

/* The cost estimate: the width and split with the least estimated time, in units of one
 * 64-deep K block of a 128 x 256 tile (~0.56 us on an H100): waves of tiles times the tile's K
 * blocks (narrower tiles do a little less work per block of shared-memory traffic: ~3% at 192,
 * ~8% at 128) plus ~2 blocks of per-tile overhead; a split adds its f32 partials' traffic
 * (written and read back once, mostly in L2) and a fixed 1.5 us (fitted when each call also
 * cleared its counters with a memset, which it no longer does; not re-fitted). Splitting pays off
 * where the tiles cannot fill the machine (e.g. 768 x 768 x 8192, a weight gradient). */
static cml__gemm_sm90_config estimate(const cml_ctx *ctx, const cml_gemm_desc *d, int kind) {
    int sms = cml__cuda_sm_count(ctx->device.index);
    if (sms <= 0) sms = 132;
    const long long k_blocks = k_blocks_of(d, kind);
    const double block_us = 0.56, overhead_blocks = 2.0, bytes_per_us = 5e6, splitk_launch_us = 1.5;
    cml__gemm_sm90_config best = {256, 1, 1, 16, 128, 0};
    double best_us = 1e300;
    const int widths[3] = {256, 192, 128}; /* 192: N = 768 in 4 tiles instead of 3 wide or 6 narrow ones */
    const double block_cost[3] = {1.0, 0.77, 0.54}; /* K-block time relative to a 256-wide tile */
    for (int i = 0; i < 3; i++) {
        const double tiles =
            (double)((d->M + CML_SM90_BM - 1) / CML_SM90_BM) * (double)((d->N + widths[i] - 1) / widths[i]) * d->batch;
        for (int splits = 1; splits <= CML_SM90_MAX_SPLITS; splits++) {
            const cml__gemm_sm90_config c = {widths[i], splits, 1, 16, 128, 0};
            const long long per_split = (k_blocks + splits - 1) / splits;
            if (!config_valid(d, kind, &c) || (splits > 1 && per_split < 4)) continue;
            const double waves = ceil(tiles * splits / sms);
            double us = waves * ((double)per_split * block_cost[i] + overhead_blocks) * block_us;
            if (splits > 1) us += 8.0 * splits * (double)d->M * d->N * d->batch / bytes_per_us + splitk_launch_us;
            if (us < best_us * 0.97) { /* a clear win only: fewer splits, wider tiles on ties */
                best_us = us;
                best = c;
            }
        }
    }
    /* clusters of 2 (B multicast) pay off with several waves of tiles (measured: 3000 x 5000 x 1000 +33%,
     * 8192^3 +3%). Shapes of 1-3 waves such as 8192 x 768 x 3072 and 1024^3 lost 4-13% until session 20,
     * almost all of it the kernel's two release cluster barriers (~1.4 us a launch); since they are gone
     * cluster 2 runs within ~1% of cluster 1 there (dev/gemm_sm90/README.md, session 20), so either is fine */
    const double tiles = (double)((d->M + CML_SM90_BM - 1) / CML_SM90_BM) * (double)((d->N + best.bn - 1) / best.bn) *
                         d->batch * best.splits;
    if (tiles >= 3.0 * sms) best.cluster = 2;
    /* 128-row ping-pong where each CTA runs several short tiles: the cooperative kernel's epilogue, run while the
     * tensor cores idle, is then a large part of a tile (0.5-1.9 us against 5.3 us at K = 768). Measured with 2-CTA
     * clusters: 1.05-1.09x at 192 wide (16-bit) and 1.02-1.13x at 128 wide (tf32, both operands K-major as stored)
     * on the GPT-2 forwards of K = 768 (dev/gemm_sm90/README.md, session 23). Only where the last column of tiles is
     * (nearly) full: at N = 1024 (a 192-wide tiling's last third empty) the batched 64 x 1024^3 ran 1.37x slower than
     * 256-wide tiles, at N = 5000 (3.7% of the columns empty) 1.08x (session 28); N = 8192 (0.8%) keeps it (1.06x). */
    const bool is16 = kind == CML_SM90_BF16 || kind == CML_SM90_F16;
    const bool tf32_kmajor = kind == CML_SM90_TF32 && d->op_a == CML_OP_N && d->op_b == CML_OP_T;
    if (CML_SM90_ESTIMATE_PINGPONG && best.splits == 1 && (is16 || tf32_kmajor) && k_blocks <= 24) {
        const int w = is16 ? 192 : 128;
        const long long cols = (d->N + w - 1) / w;
        const double pp_tiles = (double)((d->M + CML_SM90_BM - 1) / CML_SM90_BM) * (double)cols * d->batch;
        if (pp_tiles >= 2.5 * sms && (double)(cols * w) <= 1.02 * (double)d->N)
            best = cml__gemm_sm90_config{w, 1, 2, 8, 128, 1};
    }
    /* 16-bit 128 x 256 tiles in a column of 4 CTAs sharing B: each CTA reads 24 KB a k-block from L2 instead of 32 in
     * pairs, and that traffic is what bounds such a main loop where A and B stay in L2 (alone, 48 KB, 3000 x 5000 x
     * 1000 ran 1.4x slower than in pairs). Only where the clusters of 4 that fit (10 / 11 of the SMs: whole GPCs) take
     * no more rounds than pairs: 3000 x 5000 x 1000 4 and 4 (1.10x; dev/gemm_sm90/README.md, session 31); 4096^3 5
     * against 4 (0.85x). */
    if (is16 && best.cluster == 2 && best.bn == 256 && best.splits == 1 && best.pingpong == 0) {
        const long long tm = (d->M + CML_SM90_BM - 1) / CML_SM90_BM, tn = (d->N + 255) / 256;
        const long long pairs = sms / 2, fours = (long long)sms * 10 / 11 / 4;
        const long long rounds2 = ((tm + 1) / 2 * tn * d->batch + pairs - 1) / pairs;
        if (fours > 0 && ((tm + 3) / 4 * tn * d->batch + fours - 1) / fours <= rounds2) best.cluster = 4;
    }
    /* 16-bit TN (weight gradients: A M-major, B N-major as stored) whose 160-wide tiles make one wave of clusters of
     * 4 with no empty tile: a column of 4 tiles sharing B, or 2 x 2 sharing A and B, at ~0.99 of the tensor rate
     * where 192-wide tiles leave SMs idle (3072 x 768 and 768 x 3072 x 8192: 1.09-1.10x; dev/gemm_sm90/README.md,
     * session 26). One wave: at most 10 / 11 of the SMs (an H100 holds 30 clusters of 4 of this kernel: 120 of 132). */
    if (is16 && d->op_a == CML_OP_T && d->op_b == CML_OP_N && d->batch == 1 && best.splits == 1) {
        const long long tm = (d->M + CML_SM90_BM - 1) / CML_SM90_BM, tn = (d->N + 159) / 160;
        const int cn = tm % 4 == 0 ? 1 : tm % 2 == 0 && tn % 2 == 0 ? 2 : 0;
        const double wide_us = ((double)k_blocks * 0.625 + overhead_blocks) * block_us; /* 640 of 1024 clocks */
        if (cn && tm * tn * 11 <= 10LL * sms && wide_us < 0.9 * best_us)
            best = cml__gemm_sm90_config{160, 1, 4, 8, 128, 0, cn};
    }
    return best;
}

/* The tuned table: problems measured by `camel tune gemm` whose best configuration beat the
 * estimate's (gemm_sm90_tuned.inc; regenerate it with that command on the target GPU). */
typedef struct tuned_entry {
    int kind;
    char op_a, op_b;
    int64_t M, N, K, batch;
    cml__gemm_sm90_config cfg;
} tuned_entry;

/* a 13th argument, 1, names the 128-row ping-pong schedule; 0, 2 (13th and 14th) a cluster of 2 x 2 tiles */
#define CML_SM90_TUNED(kind, op_a, op_b, M, N, K, batch, rows, bn, splits, cluster, group_m, ...) \
    {CML_SM90_##kind, op_a, op_b, M, N, K, batch, {bn, splits, cluster, group_m, rows, __VA_ARGS__}},
static const tuned_entry tuned_table[] = {
#include "kernels/cuda/gemm/gemm_sm90_tuned.inc" /* also defines CML_SM90_TUNED_SMS */
    {-1, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0, 0, 0}} /* end */
};
#undef CML_SM90_TUNED
#ifndef CML_SM90_TUNED_SMS
#define CML_SM90_TUNED_SMS 0
#endif

/* The table's plan for an exact problem, on a GPU with as many SMs as the one it was tuned on
 * (elsewhere the waves differ and the estimate knows better). */
static const cml__gemm_sm90_config *tuned_config(const cml_ctx *ctx, const cml_gemm_desc *d, int kind) {
    if (cml__cuda_sm_count(ctx->device.index) != CML_SM90_TUNED_SMS) return NULL;
    const char op_a = d->op_a == CML_OP_T ? 'T' : 'N', op_b = d->op_b == CML_OP_T ? 'T' : 'N';
    for (const tuned_entry *t = tuned_table; t->kind >= 0; t++)
        if (t->kind == kind && t->op_a == op_a && t->op_b == op_b && t->M == d->M && t->N == d->N && t->K == d->K &&
            t->batch == d->batch && config_valid(d, kind, &t->cfg))
            return &t->cfg;
    return NULL;
}

static bool forced_on;
static cml__gemm_sm90_config forced;

extern "C" void cml__gemm_sm90_force_config(const cml__gemm_sm90_config *cfg) {
    forced_on = cfg != NULL;
    if (cfg) forced = *cfg;
}

/* The plan of a problem (as the caller gave it, before any repacking): forced, tuned or
 * estimated. It depends on the shape and the device only, so results repeat bitwise on a GPU. */
static cml__gemm_sm90_config plan(const cml_ctx *ctx, const cml_gemm_desc *d, int kind, bool *tuned) {
    if (tuned) *tuned = false;
    if (forced_on && config_valid(d, kind, &forced)) return forced;
#if CML_SM90_DEV_TIMELINE /* dev (session 26): CML_SM90_DEV_FORCE="bn,splits,cluster,group_m,cluster_n" for the
                            * weight gradients of the MLP (3072 x 768 x 8192, 768 x 3072 x 8192) in camel bench */
    {
        const char *e = getenv("CML_SM90_DEV_FORCE");
        cml__gemm_sm90_config f = {0, 0, 0, 0, 128, 0, 0};
        if (e && sscanf(e, "%d,%d,%d,%d,%d", &f.bn, &f.splits, &f.cluster, &f.group_m, &f.cluster_n) == 5 &&
            d->M * d->N == 3072 * 768 && d->K == 8192 && config_valid(d, kind, &f))
            return f;
    }
#endif
#if CML_SM90_DEV_TIMELINE || CML_SM90_DEV_FORCE_ANY /* dev (session 27): CML_SM90_DEV_FORCE_ANY="rows,bn,splits,
                            * cluster,group_m,pingpong,cluster_n" for every problem it is valid for */
    {
        const char *e = getenv("CML_SM90_DEV_FORCE_ANY");
        cml__gemm_sm90_config f = {0, 0, 0, 0, 0, 0, 0};
        if (e && sscanf(e, "%d,%d,%d,%d,%d,%d,%d", &f.rows, &f.bn, &f.splits, &f.cluster, &f.group_m, &f.pingpong,
                        &f.cluster_n) == 7 && config_valid(d, kind, &f))
            return f;
    }
#endif
    const cml__gemm_sm90_config *t = tuned_config(ctx, d, kind);
    if (t) {
        if (tuned) *tuned = true;
        return *t;
    }
    return estimate(ctx, d, kind);
}

extern "C" cml__gemm_sm90_config cml__gemm_sm90_chosen_config(const cml_ctx *ctx, const cml_gemm_desc *d,
                                                              bool *tuned) {
    const int kind = input_kind(d);
    if (kind < 0) return cml__gemm_sm90_config{0, 0, 0, 0, 0, 0};
    return plan(ctx, d, kind, tuned);
}

extern "C" cml__gemm_sm90_config cml__gemm_sm90_estimate_config(const cml_ctx *ctx, const cml_gemm_desc *d) {
    const int kind = input_kind(d);
    if (kind < 0) return cml__gemm_sm90_config{0, 0, 0, 0, 0, 0};
    return estimate(ctx, d, kind);
}

/* ---- operands TMA or wgmma cannot read in place: repacked K-major into the workspace ---------- */

/* out[b][c][r] = in[b][r][c] (TRANSPOSE) or out[b][r][c] = in[b][r][c] for r < rows, c < cols:
 * 32 x 32 tiles, through shared memory when transposing, so that reads and writes are coalesced. */
template <typename T, bool TRANSPOSE>
static __global__ void gemm_sm90_repack(const T *in, long long ld_in, long long stride_in, T *out, long long ld_out,
                                        long long stride_out, long long rows, long long cols) {
    __shared__ T tile[32][33];
    const long long tiles_c = (cols + 31) / 32, tiles = (rows + 31) / 32 * tiles_c;
    const T *src = in + blockIdx.y * stride_in;
    T *dst = out + blockIdx.y * stride_out;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long r0 = t / tiles_c * 32, c0 = t % tiles_c * 32;
        for (int i = threadIdx.y; i < 32; i += 8) {
            const long long r = r0 + i, c = c0 + threadIdx.x;
            if (r >= rows || c >= cols) continue;
            if (TRANSPOSE) tile[i][threadIdx.x] = src[r * ld_in + c];
            else dst[r * ld_out + c] = src[r * ld_in + c];
        }
        if (!TRANSPOSE) continue;
        __syncthreads();
        for (int i = threadIdx.y; i < 32; i += 8) {
            const long long c = c0 + i, r = r0 + threadIdx.x;
            if (r < rows && c < cols) dst[c * ld_out + r] = tile[threadIdx.x][i];
        }
        __syncthreads();
    }
}

/* How the sm90 path runs a problem: the descriptor it launches (operands it repacks point into
 * the workspace, K-major), its plan, and the workspace layout: [A repacked][B repacked][split-K
 * partials], each part 256-byte aligned. */
typedef struct sm90_layout {
    cml_gemm_desc e;
    bool pack_a, pack_b;
    int rs; /* the tf32 RS launch (rs_plan): 0 none, RS_SWAP (e: NN), RS_DIRECT (e: TT) */
    cml__gemm_sm90_config pl;
    size_t off_b, off_partials, total;
} sm90_layout;

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Repacks one operand of `rows` (M or N) x K to K-major with 16-byte rows: sets its op, leading
 * dimension and batch stride in *e's fields; returns the bytes it takes. */
static size_t pack_layout(int64_t rows, int64_t K, int64_t batch, int64_t stride, size_t es, cml_op *op,
                          cml_op k_major, int64_t *ld, int64_t *stride_out) {
    const int64_t per = (int64_t)(16 / es), ld_k = (K + per - 1) / per * per;
    const int64_t copies = batch == 1 || stride == 0 ? 1 : batch;
    *op = k_major;
    *ld = ld_k;
    *stride_out = copies == 1 ? 0 : rows * ld_k;
    return (size_t)(copies * rows * ld_k) * es;
}

/* tf32 with one M/N-major operand read into registers instead of transposed into the workspace (wgmma RS:
 * gemm_sm90_kernel.cuh, cml__sm90_rs_chunk; dev/gemm_sm90/README.md, "Session 13 (helper h13b)"), taken when
 * TMA reads that operand and writes f32 D in place and D takes the TMA-store epilogue (the launch's only epilogue):
 * RS_SWAP: B stored K x N (NN, TN) -> D^T = B^T A^T with A K-major (as stored, or repacked: TN transposes A only);
 * RS_DIRECT: A stored K x M (TT, TN) -> D = A B with B K-major (as stored, or repacked: TN transposes B only).
 * TN takes the one that repacks the smaller operand (B when M > N). CML_SM90_TF32_RS (read once, for A/B
 * runs): 0 = never (both M/N-major operands transposed first, as before), nn = NN only, anything else (the
 * default) = every case it can take; tests force it with cml__gemm_sm90_force_rs and count its launches with
 * cml__gemm_sm90_rs_launches. */
enum { RS_NONE = 0, RS_SWAP = 1, RS_DIRECT = 2 };
static unsigned long long rs_launches;
static int rs_forced = -1;
static int rs_mode(void) { /* 0 never, 1 NN only, 2 NN and TN */
    static int mode = -1;
    if (rs_forced >= 0) return rs_forced;
    if (mode < 0) {
        const char *e = getenv("CML_SM90_TF32_RS");
        mode = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "nn") == 0 ? 1 : 2;
    }
    return mode;
}
extern "C" unsigned long long cml__gemm_sm90_rs_launches(void) { return __atomic_load_n(&rs_launches, __ATOMIC_RELAXED); }
extern "C" void cml__gemm_sm90_force_rs(int mode) { rs_forced = mode < 0 ? -1 : mode > 2 ? 2 : mode; }

static int rs_plan(const cml_gemm_desc *d, int kind, const void *D, const void *A, const void *B) {
    /* f32 D only: the RS kernels' epilogues (gemm_sm90_kernel.cuh) stage and store f32 */
    if (kind != CML_SM90_TF32 || d->d_dtype != CML_F32 || !D || (d->op_a == CML_OP_N && d->op_b == CML_OP_T))
        return RS_NONE;
    const int mode = rs_mode();
    if (mode == 0 || (mode == 1 && (d->op_a != CML_OP_N || d->op_b != CML_OP_N))) return RS_NONE;
    if (!tma_store_ok(d, D) || (d->batch > 1 && d->stride_d == 0)) return RS_NONE;
    const bool a_ok = d->op_a == CML_OP_T && tma_ok(A, d->lda, d->stride_a, d->batch, 4);
    const bool b_ok = d->op_b == CML_OP_N && tma_ok(B, d->ldb, d->stride_b, d->batch, 4);
    if (a_ok && (!b_ok || d->M > d->N)) return RS_DIRECT; /* TN: B (K x N) is the smaller one to repack */
    return b_ok ? RS_SWAP : RS_NONE;
}

/* A, B and D may be NULL (workspace queries): then A and B count as 16-byte aligned, and the RS launch as not
 * taken (both operands' transposes counted), its swapped split-K partials as possible (the larger is counted). */
static sm90_layout layout(const cml_ctx *ctx, const cml_gemm_desc *d, int kind, const void *A, const void *B,
                          const void *D) {
    static const char aligned[16] __attribute__((aligned(16))) = {0};
    sm90_layout l;
    l.e = *d;
    const bool k_major_only = kind != CML_SM90_BF16 && kind != CML_SM90_F16;
    const size_t es = cml_dtype_size(d->a_dtype);
    l.rs = A && B ? rs_plan(d, kind, D, A, B) : RS_NONE;
    l.pack_a = l.rs != RS_DIRECT && ((k_major_only && d->op_a == CML_OP_T) ||
                                     !tma_ok(A ? A : aligned, d->lda, d->stride_a, d->batch, es));
    l.pack_b = l.rs != RS_SWAP && ((k_major_only && d->op_b == CML_OP_N) ||
                                   !tma_ok(B ? B : aligned, d->ldb, d->stride_b, d->batch, es));
    size_t bytes_a = 0, bytes_b = 0;
    if (l.pack_a) bytes_a = pack_layout(d->M, d->K, d->batch, d->stride_a, es, &l.e.op_a, CML_OP_N, &l.e.lda, &l.e.stride_a);
    if (l.pack_b) bytes_b = pack_layout(d->N, d->K, d->batch, d->stride_b, es, &l.e.op_b, CML_OP_T, &l.e.ldb, &l.e.stride_b);
    l.pl = plan(ctx, d, kind, NULL);
    /* clusters of 4 need the operands' layouts as stored (N-major B; M-major A for 2 x 2): repacked for TMA, the
     * tile runs in clusters of 4 along M, or alone */
    if (l.pl.cluster == 4 && !config_valid(&l.e, kind, &l.pl)) {
        l.pl.cluster_n = 0;
        if (!config_valid(&l.e, kind, &l.pl)) l.pl.cluster = 1;
    }
    l.off_b = align256(bytes_a);
    l.off_partials = l.off_b + align256(bytes_b);
    /* RS_SWAP's tiles (and split-K partials) are those of the swapped shape; a query (no pointers) covers them too,
     * so that a workspace reserved at its size serves every call */
    const cml_gemm_desc sw = rs_swapped(&l.e);
    const size_t part_e = splitk_bytes(&l.e, &l.pl), part_sw = splitk_bytes(&sw, &l.pl);
    const bool query_tf32 = !A && kind == CML_SM90_TF32;
    const size_t partials = l.rs == RS_SWAP || (query_tf32 && part_sw > part_e) ? part_sw : part_e;
    l.total = l.off_partials + partials; /* 0 when nothing is repacked or split */
    return l;
}

/* Copies operand src (stored op N: rows x K; op T: K x rows; ld, batch stride; stride 0 = one
 * copy) K-major into dst (rows x K, ld_out, stride_out). */
static cml_status pack_operand(cml_ctx *ctx, const void *src, cml_op op, int64_t rows, int64_t K, int64_t ld,
                               int64_t stride, int64_t batch, void *dst, int64_t ld_out, int64_t stride_out, size_t es) {
    const int64_t copies = batch == 1 || stride == 0 ? 1 : batch;
    const bool tr = op == CML_OP_T;
    const int64_t r_in = tr ? K : rows, c_in = tr ? rows : K; /* as stored */
    const long long tiles = (r_in + 31) / 32 * ((c_in + 31) / 32);
    const int sms = cml__cuda_sm_count(ctx->device.index);
    const unsigned blocks = (unsigned)(tiles < 8LL * sms ? tiles : 8LL * sms);
    const dim3 grid(blocks, (unsigned)copies), block(32, 8);
    cudaStream_t s = cml__stream(ctx);
#define CML_SM90_PACK(T)                                                                                              \
    (tr ? gemm_sm90_repack<T, true><<<grid, block, 0, s>>>((const T *)src, ld, stride, (T *)dst, ld_out, stride_out, \
                                                            r_in, c_in)                                               \
        : gemm_sm90_repack<T, false><<<grid, block, 0, s>>>((const T *)src, ld, stride, (T *)dst, ld_out,            \
                                                             stride_out, r_in, c_in))
    if (es == 4) CML_SM90_PACK(float);
    else if (es == 2) CML_SM90_PACK(uint16_t);
    else CML_SM90_PACK(uint8_t);
#undef CML_SM90_PACK
    return cml__cuda_check_launch(fn, "gemm_sm90_repack", tr ? "transpose" : "copy", tiles * copies, blocks, 256);
}

/* The 192-wide, 128-row tile's ring: 5 stages instead of 4 where the grid runs at most 2 tiles a CTA.
 * The fifth stage leaves room for only one 64 x 64 TMA-store block a consumer (three epilogue rounds a
 * tile instead of one). Measured (dev/gemm_sm90/README.md, session 9; A/B in one device call, H100):
 * +1.4 to +3.6% on the GPT-2 shapes of 1-2 tiles a CTA at K = 768 to 8192 (8192 x 768 x 768, 8192 x
 * 768 x 2304 and x 3072, 3072 x 768 and 768 x 3072 x 8192), but -4.5% and -8% at K = 768 with 6 and 8
 * tiles a CTA (8192 x 2304 x 768, 8192 x 3072 x 768), where the epilogue rounds add up; 3-5 tiles a CTA
 * were not measured and keep 4 stages. The stage count changes no arithmetic: D is bitwise the same.
 * CML_SM90_DEEP_192 (read once, for A/B runs): 0 = never, all = every such tile; tests force it with
 * cml__gemm_sm90_force_deep. */
static unsigned long long deep_launches;
static int deep_forced = -1;
static int deep_mode(void) {
    static int mode = -1;
    if (deep_forced >= 0) return deep_forced;
    if (mode < 0) {
        const char *e = getenv("CML_SM90_DEEP_192");
        mode = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "all") == 0 ? 2 : 1;
    }
    return mode;
}
static bool deep_ring(const cml_ctx *ctx, const sm90_layout *l) {
    const cml__gemm_sm90_config *c = &l->pl;
    if (c->bn != 192 || c->rows != 128) return false;
    const int mode = deep_mode();
    if (mode != 1) return mode == 2;
    /* the launch's work in cluster tiles over its clusters (sm90_launch's grid) */
    const long long tiles_m = (l->e.M + CML_SM90_BM - 1) / CML_SM90_BM, tiles_n = (l->e.N + 191) / 192;
    const long long work = (tiles_m + c->cluster - 1) / c->cluster * tiles_n * l->e.batch * c->splits;
    const long long clusters = cml__cuda_sm_count(ctx->device.index) / c->cluster;
    return clusters > 0 && work <= 2 * clusters;
}

extern "C" unsigned long long cml__gemm_sm90_deep_launches(void) {
    return __atomic_load_n(&deep_launches, __ATOMIC_RELAXED);
}
extern "C" void cml__gemm_sm90_force_deep(int mode) { deep_forced = mode < 0 ? -1 : mode == 0 ? 0 : 2; }

template <int KIND, int TRANS_A, int TRANS_B, int CLUSTER, int PP>
static cml_status sm90_run_tile(cml_ctx *ctx, const sm90_layout *l, void *D, const void *A, const void *B,
                                const void *C, float *partials) {
    const cml__gemm_sm90_config *c = &l->pl;
    if (c->bn == 256)
        return sm90_launch<256, 4, KIND, TRANS_A, TRANS_B, CLUSTER, PP>(ctx, &l->e, D, A, B, C, c, partials);
    if constexpr ((KIND == CML_SM90_BF16 || KIND == CML_SM90_F16) && !PP)
        if (c->bn == 160) /* 5 stages of 36 KB (40 KB in 2 x 2 clusters: cml__sm90_b_blocks) */
            return sm90_launch<160, 5, KIND, TRANS_A, TRANS_B, CLUSTER, 0>(ctx, &l->e, D, A, B, C, c, partials);
    if constexpr (KIND == CML_SM90_BF16 || KIND == CML_SM90_F16)
        if (c->bn == 192) {
            if constexpr (!PP)
                if (deep_ring(ctx, l)) {
                    __atomic_fetch_add(&deep_launches, 1ull, __ATOMIC_RELAXED); /* launches may come from several threads */
                    return sm90_launch<192, 5, KIND, TRANS_A, TRANS_B, CLUSTER, 0>(ctx, &l->e, D, A, B, C, c, partials);
                }
            return sm90_launch<192, 4, KIND, TRANS_A, TRANS_B, CLUSTER, PP>(ctx, &l->e, D, A, B, C, c, partials);
        }
    return sm90_launch<128, 6, KIND, TRANS_A, TRANS_B, CLUSTER, PP>(ctx, &l->e, D, A, B, C, c, partials);
}

static unsigned long long pingpong_launches;
extern "C" unsigned long long cml__gemm_sm90_pingpong_launches(void) {
    return __atomic_load_n(&pingpong_launches, __ATOMIC_RELAXED);
}

/* The 128-row ping-pong kernels: a consumer's epilogue runs under the other's main loop, so the 192-wide ring
 * takes 5 stages whatever the tile count (its three-round epilogue is hidden). */
template <int KIND, int TRANS_A, int TRANS_B, int CLUSTER>
static cml_status sm90_run_pingpong(cml_ctx *ctx, const sm90_layout *l, void *D, const void *A, const void *B,
                                    const void *C) {
    if constexpr (KIND != CML_SM90_TF32)
        if (l->pl.bn == 192)
            return sm90_launch<192, 5, KIND, TRANS_A, TRANS_B, CLUSTER, 2>(ctx, &l->e, D, A, B, C, &l->pl, NULL);
    return sm90_launch<128, 6, KIND, TRANS_A, TRANS_B, CLUSTER, 2>(ctx, &l->e, D, A, B, C, &l->pl, NULL);
}

template <int KIND, int TRANS_A, int TRANS_B>
static cml_status sm90_run(cml_ctx *ctx, const sm90_layout *l, void *D, const void *A, const void *B, const void *C,
                           float *partials) {
    /* 128-row ping-pong (config_valid's rules), only with TMA stores of D (its kernel has no other epilogue):
     * else the same tile in the cooperative kernel */
    if constexpr (KIND == CML_SM90_BF16 || KIND == CML_SM90_F16 || (KIND == CML_SM90_TF32 && !TRANS_A && !TRANS_B))
        if (l->pl.pingpong && tma_store_ok(&l->e, D) && (l->e.batch == 1 || l->e.stride_d != 0)) {
            __atomic_fetch_add(&pingpong_launches, 1ull, __ATOMIC_RELAXED);
            if (l->pl.cluster == 2) return sm90_run_pingpong<KIND, TRANS_A, TRANS_B, 2>(ctx, l, D, A, B, C);
            return sm90_run_pingpong<KIND, TRANS_A, TRANS_B, 1>(ctx, l, D, A, B, C);
        }
    if constexpr (KIND == CML_SM90_BF16 || KIND == CML_SM90_F16) /* 64-row tiles: 16-bit inputs only */
        if (l->pl.rows == 64) {
            if (l->pl.cluster == 2) return sm90_run_tile<KIND, TRANS_A, TRANS_B, 2, 1>(ctx, l, D, A, B, C, partials);
            return sm90_run_tile<KIND, TRANS_A, TRANS_B, 1, 1>(ctx, l, D, A, B, C, partials);
        }
    if constexpr (KIND == CML_SM90_BF16 || KIND == CML_SM90_F16)
        if (l->pl.cluster == 4 && l->pl.bn == 256)
            return sm90_launch<256, 4, KIND, TRANS_A, TRANS_B, 4, 0>(ctx, &l->e, D, A, B, C, &l->pl, partials);
    if constexpr ((KIND == CML_SM90_BF16 || KIND == CML_SM90_F16) && TRANS_B) /* the 160-wide tile's clusters of 4 */
        if (l->pl.cluster == 4) {
            if constexpr (TRANS_A)
                if (l->pl.cluster_n == 2)
                    return sm90_launch<160, 5, KIND, TRANS_A, TRANS_B, 4, 0, 2>(ctx, &l->e, D, A, B, C, &l->pl, partials);
            return sm90_launch<160, 5, KIND, TRANS_A, TRANS_B, 4, 0>(ctx, &l->e, D, A, B, C, &l->pl, partials);
        }
    if (l->pl.cluster == 2) return sm90_run_tile<KIND, TRANS_A, TRANS_B, 2, 0>(ctx, l, D, A, B, C, partials);
    return sm90_run_tile<KIND, TRANS_A, TRANS_B, 1, 0>(ctx, l, D, A, B, C, partials);
}

template <int KIND>
static cml_status sm90_run_16bit(cml_ctx *ctx, const sm90_layout *l, void *D, const void *A, const void *B,
                                 const void *C, float *partials) {
    /* wgmma's transpose flags: A M-major when op_a = T; B N-major when op_b = N */
    bool ta = l->e.op_a == CML_OP_T, tb = l->e.op_b == CML_OP_N;
    if (!ta && !tb) return sm90_run<KIND, 0, 0>(ctx, l, D, A, B, C, partials);
    if (!ta && tb) return sm90_run<KIND, 0, 1>(ctx, l, D, A, B, C, partials);
    if (ta && !tb) return sm90_run<KIND, 1, 0>(ctx, l, D, A, B, C, partials);
    return sm90_run<KIND, 1, 1>(ctx, l, D, A, B, C, partials);
}

extern "C" size_t cml__gemm_sm90_workspace_size(const cml_ctx *ctx, const cml_gemm_desc *d) {
    int kind = input_kind(d);
    if (kind < 0 || cml__cuda_arch(ctx->device.index) != 90) return 0;
    return layout(ctx, d, kind, NULL, NULL, NULL).total;
}

extern "C" cml_status cml__gemm_sm90(cml_ctx *ctx, const cml_gemm_desc *d, void *D, const void *A, const void *B,
                                     const void *C) {
    CML_TRY(cml__cuda_activate(ctx));
    const int kind = input_kind(d);
    if (kind < 0)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: the sm90 path does not take a=%s b=%s (math %d)", fn,
                          cml_dtype_name(d->a_dtype), cml_dtype_name(d->b_dtype), (int)d->math);
    const sm90_layout l = layout(ctx, d, kind, A, B, D);
    uint8_t *ws = NULL;
    if (l.total) CML_TRY(cml_ctx_workspace(ctx, (void **)&ws, l.total)); /* one request: parts must not move */
    const size_t es = cml_dtype_size(d->a_dtype);
    if (l.pack_a) {
        CML_TRY(pack_operand(ctx, A, d->op_a, d->M, d->K, d->lda, d->stride_a, d->batch, ws, l.e.lda, l.e.stride_a, es));
        A = ws;
    }
    if (l.pack_b) { /* K-major B is N x K: stored op T is N x K already, op N is K x N */
        const cml_op stored = d->op_b == CML_OP_T ? CML_OP_N : CML_OP_T;
        CML_TRY(pack_operand(ctx, B, stored, d->N, d->K, d->ldb, d->stride_b, d->batch, ws + l.off_b, l.e.ldb,
                             l.e.stride_b, es));
        B = ws + l.off_b;
    }
    float *partials = l.pl.splits > 1 ? (float *)(ws + l.off_partials) : NULL;
    switch (kind) {
    case CML_SM90_BF16: return sm90_run_16bit<CML_SM90_BF16>(ctx, &l, D, A, B, C, partials);
    case CML_SM90_F16: return sm90_run_16bit<CML_SM90_F16>(ctx, &l, D, A, B, C, partials);
    case CML_SM90_TF32:
        if (l.rs != RS_NONE) { /* TRANS_A 1: D^T = B^T A^T, 2: D with A from registers (gemm_sm90_kernel.cuh) */
            __atomic_fetch_add(&rs_launches, 1ull, __ATOMIC_RELAXED); /* launches may come from several threads */
            if (l.rs == RS_SWAP) return sm90_run<CML_SM90_TF32, 1, 0>(ctx, &l, D, A, B, C, partials);
            return sm90_run<CML_SM90_TF32, 2, 0>(ctx, &l, D, A, B, C, partials);
        }
        return sm90_run<CML_SM90_TF32, 0, 0>(ctx, &l, D, A, B, C, partials);
    case CML_SM90_E4M3: return sm90_run<CML_SM90_E4M3, 0, 0>(ctx, &l, D, A, B, C, partials);
    default: return sm90_run<CML_SM90_E5M2, 0, 0>(ctx, &l, D, A, B, C, partials);
    }
}

/* ---- grouped: every problem in one persistent launch ---------------------------------------- */

extern "C" bool cml__gemm_sm90_grouped_takes(const cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count,
                                             void *const *D, const void *const *A, const void *const *B,
                                             const void *const *C) {
    if (count < 1 || count > (1 << 20)) return false;
    int64_t tiles = 0;
    for (int64_t i = 0; i < count; i++) {
        if (!cml__gemm_sm90_takes(ctx, &descs[i], D[i], A[i], B[i], C ? C[i] : NULL) ||
            !operands_tma_ok(&descs[i], A[i], B[i]))
            return false;
        const int kind = input_kind(&descs[i]); /* no repacked copies in grouped launches */
        if (kind != CML_SM90_BF16 && kind != CML_SM90_F16 && (descs[i].op_a != CML_OP_N || descs[i].op_b != CML_OP_T))
            return false;
        tiles += (descs[i].M + 2 * CML_SM90_BM - 1) / (2 * CML_SM90_BM) * ((descs[i].N + 255) / 256);
    }
    return tiles < ((int64_t)1 << 30);
}

/* Dev builds (A/B runs) set CML_SM90_DEV_GLOBAL_GROUPS to 1: every grouped launch's problems in global memory. */
#ifndef CML_SM90_DEV_GLOBAL_GROUPS
#define CML_SM90_DEV_GLOBAL_GROUPS 0
#endif

/* The grouped launch visits its problems largest first (cluster tiles x K blocks; ties in the caller's order): the
 * small problems' tiles then fill the last rounds, and with different K no long tile starts last. Measured on the
 * grouped set (8 experts, M 256..2048 ascending): 1.006-1.019x over the caller's order (dev/gemm_sm90/README.md,
 * session 30). */
typedef struct {
    long long work;
    int64_t index;
} group_rank;

static int by_work_desc(const void *x, const void *y) {
    const group_rank *a = (const group_rank *)x, *b = (const group_rank *)y;
    if (a->work != b->work) return a->work > b->work ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The problems' maps, epilogues and tile ranges go to the kernel's parameters (up to CML_SM90_PARAM_GROUPS of them) or
 * to the device in ctx's workspace (one copy, ordered on the stream before the kernel); then one launch covers every
 * tile. */
template <int KIND, int TRANS_A, int TRANS_B>
static cml_status sm90_grouped_launch(cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                                      const void *const *A, const void *const *B, const void *const *C) {
    const int BN = 256, STAGES = 4, CLUSTER = 2;
    const int dev = ctx->device.index;
    CML_TRY((allow_smem<BN, STAGES, KIND, TRANS_A, TRANS_B, CLUSTER, 0, 1, true>(dev)));
    const int row_elems = CML_SM90_ROW_BYTES / cml__sm90_kind<KIND>::bytes;
    size_t bytes = sizeof(cml__sm90_group) * (size_t)count;
    cml__sm90_group *host = (cml__sm90_group *)calloc((size_t)count, sizeof(cml__sm90_group));
    group_rank *order = (group_rank *)malloc(sizeof(group_rank) * (size_t)count);
    if (!host || !order) {
        free(host);
        free(order);
        return cml__error(CML_ERR_OOM, "cml_gemm_grouped: cannot allocate %zu bytes of host memory",
                          bytes + sizeof(group_rank) * (size_t)count);
    }
    for (int64_t i = 0; i < count; i++) {
        const cml_gemm_desc *d = &descs[i];
        const long long cluster_rows = ((d->M + CML_SM90_BM - 1) / CML_SM90_BM + CLUSTER - 1) / CLUSTER;
        order[i].work = cluster_rows * ((d->N + BN - 1) / BN) * ((d->K + row_elems - 1) / row_elems);
        order[i].index = i;
    }
    qsort(order, (size_t)count, sizeof *order, by_work_desc);
    cml_status st = CML_OK;
    int tile_end = 0;
    bool same_k = true; /* then every tile costs the same k-blocks */
    for (int64_t j = 0; j < count && st == CML_OK; j++) {
        const int64_t i = order[j].index;
        const cml_gemm_desc *d = &descs[i];
        same_k = same_k && d->K == descs[0].K;
        cml__sm90_group *g = &host[j];
        if (TRANS_A) st = operand_map(&g->map_a, A[i], KIND, d->K, d->M, d->lda, 0, 1, false, 0);
        else st = operand_map(&g->map_a, A[i], KIND, d->M, d->K, d->lda, 0, 1, true, CML_SM90_BM);
        if (st != CML_OK) break;
        if (TRANS_B) st = operand_map(&g->map_b, B[i], KIND, d->K, d->N, d->ldb, 0, 1, false, 0);
        else st = operand_map(&g->map_b, B[i], KIND, d->N, d->K, d->ldb, 0, 1, true, BN / CLUSTER);
        g->epi = cml__gemm_epi_make(d, D[i], C ? C[i] : NULL);
        g->tma_store = st == CML_OK && tma_store_ok(d, D[i]) && d->batch == 1;
        if (g->tma_store) st = output_map(&g->map_d, d, D[i], 64u);
        int tiles_m = (int)((d->M + CML_SM90_BM - 1) / CML_SM90_BM);
        g->cluster_rows = (tiles_m + CLUSTER - 1) / CLUSTER;
        g->tiles_n = (int)((d->N + BN - 1) / BN);
        g->k_blocks = (int)((d->K + row_elems - 1) / row_elems);
        tile_end += g->cluster_rows * g->tiles_n;
        g->tile_end = tile_end;
    }
    free(order);
    cml__sm90_problem p;
    memset(&p, 0, sizeof p);
    p.group_m = 16;
    p.a_batch_fixed = p.b_batch_fixed = 1;
    p.groups = NULL; /* in the parameters */
    p.n_groups = (int)count;
    cml__sm90_param_groups<CML_SM90_PARAM_GROUPS> in_params; /* ~9 KB */
    memset(&in_params, 0, sizeof in_params);
    if (count > CML_SM90_PARAM_GROUPS || CML_SM90_DEV_GLOBAL_GROUPS) {
        void *dev_groups = NULL;
        if (st == CML_OK) st = cml_ctx_workspace(ctx, &dev_groups, bytes);
        if (st == CML_OK) st = cml__cuda_memcpy(ctx, dev_groups, host, bytes, false, "cml_gemm_grouped");
        p.groups = (const cml__sm90_group *)dev_groups;
    } else if (st == CML_OK) {
        memcpy(in_params.g, host, bytes);
    }
    free(host);
    CML_TRY(st);

    int sms = cml__cuda_sm_count(dev);
    /* balanced only where the tiles cost the same: problems of different K take different times a tile */
    const long long most = sms / CLUSTER;
    long long clusters = same_k ? balanced_grid(tile_end, most) : (tile_end < most ? tile_end : most);
    CUtensorMap unused;
    memset(&unused, 0, sizeof unused);
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = cluster_launch(ctx, &attr, clusters, CLUSTER,
                                            cml__sm90_smem<BN, STAGES>::total + CML_SM90_SLOT_BYTES(STAGES));
    cml__gemm_epi no_epi;
    memset(&no_epi, 0, sizeof no_epi);
    cudaError_t e = cudaLaunchKernelEx(&cfg, gemm_sm90_kernel<BN, STAGES, KIND, TRANS_A, TRANS_B, CLUSTER, 0, 1, true>,
                                       unused, unused, unused, no_epi, p, in_params);
    if (e != cudaSuccess)
        return cml__error(CML_ERR_CUDA, "cml_gemm_grouped: launching gemm_sm90_kernel<%s> for %lld problems failed: %s",
                          cml_dtype_name(descs[0].a_dtype), (long long)count, cudaGetErrorString(e));
#if CML_SM90_DEV_TIMELINE
    tl_dump(ctx, &descs[0], BN, STAGES, CLUSTER, 0, (int)(clusters * CLUSTER));
#endif
    return CML_OK;
}

extern "C" cml_status cml__gemm_sm90_grouped(cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                                             const void *const *A, const void *const *B, const void *const *C) {
    CML_TRY(cml__cuda_activate(ctx));
    const cml_gemm_desc *d = &descs[0];
    bool ta = d->op_a == CML_OP_T, tb = d->op_b == CML_OP_N;
    switch (input_kind(d)) {
    case CML_SM90_BF16:
        if (!ta && !tb) return sm90_grouped_launch<CML_SM90_BF16, 0, 0>(ctx, descs, count, D, A, B, C);
        if (!ta && tb) return sm90_grouped_launch<CML_SM90_BF16, 0, 1>(ctx, descs, count, D, A, B, C);
        if (ta && !tb) return sm90_grouped_launch<CML_SM90_BF16, 1, 0>(ctx, descs, count, D, A, B, C);
        return sm90_grouped_launch<CML_SM90_BF16, 1, 1>(ctx, descs, count, D, A, B, C);
    case CML_SM90_F16:
        if (!ta && !tb) return sm90_grouped_launch<CML_SM90_F16, 0, 0>(ctx, descs, count, D, A, B, C);
        if (!ta && tb) return sm90_grouped_launch<CML_SM90_F16, 0, 1>(ctx, descs, count, D, A, B, C);
        if (ta && !tb) return sm90_grouped_launch<CML_SM90_F16, 1, 0>(ctx, descs, count, D, A, B, C);
        return sm90_grouped_launch<CML_SM90_F16, 1, 1>(ctx, descs, count, D, A, B, C);
    case CML_SM90_TF32: return sm90_grouped_launch<CML_SM90_TF32, 0, 0>(ctx, descs, count, D, A, B, C);
    case CML_SM90_E4M3: return sm90_grouped_launch<CML_SM90_E4M3, 0, 0>(ctx, descs, count, D, A, B, C);
    case CML_SM90_E5M2: return sm90_grouped_launch<CML_SM90_E5M2, 0, 0>(ctx, descs, count, D, A, B, C);
    default:
        return cml__error(CML_ERR_UNSUPPORTED, "cml_gemm_grouped: the sm90 path does not take a=%s",
                          cml_dtype_name(d->a_dtype));
    }
}
