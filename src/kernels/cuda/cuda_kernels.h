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

#ifdef __cplusplus
}
#endif
#endif
