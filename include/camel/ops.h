/* Differentiable tensor ops. NumPy broadcasting rules for every binary op.
 *
 * Each returns a new tensor (owned by the caller) or NULL with the error set.
 * Floating-point dtypes compute in f32; the result has the inputs' dtype
 * (binary ops need equal dtypes). Ops record a backward node when grad mode is
 * on and an input requires grad.
 */
#ifndef CAMEL_OPS_H
#define CAMEL_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise -------------------------------------------------------------- */

cml_tensor *cml_add(const cml_tensor *a, const cml_tensor *b);
cml_tensor *cml_sub(const cml_tensor *a, const cml_tensor *b);
cml_tensor *cml_mul(const cml_tensor *a, const cml_tensor *b);
cml_tensor *cml_div(const cml_tensor *a, const cml_tensor *b);
cml_tensor *cml_pow(const cml_tensor *a, const cml_tensor *b);   /* a > 0 where b is not an integer */
cml_tensor *cml_maximum(const cml_tensor *a, const cml_tensor *b);
cml_tensor *cml_minimum(const cml_tensor *a, const cml_tensor *b);

cml_tensor *cml_add_scalar(const cml_tensor *a, double s);
cml_tensor *cml_mul_scalar(const cml_tensor *a, double s);
cml_tensor *cml_pow_scalar(const cml_tensor *a, double p);

cml_tensor *cml_neg(const cml_tensor *x);
cml_tensor *cml_exp(const cml_tensor *x);
cml_tensor *cml_log(const cml_tensor *x);
cml_tensor *cml_sqrt(const cml_tensor *x);
cml_tensor *cml_abs(const cml_tensor *x);
cml_tensor *cml_tanh(const cml_tensor *x);
cml_tensor *cml_sigmoid(const cml_tensor *x);
cml_tensor *cml_relu(const cml_tensor *x);
typedef enum cml_gelu_approx { CML_GELU_ERF = 0, CML_GELU_TANH = 1 } cml_gelu_approx;
cml_tensor *cml_gelu(const cml_tensor *x, cml_gelu_approx approx);

/* ---- reductions --------------------------------------------------------------- */

/* Reduce over the axes listed in dims (n_dims of them; negative counts from the
 * end; n_dims == 0 reduces over all axes, and dims may then be NULL). keepdim keeps the
 * reduced axes with size 1. max/min pass the gradient to the first extremum. */
cml_tensor *cml_sum(const cml_tensor *x, const int *dims, int n_dims, bool keepdim);
cml_tensor *cml_mean(const cml_tensor *x, const int *dims, int n_dims, bool keepdim);
cml_tensor *cml_max(const cml_tensor *x, const int *dims, int n_dims, bool keepdim);
cml_tensor *cml_min(const cml_tensor *x, const int *dims, int n_dims, bool keepdim);
/* correction = 1 gives the unbiased estimate, 0 the population variance. */
cml_tensor *cml_var(const cml_tensor *x, const int *dims, int n_dims, int correction, bool keepdim);
/* Index (i64) of the first maximum along one axis; not differentiable. */
cml_tensor *cml_argmax(const cml_tensor *x, int dim, bool keepdim);

/* ---- linear algebra ------------------------------------------------------------- */

/* torch.matmul semantics: 1-d x 1-d is a dot product, 1-d operands are
 * promoted and the added dim removed, leading (batch) dims broadcast. */
cml_tensor *cml_matmul(const cml_tensor *a, const cml_tensor *b);

/* y = x weight^T + bias: x (..., in), weight (out, in), bias (out) or NULL ->
 * (..., out), one dtype. One GEMM with the bias added in its epilogue; the
 * backward gets the weight and bias gradients from one GEMM (dbias). */
cml_tensor *cml_linear(const cml_tensor *x, const cml_tensor *weight, const cml_tensor *bias);

/* ---- softmax and losses ----------------------------------------------------------- */

cml_tensor *cml_softmax(const cml_tensor *x, int dim);
cml_tensor *cml_log_softmax(const cml_tensor *x, int dim);

typedef enum cml_reduction { CML_REDUCTION_MEAN = 0, CML_REDUCTION_SUM, CML_REDUCTION_NONE } cml_reduction;

/* logits (N, C) and targets (N) of class indices (i64 or i32). Mean divides by
 * the number of targets that are not ignore_index. Returns a 0-d tensor (or
 * (N) for CML_REDUCTION_NONE). */
cml_tensor *cml_cross_entropy(const cml_tensor *logits, const cml_tensor *targets,
                              int64_t ignore_index, cml_reduction reduction);

/* ---- joining, indexing, selection -------------------------------------------- */

cml_tensor *cml_concat(cml_tensor *const *ts, int n, int dim);
/* Picks entries of x along dim by a 1-d integer index tensor. */
cml_tensor *cml_index_select(const cml_tensor *x, int dim, const cml_tensor *index);
/* torch.gather: index has x's ndim; out[i][j] = x[i][index[i][j]] along dim. */
cml_tensor *cml_gather(const cml_tensor *x, int dim, const cml_tensor *index);
/* cond ? a : b with broadcasting; cond is u8 (or any dtype, nonzero = true). */
cml_tensor *cml_where(const cml_tensor *cond, const cml_tensor *a, const cml_tensor *b);
/* x with value where mask is nonzero (broadcasting mask to x). */
cml_tensor *cml_masked_fill(const cml_tensor *x, const cml_tensor *mask, double value);

/* ---- comparisons (not differentiable; u8 results) -------------------------------- */

cml_tensor *cml_eq(const cml_tensor *a, const cml_tensor *b);
cml_tensor *cml_gt(const cml_tensor *a, const cml_tensor *b);

/* ---- regularisation ----------------------------------------------------------------- */

/* Inverted dropout: zeroes elements with probability p (mask drawn from rng)
 * and scales the rest by 1/(1-p). Identity when training is false or p == 0. */
cml_tensor *cml_dropout(const cml_tensor *x, float p, bool training, cml_rng *rng);

/* ---- layers' functional forms ------------------------------------------------------ */

/* LayerNorm over the last dim; gamma and beta (C) may be NULL. */
cml_tensor *cml_layer_norm(const cml_tensor *x, const cml_tensor *gamma, const cml_tensor *beta, float eps);

/* RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * gamma; gamma (C) may be NULL. */
cml_tensor *cml_rms_norm(const cml_tensor *x, const cml_tensor *gamma, float eps);

/* Embedding lookup: weight (V, C), indices (any shape, i64/i32) -> (..., C). The
 * backward sums rows in index order (deterministic). */
cml_tensor *cml_embedding(const cml_tensor *weight, const cml_tensor *indices);

/* Scaled dot-product attention: q (B, S_q, H_q, D), k and v (B, S_kv, H_kv, D), any
 * strides with a contiguous last dim; H_q a multiple of H_kv. Returns (B, S_q, H_q, D).
 * causal as in cml_attention_desc. Memory is linear in S (no S x S tensor is kept). */
cml_tensor *cml_attention(const cml_tensor *q, const cml_tensor *k, const cml_tensor *v, bool causal, float scale);

typedef struct cml_conv2d_params {
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups; /* 0 means the default (1, 1, 0, 0, 1, 1, 1) */
    bool channels_last; /* NHWC input and (K, R, S, C/groups) weights */
} cml_conv2d_params;

/* x (N, C, H, W) (or NHWC), w (K, C/groups, R, S) (or (K, R, S, C/groups)), bias (K) or NULL. */
cml_tensor *cml_conv2d(const cml_tensor *x, const cml_tensor *w, const cml_tensor *bias, cml_conv2d_params p);

/* Pooling over (R, S) windows; stride 0 means stride = window. */
cml_tensor *cml_max_pool2d(const cml_tensor *x, int64_t R, int64_t S, int64_t stride_h, int64_t stride_w,
                           int64_t pad_h, int64_t pad_w, bool channels_last);
cml_tensor *cml_avg_pool2d(const cml_tensor *x, int64_t R, int64_t S, int64_t stride_h, int64_t stride_w,
                           int64_t pad_h, int64_t pad_w, bool channels_last);

/* BatchNorm over (N, C, H, W) (or NHWC): batch statistics when training (running
 * stats, f32 (C), updated in place when not NULL), running statistics otherwise.
 * gamma and beta (C, f32) may be NULL. */
cml_tensor *cml_batch_norm2d(const cml_tensor *x, const cml_tensor *gamma, const cml_tensor *beta,
                             cml_tensor *running_mean, cml_tensor *running_var, bool training, float momentum,
                             float eps, bool channels_last);

#ifdef __cplusplus
}
#endif
#endif
