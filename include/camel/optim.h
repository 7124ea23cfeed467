/* Optimizers, gradient clipping and learning-rate schedules.
 *
 * An optimizer borrows the parameter tensors it is given (they must outlive
 * it) and owns its state buffers. Parameters must be contiguous f32.
 */
#ifndef CAMEL_OPTIM_H
#define CAMEL_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cml_optim cml_optim;

typedef struct cml_sgd_opts {
    float lr;
    float momentum;     /* 0 = plain SGD */
    bool nesterov;      /* needs momentum > 0 */
    float weight_decay; /* L2, added to the gradient */
} cml_sgd_opts;

typedef struct cml_adam_opts {
    float lr;
    float beta1, beta2; /* defaults 0.9, 0.999 when both are 0 */
    float eps;          /* default 1e-8 when 0 */
    float weight_decay;
} cml_adam_opts;

cml_optim *cml_sgd_create(const cml_param *params, int n, cml_sgd_opts opts);
/* Adam: weight decay is L2 added to the gradient. */
cml_optim *cml_adam_create(const cml_param *params, int n, cml_adam_opts opts);
/* AdamW: decoupled weight decay (param -= lr * wd * param). */
cml_optim *cml_adamw_create(const cml_param *params, int n, cml_adam_opts opts);

/* One update from the parameters' .grad (parameters without a grad are skipped). */
cml_status cml_optim_step(cml_optim *opt);
void cml_optim_zero_grad(cml_optim *opt);
void cml_optim_set_lr(cml_optim *opt, float lr);
float cml_optim_lr(const cml_optim *opt);
int64_t cml_optim_steps(const cml_optim *opt); /* updates taken so far */
void cml_optim_destroy(cml_optim *opt);

/* Scales all gradients so that their global L2 norm is at most max_norm.
 * *total_norm (may be NULL) receives the norm before clipping. */
cml_status cml_clip_grad_norm(const cml_param *params, int n, double max_norm, double *total_norm);

typedef enum cml_lr_kind {
    CML_LR_CONSTANT = 0,
    CML_LR_STEP,   /* base * gamma^(floor(step / step_size)) */
    CML_LR_COSINE  /* linear warm-up to base, then cosine decay to min_lr at total_steps */
} cml_lr_kind;

typedef struct cml_lr_schedule {
    cml_lr_kind kind;
    double base_lr;
    int64_t warmup_steps;  /* all kinds: linear ramp from base/warmup to base */
    int64_t total_steps;   /* COSINE */
    double min_lr;         /* COSINE */
    int64_t step_size;     /* STEP */
    double gamma;          /* STEP */
} cml_lr_schedule;

/* Learning rate for a 0-based step. */
double cml_lr_at(const cml_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
