/* NumPy broadcasting: shape rules, stride-0 layouts and the reverse (summing
 * a gradient back to an input's shape). */
#include <string.h>

#include "camel/ops.h"
#include "framework/tensor_impl.h"

cml_status cml__broadcast_shapes(const char *who, int na, const int64_t *a, int nb, const int64_t *b,
                                 int *nout, int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[160], sb[160];
            return cml__error(CML_ERR_SHAPE, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", who,
                              cml__shape_str(na, a, sa, sizeof sa), cml__shape_str(nb, b, sb, sizeof sb), i,
                              (long long)da, (long long)db);
        }
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return CML_OK;
}

cml_layout cml__broadcast_layout(const cml_tensor *t, int ndim, const int64_t *shape) {
    cml_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = ndim;
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        l.shape[i] = shape[i];
        if (i < lead) l.stride[i] = 0;
        else l.stride[i] = (t->shape[i - lead] == 1 && shape[i] != 1) ? 0 : t->stride[i - lead];
    }
    return l;
}

cml_tensor *cml__sum_to_shape(const cml_tensor *grad, int ndim, const int64_t *shape) {
    int dims[CML_MAX_DIMS], nd = 0;
    int lead = grad->ndim - ndim;
    for (int i = 0; i < grad->ndim; i++)
        if (i < lead || (shape[i - lead] == 1 && grad->shape[i] != 1)) dims[nd++] = i;
    if (nd == 0) return cml_reshape(grad, ndim, shape);
    cml_tensor *s = cml_sum(grad, dims, nd, true);
    cml_tensor *r = cml_reshape(s, ndim, shape);
    cml_tensor_release(s);
    return r;
}
