/* Internal: the optimizer struct, shared by optim.c (creation, settings,
 * checkpoint state) and step.c (the fused update and clipping). */
#ifndef CML_FRAMEWORK_OPTIM_OPTIM_IMPL_H
#define CML_FRAMEWORK_OPTIM_OPTIM_IMPL_H

#include "camel/kernels.h"
#include "camel/optim.h"
#include "framework/tensor_impl.h"

typedef enum cml__optim_kind { CML__OPT_SGD, CML__OPT_ADAM, CML__OPT_ADAMW } cml__optim_kind;

/* A kernel-layer parameter list and the context it was made for. */
typedef struct cml__optim_list {
    cml_param_list *list;
    cml_ctx *ctx;
} cml__optim_list;

/* Parameters with a grad that share a device and a step count: one fused launch. */
typedef struct cml__optim_group {
    cml_ctx *ctx;
    int64_t steps; /* updates each member has had */
    int start, count; /* members' slices: slices[start .. start + count) */
    cml__optim_list list; /* persists across steps (by group index) */
} cml__optim_group;

struct cml_optim {
    cml__optim_kind kind;
    int n;
    cml_param *params;    /* copies of the names; tensors borrowed */
    cml_tensor **state1;  /* SGD momentum buffer / Adam m (owned, NULL when unused) */
    cml_tensor **state2;  /* Adam v (owned) */
    /* The counters and lr live in 0-d CPU tensors so that cml_optim_state can hand
     * them to checkpoints like the buffers (read and written through the helpers below). */
    cml_tensor **step_counts; /* i64: updates applied to each parameter (skipped while it has no grad) */
    cml_tensor *steps;        /* i64: cml_optim_step calls that succeeded */
    cml_tensor *lr;           /* f32 */
    cml_sgd_opts sgd;
    cml_adam_opts adam;
    /* The fused path (step.c). Parameters with a grad are grouped by (device, step
     * count): one kernel-layer list and one launch per group, usually exactly one.
     * The lists persist across steps, so an unchanged group uploads nothing. */
    cml_param_slice *slices;    /* n: scratch, grouped */
    int *group_of;              /* n: scratch, the group of each parameter (-1: no grad) */
    cml__optim_group *groups;   /* n: lists created on first use */
    cml__optim_list norm_list;  /* every parameter with a grad, for cml_optim_clip_grad_norm */
    bool clip_pending;        /* the next step scales the grads by norm_list's clip coefficient */
    bool has_norm;            /* norm_list holds a norm (cml_optim_grad_norm) */
};

static inline int64_t *cml__optim_param_steps(const cml_optim *o, int i) { return cml_tensor_data(o->step_counts[i]); }
static inline int64_t *cml__optim_total_steps(const cml_optim *o) { return cml_tensor_data(o->steps); }
static inline float *cml__optim_lr(const cml_optim *o) { return cml_tensor_data(o->lr); }

/* Frees the fused path's lists (step.c). */
void cml__optim_free_lists(cml_optim *o);

#endif
