/* Optimizers, gradient clipping and learning-rate schedules.
 *
 * An optimizer borrows the parameter tensors it is given (they must outlive
 * it), copies their names, and owns its state buffers (zero-filled contiguous
 * f32 tensors made at creation, one per parameter and kind of state).
 * Parameters must be n >= 1 distinct contiguous f32 leaf tensors; messages
 * name the offending parameter. The updates follow torch.optim: SGD's momentum
 * buffer starts as the first gradient, and every parameter counts its own
 * steps (Adam's bias correction), so one skipped for lack of a grad starts
 * fresh when it gets one.
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

/* One update from the parameters' .grad (parameters without a grad are skipped).
 * All grads are checked (f32, contiguous, same size) before any is applied. The
 * update is the kernel layer's fused multi-tensor one (cml_adam_update_multi,
 * cml_sgd_update_multi): one launch for all the parameters that share a device and
 * a step count (normally all of them), with the single-tensor updates' results bit
 * for bit; on CUDA it only queues work (no host synchronization). */
cml_status cml_optim_step(cml_optim *opt);
/* Zeroes the grads (and drops a pending cml_optim_clip_grad_norm). */
void cml_optim_zero_grad(cml_optim *opt);

/* Global-norm clipping folded into the next cml_optim_step: computes the L2 norm of
 * all the optimizer's grads on their device (float64, a fixed order: deterministic,
 * and the same bits on the CPU and the GPU; on CUDA no host synchronization) and
 * makes the next step use grad * min(1, max_norm / (norm + 1e-6)) (f32 coefficient;
 * 1 when the norm is NaN or infinite, as cml_clip_grad_norm) instead of grad. The
 * grads in memory are not changed. Call it right before the step: a step whose grads
 * are no longer the same buffers fails without updating; cml_optim_zero_grad cancels
 * it. Every grad must be on one device. max_norm: finite and >= 0. */
cml_status cml_optim_clip_grad_norm(cml_optim *opt, double max_norm);
/* The norm computed by the last cml_optim_clip_grad_norm, before clipping (for logs:
 * on CUDA one 8-byte copy that waits for the device). */
cml_status cml_optim_grad_norm(cml_optim *opt, double *norm);
/* An lr that is negative or not finite sets the error and leaves lr unchanged. */
void cml_optim_set_lr(cml_optim *opt, float lr);
float cml_optim_lr(const cml_optim *opt);
int64_t cml_optim_steps(const cml_optim *opt); /* updates taken so far */
void cml_optim_destroy(cml_optim *opt);

/* ---- checkpoint support ---- */

/* "SGD", "Adam" or "AdamW" (NULL when opt is NULL). */
const char *cml_optim_name(const cml_optim *opt);

/* Enumerates the optimizer's whole mutable state as named tensors, so that a
 * checkpoint can save it and restore it by copying data back in. The tensors
 * are borrowed (owned by the optimizer until cml_optim_destroy) and live: what
 * is written into them is the optimizer's new state. In this order:
 *   "lr"                   f32, 0-d (CPU): the learning rate (cml_optim_lr)
 *   "steps"                i64, 0-d (CPU): successful cml_optim_step calls (cml_optim_steps)
 * then for each parameter p in creation order:
 *   "step.<p>"             i64, 0-d (CPU): updates applied to p (Adam's bias correction;
 *                          SGD initializes its momentum buffer when it is 0)
 *   "momentum_buffer.<p>"  f32, p's shape and device: SGD with momentum > 0
 *   "exp_avg.<p>"          f32, p's shape and device: Adam and AdamW
 *   "exp_avg_sq.<p>"       f32, p's shape and device: Adam and AdamW
 * The other hyperparameters (momentum, nesterov, betas, eps, weight decay) are
 * configuration, not state. Values written into "lr" and the counters must be
 * finite and >= 0 (not checked). Writes up to cap entries and returns the total
 * count (cap = 0 counts); -1 with the error set when opt is NULL, cap < 0, out is
 * NULL with cap > 0, or a name would not fit in CML_NAME_MAX. */
int cml_optim_state(const cml_optim *opt, cml_param *out, int cap);

/* Scales all gradients so that their global L2 norm is at most max_norm
 * (max_norm >= 0): like torch.nn.utils.clip_grad_norm_, coef = max_norm /
 * (norm + 1e-6) and the grads are multiplied (in f32) when coef < 1. The norm
 * is accumulated in float64 in parameter order (deterministic); parameters
 * without a grad are skipped; grads must be contiguous f32 on the CPU.
 * *total_norm (may be NULL) receives the norm before clipping; a NaN or
 * infinite norm is reported and nothing is scaled. */
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

/* Learning rate for a 0-based step:
 *   step < warmup_steps:  base * (step + 1) / warmup_steps (every kind)
 *   CONSTANT:             base
 *   STEP:                 base * gamma^floor(step / step_size)  (raw step, warm-up included)
 *   COSINE:               p = clamp((step - warmup) / (total_steps - warmup), 0, 1)
 *                         (p = 1 when total_steps <= warmup)
 *                         min_lr + (base - min_lr) * 0.5 * (1 + cos(pi * p))
 * NaN with the error set when s is NULL, step or warmup_steps is negative,
 * the kind is unknown, or step_size < 1 for STEP. */
double cml_lr_at(const cml_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
