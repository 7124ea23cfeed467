/* The kernel layer: operations over raw buffers, like cuBLAS/cuDNN.
 *
 * Callers pass pointers, shapes, strides, dtypes and a cml_ctx; pointers must
 * live on the context's device. Kernels never allocate user memory and never
 * synchronize: work is queued on the context's stream (done at return on the
 * CPU). Every call validates its arguments and returns a cml_status.
 *
 * Every kernel has a CPU implementation, which is the reference the GPU
 * implementations are tested against. Floating-point math is done in f32
 * (accumulation in f32 or wider) whatever the storage dtype; reductions are
 * deterministic: a fixed order, no atomics whose order varies.
 */
#ifndef CAMEL_KERNELS_H
#define CAMEL_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/dtype.h"
#include "camel/runtime.h"
#include "camel/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CML_MAX_DIMS 8

/* The shape and element strides of an N-d view. Strides may be 0 (broadcast)
 * or negative; they are in elements, not bytes. */
typedef struct cml_layout {
    int ndim;
    int64_t shape[CML_MAX_DIMS];
    int64_t stride[CML_MAX_DIMS];
} cml_layout;

/* ---- elementwise -------------------------------------------------------- */

typedef enum cml_unary_op {
    CML_UNARY_IDENTITY = 0,
    CML_UNARY_NEG,
    CML_UNARY_EXP,
    CML_UNARY_LOG,
    CML_UNARY_SQRT,
    CML_UNARY_TANH,
    CML_UNARY_SIGMOID,
    CML_UNARY_RELU,
    CML_UNARY_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    CML_UNARY_GELU_ERF,  /* 0.5 x (1 + erf(x / sqrt(2))) */
    CML_UNARY_ABS,
    CML_UNARY_SCALE,      /* x * param */
    CML_UNARY_ADD_SCALAR, /* x + param */
    CML_UNARY_POW_SCALAR, /* x ^ param */
    CML_UNARY_OP_COUNT
} cml_unary_op;

typedef enum cml_binary_op {
    CML_BINARY_ADD = 0,
    CML_BINARY_SUB,
    CML_BINARY_MUL,
    CML_BINARY_DIV,
    CML_BINARY_POW,
    CML_BINARY_MAX,
    CML_BINARY_MIN,
    CML_BINARY_EQ, /* 1 where a == b, else 0 */
    CML_BINARY_GT, /* 1 where a > b, else 0 */
    CML_BINARY_OP_COUNT
} cml_binary_op;

/* y = op(x) elementwise over y's layout; x has the same shape (stride 0 broadcasts). */
cml_status cml_unary(cml_ctx *ctx, cml_unary_op op, float param,
                     void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                     const void *x, const cml_layout *x_layout, cml_dtype x_dtype);

/* dx = dy * op'(x) for n contiguous elements; y = op(x) is given for ops whose
 * derivative is cheaper from the output (exp, tanh, sigmoid, sqrt); either x or
 * y may be NULL when the op does not need it. All four buffers share `dtype`. */
cml_status cml_unary_bwd(cml_ctx *ctx, cml_unary_op op, float param,
                         void *dx, const void *dy, const void *x, const void *y,
                         int64_t n, cml_dtype dtype);

/* y = a op b elementwise over y's layout; a and b have y's shape (broadcast by stride 0). */
cml_status cml_binary(cml_ctx *ctx, cml_binary_op op,
                      void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                      const void *a, const cml_layout *a_layout, cml_dtype a_dtype,
                      const void *b, const cml_layout *b_layout, cml_dtype b_dtype);

/* y = cond ? a : b (cond is u8, nonzero = true), all with y's shape. */
cml_status cml_where_fwd(cml_ctx *ctx,
                     void *y, const cml_layout *y_layout, cml_dtype dtype,
                     const uint8_t *cond, const cml_layout *cond_layout,
                     const void *a, const cml_layout *a_layout,
                     const void *b, const cml_layout *b_layout);

/* y = x with dtype conversion (round-to-nearest-even); any strides. */
cml_status cml_copy(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                    const void *x, const cml_layout *x_layout, cml_dtype x_dtype);

/* y = value for every element of y's layout. */
cml_status cml_fill(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype, double value);

/* Scaled fp8 conversion of n contiguous elements, for fp8 training with per-tensor scales.
 * One of y_dtype / x_dtype is f8e4m3 or f8e5m2, the other f32, f16 or bf16:
 *   to fp8:   y = saturate(x * scale): round to nearest even; a product beyond the
 *             largest finite value (448 e4m3, 57344 e5m2), infinities included,
 *             becomes that value with its sign;
 *   from fp8: y = x * scale, rounded to y's dtype (nearest even).
 * The product is one f32 multiplication; a NaN product is stored as y's quiet NaN
 * with the sign bit sign(x) ^ sign(scale). scale points to one f32 on ctx's device,
 * read by the kernel (so a scale computed on the device needs no host round trip);
 * NULL means 1. amax, when not NULL, is one f32 on the device set to max |x| over
 * the input before scaling (NaN if any x is NaN, 0 when n == 0), for delayed scaling;
 * it is exact and the same for any grid (an integer atomic max on the bits of |x|,
 * which order like the values). y must not overlap x. */
cml_status cml_convert_scaled(cml_ctx *ctx, void *y, cml_dtype y_dtype, const void *x, cml_dtype x_dtype,
                              int64_t n, const float *scale, float *amax);

/* ---- reductions ---------------------------------------------------------- */

typedef enum cml_reduce_op {
    CML_REDUCE_SUM = 0,
    CML_REDUCE_MEAN,
    CML_REDUCE_MAX,
    CML_REDUCE_MIN,
    CML_REDUCE_VAR,    /* sum((x - mean)^2) / (n - correction); Welford */
    CML_REDUCE_ARGMAX, /* index (i64 output) of the first maximum */
    CML_REDUCE_ARGMIN,
    CML_REDUCE_SUMSQ,  /* sum(x^2) */
    CML_REDUCE_OP_COUNT
} cml_reduce_op;

/* x is contiguous (outer, n, inner); y = reduce over n -> (outer, inner).
 * y_dtype is i64 for ARGMAX/ARGMIN and x_dtype otherwise. `correction` is
 * used by VAR only (1 = unbiased). n must be >= 1. */
cml_status cml_reduce(cml_ctx *ctx, cml_reduce_op op, void *y, cml_dtype y_dtype,
                      const void *x, cml_dtype x_dtype,
                      int64_t outer, int64_t n, int64_t inner, int correction);

/* ---- softmax and cross-entropy ---------------------------------------- */

/* y = softmax(x) (or log_softmax when log) over the middle axis of contiguous (outer, n, inner). */
cml_status cml_softmax_fwd(cml_ctx *ctx, void *y, const void *x, int64_t outer, int64_t n,
                           int64_t inner, cml_dtype dtype, bool log);
/* dx from dy and the forward output y. */
cml_status cml_softmax_bwd(cml_ctx *ctx, void *dx, const void *dy, const void *y, int64_t outer,
                           int64_t n, int64_t inner, cml_dtype dtype, bool log);

/* Per-row cross-entropy straight from logits (rows, classes), never
 * materializing probabilities: loss[r] = logsumexp(logits[r]) - logits[r, t[r]],
 * 0 where t[r] == ignore_index. loss is f32 (rows). lse, unless NULL, gets each
 * row's logsumexp as two f32 (rows, 2; 8-byte aligned on CUDA): the row max m
 * and log(sum(exp(x - m))) (one rounded f32 logsumexp would cost exp(x - lse)
 * its low bits at large logits); (-inf, 0) for a row of -inf logits, a NaN in
 * the pair of a row with a NaN logit, NaN for an ignored row (and, on CUDA,
 * for a row with a bad target). Give it to cml_cross_entropy_bwd, which then
 * reads the logits once instead of twice or holding rows on chip. Targets are i64; a target
 * outside [0, classes) that is not ignore_index is CML_ERR_INVALID_ARG. On CUDA
 * the targets are checked on the device and the calls do not wait: the rows
 * with a bad target get NaN, the others are computed, and the error comes
 * from the next wait for the stream (camel/runtime.h, "contexts"). */
cml_status cml_cross_entropy_fwd(cml_ctx *ctx, float *loss, float *lse, const void *logits,
                                 const int64_t *targets, int64_t rows, int64_t classes,
                                 cml_dtype dtype, int64_t ignore_index);
/* dlogits[r] = dloss[r] * (softmax(logits[r]) - onehot(t[r])); 0 for ignored rows.
 * lse: the pairs of a forward over the same logits, targets and ignore_index
 * (softmax = exp((x - m) - log-sum)), or NULL to recompute them; on CUDA a
 * matrix of 2^31 or more 16-byte words recomputes them anyway.
 * A -inf logit is a class of probability 0: a row whose target's logit, or every
 * logit, is -inf has loss +inf; softmax over a row of -inf logits only is taken
 * as all 0, so its dlogits are -dloss[r] at the target and 0 elsewhere. */
cml_status cml_cross_entropy_bwd(cml_ctx *ctx, void *dlogits, const float *dloss,
                                 const void *logits, const float *lse, const int64_t *targets,
                                 int64_t rows, int64_t classes, cml_dtype dtype, int64_t ignore_index);

/* ---- indexing ------------------------------------------------------------ */

/* An index outside [0, n_src) is CML_ERR_INVALID_ARG. On CUDA, where the indices
 * live on the device, it is skipped and reported by the next wait for the stream
 * (camel/runtime.h, "contexts"), as for cross-entropy targets. */

/* y (outer, n_idx, inner) = x (outer, n_src, inner) rows picked by idx (n_idx) along the middle axis. */
cml_status cml_index_select_fwd(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                            int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                            cml_dtype dtype);
/* dx (outer, n_src, inner) += dy rows scattered by idx; deterministic (rows summed in index order). */
cml_status cml_index_select_bwd(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                         int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                         cml_dtype dtype);
/* torch.gather along the middle axis: y[o,j,i] = x[o, idx[o,j,i], i]; idx and y are (outer, n_idx, inner). */
cml_status cml_gather_fwd(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                      int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype);
/* dx[o, idx[o,j,i], i] += dy[o,j,i]; deterministic. */
cml_status cml_gather_bwd(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                           int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                           cml_dtype dtype);

/* ---- GEMM ----------------------------------------------------------------- */

typedef enum cml_op { CML_OP_N = 0, CML_OP_T = 1 } cml_op;

/* The activation applied last, to z = alpha * sa * op(A) op(B) * sb + beta * C + bias. */
typedef enum cml_epilogue {
    CML_EPILOGUE_NONE = 0,
    CML_EPILOGUE_RELU,
    CML_EPILOGUE_GELU_TANH,
    /* D = gelu_tanh(z) and aux = z (the pre-activation, in d_dtype) for the backward */
    CML_EPILOGUE_GELU_TANH_AUX,
    /* D = z * gelu_tanh'(aux): the backward of GELU fused into the GEMM that produces
     * the gradient of its output; aux (read, d_dtype) holds the saved pre-activation */
    CML_EPILOGUE_DGELU_TANH
} cml_epilogue;

/* Which axis of D a bias vector runs along. */
typedef enum cml_bias_axis {
    CML_BIAS_PER_COLUMN = 0, /* bias[n], length N: the Linear layer's bias (the default) */
    CML_BIAS_PER_ROW = 1     /* bias[m], length M */
} cml_bias_axis;

/* How an operand is scaled (f32 scale factors; fp8 inputs use them, any dtype may). */
typedef enum cml_scale_mode {
    CML_SCALE_NONE = 0,   /* factor 1; the scale pointer is ignored */
    CML_SCALE_TENSOR = 1, /* one factor, scale[0] */
    CML_SCALE_VECTOR = 2  /* a_scale[m] per row of op(A) (M), b_scale[n] per column of op(B) (N) */
} cml_scale_mode;

/* The arithmetic used for f32 inputs. */
typedef enum cml_gemm_math {
    CML_GEMM_MATH_DEFAULT = 0, /* exact f32 products (CUDA cores); the default */
    CML_GEMM_MATH_TF32 = 1     /* opt-in: f32 inputs rounded to tf32 on tensor cores (~1e-3 relative);
                                * the CPU rounds them the same way (to nearest, ties away) */
} cml_gemm_math;

/* D = act(alpha * sa * op(A) op(B) * sb + beta * C + bias), row-major storage.
 * op(A) is M x K, op(B) is K x N, C and D are M x N. Leading dimensions are
 * row strides of the stored matrices (A stored K-wide when op_a = N, M-wide
 * when T). Strided batches: batch >= 1 with element strides per matrix
 * (0 broadcasts one matrix to every batch). C may be NULL when beta == 0 and
 * may alias D (same ld and stride). Inputs: f32, f16, bf16, f8e4m3, f8e5m2
 * (a_dtype and b_dtype may differ: the GPU's fast paths need them equal, its always-correct path does not);
 * C and D: f32, f16 or bf16. Accumulation is in f32.
 *
 * Pointers are device pointers of ctx's device (host pointers on the CPU):
 *   bias      (N or M by bias_axis, d_dtype), may be NULL; the same for every batch.
 *   a_scale   (1 or M, f32) and b_scale (1 or N, f32) by their modes.
 *   aux       (M x N, d_dtype, row stride ldaux, batch stride stride_aux): written by
 *             CML_EPILOGUE_GELU_TANH_AUX, read by CML_EPILOGUE_DGELU_TANH, else unused.
 *   dbias     when non-NULL, also dbias[b*M + m] = sum_k sa * op(A)[m,k] (d_dtype): the
 *             bias gradient of a backward GEMM dW = dY^T X (op_a = T, A = dY); summed
 *             in a fixed order. (M per batch, batches one after another.)
 * Use cml_gemm_desc_init (or cml_gemm_desc_f32) to fill every field, then change what differs. */
typedef struct cml_gemm_desc {
    cml_op op_a, op_b;
    int64_t M, N, K;
    cml_dtype a_dtype, b_dtype, c_dtype, d_dtype;
    int64_t lda, ldb, ldc, ldd;
    int64_t batch;
    int64_t stride_a, stride_b, stride_c, stride_d;
    float alpha, beta;
    const void *bias;
    cml_epilogue epilogue;
    cml_bias_axis bias_axis;
    cml_gemm_math math;
    cml_scale_mode a_scale_mode, b_scale_mode;
    const float *a_scale, *b_scale;
    void *aux;
    int64_t ldaux, stride_aux;
    void *dbias;
} cml_gemm_desc;

/* A descriptor for a batch of row-major contiguous matrices of the given dtypes
 * (a/b inputs, c/d outputs): alpha 1, beta 0, no bias, scales, aux or dbias. */
cml_gemm_desc cml_gemm_desc_init(cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K, int64_t batch,
                                 cml_dtype ab_dtype, cml_dtype cd_dtype);
/* cml_gemm_desc_init with every dtype f32. */
cml_gemm_desc cml_gemm_desc_f32(cml_op op_a, cml_op op_b, int64_t M, int64_t N, int64_t K,
                                int64_t batch);

/* Runs one GEMM (batched when desc->batch > 1) on ctx's device and stream.
 * Deterministic: the same inputs give bitwise-identical D on the same device. */
cml_status cml_gemm(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A,
                    const void *B, const void *C);

/* Bytes of scratch memory cml_gemm may take from ctx's workspace for desc
 * (cml_ctx_workspace grows on demand; reserving this much up front keeps a
 * training step free of allocations). */
cml_status cml_gemm_workspace_size(cml_ctx *ctx, const cml_gemm_desc *desc, size_t *bytes);

/* Grouped GEMM: count independent problems of different sizes in one launch on
 * the GPU (a loop on the CPU). descs[i] describes problem i (batch must be 1);
 * every problem must share op_a, op_b, dtypes, math, scale modes and epilogue. D, A, B, C are
 * host arrays of count pointers each (C may be NULL when every beta is 0). On Hopper the
 * launch visits the largest problems first, and up to 16 problems ride in the kernel's
 * parameters (more go through device memory, a little slower); results do not depend on
 * either. */
cml_status cml_gemm_grouped(cml_ctx *ctx, const cml_gemm_desc *descs, int64_t count, void *const *D,
                            const void *const *A, const void *const *B, const void *const *C);

/* ---- dropout ---------------------------------------------------------------- */

/* y = x * mask / (1 - p), mask[i] = (uniform(word i of Philox stream (seed, offset)) >= p).
 * The same seed and offset give the same mask on every backend. mask is u8 (n). */
cml_status cml_dropout_fwd(cml_ctx *ctx, void *y, uint8_t *mask, const void *x, int64_t n,
                           cml_dtype dtype, float p, uint64_t seed, uint64_t offset);

/* ---- optimizers (contiguous f32 buffers of n elements) ----------------------- */

/* SGD with momentum (buf may be NULL when momentum == 0), Nesterov, L2 weight decay. */
cml_status cml_sgd_update(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf,
                          int64_t n, float lr, float momentum, bool nesterov,
                          float weight_decay, bool first_step);

/* Adam (decoupled = false: L2 added to the gradient) or AdamW (decoupled = true:
 * param *= 1 - lr * weight_decay). step counts from 1. */
cml_status cml_adam_update(cml_ctx *ctx, float *param, const float *grad, float *m, float *v,
                           int64_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, bool decoupled, int64_t step);

/* ---- multi-tensor (fused) optimizers: every parameter in one launch ---------------
 *
 * A cml_param_list holds the buffers of many parameters for one context. On CUDA it
 * keeps a device-resident table of their pointers and sizes, cut into work chunks of
 * CML_PARAM_CHUNK elements, uploaded (queued on the stream, from pinned memory) only
 * when cml_param_list_set is given slices that differ from the current ones: steps
 * over an unchanged list copy nothing to the device and never wait for it. The list
 * also owns its scratch (per-chunk partial sums) and the last global gradient norm
 * and clip coefficient, in the device's memory. These are the only buffers the
 * kernel layer allocates besides the context's workspace; the caller owns the list
 * (cml_param_list_destroy) and everything the slices point to. */

#define CML_PARAM_CHUNK 16384

typedef struct cml_param_slice {
    float *param;      /* (n) */
    const float *grad; /* (n) */
    float *m;          /* (n) SGD's momentum buffer or Adam's exp_avg; NULL when unused */
    float *v;          /* (n) Adam's exp_avg_sq; NULL for SGD */
    int64_t n;         /* >= 0 */
} cml_param_slice;

typedef struct cml_param_list cml_param_list;

/* An empty list on ctx's device (ctx must outlive it). */
cml_status cml_param_list_create(cml_ctx *ctx, cml_param_list **out);
/* Replaces the list's slices with a copy of slices[0..count). Uploads the table when
 * they differ from the current ones (*changed, which may be NULL, says whether they
 * did); work already queued that uses the old table is not disturbed. */
cml_status cml_param_list_set(cml_param_list *list, const cml_param_slice *slices, int count,
                              bool *changed);
int cml_param_list_count(const cml_param_list *list);
/* Frees the list (NULL is a no-op). Its device memory is released in stream order,
 * so work already queued with it still completes correctly. */
void cml_param_list_destroy(cml_param_list *list);

/* The global L2 norm of every slice's grad, sqrt(sum grad^2), and the clip coefficient
 * min(1, max_norm / (norm + 1e-6)) rounded to f32 (1 when the norm is not finite, so
 * that a NaN/inf norm scales nothing, as cml_clip_grad_norm), kept in the list.
 * Deterministic and identical on the CPU and the GPU: squares summed in float64 in a
 * fixed order (per chunk, then the chunks' partials, each by a fixed tree), no
 * atomics; on CUDA two launches and no host synchronization. max_norm: finite, >= 0. */
cml_status cml_param_list_grad_norm(cml_ctx *ctx, cml_param_list *list, double max_norm);
/* Copies the last norm to the host (on CUDA this waits for ctx's stream: ask only
 * when the value is needed, e.g. for a log line). Fails before any norm was computed. */
cml_status cml_param_list_read_norm(cml_ctx *ctx, const cml_param_list *list, double *norm);
/* Where the last clip coefficient lives (an f32 in ctx's device memory; host memory on
 * the CPU), to pass as clip_coef below; valid until the list is destroyed, its value
 * set by cml_param_list_grad_norm (1 before the first). */
const float *cml_param_list_clip_coef(const cml_param_list *list);

/* Fused updates of every slice of list, with cml_sgd_update's / cml_adam_update's
 * arithmetic bit for bit (the same results as calling them slice by slice). clip_coef
 * (NULL for none) is an f32 in ctx's memory that every grad is multiplied by (in f32)
 * before use, as if the grads had been clipped in place first; the grads themselves are
 * not changed. SGD needs m in every slice when momentum > 0; Adam needs m and v. */
cml_status cml_sgd_update_multi(cml_ctx *ctx, const cml_param_list *list, float lr, float momentum,
                                bool nesterov, float weight_decay, bool first_step,
                                const float *clip_coef);
cml_status cml_adam_update_multi(cml_ctx *ctx, const cml_param_list *list, float lr, float beta1,
                                 float beta2, float eps, float weight_decay, bool decoupled,
                                 int64_t step, const float *clip_coef);

/* ---- normalization ------------------------------------------------------------ */

/* LayerNorm over the last dim of contiguous x (rows, C):
 *   y = (x - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(var + eps)   (biased var, Welford).
 * mean and rstd (f32, rows) are written for the backward; either may be NULL.
 * gamma and beta (C, same dtype as x) may be NULL (1 and 0). */
cml_status cml_layernorm_fwd(cml_ctx *ctx, void *y, float *mean, float *rstd, const void *x,
                             const void *gamma, const void *beta, int64_t rows, int64_t C, float eps,
                             cml_dtype dtype);
/* dx (rows, C) from dy; dgamma, dbeta (C) are overwritten (not accumulated) and may be
 * NULL; their row sums are in a fixed order (deterministic). */
cml_status cml_layernorm_bwd(cml_ctx *ctx, void *dx, void *dgamma, void *dbeta, const void *dy,
                             const void *x, const void *gamma, const float *mean, const float *rstd,
                             int64_t rows, int64_t C, cml_dtype dtype);

/* RMSNorm over the last dim of contiguous x (rows, C):
 *   y = x * rstd * gamma,  rstd = 1 / sqrt(mean(x^2) + eps).
 * rstd (f32, rows) is written for the backward and may be NULL; gamma (C, same
 * dtype as x) may be NULL (1). f32 math whatever the storage dtype. */
cml_status cml_rmsnorm_fwd(cml_ctx *ctx, void *y, float *rstd, const void *x, const void *gamma,
                           int64_t rows, int64_t C, float eps, cml_dtype dtype);
/* With xhat = x * rstd and g = dy * gamma:
 *   dx = rstd * (g - xhat * mean(g * xhat)),  dgamma[c] = sum_r dy[r,c] * xhat[r,c].
 * dgamma (C) is overwritten (not accumulated), may be NULL, and is summed over rows in
 * a fixed order (deterministic). dx may alias dy. */
cml_status cml_rmsnorm_bwd(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x,
                           const void *gamma, const float *rstd, int64_t rows, int64_t C, cml_dtype dtype);

/* BatchNorm over (N, C, HW) in NCHW (channels_last = false) or (N, HW, C) in NHWC.
 * Training: batch statistics (biased var for normalizing, unbiased for the running
 * var), running stats updated as r = (1 - momentum) r + momentum * batch (may be NULL),
 * save_mean / save_rstd (f32, C) written for the backward (may be NULL). Eval: uses the running
 * stats (required). gamma/beta/running stats are f32 (C); gamma and beta may be NULL (1 and 0). */
cml_status cml_batchnorm_fwd(cml_ctx *ctx, void *y, float *save_mean, float *save_rstd,
                             float *running_mean, float *running_var, const void *x, const float *gamma,
                             const float *beta, int64_t N, int64_t C, int64_t HW, bool channels_last,
                             bool training, float momentum, float eps, cml_dtype dtype);
/* Training-mode backward: dx, and dgamma/dbeta (f32, C, overwritten; may be NULL). */
cml_status cml_batchnorm_bwd(cml_ctx *ctx, void *dx, float *dgamma, float *dbeta, const void *dy,
                             const void *x, const float *gamma, const float *save_mean,
                             const float *save_rstd, int64_t N, int64_t C, int64_t HW, bool channels_last,
                             cml_dtype dtype);

/* ---- attention ------------------------------------------------------------------- */

/* Scaled dot-product attention over Q (B, S_q, H_q, D), K and V (B, S_kv, H_kv, D),
 * O like Q, given by element strides for the batch, sequence and head dims (the D dim
 * is contiguous), so both [B, S, H, D] and [B, H, S, D] layouts are described.
 * H_q is a multiple of H_kv (grouped-query: query head h reads kv head h / (H_q/H_kv)).
 * causal: query i sees keys j <= i + (S_kv - S_q) (aligned to the bottom right, as in
 * FlashAttention 2). scale multiplies QK^T (usually 1/sqrt(D)).
 *
 * Variable-length (packed) batches, like FlashAttention's varlen API: set both cu_seqlens_q
 * and cu_seqlens_kv (or neither: the last four fields all zero, as cml_attention_desc_bshd
 * and any zero initializer leave them, mean fixed lengths). Each holds B + 1 int32 offsets,
 * non-decreasing from 0, in the memory of ctx's device (device pointers on CUDA, host on CPU).
 * Sequence b has the n_q(b) = cu_seqlens_q[b + 1] - cu_seqlens_q[b] query rows
 * cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of the packed Q, O (and dO, dQ), and likewise
 * n_kv(b) key rows of K, V (dK, dV): element (row r, head h, d) is at r stride[1] + h stride[2]
 * + d, and the batch strides stride[0] must be 0. S_q and S_kv are upper bounds, n_q(b) <= S_q
 * and n_kv(b) <= S_kv (they size the GPU grids and lse). total_q and total_kv are the rows the
 * packed buffers hold (>= cu_seqlens_q[B], cu_seqlens_kv[B]); rows from cu_seqlens_*[B] on
 * are never read or written. Sequences may be empty. causal is aligned to the bottom right of
 * each sequence: query i of sequence b sees keys j <= i + n_kv(b) - n_q(b).
 * lse keeps its (B, H_q, S_q) layout, S_q being the bound: entry (b, h, i) for i < n_q(b);
 * the others are neither read nor written. (Not FlashAttention's (H_q, total_q): one
 * indexing for both modes keeps the kernels' addressing and the backward's scratch as they
 * are, and needs no total on the device; it costs B H_q S_q floats.)
 * The offsets are data: the CPU checks them (CML_ERR_INVALID_ARG naming the bad entry). CUDA
 * does not, since reading them on the host would cost a synchronization: there, invalid
 * offsets give unspecified values in the outputs' rows, but no access outside the first
 * total_q (total_kv) rows or outside lse's (B, H_q, S_q): each sequence is clamped into
 * [0, total) and to at most S_q (S_kv) rows. */
typedef struct cml_attention_desc {
    int64_t B, H_q, H_kv, S_q, S_kv, D;
    bool causal;
    float scale;
    cml_dtype dtype;
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3]; /* batch, seq, head */
    const int32_t *cu_seqlens_q, *cu_seqlens_kv; /* varlen: B + 1 offsets each, or both NULL */
    int64_t total_q, total_kv;                   /* varlen: rows of the packed buffers, else 0 */
} cml_attention_desc;

/* A descriptor for contiguous [B, S, H, D] tensors (fixed lengths). */
cml_attention_desc cml_attention_desc_bshd(int64_t B, int64_t S_q, int64_t S_kv, int64_t H_q, int64_t H_kv,
                                           int64_t D, bool causal, cml_dtype dtype);

/* O = softmax(scale Q K^T [+ causal mask]) V; lse (f32, (B, H_q, S_q), may be NULL) gets
 * the natural-log sum of exp of each scaled score row, for the backward. A query row
 * that sees no key (when causal and S_q > S_kv, or, varlen, n_kv(b) = 0) gives O = 0, lse = -inf. */
cml_status cml_attention_fwd(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                             const void *Q, const void *K, const void *V);
/* dQ, dK, dV (laid out like Q, K, V) from dO, O and lse; overwritten, deterministic. */
cml_status cml_attention_bwd(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                             const void *dO, const void *Q, const void *K, const void *V, const void *O,
                             const float *lse);

/* ---- convolution and pooling ----------------------------------------------------- */

/* 2-d convolution. NCHW: x (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q).
 * NHWC (channels_last): x (N, H, W, C), w (K, R, S, C/groups), y (N, P, Q, K).
 * P = (H + 2 pad_h - dil_h (R - 1) - 1) / stride_h + 1, likewise Q. bias (K) may be NULL. */
typedef struct cml_conv2d_desc {
    int64_t N, C, H, W, K, R, S;
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
    bool channels_last;
    cml_dtype dtype;
} cml_conv2d_desc;

/* Validates the descriptor and gives the output size. */
cml_status cml_conv2d_output_size(const cml_conv2d_desc *desc, int64_t *P, int64_t *Q);
cml_status cml_conv2d_fwd(cml_ctx *ctx, const cml_conv2d_desc *desc, void *y, const void *x, const void *w,
                          const void *bias);
/* dx from dy and w (overwritten). */
cml_status cml_conv2d_bwd_data(cml_ctx *ctx, const cml_conv2d_desc *desc, void *dx, const void *dy,
                               const void *w);
/* dw (and dbias, may be NULL) from dy and x (overwritten, deterministic). */
cml_status cml_conv2d_bwd_filter(cml_ctx *ctx, const cml_conv2d_desc *desc, void *dw, void *dbias,
                                 const void *dy, const void *x);

typedef enum cml_pool_mode { CML_POOL_MAX = 0, CML_POOL_AVG } cml_pool_mode;

/* 2-d pooling with the same layouts as convolution (K = C). AVG divides by the
 * window size including padding (PyTorch's count_include_pad = true); MAX ignores
 * padding and writes the flat input index (h * W + w) of each maximum into
 * indices (i64, y's shape; ignored for AVG, may be NULL when no backward follows). */
typedef struct cml_pool2d_desc {
    int64_t N, C, H, W, R, S;
    int64_t stride_h, stride_w, pad_h, pad_w;
    cml_pool_mode mode;
    bool channels_last;
    cml_dtype dtype;
} cml_pool2d_desc;

cml_status cml_pool2d_output_size(const cml_pool2d_desc *desc, int64_t *P, int64_t *Q);
cml_status cml_pool2d_fwd(cml_ctx *ctx, const cml_pool2d_desc *desc, void *y, int64_t *indices, const void *x);
/* dx (overwritten) from dy (and the forward's indices for MAX). */
cml_status cml_pool2d_bwd(cml_ctx *ctx, const cml_pool2d_desc *desc, void *dx, const void *dy,
                          const int64_t *indices);

#ifdef __cplusplus
}
#endif
#endif
