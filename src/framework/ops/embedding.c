/* embedding: rows of a (V, C) table picked by integer indices of any shape.
 *
 * Built from index_select over the flattened indices and a reshape, so the
 * backward is index_select's: cml_index_select_bwd sums the gradient rows in
 * index order (deterministic, repeated indices accumulate). */
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

cml_tensor *cml_embedding(const cml_tensor *weight, const cml_tensor *indices) {
    const char *who = "cml_embedding";
    const cml_tensor *in[2] = {weight, indices};
    if (cml__any_null(who, 2, in)) return NULL;
    if (cml__check_float(who, "weight", weight) != CML_OK || cml__check_same_device(who, weight, indices) != CML_OK)
        return NULL;
    char a[160];
    if (weight->ndim != 2) {
        cml__error(CML_ERR_SHAPE, "%s: weight %s must be 2-d (num_embeddings, dim)", who,
                   cml__shape_str(weight->ndim, weight->shape, a, sizeof a));
        return NULL;
    }
    if (indices->dtype != CML_I64 && indices->dtype != CML_I32) {
        cml__error(CML_ERR_DTYPE, "%s: indices have dtype %s; expected i64 or i32", who,
                   cml_dtype_name(indices->dtype));
        return NULL;
    }
    if (indices->ndim >= CML_MAX_DIMS) {
        cml__error(CML_ERR_SHAPE, "%s: indices have %d dims; at most %d (the result adds one)", who, indices->ndim,
                   CML_MAX_DIMS - 1);
        return NULL;
    }
    int64_t n = cml_tensor_numel(indices);
    cml_tensor *flat = cml_reshape(indices, 1, &n);
    cml_tensor *rows = flat ? cml_index_select(weight, 0, flat) : NULL; /* (n, C); checks the index range */
    cml_tensor_release(flat);
    if (!rows) return NULL;
    int64_t shape[CML_MAX_DIMS];
    memcpy(shape, indices->shape, sizeof(int64_t) * (size_t)indices->ndim);
    shape[indices->ndim] = weight->shape[1];
    cml_tensor *out = cml_reshape(rows, indices->ndim + 1, shape);
    cml_tensor_release(rows);
    return out;
}
