/* Parameter initializers, written in place into contiguous f32 CPU tensors
 * (not recorded by autograd). Uniform draws match cml_tensor_rand and normal
 * draws match cml_tensor_randn for the same generator state. */
#include <math.h>

#include "camel/nn.h"
#include "framework/tensor_impl.h"

static cml_status check_target(const char *who, const cml_tensor *t, const cml_rng *rng) {
    CML_CHECK_ARG(t, "%s: t must not be NULL", who);
    CML_CHECK_ARG(rng, "%s: rng must not be NULL", who);
    if (t->dtype != CML_F32)
        return cml__error(CML_ERR_DTYPE, "%s: t has dtype %s; expected f32", who, cml_dtype_name(t->dtype));
    if (t->storage->device.type != CML_CPU)
        return cml__error(CML_ERR_UNSUPPORTED, "%s: t is on %s; only CPU tensors are supported", who,
                          cml_device_name(t->storage->device));
    CML_CHECK_ARG(cml_tensor_is_contiguous(t), "%s: t must be contiguous", who);
    return CML_OK;
}

static void fill_uniform(cml_tensor *t, float low, float high, cml_rng *rng) {
    int64_t n = cml_tensor_numel(t);
    float *v = cml_tensor_data(t);
    uint64_t base = cml_rng_reserve(rng, (uint64_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = low + (high - low) * cml_u32_to_unit(cml_philox_word(rng->seed, base, (uint64_t)i));
}

static void fill_normal(cml_tensor *t, float mean, float std, cml_rng *rng) {
    int64_t n = cml_tensor_numel(t);
    float *v = cml_tensor_data(t);
    for (int64_t i = 0; i < n; i++) v[i] = mean + std * cml_rng_normal(rng);
}

cml_status cml_init_uniform_(cml_tensor *t, float low, float high, cml_rng *rng) {
    const char *who = "cml_init_uniform_";
    CML_TRY(check_target(who, t, rng));
    CML_CHECK_ARG(isfinite(low) && isfinite(high) && low <= high, "%s: low=%g and high=%g must be finite with low <= high",
                  who, (double)low, (double)high);
    fill_uniform(t, low, high, rng);
    return CML_OK;
}

cml_status cml_init_normal_(cml_tensor *t, float mean, float std, cml_rng *rng) {
    const char *who = "cml_init_normal_";
    CML_TRY(check_target(who, t, rng));
    CML_CHECK_ARG(isfinite(mean), "%s: mean=%g must be finite", who, (double)mean);
    CML_CHECK_ARG(isfinite(std) && std >= 0.0f, "%s: std=%g must be finite and >= 0", who, (double)std);
    fill_normal(t, mean, std, rng);
    return CML_OK;
}

/* PyTorch's _calculate_fan_in_and_fan_out. */
static cml_status fans(const char *who, const cml_tensor *t, float gain, double *fan_in, double *fan_out) {
    CML_CHECK_ARG(isfinite(gain) && gain >= 0.0f, "%s: gain=%g must be finite and >= 0", who, (double)gain);
    if (t->ndim < 2) {
        char buf[160];
        return cml__error(CML_ERR_SHAPE, "%s: t %s needs at least 2 dims to compute fan_in and fan_out", who,
                          cml__shape_str(t->ndim, t->shape, buf, sizeof buf));
    }
    double receptive = 1;
    for (int i = 2; i < t->ndim; i++) receptive *= (double)t->shape[i];
    *fan_in = (double)t->shape[1] * receptive;
    *fan_out = (double)t->shape[0] * receptive;
    return CML_OK;
}

typedef enum init_kind { KAIMING_UNIFORM, KAIMING_NORMAL, XAVIER_UNIFORM, XAVIER_NORMAL } init_kind;

static cml_status init_scaled(const char *who, cml_tensor *t, float gain, cml_rng *rng, init_kind kind) {
    CML_TRY(check_target(who, t, rng));
    double fan_in = 0.0, fan_out = 0.0;
    CML_TRY(fans(who, t, gain, &fan_in, &fan_out));
    if (cml_tensor_numel(t) == 0) return CML_OK; /* nothing to fill (PyTorch only warns) */
    bool kaiming = kind == KAIMING_UNIFORM || kind == KAIMING_NORMAL;
    double std = kaiming ? gain / sqrt(fan_in) : gain * sqrt(2.0 / (fan_in + fan_out));
    if (kind == KAIMING_UNIFORM || kind == XAVIER_UNIFORM) {
        double bound = sqrt(3.0) * std; /* uniform(-b, b) has std b / sqrt(3) */
        fill_uniform(t, (float)-bound, (float)bound, rng);
    } else {
        fill_normal(t, 0.0f, (float)std, rng);
    }
    return CML_OK;
}

cml_status cml_init_kaiming_uniform_(cml_tensor *t, float gain, cml_rng *rng) {
    return init_scaled("cml_init_kaiming_uniform_", t, gain, rng, KAIMING_UNIFORM);
}
cml_status cml_init_kaiming_normal_(cml_tensor *t, float gain, cml_rng *rng) {
    return init_scaled("cml_init_kaiming_normal_", t, gain, rng, KAIMING_NORMAL);
}
cml_status cml_init_xavier_uniform_(cml_tensor *t, float gain, cml_rng *rng) {
    return init_scaled("cml_init_xavier_uniform_", t, gain, rng, XAVIER_UNIFORM);
}
cml_status cml_init_xavier_normal_(cml_tensor *t, float gain, cml_rng *rng) {
    return init_scaled("cml_init_xavier_normal_", t, gain, rng, XAVIER_NORMAL);
}
