/* CUDA BatchNorm forward over (N, C, HW) (NCHW) or (N HW, C) (NHWC); f32/f16/bf16
 * storage, f32 math, statistics in double as on the CPU.
 * Training: the per-channel mean, then the centred sum of squares (two passes of
 * deterministic channel sums, common/channel_sums.cuh); one thread per channel
 * then writes save_mean/save_rstd, updates the running statistics on the device
 * (biased variance for normalizing, unbiased for running_var) and the
 * coefficients of the elementwise pass. Eval: the coefficients come from the
 * running statistics. */
#include <math.h>

#include "kernels/cuda/norm/batchnorm_common.cuh"
#include "kernels/cuda/common/launch.cuh"

static const char FN[] = "cml_batchnorm_fwd";

/* coef's m = the channel means (f32), the centre of the variance pass. */
static __global__ void bn_mean_kernel(float *coef, const float2 *part, int splits, long long C, double M) {
    cml__pdl_entry();
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) coef[c] = (float)(cml__channel_sums_total(part, splits, C, c).x / M);
}

/* Per channel: the statistics (from the two passes' partials when training, else the running ones),
 * the saved values, the running update and coef (m, k1, k0). */
static __global__ void bn_stats_kernel(float *coef, float *save_mean, float *save_rstd, float *running_mean,
                                       float *running_var, const float2 *part_mean, const float2 *part_var, int splits,
                                       const float *gamma, const float *beta, long long C, double M, bool training,
                                       float momentum, float eps) {
    cml__pdl_entry();
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double mean, var;
    if (training) {
        mean = cml__channel_sums_total(part_mean, splits, C, c).x / M;
        var = cml__channel_sums_total(part_var, splits, C, c).y / M;
    } else {
        mean = running_mean[c];
        var = running_var[c];
    }
    const double rstd = 1.0 / sqrt(var + (double)eps);
    if (save_mean) save_mean[c] = (float)mean;
    if (save_rstd) save_rstd[c] = (float)rstd;
    if (training && running_mean) {
        const double unbiased = var * M / (M - 1.0);
        running_mean[c] = (float)((1.0 - momentum) * (double)running_mean[c] + momentum * mean);
        running_var[c] = (float)((1.0 - momentum) * (double)running_var[c] + momentum * unbiased);
    }
    coef[c] = (float)mean;
    coef[C + c] = (float)(rstd * (gamma ? (double)gamma[c] : 1.0));
    coef[2 * C + c] = beta ? beta[c] : 0.0f;
}

template <int DT>
static cml_status fwd_launch(cml_ctx *ctx, void *y, float *save_mean, float *save_rstd, float *running_mean,
                             float *running_var, const void *x, const float *gamma, const float *beta, long long N,
                             long long C, long long HW, bool cl, bool training, float momentum, float eps) {
    const cml__channel_sums_shape sh = cml__channel_sums_plan(N, C, HW, cl);
    float *coef = NULL;
    float2 *part = NULL;
    CML_TRY(bn_workspace(ctx, C, sh.splits, training ? 2 : 0, &coef, &part));
    float2 *part_var = part + (((size_t)sh.splits * (size_t)C * sizeof(float2) + 255) & ~(size_t)255) / sizeof(float2);
    cudaStream_t st = cml__stream(ctx);
    const unsigned cgrid = (unsigned)((C + BN_BLOCK - 1) / BN_BLOCK);
    const double M = (double)N * (double)HW;
    if (training) {
        CML_TRY(cml__channel_sums_launch<DT>(ctx, FN, part, x, NULL, NULL, NULL, &sh));
        cml__launch(bn_mean_kernel, cgrid, BN_BLOCK, 0, st, coef, part, sh.splits, C, M);
        CML_TRY(cml__cuda_check_launch(FN, "bn_mean_kernel", "f32", C, cgrid, BN_BLOCK));
        CML_TRY(cml__channel_sums_launch<DT>(ctx, FN, part_var, x, coef, x, coef, &sh));
    }
    cml__launch(bn_stats_kernel, cgrid, BN_BLOCK, 0, st, coef, save_mean, save_rstd, running_mean, running_var, part,
                part_var, sh.splits, gamma, beta, C, M, training, momentum, eps);
    CML_TRY(cml__cuda_check_launch(FN, "bn_stats_kernel", "f32", C, cgrid, BN_BLOCK));
    return bn_apply_launch<DT>(ctx, FN, y, x, NULL, coef, N, C, HW, cl);
}

extern "C" cml_status cml__batchnorm_fwd_cuda(cml_ctx *ctx, void *y, float *save_mean, float *save_rstd,
                                              float *running_mean, float *running_var, const void *x,
                                              const float *gamma, const float *beta, int64_t N, int64_t C, int64_t HW,
                                              bool channels_last, bool training, float momentum, float eps,
                                              cml_dtype dtype) {
    CML_TRY(cml__cuda_check_float_dtype(FN, "dtype", dtype));
    CML_TRY(cml__cuda_activate(ctx));
    switch (dtype) {
    case CML_F16:
        return fwd_launch<CML_F16>(ctx, y, save_mean, save_rstd, running_mean, running_var, x, gamma, beta, N, C, HW,
                                   channels_last, training, momentum, eps);
    case CML_BF16:
        return fwd_launch<CML_BF16>(ctx, y, save_mean, save_rstd, running_mean, running_var, x, gamma, beta, N, C, HW,
                                    channels_last, training, momentum, eps);
    default:
        return fwd_launch<CML_F32>(ctx, y, save_mean, save_rstd, running_mean, running_var, x, gamma, beta, N, C, HW,
                                   channels_last, training, momentum, eps);
    }
}
