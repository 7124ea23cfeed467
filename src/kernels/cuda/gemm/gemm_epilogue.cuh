/* The GEMM epilogue shared by every CUDA GEMM path (sm90, f32, simt): one
 * accumulator (or a pair of neighbouring columns) in, the finished element of
 * D out, with every option of cml_gemm_desc applied in one place so the paths
 * cannot drift apart:
 *
 *   z = alpha * sa * sb * acc  (+ beta * C[m,n] when beta != 0)  (+ bias)
 *   sa = a_scale[0] | a_scale[m] | 1,  sb = b_scale[0] | b_scale[n] | 1  (by scale mode)
 *   bias = bias[n] (CML_BIAS_PER_COLUMN) | bias[m] (CML_BIAS_PER_ROW), in d_dtype
 *   D = z | relu(z) | gelu(z) | gelu(z) with aux = z | z * gelu'(aux)   (by act)
 *
 * D, aux and bias are in d_dtype, C in c_dtype (f32, f16 or bf16; stores round
 * to nearest even, like the CPU). C is never read when beta == 0 (it may hold
 * NaN or be NULL then). Bias and scales are the same for every batch.
 *
 * Cost: the struct is meant to live in kernel parameter (constant) space, so
 * every branch on its fields is uniform across the warp; nothing is indexed
 * dynamically, so nothing goes to local memory. tanh is computed from one
 * __expf (absolute error ~1e-7, far inside the f32 test bound) instead of the
 * ~20-instruction tanhf, because GELU epilogues run once per accumulator. */
#ifndef CML_KERNELS_CUDA_GEMM_GEMM_EPILOGUE_CUH
#define CML_KERNELS_CUDA_GEMM_GEMM_EPILOGUE_CUH

#include <stdint.h>

#include "camel/kernels.h"
#include "kernels/cuda/common/dtype.cuh"

typedef struct cml__gemm_epi {
    float alpha, beta;
    int act; /* cml_epilogue */
    int bias_axis;
    int c_dtype, d_dtype; /* cml_dtype */
    int a_scale_mode, b_scale_mode;
    long long M, N;
    const void *C;
    long long ldc, stride_c;
    void *D;
    long long ldd, stride_d;
    const void *bias;
    const float *a_scale, *b_scale;
    void *aux;
    long long ldaux, stride_aux;
} cml__gemm_epi;

/* Host: the epilogue of a validated descriptor writing D (C as passed to cml_gemm). */
static inline cml__gemm_epi cml__gemm_epi_make(const cml_gemm_desc *d, void *D, const void *C) {
    cml__gemm_epi e;
    e.alpha = d->alpha;
    e.beta = d->beta;
    e.act = (int)d->epilogue;
    e.bias_axis = (int)d->bias_axis;
    e.c_dtype = (int)d->c_dtype;
    e.d_dtype = (int)d->d_dtype;
    e.a_scale_mode = (int)d->a_scale_mode;
    e.b_scale_mode = (int)d->b_scale_mode;
    e.M = d->M;
    e.N = d->N;
    e.C = d->beta != 0.0f ? C : NULL;
    e.ldc = d->ldc;
    e.stride_c = d->stride_c;
    e.D = D;
    e.ldd = d->ldd;
    e.stride_d = d->stride_d;
    e.bias = d->bias;
    e.a_scale = d->a_scale_mode != CML_SCALE_NONE ? d->a_scale : NULL;
    e.b_scale = d->b_scale_mode != CML_SCALE_NONE ? d->b_scale : NULL;
    bool uses_aux = d->epilogue == CML_EPILOGUE_GELU_TANH_AUX || d->epilogue == CML_EPILOGUE_DGELU_TANH;
    e.aux = uses_aux ? d->aux : NULL;
    e.ldaux = d->ldaux;
    e.stride_aux = d->stride_aux;
    return e;
}

#define CML__GELU_K0 0.7978845608028654f /* sqrt(2 / pi) */
#define CML__GELU_K1 0.044715f

/* tanh(x) = 1 - 2 / (1 + e^(2x)): e^(2x) -> inf gives 1, -> 0 gives -1. */
static __device__ __forceinline__ float cml__gemm_tanh(float x) {
    return 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * x));
}

static __device__ __forceinline__ float cml__gemm_gelu(float z) {
    float t = cml__gemm_tanh(CML__GELU_K0 * (z + CML__GELU_K1 * z * z * z));
    return 0.5f * z * (1.0f + t);
}

/* d/du of 0.5 u (1 + tanh(k0 (u + k1 u^3))). */
static __device__ __forceinline__ float cml__gemm_dgelu(float u) {
    float t = cml__gemm_tanh(CML__GELU_K0 * (u + CML__GELU_K1 * u * u * u));
    float dinner = CML__GELU_K0 * (1.0f + 3.0f * CML__GELU_K1 * u * u);
    return 0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * dinner;
}

/* Element i of an f32/f16/bf16 buffer (dt known only at run time, uniform). */
static __device__ __forceinline__ float cml__gemm_ld(const void *p, int dt, long long i) {
    if (dt == CML_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == CML_BF16 ? cml__bf16_to_f32(h) : cml__f16_to_f32(h);
}

static __device__ __forceinline__ void cml__gemm_st(void *p, int dt, long long i, float v) {
    if (dt == CML_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = dt == CML_BF16 ? cml__f32_to_bf16(v) : cml__f32_to_f16(v);
}

/* Elements i and i+1 with one 8-byte (f32) or 4-byte (16-bit) access when
 * p + i is aligned to twice the element size, else two scalar accesses. */
static __device__ __forceinline__ void cml__gemm_ld2(const void *p, int dt, long long i, float *v0, float *v1) {
    if (dt == CML_F32) {
        const float *q = (const float *)p + i;
        if (((uintptr_t)q & 7u) == 0) {
            float2 w = *(const float2 *)q;
            *v0 = w.x;
            *v1 = w.y;
        } else {
            *v0 = q[0];
            *v1 = q[1];
        }
        return;
    }
    const uint16_t *q = (const uint16_t *)p + i;
    uint16_t h0, h1;
    if (((uintptr_t)q & 3u) == 0) {
        uint32_t w = *(const uint32_t *)q;
        h0 = (uint16_t)(w & 0xFFFFu);
        h1 = (uint16_t)(w >> 16);
    } else {
        h0 = q[0];
        h1 = q[1];
    }
    *v0 = dt == CML_BF16 ? cml__bf16_to_f32(h0) : cml__f16_to_f32(h0);
    *v1 = dt == CML_BF16 ? cml__bf16_to_f32(h1) : cml__f16_to_f32(h1);
}

static __device__ __forceinline__ void cml__gemm_st2(void *p, int dt, long long i, float v0, float v1) {
    if (dt == CML_F32) {
        float *q = (float *)p + i;
        if (((uintptr_t)q & 7u) == 0) {
            *(float2 *)q = make_float2(v0, v1);
        } else {
            q[0] = v0;
            q[1] = v1;
        }
        return;
    }
    uint16_t h0 = dt == CML_BF16 ? cml__f32_to_bf16(v0) : cml__f32_to_f16(v0);
    uint16_t h1 = dt == CML_BF16 ? cml__f32_to_bf16(v1) : cml__f32_to_f16(v1);
    uint16_t *q = (uint16_t *)p + i;
    if (((uintptr_t)q & 3u) == 0) {
        *(uint32_t *)q = (uint32_t)h0 | ((uint32_t)h1 << 16);
    } else {
        q[0] = h0;
        q[1] = h1;
    }
}

/* z before the activation, for element (m, n) of batch `batch` (in range). */
static __device__ __forceinline__ float cml__gemm_epi_z(const cml__gemm_epi *e, long long batch, long long m,
                                                        long long n, float acc) {
    float s = e->alpha;
    if (e->a_scale_mode == CML_SCALE_TENSOR) s *= e->a_scale[0];
    else if (e->a_scale_mode == CML_SCALE_VECTOR) s *= e->a_scale[m];
    if (e->b_scale_mode == CML_SCALE_TENSOR) s *= e->b_scale[0];
    else if (e->b_scale_mode == CML_SCALE_VECTOR) s *= e->b_scale[n];
    float z = s * acc;
    if (e->beta != 0.0f) z += e->beta * cml__gemm_ld(e->C, e->c_dtype, batch * e->stride_c + m * e->ldc + n);
    if (e->bias) z += cml__gemm_ld(e->bias, e->d_dtype, e->bias_axis == CML_BIAS_PER_ROW ? m : n);
    return z;
}

/* The activation of z; u is the saved pre-activation (read only by DGELU). */
static __device__ __forceinline__ float cml__gemm_epi_act(int act, float z, float u) {
    if (act == CML_EPILOGUE_RELU) return (z > 0.0f || z != z) ? z : 0.0f; /* NaN passes, as on the CPU */
    if (act == CML_EPILOGUE_GELU_TANH || act == CML_EPILOGUE_GELU_TANH_AUX) return cml__gemm_gelu(z);
    if (act == CML_EPILOGUE_DGELU_TANH) return z * cml__gemm_dgelu(u);
    return z;
}

/* Finishes and stores D[batch][m][n] from its accumulator; nothing when (m, n) is outside M x N. */
static __device__ __forceinline__ void cml__gemm_epi_store(const cml__gemm_epi *e, long long batch, long long m,
                                                           long long n, float acc) {
    if (m >= e->M || n >= e->N) return;
    float z = cml__gemm_epi_z(e, batch, m, n, acc);
    long long ia = batch * e->stride_aux + m * e->ldaux + n;
    float u = 0.0f;
    if (e->act == CML_EPILOGUE_GELU_TANH_AUX) cml__gemm_st(e->aux, e->d_dtype, ia, z);
    else if (e->act == CML_EPILOGUE_DGELU_TANH) u = cml__gemm_ld(e->aux, e->d_dtype, ia);
    cml__gemm_st(e->D, e->d_dtype, batch * e->stride_d + m * e->ldd + n, cml__gemm_epi_act(e->act, z, u));
}

/* Columns n and n+1 of row m (n+1 may be >= N: then only column n). One vector
 * store of D (and one vector access of aux) when the pair is in range and
 * aligned; two scalar ones otherwise. */
static __device__ __forceinline__ void cml__gemm_epi_store2(const cml__gemm_epi *e, long long batch, long long m,
                                                            long long n, float acc0, float acc1) {
    if (m >= e->M || n >= e->N) return;
    if (n + 1 >= e->N) {
        cml__gemm_epi_store(e, batch, m, n, acc0);
        return;
    }
    float z0 = cml__gemm_epi_z(e, batch, m, n, acc0);
    float z1 = cml__gemm_epi_z(e, batch, m, n + 1, acc1);
    long long ia = batch * e->stride_aux + m * e->ldaux + n;
    float u0 = 0.0f, u1 = 0.0f;
    if (e->act == CML_EPILOGUE_GELU_TANH_AUX) cml__gemm_st2(e->aux, e->d_dtype, ia, z0, z1);
    else if (e->act == CML_EPILOGUE_DGELU_TANH) cml__gemm_ld2(e->aux, e->d_dtype, ia, &u0, &u1);
    cml__gemm_st2(e->D, e->d_dtype, batch * e->stride_d + m * e->ldd + n, cml__gemm_epi_act(e->act, z0, u0),
                  cml__gemm_epi_act(e->act, z1, u1));
}

#endif
