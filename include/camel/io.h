/* Saving and loading: safetensors files and training checkpoints.
 *
 * Files are written atomically (a temporary file in the same directory, fsync,
 * rename, fsync of the directory), so a crash leaves either the old file or the
 * new one, never a torn one. Loads validate everything (header JSON, dtypes,
 * shapes, offsets, lengths) and reject truncated or corrupt files with
 * CML_ERR_CORRUPT and a message naming the file and the problem.
 */
#ifndef CAMEL_IO_H
#define CAMEL_IO_H

#include <stdint.h>

#include "camel/data.h"
#include "camel/nn.h"
#include "camel/optim.h"
#include "camel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors (https://github.com/huggingface/safetensors) ----------------------------- */

typedef struct cml_named_tensor {
    const char *name;
    const cml_tensor *tensor;
} cml_named_tensor;

/* Writes n tensors (any device; copied to the host) with optional string metadata
 * (n_meta key/value pairs, stored under "__metadata__"). Names must be unique. */
cml_status cml_safetensors_save(const char *path, const cml_named_tensor *tensors, int n,
                                const char *const *meta_keys, const char *const *meta_values, int n_meta);

typedef struct cml_safetensors cml_safetensors;

/* Reads and validates a whole file. The caller frees it with cml_safetensors_close. */
cml_status cml_safetensors_open(const char *path, cml_safetensors **out);
int cml_safetensors_count(const cml_safetensors *f);
const char *cml_safetensors_name(const cml_safetensors *f, int i);
/* A new CPU tensor with a copy of the named entry, or NULL (CML_ERR_INVALID_ARG naming it). */
cml_tensor *cml_safetensors_get(const cml_safetensors *f, const char *name);
/* The metadata value for key, or NULL. */
const char *cml_safetensors_meta(const cml_safetensors *f, const char *key);
void cml_safetensors_close(cml_safetensors *f);

/* ---- checkpoints ------------------------------------------------------------------------ */

/* A training checkpoint is a directory holding
 *   model.safetensors   parameters and buffers under their module names, and metadata
 *                       (config text, vocabulary, ...) given by the caller;
 *   state.safetensors   optimizer state ("<kind>.<param name>"), step counts, the RNG
 *                       state and the training step.
 * Saving writes both files atomically, model last-but-committed by renaming the
 * directory's files in order (state first), so a reader never mixes two saves.
 * opt and rng may be NULL (model-only checkpoint). */
typedef struct cml_checkpoint_meta {
    const char *const *keys;
    const char *const *values;
    int n;
} cml_checkpoint_meta;

cml_status cml_checkpoint_save(const char *dir, const cml_module *model, const cml_optim *opt,
                               const cml_rng *rng, int64_t step, cml_checkpoint_meta meta);

/* Loads into an existing model (and optimizer / rng when not NULL): every parameter
 * and buffer must be present with the same shape and dtype (CML_ERR_CORRUPT naming the
 * first mismatch otherwise). *step (may be NULL) receives the saved step. */
cml_status cml_checkpoint_load(const char *dir, cml_module *model, cml_optim *opt, cml_rng *rng,
                               int64_t *step);

/* Opens dir/model.safetensors to read its metadata before building the model. */
cml_status cml_checkpoint_open_model(const char *dir, cml_safetensors **out);

#ifdef __cplusplus
}
#endif
#endif
