/* Learning-rate schedules: linear warm-up, then constant, step or cosine decay. */
#include <math.h>

#include "camel/optim.h"
#include "runtime/error.h"

double cml_lr_at(const cml_lr_schedule *s, int64_t step) {
    const char *who = "cml_lr_at";
    if (!s) {
        cml__error(CML_ERR_INVALID_ARG, "%s: s must not be NULL", who);
        return NAN;
    }
    if (step < 0 || s->warmup_steps < 0) {
        cml__error(CML_ERR_INVALID_ARG, "%s: step=%lld and warmup_steps=%lld must be >= 0", who, (long long)step,
                   (long long)s->warmup_steps);
        return NAN;
    }
    if (s->kind == CML_LR_STEP && s->step_size < 1) {
        cml__error(CML_ERR_INVALID_ARG, "%s: step_size=%lld must be >= 1 for CML_LR_STEP", who, (long long)s->step_size);
        return NAN;
    }
    if (s->kind != CML_LR_CONSTANT && s->kind != CML_LR_STEP && s->kind != CML_LR_COSINE) {
        cml__error(CML_ERR_INVALID_ARG, "%s: kind=%d is not a cml_lr_kind", who, (int)s->kind);
        return NAN;
    }
    double base = s->base_lr;
    if (step < s->warmup_steps) return base * (double)(step + 1) / (double)s->warmup_steps;
    switch (s->kind) {
    case CML_LR_STEP: return base * pow(s->gamma, (double)(step / s->step_size));
    case CML_LR_COSINE: {
        int64_t span = s->total_steps - s->warmup_steps;
        double progress = span > 0 ? (double)(step - s->warmup_steps) / (double)span : 1.0;
        if (progress > 1.0) progress = 1.0;
        return s->min_lr + (base - s->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    }
    case CML_LR_CONSTANT: break;
    }
    return base;
}
