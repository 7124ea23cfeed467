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

#ifdef __cplusplus
}
#endif
#endif
