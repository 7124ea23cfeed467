/* Internal: the CUDA implementations behind the public kernels of camel/kernels.h.
 *
 * Each takes exactly the public function's arguments, already validated by
 * the public entry point in src/kernels/<family>.c, queues its work on ctx's
 * stream and returns without synchronizing. They exist only in builds with
 * CUDA (CML_HAVE_CUDA); the public entry points dispatch to them when ctx is
 * a CUDA context. A dtype or configuration a CUDA kernel does not cover yet
 * is CML_ERR_UNSUPPORTED naming it. */
#ifndef CML_KERNELS_CUDA_CUDA_KERNELS_H
#define CML_KERNELS_CUDA_CUDA_KERNELS_H

#include "camel/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ewise/ewise.cu ---- */
cml_status cml__unary_cuda(cml_ctx *ctx, cml_unary_op op, float param,
                           void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                           const void *x, const cml_layout *x_layout, cml_dtype x_dtype);
cml_status cml__binary_cuda(cml_ctx *ctx, cml_binary_op op,
                            void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                            const void *a, const cml_layout *a_layout, cml_dtype a_dtype,
                            const void *b, const cml_layout *b_layout, cml_dtype b_dtype);

/* ---- ewise/copy_fill.cu ---- */
cml_status cml__copy_cuda(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                          const void *x, const cml_layout *x_layout, cml_dtype x_dtype);
cml_status cml__fill_cuda(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype, double value);


/* ---- reduce/reduce.cu ---- */
cml_status cml__reduce_cuda(cml_ctx *ctx, cml_reduce_op op, void *y, cml_dtype y_dtype, const void *x,
                            cml_dtype x_dtype, int64_t outer, int64_t n, int64_t inner, int correction);

/* ---- softmax/softmax.cu ---- */
cml_status cml__softmax_fwd_cuda(cml_ctx *ctx, void *y, const void *x, int64_t outer, int64_t n, int64_t inner,
                                 cml_dtype dtype, bool log);
cml_status cml__softmax_bwd_cuda(cml_ctx *ctx, void *dx, const void *dy, const void *y, int64_t outer, int64_t n,
                                 int64_t inner, cml_dtype dtype, bool log);

/* ---- softmax/cross_entropy.cu ----
 * Target values live on the device: the kernels flag a bad one, and one small
 * copy after the kernel (which waits for the stream) turns it into
 * CML_ERR_INVALID_ARG naming the row. The outputs are written anyway then
 * (NaN in the rows with a bad target). */
cml_status cml__cross_entropy_fwd_cuda(cml_ctx *ctx, float *loss, float *lse, const void *logits,
                                       const int64_t *targets, int64_t rows, int64_t classes, cml_dtype dtype,
                                       int64_t ignore_index);
cml_status cml__cross_entropy_bwd_cuda(cml_ctx *ctx, void *dlogits, const float *dloss, const void *logits,
                                       const float *lse, const int64_t *targets, int64_t rows, int64_t classes,
                                       cml_dtype dtype, int64_t ignore_index);

/* ---- norm/layernorm_fwd.cu, norm/layernorm_bwd.cu ---- */
cml_status cml__layernorm_fwd_cuda(cml_ctx *ctx, void *y, float *mean, float *rstd, const void *x,
                                   const void *gamma, const void *beta, int64_t rows, int64_t C, float eps,
                                   cml_dtype dtype);
cml_status cml__layernorm_bwd_cuda(cml_ctx *ctx, void *dx, void *dgamma, void *dbeta, const void *dy,
                                   const void *x, const void *gamma, const float *mean, const float *rstd,
                                   int64_t rows, int64_t C, cml_dtype dtype);

/* ---- norm/rmsnorm_fwd.cu, norm/rmsnorm_bwd.cu ---- */
cml_status cml__rmsnorm_fwd_cuda(cml_ctx *ctx, void *y, float *rstd, const void *x, const void *gamma, int64_t rows,
                                 int64_t C, float eps, cml_dtype dtype);
cml_status cml__rmsnorm_bwd_cuda(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x,
                                 const void *gamma, const float *rstd, int64_t rows, int64_t C, cml_dtype dtype);

/* ---- ewise/convert_scaled.cu ---- */
cml_status cml__convert_scaled_cuda(cml_ctx *ctx, void *y, cml_dtype y_dtype, const void *x, cml_dtype x_dtype,
                                    int64_t n, const float *scale, float *amax);

/* ---- ewise/ewise_bwd.cu ---- */
cml_status cml__unary_bwd_cuda(cml_ctx *ctx, cml_unary_op op, float param, void *dx, const void *dy, const void *x,
                               const void *y, int64_t n, cml_dtype dtype);
cml_status cml__where_fwd_cuda(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype,
                               const uint8_t *cond, const cml_layout *cond_layout, const void *a,
                               const cml_layout *a_layout, const void *b, const cml_layout *b_layout);

/* ---- gemm/ ----
 * cml__gemm_cuda (gemm/gemm_dispatch.cu) takes a validated descriptor and picks a path:
 *   1. cml__gemm_sm90   (gemm/gemm_sm90.cu): Hopper wgmma + TMA, 16-bit (and tf32/fp8) inputs
 *      in any layout (operands that break TMA's 16-byte rules are first repacked);
 *   2. cml__gemm_f32    (gemm/gemm_f32.cu): exact f32 on CUDA cores, tuned (register and warp tiling);
 *   3. cml__gemm_simt   (gemm/gemm_simt.cu): any dtype, layout, alignment: always correct.
 * Each *_takes predicate says, without launching anything, whether that path handles the
 * problem; each path applies the whole epilogue (gemm/gemm_epilogue.cuh). dbias is a
 * separate deterministic reduction run by the dispatcher. */
cml_status cml__gemm_cuda(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A, const void *B,
                          const void *C);
bool cml__gemm_sm90_takes(const cml_ctx *ctx, const cml_gemm_desc *desc, const void *D, const void *A,
                          const void *B, const void *C);
/* Bytes of ctx workspace the sm90 path takes for desc (pointers assumed 16-byte aligned):
 * operands it repacks K-major (tf32/fp8 operands that are not, and operands whose leading
 * dimensions break TMA's 16-byte rules) and its split-K partials (0 when none). */
size_t cml__gemm_sm90_workspace_size(const cml_ctx *ctx, const cml_gemm_desc *desc);
cml_status cml__gemm_sm90(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A, const void *B,
                          const void *C);
/* A tile configuration of the sm90 path: tile width (256, 192 for 16-bit inputs, 128), K
 * splits (1 = none; each split keeps at least one K block), CTAs per cluster (1; 2: pairs of
 * vertically adjacent tiles share B through TMA multicast; 4, 16-bit, no K split: a column of 4
 * tiles sharing B, 160 or 256 wide, or 2 x 2 with cluster_n), tile rows visited together, and
 * tile height (128: both consumer warpgroups on one tile; 64, 16-bit inputs only: each
 * consumer on its own tiles, alternating, so one's epilogue overlaps the other's main loop), and
 * for 128-row tiles the same alternation (pingpong 1: each consumer a whole tile, 16-bit inputs
 * 128 or 192 wide, tf32 128 wide, no K split). The
 * plan for a problem comes from the tuned table (gemm_sm90_tuned.inc, written by `camel tune
 * gemm`) when it lists the exact problem, otherwise from a cost estimate (gemm_sm90.cu). */
typedef struct cml__gemm_sm90_config {
    int bn, splits, cluster, group_m, rows;
    int pingpong;  /* 128-row tiles only (0 for 64-row ones, which always alternate) */
    int cluster_n; /* 0 or 1: the cluster's CTAs are a column of tiles; 2: 2 x 2 tiles (cluster 4, 160 wide, TN) */
} cml__gemm_sm90_config;
/* Whether the sm90 path can run desc with cfg. */
bool cml__gemm_sm90_config_valid(const cml_gemm_desc *desc, const cml__gemm_sm90_config *cfg);
/* The configuration cml__gemm_sm90 runs desc with; *tuned (may be NULL) says whether it came
 * from the tuned table. */
cml__gemm_sm90_config cml__gemm_sm90_chosen_config(const cml_ctx *ctx, const cml_gemm_desc *desc, bool *tuned);
/* The cost estimate's configuration for desc (what runs when neither the table nor a forced
 * configuration applies). */
cml__gemm_sm90_config cml__gemm_sm90_estimate_config(const cml_ctx *ctx, const cml_gemm_desc *desc);
/* For `camel tune gemm` and tests: every later sm90 GEMM (not grouped) runs with *cfg where it
 * is valid for the problem; NULL goes back to the table and the estimate. Process-wide, not
 * thread-safe: only for single-threaded tools. */
void cml__gemm_sm90_force_config(const cml__gemm_sm90_config *cfg);
/* For tests: the grid (CTAs) and cluster shape (CTAs, tile columns) of the last sm90 GEMM launched that was not
 * grouped. Process-wide, like cml__gemm_sm90_force_config. */
void cml__gemm_sm90_last_launch(int *grid, int *cluster, int *cluster_n);
/* For tests: how many launches so far ran the 192-wide tile with the 5-stage ring (gemm_sm90.cu,
 * deep_ring), and forcing that ring on every 192-wide, 128-row tile (mode 1), on none (0), or back to
 * the plan's rule (-1). Process-wide, like cml__gemm_sm90_force_config. */
unsigned long long cml__gemm_sm90_deep_launches(void);
/* For tests: how many launches so far ran the 128-row ping-pong kernel (cml__gemm_sm90_config.pingpong; it needs
 * TMA stores of D, else the cooperative kernel runs the plan's tile). */
unsigned long long cml__gemm_sm90_pingpong_launches(void);
void cml__gemm_sm90_force_deep(int mode);
/* For tests: how many launches so far ran tf32 with an M/N-major operand read into registers instead of
 * transposed (gemm_sm90.cu, rs_plan), and allowing that launch wherever it can run (mode 2), for NN only (1),
 * never (0), or back to CML_SM90_TF32_RS (-1). Process-wide, like cml__gemm_sm90_force_config. */
unsigned long long cml__gemm_sm90_rs_launches(void);
void cml__gemm_sm90_force_rs(int mode);
/* For tests: how many launches so far ran the LayerNorm / RMSNorm backward's thread-block-cluster
 * kernel (norm_bwd_cluster.cuh), both together. */
unsigned long long cml__norm_bwd_cluster_launches(void);
/* For tests: the LayerNorm / RMSNorm backward's deferred dx schedule (CML_NORM_BWD_DEFER,
 * norm_bwd_long.cuh) forced on (1), off (0) or back to the environment's setting (-1), process-wide;
 * and how many launches so far ran it. */
void cml__norm_bwd_defer_force(int mode);
unsigned long long cml__norm_bwd_defer_launches(void);
/* The LayerNorm / RMSNorm backward's one-cluster-a-row kernel for rows past the half-chunk clusters
 * (nbx_kernel, norm_bwd_cluster.cuh) forced process-wide: -1 = CML_NORM_BWD_LONGCLUSTER's setting, 0 = never,
 * 1 = the default rows, 2 = wherever a row fits 2..16 CTAs; its launches so far (both norms) and the clusters
 * resident at once in its last launch. */
void cml__norm_bwd_longcluster_force(int mode);
unsigned long long cml__norm_bwd_longcluster_launches(void);
int cml__norm_bwd_longcluster_last_groups(void);
/* For tests: the LayerNorm / RMSNorm backward's staged kernel (nbs_kernel, norm_bwd_staged.cuh: rows in shared
 * memory by bulk copies) forced process-wide: -1 = CML_NORM_BWD_STAGED's setting, 0 = never, 1 = the cluster form
 * only (16-bit rows of 2..16 chunks of 16384 columns), 2 = also the row-sync form for rows of more than 16 chunks
 * (f32 too: 8192-column chunks), 3 = the row-sync form for every row of more than one chunk; its launches so far
 * and those of the row-sync form (both norms). */
void cml__norm_bwd_staged_force(int mode);
unsigned long long cml__norm_bwd_staged_launches(void);
unsigned long long cml__norm_bwd_staged_rows_launches(void);
/* For tests: the LayerNorm / RMSNorm backward's wide-row kernel (nbw_kernel, norm_bwd_wide.cuh) forced
 * process-wide: -1 = CML_NORM_BWD_WIDE's setting, 0 = never, 1 = the default rows (16-bit, 257..512 words),
 * 2 = every dtype up to 1024 words, 3 = the 512-thread form of 4 words a thread wherever it fits; and its
 * launches so far (both norms). */
void cml__norm_bwd_wide_force(int mode);
unsigned long long cml__norm_bwd_wide_launches(void);
/* ... and at most this many of its blocks from now on (0: no cap), process-wide. */
void cml__norm_bwd_wide_cap_blocks(int blocks);
/* For tests: the LayerNorm / RMSNorm forward's kernels for 16-bit rows on chip (CML_NORM_FWD_V2,
 * norm/norm_fwd_v2.cuh) forced to mode 0, 1 or 2 (-1: back to the environment's setting),
 * process-wide; and how many launches so far ran a kernel of mode 1 or 2 (0 for other modes). */
void cml__norm_fwd_v2_force(int mode);
unsigned long long cml__norm_fwd_v2_launches(int mode);
/* For tests: programmatic dependent launch of the memory-bound kernels (common/launch.cuh, CML_PDL)
 * forced on (1), off (0) or back to the environment's setting (-1), process-wide; and how many
 * launches so far went out with the PDL attribute (sm_90+ devices only). */
void cml__pdl_force(int mode);
unsigned long long cml__pdl_launches(void);
/* The grouped form of the sm90 path: every problem in one persistent launch. */
bool cml__gemm_sm90_grouped_takes(const cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                                  const void *const *A, const void *const *B, const void *const *C);
cml_status cml__gemm_sm90_grouped(cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                                  const void *const *A, const void *const *B, const void *const *C);
bool cml__gemm_f32_takes(const cml_ctx *ctx, const cml_gemm_desc *desc, const void *D, const void *A,
                         const void *B, const void *C);
cml_status cml__gemm_f32(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A, const void *B,
                         const void *C);
/* The tile configuration cml__gemm_f32 uses for desc ("256x128x8", ...; for tests and benchmarks). */
const char *cml__gemm_f32_config_name(const cml_ctx *ctx, const cml_gemm_desc *desc);
/* The name of f32 tile configuration `index` (0, 1, ...; NULL past the last one). */
const char *cml__gemm_f32_config_at(int index);
/* For tests and dev tools: every later f32 GEMM runs with the named configuration where its
 * grid fits (NULL: back to the cost estimate); false (and no forcing) for an unknown name.
 * Process-wide, not thread-safe. */
bool cml__gemm_f32_force_config(const char *name);
/* For tests and dev tools: every later f32 GEMM splits K into `splits` chunks (1: none; the chunks
 * are multiples of 16 deep, so a short K makes fewer), with the configuration the estimate (or a
 * forced one) gives; 0 goes back to the estimate; false (and no forcing) outside 0..16.
 * Process-wide, not thread-safe. */
bool cml__gemm_f32_force_splits(int splits);
/* The K splits cml__gemm_f32 uses for desc (1: none; for tests and benchmarks). */
int cml__gemm_f32_splits(const cml_ctx *ctx, const cml_gemm_desc *desc);
/* Bytes of ctx workspace the f32 path takes for desc (its split-K partials; 0 when it does not split). */
size_t cml__gemm_f32_workspace_size(const cml_ctx *ctx, const cml_gemm_desc *desc);
cml_status cml__gemm_simt(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A, const void *B,
                          const void *C);
/* Bytes of ctx workspace cml__gemm_cuda takes for desc (the dbias partial sums; plus
 * whatever the chosen path needs). */
size_t cml__gemm_cuda_workspace_size(const cml_ctx *ctx, const cml_gemm_desc *desc);
/* "sm90", "f32" or "simt": the path cml__gemm_cuda takes for desc (for tests and benchmarks). */
const char *cml__gemm_cuda_path_name(const cml_ctx *ctx, const cml_gemm_desc *desc, const void *D, const void *A,
                                     const void *B, const void *C);
/* count validated problems (same ops, dtypes, math, scale modes, epilogue; batch 1). */
cml_status cml__gemm_grouped_cuda(cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                                  const void *const *A, const void *const *B, const void *const *C);

/* ---- attention/ ----
 * cml__attention_{fwd,bwd}_cuda (attention/attention_cuda.cu) pick a path; each path
 * handles the whole problem (FlashAttention-2 tiling, never an S_q x S_kv matrix in
 * memory; bitwise deterministic, no atomics):
 *   1. cml__attention_*_mma  (attention_fwd_mma.cu, attention_bwd_mma.cu): mma.sync
 *      m16n8k16 tensor cores, f16/bf16 on sm_80+, D <= 256 (the backward above 128 needs
 *      ~150 KB of shared memory per block: sm_80/sm_90)
 *      (cml__attention_mma_takes says whether it takes a problem);
 *   2. cml__attention_*_simt (attention_fwd_simt.cu, attention_bwd_simt.cu): exact f32
 *      math on CUDA cores, every dtype, D <= 256: always correct.
 * Head dims above 256 are CML_ERR_UNSUPPORTED on CUDA. The backward takes B H_q S_q
 * floats of ctx workspace (Di = rowsum(dO * O)). */
cml_status cml__attention_fwd_cuda(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                   const void *Q, const void *K, const void *V);
cml_status cml__attention_bwd_cuda(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                                   const void *dO, const void *Q, const void *K, const void *V, const void *O,
                                   const float *lse);
bool cml__attention_mma_takes(const cml_ctx *ctx, const cml_attention_desc *desc, bool backward);
cml_status cml__attention_fwd_mma(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                  const void *Q, const void *K, const void *V);
/* attention_bwd_mma.cu: the dynamic shared memory a block of the mma backward takes for head
 * dim D (the dispatch checks that the device has it), and how many of its calls launched so far
 * in this process (tests: which path ran). */
size_t cml__attention_bwd_mma_smem(int64_t D);
long long cml__attention_bwd_mma_runs(void);
cml_status cml__attention_bwd_mma(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                                  const void *dO, const void *Q, const void *K, const void *V, const void *O,
                                  const float *lse);
cml_status cml__attention_fwd_simt(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                   const void *Q, const void *K, const void *V);
cml_status cml__attention_bwd_simt(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                                   const void *dO, const void *Q, const void *K, const void *V, const void *O,
                                   const float *lse);

/* ---- index/index.cu ----
 * Index values live on the device: a bad one is flagged there, and each call
 * waits for the stream (one 8-byte copy) to turn it into CML_ERR_INVALID_ARG. */
cml_status cml__index_select_fwd_cuda(cml_ctx *ctx, void *y, const void *x, const int64_t *idx, int64_t outer,
                                      int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype);
cml_status cml__index_select_bwd_cuda(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx, int64_t outer,
                                      int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype);
cml_status cml__gather_fwd_cuda(cml_ctx *ctx, void *y, const void *x, const int64_t *idx, int64_t outer,
                                int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype);
cml_status cml__gather_bwd_cuda(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx, int64_t outer,
                                int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype);

/* ---- optim/optim.cu ---- */
cml_status cml__sgd_update_cuda(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf, int64_t n,
                                float lr, float momentum, bool nesterov, float weight_decay, bool first_step);
cml_status cml__adam_update_cuda(cml_ctx *ctx, float *param, const float *grad, float *m, float *v, int64_t n,
                                 float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                                 int64_t step);
cml_status cml__dropout_fwd_cuda(cml_ctx *ctx, void *y, uint8_t *mask, const void *x, int64_t n, cml_dtype dtype,
                                 float p, uint64_t seed, uint64_t offset);

/* ---- vision: conv/, pool/pool.cu, norm/batchnorm_{fwd,bwd}.cu ----
 * As on the CPU (src/kernels/cpu/cpu_vision.h), each also takes the output size P x Q the
 * validation computed. Convolution is im2col + cml_gemm (f32) with scratch planned around
 * the GEMM's own workspace; every reduction runs in a fixed order (no float atomics). */
cml_status cml__conv2d_fwd_cuda(cml_ctx *ctx, const cml_conv2d_desc *desc, int64_t P, int64_t Q, void *y,
                                const void *x, const void *w, const void *bias);
cml_status cml__conv2d_bwd_data_cuda(cml_ctx *ctx, const cml_conv2d_desc *desc, int64_t P, int64_t Q, void *dx,
                                     const void *dy, const void *w);
cml_status cml__conv2d_bwd_filter_cuda(cml_ctx *ctx, const cml_conv2d_desc *desc, int64_t P, int64_t Q, void *dw,
                                       void *dbias, const void *dy, const void *x);
cml_status cml__pool2d_fwd_cuda(cml_ctx *ctx, const cml_pool2d_desc *desc, int64_t P, int64_t Q, void *y,
                                int64_t *indices, const void *x);
/* MAX: the indices are checked first (the call waits for the stream to report a bad one). */
cml_status cml__pool2d_bwd_cuda(cml_ctx *ctx, const cml_pool2d_desc *desc, int64_t P, int64_t Q, void *dx,
                                const void *dy, const int64_t *indices);
cml_status cml__batchnorm_fwd_cuda(cml_ctx *ctx, void *y, float *save_mean, float *save_rstd, float *running_mean,
                                   float *running_var, const void *x, const float *gamma, const float *beta,
                                   int64_t N, int64_t C, int64_t HW, bool channels_last, bool training,
                                   float momentum, float eps, cml_dtype dtype);
cml_status cml__batchnorm_bwd_cuda(cml_ctx *ctx, void *dx, float *dgamma, float *dbeta, const void *dy,
                                   const void *x, const float *gamma, const float *save_mean,
                                   const float *save_rstd, int64_t N, int64_t C, int64_t HW, bool channels_last,
                                   cml_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
