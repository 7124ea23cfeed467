/* The per-element arithmetic of the CUDA optimizer updates, shared by the
 * single-tensor kernels (optim.cu) and the multi-tensor ones (optim_multi.cu).
 *
 * Every operation is an explicitly rounded intrinsic (no fused multiply-adds)
 * in the CPU's order (src/kernels/cpu/optim.c), so that both give the same
 * bits; the constants (bias corrections) come from the host, computed there in
 * double exactly as the CPU does. */
#ifndef CML_KERNELS_CUDA_OPTIM_OPTIM_MATH_CUH
#define CML_KERNELS_CUDA_OPTIM_OPTIM_MATH_CUH

#include <cuda_runtime.h>

typedef struct cml__sgd_consts {
    float lr, momentum, weight_decay;
    bool nesterov, first_step;
} cml__sgd_consts;

typedef struct cml__adam_consts {
    float beta1, beta2, eps, step_size, sqrt_bias2, decay, l2;
} cml__adam_consts;

/* One SGD element: returns the new param; buf (the momentum buffer) is read and
 * written only when momentum != 0. */
static __device__ __forceinline__ float cml__sgd_elem(const cml__sgd_consts &k, float p, float g, float &buf) {
    if (k.weight_decay != 0.0f) g = __fadd_rn(g, __fmul_rn(k.weight_decay, p));
    if (k.momentum != 0.0f) {
        const float b = k.first_step ? g : __fadd_rn(__fmul_rn(k.momentum, buf), g);
        buf = b;
        g = k.nesterov ? __fadd_rn(g, __fmul_rn(k.momentum, b)) : b;
    }
    return __fsub_rn(p, __fmul_rn(k.lr, g));
}

/* One Adam/AdamW element: returns the new param, updates m and v. */
static __device__ __forceinline__ float cml__adam_elem(const cml__adam_consts &k, float p0, float grad, float &m,
                                                       float &v) {
    const float p = __fmul_rn(p0, k.decay);
    const float g = __fadd_rn(grad, __fmul_rn(k.l2, p0));
    m = __fadd_rn(__fmul_rn(k.beta1, m), __fmul_rn(1.0f - k.beta1, g));
    v = __fadd_rn(__fmul_rn(k.beta2, v), __fmul_rn(__fmul_rn(1.0f - k.beta2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.sqrt_bias2), k.eps);
    return __fsub_rn(p, __fdiv_rn(__fmul_rn(k.step_size, m), denom));
}

/* The host-side constants of an Adam step, computed as the CPU computes them. */
static inline cml__adam_consts cml__adam_consts_of(float lr, float beta1, float beta2, float eps, float weight_decay,
                                                   bool decoupled, long long step) {
    const double bias1 = 1.0 - pow((double)beta1, (double)step);
    const double bias2 = 1.0 - pow((double)beta2, (double)step);
    cml__adam_consts k;
    k.beta1 = beta1;
    k.beta2 = beta2;
    k.eps = eps;
    k.step_size = (float)((double)lr / bias1);
    k.sqrt_bias2 = (float)sqrt(bias2);
    k.decay = decoupled ? 1.0f - lr * weight_decay : 1.0f;
    k.l2 = decoupled ? 0.0f : weight_decay;
    return k;
}

#endif
