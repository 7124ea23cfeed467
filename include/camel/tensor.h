/* Tensors: reference-counted storage, N-d strided views, creation and printing.
 *
 * Ownership: every function that returns a cml_tensor * returns a new
 * reference that the caller owns and gives back with cml_tensor_release().
 * On failure it returns NULL and cml_last_error() says why. Framework
 * functions given a NULL tensor return NULL without overwriting the error,
 * so a chain of calls can be checked once at its end.
 *
 * Views (reshape, view, transpose, permute, slice, expand) share storage with
 * their source and copy nothing; cml_tensor_contiguous copies only when needed.
 */
#ifndef CAMEL_TENSOR_H
#define CAMEL_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "camel/dtype.h"
#include "camel/kernels.h"
#include "camel/runtime.h"
#include "camel/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cml_tensor cml_tensor;

/* ---- lifetime ---------------------------------------------------------------- */

cml_tensor *cml_tensor_retain(cml_tensor *t);   /* returns t */
void cml_tensor_release(cml_tensor *t);         /* NULL is allowed */
/* Releases every non-NULL tensor of an array and sets the entries to NULL. */
void cml_tensor_release_all(cml_tensor **ts, int n);

/* ---- creation (contiguous, row-major) ----------------------------------------- */

cml_tensor *cml_tensor_empty(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev);
cml_tensor *cml_tensor_zeros(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev);
cml_tensor *cml_tensor_ones(int ndim, const int64_t *shape, cml_dtype dt, cml_device dev);
cml_tensor *cml_tensor_full(int ndim, const int64_t *shape, double value, cml_dtype dt, cml_device dev);
/* 0-d tensor holding one value. */
cml_tensor *cml_tensor_scalar(double value, cml_dtype dt, cml_device dev);
/* [start, start+step, ...) below stop (1-d). */
cml_tensor *cml_tensor_arange(double start, double stop, double step, cml_dtype dt, cml_device dev);
/* Uniform in [low, high) / normal(mean, std), drawn from rng (advances it). */
cml_tensor *cml_tensor_rand(int ndim, const int64_t *shape, float low, float high, cml_rng *rng, cml_dtype dt, cml_device dev);
cml_tensor *cml_tensor_randn(int ndim, const int64_t *shape, float mean, float std, cml_rng *rng, cml_dtype dt, cml_device dev);
/* Copies count = numel(shape) elements of dtype dt from a host buffer. */
cml_tensor *cml_tensor_from_host(const void *data, int ndim, const int64_t *shape, cml_dtype dt, cml_device dev);
/* Copies the tensor's elements (row-major order, its own dtype) into a host buffer of nbytes. */
cml_status cml_tensor_to_host(const cml_tensor *t, void *data, size_t nbytes);
/* Copies src's elements into dst (same shape; dtype converted). Not recorded by autograd. */
cml_status cml_tensor_copy_(cml_tensor *dst, const cml_tensor *src);
/* Sets every element (not recorded by autograd). */
cml_status cml_tensor_fill_(cml_tensor *t, double value);

/* ---- properties --------------------------------------------------------------- */

int cml_tensor_ndim(const cml_tensor *t);
int64_t cml_tensor_size(const cml_tensor *t, int dim);   /* negative dim counts from the end */
int64_t cml_tensor_stride(const cml_tensor *t, int dim);
const int64_t *cml_tensor_shape(const cml_tensor *t);    /* ndim entries */
int64_t cml_tensor_numel(const cml_tensor *t);
cml_dtype cml_tensor_dtype(const cml_tensor *t);
cml_device cml_tensor_device(const cml_tensor *t);
bool cml_tensor_is_contiguous(const cml_tensor *t);
cml_layout cml_tensor_layout(const cml_tensor *t);
/* Pointer to the first element of the view (device memory for CUDA tensors). */
void *cml_tensor_data(const cml_tensor *t);
/* Element at a multi-index (host tensors only), as a double. */
double cml_tensor_item_at(const cml_tensor *t, const int64_t *index);
/* The single element of a one-element tensor. */
double cml_tensor_item(const cml_tensor *t);

/* ---- views (no copy; share storage) ---------------------------------------- */

/* Reshape: a view when the strides allow it, otherwise a contiguous copy. One
 * entry of shape may be -1 (inferred). */
cml_tensor *cml_reshape(const cml_tensor *t, int ndim, const int64_t *shape);
/* Like reshape but fails (CML_ERR_SHAPE) instead of copying. */
cml_tensor *cml_view(const cml_tensor *t, int ndim, const int64_t *shape);
cml_tensor *cml_transpose(const cml_tensor *t, int dim0, int dim1);
cml_tensor *cml_permute(const cml_tensor *t, const int *dims);
/* Elements start, start+step, ... below stop along dim (Python slice rules for
 * negative start/stop; step >= 1). */
cml_tensor *cml_slice(const cml_tensor *t, int dim, int64_t start, int64_t stop, int64_t step);
/* Broadcasts size-1 dims (and new leading dims) to shape, with stride 0. */
cml_tensor *cml_expand(const cml_tensor *t, int ndim, const int64_t *shape);
cml_tensor *cml_unsqueeze(const cml_tensor *t, int dim);
cml_tensor *cml_squeeze(const cml_tensor *t, int dim);
cml_tensor *cml_flatten(const cml_tensor *t, int start_dim, int end_dim);
/* A contiguous tensor with the same values: t itself (retained) when it already is. */
cml_tensor *cml_contiguous(const cml_tensor *t);
/* A copy with another dtype (or t retained when it already has it). */
cml_tensor *cml_to_dtype(const cml_tensor *t, cml_dtype dt);
/* A copy on another device (or t retained when it already is there). */
cml_tensor *cml_tensor_to(const cml_tensor *t, cml_device dev);
/* A new contiguous tensor with a copy of the data (recorded by autograd). */
cml_tensor *cml_clone(const cml_tensor *t);

/* ---- printing ------------------------------------------------------------------- */

/* Prints shape, dtype, device and values (NumPy style; long dims elided with "..."). */
void cml_tensor_print(const cml_tensor *t, FILE *f);
/* Writes "f32[2, 3]" into buf. */
const char *cml_tensor_describe(const cml_tensor *t, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
