/* Sampling from a GPT with a key/value cache.
 *
 * The cached path runs the model's math directly on its parameters (host f32
 * buffers; matrix products through cml_gemm; a model on a GPU is copied to the
 * host for the call, since one token at a time is latency-bound work that the
 * CPU does well at these sizes): each new position appends its keys
 * and values to a per-layer cache (L, block_size, C) and attends over the cached
 * positions, so a token costs one position of work rather than the whole prefix.
 * The prompt is run through the same code as a block of rows (causal within it).
 * The uncached path (for tests) calls the module's forward on the whole window
 * each step; both use the same window policy (gpt_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camel/autograd.h"
#include "camel/gpt.h"
#include "framework/models/gpt_internal.h"
#include "framework/tensor_impl.h"

typedef struct layer_weights {
    const float *ln1_w, *ln1_b, *attn_w, *attn_b, *aproj_w, *aproj_b;
    const float *ln2_w, *ln2_b, *fc_w, *fc_b, *mproj_w, *mproj_b;
} layer_weights;

typedef struct kv_model {
    int64_t L, H, C, D, V, Tmax;
    const float *wte, *wpe, *lnf_w, *lnf_b;
    layer_weights *layers;
    float *k, *v; /* (L, Tmax, C) */
    int64_t len;  /* positions held in the cache */
    float *x, *h, *qkv, *att, *f, *tmp; /* scratch, Tmax rows of C, C, 3C, C, 4C, C */
    cml_ctx *ctx;
    cml_tensor **host; /* host copies of the parameters that live on a device (n_host slots, NULL for the others) */
    int n_host;
} kv_model;

static const char *who = "cml_gpt_generate";

/* The data of parameter `name` (numel elements, f32, contiguous, on the CPU), or
 * NULL: an error unless optional. */
static const float *weight(const cml_param *ps, int n, const char *name, int64_t numel, bool optional,
                           cml_status *s) {
    if (*s != CML_OK) return NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(ps[i].name, name) != 0) continue;
        const cml_tensor *t = ps[i].tensor;
        if (t->dtype != CML_F32 || !cml_tensor_is_contiguous(t) || t->storage->device.type != CML_CPU ||
            cml_tensor_numel(t) != numel) {
            *s = cml__error(CML_ERR_UNSUPPORTED,
                            "%s: parameter \"%s\" must be a contiguous f32 CPU tensor of %lld elements", who, name,
                            (long long)numel);
            return NULL;
        }
        return cml_tensor_data(t);
    }
    if (!optional) *s = cml__error(CML_ERR_INTERNAL, "%s: the model has no parameter \"%s\"", who, name);
    return NULL;
}

static const float *layer_weight(const cml_param *ps, int n, int64_t l, const char *suffix, int64_t numel,
                                 bool optional, cml_status *s) {
    char name[CML_NAME_MAX];
    snprintf(name, sizeof name, "h.%lld.%s", (long long)l, suffix);
    return weight(ps, n, name, numel, optional, s);
}

static void kv_free(kv_model *km) {
    for (int i = 0; i < km->n_host; i++) cml_tensor_release(km->host[i]);
    free(km->host);
    free(km->layers);
    free(km->k);
    free(km->v);
    free(km->x);
    free(km->h);
    free(km->qkv);
    free(km->att);
    free(km->f);
    free(km->tmp);
    memset(km, 0, sizeof *km);
}

static cml_status kv_init(kv_model *km, cml_module *gpt, const cml_gpt_config *c) {
    memset(km, 0, sizeof *km);
    km->L = c->n_layer;
    km->H = c->n_head;
    km->C = c->n_embd;
    km->D = c->n_embd / c->n_head;
    km->V = c->vocab_size;
    km->Tmax = c->block_size;
    km->ctx = cml_ctx_default(CML_DEVICE_CPU);
    if (!km->ctx) return cml_last_status();
    int n = cml_module_parameters(gpt, NULL, 0);
    if (n < 0) return cml_last_status();
    cml_param *ps = calloc((size_t)n, sizeof *ps);
    km->layers = calloc((size_t)km->L, sizeof *km->layers);
    size_t rows = (size_t)km->Tmax, C = (size_t)km->C;
    km->k = malloc((size_t)km->L * rows * C * sizeof(float));
    km->v = malloc((size_t)km->L * rows * C * sizeof(float));
    km->x = malloc(rows * C * sizeof(float));
    km->h = malloc(rows * C * sizeof(float));
    km->qkv = malloc(rows * 3 * C * sizeof(float));
    km->att = malloc(rows * C * sizeof(float));
    km->f = malloc(rows * 4 * C * sizeof(float));
    km->tmp = malloc((rows * C > (size_t)km->V ? rows * C : (size_t)km->V) * sizeof(float));
    cml_status s = CML_OK;
    if (!ps || !km->layers || !km->k || !km->v || !km->x || !km->h || !km->qkv || !km->att || !km->f || !km->tmp)
        s = cml__error(CML_ERR_OOM, "%s: out of memory for the key/value cache (%lld positions)", who,
                       (long long)km->Tmax);
    if (s == CML_OK) cml_module_parameters(gpt, ps, n);
    /* parameters on a device are read through host copies (ps is this function's table) */
    km->host = s == CML_OK ? calloc((size_t)(n > 0 ? n : 1), sizeof *km->host) : NULL;
    if (s == CML_OK && !km->host) s = cml__error(CML_ERR_OOM, "%s: out of memory", who);
    if (s == CML_OK) km->n_host = n;
    for (int i = 0; i < n && s == CML_OK; i++) {
        if (ps[i].tensor->storage->device.type == CML_CPU) continue;
        km->host[i] = cml_tensor_to(ps[i].tensor, CML_DEVICE_CPU);
        if (!km->host[i]) s = cml_last_status();
        else ps[i].tensor = km->host[i];
    }
    int64_t Ce = km->C;
    km->wte = weight(ps, n, "wte.weight", km->V * Ce, false, &s);
    km->wpe = weight(ps, n, "wpe.weight", km->Tmax * Ce, false, &s);
    km->lnf_w = weight(ps, n, "ln_f.weight", Ce, true, &s);
    km->lnf_b = weight(ps, n, "ln_f.bias", Ce, true, &s);
    for (int64_t l = 0; l < km->L && s == CML_OK; l++) {
        layer_weights *w = &km->layers[l];
        w->ln1_w = layer_weight(ps, n, l, "ln_1.weight", Ce, true, &s);
        w->ln1_b = layer_weight(ps, n, l, "ln_1.bias", Ce, true, &s);
        w->attn_w = layer_weight(ps, n, l, "attn.c_attn.weight", 3 * Ce * Ce, false, &s);
        w->attn_b = layer_weight(ps, n, l, "attn.c_attn.bias", 3 * Ce, true, &s);
        w->aproj_w = layer_weight(ps, n, l, "attn.c_proj.weight", Ce * Ce, false, &s);
        w->aproj_b = layer_weight(ps, n, l, "attn.c_proj.bias", Ce, true, &s);
        w->ln2_w = layer_weight(ps, n, l, "ln_2.weight", Ce, true, &s);
        w->ln2_b = layer_weight(ps, n, l, "ln_2.bias", Ce, true, &s);
        w->fc_w = layer_weight(ps, n, l, "mlp.c_fc.weight", 4 * Ce * Ce, false, &s);
        w->fc_b = layer_weight(ps, n, l, "mlp.c_fc.bias", 4 * Ce, true, &s);
        w->mproj_w = layer_weight(ps, n, l, "mlp.c_proj.weight", 4 * Ce * Ce, false, &s);
        w->mproj_b = layer_weight(ps, n, l, "mlp.c_proj.bias", Ce, true, &s);
    }
    free(ps);
    if (s != CML_OK) kv_free(km);
    return s;
}

/* y (M, N) = x (M, K) W^T + b with W (N, K) row-major, b (N) or NULL. */
static cml_status linear(const kv_model *km, float *y, const float *x, const float *w, const float *b, int64_t M,
                         int64_t N, int64_t K) {
    cml_gemm_desc d = cml_gemm_desc_f32(CML_OP_N, CML_OP_T, M, N, K, 1);
    d.bias = b;
    return cml_gemm(km->ctx, &d, y, x, w, NULL);
}

/* LayerNorm of M rows of C; gain/shift may be NULL (1 and 0). */
static void layer_norm(float *y, const float *x, const float *w, const float *b, int64_t M, int64_t C) {
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * C;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < C; c++) mean += xr[c];
        mean /= (double)C;
        for (int64_t c = 0; c < C; c++) var += ((double)xr[c] - mean) * ((double)xr[c] - mean);
        var /= (double)C;
        float rstd = (float)(1.0 / sqrt(var + (double)CML__GPT_LN_EPS)), m = (float)mean;
        for (int64_t c = 0; c < C; c++) {
            float v = (xr[c] - m) * rstd;
            y[r * C + c] = v * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
        }
    }
}

static void gelu_tanh(float *x, int64_t n) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}

/* Causal attention of rows at positions p0 .. p0+M-1 over the layer's cache
 * (keys and values of positions 0 .. p0+M-1 already stored), one pass with a
 * running maximum (online softmax); out (M, C). */
static void attend(const kv_model *km, float *out, const float *qkv, const float *K, const float *Vc, int64_t p0,
                   int64_t M) {
    int64_t C = km->C, D = km->D, H = km->H;
    float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for schedule(static) if (M * H * (p0 + M) * D >= 65536)
    for (int64_t i = 0; i < M * H; i++) {
        int64_t r = i / H, hd = i % H;
        const float *q = qkv + r * 3 * C + hd * D;
        float *o = out + r * C + hd * D;
        for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j <= p0 + r; j++) {
            const float *kj = K + j * C + hd * D, *vj = Vc + j * C + hd * D;
            float s = 0.0f;
            for (int64_t d = 0; d < D; d++) s += q[d] * kj[d];
            s *= scale;
            if (s > mx) {
                float corr = expf(mx - s); /* 0 on the first key */
                for (int64_t d = 0; d < D; d++) o[d] *= corr;
                sum *= corr;
                mx = s;
            }
            float p = expf(s - mx);
            sum += p;
            for (int64_t d = 0; d < D; d++) o[d] += p * vj[d];
        }
        for (int64_t d = 0; d < D; d++) o[d] /= sum;
    }
}

/* Runs M new tokens at positions len .. len+M-1 through the model, appending to
 * the cache; logits (V) of the last one when logits is not NULL. */
static cml_status kv_extend(kv_model *km, const int64_t *tokens, int64_t M, float *logits) {
    int64_t C = km->C, p0 = km->len;
    if (M < 1 || p0 + M > km->Tmax)
        return cml__error(CML_ERR_INTERNAL, "%s: %lld positions do not fit the cache", who, (long long)(p0 + M));
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < C; c++) km->x[r * C + c] = km->wte[tokens[r] * C + c] + km->wpe[(p0 + r) * C + c];
    for (int64_t l = 0; l < km->L; l++) {
        const layer_weights *w = &km->layers[l];
        float *K = km->k + l * km->Tmax * C, *Vc = km->v + l * km->Tmax * C;
        layer_norm(km->h, km->x, w->ln1_w, w->ln1_b, M, C);
        CML_TRY(linear(km, km->qkv, km->h, w->attn_w, w->attn_b, M, 3 * C, C));
        for (int64_t r = 0; r < M; r++) {
            memcpy(K + (p0 + r) * C, km->qkv + r * 3 * C + C, (size_t)C * sizeof(float));
            memcpy(Vc + (p0 + r) * C, km->qkv + r * 3 * C + 2 * C, (size_t)C * sizeof(float));
        }
        attend(km, km->att, km->qkv, K, Vc, p0, M);
        CML_TRY(linear(km, km->tmp, km->att, w->aproj_w, w->aproj_b, M, C, C));
        for (int64_t i = 0; i < M * C; i++) km->x[i] += km->tmp[i];
        layer_norm(km->h, km->x, w->ln2_w, w->ln2_b, M, C);
        CML_TRY(linear(km, km->f, km->h, w->fc_w, w->fc_b, M, 4 * C, C));
        gelu_tanh(km->f, M * 4 * C);
        CML_TRY(linear(km, km->tmp, km->f, w->mproj_w, w->mproj_b, M, C, 4 * C));
        for (int64_t i = 0; i < M * C; i++) km->x[i] += km->tmp[i];
    }
    km->len = p0 + M;
    if (!logits) return CML_OK;
    layer_norm(km->h, km->x + (M - 1) * C, km->lnf_w, km->lnf_b, 1, C);
    return linear(km, logits, km->h, km->wte, NULL, 1, km->V, C);
}

/* Logits of the last of tokens[0..n) by the module's forward (the uncached path), on the model's device. */
static cml_status forward_logits(cml_module *gpt, const int64_t *tokens, int64_t n, int64_t V, float *logits) {
    cml_param first;
    cml_device dev = cml_module_parameters(gpt, &first, 1) >= 1 ? cml_tensor_device(first.tensor) : CML_DEVICE_CPU;
    cml_tensor *x = cml_tensor_from_host(tokens, 2, (const int64_t[]){1, n}, CML_I64, dev);
    cml_tensor *y = x ? cml_module_forward(gpt, x) : NULL;
    cml_tensor *last = y ? cml_slice(y, 1, n - 1, n, 1) : NULL;
    cml_status s = last ? cml_tensor_to_host(last, logits, (size_t)V * sizeof(float)) : cml_last_status();
    cml_tensor_release_all((cml_tensor *[]){x, y, last}, 3);
    return s;
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Samples an id from softmax(logits / temperature) restricted to the top_k largest
 * logits (ties with the k-th largest kept), with one uniform draw. */
static int64_t sample(const float *logits, int64_t V, float temperature, int64_t top_k, float *work, cml_rng *rng) {
    float threshold = -INFINITY, mx = -INFINITY;
    if (top_k > 0 && top_k < V) {
        memcpy(work, logits, (size_t)V * sizeof(float));
        qsort(work, (size_t)V, sizeof(float), cmp_desc);
        threshold = work[top_k - 1];
    }
    for (int64_t i = 0; i < V; i++)
        if (logits[i] >= threshold && logits[i] > mx) mx = logits[i];
    double total = 0;
    for (int64_t i = 0; i < V; i++) {
        work[i] = logits[i] >= threshold ? expf((logits[i] - mx) / temperature) : 0.0f;
        total += work[i];
    }
    double u = (double)cml_rng_uniform(rng) * total, cum = 0;
    int64_t last = 0;
    for (int64_t i = 0; i < V; i++) {
        if (work[i] <= 0.0f) continue;
        cum += work[i];
        last = i;
        if (cum > u) return i;
    }
    return last;
}

cml_status cml__gpt_generate_ex(cml_module *gpt, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                                float temperature, int64_t top_k, cml_rng *rng, int64_t *out, bool use_cache,
                                float *logits_out) {
    const cml_gpt_config *c = cml_gpt_config_of(gpt);
    if (!c) return cml_last_status();
    CML_CHECK_ARG(prompt && rng && out, "%s: prompt, rng and out must not be NULL", who);
    CML_CHECK_ARG(n_prompt >= 1 && n_new >= 0, "%s: n_prompt=%lld must be >= 1 and n_new=%lld >= 0", who,
                  (long long)n_prompt, (long long)n_new);
    CML_CHECK_ARG(temperature > 0.0f && isfinite(temperature), "%s: temperature=%g must be finite and > 0", who,
                  (double)temperature);
    CML_CHECK_ARG(top_k >= 0, "%s: top_k=%lld must be >= 0 (0 keeps every token)", who, (long long)top_k);
    int64_t V = c->vocab_size, Tmax = c->block_size;
    for (int64_t i = 0; i < n_prompt; i++)
        CML_CHECK_ARG(prompt[i] >= 0 && prompt[i] < V, "%s: prompt[%lld]=%lld is not a token id in [0, %lld)", who,
                      (long long)i, (long long)prompt[i], (long long)V);
    memmove(out, prompt, (size_t)n_prompt * sizeof(int64_t));
    if (n_new == 0) return CML_OK;

    kv_model km;
    memset(&km, 0, sizeof km);
    float *logits = malloc((size_t)V * sizeof(float)), *work = malloc((size_t)V * sizeof(float));
    if (!logits || !work) {
        free(logits);
        free(work);
        return cml__error(CML_ERR_OOM, "%s: out of memory", who);
    }
    cml_status s = use_cache ? kv_init(&km, gpt, c) : CML_OK;
    bool prev_grad = cml_set_grad_enabled(false), prev_training = gpt->training;
    cml_module_train(gpt, false);

    /* The window is out[start .. n); the next token is predicted from it. */
    int64_t n = n_prompt, start = n_prompt > Tmax ? n_prompt - Tmax : 0;
    int64_t keep = Tmax / 2 > 0 ? Tmax / 2 : 1;
    bool refill = true; /* the cache must be (re)built from the whole window */
    for (int64_t i = 0; i < n_new && s == CML_OK; i++) {
        if (n - start > Tmax) {
            start = n - keep;
            refill = true;
        }
        if (!use_cache) {
            s = forward_logits(gpt, out + start, n - start, V, logits);
        } else if (refill) {
            km.len = 0;
            s = kv_extend(&km, out + start, n - start, logits);
        } else {
            s = kv_extend(&km, out + n - 1, 1, logits);
        }
        refill = false;
        if (s != CML_OK) break;
        if (logits_out) memcpy(logits_out + i * V, logits, (size_t)V * sizeof(float));
        out[n++] = sample(logits, V, temperature, top_k, work, rng);
    }

    cml_module_train(gpt, prev_training);
    cml_set_grad_enabled(prev_grad);
    kv_free(&km);
    free(logits);
    free(work);
    return s;
}
