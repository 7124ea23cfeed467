/* Internal: the multi-tensor optimizers' parameter list (struct cml_param_list)
 * and the backends behind cml_param_list_* / cml_*_update_multi.
 *
 * Work is cut into chunks: chunk k of a slice covers its elements
 * [k * CML_PARAM_CHUNK, min(n, (k + 1) * CML_PARAM_CHUNK)). The chunk table
 * lists them slice after slice; a CUDA block takes one chunk.
 *
 * The fixed order of the global gradient norm (the CPU computes exactly what a
 * CUDA block does, so both give the same bits):
 *  1. chunk partial: lane t (0 <= t < CML__NORM_LANES) adds, in float64, the
 *     squares of the chunk's elements 4 * (t + CML__NORM_LANES * k) + q for
 *     k = 0, 1, ... and q = 0..3 in that order (local element indices); then
 *     the lanes are combined by cml__lane_tree (below);
 *  2. total: lane t adds partials t, t + CML__NORM_LANES, ... in order, then
 *     the same tree; norm = sqrt(total) in float64.
 * A square of an f32 is exact in float64, so fused multiply-adds change nothing.
 * These are declared here rather than in cpu_kernels.h / cuda_kernels.h because
 * they share the list's layout. */
#ifndef CML_KERNELS_OPTIM_MULTI_H
#define CML_KERNELS_OPTIM_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "camel/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CML__NORM_LANES 256 /* threads of a CUDA norm block; lanes of the fixed order */

/* Chunk `index` of slice `slice`. */
typedef struct cml__chunk {
    int32_t slice;
    int32_t index;
} cml__chunk;

/* The last norm: float64 norm and the f32 clip coefficient. */
typedef struct cml__norm_result {
    double norm;
    float coef;
} cml__norm_result;

struct cml_param_list {
    cml_ctx *ctx;
    int count, slice_cap;
    cml_param_slice *slices; /* host copy */
    int64_t nchunks, chunk_cap;
    cml__chunk *chunks;      /* host copy */
    bool has_norm;           /* cml_param_list_grad_norm ran at least once */
    /* Where the backends read: the host copies on the CPU; on CUDA a device table
     * (slices, then chunks at table_chunks) and its pinned staging buffer. */
    void *table;
    size_t table_bytes;
    size_t table_chunks; /* byte offset of the chunks in table */
    void *staging;
    void *upload_done;   /* cudaEvent_t recorded after the last upload (NULL: none yet) */
    double *partials;    /* per-chunk sums of squares (device memory on CUDA) */
    int64_t partials_cap;
    cml__norm_result *result; /* device memory on CUDA */
};

/* The chunk count of n elements. */
static inline int64_t cml__chunks_of(int64_t n) { return (n + CML_PARAM_CHUNK - 1) / CML_PARAM_CHUNK; }

/* Combines lane values a[0..CML__NORM_LANES) in the CUDA blocks' order: inside each
 * warp of 32 lanes, shfl_down steps 16, 8, 4, 2, 1 (a[l] += a[l + off] for l < off),
 * then the warps' first lanes, padded with zeros to 32, the same way. Overwrites a. */
static inline double cml__lane_tree(double *a) {
    double w[32];
    for (int b = 0; b < CML__NORM_LANES; b += 32) {
        for (int off = 16; off > 0; off /= 2)
            for (int l = 0; l < off; l++) a[b + l] += a[b + l + off];
        w[b / 32] = a[b];
    }
    for (int l = CML__NORM_LANES / 32; l < 32; l++) w[l] = 0.0;
    for (int off = 16; off > 0; off /= 2)
        for (int l = 0; l < off; l++) w[l] += w[l + off];
    return w[0];
}

/* ---- optim.c (CPU) ---- */
cml_status cml__param_list_grad_norm_cpu(cml_param_list *list, double max_norm);
cml_status cml__sgd_update_multi_cpu(const cml_param_list *list, float lr, float momentum, bool nesterov,
                                     float weight_decay, bool first_step, const float *clip_coef);
cml_status cml__adam_update_multi_cpu(const cml_param_list *list, float lr, float beta1, float beta2, float eps,
                                      float weight_decay, bool decoupled, int64_t step, const float *clip_coef);

/* ---- cuda/optim/param_list.cu ---- */
/* Device buffers of a new list (result, set to norm NaN / coef 1). */
cml_status cml__param_list_init_cuda(cml_param_list *list);
/* Uploads the host copies into the device table (growing it), from pinned staging. */
cml_status cml__param_list_upload_cuda(cml_param_list *list);
void cml__param_list_free_cuda(cml_param_list *list);
cml_status cml__param_list_grad_norm_cuda(cml_param_list *list, double max_norm);
cml_status cml__param_list_read_norm_cuda(const cml_param_list *list, double *norm);

/* ---- cuda/optim/optim_multi.cu ---- */
cml_status cml__sgd_update_multi_cuda(const cml_param_list *list, float lr, float momentum, bool nesterov,
                                      float weight_decay, bool first_step, const float *clip_coef);
cml_status cml__adam_update_multi_cuda(const cml_param_list *list, float lr, float beta1, float beta2, float eps,
                                       float weight_decay, bool decoupled, int64_t step, const float *clip_coef);

#ifdef __cplusplus
}
#endif
#endif
