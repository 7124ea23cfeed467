/* Data: IDX files (MNIST, Fashion-MNIST), batching, normalisation. */
#ifndef CAMEL_DATA_H
#define CAMEL_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "camel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads an IDX file, gzip-compressed or raw (detected from its first bytes).
 * Validates the magic number, the dtype code, the dims (0 < d < 2^31, product
 * matching the payload) and rejects truncated files and trailing bytes with
 * CML_ERR_CORRUPT; a missing file is CML_ERR_IO. Returns a CPU tensor of the
 * file's dtype (u8, i32 or f32) and dims. */
cml_status cml_idx_load(const char *path, cml_tensor **out);

/* Loads MNIST-format data from dir: train-{images-idx3,labels-idx1}-ubyte or
 * t10k-* files, each optionally with a .gz suffix. images: u8 (N, 28, 28),
 * labels: i64 (N), values checked to be in [0, 9]. */
cml_status cml_mnist_load(const char *dir, bool train, cml_tensor **images, cml_tensor **labels);

/* u8 images -> f32 (x / 255 - mean) / std, flattened to (N, prod(rest)) when flatten. */
cml_tensor *cml_normalize_u8(const cml_tensor *images, float mean, float std, bool flatten);

/* Mini-batches of indices over a data set of n samples; shuffled each epoch
 * (Fisher-Yates with a Philox generator) when shuffle is true. */
typedef struct cml_batch_iter cml_batch_iter;

cml_batch_iter *cml_batch_iter_create(int64_t n, int64_t batch, bool shuffle, bool drop_last, uint64_t seed);
/* Starts a new epoch (reshuffles). The first epoch starts at creation. */
void cml_batch_iter_reset(cml_batch_iter *it);
/* The next batch: a borrowed i64 index tensor (valid until the next call), or
 * NULL at the end of the epoch. */
const cml_tensor *cml_batch_iter_next(cml_batch_iter *it);
int64_t cml_batch_iter_batches(const cml_batch_iter *it); /* per epoch */
void cml_batch_iter_destroy(cml_batch_iter *it);

/* ---- text (character level) --------------------------------------------------------- */

/* Reads a whole text file (CML_ERR_IO when missing, CML_ERR_CORRUPT when empty or not
 * valid text). *text is NUL-terminated; the caller frees it with free(). */
cml_status cml_text_load(const char *path, char **text, size_t *len);

/* The sorted set of distinct bytes of a text, and the byte -> id map. */
typedef struct cml_char_vocab {
    int size;
    unsigned char chars[256]; /* id -> byte */
    int16_t ids[256];         /* byte -> id, -1 when absent */
} cml_char_vocab;

cml_status cml_char_vocab_build(cml_char_vocab *v, const char *text, size_t len);
/* Builds a vocabulary from its characters in id order (as saved with a checkpoint). */
cml_status cml_char_vocab_from_chars(cml_char_vocab *v, const unsigned char *chars, int size);
/* ids (len) from text; a byte outside the vocabulary is CML_ERR_INVALID_ARG naming it. */
cml_status cml_char_encode(const cml_char_vocab *v, const char *text, size_t len, int64_t *ids);

/* A batch of B random windows of T + 1 tokens from tokens[0..n): x (B, T) and the
 * next-token targets y (B, T), both i64 CPU tensors; draws from rng. */
cml_status cml_token_windows(const int64_t *tokens, int64_t n, int64_t B, int64_t T, cml_rng *rng,
                             cml_tensor **x, cml_tensor **y);

/* ---- CIFAR-10 ---------------------------------------------------------------------------- */

/* Reads CIFAR-10 binary-format files (records of 1 label byte + 3072 pixel bytes,
 * CHW order): images u8 (N, 3, 32, 32), labels i64 (N). The size must be a multiple of
 * 3073 bytes and labels in 0..9, else CML_ERR_CORRUPT. paths: n_paths files concatenated. */
cml_status cml_cifar10_load(const char *const *paths, int n_paths, cml_tensor **images, cml_tensor **labels);

#ifdef __cplusplus
}
#endif
#endif
