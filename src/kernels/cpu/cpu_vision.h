/* Internal: the CPU implementations of the vision kernels (convolution,
 * pooling, batch normalization) behind camel/kernels.h.
 *
 * Like cpu_kernels.h, each takes the public function's arguments already
 * validated by src/kernels/{conv,pool,batchnorm}.c, plus the output size the
 * validation computed. Narrow float dtypes are converted to f32 through the
 * context's workspace; the math is f32 with statistics in double. */
#ifndef CML_KERNELS_CPU_CPU_VISION_H
#define CML_KERNELS_CPU_CPU_VISION_H

#include <stddef.h>

#include "camel/kernels.h"
#include "runtime/error.h"

/* ---- scratch carved from the context's workspace ----
 * A kernel runs its buffer layout twice: first with base == NULL to measure
 * (cml__carve_take returns NULL and only counts), then, after
 * cml__carve_begin fetched a workspace of that size, to hand out pointers. */
typedef struct cml__carve {
    char *base;
    size_t used;
} cml__carve;

static inline void *cml__carve_take(cml__carve *c, int64_t n, size_t es) {
    void *p = c->base ? c->base + c->used : NULL;
    c->used += ((size_t)n * es + 63) & ~(size_t)63;
    return p;
}

static inline cml_status cml__carve_begin(cml_ctx *ctx, cml__carve *c) {
    CML_TRY(cml_ctx_workspace(ctx, (void **)&c->base, c->used ? c->used : 1));
    c->used = 0;
    return CML_OK;
}

/* An f32 view of n elements of buf: buf itself when dt is f32, else carved
 * scratch, filled with buf converted to f32 when `load` (and buf not NULL). */
static inline float *cml__carve_f32(cml__carve *c, const void *buf, int64_t n, cml_dtype dt, bool load) {
    if (dt == CML_F32) return (float *)buf;
    float *p = (float *)cml__carve_take(c, n, sizeof(float));
    if (p && load && buf) cml_dtype_convert(p, CML_F32, buf, dt, n);
    return p;
}

/* ---- conv.c: im2col + cml_gemm ---- */
cml_status cml__conv2d_fwd_cpu(cml_ctx *ctx, const cml_conv2d_desc *d, int64_t P, int64_t Q, void *y,
                               const void *x, const void *w, const void *bias);
cml_status cml__conv2d_bwd_data_cpu(cml_ctx *ctx, const cml_conv2d_desc *d, int64_t P, int64_t Q, void *dx,
                                    const void *dy, const void *w);
cml_status cml__conv2d_bwd_filter_cpu(cml_ctx *ctx, const cml_conv2d_desc *d, int64_t P, int64_t Q, void *dw,
                                      void *dbias, const void *dy, const void *x);

/* ---- pool.c ---- */
cml_status cml__pool2d_fwd_cpu(cml_ctx *ctx, const cml_pool2d_desc *d, int64_t P, int64_t Q, void *y,
                               int64_t *indices, const void *x);
cml_status cml__pool2d_bwd_cpu(cml_ctx *ctx, const cml_pool2d_desc *d, int64_t P, int64_t Q, void *dx,
                               const void *dy, const int64_t *indices);

/* ---- batchnorm.c ---- */
cml_status cml__batchnorm_fwd_cpu(cml_ctx *ctx, void *y, float *save_mean, float *save_rstd, float *running_mean,
                                  float *running_var, const void *x, const float *gamma, const float *beta,
                                  int64_t N, int64_t C, int64_t HW, bool channels_last, bool training,
                                  float momentum, float eps, cml_dtype dtype);
cml_status cml__batchnorm_bwd_cpu(cml_ctx *ctx, void *dx, float *dgamma, float *dbeta, const void *dy,
                                  const void *x, const float *gamma, const float *save_mean,
                                  const float *save_rstd, int64_t N, int64_t C, int64_t HW, bool channels_last,
                                  cml_dtype dtype);

#endif
