/* The device side of cml_param_list: its table (slices, then chunks) uploaded
 * from pinned staging in stream order, and the deterministic global gradient
 * norm in two launches (no atomics, no host synchronization).
 *
 * Uploads: the staging buffer is rewritten only after the previous upload's
 * event has completed (in a steady state it long has: the wait costs nothing),
 * and old device buffers are freed in stream order, so that work queued with
 * the old table still reads it.
 *
 * The norm follows the fixed order of kernels/optim_multi.h: norm_partials_kernel
 * (one block of CML__NORM_LANES threads per chunk) writes each chunk's sum of
 * squares, norm_total_kernel (one block) sums the partials and writes the norm
 * and the clip coefficient. Per chunk that is CML_PARAM_CHUNK floats read and
 * one double written, so the first pass runs at the bandwidth of reading the
 * grads. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/optim_multi.h"

#define LANES CML__NORM_LANES

static size_t round_up16(size_t x) { return (x + 15) & ~(size_t)15; }

static cml_status dev_alloc(cml_param_list *l, void **p, size_t bytes) {
    const cml_allocator *a = l->ctx->alloc;
    return a->alloc(a->state, p, bytes, l->ctx->stream);
}

static void dev_free(cml_param_list *l, void *p, size_t bytes) {
    const cml_allocator *a = l->ctx->alloc;
    if (p) a->free(a->state, p, bytes, l->ctx->stream);
}

static __global__ void result_init_kernel(cml__norm_result *r) {
    cml__pdl_entry();
    r->norm = __longlong_as_double(0x7ff8000000000000ll); /* NaN: no norm yet */
    r->coef = 1.0f;
}

extern "C" cml_status cml__param_list_init_cuda(cml_param_list *list) {
    CML_TRY(cml__cuda_activate(list->ctx));
    void *p = NULL;
    CML_TRY(dev_alloc(list, &p, sizeof(cml__norm_result)));
    list->result = (cml__norm_result *)p;
    cml__launch(result_init_kernel, 1, 1, 0, cml__stream(list->ctx), list->result);
    return cml__cuda_check_launch("cml_param_list_create", "result_init_kernel", "f64", 1, 1, 1);
}

extern "C" cml_status cml__param_list_upload_cuda(cml_param_list *list) {
    static const char fn[] = "cml_param_list_set";
    if (list->nchunks == 0) return CML_OK; /* nothing will be launched over this list */
    CML_TRY(cml__cuda_activate(list->ctx));
    cudaStream_t st = cml__stream(list->ctx);
    const size_t chunks_at = round_up16((size_t)list->count * sizeof(cml_param_slice));
    const size_t bytes = chunks_at + (size_t)list->nchunks * sizeof(cml__chunk);
    /* the last upload must have left the staging buffer before it is rewritten or freed */
    if (list->upload_done) CML_CUDA_TRY(fn, cudaEventSynchronize((cudaEvent_t)list->upload_done));
    else {
        cudaEvent_t ev;
        CML_CUDA_TRY(fn, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        list->upload_done = ev;
    }
    if (bytes > list->table_bytes) {
        const size_t cap = bytes > 2 * list->table_bytes ? bytes : 2 * list->table_bytes;
        dev_free(list, list->table, list->table_bytes);
        list->table = NULL;
        list->table_bytes = 0;
        if (list->staging) CML_CUDA_TRY(fn, cudaFreeHost(list->staging));
        list->staging = NULL;
        CML_CUDA_TRY(fn, cudaHostAlloc(&list->staging, cap, cudaHostAllocDefault));
        CML_TRY(dev_alloc(list, &list->table, cap));
        list->table_bytes = cap;
    }
    if (list->nchunks > list->partials_cap) {
        dev_free(list, list->partials, (size_t)list->partials_cap * sizeof(double));
        list->partials = NULL;
        list->partials_cap = 0;
        void *p = NULL;
        CML_TRY(dev_alloc(list, &p, (size_t)list->nchunks * sizeof(double)));
        list->partials = (double *)p;
        list->partials_cap = list->nchunks;
    }
    memcpy(list->staging, list->slices, (size_t)list->count * sizeof(cml_param_slice));
    memcpy((char *)list->staging + chunks_at, list->chunks, (size_t)list->nchunks * sizeof(cml__chunk));
    list->table_chunks = chunks_at;
    CML_CUDA_TRY(fn, cudaMemcpyAsync(list->table, list->staging, bytes, cudaMemcpyHostToDevice, st));
    CML_CUDA_TRY(fn, cudaEventRecord((cudaEvent_t)list->upload_done, st));
    return CML_OK;
}

extern "C" void cml__param_list_free_cuda(cml_param_list *list) {
    if (cml__cuda_activate(list->ctx) != CML_OK) return;
    if (list->upload_done) {
        (void)cudaEventSynchronize((cudaEvent_t)list->upload_done);
        (void)cudaEventDestroy((cudaEvent_t)list->upload_done);
    }
    if (list->staging) (void)cudaFreeHost(list->staging);
    dev_free(list, list->table, list->table_bytes);
    dev_free(list, list->partials, (size_t)list->partials_cap * sizeof(double));
    dev_free(list, list->result, sizeof(cml__norm_result));
    (void)cudaGetLastError(); /* errors while freeing are not reported */
}

/* ---- the norm --------------------------------------------------------------------------- */

static __device__ __forceinline__ double sq(float x) {
    const double d = (double)x;
    return d * d; /* exact: a fused multiply-add gives the same sum */
}

/* Lane 0 of the block gets the tree of kernels/optim_multi.h (cml__lane_tree) over acc. */
static __device__ __forceinline__ double block_tree(double acc) {
    __shared__ double warp_sums[LANES / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    double w = 0.0;
    if (warp == 0) {
        w = lane < LANES / 32 ? warp_sums[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) w += __shfl_down_sync(0xffffffffu, w, off);
    }
    return w;
}

static __global__ void __launch_bounds__(LANES) norm_partials_kernel(const cml_param_slice *slices,
                                                                     const cml__chunk *chunks, double *partials) {
    cml__pdl_entry();
    const cml__chunk ch = chunks[blockIdx.x];
    const cml_param_slice *s = &slices[ch.slice];
    const long long lo = (long long)ch.index * CML_PARAM_CHUNK;
    const long long len = s->n - lo < CML_PARAM_CHUNK ? s->n - lo : CML_PARAM_CHUNK;
    const float *g = s->grad + lo;
    const int t = threadIdx.x;
    double acc = 0.0;
    if (((uintptr_t)g & 15) == 0) {
        const float4 *g4 = (const float4 *)g;
        const int nvec = (int)(len / 4);
#pragma unroll 4
        for (int k = t; k < nvec; k += LANES) {
            const float4 x = __ldcs(&g4[k]);
            acc += sq(x.x);
            acc += sq(x.y);
            acc += sq(x.z);
            acc += sq(x.w);
        }
        /* the last, partial vector belongs to lane nvec % LANES, after its full ones */
        if (t == nvec % LANES)
            for (long long e = 4ll * nvec; e < len; e++) acc += sq(g[e]);
    } else {
        for (long long k = t; 4 * k < len; k += LANES)
            for (long long e = 4 * k; e < 4 * k + 4 && e < len; e++) acc += sq(g[e]);
    }
    const double total = block_tree(acc);
    if (t == 0) partials[blockIdx.x] = total;
}

static __global__ void __launch_bounds__(LANES) norm_total_kernel(const double *partials, long long n,
                                                                  double max_norm, cml__norm_result *r) {
    cml__pdl_entry();
    double acc = 0.0;
    for (long long j = threadIdx.x; j < n; j += LANES) acc += partials[j];
    const double total = block_tree(acc);
    if (threadIdx.x == 0) {
        const double norm = sqrt(total);
        const double coef = max_norm / (norm + 1e-6);
        r->norm = norm;
        r->coef = isfinite(norm) && coef < 1.0 ? __double2float_rn(coef) : 1.0f;
    }
}

extern "C" cml_status cml__param_list_grad_norm_cuda(cml_param_list *list, double max_norm) {
    static const char fn[] = "cml_param_list_grad_norm";
    CML_TRY(cml__cuda_activate(list->ctx));
    cudaStream_t st = cml__stream(list->ctx);
    if (list->nchunks > 0) {
        const cml_param_slice *slices = (const cml_param_slice *)list->table;
        const cml__chunk *chunks = (const cml__chunk *)((const char *)list->table + list->table_chunks);
        cml__launch(norm_partials_kernel, (unsigned)list->nchunks, LANES, 0, st, slices, chunks, list->partials);
        CML_TRY(cml__cuda_check_launch(fn, "norm_partials_kernel", "f32", list->nchunks * (long long)CML_PARAM_CHUNK,
                                       (unsigned)list->nchunks, LANES));
    }
    cml__launch(norm_total_kernel, 1, LANES, 0, st, list->partials, list->nchunks, max_norm, list->result);
    return cml__cuda_check_launch(fn, "norm_total_kernel", "f64", list->nchunks, 1, LANES);
}

extern "C" cml_status cml__param_list_read_norm_cuda(const cml_param_list *list, double *norm) {
    return cml__cuda_memcpy(list->ctx, norm, &list->result->norm, sizeof(double), true, "cml_param_list_read_norm");
}
