/* Multi-tensor SGD and Adam/AdamW: every slice of a cml_param_list updated in
 * one launch, one block per chunk of CML_PARAM_CHUNK elements (the chunk
 * table is resident on the device, uploaded by cml_param_list_set).
 *
 * A block reads its chunk's slice from the table, then streams the chunk with
 * 16-byte accesses when every buffer of the slice is 16-byte aligned (scalar
 * accesses otherwise), UNROLL vectors of each buffer loaded before any is
 * used so that enough bytes are in flight. The arithmetic is optim_math.cuh's,
 * the same as the single-tensor kernels' and the CPU's, element by element, so
 * the results are the CPU's bits whatever the chunking. The clip coefficient
 * is read from device memory (written there by cml_param_list_grad_norm), so
 * clipping needs no host round trip. */
#include <math.h>

#include "kernels/cuda/common/check.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/optim/optim_math.cuh"
#include "kernels/optim_multi.h"

#define THREADS 256
/* Vectors of each buffer in flight per thread (compile-time knob for tuning: 4 uses 122
 * registers for Adam, 2 blocks of 256 threads per SM, 256 bytes in flight per thread). */
#ifndef CML_OPTIM_MULTI_UNROLL
#define CML_OPTIM_MULTI_UNROLL 4
#endif
#define UNROLL CML_OPTIM_MULTI_UNROLL

enum { ALG_SGD = 0, ALG_SGD_MOMENTUM = 1, ALG_ADAM = 2 };

typedef struct multi_params {
    const cml_param_slice *slices;
    const cml__chunk *chunks;
    const float *clip_coef; /* NULL: no clipping */
    cml__sgd_consts sgd;
    cml__adam_consts adam;
} multi_params;

/* One element of algorithm ALG; g is the (clipped) grad. */
template <int ALG>
static __device__ __forceinline__ void update_elem(const multi_params &P, float &p, float g, float &m, float &v) {
    if (ALG == ALG_ADAM) p = cml__adam_elem(P.adam, p, g, m, v);
    else p = cml__sgd_elem(P.sgd, p, g, m);
}

template <int ALG>
static __device__ __forceinline__ void update_vec(const multi_params &P, float4 &p, float4 g, float4 &m, float4 &v,
                                                  bool clip, float c) {
    if (clip) {
        g.x = __fmul_rn(g.x, c);
        g.y = __fmul_rn(g.y, c);
        g.z = __fmul_rn(g.z, c);
        g.w = __fmul_rn(g.w, c);
    }
    update_elem<ALG>(P, p.x, g.x, m.x, v.x);
    update_elem<ALG>(P, p.y, g.y, m.y, v.y);
    update_elem<ALG>(P, p.z, g.z, m.z, v.z);
    update_elem<ALG>(P, p.w, g.w, m.w, v.w);
}

template <int ALG>
static __global__ void __launch_bounds__(THREADS) update_multi_kernel(const __grid_constant__ multi_params P) {
    cml__pdl_entry();
    const bool use_m = ALG != ALG_SGD, use_v = ALG == ALG_ADAM;
    const cml__chunk ch = P.chunks[blockIdx.x];
    const cml_param_slice s = P.slices[ch.slice];
    const long long lo = (long long)ch.index * CML_PARAM_CHUNK;
    const int len = (int)(s.n - lo < CML_PARAM_CHUNK ? s.n - lo : CML_PARAM_CHUNK);
    float *p = s.param + lo, *m = use_m ? s.m + lo : NULL, *v = use_v ? s.v + lo : NULL;
    const float *g = s.grad + lo;
    const bool clip = P.clip_coef != NULL;
    const float c = clip ? *P.clip_coef : 1.0f;
    const int t = threadIdx.x;
    const uintptr_t addr_bits = (uintptr_t)p | (uintptr_t)g | (use_m ? (uintptr_t)m : 0) | (use_v ? (uintptr_t)v : 0);
    int done = 0; /* elements handled by the vector loop */
    if ((addr_bits & 15) == 0) {
        float4 *p4 = (float4 *)p, *m4 = (float4 *)m, *v4 = (float4 *)v;
        const float4 *g4 = (const float4 *)g;
        const int nvec = len / 4;
        for (int base = t; base < nvec; base += THREADS * UNROLL) {
            float4 rp[UNROLL], rg[UNROLL], rm[UNROLL], rv[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int k = base + u * THREADS;
                if (k < nvec) {
                    rp[u] = p4[k];
                    rg[u] = __ldcs(&g4[k]);
                    if (use_m) rm[u] = m4[k];
                    if (use_v) rv[u] = v4[k];
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int k = base + u * THREADS;
                if (k < nvec) {
                    update_vec<ALG>(P, rp[u], rg[u], rm[u], rv[u], clip, c);
                    p4[k] = rp[u];
                    if (use_m) m4[k] = rm[u];
                    if (use_v) v4[k] = rv[u];
                }
            }
        }
        done = 4 * nvec;
    }
    for (int e = done + t; e < len; e += THREADS) {
        float pe = p[e], me = use_m ? m[e] : 0.0f, ve = use_v ? v[e] : 0.0f;
        update_elem<ALG>(P, pe, clip ? __fmul_rn(g[e], c) : g[e], me, ve);
        p[e] = pe;
        if (use_m) m[e] = me;
        if (use_v) v[e] = ve;
    }
}

static cml_status multi_launch(const char *fn, const cml_param_list *list, int alg, multi_params P) {
    CML_TRY(cml__cuda_activate(list->ctx));
    P.slices = (const cml_param_slice *)list->table;
    P.chunks = (const cml__chunk *)((const char *)list->table + list->table_chunks);
    const unsigned grid = (unsigned)list->nchunks;
    cudaStream_t st = cml__stream(list->ctx);
    const char *name = "update_multi_kernel<ALG_ADAM>";
    switch (alg) {
    case ALG_SGD:
        name = "update_multi_kernel<ALG_SGD>";
        cml__launch(update_multi_kernel<ALG_SGD>, grid, THREADS, 0, st, P);
        break;
    case ALG_SGD_MOMENTUM:
        name = "update_multi_kernel<ALG_SGD_MOMENTUM>";
        cml__launch(update_multi_kernel<ALG_SGD_MOMENTUM>, grid, THREADS, 0, st, P);
        break;
    default: cml__launch(update_multi_kernel<ALG_ADAM>, grid, THREADS, 0, st, P); break;
    }
    return cml__cuda_check_launch(fn, name, "f32", list->nchunks * (long long)CML_PARAM_CHUNK, grid, THREADS);
}

extern "C" cml_status cml__sgd_update_multi_cuda(const cml_param_list *list, float lr, float momentum, bool nesterov,
                                                 float weight_decay, bool first_step, const float *clip_coef) {
    multi_params P;
    memset(&P, 0, sizeof P);
    P.clip_coef = clip_coef;
    P.sgd = cml__sgd_consts{lr, momentum, weight_decay, nesterov, first_step};
    return multi_launch("cml_sgd_update_multi", list, momentum != 0.0f ? ALG_SGD_MOMENTUM : ALG_SGD, P);
}

extern "C" cml_status cml__adam_update_multi_cuda(const cml_param_list *list, float lr, float beta1, float beta2,
                                                  float eps, float weight_decay, bool decoupled, int64_t step,
                                                  const float *clip_coef) {
    multi_params P;
    memset(&P, 0, sizeof P);
    P.clip_coef = clip_coef;
    P.adam = cml__adam_consts_of(lr, beta1, beta2, eps, weight_decay, decoupled, step);
    return multi_launch("cml_adam_update_multi", list, ALG_ADAM, P);
}
