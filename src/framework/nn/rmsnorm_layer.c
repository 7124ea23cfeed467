/* The RMSNorm module: cml_rms_norm with a learned weight (gamma, initialized to 1). */
#include <math.h>

#include "camel/autograd.h"
#include "camel/nn.h"
#include "framework/nn/nn_impl.h"
#include "framework/tensor_impl.h"

typedef struct rmsnorm_module {
    cml_module base;
    float eps;
    cml_tensor *weight; /* (dim), borrowed from base.params */
} rmsnorm_module;

static cml_tensor *rmsnorm_forward(cml_module *m, const cml_tensor *x) {
    const rmsnorm_module *l = (const rmsnorm_module *)m;
    return cml_rms_norm(x, l->weight, l->eps);
}

static const cml_module_ops rmsnorm_ops = {"RMSNorm", rmsnorm_forward, NULL};

cml_module *cml_rmsnorm_create(int64_t dim, float eps) {
    const char *who = "cml_rmsnorm_create";
    if (dim < 1) {
        cml__error(CML_ERR_INVALID_ARG, "%s: dim=%lld must be >= 1", who, (long long)dim);
        return NULL;
    }
    if (!(isfinite(eps) && eps >= 0.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: eps=%g must be finite and >= 0", who, (double)eps);
        return NULL;
    }
    rmsnorm_module *l = (rmsnorm_module *)cml__module_alloc(sizeof *l, &rmsnorm_ops, who);
    if (!l) return NULL;
    l->eps = eps;
    l->weight = cml_tensor_full(1, &dim, 1.0, CML_F32, CML_DEVICE_CPU);
    cml_tensor_set_requires_grad(l->weight, true);
    if ((l->weight ? cml_module_add_param(&l->base, "weight", l->weight) : cml_last_status()) != CML_OK) {
        cml_module_destroy(&l->base);
        return NULL;
    }
    return &l->base;
}
