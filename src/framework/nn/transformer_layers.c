/* Transformer layers: Embedding, LayerNorm, CausalSelfAttention (GPT-2) and Residual. */
#include <math.h>
#include <stdlib.h>

#include "camel/autograd.h"
#include "camel/nn.h"
#include "framework/nn/nn_impl.h"
#include "framework/tensor_impl.h"

/* A zeroed module struct of `size` bytes (cml_module first) in training mode. */
/* A leaf f32 parameter that requires grad, filled with `value` (or N(0, 1) from rng when rng is set). */
static cml_tensor *make_param(int ndim, const int64_t *shape, double value, cml_rng *rng) {
    cml_tensor *t = rng ? cml_tensor_empty(ndim, shape, CML_F32, CML_DEVICE_CPU)
                        : cml_tensor_full(ndim, shape, value, CML_F32, CML_DEVICE_CPU);
    if (t && rng && cml_init_normal_(t, 0.0f, 1.0f, rng) != CML_OK) {
        cml_tensor_release(t);
        return NULL;
    }
    cml_tensor_set_requires_grad(t, true);
    return t;
}

/* ---- Embedding ------------------------------------------------------------------ */

typedef struct embedding_module {
    cml_module base;
    cml_tensor *weight; /* (num, dim), borrowed from base.params */
} embedding_module;

static cml_tensor *embedding_forward(cml_module *m, const cml_tensor *x) {
    return cml_embedding(((const embedding_module *)m)->weight, x);
}

static const cml_module_ops embedding_ops = {"Embedding", embedding_forward, NULL};

cml_module *cml_embedding_create(int64_t num, int64_t dim, cml_rng *rng) {
    const char *who = "cml_embedding_create";
    if (num < 1 || dim < 1) {
        cml__error(CML_ERR_INVALID_ARG, "%s: %s=%lld must be >= 1", who, num < 1 ? "num" : "dim",
                   (long long)(num < 1 ? num : dim));
        return NULL;
    }
    if (!rng) {
        cml__error(CML_ERR_INVALID_ARG, "%s: rng must not be NULL", who);
        return NULL;
    }
    embedding_module *e = (embedding_module *)cml__module_alloc(sizeof *e, &embedding_ops, who);
    if (!e) return NULL;
    e->weight = make_param(2, (const int64_t[]){num, dim}, 0.0, rng);
    if ((e->weight ? cml_module_add_param(&e->base, "weight", e->weight) : cml_last_status()) != CML_OK) {
        cml_module_destroy(&e->base);
        return NULL;
    }
    return &e->base;
}

/* ---- LayerNorm ------------------------------------------------------------------ */

typedef struct layernorm_module {
    cml_module base;
    float eps;
    cml_tensor *weight, *bias; /* (dim), borrowed */
} layernorm_module;

static cml_tensor *layernorm_forward(cml_module *m, const cml_tensor *x) {
    const layernorm_module *l = (const layernorm_module *)m;
    return cml_layer_norm(x, l->weight, l->bias, l->eps);
}

static const cml_module_ops layernorm_ops = {"LayerNorm", layernorm_forward, NULL};

cml_module *cml_layernorm_create(int64_t dim, float eps) {
    const char *who = "cml_layernorm_create";
    if (dim < 1) {
        cml__error(CML_ERR_INVALID_ARG, "%s: dim=%lld must be >= 1", who, (long long)dim);
        return NULL;
    }
    if (!(isfinite(eps) && eps >= 0.0f)) {
        cml__error(CML_ERR_INVALID_ARG, "%s: eps=%g must be finite and >= 0", who, (double)eps);
        return NULL;
    }
    layernorm_module *l = (layernorm_module *)cml__module_alloc(sizeof *l, &layernorm_ops, who);
    if (!l) return NULL;
    l->eps = eps;
    l->weight = make_param(1, &dim, 1.0, NULL);
    cml_status s = l->weight ? cml_module_add_param(&l->base, "weight", l->weight) : cml_last_status();
    if (s == CML_OK) {
        l->bias = make_param(1, &dim, 0.0, NULL);
        s = l->bias ? cml_module_add_param(&l->base, "bias", l->bias) : cml_last_status();
    }
    if (s != CML_OK) {
        cml_module_destroy(&l->base);
        return NULL;
    }
    return &l->base;
}

/* ---- CausalSelfAttention -------------------------------------------------------------- */

typedef struct attention_module {
    cml_module base;
    int64_t dim, n_head;
    float dropout;
    cml_rng rng; /* dropout masks */
    cml_module *c_attn, *c_proj; /* borrowed from base.children */
} attention_module;

static cml_tensor *attention_forward(cml_module *m, const cml_tensor *x) {
    attention_module *a = (attention_module *)m;
    char buf[160];
    if (x->ndim != 3 || x->shape[2] != a->dim) {
        cml__error(CML_ERR_SHAPE, "cml_causal_self_attention_forward: input %s must be (B, T, C) with C=%lld",
                   cml__shape_str(x->ndim, x->shape, buf, sizeof buf), (long long)a->dim);
        return NULL;
    }
    const int64_t B = x->shape[0], T = x->shape[1], C = a->dim, H = a->n_head, D = C / H;
    cml_tensor *qkv = cml_module_forward(a->c_attn, x); /* (B, T, 3C) */
    cml_tensor *heads[3] = {NULL, NULL, NULL};          /* q, k, v: (B, T, H, D) views of qkv */
    for (int i = 0; qkv && i < 3; i++) {
        cml_tensor *part = cml_slice(qkv, 2, i * C, (i + 1) * C, 1);
        heads[i] = part ? cml_view(part, 4, (const int64_t[]){B, T, H, D}) : NULL;
        cml_tensor_release(part);
    }
    cml_tensor *y = heads[2] ? cml_attention(heads[0], heads[1], heads[2], true, (float)(1.0 / sqrt((double)D)))
                             : NULL;
    cml_tensor *merged = y ? cml_reshape(y, 3, (const int64_t[]){B, T, C}) : NULL;
    cml_tensor *out = merged ? cml_module_forward(a->c_proj, merged) : NULL;
    cml_tensor_release_all((cml_tensor *[]){qkv, heads[0], heads[1], heads[2], y, merged}, 6);
    if (out && a->dropout > 0.0f) {
        cml_tensor *dropped = cml_dropout(out, a->dropout, m->training, &a->rng);
        cml_tensor_release(out);
        out = dropped;
    }
    return out;
}

static const cml_module_ops attention_ops = {"CausalSelfAttention", attention_forward, NULL};

cml_module *cml_causal_self_attention_create(int64_t dim, int64_t n_head, float dropout, cml_rng *rng) {
    const char *who = "cml_causal_self_attention_create";
    if (dim < 1 || n_head < 1 || dim % n_head != 0) {
        cml__error(CML_ERR_INVALID_ARG, "%s: dim=%lld must be a positive multiple of n_head=%lld (>= 1)", who,
                   (long long)dim, (long long)n_head);
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
    attention_module *a = (attention_module *)cml__module_alloc(sizeof *a, &attention_ops, who);
    if (!a) return NULL;
    a->dim = dim;
    a->n_head = n_head;
    a->dropout = dropout;
    a->c_attn = cml_linear_create(dim, 3 * dim, true, rng);
    cml_status s = a->c_attn ? cml_module_add_child(&a->base, "c_attn", a->c_attn) : cml_last_status();
    if (s == CML_OK) {
        a->c_proj = cml_linear_create(dim, dim, true, rng);
        s = a->c_proj ? cml_module_add_child(&a->base, "c_proj", a->c_proj) : cml_last_status();
    }
    if (s != CML_OK) {
        cml_module_destroy(&a->base);
        return NULL;
    }
    if (dropout > 0.0f) { /* seeded from two words of rng, drawn after the projections' init */
        uint64_t seed = (uint64_t)cml_rng_u32(rng) << 32;
        seed |= cml_rng_u32(rng);
        cml_rng_init(&a->rng, seed);
    }
    return &a->base;
}

/* ---- Residual --------------------------------------------------------------------- */

static cml_tensor *residual_forward(cml_module *m, const cml_tensor *x) {
    cml_tensor *y = cml_module_forward(m->children[0], x);
    cml_tensor *out = y ? cml_add(x, y) : NULL;
    cml_tensor_release(y);
    return out;
}

static const cml_module_ops residual_ops = {"Residual", residual_forward, NULL};

cml_module *cml_residual_create(cml_module *inner) {
    const char *who = "cml_residual_create";
    if (!inner) {
        cml__error(CML_ERR_INVALID_ARG, "%s: inner must not be NULL", who);
        return NULL;
    }
    cml_module *m = cml__module_alloc(sizeof(cml_module), &residual_ops, who);
    if (!m) {
        cml_module_destroy(inner);
        return NULL;
    }
    if (cml_module_add_child(m, "inner", inner) != CML_OK) { /* inner is destroyed by add_child */
        cml_module_destroy(m);
        return NULL;
    }
    return m;
}
