/* GPT-2 architecture language models: token + position embeddings, pre-LN
 * transformer blocks (LayerNorm -> causal self-attention -> residual, LayerNorm ->
 * MLP 4C with GELU (tanh) -> residual), a final LayerNorm and an output head tied to
 * the token embedding. GPT-2 initialization: N(0, 0.02), residual projections scaled
 * by 1/sqrt(2 n_layer), biases 0, LayerNorm 1/0. */
#ifndef CAMEL_GPT_H
#define CAMEL_GPT_H

#include <stdint.h>

#include "camel/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cml_gpt_config {
    int64_t n_layer, n_head, n_embd, block_size, vocab_size;
    float dropout;
} cml_gpt_config;

/* "char-tiny" (2/4/128, context 64, vocab 65: a run of minutes on the CPU), "char-mini" (6/6/384, context 256, vocab 65),
 * "gpt2-124m" (12/12/768, context 1024, vocab 50257). */
cml_status cml_gpt_preset(const char *name, cml_gpt_config *out);
/* Validates a config (n_embd divisible by n_head, sizes >= 1). */
cml_status cml_gpt_config_check(const cml_gpt_config *c);

/* The model's forward maps token ids (B, T) (i64, T <= block_size) to logits (B, T, vocab). */
cml_module *cml_gpt_create(const cml_gpt_config *c, cml_rng *rng);
const cml_gpt_config *cml_gpt_config_of(const cml_module *gpt);
/* The generator the model's dropout draws its masks from (owned by the model; seeded
 * at creation from rng). Trainers save and restore it with their checkpoints so that
 * a resumed run is bitwise identical to an uninterrupted one. NULL (error set) when
 * gpt is not a GPT model. */
cml_rng *cml_gpt_dropout_rng(cml_module *gpt);

/* Mean next-token cross-entropy of the model on (x, y), both (B, T). */
cml_tensor *cml_gpt_loss(cml_module *gpt, const cml_tensor *x, const cml_tensor *y);

/* Appends n_new sampled tokens to prompt[0..n_prompt) (n_prompt >= 1) into out
 * (n_prompt + n_new entries, prompt copied first). temperature > 0; top_k = 0
 * keeps all tokens. Runs without recording gradients, with a key/value cache so
 * each new token costs one position, not the whole prefix. */
cml_status cml_gpt_generate(cml_module *gpt, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                            float temperature, int64_t top_k, cml_rng *rng, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
