/* camel sample: text from a checkpoint of `camel train gpt`. */
#include <stdlib.h>
#include <string.h>

#include "camel/camel.h"
#include "cli.h"

/* Turns the escapes \n, \t and \\ of a command-line prompt into characters (in place). */
static size_t unescape(char *s) {
    size_t k = 0;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] == '\\' && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
            s[k++] = s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
            i++;
        } else {
            s[k++] = s[i];
        }
    }
    s[k] = '\0';
    return k;
}

static void print_char(FILE *f, unsigned char c) {
    if (c == '\n') fputs("\\n", f);
    else if (c == '\t') fputs("\\t", f);
    else if (c >= 32 && c < 127) fputc(c, f);
    else fprintf(f, "\\x%02x", (unsigned)c);
}

/* Checks every prompt character against the vocabulary; explains the first miss. */
static bool check_prompt(const char *prompt, size_t len, const cml_char_vocab *v) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)prompt[i];
        if (v->ids[c] >= 0) continue;
        fprintf(stderr, "camel: the prompt's character '");
        print_char(stderr, c);
        fprintf(stderr, "' (position %zu) is not in the model's vocabulary of %d characters:\n  ", i, v->size);
        for (int k = 0; k < v->size; k++) print_char(stderr, v->chars[k]);
        fprintf(stderr, "\nhint: use only these characters (\\n is a newline)\n");
        return false;
    }
    return true;
}

int cmd_sample(int argc, char **argv) {
    const char *checkpoint = NULL, *prompt_arg = "\\n";
    int64_t tokens = 500, top_k = 0, seed = 0, threads = 0;
    double temperature = 0.8;
    cli_flag flags[] = {
        {"checkpoint", CLI_STRING, &checkpoint, "checkpoint directory written by camel train gpt (required)"},
        {"prompt", CLI_STRING, &prompt_arg, "text to continue; \\n and \\t are newline and tab"},
        {"tokens", CLI_INT, &tokens, "characters to generate"},
        {"temperature", CLI_FLOAT, &temperature, "softmax temperature (> 0; lower is more conservative)"},
        {"top-k", CLI_INT, &top_k, "sample among the k most likely characters (0 = all)"},
        {"seed", CLI_INT, &seed, "seed of the sampler (same seed, same text)"},
        {"threads", CLI_INT, &threads, "CPU threads (0 = OpenMP default)"},
    };
    int rc = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof flags[0]),
                       "camel sample --checkpoint DIR [options]",
                       "Loads a GPT checkpoint of `camel train gpt` (config and vocabulary from its metadata) and "
                       "prints the prompt followed by sampled text, generated with a key/value cache.");
    if (rc) return rc == 1 ? 0 : rc;
    if (!checkpoint) {
        fprintf(stderr, "camel: --checkpoint DIR is required (the --checkpoint-dir of a camel train gpt run)\n");
        return 2;
    }
    if (tokens < 0 || tokens > 100000000 || temperature <= 0 || top_k < 0) {
        fprintf(stderr, "camel: need 0 <= --tokens <= 100000000, --temperature > 0 and --top-k >= 0\n");
        return 2;
    }
    if (threads > 0) cml_set_cpu_threads((int)threads);
    cml_gpt_config cfg;
    cml_char_vocab vocab;
    int64_t step = 0;
    if (gpt_checkpoint_read_meta(checkpoint, &cfg, &vocab, NULL, &step)) return 1;
    char *prompt = malloc(strlen(prompt_arg) + 1);
    if (!prompt) return 1;
    memcpy(prompt, prompt_arg, strlen(prompt_arg) + 1);
    size_t n_prompt = unescape(prompt);
    if (n_prompt == 0) {
        free(prompt);
        fprintf(stderr, "camel: --prompt must not be empty (use \\n to start a new line)\n");
        return 2;
    }
    int status = 0;
    cml_rng rng;
    cml_rng_init(&rng, (uint64_t)seed);
    cml_module *model = NULL;
    int64_t *ids = NULL;
    if (!check_prompt(prompt, n_prompt, &vocab)) {
        status = 1;
        goto done;
    }
    cml_rng init_rng; /* the weights are overwritten by the checkpoint's */
    cml_rng_init(&init_rng, 0);
    model = cml_gpt_create(&cfg, &init_rng);
    if (!model || cml_checkpoint_load(checkpoint, model, NULL, NULL, NULL) != CML_OK) {
        status = cli_fail("loading the checkpoint", NULL);
        goto done;
    }
    ids = malloc((n_prompt + (size_t)tokens) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "camel: out of memory for %lld tokens\n", (long long)tokens);
        status = 1;
        goto done;
    }
    if (cml_char_encode(&vocab, prompt, n_prompt, ids) != CML_OK ||
        cml_gpt_generate(model, ids, (int64_t)n_prompt, tokens, (float)temperature, top_k, &rng, ids) != CML_OK) {
        status = cli_fail("sampling", NULL);
        goto done;
    }
    fprintf(stderr, "model: %lld layers, %lld heads, %lld wide, context %lld, vocabulary %lld; checkpoint step %lld\n",
            (long long)cfg.n_layer, (long long)cfg.n_head, (long long)cfg.n_embd, (long long)cfg.block_size,
            (long long)cfg.vocab_size, (long long)step);
    for (int64_t i = 0; i < (int64_t)n_prompt + tokens; i++) putchar(vocab.chars[ids[i]]);
    putchar('\n');
done:
    free(ids);
    free(prompt);
    cml_module_destroy(model);
    return status;
}
