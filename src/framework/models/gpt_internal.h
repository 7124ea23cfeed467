/* Internal: pieces shared by gpt.c (the model) and gpt_generate.c (sampling with a
 * key/value cache), and a generation entry point for tests. */
#ifndef CML_FRAMEWORK_MODELS_GPT_INTERNAL_H
#define CML_FRAMEWORK_MODELS_GPT_INTERNAL_H

#include <stdbool.h>

#include "camel/gpt.h"

/* Every LayerNorm of the model uses this epsilon (GPT-2's). */
#define CML__GPT_LN_EPS 1e-5f

/* cml_gpt_generate with two testing knobs: use_cache = false recomputes every
 * step with the module's forward over the whole (windowed) prefix instead of the
 * key/value cache, and logits_out (n_new x vocab, may be NULL) receives the logits
 * each new token was sampled from (before temperature and top-k). Both paths use
 * the same context window: the last block_size tokens of the prompt first, and
 * when the sequence outgrows the window, the last block_size / 2 tokens (at least
 * 1) start a new one. */
cml_status cml__gpt_generate_ex(cml_module *gpt, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                                float temperature, int64_t top_k, cml_rng *rng, int64_t *out, bool use_cache,
                                float *logits_out);

#endif
