/* Internal: the CPU implementations behind the public kernels of camel/kernels.h.
 *
 * Each takes exactly the public function's arguments, already validated by
 * the public entry point in src/kernels/<family>.c (non-NULL pointers, valid
 * dtypes and enums, consistent shapes), so these functions only compute. The
 * ones that can still fail on data (cross-entropy targets, gather/index
 * values, gemm workspace) return a cml_status. */
#ifndef CML_KERNELS_CPU_CPU_KERNELS_H
#define CML_KERNELS_CPU_CPU_KERNELS_H

#include "camel/kernels.h"

/* ---- ewise.c / ewise_copy.c ---- */
cml_status cml__unary_cpu(cml_ctx *ctx, cml_unary_op op, float param,
                          void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                          const void *x, const cml_layout *x_layout, cml_dtype x_dtype);
cml_status cml__unary_bwd_cpu(cml_ctx *ctx, cml_unary_op op, float param,
                              void *dx, const void *dy, const void *x, const void *y,
                              int64_t n, cml_dtype dtype);
cml_status cml__binary_cpu(cml_ctx *ctx, cml_binary_op op,
                           void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                           const void *a, const cml_layout *a_layout, cml_dtype a_dtype,
                           const void *b, const cml_layout *b_layout, cml_dtype b_dtype);
cml_status cml__where_fwd_cpu(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype,
                              const uint8_t *cond, const cml_layout *cond_layout,
                              const void *a, const cml_layout *a_layout,
                              const void *b, const cml_layout *b_layout);
cml_status cml__copy_cpu(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype y_dtype,
                         const void *x, const cml_layout *x_layout, cml_dtype x_dtype);
cml_status cml__fill_cpu(cml_ctx *ctx, void *y, const cml_layout *y_layout, cml_dtype dtype, double value);

/* ---- convert.c ---- */
cml_status cml__convert_scaled_cpu(cml_ctx *ctx, void *y, cml_dtype y_dtype, const void *x, cml_dtype x_dtype,
                                   int64_t n, const float *scale, float *amax);

/* ---- reduce.c ---- */
cml_status cml__reduce_cpu(cml_ctx *ctx, cml_reduce_op op, void *y, cml_dtype y_dtype,
                           const void *x, cml_dtype x_dtype,
                           int64_t outer, int64_t n, int64_t inner, int correction);

/* ---- softmax.c / cross_entropy.c ---- */
cml_status cml__softmax_fwd_cpu(cml_ctx *ctx, void *y, const void *x, int64_t outer, int64_t n,
                                int64_t inner, cml_dtype dtype, bool log);
cml_status cml__softmax_bwd_cpu(cml_ctx *ctx, void *dx, const void *dy, const void *y, int64_t outer,
                                int64_t n, int64_t inner, cml_dtype dtype, bool log);
cml_status cml__cross_entropy_fwd_cpu(cml_ctx *ctx, float *loss, float *lse, const void *logits,
                                      const int64_t *targets, int64_t rows, int64_t classes,
                                      cml_dtype dtype, int64_t ignore_index);
cml_status cml__cross_entropy_bwd_cpu(cml_ctx *ctx, void *dlogits, const float *dloss,
                                      const void *logits, const float *lse, const int64_t *targets,
                                      int64_t rows, int64_t classes, cml_dtype dtype, int64_t ignore_index);

/* ---- index.c ---- */
cml_status cml__index_select_fwd_cpu(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                                     int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                     cml_dtype dtype);
cml_status cml__index_select_bwd_cpu(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                                     int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                                     cml_dtype dtype);
cml_status cml__gather_fwd_cpu(cml_ctx *ctx, void *y, const void *x, const int64_t *idx,
                               int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner, cml_dtype dtype);
cml_status cml__gather_bwd_cpu(cml_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                               int64_t outer, int64_t n_src, int64_t n_idx, int64_t inner,
                               cml_dtype dtype);

/* ---- gemm.c ---- */
cml_status cml__gemm_cpu(cml_ctx *ctx, const cml_gemm_desc *desc, void *D, const void *A,
                         const void *B, const void *C);
/* Bytes of ctx workspace cml__gemm_cpu takes for desc (0 for f32 operands with no
 * bias, vector scales, DGELU or tf32 rounding: callers such as conv rely on that). */
size_t cml__gemm_cpu_workspace_size(const cml_gemm_desc *desc);

/* ---- dropout.c ---- */
cml_status cml__dropout_fwd_cpu(cml_ctx *ctx, void *y, uint8_t *mask, const void *x, int64_t n,
                                cml_dtype dtype, float p, uint64_t seed, uint64_t offset);

/* ---- optim.c ---- */
cml_status cml__sgd_update_cpu(cml_ctx *ctx, float *param, const float *grad, float *momentum_buf,
                               int64_t n, float lr, float momentum, bool nesterov,
                               float weight_decay, bool first_step);
cml_status cml__adam_update_cpu(cml_ctx *ctx, float *param, const float *grad, float *m, float *v,
                                int64_t n, float lr, float beta1, float beta2, float eps,
                                float weight_decay, bool decoupled, int64_t step);

#endif
