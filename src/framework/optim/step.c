/* The optimizer step on the kernel layer's fused multi-tensor updates
 * (cml_sgd_update_multi / cml_adam_update_multi: one launch per group of
 * parameters sharing a device and a step count, usually one for the whole
 * model), and global-norm clipping folded into that step: the norm is computed
 * on the grads' device and the step reads the clip coefficient from there, so
 * clip + step never wait for the device. The lists persist across steps and
 * re-upload their tables only when a group's buffers change. On the CPU the
 * same calls run the kernel layer's CPU loops, whose per-element arithmetic is
 * the single-tensor updates' (the results are the same bits as before). */
#include <math.h>
#include <stdlib.h>

#include "framework/optim/optim_impl.h"

static void list_free(cml__optim_list *l) {
    cml_param_list_destroy(l->list);
    l->list = NULL;
    l->ctx = NULL;
}

void cml__optim_free_lists(cml_optim *o) {
    if (o->groups)
        for (int g = 0; g < o->n; g++) list_free(&o->groups[g].list);
    list_free(&o->norm_list);
}

/* Sets l's slices, (re)creating it when it belongs to another context. */
static cml_status list_set(cml__optim_list *l, cml_ctx *ctx, const cml_param_slice *s, int count, bool *changed) {
    if (l->list && l->ctx != ctx) list_free(l);
    if (!l->list) {
        CML_TRY(cml_param_list_create(ctx, &l->list));
        l->ctx = ctx;
    }
    return cml_param_list_set(l->list, s, count, changed);
}

/* Every grad must be usable before any parameter changes. */
static cml_status check_grads(const char *who, const cml_optim *opt) {
    for (int i = 0; i < opt->n; i++) {
        const cml_tensor *p = opt->params[i].tensor, *g = p->grad;
        if (!g) continue;
        const char *name = opt->params[i].name;
        if (g->dtype != CML_F32)
            return cml__error(CML_ERR_DTYPE, "%s: the grad of parameter %d ('%s') has dtype %s; expected f32", who, i,
                              name, cml_dtype_name(g->dtype));
        if (!cml_tensor_is_contiguous(g))
            return cml__error(CML_ERR_INVALID_ARG, "%s: the grad of parameter %d ('%s') must be contiguous", who, i,
                              name);
        if (cml_tensor_numel(g) != cml_tensor_numel(p) || !cml_device_equal(g->storage->device, p->storage->device))
            return cml__error(CML_ERR_SHAPE, "%s: the grad of parameter %d ('%s') does not match it", who, i, name);
        if (!cml_tensor_is_contiguous(p))
            return cml__error(CML_ERR_INVALID_ARG, "%s: parameter %d ('%s') is no longer contiguous", who, i, name);
    }
    return CML_OK;
}

static cml_param_slice slice_of(const cml_optim *o, int i) {
    cml_tensor *p = o->params[i].tensor;
    cml_param_slice s = {cml_tensor_data(p), cml_tensor_data(p->grad),
                         o->state1[i] ? cml_tensor_data(o->state1[i]) : NULL,
                         o->state2[i] ? cml_tensor_data(o->state2[i]) : NULL, cml_tensor_numel(p)};
    return s;
}

/* The slices of every parameter with a grad, in order, into o->slices; they must share
 * one device (*ctx: its context; the CPU's when there are none). */
static cml_status collect_all(const char *who, cml_optim *o, int *count, cml_ctx **ctx) {
    int k = 0, first = -1;
    for (int i = 0; i < o->n; i++) {
        const cml_tensor *p = o->params[i].tensor;
        if (!p->grad) continue;
        if (first < 0) first = i;
        const cml_device d = p->storage->device, d0 = o->params[first].tensor->storage->device;
        if (!cml_device_equal(d, d0))
            return cml__error(CML_ERR_UNSUPPORTED,
                              "%s: parameter %d ('%s') is on %s but parameter %d ('%s') is on %s: clipping in the "
                              "step needs every grad on one device (cml_clip_grad_norm works across devices)",
                              who, i, o->params[i].name, cml_device_name(d), first, o->params[first].name,
                              cml_device_name(d0));
        o->slices[k++] = slice_of(o, i);
    }
    *count = k;
    *ctx = first < 0 ? cml_ctx_default(CML_DEVICE_CPU) : cml__ctx(o->params[first].tensor);
    return *ctx ? CML_OK : cml_last_status();
}

/* Groups the parameters with a grad by (context, step count), in order of first
 * appearance, and lays out their slices group after group. Returns the group count. */
static int make_groups(cml_optim *o) {
    int ng = 0;
    for (int i = 0; i < o->n; i++) {
        o->group_of[i] = -1;
        const cml_tensor *p = o->params[i].tensor;
        if (!p->grad) continue;
        cml_ctx *ctx = cml__ctx(p);
        if (!ctx) return -1;
        const int64_t steps = *cml__optim_param_steps(o, i);
        int g = 0;
        while (g < ng && !(o->groups[g].ctx == ctx && o->groups[g].steps == steps)) g++;
        if (g == ng) {
            o->groups[g].ctx = ctx;
            o->groups[g].steps = steps;
            o->groups[g].count = 0;
            ng++;
        }
        o->group_of[i] = g;
        o->groups[g].count++;
    }
    int start = 0;
    for (int g = 0; g < ng; g++) {
        o->groups[g].start = start;
        start += o->groups[g].count;
        o->groups[g].count = 0; /* refilled below */
    }
    for (int i = 0; i < o->n; i++) {
        cml__optim_group *grp = o->group_of[i] >= 0 ? &o->groups[o->group_of[i]] : NULL;
        if (grp) o->slices[grp->start + grp->count++] = slice_of(o, i);
    }
    return ng;
}

static cml_status update_group(cml_optim *o, cml__optim_group *grp, const float *clip_coef) {
    CML_TRY(list_set(&grp->list, grp->ctx, o->slices + grp->start, grp->count, NULL));
    const float lr = *cml__optim_lr(o);
    if (o->kind == CML__OPT_SGD)
        return cml_sgd_update_multi(grp->ctx, grp->list.list, lr, o->sgd.momentum, o->sgd.nesterov,
                                    o->sgd.weight_decay, grp->steps == 0, clip_coef);
    return cml_adam_update_multi(grp->ctx, grp->list.list, lr, o->adam.beta1, o->adam.beta2, o->adam.eps,
                                 o->adam.weight_decay, o->kind == CML__OPT_ADAMW, grp->steps + 1, clip_coef);
}

cml_status cml_optim_step(cml_optim *opt) {
    static const char who[] = "cml_optim_step";
    CML_CHECK_ARG(opt, "%s: opt must not be NULL", who);
    const bool clip = opt->clip_pending;
    opt->clip_pending = false;
    CML_TRY(check_grads(who, opt));
    const float *clip_coef = NULL;
    if (clip) { /* the norm must be of exactly the grads about to be used */
        int count;
        cml_ctx *ctx;
        bool changed = false;
        CML_TRY(collect_all(who, opt, &count, &ctx));
        CML_TRY(list_set(&opt->norm_list, ctx, opt->slices, count, &changed));
        if (changed)
            return cml__error(CML_ERR_INVALID_ARG, "%s: the parameters' grads changed after cml_optim_clip_grad_norm "
                              "(call it right before the step); nothing was updated", who);
        clip_coef = cml_param_list_clip_coef(opt->norm_list.list);
    }
    const int ng = make_groups(opt);
    if (ng < 0) return cml_last_status();
    for (int g = 0; g < ng; g++) {
        CML_TRY(update_group(opt, &opt->groups[g], clip_coef));
        for (int i = 0; i < opt->n; i++)
            if (opt->group_of[i] == g) (*cml__optim_param_steps(opt, i))++;
    }
    (*cml__optim_total_steps(opt))++;
    return CML_OK;
}

cml_status cml_optim_clip_grad_norm(cml_optim *opt, double max_norm) {
    static const char who[] = "cml_optim_clip_grad_norm";
    CML_CHECK_ARG(opt, "%s: opt must not be NULL", who);
    opt->clip_pending = false;
    CML_CHECK_ARG(isfinite(max_norm) && max_norm >= 0.0, "%s: max_norm=%g must be finite and >= 0", who, max_norm);
    CML_TRY(check_grads(who, opt));
    int count;
    cml_ctx *ctx;
    CML_TRY(collect_all(who, opt, &count, &ctx));
    CML_TRY(list_set(&opt->norm_list, ctx, opt->slices, count, NULL));
    CML_TRY(cml_param_list_grad_norm(ctx, opt->norm_list.list, max_norm));
    opt->clip_pending = true;
    opt->has_norm = true;
    return CML_OK;
}

cml_status cml_optim_grad_norm(cml_optim *opt, double *norm) {
    static const char who[] = "cml_optim_grad_norm";
    CML_CHECK_ARG(opt && norm, "%s: opt and norm must not be NULL", who);
    CML_CHECK_ARG(opt->has_norm, "%s: no norm yet (call cml_optim_clip_grad_norm first)", who);
    return cml_param_list_read_norm(opt->norm_list.ctx, opt->norm_list.list, norm);
}
