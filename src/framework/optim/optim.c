/* SGD, Adam and AdamW over borrowed parameters: creation, settings and the
 * checkpoint state. The update itself (step.c) is the kernel layer's fused
 * multi-tensor one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/autograd.h"
#include "camel/optim.h"
#include "framework/optim/optim_impl.h"

static bool finite_nonneg(float x) { return isfinite(x) && x >= 0.0f; }

static int64_t *total_steps(const cml_optim *o) { return cml__optim_total_steps(o); }
static float *lr_of(const cml_optim *o) { return cml__optim_lr(o); }

static cml_status check_params(const char *who, const cml_param *params, int n) {
    CML_CHECK_ARG(n >= 1, "%s: n=%d must be >= 1 (no parameters to optimize)", who, n);
    CML_CHECK_ARG(params, "%s: params must not be NULL", who);
    for (int i = 0; i < n; i++) {
        const cml_tensor *t = params[i].tensor;
        const char *name = params[i].name;
        CML_CHECK_ARG(t, "%s: parameter %d ('%s') is NULL", who, i, name);
        if (t->dtype != CML_F32)
            return cml__error(CML_ERR_DTYPE, "%s: parameter %d ('%s') has dtype %s; expected f32", who, i, name,
                              cml_dtype_name(t->dtype));
        CML_CHECK_ARG(cml_tensor_is_contiguous(t), "%s: parameter %d ('%s') must be contiguous", who, i, name);
        CML_CHECK_ARG(!t->grad_fn, "%s: parameter %d ('%s') must be a leaf tensor, not the result of '%s'", who, i,
                      name, t->grad_fn ? t->grad_fn->name : "");
        for (int j = 0; j < i; j++)
            CML_CHECK_ARG(params[j].tensor != t, "%s: parameter %d ('%s') is the same tensor as parameter %d ('%s')",
                          who, i, name, j, params[j].name);
    }
    return CML_OK;
}

/* A zero-filled f32 buffer shaped like t on its device. */
static cml_tensor *zeros_like(const cml_tensor *t) {
    return cml_tensor_zeros(t->ndim, t->shape, CML_F32, t->storage->device);
}

static cml_optim *optim_new(cml__optim_kind kind, const char *who, const cml_param *params, int n, bool s1, bool s2) {
    if (check_params(who, params, n) != CML_OK) return NULL;
    cml_optim *o = calloc(1, sizeof *o);
    bool ok = o != NULL;
    if (ok) {
        o->kind = kind;
        o->n = n;
        o->params = malloc((size_t)n * sizeof *o->params);
        o->state1 = calloc((size_t)n, sizeof *o->state1);
        o->state2 = calloc((size_t)n, sizeof *o->state2);
        o->step_counts = calloc((size_t)n, sizeof *o->step_counts);
        o->slices = malloc((size_t)n * sizeof *o->slices);
        o->group_of = malloc((size_t)n * sizeof *o->group_of);
        o->groups = calloc((size_t)n, sizeof *o->groups);
        ok = o->params && o->state1 && o->state2 && o->step_counts && o->slices && o->group_of && o->groups;
        if (ok) o->steps = cml_tensor_zeros(0, NULL, CML_I64, CML_DEVICE_CPU);
        if (ok) o->lr = cml_tensor_zeros(0, NULL, CML_F32, CML_DEVICE_CPU);
        ok = ok && o->steps && o->lr;
    }
    if (!ok) {
        cml_optim_destroy(o);
        cml__error(CML_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        o->params[i] = params[i];
        o->params[i].name[CML_NAME_MAX - 1] = '\0';
        if (!(o->step_counts[i] = cml_tensor_zeros(0, NULL, CML_I64, CML_DEVICE_CPU))) ok = false;
        if (ok && s1 && !(o->state1[i] = zeros_like(params[i].tensor))) ok = false;
        if (ok && s2 && !(o->state2[i] = zeros_like(params[i].tensor))) ok = false;
        if (!ok) {
            cml_optim_destroy(o);
            return NULL;
        }
    }
    return o;
}

cml_optim *cml_sgd_create(const cml_param *params, int n, cml_sgd_opts opts) {
    const char *who = "cml_sgd_create";
    if (!finite_nonneg(opts.lr)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: lr=%g must be finite and >= 0", who, (double)opts.lr);
        return NULL;
    }
    if (!(opts.momentum >= 0.0f && opts.momentum < 1.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: momentum=%g must be in [0, 1)", who, (double)opts.momentum);
        return NULL;
    }
    if (opts.nesterov && opts.momentum == 0.0f) {
        cml__error(CML_ERR_INVALID_ARG, "%s: nesterov requires momentum > 0", who);
        return NULL;
    }
    if (!finite_nonneg(opts.weight_decay)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: weight_decay=%g must be finite and >= 0", who, (double)opts.weight_decay);
        return NULL;
    }
    cml_optim *o = optim_new(CML__OPT_SGD, who, params, n, opts.momentum > 0.0f, false);
    if (o) {
        o->sgd = opts;
        *lr_of(o) = opts.lr;
    }
    return o;
}

static cml_optim *adam_create(const char *who, cml__optim_kind kind, const cml_param *params, int n, cml_adam_opts opts) {
    if (opts.beta1 == 0.0f && opts.beta2 == 0.0f) {
        opts.beta1 = 0.9f;
        opts.beta2 = 0.999f;
    }
    if (opts.eps == 0.0f) opts.eps = 1e-8f;
    if (!finite_nonneg(opts.lr)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: lr=%g must be finite and >= 0", who, (double)opts.lr);
        return NULL;
    }
    if (!(opts.beta1 >= 0.0f && opts.beta1 < 1.0f) || !(opts.beta2 >= 0.0f && opts.beta2 < 1.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: beta1=%g and beta2=%g must be in [0, 1)", who, (double)opts.beta1,
                   (double)opts.beta2);
        return NULL;
    }
    if (!(isfinite(opts.eps) && opts.eps > 0.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: eps=%g must be finite and > 0", who, (double)opts.eps);
        return NULL;
    }
    if (!finite_nonneg(opts.weight_decay)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: weight_decay=%g must be finite and >= 0", who, (double)opts.weight_decay);
        return NULL;
    }
    cml_optim *o = optim_new(kind, who, params, n, true, true);
    if (o) {
        o->adam = opts;
        *lr_of(o) = opts.lr;
    }
    return o;
}

cml_optim *cml_adam_create(const cml_param *params, int n, cml_adam_opts opts) {
    return adam_create("cml_adam_create", CML__OPT_ADAM, params, n, opts);
}

cml_optim *cml_adamw_create(const cml_param *params, int n, cml_adam_opts opts) {
    return adam_create("cml_adamw_create", CML__OPT_ADAMW, params, n, opts);
}

void cml_optim_zero_grad(cml_optim *opt) {
    if (!opt) return;
    opt->clip_pending = false; /* the norm was of the grads being cleared */
    for (int i = 0; i < opt->n; i++) cml_tensor_zero_grad(opt->params[i].tensor);
}

void cml_optim_set_lr(cml_optim *opt, float lr) {
    if (!opt) {
        cml__error(CML_ERR_INVALID_ARG, "cml_optim_set_lr: opt must not be NULL");
        return;
    }
    if (!finite_nonneg(lr)) {
        cml__error(CML_ERR_INVALID_ARG, "cml_optim_set_lr: lr=%g must be finite and >= 0 (unchanged)", (double)lr);
        return;
    }
    *lr_of(opt) = lr;
}

float cml_optim_lr(const cml_optim *opt) { return opt ? *lr_of(opt) : 0.0f; }

int64_t cml_optim_steps(const cml_optim *opt) { return opt ? *total_steps(opt) : 0; }

const char *cml_optim_name(const cml_optim *opt) {
    if (!opt) return NULL;
    switch (opt->kind) {
    case CML__OPT_SGD: return "SGD";
    case CML__OPT_ADAM: return "Adam";
    default: return "AdamW";
    }
}

/* Appends "<prefix><name>" -> t to out when there is room; false when it does not fit a name. */
static bool put_state(cml_param *out, int cap, int *count, const char *prefix, const char *name, cml_tensor *t) {
    int len = snprintf(*count < cap ? out[*count].name : NULL, *count < cap ? CML_NAME_MAX : 0, "%s%s", prefix, name);
    if (len < 0 || len >= CML_NAME_MAX) {
        cml__error(CML_ERR_INVALID_ARG, "cml_optim_state: the state name \"%s%s\" is longer than %d characters",
                   prefix, name, CML_NAME_MAX - 1);
        return false;
    }
    if (*count < cap) out[*count].tensor = t;
    (*count)++;
    return true;
}

int cml_optim_state(const cml_optim *opt, cml_param *out, int cap) {
    if (!opt || cap < 0 || (cap > 0 && !out)) {
        cml__error(CML_ERR_INVALID_ARG, "cml_optim_state: opt must not be NULL, cap=%d must be >= 0 and out "
                   "must not be NULL when cap > 0", cap);
        return -1;
    }
    int count = 0;
    bool ok = put_state(out, cap, &count, "lr", "", opt->lr) && put_state(out, cap, &count, "steps", "", opt->steps);
    for (int i = 0; ok && i < opt->n; i++) {
        const char *name = opt->params[i].name;
        ok = put_state(out, cap, &count, "step.", name, opt->step_counts[i]);
        if (ok && opt->state1[i])
            ok = put_state(out, cap, &count, opt->kind == CML__OPT_SGD ? "momentum_buffer." : "exp_avg.", name,
                           opt->state1[i]);
        if (ok && opt->state2[i]) ok = put_state(out, cap, &count, "exp_avg_sq.", name, opt->state2[i]);
    }
    return ok ? count : -1;
}

void cml_optim_destroy(cml_optim *opt) {
    if (!opt) return;
    if (opt->state1) cml_tensor_release_all(opt->state1, opt->n);
    if (opt->state2) cml_tensor_release_all(opt->state2, opt->n);
    free(opt->state1);
    free(opt->state2);
    if (opt->step_counts) cml_tensor_release_all(opt->step_counts, opt->n);
    cml_tensor_release(opt->steps);
    cml_tensor_release(opt->lr);
    free(opt->step_counts);
    free(opt->params);
    cml__optim_free_lists(opt);
    free(opt->slices);
    free(opt->group_of);
    free(opt->groups);
    free(opt);
}
