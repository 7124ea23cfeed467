/* CUDA BatchNorm backward (training mode) over (N, C, HW) (NCHW) or (N HW, C)
 * (NHWC); f32/f16/bf16 storage, f32 math. One pass of deterministic channel
 * sums gives sum(dy) and sum(dy (x - mean)) (common/channel_sums.cuh); one
 * thread per channel turns them into dgamma, dbeta and the coefficients
 *   k1 = gamma rstd,  k0 = -k1 sum(dy) / M,  k3 = k1 rstd dgamma / M   (M = N HW),
 * and the elementwise pass writes dx = k1 dy + k0 - k3 (x - mean). */
#include "kernels/cuda/norm/batchnorm_common.cuh"
#include "kernels/cuda/common/launch.cuh"

static const char FN[] = "cml_batchnorm_bwd";

static __global__ void bn_bwd_coef_kernel(float *coef, float *dgamma, float *dbeta, const float2 *part, int splits,
                                          const float *gamma, const float *save_mean, const float *save_rstd,
                                          long long C, double M) {
    cml__pdl_entry();
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const double2 s = cml__channel_sums_total(part, splits, C, c); /* sum dy, sum dy (x - mean) */
    const double rstd = save_rstd[c], gm = gamma ? (double)gamma[c] : 1.0;
    const double dg = s.y * rstd, a = gm * rstd;
    coef[c] = save_mean[c];
    coef[C + c] = (float)a;
    coef[2 * C + c] = (float)(-a * s.x / M);
    coef[3 * C + c] = (float)(a * rstd * dg / M);
    if (dgamma) dgamma[c] = (float)dg;
    if (dbeta) dbeta[c] = (float)s.x;
}

template <int DT>
static cml_status bwd_launch(cml_ctx *ctx, void *dx, float *dgamma, float *dbeta, const void *dy, const void *x,
                             const float *gamma, const float *save_mean, const float *save_rstd, long long N,
                             long long C, long long HW, bool cl) {
    const cml__channel_sums_shape sh = cml__channel_sums_plan(N, C, HW, cl);
    float *coef = NULL;
    float2 *part = NULL;
    CML_TRY(bn_workspace(ctx, C, sh.splits, 1, &coef, &part));
    CML_TRY(cml__channel_sums_launch<DT>(ctx, FN, part, dy, NULL, x, save_mean, &sh));
    const unsigned cgrid = (unsigned)((C + BN_BLOCK - 1) / BN_BLOCK);
    cml__launch(bn_bwd_coef_kernel, cgrid, BN_BLOCK, 0, cml__stream(ctx), coef, dgamma, dbeta, part, sh.splits, gamma,
                save_mean, save_rstd, C, (double)N * (double)HW);
    CML_TRY(cml__cuda_check_launch(FN, "bn_bwd_coef_kernel", "f32", C, cgrid, BN_BLOCK));
    return bn_apply_launch<DT>(ctx, FN, dx, dy, x, coef, N, C, HW, cl);
}

extern "C" cml_status cml__batchnorm_bwd_cuda(cml_ctx *ctx, void *dx, float *dgamma, float *dbeta, const void *dy,
                                              const void *x, const float *gamma, const float *save_mean,
                                              const float *save_rstd, int64_t N, int64_t C, int64_t HW,
                                              bool channels_last, cml_dtype dtype) {
    CML_TRY(cml__cuda_check_float_dtype(FN, "dtype", dtype));
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16:
        return bwd_launch<CML_F16>(ctx, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_rstd, N, C, HW, channels_last);
    case CML_BF16:
        return bwd_launch<CML_BF16>(ctx, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_rstd, N, C, HW,
                                    channels_last);
    default:
        return bwd_launch<CML_F32>(ctx, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_rstd, N, C, HW, channels_last);
    }
}
