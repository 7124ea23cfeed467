/* Internal: the CPU implementations of the transformer kernels of
 * camel/kernels.h (layernorm, attention).
 *
 * Each takes exactly the public function's arguments, already validated by the
 * public entry point in src/kernels/<family>.c, so these functions only
 * compute (attention can still fail to get its workspace: CML_ERR_OOM). */
#ifndef CML_KERNELS_CPU_CPU_TRANSFORMER_H
#define CML_KERNELS_CPU_CPU_TRANSFORMER_H

#include "camel/kernels.h"

/* ---- layernorm.c ---- */
cml_status cml__layernorm_fwd_cpu(cml_ctx *ctx, void *y, float *mean, float *rstd, const void *x,
                                  const void *gamma, const void *beta, int64_t rows, int64_t C, float eps,
                                  cml_dtype dtype);
cml_status cml__layernorm_bwd_cpu(cml_ctx *ctx, void *dx, void *dgamma, void *dbeta, const void *dy,
                                  const void *x, const void *gamma, const float *mean, const float *rstd,
                                  int64_t rows, int64_t C, cml_dtype dtype);

/* ---- rmsnorm.c ---- */
cml_status cml__rmsnorm_fwd_cpu(cml_ctx *ctx, void *y, float *rstd, const void *x, const void *gamma, int64_t rows,
                                int64_t C, float eps, cml_dtype dtype);
cml_status cml__rmsnorm_bwd_cpu(cml_ctx *ctx, void *dx, void *dgamma, const void *dy, const void *x,
                                const void *gamma, const float *rstd, int64_t rows, int64_t C, cml_dtype dtype);

/* ---- attention.c ---- */
cml_status cml__attention_fwd_cpu(cml_ctx *ctx, const cml_attention_desc *desc, void *O, float *lse,
                                  const void *Q, const void *K, const void *V);
cml_status cml__attention_bwd_cpu(cml_ctx *ctx, const cml_attention_desc *desc, void *dQ, void *dK, void *dV,
                                  const void *dO, const void *Q, const void *K, const void *V, const void *O,
                                  const float *lse);

#endif
