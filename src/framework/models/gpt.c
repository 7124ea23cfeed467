/* GPT-2 architecture language model (nanoGPT's layout and parameter names).
 *
 *   gpt            "wte" Embedding (V, C), "wpe" Embedding (block_size, C),
 *                  "h" Sequential of n_layer Blocks, "ln_f" LayerNorm(C);
 *                  logits = ln_f(h) @ wte^T (the head is tied to wte: one parameter)
 *   Block          x = x + drop(attn(ln_1(x)));  x = x + mlp(ln_2(x))
 *                  children "ln_1", "attn" (CausalSelfAttention: "c_attn", "c_proj"),
 *                  "ln_2", "mlp"
 *   MLP            "c_fc" Linear(C, 4C) -> GELU (tanh) -> "c_proj" Linear(4C, C) -> dropout
 *
 * So parameters are named like GPT-2's checkpoints without the "transformer."
 * prefix: "wte.weight", "h.0.ln_1.weight", "h.0.attn.c_attn.weight",
 * "h.0.mlp.c_proj.bias", "ln_f.weight".
 *
 * Dropout (embeddings, attention output, MLP output) draws from one generator
 * owned by the model (cml_gpt_dropout_rng), so a trainer can checkpoint it. The
 * attention module is created without dropout of its own; its output dropout is
 * applied here. There is no dropout on the attention weights (the attention op
 * never materializes them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/autograd.h"
#include "camel/gpt.h"
#include "framework/models/gpt_internal.h"
#include "framework/nn/nn_impl.h"
#include "framework/tensor_impl.h"

/* ---- presets and config ------------------------------------------------------- */

typedef struct gpt_preset {
    const char *name;
    cml_gpt_config config;
} gpt_preset;

static const gpt_preset presets[] = {
    {"char-tiny", {2, 4, 128, 64, 65, 0.0f}}, /* tuned for minutes on 2 CPU cores: see cmd_train_gpt.c */
    {"char-mini", {6, 6, 384, 256, 65, 0.2f}},
    {"gpt2-124m", {12, 12, 768, 1024, 50257, 0.0f}},
};

cml_status cml_gpt_preset(const char *name, cml_gpt_config *out) {
    CML_CHECK_ARG(name && out, "cml_gpt_preset: name and out must not be NULL");
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i].config;
            return CML_OK;
        }
    }
    return cml__error(CML_ERR_INVALID_ARG, "cml_gpt_preset: unknown preset \"%s\" (known: char-tiny, char-mini, gpt2-124m)",
                      name);
}

cml_status cml_gpt_config_check(const cml_gpt_config *c) {
    const char *who = "cml_gpt_config_check";
    CML_CHECK_ARG(c, "%s: config must not be NULL", who);
    CML_CHECK_ARG(c->n_layer >= 1 && c->n_head >= 1 && c->n_embd >= 1 && c->block_size >= 1 && c->vocab_size >= 1,
                  "%s: n_layer=%lld, n_head=%lld, n_embd=%lld, block_size=%lld and vocab_size=%lld must all be >= 1",
                  who, (long long)c->n_layer, (long long)c->n_head, (long long)c->n_embd, (long long)c->block_size,
                  (long long)c->vocab_size);
    CML_CHECK_ARG(c->n_embd % c->n_head == 0, "%s: n_embd=%lld must be divisible by n_head=%lld", who,
                  (long long)c->n_embd, (long long)c->n_head);
    CML_CHECK_ARG(c->n_layer <= 1000 && c->n_embd <= (1 << 20) && c->block_size <= (1 << 24) &&
                      c->vocab_size <= (1 << 30),
                  "%s: sizes out of range (n_layer <= 1000, n_embd <= 2^20, block_size <= 2^24, vocab_size <= 2^30)",
                  who);
    CML_CHECK_ARG(c->dropout >= 0.0f && c->dropout < 1.0f, "%s: dropout=%g must be in [0, 1)", who,
                  (double)c->dropout);
    return CML_OK;
}

/* ---- modules -------------------------------------------------------------------- */

typedef struct gpt_model {
    cml_module base;
    cml_gpt_config cfg;
    cml_module *h, *ln_f;      /* borrowed children */
    cml_tensor *wte_w, *wpe_w; /* borrowed parameters of the "wte" and "wpe" children */
    cml_rng drop_rng;
} gpt_model;

typedef struct gpt_block {
    cml_module base;
    cml_module *ln_1, *attn, *ln_2, *mlp;
    float dropout;
    cml_rng *rng; /* the model's dropout generator */
} gpt_block;

typedef struct gpt_mlp {
    cml_module base;
    cml_module *c_fc, *c_proj;
    float dropout;
    cml_rng *rng;
} gpt_mlp;

/* Applies dropout to t (consumed) when training with p > 0. */
static cml_tensor *drop(cml_tensor *t, float p, bool training, cml_rng *rng) {
    if (!t || !training || p <= 0.0f) return t;
    cml_tensor *y = cml_dropout(t, p, true, rng);
    cml_tensor_release(t);
    return y;
}

static cml_tensor *mlp_forward(cml_module *m, const cml_tensor *x) {
    gpt_mlp *p = (gpt_mlp *)m;
    cml_tensor *h = cml_module_forward(p->c_fc, x);
    cml_tensor *g = cml_gelu(h, CML_GELU_TANH);
    cml_tensor_release(h);
    cml_tensor *y = cml_module_forward(p->c_proj, g);
    cml_tensor_release(g);
    return drop(y, p->dropout, m->training, p->rng);
}

static cml_tensor *block_forward(cml_module *m, const cml_tensor *x) {
    gpt_block *b = (gpt_block *)m;
    cml_tensor *h = cml_module_forward(b->ln_1, x);
    cml_tensor *a = drop(cml_module_forward(b->attn, h), b->dropout, m->training, b->rng);
    cml_tensor_release(h);
    cml_tensor *x1 = cml_add(x, a);
    cml_tensor_release(a);
    h = cml_module_forward(b->ln_2, x1);
    cml_tensor *f = cml_module_forward(b->mlp, h);
    cml_tensor_release(h);
    cml_tensor *y = cml_add(x1, f);
    cml_tensor_release_all((cml_tensor *[]){x1, f}, 2);
    return y;
}

static cml_tensor *gpt_forward(cml_module *m, const cml_tensor *idx) {
    gpt_model *g = (gpt_model *)m;
    const char *who = "cml_gpt_forward";
    char buf[160];
    if (idx->ndim != 2 || (idx->dtype != CML_I64 && idx->dtype != CML_I32) || idx->shape[0] < 1 ||
        idx->shape[1] < 1 || idx->shape[1] > g->cfg.block_size) {
        cml__error(idx->dtype != CML_I64 && idx->dtype != CML_I32 ? CML_ERR_DTYPE : CML_ERR_SHAPE, "%s: token ids must be an i64 or i32 tensor (B, T) with 1 <= T <= block_size=%lld, got %s %s", who,
                   (long long)g->cfg.block_size, cml_dtype_name(idx->dtype),
                   cml__shape_str(idx->ndim, idx->shape, buf, sizeof buf));
        return NULL;
    }
    int64_t B = idx->shape[0], T = idx->shape[1], C = g->cfg.n_embd;
    cml_tensor *tok = cml_embedding(g->wte_w, idx); /* (B, T, C) */
    cml_tensor *pos_idx = cml_tensor_arange(0, (double)T, 1, CML_I64, cml_tensor_device(g->wpe_w));
    cml_tensor *pos = pos_idx ? cml_embedding(g->wpe_w, pos_idx) : NULL; /* (T, C) */
    cml_tensor *x = tok && pos ? cml_add(tok, pos) : NULL;
    cml_tensor_release_all((cml_tensor *[]){tok, pos_idx, pos}, 3);
    x = drop(x, g->cfg.dropout, m->training, &g->drop_rng);
    cml_tensor *hx = x ? cml_module_forward(g->h, x) : NULL;
    cml_tensor_release(x);
    cml_tensor *hn = hx ? cml_module_forward(g->ln_f, hx) : NULL;
    cml_tensor_release(hx);
    /* The tied head: one (B*T, C) x (C, V) GEMM with wte^T as a transposed view. */
    cml_tensor *h2 = hn ? cml_reshape(hn, 2, (const int64_t[]){B * T, C}) : NULL;
    cml_tensor_release(hn);
    cml_tensor *wt = cml_transpose(g->wte_w, 0, 1);
    cml_tensor *logits2 = h2 && wt ? cml_matmul(h2, wt) : NULL;
    cml_tensor_release_all((cml_tensor *[]){h2, wt}, 2);
    cml_tensor *logits = logits2 ? cml_reshape(logits2, 3, (const int64_t[]){B, T, g->cfg.vocab_size}) : NULL;
    cml_tensor_release(logits2);
    return logits;
}

static const cml_module_ops gpt_ops = {"GPT", gpt_forward, NULL};
static const cml_module_ops block_ops = {"Block", block_forward, NULL};
static const cml_module_ops mlp_ops = {"MLP", mlp_forward, NULL};

/* Adds child (created by the caller; NULL when its creation failed, error set) to m. */
static cml_status add_child(cml_module *m, const char *name, cml_module *child, cml_module **slot) {
    if (!child)
        return cml_last_status() != CML_OK ? cml_last_status()
                                           : cml__error(CML_ERR_INTERNAL, "cml_gpt_create: creating \"%s\" failed", name);
    cml_status s = cml_module_add_child(m, name, child);
    if (s == CML_OK && slot) *slot = child;
    return s;
}

static cml_module *mlp_create(int64_t C, float dropout, cml_rng *init_rng, cml_rng *drop_rng) {
    gpt_mlp *p = (gpt_mlp *)cml__module_alloc(sizeof *p, &mlp_ops, "cml_gpt_create");
    if (!p) return NULL;
    p->dropout = dropout;
    p->rng = drop_rng;
    cml_status s = add_child(&p->base, "c_fc", cml_linear_create(C, 4 * C, true, init_rng), &p->c_fc);
    if (s == CML_OK) s = add_child(&p->base, "c_proj", cml_linear_create(4 * C, C, true, init_rng), &p->c_proj);
    if (s != CML_OK) {
        cml_module_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

static cml_module *block_create(const cml_gpt_config *c, cml_rng *init_rng, cml_rng *drop_rng) {
    gpt_block *b = (gpt_block *)cml__module_alloc(sizeof *b, &block_ops, "cml_gpt_create");
    if (!b) return NULL;
    b->dropout = c->dropout;
    b->rng = drop_rng;
    cml_status s = add_child(&b->base, "ln_1", cml_layernorm_create(c->n_embd, CML__GPT_LN_EPS), &b->ln_1);
    if (s == CML_OK)
        s = add_child(&b->base, "attn", cml_causal_self_attention_create(c->n_embd, c->n_head, 0.0f, init_rng),
                      &b->attn);
    if (s == CML_OK) s = add_child(&b->base, "ln_2", cml_layernorm_create(c->n_embd, CML__GPT_LN_EPS), &b->ln_2);
    if (s == CML_OK) s = add_child(&b->base, "mlp", mlp_create(c->n_embd, c->dropout, init_rng, drop_rng), &b->mlp);
    if (s != CML_OK) {
        cml_module_destroy(&b->base);
        return NULL;
    }
    return &b->base;
}

static cml_tensor *own_param(const cml_module *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->param_names[i], name) == 0) return m->params[i];
    cml__error(CML_ERR_INTERNAL, "cml_gpt_create: the %s module has no parameter \"%s\"",
               m->ops && m->ops->type ? m->ops->type : "?", name);
    return NULL;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* GPT-2 initialization, in parameter order from rng: biases 0, LayerNorm gains 1,
 * residual projections (c_proj) N(0, 0.02 / sqrt(2 n_layer)), everything else
 * (embeddings, c_attn, c_fc) N(0, 0.02). */
static cml_status gpt_init(gpt_model *g, cml_rng *rng) {
    int n = cml_module_parameters(&g->base, NULL, 0);
    if (n < 0) return cml_last_status();
    cml_param *ps = calloc((size_t)n, sizeof *ps);
    if (!ps) return cml__error(CML_ERR_OOM, "cml_gpt_create: out of memory");
    cml_module_parameters(&g->base, ps, n);
    cml_status s = CML_OK;
    float proj_std = 0.02f / sqrtf(2.0f * (float)g->cfg.n_layer);
    for (int i = 0; i < n && s == CML_OK; i++) {
        const char *name = ps[i].name;
        bool is_ln = strncmp(name, "ln_f.", 5) == 0 || strstr(name, ".ln_1.") || strstr(name, ".ln_2.");
        if (ends_with(name, ".bias")) s = cml_tensor_fill_(ps[i].tensor, 0.0);
        else if (is_ln) s = cml_tensor_fill_(ps[i].tensor, 1.0);
        else if (ends_with(name, "c_proj.weight")) s = cml_init_normal_(ps[i].tensor, 0.0f, proj_std, rng);
        else s = cml_init_normal_(ps[i].tensor, 0.0f, 0.02f, rng);
    }
    free(ps);
    return s;
}

static uint64_t draw_seed(cml_rng *rng) {
    uint64_t hi = cml_rng_u32(rng);
    return hi << 32 | cml_rng_u32(rng);
}

cml_module *cml_gpt_create(const cml_gpt_config *c, cml_rng *rng) {
    if (cml_gpt_config_check(c) != CML_OK) return NULL;
    if (!rng) {
        cml__error(CML_ERR_INVALID_ARG, "cml_gpt_create: rng must not be NULL");
        return NULL;
    }
    gpt_model *g = (gpt_model *)cml__module_alloc(sizeof *g, &gpt_ops, "cml_gpt_create");
    if (!g) return NULL;
    g->cfg = *c;
    cml_rng_init(&g->drop_rng, draw_seed(rng));
    /* The layers' own initializers draw from a scratch generator; gpt_init then
     * draws the GPT-2 initialization from rng, so the weights depend only on it. */
    cml_rng scratch;
    cml_rng_init(&scratch, draw_seed(rng));
    cml_module *wte = NULL, *wpe = NULL;
    cml_status s = add_child(&g->base, "wte", cml_embedding_create(c->vocab_size, c->n_embd, &scratch), &wte);
    if (s == CML_OK) s = add_child(&g->base, "wpe", cml_embedding_create(c->block_size, c->n_embd, &scratch), &wpe);
    if (s == CML_OK) {
        cml_module **blocks = calloc((size_t)c->n_layer, sizeof *blocks);
        int64_t made = 0;
        if (!blocks) s = cml__error(CML_ERR_OOM, "cml_gpt_create: out of memory");
        for (; s == CML_OK && made < c->n_layer; made++) {
            blocks[made] = block_create(c, &scratch, &g->drop_rng);
            if (!blocks[made]) s = cml_last_status() != CML_OK ? cml_last_status() : CML_ERR_INTERNAL;
        }
        if (s == CML_OK) {
            s = add_child(&g->base, "h", cml_sequential_create(blocks, (int)c->n_layer), &g->h);
        } else if (blocks) {
            for (int64_t i = 0; i < made; i++) cml_module_destroy(blocks[i]);
        }
        free(blocks);
    }
    if (s == CML_OK) s = add_child(&g->base, "ln_f", cml_layernorm_create(c->n_embd, CML__GPT_LN_EPS), &g->ln_f);
    if (s == CML_OK) {
        g->wte_w = own_param(wte, "weight");
        g->wpe_w = own_param(wpe, "weight");
        if (!g->wte_w || !g->wpe_w) s = cml_last_status();
    }
    if (s == CML_OK) s = gpt_init(g, rng);
    if (s != CML_OK) {
        cml_module_destroy(&g->base);
        return NULL;
    }
    return &g->base;
}

static gpt_model *as_gpt(const cml_module *m, const char *who) {
    if (!m || m->ops != &gpt_ops) {
        cml__error(CML_ERR_INVALID_ARG, "%s: the module must be a GPT made by cml_gpt_create%s%s%s", who,
                   m && m->ops && m->ops->type ? " (got " : "", m && m->ops && m->ops->type ? m->ops->type : "",
                   m && m->ops && m->ops->type ? ")" : "");
        return NULL;
    }
    return (gpt_model *)m;
}

const cml_gpt_config *cml_gpt_config_of(const cml_module *gpt) {
    gpt_model *g = as_gpt(gpt, "cml_gpt_config_of");
    return g ? &g->cfg : NULL;
}

cml_rng *cml_gpt_dropout_rng(cml_module *gpt) {
    gpt_model *g = as_gpt(gpt, "cml_gpt_dropout_rng");
    return g ? &g->drop_rng : NULL;
}

cml_tensor *cml_gpt_loss(cml_module *gpt, const cml_tensor *x, const cml_tensor *y) {
    const char *who = "cml_gpt_loss";
    gpt_model *g = as_gpt(gpt, who);
    if (!g) return NULL;
    if (cml__any_null(who, 2, (const cml_tensor *const[]){x, y})) return NULL;
    char bx[96], by[96];
    if (x->ndim != 2 || y->ndim != 2 || x->shape[0] != y->shape[0] || x->shape[1] != y->shape[1]) {
        cml__error(CML_ERR_SHAPE, "%s: inputs %s and targets %s must both be (B, T)", who,
                   cml__shape_str(x->ndim, x->shape, bx, sizeof bx), cml__shape_str(y->ndim, y->shape, by, sizeof by));
        return NULL;
    }
    int64_t N = x->shape[0] * x->shape[1];
    cml_tensor *logits = cml_module_forward(gpt, x);
    cml_tensor *l2 = logits ? cml_reshape(logits, 2, (const int64_t[]){N, g->cfg.vocab_size}) : NULL;
    cml_tensor *y1 = cml_reshape(y, 1, &N);
    cml_tensor *loss = l2 && y1 ? cml_cross_entropy(l2, y1, -100, CML_REDUCTION_MEAN) : NULL;
    cml_tensor_release_all((cml_tensor *[]){logits, l2, y1}, 3);
    return loss;
}

cml_status cml_gpt_generate(cml_module *gpt, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                            float temperature, int64_t top_k, cml_rng *rng, int64_t *out) {
    return cml__gpt_generate_ex(gpt, prompt, n_prompt, n_new, temperature, top_k, rng, out, true, NULL);
}
