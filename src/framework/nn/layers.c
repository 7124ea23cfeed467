/* Layers: Linear, activations, Dropout, Flatten, Sequential and the MLP builder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/autograd.h"
#include "camel/nn.h"
#include "framework/nn/nn_impl.h"
#include "framework/tensor_impl.h"

/* A zeroed module struct of `size` bytes (cml_module first) in training mode. */
/* ---- Linear ------------------------------------------------------------------ */

typedef struct linear_module {
    cml_module base;
    int64_t in_features, out_features;
    cml_tensor *weight; /* (out, in), borrowed from base.params */
    cml_tensor *bias;   /* (out) or NULL, borrowed */
} linear_module;

static cml_tensor *linear_forward(cml_module *m, const cml_tensor *x) {
    const linear_module *l = (const linear_module *)m;
    char buf[160];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != l->in_features) {
        cml__error(CML_ERR_SHAPE, "cml_linear_forward: input %s must have last dim in_features=%lld",
                   cml__shape_str(x->ndim, x->shape, buf, sizeof buf), (long long)l->in_features);
        return NULL;
    }
    if (x->dtype != l->weight->dtype) {
        cml__error(CML_ERR_DTYPE, "cml_linear_forward: input dtype %s must match the weight's %s",
                   cml_dtype_name(x->dtype), cml_dtype_name(l->weight->dtype));
        return NULL;
    }
    /* one GEMM with the bias fused (cml_linear folds leading dims into its rows) */
    return cml_linear(x, l->weight, l->bias);
}

static const cml_module_ops linear_ops = {"Linear", linear_forward, NULL};

/* A leaf parameter of the given shape, uniform in +-bound, requiring grad. */
static cml_tensor *uniform_param(int ndim, const int64_t *shape, double bound, cml_rng *rng) {
    cml_tensor *t = cml_tensor_empty(ndim, shape, CML_F32, CML_DEVICE_CPU);
    if (t && cml_init_uniform_(t, (float)-bound, (float)bound, rng) != CML_OK) {
        cml_tensor_release(t);
        return NULL;
    }
    cml_tensor_set_requires_grad(t, true);
    return t;
}

cml_module *cml_linear_create(int64_t in_features, int64_t out_features, bool bias, cml_rng *rng) {
    const char *who = "cml_linear_create";
    if (in_features < 1 || out_features < 1) {
        cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= 1", who,
                   in_features < 1 ? "in_features" : "out_features",
                   (long long)(in_features < 1 ? in_features : out_features));
        return NULL;
    }
    if (!rng) {
        cml__error(CML_ERR_INVALID_ARG, "%s: rng must not be NULL", who);
        return NULL;
    }
    linear_module *l = (linear_module *)cml__module_alloc(sizeof *l, &linear_ops, who);
    if (!l) return NULL;
    l->in_features = in_features;
    l->out_features = out_features;
    /* kaiming_uniform(a = sqrt(5)): gain sqrt(1/3), bound gain * sqrt(3 / fan_in) = 1 / sqrt(in). */
    double bound = 1.0 / sqrt((double)in_features);
    int64_t wshape[2] = {out_features, in_features};
    l->weight = uniform_param(2, wshape, bound, rng);
    cml_status s = l->weight ? cml_module_add_param(&l->base, "weight", l->weight) : cml_last_status();
    if (s == CML_OK && bias) {
        l->bias = uniform_param(1, &out_features, bound, rng);
        s = l->bias ? cml_module_add_param(&l->base, "bias", l->bias) : cml_last_status();
    }
    if (s != CML_OK) {
        cml_module_destroy(&l->base);
        return NULL;
    }
    return &l->base;
}

/* ---- activations ------------------------------------------------------------- */

static cml_tensor *relu_forward(cml_module *m, const cml_tensor *x) { return cml_relu(x); }
static cml_tensor *tanh_forward(cml_module *m, const cml_tensor *x) { return cml_tanh(x); }

static const cml_module_ops relu_ops = {"ReLU", relu_forward, NULL};
static const cml_module_ops tanh_ops = {"Tanh", tanh_forward, NULL};

cml_module *cml_relu_create(void) { return cml__module_alloc(sizeof(cml_module), &relu_ops, "cml_relu_create"); }
cml_module *cml_tanh_create(void) { return cml__module_alloc(sizeof(cml_module), &tanh_ops, "cml_tanh_create"); }

typedef struct gelu_module {
    cml_module base;
    cml_gelu_approx approx;
} gelu_module;

static cml_tensor *gelu_forward(cml_module *m, const cml_tensor *x) {
    return cml_gelu(x, ((const gelu_module *)m)->approx);
}

static const cml_module_ops gelu_ops = {"GELU", gelu_forward, NULL};

cml_module *cml_gelu_create(cml_gelu_approx approx) {
    if (approx != CML_GELU_ERF && approx != CML_GELU_TANH) {
        cml__error(CML_ERR_INVALID_ARG, "cml_gelu_create: approx=%d must be CML_GELU_ERF or CML_GELU_TANH", (int)approx);
        return NULL;
    }
    gelu_module *g = (gelu_module *)cml__module_alloc(sizeof *g, &gelu_ops, "cml_gelu_create");
    if (g) g->approx = approx;
    return g ? &g->base : NULL;
}

/* ---- Dropout ------------------------------------------------------------------- */

/* The generator lives in the buffer "rng" (i64 [2]: the {seed, offset} bits of a
 * cml_rng), so that checkpoints save and restore it with the weights and a
 * resumed run draws the same masks. */
typedef struct dropout_module {
    cml_module base;
    float p;
    cml_tensor *rng; /* borrowed: owned by base as a buffer */
} dropout_module;

static cml_tensor *dropout_forward(cml_module *m, const cml_tensor *x) {
    dropout_module *d = (dropout_module *)m;
    cml_rng rng;
    memcpy(&rng, cml_tensor_data(d->rng), sizeof rng);
    cml_tensor *y = cml_dropout(x, d->p, m->training, &rng);
    memcpy(cml_tensor_data(d->rng), &rng, sizeof rng);
    return y;
}

static const cml_module_ops dropout_ops = {"Dropout", dropout_forward, NULL};

cml_module *cml_dropout_create(float p, uint64_t seed) {
    if (!(p >= 0.0f && p < 1.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "cml_dropout_create: p=%g must be in [0, 1)", (double)p);
        return NULL;
    }
    dropout_module *d = (dropout_module *)cml__module_alloc(sizeof *d, &dropout_ops, "cml_dropout_create");
    if (!d) return NULL;
    d->p = p;
    cml_rng rng;
    cml_rng_init(&rng, seed);
    _Static_assert(sizeof rng == 2 * sizeof(int64_t), "cml_rng is two 64-bit words");
    d->rng = cml_tensor_from_host(&rng, 1, (const int64_t[]){2}, CML_I64, CML_DEVICE_CPU);
    if (!d->rng || cml_module_add_buffer(&d->base, "rng", d->rng) != CML_OK) {
        cml_module_destroy(&d->base);
        return NULL;
    }
    return &d->base;
}

/* ---- Flatten --------------------------------------------------------------------- */

static cml_tensor *flatten_forward(cml_module *m, const cml_tensor *x) {
    char buf[160];
    if (x->ndim < 2) {
        cml__error(CML_ERR_SHAPE, "cml_flatten_forward: input %s must have at least 2 dims",
                   cml__shape_str(x->ndim, x->shape, buf, sizeof buf));
        return NULL;
    }
    return cml_flatten(x, 1, -1);
}

static const cml_module_ops flatten_ops = {"Flatten", flatten_forward, NULL};

cml_module *cml_flatten_create(void) { return cml__module_alloc(sizeof(cml_module), &flatten_ops, "cml_flatten_create"); }

/* ---- Sequential ------------------------------------------------------------------- */

static cml_tensor *sequential_forward(cml_module *m, const cml_tensor *x) {
    if (m->n_children == 0) return cml_tensor_retain((cml_tensor *)x);
    cml_tensor *cur = NULL;
    for (int i = 0; i < m->n_children; i++) {
        cml_tensor *next = cml_module_forward(m->children[i], i == 0 ? x : cur);
        cml_tensor_release(cur);
        if (!next) {
            char msg[768];
            const char *e = cml_last_error();
            size_t len = strlen(e);
            if (len >= sizeof msg) len = sizeof msg - 1;
            memcpy(msg, e, len);
            msg[len] = '\0';
            const cml_module_ops *ops = m->children[i]->ops;
            cml__error(cml_last_status() != CML_OK ? cml_last_status() : CML_ERR_INTERNAL,
                       "cml_sequential_forward: child %d (%s): %s", i, ops && ops->type ? ops->type : "?", msg);
            return NULL;
        }
        cur = next;
    }
    return cur;
}

static const cml_module_ops sequential_ops = {"Sequential", sequential_forward, NULL};

cml_module *cml_sequential_create(cml_module *const *mods, int n) {
    const char *who = "cml_sequential_create";
    cml_status s = CML_OK;
    if (n < 0 || (n > 0 && !mods)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: n=%d must be >= 0 (and mods not NULL when n > 0)", who, n);
        return NULL;
    }
    /* Ownership of every module passes here even on failure, so check
     * everything first and then destroy each distinct module once. */
    for (int i = 0; i < n && s == CML_OK; i++) {
        if (!mods[i]) s = cml__error(CML_ERR_INVALID_ARG, "%s: mods[%d] is NULL", who, i);
        for (int j = 0; j < i && s == CML_OK; j++)
            if (mods[j] == mods[i]) s = cml__error(CML_ERR_INVALID_ARG, "%s: mods[%d] is the same module as mods[%d]", who, i, j);
    }
    cml_module *m = s == CML_OK ? cml__module_alloc(sizeof(cml_module), &sequential_ops, who) : NULL;
    if (!m) {
        for (int i = 0; i < n; i++) {
            bool dup = false;
            for (int j = 0; j < i && !dup; j++) dup = mods[j] == mods[i];
            if (!dup) cml_module_destroy(mods[i]);
        }
        return NULL;
    }
    int added = 0;
    for (; added < n && s == CML_OK; added++) {
        char name[16];
        snprintf(name, sizeof name, "%d", added);
        s = cml_module_add_child(m, name, mods[added]);
    }
    if (s != CML_OK) {
        for (int i = added; i < n; i++) cml_module_destroy(mods[i]);
        cml_module_destroy(m);
        return NULL;
    }
    return m;
}

/* ---- MLP ------------------------------------------------------------------------- */

cml_module *cml_mlp_create(const int64_t *sizes, int n_sizes, cml_activation act, float dropout, cml_rng *rng) {
    const char *who = "cml_mlp_create";
    if (!sizes || n_sizes < 2) {
        cml__error(CML_ERR_INVALID_ARG, "%s: n_sizes=%d must be >= 2 (and sizes not NULL)", who, n_sizes);
        return NULL;
    }
    for (int i = 0; i < n_sizes; i++) {
        if (sizes[i] < 1) {
            cml__error(CML_ERR_INVALID_ARG, "%s: sizes[%d]=%lld must be >= 1", who, i, (long long)sizes[i]);
            return NULL;
        }
    }
    if (act != CML_ACT_RELU && act != CML_ACT_GELU && act != CML_ACT_TANH) {
        cml__error(CML_ERR_INVALID_ARG, "%s: act=%d is not a cml_activation", who, (int)act);
        return NULL;
    }
    if (!(dropout >= 0.0f && dropout < 1.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: dropout=%g must be in [0, 1)", who, (double)dropout);
        return NULL;
    }
    if (!rng) {
        cml__error(CML_ERR_INVALID_ARG, "%s: rng must not be NULL", who);
        return NULL;
    }
    int n_layers = n_sizes - 1;
    int cap = n_layers + (n_layers - 1) * (dropout > 0.0f ? 2 : 1);
    cml_module **mods = calloc((size_t)cap, sizeof *mods);
    if (!mods) {
        cml__error(CML_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    int n = 0;
    bool ok = true;
    for (int i = 0; i < n_layers && ok; i++) {
        ok = (mods[n++] = cml_linear_create(sizes[i], sizes[i + 1], true, rng)) != NULL;
        if (!ok || i == n_layers - 1) break;
        cml_module *a = act == CML_ACT_RELU   ? cml_relu_create()
                        : act == CML_ACT_GELU ? cml_gelu_create(CML_GELU_ERF)
                                              : cml_tanh_create();
        ok = (mods[n++] = a) != NULL;
        if (ok && dropout > 0.0f) {
            uint64_t seed = (uint64_t)cml_rng_u32(rng) << 32;
            seed |= cml_rng_u32(rng);
            ok = (mods[n++] = cml_dropout_create(dropout, seed)) != NULL;
        }
    }
    cml_module *seq = NULL;
    if (ok) {
        seq = cml_sequential_create(mods, n);
    } else {
        for (int i = 0; i < n; i++) cml_module_destroy(mods[i]);
    }
    free(mods);
    return seq;
}
